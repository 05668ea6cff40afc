"""The model servers a resource server calls (an LLM judge, a user simulator: the `responses_api_models` its config
references by name), answered by the judge endpoint the user gives (judge_endpoint.py).

They are NeMo Gym's own model server for OpenAI-compatible chat endpoints (responses_api_models/vllm_model: a
Responses or chat request in, chat completions to the endpoint with its model), built in the worker and served on a
loopback port in the worker's event loop: the resource server's ServerClient calls them over HTTP, with the aiohttp
client NeMo Gym keeps for the whole process, as it calls them under NeMo's launcher. One serves every name.
"""

from __future__ import annotations

import importlib
import socket
from typing import Any

from openenv_gym.manifests.judge_endpoint import JudgeEndpoint
from openenv_gym.manifests.schema import ManifestError

KIND, MODULE, CLASS = "vllm_model", "responses_api_models.vllm_model.app", "VLLMModel"
HOST = "127.0.0.1"


class ModelServers:
    def __init__(self, names: list[str], endpoint: JudgeEndpoint) -> None:
        self.names, self.endpoint = names, endpoint
        self.socket = socket.create_server((HOST, 0))  # bound now: the global config gives its port
        self.port: int = self.socket.getsockname()[1]
        self._server: Any = None

    def fields(self) -> dict[str, Any]:
        """The model server's config: the endpoint's, no token ids or reasoning parser asked of it."""
        return {"entrypoint": "app.py", "host": HOST, "port": self.port, "base_url": self.endpoint.base_url,
                "api_key": self.endpoint.api_key or "none", "model": self.endpoint.model,
                "return_token_id_information": False, "uses_reasoning_parser": False}

    def global_config(self) -> dict[str, Any]:
        """Their entries of NeMo Gym's global config: where a ServerClient finds each name."""
        return {name: {"responses_api_models": {KIND: self.fields()}} for name in self.names}

    async def start(self, server_client: Any) -> None:
        import uvicorn

        try:
            cls = getattr(importlib.import_module(MODULE), CLASS)
            config_type = cls.model_fields["config"].annotation
            model = cls(config=config_type.model_validate({**self.fields(), "name": self.names[0]}),
                        server_client=server_client)
        except Exception as exc:  # an older nemo-gym: no such server, or another config
            raise ManifestError(f"NeMo Gym's model server {MODULE}:{CLASS} cannot be made in this venv: "
                                f"{type(exc).__name__}: {exc}") from exc
        config = uvicorn.Config(model.setup_webserver(), log_level="warning", lifespan="on")
        config.load()
        server = uvicorn.Server(config)
        server.lifespan = config.lifespan_class(config)  # (what Server.serve sets up, without its signal handlers)
        await server.startup(sockets=[self.socket])
        self._server = server

    async def aclose(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            await server.shutdown(sockets=[self.socket])
        self.socket.close()
