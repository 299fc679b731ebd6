"""A group of rows compared together, and the errors of the subject's tables against a
prediction (the plan's, or a hypothesis's), with the tolerances that judge them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ._forms import Form, exact_tolerance, float32_bound
from ._subjects import SubjectTables

__all__ = ["COARSE", "Group", "Tables", "allowed", "errors", "stack"]

_F64 = npt.NDArray[np.float64]
Tables = tuple[_F64, _F64]

#: Dtypes coarser than float32: tables in them are worse than float32 angles.
COARSE = ("bfloat16", "float16")


@dataclass(frozen=True)
class Group:
    """Rows compared together: their positions ``(P, n_axes)``, the subject's tables there, and
    the sequence length the plan's frequencies are taken at."""

    positions: _F64
    subject: SubjectTables
    seq_len: int | None


def stack(cos: _F64, sin: _F64) -> _F64:
    return np.concatenate([cos, sin], axis=1)


def errors(group: Group, tables: Tables) -> _F64:
    err: _F64 = np.abs(stack(group.subject.cos, group.subject.sin) - stack(*tables))
    return err


def allowed(
    form: Form, group: Group, expected: Tables, dtype: str | None = None
) -> tuple[_F64, _F64]:
    """``(exact tolerance, float32 bound + tolerance)`` per element ``(P, 2·width)``. A subject
    in a dtype coarser than float32 is held to float32's rounding: its own rounding is an error
    (unless ``dtype`` names the rounding a hypothesis expects)."""
    theta = form.spread(np.abs(form.angles(group.positions)))
    theta2 = stack(theta, theta)
    if dtype is None:
        dtype = group.subject.dtype
        dtype = "float32" if dtype in COARSE else dtype
    tol = exact_tolerance(stack(*expected), theta2, dtype)
    bound = float32_bound(form, group.positions)
    return tol, stack(bound, bound) + tol
