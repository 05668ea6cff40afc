"""Gymnasium ids for environments. Gymnasium 1.x has no plugin entry points: `import openenv_gym` registers."""

from __future__ import annotations

import gymnasium as gym

from openenv_gym.manifests import BaseManifest, all_manifests

ENTRY_POINT = "openenv_gym.env:RemoteEnv"
VECTOR_ENTRY_POINT = "openenv_gym.vector:RemoteVectorEnv"


def register_manifest(manifest: BaseManifest) -> None:
    if manifest.gym_id in gym.registry:
        return
    gym.register(
        manifest.gym_id,
        entry_point=ENTRY_POINT,
        vector_entry_point=VECTOR_ENTRY_POINT,
        nondeterministic=not manifest.deterministic,
        kwargs={"env": str(manifest.folder)},
    )


REMOTE_ORS_ID = "openenv/ors"  # gym.make(REMOTE_ORS_ID, base_url="http://host:port", env="name")


def register_all() -> list[str]:
    """Register every shipped and imported environment, and the remote-ORS id; return the ids."""
    manifests = all_manifests()
    for manifest in manifests:
        register_manifest(manifest)
    if REMOTE_ORS_ID not in gym.registry:
        gym.register(REMOTE_ORS_ID, entry_point=ENTRY_POINT, vector_entry_point=VECTOR_ENTRY_POINT,
                     nondeterministic=True, kwargs={"transport": "ors"})
    return [m.gym_id for m in manifests]
