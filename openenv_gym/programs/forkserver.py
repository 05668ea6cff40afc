"""The programs' fork server: one light process per worker that imported what programs need once, and forks each
program from itself, so that no program pays a new interpreter.

multiprocessing has a fork server, but it cannot fork into a PID namespace: a sandboxed program had to fork a second
time once inside, and the copy cost a third of a program's CPU time. This one forks the program inside its
sandbox's PID namespace directly (setns(2) on the namespace its children are born in, then back), and spares each
program multiprocessing's preparation of a process (its arguments pickled twice, its main module looked up). In a
server's own user namespace (an ordinary user's, sandbox/userns.py), where it could not go back to its own PID
namespace, it goes back to one of its own (_home_namespace).

The protocol, over a SOCK_SEQPACKET socket pair: the worker sends one byte and two or three file descriptors, a memfd
holding the pickled ProgramSpec, the write end of a pipe, and, for a sandboxed program, its PID namespace. The server
forks and writes to the pipe the program's pid (a negative errno if it could not fork), then, when the program has
ended, its wait status; the worker reads both (program.py). The server exits when the worker's end of the socket
closes, and its programs with it (they die with their parent).

    python -c "from openenv_gym.programs.forkserver import main; main()" '{"channel": FD, "preload": [...], ...}'
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import json
import os
import pickle
import selectors
import signal
import socket
import struct
import sys

from openenv_gym.programs.child import run
from openenv_gym.runtime.lifetime import die_with_parent
from openenv_gym.sandbox.enter import MAX_FDS, setns, unshare, warm_up

REQUEST = b"p"
NUMBER = struct.Struct("i")  # a pid, a negative errno, or a wait status


def serve(channel: socket.socket, preload: list[str]) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # (a ^C in the worker's terminal is the worker's to handle)
    for name in preload:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            print(f"openenv-gym: programs' fork server: cannot preload {name}: {exc}", file=sys.stderr)
    warm_up()  # (the C library, the seccomp filter: loaded and compiled here once)
    gc.freeze()  # (the collector leaves what was imported alone: each program's pages stay shared longer)
    own_namespace = _home_namespace()
    born_inside = own_namespace is not None
    selector = selectors.DefaultSelector()
    selector.register(channel, selectors.EVENT_READ)
    while True:
        for key, _ in selector.select():
            if key.fileobj is not channel:
                _report_end(selector, key)
                continue
            try:
                message, fds, _, _ = socket.recv_fds(channel, 1, 3)
            except ConnectionError:
                return
            if message != REQUEST:
                for fd in fds:
                    os.close(fd)
                if not message:
                    return  # the worker has gone
                continue
            spec, status, *namespace = fds
            pid = _fork(spec, namespace[0] if namespace and born_inside else None, own_namespace, selector)
            for fd in (spec, *namespace):
                os.close(fd)
            _tell(status, pid)
            if pid < 0:
                os.close(status)
                continue
            selector.register(os.pidfd_open(pid), selectors.EVENT_READ, (pid, status))


def _home_namespace() -> int | None:
    """The PID namespace this process goes back to after forking in a sandbox's: its own, if it may return to it.
    In a server's own user namespace (an ordinary user's, sandbox/userns.py) it may not (the host owns it): it makes
    a PID namespace of its own there, held by a child that reaps what ends up in it. None if it cannot either: then
    each sandboxed program forks once more to enter (sandbox/enter.py)."""
    own = os.open("/proc/self/ns/pid", os.O_RDONLY)
    try:
        setns(own, "pid")
        return own
    except OSError:
        os.close(own)
    try:
        unshare("pid")  # (its next child is the new namespace's first process)
    except OSError:
        return None
    holder = os.fork()
    if holder == 0:
        _reap_forever()
    return os.open(f"/proc/{holder}/ns/pid", os.O_RDONLY)


def _reap_forever() -> None:
    """The first process of the fork server's own PID namespace: it lives as long as the server, and reaps the
    processes orphaned there."""
    die_with_parent(signal.SIGKILL)
    os.closerange(3, MAX_FDS)  # (the server's socket: its worker must see it close when the server ends)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
    while True:
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        signal.sigwait({signal.SIGCHLD})


def _fork(spec: int, namespace: int | None, own_namespace: int | None, selector: selectors.BaseSelector) -> int:
    """Fork the program of the pickled spec in memfd `spec`, born in PID namespace `namespace` if given; its pid,
    or a negative errno."""
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        if namespace is not None:
            setns(namespace, "pid")
    except OSError as exc:
        return -(exc.errno or 1)
    try:
        pid = os.fork()
    except OSError as exc:
        pid = -(exc.errno or 1)
    if pid == 0:
        _program(spec, selector, born_inside=namespace is not None)  # (never returns; nor does it go back to the
        # server's PID namespace)
    if namespace is not None and own_namespace is not None:
        _back_to_own(own_namespace)
    return pid


def _back_to_own(own_namespace: int) -> None:
    """The next programs are born in the server's own PID namespace again; a server that cannot is of no use (the
    next unsandboxed program would be born in this sandbox): it ends, and the worker starts another."""
    try:
        setns(own_namespace, "pid")
    except OSError:
        os._exit(70)


def _program(spec: int, selector: selectors.BaseSelector, born_inside: bool) -> None:
    """The forked program's whole life: it never returns to the server's loop."""
    code = 1
    try:
        selector.close()
        data = os.pread(spec, os.fstat(spec).st_size, 0)
        os.closerange(3, MAX_FDS)  # (the server's socket, the other programs' pipes: none of its business)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        code = run(pickle.loads(data), born_inside)
    finally:
        os._exit(code)


def _report_end(selector: selectors.BaseSelector, key: selectors.SelectorKey) -> None:
    pid, status = key.data
    selector.unregister(key.fd)
    os.close(key.fd)
    _, wait_status = os.waitpid(pid, 0)
    _tell(status, wait_status)
    os.close(status)


def _tell(fd: int, number: int) -> None:
    with contextlib.suppress(BrokenPipeError):  # (nobody waits for this program any more)
        os.write(fd, NUMBER.pack(number))


def main() -> None:
    settings = json.loads(sys.argv[1])
    sys.path[:] = settings["sys_path"]
    serve(socket.socket(fileno=settings["channel"]), settings["preload"])

