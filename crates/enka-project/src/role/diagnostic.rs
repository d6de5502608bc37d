//! Load-time findings with their file and position, rendered the way
//! compilers do: `file:line:col: error: message`, the source line, a caret.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use enka_yaml::Pos;

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// Accepted, but probably not what the author meant (or has no effect).
    Warning,
    /// Wrong, but only where it is used: a template that does not compile,
    /// a filter nobody has. Ansible meets these when the task runs, so the
    /// project loads and the task fails then; `enka check` refuses them.
    WhenRun,
    /// The project cannot run as written.
    Error,
}

/// A place in a project file.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Location {
    /// The file.
    pub file: Arc<Path>,
    /// Where in it; `None` for the file as a whole.
    pub pos: Option<Pos>,
}

impl Location {
    /// A position in `file`.
    pub fn new(file: &Arc<Path>, pos: Pos) -> Self {
        Location {
            file: file.clone(),
            pos: Some(pos),
        }
    }

    /// The whole of `file`.
    pub fn file(file: &Path) -> Self {
        Location {
            file: Arc::from(file),
            pos: None,
        }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", display_path(&self.file).display())?;
        if let Some(pos) = self.pos {
            write!(f, ":{}:{}", pos.line, pos.col)?;
        }
        Ok(())
    }
}

/// One finding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// Error or warning.
    pub severity: Severity,
    /// Where.
    pub location: Location,
    /// The task it concerns, when there is one.
    pub task: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl Diagnostic {
    /// An error at `location`.
    pub fn error(location: Location, message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Error,
            location,
            task: None,
            message: message.into(),
        }
    }

    /// A warning at `location`.
    pub fn warning(location: Location, message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Warning,
            location,
            task: None,
            message: message.into(),
        }
    }

    /// Names the task the finding is about.
    #[must_use]
    pub fn in_task(mut self, task: Option<&str>) -> Self {
        self.task = task.map(str::to_owned);
        self
    }

    /// A finding that fails its task when the task runs.
    pub fn when_run(location: Location, message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::WhenRun,
            location,
            task: None,
            message: message.into(),
        }
    }

    /// Whether this is an error that stops the project from loading.
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }

    /// Whether this is an error, now or when its task runs.
    pub fn is_problem(&self) -> bool {
        self.severity >= Severity::WhenRun
    }

    /// The finding with the offending source line and a caret under the
    /// column, reading the file again (only done when reporting).
    pub fn render(&self) -> String {
        let mut out = self.to_string();
        if let Some(pos) = self.location.pos
            && let Some(line) = source_line(&self.location.file, pos.line)
        {
            let number = pos.line.to_string();
            let gutter = " ".repeat(number.len());
            let caret_pad: String = line
                .chars()
                .take(pos.col.saturating_sub(1) as usize)
                .map(|c| if c == '\t' { '\t' } else { ' ' })
                .collect();
            out.push_str(&format!(
                "\n{gutter} |\n{number} | {line}\n{gutter} | {caret_pad}^"
            ));
        }
        out
    }
}

fn source_line(file: &Path, line: u32) -> Option<String> {
    let text = std::fs::read_to_string(file).ok()?;
    text.lines()
        .nth(line.checked_sub(1)? as usize)
        .map(str::to_owned)
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let severity = match self.severity {
            Severity::Error | Severity::WhenRun => "error",
            Severity::Warning => "warning",
        };
        write!(f, "{}: {severity}: ", self.location)?;
        if let Some(task) = &self.task {
            write!(f, "task {task:?}: ")?;
        }
        f.write_str(&self.message)
    }
}

/// Findings collected while loading.
#[derive(Debug, Default, Clone)]
pub struct Diagnostics(pub Vec<Diagnostic>);

impl Diagnostics {
    /// Adds one.
    pub fn push(&mut self, diagnostic: Diagnostic) {
        self.0.push(diagnostic);
    }

    /// Whether any is an error.
    pub fn has_errors(&self) -> bool {
        self.0.iter().any(Diagnostic::is_error)
    }

    /// Whether any is an error, now or when its task runs.
    pub fn has_problems(&self) -> bool {
        self.0.iter().any(Diagnostic::is_problem)
    }

    /// The errors only.
    pub fn errors(&self) -> impl Iterator<Item = &Diagnostic> {
        self.0.iter().filter(|d| d.is_error())
    }

    /// Appends all of `other`.
    pub fn extend(&mut self, other: Diagnostics) {
        self.0.extend(other.0);
    }
}

/// A path for messages: relative to the working directory when inside it.
pub fn display_path(path: &Path) -> PathBuf {
    std::env::current_dir()
        .ok()
        .and_then(|cwd| path.strip_prefix(cwd).ok().map(Path::to_path_buf))
        .unwrap_or_else(|| path.to_path_buf())
}
