"""Resume after a dropped connection: sessions survive a cut socket, and every step is applied exactly once."""

import asyncio
import contextlib
import os
import signal
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import gymnasium as gym
import pytest
from conftest import env_path, health, run, wait_until

import openenv_gym
from benchmarks.tcp_proxy import CuttingProxy
from openenv_gym import errors
from openenv_gym.client.local import LocalServer


def _port(url: str) -> int:
    return urlsplit(url).port


async def _keep_cutting(proxy: CuttingProxy, times: int, every: float) -> None:
    for _ in range(times):
        await asyncio.sleep(every)
        proxy.cut()


def test_lock_step_through_ten_cuts_loses_and_repeats_no_step(start_server):
    url = start_server("echo", workers=2)

    async def main():
        async with CuttingProxy(_port(url)) as proxy, openenv_gym.AsyncVectorClient(proxy.url, 256) as client:
            await client.reset(options={"max_steps": 10**6})
            cutting = asyncio.ensure_future(_keep_cutting(proxy, times=10, every=0.3))
            steps = 0
            while not cutting.done() or steps < 20:
                result = await client.step([f"s{steps}"] * 256)
                steps += 1
                assert result.errors == {}
                assert [info["step"] for info in result.infos] == [steps] * 256  # the env's own count
                assert result.obs == [f"s{steps - 1}"] * 256
            await cutting
            assert proxy.cuts == 10
            resumed = sum(conn.resumed for t in client.transports for conn in t.connections)
            assert resumed >= 10

    run(main())


def test_lock_step_resets_through_cuts_are_applied_once(start_server):
    """Batch resets (one `resets` per connection, answered in columns) go on through cuts: every round's answers
    arrive, each env's episode starts over, and the server holds exactly the client's sessions."""
    url = start_server("echo", workers=2)

    async def main():
        async with CuttingProxy(_port(url)) as proxy, openenv_gym.AsyncVectorClient(proxy.url, 256) as client:
            cutting = asyncio.ensure_future(_keep_cutting(proxy, times=6, every=0.2))
            rounds = 0
            while not cutting.done() or rounds < 10:
                result = await client.reset(seed=rounds, options={"max_steps": 10**6})
                assert result.errors == {}
                result = await client.step([f"r{rounds}"] * 256)
                assert result.errors == {} and [info["step"] for info in result.infos] == [1] * 256
                rounds += 1
            await cutting
            assert proxy.cuts == 6
            assert health(url)["sessions"] == 256

    run(main())


def test_single_sessions_and_per_request_steps_survive_cuts(start_server):
    url = start_server("echo")

    async def main():
        async with CuttingProxy(_port(url)) as proxy, openenv_gym.connect(proxy.url) as conn:
            sessions = [conn.session() for _ in range(32)]
            await asyncio.gather(*(s.reset(options={"max_steps": 10**6}) for s in sessions))
            for step in range(1, 31):
                if step % 3 == 0:
                    proxy.cut()
                answers = await asyncio.gather(*(s.step("x") for s in sessions))
                assert [info["step"] for *_, info in answers] == [step] * 32
            assert conn.resumed >= 10
            created = conn.session()  # a new session after the cuts: the connection works as before
            proxy.cut()
            await created.reset()
            assert (await created.step("hi"))[0] == "hi"

    run(main())


def test_past_the_resume_window_waiting_requests_fail_with_a_clear_error(start_server):
    url = start_server(env_path("faulty"), "--resume-window", "1")

    async def main():
        async with CuttingProxy(_port(url)) as proxy:
            conn = await openenv_gym.connect(proxy.url)
            session = conn.session()
            await session.reset()
            slow = asyncio.ensure_future(session.step("slow"))
            await asyncio.sleep(0.05)
            proxy.refusing = True
            proxy.cut()
            with pytest.raises(errors.ConnectionLostError, match=r"could not be resumed within 1 s"):
                await asyncio.wait_for(slow, 30)
            assert conn.closed
            assert wait_until(lambda: health(url)["sessions"] == 0)  # the server ended them after its window

    run(main())


