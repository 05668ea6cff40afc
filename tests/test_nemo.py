"""NeMo Gym resource servers (kind nemo): imported, served in process through ASGI with a cookie jar per episode,
and scored as NeMo Gym scores the same episode.

Real parts only: nemo-gym 0.7.0 in the env's venv (on Python 3.13, its check relaxed), its own example servers as
the installed package ships them (each imported from its folder there), two servers of ours written to its rules
(a cookie-state tally, a Gymnasium-protocol game). The oracles: the rewards NeMo Gym stored with its example
rollouts (data/example_rollouts.jsonl, replayed action by action through our sessions), and NeMo Gym's own server
process (run_webserver, as `gym env start` starts it) verifying the same episodes over HTTP.
"""

import asyncio
import json
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from conftest import in_parallel, play_episode, write_files
from openai_server import ScriptedServer
from tool_shape import names_of
from verifiers_front import FRONT_END, rewards_of, verifiers_runs

import openenv_gym
from benchmarks.nemo_peer import NemoOwnServer, own_reward, replies_response
from benchmarks.nemo_replay import replayed_actions, rows, same_outputs, stored_outputs, task_of
from openenv_gym.client.local import LocalServer
from openenv_gym.errors import BadRequestError
from openenv_gym.importers import ImportFailedError, import_environment
from openenv_gym.manifests import load_manifest
from openenv_gym.manifests.venvs import ensure_venv

FIXTURES = Path(__file__).parent / "nemo_servers" / "resources_servers"
TALLY, REVERSE = FIXTURES / "tally", FIXTURES / "reverse_gym"
EXAMPLES = ("example_session_state_mgmt", "example_multi_step", "workplace_assistant", "example_multi_turn_gymnasium",
            "lc_niah")  # (lc_niah scores a thinking model's reasoning: its overlap with the prompt costs reward)
