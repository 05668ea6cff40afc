"""OpenEnv's /ws protocol served over the session core (OpenEnv's own clients come in their venv's tests)."""

import asyncio
import socket
import time
from urllib.parse import urlsplit

import httpx
import orjson
import pytest
from conftest import health, http_url, run, wait_until
from websockets.asyncio.client import connect as ws_connect


class OpenEnvSocket:
    """A bare socket speaking OpenEnv's messages: no request ids, one request and one answer in turn."""

    def __init__(self, ws):
        self.ws = ws

    async def ask(self, message: object) -> dict:
        await self.ws.send(message if isinstance(message, str) else orjson.dumps(message).decode())
        return orjson.loads(await asyncio.wait_for(self.ws.recv(), 10))


def openenv_url(url: str) -> str:
    return url + "/ws"


def test_an_episode_over_openenv_messages(guess_url):
    async def main():
        async with ws_connect(openenv_url(guess_url)) as ws:
            env = OpenEnvSocket(ws)
            reset = await env.ask({"type": "reset", "data": {"seed": 0, "episode_id": "ep-1"}})
            assert reset["type"] == "observation" and reset["data"]["reward"] is None and not reset["data"]["done"]
            assert "I am thinking of an integer" in reset["data"]["observation"]["text"]
            tools = await env.ask({"type": "step", "data": {"type": "list_tools"}})
            assert [t["name"] for t in tools["data"]["observation"]["tools"]] == ["divisible_by", "give_up", "guess"]
            low, high, steps = 1, 100, 0
            while steps < 20:
                steps += 1
                guess = (low + high) // 2
                answer = await env.ask({"type": "step", "data": {"type": "call_tool", "tool_name": "guess",
                                                                 "arguments": {"number": guess}}})
                data = answer["data"]
                if data["done"]:
                    assert data["observation"]["terminated"] and data["reward"] > 0
                    break
                text = data["observation"]["text"]
                low, high = (guess + 1, high) if "higher" in text else (low, guess - 1)
            state = await env.ask({"type": "state"})
            assert state["type"] == "state"
            assert state["data"] | {"known_low": 0, "known_high": 0} == {  # the env's extras sit next to them
                "episode_id": "ep-1", "step_count": steps, "running": False, "max_steps": 20, "guesses": steps,
                "known_low": 0, "known_high": 0}
            text_step = await env.ask({"type": "step", "data": {"message": "guess(number=5)"}})
            assert text_step["type"] == "error" and text_step["data"]["code"] == "EXECUTION_ERROR"  # episode over
            await env.ask({"type": "reset", "data": {"seed": 1}})
            call = {"name": "divisible_by", "arguments": {"divisor": 2}}
            mcp = await env.ask({"type": "mcp", "data": {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                                                         "params": call}})
            assert mcp["type"] == "mcp" and mcp["data"]["id"] == 7 and not mcp["data"]["result"]["isError"]
            assert "divisible by 2" in mcp["data"]["result"]["content"][0]["text"]
            listed = await env.ask({"type": "mcp", "data": {"jsonrpc": "2.0", "id": 8, "method": "tools/list"}})
            assert listed["data"]["result"]["tools"][0]["inputSchema"]["type"] == "object"

    run(main())


@pytest.mark.parametrize("message, code", [
    ("{not json", "INVALID_JSON"),
    ({"type": "dance"}, "UNKNOWN_TYPE"),
    ([1, 2], "VALIDATION_ERROR"),
    ({"type": "reset", "data": {"seed": -3}}, "VALIDATION_ERROR"),
    ({"type": "step"}, "VALIDATION_ERROR"),
    ({"type": "step", "data": {"type": "call_tool", "tool_name": 5}}, "VALIDATION_ERROR"),
    ({"type": "step", "data": {"message": "hi"}}, "EXECUTION_ERROR"),  # before any reset
])
def test_bad_messages_get_openenv_codes_and_the_socket_goes_on(echo_url, message, code):
    async def main():
        async with ws_connect(openenv_url(echo_url)) as ws:
            env = OpenEnvSocket(ws)
            answer = await env.ask(message)
            assert answer["type"] == "error" and answer["data"]["code"] == code and answer["data"]["message"]
            await env.ask({"type": "reset", "data": {"max_steps": 5}})
            step = await env.ask({"type": "step", "data": {"message": "still here"}})
            assert step["data"]["observation"]["text"] == "still here" and step["data"]["observation"]["info"]

    run(main())


def test_each_socket_is_its_own_session_and_close_ends_it(echo_url):
    async def main():
        before = health(echo_url)["sessions"]
        async with ws_connect(openenv_url(echo_url)) as a, ws_connect(openenv_url(echo_url)) as b:
            first, second = OpenEnvSocket(a), OpenEnvSocket(b)
            await asyncio.gather(first.ask({"type": "reset"}), second.ask({"type": "reset"}))
            await first.ask({"type": "step", "data": {"message": "one"}})
            states = await asyncio.gather(first.ask({"type": "state"}), second.ask({"type": "state"}))
            assert [s["data"]["step_count"] for s in states] == [1, 0]
            assert health(echo_url)["sessions"] == before + 2
            await a.send(orjson.dumps({"type": "close"}).decode())
            await asyncio.wait_for(a.wait_closed(), 5)
            assert a.close_code == 1000
            assert wait_until(lambda: health(echo_url)["sessions"] == before + 1)
        assert wait_until(lambda: health(echo_url)["sessions"] == before)

    run(main())


