"""``swap_positions`` across transformers releases.

transformers 5.24 renamed the cache length that decoders pass to their absolute position
modules, ``past_key_values_length``, to ``cache_length`` (by keyword in Speech2Text, FSMT and
TrOCR; by position in M2M100). The modules here are the pinned release's own classes with the
newer ``forward``, so the rename is tested whichever release is installed: the swap must
replace them and the replacements must take the call the newer decoders make. An installed
transformers outside the ``hf`` extra's range is refused with both versions named.
"""

from __future__ import annotations

import copy
import importlib
import inspect
import re
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from torch import nn  # noqa: E402

from posenc.torch.hf import (  # noqa: E402
    LlamaRotary,
    M2M100Positions,
    MarianPositions,
    swap_positions,
)
from tests.tolerance import assert_close_float32_recipe, assert_close_ulp  # noqa: E402

PAD = 1
IDS = torch.tensor([[5, 6, 7, 8, 9], [PAD, PAD, 7, 8, 9]])


def _pass_cache_length(method, first, length, *rest):
    """Call the pinned release's ``forward`` with the cache length under its own name."""
    names = inspect.signature(method).parameters
    key = "cache_length" if "cache_length" in names else "past_key_values_length"
    return method(first, *rest, **{key: length})


def _speech2text():
    from transformers.models.speech_to_text import modeling_speech_to_text as m

    class Speech2Text(m.Speech2TextSinusoidalPositionalEmbedding):
        def forward(self, input_ids, cache_length=0):
            return _pass_cache_length(super().forward, input_ids, cache_length)

    return Speech2Text(64, 16, padding_idx=PAD), "fairseq numbering"


def _m2m100():
    from transformers.models.m2m_100 import modeling_m2m_100 as m

    class M2M100(m.M2M100SinusoidalPositionalEmbedding):
        def forward(self, input_ids=None, inputs_embeds=None, cache_length=0):
            return super().forward(input_ids, inputs_embeds, cache_length)

    return M2M100(64, 16, padding_idx=PAD), "fairseq numbering"


def _fsmt():
    from transformers.models.fsmt import modeling_fsmt as m

    class FSMT(m.SinusoidalPositionalEmbedding):
        def forward(self, input, *, cache_length=0):
            return _pass_cache_length(super().forward, input, cache_length)

    module = FSMT(64, 16, PAD)
    module.make_weight(64, 16, PAD)  # the table the model's _init_weights writes
    return module, "fairseq numbering"


def _marian():
    from transformers.models.marian import modeling_marian as m

    class Marian(m.MarianSinusoidalPositionalEmbedding):
        def forward(self, input_ids_shape, cache_length=0, position_ids=None):
            return super().forward(input_ids_shape, cache_length, position_ids)

    module = Marian(64, 16)
    module.weight.data = module.create_weight()  # the table the model's _init_weights writes
    return module, "rows past .. past+s-1"


RENAMED = {"speech2text": _speech2text, "m2m100": _m2m100, "fsmt": _fsmt, "marian": _marian}


@pytest.mark.parametrize("name", list(RENAMED))
def test_modules_called_with_cache_length_are_swapped(name):
    module, detail = RENAMED[name]()
    holder = nn.Module()
    holder.embed_positions = module
    report = swap_positions(holder)
    assert report.names == ["embed_positions"], str(report)
    assert detail in report.replaced[0].detail
    new = holder.embed_positions
    first = IDS.shape if name == "marian" else IDS
    for length in (0, 3):
        theirs = module(first, cache_length=length)
        ours = new(first, cache_length=length)
        # the pinned classes build their tables in float32, rounding p·ω: positions are
        # at most PAD + 1 + s + 3 (fairseq numbering), rows past .. past+s-1 (Marian)
        assert_close_float32_recipe(ours, theirs, max_angle=PAD + 1 + IDS.shape[1] + length)


