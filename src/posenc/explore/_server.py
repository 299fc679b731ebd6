"""The explorer's server: a Flask application (``_app``) on Werkzeug's threaded server made
strict (``_http``), bound when made and serving on ``serve_forever``.

Flask is the extra ``explore``: this module imports without it, and making a server without it
raises ``ImportError`` with the command that installs it.
"""

from __future__ import annotations

import concurrent.futures
import socketserver
from collections.abc import Callable
from typing import Any

from ._site import LOOPBACK, PANELS, compute

__all__ = ["PANELS", "ExplorerServer", "make_server"]

INSTALL_HINT = (
    "posenc explore needs Flask: pip install flask (or, from a clone of posenc, "
    "pip install '.[explore]')"
)


class ExplorerServer:
    """The explorer on ``host:port`` (``port=0``: a free port); ``url`` is its address.

    Binding happens in the constructor: a port in use raises ``OSError``, a missing Flask
    ``ImportError``. ``app`` is the Flask application, ``wsgi`` the Werkzeug server running
    it; :meth:`serve_forever`, :meth:`shutdown` and :meth:`server_close` behave as those of
    :class:`socketserver.BaseServer` (Ctrl-C reaches the caller as ``KeyboardInterrupt``).
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        try:
            from . import _app, _http
        except ImportError as exc:
            raise ImportError(INSTALL_HINT) from exc
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=2)
        sock = _http.bind(host, port)
        try:
            self.host, self.port = host, int(sock.getsockname()[1])
            shown = f"[{host}]" if ":" in host else host
            self.url = f"http://{shown}:{self.port}/"
            names = {shown, *(("127.0.0.1", "localhost", "[::1]") if host in LOOPBACK else ())}
            self.allowed_hosts = {f"{n}:{self.port}" for n in names}
            self.app = _app.create_app(self.compute, self.allowed_hosts)
            self.wsgi: socketserver.BaseServer = _http.wsgi_server(sock, self.app)
        except BaseException:
            self.pool.shutdown(wait=False)
            raise
        finally:
            sock.close()  # the server holds its own duplicate
        self.server_address = self.wsgi.server_address

    def compute(self, work: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """Run ``work`` in the pool; a 503 answer after ``COMPUTE_SECONDS`` (20 s)."""
        return compute(self.pool, work)

    def serve_forever(self, poll_interval: float = 0.5) -> None:
        """Serve until :meth:`shutdown` (or until interrupted: the exception propagates)."""
        # socketserver's loop, not Werkzeug's, which swallows KeyboardInterrupt
        socketserver.BaseServer.serve_forever(self.wsgi, poll_interval)

    def shutdown(self) -> None:
        """Stop :meth:`serve_forever` (from another thread) and wait until it has stopped."""
        self.wsgi.shutdown()

    def server_close(self) -> None:
        """Close the listening socket and drop computations not yet started."""
        self.wsgi.server_close()
        self.pool.shutdown(wait=False, cancel_futures=True)


def make_server(host: str = "127.0.0.1", port: int = 0) -> ExplorerServer:
    """The explorer, bound to ``host:port`` but not yet serving (``serve_forever`` serves).

    ``port=0`` picks a free port (``server.port`` tells which). Raises ``OSError`` when the
    port is in use or the address cannot be bound, and ``ImportError`` (with the command that
    installs it) without Flask, the extra ``explore``.

    >>> server = make_server()
    >>> server.url.startswith("http://127.0.0.1:")
    True
    >>> server.server_close()
    """
    return ExplorerServer(host, port)
