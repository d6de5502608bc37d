#!/usr/bin/env python3
"""Writes the documented-examples groups of cases.yaml: every template in the
EXAMPLES of ansible-core's own filter, test and lookup plugins, taken from
the installed ansible-core (never retyped), with the variables the example
itself defines. generate.py then records what each ansible-core line makes
of them, as for every other group.

    ~/.cache/enka/ansible/<hash>/venv/bin/python tests/conformance/examples.py [--docs DIR]
    python3 tests/conformance/generate.py --groups $(… examples.py --names)

`--docs DIR` (an ansible-documentation checkout) writes two plays at the
end of plays.yaml that say which of the magic variables
special_variables.rst lists a role's task sees defined (MAGIC_PLAYS;
`generate.py --plays` records them). The code blocks of the playbook
guide's pages (GUIDE) are a snapshot's material, so they are not written
here: mined.py puts them in the snapshot corpus (guide_groups).

Each plugin's examples become one group, `doc_<kind>_<plugin>`: its
templates are the `{{ … }}` expressions of its EXAMPLES, its variables the
mapping EXAMPLES is when it parses as one (`final: "{{ defaults | combine(…) }}"`
defines `final` for the others), or the `vars:` of its example tasks.
Examples whose value changes from run to run or reads the machine (random
without a seed, the time, the network, files, passwords) are left out, with
the reason in SKIPPED. The groups sit between the markers below at the end
of cases.yaml, which this script rewrites.
"""

import ast
import glob
import os
import re
import sys

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = os.path.join(HERE, "cases.yaml")
BEGIN = "# --- documented examples: written by examples.py, do not edit below ---"
END = "# --- end of documented examples ---"

# Templates left out, by a word they contain, and why.
SKIPPED = {
    "random": "a random value unless seeded (seeded ones are in seeded_random)",
    "shuffle": "a random order unless seeded",
    "now(": "the time of the run",
    "strftime": "the time of the run",
    "ansible_date_time": "a fact of the machine",
    "password": "a generated or hashed password (random salt)",
    "vault": "needs a vault secret",
    "lookup('url'": "the network",
    "lookup('ansible.builtin.url'": "the network",
    "pipe": "runs a command on the machine",
    "lines": "runs a command on the machine",
    "fileglob": "the machine's files",
    "first_found": "the machine's files",
    "ini": "the machine's files",
    "csvfile": "the machine's files",
    "lookup('file'": "the machine's files",
    "lookup('ansible.builtin.file'": "the machine's files",
    "template": "the machine's files",
    "env": "the environment of the run",
    "config": "Ansible's configuration of the machine",
    "hostvars": "an inventory",
    "groups[": "an inventory",
    "inventory_hostname": "an inventory",
    "ansible_facts": "facts of a machine",
    "realpath": "the machine's files",
    "expanduser": "the user's home directory",
    "win_": "Windows paths",
    "omit": "the omit placeholder, random per run",
    "ansible.netcommon.": "another collection's plugin, run through Ansible's worker",
    "ansible.utils.": "another collection's plugin, run through Ansible's worker",
    "community.general.merge_variables": "another collection's plugin, run through Ansible's worker",
}

# Lookups enka runs natively and whose examples need nothing of the machine.
LOOKUPS = ["dict", "indexed_items", "items", "list", "nested", "sequence", "subelements", "together", "vars", "varnames"]


def expressions(text):
    """Every `{{ … }}` in `text`, quotes respected."""
    found = []
    i = 0
    while True:
        start = text.find("{{", i)
        if start < 0:
            return found
        j, quote = start + 2, None
        while j < len(text):
            c = text[j]
            if quote:
                if c == "\\":
                    j += 1
                elif c == quote:
                    quote = None
            elif c in "'\"":
                quote = c
            elif text.startswith("}}", j):
                found.append(text[start:j + 2])
                break
            elif c == "\n" and text[start:j].count("\n") > 3:
                break
            j += 1
        i = j + 2


