"""NeMo Gym's own way of serving a resource server, the other side of the NeMo comparison and the tests' oracle.

`NemoOwnServer`: the server in a process of its own, started as `gym env start` starts it: the server's app.py run
by the env's venv python, in the server's folder, with the global config injected (NEMO_GYM_CONFIG_DICT, the
instance named by NEMO_GYM_CONFIG_PATH), so that its `run_webserver` serves it with uvicorn on a loopback port.

`drive`: episodes played against it as NeMo Gym's agents play them: one aiohttp client for all (NeMo's global
client, with a dummy cookie jar), each episode's cookies carried by hand from answer to request; /seed_session
with the row, one POST per tool call (its body read whole), /verify with the row and the episode's Responses object.

`own_episode`, `NemoSide`: one episode's reward in NeMo's own processes, for the stored-rollout replay (nemo_replay.py):
one process hashing strings as our sweep's servers do, played until two of its rewards differ; others, with other hash
seeds and random states, to see whether a server's results depend on the process.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from benchmarks.episodes import Tally

START_TIMEOUT = 90.0
START_ATTEMPTS = 3
INPUT = "responses_create_params"
# our server and NeMo's own process hash strings alike (a server may draw from hash(str(seed)): grl_tetris), so
# that a difference between them is ours; the sweep starts our server with it
HASH_VARIABLE, HASH_SEED = "PYTHONHASHSEED", "0"
SAME_HASHES = {HASH_VARIABLE: HASH_SEED}
OTHER_PROCESSES = 3  # of NeMo's, asked where ours differs from the one that hashes as ours
OWN_TIMEOUT = 120.0  # seconds a request of the replay to NeMo's own process may take
OWN_RUNS = 8  # at most, NeMo's own process plays an episode whose reward differs (does it differ itself?)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class NemoOwnServer:
    """A resource server in NeMo Gym's own process (its run_webserver), on a loopback port."""

    def __init__(self, python: str, folder: Path, server_config: dict[str, Any], instance: str,
                 environ: dict[str, str] | None = None) -> None:
        for attempt in range(START_ATTEMPTS):  # (a free port may be taken before it binds: another, then)
            self.port = free_port()
            self.url = f"http://127.0.0.1:{self.port}"
            config = {"head_server": {"host": "127.0.0.1", "port": free_port()}, "dry_run": False,
                      instance: {"resources_servers": {folder.name: {**server_config, "host": "127.0.0.1",
                                                                     "port": self.port}}}}
            self._start(python, folder, str(server_config.get("entrypoint") or "app.py"), {
                **os.environ, "NEMO_GYM_CONFIG_DICT": yaml.safe_dump(config), "NEMO_GYM_CONFIG_PATH": instance,
                "PYTHONPATH": str(folder.parent.parent), **(environ or {})})
            said = self._wait()
            if said is None:
                return
            if "address already in use" not in said or attempt == START_ATTEMPTS - 1:
                raise RuntimeError(f"NeMo Gym's server did not start: {said}")

    def _start(self, python: str, folder: Path, entrypoint: str, environ: dict[str, str]) -> None:
        # (a process group of its own: what it starts, Ray's processes say, ends with it; what it logs goes to a
        # file: a pipe nobody reads fills, and its next log line blocks it for good)
        self.log = tempfile.TemporaryFile("w+")  # noqa: SIM115 (closed by stop)
        self.process = subprocess.Popen([python, str(folder / entrypoint)], env=environ, cwd=folder,
                                        start_new_session=True, stdout=subprocess.DEVNULL, stderr=self.log, text=True)

    def _wait(self) -> str | None:
        """None once it answers; else why not (the end of its log), the process stopped."""
        import httpx

        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            try:
                httpx.get(f"{self.url}/health", timeout=1)
                return None
            except httpx.HTTPError:
                if self.process.poll() is not None:
                    break
                time.sleep(0.2)
        self.log.seek(0)
        said = self.log.read()[-3000:] if self.process.poll() is not None else f"no answer within {START_TIMEOUT:g} s"
        self.stop()
        return said

    @classmethod
    def of(cls, manifest: Any, environ: dict[str, str] | None = None) -> NemoOwnServer:
        """The server of an imported nemo environment, from its vendored copy, in its venv (with `environ` added to
        the process's environment)."""
        from openenv_gym.manifests.venvs import ensure_venv

        module = manifest.entry.split(":")[0].split(".")
        return cls(str(ensure_venv(manifest)), manifest.vendored.joinpath(*module[:2]), manifest.server_config,
                   manifest.instance, environ)

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        self.log.close()

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


# -- one episode, played in NeMo's own processes ------------------------------------------------------------

