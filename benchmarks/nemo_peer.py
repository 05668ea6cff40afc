"""NeMo Gym's own way of serving a resource server, the other side of the NeMo comparison and the tests' oracle.

`NemoOwnServer`: the server in a process of its own, started as `gym env start` starts it: the server's app.py run
by the env's venv python, in the server's folder, with the global config injected (NEMO_GYM_CONFIG_DICT, the
instance named by NEMO_GYM_CONFIG_PATH), so that its `run_webserver` serves it with uvicorn on a loopback port.

`drive`: episodes played against it as NeMo Gym's agents play them: one aiohttp client for all (NeMo's global
client, with a dummy cookie jar), each episode's cookies carried by hand from answer to request; /seed_session
with the row, one POST per tool call (its body read whole), /verify with the row and the episode's Responses object.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import yaml

from benchmarks.episodes import Tally

START_TIMEOUT = 90.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class NemoOwnServer:
    """A resource server in NeMo Gym's own process (its run_webserver), on a loopback port."""

    def __init__(self, python: str, folder: Path, server_config: dict[str, Any], instance: str) -> None:
        import httpx

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = {"head_server": {"host": "127.0.0.1", "port": free_port()}, "dry_run": False,
                  instance: {"resources_servers": {folder.name: {**server_config, "host": "127.0.0.1",
                                                                 "port": self.port}}}}
        environ = {**os.environ, "NEMO_GYM_CONFIG_DICT": yaml.safe_dump(config), "NEMO_GYM_CONFIG_PATH": instance,
                   "PYTHONPATH": str(folder.parent.parent)}
        entrypoint = folder / str(server_config.get("entrypoint") or "app.py")
        self.process = subprocess.Popen([python, str(entrypoint)], env=environ, cwd=folder,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            try:
                httpx.get(f"{self.url}/health", timeout=1)
                return
            except httpx.HTTPError:
                if self.process.poll() is not None:
                    raise RuntimeError(f"NeMo Gym's server exited: {self.process.stderr.read()[-3000:]}") from None
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"NeMo Gym's server did not answer within {START_TIMEOUT:g} s")

    @classmethod
    def of(cls, manifest: Any) -> NemoOwnServer:
        """The server of an imported nemo environment, from its vendored copy, in its venv."""
        from openenv_gym.manifests.venvs import ensure_venv

        module = manifest.entry.split(":")[0].split(".")
        return cls(str(ensure_venv(manifest)), manifest.vendored.joinpath(*module[:2]), manifest.server_config,
                   manifest.instance)

    def stop(self) -> None:
        self.process.kill()
        self.process.wait()

    def __enter__(self) -> NemoOwnServer:
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()


async def drive(url: str, rows: list[dict[str, Any]], calls: list[list[tuple[str, dict]]], sessions: int,
                rounds: int) -> dict[str, float]:
    """`sessions` players at once, each playing `rounds` episodes of its row (player i: rows[i % len(rows)]), an
    episode being its tool calls (calls[i % len(calls)]) then /verify."""
    import aiohttp

    from openenv_gym.protocol.openai_responses import response_object, responses_request

    tally = Tally()
    connector = aiohttp.TCPConnector(limit=0)  # NeMo's global client pools without a bound by default
    async with aiohttp.ClientSession(connector=connector, cookie_jar=aiohttp.DummyCookieJar()) as client:
        async def post(path: str, body: Any, cookies: dict[str, str]) -> tuple[str, dict[str, str]]:
            async with client.post(url + path, json=body, cookies=cookies) as answer:
                text = await answer.text()
                return text, cookies | {name: morsel.value for name, morsel in answer.cookies.items()}

        async def play(player: int) -> None:
            row = rows[player % len(rows)]
            request = responses_request(row["responses_create_params"])
            for episode in range(rounds):
                _, cookies = await post("/seed_session", row, {})
                output = []
                for index, (name, arguments) in enumerate(calls[player % len(calls)]):
                    call_id = f"call_{episode}_{index}"
                    text, cookies = await post(f"/{name}", arguments, cookies)
                    output += [{"type": "function_call", "id": f"fc_{call_id}", "call_id": call_id, "name": name,
                                "arguments": _json(arguments), "status": "completed"},
                               {"type": "function_call_output", "call_id": call_id, "output": text}]
                    tally.steps += 1
                response = response_object({"content": "Done.", "tool_calls": []}, "policy", f"resp_{player}",
                                           request) | {"output": output}
                text, _ = await post("/verify", row | {"response": response}, cookies)
                tally.errors += '"reward"' not in text

        await asyncio.gather(*(play(player) for player in range(sessions)))
    return tally.figures()


def _json(value: Any) -> str:
    import orjson

    return orjson.dumps(value).decode()
