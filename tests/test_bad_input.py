"""Every bad input gets its typed error; the connection, other sessions and the server keep working."""

import asyncio
import contextlib
import threading
import time

import orjson
import pytest
from conftest import health, run, wait_until
from websockets.asyncio.client import connect as ws_connect

import openenv_gym
from benchmarks.measures import rss_bytes
from benchmarks.raw_websocket import closed_by_server, frame, frame_header, open_raw, read_frame
from openenv_gym.client.local import LocalServer


class RawClient:
    """A bare WebSocket to send frames the real client never would."""

    def __init__(self, ws):
        self.ws = ws

    async def send(self, frame):
        await self.ws.send(frame)
        return orjson.loads(await asyncio.wait_for(self.ws.recv(), 5))

    async def request(self, **message):
        (answer,) = await self.send(orjson.dumps(message).decode())
        return answer

    async def new_session(self, **reset):
        answer = await self.request(id="r", op="reset", **reset)
        return answer["session"]


@contextlib.asynccontextmanager
async def session_stepping_beside(url):
    """Another session on the same server steps the whole time; it must still be stepping at the end."""
    started, stop, counts = asyncio.Event(), asyncio.Event(), {"steps": 0}

    async def keep_stepping():
        async with openenv_gym.connect(url) as conn:
            session = conn.session()
            await session.reset()
            while not stop.is_set():
                obs, *_ = await session.step("alive")
                assert obs == "alive"
                counts["steps"] += 1
                started.set()
                await asyncio.sleep(0)

    bystander = asyncio.create_task(keep_stepping())
    await asyncio.wait_for(started.wait(), 5)
    yield
    before = counts["steps"]
    await asyncio.sleep(0.05)
    stop.set()
    await bystander
    assert counts["steps"] > before > 0


