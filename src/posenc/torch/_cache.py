"""The one table-cache policy of the PyTorch modules.

A module that keeps a table (``SinusoidalPositionalEncoding``, ``RotaryEmbedding``,
``SinusoidalGridEncoding``) derives from :class:`CachedTables` and supplies one function,
``_compute_rows(key, start, stop, dtype, device)``, that computes rows of its table from
float64. Everything else is decided here, once:

- **Snapshot.** The cached tables, their ``key`` (what else selects the table: a RoPE factor
  set, a grid) and any tensors derived from them live in one immutable :class:`Snapshot`,
  replaced by a single assignment. A call reads the snapshot once and uses only that: several
  threads on one module never mix one call's table with another's, so concurrent calls give
  the results of the same calls made one at a time.
- **Growth.** Rows ``start .. stop-1`` come from the snapshot when it holds them. A request
  that starts inside the cache and runs past it rebuilds it with ``max(stop, 2 n)`` rows
  (amortised geometric growth: at most twice the longest contiguous range ever requested).
  A request starting past the cache (a far jump in ``offset``) is computed on the fly and
  leaves the cache alone: nothing proportional to a length never asked for.
- **dtype and device.** ``adopt=True`` (``forward``: the cache follows its input) rebuilds the
  table from float64 in the new dtype/device; ``adopt=False`` (``encoding()`` with another
  dtype) computes on the fly. ``.to()``, ``.half()``, ``.cuda()`` and ``to_empty()`` rebuild
  the table from float64 where the cast put it (``Tensor.to`` would round twice, or leave it
  uninitialised), keeping its rows and key.
- **Buffers.** The tables are also registered as non-persistent buffers (``module.pe``,
  ``module.cos_cached``, ...): visible to ``.to()`` and ``buffers()``, never in
  ``state_dict`` (checkpoints stay small and load whatever ``max_len`` was used).
- **torch.compile.** Traced code never reads or replaces the cache: it computes its rows from
  the plain formula, so graphs carry no guard on the cache and a cache rebuilt by eager calls
  causes no recompilation; ``fullgraph=True`` and ``dynamic=True`` trace across lengths.
- **meta.** On the meta device tables are shaped but never computed; ``to_empty`` then builds
  them for real.
"""

from __future__ import annotations

from typing import Any, ClassVar, NamedTuple

import torch
from torch import nn

__all__ = ["CachedTables", "Snapshot"]


class Snapshot(NamedTuple):
    """Cached tables (rows ``0 .. rows-1``), the key they were built for, and tensors derived
    from them on first use (``derived``: e.g. RoPE phasors; per snapshot, so never stale)."""

    tables: tuple[torch.Tensor, ...]
    key: Any
    derived: dict[str, torch.Tensor]

    @property
    def rows(self) -> int:
        return self.tables[0].shape[0]

    def serves(self, key: Any, dtype: torch.dtype, device: torch.device) -> bool:
        first = self.tables[0]
        return self.key == key and first.dtype == dtype and first.device == device


class CachedTables(nn.Module):
    """Base class of the modules that keep a table: the policy of the module docstring.

    Subclasses set ``_table_names`` (the buffer names, one per table), call
    :meth:`_init_tables` in ``__init__`` and implement :meth:`_compute_rows`; they read rows
    with :meth:`_cached_rows`.
    """

    _table_names: ClassVar[tuple[str, ...]]
    _snapshot: Snapshot
    _tables_dtype: torch.dtype
    _tables_device: torch.device

    def _compute_rows(
        self, key: Any, start: int, stop: int, dtype: torch.dtype, device: torch.device
    ) -> tuple[torch.Tensor, ...]:
        """Rows ``start .. stop-1`` of the tables for ``key``, from float64 (no checks)."""
        raise NotImplementedError

    def _cache_dtype(self, dtype: torch.dtype) -> torch.dtype:
        """The dtype the tables are kept in for inputs of ``dtype`` (default: the same)."""
        return dtype

    def _init_tables(self, rows: int, dtype: torch.dtype, device: torch.device, key: Any) -> None:
        snapshot = self._build(key, rows, dtype, device)
        for name, table in zip(self._table_names, snapshot.tables, strict=True):
            self.register_buffer(name, table, persistent=False)
        self._install(snapshot)

    def _build(self, key: Any, rows: int, dtype: torch.dtype, device: torch.device) -> Snapshot:
        with torch.inference_mode(False), torch.no_grad():
            tables = self._compute_rows(key, 0, rows, dtype, device)  # on meta: shapes only
        return Snapshot(tables, key, {})

    def _install(self, snapshot: Snapshot) -> Snapshot:
        self._snapshot = snapshot  # one assignment: a reader sees the old or the new snapshot
        # Plain attributes, for defaults read by traced code: a guard on a dtype/device value,
        # never on the cached tensor (whose size changes with eager calls).
        self._tables_dtype = snapshot.tables[0].dtype
        self._tables_device = snapshot.tables[0].device
        for name, table in zip(self._table_names, snapshot.tables, strict=True):
            self._buffers[name] = table  # mirrors, for .to() and buffers()
        return snapshot

    def _cached_rows(
        self,
        start: int,
        stop: int,
        dtype: torch.dtype,
        device: torch.device,
        *,
        key: Any = 0,
        adopt: bool = True,
    ) -> tuple[tuple[torch.Tensor, ...], Snapshot | None]:
        """Rows ``start .. stop-1`` of the tables in ``dtype`` on ``device``, and the snapshot
        they were sliced from (None when they were computed on the fly)."""
        if torch.compiler.is_compiling():
            return self._compute_rows(key, start, stop, dtype, device), None
        snapshot = self._snapshot  # read once
        same = snapshot.serves(key, dtype, device)
        if not (same and stop <= snapshot.rows) and (same or adopt) and start <= snapshot.rows:
            rows = max(stop, 2 * snapshot.rows if same else snapshot.rows)
            snapshot = self._install(self._build(key, rows, dtype, device))
        elif not same or stop > snapshot.rows:
            return self._compute_rows(key, start, stop, dtype, device), None
        return tuple(t[start:stop] for t in snapshot.tables), snapshot

    def _apply(self, fn: Any, recurse: bool = True) -> CachedTables:
        # nn.Module casts (.to, .half, .cuda, to_empty, ...) would round the tables twice or
        # leave them uninitialised; rebuild them from float64 where the cast put them instead.
        before = self._buffers[self._table_names[0]]
        super()._apply(fn, recurse)  # type: ignore[no-untyped-call]
        after = self._buffers[self._table_names[0]]
        if after is not None and after is not before:  # in-place ops keep theirs
            dtype = self._cache_dtype(after.dtype)
            self._install(self._build(self._snapshot.key, after.shape[0], dtype, after.device))
        return self
