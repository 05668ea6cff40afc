"""`openenv-gym doctor`: what this machine can do, one line each. The sandbox a server started here would have
(asked of a process in the user namespace `serve` would make, for an ordinary user), its control groups, the tools
that some kinds need, and which kinds can be served here as they are and which need a flag."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence

from openenv_gym.manifests.installer import uv_binary
from openenv_gym.sandbox import engines as engines_here
from openenv_gym.sandbox import mode, userns
from openenv_gym.sandbox.support import INSTALL, NO_SANDBOX

PROBE_TIMEOUT = 30.0  # seconds a tool may take to say its version
WIDTH = 12  # of a line's name
TOOLS = (  # (name, its version command, what needs it, how to install it)
    ("bubblewrap", ["bwrap", "--version"], "the sandbox of every episode that runs programs", INSTALL),
    ("node", ["node", "--version"], "CLI agents (npm packages)", "install Node.js 20 or newer"),
    ("npm", ["npm", "--version"], "CLI agents (npm packages)", "install npm, with Node.js"),
    ("uv", ["uv", "--version"], "building environments' venvs (pip stands in, slower)", "pip install uv"),
    ("chromium", ["chromium", "--version"], "the web page's tests", "apt-get install chromium"),
)
SANDBOXED_KINDS = ("agent", "harbor", "verifiers (v1)", "python (runs_code)")
OTHER_KINDS = ("python", "ors", "verifiers (classic)", "openenv", "awm", "nemo")


def add_doctor(commands: argparse._SubParsersAction) -> None:
    doctor = commands.add_parser("doctor", help="say what this machine can do: its sandbox, its tools, the kinds it "
                                                "serves",
                                 description=__doc__)
    doctor.add_argument("--json", action="store_true", help="print the findings as one JSON object")
    doctor.set_defaults(run=_run_doctor)


def server_facts() -> dict[str, object]:
    """mode.facts() of a server started here: this process's as root; else a process's in the user namespace
    `serve` starts an ordinary user's server in."""
    if os.geteuid() == 0:
        return mode.facts()
    probe = subprocess.run(userns.command([sys.executable, "-m", "openenv_gym.sandbox.mode"]), capture_output=True,
                           text=True, timeout=PROBE_TIMEOUT)
    if probe.returncode != 0:
        reason = probe.stderr.strip().splitlines()[-1:] or [f"exit code {probe.returncode}"]
        return {"sandbox": None, "reason": f"the probe of a server's sandbox failed: {reason[0]}", "cgroups": None,
                "delegated": False, "userns_refused": None}
    return json.loads(probe.stdout)


def tool_version(command: Sequence[str]) -> str | None:
    """What `command` says its version is, or None where it is missing or does not answer."""
    if shutil.which(command[0]) is None:
        return None
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=PROBE_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired):
        return None
    said = (done.stdout.strip() or done.stderr.strip()).splitlines()
    return said[0] if done.returncode == 0 and said else None


def findings() -> dict[str, object]:
    facts = server_facts()
    tools = {name: tool_version([uv_binary() or "uv", *command[1:]] if name == "uv" else command)
             for name, command, _, _ in TOOLS}
    sandboxed = "served" if facts["sandbox"] else f"need {NO_SANDBOX} (no sandbox here)"
    engines = {}
    for name in engines_here.ENGINES:
        found = engines_here.probe(name)
        engines[name] = {"version": found.version} if isinstance(found, engines_here.Engine) else {"missing": found}
    return {"sandbox": facts, "summary": mode.describe(facts), "tools": tools, "engines": engines,
            "kinds": {**dict.fromkeys(OTHER_KINDS, "served"), **dict.fromkeys(SANDBOXED_KINDS, sandboxed)}}


def lines(found: dict[str, object]) -> list[str]:
    """The report, one line each."""
    facts, summary = found["sandbox"], str(found["summary"])
    sandbox, bounds = summary.removeprefix("sandbox: ").split("; ", 1)
    if facts["userns_refused"]:  # type: ignore[index]
        sandbox += f" (the kernel refused a user namespace: {facts['userns_refused']})"  # type: ignore[index]
    report = [f"{'sandbox':{WIDTH}} {sandbox}", f"{'cgroups':{WIDTH}} {bounds}"]
    for name, _, needed_by, install in TOOLS:
        version = found["tools"][name]  # type: ignore[index]
        report.append(f"{name:{WIDTH}} " + (f"{version}" if version else f"missing: needed by {needed_by}; {install}"))
    engines: dict[str, dict[str, str]] = found["engines"]  # type: ignore[assignment]
    answering = [f"{name} {engine['version']}" for name, engine in engines.items() if "version" in engine]
    report.append(f"{'engine':{WIDTH}} " + ("; ".join(answering) + " (the first is the default)" if answering else
                                             "none: " + "; ".join(engine["missing"] for engine in engines.values())))
    kinds: dict[str, list[str]] = {}
    for kind, verdict in found["kinds"].items():  # type: ignore[attr-defined]
        kinds.setdefault(verdict, []).append(kind)
    report += [f"{'kinds':{WIDTH}} {verdict}: {', '.join(names)}" for verdict, names in kinds.items()]
    return report


def _run_doctor(args: argparse.Namespace) -> None:
    found = findings()
    if args.json:
        print(json.dumps(found))
        return
    print("\n".join(lines(found)))
