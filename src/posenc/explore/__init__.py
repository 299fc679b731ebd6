"""The interactive explorer: a local web app whose every number is computed by posenc.

``posenc explore`` starts it; from Python, :func:`make_server` returns the server, bound but
not yet serving. The page shows fourteen panels (the table as a heatmap, channels, wavelengths,
similarity, the shift as a rotation, precision, the odd-exponent cosine bug, RoPE, RoPE
scalings, multi-axis RoPE, a model's rope plan from its ``config.json``, identifying a table,
ALiBi's slopes per head, and T5's and DeBERTa's relative-position buckets); each has a
sentence saying what to look at, labelled controls, a caption and its key numbers as text.
Every control change asks the server, which computes with posenc (the page's script draws,
and computes nothing).

The server is the standard library's ``http.server``, and the page's script and style sheet
are part of posenc: the extra ``explore`` installs nothing more, and the page loads nothing
from outside the machine. It binds the loopback address unless told otherwise and answers
only requests addressed to its own host and port. It never imports torch.

>>> from posenc.explore import PANELS, make_server
>>> len(PANELS), PANELS[0].name
(14, 'heatmap')
>>> server = make_server(port=0)   # serve with server.serve_forever()
>>> server.server_close()
"""

from __future__ import annotations

from ._panel import Panel
from ._server import PANELS, ExplorerServer, make_server

__all__ = ["PANELS", "ExplorerServer", "Panel", "make_server"]