# (workplace_assistant's stored rollouts play other tasks than its example rows, and do not carry the tasks'
# ground truth that its /verify reads: it is played to its ground truth instead, below)
REPLAYED = tuple(name for name in EXAMPLES if name != "workplace_assistant")
pytestmark = pytest.mark.env_venvs(TALLY)


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(our tally imported, the folder where the venv's nemo-gym 0.7.0 lies with the resource servers it ships)."""
    tally = import_environment(TALLY, "tally", tmp_path_factory.mktemp("tally"))[0].folder  # checked: loaded
    python = str(ensure_venv(load_manifest(tally)))
    site = subprocess.run([python, "-c", "import nemo_gym, os; print(os.path.dirname(os.path.dirname("
                                         "nemo_gym.__file__)))"], capture_output=True, text=True, check=True)
    return tally, Path(site.stdout.strip())


@pytest.fixture(scope="module")
def nemo_servers(installed, tmp_path_factory):
    """({name: (ws url, env folder, source folder)}, {name: its server}): our two servers (with Verifiers front ends)
    and NeMo Gym's examples, each served."""
    out = tmp_path_factory.mktemp("nemo")
    tally, site = installed
    sources = {"tally": TALLY, "reverse_gym": REVERSE, **{name: site / "resources_servers" / name for name in EXAMPLES}}
    folders = {"tally": tally, **{name: import_environment(source, name, out, check=False)[0].folder
                                  for name, source in sources.items() if name != "tally"}}
    fronted = ("tally", "reverse_gym")
    servers = in_parallel(*(lambda name=name, folder=folder: LocalServer(
        str(folder), 1, 20_000, *(FRONT_END if name in fronted else ())) for name, folder in folders.items()))
    served = {name: (server.url, folders[name], sources[name]) for name, server in zip(folders, servers, strict=True)}
    single = site / "resources_servers" / "example_single_tool_call"  # re-verified only: not served
    served["example_single_tool_call"] = (None, import_environment(single, "single", out, check=False)[0].folder,
                                          single)
    yield served, dict(zip(folders, servers, strict=True))
    in_parallel(*(server.stop for server in servers))


@pytest.fixture(scope="module")
def nemo(nemo_servers):
    return nemo_servers[0]


@pytest.fixture(scope="module")
def nemo_own(nemo):
    """NeMo Gym's own server process of each server asked for, started once for the module (those asked together,
    at once)."""
    started: dict[str, NemoOwnServer] = {}

    def own(*names: str) -> list[NemoOwnServer]:
        missing = [name for name in names if name not in started]
        made = in_parallel(*(lambda name=name: NemoOwnServer.of(load_manifest(nemo[name][1])) for name in missing))
        started.update(zip(missing, made, strict=True))
        return [started[name] for name in names]
    yield own
    in_parallel(*(server.stop for server in started.values()))


@pytest.mark.parametrize("name", REPLAYED)
def test_every_stored_example_rollout_replayed_through_our_sessions_gets_its_stored_reward(nemo, name):
    url, folder, source = nemo[name]
    dataset = rows(source / "data" / "example.jsonl")
    for rollout in rows(source / "data" / "example_rollouts.jsonl"):
        actions = replayed_actions(rollout["response"]["output"])
        answers = play_episode(url, actions, options={"task": task_of(dataset, rollout)})
        if "response" in answers[-1][4]:  # the tools answered as they did for NeMo Gym (JSON: its spacing aside)
            ours = stored_outputs(answers[-1][4]["response"]["output"])
            assert same_outputs(ours, stored_outputs(rollout["response"]["output"]))
        total = sum(answer[1] for answer in answers[1:])
        assert total == pytest.approx(stored_reward(name, rollout)), (name, rollout["reward"], answers[-1])
        assert answers[-1][2] or answers[-1][3]


def stored_plays(dataset: list[dict], source: Path) -> list[tuple[int, list[dict]]]:
    """(task, the replies) of each of a server's stored example rollouts."""
    return [(task_of(dataset, rollout), replayed_actions(rollout["response"]["output"]))
            for rollout in rows(source / "data" / "example_rollouts.jsonl")]


def stored_reward(name: str, rollout: dict) -> float:
    """The reward NeMo Gym stored with a rollout, under the config the server ships. (lc_niah's were scored with its
    `lcs` overlap rule; it ships `ngram16`, whose overlap of the same reasoning it stored too: 0.031, 0.003 and 0.019
    for three of the five, the reward answer_score x (1 - overlap).)"""
    if name == "lc_niah":
        return rollout["answer_score"] * (1.0 - rollout["overlap_ngram16"])
    return rollout["reward"]


def test_a_server_that_exposes_its_tools_over_mcp_offers_them_and_plays_its_stored_rollouts(installed, tmp_path,
                                                                                              start_server):
    """example_mcp_weather's rows offer no tools: its config exposes its routes over MCP, where its agent (Claude
    Code) lists them. Built as NeMo's run_webserver builds it, its tools are the episode's, and its stored rollouts
    replay to their rewards (a call through its route: the same state as through MCP)."""
    _, site = installed
    source = site / "resources_servers" / "example_mcp_weather"
    url = start_server(str(import_environment(source, "mcp_weather", tmp_path, check=False)[0].folder))
    dataset = rows(source / "data" / "example.jsonl")
    for rollout in rows(source / "data" / "example_rollouts.jsonl"):
        answers = play_episode(url, replayed_actions(rollout["response"]["output"]),
                               options={"task": task_of(dataset, rollout)})
        tools = answers[0][1]["tools"]
        assert names_of(tools) == ["get_weather"]
        assert tools[0]["parameters"]["required"] == ["city"]
        assert answers[-1][1:3] == (rollout["reward"], True) == (1.0, True)
    assert play_episode(url, ["It is sunny."], options={"task": 0})[-1][1] == 0.0  # (no call: no reward)


def ground_truth_play(row: dict) -> list:
    """workplace_assistant's oracle policy: the row's ground-truth calls, one reply, then a last word."""
    calls = [{"id": f"gt_{i}", "type": "function", "function": call} for i, call in enumerate(row["ground_truth"])]
    return [{"content": None, "tool_calls": calls}, "Done."]


def test_workplace_assistant_played_to_its_ground_truth_is_rewarded_and_a_wrong_play_is_not(nemo):
    url, folder, source = nemo["workplace_assistant"]
    dataset = rows(source / "data" / "example.jsonl")
    for index, row in enumerate(dataset):
        answers = play_episode(url, ground_truth_play(row), options={"task": index})
        assert answers[-1][1:3] == (1.0, True), (index, answers[1][0][:300])
        assert play_episode(url, ["I did nothing."], options={"task": index})[-1][1] == 0.0


def test_nemo_gyms_own_server_process_verifies_our_episodes_to_the_same_rewards(nemo, nemo_own):
    """Each example episode played through our session ends with the Responses object it built; NeMo Gym's own
    server process, given the same calls over HTTP with its cookies, verifies that object to the same reward."""
    plays = {"example_multi_step": stored_plays, "lc_niah": stored_plays,
             "workplace_assistant": lambda dataset, source: [
                 (index, play) for index, row in enumerate(dataset)
                 for play in (ground_truth_play(row), ["I did nothing."])],
             "tally": lambda dataset, source: [
                 (index, [{"name": "add", "arguments": {"amount": -1}}, {"name": "add", "arguments": {"amount": 500}},
                          {"name": "add", "arguments": {"amount": row["expected_total"] - row["start"] + miss}},
                          "Done."]) for index, row in enumerate(dataset) for miss in (0, 1)]}
    overlaps: list[float] = []
    for (name, episodes), own in zip(plays.items(), nemo_own(*plays), strict=True):
        url, folder, source = nemo[name]
        dataset = rows(folder / load_manifest(folder).splits["example"])
        for task, actions in episodes(dataset, source):
            answers = play_episode(url, actions, options={"task": task})
            response = answers[-1][4]["response"]
            with httpx.Client(base_url=own.url) as client:
                client.post("/seed_session", json=dataset[task]).raise_for_status()
                outputs = [client.post(f"/{item['name']}", json=json.loads(item["arguments"])).text
                           for item in response["output"] if item["type"] == "function_call"]
                theirs = client.post("/verify", json=dataset[task] | {"response": response}).json()
            # the same tool calls in NeMo's process, in one session: the same answers, errors included
            assert outputs == stored_outputs(response["output"]), (name, task)
            assert theirs["reward"] == answers[-1][1], (name, task, theirs)
            if name == "lc_niah":  # the reasoning reached /verify as NeMo's agent sends it: its overlap
                assert theirs["reasoning_overlap"] == answers[-1][4]["metrics"]["reasoning_overlap"]
                overlaps.append(theirs["reasoning_overlap"])
    assert sum(overlap > 0 for overlap in overlaps) == 3  # (with the prompt: it cost three of five their reward)


ADD = [{"name": "add", "arguments": {"amount": amount}} for amount in (5, 2, 4)]
FRONT_END_PLAYS = {  # a server's replies through the front end: {script: (task, replies)}, the first rewarded
    "tally": {"reaches": (0, [ADD[0], "Done."]), "overshoots": (0, [ADD[1], ADD[2], "Done."])},
    "reverse_gym": {"solves": (0, [{"name": "hint", "arguments": {}}, "enots"]),
                    "misses": (1, ["revir?", "river", "nope"])}}  # (three misses: truncated)


@pytest.mark.parametrize("name", ["tally", pytest.param("reverse_gym", marks=pytest.mark.bench)])  # (20 minutes)
def test_the_verifiers_front_end_ends_each_run_with_the_reward_nemo_gyms_own_server_gives(nemo_servers, nemo_own,
                                                                                           name):
    """Verifiers' EnvClient (as prime-rl drives it) runs episodes of a resources server (tally: /verify reads the
    session's state) or of a Gymnasium-protocol one (reverse_gym: its steps reward) through our front end, a
    scripted model replying; the same replies played in NeMo Gym's own server process as its agents play them: the
    same rewards."""
    served, servers = nemo_servers
    scripts = FRONT_END_PLAYS[name]
    with ScriptedServer({key: replies for key, (_, replies) in scripts.items()}) as model:
        models, tasks = [f"script:{key}" for key in scripts], [{"task": task} for task, _ in scripts.values()]
        runs = verifiers_runs(servers[name].status["verifiers"], model.url, models, tasks)
    manifest = load_manifest(served[name][1])
    dataset = rows(served[name][1] / manifest.splits["example"])
    [own] = nemo_own(name)
    theirs = [own_reward(own.url, manifest, dataset[task], replies, replies_response(dataset[task], replies))
              for task, replies in scripts.values()]
    assert rewards_of(runs) == theirs == [1.0, 0.0]


def test_concurrent_episodes_keep_their_own_cookie_state(nemo):
    """example_session_state_mgmt keeps a counter per session cookie: 200 episodes at once, each adding its own
    amounts, each reads back only its own count and is verified on it."""
    url, _, _ = nemo["example_session_state_mgmt"]

    async def main():
        async with openenv_gym.connect(url) as conn:
            async def play(k: int):
                session = conn.session()
                _, info = await session.reset(options={"task": k % 5, "expose_answer": True})
                for amount in (k, 1000):
                    await session.step({"name": "increment_counter", "arguments": {"count": amount}})
                counted = await session.step({"name": "get_counter_value", "arguments": {}})
                await session.close()
                return json.loads(counted[0])["count"] - info["task_data"]["initial_count"]
            return await asyncio.gather(*(play(k) for k in range(200)))
    assert asyncio.run(main()) == [k + 1000 for k in range(200)]


def test_a_tool_error_is_what_the_model_sees_and_the_episode_goes_on(nemo):
    url, _, _ = nemo["tally"]
    answers = play_episode(url, [{"name": "add", "arguments": {"amount": "many"}}, {"name": "nope", "arguments": {}},
                                 {"name": "verify", "arguments": {"expected_total": 0}},
                                 {"name": "add", "arguments": {"amount": 500}},
                                 {"name": "add", "arguments": {"amount": 5}}, "Done."], options={"task": 0})
    assert "int_parsing" in answers[1][0] and answers[1][1:4] == (0.0, False, False)  # FastAPI's 422, as NeMo's agent
    assert json.loads(answers[2][0]) == {"error": "no tool is named 'nope'; the tools: add, total"}
    assert "no tool is named 'verify'" in answers[3][0]  # the server's own routes are no tools of the model's
    assert json.loads(answers[4][0]) == {"error": "at most 100 at a time"}  # its limit, from its config
    assert answers[-1][1] == 1.0 and answers[-1][4]["metrics"] == {"total": 5, "calls": 1}


def test_a_route_whose_code_exits_answers_an_error_and_nothing_else_ends(nemo):
    """A route that calls sys.exit (as code that parses argv with Hydra does) answers with an error, as any failing
    route under NeMo's server (its exception middleware: the error's repr); the worker, the connection and the other
    session go on."""
    url, _, _ = nemo["tally"]

    async def main():
        async with openenv_gym.connect(url) as conn:
            halting, bystander = conn.session(), conn.session()
            await halting.reset(options={"task": 3})
            await bystander.reset(options={"task": 0})
            halted = await halting.step({"name": "halt", "arguments": {}})
            added = await bystander.step({"name": "add", "arguments": {"amount": 5}})
            return halted, added, await bystander.step("Done."), await halting.step({"name": "total", "arguments": {}})
    halted, added, final, after = asyncio.run(main())
    assert json.loads(halted[0]) == "ServerCodeExitedError('/halt called sys.exit(3)')"  # a 500, as NeMo's errors
    assert halted[1:4] == (0.0, False, False)
    assert json.loads(added[0]) == {"total": 5} and final[1] == 1.0 and json.loads(after[0]) == {"total": -4}


def test_tasks_splits_and_hidden_fields(nemo):
    url, _, _ = nemo["tally"]
    first, final = play_episode(url, ["Nothing to do."], options={"task": "tally-2"})
    assert first[1]["task"] == 2 and first[1]["split"] == "example" and "expected_total" not in first[1]["task_data"]
    assert final[1] == 1.0  # it starts at its target
    (_, info), _ = play_episode(url, ["x"], options={"task": 1, "expose_answer": True})
    assert info["task_data"]["expected_total"] == 3
    assert info["messages"][0] == {"role": "system", "content": "Use the tools to bring the tally to the target."}

    async def refused():
        async with openenv_gym.connect(url) as conn:
            session = conn.session()
            for options, message in (({"split": "train"}, "unknown split 'train'; splits: example"),
                                     ({"task": 9}, "out of range"), ({"colour": 1}, "reset option 'colour'")):
                with pytest.raises(BadRequestError, match=message):
                    await session.reset(options=options)
    asyncio.run(refused())


def test_a_gymnasium_server_steps_with_tool_outputs_and_observations(nemo):
    url, _, _ = nemo["reverse_gym"]
    reset, hint, empty, wrong, right = play_episode(url, [{"name": "hint", "arguments": {}}, " ", "enots?", "enots"],
                                                    options={"task": 0})
    assert reset[0] == "Reverse the word: stone" and hint[0] == '"e"' and hint[1:4] == (0.0, False, False)
    assert empty[4]["error"]["code"] == "invalid_action" and "No answer found" in empty[0]  # its HTTP 400
    assert wrong[0] == "No, try again." and right[1:4] == (1.0, True, False)
    *_, last = play_episode(url, ["a", "b", "c"], options={"task": 1})
    assert last[3] and not last[2]  # three misses: truncated, by the server's own rule


def rescore(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "openenv_gym", "rescore", *args], capture_output=True, text=True,
                          timeout=300)


