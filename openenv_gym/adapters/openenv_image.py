"""Serve an OpenEnv project from its image (manifest kind "openenv" with an `image`: importers/openenv_image.py).

Each session runs the project's own server, the image's ENTRYPOINT and CMD as a container would run them (its ENV,
WORKDIR and USER), in a sandbox of its own over the image's files, and plays it through OpenEnv's /ws protocol as
any OpenEnv client does (client/openenv.py), over a port of the worker's loopback forwarded into that sandbox. The
environment's code, and what it starts (a chess engine, a browser, figlet), run only there.

reset:  the session's server started at its first reset and waited for (/health); then OpenEnv's reset.
step:   OpenEnv's step; an action its Action schema refuses is an invalid-action observation, as from
        openenv/remote.
close:  the server's socket closed, its processes killed, its sandbox gone.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any

from openenv_gym.adapters.environment import Environment
from openenv_gym.adapters.workplace import Workplace
from openenv_gym.client.openenv import OpenEnvSession as RemoteSession
from openenv_gym.client.openenv import OpenEnvTransport, answers_health
from openenv_gym.episode.results import ResetResult, StepResult
from openenv_gym.errors import EnvError, SandboxUnavailableError
from openenv_gym.manifests.images import unpacked
from openenv_gym.manifests.schema import IMAGE_DESCRIPTION, OpenEnvManifest
from openenv_gym.programs import Program, ProgramSpec
from openenv_gym.sandbox import SandboxPolicy, unavailable
from openenv_gym.sandbox.ports import close_port, out_of_sandbox
from openenv_gym.sandbox.rootfs import Exported, ImageUnavailableError

START_TIMEOUT = 120.0  # seconds a session's server may take to answer /health
OUTPUT_BYTES = 1 << 20  # of its server's output, kept for the error of one that does not start


class OpenEnvImageFactory:
    def __init__(self, manifest: OpenEnvManifest, sandboxed: bool) -> None:
        assert manifest.image is not None and manifest.engine is not None
        self.manifest, self.image, self.sandboxed = manifest, manifest.image, sandboxed
        self.exported: Exported | None = None
        self.description = json.loads((manifest.folder / IMAGE_DESCRIPTION).read_text())
        if sandboxed:
            reason = unavailable()
            if reason is not None:
                raise SandboxUnavailableError(f"{manifest.name} runs its own server in a sandbox per session, over its "
                                              f"image's files, which this machine cannot make: {reason}")
            try:
                self.exported = unpacked(manifest.engine, self.image.tag, self.image.image_id)
            except ImageUnavailableError as exc:
                raise SandboxUnavailableError(f"{manifest.name} is served from its image: {exc}") from None
            self.policy = SandboxPolicy(network="none", image=str(self.exported.rootfs))

    def __call__(self) -> OpenEnvImageSession:
        return OpenEnvImageSession(self)

    def describe(self) -> dict[str, Any]:
        return {**self.description, "name": self.manifest.name, "source": "openenv",
                "description": self.manifest.description or self.description.get("description", ""),
                "max_steps": self.manifest.max_steps, "image": self.image.tag}

    def spec(self, place: Workplace) -> ProgramSpec:
        """The image's server, as a container of it runs: ENTRYPOINT then CMD, from its WORKDIR, as its USER."""
        assert self.exported is not None and place.entry is not None
        config, policy = self.exported.config, self.policy
        user = config.user or "root"
        uid, gid = self.exported.uid_of(user)
        command = [*config.entrypoint, *config.command]
        if not command:
            raise EnvError(f"{self.manifest.name}'s image has neither ENTRYPOINT nor CMD: nothing starts its server")
        return ProgramSpec(
            workdir="/tmp", environ={"HOME": self.exported.home_of(user), **config.env},
            cpu_seconds=policy.cpu_seconds, memory_bytes=policy.memory_bytes, output_bytes=OUTPUT_BYTES,
            open_files=policy.open_files, processes=policy.processes, output_prefix=".openenv-server",
            command=["sh", "-c", 'cd "$0" && exec "$@"', config.workdir or "/", *command],
            sandbox=dataclasses.replace(place.entry, uid=uid, gid=gid))


class OpenEnvImageSession(Environment):
    def __init__(self, factory: OpenEnvImageFactory) -> None:
        self.factory = factory
        self.place: Workplace | None = None
        self.server: Program | None = None
        self.port: asyncio.Server | None = None
        self.transport: OpenEnvTransport | None = None
        self.remote: RemoteSession | None = None

    async def _start(self) -> RemoteSession:
        """The session's own server, started in its sandbox and answering; its OpenEnv session."""
        if not self.factory.sandboxed:
            raise EnvError(f"{self.factory.manifest.name} runs its own server in a sandbox per session: serve it "
                           "without --no-sandbox")
        self.place = place = await Workplace.open(self.factory.policy, True)
        assert place.sandbox is not None
        self.server = await Program.start(self.factory.spec(place), place.sandbox.host_path("/tmp"))
        self.port = await out_of_sandbox(place.sandbox.pid, self.factory.image.port)
        url = f"http://127.0.0.1:{self.port.sockets[0].getsockname()[1]}"
        await self._wait_healthy(url)
        self.transport = await OpenEnvTransport(url).open()
        return self.transport.session()

    async def _wait_healthy(self, url: str) -> None:
        assert self.server is not None
        server = self.server

        async def ended() -> bool:
            return server.exitcode is not None
        if not await answers_health(url, START_TIMEOUT, ended):
            stdout, stderr = server.output()
            why = f"exited with code {server.exitcode}" if server.exitcode is not None else \
                f"did not answer /health within {START_TIMEOUT:g} s"
            raise EnvError(f"{self.factory.manifest.name}'s server (its image's command) {why}; the end of its "
                           f"output: {(stdout + stderr)[-1500:]}")

    async def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> ResetResult:
        if self.remote is None:
            self.remote = await self._start()
        obs, info = await self.remote.reset(seed, options)
        return ResetResult(obs, info)

    async def step(self, action: Any) -> StepResult:
        assert self.remote is not None
        obs, reward, terminated, truncated, info = await self.remote.step(action)
        return StepResult(obs, reward, terminated, truncated, info)

    def extras(self) -> dict[str, Any]:
        return {}

    async def close(self) -> None:
        remote, self.remote = self.remote, None
        try:
            if remote is not None:
                await remote.close()
        finally:
            if self.port is not None:
                close_port(self.port)
            if self.server is not None:
                self.server.kill()
            if self.place is not None:
                await self.place.close()
