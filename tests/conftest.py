"""Real servers on loopback, started as `openenv-gym serve` subprocesses; real SDKs in their own venvs."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

ROOT = Path(__file__).parent.parent
sys.path.insert(0, str(ROOT))  # the benchmarks package: tests reuse its reference servers, envs and policies

# Imports in the tests go to a home of their own, never the user's ~/.openenv_gym; the environments'
# venvs (real openreward / ors-sdk / verifiers installs) are kept in the checkout, so later runs reuse them.
TEST_HOME = tempfile.mkdtemp(prefix="openenv-gym-home-")  # (removed at the end: images' files make it large)
os.environ["OPENENV_GYM_HOME"] = TEST_HOME
os.environ.setdefault("OPENENV_GYM_VENVS", str(ROOT / ".venv-envs"))
# nothing comes from a model hub here: no lookups, and no telemetry thread retrying in the background
os.environ["OPENENV_GYM_ENGINE"] = "none"  # (Harbor tasks emulated, but where a test names an engine)
os.environ["OPENENV_GYM_SANDBOX_KEEP_SECONDS"] = "0.5"  # (tests that count what a server leaves wait for it)
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"

from openenv_gym.client.local import LocalServer  # noqa: E402  (after the environment is set up)

TEST_ENVS = Path(__file__).parent / "envs"
collect_ignore = ["harbor_tasks"]  # Harbor tasks of ours: their tests/ are the tasks' verifiers, not ours


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "env_venvs(*sources): the tests import these sources (paths, or functions "
                                       "that write one and return its path), whose virtual environments are "
                                       "built once, before any test runs")


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(TEST_HOME, ignore_errors=True)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Build the venvs the selected tests need before they run: a build takes minutes on a new machine, and
    it must not eat the time budget of whichever test (or fixture teardown) happens to come first."""
    sources = list(dict.fromkeys(source for item in session.items
                                 for marker in item.iter_markers("env_venvs") for source in marker.args))
    if sources:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        build_venvs(sources, reporter.write_line if reporter else print)


def build_venvs(sources: list[Path], say: Callable[[str], None]) -> None:
    from openenv_gym.importers import import_environment
    from openenv_gym.manifests import load_manifest
    from openenv_gym.manifests.venvs import ensure_venv, venv_ready

    with tempfile.TemporaryDirectory() as scratch, _home(scratch):  # these imports are not registered
        manifests = [load_manifest(result.folder) for k, source in enumerate(sources)
                     for result in import_environment(Path(source() if callable(source) else source), f"venv{k}",
                                                      Path(scratch), check=False)]  # built below, loaded by tests
        missing = {str(m.dependencies): m for m in manifests if not venv_ready(m)}
        for number, manifest in enumerate(missing.values(), 1):
            say(f"building the test environments' venvs ({number} of {len(missing)}: "
                f"{', '.join(manifest.dependencies)}); once per machine")
            ensure_venv(manifest)


@contextlib.contextmanager
def _home(folder: str) -> Iterator[None]:
    saved = os.environ["OPENENV_GYM_HOME"]
    os.environ["OPENENV_GYM_HOME"] = folder
    try:
        yield
    finally:
        os.environ["OPENENV_GYM_HOME"] = saved


def env_path(name: str) -> str:
    return str(TEST_ENVS / name)


def http_url(ws_url: str) -> str:
    return "http://" + ws_url.removeprefix("ws://")


def health(ws_url: str) -> dict:
    return httpx.get(http_url(ws_url) + "/healthz", timeout=5).json()


def scrape(ws_url: str) -> dict[tuple[str, tuple], float]:
    """GET /metrics, read with prometheus_client's own parser: {(sample name, sorted labels): value}."""
    from prometheus_client.parser import text_string_to_metric_families

    response = httpx.get(http_url(ws_url) + "/metrics", timeout=5)
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain; version=")
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(response.text) for sample in family.samples}


