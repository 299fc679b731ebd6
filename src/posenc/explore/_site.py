"""What the explorer serves, apart from the web framework: its panels, its files, its limits and
the error a request answers with. Importing it needs nothing beyond NumPy (``posenc.explore``
imports without Flask; only starting the server needs it)."""

from __future__ import annotations

import concurrent.futures
import json
from collections.abc import Callable
from http import HTTPStatus
from importlib import resources
from typing import Any

from . import _panels_bias, _panels_files, _panels_rope, _panels_tables
from ._panel import Panel

#: The panels, in page order.
PANELS: tuple[Panel, ...] = (
    *_panels_tables.PANELS,
    *_panels_rope.PANELS,
    *_panels_files.PANELS,
    *_panels_bias.PANELS,
)
BY_NAME = {p.name: p for p in PANELS}
#: Seconds a computation may take before the request answers 503.
COMPUTE_SECONDS = 20.0
#: Seconds a client may stay silent while sending a request.
SOCKET_SECONDS = 30.0
#: Seconds within which a whole request (line, headers and body) must arrive.
REQUEST_SECONDS = 60.0
#: The most bytes of request line and headers together.
MAX_HEAD_BYTES = 128 * 2**10
#: Bytes past a request's declared body that the server reads and drops after answering (a
#: client still sending then sees the answer rather than a reset); nothing more is read.
LINGER_BYTES = 64 * 2**10
#: The most connections served at a time; more are answered 503.
MAX_CONNECTIONS = 32
#: The most query fields a request may carry.
MAX_FIELDS = 32
LOOPBACK = ("127.0.0.1", "::1", "localhost")
#: The charting library (Apache ECharts, Apache-2.0), vendored with its licence and notice.
CHARTS = "vendor/echarts-6.1.0/echarts.min.js"
#: URL path -> (file under ``static/``, media type).
STATIC = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/static/explore.js": ("explore.js", "text/javascript; charset=utf-8"),
    "/static/explore.css": ("explore.css", "text/css; charset=utf-8"),
    f"/static/{CHARTS}": (CHARTS, "text/javascript; charset=utf-8"),
    "/favicon.ico": ("favicon.svg", "image/svg+xml"),
    "/static/favicon.svg": ("favicon.svg", "image/svg+xml"),
}
#: Headers of every answer: the page loads nothing from another origin, no other site may
#: frame it, and no other site's page may load the explorer's answers.
HEADERS = {
    "Content-Security-Policy": "default-src 'self'; frame-ancestors 'none'",
    "Cross-Origin-Resource-Policy": "same-origin",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


class RequestError(Exception):
    """An answer other than 200: the status and the message shown in the page."""

    def __init__(self, status: HTTPStatus, message: str) -> None:
        super().__init__(message)
        self.status = status


def asset(name: str) -> bytes:
    """The bytes of ``static/NAME``."""
    folder = resources.files(__package__) / "static"
    for part in name.split("/"):
        folder = folder / part
    return folder.read_bytes()


def compute(
    pool: concurrent.futures.ThreadPoolExecutor, work: Callable[[], dict[str, Any]]
) -> dict[str, Any]:
    """Run ``work`` in ``pool``; a RequestError 503 after :data:`COMPUTE_SECONDS` (``work``
    then never starts if it has not yet: a queue of abandoned work cannot build up)."""
    future = pool.submit(work)
    try:
        return future.result(timeout=COMPUTE_SECONDS)
    except concurrent.futures.TimeoutError:
        future.cancel()
        raise RequestError(
            HTTPStatus.SERVICE_UNAVAILABLE,
            f"the computation took longer than {COMPUTE_SECONDS:g} s; choose smaller values",
        ) from None


def to_json(value: Any) -> bytes:
    """``value`` as JSON bytes (NaN and infinities refused: the charts carry None instead)."""
    return json.dumps(value, allow_nan=False).encode("utf-8")


def error_text(exc: BaseException) -> tuple[HTTPStatus, str]:
    """The status and one-line message of an exception raised while answering."""
    if isinstance(exc, RequestError):
        return exc.status, str(exc)
    if isinstance(exc, ValueError | TypeError | OverflowError | MemoryError):
        return HTTPStatus.BAD_REQUEST, " ".join(str(exc).split()) or type(exc).__name__
    return (  # a bug: say so in the page, keep serving
        HTTPStatus.INTERNAL_SERVER_ERROR,
        f"internal error in posenc: {type(exc).__name__}: {exc}",
    )
