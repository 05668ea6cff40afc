"""The playground's goals, measured in one run:

    python -m benchmarks.web [--tabs 20] [--rounds 6] [--seconds 3]     # part of `make bench`

- First step: fresh tabs, one after another, on a `guess` server (one worker) in Debian's Chromium. Each tab
  loads the page, connects and resets; then its first step goes through the guess form, timed inside the page
  from the form's submit to the step's entry in the history (what a person waits for). Goal: under 100 ms.
- Throughput with the web route on against off: two echo servers with the same workers (2), one started with
  --no-web; the page is fetched from the other. 256 sessions step in lock-step (AsyncVectorClient) on each in
  turn; each round starts a fresh pair. The figure is the median of the rounds' on/off ratios. Goal: within 2%.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from pathlib import Path

import httpx

from benchmarks.measures import save_result

CHROMIUM = Path("/usr/bin/chromium")
SESSIONS = 256
# Timed inside the page: from the click (reset) or the form's submit (step) to the new entry in the history.
TIMED = """async (what) => {
  const history = document.getElementById("history");
  const before = history.children.length;
  const answered = new Promise((resolve) => new MutationObserver((_, observer) => {
    if (history.children.length > before) { observer.disconnect(); resolve(); }
  }).observe(history, { childList: true }));
  const started = performance.now();
  if (what === "reset") {
    document.getElementById("reset").click();
  } else {
    const form = document.querySelector("form[data-tool=guess]");
    form.querySelector("[name=number]").value = "50";
    form.requestSubmit();
  }
  await answered;
  return performance.now() - started;
}"""


def http_url(ws_url: str) -> str:
    return "http" + ws_url.removeprefix("ws")


def first_steps(url: str, tabs: int) -> dict:
    """Milliseconds to load and connect, to reset, and to answer the first step, per tab."""
    from playwright.sync_api import sync_playwright

    loads, resets, steps = [], [], []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        for seed in range(tabs):
            page = browser.new_page()
            started = time.perf_counter()
            page.goto(http_url(url) + "/web")
            page.wait_for_function("document.getElementById('status').textContent.startsWith('connected')")
            loads.append((time.perf_counter() - started) * 1000)
            page.fill("#seed", str(seed))
            resets.append(page.evaluate(TIMED, "reset"))  # a fresh tab: its history is empty
            steps.append(page.evaluate(TIMED, "step"))
            page.close()
        browser.close()
    return {name: {"p50": statistics.median(values), "p95": sorted(values)[int(0.95 * (len(values) - 1))]}
            for name, values in (("load_ms", loads), ("reset_ms", resets), ("first_step_ms", steps))}


async def steps_per_s(url: str, seconds: float) -> float:
    import openenv_gym

    async with openenv_gym.AsyncVectorClient(url, SESSIONS) as client:
        await client.reset(options={"max_steps": 10**9})
        await client.step(["warm"] * SESSIONS)
        steps, started = 0, time.perf_counter()
        while time.perf_counter() - started < seconds:
            await client.step(["r"] * SESSIONS)
            steps += 1
        return steps * SESSIONS / (time.perf_counter() - started)


def web_on_against_off(rounds: int, seconds: float) -> dict:
    from openenv_gym.client.local import LocalServer

    measured: dict[str, list[float]] = {"on": [], "off": []}
    for round_ in range(rounds):
        # fresh servers each round: two instances of one server differ by a few percent between themselves (how
        # the kernel spreads connections over the workers), which must not be read as the web route's cost
        servers = {"on": LocalServer("echo", 2, 10_000), "off": LocalServer("echo", 2, 10_000, "--no-web")}
        try:
            assert httpx.get(http_url(servers["on"].url) + "/web", timeout=10).status_code == 200
            assert httpx.get(http_url(servers["off"].url) + "/web", timeout=10).status_code == 404
            for name in ("on", "off") if round_ % 2 == 0 else ("off", "on"):
                measured[name].append(asyncio.run(steps_per_s(servers[name].url, seconds)))
        finally:
            for server in servers.values():
                server.stop()
    ratios = [on / off for on, off in zip(measured["on"], measured["off"], strict=True)]
    return {"rounds": measured, "on_steps_per_s": statistics.median(measured["on"]),
            "off_steps_per_s": statistics.median(measured["off"]), "ratio": statistics.median(ratios)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tabs", type=int, default=20, help="fresh tabs whose first step is timed")
    parser.add_argument("--rounds", type=int, default=10, help="rounds on each server (alternating)")
    parser.add_argument("--seconds", type=float, default=2.0, help="seconds of stepping per round")
    args = parser.parse_args()
    from openenv_gym.client.local import LocalServer

    guess = LocalServer("guess", 1, 1000)
    try:
        page = first_steps(guess.url, args.tabs)
    finally:
        guess.stop()
    throughput = web_on_against_off(args.rounds, args.seconds)
    save_result("web", {"page": page, "throughput": throughput})
    print(f"playground, {args.tabs} fresh tabs: first step p50 {page['first_step_ms']['p50']:.1f} ms, "
          f"p95 {page['first_step_ms']['p95']:.1f} ms (goal < 100); reset p50 {page['reset_ms']['p50']:.1f} ms; "
          f"page load to connected p50 {page['load_ms']['p50']:.0f} ms")
    print(f"echo, {SESSIONS} lock-step sessions, 2 workers, {args.rounds} alternating rounds of {args.seconds:g} s: "
          f"web on {throughput['on_steps_per_s']:,.0f} steps/s, off {throughput['off_steps_per_s']:,.0f} "
          f"(on/off, median of the rounds' ratios: {throughput['ratio']:.3f}x; goal within 2%)")


if __name__ == "__main__":
    main()
