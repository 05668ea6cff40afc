"""RemoteVectorEnv and AsyncVectorClient against real servers: Gymnasium semantics, spreading, errors."""

import asyncio
import re

import gymnasium as gym
import numpy as np
import orjson
import pytest
from conftest import env_path, health, run
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from openenv_gym import errors
from openenv_gym.client.native import transport as native_transport
from openenv_gym.client.vector import AsyncVectorClient
from openenv_gym.env import RemoteEnv
from openenv_gym.vector import RemoteVectorEnv, batch_infos

N = 4
ACTIONS = ["a", "bb", "ccc", "dddd"]


def assert_same(ours, theirs):
    for a, b in zip(ours, theirs, strict=True):
        if isinstance(a, dict):
            assert a.keys() == b.keys()
            for key in a:
                assert_same([a[key]], [b[key]])
        elif isinstance(a, np.ndarray) and a.dtype == object:
            assert list(a) == list(b)
        else:
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


# "end" terminates an episode of the faulty env: envs finish on different steps
SCHEDULE = [["a", "end", "b", "c"], ["d", "e", "end", "f"], ["end", "g", "h", "end"], ["i", "j", "k", "l"],
            ["end", "end", "m", "n"], ["o", "p", "q", "r"]]


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
def test_matches_gymnasium_sync_vector_env(faulty_url, mode):
    """Gymnasium's SyncVectorEnv over single RemoteEnvs on the same server is the behaviour to match."""
    ours = RemoteVectorEnv(num_envs=N, base_url=faulty_url, autoreset_mode=mode)
    theirs = SyncVectorEnv([lambda: RemoteEnv(base_url=faulty_url) for _ in range(N)], autoreset_mode=mode)
    assert ours.metadata["autoreset_mode"] == mode
    assert_same(ours.reset(seed=3), theirs.reset(seed=3))
    for actions in SCHEDULE:
        assert_same(ours.step(actions), theirs.step(actions))
    ours.close()
    theirs.close()


def test_make_vec_returns_a_remote_vector_env(echo_url):
    envs = gym.make_vec("openenv/echo", num_envs=N, base_url=echo_url)
    assert isinstance(envs, RemoteVectorEnv) and envs.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
    obs, infos = envs.reset(options={"max_steps": 2})
    assert obs == ("Send me a message and I will echo it.",) * N and infos["max_steps"].tolist() == [2] * N
    obs, rewards, terminated, truncated, infos = envs.step(ACTIONS)
    assert obs == tuple(ACTIONS) and rewards.tolist() == pytest.approx([0.1, 0.2, 0.3, 0.4])
    assert infos["step"].tolist() == [1] * N and infos["_step"].all()
    assert envs.step(ACTIONS)[3].all()  # truncated at max_steps
    envs.close()


def test_mixed_terminations_next_step(faulty_url):
    envs = RemoteVectorEnv(num_envs=3, base_url=faulty_url)
    envs.reset()
    obs, rewards, terminated, truncated, infos = envs.step(["end", "x", "y"])
    assert list(terminated) == [True, False, False] and rewards[0] == 1.0
    obs, rewards, terminated, truncated, infos = envs.step(["ignored", "x2", "y2"])
    assert obs == ("ready", "x2", "y2")  # env 0 was reset, its action ignored
    assert rewards[0] == 0.0 and not terminated[0] and infos["_seed"].tolist() == [True, False, False]
    envs.close()


def test_disabled_mode_with_partial_reset(faulty_url):
    envs = RemoteVectorEnv(num_envs=3, base_url=faulty_url, autoreset_mode=AutoresetMode.DISABLED)
    obs, infos = envs.reset(seed=10)
    assert infos["seed"].tolist() == [10, 11, 12]
    envs.step(["end", "x", "end"])
    with pytest.raises(errors.NoEpisodeError, match="reset them"):
        envs.step(["a", "b", "c"])
    mask = np.array([True, False, True])
    obs, infos = envs.reset(options={"reset_mask": mask})
    assert obs == ("ready", "x", "ready") and infos["_seed"].tolist() == [True, False, True]
    assert envs.step(["a", "b", "c"])[0] == ("a", "b", "c")
    with pytest.raises(TypeError, match=r"np\.bool_"):
        envs.reset(options={"reset_mask": np.array([1, 0, 1])})
    with pytest.raises(ValueError, match="at least one True"):
        envs.reset(options={"reset_mask": np.zeros(3, dtype=bool)})
    envs.close()


