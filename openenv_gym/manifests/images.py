"""What imports built in the container engines (Harbor tasks' and OpenEnv projects' images,
openenv-gym/image:<digest of their build context>) and the files exported from them for sandboxes
($OPENENV_GYM_HOME/images/rootfs): listed with the environments that use them, and cleaned, as `openenv-gym venvs`
does for venvs.

    images = list_images(all_manifests())    # [{"engine", "tag", "id", "bytes", "envs", "exported"}]
    removed = clean_images(all_manifests())  # the unused ones, gone (everything=True: all of ours)
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from openenv_gym.manifests.harbor import sides
from openenv_gym.manifests.home import home
from openenv_gym.manifests.schema import BaseManifest, HarborManifest, OpenEnvManifest
from openenv_gym.sandbox import images
from openenv_gym.sandbox.engines import Engine, available, choose
from openenv_gym.sandbox.images import REPOSITORY
from openenv_gym.sandbox.rootfs import Exported, ImageUnavailableError, archive, unpack
from openenv_gym.sandbox.sandbox import image_uids


def images_cache() -> Path:
    """Where images' files are exported (archives/), unpacked for sandboxes (rootfs/), and their builds' logs."""
    return home() / "images"


def exported_dir() -> Path:
    return images_cache() / "rootfs"


HOME_LABEL = "openenv-gym.home"  # on the images an import builds: the home whose `images clean` may remove them


def images_used(manifests: Iterable[BaseManifest]) -> dict[tuple[str, str], list[str]]:
    """{(engine, tag): the environments whose tasks play in that image}."""
    used: dict[tuple[str, str], list[str]] = {}
    for manifest in manifests:
        if isinstance(manifest, OpenEnvManifest) and manifest.image is not None and manifest.engine is not None:
            used.setdefault((manifest.engine, manifest.image.tag), []).append(manifest.name)
        if not isinstance(manifest, HarborManifest) or manifest.engine is None:
            continue
        index = json.loads((manifest.vendored / "index.json").read_text())
        for tag in sorted({side["tag"] for task in index for side in sides(task) if "tag" in side}):
            used.setdefault((manifest.engine, tag), []).append(manifest.name)
    return used


def build_image(engine: Engine, context: Path, say: Callable[[str], None], dockerfile: str = "Dockerfile") -> str:
    """An import's image of `context` (images.build), its log in this home's, labelled as this home's: what `clean`
    may remove (another home's imports, a parallel import elsewhere, keep theirs)."""
    return images.build(engine, context, images_cache() / "logs", say, dockerfile, {HOME_LABEL: str(home())})


def list_images(manifests: Iterable[BaseManifest]) -> list[dict[str, Any]]:
    """Each image of ours (built by an import) and each image an environment names, in each engine that answers:
    its size, the environments that use it, the size of its exported files, and whether this home built it."""
    used = images_used(manifests)
    exported = [*sorted(exported_dir().glob("*-*")), *sorted((images_cache() / "archives").glob("*.*"))]
    found = []
    for engine in available():
        built_here = set(subprocess.run([engine.name, "images", "--no-trunc", "--filter",
                                         f"label={HOME_LABEL}={home()}", "--format", "{{.ID}}"],
                                        capture_output=True, text=True).stdout.split())
        listed = subprocess.run([engine.name, "images", "--no-trunc", "--format",
                                 "{{.Repository}}\t{{.Tag}}\t{{.ID}}\t{{.Size}}"], capture_output=True, text=True)
        for line in listed.stdout.splitlines():
            repository, label, image_id, size = line.split("\t")
            repository = repository.removeprefix("localhost/")  # (Podman's name for what was built here)
            tag = f"{repository}:{label}"
            if repository != REPOSITORY and (engine.name, tag) not in used:
                continue
            ours = repository == REPOSITORY and image_id in built_here
            image_id = image_id.removeprefix("sha256:")
            folders = [path for path in exported if _exported_id(path) and image_id.startswith(_exported_id(path))]
            found.append({"engine": engine.name, "tag": tag, "id": image_id[:12], "size": size,
                          "envs": used.get((engine.name, tag), []), "ours": ours,
                          "exported": folders})
    return found


def _exported_id(path: Path) -> str:
    """The image id (its first 24 digits) an exported file or folder is named by ("" for anything else: an unpack
    in progress, hidden until it is whole)."""
    found = path.name.split("-")[0].split(".")[0]
    return found if not path.name.startswith(".") and len(found) == 24 else ""


def clean_images(manifests: Iterable[BaseManifest], everything: bool = False) -> list[dict[str, Any]]:
    """Remove the images of ours no environment uses (with `everything`, all of ours) and their exported files."""
    removed = []
    for image in list_images(manifests):
        if not image["ours"] or (image["envs"] and not everything):
            continue
        subprocess.run([image["engine"], "rmi", image["tag"]], capture_output=True)
        for path in image["exported"]:
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
        removed.append(image)
    return removed


def unpacked(engine: str, tag: str, image_id: str) -> Exported:
    """An image's files unpacked for sandboxes over them (once per machine, shared by every worker: rootfs.py) from
    what the import exported; exported again by `engine` first where that export was removed."""
    base, count = image_uids()
    try:
        return unpack(images_cache(), image_id, base, count)
    except ImageUnavailableError:
        archive(choose(engine), tag, images_cache())  # type: ignore[arg-type]  (a name given: never None)
        return unpack(images_cache(), image_id, base, count)
