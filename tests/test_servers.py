"""Servers that go and come: the envs of a lost server report it once and move at their next reset; servers
that join take envs over; a DNS name stands for every address it resolves to."""

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from urllib.parse import urlsplit

import gymnasium as gym
import pytest
from conftest import health, run, wait_until

import openenv_gym
from benchmarks import recovery
from benchmarks.tcp_proxy import CuttingProxy
from openenv_gym import errors
from openenv_gym.client.local import LocalServer
from openenv_gym.client.servers import DnsServers, FixedServers, server_source

NSS_WRAPPER = Path("/usr/lib/x86_64-linux-gnu/libnss_wrapper.so")  # Debian's libnss-wrapper (make test installs it)


class Listed:
    """A server source whose list the test changes, as a Ray handle's changes when an actor restarts."""

    def __init__(self, *urls: str) -> None:
        self.now = list(urls)

    def urls(self) -> list[str]:
        return list(self.now)


@contextlib.contextmanager
def servers(count: int, **kwargs):
    started = [LocalServer("echo", 1, 1000, **kwargs) for _ in range(count)]
    try:
        yield started
    finally:
        for server in started:
            server.stop()


def test_envs_of_a_stopped_server_report_it_once_then_move_to_a_live_one():
    with servers(2) as (a, b):
        envs = gym.make_vec("openenv/echo", num_envs=8, base_url=[a.url, b.url])
        envs.reset(seed=0, options={"max_steps": 10**6})
        envs.step(["a"] * 8)
        b.stop()
        obs, rewards, terminated, truncated, infos = envs.step(["b"] * 8)
        failed = infos["_error"]
        assert failed.tolist() == [False] * 4 + [True] * 4  # b held the second block, and only those fail
        assert set(infos["error"]["code"][failed]) == {"ConnectionLostError"}
        assert truncated.tolist() == failed.tolist() and list(obs[:4]) == ["b"] * 4
        obs, rewards, terminated, truncated, infos = envs.step(["c"] * 8)  # the failed ones reset, on a
        assert infos["_moved"].tolist() == failed.tolist()
        moved = infos["moved"]  # Gymnasium's dict of arrays, nested
        assert set(moved["from"][failed]) == {b.url} and set(moved["to"][failed]) == {a.url}
        assert "_error" not in infos and not truncated.any()
        obs, rewards, terminated, truncated, infos = envs.step(["d"] * 8)
        assert list(obs) == ["d"] * 8 and "_error" not in infos
        assert health(a.url)["sessions"] == 8
        assert envs.unwrapped.client.urls == [a.url]
        envs.close()


def test_a_server_that_joins_takes_its_share_of_envs_as_they_reset():
    with servers(3) as (a, b, c):
        source = Listed(a.url, b.url)

        async def main():
            async with openenv_gym.AsyncVectorClient(source, 12) as client:
                assert client.urls == [a.url, b.url]
                await client.reset(options={"max_steps": 1})
                b.stop()
                source.now = [a.url, c.url]  # b came back elsewhere, as a restarted actor does
                moved: dict[int, dict] = {}
                for _ in range(200):  # resets until every env sits on a server that serves, in equal shares
                    result = await client.step(["x"] * 12)
                    if result.errors:
                        assert {type(e) for e in result.errors.values()} == {errors.ConnectionLostError}
                    result = await client.reset()
                    assert result.errors == {}, "no env waits for a server once one serves"
                    moved |= {env: info["moved"] for env, info in zip(result.ids, result.infos, strict=True)
                              if "moved" in info}
                    if sorted(client.urls) == sorted([a.url, c.url]) and not client._unbalanced:
                        break
                    await asyncio.sleep(0.05)
                assert sorted(moved) == list(range(6, 12))  # b's envs, told once each where they went
                assert {m["from"] for m in moved.values()} == {b.url}
                assert wait_until(lambda: health(a.url)["sessions"] == health(c.url)["sessions"] == 6)

        run(main())


