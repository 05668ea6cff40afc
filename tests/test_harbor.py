"""Harbor task packages: imported (our fixtures, one per task.toml schema style: tests/harbor_tasks/), served, and
played as Harbor plays a trial: the oracle (solution/solve.sh) reaches the top reward, doing nothing gets the floor,
the verifier reads reward.json before reward.txt, multi-step tasks stop below their min_reward, a phase without
network has none (checked from outside: the host's listener never hears from it).

Real parts: a real server on loopback, bubblewrap's sandboxes, the tasks' own bash scripts, pytest in the venv."""

import asyncio
import os
import shutil
from pathlib import Path

import pytest
from conftest import ROOT, Listener, write_files
from tool_shape import names_of

import openenv_gym
from openenv_gym.client.local import LocalServer
from openenv_gym.errors import EnvError
from openenv_gym.importers import ImportFailedError, import_environment
from openenv_gym.sandbox import unavailable
from openenv_gym.sandbox.sandbox import UID_BASE

TASKS = ROOT / "tests" / "harbor_tasks"
SUBMIT = {"name": "submit", "arguments": {}}

pytestmark = [pytest.mark.env_venvs.with_args(TASKS),
              pytest.mark.skipif(unavailable() is not None, reason="needs the sandbox (make test sets it up)")]


def bash(command: str, timeout: float | None = None) -> dict:
    return {"name": "bash", "arguments": {"command": command, **({"timeout": timeout} if timeout else {})}}


@pytest.fixture(scope="module")
def listener():
    heard = Listener()
    yield heard
    heard.close()


@pytest.fixture(scope="module")
def harbor(tmp_path_factory, listener):
    """The fixtures imported as one environment (the no-network task told the port of a host listener), served."""
    source = tmp_path_factory.mktemp("source") / "tasks"
    shutil.copytree(TASKS, source)
    (source / "legacy_v10" / "tests" / "port").write_text(str(listener.port))
    [result] = import_environment(source, "ours", tmp_path_factory.mktemp("out"))
    with LocalServer(str(result.folder), 1, 50) as server:
        yield result, server


async def _episode(url: str, options: dict, actions: list) -> tuple[str, dict, list[tuple]]:
    async with openenv_gym.connect(url) as conn:
        session = conn.session()
        try:
            obs, info = await session.reset(options=options)
            steps = []
            for action in actions:
                steps.append(await session.step(action))
                if steps[-1][2] or steps[-1][3]:
                    break
            return obs, info, steps
        finally:
            await session.close()


def play(server: LocalServer, options: dict, *actions) -> tuple[str, dict, list[tuple]]:
    return asyncio.run(_episode(server.url, options, list(actions)))


def test_a_folder_of_tasks_imports_as_one_environment_whose_catalog_is_its_tasks(harbor):
    result, server = harbor
    assert result.gym_id == "openenv/harbor-ours" and "6 Harbor tasks" in result.notes
    assert any("apt-get install curl: the host's packages stand in" in note for note in result.notes)
    assert any("environment/libtool.so copied though" in note for note in result.notes)  # (a .so is junk elsewhere)
    assert result.dependencies == ["pytest", "pytest-json-ctrf", "iniconfig>=1"]  # (RUN pip install: the venv)

    async def catalog():
        async with openenv_gym.connect(server.url) as conn:
            return await conn.tasks("train", 0, 10)
    ids = [task["id"] for task in asyncio.run(catalog())]
    assert sorted(ids) == ["apart_v13", "hello_v14", "legacy_v10", "service_v13", "steps_v11", "system_v12"]


@pytest.mark.parametrize("task", ["hello_v14", "legacy_v10", "steps_v11", "service_v13", "apart_v13", "system_v12"])
def test_the_oracle_reaches_the_top_reward_and_doing_nothing_the_floor(harbor, task):
    _, server = harbor
    obs, info, oracle = play(server, {"task": task, "oracle": True}, SUBMIT, SUBMIT, SUBMIT)
    _, _, nothing = play(server, {"task": task}, SUBMIT, SUBMIT, SUBMIT)
    assert oracle[-1][1] == 1.0 and oracle[-1][2], oracle[-1][4]
    assert nothing[-1][1] == 0.0 and nothing[-1][2]
    assert obs == (TASKS / task / "instruction.md").read_text() if task != "steps_v11" else obs.startswith("Write")
    assert names_of(info["tools"])[0] == "bash" and info["task"] == task