def test_rescore_reverifies_nemo_rollouts_to_nemo_gyms_own_expected_rewards(nemo, tmp_path):
    """NeMo Gym's own verifier cases of example_single_tool_call (a request and the reward it must get) as a
    rollouts file: its /verify is not said to be stateless, so rescore refuses it until --force, and then writes
    unsafe_<out> with the rewards NeMo expects; the case without a response is that rollout's error."""
    _, folder, source = nemo["example_single_tool_call"]
    cases = rows(source / "tests" / "verifier_cases.jsonl")
    rollouts = tmp_path / "rollouts.jsonl"
    rollouts.write_text("".join(json.dumps(case["request"] | {"reward": case.get("expected_reward")}) + "\n"
                                for case in cases))
    out = tmp_path / "out.jsonl"
    refused = rescore(str(rollouts), str(folder), "--output", str(out))
    assert refused.returncode != 0 and "not 'stateless'" in refused.stderr and "--force" in refused.stderr
    assert not out.exists()
    done = rescore(str(rollouts), str(folder), "--output", str(out), "--force")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "reverified      2" in done.stdout and "failed          1" in done.stdout
    written = rows(tmp_path / "unsafe_out.jsonl")
    for case, line in zip(cases, written, strict=True):
        if "expected_reward" in case:
            assert line["reward"] == case["expected_reward"] and line["rescore"]["error"] is None
        else:
            assert case["expected_error"] in line["rescore"]["error"]  # "response": it has none


