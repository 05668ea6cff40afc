"""The server-side environment interface: what every shipped env and every adapter implements.

One instance serves one session. The server knows nothing else about an environment: it calls
`describe()` on the factory once, then `reset`, `step` and `close` on each instance.

Write the methods as `async def`. Code that blocks (CPU-heavy work, blocking I/O) may instead be
written as plain `def`: the server then runs that method in a worker thread, off the event loop.
An async method that never awaits completes inline, with no task and no thread: the fast path.
The server enforces the step limit (`max_steps`, or the reset option of that name), so an environment
need not count its steps.

Reset options: an environment that declares the ones it reads (`reset_options`) has any other refused by the
server, with the list of those it reads (the server's own, `max_steps`, `episode_id` and `group`, are always
taken); one that declares none gets every option as given. A seed is reset's own argument, never an option.

GRPO groups: an environment that scores G episodes of one task together defines the classmethod (on a factory
object: the method) `score_group(episodes: list[FinishedEpisode]) -> list[float | dict]`, sync or async, one
score per episode in the order given (a dict: {"reward": r, ...what goes in that member's info}). Each episode
carries its rewards' sum, its last info and `record`, what `episode_record()` returned when it ended.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Protocol

from openenv_gym.episode.options import DESCRIBED_AS, vocabulary
from openenv_gym.episode.results import Action, ResetResult, StepResult
from openenv_gym.errors import EnvError


@dataclass(frozen=True)
class CodeRun:
    """How a command run_code ran ended: its exit code (-N: signal N killed it), the tails of its output."""

    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool = False  # killed past its timeout
    out_of_memory: bool = False  # its episode's memory bound killed a process of it


class Environment:
    """Base class of server-side environments. Subclasses set `name` and implement reset and step."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    action_kind: ClassVar[Literal["text", "tools"]] = "text"
    max_steps: ClassVar[int | None] = None  # episodes are truncated after this many steps (None: no limit)
    reset_options: ClassVar[frozenset[str] | None] = None  # the reset options it reads (None: it takes any)

    @classmethod
    def describe(cls) -> dict[str, Any]:
        """What clients learn about this environment: shown by /info and used to build gym spaces."""
        described = {
            "name": cls.name or cls.__name__,
            "description": cls.description or (cls.__doc__ or "").strip().split("\n")[0],
            "action": cls.action_kind,
            "tools": [],
            "max_steps": cls.max_steps,
        }
        if cls.reset_options is not None:
            described[DESCRIBED_AS] = vocabulary(cls.reset_options)
        return described

    async def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> ResetResult:
        raise NotImplementedError

    async def step(self, action: Action) -> StepResult:
        raise NotImplementedError

    async def close(self) -> None:
        """Release what the instance holds. Called once when its session ends."""

    def refusal(self, action: Action) -> str | None:
        """Why this environment refuses `action` before stepping, for front ends whose protocol refuses such
        actions (OpenEnv's validates them against the environment's Action model); None: it takes it, or answers
        it with an invalid-action observation when it steps. Called on the event loop: keep it cheap."""
        return None

    def episode_record(self) -> Any:
        """What `score_group` gets of the episode that just ended (`FinishedEpisode.record`): called when an
        episode of a group ends, before anything else happens to the instance. Keep it cheap."""
        return None

    async def run_code(self, argv: list[str], *, stdin: str = "", files: dict[str, str] | None = None,
                       timeout: float = 60.0) -> CodeRun:
        """Run a command (code a model wrote, say) in this episode's sandbox, in its working directory, after
        writing `files` there (name -> text) and giving it `stdin`; killed past `timeout` seconds. "python" is the
        environment's own interpreter. Files stay for the episode's next commands; the sandbox is renewed when the
        episode ends. Only for environments whose manifest says `runs_code = true` (adapters/code.py)."""
        raise EnvError(f"{type(self).__name__} runs code, so its manifest must say so: add runs_code = true to its "
                       "openenv.toml (each episode then runs its commands in a sandbox of its own)")

    def extras(self) -> dict[str, Any]:
        """What `state()` tells of the episode beyond its id and step count (a JSON object; empty: nothing).
        Called on the event loop: keep it cheap."""
        return {}


class EnvironmentFactory(Protocol):
    """What an adapter gives the server: `factory()` makes one Environment per session, `describe()` tells
    clients about it. An Environment subclass is its own factory. A factory with a task catalog also has
    `async catalog()` (splits with task counts) and `async tasks(split, start, stop)`."""

    def __call__(self) -> Environment: ...

    def describe(self) -> dict[str, Any]: ...
