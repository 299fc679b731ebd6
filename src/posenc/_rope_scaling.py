"""RoPE scalings: one record per ``rope_type``, holding its keys, its validation and its transform.

RoPE rotates channel pair k of a query/key at position p by the angle p·ω_k with
ω_k = base^(-2k/dim), k = 0 .. dim/2 - 1 (``dim`` is the number of rotated channels). The
context-extension methods are transforms of these ω_k, some with an "attention factor" that
multiplies cos and sin. Parameter names are those of a Hugging Face config's
``rope_parameters`` (formerly ``rope_scaling``), and every formula follows the function that
``transformers.modeling_rope_utils.ROPE_INIT_FUNCTIONS`` holds for that ``rope_type``, but in
float64.

A ``rope_type`` is one :class:`RopeType` record in this module: the parameters it takes (each
with its check), those it requires, the relations between them, and the transform. Adding a
type is adding one record with :func:`register` (see docs/architecture.md); every front-end
(:func:`posenc.rotary_cos_sin`, ``posenc.torch.RotaryEmbedding``, the config readers) finds it
by name.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from ._checks import MAX_EXACT_POSITION, as_float, check_base, check_bool, check_int, check_length
from ._frequencies import check_frequencies, check_omega_size, check_schedule_base, paper_schedule

__all__ = [
    "ROPE_TYPES",
    "RopeInput",
    "RopeScaling",
    "RopeType",
    "register",
    "rope_frequencies",
    "rope_scaling",
]

_F64 = npt.NDArray[np.float64]


def _key(name: str) -> str:
    return f"scaling[{name!r}]"


# -- checks of one parameter: (name, value) -> canonical value ------------------------------------


def positive(name: str, value: Any) -> float:
    """A finite number > 0."""
    return check_base(_key(name), value)


def finite(name: str, value: Any) -> float:
    """A finite real number (any sign)."""
    result = as_float(_key(name), value, "a finite number")
    if not math.isfinite(result):
        raise ValueError(f"{_key(name)} must be a finite number, got {result!r}")
    return result


def length(name: str, value: Any) -> int:
    """An integer in [1, 2**53] (a number of positions; float64 holds them exactly)."""
    result = check_int(_key(name), value, minimum=1)
    if result > MAX_EXACT_POSITION:
        raise ValueError(f"{_key(name)} must be an integer in [1, 2**53], got {result}")
    return result


def flag(name: str, value: Any) -> bool:
    """True or False."""
    return check_bool(_key(name), value)


def factors(name: str, value: Any) -> tuple[float, ...]:
    """A non-empty 1-D sequence of positive finite numbers (per-frequency factors)."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence | np.ndarray):
        raise TypeError(f"{_key(name)} must be a list of positive numbers, got {value!r}")
    values = tuple(value)
    if not values:
        raise ValueError(f"{_key(name)} must be a non-empty list of positive numbers, got []")
    return tuple(check_base(f"{_key(name)}[{i}]", v) for i, v in enumerate(values))


def fraction(name: str, value: Any) -> float:
    """A number in (0, 1]."""
    result = check_base(_key(name), value)
    if result > 1.0:
        raise ValueError(f"{_key(name)} must be a number in (0, 1], got {result!r}")
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
            "(get_llama_4_attn_scale); the rotation is unchanged",
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


def _record(rope_type: Any) -> RopeType:
    if not isinstance(rope_type, str):
        raise TypeError(f"{_key('rope_type')} must be a string, got {rope_type!r}")
    try:
        return _RECORDS[rope_type]
    except KeyError:
        allowed = ", ".join(repr(t) for t in _RECORDS)
        raise ValueError(
            f"{_key('rope_type')} must be one of {allowed}, got {rope_type!r}"
        ) from None


def _not_a_parameter(name: str, record: RopeType) -> ValueError:
    return ValueError(
        f"{_key(name)} is not a parameter of rope_type {record.name!r} "
        f"(its parameters: {', '.join(record.keys) or 'none'})"
    )


