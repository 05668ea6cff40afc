"""Verifiers v1 (0.4) environments: imported, served, stepped one model request at a time, and scored exactly as
Verifiers' own runner scores the same episode.

Real parts only: verifiers 0.4 in the env's venv, v1 packages written to its published rules (a single-turn
taskset, a multi-turn Env that plays the user and has a config of its own, a taskset with a tool server, an
endless taskset whose tasks take time to make), the null harness program (the real openai client inside it)
calling the model endpoint, and Verifiers' own runner as the oracle (benchmarks/verifiers_v1_peer.py).
"""

import asyncio
import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from conftest import ROOT, descendants, in_parallel, play_episode
from tool_shape import names_of

import openenv_gym
from openenv_gym.adapters.verifiers.v1_config import split_env_args
from openenv_gym.client.local import LocalServer
from openenv_gym.errors import BadRequestError, ServerStartError
from openenv_gym.importers import ImportFailedError, import_environment
from openenv_gym.manifests import load_manifest
from openenv_gym.manifests.schema import ManifestError
from openenv_gym.manifests.venvs import ensure_venv
from openenv_gym.sandbox.pool import IDLE_SECONDS

HERE = Path(__file__).parent
V1_ENVS = HERE / "verifiers_v1_envs"
WORD_ECHO, HIGHER_LOWER, CAPITALS = V1_ENVS / "word_echo", V1_ENVS / "higher_lower", V1_ENVS / "capitals"
ENDLESS, LEDGER, SHELL_DIALECTS = V1_ENVS / "endless_sums", V1_ENVS / "ledger", V1_ENVS / "shell_dialects"
PREPARED, MANAGED = V1_ENVS / "prepared_script", V1_ENVS / "managed_resources"
pytestmark = pytest.mark.env_venvs(WORD_ECHO, HIGHER_LOWER, CAPITALS, ENDLESS, LEDGER, SHELL_DIALECTS, PREPARED,
                                   MANAGED)
# higher_lower served with env_args: one key of its Env's own config, one of its taskset's (as --env.max-guesses 2
# --env.taskset.secrets [9,60] on Verifiers' command line)
HIGHER_LOWER_ARGS = {"max_guesses": 2, "secrets": [9, 60]}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """{name: (ws url, the env venv's python)} for both packages, imported as users import them (load check on)."""
    out = tmp_path_factory.mktemp("v1")
    sources = (WORD_ECHO, HIGHER_LOWER, CAPITALS, ENDLESS)
    folders = in_parallel(*(lambda source=source: import_environment(source, source.name, out)[0].folder
                            for source in sources))
    folders.append(folders[1])
    extra = [(), (), (), (), ("--env-args", json.dumps(HIGHER_LOWER_ARGS))]
    servers = in_parallel(*(lambda folder=folder, args=args: LocalServer(str(folder), 1, 1000, *args)
                            for folder, args in zip(folders, extra, strict=True)))
    names = [source.name for source in sources] + ["higher_lower_configured"]
    yield {name: (server.url, str(ensure_venv(load_manifest(folder))))
           for name, folder, server in zip(names, folders, servers, strict=True)}
    in_parallel(*(server.stop for server in servers))


def verifiers_own(python: str, source: Path, index: int, replies: list[str], best_of: int | None = None,
                  config: dict | None = None) -> dict:
    """The episode as Verifiers' own runner plays it with these replies (with `best_of`: its best-of-n env; with
    `config`: the env's config, nested as Verifiers' command line nests it)."""
    extra = ([] if best_of is None else ["--best-of", str(best_of)]) + ["--config", json.dumps(config or {})]
    done = subprocess.run([python, "-m", "benchmarks.verifiers_v1_peer", str(source), source.name, "--task",
                           str(index), *extra, "--replies", *replies], capture_output=True, text=True, timeout=300,
                          cwd=HERE.parent)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def ours(url: str, index: int, replies: list, **options) -> list[tuple]:
    """Reset on the task, then step with each reply until the episode ends: every answer."""
    return play_episode(url, replies, options={"task": index, **options})


def scored(final: tuple) -> dict:
    _, reward, terminated, _, info = final
    assert terminated
    return {"reward": reward, "rewards": info["rewards"], "metrics": info["metrics"],
            "stop_condition": info["stop_condition"], "ok": info["ok"]}


