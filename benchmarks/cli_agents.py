"""What openenv_gym adds to an episode of a CLI agent (Codex CLI, Claude Code) over the CLI's own cost.

Each agent plays `episodes` one-turn episodes (its task, then a final text answer) two ways, alternating:
- served: the shipped environment (servers/codex_agent, servers/claude_agent) on a local server, one worker, its
  CLI run in a sandbox per episode; an episode is reset (the CLI starts and asks the model) and a step (the answer;
  the CLI exits and the episode ends);
- alone: the same CLI with the same flags run directly, unsandboxed, against a stub model server in this process
  that gives the same answer in the CLI's API (our own protocol modules render it).
The medians' difference is what we add per episode (sandbox, fork, endpoint, session, client round trips).

    python -m benchmarks.cli_agents [--episodes 10]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import orjson

from benchmarks.measures import save_result
from openenv_gym import connect
from openenv_gym.client.local import LocalServer
from openenv_gym.manifests import load_manifest
from openenv_gym.manifests.venvs import ensure_venv, npm_commands
from openenv_gym.programs.environ import expand
from openenv_gym.protocol.dialects import match

ROOT = Path(__file__).resolve().parent.parent
AGENTS = ("codex", "claude")
ANSWER = {"content": "Done.", "tool_calls": []}


class Stub(BaseHTTPRequestHandler):
    """A model server that answers every turn with ANSWER, in the API of its route."""

    def do_HEAD(self) -> None:
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def do_POST(self) -> None:
        body = orjson.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
        call = match("POST", self.path.partition("?")[0])
        if call is None or call.kind != "turn":
            data, kind = orjson.dumps(call.aside(body, "policy") if call else {}), "application/json"
        else:
            kind, data = call.answer(ANSWER, "policy", "resp_stub", call.read(body))
        self.send_response(200)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *_: object) -> None:
        pass


def alone(agent: str, base: str) -> float:
    """Seconds of one run of the CLI, unsandboxed, against the stub at `base`, from a new empty folder (its home and
    working directory), as each episode's sandbox starts."""
    with tempfile.TemporaryDirectory() as scratch:
        return _run_alone(agent, base, Path(scratch))


def _run_alone(agent: str, base: str, scratch: Path) -> float:
    manifest = load_manifest(ROOT / "servers" / f"{agent}_agent")
    commands = npm_commands(ensure_venv(manifest).parent.parent)
    environ = {**os.environ, "PATH": f"{commands}:{os.environ['PATH']}", "HOME": str(scratch), "PWD": str(scratch),
               "OPENAI_BASE_URL": f"{base}/v1", "OPENAI_API_KEY": "stub", "OPENAI_MODEL": "policy",
               "ANTHROPIC_BASE_URL": base, "ANTHROPIC_API_KEY": "stub", "ANTHROPIC_MODEL": "policy"}
    environ.update({name: expand(value, environ, name) for name, value in manifest.environ.items()})
    prompt = orjson.loads((manifest.folder / "tasks.jsonl").read_text().splitlines()[0])["prompt"]
    command = [expand(part, environ, "command") for part in manifest.command or []] + [prompt]
    started = time.perf_counter()
    subprocess.run(command, cwd=scratch, env=environ, check=True, capture_output=True, timeout=120)
    return time.perf_counter() - started


async def served(url: str) -> float:
    """Seconds of one episode through the server: reset, then the answer that ends it."""
    async with connect(url) as connection:
        session = connection.session()
        started = time.perf_counter()
        await session.reset(options={"index": 0})
        *_, terminated, truncated, info = await session.step(ANSWER["content"])
        elapsed = time.perf_counter() - started
        await session.close()
    assert terminated and not truncated and info["exit_code"] == 0, info
    return elapsed


def measure(agent: str, episodes: int) -> dict[str, float]:
    stub = ThreadingHTTPServer(("127.0.0.1", 0), Stub)
    threading.Thread(target=stub.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{stub.server_port}"
    times: dict[str, list[float]] = {"alone": [], "served": []}
    try:
        with LocalServer(str(ROOT / "servers" / f"{agent}_agent"), 1, 10) as server:
            alone(agent, base)  # (warm: the CLI's files read once, the server's fork server up)
            asyncio.run(served(server.url))
            for _ in range(episodes):
                times["alone"].append(alone(agent, base))
                times["served"].append(asyncio.run(served(server.url)))
    finally:
        stub.shutdown()
    alone_ms, served_ms = (statistics.median(times[side]) * 1000 for side in ("alone", "served"))
    return {"alone_p50_ms": round(alone_ms, 1), "served_p50_ms": round(served_ms, 1),
            "added_ms": round(served_ms - alone_ms, 1)}


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=10)
    episodes = parser.parse_args(argv).episodes
    results = {}
    for agent in AGENTS:
        results[agent] = result = measure(agent, episodes)
        print(f"{agent}: alone {result['alone_p50_ms']} ms an episode (p50), served {result['served_p50_ms']} ms: "
              f"{result['added_ms']:+} ms")
    save_result("cli_agents", results)
    return results


if __name__ == "__main__":
    main()
