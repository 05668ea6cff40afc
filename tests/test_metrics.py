"""GET /metrics: what a server did, in Prometheus' text format (read back with prometheus_client's own parser),
summed over its workers whichever of them answers the scrape."""

import asyncio

import gymnasium as gym
import websockets
from conftest import scrape, wait_until

import openenv_gym  # noqa: F401  (registers the ids)


async def _misbehave(url: str) -> None:
    """Errors of three codes, on a connection of its own: a step of no session, an unknown op, a bad frame."""
    async with websockets.connect(url, additional_headers={"Authorization": "Bearer secret"}) as socket:
        for frame in ('{"id": 1, "op": "step", "session": "nope", "action": "x"}', '{"id": 2, "op": "fly"}', "[1,"):
            await socket.send(frame)
            await socket.recv()


def test_metrics_count_every_workers_sessions_steps_and_errors(start_server):
    url = start_server("guess", "--token", "secret", workers=2)
    envs = gym.make_vec("openenv/guess", num_envs=6, base_url=url, token="secret")
    envs.reset(seed=0)
    action = {"name": "guess", "arguments": {"number": 50}}
    for _ in range(4):
        envs.step([action] * 6)
    env = gym.make("openenv/guess", base_url=url, token="secret")
    env.reset(seed=1)
    env.step(action)
    asyncio.run(_misbehave(url))

    expected = {("openenv_gym_sessions", ()): 7.0,
                ("openenv_gym_errors_total", (("code", "unknown_session"),)): 1.0,
                ("openenv_gym_errors_total", (("code", "unknown_op"),)): 1.0,
                ("openenv_gym_errors_total", (("code", "bad_frame"),)): 1.0,
                ("openenv_gym_errors_total", (("code", "env_error"),)): 0.0,
                ("openenv_gym_model_requests_total", (("dialect", "chat"),)): 0.0,
                ("openenv_gym_sandboxes", ()): 0.0}
    seen: list[dict] = []

    def summed() -> bool:  # open without the token, as /healthz is: a scraper needs none; any worker answers
        seen.append(scrape(url))
        played = seen[-1].get(("openenv_gym_steps_total", ())), seen[-1].get(("openenv_gym_resets_total", ()))
        return all(seen[-1].get(key) == value for key, value in expected.items()) and played[0] + played[1] == 32

    assert wait_until(summed, timeout=20), {key: seen[-1].get(key) for key in expected}
    metrics = seen[-1]
    # 7 resets and 25 actions; an action sent to an episode that ended is an autoreset (a reset, not a step)
    assert metrics[("openenv_gym_resets_total", ())] >= 7
    # a batch of steps is one request (the vector client sends one per worker connection, or fewer); the buckets
    # are cumulative and end at +Inf with the count
    requests = metrics[("openenv_gym_step_request_seconds_count", ())]
    assert 4 + 1 <= requests <= 25
    assert metrics[("openenv_gym_step_request_seconds_bucket", (("le", "+Inf"),))] == requests
    assert metrics[("openenv_gym_step_request_seconds_sum", ())] > 0
    envs.close()
    env.close()
    assert wait_until(lambda: scrape(url)[("openenv_gym_sessions", ())] == 0.0)
