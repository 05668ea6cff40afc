"""pytest-benchmark micro-benchmarks: protocol encode/decode, the server's front end and session core stepping
1,024 sessions of echo in process (frames in, answers out, no sockets), and the client's CPU for 1,024 session
steps sent one env at a time to a local server."""

import asyncio
import time

import orjson
import pytest
import uvloop

from openenv_gym.adapters import load_factory
from openenv_gym.client.local import LocalServer
from openenv_gym.client.vector import AsyncVectorClient
from openenv_gym.episode.toolcalls import parse_tool_call
from openenv_gym.manifests import find_manifest
from openenv_gym.protocol import native as p
from openenv_gym.server.catalog import Catalog
from openenv_gym.server.config import Limits
from openenv_gym.server.core import SessionCore
from openenv_gym.server.native import NativeFrontEnd
from openenv_gym.server.sessions import SessionCounter

BATCH = 1024
SESSION = "0123456789abcdefghijkl"


@pytest.fixture(scope="module")
def step_frame() -> bytes:
    return p.encode_frame([p.step_request(i, SESSION, "hello") for i in range(BATCH)])


def test_encode_step_batch(benchmark):
    requests = [p.step_request(i, SESSION, "hello") for i in range(BATCH)]
    benchmark(p.encode_frame, requests)


def test_decode_step_batch(benchmark, step_frame):
    benchmark(p.decode_frame, step_frame)


def test_encode_response_batch(benchmark):
    responses = [p.step_response(i, "hello", 0.5, False, False, {"step": 1}) for i in range(BATCH)]
    benchmark(p.encode_frame, responses)


def test_parse_hermes_tool_call(benchmark):
    benchmark(parse_tool_call, '<tool_call>{"name": "guess", "arguments": {"number": 42}}</tool_call>')


@pytest.fixture(scope="module")
def served():
    """The native front end over a session core of echo, with BATCH sessions reset, on a loop of its own."""
    factory = load_factory(find_manifest("echo"))
    loop = asyncio.new_event_loop()
    answers: list = []

    async def setup():
        front = NativeFrontEnd(SessionCore(factory, Limits(), SessionCounter(BATCH), threads=1), Catalog(factory, ""))
        peer = front.connect(answers.append, hangup=lambda: None)
        front.handle_frame(peer, p.encode_frame([p.reset_request(i, options={"max_steps": 10**9})
                                                 for i in range(BATCH)]).decode())
        return front, peer

    front, peer = loop.run_until_complete(setup())
    sessions = [a["session"] for a in answers]
    answers.clear()
    yield front, peer, sessions, answers
    front.core.shutdown()
    loop.close()


def test_front_end_step_batch(benchmark, served):
    """1,024 `step` requests in one frame: decoded, stepped, answered one message each."""
    front, peer, sessions, answers = served
    frame = p.encode_frame([p.step_request(i, s, "hello") for i, s in enumerate(sessions)]).decode()

    def dispatch():
        answers.clear()
        front.handle_frame(peer, frame)
        assert len(answers) == BATCH

    benchmark(dispatch)


def test_front_end_steps_columns(benchmark, served):
    """One `steps` request for 1,024 sessions (the vector client's lock-step): decoded, stepped, one answer of
    columns, encoded."""
    front, peer, sessions, answers = served
    frame = p.encode_frame([p.steps_request(1, sessions, ["hello"] * BATCH)]).decode()

    def dispatch():
        answers.clear()
        front.handle_frame(peer, frame)
        return p.encode_frame(answers)

    (answer,) = orjson.loads(dispatch())  # checked once, outside the timing
    assert len(answer["obs"]) == BATCH and "error" not in answer
    benchmark(dispatch)


@pytest.fixture(scope="module")
def vector_client():
    """An AsyncVectorClient of BATCH echo sessions on a local server, reset, with the loop it runs on."""
    server = LocalServer("echo", 1, BATCH + 100)
    loop = uvloop.new_event_loop()
    client = loop.run_until_complete(AsyncVectorClient(server.url, BATCH, request_timeout=600).open())
    loop.run_until_complete(client.reset(seed=0, options={"max_steps": 10**9}))
    yield loop, client
    loop.run_until_complete(client.close())
    loop.close()
    server.stop()


@pytest.mark.benchmark(timer=time.process_time)
def test_client_one_env_at_a_time(benchmark, vector_client):
    """The client's CPU (process time: the server is another process) for 1,024 session steps, each env sent on
    its own and answers taken as they come, as the rollout stream does; per step: the time / 1,024 (goal 5 us)."""
    loop, client = vector_client

    async def round_of_steps() -> int:
        for env in range(BATCH):
            client.send(["hello"], ids=[env])
        answered = 0
        while answered < BATCH:
            answered += len(await client.recv(min_results=1))
        return answered

    def steps() -> int:
        return loop.run_until_complete(round_of_steps())

    assert steps() == BATCH
    benchmark(steps)
