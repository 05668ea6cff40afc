"""The pages shipped inside the package, plain files with no CDN and no build step: the playground every server
answers at /web (play.html, play.js: each tab is one session over the native WebSocket), and the episode viewer
of `openenv-gym view` (view.html, view.js, viewer.py). Both use messages.js and style.css."""

from __future__ import annotations

from importlib.resources import files

TYPES = {"html": "text/html; charset=utf-8", "js": "text/javascript; charset=utf-8", "css": "text/css; charset=utf-8"}
SHARED = ("messages.js", "style.css")


def _assets(*names: str) -> dict[str, tuple[str, str]]:
    """{"/web/NAME": (body, content type)}, read once."""
    folder = files("openenv_gym") / "web"
    return {f"/web/{name}": ((folder / name).read_text(encoding="utf-8"), TYPES[name.rsplit(".", 1)[1]])
            for name in names}


def playground_pages() -> dict[str, tuple[str, str]]:
    """{path: (body, content type)} of the playground, served at /web by every env server."""
    pages = _assets("play.html", "play.js", *SHARED)
    for path in ("/web", "/web/", "/web/index.html"):
        pages[path] = pages["/web/play.html"]
    return pages


def viewer_pages() -> dict[str, tuple[str, str]]:
    """{path: (body, content type)} of the episode viewer, served at / by `openenv-gym view`."""
    pages = _assets("view.html", "view.js", *SHARED)
    for path in ("/", "/index.html"):
        pages[path] = pages["/web/view.html"]
    return pages
