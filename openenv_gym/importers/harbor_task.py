"""A Harbor task package (`task.toml`, schema 1.0 to 1.4) read into the record our adapter plays (adapters/harbor/),
or refused with the key and why: what cannot be honoured here is refused at import, never at an episode's step.

    task.toml           [task] [metadata] [environment] [agent] [verifier] [solution] [[steps]]
    instruction.md      the prompt (single-step; a multi-step task's are steps/<name>/instruction.md)
    environment/        its Dockerfile (emulated: image.py) and the files it copies
    tests/test.sh       the verifier: writes /logs/verifier/reward.json or reward.txt
    solution/solve.sh   the oracle

Unknown keys are ignored, as Harbor ignores them; the old spellings load (`version` for `schema_version`,
`allow_internet` for `network_mode`, `memory = "2G"`).
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from openenv_gym.importers.harbor_engine import TaskImages
from openenv_gym.importers.harbor_image import Image, ImageRefusedError, read_image
from openenv_gym.manifests.harbor import TaskRefusedError, variables_missing
from openenv_gym.sandbox.mounts import own_folder
from openenv_gym.sandbox.overlay import resolved, system_folder
from openenv_gym.sandbox.policy import allowed_address

NetworkMode = Literal["public", "no-network", "allowlist"]
HARBOR_FOLDERS = ("/logs/agent", "/logs/verifier", "/logs/artifacts")  # Harbor's trial layout, inside
ALLOWED_HOST = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$")  # a named host (no wildcard, no CIDR)
PORTS = (443, 80)  # what an allowed host is reached on (Harbor's allowlists name hosts only)




class _Section(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class Network(_Section):
    network_mode: NetworkMode | None = None
    allowed_hosts: list[str] | None = None


class Healthcheck(_Section):
    command: str
    interval_sec: float = 5.0
    timeout_sec: float = 30.0
    start_period_sec: float = 0.0
    start_interval_sec: float = 5.0
    retries: int = 3


class Agent(Network):
    timeout_sec: float | None = None
    user: str | int | None = None


class Verifier(Network):
    timeout_sec: float = 600.0
    env: dict[str, str] = {}
    user: str | int | None = None
    environment_mode: Literal["shared", "separate"] | None = None
    environment: dict[str, Any] | None = None
    collect: list[dict[str, Any]] = []


class Environment(Network):
    docker_image: str | None = None
    cpus: float | None = Field(default=None, gt=0)
    memory_mb: int | None = Field(default=None, gt=0)
    storage_mb: int | None = Field(default=None, gt=0)
    os: str = "linux"
    gpus: int | None = None
    gpu_types: list[str] | None = None
    tpu: dict[str, Any] | None = None
    allow_internet: bool | None = None
    env: dict[str, str] = {}
    mcp_servers: list[dict[str, Any]] = []
    healthcheck: Healthcheck | None = None
    workdir: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _old_sizes(cls, data: Any) -> Any:
        """memory = "2G", storage = "10G" (the spellings before memory_mb and storage_mb)."""
        if isinstance(data, dict):
            for old, new in (("memory", "memory_mb"), ("storage", "storage_mb")):
                if isinstance(data.get(old), str) and new not in data:
                    data = {**data, new: _megabytes(data[old], old)}
        return data

    def resources(self) -> dict[str, float | int | None]:
        """What the task's containers may use: CPU cores' worth, memory and disk in MiB (None: the server's
        bounds)."""
        return {"cpus": self.cpus, "memory_mb": self.memory_mb, "storage_mb": self.storage_mb}


SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)i?B?\s*", re.I)
MEBIBYTES = {"K": 1 / 1024, "": 1 / 2**20, "M": 1, "G": 1024, "T": 2**20}  # (a bare number is bytes)


def _megabytes(size: str, key: str) -> int:
    found = SIZE.fullmatch(size)
    if found is None:
        raise ValueError(f"[environment].{key} = {size!r}: a size such as \"2G\" or \"512M\"")
    return max(int(float(found[1]) * MEBIBYTES[found[2].upper()]), 1)


class Step(_Section):
    name: str = Field(pattern=r"^[\w.-]+$")
    agent: Agent = Agent()
    verifier: Verifier = Verifier()
    min_reward: float | dict[str, float] | None = None
    healthcheck: Healthcheck | None = None
    artifacts: list[str | dict[str, Any]] = []


class TaskConfig(_Section):
    schema_version: str = "1.4"
    task: dict[str, Any] = {}
    agent: Agent = Agent()
    verifier: Verifier = Verifier()
    solution: dict[str, Any] = {}
    environment: Environment = Environment()
    steps: list[Step] = []
    multi_step_reward_strategy: Literal["mean", "final"] | None = None
    artifacts: list[str | dict[str, Any]] = []

    @model_validator(mode="before")
    @classmethod
    def _old_spelling(cls, data: Any) -> Any:
        if isinstance(data, dict) and "version" in data and "schema_version" not in data:
            data = {**data, "schema_version": str(data["version"])}
        return data


def read_task(folder: Path, images: TaskImages | None = None) -> dict[str, Any]:
    """The record of the task package in `folder`; TaskRefusedError with the key and why where it cannot run here.
    With `images`, its containers are images a container engine builds (harbor_engine.py); without, emulated."""
    path = folder / "task.toml"
    try:
        config = TaskConfig.model_validate(tomllib.loads(path.read_text()))
    except tomllib.TOMLDecodeError as exc:
        raise TaskRefusedError(f"task.toml is not valid TOML: {exc}") from None
    except ValidationError as exc:
        problem = exc.errors()[0]
        raise TaskRefusedError(f"task.toml key {'.'.join(map(str, problem['loc']))}: {problem['msg']}") from None
    _refuse_what_cannot_run(config, folder)
    side = _side(folder / "environment", config.environment, "[environment]", images)
    baseline = side["environment"]["network"]
    verifier = _verifier(folder, config, config.verifier, config.verifier, "[verifier]", config.artifacts, images)
    steps = [{"name": step.name, "min_reward": step.min_reward,
              "agent": _phase(step.agent, config.agent, baseline, f"[[steps]] {step.name}: agent"),
              "verifier": _verifier(folder, config, step.verifier, config.verifier,
                                    f"[[steps]] {step.name}: verifier", [*config.artifacts, *step.artifacts], images),
              "healthcheck": step.healthcheck.model_dump() if step.healthcheck else None}
             for step in config.steps]
    if not steps and not (folder / "instruction.md").is_file():
        raise TaskRefusedError("instruction.md is missing: a single-step task's prompt is its instruction.md")
    for step in steps:
        if not (folder / "steps" / step["name"] / "instruction.md").is_file():
            raise TaskRefusedError(f"steps/{step['name']}/instruction.md is missing: each step's prompt is there")
    if not steps and not (folder / "tests" / "test.sh").is_file() and verifier.get("separate") is None:
        raise TaskRefusedError("tests/test.sh is missing: it is the task's verifier")
    record = {
        "name": str(config.task.get("name") or folder.name), "schema_version": config.schema_version, **side,
        "agent": _phase(config.agent, Agent(), baseline, "[agent]"), "verifier": verifier,
        "solution": {"env": {str(k): str(v) for k, v in dict(config.solution.get("env") or {}).items()}},
        "has_solution": (folder / "solution" / "solve.sh").is_file() or any(
            (folder / "steps" / step["name"] / "solution" / "solve.sh").is_file() for step in steps),
        "steps": steps,
        "multi_step_reward_strategy": config.multi_step_reward_strategy or "mean",
    }
    missing = variables_missing(record)
    if missing is not None:
        raise TaskRefusedError(missing)
    return record


def _side(context: Path, environment: Environment, where: str, images: TaskImages | None = None) -> dict[str, Any]:
    """A container of the task's, as its sandbox makes it: the image emulated from `context` (a Dockerfile there),
    its workdir, its own folders, its files shown at the root, its environment and network; or its image built
    (`images`)."""
    if images is not None:
        return _built_side(context, environment, where, images)
    try:
        image = read_image(context, environment.docker_image)
    except ImageRefusedError as exc:
        raise TaskRefusedError(str(exc)) from None
    workdir = environment.workdir or image.workdir
    if workdir in (None, "/"):  # (Harbor's scripts refuse to run in /: a task without a WORKDIR gets Harbor's usual)
        workdir = "/app"
    image.copies = [(source, inside or workdir + "/" + source) for source, inside in image.copies]  # (seed files)
    writable, owned, shown = _writable(workdir, image)
    image.copies = [(source, inside) for source, inside in image.copies if [source, inside] not in shown]
    if owned:
        image.notes.append(f"{where}: it writes in the system's folders ({', '.join(owned)}): each episode writes in "
                           "an overlay of its own of them")
    return {"workdir": workdir, "writable": writable, "owned": owned, "shown": shown, "context": context.name,
            "resources": environment.resources(),
            "environment": {"env": {**image.env, **environment.env}, "network": _network(environment, where),
                            "healthcheck": environment.healthcheck.model_dump() if environment.healthcheck else None},
            "image": image.record(), "packages": image.packages, "notes": image.notes}


def _built_side(context: Path, environment: Environment, where: str, images: TaskImages) -> dict[str, Any]:
    """A container of the task's in its own image: the image's files, environment, user and entrypoint are its
    own (read when it is served: rootfs.py), only Harbor's folders are the sandbox's (/logs, /tests, /solution),
    and seed files (an image named, without a Dockerfile) go to the workdir at start, as Harbor uploads them."""
    tag, image_id = images.image(context, environment.docker_image, where)
    config = images.config(tag)
    seeds = [(str(path.relative_to(context)), "") for path in sorted(context.rglob("*"))
             if path.is_file() and path.name != ".gitkeep"] if not (context / "Dockerfile").is_file() else []
    workdir = environment.workdir or config.workdir or "/"
    return {"workdir": workdir, "writable": ["/logs", "/tests", "/solution"], "owned": [], "shown": [],
            "context": context.name, "tag": tag, "image_id": image_id, "resources": environment.resources(),
            "environment": {"env": {**config.env, **environment.env}, "network": _network(environment, where),
                            "healthcheck": environment.healthcheck.model_dump() if environment.healthcheck else None},
            "image": {"base": tag, "user": config.user or None, "copies": [(source, f"{workdir.rstrip('/')}/{source}")
                                                                         for source, _ in seeds],
                      "setup": [], "entrypoint": list(config.entrypoint) or None, "modes": {},
                      "healthcheck": config.healthcheck},  # (waited for first, as `docker compose up --wait` does)
            "packages": [], "notes": []}


def _verifier(folder: Path, config: TaskConfig, section: Verifier, fallback: Verifier, where: str,
              artifacts: list[str | dict[str, Any]], images: TaskImages | None = None) -> dict[str, Any]:
    """A verifier's settings; a separate one (environment_mode = "separate", or an environment of its own) with
    the container it runs in (built from tests/ where tests/ has a Dockerfile, else as the task's) and the
    artifacts it receives."""
    chosen = section if section.model_fields_set else fallback
    if section.environment_mode == "shared" and section.environment is not None:
        raise TaskRefusedError(f"{where} environment_mode = shared with an environment of its own: Harbor refuses it")
    if section.environment_mode is not None or section.environment is not None:  # (a step's own says, else the task's)
        mode, own = section.environment_mode or "separate", section.environment
    else:
        mode, own = fallback.environment_mode, fallback.environment
    if mode != "separate" and own is None:
        baseline = _network(config.environment, "[environment]")
        return _phase(chosen, Verifier(), baseline, where)
    environment = Environment.model_validate(own) if own is not None else config.environment
    context = folder / "tests" if (folder / "tests" / "Dockerfile").is_file() else folder / "environment"
    side = _side(context, environment, f"{where} environment", images)
    side["artifacts"] = [_artifact(entry, where) for entry in [*artifacts, "/logs/artifacts"]]
    if images is None:  # (in an image, the artifacts are written where it has them, through its overlays)
        side["writable"] += [found for _, inside in side["artifacts"] if (found := own_folder(inside)) not in
                             (None, "/tmp", *side["writable"])]
    return _phase(chosen, Verifier(), side["environment"]["network"], where) | {"separate": side}


def _artifact(entry: str | dict[str, Any], where: str) -> tuple[str, str]:
    """(where in the agent's container, where in the verifier's) of an artifacts entry."""
    source = entry if isinstance(entry, str) else str(entry.get("source", ""))
    destination = source if isinstance(entry, str) else str(entry.get("destination") or source)
    for path in (source, destination):
        if own_folder(path) is None:
            raise TaskRefusedError(f"{where} artifacts: {path} is not a path the trial's containers write")
    return source, destination


def _refuse_what_cannot_run(config: TaskConfig, folder: Path) -> None:
    environment = config.environment
    if environment.os.lower() != "linux":
        raise TaskRefusedError(f"[environment].os = {environment.os!r}: only Linux tasks run here")
    if environment.gpus or environment.gpu_types or environment.tpu:
        raise TaskRefusedError("[environment].gpus: this machine has no GPU (nor TPU) to give the task")
    if environment.mcp_servers:
        raise TaskRefusedError("[environment].mcp_servers: the task's MCP servers are services in containers of "
                               "their own, which are not played here")
    for compose in ("docker-compose.yaml", "docker-compose.yml", "compose.yaml"):
        if (folder / "environment" / compose).exists():
            raise TaskRefusedError(f"environment/{compose}: its services run in containers of a compose project, "
                                   "which are not played here")
    verifiers = [("[verifier]", config.verifier)] + [(f"[[steps]] {s.name}: verifier", s.verifier)
                                                     for s in config.steps]
    for where, verifier in verifiers:
        if verifier.collect:
            raise TaskRefusedError(f"{where} collect: commands in a service's container, which are not played "
                                   "here")


def _network(section: Network, where: str) -> dict[str, Any]:
    """A network policy as the sandbox takes it: {"mode", "allow": ["host:port", ...]}."""
    mode = section.network_mode
    if mode is None and isinstance(section, Environment) and section.allow_internet is not None:
        mode = "public" if section.allow_internet else "no-network"
    mode = mode or "public"
    if section.allowed_hosts and mode != "allowlist":
        raise TaskRefusedError(f"{where} allowed_hosts is given with network_mode = {mode!r}: Harbor refuses it too")
    allow = []
    for host in section.allowed_hosts or []:
        if not ALLOWED_HOST.match(host):
            raise TaskRefusedError(f"{where} allowed_hosts entry {host!r}: the sandbox allows named hosts, not "
                                   "wildcards or address ranges")
        allow += [f"{host}:{port}" for port in PORTS]
    for entry in allow:
        try:
            allowed_address(entry)
        except ValueError as exc:
            raise TaskRefusedError(f"{where} allowed_hosts: {exc}") from None
    return {"mode": mode, "allow": allow}


STRICTNESS = {"no-network": 0, "allowlist": 1, "public": 2}


def _phase(section: Agent | Verifier, fallback: Agent | Verifier, baseline: dict[str, Any], where: str) \
        -> dict[str, Any]:
    """A phase's settings (a step's own, else the task's), its network the baseline's unless it overrides it. An
    override can only narrow the network here: a program may leave its sandbox's network for an empty one, never
    reach more than the sandbox does (Harbor refuses such tasks too on providers without dynamic policies)."""
    chosen = section if section.model_fields_set else fallback
    network = baseline
    if chosen.network_mode is not None and chosen.network_mode != baseline["mode"]:
        network = _network(chosen, where)
        if network["mode"] != "no-network":
            raise TaskRefusedError(f"{where} network_mode = {network['mode']!r} over the environment's "
                                   f"{baseline['mode']!r}: a phase may only go without network here")
    fields = {"timeout": chosen.timeout_sec, "user": None if chosen.user is None else str(chosen.user),
              "network": network}
    if isinstance(chosen, Verifier):
        fields["env"] = dict(chosen.env)
    return fields


def _writable(workdir: str, image: Image) -> tuple[list[str], list[str], list[list[str]]]:
    """(the folders of its own a task's sandbox needs: Harbor's /logs, /tests and /solution, its workdir, where the
    image copies files; the paths in the system's folders it writes, each episode in an overlay of its own; the
    files the image puts at the root, shown read-only: [source, inside])"""
    shown = [[source, inside] for source, inside in image.copies if len(PurePosixPath(inside).parts) == 2
             and not os.path.lexists(inside)]
    for path, folder in image.writes:
        if not folder and len(PurePosixPath(path).parts) == 2 and own_folder(path) not in (None, "/tmp"):
            raise TaskRefusedError(f"the Dockerfile's RUN lines write {path}, a file at the root, which a sandbox "
                                   "cannot make; it needs a container engine")
    wanted = [(path, True) for path in ("/logs", "/tests", "/solution", workdir)]
    wanted += [(inside, False) for _, inside in image.copies if [_, inside] not in shown] + image.writes
    found: list[str] = []
    owned: list[str] = []
    for path, is_folder in wanted:
        where = path if is_folder else str(PurePosixPath(path).parent)
        folder = own_folder(where) or own_folder(os.path.realpath(where))  # (/var/lock: a link to /run/lock)
        if folder is None and system_folder(resolved(path)) is None:
            raise TaskRefusedError(f"{path}: the task writes there, in the host's root, which its sandbox only "
                                   "reads; it needs a container engine")
        if folder is None:
            if path not in owned:
                owned.append(path)
        elif folder != "/tmp" and folder not in found:
            found.append(folder)
    return found, owned, shown
