"""A bare WebSocket over a plain socket, for abusive clients the real ones never are: it sends frames in part,
fragments without end, and never reads unless asked. Loopback only (the tests and `make bench` use it)."""

from __future__ import annotations

import base64
import os
import socket
from urllib.parse import urlsplit

import orjson

NO_MASK = b"\0\0\0\0"  # a client frame must carry a mask; a zero one leaves the payload as it is


def open_raw(url: str, timeout: float = 10.0) -> socket.socket:
    """A socket past the WebSocket handshake with the server at ws://HOST:PORT."""
    parts = urlsplit(url)
    assert parts.hostname is not None and parts.hostname.startswith("127."), "abusive clients talk to loopback only"
    sock = socket.create_connection((parts.hostname, parts.port), timeout=timeout)
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall((f"GET / HTTP/1.1\r\nHost: {parts.hostname}:{parts.port}\r\nUpgrade: websocket\r\n"
                  f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
    response = b""
    while b"\r\n\r\n" not in response:
        chunk = sock.recv(4096)
        if not chunk:
            raise ConnectionError("the server closed the connection during the handshake")
        response += chunk
    status = response.split(b"\r\n", 1)[0]
    if b" 101 " not in status:
        raise ConnectionError(f"handshake refused: {status.decode()}")
    return sock


def frame_header(length: int, fin: bool = True, opcode: int = 1) -> bytes:
    """The header of a masked client frame of `length` payload bytes (opcode 1: text, 0: continuation)."""
    first = bytes([(0x80 if fin else 0) | opcode])
    if length < 126:
        size = bytes([0x80 | length])
    elif length < 2**16:
        size = bytes([0x80 | 126]) + length.to_bytes(2, "big")
    else:
        size = bytes([0x80 | 127]) + length.to_bytes(8, "big")
    return first + size + NO_MASK


def frame(messages: list[dict], fin: bool = True, opcode: int = 1) -> bytes:
    payload = orjson.dumps(messages)
    return frame_header(len(payload), fin, opcode) + payload


def read_frame(sock: socket.socket) -> list:
    """Read one unfragmented server frame (servers do not mask) and decode its JSON."""
    head = _read_exactly(sock, 2)
    length = head[1] & 0x7F
    if length == 126:
        length = int.from_bytes(_read_exactly(sock, 2), "big")
    elif length == 127:
        length = int.from_bytes(_read_exactly(sock, 8), "big")
    return orjson.loads(_read_exactly(sock, length))


def _read_exactly(sock: socket.socket, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise ConnectionError("the server closed the connection")
        data += chunk
    return data


def closed_by_server(sock: socket.socket, within: float) -> bool:
    """Whether the server ends the connection within `within` seconds (what it sends meanwhile is read)."""
    sock.settimeout(within)
    try:
        while sock.recv(65536):
            pass
    except TimeoutError:
        return False
    except ConnectionResetError:
        pass
    return True