@pytest.mark.bench  # two servers of its own (12 s): make bench runs it
def test_a_judged_server_is_refused_without_a_judge_and_judged_by_the_one_it_is_given(installed, tmp_path,
                                                                                      monkeypatch):
    """A judge named in the server's own config (its datasets there too, as NeMo's newer configs put them): its
    resets say what to set; given a chat endpoint, NeMo Gym's own model server (vllm_model) in the worker answers
    the server's Responses request through it, with the model we name."""
    from openai_server import ScriptedServer

    folder = import_environment(FIXTURES / "judged_answer", "judged", tmp_path, check=False)[0].folder
    assert load_manifest(folder).model_servers == {"judge_model_server": "judge_model"}
    server = LocalServer(str(folder), 1, 10)
    try:
        with pytest.raises(BadRequestError, match=r"calls model servers of NeMo Gym's \(judge_model_server: "
                                                  r"judge_model.*OPENENV_GYM_JUDGE_URL"):
            play_episode(server.url, ["x"], options={"task": 0})
        assert server.alive
    finally:
        server.stop()
    with ScriptedServer() as judge:
        monkeypatch.setenv("OPENENV_GYM_JUDGE_URL", judge.url)
        monkeypatch.setenv("OPENENV_GYM_JUDGE_MODEL", "match-judge")
        server = LocalServer(str(folder), 1, 10)
        try:
            rewards = [play_episode(server.url, [answer], options={"task": task})[-1][1]
                       for answer, task in (("Paris", 0), ("Lyon", 0), ("4", 1))]
        finally:
            server.stop()
    assert rewards == [1.0, 0.0, 1.0]
    assert [body["model"] for body in judge.bodies] == ["match-judge"] * 3
    assert "Given answer: Lyon" in str(judge.bodies[1]["messages"])


