"""AWM worlds in process: each scenario's generated FastAPI app loaded once per worker, its database bound per
episode, its endpoints as tools, called through ASGI.

- A world's code runs once, at its first episode in this worker, as a real module registered under its name (as
  AWM's runner runs it, a file under uvicorn), so FastAPI and pydantic resolve its models however its code names
  and orders them; at most `max_loaded` stay loaded, the least recently used is dropped.
- Whatever its `create_engine(...)` line says (a URL or a path in DATABASE_PATH, a literal URL, a helper that
  builds the engine), the engine it makes is ours: on a scratch file while the code loads (its `create_all` runs
  at import), and the running episode's at a call. AWM's runner rewrites that line to the same effect. Its
  engines and session factories, whatever their names, are then replaced by stand-ins that use the engine of the
  episode whose call is running (a ContextVar set around each call).
- Tools come from the app's OpenAPI document: the `operation_id` is the name; path, query and body fields make
  one `inputSchema`, as fastapi-mcp builds it. A call is a request to the app through httpx's ASGI transport;
  the JSON answer is the text (pretty-printed, as fastapi-mcp returns it), an HTTP status >= 400 an error.
- The handlers are `async def` but block on SQLite, so every call runs in a worker thread, on that thread's own
  event loop, never on the server's.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import importlib.util
import json
import os
import sqlite3
import sys
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CURRENT_ENGINE: contextvars.ContextVar[Any] = contextvars.ContextVar("awm_episode_engine")
_LOADING = threading.Lock()  # DATABASE_PATH and sqlalchemy.create_engine are process-wide while a world's code runs
_LOAD = threading.local()  # .engine: the scratch engine of the world whose code this thread runs
MAX_SCHEMA_DEPTH = 32


class EpisodeEngine:
    """Stands in for a world's module-level `engine`: the engine of the episode whose call is running."""

    def __getattr__(self, name: str) -> Any:
        return getattr(CURRENT_ENGINE.get(), name)


class EpisodeSessions:
    """Stands in for a world's `SessionLocal`: a session on the episode's engine."""

    def __init__(self, original: Any) -> None:
        self.kwargs = dict(getattr(original, "kw", {}) or {})
        self.kwargs.pop("bind", None)

    def __call__(self, **kwargs: Any) -> Any:
        from sqlalchemy.orm import Session

        return Session(bind=CURRENT_ENGINE.get(), **(self.kwargs | kwargs))


@dataclass
class Tool:
    name: str
    description: str
    method: str
    path: str
    path_params: list[str]
    query_params: list[str]
    has_body: bool
    input_schema: dict[str, Any]

    def mcp(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "inputSchema": self.input_schema}


@dataclass
class World:
    name: str
    app: Any
    tools: dict[str, Tool]
    clients: dict[int, Any] = field(default_factory=dict)  # an httpx client on the app, per worker thread

    def client(self) -> Any:
        """This thread's client of the app (a client is bound to its thread's event loop)."""
        import httpx

        client = self.clients.get(threading.get_ident())
        if client is None:
            client = self.clients[threading.get_ident()] = httpx.AsyncClient(
                transport=httpx.ASGITransport(app=self.app), base_url="http://awm")
        return client


def create_engine(*args: Any, **kwargs: Any) -> Any:
    """sqlalchemy.create_engine as a world's code sees it: whatever it is given, the engine of what runs now (the
    world's scratch database while its code loads, the episode's during a call), else SQLAlchemy's own."""
    from sqlalchemy.engine.create import create_engine as sqlalchemy_create_engine

    engine = getattr(_LOAD, "engine", None) or CURRENT_ENGINE.get(None)
    return engine if engine is not None else sqlalchemy_create_engine(*args, **kwargs)


@contextlib.contextmanager
def _loading(scratch: Path) -> Iterator[Any]:
    """While a world's code runs: DATABASE_PATH on a scratch file (for code that uses the path itself), and
    sqlalchemy.create_engine giving an engine on it (the world's module keeps this create_engine)."""
    import sqlalchemy
    import sqlalchemy.engine

    engine = episode_engine(scratch)
    with _LOADING:
        saved = os.environ.get("DATABASE_PATH"), sqlalchemy.create_engine, sqlalchemy.engine.create_engine
        os.environ["DATABASE_PATH"] = str(scratch)
        sqlalchemy.create_engine = sqlalchemy.engine.create_engine = create_engine
        _LOAD.engine = engine
        try:
            yield engine
        finally:
            _LOAD.engine = None
            sqlalchemy.create_engine, sqlalchemy.engine.create_engine = saved[1], saved[2]
            if saved[0] is None:
                os.environ.pop("DATABASE_PATH", None)
            else:
                os.environ["DATABASE_PATH"] = saved[0]


def _bind_per_episode(module: Any, loaded_on: Any) -> None:
    """Replace the world's engines and session factories bound to the scratch engine, whatever their names, by
    stand-ins on the engine of the episode whose call is running."""
    from sqlalchemy.orm import sessionmaker

    for name, value in list(vars(module).items()):
        if value is loaded_on:
            setattr(module, name, EpisodeEngine())
        elif isinstance(value, sessionmaker) and value.kw.get("bind") is loaded_on:
            setattr(module, name, EpisodeSessions(value))


