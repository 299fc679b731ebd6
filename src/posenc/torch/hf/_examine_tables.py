"""Absolute sinusoidal tables: recognised by their values and their call, verified, replaced.

A module holding a fixed 2-D table (a buffer, or a parameter that is not trained) whose row
``r`` is posenc's encoding of position ``r`` in one of its conventions (``musicgen`` is
tensor2tensor's ``[cos | sin]``), or Marian's with the two halves swapped, is a candidate; a
row of zeros (the padding row of the fairseq family) is allowed. How the module is called
decides which rows it returns; four calls are recognised, each verified by calling the module
on probe inputs (the cache length is passed by the name the module's ``forward`` gives it:
``past_key_values_length`` up to transformers 5.23, ``cache_length`` from 5.24 on):

    by shape    module((b, s), past=0, position_ids=None) → (s, d)     rows past .. past+s-1
    by tokens   module(input_ids, past_key_values_length=0) → (b, s, d)  fairseq numbering,
                zero at padding tokens
    by ids      module(position_ids[, ignored]) → (*P, d)             rows position_ids + k
    by length   module(input_ids (b, k, s), past=0) → (s, d)           rows past .. past+s-1
                module(inputs_embeds (b, s, d), past=0) → (s, d)       (MusicGen-Melody)

A module with no table that computes one on the fly from its input is recognised by its
output (:func:`examine_computed`):

    by embeds   module(inputs_embeds (b, s, d), past=0, position_ids=None) → (b, s, d)
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from ..._sinusoidal import sinusoidal as numpy_sinusoidal
from .._sinusoidal import SinusoidalPositionalEncoding
from ._absolute import (
    M2M100Positions,
    MarianPositions,
    WhisperEncoderPositions,
    cache_length_of,
    factory_of,
    fairseq_positions,
)
from ._examine_rotary import largest_difference
from ._probe import forward_parameters, probing, signature_text
from ._report import Replaced
from ._rotary import LlamaRotary

__all__ = ["TableRows", "examine_computed", "examine_table", "rotary_of_table"]

_CONVENTIONS = ("paper", "tensor2tensor", "musicgen", "marian")
_ROWS_COMPARED = 2048  # the first rows, and the last 16, are compared with posenc's


def _flipped(table: np.ndarray) -> np.ndarray:
    """``[sin | cos]`` → ``[cos | sin]`` (even widths)."""
    half = table.shape[-1] // 2
    return np.concatenate([table[..., half:], table[..., :half]], axis=-1)


def _rows(count: int) -> np.ndarray:
    head = np.arange(min(count, _ROWS_COMPARED))
    return np.unique(np.concatenate([head, np.arange(max(count - 16, 0), count)]))


def match_table(table: torch.Tensor) -> tuple[str, bool, int | None] | str:
    """``(convention, cos_first, zero_row)`` of a table whose row r is position r, or why not."""
    count, d = table.shape
    rows = _rows(count)
    theirs = table.detach()[torch.from_numpy(rows).to(table.device)].cpu().double().numpy()
    zero = np.flatnonzero(~theirs.any(axis=1))
    if zero.size > 1:
        return f"{zero.size} rows are all zero; a sinusoidal table has at most one (padding)"
    keep = np.ones(rows.size, dtype=bool)
    keep[zero] = False
    atol = 1e-6 + 2e-7 * count + float(torch.finfo(table.dtype).eps)
    best = (np.inf, "")
    for convention in _CONVENTIONS:
        ours = numpy_sinusoidal(rows, d, convention=convention, dtype=np.float64)  # type: ignore[arg-type]
        for cos_first in (False, True) if d % 2 == 0 and convention == "marian" else (False,):
            candidate = _flipped(ours) if cos_first else ours
            error = np.abs(theirs - candidate)[keep]
            worst = float(error.max()) if error.size else 0.0
            if worst <= atol:
                return convention, cos_first, None if not zero.size else int(rows[zero[0]])
            if worst < best[0]:
                row, channel = np.unravel_index(int(error.argmax()), error.shape)
                name = convention + (", cos first" if cos_first else "")
                best = (
                    worst,
                    f"closest: {name!r}, off by {worst:.2g} at row "
                    f"{int(rows[keep][row])}, channel {int(channel)}",
                )
    return f"its table matches no sinusoidal convention ({best[1]})"


_ROTARY_ROWS = 32  # fewer positions than this in a rotary module's table: not verified


def rotary_of_table(table: torch.Tensor) -> tuple[LlamaRotary | str, int]:
    """``(posenc's rotary module, rows)`` for a rotary module that reads its RoPE tables from
    a fixed ``[sin | cos]`` table (GPT-J's and CodeGen's ``embed_positions`` from
    transformers 5.24 on): ``table`` must be posenc's ``marian`` table of width ``r``, whose
    frequencies are RoPE's ω_k = base^(-2k/r) with base 10000; else the reason instead."""
    rows, width = table.shape
    if table.device.type == "meta":
        return "its table is on the meta device: nothing to verify", rows
    if rows < _ROTARY_ROWS or width % 2:
        return f"its table ({rows} x {width}) is too small or odd to verify as RoPE's", rows
    match = match_table(table)
    if isinstance(match, str):
        return match, rows
    if match[0] != "marian" or match[2] is not None:
        name = match[0] + (", cos first" if match[1] else "")
        return f"its table is the {name!r} table, not RoPE's frequencies", rows
    return LlamaRotary(width, base=10000.0), rows


class TableRows(nn.Module):
    """Rows of a sinusoidal table, read the way the module it replaces reads its own.

    Built by :func:`posenc.torch.hf.swap_positions` for tables that the public drop-ins do not
    cover: read at ``position_ids + offset``, or at ``past .. past + s - 1`` for an input whose
    last dimension is ``s``, or laid out ``[cos | sin]``.

    Args:
        embedding_dim: ``d``, the table's width.
        convention: the posenc convention of the rows (``"tensor2tensor"``...).
        cos_first: the two halves swapped, ``[cos | sin]``.
        rule: ``"ids"``: ``forward(position_ids, *ignored)`` → ``(*P, d)``;
            ``"tokens"``: ``forward(input_ids, past_key_values_length=0)`` → ``(b, s, d)`` at
            the fairseq numbering plus ``past`` (padding tokens included, as FSMT does);
            ``"length"``: ``forward(input_ids, past_key_values_length=0)`` → ``(s, d)``;
            ``"embeds_length"``: ``forward(inputs_embeds (b, s, d),
            past_key_values_length=0)`` → ``(s, d)`` (MusicGen-Melody);
            ``"embeds"``: ``forward(inputs_embeds, past_key_values_length=0,
            position_ids=None)`` → ``(b, s, d)`` in ``inputs_embeds``'s dtype (Pegasus-X);
            the cache length may be passed as ``cache_length`` instead.
        offset: added to ``position_ids`` (``"ids"``).
        zero_row: the position whose row is zero (the padding row), or None.
        num_positions, device, dtype: rows to precompute (not a limit), where and in which
            dtype the table lives.
    """

    def __init__(
        self,
        embedding_dim: int,
        *,
        convention: Any,
        cos_first: bool,
        rule: str,
        offset: int = 0,
        zero_row: int | None = None,
        num_positions: int | None = None,
        device: Any = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.convention, self.cos_first, self.rule = convention, cos_first, rule
        self.offset, self.zero_row = offset, zero_row
        self.sinusoidal = SinusoidalPositionalEncoding(
            embedding_dim, convention=convention, max_len=num_positions, device=device, dtype=dtype
        )

    def forward(
        self,
        first: torch.Tensor,
        *rest: Any,
        past_key_values_length: Any = 0,
        cache_length: Any = None,
        position_ids: Any = None,
    ) -> Any:
        """The rows the replaced module returned for the same call."""
        past = rest[0] if rest else cache_length_of(past_key_values_length, cache_length)[1]
        positions = self._positions(first, past, rest[1:2] or (position_ids,))
        if self.rule == "embeds":  # in the embeddings' dtype and on their device, as Pegasus-X
            rows = self.sinusoidal.encoding(positions, dtype=first.dtype, device=first.device)
        else:
            rows = self.sinusoidal.encoding(positions)
        if self.cos_first:
            half = rows.shape[-1] // 2
            rows = torch.cat([rows[..., half:], rows[..., :half]], dim=-1)
        if self.zero_row is not None:
            rows = rows.masked_fill(positions.eq(self.zero_row).unsqueeze(-1), 0.0)
        if self.rule == "embeds":  # (b, s, d)
            return rows[None].expand(first.shape[0], -1, -1)
        return rows

    def _positions(self, first: torch.Tensor, past: Any, given: tuple[Any]) -> torch.Tensor:
        """The positions whose rows the call asks for, by :attr:`rule`."""
        if self.rule == "ids":
            return first.to(torch.int64) + self.offset
        if self.rule == "tokens":
            numbered: torch.Tensor = fairseq_positions(first, self.zero_row or 0) + past
            return numbered
        if self.rule == "embeds":
            ids: torch.Tensor = self._embeds_positions(first, past, given)
            return ids
        length = self._embeds_length(first) if self.rule == "embeds_length" else first.shape[-1]
        steps: torch.Tensor = torch.arange(length, device=first.device) + past
        return steps

    def _embeds_length(self, embeds: Any) -> int:
        """``s`` of ``inputs_embeds`` ``(b, s, d)``, checked."""
        d = self.sinusoidal.d_model
        if not isinstance(embeds, torch.Tensor) or embeds.dim() != 3 or embeds.shape[-1] != d:
            got = tuple(embeds.shape) if isinstance(embeds, torch.Tensor) else type(embeds).__name__
            raise ValueError(f"inputs_embeds must have shape (b, s, {d}), got {got}")
        return int(embeds.shape[1])

    @staticmethod
    def _embeds_positions(embeds: torch.Tensor, past: Any, given: tuple[Any]) -> torch.Tensor:
        """Positions of ``embeds`` ``(b, s, d)``: the given ``position_ids`` (``(s, 1)`` in
        Pegasus-X's decoder, one per token), else ``past .. past + s - 1``."""
        if given[0] is None:
            steps: torch.Tensor = torch.arange(embeds.shape[1], device=embeds.device) + past
            return steps
        ids: torch.Tensor = given[0]
        if not isinstance(ids, torch.Tensor) or ids.numel() != embeds.shape[1]:
            shape = tuple(ids.shape) if isinstance(ids, torch.Tensor) else type(ids).__name__
            raise ValueError(
                f"position_ids must hold one position per token of inputs_embeds "
                f"({embeds.shape[1]}), got {shape}"
            )
        return ids.reshape(-1).to(torch.int64)

    def extra_repr(self) -> str:
        layout = f"{self.convention!r}" + (", cos first" if self.cos_first else "")
        return f"{self.sinusoidal.d_model}, convention={layout}, rule={self.rule!r}, " + (
            f"offset={self.offset}, zero_row={self.zero_row}"
        )


# -- the calls ------------------------------------------------------------------------------------


def _forms(
    module: nn.Module, table: torch.Tensor, match: tuple[str, bool, int | None]
) -> list[tuple[str, nn.Module, list[tuple[Any, ...]]]]:
    """``(what it reads, replacement, probe calls)`` for each call form the table allows."""
    convention, cos_first, zero = match
    count, d = table.shape
    device, plain = table.device, not cos_first and zero is None
    forms: list[tuple[str, nn.Module, list[tuple[Any, ...]]]] = []
    if convention == "marian" and plain:
        ids = torch.tensor([[4, 9, 2]], device=device)
        calls: list[tuple[Any, ...]] = [(torch.Size([2, 5]),), (torch.Size([1, 3]), 7)]
        calls.append((torch.Size([1, 3]), 0, ids))
        new: nn.Module = MarianPositions(d, num_positions=count, **factory_of(table))
        forms.append(("rows past .. past+s-1 of (b, s)", new, calls))
    if convention == "tensor2tensor" and not cos_first and zero is not None and count > zero + 8:
        pad, n = zero, count - zero - 1
        ids = torch.tensor([[pad, pad, 7, 8, 9], [5, 6, 7, 8, pad]], device=device) % count
        new = M2M100Positions(d, pad, num_positions=n, **factory_of(table))
        calls = [(ids,), (ids, {_cache_keyword(module): 2})]
        forms.append((f"fairseq numbering of token ids (padding {pad})", new, calls))
        new = TableRows(
            d,
            convention=convention,
            cos_first=False,
            rule="tokens",
            zero_row=pad,
            num_positions=count,
            **factory_of(table),
        )
        forms.append((f"fairseq numbering of token ids + past (padding {pad})", new, calls))
    two = len([p for p in _positional(module)]) >= 2
    for k in sorted({0, 1, 2, *(() if zero is None else (zero + 1,))}):
        ids = torch.tensor([[0, 3, 1, 7], [2, 2, 5, 0]], device=device)
        if convention == "tensor2tensor" and plain and k == 0:
            new = WhisperEncoderPositions(count, d, **factory_of(table))
        else:
            new = TableRows(
                d,
                convention=convention,
                cos_first=cos_first,
                rule="ids",
                offset=k,
                zero_row=zero,
                num_positions=count,
                **factory_of(table),
            )
        forms.append((f"rows position_ids + {k}", new, [(ids,), *([(ids, 3)] if two else [])]))
    three = torch.zeros(2, 2, 5, dtype=torch.int64, device=device)
    new = TableRows(
        d,
        convention=convention,
        cos_first=cos_first,
        rule="length",
        zero_row=zero,
        num_positions=count,
        **factory_of(table),
    )
    forms.append(("rows past .. past+s-1 of (b, k, s)", new, [(three,), (three, 4)]))
    embeds = torch.zeros(2, 5, d, dtype=table.dtype, device=device)
    new = TableRows(
        d,
        convention=convention,
        cos_first=cos_first,
        rule="embeds_length",
        zero_row=zero,
        num_positions=count,
        **factory_of(table),
    )
    calls = [(embeds,), (embeds[:1, :3], 4)]
    forms.append(("rows past .. past+s-1 of inputs_embeds (b, s, d)", new, calls))
    return forms


def _cache_keyword(module: nn.Module) -> str:
    """The name ``module``'s ``forward`` gives the cache length (transformers 5.24 renamed
    ``past_key_values_length`` to ``cache_length``)."""
    names = [p.name for p in forward_parameters(module) or ()]
    return "cache_length" if "cache_length" in names else "past_key_values_length"


def _positional(module: nn.Module) -> list[str]:
    return [p.name for p in forward_parameters(module) or () if p.kind <= 1]


def _call(function: Any, args: tuple[Any, ...]) -> Any:
    if args and isinstance(args[-1], dict):
        return function(*args[:-1], **args[-1])
    return function(*args)


def _same(module: nn.Module, new: nn.Module, calls: list[tuple[Any, ...]], atol: float) -> bool:
    with probing(module) as call:
        for args in calls:
            try:
                theirs = _call(call, args)
            except Exception:  # a foreign module refusing a probe: not this form
                return False
            try:
                ours = _call(new, args)
            except (TypeError, ValueError):  # a call posenc's module does not take
                return False
            if not isinstance(theirs, torch.Tensor) or theirs.shape != ours.shape:
                return False
            if largest_difference(theirs, ours, torch.tensor(atol)).ratio > 1.0:
                return False
    return True


def examine_table(
    module: nn.Module, attribute: str, table: torch.Tensor, *, trainable: bool, tabular: bool
) -> Any:
    """``(record, replacement)`` or the reason the table stays, for a module whose own 2-D
    ``table`` (its ``attribute``) the swap found worth examining (``trainable``: a parameter
    that is trained; ``tabular``: values that look like a sinusoidal table)."""
    learned = f"learned table (trainable parameter {attribute!r}, not a sinusoidal table)"
    if table.device.type == "meta":
        return "its table is on the meta device: nothing to verify"
    if trainable and not tabular:
        return learned
    match = match_table(table)
    if isinstance(match, str):
        return learned if trainable else match
    atol = 1e-6 + 2e-7 * table.shape[0] + float(torch.finfo(table.dtype).eps)
    name = match[0] + (", cos first" if match[1] else "")
    for reads, new, calls in _forms(module, table, match):
        if _same(module, new, calls, atol):
            reads += f" (a trainable {attribute!r} holding the table)" if trainable else ""
            return Replaced("", "absolute", name, reads, type(new).__name__), new
    return (
        f"its {attribute!r} is the {name!r} table, but its call is not understood: "
        f"{signature_text(module)}"
    )


_WIDTHS = ("embed_dim", "embedding_dim", "d_model")
_COMPUTED_ROWS = 64


def examine_computed(module: nn.Module) -> tuple[Replaced, nn.Module] | str | None:
    """``(record, replacement)`` for a parameter-free ``module`` that computes a sinusoidal
    table on the fly from ``inputs_embeds`` (Pegasus-X), the reason it stays, or None when
    its output is no table (it is not called so, or has no ``embed_dim``)."""
    d = next((getattr(module, k) for k in _WIDTHS if type(getattr(module, k, None)) is int), 0)
    if d < 2 or not _positional(module):
        return None
    try:
        with probing(module) as call:
            output = call(torch.zeros(1, _COMPUTED_ROWS, d))
    except Exception:  # not called with an embeddings tensor
        return None
    if not isinstance(output, torch.Tensor) or output.shape != (1, _COMPUTED_ROWS, d):
        return None
    match = match_table(output[0])
    if isinstance(match, str) or match[2] is not None:
        return None
    convention, cos_first, _ = match
    name = convention + (", cos first" if cos_first else "")
    new = TableRows(d, convention=convention, cos_first=cos_first, rule="embeds")
    embeds = torch.zeros(2, 5, d)
    calls: list[tuple[Any, ...]] = [(embeds,), (embeds[:1, :3], 7)]
    if "position_ids" in [p.name for p in forward_parameters(module) or ()]:
        calls.append((embeds[:1, :3], 0, (torch.arange(3) + 4)[:, None]))
    atol = 1e-6 + 2e-7 * _COMPUTED_ROWS + float(torch.finfo(output.dtype).eps)
    if _same(module, new, calls, atol):
        reads = "rows past .. past+s-1 of inputs_embeds (b, s, d), computed on the fly"
        return Replaced("", "absolute", name, reads, type(new).__name__), new
    return (
        f"it computes the {name!r} table on the fly, but its call is not understood: "
        f"{signature_text(module)}"
    )
