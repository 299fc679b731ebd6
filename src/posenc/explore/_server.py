"""The explorer's HTTP server: the standard library's threading server, a few routes, limits.

Routes (everything else is 404, other methods 405)::

    GET  /                          the page
    GET  /static/NAME, /favicon.ico its script, style sheet and icon
    GET  /api/panels                the panels and their controls (JSON)
    GET  /api/panel/NAME?CONTROLS   one panel's figure, caption and numbers (JSON)
    GET  /api/value?CONTROLS&position=P&channel=C   the table value under the pointer
    POST /api/upload/NAME?name=FILE the body is the file (at most 16 MiB)

Defences: a request whose ``Host`` header is not the server's own address is refused (403;
a page on another site cannot reach the explorer through DNS rebinding); every response
carries ``Content-Security-Policy: default-src 'self'``; bodies over 16 MiB are refused from
their ``Content-Length`` before they are read; a slow client times out after 30 s; each
computation runs in a small pool and the request answers 503 when it takes longer than 20 s.
Errors reach the page as ``{"error": message}``.
"""

from __future__ import annotations

import concurrent.futures
import json
import socket
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from . import _panels_bias, _panels_files, _panels_rope, _panels_tables
from ._controls import Control, parse_all
from ._panel import Panel

#: The panels, in page order.
PANELS: tuple[Panel, ...] = (
    *_panels_tables.PANELS,
    *_panels_rope.PANELS,
    *_panels_files.PANELS,
    *_panels_bias.PANELS,
)
_BY_NAME = {p.name: p for p in PANELS}
#: Seconds a computation may take before the request answers 503.
COMPUTE_SECONDS = 20.0
#: Seconds a client may stay silent while sending a request.
SOCKET_SECONDS = 30.0
LOOPBACK = ("127.0.0.1", "::1", "localhost")
_STATIC = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/static/explore.js": ("explore.js", "text/javascript; charset=utf-8"),
    "/static/explore.css": ("explore.css", "text/css; charset=utf-8"),
    "/favicon.ico": ("favicon.svg", "image/svg+xml"),
    "/static/favicon.svg": ("favicon.svg", "image/svg+xml"),
}
_POINTER = (
    Control("position", "position", "int", 0, 0, 10**9),
    Control("channel", "channel", "int", 0, 0, 4096),
)


class RequestError(Exception):
    """An answer other than 200: the status and the message shown in the page."""

    def __init__(self, status: HTTPStatus, message: str) -> None:
        super().__init__(message)
        self.status = status


