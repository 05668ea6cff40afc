"""Every resource server of a NeMo Gym checkout (or of an unpacked nemo-gym wheel) imported and played one by one as
a new user would: how many import, how many need what is not reachable from here, how many play, and why not.

    python -m benchmarks.nemo_examples CHECKOUT [--server S ...] [--rows 5] [--only-judged] [--replay] [--out F.json]

Each server is imported alone (into a temporary folder, registered nowhere), its venv built with a time bound
(servers with the same requirements share one), loaded as the import loads it, then served by one `openenv-gym
serve` subprocess. Played: a reset on each of the first rows of its first split, then a reply without a tool call
(a "resources" server verifies it); with --replay, its stored rollouts (data/example_rollouts.jsonl), turn by turn,
each to its stored reward (nemo_replay.py: NeMo's own process says whose a difference is), where they replay.
Classes: played, failed (at the venv build, the load, the start, a reset, a step or a replay: the error's gist),
refused at import, needs unreachable (the manifest's `needs`, its model servers where no judge endpoint is given,
dependencies fetched from unreachable hosts, data its package does not ship: NeMo's own process fails alike).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks.measures import save_result
from benchmarks.nemo_peer import SAME_HASHES
from benchmarks.nemo_replay import ROLLOUTS, plan, replay, replayable
from openenv_gym.importers import ImportFailedError, import_environment
from openenv_gym.importers.nemo import PACKAGE
from openenv_gym.manifests import load_manifest
from openenv_gym.manifests.judge_endpoint import JUDGE_MODEL, JUDGE_URL, JudgeEndpoint
from openenv_gym.manifests.venvs import venv_ready, venvs_dir

ACTION = "I cannot do this."  # a reply without a tool call: a "resources" server's episode ends, and is verified
CLASSES = ("played", "failed", "refused at import", "needs unreachable")
BUILD = ("from openenv_gym.manifests import load_manifest; from openenv_gym.manifests.venvs import ensure_venv; "
         "import sys; ensure_venv(load_manifest(sys.argv[1]))")
EXCEPTION = re.compile(r"\b(?:[a-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt)\b(?::.*)?$"  # a raise
                       r"|^openenv-gym: (?!the server of )\S+: .*"  # a load error of ours
                       r"|^\S+: error: .*")  # an argparse exit
WRAPPERS = ("ServerStartError:", "ConnectionLostError:")  # an error that says only that the server died: see its log


def server_folders(checkout: Path, wanted: list[str]) -> list[Path]:
    root = checkout / PACKAGE if (checkout / PACKAGE).is_dir() else checkout
    folders = sorted(child for child in root.iterdir() if child.is_dir() and not child.name.startswith(("_", ".")))
    if wanted:
        missing = sorted(set(wanted) - {folder.name for folder in folders})
        if missing:
            raise SystemExit(f"no such resource server in {root}: {', '.join(missing)}")
        folders = [folder for folder in folders if folder.name in wanted]
    return folders


def first_line(text: str, limit: int = 300) -> str:
    return (text.strip().splitlines() or [""])[0][:limit]


def gist(error: str, log: list[str]) -> str:
    """What an error comes down to: the last exception the server's log or the error's own text names (a 500's
    traceback, a start's end of output), with the fields of a validation error."""
    lines = [line.rstrip() for line in [*error.splitlines(), *log] if line.strip()]
    found = [(index, match.group(0)) for index, line in enumerate(lines)
             if (match := EXCEPTION.search(line)) and not match.group(0).startswith(WRAPPERS)]
    if len(found) > 1 and re.fullmatch(r"SystemExit: \d+", found[-1][1]):
        found.pop()  # what made it exit was said before
    if not found:
        return first_line(error)
    index, text = found[-1]
    details = []
    if "validation error" in text:
        for line in lines[index + 1:index + 7]:
            if "errors.pydantic.dev" in line or line.startswith(("openenv-gym", "Run ")):
                continue
            details.append(re.sub(r"\s*\[type=(\w+).*", r" [\1]", line.strip()))
    return " / ".join([text, *details[:4]])[:400]


def build_venv(folder: Path, timeout: float) -> str | None:
    """Build the env's venv in a child process of ours (killed, with what it started, past `timeout`); why it failed,
    or None."""
    manifest = load_manifest(folder)
    if venv_ready(manifest):
        return None
    started = time.monotonic()
    process = subprocess.Popen([sys.executable, "-c", BUILD, str(folder)], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        return f"venv build ({', '.join(manifest.dependencies)}) did not finish within {timeout:g} s"
    print(f"  venv built in {time.monotonic() - started:.0f} s" if process.returncode == 0 else "  venv build failed",
          flush=True)
    if process.returncode == 0:
        return None
    errors = [line for line in output.splitlines() if re.search(r"error|ERROR|No solution|not found|\u00d7", line)]
    return (f"venv build ({', '.join(manifest.dependencies)}) failed: "
            + " | ".join(dict.fromkeys(line.strip() for line in errors[-4:])))[:1500]


async def play_rows(url: str, split: str, rows: int, timeout: float) -> list[dict[str, Any]]:
    """Each row: reset on it, one text step; its reward, or where and what it failed with."""
    import openenv_gym

    played = []
    async with openenv_gym.connect(url) as conn:
        for task in range(rows):
            session = conn.session()
            outcome: dict[str, Any] = {"task": task}
            stage = "reset"
            try:
                await asyncio.wait_for(session.reset(options={"split": split, "task": task}), timeout)
                stage = "step"
                _, reward, terminated, truncated, info = await asyncio.wait_for(session.step(ACTION), timeout)
                outcome |= {"reward": reward, "terminated": terminated, "truncated": truncated,
                            "metrics": info.get("metrics") or {}}
            except Exception as exc:  # whatever a reset or step raised is the finding
                message = str(exc) or type(exc).__name__
                outcome |= {"stage": stage, "error": f"{type(exc).__name__}: {message}"}
            finally:
                with contextlib.suppress(Exception):  # a session that will not close is the server's to keep
                    await asyncio.wait_for(session.close(), 30)
            played.append(outcome)
    return played


def try_server(folder: Path, scratch: Path, args: argparse.Namespace) -> dict[str, Any]:
    """{"class", "reason", ...} of one resource server."""
    from openenv_gym.client.local import LocalServer

    try:
        results = import_environment(folder, folder.name, scratch, check=False, force=True)
    except ImportFailedError as exc:
        return {"class": "refused at import", "reason": str(exc)}
    except Exception as exc:  # an importer crash is a finding too
        return {"class": "refused at import", "reason": f"importer crashed: {type(exc).__name__}: {exc}"}
    imported = results[0].folder
    manifest = load_manifest(imported)
    found: dict[str, Any] = {"protocol": manifest.protocol, "splits": list(manifest.splits),
                             "dependencies": manifest.dependencies, "notes": results[0].notes}
    if args.only_judged and (manifest.needs or not manifest.model_servers):
        return {"class": "skipped"}  # (it needs more than a judge, or none)
    judge = [f"a judge endpoint for the model servers its config calls ({', '.join(manifest.model_servers)})"] \
        if manifest.model_servers and JudgeEndpoint.from_environment() is None else []
    if not manifest.needs and not judge:  # its venv built, it is loaded as `import` loads it (what it needs as it
        failed = build_venv(imported, args.build_timeout)  # loads is recorded then)
        fetched = [dependency for dependency in manifest.dependencies if "://" in dependency]
        if failed is not None and fetched:  # (a git or archive URL: its host is not reachable from here)
            return found | {"class": "needs unreachable", "reason": f"dependencies fetched from their hosts at "
                            f"install ({', '.join(fetched)}): {failed}", "needs": fetched}
        if failed is not None:
            return found | {"class": "failed", "stage": "venv", "reason": failed}
        try:
            found["notes"] = import_environment(folder, folder.name, scratch, force=True)[0].notes
        except ImportFailedError as exc:
            return found | {"class": "failed", "stage": "load", "reason": gist(str(exc), [])}
        manifest = load_manifest(imported)
    needs = [*manifest.needs, *judge]
    if needs:
        return found | {"class": "needs unreachable", "reason": "; ".join(needs), "needs": needs}
    split = next(iter(manifest.splits))
    count = sum(1 for line in (imported / manifest.splits[split]).read_bytes().splitlines() if line.strip())
    found |= {"split": split, "split_rows": count}
    stored = folder / ROLLOUTS
    played = plan(imported, folder, split) if args.replay and stored.is_file() else None
    try:
        server = LocalServer(str(imported), 1, 1000)
    except Exception as exc:  # ServerStartError, or whatever else starting it raised
        error = f"{type(exc).__name__}: {exc}"
        return found | {"class": "failed", "stage": "start", "reason": gist(error, []), "error": error[-3000:]}
    try:
        replays = replay(server.url, imported, played, args.call_timeout) if played is not None else []
        if not any(map(replayable, replays)):  # (none: its rows, as a new user plays them)
            rows = asyncio.run(play_rows(server.url, split, min(args.rows, count), args.call_timeout))
        log = list(getattr(server, "_tail", []))  # the server's last lines: a 500's traceback ends there
    finally:
        server.stop()
    if any(map(replayable, replays)):
        return found | replayed_class(replays, log)
    found |= {"rows": rows, "replays": replays}
    broken = [row for row in rows if "error" in row]
    if replays and broken:  # (NeMo's own process fails them alike)
        return found | {"class": "needs unreachable", "reason": "what its package does not ship: NeMo's own process "
                        f"cannot play its stored rollouts either ({gist(replays[0].get('error', ''), log)})"}
    if not rows:
        return found | {"class": "failed", "stage": "reset", "reason": f"split {split!r} has no rows"}
    if broken:
        error = broken[0]["error"]
        return found | {"class": "failed", "stage": broken[0]["stage"],
                        "reason": f"{len(broken)} of {len(rows)} rows failed at {broken[0]['stage']}: "
                                  f"{gist(error, log)}", "error": error[:3000], "log": log}
    rewards = [row["reward"] for row in rows]
    return found | {"class": "played", "reason": f"rewards {rewards}", "rewards": rewards}


def replayed_class(replays: list[dict[str, Any]], log: list[str]) -> dict[str, Any]:
    """A server whose stored rollouts were replayed: played where each reward is the stored one or differs on NeMo's
    side alone; else failed, with the first of ours."""
    said = collections.Counter(result["verdict"].split(":")[0] for result in replays)
    summary = f"{said['same']} of {len(replays)} replayed to their stored reward, {said['theirs']} differ at NeMo's"
    ours = [result for result in replays if result["verdict"].startswith("ours")]
    if not ours:
        return {"class": "played", "reason": summary, "replays": replays}
    first = ours[0]
    detail = first.get("error") or f"stored {first['stored']}, ours {first.get('ours')}, NeMo's own {first.get('own')}"
    return {"class": "failed", "stage": "replay", "reason": f"{summary}; {len(ours)} ours: {first['verdict']} "
            f"({gist(detail, log)})", "replays": replays}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkout", type=Path, help="a NeMo Gym checkout (or its resources_servers folder)")
    parser.add_argument("--server", action="append", default=[], help="only this resource server (repeatable)")
    parser.add_argument("--rows", type=int, default=5, help="rows of the first split played per server")
    parser.add_argument("--build-timeout", type=float, default=900.0, help="seconds one server's venv build may take")
    parser.add_argument("--call-timeout", type=float, default=180.0, help="seconds a reset or a step may take")
    parser.add_argument("--replay", action="store_true", help="replay each server's stored rollouts, where it has "
                        "them, to their stored rewards")
    parser.add_argument("--out", type=Path, help="the JSON details (default: benchmarks/results/nemo_examples.json)")
    parser.add_argument("--only-judged", action="store_true",
                        help="only the servers whose one need is a judge, played with a stand-in one: the tests' "
                             "scripted chat server (its answers mean nothing: this checks that judged servers run)")
    args = parser.parse_args(argv)
    folders = server_folders(args.checkout.resolve(), args.server)
    os.environ.update(SAME_HASHES)  # (our servers hash strings as NeMo's own processes the replay asks)
    os.environ.setdefault("OPENENV_GYM_VENVS", str(venvs_dir()))  # the venvs of this machine's, shared ...
    with contextlib.ExitStack() as stack:
        if args.only_judged:
            judge = stack.enter_context(stand_in_judge())
        result = sweep(args, folders)
        if args.only_judged:
            result["judge_requests"] = judge.requests
            print(f"the stand-in judge was asked {judge.requests} times")
    if args.out is not None:
        args.out.write_text(json.dumps(result, indent=1, default=str))
    else:
        save_result("nemo_examples", result)
    return result


@contextlib.contextmanager
def stand_in_judge() -> Iterator[Any]:
    """The tests' scripted chat server as the judge endpoint of the servers this process starts."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from openai_server import ScriptedServer

    with ScriptedServer() as judge:
        os.environ.update({JUDGE_URL: judge.url, JUDGE_MODEL: "judge"})
        try:
            yield judge
        finally:
            for name in (JUDGE_URL, JUDGE_MODEL):
                os.environ.pop(name, None)


def sweep(args: argparse.Namespace, folders: list[Path]) -> dict[str, Any]:
    outcomes: dict[str, dict[str, Any]] = {}
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="nemo-examples-") as scratch:
        os.environ["OPENENV_GYM_HOME"] = str(Path(scratch) / "home")  # ... the imports registered nowhere
        for number, folder in enumerate(folders, 1):
            print(f"[{number}/{len(folders)}] {folder.name}", flush=True)
            begun = time.monotonic()
            outcomes[folder.name] = try_server(folder, Path(scratch) / "envs", args)
            if outcomes[folder.name]["class"] == "skipped":
                del outcomes[folder.name]
                continue
            outcomes[folder.name]["seconds"] = round(time.monotonic() - begun, 1)
            outcome = outcomes[folder.name]
            print(f"  {outcome['class']}{' at ' + outcome['stage'] if 'stage' in outcome else ''}: "
                  f"{first_line(outcome['reason'], 240)}", flush=True)
    counts = collections.Counter(outcome["class"] for outcome in outcomes.values())
    stages = collections.Counter(outcome["stage"] for outcome in outcomes.values() if outcome["class"] == "failed")
    print(f"\n{len(outcomes)} resource servers of {args.checkout} in {time.monotonic() - started:.0f} s:")
    for kind in CLASSES:
        detail = f" ({', '.join(f'{n} at {stage}' for stage, n in stages.most_common())})" if stages else ""
        detail = detail if kind == "failed" else ""
        print(f"  {counts[kind]:4}  {kind}{detail}")
    for kind in CLASSES[1:]:
        for name, outcome in outcomes.items():
            if outcome["class"] == kind:
                where = f" at {outcome['stage']}" if "stage" in outcome else ""
                print(f"  {kind}{where:9} {name}: {first_line(outcome['reason'], 240)}")
    return {"checkout": str(args.checkout), "counts": {kind: counts[kind] for kind in CLASSES},
            "failed_stages": dict(stages), "servers": outcomes}


if __name__ == "__main__":
    main()
