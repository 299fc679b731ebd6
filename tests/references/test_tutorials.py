"""posenc's NumPy core against independent references: values printed in tutorials, recipes
re-typed from tutorials, tensor2tensor's ``get_timing_signal_1d`` and a per-element ``math``
formula.

Nothing here imports torch: the tutorial recipes (which use torch) are re-typed in NumPy
float64, and every reference value comes from a computation that does not call posenc.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc
from tests.tolerance import assert_close_ulp

# ---------------------------------------------------------------------------------------------
# A NumPy tutorial with the odd-exponent cosine bug (cos uses base^((2i+1)/d)): its printed
# outputs, re-typed (max_len=10, embedd_dim=8).
# ---------------------------------------------------------------------------------------------

# ``term_sin`` as printed by that tutorial (np.sin(position / 10000**(even / 8)), float64
# printed with 8 decimals). These are the correct sine columns of the paper's encoding.
PRINTED_TERM_SIN = np.array(
    [
        [0.0, 0.0, 0.0, 0.0],
        [0.84147098, 0.09983342, 0.00999983, 0.001],
        [0.90929743, 0.19866933, 0.01999867, 0.002],
        [0.14112001, 0.29552021, 0.0299955, 0.003],
        [-0.7568025, 0.38941834, 0.03998933, 0.00399999],
        [-0.95892427, 0.47942554, 0.04997917, 0.00499998],
        [-0.2794155, 0.56464247, 0.05996401, 0.00599996],
        [0.6569866, 0.64421769, 0.06994285, 0.00699994],
        [0.98935825, 0.71735609, 0.07991469, 0.00799991],
        [0.41211849, 0.78332691, 0.08987855, 0.00899988],
    ]
)

# ``term_cos`` as printed by the same tutorial. It is BUGGY: the tutorial divides by
# 10000**(odd / 8), i.e. cos(p / 10000**((2i+1)/8)), instead of sharing the sine's frequency
# 10000**(-2i/8).
PRINTED_BUGGY_TERM_COS = np.array(
    [
        [1.0, 1.0, 1.0, 1.0],
        [0.95041528, 0.99950004, 0.999995, 0.99999995],
        [0.80657841, 0.99800067, 0.99998, 0.9999998],
        [0.58275361, 0.99550337, 0.999955, 0.99999955],
        [0.30113746, 0.99201066, 0.99992, 0.9999992],
        [-0.01034232, 0.98752602, 0.999875, 0.99999875],
        [-0.32079646, 0.98205394, 0.99982001, 0.9999982],
        [-0.59943739, 0.97559988, 0.99975501, 0.99999755],
        [-0.81863246, 0.9681703, 0.99968002, 0.9999968],
        [-0.9566442, 0.95977264, 0.99959503, 0.99999595],
    ]
)

# Rounding of the 8-decimal print.
PRINT_8_DECIMALS = 5e-9


def test_printed_sine_columns_match_float64():
    table = posenc.sinusoidal(10, 8, dtype=np.float64)
    np.testing.assert_allclose(table[:, 0::2], PRINTED_TERM_SIN, rtol=0, atol=PRINT_8_DECIMALS)


def test_printed_sine_columns_match_float32():
    table = posenc.sinusoidal(10, 8)
    assert table.dtype == np.float32
    # float32 rounding (<= 6e-8 for |v| <= 1) plus the print's rounding.
    np.testing.assert_allclose(
        table[:, 0::2], PRINTED_TERM_SIN, rtol=0, atol=6e-8 + PRINT_8_DECIMALS
    )


def test_printed_cosine_is_the_odd_exponent_bug():
    # What the tutorial printed is cos(p / 10000**((2i+1)/8)) (the bug), recomputed here with math.
    buggy = np.array(
        [[math.cos(p / 10000.0 ** ((2 * i + 1) / 8)) for i in range(4)] for p in range(10)]
    )
    # the tutorial's float32 table (<= 6e-8 off for |v| <= 1) printed with 8 decimals (5e-9)
    np.testing.assert_allclose(PRINTED_BUGGY_TERM_COS, buggy, rtol=0, atol=6e-8 + PRINT_8_DECIMALS)
    # ... and posenc's cosine columns are not that: cos(p * 10000**(-2i/8)).
    cos_columns = posenc.sinusoidal(10, 8, dtype=np.float64)[:, 1::2]
    assert np.max(np.abs(cos_columns - PRINTED_BUGGY_TERM_COS)) > 0.5
    correct = np.array(
        [[math.cos(p * 10000.0 ** (-2 * i / 8)) for i in range(4)] for p in range(10)]
    )
    # math's angles: float64 roundings of angles below 10 (4 float64 ulps of the largest + 1)
    assert_close_ulp(cos_columns, correct, ulps=4, scale=10)


# ---------------------------------------------------------------------------------------------
# A tutorial module that handles odd d_model: its printed d_model=11 table, re-typed.
# ---------------------------------------------------------------------------------------------

# Rows 0..4 as printed (torch's 4-decimal scientific format). The print is cut off inside
# row 5: only its first 9 values are complete (the 10th reads "9.9998e-0").
ODD_D_PRINTED_ROWS_0_4 = np.array(
    [
        [0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0],
        [
            8.4147e-01, 5.4030e-01, 1.8629e-01, 9.8250e-01, 3.5105e-02, 9.9938e-01,
            6.5793e-03, 9.9998e-01, 1.2328e-03, 1.0000e00, 2.3101e-04,
        ],
        [
            9.0930e-01, -4.1615e-01, 3.6605e-01, 9.3059e-01, 7.0166e-02, 9.9754e-01,
            1.3158e-02, 9.9991e-01, 2.4657e-03, 1.0000e00, 4.6203e-04,
        ],
        [
            1.4112e-01, -9.8999e-01, 5.3300e-01, 8.4611e-01, 1.0514e-01, 9.9446e-01,
            1.9737e-02, 9.9981e-01, 3.6985e-03, 9.9999e-01, 6.9304e-04,
        ],
        [
            -7.5680e-01, -6.5364e-01, 6.8129e-01, 7.3201e-01, 1.3999e-01, 9.9015e-01,
            2.6314e-02, 9.9965e-01, 4.9314e-03, 9.9999e-01, 9.2405e-04,
        ],
    ]
)  # fmt: skip
ODD_D_PRINTED_ROW_5_PARTIAL = np.array(
    [
        -9.5892e-01, 2.8366e-01, 8.0573e-01, 5.9228e-01, 1.7466e-01, 9.8463e-01,
        3.2891e-02, 9.9946e-01, 6.1642e-03,
    ]
)  # fmt: skip


def test_printed_odd_d_table():
    table = posenc.sinusoidal(6, 11)
    assert table.shape == (6, 11)
    # 5 significant digits printed: half a unit of 1e-4 on values of magnitude <= 1.
    np.testing.assert_allclose(table[:5], ODD_D_PRINTED_ROWS_0_4, rtol=0, atol=5e-5)
    np.testing.assert_allclose(table[5, :9], ODD_D_PRINTED_ROW_5_PARTIAL, rtol=0, atol=5e-5)


def test_odd_d_tutorial_shape_and_column_split():
    # The tutorial's toy batch: x of 7 tokens, d_model=11 -> an encoding of shape (7, 11) with
    # 6 sine columns (ii = 0..5) and 5 cosine columns (div[:d//2]).
    table = posenc.sinusoidal(7, 11, dtype=np.float64)
    assert table.shape == (7, 11)
    assert table[:, 0::2].shape == (7, 6)
    assert table[:, 1::2].shape == (7, 5)
    p = np.arange(7.0)[:, None]
    ii = np.arange(6.0)
    div = 10000.0 ** (2 * ii / 11)  # that tutorial's recipe, in float64
    # the recipe's float64 angles: a few roundings of angles below 7 (4 ulps of 7)
    assert_close_ulp(table[:, 0::2], np.sin(p / div), ulps=4, scale=7)
    assert_close_ulp(table[:, 1::2], np.cos(p / div[:5]), ulps=4, scale=7)


# ---------------------------------------------------------------------------------------------
# Three tutorial recipes, re-typed in NumPy float64.
# ---------------------------------------------------------------------------------------------


#: A recipe re-typed in float64 rounds its frequencies and its angles: its error is float64
#: ulps of the largest angle. ω = base ** (-2k / d) also carries the rounding of its exponent,
#: amplified by ln(base) (up to 7 ulps of ω for base 1e6), hence 8. Measured: at most 1.
RECIPE64_ULPS = 8


def pytorch_tutorial_recipe(seq_len: int, d_model: int) -> np.ndarray:
    """The PyTorch tutorial recipe: div_term = exp(arange(0, d, 2) * -log(1e4)/d)."""
    pe = np.zeros((seq_len, d_model))
    position = np.arange(0, seq_len, dtype=np.float64)[:, None]
    div_term = np.exp(np.arange(0, d_model, 2, dtype=np.float64) * (-math.log(10000.0) / d_model))
    pe[:, 0::2] = np.sin(position * div_term)
    pe[:, 1::2] = np.cos(position * div_term)
    return pe


def stacked_recipe(max_sequence_length: int, d_model: int) -> np.ndarray:
    """A tutorial's recipe: stack sin/cos of position / 10000**(even_i/d), then flatten."""
    even_i = np.arange(0, d_model, 2, dtype=np.float64)
    denominator = np.power(10000.0, even_i / d_model)
    position = np.arange(max_sequence_length, dtype=np.float64).reshape(max_sequence_length, 1)
    even_pe = np.sin(position / denominator)
    odd_pe = np.cos(position / denominator)
    stacked = np.stack([even_pe, odd_pe], axis=2)
    return stacked.reshape(max_sequence_length, -1)  # torch.flatten(start_dim=1, end_dim=2)


