#!/usr/bin/env python3
"""Writes the snapshot corpus: every template file, templated string and
condition of the public roles and operators mined_sources.yaml names, with
the variables their defaults, vars and sample custom resources give, and the
code blocks of the playbook guide (an ansible-documentation snapshot).

    <ansible-core 2.18 python> tests/conformance/mined.py [--mirror DIR] [--out DIR]

The snapshots are public repositories fetched onto the machine (DIR, by
default $ENKA_MIRROR or /work/.mirror, holds `owner+name/repo`, a bare git
directory); each is read at the commit the manifest pins, so the corpus is
the same on every run. Nothing of theirs is committed here: the corpus, and
what generate.py records of it (`--corpus DIR`), live in the output
directory (target/conformance-snapshots by default), which `make
conformance-snapshots` builds and replays.

Each role is one group, `wild_<owner>_<name>_<role>`: its templates are the
role's template files (whole) and every string of its task and handler
files, defaults and vars that holds `{{` or `{%`; its conditions are the
`when`, `changed_when`, `failed_when`, `until` and `assert` `that` of its
tasks. A case whose free variables are not all defined by the role's
defaults, vars and sample (a registered result, a fact, a loop's item) is
left out, as is one that reads the cluster, the machine or the time
(LEFT_OUT), each counted with its reason. Every case keeps its origin
(`path:line` in its repository), the name mined_known.yaml lists known
disagreements by.
"""

import collections
import json
import os
import re
import subprocess
import sys

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MANIFEST = os.path.join(HERE, "mined_sources.yaml")

# Templates left out, by a word they contain, and why (beside the words
# examples.py leaves out of the documented examples).
LEFT_OUT = {
    "lookup('k8s'": "reads the cluster",
    'lookup("k8s"': "reads the cluster",
    "query('k8s'": "reads the cluster",
    'query("k8s"': "reads the cluster",
    "k8s_": "reads the cluster",
    "kubernetes.core": "reads the cluster",
    "community.kubernetes": "reads the cluster",
    "lookup(": "a lookup of the machine, the cluster or the run",
    "query(": "a lookup of the machine, the cluster or the run",
    "q(": "a lookup of the machine, the cluster or the run",
    "now(": "the time of the run",
    "strftime": "the time of the run",
    "to_datetime": "the time of the run",
    "ansible_date_time": "a fact of the machine",
    "ansible_facts": "facts of a machine",
    "ansible_env": "the environment of the run",
    "hostvars": "an inventory",
    "groups[": "an inventory",
    "inventory_": "an inventory",
    "| random": "a random value",
    "|random": "a random value",
    "random(": "a random value",
    "shuffle": "a random order",
    "password_hash": "a hashed password (random salt)",
    "vault": "needs a vault secret",
    "{% include": "includes another file",
    "{% import": "imports another file",
    "{% from": "imports another file",
    "{% extends": "extends another file",
    "{%- include": "includes another file",
    "{%- import": "imports another file",
    "{%- from": "imports another file",
    "{%- extends": "extends another file",
}

# Names a role's task sees that the template harness does not define.
RUN_TIME_NAMES = "a value the run makes (a registered result, a fact, an item, a magic variable)"

# The ansible-documentation commit the playbook guide's blocks are read at.
DOCS_COMMIT = "ef72400cc2f70f974ffbb30b63098b31dbd36b07"

CONDITION_KEYS = ("when", "changed_when", "failed_when", "until")
ASSERT = ("assert", "ansible.builtin.assert", "ansible.legacy.assert")


def git(git_dir, *args):
    return subprocess.run(["git", f"--git-dir={git_dir}", *args], check=True, capture_output=True).stdout


def load_yaml(text, origin):
    """A file read as Ansible reads it (PyYAML 1.1, Ansible's tags); None
    when it does not parse."""
    from ansible.parsing.yaml.loader import AnsibleLoader

    try:
        return AnsibleLoader(text, file_name=origin).get_single_data()
    except Exception:
        return None


