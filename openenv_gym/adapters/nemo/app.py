"""A NeMo Gym resource server's app, in process: built once per worker as NeMo Gym builds it, called through ASGI.

The server class is made with its config (the instance's fields from its YAML; host and port are unused) and a
real `ServerClient` that knows no other server, and `setup_webserver()` gives its FastAPI app, with NeMo's session
middleware: a session is the signed cookie the first request of an episode is given. Each episode has an httpx
client of its own on the app (ASGITransport, no socket), so a cookie jar of its own, as NeMo's agents keep one per
rollout. The app's lifespan (startup hooks) runs once, before the first episode. A route that calls sys.exit
answers its request with a 500, as any error of its code, rather than ending the worker. The worker's working directory
is the server's folder, as NeMo Gym's launcher runs each server there. The model servers its config calls (a judge)
are NeMo Gym's own, in a process of their own, on the endpoint the user gives (model_servers.py), where one is given.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import logging
import os
import sys
from typing import Any

import httpx

from openenv_gym.adapters.nemo.model_servers import ModelServers
from openenv_gym.errors import BadRequestError, EnvError, UnmetNeedError
from openenv_gym.manifests.judge_endpoint import HOW_TO_GIVE, JudgeEndpoint
from openenv_gym.manifests.schema import ManifestError, NemoManifest

BASE_URL = "http://nemo"  # what the episodes' clients call the app (no socket: ASGI)
log = logging.getLogger(__name__)
CONFIG_VARIABLE, CONFIG_PATH_VARIABLE = "NEMO_GYM_CONFIG_DICT", "NEMO_GYM_CONFIG_PATH"
# how long the app's startup hooks may take (a metadata preload: competitive_coding_challenges says ~46 s)
STARTUP_SECONDS = float(os.environ.get("OPENENV_GYM_NEMO_STARTUP_SECONDS", 300))


class ServerApp:
    def __init__(self, manifest: NemoManifest) -> None:
        self.manifest = manifest
        endpoint = JudgeEndpoint.from_environment()
        names = sorted(set(manifest.model_servers.values()))
        self.model_servers = ModelServers(names, endpoint) if names and endpoint else None
        # model servers it calls and no endpoint to answer them: its resets are refused, and it is not even made
        # (a server may wait for its model servers as it sets up: xstest); nor is one that needs what cannot be
        # reached from here (it may fetch it as it loads: a git clone)
        self.unanswered = bool(names) and endpoint is None
        made = not (self.unanswered or manifest.needs)
        self.server, self.app, self.mcp_tools = build(manifest, self.model_servers) if made else (None, None, [])
        self.transport = httpx.ASGITransport(app=self.app, raise_app_exceptions=False)  # a raise is a 500, as uvicorn
        self.routes = {getattr(route, "path", "") for route in getattr(self.app, "routes", [])}
        self._lifespan: contextlib.AbstractAsyncContextManager | None = None
        self._starting = asyncio.Lock()
        self.started = False
        self.stuck = ""  # why its startup never finished: every later reset says it
        self.reverify_mode: str | None = None

    def refuse_unmet(self) -> None:
        """Refuse to play a server that needs what cannot be reached from here, or whose model servers nothing
        answers, saying what to provide."""
        if self.manifest.needs:
            raise BadRequestError(f"{self.manifest.name} cannot be played here: it needs "
                                  f"{'; and '.join(self.manifest.needs)}")
        if self.unanswered:
            called = ", ".join(f"{key}: {name}" for key, name in self.manifest.model_servers.items())
            raise BadRequestError(f"{self.manifest.name} calls model servers of NeMo Gym's ({called}: an LLM judge "
                                  f"or a user simulator), which its server was not given: {HOW_TO_GIVE}")

    async def start(self) -> None:
        """The app's lifespan (its startup hooks), entered once."""
        self.refuse_unmet()
        if self.started:
            return
        async with self._starting:
            if not self.started:
                if self.stuck:
                    raise EnvError(self.stuck)
                lifespan = self.app.router.lifespan_context(self.app)
                try:
                    await asyncio.wait_for(lifespan.__aenter__(), STARTUP_SECONDS)
                except TimeoutError:
                    self.stuck = (f"the resource server's startup hooks did not finish within {STARTUP_SECONDS:g} s "
                                  "(one may wait for a service that is not here: a sandbox, a model server); "
                                  "restart the server once it can be reached, or give them longer with "
                                  "OPENENV_GYM_NEMO_STARTUP_SECONDS")
                    raise EnvError(self.stuck) from None
                self._lifespan, self.started = lifespan, True

    def client(self) -> httpx.AsyncClient:
        """A client of an episode's own: its cookies are its session."""
        return httpx.AsyncClient(transport=self.transport, base_url=BASE_URL, timeout=None)

    def mcp_tools_for(self, row: dict[str, Any]) -> list[dict[str, Any]]:
        """The MCP tools an episode of this row may call (a server may restrict them per session: tavily_search)."""
        allowed_for = getattr(self.server, "mcp_allowed_tools_for_session", None)
        allowed = allowed_for(row) if allowed_for is not None else None
        return [tool for tool in self.mcp_tools if allowed is None or tool["function"]["name"] in allowed]

    def has(self, path: str) -> bool:
        return path in self.routes

    def overrides(self, method: str) -> bool:
        """Whether the server class has its own `method` rather than NeMo's base one."""
        from nemo_gym.base_resources_server import SimpleResourcesServer

        return getattr(type(self.server), method, None) is not getattr(SimpleResourcesServer, method, None)

    async def mode(self) -> str:
        """GET /reverify_mode: whether its /verify may be called again on a stored rollout ("stateless")."""
        if self.reverify_mode is None:
            async with self.client() as client:
                answer = await client.get("/reverify_mode")
            self.reverify_mode = str(answer.json()) if answer.status_code == 200 else "unknown"
        return self.reverify_mode

    async def aclose(self) -> None:
        lifespan, self._lifespan = self._lifespan, None
        if lifespan is not None:
            await lifespan.__aexit__(None, None, None)
        if self.model_servers is not None:
            self.model_servers.close()


