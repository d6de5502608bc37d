#!/usr/bin/env python3
"""Writes the options corpus: every option of every lookup and action
module enka runs natively, as the installed ansible-core documents it
(each plugin's DOCUMENTATION `options`: name, type, choices), called with
values of its type (valid ones and one Ansible refuses), alone and in
pairs, as a lookup and as a query, in loops and not. generate.py records
what each ansible-core line makes of them, as for every other case.

    <a line's python> tests/conformance/options.py          # rewrite both
    python3 tests/conformance/generate.py --groups $(… options.py --names)
    python3 tests/conformance/generate.py --plays $(… options.py --play-names)

Lookups become template cases, one group per lookup (`options_lookup_<name>`)
between the markers at the end of cases.yaml, over the corpus' files
(tests/conformance/files). Modules become play cases (`options_<module>`,
`…_in_a_loop`) between the markers at the end of plays.yaml: each call is a
task of the role whose whole registered result, every key, is the case's
result (the run's directory written `<dir>`, a pause's clock left out).
What each option is given beyond its type is in VALUES (our own choice of
fixtures: which file to read, which regex to match); what a call always
needs in BASE.
"""

import ast
import copy
import itertools
import os
import sys

import yaml

# The corpus' files and the marker writer are examples.py's (the script's
# directory is on Python's path).
from examples import CASES, PLAYS, write_between_markers

BEGIN = "# --- options: written by options.py, do not edit below ---"
END = "# --- end of options ---"

# Lookups run natively whose answer needs nothing of the machine but the
# corpus' files, with the terms each is called with.
LOOKUP_TERMS = {
    "file": "'data.txt'",
    "env": "'ENKA_CONFORMANCE'",
    "vars": "'a'",
    "template": "'simple.j2'",
    "sequence": None,
    "subelements": "users, 'groups'",
    "fileglob": "'*.txt'",
    "items": "[1, [2, 3]]",
    "indexed_items": "['x', 'y']",
    "varnames": "'^a'",
    "list": "[1, 2]",
    "nested": "[1, 2], ['a']",
    "together": "[1, 2], ['a']",
    "dict": "{'k': 1}",
}

# The group's variables: what the terms above read.
LOOKUP_VARS = {
    "a": 1,
    "ab": "two",
    "name": "x",
    "size": "3",
    "users": [{"name": "u1", "groups": ["g1", "g2"]}, {"name": "u2"}],
}

# Every lookup takes these (Ansible's own, not in DOCUMENTATION).
COMMON_LOOKUP_OPTIONS = {"errors": ["strict", "warn", "ignore", "bogus"], "wantlist": [True, False]}

# Values an option is given beyond its type's, by plugin and option.
VALUES = {
    ("template", "variable_start_string"): ["'[%'"],
    ("template", "variable_end_string"): ["'%]'"],
    ("template", "comment_start_string"): ["'[#'"],
    ("template", "comment_end_string"): ["'#]'"],
    ("template", "template_vars"): ["{'name': 'from-vars'}", "'x'"],
    ("vars", "default"): ["'fallback'", "none", "[1]"],
    ("env", "default"): ["'fallback'", "none", "1"],
    ("sequence", "start"): [0, 5, "'0x0a'", "'x'"],
    ("sequence", "end"): [3, -2, "'x'"],
    ("sequence", "count"): [2, 0, "'x'"],
    ("sequence", "stride"): [2, -1, 0],
    ("sequence", "format"): ["'n%02d'", "'%s-x'", "'%d%d'"],
    ("subelements", "skip_missing"): [True, False, "'yes'"],
    ("include_vars", "file"): ["extra/a.yml", "extra/missing.yml", "extra/d.txt"],
    ("include_vars", "dir"): ["extra", "nodir"],
    ("include_vars", "name"): ["got"],
    ("include_vars", "depth"): [0, 1, "x"],
    ("include_vars", "files_matching"): ["^a", "["],
    ("include_vars", "ignore_files"): [["a.yml"], "e.yaml"],
    ("include_vars", "extensions"): [["yml"], ["txt"], "json"],
    ("include_vars", "ignore_unknown_extensions"): [True, False],
    ("include_vars", "hash_behaviour"): ["replace", "merge", "bogus"],
    ("assert", "that"): [["1 == 1"], ["1 == 2"], "a is defined", ["nope"]],
    ("assert", "fail_msg"): ["failed {{ a }}", ["m1", "m2"]],
    ("assert", "msg"): ["failed too"],
    ("assert", "success_msg"): ["fine {{ a }}", ["s1"]],
    ("assert", "quiet"): [True, False, "maybe"],
    ("debug", "msg"): ["hi {{ a }}", ["l1", 2], {"k": "{{ a }}"}],
    # ("{{ a }}" would register a key that is an int, which 2.18's json
    # callback cannot sort: nothing to record.)
    ("debug", "var"): ["a", "nope", "a + 1"],
    ("debug", "verbosity"): [0, 2, "x"],
    ("fail", "msg"): ["stop {{ a }}", ["l"], {"k": 1}],
    ("set_fact", "cacheable"): [True, False, "maybe"],
    ("group_by", "key"): ["g_{{ a }}", ""],
    ("group_by", "parents"): ["all", ["p1", "p2"]],
    ("pause", "seconds"): [0, "0", "x"],
    ("pause", "minutes"): [0, "x"],
    ("pause", "echo"): [True, False],
}

