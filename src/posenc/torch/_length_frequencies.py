"""Frequencies that change with the sequence length, inside ``torch.compile`` graphs.

``dynamic`` scaling (dynamic NTK) gives every length past the original one frequencies of its
own, computed by the NumPy core in float64. Dynamo cannot trace that code, so a traced call
reaches it through the custom operator ``posenc::length_frequencies``: one opaque node whose
body, run when the graph runs, is the eager computation itself. The graph holds that one node
whatever the length (``dynamic=True`` included, where the length is symbolic), and its
frequencies equal an eager call's bit for bit.

The operator takes the module's recipe as text (:func:`recipe_text`: the pickled recipe, made
once when the module is built) and the length; the recipe is read back once per process.
"""

from __future__ import annotations

import base64
import functools
import pickle
from typing import Protocol

import torch

__all__ = ["LengthRecipe", "length_frequencies", "recipe_text"]


class LengthRecipe(Protocol):
    """What the operator runs: a picklable recipe of float64 frequencies by length."""

    def frequency_table(self, seq_len: int | None) -> torch.Tensor:
        """The float64 CPU frequencies for ``seq_len`` (None: the length-free ones)."""
        ...


def recipe_text(recipe: LengthRecipe) -> str:
    """``recipe`` as the operator's text argument."""
    return base64.b64encode(pickle.dumps(recipe)).decode("ascii")


@functools.lru_cache(maxsize=64)
def _recipe(text: str) -> LengthRecipe:
    recipe: LengthRecipe = pickle.loads(base64.b64decode(text))  # our own text (recipe_text)
    return recipe


@functools.lru_cache(maxsize=64)
def _shape(text: str) -> tuple[int, ...]:
    return tuple(_recipe(text).frequency_table(None).shape)


@torch.library.custom_op("posenc::length_frequencies", mutates_args=())
def _length_frequencies(recipe: str, seq_len: int) -> torch.Tensor:
    return _recipe(recipe).frequency_table(seq_len).clone()  # an operator returns new tensors


@_length_frequencies.register_fake
def _(recipe: str, seq_len: int) -> torch.Tensor:
    return torch.empty(_shape(recipe), dtype=torch.float64)


def length_frequencies(recipe: str, seq_len: int | torch.SymInt) -> torch.Tensor:
    """The float64 CPU frequencies of ``recipe`` (:func:`recipe_text`) for ``seq_len``: the
    NumPy core's, in eager calls and in compiled graphs alike (errors are the core's)."""
    table: torch.Tensor = torch.ops.posenc.length_frequencies(recipe, seq_len)
    return table
