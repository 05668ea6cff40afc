"""Environments of openenv_gym's own interface that run code (`runs_code = true` in their manifest): each episode's
commands run in a sandbox of its own (workplace.py), opened at its first `run_code` and renewed when the episode
ends (its next reset, or the session's close), never in the server's worker.

    run = await self.run_code(["python", "solution.py"], files={"solution.py": action}, timeout=20)
    run.exit_code, run.stdout, run.stderr, run.timed_out, run.out_of_memory
"""

from __future__ import annotations

import asyncio
import inspect
import sys
from pathlib import Path
from typing import Any

from openenv_gym.adapters.environment import CodeRun, Environment
from openenv_gym.adapters.workplace import Workplace
from openenv_gym.manifests.schema import PythonManifest, sandbox_policy
from openenv_gym.programs import STDIN, ProgramSpec, inherited_environ, run_to_end
from openenv_gym.sandbox.paths import write_inside


def running_code(cls: type[Environment], manifest: PythonManifest, sandboxed: bool) -> type[Environment]:
    """`cls` whose `run_code` runs commands in its episode's sandbox (or, served --no-sandbox, a temporary folder)."""
    policy = sandbox_policy(manifest.network, manifest.limits, manifest.folder)
    limits = manifest.limits

    class RunningCode(cls):  # type: ignore[valid-type, misc]
        _place: Workplace | None = None

        async def run_code(self, argv: list[str], *, stdin: str = "", files: dict[str, str] | None = None,
                           timeout: float = 60.0) -> CodeRun:
            if self._place is None:
                self._place = await Workplace.open(policy, sandboxed, f"openenv-gym-{manifest.name}-")
            place = self._place
            for name, text in {**(files or {}), STDIN: stdin}.items():
                await asyncio.to_thread(_write, place, name, text)
            command = [sys.executable if part in ("python", "python3") and index == 0 else part
                       for index, part in enumerate(argv)]  # ("python": the env's own interpreter)
            spec = ProgramSpec(workdir=place.workdir, environ=place.environ(inherited_environ()),
                               cpu_seconds=limits.cpu_seconds, memory_bytes=limits.memory_mb << 20,
                               output_bytes=limits.output_mb << 20, open_files=limits.open_files, command=command,
                               output_prefix=".run", sandbox=place.entry,
                               processes=limits.processes if place.entry is not None else None)
            done = await run_to_end(spec, place.host_workdir, timeout)
            return CodeRun(done.exit_code, done.stdout, done.stderr, done.timed_out, place.out_of_memory())

        async def _end_episode(self) -> None:
            place, self._place = self._place, None
            if place is not None:
                await place.close()

        async def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
            await self._end_episode()
            return await _call(super().reset, seed=seed, options=options)

        async def close(self) -> None:
            await self._end_episode()
            await _call(super().close)

    RunningCode.__name__, RunningCode.__qualname__ = cls.__name__, cls.__qualname__
    RunningCode.__module__, RunningCode.__doc__ = cls.__module__, cls.__doc__
    return RunningCode


async def _call(method: Any, **arguments: Any) -> Any:
    """An environment's method, as the server calls it: a plain `def` in a thread (it may block)."""
    if inspect.iscoroutinefunction(method):
        return await method(**arguments)
    return await asyncio.to_thread(method, **arguments)


def _write(place: Workplace, name: str, text: str) -> None:
    """A file of the command's, in its working directory (a sandbox's: through its own root, paths.py)."""
    if Path(name).is_absolute() or ".." in Path(name).parts:
        raise ValueError(f"run_code's files are named inside the working directory, not {name!r}")
    if place.sandbox is None:
        target = Path(place.host_workdir, name)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    else:
        write_inside(place.sandbox.pid, f"{place.workdir}/{name}", text.encode(), place.sandbox.uid)