def wait_until(predicate: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def write_files(folder: Path, files: dict[str, str]) -> Path:
    """Write {relative path: text} under folder (text is dedented); return folder."""
    for name, text in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return folder


def run(coro):
    return asyncio.run(coro)


def in_parallel(*calls: Callable[[], Any]) -> list[Any]:
    """Run the calls at once in threads (imports and server starts that wait on subprocesses); their results in
    order, the first exception raised."""
    with concurrent.futures.ThreadPoolExecutor(len(calls) or 1) as pool:
        return [future.result() for future in [pool.submit(call) for call in calls]]


def play_episode(url: str, actions: list, options: dict | None = None, seed: int | None = None) -> list[tuple]:
    """Reset one session on a server, step it with each action until its episode ends; every answer, the reset's
    first."""
    async def main() -> list[tuple]:
        import openenv_gym

        async with openenv_gym.connect(url) as conn:
            session = conn.session()
            answers = [await session.reset(seed=seed, options=options)]
            for action in actions:
                answers.append(await session.step(action))
                if answers[-1][2] or answers[-1][3]:
                    break
            await session.close()
            return answers
    return asyncio.run(main())


@pytest.fixture
def start_server() -> Iterator[Callable[..., str]]:
    """Start a server for one test: start_server("echo", "--max-sessions", "3") -> ws url."""
    servers: list[LocalServer] = []

    def start(env: str, *args: str, workers: int = 1, max_sessions: int = 1000) -> str:
        server = LocalServer(env, workers, max_sessions, *args)
        servers.append(server)
        return server.url

    yield start
    for server in servers:
        server.stop()


@pytest.fixture(scope="session")
def echo_url() -> Iterator[str]:
    server = LocalServer("echo", 1, 10_000)
    yield server.url
    server.stop()


@pytest.fixture(scope="session")
def guess_url() -> Iterator[str]:
    server = LocalServer("guess", 1, 10_000)
    yield server.url
    server.stop()


@pytest.fixture(scope="session")
def faulty_url() -> Iterator[str]:
    server = LocalServer(env_path("faulty"), 1, 10_000, "--step-timeout", "0.5", "--max-frame-bytes", "4096")
    yield server.url
    server.stop()


def descendants(pid: int) -> list[int]:
    """The processes below `pid` (its children, theirs, ...)."""
    children = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


class Listener:
    """A TCP listener of the host's that counts who connects: on its loopback, or with `everywhere` on every address
    (IPv4 and IPv6)."""

    def __init__(self, everywhere: bool = False) -> None:
        if not everywhere:
            self.socket = socket.create_server(("127.0.0.1", 0))
        elif socket.has_dualstack_ipv6():
            self.socket = socket.create_server(("::", 0), family=socket.AF_INET6, dualstack_ipv6=True)
        else:
            self.socket = socket.create_server(("0.0.0.0", 0))
        self.port = self.socket.getsockname()[1]
        self.accepted = 0
        self.socket.settimeout(0.1)
        self.open = True
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while self.open:
            try:
                connection, _ = self.socket.accept()
            except OSError:
                continue
            self.accepted += 1
            connection.close()

    def close(self) -> None:
        self.open = False
        self.thread.join()
        self.socket.close()


# -- container engines: Docker and Podman, with a stand-in base image ------------------------------------------------

IMAGE = "openenv-gym-test/bookworm-sandbox:stand-in"  # (a stand-in, for what a user would build FROM debian:bookworm:
IMAGE_PACKAGES = "ca-certificates,python3,bubblewrap,procps,nodejs"  # no registry is reachable here)
PODMAN_PROCESSES = 4096


def _docker_answers() -> bool:
    return subprocess.run(["docker", "info"], capture_output=True, timeout=60).returncode == 0


def _has_image(engine: str) -> bool:
    return subprocess.run([engine, "image", "inspect", IMAGE], capture_output=True, timeout=120).returncode == 0


@pytest.fixture(scope="session")
def image_tar(tmp_path_factory) -> Path:
    """The stand-in's root file system, made from Debian's mirror (once a session, and only where an engine lacks
    the image: the engines' stores keep it between runs)."""
    tar = tmp_path_factory.mktemp("image") / "bookworm.tar"
    build = subprocess.run(["mmdebstrap", "--quiet", "--variant=minbase", f"--include={IMAGE_PACKAGES}", "bookworm",
                            str(tar)], capture_output=True, text=True, timeout=900)
    assert build.returncode == 0, build.stderr[-2000:]
    return tar


@pytest.fixture(scope="session")
def docker(request) -> Iterator[list[str]]:
    """A Docker daemon that answers (the machine's, or one started here and stopped after), with the stand-in."""
    daemon = None
    if not _docker_answers():
        daemon = subprocess.Popen(["dockerd"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while not _docker_answers():
            assert daemon.poll() is None and time.monotonic() < deadline, "dockerd did not start"
            time.sleep(0.5)
    if not _has_image("docker"):
        subprocess.run(["docker", "import", str(request.getfixturevalue("image_tar")), IMAGE], check=True,
                       capture_output=True)
    yield ["docker"]
    if daemon is not None:
        daemon.terminate()
        daemon.wait(timeout=60)


@pytest.fixture(scope="session")
def podman(request) -> list[str]:
    """Podman with the stand-in; `podman run` with what it needs here: its default open-files and processes limits
    are above what this machine lets its runtime set, so a container gets this process's open files, and processes
    enough for a test."""
    if not _has_image("podman"):
        subprocess.run(["podman", "import", "--quiet", str(request.getfixturevalue("image_tar")), IMAGE], check=True,
                       capture_output=True)
    files = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    return ["podman", "--ulimit", f"nofile={files}:{files}", "--ulimit", f"nproc={PODMAN_PROCESSES}:{PODMAN_PROCESSES}"]