# What a module's call always carries (an option tried is given instead).
BASE = {
    "assert": {"that": ["a == 1"]},
    "set_fact": {"fact_a": "{{ a }}"},
    "group_by": {"key": "grp"},
    "include_vars": {"dir": "extra"},
    "pause": {"seconds": 0},
}

# Options left out, and why.
LEFT_OUT = {
    ("pause", "prompt"): "waits for input from a terminal",
    ("template", "jinja2_native"): "Ansible deprecates it; the rendering mode is the line's",
    ("include_vars", "free-form"): "the same as `file`",
}

MODULES = ["assert", "debug", "fail", "set_fact", "include_vars", "pause", "group_by"]

# The role's files the include_vars calls read.
MODULE_FILES = {
    "roles/case/vars/extra/a.yml": "x: 1\nshared: {a: 1}\n",
    "roles/case/vars/extra/b.json": '{"y": 2, "shared": {"b": 2}}\n',
    "roles/case/vars/extra/e.yaml": "x: 5\n",
    "roles/case/vars/extra/d.txt": "w: 4\n",
    "roles/case/vars/extra/sub/c.yml": "z: 3\n",
}


def documentation(kind, name):
    """A plugin's DOCUMENTATION options from the installed ansible-core."""
    import ansible

    path = os.path.join(os.path.dirname(ansible.__file__), *(("plugins", "lookup") if kind == "lookup" else ("modules",)), name + ".py")
    tree = ast.parse(open(path).read())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "DOCUMENTATION" for t in node.targets):
            return (yaml.safe_load(node.value.value) or {}).get("options") or {}
    return {}


def typed_values(spec):
    """Values of an option's type: valid ones, then one Ansible refuses."""
    if spec.get("choices"):
        return list(spec["choices"]) + ["bogus"]
    return {
        "bool": [True, False, "yes", "maybe"],
        "boolean": [True, False, "yes", "maybe"],
        "int": [2, "3", "x"],
        "integer": [2, "3", "x"],
        "list": [["a", "b"], "a"],
        "dict": [{"k": 1}, "x"],
        "str": ["x", ""],
        "string": ["x", ""],
        "path": ["x"],
        "raw": ["x", 1],
    }.get(spec.get("type") or "str", ["x"])


def jinja(value):
    """A value as a Jinja literal."""
    if isinstance(value, str) and (value.startswith("'") or value in ("none",) or value.startswith(("{", "["))):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return repr(value)
    return repr(value)


def option_values(plugin, option, spec):
    return VALUES.get((plugin, option)) or typed_values(spec)


def lookup_groups():
    groups = []
    for name, terms in LOOKUP_TERMS.items():
        options = {k: v for k, v in documentation("lookup", name).items() if k != "_terms" and (name, k) not in LEFT_OUT}
        every = {k: option_values(name, k, spec) for k, spec in options.items()}
        every.update(COMMON_LOOKUP_OPTIONS)
        head = f"'{name}'" + (f", {terms}" if terms else "")
        calls = [""]
        for option, values in every.items():
            calls += [f"{option}={jinja(v)}" for v in values]
        # Pairs of options, each with its first value.
        for (a, va), (b, vb) in itertools.combinations(every.items(), 2):
            calls.append(f"{a}={jinja(va[0])}, {b}={jinja(vb[0])}")
        templates = []
        for call in calls:
            args = head + (f", {call}" if call else "")
            templates.append("{{ lookup(" + args + ") }}")
            if "wantlist" not in call:
                templates.append("{{ query(" + args + ") }}")
        groups.append({"group": f"options_lookup_{name}", "vars": copy.deepcopy(LOOKUP_VARS), "templates": templates})
    return groups