def test_a_client_that_closes_ends_its_sessions_at_once(start_server):
    url = start_server("echo")

    async def main():
        async with openenv_gym.connect(url) as conn:
            await conn.session().reset()
            assert health(url)["sessions"] == 1
        assert wait_until(lambda: health(url)["sessions"] == 0, timeout=5)  # no resume window for a close

    run(main())


def _worker_pids(server_pid: int) -> list[int]:
    return [int(pid) for pid in Path(f"/proc/{server_pid}/task/{server_pid}/children").read_text().split()]


def test_when_a_worker_dies_only_its_sessions_fail_and_are_reset():
    """The vector env keeps going: the envs of the dead worker report the error once, then autoreset."""
    server = LocalServer("echo", 2, 1000)
    try:
        envs = gym.make_vec("openenv/echo", num_envs=8, base_url=server.url)
        envs.reset(seed=0, options={"max_steps": 10**6})
        envs.step(["a"] * 8)
        os.kill(_worker_pids(server.process.pid)[0], signal.SIGKILL)
        obs, rewards, terminated, truncated, infos = envs.step(["b"] * 8)
        failed = infos["_error"]
        assert 0 < failed.sum() < 8  # only the dead worker's envs
        assert all(code == "ConnectionLostError" for code in infos["error"]["code"][failed])
        assert truncated.tolist() == failed.tolist()
        assert all(o == "b" for o, f in zip(obs, failed, strict=True) if not f)
        obs, rewards, terminated, truncated, infos = envs.step(["c"] * 8)  # the failed ones are reset now
        assert "_error" not in infos or not infos["_error"].any()
        assert all(o == "c" for o, f in zip(obs, failed, strict=True) if not f)
        obs, rewards, terminated, truncated, infos = envs.step(["d"] * 8)
        assert list(obs) == ["d"] * 8 and ("_error" not in infos or not infos["_error"].any())
        envs.close()
    finally:
        server.stop()


@contextlib.contextmanager
def proxy_on_a_thread(port: int):
    """A CuttingProxy on an event loop of its own, for the sync gym face: cut() through `cut_now()`."""
    loop, ready, stop = asyncio.new_event_loop(), threading.Event(), {}

    async def serve() -> None:
        async with CuttingProxy(port) as proxy:
            stop["event"], stop["proxy"] = asyncio.Event(), proxy
            ready.set()
            await stop["event"].wait()

    thread = threading.Thread(target=loop.run_until_complete, args=(serve(),), daemon=True)
    thread.start()
    assert ready.wait(10)
    proxy = stop["proxy"]
    proxy.cut_now = lambda: loop.call_soon_threadsafe(proxy.cut)
    try:
        yield proxy
    finally:
        loop.call_soon_threadsafe(stop["event"].set)
        thread.join(10)


def test_a_gym_env_steps_through_cuts_as_if_nothing_happened(start_server):
    url = start_server("echo")
    with proxy_on_a_thread(_port(url)) as proxy:
        env = gym.make("openenv/echo", base_url=proxy.url)
        env.reset(options={"max_steps": 10**6})
        for step in range(1, 31):
            if step % 3 == 0:
                proxy.cut_now()
                time.sleep(0.05)
            obs, reward, terminated, truncated, info = env.step(f"m{step}")
            assert (obs, info["step"], truncated) == (f"m{step}", step, False)
        env.close()


def test_a_server_that_stops_fails_waiting_requests_at_once_without_resuming():
    """A stopping server closes with 1001: its sessions are gone, so the client does not wait out the window."""
    server = LocalServer(str(env_path("faulty")), 1, 1000)  # the default resume window: 60 s

    async def main():
        conn = await openenv_gym.connect(server.url)
        session = conn.session()
        await session.reset()
        hanging = asyncio.ensure_future(session.step("hang"))
        await asyncio.sleep(0.05)
        await asyncio.to_thread(server.stop)
        with pytest.raises(errors.ConnectionLostError, match=r"closed the connection \(1001 \(going away\)\)"):
            await asyncio.wait_for(hanging, 30)  # well inside the window
        assert conn.closed and conn.resumed == 0

    try:
        run(main())
    finally:
        server.stop()
