"""enka's fork server: a Python with Ansible imported that forks workers.

Starting a worker from nothing costs Python's start and Ansible's imports,
some 200 ms; forking one from this process, which has done both and served
no task, costs a few. Each fork becomes an ordinary worker (enka_worker.py's
loop) talking to enka over a Unix socket enka listens on: the first
connection carries the protocol, the second its standard error. Its pages
stay shared with this process and its siblings until one of them writes.

Requests on stdin, answers on stdout, framed as the worker's:
  {"op": "hello"}                      -> the versions, as a worker's
  {"op": "fork", "socket": path, "dir": the worker's own directory}
                                       -> {"pid": the worker's pid}
"""

import gc
import os
import select
import signal
import socket
import sys
import tempfile
import traceback

import enka_worker as worker


def main():
    signal.signal(signal.SIGCHLD, _reap)
    # What is alive now is never collected in the forks: their collector
    # would touch (and so copy) every page they share.
    gc.freeze()
    forked = warmed = False
    while True:
        if forked and not warmed:
            # After the first fork, once nothing is asked of this server for
            # a moment: neither the first worker's start nor a burst of forks
            # waits for it.
            warmed = _warm_when_idle()
        request = worker._read_frame()
        if request is None:
            return 0
        op = request.get("op")
        if op == "hello":
            response = worker._serve(request)
        elif op == "fork":
            forked = True
            try:
                response = {"pid": _fork(request["socket"], request["dir"])}
            except OSError as exc:
                response = {"error": "cannot fork a worker: %s" % exc}
        else:
            response = {"error": "unknown request %r" % op}
        response["id"] = request.get("id")
        worker._write_frame(response)


_IDLE_BEFORE_WARMING = 0.5


def _warm_when_idle():
    """Whether the server has made, after half a second without a request,
    what each later fork's first task would make."""
    ready, _, _ = select.select([worker._PROTOCOL_IN], [], [], _IDLE_BEFORE_WARMING)
    if ready:
        return False
    _warm()
    return True


def _warm():
    try:
        worker.warm_for_tasks()
    except Exception:  # noqa: BLE001 - each worker makes what it needs itself
        traceback.print_exc()
    gc.freeze()


def _reap(_signal, _frame):
    """Waits for the workers that ended (enka kills them, or they exit)."""
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _fork(path, directory):
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        _become_worker(path, directory)
        code = worker.main()
    except BaseException:  # noqa: BLE001 - a fork must never return to the server's loop
        traceback.print_exc()
    finally:
        os._exit(code)


def _become_worker(path, directory):
    """Turns this fork into a worker of its own: its own process group, its
    own directory, and the two connections to enka for its streams."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.setpgid(0, 0)
    worker._die_with_parent()
    # The server's pipes are enka's to close: a fork holding them would hide
    # the server's end from it.
    worker._PROTOCOL_IN.close()
    worker._PROTOCOL_OUT.close()
    connections = []
    for tag in (b"P", b"L"):
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        connection.connect(path)
        connection.sendall(tag)
        connections.append(connection)
    protocol, log = connections
    os.dup2(log.fileno(), 2)
    os.dup2(2, 1)
    log.close()
    worker._PROTOCOL_IN = os.fdopen(os.dup(protocol.fileno()), "rb", buffering=0)
    worker._PROTOCOL_OUT = os.fdopen(os.dup(protocol.fileno()), "wb", buffering=0)
    protocol.close()
    _own_directory(directory)


def _own_directory(directory):
    """Ansible's temporary directories in the worker's own, as a worker
    started with them in its environment has them."""
    local = os.path.join(directory, "local")
    os.environ.update(
        ENKA_WORKER_ZYGOTE="0",
        ENKA_WORKER_DIR=directory,
        ANSIBLE_LOCAL_TEMP=local,
        ANSIBLE_REMOTE_TEMP=os.path.join(directory, "remote"),
    )
    os.makedirs(local, mode=0o700, exist_ok=True)
    worker.C.DEFAULT_LOCAL_TMP = tempfile.mkdtemp(prefix="ansible-local-%d" % os.getpid(), dir=local)
    worker._RUNNING_GROUP_FILE = os.path.join(directory, "module.pgid")


if __name__ == "__main__":
    sys.exit(main())
