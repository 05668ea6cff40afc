"""The wire anchors, no environment: websockets + orjson on uvloop, no compression.

--mode echo:  send back each frame as it came (the single round-trip anchor).
--mode batch: decode a batch frame of requests and answer each with a step-shaped response in one
              frame (the throughput limit of batched JSON over WebSocket), over --workers processes
              sharing the port like openenv-gym serve.
Prints its ws:// URL, then serves until stdin closes.
"""

import argparse
import asyncio
import multiprocessing
import os
import socket
import sys

import orjson
import uvloop
from websockets.asyncio.server import serve


async def echo(ws):
    async for message in ws:
        await ws.send(message)


async def batch(ws):
    async for message in ws:
        answers = [{"id": r["id"], "obs": r["action"], "reward": 0.0, "terminated": False, "truncated": False,
                    "info": {}} for r in orjson.loads(message)]
        await ws.send(orjson.dumps(answers), text=True)


def bound_socket(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind(("127.0.0.1", port))
    return sock


async def run(handler, port: int, ready) -> None:
    async with serve(handler, sock=bound_socket(port), compression=None, ping_interval=None, max_size=None,
                     backlog=4096):
        ready.release()
        await asyncio.Future()


def worker(mode: str, port: int, ready) -> None:
    uvloop.run(run(echo if mode == "echo" else batch, port, ready))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=["echo", "batch"], default="echo")
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    reserved = bound_socket(0)
    port = reserved.getsockname()[1]
    context = multiprocessing.get_context("fork")
    ready = context.Semaphore(0)
    processes = [context.Process(target=worker, args=(args.mode, port, ready), daemon=True)
                 for _ in range(args.workers)]
    for process in processes:
        process.start()
    for _ in processes:
        ready.acquire()
    print(f"ws://127.0.0.1:{port}", flush=True)
    while os.read(sys.stdin.fileno(), 4096):
        pass
    for process in processes:
        process.terminate()


if __name__ == "__main__":
    main()
