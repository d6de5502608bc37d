//! Where an error is, as Ansible's own errors show it: the file, line and
//! column, then the line before and the line itself with an arrow under the
//! column (`AnsibleError` with the task's data as its object). A task's
//! failure result carries this text, and upstream's Failure condition
//! quotes it, so enka writes it alike.
//!
//! Ansible appends advice for a few common YAML mistakes after the arrow
//! (an unquoted template, a dictionary written inline, an unquoted colon,
//! a half-quoted value, `key=value` on the line before); enka does not.

use std::path::Path;

use super::Location;

/// Ansible's text for an error at `location`, read from the file as it is
/// now; none for a location without a position.
pub fn ansible_excerpt(location: &Location) -> Option<String> {
    let pos = location.pos?;
    let path = std::path::absolute(&location.file).unwrap_or_else(|_| location.file.to_path_buf());
    let mut text = format!(
        "The error appears to be in '{}': line {}, column {}, but may\nbe elsewhere in the file depending on the exact syntax problem.\n",
        path.display(),
        pos.line,
        pos.col
    );
    match offending_lines(&path, pos.line as usize) {
        Ok(Some((previous, target))) => {
            let arrow = " ".repeat((pos.col as usize).saturating_sub(1));
            text.push_str(&format!(
                "\nThe offending line appears to be:\n\n{}\n{}\n{arrow}^ here\n",
                previous.trim_end(),
                target.trim_end()
            ));
        }
        Ok(None) => {}
        Err(Missing::File) => text.push_str("\n(could not open file to display line)"),
        Err(Missing::Line) => {
            text.push_str("\n(specified line no longer in file, maybe it changed?)")
        }
    }
    Some(text)
}

/// 2.19's way of saying where something is (its `Origin:` section): the
/// place, then up to two lines before it and the line, numbered, with a
/// caret under the column; none for a location without a position.
pub fn origin_excerpt(location: &Location) -> Option<String> {
    let pos = location.pos?;
    let path = std::path::absolute(&location.file).unwrap_or_else(|_| location.file.to_path_buf());
    let mut text = format!("Origin: {}:{}:{}\n", path.display(), pos.line, pos.col);
    let Ok(content) = std::fs::read_to_string(&path) else {
        return Some(text);
    };
    let lines: Vec<&str> = content.lines().collect();
    let line = pos.line as usize;
    if line == 0 || line > lines.len() {
        return Some(text);
    }
    let first = line.saturating_sub(2).max(1);
    let width = line.to_string().len();
    text.push('\n');
    for number in first..=line {
        let shown = format!("{number:>width$} {}", lines[number - 1]);
        text.push_str(shown.trim_end());
        text.push('\n');
    }
    let indent = " ".repeat(width + pos.col as usize);
    text.push_str(&format!("{indent}^ column {}\n", pos.col));
    Some(text)
}

enum Missing {
    File,
    Line,
}

/// The line `line` (1-based; the last one when past the end, the nearest
/// one above with text when blank) and the one before it (empty for the
/// first).
fn offending_lines(path: &Path, line: usize) -> Result<Option<(String, String)>, Missing> {
    let content = std::fs::read_to_string(path).map_err(|_| Missing::File)?;
    let lines: Vec<&str> = content.split_inclusive('\n').collect();
    if lines.is_empty() {
        return Err(Missing::Line);
    }
    let mut index = line.saturating_sub(1).min(lines.len() - 1);
    while lines[index].trim().is_empty() {
        if index == 0 {
            return Ok(None);
        }
        index -= 1;
    }
    let previous = if index > 0 { lines[index - 1] } else { "" };
    Ok(Some((previous.to_owned(), lines[index].to_owned())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use enka_yaml::Pos;

    #[test]
    fn the_line_before_the_line_and_an_arrow_under_the_column() {
        let dir = std::env::temp_dir().join(format!("enka-excerpt-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("main.yml");
        std::fs::write(
            &file,
            "- hosts: localhost\n  tasks:\n    - name: Deploy\n\n",
        )
        .unwrap();
        let at = |line, col| Location::new(&Arc::from(file.as_path()), Pos { line, col });
        let text = ansible_excerpt(&at(3, 7)).unwrap();
        assert_eq!(
            text,
            format!(
                "The error appears to be in '{}': line 3, column 7, but may\nbe elsewhere in the file depending on the exact syntax problem.\n\nThe offending line appears to be:\n\n  tasks:\n    - name: Deploy\n      ^ here\n",
                file.display()
            )
        );
        // A blank line reads the nearest line above with text.
        assert!(
            ansible_excerpt(&at(4, 1))
                .unwrap()
                .contains("    - name: Deploy\n^ here")
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    use std::sync::Arc;
}
