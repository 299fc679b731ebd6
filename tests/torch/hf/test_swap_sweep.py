"""``swap_positions`` on every causal LM of the pinned transformers (marker ``sweep``).

Every model type of ``MODEL_FOR_CAUSAL_LM_MAPPING_NAMES`` is built tiny (see
:mod:`tests.torch.tiny_models`) and swapped. A model that cannot be built or run on the CPU
skips with the reason. When modules were replaced, the swapped copy must give the original's
logits on a left-padded batch and the same cached greedy generation (8 tokens, step logits
within 1e-4), and feeding the replaced modules doubled positions must change the logits. A
rotary module left in place fails when the RoPE coverage harness reproduces its model directory
(posenc computes its tables, so the swap should have replaced it), unless :data:`EXPECTED_LEFT`
gives the reason. A model with no positional module must be reported as such.

Every model type also runs in bfloat16 and float16 (built
as ``from_pretrained(dtype=)`` builds, and swapped in that dtype; a model transformers itself
cannot build or run in that dtype on the CPU skips with the reason): logits within the error
model's bound (:func:`tests.torch.tiny_models.tolerance_16_bits`), greedy tokens equal wherever
the original's top-2 margin exceeds it; near-ties are listed in the summary, not failed. In
float16 the control (doubled positions) must exceed the bound; in bfloat16, whose bound is
eight times larger, a control within it is listed.

Run with ``pytest -m sweep`` or ``make test-sweep`` (a few minutes); the default run keeps one
model per form of rotary module (tests/torch/hf/test_swap.py). The counts are printed in the
terminal summary ("swap sweep"), followed by the model types posenc does not cover, by name.

Under another transformers release (``make test-compat`` installs the newest), a model type the
pinned release has must still pass; one it adds (see tests/torch/hf/pinned.py) that fails is a gap
of that release: it skips with the reason, except those of :data:`MUST_SWAP`, which posenc
swaps (nothing replaced fails too). :data:`EXPECTED_LEFT` describes the pinned release
only: under another one, such a model is a gap when something is left.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from transformers.models.auto.modeling_auto import (  # noqa: E402
    MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
)

from tests.torch import tiny_models  # noqa: E402
from tests.torch.hf import pinned, rope_coverage  # noqa: E402
from tests.torch.hf.rope_coverage_axes import short  # noqa: E402
from tests.torch.hf.test_rope_coverage import KNOWN_MISSING  # noqa: E402

pytestmark = pytest.mark.sweep

MODEL_TYPES = sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)

#: model type -> why positional modules whose values posenc reproduces stay in place (a part
#: of the report's reason). The sweep fails when one of them is swapped now (update the table).
EXPECTED_LEFT: dict[str, str] = {
    # the sin/cos table is a buffer of each attention layer, read inside its forward (from
    # transformers 5.24 on, a rotary module of the model reads it, and is swapped)
    "codegen": "its 'embed_positions' is the 'marian' table, but its call is not understood",
    "gptj": "its 'embed_positions' is the 'marian' table, but its call is not understood",
    # the table is a buffer of the whole model, read inside its forward
    "ctrl": "its 'pos_encoding' is the 'marian' table, but its call is not understood",
}

#: model type -> the rotary form posenc.rope_plan refuses for it (a part of the report's
#: reason): its rotary modules must be left, by that name, in every dtype. posenc does not
#: cover these models, and the summary lists them so.
REFUSED_FORMS: dict[str, str] = {}  # NanoChat's rotation by -θ is refused, its tables are not

#: model type -> why its positional modules stay in bfloat16 and float16, where that differs
#: from :data:`EXPECTED_LEFT`: built under a 16-bit default dtype, these models compute their
#: sinusoidal table's frequencies in that dtype (off by 0.049 in bfloat16 at row 503), so it is
#: no sinusoidal table posenc reproduces.
#: The same holds for their rotary module from transformers 5.24 on (its buffer is that table).
EXPECTED_LEFT_16: dict[str, str] = {
    "codegen": "its table matches no sinusoidal convention",
    "gptj": "its table matches no sinusoidal convention",
}

#: model types newer than the pinned release that posenc swaps (transformers 5.25: Ergo's
#: interleaved RoPE, Kolibri 1.1's, Inkling2-loop's relative logits and log scaling): under a
#: release that has them, a failure or nothing replaced fails instead of being a gap.
MUST_SWAP = ("ergo", "kolibri1_1", "inkling2_loop_text")

#: model type -> what the sweep found (read by the terminal summary in tests/summaries.py).
OUTCOMES: dict[str, str] = {}
#: "model type dtype" -> what the 16-bit runs found; near-ties (read by the summary too).
OUTCOMES_16: dict[str, str] = {}
NEAR_TIES: dict[str, list[str]] = {}
DTYPES_16 = ("bfloat16", "float16")

#: Outcomes of a model type that posenc covers; any other is listed as not covered.
COVERED = ("equal", "no positional module", "learned position tables only", "left as expected")


def not_covered(outcomes: dict[str, str]) -> list[str]:
    """The model types whose outcome says posenc does not cover them (read by the summary)."""
    return sorted(t for t, outcome in outcomes.items() if not outcome.startswith(COVERED))


def new_model_types() -> list[str]:
    """The installed release's causal LM model types that the pinned release lacks."""
    return sorted(set(MODEL_TYPES) - pinned.CAUSAL_LM_MODEL_TYPES)


