"""The intercepting model endpoint: a model server whose model is the sessions' policy, in four APIs (OpenAI chat
completions and Responses, Anthropic Messages, Gemini: protocol/dialects.py).

Programs that call a model (Verifiers v1 harnesses, agent programs, CLI agents) are pointed here, each at an
address of its own (`http://127.0.0.1:PORT/<key>/v1`, or `/v1` with the key as its API key: a bearer token,
`x-api-key` or `x-goog-api-key`). A model request sent there becomes that session's next observation; the action
the client steps with is the answer, in the program's API, as JSON or as server-sent events when it streams.
Each worker runs one, on loopback, where its programs run: the worker's public port is shared by every worker of
the server, and a program must reach the worker that holds its session. Keys are random (128 bits) and known only
to the program given one.

HTTP/1.1 with keep-alive, parsed by h11. Bodies and the time a request may take to arrive are bounded; the wait
for the policy's answer is bounded by the session, whose end answers a waiting request with an error.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import socket
from collections import OrderedDict
from http import HTTPStatus

import h11
import orjson

from openenv_gym.adapters.policy_turns import Ask, TurnRefused
from openenv_gym.episode.assistant import conversation_message
from openenv_gym.protocol.dialects import CHAT, RESPONSES, SERVED, Call, Dialect, dialect_of, match
from openenv_gym.protocol.openai_chat import ChatRequestError
from openenv_gym.server.metrics import ServerMetrics

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 32 * 2**20  # a long agent conversation, whole, in every request
DRAINED_BYTES = 4 * MAX_BODY_BYTES  # a body over the bound is read and dropped up to this, then the connection cut
ARRIVAL_TIMEOUT = 30.0  # seconds a request may take to arrive whole once it started
IDLE_TIMEOUT = 300.0  # seconds a kept-alive connection may stay silent between requests
ENDED_KEYS_KEPT = 65_536  # ended leases remembered, so that a late request hears why it is refused
MAX_ERRORS_KEPT = 20  # endpoint errors kept per lease for its episode's info
RESPONSES_KEPT = 8  # a lease's last Responses conversations, for a request that goes on from one by its id
KEY_HEADERS = (b"authorization", b"x-api-key", b"x-goog-api-key")
TRACE_HEADER = b"x-session-id"  # the trace a request is of, as Verifiers' model clients name it (its id)
MAX_TRACE_CHARS = 200


class BodyTooLarge(ValueError):
    """A request whose body is over MAX_BODY_BYTES: refused in its API's shape, and the connection closed."""

    def __init__(self, request: h11.Request) -> None:
        super().__init__(f"the body is over {MAX_BODY_BYTES // 2**20} MiB")
        self.request = request


class Lease:
    """One program's address on the endpoint (see adapters/endpoint.py)."""

    def __init__(self, endpoint: ModelEndpointServer, ask: Ask, model: str, key: str, port: int,
                 own_server: asyncio.Server | None = None, any_model: bool = False) -> None:
        self.endpoint, self.ask, self.model, self.api_key = endpoint, ask, model, key
        self.any_model = any_model  # a request may name a model of its own (the policy answers it all the same)
        self.base_url = f"http://127.0.0.1:{port}/{key}/v1"
        self.errors: list[str] = []
        self.conversations: OrderedDict[str, list[dict]] = OrderedDict()  # Responses' previous_response_id
        self.ended = asyncio.Event()
        self._completions = 0
        self._own_server = own_server  # the lease's own listener (in its program's sandbox), closed with it

    def note(self, error: str) -> None:
        if len(self.errors) < MAX_ERRORS_KEPT:
            self.errors.append(error)

    def next_id(self, prefix: str = "chatcmpl") -> str:
        self._completions += 1
        return f"{prefix}-{self.api_key[:8]}-{self._completions}"

    def remember(self, reply_id: str, conversation: list[dict]) -> None:
        self.conversations[reply_id] = conversation
        if len(self.conversations) > RESPONSES_KEPT:
            self.conversations.popitem(last=False)

    def close(self) -> None:
        self.ended.set()
        self.endpoint.forget(self.api_key)
        if self._own_server is not None:
            self._own_server.close()


