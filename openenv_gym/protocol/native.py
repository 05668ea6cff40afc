"""openenv_gym's own wire protocol, sans I/O: message shapes, frames and validation.

Client and server both build and read messages through this module, so the two sides cannot disagree
about a message. docs/protocol.md documents every message with an example.

A client frame is one JSON request object or a JSON array of them (a batch, possibly for many
sessions). A server frame is always a JSON array of responses. Every request carries an `id`
chosen by the client (an int or a string), echoed in its response; responses to one batch may
arrive spread over several frames and in any order.
"""

from __future__ import annotations

from typing import Any, TypeAlias

import orjson

from openenv_gym.episode.results import Action
from openenv_gym.errors import BadFrameError, BadRequestError, ProtocolError
from openenv_gym.protocol.answers import OP_COLUMNS, ResetAnswer, StepAnswer

PROTOCOL_VERSION = 3  # 2: `resets` (a batch of resets answered in columns); 3: `columns` (protocol/answers.py)
DEFAULT_MAX_FRAME_BYTES = 16 * 2**20
DEFAULT_MAX_SESSIONS = 10_000  # one default for every way a server is started: CLI, serve(), gym.make's, Ray's

OP_RESET = "reset"
OP_STEP = "step"
OP_CLOSE = "close"
OP_INFO = "info"
OP_STEPS = "steps"
OP_RESETS = "resets"
OP_SPLITS = "splits"
OP_TASKS = "tasks"
OP_STATE = "state"
OP_RESUMABLE = "resumable"
OP_RESUME = "resume"
OP_GROUP = "group"
OPS = (OP_RESET, OP_RESETS, OP_STEP, OP_STEPS, OP_STATE, OP_CLOSE, OP_GROUP, OP_INFO, OP_SPLITS, OP_TASKS, OP_RESUMABLE,
       OP_RESUME, OP_COLUMNS)

RequestId: TypeAlias = int | str

_JSON_TYPE_NAMES = {dict: "object", list: "array", str: "string", int: "integer", float: "number",
                    bool: "boolean", type(None): "null"}


def json_type_name(value: object) -> str:
    return _JSON_TYPE_NAMES.get(type(value), type(value).__name__)


# ---------------------------------------------------------------------------------------------
# Frames


def encode_frame(messages: list[dict]) -> bytes:
    """Encode messages as one frame. numpy scalars and arrays (common in actions) are allowed."""
    return orjson.dumps(messages, option=orjson.OPT_SERIALIZE_NUMPY)


def encoded(value: Any) -> orjson.Fragment:
    """`value` encoded now, to be placed in a message as is (raises TypeError if JSON cannot carry it): a front
    end that must know whether a result can be sent learns it without encoding the result twice."""
    return orjson.Fragment(orjson.dumps(value, option=orjson.OPT_SERIALIZE_NUMPY))


def unencodable(value: Any) -> str | None:
    """Why JSON cannot carry `value`, or None."""
    try:
        encoded(value)
    except TypeError as exc:
        return str(exc)
    return None


def decode_frame(data: str | bytes) -> list:
    """Parse a frame into a list of (unvalidated) messages; raise BadFrameError if it is not one."""
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise BadFrameError(
            f"frame is not valid JSON ({exc}); send a JSON request object or an array of them"
        ) from None
    if type(obj) is list:
        if not obj:
            raise BadFrameError("frame is an empty array; a batch holds at least one request")
        return obj
    if type(obj) is dict:
        return [obj]
    raise BadFrameError(
        f"frame holds a JSON {json_type_name(obj)}; send a request object or an array of them"
    )


# ---------------------------------------------------------------------------------------------
# Requests: built by the client, validated by the server


def _without_none(message: dict) -> dict:
    return {key: value for key, value in message.items() if value is not None}