_ROTARY_CLASS = re.compile(r"RotaryEmbedding")
_RECOGNISED_TABLE = re.compile(r"is the '[\w, ]+' table")


def _directory(module: Any) -> str | None:
    parts = type(module).__module__.split(".")
    return parts[2] if parts[:2] == ["transformers", "models"] and len(parts) > 2 else None


def rotary_modules(model: Any) -> dict[str, str]:
    """name -> model directory of each transformers rotary module in ``model``."""
    return {
        name: _directory(module) or "?"
        for name, module in model.named_modules()
        if _ROTARY_CLASS.search(type(module).__name__) and _directory(module)
    }


def _build(
    model_type: str, dtype: Any = None, outcomes: dict[str, str] = OUTCOMES, key: str = ""
) -> tuple[Any, Any, Any, tiny_models.Outputs]:
    named = str(dtype).removeprefix("torch.")
    key, where = key or model_type, "" if dtype is None else f" in {named} on the CPU"
    try:
        original, swapped, report = tiny_models.build_pair(model_type, dtype)
    except Exception as exc:
        outcomes[key] = f"not built{where}: {short(exc)}"
        pytest.skip(outcomes[key])
    try:
        reference = tiny_models.outputs(original)  # once: every comparison reuses them
    except Exception as exc:
        outcomes[key] = f"not run{where} with the test's inputs: {short(exc)}"
        pytest.skip(outcomes[key])
    if dtype is not None and not bool(reference.logits.isfinite().all()):
        outcomes[key] = f"not run{where}: its own logits are not finite"
        pytest.skip(outcomes[key])
    return original, swapped, report, reference


@functools.cache
def _reproduced() -> frozenset[str]:
    """The model directories whose rotary classes the RoPE coverage test reproduces."""
    return frozenset(rope_coverage.directories()) - frozenset(KNOWN_MISSING)


def reproduced_but_left(model: Any, report: Any) -> list[str]:
    """What the swap left although posenc computes its values: rotary modules of a model
    directory that the RoPE coverage harness reproduces, and sinusoidal tables it recognised
    but could not replace."""
    rotary = [name for name, d in rotary_modules(model).items() if d in _reproduced()]
    tables = [x.name for x in report.left if _RECOGNISED_TABLE.search(x.reason)]
    return rotary + tables


def _outcome(report: Any) -> str:
    if report.replaced:
        return "equal"
    if not report.left:
        assert str(report) == "SwapReport: no positional module found"
        return "no positional module"
    if all(x.reason.startswith("learned table") for x in report.left):
        return "learned position tables only"
    return "left: " + "; ".join(sorted({x.reason for x in report.left}))


@pytest.fixture(scope="module", autouse=True)
def _setup(one_thread: None) -> None:
    transformers.logging.set_verbosity_error()


def test_the_pinned_model_types_are_listed() -> None:
    if not pinned.is_pinned(transformers.__version__):
        pytest.skip(f"pinned_transformers.json describes transformers {pinned.VERSION}")
    assert set(MODEL_TYPES) == pinned.CAUSAL_LM_MODEL_TYPES, "update pinned_transformers.json"


def test_the_summary_lists_what_is_not_covered() -> None:
    outcomes = {"a": "equal", "b": "left: its call is not understood", "c": "failed"}
    outcomes |= {"d": "not built: ValueError", "e": "left as expected: x"}
    assert not_covered(outcomes) == ["b", "c", "d"]


def _gap(model_type: str) -> bool:
    """Under another release than the pinned one: a model type it adds, or one the pinned
    release left in place (whose modules may have changed)."""
    if pinned.is_pinned(transformers.__version__) or model_type in MUST_SWAP:
        return False
    expected = model_type in EXPECTED_LEFT or model_type in EXPECTED_LEFT_16
    return model_type not in pinned.CAUSAL_LM_MODEL_TYPES or expected