@pytest.mark.bench  # a server of its own (7 s): make bench runs it
def test_a_server_run_from_another_file_with_its_judge_off_and_no_dataset_linked_plays(installed, tmp_path):
    """Styles of NeMo's configs: an entrypoint other than app.py (aviary's gsm8k_app.py), a judge the config turns
    off (math_with_judge's should_use_judge: false), data/example.jsonl that no dataset entry names, a value that is
    an environment variable's with a default (resolved as NeMo resolves it, or the server's config would not take
    it), and dependencies in a pyproject.toml (code_fim's)."""
    [result] = import_environment(FIXTURES / "optional_judge", "optional", tmp_path, check=False)
    manifest = load_manifest(result.folder)
    assert manifest.entry == "resources_servers.optional_judge.judge_app:OptionalJudgeServer"
    assert manifest.needs == [] and manifest.model_servers == {}
    assert manifest.splits == {"example": "data/example.jsonl"}
    assert manifest.dependencies == ["nemo-gym==0.7.0"]  # its pyproject.toml's
    assert any("data/example.jsonl is split 'example'" in note for note in result.notes)
    server = LocalServer(str(result.folder), 1, 10)
    try:
        assert play_episode(server.url, ["Tokyo"], options={"task": 0})[-1][1] == 1.0
        assert play_episode(server.url, ["Cusco"], options={"task": 1})[-1][1] == 0.0
    finally:
        server.stop()


PYPROJECT = """[project]
name = "fim"
dependencies = ["nemo-gym[dev]==0.7.0", "infilling", {local}]

[tool.uv.sources]
nemo-gym = {{ path = "../..", editable = true }}
infilling = {{ git = "https://example.org/infilling.git", rev = "abc123" }}
local-tool = {{ path = "../local_tool" }}
"""


def test_a_servers_pyproject_dependencies_from_git_are_urls_and_from_a_path_are_refused(tmp_path):
    """code_fim's style: no requirements.txt, its pyproject's [tool.uv.sources] says where a dependency comes from."""
    import shutil

    source = tmp_path / "resources_servers" / "optional_judge"
    shutil.copytree(FIXTURES / "optional_judge", source)
    pyproject = source / "pyproject.toml"
    pyproject.write_text(PYPROJECT.format(local='"local-tool", '))
    with pytest.raises(ImportFailedError, match=r"pyproject.toml: 'local-tool @ ../local_tool' names a path"):
        import_environment(source, "fim", tmp_path / "out", check=False)
    pyproject.write_text(PYPROJECT.format(local=""))
    [result] = import_environment(source, "fim", tmp_path / "out", check=False)
    assert load_manifest(result.folder).dependencies == [
        "nemo-gym==0.7.0", "infilling @ git+https://example.org/infilling.git@abc123"]
    assert any("pyproject.toml asks for nemo-gym[dev]" in note for note in result.notes)


