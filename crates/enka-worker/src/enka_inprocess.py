"""Runs vetted modules inside the worker's own interpreter, without a fork.

A fork of the warm worker costs a few milliseconds (copying its page tables,
then the pages the module touches) and isolates everything; most of a small
module's run is that fork. Modules that keep nothing between runs, start no
process that outlives them and end through exit_json or fail_json can run in
the worker itself, as Mitogen runs well-behaved modules: what a run may
change in the interpreter is saved first and put back after (environment,
working directory, umask, locale, argv, standard streams, hooks, signal
handlers, atexit callbacks, AnsibleModule's globals), its output is
captured, and its exit is caught. Every other module, and any run that
needs a fork's isolation (an open-files limit to set), runs in a fork.

The task's deadline is an alarm here: it raises the worker's timeout in
the module, and the run ends as a timed-out fork would.
"""

import atexit
import io
import locale
import os
import signal
import subprocess
import sys
import time
import types

import ansible.module_utils
import ansible.module_utils.basic
from ansible.module_utils.common import warnings as module_warnings

# ansible.builtin modules that run in the worker: each was read for state it
# keeps between runs, processes it leaves behind, threads, and exits other
# than exit_json/fail_json, and none has them. The others fork: `command`
# and its kin run what the user says for as long as it takes, package
# managers and `setup` change or read the process in ways a fork contains.
IN_PROCESS = frozenset(
    "ansible.modules." + name
    for name in (
        "assemble",
        "blockinfile",
        "copy",
        "file",
        "find",
        "get_url",
        "lineinfile",
        "ping",
        "replace",
        "slurp",
        "stat",
        "tempfile",
        "uri",
    )
)

# Handlers a module may install (a timeout's alarm, a cleanup on TERM).
_SIGNALS = (signal.SIGALRM, signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGPIPE, signal.SIGCHLD)


class _SpawningPopen(subprocess.Popen):
    """AnsibleModule.run_command's Popen, started without copying the
    worker: run_command always passes a `preexec_fn` that only sets its
    `umask` argument, and a `preexec_fn` makes Python fork the whole
    worker (some 3.5 ms) where it would otherwise vfork (under 1 ms). The
    umask goes as Popen's own argument instead, which the child applies
    the same way."""

    def __init__(self, *args, **kwargs):
        preexec = kwargs.get("preexec_fn")
        if _is_run_commands_umask(preexec):
            del kwargs["preexec_fn"]
            umask = preexec.__closure__[0].cell_contents
            if umask:
                kwargs["umask"] = umask
        super().__init__(*args, **kwargs)


def _is_run_commands_umask(preexec):
    """Whether `preexec` is run_command's closure over its umask alone."""
    return (
        getattr(preexec, "__qualname__", "") == "AnsibleModule.run_command.<locals>.preexec"
        and preexec.__code__.co_freevars == ("umask",)
    )


# What AnsibleModule sees as `subprocess` during a run in the worker.
_SPAWNING_SUBPROCESS = types.ModuleType("subprocess")
_SPAWNING_SUBPROCESS.__dict__.update(vars(subprocess))
_SPAWNING_SUBPROCESS.Popen = _SpawningPopen


def runs_in_process(target, rlimit_nofile):
    """Whether the module `target` names can run without a fork: a vetted
    module, and no open-files limit to set for it alone."""
    kind, name = target
    return kind == "module" and name in IN_PROCESS and not rlimit_nofile


_CODE = {}


def _code(name):
    """The module's compiled code, loaded once per worker."""
    code = _CODE.get(name)
    if code is None:
        import importlib.util

        spec = importlib.util.find_spec(name)
        code = (spec.loader.get_code(name), spec)
        _CODE[name] = code
    return code


class _Saved:
    """What a module's run may change in the interpreter, as it was."""

    def __init__(self):
        self.environ = dict(os.environ)
        self.cwd = os.getcwd()
        self.umask = os.umask(0o022)
        os.umask(self.umask)
        self.locale = locale.setlocale(locale.LC_ALL)
        self.argv = sys.argv
        self.path = list(sys.path)
        self.streams = (sys.stdin, sys.stdout, sys.stderr)
        self.hooks = (sys.excepthook, sys.displayhook)
        self.main = sys.modules.get("__main__")
        self.handlers = {number: signal.getsignal(number) for number in _SIGNALS}
        self.atexit_register = atexit.register
        basic = ansible.module_utils.basic
        self.basic = {name: getattr(basic, name)
                      for name in ("_ANSIBLE_ARGS", "_ANSIBLE_PROFILE", "subprocess") if hasattr(basic, name)}
        self.is_controller = getattr(getattr(ansible.module_utils, "_internal", None), "is_controller", None)

    def restore(self):
        for number, handler in self.handlers.items():
            if signal.getsignal(number) is not handler and handler is not None:
                signal.signal(number, handler)
        sys.modules["__main__"] = self.main
        sys.excepthook, sys.displayhook = self.hooks
        sys.stdin, sys.stdout, sys.stderr = self.streams
        sys.argv = self.argv
        if sys.path != self.path:
            sys.path[:] = self.path
        if locale.setlocale(locale.LC_ALL) != self.locale:
            locale.setlocale(locale.LC_ALL, self.locale)
        os.umask(self.umask)
        if os.getcwd() != self.cwd:
            os.chdir(self.cwd)
        if os.environ != self.environ:
            for name in set(os.environ) - set(self.environ):
                del os.environ[name]
            for name, value in self.environ.items():
                if os.environ.get(name) != value:
                    os.environ[name] = value
        atexit.register = self.atexit_register
        for name, value in self.basic.items():
            setattr(ansible.module_utils.basic, name, value)
        if self.is_controller is not None:
            ansible.module_utils._internal.is_controller = self.is_controller
        _clear_module_messages()


