"""Starts enka's Ansible worker (enka_worker.py, next to this file), or with
ENKA_WORKER_ZYGOTE=1 the fork server that starts workers (enka_zygote.py).

A worker's start is Python's start and Ansible's imports; after the idle
exit the next bridged task waits for it, so nothing is done twice:
- Python compiles a script it runs every time, but caches the modules it
  imports, so this script is short and imports the rest; their bytecode is
  written next to them once, even where PYTHONDONTWRITEBYTECODE is set (it
  stays in force for everything else).
- The collector is off while the imports make their objects, which live as
  long as the process: a collection among them finds nothing to free. They
  are frozen before it is on again, or its first collection would walk
  them all (some 10 ms).
- What ansible-core parses and compiles at every start is kept, and what a
  task does not need is imported at its first use (enka_startup.py).
"""

import gc
import os
import sys

gc.disable()

_HERE = os.path.dirname(os.path.abspath(__file__))


def _compile_once(names):
    import importlib.util

    for name in names:
        source = os.path.join(_HERE, name + ".py")
        try:
            fresh = os.stat(importlib.util.cache_from_source(source)).st_mtime >= os.stat(source).st_mtime
        except OSError:
            fresh = False
        if not fresh:
            import py_compile

            try:
                py_compile.compile(source, doraise=True)
            except (OSError, py_compile.PyCompileError):
                pass  # a read-only directory: compiled in memory, as a script is


if sys.dont_write_bytecode:
    _compile_once(("enka_startup", "enka_worker", "enka_inprocess", "enka_zygote"))

import enka_startup  # noqa: E402

enka_startup.prepare()

if os.environ.get("ENKA_WORKER_ZYGOTE") == "1":
    import enka_zygote  # noqa: E402

    enka_startup.finish()
    gc.freeze()
    gc.enable()
    sys.exit(enka_zygote.main())

import enka_worker  # noqa: E402

enka_startup.finish()
gc.freeze()
gc.enable()
sys.exit(enka_worker.main())
