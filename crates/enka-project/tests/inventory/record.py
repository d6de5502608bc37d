#!/usr/bin/env python3
"""Records the inventories of cases.yaml as ansible-core loads them.

    python3 crates/enka-project/tests/inventory/record.py [--line 2.19|2.21]

For each case it makes the case's directory, then asks ansible-core's own
InventoryManager, through the worker's `inventory` request (the one enka
sends when Ansible loads an inventory), and writes the answers to
expected-LINE.json. The case's directory is written `<dir>` and the
interpreter of the implicit localhost `<python>`, wherever they were.
The line's interpreter is the one scripts/ansible-venv.sh makes.
"""

import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", "..", ".."))


def line():
    return sys.argv[sys.argv.index("--line") + 1] if "--line" in sys.argv else "2.18"


def placeholders(value, directory):
    if isinstance(value, str):
        return value.replace(directory, "<dir>").replace(sys.executable, "<python>")
    if isinstance(value, list):
        return [placeholders(v, directory) for v in value]
    if isinstance(value, dict):
        return {placeholders(k, directory): placeholders(v, directory) for k, v in value.items()}
    return value


def record_one(name, out):
    """Writes one case's answer to `out`: each case in a process of its own, as
    each ansible-playbook run is (the vars plugin and the loader keep
    caches by path for the process's life)."""
    import yaml

    sys.path.insert(0, os.path.join(ROOT, "crates", "enka-worker", "src"))
    import enka_worker

    with open(os.path.join(HERE, "cases.yaml")) as f:
        case = next(c for c in yaml.safe_load(f) if c["name"] == name)
    with tempfile.TemporaryDirectory() as directory:
        directory = os.path.realpath(directory)
        for path, text in (case.get("files") or {}).items():
            os.makedirs(os.path.dirname(os.path.join(directory, path)), exist_ok=True)
            with open(os.path.join(directory, path), "w") as f:
                f.write(text)
        os.chdir(directory)
        basedir = case.get("basedir")
        answer = enka_worker._inventory({
            "sources": case["sources"],
            "basedir": os.path.join(directory, basedir) if basedir else None,
        })
        os.chdir(HERE)
        with open(out, "w") as f:
            # Not stdout: the worker's module keeps that for its frames.
            json.dump(placeholders(answer, directory), f)


# The warnings Ansible gives while it reads an inventory (the others are
# the variable manager's, which the play gives).
INVENTORY_WARNINGS = (
    "Invalid characters were found in group names",
    "Found both group and host with same name",
    "A duplicate localhost-like entry was found",
)


def inventory_warnings(stderr):
    """The inventory's warnings in `stderr`, each once, in order."""
    found = []
    for text in stderr.splitlines():
        message = text[len("[WARNING]: "):] if text.startswith("[WARNING]: ") else None
        if message and message.startswith(INVENTORY_WARNINGS) and message not in found:
            found.append(message)
    return found


def record():
    import yaml
    from ansible import release

    with open(os.path.join(HERE, "cases.yaml")) as f:
        cases = yaml.safe_load(f)
    answers = {}
    for case in cases:
        if case.get("through_ansible"):
            # Ansible's own to read: only that enka leaves it is checked.
            continue
        with tempfile.NamedTemporaryFile(suffix=".json") as out:
            run = subprocess.run([sys.executable, os.path.abspath(__file__), "--line", line(),
                                  "--case", case["name"], "--out", out.name],
                                 check=True, stderr=subprocess.PIPE, text=True)
            answers[case["name"]] = json.load(out)
            answers[case["name"]]["warnings"] = inventory_warnings(run.stderr)
    out = {"ansible_core": release.__version__, "cases": answers}
    with open(os.path.join(HERE, f"expected-{line()}.json"), "w") as f:
        json.dump(out, f, indent=1, sort_keys=True, ensure_ascii=False)
        f.write("\n")


def main():
    if os.environ.get("ENKA_INVENTORY_LINE") == line():
        if "--case" in sys.argv:
            record_one(sys.argv[sys.argv.index("--case") + 1], sys.argv[sys.argv.index("--out") + 1])
        else:
            record()
        return
    args = ["bash", os.path.join(ROOT, "scripts", "ansible-venv.sh")]
    if line() != "2.18":
        args.append(line())
    python = subprocess.run(args, check=True, capture_output=True, text=True).stdout.strip()
    os.environ["ENKA_INVENTORY_LINE"] = line()
    os.execv(python, [python, os.path.abspath(__file__), *sys.argv[1:]])


if __name__ == "__main__":
    main()
