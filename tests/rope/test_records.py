"""A rope type is one record: adding one (here a throwaway type) touches one place.

The record below is registered for the test only; it then works through the NumPy tables,
``posenc.torch.RotaryEmbedding``, the functional torch API and the config reader of the
Hugging Face drop-in, with its keys checked like every other type's.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from types import SimpleNamespace

import numpy as np
import pytest

import posenc
from posenc._rope import records

LINEAR = {"rope_type": "linear", "factor": 3.0}
THROWAWAY = {"rope_type": "throwaway", "divisor": 3.0}


@pytest.fixture
def throwaway() -> Iterator[records.RopeType]:
    record = records.RopeType(
        name="throwaway",
        keys={"divisor": records.positive},
        required=("divisor",),
        transform=lambda r: (r.omega / r.params["divisor"], 1.0),
        description="a test type: w_k / divisor",
    )
    records.register(record)
    try:
        yield record
    finally:
        del records._RECORDS["throwaway"]


def test_the_record_is_a_known_rope_type(throwaway: records.RopeType) -> None:
    assert posenc.ROPE_TYPES["throwaway"] == "a test type: w_k / divisor"
    spec = posenc.rope_scaling(THROWAWAY)
    assert spec.rope_type == "throwaway"
    assert spec.divisor == 3.0
    assert repr(spec) == "RopeScaling(rope_type='throwaway', divisor=3.0)"


def test_its_keys_are_checked(throwaway: records.RopeType) -> None:
    with pytest.raises(ValueError, match=r"scaling\['divisor'\] is required"):
        posenc.rope_scaling({"rope_type": "throwaway"})
    with pytest.raises(ValueError, match=r"scaling\['divisor'\] must be a positive finite"):
        posenc.rope_scaling({"rope_type": "throwaway", "divisor": -1})
    with pytest.raises(ValueError, match=r"'factor'\] is not a parameter .* parameters: divisor"):
        posenc.rope_scaling({"rope_type": "throwaway", "divisor": 2.0, "factor": 2.0})


def test_numpy_tables(throwaway: records.RopeType) -> None:
    got = posenc.rotary_cos_sin(50, 16, scaling=THROWAWAY)
    want = posenc.rotary_cos_sin(50, 16, scaling=LINEAR)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])


def test_unregistered_after_the_test() -> None:
    assert "throwaway" not in posenc.ROPE_TYPES
    with pytest.raises(ValueError, match=r"scaling\['rope_type'\] must be one of"):
        posenc.rope_scaling(THROWAWAY)


needs_torch = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None, reason="torch is not installed"
)


@needs_torch
def test_torch_module_functional_and_config_reader(throwaway: records.RopeType) -> None:
    import torch

    from posenc.torch import RotaryEmbedding, rotary_cos_sin
    from posenc.torch.hf import LlamaRotary

    q = torch.randn(1, 2, 9, 16)
    got = RotaryEmbedding(16, scaling=THROWAWAY)(q, q)
    want = RotaryEmbedding(16, scaling=LINEAR)(q, q)
    assert all(torch.equal(a, b) for a, b in zip(got, want, strict=True))
    positions = torch.arange(9)[None]
    assert torch.equal(
        rotary_cos_sin(positions, 16, scaling=THROWAWAY)[1],
        rotary_cos_sin(positions, 16, scaling=LINEAR)[1],
    )
    config = SimpleNamespace(
        rope_parameters={**THROWAWAY, "rope_theta": 10000.0},
        hidden_size=64,
        num_attention_heads=4,
        max_position_embeddings=128,
    )
    rope = LlamaRotary.from_config(config)
    assert rope.scaling is not None
    assert rope.scaling.rope_type == "throwaway"
    assert torch.equal(
        rope(torch.zeros(1), positions)[0], rotary_cos_sin(positions, 16, scaling=LINEAR)[0]
    )
