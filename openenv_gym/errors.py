"""Typed errors shared by client and server.

Every protocol error code has one exception class, so a user can `except NoEpisodeError`
and the server can raise the same class internally to answer with its code.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = [
    "BadFrameError", "BadRequestError", "CapacityError", "ConnectionLostError", "EnvError", "EnvNotFoundError",
    "ErrorCode", "InvalidActionError", "ModelServerError", "NoEpisodeError", "OpenEnvGymError", "ProtocolError",
    "RequestTimeoutError", "ResumeFailedError", "ServerRefusedError", "ServerStartError", "ServerUnreachableError",
    "StepTimeoutError", "TooLargeError", "UnauthorizedError", "UnknownOpError", "UnknownSessionError",
    "UnmetNeedError",
]


class ErrorCode(StrEnum):
    BAD_FRAME = "bad_frame"  # the frame is not a JSON text frame holding an object or an array
    BAD_REQUEST = "bad_request"  # a request lacks a field or has one of the wrong type
    UNKNOWN_OP = "unknown_op"
    UNKNOWN_SESSION = "unknown_session"  # no such session on this connection
    NO_EPISODE = "no_episode"  # step before reset, or after the episode ended
    INVALID_ACTION = "invalid_action"  # the action is neither text nor a tool-call object
    ENV_ERROR = "env_error"  # the environment raised; its session is ended
    TIMEOUT = "timeout"  # the environment took longer than the step timeout; its session is ended
    CAPACITY = "capacity"  # the server holds its maximum number of sessions
    UNAUTHORIZED = "unauthorized"
    TOO_LARGE = "too_large"
    RESUME_FAILED = "resume_failed"  # no connection to resume holds this token: its sessions are gone


class OpenEnvGymError(Exception):
    """Base class of every error openenv_gym raises on purpose."""


class ProtocolError(OpenEnvGymError):
    """An error answered by the server (or raised while building its answer), with a wire code."""

    code: ErrorCode = ErrorCode.BAD_REQUEST

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def to_wire(self) -> dict:
        return {"code": str(self.code), "message": self.message}


class BadFrameError(ProtocolError):
    code = ErrorCode.BAD_FRAME


class BadRequestError(ProtocolError):
    code = ErrorCode.BAD_REQUEST


class UnknownOpError(ProtocolError):
    code = ErrorCode.UNKNOWN_OP


class UnknownSessionError(ProtocolError):
    code = ErrorCode.UNKNOWN_SESSION


class NoEpisodeError(ProtocolError):
    code = ErrorCode.NO_EPISODE


class InvalidActionError(ProtocolError):
    code = ErrorCode.INVALID_ACTION


class EnvError(ProtocolError):
    code = ErrorCode.ENV_ERROR


class StepTimeoutError(ProtocolError):
    code = ErrorCode.TIMEOUT


class CapacityError(ProtocolError):
    code = ErrorCode.CAPACITY


class UnauthorizedError(ProtocolError):
    code = ErrorCode.UNAUTHORIZED


class TooLargeError(ProtocolError):
    code = ErrorCode.TOO_LARGE


class ResumeFailedError(ProtocolError):
    code = ErrorCode.RESUME_FAILED


class ConnectionLostError(OpenEnvGymError):
    """The connection to the server closed while requests were waiting for answers."""


class ServerUnreachableError(OpenEnvGymError, ConnectionError):
    """No WebSocket connection could be opened to the server."""


class ServerRefusedError(ServerUnreachableError):
    """The server's address refused the connection: no process listens there, so no session of it lives on."""


class RequestTimeoutError(OpenEnvGymError, TimeoutError):
    """No answer came within the client's request timeout (the server may still be working)."""


class ServerStartError(OpenEnvGymError):
    """A server could not be started (a local one for the embedded default, or `serve`'s on a port in use)."""


class EnvNotFoundError(OpenEnvGymError, LookupError):
    """No shipped or imported environment has this name."""


class ModelServerError(OpenEnvGymError):
    """The model server a policy talks to refused a request or kept failing (after its retries)."""


class UnmetNeedError(OpenEnvGymError):
    """An environment needs what cannot be reached from here (a value of its framework's global config that is not
    set, say): not a fault of its code. The import records it, and its resets are refused saying what to provide.
    `details`: what it names (config keys and their values), by which a need recorded already is known again."""

    def __init__(self, message: str, details: list[str] | None = None) -> None:
        super().__init__(message)
        self.details = details or []


class SandboxUnavailableError(OpenEnvGymError):
    """This machine cannot sandbox the episodes of an environment that runs programs (no bubblewrap, no namespaces):
    the server refuses to run it unconfined unless told so (--no-sandbox)."""


ERROR_CLASSES: dict[str, type[ProtocolError]] = {
    cls.code: cls
    for cls in (
        BadFrameError,
        BadRequestError,
        UnknownOpError,
        UnknownSessionError,
        NoEpisodeError,
        InvalidActionError,
        EnvError,
        StepTimeoutError,
        CapacityError,
        UnauthorizedError,
        TooLargeError,
        ResumeFailedError,
    )
}


def error_from_wire(error: dict) -> ProtocolError:
    """Turn a wire error object into the exception of its code."""
    cls = ERROR_CLASSES.get(error.get("code", ""), ProtocolError)
    return cls(str(error.get("message", "")))
