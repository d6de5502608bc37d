"""Starts enka's Ansible worker (enka_worker.py, next to this file), or with
ENKA_WORKER_ZYGOTE=1 the fork server that starts workers (enka_zygote.py).

A worker's start is Python's start and Ansible's imports; after the idle
exit the next bridged task waits for it, so nothing is done twice:
- Python compiles a script it runs every time, but caches the modules it
  imports, so the worker is imported from here; their bytecode is written
  next to them once, even where PYTHONDONTWRITEBYTECODE is set (it stays in
  force for everything else).
- The collector is off while the imports make their objects, which live as
  long as the process: a collection among them finds nothing to free.
- ansible-core parses its configuration's definitions (config/base.yml,
  about 100 KB of YAML) at every start; the parse is kept next to these
  scripts as marshal data, keyed by that file's path, size and time.
"""

import contextlib
import gc
import marshal
import os
import sys
import zlib

gc.disable()

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

def _keep_config_definitions():
    """Has ansible-core read its base.yml through a cache of its parse."""
    from ansible.config import manager

    read = manager.ConfigManager._read_config_yaml_file

    def cached(self, yml_file):
        path = os.fsdecode(yml_file)
        try:
            stat = os.stat(path)
        except OSError:
            return read(self, yml_file)
        key = "%s|%d|%d|%s" % (path, stat.st_size, stat.st_mtime_ns, sys.version)
        name = "config-%08x.marshal" % zlib.crc32(key.encode())
        cache = os.path.join(_HERE, name)
        try:
            with open(cache, "rb") as stream:
                definitions = marshal.load(stream)
            if isinstance(definitions, dict):
                return definitions
        except (OSError, EOFError, ValueError, TypeError):
            pass
        definitions = read(self, yml_file)
        try:
            partial = "%s.%d" % (cache, os.getpid())
            with open(partial, "wb") as stream:
                marshal.dump(definitions, stream)
            os.replace(partial, cache)
        except (OSError, ValueError):
            # Not marshallable, or a read-only directory: parsed each time.
            with contextlib.suppress(OSError):
                os.unlink(partial)
        return definitions

    manager.ConfigManager._read_config_yaml_file = cached


_keep_config_definitions()

if os.environ.get("ENKA_WORKER_ZYGOTE") == "1":
    import enka_zygote  # noqa: E402

    gc.enable()
    sys.exit(enka_zygote.main())

import enka_worker  # noqa: E402

gc.enable()
sys.exit(enka_worker.main())
