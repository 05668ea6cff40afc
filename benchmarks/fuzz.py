"""Fuzz a real server over a real WebSocket with hypothesis: frames of every shape, from random bytes to
well-formed requests with hostile fields. Every frame must be answered with typed answers only; the server
must neither crash nor keep a session its client closed.

    python -m benchmarks.fuzz --frames 10000        # part of `make bench`; the tests run a few hundred

Each example sends one fuzzed frame, then an `info` request as a marker, and reads until the marker's
answer: what came before it are the fuzzed frame's answers, each checked to be a well-formed answer or an
error with a known code.
"""

from __future__ import annotations

import argparse
import string
import sys
import time
from dataclasses import dataclass, field

import httpx
import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from websockets.sync.client import ClientConnection
from websockets.sync.client import connect as ws_connect

from openenv_gym.errors import ErrorCode
from openenv_gym.protocol import native as p
from openenv_gym.protocol.answers import columns_of, unpacked

KNOWN_CODES = {code.value for code in ErrorCode}
MARKER_ID = "fuzz-marker"
ANSWER_TIMEOUT = 10.0  # seconds for the marker's answer: a server that hangs fails the run

json_scalars = st.none() | st.booleans() | st.integers(-2**63, 2**64 - 1) | st.floats(allow_nan=False) | st.text(
    max_size=40)
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=5) | st.dictionaries(
    st.text(max_size=10), inner, max_size=5), max_leaves=20)
ids = st.integers(-2**63, 2**63 - 1) | st.text(max_size=12) | json_values


@dataclass(frozen=True)
class SessionRef:
    """One of the sessions the fuzzer made, chosen when the frame is sent (strategies must not depend on
    what earlier examples did)."""

    index: int


def _requests() -> st.SearchStrategy:
    sessions = st.builds(SessionRef, st.integers(0, 7)) | st.text(max_size=30) | json_values
    action = st.text(max_size=300) | json_values | st.builds(
        lambda n: "[" * n + "]" * (n // 2), st.integers(0, 5000)) | st.builds(
        lambda name, args: {"name": name, "arguments": args}, st.text(max_size=10), json_values)
    options = st.dictionaries(st.sampled_from(["max_steps", "split", "index", "expose_task", "task_spec"]),
                              json_values, max_size=3) | json_values
    return st.fixed_dictionaries(
        {"op": st.sampled_from(p.OPS) | st.text(max_size=8) | json_values, "id": ids},
        optional={"session": sessions, "action": action, "seed": json_values, "options": options,
                  "sessions": st.lists(sessions, max_size=4), "actions": st.lists(action, max_size=4),
                  "token": json_values, "resent": st.booleans(), "split": json_values, "start": json_values,
                  "stop": json_values})


FRAMES = st.one_of(
    st.lists(_requests(), min_size=1, max_size=6), st.lists(_requests(), min_size=1, max_size=6),
    st.text(max_size=200), st.binary(max_size=200), json_values.map(lambda v: orjson.dumps(v).decode()),
    st.text(alphabet=string.printable, max_size=50).map(lambda t: '[{"op": "step", "id": 1' + t),
    st.integers(2**64, 2**200).map(lambda n: f'[{{"op": "reset", "id": {n}, "seed": {n}}}]'),  # past 64 bits
)


@dataclass
class Fuzzer:
    """A connection to the server under test, the sessions it made, and what it saw."""

    ws: ClientConnection
    sessions: list[str] = field(default_factory=list)
    frames: int = 0
    answers: int = 0
    packed: int = 0  # messages of columns among them
    errors: dict[str, int] = field(default_factory=dict)

    def _session(self, ref: object) -> str:
        if not isinstance(ref, SessionRef):
            raise TypeError(ref)
        return self.sessions[ref.index % len(self.sessions)] if self.sessions else "no-such-session"

    def send(self, frame: list | str | bytes) -> None:
        if isinstance(frame, list):
            frame = orjson.dumps(frame, default=self._session).decode()
        self.ws.send(frame)
        self.ws.send(orjson.dumps([p.info_request(MARKER_ID)]).decode())
        self.frames += 1
        deadline = time.monotonic() + ANSWER_TIMEOUT
        while True:
            for answer in orjson.loads(self.ws.recv(timeout=max(0.1, deadline - time.monotonic()))):
                if answer.get("id") == MARKER_ID and "env" in answer:
                    return
                for plain in self._unpacked(answer):
                    self.check(plain)

    def _unpacked(self, answer: object) -> list:
        """The plain answers a message stands for: itself, or each entry of a message of columns (a fuzzed frame
        may have asked for them with the `columns` op), checked to be a well-formed one first."""
        columns = columns_of(answer) if type(answer) is dict else None
        if columns is None:
            return [answer]
        assert isinstance(answer["ids"], list) and len(answer["ids"]) > 1, f"bad columns: {answer!r:.200}"
        self.packed += 1
        for column in columns:
            assert len(answer[column]) == len(answer["ids"]), f"ragged columns: {answer!r:.200}"
        return [unpacked(answer, columns, k) for k in range(len(answer["ids"]))]

    def check(self, answer: object) -> None:
        assert type(answer) is dict and "id" in answer, f"not an answer: {answer!r:.200}"
        self.answers += 1
        error = answer.get("error")
        if isinstance(error, dict):
            assert error.get("code") in KNOWN_CODES, f"untyped error: {error!r:.200}"
            assert isinstance(error.get("message"), str) and error["message"], f"an error says nothing: {error}"
            self.errors[error["code"]] = self.errors.get(error["code"], 0) + 1
        elif "session" in answer and "obs" in answer and answer["session"] not in self.sessions:
            self.sessions.append(answer["session"])  # a reset made one: later frames may name it


def fuzz(url: str, frames: int, seed: int | None = None) -> Fuzzer:
    """Send `frames` fuzzed frames (plus a reset or two so that real sessions get named) over one connection."""
    with ws_connect(url, max_size=None, compression=None, ping_interval=None) as ws:
        fuzzer = Fuzzer(ws)
        for k in range(2):
            fuzzer.send([p.reset_request(f"seed-{k}", options={"max_steps": 10**6})])

        @settings(max_examples=frames, deadline=None, database=None, derandomize=seed is not None,
                  suppress_health_check=list(HealthCheck), print_blob=True)
        @given(FRAMES)
        def one(frame: list | str | bytes) -> None:
            fuzzer.send(frame)

        one()
        return fuzzer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--frames", type=int, default=10_000)
    args = parser.parse_args()
    from openenv_gym.client.local import LocalServer

    server = LocalServer("echo", 1, 100_000)
    try:
        started = time.perf_counter()
        fuzzer = fuzz(server.url, args.frames)
        elapsed = time.perf_counter() - started
        time.sleep(0.5)
        leaked = httpx.get(server.url.replace("ws://", "http://") + "/healthz").json()["sessions"]
        alive = server.process.poll() is None
    finally:
        server.stop()
    print(f"fuzz: {fuzzer.frames:,} frames, {fuzzer.answers:,} answers ({fuzzer.packed:,} messages of columns) in "
          f"{elapsed:.1f} s; errors by code: "
          f"{dict(sorted(fuzzer.errors.items()))}; untyped errors 0; server alive: {alive}; "
          f"sessions left after the client closed: {leaked}")
    if not alive or leaked:
        sys.exit("fuzz: FAILED")


if __name__ == "__main__":
    main()
