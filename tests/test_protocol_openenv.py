"""OpenEnv's and MCP's message shapes (protocol/openenv.py, openenv_payloads.py, mcp.py), each message through both
directions: what one side builds, the other side reads back the same. Client and server use these and nothing
else, so they cannot disagree."""

import orjson
import pytest

from openenv_gym import errors
from openenv_gym.episode.results import ResetResult, StepResult
from openenv_gym.protocol import mcp
from openenv_gym.protocol import openenv as wire
from openenv_gym.protocol.openenv_payloads import (
    payload_of,
    reset_from_payload,
    state_extras,
    state_of,
    step_from_payload,
    wire_action,
)
from openenv_gym.protocol.tool_specs import as_tool, as_tools, openai_tool

TOOLS = [{"name": "guess", "description": "Guess the number", "parameters": {
    "type": "object", "properties": {"number": {"type": "integer"}}, "required": ["number"]}}]


def _sent(message: dict) -> dict:
    """A message as the other side reads it off the socket."""
    return wire.read_message(orjson.dumps(message).decode())


@pytest.mark.parametrize(("seed", "options"), [(None, {}), (0, {"episode_id": "e1"}), (7, {"split": "t", "index": 3})])
def test_reset_messages_round_trip(seed, options):
    assert wire.reset_arguments(_sent(wire.reset_message(seed, options))) == (seed, options or None)


@pytest.mark.parametrize(("action", "tools", "text_to"), [
    ({"name": "guess", "arguments": {"number": 4}}, TOOLS, None),  # a tool call of ours, to an MCP env
    ("hello", None, "message"),  # text, to a model with one text field
    ({"delta": 3, "note": "x"}, None, None),  # an object of the env's Action model
])
def test_actions_round_trip(action, tools, text_to):
    sent = wire_action(action, tools, text_to)
    assert wire.action_of(wire.step_data(_sent(wire.step_message(sent)))) == action


def test_openenvs_own_tool_call_goes_as_it_is_and_reads_back_as_a_tool_call():
    call = {"type": "call_tool", "tool_name": "nope", "arguments": {}}  # unknown tools are the env's to answer
    assert wire_action(call, TOOLS, None) == call
    assert wire.action_of(call) == {"name": "nope", "arguments": {}}


@pytest.mark.parametrize("message", [wire.state_message(), wire.close_message(), wire.list_tools_message(),
                                     wire.mcp_message(mcp.request(1, mcp.TOOLS_LIST))])
def test_other_messages_round_trip(message):
    assert _sent(message) == message
    assert wire.is_list_tools(_sent(message).get("data") or {}) == (message == wire.list_tools_message())


@pytest.mark.parametrize(("raw", "code"), [("{", wire.INVALID_JSON), ("[1]", wire.VALIDATION_ERROR),
                                           ('{"type": "jump"}', wire.UNKNOWN_TYPE),
                                           ('{"type": "step"}', wire.VALIDATION_ERROR),
                                           ('{"type": "reset", "data": {"seed": -1}}', wire.VALIDATION_ERROR),
                                           ('{"type": "step", "data": {"type": "call_tool"}}', wire.VALIDATION_ERROR)])
def test_malformed_messages_are_openenvs_errors(raw, code):
    with pytest.raises(wire.WireError) as caught:
        message = wire.read_message(raw)
        if message["type"] == wire.RESET:
            wire.reset_arguments(message)
        else:
            wire.action_of(wire.step_data(message))
    assert caught.value.code == code and caught.value.frame()["data"]["code"] == code


@pytest.mark.parametrize("error", [errors.CapacityError("full"), errors.BadRequestError("bad"),
                                   errors.InvalidActionError("does not fit"), errors.EnvError("raised"),
                                   errors.NoEpisodeError("no episode")])
def test_error_frames_round_trip(error):
    frame = orjson.loads(orjson.dumps(wire.error_frame(wire.code_of(error), str(error))))
    with pytest.raises(errors.ProtocolError) as caught:
        wire.frame_data(frame)
    expected = {wire.CAPACITY_REACHED: errors.CapacityError, wire.VALIDATION_ERROR: errors.BadRequestError,
                wire.EXECUTION_ERROR: errors.EnvError}[wire.code_of(error)]
    assert type(caught.value) is expected and str(error) in str(caught.value)


@pytest.mark.parametrize("step", [StepResult("3 left", 0.5, False, False, {"turn": 1}),
                                  StepResult("over", 1.0, True, False, {}),
                                  StepResult("out of steps", 0.0, False, True, {"why": ["limit"]})])
