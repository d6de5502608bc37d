#!/usr/bin/env python3
"""Writes expected.json: what real ansible-core 2.18 makes of every case in
cases.yaml. enka's conformance test replays the same cases and compares
value and type.

    python3 tests/conformance/generate.py          # sets up a venv, then runs
    python3 tests/conformance/generate.py --groups found   # those groups only
    python3 tests/conformance/generate.py --line 2.19      # another ansible-core line
    python3 tests/conformance/generate.py --plays a,b      # those play cases only
    python3 tests/conformance/generate.py --corpus DIR     # DIR/cases.yaml into DIR

`--corpus DIR` records the snapshot corpus mined.py wrote into DIR (its
cases.yaml) into DIR/expected[-LINE].json, beside it: that corpus is
public repositories' material, so neither it nor what is recorded of it is
committed.

`--line 2.19` (or 2.21) records the same corpus from that ansible-core
release line, with the interpreter `scripts/ansible-venv.sh LINE` makes,
into expected-LINE.json and expected_plays-LINE.json; the default line is
2.18, into expected.json and expected_plays.json.

The script installs ansible 11 (which pins ansible-core 2.18 and carries
community.general for json_query) and jmespath from PyPI into a virtualenv under ~/.cache/enka (override with
ENKA_CONFORMANCE_VENV) and re-executes itself there. CI never runs it: the
results are committed as data.
"""

import json
import os
import platform
import subprocess
import sys
import venv

from oracle import plain

HERE = os.path.dirname(os.path.abspath(__file__))
VENV = os.environ.get(
    "ENKA_CONFORMANCE_VENV",
    os.path.join(os.path.expanduser("~"), ".cache", "enka", "ansible-core-2.18-venv"),
)
# The `ansible` bundle 11.x pins ansible-core 2.18 and carries
# community.general, where json_query lives (routed from the short name).
REQUIREMENTS = ["ansible>=11,<12", "jmespath"]


def line_argument():
    """The ansible-core line asked for: None for the default (2.18)."""
    if "--line" in sys.argv:
        line = sys.argv[sys.argv.index("--line") + 1]
        return None if line == "2.18" else line
    return None


def corpus_dir():
    """Where the corpus and what is recorded of it live: this directory, or
    the snapshot corpus' (`--corpus DIR`)."""
    if "--corpus" in sys.argv:
        return os.path.abspath(sys.argv[sys.argv.index("--corpus") + 1])
    return HERE


def at_files(value, files):
    """`value` with the corpus' files directory written `<files>`."""
    if isinstance(value, str):
        return value.replace(files, "<files>")
    if isinstance(value, list):
        return [at_files(item, files) for item in value]
    if isinstance(value, dict):
        return {key: at_files(item, files) for key, item in value.items()}
    return value


def output_name(stem):
    """expected.json for the default line, expected-2.19.json for 2.19."""
    line = line_argument()
    name = f"{stem}.json" if line is None else f"{stem}-{line}.json"
    return os.path.join(corpus_dir(), name)


def ensure_venv():
    line = line_argument()
    if line is not None:
        # That line's interpreter, as the tests get it; it re-runs this
        # script, which then finds the line's ansible-core imported.
        if os.environ.get("ENKA_CONFORMANCE_LINE") == line:
            return
        root = os.path.dirname(os.path.dirname(HERE))
        python = subprocess.run(
            ["bash", os.path.join(root, "scripts", "ansible-venv.sh"), line],
            check=True, capture_output=True, text=True,
        ).stdout.strip()
        os.environ["ENKA_CONFORMANCE_LINE"] = line
        os.execv(python, [python, __file__, *sys.argv[1:]])
    python = os.path.join(VENV, "bin", "python3")
    if os.path.realpath(sys.prefix) == os.path.realpath(VENV):
        return
    if not os.path.exists(python):
        print(f"generate.py: creating {VENV}", file=sys.stderr)
        venv.create(VENV, with_pip=True)
    subprocess.run([python, "-m", "pip", "install", "-q", *REQUIREMENTS], check=True)
    os.execv(python, [python, __file__, *sys.argv[1:]])