THOUGHT = "The word is given: repeat it, nothing else."


@pytest.mark.parametrize("reply", ["apple", "It is apple.", {"content": "apple", "reasoning_content": THOUGHT}])
def test_a_single_turn_taskset_scores_as_verifiers_own_runner_scores_it(served, reply):
    """A thinking model's reasoning reaches Verifiers as a reasoning parser's does: its trace's assistant message
    holds it (the taskset's reasoning_chars metric reads it there)."""
    url, python = served["word_echo"]
    (obs, info), final = ours(url, 0, [reply])
    theirs = verifiers_own(python, WORD_ECHO, 0, [reply if isinstance(reply, str) else json.dumps(reply)])
    assert scored(final) == {key: theirs[key] for key in ("reward", "rewards", "metrics", "stop_condition", "ok")}
    assert obs == "The word is: apple" and info["messages"] == theirs["asked"][0]  # the same request, the same words
    assert theirs["reward"] == (0.5 if reply == "It is apple." else 1.5)
    assert final[4]["metrics"]["reasoning_chars"] == (0 if isinstance(reply, str) else len(THOUGHT))


def test_a_multi_turn_env_plays_the_user_as_verifiers_does(served):
    url, python = served["higher_lower"]
    guesses = ["50", "25", "37"]
    answers = ours(url, 0, guesses)
    theirs = verifiers_own(python, HIGHER_LOWER, 0, guesses)
    assert [a[0] for a in answers[:3]] == ["Your first guess?", "Lower.", "Higher."]
    assert [a[-1]["messages"] for a in answers[:3]] == theirs["asked"]  # each model request, whole
    assert scored(answers[-1]) == {key: theirs[key] for key in ("reward", "rewards", "metrics", "stop_condition",
                                                               "ok")}
    assert answers[-1][1] == pytest.approx(0.8)


def test_a_taskset_with_a_tool_server_calls_its_tools_as_verifiers_does(served):
    """Verifiers starts the package's MCP tool server as `python -m capitals.servers.atlas`: the vendored package
    must be importable by the env's child processes. The task's own intercept takes the last reply as its first
    words (what it said off the record is not kept): the step says so."""
    url, python = served["capitals"]
    call = {"name": "atlas_capital", "arguments": {"country": "Japan"}}
    replies = [call, "It is Tokyo. Off the record: easy."]
    first, looked_up, final = ours(url, 1, replies)
    assert names_of(first[1]["tools"]) == ["atlas_capital"]
    assert looked_up[0] == "Tokyo" and looked_up[1:4] == (0.0, False, False)  # the tool's answer, from its server
    assert "reply_taken" not in looked_up[-1] and final[-1]["reply_taken"] == "It is Tokyo."
    theirs = verifiers_own(python, CAPITALS, 1, [json.dumps(call), replies[1]])
    assert scored(final) == {key: theirs[key] for key in ("reward", "rewards", "metrics", "stop_condition", "ok")}
    assert [a[-1]["messages"] for a in (first, looked_up)] == theirs["asked"] and final[1] == 1.0


@pytest.fixture(scope="module")
def shell_dialects(tmp_path_factory):
    """The shell_dialects package imported (its harness speaks Responses or Anthropic Messages, as configured)."""
    return import_environment(SHELL_DIALECTS, "shell_dialects", tmp_path_factory.mktemp("dialects"))[0].folder


@pytest.mark.parametrize(("dialect", "streamed"), [pytest.param("responses", True, marks=pytest.mark.bench),
                                                  ("anthropic", False)])  # (make bench plays Responses: 15 s)
