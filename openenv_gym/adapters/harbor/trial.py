"""One Harbor trial in its sandbox: staged as Harbor's layout (the workdir with the image's files, /logs/agent,
/logs/verifier, /logs/artifacts), the image's setup run, its entrypoint started and its healthcheck waited for;
then commands run in it, and the verifier: tests/ staged to /tests, /tests/test.sh run from the workdir, its reward
read from /logs/verifier/reward.json, else reward.txt (neither: an error, not 0), its exit code ignored.

Every command runs as the episode's own uid, in the task's workdir, with the environment the image and task.toml
declare, tools/ first on its PATH (stand-ins for the test-time installs a task's scripts make: apt-get, the uv
installer, uvx), and, in a phase the task keeps off the network, a network of its own, empty.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import math
import os
import shlex
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openenv_gym.adapters.workplace import Workplace
from openenv_gym.errors import EnvError
from openenv_gym.manifests.harbor import file_mode, resolved
from openenv_gym.manifests.schema import HarborManifest
from openenv_gym.programs import Program, ProgramSpec, inherited_environ, run_to_end
from openenv_gym.programs.program import Finished
from openenv_gym.sandbox import wipe
from openenv_gym.sandbox.containers import HARBOR_COMMAND
from openenv_gym.sandbox.paths import make_folder_inside, read_inside, write_inside
from openenv_gym.sandbox.rootfs import Exported, ImageUnavailableError

TOOLS = Path(__file__).parent / "tools"
# Debian's libnss-wrapper, where the machine has it: what makes [agent].user a name the episode's uid answers to
NSS_WRAPPER = next((path for path in Path("/usr/lib").glob("*/libnss_wrapper.so")), Path("/nonexistent"))
LOGS = ("/logs/agent", "/logs/verifier", "/logs/artifacts")
REWARD_BYTES = 1 << 20
SETUP_TIMEOUT = 300.0
HEALTH_PROBE = 0.05  # seconds before a healthcheck is tried again, at first (doubling up to its interval)
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"  # (Docker's, where an image sets none)
_outputs = itertools.count()  # (a program's output files: each its own, several may run at once)


@dataclass(frozen=True)
class Ran:
    """A command's end: its exit code (-N: signal N), its output (stdout then stderr, their ends), timed out."""

    exit_code: int
    output: str
    timed_out: bool


