"""The explorer's HTTP layer: Werkzeug's threaded server and request handler, made strict.

Werkzeug's server (on :mod:`http.server`) is lenient; the explorer treats every byte from the
socket as hostile, even on the loopback address. Before the Flask application sees a request,
the handler here checks, and answers itself when a check fails:

- the request line and headers: HTTP/1.0 or HTTP/1.1 (HTTP/0.9 answers carry no headers: 505;
  HTTP/2 and later: 505), at most :data:`~._site.MAX_HEAD_BYTES` (128 KiB) together (431; a
  request line over 64 KiB: 414; a header line over 64 KiB or over 100 headers: 431), every
  header line ``name: value`` with a token for the name and no control characters in the
  value (no folded lines, no line without a colon: 400);
- the framing of the body (RFC 9112, section 6): a request with ``Transfer-Encoding`` is
  refused, with 400 when it has a ``Content-Length`` as well (the pattern of request
  smuggling) and with 411 alone (the explorer reads bodies of a declared length only, which
  is what browsers send); ``Content-Length`` must be given once, as digits (400), and be at
  most the upload limit, :data:`~._panels_files.MAX_UPLOAD` (16 MiB: 413). All this happens
  before a byte of the body is read and before ``100 Continue`` is sent;
- time: the whole request (line, headers and body) must arrive within
  :data:`~._site.REQUEST_SECONDS` (60 s) of the connection, and no read waits longer than
  :data:`~._site.SOCKET_SECONDS` (30 s); a request line or headers that do not arrive in time
  are answered 408, a body that does not arrive is an upload that ended early (400);
- connections: at most :data:`~._site.MAX_CONNECTIONS` (32) at a time; one more is answered
  503 at once and closed.

The socket is read through a budget: the head, then the declared body and
:data:`~._site.LINGER_BYTES` (64 KiB) past it, which the server reads and discards after
answering so that a client still sending sees the answer rather than a reset. Nothing more is
ever read from a connection. Every answer of this layer carries the security headers of the
application's answers (:data:`~._site.HEADERS`), ``Connection: close`` and a JSON body
``{"error": message}`` (no traceback, no HTML).
"""

from __future__ import annotations

import email.utils
import io
import re
import select
import socket
import threading
import time
from http import HTTPStatus
from typing import Any

from flask import Flask
from werkzeug.serving import LISTEN_QUEUE, ThreadedWSGIServer, WSGIRequestHandler

from .._io.sizes import format_size
from . import _panels_files, _site
from ._site import HEADERS, RequestError, to_json

__all__ = ["Handler", "WSGIServer", "bind", "wsgi_server"]

SERVER = "posenc-explore"
#: The longest error message an answer of this layer carries (characters).
MAX_MESSAGE = 200
#: A header name: an RFC 9110 token.
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
#: A character a header value may not hold: controls other than the tab (CR and LF included).
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
#: ``Content-Length``: digits only (no sign, no underscores, no list), at most 18 of them.
_LENGTH = re.compile(r"[0-9]{1,18}")
#: HTTP statuses that carry no body.
_NO_BODY = (HTTPStatus.NO_CONTENT, HTTPStatus.NOT_MODIFIED)


def error_answer(status: int, message: str, *, body: bool = True) -> bytes:
    """The bytes of an answer ``status`` with ``{"error": message}``, the security headers and
    ``Connection: close`` (``body=False``: the headers only, as for HEAD)."""
    code = HTTPStatus(status)
    text = " ".join(message.split())[:MAX_MESSAGE] or code.phrase
    data = to_json({"error": text})
    lines = [
        f"HTTP/1.1 {code.value} {code.phrase}",
        f"Server: {SERVER}",
        f"Date: {email.utils.formatdate(usegmt=True)}",
        "Content-Type: application/json",
        f"Content-Length: {len(data)}",
        *(f"{name}: {value}" for name, value in HEADERS.items()),
        "Connection: close",
    ]
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return head + data if body and code >= 200 and code not in _NO_BODY else head


