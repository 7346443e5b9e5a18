"""The web UI's files: ``agentica serve`` serves the built React app (``make web`` writes it
into ``agentica_team/web_dist``; the ``web_dir`` setting points elsewhere).

Any GET that is not an API path and names no file gets ``index.html`` (the app routes in the
browser); ``/api/...`` and ``/v1/...`` paths that no route matched stay JSON 404s. Hashed assets
are cached for a year, ``index.html`` never; every answer carries a strict Content Security
Policy (scripts and connections to this origin only). Paths that leave the folder, through
``..`` or a symlink, are refused by Starlette's ``StaticFiles``. When the app was not built,
``/`` says how to build it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from starlette.exceptions import HTTPException
from starlette.responses import HTMLResponse, Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

__all__ = ["BUILT", "SECURITY_HEADERS", "WebUI", "not_built"]

BUILT = Path(__file__).parent / "web_dist"
"""Where ``make web`` (``vite build``) writes the app."""

SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; connect-src 'self'; "
    "img-src 'self' data: blob:; style-src 'self' 'unsafe-inline'; object-src 'none'; "
    "base-uri 'none'; frame-ancestors 'none'; form-action 'self'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
}


def _api(path: str) -> bool:
    """Whether ``path`` (without its leading slash) is under ``/api`` or ``/v1``."""
    return path.split("/", 1)[0] in ("api", "v1")


class WebUI(StaticFiles):
    """The built app in ``directory``, with the fallback to ``index.html`` and the headers
    described in the module docstring."""

    def __init__(self, directory: Path) -> None:
        super().__init__(directory=directory, html=True, check_dir=True)

    async def get_response(self, path: str, scope: Scope) -> Response:
        # ``path`` is normalised (``/api/x/../../etc`` became ``etc``): judge the path as sent
        sent = str(scope.get("path", "")).lstrip("/")
        if _api(sent) or _api(path) or ".." in sent.split("/"):
            raise HTTPException(404, "no such API route: see /docs for the routes")
        try:
            response = await super().get_response(path, scope)
        except HTTPException as exc:
            if exc.status_code != 404 or "." in path.rsplit("/", 1)[-1]:
                raise
            response = await super().get_response("index.html", scope)
        return _headed(response, path)


def _headed(response: Response, path: str) -> Response:
    response.headers.update(SECURITY_HEADERS)
    if path.startswith("assets/") and response.status_code == 200:
        response.headers["Cache-Control"] = "public, max-age=31536000, immutable"
    else:
        response.headers["Cache-Control"] = "no-cache"
    return response


def not_built(directory: Path) -> Any:
    """The ASGI app answering in place of a web UI that was not built."""
    text = (
        "<!doctype html><meta charset=utf-8><title>agentica</title>"
        "<h1>The web UI is not built</h1>"
        f"<p>No <code>index.html</code> in <code>{directory}</code>. Build it with "
        "<code>make web</code> (Node.js 20.19 or newer), or use the API: <a href=/docs>/docs</a>."
    )

    async def app(scope: Scope, receive: Any, send: Any) -> None:
        if _api(str(scope.get("path", "/")).lstrip("/")):
            raise HTTPException(404, "no such API route: see /docs for the routes")
        response = HTMLResponse(text, status_code=404, headers=SECURITY_HEADERS)
        await response(scope, receive, send)

    return app
