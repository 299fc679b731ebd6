"""The explorer's server: every panel answers, numbers equal posenc's, limits and defences."""

from __future__ import annotations

import base64
import io
import json
import math
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import posenc
from posenc import analysis
from posenc.explore import PANELS, ExplorerServer

from .conftest import request

flask = pytest.importorskip("flask")  # the explorer's web framework (the extra "explore")

STATIC = Path(posenc.__file__).parent / "explore" / "static"
#: The charting library, vendored with its licence: the one script the page runs that is not
#: posenc's own.
VENDORED = Path("vendor") / "echarts-6.1.0" / "echarts.min.js"


def test_fourteen_panels_each_with_a_sentence_and_labelled_controls() -> None:
    assert len(PANELS) == 14
    assert len({p.name for p in PANELS}) == 14
    for panel in PANELS:
        assert panel.look.endswith("."), panel.name
        assert len(panel.look.split()) >= 6, panel.name
        assert all(c.label for c in panel.controls), panel.name


@pytest.mark.parametrize("panel", [p.name for p in PANELS])
def test_every_panel_answers_with_a_figure_caption_and_numbers(
    server: ExplorerServer, panel: str
) -> None:
    status, body = request(server, f"/api/panel/{panel}")
    assert status == 200, body
    assert body["caption"]
    assert body["numbers"]
    assert body["chart"]


def test_numbers_equal_direct_posenc_calls(server: ExplorerServer) -> None:
    _, body = request(server, "/api/panel/heatmap?base=12345.6&length=77&d_model=30")
    numbers = {n["key"]: n["value"] for n in body["numbers"]}
    assert float(numbers["last"]) == posenc.sinusoidal(77, 30, base=12345.6)[76, 29]
    _, body = request(server, "/api/panel/wavelengths?base=12345.6&convention=tensor2tensor")
    numbers = {n["key"]: n["value"] for n in body["numbers"]}
    expected = analysis.wavelengths(64, base=12345.6, convention="tensor2tensor").longest
    assert float(numbers["longest"]) == expected


def _numbers(body: dict) -> dict[str, str]:
    return {n["key"]: n["value"] for n in body["numbers"]}


@pytest.mark.parametrize("convention", ["exact", "bloom", "mpt", "falcon"])
def test_alibi_numbers_equal_direct_posenc_calls(server: ExplorerServer, convention: str) -> None:
    max_bias = 8.0 if convention in ("bloom", "falcon") else 5.5
    query = f"heads=37&max_bias={max_bias}&convention={convention}&shown=3,37&distance=1001"
    status, body = request(server, f"/api/panel/alibi?{query}")
    assert status == 200, body
    numbers = _numbers(body)
    slopes = posenc.alibi_slopes(37, max_bias=max_bias, convention=convention)
    assert float(numbers["slope_first"]) == slopes[0]
    assert float(numbers["slope_last"]) == slopes[36]
    bias = posenc.alibi_bias(37, [1001], [0], max_bias=max_bias, convention=convention)
    assert float(numbers["bias_3"]) == bias[2, 0, 0]
    assert float(numbers["bias_37"]) == bias[36, 0, 0]
    exact = posenc.alibi_slopes(37, max_bias=max_bias)
    assert float(numbers["rounding"]) == np.max(np.abs((slopes.astype(np.float64) - exact) / exact))
    assert (float(numbers["rounding"]) == 0) == (convention == "exact")


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("num_buckets=44&max_distance=300&position=-123", ("t5", True)),
        ("num_buckets=44&max_distance=300&position=77", ("t5", True)),
        ("num_buckets=20&max_distance=90&position=-61&bidirectional=no", ("t5", False)),
        ("num_buckets=64&max_distance=300&position=-200&scheme=DeBERTa-v2", ("deberta", None)),
        ("num_buckets=64&max_distance=300&position=1000&scheme=DeBERTa-v2", ("deberta", None)),
    ],
)
def test_bucket_numbers_equal_direct_posenc_calls(
    server: ExplorerServer, query: str, expected: tuple[str, bool | None]
) -> None:
    status, body = request(server, f"/api/panel/buckets?{query}")
    assert status == 200, body
    values = dict(item.split("=") for item in query.split("&"))
    size, far, r = int(values["num_buckets"]), int(values["max_distance"]), int(values["position"])
    scheme, bidirectional = expected
    if scheme == "t5":
        assert bidirectional is not None
        call = lambda rel: posenc.t5_buckets(  # noqa: E731
            rel, num_buckets=size, max_distance=far, bidirectional=bidirectional
        )
    else:  # DeBERTa counts query - key
        call = lambda rel: posenc.deberta_buckets(  # noqa: E731
            -np.asarray(rel), bucket_size=size, max_position=far
        )
    numbers = _numbers(body)
    assert int(numbers["bucket"]) == call([r])[0]
    every = np.arange(-2 * far, 2 * far + 1)
    assert int(numbers["distinct"]) == np.unique(call(every)).size
    before = call(-np.arange(2 * far + 1))
    assert int(numbers["last"]) == int(np.argmax(before == before.max()))


