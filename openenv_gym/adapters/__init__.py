"""One adapter per manifest kind, all behind the server-side Environment interface (environment.py).

`load_factory(manifest)` gives the server what it needs: `factory()` makes one Environment per session
and `factory.describe()` tells clients about it. Adapters know nothing of the wire; the server knows
nothing of ORS or Verifiers. A new kind is a module here and a line in _LOADERS.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from openenv_gym.adapters.agent.session import load_agent_environment
from openenv_gym.adapters.awm.session import load_awm_environment
from openenv_gym.adapters.endpoint import ModelEndpoint
from openenv_gym.adapters.environment import EnvironmentFactory
from openenv_gym.adapters.harbor import load_harbor_environment
from openenv_gym.adapters.nemo.session import load_nemo_environment
from openenv_gym.adapters.openenv import load_openenv_environment
from openenv_gym.adapters.ors import load_ors_environment
from openenv_gym.adapters.python import load_python_environment
from openenv_gym.adapters.verifiers import load_verifiers_environment
from openenv_gym.manifests.schema import BaseManifest, ManifestError

# (the manifest, its env_args, the worker's model endpoint, whether its programs run sandboxed) -> the factory
Loader = Callable[[Any, dict[str, Any], ModelEndpoint | None, bool], EnvironmentFactory]


def _without_env_args(load: Callable[..., EnvironmentFactory], programs: bool = False) -> Loader:
    """A loader of a kind built without arguments; with `programs` (its episodes run programs), it is given the
    model endpoint and whether to sandbox them."""
    def loader(manifest: BaseManifest, env_args: dict[str, Any], model_endpoint: ModelEndpoint | None,
               sandboxed: bool) -> EnvironmentFactory:
        if env_args:
            article = "an" if manifest.kind[0] in "aeiou" else "a"  # "an ors environment"
            raise ManifestError(f"{manifest.name} is {article} {manifest.kind} environment, which takes no env_args "
                                "(only verifiers environments are built with arguments)")
        return load(manifest, model_endpoint, sandboxed) if programs else load(manifest)
    return loader


_LOADERS: dict[str, Loader] = {
    "python": _without_env_args(load_python_environment, programs=True),
    "ors": _without_env_args(load_ors_environment),
    "verifiers": load_verifiers_environment,
    "openenv": _without_env_args(load_openenv_environment, programs=True),
    "awm": _without_env_args(load_awm_environment),
    "agent": _without_env_args(load_agent_environment, programs=True),
    "harbor": _without_env_args(load_harbor_environment, programs=True),
    "nemo": _without_env_args(load_nemo_environment),
}


def runs_programs(manifest: BaseManifest) -> bool:
    """Whether the episodes of this environment run programs (each in a sandbox of its own)."""
    return manifest.runs_programs


def load_factory(manifest: BaseManifest, env_args: dict[str, Any] | None = None,
                 endpoint: ModelEndpoint | None = None, sandboxed: bool = True) -> EnvironmentFactory:
    """The factory of a manifest; env_args (verifiers only) override the manifest's own; `endpoint` is the worker's
    model endpoint, for the kinds whose programs call a model; `sandboxed`: those programs run in a sandbox each
    (False only when the server was told --no-sandbox)."""
    return _LOADERS[manifest.kind](manifest, env_args or {}, endpoint, sandboxed)
