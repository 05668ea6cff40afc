"""Gymnasium ids for environments. Gymnasium 1.x has no plugin entry points: `import openenv_gym` registers."""

from __future__ import annotations

import gymnasium as gym

from openenv_gym.errors import EnvNotFoundError, OpenEnvGymError
from openenv_gym.manifests import BaseManifest, all_manifests, find_manifest
from openenv_gym.manifests.discovery import REMOTE_IDS

ENTRY_POINT = "openenv_gym.env:RemoteEnv"
VECTOR_ENTRY_POINT = "openenv_gym.vector:RemoteVectorEnv"


def register_manifest(manifest: BaseManifest) -> None:
    if manifest.gym_id in gym.registry:
        return
    make_args = getattr(manifest, "make_args", ())  # (gym.make's keyword arguments that are its env_args)
    gym.register(
        manifest.gym_id,
        entry_point=ENTRY_POINT,
        vector_entry_point=VECTOR_ENTRY_POINT,
        nondeterministic=not manifest.deterministic,
        kwargs={"env": str(manifest.folder)} | ({"make_args": tuple(make_args)} if make_args else {}),
    )


def check_served(env: str | None, description: dict, url: str) -> None:
    """A running server must serve the environment a gym id names: a server of another one is refused, rather
    than played in its place. Servers of other formats (ORS) name no manifest and are checked by their transport."""
    served = description.get("manifest")
    if env is None or served is None:
        return
    try:
        expected = find_manifest(env).name
    except (OpenEnvGymError, ValueError):  # not an environment of this machine: nothing to compare with
        return
    if expected != served:
        raise EnvNotFoundError(f"the server at {url} serves {served!r}, not {expected!r}; point base_url at a "
                               f"server of {expected} (openenv-gym serve {expected}), or use the id of {served}")




def register_all() -> list[str]:
    """Register every shipped and imported environment, and the remote ids; return the ids."""
    manifests = all_manifests()
    for manifest in manifests:
        register_manifest(manifest)
    for gym_id, (transport, _) in REMOTE_IDS.items():
        if gym_id not in gym.registry:
            gym.register(gym_id, entry_point=ENTRY_POINT, vector_entry_point=VECTOR_ENTRY_POINT,
                         nondeterministic=True, kwargs={"transport": transport})
    return [m.gym_id for m in manifests]
