"""Where a Harbor trial runs: the sandbox of each of a task's containers (its policy, over its image's files, unpacked
once per machine), or, where this machine cannot make sandboxes, a container of the engine's (its bounds). Both
hold the server's limits, and task.toml's within them, as Harbor's do."""

from __future__ import annotations

from typing import Any

from openenv_gym.errors import SandboxUnavailableError
from openenv_gym.manifests.harbor import sides
from openenv_gym.manifests.images import unpacked
from openenv_gym.manifests.schema import HarborManifest
from openenv_gym.sandbox import SandboxPolicy, unavailable
from openenv_gym.sandbox.containers import Bounds
from openenv_gym.sandbox.engines import Engine, EngineUnavailableError, choose
from openenv_gym.sandbox.rootfs import Exported, ImageUnavailableError


def exported_images(manifest: HarborManifest, index: list[dict[str, Any]]) -> dict[str, Exported]:
    """The image of each of the tasks' containers, its files unpacked for sandboxes over them (once, shared by every
    worker: rootfs.py) from what the import exported, by the tag it was built with."""
    if manifest.engine is None:
        return {}
    found = {side["tag"]: side["image_id"] for task in index for side in sides(task) if "tag" in side}
    try:
        return {tag: unpacked(manifest.engine, tag, image_id) for tag, image_id in found.items()}
    except (EngineUnavailableError, ImageUnavailableError) as exc:
        raise SandboxUnavailableError(f"{manifest.name}: its tasks play in images of {manifest.engine}'s: {exc}") \
            from None


def sandbox_policy(manifest: HarborManifest, side: dict[str, Any], program: bool, images: dict[str, Exported]) \
        -> SandboxPolicy:
    """The sandbox of a task's container (its own, or a separate verifier's), over its image's files where it has
    one; with an agent `program` inside, it reaches its model endpoint too (where the task has no network, or an
    allowlist: its session's endpoint is the one more address)."""
    limits = manifest.limits
    resources = side.get("resources") or {}
    memory_mb, disk_mb = _bounded(resources, "memory_mb", limits.memory_mb), _bounded(resources, "storage_mb",
                                                                                     limits.disk_mb)
    network = side["environment"]["network"]
    mode = {"public": "public", "no-network": "model" if program else "none",
            "allowlist": "model" if program else "none"}[network["mode"]]
    return SandboxPolicy(network=mode, allow=tuple(network["allow"]), processes=limits.processes,
                         memory_bytes=memory_mb << 20,
                         cpus=resources.get("cpus"), cpu_seconds=limits.cpu_seconds,
                         open_files=limits.open_files, file_bytes=limits.output_mb << 20,
                         disk_bytes=disk_mb << 20, readable=(str(manifest.folder),),
                         writable=tuple(side["writable"]), owned=tuple(side.get("owned", ())),
                         shown=tuple((str(manifest.vendored / source), inside)
                                     for source, inside in side.get("show", [])),
                         image=str(images[side["tag"]].rootfs) if side.get("tag") in images else None)


def container_bounds(manifest: HarborManifest, side: dict[str, Any]) -> Bounds:
    """What the engine bounds a trial's container by: the server's limits, and task.toml's within them."""
    limits, resources = manifest.limits, side.get("resources") or {}
    return Bounds(memory_bytes=_bounded(resources, "memory_mb", limits.memory_mb) << 20, processes=limits.processes,
                  open_files=limits.open_files, cpus=resources.get("cpus"))


def _bounded(resources: dict[str, Any], key: str, bound: int) -> int:
    """task.toml's bound (memory_mb, storage_mb), where it gives one, within the server's: as Harbor's hold."""
    return min(resources.get(key) or bound, bound)


def containers_instead(manifest: HarborManifest) -> Engine | None:
    """The engine whose containers the trials run in where no sandbox can be made (None: sandboxes can be);
    SandboxUnavailableError where neither can be, saying why and what to do."""
    reason = unavailable()
    if reason is None:
        return None
    if manifest.engine is None:
        raise SandboxUnavailableError(f"{manifest.name}: Harbor tasks run in a sandbox each, which this machine "
                                      f"cannot make: {reason}. Tasks imported into their images (import --engine "
                                      "docker or podman) run in containers instead")
    try:
        return choose(manifest.engine)
    except EngineUnavailableError as exc:
        raise SandboxUnavailableError(f"{manifest.name}: its trials run in a sandbox each, which this machine cannot "
                                      f"make ({reason}), or in containers of {manifest.engine}'s: {exc}") from None
