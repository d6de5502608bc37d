//! The 2.18 → 2.19 migration report (`--migration-report FILE`): every
//! template and condition a run met whose value, type or validity differs
//! between ansible-core 2.18 and 2.19, where it is, what each line makes of
//! it, and what to write instead, in `enka check`'s shape
//! (`file:line:column: …`).
//!
//! The run follows its own line; the other line's answers come from the
//! templar's shadow ([`crate::template::migration`]). A report is as
//! complete as the run: what the run did not reach is not in it, so make it
//! from runs that reach every task (a molecule scenario, each sample).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value as Json, json};

use crate::template::migration::{Divergence, Kind, Origin, Recorder, advice};

/// The migration report flag of `run`, `playbook`, `diff` and `test`.
#[derive(Debug, Clone, clap::Args)]
pub struct MigrationArgs {
    /// Also render every template and condition as the other ansible-core
    /// line (2.18 or 2.19) would, and write where they differ to this file
    /// (JSON when it ends in `.json`, else `enka check`'s text): what the
    /// roles must change to move to ansible-core 2.19 (enka).
    #[arg(long, env = "ENKA_MIGRATION_REPORT")]
    pub migration_report: Option<PathBuf>,
}

/// Where a run's findings go, and the recorder its templar fills.
#[derive(Debug, Clone)]
pub struct Report {
    /// The file written: JSON when its name ends in `.json`, text otherwise.
    pub path: PathBuf,
    /// What the run found.
    pub recorder: Arc<Recorder>,
}

impl Report {
    /// A report to `path`, empty.
    pub fn to(path: &Path) -> Report {
        Report {
            path: path.to_path_buf(),
            recorder: Recorder::new(),
        }
    }

    /// Writes what was found so far.
    pub fn write(&self) -> std::io::Result<()> {
        let found = self.recorder.divergences();
        let text = if self.path.extension().is_some_and(|e| e == "json") {
            serde_json::to_string_pretty(&to_json(&found)).unwrap_or_default() + "\n"
        } else {
            render(&found)
        };
        std::fs::write(&self.path, text)
    }

    /// Writes the report whenever the running operator finds something new
    /// (checked every second), so that it is there however the
    /// operator stops.
    pub fn keep_written(self) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            // The first round writes the empty report: there is one from
            // the start.
            let mut written = usize::MAX;
            loop {
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                let found = self.recorder.len();
                if found == written {
                    continue;
                }
                written = found;
                match self.write() {
                    Ok(()) => tracing::warn!(
                        findings = found,
                        report = %self.path.display(),
                        "templates or conditions that differ between ansible-core 2.18 and 2.19"
                    ),
                    Err(err) => tracing::error!(
                        report = %self.path.display(),
                        "cannot write the migration report: {err}"
                    ),
                }
            }
        })
    }

    /// Writes the report and says on stderr where it is and how much it
    /// holds; a failure to write is said, not fatal.
    pub fn finish(&self) {
        match self.write() {
            Ok(()) => eprintln!(
                "enka: migration report: {} finding{} in {}",
                self.recorder.len(),
                if self.recorder.len() == 1 { "" } else { "s" },
                self.path.display()
            ),
            Err(err) => eprintln!(
                "enka: cannot write the migration report {}: {err}",
                self.path.display()
            ),
        }
    }
}

/// The report as text: one diagnostic per finding, then a summary line.
pub fn render(found: &[Divergence]) -> String {
    let mut files = TaskFiles::default();
    let mut out = String::new();
    for divergence in found {
        out.push_str(&diagnostic(divergence, &mut files));
        out.push('\n');
    }
    let (plural, verb) = if found.len() == 1 {
        ("", "s")
    } else {
        ("s", "")
    };
    out.push_str(&format!(
        "enka: {} template{plural} or condition{plural} differ{verb} between ansible-core 2.18 and 2.19\n",
        found.len(),
    ));
    out
}

/// One finding as `enka check` writes a diagnostic.
fn diagnostic(divergence: &Divergence, files: &mut TaskFiles) -> String {
    let place = match &divergence.origin {
        Some(origin) => {
            let (line, column) = locate(origin, divergence, files);
            format!(
                "{}:{line}:{column}: in task '{}'",
                shown(&origin.file),
                origin.task
            )
        }
        None => "(outside a task)".to_owned(),
    };
    format!(
        "{place}: 2.19: {} {:?}: 2.18 gives {}, 2.19 gives {}\n  = help: {}",
        divergence.kind.word(),
        divergence.source,
        divergence.under_218.describe(),
        divergence.under_219.describe(),
        advice(divergence)
    )
}

/// Where the divergence's text is written in the task at `origin`: the
/// first line at or after the task's that holds the text's first line (for
/// a condition, one that also names a condition keyword or is a list item);
/// the task's own place when the text is not found as written (a folded
/// scalar, a module's argument).
fn locate(origin: &Origin, divergence: &Divergence, files: &mut TaskFiles) -> (u32, u32) {
    let source = divergence.source.as_str();
    let fallback = (origin.line, origin.column);
    if origin.exact || divergence.kind == Kind::Module {
        return fallback;
    }
    let Some(needle) = source
        .lines()
        .next()
        .map(str::trim)
        .filter(|l| !l.is_empty())
    else {
        return fallback;
    };
    let Some(text) = files.text(&origin.file) else {
        return fallback;
    };
    let start = origin.line.saturating_sub(1) as usize;
    let find = |fits: &dyn Fn(&str, usize) -> bool| {
        text.lines()
            .enumerate()
            .skip(start)
            .take(500)
            .find_map(|(index, line)| {
                let byte = line.find(needle).filter(|&byte| fits(line, byte))?;
                let column = line[..byte].chars().count() + 1;
                Some((index as u32 + 1, column as u32))
            })
    };
    let as_condition = |line: &str, byte: usize| {
        let before = line[..byte].trim_end_matches(['"', '\'', ' ']);
        before.ends_with("when:")
            || before.ends_with("until:")
            || before.ends_with("that:")
            || before.trim_start() == "-"
    };
    let found = match divergence.kind {
        Kind::Condition => find(&as_condition).or_else(|| find(&|_, _| true)),
        _ => find(&|_, _| true),
    };
    found.unwrap_or(fallback)
}