def test_close_is_idempotent_and_ends_sessions(start_server):
    url = start_server("echo")
    envs = gym.make_vec("openenv/echo", num_envs=8, base_url=url)
    envs.reset()
    assert health(url)["sessions"] == 8
    envs.close()
    envs.close()
    from conftest import wait_until
    assert wait_until(lambda: health(url)["sessions"] == 0)


def test_max_episode_steps_truncates(echo_url):
    envs = RemoteVectorEnv(num_envs=2, base_url=echo_url, max_episode_steps=2, options={"max_steps": 100})
    envs.reset()
    assert envs.step(["a", "b"])[3].tolist() == [False, False]
    assert envs.step(["a", "b"])[3].tolist() == [True, True]
    envs.step(["a", "b"])  # autoreset
    assert envs.step(["a", "b"])[3].tolist() == [False, False]
    envs.close()


def test_session_error_is_reported_for_that_env_only(faulty_url):
    envs = RemoteVectorEnv(num_envs=3, base_url=faulty_url)
    envs.reset()
    obs, rewards, terminated, truncated, infos = envs.step(["x", "raise", 42])
    assert obs[0] == "x" and truncated.tolist() == [False, True, False]
    assert infos["error"]["code"][1] == "env_error" and infos["_error"].tolist() == [False, True, True]
    assert infos["error"]["code"][2] == "invalid_action" and obs[2].startswith("Invalid action")
    obs, *_ = envs.step(["y", "ignored", "z"])
    assert obs == ("y", "ready", "z")  # env 1 got a new session
    envs.close()


def test_sessions_spread_over_two_servers(start_server):
    urls = [start_server("echo", workers=2), start_server("echo")]
    envs = gym.make_vec("openenv/echo", num_envs=30, base_url=urls)
    envs.reset()
    first, second = health(urls[0]), health(urls[1])
    assert first["sessions"] == 15 and second["sessions"] == 15
    assert all(count > 0 for count in first["sessions_per_worker"])  # both workers of the first server
    assert envs.step(["hi"] * 30)[0] == ("hi",) * 30
    envs.close()


def test_capacity_moves_sessions_to_another_server(start_server):
    small, big = start_server("echo", max_sessions=2), start_server("echo")

    async def main():
        async with AsyncVectorClient([small, big], 6) as client:
            result = await client.reset()
            assert not result.errors and health(small)["sessions"] == 2 and health(big)["sessions"] == 4
            assert (await client.step(["x"] * 6)).obs == ["x"] * 6
        async with AsyncVectorClient(small, 3, reset_retry_window=1.0) as client:
            with pytest.raises(errors.CapacityError, match=r"every server is full"):
                await client.reset()
            assert health(small)["sessions"] == 2  # the two that fit still run

    run(main())


def test_a_reset_refused_for_capacity_is_tried_again_until_room_frees_up(start_server):
    """A session that cannot start yet is not dropped: it is tried again, with backoff, and says how often."""
    url = start_server("echo", max_sessions=2)

    async def main():
        async with AsyncVectorClient(url, 2) as holder, AsyncVectorClient(url, 2) as client:
            first = await holder.reset()
            client.send_reset()
            await asyncio.sleep(0.5)  # a few tries fail meanwhile
            assert client.in_flight.all() and not client.live.any()
            await holder.close()  # room frees up
            result = await client.gather([0, 1])
            assert result.errors == {} and result.obs == first.obs
            assert all(info["retries"] >= 2 for info in result.infos)
            assert (await client.step(["x", "y"])).obs == ["x", "y"]

    run(main())


