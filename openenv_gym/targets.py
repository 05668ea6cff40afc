"""A Gymnasium id (and the keyword arguments gym.make would take) as one server to drive, for code that drives
sessions itself rather than through gym.make: the rollout stream and the trainer integrations.

    target = resolve("openenv/guess")                          # starts the local server, as gym.make_vec would
    target = resolve("openenv/ors", base_url="http://127.0.0.1:8080", env="counter")
    async with target.vector_client(num_envs=64) as client: ...
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from openenv_gym.client.servers import ServerSource, server_source
from openenv_gym.client.transport import DEFAULT_REQUEST_TIMEOUT
from openenv_gym.client.transports import transport_class
from openenv_gym.client.vector import AsyncVectorClient
from openenv_gym.env import RemoteEnv
from openenv_gym.errors import EnvNotFoundError
from openenv_gym.registry import check_served

# The keyword arguments of gym.make / gym.make_vec for openenv ids that a Target keeps.
TARGET_KWARGS = ("env", "base_url", "token", "options", "transport", "env_args", "request_timeout")


@dataclass(frozen=True)
class Target:
    """One environment on one or more servers, and how to reach them."""

    env_id: str
    source: ServerSource  # where the servers are (client/servers.py)
    transport: str = "native"
    env: str | None = None
    token: str | None = None
    options: dict[str, Any] = field(default_factory=dict)  # reset options of every episode
    env_args: dict[str, Any] | None = None
    request_timeout: float | None = DEFAULT_REQUEST_TIMEOUT

    @property
    def urls(self) -> tuple[str, ...]:
        """The servers' URLs now."""
        return tuple(self.source.urls())

    def vector_client(self, num_envs: int) -> AsyncVectorClient:
        """An AsyncVectorClient of `num_envs` sessions over the target's servers (not yet open)."""
        return AsyncVectorClient(self.source, num_envs, transport=self.transport, env=self.env, token=self.token,
                                 request_timeout=self.request_timeout, env_args=self.env_args)

    async def open_vector_client(self, num_envs: int) -> AsyncVectorClient:
        """vector_client(num_envs), opened, and checked to reach the env the id names (closed if not)."""
        client = self.vector_client(num_envs)
        await client.open()
        try:
            check_served(self.env, client.description, ", ".join(client.urls))
        except EnvNotFoundError:
            await client.close()
            raise
        return client

    def remote_env(self) -> RemoteEnv:
        """A RemoteEnv on one of the servers (each in turn); envs of one thread share one connection per server."""
        return RemoteEnv(self.env, self.source, token=self.token, options=self.options,
                         transport=self.transport, request_timeout=self.request_timeout, env_args=self.env_args)


def resolve(env_id: str, *, workers: int | None = None, **make_kwargs: Any) -> Target:
    """The Target of `gym.make(env_id, **make_kwargs)`. Without base_url, the local server of the env is started
    (with `workers` processes, default one per core), as gym.make_vec does."""
    spec = gym.spec(env_id)  # an unknown id fails here, with Gymnasium's suggestions
    unknown = sorted(set(make_kwargs) - set(TARGET_KWARGS))
    if unknown:
        raise TypeError(f"unexpected arguments for {env_id}: {', '.join(unknown)}; "
                        f"known: {', '.join(TARGET_KWARGS)}")
    kwargs = dict(spec.kwargs) | {key: value for key, value in make_kwargs.items() if value is not None}
    transport = kwargs.get("transport", "native")
    base_url = kwargs.get("base_url")
    if base_url is None:
        if kwargs.get("env") is None:
            raise ValueError(f"{env_id} drives a running server: pass base_url=")
        base_url = transport_class(transport).local_url(kwargs["env"], workers=workers or os.cpu_count() or 1,
                                                        env_args=kwargs.get("env_args"))
    return Target(env_id, server_source(base_url), transport, kwargs.get("env"), kwargs.get("token"),
                  dict(kwargs.get("options") or {}),
                  kwargs.get("env_args"), kwargs.get("request_timeout", DEFAULT_REQUEST_TIMEOUT))
