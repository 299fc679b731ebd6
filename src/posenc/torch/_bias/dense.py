"""Dense attention biases ``(heads, q, k)`` as tensors, and the buckets in transformers' steps.

The values come from the float64 NumPy core (``posenc.alibi_bias`` ...) and are rounded once
to ``dtype`` (bfloat16 included); a framework convention keeps its own rounding and is then
cast as the framework casts it (float32 to ``dtype``).

The buckets under ``convention="transformers"`` run transformers' float32 steps with
``torch.log`` itself, so they are integer-equal to ``_relative_position_bucket`` /
``make_log_bucket_position`` wherever that function runs, bit for bit.

>>> import torch
>>> alibi_bias(2, [3], 4, dtype=torch.bfloat16)[0]
tensor([[-0.1875, -0.1250, -0.0625,  0.0000]], dtype=torch.bfloat16)
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from ..._bias import alibi as core_alibi
from ..._bias import buckets as core_buckets
from ..._bias.distance import KerpleKind
from ..._bias.distance import kerple_bias as core_kerple
from ..._bias.distance import sandwich_bias as core_sandwich
from ..._bias.positions import as_positions, cast_in_blocks, check_count, check_fits, check_pairs
from ..._bias.positions import position_count as core_position_count
from .._checks import as_device, check_dtype
from .._kernels._cast import cast_exact

__all__ = [
    "alibi_bias",
    "deberta_buckets",
    "kerple_bias",
    "position_tensor",
    "sandwich_bias",
    "t5_buckets",
    "transformers_deberta_buckets",
    "transformers_t5_buckets",
]


def position_tensor(name: str, value: Any, device: Any) -> torch.Tensor:
    """``value`` (an int ``L``, 1-D integer positions, or a 1-D integer tensor) as an int64
    tensor on ``device``; a tensor stays where it is, which must be ``device`` (refused by
    name otherwise: the bias is built there)."""
    if not isinstance(value, torch.Tensor):
        return torch.from_numpy(as_positions(name, value)).to(device)
    if value.ndim != 1 or value.dtype.is_floating_point or value.dtype.is_complex:
        raise TypeError(
            f"{name} must be a 1-D integer tensor, got {value.dtype} {tuple(value.shape)}"
        )
    if value.dtype == torch.bool:
        raise TypeError(f"{name} must be a 1-D integer tensor, got torch.bool")
    if device is not None and not same_device(value.device, torch.device(device)):
        raise ValueError(
            f"{name} is on {value.device}, but the bias is built on {device}: move the "
            f"positions there ({name}.to({str(device)!r}))"
        )
    if value.device.type == "cpu" and not torch.compiler.is_compiling():
        as_positions(name, value.detach().numpy())  # data checks: no sync on the CPU
    return value.to(torch.int64)


def same_device(first: torch.device, second: torch.device) -> bool:
    """Whether two devices are one (``cuda`` and ``cuda:0`` are, where the index is left
    out)."""
    if first.type != second.type:
        return False
    return first.index is None or second.index is None or first.index == second.index


def _tensor(values: np.ndarray, dtype: Any, device: Any, exact: bool) -> torch.Tensor:
    """A float64 (``exact``) or framework-rounded NumPy result as a ``dtype`` tensor."""
    out = check_dtype("dtype", dtype)
    check_fits(values, float(torch.finfo(out).max), str(out).removeprefix("torch."))
    table = torch.from_numpy(np.ascontiguousarray(values)).to(device=device)
    return cast_exact(table, out) if exact else table.to(out)


def alibi_bias(
    heads: int,
    query_positions: Any,
    key_positions: Any,
    *,
    form: core_alibi.AlibiForm = "distance",
    max_bias: float = 8.0,
    shard: tuple[int, int] | None = None,
    convention: core_alibi.AlibiConvention = "exact",
    total_heads: int | None = None,
    dtype: torch.dtype = torch.float32,
    device: Any = None,
) -> torch.Tensor:
    """:func:`posenc.alibi_bias` as a ``(heads, q, k)`` tensor in ``dtype`` on ``device``.

    ``total_heads``: ALiBi on the first ``heads`` of ``total_heads`` attention heads (the
    slopes of a ``heads``-head model), zeros on the others: ``(total_heads, q, k)``, as
    x-transformers' ``AlibiPositionalBias(heads, total_heads)``; default ``heads``. Not with
    ``shard``.

    ``"exact"`` rounds the float64 bias once to ``dtype``; ``"bloom"``/``"mpt"`` give their
    float32 values cast to ``dtype`` as ``build_alibi_tensor(..., dtype)`` casts them;
    ``"falcon"`` gives bfloat16 values (exact in any of the four dtypes). ``"bloom"`` and
    ``"falcon"`` raise the slopes with ``torch.pow`` as transformers does: equal to
    ``build_alibi_tensor`` bit for bit (the NumPy core's correctly rounded power differs by
    one float32 ulp for some slopes from 32 heads on).

    Positions given as 1-D integer tensors stay tensors (on their device, unless ``device``
    says otherwise): nothing is read on the host, so a module calling this traces with
    ``torch.export`` and exports to ONNX. The values are the same; only the check that they
    fit ``dtype`` is left out (it would read them).

    >>> alibi_bias(1, 3, 3, form="relative")[0]
    tensor([[ 0.0000,  0.0039,  0.0078],
            [-0.0039,  0.0000,  0.0039],
            [-0.0078, -0.0039,  0.0000]])
    """
    device = as_device(device)
    if total_heads is not None:
        count = check_count("heads", heads)
        total = total_heads_of(total_heads, count, shard)
        if total != count:
            _alibi_shape(count, query_positions, key_positions, total)  # before any work
            bias = alibi_bias(
                count, query_positions, key_positions, form=form, max_bias=max_bias,
                convention=convention, dtype=dtype, device=device,
            )  # fmt: skip
            return torch.nn.functional.pad(bias, (0, 0, 0, 0, 0, total - count))
    if isinstance(query_positions, torch.Tensor) or isinstance(key_positions, torch.Tensor):
        return _alibi_of_tensors(
            heads, query_positions, key_positions, form, max_bias, shard, convention, dtype,
            device,
        )  # fmt: skip
    shape, block = core_alibi.alibi_blocks(
        heads,
        query_positions,
        key_positions,
        form=form,
        max_bias=max_bias,
        shard=shard,
        convention=convention,
    )  # fmt: skip (the core checks every argument)
    if convention in ("bloom", "falcon"):
        return _bloom_family(
            int(heads), query_positions, key_positions, form, shard, convention, dtype, device
        )
    return _tensor_in_blocks(shape, block, dtype, device, exact=convention == "exact")


def total_heads_of(total_heads: Any, heads: int, shard: Any) -> int:
    """``total_heads`` checked: an int >= ``heads`` (default ``heads``), without ``shard``."""
    if total_heads is None:
        return heads
    if shard is not None:
        raise ValueError(
            "total_heads and shard cannot be combined: total_heads puts ALiBi on the first "
            "heads of one device's attention; give one of them"
        )
    total = core_alibi.check_total_heads(total_heads, heads)
    check_pairs("total_heads", (total,), copies=1)
    return total


def position_count(name: str, value: Any) -> int | None:
    """How many positions ``value`` holds, read without building them (None: unknown, left
    to the checks that build them): a tensor's length where it is 1-D (never copied to the
    host), else the NumPy core's count (:func:`posenc._bias.positions.position_count`)."""
    if isinstance(value, torch.Tensor):
        return int(value.shape[0]) if value.ndim == 1 else None
    return core_position_count(name, value)