@pytest.mark.bench  # a server of its own (7 s): make bench runs it
def test_a_startup_that_never_finishes_fails_resets_with_the_reason_and_the_server_lives(installed, monkeypatch):
    """A startup hook that waits for what is not here (competitive_coding_challenges waits for NeMo Skills'
    sandbox): resets say so after the bound, at once after the first, and the server goes on."""
    tally, _ = installed
    monkeypatch.setenv("TALLY_STARTUP_SECONDS", "3600")  # (its config's ${oc.env:TALLY_STARTUP_SECONDS,0})
    monkeypatch.setenv("OPENENV_GYM_NEMO_STARTUP_SECONDS", "2")
    server = LocalServer(str(tally), 1, 10)
    try:
        for _ in range(2):
            with pytest.raises(openenv_gym.EnvError, match="startup hooks did not finish within 2 s"):
                play_episode(server.url, ["x"], options={"task": 0})
        assert server.alive
    finally:
        server.stop()


def test_a_checkout_imports_each_of_its_servers_and_leaves_out_a_base_to_derive_from(tmp_path):
    """A folder with resources_servers/ is a checkout: every server folder in it is an environment (NAME-<server>);
    one whose config runs an abstract base (NeMo's resources_servers/gymnasium) is none, and alone is refused."""
    results = import_environment(FIXTURES.parent, "fixtures", tmp_path / "all", check=False)
    assert sorted(load_manifest(result.folder).name for result in results) == [
        f"fixtures-{name}" for name in ("judged_answer", "optional_judge", "reverse_gym", "tally")]
    with pytest.raises(ImportFailedError, match=r"no environment found.*it is a base or a library"):
        import_environment(FIXTURES / "counting_base", "base", tmp_path / "one", check=False)


NEED_STYLES = {  # what the checkout's servers do, each in tally's copy: (file, line added) -> the need recorded
    "a key from the environment (critpt, finance_agent_v2)": (
        "configs/tally.yaml", "      search_api_key: ${oc.env:SEARCH_API_KEY,null}", "a web API's key"),
    "a key its config class requires and its YAML does not give (google_search)": (
        "app.py", "class SearchConfig(TallyConfig):\n    search_api_key: str", "a web API's key"),
    "a value of NeMo's global config": (
        "configs/tally.yaml", "      base_url: ${policy_base_url}", "values of NeMo Gym's global config"),
    "an environment variable with a default (math_formal_lean's port)": (
        "configs/tally.yaml", "      port_hint: ${oc.env:TALLY_PORT,6000}", None),
    "a git clone at startup (ether0)": (
        "app.py", 'CLONE = ["git", "clone", "--depth=1", "https://example.org/repo"]', "data downloaded at run time"),
    "a git clone in a shell command (vlm_eval_kit)": (
        "app.py", 'SETUP = "cd here && git clone https://example.org/kit && cd kit"', "data downloaded at run time"),
    "an archive fetched from GitHub (legal_agent_bench)": (
        "app.py", 'ARCHIVE = "https://codeload.github.com/owner/repo/tar.gz/abc"', "data downloaded at run time"),
    "urlopen (bird_sql)": ("app.py", "OPENED = lambda url: urllib.request.urlopen(url)", "data downloaded at run time"),
    "rows whose prompt the paired agent builds (scicode)": (
        "data/example.jsonl", '{"responses_create_params": {"input": []}, "sub_steps": ["..."], "start": 0}',
        "the prompts its paired agent builds (simple_agent"),
    "Ray actors on a GPU (wmt_translation)": (
        "app.py", 'POOL = dict(num_gpus=0, resources={"extra_gpu": 1})', "a GPU"),
    "Ray actors on a share of a GPU (longmt_eval)": ("app.py", "ACTOR = dict(num_gpus=0.25)", "a GPU"),
    "NeMo Skills' sandbox (math_formal_lean, ns_tools)": (
        "app.py", 'SANDBOX = {"sandbox_host": "127.0.0.1", "sandbox_port": 6000}', "a sandbox provider"),
}


@pytest.mark.parametrize("style", NEED_STYLES)
def test_what_a_server_needs_that_is_not_here_is_recorded_at_import(style, tmp_path):
    import shutil

    file, line, need = NEED_STYLES[style]
    source = tmp_path / "resources_servers" / "tally"
    shutil.copytree(TALLY, source)
    path = source / file
    text = path.read_text()
    path.write_text(text.replace("      limit: 100\n", f"      limit: 100\n{line}\n") if file.endswith(".yaml")
                    else f"{line}\n{text}" if file.endswith(".jsonl") else f"{text}\n{line}\n")
    needs = load_manifest(import_environment(source, "styled", tmp_path / "out", check=False)[0].folder).needs
    if need is None:
        assert needs == []
    else:
        assert len(needs) == 1 and needs[0].startswith(need), needs


