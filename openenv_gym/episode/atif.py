"""An agent program's own account of its model calls: the ATIF trajectory (Agent Trajectory Interchange Format,
v1.x, as Harbor's agents write it) it left at `agent/trajectory.json` in its working directory.

The final step's info carries its model calls in order, as `info["atif"]`:

    {"schema_version": "ATIF-v1.7", "calls": [{"step": 2, "calls": 1, "prompt_tokens": 118,
                                               "completion_tokens": 9}, ...]}

(a sub-agent's call names its trajectory too: "trajectory": its trajectory_id)
or {"error": "..."} for a trajectory that could not be read (adapters/agent/session.py reads the file). The
training export reconciles these counts turn by turn with the tokens the policy's model server gave
(rollout/export.py). A call is an agent step that called the model: steps copied from an earlier trajectory
(`is_copied_context`) and dispatches without a model call (`llm_call_count: 0`) are left out; a step of several
calls (`llm_call_count` > 1) sums theirs. A sub-agent's trajectory embedded in `subagent_trajectories` has its calls
among the others, in the order of their timestamps.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

TRAJECTORY = "agent/trajectory.json"  # where, in the program's working directory
MAX_BYTES = 16 << 20  # a longer trajectory is not read (its episode is then not reconciled: an error says so)
INFO_KEY = "atif"


class _Metrics(BaseModel):
    model_config = ConfigDict(extra="ignore")
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    prompt_token_ids: list[int] | None = None
    completion_token_ids: list[int] | None = None


class _Step(BaseModel):
    model_config = ConfigDict(extra="ignore")
    step_id: int
    source: Literal["system", "user", "agent"]
    timestamp: str | None = None
    metrics: _Metrics | None = None
    is_copied_context: bool | None = None
    llm_call_count: int | None = None


class _Trajectory(BaseModel):
    model_config = ConfigDict(extra="ignore")
    schema_version: str
    trajectory_id: str | None = None
    steps: list[_Step]
    subagent_trajectories: list[_Trajectory] | None = None


def model_calls(text: bytes) -> dict[str, Any]:
    """What `info["atif"]` holds for a trajectory file's bytes."""
    if len(text) >= MAX_BYTES:
        return {"error": f"{TRAJECTORY} is longer than {MAX_BYTES >> 20} MiB"}
    try:
        trajectory = _Trajectory.model_validate_json(text)
    except ValidationError as exc:
        problem = exc.errors()[0]
        where = ".".join(str(part) for part in problem["loc"]) or "the file"
        return {"error": f"{TRAJECTORY} is not an ATIF trajectory: {where}: {problem['msg']}"}
    if not trajectory.schema_version.startswith("ATIF-"):
        return {"error": f"{TRAJECTORY} is not an ATIF trajectory: its schema_version is "
                         f"{trajectory.schema_version!r}"}
    steps = list(_agent_steps(trajectory, None))
    if trajectory.subagent_trajectories:
        try:
            steps.sort(key=lambda pair: _when(pair[0]))
        except (TypeError, ValueError):
            return {"error": f"{TRAJECTORY} has sub-agents' steps without ISO 8601 timestamps: their calls cannot "
                             "be put in the order the model answered them"}
    return {"schema_version": trajectory.schema_version, "calls": [_call(*pair) for pair in steps]}


def _when(step: _Step) -> datetime:
    when = datetime.fromisoformat(step.timestamp or "")
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def _agent_steps(trajectory: _Trajectory, name: str | None) -> Iterator[tuple[_Step, str | None]]:
    """The steps that called the model, each with the sub-agent's trajectory it is in (None: the main one)."""
    for step in trajectory.steps:
        if step.source == "agent" and not step.is_copied_context and step.llm_call_count != 0:
            yield step, name
    for number, sub in enumerate(trajectory.subagent_trajectories or ()):
        yield from _agent_steps(sub, sub.trajectory_id or f"{name + '/' if name else ''}sub-agent {number}")


def _call(step: _Step, trajectory: str | None) -> dict[str, Any]:
    call: dict[str, Any] = {"step": step.step_id, "calls": step.llm_call_count or 1}
    if trajectory is not None:
        call["trajectory"] = trajectory
    metrics = step.metrics or _Metrics()
    for count, ids in (("prompt_tokens", metrics.prompt_token_ids), ("completion_tokens",
                                                                      metrics.completion_token_ids)):
        value = getattr(metrics, count)
        if value is None and ids is not None:
            value = len(ids)
        if value is not None:
            call[count] = value
    return call