def _alibi_shape(heads: int, query_positions: Any, key_positions: Any, total: int) -> None:
    """Refuse, before anything is built, a ``(total, q, k)`` bias that cannot fit."""
    q, k = (
        position_count("query_positions", query_positions),
        position_count("key_positions", key_positions),
    )
    if q is not None and k is not None and not torch.compiler.is_compiling():
        check_pairs("total_heads, query_positions and key_positions", (total, q, k))


def _tensor_in_blocks(
    shape: tuple[int, int, int], block: Any, dtype: Any, device: Any, exact: bool
) -> torch.Tensor:
    """:func:`_tensor` of the core's values, a block of query rows at a time (see
    ``cast_in_blocks``): the same tensor, bit for bit, without the whole float64 array."""
    out_dtype = check_dtype("dtype", dtype)
    where = torch.device("cpu") if device is None else device
    out = torch.empty(shape, dtype=out_dtype, device=where)

    def store(rows: slice, values: np.ndarray) -> None:
        part = torch.from_numpy(np.ascontiguousarray(values + 0.0)).to(device=where)
        out[:, rows] = cast_exact(part, out_dtype) if exact else part.to(out_dtype)

    name = str(out_dtype).removeprefix("torch.")
    cast_in_blocks(shape, block, store, float(torch.finfo(out_dtype).max), name)
    return out


