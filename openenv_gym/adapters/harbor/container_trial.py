"""A Harbor trial in a container of its own (sandbox/containers.py): what a task in its image plays in where this
machine cannot make sandboxes but a container engine answers. The engine starts the image as Harbor's does (its
ENTRYPOINT given `sh -c "sleep infinity"`, its ENV, WORKDIR and USER), bounded by task.toml's cpus and memory_mb and
the server's limits; the trial's files go in and out through the engine, its commands through `engine exec`.

What a sandbox does and a container here does not: storage_mb is not bounded; an allowlist cannot be held (such a
task is refused with what to do); the agent program of ours (harness "bash") is not run in it.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from openenv_gym.adapters.harbor.trial import REWARD_BYTES, Ran, Trial
from openenv_gym.errors import EnvError
from openenv_gym.manifests.schema import HarborManifest
from openenv_gym.sandbox import wipe
from openenv_gym.sandbox.containers import Bounds, Container
from openenv_gym.sandbox.engines import Engine
from openenv_gym.sandbox.mounts import shown_in_images


class ContainerTrial(Trial):
    def __init__(self, manifest: HarborManifest, task: dict[str, Any], container: Container,
                 side: dict[str, Any] | None = None) -> None:
        self.container, self.images, self.image = container, {}, None
        self._describe(manifest, task, side)

    @classmethod
    async def open(cls, manifest: HarborManifest, task: dict[str, Any], engine: Engine, bounds: Bounds,
                   side: dict[str, Any] | None = None) -> ContainerTrial:
        """The trial's container started (a separate verifier's, given its `side`)."""
        network = (side or task)["environment"]["network"]
        if network["mode"] == "allowlist":
            raise EnvError(f"task {task['id']} allows only some hosts ({', '.join(network['allow'])}), which a "
                           "container here cannot hold (a sandbox does): serve it where sandboxes can be made, as "
                           "root or in a user namespace (`openenv-gym doctor` says why none can here)")
        container = await Container.start(engine, (side or task)["tag"], bounds, network["mode"] == "public",
                                          tuple(map(str, shown_in_images(()))))
        return cls(manifest, task, container, side)

    async def _write(self, files: dict[str, tuple[bytes, int]]) -> None:
        await self.container.put(files)

    async def _folder(self, inside: str, mode: int | None = None) -> None:
        await self.container.put({}, {inside: 0o755 if mode is None else mode})

    async def _read(self, inside: str) -> bytes | None:
        return await self.container.get(inside, REWARD_BYTES)

    async def _empty(self, inside: str) -> None:
        await self.container.empty(inside)

    async def _artifact(self, source: str) -> dict[str, bytes]:
        found = await self.container.get_tree(source, self.manifest.limits.output_mb << 20, wipe.WIPE_BUDGET)
        if not found:
            return {}
        if list(found) == [Path(source).name]:  # (a file)
            return {"": found[Path(source).name]}
        name = Path(source).name  # (a folder: its files by their path under it)
        return {relative[len(name):]: data for relative, data in found.items() if relative.startswith(f"{name}/")}

    async def _start_entrypoint(self) -> None:
        """Started by the engine with the container."""

    async def run(self, command: str, timeout: float, environ: dict[str, str] | None = None,
                  no_network: bool = False, user: str | None = None) -> Ran:
        """`bash -c command` in the container, from its workdir, as `user` (else the image's), off the network for
        a phase that goes without it, killed past `timeout` seconds."""
        if no_network:
            await self.container.connect(False)
        try:
            done = await self.container.run(f"cd {shlex.quote(self.workdir)} && {command}", user or self.user or "root",
                                            {**self.environ, **(environ or {})}, timeout,
                                            self.manifest.limits.output_mb << 20)
        finally:
            if no_network:
                await self.container.connect(True)
        return Ran(done.exit_code, done.stdout + done.stderr, done.timed_out)

    async def close(self) -> None:
        await self.container.remove()
