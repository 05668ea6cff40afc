"""`serve()`: env servers as Ray actors, each one `openenv-gym serve` process on its node's address.

Ray places the actors (each reserves `workers_per_server` CPUs; the placement spreads them over the nodes) and
restarts an actor that dies; a restarted actor starts a new server, on a new port. The handle, EnvServers, is
what `base_url` takes: the vector client asks it for the live URLs when it loses a server (and every 10 s), moves
the envs of a lost server to live ones at their next reset, and gives the restarted server its share again. The
handle pickles, so Ray tasks and actors of a sharded trainer can take it too.

With `verifiers=True` each server also speaks Verifiers' env server protocol (prime-rl's), on a free port of its
node: `verifiers_addresses()`.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from collections.abc import Sequence
from typing import Any

import ray
from ray.exceptions import GetTimeoutError, RayError

from openenv_gym.client.local import LocalServer
from openenv_gym.errors import ServerStartError
from openenv_gym.protocol.native import DEFAULT_MAX_SESSIONS

URLS_TIMEOUT = 10.0  # seconds urls() waits for actors that are (re)starting
STOP_TIMEOUT = 10.0  # seconds shutdown() gives the servers to stop before their actors are killed


class EnvServer:
    """The actor: one server on this node for as long as the actor lives. A server that dies takes the actor
    with it, so that Ray restarts both."""

    def __init__(self, env: str, workers: int, max_sessions: int, serve_args: Sequence[str]) -> None:
        self._stopping = False
        self.server = LocalServer(env, workers, max_sessions, *serve_args, host=ray.util.get_node_ip_address())
        threading.Thread(target=self._watch, name="server-watch", daemon=True).start()

    def _watch(self) -> None:
        self.server.process.wait()
        if not self._stopping:
            os._exit(1)  # Ray restarts the actor, and the actor a new server

    def url(self) -> str:
        return self.server.url

    def verifiers_address(self) -> str | None:
        """Where its Verifiers front end listens (None: it has none)."""
        return self.server.status.get("verifiers")

    def where(self) -> dict[str, Any]:
        """Where this server runs: its URL, its process, the actor's process and the Ray node."""
        return {"url": self.server.url, "server_pid": self.server.process.pid, "actor_pid": os.getpid(),
                "node_id": ray.get_runtime_context().get_node_id(), "verifiers": self.verifiers_address()}

    def stop(self) -> None:
        self._stopping = True
        self.server.stop()


class EnvServers:
    """The servers serve() started: `urls()` of the live ones, `shutdown()` to remove them all."""

    def __init__(self, env: str, actors: list[Any], workers_per_server: int) -> None:
        self.env = env
        self.actors = actors
        self.workers_per_server = workers_per_server

    def __repr__(self) -> str:
        return f"EnvServers({self.env!r}, {len(self.actors)} servers x {self.workers_per_server} workers)"

    def __len__(self) -> int:
        return len(self.actors)

    def urls(self, timeout: float = URLS_TIMEOUT) -> list[str]:
        """The URLs of the servers that serve, in actor order; waits up to `timeout` s for restarting ones."""
        return self._ask("url", timeout)

    def verifiers_addresses(self, timeout: float = URLS_TIMEOUT) -> list[str]:
        """The addresses of the live servers' Verifiers front ends (tcp://NODE:PORT: prime-rl's env servers), in
        actor order; none if they were started without."""
        return [address for address in self._ask("verifiers_address", timeout) if address is not None]

    def where(self, timeout: float = URLS_TIMEOUT) -> list[dict[str, Any]]:
        """For each serving server: url, server_pid, actor_pid and node_id."""
        return self._ask("where", timeout)

    def _ask(self, method: str, timeout: float) -> list[Any]:
        deadline = time.monotonic() + timeout
        answers: dict[int, Any] = {}
        while len(answers) < len(self.actors):
            asking = {getattr(actor, method).remote(): k for k, actor in enumerate(self.actors) if k not in answers}
            ready, _ = ray.wait(list(asking), num_returns=len(asking), timeout=max(0.0, deadline - time.monotonic()))
            for ref in ready:
                try:
                    answer = ray.get(ref)
                except RayError:  # died while asked: it is restarting
                    continue
                answers[asking[ref]] = answer
            if time.monotonic() >= deadline:
                break
            if len(answers) < len(self.actors):
                time.sleep(0.1)
        return [answers[k] for k in sorted(answers)]

    def shutdown(self) -> None:
        """Stop every server (clients see a clean close) and remove every actor. Idempotent."""
        actors, self.actors = self.actors, []
        if not actors:
            return
        ray.wait([actor.stop.remote() for actor in actors], num_returns=len(actors), timeout=STOP_TIMEOUT)
        for actor in actors:
            ray.kill(actor, no_restart=True)

    def __enter__(self) -> EnvServers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()


