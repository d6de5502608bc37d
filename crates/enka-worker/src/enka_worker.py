"""enka's Ansible worker.

enka runs natively every task it has code for. Everything else (any module,
action plugin, or a Python filter, test or lookup plugin) runs here, with
ansible-core's own code, in a process that enka keeps warm: ansible-core is
imported once, so a task costs milliseconds, not a Python start-up.

Protocol: enka writes requests on stdin and reads responses from the file
descriptor the process was started with as stdout; each message is a 4-byte
big-endian length and a UTF-8 JSON object. This process serves one request
at a time (enka keeps a pool for concurrency). Anything else that would write
to stdout (a plugin's print) goes to stderr, which enka logs.

Modules run the way `ansible-playbook` runs them over the `local`
connection, through the action plugin that Ansible would pick, except that a
new-style Python module is not packed into an AnsiballZ file and started
with a new interpreter: it runs in a forked copy of this process, which
already has Ansible imported (Mitogen's idea). The fork keeps every module's
global state, working directory, environment and exit away from this
process, and gives each task a process group that can be killed.
"""

import contextlib
import ctypes
import gc
import io
import json
import os
import re
import resource
import runpy
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import traceback
import types

PROTOCOL = 1
PR_SET_PDEATHSIG = 1

# The protocol owns the original stdout; print() goes to stderr from here on.
_PROTOCOL_OUT = os.fdopen(os.dup(1), "wb", buffering=0)
os.dup2(2, 1)
sys.stdout = sys.stderr
_PROTOCOL_IN = os.fdopen(os.dup(0), "rb", buffering=0)
_DEVNULL = os.open(os.devnull, os.O_RDWR)
os.dup2(_DEVNULL, 0)

try:
    _LIBC = ctypes.CDLL(None, use_errno=True)
except OSError:  # pragma: no cover - every Linux has a libc
    _LIBC = None


def _die_with_parent():
    if _LIBC is not None:
        _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


_die_with_parent()

# The data (heap) limit enka gives each worker, in bytes (0: none): a task
# that allocates past it fails with MemoryError, in the worker or in the
# module's fork (which inherits it), and the operator lives on. The hard
# limit too, so no module raises it.
_MEMORY_LIMIT = int(os.environ.get("ENKA_WORKER_MEMORY_LIMIT", "0") or 0)


def _limit_memory(limit):
    if limit <= 0:
        return
    _soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))


_limit_memory(_MEMORY_LIMIT)

# Plugin directories next to the project, its playbooks and its roles, as
# Ansible adds them when it loads a role or a playbook.
_PLUGIN_DIRS = [p for p in os.environ.get("ENKA_PLUGIN_DIRS", "").split(os.pathsep) if p]

from ansible import constants as C  # noqa: E402
from ansible import release  # noqa: E402
from ansible.errors import AnsibleError, AnsibleActionFail, AnsibleActionSkip  # noqa: E402
from ansible.module_utils.common.text.converters import to_text  # noqa: E402
try:  # 2.19 and later: module payloads cross a serialization profile
    from ansible.module_utils.common.json import Direction, get_module_encoder  # noqa: E402
except ImportError:
    Direction = get_module_encoder = None
from ansible.parsing.dataloader import DataLoader  # noqa: E402
from ansible.playbook.play_context import PlayContext  # noqa: E402
from ansible.playbook.task import Task  # noqa: E402
from ansible.plugins import loader as plugin_loader  # noqa: E402
from ansible.plugins.action import ActionBase  # noqa: E402
from ansible.template import Templar  # noqa: E402
from ansible.utils.display import Display  # noqa: E402
from ansible.vars.clean import module_response_deepcopy, strip_internal_keys  # noqa: E402

try:  # up to 2.20; only the in-fork module path (2.18's) uses it
    from ansible.vars.clean import remove_internal_keys  # noqa: E402
except ImportError:
    remove_internal_keys = None
import ansible.module_utils  # noqa: E402
import ansible.module_utils.basic  # noqa: E402  (imported once, shared by every fork)

import enka_inprocess  # noqa: E402  (next to this file)

Display().verbosity = int(os.environ.get("ENKA_ANSIBLE_VERBOSITY", "0") or 0)
# A warning on one line: enka logs each stderr line on its own, at warning
# level when it is one (Display wraps at 79 columns off a terminal).
Display().columns = 1 << 20
plugin_loader.init_plugin_loader()
for _dir in _PLUGIN_DIRS:
    plugin_loader.add_all_plugin_dirs(_dir)
    # A role's or the project's module_utils/ is importable as
    # ansible.module_utils.<name>, as AnsiballZ would pack it.
    _utils = os.path.join(_dir, "module_utils")
    if os.path.isdir(_utils) and _utils not in ansible.module_utils.__path__:
        ansible.module_utils.__path__.append(_utils)
for _utils in C.DEFAULT_MODULE_UTILS_PATH or []:
    if os.path.isdir(_utils) and _utils not in ansible.module_utils.__path__:
        ansible.module_utils.__path__.append(_utils)

_LOADER = DataLoader()


