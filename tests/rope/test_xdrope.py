"""HunYuan-VL's XD-RoPE helpers: the axes of its sections, and the doubled-table split that
transformers uses, in words and channel by channel."""

from __future__ import annotations

import numpy as np
import pytest

from posenc._rope.xdrope import DOUBLED_SPLIT, axis_names, doubled_split_axes, doubled_split_note


def test_axis_names_put_the_sequence_axes_first() -> None:
    assert axis_names(3, "s") == ("width", "height", "image_index")
    assert axis_names(5, "s") == ("position0", "position1", "width", "height", "image_index")
    with pytest.raises(ValueError, match=r"mrope_section must give at least 3 sections"):
        axis_names(2, "mrope_section")


def test_the_doubled_split_gives_each_axis_a_block_of_twice_its_pairs() -> None:
    axes = doubled_split_axes([16, 16, 16, 16])
    assert axes.shape == (128,)
    assert [int(np.sum(axes == a)) for a in range(4)] == [32] * 4
    # pair k is (k, k + 64): (position, height) for k < 32, (width, image_index) after
    assert set(zip(axes[:64].tolist(), axes[64:].tolist(), strict=True)) == {(0, 2), (1, 3)}


def test_the_note_names_the_mixed_axes_and_is_empty_for_one_axis() -> None:
    note = doubled_split_note([16] * 4, axis_names(4, "s"))
    assert note.startswith(DOUBLED_SPLIT)
    assert "pairs 0-31 turns with position and channel k + 64 with height" in note
    assert "pairs 32-63: width and image_index" in note
    assert doubled_split_note([8], ["position"]) == ""