def test_a_full_server_says_capacity_reached(start_server):
    url = start_server("echo", max_sessions=1)

    async def main():
        async with ws_connect(openenv_url(url)) as first:
            await OpenEnvSocket(first).ask({"type": "reset"})
            async with ws_connect(openenv_url(url)) as second:
                refused = orjson.loads(await asyncio.wait_for(second.recv(), 5))
                assert refused["type"] == "error" and refused["data"]["code"] == "CAPACITY_REACHED"
                await asyncio.wait_for(second.wait_closed(), 5)
                assert second.close_code == 1000

    run(main())


def test_openenv_http_routes(echo_url):
    base = http_url(echo_url)
    assert httpx.get(base + "/health").json() == {"status": "healthy"}
    assert httpx.get(base + "/metadata").json()["name"] == "echo"
    schema = httpx.get(base + "/schema").json()
    assert schema["state"]["properties"]["step_count"]["minimum"] == 0


def test_mcp_over_http_post(guess_url):
    mcp = http_url(guess_url) + "/mcp"

    def rpc(method, rid=1, **params):
        return httpx.post(mcp, json={"jsonrpc": "2.0", "id": rid, "method": method, "params": params}).json()

    init = rpc("initialize", protocolVersion="2025-06-18", capabilities={}, clientInfo={"name": "t", "version": "0"})
    assert init["result"]["capabilities"]["tools"] == {"listChanged": False}
    assert httpx.post(mcp, json={"jsonrpc": "2.0", "method": "notifications/initialized"}).status_code == 202
    assert [t["name"] for t in rpc("tools/list")["result"]["tools"]] == ["divisible_by", "give_up", "guess"]
    session = rpc("openenv/session/create")["result"]["session_id"]
    first = rpc("tools/call", name="divisible_by", arguments={"divisor": 2}, session_id=session)["result"]
    assert not first["isError"] and "divisible by 2" in first["content"][0]["text"]
    bad = rpc("tools/call", name="guess", arguments={"number": "many"}, session_id=session)["result"]
    assert bad["isError"] and "bad arguments for guess" in bad["content"][0]["text"]  # the session goes on
    assert rpc("openenv/session/close", session_id=session)["result"] == {"closed": True}
    assert "no session" in rpc("tools/call", name="give_up", session_id=session)["error"]["message"]
    assert rpc("no/such")["error"]["code"] == -32601
    assert httpx.post(mcp, content=b"{nope").json()["error"]["code"] == -32700
    assert httpx.post(http_url(guess_url) + "/other", json={}).status_code == 404
    assert httpx.get(http_url(guess_url) + "/healthz").status_code == 200  # GETs still go to their routes


def test_mcp_over_http_needs_the_token_when_one_is_set(start_server):
    mcp = http_url(start_server("echo", "--token", "s3cret")) + "/mcp"
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    refused = httpx.post(mcp, json=listing)
    assert refused.status_code == 401 and refused.json()["error"]["code"] == "unauthorized"
    assert httpx.post(mcp, json=listing, headers={"Authorization": "bearer s3cret"}).json()["result"] == {"tools": []}


def test_a_socket_can_work_on_a_post_mcp_session(guess_url):
    """MCPToolClient's way: a session made over POST /mcp, reset over /ws?session_id=..., tools over POST."""
    mcp = http_url(guess_url) + "/mcp"
    session = httpx.post(mcp, json={"jsonrpc": "2.0", "id": 1, "method": "openenv/session/create"}).json()

    async def main():
        session_id = session["result"]["session_id"]
        async with ws_connect(openenv_url(guess_url) + f"?session_id={session_id}") as ws:
            reset = await OpenEnvSocket(ws).ask({"type": "reset", "data": {"seed": 3}})
            assert "thinking of an integer" in reset["data"]["observation"]["text"]
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "divisible_by", "arguments": {"divisor": 3}, "session_id": session_id}}
        answer = httpx.post(mcp, json=call).json()["result"]
        assert not answer["isError"] and "divisible by 3" in answer["content"][0]["text"]
        async with ws_connect(openenv_url(guess_url) + f"?session_id={session_id}") as ws:  # the same session
            state = await OpenEnvSocket(ws).ask({"type": "state"})
            assert state["data"]["step_count"] == 1
        async with ws_connect(openenv_url(guess_url) + "?session_id=nope") as ws:
            refused = orjson.loads(await asyncio.wait_for(ws.recv(), 5))
            assert refused["data"]["code"] == "SESSION_ERROR"
        close = {"jsonrpc": "2.0", "id": 3, "method": "openenv/session/close", "params": {"session_id": session_id}}
        assert httpx.post(mcp, json=close).json()["result"] == {"closed": True}

    before = health(guess_url)["sessions"]
    run(main())
    assert wait_until(lambda: health(guess_url)["sessions"] == before)  # closing the POST session ended it


def test_a_post_whose_body_comes_later_is_answered(echo_url):
    """The request head and its body in separate TCP segments (once lost under uvloop)."""
    body = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    host, port = urlsplit(echo_url).hostname, urlsplit(echo_url).port
    with socket.create_connection((host, port), timeout=30) as sock:
        sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n" % len(body))
        time.sleep(0.2)
        sock.sendall(body)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 200") and answer.endswith(b'{"tools":[]}}')