def _jsonable(value):
    """Values as JSON: Ansible's unsafe strings are str subclasses already."""
    if isinstance(value, dict):
        return {to_text(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_jsonable(v) for v in value]
    if isinstance(value, bytes):
        return to_text(value, errors="surrogate_or_replace")
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if hasattr(value, "isoformat"):
        return value.isoformat()
    summary = type(value).__name__
    if summary == "ErrorSummary":
        # As a registered result shows an exception (2.19).
        return to_text(value.event.formatted_traceback or "(traceback unavailable)")
    if summary == "WarningSummary":
        # 2.19's warnings, as a registered result shows them.
        return to_text(value.event.msg)
    if summary == "DeprecationSummary":
        shown = {"msg": to_text(value.event.msg)}
        for field in ("version", "date"):
            if getattr(value, field, None):
                shown[field] = getattr(value, field)
        deprecator = getattr(value, "deprecator", None)
        if deprecator is not None:
            shown["collection_name"] = deprecator.resolved_name
            shown["deprecator"] = {"resolved_name": deprecator.resolved_name, "type": deprecator.type}
        return shown
    return to_text(value)


def _read_frame():
    head = _read_exact(4)
    if head is None:
        return None
    (size,) = struct.unpack(">I", head)
    body = _read_exact(size)
    if body is None:
        return None
    return json.loads(body)


def _read_exact(size):
    chunks = []
    while size:
        chunk = _PROTOCOL_IN.read(size)
        if not chunk:
            return None
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _write_frame(message):
    body = json.dumps(message, default=to_text).encode("utf-8")
    _PROTOCOL_OUT.write(struct.pack(">I", len(body)) + body)


# --- modules run in a fork -------------------------------------------------

def _once_per_worker(resolve):
    """`resolve(name, collections)`, asked of the plugin loader once per
    worker: its plugin directories are fixed when it starts (a project's
    change starts new workers), and each lookup searches them again."""
    answers = {}

    def cached(name, collections):
        key = (name, tuple(collections or ()))
        if key not in answers:
            answers[key] = resolve(name, collections)
        return answers[key]

    return cached


@_once_per_worker
def _module_target(module_name, collections):
    """What to run for a module: ("module", dotted name) or ("path", file),
    or None when it is not a new-style Python module (run the usual way)."""
    context = plugin_loader.module_loader.find_plugin_with_context(module_name, collection_list=collections)
    if not context.resolved:
        return None
    path = context.plugin_resolved_path
    if not path or not path.endswith(".py"):
        return None
    try:
        with open(path, "rb") as handle:
            source = handle.read()
    except OSError:
        return None
    if b"ansible.module_utils" not in source and b"ansible_collections." not in source:
        return None  # an old-style module or one that wants JSON on a file
    fqcn = context.resolved_fqcn or ""
    if fqcn.startswith("ansible.builtin."):
        return ("module", "ansible.modules." + fqcn.rsplit(".", 1)[1])
    parts = fqcn.split(".")
    if len(parts) == 3 and parts[0] not in ("ansible", "ansible.legacy") and "/ansible_collections/" in path:
        return ("module", "ansible_collections.%s.%s.plugins.modules.%s" % tuple(parts))
    return ("path", path)


_WARMED = set()


def _warm_imports(target):
    """Imports, in this process, what a module imports (ansible.module_utils
    and the standard library), once: every later fork has them already, as
    a module run by Mitogen's in-process runner would."""
    kind, name = target
    if name in _WARMED:
        return
    _WARMED.add(name)
    import ast
    import importlib
    try:
        if kind == "module":
            spec = importlib.util.find_spec(name)
            path = spec.origin if spec else None
        else:
            path = name
        with open(path, "rb") as handle:
            tree = ast.parse(handle.read())
    except Exception:  # noqa: BLE001 - warming is an optimisation only
        return
    wanted = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            wanted.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            wanted.add(node.module)
    for module in sorted(wanted):
        top = module.split(".")[0]
        if module.startswith("ansible.module_utils") or top in sys.stdlib_module_names:
            try:
                importlib.import_module(module)
            except Exception:  # noqa: BLE001 - the module's own run reports it
                pass


def _module_payload(module_args, profile):
    """The module's arguments as AnsiballZ's payload sends them: from 2.19
    across the module's serialization `profile`."""
    if profile is None:
        return json.dumps({"ANSIBLE_MODULE_ARGS": module_args}).encode("utf-8")
    encoder = get_module_encoder(profile, Direction.CONTROLLER_TO_MODULE)
    return json.dumps({"ANSIBLE_MODULE_ARGS": module_args}, cls=encoder).encode("utf-8")


def _run_in_fork(target, payload, environment, deadline, profile=None, rlimit_nofile=0):
    """Runs a module as `python AnsiballZ_x.py` would, in a fork; returns
    what the low-level command would: rc, stdout, stderr. `rlimit_nofile` is
    the open-files limit AnsiballZ's wrapper sets (0: left as it is)."""
    out = tempfile.TemporaryFile()
    err = tempfile.TemporaryFile()
    # Objects alive now are never collected in the child: its collector
    # would touch (and so copy) every page of the warm interpreter.
    gc.freeze()
    pid = os.fork()
    if pid == 0:  # the module's process
        code = 1
        try:
            gc.disable()
            # Its own process group, so a timeout kills what it started too.
            os.setpgid(0, 0)
            _die_with_parent()
            os.dup2(out.fileno(), 1)
            os.dup2(err.fileno(), 2)
            os.dup2(_DEVNULL, 0)
            sys.stdout = io.TextIOWrapper(os.fdopen(1, "wb", closefd=False), write_through=True)
            sys.stderr = io.TextIOWrapper(os.fdopen(2, "wb", closefd=False), write_through=True)
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.environ.update({k: str(v) for k, v in environment.items()})
            _limit_open_files(rlimit_nofile)
            ansible.module_utils.basic._ANSIBLE_ARGS = payload
            if profile is not None:
                ansible.module_utils.basic._ANSIBLE_PROFILE = profile
            if _DATA_TAGGING:
                # A module, not the controller: its warnings and
                # deprecations go into its result, not to the display.
                ansible.module_utils._internal.is_controller = False
            kind, name = target
            sys.argv = [name]
            # What AnsiballZ's loader gives the module (respawning reads it).
            init_globals = {"_module_fqn": name, "_modlib_path": ""}
            if kind == "module":
                runpy.run_module(name, init_globals=init_globals, run_name="__main__", alter_sys=True)
            else:
                runpy.run_path(name, init_globals=init_globals, run_name="__main__")
            code = 0
        except SystemExit as exit_:
            code = _exit_code(exit_)
        except Exception as exc:  # noqa: BLE001 - reported as the module's failure
            code = _uncaught(exc, profile)
        except BaseException as exc:  # noqa: BLE001 - reported as the module's failure
            code = _uncaught(exc, None)
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code)
    # enka kills this group too if it has to kill the worker mid-task.
    _note_running_group(pid)
    try:
        rc = _wait(pid, deadline)
    except BaseException:
        # The task's alarm (2.19) or a signal ended the wait: the module
        # goes too, and is reaped.
        _kill_group(pid)
        os.waitpid(pid, 0)
        raise
    finally:
        _note_running_group(None)
    out.seek(0)
    err.seek(0)
    stdout = out.read().decode("utf-8", "surrogateescape")
    stderr = err.read().decode("utf-8", "surrogateescape")
    out.close()
    err.close()
    if rc is None:
        raise _TaskTimeout()
    return {"rc": rc, "stdout": stdout, "stderr": stderr, "stdout_lines": stdout.splitlines()}


class _TaskTimeout(BaseException):
    """A BaseException, as Ansible's own: an action's `except Exception` must
    not swallow it."""


# ENKA_MODULE_ISOLATION=fork: every module in a fork, as before modules
# could run in the worker (enka_inprocess.IN_PROCESS).
_ALWAYS_FORK = os.environ.get("ENKA_MODULE_ISOLATION", "") == "fork"


def _exit_code(exit_):
    return exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)


def _uncaught(exc, profile):
    """What `python AnsiballZ_x.py` does with an exception the module did not
    catch: from 2.19 its loader reports an Exception as the module's failed
    result; up to 2.18 the interpreter calls sys.excepthook, which a module
    may have set (the file module turns its own errors into fail_json that
    way), whose default prints the traceback."""
    if _DATA_TAGGING and isinstance(exc, Exception):
        from ansible.module_utils._internal._ansiballz._loader import _handle_exception
        try:
            _handle_exception(exc, profile or "legacy")
        except SystemExit as exit_:
            return _exit_code(exit_)
    hook = sys.excepthook
    try:
        if hook is sys.__excepthook__:
            traceback.print_exc()
        else:
            hook(type(exc), exc, exc.__traceback__)
    except SystemExit as exit_:
        return _exit_code(exit_)
    except BaseException:  # noqa: BLE001 - the hook itself failed
        traceback.print_exc()
    return 1


# How a module's run in the worker ends, as `_run_in_fork`'s child ends it.
_OUTCOME = types.SimpleNamespace(exit_code=_exit_code, uncaught=_uncaught, timed_out=_TaskTimeout,
                                 data_tagging=None)

_RUNNING_GROUP_FILE = os.path.join(os.environ.get("ENKA_WORKER_DIR", ""), "module.pgid")


class _Running:
    """The process group of the module running now, or None."""
    group = None


