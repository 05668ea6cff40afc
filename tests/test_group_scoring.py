"""GRPO groups scored by the environment, on the server: the reset option `group`, the `group` op, what the server
keeps and drops, and the rollout stream over them (tests/envs/contest ranks a group's replies by length)."""

import asyncio
import contextlib
import itertools

import pytest
from conftest import env_path, run

import openenv_gym
from openenv_gym import Reply
from openenv_gym.errors import BadRequestError, StepTimeoutError
from openenv_gym.rollout.turns import ToolCall


@pytest.fixture(scope="module")
def contest_url():
    from openenv_gym.client.local import LocalServer

    with LocalServer(env_path("contest"), 2, 1000, "--group-timeout", "2") as server:
        yield server.url


def replies(lengths):
    """A policy whose n-th call replies with lengths[n % len] characters."""
    counter = itertools.count()

    async def policy(messages, tools):
        return "x" * lengths[next(counter) % len(lengths)]
    return policy


async def collect(url, policy, **kwargs):
    # any id with base_url reaches a running server; openenv/ors's one is switched to native
    async with contextlib.aclosing(openenv_gym.rollouts("openenv/ors", policy, base_url=url, transport="native",
                                                        **kwargs)) as stream:
        return [group async for group in stream]


def expected_rewards(group):
    """The contest's own rule, from what each member said: the longest reply 1, the shortest 0."""
    lengths = [len(episode.messages[-2]["content"]) for episode in group.episodes]
    low, high = min(lengths), max(lengths)
    return [(length - low) / ((high - low) or 1) for length in lengths]


def test_the_server_scores_each_group_with_the_envs_score_group(contest_url):
    groups = run(collect(contest_url, replies([3, 8, 1, 5, 2]), num_envs=6, episodes=5, group_size=4))
    assert len(groups) == 5 and all(group.complete for group in groups)
    for group in groups:
        assert [e.group_reward for e in group.episodes] == pytest.approx(expected_rewards(group))
        assert all(e.total_reward == 0.0 for e in group.episodes)  # the env's per-episode reward
        assert all(e.info["rank_of"] == 4 and e.info["steps"] == 1 for e in group.episodes)  # score_group's infos
        mean = sum(expected_rewards(group)) / 4
        assert [e.advantage for e in group.episodes] == pytest.approx([r - mean for r in expected_rewards(group)])


def test_members_ending_at_different_steps_and_one_played_again_are_scored_together(contest_url):
    calls = itertools.count()

    async def policy(messages, tools):
        n = next(calls)
        if n == 1:
            raise RuntimeError("the model server fell over")  # this member is played again
        return "again" if n % 3 == 0 and len(messages) < 3 else "y" * (n % 5 + 1)

    [group] = run(collect(contest_url, policy, num_envs=4, episodes=1, group_size=4))
    assert group.complete and sorted(e.group_member for e in group.episodes) == [0, 1, 2, 3]
    assert any(e.steps == 2 for e in group.episodes)
    assert [e.group_reward for e in group.episodes] == pytest.approx(expected_rewards(group))


@pytest.mark.parametrize("judge, message", [
    ("raise", "score_group of contest raised ValueError: the judge walked out"),
    ("short", "score_group of contest returned 1 scores for a group of 4 episodes"),
])
def test_a_failing_group_function_marks_every_member_and_the_stream_goes_on(contest_url, judge, message):
    groups = run(collect(contest_url, replies([2, 4]), num_envs=4, episodes=2, group_size=4,
                         options={"judge": judge}))
    assert len(groups) == 2
    for group in groups:
        assert not group.complete
        for episode in group.episodes:
            assert message in episode.error and episode.info["error"]["message"].startswith(message)
            assert episode.info["error"]["code"] == "env_error" and episode.advantage is None
    # the server and its other clients go on
    assert all(g.complete for g in run(collect(contest_url, replies([1, 2]), num_envs=4, episodes=1, group_size=4)))


