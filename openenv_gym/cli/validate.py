"""`openenv-gym validate ENV_OR_PATH [--json]`: a quality bar to pass before an environment gets GPU hours, for every
kind, in the spirit of OpenEnv's RFC 008. ENV_OR_PATH is an imported or shipped environment (name, gym id, folder),
or a source not imported yet (a Harbor task's folder, say: imported to a temporary folder first).

    static    static.manifest: its openenv.toml reads; static.loads: a server loads it, in its venv
    runtime   runtime.reset_step: a reset and a step answer; runtime.seed_repeats: reset(seed=s) twice gives the same
              first observation where its task is chosen by the seed; runtime.seeds_differ: different seeds give
              different tasks where it has more than one
    semantic  semantic.oracle_max: the oracle reaches the top reward, where the format has one (Harbor's solve.sh);
              semantic.floor_gap: doing nothing scores below the oracle by --margin at least (0.5)
    network   network.egress_denied: a task that declares no network reaches nothing (a host's listener hears from
              none of its commands)

The report: one entry per check (check_id, status pass | fail | skip | error, measured, evidence, remediation) and a
verdict. Exit code 0 pass, 1 fail, 2 unsupported (the environment cannot be served here), 3 internal error.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import socket
import sys
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

DO_NOTHING = {"name": "submit", "arguments": {}}
FLOOR_STEPS = 50  # steps of the do-nothing policy before its episode is called endless
EXIT = {"pass": 0, "fail": 1, "unsupported": 2, "error": 3}


@dataclass
class Check:
    check_id: str
    status: str  # pass | fail | skip | error
    measured: dict[str, Any] = field(default_factory=dict)
    evidence: list[str] = field(default_factory=list)
    remediation: str = ""


def add_validate(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("validate", help="check an environment before training on it",
                                 description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("env", help="an environment's name, gym id or folder, or a source to import first")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--margin", type=float, default=0.5, help="how far below the oracle the floor must be")
    parser.add_argument("--tasks", type=int, default=20, help="tasks checked with the oracle and the floor (the first)")
    parser.add_argument("--oracle", type=Path, metavar="SCRIPT.py",
                        help="an oracle of yours, for any kind: a Python file defining act(observation, info) -> "
                             "action, which should reach the top reward (1.0) on each task")
    parser.set_defaults(run=run_validate)


def run_validate(args: argparse.Namespace) -> None:
    try:
        report = validate(args.env, args.margin, args.tasks, args.oracle)
    except Exception as exc:  # (a bug of ours: said, with exit code 3)
        report = {"target": args.env, "results": [], "verdict": "error", "error": f"{type(exc).__name__}: {exc}"}
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        for result in report["results"]:
            said = "; ".join(result["evidence"][:3])
            print(f"{result['status'].upper():5} {result['check_id']:28} {said}")
            if result["status"] in ("fail", "error") and result["remediation"]:
                print(f"      {result['remediation']}")
        print(f"verdict: {report['verdict']}" + (f" ({report['error']})" if "error" in report else ""))
    sys.exit(EXIT[report["verdict"]])


def validate(env: str, margin: float, most_tasks: int, oracle: Path | None = None) -> dict[str, Any]:
    from openenv_gym.manifests import find_manifest
    from openenv_gym.manifests.schema import ManifestError

    results: list[Check] = []
    with _environment(env) as folder:
        try:
            manifest = find_manifest(folder or env)
        except (ManifestError, LookupError) as exc:
            results.append(Check("static.manifest", "fail", evidence=[str(exc)],
                                 remediation="import the source (openenv-gym import) or fix its openenv.toml"))
            return _report(env, None, results, "fail")
        results.append(Check("static.manifest", "pass", {"kind": manifest.kind}, [f"{manifest.gym_id}"]))
        from openenv_gym.client.local import LocalServer

        try:
            server = LocalServer(str(manifest.folder), 1, 16)
        except Exception as exc:
            results.append(Check("static.loads", "fail", evidence=[str(exc)[-1500:]],
                                 remediation="`openenv-gym venvs check` says where it fails to load"))
            return _report(env, manifest, results, "unsupported")
        with server:
            results.append(Check("static.loads", "pass", evidence=["a server loaded it in its venv"]))
            act = _oracle_script(oracle) if oracle is not None else None
            results += asyncio.run(_served_checks(server.url, manifest, margin, most_tasks, act))
    verdict = "fail" if any(r.status in ("fail", "error") for r in results) else "pass"
    return _report(env, manifest, results, verdict)


@contextlib.contextmanager
def _environment(env: str) -> Iterator[str | None]:
    """The folder of an environment to validate: a source not imported yet is imported to a temporary folder."""
    path = Path(env)
    if not path.is_dir() or (path / "openenv.toml").is_file():
        yield None
        return
    from openenv_gym.importers import import_environment

    with tempfile.TemporaryDirectory(prefix="openenv-gym-validate-") as scratch:
        [result] = import_environment(path, "validated", Path(scratch))[:1]
        yield str(result.folder)


def _report(env: str, manifest: Any, results: list[Check], verdict: str) -> dict[str, Any]:
    return {"report_schema_version": "1", "target": env, "kind": getattr(manifest, "kind", None),
            "results": [asdict(result) for result in results], "verdict": verdict}


def _oracle_script(path: Path) -> Any:
    """The act(observation, info) function of a user's oracle script."""
    import runpy

    act = runpy.run_path(str(path)).get("act")
    if not callable(act):
        raise ValueError(f"{path} defines no act(observation, info) function, which --oracle plays")
    return act


