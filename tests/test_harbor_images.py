"""Harbor tasks in their own images: built at import by a real container engine (Docker, Podman), each episode's
sandbox over the image's exported files, its commands run as the image's users with its environment, workdir and
entrypoint, its verifier in the image; what the emulation over the host's root refuses (apt-get of a package this
machine has not, a RUN line it cannot replay) plays. What an episode writes is its own: the shared files, the next
episode and the host never see it (checked from outside).

Real parts: dockerd (started here if none answers), Podman, Debian's mirror for the task's apt-get, bubblewrap, a
real server on loopback. The base image is a stand-in, tagged as one: Debian 12 made by mmdebstrap (no registry is
reachable here)."""

import asyncio
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import IMAGE, ROOT, write_files
from openai_server import ScriptedServer
from verifiers_front import FRONT_END, rewards_of, verifiers_runs

import openenv_gym
from benchmarks.harbor_runner import HarborRunner
from benchmarks.ordinary_user import ensure_user, readable_by_all, run_as, user_venv
from openenv_gym.client.local import LocalServer
from openenv_gym.importers import ImportFailedError, import_environment
from openenv_gym.manifests import load_manifest
from openenv_gym.manifests.images import HOME_LABEL, build_image
from openenv_gym.manifests.schema import ManifestError
from openenv_gym.sandbox import engines, images, rootfs, unavailable
from openenv_gym.sandbox.sandbox import image_uids

TASK = ROOT / "tests" / "harbor_image_tasks" / "figlet_user"
SUBMIT = {"name": "submit", "arguments": {}}

def _same_venv() -> Path:
    """A task whose venv is the image task's (the verifiers' test tools: its image holds the rest), that imports
    without an engine."""
    return write_files(Path(tempfile.mkdtemp()) / "task", {"task.toml": "", "instruction.md": "x\n",
                                                           "tests/test.sh": ""})


pytestmark = [pytest.mark.env_venvs.with_args(_same_venv),
              pytest.mark.skipif(unavailable() is not None, reason="needs the sandbox (make test sets it up)")]


def bash(command: str) -> dict:
    return {"name": "bash", "arguments": {"command": command}}


@pytest.fixture(scope="module", params=["docker", "podman"])
def served(request, tmp_path_factory):
    """The task imported with the engine (its image built), served; (engine, manifest, server, what was said)."""
    request.getfixturevalue(request.param)
    said: list[str] = []
    [result] = import_environment(TASK, f"imaged-{request.param}", tmp_path_factory.mktemp("out"), engine=request.param,
                                  say=said.append, check=False)
    front_end = FRONT_END if request.param == "docker" else ()  # (where Harbor's own runner is the oracle)
    with LocalServer(str(result.folder), 1, 20, *front_end) as server:
        yield request.param, load_manifest(result.folder), server, said


def play(server: LocalServer, options: dict, *actions: dict) -> list[tuple]:
    async def episode() -> list[tuple]:
        async with openenv_gym.connect(server.url) as conn:
            session = conn.session()
            try:
                await session.reset(options=options)
                return [await session.step(action) for action in actions]
            finally:
                await session.close()
    return asyncio.run(episode())


def test_what_the_emulation_refuses_builds_its_image_at_import_and_plays_in_it(served, tmp_path):
    engine, manifest, server, said = served
    with pytest.raises(ImportFailedError, match="apt-get install of figlet, which this machine has not"):
        import_environment(TASK, "emulated", tmp_path / "out", engine="none", check=False)
    assert manifest.engine == engine
    # (built, or built before; a classic builder counts the import's label as a step of its own)
    assert not said or any(re.search(r"step 2 of (9|10): RUN apt-get update", line) for line in said)
    [oracle] = play(server, {"oracle": True}, SUBMIT)
    assert oracle[1:3] == (1.0, True), oracle[4].get("verifier_output")
    # (with Docker, the image's healthcheck passed before the reset returned; Podman's image has none: wait for it)
    started = "true" if engine == "docker" else "for i in $(seq 100); do [ -s /tmp/entrypoint.txt ] && break; " \
        "sleep 0.05; done"
    resolved = "python3 -c 'import socket; print(socket.gethostbyname(\"localhost\"))'"
    looked, nothing = play(server, {}, bash(f"id -un; echo $HOME $GREETING; pwd; {started}; cat /tmp/entrypoint.txt;"
                                            f" command -v figlet; {resolved}; cat /etc/resolv.conf"), SUBMIT)
    assert looked[0].splitlines()[:6] == ["root", "/root from-the-image", "/app", "player from-the-image",
                                          "/usr/bin/figlet", "127.0.0.1"]
    # (the task has the network: the host's resolver, as an engine gives a container)
    assert looked[0].splitlines()[6:-1] == Path("/etc/resolv.conf").read_text().splitlines()
    # (the agent as [agent].user, the entrypoint as USER; localhost known, as in a container: an exported image's
    # /etc/hosts is the empty placeholder its engine mounts over)
    assert nothing[1:3] == (0.0, True)


