"""Every bug class through every subject kind that can carry it: the same broken numbers
handed to the audit as a ``positions -> (cos, sin)`` callable, as arrays in a ``.npz`` file
(with their ``position_ids``), as a ``(positions, q, k) -> (q, k)`` rotation, as vLLM's
``cos_sin_cache`` and as an ``inv_freq`` buffer are named in the same words, and the correct
numbers pass through each. (GGUF, ONNX, MLX and transformers-model subjects, whose formats
carry fewer of the classes, have their own files.)"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from posenc import RopeScaling, rope_plan
from posenc._rope.records import RopeInput
from posenc.audit import audit
from tests.audit.models import GEMMA3, GPT_OSS, LLAMA3, PARTIAL, PHI3, QWEN25_YARN
from tests.audit.stacks import float32_tables, rotation, vllm_cache

#: the rows a dumped table holds (a long one: LongRoPE's long factors apply past 4096)
DUMP = np.concatenate([np.arange(0, 512), np.arange(512, 9000, 61)])


def _plain(dim: int, base: float) -> Any:
    return base ** (-np.arange(0, dim, 2) / dim)


@dataclass(frozen=True)
class Case:
    """A model's config and layer type, and what the subject's stack does to the numbers: its
    frequencies (an array, or a function of the length), attention factor and pair layout."""

    config: dict[str, Any]
    layer_type: str | None = None
    omega: Any = None
    attention: float | None = None
    pairs: str | None = None
    sin_from_cos: bool = False
    sign: float = 1.0
    cause: str = ""  # words the cause starts with ("" for a correct artifact)
    #: the subject kinds that cannot carry this case (a cache has no length, an inv_freq buffer
    #: no layout, attention factor or sin)
    not_in: tuple[str, ...] = field(default=())

    def layer(self) -> Any:
        return rope_plan(self.config).layer(self.layer_type)

    def numbers(self, seq_len: int | None) -> tuple[Any, float, str]:
        kind = self.layer()
        omega, attention = kind.frequencies_at(seq_len)
        if self.omega is not None:
            omega = self.omega(seq_len) if callable(self.omega) else self.omega
        if self.attention is not None:
            attention = self.attention
        return omega, attention, self.pairs or kind.pairs


def _yarn_twice() -> Any:
    kind = rope_plan(QWEN25_YARN).layer()
    spec = RopeScaling("yarn", factor=4.0, original_max_position_embeddings=32768)
    twice, _ = spec.record.transform(RopeInput(kind.frequencies, 64, 1e6, spec.params, None))
    return twice


def _longrope_swapped(seq_len: int | None) -> Any:
    kind = rope_plan(PHI3).layer()
    other = 4096 if seq_len is None or seq_len > 4096 else 4097
    return kind.frequencies_at(other)[0]


def _truncated() -> Any:
    config = {**GPT_OSS, "rope_scaling": {**GPT_OSS["rope_scaling"], "truncate": True}}
    return rope_plan(config).layer("full_attention").frequencies


_LLAMA3_PLAIN = _plain(64, 500000.0)
#: a cache of the first positions, or one buffer: tables that do not depend on the length
_NO_LENGTH = ("cos_sin_cache", "inv_freq")
_TABLES_ONLY = ("inv_freq",)

CASES = {
    "llama3": Case(LLAMA3),
    "qwen2.5-yarn": Case(QWEN25_YARN),
    "gpt-oss": Case(GPT_OSS, "full_attention"),
    "partial": Case(PARTIAL),
    "gemma3-global": Case(GEMMA3, "full_attention"),
    "wrong base": Case(
        LLAMA3, omega=_plain(64, 10000.0), cause="base 10000 where the config says 500000"
    ),
    "yarn missing": Case(
        QWEN25_YARN,
        omega=_plain(64, 1e6),
        attention=1.0,
        cause="no yarn where the config has yarn factor 4",
    ),
    "yarn twice": Case(QWEN25_YARN, omega=_yarn_twice(), cause="yarn applied twice"),
    "truncate lost": Case(
        GPT_OSS, "full_attention", omega=_truncated(), cause="YaRN truncate lost"
    ),
    "llama3 factors missing": Case(LLAMA3, omega=_LLAMA3_PLAIN, cause="llama3 factors missing"),
    "llama3 factors inverted": Case(
        LLAMA3,
        omega=_LLAMA3_PLAIN**2 / rope_plan(LLAMA3).layer().frequencies,
        cause="llama3 factors inverted",
    ),
    "longrope swapped": Case(
        PHI3,
        omega=_longrope_swapped,
        cause="longrope long and short factors swapped",
        not_in=_NO_LENGTH,
    ),
    "local base on global layers": Case(
        GEMMA3,
        "full_attention",
        omega=rope_plan(GEMMA3).layer("sliding_attention").frequencies,
        cause="the RoPE of 'sliding_attention' layers (base 10000) on a 'full_attention'",
    ),
    "over head_dim": Case(
        PARTIAL,
        omega=_plain(64, 10000.0)[:16],
        cause="frequencies over head_dim 64 channels where the rotary width is 32",
    ),
    "pairs interleaved": Case(
        GPT_OSS,
        "full_attention",
        pairs="interleaved",
        cause="pairs interleaved where the model pairs halves",
        not_in=_TABLES_ONLY,
    ),
    "attention factor missing": Case(
        QWEN25_YARN,
        attention=1.0,
        cause="the attention factor 1.13863 of yarn missing",
        not_in=_TABLES_ONLY,
    ),
    "sin read from cos": Case(
        LLAMA3, sin_from_cos=True, cause="sin read from cos", not_in=(*_TABLES_ONLY, "rotation")
    ),
    "rotation by -θ": Case(LLAMA3, sign=-1.0, cause="rotation by -θ", not_in=_TABLES_ONLY),
}


# --------------------------------------------------------------------------- the subject kinds


def _tables(case: Case, positions: Any, seq_len: int | None) -> tuple[Any, Any]:
    omega, attention, pairs = case.numbers(seq_len)
    cos, sin = float32_tables(positions, omega, attention, pairs)
    if case.sin_from_cos:
        sin = cos
    return cos, case.sign * sin


def as_callable(case: Case, tmp_path: Path) -> Any:
    return lambda positions: _tables(case, positions, int(np.max(positions)) + 1)


def as_arrays(case: Case, tmp_path: Path) -> Any:
    cos, sin = _tables(case, DUMP, int(DUMP.max()) + 1)
    path = tmp_path / "dump.npz"
    np.savez(path, cos=cos, sin=sin, position_ids=DUMP)
    return path


def as_rotation(case: Case, tmp_path: Path) -> Any:
    def apply(positions: Any, q: Any, k: Any) -> Any:
        omega, attention, pairs = case.numbers(int(np.max(positions)) + 1)
        return rotation(omega, attention, pairs, case.sign)(positions, q, k)

    return apply


def as_cos_sin_cache(case: Case, tmp_path: Path) -> Any:
    omega, attention, pairs = case.numbers(None)
    assert pairs == "half" or case.pairs == "interleaved"  # vLLM's cache holds pairs, no layout
    cache = vllm_cache(omega, attention, 8192)
    half = cache.shape[1] // 2
    if case.sin_from_cos:
        cache[:, half:] = cache[:, :half]
    cache[:, half:] *= case.sign

    class VllmRope:  # what vLLM's get_rope returns, as far as the audit reads it
        cos_sin_cache = cache
        is_neox_style = pairs == "half"

    return VllmRope()


def as_inv_freq(case: Case, tmp_path: Path) -> Any:
    omega, attention, _ = case.numbers(None)

    class HfRotary:  # a transformers rotary module's buffer and its attention factor
        inv_freq = np.asarray(omega, dtype=np.float32)
        attention_scaling = attention

    return HfRotary()


KINDS: dict[str, Callable[[Case, Path], Any]] = {
    "callable": as_callable,
    "arrays": as_arrays,
    "rotation": as_rotation,
    "cos_sin_cache": as_cos_sin_cache,
    "inv_freq": as_inv_freq,
}

PAIRS = [
    pytest.param(name, kind, id=f"{name}-{kind}")
    for name, case in CASES.items()
    for kind in KINDS
    if kind not in case.not_in
]


@pytest.mark.parametrize(("name", "kind"), PAIRS)
def test_each_class_through_each_subject_kind(name: str, kind: str, tmp_path: Path) -> None:
    case = CASES[name]
    report = audit(case.config, KINDS[kind](case, tmp_path), layer_type=case.layer_type)
    if not case.cause:
        assert report.passed, str(report)
        assert {f.status for f in report.findings} <= {"exact", "float32_angles"}
        return
    assert not report.passed, f"{name} through {kind} passed:\n{report}"
    assert report.exit_code == 1
    causes = " ".join(f.cause or "" for f in report.findings)
    assert causes.startswith(case.cause) or f" {case.cause}" in causes, (
        f"{name} through {kind}: {causes!r}"
    )
