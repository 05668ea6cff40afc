"""A Harbor task's image without a container engine: its `environment/Dockerfile` read into what an episode's
sandbox replays over the host's root, or refused with the line and why.

    FROM debian | ubuntu | python ...    the host's root stands in (alpine, CUDA and Windows images are refused)
    WORKDIR, ENV, ARG, USER              the workdir, the environment, a user name (emulated: HOME, USER)
    COPY / ADD (the task's files)        into the sandbox at each reset (its own folders), or shown read-only (a
                                         file at the root, /entrypoint.sh)
    RUN apt-get install P...             taken when the host has every package P, else refused naming it
    RUN pip install P...                 P installed in the environment's venv at import
    RUN mkdir, echo > f, chmod, ...      run in the sandbox at each reset, as the episode
    ENTRYPOINT                           started in the background at each reset (CMD is replaced, as Harbor does)
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

REFUSED_IMAGES = {"alpine": "an Alpine image (musl, apk), unlike this machine's Debian root",
                  "nvidia/cuda": "a CUDA image, for a GPU this machine has not",
                  "windows": "a Windows image", "mcr.microsoft.com": "a Windows image"}
SETUP_COMMANDS = {"mkdir", "touch", "chmod", "cp", "mv", "ln", "echo", "printf", "cat", "rm", "true",
                  "sed", "tee", "install"}
APT = {"apt-get", "apt"}
NOOP_APT = {"update", "clean", "autoremove", "autoclean"}
USER_COMMANDS = {"useradd", "adduser", "groupadd", "addgroup", "usermod"}  # (emulated: USER, [agent].user)
PROVIDED_IMAGES = ("ghcr.io/astral-sh/uv",)  # COPY --from= an image of tools the runner provides (uv, uvx)


class ImageRefusedError(ValueError):
    """A Dockerfile line that cannot be emulated without a container engine."""


@dataclass
class Image:
    base: str = ""
    workdir: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    user: str | None = None
    copies: list[tuple[str, str]] = field(default_factory=list)  # (source under environment/, destination inside)
    setup: list[str] = field(default_factory=list)  # shell commands run at reset, in order, from the workdir
    packages: list[str] = field(default_factory=list)  # pip requirements: the environment's venv's
    entrypoint: list[str] | None = None
    modes: dict[str, str] = field(default_factory=dict)  # chmod of a copied file (applied as it is copied)
    writes: list[tuple[str, bool]] = field(default_factory=list)  # (path, a folder?) the setup commands make
    notes: list[str] = field(default_factory=list)

    def destinations(self) -> list[str]:
        return [destination for _, destination in self.copies]

    def record(self) -> dict[str, Any]:
        return {"base": self.base, "user": self.user, "copies": self.copies, "setup": self.setup,
                "entrypoint": self.entrypoint, "modes": self.modes}


def read_image(context: Path, docker_image: str | None) -> Image:
    """The image of a task whose build context is `context` (its environment/ folder)."""
    dockerfile = context / "Dockerfile"
    if not dockerfile.is_file():
        image = Image(base=docker_image or "")
        if docker_image:
            _check_base(docker_image, "[environment].docker_image")
            image.notes.append(f"the image {docker_image} is not pulled: the host's root stands in for it")
        image.copies = [(str(path.relative_to(context)), "")  # (seed files: into the workdir, as Harbor uploads)
                        for path in sorted(context.rglob("*")) if path.is_file() and path.name != ".gitkeep"] \
            if context.is_dir() and docker_image else []
        return image
    image = Image()
    for number, instruction, argument in _instructions(dockerfile.read_text()):
        where = f"environment/Dockerfile line {number}"
        if instruction == "FROM":
            if image.base:
                raise ImageRefusedError(f"{where}: a second FROM (a multi-stage build) needs a container engine")
            image.base = argument.split()[0]
            _check_base(image.base, where)
        elif instruction == "WORKDIR":
            image.workdir = str(PurePosixPath(image.workdir or "/", argument.strip()))
        elif instruction == "ENV":
            image.env.update(_assignments(argument))
        elif instruction == "USER":
            image.user = argument.strip().split(":")[0]
        elif instruction in ("COPY", "ADD"):
            _copy(image, argument, context, where)
        elif instruction == "RUN":
            _run(image, argument, where, context)
        elif instruction == "ENTRYPOINT":
            image.entrypoint = _command(argument)
        elif instruction not in ("ARG", "CMD", "LABEL", "EXPOSE", "VOLUME", "SHELL", "STOPSIGNAL", "HEALTHCHECK",
                                 "MAINTAINER", "ONBUILD"):
            raise ImageRefusedError(f"{where}: {instruction} cannot be emulated without a container engine")
    return image


def _check_base(base: str, where: str) -> None:
    for prefix, what in REFUSED_IMAGES.items():
        if base.startswith(prefix) or f"/{prefix}" in base:
            raise ImageRefusedError(f"{where}: {base} is {what}; tasks run over this machine's root here")


def _instructions(text: str) -> list[tuple[int, str, str]]:
    """(line number, instruction, its argument) of each instruction, continuation lines joined."""
    found, pending, start = [], "", 0
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if pending and stripped.startswith("#"):
            continue
        if not pending:
            start = number
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        whole = pending + stripped
        pending = ""
        instruction, _, argument = whole.partition(" ")
        found.append((start, instruction.upper(), argument.strip()))
    return found


def _assignments(argument: str) -> dict[str, str]:
    parts = shlex.split(argument)
    if parts and "=" not in parts[0]:  # ENV KEY value with spaces
        return {parts[0]: " ".join(parts[1:])}
    return dict(part.split("=", 1) for part in parts if "=" in part)


def _command(argument: str) -> list[str]:
    if argument.startswith("["):
        return [str(part) for part in json.loads(argument)]
    return ["/bin/sh", "-c", argument]


def _copy(image: Image, argument: str, context: Path, where: str) -> None:
    parts = shlex.split(argument)
    flags = [part for part in parts if part.startswith("--")]
    paths = [part for part in parts if not part.startswith("--")]
    source_image = next((flag.split("=", 1)[1] for flag in flags if flag.startswith("--from=")), None)
    if source_image is not None:
        if source_image.startswith(PROVIDED_IMAGES):
            image.notes.append(f"{where}: uv and uvx from {source_image} are the runner's own")
            return
        raise ImageRefusedError(f"{where}: COPY --from={source_image} needs that image, and a container engine")
    if len(paths) < 2:
        raise ImageRefusedError(f"{where}: COPY needs a source and a destination")
    *sources, destination = paths
    if not destination.startswith("/"):
        destination = str(PurePosixPath(image.workdir or "/", destination)) + ("/" if destination.endswith("/")
                                                                                else "")
    for source in sources:
        if re.match(r"^[a-z]+://", source):
            raise ImageRefusedError(f"{where}: ADD of a URL ({source}) needs the network at build time")
        matched = sorted(context.glob(source)) if any(c in source for c in "*?[") else [context / source]
        for path in matched:
            if not path.exists() or context.resolve() not in (path.resolve(), *path.resolve().parents):
                raise ImageRefusedError(f"{where}: {source} is not in the task's environment/ folder")
            made = {made for made, folder in image.writes if folder}  # (a folder a RUN line before made: into it)
            into = destination.endswith("/") or len(sources) > 1 or len(matched) > 1 or path.is_dir() or \
                destination.rstrip("/") in made
            target = str(PurePosixPath(destination, path.name)) if into and not path.is_dir() else \
                destination.rstrip("/") or "/"
            files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
            for file in files:
                inside = str(PurePosixPath(target, file.relative_to(path))) if path.is_dir() else target
                image.copies.append((str(file.relative_to(context)), inside))
    mode = next((flag.split("=", 1)[1] for flag in flags if flag.startswith("--chmod=")), None)
    if mode is not None:
        image.modes.update({inside: mode for _, inside in image.copies[-len(sources):]})


def _run(image: Image, argument: str, where: str, context: Path) -> None:
    """A RUN line: each of its commands taken (setup at reset, packages, apt checked against the host) or refused.
    Its setup runs from the WORKDIR of its line, as Docker runs it; a `cd` in it moves on from there."""
    if argument.startswith("["):
        argument = shlex.join(_command(argument))
    folder = image.workdir or "/"
    kept = [f"cd {shlex.quote(folder)}"]
    for command in _commands(argument):
        try:
            words = shlex.split(command, posix=True)
        except ValueError as exc:
            raise ImageRefusedError(f"{where}: RUN {command!r} is not read as a shell command here ({exc})") from None
        if not words:
            continue
        program = Path(words[0]).name
        if program in APT:
            _apt(words, where, image)
        elif program in ("pip", "pip3") or words[:3] in (["python", "-m", "pip"], ["python3", "-m", "pip"]):
            image.packages += _pip_requirements(words[words.index("install") + 1:], folder, image, context, where)
        elif program in USER_COMMANDS or program == "chown":
            image.notes.append(f"{where}: {program} is emulated (commands run as the episode's own uid; "
                               "USER and HOME say the name)")
        elif program == "rm" and any(word.startswith("/var/lib/apt") for word in words):
            continue  # (apt's cache: there is none to clean)
        elif program == "chmod" and len(words) == 3 and \
                (target := str(PurePosixPath(folder, words[2]))) in image.destinations():
            image.modes[target] = words[1]  # (a copied file's mode: given as it is copied)
        elif program == "cd" and len(words) == 2:
            folder = str(PurePosixPath(folder, words[1]))
            kept.append(f"cd {shlex.quote(folder)}")
        elif program in SETUP_COMMANDS:
            kept.append(command)
            image.writes += _written(words, folder)
        else:
            raise ImageRefusedError(f"{where}: RUN {command!r} cannot be emulated without a container engine "
                                    f"(what is taken: apt-get of packages this machine has, pip install, cd, "
                                    f"{', '.join(sorted(SETUP_COMMANDS))})")
    if not all(line.startswith("cd ") for line in kept):
        image.setup.append(" && ".join(kept))
        if image.workdir not in (None, "/"):  # (Docker makes a WORKDIR: a folder the trial has)
            image.writes.append((image.workdir, True))


def _commands(line: str) -> list[str]:
    """The commands of a RUN line, split at its &&, || and ; outside quotes."""
    commands, start, quote, index = [], 0, "", 0
    while index < len(line):
        char = line[index]
        if char == "\\" and quote != "'":
            index += 2
            continue
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif line.startswith(("&&", "||"), index) or char == ";":
            commands.append(line[start:index])
            index += 1 if char == ";" else 2
            start = index
            continue
        index += 1
    commands.append(line[start:])
    return [command.strip() for command in commands if command.strip()]


def _pip_requirements(arguments: list[str], folder: str, image: Image, context: Path, where: str) -> list[str]:
    """What `pip install ARGUMENTS` installs: its requirements, and those of the files it names with -r (files the
    Dockerfile copied from the task's environment/ folder)."""
    found, words = [], iter(arguments)
    for word in words:
        if word in ("-r", "--requirement") or word.startswith(("-r", "--requirement=")):
            name = next(words, "") if word in ("-r", "--requirement") else word.split("=", 1)[-1] \
                if word.startswith("--") else word[2:]
            inside = str(PurePosixPath(folder, name))
            source = next((source for source, destination in image.copies if destination == inside), None)
            if source is None:
                raise ImageRefusedError(f"{where}: pip install -r {name}: not a file the Dockerfile copied from the "
                                        "task's environment/ folder")
            lines = (line.split("#", 1)[0].strip() for line in (context / source).read_text().splitlines())
            found += [line for line in lines if line and not line.startswith("-")]
        elif not word.startswith("-"):
            found.append(word)
    return found


def _written(words: list[str], workdir: str) -> list[tuple[str, bool]]:
    """(path, whether a folder) of what a setup command writes: its redirections' targets, mkdir's folders,
    touch's files, the destination of cp, mv and ln."""
    found = [(word.lstrip(">"), False) for word in words if word.startswith(">") and word.lstrip(">")]
    found += [(after, False) for before, after in itertools.pairwise(words) if before in (">", ">>")]
    program, arguments = Path(words[0]).name, [word for word in words[1:] if not word.startswith("-")]
    if program == "mkdir":
        found += [(path, True) for path in arguments]
    elif program == "touch":
        found += [(path, False) for path in arguments]
    elif program in ("cp", "mv", "ln", "install") and len(arguments) > 1:
        found.append((arguments[-1], arguments[-1].endswith("/")))
    return [(str(PurePosixPath(workdir, path)), folder) for path, folder in found if not path.startswith("&")]


def _apt(words: list[str], where: str, image: Image) -> None:
    action = next((word for word in words[1:] if not word.startswith("-")), "")
    if action in NOOP_APT:
        return
    if action != "install":
        raise ImageRefusedError(f"{where}: {' '.join(words)!r} cannot be emulated without a container engine")
    packages = [word for word in words[words.index("install") + 1:] if not word.startswith("-")]
    missing = [package for package in packages if not _installed(package.split("=")[0])]
    if missing:
        raise ImageRefusedError(f"{where}: apt-get install of {', '.join(missing)}, which this machine has not "
                                f"(install {'them' if len(missing) > 1 else 'it'} on the server's machine, or use "
                                "a container engine)")
    image.notes.append(f"{where}: apt-get install {' '.join(packages)}: the host's packages stand in")


def _installed(package: str) -> bool:
    if shutil.which("dpkg-query") is None:
        return shutil.which(package) is not None
    found = subprocess.run(["dpkg-query", "-W", "-f=${Status}", package], capture_output=True, text=True,
                           env={**os.environ, "LC_ALL": "C"})
    return found.returncode == 0 and "install ok installed" in found.stdout