def test_what_the_image_writes_in_the_systems_folders_each_episode_writes_in_its_own_overlay(harbor):
    """TermiGen's images link python to python3 in /usr/bin, make folders in /opt, add to /etc: each episode has
    them, writes there as the image's build did, and the host's folders, other episodes' and the rest of /usr are
    untouched (checked from outside: the host's files, and a second episode's view)."""
    _, server = harbor
    before = sorted(os.listdir("/opt")), os.path.lexists("/usr/bin/python")
    _, _, steps = play(server, {"task": "system_v12"}, bash("readlink /usr/bin/python; cat /etc/profile.d/tool.sh"),
                       bash("python /opt/tool/bin/greet.py > /opt/tool/output.txt; echo mine > /usr/bin/made-here"),
                       bash("echo no > /usr/lib/nope; echo no > /etc/passwd-nope; ls -ld /usr/bin | cut -c1-10"),
                       SUBMIT)
    assert steps[0][0].startswith("/usr/bin/python3\nexport TOOL_HOME=/opt/tool")
    assert "Permission denied" in steps[2][0] and steps[2][0].count("Permission denied") == 2
    assert steps[-1][1] == 1.0
    _, _, again = play(server, {"task": "system_v12"}, bash("ls /opt/tool /usr/bin/made-here"), SUBMIT)
    assert "output.txt" not in again[0][0] and "No such file" in again[0][0]  # (the episode before's: gone)
    assert (sorted(os.listdir("/opt")), os.path.lexists("/usr/bin/python")) == before
    assert not os.path.exists("/usr/bin/made-here") and not os.path.exists("/usr/lib/nope")


def test_reward_json_comes_first_with_every_metric_and_a_phase_without_network_has_none(harbor, listener):
    _, server = harbor
    _, _, steps = play(server, {"task": "legacy_v10"}, bash("echo 42 > /app/answer.txt"), bash("whoami; id -u"),
                       SUBMIT)
    assert steps[0][0] == "[exit code 0]"
    name, uid = steps[1][0].split("\n")[:2]  # [agent].user: the episode's own uid, by that name
    assert name == "agent" and int(uid) >= UID_BASE
    assert steps[-1][4]["metrics"] == {"reward": 1.0, "correctness": 1.0, "offline": 1.0}  # (test.sh exits 3)
    assert listener.accepted == 0  # its connection attempt to the host never arrived


def test_a_multi_step_task_goes_on_while_it_reaches_min_reward_and_scores_the_mean(harbor):
    _, server = harbor
    _, info, steps = play(server, {"task": "steps_v11"}, bash("echo first > notes.txt"), SUBMIT,
                          bash("cat from-setup.txt; ls"), bash("echo wrong >> notes.txt"), SUBMIT)
    assert info["step"] == "write"
    assert steps[1][2] is False and steps[1][4]["next_step"] == "append" and steps[1][0].startswith("Append")
    assert steps[2][0].startswith("staged by the step\n") and "setup.sh" not in steps[2][0]  # (it removed itself)
    assert steps[-1][1] == 0.5 and steps[-1][4]["step_rewards"] == [1.0, 0.0]
    _, _, stopped = play(server, {"task": "steps_v11"}, SUBMIT, SUBMIT)
    assert len(stopped) == 1 and stopped[0][2] and stopped[0][4]["aborted"]  # below min_reward: no second step


def test_the_verifier_starts_from_its_own_files_whatever_the_agent_left_there(harbor):
    _, server = harbor
    cheat = "mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt && echo exit 0 > /tests/test.sh"
    _, _, steps = play(server, {"task": "hello_v14"}, bash(cheat), SUBMIT)
    assert steps[-1][1] == 0.0  # /logs/verifier emptied and tests/ staged again before test.sh ran


