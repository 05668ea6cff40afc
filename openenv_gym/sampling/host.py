"""One sampler for every rollout worker: the sampler of `openenv-gym serve ENV --sampler NAME`, held by the process
that started the server, and asked by its worker processes (server/sampler_relay.py), which relay the calls that
reach them over HTTP (`POST /sampler`: sampling/shared.py is the client).

The host listens on a Unix socket of its own; each request is one JSON line, each answer one JSON line. The first
worker that starts gives the environment's splits (`init`), and the sampler is made then, over their tasks (of
`split` alone, if given) (restored from its state file where
one is saved). Its state is written to that file every few seconds while it changes, and when the host stops.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socketserver
import tempfile
import threading
from pathlib import Path
from typing import Any

import orjson

from openenv_gym.sampling.base import tasks_of
from openenv_gym.sampling.samplers import SAMPLERS

log = logging.getLogger(__name__)

SAVE_EVERY = 5.0  # seconds between writes of a changed state
MAX_SAMPLE = 100_000  # tasks one `sample` may ask for


class SamplerHost:
    def __init__(self, name: str, *, group_size: int, seed: int | None = None, state_file: str | None = None,
                 split: str | None = None, **sampler_options: Any) -> None:
        if name not in SAMPLERS:
            raise ValueError(f"no sampler {name!r}; choose one of {', '.join(SAMPLERS)}")
        self.name, self.group_size, self.seed, self.split, self.options = name, group_size, seed, split, sampler_options
        self.state_file = None if state_file is None else Path(state_file)
        self.sampler: Any = None
        self.lock = threading.Lock()
        self.changed = False
        self.folder = tempfile.mkdtemp(prefix="openenv-gym-sampler-")
        self.path = os.path.join(self.folder, "socket")
        host = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                for line in self.rfile:
                    self.wfile.write(orjson.dumps(host.answer(line)) + b"\n")

        self.server = socketserver.ThreadingUnixStreamServer(self.path, Handler)
        self.server.daemon_threads = True
        self.stopping = threading.Event()
        self.threads = [threading.Thread(target=self.server.serve_forever, name="openenv-sampler", daemon=True),
                        threading.Thread(target=self._save_while_serving, name="openenv-sampler-save", daemon=True)]
        for thread in self.threads:
            thread.start()

    def answer(self, line: bytes) -> dict[str, Any]:
        """One request's answer: {"result": ...} or {"error": {"code", "message"}}."""
        try:
            request = orjson.loads(line)
            with self.lock:
                return {"result": self._call(request.get("call"), request)}
        except (ValueError, TypeError, KeyError) as exc:  # (orjson's decode error is a ValueError)
            return {"error": {"code": "bad_request", "message": str(exc)}}

    def _call(self, call: Any, request: dict[str, Any]) -> Any:
        if call == "init":
            return self._init(tasks_of(request["splits"], self.split, request["env"]))
        if self.sampler is None:
            raise ValueError("the server's sampler has no catalog yet (its workers are starting): ask again")
        if call == "sample":
            n = request.get("n")
            if type(n) is not int or not 0 < n <= MAX_SAMPLE:
                raise ValueError(f"sample needs n, an integer from 1 to {MAX_SAMPLE}, got {n!r:.40}")
            return self.sampler.sample(n)
        if call == "update":
            self.sampler.update(request["task"], request["rewards"], request.get("costs"))
            self.changed = True
            return None
        if call == "note":  # a gate dropped a group, or a batch went out short (rollouts' counts)
            self.sampler.note(request.get("what"))
            self.changed = True
            return None
        if call == "describe":
            return {"sampler": self.name, "group_size": self.group_size, "tasks": self.sampler.tasks,
                    "costs_in": self.sampler.costs_in}
        if call == "metrics":
            return self.sampler.metrics()
        if call == "state":
            return self.sampler.state_dict()
        raise ValueError(f"no call {call!r:.40}; the sampler answers describe, sample, update, note, metrics, state")

    def _init(self, tasks: list[dict[str, Any]]) -> None:
        """The catalog, from a worker: the sampler is made (and restored) by the first; the others' must match."""
        if self.sampler is not None:
            if len(tasks) != len(self.sampler.tasks):
                raise ValueError(f"a worker's catalog has {len(tasks)} tasks, the sampler's {len(self.sampler.tasks)}")
            return
        sampler = SAMPLERS[self.name](tasks, group_size=self.group_size, seed=self.seed, **self.options)
        if self.state_file is not None and self.state_file.exists():
            sampler.load_state_dict(orjson.loads(self.state_file.read_bytes()))
            log.warning("sampler %s restored from %s (%d groups so far)", self.name, self.state_file, sampler.groups)
        self.sampler = sampler

    def save(self) -> None:
        """The sampler's state to its file, whole or not at all (written aside, then renamed over it)."""
        if self.state_file is None or self.sampler is None:
            return
        with self.lock:
            state, self.changed = orjson.dumps(self.sampler.state_dict()), False
        aside = self.state_file.with_name(self.state_file.name + ".tmp")
        aside.write_bytes(state)
        os.replace(aside, self.state_file)

    def _save_while_serving(self) -> None:
        while not self.stopping.wait(SAVE_EVERY):
            if self.changed:
                try:
                    self.save()
                except OSError as exc:
                    log.error("could not save the sampler's state to %s: %s", self.state_file, exc)

    def close(self) -> None:
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()
        self.save()
        with contextlib.suppress(OSError):
            os.unlink(self.path)
            os.rmdir(self.folder)
