"""A small OpenAI-compatible chat server for the tests: a real HTTP server on loopback with a scripted policy.

The policy plays `guess` by bisection, reading the conversation it is sent: each "higher/lower than N" narrows
the range, and the next guess is its middle. With tools in the request it answers with a tool call, otherwise
with the call written in text. It returns token ids and logprobs, as vLLM does when asked.

Models with special behaviour: "judge" judges AWM episodes (complete when the facts it is sent say
"task_done": true); "group-judge" scores the attempts of a group (the length of each, up to 10), and
"miscounting-judge" gives one score too few; "match-judge" says yes or no to whether the "Expected answer:" and
"Given answer:" lines of the last message match; "broken" answers 400 to everything; "flaky" answers 503
the first time it sees a conversation (a client that retries gets through); "slow-N" waits N ms before answering;
"thinker" answers with its reasoning too, as vLLM with a reasoning parser does (`reasoning_content`; "thinker-0.16" as
vLLM from 0.16 does: `reasoning`), its tokens among the completion's; "bytes" tokenizes as a chat template would
(each message rendered, its bytes the ids: a prompt is the conversation so far, so the next one begins with it and
the reply), with a logprob of its own per token, and keeps what it returned (`answers`); "bytes-rewrite" also
thinks first, in tokens the template leaves out of the history, so a prompt no longer begins with the turns before.
"script:NAME" plays the replies the server was given under NAME (`ScriptedServer(scripts={NAME: [...]})`), the
reply of a request the one after as many as the conversation holds already (a tool call {"name", "arguments"}, else
text): the same replies to every run, as an oracle is given them.
A request that asks to stream gets the answer as server-sent events (without its tokens).
"""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

HINT = re.compile(r"(higher|lower) than (-?\d+)")
MATCH = re.compile(r"Expected answer: (.*)\nGiven answer: (.*)\n")


def next_guess(messages: list[dict[str, Any]], low: int = 1, high: int = 100) -> int:
    for message in messages:
        if message["role"] in ("tool", "user"):
            for direction, number in HINT.findall(message.get("content") or ""):
                if direction == "higher":
                    low = max(low, int(number) + 1)
                else:
                    high = min(high, int(number) - 1)
    return (low + high) // 2


def thought(messages: list[dict[str, Any]]) -> str:
    """What the "thinker" model reasons: it names the last message it read."""
    content = messages[-1].get("content")
    text = content if isinstance(content, str) else "".join(part.get("text", "") for part in content or [])
    return f"The last message says {text[:40]!r}; the middle of the range it leaves is the guess."


def render(message: dict[str, Any]) -> str:
    """A message as the "bytes" model's chat template writes it (tool calls by name and canonical arguments)."""
    calls = "".join(f"[{call['function']['name']}:{_canonical(call['function']['arguments'])}]"
                    for call in message.get("tool_calls") or ())
    return f"<{message['role']}>{message.get('content') or ''}{calls}</>"


def _canonical(arguments: Any) -> str:
    return json.dumps(json.loads(arguments) if isinstance(arguments, str) else arguments, sort_keys=True)