# what servers do as they load that cannot work here, each in tally's copy (file, text replaced, its replacement),
# the import's load check on: the need it records (its start), or None where the import fails, the code's own fault
LOAD_STYLES = {
    "a value of NeMo's global config its config class requires, null here (critpt)": [
        ("configs/tally.yaml", "      limit: 100\n",
         "      limit: 100\n      grader_url: ${oc.select:grading_service_url,null}\n"),
        ("app.py", "    limit: int = 1000", "    grader_url: str\n    limit: int = 1000"),
        "values of NeMo Gym's global config (its env.yaml) that TallyConfig requires and that are not set here "
        "(grader_url: ${oc.select:grading_service_url,null})"],
    "a download as it loads (legal_agent_bench's, with requests)": [
        ("app.py", "        app = super().setup_webserver()\n",
         "        app = super().setup_webserver()\n        httpx.get('https://rows.example.invalid/rows.tar.gz')\n"),
        ("app.py", "import asyncio\n", "import asyncio\n\nimport httpx\n"),
        "network access as it loads, which is not reachable here: rows.example.invalid (a lookup of "
        "rows.example.invalid)"],
    "a git clone as it loads (newton_bench)": [
        ("app.py", "        app = super().setup_webserver()\n", "        app = super().setup_webserver()\n"
         "        subprocess.run(['git', 'clone', '--depth=1', 'https://git.example.invalid/bench'], check=True)\n"),
        ("app.py", "import asyncio\n", "import asyncio\nimport subprocess\n"),
        "network access as it loads, which is not reachable here: git.example.invalid (git clone --depth=1 "
        "https://git.example.invalid/bench)"],
    "a command that fetches failing as it loads, its host unseen (bigcodebench's uv venv --python 3.10)": [
        ("app.py", "        app = super().setup_webserver()\n", "        app = super().setup_webserver()\n"
         "        subprocess.run(['git', 'clone', '--depth=1', 'git.example.invalid:bench'], check=True)\n"),
        ("app.py", "import asyncio\n", "import asyncio\nimport subprocess\n"),
        "network access as it loads, which is not reachable here: what `git clone --depth=1 git.example.invalid:bench` "
        "fetches (it failed)"],
    "code that fails on its own": [
        ("app.py", "        app = super().setup_webserver()\n",
         "        app = super().setup_webserver()\n        raise KeyError('a bug of its own')\n"), None],
}


def styled_tally(tmp_path: Path, changes: list[tuple[str, str, str]]) -> Path:
    """A copy of tally, laid out as a checkout's server, with these changes made."""
    import shutil

    source = tmp_path / "resources_servers" / "tally"
    shutil.copytree(TALLY, source)
    for file, old, new in changes:
        text = (source / file).read_text()
        assert old in text
        (source / file).write_text(text.replace(old, new, 1))
    return source


@pytest.mark.parametrize("style", LOAD_STYLES)
def test_what_a_server_needs_as_it_loads_is_recorded_and_its_resets_say_it(installed, style, tmp_path, start_server):
    """Not reaching the network as it loads, or a required config value that NeMo's global config would give: the
    import records a need naming the host or the key (it fails only for code that fails on its own), the server
    starts without making the resource server, and its resets say what it needs."""
    *changes, need = LOAD_STYLES[style]
    source = styled_tally(tmp_path, changes)
    if need is None:
        with pytest.raises(ImportFailedError, match=r"a bug of its own.*fails as it loads"):
            import_environment(source, "styled", tmp_path / "out")
        return
    [result] = import_environment(source, "styled", tmp_path / "out")
    needs = load_manifest(result.folder).needs
    assert needs[-1] == need, needs  # (a git clone is a need its code shows too: the one before)
    assert any(need in note for note in result.notes)
    url = start_server(str(result.folder))
    with pytest.raises(BadRequestError, match="cannot be played here: it needs .*" + re.escape(need[-40:])):
        play_episode(url, [], options={"task": 0})


def test_the_installed_package_is_the_nemo_gym_its_servers_name_as_their_checkout(installed, tmp_path):
    """arc_agi's `-e ../../` (the checkout's nemo-gym), where the server is one the nemo-gym package ships: `../../` is
    the site-packages it is installed in, and its version the package's."""
    import shutil

    _, site = installed
    source = styled_tally(tmp_path / "site", [("requirements.txt", "nemo-gym==0.7.0", "-e ../../")])
    [info] = site.glob("nemo_gym-*.dist-info")
    shutil.copytree(info, tmp_path / "site" / info.name)
    [result] = import_environment(source, "shipped", tmp_path / "out", check=False)
    assert load_manifest(result.folder).dependencies == ["nemo-gym==0.7.0"]


