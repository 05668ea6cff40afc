"""Where an environment is served: a gym id, or gym.make's arguments, as the servers to drive and how to reach
them. The one place a `base_url` becomes servers (or, without one, the embedded default's local server is started)
and a server is checked to serve the environment named; RemoteEnv, RemoteVectorEnv, the rollout stream and the
trainer integrations all go through it.

    target = resolve("openenv/guess")                          # starts the local server, as gym.make_vec would
    target = resolve("openenv/ors", base_url="http://127.0.0.1:8080", env="counter")
    async with target.vector_client(num_envs=64) as client: ...
    env = RemoteEnv(target=target)
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from openenv_gym.client.retries import DEFAULT_RESET_RETRY_WINDOW
from openenv_gym.client.servers import FixedServers, Servers, ServerSource, server_source
from openenv_gym.client.transport import DEFAULT_REQUEST_TIMEOUT
from openenv_gym.client.transports import transport_class
from openenv_gym.client.vector import AsyncVectorClient
from openenv_gym.errors import EnvNotFoundError
from openenv_gym.registry import check_served

# The keyword arguments of gym.make / gym.make_vec for openenv ids that a Target keeps.
TARGET_KWARGS = ("env", "base_url", "token", "options", "transport", "env_args", "request_timeout",
                 "reset_retry_window", "sandbox")


@dataclass(frozen=True)
class LocalServers(FixedServers):
    """The local server gym.make's embedded default started (with its flags, sandbox=False's --no-sandbox among
    them): a Target rebuilt from settings() in another process reaches it again, keeping `sandbox`."""


@dataclass(frozen=True)
class Target:
    """One environment on one or more servers, and how to reach them."""

    env_id: str | None
    source: ServerSource  # where the servers are (client/servers.py)
    transport: str = "native"
    env: str | None = None  # the environment's name or folder (a name on the server, for ORS)
    token: str | None = None
    options: dict[str, Any] = field(default_factory=dict)  # reset options of every episode
    env_args: dict[str, Any] | None = None
    request_timeout: float | None = DEFAULT_REQUEST_TIMEOUT
    reset_retry_window: float = DEFAULT_RESET_RETRY_WINDOW
    sandbox: bool = True  # False: the local server was started --no-sandbox

    @classmethod
    def of(cls, env: str | None = None, base_url: Servers | None = None, *, workers: int = 1,
           env_id: str | None = None, transport: str = "native", token: str | None = None,
           options: dict[str, Any] | None = None, env_args: dict[str, Any] | None = None,
           request_timeout: float | None = DEFAULT_REQUEST_TIMEOUT,
           reset_retry_window: float = DEFAULT_RESET_RETRY_WINDOW, sandbox: bool = True) -> Target:
        """The target of gym.make's arguments. Without base_url, the local server of `env` is started (or the one
        this process started is reused) with `workers` processes; sandbox=False starts it with --no-sandbox."""
        if base_url is None:
            if env is None:
                raise ValueError(f"{env_id or 'this environment'} needs env= (to start a local server) or base_url= "
                                 "(to use a running one)")
            base_url = LocalServers((transport_class(transport).local_url(env, workers=workers, env_args=env_args,
                                                                          sandbox=sandbox),))
        elif not sandbox and not isinstance(base_url, LocalServers):
            raise ValueError("sandbox=False is for gym.make's local server (without base_url): a running server "
                             "sandboxes episodes or not as it was started (openenv-gym serve ... --no-sandbox)")
        return cls(env_id, server_source(base_url), transport, env, token, dict(options or {}), env_args,
                   request_timeout, reset_retry_window, sandbox)

    def settings(self) -> dict[str, Any]:
        """What gym.make takes to resolve this target again (in another process: a pickled recipe)."""
        return {"base_url": self.source, "transport": self.transport, "env": self.env, "token": self.token,
                "options": self.options, "env_args": self.env_args, "request_timeout": self.request_timeout,
                "reset_retry_window": self.reset_retry_window, "sandbox": self.sandbox}

    @property
    def urls(self) -> tuple[str, ...]:
        """The servers' URLs now."""
        return tuple(self.source.urls())

    @property
    def transport_options(self) -> dict[str, Any]:
        """What a transport of this target is made with (besides its URL)."""
        return {"env": self.env, "token": self.token, "request_timeout": self.request_timeout,
                "env_args": self.env_args}

    def check(self, description: dict[str, Any], where: str) -> None:
        """Refuse a server that serves another environment than the one named (EnvNotFoundError)."""
        check_served(self.env, description, where)

    def vector_client(self, num_envs: int, connections_per_worker: int = 2, align: int = 1) -> AsyncVectorClient:
        """An AsyncVectorClient of `num_envs` sessions over the target's servers (not yet open)."""
        return AsyncVectorClient(self.source, num_envs, transport=self.transport,
                                 connections_per_worker=connections_per_worker, align=align,
                                 reset_retry_window=self.reset_retry_window, **self.transport_options)

    async def open_vector_client(self, num_envs: int, connections_per_worker: int = 2,
                                 align: int = 1) -> AsyncVectorClient:
        """vector_client(num_envs), opened, and checked to reach the env the id names (closed if not)."""
        client = self.vector_client(num_envs, connections_per_worker, align)
        await client.open()
        try:
            self.check(client.description, ", ".join(client.urls))
        except EnvNotFoundError:
            await client.close()
            raise
        return client


def with_make_args(env_args: dict[str, Any] | None, make_args: Sequence[str],
                   given: dict[str, Any]) -> dict[str, Any] | None:
    """env_args with gym.make's keyword arguments that the environment takes as env_args (its manifest's
    `make_args`: openenv/verifiers-remote's address=, taskset=); TypeError for any other."""
    unknown = sorted(set(given) - set(make_args))
    if unknown:
        also = f"; it also takes {', '.join(make_args)} (its env_args)" if make_args else ""
        raise TypeError(f"unexpected arguments: {', '.join(unknown)}{also}")
    return {**(env_args or {}), **given} if given else env_args


def resolve(env_id: str, *, workers: int | None = None, **make_kwargs: Any) -> Target:
    """The Target of `gym.make(env_id, **make_kwargs)`. Without base_url, the local server of the env is started
    (with `workers` processes, default one per core), as gym.make_vec does."""
    spec = gym.spec(env_id)  # an unknown id fails here, with Gymnasium's suggestions
    kwargs = dict(spec.kwargs)
    make_args = kwargs.pop("make_args", ())
    given = {key: make_kwargs.pop(key) for key in list(make_kwargs) if key in make_args}
    unknown = sorted(set(make_kwargs) - set(TARGET_KWARGS))
    if unknown:
        raise TypeError(f"unexpected arguments for {env_id}: {', '.join(unknown)}; "
                        f"known: {', '.join((*TARGET_KWARGS, *make_args))}")
    kwargs |= {key: value for key, value in make_kwargs.items() if value is not None}
    kwargs["env_args"] = with_make_args(kwargs.get("env_args"), make_args, given)
    if kwargs.get("base_url") is None and kwargs.get("env") is None:
        raise ValueError(f"{env_id} drives a running server: pass base_url=")
    return Target.of(workers=workers or os.cpu_count() or 1, env_id=env_id, **kwargs)
