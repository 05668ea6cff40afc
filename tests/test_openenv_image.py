"""An OpenEnv project that ships server/Dockerfile, whose environment runs a program its Dockerfile installs
(apt-get) and no venv can hold: imported with an engine, its image is built and exported; each session of ours runs
the project's own server (the image's CMD) in a sandbox over the image's files, and is played through OpenEnv's /ws.

The oracle: the same image run by the engine itself, as `docker run` runs it (OpenEnv's own server in its own
container), played with the same actions: the same observations and rewards, a refused action refused alike.

Real parts: Docker and Podman, Debian's mirror, OpenEnv 0.10's server in the image, bubblewrap, our server on
loopback. The base image is a stand-in, tagged as OpenEnv's openenv-base: the suite's Debian 12 with the openenv
package copied from the venv the suite builds for OpenEnv projects (no registry is reachable here)."""

import asyncio
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from conftest import IMAGE, ROOT
from openenv_styles import write_project

import openenv_gym
from openenv_gym.client.local import LocalServer
from openenv_gym.client.openenv import OpenEnvTransport
from openenv_gym.errors import EnvError
from openenv_gym.importers import ImportFailedError, import_environment
from openenv_gym.manifests import load_manifest
from openenv_gym.manifests.venvs import ensure_venv
from openenv_gym.sandbox import unavailable
from openenv_gym.sandbox.sandbox import image_uids

PROJECT = ROOT / "tests" / "openenv_image_envs" / "banner_env"
BASE = "openenv-base:latest"  # (the name OpenEnv's Dockerfiles build FROM: a stand-in here)


def _openenv_project() -> Path:
    """A project with the banner's dependencies (openenv==0.10.0): its venv holds what the stand-in base copies."""
    return write_project(Path(tempfile.mkdtemp()), "relative")


pytestmark = [pytest.mark.env_venvs.with_args(_openenv_project),
              pytest.mark.skipif(unavailable() is not None, reason="needs the sandbox (make test sets it up)")]


def _has(engine: str, image: str) -> bool:
    return subprocess.run([engine, "image", "inspect", image], capture_output=True, timeout=60).returncode == 0


@pytest.fixture(scope="module", params=["docker", "podman"])
def engine(request, tmp_path_factory) -> str:
    """The engine, with the stand-in openenv-base: the suite's Debian 12 and the openenv package (built once)."""
    request.getfixturevalue(request.param)
    if not _has(request.param, BASE):
        [venv] = import_environment(_openenv_project(), "venv", tmp_path_factory.mktemp("venv"), engine="none",
                                    check=False)
        site = Path(ensure_venv(load_manifest(venv.folder))).parent.parent / "lib" / "python3.11" / "site-packages"
        context = tmp_path_factory.mktemp("base")
        (context / "Dockerfile").write_text(f"FROM {IMAGE}\n"
                                            "COPY site-packages /usr/local/lib/python3.11/dist-packages\n")
        subprocess.run(["cp", "-a", str(site), str(context / "site-packages")], check=True)
        for ours in [*(context / "site-packages").glob("*.pth"), *(context / "site-packages").glob("openenv_gym*"),
                     *(context / "site-packages").glob("__editable__*")]:
            subprocess.run(["rm", "-rf", str(ours)], check=True)
        subprocess.run([request.param, "build", "--tag", BASE, str(context)], check=True, capture_output=True,
                       timeout=900)
    return request.param


@pytest.fixture(scope="module")
def served(engine, tmp_path_factory):
    said: list[str] = []
    [result] = import_environment(PROJECT, f"banner-{engine}", tmp_path_factory.mktemp("out"), engine=engine,
                                  say=said.append, check=False)
    with LocalServer(str(result.folder), 1, 20) as server:
        yield load_manifest(result.folder), server, said, result


def _play(url: str, actions: list, ours: bool) -> list:
    """reset then each action, on our server (the native client) or on an OpenEnv server (its /ws)."""
    async def episode() -> list:
        if ours:
            async with openenv_gym.connect(url) as conn:
                session = conn.session()
                try:
                    return [await session.reset(), *[await session.step(action) for action in actions]]
                finally:
                    await session.close()
        transport = await OpenEnvTransport(url).open()
        session = transport.session()
        try:
            return [await session.reset(), *[await session.step(action) for action in actions]]
        finally:
            await transport.close()
    return asyncio.run(episode())


def _engines_own(engine: str, tag: str) -> tuple[str, str]:
    """The image run by the engine itself on a loopback port: (its URL, its container's name)."""
    name = f"openenv-gym-oracle-{time.time_ns()}"
    limits = ["--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024"] if engine == "podman" else []  # (here)
    subprocess.run([engine, "run", "--detach", "--rm", "--name", name, *limits, "--publish", "127.0.0.1::8000", tag],
                   check=True, capture_output=True, timeout=120)
    address = subprocess.run([engine, "port", name, "8000"], capture_output=True, text=True, timeout=60).stdout.split()
    url = f"http://{address[0]}"
    deadline = time.monotonic() + 120
    while subprocess.run([engine, "exec", name, "python3", "-c", "import urllib.request; urllib.request.urlopen("
                          "'http://127.0.0.1:8000/health')"], capture_output=True, timeout=60).returncode != 0:
        assert time.monotonic() < deadline, "the engine's own container did not answer /health"
        time.sleep(0.2)
    return url, name


