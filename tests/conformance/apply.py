#!/usr/bin/env python3
"""Records kubernetes.core's client-side apply (module_utils/apply.py) on
apply_cases.yaml into expected_apply.json, for enka's unit tests.

Run with the Ansible worker's Python (it carries kubernetes.core):
    "$(bash scripts/ansible-venv.sh)" tests/conformance/apply.py
"""
import json
import os

import yaml
from ansible.module_utils.common.dict_transformations import dict_merge
from ansible_collections.kubernetes.core.plugins.module_utils import apply

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    with open(os.path.join(HERE, "apply_cases.yaml")) as f:
        cases = yaml.safe_load(f)
    out = []
    for case in cases:
        desired = case["desired"]
        entry = {"name": case["name"]}
        actual = case.get("actual")
        if actual is None:
            entry["create"] = dict_merge(desired, apply.annotate(desired))
        else:
            if "last_applied" in case:
                actual = dict_merge(actual, apply.annotate(case["last_applied"]))
            _, patch = apply.apply_patch(actual, desired)
            entry["actual"] = actual
            entry["patch"] = None if patch == actual else patch
        out.append(entry)
    with open(os.path.join(HERE, "expected_apply.json"), "w") as f:
        json.dump({"kubernetes_core": kubernetes_core_version(), "cases": out}, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(f"apply.py: {len(out)} cases")


def kubernetes_core_version():
    manifest = os.path.join(os.path.dirname(apply.__file__), "..", "..", "MANIFEST.json")
    with open(manifest) as f:
        return json.load(f)["collection_info"]["version"]


if __name__ == "__main__":
    main()
