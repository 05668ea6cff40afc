"""Where a NeMo Gym tool call's time goes, inside one worker: our session's step, against the same call made to the
server's app through httpx (as the session makes it, without our layer) and through its raw ASGI interface (without
httpx either). What is left under the last is NeMo's own app stack, which its own server process runs too.

    python -m benchmarks.nemo_layers [--sessions 64] [--rounds 30]

Two servers as nemo-gym 0.7.0 ships them: workplace_assistant (a directory lookup: pandas over the session's tables)
and example_session_state_mgmt (a counter read). Each is imported, and measured in its own venv (this module again,
with --inside), its sessions reset first; the three ways take turns, twice.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import time
from typing import Any

from benchmarks.episodes import ROOT
from benchmarks.measures import save_result

CALLS = {"workplace_assistant": ("company_directory_find_email_address", {"name": "Raj"}),
         "example_session_state_mgmt": ("get_counter_value", {})}


async def raw_call(app: Any, path: str, body: dict, cookie: bytes) -> None:
    """One POST to the ASGI app itself, its cookie given by hand."""
    data = json.dumps(body).encode()
    headers = [(b"host", b"nemo"), (b"content-type", b"application/json"), (b"content-length", str(len(data)).encode()),
               (b"cookie", cookie)]
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "", "headers": headers,
             "client": ("127.0.0.1", 1), "server": ("nemo", 80)}
    messages = [{"type": "http.request", "body": data, "more_body": False}]

    async def receive() -> dict:
        return messages.pop() if messages else await asyncio.Event().wait()

    async def send(message: dict) -> None:
        pass

    await app(scope, receive, send)


async def measure(folder: str, name: str, arguments: dict, sessions: int, rounds: int) -> dict[str, list[float]]:
    from openenv_gym.adapters.nemo.session import NemoFactory
    from openenv_gym.manifests import load_manifest

    factory = NemoFactory(load_manifest(folder))
    played = [factory() for _ in range(sessions)]
    for index, session in enumerate(played):
        await session.reset(options={"task": index % 5})
    cookies = ["; ".join(f"{k}={v}" for k, v in session.client.cookies.items()).encode() for session in played]
    ways = {"session_step": lambda i: played[i].step({"name": name, "arguments": arguments}),
            "httpx_to_app": lambda i: played[i].client.post(f"/{name}", json=arguments),
            "raw_asgi": lambda i: raw_call(factory.server.app, f"/{name}", arguments, cookies[i])}
    rates: dict[str, list[float]] = {way: [] for way in ways}
    for _ in range(2):
        for way, call in ways.items():
            started = time.perf_counter()
            for _ in range(rounds):
                await asyncio.gather(*(call(i) for i in range(sessions)))
            rates[way].append(sessions * rounds / (time.perf_counter() - started))
    return rates


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--inside", nargs=2, metavar=("FOLDER", "SERVER"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.inside:
        folder, server = args.inside
        name, arguments = CALLS[server]
        print(json.dumps(asyncio.run(measure(folder, name, arguments, args.sessions, args.rounds))))
        return {}
    from benchmarks.nemo_compare import installed_servers
    from openenv_gym.importers import import_environment
    from openenv_gym.manifests import load_manifest
    from openenv_gym.manifests.venvs import ensure_venv

    out = ROOT / "benchmarks" / "results" / "nemo_imports"
    out.mkdir(parents=True, exist_ok=True)
    servers = installed_servers(out)
    result: dict[str, Any] = {}
    for server in CALLS:
        folder = import_environment(servers / server, f"bench-{server}", out, force=True, check=False)[0].folder
        python = str(ensure_venv(load_manifest(folder)))
        environment = dict(os.environ, PYTHONPATH=str(ROOT))
        measured = subprocess.run([python, "-m", "benchmarks.nemo_layers", "--sessions", str(args.sessions), "--rounds",
                                   str(args.rounds), "--inside", str(folder), server], cwd=ROOT, env=environment,
                                  capture_output=True, text=True, check=True)
        rates = json.loads(measured.stdout.strip().splitlines()[-1])
        result[server] = {way: max(values) for way, values in rates.items()}
        print(f"{server} ({CALLS[server][0]}), {args.sessions} sessions, calls/s (best of 2): " +
              ", ".join(f"{way} {rate:,.0f}" for way, rate in result[server].items()))
    save_result("nemo_layers", result)
    return result


if __name__ == "__main__":
    main()
