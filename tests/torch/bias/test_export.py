"""Export of the dense / ``attn_mask`` attention biases: ``T5RelativeBias``, ``KerpleBias``,
``FireBias`` and ``alibi_bias`` + ``bias_attn_mask`` called inside a module, with ``torch.export``
(the length dynamic from 1 to 2**16, positions as a tensor input) and to ONNX (opset 18, the
dynamo exporter) run by onnxruntime. Equal to eager within one float32 ulp.

ONNX parts skip without onnx, onnxscript or onnxruntime; under CI a missing one fails.
"""

from __future__ import annotations

import importlib.util
import os
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

import posenc  # noqa: E402
import posenc.torch as pt  # noqa: E402
from tests.torch.export_cases import LENGTH, assert_within_one_ulp, input_ranges  # noqa: E402

nn = torch.nn


class Dense(nn.Module):
    """A bias module called with the same positions for queries and keys."""

    def __init__(self, bias: Any) -> None:
        super().__init__()
        self.bias = bias

    def forward(self, positions: torch.Tensor) -> torch.Tensor:
        result: torch.Tensor = self.bias(positions, positions)
        return result


class AlibiMask(nn.Module):
    """ALiBi as an SDPA mask, built inside the module from its positions."""

    def __init__(self, convention: str) -> None:
        super().__init__()
        self.convention = convention

    def forward(self, positions: torch.Tensor) -> torch.Tensor:
        bias = pt.alibi_bias(6, positions, positions, convention=self.convention)
        return pt.bias_attn_mask(bias, causal=True)


def _t5(**kwargs: Any) -> Any:
    torch.manual_seed(0)
    return pt.T5RelativeBias(4, **kwargs)


def _fire() -> Any:
    torch.manual_seed(0)
    return pt.FireBias(4, hidden=8)


CASES = {
    "t5_encoder": lambda: Dense(_t5()),
    "t5_decoder_transformers": lambda: Dense(_t5(bidirectional=False, convention="transformers")),
    "kerple_log": lambda: Dense(pt.KerpleBias(4)),
    "kerple_power": lambda: Dense(pt.KerpleBias(4, kind="power")),
    "fire": lambda: Dense(_fire()),
    "alibi_mask_exact": lambda: AlibiMask("exact"),
    "alibi_mask_bloom": lambda: AlibiMask("bloom"),
}

_PROGRAMS: dict[str, Any] = {}


def assert_close(got: Any, want: Any) -> None:
    """Within one float32 ulp of eager, the masked pairs ``-inf`` in both."""
    got_list = list(got) if isinstance(got, (list, tuple)) else [got]
    want_list = list(want) if isinstance(want, (list, tuple)) else [want]
    for g, w in zip(got_list, want_list, strict=True):
        g = torch.as_tensor(np.asarray(g.detach() if isinstance(g, torch.Tensor) else g))
        masked = torch.isinf(w)
        assert torch.equal(torch.isinf(g), masked)
        assert torch.equal(g[masked], w[masked])
        assert_within_one_ulp(g.masked_fill(masked, 0.0), w.masked_fill(masked, 0.0))


def _export(name: str) -> tuple[Any, Any]:
    if name not in _PROGRAMS:
        module = CASES[name]().eval()
        program = torch.export.export(module, (torch.arange(8),), dynamic_shapes=({0: LENGTH},))
        _PROGRAMS[name] = (module, program)
    return _PROGRAMS[name]


@pytest.mark.parametrize("name", sorted(CASES))
def test_torch_export_keeps_the_length_dynamic_and_equals_eager(name: str) -> None:
    module, program = _export(name)
    assert input_ranges(program) == {(LENGTH.min, LENGTH.max)}
    run = program.module()
    for length, offset in ((1, 5), (7, 0), (300, 2**20)):
        positions = torch.arange(length) + offset
        with torch.no_grad():
            assert_close(run(positions), module(positions))


def test_tensor_positions_give_the_bias_of_int_positions() -> None:
    t5 = _t5()
    positions = torch.arange(40) + 3
    assert torch.equal(t5(positions, positions), t5(list(range(3, 43)), list(range(3, 43))))
    for convention in ("exact", "bloom", "mpt", "falcon"):
        got = pt.alibi_bias(12, positions, positions, convention=convention)
        want = pt.alibi_bias(12, range(3, 43), range(3, 43), convention=convention)
        assert torch.equal(got, want), convention


