"""GroupJudge: a group's attempts scored together by a model behind a real OpenAI-compatible server (scripted)."""

import pytest
from conftest import run
from openai_server import ScriptedServer

from openenv_gym.rollout.groups import Group
from openenv_gym.rollout.judges import JUDGE_PROMPT, GroupJudge, GroupJudgeError, parse_scores
from openenv_gym.rollout.records import Episode


@pytest.fixture(scope="module")
def model_server():
    with ScriptedServer() as server:
        yield server


def episode(member: int, answer: str, error: str | None = None) -> Episode:
    return Episode(member, 7, {}, messages=[{"role": "user", "content": "Name a fruit."},
                                            {"role": "assistant", "content": answer}],
                   rewards=[0.0], group="g0", group_member=member, error=error)


def test_a_group_is_judged_in_one_request_and_each_member_gets_its_score(model_server):
    judge = GroupJudge(model_server.url, "group-judge")
    group = Group("g0", [episode(0, "fig"), episode(1, "kiwi", error="policy: timeout"), episode(2, "apple")],
                  complete=False)

    async def main():
        scores = await judge.score("Name a fruit.", ["fig", "banana", "pineapple tree"])
        asked = model_server.bodies[-1]["messages"]
        return scores, asked, await judge.score_group(group), model_server.bodies[-1]["messages"]
    scores, asked, group_scores, group_asked = run(main())
    assert asked[0] == {"role": "system", "content": JUDGE_PROMPT}
    shown = asked[1]["content"]
    assert shown.startswith("Task:\nName a fruit.") and "Attempt 3:\npineapple tree" in shown
    assert scores == [0.3, 0.6, 1.0]  # the scripted judge: each attempt's length, of 10
    assert group_scores == [0.3, None, 0.5] and "kiwi" not in group_asked[1]["content"]  # the failed one not shown
    assert [e.group_reward for e in group.episodes] == [0.3, None, 0.5]


def test_a_judge_that_answers_otherwise_fails_its_group_only(model_server):
    judge = GroupJudge(model_server.url, "miscounting-judge")
    group = Group("g1", [episode(0, "fig"), episode(1, "plum")])

    async def main():
        with pytest.raises(GroupJudgeError, match="2 scores for 3 attempts"):
            await judge.score("t", ["a", "b", "c"])
        return await judge.score_group(group)
    assert run(main()) == [None, None]
    errors = [e.info.get("group_error", "") for e in group.episodes]
    assert all(error.startswith("group_judge: GroupJudgeError") for error in errors), errors
    with pytest.raises(GroupJudgeError, match="with numbers"):
        parse_scores('{"scores": ["high", 3]}', 2)
    assert parse_scores('Here: {"scores": [12, -1]} done', 2) == [1.0, 0.0]  # kept within [0, 1]


def test_as_a_trl_reward_function_each_run_of_identical_prompts_is_one_group(model_server):
    judge = GroupJudge(model_server.url, "group-judge")
    prompts = ["p1"] * 3 + [[{"role": "user", "content": "p2"}]] * 2
    completions = ["a", "bb", "ccc", [{"role": "assistant", "content": "dddd"}], "e"]
    before = model_server.requests
    assert judge(prompts, completions) == [0.1, 0.2, 0.3, 0.4, 0.1]
    assert model_server.requests - before == 2  # a request per group
    failing = GroupJudge(model_server.url, "broken")
    assert failing(["p"] * 2, ["a", "b"]) == [None, None]  # TRL leaves None out of the baseline
