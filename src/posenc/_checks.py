"""Argument validation shared by every public function.

Every check raises ``TypeError`` (wrong kind of value) or ``ValueError`` (right kind, value out
of range) with a message that names the argument, shows the value given and says what is
allowed, e.g. ``d_model must be a positive integer, got 0``.
"""

from __future__ import annotations

import contextlib
import functools
import math
import numbers
import os
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = [
    "TooLargeError",
    "as_float",
    "as_int64",
    "as_length",
    "check_allocation",
    "check_base",
    "check_bool",
    "check_float_dtype",
    "check_int",
    "check_length",
    "check_offset",
    "check_position_magnitude",
    "check_positions",
    "check_probability",
    "check_real",
    "check_sequence",
    "check_shift",
    "detached",
    "is_integer",
    "memory_limit",
    "sized_by",
]

#: Largest |position| whose integer value float64 holds exactly: the position limit.
MAX_EXACT_POSITION = 2**53

_INT64_MAX = np.iinfo(np.int64).max

_FLOAT_DTYPES = (np.float16, np.float32, np.float64)


def _show(value: Any) -> str:
    """A short ``repr`` for error messages: long arrays are summarised, and integers or
    fractions too long to read are given in scientific notation (``about 1e+400``).

    >>> _show(12), _show(10**400), _show(-(2**1100))
    ('12', 'about 1e+400', 'about -1.36e+331')
    """
    if isinstance(value, np.ndarray):
        return f"array of shape {value.shape} and dtype {value.dtype}"
    if isinstance(value, numbers.Rational) and not isinstance(value, bool | np.bool_):
        num, den = int(value.numerator), int(value.denominator)
        if max(abs(num), den).bit_length() > 128:
            return f"about {_scientific(num, den)}"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _scientific(num: int, den: int) -> str:
    """``num / den`` in scientific notation, 3 significant digits, for any size of ints."""
    if num == 0:
        return "0"
    exponent = math.log10(abs(num)) - math.log10(den)  # exact enough for ints of any size
    whole = math.floor(exponent)
    mantissa = 10.0 ** (exponent - whole)
    return f"{'-' if num < 0 else ''}{mantissa:.3g}e{whole:+d}"