def own_episode(url: str, manifest: Any, row: dict, actions: list[dict], response: dict | None) \
        -> tuple[float, bool]:
    """(the reward, whether it ended) NeMo Gym's own server process gives the same episode, played as its agents play
    it (one cookie jar): "resources", the episode's tool calls (none where its agent simulates them) then /verify of
    the Responses object ours was verified with; "gymnasium", /reset then a /step per action."""
    import httpx

    from openenv_gym.protocol.openai_responses import responses_request

    with httpx.Client(base_url=url, timeout=OWN_TIMEOUT) as client:
        if manifest.protocol == "resources":
            if response is None:
                raise ValueError("no Responses object to verify")
            if not manifest.simulated_tools:
                client.post("/seed_session", json=row).raise_for_status()
                for item in response["output"]:
                    if item.get("type") == "function_call":
                        client.post(f"/{item['name']}", json=json.loads(item["arguments"]))
            answer = client.post("/verify", json=row | {"response": response})
            answer.raise_for_status()
            return float(answer.json()["reward"]), True
        request = responses_request(row[INPUT])
        reset = client.post("/reset", json=row)
        reset.raise_for_status()
        closes = (reset.json().get("info") or {}).get("supports_explicit_close") is True  # (as gymnasium_agent)
        try:
            return _steps(client, row, actions, request)
        finally:
            if closes:
                client.post("/close", json={})


def _steps(client: Any, row: dict, actions: list[dict], request: Any) -> tuple[float, bool]:
    """A Gymnasium-protocol episode's steps, one a turn: (their rewards' sum, whether it ended)."""
    from openenv_gym.protocol.openai_responses import output_items, response_object

    total, ended = 0.0, False
    for turn, action in enumerate(actions, 1):
        message = _message(action, turn)
        step = response_object(message, "policy", f"resp_{turn}", request) | {
            "output": output_items(message, f"own_{turn}")}
        answer = client.post("/step", json=row | {"response": step}).json()
        total += float(answer.get("reward") or 0.0)
        ended = bool(answer.get("terminated") or answer.get("truncated"))
        if ended:
            break
    return total, ended


def replies_response(row: dict, actions: list) -> dict:
    """The Responses object of an episode's replies (text, or tool calls {"name", "arguments"}), as an agent sends
    it to /verify: every reply's output items in turn."""
    from openenv_gym.protocol.openai_responses import output_items, response_object, responses_request

    messages = [_message(action, turn) for turn, action in enumerate(actions, 1)]
    output = [item for turn, message in enumerate(messages, 1) for item in output_items(message, f"own_{turn}")]
    return response_object(messages[-1], "policy", "resp_replies", responses_request(row[INPUT])) | {"output": output}


def _message(action: Any, turn: int) -> dict:
    """The assistant message a reply is, as our sessions make it; ValueError if it is none."""
    from openenv_gym.episode.assistant import assistant_message

    message = assistant_message(action, set(), turn)
    if isinstance(message, str):
        raise ValueError(message)
    return message


def own_reward(url: str, manifest: Any, row: dict, actions: list[dict], response: dict | None) -> float:
    return own_episode(url, manifest, row, actions, response)[0]


def own_runs(url: str, manifest: Any, row: dict, actions: list[dict], response: dict) -> tuple[float | None, ...]:
    """NeMo's own rewards for one episode, played until two differ (its results differ between runs: random deals),
    at most OWN_RUNS times."""
    rewards: list[float | None] = []
    while len(rewards) < OWN_RUNS and len({reward for reward in rewards if reward is not None}) < 2:
        rewards.append(or_none(own_reward, url, manifest, row, actions, response))
        if rewards[-1] is None:  # (it cannot play the episode: no use asking again)
            break
    return tuple(rewards)


def or_none(function: Any, *args: Any) -> Any:
    try:
        return function(*args)
    except Exception:  # (NeMo's own process refused the episode: it gives no reward for it)
        return None


class NemoSide:
    """NeMo Gym's own server processes, started as a replay needs them: one hashing strings as ours does, and others
    (other hash seeds, other random states) to see whether the server's results depend on the process."""

    def __init__(self, manifest: Any) -> None:
        self.manifest, self.own, self.others = manifest, None, []

    def runs(self, row: dict, actions: list[dict], response: dict) -> tuple[float | None, ...]:
        self.own = self.own or NemoOwnServer.of(self.manifest, SAME_HASHES)
        return own_runs(self.own.url, self.manifest, row, actions, response)

    def elsewhere(self, row: dict, actions: list[dict], response: dict) -> list[float | None]:
        """The episode's reward in each of OTHER_PROCESSES other processes of NeMo's."""
        self.others = self.others or [NemoOwnServer.of(self.manifest, {HASH_VARIABLE: str(seed)})
                                      for seed in range(1, OTHER_PROCESSES + 1)]
        return [or_none(own_reward, other.url, self.manifest, row, actions, response)
                for other in self.others]

    def episode(self, row: dict, actions: list[dict], response: dict) -> tuple[float, bool]:
        """(the reward, whether it ended) of the episode in the process that hashes as ours."""
        return own_episode(self.own.url, self.manifest, row, actions, response)

    def close(self) -> None:
        for process in [self.own, *self.others]:
            if process is not None:
                process.stop()
