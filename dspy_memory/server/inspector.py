"""The web inspector at `/ui` (docs/server.md): one server-rendered page, inline CSS and a small
vanilla script, no build step and nothing fetched from elsewhere.

The page holds no data: it asks the `/v1` routes with the API key typed into it (kept in the
tab's sessionStorage), so it shows exactly what that key may reach. Memory text is untrusted: the
script builds every element with `textContent` and `setAttribute`, never HTML from data, and the
page's Content-Security-Policy runs only its own script (a nonce per response), so text that looks
like markup is shown as text and an injected handler could not run anyway.
"""

from __future__ import annotations

import secrets
from functools import cache
from importlib import resources

from fastapi import APIRouter
from fastapi.responses import HTMLResponse

NONCE = "{{nonce}}"  # where the page's <style> and <script> take this response's nonce


@cache
def page_template() -> str:
    """The page (dspy_memory/server/inspector.html), read once."""
    return resources.files("dspy_memory.server").joinpath("inspector.html").read_text(encoding="utf-8")


def security_headers(nonce: str) -> dict[str, str]:
    """Only the page's own style and script run; it talks to this origin only."""
    policy = "; ".join(
        [
            "default-src 'none'",
            f"script-src 'nonce-{nonce}'",
            f"style-src 'nonce-{nonce}'",
            "connect-src 'self'",
            "img-src 'self' data:",
            "base-uri 'none'",
            "form-action 'none'",
            "frame-ancestors 'none'",
        ]
    )
    return {
        "Content-Security-Policy": policy,
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "Cache-Control": "no-store",
    }


def inspector_router() -> APIRouter:
    """`GET /ui`: the inspector page (no key needed: it holds no data)."""
    router = APIRouter()

    @router.get("/ui", response_class=HTMLResponse, include_in_schema=False)
    def inspector() -> HTMLResponse:
        nonce = secrets.token_urlsafe(16)
        return HTMLResponse(page_template().replace(NONCE, nonce), headers=security_headers(nonce))

    return router