class _Budget(io.RawIOBase):
    """The bytes of a connection's socket, read within a budget and a deadline.

    First the head: at most ``MAX_HEAD_BYTES`` (more raises a 431 :class:`RequestError`) by
    ``REQUEST_SECONDS`` after the connection (later, or a read silent for ``SOCKET_SECONDS``,
    raises a 408). Then, after :meth:`body`, the declared body and ``LINGER_BYTES``: past
    them, or past the deadline, the socket reads as ended.
    """

    def __init__(self, sock: socket.socket) -> None:
        super().__init__()
        self.sock = sock
        self.left = _site.MAX_HEAD_BYTES
        self.deadline = time.monotonic() + _site.REQUEST_SECONDS
        self.in_head = True

    def readable(self) -> bool:
        return True

    def body(self, length: int) -> None:
        """The head has been read: ``length`` bytes of body and the linger may follow."""
        self.in_head = False
        self.left = length + _site.LINGER_BYTES

    def readinto(self, buffer: Any) -> int:
        if self.left <= 0:
            if self.in_head:
                raise RequestError(
                    HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE,
                    f"the request line and headers exceed {format_size(_site.MAX_HEAD_BYTES)}",
                )
            return 0
        wait = min(_site.SOCKET_SECONDS, self.deadline - time.monotonic())
        try:
            if wait <= 0:
                raise TimeoutError
            self.sock.settimeout(wait)
            with memoryview(buffer) as view:
                count = self.sock.recv_into(view[: self.left])
        except TimeoutError:
            if self.in_head:
                raise RequestError(
                    HTTPStatus.REQUEST_TIMEOUT,
                    f"the request did not arrive within {_site.REQUEST_SECONDS:g} s",
                ) from None
            return 0
        finally:
            self.sock.settimeout(_site.SOCKET_SECONDS)
        self.left -= count
        return count


class Handler(WSGIRequestHandler):
    """Werkzeug's handler, strict about what it reads (see the module's docstring), quiet (the
    terminal shows the URL and errors only), answering its own errors as the application
    does."""

    server_version = SERVER
    sys_version = ""

    def version_string(self) -> str:
        """The ``Server`` header: the name alone."""
        return SERVER

    def setup(self) -> None:
        """Read the socket through a :class:`_Budget`."""
        super().setup()
        self.rfile.close()  # the plain reader made by StreamRequestHandler
        self.budget = _Budget(self.connection)
        self.rfile = io.BufferedReader(self.budget)

    def handle_one_request(self) -> None:
        """One request (Werkzeug closes the connection after it); a :class:`RequestError`
        raised while reading the head, or while Werkzeug reads the request target, is answered
        here."""
        try:
            super().handle_one_request()
        except RequestError as exc:
            self.close_connection = True
            self.send_error(exc.status, str(exc))

    def handle_expect_100(self) -> bool:
        """Send nothing yet: Werkzeug sends ``100 Continue`` once the head has been checked."""
        return True

    def parse_request(self) -> bool:
        """http.server's parsing, then the checks of the head and of the body's framing."""
        if not super().parse_request():
            return False
        try:
            length = self._check_head()
        except RequestError as exc:
            self.send_error(exc.status, str(exc))
            return False
        self.budget.body(length)
        return True

    def _check_head(self) -> int:
        """The body's length, once the head has passed every check."""
        if self.request_version == "HTTP/0.9":
            raise RequestError(
                HTTPStatus.HTTP_VERSION_NOT_SUPPORTED, "HTTP/0.9 is not served; use HTTP/1.1"
            )
        headers = self.headers
        if headers.defects or headers.get_payload():
            raise RequestError(HTTPStatus.BAD_REQUEST, "a header line is not 'name: value'")
        for name, value in headers.items():
            if not _TOKEN.fullmatch(name) or _CONTROL.search(value):
                raise RequestError(
                    HTTPStatus.BAD_REQUEST, f"malformed header line {name[:40]!r} (folded, or "
                    "with a control character or a bad name)"
                )  # fmt: skip
        lengths = headers.get_all("Content-Length") or []
        if headers.get_all("Transfer-Encoding"):
            if lengths:
                raise RequestError(
                    HTTPStatus.BAD_REQUEST,
                    "a request may not have both Content-Length and Transfer-Encoding",
                )
            raise RequestError(
                HTTPStatus.LENGTH_REQUIRED,
                "send the body with a Content-Length; Transfer-Encoding is not accepted",
            )
        if not lengths:
            return 0
        if len(lengths) > 1 or not _LENGTH.fullmatch(lengths[0]):
            shown = ", ".join(lengths)[:40]
            raise RequestError(
                HTTPStatus.BAD_REQUEST,
                f"Content-Length must be one number of bytes, got {shown!r}",
            )
        length, limit = int(lengths[0]), _panels_files.MAX_UPLOAD
        if length > limit:
            raise RequestError(
                HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                f"the body holds {format_size(length)} (Content-Length); "
                f"uploads are limited to {format_size(limit)}",
            )
        return length

    def make_environ(self) -> Any:
        """Werkzeug's environ; a request target it cannot parse is a 400, not a traceback."""
        try:
            return super().make_environ()
        except ValueError as exc:
            raise RequestError(HTTPStatus.BAD_REQUEST, f"malformed request target: {exc}") from None

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """An error answer of the HTTP layer: JSON with the security headers, then the linger."""
        self.close_connection = True
        data = error_answer(code, message or "", body=getattr(self, "command", None) != "HEAD")
        try:
            self.wfile.write(data)
            self.wfile.flush()
            self._linger()
        except OSError:
            pass

    def _linger(self) -> None:
        """Stop sending, then read and drop what the client still sends, within the budget."""
        self.connection.shutdown(socket.SHUT_WR)
        self.budget.body(0)
        while select.select([self.connection], [], [], 0.01)[0]:
            if not self.rfile.read1(65536):
                break

    def log(self, type: str, message: str, *args: Any) -> None:
        """Nothing: no line per request."""