def test_a_server_killed_outright_is_given_up_at_once_since_its_address_refuses():
    """No close frame, and a plain list of URLs: the connection tries to resume, but nothing listens at the
    address any more, so the sessions are lost at once instead of after the resume window (60 s by default)."""
    with servers(2) as (a, b):

        async def main():
            async with openenv_gym.AsyncVectorClient([a.url, b.url], 8) as client:
                await client.reset(options={"max_steps": 10**6})
                b.process.kill()
                b.process.wait()
                loop = asyncio.get_running_loop()
                began = loop.time()
                result = await client.step(["x"] * 8)
                assert loop.time() - began < 10
                assert sorted(result.errors) == [4, 5, 6, 7]
                assert all("refused the reconnection" in str(error) for error in result.errors.values())
                result = await client.reset([4, 5, 6, 7])
                assert result.errors == {} and client.urls == [a.url]
                assert all(info["moved"] == {"from": b.url, "to": a.url} for info in result.infos)

        run(main())


def test_a_server_out_of_reach_is_given_up_once_its_source_stops_listing_it():
    """A server whose address does not refuse but never answers (a pod deleted behind a proxy): the connection
    would try to resume for the whole window, but the source, asked at each failed reconnection, says it is gone."""
    with servers(2) as (a, b):

        async def main():
            async with CuttingProxy(urlsplit(b.url).port) as proxy:
                source = Listed(a.url, proxy.url)
                async with openenv_gym.AsyncVectorClient(source, 8) as client:
                    await client.reset(options={"max_steps": 10**6})
                    proxy.refusing = True  # connections are accepted, then cut: no refusal to go by
                    proxy.cut()
                    source.now = [a.url]
                    result = await client.step(["x"] * 8)
                    assert sorted(result.errors) == [4, 5, 6, 7]
                    assert all("the server is gone (its source no longer lists it)" in str(error)
                               for error in result.errors.values())
                    result = await client.reset([4, 5, 6, 7])
                    assert result.errors == {} and client.urls == [a.url]

        run(main())


def test_a_vector_env_whose_servers_are_all_gone_reports_it_each_step_and_never_raises():
    """While no server is live, the autoreset of the lost envs fails within its window and the step says so
    (truncated, info["error"]); when a server is back at the address, the envs start there. Only the user's own
    reset() raises, saying that no server serves."""
    with servers(1) as (a,):
        port = urlsplit(a.url).port
        envs = gym.make_vec("openenv/echo", num_envs=4, base_url=[a.url], reset_retry_window=0.5)
        envs.reset(seed=0, options={"max_steps": 10**6})
        a.process.kill()
        a.process.wait()
        for _ in range(3):  # the loss, then two autoresets that find no server
            obs, rewards, terminated, truncated, infos = envs.step(["x"] * 4)
            assert truncated.all() and infos["_error"].all()
            assert set(infos["error"]["code"]) <= {"ConnectionLostError", "ServerRefusedError"}
        assert "no server serves now" in infos["error"]["message"][0]
        with pytest.raises(errors.ConnectionLostError, match="reset of env 0 failed: no server serves now"):
            envs.reset(seed=0)
        with LocalServer("echo", 1, 1000, port=port) as back:  # the server is back where it was
            for _ in range(50):  # bounded: the client asks for the server again about once a second
                obs, rewards, terminated, truncated, infos = envs.step(["y"] * 4)
                if "_error" not in infos:
                    break
            assert not truncated.any() and health(back.url)["sessions"] == 4
            assert list(envs.step(["z"] * 4)[0]) == ["z"] * 4
            envs.close()


def test_a_single_env_resets_on_the_next_server_when_its_own_is_gone():
    with servers(2) as (a, b):
        env = gym.make("openenv/echo", base_url=[a.url, b.url])
        env.reset(seed=0)
        mine = a if env.unwrapped.base_url == a.url else b
        other = b if mine is a else a
        mine.process.kill()
        mine.process.wait()
        with contextlib.suppress(errors.ConnectionLostError):
            env.step("lost")  # the step in flight is lost with its server
        obs, info = env.reset(seed=1)
        assert env.unwrapped.base_url == other.url and health(other.url)["sessions"] == 1
        assert env.step("here")[0] == "here"
        env.close()


