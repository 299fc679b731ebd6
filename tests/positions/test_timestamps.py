"""posenc.timestamp_positions: the rotary coordinates of audio frames from their timestamps
(MusicFlamingo's rotary time embedding), against the formula written out in float64, and the
tables they give against the model's angles built by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from posenc import multi_axis_cos_sin, timestamp_positions
from tests.tolerance import assert_close_ulp


def test_coordinates_follow_the_formula() -> None:
    step, frames, scale = 0.04, 5, 1200.0
    tau = np.array([w * frames * step + np.arange(frames) * step for w in (0, 3, 1)])
    coords = timestamp_positions(tau, frame_seconds=step, max_positions=scale)
    assert coords.shape == (3, 5, 2)
    assert coords.dtype == np.float64
    for row, w in zip(tau, (0, 3, 1), strict=True):
        i = [0, 3, 1].index(w)
        for t, seconds in enumerate(row):
            assert coords[i, t, 0] == pytest.approx(-2 * math.pi * seconds * w / scale, rel=1e-15)
            time = -2 * math.pi * seconds * (2 * math.pi * t / scale)
            assert coords[i, t, 1] == pytest.approx(time, rel=1e-15, abs=0.0)


def test_the_tables_are_the_model_s_angles() -> None:
    """MusicFlamingo's recipe by hand: ω_k = base^(-2k/dim), window pairs then time pairs,
    each angle times −2π·τ, neighbouring channels paired."""
    step, frames, scale, base, dim = 0.04, 7, 1200.0, 1200.0, 8
    tau = np.array([w * frames * step + np.arange(frames) * step for w in (0, 2)])
    omega = base ** (-np.arange(0, dim, 2) / dim)
    window = np.round(tau[:, :1] / (step * frames)) / scale
    angle = -2 * math.pi * tau
    theta = np.concatenate(
        [
            (window * angle)[..., None] * omega,
            (angle * (2 * math.pi * np.arange(frames) / scale))[..., None] * omega,
        ],
        axis=-1,
    ).repeat(2, axis=-1)
    coords = timestamp_positions(tau, frame_seconds=step, max_positions=scale)
    n = dim // 2
    cos, sin = multi_axis_cos_sin(
        coords, 4 * n, sections=(n, n), schedule="per_axis", base=base, pairs="interleaved",
        dtype=np.float64,
    )  # fmt: skip
    scale_ = np.maximum(np.abs(theta), 1.0)
    assert_close_ulp(cos, np.cos(theta), ulps=4, scale=scale_)
    assert_close_ulp(sin, np.sin(theta), ulps=4, scale=scale_)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"timestamps": 1.0}, ValueError, r"timestamps must have shape \(\.\.\., S\)"),
        ({"timestamps": [[np.nan]]}, ValueError, "timestamps must be finite"),
        ({"timestamps": [["a"]]}, TypeError, "timestamps must contain"),
        ({"frame_seconds": 0.0}, ValueError, "frame_seconds must be a positive finite number"),
        ({"max_positions": True}, TypeError, "max_positions must be a positive finite number"),
        ({"timestamps": [[1e300]], "frame_seconds": 1e-300}, ValueError, "beyond float64"),
    ],
)
def test_bad_arguments_are_named(kwargs: dict, error: type, match: str) -> None:
    args = {"timestamps": [[0.0, 0.04]], "frame_seconds": 0.04, "max_positions": 1200.0}
    with pytest.raises(error, match=match):
        timestamp_positions(**{**args, **kwargs})


def test_no_frames_give_no_coordinates() -> None:
    out = timestamp_positions(np.zeros((3, 0)), frame_seconds=0.04, max_positions=1.0)
    assert out.shape == (3, 0, 2)
