"""The explorer's HTTP edge, spoken as raw bytes on a socket: framing of bodies, errors of the
HTTP layer, cross-site requests, slow and many clients. No browser; a few seconds in all."""

from __future__ import annotations

import concurrent.futures
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from posenc.explore import ExplorerServer, _panels_files, _site, make_server

pytest.importorskip("flask")  # the explorer's web framework (the extra "explore")

#: Seconds a test waits for an answer that should come at once.
PROMPT = 3.0
SECURITY = ("Content-Security-Policy", "X-Content-Type-Options", "Referrer-Policy")


class Answer:
    """A parsed HTTP answer: ``status``, ``headers`` (names lower-cased) and ``body``."""

    def __init__(self, data: bytes) -> None:
        head, _, self.body = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        assert lines[0].startswith("HTTP/1.1 "), f"no status line: {data[:200]!r}"
        self.status = int(lines[0].split()[1])
        self.headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            self.headers[name.strip().lower()] = value.strip()

    def error(self) -> str:
        assert self.headers["content-type"] == "application/json", self.headers
        return str(json.loads(self.body)["error"])

    def check_headers(self) -> None:
        for name, value in _site.HEADERS.items():
            assert self.headers.get(name.lower()) == value, (name, self.headers)
        assert b"Traceback" not in self.body
        assert b"<html" not in self.body.lower()


def _read(sock: socket.socket) -> bytes:
    data = b""
    while True:
        try:
            more = sock.recv(65536)
        except ConnectionResetError:
            return data
        if not more:
            return data
        data += more


def exchange(server: ExplorerServer, data: bytes, seconds: float = PROMPT) -> Answer:
    """Send ``data`` and read the answer until the server closes (within ``seconds``)."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=seconds) as sock:
        sock.sendall(data)
        return Answer(_read(sock))


def head(server: ExplorerServer, line: str, *headers: str) -> bytes:
    """A request line and headers (the server's own Host first), ended by the blank line."""
    return "\r\n".join([line, f"Host: 127.0.0.1:{server.port}", *headers, "", ""]).encode()


def _serve(explorer: ExplorerServer) -> Iterator[ExplorerServer]:
    thread = threading.Thread(target=explorer.serve_forever, kwargs={"poll_interval": 0.01})
    thread.start()
    try:
        yield explorer
    finally:
        explorer.shutdown()
        explorer.server_close()
        thread.join(5)


#: Seconds within which the small explorer wants a whole request.
SMALL_SECONDS = 0.3


@pytest.fixture
def small(monkeypatch: pytest.MonkeyPatch) -> Iterator[ExplorerServer]:
    """An explorer with small limits: 1 KiB bodies, requests whole within 0.3 s, 4
    connections at a time."""
    monkeypatch.setattr(_panels_files, "MAX_UPLOAD", 1024)
    monkeypatch.setattr(_site, "REQUEST_SECONDS", SMALL_SECONDS, raising=False)
    monkeypatch.setattr(_site, "MAX_CONNECTIONS", 4, raising=False)
    yield from _serve(make_server("127.0.0.1", 0))


# -- bodies ------------------------------------------------------------------------------------

UPLOAD = "POST /api/upload/plan?name=config.json HTTP/1.1"


def _pushing(server: ExplorerServer, request: bytes, total: int) -> tuple[Answer, int]:
    """Send ``request`` and then up to ``total`` more bytes while reading the answer: the
    answer and how many of the bytes the server let the client send."""
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    sent = 0

    def push() -> None:
        nonlocal sent
        block = b"0" * 2**16
        try:
            while sent < total:
                sent += sock.send(block)
        except OSError:  # refused: the server closed the connection
            pass

    try:
        sock.sendall(request)
        pusher = threading.Thread(target=push)
        pusher.start()
        answer = Answer(_read(sock))
        pusher.join(30)
    finally:
        sock.close()
    return answer, sent


#: More than the server may read of one request, even through the kernel's socket buffers.
FLOOD = 40 * 2**20


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        (("Content-Length: 10", "Transfer-Encoding: chunked"), 400),
        (("Transfer-Encoding: chunked",), 411),
        (("Content-Length: 99999999",), 413),
        ((), 411),  # neither: the upload needs a length; what follows is not read
    ],
)
def test_a_body_is_never_read_past_the_limit(
    small: ExplorerServer, headers: tuple[str, ...], status: int
) -> None:
    request = head(small, UPLOAD, *headers)
    if "Transfer-Encoding: chunked" in headers:
        request += b"a0000000\r\n"  # a chunk of 2.5 GiB follows
    answer, sent = _pushing(small, request, FLOOD)
    assert answer.status == status, answer.body
    answer.check_headers()
    assert sent < FLOOD, "the server read everything the client sent"