class ModelEndpointServer:
    """The endpoint of one worker; started on the first lease."""

    def __init__(self, metrics: ServerMetrics | None = None) -> None:
        self.metrics = metrics or ServerMetrics()
        self.port = 0
        self._leases: dict[str, Lease] = {}
        self._ended: OrderedDict[str, None] = OrderedDict()
        self._server: asyncio.Server | None = None
        self._starting = asyncio.Lock()

    async def open(self, ask: Ask, model: str, listener: socket.socket | None = None, any_model: bool = False) -> Lease:
        """A lease on the worker's loopback address; or, given `listener` (a listening socket in a program's
        sandbox, the only address it reaches), on that one."""
        key = secrets.token_urlsafe(16)
        if listener is not None:
            own = await asyncio.start_server(self._serve, sock=listener)
            lease = self._leases[key] = Lease(self, ask, model, key, listener.getsockname()[1], own, any_model)
            return lease
        if self._server is None:
            async with self._starting:
                if self._server is None:
                    self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, backlog=4096)
                    self.port = self._server.sockets[0].getsockname()[1]
        lease = self._leases[key] = Lease(self, ask, model, key, self.port, any_model=any_model)
        return lease

    def forget(self, key: str) -> None:
        if self._leases.pop(key, None) is not None:
            self._ended[key] = None
            if len(self._ended) > ENDED_KEYS_KEPT:
                self._ended.popitem(last=False)

    def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for lease in list(self._leases.values()):
            lease.close()

    # -- HTTP ----------------------------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        http = h11.Connection(h11.SERVER, max_incomplete_event_size=64 * 1024)
        try:
            while True:
                request = await self._request(http, reader)
                if request is None:
                    break
                status, content_type, body = await self._answer(*request)
                headers = [("content-type", content_type), ("content-length", str(len(body)))]
                if content_type.startswith("text/event-stream"):
                    headers.append(("cache-control", "no-cache"))
                writer.write(http.send(h11.Response(status_code=int(status), headers=headers))
                             + http.send(h11.Data(data=body)) + http.send(h11.EndOfMessage()))
                await writer.drain()
                if http.our_state is h11.MUST_CLOSE or http.their_state is h11.MUST_CLOSE:
                    break
                http.start_next_cycle()
        except BodyTooLarge as exc:
            self._refuse(http, writer, exc, *self._too_large(exc.request))
        except (h11.RemoteProtocolError, h11.LocalProtocolError, ValueError, TimeoutError) as exc:
            self._refuse(http, writer, exc)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:  # the worker stops: the connection ends with it, quietly
            pass
        finally:
            writer.close()

    def _lease_of(self, keys: list[str]) -> Lease | None:
        return next((self._leases[key] for key in keys if key in self._leases), None)

    def _too_large(self, request: h11.Request) -> tuple[Dialect, int]:
        """(the dialect, the status) a request whose body is too large is refused in; its lease hears of it."""
        keys, route = self._keys_and_route(request.target.decode("ascii", "replace").partition("?")[0],
                                           request.headers)
        lease = self._lease_of(keys)
        if lease is not None:
            lease.note(f"a request over {MAX_BODY_BYTES // 2**20} MiB to {route}")
        return dialect_of(route), HTTPStatus.REQUEST_ENTITY_TOO_LARGE

    @staticmethod
    def _refuse(http: h11.Connection, writer: asyncio.StreamWriter, exc: Exception, dialect: Dialect = CHAT,
                status: int = HTTPStatus.BAD_REQUEST) -> None:
        if http.our_state is not h11.SEND_RESPONSE:
            return
        body = orjson.dumps(dialect.error_body(int(status), f"bad HTTP request: {exc}", "bad_request", None))
        with contextlib.suppress(h11.LocalProtocolError, ConnectionError):
            writer.write(http.send(h11.Response(status_code=int(status), headers=[
                ("content-type", "application/json"), ("content-length", str(len(body))), ("connection", "close")]))
                + http.send(h11.Data(data=body)) + http.send(h11.EndOfMessage()))

    async def _request(self, http: h11.Connection, reader: asyncio.StreamReader) \
            -> tuple[h11.Request, bytes] | None:
        """The next request and its body; None when the peer closed (or stayed silent too long) between requests."""
        first = True
        request, body, received = None, bytearray(), 0
        while True:
            event = http.next_event()
            if event is h11.NEED_DATA:
                try:
                    async with asyncio.timeout(IDLE_TIMEOUT if first else ARRIVAL_TIMEOUT):
                        data = await reader.read(65536)
                except TimeoutError:
                    if first:
                        return None
                    raise
                http.receive_data(data)
                continue
            first = False
            if isinstance(event, h11.ConnectionClosed):
                return None
            if isinstance(event, h11.Request):
                request = event
            elif isinstance(event, h11.Data):
                received += len(event.data)
                if received <= MAX_BODY_BYTES:
                    body += event.data
                elif received > DRAINED_BYTES:  # (not worth reading to its end: the connection is cut)
                    assert request is not None
                    raise BodyTooLarge(request)
                else:  # (read to its end and dropped, so that the client hears why before the connection closes)
                    body.clear()
            elif isinstance(event, h11.EndOfMessage):
                assert request is not None
                if received > MAX_BODY_BYTES:
                    raise BodyTooLarge(request)
                return request, bytes(body)

    async def _answer(self, request: h11.Request, body: bytes) -> tuple[int, str, bytes]:
        path = request.target.decode("ascii", "replace").partition("?")[0]
        keys, route = self._keys_and_route(path, request.headers)
        method = request.method.decode()
        if method == "HEAD":  # (a client's probe that the server is there: Claude Code's)
            return HTTPStatus.OK, "application/json", b""
        call = match(method, route)
        dialect = call.dialect if call is not None else dialect_of(route)
        self.metrics.model_request(dialect.name)
        lease = self._lease_of(keys)
        if lease is None:
            if any(key in self._ended for key in keys):
                return _error(dialect, HTTPStatus.GONE, "this session's episode has ended: its program may not call "
                              "the model any more", "episode_ended")
            return _error(dialect, HTTPStatus.UNAUTHORIZED, "unknown key: use the base URL and API key this program "
                          "was given", "invalid_api_key")
        if call is None:
            lease.note(f"{method} {route}: not served (only {SERVED})")
            return _error(dialect, HTTPStatus.NOT_FOUND, f"{method} {route} is not served here; this endpoint "
                          f"serves {SERVED}", "not_found")
        if call.kind != "turn":
            return HTTPStatus.OK, "application/json", orjson.dumps(call.aside(_json_or_none(body), lease.model))
        return await self._turn(lease, call, body, _trace_of(request.headers))

    async def _turn(self, lease: Lease, call: Call, body: bytes, trace: str) -> tuple[int, str, bytes]:
        dialect = call.dialect
        try:
            parsed = orjson.loads(body)
            chat = call.read(parsed, self._earlier(lease, parsed) if dialect is RESPONSES else None)
        except orjson.JSONDecodeError as exc:
            lease.note(f"a request whose body is not JSON ({exc})")
            return _error(dialect, HTTPStatus.BAD_REQUEST, f"the body is not JSON: {exc}", "invalid_json")
        except ChatRequestError as exc:
            lease.note(f"a malformed {dialect.name} request: {exc}")
            return _error(dialect, exc.status, str(exc), "invalid_request", param=exc.param)
        chat.trace = trace
        if dialect.strict_model and chat.model and chat.model != lease.model and not lease.any_model:
            lease.note(f"a request for model {chat.model!r}, which is not served (the policy is {lease.model!r})")
            return _error(dialect, HTTPStatus.NOT_FOUND, f"the model {chat.model!r} is not served here: ask for "
                          f"{lease.model!r} (given to the program as OPENAI_MODEL)", "model_not_found")
        asking = asyncio.ensure_future(lease.ask(chat))
        ended = asyncio.ensure_future(lease.ended.wait())
        try:
            await asyncio.wait((asking, ended), return_when=asyncio.FIRST_COMPLETED)
        finally:
            ended.cancel()
        if not asking.done():
            asking.cancel()
            return _error(dialect, HTTPStatus.GONE, "this session's episode ended while the request waited",
                          "episode_ended")
        try:
            message = asking.result()
        except TurnRefused as exc:
            lease.note(str(exc))
            return _error(dialect, HTTPStatus.CONFLICT, str(exc), "request_refused")
        reply_id = lease.next_id(dialect.reply_prefix)
        if dialect is RESPONSES:
            lease.remember(reply_id, [*chat.messages, conversation_message(message)])
        content_type, data = call.answer(message, lease.model, reply_id, chat)
        return HTTPStatus.OK, content_type, data

    @staticmethod
    def _earlier(lease: Lease, body: object) -> list[dict] | None:
        """The conversation a Responses request goes on from (its previous_response_id's), if it names one."""
        named = body.get("previous_response_id") if isinstance(body, dict) else None
        if not named:
            return None
        if named not in lease.conversations:
            raise ChatRequestError(f"previous_response_id {named!r} is not one of this program's last "
                                   f"{RESPONSES_KEPT} responses: send the whole input", status=HTTPStatus.NOT_FOUND,
                                   param="previous_response_id")
        return lease.conversations[named]

    @staticmethod
    def _keys_and_route(path: str, headers: list[tuple[bytes, bytes]]) -> tuple[list[str], str]:
        """(the keys the request may be a lease's by, the API's path): from `/<key>/v1/...`, or from `/v1/...`
        (`/v1beta/...`) and the API key of its headers (a bearer token, x-api-key, x-goog-api-key)."""
        if path.startswith(("/v1/", "/v1beta/", "/v1alpha/")):
            keys = []
            for name, value in headers:
                name = name.lower()
                if name == b"authorization" and value[:7].lower() == b"bearer ":
                    keys.append(value[7:].decode("latin-1").strip())
                elif name in KEY_HEADERS[1:]:
                    keys.append(value.decode("latin-1").strip())
            return keys, path
        key, _, rest = path[1:].partition("/")
        return [key], "/" + rest


def _trace_of(headers: list[tuple[bytes, bytes]]) -> str:
    return next((value.decode("latin-1").strip()[:MAX_TRACE_CHARS] for name, value in headers
                 if name.lower() == TRACE_HEADER), "")


def _json_or_none(body: bytes) -> object:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return None


def _error(dialect: Dialect, status: int, message: str, code: str, param: str | None = None) -> tuple[int, str, bytes]:
    return status, "application/json", orjson.dumps(dialect.error_body(int(status), message, code, param))
