"""Turn a manifest into an environment factory: one adapter per manifest kind.

A factory is what the server needs: `factory()` makes one `Environment` per session and
`factory.describe()` tells clients about it. An `Environment` subclass is its own factory.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from openenv_gym.adapters.ors import load_ors_environment
from openenv_gym.adapters.python import load_python_environment
from openenv_gym.adapters.verifiers import load_verifiers_environment
from openenv_gym.environment import Environment
from openenv_gym.manifest import Manifest, ManifestError


class EnvironmentFactory(Protocol):
    def __call__(self) -> Environment: ...

    def describe(self) -> dict[str, Any]: ...


Loader = Callable[[Manifest, dict[str, Any]], EnvironmentFactory]


def _without_env_args(load: Callable[[Manifest], Any]) -> Loader:
    def loader(manifest: Manifest, env_args: dict[str, Any]) -> EnvironmentFactory:
        if env_args:
            raise ManifestError(f"{manifest.name} is a {manifest.kind} environment, which takes no env_args "
                                "(only verifiers environments are built with arguments)")
        return load(manifest)
    return loader


_LOADERS: dict[str, Loader] = {
    "python": _without_env_args(load_python_environment),
    "ors": _without_env_args(load_ors_environment),
    "verifiers": load_verifiers_environment,
}


def load_factory(manifest: Manifest, env_args: dict[str, Any] | None = None) -> EnvironmentFactory:
    """The factory of a manifest; env_args (verifiers only) override the manifest's own."""
    loader = _LOADERS.get(manifest.kind)
    if loader is None:
        raise ManifestError(
            f"{manifest.folder}: unknown kind {manifest.kind!r}; known kinds: {', '.join(_LOADERS)}"
        )
    return loader(manifest, env_args or {})
