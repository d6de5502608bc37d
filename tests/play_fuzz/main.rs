//! The differential play fuzzer: small playbooks made from a seed
//! (`generate.rs`), each run by `ansible-playbook` (ansible-core 2.18, the
//! worker's virtualenv) and by `enka playbook`, compared on exit code and
//! on what each prints (task by task, the recap), with only the case's
//! directory normalised. Each disagreement is made as small as it stays
//! one (`shrink.rs`) and printed; `ENKA_PLAY_FUZZ_RECORD=1` records it with
//! ansible-playbook's answer into `tests/conformance/fuzzed_plays.yaml`,
//! where the conformance tests replay it as a named case.
//!
//! - `cargo test --test play_fuzz`: a fixed seed and case count (the
//!   `make test` run); fails on any disagreement not of a [`KNOWN`] kind.
//! - `ENKA_PLAY_FUZZ_SEED`, `ENKA_PLAY_FUZZ_CASES`, `ENKA_PLAY_FUZZ_SECONDS`:
//!   another stream, more cases, a time limit (`make play-fuzz`).
//! - `ENKA_PLAY_FUZZ_RERECORD=1`: records ansible-playbook's outcome anew
//!   for every case of `fuzzed_plays.yaml` (a case added by hand needs only
//!   its name, files and any `args`) and stops; `=text`: only the cases
//!   whose name has `text`.
//!
//! Needs `ENKA_ANSIBLE_PYTHON` (the worker's virtualenv, as `make test` sets
//! it); without it the run fails, never skips.

mod generate;
mod outcome;
mod play;
mod shrink;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rand::SeedableRng;
use rand::rngs::StdRng;

use generate::{Gen, Playbook};
use outcome::Outcome;
use play::Runner;

/// A kind of disagreement understood and not fixed: what identifies it
/// and why it stays.
struct Known {
    name: &'static str,
    reason: &'static str,
    matches: fn(&Outcome, &Outcome) -> bool,
}

/// The disagreements a run may meet without failing, each with its reason.
const KNOWN: &[Known] = &[
    Known {
        name: "ansible-playbook crashes",
        reason: "ansible-playbook 2.18 ends with an unexpected exception (exit 250, \"this is probably a bug\"), as for a failed_when that cannot be evaluated in a loop; enka runs the playbook",
        matches: |ansible, _| ansible.code == 250,
    },
    Known {
        name: "a Python TypeError's wording",
        reason: "both fail the same task at the same place; Ansible words a TypeError with the template it rendered (\"Unexpected templating type error occurred on (…)\", a condition's wrapped in its own `{% set __cres = … %}`) and with the Python classes of the operands, which tell where a value was loaded from (AnsibleUnicode from YAML, AnsibleUnsafeText from a result, str when computed); enka's values carry no such origin, so it says Python's message with the plain type names",
        matches: only_type_error_wording,
    },
    Known {
        name: "an included file that does not parse, worded",
        reason: "both end the run at the include with a parser error (exit 4, the same output up to it); enka words the problem its own way (its loader's message, not PyYAML's or Ansible's, such as \"conflicting action statements\"), with the same `ERROR!` and excerpt shape",
        matches: |ansible, enka| {
            ansible.code == 4
                && enka.code == 4
                && ansible.stdout == enka.stdout
                && ansible.stderr.starts_with("ERROR! ")
                && enka.stderr.starts_with("ERROR! ")
        },
    },
    Known {
        name: "a playbook neither loads",
        reason: "both refuse it before running anything (exit 4, nothing on stdout); enka words its load errors its own way, each with file, line, column and a caret under the spot, as `enka check` does",
        matches: outcome::both_refuse_to_load,
    },
];

