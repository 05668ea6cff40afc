"""Detect Prime Intellect Verifiers environments (the classic API): a module with a top-level
`load_environment` that imports `verifiers` (also `verifiers.legacy`, `verifiers.envs.*`).

Classic environments run under `verifiers>=0.1.11,<0.4`: 0.4 no longer contains the classic API, so an
unbounded pin is capped. The v1 Taskset API (0.4) and the pre-0.1.8 API are refused with a message.
Hazards found in the source (hub downloads, API keys, environment variables, unseeded randomness)
are reported at import. Nothing is imported or run.
"""

from __future__ import annotations

import ast
from pathlib import Path

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from openenv_gym.importers.base import Detected, ImportFailedError
from openenv_gym.importers.deps import declared_dependencies
from openenv_gym.importers.scan import module_name, parse, python_files

CLASSIC_RANGE = SpecifierSet(">=0.1.11,<0.4")
CLASSIC_RELEASES = ("0.1.11", "0.1.12", "0.1.14", "0.2.0", "0.2.1", "0.3.0", "0.3.1")

DOWNLOADS = {"load_dataset", "load_example_dataset", "snapshot_download", "hf_hub_download", "download"}
NETWORK_MODULES = {"requests", "httpx", "urllib", "nltk"}
KEY_CLIENTS = {"AsyncOpenAI", "OpenAI", "JudgeRubric", "ensure_keys", "AsyncAnthropic", "Anthropic"}
SANDBOXES = {"SandboxEnv", "PythonEnv", "CliAgentEnv"}
RANDOM_CALLS = {"shuffle", "choice", "choices", "sample", "randint", "random", "uniform", "randrange"}


def _imports_verifiers(tree: ast.Module) -> set[str]:
    """The verifiers modules a module imports ("verifiers", "verifiers.v1", ...)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "verifiers"}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "verifiers":
            found.add(node.module or "verifiers")
    return found


def _has_load_environment(tree: ast.Module) -> bool:
    return any(isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == "load_environment"
               for n in tree.body)


def _pre_0_1_8(tree: ast.Module) -> bool:
    """The old override points: is_completed(messages, state)."""
    return any(isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == "is_completed"
               for n in ast.walk(tree))


def _called_name(node: ast.Call) -> str:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def hazards(tree: ast.Module) -> list[str]:
    """What in the source needs the network, keys or care at load time."""
    found: list[str] = []
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    names = {_called_name(c) for c in calls}
    modules = {(c.func.value.id if isinstance(c.func, ast.Attribute) and isinstance(c.func.value, ast.Name) else "")
               for c in calls}
    if names & DOWNLOADS or modules & NETWORK_MODULES:
        found.append("downloads data at load time (a dataset hub or the network): this machine may not reach it; "
                     "pass env_args that point at local data, or vendor the data with --data")
    if names & KEY_CLIENTS:
        found.append("builds an API client or judge that needs an API key (e.g. OPENAI_API_KEY) at load time")
    if names & SANDBOXES:
        found.append("uses Prime Sandboxes, which need a Prime API key and network access")
    variables = sorted({
        n.slice.value for n in ast.walk(tree)
        if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Attribute) and n.value.attr == "environ"
        and isinstance(n.slice, ast.Constant) and isinstance(n.slice.value, str)} | {
        c.args[0].value for c in calls if _called_name(c) in ("getenv", "get") and c.args
        and isinstance(c.args[0], ast.Constant) and isinstance(c.args[0].value, str)
        and isinstance(c.func, ast.Attribute) and (c.func.attr == "getenv" or (
            isinstance(c.func.value, ast.Attribute) and c.func.value.attr == "environ"))})
    if variables:
        found.append(f"reads environment variables: {', '.join(variables)}")
    seeded = any(_called_name(c) in ("seed", "Random", "default_rng") and (c.args or c.keywords) for c in calls)
    unseeded = any(_called_name(c) in RANDOM_CALLS and isinstance(c.func, ast.Attribute)
                   and isinstance(c.func.value, ast.Name) and c.func.value.id in ("random", "np", "numpy")
                   for c in calls)
    if unseeded and not seeded:
        found.append("uses unseeded randomness: if it builds the dataset, each process sees different rows "
                     "(the server owns the dataset and picks rows by index, so episodes stay consistent)")
    return found


def classic_requirement(declared: list[str]) -> tuple[str, str | None]:
    """The verifiers requirement to install, and a message when the source's own pin was changed."""
    pins = [Requirement(d) for d in declared if Requirement(d).name.lower() == "verifiers"]
    if not pins:
        return f"verifiers{CLASSIC_RANGE}", "the source does not pin verifiers; using the classic API range"
    pin = pins[0]
    if not any(pin.specifier.contains(v) for v in CLASSIC_RELEASES):
        raise ImportFailedError(
            f"the source pins {pin}, which holds no release of the classic API this importer runs "
            f"({CLASSIC_RANGE}); versions before 0.1.8 had a different API, 0.4 is the v1 Taskset API")
    combined = SpecifierSet(str(pin.specifier)) & CLASSIC_RANGE
    if pin.specifier.contains("0.4.0"):
        return (f"verifiers{combined}", f"capped {pin} at <0.4: verifiers 0.4 no longer contains the classic API "
                "that load_environment() returns, and an unbounded pin would install it")
    return f"verifiers{combined}", None


class VerifiersImporter:
    kind = "verifiers"
    looks_for = "a module with a top-level load_environment() that imports verifiers (the classic API)"

    def detect(self, source: Path) -> list[Detected]:
        found, v1_only = [], False
        for path in python_files(source):
            tree = parse(path)
            if tree is None:
                continue
            imported = _imports_verifiers(tree)
            if not imported:
                continue
            if any(m == "verifiers.v1" or m.startswith("verifiers.v1.") for m in imported):
                v1_only = v1_only or not _has_load_environment(tree)
                continue
            if not _has_load_environment(tree):
                continue
            if _pre_0_1_8(tree):
                raise ImportFailedError(
                    f"{path.name} uses the Verifiers API from before 0.1.8 (is_completed overrides), which is not "
                    "supported; port it to the classic API (0.1.8 to 0.3.x: @vf.stop, env_response -> messages)")
            found.append(Detected(self.kind, module_name(source, path), "load_environment", path, ("verifiers",)))
        if v1_only and not found:
            raise ImportFailedError(
                f"{source} is a Verifiers v1 environment (verifiers.v1 Taskset API, 0.4), which is not supported "
                "yet; only the classic API (load_environment() returning a vf.Environment, 0.1.11 to 0.3.x) is")
        return found

    def dependencies(self, source: Path, detected: Detected) -> list[str]:
        declared = declared_dependencies(source)
        others = [d for d in declared if Requirement(d).name.lower() != "verifiers"]
        requirement, _ = classic_requirement(declared)
        return [*others, requirement]

    def notes(self, source: Path, detected: Detected) -> list[str]:
        _, pin_note = classic_requirement(declared_dependencies(source))
        tree = parse(detected.file)
        return ([pin_note] if pin_note else []) + (hazards(tree) if tree is not None else [])