CASES = {
    "malformed JSON": ('{"id": 1, "op": ', "bad_frame"),
    "binary frame": (b'{"id": 1, "op": "info"}', "bad_frame"),
    "array of nothing": ("[]", "bad_frame"),
    "unknown op": ('{"id": 1, "op": "explode"}', "unknown_op"),
    "missing id": ('{"op": "info"}', "bad_request"),
    "missing op": ('{"id": 1}', "bad_request"),
    "request not an object": ("[1]", "bad_request"),
    "seed of the wrong type": ('{"id": 1, "op": "reset", "seed": "three"}', "bad_request"),
    "options of the wrong type": ('{"id": 1, "op": "reset", "options": [1]}', "bad_request"),
    "session of the wrong type": ('{"id": 1, "op": "step", "session": 5, "action": "x"}', "bad_request"),
    "session that is a list": ('{"id": 1, "op": "step", "session": [1], "action": "x"}', "bad_request"),
    "op that is a list": ('{"id": 1, "op": ["step"]}', "bad_request"),
    "close without session": ('{"id": 1, "op": "close"}', "bad_request"),
    "unknown session id": ('{"id": 1, "op": "step", "session": "AAAAAAAAAAAAAAAAAAAAAA", "action": "x"}',
                           "unknown_session"),
    "step before reset": ('{"id": 1, "op": "step", "action": "x"}', "no_episode"),
    "oversize frame": ('{"id": 1, "op": "step", "action": "' + "x" * 5000 + '"}', "too_large"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_frame_matrix(faulty_url, case):
    frame, code = CASES[case]

    async def main():
        async with session_stepping_beside(faulty_url), ws_connect(faulty_url) as ws:
            raw = RawClient(ws)
            (answer,) = await raw.send(frame)
            assert answer["error"]["code"] == code, answer
            assert answer["error"]["message"]
            # the same connection still answers
            assert (await raw.request(id=2, op="info"))["env"]["name"] == "faulty"

    run(main())


def test_session_errors_matrix(faulty_url):
    """Errors that need a session: each answered with its code, the connection lives on."""

    async def main():
        async with (session_stepping_beside(faulty_url), ws_connect(faulty_url) as owner_ws,
                    ws_connect(faulty_url) as other_ws):
            owner, other = RawClient(owner_ws), RawClient(other_ws)
            sid = await owner.new_session()

            # another connection's session id
            answer = await other.request(id=1, op="step", session=sid, action="x")
            assert answer["error"]["code"] == "unknown_session"
            assert (await other.request(id=2, op="close", session=sid))["error"]["code"] == "unknown_session"

            # an invalid action (neither text nor a tool call object)
            answer = await owner.request(id=3, op="step", session=sid, action=42)
            assert answer["error"]["code"] == "invalid_action"
            # missing action
            assert (await owner.request(id=4, op="step", session=sid))["error"]["code"] == "bad_request"

            # step after the episode ended
            assert (await owner.request(id=5, op="step", session=sid, action="end"))["terminated"] is True
            answer = await owner.request(id=6, op="step", session=sid, action="x")
            assert answer["error"]["code"] == "no_episode"

            # the session is still usable after all of that
            await owner.request(id=7, op="reset", session=sid)
            assert (await owner.request(id=8, op="step", session=sid, action="ok"))["obs"] == "ok"

    run(main())


def test_batch_with_good_and_bad_requests_answers_each(faulty_url):
    async def main():
        async with ws_connect(faulty_url) as ws:
            raw = RawClient(ws)
            sid = await raw.new_session()
            batch = [{"id": 1, "op": "step", "session": sid, "action": "a"}, {"id": 2, "op": "nope"},
                     {"id": 3}, {"id": 4, "op": "info"}]
            answers = {a["id"]: a for a in await raw.send(orjson.dumps(batch).decode())}
            assert answers[1]["obs"] == "a"
            assert answers[2]["error"]["code"] == "unknown_op"
            assert answers[3]["error"]["code"] == "bad_request"
            assert "env" in answers[4]

    run(main())


def test_a_burst_of_bad_input_leaves_the_server_serving_and_holding_nothing(faulty_url):
    """Every bad frame at once on one connection, with sessions open on it: each gets its error, and once the
    connection is gone the server holds no session of it and serves a new client."""

    async def main():
        before = health(faulty_url)["sessions"]
        async with ws_connect(faulty_url) as ws:
            raw = RawClient(ws)
            sessions = [await raw.new_session() for _ in range(3)]
            assert health(faulty_url)["sessions"] == before + 3
            for frame, _ in CASES.values():
                await ws.send(frame)
            answers: list[dict] = []
            while len(answers) < len(CASES):  # answers of frames read in one go may share a frame
                answers += orjson.loads(await asyncio.wait_for(ws.recv(), 5))
            assert [answer["error"]["code"] for answer in answers] == [code for _, code in CASES.values()]
            assert (await raw.request(id="s", op="step", session=sessions[0], action="still"))["obs"] == "still"
        assert wait_until(lambda: health(faulty_url)["sessions"] == before)
        async with openenv_gym.connect(faulty_url) as conn:
            session = conn.session()
            await session.reset()
            assert (await session.step("fresh"))[0] == "fresh"

    run(main())


@pytest.mark.parametrize("message", [
    {"id": 1, "op": "steps", "sessions": ["a"]},
    {"id": 1, "op": "steps", "sessions": "a", "actions": "x"},
    {"id": 1, "op": "steps", "sessions": ["a", "b"], "actions": ["x"]},
    {"id": 1, "op": "steps", "sessions": [], "actions": []},
    {"id": 1, "op": "resets", "sessions": [None]},
    {"id": 1, "op": "resets", "sessions": [None, None], "seeds": [1], "options": [None, None]},
    {"id": 1, "op": "resets", "sessions": None, "seeds": None, "options": None},
    {"id": 1, "op": "resets", "sessions": [], "seeds": [], "options": []},
])
def test_malformed_steps_request(faulty_url, message):
    async def main():
        async with ws_connect(faulty_url) as ws:
            answer = await RawClient(ws).request(**message)
            assert answer["error"]["code"] == "bad_request" and "same non-zero length" in answer["error"]["message"]

    run(main())


def test_steps_answers_each_entry_in_columns(faulty_url):
    """Good entries are answered; each bad one gets its own typed error in `error`; the connection lives on."""

    async def main():
        async with session_stepping_beside(faulty_url), ws_connect(faulty_url) as ws:
            raw = RawClient(ws)
            a, b, c = [await raw.new_session() for _ in range(3)]
            answer = await raw.request(id=5, op="steps", sessions=[a, "nope", b, None, c, [1]],
                                       actions=["x", "y", 42, "z", "raise", "w"])
            assert answer["obs"][0] == "x" and answer["error"][0] is None
            assert [e and e["code"] for e in answer["error"]] == [
                None, "unknown_session", "invalid_action", "no_episode", "env_error", "bad_request"]
            answer = await raw.request(id=6, op="steps", sessions=[a, b], actions=["again", "fine"])
            assert answer["obs"] == ["again", "fine"] and "error" not in answer

    run(main())


def test_resets_answers_each_entry_as_its_own_reset_would(faulty_url):
    """Entry k of a `resets` gets what a `reset` of its own gets (the oracle: each sent alone), errors included;
    a session it created plays at once; the connection lives on."""

    async def main():
        async with ws_connect(faulty_url) as ws:
            raw = RawClient(ws)
            a, b = await raw.new_session(), await raw.new_session()
            entries = [(None, 1, None), (a, 2, {"x": 1}), ("nope", 3, None), (None, "x", None),
                       (None, 4, {"fail": True}), (b, None, [1]), (b, 5, None)]
            answer = await raw.request(id=5, op="resets", sessions=[e[0] for e in entries],
                                       seeds=[e[1] for e in entries], options=[e[2] for e in entries])
            for k, (session, seed, options) in enumerate(entries):
                fields = {"session": session, "seed": seed, "options": options}
                alone = await raw.request(id=10 + k, op="reset", **{f: v for f, v in fields.items() if v is not None})
                if "error" in alone:
                    assert (answer["error"][k], answer["session"][k]) == (alone["error"], None)
                else:
                    assert answer["error"][k] is None
                    assert (answer["obs"][k], answer["info"][k]) == (alone["obs"], alone["info"])
                    assert answer["session"][k] == session or (session is None and type(answer["session"][k]) is str)
            assert [e and e["code"] for e in answer["error"]] == [
                None, None, "unknown_session", "bad_request", "env_error", "bad_request", None]
            created = answer["session"][0]
            assert created not in (a, b)
            assert (await raw.request(id=30, op="step", session=created, action="hi"))["obs"] == "hi"

    run(main())


def test_steps_with_a_hung_entry_answers_after_the_timeout(faulty_url):
    async def main():
        async with ws_connect(faulty_url) as ws:
            raw = RawClient(ws)
            a, b = await raw.new_session(), await raw.new_session()
            answer = await raw.request(id=7, op="steps", sessions=[a, b], actions=["hang", "quick"])
            assert answer["obs"][1] == "quick" and answer["error"][0]["code"] == "timeout"

    run(main())


@pytest.mark.timeout(60)
def test_closing_busy_sessions_answers_every_request_exactly_once(faulty_url):
    async def main():
        async with ws_connect(faulty_url) as ws:
            raw = RawClient(ws)
            a, b, c = [await raw.new_session() for _ in range(3)]
            await ws.send(orjson.dumps([
                {"id": 1, "op": "steps", "sessions": [a, b], "actions": ["hang", "x"]},
                {"id": 2, "op": "close", "session": a},
                {"id": 3, "op": "step", "session": c, "action": "slow"},
                {"id": 4, "op": "close", "session": c}]).decode())
            answers = []
            while len(answers) < 4:
                answers += orjson.loads(await asyncio.wait_for(ws.recv(), 5))
            by_id = {answer["id"]: answer for answer in answers}
            assert sorted(by_id) == [1, 2, 3, 4]  # one answer each, none lost
            assert by_id[1]["obs"][1] == "x" and by_id[1]["error"][0]["code"] == "unknown_session"
            assert by_id[3]["error"]["code"] == "unknown_session" and by_id[2] == {"id": 2, "closed": True}
            assert (await raw.request(id=5, op="step", session=b, action="still here"))["obs"] == "still here"

    run(main())


def test_model_text_that_breaks_parsers_is_an_invalid_action_and_the_session_goes_on(guess_url):
    """Deep brackets once raised RecursionError (an env_error that ended the session) and long words made
    the parse quadratic; both are now an invalid action, answered at once."""
    async def main():
        async with openenv_gym.connect(guess_url) as conn:
            session = conn.session()
            await session.reset(seed=0)
            for text in ("[" * 250_000, "x" * 250_000, "f(x=" + "[" * 100_000 + "])"):  # under the size limit
                obs, reward, terminated, truncated, info = await session.step(text)
                assert info["error"]["code"] == "invalid_action" and "no tool call" in obs
                assert not (terminated or truncated)
            obs, *_ = await session.step({"name": "guess", "arguments": {"number": 50}})
            assert "50" in obs
            long_text = "let me think. " * 10_000 + '<tool_call>{"name": "guess", "arguments": {"number": 25}}'
            await session.reset(seed=1)
            obs, *_ = await session.step(long_text + "</tool_call>")  # long text is read in a thread, then played
            assert "25" in obs

    run(main())


def test_a_text_action_over_the_limit_is_an_invalid_action_naming_it(start_server):
    url = start_server("guess", "--max-action-chars", "1000")

    async def main():
        async with openenv_gym.connect(url) as conn:
            info = await conn.info()
            assert info["limits"]["max_action_chars"] == 1000
            session = conn.session()
            await session.reset(seed=0)
            obs, reward, terminated, truncated, info = await session.step("x" * 1001)
            assert info["error"]["code"] == "invalid_action" and "1001 characters" in obs
            assert "at most 1000" in obs and "--max-action-chars" in obs
            assert (await session.state())["steps"] == 1  # it counts as a step, as other invalid actions do
            obs, *_ = await session.step('<tool_call>{"name": "guess", "arguments": {"number": 50}}</tool_call>')
            assert "50" in obs
        async with openenv_gym.AsyncVectorClient(url, 2) as client:  # the batch path (`steps`) says the same
            await client.reset(seed=0)
            result = await client.step(["y" * 2000, "z"])
            assert "2000 characters" in result.obs[0] and result.infos[1]["error"]["code"] == "invalid_action"
            assert "characters" not in result.obs[1] and client.live.all()

    run(main())


def _echo_session(sock) -> str:
    sock.sendall(frame([{"id": 0, "op": "reset", "options": {"max_steps": 10**9}}]))
    return read_frame(sock)[0]["session"]


def test_incomplete_frames_are_cut_after_the_frame_timeout(start_server):
    url = start_server("echo", "--frame-timeout", "1")
    idle = open_raw(url)
    partial = open_raw(url)
    partial.sendall(frame_header(2**20) + b"[" * 1000)  # a 1 MiB frame, of which 1,000 bytes ever come
    fragmented = open_raw(url)
    fragmented.sendall(frame([{"id": 1, "op": "info"}], fin=False))  # a message whose last fragment never comes
    trickle = open_raw(url)
    trickle.sendall(frame_header(100))

    def trickling() -> bool:  # one byte every 0.2 s: cut long before its 100 bytes are in
        try:
            for _ in range(100):
                trickle.sendall(b"[")
                time.sleep(0.2)
        except OSError:
            return True
        return False

    cut = {}
    trickler = threading.Thread(target=lambda: cut.update(trickle=trickling()))
    trickler.start()
    assert closed_by_server(partial, within=15) and closed_by_server(fragmented, within=15)
    trickler.join(30)
    assert cut["trickle"]
    idle.sendall(frame([{"id": 2, "op": "info"}]))  # a connection with nothing half-sent is left alone
    assert read_frame(idle)[0]["id"] == 2
    idle.close()


def test_a_client_that_never_reads_is_no_longer_read_and_holds_little_memory():
    server = LocalServer("echo", 1, 1000, "--max-frame-bytes", str(2**20))
    try:
        baseline = rss_bytes(server.process.pid)
        sessions_before = health(server.url)["sessions"]
        sock = open_raw(server.url)
        session = _echo_session(sock)
        request = frame([{"id": i, "op": "step", "session": session, "action": "x" * 10_000} for i in range(50)])
        sock.setblocking(False)
        sent, cap, last_progress, started = 0, 512 * 2**20, time.monotonic(), time.monotonic()
        pending = memoryview(request)
        while sent < cap and time.monotonic() - last_progress < 2 and time.monotonic() - started < 60:
            try:
                written = sock.send(pending)
            except BlockingIOError:
                time.sleep(0.01)
                continue
            sent, last_progress = sent + written, time.monotonic()
            pending = pending[written:] or memoryview(request)
        assert sent < 64 * 2**20  # the server stopped reading: TCP pushed back long before the 512 MiB
        assert rss_bytes(server.process.pid) - baseline < 150 * 2**20
        sock.close()
        assert wait_until(lambda: health(server.url)["sessions"] == sessions_before)

        async def bystander():
            async with openenv_gym.connect(server.url) as conn:
                other = conn.session()
                await other.reset()
                return (await other.step("still served"))[0]

        assert run(bystander()) == "still served"
    finally:
        server.stop()