def test_a_harness_speaking_responses_or_anthropic_plays_and_scores_as_verifiers_own_runner(shell_dialects, dialect,
                                                                                            streamed):
    """The package's own harness program speaks the `openai` package's Responses client or the `anthropic`
    package's Messages client to Verifiers' interception, which relays it in that dialect to the model endpoint:
    the episode's requests and score are those of Verifiers' own runner, and its shell calls ran in the runtime (the
    reward reads the file they wrote). Streamed here, plain there (or the other way): each way of each dialect
    goes through the endpoint once."""
    def harness(stream: bool) -> dict:
        return {"agent": {"harness": {"id": "shell_dialects", "dialect": dialect, "stream": stream}}}

    server = LocalServer(str(shell_dialects), 1, 10, "--env-args", json.dumps(harness(streamed)))
    replies = [*({"name": "shell", "arguments": {"command": command}}
                 for command in ("cat note.txt", "echo RIVER > answer.txt")),
               {"content": "Wrote RIVER to answer.txt.", "reasoning_content": THOUGHT}]  # (in the dialect's shape)
    try:
        answers = ours(server.url, 1, replies)
    finally:
        server.stop()
    theirs = verifiers_own(str(ensure_venv(load_manifest(shell_dialects))), SHELL_DIALECTS, 1,
                           [reply if isinstance(reply, str) else json.dumps(reply) for reply in replies],
                           config=harness(not streamed))
    assert {answer[-1]["dialect"] for answer in answers[:3]} == {dialect}
    assert names_of(answers[0][1]["tools"]) == ["shell"]
    assert answers[1][0] == "river\n"  # the note, read by the shell call in the runtime
    assert [answer[-1]["messages"] for answer in answers[:3]] == theirs["asked"]
    assert scored(answers[-1]) == {key: theirs[key] for key in ("reward", "rewards", "metrics", "stop_condition",
                                                               "ok")}
    assert answers[-1][1] == 1.5 and answers[-1][4]["metrics"]["reasoning_chars"] == len(THOUGHT)


def test_tasks_are_chosen_by_index_name_or_seed_and_answers_stay_hidden(served):
    url, _ = served["word_echo"]
    [(obs, info), _] = ours(url, "maple", ["maple"])
    assert obs == "The word is: maple" and info["task"] == 5 and "answer" not in info["task_data"]
    [(_, info), _] = ours(url, 1, ["river"], expose_answer=True)
    assert info["task_data"]["answer"] == "river"
    # a task given whole (what Verifiers' env server is sent: its TaskData's dump) plays as the catalog's own
    [(obs, info), catalogs] = ours(url, 2, ["stone"], expose_answer=True)
    [(given_obs, _), given] = play_episode(url, ["stone"], options={"task_spec": info["task_data"]})
    assert given_obs == obs and given[1:4] == catalogs[1:4] == (1.5, True, False)

    async def seeded():
        async with openenv_gym.connect(url) as conn:
            session = conn.session()
            firsts = [(await session.reset(seed=7))[0] for _ in range(2)]
            for options, message in (({"task": 99}, "out of range"), ({"task": "pear"}, "no task of split 'train' has"),
                                     ({"task_spec": {"prompt": "x"}}, "option task_spec is no task of word_echo: .*"
                                                                      "WordEchoData\nanswer\n  Field required"),
                                     ({"level": 2}, "it understands: env_seconds, episode_id, expose_answer, "
                                                    "expose_task, group, index, max_steps, split, task, task_spec$"),
                                     ({"seed": 7}, "reset's own argument")):
                with pytest.raises(BadRequestError, match=message):
                    await session.reset(options=options)
            await session.close()
            return firsts
    first, again = asyncio.run(seeded())
    assert first == again  # a seed picks the same task


def test_an_action_that_is_no_message_is_an_invalid_action_and_the_episode_goes_on(served):
    url, _ = served["word_echo"]
    (_, _), invalid, final = ours(url, 2, [{"oops": 1}, "stone"])
    assert invalid[1:4] == (0.0, False, False) and invalid[4]["error"]["code"] == "invalid_action"
    assert final[1] == 1.5


def test_many_sessions_play_at_once(served):
    url, _ = served["word_echo"]
    words = ["apple", "river", "stone", "cloud", "ember", "maple"]

    async def main():
        async with openenv_gym.connect(url) as conn:
            async def play(k):
                session = conn.session()
                await session.reset(options={"task": k % 6})
                answer = await session.step(words[k % 6])
                await session.close()
                return answer
            return await asyncio.gather(*(play(k) for k in range(24)))
    assert [answer[1] for answer in asyncio.run(main())] == [1.5] * 24


