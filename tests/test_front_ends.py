"""The front ends in process, over a real session core: frames in, frames out, no sockets.

The native protocol front end is fed text frames and answers through its peer's reply; the plain HTTP
front end (a websockets `process_request` hook) is given requests and answers with responses built by
websockets' own sans-I/O server protocol.
"""

import asyncio

import orjson
import pytest
from conftest import env_path, run
from websockets.datastructures import Headers
from websockets.http11 import Request
from websockets.server import ServerProtocol

from openenv_gym.adapters import load_factory
from openenv_gym.manifests import find_manifest
from openenv_gym.protocol import native as p
from openenv_gym.server.catalog import Catalog
from openenv_gym.server.config import Limits
from openenv_gym.server.core import SessionCore
from openenv_gym.server.http import make_process_request
from openenv_gym.server.native import NativeFrontEnd
from openenv_gym.server.openenv_ws import OpenEnvFrontEnd
from openenv_gym.server.sessions import SessionCounter


class Served:
    """A front end over a core of the faulty test env, and one peer whose answers are collected."""

    def __init__(self, env: str = env_path("faulty"), **limits) -> None:
        self.factory = load_factory(find_manifest(env))
        self.core = SessionCore(self.factory, Limits(**limits), SessionCounter(100), threads=2)
        self.catalog = Catalog(self.factory, "faulty")
        self.front = NativeFrontEnd(self.core, self.catalog)
        self.answers: list[dict] = []
        self.outbox = self._arrived  # one object: disconnect() knows the connection by it
        self.peer = self.front.connect(self.outbox, hangup=lambda: None)

    def _arrived(self, message: dict) -> None:
        self.answers.append(orjson.loads(p.encode_frame([message]))[0])  # as the client reads it

    def send(self, *messages: object, raw: str | bytes | None = None) -> list[dict]:
        """Answers that came inline to one frame of `messages` (or the raw frame)."""
        self.answers.clear()
        frame = raw if raw is not None else orjson.dumps(list(messages)).decode()
        self.peer = self.front.handle_frame(self.peer, frame)
        return list(self.answers)

    async def settled(self, count: int) -> list[dict]:
        while len(self.answers) < count:
            await asyncio.sleep(0.01)
        return self.answers


def test_every_op_answers_with_its_shape():
    async def main():
        served = Served()
        (reset,) = served.send(p.reset_request(1, seed=4))
        sid = reset["session"]
        assert reset == {"id": 1, "session": sid, "obs": "ready", "info": {"seed": 4}}
        assert served.send(p.step_request(2, sid, "hi")) == [
            {"id": 2, "obs": "hi", "reward": 0.0, "terminated": False, "truncated": False, "info": {}}]
        (columns,) = served.send(p.steps_request(3, [sid, None], ["a", "b"]))
        assert columns["obs"] == ["a", ""] and columns["error"] == [None, columns["error"][1]]
        assert columns["error"][1]["code"] == "no_episode" and "step before reset" in columns["error"][1]["message"]
        [state] = served.send(p.state_request(4, sid))
        assert state.pop("episode_id")
        assert state == {"id": 4, "session": sid, "running": True, "steps": 2, "max_steps": None}
        (info,) = served.send(p.info_request(5))
        assert info["env"]["name"] == "faulty" and info["protocol"] == p.PROTOCOL_VERSION and info["workers"] == 1
        assert served.send(p.splits_request(6)) == [{"id": 6, "splits": []}]
        (tasks,) = served.send(p.tasks_request(7))
        assert tasks["error"]["code"] == "bad_request" and "no task catalog" in tasks["error"]["message"]
        assert served.send(p.close_request(8, sid)) == [{"id": 8, "closed": True}]
        assert served.send(p.step_request(9, sid, "x"))[0]["error"]["code"] == "unknown_session"

    run(main())