def serve(env: str, *, num_servers: int = 1, workers_per_server: int = 1, max_sessions: int = DEFAULT_MAX_SESSIONS,
          env_args: dict[str, Any] | None = None, token: str | None = None, serve_args: Sequence[str] = (),
          address: str | None = None, ready_timeout: float = 600.0, verifiers: bool = False,
          max_concurrent: int | None = None) -> EnvServers:
    """Start `num_servers` servers of `env` as Ray actors and return once each serves.

    env: a gym id (openenv/echo), an environment name, or a folder that every node can read.
    workers_per_server: each server's worker processes, and the CPUs its actor reserves from Ray.
    max_sessions: sessions each server holds at once.
    serve_args: more `openenv-gym serve` flags for every server, e.g. ["--step-timeout", "30"].
    address: the Ray cluster to join if Ray is not initialized yet (default: RAY_ADDRESS, a running local
        cluster, or a new one on this machine).
    ready_timeout: seconds to wait for every server (an env's venv is built once per node on first start).
    verifiers: each server serves Verifiers' env server protocol too (`serve --verifiers-port`), in as many
        processes as it has workers, each running `max_concurrent` runs at most (default: no bound).
    """
    if num_servers < 1 or workers_per_server < 1:
        raise ValueError(f"num_servers and workers_per_server must be at least 1, got {num_servers} and "
                         f"{workers_per_server}")
    if not ray.is_initialized():
        ray.init(address=address, logging_level="WARNING")
    front_end = ["--verifiers-port", "0", *(["--max-concurrent", str(max_concurrent)] if max_concurrent else [])]
    args = [*serve_args, *(["--env-args", json.dumps(env_args)] if env_args else []),
            *(["--token", token] if token else []), *(front_end if verifiers else [])]
    actor_class = ray.remote(EnvServer)
    tag = uuid.uuid4().hex[:8]
    actors = [actor_class.options(name=f"openenv-gym:{env}:{k}:{tag}", num_cpus=workers_per_server, max_restarts=-1,
                                  scheduling_strategy="SPREAD").remote(env, workers_per_server, max_sessions, args)
              for k in range(num_servers)]
    servers = EnvServers(env, actors, workers_per_server)
    try:
        ray.get([actor.url.remote() for actor in actors], timeout=ready_timeout)
    except GetTimeoutError as exc:
        servers.shutdown()
        cpus = ray.cluster_resources().get("CPU", 0)
        raise ServerStartError(
            f"the {num_servers} servers of {env!r} did not all start within {ready_timeout:g} s. They need "
            f"{num_servers * workers_per_server} CPUs ({num_servers} x {workers_per_server} workers) and the cluster "
            f"has {cpus:g}: add nodes, or use fewer or smaller servers") from exc
    except RayError as exc:
        servers.shutdown()
        raise ServerStartError(f"a server of {env!r} failed to start on Ray: {_own_words(exc)}") from exc
    return servers


def _own_words(exc: RayError) -> str:
    """The error an actor raised, without the Ray traceback around it."""
    text, marker = str(exc), f"{ServerStartError.__name__}: "
    return text[text.rindex(marker) + len(marker):].strip() if marker in text else text
