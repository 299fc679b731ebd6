"""posenc.torch.hf.TimestampRotary, MusicFlamingo's rotary time embedding: its tables in every
dtype are the float64 table rounded once, its coordinates off the CPU are the NumPy core's,
and bad input is named. (Against transformers' module: tests/references/hf/test_rotary_time.py.)
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import posenc  # noqa: E402
from posenc.torch._kernels._cast import cast_exact  # noqa: E402
from posenc.torch.hf import TimestampRotary  # noqa: E402
from posenc.torch.hf._timestamps import _coordinates  # noqa: E402


def _rope(dtype: torch.dtype = torch.float32) -> TimestampRotary:
    return TimestampRotary(8, base=1200.0, frame_seconds=0.04, max_positions=1200.0, dtype=dtype)


def _tau(frames: int = 40) -> torch.Tensor:
    return torch.tensor([0, 1, 7])[:, None] * frames * 0.04 + torch.arange(frames) * 0.04


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_each_dtype_is_the_float64_table_rounded_once(dtype: torch.dtype) -> None:
    exact = _rope(torch.float64)(_tau(), 40)
    for got, want in zip(_rope(dtype)(_tau(), 40), exact, strict=True):
        assert got.dtype == dtype
        assert torch.equal(got, cast_exact(want, dtype))
    assert float((exact[0] - _rope(torch.bfloat16)(_tau(), 40)[0].double()).abs().max()) <= 2**-8


def test_device_coordinates_are_the_numpy_core_s() -> None:
    tau = _tau(13).double()
    ours = _coordinates(tau, 0.04, 1200.0)
    core = posenc.timestamp_positions(tau.numpy(), frame_seconds=0.04, max_positions=1200.0)
    np.testing.assert_array_max_ulp(ours.numpy(), core, maxulp=1)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda r: r(_tau(5), 4), ValueError, r"timestamps must have shape \(N, seq_len\)"),
        (lambda r: r(_tau(5), 0), ValueError, "seq_len must be"),
        (lambda r: r(torch.tensor([[float("nan")]]), 1), ValueError, "timestamps"),
        (lambda r: r(torch.tensor([[True]]), 1), TypeError, "timestamps must hold"),
        (lambda r: TimestampRotary(7, base=2.0, frame_seconds=1.0, max_positions=1.0),
         ValueError, "rotary_dim must be even"),
        (lambda r: TimestampRotary(8, base=2.0, frame_seconds=0.0, max_positions=1.0),
         ValueError, "frame_seconds must be a positive finite number"),
    ],
)  # fmt: skip
def test_bad_input_is_named(call, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        call(_rope())


def test_from_config_refuses_other_rope_types() -> None:
    from types import SimpleNamespace

    config = SimpleNamespace(
        rope_parameters={"rope_type": "linear", "factor": 2.0}, head_dim=40,
        audio_frame_step=0.01, max_position_embeddings=1200.0,
    )  # fmt: skip
    with pytest.raises(ValueError, match="rope_type 'linear'"):
        TimestampRotary.from_config(config)
