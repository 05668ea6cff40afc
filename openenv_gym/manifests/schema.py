"""The manifest (`openenv.toml`) schema: one pydantic model per kind, read and validated in one place.

    name = "echo"            # gym id openenv/echo
    kind = "python"          # which adapter runs it: python | ors | verifiers | openenv | awm | agent | harbor | nemo
    entry = "echo:EchoEnv"   # module (inside the folder) : attribute

A new kind (openenv, awm) is a new model here, added to `Manifest`, and an adapter in adapters/.
"""

from __future__ import annotations

import difflib
import re
import tomllib
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, TypeAdapter, ValidationError, field_validator

from openenv_gym.errors import OpenEnvGymError
from openenv_gym.protocol.ors import DEFAULT_MAX_STEPS
from openenv_gym.sandbox.policy import Network, SandboxPolicy, allowed_address

MANIFEST_FILE = "openenv.toml"
VENDOR_DIR = "vendor"  # where an import puts the source's own code
NAME_PATTERN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


class ManifestError(OpenEnvGymError):
    """An openenv.toml is missing or malformed."""


class BaseManifest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    id_prefix: ClassVar[str] = ""  # gym id: openenv/<id_prefix><name>

    kind: str
    name: str = Field(pattern=rf"^{NAME_PATTERN.pattern}$")
    entry: str = Field(pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
    description: str = ""
    deterministic: bool = False  # same seed and actions give the same episode (checked by check_env)
    dependencies: list[str] = []  # installed in a virtual environment of the env's own (none: runs anywhere)
    # Versions the dependencies are installed at when they can be (the project's own lock file, say); a set that
    # cannot be satisfied with them is installed without them.
    constraints: list[str] = []
    # npm packages its programs run (a CLI agent: "@openai/codex@0.171.0"), installed in its venv, their commands first
    # on the programs' PATH
    npm: list[Annotated[str, Field(pattern=r"^(@[a-z0-9][\w.-]*/)?[a-z0-9][\w.-]*(@[\w.^~<>=*|-]+)?$")]] = []
    # The Python series its venv is made with ("3.13"; none: openenv_gym's own), and, where the machine's newest of it
    # is older than the project accepts, the version its packages are resolved for (the check relaxed: pythons.py)
    python: str | None = Field(default=None, pattern=r"^3\.\d+$")
    python_resolve_as: str | None = Field(default=None, pattern=r"^3\.\d+\.\d+$")
    folder: Path = Field(exclude=True)

    @property
    def gym_id(self) -> str:
        return self.gym_id_of(self.name)

    @classmethod
    def gym_id_of(cls, name: str) -> str:
        """The gym id of an environment of this kind named `name`."""
        prefix = "" if name.startswith(cls.id_prefix) else cls.id_prefix  # --name ors-x: openenv/ors-x
        return f"openenv/{prefix}{name}"

    @property
    def runs_programs(self) -> bool:
        """Whether its episodes run programs (each in a sandbox of its own, unless served --no-sandbox)."""
        return False

    def served_with(self, engine: str) -> BaseManifest:
        """The manifest served with container engine `engine` (serve --engine): only Harbor tasks have images."""
        raise ManifestError(f"{self.name}: --engine is for Harbor tasks and OpenEnv projects imported into images; "
                            f"a {self.kind} environment has none")


class AgentLimits(BaseModel):
    """What one episode's program may use; past a limit it is killed and only its episode ends."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    turn_timeout: float = Field(300.0, gt=0)  # seconds between an answer and its next model request (or its exit)
    cpu_seconds: PositiveInt = 600  # per process
    memory_mb: PositiveInt = 4096  # all its processes together (without a control group: each one's data)
    output_mb: PositiveInt = 16  # the largest file it may write, its stdout and stderr included
    open_files: PositiveInt = 1024  # per process
    processes: PositiveInt = 256  # at once, all it starts included
    disk_mb: PositiveInt = 512  # its working directory, and its /tmp apart


class NetworkAllow(BaseModel):
    """`network = {allow = ["pypi.org:443", ...]}`: the session's model endpoint, and these hosts' ports (Harbor's
    allowlist), reached through the server; nothing else."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    allow: list[str] = Field(min_length=1)

    @field_validator("allow")
    @classmethod
    def _addresses(cls, allow: list[str]) -> list[str]:
        for entry in allow:
            allowed_address(entry)  # (its ValueError says what is wrong)
        return allow


def sandbox_network(network: Network | NetworkAllow) -> dict[str, Any]:
    """A manifest's `network` as SandboxPolicy's arguments."""
    if isinstance(network, NetworkAllow):
        return {"network": "model", "allow": tuple(network.allow)}
    return {"network": network}


def sandbox_policy(network: Network | NetworkAllow, limits: AgentLimits, folder: Path) -> SandboxPolicy:
    """The sandbox of an episode that runs programs or commands under these `limits`, reading its env's folder."""
    return SandboxPolicy(**sandbox_network(network), processes=limits.processes, memory_bytes=limits.memory_mb << 20,
                         cpu_seconds=limits.cpu_seconds, open_files=limits.open_files,
                         file_bytes=limits.output_mb << 20, disk_bytes=limits.disk_mb << 20, readable=(str(folder),))


class PythonManifest(BaseManifest):
    """An environment written against openenv_gym's own interface; its modules sit in the folder. One that runs
    code (the commands a model writes, with Environment.run_code) says so: its episodes run it in a sandbox each,
    with `network` and `limits` as an agent's (its default network: none)."""

    kind: Literal["python"] = "python"
    runs_code: bool = False
    network: Network | NetworkAllow = "none"
    limits: AgentLimits = AgentLimits()

    @property
    def runs_programs(self) -> bool:
        return self.runs_code


class ImportedManifest(BaseManifest):
    """What `openenv-gym import` writes: the source's code vendored in `source`, with where it came from."""

    source: str = VENDOR_DIR
    source_hash: str = ""
    imported_from: str = ""
    # The package the vendored folder is loaded as (its modules are then `package.module`, and relative imports
    # between them work); None: its modules are top-level ones.
    package: str | None = Field(default=None, pattern=r"^[A-Za-z_]\w*$")

    @property
    def vendored(self) -> Path:
        return self.folder / self.source


class OrsManifest(ImportedManifest):
    """An ORS / OpenReward Environment class (entry: module:Class)."""

    id_prefix: ClassVar[str] = "ors-"
    kind: Literal["ors"]
    max_steps: PositiveInt = DEFAULT_MAX_STEPS


class VerifiersManifest(ImportedManifest):
    """A Verifiers environment: classic (entry: module:load_environment) or v1 (entry: package:TasksetClass); or a
    v1 env server someone runs ("remote": env_args name its address and taskset)."""

    id_prefix: ClassVar[str] = "verifiers-"
    kind: Literal["verifiers"]
    api: Literal["classic", "v1", "remote"] = "classic"
    env_args: dict[str, Any] = {}  # arguments of load_environment(), or v1: the taskset config's fields
    # v1: the harness of agents that name none, where the taskset ships none (Verifiers' own default is bash)
    harness: str = "null"
    max_tasks: PositiveInt = 1_000  # v1: the tasks offered by a taskset that never ends (a seed chooses among them)
    network: Network | NetworkAllow = "model"  # v1: its runtimes' sandboxes' (what their programs reach: see agent)
    # gym.make's keyword arguments that are its env_args: gym.make(id, address=...) is gym.make(id, env_args=
    # {"address": ...}) (openenv/verifiers-remote's)
    make_args: list[str] = []

    @property
    def runs_programs(self) -> bool:
        return self.api == "v1"


MODEL = r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$"  # "module:Class"


IMAGE_DESCRIPTION = "image.json"


class ProjectImage(BaseModel):
    """A project's image: the tag it was built with, its id (its exported files: rootfs.py), where its server
    listens inside. What its server says it serves (/schema, /metadata, its tools), read at import, is in the
    environment's folder (IMAGE_DESCRIPTION)."""

    tag: str
    image_id: str
    port: PositiveInt = 8000


class OpenEnvManifest(ImportedManifest):
    """An OpenEnv environment project (entry: module:EnvironmentClass, action: module:ActionClass)."""

    kind: Literal["openenv"]
    action: str = Field(pattern=MODEL)  # the Action model its server validates with
    # the other models its server publishes at /schema (None: the environment class's own generic arguments, or
    # OpenEnv's base models)
    observation: str | None = Field(default=None, pattern=MODEL)
    state: str | None = Field(default=None, pattern=MODEL)
    reset_observation: str | None = Field(default=None, pattern=MODEL)
    # The module of the project's server app (openenv.yaml's `app`), imported before the environment, as the
    # project's runner imports it first: what it sets up at import (sys.path entries, say) the environment needs.
    app: str | None = Field(default=None, pattern=r"^[A-Za-z_][\w.]*$")
    # What the project's server makes each session's environment with (create_app's first argument, when it is a
    # factory that configures the class, from environment variables say); None: the entry class itself.
    factory: str | None = Field(default=None, pattern=MODEL)
    max_steps: PositiveInt | None = None  # OpenEnv episodes end when the env says done; a limit is optional
    # Its sync reset/step are quick and never block: run them on the event loop (as async overrides would run),
    # not in a thread. A thread hop per call costs more than a quick env's step; a blocking one would stall
    # every session of the worker, so this is the importer's choice (--inline-sync), never a guess.
    inline_sync: bool = False
    # Served from its image (server/Dockerfile, built at import by `engine`): each session runs the project's own
    # server in a sandbox over the image's files; None: the environment runs in the worker, in a venv.
    engine: Literal["docker", "podman"] | None = None
    image: ProjectImage | None = None

    @property
    def runs_programs(self) -> bool:
        return self.image is not None

    def served_with(self, engine: str) -> OpenEnvManifest:
        """Its image taken from `engine`'s store, where it was imported into one."""
        if self.image is None:
            return self if engine == "none" else super().served_with(engine)  # type: ignore[return-value]
        if engine == "none":
            raise ManifestError(f"{self.name} is served from its image, built by {self.engine}: serve it with "
                                "--engine docker or podman, or import it again with --engine none (in a venv)")
        return self.model_copy(update={"engine": engine})


class AwmRewards(BaseModel):
    """The reward of an AWM episode's outcome (OpenEnv's port uses these values too)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    complete: float = 1.0  # the verifier says the task is done
    incomplete: float = 0.1  # it says not, or the episode ended without a final answer
    format_error: float = -1.0  # an action that names no tool, an unknown tool, or arguments that do not fit


class AwmManifest(ImportedManifest):
    """Agent World Model tool worlds (worlds/<scenario>/: app.py, template.db, verify_<task>.py)."""

    id_prefix: ClassVar[str] = "awm-"
    kind: Literal["awm"]
    entry: str = "worlds:index"  # where the worlds are listed: worlds/index.json
    source: str = "worlds"
    max_steps: PositiveInt = 30  # AWM's own max_iterations
    rewards: AwmRewards = AwmRewards()
    max_loaded: PositiveInt = 16  # scenario apps a worker keeps loaded (the least recently used is dropped)
    verifier_timeout: float = Field(20.0, gt=0)  # seconds of wall clock (and of CPU) a verifier may take


class HarborManifest(ImportedManifest):
    """Harbor task packages (tasks/<key>/: task.toml, instruction.md, environment/, tests/, solution/; their records
    in tasks/index.json). Each episode is one trial in a sandbox of its own, played with the tools bash and submit."""

    id_prefix: ClassVar[str] = "harbor-"
    kind: Literal["harbor"]
    entry: str = "tasks:index"
    source: str = "tasks"
    max_steps: PositiveInt = 200  # tool calls an episode (a step of a multi-step task) may make; then it is verified
    output_chars: PositiveInt = 16_384  # of a command's output, in its observation (its end kept)
    command_timeout: float = Field(600.0, gt=0)  # seconds a bash call may take at most (its `timeout` is bounded so)
    # who plays: the client, stepping bash and submit; or "bash", the built-in agent program inside the trial, each of
    # its model requests a step (the reset option harness chooses per episode)
    harness: Literal["client", "bash"] = "client"
    harness_turns: PositiveInt = 50  # model requests the built-in agent program makes at most per step of a task
    limits: AgentLimits = AgentLimits()
    # the container engine that built the tasks' images (each episode's sandbox over its image's files); None: the
    # images are emulated over the host's root
    engine: Literal["docker", "podman"] | None = None

    @property
    def runs_programs(self) -> bool:
        return True

    def served_with(self, engine: str) -> HarborManifest:
        """Its images taken from `engine`'s store ("docker", "podman"), where they were imported into images; "none"
        where they were emulated."""
        if (engine == "none") != (self.engine is None):
            raise ManifestError(
                f"{self.name}: its tasks were imported into images of {self.engine}'s: serve them with --engine "
                f"docker or podman (the one holding the images: docker save IMAGE | podman load), or import again "
                f"with --engine none" if self.engine else
                f"{self.name}: its tasks' images were emulated at import (no engine answered, or --engine none): "
                f"import again with --engine {engine} to play them in images")
        return self if engine == "none" else self.model_copy(update={"engine": engine})


NEMO_ROW_INPUT = "responses_create_params"  # a NeMo Gym dataset row's Responses request: its input and tools


class NemoManifest(ImportedManifest):
    """A NeMo Gym resource server (vendor/resources_servers/<name>/, its datasets in data/): its app loaded once per
    worker and called through ASGI, one cookie jar per episode. `entry` is its server class; `protocol` says whether
    its episodes are tool calls answered by its routes and scored by /verify ("resources"), or /reset and /step
    ("gymnasium")."""

    id_prefix: ClassVar[str] = "nemo-"
    kind: Literal["nemo"]
    protocol: Literal["resources", "gymnasium"] = "resources"
    instance: str  # the server instance's name in its config (NeMo names its session cookie after it)
    server_config: dict[str, Any] = {}  # the instance's config fields, as its YAML gives them
    splits: dict[str, str] = Field(min_length=1)  # split (the dataset's name: example, train, ...) -> its JSONL file
    needs: list[str] = []  # what it needs that cannot be reached from here: its resets are refused, saying so
    # the model servers its config calls (config key -> their name: judge_model_server -> judge_model): answered by
    # the judge endpoint the server is given, else its resets are refused
    model_servers: dict[str, str] = {}
    # model turns (gymnasium: steps) an episode may take, as its paired agent bounds them; then verified, truncated
    max_steps: PositiveInt = 100
    # its paired agent simulates the tools' results (NeMo's tool_simulation_agent): an episode is the model's one reply,
    # verified as it is, its calls never made and no session seeded
    simulated_tools: bool = False


class AgentManifest(BaseManifest):
    """Any program that calls a model, stepped one model request at a time through the model endpoint.

    Either `command` (argv; "python" is the env's own interpreter) or `entry` (module:function, called with the
    task, the base URL, the API key and the model, in a process forked from a warm one) runs once per episode,
    in a temporary working directory of its own. The task's prompt reaches a command on its argv or stdin
    (`task_input`) and in OPENENV_PROMPT (OPENENV_PROMPT_JSON: as a JSON string), and the whole task (its answer
    left out) in OPENENV_TASK. The reward is `reward`'s
    (module:function of the episode's trace, in the env's folder or one of openenv_gym.adapters.agent.rewards), else
    what the program printed last, as JSON. `npm` packages (a CLI agent) and `environ` make a CLI an environment in a
    few lines (servers/codex_agent, servers/claude_agent).
    """

    id_prefix: ClassVar[str] = "agent-"
    kind: Literal["agent"]
    entry: str | None = Field(default=None, pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")  # type: ignore[assignment]
    command: list[str] | None = Field(default=None, min_length=1)
    task_input: Literal["argv", "stdin"] = "argv"
    reward: str | None = Field(default=None, pattern=MODEL)
    # the tasks: a JSON-lines file (split "train"), or split name -> file; each line an object whose "prompt" the
    # program gets (hidden from it: "answer")
    tasks: str | dict[str, str] = {}
    model: str = "policy"  # the model name the program must ask for (given to it as OPENAI_MODEL)
    # more environment variables for its program; "${NAME}" in them, and in `command`, is the program's NAME
    # (OPENAI_BASE_URL, ANTHROPIC_API_KEY, HOME, PWD: its working directory, ...)
    environ: dict[str, str] = {}
    preload: list[str] = []  # modules the warm process imports once, so that an entry's episodes start at once
    limits: AgentLimits = AgentLimits()
    # its sandbox's: none, its session's model endpoint only, the host's (public), or {allow = ["host:port", ...]}
    network: Network | NetworkAllow = "model"

    def model_post_init(self, _: Any) -> None:
        if (self.entry is None) == (self.command is None):
            raise ValueError("an agent environment needs exactly one of `command` (argv) and `entry` "
                             "(module:function)")

    @property
    def runs_programs(self) -> bool:
        return True


Manifest = Annotated[PythonManifest | OrsManifest | VerifiersManifest | OpenEnvManifest | AwmManifest
                     | AgentManifest | HarborManifest | NemoManifest,
                     Field(discriminator="kind")]
KINDS: dict[str, type[BaseManifest]] = {"python": PythonManifest, "ors": OrsManifest,
                                        "verifiers": VerifiersManifest, "openenv": OpenEnvManifest,
                                        "awm": AwmManifest, "agent": AgentManifest, "harbor": HarborManifest,
                                        "nemo": NemoManifest}
_MANIFEST = TypeAdapter(Manifest)


def load_manifest(folder: Path | str) -> BaseManifest:
    """Read and validate FOLDER/openenv.toml; every problem is a ManifestError naming the file and the key."""
    folder = Path(folder).resolve()
    path = folder / MANIFEST_FILE
    try:
        data: dict[str, Any] = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ManifestError(f"{path} does not exist: an environment folder needs an {MANIFEST_FILE}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ManifestError(f"{path} is not valid TOML: {exc}") from None
    data.setdefault("kind", "python")
    if data["kind"] not in KINDS:
        raise ManifestError(f"{path}: unknown kind {data['kind']!r}; known kinds: {', '.join(KINDS)}")
    try:
        return _MANIFEST.validate_python({**data, "folder": folder})
    except ValidationError as exc:
        raise ManifestError(f"{path}: {_explain(exc, KINDS[data['kind']])}") from None


def _explain(error: ValidationError, model: type[BaseManifest]) -> str:
    known = sorted(set(model.model_fields) - {"folder"})
    problems = []
    for item in error.errors():
        key = ".".join(str(part) for part in item["loc"][1:])  # loc[0] is the kind's tag
        if item["type"] == "extra_forbidden":
            close = difflib.get_close_matches(key, known, n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"known keys: {', '.join(known)}"
            problems.append(f"unknown key {key!r} ({hint})")
        else:
            problems.append(f"key {key!r}: {item['msg']}" if key else item["msg"])
    return "; ".join(problems)