def test_a_task_names_an_image_that_is_not_there_and_is_told_how_to_load_it(docker, tmp_path):
    task = write_files(tmp_path / "task", {
        "task.toml": '[environment]\ndocker_image = "openenv-gym-test/never-built:absent"\n', "instruction.md": "x\n",
        "tests/test.sh": "echo 1 > /logs/verifier/reward.txt\n"})
    with pytest.raises(ImportFailedError, match=r"docker_image openenv-gym-test/never-built:absent is not in "
                                                r"docker's images and could not be pulled \(.+\): load it \(docker "
                                                r"load -i IMAGE.tar\)"):
        import_environment(task, "absent", tmp_path / "out", engine="docker", check=False)


def _digest(folder: Path) -> str:
    """Every path of a tree, its owner, mode, size and modification time."""
    found = hashlib.sha256()
    for root, folders, files in os.walk(folder):
        folders.sort()
        for name in sorted([*folders, *files]):
            status = os.lstat(os.path.join(root, name))
            found.update(f"{root}/{name} {status.st_uid} {status.st_mode} {status.st_size} "
                         f"{status.st_mtime_ns}\n".encode())
    return found.hexdigest()


def _image_processes() -> list[str]:
    """The host's processes that run as one of the images' uids (an episode's)."""
    base, count = image_uids()
    found = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            uid = int(next(line for line in status.read_text().splitlines() if line.startswith("Uid:")).split()[1])
        except (OSError, StopIteration):
            continue
        if base <= uid < base + count:
            found.append(status.parent.name)
    return found


def test_an_episode_writes_only_its_own_and_reaches_nothing_of_the_hosts(served, tmp_path):
    """As the image's root (the task's [agent].user), with a container's root's capabilities, the episode
    overwrites the image's files and looks for a host's file; from outside, the exported files are as they were,
    the host's file unseen, the next episode finds the image as built, and no mount is left."""
    engine, manifest, server, _ = served
    image_id = json.loads((manifest.vendored / "index.json").read_text())[0]["image_id"]
    [rootfs] = (Path(os.environ["OPENENV_GYM_HOME"]) / "images" / "rootfs").glob(f"{image_id[:24]}-*/rootfs")
    play(server, {}, bash("true"))  # (the first sandbox makes the folders the server's Python is shown at)
    before = _digest(rootfs)
    secret = Path("/opt") / f"openenv-gym-secret-{os.getpid()}"  # (the host's /opt: the image has one of its own)
    secret.write_text("host only\n")
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        [wrote] = play(server, {}, bash(f"cat {secret} 2>&1; echo mine > /opt/config.json && rm /usr/bin/figlet && "
                                        "echo mine > /app/answer.txt && echo written; cat /proc/[0-9]*/cmdline "
                                        "2>/dev/null | tr '\\0' ' ' | grep -c 'time[.]sleep(600)'"))
        # (2>/dev/null: a process of the episode's own, such as the pipeline's, may end between the glob and cat)
        assert wrote[0].splitlines() == [f"cat: {secret}: No such file or directory", "written", "0",
                                         "[exit code 1]"], wrote[0]
        [after] = play(server, {}, bash("cat /opt/config.json; echo; ls /app; command -v figlet"))  # (/app: empty)
        assert after[0].splitlines() == ['{"n": 7}', "/usr/bin/figlet", "[exit code 0]"], after[0]
    finally:
        secret.unlink()
        bystander.kill()
    assert _digest(rootfs) == before
    leftover = subprocess.run(["findmnt", "-rn", "-o", "TARGET"], capture_output=True, text=True).stdout
    assert str(rootfs) not in leftover
    assert manifest.engine == engine