def test_a_group_is_judged_as_verifiers_best_of_n_judges_its_attempts(served):
    """G sessions of one task are siblings: the server's group score is best-of-n's finalize over their traces."""
    url, python = served["word_echo"]
    replies = ["apple", "It is apple.", "pear", "apple"]

    async def main():
        async with openenv_gym.connect(url) as conn:
            sessions = [conn.session() for _ in replies]
            for member, session in enumerate(sessions):
                await session.reset(options={"task": 0, "group": {"id": "g", "member": member}})
            finals = [await session.step(reply) for session, reply in zip(sessions, replies, strict=True)]
            return finals, await conn.score_group("g", len(replies))

    finals, score = asyncio.run(main())
    theirs = verifiers_own(python, WORD_ECHO, 0, replies, best_of=4)["traces"]
    assert score.members == [0, 1, 2, 3]
    assert score.rewards == [trace["reward"] for trace in theirs] == [final[1] for final in finals]
    assert [info["metrics"] for info in score.infos] == [trace["metrics"] for trace in theirs]
    assert [info["metrics"]["best"] for info in score.infos] == [1.0, 0.0, 0.0, 1.0]
    assert {info["metrics"]["pass_at_n"] for info in score.infos} == {1.0}


def test_an_endless_taskset_whose_tasks_take_time_to_make_reads_only_what_resets_ask_for(served):
    """Its import (load check on) read one task, not the 100,000 it once read; a reset reads as far as its task: a
    seed plays its own task of the first max_tasks (1,000), a reset without one the next, and each plays as
    Verifiers' own runner plays the same task."""
    url, python = served["endless_sums"]

    async def main():
        async with openenv_gym.connect(url) as conn:
            assert [(s["name"], s["num_tasks"]) for s in await conn.splits()] == [("train", 1000)]  # none read
            session = conn.session()
            seeded = [(await session.reset(seed=seed))[1]["task"] for seed in (11, 11, 1011)]
            unseeded = [(await session.reset())[1]["task"] for _ in range(3)]
            for options, message in (({"task": 1000}, r"out of range for split 'train' \(1000 tasks\)"),
                                     ({"task": "sum-3"}, "never ends, so no task is looked up by its id")):
                with pytest.raises(BadRequestError, match=message):
                    await session.reset(options=options)
            await session.close()
            return seeded, unseeded

    assert asyncio.run(main()) == ([11, 11, 11], [0, 1, 2])
    (obs, info), final = ours(url, 7, ["12"], expose_answer=True)
    answer = info["task_data"]["answer"]
    (obs, _), right = ours(url, 7, [f"The sum is {answer}."])
    theirs = in_parallel(*(lambda reply=reply: verifiers_own(python, ENDLESS, 7, [reply])
                           for reply in ("12", f"The sum is {answer}.")))
    assert obs.startswith("What is ") and info["task_data"]["id"] == "sum-7"
    assert [scored(final), scored(right)] == [{key: t[key] for key in ("reward", "rewards", "metrics",
                                                                        "stop_condition", "ok")} for t in theirs]
    assert (final[1], right[1]) == (float(answer == 12), 1.0)


def test_env_args_go_to_the_env_config_that_declares_them_and_the_rest_to_the_taskset(served):
    """max_guesses is the Env's own setting, secrets the taskset's: the same episode as Verifiers' runner plays with
    --env.max-guesses 2 --env.taskset.secrets [9,60]."""
    url, python = served["higher_lower_configured"]
    guesses = ["50", "25", "12"]
    answers = ours(url, 0, guesses)
    theirs = verifiers_own(python, HIGHER_LOWER, 0, guesses, config={"max_guesses": 2, "taskset": {"secrets": [9, 60]}})
    assert [a[0] for a in answers[:2]] == ["Your first guess?", "Lower."] and len(answers) == 3  # 2 guesses, over
    assert scored(answers[-1]) == {key: theirs[key] for key in ("reward", "rewards", "metrics", "stop_condition",
                                                               "ok")}
    assert answers[-1][1] == 0.0 and answers[-1][4]["metrics"]["guesses"] == 2.0


def test_env_args_are_split_as_verifiers_command_line_nests_them():
    """--env.X for a key the Env's config declares (and `harness`, which Verifiers' Env config refuses with where a
    harness goes), --env.taskset.X for any other; an explicit taskset object is the taskset's."""
    env, taskset = split_env_args({"attempts": 3, "pieces": 2, "harness": {"id": "bash"}, "taskset": {"seed": 1}},
                                  {"attempts", "agent", "taskset", "id"})
    assert env == {"attempts": 3, "harness": {"id": "bash"}} and taskset == {"pieces": 2, "seed": 1}
    with pytest.raises(ManifestError, match="holds the taskset's settings: an object"):
        split_env_args({"taskset": 3}, {"taskset"})