def _note_running_group(pgid):
    _Running.group = pgid
    if not os.environ.get("ENKA_WORKER_DIR"):
        return
    if pgid is None:
        try:
            os.unlink(_RUNNING_GROUP_FILE)
        except OSError:
            pass
        return
    with open(_RUNNING_GROUP_FILE, "w") as handle:
        handle.write(str(pgid))


def _kill_group(pid):
    """Kills the process group `pid` leads (the process alone when the
    group is gone)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _wait(pid, deadline):
    """The child's exit code, or None after killing it at the deadline."""
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pidfd = None
    try:
        while True:
            if pidfd is not None:
                timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
                select.select([pidfd], [], [], timeout)
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return os.waitstatus_to_exitcode(status)
            if deadline is not None and time.monotonic() >= deadline:
                _kill_group(pid)
                os.waitpid(pid, 0)
                return None
            if pidfd is None:
                time.sleep(0.001)
    finally:
        if pidfd is not None:
            os.close(pidfd)


def _limit_open_files(requested):
    """The soft RLIMIT_NOFILE AnsiballZ's wrapper sets, capped by the hard
    limit."""
    if not requested:
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = min(hard, requested) if hard != resource.RLIM_INFINITY else requested
    if wanted != soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
        except ValueError:
            pass


_RLIMIT_VAR = "ansible_python_module_rlimit_nofile"
# The setting when no task variable names it: read once per worker.
_RLIMIT_SETTING = []


def _open_files_limit(task_vars):
    """`ansible_python_module_rlimit_nofile` (or its setting), as an int."""
    if _RLIMIT_VAR in task_vars:
        return int(C.config.get_config_value("PYTHON_MODULE_RLIMIT_NOFILE", variables=task_vars) or 0)
    if not _RLIMIT_SETTING:
        _RLIMIT_SETTING.append(int(C.config.get_config_value("PYTHON_MODULE_RLIMIT_NOFILE") or 0))
    return _RLIMIT_SETTING[0]


def _missing_interpreter(task_vars):
    """The interpreter a task names for its modules when it does not exist
    (None otherwise, and for `auto` discovery): enka runs modules in its own
    Python, but Ansible would run this one and fail."""
    interpreter = task_vars.get("ansible_python_interpreter")
    if not isinstance(interpreter, str) or interpreter.startswith("auto") or interpreter == sys.executable:
        return None
    command = interpreter.split()[0] if interpreter.strip() else interpreter
    found = os.access(command, os.X_OK) if "/" in command else shutil.which(command) is not None
    return None if found else command


def _interpreter_not_found(self, interpreter):
    """What the low-level command gives when the module's shebang names an
    interpreter that is not there (the action's parsing words it)."""
    self._used_interpreter = "#!" + interpreter
    return {"rc": 127, "stdout": "", "stderr": "/bin/sh: 1: %s: not found\n" % interpreter}


def _module_profile():
    """From 2.19, the serialization profile of a module's arguments and
    result: `legacy`, unless module metadata (experimental, off by default)
    lets each module name its own (None then: AnsiballZ reads it). None up
    to 2.18, which has no profiles."""
    if not _DATA_TAGGING or C.config.get_config_value("_MODULE_METADATA"):
        return None
    return "legacy"


class _Deadline:
    """The deadline of the task being served (monotonic seconds), or None."""
    value = None


class _GroupedPopen(subprocess.Popen):
    """The local connection's commands, each in its own process group, so
    a timeout (or enka killing the worker) stops what the module started."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("process_group", 0)
        super().__init__(*args, **kwargs)
        _note_running_group(self.pid)


# What the local connection sees as `subprocess`: the module, with Popen
# grouping its children.
_GROUPED_SUBPROCESS = type(subprocess)("subprocess")
_GROUPED_SUBPROCESS.__dict__.update(vars(subprocess))
_GROUPED_SUBPROCESS.Popen = _GroupedPopen


@contextlib.contextmanager
def _alarm_at_deadline():
    """From 2.19 modules run through the local connection, outside the
    fork that holds the deadline: as TaskExecutor does, an alarm ends the
    action at the deadline, and the module's process group is killed."""
    if not _DATA_TAGGING or _Deadline.value is None:
        try:
            yield
        finally:
            _forget_grouped()
        return

    def on_alarm(_signal, _frame):
        if _Running.group is not None:
            _kill_group(_Running.group)
        raise _TaskTimeout()

    previous = signal.signal(signal.SIGALRM, on_alarm)
    try:
        signal.setitimer(signal.ITIMER_REAL, max(0.001, _Deadline.value - time.monotonic()))
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        _forget_grouped()


def _forget_grouped():
    if _Running.group is not None:
        _note_running_group(None)


def _execute_module_in_fork(self, module_name=None, module_args=None, tmp=None, task_vars=None,
                            persist_files=False, delete_remote_tmp=None, wrap_async=False,
                            ignore_unknown_opts=False):
    if task_vars is None:
        task_vars = {}
    if module_name is None:
        module_name = self._task.action
    if module_args is None:
        module_args = self._task.args
    target = None
    profile = _module_profile()
    # A module in the background, or one whose profile its own metadata
    # names (2.19's experimental module metadata), runs as Ansible runs it.
    if not (wrap_async or self._task.async_val or (_DATA_TAGGING and profile is None)):
        target = _module_target(module_name, self._task.collections)
    if target is None:
        return _ORIGINAL_EXECUTE_MODULE(self, module_name=module_name, module_args=module_args,
                                        task_vars=task_vars, wrap_async=wrap_async,
                                        ignore_unknown_opts=ignore_unknown_opts)
    self._update_module_args(module_name, module_args, task_vars, ignore_unknown_opts=ignore_unknown_opts)
    environment = {}
    self._compute_environment_string(environment)
    missing = _missing_interpreter(task_vars)
    if missing is not None:
        res = _interpreter_not_found(self, missing)
    else:
        payload = _module_payload(module_args, profile)
        rlimit_nofile = _open_files_limit(task_vars)
        if not _ALWAYS_FORK and enka_inprocess.runs_in_process(target, rlimit_nofile):
            res = enka_inprocess.run(target, payload, environment, _Deadline.value, profile, _OUTCOME)
        else:
            _warm_imports(target)
            res = _run_in_fork(target, payload, environment, _Deadline.value, profile, rlimit_nofile)
    if _RELEASE >= (2, 21):
        return _module_result_221(self, res, profile)
    data = self._parse_returned_data(res) if profile is None else self._parse_returned_data(res, profile)
    _name_memory_limit(data)
    if data.pop("_ansible_suppress_tmpdir_delete", False):
        self._cleanup_remote_tmp = False
    if "results" in data and (not isinstance(data["results"], list)):
        data["ansible_module_results"] = data.pop("results")
    remove_internal_keys(data)
    if "stdout" in data and "stdout_lines" not in data:
        data["stdout_lines"] = (data.get("stdout") or "").splitlines()
    if "stderr" in data and "stderr_lines" not in data:
        data["stderr_lines"] = (data.get("stderr") or "").splitlines()
    return data


def _module_result_221(self, res, profile):
    """The module's result as 2.21's `_execute_module` makes it: parsed into
    its task result object, internal keys removed, as a dict for the action
    plugin."""
    result = self._parse_returned_data(res, profile)
    if result.suppress_tmpdir_delete:
        self._cleanup_remote_tmp = False
    result.remove_internal_keys()
    data = result.as_result_dict(for_round_trip=True)
    _name_memory_limit(data)
    return data