def as_float(name: str, value: Any, allowed: str) -> float:
    """``value`` as a float: the one conversion of a real-number argument.

    ``allowed`` says what ``name`` accepts (``"a finite real number"``); a value that is not a
    real number (a bool, a string, ``None``) raises ``TypeError`` saying so, and a number
    beyond float64's range (``10**400``, ``Fraction(10**400)``) raises ``ValueError`` instead of
    Python's ``OverflowError``. Callers check the float's own range (finite, > 0, ...).

    >>> as_float("scale", 10**400, "a finite real number")
    Traceback (most recent call last):
    ...
    ValueError: scale must be a finite real number, got about 1e+400 (int), beyond float64's ...
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be {allowed}, got {_show(value)} ({type(value).__name__})")
    try:
        return float(value)
    except OverflowError:
        raise ValueError(
            f"{name} must be {allowed}, got {_show(value)} ({type(value).__name__}), beyond "
            "float64's range (finite numbers within +-1.8e+308)"
        ) from None


def check_int(name: str, value: Any, *, minimum: int | None = None) -> int:
    """Return ``value`` as a Python int; reject bools, floats and values below ``minimum``.

    >>> check_int("d_model", 8, minimum=1)
    8
    >>> check_int("d_model", 0, minimum=1)
    Traceback (most recent call last):
    ...
    ValueError: d_model must be an integer >= 1, got 0
    """
    allowed = "an integer" if minimum is None else f"an integer >= {minimum}"
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be {allowed}, got {_show(value)} ({type(value).__name__})")
    result = int(value)
    if minimum is not None and result < minimum:
        raise ValueError(f"{name} must be {allowed}, got {_show(result)}")
    return result


def as_length(name: str, value: Any) -> int | None:
    """The length ``L`` when ``value`` is one, else None: ``value`` is then positions.

    Where "an int ``L`` or positions" is accepted, an integer (Python or NumPy, not a bool)
    means positions ``0 .. L-1``, the last of which must lie within the position limit, so
    ``L`` may be at most ``2**53 + 1``. A bare real number is one position (a 0-d array),
    except a whole one (``3.0``), which would be read either way and is refused: pass ``3``
    for a length or ``[3.0]`` for one position.

    >>> as_length("positions", 3), as_length("positions", [3]), as_length("positions", 2.5)
    (3, None, None)
    >>> as_length("positions", 2**63)
    Traceback (most recent call last):
    ...
    ValueError: positions must be a length of at most 2**53 + 1 (...), got 9223372036854775808
    """
    if isinstance(value, bool | np.bool_):
        return None  # positions, which refuse booleans by name
    if isinstance(value, numbers.Integral):
        return check_length(name, value)
    allowed = "an int L (positions 0 .. L-1) or an array of positions"
    if isinstance(value, numbers.Real) and (number := as_float(name, value, allowed)).is_integer():
        raise ValueError(
            f"{name} must be {allowed}, got the whole number {value!r}, which could mean "
            f"either: pass {int(number)} for a length, or [{value!r}] for one position"
        )
    return None


def check_length(name: str, value: Any) -> int:
    """A number of positions ``L`` (an int >= 0): positions ``0 .. L-1`` must lie within the
    position limit, so ``L`` is at most ``2**53 + 1``.

    >>> check_length("max_len", 2**64)
    Traceback (most recent call last):
    ...
    ValueError: max_len must be a length of at most 2**53 + 1 (...), got 18446744073709551616
    """
    length = check_int(name, value, minimum=0)
    if length - 1 > MAX_EXACT_POSITION:
        raise ValueError(
            f"{name} must be a length of at most 2**53 + 1 (positions 0 .. L-1 within "
            f"+-2**53, where float64 holds them exactly), got {_show(length)}"
        )
    return length


def check_position_magnitude(name: str, smallest: float, largest: float) -> None:
    """Positions from ``smallest`` to ``largest`` must lie within +-2**53.

    Pass Python ints for integer positions (``int(array.min())``): the comparison is then
    exact, so 2**53 + 1 is caught even though it rounds to 2**53 in float64.
    """
    for value in (smallest, largest):
        if not -MAX_EXACT_POSITION <= value <= MAX_EXACT_POSITION:
            shown = _show(value) if isinstance(value, int) else f"{value:.3g}"
            raise ValueError(
                f"{name} must lie within +-2**53 (float64 holds them exactly), got {shown}"
            )


def check_offset(name: str, value: Any, largest: Any = 0) -> int:
    """Return ``value``, an int >= 0 added to positions up to ``largest``; the offset and the
    sum must stay within the position limit (compared as Python ints, before any fixed-width
    addition could wrap).

    >>> check_offset("offset", 5, largest=9)
    5
    >>> check_offset("offset", 2**53, largest=1)
    Traceback (most recent call last):
    ...
    ValueError: offset must keep positions within 2**53 (...), got offset=9007199254740992 for ...
    """
    offset = check_int(name, value, minimum=0)
    check_shift(name, offset, largest)
    return offset


def check_shift(name: str, offset: Any, largest: Any) -> None:
    """An offset >= 0 and the positions up to ``largest`` it shifts must stay within 2**53.

    Comparisons only, no ``max()`` or branch on the values: either may be a ``torch.SymInt``
    (a length traced by ``torch.compile``).
    """
    if offset > MAX_EXACT_POSITION or offset + largest > MAX_EXACT_POSITION:
        context = f" for positions up to {_show(largest)}" if largest > 0 else ""
        raise ValueError(
            f"{name} must keep positions within 2**53 (float64 holds them exactly), got "
            f"{name}={_show(offset)}{context}"
        )


def as_int64(name: str, array: npt.NDArray[Any]) -> npt.NDArray[np.int64]:
    """An integer array of any width (signed or unsigned) as int64, exactly: uint64 values
    from 2**63 up do not fit and raise the position limit's error."""
    if array.dtype == np.uint64 and array.size and int(array.max()) > _INT64_MAX:
        check_position_magnitude(name, 0, int(array.max()))
    return array.astype(np.int64, copy=False)


