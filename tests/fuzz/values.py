"""Argument values for the fuzz suite: valid ones, hostile ones and doubtful ones.

Hostile values must be refused with an error naming the argument: wrong types (str, None,
lists of str, dicts, complex, bool), NaN and infinities, negative and huge integers
(±2**53±1, 2**63, 2**64, 10**30: a request that large must be refused before anything is
allocated), out-of-range numbers. Valid values include NumPy scalar types (np.int64,
np.uint64, np.float16, ...), empty and odd shapes, every integer and float dtype. Doubtful
values may be refused or accepted (then the result is checked): integral floats for counts,
``dtype=None``, extreme but finite bases.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from .contract import Drawn, choose

NAN, INF = math.nan, math.inf

#: Values of the wrong type for every argument (bool too: True is not a number here).
WRONG_TYPES: list[Any] = ["8", None, ["a"], {"a": 1}, 2 + 1j, True, False, np.bool_(True), b"8"]

#: Integers no count, length or size can be: refused before anything is allocated.
HUGE = [2**53 - 1, 2**53, 2**53 + 1, 2**63 - 1, 2**63, 2**64, 10**30, np.uint64(2**64 - 1)]


class Detachable:
    """An array held as a framework holds a parameter that requires grad: NumPy cannot read it
    (``__array__`` raises, as torch does) until ``detach()`` is called. No framework needed."""

    def __init__(self, values: Any) -> None:
        self.values = np.asarray(values)

    def detach(self) -> np.ndarray:
        return self.values

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise RuntimeError("Can't call numpy() on Tensor that requires grad")

    def __repr__(self) -> str:
        return f"Detachable(np.array({self.values.tolist()!r}))"


def detachable(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Values of ``strategy``, some of them held in a :class:`Detachable`."""
    return strategy | strategy.map(Detachable)


#: Numbers that overflow float64 when converted.
OVERFLOWING = [10**400, Fraction(10**400), -(10**400)]


def int_forms(value: int) -> list[Any]:
    """``value`` as a Python int and as every NumPy integer scalar that holds it."""
    forms: list[Any] = [value]
    for kind in (np.int64, np.int32, np.int16, np.uint64, np.uint8):
        info = np.iinfo(kind)
        if info.min <= value <= info.max:
            forms.append(kind(value))
    return forms


def integers(lo: int, hi: int) -> st.SearchStrategy[Any]:
    return st.integers(lo, hi).flatmap(lambda v: st.sampled_from(int_forms(v)))


def count(
    lo: int = 1, hi: int = 48, *, huge: str = "hostile", none: bool = False
) -> st.SearchStrategy[Drawn]:
    """An integer count >= ``lo`` (d_model, head_dim, a length, ...). ``none``: None means
    the default, so it is not hostile."""
    below = st.integers(-(2**64), lo - 1) | st.sampled_from([lo - 1, -1, -(2**63) - 1])
    wrong = [v for v in WRONG_TYPES if not (none and v is None)]
    hostile = st.sampled_from([*wrong, 2.5, NAN, INF, -INF]) | below
    doubtful = st.sampled_from([float(lo), np.float64(hi)])
    if huge == "hostile":
        hostile = hostile | st.sampled_from(HUGE)
    elif huge == "doubtful":
        doubtful = doubtful | st.sampled_from(HUGE)
    return choose(integers(lo, hi), hostile, doubtful)


def distance_setting(lo: int, hi: int, *, none: bool = False) -> st.SearchStrategy[Drawn]:
    """A distance setting (T5's ``max_distance``, DeBERTa's ``max_position``): an integer in
    ``[lo, 2**53]``. Nothing is allocated for it, so the largest distances are valid; beyond
    2**53 (no two positions are that far apart) is hostile."""
    below = st.integers(-(2**64), lo - 1) | st.sampled_from([lo - 1, -1])
    wrong = [v for v in WRONG_TYPES if not (none and v is None)]
    beyond = [2**53 + 1, 2**63 - 1, 2**63, 2**64, 10**30, np.uint64(2**64 - 1)]
    hostile = st.sampled_from([*wrong, 2.5, NAN, INF, -INF, *beyond]) | below
    valid = integers(lo, hi) | st.sampled_from([2**53 - 1, 2**53, np.int64(2**53)])
    return choose(valid, hostile, st.sampled_from([float(lo)]))


