//! The pool against a real worker (the Python `make test` installs, named
//! by ENKA_ANSIBLE_PYTHON): idle processes exit and the next request starts
//! one again; modules that run in the worker itself answer as those in a
//! fork do.

use std::time::Duration;

use enka_worker::{AnsibleWorker, Config};
use serde_json::json;

const LIMIT: Option<Duration> = Some(Duration::from_secs(120));

fn pool(idle_exit_after: Option<Duration>) -> std::sync::Arc<AnsibleWorker> {
    pool_of(1, idle_exit_after)
}

fn pool_of(size: usize, idle_exit_after: Option<Duration>) -> std::sync::Arc<AnsibleWorker> {
    AnsibleWorker::new(Config {
        size,
        idle_exit_after,
        base_dir: std::env::temp_dir(),
        ..Config::from_env()
    })
}

/// The parent of process `pid`.
fn parent(pid: u32) -> u32 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("its /proc stat");
    // pid (comm) state ppid …: comm may hold spaces, so read after its ')'.
    let after = &stat[stat.rfind(')').expect("a comm") + 2..];
    after
        .split(' ')
        .nth(1)
        .and_then(|p| p.parse().ok())
        .expect("a ppid")
}

/// `request` sent twice at once; the answers.
fn two_at_once(worker: &AnsibleWorker, request: serde_json::Value) -> Vec<serde_json::Value> {
    std::thread::scope(|scope| {
        let calls: Vec<_> = (0..2)
            .map(|_| scope.spawn(|| worker.call(request.clone(), LIMIT).expect("a task runs")))
            .collect();
        calls
            .into_iter()
            .map(|call| call.join().expect("a call"))
            .collect()
    })
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| !stat.contains(") Z "))
}

#[test]
fn an_idle_worker_exits_and_the_next_request_starts_another() {
    let worker = pool(Some(Duration::from_millis(300)));
    let first = worker
        .call(json!({"op": "hello"}), LIMIT)
        .expect("a worker answers");
    let pid = first["pid"].as_u64().expect("its pid") as u32;
    let server = parent(pid);
    assert_eq!(worker.idle_pids(), vec![pid]);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while alive(pid) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!alive(pid), "the idle worker {pid} should have exited");
    assert!(worker.idle_pids().is_empty());
    assert_eq!(worker.stats().idled, 1);
    // The server is ended right after its last worker, by the same thread.
    while alive(server) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        !alive(server),
        "the fork server {server} should have gone with the last worker"
    );
    let second = worker
        .call(json!({"op": "hello"}), LIMIT)
        .expect("a new worker answers");
    assert_ne!(second["pid"], first["pid"]);
    assert_eq!(worker.stats().started, 2);
}

/// Workers are forks of one fork server, which is not this process, and
/// a second one starts as a fork of the same server.
#[test]
fn workers_are_forked_from_one_server() {
    let worker = pool_of(2, None);
    // Two at once: the second cannot reuse the first.
    for answer in two_at_once(
        &worker,
        json!({"op": "run", "module": "ansible.builtin.command", "args": {"_raw_params": "sleep 0.5"}}),
    ) {
        assert_eq!(answer["result"]["rc"], 0, "{answer}");
    }
    let pids = worker.idle_pids();
    assert_eq!(pids.len(), 2, "two workers");
    let servers: Vec<u32> = pids.iter().map(|pid| parent(*pid)).collect();
    assert_eq!(servers[0], servers[1], "one fork server");
    assert_ne!(servers[0], std::process::id());
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", servers[0])).expect("its cmdline");
    assert!(
        String::from_utf8_lossy(&cmdline).contains("enka_worker_main.py"),
        "the fork server runs enka's worker script"
    );
}