def load_world(folder: Path, scratch: Path) -> World:
    """Run a world's code (once per worker) and bind it to per-episode databases."""
    from fastapi import FastAPI

    name = f"awm_world_{folder.name}"
    spec = importlib.util.spec_from_file_location(name, folder / "app.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    with _loading(scratch) as engine:
        sys.modules[name] = module  # pydantic resolves a model's forward references through its module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(name, None)
            raise
    _bind_per_episode(module, engine)
    engine.dispose()
    app = next((value for value in vars(module).values() if isinstance(value, FastAPI)), None)
    if app is None:
        raise RuntimeError(f"the code of world {folder.name} defines no FastAPI app")
    return World(folder.name, app, tools_of(app.openapi()))


def _resolve(schema: Any, components: dict[str, Any], depth: int = 0) -> Any:
    """A JSON schema with its $refs to #/components/schemas inlined (bounded: schemas may recurse)."""
    if depth > MAX_SCHEMA_DEPTH:
        return {}
    if isinstance(schema, dict):
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/components/schemas/"):
            return _resolve(components.get(ref.rsplit("/", 1)[1], {}), components, depth + 1)
        return {key: _resolve(value, components, depth + 1) for key, value in schema.items()}
    if isinstance(schema, list):
        return [_resolve(item, components, depth + 1) for item in schema]
    return schema


def tools_of(openapi: dict[str, Any]) -> dict[str, Tool]:
    """The app's endpoints as tools, named by operation_id (endpoints without one are left out)."""
    components = (openapi.get("components") or {}).get("schemas") or {}
    tools: dict[str, Tool] = {}
    for path, operations in (openapi.get("paths") or {}).items():
        for method, operation in operations.items():
            name = operation.get("operationId") if isinstance(operation, dict) else None
            if not name:
                continue
            properties: dict[str, Any] = {}
            required: list[str] = []
            located: dict[str, list[str]] = {"path": [], "query": []}
            for parameter in operation.get("parameters") or ():
                where = parameter.get("in")
                if where not in located:
                    continue
                located[where].append(parameter["name"])
                spec = _resolve(parameter.get("schema") or {}, components)
                if parameter.get("description"):
                    spec = spec | {"description": parameter["description"]}
                properties[parameter["name"]] = spec
                if parameter.get("required"):
                    required.append(parameter["name"])
            body = ((operation.get("requestBody") or {}).get("content") or {}).get("application/json")
            if body:
                body_schema = _resolve(body.get("schema") or {}, components)
                properties.update(body_schema.get("properties") or {})
                required += [r for r in body_schema.get("required") or () if r not in required]
            schema = {"type": "object", "properties": properties, **({"required": required} if required else {})}
            description = operation.get("description") or operation.get("summary") or ""
            tools[name] = Tool(name, description, method.upper(), path, located["path"], located["query"],
                               body is not None, schema)
    return tools


class Worlds:
    """The worlds loaded in this worker, at most `max_loaded` at a time."""

    def __init__(self, root: Path, scratch: Path, max_loaded: int) -> None:
        self.root, self.scratch, self.max_loaded = root, scratch, max_loaded
        self.loaded: OrderedDict[str, World] = OrderedDict()
        self.lock = asyncio.Lock()

    async def get(self, name: str) -> World:
        world = self.loaded.get(name)
        if world is None:
            async with self.lock:
                world = self.loaded.get(name)
                if world is None:
                    world = await asyncio.to_thread(load_world, self.root / name, self.scratch / f"{name}.db")
                    self.loaded[name] = world
                    while len(self.loaded) > self.max_loaded:
                        self.loaded.popitem(last=False)
        self.loaded.move_to_end(name)
        return world


_THREAD = threading.local()


def _thread_loop() -> asyncio.AbstractEventLoop:
    loop = getattr(_THREAD, "loop", None)
    if loop is None:
        loop = _THREAD.loop = asyncio.new_event_loop()
    return loop


def _request(world: World, tool: Tool, arguments: dict[str, Any], engine: Any) -> tuple[int, str]:
    """One call of a tool, in a worker thread: (HTTP status, body text)."""

    async def send() -> tuple[int, str]:
        CURRENT_ENGINE.set(engine)
        path = tool.path
        for name in tool.path_params:
            path = path.replace("{" + name + "}", str(arguments.get(name, "")))
        query = {name: arguments[name] for name in tool.query_params if arguments.get(name) is not None}
        body = {k: v for k, v in arguments.items() if k not in tool.path_params and k not in tool.query_params}
        response = await world.client().request(tool.method, path, params=query,
                                                json=body if tool.has_body else None)
        return response.status_code, response.text

    return _thread_loop().run_until_complete(send())  # the call's task has a context of its own


async def call_tool(world: World, tool: Tool, arguments: dict[str, Any], engine: Any) -> tuple[str, bool]:
    """(text, failed): the tool's JSON answer pretty-printed, or "Error: ..." for an HTTP error."""
    status, text = await asyncio.to_thread(_request, world, tool, arguments, engine)
    if status >= 400:
        return f"Error: HTTP {status}: {text[:2000]}", True
    try:
        return json.dumps(json.loads(text), indent=2), False
    except ValueError:
        return text, False


def episode_engine(path: Path) -> Any:
    """An engine on an episode's own database (no pooling: the file goes when the episode ends)."""
    from sqlalchemy import event
    from sqlalchemy.engine.create import create_engine as sqlalchemy_create_engine
    from sqlalchemy.pool import NullPool

    engine = sqlalchemy_create_engine(f"sqlite:///{path}", connect_args={"check_same_thread": False},
                                      poolclass=NullPool)

    @event.listens_for(engine, "connect")
    def _throwaway(connection: sqlite3.Connection, _record: Any) -> None:
        connection.execute("PRAGMA synchronous=OFF")  # a throwaway database: no need to wait for the disk

    return engine
