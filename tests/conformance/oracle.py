"""ansible-core's answer for a template or a condition, as a task's
templating gives it: shared by generate.py (which records the corpus) and
the differential template fuzzer (which asks for each case it makes).

It follows whichever ansible-core its Python has. From 2.19 on (data
tagging) a template is rendered only from a trusted source: the case's
source and variables are given trust as a role's files have it (the
variables loaded as a vars file, so values carry their origin), `omit` is
the engine's own, and conditions go through `Templar.evaluate_conditional`.

Run as a program, it serves one JSON request per line on stdin,
`{"kind": "template"|"condition", "source": "...", "vars": {...}}` (and
`"unsafe": [names]`: variables holding untrusted data, as a custom
resource's fields and a module's results are), with one
JSON answer per line on stdout: `{"ok": true, "value": ..., "type": "str"}`
or `{"ok": false, "error": "ExceptionClass: message"}`. A case that runs past
its time (a huge range) answers `{"ok": null, "error": "timeout"}`.
"""

import datetime
import json
import os
import signal
import sys

OMIT = "__omit_place_holder__conformance"


def plain(value):
    """The value as JSON data, and Python's type name for it."""
    if value is None:
        return None, "NoneType"
    if isinstance(value, bool):
        return value, "bool"
    if isinstance(value, int):
        return value, "int"
    if isinstance(value, float):
        # JSON has no infinity or NaN: their Python repr stands for them.
        return (value if value == value and abs(value) != float("inf") else repr(value)), "float"
    if isinstance(value, str):
        return str(value), "str"
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat(), type(value).__name__
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace"), "bytes"
    if isinstance(value, dict):
        return {str(k): plain(v)[0] for k, v in value.items()}, "dict"
    if isinstance(value, (list, tuple, set)):
        return [plain(v)[0] for v in value], "list"
    return repr(value), type(value).__name__


def data_tagging():
    """Whether this ansible-core tags data (2.19 and later)."""
    try:
        from ansible.template import trust_as_template  # noqa: F401
    except ImportError:
        return False
    return True


class Oracle:
    """A Templar per case over one loader whose base directory is `files`."""

    def __init__(self, files):
        from ansible.parsing.dataloader import DataLoader
        from ansible.plugins.loader import init_plugin_loader

        # As the CLI does: makes FQCNs (ansible.builtin.*) and collection
        # routing (json_query) resolvable.
        init_plugin_loader()
        self.files = files
        self.loader = DataLoader()
        self.loader.set_basedir(files)
        self.tagging = data_tagging()

    def answer(self, kind, source, variables, untrusted=()):
        """What ansible-core makes of `source`: a dict as the module says."""
        try:
            if self.tagging:
                value = self._tagged(kind, source, variables, untrusted)
            else:
                value = self._classic(kind, source, variables, untrusted)
            data, type_name = plain(value)
            return {"ok": True, "value": data, "type": type_name}
        except Exception as err:  # noqa: BLE001 - every failure is data
            return {"ok": False, "error": f"{type(err).__name__}: {err}"[:300]}

    def _classic(self, kind, source, variables, untrusted):
        """Up to 2.18: every string is a template unless marked unsafe."""
        from ansible.playbook.task import Task
        from ansible.template import Templar
        from ansible.utils.unsafe_proxy import wrap_var

        variables = dict(variables or {})
        for name in untrusted:
            if name in variables:
                variables[name] = wrap_var(variables[name])
        variables["ansible_search_path"] = [self.files]
        variables["omit"] = OMIT
        templar = Templar(loader=self.loader, variables=dict(variables))
        if kind == "template":
            return templar.template(source)
        task = Task()
        task.when = [source]
        return task.evaluate_conditional(templar, dict(variables))

    def _tagged(self, kind, source, variables, untrusted):
        """2.19 and later: the source and the variables trusted as a role's
        are, the variables with the origin of a vars file; untrusted ones
        as plain data, which is never templated."""
        from ansible.template import Templar, trust_as_template

        variables = dict(variables or {})
        plain = {name: variables.pop(name) for name in untrusted if name in variables}
        text = json.dumps(variables, ensure_ascii=False)
        loaded = self.loader.load(trust_as_template(text), file_name=os.path.join(self.files, "vars.yml"))
        loaded = dict(loaded or {})
        loaded.update(plain)
        loaded["ansible_search_path"] = [self.files]
        templar = Templar(loader=self.loader, variables=loaded)
        if kind == "template":
            return templar.template(trust_as_template(source) if isinstance(source, str) else source)
        return templar.evaluate_conditional(trust_as_template(source) if isinstance(source, str) else source)


class Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise Timeout()


def serve():
    files = os.environ.get("ENKA_ORACLE_FILES") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "files")
    oracle = Oracle(files)
    signal.signal(signal.SIGALRM, _alarm)
    seconds = int(os.environ.get("ENKA_ORACLE_TIMEOUT", "5"))
    for line in sys.stdin:
        request = json.loads(line)
        signal.alarm(seconds)
        try:
            answer = oracle.answer(request["kind"], request["source"], request.get("vars"), request.get("unsafe") or ())
            text = json.dumps(answer, ensure_ascii=False)
        except Timeout:
            text = json.dumps({"ok": None, "error": "timeout"})
        except (TypeError, ValueError, RecursionError) as err:
            # A value JSON cannot carry (NaN is carried; a cycle is not).
            text = json.dumps({"ok": None, "error": f"unanswerable: {err}"[:300]})
        finally:
            signal.alarm(0)
        sys.stdout.write(text + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    serve()