def real_forms(value: float) -> list[Any]:
    forms: list[Any] = [value, np.float64(value), Fraction(value)]
    if value == int(value) and abs(value) < 2**62:
        forms += [int(value), np.int64(int(value))]
    for kind in (np.float32, np.float16):
        with np.errstate(over="ignore"):
            if float(kind(value)) == value:
                forms.append(kind(value))
    return forms


def reals(lo: float, hi: float, extra: tuple[float, ...] = ()) -> st.SearchStrategy[Any]:
    values = st.floats(lo, hi, allow_nan=False, allow_infinity=False) | st.sampled_from(
        extra or (lo,)
    )
    return values.flatmap(lambda v: st.sampled_from(real_forms(v)))


def positive(
    lo: float, hi: float, extra: tuple[float, ...] = (), extreme: tuple[float, ...] = ()
) -> st.SearchStrategy[Drawn]:
    """A finite number > 0 (a base, a factor, a scale)."""
    hostile = st.sampled_from([*WRONG_TYPES, NAN, INF, -INF, 0, 0.0, -1.0, -1e-300, *OVERFLOWING])
    doubtful = st.sampled_from(extreme) if extreme else None
    return choose(reals(lo, hi, extra), hostile, doubtful)


def finite(lo: float, hi: float, extra: tuple[float, ...] = ()) -> st.SearchStrategy[Drawn]:
    """A finite real number of any sign."""
    hostile = st.sampled_from([*WRONG_TYPES, NAN, INF, -INF, *OVERFLOWING])
    return choose(reals(lo, hi, extra), hostile)


BASES = positive(
    0.5, 1e6, extra=(10000.0, 10000, 500000.0, 2.0, 1.0, 100.0), extreme=(1e-300, 5e-324, 1e308)
)

#: A RoPE base: ``None`` is the default there (a scaling dict's ``rope_theta``, else 10000).
ROPE_BASES = choose(
    reals(0.5, 1e6, (10000.0, 10000, 500000.0, 2.0, 1.0, 100.0)) | st.just(None),
    st.sampled_from(
        [*(v for v in WRONG_TYPES if v is not None), NAN, INF, -INF, 0, 0.0, -1.0, *OVERFLOWING]
    ),
    st.sampled_from((1e-300, 5e-324, 1e308)),
)


def flag() -> st.SearchStrategy[Drawn]:
    """True or False (np.bool_ too)."""
    valid = st.sampled_from([True, False, np.bool_(True), np.bool_(False)])
    return choose(valid, st.sampled_from(["True", None, 0, 1, 1.0, [True], {"a": 1}]))


def name(valid: tuple[str, ...]) -> st.SearchStrategy[Drawn]:
    """One of the strings ``valid``."""
    hostile = st.sampled_from(
        ["", "nope", valid[0].upper(), valid[0] + " ", None, 1, [valid[0]], {"a": 1}, b"x", 1j]
    )
    return choose(st.sampled_from(valid), hostile)


CONVENTIONS = ("paper", "tensor2tensor", "marian")
NUMPY_DTYPES = choose(
    st.sampled_from(
        [np.float32, np.float16, np.float64, "float32", "float16", "f8", np.dtype("float32")]
    ),
    st.sampled_from(
        [np.int32, "int8", "bfloat16", bool, complex, np.complex64, 1.5, "x", [np.float32]]
    ),
    st.sampled_from([None]),
)


# -- positions ---------------------------------------------------------------------------------

SHAPES = st.sampled_from([(0,), (1,), (2,), (3,), (5,), (2, 3), (1, 0), (0, 2), (), (2, 1, 2)])
INT_DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
FLOAT_DTYPES = ["float16", "float32", "float64"]
LIMITS = [5_000, 10_000_000, 2**53]


def _int_array(dtype: str, shape: tuple[int, ...], limit: int) -> st.SearchStrategy[np.ndarray]:
    info = np.iinfo(dtype)
    lo, hi = max(int(info.min), -limit), min(int(info.max), limit)
    return hnp.arrays(dtype, shape, elements=st.integers(lo, hi))


def _float_array(dtype: str, shape: tuple[int, ...], limit: float) -> st.SearchStrategy[np.ndarray]:
    bound = min(limit, float(np.finfo(dtype).max))
    elements = st.floats(-bound, bound, allow_nan=False, allow_infinity=False, width=64)
    return hnp.arrays(dtype, shape, elements=elements.map(lambda v: np.asarray(v, dtype).item()))