/// Whether two outcomes differ only in the lines where ansible-playbook
/// words a Python TypeError its own way (the same line's start, the same
/// exit code and stderr).
fn only_type_error_wording(ansible: &Outcome, enka: &Outcome) -> bool {
    if ansible.code != enka.code || ansible.stderr != enka.stderr {
        return false;
    }
    let (a, e): (Vec<&str>, Vec<&str>) = (
        ansible.stdout.lines().collect(),
        enka.stdout.lines().collect(),
    );
    a.len() == e.len()
        && a.iter().zip(&e).all(|(x, y)| {
            x == y
                || (x.contains("Unexpected templating type error occurred on (")
                    && y.contains(" not supported between instances of ")
                    && x.split("=> {").next() == y.split("=> {").next())
        })
}

fn setting<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn conformance_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance")
}

fn main() {
    let seed: u64 = setting("ENKA_PLAY_FUZZ_SEED", 42);
    let cases: usize = setting("ENKA_PLAY_FUZZ_CASES", 40);
    let budget = Duration::from_secs(setting("ENKA_PLAY_FUZZ_SECONDS", 900));
    let most: usize = setting("ENKA_PLAY_FUZZ_MOST", 10);
    let record = std::env::var("ENKA_PLAY_FUZZ_RECORD").is_ok_and(|v| v == "1");
    let python = std::env::var("ENKA_ANSIBLE_PYTHON").unwrap_or_else(|_| {
        eprintln!("play_fuzz: ENKA_ANSIBLE_PYTHON is not set; `make test` sets it (scripts/ansible-venv.sh)");
        std::process::exit(1);
    });
    let runner = Runner::new(&python, Path::new(env!("CARGO_BIN_EXE_enka"))).unwrap_or_else(|e| {
        eprintln!("play_fuzz: {e}");
        std::process::exit(1);
    });
    let recorded = conformance_dir().join("fuzzed_plays.yaml");
    if let Ok(which) = std::env::var("ENKA_PLAY_FUZZ_RERECORD") {
        // `1`: every case; else the cases whose name has it.
        let which = (which != "1").then_some(which);
        match play::rerecord(&recorded, &runner, which.as_deref()) {
            Ok(count) => println!("play_fuzz: recorded {count} cases from ansible-playbook"),
            Err(e) => panic!("{}: {e}", recorded.display()),
        }
        return;
    }
    let mut rng = StdRng::seed_from_u64(seed);
    let started = Instant::now();
    let mut known = vec![0usize; KNOWN.len()];
    let mut found: Vec<(Playbook, Outcome, Outcome)> = Vec::new();
    let mut done = 0;
    while done < cases && started.elapsed() < budget && found.len() < most {
        let playbook = Gen {
            rng: &mut rng,
            tasks_made: 0,
            files_made: 0,
        }
        .playbook();
        done += 1;
        let (ansible, enka) = runner.both(&playbook);
        let Some(kind) = outcome::disagreement(&ansible, &enka) else {
            continue;
        };
        if let Some(index) = KNOWN.iter().position(|k| (k.matches)(&ansible, &enka)) {
            known[index] += 1;
            continue;
        }
        let small = shrink::shrink(&playbook, &kind, |p| {
            let (a, e) = runner.both(p);
            outcome::disagreement(&a, &e)
        });
        let (ansible, enka) = runner.both(&small);
        // One example of each kind: the first one met, made small.
        if found
            .iter()
            .any(|(p, a, e)| *p == small || outcome::disagreement(a, e).as_deref() == Some(&kind))
        {
            continue;
        }
        found.push((small, ansible, enka));
    }
    println!(
        "play_fuzz: seed {seed}, {done} playbooks in {:.1} s, {} disagreements",
        started.elapsed().as_secs_f64(),
        found.len()
    );
    for (class, count) in KNOWN.iter().zip(&known).filter(|(_, count)| **count > 0) {
        println!("  known, {count}: {}: {}", class.name, class.reason);
    }
    for (playbook, ansible, enka) in &found {
        println!("\n{}", play::report(playbook, ansible, enka));
    }
    if record && !found.is_empty() {
        play::record(&recorded, seed, &found)
            .unwrap_or_else(|e| panic!("{}: {e}", recorded.display()));
        println!("recorded in {}", recorded.display());
    }
    if !found.is_empty() {
        std::process::exit(1);
    }
}