def test_the_drop_ins_take_either_name_and_refuse_both():
    marian = MarianPositions(8, num_positions=16)
    assert torch.equal(marian((1, 3), cache_length=2), marian((1, 3), past_key_values_length=2))
    m2m = M2M100Positions(8, PAD, num_positions=16)
    assert torch.equal(m2m(IDS, cache_length=2), m2m(IDS, past_key_values_length=2))
    with pytest.raises(TypeError, match="past_key_values_length or as cache_length, not both"):
        m2m(IDS, past_key_values_length=2, cache_length=2)
    with pytest.raises(ValueError, match="cache_length must be an integer >= 0, got -1"):
        marian((1, 3), cache_length=-1)


# -- supported releases ---------------------------------------------------------------------


def test_the_supported_range_is_the_hf_extras():
    from posenc.torch.hf._version import SUPPORTED

    pyproject = (Path(__file__).parents[3] / "pyproject.toml").read_text(encoding="utf-8")
    extra = re.search(r"^hf = \[(.*)\]$", pyproject, flags=re.MULTILINE)
    assert extra, "pyproject.toml declares no hf extra"
    assert f'"transformers{SUPPORTED}"' in extra[1]


def _llama():
    config = transformers.LlamaConfig(
        hidden_size=64, num_attention_heads=4, num_hidden_layers=1, intermediate_size=64,
        vocab_size=32,
    )  # fmt: skip
    return transformers.LlamaForCausalLM(config)


@pytest.mark.parametrize("version", ["4.57.1", "5.22.0", "6.0.0", "6.0.0.dev0", "unknown"])
def test_an_unsupported_transformers_is_refused_with_both_versions(monkeypatch, version):
    model = _llama()
    before = copy.deepcopy(model.state_dict())
    # building a model may put another module object under sys.modules["transformers"]
    monkeypatch.setattr(sys.modules["transformers"], "__version__", version)
    message = f"transformers {version} is installed; posenc.torch.hf supports transformers"
    with pytest.raises(RuntimeError, match=re.escape(message) + r" >=5\.23,<6") as raised:
        swap_positions(model)
    assert "pip install 'transformers>=5.23,<6'" in str(raised.value)  # a command that works
    assert "posenc[" not in str(raised.value)  # posenc is installed from a clone
    assert not isinstance(model.model.rotary_emb, LlamaRotary)  # nothing replaced
    assert model.state_dict().keys() == before.keys()


@pytest.mark.parametrize("version", ["5.23.0", "5.24.0", "5.99.1.dev0"])
def test_a_supported_transformers_is_swapped(monkeypatch, version):
    model = _llama()
    monkeypatch.setattr(sys.modules["transformers"], "__version__", version)
    assert swap_positions(model).names == ["model.rotary_emb"]


def test_models_without_transformers_modules_are_not_checked(monkeypatch):
    monkeypatch.setattr(sys.modules["transformers"], "__version__", "4.57.1")
    assert not swap_positions(nn.Sequential(nn.Linear(2, 2))).replaced


# -- GPT-J and CodeGen's rotary module (transformers 5.24 on) ---------------------------------


