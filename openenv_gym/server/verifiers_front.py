"""The Verifiers front end of a server (`serve ENV --verifiers-port P`): Verifiers' own env server, verifiers 0.4's
ZMQ protocol (health, run, cancel), on the taskset of this server's catalog (openenv_gym_verifiers), each run an
episode in a session of this server. It runs in a venv of its own that holds verifiers (built once, as an env's is),
as a child of the serving process, which it does not outlive.

    front = VerifiersFrontEnd.start(url, host, port, workers, max_concurrent)   # once the server is up
    front.address                                                              # tcp://HOST:PORT
    front.stop()
"""

from __future__ import annotations

import select
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from openenv_gym.errors import ServerStartError
from openenv_gym.manifests.discovery import PACKAGE_DIR
from openenv_gym.manifests.schema import PythonManifest
from openenv_gym.manifests.verifiers_v1 import VERIFIERS_V1
from openenv_gym.server.config import netloc

START_TIMEOUT = 120.0  # seconds its first ready line may take (Verifiers imports a lot)
STOP_TIMEOUT = 10.0


def front_end_manifest() -> PythonManifest:
    """What the front end's venv holds: verifiers 0.4 (and openenv_gym, as every env venv)."""
    return PythonManifest(kind="python", name="verifiers-front-end", entry="openenv_gym_verifiers:OpenEnvGymEnv",
                          dependencies=[VERIFIERS_V1], folder=Path(PACKAGE_DIR))


@dataclass
class VerifiersFrontEnd:
    process: subprocess.Popen
    address: str

    @classmethod
    def start(cls, python: str, url: str, host: str, port: int, workers: int,
              max_concurrent: int | None) -> VerifiersFrontEnd:
        """Started and bound; ServerStartError (with what it said) if it is not within START_TIMEOUT."""
        command = [python, "-m", "openenv_gym_verifiers.serve", "--address", f"tcp://{netloc(host, port)}",
                   "--url", url, "--workers", str(workers)]
        if max_concurrent is not None:
            command += ["--max-concurrent", str(max_concurrent)]
        # stdin: its lifeline (it stops when this process's end closes, however this process ends); stdout: its ready
        # line alone (it writes the rest to stderr, the server's)
        process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = _first_line(process, START_TIMEOUT)
        if not line.startswith("ready "):
            process.kill()
            raise ServerStartError(f"the Verifiers front end on port {port} did not start within {START_TIMEOUT:g} s"
                                   f" (exit code {process.wait()}); its error is above")
        return cls(process, line.split(" ", 1)[1].strip())

    def stop(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def _first_line(process: subprocess.Popen, timeout: float) -> str:
    """Its first line of output, or "" if it exits or stays silent for `timeout` s."""
    assert process.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([process.stdout], [], [], 0.5)
        if ready:
            return process.stdout.readline()
        if process.poll() is not None:
            return ""
    return ""