def test_an_episode_takes_the_model_turns_its_paired_agent_lets_it(installed, tmp_path, start_server):
    """circle_click's simple_agent says `max_steps: 1`: NeMo's agent verifies after one model turn, its calls made.
    An agent that says nothing bounds them by its own config's default (gymnasium_agent's 10), where the source
    has the agent."""
    source = styled_tally(tmp_path, [("configs/tally.yaml", "      entrypoint: app.py\n      resources_server:",
                                      "      entrypoint: app.py\n      max_steps: 1\n      resources_server:")])
    [result] = import_environment(source, "one_turn", tmp_path / "out", check=False)
    assert load_manifest(result.folder).max_steps == 1
    url = start_server(str(result.folder))
    row = rows(TALLY / "data" / "example.jsonl")[0]
    _, (_, reward, terminated, truncated, info) = play_episode(url, [
        {"name": "add", "arguments": {"amount": row["expected_total"] - row["start"]}}], options={"task": 0})
    assert (reward, terminated, truncated) == (1.0, False, True) and info["metrics"]["calls"] == 1
    _, site = installed
    gymnasium = site / "resources_servers" / "example_multi_turn_gymnasium"
    config = (gymnasium / "configs" / "example_multi_turn_gymnasium.yaml").read_text()
    said = re.search(r"max_steps: (\d+)", config)
    [result] = import_environment(gymnasium, "gym_turns", tmp_path / "out", check=False)
    assert load_manifest(result.folder).max_steps == (int(said[1]) if said else 10)


def test_a_server_paired_with_an_agent_that_simulates_tools_verifies_the_one_reply(installed, tmp_path, start_server):
    """terminal_multi_harness's tool_simulation_agent: the model's one reply is verified as it is, its tool calls never
    made and no session seeded (the pivot-RL servers score the call itself)."""
    source = styled_tally(tmp_path, [("configs/tally.yaml", "    simple_agent:", "    tool_simulation_agent:")])
    [result] = import_environment(source, "simulated", tmp_path / "out", check=False)
    assert load_manifest(result.folder).simulated_tools
    url = start_server(str(result.folder))
    _, (_, reward, terminated, truncated, info) = play_episode(url, [
        {"name": "add", "arguments": {"amount": 5}}], options={"task": 0})
    assert (terminated, truncated, info["metrics"]["calls"]) == (True, False, 0)  # verified at once, no call made
    assert [item["type"] for item in info["response"]["output"]] == ["function_call"]


@pytest.mark.bench  # a venv of its own to build (45 s on a fresh machine), a rare path: make bench runs it
def test_a_package_vendored_in_the_servers_folder_is_installed_from_there(installed, tmp_path, start_server):
    """browsecomp_advanced_harness's `-e ./pocketshell[pcre]`: a requirement that is a path inside the server's
    folder is taken along with it, and its venv installs it from the import's copy (with its extra), as NeMo's
    launcher installs it from the server's folder."""
    source = styled_tally(tmp_path, [
        ("requirements.txt", "nemo-gym==0.7.0", "nemo-gym==0.7.0\n-e ./pocketcount[loud]"),
        ("limits.py", '    return f"at most {limit} at a time"',
         '    from pocketcount import says\n\n    return says(f"at most {limit} at a time")')])
    package = source / "pocketcount"
    write_files(package, {
        "pyproject.toml": '[project]\nname = "pocketcount"\nversion = "0.1.0"\n'
                          '[project.optional-dependencies]\nloud = []\n'
                          '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n',
        # (in src/: importable only where it is installed)
        "src/pocketcount/__init__.py": "def says(text):\n    return text.upper()\n"})
    [result] = import_environment(source, "pocket", tmp_path / "out")
    manifest = load_manifest(result.folder)
    assert manifest.dependencies == ["nemo-gym==0.7.0", "./vendor/resources_servers/tally/pocketcount[loud]"]
    url = start_server(str(result.folder))
    answers = play_episode(url, [{"name": "add", "arguments": {"amount": 5000}}, "Done."], options={"task": 0})
    assert json.loads(answers[1][0]) == {"error": "AT MOST 100 AT A TIME"}  # (said by the vendored package)
    outside = styled_tally(tmp_path / "outside", [("requirements.txt", "nemo-gym==0.7.0", "nemo-gym==0.7.0\n-e ../x")])
    with pytest.raises(ImportFailedError, match="names a path outside the server's folder"):
        import_environment(outside, "outside", tmp_path / "out", check=False)
