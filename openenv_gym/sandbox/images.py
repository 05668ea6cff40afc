"""Images built by a container engine from a build context (a Harbor task's environment/ folder, say): once per
content of the context, whatever names it, so that tasks with the same context share one image, and a build done
is never done again. The build's output goes to a log of its own; each step is said as it starts; a build that
fails names its step, the line, and the log.

    tag = build(engine, Path("task/environment"), logs, say=print)   # "openenv-gym/image:3f2a..." (built, or there)
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

from openenv_gym.errors import OpenEnvGymError
from openenv_gym.sandbox.engines import Engine

REPOSITORY = "openenv-gym/image"
# a step as each builder announces it: Docker's classic builder "Step 2/5 : RUN ...", Podman's "STEP 2/5: RUN ..."
STEP = re.compile(r"^(?:Step|STEP) (\d+)/(\d+) ?: (.*)$")


class ImageBuildError(OpenEnvGymError):
    """An image's build failed: its step, its line, and where its log is."""


def context_digest(context: Path) -> str:
    """A digest of a build context: every file's path, mode and content (links as their targets' text)."""
    digest = hashlib.sha256()
    for path in sorted(context.rglob("*")):
        relative = path.relative_to(context).as_posix()
        if path.is_symlink():
            digest.update(f"link {relative} {os.readlink(path)}\n".encode())
        elif path.is_file():
            status = path.stat()
            digest.update(f"file {relative} {status.st_mode & 0o777:o} {status.st_size}\n".encode())
            digest.update(path.read_bytes())
        elif path.is_dir():
            digest.update(f"dir {relative}\n".encode())
    return digest.hexdigest()[:32]


def exists(engine: Engine, tag: str) -> bool:
    return subprocess.run([engine.name, "image", "inspect", tag], capture_output=True).returncode == 0


def build(engine: Engine, context: Path, logs: Path, say: Callable[[str], None] = lambda _: None) -> str:
    """The tag of the image of `context` (its Dockerfile inside), built by `engine` unless built before, its output
    in a log in folder `logs`. Its steps are said (`say`) as they start; the network is the host's (the package
    registries it reaches)."""
    digest = context_digest(context)
    tag = f"{REPOSITORY}:{digest}"
    if exists(engine, tag):
        return tag
    logs.mkdir(parents=True, exist_ok=True)
    log = logs / f"{digest}.log"
    step = ""
    with open(log, "w") as written:
        process = subprocess.Popen([engine.name, "build", "--network", "host", "-t", tag, str(context)],
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                   env=os.environ | {"DOCKER_BUILDKIT": "0"})  # (its classic output says steps)
        for line in process.stdout:  # type: ignore[union-attr]
            written.write(line)
            if found := STEP.match(line.strip()):
                step = f"step {found[1]} of {found[2]}: {found[3]}"
                say(f"building the image of {context}: {step}")
    if process.wait() != 0:
        where = f"at {step}" if step else "before its first step"
        raise ImageBuildError(f"the image of {context} did not build with {engine.name}, {where}; its log: {log}")
    return tag
