"""Re-verify stored NeMo Gym rollouts (`openenv-gym rescore ROLLOUTS.jsonl openenv/nemo-NAME`), as `gym eval
reverify` does: each row (its responses_create_params, its response, the task's fields) is posted to the server's
/verify in a session of its own, and its new reward written beside the stored one. Only where the server says its
/verify is `stateless` (GET /reverify_mode): a stateful one would judge a fresh session, not the one the rollout
played. `force` reverifies anyway, and the output file's name then starts with `unsafe_`, as NeMo Gym names it.

Run in the environment's venv (the CLI starts it there):
    python -m openenv_gym.adapters.nemo.reverify ENV_FOLDER ROLLOUTS OUT [--force] [--concurrency N]
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
from openenv_gym.errors import OpenEnvGymError
from openenv_gym.manifests import load_manifest
from openenv_gym.manifests.schema import NemoManifest

STATELESS = "stateless"
CHANGED = 1e-9
UNSAFE_PREFIX = "unsafe_"


class NotStatelessError(OpenEnvGymError):
    """The server does not say its /verify is stateless: a stored rollout cannot be judged again without --force."""


def output_path(out: Path, forced_unsafe: bool) -> Path:
    return out.with_name(UNSAFE_PREFIX + out.name) if forced_unsafe else out


async def reverify(manifest: NemoManifest, rows: list[dict[str, Any]], force: bool = False,
                   concurrency: int = 64) -> tuple[list[dict[str, Any]], str]:
    """(each row with its new reward, the server's reverify mode)."""
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

        async def one(row: dict[str, Any]) -> dict[str, Any]:
            note: dict[str, Any] = {"previous_reward": row.get("reward"), "error": None}
            async with gate, server.client() as client:
                try:
                    verdict = answered(await post(client, "/verify", row), "/verify")
                except OpenEnvGymError as exc:
                    return row | {"rescore": note | {"error": str(exc)}}
            return {**row, **verdict, "rescore": note}

        return list(await asyncio.gather(*(one(row) for row in rows))), mode
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
    parser.add_argument("--force", action="store_true")
    parser.add_argument("--concurrency", type=int, default=64)
    args = parser.parse_args(argv)
    manifest = load_manifest(args.folder)
    assert isinstance(manifest, NemoManifest), "the CLI runs this for nemo environments only"
    rows = [orjson.loads(line) for line in args.rollouts.read_bytes().splitlines() if line.strip()]
    try:
        lines, mode = asyncio.run(reverify(manifest, rows, args.force, args.concurrency))
    except NotStatelessError as exc:
        sys.exit(str(exc))
    out = output_path(args.out, args.force and mode != STATELESS)
    out.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    print(orjson.dumps(summary(rows, lines, mode, out)).decode(), flush=True)


if __name__ == "__main__":
    main()