def build(manifest: NemoManifest, model_servers: ModelServers | None = None) -> tuple[Any, Any, list[dict]]:
    """(the server object, its FastAPI app, the tools it exposes over MCP), as NeMo Gym's run_webserver makes them,
    without serving them."""
    from nemo_gym.config_types import BaseServerConfig
    from nemo_gym.server_utils import ServerClient
    from omegaconf import OmegaConf

    vendored = str(manifest.vendored)
    if vendored not in sys.path:
        sys.path.insert(0, vendored)  # resources_servers.<name> is ours (a namespace package: the installed one too)
    module_name, class_name = manifest.entry.split(":")
    # NeMo Gym starts each server as `python app.py` in its own folder: servers open their files from there (prompt
    # templates, data) and import their sibling modules by bare name (`from utils import ...`); so does this worker,
    # which serves this environment alone
    own_folder = manifest.vendored.joinpath(*module_name.split(".")[:2])  # resources_servers/<name>
    os.chdir(own_folder)
    # and with its venv activated: its commands (uv, say) first on PATH
    os.environ["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])
    if str(own_folder) not in sys.path:
        sys.path.insert(1, str(own_folder))
    try:
        cls = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError) as exc:
        raise ManifestError(f"{manifest.name}: cannot load its server {manifest.entry}: {type(exc).__name__}: "
                            f"{exc}") from exc
    config_type = cls.model_fields["config"].annotation
    server_config = _resolved(manifest.server_config)
    fields = {"entrypoint": "app.py", **server_config, "host": "127.0.0.1", "port": 0, "name": manifest.instance}
    try:
        config = config_type.model_validate(fields)
    except Exception as exc:  # pydantic's ValidationError, of the server's own config type
        unset = _unset_globals(manifest.server_config, server_config, exc)
        if unset:
            raise UnmetNeedError(f"values of NeMo Gym's global config (its env.yaml) that {config_type.__name__} "
                                 f"requires and that are not set here ({'; '.join(unset)})", unset) from exc
        raise ManifestError(f"{manifest.name}: its config does not fit {config_type.__name__}: {exc}") from exc
    # the global config NeMo's launcher injects, for the code that reads it (else NeMo parses this process's argv
    # with Hydra, and exits on ours)
    head = {"host": "127.0.0.1", "port": 0}
    global_config = {"head_server": head, manifest.instance: {"resources_servers": {
        own_folder.name: {**server_config, **head}}}}
    global_config |= model_servers.global_config() if model_servers else {}
    os.environ[CONFIG_VARIABLE], os.environ[CONFIG_PATH_VARIABLE] = json.dumps(global_config), manifest.instance
    if model_servers is not None:
        model_servers.start()  # before the server is made: some wait for theirs as they set up (xstest)
    client = ServerClient(head_server_config=BaseServerConfig(**head),
                          global_config_dict=OmegaConf.create(global_config))
    server = cls(config=config, server_client=client)
    app = server.setup_webserver()
    mcp_tools = _expose_over_mcp(server, app)
    if hasattr(server, "setup_exception_middleware"):  # as run_webserver: an error's repr is the 500's body
        server.setup_exception_middleware(app)
    for route in app.router.routes:
        if hasattr(route, "app"):
            route.app = _exit_as_error(route.app, getattr(route, "path", "?"))
    return server, app, mcp_tools