def den_recipe(maxlen: int, emb_size: int) -> np.ndarray:
    """A tutorial's recipe: den = exp(-arange(0, d, 2) * log(10000) / d), pos * den."""
    den = np.exp(-np.arange(0, emb_size, 2, dtype=np.float64) * math.log(10000) / emb_size)
    pos = np.arange(0, maxlen, dtype=np.float64).reshape(maxlen, 1)
    pos_embedding = np.zeros((maxlen, emb_size))
    pos_embedding[:, 0::2] = np.sin(pos * den)
    pos_embedding[:, 1::2] = np.cos(pos * den)
    return pos_embedding


TUTORIAL_RECIPES = {
    "pytorch_tutorial": pytorch_tutorial_recipe,
    "stacked": stacked_recipe,
    "den": den_recipe,
}


@pytest.mark.parametrize("recipe", sorted(TUTORIAL_RECIPES))
@pytest.mark.parametrize("d_model", [2, 4, 6, 8, 10, 64, 512])
def test_tutorial_recipes_even_d(recipe, d_model):
    length = 2048
    reference = TUTORIAL_RECIPES[recipe](length, d_model)
    assert reference.shape == (length, d_model)
    table32 = posenc.sinusoidal(length, d_model)
    assert table32.dtype == np.float32
    # One rounding of the float64 value to float32 (half an ulp) plus the recipes' own
    # float64 error (~p * 1e-15, far below a float32 ulp).
    assert_close_ulp(table32, reference, ulps=1)
    table64 = posenc.sinusoidal(length, d_model, dtype=np.float64)
    # The recipes' float64 angles: exp/power round ω by a few ulps, and p·ω rounds again, so
    # ulps of the largest angle (the largest position)
    assert_close_ulp(table64, reference, ulps=RECIPE64_ULPS, scale=length)