def test_send_recv_returns_fast_sessions_first(start_server):
    url = start_server(env_path("faulty"))

    async def main():
        async with AsyncVectorClient(url, 4) as client:
            await client.reset()
            client.send(["slow", "a", "b", "c"])
            first = await client.recv(min_results=3)
            assert sorted(first.ids.tolist()) == [1, 2, 3]  # not held back by env 0
            with pytest.raises(RuntimeError, match="still wait"):
                client.send(["x"], ids=[0])
            late = await client.recv(min_results=1)
            assert late.ids.tolist() == [0] and late.obs == ["slow done"]
            assert len(await client.recv()) == 0  # nothing in flight

    run(main())


def test_one_env_sends_of_one_loop_iteration_leave_as_one_frame_per_connection(echo_url):
    """The rollout stream sends each env's action as its policy call returns: those of one iteration go together,
    answered like any batch; a send checked wrong raises at once and leaves the others going."""
    async def main():
        async with AsyncVectorClient(echo_url, 64, connections_per_worker=2) as client:
            connections = [conn for transport in client.transports for conn in transport.connections]
            frames: list[bytes] = []
            for conn in connections:  # count the frames each socket sends
                def counted(frame, text=None, ws_send=conn._ws.send):
                    frames.append(frame)
                    return ws_send(frame, text=text)
                conn._ws.send = counted
            await client.reset(seed=0)
            frames.clear()
            for env in reversed(range(64)):
                client.send([f"m{env}"], ids=[env])
            with pytest.raises(RuntimeError, match="still wait"):
                client.send(["again"], ids=[5])
            with pytest.raises(IndexError, match="out of range"):
                client.send(["x"], ids=[64])
            answers: dict[int, str] = {}
            while len(answers) < 64:
                result = await client.recv(min_results=1)
                answers.update(zip(result.ids.tolist(), result.obs, strict=True))
            assert answers == {env: f"m{env}" for env in range(64)}
            assert len(frames) == len(connections) == 2
            assert not client.in_flight.any() and client.live.all()

    run(main())


def test_one_env_answers_read_in_columns_are_the_answers_one_by_one(faulty_url, monkeypatch):
    """Sends and resets one env at a time (the rollout stream's way) read the same results, errors included, whether
    the connections asked for their answers in columns (the default) or not (the answers of older servers)."""
    moves = ["a", "raise", "slow", "end", "b", "unencodable", "c", "d"] * 2

    async def play() -> list[tuple]:
        async with AsyncVectorClient(faulty_url, 16, connections_per_worker=2) as client:
            assert all(conn.columns is asking for t in client.transports for conn in t.connections)
            rows = []

            async def answers() -> None:
                while client.in_flight.any():
                    result = await client.recv(min_results=1)
                    rows.extend((env, result.obs[k], float(result.rewards[k]), bool(result.terminated[k]),
                                 bool(result.truncated[k]), repr(result.errors.get(env)), str(result.infos[k]))
                                for k, env in enumerate(result.ids.tolist()))

            for env in range(16):
                client.send_reset([env], seed=env)
            await answers()
            for env in range(16):
                client.send([moves[env]], ids=[env])
            await answers()
            return rows

    asking = True
    with_columns = run(play())
    asking = False
    connect = native_transport.connect
    monkeypatch.setattr(native_transport, "connect", lambda *args, **kwargs: connect(*args, **kwargs, columns=False))
    one_by_one = run(play())
    assert len(with_columns) == 32 and sorted(with_columns) == sorted(one_by_one)
    assert {row[5].partition("(")[0] for row in with_columns} == {"None", "EnvError"}  # errors among them


