"""The explorer's web application (Flask) and the server that runs it (Werkzeug's threaded
server, what ``werkzeug.serving.make_server(..., threaded=True)`` builds).

Routes (other paths are 404, other methods 405; every answer is JSON but the files)::

    GET  /                          the page
    GET  /static/NAME, /favicon.ico its script, style sheet, charting library and icon
    GET  /api/panels                the panels and their controls
    GET  /api/panel/NAME?CONTROLS   one panel's figure, caption and numbers
    GET  /api/value?CONTROLS&position=P&channel=C   the table value under the pointer
    POST /api/upload/NAME?name=FILE the body is the file (at most 16 MiB)

Defences: a request whose ``Host`` header is not the server's own address is refused (403;
a page on another site cannot reach the explorer through DNS rebinding); every answer
carries ``Content-Security-Policy: default-src 'self'``; bodies over 16 MiB are refused from
their ``Content-Length`` before they are read; a slow client times out after 30 s; each
computation runs in a small pool and the request answers 503 when it takes longer than 20 s.
Errors reach the page as ``{"error": message}``.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qsl

from flask import Flask, Response, request
from werkzeug.exceptions import HTTPException, MethodNotAllowed, NotFound
from werkzeug.serving import LISTEN_QUEUE, ThreadedWSGIServer, WSGIRequestHandler

from . import _panels_files, _panels_tables
from ._controls import Control, parse_all
from ._site import (
    BY_NAME,
    HEADERS,
    MAX_FIELDS,
    PANELS,
    SOCKET_SECONDS,
    STATIC,
    RequestError,
    asset,
    error_text,
    to_json,
)

Compute = Callable[[Callable[[], dict[str, Any]]], dict[str, Any]]
_POINTER = (
    Control("position", "position", "int", 0, 0, 10**9),
    Control("channel", "channel", "int", 0, 0, 4096),
)


def _query() -> dict[str, str]:
    text = request.query_string.decode("latin-1")
    return dict(parse_qsl(text, keep_blank_values=True, max_num_fields=MAX_FIELDS))


def _answer(value: dict[str, Any]) -> Response:
    return Response(to_json(value), mimetype="application/json")


def create_app(compute: Compute, allowed_hosts: set[str]) -> Flask:
    """The Flask application; ``compute`` runs a panel's work with a time limit."""
    app = Flask(__name__, static_folder=None)

    @app.before_request
    def _own_host() -> None:
        if request.headers.get("Host", "") not in allowed_hosts:
            raise RequestError(HTTPStatus.FORBIDDEN, "this Host is not the explorer's own")

    @app.after_request
    def _headers(response: Response) -> Response:
        response.headers.update(HEADERS)
        return response

    @app.errorhandler(Exception)
    def _error(exc: Exception) -> Response:
        if isinstance(exc, MethodNotAllowed):
            method = request.method
            exc = RequestError(HTTPStatus.METHOD_NOT_ALLOWED, f"method {method} not allowed")
        elif isinstance(exc, NotFound):
            exc = RequestError(HTTPStatus.NOT_FOUND, f"no such page: {request.path}")
        elif isinstance(exc, HTTPException):
            exc = RequestError(HTTPStatus(exc.code or 400), exc.description or exc.name)
        status, message = error_text(exc)
        response = _answer({"error": message})
        response.status_code = status
        return response

    def _file(path: str) -> Response:
        name, kind = STATIC[path]
        return Response(asset(name), content_type=kind)

    for path in STATIC:
        app.add_url_rule(path, f"file {path}", lambda path=path: _file(path))

    @app.get("/api/panels")
    def _panels() -> Response:
        return _answer({"panels": [p.as_dict() for p in PANELS]})

    @app.get("/api/panel/<name>")
    def _panel(name: str) -> Response:
        panel = BY_NAME.get(name)
        if panel is None:
            raise NotFound()
        values = parse_all(panel.controls, _query())
        return _answer(compute(lambda: panel.compute(values)))

    @app.get("/api/value")
    def _value() -> Response:
        query = _query()
        pointer = {c.name: c.parse(query.pop(c.name, None)) for c in _POINTER}
        values = parse_all(BY_NAME["heatmap"].controls, query)
        return _answer(
            compute(lambda: {"value": _panels_tables.value_at(values, **pointer), **pointer})
        )

    @app.post("/api/upload/<name>")
    def _upload(name: str) -> Response:
        panel = BY_NAME.get(name)
        if panel is None or panel.upload is None:
            raise RequestError(HTTPStatus.NOT_FOUND, f"no upload at {request.path}")
        size = request.headers.get("Content-Length")
        if size is None or not size.isdigit():
            raise RequestError(HTTPStatus.LENGTH_REQUIRED, "an upload needs a Content-Length")
        if int(size) > _panels_files.MAX_UPLOAD:
            raise RequestError(
                HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                f"the file holds {int(size):,} bytes; uploads are limited to 16 MiB",
            )
        data = request.get_data(cache=False)
        if len(data) != int(size):
            raise RequestError(HTTPStatus.BAD_REQUEST, "the upload ended early")
        shown = _query().get("name", "upload")[:200]
        kind = panel.upload
        return _answer(compute(lambda: _panels_files.read_upload(kind, data, shown)))

    return app


class _Handler(WSGIRequestHandler):
    """Werkzeug's handler, quiet (the terminal shows the URL and errors only), with a time
    limit on a silent client."""

    timeout = SOCKET_SECONDS
    server_version = "posenc-explore"
    sys_version = ""

    def log(self, type: str, message: str, *args: Any) -> None:
        """Nothing: no line per request."""


class WSGIServer(ThreadedWSGIServer):
    """Werkzeug's threaded server on a socket bound beforehand (an ``OSError`` there reaches
    the caller, where Werkzeug would print and exit)."""

    daemon_threads = True
    block_on_close = False


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port``; ``OSError`` when the address cannot be bound."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(LISTEN_QUEUE)
    except BaseException:
        sock.close()
        raise
    return sock


def wsgi_server(sock: socket.socket, app: Flask) -> WSGIServer:
    """The threaded server answering with ``app`` on the bound ``sock`` (which it duplicates:
    close ``sock`` afterwards)."""
    host, port = sock.getsockname()[:2]
    return WSGIServer(str(host), int(port), app, handler=_Handler, fd=sock.fileno())