def test_what_imports_built_is_listed_with_its_environments_and_the_unused_is_cleaned(served, tmp_path):
    engine, manifest, _, _ = served
    unused, elsewhere = tmp_path / "unused", tmp_path / "elsewhere"
    write_files(unused, {"Dockerfile": f"FROM {IMAGE}\nRUN echo {time.time_ns()} > /made\n"})
    write_files(elsewhere, {"Dockerfile": f"FROM {IMAGE}\nRUN echo {time.time_ns()} > /made-elsewhere\n"})
    spare = build_image(engines.choose(engine), unused, lambda _: None)
    # (another home's import, or one still running in a parallel worker: its image is not this home's to clean)
    theirs = images.build(engines.choose(engine), elsewhere, tmp_path / "logs", labels={HOME_LABEL: "/elsewhere"})
    cli = [sys.executable, "-m", "openenv_gym", "images"]
    listed = subprocess.run([*cli, "list"], capture_output=True, text=True, timeout=120, check=True).stdout
    tag = json.loads((manifest.vendored / "index.json").read_text())[0]["tag"]
    assert re.search(rf"^{engine} +{re.escape(tag)} +.+  imaged-{engine}; exported to .+/images/rootfs/", listed,
                     re.M), listed
    assert re.search(rf"^{engine} +{re.escape(spare)} +.+  unused$", listed, re.M), listed
    cleaned = subprocess.run([*cli, "clean"], capture_output=True, text=True, timeout=300, check=True).stdout
    assert f"removed {engine} {spare} " in cleaned and f"{engine} {tag}" not in cleaned and theirs not in cleaned
    assert not rootfs.image_id(engines.choose(engine), spare) and rootfs.image_id(engines.choose(engine), tag)
    assert rootfs.image_id(engines.choose(engine), theirs)
    subprocess.run([engine, "rmi", theirs], capture_output=True, timeout=120)


def test_an_environment_is_served_with_the_engine_that_holds_its_images_or_refused_saying_what_to_do(served,
                                                                                                  tmp_path):
    engine, manifest, _, _ = served
    with pytest.raises(ManifestError, match=rf"imported into images of {engine}'s: serve them with --engine docker "
                                            "or podman .* or import again with --engine none"):
        manifest.served_with("none")
    assert manifest.served_with("podman").engine == "podman"
    [emulated] = import_environment(ROOT / "tests" / "harbor_tasks" / "hello_v14", "emulated", tmp_path, check=False)
    refused = subprocess.run([sys.executable, "-m", "openenv_gym", "serve", str(emulated.folder), "--engine", engine,
                              "--port", "0"], capture_output=True, text=True, timeout=120)
    assert refused.returncode != 0
    assert f"images were emulated at import (no engine answered, or --engine none): import again with --engine " \
           f"{engine}" in refused.stderr


def _containers(engine: str) -> list[str]:
    """The names of the containers our servers run trials in (sandbox/containers.py names them so)."""
    listed = subprocess.run([engine, "ps", "--all", "--filter", "name=openenv-gym-w", "--format", "{{.Names}}"],
                            capture_output=True, text=True, timeout=60, check=True)
    return listed.stdout.split()


def _eventually(holds: Callable[[], bool], seconds: float = 30.0) -> bool:
    """Whether `holds()` comes true within `seconds` (a session's close is answered first, its trial closed after)."""
    deadline = time.monotonic() + seconds
    while not holds() and time.monotonic() < deadline:
        time.sleep(0.1)
    return holds()


def _tree(pid: int) -> list[int]:
    """A process and its descendants."""
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    found = [pid]
    for each in found:
        found += [child for child, parent in parents.items() if parent == each]
    return found


def _top(engine: str, name: str) -> str:
    return subprocess.run([engine, "top", name], capture_output=True, text=True, timeout=60, check=True).stdout