def _name_memory_limit(data):
    """A module that died of MemoryError under the worker's limit: its
    failure says which limit it met and where it is set."""
    stderr = data.get("module_stderr") or data.get("exception") or ""
    # 2.19's `exception` is a CapturedErrorSummary, not text.
    stderr = stderr if isinstance(stderr, str) else str(stderr)
    if not (_MEMORY_LIMIT and data.get("failed") and "MemoryError" in stderr):
        return
    data["msg"] = "%s (MemoryError: the Ansible worker's memory limit of %d MiB was reached; " \
        "enka's --ansible-worker-memory-limit sets it)" % (data.get("msg") or "MODULE FAILURE", _MEMORY_LIMIT >> 20)


def _make_tmp_path(self, remote_user=None):
    """The per-task temporary directory, made without a shell."""
    base = os.path.expanduser(self.get_shell_option("remote_tmp", default="~/.ansible/tmp"))
    os.makedirs(base, mode=0o700, exist_ok=True)
    path = tempfile.mkdtemp(prefix=self._connection._shell._generate_temp_dir_name() + "-", dir=base)
    self._cleanup_remote_tmp = True
    self._connection._shell.tmpdir = path
    return path


def _remove_tmp_path(self, tmp_path, force=False):
    if tmp_path is None and self._connection._shell.tmpdir:
        tmp_path = self._connection._shell.tmpdir
    if force or self._should_remove_tmp_path(tmp_path):
        shutil.rmtree(tmp_path, ignore_errors=True)
        self._connection._shell.tmpdir = None


# ansible-core 2.19 and later tag data (the test upstream suggests).
_DATA_TAGGING = hasattr(Templar, "evaluate_expression")
_OUTCOME.data_tagging = _DATA_TAGGING
# The ansible-core release the worker runs, (major, minor).
_RELEASE = tuple(int(part) for part in re.findall(r"\d+", release.__version__)[:2])
# 2.19 and 2.20 make a task's result of what its action raised and of the
# error a module captured (2.21 does it through its own result objects).
_RESULT_ERRORS_219 = _DATA_TAGGING and _RELEASE < (2, 21)
# TaskExecutor's word for an async job's result it cannot read (2.21 fixed
# its spelling).
_UNPARSABLE = "unparsable" if _RELEASE >= (2, 21) else "unparseable"
_ORIGINAL_EXECUTE_MODULE = ActionBase._execute_module
ActionBase._execute_module = _execute_module_in_fork
ActionBase._make_tmp_path = _make_tmp_path
ActionBase._remove_tmp_path = _remove_tmp_path


def _set_resolved_action(task, name):
    """The task's resolved action: an attribute up to 2.18, a property
    over `_resolved_action` from 2.19."""
    try:
        task.resolved_action = name
    except AttributeError:
        task._resolved_action = name


class _EnkaTask(Task):
    """A task whose file search path is the one enka computed (role, then the
    including file's directory), as Task.get_search_path would."""

    _enka_search_path = ()

    def get_search_path(self):
        return list(self._enka_search_path)


_LOCAL = None
_PARENT = None


def _play_parent():
    """A block of an empty play, as every task Ansible runs has: action
    plugins read the play through it (gather_facts: its action groups for
    module_defaults)."""
    global _PARENT
    if _PARENT is None:
        from ansible.playbook.block import Block
        from ansible.playbook.play import Play
        _PARENT = Block(play=Play())
    return _PARENT


def _local_context(task):
    """The play context, `local` connection (with its shell) and templar,
    made once per worker: they hold no state between tasks that a task
    sets, and making them costs milliseconds."""
    global _LOCAL
    if _LOCAL is None:
        play_context = PlayContext()
        templar = Templar(loader=_LOADER, variables={})
        connection = plugin_loader.connection_loader.get("local", play_context, None)
        sys.modules[type(connection).__module__].subprocess = _GROUPED_SUBPROCESS
        connection.set_options(task_keys=task.dump_attrs(), var_options={})
        connection._shell.set_options(task_keys=task.dump_attrs(), var_options={})
        _LOCAL = (play_context, connection, templar)
    play_context, connection, templar = _LOCAL
    connection._play_context = play_context
    return _LOCAL


def warm_for_tasks():
    """Makes what a worker's first task makes first and no worker owns: the
    builtin collection's routing, the `local` connection's and its shell's
    plugins with their option definitions, the play, the `normal` action
    plugin. The fork server runs it once idle after its first fork, so
    later forks start with them: made once, not in each fork, where every page their
    making touches is copied. The connection itself is made again by each
    worker, as its options come from the worker's own directories."""
    global _LOCAL
    task = _EnkaTask()
    task._parent = _play_parent()
    _local_context(task)
    _LOCAL = None
    plugin_loader.action_loader.get("ansible.legacy.normal", class_only=True)


_SHELL_OPTION_VARS = ("ansible_async_dir", "ansible_remote_tmp")


class _ShellOptions:
    """Whether the shell's options were last set from a task's variables."""
    custom = False


def _shell_options(task, connection, variables):
    """The shell plugin's options from the task's variables (`async_dir`,
    `remote_tmp`), set again only when a task has such variables or the
    previous one had."""
    custom = any(name in variables for name in _SHELL_OPTION_VARS)
    if custom or _ShellOptions.custom:
        connection._shell.set_options(task_keys=task.dump_attrs(), var_options=variables)
    _ShellOptions.custom = custom


def _task_vars(request):
    variables = dict(request.get("vars") or {})
    variables.setdefault("inventory_hostname", "localhost")
    variables.setdefault("ansible_connection", "local")
    variables.setdefault("ansible_python_interpreter", sys.executable)
    variables.setdefault("ansible_check_mode", bool(request.get("check_mode")))
    variables.setdefault("ansible_diff_mode", bool(request.get("diff")))
    variables["ansible_search_path"] = list(request.get("search_path") or [])
    return variables


@_once_per_worker
def _resolved_handler(action, collections):
    """The action plugin Ansible picks for a task's action (TaskExecutor's
    order)."""
    module = plugin_loader.module_loader.find_plugin_with_context(action, collection_list=collections)
    if module.resolved and module.action_plugin:
        return module.action_plugin, collections, module
    if plugin_loader.action_loader.has_plugin(action, collection_list=collections):
        return action, collections, module
    return "ansible.legacy.normal", None, module


