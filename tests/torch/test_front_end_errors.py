"""Inputs of the PyTorch front-end that used to end in a deep NumPy/PyTorch traceback or a
silent write: each is now accepted with the right result or refused by name."""

from __future__ import annotations

import re

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import posenc.torch as pt  # noqa: E402
from posenc.torch.hf import LlamaRotary, MultiAxisRotary  # noqa: E402

# -- NumPy positions with negative strides -------------------------------------------------------

REVERSED = np.arange(5)[::-1]
REVERSED_GRID = np.arange(15).reshape(5, 3)[::-1]


def _flat(result):
    parts = (result,) if isinstance(result, torch.Tensor) else result
    return torch.cat([r.flatten() for r in parts])


NEGATIVE_STRIDE_CALLS = {
    "sinusoidal": lambda p: pt.sinusoidal(p, 6),
    "rotary_cos_sin": lambda p: pt.rotary_cos_sin(p, 8),
    "timestep_embedding": lambda p: pt.timestep_embedding(p, 6),
    "TimestepEmbedding": lambda p: pt.TimestepEmbedding(6)(p),
    "SinusoidalPositionalEncoding.forward": lambda p: pt.SinusoidalPositionalEncoding(6)(
        torch.zeros(2, 5, 6), positions=p
    ),
    "SinusoidalPositionalEncoding.encoding": lambda p: pt.SinusoidalPositionalEncoding(6).encoding(
        p
    ),
    "RotaryEmbedding": lambda p: pt.RotaryEmbedding(8)(
        torch.ones(1, 2, 5, 8), torch.ones(1, 1, 5, 8), positions=p
    ),
    "hf.LlamaRotary": lambda p: LlamaRotary(8)(torch.zeros(1), p[None]),
}


@pytest.mark.parametrize("name", sorted(NEGATIVE_STRIDE_CALLS))
def test_negative_strides_are_accepted(name):
    call = NEGATIVE_STRIDE_CALLS[name]
    assert torch.equal(_flat(call(REVERSED)), _flat(call(REVERSED.copy())))


def test_negative_strides_multi_axis():
    def call(p):
        return pt.multi_axis_cos_sin(p, 16, sections=[2, 3, 3])

    assert torch.equal(_flat(call(REVERSED_GRID)), _flat(call(REVERSED_GRID.copy())))
    module = MultiAxisRotary(16, sections=[2, 3, 3], axes_dim=-1)
    got = module(torch.zeros(1), REVERSED_GRID)
    assert torch.equal(_flat(got), _flat(module(torch.zeros(1), REVERSED_GRID.copy())))


# -- meta tensors --------------------------------------------------------------------------------

META = torch.arange(5, device="meta")

META_POSITIONS = {
    "SinusoidalPositionalEncoding": (
        "x",
        lambda: pt.SinusoidalPositionalEncoding(6)(torch.zeros(2, 5, 6), positions=META),
    ),
    "RotaryEmbedding": (
        "q",
        lambda: pt.RotaryEmbedding(8)(
            torch.ones(1, 1, 5, 8), torch.ones(1, 1, 5, 8), positions=META
        ),
    ),
    "RotaryEmbedding.rotate": (
        "x",
        lambda: pt.RotaryEmbedding(8).rotate(torch.ones(1, 1, 5, 8), positions=META),
    ),
    "hf.LlamaRotary": ("x", lambda: LlamaRotary(8)(torch.zeros(1), META[None])),
    "hf.MultiAxisRotary": (
        "x",
        lambda: MultiAxisRotary(16, sections=[2, 3, 3])(torch.zeros(1), META.expand(3, 1, 5)),
    ),
    "sinusoidal": ("device='cpu' was asked", lambda: pt.sinusoidal(META, 6, device="cpu")),
    "rotary_cos_sin": ("device='cpu' was asked", lambda: pt.rotary_cos_sin(META, 8, device="cpu")),
    "multi_axis_cos_sin": (
        "device='cpu' was asked",
        lambda: pt.multi_axis_cos_sin(
            META[:, None].expand(5, 3), 16, sections=[2, 3, 3], device="cpu"
        ),
    ),
}


@pytest.mark.parametrize("name", sorted(META_POSITIONS))
def test_meta_positions_for_a_cpu_input_are_refused_by_name(name):
    against, call = META_POSITIONS[name]
    if against in ("x", "q"):
        against = f"{against} is on cpu"
    with pytest.raises(ValueError, match=r"positions|position_ids") as info:
        call()
    message = str(info.value)
    assert "on the meta device" in message
    assert against in message


@pytest.mark.parametrize("name", ["hf.LlamaRotary", "hf.MultiAxisRotary"])
def test_sparse_position_ids_are_refused_by_name(name):
    ids = torch.arange(5)[None].to_sparse()
    module = LlamaRotary(8) if name == "hf.LlamaRotary" else MultiAxisRotary(16, sections=[2, 3, 3])
    with pytest.raises(TypeError, match=r"position_ids must be a dense tensor, got layout"):
        module(torch.zeros(1), ids)