@pytest.mark.parametrize(
    ("panel", "query", "message"),
    [
        ("alibi", "heads=0", "heads must be an integer in 1 .. 64, got '0'"),
        ("alibi", "heads=65", "heads must be an integer in 1 .. 64"),
        ("alibi", "max_bias=0", "max_bias must be a number in 0.125 .. 64"),
        ("alibi", "max_bias=nan", "max_bias must be a number"),
        ("alibi", "convention=torch", "convention must be one of exact, bloom, mpt, falcon"),
        ("alibi", "convention=bloom&max_bias=4", "max_bias must be 8 under convention='bloom'"),
        ("alibi", "shown=13", "shown must name heads in 1 .. 12, got 13"),
        ("alibi", "shown=1,x", "shown must be comma-separated head numbers or 'auto'"),
        ("alibi", "shown=1,2,3,4,5,6,7,8,9", "shown must name at most 8 heads"),
        ("alibi", "distance=1000001", "distance must be an integer in 1 .. 1000000"),
        ("buckets", "num_buckets=1", "num_buckets must be an integer in 2 .. 1024"),
        ("buckets", "num_buckets=2", "num_buckets must be an integer >= 4"),
        ("buckets", "max_distance=8", "max_distance must be greater than max_exact = 8"),
        ("buckets", "max_distance=100001", "max_distance must be an integer in 1 .. 100000"),
        ("buckets", "bidirectional=maybe", "bidirectional must be one of yes, no"),
        ("buckets", "position=1e3", "position must be an integer"),
        ("buckets", "scheme=deberta&max_distance=17", "scheme must be one of T5, DeBERTa-v2"),
        (
            "buckets",
            "scheme=DeBERTa-v2&max_distance=17",
            "max_distance (DeBERTa's max_relative_positions) must be greater than "
            "num_buckets // 2 + 1 = 17, got 17",
        ),
    ],
)
def test_bad_bias_values_get_a_message_naming_the_control(
    server: ExplorerServer, panel: str, query: str, message: str
) -> None:
    status, body = request(server, f"/api/panel/{panel}?{query}")
    assert status == 400, body
    assert message in body["error"]


def test_a_wide_heatmap_is_drawn_at_evenly_spaced_channels(server: ExplorerServer) -> None:
    status, body = request(server, "/api/panel/heatmap?length=512&d_model=4096&base=12345.6")
    assert status == 200, body
    chart = body["chart"]
    assert chart["width"] * chart["height"] <= 2**16
    assert chart["height"] == 512
    assert chart["columns"][0] == 0
    assert chart["columns"][-1] == 4095
    assert chart["drawn"] == f"{chart['width']} of 4096 columns drawn"
    assert len(base64.b64decode(chart["cells"])) == chart["width"] * chart["height"]
    assert [label for _, label in chart["x_cells"]] == [label for _, label in chart["x"]["ticks"]]
    _, narrow = request(server, "/api/panel/heatmap?length=100&d_model=64")
    assert narrow["chart"]["columns"] == list(range(64))
    assert narrow["chart"]["drawn"] == ""


