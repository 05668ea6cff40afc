"""An image's root file system, for sandboxes over it: its files exported from its container engine once (at
import) into an archive named by the image's id, unpacked once per machine (no engine needed then), shared
read-only by every sandbox over it (each episode writes in overlays of its own: sandbox.py); and its config (ENV,
WORKDIR, USER, ENTRYPOINT, HEALTHCHECK) read as the engine gives it.

The files' owners are shifted as a rootless engine shifts them: the image's uid N is the host's `base + N`, so that
the episode, uid 0 in a user namespace that maps 0 to `base`, is the image's root, owns what the image's root owns,
and owns nothing of the host's.

    found = archive(engine, "openenv-gym/image:3f2a...", cache)   # its id; its files archived once (at import)
    exported = unpack(cache, found, base, count)                   # Exported(rootfs, config), unpacked once
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import os
import shlex
import shutil
import subprocess
import tarfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from openenv_gym.errors import OpenEnvGymError
from openenv_gym.sandbox.engines import Engine

IDS = 65536  # the image's uids and gids that are shifted (and mapped inside); others are the last of them
EXPORT_TIMEOUT = 1800.0
NOT_SHOWN = ("dev", "proc", "sys", "tmp")  # made by the sandbox itself, whatever the image holds there
# (the checks are ours, _shifted's: Python's own filters, where it has them, would refuse an image's absolute links)
TRUSTED = {"filter": "fully_trusted"} if hasattr(tarfile, "fully_trusted_filter") else {}


class ImageUnavailableError(OpenEnvGymError):
    """An image could not be found or exported: what the engine said, and what to do."""


@dataclass(frozen=True)
class ImageConfig:
    """What an image's config says a container of it starts with (Docker's and Podman's `image inspect` .Config)."""

    env: dict[str, str] = field(default_factory=dict)
    workdir: str = ""
    user: str = ""
    entrypoint: tuple[str, ...] = ()
    command: tuple[str, ...] = ()  # CMD: what a container runs (after the ENTRYPOINT) when it is given nothing
    healthcheck: dict[str, Any] | None = None  # task.toml's shape: {command, interval_sec, ...}

    @classmethod
    def read(cls, config: dict[str, Any]) -> ImageConfig:
        env = dict(entry.split("=", 1) for entry in config.get("Env") or () if "=" in entry)
        check = config.get("Healthcheck") or {}
        test = check.get("Test") or []
        healthcheck = None
        if test and test[0] in ("CMD", "CMD-SHELL"):
            seconds = {name: check[key] / 1e9 for name, key in (("interval_sec", "Interval"), (
                "timeout_sec", "Timeout"), ("start_period_sec", "StartPeriod"), ("start_interval_sec",
                                                                                    "StartInterval")) if check.get(key)}
            command = test[1] if test[0] == "CMD-SHELL" else shlex.join(test[1:])
            healthcheck = {"command": command, "interval_sec": 30.0, "timeout_sec": 30.0, "start_period_sec": 0.0,
                           "start_interval_sec": 5.0, "retries": check.get("Retries") or 3, **seconds}
        return cls(env=env, workdir=config.get("WorkingDir") or "", user=config.get("User") or "",
                   entrypoint=tuple(config.get("Entrypoint") or ()), command=tuple(config.get("Cmd") or ()),
                   healthcheck=healthcheck)


def mapped(ident: int, count: int) -> int:
    """An image's uid or gid as a sandbox over it has it, where `count` ids are mapped: itself, or past them the
    last of them (so are its files' owners, and its processes)."""
    return min(ident, count - 1)


