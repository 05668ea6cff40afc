"""What the overlays of system folders cost a sandbox's start (a Harbor image that writes in /usr, /opt and /etc):
the p50 of opening one, with and without them, one after the other in one process.

    python -m benchmarks.overlay [--opens 30]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from benchmarks.measures import save_result
from openenv_gym.sandbox import Sandbox, SandboxPolicy

PLAIN = SandboxPolicy(writable=("/app",))
OVERLAID = SandboxPolicy(writable=("/app",), owned=("/usr/bin/python", "/opt/tool/bin", "/etc/profile.d/tool.sh"))


async def open_p50(policy: SandboxPolicy, opens: int) -> float:
    """The median time to open a sandbox of `policy` (ms); each is closed before the next."""
    times = []
    for _ in range(opens):
        started = time.perf_counter()
        sandbox = await Sandbox.open(policy)
        times.append(time.perf_counter() - started)
        await sandbox.close()
    return statistics.median(times) * 1000


async def measure(opens: int) -> dict[str, float]:
    await open_p50(OVERLAID, 3)  # (warm: the first bubblewrap and helper starts)
    plain, overlaid = await open_p50(PLAIN, opens), await open_p50(OVERLAID, opens)
    return {"open_p50_ms": round(plain, 1), "open_with_overlays_p50_ms": round(overlaid, 1),
            "overlays_cost_ms": round(overlaid - plain, 1)}


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--opens", type=int, default=30)
    result = asyncio.run(measure(parser.parse_args(argv).opens))
    print(f"sandbox open p50: {result['open_p50_ms']} ms; with overlays of /usr, /opt and /etc: "
          f"{result['open_with_overlays_p50_ms']} ms (+{result['overlays_cost_ms']} ms)")
    save_result("overlay", result)
    return result


if __name__ == "__main__":
    main()