def test_the_value_under_the_pointer_is_posencs(server: ExplorerServer) -> None:
    status, body = request(server, "/api/value?base=12345.6&length=50&position=49&channel=7")
    assert status == 200
    assert float(body["value"]) == posenc.sinusoidal([49], 64, base=12345.6)[0, 7]
    status, body = request(server, "/api/value?length=50&position=50&channel=7")
    assert status == 400
    assert "outside" in body["error"]


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("d_model=0", "d_model must be an integer in 1 .. 4096, got '0'"),
        ("d_model=4097", "d_model must be"),
        ("base=nan", "base must be a number"),
        ("base=inf", "base must be a number"),
        ("convention=bogus", "convention must be one of"),
        ("length=-3", "length must be"),
        ("bogus=1", "unknown parameter 'bogus'"),
        ("d_model=" + "9" * 300, "at most 200 characters"),
    ],
)
def test_bad_values_get_a_message_naming_the_control(
    server: ExplorerServer, query: str, message: str
) -> None:
    status, body = request(server, f"/api/panel/heatmap?{query}")
    assert status == 400
    assert message in body["error"]


def test_a_request_for_another_host_is_refused(server: ExplorerServer) -> None:
    status, body = request(server, "/", headers={"Host": "attacker.example:80"})
    assert status == 403
    assert "Host" in body["error"]
    status, _ = request(server, "/", headers={"Host": f"attacker.example:{server.port}"})
    assert status == 403
    status, page = request(server, "/", headers={"Host": f"localhost:{server.port}"})
    assert status == 200
    assert b"posenc explore" in page


def test_pages_carry_a_content_security_policy(server: ExplorerServer) -> None:
    import http.client

    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    connection.request("GET", "/favicon.ico")
    response = connection.getresponse()
    response.read()
    connection.close()
    assert response.status == 200
    assert (
        response.getheader("Content-Security-Policy")
        == "default-src 'self'; frame-ancestors 'none'"
    )


def test_the_page_script_computes_nothing() -> None:
    scripts = sorted(p.relative_to(STATIC) for p in STATIC.rglob("*.js"))
    assert scripts == sorted([Path("explore.js"), VENDORED])  # the vendored one is skipped
    script = (STATIC / "explore.js").read_text()
    assert not re.findall(r"Math\.(sin|cos|tan|pow|exp|log\w*|sqrt|atan\w*|hypot)\b", script)
    assert "http://" not in script
    assert "https://" not in script
    page = (STATIC / "index.html").read_text()
    assert "http" not in page.replace("http-equiv", "")
    assert "style=" not in page


def test_the_charts_come_from_a_vendored_charting_library(server: ExplorerServer) -> None:
    page = (STATIC / "index.html").read_text()
    library = page.index(f'<script src="/static/{VENDORED.as_posix()}" defer></script>')
    assert library < page.index('<script src="/static/explore.js" defer></script>')
    folder = STATIC / VENDORED.parent
    assert "Apache License" in (folder / "LICENSE").read_text()
    assert "Apache ECharts" in (folder / "NOTICE").read_text()
    readme = (folder / "README.md").read_text()
    assert "6.1.0" in readme
    assert "npm pack echarts@6.1.0" in readme
    assert "Apache-2.0" in readme
    status, body = request(server, f"/static/{VENDORED.as_posix()}")
    assert status == 200
    assert body == (STATIC / VENDORED).read_bytes()


def test_the_server_is_flask_on_werkzeugs_threaded_server(server: ExplorerServer) -> None:
    from werkzeug.serving import ThreadedWSGIServer

    assert isinstance(server.app, flask.Flask)
    assert isinstance(server.wsgi, ThreadedWSGIServer)
    status, body = request(server, "/api/nothing-here")
    assert status == 404
    assert body == {"error": "no such page: /api/nothing-here"}
    status, body = request(server, "/api/panels", method="PUT")
    assert status == 405
    assert body == {"error": "method PUT not allowed"}


# -- uploads ----------------------------------------------------------------------------------


def _npy(array: np.ndarray, **kwargs: object) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, **kwargs)  # type: ignore[arg-type]
    return buffer.getvalue()