#[test]
fn a_worker_kept_without_an_idle_limit_stays() {
    let worker = pool(None);
    let hello = worker
        .call(json!({"op": "hello"}), LIMIT)
        .expect("a worker answers");
    std::thread::sleep(Duration::from_millis(400));
    let pid = hello["pid"].as_u64().expect("its pid") as u32;
    assert!(alive(pid));
    assert_eq!(worker.idle_pids(), vec![pid]);
}

/// `file` and `stat` run in the worker's own interpreter, `command` in a
/// fork; either way a task's environment is its own, and a module's
/// failure is the task's.
#[test]
fn modules_in_the_worker_and_in_a_fork_keep_to_their_task() {
    let worker = pool(None);
    let dir = std::env::temp_dir().join(format!("enka-pool-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("touched").display().to_string();
    let run = |module: &str, args: serde_json::Value, environment: serde_json::Value| {
        let answer = worker
            .call(
                json!({"op": "run", "module": module, "args": args, "environment": environment}),
                LIMIT,
            )
            .unwrap_or_else(|e| panic!("{module}: {e}"));
        answer["result"].clone()
    };
    let touched = run(
        "ansible.builtin.file",
        json!({"path": path, "state": "touch"}),
        json!({"ENKA_POOL_PROBE": "leaked"}),
    );
    assert_eq!(touched["changed"], true, "{touched}");
    let stat = run("ansible.builtin.stat", json!({"path": path}), json!({}));
    assert_eq!(stat["stat"]["exists"], true, "{stat}");
    let probe = run(
        "ansible.builtin.shell",
        json!({"_raw_params": "echo ${ENKA_POOL_PROBE:-unset}"}),
        json!({}),
    );
    assert_eq!(probe["stdout"], "unset", "{probe}");
    let refused = run(
        "ansible.builtin.file",
        json!({"path": format!("{path}/below"), "state": "directory"}),
        json!({}),
    );
    assert_eq!(refused["failed"], true, "{refused}");
    let again = run("ansible.builtin.stat", json!({"path": path}), json!({}));
    assert_eq!(again["stat"]["isreg"], true, "{again}");
    assert!(again.get("warnings").is_none(), "{again}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Whether process `pid` has a file whose path holds `part` mapped.
fn mapped(pid: u32, part: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .expect("its maps")
        .lines()
        .any(|line| line.contains(part))
}

/// A worker starts without vault's cryptography (enka_startup.py defers
/// it): the library is loaded by the first decryption, which works.
#[test]
fn vault_cryptography_loads_at_the_first_decryption() {
    let dir = std::env::temp_dir().join(format!("enka-pool-vault-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let password = dir.join("password");
    std::fs::write(&password, "pool-secret\n").unwrap();
    let config = Config {
        size: 1,
        idle_exit_after: None,
        base_dir: std::env::temp_dir(),
        vault_password_files: vec![password],
        ..Config::from_env()
    };
    let encrypt = "import sys\nfrom ansible.parsing.vault import VaultLib, VaultSecret\n\
                   lib = VaultLib([('default', VaultSecret(b'pool-secret'))])\n\
                   sys.stdout.write(lib.encrypt('kept secret').decode())";
    let vaulted = std::process::Command::new(&config.python)
        .args(["-c", encrypt])
        .output()
        .expect("the worker's Python runs");
    assert!(vaulted.status.success(), "{vaulted:?}");
    let vaulted = String::from_utf8(vaulted.stdout).expect("vault text");
    let worker = AnsibleWorker::new(config);
    let hello = worker
        .call(json!({"op": "hello"}), LIMIT)
        .expect("a worker answers");
    let pid = hello["pid"].as_u64().expect("its pid") as u32;
    assert!(
        !mapped(pid, "cryptography"),
        "a new worker should not have cryptography loaded"
    );
    let plain = worker
        .call(json!({"op": "vault_decrypt", "text": vaulted}), LIMIT)
        .expect("the vaulted text decrypts");
    assert_eq!(plain["value"], "kept secret", "{plain}");
    assert!(mapped(pid, "cryptography"));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The facts collectors are imported when a module gathers facts, not
/// at the worker's start (enka_startup.py), and gather as before.
#[test]
fn facts_are_gathered_with_the_collectors_deferred() {
    let worker = pool(None);
    let answer = worker
        .call(
            json!({"op": "run", "module": "ansible.builtin.setup", "args": {"gather_subset": ["min"]}}),
            LIMIT,
        )
        .expect("setup runs");
    let facts = &answer["result"]["ansible_facts"];
    assert_eq!(facts["ansible_system"], "Linux", "{answer}");
    assert!(
        facts["ansible_python"]["version"]["major"].is_u64(),
        "{answer}"
    );
}

/// What the worker's start keeps of ansible-core's parses (marshal files
/// next to its scripts) is parsed again when a file is damaged: a worker
/// starts and runs its task as before.
#[test]
fn a_damaged_kept_parse_is_parsed_again() {
    let stat_root = |worker: &AnsibleWorker| {
        let answer = worker
            .call(
                json!({"op": "run", "module": "ansible.builtin.stat", "args": {"path": "/"}}),
                LIMIT,
            )
            .expect("stat runs");
        assert_eq!(answer["result"]["stat"]["isdir"], true, "{answer}");
    };
    let worker = pool(None);
    stat_root(&worker);
    // A fork keeps its server's command line: the script's path.
    let pid = worker.idle_pids()[0];
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).expect("its cmdline");
    let cmdline = String::from_utf8_lossy(&cmdline);
    let script = cmdline
        .split('\0')
        .find(|arg| arg.ends_with("enka_worker_main.py"))
        .expect("the server's script");
    let scripts = std::path::Path::new(script)
        .parent()
        .expect("its directory");
    let kept: Vec<_> = std::fs::read_dir(scripts)
        .expect("the scripts' directory")
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|e| e == "marshal"))
        .collect();
    // base.yml's definitions, the defaults' templates, ansible.builtin's routing.
    assert!(kept.len() >= 3, "kept parses: {kept:?}");
    drop(worker);
    for path in &kept {
        std::fs::write(path, b"\xffdamaged").unwrap();
    }
    stat_root(&pool(None));
    // The directory is shared by every Python line: those of another line
    // are parsed again when that line starts.
    let parsed_again = kept
        .iter()
        .filter(|path| std::fs::read(path).unwrap() != b"\xffdamaged")
        .count();
    assert!(parsed_again >= 3, "{parsed_again} of {kept:?} parsed again");
}

/// Half a second after its first fork with nothing asked of it, the fork
/// server makes the plugins each task needs; a worker forked after that
/// runs tasks in its own directory as the first does.
#[test]
fn a_worker_forked_after_the_server_prepared_keeps_to_its_own_directory() {
    let worker = pool_of(2, None);
    worker
        .call(json!({"op": "hello"}), LIMIT)
        .expect("a worker answers");
    std::thread::sleep(Duration::from_millis(1200));
    let request = json!({"op": "run", "module": "ansible.builtin.shell",
                         "args": {"_raw_params": "sleep 0.5; echo $ENKA_WORKER_DIR"}});
    let dirs: Vec<String> = two_at_once(&worker, request)
        .into_iter()
        .map(|answer| {
            assert_eq!(answer["result"]["rc"], 0, "{answer}");
            answer["result"]["stdout"]
                .as_str()
                .expect("its output")
                .to_owned()
        })
        .collect();
    assert_eq!(worker.idle_pids().len(), 2, "two workers");
    assert_ne!(dirs[0], dirs[1], "each worker in its own directory");
    for dir in &dirs {
        let probe = std::path::Path::new(dir).join("probe");
        let touched = worker
            .call(
                json!({"op": "run", "module": "ansible.builtin.file",
                       "args": {"path": probe.display().to_string(), "state": "touch"}}),
                LIMIT,
            )
            .expect("a file task runs");
        assert_eq!(touched["result"]["changed"], true, "{touched}");
    }
}