class ExplorerServer(ThreadingHTTPServer):
    """The explorer on ``host:port`` (``port=0``: a free port); ``url`` is its address.

    Binding happens in the constructor: a port in use raises ``OSError``.
    """

    daemon_threads = True
    block_on_close = False

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=2)
        super().__init__((host, port), _Handler)
        self.host, self.port = host, int(self.server_address[1])
        shown = f"[{host}]" if ":" in host else host
        self.url = f"http://{shown}:{self.port}/"
        names = {shown, *(("127.0.0.1", "localhost", "[::1]") if host in LOOPBACK else ())}
        self.allowed_hosts = {f"{n}:{self.port}" for n in names}

    def compute(self, work: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """Run ``work`` in the pool; a RequestError 503 after :data:`COMPUTE_SECONDS`."""
        future = self.pool.submit(work)
        try:
            return future.result(timeout=COMPUTE_SECONDS)
        except concurrent.futures.TimeoutError:
            raise RequestError(
                HTTPStatus.SERVICE_UNAVAILABLE,
                f"the computation took longer than {COMPUTE_SECONDS:g} s; choose smaller values",
            ) from None

    def server_close(self) -> None:
        super().server_close()
        self.pool.shutdown(wait=False, cancel_futures=True)


def _asset(name: str) -> bytes:
    return (resources.files(__package__) / "static" / name).read_bytes()


class _Handler(BaseHTTPRequestHandler):
    server: ExplorerServer
    timeout = SOCKET_SECONDS
    protocol_version = "HTTP/1.1"
    server_version = "posenc-explore"
    sys_version = ""

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the terminal shows the URL and errors only."""

    def do_GET(self) -> None:
        self._answer(self._get)

    def do_POST(self) -> None:
        self._answer(self._post)

    def do_PUT(self) -> None:
        self._answer(self._refuse)

    do_DELETE = do_PATCH = do_OPTIONS = do_PUT

    def _refuse(self) -> tuple[bytes, str]:
        raise RequestError(HTTPStatus.METHOD_NOT_ALLOWED, f"method {self.command} not allowed")

    def _answer(self, route: Callable[[], tuple[bytes, str]]) -> None:
        try:
            if self.headers.get("Host", "") not in self.server.allowed_hosts:
                raise RequestError(HTTPStatus.FORBIDDEN, "this Host is not the explorer's own")
            status, (body, kind) = HTTPStatus.OK, route()
        except RequestError as exc:
            status, body, kind = exc.status, _json({"error": str(exc)}), "application/json"
        except (ValueError, TypeError, OverflowError, MemoryError) as exc:
            text = " ".join(str(exc).split()) or type(exc).__name__
            status, body, kind = HTTPStatus.BAD_REQUEST, _json({"error": text}), "application/json"
        except Exception as exc:  # a bug: say so in the page, keep serving
            message = f"internal error in posenc: {type(exc).__name__}: {exc}"
            status, body = HTTPStatus.INTERNAL_SERVER_ERROR, _json({"error": message})
            kind = "application/json"
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Content-Security-Policy", "default-src 'self'")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Cache-Control", "no-store")
        if status != HTTPStatus.OK and self.command == "POST":
            self.send_header("Connection", "close")  # the body may not have been read
            self.close_connection = True
        self.end_headers()
        self.wfile.write(body)

    def _query(self) -> tuple[str, dict[str, str]]:
        parts = urlsplit(self.path)
        pairs = parse_qsl(parts.query, keep_blank_values=True, max_num_fields=32)
        return parts.path, dict(pairs)

    def _get(self) -> tuple[bytes, str]:
        path, query = self._query()
        if path in _STATIC:
            name, kind = _STATIC[path]
            return _asset(name), kind
        if path == "/api/panels":
            return _json({"panels": [p.as_dict() for p in PANELS]}), "application/json"
        if path == "/api/value":
            return self._value(query), "application/json"
        panel = _BY_NAME.get(path.removeprefix("/api/panel/"))
        if path.startswith("/api/panel/") and panel is not None:
            values = parse_all(panel.controls, query)
            return _json(self.server.compute(lambda: panel.compute(values))), "application/json"
        raise RequestError(HTTPStatus.NOT_FOUND, f"no such page: {path}")

    def _value(self, query: dict[str, str]) -> bytes:
        pointer = {c.name: c.parse(query.pop(c.name, None)) for c in _POINTER}
        values = parse_all(_BY_NAME["heatmap"].controls, query)
        value = self.server.compute(
            lambda: {"value": _panels_tables.value_at(values, **pointer), **pointer}
        )
        return _json(value)

    def _post(self) -> tuple[bytes, str]:
        path, query = self._query()
        panel = _BY_NAME.get(path.removeprefix("/api/upload/"))
        if not path.startswith("/api/upload/") or panel is None or panel.upload is None:
            raise RequestError(HTTPStatus.NOT_FOUND, f"no upload at {path}")
        size = self.headers.get("Content-Length")
        if size is None or not size.isdigit():
            raise RequestError(HTTPStatus.LENGTH_REQUIRED, "an upload needs a Content-Length")
        if int(size) > _panels_files.MAX_UPLOAD:
            raise RequestError(
                HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                f"the file holds {int(size):,} bytes; uploads are limited to 16 MiB",
            )
        data = self.rfile.read(int(size))
        if len(data) != int(size):
            raise RequestError(HTTPStatus.BAD_REQUEST, "the upload ended early")
        name = query.get("name", "upload")[:200]
        kind = panel.upload
        return _json(
            self.server.compute(lambda: _panels_files.read_upload(kind, data, name))
        ), "application/json"


def _json(value: Any) -> bytes:
    return json.dumps(value, allow_nan=False).encode("utf-8")


def make_server(host: str = "127.0.0.1", port: int = 0) -> ExplorerServer:
    """The explorer, bound to ``host:port`` but not yet serving (``serve_forever`` serves).

    ``port=0`` picks a free port (``server.port`` tells which). Raises ``OSError`` when the
    port is in use or the address cannot be bound.

    >>> server = make_server()
    >>> server.url.startswith("http://127.0.0.1:")
    True
    >>> server.server_close()
    """
    return ExplorerServer(host, port)
