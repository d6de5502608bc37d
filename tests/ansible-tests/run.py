#!/usr/bin/env python3
"""ansible-core's own integration targets, run by enka (`make ansible-tests`).

The ansible-core sdist of the worker's version is fetched with pip into the
cache (never into the repository), its `test/integration` tree is copied to
a scratch directory, and each POSIX target runs as `ansible-test
integration` would run it on the controller:

* a target with `runme.sh` runs that script with `-v`, the environment
  ansible-test gives it (OUTPUT_DIR, INVENTORY_PATH, ANSIBLE_ROLES_PATH, ...)
  and a `PATH` whose `ansible-playbook` is `enka playbook`;
* a target with `tasks/main.yml` runs as a role, in the play ansible-test
  generates (`hosts: testhost`, `output_dir`), through `enka playbook`.

Targets an operator runtime never has a use for are listed in
`not_applicable.yaml` (or found by their aliases) with the reason. Every
task result comes back from `enka playbook --events-file`; the report in
target/ansible-tests/ has, per target, pass or fail, the tasks that ran and
the failing task with its file:line and message, and the summary line
`ansible-tests: X of Y targets pass (N of M assert tasks)`.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# Aliases that make a target not applicable, and why.
ALIAS_REASONS = {
    "destructive": "changes the machine itself (packages, users, services, system files), "
    "which an operator's container never does and a test harness must not",
    "needs/ssh": "needs an SSH connection; enka runs every play on localhost",
    "needs/httptester": "needs ansible-test's HTTP test container (network services)",
    "unsupported": "marked unsupported by ansible-core itself",
    "disabled": "disabled by ansible-core itself",
    "hidden": "a support target, run only through the targets that need it",
}

# Commands of Ansible's other CLIs a runme.sh may call, and why enka has no
# equivalent: an operator runs roles and playbooks, nothing else.
OTHER_CLIS = {
    "ansible-galaxy": "installs collections and roles (ansible-galaxy)",
    "ansible-doc": "reads plugin documentation (ansible-doc)",
    "ansible-inventory": "dumps inventories (ansible-inventory)",
    "ansible-vault": "edits Vault files (ansible-vault)",
    "ansible-pull": "pulls playbooks from git (ansible-pull)",
    "ansible-console": "is an interactive console (ansible-console)",
    "ansible-config": "dumps configuration (ansible-config)",
    "ansible-test": "tests ansible-test itself",
    "virtualenv.sh": "installs Python packages into a new virtualenv from the network",
    "ansible": "runs ad-hoc commands (the `ansible` CLI)",
}


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--enka", required=True, help="the enka binary")
    parser.add_argument("--python", required=True, help="the worker's Python (ansible-core 2.18)")
    parser.add_argument("--out", default=os.path.join(ROOT, "target", "ansible-tests"))
    parser.add_argument("--cache", default=os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "enka", "ansible-core-sdist"))
    parser.add_argument("--timeout", type=int, default=180, help="seconds per target")
    parser.add_argument("--min-pass", type=int, default=0,
                        help="exit 1 when fewer targets pass (a regression)")
    parser.add_argument("targets", nargs="*", help="only these targets")
    return parser.parse_args()


def ansible_core_version(python):
    out = subprocess.run([python, "-c", "import ansible.release as r; print(r.__version__)"],
                         check=True, capture_output=True, text=True)
    return out.stdout.strip()


def fetch_sdist(python, version, cache):
    """The sdist's test/integration directory, downloaded once per version."""
    tree = os.path.join(cache, version, "ansible_core-%s" % version)
    integration = os.path.join(tree, "test", "integration")
    if os.path.isdir(integration):
        return integration
    download = os.path.join(cache, version)
    os.makedirs(download, exist_ok=True)
    subprocess.run([python, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
                    "ansible-core==%s" % version, "-d", download], check=True)
    archive = os.path.join(download, "ansible_core-%s.tar.gz" % version)
    with tarfile.open(archive) as tar:
        members = [m for m in tar.getmembers() if "/test/integration/" in m.name or m.name.endswith("/test/integration")]
        tar.extractall(download, members=members, filter="data")
    return integration