@pytest.mark.parametrize(
    "body",
    [
        b"5;name=value\r\nhello\r\n0\r\n\r\n",  # a chunk extension
        b"f" * 40 + b"\r\nhello\r\n",  # a chunk size of 160 bits
        b"1\r\n{\r\n" * 2000 + b"0\r\n\r\n",  # many tiny chunks, more than 1 KiB in all
        b"2\r\n{}\r\n0\r\nX-Trailer: 1\r\n\r\n",  # a trailer
    ],
    ids=["extension", "huge-size", "tiny-chunks", "trailer"],
)
@pytest.mark.parametrize("framing", ["chunked", "gzip, chunked", "identity"])
def test_chunked_bodies_are_refused_before_they_are_read(
    small: ExplorerServer, body: bytes, framing: str
) -> None:
    answer = exchange(small, head(small, UPLOAD, f"Transfer-Encoding: {framing}") + body)
    assert answer.status == 411
    assert "Content-Length" in answer.error()
    answer.check_headers()


@pytest.mark.parametrize(
    "lengths",
    [("1_0",), ("+10",), ("-1",), ("0x10",), ("10, 10",), ("10", "10"), ("10", "11"), ("9" * 30,)],
)
def test_a_malformed_content_length_is_refused(
    small: ExplorerServer, lengths: tuple[str, ...]
) -> None:
    request = head(small, UPLOAD, *(f"Content-Length: {n}" for n in lengths)) + b"{}" + b" " * 9
    answer = exchange(small, request)
    assert answer.status in (400, 413), answer.body
    assert "Content-Length" in answer.error()
    answer.check_headers()


def test_a_length_over_the_limit_is_refused_before_100_continue(small: ExplorerServer) -> None:
    answer = exchange(small, head(small, UPLOAD, "Content-Length: 1025", "Expect: 100-continue"))
    assert answer.status == 413
    assert "1,024 bytes" in answer.error()
    answer.check_headers()


def test_an_upload_at_the_limit_is_read(small: ExplorerServer) -> None:
    config = json.dumps({"head_dim": 64, "rope_theta": 12345.6}).encode()
    config += b" " * (1024 - len(config))
    answer = exchange(small, head(small, UPLOAD, "Content-Length: 1024") + config)
    assert answer.status == 200, answer.body
    answer.check_headers()


def _trickle(server: ExplorerServer, start: bytes, byte: bytes) -> tuple[Answer, float]:
    """Send ``start``, then ``byte`` every 0.05 s (never silent for long) until the server
    answers and closes: the answer and the seconds it took."""
    began = time.monotonic()
    data = b""
    with socket.create_connection(("127.0.0.1", server.port), timeout=PROMPT) as sock:
        sock.sendall(start)
        while time.monotonic() - began < PROMPT:
            try:
                sock.sendall(byte)
                sock.settimeout(0.05)
                more = sock.recv(65536)
            except TimeoutError:
                continue
            except OSError:  # reset once the server has closed
                break
            if not more:
                break
            data += more
    return Answer(data), time.monotonic() - began


