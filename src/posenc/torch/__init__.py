"""PyTorch front-end: thin modules and functions over the float64 NumPy core.

Requires PyTorch (``pip install torch``). Every table is computed in float64 and
rounded once to the dtype it is used in, including float16 and bfloat16.

Positions, the same rule in every module, function and drop-in (docs/architecture.md):

- **The limit.** Positions, plus their ``offset`` (``past_key_values_length`` in
  :mod:`posenc.torch.hf`), must lie within +-2**53, where float64 holds integers exactly; a
  length ``L`` may be at most 2**53 + 1, an offset at most 2**53. Python numbers, arrays,
  lists and CPU tensors raise the NumPy core's ``ValueError``, naming the argument.
- **Unread data.** Accelerator and meta tensors and traced code are not read (no host
  synchronisation): a position that cannot be encoded gets a NaN row, never a finite,
  plausible one. ``set_data_checks(True)`` reads and raises there too.
- **Unsigned integers.** Positions, timesteps and token ids of any integer dtype work:
  uint8/uint16/uint32 convert to int64 exactly, and uint64 values from 2**63 up fall under
  the limit (an error, or NaN rows where the data are not read). Token ids are compared
  exactly too: a ``padding_idx`` their dtype cannot hold matches no token. Bool, complex
  and floating-point token ids are refused by name.

>>> from posenc.torch import SinusoidalPositionalEncoding
>>> SinusoidalPositionalEncoding(512, dropout=0.1)
SinusoidalPositionalEncoding(
  d_model=512, convention='paper', base=10000.0, batch_first=True, max_len=None
  (dropout): Dropout(p=0.1, inplace=False)
)
"""

try:
    import torch as _torch  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only without torch
    raise ImportError(
        "posenc.torch needs PyTorch: pip install torch (or, from a clone of posenc, "
        "pip install '.[torch]')"
    ) from exc

from . import hf
from ._bias.dense import alibi_bias, deberta_buckets, kerple_bias, sandwich_bias, t5_buckets
from ._bias.flex import (
    alibi_score_mod,
    bias_block_mask,
    kerple_score_mod,
    relative_logits_score_mod,
    relative_score_mod,
    sandwich_score_mod,
    t5_score_mod,
)
from ._bias.masks import allowed_pairs, bias_attn_mask
from ._bias.modules import FireBias, KerpleBias, T5RelativeBias
from ._bias.relative_terms import (
    deberta_relative_positions,
    disentangled_scores,
    relative_key_index,
    relative_key_scores,
    relative_logits,
    relative_position_scores,
    relative_shift,
)
from ._checks import set_data_checks
from ._embedding import TransformerEmbedding
from ._functional import apply_rotary, cast_exact, rotary_cos_sin, sinusoidal
from ._grid import SinusoidalGridEncoding
from ._multi_axis import multi_axis_cos_sin, multimodal_positions
from ._positions import compressed_positions
from ._rotary import RotaryEmbedding
from ._sinusoidal import SinusoidalPositionalEncoding
from ._timestep import TimestepEmbedding, timestep_embedding

__all__ = [
    "FireBias",
    "KerpleBias",
    "RotaryEmbedding",
    "SinusoidalGridEncoding",
    "SinusoidalPositionalEncoding",
    "T5RelativeBias",
    "TimestepEmbedding",
    "TransformerEmbedding",
    "alibi_bias",
    "alibi_score_mod",
    "allowed_pairs",
    "apply_rotary",
    "bias_attn_mask",
    "bias_block_mask",
    "cast_exact",
    "compressed_positions",
    "deberta_buckets",
    "deberta_relative_positions",
    "disentangled_scores",
    "hf",
    "kerple_bias",
    "kerple_score_mod",
    "multi_axis_cos_sin",
    "multimodal_positions",
    "relative_key_index",
    "relative_key_scores",
    "relative_logits",
    "relative_logits_score_mod",
    "relative_position_scores",
    "relative_score_mod",
    "relative_shift",
    "rotary_cos_sin",
    "sandwich_bias",
    "sandwich_score_mod",
    "set_data_checks",
    "sinusoidal",
    "t5_buckets",
    "t5_score_mod",
    "timestep_embedding",
]