@dataclass(frozen=True)
class Exported:
    rootfs: Path
    config: ImageConfig
    count: int = IDS  # its ids mapped (unpack's `count`)

    def uid_of(self, user: str) -> tuple[int, int]:
        """(uid, gid) inside of a USER value ("app", "1000", "app:staff", "1000:1000"), looked up in the image's
        /etc/passwd and /etc/group as a container's runtime looks them up; ImageUnavailableError naming what is not
        there."""
        name, _, group = user.partition(":")
        uid = gid = int(name) if name.isdigit() else 0
        if name and not name.isdigit():
            uid, gid = map(int, self._entry("passwd", name)[2:4])
        if group:
            gid = int(group) if group.isdigit() else int(self._entry("group", group)[2])
        return mapped(uid, self.count), mapped(gid, self.count)

    def home_of(self, user: str) -> str:
        """The HOME a container's runtime gives `user`: its /etc/passwd entry's, else "/"."""
        name = user.partition(":")[0]
        with contextlib.suppress(ImageUnavailableError, IndexError):
            if name.isdigit():  # (a uid the image may not name)
                return next((fields[5] for fields in _table(self.rootfs, "passwd") if fields[2] == name), "/")
            return self._entry("passwd", name)[5]
        return "/"

    def _entry(self, table: str, name: str) -> list[str]:
        found = next((fields for fields in _table(self.rootfs, table) if fields[0] == name), None)
        if found is None or not all(part.isdigit() for part in found[2:4 if table == "passwd" else 3]):
            raise ImageUnavailableError(f"the image has no {'user' if table == 'passwd' else 'group'} {name!r} "
                                        f"in its /etc/{table}")
        return found


@functools.cache  # (an image's files never change: every command of every episode looks its user up)
def _table(rootfs: Path, name: str) -> list[list[str]]:
    """The entries of the image's /etc/`name` (passwd, group), each split at its colons."""
    with contextlib.suppress(OSError):
        return [line.split(":") for line in (rootfs / "etc" / name).read_text(errors="replace").splitlines()
                if line.count(":") >= 2]
    return []


def image_id(engine: Engine, image: str) -> str | None:
    """The id of `image` in the engine's local store, or None where it has not that image."""
    done = subprocess.run([engine.name, "image", "inspect", "--format", "{{.Id}}", image], capture_output=True,
                          text=True)
    return done.stdout.strip().removeprefix("sha256:") if done.returncode == 0 and done.stdout.strip() else None


