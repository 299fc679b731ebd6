"""The attention-bias conventions that reproduce a framework's own rounding, by name.

Each name maps to the framework function whose output the convention equals (bit for bit in
that function's dtype; the buckets integer-equal), says which posenc call gives it, and
where the equality has limits, states them.

>>> sorted(BIAS_CONVENTIONS)
['alibi_bloom', 'alibi_falcon', 'alibi_mpt', 'deberta_transformers', 't5_transformers']
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

__all__ = ["BIAS_CONVENTIONS"]

#: name -> the framework function reproduced, and the posenc call that equals it.
BIAS_CONVENTIONS: Mapping[str, str] = MappingProxyType(
    {
        "alibi_bloom": (
            "transformers.models.bloom.modeling_bloom.build_alibi_tensor (slopes: "
            "_get_alibi_slopes): alibi_bias(heads, [0], key_positions, form='key', "
            "convention='bloom')"
        ),
        "alibi_falcon": (
            "transformers.models.falcon.modeling_falcon.build_alibi_tensor: "
            "alibi_bias(heads, [0], key_positions, form='key', convention='falcon')"
        ),
        "alibi_mpt": (
            "transformers.models.mpt.modeling_mpt.build_mpt_alibi_tensor: "
            "alibi_bias(heads, [L - 1], L, form='relative', max_bias=alibi_bias_max, "
            "convention='mpt'); bit for bit for alibi_bias_max 8 or 16 with 1 to 128 heads "
            "(every released MPT uses 8). For other values transformers' own result depends "
            "on the CPU: its float32 torch.pow(2, x) is not correctly rounded at some x "
            "(SLEEF's vector pow for whole chunks of heads, libm's powf for the rest), so "
            "posenc takes the correctly rounded power: one float32 ulp of 2^x, within two "
            "float32 ulps of each of its slopes"
        ),
        "deberta_transformers": (
            "transformers.models.deberta_v2.modeling_deberta_v2.make_log_bucket_position: "
            "deberta_buckets(..., convention='transformers') (posenc.torch for bit equality "
            "of the float32 log)"
        ),
        "t5_transformers": (
            "transformers.models.t5.modeling_t5.T5Attention._relative_position_bucket: "
            "t5_buckets(..., convention='transformers') (posenc.torch for bit equality of "
            "the float32 log)"
        ),
    }
)
