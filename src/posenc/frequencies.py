"""Frequency schedules ω_k of the sinusoidal encodings, in float64.

Two schedules cover the 1-D conventions (``h = d_model // 2``):

- ``paper``: ω_k = base^(-2k/d_model) for k = 0 .. ceil(d_model/2) - 1. The wavelengths
  2π/ω_k run in a geometric progression from 2π towards base·2π.
- ``timescale``: ω_k = base^(-k/max(h-1, 1)) for k = 0 .. h - 1 (tensor2tensor's
  ``log_timescale_increment``); the last frequency is exactly 1/base.

The exponent is formed as one correctly rounded division and raised with ``np.power`` in
float64, so each ω_k is within about 1e-15 (relative) of the exact value; an angle p·ω_k is
then exact to about p·2e-16, far below float32 resolution for every p < 10^7.

Rotary embeddings (RoPE) use the ``paper`` schedule of their rotated dimension, transformed by
the context-extension scalings of Hugging Face ``rope_parameters`` (``linear``, ``dynamic``,
``yarn``, ``llama3``, ``longrope``): see :func:`rope_frequencies` and :class:`RopeScaling`.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import numpy.typing as npt

from ._checks import check_base, check_bool, check_int
from .conventions import get_convention

__all__ = [
    "ROPE_TYPES",
    "RopeScaling",
    "frequencies",
    "paper_schedule",
    "rope_frequencies",
    "rope_scaling",
    "timescale_schedule",
]


def paper_schedule(d_model: int, base: float) -> npt.NDArray[np.float64]:
    """ω_k = base^(-2k/d_model) for k = 0 .. ceil(d_model/2) - 1 (float64, no argument checks)."""
    k = np.arange((d_model + 1) // 2, dtype=np.float64)
    return np.power(base, -(2.0 * k) / d_model)


def timescale_schedule(d_model: int, base: float) -> npt.NDArray[np.float64]:
    """ω_k = base^(-k/max(h-1, 1)), h = d_model // 2 (float64, no argument checks)."""
    half = d_model // 2
    k = np.arange(half, dtype=np.float64)
    return np.power(base, -k / max(half - 1, 1))


_SCHEDULES = {"paper": paper_schedule, "timescale": timescale_schedule}


def frequencies(
    d_model: int, *, base: float = 10000.0, convention: Any = "paper"
) -> npt.NDArray[np.float64]:
    """The angular frequencies ω_k of a convention, as float64 of shape ``(n,)``.

    ``n`` is ``ceil(d_model/2)`` for the ``paper`` and ``marian`` conventions and
    ``d_model // 2`` for ``tensor2tensor``. Column ``k`` of the sin (and cos) part of the
    table is ``sin(p * ω_k)`` (``cos(p * ω_k)``).

    Args:
        d_model: number of channels, an integer >= 1.
        base: the wavelength base (10000 in the paper), a finite number > 0.
        convention: a name from :data:`posenc.CONVENTIONS`.

    Returns:
        ``np.ndarray`` of float64, shape ``(n,)``, starting at ω_0 = 1.

    >>> frequencies(8)
    array([1.   , 0.1  , 0.01 , 0.001])
    >>> frequencies(8, convention="tensor2tensor")
    array([1.00000000e+00, 4.64158883e-02, 2.15443469e-03, 1.00000000e-04])
    """
    d_model = check_int("d_model", d_model, minimum=1)
    base = check_base("base", base)
    return _SCHEDULES[get_convention(convention).schedule](d_model, base)


# ---------------------------------------------------------------------------------------------
# Rotary position embeddings (RoPE): base frequencies and their scalings
# ---------------------------------------------------------------------------------------------
#
# RoPE rotates channel pair k of a query/key at position p by the angle p·ω_k with
# ω_k = base^(-2k/dim), k = 0 .. dim/2 - 1 (``dim`` is the number of rotated channels). The
# context-extension methods are transforms of these ω_k, some with an "attention factor" that
# multiplies cos and sin. Parameter names are those of a Hugging Face config's
# ``rope_parameters`` (formerly ``rope_scaling``), and every formula follows the function that
# ``transformers.modeling_rope_utils.ROPE_INIT_FUNCTIONS`` holds for that ``rope_type``, but in
# float64.

#: The ``rope_type`` values understood by :func:`rope_frequencies`.
ROPE_TYPES = ("default", "linear", "dynamic", "yarn", "llama3", "longrope")

