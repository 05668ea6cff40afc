"""Answers in columns (protocol 3), sans I/O: the plain answers to `step` and `reset` requests that leave in one
frame, sent as one message of columns each to a client that asked for it with `columns`, and read back.

    {"ids": [7, 8, 9], "obs": [...], "reward": [...], "terminated": [...], "truncated": [...], "info": [...]}
    {"ids": [10, 11], "session": [...], "obs": [...], "info": [...]}

Entry k of each column answers request `ids[k]`, as the answer `{"id": ids[k], "obs": obs[k], ...}` would. A
client that sends its steps one env at a time (the rollout stream) then reads one message per frame instead of one
per env. Errors, and the answers of every other op, are never packed.
"""

from __future__ import annotations

from typing import Any

OP_COLUMNS = "columns"
STEP_COLUMNS = ("obs", "reward", "terminated", "truncated", "info")
RESET_COLUMNS = ("session", "obs", "info")


class StepAnswer(dict):
    """A plain answer to a `step` (protocol/native.py's step_response): one that may be packed."""

    __slots__ = ()


class ResetAnswer(dict):
    """A plain answer to a `reset` (protocol/native.py's reset_response): one that may be packed."""

    __slots__ = ()


def columns_request(rid: int | str) -> dict:
    """Ask for the plain answers to `step` and `reset` requests in columns. Servers of protocol 3 and later."""
    return {"id": rid, "op": OP_COLUMNS}


def columns_response(rid: int | str, packing: bool) -> dict:
    """packing: from now on, the plain step and reset answers of a frame come as messages of columns (false: this
    connection cannot have them packed)."""
    return {"id": rid, "columns": packing}


def packed(messages: list[dict]) -> list[dict]:
    """`messages` with the plain step answers among them as one message of columns, and the plain reset answers as
    another, where there are at least two of a kind (the client routes answers by id: their order does not
    matter)."""
    steps: list[dict] = []
    resets: list[dict] = []
    others: list[dict] = []
    for message in messages:
        kind = type(message)
        (steps if kind is StepAnswer else resets if kind is ResetAnswer else others).append(message)
    for answers, columns in ((steps, STEP_COLUMNS), (resets, RESET_COLUMNS)):
        if len(answers) > 1:
            others.append(_columns(answers, columns))
        else:
            others += answers
    return others


def _columns(answers: list[dict], columns: tuple[str, ...]) -> dict:
    message = {"ids": [answer["id"] for answer in answers]}
    for column in columns:
        message[column] = [answer[column] for answer in answers]
    return message


def columns_of(message: dict) -> tuple[str, ...] | None:
    """The columns of a packed message (STEP_COLUMNS or RESET_COLUMNS), or None for any other message."""
    if "ids" not in message:
        return None
    return STEP_COLUMNS if "reward" in message else RESET_COLUMNS


def unpacked(message: dict, columns: tuple[str, ...], k: int) -> dict:
    """Entry k of a packed message as the plain answer it stands for."""
    answer: dict[str, Any] = {"id": message["ids"][k]}
    for column in columns:
        answer[column] = message[column][k]
    return answer