/// The task files one write of the report reads, each read once: many
/// findings sit in one file.
#[derive(Default)]
struct TaskFiles(std::collections::HashMap<PathBuf, Option<String>>);

impl TaskFiles {
    fn text(&mut self, path: &Path) -> Option<&str> {
        self.0
            .entry(path.to_path_buf())
            .or_insert_with(|| std::fs::read_to_string(path).ok())
            .as_deref()
    }
}

/// The report as JSON: each finding with its place, each line's outcome in
/// the conformance oracle's shape, and the variables it read.
pub fn to_json(found: &[Divergence]) -> Json {
    let mut files = TaskFiles::default();
    let findings: Vec<Json> = found
        .iter()
        .map(|d| {
            let (file, line, column, task) = match &d.origin {
                Some(origin) => {
                    let (line, column) = locate(origin, d, &mut files);
                    (
                        Json::from(shown(&origin.file)),
                        Json::from(line),
                        Json::from(column),
                        Json::from(origin.task.clone()),
                    )
                }
                None => (Json::Null, Json::Null, Json::Null, Json::Null),
            };
            json!({
                "file": file,
                "line": line,
                "column": column,
                "task": task,
                "kind": d.kind.word(),
                "source": d.source,
                "2.18": d.under_218.to_json(),
                "2.19": d.under_219.to_json(),
                "advice": advice(d),
                "vars": d.vars,
                "unsafe_vars": d.unsafe_vars,
                "vars_complete": d.vars_complete,
                "stable": d.stable,
                "count": d.count,
            })
        })
        .collect();
    json!({ "findings": findings })
}

/// `path` relative to the current directory when it is under it, as
/// `enka check` names files.
fn shown(path: &Path) -> String {
    let relative = std::env::current_dir()
        .ok()
        .and_then(|cwd| path.strip_prefix(cwd).ok().map(Path::to_path_buf));
    relative
        .unwrap_or_else(|| path.to_path_buf())
        .display()
        .to_string()
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use super::*;
    use crate::template::migration::Outcome;

    fn divergence(file: &Path, kind: Kind, source: &str) -> Divergence {
        Divergence {
            origin: Some(Arc::new(Origin {
                file: file.to_path_buf(),
                line: 1,
                column: 3,
                task: "t".to_owned(),
                exact: false,
            })),
            kind,
            source: source.to_owned(),
            under_218: Outcome::Value {
                value: json!("3"),
                type_name: "str".to_owned(),
            },
            under_219: Outcome::Value {
                value: json!(3),
                type_name: "int".to_owned(),
            },
            vars: BTreeMap::new(),
            unsafe_vars: BTreeSet::new(),
            vars_complete: true,
            stable: true,
            count: 1,
        }
    }

    /// A task file of its own for each test (`name`), in the temp dir.
    fn task_file(name: &str) -> PathBuf {
        let file =
            std::env::temp_dir().join(format!("enka-migration-{}-{name}.yml", std::process::id()));
        std::fs::write(
            &file,
            "- name: flag\n  debug:\n    msg: \"flag {{ n | length }}\"\n  when: flag\n",
        )
        .unwrap();
        file
    }

    #[test]
    fn a_template_is_placed_where_its_text_is() {
        let file = task_file("template");
        let d = divergence(&file, Kind::Template, "flag {{ n | length }}");
        assert_eq!(
            locate(d.origin.as_deref().unwrap(), &d, &mut TaskFiles::default()),
            (3, 11)
        );
    }

    #[test]
    fn a_condition_is_placed_at_its_keyword_not_at_the_same_word_elsewhere() {
        let file = task_file("condition");
        let d = divergence(&file, Kind::Condition, "flag");
        assert_eq!(
            locate(d.origin.as_deref().unwrap(), &d, &mut TaskFiles::default()),
            (4, 9)
        );
    }

    #[test]
    fn text_not_found_is_placed_at_the_task() {
        let file = task_file("missing");
        let d = divergence(&file, Kind::Template, "{{ folded }}");
        assert_eq!(
            locate(d.origin.as_deref().unwrap(), &d, &mut TaskFiles::default()),
            (1, 3)
        );
    }

    #[test]
    fn the_text_report_is_one_diagnostic_per_finding_and_a_summary() {
        let file = task_file("text");
        let text = render(&[divergence(&file, Kind::Template, "flag {{ n | length }}")]);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].ends_with(
            ":3:11: in task 't': 2.19: template \"flag {{ n | length }}\": 2.18 gives str '3', 2.19 gives int 3"
        ), "{text}");
        assert!(lines[1].starts_with("  = help: "), "{text}");
        assert_eq!(
            lines[2],
            "enka: 1 template or condition differs between ansible-core 2.18 and 2.19"
        );
    }
}