def module_calls(module):
    """Each call of `module`: its arguments."""
    options = {k: v for k, v in documentation("module", module).items() if (module, k) not in LEFT_OUT and k != "free_form"}
    base = BASE.get(module, {})
    calls = [dict(base)] if base else []
    for option, spec in options.items():
        for value in option_values(module, option, spec):
            call = {k: v for k, v in base.items() if not (option == "file" and k == "dir")}
            call[option] = value
            calls.append(call)
    for a, b in itertools.combinations(options, 2):
        call = dict(base)
        call[a] = option_values(module, a, options[a])[0]
        call[b] = option_values(module, b, options[b])[0]
        if "file" in call and "dir" in call:
            continue
        calls.append(call)
    # The same call twice is one case.
    unique = []
    for call in calls:
        if call not in unique:
            unique.append(copy.deepcopy(call))
    return unique


# Keys a result holds that differ from run to run, dropped from the
# compared results (each loop item's too): a Python traceback's text and a
# pause's clock. Python prints the valid booleans from a frozenset, in an
# order of its hash seed: the list is compared as "(a set)".
SCRUBBED_KEYS = ["exception", "start", "stop", "delta"]


def scrub_task(names):
    """A task that gathers the registered results without SCRUBBED_KEYS."""
    keys = repr(SCRUBBED_KEYS)
    one = (
        f"(r | dict2items | rejectattr('key', 'in', {keys}) | items2dict)"
        f" | combine({{'results': r.results | map('dict2items') | map('rejectattr', 'key', 'in', {keys})"
        f" | map('items2dict') | list}} if r.results is defined else {{}})"
    )
    return {
        "set_fact": {"scrubbed": "{{ scrubbed | default([]) + [" + one + "] }}"},
        "loop": "{{ [" + ", ".join(names) + "] }}",
        "loop_control": {"loop_var": "r"},
    }


def module_plays():
    plays = []
    for module in MODULES:
        calls = module_calls(module)
        for in_loop in (False, True):
            tasks, names = [], []
            for n, call in enumerate(calls):
                task = {"name": f"call {n}", module: call, "register": f"r{n}", "ignore_errors": True}
                if in_loop:
                    task["loop"] = [1, 2]
                tasks.append(task)
                names.append(f"r{n}")
            if module == "pause" and in_loop:
                continue  # each item's clock differs
            tasks.append(scrub_task(names))
            result = (
                "{{ scrubbed | to_json | replace(playbook_dir, '<dir>')"
                + " | regex_replace('Valid booleans include: [^" + '"' + "]*', 'Valid booleans include: (a set)')"
                + " | from_json }}"
            )
            files = {"roles/case/vars/main.yml": "a: 1\n", "roles/case/tasks/main.yml": yaml.safe_dump(tasks, sort_keys=False, width=1000)}
            if module == "include_vars":
                files.update(MODULE_FILES)
            plays.append({"name": f"options_{module}" + ("_in_a_loop" if in_loop else ""), "result": result, "files": files})
    return plays


# The playbook of a keyword case: the roles it lists, then the result,
# always run whatever tags the case selects.
KEYWORD_PLAYBOOK = """- hosts: localhost
  gather_facts: no
  roles: {roles}
  post_tasks:
    - set_fact:
        conformance_result: "{{{{ seen | default([]) }}}}"
      tags: [always]
    - debug:
        var: conformance_result
      tags: [always]
"""

# Appends what a task saw to `seen`.
SEEN = "- set_fact:\n    seen: \"{{{{ seen | default([]) + [{what}] }}}}\"\n"

# Tasks of every tag shape, each saying it ran and in which mode.
TAGGED_TASKS = "".join(
    SEEN.format(what=f"'{name}:' ~ ansible_check_mode").rstrip("\n") + f"\n  tags: {tags}\n"
    for name, tags in [("t1", "[t1]"), ("t2", "[t2]"), ("always", "[always]"), ("never", "[never, t3]"), ("none", "[]")]
) + SEEN.format(what="'forced:' ~ ansible_check_mode").rstrip("\n") + "\n  check_mode: false\n  tags: [t1]\n"