def test_env_args_that_fit_neither_config_are_refused_with_the_keys_of_each(tmp_path):
    """Given at import (--env-args, written in the manifest), they are what the load check loads with: a key of
    neither config fails the import with the keys of each, and nothing is written."""
    with pytest.raises(ImportFailedError, match=r"taskset.max_guess: Extra inputs .* declares go to it \(.*"
                                                r"max_guesses.*player.*\), any other to the taskset's \(.*secrets"):
        import_environment(HIGHER_LOWER, "higher_lower", tmp_path, env_args={"max_guess": 3})
    assert not (tmp_path / "higher_lower").exists()


def test_a_script_the_env_prepares_with_uv_runs_in_its_sandbox_its_dependencies_installed_on_the_host(tmp_path):
    """prepared_script's Env prepares a uv script when it starts (as Verifiers' NeMoGymEnv prepares its resource
    server), one that needs a package its venv lacks: uv installs it on the host, in the script cache the sandbox
    reads, and each episode runs the script in the env's sandboxed runtime. The line it prints is the task (scored
    as Verifiers' own runner scores it); the file it writes to a host path stays in its sandbox."""
    escape = tmp_path / "escaped"
    folder = import_environment(PREPARED, PREPARED.name, tmp_path / "imported")[0].folder
    with LocalServer(str(folder), 1, 10, "--env-args", json.dumps({"escape_to": str(escape)})) as server:
        [(obs, info)] = play_episode(server.url, [], options={"task": 0})
        line = obs.removeprefix("Repeat exactly: ")
        answers = ours(server.url, 0, [line])
    assert line.startswith("termcolor ") and line.endswith(" says hello") and obs.startswith("Repeat exactly: ")
    assert not escape.exists()
    theirs = verifiers_own(str(ensure_venv(load_manifest(folder))), PREPARED, 0, [line])
    assert scored(answers[-1]) == {key: theirs[key] for key in ("reward", "rewards", "metrics", "stop_condition",
                                                               "ok")} and theirs["reward"] == 1.0


def test_a_nemo_gym_taskset_whose_env_would_start_its_server_out_of_reach_is_refused_saying_what_to_do(tmp_path):
    """managed_resources (nemo_gym_weather's shape): NeMoGymEnv would start the resource server in a sandbox and call
    its port on the host, where the sandbox's network hides it: serving it says so and how to go on (served
    --no-sandbox, as the import's check loads it, it would reach it); given the URL of a resource server
    (resources_url), it serves."""
    folder = import_environment(MANAGED, MANAGED.name, tmp_path)[0].folder
    with pytest.raises(ServerStartError, match=r"resource server itself .*resources_url.*network = \"public\""):
        LocalServer(str(folder), 1, 10).stop()
    given = {"taskset": {"task": {"resources_url": "http://127.0.0.1:9"}}}
    with LocalServer(str(folder), 1, 10, "--env-args", json.dumps(given)) as server:
        assert server.status["ready"]


def test_a_taskset_wide_tool_server_serves_every_episode_and_stops_with_the_server(tmp_path, monkeypatch):
    """The book tool server is the taskset's (Taskset.toolsets), started once per worker as Verifiers' serving() starts
    it, in a sandbox of its own that the episodes' sandboxes reach through the host; a server told to stop leaves
    serving before its threads go (its teardown needs one): it exits 0, and leaves no sandbox and no file."""
    [imported] = import_environment(LEDGER, "ledger", tmp_path / "out")
    home = tmp_path / "home"  # Verifiers keeps its runtimes' folders in ~/.cache/verifiers (unsandboxed)
    monkeypatch.setenv("HOME", str(home))  # the server's
    server = LocalServer(str(imported.folder), 1, 10)

    def sandboxes() -> list[Path]:  # the control groups of the server's sandboxes, named after its worker
        workers = {server.process.pid, *descendants(server.process.pid)}
        return [group for group in Path("/sys/fs/cgroup/pids/openenv-gym").glob("*-*")
                if int(group.name.split("-")[0]) in workers]
    try:
        call = {"name": "book_balance", "arguments": {"account": "alice"}}
        first, looked_up, final = ours(server.url, 0, [call, "Alice has 120."])
        assert names_of(first[1]["tools"]) == ["book_balance"]
        assert looked_up[0] == "120" and final[1] == 1.0
        deadline = time.monotonic() + 3 * IDLE_SECONDS  # (the episode's sandbox is kept that long for the next)
        while len(sandboxes()) > 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(sandboxes()) == 1  # the book server's, up for the worker's episodes (theirs are closed)
        up = sandboxes()
    finally:
        server.stop()
    assert server.process.returncode == 0, "".join(server._tail)
    assert [group for group in up if group.exists()] == []
    assert not any((home / ".cache" / "verifiers" / "runtimes" / "subprocess").glob("*"))