# Order in which parameters are shown by repr (any key not listed here comes after).
_SHOWN_ORDER = (
    "factor",
    "original_max_position_embeddings",
    "max_position_embeddings",
    "low_freq_factor",
    "high_freq_factor",
    "beta_fast",
    "beta_slow",
    "mscale",
    "mscale_all_dim",
    "attention_factor",
    "truncate",
    "short_factor",
    "long_factor",
    "rope_theta",
    "partial_rotary_factor",
)


class RopeScaling:
    """A validated RoPE scaling: ``rope_type`` and the parameters that type uses.

    Build it from a Hugging Face style dict with :func:`rope_scaling` (or pass the dict itself
    wherever a ``scaling`` is accepted), or directly with keyword arguments. Parameters are
    read as attributes (``spec.factor``; ``None`` when not given). A parameter the
    ``rope_type`` does not use raises ``ValueError``. The parameters, by ``rope_type`` (``L0``
    is ``original_max_position_embeddings``):

    - ``default``: plain RoPE, ω_k = base^(-2k/dim).
    - ``linear`` (position interpolation): ``factor`` (> 0); ω_k / factor.
    - ``dynamic`` (dynamic NTK): ``factor`` and ``L0`` (or ``max_position_embeddings``, which
      is where Hugging Face reads it from). For a sequence length ``L > L0`` the base becomes
      ``base · (factor·L/L0 − (factor − 1))^(dim/(dim−2))``; for ``L <= L0`` nothing changes.
    - ``yarn``: ``factor`` (or ``max_position_embeddings / L0`` when omitted), ``L0``,
      ``beta_fast`` (32), ``beta_slow`` (1), ``truncate`` (True), ``attention_factor`` (else
      ``0.1·ln(factor) + 1``, or the ratio of that with ``mscale`` and ``mscale_all_dim`` when
      both are non-zero).
    - ``llama3``: ``factor``, ``low_freq_factor``, ``high_freq_factor`` and ``L0``.
    - ``longrope``: ``short_factor`` and ``long_factor`` (dim/2 positive numbers each; ω_k is
      divided by the short ones for a sequence length ``L <= L0`` and by the long ones above),
      ``L0``, ``attention_factor`` (else ``sqrt(1 + ln(factor)/ln(L0))``, 1 for factor <= 1)
      and ``factor`` (else ``max_position_embeddings / L0``).

    Every type also accepts ``rope_theta`` (must equal the ``base`` it is used with),
    ``partial_rotary_factor`` (the rotated fraction of the head, in (0, 1]) and
    ``max_position_embeddings``.

    >>> RopeScaling("linear", factor=4.0)
    RopeScaling(rope_type='linear', factor=4.0)
    >>> RopeScaling("linear")
    Traceback (most recent call last):
    ...
    ValueError: scaling['factor'] is required for rope_type 'linear'
    """

    __slots__ = ("_params", "_record")
    _params: Mapping[str, Any]
    _record: RopeType

    def __init__(self, rope_type: str = "default", **params: Any) -> None:
        record = _record(rope_type)
        accepted = {**record.keys, **COMMON_KEYS, **{n: c for n, (c, _) in INERT_KEYS.items()}}
        for name in params:
            if name not in accepted:
                raise _not_a_parameter(name, record)
        checked = {n: accepted[n](n, params[n]) for n in accepted if params.get(n) is not None}
        for name in record.required:
            if name not in checked:
                raise ValueError(f"{_key(name)} is required for rope_type {record.name!r}")
        record.relations(checked)
        object.__setattr__(self, "_record", record)
        object.__setattr__(self, "_params", MappingProxyType(checked))

    @property
    def rope_type(self) -> str:
        """The ``rope_type`` name."""
        return self._record.name

    @property
    def params(self) -> Mapping[str, Any]:
        """The given parameters, checked and in canonical types (read-only)."""
        return self._params

    @property
    def record(self) -> RopeType:
        """The :class:`RopeType` record of this scaling."""
        return self._record

    def __getattr__(self, name: str) -> Any:
        known = name in COMMON_KEYS or name in INERT_KEYS
        known = known or any(name in r.keys for r in _RECORDS.values())
        if name.startswith("_") or not known:
            raise AttributeError(f"RopeScaling has no attribute {name!r}")
        return self._params.get(name)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("RopeScaling is immutable; build a new one")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RopeScaling):
            return NotImplemented
        return self.rope_type == other.rope_type and dict(self._params) == dict(other._params)

    def __hash__(self) -> int:
        return hash((self.rope_type, tuple(sorted(self._params.items()))))

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (self.rope_type, dict(self._params)))

    def __repr__(self) -> str:
        order = {name: i for i, name in enumerate(_SHOWN_ORDER)}
        names = sorted(self._params, key=lambda n: order.get(n, len(order)))
        shown = [f"rope_type={self.rope_type!r}"] + [f"{n}={self._params[n]!r}" for n in names]
        return f"RopeScaling({', '.join(shown)})"

    @property
    def depends_on_length(self) -> bool:
        """True when the frequencies depend on the sequence length (``dynamic``, ``longrope``)."""
        return self._record.length_dependent

    @property
    def original_length(self) -> int | None:
        """The pre-training length L0 a length-dependent scaling compares the sequence with."""
        return self._record.original_length(self._params)


