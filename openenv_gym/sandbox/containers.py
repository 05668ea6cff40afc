"""One container per episode, through a container engine: what an episode of a task in its image runs in where this
machine cannot make sandboxes (no bubblewrap; an ordinary user whose kernel refuses user namespaces) but Docker or
Podman answers. The container starts at reset and is removed at close. The engine bounds it (--cpus, --memory,
--pids-limit, open files) and keeps it off the network (--network none) unless the task has one. Files go in and out
as tar streams (`engine cp`), commands run through `engine exec`, and a command past its timeout is killed inside,
with every process it started (an exec'd command leads a process group of its own).

    box = await Container.start(engine, image, Bounds(memory_bytes=..., processes=..., open_files=...))
    done = await box.run("ls -la", user="root", environ={...}, timeout=10.0, output_bytes=1 << 20)
    await box.put({"/tests/test.sh": (data, 0o755)})
    data = await box.get("/logs/verifier/reward.txt", 1 << 20)   # None: not there
    await box.remove()

Containers are named after the worker that started them (openenv-gym-w<pid>-<n>): a worker that died without
removing its own leaves them to the next worker's `remove_orphans`.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import itertools
import os
import re
import shlex
import subprocess
import tarfile
import time
from dataclasses import dataclass
from pathlib import PurePosixPath

from openenv_gym.errors import EnvError
from openenv_gym.runtime.lifetime import process_runs
from openenv_gym.sandbox.engines import Engine

PREFIX = "openenv-gym-w"
ENGINE_TIMEOUT = 120.0  # seconds an engine may take to start, copy into or remove a container
HARBOR_COMMAND = ("sh", "-c", "sleep infinity")  # what Harbor gives a task's container, after its ENTRYPOINT
PID_FILE = "/tmp/.openenv-gym-command-{}.pid"  # where a command leaves its process group's id (inside)
_names = itertools.count()


@dataclass(frozen=True)
class Bounds:
    """What the engine bounds a container by (Docker's and Podman's run flags)."""

    memory_bytes: int
    processes: int
    open_files: int
    cpus: float | None = None


@dataclass(frozen=True)
class Done:
    exit_code: int  # -9: killed past its timeout
    stdout: str  # the end of each, within the bound asked for
    stderr: str
    timed_out: bool


class Container:
    def __init__(self, engine: Engine, name: str) -> None:
        self.engine, self.name = engine, name
        self.commands = itertools.count()

    @classmethod
    async def start(cls, engine: Engine, image: str, bounds: Bounds, network: bool = False,
                    shown: tuple[str, ...] = (), command: tuple[str, ...] | None = HARBOR_COMMAND,
                    published: int | None = None) -> Container:
        """A container of `image`, its ENTRYPOINT given `command` (Harbor's `sh -c "sleep infinity"`; None: the
        image's CMD), `shown` host paths read-only at their own paths, port `published` inside published on a free
        port of the host's loopback (`address`)."""
        name = f"{PREFIX}{os.getpid()}-{next(_names)}-{os.urandom(3).hex()}"
        memory = f"{max(bounds.memory_bytes >> 20, 6)}m"  # (Docker's least)
        command = [engine.name, "run", "--detach", "--name", name, "--network", "bridge" if network else "none",
                   "--memory", memory, "--memory-swap", memory, "--pids-limit", str(bounds.processes),
                   "--ulimit", f"nofile={bounds.open_files}:{bounds.open_files}",
                   *(["--cpus", f"{bounds.cpus:g}"] if bounds.cpus else []),
                   *(argument for path in shown for argument in ("--volume", f"{path}:{path}:ro")),
                   *(["--publish", f"127.0.0.1::{published}"] if published else []), image, *(command or ())]
        if engine.name == "podman":  # (its default processes limit is above what some machines let it set)
            command[3:3] = ["--ulimit", f"nproc={bounds.processes}:{bounds.processes}"]
        await _engine(command, f"start a container of {image}")
        return cls(engine, name)

    async def run(self, command: str, user: str, environ: dict[str, str], timeout: float,
                  output_bytes: int) -> Done:
        """`bash -c command` as `user`, with `environ` over the image's, killed with its process group past
        `timeout` seconds."""
        pid_file = PID_FILE.format(next(self.commands))
        wrapped = f'echo $$ > {pid_file}; exec bash -c "$1"'
        process = await asyncio.create_subprocess_exec(
            self.engine.name, "exec", "--user", user,
            *(argument for key, value in environ.items() for argument in ("--env", f"{key}={value}")),
            self.name, "sh", "-c", wrapped, "sh", command,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert process.stdout is not None and process.stderr is not None
        reading = asyncio.gather(_tail(process.stdout, output_bytes), _tail(process.stderr, output_bytes))
        timed_out = False
        try:
            await asyncio.wait_for(asyncio.shield(process.wait()), timeout)
        except TimeoutError:
            timed_out = True
            await self.exec_root(f"kill -KILL -$(cat {pid_file}) 2>/dev/null || true")  # (ended by now: fine)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(process.wait(), ENGINE_TIMEOUT)
        finally:
            _kill(process)  # (cancelled, or its engine client stuck: the episode ends, its container with it)
        stdout, stderr = await reading
        return Done(-9 if timed_out else process.returncode or 0, stdout, stderr, timed_out)

    async def address(self, port: int) -> str:
        """"127.0.0.1:N": where the host reaches the container's published `port`."""
        said = (await _engine([self.engine.name, "port", self.name, str(port)], "say its published port")).split()
        if not said:
            raise EnvError(f"{self.engine.name} published no port {port} of its container")
        return said[0]

    async def exit_code(self) -> int | None:
        """Its command's exit code, once it has ended (None: it runs)."""
        said = (await _engine([self.engine.name, "inspect", "--format", "{{.State.Running}} {{.State.ExitCode}}",
                               self.name], "say whether its container runs")).split()
        return None if said[:1] == ["true"] else int(said[1])

    async def logs(self) -> str:
        """The end of what its command printed."""
        done = await asyncio.to_thread(subprocess.run, [self.engine.name, "logs", self.name], capture_output=True,
                                       text=True, timeout=ENGINE_TIMEOUT)
        return (done.stdout + done.stderr)[-1500:]

    async def exec_root(self, script: str) -> str:
        """`sh -c script` as root, for the runner's own chores; its output."""
        return await _engine([self.engine.name, "exec", "--user", "0", self.name, "sh", "-c", script],
                             "run a command in its container")

    async def put(self, files: dict[str, tuple[bytes, int]], folders: dict[str, int] | None = None) -> None:
        """Files ({path: (data, mode)}) and folders ({path: mode}) written into the container, owned by root (as
        Harbor uploads them); folders missing on the way are made."""
        buffer, now = io.BytesIO(), time.time()
        with tarfile.open(fileobj=buffer, mode="w") as archive:
            for path, mode in (folders or {}).items():
                archive.addfile(_entry(path, tarfile.DIRTYPE, mode, now))
            for path, (data, mode) in files.items():
                entry = _entry(path, tarfile.REGTYPE, mode, now)
                entry.size = len(data)
                archive.addfile(entry, io.BytesIO(data))
        await _engine([self.engine.name, "cp", "-", f"{self.name}:/"], "copy files into its container",
                      stdin=buffer.getvalue())

    async def get(self, path: str, max_bytes: int) -> bytes | None:
        """A file's bytes (the first `max_bytes`), or None where there is no file at `path`."""
        found = await self.get_tree(path, max_bytes, 1)
        return found.get(PurePosixPath(path).name) if found else None

    async def get_tree(self, path: str, max_bytes: int, max_files: int) -> dict[str, bytes] | None:
        """The regular files at `path` (a file, or a folder's, at most `max_files`), by their path under its parent
        folder (a link is not followed); None where nothing is there."""
        process = await asyncio.create_subprocess_exec(
            self.engine.name, "cp", f"{self.name}:{path}", "-", stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL)
        assert process.stdout is not None
        bound, data = max_bytes * max_files + (max_files + 1) * 4096, b""
        while len(data) < bound and (chunk := await process.stdout.read(bound - len(data))):
            data += chunk
        _kill(process)  # (past the bound: the rest is not read)
        await process.wait()
        if not data:
            return None
        found: dict[str, bytes] = {}
        try:
            with tarfile.open(fileobj=io.BytesIO(data), mode="r|") as archive:
                for entry in archive:
                    if entry.isreg() and len(found) < max_files:
                        read = archive.extractfile(entry)
                        found[entry.name] = read.read(max_bytes) if read else b""
        except (tarfile.TarError, EOFError):  # (cut at the bound: what came whole is kept)
            pass
        return found

    async def empty(self, folder: str) -> None:
        """A folder emptied (made where missing)."""
        quoted = shlex.quote(folder)
        await self.exec_root(f"mkdir -p {quoted} && cd {quoted} && rm -rf -- ./* ./.[!.]* ./..?*")

    async def connect(self, network: bool) -> None:
        """The container on its engine's default network, or off it (a phase without network)."""
        default = "podman" if self.engine.name == "podman" else "bridge"
        verb = "connect" if network else "disconnect"
        await _engine([self.engine.name, "network", verb, default, self.name], f"{verb} its container")

    async def remove(self) -> None:
        await _engine(_remove(self.engine, [self.name]), "remove its container")


def remove_orphans(engine: Engine) -> int:
    """Remove the containers of workers that are gone (a worker removes its own as its episodes close); how many."""
    listed = subprocess.run([engine.name, "ps", "--all", "--filter", f"name={PREFIX}", "--format", "{{.Names}}"],
                            capture_output=True, text=True, timeout=ENGINE_TIMEOUT)
    orphans = [name for name in listed.stdout.split() if (found := re.fullmatch(rf"{PREFIX}(\d+)-.*", name))
               and not process_runs(int(found[1]))]
    if orphans:
        subprocess.run(_remove(engine, orphans), capture_output=True, timeout=ENGINE_TIMEOUT)
    return len(orphans)


def _remove(engine: Engine, names: list[str]) -> list[str]:
    # (killed, not stopped: Podman would wait 10 s for a `sleep` that ignores SIGTERM)
    return [engine.name, "rm", "--force", *(["--time", "0"] if engine.name == "podman" else []), *names]


def _kill(process: asyncio.subprocess.Process) -> None:
    """An engine's client process killed, where it has not ended."""
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            process.kill()


def _entry(path: str, kind: bytes, mode: int, now: float) -> tarfile.TarInfo:
    entry = tarfile.TarInfo(PurePosixPath(path).relative_to("/").as_posix())
    entry.type, entry.mode, entry.mtime = kind, mode, int(now)
    return entry


async def _tail(stream: asyncio.StreamReader, limit: int) -> str:
    """The last `limit` bytes of a stream, read to its end."""
    kept = b""
    while chunk := await stream.read(1 << 16):
        kept = (kept + chunk)[-limit:]
    return kept.decode("utf-8", "replace")


async def _engine(command: list[str], doing: str, stdin: bytes | None = None) -> str:
    """An engine command's output; EnvError naming what failed and what the engine said. (Run in a thread: under
    uvloop, a process Podman leaves behind, its container's monitor, keeps the event loop's pipes open.)"""
    try:
        done = await asyncio.to_thread(subprocess.run, command, input=stdin, capture_output=True,
                                       timeout=ENGINE_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise EnvError(f"{command[0]} did not {doing} within {ENGINE_TIMEOUT:g} s") from None
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip().splitlines()
        raise EnvError(f"{command[0]} could not {doing}: {said[-1] if said else f'exit code {done.returncode}'}")
    return done.stdout.decode(errors="replace")