def reset_request(rid: RequestId, session: str | None = None, seed: int | None = None,
                  options: dict | None = None) -> dict:
    """Reset `session`, or create a new session and reset it when `session` is None. (Written out: a vector
    client builds one per env of a batch reset.)"""
    message: dict[str, Any] = {"id": rid, "op": OP_RESET}
    if session is not None:
        message["session"] = session
    if seed is not None:
        message["seed"] = seed
    if options is not None:
        message["options"] = options
    return message


def step_request(rid: RequestId, session: str | None, action: Action) -> dict:
    """One dict and nothing more: the one-env-at-a-time path builds one per step. A session of None (never reset)
    is sent as null, which the server refuses with a bad_request saying so."""
    return {"id": rid, "op": OP_STEP, "session": session, "action": action}


def steps_request(rid: RequestId, sessions: list[str | None], actions: list[Action]) -> dict:
    """Step many sessions at once; the answer comes as one response of columns (see steps_response)."""
    return {"id": rid, "op": OP_STEPS, "sessions": sessions, "actions": actions}


def resets_request(rid: RequestId, sessions: list[str | None], seeds: list[int | None],
                   options: list[dict | None]) -> dict:
    """Reset many sessions at once (null: a new one); the answer comes as one response of columns (see
    resets_response). Servers of protocol 2 and later."""
    return {"id": rid, "op": OP_RESETS, "sessions": sessions, "seeds": seeds, "options": options}


def state_request(rid: RequestId, session: str) -> dict:
    return {"id": rid, "op": OP_STATE, "session": session}


def close_request(rid: RequestId, session: str) -> dict:
    return {"id": rid, "op": OP_CLOSE, "session": session}


def group_request(rid: RequestId, group: str, members: int) -> dict:
    """The score of the connection's group `group`, once `members` of its episodes (reset with the option
    {"group": {"id": group, "member": m}}) have ended."""
    return {"id": rid, "op": OP_GROUP, "group": group, "members": members}


def info_request(rid: RequestId) -> dict:
    return {"id": rid, "op": OP_INFO}


def splits_request(rid: RequestId) -> dict:
    return {"id": rid, "op": OP_SPLITS}


def tasks_request(rid: RequestId, split: str | None = None, start: int | None = None, stop: int | None = None) -> dict:
    return _without_none({"id": rid, "op": OP_TASKS, "split": split, "start": start, "stop": stop})


def resumable_request(rid: RequestId) -> dict:
    """Make this connection resumable: the server keeps what it needs to resume it after a drop."""
    return {"id": rid, "op": OP_RESUMABLE}


def resume_request(rid: RequestId, token: str) -> dict:
    """Adopt the sessions of the dropped connection that `token` names (see resumable_response)."""
    return {"id": rid, "op": OP_RESUME, "token": token}


def request_id(message: object) -> RequestId | None:
    """The id to answer with, or None when the message has no usable id."""
    if type(message) is dict:
        rid = message.get("id")
        if type(rid) is int or type(rid) is str:
            return rid
    return None


def check_request(message: object) -> tuple[RequestId, str]:
    """Return (id, op) of a request, or raise BadRequestError saying what is wrong."""
    if type(message) is not dict:
        raise BadRequestError(
            f"a request is a JSON object with 'id' and 'op', got a JSON {json_type_name(message)}"
        )
    rid = message.get("id")
    if type(rid) is not int and type(rid) is not str:
        raise BadRequestError(
            f"field 'id' must be an integer or a string, got {json_type_name(rid)}"
            if "id" in message else "field 'id' is missing; every request carries an id"
        )
    op = message.get("op")
    if type(op) is not str:
        raise BadRequestError(
            f"field 'op' must be a string, one of {', '.join(OPS)}; got {json_type_name(op)}"
            if "op" in message else f"field 'op' is missing; use one of {', '.join(OPS)}"
        )
    return rid, op


def optional_field(message: dict, name: str, kind: type, kind_name: str) -> Any:
    """Return message[name] if it is absent/null or of `kind`; raise BadRequestError otherwise."""
    return optional_value(message.get(name), name, kind, kind_name)


