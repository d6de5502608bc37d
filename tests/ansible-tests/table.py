#!/usr/bin/env python3
"""Prints target/ansible-tests/report.json as the markdown table of
docs/compatibility.md: the targets issue 18 names first, then every other
applicable target, then those that do not count with their reason."""

import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NAMED = ("filter_core filter_mathstuff filter_urls filter_urlsplit test_core test_files test_mathstuff "
         "lookup_dict lookup_env lookup_file lookup_fileglob lookup_first_found lookup_indexed_items "
         "lookup_items lookup_lines lookup_list lookup_nested lookup_sequence lookup_subelements "
         "lookup_template lookup_together lookup_vars lookup_varnames loops loop_control until "
         "conditionals changed_when failed_when blocks include_import includes register set_fact omit "
         "var_precedence var_templating var_blending templating template template_jinja2_non_native "
         "special_vars roles_var_inheritance unsafe_writes").split()


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    named_only = "--named" in sys.argv
    path = args[0] if args else os.path.join(ROOT, "target", "ansible-tests", "report.json")
    with open(path, encoding="utf-8") as f:
        report = json.load(f)
    by_name = {t["target"]: t for t in report["targets"]}
    print(report["summary"] + " (ansible-core %s)\n" % report["ansible_core"])
    print("| target | result | assert tasks passed | first failure |\n|---|---|---|---|")

    def row(t):
        if t["result"] == "not applicable":
            return "| %s | n/a | | %s |" % (t["target"], t["reason"])
        detail = ""
        if t["result"] == "fail":
            detail = "%s: %s" % (t.get("location", "?"), t.get("message", ""))
            detail = detail.replace(ROOT + "/target/ansible-tests/work/integration/", "")
            detail = detail.replace(ROOT + "/", "")
            detail = detail.replace("|", "\\|").replace("\n", " ")[:160]
        return "| %s | %s | %d of %d | %s |" % (t["target"], t["result"], t["asserts_passed"], t["asserts"], detail)

    for name in NAMED:
        if name in by_name:
            print(row(by_name[name]))
        else:
            print("| %s | not a POSIX target of this version | | |" % name)
    if named_only:
        return
    rest = [t for t in report["targets"] if t["target"] not in NAMED]
    for t in rest:
        if t["result"] != "not applicable":
            print(row(t))
    for t in rest:
        if t["result"] == "not applicable":
            print(row(t))


if __name__ == "__main__":
    main()
