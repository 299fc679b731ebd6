"""RoPE scalings: :class:`RopeScaling`, a validated ``rope_type`` and its parameters, and
:func:`rope_frequencies`, the float64 frequencies it gives.

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

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import numpy as np
import numpy.typing as npt

from .._checks import check_int, check_length
from .._frequencies import check_frequencies, check_omega_size, check_schedule_base, paper_schedule
from . import scaling_families, scaling_types  # noqa: F401  (register the types)
from .records import (
    COMMON_KEYS,
    INERT_KEYS,
    ROPE_TYPES,
    RopeInput,
    RopeType,
    find_record,
    key_name,
    known_key,
    not_a_parameter,
    records,
)

__all__ = ["ROPE_TYPES", "RopeScaling", "rope_base", "rope_frequencies", "rope_scaling"]

_F64 = npt.NDArray[np.float64]


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

    Every type also accepts ``rope_theta`` (the base when none is passed; else it must equal it),
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
        record = find_record(rope_type)
        accepted = {**record.keys, **COMMON_KEYS, **{n: c for n, (c, _) in INERT_KEYS.items()}}
        for name in params:
            if name not in accepted:
                raise not_a_parameter(name, record)
        checked = {n: accepted[n](n, params[n]) for n in accepted if params.get(n) is not None}
        for name in record.required:
            if name not in checked:
                raise ValueError(f"{key_name(name)} is required for rope_type {record.name!r}")
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
        if name.startswith("_") or not known_key(name):
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
            f"{key_name('rope_type')} = {params['rope_type']!r} and {key_name('type')} = {old!r} "
            "disagree; give one of them"
        )
    rope_type = params.pop("rope_type", "default" if old is None else old)
    for record in records():
        if record.spelled_as is not None and record.spelled_as[0] == rope_type:
            rope_type = record.name if record.spelled_as[1] in params else rope_type
    return RopeScaling(rope_type, **params)


#: The base when neither the caller nor the scaling gives one (transformers' default).
DEFAULT_BASE = 10000.0


def rope_base(base: Any, spec: RopeScaling | None, name: str = "base") -> Any:
    """The base a caller means: ``base`` when given; else the scaling's ``rope_theta`` (a
    ``rope_parameters`` dict copied from a config works as written), else 10000.0. A conflict
    (both given, different) is refused where the frequencies are made."""
    if base is not None:
        return base
    theta = None if spec is None else spec.params.get("rope_theta")
    return DEFAULT_BASE if theta is None else theta


def rope_frequencies(
    dim: int, *, base: float | None = None, scaling: Any = None, seq_len: int | None = None
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
        base: the wavelength base (``rope_theta``), a number >= 2**-970 (> 1 for ``yarn``);
            default the scaling's ``rope_theta``, else 10000.0. Giving both, different, raises.
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
    spec = rope_scaling(scaling)
    name = "base" if base is not None or spec is None else key_name("rope_theta")
    base = check_schedule_base(name, rope_base(base, spec))
    if seq_len is not None:
        seq_len = check_length("seq_len", seq_len)
    check_omega_size("dim", dim)
    omega = paper_schedule(dim, base)
    if spec is None:
        return omega, 1.0
    theta = spec.params.get("rope_theta")
    if theta is not None and theta != base:
        raise ValueError(
            f"{key_name('rope_theta')} = {theta!r} differs from base = {base!r}; "
            f"pass base={theta!r}"
        )
    omega, attention = spec.record.transform(RopeInput(omega, dim, base, spec.params, seq_len))
    shown = ", ".join(f"{key_name(n)} = {v!r}" for n, v in spec.params.items()) or "no parameters"
    check_frequencies(omega, attention, f"rope_type {spec.rope_type!r} with {shown}, base={base!r}")
    return omega, attention