def _rebuild(rope_type: str, params: dict[str, Any]) -> RopeScaling:
    return RopeScaling(rope_type, **params)


def rope_scaling(scaling: Any) -> RopeScaling | None:
    """Normalise a ``scaling`` argument: ``None``, a :class:`RopeScaling` or a dict.

    The dict is a Hugging Face ``config.rope_parameters`` (or the older ``rope_scaling``):
    ``rope_type`` names the type (the older key ``type`` is accepted too; a dict with neither
    means ``"default"``); keys with the value ``None`` count as not given; any other key the
    type does not use raises ``ValueError`` naming it.

    >>> rope_scaling({"type": "linear", "factor": 2})
    RopeScaling(rope_type='linear', factor=2.0)
    >>> rope_scaling({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
    ...               "high_freq_factor": 4.0, "original_max_position_embeddings": 8192})
    RopeScaling(rope_type='llama3', factor=8.0, original_max_position_embeddings=8192, \
low_freq_factor=1.0, high_freq_factor=4.0)
    >>> rope_scaling({"rope_type": "yarn", "factr": 4.0})
    Traceback (most recent call last):
    ...
    ValueError: scaling['factr'] is not a parameter of rope_type 'yarn' (its parameters: \
factor, original_max_position_embeddings, attention_factor, beta_fast, beta_slow, mscale, \
mscale_all_dim, truncate)
    """
    if scaling is None or isinstance(scaling, RopeScaling):
        return scaling
    if not isinstance(scaling, Mapping):
        raise TypeError(
            "scaling must be None, a dict of rope parameters (e.g. {'rope_type': 'linear', "
            f"'factor': 2.0}}) or a RopeScaling, got {type(scaling).__name__}"
        )
    params = {k: v for k, v in scaling.items() if v is not None}
    for name in params:
        if not isinstance(name, str):
            raise TypeError(f"scaling keys must be strings, got {name!r}")
    old = params.pop("type", None)
    if old is not None and "rope_type" in params and params["rope_type"] != old:
        raise ValueError(
            f"{_key('rope_type')} = {params['rope_type']!r} and {_key('type')} = {old!r} "
            "disagree; give one of them"
        )
    rope_type = params.pop("rope_type", "default" if old is None else old)
    for record in _RECORDS.values():
        if record.spelled_as is not None and record.spelled_as[0] == rope_type:
            rope_type = record.name if record.spelled_as[1] in params else rope_type
    return RopeScaling(rope_type, **params)


