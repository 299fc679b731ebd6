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
from tests.tolerance import assert_close_float32_recipe  # noqa: E402

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

    pyproject = (Path(__file__).parents[2] / "pyproject.toml").read_text(encoding="utf-8")
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
    with pytest.raises(RuntimeError, match=re.escape(message) + r" >=5\.23,<6"):
        swap_positions(model)
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
