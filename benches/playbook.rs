//! `enka playbook` against `ansible-playbook` on a play of native tasks
//! (`debug`, `set_fact`, `assert`) over `-i localhost,`, run in turn, each
//! process timed whole, start-up included: enka reads the host list
//! itself and starts no Python, so its time is its start, the load and
//! the tasks.
//!
//! `cargo bench --bench playbook` prints each side's median wall time over
//! the runs and their ratio. ansible-playbook is the one beside the worker's
//! interpreter (`ENKA_ANSIBLE_PYTHON`, else the virtualenv `make` installs).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const RUNS: usize = 20;

const PLAY: &str = r#"- hosts: all
  gather_facts: false
  tasks:
    - debug: msg="{{ 1 + 2 }}"
    - set_fact: {three: 3}
    - assert: {that: [three | int == 3]}
"#;

fn main() {
    let dir = std::env::temp_dir().join(format!("enka-bench-playbook-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    let play = dir.join("play.yml");
    std::fs::write(&play, PLAY).expect("writing the play");
    let python = enka::worker::Config::from_env().python;
    let ansible_playbook = python.with_file_name("ansible-playbook");
    let enka = PathBuf::from(env!("CARGO_BIN_EXE_enka"));
    let mut enka_times = Vec::new();
    let mut ansible_times = Vec::new();
    for _ in 0..RUNS {
        enka_times.push(timed(&enka, &["playbook"], &play, &dir));
        if ansible_playbook.exists() {
            ansible_times.push(timed(&ansible_playbook, &[], &play, &dir));
        }
    }
    let enka_median = median(&mut enka_times);
    println!(
        "enka playbook, a play of native tasks: median {:.1} ms over {RUNS} runs",
        ms(enka_median)
    );
    if !ansible_times.is_empty() {
        let ansible_median = median(&mut ansible_times);
        println!(
            "ansible-playbook, the same play: median {:.1} ms; ansible-playbook ÷ enka {:.1}",
            ms(ansible_median),
            ansible_median.as_secs_f64() / enka_median.as_secs_f64()
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// One run of `program args -i localhost, play`, whole, which must succeed.
fn timed(program: &Path, args: &[&str], play: &Path, dir: &Path) -> Duration {
    let start = Instant::now();
    let status = Command::new(program)
        .args(args)
        .args(["-i", "localhost,"])
        .arg(play)
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap_or_else(|err| panic!("{}: {err}", program.display()));
    assert!(status.success(), "{} failed on the play", program.display());
    start.elapsed()
}

fn median(times: &mut [Duration]) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}