def test_stacked_recipe_odd_d_has_one_column_too_many():
    # The stacked recipe has ceil(d/2) sin and ceil(d/2) cos columns: d_model=11 gives 12.
    reference = stacked_recipe(50, 11)
    assert reference.shape == (50, 12)
    table = posenc.sinusoidal(50, 11, dtype=np.float64)
    assert table.shape == (50, 11)
    # posenc keeps the paper's layout and drops the surplus cosine column.
    assert_close_ulp(table, reference[:, :11], ulps=RECIPE64_ULPS, scale=50)


# ---------------------------------------------------------------------------------------------
# tensor2tensor common_attention.get_timing_signal_1d, re-typed in NumPy float64.
# ---------------------------------------------------------------------------------------------


def get_timing_signal_1d(
    length: int,
    channels: int,
    min_timescale: float = 1.0,
    max_timescale: float = 1.0e4,
    start_index: int = 0,
) -> np.ndarray:
    """tensor2tensor's timing signal (TF ops replaced by their NumPy float64 equivalents)."""
    position = np.arange(length, dtype=np.float64) + start_index
    num_timescales = channels // 2
    log_timescale_increment = math.log(float(max_timescale) / float(min_timescale)) / max(
        float(num_timescales) - 1, 1.0
    )
    inv_timescales = min_timescale * np.exp(
        np.arange(num_timescales, dtype=np.float64) * -log_timescale_increment
    )
    scaled_time = position[:, None] * inv_timescales[None, :]
    signal = np.concatenate([np.sin(scaled_time), np.cos(scaled_time)], axis=1)
    return np.pad(signal, [[0, 0], [0, channels % 2]])


