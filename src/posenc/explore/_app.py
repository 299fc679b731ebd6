"""The explorer's web application (Flask); the HTTP layer under it is ``_http``.

Routes (other paths are 404, other methods 405; every answer is JSON but the files)::

    GET  /                          the page
    GET  /static/NAME, /favicon.ico its script, style sheet, charting library and icon
    GET  /api/panels                the panels and their controls, and the upload limit
    GET  /api/path                  the steps of the guided path
    GET  /docs/NAME                 a tutorial page the path links to (HTML, served offline)
    GET  /api/panel/NAME?CONTROLS   one panel's figure, caption and numbers
    GET  /api/value?CONTROLS&position=P&channel=C   the table value under the pointer
    POST /api/upload/NAME?name=FILE the body is the file (at most 16 MiB)

Defences here (those of the HTTP layer are in ``_http``'s docstring):

- a request whose ``Host`` header is not the server's own address is refused (403; a page on
  another site cannot reach the explorer through DNS rebinding);
- cross-site requests are refused (403): a request other than GET, HEAD or OPTIONS whose
  ``Origin`` is not the explorer's own (``http://`` and its ``Host``), and any request whose
  ``Sec-Fetch-Site`` is present and neither ``same-origin`` nor ``none``, except a top-level
  navigation (a link to the page from another site). The page's own requests are
  same-origin; clients that are not browsers send neither header and are answered;
- a query names each control once, with at most 32 fields (400 otherwise);
- every answer carries :data:`~._site.HEADERS`: ``Content-Security-Policy: default-src
  'self'; frame-ancestors 'none'``, ``Cross-Origin-Resource-Policy: same-origin``,
  ``X-Content-Type-Options: nosniff``, ``Referrer-Policy: no-referrer`` and
  ``Cache-Control: no-store``;
- each computation runs in a small pool and the request answers 503 when it takes longer
  than 20 s.

Errors reach the page as ``{"error": message}``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qsl

from flask import Flask, Response, request
from werkzeug.exceptions import ClientDisconnected, HTTPException, MethodNotAllowed, NotFound

from .._io.sizes import format_size
from . import _docs, _panels_files, _panels_tables
from ._controls import Control, parse_all
from ._path import STEPS
from ._site import (
    BY_NAME,
    HEADERS,
    MAX_FIELDS,
    PANELS,
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


#: The application's config key of a test-only hook: None, or a function of a panel request's
#: query giving the seconds to wait before computing (the busy indicator's tests set it).
DELAY = "POSENC_EXPLORE_DELAY"

#: Methods that change nothing on the server (a page on another site may link to the page).
_SAFE = ("GET", "HEAD", "OPTIONS")
#: ``Sec-Fetch-Site`` values of the page's own requests and of what the user types or opens.
_OWN_SITE = ("same-origin", "none")


def _query() -> dict[str, str]:
    """The query's fields; a ValueError when a field is repeated or there are too many."""
    text = request.query_string.decode("latin-1")
    try:
        pairs = parse_qsl(text, keep_blank_values=True, max_num_fields=MAX_FIELDS)
    except ValueError:
        raise ValueError(f"a query may hold at most {MAX_FIELDS} fields") from None
    query: dict[str, str] = {}
    for key, value in pairs:
        if key in query:
            raise ValueError(f"parameter {key[:40]!r} is given twice; give each parameter once")
        query[key] = value
    return query


def _cross_site(host: str) -> str | None:
    """Why the request comes from another site, or None (see the module's docstring)."""
    origin = request.headers.get("Origin")
    if request.method not in _SAFE and origin is not None and origin != f"http://{host}":
        return f"Origin {origin[:100]!r} is not the explorer's own (http://{host})"
    site = request.headers.get("Sec-Fetch-Site")
    if site is None or site in _OWN_SITE:
        return None
    navigation = (
        request.method in ("GET", "HEAD")
        and request.headers.get("Sec-Fetch-Mode") == "navigate"
        and request.headers.get("Sec-Fetch-Dest", "document") == "document"
    )
    return None if navigation else f"Sec-Fetch-Site is {site[:40]!r}"


def _answer(value: dict[str, Any]) -> Response:
    return Response(to_json(value), mimetype="application/json")


def create_app(compute: Compute, allowed_hosts: set[str]) -> Flask:
    """The Flask application; ``compute`` runs a panel's work with a time limit."""
    app = Flask(__name__, static_folder=None)
    app.config[DELAY] = None

    @app.before_request
    def _own_host_and_site() -> None:
        host = request.headers.get("Host", "")
        if host not in allowed_hosts:
            raise RequestError(HTTPStatus.FORBIDDEN, "this Host is not the explorer's own")
        why = _cross_site(host)
        if why is not None:
            raise RequestError(HTTPStatus.FORBIDDEN, f"cross-site request refused: {why}")

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
        limit = _panels_files.MAX_UPLOAD
        return _answer(
            {
                "panels": [p.as_dict() for p in PANELS],
                "upload_limit": {"bytes": limit, "text": format_size(limit)},
            }
        )

    @app.get("/api/path")
    def _path() -> Response:
        return _answer({"steps": [step.as_dict() for step in STEPS]})

    @app.get("/docs/<name>")
    def _doc(name: str) -> Response:
        try:
            text = _docs.page(name)
        except _docs.MissingPage as exc:
            raise RequestError(HTTPStatus.NOT_FOUND, str(exc)) from None
        return Response(text.encode("utf-8"), content_type="text/html; charset=utf-8")

    @app.get("/api/panel/<name>")
    def _panel(name: str) -> Response:
        panel = BY_NAME.get(name)
        if panel is None:
            raise NotFound()
        query = _query()
        values = parse_all(panel.controls, query)
        delay = app.config[DELAY]
        if delay is not None:  # tests only: a slow computation
            time.sleep(delay(query))
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
        size, limit = request.headers.get("Content-Length"), _panels_files.MAX_UPLOAD
        if size is None or not size.isdigit():
            raise RequestError(HTTPStatus.LENGTH_REQUIRED, "an upload needs a Content-Length")
        if int(size) > limit:  # the HTTP layer refuses it first; kept for any other server
            raise RequestError(
                HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                f"the file holds {int(size):,} bytes; uploads are limited to {format_size(limit)}",
            )
        try:
            data = request.get_data(cache=False)
        except ClientDisconnected:
            data = b""
        if len(data) != int(size):
            raise RequestError(HTTPStatus.BAD_REQUEST, "the upload ended early")
        shown = _query().get("name", "upload")[:200]
        kind = panel.upload
        return _answer(compute(lambda: _panels_files.read_upload(kind, data, shown)))

    return app