def test_our_observations_round_trip(step):
    frame = orjson.loads(orjson.dumps(wire.observation_frame(payload_of(step, own_payload=False))))
    read = step_from_payload(wire.frame_data(frame))
    assert read == StepResult(step.obs, step.reward, step.terminated, step.truncated,
                              step.info | {"reward_raw": step.reward})
    reset = ResetResult("hello", {"turn": 0})
    assert reset_from_payload(payload_of(reset, own_payload=False)) == reset


@pytest.mark.parametrize("payload", [
    {"observation": {"total": 3, "note": "go on", "metadata": {"step": 1}}, "reward": 3.0, "done": False,
     "metadata": {"step": 1}},
    {"observation": {"total": 10, "note": "done", "metadata": {}}, "reward": None, "done": True},
])
def test_an_openenv_environments_payloads_round_trip(payload):
    """What an OpenEnv environment's payload becomes as a step of ours comes back as the very same payload."""
    assert payload_of(step_from_payload(payload), own_payload=True) == payload
    reset = payload | {"reward": None, "done": False}  # metadata at the top as in the observation, as OpenEnv does
    assert payload_of(reset_from_payload(reset), own_payload=True) == reset


@pytest.mark.parametrize("own", [True, False])
def test_state_round_trips(own):
    ours = {"session": "s", "episode_id": "e1", "running": True, "steps": 4, "max_steps": 20,
            "extras": {"total": 7, "refused": 1}}
    frame = orjson.loads(orjson.dumps(wire.state_frame(state_of(ours, own))))
    theirs = wire.frame_data(frame)
    assert (theirs["episode_id"], theirs["step_count"]) == ("e1", 4)
    extras = state_extras(theirs)
    assert extras == {"total": 7, "refused": 1} | ({} if own else {"running": True, "max_steps": 20})


def test_tools_round_trip():
    assert [as_tool(mcp.mcp_tool(tool)) for tool in TOOLS] == TOOLS
    assert [as_tool(openai_tool(tool)) for tool in TOOLS] == TOOLS


def test_every_shape_of_tool_reads_into_ours():
    """OpenAI's function tool, MCP's Tool, ORS's and OpenEnv's ToolSpec, Verifiers' Tool: the same tool of ours.
    What names no tool is left out; a tool without a description or a schema gets empty ones."""
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    ours = {"name": "guess", "description": "Guess", "parameters": schema}
    shapes = [ours, {"type": "function", "function": ours}, ours | {"strict": True},
              {"name": "guess", "description": "Guess", "inputSchema": schema},
              {"name": "guess", "description": "Guess", "input_schema": schema}]
    assert as_tools(shapes) == [ours] * len(shapes)
    assert as_tools([{"name": "bare"}, {"description": "no name"}, "text", {"function": {"name": 3}}]) == [
        {"name": "bare", "description": "", "parameters": {"type": "object", "properties": {}}}]


def test_mcp_tool_calls_round_trip():
    request = orjson.loads(orjson.dumps(mcp.tool_call_request(5, "guess", {"number": 4}, session_id="s1")))
    rid, method, params = mcp.method_of(request)
    assert (rid, method, mcp.session_of(params)) == (5, mcp.TOOLS_CALL, "s1")
    assert mcp.tool_call_of(params) == {"name": "guess", "arguments": {"number": 4}}
    step = StepResult("lower", 0.0, False, False, {"error": {"code": "x"}})
    answer = orjson.loads(orjson.dumps(mcp.tool_called(rid, step)))
    assert answer["result"]["isError"] is True and answer["id"] == 5
    assert mcp.step_of_tool_result(answer["result"]) == step


@pytest.mark.parametrize(("request_", "code"), [([], mcp.INVALID_REQUEST), ({"id": 1}, mcp.INVALID_REQUEST)])
def test_malformed_json_rpc_requests(request_, code):
    with pytest.raises(mcp.JsonRpcError) as caught:
        mcp.method_of(request_)
    assert caught.value.code == code
    assert mcp.error(None, code, "x")["error"] == {"code": code, "message": "x", "data": None}


def test_a_tool_call_without_a_name_is_invalid_params():
    with pytest.raises(mcp.JsonRpcError) as caught:
        mcp.tool_call_of({"arguments": {}})
    assert caught.value.code == mcp.INVALID_PARAMS
