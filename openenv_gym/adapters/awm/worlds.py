"""AWM worlds in process: each scenario's generated FastAPI app loaded once per worker, its database bound per
episode, its endpoints as tools, called through ASGI.

- A world's code runs once, at its first episode in this worker, as a real module registered under its name (as
  AWM's runner runs it, a file under uvicorn), so FastAPI and pydantic resolve its models however its code names
  and orders them; at most `max_loaded` stay loaded, the least recently used is dropped.
- Whatever its `create_engine(...)` line says (a URL or a path in DATABASE_PATH, a literal URL, a helper that
  builds the engine), the engine it gets is ours, as AWM's runner rewrites that line to an engine on the
  episode's database: a real SQLAlchemy engine (so the code's session factories, event listeners and queries work
  on it as written) whose every connection opens the database of what runs now: a scratch file while the code
  loads (its `create_all` runs at import), the episode's during a call (a ContextVar set around each call).
- Tools come from the app's OpenAPI document: the `operation_id` is the name; path, query and body fields make
  one `inputSchema`, as fastapi-mcp builds it. A call is a request to the app through httpx's ASGI transport;
  the JSON answer is the text (pretty-printed, as fastapi-mcp returns it), an HTTP status >= 400 an error.
  A handler that raises is an HTTP 500, as under uvicorn (AWM's runner), never an exception of ours; a call
  without a path parameter is a 422 naming it, in FastAPI's words (fastapi-mcp leaves `{name}` in the path,
  which the app refuses with a 422 when the parameter is typed, or takes as a value when it is a string).
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

CURRENT_DATABASE: contextvars.ContextVar[Path] = contextvars.ContextVar("awm_episode_database")
# the connections a call opened, so that what a handler that raised left uncommitted is rolled back (below)
CALL_CONNECTIONS: contextvars.ContextVar[list[sqlite3.Connection]] = contextvars.ContextVar("awm_call_connections")
_LOADING = threading.Lock()  # DATABASE_PATH and sqlalchemy.create_engine are process-wide while code loads
MAX_SCHEMA_DEPTH = 32


def _connect() -> sqlite3.Connection:
    """A connection to the database of what runs now (the episode of the call, or the world's scratch file)."""
    connection = sqlite3.connect(CURRENT_DATABASE.get(), check_same_thread=False)
    connection.execute("PRAGMA synchronous=OFF")  # throwaway databases: no need to wait for the disk
    opened = CALL_CONNECTIONS.get(None)
    if opened is not None:
        opened.append(connection)
    return connection


def _release(opened: list[sqlite3.Connection]) -> None:
    """Roll back what a call left uncommitted on a connection still open: a handler that raised after a write was
    flushed leaves its session to the garbage collector, and the write lock with it, so that the episode's next
    write would wait out SQLite's busy timeout and fail (as it does under uvicorn until a collection runs)."""
    for connection in opened:
        with contextlib.suppress(sqlite3.ProgrammingError):  # closed: it holds nothing
            if connection.in_transaction:
                connection.rollback()


def create_engine(*args: Any, **kwargs: Any) -> Any:
    """sqlalchemy.create_engine as a world's code sees it: whatever it is given, an engine on the database of what
    runs now. No pooling: a connection is opened per use, on that moment's database."""
    from sqlalchemy.engine.create import create_engine as sqlalchemy_create_engine
    from sqlalchemy.pool import NullPool

    return sqlalchemy_create_engine("sqlite://", creator=_connect, poolclass=NullPool)


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
            # raise_app_exceptions=False: a handler that raises answers 500 (Starlette's error middleware has
            # sent it), as fastapi-mcp's client and uvicorn answer it; the episode goes on
            client = self.clients[threading.get_ident()] = httpx.AsyncClient(
                transport=httpx.ASGITransport(app=self.app, raise_app_exceptions=False), base_url="http://awm")
        return client


@contextlib.contextmanager
def _loading(scratch: Path) -> Iterator[None]:
    """While a world's code runs: its database is a scratch file, DATABASE_PATH names it (for code that uses the
    path itself), and sqlalchemy.create_engine is ours (the module keeps the name it imports)."""
    import sqlalchemy
    import sqlalchemy.engine

    with _LOADING:
        saved = os.environ.get("DATABASE_PATH"), sqlalchemy.create_engine, sqlalchemy.engine.create_engine
        os.environ["DATABASE_PATH"] = str(scratch)
        sqlalchemy.create_engine = sqlalchemy.engine.create_engine = create_engine
        database = CURRENT_DATABASE.set(scratch)
        try:
            yield
        finally:
            CURRENT_DATABASE.reset(database)
            sqlalchemy.create_engine, sqlalchemy.engine.create_engine = saved[1], saved[2]
            if saved[0] is None:
                os.environ.pop("DATABASE_PATH", None)
            else:
                os.environ["DATABASE_PATH"] = saved[0]


def load_world(folder: Path, scratch: Path) -> World:
    """Run a world's code (once per worker), its engines on the database of what runs."""
    from fastapi import FastAPI

    name = f"awm_world_{folder.name}"
    spec = importlib.util.spec_from_file_location(name, folder / "app.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    with _loading(scratch):
        sys.modules[name] = module  # pydantic resolves a model's forward references through its module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(name, None)
            raise
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


def _request(world: World, tool: Tool, arguments: dict[str, Any], database: Path) -> tuple[int | None, str]:
    """One call of a tool, in a worker thread: (HTTP status, body text), or (None, why no request was made)."""
    import httpx

    async def send() -> tuple[int | None, str]:
        CURRENT_DATABASE.set(database)
        opened: list[sqlite3.Connection] = []
        CALL_CONNECTIONS.set(opened)
        path = tool.path
        for name in tool.path_params:
            path = path.replace("{" + name + "}", str(arguments[name]))
        query = {name: arguments[name] for name in tool.query_params if arguments.get(name) is not None}
        body = {k: v for k, v in arguments.items() if k not in tool.path_params and k not in tool.query_params}
        try:
            response = await world.client().request(tool.method, path, params=query,
                                                    json=body if tool.has_body else None)
        except httpx.InvalidURL as exc:  # a value no URL can hold (a newline, say): the caller's error
            return None, f"the call could not be made: {exc}"
        finally:
            _release(opened)
        return response.status_code, response.text

    return _thread_loop().run_until_complete(send())  # the call's task has a context of its own


def missing_path_parameters(tool: Tool, arguments: dict[str, Any]) -> tuple[int | None, str] | None:
    """FastAPI's 422 for the path parameters a call leaves out (None is left out too), or None."""
    missing = [name for name in tool.path_params if arguments.get(name) is None]
    if not missing:
        return None
    return 422, json.dumps({"detail": [{"type": "missing", "loc": ["path", name], "msg": "Field required",
                                        "input": None} for name in missing]})


async def call_tool(world: World, tool: Tool, arguments: dict[str, Any], database: Path) -> tuple[str, bool]:
    """(text, failed): the tool's JSON answer pretty-printed, or "Error: ..." for an HTTP error or a call that
    could not be made."""
    status, text = missing_path_parameters(tool, arguments) or await asyncio.to_thread(
        _request, world, tool, arguments, database)
    if status is None:
        return f"Error: {text[:2000]}", True
    if status >= 400:
        return f"Error: HTTP {status}: {text[:2000]}", True
    try:
        return json.dumps(json.loads(text), indent=2), False
    except ValueError:
        return text, False