@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_swap_keeps_every_causal_lm_unchanged(model_type: str) -> None:
    original, swapped, report, reference = _build(model_type)
    OUTCOMES[model_type] = "failed"
    try:
        _check(model_type, original, swapped, report, reference)
    except AssertionError as exc:
        if not _gap(model_type):
            raise
        reason = _outcome(report) if report.left and not report.replaced else short(exc)
        OUTCOMES[model_type] = f"not covered: {reason}"
        pytest.skip(f"not covered in transformers {transformers.__version__}: {exc}")


def _check(model_type: str, original: Any, swapped: Any, report: Any, reference: Any) -> None:
    assert report.replaced or model_type not in MUST_SWAP, (
        f"{model_type}: nothing swapped\n{report}"
    )
    if report.replaced:
        tiny_models.compare(original, swapped, reference)
        control = tiny_models.logits(tiny_models.control(swapped, report))
        assert float((control - reference.logits).abs().max()) > 1e-3, "the control changed nothing"
    OUTCOMES[model_type] = _left_as_expected(model_type, swapped, report)


def _left_as_expected(model_type: str, swapped: Any, report: Any, bits: int = 32) -> str:
    """The outcome, after checking that what was left is what :data:`EXPECTED_LEFT` (and, in
    16 bits, :data:`EXPECTED_LEFT_16`) says."""
    left = reproduced_but_left(swapped, report)
    if model_type in REFUSED_FORMS:
        assert not report.replaced, f"{model_type} is swapped now: update REFUSED_FORMS\n{report}"
        assert all(REFUSED_FORMS[model_type] in x.reason for x in report.left), str(report)
    if bits == 16 and model_type in EXPECTED_LEFT_16:
        assert not report.replaced, f"{model_type} is swapped now: update EXPECTED_LEFT_16"
        assert EXPECTED_LEFT_16[model_type] in " ".join(x.reason for x in report.left)
        return f"left as expected: {EXPECTED_LEFT_16[model_type]}"
    if model_type in EXPECTED_LEFT and report.replaced and not left and _gap(model_type):
        return _outcome(report)  # another release, whose modules posenc replaces (GPT-J 5.24)
    if model_type in EXPECTED_LEFT:
        reasons = " ".join(x.reason for x in report.left)
        assert left, f"{model_type} is swapped now: remove it from EXPECTED_LEFT\n{report}"
        assert EXPECTED_LEFT[model_type] in reasons, str(report)
        return f"left as expected: {EXPECTED_LEFT[model_type]}"
    assert not left, f"left although posenc reproduces them: {left}\n{report}"
    return _outcome(report)


@pytest.mark.parametrize("dtype", DTYPES_16)
@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_swap_keeps_every_causal_lm_within_one_ulp_in_16_bits(model_type: str, dtype: str) -> None:
    key, torch_dtype = f"{model_type} {dtype}", getattr(torch, dtype)
    original, swapped, report, reference = _build(model_type, torch_dtype, OUTCOMES_16, key)
    OUTCOMES_16[key] = "failed"
    try:
        OUTCOMES_16[key] = _check_16_bits(model_type, original, swapped, report, dtype, reference)
    except AssertionError as exc:
        if not _gap(model_type):
            raise
        OUTCOMES_16[key] = f"not covered: {short(exc)}"
        pytest.skip(f"not covered in transformers {transformers.__version__}: {exc}")


def _check_16_bits(
    model_type: str,
    original: Any,
    swapped: Any,
    report: Any,
    dtype: str,
    reference: tiny_models.Outputs,
) -> str:
    key, torch_dtype = f"{model_type} {dtype}", getattr(torch, dtype)
    control_note = ""
    assert report.replaced or model_type not in MUST_SWAP, (
        f"{model_type}: nothing swapped\n{report}"
    )
    if report.replaced:
        NEAR_TIES[key] = tiny_models.compare_16_bits(original, swapped, torch_dtype, reference)
        control = tiny_models.control(swapped, report)
        try:
            tiny_models.compare_16_bits(original, control, torch_dtype, reference)
        except AssertionError:
            pass  # the comparison tells the control from the original
        else:
            assert dtype == "bfloat16", "the control is within the float16 bound"
            control_note = " (the control is within the bfloat16 bound)"
    return _left_as_expected(model_type, swapped, report, 16) + control_note