def rope_frequencies(
    dim: int, *, base: float = 10000.0, scaling: Any = None, seq_len: int | None = None
) -> tuple[_F64, float]:
    """RoPE frequencies ω_k (float64, shape ``(dim/2,)``) and the attention factor of a scaling.

    Pair ``k`` of the rotated channels turns by ``p·ω_k`` at position ``p``. Without scaling
    ω_k = base^(-2k/dim) and the attention factor is 1; a scaling transforms the ω_k (see
    :class:`RopeScaling`) and may define an attention factor, the number Hugging Face
    multiplies cos and sin by (``attention_scaling``). The formulas are those of
    ``transformers``' ``ROPE_INIT_FUNCTIONS`` evaluated in float64 (transformers uses float32).

    Args:
        dim: number of rotated channels (the rotary dimension, not the head size when only
            part of the head rotates), an even integer >= 2. A ``partial_rotary_factor`` in
            ``scaling`` is not applied here (:func:`posenc.rotary_cos_sin` applies it).
        base: the wavelength base (``rope_theta``), a number >= 2**-970 (> 1 for ``yarn``).
        scaling: ``None``, a dict of Hugging Face rope parameters (``{"rope_type": "yarn",
            "factor": 4.0, ...}``) or a :class:`RopeScaling`.
        seq_len: the sequence length that ``dynamic`` and ``longrope`` depend on (Hugging
            Face uses the largest position + 1); ``None`` means "no longer than the original
            length". Other types ignore it. An integer in [0, 2**53 + 1].

    Returns:
        ``(omega, attention_factor)``: float64 array of shape ``(dim // 2,)`` and a float.
        Every ω_k is at most 2**970 (angles of positions up to 2**53 stay finite) and the
        attention factor is positive and finite; parameters that break this raise.

    >>> omega, attention = rope_frequencies(8)
    >>> omega, attention
    (array([1.   , 0.1  , 0.01 , 0.001]), 1.0)
    >>> rope_frequencies(8, scaling={"rope_type": "linear", "factor": 4.0})[0]
    array([0.25   , 0.025  , 0.0025 , 0.00025])
    >>> yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}
    >>> omega, attention = rope_frequencies(8, scaling=yarn)
    >>> round(attention, 6)
    1.138629
    """
    dim = check_int("dim", dim, minimum=2)
    if dim % 2:
        raise ValueError(f"dim must be even (RoPE rotates pairs of channels), got {dim}")
    base = check_schedule_base("base", base)
    spec = rope_scaling(scaling)
    if seq_len is not None:
        seq_len = check_length("seq_len", seq_len)
    check_omega_size("dim", dim)
    omega = paper_schedule(dim, base)
    if spec is None:
        return omega, 1.0
    theta = spec.params.get("rope_theta")
    if theta is not None and theta != base:
        raise ValueError(
            f"{_key('rope_theta')} = {theta!r} differs from base = {base!r}; pass base={theta!r}"
        )
    omega, attention = spec.record.transform(RopeInput(omega, dim, base, spec.params, seq_len))
    shown = ", ".join(f"{_key(n)} = {v!r}" for n, v in spec.params.items()) or "no parameters"
    check_frequencies(omega, attention, f"rope_type {spec.rope_type!r} with {shown}, base={base!r}")
    return omega, attention


# -- the records ----------------------------------------------------------------------------------


register(
    RopeType(
        name="default",
        keys={},
        required=(),
        transform=lambda r: (r.omega, 1.0),
        description="plain RoPE: w_k = base^(-2k/dim)",
    )
)

register(
    RopeType(
        name="linear",
        keys={"factor": positive},
        required=("factor",),
        transform=lambda r: (r.omega / r.params["factor"], 1.0),
        description="position interpolation: w_k / factor",
    )
)


def _dynamic_length(params: Mapping[str, Any]) -> int | None:
    original: int | None = params.get("original_max_position_embeddings")
    return original or params.get("max_position_embeddings")


def _dynamic_relations(params: Mapping[str, Any]) -> None:
    original, maximum = (
        params.get("original_max_position_embeddings"),
        params.get("max_position_embeddings"),
    )
    if original is None and maximum is None:
        raise ValueError(
            f"{_key('original_max_position_embeddings')} (or "
            f"{_key('max_position_embeddings')}) is required for rope_type 'dynamic'"
        )
    if original is not None and maximum is not None and original != maximum:
        raise ValueError(
            "rope_type 'dynamic' takes one length: "
            f"{_key('original_max_position_embeddings')} = {original} and "
            f"{_key('max_position_embeddings')} = {maximum} differ"
        )