def config_of(engine: Engine, image: str) -> dict[str, Any]:
    """The config of `image` as the engine gives it (Env, WorkingDir, User, Entrypoint, Healthcheck, ...)."""
    done = subprocess.run([engine.name, "image", "inspect", "--format", "{{json .Config}}", image],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise ImageUnavailableError(f"{engine.name} cannot inspect {image}: {done.stderr.strip()}")
    return json.loads(done.stdout) or {}


def archive(engine: Engine, image: str, cache: Path) -> str:
    """The id of `image`, its files exported from the engine into an archive in `cache` once (by whichever process
    comes first; the others wait for it), with its config beside: what sandboxes over it are unpacked from, with no
    engine needed then (a server of an ordinary user's, in a user namespace of its own, cannot drive one)."""
    found = image_id(engine, image)
    if found is None:
        raise ImageUnavailableError(f"{engine.name} has no image {image}: build it, or load it "
                                    f"({engine.name} load -i IMAGE.tar)")
    tar, config = _archived(cache, found)
    with _locked(cache, tar.name):
        if not config.is_file():
            _archive(engine, image, tar, config)
    return found


def unpack(cache: Path, found: str, base: int, count: int) -> Exported:
    """The image of id `found` (archived before) unpacked in `cache` once, its owners shifted to `base` and up
    (`count` ids: the others are the last of them)."""
    tar, config = _archived(cache, found)
    if not config.is_file():
        raise ImageUnavailableError(f"the files of image {found[:12]} were never exported here ({tar} is "
                                    "missing): import the environment again")
    folder = cache / "rootfs" / f"{found[:24]}-{base}"
    with _locked(cache, folder.name):
        if not (folder / "rootfs").is_dir():
            staging = folder.with_name(f".{folder.name}.{uuid.uuid4().hex[:8]}")
            try:
                with tarfile.open(tar) as opened:
                    opened.extractall(staging / "rootfs", _shifted(opened, staging / "rootfs", base, count),
                                      numeric_owner=True, **TRUSTED)
                os.chown(staging / "rootfs", base, base)
                staging.rename(folder)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
    return Exported(folder / "rootfs", ImageConfig.read(json.loads(config.read_text())), count)


def remove_export(cache: Path, found: str) -> None:
    """An image's exported files (its archive and config) removed: an import that exported them failed."""
    for path in _archived(cache, found):
        path.unlink(missing_ok=True)


def _archived(cache: Path, found: str) -> tuple[Path, Path]:
    return cache / "archives" / f"{found[:24]}.tar", cache / "archives" / f"{found[:24]}.json"


@contextlib.contextmanager
def _locked(cache: Path, name: str) -> Iterator[None]:
    (cache / "locks").mkdir(parents=True, exist_ok=True)
    with open(cache / "locks" / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _archive(engine: Engine, image: str, tar: Path, config: Path) -> None:
    container = f"openenv-gym-export-{uuid.uuid4().hex[:12]}"
    partial = tar.with_suffix(".partial")
    tar.parent.mkdir(parents=True, exist_ok=True)
    try:
        settings = config_of(engine, image)
        subprocess.run([engine.name, "create", "--name", container, image, "true"], capture_output=True, check=True)
        with open(partial, "wb") as written:
            done = subprocess.run([engine.name, "export", container], stdout=written, stderr=subprocess.PIPE,
                                  timeout=EXPORT_TIMEOUT)
        if done.returncode != 0:
            raise ImageUnavailableError(f"{engine.name} export of {image} failed: "
                                        f"{done.stderr.decode(errors='replace').strip()}")
        partial.rename(tar)
        config.write_text(json.dumps(settings))
    except subprocess.CalledProcessError as exc:
        raise ImageUnavailableError(f"{engine.name} could not export {image}: "
                                    f"{(exc.stderr or b'').decode(errors='replace').strip()}") from None
    finally:
        subprocess.run([engine.name, "rm", "-f", container], capture_output=True)
        partial.unlink(missing_ok=True)


def _shifted(archive: tarfile.TarFile, folder: Path, base: int, count: int) -> Iterator[tarfile.TarInfo]:
    """The archive's members as they are, but none whose path leads out of `folder` (through `..`, or through a
    link extracted before it), their owners shifted to `base` and up, devices left out (the sandbox has its own
    /dev). Modes stay whole (/tmp's sticky bit, setuid bits, which the sandbox's mounts disarm)."""
    root = os.path.realpath(folder)
    for member in archive:
        if member.isdev():
            continue
        name = member.name.lstrip("/")
        if os.path.commonpath([os.path.realpath(os.path.join(root, name)), root]) != root:
            raise ImageUnavailableError(f"the image's archive has {member.name!r}, which leads out of its root")
        member.name = name
        member.uid, member.gid = base + mapped(member.uid, count), base + mapped(member.gid, count)
        member.uname = member.gname = ""
        yield member


def mount_point(rootfs: Path, inside: str, is_folder: bool) -> bool:
    """Make the folders (and the file, if not `is_folder`) of path `inside` in the image's root, for a host path to
    be shown there (the server's Python, say). Made only through real folders of the image's: False (nothing made)
    where a part of the way is a link or a file, which could lead out of the root."""
    parts = PurePosixPath(inside).parts[1:]
    here = rootfs
    for index, part in enumerate(parts):
        here = here / part
        last = index == len(parts) - 1
        if here.is_symlink():
            return False
        if not here.exists():
            if last and not is_folder:
                here.touch()
            else:
                here.mkdir()
        elif not here.is_dir() and not (last and not is_folder):
            return False
    return True


def top_folders(rootfs: Path) -> list[str]:
    """The image's top-level folders that a sandbox shows (and each episode writes in an overlay of its own)."""
    return sorted(f"/{entry.name}" for entry in os.scandir(rootfs)
                  if entry.is_dir(follow_symlinks=False) and entry.name not in NOT_SHOWN)