def test_llama_rotary_like_names_the_module_without_a_config():
    with pytest.raises(TypeError, match=r"module must have a 'config' attribute .* got Linear"):
        LlamaRotary.like(torch.nn.Linear(2, 2))


def test_meta_positions_with_meta_inputs_still_work():
    out = pt.SinusoidalPositionalEncoding(6)(torch.zeros(2, 5, 6, device="meta"), positions=META)
    assert out.device.type == "meta"
    assert out.shape == (2, 5, 6)
    assert pt.sinusoidal(META, 6).device.type == "meta"
    q = torch.ones(1, 1, 5, 8, device="meta")
    assert pt.RotaryEmbedding(8)(q, q, positions=META)[0].shape == q.shape


@pytest.mark.parametrize("argument", ["token_types", "image_grids"])
def test_multimodal_positions_refuses_meta_tensors_by_name(argument):
    args = {
        "token_types": torch.tensor([[0, 1, 1, 1, 1, 0]]),
        "image_grids": torch.tensor([[1, 2, 2]]),
    }
    args[argument] = args[argument].to("meta")
    with pytest.raises(ValueError, match=f"^{argument} is on the meta device"):
        pt.multimodal_positions(args.pop("token_types"), **args)


# -- rotary: k of another batch size than per-batch positions ------------------------------------


@pytest.mark.parametrize("k_batch", [3, 1])
def test_rotary_k_batch_must_match_per_batch_positions(k_batch):
    rope = pt.RotaryEmbedding(8)
    q, k = torch.ones(2, 1, 5, 8), torch.ones(k_batch, 1, 5, 8)
    message = (
        "k must have the batch size of the per-batch positions, 2 (q's), "
        f"got k of shape ({k_batch}, 1, 5, 8)"
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        rope(q, k, positions=torch.arange(5).expand(2, 5))


def test_rotary_shared_positions_allow_other_batches():
    rope = pt.RotaryEmbedding(8)
    q, k = torch.randn(2, 1, 5, 8), torch.randn(3, 1, 5, 8)
    for positions in (torch.arange(5), torch.arange(5)[None]):
        q_rot, k_rot = rope(q, k, positions=positions)
        assert q_rot.shape == q.shape
        assert k_rot.shape == k.shape
        assert torch.equal(k_rot, rope.rotate(k))


# -- torch.compile of the Hugging Face drop-in with a length-dependent scaling ------------------


def test_llama_rotary_dynamic_under_fullgraph_gives_advice_it_can_follow():
    scaling = {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 16}
    module = LlamaRotary(8, scaling=scaling)
    compiled = torch.compile(module, fullgraph=True, backend="eager")
    # dynamo wraps the ValueError in its own exception, whose text includes ours
    with pytest.raises(Exception, match="largest position") as info:
        compiled(torch.zeros(1), torch.arange(5)[None])
    message = str(info.value)
    assert "seq_len= together with positions=" not in message  # forward takes neither
    assert "compile without fullgraph=True" in message
    assert "posenc.torch.rotary_cos_sin(..., seq_len=)" in message


# -- in-place addition into memory that is not the tensor's own ----------------------------------


def test_add_into_a_self_overlapping_view_is_refused():
    module = pt.SinusoidalPositionalEncoding(8)
    memory = torch.zeros(24)
    x = memory.as_strided((1, 3, 8), (24, 1, 1))  # element [0, 1, 0] is element [0, 0, 1]
    with torch.no_grad(), pytest.raises(ValueError, match=r"^x is a self-overlapping view"):
        module.add_(x)
    assert not memory.any()  # nothing written
    y = torch.zeros(1, 3, 8)
    with torch.no_grad(), pytest.raises(ValueError, match=r"^out is a self-overlapping view"):
        module(y, out=x)


def test_add_into_an_expanded_view_says_what_is_wrong():
    module = pt.SinusoidalPositionalEncoding(8)
    x = torch.zeros(1, 1, 8).expand(2, 3, 8)
    message = r"^x is an expanded \(broadcast\) view, stride 0 .*\.contiguous\(\) or \.clone\(\)"
    with torch.no_grad(), pytest.raises(ValueError, match=message):
        module.add_(x)
    with torch.no_grad(), pytest.raises(ValueError, match=r"^out is an expanded"):
        module(torch.zeros(2, 3, 8), out=x)


@pytest.mark.parametrize(
    "make",
    [
        lambda: torch.zeros(3, 2, 8).transpose(0, 1),
        lambda: torch.zeros(2, 6, 8)[:, ::2],
        lambda: torch.zeros(100).as_strided((1, 3, 8), (100, 16, 2)),  # gaps, no overlap
    ],
)
def test_add_into_views_with_memory_of_their_own(make):
    module = pt.SinusoidalPositionalEncoding(8)
    x = make()
    with torch.no_grad():
        assert module.add_(x) is x
    assert torch.equal(x, module(torch.zeros(x.shape)))