@pytest.fixture
def no_bubblewrap(tmp_path, monkeypatch) -> None:
    """The servers started here find every program of the machine's but bubblewrap: no sandbox can be made."""
    shown = tmp_path / "bin"
    shown.mkdir()
    for folder in ("/usr/local/bin", "/usr/bin", "/usr/sbin"):
        for program in Path(folder).iterdir():
            if program.name != "bwrap" and not (shown / program.name).exists():
                (shown / program.name).symlink_to(program)
    monkeypatch.setenv("PATH", str(shown))


def test_where_no_sandbox_can_be_made_each_trial_runs_in_a_container_of_its_own(served, no_bubblewrap):
    """Without bubblewrap (hidden from the server's PATH), the server says so and runs each trial in a container of
    the engine's, as Harbor does: the image's users, environment, workdir and entrypoint; the oracle scores 1. Seen
    from outside: the server's memory bound on the container, a command past its timeout killed with what it
    started, no container left once its episode closes, and one a killed server left removed by the next."""
    engine, manifest, _, _ = served
    with LocalServer(str(manifest.folder), 1, 20) as server:
        assert f"each trial in a container of {engine}'s" in server.output
        [oracle] = play(server, {"oracle": True}, SUBMIT)
        assert oracle[1:3] == (1.0, True), oracle[4].get("verifier_output")

        async def looked_at_from_outside() -> tuple[list[str], str, str]:
            async with openenv_gym.connect(server.url) as conn:
                session = conn.session()
                await session.reset()
                [name] = _containers(engine)
                memory = subprocess.run([engine, "inspect", "--format", "{{.HostConfig.Memory}}", name],
                                        capture_output=True, text=True, timeout=60, check=True).stdout.strip()
                looked = await session.step(bash("id -un; echo $HOME $GREETING; pwd; cat /tmp/entrypoint.txt; "
                                                 "command -v figlet; echo mine > /opt/config.json"))
                killed = await session.step({"name": "bash", "arguments": {
                    "command": "sleep 600 & sleep 601", "timeout": 1}})
                left = await asyncio.to_thread(_top, engine, name)
                await session.close()
                return [looked[0], killed[0], memory], left, name
        [looked, killed, memory], left, name = asyncio.run(looked_at_from_outside())
        assert looked.splitlines()[:5] == ["root", "/root from-the-image", "/app", "player from-the-image",
                                           "/usr/bin/figlet"], looked
        assert killed.endswith("[exit code -9] (killed after 1 s)"), killed
        assert "sleep 60" not in left, left
        assert int(memory) == manifest.limits.memory_mb << 20
        assert _eventually(lambda: name not in _containers(engine))
        [again] = play(server, {}, bash("cat /opt/config.json"))
        assert again[0].startswith('{"n": 7}'), again[0]  # (the next trial: the image as built)

    with LocalServer(str(manifest.folder), 1, 20) as server:  # (killed with an episode open: its container stays)
        async def open_one() -> None:
            conn = await openenv_gym.connect(server.url)
            await conn.session().reset()
        asyncio.run(open_one())
        for pid in _tree(server.process.pid):  # (at once: a worker whose supervisor ends closes its sessions)
            os.kill(pid, 9)
        server.process.wait()
        assert len(_containers(engine)) == 1
    with LocalServer(str(manifest.folder), 1, 20):
        assert _containers(engine) == []


def test_a_separate_verifier_runs_in_a_container_of_its_own_too(docker, tmp_path, no_bubblewrap):
    """Harbor's separate verifier (its own image, built from tests/), given the agent's artifacts and nothing else
    of its container's, where no sandbox can be made: the oracle scores 1, doing nothing 0."""
    task = tmp_path / "apart"
    shutil.copytree(ROOT / "tests" / "harbor_tasks" / "apart_v13", task)
    for dockerfile in (task / "environment" / "Dockerfile", task / "tests" / "Dockerfile"):  # (the stand-in base; a
        dockerfile.write_text(dockerfile.read_text().replace("ubuntu:24.04", IMAGE)  # plain COPY: no BuildKit here)
                              .replace("COPY --chmod=755", "COPY"))
    [result] = import_environment(task, "apart-containers", tmp_path / "out", engine="docker", check=False)
    with LocalServer(str(result.folder), 1, 20) as server:
        assert "each trial in a container of docker's" in server.output
        [oracle] = play(server, {"oracle": True}, SUBMIT)
        [nothing] = play(server, {}, SUBMIT)
    assert (oracle[1], nothing[1]) == (1.0, 0.0), (oracle[4].get("verifier_output"), nothing[4])
    assert _eventually(lambda: _containers("docker") == [])


