"""Server behaviour: isolation, reaping, timeouts, capacity, auth, workers, HTTP catalog."""

import asyncio
import http.server
import subprocess
import sys
import threading
import time

import gymnasium as gym
import httpx
import orjson
import pytest
from conftest import env_path, health, http_url, run, wait_until
from websockets.asyncio.client import connect as ws_connect

import openenv_gym
from openenv_gym import errors
from openenv_gym.protocol import answers
from openenv_gym.protocol import native as p


def test_dropped_connection_sessions_are_reaped(start_server):
    url = start_server("echo")

    async def main():
        ws = await ws_connect(url)
        conn = openenv_gym.Connection(ws, url, 10)
        sessions = [conn.session() for _ in range(50)]
        await asyncio.gather(*(s.reset() for s in sessions))
        assert health(url)["sessions"] == 50
        ws.transport.abort()  # drop the TCP connection without a close handshake
        await asyncio.sleep(0)

    run(main())
    assert wait_until(lambda: health(url)["sessions"] == 0)


def test_env_exception_ends_only_its_session(faulty_url):
    async def main():
        async with openenv_gym.connect(faulty_url) as conn:
            bad, good = conn.session(), conn.session()
            await asyncio.gather(bad.reset(), good.reset())
            bad_id = bad.id
            before = health(faulty_url)["sessions"]
            with pytest.raises(errors.EnvError, match="RuntimeError: boom"):
                await bad.step("raise")
            assert bad.id is None  # the client forgets the ended session
            assert health(faulty_url)["sessions"] == before - 1
            assert (await good.step("still here"))[0] == "still here"
            with pytest.raises(errors.UnknownSessionError):
                await conn.request({"id": 99, "op": "step", "session": bad_id, "action": "x"})
            await bad.reset()  # a new session
            assert (await bad.step("again"))[0] == "again"

    run(main())


def test_steps_that_open_deadlines_and_http_requests_before_they_wait_run_as_their_own_tasks(faulty_url):
    """A step that opens asyncio.timeout, or makes an httpx request (anyio cancel scopes), before its first wait:
    the scope belongs to the step, so the request is answered and its deadline cancels the step only, never the
    connection that carries the other sessions."""
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Ok) as web:
        threading.Thread(target=web.serve_forever, daemon=True).start()
        page = f"http://127.0.0.1:{web.server_address[1]}/"

        async def main():
            async with openenv_gym.connect(faulty_url) as conn:
                sessions = [conn.session() for _ in range(3)]
                await asyncio.gather(*(s.reset() for s in sessions))
                answers = await asyncio.gather(sessions[0].step("expire"), sessions[1].step(f"fetch {page}"),
                                               sessions[2].step("slow"))
                assert [a[0] for a in answers] == ["its own deadline passed", "fetched: 200", "slow done"]
                again = await asyncio.gather(*(s.step("still here") for s in sessions))
                assert [a[0] for a in again] == ["still here"] * 3  # the connection and every session go on

        run(main())
        web.shutdown()


def test_answers_in_columns_are_the_answers_one_by_one(guess_url):
    """A client that asked for columns reads the plain answers of a frame as one message of each kind (resets,
    steps); unpacked, they are what a client that did not ask is answered for the same requests, errors as they
    are."""
    moves = ['<tool_call>{"name": "guess", "arguments": {"number": 50}}</tool_call>', "no tool call in this",
             {"name": "give_up", "arguments": {}}, {"name": "guess", "arguments": {"number": "many"}}]

    async def play(columns: bool) -> list[dict]:
        async with ws_connect(guess_url) as ws:
            async def frame(requests: list[dict], count: int) -> list[dict]:
                await ws.send(orjson.dumps(requests).decode())
                got: list[dict] = []
                while sum(len(m.get("ids", [None])) for m in got) < count:
                    got += orjson.loads(await ws.recv())
                return got

            if columns:
                assert await frame([answers.columns_request(1)], 1) == [{"id": 1, "columns": True}]
            resets = await frame([p.reset_request(10 + k, seed=k) for k in range(4)], 4)
            sessions = [a["session"] for a in sorted(_one_by_one(resets), key=lambda a: a["id"])]
            requests = [p.step_request(20 + k, session, moves[k]) for k, session in enumerate(sessions)]
            steps = await frame([*requests, p.step_request(30, "nope", "x")], 5)
            packed = [m for m in resets + steps if "ids" in m]
            assert len(packed) == (2 if columns else 0)  # the 4 resets, the 4 steps that ran
            return sorted(({k: v for k, v in a.items() if k != "session"} for a in _one_by_one(resets + steps)),
                          key=lambda a: a["id"])

    assert run(play(columns=True)) == run(play(columns=False))