async def _served_checks(url: str, manifest: Any, margin: float, most_tasks: int, act: Any) -> list[Check]:
    import openenv_gym

    async with openenv_gym.connect(url) as conn:
        splits = await conn.splits()
        count = splits[0].get("num_tasks", 0) if splits else 0
        checks = [await _reset_step(conn)]
        try:
            checks += await _seeds(conn, manifest, count)
        except Exception as exc:
            checks.append(Check("runtime.seed_repeats", "fail", evidence=[f"{type(exc).__name__}: {exc}"],
                                remediation="a reset with a seed must work for every task a seed may choose"))
        if act is not None:
            checks += await _scripted(conn, act, margin, max(1, min(count, most_tasks)), count > 0)
        elif manifest.kind == "harbor":
            checks += await _harbor(conn, manifest, margin, min(count, most_tasks))
        else:
            checks += [Check("semantic.oracle_max", "skip", evidence=[f"{manifest.kind} environments publish no "
                                                                       "oracle this command can play"]),
                       Check("semantic.floor_gap", "skip", evidence=["no oracle to measure the floor against"]),
                       Check("network.egress_denied", "skip", evidence=[f"a {manifest.kind} environment's episodes "
                                                                         "take no command to try the network with"])]
    return checks


async def _scripted(conn: Any, act: Any, margin: float, tasks: int, catalog: bool) -> list[Check]:
    """The user's oracle on each task (by index, or by seed where there is no catalog) against doing nothing."""
    played, pairs = [], []
    for number in range(tasks):
        options, seed = ({"index": number}, None) if catalog else ({}, number)
        name = f"task {number}" if catalog else f"seed {number}"
        try:
            top = await _policy_episode(conn, options, seed, act)
            _, bottom, _ = await _episode(conn, options, [DO_NOTHING], seed)
        except Exception as exc:
            played.append((name, None, f"{type(exc).__name__}: {exc}"))
            continue
        played.append((name, top, ""))
        pairs.append((name, top, bottom))
    return [_oracle_check(played), _floor_check(pairs, margin),
            Check("network.egress_denied", "skip", evidence=["checked for Harbor tasks"])]


async def _policy_episode(conn: Any, options: dict[str, Any], seed: int | None, act: Any) -> float:
    session = conn.session()
    try:
        obs, info = await session.reset(seed=seed, options=options)
        total = 0.0
        for _ in range(FLOOR_STEPS):
            obs, reward, terminated, truncated, info = await session.step(act(obs, info))
            total += reward
            if terminated or truncated:
                break
        return total
    finally:
        await session.close()


async def _episode(conn: Any, options: dict[str, Any], actions: list[Any], seed: int | None = None) \
        -> tuple[str, float, dict[str, Any]]:
    """(first observation, total reward, last info) of an episode played with `actions` (the last repeated)."""
    session = conn.session()
    try:
        obs, info = await session.reset(seed=seed, options=options)
        total = 0.0
        for number in range(FLOOR_STEPS):
            _, reward, terminated, truncated, info = await session.step(actions[min(number, len(actions) - 1)])
            total += reward
            if terminated or truncated:
                break
        return obs, total, info
    finally:
        await session.close()


async def _reset_step(conn: Any) -> Check:
    try:
        _, reward, _ = await _episode(conn, {}, [DO_NOTHING], seed=0)
    except Exception as exc:
        return Check("runtime.reset_step", "fail", evidence=[f"{type(exc).__name__}: {exc}"],
                     remediation="play one episode by hand (openenv-gym view) and fix what fails")
    return Check("runtime.reset_step", "pass", {"reward": reward}, [f"an episode played: reward {reward:g}"])


