"""Load an environment as the server will, and say what fails: where, why, and what to do.

`openenv-gym venvs check ENV` runs this in the environment's venv, and `openenv-gym import` asks it of what it just
wrote, so that what `serve` would fail on (a module that cannot be imported as the server imports it, a dependency
missing, an entry that is not there, code that raises as it loads) fails the import instead, naming the file and
the line of the environment's own code.
"""

from __future__ import annotations

import traceback
from pathlib import Path
from typing import Any

from openenv_gym.adapters import load_factory, runs_programs
from openenv_gym.adapters.reached import ReachedHosts, causes
from openenv_gym.errors import UnmetNeedError
from openenv_gym.manifests import find_manifest
from openenv_gym.manifests.schema import BaseManifest


def loading_problem(env: str) -> dict[str, Any] | None:
    """None if the environment `env` (a name, gym id or folder) loads and describes itself as the server's worker
    would; else {"error", "where", "code", "hint"}, and "need" where what fails is no fault of its code: it needs
    what cannot be reached from here (the network as it loads, a value of its framework's config that is not set;
    or, having needs recorded already, it fails without them)."""
    manifest, recorded = None, []
    watch = ReachedHosts.install()
    try:
        manifest = find_manifest(env)
        recorded = list(getattr(manifest, "needs", None) or [])
        if recorded:  # (recorded needs keep its server from being made: it is made here, to see what else fails)
            manifest = manifest.model_copy(update={"needs": []})
        load_factory(manifest, sandboxed=False).describe()  # (whether this machine can sandbox it is not the code's)
    except (Exception, SystemExit) as exc:  # code that calls sys.exit() as it loads stops the server too
        problem = _problem(exc, manifest)
        unmet = next((cause for cause in causes(exc) if isinstance(cause, UnmetNeedError)), None)
        need = _need(unmet, watch.unreachable(exc), recorded, problem)
        said_already = unmet is not None and bool(unmet.details) and all(  # (every key it names is named there)
            any(detail in said for said in recorded) for detail in unmet.details)
        return problem | ({"need": need} if need else {}) | ({"recorded": True} if said_already else {})
    return None


def _need(unmet: UnmetNeedError | None, hosts: dict[str, str], recorded: list[str], problem: dict[str, Any]) \
        -> str | None:
    """What a failed load needs that cannot be reached from here, if that is why it failed."""
    if unmet is not None:
        return str(unmet)
    if hosts:
        named = "; ".join(f"{host} ({how})" if host else f"what `{how}` fetches (it failed)"
                          for host, how in hosts.items())
        return f"network access as it loads, which is not reachable here: {named}"
    if recorded:
        return f"what it needs met before it loads: here it fails as it loads with {problem['error'][:500]}"
    return None


def sandbox_report(manifest: BaseManifest) -> str | None:
    """Whether the programs of this environment's episodes can run sandboxed here (None: it runs none)."""
    if not runs_programs(manifest):
        return None
    from openenv_gym.sandbox import refusal

    return refusal(manifest.name) or f"{manifest.name}'s episodes run their programs in a sandbox each, here"


def _innermost(exc: BaseException) -> BaseException:
    """The exception the chain began with (ours wrap the environment's own with `raise ... from`)."""
    while exc.__cause__ is not None:
        exc = exc.__cause__
    return exc


def _problem(exc: BaseException, manifest: BaseManifest | None) -> dict[str, Any]:
    origin = _innermost(exc)
    where, code = "", ""
    vendored = getattr(manifest, "vendored", None)
    folder = (vendored or manifest.folder).resolve() if manifest is not None else None  # as in the source
    for frame in reversed(traceback.extract_tb(origin.__traceback__)):
        path = Path(frame.filename).resolve()
        if folder is not None and folder in path.parents:
            where, code = f"{path.relative_to(folder)}, line {frame.lineno}", (frame.line or "").strip()
            break
    error = f"{type(origin).__name__}: {origin}" if origin is not exc else f"{type(exc).__name__}: {exc}"
    return {"error": error, "where": where, "code": code, "hint": _hint(origin, manifest)}


def _hint(exc: BaseException, manifest: BaseManifest | None) -> str:
    vendored = getattr(manifest, "vendored", None)
    top = exc.name.split(".")[0] if isinstance(exc, ImportError) and exc.name else None
    ours = top is not None and vendored is not None and ((vendored / f"{top}.py").exists() or (vendored / top).is_dir())
    if isinstance(exc, ModuleNotFoundError) and top is not None and not ours:
        return (f"the module {exc.name!r} is not installed: add the distribution that provides it to the "
                "source's dependencies (pyproject.toml or requirements.txt) and import it again")
    if isinstance(exc, ImportError) and top is not None and not ours:  # `from google import genai`, google being there
        return (f"the installed module {exc.name!r} lacks what the source imports from it: add the distribution "
                "that provides it (a namespace package's part, say), or the version that has it, to the source's "
                "dependencies (pyproject.toml or requirements.txt) and import it again")
    if isinstance(exc, ImportError):
        package = getattr(manifest, "package", None)
        loaded = f"as the package {package!r}" if package else "as top-level modules of its folder"
        return (f"the server loads the source {loaded}, and this import does not work that way: make it work as "
                "the project's own runner loads it (declare the package in pyproject.toml's package-dir, say), "
                "and import it again")
    return "the environment's code fails as it loads: fix it (or tell its authors), and import it again"