# Keys every rope_type accepts: the type itself, the base (``rope_theta``), the rotated fraction
# of the head and the model's ``max_position_embeddings`` (used by dynamic, yarn and longrope).
_COMMON_KEYS = ("rope_type", "rope_theta", "partial_rotary_factor", "max_position_embeddings")
_TYPE_KEYS: dict[str, tuple[str, ...]] = {
    "default": (),
    "linear": ("factor",),
    "dynamic": ("factor", "original_max_position_embeddings"),
    "yarn": (
        "factor",
        "original_max_position_embeddings",
        "attention_factor",
        "beta_fast",
        "beta_slow",
        "mscale",
        "mscale_all_dim",
        "truncate",
    ),
    "llama3": ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"),
    "longrope": (
        "short_factor",
        "long_factor",
        "original_max_position_embeddings",
        "factor",
        "attention_factor",
    ),
}


def _key(name: str) -> str:
    return f"scaling[{name!r}]"


def _finite(name: str, value: Any) -> float:
    """A finite real number (any sign)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a finite number, got {value!r}")
    result = float(value)
    if not math.isfinite(result):
        raise ValueError(f"{name} must be a finite number, got {result!r}")
    return result


def _factors(name: str, value: Any) -> tuple[float, ...]:
    """A non-empty 1-D sequence of positive finite numbers (LongRoPE's per-frequency factors)."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence | np.ndarray):
        raise TypeError(f"{name} must be a list of positive numbers, got {value!r}")
    values = tuple(value)
    if not values:
        raise ValueError(f"{name} must be a non-empty list of positive numbers, got []")
    return tuple(check_base(f"{name}[{i}]", v) for i, v in enumerate(values))


@dataclass(frozen=True)
class RopeScaling:
    """A validated RoPE scaling: ``rope_type`` and the parameters that type uses.

    Build it from a Hugging Face style dict with :func:`rope_scaling` (or pass the dict itself
    wherever a ``scaling`` is accepted), or directly with keyword arguments. Every field other
    than ``rope_type`` defaults to ``None`` ("not given"); a field the ``rope_type`` does not use
    raises ``ValueError``. The parameters, by ``rope_type`` (``L0`` is
    ``original_max_position_embeddings``):

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

    rope_type: str = "default"
    factor: float | None = None
    original_max_position_embeddings: int | None = None
    max_position_embeddings: int | None = None
    low_freq_factor: float | None = None
    high_freq_factor: float | None = None
    beta_fast: float | None = None
    beta_slow: float | None = None
    mscale: float | None = None
    mscale_all_dim: float | None = None
    attention_factor: float | None = None
    truncate: bool | None = None
    short_factor: tuple[float, ...] | None = None
    long_factor: tuple[float, ...] | None = None
    rope_theta: float | None = None
    partial_rotary_factor: float | None = None

    def __post_init__(self) -> None:
        rope_type = self.rope_type
        if not isinstance(rope_type, str):
            raise TypeError(f"{_key('rope_type')} must be a string, got {rope_type!r}")
        if rope_type not in _TYPE_KEYS:
            allowed = ", ".join(repr(t) for t in ROPE_TYPES)
            raise ValueError(f"{_key('rope_type')} must be one of {allowed}, got {rope_type!r}")
        allowed_keys = (*_COMMON_KEYS, *_TYPE_KEYS[rope_type])
        for field in fields(self):
            if getattr(self, field.name) is not None and field.name not in allowed_keys:
                raise ValueError(
                    f"{_key(field.name)} is not a parameter of rope_type {rope_type!r} "
                    f"(its parameters: {', '.join(_TYPE_KEYS[rope_type]) or 'none'})"
                )
        self._normalise()
        self._require()

    def _set(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)

    def _normalise(self) -> None:
        """Check each given value and store it in its canonical type."""
        for name in ("factor", "low_freq_factor", "high_freq_factor", "beta_fast", "beta_slow"):
            if getattr(self, name) is not None:
                self._set(name, check_base(_key(name), getattr(self, name)))
        for name in ("attention_factor", "rope_theta"):
            if getattr(self, name) is not None:
                self._set(name, check_base(_key(name), getattr(self, name)))
        for name in ("mscale", "mscale_all_dim"):
            if getattr(self, name) is not None:
                self._set(name, _finite(_key(name), getattr(self, name)))
        for name in ("original_max_position_embeddings", "max_position_embeddings"):
            if getattr(self, name) is not None:
                self._set(name, check_int(_key(name), getattr(self, name), minimum=1))
        if self.truncate is not None:
            self._set("truncate", check_bool(_key("truncate"), self.truncate))
        for name in ("short_factor", "long_factor"):
            if getattr(self, name) is not None:
                self._set(name, _factors(_key(name), getattr(self, name)))
        if self.partial_rotary_factor is not None:
            value = check_base(_key("partial_rotary_factor"), self.partial_rotary_factor)
            if value > 1.0:
                raise ValueError(
                    f"{_key('partial_rotary_factor')} must be a number in (0, 1], got {value!r}"
                )
            self._set("partial_rotary_factor", value)

    def _missing(self, name: str) -> ValueError:
        return ValueError(f"{_key(name)} is required for rope_type {self.rope_type!r}")

    def _require(self) -> None:
        """The parameters each type cannot do without, and the relations between them."""
        rope_type = self.rope_type
        needs = {
            "linear": ("factor",),
            "dynamic": ("factor",),
            "yarn": ("original_max_position_embeddings",),
            "llama3": (
                "factor",
                "low_freq_factor",
                "high_freq_factor",
                "original_max_position_embeddings",
            ),
            "longrope": ("short_factor", "long_factor", "original_max_position_embeddings"),
        }.get(rope_type, ())
        for name in needs:
            if getattr(self, name) is None:
                raise self._missing(name)
        original, maximum = self.original_max_position_embeddings, self.max_position_embeddings
        if rope_type == "dynamic":
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
        if rope_type == "yarn" and self.factor is None and maximum is None:
            raise ValueError(
                f"{_key('factor')} (or {_key('max_position_embeddings')}, to derive it) is "
                "required for rope_type 'yarn'"
            )
        if (
            rope_type == "longrope"
            and self.factor is None
            and self.attention_factor is None
            and maximum is None
        ):
            raise ValueError(
                f"{_key('factor')} (or {_key('attention_factor')}, or "
                f"{_key('max_position_embeddings')}) is required for rope_type 'longrope'"
            )
        if rope_type == "llama3":
            low, high = self.low_freq_factor, self.high_freq_factor
            assert low is not None
            assert high is not None
            if high <= low:
                raise ValueError(
                    f"{_key('high_freq_factor')} must be greater than {_key('low_freq_factor')}"
                    f" = {low!r}, got {high!r}"
                )

    def __repr__(self) -> str:
        given = [f"rope_type={self.rope_type!r}"]
        given += [
            f"{f.name}={getattr(self, f.name)!r}"
            for f in fields(self)
            if f.name != "rope_type" and getattr(self, f.name) is not None
        ]
        return f"RopeScaling({', '.join(given)})"

    @property
    def depends_on_length(self) -> bool:
        """True for ``dynamic`` and ``longrope``: their frequencies depend on the length."""
        return self.rope_type in ("dynamic", "longrope")

    @property
    def original_length(self) -> int | None:
        """The pre-training length L0 a length-dependent scaling compares the sequence with."""
        if self.rope_type == "dynamic":
            return self.original_max_position_embeddings or self.max_position_embeddings
        return self.original_max_position_embeddings


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
    params.setdefault("rope_type", "default" if old is None else old)
    rope_type = params["rope_type"]
    known = {f.name for f in fields(RopeScaling)}
    for name in params:
        if name not in known:
            uses = _TYPE_KEYS.get(rope_type) if isinstance(rope_type, str) else None
            if uses is None:  # let RopeScaling report the bad rope_type first
                break
            raise ValueError(
                f"{_key(name)} is not a parameter of rope_type {rope_type!r} "
                f"(its parameters: {', '.join(uses) or 'none'})"
            )
    return RopeScaling(**{k: v for k, v in params.items() if k in known})


def _get_mscale(scale: float, mscale: float = 1.0) -> float:
    """YaRN's attention temperature term: 0.1·mscale·ln(scale) + 1, or 1 for scale <= 1."""
    return 1.0 if scale <= 1.0 else 0.1 * mscale * math.log(scale) + 1.0


def _yarn(
    omega: npt.NDArray[np.float64], dim: int, base: float, s: RopeScaling
) -> tuple[npt.NDArray[np.float64], float]:
    original = s.original_max_position_embeddings
    assert original is not None
    factor = s.factor
    if factor is None:
        assert s.max_position_embeddings is not None
        factor = s.max_position_embeddings / original
    attention = s.attention_factor
    if attention is None:
        if s.mscale and s.mscale_all_dim:  # both non-zero, as in transformers
            attention = _get_mscale(factor, s.mscale) / _get_mscale(factor, s.mscale_all_dim)
        else:
            attention = _get_mscale(factor)
    beta_fast = 32.0 if s.beta_fast is None else s.beta_fast
    beta_slow = 1.0 if s.beta_slow is None else s.beta_slow

    def correction_dim(rotations: float) -> float:
        # the (fractional) pair index whose wavelength fits `rotations` times into L0
        return dim * math.log(original / (rotations * 2.0 * math.pi)) / (2.0 * math.log(base))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if s.truncate is None or s.truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001  # as in transformers: avoids a zero-width ramp
    ramp = np.clip((np.arange(dim // 2, dtype=np.float64) - low) / (high - low), 0.0, 1.0)
    # ramp 0: keep ω_k (high frequencies, extrapolate); ramp 1: ω_k / factor (interpolate)
    return omega / factor * ramp + omega * (1.0 - ramp), float(attention)


def _llama3(omega: npt.NDArray[np.float64], s: RopeScaling) -> npt.NDArray[np.float64]:
    factor, low, high = s.factor, s.low_freq_factor, s.high_freq_factor
    original = s.original_max_position_embeddings
    assert factor is not None
    assert low is not None
    assert high is not None
    assert original is not None
    wavelength = 2.0 * math.pi / omega
    long_waves = wavelength > original / low  # low frequencies: divide by factor
    short_waves = wavelength < original / high  # high frequencies: unchanged
    smooth = (original / wavelength - low) / (high - low)
    blended = (1.0 - smooth) * omega / factor + smooth * omega
    return np.where(long_waves, omega / factor, np.where(short_waves, omega, blended))


def _longrope(
    omega: npt.NDArray[np.float64], dim: int, s: RopeScaling, seq_len: int | None
) -> tuple[npt.NDArray[np.float64], float]:
    original = s.original_max_position_embeddings
    assert original is not None
    assert s.short_factor is not None
    assert s.long_factor is not None
    for name in ("short_factor", "long_factor"):
        length = len(getattr(s, name))
        if length != dim // 2:
            raise ValueError(
                f"{_key(name)} must have dim/2 = {dim // 2} entries (one per rotated pair), "
                f"got {length}"
            )
    use_long = seq_len is not None and seq_len > original
    ext = np.asarray(s.long_factor if use_long else s.short_factor, dtype=np.float64)
    attention = s.attention_factor
    if attention is None:
        factor = s.factor
        if factor is None:
            assert s.max_position_embeddings is not None
            factor = s.max_position_embeddings / original
        attention = 1.0 if factor <= 1.0 else math.sqrt(1.0 + math.log(factor) / math.log(original))
    return omega / ext, float(attention)


def rope_frequencies(
    dim: int, *, base: float = 10000.0, scaling: Any = None, seq_len: int | None = None
) -> tuple[npt.NDArray[np.float64], float]:
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
        base: the wavelength base (``rope_theta``), a finite number > 0.
        scaling: ``None``, a dict of Hugging Face rope parameters (``{"rope_type": "yarn",
            "factor": 4.0, ...}``) or a :class:`RopeScaling`.
        seq_len: the sequence length that ``dynamic`` and ``longrope`` depend on (Hugging
            Face uses the largest position + 1); ``None`` means "no longer than the original
            length". Other types ignore it. An integer >= 0.

    Returns:
        ``(omega, attention_factor)``: float64 array of shape ``(dim // 2,)`` and a float.

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
    base = check_base("base", base)
    spec = rope_scaling(scaling)
    if seq_len is not None:
        seq_len = check_int("seq_len", seq_len, minimum=0)
    omega = paper_schedule(dim, base)
    if spec is None or spec.rope_type == "default":
        if spec is not None:
            _check_theta(spec, base)
        return omega, 1.0
    _check_theta(spec, base)
    if spec.rope_type == "linear":
        assert spec.factor is not None
        return omega / spec.factor, 1.0
    if spec.rope_type == "dynamic":
        if dim == 2:
            raise ValueError(
                "dim must be >= 4 for rope_type 'dynamic' (its exponent is dim/(dim-2))"
            )
        factor, original = spec.factor, spec.original_length
        assert factor is not None
        assert original is not None
        length = original if seq_len is None else max(seq_len, original)
        new_base = base * (factor * length / original - (factor - 1.0)) ** (dim / (dim - 2))
        return paper_schedule(dim, new_base), 1.0
    if spec.rope_type == "yarn":
        return _yarn(omega, dim, base, spec)
    if spec.rope_type == "llama3":
        return _llama3(omega, spec), 1.0
    return _longrope(omega, dim, spec, seq_len)


def _check_theta(spec: RopeScaling, base: float) -> None:
    if spec.rope_theta is not None and spec.rope_theta != base:
        raise ValueError(
            f"{_key('rope_theta')} = {spec.rope_theta!r} differs from base = {base!r}; "
            f"pass base={spec.rope_theta!r}"
        )
