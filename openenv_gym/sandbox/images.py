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
from typing import IO

from openenv_gym.errors import OpenEnvGymError
from openenv_gym.sandbox.engines import Engine
from openenv_gym.sandbox.rootfs import image_id

REPOSITORY = "openenv-gym/image"
# a step as each builder announces it: Docker's classic builder "Step 2/5 : RUN ...", Podman's "STEP 2/5: RUN ...",
# BuildKit's plain progress "#7 [2/5] RUN ..." (a stage's name before the numbers in a multi-stage build), and the
# step BuildKit says failed: " > [2/5] RUN ...:"
STEP = re.compile(r"^(?:(?:Step|STEP) (\d+)/(\d+) ?: |#\d+ \[(?:\S+ )?(\d+)/(\d+)\] )(.*)$")
FAILED_STEP = re.compile(r"^> \[(?:\S+ )?(\d+)/(\d+)\] (.*):$")
NO_BUILDKIT = "buildx component is missing"  # (a Docker CLI of 23 or later without buildx: its classic builder)
CACHE_MOUNT = re.compile(r"(?m)^(\s*RUN[ \t]+(?:--\S+[ \t]+)*?)--mount=type=cache\S*[ \t]+")  # (a RUN line's flag)
NEEDS_BUILDKIT = "requires BuildKit"  # (the classic builder, on a line only BuildKit builds: COPY --chmod, say)


class ImageBuildError(OpenEnvGymError):
    """An image's build failed: its step, its line, and where its log is."""


def context_digest(context: Path, dockerfile: str = "Dockerfile") -> str:
    """A digest of a build context (built with its `dockerfile`): every file's path, mode and content (links as
    their targets' text)."""
    digest = hashlib.sha256(b"" if dockerfile == "Dockerfile" else f"built with {dockerfile}\n".encode())
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


def build(engine: Engine, context: Path, logs: Path, say: Callable[[str], None] = lambda _: None,
          dockerfile: str = "Dockerfile", labels: dict[str, str] | None = None) -> str:
    """The tag of the image of `context` (its `dockerfile` inside: "server/Dockerfile", say), built by `engine`
    unless built before, its output in a log in folder `logs`. Its steps are said (`say`) as they start; the network
    is the host's (the package registries it reaches). Docker builds with BuildKit, as its users' does (`COPY
    --chmod` needs it), or where its CLI has no buildx, with its classic builder (the log says so). `labels` go on
    the image: who built it."""
    digest = context_digest(context, dockerfile)
    tag = f"{REPOSITORY}:{digest}"
    if image_id(engine, tag) is not None:
        return tag
    logs.mkdir(parents=True, exist_ok=True)
    log = logs / f"{digest}.log"
    labelled = [argument for key, value in (labels or {}).items() for argument in ("--label", f"{key}={value}")]
    with open(log, "w") as written:
        build = [*labelled, *([] if dockerfile == "Dockerfile" else ["--file", str(context / dockerfile)]),
                 str(context)]
        code, step, output = _run_build(engine, build, tag, written, say, buildkit=True)
        if code != 0 and NO_BUILDKIT in output:
            written.write("(no BuildKit in this docker CLI: built again with its classic builder)\n")
            stripped = _without_cache_mounts(context / dockerfile)
            if stripped is not None:
                (logs / f"{digest}.Dockerfile").write_text(stripped)
                written.write(f"(its RUN lines' cache mounts left out, which only BuildKit has: built from "
                              f"{logs / f'{digest}.Dockerfile'})\n")
                build = [*labelled, "--file", str(logs / f"{digest}.Dockerfile"), str(context)]
            code, step, output = _run_build(engine, build, tag, written, say, buildkit=False)
    if code != 0:
        where = f"at {step}" if step else "before its first step"
        hint = ("; that line needs BuildKit, which this docker CLI has not: install Docker's buildx plugin (Docker's "
                "repository: docker-buildx-plugin; Debian 13 and Ubuntu: docker-buildx), or import with --engine "
                "podman") if NEEDS_BUILDKIT in output else ""
        raise ImageBuildError(f"the image of {context} did not build with {engine.name}, {where}; its log: {log}"
                              f"{hint}")
    return tag


def _without_cache_mounts(dockerfile: Path) -> str | None:
    """A Dockerfile's text without its RUN lines' `--mount=type=cache,...` flags (a BuildKit cache of downloads, which
    the classic builder refuses and the image never holds); None where it has none."""
    text = dockerfile.read_text(errors="replace")
    stripped = text
    while (found := CACHE_MOUNT.sub(r"\1", stripped)) != stripped:
        stripped = found
    return stripped if stripped != text else None


def _run_build(engine: Engine, build: list[str], tag: str, written: IO[str], say: Callable[[str], None],
               buildkit: bool) -> tuple[int, str, str]:
    """(its exit code, the step it was at or failed at, the end of its output)."""
    # (--force-rm: the classic builder keeps a failed step's container, and its layers, otherwise)
    flags = (["--progress", "plain"] if buildkit else ["--force-rm"]) if engine.name == "docker" else []
    process = subprocess.Popen([engine.name, "build", *flags, "--network", "host", "-t", tag, *build],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env=os.environ | {"DOCKER_BUILDKIT": "1" if buildkit else "0"})
    step, said, tail = "", set(), []
    for line in process.stdout:  # type: ignore[union-attr]
        written.write(line)
        tail = [*tail[-20:], line]
        if (found := STEP.match(line.strip())) and (numbers := tuple(filter(None, found.groups()[:4]))) not in said:
            said.add(numbers)
            step = f"step {numbers[0]} of {numbers[1]}: {found[5]}"
            say(f"building the image of {build[-1]}: {step}")
        elif failed := FAILED_STEP.match(line.strip()):
            step = f"step {failed[1]} of {failed[2]}: {failed[3]}"
    return process.wait(), step, "".join(tail)