def is_integer(value: Any) -> bool:
    """An integer (Python or NumPy), not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool | np.bool_)


def check_bool(name: str, value: Any) -> bool:
    """``value`` must be exactly True or False (not 0/1, not a string)."""
    if not isinstance(value, bool | np.bool_):
        raise TypeError(f"{name} must be True or False, got {_show(value)}")
    return bool(value)


def check_positive(name: str, value: Any) -> float:
    """Return ``value`` as a float; it must be a finite real number > 0."""
    result = as_float(name, value, "a positive finite number")
    if not math.isfinite(result) or result <= 0.0:
        raise ValueError(f"{name} must be a positive finite number, got {result!r}")
    return result


def check_base(name: str, value: Any) -> float:
    """Return ``value`` as a float; it must be a finite real number > 0 (the wavelength base).

    A base of 1 is allowed (every frequency is then 1); a base in (0, 1) makes the
    frequencies grow instead of shrink, which is unusual but well defined.
    """
    return check_positive(name, value)


def check_real(name: str, value: Any) -> float:
    """Return ``value`` as a float; it must be a finite real number (any sign, zero allowed).

    >>> check_real("scale", 2)
    2.0
    >>> check_real("scale", float("nan"))
    Traceback (most recent call last):
    ...
    ValueError: scale must be a finite real number, got nan
    """
    result = as_float(name, value, "a finite real number")
    if not math.isfinite(result):
        raise ValueError(f"{name} must be a finite real number, got {result!r}")
    return result


def check_probability(name: str, value: Any) -> float:
    """Return ``value`` as a float in [0, 1] (a dropout probability)."""
    result = as_float(name, value, "a number in [0, 1]")
    if not 0.0 <= result <= 1.0:  # also rejects NaN
        raise ValueError(f"{name} must be a number in [0, 1], got {result!r}")
    return result


def check_float_dtype(name: str, value: Any) -> np.dtype[Any]:
    """Return ``np.dtype(value)``; only float16, float32 and float64 are allowed.

    bfloat16 has no NumPy dtype; the PyTorch front-end (``posenc.torch``) produces it.
    """
    dtype: np.dtype[Any] | None
    try:
        dtype = np.dtype(value)
    except TypeError:
        dtype = None
    if dtype is None or dtype.type not in _FLOAT_DTYPES:
        raise TypeError(
            f"{name} must be one of float16, float32, float64, got {_show(value)}"
            " (for bfloat16 use posenc.torch)"
        )
    return dtype


def detached(value: Any) -> Any:
    """A framework's tensor as NumPy can read it, by duck typing (posenc imports no framework):
    ``detach()`` (a parameter that requires grad, such as a model's learned table), then
    ``cpu()`` (an accelerator's memory), then ``double()`` for a floating tensor (exact for
    every floating dtype, bfloat16 included, which NumPy has none of). Anything without a
    ``detach`` method (NumPy arrays, lists, numbers) is returned as it is.

    >>> detached([1.0, 2.0])
    [1.0, 2.0]
    """
    if isinstance(value, np.ndarray | np.generic):
        return value
    detach = getattr(value, "detach", None)
    if not callable(detach):
        return value
    value = detach()
    cpu = getattr(value, "cpu", None)
    if callable(cpu):
        value = cpu()
    floating = getattr(value, "is_floating_point", None)
    double = getattr(value, "double", None)
    if callable(floating) and callable(double) and floating():
        value = double()
    return value


def check_positions(name: str, value: Any) -> npt.NDArray[Any]:
    """Return positions as an integer or float64 array of any shape.

    Integers (any integer dtype, signed or unsigned, or Python ints) are kept exact as int64;
    real numbers become float64. Booleans, complex numbers, strings, NaN and infinities are
    rejected, and so are integers beyond int64 (uint64 from 2**63 up, Python ints of any
    size), with the position limit's error.
    """
    try:
        array = np.asarray(value)
    except (TypeError, ValueError) as exc:  # ragged lists and the like
        raise TypeError(f"{name} must be an array of numbers, got {_show(value)}") from exc
    kind = array.dtype.kind
    if kind == "O" and array.size and all(is_integer(v) for v in array.flat):
        check_position_magnitude(name, min(array.flat), max(array.flat))
        return array.astype(np.int64)  # an object array of ints within the limit
    if kind in "iu":
        return as_int64(name, array)
    if kind == "f":
        array = array.astype(np.float64, copy=False)
        if not np.all(np.isfinite(array)):
            bad = float(array[~np.isfinite(array)].flat[0])
            raise ValueError(f"{name} must be finite, got {bad!r} among its values")
        return array
    raise TypeError(
        f"{name} must contain integers or real numbers, got dtype {array.dtype}"
        + (" (booleans are not positions; see positions_from_mask)" if kind == "b" else "")
    )


def check_sequence(name: str, value: Any, allowed: str) -> list[Any]:
    """``value`` as a list: a sequence (not a string) or a 1-D array; ``allowed`` says what.

    >>> check_sequence("sections", (16, 24, 24), "a sequence of integers")
    [16, 24, 24]
    >>> check_sequence("sections", 64, "a sequence of integers")
    Traceback (most recent call last):
    ...
    TypeError: sections must be a sequence of integers, got 64
    """
    if isinstance(value, np.ndarray) and value.ndim == 1:
        return list(value.tolist())
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise TypeError(f"{name} must be {allowed}, got {_show(value)}")
    return list(value)


class TooLargeError(ValueError, MemoryError):
    """A result larger than this machine's memory, refused before anything is allocated.

    A ``ValueError`` (the request is out of range) and a ``MemoryError`` (what NumPy and
    PyTorch raise for the same request, only after trying): code that catches either keeps
    working. ``names``, ``shape``, ``needed`` and ``limit`` say what was refused.
    """

    names: tuple[str, ...] = ()
    shape: tuple[int, ...] = ()
    needed: int = 0
    limit: int = 0


def _too_large(
    names: Sequence[str], shape: tuple[int, ...], needed: int, limit: int
) -> TooLargeError:
    """The :class:`TooLargeError` for ``shape`` (``needed`` bytes) asked for by ``names``."""
    shown = ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else names[0]
    error = TooLargeError(
        f"{shown} ask for a result of shape {shape}, {_bytes(needed)}, more than the device's "
        f"memory ({_bytes(limit)}); ask for fewer positions or channels, or build the result "
        "in blocks"
    )
    error.names, error.shape, error.needed, error.limit = tuple(names), shape, needed, limit
    return error


@contextlib.contextmanager
def sized_by(**names: str) -> Iterator[None]:
    """Inside, a :class:`TooLargeError` names the caller's arguments: ``names`` maps the name
    an inner call uses to the caller's (``d_model="embedding_dim"``); others stay as they are.

    >>> with sized_by(d_model="embedding_dim"):
    ...     check_allocation("positions and d_model", (2**40, 2**40), 4)
    Traceback (most recent call last):
    ...
    posenc._checks.TooLargeError: positions and embedding_dim ask for a result of shape ...
    """
    try:
        yield
    except TooLargeError as exc:
        renamed = [names.get(name, name) for name in exc.names]
        raise _too_large(renamed, exc.shape, exc.needed, exc.limit) from None


@functools.cache
def memory_limit() -> int:
    """The largest result, in bytes, that posenc will try to allocate: physical memory.

    Falls back to 2**40 bytes where the platform does not say. Read once (size checks sit on
    hot paths; the physical memory does not change while the process runs).
    """
    try:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, OSError, ValueError):
        return 1 << 40
    return int(pages) * int(size) if pages > 0 and size > 0 else 1 << 40


#: Results this small fit on any machine: no need to ask the system (nor, traced, to break
#: a torch.compile graph to ask it).
_FITS_ANYWHERE = 1 << 24


def _bytes(n: int) -> str:
    for unit, shift in (("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.1f} {unit}"
    return f"{n} bytes"


def check_allocation(
    names: str, shape: Sequence[int], itemsize: int, copies: int = 1, *, limit: int | None = None
) -> None:
    """Refuse, before allocating, ``copies`` arrays of ``shape`` that do not fit in memory
    (``limit`` bytes; default :func:`memory_limit`).

    ``names`` are the arguments that decide the size, e.g. ``"positions and d_model"``.

    >>> check_allocation("positions and d_model", (10**7, 10**6), 4)
    Traceback (most recent call last):
    ...
    posenc._checks.TooLargeError: positions and d_model ask for ... 36.4 TiB, more than ...
    """
    needed = int(itemsize) * int(copies)
    for n in shape:  # a loop, not a generator: torch.compile traces this (frequencies)
        needed *= int(n)
    if limit is None and needed <= _FITS_ANYWHERE:
        return
    limit = memory_limit() if limit is None else limit
    if needed > limit:
        parts = names.replace(" and ", ", ").split(", ")
        raise _too_large(parts, tuple(int(n) for n in shape), needed, limit)
