"""Prime Intellect Verifiers environments (manifest kind "verifiers"): the classic API (verifiers < 0.4,
`load_environment()`: classic.py, classic_rollout.py) and v1 (verifiers 0.4: a Taskset package, its harness
programs calling the model endpoint, each runtime a sandbox: v1.py, runtime.py, warm_programs.py), and a v1 env
server someone runs (its own protocol, verifiers 0.4's serve: remote.py). The manifest's `api` says which.
"""

from __future__ import annotations

from typing import Any

from openenv_gym.adapters.endpoint import ModelEndpoint
from openenv_gym.adapters.environment import EnvironmentFactory
from openenv_gym.manifests.schema import VerifiersManifest


def load_verifiers_environment(manifest: VerifiersManifest, env_args: dict[str, Any], endpoint: ModelEndpoint | None,
                               sandboxed: bool) -> EnvironmentFactory:
    if manifest.api == "remote":
        from openenv_gym.adapters.verifiers.remote import load_remote_environment

        return load_remote_environment(manifest, env_args, endpoint)
    if manifest.api == "v1":
        from openenv_gym.adapters.verifiers.v1 import load_v1_environment

        return load_v1_environment(manifest, env_args, endpoint, sandboxed)
    from openenv_gym.adapters.verifiers.classic import load_classic_environment

    return load_classic_environment(manifest, env_args)
