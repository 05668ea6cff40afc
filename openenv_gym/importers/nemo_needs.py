"""What a NeMo Gym resource server needs that cannot be reached from here, read at import from its config, its code
and its rows (importers/nemo.py records it in the manifest; a reset says it): values of NeMo's global config, a
web API's key, a sandbox provider, a GPU, a download at startup, prompts its paired agent builds; and the model
servers its config calls (a judge, a user simulator), which the judge endpoint a server is given answers.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from openenv_gym.manifests.schema import NEMO_ROW_INPUT as INPUT
from openenv_gym.runtime.pyparse import parse as parse_python

if TYPE_CHECKING:
    from openenv_gym.importers.nemo import Server

JUDGE_SWITCHES = ("should_use_judge", "use_judge")  # config keys that turn a server's judge off
DEFAULTED = re.compile(r"\$\{oc\.(?:env|select):[^${},]+,[^${}]*\}")  # an interpolation with a default
PUNCTUATION = "( ,'\""  # around what a hint matched
REQUIRED_KEY = re.compile(r"^[ \t]+(\w*api_key)[ \t]*:[ \t]*str[ \t]*(?:#.*)?$", re.M)  # a config field, no default
MODEL_SERVERS = "responses_api_models"  # a config reference of this type is a model server the server calls
DOWNLOADS = "data downloaded at run time"
URL_HOST = re.compile(r"[\"']https?://([A-Za-z0-9.-]+\.[A-Za-z]{2,})")  # (in a string: not a comment's)
LOCAL_HOSTS = {"localhost", "example.com", "example.org"}
HINTS = {  # what a server's code says it needs, that a machine with no internet cannot give it
    "a sandbox provider": re.compile(r"\bnemo_gym\.sandbox\b|\bdaytona\b|\be2b\b|\bopensandbox\b"
                                     r"|\bsandbox_host\b|\bLocalSandbox\b|\bwait_for_sandbox\("),  # (NeMo Skills')
    DOWNLOADS: re.compile(r"\bload_dataset\(|\bnltk\.download\(|\b(?:hf_hub|snapshot)_download\("
                                              r"|\burl(?:open|retrieve)\(|[\"']clone[\"'],|\bgit clone |https://codeload\.github"
                                              r"\.com/"),
    "a web API key": re.compile(r"(?:environ|getenv)\W+[\"'][A-Z_]*API_KEY"),
    "a GPU": re.compile(r"\bextra_gpu\b|\bnum_gpus\s*=\s*(?:0?\.\d*[1-9]|[1-9])|\.cuda\(\)"),  # (Ray actors on one)
}


def _nodes(value: Any, path: str = "") -> list[tuple[str, Any]]:
    """Every (key path, value) of a config, itself first: `judge.name`, `items[0]`."""
    found = [(path, value)]
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        found += _nodes(item, f"{path}.{key}".lstrip(".") if isinstance(value, dict) else f"{path}[{key}]")
    return found


def model_servers(config: dict[str, Any]) -> dict[str, str]:
    """The model servers the config references (an LLM judge, a user simulator): {config key: their name}, but a
    judge the config turns off."""
    judge_off = any(config.get(switch) is False for switch in JUDGE_SWITCHES)  # (math_with_judge's default)
    return {path or "(the config)": str(value.get("name")) for path, value in _nodes(config)
            if isinstance(value, dict) and value.get("type") == MODEL_SERVERS and not (judge_off and "judge" in path)}


def _interpolated(config: dict[str, Any]) -> list[str]:
    """The config keys whose values are interpolations of NeMo Gym's global config with no default
    (`${policy_base_url}`; not `${oc.env:PORT,6000}`, which the worker resolves to its default)."""
    return [f"{path}: {value}" for path, value in _nodes(config) if isinstance(value, str)
            and "${" in _without_defaulted(value)]


def _without_defaulted(text: str) -> str:
    """The text with its interpolations that have a default (innermost first: `${oc.select:k,${oc.env:K,null}}`)
    taken out."""
    while (reduced := DEFAULTED.sub("", text)) != text:
        text = reduced
    return text


def unreachable_needs(server: Server, config: dict[str, Any]) -> list[str]:
    needs = []
    code = "\n".join(path.read_text(errors="replace") for path in sorted(served_modules(server)))
    keys = [f"{path}: {value}" for path, value in _nodes(config)
            if path.endswith("api_key") and isinstance(value, str) and "${" in value]  # (critpt's, with a default)
    interpolated = [value for value in _interpolated(config) if value not in keys]  # (each said once)
    keys += [f"{name}, which its config does not give" for name in REQUIRED_KEY.findall(code) if name not in config]
    if keys:
        needs.append(f"a web API's key, from NeMo Gym's global config or the environment ({'; '.join(keys[:3])})")
    if interpolated:
        needs.append(f"values of NeMo Gym's global config (its env.yaml: an endpoint, a key), which are not given "
                     f"here ({'; '.join(interpolated[:3])})")
    for what, pattern in HINTS.items():
        match = pattern.search(code)
        if match:
            hosts = _named_hosts(code) if what == DOWNLOADS else ""
            needs.append(f"{what} (its code uses {match.group(0).strip(PUNCTUATION)}{hosts})")
    return needs


def _named_hosts(code: str) -> str:
    """The hosts the URLs written in the code name (where it downloads from, most likely), for the need's words."""
    hosts = [host for host in dict.fromkeys(URL_HOST.findall(code)) if host not in LOCAL_HOSTS]
    return f"; the hosts its code names: {', '.join(hosts[:5])}" if hosts else ""


def agent_built_prompts(folder: Path, splits: dict[str, str], agents: list[str]) -> list[str]:
    """A need where the rows hold no prompt (an empty input: scicode's), which the agent paired with the server builds
    from the row's other fields; episodes here start from the row's own input."""
    for path in splits.values():
        first = next((line for line in (folder / path).read_bytes().splitlines() if line.strip()), b"{}")
        try:
            given = json.loads(first).get(INPUT, {}).get("input")
        except (ValueError, AttributeError):
            continue
        if given in ([], "", None):
            agent = ", ".join(dict.fromkeys(agents)) or "an agent of its own"
            return [f"the prompts its paired agent builds ({agent}: the rows' {INPUT}.input is empty; episodes here "
                    "start from a row's own input)"]
    return []


def served_modules(server: Server) -> set[Path]:
    """The files of the server's folder that serving it runs: app.py and what it imports from its folder (not its
    dataset scripts or tests)."""
    package = ".".join(server.module.split(".")[:2])  # resources_servers.<name>
    found, pending = set(), [server.folder / server.entrypoint]
    while pending:
        path = pending.pop()
        if path in found or not path.is_file():
            continue
        found.add(path)
        try:
            tree = parse_python(path.read_text(errors="replace"))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and (node.level or node.module.startswith(package)):
                base = path.parent if node.level else server.folder
                parts = node.module.split(".")[0 if node.level else 2:]
                module = base.joinpath(*parts)
                pending += [module.with_suffix(".py"), module / "__init__.py",
                            *(module / f"{alias.name}.py" for alias in node.names)]
            elif isinstance(node, ast.Import):
                pending += [server.folder.joinpath(*alias.name.split(".")[2:]).with_suffix(".py")
                            for alias in node.names if alias.name.startswith(f"{package}.")]
    return found
