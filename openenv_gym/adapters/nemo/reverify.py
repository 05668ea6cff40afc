"""Re-verify stored NeMo Gym rollouts (`openenv-gym rescore ROLLOUTS.jsonl openenv/nemo-NAME`), as `gym eval
reverify` does: each rollout's response is posted to the server's /verify with the task row it played, in a session
of its own, and its new reward written beside the stored one. The row is the one of the materialized inputs given
(`--inputs`, joined on _ng_task_index and _ng_rollout_index, as NeMo Gym joins them), else the environment's own
dataset row with the same input (a rollout file's own responses_create_params may be a dump with nulls that NeMo's
request models refuse), else the rollout's own fields. Only where the server says its /verify is `stateless` (GET
/reverify_mode): a stateful one would judge a fresh session, not the one the rollout played. `force` reverifies
anyway, and the output file's name then starts with `unsafe_`, as NeMo Gym names it.

Run in the environment's venv (the CLI starts it there):
    python -m openenv_gym.adapters.nemo.reverify ENV_FOLDER ROLLOUTS OUT [--inputs FILE] [--force] [--concurrency N]
It writes OUT (one line per row: the row, its new reward, and under "rescore" the stored reward and any error) and
prints a JSON summary.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

import orjson

from openenv_gym.adapters.nemo.app import ServerApp, answered, post
from openenv_gym.errors import BadRequestError, OpenEnvGymError
from openenv_gym.manifests import load_manifest
from openenv_gym.manifests.schema import NEMO_ROW_INPUT, NemoManifest
from openenv_gym.protocol.openai_chat import ChatRequestError
from openenv_gym.protocol.openai_responses import responses_request

STATELESS = "stateless"
CHANGED = 1e-9
UNSAFE_PREFIX = "unsafe_"
TASK_INDEX, ROLLOUT_INDEX = "_ng_task_index", "_ng_rollout_index"
KEPT_FROM_ROLLOUT = ("deliverables_dir", "reference_ids")  # verifier inputs a rollout produced, as NeMo keeps them


class NotStatelessError(OpenEnvGymError):
    """The server does not say its /verify is stateless: a stored rollout cannot be judged again without --force."""


def input_key(row: dict[str, Any]) -> bytes | None:
    """A task row's input, in one spelling (the messages it reads as), to find the row a rollout played."""
    try:
        return orjson.dumps(responses_request(row[NEMO_ROW_INPUT]).messages)
    except (ChatRequestError, KeyError, TypeError):
        return None


def payloads(manifest: NemoManifest, rollouts: list[dict[str, Any]],
             inputs: list[dict[str, Any]] | None) -> list[dict[str, Any] | str]:
    """Each rollout's /verify body (its task row and its response), or why it has none."""
    by_index = {(row.get(TASK_INDEX), row.get(ROLLOUT_INDEX)): row for row in inputs or []}
    by_input: dict[bytes, dict[str, Any]] = {}
    for path in manifest.splits.values():
        for line in (manifest.folder / path).read_bytes().splitlines():
            if line.strip() and (key := input_key(row := orjson.loads(line))) is not None:
                by_input.setdefault(key, row)
    bodies: list[dict[str, Any] | str] = []
    for rollout in rollouts:
        if not isinstance(rollout.get("response"), dict):
            bodies.append("it has no response")
            continue
        if inputs is not None:
            row = by_index.get((rollout.get(TASK_INDEX), rollout.get(ROLLOUT_INDEX)))
            if row is None:
                bodies.append("no row of --inputs has its _ng_task_index and _ng_rollout_index")
                continue
        else:  # a task of the environment's datasets, else the rollout's own fields are its task's
            row = by_input.get(input_key(rollout) or b"") or rollout
        kept = {key: rollout[key] for key in KEPT_FROM_ROLLOUT if key in rollout}
        bodies.append(row | {"response": rollout["response"]} | kept)
    return bodies


def output_path(out: Path, forced_unsafe: bool) -> Path:
    return out.with_name(UNSAFE_PREFIX + out.name) if forced_unsafe else out


async def reverify(manifest: NemoManifest, rollouts: list[dict[str, Any]], inputs: list[dict[str, Any]] | None = None,
                   force: bool = False, concurrency: int = 64) -> tuple[list[dict[str, Any]], str]:
    """(each rollout with its new reward, the server's reverify mode)."""
    server = ServerApp(manifest)
    await server.start()
    try:
        mode = await server.mode()
        if mode != STATELESS and not force:
            raise NotStatelessError(
                f"{manifest.name} says its /verify is {mode!r}, not {STATELESS!r}: it may judge the session it played, "
                "which a stored rollout no longer has. --force reverifies anyway (the output then starts with "
                f"{UNSAFE_PREFIX})")
        gate = asyncio.Semaphore(concurrency)

        async def one(rollout: dict[str, Any], body: dict[str, Any] | str) -> dict[str, Any]:
            note: dict[str, Any] = {"previous_reward": rollout.get("reward"), "error": None}
            if isinstance(body, str):
                return rollout | {"rescore": note | {"error": body}}
            async with gate, server.client() as client:
                try:
                    verdict = answered(await post(client, "/verify", body), "/verify")
                except OpenEnvGymError as exc:
                    return rollout | {"rescore": note | {"error": str(exc)}}
            return {**rollout, **verdict, "rescore": note}

        bodies = payloads(manifest, rollouts, inputs)
        return list(await asyncio.gather(*(one(r, b) for r, b in zip(rollouts, bodies, strict=True)))), mode
    finally:
        await server.aclose()


def summary(rows: list[dict[str, Any]], lines: list[dict[str, Any]], mode: str, out: Path) -> dict[str, Any]:
    done = [line for line in lines if line["rescore"]["error"] is None]
    changed = [line for line in done if isinstance(line["rescore"]["previous_reward"], int | float)
               and abs(float(line["reward"]) - float(line["rescore"]["previous_reward"])) > CHANGED]
    return {"rollouts": len(rows), "reverified": len(done), "failed": len(lines) - len(done),
            "reward changed": len(changed), "reverify mode": mode, "written to": str(out)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=Path)
    parser.add_argument("rollouts", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--inputs", type=Path, help="the materialized inputs the rollouts were played from")
    parser.add_argument("--force", action="store_true")
    parser.add_argument("--concurrency", type=int, default=64)
    args = parser.parse_args(argv)
    manifest = load_manifest(args.folder)
    assert isinstance(manifest, NemoManifest), "the CLI runs this for nemo environments only"
    rows = _read(args.rollouts)
    try:
        lines, mode = asyncio.run(reverify(manifest, rows, _read(args.inputs) if args.inputs else None, args.force,
                                           args.concurrency))
    except (NotStatelessError, BadRequestError) as exc:  # (BadRequestError: its model servers are not answered)
        sys.exit(str(exc))
    out = output_path(args.out, args.force and mode != STATELESS)
    out.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    print(orjson.dumps(summary(rows, lines, mode, out)).decode(), flush=True)


def _read(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


if __name__ == "__main__":
    main()
