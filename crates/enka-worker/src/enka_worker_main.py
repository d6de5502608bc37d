"""Starts enka's Ansible worker (enka_worker.py, next to this file), or with
ENKA_WORKER_ZYGOTE=1 the fork server that starts workers (enka_zygote.py).

Python compiles a script it runs every time, but caches the modules it
imports, so the worker is imported from here; their bytecode is written
next to them once, even where PYTHONDONTWRITEBYTECODE is set (it stays in
force for everything else).
"""

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def _compile_once(names):
    import importlib.util

    for name in names:
        source = os.path.join(_HERE, name + ".py")
        if not os.path.exists(importlib.util.cache_from_source(source)):
            import py_compile

            try:
                py_compile.compile(source, doraise=True)
            except (OSError, py_compile.PyCompileError):
                pass  # a read-only directory: compiled in memory, as a script is


if sys.dont_write_bytecode:
    _compile_once(("enka_worker", "enka_inprocess", "enka_zygote"))

if os.environ.get("ENKA_WORKER_ZYGOTE") == "1":
    import enka_zygote  # noqa: E402

    sys.exit(enka_zygote.main())

import enka_worker  # noqa: E402

sys.exit(enka_worker.main())