def _dynamic(r: RopeInput) -> tuple[_F64, float]:
    if r.dim == 2:
        raise ValueError("dim must be >= 4 for rope_type 'dynamic' (its exponent is dim/(dim-2))")
    factor = r.params["factor"]
    original = (
        r.params.get("original_max_position_embeddings") or r.params["max_position_embeddings"]
    )
    longest = original if r.seq_len is None else max(r.seq_len, original)
    term = factor * longest / original - (factor - 1.0)  # >= 1 in exact arithmetic
    if not 0.5 <= term < math.inf or math.log(r.base) + math.log(term) * r.dim / (r.dim - 2) > 709:
        raise ValueError(
            f"rope_type 'dynamic' with {_key('factor')} = {factor!r}, base = {r.base!r} and "
            f"seq_len = {r.seq_len}: its scaled base overflows float64"
        )
    new_base = r.base * term ** (r.dim / (r.dim - 2))
    return paper_schedule(r.dim, new_base), 1.0


register(
    RopeType(
        name="dynamic",
        keys={"factor": positive, "original_max_position_embeddings": length},
        required=("factor",),
        transform=_dynamic,
        relations=_dynamic_relations,
        length_dependent=True,
        original_length=_dynamic_length,
        description="dynamic NTK: a larger base for sequences past the original length",
    )
)


def _get_mscale(scale: float, mscale: float = 1.0) -> float:
    """YaRN's attention temperature term: 0.1·mscale·ln(scale) + 1, or 1 for scale <= 1."""
    return 1.0 if scale <= 1.0 else 0.1 * mscale * math.log(scale) + 1.0


def _yarn_relations(params: Mapping[str, Any]) -> None:
    if "factor" not in params and "max_position_embeddings" not in params:
        raise ValueError(
            f"{_key('factor')} (or {_key('max_position_embeddings')}, to derive it) is "
            "required for rope_type 'yarn'"
        )


def _yarn_attention(p: Mapping[str, Any], factor: float) -> float:
    """The given attention factor, else from ``mscale``/``mscale_all_dim`` or ``factor``."""
    if not (p.get("mscale") and p.get("mscale_all_dim")):  # both non-zero, as in transformers
        return p.get("attention_factor") or _get_mscale(factor)
    bottom = _get_mscale(factor, p["mscale_all_dim"])
    attention = _get_mscale(factor, p["mscale"]) / bottom if bottom else math.inf
    if "attention_factor" not in p and not 0.0 < attention < math.inf:
        raise ValueError(
            f"{_key('mscale')} = {p['mscale']!r} and {_key('mscale_all_dim')} = "
            f"{p['mscale_all_dim']!r} give an attention factor of {attention:.4g}: it must be "
            "a positive finite number"
        )
    return p.get("attention_factor") or attention


