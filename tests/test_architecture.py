"""The layering of openenv_gym (docs/architecture.md), read from the imports of every module, so it cannot rot.

Every module belongs to a room; a room may import only the rooms below it. Imports inside functions and
under TYPE_CHECKING count, and so do the dotted names of lazy-import tables ("openenv_gym.x.y:Name").
"""

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "openenv_gym"
GYM_FACE = {"env", "vector", "registry", "spaces", "targets", "groups"}
EVERY_ROOM = {"errors", "runtime", "sandbox", "programs", "episode", "protocol", "manifests", "adapters", "web",
              "server", "client", "gym", "sampling", "rollout", "integrations", "ray", "importers", "cli", "package"}
ALLOWED = {  # a room -> the rooms it may import (besides itself)
    "errors": set(),
    "runtime": set(),
    "sandbox": {"errors", "runtime"},
    "programs": {"errors", "runtime", "sandbox"},
    "episode": {"errors", "runtime"},
    "protocol": {"errors", "episode"},
    "manifests": {"errors", "protocol", "sandbox"},
    # (client: an environment that is a server of its own, an OpenEnv project's in its image, is played through it)
    "adapters": {"errors", "runtime", "sandbox", "programs", "episode", "protocol", "manifests", "client"},
    "web": {"errors"},
    "server": {"errors", "runtime", "sandbox", "programs", "episode", "protocol", "manifests", "adapters", "web"},
    "client": {"errors", "runtime", "episode", "protocol"},
    "gym": {"errors", "episode", "protocol", "client", "manifests"},
    "sampling": {"errors", "runtime", "episode", "protocol", "client", "gym"},  # (gym: a catalog read from an env)
    "rollout": {"errors", "runtime", "episode", "protocol", "client", "gym", "sampling"},
    "integrations": {"errors", "runtime", "episode", "protocol", "client", "gym", "sampling", "rollout"},
    "ray": {"errors", "runtime", "episode", "protocol", "client", "gym", "sampling", "rollout"},
    "importers": {"errors", "runtime", "sandbox", "manifests", "client"},  # (client: what an image's server serves)
    "cli": EVERY_ROOM,
    "package": EVERY_ROOM,  # the public API: lazy names of every room
}
NETWORK_MODULES = {"socket", "ssl", "asyncio", "websockets", "httpx", "httpx_sse", "uvloop", "http", "urllib"}
SANS_IO = {"protocol", "episode"}  # rooms that do no I/O and schedule nothing
LAZY_NAME = re.compile(r"openenv_gym(\.[A-Za-z_]\w*)+(:\w+)?")


def room_of(dotted: str) -> str:
    """The room of a module or a name inside the package ("openenv_gym.client.vector" -> "client")."""
    parts = dotted.split(".")
    if len(parts) == 1 or parts[1] in ("__init__", "__main__"):
        return "package"
    top = parts[1]
    if top in GYM_FACE:
        return "gym"
    if top == "errors" or (PACKAGE / top).is_dir():
        return top
    return "package"  # a public name of the package itself, e.g. `from openenv_gym import Environment`


def imports_of(source: str) -> tuple[set[str], set[str]]:
    """(openenv_gym names imported or named in lazy tables, top-level modules of other packages imported)."""
    ours, theirs = set(), set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [f"{node.module}.{alias.name}" if node.module == "openenv_gym" else node.module
                     for alias in node.names]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and LAZY_NAME.fullmatch(node.value):
            names = [node.value.split(":")[0]]
        else:
            continue
        for name in names:
            (ours if name.split(".")[0] == "openenv_gym" else theirs).add(name if name.startswith("openenv_gym")
                                                                          else name.split(".")[0])
    return ours, theirs


def violations(room: str, source: str) -> list[str]:
    ours, theirs = imports_of(source)
    found = [f"imports {name} ({room_of(name)})" for name in sorted(ours)
             if room_of(name) != room and room_of(name) not in ALLOWED[room]]
    if room in SANS_IO:
        found += [f"imports {module}, but {room} does no I/O" for module in sorted(theirs & NETWORK_MODULES)]
    return found


def modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", modules(), ids=lambda path: str(path.relative_to(PACKAGE)))
def test_module_imports_only_rooms_below_it(path):
    dotted = ".".join(("openenv_gym", *path.relative_to(PACKAGE).with_suffix("").parts))
    room = room_of(dotted)
    assert room in ALLOWED, f"{path} is in no room of the architecture; add it to docs/architecture.md and here"
    assert violations(room, path.read_text()) == []


def test_every_room_is_a_folder_or_a_known_module():
    tops = {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()
            if (p.suffix == ".py" or (p / "__init__.py").exists())}
    assert {room_of(f"openenv_gym.{top}") for top in tops} <= set(ALLOWED)


@pytest.mark.parametrize("room, source, expected", [
    ("client", "from openenv_gym.server.core import SessionCore", "imports openenv_gym.server.core (server)"),
    ("client", "def f():\n    import openenv_gym.adapters.ors", "imports openenv_gym.adapters.ors (adapters)"),
    ("adapters", "from openenv_gym.importers.scan import parse", "imports openenv_gym.importers.scan (importers)"),
    ("protocol", "import websockets", "imports websockets, but protocol does no I/O"),
    ("gym", 'ENTRY = "openenv_gym.server.core:SessionCore"', "imports openenv_gym.server.core (server)"),
])
def test_the_check_finds_what_breaks_the_rules(room, source, expected):
    assert any(found.startswith(expected) for found in violations(room, source)), violations(room, source)
