"""The interactive explorer: a local web app whose every number is computed by posenc.

``posenc explore`` starts it; from Python, :func:`make_server` returns the server, bound but
not yet serving. The page opens on a guided path, eleven steps in the tutorial's order
with a live figure each and a link to the tutorial pages it serves itself (``/docs/NAME``),
then a lab of fourteen panels (the table as a heatmap, channels, wavelengths,
similarity, the shift as a rotation, precision, the odd-exponent cosine bug, RoPE, RoPE
scalings, multi-axis RoPE, a model's rope plan from its ``config.json``, identifying a table,
ALiBi's slopes per head, and T5's and DeBERTa's relative-position buckets); each has a
sentence saying what to look at, labelled controls, a caption and its key numbers as text.
Every control change asks the server, which computes with posenc (the page's script draws,
and computes nothing).

The server is a Flask application on Werkzeug's threaded server: Flask is the extra
``explore`` (``pip install flask``); this module imports without it, and :func:`make_server`
then raises ``ImportError`` saying how to install it. The page draws with Apache ECharts,
vendored inside posenc with its licence, and loads nothing from outside the machine (its
``Content-Security-Policy`` is ``default-src 'self'; frame-ancestors 'none'``). The server binds
the loopback address unless told otherwise, answers only requests addressed to its own host and
port, refuses requests from other sites (an upload whose ``Origin`` is not the explorer's own,
or a ``Sec-Fetch-Site`` other than ``same-origin`` or ``none`` on anything but a link to the
page), and bounds what a client can make it read and hold: bodies of a declared length only
(``Content-Length``; ``Transfer-Encoding`` is refused) of at most 16 MiB, a request line and
headers of at most 128 KiB, a whole request within 60 s, 32 connections at a time. Every answer,
errors of the HTTP layer included, carries the same security headers and a JSON body. It never
imports torch.

>>> from posenc.explore import PANELS, STEPS, make_server
>>> len(PANELS), PANELS[0].name
(14, 'heatmap')
>>> len(STEPS), STEPS[7].name, STEPS[7].panel
(11, 'rope', 'rope')
>>> server = make_server(port=0)   # serve with server.serve_forever()
>>> server.server_close()
"""

from __future__ import annotations

from ._panel import Panel
from ._path import STEPS, Step
from ._server import PANELS, ExplorerServer, make_server

__all__ = ["PANELS", "STEPS", "ExplorerServer", "Panel", "Step", "make_server"]