def _run_task(request):
    collections = _collections(request)
    task = _EnkaTask()
    task.action = request["module"]
    task.args = dict(request.get("args") or {})
    task.check_mode = bool(request.get("check_mode"))
    task.diff = bool(request.get("diff"))
    task.no_log = bool(request.get("no_log"))
    task.environment = [request.get("environment") or {}]
    task.collections = collections or []
    task._enka_search_path = request.get("search_path") or []
    task._parent = _play_parent()
    task.async_val = int(request.get("async") or 0)
    task.poll = int(request.get("poll") or 0)
    # As after Task.post_validate: fields read as set, not merged again
    # from parents (the async path appends to `environment` and removes
    # what it appended).
    task._finalized = True
    timeout = request.get("timeout")
    _Deadline.value = None if timeout is None else time.monotonic() + float(timeout)

    variables = _task_vars(request)
    play_context, connection, templar = _local_context(task)
    play_context.check_mode = task.check_mode
    play_context.diff = task.diff
    play_context.no_log = task.no_log
    templar.available_variables = variables
    connection._shell.tmpdir = None
    _shell_options(task, connection, variables)

    handler_name, handler_collections, module = _resolved_handler(task.action, collections)
    if handler_name == "ansible.legacy.normal" and not module.resolved:
        return {"failed": True, "msg": "The module %s was not found in configured module paths" % task.action}
    _set_resolved_action(task, module.resolved_fqcn if module.resolved else task.action)

    rendered = request.get("rendered")
    if rendered is not None:
        return _template(task, variables, play_context, connection, templar, rendered, request)

    handler = plugin_loader.action_loader.get(
        handler_name, task=task, connection=connection, play_context=play_context,
        loader=_LOADER, templar=templar, shared_loader_obj=plugin_loader,
        collection_list=handler_collections)
    if handler is None:
        return {"failed": True, "msg": "the handler '%s' was not found" % handler_name}
    try:
        with _alarm_at_deadline(), _task_context(task, variables):
            result = handler.run(task_vars=variables)
    except (AnsibleActionFail, AnsibleActionSkip) as failure:
        return failure.result
    finally:
        handler.cleanup()
    if task.async_val > 0 and task.poll > 0 and not result.get("skipped") and not result.get("failed"):
        result = _poll_async(task, result, variables, connection, play_context, templar)
    return result


def _async_status_handler(task, args, connection, play_context, templar):
    status_task = Task.load(dict(action="async_status", args=args, check_mode=task.check_mode,
                                 environment=task.environment))
    status_task._parent = _play_parent()
    return plugin_loader.action_loader.get(
        "ansible.legacy.async_status", task=status_task, connection=connection,
        play_context=play_context, loader=_LOADER, templar=templar, shared_loader_obj=plugin_loader)


def _poll_async(task, result, variables, connection, play_context, templar):
    """Waits for a background job as TaskExecutor._poll_async_result does:
    async_status every `poll` seconds until it finishes or `async` runs out,
    then removes its status file."""
    jid = result.get("ansible_job_id")
    if jid is None:
        return {"failed": True, "msg": "No job id was returned by the async task"}
    handler = _async_status_handler(task, {"jid": jid}, connection, play_context, templar)
    status = {}
    # What the callback would show while waiting (v2_runner_on_async_*).
    events = []
    time_left = task.async_val
    while time_left > 0:
        if _Deadline.value is not None and time.monotonic() + task.poll > _Deadline.value:
            break
        time.sleep(task.poll)
        time_left -= task.poll
        try:
            status = handler.run(task_vars=variables)
        except Exception:
            if time_left <= 0:
                raise
            continue
        if (int(status.get("finished", 0)) == 1
                or ("failed" in status and status.get("_ansible_parsed", False))
                or "skipped" in status):
            break
        events.append({"event": "poll", "jid": jid, "started": status.get("started"),
                       "finished": status.get("finished")})
    if int(status.get("finished", 0)) == 1:
        events.append({"event": "failed" if status.get("failed") else "ok", "jid": jid})
    status = _with_async_events(status, events)
    if int(status.get("finished", 0)) != 1:
        handler.cleanup(force=True)
        events = status.pop("_enka_async_events", [])
        if status.get("_ansible_parsed"):
            return _with_async_events(
                {"failed": True, "async_result": status,
                 "msg": "async task did not complete within the requested time - %ss" % task.async_val}, events)
        return _with_async_events(
            {"failed": True, "async_result": status, "msg": "async task produced %s results" % _UNPARSABLE}, events)
    cleanup = _async_status_handler(task, {"jid": jid, "mode": "cleanup"}, connection, play_context, templar)
    cleanup.run(task_vars=variables)
    cleanup.cleanup(force=True)
    handler.cleanup(force=True)
    return status


def _with_async_events(result, events):
    """The result carrying what the wait saw, for enka to show (enka takes
    the key out before anything registers the result)."""
    if events:
        result = dict(result)
        result["_enka_async_events"] = events
    return result


def _registered(result):
    """The result as TaskExecutor returns it: its defaults for `failed`
    (from `rc`) and `changed`, without internal keys. `invocation` stays:
    `-vvv` shows it, and a loop's items keep it where `register` stores
    them (enka drops it from a task's own result, as the strategy does)."""
    if "failed" not in result:
        result["failed"] = "rc" in result and result["rc"] not in (0, "0")
    if "changed" not in result:
        result["changed"] = False
    no_log = bool(result.get("_ansible_no_log", False))
    clean = strip_internal_keys(module_response_deepcopy(result))
    if _DATA_TAGGING:
        # 2.19's TaskExecutor keeps warnings and deprecations only when
        # there are some.
        for key in ("warnings", "deprecations"):
            if key in clean and not clean[key]:
                del clean[key]
    if no_log:
        # The action hid its own result: enka censors what it shows and
        # logs of it, and strips the key from what `register` keeps.
        clean["_ansible_no_log"] = True
    return clean


_TEMPLATE_ONLY_ARGS = ("newline_sequence", "block_start_string", "block_end_string",
                       "variable_start_string", "variable_end_string", "comment_start_string",
                       "comment_end_string", "trim_blocks", "lstrip_blocks", "output_encoding")


def _template(task, variables, play_context, connection, templar, rendered, request):
    """ansible.builtin.template after its rendering step (enka rendered the
    file with the same templating as every other task): the same checks,
    then the text goes to the copy action exactly as the template action
    hands it over."""
    args = task.args
    source = args.get("src")
    dest = args.get("dest")
    if args.get("state") is not None:
        return {"failed": True, "msg": "'state' cannot be specified on a template"}
    if source is None or dest is None:
        return {"failed": True, "msg": "src and dest are required"}
    newline_sequence = args.get("newline_sequence", "\n")
    newline_sequence = {"\\n": "\n", "\\r": "\r", "\\r\\n": "\r\n"}.get(newline_sequence, newline_sequence)
    if newline_sequence not in ("\n", "\r", "\r\n"):
        return {"failed": True, "msg": "newline_sequence needs to be one of: \n, \r or \r\n"}
    if newline_sequence != "\n":
        rendered = rendered.replace("\n", newline_sequence)
    follow = args.get("follow", False)
    mode = args.get("mode", None)
    if mode == "preserve" and request.get("source_path"):
        mode = "0%03o" % (os.stat(request["source_path"]).st_mode & 0o7777)
    output_encoding = args.get("output_encoding", "utf-8") or "utf-8"
    new_task = task.copy()
    new_task._enka_search_path = task._enka_search_path
    new_task.args["mode"] = mode
    for name in _TEMPLATE_ONLY_ARGS:
        new_task.args.pop(name, None)
    local_tempdir = tempfile.mkdtemp(dir=C.DEFAULT_LOCAL_TMP)
    try:
        result_file = os.path.join(local_tempdir, os.path.basename(source))
        with open(result_file, "wb") as handle:
            handle.write(rendered.encode(output_encoding, "surrogateescape"))
        new_task.args.update(dict(src=result_file, dest=dest, follow=follow))
        copy_action = plugin_loader.action_loader.get(
            "ansible.legacy.copy", task=new_task, connection=connection, play_context=play_context,
            loader=_LOADER, templar=templar, shared_loader_obj=plugin_loader)
        try:
            return copy_action.run(task_vars=variables)
        finally:
            copy_action.cleanup()
    finally:
        shutil.rmtree(local_tempdir, ignore_errors=True)


