#!/usr/bin/env python3
"""Records what kubernetes.core (and operator_sdk.util) register when the API
server refuses each task of tests/refusals/roles/refusals, as the expected
data of tests/integration/refusals.rs.

    python3 tests/refusals/record.py   # scripts/ansible-venv.sh's ansible-core

It starts a local control plane (the kube-env crate, as `make kube-env`
does), installs the Refusal CRD, runs the role with real ansible-playbook on
localhost in a fresh namespace, reads back the ConfigMap the role writes, and
writes tests/refusals/expected.json with the versions it ran. The test puts
enka's results through the same `normalize` (tests/integration/refusals.rs
mirrors it) before comparing.
"""

import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SHARED = os.environ.get("ENKA_SHARED_DIR", os.path.join(os.path.dirname(ROOT), "shared"))
NAMESPACE = "refusals-recorded"


def run(*args, **kwargs):
    proc = subprocess.run(args, text=True, capture_output=True, **kwargs)
    if proc.returncode != 0:
        sys.exit(f"record.py: {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}")
    return proc.stdout.strip()


def versions(python):
    code = (
        "import json, ansible.release as r, importlib.metadata as m\n"
        "import os, ansible_collections.kubernetes.core as k\n"
        "manifest = json.load(open(os.path.join(list(k.__path__)[0], 'MANIFEST.json')))\n"
        "print(json.dumps({'ansible_core': r.__version__,"
        " 'kubernetes_core': manifest['collection_info']['version'],"
        " 'kubernetes': m.version('kubernetes')}))\n"
    )
    return json.loads(run(python, "-c", code))


def main():
    python = run("bash", os.path.join(ROOT, "scripts/ansible-venv.sh"))
    bin_dir = os.path.dirname(python)
    kube_bin = run("bash", os.path.join(ROOT, "tools/kube-env/build.sh"))
    kubectl = os.path.join(kube_bin, "kubectl")
    recorded_with = versions(python)
    with tempfile.TemporaryDirectory() as work:
        env_dir = os.path.join(work, "kube-env")
        kube_env = ["cargo", "run", "--quiet", "-p", "kube-env", "--"]
        env = dict(os.environ, ENKA_KUBE_BIN_DIR=kube_bin)
        run(*kube_env, "up", "--dir", env_dir, "--nodes", "0", cwd=ROOT, env=env)
        try:
            env["KUBECONFIG"] = os.path.join(env_dir, "kubeconfig")
            run(kubectl, "apply", "-f", os.path.join(HERE, "config/crd.yaml"), env=env)
            run(kubectl, "wait", "--for=condition=Established", "crd/refusals.refusals.enka.dev", env=env)
            run(kubectl, "create", "namespace", NAMESPACE, env=env)
            playbook = os.path.join(work, "record.yml")
            with open(playbook, "w") as handle:
                handle.write("- hosts: localhost\n  gather_facts: false\n  roles: [refusals]\n")
            extra = {
                "ansible_operator_meta": {"name": "recorded", "namespace": NAMESPACE},
                "ansible_python_interpreter": python,
            }
            env.update(
                ANSIBLE_ROLES_PATH=os.path.join(HERE, "roles"),
                ANSIBLE_COLLECTIONS_PATH=os.path.join(SHARED, "operators/collections"),
                ANSIBLE_LOCALHOST_WARNING="False",
                ANSIBLE_INVENTORY_UNPARSED_WARNING="False",
            )
            proc = subprocess.run(
                [os.path.join(bin_dir, "ansible-playbook"), playbook, "-e", json.dumps(extra)],
                env=env, text=True, capture_output=True,
            )
            if proc.returncode != 0:
                sys.exit(f"record.py: ansible-playbook failed:\n{proc.stdout}\n{proc.stderr}")
            raw = run(kubectl, "-n", NAMESPACE, "get", "configmap", "refusal-results",
                      "-o", "jsonpath={.data.results}", env=env)
        finally:
            run(*kube_env, "down", "--dir", env_dir, cwd=ROOT, env=env)
    results = {name: normalize(result, NAMESPACE) for name, result in json.loads(raw).items()}
    with open(os.path.join(HERE, "expected.json"), "w") as handle:
        json.dump({**recorded_with, "cases": results}, handle, indent=1, sort_keys=True)
        handle.write("\n")
    print(f"record.py: {len(results)} cases")


# What differs on every run or names the machine, dropped or masked on both
# sides (tests/integration/refusals.rs's `normalize` does the same); and
# ownerReferences, which the operator adds (upstream's proxy as enka does)
# and ansible-playbook alone does not.
DROPPED = {"invocation", "exception", "duration", "uid", "resourceVersion",
           "creationTimestamp", "managedFields", "lastTransitionTime", "lastUpdateTime",
           "ownerReferences"}
HEADERS = re.compile(r"'(Audit-Id|audit-id|Date|date|X-Kubernetes-Pf-Flowschema-Uid|X-Kubernetes-Pf-Prioritylevel-Uid)': '[^']*'")


def last_line(text):
    """A module's stderr is a Python traceback: its last line names the error."""
    lines = [line for line in str(text).splitlines() if line.strip()]
    return lines[-1] if lines else ""


def normalize(value, namespace):
    if isinstance(value, dict):
        return {k: normalize(last_line(v) if k == "module_stderr" else v, namespace)
                for k, v in value.items() if k not in DROPPED}
    if isinstance(value, list):
        return [normalize(v, namespace) for v in value]
    if isinstance(value, str):
        # Python's own traceback frames (paths of this machine's venv).
        value = value.split("\nOriginal traceback:")[0]
        value = HEADERS.sub(lambda m: f"'{m.group(1)}': '<masked>'", value)
        return value.replace(namespace, "<namespace>")
    return value


if __name__ == "__main__":
    main()
