"""The turns of a program's episode linked by exact prefix: which model request goes on from which.

Each request's parent is the turn whose messages and reply begin it, the longest such. A request that extends the
last turn of its parent's branch continues that branch; any other starts a branch of its own (from its parent, if
it has one), marked by what it most likely is:
- "retry": the same messages as an earlier request (a client that asked again): a sibling of that request;
- "rewind": it goes on from an earlier turn that its branch went on from already;
- "sub-agent": no parent, and a system prompt other than the episode's first (a helper with its own context);
- "compaction": no parent, and the episode's system prompt over another history (summarised, trimmed).
Messages are compared in the endpoint's one shape (whatever API the program speaks), by role, text and tool calls
(name and arguments as canonical JSON); ids are left out, since some APIs' clients do not send them back.

    graph = TurnGraph()
    node = graph.add(request.messages)   # {"turn": 0, "parent": None, "branch": 0, "kind": "start"}
    graph.answer(reply)                  # the assistant message that answered it
"""

from __future__ import annotations

from typing import Any

import orjson

CONTINUES = "continues"


def _arguments(text: Any) -> str:
    try:
        return orjson.dumps(orjson.loads(text), option=orjson.OPT_SORT_KEYS).decode()
    except (orjson.JSONDecodeError, TypeError):
        return str(text)


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return content or ""


def message_key(message: dict[str, Any]) -> tuple:
    """What two messages must share to be the same turn of a conversation."""
    calls = tuple((call.get("function", call).get("name"), _arguments(call.get("function", call).get("arguments")))
                  for call in message.get("tool_calls") or ())
    return message.get("role"), _text(message.get("content")), calls


class TurnGraph:
    def __init__(self) -> None:
        self.nodes: list[dict[str, Any]] = []
        self._prompts: list[list[tuple]] = []  # each turn's messages, as keys
        self._replies: list[tuple | None] = []
        self._branches = 0
        self._went_on: set[int] = set()  # turns a later request went on from

    def add(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        """Link the next request; its node (turn, parent, branch, kind, and `from`: how many of its messages the
        parent's prompt and reply already hold)."""
        keys = [message_key(message) for message in messages]
        turn = len(self.nodes)
        node: dict[str, Any] = {"turn": turn, "parent": None, "branch": 0, "kind": "start", "from": 0}
        if turn:
            parent = self._parent(keys)
            if parent is not None:
                node.update(parent=parent, **{"from": len(self._prompts[parent]) + 1})
            if parent is not None and parent not in self._went_on:
                node.update(branch=self.nodes[parent]["branch"], kind=CONTINUES)
            else:
                self._branches += 1
                node.update(branch=self._branches, kind=self._kind(keys, parent))
            if parent is not None:
                self._went_on.add(parent)
        self.nodes.append(node)
        self._prompts.append(keys)
        self._replies.append(None)
        return node

    def answer(self, reply: dict[str, Any]) -> None:
        """The assistant message that answered the last request."""
        self._replies[-1] = message_key({"role": "assistant", **reply})

    def _parent(self, keys: list[tuple]) -> int | None:
        """The latest turn whose messages and reply begin `keys`, and are fewer."""
        for turn in range(len(self._prompts) - 1, -1, -1):
            before, reply = self._prompts[turn], self._replies[turn]
            if reply is not None and len(keys) > len(before) and keys[len(before)] == reply \
                    and keys[:len(before)] == before:
                return turn
        return None

    def _kind(self, keys: list[tuple], parent: int | None) -> str:
        if keys in self._prompts:
            return "retry"
        if parent is not None:
            return "rewind"
        system = [key for key in keys if key[0] == "system"][:1]
        first = [key for key in self._prompts[0] if key[0] == "system"][:1]
        return "sub-agent" if system != first else "compaction"