def example_vars(examples):
    """The variables an example defines: the mapping it is, or its tasks' `vars:`."""
    try:
        doc = yaml.safe_load(examples)
    except yaml.YAMLError:
        return {}
    found = {}
    if isinstance(doc, dict):
        found.update({k: v for k, v in doc.items() if isinstance(k, str)})
        # A play's `vars:` written as the example's mapping.
        if isinstance(found.get("vars"), dict):
            found.update(found.pop("vars"))
    elif isinstance(doc, list):
        for task in doc:
            if isinstance(task, dict) and isinstance(task.get("vars"), dict):
                found.update(task["vars"])
    return found


def python_examples(path):
    """The EXAMPLES string of a plugin's Python source."""
    with open(path) as f:
        tree = ast.parse(f.read())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "EXAMPLES" for t in node.targets):
            if isinstance(node.value, ast.Constant):
                return node.value.value
    return ""


def sources():
    import ansible

    plugins = os.path.join(os.path.dirname(ansible.__file__), "plugins")
    for kind in ("filter", "test"):
        for path in sorted(glob.glob(os.path.join(plugins, kind, "*.yml"))):
            with open(path) as f:
                doc = yaml.safe_load(f)
            examples = (doc or {}).get("EXAMPLES") or ""
            yield kind, os.path.splitext(os.path.basename(path))[0], examples
    for name in LOOKUPS:
        path = os.path.join(plugins, "lookup", f"{name}.py")
        if os.path.exists(path):
            yield "lookup", name, python_examples(path)


GUIDE = ["playbooks_filters", "playbooks_tests", "playbooks_loops", "playbooks_conditionals",
         "playbooks_variables", "complex_data_manipulation"]


def code_blocks(rst):
    """The indented code blocks of an reStructuredText page."""
    blocks, lines, i = [], rst.splitlines(), 0
    while i < len(lines):
        if lines[i].strip().startswith(".. code-block::") or lines[i].rstrip().endswith("::"):
            i += 1
            body = []
            while i < len(lines) and (not lines[i].strip() or lines[i].startswith((" ", "\t"))):
                if lines[i].strip().startswith(":"):
                    i += 1
                    continue
                body.append(lines[i])
                i += 1
            text = "\n".join(body)
            indent = min((len(l) - len(l.lstrip()) for l in body if l.strip()), default=0)
            blocks.append("\n".join(l[indent:] for l in body))
        else:
            i += 1
    return blocks


def guide_vars(block):
    """The variables a guide's block defines: its own mapping, plays' and tasks' `vars:`."""
    try:
        doc = yaml.safe_load(block)
    except yaml.YAMLError:
        return {}
    found = {}

    def walk(node):
        if isinstance(node, dict):
            if isinstance(node.get("vars"), dict):
                found.update(node["vars"])
            for key in ("tasks", "pre_tasks", "post_tasks", "block"):
                if isinstance(node.get(key), list):
                    for task in node[key]:
                        walk(task)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    if isinstance(doc, dict) and not any(k in doc for k in ("hosts", "tasks", "name", "vars")):
        found.update({k: v for k, v in doc.items() if isinstance(k, str)})
    walk(doc)
    return found


def guide_sources(docs):
    """The playbook guide's pages of an ansible-documentation checkout."""
    for page in GUIDE:
        path = os.path.join(docs, "docs", "docsite", "rst", "playbook_guide", page + ".rst")
        with open(path) as f:
            rst = f.read()
        for n, block in enumerate(code_blocks(rst)):
            if "{{" in block:
                yield "guide", f"{page.removeprefix('playbooks_')}_{n}", block, guide_vars(block)


def groups():
    """The plugins' examples, one group each."""
    return [
        group
        for kind, name, examples in sources()
        if (group := example_group(f"doc_{kind}_{name}", examples, example_vars(examples)))
    ]