# --- plugins called from enka's templates ----------------------------------

_TEMPLAR = None


def _templar():
    global _TEMPLAR
    if _TEMPLAR is None:
        _TEMPLAR = Templar(loader=_LOADER, variables={})
    return _TEMPLAR


def _jinja_callable(kind, name):
    environment = _templar().environment
    table = environment.filters if kind == "filter" else environment.tests
    try:
        return environment, table[name]
    except KeyError:
        return environment, None


def _call_jinja(kind, request):
    environment, function = _jinja_callable(kind, request["name"])
    if function is None:
        raise AnsibleError("no %s named '%s'" % (kind, request["name"]))
    args = list(request.get("args") or [])
    kwargs = dict(request.get("kwargs") or {})
    pass_arg = getattr(function, "jinja_pass_arg", None)
    if pass_arg is not None and getattr(pass_arg, "name", "") == "environment":
        args.insert(0, environment)
    elif pass_arg is not None:
        raise AnsibleError("%s '%s' needs a Jinja2 %s, which enka cannot give it"
                           % (kind, request["name"], pass_arg.name))
    with _template_context():
        return function(*args, **kwargs)


def _template_context():
    """The ambient TemplateContext a filter or test (2.19 wraps each in
    code that reads it) runs inside from 2.19 on; nothing before."""
    if not _DATA_TAGGING:
        return contextlib.nullcontext()
    from ansible._internal._templating._engine import TemplateOptions
    from ansible._internal._templating._utils import TemplateContext
    return TemplateContext(template_value="", templar=_templar()._engine, options=TemplateOptions.DEFAULT)


class _ActionOnly:
    """The task a `with_<lookup>` runs for, as the lookup sees it."""

    def __init__(self, action):
        self.action = action


def _lookup_context(request):
    """What a lookup runs inside from 2.19 on: the context that says whether
    it was invoked as `with_<lookup>`, and for which task's action
    (first_found picks its directory by it); nothing before."""
    stack = contextlib.ExitStack()
    if not _DATA_TAGGING:
        return stack
    from ansible._internal._templating._jinja_plugins import _LookupContext
    as_with = bool(request.get("invoked_as_with"))
    stack.enter_context(_LookupContext(invoked_as_with=as_with))
    if as_with:
        stack.enter_context(_task_context(_ActionOnly(request.get("task_action") or ""), {}))
    return stack


def _task_context(task, variables):
    """The ambient TaskContext that actions and lookups read from 2.19 on
    (2.21's is made by `create`, with the host's pending changes)."""
    if not _DATA_TAGGING:
        return contextlib.nullcontext()
    from ansible._internal import _task as task_internals
    context = task_internals.TaskContext
    if not hasattr(context, "create"):
        return context(task=task)
    made = context.create(task=task, task_vars=variables,
                          host_name=variables.get("inventory_hostname") or "localhost")
    if hasattr(task_internals, "PendingChanges"):
        made.pending_changes = task_internals.PendingChanges()
    # 2.21's add_host and group_by call the strategy's inventory; enka's
    # engine keeps the inventory and applies the `add_host`/`add_group` the
    # result carries, as up to 2.20, judging `changed` itself.
    made.__dict__["inventory_rpc_client"] = _InventoryInEnka()
    return made


class _InventoryInEnka:
    """The inventory client an action sees in the worker: the engine, not
    the worker, changes the inventory."""

    def add_host(self, _request):
        return False

    def add_group(self, _host_name, _request):
        return False


def _config_vars(request):
    """The variables the named core settings read (their definitions'
    `vars`), for the `config` lookup."""
    names = []
    for setting in request.get("names") or []:
        if not isinstance(setting, str):
            continue
        definition = C.config.get_configuration_definition(setting) or {}
        for entry in definition.get("vars") or []:
            if isinstance(entry, dict) and isinstance(entry.get("name"), str):
                names.append(entry["name"])
    return names


def _lookup(request):
    name = request["name"]
    plugin = plugin_loader.lookup_loader.get(name, loader=_LOADER, templar=_templar())
    if plugin is None:
        raise AnsibleError("lookup plugin (%s) not found" % name)
    terms = request.get("terms") or []
    try:
        with _lookup_context(request):
            return plugin.run(terms, variables=dict(request.get("vars") or {}), **dict(request.get("kwargs") or {}))
    except AnsibleError:
        raise
    except Exception as exc:  # noqa: BLE001 - worded as Templar._lookup words it
        raise AnsibleError("An unhandled exception occurred while running the lookup plugin '%s'. "
                           "Error was a %s, original message: %s" % (name, type(exc), to_text(exc)))


def _collections(request):
    """The task's collection search list as Ansible completes it: with a
    list given, ansible.legacy is searched last (CollectionSearch)."""
    collections = list(request.get("collections") or [])
    if not collections:
        return None
    if "ansible.builtin" not in collections and "ansible.legacy" not in collections:
        collections.append("ansible.legacy")
    return collections


_VAULT = None


def _vault():
    """Vault secrets as ansible-playbook sets them up: the password files and
    vault ids enka was given (upstream's --ansible-args), then ansible.cfg's."""
    global _VAULT
    if _VAULT is None:
        from ansible.cli import CLI
        from ansible.parsing.vault import VaultLib

        def listed(name):
            return [p for p in os.environ.get(name, "").split(os.pathsep) if p]

        ids = list(C.DEFAULT_VAULT_IDENTITY_LIST or []) + listed("ENKA_VAULT_IDS")
        secrets = CLI.setup_vault_secrets(_LOADER, vault_ids=ids,
                                          vault_password_files=listed("ENKA_VAULT_PASSWORD_FILES"),
                                          ask_vault_pass=False, auto_prompt=False)
        _LOADER.set_vault_secrets(secrets)
        _VAULT = VaultLib(secrets)
    return _VAULT


def _vault_configured():
    """Whether a run was given Vault secrets: then the loader must know them
    before a lookup or an action reads a vaulted file (unvault, copy)."""
    return bool(os.environ.get("ENKA_VAULT_PASSWORD_FILES") or os.environ.get("ENKA_VAULT_IDS")
                or C.DEFAULT_VAULT_IDENTITY_LIST or C.DEFAULT_VAULT_PASSWORD_FILE)


def _vault_decrypt(request):
    vaulttext = request["text"].encode("utf-8")
    if _DATA_TAGGING:
        # 2.19's decrypt takes the text alone (its origin is a tag).
        return to_text(_vault().decrypt(vaulttext))
    return to_text(_vault().decrypt(vaulttext, filename=request.get("file")))