def _expose_over_mcp(server: Any, app: Any) -> list[dict[str, Any]]:
    """As run_webserver does where the config says `expose_tools_over_mcp` (example_mcp_weather): the typed routes
    made MCP tools, /seed_session answering with the MCP metadata. Those tools, in chat completions' shape: the
    rows of such a server offer none of their own (its agents list them over MCP)."""
    if not getattr(getattr(server, "config", None), "expose_tools_over_mcp", False):
        return []
    from nemo_gym.mcp_auto_exposure import maybe_auto_expose

    return [{"type": "function", "function": {"name": name, "description": tool.tool.description or "",
                                              "parameters": tool.tool.inputSchema}}
            for name, tool in (maybe_auto_expose(server, app) or {}).items()]


def _unset_globals(given: dict[str, Any], resolved: dict[str, Any], error: Exception) -> list[str]:
    """The config fields a validation `error` refused whose values were null interpolations of NeMo's global config
    (critpt's `api_key: ${oc.select:artificial_analysis_api_key,null}`): `field: what it reads`."""
    errors = error.errors() if callable(getattr(error, "errors", None)) else []  # (pydantic's ValidationError)
    refused = {str(entry["loc"][0]) for entry in errors if entry.get("loc")}
    return [f"{field}: {given[field]}" for field in sorted(refused)
            if isinstance(given.get(field), str) and "${" in given[field] and resolved.get(field) is None]


def _resolved(config: dict[str, Any]) -> dict[str, Any]:
    """The config with its interpolations resolved as NeMo's launcher resolves them, where they can be here
    (`${oc.env:PORT,6000}`: this worker's environment, else the default); as it is where one cannot (a value of
    NeMo's global config: the import recorded that need, and resets say it)."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        return OmegaConf.to_container(OmegaConf.create(config), resolve=True)  # type: ignore[return-value]
    except OmegaConfBaseException:
        return config


class ServerCodeExitedError(Exception):
    """A route's code called sys.exit: a 500 of that request, not the end of the worker."""


def _exit_as_error(app: Any, path: str) -> Any:
    """A route's ASGI app whose sys.exit is an error of its request. (Under asyncio a SystemExit raised in a task
    leaves the event loop itself, taking every session of the worker along; Starlette runs routes in tasks.)"""
    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        try:
            await app(scope, receive, send)
        except SystemExit as exc:
            log.warning("the resource server's route %s called sys.exit(%r); answered as an error", path, exc.code)
            raise ServerCodeExitedError(f"{path} called sys.exit({exc.code!r})") from None
    return guarded


async def post(client: httpx.AsyncClient, path: str, body: Any) -> httpx.Response:
    """A request of the episode to the app; what the app cannot even answer is the episode's error."""
    try:
        return await client.post(path, json=body)
    except httpx.HTTPError as exc:
        raise EnvError(f"the resource server did not answer POST {path}: {type(exc).__name__}: {exc}") from exc


def answered(response: httpx.Response, path: str) -> Any:
    """The JSON of a route's answer that must succeed (/seed_session, /verify, /reset, /step), else the episode's
    error with what the server said."""
    if response.status_code >= 400:
        raise EnvError(f"the resource server answered POST {path} with HTTP {response.status_code}: "
                       f"{response.text[:2000]}")
    try:
        return response.json()
    except ValueError:
        raise EnvError(f"the resource server's answer to POST {path} is not JSON: {response.text[:500]!r}") from None
