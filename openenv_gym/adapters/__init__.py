"""Turn a manifest into an environment factory: one adapter per manifest kind.

A factory is what the server needs: `factory()` makes one `Environment` per session and
`factory.describe()` tells clients about it. An `Environment` subclass is its own factory.
"""

from __future__ import annotations

from typing import Any, Protocol

from openenv_gym.adapters.ors import load_ors_environment
from openenv_gym.adapters.python import load_python_environment
from openenv_gym.environment import Environment
from openenv_gym.manifest import Manifest, ManifestError


class EnvironmentFactory(Protocol):
    def __call__(self) -> Environment: ...

    def describe(self) -> dict[str, Any]: ...


_LOADERS = {"python": load_python_environment, "ors": load_ors_environment}


def load_factory(manifest: Manifest) -> EnvironmentFactory:
    loader = _LOADERS.get(manifest.kind)
    if loader is None:
        raise ManifestError(
            f"{manifest.folder}: unknown kind {manifest.kind!r}; known kinds: {', '.join(_LOADERS)}"
        )
    return loader(manifest)
