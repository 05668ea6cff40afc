"""What in a source needs the network, keys or care when it loads: reported at import, never refused.

Read from the syntax trees of every module of the source (helpers included), without running anything.
"""

from __future__ import annotations

import ast
from pathlib import Path

from openenv_gym.importers.scan import parse, python_files

DOWNLOADS = {"load_dataset", "load_example_dataset", "snapshot_download", "hf_hub_download", "download",
             "urlretrieve"}
NETWORK_MODULES = {"requests", "httpx", "urllib", "nltk", "aiohttp"}
KEY_CLIENTS = {"AsyncOpenAI", "OpenAI", "JudgeRubric", "ensure_keys", "AsyncAnthropic", "Anthropic"}
SANDBOXES = {"SandboxEnv", "PythonEnv", "CliAgentEnv"}
RANDOM_CALLS = {"shuffle", "choice", "choices", "sample", "randint", "random", "uniform", "randrange"}
RANDOM_MODULES = {"random", "np", "numpy"}


def _called_name(node: ast.Call) -> str:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _receiver(node: ast.Call) -> str:
    """`x` in a call `x.f(...)`, else ""."""
    func = node.func
    return func.value.id if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) else ""


def _variables(trees: list[ast.Module], calls: list[ast.Call]) -> list[str]:
    """Names of environment variables read with os.environ[...], os.environ.get(...) or os.getenv(...)."""
    subscripts = {
        n.slice.value for tree in trees for n in ast.walk(tree)
        if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Attribute) and n.value.attr == "environ"
        and isinstance(n.slice, ast.Constant) and isinstance(n.slice.value, str)}
    getters = {
        c.args[0].value for c in calls if _called_name(c) in ("getenv", "get") and c.args
        and isinstance(c.args[0], ast.Constant) and isinstance(c.args[0].value, str)
        and isinstance(c.func, ast.Attribute) and (c.func.attr == "getenv" or (
            isinstance(c.func.value, ast.Attribute) and c.func.value.attr == "environ"))}
    return sorted(subscripts | getters)


def _first_unseeded(files: list[tuple[Path, ast.Module]], root: Path) -> str | None:
    """Where the first call of an unseeded random generator is: "random.choice() in server/env.py, line 12"."""
    for path, tree in files:
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and _called_name(node) in RANDOM_CALLS and _receiver(node) in RANDOM_MODULES:
                where = path.relative_to(root) if root in path.parents else path.name
                return f"{_receiver(node)}.{_called_name(node)}() in {where}, line {node.lineno}"
    return None


def hazards(files: list[tuple[Path, ast.Module]], root: Path, randomness: str) -> list[str]:
    """One note per kind of hazard found in the modules; `randomness`: what unseeded randomness affects in a
    source of this kind."""
    trees = [tree for _, tree in files]
    calls = [n for tree in trees for n in ast.walk(tree) if isinstance(n, ast.Call)]
    names = {_called_name(c) for c in calls}
    found: list[str] = []
    if names & DOWNLOADS or {_receiver(c) for c in calls} & NETWORK_MODULES:
        found.append("downloads data at load time (a dataset hub or the network): this machine may not reach it; "
                     "pass env_args that point at local data, or vendor the data with --data")
    if names & KEY_CLIENTS:
        found.append("builds an API client or judge that needs an API key (e.g. OPENAI_API_KEY) at load time")
    if names & SANDBOXES:
        found.append("uses Prime Sandboxes, which need a Prime API key and network access")
    if variables := _variables(trees, calls):
        found.append(f"reads environment variables: {', '.join(variables)}")
    seeded = any(_called_name(c) in ("seed", "Random", "default_rng") and (c.args or c.keywords) for c in calls)
    unseeded = _first_unseeded(files, root)
    if unseeded and not seeded:
        found.append(f"uses unseeded randomness ({unseeded}): {randomness}")
    if any(_called_name(c) == "shuffle" and _receiver(c) not in RANDOM_MODULES and not c.args
           and not any(k.arg == "seed" for k in c.keywords) for c in calls):
        found.append("shuffles a dataset without a seed (`.shuffle()`): task indices then name different rows "
                     "in each process and each run; pass shuffle(seed=...) so `index` stays reproducible")
    return found


# What unseeded randomness affects, by the kind of source.
DATASET_RANDOMNESS = ("if it builds the dataset, each process sees different rows (the server owns the dataset "
                      "and picks rows by index, so episodes stay consistent)")
EPISODE_RANDOMNESS = ("the same reset seed may not give the same episode; seed the generator from the seed reset "
                      "is given for reproducible episodes")


def source_hazards(source: Path, randomness: str = EPISODE_RANDOMNESS) -> list[str]:
    """The hazards of every module of a source (a file or a folder)."""
    files = [(path, tree) for path in python_files(source) if (tree := parse(path)) is not None]
    return hazards(files, source if source.is_dir() else source.parent, randomness)