def test_a_batch_reset_is_one_resets_request_per_connection_and_answers_as_separate_resets(faulty_url):
    """reset() asks each connection for its share in one `resets` request, answered in columns; against a server
    of protocol 1 the client sends one `reset` per env instead, and the answers are the same."""
    async def reset_through(protocol: int) -> tuple[list[list[dict]], object]:
        async with AsyncVectorClient(faulty_url, 16, connections_per_worker=2) as client:
            frames: list[list[dict]] = []
            for transport in client.transports:
                transport.protocol = min(transport.protocol, protocol)
                for conn in transport.connections:
                    def counted(frame, text=None, ws_send=conn._ws.send):
                        frames.append(orjson.loads(frame))
                        return ws_send(frame, text=text)
                    conn._ws.send = counted
            options = [{"fail": env == 3} for env in range(16)]
            result = await client.reset(seed=[100 + env for env in range(16)], options=options)
            sent = list(frames)
            stepped = await client.step(["x"] * 15, [env for env in range(16) if env != 3])
            assert stepped.errors == {}  # the sessions the resets made play
            return sent, result

    async def main():
        (columns, batched), (per_env, separate) = await reset_through(2), await reset_through(1)
        assert [[m["op"] for m in frame] for frame in columns] == [["resets"], ["resets"]]
        assert sorted(len(frame[0]["sessions"]) for frame in columns) == [8, 8]
        assert {m["op"] for frame in per_env for m in frame} == {"reset"} and sum(map(len, per_env)) == 16
        for result in (batched, separate):
            assert [info.get("seed") for info in result.infos] == [100 + env for env in range(16) if env != 3][:3] + \
                [None] + [100 + env for env in range(4, 16)]
        assert batched.obs == separate.obs and list(batched.errors) == list(separate.errors) == [3]
        assert str(batched.errors[3]) == str(separate.errors[3])

    run(main())


def test_batch_infos_matches_gymnasium_add_info():
    infos = [{"a": 1, "s": "x", "d": {"k": 2.5}}, {}, {"a": 3, "f": 1.5, "b": True, "d": {"k": 1.0}}]
    envs = [0, 2, 3]
    expected: dict = {}
    helper = SyncVectorEnv.__new__(SyncVectorEnv)
    helper.num_envs = 5
    for env, info in zip(envs, infos, strict=True):
        expected = helper._add_info(expected, info, env)
    assert_same([batch_infos(infos, envs, 5)], [expected])


def test_ten_thousand_sessions_smoke(start_server):
    url = start_server("echo", workers=2, max_sessions=10_000)
    envs = gym.make_vec("openenv/echo", num_envs=10_000, base_url=url, options={"max_steps": 100})
    obs, infos = envs.reset(seed=0)
    assert len(obs) == 10_000 and health(url)["sessions"] == 10_000
    for step in range(3):
        obs, rewards, terminated, truncated, infos = envs.step([f"m{step}"] * 10_000)
        assert obs == (f"m{step}",) * 10_000 and (rewards == 0.2).all() and not truncated.any()
    envs.close()


def test_vector_env_in_a_running_loop(echo_url):
    async def main():
        envs = RemoteVectorEnv(num_envs=2, base_url=echo_url)
        envs.reset()
        obs = envs.step(["p", "q"])[0]
        envs.close()
        return obs

    assert asyncio.run(main()) == ("p", "q")


def test_groups_play_the_same_tasks_whenever_each_member_gets_to_them(guess_url):
    envs = gym.make_vec("openenv/guess", num_envs=8, base_url=guess_url, group_size=4)
    _, infos = envs.reset(seed=0)
    assert list(infos["group"]) == ["0.0"] * 4 + ["1.0"] * 4
    rng = np.random.default_rng(1)
    secrets: dict[str, set] = {}  # each group episode's hidden number, as each member found it out
    for _ in range(80):  # members give up (or guess right) at different steps: their episodes part ways
        actions = [{"name": "give_up", "arguments": {}} if rng.random() < 0.3 else
                   {"name": "guess", "arguments": {"number": int(rng.integers(1, 101))}} for _ in range(8)]
        obs, _, terminated, truncated, infos = envs.step(actions)
        for k in np.flatnonzero(terminated | truncated):  # "The number was N." or "N is correct!"
            secrets.setdefault(infos["group"][k], set()).add(int(re.findall(r"\d+", obs[k])[0]))
    envs.close()
    assert len(secrets) > 8 and all(len(seen) == 1 for seen in secrets.values())  # one task for all its members
    assert len({secret for seen in secrets.values() for secret in seen}) > 4  # and not one task for every group


def test_group_size_must_divide_num_envs(guess_url):
    for size in (0, 3):
        with pytest.raises(ValueError, match="group_size must be at least 1 and divide num_envs"):
            gym.make_vec("openenv/guess", num_envs=8, base_url=guess_url, group_size=size)