def _gptj_rotary(rows: int = 64, dim: int = 16, build_dtype=None):
    """transformers 5.24's GPTJRotaryEmbedding (CodeGen's is the same but for the final
    ``.to(x.dtype)``), around the pinned release's own ``create_sinusoidal_positions``, which
    fills its ``[sin | cos]`` buffer; ``build_dtype``: the default dtype it is built under."""
    from transformers.models.gptj import modeling_gptj as m

    class GPTJRotaryEmbedding(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.max_positions, self.pos_embd_dim = rows, dim
            previous = torch.get_default_dtype()
            torch.set_default_dtype(build_dtype or previous)
            try:
                table = m.create_sinusoidal_positions(rows, dim)
            finally:
                torch.set_default_dtype(previous)
            self.embed_positions = nn.Buffer(table, persistent=False)

        def forward(self, x, position_ids):
            sincos = self.embed_positions[position_ids].to(x.dtype)
            sin, cos = torch.split(sincos, sincos.shape[-1] // 2, dim=-1)
            return sin, cos

    return GPTJRotaryEmbedding()


def test_a_rotary_module_reading_a_sin_cos_table_is_swapped():
    module = _gptj_rotary()
    holder = nn.Module()
    holder.rotary_emb = module
    report = swap_positions(holder)
    assert report.names == ["rotary_emb"], str(report)
    assert report.replaced[0].layout == "columns_sin_first"
    assert report.replaced[0].detail == "default, r=16"
    new = holder.rotary_emb
    assert new.max_positions == 64  # the attributes a model may read are kept
    ids = torch.stack([torch.arange(64), torch.arange(64).flip(0)])  # rows differ
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        x = torch.zeros(1, dtype=dtype)
        (sin, cos), (our_sin, our_cos) = module(x, ids), new(x, ids)
        assert our_sin.dtype == our_cos.dtype == dtype
        ulp = float(torch.finfo(dtype).eps)  # a float32 build and posenc's, each rounded once
        torch.testing.assert_close(our_sin, sin, rtol=0, atol=ulp + 4e-6)
        torch.testing.assert_close(our_cos, cos, rtol=0, atol=ulp + 4e-6)
    far = new(torch.zeros(1), torch.tensor([[100, 5000]]))  # beyond its 64 rows: computed
    assert far[0].shape == (1, 2, 8)


def test_a_sin_cos_table_built_in_16_bits_is_left():
    # under a 16-bit default dtype, create_sinusoidal_positions rounds its frequencies to it
    holder = nn.Module()
    holder.rotary_emb = _gptj_rotary(build_dtype=torch.bfloat16)
    report = swap_positions(holder)
    assert not report.replaced, str(report)
    assert "its table matches no sinusoidal convention" in report.left[0].reason


def test_gptj_and_codegen_rotary_modules_of_the_installed_release_are_swapped():
    from tests.torch import tiny_models

    for model_type in ("gptj", "codegen"):
        module = importlib.import_module(f"transformers.models.{model_type}.modeling_{model_type}")
        if not any(name.endswith("RotaryEmbedding") for name in vars(module)):
            pytest.skip(
                f"transformers {transformers.__version__}: no rotary module in {model_type}"
            )
        original, swapped, report = tiny_models.build_pair(model_type)
        assert report.names == ["transformer.rotary_emb"], str(report)
        tiny_models.compare(original, swapped)


def test_hy_v4_vl_text_model_is_swapped_with_its_interleaved_sections():
    """HY-V4-VL (transformers 5.24 on): M-RoPE in interleaved pairs, sections [12, 10, 10], on
    the 64 rope channels of its latent attention; swapped, the text model gives the same
    hidden states on (t, h, w) ids that differ between the axes, and doubled ids do not."""
    from tests.torch import tiny_models

    config_class = getattr(transformers, "HYV4VLTextConfig", None)
    if config_class is None:
        pytest.skip(f"transformers {transformers.__version__} has no HY-V4-VL")
    small = tiny_models._shrunk(config_class().to_dict())
    small |= {"qk_rope_head_dim": 64, "qk_nope_head_dim": 16, "v_head_dim": 16, "pad_token_id": 0}
    torch.manual_seed(0)
    original = transformers.HYV4VLTextModel(config_class(**small)).eval()
    swapped = copy.deepcopy(original)
    report = swap_positions(swapped)
    assert report.names == ["rotary_emb"], str(report)
    assert "sections=[12, 10, 10], order='interleaved'" in report.replaced[0].detail
    ids = torch.randint(2, 128, (1, 12), generator=torch.Generator().manual_seed(1))
    steps = torch.arange(12)
    positions = torch.stack([steps, steps // 2, steps % 3])[:, None]  # (3, b, s)

    def hidden(model):
        with torch.no_grad():
            return model(input_ids=ids, position_ids=positions).last_hidden_state

    expected = hidden(original)
    assert_close_ulp(hidden(swapped), expected, ulps=tiny_models.MODEL_ULPS, what="hidden states")
    control = hidden(tiny_models.doubled(swapped, report.names))
    assert float((control - expected).abs().max()) > 1e-3