def plain(value):
    """Ansible's YAML objects as JSON-able data (a date as Ansible's
    text)."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, bool) or value is None or isinstance(value, (int, float)):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def line_of(value):
    pos = getattr(value, "ansible_pos", None)
    return pos[1] if pos else 0


def templated(value):
    return isinstance(value, str) and ("{{" in value or "{%" in value)


class Role:
    """What one role contributes: variables, templates, conditions, and
    the tasks that loop, each with what it templates per item."""

    def __init__(self, group):
        self.group = group
        self.vars = {}
        self.templates = []  # (source, origin)
        self.conditions = []
        self.loops = []  # Loop

    def add(self, kind, source, origin):
        target = self.templates if kind == "template" else self.conditions
        if all(s != source for s, _ in target):
            target.append((source, origin))


class Loop(Role):
    """A task's loop: its keyword, what it loops over, the name of its
    item, and the task's templates and conditions, rendered per item."""

    def __init__(self, keyword, over, loop_var, origin):
        super().__init__(None)
        self.keyword = keyword
        self.over = over
        self.loop_var = loop_var
        self.origin = origin



def walk_strings(node, path, role, origin_path):
    """Every templated string under a task's or a vars file's node."""
    if isinstance(node, dict):
        for key, value in node.items():
            walk_strings(value, path + [key], role, origin_path)
    elif isinstance(node, list):
        for item in node:
            walk_strings(item, path, role, origin_path)
    elif templated(node):
        role.add("template", str(node), f"{origin_path}:{line_of(node)}")


LOOP_KEYWORDS = ("loop", "with_items", "with_list", "with_dict")


def walk_tasks(tasks, role, origin_path):
    for task in tasks if isinstance(tasks, list) else []:
        if not isinstance(task, dict):
            continue
        for key in ("block", "rescue", "always"):
            if isinstance(task.get(key), list):
                walk_tasks(task[key], role, origin_path)
        keyword = next((k for k in LOOP_KEYWORDS if k in task), None)
        target = role
        if keyword is not None:
            control = task.get("loop_control") if isinstance(task.get("loop_control"), dict) else {}
            target = Loop(keyword, task[keyword], str(control.get("loop_var") or "item"), f"{origin_path}:{line_of(task)}")
            # What it loops over is templated once, as the role's.
            walk_strings(task[keyword], [keyword], role, origin_path)
            role.loops.append(target)
        for key, value in task.items():
            if key in ("block", "rescue", "always", "loop_control") or key == keyword:
                continue
            walk_task_key(key, value, target, origin_path)


def walk_task_key(key, value, role, origin_path):
    """One keyword of a task: conditions, an assert's `that`, or strings."""
    if key in CONDITION_KEYS:
        for cond in value if isinstance(value, list) else [value]:
            if isinstance(cond, str) and cond.strip():
                role.add("condition", str(cond), f"{origin_path}:{line_of(cond)}")
    elif key in ASSERT and isinstance(value, dict):
        that = value.get("that")
        for cond in that if isinstance(that, list) else [that]:
            if isinstance(cond, str) and cond.strip():
                role.add("condition", str(cond), f"{origin_path}:{line_of(cond)}")
        walk_strings({k: v for k, v in value.items() if k != "that"}, [key], role, origin_path)
    else:
        walk_strings(value, [key], role, origin_path)


def to_snake(key):
    """camelCase as upstream's parameter conversion writes it, for the
    common shapes (acronyms folded as one word)."""
    key = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", key)
    key = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", key)
    return key.replace("-", "_").lower()