def test_bash_answers_with_output_and_exit_code_bounded_and_killed_past_its_timeout(harbor):
    _, server = harbor
    _, _, steps = play(server, {"task": "hello_v14"}, bash("cat seed.txt; pwd; echo $GREETING_FILE; exit 4"),
                       bash("sleep 30", timeout=0.5), bash("yes | head -c 100000"), "ls /app",
                       bash("touch /usr/bin/planted"), {"name": "bash", "arguments": {}})
    assert steps[0][0] == "hello, harbor\n/app\ngreeting.txt\n[exit code 4]" and steps[0][4]["exit_code"] == 4
    assert steps[1][4]["timed_out"] and "(killed after 0.5 s)" in steps[1][0]
    assert len(steps[2][0]) < 16_500  # (the end of the output is kept)
    assert "seed.txt" in steps[3][0]  # a plain string is a command
    assert "Read-only file system" in steps[4][0] and not Path("/usr/bin/planted").exists()
    assert steps[5][4]["error"]["code"] == "invalid_action"


def test_the_next_episode_finds_nothing_of_the_one_before(harbor):
    _, server = harbor
    play(server, {"task": "hello_v14"}, bash("echo left > /app/left.txt; echo left > /logs/agent/left.txt"))
    _, _, steps = play(server, {"task": "hello_v14"}, bash("ls /app /logs/agent"))
    assert "left.txt" not in steps[0][0] and "seed.txt" in steps[0][0]


def test_a_missing_reward_is_an_error_not_zero(tmp_path):
    task = write_files(tmp_path / "silent", {
        "task.toml": 'schema_version = "1.4"\n[task]\nname = "ours/silent"\n',
        "instruction.md": "Do nothing.\n",
        "environment/Dockerfile": "FROM ubuntu:24.04\nWORKDIR /app\n",
        "tests/test.sh": "#!/bin/bash\necho 'I forgot the reward'\n"})
    [result] = import_environment(task, "silent", tmp_path / "out")
    with LocalServer(str(result.folder), 1, 5) as server, pytest.raises(EnvError, match=r"wrote no reward.*forgot"):
        play(server, {}, SUBMIT)


@pytest.mark.parametrize(("files", "refusal"), [
    ({"task.toml": '[environment]\nos = "windows"\n'}, r"\[environment\].os = 'windows'"),
    ({"task.toml": "[environment]\ngpus = 1\n"}, r"\[environment\].gpus"),
    ({"environment/docker-compose.yaml": "services: {}\n"}, "environment/docker-compose.yaml"),
    ({"task.toml": '[verifier]\nenvironment_mode = "shared"\n[verifier.environment]\nos = "linux"\n'},
     "environment_mode = shared with an environment of its own"),
    ({"environment/Dockerfile": "FROM ubuntu:24.04\nRUN echo x > /marker.txt\n"},  # (as Harbor's examples do)
     "RUN lines write /marker.txt, a file at the root"),
    ({"environment/Dockerfile": "FROM alpine:3.22\n"}, "line 1: alpine:3.22 is an Alpine image"),
    ({"environment/Dockerfile": "FROM ubuntu:24.04\nRUN make install\n"}, "line 2: RUN 'make install' cannot"),
    ({"environment/Dockerfile": "FROM ubuntu:24.04\nRUN apt-get install -y no-such-package-here\n"},
     "apt-get install of no-such-package-here, which this machine has not"),
    ({"environment/Dockerfile": "FROM ubuntu:24.04\nRUN mkdir -p /dev/net\n"},
     "/dev/net: the task writes there, in the host's root"),
    ({"task.toml": '[environment]\nnetwork_mode = "no-network"\n[agent]\nnetwork_mode = "public"\n'},
     "a phase may only go without network here"),
    ({"task.toml": '[environment]\nnetwork_mode = "allowlist"\nallowed_hosts = ["*.example.com"]\n'},
     "not wildcards"),
    ({"task.toml": '[environment]\nnetwork_mode = "allowlist"\nallowed_hosts = ["1.1.1.1"]\n'},  # (as published)
     "'1.1.1.1:443': name the host"),
    ({"task.toml": '[environment.env]\nJUDGE_KEY = "${OPENENV_GYM_NOT_SET_ANYWHERE}"\n'},  # (a judge's key, say)
     r"names \$\{OPENENV_GYM_NOT_SET_ANYWHERE\}, which is not set here"),
])
def test_what_cannot_run_here_is_refused_at_import_with_the_key_and_why(tmp_path, files, refusal):
    task = write_files(tmp_path / "task", {"task.toml": "", "instruction.md": "x\n", "tests/test.sh": "", **files})
    with pytest.raises(ImportFailedError, match=refusal):
        import_environment(task, "refused", tmp_path / "out", check=False)


