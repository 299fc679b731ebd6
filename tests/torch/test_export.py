"""``torch.export`` of every module: a dynamic length with no guard narrowing it, tensor
positions and offsets (one graph for prefill and decode), a save/load round trip, posenc's
accuracy in the exported program, and clear errors for what cannot be exported."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.slow  # a torch.export of each case: about a second each

import posenc.torch as pt  # noqa: E402
from posenc.torch import hf  # noqa: E402
from tests.torch.export_cases import (  # noqa: E402
    BATCH,
    CASES,
    HEAD_DIM,
    LENGTH,
    MAX_LENGTH,
    Case,
    RopeAt,
    RopeFrom,
    assert_within_one_ulp,
    input_ranges,
)

_PROGRAMS: dict[str, Any] = {}


def _export(case: Case) -> Any:
    """The case's exported program, made once per test session."""
    if case.name not in _PROGRAMS:
        module = case.build().eval()
        _PROGRAMS[case.name] = (
            module,
            torch.export.export(module, case.inputs(8, 3), dynamic_shapes=case.dynamic),
        )
    return _PROGRAMS[case.name]


def _asked(case: Case) -> tuple[int, int]:
    dim = BATCH if case.name == "grid" else LENGTH
    return dim.min, dim.max


@pytest.mark.parametrize("name", sorted(CASES))
def test_exports_with_the_whole_dynamic_length(name: str) -> None:
    """The length's range in the program is the range asked for: no guard narrowed it (a
    size read before a compile check would add ``128*s <= 32768``, a tuple comparison
    ``s != 2``)."""
    case = CASES[name]
    _, program = _export(case)
    assert input_ranges(program) == {_asked(case)}


@pytest.mark.parametrize("name", sorted(CASES))
def test_exported_program_is_eager_at_every_length(name: str) -> None:
    """At lengths 1 (decode), 7 and 1000, offsets 0 and 2**20 - 1000: within one unit in the
    last place of eager (float32)."""
    case = CASES[name]
    module, program = _export(case)
    run = program.module()
    for length, offset in ((1, 5), (7, 0), (1000, 2**20 - 1000)):
        length = min(length, 64) if name == "grid" else length
        args = case.inputs(length, offset)
        with torch.no_grad():
            assert_within_one_ulp(run(*args), module(*args))


@pytest.mark.parametrize("name", ["rope_half", "rope_interleaved_offset", "sinusoidal"])
def test_exported_program_at_the_longest_length(name: str) -> None:
    case = CASES[name]
    module, program = _export(case)
    args = case.inputs(MAX_LENGTH, 2**20 - MAX_LENGTH)
    with torch.no_grad():
        assert_within_one_ulp(program.module()(*args), module(*args))


@pytest.mark.parametrize("name", ["sinusoidal", "rope_half", "hf_llama_rotary", "timestep"])
def test_exported_angles_are_float64(name: str) -> None:
    """The graph computes sin/cos of float64 angles (a float32 angle is off by ~1e-3 at
    position 10**4), rounded once to float32."""
    _, program = _export(CASES[name])
    trig = [n for n in program.graph.nodes if n.target in (torch.ops.aten.sin.default,)]
    trig += [n for n in program.graph.nodes if n.target in (torch.ops.aten.cos.default,)]
    assert trig
    assert {n.args[0].meta["val"].dtype for n in trig} == {torch.float64}


@pytest.mark.parametrize("name", ["rope_sections", "sinusoidal", "hf_m2m100"])
def test_save_load_round_trip(name: str, tmp_path: Path) -> None:
    case = CASES[name]
    module, program = _export(case)
    path = tmp_path / f"{name}.pt2"
    torch.export.save(program, path)
    loaded = torch.export.load(path)
    args = case.inputs(300, 12345)
    with torch.no_grad():
        assert_within_one_ulp(loaded.module()(*args), module(*args))


