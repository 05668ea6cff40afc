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

import gymnasium as gym
import pytest
from conftest import health, run, wait_until

import openenv_gym
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


def test_a_server_killed_outright_is_given_up_once_its_source_stops_listing_it():
    """No close frame: the connection would try to resume for the server's whole window (60 s by default), but
    the source, asked at each failed reconnection, says the server is gone."""
    with servers(2) as (a, b):
        source = Listed(a.url, b.url)

        async def main():
            async with openenv_gym.AsyncVectorClient(source, 8) as client:
                await client.reset(options={"max_steps": 10**6})
                b.process.kill()
                b.process.wait()
                source.now = [a.url]
                result = await client.step(["x"] * 8)
                assert sorted(result.errors) == [4, 5, 6, 7]
                assert all("the server is gone (its source no longer lists it)" in str(error)
                           for error in result.errors.values())
                result = await client.reset([4, 5, 6, 7])
                assert result.errors == {} and client.urls == [a.url]

        run(main())


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