def snake_keys(value):
    if isinstance(value, dict):
        return {to_snake(k): snake_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [snake_keys(v) for v in value]
    return value


def sample_vars(sample):
    """The extra vars upstream gives a run over the sample custom resource."""
    api_version = str(sample.get("apiVersion") or "")
    group = api_version.rsplit("/", 1)[0] if "/" in api_version else ""
    kind = str(sample.get("kind") or "")
    meta = sample.get("metadata") or {}
    spec = sample.get("spec") if isinstance(sample.get("spec"), dict) else {}
    found = snake_keys(plain(spec))
    found["ansible_operator_meta"] = {"name": str(meta.get("name") or "example"), "namespace": str(meta.get("namespace") or "default")}
    object_var = f"_{group}_{kind.lower()}".replace(".", "_").replace("-", "_")
    found[object_var] = plain(sample)
    found[object_var + "_spec"] = plain(spec)
    return found


class Repository:
    def __init__(self, source, mirror):
        self.source = source
        owner_name = source["repo"].replace("/", "+")
        # A snapshot is a bare directory or a clone's `.git`.
        candidates = [os.path.join(mirror, owner_name, "repo", ".git"), os.path.join(mirror, owner_name, "repo")]
        self.git_dir = next((c for c in candidates if os.path.isfile(os.path.join(c, "HEAD"))), candidates[-1])
        if not os.path.isdir(self.git_dir):
            sys.exit(f"mined.py: no snapshot of {source['repo']} at {self.git_dir}: fetch it (github:{source['repo']}) or pass --mirror")
        self.commit = source["commit"]
        self.files = git(self.git_dir, "ls-tree", "-r", "--name-only", self.commit).decode().splitlines()

    def read(self, path):
        try:
            return git(self.git_dir, "show", f"{self.commit}:{path}").decode("utf-8")
        except (subprocess.CalledProcessError, UnicodeDecodeError):
            return None

    def yaml(self, path):
        text = self.read(path)
        return None if text is None else load_yaml(text, path)

    def first(self, *paths):
        for path in paths:
            if path in self.files:
                return path
        return None

    def samples(self):
        """Sample custom resources by kind."""
        found = {}
        for path in self.source.get("samples") or []:
            text = self.read(path)
            if text is None:
                continue
            try:
                docs = list(yaml.safe_load_all(text))
            except yaml.YAMLError:
                continue
            for doc in docs:
                if isinstance(doc, dict) and doc.get("kind"):
                    found.setdefault(str(doc["kind"]), doc)
        return found

    def watched_kinds(self):
        """Role name → kind, from the project's watches.yaml."""
        found = {}
        for path in self.files:
            if path.endswith("watches.yaml") and "molecule" not in path:
                for watch in self.yaml(path) or []:
                    if isinstance(watch, dict) and watch.get("role") and watch.get("kind"):
                        found.setdefault(os.path.basename(str(watch["role"]).rstrip("/")), str(watch["kind"]))
        return found


def mine_role(repo, role_dir, extra_vars):
    owner, name = repo.source["repo"].split("/")
    prefix = "" if role_dir in (".", "") else role_dir.rstrip("/") + "/"
    slug = re.sub(r"[^a-z0-9]+", "_", f"{owner}_{name}_{os.path.basename(role_dir.strip('./')) or 'role'}".lower()).strip("_")
    role = Role(f"wild_{slug}")
    for part in ("defaults", "vars"):
        path = repo.first(f"{prefix}{part}/main.yml", f"{prefix}{part}/main.yaml")
        data = repo.yaml(path) if path else None
        if isinstance(data, dict):
            walk_strings(data, [], role, path)
            role.vars.update(plain(data))
    role.vars.update(extra_vars)
    # Ansible's placeholder is random per run: both sides are given one.
    role.vars["omit"] = "__omit_place_holder__conformance"
    prefix = "" if role_dir in (".", "") else role_dir.rstrip("/") + "/"
    for path in repo.files:
        if not path.startswith(prefix):
            continue
        rel = path[len(prefix):]
        if rel.startswith(("tasks/", "handlers/")) and rel.endswith((".yml", ".yaml")):
            walk_tasks(repo.yaml(path), role, path)
        elif rel.startswith("templates/"):
            text = repo.read(path)
            if text is not None and len(text) < 100_000 and templated(text):
                role.add("template", text, f"{path}:1")
    return role


def free_names(source, kind, env):
    """The variables a case reads without defining them; None when Jinja
    cannot parse it (kept: both sides must refuse it alike)."""
    from jinja2 import meta

    text = source if kind == "template" else "{{ " + source + " }}"
    try:
        return meta.find_undeclared_variables(env.parse(text))
    except Exception:
        return None


def resolvable(role, env):
    """The role's variables that can be rendered here: leaves out those that
    read what is left out or a name nothing defines, to a fixed point."""
    names = dict(role.vars)
    changed = True
    while changed:
        changed = False
        for key, value in list(names.items()):
            text = json.dumps(value)
            reason = next((why for word, why in LEFT_OUT.items() if word in text), None)
            free = set()
            for s in strings(value):
                free |= free_names(s, "template", env) or set()
            # A variable is no case: dropped without being counted.
            if reason or not free <= names.keys():
                del names[key]
                changed = True
    return names


def strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings(v)


def first_item(loop, defined):
    """The first item a loop gives, from a literal list or a variable the
    role defines; None when only the run can tell (a registered result, a
    lookup)."""
    over = loop.over
    if isinstance(over, str):
        name = re.fullmatch(r"\{\{\s*(\w+)\s*\}\}", over.strip())
        if not name or name.group(1) not in defined:
            return None
        over = defined[name.group(1)]
        if isinstance(over, str):
            return None
    if loop.keyword == "with_dict":
        if not isinstance(over, dict) or not over:
            return None
        key = next(iter(over))
        return {"key": key, "value": over[key]}
    if not isinstance(over, list) or not over:
        return None
    first = over[0]
    if loop.keyword == "with_items" and isinstance(first, list):
        return first[0] if first else None
    return plain(first)


def groups_of(role, env, skipped):
    """The role's group, and one per loop whose first item is known, with
    that item under the loop's name."""
    defined = resolvable(role, env)
    groups = []
    for n, loop in enumerate(role.loops):
        item = first_item(loop, defined)
        if item is None:
            # What does not read the item is still the role's to render.
            for source, origin in loop.templates:
                role.add("template", source, origin)
            for source, origin in loop.conditions:
                role.add("condition", source, origin)
            continue
        loop.group = f"{role.group}__loop{n}"
        groups.append(group_of(loop, {**defined, loop.loop_var: item}, env, skipped))
    groups.insert(0, group_of(role, defined, env, skipped))
    return [g for g in groups if g["templates"] or g["conditions"]]


def group_of(role, defined, env, skipped):
    group = {"group": role.group, "vars": defined, "templates": [], "conditions": [], "origins": {}}
    for kind, cases in (("template", role.templates), ("condition", role.conditions)):
        for source, origin in cases:
            reason = next((why for word, why in LEFT_OUT.items() if word in source), None)
            free = free_names(source, kind, env)
            if reason is None and free is not None and not free <= defined.keys():
                reason = RUN_TIME_NAMES
            if reason:
                skipped[reason] += 1
                continue
            group[kind + "s"].append(source)
            group["origins"][source] = origin
    return group


def main():
    import jinja2

    mirror = os.environ.get("ENKA_MIRROR", "/work/.mirror")
    if "--mirror" in sys.argv:
        mirror = sys.argv[sys.argv.index("--mirror") + 1]
    out = os.path.join(ROOT, "target", "conformance-snapshots")
    if "--out" in sys.argv:
        out = sys.argv[sys.argv.index("--out") + 1]
    manifest = sys.argv[sys.argv.index("--manifest") + 1] if "--manifest" in sys.argv else MANIFEST
    with open(manifest) as f:
        sources = yaml.safe_load(f)
    env = jinja2.Environment(extensions=["jinja2.ext.do", "jinja2.ext.loopcontrols"])
    skipped = collections.Counter()
    groups, per_repo = [], {}
    for source in sources:
        repo = Repository(source, mirror)
        samples = repo.samples()
        kinds = repo.watched_kinds()
        count = 0
        for role_dir in source["roles"]:
            kind = kinds.get(os.path.basename(role_dir))
            extra = sample_vars(samples[kind]) if kind in samples else {}
            for group in groups_of(mine_role(repo, role_dir, extra), env, skipped):
                groups.append(group)
                count += len(group["templates"]) + len(group["conditions"])
        per_repo[source["repo"]] = count
    groups += guide_groups(mirror)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "cases.yaml"), "w") as f:
        yaml.safe_dump(groups, f, sort_keys=False, allow_unicode=True, width=1000)
    total = sum(len(g.get("templates") or []) + len(g.get("conditions") or []) for g in groups)
    summary = {"cases": total, "groups": len(groups), "per_repository": per_repo, "left_out": dict(skipped)}
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(f"mined.py: {total} cases in {len(groups)} groups from {len(sources)} repositories and the playbook guide; "
          f"left out {sum(skipped.values())} ({', '.join(f'{n} {w}' for w, n in skipped.most_common())})")


def guide_groups(mirror):
    """The playbook guide's code blocks, from an ansible-documentation
    snapshot (examples.py says how)."""
    import examples

    docs_git = os.path.join(mirror, "ansible+ansible-documentation", "repo")
    if not os.path.isdir(docs_git):
        sys.exit(f"mined.py: no snapshot of ansible/ansible-documentation at {docs_git}: fetch it")
    tree = os.path.join(ROOT, "target", "ansible-documentation-" + DOCS_COMMIT[:12])
    if not os.path.isdir(tree):
        os.makedirs(tree)
        archive = subprocess.run(["git", f"--git-dir={docs_git}", "archive", DOCS_COMMIT, "docs/docsite/rst"], check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", tree], input=archive, check=True)
    return examples.guide_groups(tree)


if __name__ == "__main__":
    sys.path.insert(0, HERE)
    main()
