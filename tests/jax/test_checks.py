"""Hostile input: posenc.jax raises the NumPy core's errors, word for word (the shared
checks run, not a copy of them), and its own checks (dtypes, arrays) name the argument."""

from __future__ import annotations

import numpy as np
import pytest

from tests.jax.helpers import import_jax

jax, jnp = import_jax()

import posenc  # noqa: E402
import posenc.jax as pj  # noqa: E402
from tests.configs import DYNAMIC  # noqa: E402

ROTARY = {
    "odd head_dim": ((3, 7), {}),
    "huge base": ((3, 8), {"base": 10**400}),
    "negative base": ((3, 8), {"base": -1.0}),
    "nan base": ((3, 8), {"base": float("nan")}),
    "bad pairs": ((3, 8), {"pairs": "zigzag"}),
    "bad rope type": ((3, 8), {"scaling": {"rope_type": "magic"}}),
    "yarn without factor": ((3, 8), {"scaling": {"rope_type": "yarn"}}),
    "rotary_dim too large": ((3, 8), {"rotary_dim": 10}),
    "nan position": (([0.0, float("nan")], 8), {}),
    "bool positions": (([True, False], 8), {}),
    "beyond 2**53": (([2**53 + 1], 8), {}),
    "ragged positions": (([[0, 1], [2]], 8), {}),
    "a string": (("abc", 8), {}),
}


def _same_error(core, front) -> None:
    with pytest.raises((TypeError, ValueError)) as expected:
        core()
    with pytest.raises(type(expected.value)) as got:
        front()
    assert str(got.value) == str(expected.value)
    assert "\n" not in str(got.value)


@pytest.mark.parametrize("case", sorted(ROTARY))
def test_rotary_cos_sin_raises_the_core_errors(case: str) -> None:
    args, kwargs = ROTARY[case]
    _same_error(
        lambda: posenc.rotary_cos_sin(*args, **kwargs), lambda: pj.rotary_cos_sin(*args, **kwargs)
    )


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [((3, 0), {}), ((3, 8), {"convention": "nope"}), ((3, 8), {"base": 0}), (([[1, "a"]], 4), {})],
)
def test_sinusoidal_raises_the_core_errors(args, kwargs) -> None:
    _same_error(lambda: posenc.sinusoidal(*args, **kwargs), lambda: pj.sinusoidal(*args, **kwargs))


def test_apply_rotary_raises_the_core_errors() -> None:
    cos, sin = posenc.rotary_cos_sin(3, 4)
    x = np.ones((3, 4), dtype=np.float32)
    _same_error(
        lambda: posenc.apply_rotary(x, cos, sin, pairs="interleaved"),
        lambda: pj.apply_rotary(jnp.asarray(x), cos, sin, pairs="interleaved"),
    )
    _same_error(
        lambda: posenc.apply_rotary(x, cos[:2], sin[:2]),
        lambda: pj.apply_rotary(jnp.asarray(x), cos[:2], sin[:2]),
    )
    _same_error(
        lambda: posenc.apply_rotary(x, cos, sin[:, :2]),
        lambda: pj.apply_rotary(jnp.asarray(x), cos, sin[:, :2]),
    )
    _same_error(
        lambda: posenc.apply_rotary(x, cos, sin, rotary_dim=6),
        lambda: pj.apply_rotary(jnp.asarray(x), cos, sin, rotary_dim=6),
    )


def test_multi_axis_and_position_ids_raise_the_core_errors() -> None:
    _same_error(
        lambda: posenc.multi_axis_cos_sin(np.zeros((2, 2)), 8, sections=(2, 1, 1)),
        lambda: pj.multi_axis_cos_sin(np.zeros((2, 2)), 8, sections=(2, 1, 1)),
    )
    _same_error(
        lambda: posenc.positions_from_mask([[0, 2]]), lambda: pj.positions_from_mask([[0, 2]])
    )
    _same_error(
        lambda: posenc.positions_from_cu_seqlens([1, 3]),
        lambda: pj.positions_from_cu_seqlens([1, 3]),
    )
    _same_error(
        lambda: posenc.rope_plan({"head_dim": 64, "rope_parameters": {"rope_type": "magic"}}),
        lambda: pj.rope_plan({"head_dim": 64, "rope_parameters": {"rope_type": "magic"}}),
    )


def test_front_end_checks_name_the_argument() -> None:
    with pytest.raises(
        TypeError, match=r"^dtype must be one of float16, bfloat16, float32, float64, got"
    ):
        pj.rotary_cos_sin(3, 8, dtype=np.int32)
    with pytest.raises(TypeError, match="dtype float64 needs JAX's 64-bit mode"):
        pj.sinusoidal(3, 8, dtype=np.float64)
    with pytest.raises(TypeError, match="x must be a JAX array, got list"):
        pj.apply_rotary([[1.0, 0.0]], *pj.rotary_cos_sin(1, 2))
    with pytest.raises(TypeError, match="x must be a floating-point array, got dtype int32"):
        pj.apply_rotary(jnp.ones((1, 2), jnp.int32), *pj.rotary_cos_sin(1, 2))
    with pytest.raises(TypeError, match="positions must contain integers or real numbers"):
        jax.jit(lambda p: pj.rotary_cos_sin(p, 8))(jnp.array([True]))
    with pytest.raises(ValueError, match="pass seq_len="):
        jax.jit(lambda p: pj.rotary_cos_sin(p, 8, scaling=DYNAMIC))(jnp.arange(3))


def test_import_without_jax_says_what_to_install() -> None:
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['jax'] = None\n"
        "try:\n    import posenc.jax\nexcept ImportError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "pip install '.[jax]'" in out.stdout


def test_missing_jax_fails_under_ci_skips_outside_and_skips_python_3_10(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sys

    from tests.jax.helpers import PY310_REASON, import_jax

    monkeypatch.setitem(sys.modules, "flax", None)  # flax "not installed"
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="under CI"):
        import_jax()
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match="flax is not installed"):
        import_jax()
    monkeypatch.setattr(sys, "version_info", (3, 10, 14))
    with pytest.raises(pytest.skip.Exception, match=r"need Python >= 3\.11"):
        import_jax()
    assert "jax 0.10.2 and flax 0.12.8" in PY310_REASON
