"""RemoteEnv: a Gymnasium env over one session of a server, through a transport.

    env = gym.make("openenv/guess")                                  # starts a local server
    env = gym.make("openenv/guess", base_url="ws://127.0.0.1:8000")  # uses a running one

Observations are text; the environment's structured data is in `info`. Actions are text or tool
calls `{"name": ..., "arguments": {...}}`; an invalid action gives an error observation, not an
exception. All I/O goes through the transport (client/transport.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import gymnasium as gym

from openenv_gym.client.retries import DEFAULT_RESET_RETRY_WINDOW, delay, given_up, retried
from openenv_gym.client.servers import Servers, one_of
from openenv_gym.client.sync import current_runner
from openenv_gym.client.transport import DEFAULT_REQUEST_TIMEOUT, StepTuple, Transport
from openenv_gym.client.transports import transport_class
from openenv_gym.episode.groups import GroupScore
from openenv_gym.episode.results import Action
from openenv_gym.episode.state import failure_outcome
from openenv_gym.errors import InvalidActionError
from openenv_gym.spaces import spaces_for
from openenv_gym.targets import Target, with_make_args

SEED_BOUND = 2**31


class RemoteEnv(gym.Env[str, Action]):
    metadata = {"render_modes": ["ansi"], "render_fps": 1}

    def __init__(self, env: str | None = None, base_url: Servers | None = None, *, token: str | None = None,
                 options: dict[str, Any] | None = None, render_mode: str | None = None,
                 request_timeout: float | None = DEFAULT_REQUEST_TIMEOUT, transport: str = "native",
                 env_args: dict[str, Any] | None = None, reset_retry_window: float = DEFAULT_RESET_RETRY_WINDOW,
                 sandbox: bool = True, target: Target | None = None, make_args: Sequence[str] = (),
                 **env_kwargs: Any) -> None:
        """
        env: the environment (name or folder) for the embedded default; set by registration. With
            transport="ors", the environment's name on the ORS server.
        base_url: a running server, ws://host:port (ORS: http://host:port); None starts a local server for `env`.
            Several servers (a list, a dns+ URL, an openenv_gym.ray handle): each new env takes the next one.
        token: bearer token of the server (default $OPENENV_GYM_TOKEN).
        options: reset options used by every reset (those passed to reset() take precedence).
        transport: "native" (openenv_gym servers) or "ors" (an ORS HTTP+SSE server; gym id openenv/ors).
        env_args: verifiers environments: arguments of load_environment() (over the manifest's). The local
            server is built with them; a running server must have been started with them.
        reset_retry_window: seconds a reset that failed for its server (lost, full) is tried again, on the next
            server when there are several (0: never).
        sandbox: False starts the local server with --no-sandbox: environments that run programs (agent,
            Verifiers v1) then run them unconfined (they see the server's files, network and processes), for
            machines that cannot make sandboxes (no bubblewrap, not root). Only without base_url (ValueError
            otherwise): a running server sandboxes or not as it was started.
        target: all of the above at once (targets.resolve's), instead of them.
        env_kwargs: what the environment takes as env_args, by name (openenv/verifiers-remote: address=, taskset=);
            `make_args`, set by registration, names them.
        """
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode {render_mode!r} is not supported; use 'ansi' or None")
        env_args = with_make_args(env_args, make_args, env_kwargs)
        self.target = target or Target.of(env, base_url, transport=transport, token=token, options=options,
                                          env_args=env_args, request_timeout=request_timeout,
                                          reset_retry_window=reset_retry_window, sandbox=sandbox)
        self.render_mode = render_mode
        self.default_options = self.target.options
        self._last_obs = ""
        self._runner = current_runner()
        self._transport_class = transport_class(self.target.transport)
        self.base_url = one_of(self.target.source)
        self._transport = self._shared_transport()
        self.description: dict[str, Any] = self._transport.description
        self.target.check(self.description, self.base_url)
        self.observation_space, self.action_space = spaces_for(self.description)
        self._session = self._transport.session()

    def _shared_transport(self) -> Transport:
        """This runner's transport to the server, shared with other envs; reopened if it was closed."""
        return self._runner.run(self._runner.open_transport(self._transport_class, self.base_url,
                                                            self.target.transport_options))

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict]:
        super().reset(seed=seed)
        server_seed = seed if seed is not None else int(self.np_random.integers(SEED_BOUND))
        obs, info = self._runner.run(self._reset(server_seed, self.default_options | (options or {})))
        self._last_obs = obs
        return obs, info

    async def _reset(self, seed: int, options: dict[str, Any]) -> tuple[str, dict]:
        """Reset; one that failed for its server (lost, full) is tried again, on the next server of the source
        when there are several, with backoff, for reset_retry_window seconds (client/retries.py)."""
        began = asyncio.get_running_loop().time()
        failed = 0
        while True:
            try:
                if failed or self._transport.closed:  # the server went away (and may be back), or was full
                    await self._reconnect()
                obs, info = await self._session.reset(seed, options)
            except Exception as exc:
                spent = asyncio.get_running_loop().time() - began
                if not retried(exc) or spent >= self.target.reset_retry_window:
                    raise (given_up(exc, failed + 1, spent, [self.base_url]) if failed else exc) from None
                failed += 1
                await asyncio.sleep(delay(failed))
                continue
            return obs, (info | {"retries": failed} if failed else info)

    async def _reconnect(self) -> None:
        """A new session on the next server of the source (the same one if it lists one), over this runner's
        transport to it."""
        self.base_url = await asyncio.to_thread(one_of, self.target.source)
        self._transport = await self._runner.open_transport(self._transport_class, self.base_url,
                                                            self.target.transport_options)
        self._session = self._transport.session()

    def step(self, action: Action) -> StepTuple:
        try:
            obs, reward, terminated, truncated, info = self._runner.run(self._session.step(action))
        except InvalidActionError as exc:  # the action could not even be read: answer like the env would
            obs, info, truncated, _ = failure_outcome(exc, stepped=True)
            reward, terminated = 0.0, False
        self._last_obs = obs
        return obs, reward, terminated, truncated, info

    def state(self) -> dict[str, Any]:
        """The session's state: "episode_id", "steps" so far, whether the episode is "running", its
        "max_steps", and "extras", what the environment tells of its own state (OpenEnv's State fields)."""
        return self._runner.run(self._session.state())

    def render(self) -> str | None:
        return self._last_obs if self.render_mode == "ansi" else None

    def splits(self) -> list[dict[str, Any]]:
        """The environment's task splits, each {"name", "type", "num_tasks"}; empty if it has no tasks."""
        return self._runner.run(self._transport.splits())

    def score_group(self, group: str, members: int) -> GroupScore:
        """The server's score of group `group` of this env's connection (reset option {"group": {"id": group,
        "member": m}}), once `members` of its episodes have ended (an env that scores groups: episode/groups.py)."""
        transport = self._transport
        return self._runner.run(transport.score_group(transport.place(self._session), group, members))

    def close(self) -> None:
        """End the session on the server. Safe to call more than once."""
        if self._session.id is not None:
            self._runner.run(self._session.close())
        super().close()
