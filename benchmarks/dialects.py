"""The model endpoint's APIs against each other: what a turn costs in OpenAI Responses, Anthropic Messages and
Gemini over chat completions, plain and streamed, and whether a crowd of programs in each API is served whole.

1. Turns: for each API and each of plain and streamed, `sessions` concurrent sessions of an agent env whose
   program (a function, forked warm) asks the model `turns` times in that API over one kept-alive HTTP connection
   (http.client and JSON only, the same work in every API: the last two messages sent, the body read), one server
   worker each. A turn's cost is the CPU time of the server side (the server, its fork server, the programs) per
   turn; each API's is given over chat completions' of the same mode, measured in the same run.
2. Sessions at once: `programs` sessions in each API reset together (a program each, waiting on its first
   request), then stepped to their end; errors counted.

    python -m benchmarks.dialects [--sessions 256] [--turns 50] [--programs 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import textwrap
from pathlib import Path

from benchmarks.agent_sessions import many_programs, turns_of
from benchmarks.measures import save_result
from openenv_gym.client.local import LocalServer

DIALECTS = ("chat", "responses", "anthropic", "gemini")

PROGRAM = '''
    import http.client, json, urllib.parse

    def ask(dialect, stream, path, model, reply):
        """(path, body) of a turn in `dialect`: the assistant's last reply and the user's next message."""
        if dialect == "chat":
            return path + "/chat/completions", {"model": model, "stream": stream, "messages": [
                {"role": "assistant", "content": reply}, {"role": "user", "content": "again"}]}
        if dialect == "responses":
            return path + "/responses", {"model": model, "stream": stream, "input": [
                {"role": "assistant", "content": reply}, {"role": "user", "content": "again"}]}
        if dialect == "anthropic":
            return path + "/messages", {"model": model, "max_tokens": 64, "stream": stream, "messages": [
                {"role": "assistant", "content": reply}, {"role": "user", "content": "again"}]}
        method = "streamGenerateContent?alt=sse" if stream else "generateContent"
        return path.removesuffix("/v1") + f"/v1beta/models/{model}:{method}", {"contents": [
            {"role": "model", "parts": [{"text": reply}]}, {"role": "user", "parts": [{"text": "again"}]}]}

    def run(prompt, base_url, api_key, model, turns=TURNS, dialect="DIALECT", stream=STREAM):
        address = urllib.parse.urlsplit(base_url)
        connection = http.client.HTTPConnection(address.hostname, address.port)
        reply = prompt
        for _ in range(turns):
            path, body = ask(dialect, stream, address.path, model, reply)
            connection.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
            answer = connection.getresponse()
            assert answer.status == 200, answer.read()
            answer.read()
            reply = "ok"
        return {"reward": 1.0}
'''


def dialect_env(folder: Path, dialect: str, stream: bool, turns: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    program = textwrap.dedent(PROGRAM).replace("TURNS", str(turns)).replace("DIALECT", dialect)
    (folder / "agent.py").write_text(program.replace("STREAM", str(stream)))
    (folder / "tasks.jsonl").write_text('{"prompt": "go"}\n')
    (folder / "openenv.toml").write_text(f'name = "{folder.name}"\nkind = "agent"\nentry = "agent:run"\n'
                                         'tasks = "tasks.jsonl"\npreload = ["http.client", "json"]\n')
    return folder


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=256)
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--programs", type=int, default=1000)
    args = parser.parse_args(argv)
    turns: dict[str, dict] = {}
    crowds: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as scratch:
        for stream in (False, True):
            for dialect in DIALECTS:
                env = dialect_env(Path(scratch) / f"{dialect}_{stream}", dialect, stream, args.turns)
                turns[f"{dialect}{' streamed' if stream else ''}"] = turns_of(str(env), args.sessions, args.turns)
        for dialect in DIALECTS:
            env = dialect_env(Path(scratch) / f"{dialect}_crowd", dialect, False, 2)
            with LocalServer(str(env), 1, args.programs + 10) as server:
                crowds[dialect] = asyncio.run(many_programs(server, args.programs))
    print(f"{args.sessions} sessions x {args.turns} turns, one worker each; CPU a turn (over chat completions'):")
    for label, row in turns.items():
        chat = turns["chat streamed" if label.endswith("streamed") else "chat"]
        row["over_chat"] = row["cpu_ms_per_turn"] / chat["cpu_ms_per_turn"]
        print(f"  {label + ':':<22}{row['cpu_ms_per_turn']:.3f} ms ({row['over_chat']:.2f}x), "
              f"{row['turns_per_s']:,.0f} turns/s, {row['errors']} errors")
    for dialect, crowd in crowds.items():
        print(f"{crowd['programs']} {dialect} sessions at once: {crowd['errors']} errors, reset in "
              f"{crowd['reset_seconds']:.1f} s, {crowd['memory_per_session_mib']:.1f} MiB per session")
    result = {"sessions": args.sessions, "turns": args.turns, "per_turn": turns, "crowds": crowds}
    save_result("dialects", result)
    return result


if __name__ == "__main__":
    main()
