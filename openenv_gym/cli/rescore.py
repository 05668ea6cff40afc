"""`openenv-gym rescore F.jsonl ENV_ID`: score the episodes of an episodes file again with the environment as it is
now (a fixed verifier, a changed reward): each episode's actions are replayed in a fresh session on its seed and
reset options, and a new file gets each episode with its new rewards (the old return and whether the replay ended
as the record did under "rescore"). A summary says what changed. The groups' advantages are taken again, of the
new returns (minus the group's mean).

A NeMo Gym rollouts file (rows with responses_create_params and response, as `gym eval run` or a resource server's
data/example_rollouts.jsonl holds them) on a nemo environment is re-verified instead, as `gym eval reverify` does:
each row to the server's /verify, where the server says that is stateless (adapters/nemo/reverify.py).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
from tqdm import tqdm

from openenv_gym.manifests.schema import NEMO_ROW_INPUT
from openenv_gym.rollout.groups import advantages
from openenv_gym.rollout.records import read_lines
from openenv_gym.rollout.rescore import Rescored, rescore

CHANGED = 1e-9  # a return that moved by more than this changed


def add_rescore(commands: argparse._SubParsersAction) -> None:
    from openenv_gym.cli import positive_int
    from openenv_gym.cli.renamed import add_renamed

    parser = commands.add_parser("rescore", help="score stored episodes again, replaying their actions",
                                 description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("file", type=Path, help="an episodes file, as `openenv-gym rollout --output` writes it")
    parser.add_argument("env_id", help="the gym id to replay them on: openenv/guess, openenv/ors-myenv, ...")
    add_renamed(parser, "--out", parser.add_argument(
        "--output", type=Path, help="the new file (default: FILE with .rescored.jsonl)"))
    parser.add_argument("--num-envs", type=positive_int, default=64, help="episodes replayed at once (default 64)")
    parser.add_argument("--env-url", nargs="+", help="running env servers (default: start a local one)")
    parser.add_argument("--env", help="the environment's name on the env servers, for openenv/ors")
    parser.add_argument("--inputs", type=Path,
                        help="NeMo Gym rollouts: the materialized inputs they were played from (default: the rows of "
                             "the environment's datasets with the same input)")
    parser.add_argument("--force", action="store_true",
                        help="NeMo Gym rollouts: reverify even where the server does not say its /verify is stateless "
                             "(the output's name then starts with unsafe_)")
    parser.set_defaults(run=run_rescore)


def run_rescore(args: argparse.Namespace) -> None:
    if not args.file.is_file():
        sys.exit(f"openenv-gym rescore: {args.file} is no file")
    out = args.output or args.file.with_name(args.file.name.removesuffix(".jsonl") + ".rescored.jsonl")
    if out.resolve() == args.file.resolve():
        sys.exit("openenv-gym rescore: --output must be another file than the one rescored")
    if _nemo_rollouts(args.file):
        _reverify_nemo(args, out)
        return
    records, unreadable = _read(args.file)
    if not records:
        sys.exit(f"openenv-gym rescore: {args.file} holds no episode")
    results = asyncio.run(_replay_all(records, args))
    lines = [_rescored_line(record, results[k]) for k, record in enumerate(records)]
    _retake_advantages(lines)
    out.write_bytes(b"".join(orjson.dumps(line, option=orjson.OPT_SERIALIZE_NUMPY) + b"\n" for line in lines))
    print(_summary(records, results, unreadable, out))


def _nemo_rollouts(path: Path) -> bool:
    """Whether a file holds NeMo Gym rollouts (its first row has a Responses request and a response)."""
    for _, record in read_lines(path):
        return isinstance(record, dict) and isinstance(record.get(NEMO_ROW_INPUT), dict) \
            and isinstance(record.get("response"), dict)
    return False


def _reverify_nemo(args: argparse.Namespace, out: Path) -> None:
    """NeMo Gym rollouts: re-verified in the environment's venv, where its server loads."""
    from openenv_gym.manifests import find_manifest
    from openenv_gym.manifests.schema import NemoManifest
    from openenv_gym.manifests.venvs import ensure_venv

    manifest = find_manifest(args.env_id)
    if not isinstance(manifest, NemoManifest):
        sys.exit(f"openenv-gym rescore: {args.file} holds NeMo Gym rollouts; {args.env_id} is a {manifest.kind} "
                 "environment: give the openenv/nemo-NAME they were played on")
    command = [str(ensure_venv(manifest)), "-m", "openenv_gym.adapters.nemo.reverify", str(manifest.folder),
               str(args.file), str(out), "--concurrency", str(args.num_envs), *(["--force"] if args.force else []),
               *(["--inputs", str(args.inputs)] if args.inputs else [])]
    done = subprocess.run(command, stdout=subprocess.PIPE, text=True)
    if done.returncode != 0:
        sys.exit(done.returncode)
    figures = orjson.loads(done.stdout.strip().splitlines()[-1])
    width = max(map(len, figures))
    print("\n".join(f"{name:<{width}}  {value}" for name, value in figures.items()))