@pytest.mark.parametrize("frame, code", [
    ('{"id": 1, "op": ', "bad_frame"),
    (b'{"id": 1, "op": "info"}', "bad_frame"),
    ("[]", "bad_frame"),
    ('{"id": 1, "op": "explode"}', "unknown_op"),
    ('{"id": 1, "op": ["step"]}', "bad_request"),
    ('{"op": "info"}', "bad_request"),
    ('{"id": 1, "op": "reset", "seed": "three"}', "bad_request"),
    ('{"id": 1, "op": "step", "action": "x"}', "no_episode"),
    ('{"id": 1, "op": "steps", "sessions": [], "actions": []}', "bad_request"),
    ('{"id": 1, "op": "state"}', "bad_request"),
    ('{"id": 1, "op": "tasks", "start": "0"}', "bad_request"),
    ('{"id": 1, "op": "step", "action": "' + "x" * 5000 + '"}', "too_large"),
])
def test_bad_frames_get_their_code_and_the_peer_goes_on(frame, code):
    async def main():
        served = Served(max_frame_bytes=4096)
        (answer,) = served.send(raw=frame)
        assert answer["error"]["code"] == code and answer["error"]["message"]
        assert served.send(p.info_request(2))[0]["env"]["name"] == "faulty"

    run(main())


def test_answers_that_wait_arrive_later_and_a_dropped_peer_ends_its_sessions():
    async def main():
        served = Served()
        sid = served.send(p.reset_request(1))[0]["session"]
        assert served.send(p.step_request(2, sid, "slow")) == []  # it waits: answered when done
        (answer,) = await served.settled(1)
        assert answer == {"id": 2, "obs": "slow done", "reward": 0.0, "terminated": False, "truncated": False,
                          "info": {}}
        served.front.disconnect(served.peer, served.outbox)
        assert served.core.sessions == {} and served.core.counter.total() == 0

    run(main())


class Connection:
    """What the hook needs of a connection: responses built by websockets' sans-I/O server protocol."""

    def __init__(self) -> None:
        self.protocol = ServerProtocol()

    def respond(self, status, text):
        return self.protocol.reject(status, text)


def get(hook, path: str, **headers: str):
    response = asyncio.run(hook(Connection(), Request(path, Headers(headers))))
    return response if response is None else (response.status_code, orjson.loads(response.body))


def test_http_routes_and_the_token():
    async def hook_of(token):
        served = Served(env="echo")
        health = {"status": "ok", "env": "echo"}
        openenv = OpenEnvFrontEnd(served.core)
        return make_process_request(token, {"/healthz": lambda: health, "/health": openenv.health},
                                    {"/info": lambda: served.front.info, "/schema": openenv.schema,
                                     "/metadata": openenv.metadata}, served.catalog)

    hook = asyncio.run(hook_of(None))
    assert get(hook, "/healthz") == (200, {"status": "ok", "env": "echo"})
    status, info = get(hook, "/info")
    assert status == 200 and info["env"]["name"] == "echo" and info["limits"]["max_sessions"] == 10_000
    assert get(hook, "/splits") == (200, {"splits": []})
    status, body = get(hook, "/tasks?split=x&start=zero")
    assert status == 400 and "start must be an integer" in body["error"]["message"]
    status, body = get(hook, "/nope")
    assert status == 404 and "try /healthz" in body["error"]["message"]
    assert get(hook, "/", Upgrade="websocket") is None  # on to the WebSocket handshake
    assert get(hook, "/ws", Upgrade="websocket") is None  # OpenEnv's protocol
    assert get(hook, "/health") == (200, {"status": "healthy"})  # OpenEnv's routes
    status, schema = get(hook, "/schema")
    assert status == 200 and set(schema) == {"action", "observation", "state"}
    assert schema["observation"]["properties"]["text"] == {"type": "string"}
    assert get(hook, "/metadata")[1]["name"] == "echo"

    guarded = asyncio.run(hook_of("s3cret"))
    assert get(guarded, "/healthz")[0] == 200 and get(guarded, "/health")[0] == 200  # liveness stays open
    assert get(guarded, "/schema")[0] == 401
    status, body = get(guarded, "/info")
    assert status == 401 and body["error"]["code"] == "unauthorized"
    assert get(guarded, "/info", Authorization="Bearer s3cret")[0] == 200
    assert get(guarded, "/", Upgrade="websocket", Authorization="Bearer wrong")[0] == 401