def valid_position_arrays() -> st.SearchStrategy[np.ndarray]:
    ints = st.tuples(st.sampled_from(INT_DTYPES), SHAPES, st.sampled_from(LIMITS))
    floats = st.tuples(st.sampled_from(FLOAT_DTYPES), SHAPES, st.sampled_from(LIMITS))
    return ints.flatmap(lambda a: _int_array(*a)) | floats.flatmap(lambda a: _float_array(*a))


def valid_positions(*, whole_floats: bool = True) -> st.SearchStrategy[Any]:
    """An int length, a float (one position), a list, or an array of any shape and dtype.

    ``whole_floats=False``: no bare whole float (``3.0`` could mean a length or a position,
    and ``positions`` refuses it)."""
    single = st.floats(-1e7, 1e7, allow_nan=False, allow_infinity=False)
    return st.one_of(
        integers(0, 24),
        single if whole_floats else single.filter(lambda v: not float(v).is_integer()),
        st.lists(st.integers(-(10**7), 10**7), max_size=5),
        st.lists(st.floats(-1e7, 1e7, allow_nan=False, allow_infinity=False), max_size=4),
        valid_position_arrays(),
    )


BEYOND = [2**53 + 1, -(2**53) - 1, 2**62, 2**63 - 1, -(2**63)]


def hostile_positions() -> st.SearchStrategy[Any]:
    wrong = st.sampled_from(
        [
            None,
            "3",
            {"a": 1},
            1j,
            True,
            np.bool_(False),
            ["a"],
            [1, "a"],
            [[1, 2], [3]],
            [None],
            [2**63],
            [2**64],
            [-(2**63) - 1],
            [NAN],
            [0.5, INF],
            -1,
            NAN,
            INF,
            np.array([True, False]),
            np.array([1 + 2j]),
            np.array(["1"]),
            np.array([1, None], dtype=object),
            np.array([0, 2**63], dtype=np.uint64),
            np.array([2**64 - 1], dtype=np.uint64),
            np.array([NAN, 1.0]),
            np.array([1.0, -INF], dtype=np.float32),
            np.array([INF], dtype=np.float16),
            np.array([2.0**60, 1.0]),
            np.array([-1e300]),
        ]
    )
    beyond = st.sampled_from(BEYOND).map(lambda p: np.array([0, p], dtype=np.int64))
    return wrong | beyond


def positions() -> st.SearchStrategy[Drawn]:
    """Positions: an int is a length (so a negative or huge one is hostile)."""
    hostile = st.sampled_from([*HUGE, -1, -(2**63), 0.0, 3.0, np.float32(2.0)])
    return choose(valid_positions(whole_floats=False), hostile_positions() | hostile)


def timesteps() -> st.SearchStrategy[Drawn]:
    """Timesteps: an int is one timestep (any integer within +-2**53)."""
    singles = st.sampled_from([-1, 2**53, -(2**53), 2**53 - 1, np.int64(-7)])
    beyond = st.sampled_from([2**53 + 1, -(2**53) - 1, 2**63 - 1, 2**63, 2**64, 10**30])
    return choose(valid_positions() | singles, hostile_positions().filter(_not_single) | beyond)


def _not_single(value: Any) -> bool:
    return not (isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_))


def meaning(value: Any) -> tuple[tuple[int, ...], list[Any]]:
    """What valid ``positions`` mean: the shape ``S`` and the flat exact positions (Python
    ints or floats). An integer scalar is a length ``L``; anything else is positions."""
    if isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_):
        return (int(value),), list(range(int(value)))
    array = np.asarray(value)
    if array.size == 0 and array.dtype.kind == "f" and not isinstance(value, np.ndarray):
        array = array.astype(np.int64)  # [] from a list: no positions
    if array.dtype.kind == "f":
        return array.shape, [float(v) for v in array.astype(np.float64).reshape(-1)]
    return array.shape, [int(v) for v in array.reshape(-1).tolist()]


# -- RoPE scalings -----------------------------------------------------------------------------


def _factors(n: int) -> st.SearchStrategy[list[float]]:
    return st.lists(st.floats(1.0, 8.0), min_size=n, max_size=n)


