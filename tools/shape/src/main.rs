//! `shape`: the checks `make test` runs on enka's code itself.
//!
//! - `shape graph`: the workspace's crate graph, read from `cargo metadata`,
//!   must be exactly the table in `docs/ARCHITECTURE.md`, and each crate may
//!   use only crates listed above it there (no circle, no upward edge).
//! - `shape size`: no production file over 1000 lines and no function over
//!   100, tests aside; a longer one says why in a `// Long: …` comment above
//!   it (`//! Long: …` for a file), or is listed in `tools/shape/known.txt`,
//!   the shrinking list of what is still to be cut. A listed item that grew,
//!   shrank or is no longer long fails too, so the list stays exact.

#![forbid(unsafe_code)]

mod graph;
mod size;

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let what = std::env::args().nth(1).unwrap_or_default();
    let outcome = match what.as_str() {
        "graph" => graph::check(&root),
        "size" => size::check(&root, std::env::args().any(|a| a == "--report")),
        _ => {
            eprintln!("usage: shape graph | shape size [--report]");
            return ExitCode::from(2);
        }
    };
    match outcome {
        Ok(problems) if problems.is_empty() => ExitCode::SUCCESS,
        Ok(problems) => {
            for problem in &problems {
                eprintln!("shape {what}: {problem}");
            }
            ExitCode::FAILURE
        }
        Err(err) => {
            eprintln!("shape {what}: {err:#}");
            ExitCode::FAILURE
        }
    }
}