def _bloom_family(
    heads: int, query_positions: Any, key_positions: Any, form: str, shard: Any,
    convention: str, dtype: torch.dtype, device: Any,
) -> torch.Tensor:  # fmt: skip
    """BLOOM's and Falcon's steps with torch's own float32 ``pow`` (whose rounding NumPy
    cannot reproduce): ``base^k`` in float32, products in float32 (Falcon: bfloat16)."""
    slopes = _torch_slopes(heads, shard, convention)
    query = torch.from_numpy(as_positions("query_positions", query_positions))
    return _bloom_rest(slopes, query, key_positions, form, dtype, device)


def _torch_slopes(heads: int, shard: Any, convention: str) -> torch.Tensor:
    """BLOOM's slopes with torch's float32 ``pow`` (Falcon: rounded to bfloat16)."""
    lower = 1 << (heads.bit_length() - 1)
    base = torch.full((), 2 ** (-(2 ** -(math.log2(lower) - 3))), dtype=torch.float32)
    slopes = torch.pow(base, torch.arange(1, 1 + lower, dtype=torch.int32))
    if lower != heads:
        extra = torch.full((), 2 ** (-(2 ** -(math.log2(2 * lower) - 3))), dtype=torch.float32)
        odd = torch.arange(1, 1 + 2 * (heads - lower), 2, dtype=torch.int32)
        slopes = torch.cat([slopes, torch.pow(extra, odd)])
    if shard is not None:
        rank, ranks = shard
        slopes = slopes.reshape(ranks, -1)[rank]
    return slopes.bfloat16() if convention == "falcon" else slopes


def _bloom_rest(
    slopes: torch.Tensor, query: torch.Tensor, key_positions: Any, form: str, dtype: torch.dtype,
    device: Any,
) -> torch.Tensor:  # fmt: skip
    key = torch.from_numpy(as_positions("key_positions", key_positions))
    rel = key[None, :] - query[:, None]
    factor = {"key": key[None, :].expand_as(rel), "relative": rel, "distance": -rel.abs()}[form]
    bias = slopes[:, None, None] * factor[None]  # on the host: checking it costs no sync
    out = check_dtype("dtype", dtype)
    check_fits(bias.float().numpy(), float(torch.finfo(out).max), str(out).removeprefix("torch."))
    return bias.to(device=device, dtype=out)


