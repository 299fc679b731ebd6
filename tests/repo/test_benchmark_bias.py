"""The ALiBi attention benchmark times paths that compute the same attention."""

from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch")
if os.environ.get("CI"):
    import transformers  # noqa: F401  (a reference: missing under CI is a failure)
else:
    pytest.importorskip("transformers")

from benchmarks import bias  # noqa: E402
from tests.tolerance import assert_close_ulp  # noqa: E402


def test_the_benchmarked_paths_agree() -> None:
    ns = bias._namespace(48)
    want = ns["sdpa_mask"]()
    for name in ("bloom", "flex_eager"):
        got = ns[name]()
        assert got.shape == want.shape == (1, bias.HEADS, 48, bias.HEAD_DIM)
        # two reductions: scores of 64 products (an error δ of a score is a relative error δ
        # of its softmax weight) and a weighted mean of <= 48 rows of v: about sqrt(64) +
        # sqrt(48) roundings of the largest output (measured <= 3.9 ulps under ATen's
        # default, avx2 and avx512 kernels)
        assert_close_ulp(got, want, ulps=16, what=name)


def test_the_full_run_has_the_shapes_asked_for() -> None:
    assert (bias.HEADS, bias.HEAD_DIM) == (16, 64)
    assert "4096" in bias.__doc__


def test_the_dense_builds_agree_with_the_whole_float64_bias() -> None:
    ns = bias._dense_namespace(40)
    whole = ns["whole"]()
    assert whole.shape == (bias.HEADS, 40, 40)
    assert ns["alibi_numpy"]().tobytes() == whole.tobytes()
    assert torch.equal(ns["alibi_torch"](), torch.from_numpy(whole))
    assert ns["alibi_torch_bf16"]().dtype == torch.bfloat16
    assert ns["t5_numpy"]().shape == whole.shape
    assert set(bias.DENSE_PATHS.values()) <= set(ns)