def _one_by_one(messages: list[dict]) -> list[dict]:
    """Messages with the answers in columns among them as the plain answers they stand for."""
    plain = []
    for message in messages:
        columns = answers.columns_of(message)
        plain += [message] if columns is None else [answers.unpacked(message, columns, k)
                                                     for k in range(len(message["ids"]))]
    return plain


class _Ok(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # the name http.server calls
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.mark.parametrize("action, error", [("not-a-result", "StepResult"), ("unencodable", "JSON")])
def test_env_returning_garbage_is_an_env_error(faulty_url, action, error):
    async def main():
        before = health(faulty_url)["sessions"]
        async with openenv_gym.connect(faulty_url) as conn:
            session, other = conn.session(), conn.session()
            await asyncio.gather(session.reset(), other.reset())
            results = await asyncio.gather(session.step(action), other.step("fine"), return_exceptions=True)
            assert isinstance(results[0], errors.EnvError) and error in str(results[0])
            assert "its session is ended" in str(results[0]) and results[1][0] == "fine"
            assert session.id is None  # ended, as the docs say of env_error: the server no longer holds it
            assert health(faulty_url)["sessions"] == before + 1
        async with openenv_gym.AsyncVectorClient(faulty_url, 3) as client:  # in a batch: only that entry fails
            await client.reset()
            result = await client.step(["fine", action, "also fine"])
            assert result.obs[0] == "fine" and result.obs[2] == "also fine"
            assert result.infos[1]["error"]["code"] == "env_error" and error in result.infos[1]["error"]["message"]
            assert health(faulty_url)["sessions"] == before + 2

    run(main())


def test_failing_first_reset_leaves_no_session(faulty_url):
    async def main():
        async with openenv_gym.connect(faulty_url) as conn:
            before = health(faulty_url)["sessions"]
            with pytest.raises(errors.EnvError, match="reset failed on purpose"):
                await conn.session().reset(options={"fail": True})
            assert health(faulty_url)["sessions"] == before

    run(main())


def test_chatty_environment_output_never_blocks_the_server(faulty_url, capfd):
    async def main():
        async with openenv_gym.connect(faulty_url) as conn:
            session = conn.session()
            await session.reset()
            for _ in range(8):  # 800 KB, far more than a pipe holds
                assert (await session.step("print"))[0] == "printed"

    run(main())
    assert "x" * 1000 in capfd.readouterr().err  # the embedded server's output reaches our stderr


def test_hung_step_times_out_while_others_step(faulty_url):
    async def main():
        async with openenv_gym.connect(faulty_url) as conn:
            hung, other = conn.session(), conn.session()
            await asyncio.gather(hung.reset(), other.reset())
            hang = asyncio.create_task(hung.step("hang"))
            steps = 0
            while not hang.done():
                await other.step("x")
                steps += 1
            with pytest.raises(errors.StepTimeoutError, match="step timeout"):
                await hang
            assert steps > 10  # the server kept answering during the hang
            assert hung.id is None

    run(main())


def test_blocking_env_runs_off_the_event_loop(start_server):
    url = start_server(env_path("blocking"), "--step-timeout", "1")

    async def main():
        async with openenv_gym.connect(url) as conn:
            slow, fast, hung = conn.session(), conn.session(), conn.session()
            await asyncio.gather(slow.reset(), fast.reset(), hung.reset())
            sleeping = asyncio.create_task(slow.step("0.5"))
            quick = 0
            while not sleeping.done():
                await fast.step("0")
                quick += 1
            assert (await sleeping)[0] == "slept 0.5"
            assert quick > 5  # other sessions were served while one step slept in its thread
            with pytest.raises(errors.StepTimeoutError):
                await hung.step("3")  # longer than --step-timeout 1
            assert (await fast.step("0"))[0] == "slept 0"

    run(main())


def test_hung_blocking_steps_cost_only_their_own_sessions(start_server):
    """More hung steps than threads: each times out alone, and the threads they hold are replaced."""
    url = start_server(env_path("blocking"), "--step-timeout", "1", "--threads", "2")

    async def main():
        async with openenv_gym.connect(url) as conn:
            hung = [conn.session() for _ in range(4)]
            bystander = conn.session()
            await asyncio.gather(bystander.reset(), *(s.reset() for s in hung))
            outcomes = await asyncio.gather(*(s.step("30") for s in hung), return_exceptions=True)
            assert all(isinstance(o, errors.StepTimeoutError) for o in outcomes)
            for _ in range(5):  # steps after them are served, not queued behind the hung threads
                assert (await bystander.step("0"))[0] == "slept 0"
            after = conn.session()
            await after.reset()
            assert (await after.step("0.01"))[0] == "slept 0.01"

    run(main())


def test_capacity_is_a_typed_error_and_frees_up(start_server):
    url = start_server("echo", max_sessions=3)

    async def main():
        async with openenv_gym.connect(url) as conn:
            sessions = [conn.session() for _ in range(3)]
            await asyncio.gather(*(s.reset() for s in sessions))
            extra = conn.session()
            with pytest.raises(errors.CapacityError, match="maximum of 3 sessions"):
                await extra.reset()
            await sessions[0].close()
            await extra.reset()
            assert (await extra.step("in"))[0] == "in"

    run(main())


def test_idle_sessions_are_reaped(start_server):
    url = start_server("echo", "--idle-timeout", "0.3")

    async def main():
        async with openenv_gym.connect(url) as conn:
            idle, busy = conn.session(), conn.session()
            await asyncio.gather(idle.reset(options={"max_steps": 1000}), busy.reset(options={"max_steps": 1000}))
            deadline = time.monotonic() + 1.5
            while time.monotonic() < deadline:
                await busy.step("x")
                await asyncio.sleep(0.05)
            with pytest.raises(errors.UnknownSessionError):
                await idle.step("x")
            assert (await busy.step("y"))[0] == "y"
            assert health(url)["sessions"] == 1

    run(main())


def test_token_is_required(start_server):
    url = start_server("echo", "--token", "s3cret")
    assert httpx.get(http_url(url) + "/healthz").status_code == 200  # liveness stays open
    refused = httpx.get(http_url(url) + "/info")
    assert refused.status_code == 401 and refused.json()["error"]["code"] == "unauthorized"
    assert httpx.get(http_url(url) + "/info", headers={"Authorization": "Bearer s3cret"}).status_code == 200
    # the scheme is case-insensitive (RFC 7235); a repeated header is refused as unauthorized, never a 500
    assert httpx.get(http_url(url) + "/info", headers={"Authorization": "bearer s3cret"}).status_code == 200
    assert httpx.get(http_url(url) + "/info", headers={"Authorization": "BEARER  s3cret"}).status_code == 200
    twice = httpx.get(http_url(url) + "/info", headers=[("Authorization", "Bearer s3cret"),
                                                        ("Authorization", "Bearer s3cret")])
    assert twice.status_code == 401 and "one Authorization header" in twice.json()["error"]["message"]
    assert httpx.get(http_url(url) + "/info", headers={"Authorization": "Basic s3cret"}).status_code == 401

    async def main():
        with pytest.raises(errors.UnauthorizedError, match="Bearer"):
            await openenv_gym.connect(url)
        with pytest.raises(errors.UnauthorizedError):
            await openenv_gym.connect(url, token="wrong")
        async with openenv_gym.connect(url, token="s3cret") as conn:
            session = conn.session()
            await session.reset()
            assert (await session.step("ok"))[0] == "ok"

    run(main())


def test_http_catalog(echo_url):
    info = httpx.get(http_url(echo_url) + "/info").json()
    assert info["env"]["name"] == "echo" and info["limits"]["max_frame_bytes"] > 0
    assert info["spaces"]["observation"]["type"] == "UnicodeText" and info["spaces"]["action"]["type"] == "UnicodeText"
    missing = httpx.get(http_url(echo_url) + "/nope")
    assert missing.status_code == 404 and "try /healthz" in missing.json()["error"]["message"]


def test_two_workers_share_the_port_and_the_session_count(start_server):
    url = start_server("echo", workers=2, max_sessions=40)
    assert health(url)["workers"] == 2

    async def main():
        conns = [await openenv_gym.connect(url) for _ in range(20)]
        sessions = [c.session() for c in conns for _ in range(2)]
        await asyncio.gather(*(s.reset() for s in sessions))
        status = health(url)
        assert status["sessions"] == 40
        assert all(count > 0 for count in status["sessions_per_worker"])  # the kernel spread connections
        with pytest.raises(errors.CapacityError):  # the limit holds over both workers
            await conns[0].session().reset()
        results = await asyncio.gather(*(s.step("w") for s in sessions))
        assert all(r[0] == "w" for r in results)
        for c in conns:
            await c.close()

    run(main())
    assert wait_until(lambda: health(url)["sessions"] == 0)


def test_unknown_env_fails_to_start_with_a_clear_error(start_server):
    with pytest.raises(errors.ServerStartError, match="did not start") as failure:
        start_server("no-such-env")
    # the cause travels with the error: the tail of what the server printed
    assert "no environment named 'no-such-env'" in str(failure.value) and "known environments" in str(failure.value)


def test_a_second_server_on_a_port_in_use_is_refused_not_let_in(start_server):
    """Workers bind with SO_REUSEPORT; a second server of the same user must not join the first's port (each would
    answer half the connections): it is refused with what to do, and the first goes on alone."""
    url = start_server("echo")
    port = url.rsplit(":", 1)[1]
    done = subprocess.run([sys.executable, "-m", "openenv_gym", "serve", "guess", "--port", port],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr.strip().endswith(f"port {port} on 127.0.0.1 is in use (another server?); choose another with "
                                        "--port, or --port 0 for a free one")
    assert all(health(url)["env"] == "echo" for _ in range(20))


def test_the_final_step_says_how_long_the_environment_took(start_server, echo_url):
    """info["env_seconds"], when a reset asks for it: the episode's reset and steps at the server (the sampler's
    cost in seconds), not the time the client took between them; in the final step's info only, stepped alone or
    in a batch."""
    url = start_server(env_path("blocking"))

    async def main():
        async with openenv_gym.connect(url) as conn:
            session = conn.session()
            await session.reset(options={"max_steps": 2, "env_seconds": True})
            first = await session.step("0.2")
            await asyncio.sleep(0.3)  # the policy's time: not the environment's
            last = await session.step("0.1")
            assert "env_seconds" not in first[4] and last[3]
            assert 0.3 <= last[4]["env_seconds"] < 0.45

    run(main())
    envs = gym.make_vec("openenv/remote", num_envs=3, base_url=url)  # its steps go as one batch
    try:
        envs.reset(options={"max_steps": 1, "env_seconds": True})
        *_, truncated, infos = envs.step(["0.05", "0", "0.1"])
        assert truncated.all() and infos["_env_seconds"].all()
        assert 0.05 <= infos["env_seconds"][0] < 0.1 and infos["env_seconds"][1] < 0.05
        assert 0.1 <= infos["env_seconds"][2] < 0.15
    finally:
        envs.close()
    envs = gym.make_vec("openenv/echo", num_envs=2, base_url=echo_url)  # steps that never wait: the batch's fast path
    try:
        envs.reset(options={"max_steps": 2, "env_seconds": True})
        assert "env_seconds" not in envs.step(["a", "b"])[4]
        infos = envs.step(["a", "b"])[4]
        assert infos["_env_seconds"].all() and (infos["env_seconds"] >= 0).all() and (infos["env_seconds"] < 0.05).all()
        envs.reset(options={"max_steps": 1})  # not asked for: answers the same for the same actions
        assert "env_seconds" not in envs.step(["a", "b"])[4]
        with pytest.raises(errors.BadRequestError, match="env_seconds must be true or false"):
            envs.reset(options={"env_seconds": "yes"})
    finally:
        envs.close()
