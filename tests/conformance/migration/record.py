"""Records how each task of the migration fixture ends under real
ansible-playbook on ansible-core 2.18 and on 2.19, into expected.json:

    {"2.18": {"<task>": {"status": ..., "result": ...}}, "2.19": {...}}

`status` is ok, changed, skipped or failed; `result` is what the task
returned that templating decides (debug's `msg`, set_fact's facts, each
loop item's), absent when it failed: both lines fail such a task, with
messages that differ by design; a failure failed_when decided says so. `tests/conformance/migration.rs` reads it:
the tasks that end differently are the ones the migration report must name.

Usage: python3 record.py  (from anywhere; uses scripts/ansible-venv.sh).
"""

import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
KEPT = ("msg", "ansible_facts", "changed")


def python_of(line):
    args = ["bash", os.path.join(REPO, "scripts", "ansible-venv.sh")]
    if line != "2.18":
        args.append(line)
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout.strip()


def summary(result):
    """What templating decided in one host result."""
    if result.get("failed"):
        # Whether failed_when decided it (2.18), not an error in it (2.19).
        return {"status": "failed", **{k: result[k] for k in ("failed_when_result",) if k in result}}
    if result.get("skipped"):
        return {"status": "skipped"}
    status = "changed" if result.get("changed") else "ok"
    if "results" in result:
        kept = [summary(item) for item in result["results"]]
    else:
        kept = {k: result[k] for k in KEPT if k in result}
    return {"status": status, "result": kept}


def run(line):
    python = python_of(line)
    playbook = os.path.join(os.path.dirname(python), "ansible-playbook")
    env = dict(os.environ)
    env.update(
        ANSIBLE_STDOUT_CALLBACK="ansible.posix.json",
        ANSIBLE_LOCALHOST_WARNING="False",
        ANSIBLE_INVENTORY_UNPARSED_WARNING="False",
        ANSIBLE_DEPRECATION_WARNINGS="False",
    )
    out = subprocess.run(
        [playbook, "-i", "localhost,", "-c", "local", os.path.join(HERE, "playbook.yml")],
        capture_output=True, text=True, env=env,
    )
    report = json.loads(out.stdout[out.stdout.index("{"):])
    tasks = {}
    for play in report["plays"]:
        for task in play["tasks"]:
            name = task["task"]["name"]
            result = next(iter(task["hosts"].values()))
            tasks[name] = summary(result)
    return tasks


def main():
    expected = {line: run(line) for line in ("2.18", "2.19")}
    path = os.path.join(HERE, "expected.json")
    with open(path, "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True, ensure_ascii=False)
        f.write("\n")
    differ = [t for t in expected["2.18"] if expected["2.18"][t] != expected["2.19"].get(t)]
    print(f"{len(expected['2.18'])} tasks, {len(differ)} end differently: {', '.join(differ)}", file=sys.stderr)


if __name__ == "__main__":
    main()