def valid_scalings(dim: int, base: float) -> st.SearchStrategy[Any]:
    """Hugging Face rope parameters of every type that fit ``dim`` rotated channels."""
    original = st.integers(16, 8192)
    factor = st.floats(1.0, 32.0)
    theta = st.sampled_from([{}, {"rope_theta": base}])
    kinds = [
        st.just(None),
        st.just({"rope_type": "default"}),
        st.builds(lambda f: {"rope_type": "linear", "factor": f}, st.floats(0.25, 16.0)),
        st.builds(lambda f: {"type": "linear", "factor": f}, st.floats(0.25, 16.0)),
        st.builds(
            lambda f, o, extra: {
                "rope_type": "yarn",
                "factor": f,
                **extra,
                "original_max_position_embeddings": o,
            },
            factor,
            original,
            st.fixed_dictionaries(
                {},
                optional={
                    "beta_fast": st.floats(8.0, 64.0),
                    "beta_slow": st.floats(0.5, 2.0),
                    "mscale": st.floats(0.0, 2.0),
                    "mscale_all_dim": st.floats(0.0, 2.0),
                    "attention_factor": st.floats(0.5, 2.0),
                    "truncate": st.booleans(),
                },
            ),
        ),
        st.builds(
            lambda f, low, gap, o: {
                "rope_type": "llama3",
                "factor": f,
                "low_freq_factor": low,
                "high_freq_factor": low + gap,
                "original_max_position_embeddings": o,
            },
            factor,
            st.floats(0.5, 2.0),
            st.floats(0.5, 4.0),
            original,
        ),
        st.builds(
            lambda s, lo, o, f: {
                "rope_type": "longrope",
                "short_factor": s,
                "long_factor": lo,
                "original_max_position_embeddings": o,
                "factor": f,
            },
            _factors(dim // 2),
            _factors(dim // 2),
            original,
            factor,
        ),
    ]
    if dim >= 4:
        kinds.append(
            st.builds(
                lambda f, o: {
                    "rope_type": "dynamic",
                    "factor": f,
                    "original_max_position_embeddings": o,
                },
                factor,
                original,
            )
        )
    if base <= 1.0:  # YaRN divides by ln(base): base must be > 1
        kinds = [
            k.filter(lambda p: not (isinstance(p, dict) and p.get("rope_type") == "yarn"))
            for k in kinds
        ]
    with_theta = st.tuples(st.one_of(kinds), theta).map(
        lambda pair: pair[0] if pair[0] is None else {**pair[0], **pair[1]}
    )
    as_object = with_theta.map(lambda d: d if d is None else _as_object(d))
    return with_theta | as_object


def _as_object(params: dict[str, Any]) -> Any:
    import posenc

    params = dict(params)
    rope_type = params.pop("rope_type", params.pop("type", "default"))
    return posenc.RopeScaling(rope_type, **params)


HOSTILE_SCALINGS = [
    "linear",
    2.0,
    [("rope_type", "linear")],
    {"rope_type": "nope"},
    {"rope_type": "linear"},
    {"rope_type": "linear", "factor": NAN},
    {"rope_type": "linear", "factor": -1.0},
    {"rope_type": "linear", "factor": "2"},
    {"rope_type": "linear", "factor": True},
    {"rope_type": "linear", "factor": 2.0, "bogus": 1},
    {"rope_type": "linear", "factor": 10**400},
    {1: 2},
    {"rope_type": 3},
    {"type": "linear", "rope_type": "yarn", "factor": 2.0},
    {"rope_type": "yarn", "factor": 4.0},
    {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 0},
    {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64, "truncate": 1},
    {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64, "mscale": INF},
    {"rope_type": "dynamic", "factor": 2.0},
    {
        "rope_type": "dynamic",
        "factor": 2.0,
        "original_max_position_embeddings": 16,
        "max_position_embeddings": 32,
    },
    {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 4.0,
        "high_freq_factor": 1.0,
        "original_max_position_embeddings": 8192,
    },
    {
        "rope_type": "longrope",
        "short_factor": [1.0],
        "long_factor": [1.0, 2.0, 3.0, 4.0, 5.0],
        "original_max_position_embeddings": 64,
        "factor": 2.0,
    },
    {
        "rope_type": "longrope",
        "short_factor": "abc",
        "long_factor": [1.0],
        "original_max_position_embeddings": 64,
        "factor": 2.0,
    },
    {
        "rope_type": "longrope",
        "short_factor": [],
        "long_factor": [1.0],
        "original_max_position_embeddings": 64,
        "factor": 2.0,
    },
    {
        "rope_type": "linear",
        "factor": 2.0,
        "rope_theta": -1.0,
    },  # (a conflict with base: tests/rope/test_config_values.py)
    {"rope_type": "linear", "factor": 2.0, "partial_rotary_factor": 1.5},
    {"rope_type": "linear", "factor": 2.0, "partial_rotary_factor": 0.0},
]


def scalings(dim: int, base: float) -> st.SearchStrategy[Drawn]:
    return choose(valid_scalings(dim, base), st.sampled_from(HOSTILE_SCALINGS))


# -- biases ------------------------------------------------------------------------------------

FLOAT_OUT = choose(
    st.sampled_from([np.float32, np.float64, "float32", "f8"]),
    st.sampled_from([np.int32, "bfloat16", bool, complex, 1.5, "x"]),
    st.sampled_from([np.float16]),  # may overflow: refused by name (dtype) or finite
)
#: Output dtypes of a bias that float16 holds (small sizes): float16 is valid, and checked as
#: the float64 truth rounded once.
FLOAT_BOUNDED = choose(
    st.sampled_from([np.float32, np.float64, "float32", "f8", np.float16, "float16", "e"]),
    st.sampled_from([np.int32, "bfloat16", bool, complex, 1.5, "x"]),
)


def plain(value: Any) -> Any:
    """A drawn value as NumPy reads it (a :class:`Detachable` detached)."""
    return value.detach() if isinstance(value, Detachable) else value


def _position_lists(wrapped: bool) -> st.SearchStrategy[Any]:
    ints = st.integers(-(10**6), 10**6)
    plain_forms = st.one_of(
        st.integers(0, 9),
        st.lists(ints, max_size=5),
        st.lists(ints, max_size=5).map(lambda v: np.array(v, dtype=np.int64)),
        st.lists(st.integers(0, 120), max_size=5).map(lambda v: np.array(v, dtype=np.uint8)),
        st.lists(st.integers(-1000, 1000), max_size=4).map(lambda v: np.array(v, float)),
    )
    if not wrapped:
        return plain_forms
    # the NumPy core also reads a detachable parameter and Python ints of any size
    held = st.lists(ints, max_size=5).map(lambda v: Detachable(np.array(v, np.int64)))
    return plain_forms | held | st.lists(ints, max_size=3).map(lambda v: np.array(v, object))


HOSTILE_BIAS_POSITIONS = st.sampled_from(
    [
        *WRONG_TYPES,
        -1,
        2.5,
        NAN,
        [0.5],
        [NAN],
        [1, INF],
        [2**53 + 1],
        [-(2**53) - 1],
        [[1, 2], [3]],
        np.zeros((2, 2), dtype=np.int64),
        np.array([1 + 1j]),
        np.array(["1"]),
        2**60,
        10**30,
    ]
)


def bias_positions(*, wrapped: bool = False) -> st.SearchStrategy[Any]:
    """Query or key positions; ``wrapped``: also as a :class:`Detachable` or an object array
    of Python ints (what the NumPy core reads; the PyTorch front-end's tests leave them out)."""
    return choose(_position_lists(wrapped), HOSTILE_BIAS_POSITIONS)


def bias_meaning(value: Any) -> np.ndarray:
    """Valid positions as int64: an int is a length."""
    if isinstance(value, int | np.integer) and not isinstance(value, bool):
        return np.arange(int(value), dtype=np.int64)
    return np.asarray(plain(value)).astype(np.int64).reshape(-1)


RELATIVE = choose(
    st.one_of(
        st.lists(st.integers(-(10**6), 10**6), max_size=6).map(np.array),
        st.lists(st.integers(-(10**6), 10**6), max_size=6),
        st.integers(-(10**6), 10**6),
        st.lists(st.integers(-50, 50), min_size=4, max_size=4).map(
            lambda v: np.array(v, dtype=np.int32).reshape(2, 2)
        ),
    ),
    st.sampled_from(
        [*WRONG_TYPES, 2.5, [0.5], [NAN], [INF], [2**54 + 1], [2**63], np.array(["1"])]
    ),
)
#: RELATIVE, and what the NumPy core also reads: a detachable parameter, Python ints (any
#: size), empty and 0-d arrays.
NUMPY_RELATIVE = choose(
    st.lists(st.integers(-(10**6), 10**6), max_size=6).map(lambda v: Detachable(np.array(v)))
    | st.lists(st.integers(-(10**6), 10**6), max_size=4).map(lambda v: np.array(v, object))
    | st.sampled_from([np.zeros((0, 3), np.int64), np.int64(-40), np.array(7), np.array([])]),
    st.sampled_from(
        [np.array([1, None], dtype=object), Detachable(np.array([0.5])), [2**64],
         np.array([2**70], dtype=object), [[1, 2], [3]]]
    ),
) | RELATIVE  # fmt: skip