class Trial:
    """A container of the task's, in a sandbox: the task's own (`side` None), or a separate verifier's (its record's
    "separate": built from tests/ where tests/ has a Dockerfile, given the agent's artifacts)."""

    def __init__(self, manifest: HarborManifest, task: dict[str, Any], place: Workplace,
                 side: dict[str, Any] | None = None, images: dict[str, Exported] | None = None) -> None:
        if place.sandbox is None:
            raise EnvError("Harbor tasks run in a sandbox each: their paths (/app, /logs, /tests) are the sandbox's "
                           "own; serve them without --no-sandbox")
        self.place, self.sandbox, self.images = place, place.sandbox, images or {}
        self._describe(manifest, task, side)
        self.image = self.images.get(self.side.get("tag", ""))  # (None: the image emulated over the host's root)

    def _describe(self, manifest: HarborManifest, task: dict[str, Any], side: dict[str, Any] | None) -> None:
        """What the trial is, whatever runs it: its task, its container's side, workdir, user and environment."""
        self.manifest, self.task, self.side = manifest, task, side or task
        self.folder = manifest.vendored / task["key"]
        self.workdir: str = self.side["workdir"]
        self.user: str | None = self.side["image"]["user"]  # who runs its commands, but a phase's own user
        environment = resolved(self.side["environment"]["env"])
        if "tag" in self.side:  # (the image's environment, the runner's tools first on its PATH)
            self.environ = {**environment, "PATH": f"{TOOLS}:{environment.get('PATH', DEFAULT_PATH)}",
                            "OPENENV_GYM_PYTHON": sys.executable}
        else:
            self.environ = {**inherited_environ(), "HOME": "/tmp/work", "TMPDIR": "/tmp",
                            "PATH": f"{TOOLS}:{Path(sys.executable).parent}:{os.environ.get('PATH', DEFAULT_PATH)}",
                            "OPENENV_GYM_PYTHON": sys.executable, **environment}
            user = (task["agent"]["user"] if side is None else None) or self.user
            if user:  # (every command runs as the episode's uid; what it is called is emulated)
                self.environ |= {"USER": user, "LOGNAME": user, **self._named(user)}
        self.service: Program | None = None
        self.started = time.monotonic()

    def _named(self, user: str) -> dict[str, str]:
        """The environment that makes the episode's uid answer to `user` (whoami, ls -l), through nss_wrapper's
        files of users and groups in the sandbox's /tmp, where the machine has nss_wrapper; else nothing more."""
        if not NSS_WRAPPER.exists():
            return {}
        uid = self.sandbox.uid
        write_inside(self.sandbox.pid, "/tmp/.harbor-passwd", f"root:x:0:0:root:/root:/bin/bash\n{user}:x:{uid}:"
                     f"{uid}::/tmp/work:/bin/bash\n".encode(), uid)
        write_inside(self.sandbox.pid, "/tmp/.harbor-group", f"root:x:0:\n{user}:x:{uid}:\n".encode(), uid)
        return {"LD_PRELOAD": str(NSS_WRAPPER), "NSS_WRAPPER_PASSWD": "/tmp/.harbor-passwd",
                "NSS_WRAPPER_GROUP": "/tmp/.harbor-group"}

    # -- the sandbox's files, from the server (resolved inside it: paths.py) ----------------------

    async def _write(self, files: dict[str, tuple[bytes, int]]) -> None:
        """Files ({path inside: (data, mode)}) written, the folders on their way made."""
        def write() -> None:
            for inside, (data, mode) in files.items():
                write_inside(self.sandbox.pid, inside, data, self.sandbox.uid, mode)
        await asyncio.to_thread(write)

    async def _folder(self, inside: str, mode: int | None = None) -> None:
        await asyncio.to_thread(make_folder_inside, self.sandbox.pid, inside, self.sandbox.uid, mode)

    async def _read(self, inside: str) -> bytes | None:
        try:
            return await asyncio.to_thread(read_inside, self.sandbox.pid, inside, REWARD_BYTES)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None

    async def _empty(self, inside: str) -> None:
        """Remove what is in a folder of the trial's (the agent may have put files in /tests, say)."""
        host = self.sandbox.host_path(inside)
        if await asyncio.to_thread(host.is_dir) and not await asyncio.to_thread(wipe.empty, host):
            raise EnvError(f"{inside} holds more than {wipe.WIPE_BUDGET} files: it cannot be emptied for the "
                           "verifier")

    async def _artifact(self, source: str) -> dict[str, bytes]:
        """An artifact's files (a file, or a folder's files), by their path under `source`: read through this
        sandbox's root, never following a link out of it (paths.py); bounded as a wipe is."""
        def read() -> dict[str, bytes]:
            host = self.sandbox.host_path(source)
            if host.is_symlink() or not host.exists():
                return {}
            files = [""] if host.is_file() else [
                f"/{path.relative_to(host).as_posix()}" for path in sorted(host.rglob("*"))[:wipe.WIPE_BUDGET]
                if path.is_file() and not path.is_symlink()]
            return {relative: read_inside(self.sandbox.pid, source + relative, self.manifest.limits.output_mb << 20)
                    for relative in files}
        return await asyncio.to_thread(read)

    async def _copy_tree(self, source: Path, inside: str, script: str = "") -> None:
        """A folder's files into the trial, `script` among them executable (Harbor makes it so, as root)."""
        def read() -> dict[str, tuple[bytes, int]]:
            return {f"{inside}/{path.relative_to(source).as_posix()}": (
                path.read_bytes(),
                path.stat().st_mode & 0o777 | (0o755 if path.relative_to(source).as_posix() == script else 0o600))
                for path in (sorted(source.rglob("*")) if source.is_dir() else ()) if path.is_file()}
        await self._write(await asyncio.to_thread(read))

    # -- starting ---------------------------------------------------------------------------------

    async def start(self) -> None:
        """The trial as a fresh container would be: Harbor's folders, the image's files and setup, its service."""
        image = self.side["image"]
        for folder in LOGS:  # (in an image, writable by whichever of its users a phase runs as)
            await self._folder(folder, 0o777 if "tag" in self.side else None)
        if self.workdir != "/":
            await self._folder(self.workdir)
        copies = {inside: (path.read_bytes(), file_mode(image["modes"].get(inside), path.stat().st_mode))
                  for source, inside in image["copies"] if (path := self.folder / self.side["context"] / source)}
        if copies:
            await self._write(copies)
        if image["setup"]:
            ran = await self.run(" && ".join(f"({command})" for command in image["setup"]), SETUP_TIMEOUT)
            if ran.exit_code != 0:
                raise EnvError(f"the task's image setup (its Dockerfile's RUN lines) failed with exit code "
                               f"{ran.exit_code}: {ran.output[-2000:]}")
        await self._start_entrypoint()
        for healthcheck in (image.get("healthcheck"), self.side["environment"]["healthcheck"]):  # (the image's own,
            if healthcheck:                                                                    # then task.toml's)
                await self.wait_healthy(healthcheck)

    async def _start_entrypoint(self) -> None:
        image = self.side["image"]
        if image["entrypoint"]:  # (in its image, given Harbor's command: CMD is replaced, ENTRYPOINT kept)
            command = [*image["entrypoint"], *(HARBOR_COMMAND if self.image is not None else ())]
            self.service = await Program.start(self._spec(command), self.sandbox.host_path("/tmp"))

    async def wait_healthy(self, check: dict[str, Any]) -> None:
        """Docker's healthcheck: tried every start_interval during the start period (failures do not count), then
        every interval; unhealthy after `retries` counted failures. Healthy at the first success: between the
        counted tries it is tried sooner too (from 50 ms, doubling), so that a trial starts as soon as it passes
        rather than an interval later; those failures never count."""
        began, failures, pause = time.monotonic(), 0, HEALTH_PROBE
        counted_at = began
        while True:
            now = time.monotonic()
            in_start = now - began < check["start_period_sec"]
            last = await self.run(check["command"], check["timeout_sec"])
            if last.exit_code == 0:
                return
            interval = check["start_interval_sec"] if in_start else check["interval_sec"]
            if not in_start and now >= counted_at:
                failures += 1
                counted_at = now + interval
                if failures >= check["retries"]:
                    raise EnvError(f"the task's healthcheck ({check['command']}) failed {failures} times: "
                                   f"{last.output[-1000:]}")
            await asyncio.sleep(min(pause, interval))
            pause *= 2

    # -- commands ---------------------------------------------------------------------------------

    def _spec(self, command: str | list[str], environ: dict[str, str] | None = None,
              no_network: bool = False, user: str | None = None) -> ProgramSpec:
        """A command of the trial's: `bash -c command` from the workdir, or an argv (the image's entrypoint); in an
        image, as `user` (else the image's), its HOME that user's."""
        argv = ["bash", "-c", f"cd {shlex.quote(self.workdir)} && {command}"] if isinstance(command, str) else \
            ["sh", "-c", f'cd {shlex.quote(self.workdir)} && exec "$@" > /logs/agent/entrypoint.log 2>&1',
             "entrypoint", *command]
        environ = {**self.environ, **(environ or {})}
        entry = self.place.entry
        if self.image is not None:
            name = user or self.user or "root"
            try:
                uid, gid = self.image.uid_of(name)
            except ImageUnavailableError as exc:
                raise EnvError(f"the task runs its commands as {name}: {exc}") from None
            entry = dataclasses.replace(entry, uid=uid, gid=gid)
            environ = {"HOME": self.image.home_of(name), **environ}
        return self._program_spec(environ=environ, command=argv, no_network=no_network, sandbox=entry)

    def program(self, entry: str, call: dict[str, Any]) -> ProgramSpec:
        """An agent program of ours (`entry` in this folder, called with `call`) run in the trial, forked warm."""
        return self._program_spec(environ=self.environ, folder=str(Path(__file__).parent), name="harbor-programs",
                                  entry=entry, call=call, sandbox=self.place.entry)

    def _program_spec(self, **fields: Any) -> ProgramSpec:
        """A program in the trial, under the manifest's limits; its output files in the sandbox's /tmp (its working
        directory: commands cd to the task's workdir, so that the task's own folder holds nothing of ours)."""
        limits = self.manifest.limits
        return ProgramSpec(workdir="/tmp", cpu_seconds=limits.cpu_seconds, memory_bytes=limits.memory_mb << 20,
                           output_bytes=limits.output_mb << 20, open_files=limits.open_files,
                           processes=limits.processes,
                           output_prefix=f".harbor-{next(_outputs)}", **fields)

    async def run(self, command: str, timeout: float, environ: dict[str, str] | None = None,
                  no_network: bool = False, user: str | None = None) -> Ran:
        """`bash -c command` in the trial, from its workdir (as `user` in an image), killed past `timeout` seconds."""
        done: Finished = await run_to_end(self._spec(command, environ, no_network, user),
                                          self.sandbox.host_path("/tmp"), timeout)
        return Ran(done.exit_code, done.stdout + done.stderr, done.timed_out)

    # -- phases -----------------------------------------------------------------------------------

    async def solve(self, step: str | None, agent: dict[str, Any]) -> Ran:
        """Harbor's oracle: solution/ (the step's) to /solution, solve.sh run as the agent, its output in
        /logs/agent/oracle.txt."""
        source = self.folder / "steps" / step / "solution" if step else self.folder / "solution"
        if not (source / "solve.sh").is_file():
            raise EnvError(f"{'step ' + step if step else 'the task'} has no solution/solve.sh to play the oracle")
        await self._empty("/solution")
        await self._copy_tree(source, "/solution", "solve.sh")
        environ = {"DEBIAN_FRONTEND": "noninteractive", **resolved(self.task["solution"]["env"])}
        return await self.run("/solution/solve.sh > /logs/agent/oracle.txt 2>&1", agent["timeout"] or SETUP_TIMEOUT,
                              environ, self.offline(agent), agent["user"])

    async def stage_step(self, step: str) -> None:
        """A multi-step task's step: its workdir/ files into the workdir, then its setup.sh (which removes itself)."""
        files = self.folder / "steps" / step / "workdir"
        if files.is_dir():
            await self._copy_tree(files, self.workdir)
            if (files / "setup.sh").is_file():
                ran = await self.run(f"bash {self.workdir}/setup.sh", SETUP_TIMEOUT)
                if ran.exit_code != 0:
                    raise EnvError(f"step {step}'s setup.sh failed with exit code {ran.exit_code}: "
                                   f"{ran.output[-2000:]}")

    async def verify(self, step: str | None, verifier: dict[str, Any],
                     separate: Callable[[dict[str, Any]], Awaitable[Trial]] | None = None) \
            -> tuple[dict[str, float], str]:
        """({metric: value} with "reward" among them, test.sh's output): tests/ (and the step's) in /tests,
        /logs/verifier emptied, test.sh run as Harbor runs it; by a separate verifier, in its own container
        (`separate` makes its trial from its side) given the artifacts, where the task says so."""
        if separate is not None:
            apart = await separate(verifier["separate"])
            try:
                await apart.start()
                for source, destination in verifier["separate"]["artifacts"]:
                    found = await self._artifact(source)
                    if found:
                        await apart._write({destination + relative: (data, 0o644)
                                            for relative, data in found.items()})
                return await apart.verify(step, verifier)
            finally:
                await apart.close()
        for folder in ("/tests", "/logs/verifier"):
            await self._empty(folder)
        await self._copy_tree(self.folder / "tests", "/tests", "test.sh")
        if step and (self.folder / "steps" / step / "tests").is_dir():
            await self._copy_tree(self.folder / "steps" / step / "tests", "/tests", "test.sh")
        environ = resolved(verifier.get("env", {}))
        ran = await self.run("/tests/test.sh > /logs/verifier/test-stdout.txt 2>&1", verifier["timeout"] or 600.0,
                             environ, self.offline(verifier), verifier["user"])
        output = (await self._read("/logs/verifier/test-stdout.txt") or b"").decode(
            "utf-8", "replace")[-4000:]
        if ran.timed_out:
            raise EnvError(f"the verifier (tests/test.sh) ran past its {verifier['timeout']} s timeout; its "
                           f"output: {output[-1000:]}")
        return await self._rewards(output), output

    async def _rewards(self, output: str) -> dict[str, float]:
        """reward.json (an object of numbers) before reward.txt (a number), as Harbor reads them."""
        as_json = await self._read("/logs/verifier/reward.json")
        if as_json is not None:
            try:
                values = json.loads(as_json)
            except ValueError:
                raise EnvError(f"/logs/verifier/reward.json is not JSON: {as_json[:200]!r}") from None
            if not isinstance(values, dict) or not values or not all(_number(v) for v in values.values()):
                raise EnvError(f"/logs/verifier/reward.json must be an object of numbers, not {as_json[:200]!r}")
            return {str(key): float(value) for key, value in values.items()}
        as_text = await self._read("/logs/verifier/reward.txt")
        if as_text is None:
            raise EnvError("the verifier wrote no reward (neither /logs/verifier/reward.json nor reward.txt): a "
                           f"missing reward is an error, not 0. tests/test.sh's output: {output[-1500:]}")
        try:
            return {"reward": float(as_text.decode().strip())}
        except (UnicodeDecodeError, ValueError):
            raise EnvError(f"/logs/verifier/reward.txt is not a number: {as_text[:200]!r}") from None

    def offline(self, phase: dict[str, Any]) -> bool:
        """Whether a phase's commands leave the sandbox's network for an empty one (the phase goes without network,
        the environment has one)."""
        return phase["network"]["mode"] == "no-network" and self.side["environment"]["network"]["mode"] != \
            "no-network"

    def start_agent_clock(self) -> None:
        """The agent phase (of the step) begins now: its timeout counts from here."""
        self.started = time.monotonic()

    def agent_time_left(self, timeout: float | None) -> float | None:
        return None if timeout is None else timeout - (time.monotonic() - self.started)

    async def close(self) -> None:
        if self.service is not None:
            self.service.kill()
        await self.place.close()


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)