def test_a_project_whose_dockerfile_installs_what_no_venv_holds_plays_in_its_image_as_the_engine_runs_it(served,
                                                                                                         engine):
    manifest, server, said, result = served
    assert manifest.engine == engine and manifest.image is not None and manifest.dependencies == []
    assert any("served from its image (server/Dockerfile" in note for note in result.notes), result.notes
    assert said[-1] == f"starting the image's server once with {engine}, to read what it serves", said
    assert not said[:-1] or any("figlet" in line for line in said)  # (its steps said as they start, where it built)
    actions = [{"text": "7"}]
    ours = _play(server.url, actions, ours=True)
    url, name = _engines_own(engine, manifest.image.tag)
    try:
        theirs = _play(url, actions, ours=False)
        # (figlet refuses -Z: the environment raises, OpenEnv's server answers EXECUTION_ERROR)
        with pytest.raises(EnvError, match=r"figlet.+returned non-zero exit status 1") as failed_theirs:
            _play(url, [{"text": "-Z"}], ours=False)
    finally:
        subprocess.run([engine, "rm", "--force", name], capture_output=True, timeout=120)
    assert ours[1][1:3] == (1.0, True)
    assert "|" in ours[1][0]  # (figlet's drawing of 7, made in the image)
    assert [step[0] for step in ours] == [step[0] for step in theirs]
    assert [step[1:3] for step in ours[1:]] == [step[1:3] for step in theirs[1:]]
    with pytest.raises(EnvError, match=r"figlet.+returned non-zero exit status 1") as failed_ours:
        _play(server.url, [{"text": "-Z"}], ours=True)
    assert str(failed_theirs.value) in str(failed_ours.value)
    refused = _play(server.url, [{"words": "7"}], ours=True)  # (what its Action schema refuses: no server call)
    assert refused[1][4]["error"]["code"] == "invalid_action" and "'words' was unexpected" in refused[1][0]


def test_sessions_run_their_own_servers_and_leave_nothing(served):
    """Two sessions at once, each its own server in its own sandbox; once they close, none of their processes."""
    manifest, server, _, _ = served

    async def two() -> list:
        async with openenv_gym.connect(server.url) as conn:
            sessions = [conn.session(), conn.session()]
            try:
                await asyncio.gather(*(session.reset() for session in sessions))
                return await asyncio.gather(*(session.step({"text": text}) for session, text in
                                              zip(sessions, ("7", "8"), strict=True)))
            finally:
                await asyncio.gather(*(session.close() for session in sessions))
    seven, eight = asyncio.run(two())
    assert (seven[1], eight[1]) == (1.0, 0.0)
    deadline = time.monotonic() + 30
    while _uvicorns() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _uvicorns() == []


def _uvicorns() -> list[str]:
    """The host's processes of our sessions' servers: the image's CMD, run as one of the images' uids."""
    base, count = image_uids()
    found = []
    for process in Path("/proc").glob("[0-9]*"):
        try:
            text = (process / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            uid = process.stat().st_uid
        except OSError:
            continue
        if "banner_env.server.app:app" in text and base <= uid < base + count:
            found.append(text)
    return found


def test_without_an_engine_the_import_says_what_its_venv_cannot_hold(tmp_path):
    [result] = import_environment(PROJECT, "banner-venv", tmp_path, engine="none", check=False)
    manifest = load_manifest(result.folder)
    assert manifest.image is None and manifest.dependencies == ["openenv==0.10.0"]
    assert any("server/Dockerfile installs system packages, which its venv cannot hold: import it with --engine "
               "docker or podman" in note for note in result.notes), result.notes


@pytest.mark.parametrize("engine", ["docker"], indirect=True)
def test_an_image_whose_server_exits_is_refused_saying_why_and_keeps_no_export(engine, tmp_path):
    """Its exit seen as it happens (not the /health wait of a server that never answers), its code and output said;
    the image's exported files, a whole image's worth, not left behind."""
    project = tmp_path / "banner_env"
    shutil.copytree(PROJECT, project)
    dockerfile = project / "server" / "Dockerfile"
    exits = 'CMD ["python3", "-c", "import sys; print(\'no server\'); sys.exit(3)", "-m"'
    dockerfile.write_text(dockerfile.read_text().replace('CMD ["python3", "-m", "uvicorn"', exits))
    archives = Path(os.environ["OPENENV_GYM_HOME"]) / "images" / "archives"
    before = set(archives.glob("*"))
    with pytest.raises(ImportFailedError, match=r"the image's server \(its CMD, run by docker\) exited with code 3; "
                                                r"the end of its output: no server"):
        import_environment(project, "exits", tmp_path / "out", engine=engine, check=False)
    assert set(archives.glob("*")) == before


@pytest.mark.parametrize("engine", ["docker"], indirect=True)
def test_a_project_with_two_environment_classes_is_the_one_its_server_serves(engine, tmp_path):
    """In its image the project's server (its app: create_app(BannerEnvironment, ...)) is what runs: one
    environment, that class, not one per class found (in a venv, each class is one)."""
    project = tmp_path / "banner_env"
    shutil.copytree(PROJECT, project)
    module = project / "server" / "banner_environment.py"
    module.write_text(module.read_text() + "\n\nclass LoudBannerEnvironment(BannerEnvironment):\n    pass\n")
    [result] = import_environment(project, "banner-two", tmp_path / "out", engine=engine, check=False)
    assert result.detected.attribute == "BannerEnvironment" and result.name == "banner-two"
    in_venvs = import_environment(project, "banner-two", tmp_path / "venvs", engine="none", check=False)
    assert sorted(r.detected.attribute for r in in_venvs) == ["BannerEnvironment", "LoudBannerEnvironment"]