async def _seeds(conn: Any, manifest: Any, count: int) -> list[Check]:
    async def first(seed: int) -> str:
        session = conn.session()
        try:
            return str((await session.reset(seed=seed))[0])
        finally:
            await session.close()
    again = [await first(7), await first(7)]
    claims = count > 1 or manifest.deterministic
    repeats = Check("runtime.seed_repeats", "pass" if again[0] == again[1] else ("fail" if claims else "skip"),
                    {"same": again[0] == again[1]},
                    ["reset(seed=7) twice: " + ("the same first observation" if again[0] == again[1] else "differ")],
                    "reset(seed=...) must choose the same task each time (OpenEnv #1102, #1250: seeds ignored)")
    if count < 2:
        return [repeats, Check("runtime.seeds_differ", "skip", evidence=[f"{_tasks(count)}: nothing to differ"])]
    seen = {await first(seed) for seed in range(8)}
    differ = Check("runtime.seeds_differ", "pass" if len(seen) > 1 else "fail", {"distinct": len(seen)},
                   [f"8 seeds gave {len(seen)} distinct first observations of {count} tasks"],
                   "a seed must choose among the tasks, not always the first")
    return [repeats, differ]


async def _harbor(conn: Any, manifest: Any, margin: float, tasks: int) -> list[Check]:
    """Every task (up to `tasks`) with its oracle and with nothing; a task without network tried from inside."""
    index = json.loads((manifest.vendored / "index.json").read_text())
    oracle, floor, egress = [], [], []
    for task in index[:tasks]:
        name = task["id"]
        if not task["has_solution"]:
            oracle.append((name, None, "no solution/solve.sh"))
            continue
        try:
            _, top, _ = await _episode(conn, {"task": name, "oracle": True}, [DO_NOTHING])
            _, bottom, _ = await _episode(conn, {"task": name}, [DO_NOTHING])
        except Exception as exc:
            oracle.append((name, None, f"{type(exc).__name__}: {exc}"))
            continue
        oracle.append((name, top, ""))
        floor.append((name, top, bottom))
        if task["environment"]["network"]["mode"] == "no-network":
            egress.append((name, await _egress(conn, name)))
    return [_oracle_check(oracle), _floor_check(floor, margin), _egress_check(egress)]


def _oracle_check(played: list[tuple[str, float | None, str]]) -> Check:
    failed = [f"{name}: {why or f'reward {top:g}'}" for name, top, why in played if top is None or top < 1.0]
    missing = [name for name, top, why in played if top is None and why == "no solution/solve.sh"]
    status = "skip" if played and len(missing) == len(played) else ("fail" if failed else "pass")
    return Check("semantic.oracle_max", status, {"tasks": len(played), "below_top": len(failed)},
                 failed[:10] or [f"{_tasks(len(played))}: the oracle reached 1.0 in each"],
                 "each task's solution/solve.sh must reach the top reward (1.0) as the verifier scores it")


def _floor_check(pairs: list[tuple[str, float, float]], margin: float) -> Check:
    close = [f"{name}: oracle {top:g}, nothing {bottom:g}" for name, top, bottom in pairs if top - bottom < margin]
    gap = f"{_tasks(len(pairs))}: doing nothing scores {margin:g} or more below the oracle"
    return Check("semantic.floor_gap", "skip" if not pairs else ("fail" if close else "pass"),
                 {"tasks": len(pairs), "margin": margin}, close[:10] or [gap],
                 "a task that scores as well done as not teaches nothing: its tests must fail on the untouched state")


async def _egress(conn: Any, name: str) -> bool:
    """Whether a task declared without network reaches a listener of the host's from a command (from outside:
    the listener counts who connects)."""
    heard = threading.Event()
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.1)
    port = server.getsockname()[1]

    def listen() -> None:
        while not heard.is_set() and server.fileno() != -1:
            with contextlib.suppress(OSError):
                server.accept()[0].close()
                heard.set()
    thread = threading.Thread(target=listen, daemon=True)
    thread.start()
    probe = f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo reached; python3 -c 'import socket; " \
            f"socket.create_connection((\"127.0.0.1\", {port}), 2)' && echo reached"
    try:
        await _episode(conn, {"task": name}, [{"name": "bash", "arguments": {"command": probe}}, DO_NOTHING])
    finally:
        reached = heard.is_set()
        heard.set()
        thread.join()
        server.close()
    return reached


def _egress_check(tried: list[tuple[str, bool]]) -> Check:
    reached = [name for name, did in tried if did]
    return Check("network.egress_denied", "skip" if not tried else ("fail" if reached else "pass"),
                 {"tasks": len(tried)}, [f"reached the host from: {', '.join(reached)}"] if reached else
                 [f"{_tasks(len(tried))} without network: none reached the host"] if tried else
                 ["no task declares no-network"], "a task that says no-network must reach nothing")


def _tasks(count: int) -> str:
    return f"{count} task{'' if count == 1 else 's'}"