def optional_value(value: Any, name: str, kind: type, kind_name: str) -> Any:
    """`value` (field `name`) if it is null or of `kind`; raise BadRequestError otherwise."""
    if value is None or type(value) is kind:
        return value
    raise BadRequestError(f"field '{name}' must be {kind_name} or null, got {json_type_name(value)}")


def required_session(message: dict) -> str:
    session = message.get("session")
    if type(session) is not str:
        raise BadRequestError(
            f"field 'session' must be a string session id, got {json_type_name(session)}"
            if "session" in message else "field 'session' is missing; name the session to act on"
        )
    return session


# ---------------------------------------------------------------------------------------------
# Responses: built by the server, read by the client


def reset_response(rid: RequestId, session: str, obs: str, info: dict) -> dict:
    return ResetAnswer(id=rid, session=session, obs=obs, info=info)


def step_response(rid: RequestId, obs: str, reward: float, terminated: bool, truncated: bool,
                  info: dict) -> dict:
    return StepAnswer(id=rid, obs=obs, reward=reward, terminated=terminated, truncated=truncated, info=info)


def steps_response(rid: RequestId, obs: list[str], rewards: list[float], terminated: list[bool],
                   truncated: list[bool], infos: list[dict], errors: list[dict | None] | None) -> dict:
    """Entry k answers sessions[k]; `error` is present only when an entry failed (null for the others)."""
    response = {"id": rid, "obs": obs, "reward": rewards, "terminated": terminated, "truncated": truncated,
                "info": infos}
    if errors is not None:
        response["error"] = errors
    return response


def resets_response(rid: RequestId, sessions: list[str | None], obs: Any, infos: Any,
                    errors: list[dict | None] | None) -> dict:
    """Entry k answers entry k of the request: the session it reset (null where it failed), its first observation
    and info; `error` is present only when an entry failed (null for the others)."""
    response = {"id": rid, "session": sessions, "obs": obs, "info": infos}
    if errors is not None:
        response["error"] = errors
    return response


def state_response(rid: RequestId, state: dict[str, Any]) -> dict:
    """state: {"session", "episode_id", "running", "steps", "max_steps"}, and "extras" if the env tells any."""
    return {"id": rid, **state}


def close_response(rid: RequestId) -> dict:
    return {"id": rid, "closed": True}


def group_response(rid: RequestId, group: str, members: list[int], rewards: list[float], infos: Any) -> dict:
    """Entry k of `rewards` and `infos` is member `members[k]`'s (members in order)."""
    return {"id": rid, "group": group, "members": members, "rewards": rewards, "infos": infos}


def info_response(rid: RequestId, server_info: dict) -> dict:
    """server_info: {"env": <description>, "protocol": <version>, "limits": {...}}."""
    return {"id": rid, **server_info}


def splits_response(rid: RequestId, splits: list[dict]) -> dict:
    """splits: [{"name", "type", "num_tasks"}, ...]; empty for environments without tasks."""
    return {"id": rid, "splits": splits}


def tasks_response(rid: RequestId, listing: dict[str, Any]) -> dict:
    """listing: {"split", "start", "tasks", "hidden"} (server/catalog.py)."""
    return {"id": rid, **listing}


def resumable_response(rid: RequestId, token: str, window: float, worker: int, workers: int) -> dict:
    """token: names this connection's sessions for `resume` within `window` seconds of a drop; only worker
    process `worker` (of `workers`) holds them."""
    return {"id": rid, "token": token, "window": window, "worker": worker, "workers": workers}


def resume_response(rid: RequestId, resumed: bool, worker: int) -> dict:
    """resumed false: this connection reached another worker process than the token's; connect again."""
    return {"id": rid, "resumed": resumed, "worker": worker}


def error_response(rid: RequestId | None, error: ProtocolError) -> dict:
    return {"id": rid, "error": error.to_wire()}