def keyword_plays():
    """Play and role keywords the play fuzzer does not draw: roles with
    parameters and `allow_duplicates`, `tasks_from`/`vars_from`/
    `defaults_from` in loops, tags (`never`, `always`, `tagged`,
    `untagged`) with and without check mode."""
    plays = []
    roles = "[{role: dup, x: 1}, {role: dup, x: 1}, {role: dup, x: 2}, dup, dup]"
    for allow in ("true", "false", None):
        files = {"roles/dup/tasks/main.yml": SEEN.format(what="x | default('none')")}
        if allow is not None:
            files["roles/dup/meta/main.yml"] = f"allow_duplicates: {allow}\n"
        plays.append({
            "name": f"options_role_params_allow_duplicates_{allow or 'unset'}",
            "playbook": KEYWORD_PLAYBOOK.format(roles=roles),
            "files": files,
        })
    include = (
        "- include_role:\n    name: other\n    tasks_from: \"{{ item }}\"\n    vars_from: \"{{ item }}\"\n"
        "    defaults_from: \"{{ item }}\"\n  loop: [a, b]\n"
    )
    files = {}
    for part in ("a", "b"):
        files[f"roles/other/tasks/{part}.yml"] = SEEN.format(what=f"'{part}:' ~ v ~ ':' ~ d ~ ':' ~ item")
        files[f"roles/other/vars/{part}.yml"] = f"v: vars-{part}\n"
        files[f"roles/other/defaults/{part}.yml"] = f"d: defaults-{part}\n"
    plays.append({
        "name": "options_include_role_from_in_a_loop",
        "playbook": KEYWORD_PLAYBOOK.format(roles="[case]"),
        "files": {**files, "roles/case/tasks/main.yml": include},
    })
    # A file the role does not have ends the run, ignore_errors or not.
    missing = "- include_role:\n    name: other\n    tasks_from: missing\n  ignore_errors: true\n"
    plays.append({
        "name": "options_include_role_tasks_from_missing",
        "playbook": KEYWORD_PLAYBOOK.format(roles="[case]"),
        "files": {**files, "roles/case/tasks/main.yml": missing},
    })
    selections = [
        ("all", {}), ("t1", {"tags": ["t1"]}), ("skip_t2", {"skip_tags": ["t2"]}), ("t3", {"tags": ["t3"]}),
        ("tagged", {"tags": ["tagged"]}), ("untagged", {"tags": ["untagged"]}), ("never", {"tags": ["never"]}),
        ("t1_and_never", {"tags": ["t1", "never"]}), ("t3_skip_never", {"tags": ["t3"], "skip_tags": ["never"]}),
    ]
    for name, selection in selections:
        for check in (False, True):
            case = {
                "name": f"options_tags_{name}" + ("_in_check_mode" if check else ""),
                "playbook": KEYWORD_PLAYBOOK.format(roles="[case]"),
                "files": {"roles/case/tasks/main.yml": TAGGED_TASKS},
                **selection,
            }
            if check:
                case["check"] = True
            plays.append(case)
    return plays


def write_options(path, entries, note):
    """Rewrites this script's part of `path`."""
    block = "# " + note + "\n" + yaml.safe_dump(entries, sort_keys=False, allow_unicode=True, width=1000)
    write_between_markers(path, block, BEGIN, END)


def main():
    groups = lookup_groups()
    plays = module_plays() + keyword_plays()
    if "--names" in sys.argv:
        print(",".join(g["group"] for g in groups))
        return
    if "--play-names" in sys.argv:
        print(",".join(p["name"] for p in plays))
        return
    write_options(CASES, groups, "Every option of the lookups enka runs natively, from ansible-core's DOCUMENTATION.")
    write_options(PLAYS, plays, "Every option of the action modules enka runs natively, from ansible-core's DOCUMENTATION.")
    calls = sum(p["files"].get("roles/case/tasks/main.yml", "").count("register:") for p in plays)
    print(f"options.py: {len(groups)} lookup groups, {sum(len(g['templates']) for g in groups)} templates; "
          f"{len(plays)} play cases, {calls} module calls")


if __name__ == "__main__":
    main()
