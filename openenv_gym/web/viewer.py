"""The episode viewer's server (`openenv-gym view episodes.jsonl`): Python's threaded HTTP server answers the
page (viewer_pages) and two JSON routes, on this machine only unless told otherwise.

    GET /api/episodes      every episode's summary, read anew from the file (a rollout still writing it shows
                           its new episodes), and the lines that could not be read
    GET /api/episodes/N    episode N whole
"""

from __future__ import annotations

from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson

from openenv_gym.web import viewer_pages
from openenv_gym.web.episodes import EpisodeFile

API = "/api/episodes"


class ViewerServer(ThreadingHTTPServer):
    daemon_threads = True  # a browser's open connections do not hold the command up at Ctrl-C

    def __init__(self, path: Path, host: str = "127.0.0.1", port: int = 0) -> None:
        self.episodes = EpisodeFile(path)
        self.episodes.refresh()  # an unreadable file fails here, before the page is offered
        self.pages = viewer_pages()
        super().__init__((host, port), _Handler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}/"


class _Handler(BaseHTTPRequestHandler):
    server: ViewerServer

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        if path in self.server.pages:
            body, kind = self.server.pages[path]
            self._send(HTTPStatus.OK, body.encode(), kind)
        elif path == API:
            self._listing()
        elif path.startswith(f"{API}/"):
            self._episode(path.removeprefix(f"{API}/"))
        else:
            self._error(HTTPStatus.NOT_FOUND, f"no route {path}: the page is at /, the episodes at {API} and "
                                              f"{API}/N")

    def _listing(self) -> None:
        episodes = self.server.episodes
        try:
            episodes.refresh()
        except OSError as exc:
            self._error(HTTPStatus.SERVICE_UNAVAILABLE, f"cannot read {episodes.path}: {exc}")
            return
        self._json(HTTPStatus.OK, {"file": str(episodes.path), "episodes": episodes.summaries,
                                   "bad_lines": episodes.bad_lines, "bad_line_count": episodes.bad_line_count})

    def _episode(self, text: str) -> None:
        if not text.isdigit():
            self._error(HTTPStatus.NOT_FOUND, f"episodes are numbered 0, 1, ...: {API}/N, not {text!r}")
            return
        try:
            self._json(HTTPStatus.OK, self.server.episodes.episode(int(text)))
        except IndexError as exc:
            self._error(HTTPStatus.NOT_FOUND, str(exc))
        except OSError as exc:
            self._error(HTTPStatus.SERVICE_UNAVAILABLE, f"cannot read {self.server.episodes.path}: {exc}")

    def _json(self, status: HTTPStatus, value: Any) -> None:
        self._send(status, orjson.dumps(value), "application/json")

    def _error(self, status: HTTPStatus, message: str) -> None:
        self._json(status, {"error": {"code": status.name.lower(), "message": message}})

    def _send(self, status: HTTPStatus, body: bytes, kind: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")  # the file may grow between two loads
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: a line per request would bury the URL the command printed