def _yarn(r: RopeInput) -> tuple[_F64, float]:
    p, dim = r.params, r.dim
    if r.base <= 1.0:
        raise ValueError(
            f"base must be > 1 for rope_type 'yarn' (it divides by ln(base)), got {r.base}"
        )
    original = p["original_max_position_embeddings"]
    factor = p.get("factor") or p["max_position_embeddings"] / original
    attention = _yarn_attention(p, factor)

    def correction_dim(rotations: float) -> float:
        # the (fractional) pair index whose wavelength fits `rotations` times into L0
        return dim * math.log(original / (rotations * 2.0 * math.pi)) / (2.0 * math.log(r.base))

    low, high = correction_dim(p.get("beta_fast", 32.0)), correction_dim(p.get("beta_slow", 1.0))
    if p.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001  # as in transformers: avoids a zero-width ramp
    ramp = np.clip((np.arange(dim // 2, dtype=np.float64) - low) / (high - low), 0.0, 1.0)
    # ramp 0: keep ω_k (high frequencies, extrapolate); ramp 1: ω_k / factor (interpolate)
    return r.omega / factor * ramp + r.omega * (1.0 - ramp), float(attention)


register(
    RopeType(
        name="yarn",
        keys={
            "factor": positive,
            "original_max_position_embeddings": length,
            "attention_factor": positive,
            "beta_fast": positive,
            "beta_slow": positive,
            "mscale": finite,
            "mscale_all_dim": finite,
            "truncate": flag,
        },
        required=("original_max_position_embeddings",),
        transform=_yarn,
        relations=_yarn_relations,
        description="YaRN: interpolate low frequencies, keep high ones, scale attention",
    )
)


def _llama3_relations(params: Mapping[str, Any]) -> None:
    low, high = params["low_freq_factor"], params["high_freq_factor"]
    if high <= low:
        raise ValueError(
            f"{_key('high_freq_factor')} must be greater than {_key('low_freq_factor')}"
            f" = {low!r}, got {high!r}"
        )


def _llama3(r: RopeInput) -> tuple[_F64, float]:
    p, omega = r.params, r.omega
    factor, low, high = p["factor"], p["low_freq_factor"], p["high_freq_factor"]
    original = p["original_max_position_embeddings"]
    wavelength = 2.0 * math.pi / omega
    long_waves = wavelength > original / low  # low frequencies: divide by factor
    short_waves = wavelength < original / high  # high frequencies: unchanged
    smooth = (original / wavelength - low) / (high - low)
    blended = (1.0 - smooth) * omega / factor + smooth * omega
    return np.where(long_waves, omega / factor, np.where(short_waves, omega, blended)), 1.0


register(
    RopeType(
        name="llama3",
        keys={
            "factor": positive,
            "low_freq_factor": positive,
            "high_freq_factor": positive,
            "original_max_position_embeddings": length,
        },
        required=(
            "factor",
            "low_freq_factor",
            "high_freq_factor",
            "original_max_position_embeddings",
        ),
        transform=_llama3,
        relations=_llama3_relations,
        description="Llama 3: divide low frequencies by factor, blend the middle band",
    )
)


def _longrope_relations(params: Mapping[str, Any]) -> None:
    if not {"factor", "attention_factor", "max_position_embeddings"} & params.keys():
        raise ValueError(
            f"{_key('factor')} (or {_key('attention_factor')}, or "
            f"{_key('max_position_embeddings')}) is required for rope_type 'longrope'"
        )
    if params["original_max_position_embeddings"] < 2 and "attention_factor" not in params:
        raise ValueError(
            f"{_key('original_max_position_embeddings')} must be >= 2 for rope_type 'longrope' "
            f"(ln of it divides its attention factor), got 1; or give {_key('attention_factor')}"
        )


def _longrope(r: RopeInput) -> tuple[_F64, float]:
    p, dim = r.params, r.dim
    original = p["original_max_position_embeddings"]
    for name in ("short_factor", "long_factor"):
        if len(p[name]) != dim // 2:
            raise ValueError(
                f"{_key(name)} must have dim/2 = {dim // 2} entries (one per rotated pair), "
                f"got {len(p[name])}"
            )
    use_long = r.seq_len is not None and r.seq_len > original
    ext = np.asarray(p["long_factor" if use_long else "short_factor"], dtype=np.float64)
    attention = p.get("attention_factor")
    if attention is None:
        factor = p.get("factor") or p["max_position_embeddings"] / original
        attention = 1.0 if factor <= 1.0 else math.sqrt(1.0 + math.log(factor) / math.log(original))
    return r.omega / ext, float(attention)


register(
    RopeType(
        name="longrope",
        keys={
            "short_factor": factors,
            "long_factor": factors,
            "original_max_position_embeddings": length,
            "factor": positive,
            "attention_factor": positive,
        },
        required=("short_factor", "long_factor", "original_max_position_embeddings"),
        transform=_longrope,
        relations=_longrope_relations,
        length_dependent=True,
        description="LongRoPE: per-frequency factors, short below the original length, long above",
    )
)
