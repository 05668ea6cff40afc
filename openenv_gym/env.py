"""RemoteEnv: a Gymnasium env over one session of an openenv_gym server.

    env = gym.make("openenv/guess")                                  # starts a local server
    env = gym.make("openenv/guess", base_url="ws://127.0.0.1:8000")  # uses a running one

Observations are text; the environment's structured data is in `info`. Actions are text or tool
calls `{"name": ..., "arguments": {...}}`; an invalid action gives an error observation, not an
exception. All I/O goes through the async client.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from openenv_gym.client.connection import DEFAULT_REQUEST_TIMEOUT, Session, StepTuple
from openenv_gym.client.ors_http import OrsHttpClient
from openenv_gym.client.sync import current_runner
from openenv_gym.embedded import check_env_args, local_server_url
from openenv_gym.environment import invalid_action
from openenv_gym.errors import InvalidActionError
from openenv_gym.protocol import Action
from openenv_gym.spaces import spaces_for

SEED_BOUND = 2**31


class RemoteEnv(gym.Env[str, Action]):
    metadata = {"render_modes": ["ansi"], "render_fps": 1}

    def __init__(self, env: str | None = None, base_url: str | None = None, *, token: str | None = None,
                 options: dict[str, Any] | None = None, render_mode: str | None = None,
                 request_timeout: float | None = DEFAULT_REQUEST_TIMEOUT, protocol: str = "openenv",
                 env_args: dict[str, Any] | None = None) -> None:
        """
        env: the environment name (for the embedded default; set by registration). With protocol="ors",
            the environment's name on the ORS server.
        base_url: a running server, ws://host:port; None starts a local server for `env`.
            With protocol="ors", an ORS HTTP server, http://host:port.
        token: bearer token of the server (default $OPENENV_GYM_TOKEN).
        options: reset options used by every reset (those passed to reset() take precedence).
        protocol: "openenv" (this project's servers) or "ors" (an ORS HTTP+SSE server; gym id openenv/ors).
        env_args: verifiers environments: arguments of load_environment() (over the manifest's). The local
            server is built with them; a running server must have been started with them.
        """
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode {render_mode!r} is not supported; use 'ansi' or None")
        self.render_mode = render_mode
        self.default_options = dict(options or {})
        self._token = token
        self._runner = current_runner()
        self._last_obs = ""
        self._backend: OrsHttpClient | None = None
        if protocol == "ors":
            if base_url is None or env is None:
                raise ValueError('gym.make("openenv/ors") needs base_url="http://host:port" and env="<env name>"')
            self.base_url = base_url
            self._backend = self._runner.run(OrsHttpClient(base_url, env, timeout=request_timeout).open())
            self.description = self._backend.description
            self.observation_space, self.action_space = spaces_for(self.description)
            self._session = self._backend.session()
            return
        if protocol != "openenv":
            raise ValueError(f"protocol must be 'openenv' or 'ors', got {protocol!r}")
        if base_url is None:
            if env is None:
                raise ValueError("RemoteEnv needs env= (to start a local server) or base_url= (to use one)")
            base_url = local_server_url(env, env_args=env_args)
        self.base_url = base_url
        connection = self._runner.connection(base_url, token, request_timeout)
        self.description: dict[str, Any] = self._runner.run(connection.info())["env"]
        check_env_args(self.description, env_args, base_url)
        self.observation_space, self.action_space = spaces_for(self.description)
        self._session = Session(connection)

    def _ensure_connection(self) -> None:
        if self._backend is None and self._session.connection.closed:  # the server went away and came back: reconnect
            conn = self._session.connection
            self._session = Session(self._runner.connection(conn.url, self._token, conn.request_timeout))

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict]:
        super().reset(seed=seed)
        server_seed = seed if seed is not None else int(self.np_random.integers(SEED_BOUND))
        self._ensure_connection()
        obs, info = self._runner.run(self._session.reset(server_seed, self.default_options | (options or {})))
        self._last_obs = obs
        return obs, info

    def step(self, action: Action) -> StepTuple:
        try:
            obs, reward, terminated, truncated, info = self._runner.run(self._session.step(action))
        except InvalidActionError as exc:  # the action could not even be read: answer like the env would
            result = invalid_action(exc.message)
            obs, reward, terminated, truncated, info = result.obs, result.reward, False, False, result.info
        self._last_obs = obs
        return obs, reward, terminated, truncated, info

    def render(self) -> str | None:
        return self._last_obs if self.render_mode == "ansi" else None

    def close(self) -> None:
        """End the session on the server. Safe to call more than once."""
        if self._session.id is not None:
            self._runner.run(self._session.close())
        if self._backend is not None:
            backend, self._backend = self._backend, None
            self._runner.run(backend.close())
        super().close()
