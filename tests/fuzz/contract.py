"""The contract every public call is held to, and the machinery that checks it.

A call may end in exactly one of two ways:

- it raises ``ValueError`` or ``TypeError`` whose message names the argument at fault (one
  of the arguments drawn from the hostile or doubtful values); or
- it returns a result that its ``check`` accepts: documented shape and dtype, all finite,
  equal to the exact formula within the documented accuracy (``tests/fuzz/reference.py``).

Arguments are drawn as *valid* (the call must succeed), *hostile* (the call must refuse, naming
one of the hostile arguments) or *doubtful* (either outcome; a result is still checked).
Anything else (another exception, a refusal of a valid call, an accepted hostile value, an
unchecked result) is a :class:`Violation`, and fails the test.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hypothesis import note
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

VALID, HOSTILE, DOUBTFUL = "valid", "hostile", "doubtful"


@dataclass(frozen=True)
class Drawn:
    """A drawn argument value and how the contract treats it."""

    value: Any
    kind: str


def choose(
    valid: st.SearchStrategy[Any] | None,
    hostile: st.SearchStrategy[Any] | None = None,
    doubtful: st.SearchStrategy[Any] | None = None,
    *,
    weights: tuple[int, int, int] = (7, 2, 1),
) -> st.SearchStrategy[Drawn]:
    """Draw from ``valid`` (most often), ``hostile`` or ``doubtful`` values, tagged.

    Shrinking moves towards the valid values, so a minimal failing example keeps only the
    hostile arguments it needs.
    """
    options = [
        (weight, strategy, kind)
        for weight, strategy, kind in zip(
            weights, (valid, hostile, doubtful), (VALID, HOSTILE, DOUBTFUL), strict=True
        )
        if strategy is not None and weight
    ]
    ticks = [kind for weight, _, kind in options for _ in range(weight)]
    by_kind = {kind: strategy for _, strategy, kind in options}
    return st.sampled_from(ticks).flatmap(
        lambda kind: by_kind[kind].map(lambda value: Drawn(value, kind))
    )


def show(value: Any) -> str:
    """A Python expression that rebuilds ``value`` (short for arrays and tensors)."""
    if isinstance(value, np.ndarray):
        if value.size <= 16:
            return f"np.array({value.tolist()!r}, dtype=np.{value.dtype})"
        return f"<array {value.shape} {value.dtype}>"
    if type(value).__module__ == "torch" and type(value).__name__ in ("Tensor", "Parameter"):
        if value.numel() <= 16 and value.device.type == "cpu":
            plain = (
                value.dtype.is_floating_point
                or value.dtype.is_complex
                or str(value.dtype) == "torch.bool"
            )
            shown = value.tolist() if plain else value.long().tolist()
            return f"torch.tensor({shown!r}, dtype={value.dtype})"
        return f"<tensor {tuple(value.shape)} {value.dtype} on {value.device}>"
    if isinstance(value, np.generic):
        return f"np.{type(value).__name__}({value.item()!r})"
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


@dataclass
class Call:
    """One call of a public function: what to call, with what, and how to check a result."""

    label: str
    fn: Callable[..., Any]
    kwargs: dict[str, Any]
    hostile: frozenset[str] = frozenset()
    doubtful: frozenset[str] = frozenset()
    check: Callable[[Any], None] = lambda result: None
    #: names that count as naming an argument, besides the argument's own name
    aliases: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: what the test knows about the call, for ``tests/fuzz/known.py`` (e.g. a layout mismatch)
    facts: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        args = ", ".join(f"{name}={show(value)}" for name, value in self.kwargs.items())
        return f"{self.label}({args})"

    def names(self, arguments: Iterable[str]) -> set[str]:
        out = set()
        for name in arguments:
            out.add(name)
            out.update(self.aliases.get(name, ()))
        return out


class Violation(AssertionError):
    """A call that broke the contract. ``kind``: raised, unnamed, refused, accepted, wrong."""

    def __init__(self, call: Call, kind: str, detail: str, exc: BaseException | None = None):
        self.call, self.kind, self.detail, self.exc = call, kind, detail, exc
        super().__init__(f"{kind}: {detail}\n  reproduce: {call}")


def run(call: Call) -> Any:
    """Make the call and hold it to the contract; return the result (None when refused)."""
    with contextlib.suppress(InvalidArgument):  # outside a test: the reproducers of known.py
        note(f"call: {call}")
    allowed = call.names(call.hostile | call.doubtful)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            result = call.fn(**call.kwargs)
    except (ValueError, TypeError) as exc:
        message = str(exc)
        if not allowed:
            raise Violation(call, "refused", f"valid call refused: {_exc(exc)}", exc) from exc
        if not any(name in message for name in allowed):
            raise Violation(
                call, "unnamed", f"{_exc(exc)} names none of {sorted(allowed)}", exc
            ) from exc
        return None
    except Exception as exc:
        raise Violation(call, "raised", _exc(exc), exc) from exc
    if call.hostile:
        raise Violation(call, "accepted", f"hostile {sorted(call.hostile)} accepted")
    try:
        call.check(result)
    except AssertionError as exc:
        raise Violation(call, "wrong", str(exc), exc) from exc
    except Exception as exc:  # a result the check cannot even read
        raise Violation(call, "wrong", f"unreadable result: {_exc(exc)}", exc) from exc
    return result


def _exc(exc: BaseException) -> str:
    text = str(exc).replace("\n", " ")
    return f"{type(exc).__name__}: {text[:300]}"


class Args:
    """Draws the arguments of one call with ``data``, remembering which were hostile."""

    def __init__(self, data: st.DataObject) -> None:
        self.data = data
        self.kwargs: dict[str, Any] = {}
        self.kinds: dict[str, str] = {}

    def draw(self, name: str, strategy: st.SearchStrategy[Drawn], *, optional: bool = False):
        """Draw ``name``; with ``optional`` it may be left out (``None`` is then returned)."""
        if optional and self.data.draw(st.booleans(), label=f"omit {name}"):
            return None
        drawn = self.data.draw(strategy, label=name)
        self.kwargs[name] = drawn.value
        self.kinds[name] = drawn.kind
        return drawn.value

    def set(self, name: str, value: Any, kind: str = VALID) -> Any:
        self.kwargs[name] = value
        self.kinds[name] = kind
        return value

    def of_kind(self, kind: str) -> frozenset[str]:
        return frozenset(n for n, k in self.kinds.items() if k == kind)

    @property
    def clean(self) -> bool:
        """True when every argument was drawn valid."""
        return all(kind == VALID for kind in self.kinds.values())

    def call(self, label: str, fn: Callable[..., Any], check: Callable[[Any], None], **extra):
        return Call(
            label,
            fn,
            dict(self.kwargs),
            self.of_kind(HOSTILE),
            self.of_kind(DOUBTFUL),
            check,
            **extra,
        )

    def build(self, label: str, cls: Callable[..., Any], **extra) -> Any:
        """Construct ``cls`` (a module whose forward is fuzzed next) under the contract: the
        module, or None when it was refused or built from anything but valid arguments."""
        module = run(self.call(label, cls, lambda m: None, **extra))
        return module if self.clean else None


def expect_array(result: Any, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """``result`` is a NumPy array of ``shape`` and ``dtype``, all finite."""
    assert isinstance(result, np.ndarray), f"expected an ndarray, got {type(result).__name__}"
    assert result.shape == tuple(shape), f"shape {result.shape}, expected {tuple(shape)}"
    assert result.dtype == np.dtype(dtype), f"dtype {result.dtype}, expected {np.dtype(dtype)}"
    if result.dtype.kind == "f":
        assert np.all(np.isfinite(result)), "non-finite values in the result"
    return result