def test_tensor_positions_are_checked() -> None:
    t5 = _t5()
    with pytest.raises(TypeError, match="query_positions must be a 1-D integer tensor"):
        t5(torch.zeros(3), torch.arange(3))
    with pytest.raises(TypeError, match="key_positions must be a 1-D integer tensor"):
        pt.KerpleBias(2)(torch.arange(3), torch.zeros(2, 2, dtype=torch.int64))
    with pytest.raises(ValueError, match="key_positions must lie within"):
        pt.alibi_bias(2, torch.arange(3), torch.tensor([2**53 + 1]))


def test_a_t5_bias_beyond_the_lookup_table_refuses_to_export() -> None:
    module = Dense(_t5(max_distance=2**21)).eval()
    with pytest.raises(Exception, match=r"max_distance=2097152 .* cannot be traced or exported"):
        torch.export.export(module, (torch.arange(8),), dynamic_shapes=({0: LENGTH},))
    eager = module(torch.arange(5))  # eager still works, through the host
    assert eager.shape == (4, 5, 5)


_MISSING = [n for n in ("onnx", "onnxscript", "onnxruntime") if not importlib.util.find_spec(n)]


@pytest.mark.slow
def test_onnx_opset18_under_onnxruntime() -> None:
    """All cases in one graph (the dynamo exporter takes seconds per graph)."""
    if _MISSING:
        why = f"ONNX export tests need {', '.join(_MISSING)} (requirements-dev.txt)"
        if os.environ.get("CI"):
            pytest.fail(f"under CI: {why}", pytrace=False)
        pytest.skip(why)
    import onnxruntime

    class All(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.parts = nn.ModuleList(CASES[name]() for name in sorted(CASES))

        def forward(self, positions: torch.Tensor) -> tuple[torch.Tensor, ...]:
            return tuple(part(positions) for part in self.parts)

    module = All().eval()
    program = torch.onnx.export(
        module, (torch.arange(8),), dynamic_shapes=({0: LENGTH},), dynamo=True,
        opset_version=18, verbose=False,
    )  # fmt: skip
    assert input_ranges(program.exported_program) == {(LENGTH.min, LENGTH.max)}
    session = onnxruntime.InferenceSession(
        program.model_proto.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    name = session.get_inputs()[0].name
    for length, offset in ((1, 5), (7, 0), (300, 2**20)):
        positions = torch.arange(length) + offset
        got = [
            torch.from_numpy(np.asarray(g)) for g in session.run(None, {name: positions.numpy()})
        ]
        with torch.no_grad():
            want = list(module(positions))
        for case, g, w in zip(sorted(CASES), got, want, strict=True):
            if case.startswith(("kerple", "fire")):
                # ONNX has no Log1p: log1p(x) runs as Log(1 + x), off by up to 2 float32 ulps
                # of the largest value of the bias (measured: 1.5 FIRE, 1 Kerple at 2**20)
                slack = 2 * np.spacing(np.float32(w.abs().max()))
                assert float((g - w).abs().max()) <= slack, case
            else:
                assert_close(g, w)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    query=st.lists(st.integers(-(2**40), 2**40), min_size=1, max_size=6),
    key=st.lists(st.integers(-(2**40), 2**40), min_size=1, max_size=6),
    convention=st.sampled_from(["exact", "bloom", "mpt", "falcon"]),
    form=st.sampled_from(["distance", "relative", "key"]),
)
def test_tensor_positions_equal_list_positions(
    query: list[int], key: list[int], convention: str, form: str
) -> None:
    q, k = torch.tensor(query), torch.tensor(key)
    got = pt.alibi_bias(5, q, k, convention=convention, form=form, dtype=torch.float64)
    want = pt.alibi_bias(5, query, key, convention=convention, form=form, dtype=torch.float64)
    assert torch.equal(got, want)
    rel = np.subtract.outer(np.array(key), np.array(query)).T  # key - query, (q, k)
    for both in (True, False):
        for convention in ("exact", "transformers"):
            t5 = _t5(bidirectional=both, convention=convention)
            buckets = posenc.t5_buckets(rel, bidirectional=both)  # the exact buckets
            if convention == "transformers":
                buckets = pt.t5_buckets(torch.from_numpy(rel), bidirectional=both,
                                        convention="transformers").numpy()  # fmt: skip
            with torch.no_grad():
                want = t5.table.weight[torch.from_numpy(buckets)].permute(2, 0, 1)
                assert torch.equal(t5(q, k), want)
