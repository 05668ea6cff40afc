"""The APIs the intercepting model endpoint speaks, and which one a request's route is, sans I/O.

    call = match("POST", "/v1/messages")       # Call(dialect=ANTHROPIC, kind="turn")
    request = call.read(body)                  # ChatRequest: chat-completions messages and tools, whatever the API
    content_type, data = call.answer(message, model, reply_id, request)   # in the program's own API, streamed or not
    call.dialect.error(404, "...")             # an error body in its API's shape

Every dialect reads into one shape, so that a session sees the same `info["messages"]` and `info["tools"]`
whatever its program speaks (`info["dialect"]` says which), and writes the policy's assistant message back in it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from openenv_gym.protocol import anthropic_messages, gemini, openai_chat, openai_responses
from openenv_gym.protocol.openai_chat import ChatRequest

JSON, EVENTS = "application/json", "text/event-stream; charset=utf-8"


@dataclass(frozen=True)
class Dialect:
    name: str
    error_body: Callable[[int, str, str, str | None], dict[str, Any]]  # (status, message, code, param)
    reply_prefix: str  # of its replies' ids
    strict_model: bool  # a request for another model is refused (chat); else answered as the served one


def _openai_error(status: int, message: str, code: str, param: str | None) -> dict[str, Any]:
    kind = "authentication_error" if status == 401 else "invalid_request_error"
    return openai_chat.error_body(message, kind, code, param)


CHAT = Dialect("chat", _openai_error, "chatcmpl", True)
RESPONSES = Dialect("responses", _openai_error, "resp", False)
ANTHROPIC = Dialect("anthropic", lambda status, message, code, param: anthropic_messages.error_body(status, message),
                    "msg", False)
GEMINI = Dialect("gemini", lambda status, message, code, param: gemini.error_body(status, message), "resp", False)


@dataclass(frozen=True)
class Call:
    """What a request asks: a model `turn`, a token `count`, the `models` list; in its dialect."""
    dialect: Dialect
    kind: str
    model: str = ""  # the path's (Gemini names the model there)
    stream: bool = False  # the path's (Gemini's streamGenerateContent)

    def read(self, body: Any, earlier: list[dict[str, Any]] | None = None) -> ChatRequest:
        """The request of a turn, in the one shape; ChatRequestError in words of its API."""
        if self.dialect is RESPONSES:
            return openai_responses.responses_request(body, earlier)
        if self.dialect is ANTHROPIC:
            return anthropic_messages.messages_request(body)
        if self.dialect is GEMINI:
            return gemini.gemini_request(body, self.model, self.stream)
        return openai_chat.chat_request(body)

    def answer(self, message: dict[str, Any], model: str, reply_id: str, request: ChatRequest) -> tuple[str, bytes]:
        """(content type, body) answering `request` with the assistant `message`, streamed if it asked."""
        if self.dialect is RESPONSES:
            return (EVENTS, openai_responses.response_events(message, model, reply_id, request)) if request.stream \
                else (JSON, orjson.dumps(openai_responses.response_object(message, model, reply_id, request)))
        if self.dialect is ANTHROPIC:
            return (EVENTS, anthropic_messages.message_events(message, model, reply_id)) if request.stream \
                else (JSON, orjson.dumps(anthropic_messages.message_object(message, model, reply_id)))
        if self.dialect is GEMINI:
            return (EVENTS, gemini.content_events(message, model, reply_id)) if request.stream \
                else (JSON, orjson.dumps(gemini.content_response(message, model, reply_id)))
        return (EVENTS, openai_chat.completion_events(message, model, reply_id, request.include_usage)) \
            if request.stream else (JSON, orjson.dumps(openai_chat.completion(message, model, reply_id)))

    def aside(self, body: Any, model: str) -> dict[str, Any]:
        """The answer of a call that is no turn: the models list, a token count."""
        if self.kind == "models":
            return openai_chat.models_list(model)
        return anthropic_messages.count_tokens(body) if self.dialect is ANTHROPIC else gemini.count_tokens(body)


def match(method: str, route: str) -> Call | None:
    """The call a request's method and route (the path after the key, without the query) make, or None."""
    if method == "GET" and route == openai_chat.MODELS_PATH:
        return Call(CHAT, "models")
    if method != "POST":
        return None
    if route == openai_chat.CHAT_PATH:
        return Call(CHAT, "turn")
    if route == openai_responses.RESPONSES_PATH:
        return Call(RESPONSES, "turn")
    if route == anthropic_messages.MESSAGES_PATH:
        return Call(ANTHROPIC, "turn")
    if route == anthropic_messages.COUNT_TOKENS_PATH:
        return Call(ANTHROPIC, "count")
    found = gemini.route(route)
    if found is not None:
        model, method_name = found
        kind = "count" if method_name == "countTokens" else "turn"
        return Call(GEMINI, kind, model, method_name == "streamGenerateContent")
    return None


def dialect_of(route: str) -> Dialect:
    """The dialect a route that is not served belongs to, for its error's shape."""
    if route.startswith(anthropic_messages.MESSAGES_PATH):
        return ANTHROPIC
    if route.startswith(("/v1beta/", "/v1alpha/", "/v1/models/")):
        return GEMINI
    return RESPONSES if route.startswith(openai_responses.RESPONSES_PATH) else CHAT


SERVED = (f"POST {openai_chat.CHAT_PATH}, POST {openai_responses.RESPONSES_PATH}, POST "
          f"{anthropic_messages.MESSAGES_PATH} (and /count_tokens), POST /v1beta/models/MODEL:generateContent "
          f"(and :streamGenerateContent, :countTokens), GET {openai_chat.MODELS_PATH}")