def _alibi_of_tensors(
    heads: int, query_positions: Any, key_positions: Any, form: str, max_bias: float,
    shard: Any, convention: str, dtype: torch.dtype, device: Any,
) -> torch.Tensor:  # fmt: skip
    """:func:`alibi_bias` of tensor positions: the slopes from the core (or torch's pow, for
    BLOOM and Falcon), the products on the positions' device in the convention's dtype."""
    out = check_dtype("dtype", dtype)
    if form not in core_alibi.ALIBI_FORMS:
        raise ValueError(f"form must be one of {core_alibi.ALIBI_FORMS}, got {form!r}")
    rule: Any = convention
    slopes: Any = core_alibi.alibi_slopes(heads, max_bias=max_bias, shard=shard, convention=rule)
    if device is not None:  # positions move to the device asked for
        query_positions, key_positions = (
            p.to(device) if isinstance(p, torch.Tensor) else p
            for p in (query_positions, key_positions)
        )
    where = device if device is not None else next(
        p.device for p in (query_positions, key_positions) if isinstance(p, torch.Tensor)
    )  # fmt: skip
    query = position_tensor("query_positions", query_positions, where)
    key = position_tensor("key_positions", key_positions, where)
    if not torch.compiler.is_compiling():  # before the (heads, q, k) products
        names = "heads, query_positions and key_positions"
        check_pairs(names, (int(slopes.size), int(query.shape[0]), int(key.shape[0])))
    if convention in ("bloom", "falcon"):  # torch's pow, as transformers
        slopes = _torch_slopes(int(heads), shard, convention)
    rel = key[None, :] - query[:, None]
    factor = {"key": key[None, :].expand_as(rel), "relative": rel, "distance": -rel.abs()}[form]
    wide = {"exact": torch.float64, "falcon": torch.bfloat16}.get(convention, torch.float32)
    table = torch.as_tensor(slopes).to(device=where, dtype=wide)
    bias = table[:, None, None] * factor[None].to(wide)
    if convention == "exact":
        return cast_exact(bias, out)
    return bias.to(out)


def kerple_bias(
    query_positions: Any,
    key_positions: Any,
    *,
    r1: Any,
    r2: Any,
    kind: KerpleKind = "log",
    dtype: torch.dtype = torch.float32,
    device: Any = None,
) -> torch.Tensor:
    """:func:`posenc.kerple_bias` as a tensor (fixed parameters; learnable ones:
    :class:`KerpleBias`).

    >>> kerple_bias(2, 2, r1=1.0, r2=2.0, kind="power")
    tensor([[[ 0., -1.],
             [-1.,  0.]]])
    """
    check_dtype("dtype", dtype)
    device = as_device(device)
    values = core_kerple(
        query_positions,
        key_positions,
        r1=r1,
        r2=r2,
        kind=kind,
        dtype=np.float64,
    )
    return _tensor(values, dtype, device, exact=True)


def sandwich_bias(
    heads: int,
    query_positions: Any,
    key_positions: Any,
    *,
    dim: int = 128,
    base: float = 10000.0,
    dtype: torch.dtype = torch.float32,
    device: Any = None,
) -> torch.Tensor:
    """:func:`posenc.sandwich_bias` as a tensor.

    >>> sandwich_bias(2, 4, 4).shape
    torch.Size([2, 4, 4])
    """
    check_dtype("dtype", dtype)
    device = as_device(device)
    values = core_sandwich(
        heads, query_positions, key_positions, dim=dim, base=base, dtype=np.float64
    )
    return _tensor(values, dtype, device, exact=True)


def _relative_tensor(value: Any) -> torch.Tensor:
    if not isinstance(value, torch.Tensor):
        value = torch.as_tensor(np.asarray(core_buckets._relative(value)))
    if value.numel() == 0 and value.dtype.is_floating_point:  # no positions, of no dtype
        return torch.zeros(value.shape, dtype=torch.int64, device=value.device)
    if value.dtype.is_floating_point or value.dtype.is_complex or value.dtype == torch.bool:
        raise TypeError(f"relative_positions must be integers, got dtype {value.dtype}")
    if value.device.type == "cpu":  # data checks where reading them costs no host sync
        core_buckets._relative(value.detach().numpy())
    result: torch.Tensor = value.to(torch.int64)
    return result


