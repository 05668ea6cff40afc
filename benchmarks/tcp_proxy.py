"""A TCP proxy on loopback that cuts every connection through it on command, as a flaky network would."""

from __future__ import annotations

import asyncio
import contextlib


class CuttingProxy:
    """Forwards 127.0.0.1:<port> to 127.0.0.1:<target>. `cut()` aborts every connection (both ends see a
    reset, no WebSocket close frame); while `refusing`, new connections are aborted at once."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.refusing = False
        self.pairs: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = set()
        self.cuts = 0

    async def __aenter__(self) -> CuttingProxy:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.server.close()
        self.cut()
        await self.server.wait_closed()

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    async def _serve(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        if self.refusing:
            client_writer.transport.abort()
            return
        try:
            server_reader, server_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            client_writer.transport.abort()
            return
        pair = (client_writer, server_writer)
        self.pairs.add(pair)
        try:
            await asyncio.gather(_pipe(client_reader, server_writer), _pipe(server_reader, client_writer))
        finally:
            self.pairs.discard(pair)

    def cut(self) -> None:
        self.cuts += 1
        for client_writer, server_writer in list(self.pairs):
            client_writer.transport.abort()
            server_writer.transport.abort()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError, OSError):
        while data := await reader.read(2**16):
            writer.write(data)
            await writer.drain()
    writer.transport.abort()