def guide_groups(docs):
    """The playbook guide's blocks, one group each, from an
    ansible-documentation tree at `docs` (mined.py calls this: the guide is
    a snapshot, so its groups live in the snapshot corpus, never in
    cases.yaml)."""
    return [
        group
        for kind, name, block, variables in guide_sources(docs)
        if (group := example_group(f"doc_{kind}_{name}", block, variables))
    ]


def example_group(name, examples, variables):
    """A group of an example's templates, or None when nothing is left."""
    templates = []
    for expr in expressions(examples):
        if any(word in expr for word in SKIPPED) and not ("seed=" in expr):
            continue
        if expr not in templates:
            templates.append(expr)
    # Variables that read what is left out leave out the whole example.
    defined = yaml.safe_dump(variables)
    if templates and not any(word in defined for word in SKIPPED):
        return {"group": name, "vars": variables, "templates": templates}
    return None


PLAYS = os.path.join(HERE, "plays.yaml")
MAGIC_PLAYS = ("doc_special_variables_in_a_role", "doc_special_variables_in_a_loop")


def magic_variables(docs):
    """The names special_variables.rst lists under "Magic variables"."""
    path = os.path.join(docs, "docs", "docsite", "rst", "reference_appendices", "special_variables.rst")
    with open(path) as f:
        text = f.read()
    section = text[text.index("Magic variables"):text.index("\nFacts\n")]
    return re.findall(r"^    ([a-z_]+)$", section, re.M)


def magic_plays(docs):
    """Plays that say which documented magic variables a role's task, and a
    loop's item with extended loop information, sees defined."""
    names = magic_variables(docs)
    seen = "{{ {" + ", ".join(f"'{n}': {n} is defined" for n in names) + "} }}"
    role = "- set_fact:\n    seen: " + yaml.safe_dump(seen, width=100000).strip().removesuffix("...").strip() + "\n"
    loop = (
        "- set_fact:\n    seen: " + yaml.safe_dump(seen, width=100000).strip().removesuffix("...").strip()
        + "\n  loop: [1]\n  loop_control: {extended: true, index_var: i}\n"
    )
    return [
        {"name": MAGIC_PLAYS[0], "result": "{{ seen }}", "files": {"roles/case/tasks/main.yml": role}},
        {"name": MAGIC_PLAYS[1], "result": "{{ seen }}", "files": {"roles/case/tasks/main.yml": loop}},
    ]


def write_magic_plays(docs):
    """Rewrites the magic-variable plays at the end of plays.yaml."""
    block = yaml.safe_dump(magic_plays(docs), sort_keys=False, allow_unicode=True, width=100000)
    write_between_markers(PLAYS, "# From special_variables.rst of ansible-documentation.\n" + block)


def write_between_markers(path, block, begin=BEGIN, end=END):
    """Rewrites what lies between the markers `begin` and `end` in `path`
    (at the end when there are none), keeping what follows them: each
    generator owns its own pair (options.py's too)."""
    with open(path) as f:
        text = f.read()
    after = ""
    if begin in text:
        text, rest = text.split(begin, 1)
        after = rest.split(end, 1)[1] if end in rest else ""
    after = after.strip("\n")
    with open(path, "w") as f:
        f.write(text.rstrip("\n") + "\n\n" + begin + "\n" + block + end + "\n" + (f"\n{after}\n" if after else ""))


def main():
    found = groups()
    if "--names" in sys.argv:
        print(",".join(g["group"] for g in found))
        return
    if "--docs" in sys.argv:
        write_magic_plays(sys.argv[sys.argv.index("--docs") + 1])
    block = yaml.safe_dump(found, sort_keys=False, allow_unicode=True, width=1000)
    write_between_markers(CASES, "# From ansible-core's plugin documentation (EXAMPLES), installed.\n" + block)
    print(f"examples.py: {len(found)} groups, {sum(len(g['templates']) for g in found)} templates")


if __name__ == "__main__":
    main()