def test_guard_free_with_a_static_batch_of_two() -> None:
    """Per-batch positions ``(2, s)``/``(2, s, 3)`` with the batch fixed at 2: comparing the
    positions' shape with ``(s,)`` must not guard the length against 2."""
    for rope, positions in (
        (pt.RotaryEmbedding(HEAD_DIM), torch.arange(16).view(2, 8)),
        (pt.RotaryEmbedding(HEAD_DIM, sections=[16, 8, 8]), torch.arange(48).view(2, 8, 3)),
    ):
        q, k = torch.randn(2, 2, 2, 8, HEAD_DIM)
        program = torch.export.export(
            RopeAt(rope).eval(),
            (q, k, positions),
            dynamic_shapes=({2: LENGTH}, {2: LENGTH}, {1: LENGTH}),
        )
        assert input_ranges(program) == {(1, MAX_LENGTH)}


@pytest.mark.parametrize(
    "module",
    [
        pt.SinusoidalPositionalEncoding(16, dropout=0.1),
        pt.TransformerEmbedding(10, 16, dropout=0.1),
        pt.SinusoidalGridEncoding(16, grid_shape=(2, 2), dropout=0.1),
    ],
    ids=["sinusoidal", "transformer_embedding", "grid"],
)
def test_export_in_training_mode_names_dropout(module: Any) -> None:
    if isinstance(module, pt.TransformerEmbedding):
        args: tuple[Any, ...] = (torch.zeros(1, 4, dtype=torch.long),)
    elif isinstance(module, pt.SinusoidalGridEncoding):
        args = (torch.randn(1, 4, 16),)
    else:
        args = (torch.randn(1, 4, 16),)
    with pytest.raises(ValueError, match=r"dropout active.*training mode.*\.eval\(\)"):
        torch.export.export(module.train(), args)
    torch.export.export(module.eval(), args)  # evaluation mode exports


_SWITCHING = {
    "dynamic": {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 16},
    "longrope": {
        "rope_type": "longrope",
        "short_factor": [1.0] * 32,
        "long_factor": [2.0] * 32,
        "original_max_position_embeddings": 16,
        "factor": 4.0,
    },
}


@pytest.mark.parametrize("rope_type", sorted(_SWITCHING))
def test_length_switching_scalings_are_refused_by_name(rope_type: str) -> None:
    scaling = _SWITCHING[rope_type]
    q = torch.randn(1, 2, 8, HEAD_DIM)
    match = rf"rope_type '?{rope_type}'? cannot be exported.*seq_len="
    for wrapper, last in (
        (RopeFrom(pt.RotaryEmbedding(HEAD_DIM, scaling=scaling)), torch.tensor(0)),
        (RopeAt(pt.RotaryEmbedding(HEAD_DIM, scaling=scaling)), torch.arange(8)),
    ):
        with pytest.raises(ValueError, match=match if last.dim() == 0 else "cannot be exported"):
            torch.export.export(wrapper.eval(), (q, q, last))
    with pytest.raises(ValueError, match="cannot be exported"):
        torch.export.export(hf.LlamaRotary(HEAD_DIM, scaling=scaling), (q, torch.arange(8)[None]))


def test_length_switching_scaling_exports_with_a_fixed_seq_len() -> None:
    """With ``seq_len=`` the frequency set is fixed, so the graph holds no switch."""

    class Fixed(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.rope = pt.RotaryEmbedding(HEAD_DIM, scaling=_SWITCHING["dynamic"])

        def forward(self, q: Any, k: Any, offset: Any) -> Any:
            return self.rope(q, k, offset=offset, seq_len=64)

    module = Fixed().eval()
    q, k = torch.randn(2, 1, 2, 8, HEAD_DIM)  # distinct tensors: an alias would be one input
    program = torch.export.export(
        module, (q, k, torch.tensor(0)), dynamic_shapes=({2: LENGTH}, {2: LENGTH}, None)
    )
    args = (torch.randn(1, 2, 40, HEAD_DIM), torch.randn(1, 2, 40, HEAD_DIM), torch.tensor(9))
    assert_within_one_ulp(program.module()(*args), module(*args))