def test_group_requests_are_checked_and_unasked_groups_are_dropped_after_the_timeout(contest_url, echo_url):
    async def main():
        async with openenv_gym.connect(echo_url) as conn:
            with pytest.raises(BadRequestError, match="scores no groups"):
                await conn.session().reset(options={"group": {"id": "g", "member": 0}})
            with pytest.raises(BadRequestError, match="scores no groups"):
                await conn.score_group("g", 1)
        async with openenv_gym.connect(contest_url) as conn:
            session = conn.session()
            for bad in ("g", {"id": "", "member": 0}, {"id": "g", "member": -1}, {"id": "g", "member": 5000}):
                with pytest.raises(BadRequestError, match="option group"):
                    await session.reset(options={"group": bad})
            for group, members in (("", 1), ("g", 0), ("g", 100_000), ("g", "4")):
                with pytest.raises(BadRequestError, match="field"):
                    await conn.score_group(group, members)
            # two of three members end; asked for three, the group times out (the server's --group-timeout 2)
            for member in range(2):
                await session.reset(options={"group": {"id": "late", "member": member}})
                await session.step("hello")
            with pytest.raises(StepTimeoutError, match=r"group 'late': 2 of its 3 members ended within 2 s"):
                await conn.score_group("late", 3)
            # a group nobody asks for is dropped once the timeout passes; the connection goes on
            dropped = (await conn.info())["groups"]["dropped"]
            await session.reset(options={"group": {"id": "forgotten", "member": 0}})
            await session.step("hi")
            info = await conn.info()
            assert info["groups"]["kept_episodes"] == 1 and info["limits"]["group_timeout"] == 2
            for _ in range(50):
                await asyncio.sleep(0.1)
                info = await conn.info()
                if info["groups"]["dropped"] > dropped:
                    break
            assert info["groups"]["dropped"] == dropped + 1 and info["groups"]["kept_episodes"] == 0
            await session.reset(options={"group": {"id": "asked", "member": 0}})
            await session.step("ok")
            score = await conn.score_group("asked", 1)
            assert score.members == [0] and score.rewards == [0.0]

    run(main())


def test_a_group_belongs_to_its_connection(contest_url):
    async def main():
        async with openenv_gym.connect(contest_url) as mine, openenv_gym.connect(contest_url) as other:
            session = mine.session()
            await session.reset(options={"group": {"id": "g", "member": 0}})
            await session.step("hello")
            theirs = asyncio.ensure_future(other.score_group("g", 1))  # another connection's group of that name
            score = await mine.score_group("g", 1)
            assert score.members == [0]
            with pytest.raises(StepTimeoutError, match="0 of its 1 members"):
                await theirs
    run(main())


def test_make_vec_asks_for_each_groups_score_when_its_last_member_ends(contest_url):
    import gymnasium as gym

    openenv_gym.register_all()
    envs = gym.make_vec("openenv/ors", num_envs=8, base_url=contest_url, transport="native", group_size=4)
    try:
        _, info = envs.reset(seed=1)
        scored = {}
        for t in range(4):  # envs 0, 3, 6 take two steps on even steps: members end at different steps
            actions = ["again" if t % 2 == 0 and i % 3 == 0 else "z" * (i % 4 + 1) for i in range(8)]
            _, _, terminated, truncated, info = envs.step(actions)
            for env in range(8):
                if info.get("_group_rewards", [False] * 8)[env]:
                    scored[str(info["group"][env])] = (env, info["group_rewards"][env], info["group_infos"][env])
        assert set(scored) == {"0.0", "1.0", "0.1", "1.1"}
        for env, rewards, infos in scored.values():  # the last member to end: the slow one, env 3 or env 6
            assert env in (3, 6) and rewards == pytest.approx([0.0, 1 / 3, 2 / 3, 1.0])
            assert [i["rank_of"] for i in infos] == [4] * 4
    finally:
        envs.close()


@pytest.mark.parametrize("env", ["guess", "contest"])
def test_a_server_killed_mid_stream_shrinks_no_group_silently(env):
    """Two servers, one killed outright while groups play: every group still comes, with all its G members, each
    finished or marked failed; members are played again on the live server, and a group that cannot be made
    whole (or, scored by the env, lost its kept episodes) says so. guess: groups gathered by the client; contest:
    scored by the server."""
    from openenv_gym.client.local import LocalServer

    source = "guess" if env == "guess" else env_path("contest")
    calls = itertools.count()

    async def policy(messages, tools):
        await asyncio.sleep(0.005)
        n = next(calls)
        if env == "guess":
            return Reply(tool_calls=[ToolCall("guess", {"number": n % 100 + 1})])
        return "z" * (n % 9 + 1)

    async def main(urls, victim):
        groups = []
        stream = openenv_gym.rollouts("openenv/guess" if env == "guess" else "openenv/ors", policy, base_url=urls,
                                      transport="native", num_envs=16, episodes=24, group_size=4, max_turns=3,
                                      reset_retry_window=5)
        async with contextlib.aclosing(stream):
            async for group in stream:
                groups.append(group)
                if len(groups) == 4:
                    victim.process.kill()
        return groups

    with LocalServer(source, 1, 1000) as kept, LocalServer(source, 1, 1000) as victim:
        groups = run(main([kept.url, victim.url], victim))
    assert len(groups) == 24 and len({g.id for g in groups}) == 24
    for group in groups:
        assert sorted(e.group_member for e in group.episodes) == [0, 1, 2, 3]
        assert group.complete == all(e.error is None for e in group.episodes)
        for episode in group.episodes:
            assert (episode.error is None) == (episode.advantage is not None)
            if env == "contest" and episode.error is None:
                assert episode.group_reward is not None
    if env == "contest":  # the groups kept on the lost server lost their episodes: they say so
        assert not all(group.complete for group in groups)
