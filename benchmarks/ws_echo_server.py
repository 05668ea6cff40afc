"""The wire anchor: a bare websockets echo server (uvloop, no compression), no environment."""

import asyncio
import sys

import uvloop
from websockets.asyncio.server import serve


async def echo(ws):
    async for message in ws:
        await ws.send(message)


async def main():
    async with serve(echo, "127.0.0.1", 0, compression=None, ping_interval=None) as server:
        port = server.sockets[0].getsockname()[1]
        print(f"ws://127.0.0.1:{port}", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)  # until stdin closes


uvloop.run(main())