def _upload(server: ExplorerServer, panel: str, name: str, data: bytes) -> tuple[int, dict]:
    return request(server, f"/api/upload/{panel}?name={name}", method="POST", body=data)  # type: ignore[return-value]


def test_an_uploaded_table_is_identified(server: ExplorerServer) -> None:
    table = posenc.sinusoidal(np.arange(3, 40), 24, base=12345.6, convention="marian")
    status, body = _upload(server, "identify", "t.npy", _npy(table))
    assert status == 200, body
    numbers = {n["key"]: n["value"] for n in body["numbers"]}
    found = analysis.identify(table)
    assert numbers["convention"] == found.convention == "marian"
    assert float(numbers["base"]) == found.base
    assert numbers["offset"] == "3"


def _declaring_one_gib() -> bytes:
    header = {"descr": "<f4", "fortran_order": False, "shape": (2**15, 2**13)}
    text = repr(header).encode()
    text += b" " * (-(len(text) + 11) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text + b"\0" * 64


HOSTILE_TABLES = {
    "pickled.npy": (_npy(np.array([{"a": 1}], dtype=object), allow_pickle=True), "object"),
    "truncated.npy": (_npy(np.ones((64, 8), np.float32))[:-100], "truncated"),
    "huge.npy": (_declaring_one_gib(), "(1 GiB), more than the upload limit (16 MiB)"),
    "text.npy": (b"not an array at all", "not a readable .npy"),
    "model.pt": (b"PK\x03\x04", "PyTorch files are not read here"),
    "table.csv": (b"1,2\n3,4\n", "FILE must end in"),
    "one.npy": (_npy(np.ones((1, 8))), "at least 2 rows"),
    "wide.npy": (_npy(np.zeros((2, 5000), np.float32)), "at most 4096"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE_TABLES))
def test_hostile_tables_get_a_message(server: ExplorerServer, name: str) -> None:
    data, message = HOSTILE_TABLES[name]
    status, body = _upload(server, "identify", name, data)
    assert status == 400, body
    assert message in body["error"]
    assert "/tmp" not in body["error"]
    assert "posenc-explore-" not in body["error"]


def _deep(levels: int) -> bytes:
    return b'{"a": ' + b"[" * levels + b"]" * levels + b"}"


HOSTILE_CONFIGS = {
    "nan.json": (b'{"head_dim": 64, "rope_theta": NaN}', "finite number, got nan"),
    "deep.json": (_deep(100_000), "deeper than 64 levels"),
    "deep65.json": (_deep(70), "deeper than 64 levels"),
    "latin1.json": ('{"model_type": "é"}'.encode("latin-1"), "not UTF-8"),
    "list.json": (b"[1, 2]", "must hold a JSON object"),
    "broken.json": (b'{"head_dim": ', "not valid JSON"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE_CONFIGS))
def test_hostile_configs_get_a_message(server: ExplorerServer, name: str) -> None:
    data, message = HOSTILE_CONFIGS[name]
    status, body = _upload(server, "plan", name, data)
    assert status == 400, body
    assert message in body["error"]


def test_an_uploaded_config_gives_its_plan(server: ExplorerServer) -> None:
    config = {"model_type": "llama", "hidden_size": 256, "num_attention_heads": 4,
              "num_hidden_layers": 2, "rope_theta": 12345.6}  # fmt: skip
    status, body = _upload(server, "plan", "config.json", json.dumps(config).encode())
    assert status == 200, body
    omega = posenc.rope_plan(config).layers[0].frequencies
    assert float(body["numbers"][0]["value"]) == omega[-1]


def test_an_upload_over_16_mib_is_refused_before_it_is_read(server: ExplorerServer) -> None:
    status, body = request(
        server,
        "/api/upload/identify?name=big.npy",
        method="POST",
        body=b"",
        headers={"Content-Length": str(16 * 2**20 + 1)},
    )
    assert status == 413
    assert "16 MiB" in body["error"]


#: Seconds a request may take at the 99th percentile while eight clients keep the server busy
#: (generous: a 2-core machine shared with other work; the slowest panel computes in ~0.1 s).
P99_SECONDS = 10.0
#: Times each of the eight clients asks for every panel (8 x 3 x 14 = 336 requests, about 1.5 s
#: on a quiet machine): a count, not a duration, so a busy machine makes the test slower, never
#: weaker, and every run checks the same requests.
ROUNDS = 3
#: Seconds the server may take to end its request threads and close its sockets after the load.
SETTLE_SECONDS = 60.0
_FDS = Path("/proc/self/fd")


def _open_fds() -> int | None:
    """How many files this process has open (None where ``/proc`` does not tell)."""
    return len(os.listdir(_FDS)) if _FDS.is_dir() else None


def _left_behind(before: set[threading.Thread], fds: int | None) -> str:
    """What the load left: request threads still alive and files still open ('' when none; the
    compute pool's two workers start on demand and stay, as they should)."""
    left = []
    threads = [t.name for t in threading.enumerate()
               if t not in before and not t.name.startswith("ThreadPoolExecutor")]  # fmt: skip
    if threads:
        left.append(f"threads {threads}")
    now = _open_fds()
    if fds is not None and now is not None and now > fds:
        left.append(f"{now - fds} more open files")
    return "; ".join(left)


@pytest.mark.slow
def test_eight_concurrent_clients(server: ExplorerServer) -> None:
    """Eight clients ask for every panel at once, ROUNDS times each: every answer equals the one
    the idle server gave, none is lost or slow (p99), nothing is left open, and the server
    still answers and computes afterwards."""
    names = [p.name for p in PANELS]
    expected = {name: request(server, f"/api/panel/{name}") for name in names}  # one at a time
    assert all(status == 200 for status, _ in expected.values()), expected
    threads_before, fds_before = set(threading.enumerate()), _open_fds()
    failures: list[str] = []
    latencies: list[list[float]] = [[] for _ in range(8)]

    def client(i: int) -> None:
        try:
            for n in range(i, i + ROUNDS * len(names)):  # each client from its own panel
                name = names[n % len(names)]
                began = time.perf_counter()
                answer = request(server, f"/api/panel/{name}")
                latencies[i].append(time.perf_counter() - began)
                if answer != expected[name]:
                    failures.append(f"{name}: {answer[0]} {answer[1]!r:.200}")
        except Exception as exc:  # a refused or dropped connection is a failure too
            failures.append(f"client {i}: {type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=client, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not any(t.is_alive() for t in threads)
    assert not failures, failures[:5]
    times = sorted(t for client_times in latencies for t in client_times)
    assert len(times) == 8 * ROUNDS * len(names)
    p99 = times[math.ceil(0.99 * len(times)) - 1]
    assert p99 < P99_SECONDS, f"p99 latency {p99:.2f} s over {len(times)} requests"
    deadline = time.monotonic() + SETTLE_SECONDS
    while (left := _left_behind(threads_before, fds_before)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not left, f"{SETTLE_SECONDS:g} s after {len(times)} requests: {left}"
    # still responsive afterwards, and still computing with posenc
    began = time.perf_counter()
    status, body = request(server, "/api/panel/heatmap?base=12345.6&length=77&d_model=30")
    assert time.perf_counter() - began < P99_SECONDS
    assert status == 200, body
    numbers = {n["key"]: n["value"] for n in body["numbers"]}
    assert float(numbers["last"]) == posenc.sinusoidal(77, 30, base=12345.6)[76, 29]


def test_the_server_imports_no_torch() -> None:
    code = (
        "import sys, threading, urllib.request\n"
        "from posenc.explore import make_server, PANELS\n"
        "s = make_server()\n"
        "threading.Thread(target=s.serve_forever, daemon=True).start()\n"
        "for p in PANELS:\n"
        "    urllib.request.urlopen(s.url + 'api/panel/' + p.name).read()\n"
        "print('torch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "False", out.stderr


@pytest.mark.parametrize("convention", sorted(posenc.CONVENTIONS))
def test_the_identify_example_offers_every_convention(
    server: ExplorerServer, convention: str
) -> None:
    status, body = request(server, f"/api/panel/identify?convention={convention}&offset=5")
    assert status == 200, body
    numbers = {n["key"]: n["value"] for n in body["numbers"]}
    assert numbers["convention"] == convention
    assert numbers["offset"] == "5"