def load_not_applicable():
    """not_applicable.yaml: `target: reason` lines (a small YAML subset,
    so the harness needs no PyYAML on the host)."""
    listed = {}
    with open(os.path.join(HERE, "not_applicable.yaml"), encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line.lstrip().startswith("#"):
                continue
            name, _, reason = line.partition(":")
            listed[name.strip()] = reason.strip().strip('"')
    return listed


def aliases(target_dir):
    path = os.path.join(target_dir, "aliases")
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [line.split("#")[0].strip() for line in f if line.split("#")[0].strip()]


def not_applicable(name, target_dir, listed):
    """Why a POSIX target does not count, or None."""
    if name in listed:
        return listed[name]
    for alias in aliases(target_dir):
        if alias in ALIAS_REASONS:
            return ALIAS_REASONS[alias]
    runme = os.path.join(target_dir, "runme.sh")
    if os.path.exists(runme):
        with open(runme, encoding="utf-8", errors="replace") as f:
            script = f.read()
        for command, reason in OTHER_CLIS.items():
            pattern = r"(^|[\s;|&(`$])%s(\s|$)" % re.escape(command)
            if command == "virtualenv.sh":
                pattern = r"virtualenv\.sh"
            if re.search(pattern, script, re.MULTILINE):
                return "its runme.sh %s" % reason
    return None


ASSERT_TASK = re.compile(r"^(\s*)(-\s+)?(ansible\.builtin\.|ansible\.legacy\.)?assert:", re.MULTILINE)


def assert_tasks(target_dir):
    """Every assert task in the target's YAML files, as (file, line)."""
    found = set()
    for base, _, files in os.walk(target_dir):
        for name in files:
            if not name.endswith((".yml", ".yaml")):
                continue
            path = os.path.join(base, name)
            with open(path, encoding="utf-8", errors="replace") as f:
                lines = f.read().split("\n")
            for number, line in enumerate(lines, 1):
                if not ASSERT_TASK.match(line):
                    continue
                found.add((os.path.realpath(path), task_start(lines, number)))
    return found


def task_start(lines, number):
    """The line of the task (its `- ` item) an `assert:` key belongs to."""
    line = lines[number - 1]
    if re.match(r"^\s*-\s", line):
        return number
    indent = len(line) - len(line.lstrip())
    for back in range(number - 1, 0, -1):
        above = lines[back - 1]
        stripped = above.lstrip()
        if not stripped or stripped.startswith("#"):
            continue
        if re.match(r"^\s*-\s", above) and above.index("-") + 2 == indent:
            return back
        if len(above) - len(stripped) < indent - 2:
            break
    return number


# ansible-test's test containers run as root with sudo installed, and a few
# runme.sh scripts use it for plain commands; a machine without sudo runs
# them directly when it is root already.
SUDO_SHIM = """#!/bin/sh
# sudo without options, for a root user on a machine that has no sudo.
case "$1" in -*) echo "sudo (enka's harness): options are not supported: $1" >&2; exit 1;; esac
[ "$(id -u)" = 0 ] || { echo "sudo (enka's harness): not root" >&2; exit 1; }
exec "$@"
"""


def write_shims(shim_dir, enka, python):
    """ansible-playbook is enka; python is the controller's Python, as in
    ansible-test's environment (runme.sh scripts filter output with it)."""
    os.makedirs(shim_dir, exist_ok=True)
    shims = {
        "ansible-playbook": '#!/bin/sh\n# ansible-playbook, as enka runs it.\nexec "%s" playbook "$@"\n' % enka,
        "python": '#!/bin/sh\nexec "%s" "$@"\n' % python,
        "python3": '#!/bin/sh\nexec "%s" "$@"\n' % python,
    }
    if shutil.which("sudo") is None:
        shims["sudo"] = SUDO_SHIM
    for name, text in shims.items():
        shim = os.path.join(shim_dir, name)
        with open(shim, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(shim, 0o755)


def run_target(name, integration, work, shim_dir, args):
    target_dir = os.path.join(integration, "targets", name)
    output_dir = os.path.join(work, "output", name)
    shutil.rmtree(output_dir, ignore_errors=True)
    os.makedirs(output_dir)
    events = os.path.join(work, "events", name + ".jsonl")
    os.makedirs(os.path.dirname(events), exist_ok=True)
    if os.path.exists(events):
        os.remove(events)
    inventory = os.path.join(integration, "inventory")
    env = {
        "PATH": shim_dir + os.pathsep + "/usr/local/bin:/usr/bin:/bin",
        "HOME": os.environ.get("HOME", "/root"),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "OUTPUT_DIR": output_dir,
        "INVENTORY_PATH": inventory,
        "ANSIBLE_ROLES_PATH": os.path.join(integration, "targets"),
        "ANSIBLE_PLAYBOOK_DIR": target_dir,
        "ANSIBLE_TEST_PYTHON_INTERPRETER": args.python,
        "ANSIBLE_TEST_ANSIBLE_VERSION": args.version,
        "ANSIBLE_CALLBACKS_ENABLED": "junit",
        # As ansible-test: a playbook run without -i has an empty inventory.
        "ANSIBLE_INVENTORY": "/dev/null",
        "ANSIBLE_NOCOLOR": "1",
        # ansible-test's own limit for modules (its SOFT_RLIMIT_NOFILE).
        "ANSIBLE_PYTHON_MODULE_RLIMIT_NOFILE": "1024",
        "ENKA_ANSIBLE_PYTHON": args.python,
        "ENKA_PLAYBOOK_EVENTS": events,
        "ENKA_LOG": "warn",
    }
    if os.path.exists(os.path.join(target_dir, "runme.sh")):
        command = ["bash", "./runme.sh", "-v"]
        cwd = target_dir
    else:
        playbook = os.path.join(integration, "%s-enka.yml" % name)
        play = [{"hosts": "testhost", "gather_facts": "gather_facts/no" not in aliases(target_dir),
                 "vars": {"output_dir": output_dir}, "roles": [name]}]
        with open(playbook, "w", encoding="utf-8") as f:
            json.dump(play, f, indent=4)
        command = [args.enka, "playbook", os.path.basename(playbook), "-i", "inventory", "-v"]
        cwd = integration
    started = time.monotonic()
    try:
        proc = subprocess.run(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              timeout=args.timeout, start_new_session=True)
        code, output = proc.returncode, proc.stdout.decode("utf-8", "replace")
    except subprocess.TimeoutExpired as e:
        code, output = None, (e.stdout or b"").decode("utf-8", "replace") + "\n[timed out after %ss]" % args.timeout
    elapsed = time.monotonic() - started
    results = []
    if os.path.exists(events):
        with open(events, encoding="utf-8") as f:
            results = [json.loads(line) for line in f if line.strip()]
    return code, output, results, elapsed


def location_key(result):
    if not result.get("file") or not result.get("line"):
        return None
    return os.path.realpath(result["file"]), result["line"]


def main():
    args = parse_args()
    args.enka = os.path.abspath(args.enka)
    args.version = ansible_core_version(args.python)
    source = fetch_sdist(args.python, args.version, args.cache)
    work = os.path.join(args.out, "work")
    integration = os.path.join(work, "integration")
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(source, integration, symlinks=True)
    with open(os.path.join(integration, "inventory"), "w", encoding="utf-8") as f:
        f.write("[testgroup]\ntesthost ansible_connection=local ansible_pipelining=yes "
                "ansible_python_interpreter=%s\n" % args.python)
    shim_dir = os.path.join(work, "bin")
    write_shims(shim_dir, args.enka, args.python)
    listed = load_not_applicable()
    targets_dir = os.path.join(integration, "targets")
    names = sorted(n for n in os.listdir(targets_dir)
                   if any(a.startswith("shippable/posix/") for a in aliases(os.path.join(targets_dir, n))))
    if args.targets:
        unknown = set(args.targets) - set(names)
        if unknown:
            sys.exit("not POSIX targets of ansible-core %s: %s" % (args.version, ", ".join(sorted(unknown))))
        names = [n for n in names if n in args.targets]
    report = []
    for name in names:
        target_dir = os.path.join(targets_dir, name)
        reason = not_applicable(name, target_dir, listed)
        if reason:
            report.append({"target": name, "result": "not applicable", "reason": reason})
            continue
        code, output, results, elapsed = run_target(name, integration, work, shim_dir, args)
        plays_run = [r for r in results if r["status"] == "play" and r.get("hosts")]
        results = [r for r in results if r["status"] != "play"]
        asserts = assert_tasks(target_dir)
        passed_asserts, failed_asserts = set(), set()
        for r in results:
            key = location_key(r)
            if key in asserts:
                (failed_asserts if r["status"] == "failed" else passed_asserts).add(key)
        failure = next((r for r in reversed(results) if r["status"] == "failed"), None)
        # A run in which no task ran proves nothing: it does not pass. A
        # playbook enka refused as it loaded counts as a run: the target's
        # runme.sh may check the refusal (include_when_parent_is_static); so
        # does a play that ran on some host, even with no tasks (its runme.sh
        # checks the output: inventory-invalid-group).
        vacuous = code == 0 and not results and not plays_run
        refusals = [r for r in results if r["status"] == "refused"]
        results = [r for r in results if r["status"] != "refused"]
        entry = {
            "target": name,
            "result": "pass" if code == 0 and not vacuous else "fail",
            "exit": code,
            "seconds": round(elapsed, 1),
            "tasks": len(results),
            "asserts": len(asserts),
            "asserts_passed": len(passed_asserts - failed_asserts),
        }
        if refusals:
            entry["playbooks_refused"] = len(refusals)
        if vacuous:
            entry["message"] = "no task ran"
        elif code != 0:
            if failure:
                entry["failed_task"] = failure["task"]
                entry["location"] = "%s:%s" % (os.path.relpath(failure["file"], integration), failure["line"])
                message = failure.get("message") or ""
                if failure.get("assertion"):
                    message += ": %s" % failure["assertion"]
                entry["message"] = message[:500]
            else:
                tail = [l for l in output.strip().split("\n") if l.strip()][-3:]
                entry["message"] = " | ".join(tail)[:500]
        if "message" in entry:
            # Paths relative to the copied test/integration, as in the sdist.
            entry["message"] = entry["message"].replace(integration + os.sep, "")
        report.append(entry)
        log_dir = os.path.join(args.out, "logs")
        os.makedirs(log_dir, exist_ok=True)
        with open(os.path.join(log_dir, name + ".log"), "w", encoding="utf-8") as f:
            f.write(output)
        print("%-40s %-5s %5.1fs  %s" % (name, entry["result"], elapsed,
                                        entry.get("message", "")[:150].replace("\n", " ")), flush=True)
    ran = [e for e in report if e["result"] in ("pass", "fail")]
    passed = [e for e in ran if e["result"] == "pass"]
    asserts = sum(e["asserts"] for e in ran)
    asserts_passed = sum(e["asserts_passed"] for e in ran)
    summary = "ansible-tests: %d of %d targets pass (%d of %d assert tasks)" % (
        len(passed), len(ran), asserts_passed, asserts)
    with open(os.path.join(args.out, "report.json"), "w", encoding="utf-8") as f:
        json.dump({"ansible_core": args.version, "summary": summary, "targets": report}, f, indent=2)
    with open(os.path.join(args.out, "report.md"), "w", encoding="utf-8") as f:
        f.write("| target | result | asserts | failing task / reason |\n|---|---|---|---|\n")
        for e in report:
            if e["result"] == "not applicable":
                f.write("| %s | n/a | | %s |\n" % (e["target"], e["reason"]))
            else:
                detail = ""
                if e["result"] == "fail":
                    detail = "%s at %s: %s" % (e.get("failed_task", "?"), e.get("location", "?"),
                                               e.get("message", ""))
                f.write("| %s | %s | %d/%d | %s |\n" % (e["target"], e["result"], e["asserts_passed"],
                                                        e["asserts"], detail.replace("|", "\\|").replace("\n", " ")[:300]))
    print(summary)
    if not args.targets and len(passed) < args.min_pass:
        sys.exit("ansible-tests: %d targets pass, fewer than the %d that passed before (a regression; "
                 "see target/ansible-tests/report.md)" % (len(passed), args.min_pass))


if __name__ == "__main__":
    main()