def _read(path: Path) -> tuple[list[dict[str, Any]], int]:
    records, unreadable = [], 0
    for _, record in read_lines(path):
        if isinstance(record, dict) and isinstance(record.get("messages"), list):
            records.append(record)
        else:
            unreadable += 1
    return records, unreadable


async def _replay_all(records: list[dict[str, Any]], args: argparse.Namespace) -> list[Rescored]:
    results: list[Rescored] = [Rescored() for _ in records]
    progress = tqdm(total=len(records), unit="episode", file=sys.stderr, dynamic_ncols=True)
    try:
        stream = rescore(args.env_id, records, num_envs=args.num_envs, base_url=args.env_url, env=args.env)
        async with contextlib.aclosing(stream):
            async for index, rescored in stream:
                results[index] = rescored
                progress.update()
    finally:
        progress.close()
    return results


def _rescored_line(record: dict[str, Any], result: Rescored) -> dict[str, Any]:
    note = {"previous_total_reward": record.get("total_reward", sum(record.get("rewards") or [])),
            "same_ending": result.same_ending, "error": result.error}
    if result.error is not None:
        return record | {"rescore": note}  # kept as it was, the replay's failure said
    return record | {"rewards": result.rewards, "total_reward": result.total_reward, "steps": len(result.rewards),
                     "terminated": result.terminated, "truncated": result.truncated, "rescore": note}


def _retake_advantages(lines: list[dict[str, Any]]) -> None:
    groups: dict[str, list[dict[str, Any]]] = {}
    for line in lines:
        if line.get("group") is not None and line.get("advantage") is not None:
            groups.setdefault(str(line["group"]), []).append(line)
    for members in groups.values():
        for line, value in zip(members, advantages([m["total_reward"] for m in members], "mean"), strict=True):
            line["advantage"] = value


def _summary(records: list[dict[str, Any]], results: list[Rescored], unreadable: int, out: Path) -> str:
    replayed = [(r, x) for r, x in zip(records, results, strict=True) if x.error is None]
    before = [r.get("total_reward", sum(r.get("rewards") or [])) for r, _ in replayed]
    after = [x.total_reward for _, x in replayed]
    rows: list[tuple[str, Any]] = [
        ("episodes", len(records)), ("replayed", len(replayed)), ("replay failed", len(records) - len(replayed)),
        ("return changed", sum(abs(a - b) > CHANGED for a, b in zip(after, before, strict=True))),
        ("ended differently", sum(not x.same_ending for _, x in replayed)),
        ("mean return before", f"{sum(before) / len(before):.4f}" if before else "-"),
        ("mean return after", f"{sum(after) / len(after):.4f}" if after else "-"),
        ("lines not episodes", unreadable), ("written to", out)]
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"{name:<{width}}  {value}" for name, value in rows)
