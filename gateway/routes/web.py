"""The web client at ``/`` and the API reference at ``/docs`` and ``/redoc``, all served locally.

Every page is sent with a Content-Security-Policy (:data:`CLIENT_HEADERS`, :data:`DOCS_HEADERS`),
``X-Frame-Options: DENY``, ``Referrer-Policy: no-referrer`` and ``nosniff``, and answers ``HEAD``
as well as ``GET``.

The client is built from ``web/`` (``npm ci && npm run build``) into ``gateway/static/``; the
same build copies Swagger UI and ReDoc there, so no page loads anything from another origin. An
instance installed without Node.js serves a short page at ``/`` saying how to build the client.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse, Response
from fastapi.staticfiles import StaticFiles

from gateway.routes import answer_head

STATIC_DIR = Path(__file__).resolve().parent.parent / "static"

_NOT_BUILT = """<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>Confer</title></head><body><h1>Confer</h1>
<p>The web client is not built. Install Node.js 20 or later and run
<code>cd web &amp;&amp; npm ci &amp;&amp; npm run build</code> (<code>make run</code> does it when
Node.js is present). The API reference is at <a href="/docs">/docs</a>.</p></body></html>"""

_PAGE = {
    # No page of ours is meant to be framed (clickjacking), nor to tell another site which
    # page of this instance linked to it.
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
}

# The client keeps its tokens in localStorage, so a script injected into it could take them:
# it runs only its own bundle (no inline script, no eval, no other origin), styles only from its
# own stylesheets (it sets none inline), shows images of its own origin and the blob:/data:
# URLs it makes, and talks only to its own origin ('self' also matches ws:/wss: of the same
# host in CSP Level 3, which the client's WebSocket needs).
CLIENT_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self';"
    " img-src 'self' data: blob:; connect-src 'self'; font-src 'self'; worker-src 'self';"
    " object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    **_PAGE,
}

# The docs pages may load nothing from another origin: ReDoc's bundle links its logo from
# cdn.redoc.ly, which this policy stops in the browser before any request leaves. FastAPI's
# pages start Swagger UI and ReDoc with an inline script, and both set inline styles.
DOCS_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self' 'unsafe-inline';"
    " style-src 'self' 'unsafe-inline'; img-src 'self' data:; worker-src 'self' blob:;"
    " connect-src 'self'; font-src 'self' data:; object-src 'none'; base-uri 'none';"
    " frame-ancestors 'none'",
    **_PAGE,
}

router = APIRouter(include_in_schema=False)


@router.get("/docs")
async def swagger_ui() -> HTMLResponse:
    """Swagger UI with its script and style from ``/static/swagger/`` (no CDN)."""
    page = get_swagger_ui_html(
        openapi_url="/openapi.json",
        title="Confer — API reference",
        swagger_js_url="/static/swagger/swagger-ui-bundle.js",
        swagger_css_url="/static/swagger/swagger-ui.css",
        swagger_favicon_url="/static/favicon.svg",
    )
    page.headers.update(DOCS_HEADERS)
    return page


@router.get("/redoc")
async def redoc() -> HTMLResponse:
    """ReDoc from ``/static/redoc/`` (no CDN, no web fonts from Google)."""
    page = get_redoc_html(
        openapi_url="/openapi.json",
        title="Confer — API reference",
        redoc_js_url="/static/redoc/redoc.standalone.js",
        redoc_favicon_url="/static/favicon.svg",
        with_google_fonts=False,
    )
    page.headers.update(DOCS_HEADERS)
    return page


@router.get("/")
async def client() -> Response:
    """The single-page client (its routes live in the URL fragment, so only ``/`` is served)."""
    index = STATIC_DIR / "index.html"
    if index.is_file():
        return FileResponse(index, headers={"Cache-Control": "no-cache", **CLIENT_HEADERS})
    return HTMLResponse(_NOT_BUILT, headers=CLIENT_HEADERS)


answer_head(router)


def install_web(app: FastAPI) -> None:
    """Add the client, the docs pages and ``/static`` (404s while the client is unbuilt)."""
    app.include_router(router)
    app.mount("/static", StaticFiles(directory=STATIC_DIR, check_dir=False), name="static")
