"""The model servers a resource server calls (an LLM judge, a user simulator: the `responses_api_models` its config
references by name), answered by the judge endpoint the user gives (judge_endpoint.py).

They are NeMo Gym's own model server for OpenAI-compatible chat endpoints (responses_api_models/vllm_model: a
Responses or chat request in, chat completions to the endpoint with its model), run as NeMo runs it: a process of
its own (this module, in the env's venv) on a loopback port, one for every name, started before the resource server
is made, since some wait for theirs while they set up (xstest polls its judge in setup_webserver). It ends with the
worker that started it: it reads its stdin, which the worker holds, and exits when it closes.
"""

from __future__ import annotations

import importlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

from openenv_gym.manifests.judge_endpoint import JudgeEndpoint
from openenv_gym.manifests.schema import ManifestError

KIND, MODULE, CLASS = "vllm_model", "responses_api_models.vllm_model.app", "VLLMModel"
HOST = "127.0.0.1"
READY_SECONDS = 120  # for the process to import nemo-gym and answer


class ModelServers:
    def __init__(self, names: list[str], endpoint: JudgeEndpoint) -> None:
        self.names, self.endpoint = names, endpoint
        self.socket = socket.create_server((HOST, 0))  # bound here: the process serves it, the config gives its port
        self.port: int = self.socket.getsockname()[1]
        self.process: subprocess.Popen | None = None
        self.output: Any = None  # what the process prints

    def fields(self) -> dict[str, Any]:
        """The model server's config: the endpoint's, no token ids or reasoning parser asked of it."""
        return {"entrypoint": "app.py", "host": HOST, "port": self.port, "base_url": self.endpoint.base_url,
                "api_key": self.endpoint.api_key or "none", "model": self.endpoint.model,
                "return_token_id_information": False, "uses_reasoning_parser": False}

    def global_config(self) -> dict[str, Any]:
        """Their entries of NeMo Gym's global config: where a ServerClient finds each name."""
        return {name: {"responses_api_models": {KIND: self.fields()}} for name in self.names}

    def start(self) -> None:
        """Start the process and wait until it answers on its port."""
        settings = json.dumps({"name": self.names[0], "fields": self.fields(), "global": self.global_config()})
        fd = self.socket.fileno()
        self.output = tempfile.TemporaryFile()  # noqa: SIM115 (kept while it runs; a pipe nobody reads would fill)
        self.process = subprocess.Popen([sys.executable, "-m", __name__, str(fd), settings], pass_fds=(fd,),
                                        stdin=subprocess.PIPE, stdout=self.output, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + READY_SECONDS
        while time.monotonic() < deadline and self.process.poll() is None:
            try:
                with socket.create_connection((HOST, self.port), timeout=5) as probe:
                    probe.sendall(b"GET / HTTP/1.1\r\nHost: judge\r\nConnection: close\r\n\r\n")
                    if probe.recv(1):
                        return
            except OSError:
                pass
            time.sleep(0.2)
        self.output.seek(0)
        error = self.output.read().decode(errors="replace")[-3000:]
        self.close()
        raise ManifestError(f"NeMo Gym's model server {MODULE}:{CLASS}, for {', '.join(self.names)}, did not start "
                            f"within {READY_SECONDS} s: {error.strip() or 'it said nothing'}")

    def close(self) -> None:
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()
        if self.output is not None:
            self.output.close()
        self.socket.close()


def serve(fd: int, settings: dict[str, Any]) -> None:
    """The model server's process: NeMo's vllm_model on the socket it was given, until its stdin closes."""
    import uvicorn
    from nemo_gym.config_types import BaseServerConfig
    from nemo_gym.server_utils import ServerClient
    from omegaconf import OmegaConf

    def exit_when_stdin_closes() -> None:
        sys.stdin.buffer.read()
        os._exit(0)

    threading.Thread(target=exit_when_stdin_closes, daemon=True).start()
    cls = getattr(importlib.import_module(MODULE), CLASS)
    config = cls.model_fields["config"].annotation.model_validate({**settings["fields"], "name": settings["name"]})
    client = ServerClient(head_server_config=BaseServerConfig(host=HOST, port=0),
                          global_config_dict=OmegaConf.create(settings["global"]))
    app = cls(config=config, server_client=client).setup_webserver()
    uvicorn.run(app, fd=fd, log_level="warning")


if __name__ == "__main__":
    serve(int(sys.argv[1]), json.loads(sys.argv[2]))