def test_a_folder_leaves_out_what_cannot_run_and_says_why(tmp_path):
    write_files(tmp_path / "many", {"good/task.toml": "", "good/instruction.md": "x\n",
                                    "good/tests/test.sh": "echo 1 > /logs/verifier/reward.txt\n",
                                    "bad/task.toml": "[environment]\ngpus = 2\n", "bad/instruction.md": "x\n"})
    [result] = import_environment(tmp_path / "many", "many", tmp_path / "out", check=False)
    assert result.notes[0] == "1 Harbor task" and "bad: left out: [environment].gpus" in result.notes[1]


def test_the_built_in_agent_program_plays_a_task_inside_its_trial_each_model_request_a_step(harbor):
    """harness "bash": the agent program runs in the trial's sandbox; the client answers its model requests (here
    a scripted policy: a tool call, then submit), the program runs the commands, and the trial is verified."""
    _, server = harbor
    call = {"content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {
        "name": "bash", "arguments": '{"command": "tr a-z A-Z < seed.txt > greeting.txt; cat greeting.txt"}'}}]}
    submit = {"content": "", "tool_calls": [{"id": "c2", "type": "function", "function": {
        "name": "submit", "arguments": "{}"}}]}
    obs, info, steps = play(server, {"task": "hello_v14", "harness": "bash"}, call, submit)
    assert obs.startswith("Read seed.txt")
    assert names_of(info["tools"]) == ["bash", "submit"]
    assert steps[0][0] == "HELLO, HARBOR\n[exit code 0]"  # the tool's answer, as the program sends it to the model
    assert steps[1][1] == 1.0 and steps[1][2] and "exit code 0" in steps[1][4]["program"]
    _, _, nothing = play(server, {"task": "steps_v11", "harness": "bash"}, submit, submit)
    assert nothing[-1][2] and nothing[-1][4]["aborted"]  # a multi-step task: below min_reward, it stops


def test_the_agent_timeout_and_the_step_limit_end_the_episode_truncated_and_verified(tmp_path):
    task = write_files(tmp_path / "brief", {
        "task.toml": 'schema_version = "1.4"\n[agent]\ntimeout_sec = 1.5\n',
        "instruction.md": "Write ok to /app/ok.txt.\n",
        "environment/Dockerfile": "FROM ubuntu:24.04\nWORKDIR /app\n",
        "tests/test.sh": "#!/bin/bash\n[ -f /app/ok.txt ] && echo 1 > /logs/verifier/reward.txt || "
                         "echo 0 > /logs/verifier/reward.txt\n"})
    [result] = import_environment(task, "brief", tmp_path / "out")
    manifest = result.folder / "openenv.toml"
    manifest.write_text(manifest.read_text() + "max_steps = 2\n")
    with LocalServer(str(result.folder), 1, 5) as server:
        _, _, slow = play(server, {}, bash("echo ok > ok.txt; sleep 30"))
        _, _, many = play(server, {}, "true", "true", "true")
    assert slow[0][3] and not slow[0][2] and slow[0][1] == 1.0  # killed at the agent's timeout, then verified
    assert slow[0][4]["timed_out"] and "killed after 1.5 s" not in slow[0][0]
    assert len(many) == 2 and many[1][3] and many[1][1] == 0.0  # the step limit: verified, truncated
