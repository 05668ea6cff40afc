"""A Harbor task's containers in their own images, built by a container engine at import (so that no reset pays
for a build), as Harbor builds them: `environment/Dockerfile` built once per content of its folder, or
`[environment].docker_image` used as named (from the engine's store, else pulled, else refused with how to load it).

    images = TaskImages.chosen("docker", say=print)   # None for --engine none: the image emulated (harbor_image.py)
    tag = images.image(task / "environment", None, "[environment]")
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from openenv_gym.manifests.harbor import TaskRefusedError
from openenv_gym.manifests.images import build_image, images_cache
from openenv_gym.sandbox import images
from openenv_gym.sandbox.engines import ENGINE_VARIABLE, Engine, EngineUnavailableError, choose
from openenv_gym.sandbox.rootfs import ImageConfig, ImageUnavailableError, archive, config_of, image_id

PULL_TIMEOUT = 600.0


@dataclass
class TaskImages:
    engine: Engine
    say: Callable[[str], None]

    @classmethod
    def chosen(cls, name: str | None, say: Callable[[str], None] = lambda _: None) -> TaskImages | None:
        """The images of engine `name` ("docker", "podman"; None: $OPENENV_GYM_ENGINE, else the first that answers),
        or None: "none", or no engine answers by default (then the images are emulated, and the import says so)."""
        name = name or os.environ.get(ENGINE_VARIABLE) or None
        if name == "none":
            return None
        try:
            engine = choose(name)
        except EngineUnavailableError as exc:
            raise TaskRefusedError(f"--engine {name}: {exc}") from None
        return cls(engine, say) if engine is not None else None

    def image(self, context: Path, docker_image: str | None, where: str) -> tuple[str, str]:
        """(the tag, the id) of the image of a container whose build context is `context`: built from its
        Dockerfile, else `docker_image` as named; its files exported for sandboxes (rootfs.archive)."""
        tag = self._tag(context, docker_image, where)
        try:
            return tag, archive(self.engine, tag, images_cache())
        except ImageUnavailableError as exc:
            raise TaskRefusedError(f"{where}: {exc}") from None

    def _tag(self, context: Path, docker_image: str | None, where: str) -> str:
        if (context / "Dockerfile").is_file():
            try:
                return build_image(self.engine, context, self.say)
            except images.ImageBuildError as exc:
                raise TaskRefusedError(str(exc)) from None
        if not docker_image:
            raise TaskRefusedError(f"{where}: neither environment/Dockerfile nor docker_image: Harbor has no image "
                                   "to run the task in")
        if image_id(self.engine, docker_image) is None:
            self.say(f"pulling {docker_image} with {self.engine.name}")
            try:
                pulled = subprocess.run([self.engine.name, "pull", docker_image], capture_output=True, text=True,
                                        timeout=PULL_TIMEOUT)
                said = (pulled.stderr.strip().splitlines() or [f"exit code {pulled.returncode}"])[-1]
            except subprocess.TimeoutExpired:
                said = f"no answer within {PULL_TIMEOUT:g} s"
            if image_id(self.engine, docker_image) is None:
                raise TaskRefusedError(f"{where} docker_image {docker_image} is not in {self.engine.name}'s images "
                                       f"and could not be pulled ({said}): load it ({self.engine.name} load -i "
                                       "IMAGE.tar) and import again")
        return docker_image

    def config(self, tag: str) -> ImageConfig:
        """What the image's config says a container of it starts with."""
        return ImageConfig.read(config_of(self.engine, tag))
