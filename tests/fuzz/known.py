"""Known contract violations: tolerated by the fuzz tests, reproduced strictly.

Each entry describes one defect: ``matches`` recognises the violations it causes (narrowly: the
function, the argument and the way it fails) and ``reproducer`` is a minimal call that
violates the contract today. ``tests/fuzz/test_known.py`` runs every reproducer as a strict
xfail, so when a fix lands the reproducer passes, the test reports XPASS(strict) as a failure,
and the entry is to be removed from this table (the fuzz tests then hold the fixed behaviour).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

import posenc
from posenc import analysis

from .contract import Call, Violation

# -- what a violation looks like --------------------------------------------------------------


def _is_torch(value: Any) -> bool:
    return type(value).__module__.startswith("torch") and hasattr(value, "dtype")


def _ints(call: Call, names: tuple[str, ...] | None = None) -> list[int]:
    """The integer arguments of ``call`` (Python and NumPy scalars), by name if given."""
    out = []
    for name, value in call.kwargs.items():
        if names is not None and name not in names:
            continue
        if isinstance(value, numbers.Integral) and not isinstance(value, bool | np.bool_):
            out.append(int(value))
        elif isinstance(value, list | tuple):
            out.extend(int(v) for v in value if isinstance(v, int) and not isinstance(v, bool))
    return out


def _message(v: Violation) -> str:
    return "" if v.exc is None else f"{type(v.exc).__name__}: {v.exc}"


def _overflowing_number(v: Violation) -> bool:
    text = _message(v)
    return (
        v.kind == "raised"
        and isinstance(v.exc, OverflowError)
        and (
            "too large to convert to float" in text
            or "int too big to convert" in text
            or "too large for a float" in text
        )
    )


def _scaling(v: Violation) -> dict[str, Any]:
    spec = v.call.kwargs.get("scaling")
    try:
        spec = posenc.rope_scaling(spec)
    except (TypeError, ValueError):
        return {}
    return {} if spec is None else {"rope_type": spec.rope_type, **spec.params}


def _rope_edge(v: Violation) -> bool:
    if v.kind not in ("raised", "wrong"):
        return False
    params = _scaling(v)
    base = v.call.kwargs.get("base", params.get("rope_theta", 10000.0))
    kind = params.get("rope_type")
    if kind == "yarn" and float(base) == 1.0:
        return True
    if kind == "longrope" and params.get("original_max_position_embeddings") == 1:
        return True
    return kind == "dynamic" and any(i >= 2**40 for i in _ints(v.call, ("seq_len",)))


def _extreme_base(v: Violation) -> bool:
    bases = [v.call.kwargs.get(n) for n in ("base", "max_period")]
    reals = [float(b) for b in bases if isinstance(b, numbers.Real) and float(b) > 0]
    extreme = [b for b in reals if b < 1e-30 or b > 1e300]
    return v.kind in ("wrong", "raised", "unnamed") and bool(extreme)


def _mismatched_pairs(v: Violation) -> bool:
    return v.kind == "wrong" and bool(v.call.facts.get("mismatch"))


def _uint_tensor(v: Violation) -> bool:
    return (
        v.kind == "raised"
        and isinstance(v.exc, NotImplementedError)
        and any(f"UInt{bits}" in _message(v) for bits in (16, 32, 64))
    )


def _beyond_2_53_torch(v: Violation) -> bool:
    """A torch call whose positions (or positions + offset) leave +-2**53 or int64."""
    if not v.call.label.startswith(("posenc.torch", "SinusoidalPositionalEncoding", "Rotary")):
        return False
    for value in v.call.kwargs.values():
        integral = _is_torch(value) and not value.is_floating_point() and value.numel()
        if integral and int(value.max()) + max(_ints(v.call, ("offset",)) or [0]) > 2**53:
            return True
    return False


def _past_tensor(v: Violation) -> bool:
    past = v.call.kwargs.get("past_key_values_length")
    if _is_torch(past):
        return v.kind in ("accepted", "wrong", "raised", "unnamed")
    return v.kind == "raised" and any(
        i >= 10**9 for i in _ints(v.call, ("past_key_values_length",))
    )


def _mask_overflow(v: Violation) -> bool:
    labels = ("posenc.positions_from_mask", "posenc.positions_from_tokens")
    names = ("offset", "padding_idx", "pad_position")
    return v.call.label in labels and any(i >= 2**62 for i in _ints(v.call, names))


def _large_length(v: Violation) -> bool:
    return v.kind == "accepted" and any(i >= 2**63 for i in _ints(v.call, ("positions",)))


# -- the table --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Known:
    id: str
    reason: str
    matches: Callable[[Violation], bool]
    reproducer: Callable[[], Call]
    needs_torch: bool = False
    #: The reproducer holds now; variants of it are still tolerated (a strict test, no xfail).
    fixed: bool = False


def _call(label: str, fn: Callable[..., Any], check=lambda r: None, hostile=(), **kwargs):
    return Call(label, fn, kwargs, frozenset(hostile), frozenset(), check)


def _finite(result: Any) -> None:
    tables = result if isinstance(result, tuple) else (result,)
    for t in tables:
        assert np.all(np.isfinite(np.asarray(t))), "non-finite values"


def _torch() -> Any:
    import torch

    return torch


def _pt() -> Any:
    import posenc.torch

    return posenc.torch


# -- reproducers: minimal calls that break the contract today ----------------------------------


def _mismatched_pairs_call() -> Call:
    cos, sin = posenc.rotary_cos_sin([3], 4, pairs="half", dtype=np.float64)

    def check(out):  # pair (0, 2) turned by 3 rad, as the tables were built for
        assert np.allclose(out, [[math.cos(3), 0.0, math.sin(3), 0.0]]), f"got {out}"

    x = np.array([[1.0, 0.0, 0.0, 0.0]])
    kwargs = {"x": x, "cos": cos, "sin": sin, "pairs": "interleaved"}
    return Call(
        "posenc.apply_rotary",
        posenc.apply_rotary,
        kwargs,
        frozenset(),
        frozenset({"pairs"}),
        check,
        facts={"mismatch": True},
    )


def _beyond_call() -> Call:
    module = _pt().SinusoidalPositionalEncoding(4)
    return _call(
        "SinusoidalPositionalEncoding.encoding",
        module.encoding,
        hostile=("offset",),
        length_or_positions=_torch().tensor([2**53 - 1]),
        offset=4,
    )


def _past_call() -> Call:
    module = _pt().hf.MarianPositions(8)
    return _call(
        "MarianPositions.forward",
        module,
        hostile=("past_key_values_length",),
        input_ids_shape=(1, 2),
        past_key_values_length=_torch().tensor(-1),
    )


def _uint_call() -> Call:
    positions = _torch().tensor([1, 2], dtype=_torch().uint16)
    return _call("posenc.torch.sinusoidal", _pt().sinusoidal, positions=positions, d_model=4)


def _yarn_call() -> Call:
    yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}
    return _call(
        "posenc.rope_frequencies", posenc.rope_frequencies, _finite, dim=8, base=1.0, scaling=yarn
    )


def _hostile(v: Violation, *names: str) -> bool:
    """Whether one of ``names`` was drawn hostile or doubtful."""
    return bool((v.call.hostile | v.call.doubtful) & set(names))


def _check_shift_nan(v: Violation) -> bool:
    table = np.asarray(v.call.kwargs.get("table"))
    finite = table.dtype.kind in "iuf" and bool(np.all(np.isfinite(table)))
    return v.call.label == "posenc.analysis.check_shift" and v.kind == "accepted" and not finite


def _bad_device(v: Violation) -> bool:
    return v.kind in ("raised", "unnamed", "accepted") and _hostile(v, "device")


def _marian_shape(v: Violation) -> bool:
    return v.call.label == "MarianPositions.forward" and (
        _hostile(v, "input_ids_shape") or v.kind == "unnamed"
    )


def _m2m100_arguments(v: Violation) -> bool:
    labels = ("hf.M2M100Positions", "M2M100Positions.forward")
    named = _hostile(v, "inputs_embeds", "padding_idx", "num_positions")
    return v.call.label in labels and (named or v.kind == "unnamed")


def _token_ids_dtype(v: Violation) -> bool:
    ids = v.call.kwargs.get("input_ids")
    labels = ("hf.fairseq_positions", "M2M100Positions.forward")
    odd = _is_torch(ids) and (ids.dtype.is_complex or str(ids.dtype) == "torch.bool")
    return v.call.label in labels and v.kind == "accepted" and odd


def _padding_wraps(v: Violation) -> bool:
    ids, pad = v.call.kwargs.get("input_ids"), v.call.kwargs.get("padding_idx")
    labels = ("hf.fairseq_positions", "M2M100Positions.forward")
    if v.call.label not in labels or v.kind != "wrong" or not _is_torch(ids):
        return False
    if pad is None:  # M2M100Positions: the module's padding_idx
        return ids.dtype.itemsize < 8
    return int(pad) > _torch().iinfo(ids.dtype).max


def _padding_wraps_call() -> Call:
    def check(out):
        assert out.tolist() == [[258, 259, 260]], f"got {out.tolist()}"

    ids = _torch().tensor([[4, 5, 1]], dtype=_torch().uint8)
    return _call(
        "hf.fairseq_positions", _pt().hf.fairseq_positions, check, input_ids=ids, padding_idx=257
    )


def _embedding_ids(v: Violation) -> bool:
    return (
        v.call.label == "TransformerEmbedding.forward"
        and v.kind == "raised"
        and "indices" in _message(v)
    )


def _describe_message(v: Violation) -> bool:
    return v.call.label == "posenc.describe" and v.kind == "unnamed"


def _timestep_dim_one(v: Violation) -> bool:
    labels = ("posenc.torch.timestep_embedding", "TimestepEmbedding.forward")
    return v.call.label in labels and v.kind == "raised" and "reduction dim" in _message(v)


def _empty_interleaved(v: Violation) -> bool:
    return v.kind == "raised" and "cannot reshape tensor of 0 elements" in _message(v)


def _empty_interleaved_call() -> Call:
    rope = _pt().RotaryEmbedding(6, pairs="interleaved")
    q = _torch().zeros(2, 1, 0, 6)
    return _call("RotaryEmbedding.forward", rope, q=q, k=q)


def _check_shift_call() -> Call:
    return _call(
        "posenc.analysis.check_shift",
        analysis.check_shift,
        hostile=("table",),
        table=np.full((3, 4), np.nan),
        k=1,
    )


def _device_call() -> Call:
    return _call(
        "posenc.torch.sinusoidal",
        _pt().sinusoidal,
        hostile=("device",),
        positions=3,
        d_model=4,
        device="nope",
    )


def _marian_call() -> Call:
    return _call(
        "MarianPositions.forward",
        _pt().hf.MarianPositions(8),
        hostile=("input_ids_shape",),
        input_ids_shape=(1, 2.5),
    )


def _m2m100_call() -> Call:
    return _call(
        "M2M100Positions.forward",
        _pt().hf.M2M100Positions(8, 1),
        hostile=("inputs_embeds",),
        inputs_embeds=_torch().zeros(3),
    )


def _fairseq_call() -> Call:
    ids = _torch().tensor([[1j, 2j]])
    return _call(
        "hf.fairseq_positions",
        _pt().hf.fairseq_positions,
        hostile=("input_ids",),
        input_ids=ids,
        padding_idx=1,
    )


def _embedding_call() -> Call:
    module = _pt().TransformerEmbedding(300, 8, dropout=0.0)
    tokens = _torch().tensor([[1, 2]], dtype=_torch().uint8)
    return _call("TransformerEmbedding.forward", module, tokens=tokens)


def _timestep_call() -> Call:
    return _call(
        "posenc.torch.timestep_embedding",
        _pt().timestep_embedding,
        timesteps=_torch().tensor([1.0]),
        dim=1,
    )


KNOWN: list[Known] = [
    # -- found by this suite ------------------------------------------------------------------
    Known(
        "overflowing-numbers",
        "numbers too large for float64 (10**400, Fraction(10**400)) raise OverflowError",
        _overflowing_number,
        lambda: _call(
            "posenc.sinusoidal",
            posenc.sinusoidal,
            hostile=("base",),
            positions=3,
            d_model=4,
            base=10**400,
        ),
    ),
    Known(
        "check-shift-non-finite",
        "check_shift returns NaN for a table with NaN or inf instead of refusing it",
        _check_shift_nan,
        _check_shift_call,
    ),
    Known(
        "describe-message",
        "describe's TypeError does not name its argument (result)",
        _describe_message,
        lambda: _call("posenc.describe", posenc.describe, hostile=("result",), result=None),
    ),
    Known(
        "torch-device-unchecked",
        "a bad device raises torch's RuntimeError/AssertionError, blames positions, or is "
        "ignored (empty positions)",
        _bad_device,
        _device_call,
        needs_torch=True,
    ),
    Known(
        "marian-forward-arguments",
        "MarianPositions.forward does not check input_ids_shape (None, 'ab', (1, 2.5) "
        "truncated); its errors name 'length_or_positions' and 'offset' instead of "
        "position_ids and past_key_values_length",
        _marian_shape,
        _marian_call,
        needs_torch=True,
    ),
    Known(
        "m2m100-arguments",
        "M2M100Positions does not check inputs_embeds, and blames 'offset' for a huge "
        "padding_idx or past_key_values_length",
        _m2m100_arguments,
        _m2m100_call,
        needs_torch=True,
    ),
    Known(
        "fairseq-token-dtypes",
        "fairseq_positions (and M2M100Positions) accept bool and complex token ids",
        _token_ids_dtype,
        _fairseq_call,
        needs_torch=True,
    ),
    Known(
        "fairseq-padding-idx-wraps",
        "fairseq_positions / M2M100Positions compare the ids with padding_idx in the ids' "
        "dtype: uint8 ids with padding_idx 257 treat token 1 as padding",
        _padding_wraps,
        _padding_wraps_call,
        needs_torch=True,
    ),
    Known(
        "embedding-token-dtypes",
        "TransformerEmbedding: uint8/int8/int16 token ids raise torch's RuntimeError",
        _embedding_ids,
        _embedding_call,
        needs_torch=True,
        fixed=True,
    ),
    Known(
        "torch-timestep-dim-1",
        "posenc.torch.timestep_embedding / TimestepEmbedding with dim 1 raise RuntimeError",
        _timestep_dim_one,
        _timestep_call,
        needs_torch=True,
    ),
    Known(
        "rotary-interleaved-empty-sequence",
        "RotaryEmbedding(pairs='interleaved') raises RuntimeError for an empty sequence",
        _empty_interleaved,
        _empty_interleaved_call,
        needs_torch=True,
    ),
]


def find(violation: Violation) -> Known | None:
    """The entry that explains ``violation``, if any."""
    for entry in KNOWN:
        try:
            if entry.matches(violation):
                return entry
        except Exception:  # a predicate that cannot read the call does not match it
            continue
    return None
