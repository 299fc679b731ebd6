"""A running explorer for the tests of this folder (a thread of the test process)."""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest

from posenc.explore import ExplorerServer, make_server


@pytest.fixture(scope="module")
def server() -> Iterator[ExplorerServer]:
    explorer = make_server("127.0.0.1", 0)
    thread = threading.Thread(target=explorer.serve_forever, kwargs={"poll_interval": 0.1})
    thread.start()
    yield explorer
    explorer.shutdown()
    explorer.server_close()
    thread.join(5)


def request(
    server: ExplorerServer,
    path: str,
    *,
    method: str = "GET",
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, Any]:
    """(status, JSON body or bytes) of one request to ``server``."""
    parts = urlsplit(server.url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        data = response.read()
    finally:
        connection.close()
    if response.getheader("Content-Type", "").startswith("application/json"):
        return response.status, json.loads(data)
    return response.status, data