def test_a_slow_upload_is_cut_off(small: ExplorerServer) -> None:
    answer, seconds = _trickle(small, head(small, UPLOAD, "Content-Length: 1000") + b"{", b" ")
    assert seconds < SMALL_SECONDS + 1.0
    assert answer.status == 400
    assert "ended early" in answer.error()
    answer.check_headers()


def test_the_page_learns_the_upload_limit(small: ExplorerServer) -> None:
    answer = exchange(small, head(small, "GET /api/panels HTTP/1.1"))
    assert json.loads(answer.body)["upload_limit"] == {"bytes": 1024, "text": "1,024 bytes"}
    script = (Path(_site.__file__).parent / "static" / "explore.js").read_text()
    assert "if (chosen.size > limit.bytes) {" in script  # not sent: it would be refused unread


def test_abandoned_computations_never_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_site, "COMPUTE_SECONDS", 0.05)
    release, ran = threading.Event(), []
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(release.wait, PROMPT)  # the one worker is busy
        with pytest.raises(_site.RequestError, match=r"longer than 0\.05 s"):
            _site.compute(pool, lambda: ran.append(1) or {})
        release.set()
    assert ran == []


# -- errors of the HTTP layer -----------------------------------------------------------------

HOST = "Host: 127.0.0.1:{port}"
MALFORMED = {
    "request line": ("GARBAGE", 400),
    "version": ("GET / HTTP/x", 400),
    "HTTP/2.0": ("GET / HTTP/2.0\r\n" + HOST, 505),
    "HTTP/0.9": ("GET /\r\n" + HOST, 505),
    "long URI": ("GET /" + "a" * 70_000 + " HTTP/1.1\r\n" + HOST, 414),
    "120 headers": ("GET / HTTP/1.1\r\n" + HOST + "\r\nX: 1" * 120, 431),
    "long header": ("GET / HTTP/1.1\r\n" + HOST + "\r\nX: " + "a" * 70_000, 431),
    "big head": ("GET / HTTP/1.1\r\n" + HOST + ("\r\nX: " + "a" * 4000) * 40, 431),
    "bad header line": ("GET / HTTP/1.1\r\n" + HOST + "\r\nno colon here", 400),
    "space before colon": ("GET / HTTP/1.1\r\n" + HOST + "\r\nContent-Length : 5", 400),
    "folded header": ("GET / HTTP/1.1\r\n" + HOST + "\r\nX-A: 1\r\n  folded", 400),
    "control character": ("GET / HTTP/1.1\r\n" + HOST + "\r\nX-A: 1\x002", 400),
    "bad IPv6 URL": ("GET http://[::1 HTTP/1.1\r\n" + HOST, 400),
    "unsupported method": ("BREW / HTTP/1.1\r\n" + HOST, 405),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_errors_of_the_http_layer_carry_the_security_headers(
    server: ExplorerServer, case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    text, status = MALFORMED[case]
    answer = exchange(server, (text.format(port=server.port) + "\r\n\r\n").encode("latin-1"))
    assert answer.status == status, answer.body[:300]
    assert answer.error()
    assert len(answer.error()) <= 300
    answer.check_headers()
    assert answer.headers["connection"] == "close"
    assert "Traceback" not in capsys.readouterr().err


def test_head_and_options_answers_carry_the_security_headers(server: ExplorerServer) -> None:
    for line in ("HEAD / HTTP/1.1", "OPTIONS /api/panels HTTP/1.1", "HEAD /nothing HTTP/1.1"):
        answer = exchange(server, head(server, line))
        assert answer.status in (200, 404), line
        assert answer.body == b"", line
        answer.check_headers()


def test_pages_may_not_be_framed_by_another_site(server: ExplorerServer) -> None:
    answer = exchange(server, head(server, "GET / HTTP/1.1"))
    assert answer.status == 200
    assert "frame-ancestors 'none'" in answer.headers["content-security-policy"]
    assert answer.headers["cross-origin-resource-policy"] == "same-origin"


# -- cross-site requests ----------------------------------------------------------------------


def _post(server: ExplorerServer, *headers: str) -> Answer:
    body = json.dumps({"head_dim": 64, "rope_theta": 12345.6}).encode()
    request = head(server, UPLOAD, f"Content-Length: {len(body)}", *headers) + body
    return exchange(server, request)


@pytest.mark.parametrize(
    "headers",
    [
        ("Origin: http://evil.example", "Sec-Fetch-Site: cross-site", "Content-Type: text/plain"),
        ("Origin: http://evil.example",),
        ("Origin: null",),
        ("Origin: http://127.0.0.1:1",),
        ("Origin: http://localhost:{port}",),  # another origin, though the same server
        ("Origin: https://127.0.0.1:{port}",),
        ("Sec-Fetch-Site: cross-site",),
        ("Sec-Fetch-Site: same-site",),  # another port of this machine
        ("Origin: http://127.0.0.1:{port}", "Sec-Fetch-Site: same-site"),
    ],
)
def test_a_cross_site_upload_is_refused(server: ExplorerServer, headers: tuple[str, ...]) -> None:
    answer = _post(server, *(h.format(port=server.port) for h in headers))
    assert answer.status == 403, answer.body
    assert "cross-site" in answer.error()
    answer.check_headers()


@pytest.mark.parametrize(
    "headers",
    [
        ("Origin: http://127.0.0.1:{port}", "Sec-Fetch-Site: same-origin",
         "Sec-Fetch-Mode: cors", "Content-Type: application/octet-stream"),  # the page's
        ("Origin: http://127.0.0.1:{port}",),
        (),  # not a browser (curl, Python): no Origin, no Sec-Fetch-Site
    ],
)  # fmt: skip
def test_a_same_origin_upload_is_read(server: ExplorerServer, headers: tuple[str, ...]) -> None:
    answer = _post(server, *(h.format(port=server.port) for h in headers))
    assert answer.status == 200, answer.body
    answer.check_headers()


def test_another_site_may_link_to_the_page_but_not_fetch_from_it(server: ExplorerServer) -> None:
    site = "Sec-Fetch-Site: cross-site"
    page = exchange(server, head(server, "GET / HTTP/1.1", site, "Sec-Fetch-Mode: navigate",
                                 "Sec-Fetch-Dest: document"))  # fmt: skip
    assert page.status == 200
    for mode, dest in [("no-cors", "image"), ("cors", "empty"), ("navigate", "iframe")]:
        answer = exchange(
            server,
            head(
                server,
                "GET /api/panel/precision HTTP/1.1",
                site,
                f"Sec-Fetch-Mode: {mode}",
                f"Sec-Fetch-Dest: {dest}",
            ),
        )
        assert answer.status == 403, (mode, dest)
        assert "cross-site" in answer.error()


# -- Host, paths, queries ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "hosts",
    [
        ("127.0.0.1",),  # no port: port 80
        ("",),
        ("evil.example:{port}",),
        ("127.0.0.1:{port}", "evil.example:{port}"),  # two Host headers
        ("127.0.0.1:{port}.evil.example",),
    ],
)
def test_only_the_servers_own_host_is_answered(
    server: ExplorerServer, hosts: tuple[str, ...]
) -> None:
    lines = ["GET /api/panels HTTP/1.1", *(f"Host: {h.format(port=server.port)}" for h in hosts)]
    answer = exchange(server, ("\r\n".join([*lines, "", ""])).encode())
    assert answer.status in (400, 403), answer.body
    answer.check_headers()


@pytest.mark.parametrize(
    "path",
    [
        "/static/../_site.py",
        "/static/%2e%2e/_site.py",
        "/static/..%2f_site.py",
        "/static/vendor/echarts-6.1.0/LICENSE",
        "/static//etc/passwd",
        "//etc/passwd",
        "/static/explore.js%00.py",
    ],
)
def test_only_the_listed_files_are_served(server: ExplorerServer, path: str) -> None:
    answer = exchange(server, head(server, f"GET {path} HTTP/1.1"))
    assert answer.status == 404
    answer.check_headers()


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("d_model=8&d_model=16", "'d_model' is given twice"),
        ("length=1e400", "length must be an integer"),
        ("length=" + "9" * 150, "length must be an integer"),
        ("base=NaN", "base must be a number"),
        ("base=-inf", "base must be a number"),
        ("length=1_000", "length must be an integer"),
        ("length=%D9%A3", "length must be an integer"),  # an Arabic-Indic digit three
        ("length=%FF", "length must be an integer"),
        ("&".join(f"k{i}=1" for i in range(40)), "fields"),
    ],
)
def test_odd_query_strings_get_a_message(server: ExplorerServer, query: str, message: str) -> None:
    answer = exchange(server, head(server, f"GET /api/panel/heatmap?{query} HTTP/1.1"))
    assert answer.status == 400, answer.body
    assert message in answer.error()
    answer.check_headers()


