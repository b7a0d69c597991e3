"""The web UI's static shell at ``/``: ``index.html`` and its assets, built
from ``webui/`` (npm + Vite, ``make install``) into ``webui/dist`` inside this
package, so installing or running ragkit needs no Node toolchain.

The shell is served without a key (it holds no data); every call it makes
goes to the authenticated API with the key the user typed, kept in the
tab's ``sessionStorage`` and sent in a header, never in a URL.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from starlette.responses import FileResponse, PlainTextResponse, Response
from starlette.staticfiles import StaticFiles

DIST = Path(__file__).resolve().parent / "webui" / "dist"
SHELL = "/"
NOT_BUILT = ("the web UI is not built in this installation (ragkit/server/webui/dist is missing): "
             "run `make install` (npm ci && npm run build in webui/); the HTTP API works without it")
HEADERS = {
    # Only this server's own scripts and styles; WebGL needs no more. No framing (clickjacking).
    "Content-Security-Policy": ("default-src 'self'; img-src 'self' data: blob:; style-src 'self' 'unsafe-inline'; "
                                "frame-ancestors 'none'; base-uri 'none'; form-action 'none'"),
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
}


def public_paths() -> frozenset[str]:
    """The shell's paths, served without a key: ``/`` and each built asset."""
    assets = DIST / "assets"
    files = {f"/assets/{p.name}" for p in assets.iterdir() if p.is_file()} if assets.is_dir() else set()
    return frozenset({SHELL, *files})


def mount(app: FastAPI) -> None:
    @app.get(SHELL, include_in_schema=False)
    async def index() -> Response:
        page = DIST / "index.html"
        if not page.is_file():
            return PlainTextResponse(NOT_BUILT, status_code=503)
        return FileResponse(page, headers={**HEADERS, "Cache-Control": "no-cache"})

    if (DIST / "assets").is_dir():
        app.mount("/assets", StaticFiles(directory=DIST / "assets"), name="webui-assets")
