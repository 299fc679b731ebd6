"""RoPE scaling records: one :class:`RopeType` per ``rope_type``, and the checks of their keys.

A ``rope_type`` is a record: the parameters it takes (each with its check), those it requires,
the relations between them, and its frequency transform. :func:`register` adds one; the
Hugging Face types are in ``scaling_types``, the types one model family defines in
``scaling_families``, and :class:`posenc.RopeScaling` (``scaling``) finds them by name. Adding a
type is adding one record (docs/architecture.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from .._checks import MAX_EXACT_POSITION, as_float, check_base, check_bool, check_int

__all__ = [
    "COMMON_KEYS",
    "INERT_KEYS",
    "ROPE_TYPES",
    "RopeInput",
    "RopeType",
    "attention",
    "find_record",
    "key_name",
    "known_key",
    "not_a_parameter",
    "records",
    "register",
    "rotations",
]

_F64 = npt.NDArray[np.float64]


def key_name(name: str) -> str:
    """How a rope parameter is named in messages: ``scaling['factor']``."""
    return f"scaling[{name!r}]"


# -- checks of one parameter: (name, value) -> canonical value ------------------------------------


def positive(name: str, value: Any) -> float:
    """A finite number > 0."""
    return check_base(key_name(name), value)


def finite(name: str, value: Any) -> float:
    """A finite real number (any sign)."""
    result = as_float(key_name(name), value, "a finite number")
    if not math.isfinite(result):
        raise ValueError(f"{key_name(name)} must be a finite number, got {result!r}")
    return result


#: The largest attention factor: cos and sin times it stay finite in float16 (max 65504).
MAX_ATTENTION = 2.0**15


def attention(name: str, value: Any) -> float:
    """An attention factor: a number in (0, 2**15] (the tables stay finite in float16)."""
    result = check_base(key_name(name), value)
    if result > MAX_ATTENTION:
        raise ValueError(
            f"{key_name(name)} must be a number in (0, 2**15] (it multiplies cos and sin, "
            f"which must stay finite in float16), got {result!r}"
        )
    return result


def rotations(name: str, value: Any) -> float:
    """A number of rotations (YaRN's ``beta_fast``/``beta_slow``): in [2**-64, 2**64]."""
    result = check_base(key_name(name), value)
    if not 2.0**-64 <= result <= 2.0**64:
        raise ValueError(f"{key_name(name)} must be a number in [2**-64, 2**64], got {result!r}")
    return result


def length(name: str, value: Any) -> int:
    """An integer in [1, 2**53] (a number of positions; float64 holds them exactly)."""
    result = check_int(key_name(name), value, minimum=1)
    if result > MAX_EXACT_POSITION:
        raise ValueError(f"{key_name(name)} must be an integer in [1, 2**53], got {result}")
    return result


def flag(name: str, value: Any) -> bool:
    """True or False."""
    return check_bool(key_name(name), value)


def factors(name: str, value: Any) -> tuple[float, ...]:
    """A non-empty 1-D sequence of positive finite numbers (per-frequency factors)."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence | np.ndarray):
        raise TypeError(f"{key_name(name)} must be a list of positive numbers, got {value!r}")
    values = tuple(value)
    if not values:
        raise ValueError(f"{key_name(name)} must be a non-empty list of positive numbers, got []")
    return tuple(check_base(f"{key_name(name)}[{i}]", v) for i, v in enumerate(values))


def fraction(name: str, value: Any) -> float:
    """A number in (0, 1]."""
    result = check_base(key_name(name), value)
    if result > 1.0:
        raise ValueError(f"{key_name(name)} must be a number in (0, 1], got {result!r}")
    return result


Check = Callable[[str, Any], Any]

#: Keys every rope_type accepts: the base (``rope_theta``, which must equal the ``base`` it is
#: used with), the rotated fraction of the head and the model's ``max_position_embeddings``.
COMMON_KEYS: Mapping[str, Check] = MappingProxyType(
    {"max_position_embeddings": length, "rope_theta": positive, "partial_rotary_factor": fraction}
)


#: Keys that model configs put in their rope parameters and that leave the cos/sin tables
#: unchanged (the model uses them elsewhere). Every rope_type accepts them; no transform reads
#: them. Name -> (its check, what the model does with it).
INERT_KEYS: Mapping[str, tuple[Check, str]] = MappingProxyType(
    {
        "llama_4_scaling_beta": (
            finite,
            "Ministral 3 / Mistral 4: scales the queries by position inside attention "
            "(get_llama_4_attn_scale; the layers' temperature); the rotation is unchanged",
        ),
    }
)


class RopeInput(NamedTuple):
    """What a transform gets: the unscaled ω_k (float64 ``(dim/2,)``), the rotated ``dim``,
    the ``base``, the validated parameters and the sequence length (None: not longer than the
    original length)."""

    omega: _F64
    dim: int
    base: float
    params: Mapping[str, Any]
    seq_len: int | None


@dataclass(frozen=True)
class RopeType:
    """One ``rope_type``: everything posenc knows about it, in one place.

    Attributes:
        name: the ``rope_type`` value of a config.
        keys: its own parameters (besides :data:`COMMON_KEYS`), each with its check, in the
            order error messages list them.
        required: the keys it cannot do without.
        transform: ``RopeInput -> (omega, attention_factor)``.
        relations: checks between parameters (after each was checked alone); raise
            ``ValueError`` naming the keys.
        length_dependent: the frequencies depend on the sequence length (``seq_len``).
        original_length: the pre-training length a length-dependent type compares with.
        description: one line for :data:`ROPE_TYPES`.
        keeps_head_dim: ``partial_rotary_factor`` does not shorten the table: the type gets the
            whole head as ``dim`` and gives zero frequencies to the pairs it does not rotate.
        spelled_as: ``(rope_type, key)``: a config that names this other ``rope_type`` and
            gives this key means this type (HunYuan writes NTK-alpha as ``"dynamic"`` with
            ``"alpha"``).
    """

    name: str
    keys: Mapping[str, Check]
    required: tuple[str, ...]
    transform: Callable[[RopeInput], tuple[_F64, float]]
    description: str
    relations: Callable[[Mapping[str, Any]], None] = lambda params: None
    length_dependent: bool = False
    original_length: Callable[[Mapping[str, Any]], int | None] = field(
        default=lambda params: params.get("original_max_position_embeddings")
    )
    keeps_head_dim: bool = False
    spelled_as: tuple[str, str] | None = None


_RECORDS: dict[str, RopeType] = {}


class _Descriptions(Mapping[str, str]):
    """A live, read-only view: ``rope_type`` -> its one-line description."""

    def __getitem__(self, name: str) -> str:
        return _RECORDS[name].description

    def __iter__(self) -> Iterator[str]:
        return iter(_RECORDS)

    def __len__(self) -> int:
        return len(_RECORDS)

    def __repr__(self) -> str:
        return repr(dict(self))


#: Read-only mapping from each known ``rope_type`` to a one-line description.
ROPE_TYPES: Mapping[str, str] = _Descriptions()


def register(record: RopeType) -> RopeType:
    """Add ``record`` to the known rope types (its name must be new)."""
    if record.name in _RECORDS:
        raise ValueError(f"rope_type {record.name!r} is already registered")
    _RECORDS[record.name] = record
    return record


def find_record(rope_type: Any) -> RopeType:
    """The record of ``rope_type`` (a registered name), or a ValueError listing them."""
    if not isinstance(rope_type, str):
        raise TypeError(f"{key_name('rope_type')} must be a string, got {rope_type!r}")
    try:
        return _RECORDS[rope_type]
    except KeyError:
        allowed = ", ".join(repr(t) for t in _RECORDS)
        raise ValueError(
            f"{key_name('rope_type')} must be one of {allowed}, got {rope_type!r}"
        ) from None


def not_a_parameter(name: str, record: RopeType) -> ValueError:
    return ValueError(
        f"{key_name(name)} is not a parameter of rope_type {record.name!r} "
        f"(its parameters: {', '.join(record.keys) or 'none'})"
    )


def known_key(name: str) -> bool:
    """True when ``name`` is a parameter of some registered type, a common or an inert key."""
    if name in COMMON_KEYS or name in INERT_KEYS:
        return True
    return any(name in record.keys for record in _RECORDS.values())


def records() -> tuple[RopeType, ...]:
    """The registered records, in registration order."""
    return tuple(_RECORDS.values())
