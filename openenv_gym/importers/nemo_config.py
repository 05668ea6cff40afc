"""A NeMo Gym resource server's config, as its configs/*.yaml declare it (importers/nemo.py imports it): the server's
first instance and its fields, the agents paired with that instance (their datasets, and how many model turns they let
an episode take), and where the datasets they name lie in the source.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from openenv_gym.importers.base import ImportFailedError
from openenv_gym.importers.nemo_requirements import PACKAGE
from openenv_gym.runtime.pyparse import parse as parse_python

SIMULATED_TOOLS = {"tool_simulation_agent"}  # NeMo's agents that verify the model's one reply, making no tool calls

if TYPE_CHECKING:
    from openenv_gym.importers.nemo import Server


def yaml_blocks(folder: Path) -> list[tuple[str, dict[str, Any]]]:
    blocks = []
    for path in sorted((folder / "configs").glob("*.y*ml")):
        try:
            loaded = yaml.safe_load(path.read_text())
        except yaml.YAMLError as exc:
            raise ImportFailedError(f"{path} is not valid YAML: {exc}") from None
        if isinstance(loaded, dict):
            blocks += [(name, block) for name, block in loaded.items() if isinstance(block, dict)]
    return blocks


def instances(blocks: list[tuple[str, dict[str, Any]]], server: str) -> list[tuple[str, dict[str, Any]]]:
    """(instance name, its config fields) of each instance of the server the config blocks declare."""
    return [(name, block[PACKAGE][server]) for name, block in blocks
            if isinstance(block.get(PACKAGE), dict) and isinstance(block[PACKAGE].get(server), dict)]


@dataclass
class ServerConfig:
    instance: str  # the instance's name
    fields: dict[str, Any]  # its config
    datasets: list[dict[str, Any]]  # its own and those of the agents paired with it
    agents: list[str]  # the kinds of the agents paired with it (simple_agent, scicode_agent, ...)
    max_steps: int | None = None  # the model turns the first paired agent that bounds them lets an episode take
    simulated_tools: bool = False  # its paired agents make no tool calls: the model's one reply is verified as it is


def server_config(server: Server) -> ServerConfig:
    """The server's config, from its config files: the first instance of this server, and the agents that name that
    instance."""
    blocks = yaml_blocks(server.folder)
    declared = instances(blocks, server.folder.name)
    if not declared:
        raise ImportFailedError(f"{server.folder}/configs has no instance of the server ({PACKAGE}: "
                                f"{server.folder.name}: ...); NeMo Gym could not start it either")
    instance, fields = declared[0]
    datasets, agents, turns = list(fields.get("datasets") or []), [], []
    for _, block in blocks:
        for kind, agent in (block.get("responses_api_agents") or {}).items():
            if isinstance(agent, dict) and (agent.get("resources_server") or {}).get("name") == instance:
                datasets += [dataset for dataset in agent.get("datasets") or [] if isinstance(dataset, dict)]
                agents.append(kind)
                turns.append(agent.get("max_steps") if "max_steps" in agent else _default_max_steps(server, kind))
    config = {key: value for key, value in fields.items() if key != "datasets"}
    bound = next((turn for turn in turns if isinstance(turn, int) and not isinstance(turn, bool) and turn > 0), None)
    simulated = bool(agents) and all(kind in SIMULATED_TOOLS for kind in agents)
    return ServerConfig(instance, _without_nulls(config), datasets, agents, bound, simulated)


def _default_max_steps(server: Server, kind: str) -> int | None:
    """An agent's own bound on an episode's model turns, where its config gives none: the default of its config
    class's `max_steps` in its app.py (gymnasium_agent's 10, image_tools_agent's 5), where the source has it."""
    app = server.root / "responses_api_agents" / kind / "app.py" if server.root is not None else None
    if app is None or not app.is_file():
        return None
    try:
        tree = parse_python(app.read_text(errors="replace"))
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == "max_steps":
            value = node.value
            if isinstance(value, ast.Call):  # Field(10, ...) or Field(default=10)
                value = next((k.value for k in value.keywords if k.arg == "default"), value.args[0] if value.args
                             else None)
            return value.value if isinstance(value, ast.Constant) and isinstance(value.value, int) else None
    return None


def _without_nulls(value: Any) -> Any:
    """The config without its null values (the manifest is TOML, which has none): such a key keeps its default."""
    if isinstance(value, dict):
        return {key: _without_nulls(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [_without_nulls(item) for item in value if item is not None]
    return value


def dataset_file(server: Server, dataset: dict[str, Any]) -> Path | None:
    """Where a dataset's JSONL lies in the source (its path is the checkout's), if it is there."""
    given = dataset.get("jsonl_fpath")
    if not isinstance(given, str):
        return None
    path = Path(given)
    candidates = [server.root / path] if server.root is not None else []
    candidates.append(server.folder / "data" / path.name)
    return next((candidate for candidate in candidates if candidate.is_file()), None)
