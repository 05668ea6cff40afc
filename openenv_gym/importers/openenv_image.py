"""An OpenEnv project served from its image: its server/Dockerfile built by a container engine at import, from the
project's folder as OpenEnv's `openenv build` builds it, and the image's files exported for sandboxes (rootfs.py).
Each session then runs the project's own server in a sandbox over those files (adapters/openenv_image.py).

Chosen with --engine docker|podman (or $OPENENV_GYM_ENGINE), or by default where the Dockerfile installs system
packages (apt-get, apk, dnf, yum), which no venv holds, and an engine answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from openenv_gym.client.openenv import OpenEnvTransport, answers_health
from openenv_gym.errors import EnvError
from openenv_gym.importers.base import ImportFailedError
from openenv_gym.manifests.images import build_image, images_cache
from openenv_gym.manifests.schema import IMAGE_DESCRIPTION
from openenv_gym.sandbox import images
from openenv_gym.sandbox.containers import Bounds, Container
from openenv_gym.sandbox.engines import ENGINE_VARIABLE, Engine, EngineUnavailableError, choose
from openenv_gym.sandbox.rootfs import ImageUnavailableError, archive, remove_export

DOCKERFILE = "server/Dockerfile"
SYSTEM_INSTALL = re.compile(r"^\s*RUN\b.*\b(?:apt-get|apt|apk|dnf|yum|microdnf)\s+(?:-\S+\s+)*(?:install|add)\b",
                            re.M | re.I)
DEFAULT_PORT = 8000  # (OpenEnv's template: uvicorn on 8000, openenv.yaml's `port`)
START_TIMEOUT = 120.0  # seconds the image's server may take to answer /health
DESCRIBING = Bounds(memory_bytes=4 << 30, processes=1024, open_files=1024)  # (the container that says what it serves)


def installs_system_packages(source: Path) -> bool:
    dockerfile = source / DOCKERFILE
    return dockerfile.is_file() and bool(SYSTEM_INSTALL.search(dockerfile.read_text(errors="replace")))


def chosen_engine(source: Path, engine: str | None) -> Engine | None:
    """The engine that builds the project's image, or None: it is served in a venv. `engine` is --engine's."""
    name = engine or os.environ.get(ENGINE_VARIABLE) or None
    if name == "none":
        return None
    if not (source / DOCKERFILE).is_file():
        if engine:
            raise ImportFailedError(f"--engine {engine}: {source} has no {DOCKERFILE} to build its image from; import "
                                    "it without --engine (its dependencies in a venv)")
        return None
    if name is None and not installs_system_packages(source):
        return None
    try:
        return choose(name)
    except EngineUnavailableError as exc:
        raise ImportFailedError(f"--engine {name}: {exc}") from None


def built(source: Path, engine: Engine, say: Callable[[str], None], folder: Path) -> dict[str, Any]:
    """The project's image (ProjectImage's fields): built, its files exported, the port its server listens on; what
    its server serves written in the environment's `folder`."""
    try:
        tag = build_image(engine, source, say, DOCKERFILE)
        image_id = archive(engine, tag, images_cache())
    except (images.ImageBuildError, ImageUnavailableError) as exc:
        raise ImportFailedError(str(exc)) from None
    port = DEFAULT_PORT
    with contextlib.suppress(OSError):
        found = re.search(r"(?m)^port:\s*(\d+)", (source / "openenv.yaml").read_text())
        port = int(found[1]) if found else port
    say(f"starting the image's server once with {engine.name}, to read what it serves")
    try:
        description = described(engine, tag, port)
    except BaseException:
        remove_export(images_cache(), image_id)  # (an image's whole files, for an import that failed: not kept)
        raise
    (folder / IMAGE_DESCRIPTION).write_text(json.dumps(description, indent=1))
    return {"tag": tag, "image_id": image_id, "port": port}


def described(engine: Engine, tag: str, port: int) -> dict[str, Any]:
    """What the image's server says it serves (its /schema, /metadata and tools, as OpenEnv's clients read them),
    from a container of it run by the engine, its port on the host's loopback: what every session's sandboxed
    server will say."""
    return asyncio.run(_described(engine, tag, port))


async def _described(engine: Engine, tag: str, port: int) -> dict[str, Any]:
    container = await Container.start(engine, tag, DESCRIBING, network=True, command=None, published=port)

    async def ended() -> bool:
        return await container.exit_code() is not None

    async def reached() -> str | None:
        """The server's URL on the host; None once its container has ended (whose port is then published no more,
        which may happen between the two questions)."""
        if await ended():
            return None
        try:
            return f"http://{await container.address(port)}"
        except EnvError:
            if await ended():
                return None
            raise
    try:
        url = await reached()
        if url is None or not await answers_health(url, START_TIMEOUT, ended):
            code = await container.exit_code()
            why = f"exited with code {code}" if code is not None else \
                f"did not answer /health on port {port} within {START_TIMEOUT:g} s"
            raise ImportFailedError(f"the image's server (its CMD, run by {engine.name}) {why}; the end of its "
                                    f"output: {await container.logs()}")
        return (await OpenEnvTransport(url).open()).description
    finally:
        await container.remove()
