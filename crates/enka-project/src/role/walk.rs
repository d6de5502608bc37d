//! Every file under a directory, for the loader (`vars/`, `templates/`)
//! and live reload. Symlinked directories are followed, as Ansible follows
//! them, but each real directory is read once: a link back up the tree
//! (`roles/r/tasks/loop -> ..`) would otherwise walk forever.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// The files under `root` (its own path if it is a file; nothing if it
/// does not exist), sorted.
pub fn files_under(root: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut read = HashSet::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(path) = stack.pop() {
        if !path.is_dir() {
            if path.exists() {
                files.push(path);
            }
            continue;
        }
        let Ok(real) = std::fs::canonicalize(&path) else {
            continue;
        };
        if !read.insert(real) {
            continue;
        }
        if let Ok(entries) = std::fs::read_dir(&path) {
            stack.extend(entries.flatten().map(|entry| entry.path()));
        }
    }
    files.sort();
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_symlink_loop_is_read_once() {
        let root = std::env::temp_dir().join(format!("enka-walk-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        std::fs::write(root.join("a/b/main.yml"), "x: 1\n").unwrap();
        std::os::unix::fs::symlink(&root, root.join("a/b/up")).unwrap();
        std::os::unix::fs::symlink(root.join("a"), root.join("a/b/again")).unwrap();
        let files = files_under(&root);
        assert_eq!(files, vec![root.join("a/b/main.yml")]);
        assert_eq!(
            files_under(&root.join("a/b/main.yml")),
            vec![root.join("a/b/main.yml")]
        );
        let _ = std::fs::remove_dir_all(&root);
    }
}
