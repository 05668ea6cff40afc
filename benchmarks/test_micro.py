"""pytest-benchmark micro-benchmarks: protocol encode/decode and server dispatch of a batch frame."""

import asyncio

import pytest

from openenv_gym import protocol as p
from openenv_gym.adapters import load_factory
from openenv_gym.manifest import find_manifest
from openenv_gym.server.dispatch import Dispatcher, Limits, Peer
from openenv_gym.server.sessions import SessionCounter
from openenv_gym.toolcalls import parse_tool_call

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


def test_dispatch_step_batch(benchmark):
    """One 1,024-step batch frame through the server's dispatcher, echo env, no sockets."""
    factory = load_factory(find_manifest("echo"))
    loop = asyncio.new_event_loop()
    answers: list = []
    peer = Peer(answers.append)

    async def setup():
        dispatcher = Dispatcher(factory, factory.describe(), Limits(), SessionCounter(BATCH))
        frame = p.encode_frame([p.reset_request(i, options={"max_steps": 10**9}) for i in range(BATCH)])
        dispatcher.handle_frame(peer, frame.decode())
        return dispatcher

    dispatcher = loop.run_until_complete(setup())
    sessions = [a["session"] for a in answers]
    frame = p.encode_frame([p.step_request(i, s, "hello") for i, s in enumerate(sessions)]).decode()

    def dispatch():
        answers.clear()
        dispatcher.handle_frame(peer, frame)
        assert len(answers) == BATCH

    benchmark(dispatch)
    loop.close()
