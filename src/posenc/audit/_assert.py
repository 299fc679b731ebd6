"""``assert_rope_matches``: one line for another project's tests."""

from __future__ import annotations

from typing import Any

from .._rope.plan import rope_plan
from ._audit import audit_plan, context_of, read_reference, resolve_subject
from ._report import AuditReport, render


def assert_rope_matches(
    cos: Any = None,
    sin: Any = None,
    *,
    config: Any,
    positions: Any = None,
    head_dim: int | None = None,
    rotation: Any = None,
    layer_type: str | None = None,
    allow_float32_angles: bool = True,
) -> AuditReport:
    """Assert that a stack's RoPE matches ``config``'s plan at ``positions``.

    Pass the stack's ``cos`` and ``sin`` tables ``(P, width)`` at ``positions`` (default
    ``0 .. P-1``), or ``rotation``: any subject :func:`audit` accepts (a callable ``positions
    -> (cos, sin)``, a rotation ``(positions, q, k) -> (q, k)``, an ``inv_freq``, a
    ``cos_sin_cache``), probed at ``positions`` (default the audit's probes, up to 2**20).

    Args:
        config: the Hugging Face config (dict, path, transformers config) the stack implements.
        head_dim: when given, checked against the plan's (a wrong config fails loudly).
        layer_type: the kind of layer, when the config has several rotating kinds.
        allow_float32_angles: accept the error of float32 angles (the error model's bound);
            False demands exact tables (within one unit in the last place of their dtype).

    Returns:
        the :class:`AuditReport` (when it passes).

    Raises:
        AssertionError: with the report's text (the cause in words, where it first differs).

    >>> import numpy as np
    >>> from posenc import rotary_cos_sin
    >>> config = {"model_type": "llama", "head_dim": 8, "num_attention_heads": 2,
    ...           "hidden_size": 16, "rope_theta": 10000.0}
    >>> cos, sin = rotary_cos_sin(np.arange(64), 8)
    >>> _ = assert_rope_matches(cos, sin, config=config)
    >>> cos, sin = rotary_cos_sin(np.arange(64), 8, base=500000.0)
    >>> assert_rope_matches(cos, sin, config=config)
    Traceback (most recent call last):
    ...
    AssertionError: RoPE does not match the config: ... base 500000 where the config says 10000...
    """
    reference, described = read_reference(config)
    plan = rope_plan(reference)
    if (cos is None) == (rotation is None):
        raise TypeError("pass cos and sin, or rotation= (a callable or object to probe)")
    if cos is not None:
        if sin is None:
            raise TypeError("sin is missing: pass cos and sin")
        subject = resolve_subject((cos, sin) if positions is None else (cos, sin, positions))
        probes = None
    else:
        subject = resolve_subject(rotation)
        probes = positions
    report = audit_plan(
        plan,
        subject,
        reference=described,
        context=context_of(reference),
        layer_type=layer_type,
        positions=probes,
    )
    if head_dim is not None:
        dims = {k.head_dim for k in plan.kinds.values() if k.uses_positions}
        if dims and head_dim not in dims:
            raise AssertionError(
                f"head_dim {head_dim} is not the config's ({sorted(dims)}): check the config"
            )
    failed = [f for f in report.findings if not f.passed]
    if not allow_float32_angles:
        failed += [f for f in report.findings if f.status == "float32_angles"]
    if failed:
        lines = render(report).splitlines()[1:]
        raise AssertionError(
            "RoPE does not match the config: " + " ".join(line.strip() for line in lines)
        )
    return report
