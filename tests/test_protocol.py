"""The sans-I/O protocol: requests and responses survive a trip through a frame; bad frames are typed."""

import orjson
import pytest

from openenv_gym import errors
from openenv_gym.protocol import answers
from openenv_gym.protocol import native as p


def roundtrip(messages):
    return p.decode_frame(p.encode_frame(messages))


def test_requests_roundtrip_in_one_batch_frame():
    batch = [
        p.reset_request(1),
        p.reset_request(2, session="abc", seed=7, options={"split": "train", "index": 3}),
        p.step_request(3, "abc", "héllo 🙂"),
        p.step_request("four", "abc", {"name": "guess", "arguments": {"number": 3}}),
        p.close_request(5, "abc"),
        p.info_request(6),
        p.steps_request(7, ["abc", "def"], ["x", {"name": "guess", "arguments": {}}]),
        p.state_request(8, "abc"),
        p.splits_request(9),
        p.tasks_request(10, "test", 0, 5),
    ]
    decoded = roundtrip(batch)
    assert decoded == batch
    assert [p.check_request(m) for m in decoded] == [
        (1, "reset"), (2, "reset"), (3, "step"), ("four", "step"), (5, "close"), (6, "info"), (7, "steps"),
        (8, "state"), (9, "splits"), (10, "tasks")]
    assert "session" not in decoded[0] and "seed" not in decoded[0]  # None fields are left out
    assert decoded[1]["options"] == {"split": "train", "index": 3}


def test_single_object_frame_is_a_batch_of_one():
    assert p.decode_frame(b'{"id": 1, "op": "info"}') == [{"id": 1, "op": "info"}]


def test_responses_roundtrip():
    responses = [
        p.reset_response(1, "sid", "obs", {"k": [1, 2]}),
        p.step_response(2, "obs", 0.5, True, False, {}),
        p.close_response(3),
        p.info_response(4, {"env": {"name": "echo"}, "protocol": 1, "limits": {}}),
        p.error_response(5, errors.NoEpisodeError("call reset")),
        p.error_response(None, errors.BadFrameError("not JSON")),
        p.steps_response(8, ["a", "b"], [0.1, 0.0], [False, True], [False, False], [{}, {"k": 1}], None),
        p.steps_response(9, ["a", ""], [0.1, 0.0], [False, False], [False, False], [{}, {}],
                         [None, {"code": "env_error", "message": "boom"}]),
        p.state_response(10, {"session": "sid", "running": True, "steps": 3, "max_steps": 10}),
        p.splits_response(11, [{"name": "train", "type": "train", "num_tasks": 3}]),
        p.tasks_response(12, {"split": "train", "start": 0, "tasks": [{"q": 1}], "hidden": False}),
    ]
    assert roundtrip(responses) == responses


def test_numpy_values_in_actions_encode():
    np = pytest.importorskip("numpy")
    frame = p.encode_frame([p.step_request(1, "s", {"name": "guess", "arguments": {"number": np.int64(4)}})])
    assert orjson.loads(frame)[0]["action"]["arguments"]["number"] == 4


@pytest.mark.parametrize("frame, fragment", [
    (b"{not json", "not valid JSON"),
    (b"[]", "empty array"),
    (b"42", "JSON integer"),
    (b'"text"', "JSON string"),
])
def test_bad_frames(frame, fragment):
    with pytest.raises(errors.BadFrameError, match=fragment):
        p.decode_frame(frame)


@pytest.mark.parametrize("message, fragment", [
    ([1, 2], "JSON object"),
    ({"op": "step"}, "'id' is missing"),
    ({"id": 1.5, "op": "step"}, "'id' must be an integer or a string, got number"),
    ({"id": True, "op": "step"}, "got boolean"),
    ({"id": 1}, "'op' is missing"),
    ({"id": 1, "op": 3}, "'op' must be a string"),
])
def test_check_request_rejects(message, fragment):
    with pytest.raises(errors.BadRequestError, match=fragment):
        p.check_request(message)


def test_field_checks():
    assert p.optional_field({"seed": 3}, "seed", int, "an integer") == 3
    assert p.optional_field({}, "seed", int, "an integer") is None
    with pytest.raises(errors.BadRequestError, match="'seed' must be an integer or null, got string"):
        p.optional_field({"seed": "3"}, "seed", int, "an integer")
    with pytest.raises(errors.BadRequestError, match="'session' is missing"):
        p.required_session({})
    with pytest.raises(errors.BadRequestError, match="got integer"):
        p.required_session({"session": 5})


def test_request_id_only_when_usable():
    assert p.request_id({"id": 3}) == 3
    assert p.request_id({"id": [3]}) is None
    assert p.request_id("x") is None


def test_every_error_code_has_its_exception_class():
    assert set(errors.ERROR_CLASSES) == {code.value for code in errors.ErrorCode}
    for code, cls in errors.ERROR_CLASSES.items():
        exc = errors.error_from_wire({"code": code, "message": "why"})
        assert type(exc) is cls and exc.code == code and exc.message == "why"
        assert exc.to_wire() == {"code": code, "message": "why"}
    assert type(errors.error_from_wire({"code": "from-the-future", "message": "m"})) is errors.ProtocolError


def test_plain_step_and_reset_answers_pack_into_columns_and_read_back():
    steps = [p.step_response(k, f"obs {k}", 0.5 * k, k == 2, False, {"step": k}) for k in range(3)]
    resets = [p.reset_response(10 + k, f"session{k}", "ready", {}) for k in range(2)]
    error = p.error_response(20, errors.NoEpisodeError("none runs"))
    others = [p.close_response(21), p.steps_response(22, ["a"], [0.0], [False], [False], [{}], None)]
    frame = roundtrip(answers.packed([steps[0], error, resets[0], steps[1], *others, resets[1], steps[2]]))
    columns = [m for m in frame if answers.columns_of(m) is not None]
    assert [m for m in frame if answers.columns_of(m) is None] == [error, *others]  # never packed
    [step_columns] = [m for m in columns if answers.columns_of(m) == answers.STEP_COLUMNS]
    [reset_columns] = [m for m in columns if answers.columns_of(m) == answers.RESET_COLUMNS]
    assert step_columns["ids"] == [0, 1, 2] and reset_columns["ids"] == [10, 11]
    assert [answers.unpacked(step_columns, answers.STEP_COLUMNS, k) for k in range(3)] == steps
    assert [answers.unpacked(reset_columns, answers.RESET_COLUMNS, k) for k in range(2)] == resets
    assert answers.packed([steps[0], error]) == [error, steps[0]]  # one of a kind goes as it is