def _clear_module_messages():
    """AnsibleModule's warnings and deprecations are module-global lists
    (dicts from 2.19) a fork would drop with the process."""
    for name in ("_global_warnings", "_global_deprecations"):
        messages = getattr(module_warnings, name, None)
        if messages is not None:
            messages.clear()


def run(target, payload, environment, deadline, profile, outcome):
    """Runs the module as `python AnsiballZ_x.py` would, in this process;
    returns what the low-level command would: rc, stdout, stderr.
    `outcome` is the worker's: how an exception and a SystemExit become the
    exit status, whether data is tagged (2.19 on), and the exception the
    deadline raises (a BaseException, which the module's own
    `except Exception` does not swallow)."""
    _, name = target
    code, spec = _code(name)
    out = io.BytesIO()
    err = io.BytesIO()
    # Detached before the interpreter's streams are put back, so that
    # collecting them does not close the buffers read below.
    streams = [io.TextIOWrapper(buffer, encoding="utf-8", errors="surrogateescape", write_through=True)
               for buffer in (out, err)]
    saved = _Saved()
    exits = []
    rc = 1
    try:
        _clear_module_messages()
        os.environ.update({k: str(v) for k, v in environment.items()})
        sys.stdout, sys.stderr = streams
        sys.stdin = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
        sys.argv = [name]
        atexit.register = lambda func, *args, **kwargs: exits.append((func, args, kwargs)) or func
        ansible.module_utils.basic._ANSIBLE_ARGS = payload
        ansible.module_utils.basic.subprocess = _SPAWNING_SUBPROCESS
        if profile is not None:
            ansible.module_utils.basic._ANSIBLE_PROFILE = profile
        if outcome.data_tagging:
            ansible.module_utils._internal.is_controller = False
        sys.modules["__main__"] = main = _main_module(name, spec)
        with _Alarm(deadline, outcome.timed_out):
            try:
                exec(code, main.__dict__)
                rc = 0
            except SystemExit as exit_:
                rc = outcome.exit_code(exit_)
            except outcome.timed_out:
                raise
            except Exception as exc:  # noqa: BLE001 - reported as the module's failure
                rc = outcome.uncaught(exc, profile)
            except BaseException as exc:  # noqa: BLE001 - as the fork reports it; the worker lives on
                rc = outcome.uncaught(exc, None)
    finally:
        try:
            for stream in streams:
                stream.flush()
                stream.detach()
        finally:
            saved.restore()
            for func, args, kwargs in reversed(exits):
                try:
                    func(*args, **kwargs)
                except Exception:  # noqa: BLE001 - as atexit, a failing callback is ignored
                    pass
    stdout = out.getvalue().decode("utf-8", "surrogateescape")
    stderr = err.getvalue().decode("utf-8", "surrogateescape")
    return {"rc": rc, "stdout": stdout, "stderr": stderr, "stdout_lines": stdout.splitlines()}


def _main_module(name, spec):
    """The `__main__` the module runs as, as runpy makes it, with what
    AnsiballZ's loader gives a module (respawning reads it)."""
    main = types.ModuleType("__main__")
    main.__dict__.update(
        __file__=spec.origin, __cached__=spec.cached, __loader__=spec.loader, __spec__=spec,
        __package__=name.rpartition(".")[0], _module_fqn=name, _modlib_path="",
    )
    return main


class _Alarm:
    """An alarm at the deadline that raises `timed_out` in the module, unless
    one is set already (2.19's alarm around the whole action, for the same
    deadline)."""

    def __init__(self, deadline, timed_out):
        self.deadline = deadline
        self.timed_out = timed_out
        self.armed = False

    def __enter__(self):
        if self.deadline is None or signal.getitimer(signal.ITIMER_REAL)[0] > 0:
            return
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise self.timed_out()

        def on_alarm(_signal, _frame):
            raise self.timed_out()

        signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, left)
        self.armed = True

    def __exit__(self, *_exc):
        if self.armed:
            signal.setitimer(signal.ITIMER_REAL, 0)
        return False