def main():
    ensure_venv()
    import yaml
    import ansible
    from oracle import Oracle

    if "--plays" in sys.argv:
        # `--plays a,b` records those play cases alone, keeping the others.
        plays(ansible.__version__, set(sys.argv[sys.argv.index("--plays") + 1].split(",")))
        return
    files = os.path.join(HERE, "files")
    os.environ["ENKA_CONFORMANCE"] = "from-env"
    os.environ.pop("ENKA_CONFORMANCE_UNSET", None)
    with open(os.path.join(corpus_dir(), "cases.yaml")) as f:
        groups = yaml.safe_load(f)

    # `--groups a,b` records those groups alone, keeping every other
    # recorded case as it is (the fuzzer saves what it finds so).
    only = None
    if "--groups" in sys.argv:
        only = set(sys.argv[sys.argv.index("--groups") + 1].split(","))
    oracle = Oracle(files)
    results = []
    for group in groups:
        if only is not None and group["group"] not in only:
            continue
        base_vars = dict(group.get("vars") or {})
        cases = [("template", t) for t in group.get("templates") or []]
        cases += [("condition", c) for c in group.get("conditions") or []]
        for index, (kind, source) in enumerate(cases):
            entry = {"id": f"{group['group']}/{index}", "kind": kind, "source": source}
            if source in (group.get("origins") or {}):
                entry["origin"] = group["origins"][source]
            entry.update(oracle.answer(kind, source, base_vars))
            # Errors name where a value came from (2.19 on), and lookups
            # (`fileglob`, `first_found`) give paths: the corpus' own
            # directory, wherever the repository is checked out.
            entry = at_files(entry, files)
            results.append(entry)

    if only is not None:
        # In the corpus' order, so a partial recording changes only its own
        # groups' lines; a group no longer in the corpus is dropped.
        order = {group["group"]: i for i, group in enumerate(groups)}
        with open(output_name("expected")) as f:
            kept = [
                c for c in json.load(f)["cases"]
                if c["id"].split("/")[0] not in only and c["id"].split("/")[0] in order
            ]
        position = lambda case: (order.get(case["id"].split("/")[0], len(order)), int(case["id"].split("/")[1]))
        results = sorted(kept + results, key=position)
    out = {
        "ansible_core": ansible.__version__,
        # Filters that are Python's own functions answer as this one does.
        "python": platform.python_version(),
        "cases": results,
    }
    with open(output_name("expected"), "w") as f:
        json.dump(out, f, indent=1, ensure_ascii=False, sort_keys=False)
        f.write("\n")
    ok = sum(1 for r in results if r["ok"])
    print(f"generate.py: {len(results)} cases from ansible-core {ansible.__version__} ({ok} succeed, {len(results) - ok} fail)")
    if only is None and "--no-plays" not in sys.argv and "--corpus" not in sys.argv:
        plays(ansible.__version__)


PLAYBOOK = """- hosts: localhost
  gather_facts: no
  roles: [case]
  post_tasks:
    - set_fact:
        conformance_result: {result}
    - debug:
        var: conformance_result
"""


# A callback that records what upstream's ansible-operator collects for a
# custom resource's Failure condition: the `msg` of each failed result not
# ignored (Ansible Runner's runner_on_failed events), in order.
FAILURES_CALLBACK = """
import json, os
from ansible.plugins.callback import CallbackBase

class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "conformance_failures"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.messages = []

    def v2_runner_on_failed(self, result, ignore_errors=False):
        if ignore_errors:
            return
        msg = result._result.get("msg")
        self.messages.append(msg if isinstance(msg, str) else "unknown playbook failure")

    def v2_playbook_on_stats(self, stats):
        with open(os.environ["CONFORMANCE_FAILURES"], "w") as f:
            json.dump(self.messages, f)
"""


def command_line(case):
    """What a play case asks of ansible-playbook's command line."""
    words = []
    if case.get("tags"):
        words += ["--tags", ",".join(case["tags"])]
    if case.get("skip_tags"):
        words += ["--skip-tags", ",".join(case["skip_tags"])]
    if case.get("check"):
        words.append("--check")
    return words


