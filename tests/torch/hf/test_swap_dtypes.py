"""``swap_positions`` verifies rotary modules in float32, bfloat16 and float16, on a batch of
rows with different positions; ``MultiAxisRotary.from_config`` follows the plan's pair layout.

The rotary modules here are written as third-party code writes them (angles in ``x.dtype``,
only the first row of ``position_ids`` read); they carry ``dim`` and ``base`` attributes, so
no ``transformers`` config is needed, except for the GLM-4V comparison.
"""

from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch")

from posenc.torch.hf import MultiAxisRotary, swap_positions  # noqa: E402
from tests.tolerance import assert_close_float32_recipe  # noqa: E402

DIM, BASE = 16, 10000.0


class Rotary(torch.nn.Module):
    """Llama's rotary module, with the dtype its angles are computed in chosen per ``x.dtype``
    (``compute[x.dtype]``, float32 when absent) and, optionally, only the first row of
    ``position_ids`` read (``rows="first"``, or ``"first, expanded"`` to every row)."""

    def __init__(self, compute: dict | None = None, rows: str = "all") -> None:
        super().__init__()
        self.dim, self.base, self.compute, self.rows = DIM, BASE, compute or {}, rows

    def forward(self, x, position_ids):
        if self.rows != "all":
            first = position_ids[:1]
            position_ids = first.expand_as(position_ids) if "expanded" in self.rows else first
        dtype = self.compute.get(x.dtype, torch.float32)
        exponent = torch.arange(0, self.dim, 2, dtype=torch.float32) / self.dim
        inv_freq = (1.0 / self.base**exponent).to(dtype)
        freqs = position_ids[..., None].to(dtype) * inv_freq
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


def _swap(module: torch.nn.Module):
    model = torch.nn.Sequential()
    model.add_module("rotary_emb", module)
    return model, swap_positions(model)


def test_a_module_that_upcasts_16_bit_inputs_is_replaced():
    model, report = _swap(Rotary())
    assert report.names == ["rotary_emb"], str(report)
    assert type(model.rotary_emb).__module__.startswith("posenc.")


@pytest.mark.parametrize(
    ("compute", "named"),
    [
        ({torch.bfloat16: torch.bfloat16, torch.float16: torch.float16}, "bfloat16"),
        ({torch.float16: torch.float16}, "float16"),
        ({torch.bfloat16: torch.bfloat16}, "bfloat16"),
    ],
)
def test_a_module_computing_its_angles_in_16_bits_is_left(compute, named):
    model, report = _swap(Rotary(compute))
    assert report.names == [], str(report)
    (left,) = report.left
    assert f"in {named}" in left.reason, left.reason
    assert "differs from posenc's" in left.reason, left.reason
    assert "(the largest difference: " in left.reason, left.reason
    assert type(model.rotary_emb) is Rotary


def test_its_16_bit_tables_are_far_from_posencs_near_position_1000():
    """The defect the check catches: bfloat16 angles put cos off by more than 1 there."""
    ids = torch.arange(990, 1010)[None]
    x = torch.zeros(1, dtype=torch.bfloat16)
    theirs = Rotary({torch.bfloat16: torch.bfloat16})(x, ids)[0].double()
    ours = Rotary()(x.float(), ids)[0].double()
    assert float((theirs - ours).abs().max()) > 1.0


@pytest.mark.parametrize("rows", ["first", "first, expanded"])
def test_a_module_that_reads_only_the_first_row_of_position_ids_is_left(rows):
    model, report = _swap(Rotary(rows=rows))
    assert report.names == [], str(report)
    (left,) = report.left
    if rows == "first":
        assert "returns shape (1, " in left.reason, left.reason
    else:
        assert "differs from posenc's" in left.reason, left.reason
        assert "in row 1" in left.reason, left.reason
    assert type(model.rotary_emb) is Rotary


# -- MultiAxisRotary.from_config follows the plan's pair layout -------------------------------


def _glm4v_text_config():
    try:
        from transformers import Glm4vTextConfig
    except ImportError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"the GLM-4V comparison needs transformers under CI: {exc}")
        pytest.skip(f"transformers is not installed: {exc}")
    return Glm4vTextConfig(partial_rotary_factor=0.5)  # head_dim 128: 64 channels rotate


def test_multi_axis_from_config_gives_glm4v_its_interleaved_table():
    from transformers.models.glm4v.modeling_glm4v import Glm4vTextRotaryEmbedding

    config = _glm4v_text_config()
    theirs_module = Glm4vTextRotaryEmbedding(config)
    ours_module = MultiAxisRotary.from_config(config)
    steps = torch.arange(40)
    ids = torch.stack([steps, (steps * 3) % 17, (steps * 5 + 2) % 23])[:, None].expand(3, 2, 40)
    ids = ids.clone()
    ids[:, 1] = ids[:, 1].flip(-1)
    x = torch.zeros(1)
    theirs = theirs_module(x, ids)
    ours = ours_module(x.double(), ids)
    for a, b in zip(theirs, ours, strict=True):
        assert a.shape == b.shape == (2, 40, 64)
        # GLM-4V rounds p·ω in float32 (coordinates < 40), ours is float64
        assert_close_float32_recipe(a, b, max_angle=float(ids.max()))
    assert ours_module.pairs == "interleaved"
    # the half layout stays the default of the constructor
    assert MultiAxisRotary(32, sections=[2, 3, 3], rotary_dim=16).pairs == "half"


def test_multi_axis_rotary_refuses_an_unknown_pair_layout():
    with pytest.raises(ValueError, match=r"pairs must be 'half' or 'interleaved', got 'x'"):
        MultiAxisRotary(16, sections=[2, 3, 3], pairs="x")


def _tiny_llama(**kwargs):
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        max_position_embeddings=4096,
    )
    return transformers.LlamaForCausalLM(config, **kwargs).eval()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_a_model_cast_to_16_bits_is_left_with_the_cause_and_the_fixes(dtype):
    """model.to(dtype) casts the rotary buffer inv_freq, and the module then computes its
    tables from 16-bit frequencies: left, and the report says why and what to do."""
    model = _tiny_llama().to(dtype)
    report = swap_positions(model)
    assert not report.replaced
    (left,) = report.left
    name = str(dtype).removeprefix("torch.")
    assert "differs from posenc's" in left.reason
    assert f"its rotary buffer 'inv_freq' was cast to {name}" in left.reason
    assert f"swap before casting (swap_positions(model), then model.to(torch.{name}))" in (
        left.reason
    )
    assert f"dtype=torch.{name}" in left.reason
    with pytest.raises(ValueError, match="was cast to"):
        swap_positions(model, strict=True)


def test_the_fixes_the_report_names_work():
    """Swap, then cast: the model runs in bfloat16 with posenc's float64 frequencies; or build
    in bfloat16 (inv_freq stays float32 there): swapped and verified."""
    ids = torch.tensor([[3, 5, 7, 9]])
    swapped = _tiny_llama()
    assert swap_positions(swapped, strict=True).names == ["model.rotary_emb"]
    logits = swapped.to(torch.bfloat16)(ids).logits
    assert logits.dtype == torch.bfloat16
    assert bool(logits.isfinite().all())
    transformers = pytest.importorskip("transformers")
    config = _tiny_llama().config
    built = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    assert built.model.rotary_emb.inv_freq.dtype == torch.float32
    assert swap_positions(built, strict=True).names == ["model.rotary_emb"]