def _inventory(request):
    """The inventory as ansible-playbook would load it (ANSIBLE_INVENTORY,
    ansible.cfg's `inventory`, with group_vars/ and host_vars/): its
    groups, and for each host the variables inventory gives it."""
    from ansible.inventory.manager import InventoryManager
    from ansible.vars.manager import VariableManager

    from ansible.playbook.play import Play

    sources = request.get("sources") or C.DEFAULT_HOST_LIST
    basedir = request.get("basedir")
    previous_basedir = _LOADER.get_basedir()
    if basedir:
        # ansible-playbook's loader is based at the first playbook, whose
        # host_vars/ and group_vars/ apply through the play.
        _LOADER.set_basedir(basedir)
    try:
        inventory = InventoryManager(loader=_LOADER, sources=sources)
        variables = VariableManager(loader=_LOADER, inventory=inventory)
        play = Play.load({"hosts": "all", "gather_facts": False}, variable_manager=variables, loader=_LOADER)
        listed = inventory.get_hosts(pattern="all")
        implicit = inventory.get_host("localhost")
        if implicit is not None and implicit not in listed:
            listed = listed + [implicit]
        return _inventory_answer(request, inventory, variables, play, listed)
    finally:
        _LOADER.set_basedir(previous_basedir)


def _host_vars(variables, play, host):
    """A host's variables without hostvars or delegation; 2.19 dropped the
    delegation keyword (delegated vars are no longer computed there)."""
    try:
        return variables.get_vars(play=play, host=host, include_hostvars=False, include_delegate_to=False)
    except TypeError:
        return variables.get_vars(play=play, host=host, include_hostvars=False)


def _inventory_answer(request, inventory, variables, play, listed):
    groups = {name: [host.name for host in group.get_hosts()] for name, group in inventory.groups.items()}
    hosts = {}
    for host in listed:
        found = _host_vars(variables, play, host)
        magic = variables._get_magic_variables(play=play, host=host, task=None, include_hostvars=False,
                                               _hosts=None, _hosts_all=None)
        own = {k: v for k, v in found.items()
               if k not in magic and k not in ("vars", "environment", "ansible_facts", "inventory_hostname",
                                               "inventory_hostname_short", "group_names")}
        hosts[host.name] = {
            "vars": _jsonable(own),
            "own": _jsonable(_host_own_vars(inventory, host)),
            "groups": sorted(g.name for g in host.get_groups() if g.name not in ("all", "ungrouped")),
            "implicit": bool(host.implicit),
        }
    parents = {name: [parent.name for parent in group.parent_groups] for name, group in inventory.groups.items()}
    group_vars, orphan_host_vars = _dynamic_host_vars(inventory)
    # sort_groups' key: depth, priority, name.
    group_sort = {name: [group.depth, group.priority] for name, group in inventory.groups.items()}
    return {"groups": groups, "group_parents": parents, "hosts": hosts, "group_sort": group_sort,
            "group_vars": group_vars, "orphan_host_vars": orphan_host_vars,
            # ansible_inventory_sources, as the play's magic variables have it.
            "sources": list(inventory._sources)}


def _vars_plugins(inventory, entities):
    from ansible.utils.vars import combine_vars
    from ansible.vars.plugins import get_vars_from_inventory_sources, get_vars_from_path

    stage = "task" if C.RUN_VARS_PLUGINS == "demand" else "inventory"
    found = get_vars_from_inventory_sources(_LOADER, inventory._sources, entities, stage)
    return combine_vars(found, get_vars_from_path(_LOADER, _LOADER.get_basedir(), entities, stage))


def _host_own_vars(inventory, host):
    """A host's own variables (the inventory's, then host_vars/), which
    rank above every group's."""
    from ansible.utils.vars import combine_vars

    own = combine_vars(host.get_vars(), _vars_plugins(inventory, [host]))
    for magic in ("inventory_hostname", "inventory_hostname_short", "group_names"):
        own.pop(magic, None)
    return own


def _dynamic_host_vars(inventory):
    """What a host `add_host` makes would get from the inventory: each
    group's vars (the inventory's, and group_vars/ next to it and to the
    playbook), and host_vars/ files of hosts the inventory does not list."""
    from ansible.inventory.group import Group
    from ansible.inventory.host import Host

    basedir = _LOADER.get_basedir()

    def plugin_vars(entities):
        return _vars_plugins(inventory, entities)

    # Split as VARIABLE_PRECEDENCE ranks them: every group's inventory vars
    # below every group's vars plugins (group_vars/).
    group_vars = {name: {"inventory": _jsonable(group.get_vars()), "plugins": _jsonable(plugin_vars([group]))}
                  for name, group in inventory.groups.items()}
    directories = [basedir] + [os.path.dirname(os.path.abspath(s)) if os.path.isfile(s) else s
                               for s in inventory._sources if isinstance(s, str)]
    names = set()
    for directory in directories:
        folder = os.path.join(directory, "host_vars")
        if os.path.isdir(folder):
            names.update(os.path.splitext(entry)[0] for entry in os.listdir(folder))
    orphans = {}
    for name in sorted(names):
        if inventory.get_host(name) is None or inventory.get_host(name).implicit:
            found = plugin_vars([Host(name)])
            if found:
                orphans[name] = _jsonable(found)
    # A group made while the playbook runs (group_by) gets group_vars/ too.
    for directory in directories:
        folder = os.path.join(directory, "group_vars")
        if os.path.isdir(folder):
            for entry in sorted(os.listdir(folder)):
                name = os.path.splitext(entry)[0]
                if name not in group_vars:
                    group_vars[name] = {"inventory": {}, "plugins": _jsonable(plugin_vars([Group(name)]))}
    return group_vars, orphans


def _module_defaults(request):
    """What module_defaults keys resolve to, by Ansible's own
    Base._load_module_defaults, and the groups each action belongs to."""
    from ansible.playbook.play import Play

    play = Play()
    keys, errors = {}, {}
    for key in request.get("keys") or []:
        try:
            loaded = play._load_module_defaults("module_defaults", {key: {}}) or [{}]
            keys[key] = list(loaded[0])
        except AnsibleError as exc:
            errors[key] = to_text(exc)
    return {"keys": keys, "errors": errors, "action_groups": play._action_groups}


def _resolve_module(name, collections):
    """One task's action as ModuleArgsParser resolves it: whether Ansible
    has it, its resolved name, or Ansible's error for it (a tombstoned
    module, a redirect loop), which concerns that task alone."""
    try:
        context = plugin_loader.module_loader.find_plugin_with_context(name, collection_list=collections)
        action_context = plugin_loader.action_loader.find_plugin_with_context(name, collection_list=collections)
    except AnsibleError as exc:
        return {"found": False, "fqcn": None, "path": None, "action_only": False, "error": _error(exc)}
    action = action_context.resolved
    # The task's resolved_action, as ModuleArgsParser picks it: the
    # action plugin's name first, else the module's.
    if action:
        fqcn = action_context.resolved_fqcn
    elif context.resolved:
        fqcn = context.resolved_fqcn
    else:
        fqcn = None
    return {
        "found": bool(context.resolved) or bool(action),
        "fqcn": fqcn,
        "path": context.plugin_resolved_path if context.resolved else None,
        "action_only": bool(action) and not context.resolved,
        "raw_params": _supports_raw_params(action_context, fqcn),
    }


