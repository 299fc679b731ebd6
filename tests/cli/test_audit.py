"""``posenc audit REFERENCE SUBJECT`` through main(argv): text and JSON reports, exit codes 0,
1 and 2, one-line errors for hostile subjects."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from posenc import rope_plan
from posenc.cli import main
from tests.audit.models import LLAMA3, QWEN2_VL_HEAD128, QWEN25_YARN
from tests.audit.stacks import float32_tables, llama3_rope_freqs, vllm_cache, write_gguf

ROOT = Path(__file__).resolve().parents[2]


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["audit", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def config(tmp_path: Path, values: dict[str, object]) -> str:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(values))
    return str(path)


def qwen_tables(tmp_path: Path, name: str, **changes: object) -> str:
    kind = rope_plan(QWEN25_YARN).layer()
    omega, attention = kind.frequencies_at(None)
    cos, sin = float32_tables(np.arange(2048), changes.get("omega", omega),
                              changes.get("attention", attention))  # type: ignore[arg-type]  # fmt: skip
    path = tmp_path / name
    np.savez(path, cos=cos, sin=sin)
    return str(path)


def test_a_correct_table_exits_0_naming_the_recipe(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run([config(tmp_path, QWEN25_YARN), qwen_tables(tmp_path, "ok.npz")], capsys)
    assert (code, err) == (0, "")
    assert "layers 0-1 (full_attention): within float32 angles: expected <=" in out
    assert out.endswith("PASS\n")


def test_a_wrong_table_exits_1_with_the_cause(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plain = 1e6 ** (-np.arange(0, 64, 2) / 64)
    subject = qwen_tables(tmp_path, "plain.npz", omega=plain, attention=1.0)
    code, out, _ = run([config(tmp_path, QWEN25_YARN), subject], capsys)
    assert code == 1
    assert "cause: no yarn where the config has yarn factor 4" in out
    assert "first differs at position" in out
    code, out, _ = run([config(tmp_path, QWEN25_YARN), subject, "--json"], capsys)
    report = json.loads(out)
    assert code == 1
    assert report["schema_version"] == 1
    assert report["passed"] is False
    (finding,) = report["findings"]
    assert finding["status"] == "wrong"
    assert finding["cause"] == "no yarn where the config has yarn factor 4"
    assert finding["first_difference"]["position"] == 0  # cos(0) lacks the attention factor


def test_per_axis_verdicts_in_text_and_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Qwen2-VL's M-RoPE [16, 24, 24] dumped with position_ids (3, 1, P): image-like rows whose
    # width ids differ from their height ids, and a width section that reads the height ids
    ids = np.stack([np.arange(64), np.arange(64) // 8, np.arange(64) % 8])
    inv_freq = 1e6 ** (-np.arange(0, 128, 2) / 128)
    theta = ids.T[:, [0] * 16 + [1] * 24 + [1] * 24].astype(np.float32) * inv_freq.astype(
        np.float32
    )
    path = tmp_path / "vl.npz"
    np.savez(path, cos=np.tile(np.cos(theta), 2), sin=np.tile(np.sin(theta), 2),
             position_ids=ids[:, None, :])  # fmt: skip
    code, out, _ = run([config(tmp_path, QWEN2_VL_HEAD128), str(path)], capsys)
    assert code == 1
    assert "  axis temporal (16 pairs): within float32 angles, max error" in out
    assert "  axis width (24 pairs): WRONG, max error" in out
    assert "first differs at position 1 (temporal 1, height 0, width 1), channel 40 (sin)" in out
    code, out, _ = run([config(tmp_path, QWEN2_VL_HEAD128), str(path), "--json"], capsys)
    (finding,) = json.loads(out)["findings"]
    assert [(a["axis"], a["passed"]) for a in finding["axes"]] == [
        ("temporal", True),
        ("height", True),
        ("width", False),
    ]
    assert finding["axes"][2]["first_difference"]["coordinates"] == [1, 0, 1]


def test_a_gguf_and_a_model_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("gguf")
    config(tmp_path, LLAMA3)
    gguf = write_gguf(tmp_path / "model.gguf", "llama", layers=4, heads=4, embd=256,
                      context=131072, rope={"rope_dimension_count": 64,
                                            "rope_freq_base": 500000.0},
                      tensors={"rope_freqs.weight": llama3_rope_freqs(LLAMA3)})  # fmt: skip
    code, out, err = run([str(tmp_path), str(gguf), "--json"], capsys)
    assert (code, err) == (0, "")
    report = json.loads(out)
    assert report["subject_kind"] == "gguf"
    assert report["findings"][0]["recipe"] == "float32 angles (llama.cpp's ggml rope)"


def test_keys_and_positions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kind = rope_plan(QWEN25_YARN).layer()
    omega, attention = kind.frequencies_at(None)
    path = tmp_path / "state.npz"
    np.savez(path, rope_cache=vllm_cache(omega, attention, 1024))
    argv = [config(tmp_path, QWEN25_YARN), str(path), "--key", "rope_cache"]
    code, out, _ = run([*argv, "--positions", "0:1024:7"], capsys)
    assert code == 0, out
    assert "over 147 positions up to 1,022" in out
    code, _, err = run([config(tmp_path, QWEN25_YARN), str(path)], capsys)
    assert code == 2
    assert "holds none of cos and sin, cos_sin_cache or inv_freq" in err


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: p.write_bytes(b"GGUF\x03\x00\x00\x00" + bytes(8)), "too short for a GGUF"),
        (lambda p: p.write_bytes(b"GGUF" + (3).to_bytes(4, "little") + (1).to_bytes(8, "little")
                                 + (2**60).to_bytes(8, "little")), "truncated or corrupt"),
    ],
    ids=["short", "huge-count"],
)  # fmt: skip
def test_hostile_gguf_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], make: object, message: str
) -> None:
    pytest.importorskip("gguf")
    path = tmp_path / "bad.gguf"
    make(path)  # type: ignore[operator]
    code, out, err = run([config(tmp_path, LLAMA3), str(path)], capsys)
    assert (code, out) == (2, "")
    assert message in err
    assert err.count("\n") == 1


def test_nan_cache_and_bad_options_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = np.ones((16, 64), dtype=np.float32)
    cache[4, 2] = np.nan
    path = tmp_path / "cache.npy"
    np.save(path, cache)
    code, _, err = run([config(tmp_path, QWEN25_YARN), str(path)], capsys)
    assert code == 2
    assert "cos_sin_cache holds nan at row 4" in err
    code, _, err = run([config(tmp_path, QWEN25_YARN), str(path), "--timeout", "0"], capsys)
    assert code == 2
    assert "--timeout must be a number of seconds > 0" in err
    code, _, err = run([str(tmp_path / "none.json"), str(path)], capsys)
    assert code == 2
    assert "no such file" in err


STACK = textwrap.dedent(
    """
    import time

    def raises(positions):
        raise RuntimeError("CUDA error: no kernel image")

    def hangs(positions):
        time.sleep(60)
    """
)


@pytest.mark.slow
def test_a_callable_that_raises_or_hangs_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "stack_under_test.py").write_text(STACK)
    monkeypatch.chdir(tmp_path)
    reference = config(tmp_path, LLAMA3)
    code, _, err = run([reference, "stack_under_test:raises"], capsys)
    assert code == 2
    assert "RuntimeError: CUDA error: no kernel image" in err
    assert err.count("\n") == 1
    code, _, err = run([reference, "stack_under_test:hangs", "--timeout", "1"], capsys)
    assert code == 2
    assert "ran for more than 1 s (--timeout)" in err


@pytest.mark.slow
def test_a_gguf_audit_does_not_import_torch(tmp_path: Path) -> None:
    pytest.importorskip("gguf")
    gguf = write_gguf(tmp_path / "model.gguf", "llama", layers=4, heads=4, embd=256,
                      context=131072, rope={"rope_dimension_count": 64,
                                            "rope_freq_base": 500000.0},
                      tensors={"rope_freqs.weight": llama3_rope_freqs(LLAMA3)})  # fmt: skip
    script = (
        "import sys; from posenc.cli import main; "
        f"code = main(['audit', {config(tmp_path, LLAMA3)!r}, {str(gguf)!r}]); "
        "assert 'torch' not in sys.modules, 'torch imported'; sys.exit(code)"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_bfloat16_tables_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.audit.stacks import save_safetensors

    kind = rope_plan(QWEN25_YARN).layer()
    cos, sin = kind.cos_sin(np.arange(512), dtype=np.float64)
    path = save_safetensors(tmp_path / "rope.safetensors",
                            {"cos": (cos, "BF16"), "sin": (sin, "BF16")})  # fmt: skip
    code, out, _ = run([config(tmp_path, QWEN25_YARN), str(path)], capsys)
    assert code == 1
    assert "cause: the table rounded to bfloat16 (worse than float32 angles)" in out


def test_too_many_positions_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = qwen_tables(tmp_path, "ok.npz")
    code, _, err = run([config(tmp_path, QWEN25_YARN), path, "--positions", "0:100000000"], capsys)
    assert code == 2
    assert "--positions" in err


def test_a_vision_projector_exits_0_and_an_unknown_projector_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("gguf")
    from tests.audit.stacks import write_mmproj
    from tests.audit.test_gguf_clip import QWEN2_VL

    reference = config(tmp_path, QWEN2_VL)
    good = write_mmproj(tmp_path / "mmproj.gguf", "qwen2vl_merger", embd=64, heads=4, layers=2)
    code, out, _ = run([reference, str(good)], capsys)
    assert code == 0
    assert "(qwen2vl_merger vision projector)" in out
    bad = write_mmproj(tmp_path / "odd.gguf", "warp9", embd=64, heads=4, layers=2)
    code, out, err = run([reference, str(bad)], capsys)
    assert (code, out) == (2, "")
    assert "unknown projector type 'warp9'" in err
    assert err.count("\n") == 1