def test_the_bash_harness_runs_the_models_commands_in_the_episodes_sandbox(tmp_path):
    """Verifiers' bash harness (a seat's harness, set by env_args) runs each command the model sends as a tool call
    in its runtime: here a sandbox, whose escapes are checked from outside."""
    folder = import_environment(CAPITALS, "capitals_bash", tmp_path / "out")[0].folder
    secret = Path(os.environ["OPENENV_GYM_HOME"]) / "bash-secret.txt"
    secret.write_text("bash-secret-4242")
    outside = tmp_path / "written-by-the-model"
    server = LocalServer(str(folder), 1, 10, "--env-args", json.dumps({"agent": {"harness": {"id": "bash"}}}))
    try:
        commands = [f"cat {secret}", f"echo pwned > {outside}", "pwd; echo hi > here.txt; ps -e | wc -l", "kill -9 -1"]
        answers = ours(server.url, 1, [{"name": "bash", "arguments": {"command": command}} for command in commands])
        assert "bash" in names_of(answers[0][1]["tools"])
        said = [answer[0] for answer in answers[1:4]]
        assert "bash-secret-4242" not in "".join(said) and not outside.exists()
        folder, processes = said[2].split()
        assert folder == "/tmp/work" and int(processes) < 12  # its own few processes (the host runs many more)
        assert answers[-1][2] and len(answers) == 5  # kill -9 -1 ended its own program, so its episode
        assert server.alive and ours(server.url, 1, ["It is Tokyo."])[-1][1] == 1.0  # the server serves on
    finally:
        server.stop()
        secret.unlink()


OPEN_PROCESS = '''
import asyncio, json, os
from openenv_gym.adapters.verifiers.runtime import install
from openenv_gym.sandbox import SandboxPolicy
from verifiers.v1.runtimes.subprocess import SubprocessConfig, SubprocessRuntime

async def main():
    install(False, SandboxPolicy(), True)
    runtime = SubprocessRuntime(SubprocessConfig())
    await runtime.start()
    process = await runtime.open_process(["sh", "-c", "read line; echo got $line; pwd; exec sleep 600"], {})
    outer, holder = process._process.pid, runtime.openenv_place.sandbox.pid
    await asyncio.sleep(0.3)
    [inner] = [int(pid) for pid in open(f"/proc/{outer}/task/{outer}/children").read().split()]
    seen = {"same_pid_namespace": os.readlink(f"/proc/{inner}/ns/pid") == os.readlink(f"/proc/{holder}/ns/pid"),
            "uid": int(open(f"/proc/{inner}/status").read().split("Uid:")[1].split()[0])}
    await process.write(b"hello\\n")
    said = b""
    async for chunk in process.stdout:
        said += chunk
        if said.endswith(b"/tmp/work\\n"):
            break
    seen["said"] = said.decode()
    await runtime.teardown()  # (the sleep still runs: teardown kills it)
    for _ in range(50):
        if not os.path.exists(f"/proc/{inner}"):
            break
        await asyncio.sleep(0.1)
    seen["left"] = os.path.exists(f"/proc/{inner}")
    print(json.dumps(seen))
asyncio.run(main())
'''


def test_a_live_process_with_pipes_runs_in_the_runtimes_sandbox(served):
    """An ACP harness talks to its agent through a live process's pipes (Runtime.open_process): exec'd rather than
    forked warm, it still runs in the runtime's sandbox, as its uid; seen from outside it (the process's namespace
    and uid in /proc), and gone with the runtime's teardown."""
    python = served["word_echo"][1]
    done = subprocess.run([python, "-c", OPEN_PROCESS], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["same_pid_namespace"] and seen["uid"] not in (0, os.getuid())
    assert seen["said"] == "got hello\n/tmp/work\n" and not seen["left"]
