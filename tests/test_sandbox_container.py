"""The server in a container of Docker's and of Podman's, run as an ordinary user with the least that lets it
sandbox episodes: no capability added, not privileged; a seccomp profile that allows a user namespace and
bubblewrap's mounts (deploy/sandbox_seccomp.py: Podman's default profile with those calls allowed) and an unmasked
/proc. With the engine's defaults it refuses such an environment, saying why. The six escapes are checked inside
the container, from outside the sandbox (sandbox_user_escapes.py), by a process of the same user as the server.

Real parts: dockerd (started here if none answers), Podman, an image made from Debian's mirror by mmdebstrap. No
registry is reachable: the image is a stand-in, tagged as one, for what a user would build FROM debian:bookworm."""

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import IMAGE, ROOT, write_files
from sandbox_user_escapes import assert_contained

from benchmarks.ordinary_user import readable_by_all, user_venv
from openenv_gym.sandbox import engines, images

UID = 1000  # the container's user: a uid with no name in the image, as `docker run --user 1000` gives
DEFAULT_PROFILE = Path("/usr/share/containers/seccomp.json")  # (containers-common)
INSIDE = "/tmp/checker"  # the checking process's folder in the container


@pytest.fixture(params=["docker", "podman"])
def engine(request) -> tuple[str, list[str]]:
    """(its name, `docker run` or `podman run` with what it needs here)"""
    command = request.getfixturevalue(request.param)
    return request.param, [command[0], "run", *command[1:]]


UNMASKED = {"docker": "systempaths=unconfined", "podman": "unmask=ALL"}  # (each engine's word for it)


@pytest.fixture(scope="module")
def place(tmp_path_factory):
    """The user's venv (of Debian's /usr/bin/python3, as the image's) and the shell env, mounted read-only; the
    profile; a work folder of the container user's."""
    folder = tmp_path_factory.mktemp("container")
    user_venv(folder)
    shutil.copytree(ROOT / "tests" / "sandbox_envs" / "shell", folder / "shell")
    shutil.copy(ROOT / "tests" / "sandbox_user_escapes.py", folder)
    profile = subprocess.run([sys.executable, str(ROOT / "deploy" / "sandbox_seccomp.py"), str(DEFAULT_PROFILE)],
                             capture_output=True, text=True, check=True).stdout
    (folder / "sandbox-seccomp.json").write_text(profile)
    readable_by_all(folder)
    return folder


def in_container(engine: tuple[str, list[str]], place: Path, security: list[str],
                 *command: str) -> subprocess.CompletedProcess:
    work = place / "work"
    shutil.rmtree(work, ignore_errors=True)
    (work / "home").mkdir(parents=True)
    shutil.chown(work, UID, UID)
    shutil.chown(work / "home", UID, UID)
    # (the user's files under /tmp, which every sandbox hides: with one uid shared, a file only the user may read is
    # readable by its episodes wherever the sandbox shows the host; docs/reliability.md)
    return subprocess.run([*engine[1], "--rm", "--user", f"{UID}:{UID}", *security,
                           "-v", f"{place}:{place}:ro", "-v", f"{work}:{INSIDE}", "-w", INSIDE,
                           "-e", f"HOME={INSIDE}/home", "-e", f"OPENENV_GYM_HOME={INSIDE}/home", IMAGE, *command],
                          capture_output=True, text=True, timeout=600)


def test_an_ordinary_user_in_a_container_with_the_least_it_needs_sandboxes_every_episode(engine, place):
    security = ["--security-opt", f"seccomp={place / 'sandbox-seccomp.json'}", "--security-opt", UNMASKED[engine[0]]]
    done = in_container(engine, place, security, str(place / "venv" / "bin" / "python"),
                        str(place / "sandbox_user_escapes.py"), str(place / "shell"), INSIDE)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["checker_uid"] == found["server_uid"] == UID
    assert_contained(found)
    assert "that maps only its user's uid" in found["server_said"]


def test_with_the_engines_defaults_a_users_server_refuses_saying_why(engine, place):
    done = in_container(engine, place, [], str(place / "venv" / "bin" / "python"), "-m", "openenv_gym", "serve",
                        str(place / "shell"), "--port", "0")
    assert done.returncode != 0
    said = {"docker": "the kernel refused one: Operation not permitted",  # (its profile refuses unshare)
            "podman": "Can't set hostname to sandbox: Operation not permitted"}[engine[0]]  # (and sethostname)
    for expected in (said, "--no-sandbox"):
        assert expected in done.stderr, done.stderr[-2000:]


def test_the_engines_that_answer_are_found_and_one_that_does_not_says_why(docker, podman, monkeypatch):
    found = {engine.name: engine for engine in map(engines.probe, engines.ENGINES)}
    assert found["docker"].version.startswith("20.10") and found["podman"].version.startswith("4.")
    assert engines.choose("podman") == found["podman"]
    doctor = json.loads(subprocess.run([sys.executable, "-m", "openenv_gym", "doctor", "--json"],
                                       capture_output=True, text=True, timeout=120, check=True).stdout)
    assert doctor["engines"]["docker"] == {"version": found["docker"].version}
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    with pytest.raises(engines.EngineUnavailableError, match=r"docker does not answer at unix:///nonexistent/"
                                                             r"docker\.sock .*start its daemon"):
        engines.choose("docker")
    with pytest.raises(engines.EngineUnavailableError, match="unknown container engine 'lxc'"):
        engines.choose("lxc")