@pytest.fixture(scope="module")
def harbors_trials(docker, tmp_path_factory) -> dict:
    """Harbor 0.25's `harbor run` of the task in Docker: {agent: its trial} for its oracle and nop agents."""
    runner = HarborRunner.ready(Path(os.environ["OPENENV_GYM_VENVS"]) / "harbor-runner")
    jobs = tmp_path_factory.mktemp("jobs")
    trials = {agent: runner.run(TASK, agent, "docker", jobs) for agent in ("oracle", "nop")}
    for agent, [trial] in trials.items():
        assert trial.error is None, (agent, trial)
    return {agent: trial for agent, [trial] in trials.items()}


@pytest.mark.timeout(900)  # (Harbor's runner is made on a new machine first: its venv of Python 3.12, ~1 minute)
@pytest.mark.parametrize("served", ["docker"], indirect=True)  # (Podman's too in `make bench`: harbor_images.py)
def test_harbors_own_runner_gives_the_rewards_ours_gives_in_the_same_image(served, harbors_trials):
    """Harbor's own runner (its oracle and nop agents) in the same engine, on the same task: every metric the same,
    trial by trial."""
    _, _, server, _ = served
    ours = {"oracle": play(server, {"oracle": True}, SUBMIT)[-1], "nop": play(server, {}, SUBMIT)[-1]}
    for agent, trial in harbors_trials.items():
        assert trial.rewards == ours[agent][4]["metrics"] == {"reward": 1.0 if agent == "oracle" else 0.0}


@pytest.mark.timeout(900)
@pytest.mark.parametrize("served", ["docker"], indirect=True)
def test_the_verifiers_front_end_ends_each_run_with_the_reward_harbors_own_runner_gives(served, harbors_trials):
    """Verifiers' EnvClient (as prime-rl drives it) runs the task through our front end, a scripted model replying
    with the commands of the task's solution (what Harbor's oracle agent runs), or with nothing (its nop agent): each
    run's reward is the one Harbor's own runner gives its agent."""
    _, _, server, _ = served
    plays = {"oracle": [bash((TASK / "solution" / "solve.sh").read_text()), SUBMIT], "nop": [SUBMIT]}
    with ScriptedServer(plays) as model:
        runs = verifiers_runs(server.status["verifiers"], model.url, [f"script:{agent}" for agent in plays], [{}, {}])
    assert rewards_of(runs) == [harbors_trials[agent].rewards["reward"] for agent in plays] == [1.0, 0.0]


def test_a_tasks_cpus_and_memory_bound_its_episode(docker, tmp_path):
    """task.toml's cpus and memory_mb, as Harbor's engines enforce them: read from outside, in the episode's control
    group, while it runs; its program that takes more memory is killed."""
    task = write_files(tmp_path / "task", {
        "task.toml": "[environment]\ncpus = 0.5\nmemory_mb = 96\n", "instruction.md": "x\n",
        "environment/Dockerfile": f"FROM {IMAGE}\nWORKDIR /app\n",
        "tests/test.sh": "echo 1 > /logs/verifier/reward.txt\n"})
    [result] = import_environment(task, "bounded", tmp_path / "out", engine="docker", check=False)

    async def episode(url: str) -> tuple[tuple, list[dict[str, str]]]:
        async with openenv_gym.connect(url) as conn:
            session = conn.session()
            await session.reset()
            taken = await session.step(bash("python3 -c 'x = bytearray(400 << 20)'; echo $?"))
            groups: dict[str, dict[str, str]] = {}  # each episode's control group (another server's may be there too)
            for name in ("memory.limit_in_bytes", "cpu.cfs_quota_us", "cpu.cfs_period_us"):
                for path in Path("/sys/fs/cgroup").glob(f"*/openenv-gym/*/{name}"):
                    groups.setdefault(path.parent.name, {})[name] = path.read_text().strip()
            await session.close()
            return taken, list(groups.values())

    with LocalServer(str(result.folder), 1, 4) as server:
        taken, groups = asyncio.run(episode(server.url))
    assert taken[0].splitlines()[0] == "137" and "Killed" in taken[0], taken[0]  # (SIGKILL, by the memory bound)
    bounded = {"memory.limit_in_bytes": str(96 << 20), "cpu.cfs_quota_us": "50000", "cpu.cfs_period_us": "100000"}
    assert bounded in groups