def _supports_raw_params(action_context, fqcn):
    """Whether the task's action takes free-form words (`_raw_params`), as
    Task._post_validate_args decides: its action plugin says so, or it is
    one of the command modules."""
    from ansible.parsing.mod_args import RAW_PARAM_MODULES

    if fqcn in RAW_PARAM_MODULES:
        return True
    if not action_context.resolved:
        return False
    plugin = plugin_loader.action_loader.get(action_context.resolved_fqcn, class_only=True)
    return bool(getattr(plugin, "supports_raw_params", False))


def _has_lookup(name, errors):
    """Whether Ansible has the lookup; a removed one's message goes to
    errors (has_plugin raises Ansible's own errors)."""
    try:
        return plugin_loader.lookup_loader.has_plugin(name)
    except AnsibleError as exc:
        errors[name] = _error(exc)
        return False


def _resolve(request):
    """Which names Ansible can load, for enka check and the loader. Each
    name is answered on its own: one Ansible refuses (removed, a redirect
    loop) is reported for itself and leaves the others resolved."""
    collections = _collections(request)
    modules = {name: _resolve_module(name, collections) for name in request.get("modules") or []}
    environment = _templar().environment
    errors = {"filters": {}, "tests": {}, "lookups": {}}
    filters = {n: _has(environment.filters, n, errors["filters"]) for n in request.get("filters") or []}
    tests = {n: _has(environment.tests, n, errors["tests"]) for n in request.get("tests") or []}
    lookups = {n: _has_lookup(n, errors["lookups"]) for n in request.get("lookups") or []}
    return {"modules": modules, "filters": filters, "tests": tests, "lookups": lookups, "errors": errors}


def _shadowed(request):
    """Which of enka's native filters and tests a project's own plugins
    replace: those whose callable, as Ansible would call it, is defined in
    a file under the project's plugin directories."""
    import inspect

    dirs = tuple(os.path.join(os.path.realpath(d), "") for d in request.get("dirs") or [])
    environment = _templar().environment
    out = {}
    for kind, table in (("filters", environment.filters), ("tests", environment.tests)):
        names = []
        for name in request.get(kind) or []:
            try:
                func = inspect.unwrap(table[name])
            except Exception:  # noqa: BLE001 - not loadable: enka's own stays
                continue
            code = getattr(func, "__code__", None)
            if code is not None and os.path.realpath(code.co_filename).startswith(dirs):
                names.append(name)
        out[kind] = names
    return out


def _has(table, name, errors=None):
    try:
        return table[name] is not None
    except KeyError:
        return False
    except Exception as exc:  # noqa: BLE001 - a collection that fails to load, a removed plugin
        if errors is not None and "has been removed" in to_text(exc):
            errors[name] = to_text(exc)
        return False


def _error(exc):
    if isinstance(exc, AnsibleError):
        return to_text(exc.message if hasattr(exc, "message") else exc)
    return "%s: %s" % (type(exc).__name__, to_text(exc))


def _timed_out(module, period):
    """TaskExecutor's result for a task its timeout ended, in each line's words."""
    if _DATA_TAGGING:
        return {"failed": True, "msg": "Task failed: Timed out after %d second(s)." % period,
                "timedout": {"frame": "Configure `DISPLAY_TRACEBACK` to see a traceback on timeout errors.",
                             "period": period}}
    return {"failed": True,
            "msg": "The %s action failed to execute in the expected time frame (%d) and was terminated"
            % (module, period),
            "timedout": {"frame": repr(sys._getframe()), "period": period}}


def _captured_error_221(result):
    """2.21's TaskExecutor: a failed result carrying a captured error (a
    module's) becomes the task's error, which words its message; any other
    result is left as it is."""
    from ansible._internal._task import UnifiedTaskResult
    from ansible.errors import AnsibleTaskError
    task_result = UnifiedTaskResult.from_action_result_dict(result)
    try:
        task_result.maybe_raise_on_result()
    except Exception as captured:  # noqa: BLE001 - AnsibleResultCapturedError, as TaskExecutor catches it
        try:
            raise AnsibleTaskError() from captured
        except AnsibleTaskError as task_error:
            task_result = UnifiedTaskResult._create_from_exception(
                task_error, accept_result_contribution=True, source_is_module=False)
        return task_result.as_result_dict(for_round_trip=True)
    return result


def _task_failed(exc):
    """The result of a task whose action raised: up to 2.18 an AnsibleError's
    message, or an unexpected failure's; from 2.19 (TaskExecutor._execute)
    the task's error, caused by what was raised."""
    if not _RESULT_ERRORS_219:
        if isinstance(exc, AnsibleError):
            return {"failed": True, "msg": _error(exc)}
        return {"failed": True, "msg": "Unexpected failure during module execution: %s" % exc,
                "exception": traceback.format_exc()}
    from ansible.errors import AnsibleTaskError
    from ansible._internal._errors import _error_utils
    try:
        raise AnsibleTaskError() from exc
    except AnsibleTaskError as task_error:
        result = _error_utils.result_dict_from_exception(task_error, accept_result_contribution=True)
    result.setdefault("changed", False)
    return result


def _serve(request):
    op = request.get("op")
    if _VAULT is None and op in ("run", "lookup") and _vault_configured():
        try:
            _vault()
        except Exception:  # noqa: BLE001 - the task that needs it says why
            pass
    if op == "hello":
        return {"protocol": PROTOCOL, "ansible": release.__version__, "python": sys.version.split()[0],
                "pid": os.getpid()}
    if op == "run":
        try:
            result = _run_task(request)
            if _RESULT_ERRORS_219:
                # A module's captured error is the task's (TaskExecutor).
                from ansible._internal._errors import _captured
                _captured.AnsibleActionCapturedError.maybe_raise_on_result(result)
            elif _RELEASE >= (2, 21):
                result = _captured_error_221(result)
        except _TaskTimeout:
            # TaskExecutor's words, naming the task's own timeout keyword
            # (else the time the reconcile had left).
            period = request.get("task_timeout") or int(request.get("timeout") or 0)
            result = _timed_out(request.get("module"), period)
        except Exception as exc:  # noqa: BLE001 - Ansible reports these as the task's failure
            result = _task_failed(exc)
        finally:
            _Deadline.value = None
        return {"result": _jsonable(_registered(result))}
    try:
        if op == "filter" or op == "test":
            return {"value": _jsonable(_call_jinja(op, request))}
        if op == "lookup":
            return {"value": _jsonable(_lookup(request))}
        if op == "resolve":
            return _resolve(request)
        if op == "module_defaults":
            return _module_defaults(request)
        if op == "shadowed":
            return _shadowed(request)
        if op == "inventory":
            return _inventory(request)
        if op == "vault_decrypt":
            return {"value": _vault_decrypt(request)}
        if op == "plugin_filters":
            return {"modules": sorted(plugin_loader._PLUGIN_FILTERS["ansible.modules"])}
        if op == "config_vars":
            return {"vars": _config_vars(request)}
    except Exception as exc:  # noqa: BLE001 - the plugin's own message goes back
        return {"error": _error(exc)}
    return {"error": "unknown request %r" % op}


def main():
    while True:
        request = _read_frame()
        if request is None:
            return 0
        try:
            response = _serve(request)
        except Exception as exc:  # noqa: BLE001 - never die on one request
            response = {"error": _error(exc)}
        response["id"] = request.get("id")
        _write_frame(response)


if __name__ == "__main__":
    sys.exit(main())
