"""``posenc explore``: the interactive explorer, a local web app computed by posenc.

Prints the address to open on one line and serves until interrupted (Ctrl-C: exit code 130;
SIGTERM: 143). It binds the loopback address 127.0.0.1 unless --host says otherwise (another
address prints a warning: anyone who can reach it can use the explorer), and answers only
requests addressed to its own host and port. --port 0 (the default) picks a free port; a port
in use is an error (exit code 2). A graphical web browser opens the page when one is
registered, never a text-mode browser and never when the environment variable CI is set;
--no-browser never opens one.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import webbrowser
from typing import Any

from ._common import add_subcommand

HELP = "start the interactive explorer (a local web page) and print its address"

#: Browsers that run in the terminal: never started (they would take over the terminal).
TEXT_BROWSERS = frozenset({"lynx", "links", "links2", "elinks", "w3m", "www-browser"})


def add_parser(sub: Any) -> None:
    parser = add_subcommand(sub, "explore", HELP, __doc__)
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)"
    )
    parser.add_argument(
        "--port", type=int, default=0, metavar="N", help="port to listen on (default 0: a free one)"
    )
    parser.add_argument("--no-browser", action="store_true", help="do not open a web browser")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..explore import make_server

    if not 0 <= args.port <= 65535:
        raise ValueError(f"--port must be in 0 .. 65535, got {args.port}")
    try:
        server = make_server(args.host, args.port)
    except OSError as exc:
        where = f"{args.host}:{args.port}"
        raise OSError(f"cannot listen on {where} ({exc.strerror or exc}); choose another "
                      "--port, or --port 0 for a free one") from None  # fmt: skip
    try:
        if args.host not in ("127.0.0.1", "::1", "localhost"):
            print(
                f"posenc explore: warning: listening on {args.host}, not only on this machine; "
                "anyone who can reach this address can use the explorer",
                file=sys.stderr,
            )
        print(server.url, flush=True)
        if not args.no_browser:
            _open_browser(server.url)
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()
    return 0


def graphical_browser() -> webbrowser.BaseBrowser | None:
    """The registered browser if it is a graphical one, and never under ``CI``."""
    if os.environ.get("CI"):
        return None
    if sys.platform.startswith("linux") and not (
        os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    ):
        return None
    try:
        browser = webbrowser.get()
    except webbrowser.Error:
        return None
    name = os.path.basename(str(getattr(browser, "name", "")))
    if name in TEXT_BROWSERS or type(browser) is webbrowser.GenericBrowser:
        return None  # GenericBrowser: a command that runs in the terminal
    return browser


def _open_browser(url: str) -> None:
    browser = graphical_browser()
    if browser is not None:
        threading.Thread(target=browser.open, args=(url,), daemon=True).start()