@pytest.mark.bench  # (a fault test under load, as its Ray twin in tests/test_ray.py: make bench runs both)
@pytest.mark.timeout(600)
def test_servers_killed_by_pid_again_and_again_under_load_never_raise_from_step():
    """5 rounds, every core busy at each kill: one of two plain servers killed mid-step, started again on its port
    (benchmarks.recovery, in `make bench`, runs 20)."""
    rounds = recovery.plain(rounds=5, num_envs=64, deadline=60)
    assert [r["exceptions"] for r in rounds] == [[]] * 5
    assert all(r["seconds"] is not None and r["lost_env_steps"] + r["retries"] > 0 for r in rounds), rounds
    assert all(r["back_with_sessions_s"] is not None for r in rounds), rounds  # the victim took envs again each time


def test_server_sources_are_named_by_base_url():
    assert server_source("ws://h:1") == FixedServers(("ws://h:1",))
    assert server_source(["ws://h:1", "ws://h:2"]) == FixedServers(("ws://h:1", "ws://h:2"))
    assert server_source("dns+ws://envs.default.svc:8000") == DnsServers("ws://envs.default.svc:8000")
    assert server_source(["dns+ws://envs.default.svc:8000"]) == DnsServers("ws://envs.default.svc:8000")
    listed = Listed("ws://h:1")
    assert server_source(listed) is listed
    for bad in ([], [1], ["dns+ws://a:1", "ws://b:1"]):
        with pytest.raises(ValueError, match="base_url must be"):
            server_source(bad)
    with pytest.raises(ValueError, match="needs a host name and a port"):
        DnsServers("ws://envs.default.svc").urls()
    with pytest.raises(errors.ServerUnreachableError, match="does not resolve"):
        DnsServers("ws://no-such-service.invalid:8000").urls()


DNS_CLIENT = textwrap.dedent("""
    import asyncio, json, sys
    import openenv_gym

    async def main():
        async with openenv_gym.AsyncVectorClient(sys.argv[1], 64) as client:
            await client.reset(seed=0)
            result = await client.step([f"a{i}" for i in range(64)])
            assert result.errors == {} and result.obs == [f"a{i}" for i in range(64)]
            print(json.dumps({"urls": client.urls, "load": [client.transport_of.count(u) for u in range(2)]}))

    asyncio.run(main())
""")


def test_a_dns_name_spreads_sessions_over_every_address_it_resolves_to(tmp_path):
    """Like a headless Service: one name, one A record per pod, every pod on the same port. The client runs
    with nss_wrapper, so getaddrinfo reads the test's own hosts file (the name has two loopback addresses)."""
    assert NSS_WRAPPER.exists(), f"this test needs Debian's libnss-wrapper at {NSS_WRAPPER}: make test installs it"
    with LocalServer("echo", 1, 1000, host="127.0.0.2") as first:
        port = int(first.url.rsplit(":", 1)[1])
        with LocalServer("echo", 1, 1000, host="127.0.0.3", port=port) as second:
            hosts = tmp_path / "hosts"
            hosts.write_text("127.0.0.2 envs.test.svc.cluster.local\n127.0.0.3 envs.test.svc.cluster.local\n")
            environment = os.environ | {"LD_PRELOAD": str(NSS_WRAPPER), "NSS_WRAPPER_HOSTS": str(hosts)}
            done = subprocess.run([sys.executable, "-c", DNS_CLIENT, f"dns+ws://envs.test.svc.cluster.local:{port}"],
                                  env=environment, capture_output=True, text=True, timeout=60)
            assert done.returncode == 0, done.stderr
            seen = json.loads(done.stdout)
            assert seen == {"urls": [first.url, second.url], "load": [32, 32]}
