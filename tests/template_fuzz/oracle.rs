//! ansible-core's answers, from one long-lived Python process running
//! `tests/conformance/oracle.py` (the code that records the conformance
//! corpus) with the Python of enka's Ansible worker.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::{Value as Json, json};

pub struct Oracle {
    child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
}

impl Oracle {
    /// Starts the oracle with `python` (`ENKA_ANSIBLE_PYTHON`), reading
    /// files from the conformance corpus's `files`.
    pub fn start(python: &str, conformance: &Path) -> Result<Self, String> {
        let mut child = Command::new(python)
            .arg(conformance.join("oracle.py"))
            .env("ENKA_ORACLE_FILES", conformance.join("files"))
            .env("ANSIBLE_DEPRECATION_WARNINGS", "False")
            .env("ANSIBLE_LOCALHOST_WARNING", "False")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start the oracle with {python}: {e}"))?;
        let input = child.stdin.take().ok_or("the oracle has no stdin")?;
        let output = BufReader::new(child.stdout.take().ok_or("the oracle has no stdout")?);
        Ok(Oracle {
            child,
            input,
            output,
        })
    }

    /// What ansible-core makes of `source` (a `template` or a
    /// `condition`) with `vars`: `{"ok": true, "value", "type"}`,
    /// `{"ok": false, "error"}`, or `{"ok": null}` when it could not say.
    pub fn answer(&mut self, kind: &str, source: &str, vars: &Json) -> Result<Json, String> {
        self.answer_untrusting(kind, source, vars, &Json::Array(Vec::new()))
    }

    /// [`Oracle::answer`] with `untrusted` (a list of names) holding
    /// untrusted data, as a custom resource's fields and module results do.
    pub fn answer_untrusting(
        &mut self,
        kind: &str,
        source: &str,
        vars: &Json,
        untrusted: &Json,
    ) -> Result<Json, String> {
        let request = json!({"kind": kind, "source": source, "vars": vars, "unsafe": untrusted});
        writeln!(self.input, "{request}")
            .and_then(|()| self.input.flush())
            .map_err(|e| format!("the oracle stopped reading: {e}"))?;
        let mut line = String::new();
        match self.output.read_line(&mut line) {
            Ok(0) | Err(_) => Err(format!(
                "the oracle died on {source:?} (exit {:?})",
                self.child.try_wait().ok().flatten()
            )),
            Ok(_) => serde_json::from_str(&line)
                .map_err(|e| format!("the oracle answered {line:?}: {e}")),
        }
    }
}

impl Drop for Oracle {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