@pytest.mark.parametrize("base", [10000.0, 500.0, 2.0, 1.0e6])
@pytest.mark.parametrize("d_model", [1, 2, 3, 4, 5, 8, 11, 512])
def test_tensor2tensor_timing_signal(d_model, base):
    length = 1000
    reference = get_timing_signal_1d(length, d_model, max_timescale=base)
    assert reference.shape == (length, d_model)
    table64 = posenc.sinusoidal(
        length, d_model, base=base, convention="tensor2tensor", dtype=np.float64
    )
    assert_close_ulp(table64, reference, ulps=RECIPE64_ULPS, scale=length)  # as above
    table32 = posenc.sinusoidal(length, d_model, base=base, convention="tensor2tensor")
    assert_close_ulp(table32, reference, ulps=1)  # rounded once to float32
    if d_model % 2:
        assert np.all(table32[:, -1] == 0)


@pytest.mark.parametrize(("d_model", "start_index"), [(8, 17), (11, 4096), (512, 123456)])
def test_tensor2tensor_timing_signal_start_index(d_model, start_index):
    length = 64
    reference = get_timing_signal_1d(length, d_model, start_index=start_index)
    positions = np.arange(length) + start_index
    table = posenc.sinusoidal(positions, d_model, convention="tensor2tensor")
    assert_close_ulp(table, reference, ulps=1)  # rounded once to float32
    # Not the same as starting at 0 (the offset is really applied).
    assert np.max(np.abs(table - get_timing_signal_1d(length, d_model))) > 0.1


# ---------------------------------------------------------------------------------------------
# Property: every element equals the per-element formula evaluated with Python's math module.
# ---------------------------------------------------------------------------------------------


def math_element(p: int, col: int, d: int, base: float, convention: str) -> float:
    """PE[p, col] of ``convention`` from its written definition, one element at a time."""
    if convention == "paper":  # [s0, c0, s1, c1, ...], w_k = base^(-2k/d)
        k = col // 2
        angle = p * base ** (-(2 * k) / d)
        return math.sin(angle) if col % 2 == 0 else math.cos(angle)
    if convention == "tensor2tensor":  # [s_0..s_{h-1} | c_0..c_{h-1} | 0], w_k = base^(-k/(h-1))
        h = d // 2
        if col >= 2 * h:
            return 0.0
        k = col if col < h else col - h
        angle = p * base ** (-k / max(h - 1, 1))
        return math.sin(angle) if col < h else math.cos(angle)
    if convention == "marian":  # [s_0..s_{ceil(d/2)-1} | c_0..c_{d//2-1}], w_k = base^(-2k/d)
        n_sin = (d + 1) // 2
        k = col if col < n_sin else col - n_sin
        angle = p * base ** (-(2 * k) / d)
        return math.sin(angle) if col < n_sin else math.cos(angle)
    if convention == "musicgen":  # [c_0..c_{h-1} | s_0..s_{h-1} | 0], w_k = base^(-k/(h-1))
        h = d // 2
        if col >= 2 * h:
            return 0.0
        k = col if col < h else col - h
        angle = p * base ** (-k / max(h - 1, 1))
        return math.cos(angle) if col < h else math.sin(angle)
    raise AssertionError(convention)


@settings(max_examples=60, deadline=None)
@given(
    d=st.integers(1, 64),
    base=st.floats(2.0, 1.0e6),
    positions=st.lists(st.integers(-(10**6), 10**6), min_size=1, max_size=6),
)
def test_every_element_matches_math_formula(d, base, positions):
    for convention in ("paper", "tensor2tensor", "marian", "musicgen"):
        table = posenc.sinusoidal(positions, d, base=base, convention=convention, dtype=np.float64)
        assert table.shape == (len(positions), d)
        assert table.dtype == np.float64
        expected = np.array(
            [[math_element(p, c, d, base, convention) for c in range(d)] for p in positions]
        )
        # math's float64 ω (a power) and p·ω: a few roundings of angles up to max|p|
        scale = max(abs(p) for p in positions) + 1
        assert_close_ulp(table, expected, ulps=RECIPE64_ULPS, scale=scale, what=convention)