class Handler(BaseHTTPRequestHandler):
    server: ScriptedServer
    protocol_version = "HTTP/1.1"  # keep-alive, as real model servers do

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def _answer(self, status: int, body: dict[str, Any]) -> None:
        if body.get("object") == "chat.completion":
            body.setdefault("created", int(time.time()))  # (as every server says; NeMo's model servers require it)
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.count(request)
        model = request.get("model", "")
        if self.path != "/v1/chat/completions":
            return self._answer(404, {"error": {"message": f"no route {self.path}"}})
        if not request.get("messages"):  # as real servers answer an empty conversation
            return self._answer(400, {"error": {"message": "messages must be a non-empty list"}})
        if model == "broken":
            return self._answer(400, {"error": {"message": "this model refuses every request"}})
        if model == "flaky" and self.server.first_time(request["messages"]):
            return self._answer(503, {"error": {"message": "overloaded, try again"}})
        if model == "judge":
            done = '"task_done": true' in request["messages"][-1]["content"]
            verdict = {"classification": "complete" if done else "incomplete", "confidence": 0.9, "evidence": "facts"}
            return self._answer(200, {"id": "chatcmpl-j", "object": "chat.completion", "model": model, "choices": [
                {"index": 0, "message": {"role": "assistant", "content": json.dumps(verdict)},
                 "finish_reason": "stop"}]})
        if model == "match-judge":
            content = request["messages"][-1]["content"]
            text = content if isinstance(content, str) else "".join(part.get("text", "") for part in content)
            expected, given = MATCH.search(text).groups()
            verdict = "yes" if expected.strip().lower() == given.strip().lower() else "no"
            return self._answer(200, {"id": "chatcmpl-m", "object": "chat.completion", "model": model,
                                      "choices": [{"index": 0, "message": {"role": "assistant", "content": verdict},
                                                   "finish_reason": "stop"}]})
        if model in ("group-judge", "miscounting-judge"):  # scores each attempt by the length of its text
            attempts = re.split(r"\n\nAttempt \d+:\n", request["messages"][-1]["content"])[1:]
            scores = [min(10, len(attempt.split(": ", 1)[-1])) for attempt in attempts]  # the text after "role: "
            if model == "miscounting-judge":
                scores = scores[1:]
            return self._answer(200, {"id": "chatcmpl-g", "object": "chat.completion", "model": model, "choices": [
                {"index": 0, "message": {"role": "assistant", "content": json.dumps({"scores": scores})},
                 "finish_reason": "stop"}]})
        if model.startswith("slow-"):
            time.sleep(int(model.split("-")[1]) / 1000)
        number = next_guess(request["messages"])
        reply: str | dict[str, Any] = {"name": "guess", "arguments": {"number": number}}
        if model.startswith("script:"):
            script = self.server.scripts[model.removeprefix("script:")]
            turn = sum(message["role"] == "assistant" for message in request["messages"])
            if turn >= len(script):
                return self._answer(400, {"error": {"message": f"{model} has no reply {turn}"}})
            reply = script[turn]
        message = self._message(reply, bool(request.get("tools")))
        completion_ids = [7, number, 8]
        if model.startswith("thinker"):
            message["reasoning" if model == "thinker-0.16" else "reasoning_content"] = thought(request["messages"])
            completion_ids = [5, 6, *completion_ids]
        prompt_ids = [1] * len(request["messages"])
        logprobs = [-0.5] * len(completion_ids)
        if model.startswith("bytes"):
            prompt_ids = list(("".join(map(render, request["messages"])) + "<assistant>").encode())
            thinking = "<think>hm</think>" if model == "bytes-rewrite" else ""
            completion_ids = list((thinking + render(message).removeprefix("<assistant>")).encode())
            logprobs = [-0.001 * (k + 1) - 0.1 * self.server.requests for k in range(len(completion_ids))]
            self.server.answers.append((prompt_ids, completion_ids, logprobs))
        choice = {"index": 0, "message": message, "finish_reason": "stop", "token_ids": completion_ids,
                  "logprobs": {"content": [{"token": str(t), "logprob": value, "top_logprobs": []}
                                           for t, value in zip(completion_ids, logprobs, strict=True)]}}
        if request.get("stream"):
            return self._stream(model, message, len(prompt_ids), len(completion_ids),
                                (request.get("stream_options") or {}).get("include_usage") is True)
        self._answer(200, {"id": "chatcmpl-1", "object": "chat.completion", "model": model, "choices": [choice],
                           "prompt_token_ids": prompt_ids})

    def _message(self, reply: str | dict[str, Any], tools: bool) -> dict[str, Any]:
        """The assistant message of a reply: text, or a tool call (written in the text where no tools were given)."""
        if isinstance(reply, str):
            return {"role": "assistant", "content": reply}
        arguments = json.dumps(reply["arguments"])
        if tools:
            return {"role": "assistant", "content": "", "tool_calls": [
                {"id": f"call_{self.server.requests}", "type": "function",
                 "function": {"name": reply["name"], "arguments": arguments}}]}
        return {"role": "assistant",
                "content": f'<tool_call>{{"name": "{reply["name"]}", "arguments": {arguments}}}</tool_call>'}

    def _stream(self, model: str, message: dict[str, Any], prompt: int, completion: int, usage: bool) -> None:
        """The answer as server-sent events, as OpenAI streams it: the whole message in one delta, the finish, the
        usage where asked, [DONE]."""
        head = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": int(time.time()), "model": model}
        delta = {key: value for key, value in message.items() if key != "tool_calls"}
        if message.get("tool_calls"):
            delta["tool_calls"] = [{"index": k, **call} for k, call in enumerate(message["tool_calls"])]
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        chunks = [head | {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
                  head | {"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}]
        if usage:
            chunks.append(head | {"choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                                                            "total_tokens": prompt + completion}})
        data = "".join(f"data: {json.dumps(chunk)}\n\n" for chunk in chunks).encode() + b"data: [DONE]\n\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class ScriptedServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, scripts: dict[str, list[str | dict[str, Any]]] | None = None) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.scripts = scripts or {}
        self.requests = 0
        self.answers: list[tuple[list[int], list[int], list[float]]] = []  # the "bytes" models': prompt, completion
        self.bodies: list[dict[str, Any]] = []
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def first_time(self, messages: list[dict[str, Any]]) -> bool:
        key = json.dumps(messages, sort_keys=True)
        with self._lock:
            seen = key in self._seen
            self._seen.add(key)
        return not seen

    def count(self, request: dict[str, Any]) -> None:
        with self._lock:
            self.requests += 1
            self.bodies.append(request)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def __enter__(self) -> ScriptedServer:
        threading.Thread(target=self.serve_forever, name="openai-server", daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
        self.server_close()
