"""The playground page, GET /web: static files shipped inside the package (openenv_gym/web/), no CDN and no
build step. The page speaks the native protocol over a WebSocket of its own: each tab is one session."""

from __future__ import annotations

from importlib.resources import files

WEB_PATH = "/web"
ASSETS = {"index.html": "text/html; charset=utf-8", "play.js": "text/javascript; charset=utf-8",
          "style.css": "text/css; charset=utf-8"}


def web_pages() -> dict[str, tuple[str, str]]:
    """{path: (body, content type)} of the page and its assets, read once."""
    folder = files("openenv_gym") / "web"
    pages = {f"{WEB_PATH}/{name}": ((folder / name).read_text(encoding="utf-8"), kind) for name, kind in ASSETS.items()}
    pages[WEB_PATH] = pages[f"{WEB_PATH}/index.html"]
    pages[f"{WEB_PATH}/"] = pages[WEB_PATH]
    return pages