def plays(version, only=None):
    """Runs each case of plays.yaml (or those named in `only`, keeping the
    others as recorded) with ansible-playbook."""
    import tempfile
    import yaml

    with open(os.path.join(HERE, "plays.yaml")) as f:
        cases = yaml.safe_load(f)
    kept = {}
    if only is not None:
        with open(output_name("expected_plays")) as f:
            kept = {c["name"]: c for c in json.load(f)["cases"]}
    results = []
    for case in cases:
        if only is not None and case["name"] not in only:
            if case["name"] in kept:
                results.append(kept[case["name"]])
            continue
        with tempfile.TemporaryDirectory() as tmp:
            for rel, content in (case.get("files") or {}).items():
                path = os.path.join(tmp, rel)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w") as f:
                    f.write(content)
            with open(os.path.join(tmp, "play.yml"), "w") as f:
                # A case may bring its own playbook (several hosts): its
                # last play sets conformance_result on localhost.
                f.write(case.get("playbook") or PLAYBOOK.format(result=json.dumps(case["result"])))
            inventory = "localhost,"
            if case.get("inventory"):
                inventory = os.path.join(tmp, "inventory")
                with open(inventory, "w") as f:
                    f.write(case["inventory"])
            with open(os.path.join(tmp, "extra.json"), "w") as f:
                json.dump(case.get("extra_vars") or {}, f)
            callbacks = os.path.join(tmp, "callback_plugins")
            os.makedirs(callbacks)
            with open(os.path.join(callbacks, "conformance_failures.py"), "w") as f:
                f.write(FAILURES_CALLBACK)
            failures_file = os.path.join(tmp, "failures.json")
            env = dict(
                os.environ,
                ANSIBLE_STDOUT_CALLBACK="json",
                ANSIBLE_LOCALHOST_WARNING="False",
                ANSIBLE_INVENTORY_UNPARSED_WARNING="False",
                ANSIBLE_DEPRECATION_WARNINGS="False",
                ANSIBLE_NOCOLOR="1",
                # Modules run by the venv's Python (the discovered system one
                # may lack what ansible-core's modules need).
                ANSIBLE_PYTHON_INTERPRETER=sys.executable,
                ANSIBLE_CALLBACK_PLUGINS=callbacks,
                ANSIBLE_CALLBACKS_ENABLED="conformance_failures",
                CONFORMANCE_FAILURES=failures_file,
            )
            proc = subprocess.run(
                [sys.executable, "-m", "ansible.cli.playbook", "-i", inventory, "-c", "local", "play.yml", "-e", "@extra.json", *command_line(case)],
                cwd=tmp, env=env, capture_output=True, text=True,
            )
            failures = None
            if os.path.exists(failures_file):
                with open(failures_file) as f:
                    # The case's directory is a fresh one each run.
                    failures = [m.replace(tmp, "<dir>") for m in json.load(f)]
        entry = {"name": case["name"]}
        # What a module prints itself (pause's "Pausing for 1 seconds")
        # comes before the callback's report.
        stdout = proc.stdout
        if not stdout.startswith("{") and "\n{\n" in stdout:
            stdout = stdout[stdout.index("\n{\n") + 1:]
        try:
            report = json.loads(stdout)
        except ValueError:
            entry.update(ok=False, error=(proc.stdout + proc.stderr)[-300:])
            results.append(entry)
            continue
        value = None
        found = False
        failure = None
        for play in report.get("plays", []):
            for task in play.get("tasks", []):
                host = task.get("hosts", {}).get("localhost", {})
                if "conformance_result" in host:
                    value, found = host["conformance_result"], True
                if host.get("failed") and not host.get("ignore_errors") and failure is None:
                    failure = host.get("msg", "failed")
        if found:
            data, type_name = plain(value)
            entry.update(ok=True, value=data, type=type_name)
        else:
            entry.update(ok=False, error=str(failure)[:300])
        # The play recap, as upstream's operator copies it into a custom
        # resource's ansibleResult (the post_tasks' two tasks included).
        recap = report.get("stats", {}).get("localhost")
        if recap is not None:
            entry["stats"] = {key: recap.get(key, 0) for key in ("ok", "changed", "skipped", "failures")}
        if failures is not None:
            entry["failure_messages"] = failures
        results.append(entry)
    with open(output_name("expected_plays"), "w") as f:
        json.dump({"ansible_core": version, "python": platform.python_version(), "cases": results}, f, indent=1, ensure_ascii=False)
        f.write("\n")
    ok = sum(1 for r in results if r["ok"])
    print(f"generate.py: {len(results)} play cases ({ok} succeed, {len(results) - ok} fail)")


if __name__ == "__main__":
    main()