def test_an_image_is_built_once_per_context_and_a_failed_build_names_its_step_and_log(engine, tmp_path):
    """Each engine builds a context's image once: a second build, or a copy of the context elsewhere, finds it. A
    build that fails says which step, which line, and where its log is."""
    chosen = engines.choose(engine[0])
    context = tmp_path / "environment"
    context.mkdir()
    marker = f"built-by-{engine[0]}-{time.time_ns()}"  # (a context never built before)
    (context / "Dockerfile").write_text(f"FROM {IMAGE}\nRUN echo {marker} > /marker\nWORKDIR /app\n")
    said: list[str] = []
    tag = images.build(chosen, context, tmp_path / "logs", said.append)
    assert [line.split(": ", 1)[1] for line in said] == [f"step 1 of 3: FROM {IMAGE}",
                                                          f"step 2 of 3: RUN echo {marker} > /marker",
                                                          "step 3 of 3: WORKDIR /app"]
    shown = subprocess.run([*engine[1], "--rm", tag, "cat", "/marker"], capture_output=True, text=True, timeout=120)
    assert shown.stdout == f"{marker}\n"
    again: list[str] = []
    shutil.copytree(context, tmp_path / "same")
    assert images.build(chosen, tmp_path / "same", tmp_path / "logs", again.append) == tag and again == []
    (context / "Dockerfile").write_text(f"FROM {IMAGE}\nRUN echo {marker}-2\nRUN exit 3\nRUN true\n")
    with pytest.raises(images.ImageBuildError, match=r"at step 3 of 4: RUN exit 3; its log: .*\.log") as failed:
        images.build(chosen, context, tmp_path / "logs")
    assert Path(str(failed.value).rsplit("its log: ", 1)[1]).read_text().count(f"{marker}-2") >= 1
    subprocess.run([engine[0], "rmi", tag], capture_output=True)


def test_a_run_lines_cache_mount_builds_without_buildkit_too(engine, tmp_path):
    """`RUN --mount=type=cache,...` (18 of OpenEnv's 29 Dockerfiles): BuildKit's cache of downloads. Where the docker
    CLI has no BuildKit, the classic builder, which refuses the flag, builds the Dockerfile without it; what the
    line makes is in the image either way, and no failed build's container is left."""
    engine, run = engine
    context = tmp_path / "environment"
    marker = f"cached-{time.time_ns()}"
    write_files(context, {"Dockerfile": f"FROM {IMAGE}\nRUN --mount=type=cache,target=/root/.cache \\\n"
                                        f"    echo {marker} > /made\n"})
    before = subprocess.run([engine, "ps", "--all", "--quiet"], capture_output=True, text=True).stdout.split()
    tag = images.build(engines.choose(engine), context, tmp_path / "logs")
    ran = subprocess.run([*run, "--rm", tag, "cat", "/made"], capture_output=True, text=True, timeout=120)
    assert ran.stdout == f"{marker}\n", ran.stderr
    assert subprocess.run([engine, "ps", "--all", "--quiet"], capture_output=True, text=True).stdout.split() == before
    subprocess.run([engine, "rmi", tag], capture_output=True)


@pytest.mark.skipif(not Path("/usr/bin/docker").exists(), reason="Debian's docker CLI (docker.io) is not installed")
def test_docker_builds_with_buildkit_where_its_cli_can(docker, tmp_path, monkeypatch):
    """Debian's docker CLI (20.10) has BuildKit in it: `COPY --chmod`, which the classic builder refuses, builds; its
    steps are said from BuildKit's progress, and a failed one named. (A CLI of 23 or later without buildx falls back
    to the classic builder, as the other tests here find.)"""
    context = tmp_path / "environment"
    marker = f"buildkit-{time.time_ns()}"
    write_files(context, {"run.sh": "#!/bin/sh\necho ran\n",
                          "Dockerfile": f"FROM {IMAGE}\nCOPY --chmod=755 run.sh /run.sh\nRUN echo {marker}\n"})
    cli = subprocess.run(["docker", "version", "--format", "{{.Client.Version}}"], capture_output=True, text=True)
    if int(cli.stdout.split(".")[0]) >= 23 and subprocess.run(["docker", "buildx", "version"],
                                                                capture_output=True).returncode != 0:
        with pytest.raises(images.ImageBuildError, match="that line needs BuildKit, which this docker CLI has not: "
                                                         "install Docker's buildx plugin"):  # (the CLI first on PATH)
            images.build(engines.choose("docker"), context, tmp_path / "logs")
    monkeypatch.setenv("PATH", f"/usr/bin:{os.environ['PATH']}")
    said: list[str] = []
    tag = images.build(engines.choose("docker"), context, tmp_path / "logs", said.append)
    assert [line.split(": ", 1)[1] for line in said[1:]] == ["step 2 of 3: COPY --chmod=755 run.sh /run.sh",
                                                             f"step 3 of 3: RUN echo {marker}"]
    ran = subprocess.run(["docker", "run", "--rm", tag, "/run.sh"], capture_output=True, text=True, timeout=120)
    assert ran.stdout == "ran\n"
    (context / "Dockerfile").write_text(f"FROM {IMAGE}\nRUN echo {marker}-2\nRUN exit 3\nRUN true\n")
    with pytest.raises(images.ImageBuildError, match=r"at step 3 of 4: RUN exit 3; its log"):
        images.build(engines.choose("docker"), context, tmp_path / "logs")
    subprocess.run(["docker", "rmi", tag], capture_output=True)
