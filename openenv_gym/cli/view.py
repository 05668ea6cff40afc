"""`openenv-gym view episodes.jsonl`: browse the episodes `openenv-gym rollout --output` wrote, in a local web
page: filter them by return and by task, see a histogram of returns, and read one episode turn by turn (tool
calls and tool results apart). The page reads the file again on reload, so a rollout still running shows up."""

from __future__ import annotations

import argparse
import contextlib
import sys
import webbrowser
from pathlib import Path

DEFAULT_PORT = 8090


def add_view(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("view", help="browse an episodes file (openenv-gym rollout --output) in a web page",
                                 description=__doc__)
    parser.add_argument("episodes", type=Path, help="a JSON-lines file of episodes")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT,
                        help=f"port (0 picks a free one; default {DEFAULT_PORT})")
    parser.add_argument("--open", action="store_true", help="open the page in the default browser")
    parser.set_defaults(run=run_view)


def run_view(args: argparse.Namespace) -> None:
    from openenv_gym.web.viewer import ViewerServer

    if not args.episodes.is_file():
        sys.exit(f"openenv-gym view: {args.episodes} is not a file; write one with "
                 "`openenv-gym rollout ... --output episodes.jsonl`")
    try:
        server = ViewerServer(args.episodes, args.host, args.port)
    except OSError as exc:
        sys.exit(f"openenv-gym view: cannot serve on {args.host}:{args.port} ({exc.strerror or exc}); "
                 "pass --port 0 for a free port")
    count, bad = len(server.episodes.summaries), server.episodes.bad_line_count
    print(f"{count:,} episodes in {args.episodes}" + (f" ({bad:,} unreadable lines)" if bad else ""))
    print(f"open {server.url} (Ctrl-C to stop)", flush=True)
    if args.open:
        webbrowser.open(server.url)
    with contextlib.suppress(KeyboardInterrupt), server:
        server.serve_forever()