def t5_buckets(
    relative_positions: Any,
    *,
    bidirectional: bool = True,
    num_buckets: int = 32,
    max_distance: int = 128,
    convention: core_buckets.BucketConvention = "exact",
) -> torch.Tensor:
    """:func:`posenc.t5_buckets` for tensors: int64, on the input's device.

    ``"transformers"`` runs ``_relative_position_bucket``'s float32 steps with ``torch.log``:
    equal to it bit for bit. ``"exact"`` reads the positions (a host copy) and uses the core.

    >>> t5_buckets(torch.tensor([-200, -16, 0, 3]), convention="transformers")
    tensor([15, 10,  0, 19])
    """
    rel = _relative_tensor(relative_positions)
    # the core checks every setting (on one zero: the data stay where they are) ...
    settings = {"bidirectional": bidirectional, "num_buckets": num_buckets,
                "max_distance": max_distance, "convention": convention}  # fmt: skip
    core_buckets.t5_buckets(np.zeros(1, dtype=np.int64), **settings)  # type: ignore[arg-type]
    if convention == "exact":  # ... and gives the exact buckets, reading the positions
        exact = core_buckets.t5_buckets(rel.detach().cpu().numpy(), **settings)  # type: ignore[arg-type]
        return torch.from_numpy(exact).to(rel.device)
    return transformers_t5_buckets(rel, bidirectional, num_buckets, max_distance)


def transformers_t5_buckets(
    rel: torch.Tensor, bidirectional: bool, num_buckets: int, max_distance: int
) -> torch.Tensor:
    """The steps of ``_relative_position_bucket`` on int64 ``rel``, the settings checked by
    the caller: no host work, so it compiles into one graph (``torch.compile``)."""
    side = num_buckets // 2 if bidirectional else num_buckets
    small = side // 2
    offset = (rel > 0).to(torch.int64) * side if bidirectional else torch.zeros_like(rel)
    distance = rel.abs() if bidirectional else (-rel).clamp(min=0)
    logs = torch.log(distance.float() / small) / math.log(max_distance / small)
    large = (small + (logs * (side - small)).to(torch.int64)).clamp(max=side - 1)
    buckets: torch.Tensor = offset + torch.where(distance < small, distance, large)
    return buckets


def deberta_buckets(
    relative_positions: Any,
    *,
    bucket_size: int = 256,
    max_position: int = 512,
    convention: core_buckets.BucketConvention = "exact",
) -> torch.Tensor:
    """:func:`posenc.deberta_buckets` for tensors (sign: query − key), int64.

    ``"transformers"`` runs ``make_log_bucket_position``'s float32 steps with ``torch.log``.

    >>> deberta_buckets(torch.tensor([-100, 0, 100]), convention="transformers")
    tensor([-100,    0,  100])
    """
    rel = _relative_tensor(relative_positions)
    settings = {"bucket_size": bucket_size, "max_position": max_position, "convention": convention}
    core_buckets.deberta_buckets(np.zeros(1, dtype=np.int64), **settings)  # type: ignore[arg-type]
    if convention == "exact":
        exact = core_buckets.deberta_buckets(rel.detach().cpu().numpy(), **settings)  # type: ignore[arg-type]
        return torch.from_numpy(exact).to(rel.device)
    return transformers_deberta_buckets(rel, bucket_size, max_position)


def transformers_deberta_buckets(
    rel: torch.Tensor, bucket_size: int, max_position: int
) -> torch.Tensor:
    """The steps of ``make_log_bucket_position`` on int64 ``rel``, the settings checked by
    the caller: no host work, so it compiles into one graph (``torch.compile``)."""
    mid = int(bucket_size) // 2
    inside = (rel < mid) & (rel > -mid)
    magnitude = torch.where(inside, torch.full_like(rel, mid - 1), rel.abs())
    denominator = torch.log(torch.tensor((max_position - 1) / mid, device=rel.device))
    log_pos = torch.ceil(torch.log(magnitude / mid) / denominator * (mid - 1)) + mid
    bucket = torch.where(magnitude <= mid, rel.to(log_pos.dtype), log_pos * torch.sign(rel))
    return bucket.to(torch.int64)