class _Slot:
    """One connection's hold on the server's semaphore: ``release`` gives it back the first time
    only, from whichever thread gets there first."""

    def __init__(self, semaphore: threading.BoundedSemaphore) -> None:
        self._semaphore = semaphore
        self._lock = threading.Lock()
        self._held = True

    def release(self) -> None:
        with self._lock:
            held, self._held = self._held, False
        if held:
            self._semaphore.release()


class WSGIServer(ThreadedWSGIServer):
    """Werkzeug's threaded server on a socket bound beforehand (an ``OSError`` there reaches
    the caller, where Werkzeug would print and exit), serving at most ``MAX_CONNECTIONS``
    connections at a time."""

    daemon_threads = True
    block_on_close = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.slots = threading.BoundedSemaphore(_site.MAX_CONNECTIONS)

    def process_request(self, request: Any, client_address: Any) -> None:
        """A thread for the connection, or, when every slot is taken, 503 at once.

        The slot is given back exactly once, whichever comes first: by the connection's thread
        when it is done, or here when starting it raised. A signal's exception
        (``KeyboardInterrupt``, ``Terminated``) can land here after the thread started, even
        after it finished, and must reach the serving loop as itself."""
        if not self.slots.acquire(blocking=False):
            self._busy(request)
            self.shutdown_request(request)
            return
        slot = _Slot(self.slots)
        try:
            thread = threading.Thread(
                target=self._serve, args=(request, client_address, slot), daemon=True
            )
            thread.start()
        except BaseException:
            slot.release()
            raise

    def _serve(self, request: Any, client_address: Any, slot: _Slot) -> None:
        try:
            self.process_request_thread(request, client_address)
        finally:
            slot.release()

    def _busy(self, request: socket.socket) -> None:
        data = error_answer(
            HTTPStatus.SERVICE_UNAVAILABLE,
            f"the explorer serves at most {_site.MAX_CONNECTIONS} connections at a time",
        )
        try:
            request.setblocking(False)
            request.send(data)
        except OSError:
            pass


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
    return WSGIServer(str(host), int(port), app, handler=Handler, fd=sock.fileno())