USER_PLAYS = """
import asyncio, json, sys
import openenv_gym
from openenv_gym.client.local import LocalServer

async def play(url, options):
    async with openenv_gym.connect(url) as conn:
        session = conn.session()
        await session.reset(options=options)
        looked = await session.step({"name": "bash", "arguments": {"command": "id -un; stat -c %U /app /opt"}})
        ended = await session.step({"name": "submit", "arguments": {}})
        await session.close()
        return looked[0], ended[4]["metrics"]

with LocalServer(sys.argv[1], 1, 4) as server:
    print(json.dumps([asyncio.run(play(server.url, {"oracle": True})), asyncio.run(play(server.url, {}))]))
"""


@pytest.fixture(scope="module")
def users_python(tmp_path_factory) -> Path:
    """A folder every user reads: a venv of /usr/bin/python3 with this openenv_gym (the suite's interpreter lives
    where users cannot read), and its wheel, for the environments' venvs the users' servers make."""
    place = tmp_path_factory.mktemp("users-python")
    user_venv(place)
    subprocess.run([sys.executable, "-m", "uv", "build", "--quiet", "--wheel", "--out-dir", str(place / "wheels"),
                    str(ROOT)], check=True, capture_output=True)
    readable_by_all(place)
    return place


ROOT_ONLY = {  # (a task whose image has no user but root: with one uid, every image user is it)
    "task.toml": '[task]\nname = "openenv-gym/root-only"\n', "instruction.md": "Write 7 to /opt/answer.\n",
    "environment/Dockerfile": f"FROM {IMAGE}\nRUN mkdir /app && echo 7 > /opt/seven\nWORKDIR /app\n",
    "solution/solve.sh": "#!/bin/sh\ncp /opt/seven /opt/answer\n",
    "tests/test.sh": "#!/bin/sh\n[ \"$(cat /opt/answer)\" = 7 ] && echo 1 > /logs/verifier/reward.txt "
                     "|| echo 0 > /logs/verifier/reward.txt\n"}


@pytest.mark.parametrize("subordinate", [True, False], ids=["subordinate-uids", "shared-uid"])
def test_an_ordinary_users_server_plays_tasks_in_their_images(docker, tmp_path_factory, monkeypatch, users_python,
                                                               subordinate):
    """Imported by root (the engine is root's), served by an ordinary user: its server, in a user namespace of its
    own, unpacks the image's files for its own uids (subordinate ones, or its one uid) and plays in them, no engine
    needed. The image's users are its users where it has uids enough (the figlet task's player); with one uid, every
    user of the image is that one, root."""
    name = "openenv-subuid" if subordinate else "openenv-shared"
    user = ensure_user(name, "200000:65536" if subordinate else None)
    place = tmp_path_factory.mktemp(f"image-user-{subordinate}")
    task = TASK if subordinate else write_files(place / "root-only", ROOT_ONLY)
    monkeypatch.setenv("OPENENV_GYM_HOME", str(place / "home"))
    [result] = import_environment(task, "imaged-user", place / "out", engine="docker", check=False)
    readable_by_all(place)
    subprocess.run(["chown", "-R", f"{user.pw_uid}:{user.pw_gid}", str(place / "home")], check=True)
    done = run_as(name, [str(users_python / "venv" / "bin" / "python"), "-c", USER_PLAYS, str(result.folder)],
                  {"OPENENV_GYM_HOME": str(place / "home"), "UV_FIND_LINKS": str(users_python / "wheels"),
                   "SSL_CERT_FILE": os.environ.get("SSL_CERT_FILE", "")}, timeout=600, cwd=place)
    assert done.returncode == 0, done.stderr[-3000:]
    (looked, oracle), (_, nothing) = json.loads(done.stdout.strip().splitlines()[-1])
    assert (oracle, nothing) == ({"reward": 1.0}, {"reward": 0.0})
    assert looked.splitlines()[:3] == ["root", "player" if subordinate else "root", "root"]