# -- slow and many clients --------------------------------------------------------------------


def test_a_client_sending_its_head_slowly_is_cut_off(small: ExplorerServer) -> None:
    answer, seconds = _trickle(small, b"GET / HTTP/1.1\r\nX-Slow: ", b"a")
    assert seconds < SMALL_SECONDS + 1.0
    assert answer.status == 408
    assert "did not arrive within 0.3 s" in answer.error()
    answer.check_headers()


def test_connections_beyond_the_limit_are_refused_at_once(
    small: ExplorerServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_site, "REQUEST_SECONDS", 10.0, raising=False)  # idle ones stay
    idle = [socket.create_connection(("127.0.0.1", small.port), timeout=PROMPT) for _ in range(4)]
    try:
        time.sleep(0.1)  # the server has taken them
        answer = exchange(small, head(small, "GET /api/panels HTTP/1.1"), seconds=0.5)
        assert answer.status == 503
        answer.check_headers()
    finally:
        for sock in idle:
            sock.close()
    deadline = time.monotonic() + PROMPT
    while True:  # the slots come back once the idle connections are closed
        answer = exchange(small, head(small, "GET /api/panels HTTP/1.1"))
        if answer.status == 200 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert answer.status == 200


def test_idle_connections_are_closed_after_the_request_time(small: ExplorerServer) -> None:
    with socket.create_connection(("127.0.0.1", small.port), timeout=PROMPT) as sock:
        began = time.monotonic()
        data = _read(sock)
    assert time.monotonic() - began < SMALL_SECONDS + 1.0
    assert Answer(data).status == 408


def test_a_signal_just_after_a_connection_thread_starts_still_stops_the_server(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """SIGTERM raises ``Terminated`` in the serving thread wherever it is; arriving after the
    connection's thread has started (and finished), it must reach the caller and the slot must be
    given back once. Released twice, the semaphore raised ``ValueError`` in its place, the server
    printed it and went on serving: ``posenc explore`` ignored that SIGTERM."""
    from posenc.cli._common import Terminated
    from posenc.explore import _http

    def app(environ: object, start_response: object) -> list[bytes]:
        return []

    sock = _http.bind("127.0.0.1", 0)
    server = _http.wsgi_server(sock, app)  # type: ignore[arg-type]
    sock.close()
    start = threading.Thread.start

    def start_then_signal(thread: threading.Thread) -> None:
        start(thread)
        thread.join()  # the connection is served and its slot given back
        raise Terminated

    monkeypatch.setattr(threading.Thread, "start", start_then_signal)
    client, peer = socket.socketpair()
    client.close()  # the connection ends at once: the thread is done within the join
    try:
        with pytest.raises(Terminated):
            server.process_request(peer, ("127.0.0.1", 0))
    finally:
        monkeypatch.undo()
        peer.close()
        server.server_close()
    taken = 0
    while server.slots.acquire(blocking=False):
        taken += 1
    assert taken == _site.MAX_CONNECTIONS
