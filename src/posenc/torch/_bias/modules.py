"""Modules holding the learnable parts of attention biases: T5's bucket table, Kerple's
``r1, r2`` and FIRE's MLP, each with ``like(module)`` to take over a model's weights.

``forward(query_positions, key_positions)`` returns the dense bias ``(heads, q, k)`` in the
parameters' dtype; positions are an int ``L`` or 1-D integer positions (offsets, packed
documents, shards), checked as the NumPy core checks them. Positions given as 1-D integer
tensors are used as tensors: the bias is computed on their device without reading them on
the host, which is what ``torch.export`` and ONNX need (CPU tensors are still checked, except
while tracing).

>>> bias = T5RelativeBias(heads=4)
>>> bias(5, 5).shape
torch.Size([4, 5, 5])
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from ..._bias.buckets import BucketConvention
from ..._bias.distance import fire_distance
from ..._bias.positions import check_count, check_parameter
from .dense import position_tensor, t5_buckets

#: T5RelativeBias reads its buckets from a table indexed by distance up to ``max_distance``
#: (every distance beyond shares the last bucket) when ``max_distance`` is at most this.
MAX_TABLE_DISTANCE = 1 << 20


def _relative(query_positions: Any, key_positions: Any, device: Any) -> torch.Tensor:
    """``key − query`` as an int64 ``(q, k)`` tensor."""
    query = position_tensor("query_positions", query_positions, device)
    key = position_tensor("key_positions", key_positions, device)
    return key[None, :] - query[:, None]


__all__ = ["FireBias", "KerpleBias", "T5RelativeBias"]


class T5RelativeBias(nn.Module):
    """T5's learned relative bias: ``table[bucket(j − i), h]`` (T5, mT5, UMT5, LongT5, ...).

    Args:
        heads: attention heads, an int >= 1.
        num_buckets: T5's ``relative_attention_num_buckets`` (32).
        max_distance: T5's ``relative_attention_max_distance`` (128).
        bidirectional: True for encoders, False for decoders (``not is_decoder``).
        convention: ``"exact"`` or ``"transformers"`` (see :func:`posenc.t5_buckets`).

    The table is ``self.table.weight``, ``(num_buckets, heads)`` like T5's
    ``relative_attention_bias``. ``T5RelativeBias.like(t5_attention)`` copies a T5
    attention layer's table and settings (convention ``"transformers"``).

    ``forward`` looks the buckets up in ``by_distance`` (a non-persistent buffer: the bucket
    of every distance ``0 .. max_distance``, from the convention's function, read once at
    construction), so that it runs on the positions' device and exports. A ``max_distance``
    above 2**20 reads the positions on the host instead, and refuses to be traced.
    """

    by_distance: torch.Tensor

    def __init__(
        self,
        heads: int,
        *,
        num_buckets: int = 32,
        max_distance: int = 128,
        bidirectional: bool = True,
        convention: BucketConvention = "exact",
        device: Any = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.heads = check_count("heads", heads)
        self.num_buckets, self.max_distance = num_buckets, max_distance
        self.bidirectional, self.convention = bidirectional, convention
        zero = torch.zeros(1, dtype=torch.int64)  # checks the settings once
        t5_buckets(
            zero, bidirectional=bidirectional, num_buckets=num_buckets,
            max_distance=max_distance, convention=convention,
        )  # fmt: skip
        self.table = nn.Embedding(num_buckets, self.heads, device=device, dtype=dtype)
        self.register_buffer("by_distance", self._by_distance(device), persistent=False)

    def _by_distance(self, device: Any) -> torch.Tensor:
        """The bucket of every distance ``0 .. max_distance`` to an earlier key (T5's
        buckets grow with the distance and stay at the last one from ``max_distance`` on):
        the buckets of the convention, read once, so that ``forward`` is a lookup."""
        far = int(self.max_distance)
        if far > MAX_TABLE_DISTANCE:
            return torch.zeros(0, dtype=torch.int64, device=device)
        earlier = -torch.arange(far + 1, dtype=torch.int64)
        buckets = t5_buckets(
            earlier, bidirectional=self.bidirectional, num_buckets=self.num_buckets,
            max_distance=far, convention=self.convention,
        )  # fmt: skip
        return buckets.to(device)

    @classmethod
    def like(cls, module: nn.Module) -> T5RelativeBias:
        """The bias of a transformers ``T5Attention`` (or a module with the same attributes:
        ``relative_attention_bias``, ``relative_attention_num_buckets``,
        ``relative_attention_max_distance``, ``is_decoder``), its table copied."""
        table = getattr(module, "relative_attention_bias", None)
        if not isinstance(table, nn.Embedding):
            got = type(module).__name__
            raise TypeError(f"module must have a relative_attention_bias nn.Embedding, got {got}")
        settings: Any = module
        new = cls(
            table.embedding_dim, num_buckets=int(settings.relative_attention_num_buckets),
            max_distance=int(settings.relative_attention_max_distance),
            bidirectional=not settings.is_decoder, convention="transformers",
            device=table.weight.device, dtype=table.weight.dtype,
        )  # fmt: skip
        new.table.weight.data.copy_(table.weight.data)
        return new

    def forward(self, query_positions: Any, key_positions: Any) -> torch.Tensor:
        rel = _relative(query_positions, key_positions, self.table.weight.device)
        if self.by_distance.numel() == 0:  # a max_distance beyond the lookup table
            if torch.compiler.is_compiling():
                raise ValueError(
                    f"T5RelativeBias with max_distance={self.max_distance} (more than "
                    f"{MAX_TABLE_DISTANCE}) reads the positions on the host and cannot be "
                    "traced or exported: use a max_distance up to 2**20"
                )
            buckets = t5_buckets(
                rel.cpu(), bidirectional=self.bidirectional, num_buckets=self.num_buckets,
                max_distance=self.max_distance, convention=self.convention,
            ).to(rel.device)  # fmt: skip
        else:
            side = self.num_buckets // 2 if self.bidirectional else self.num_buckets
            distance = rel.abs() if self.bidirectional else (-rel).clamp(min=0)
            buckets = self.by_distance[distance.clamp(max=int(self.max_distance))]
            if self.bidirectional:
                buckets = buckets + (rel > 0).to(torch.int64) * side
        bias: torch.Tensor = self.table(buckets)
        return bias.permute(2, 0, 1)

    def extra_repr(self) -> str:
        return (
            f"heads={self.heads}, num_buckets={self.num_buckets}, max_distance="
            f"{self.max_distance}, bidirectional={self.bidirectional}, "
            f"convention={self.convention!r}"
        )


def _gap(query_positions: Any, key_positions: Any, device: Any) -> torch.Tensor:
    return _relative(query_positions, key_positions, device).abs()


class KerpleBias(nn.Module):
    """Kerple with learnable ``r1, r2 > 0`` per head (see :func:`posenc.kerple_bias`).

    Args:
        heads: attention heads.
        kind: ``"log"`` (``−r1·ln(1 + r2·|j − i|)``) or ``"power"`` (``−r1·|j − i|^r2``).
        eps: the parameters are clamped to at least ``eps`` in ``forward`` (the paper's
            positivity constraint).

    ``like(module)`` copies ``r1``/``r2`` from a module with parameters of those names.
    """

    def __init__(
        self, heads: int, *, kind: str = "log", eps: float = 1e-2, device: Any = None,
        dtype: torch.dtype | None = None,
    ) -> None:  # fmt: skip
        super().__init__()
        if kind not in ("log", "power"):
            raise ValueError(f"kind must be 'log' or 'power', got {kind!r}")
        floor = float(check_parameter("eps", eps, positive=True))
        self.heads, self.kind, self.eps = check_count("heads", heads), kind, floor
        self.r1 = nn.Parameter(torch.ones(self.heads, device=device, dtype=dtype))
        self.r2 = nn.Parameter(torch.ones(self.heads, device=device, dtype=dtype))

    @classmethod
    def like(cls, module: nn.Module) -> KerpleBias:
        """A copy of another Kerple module's parameters (``r1``, ``r2`` of shape ``(heads,)``)."""
        r1, r2 = getattr(module, "r1", None), getattr(module, "r2", None)
        if not isinstance(r1, torch.Tensor) or not isinstance(r2, torch.Tensor):
            raise TypeError(f"module must have tensors r1 and r2, got {type(module).__name__}")
        new = cls(r1.numel(), kind=getattr(module, "kind", "log"), device=r1.device, dtype=r1.dtype)
        new.r1.data.copy_(r1.detach().reshape(-1))
        new.r2.data.copy_(r2.detach().reshape(-1))
        return new

    def forward(self, query_positions: Any, key_positions: Any) -> torch.Tensor:
        gap = _gap(query_positions, key_positions, self.r1.device).to(self.r1.dtype)
        r1 = self.r1.clamp(min=self.eps)[:, None, None]
        r2 = self.r2.clamp(min=self.eps)[:, None, None]
        shape = torch.log1p(r2 * gap) if self.kind == "log" else gap ** r2.clamp(max=2.0)
        return -r1 * shape

    def extra_repr(self) -> str:
        return f"heads={self.heads}, kind={self.kind!r}"


class FireBias(nn.Module):
    """FIRE: an MLP ``1 → hidden → heads`` of the normalised causal distance
    ``ψ(i − j) / ψ(max(L, i))``, ``ψ(x) = ln(1 + c·x)``, with ``c`` and ``L`` learnable.

    ``like(module)`` copies the weights of a module of the same structure (``mlp``, ``c``,
    ``threshold``).
    """

    def __init__(
        self, heads: int, *, hidden: int = 32, c: float = 1.0, threshold: float = 1.0,
        device: Any = None, dtype: torch.dtype | None = None,
    ) -> None:  # fmt: skip
        super().__init__()
        self.heads = check_count("heads", heads)
        fire_distance(1, 1, c=c, threshold=threshold)  # checks c and threshold
        width = check_count("hidden", hidden)
        kwargs: dict[str, Any] = {"device": device, "dtype": dtype}
        self.mlp = nn.Sequential(
            nn.Linear(1, width, **kwargs), nn.ReLU(), nn.Linear(width, self.heads, **kwargs)
        )
        self.c = nn.Parameter(torch.tensor(float(c), **kwargs))
        self.threshold = nn.Parameter(torch.tensor(float(threshold), **kwargs))

    @classmethod
    def like(cls, module: nn.Module) -> FireBias:
        """A copy of a FIRE module with ``mlp`` (Linear, activation, Linear), ``c`` and
        ``threshold``."""
        mlp = getattr(module, "mlp", None)
        if not isinstance(mlp, nn.Sequential) or not isinstance(mlp[0], nn.Linear):
            raise TypeError(f"module must have an mlp nn.Sequential, got {type(module).__name__}")
        weight = mlp[0].weight
        last: Any = mlp[-1]
        new = cls(int(last.out_features), hidden=mlp[0].out_features, device=weight.device,
                  dtype=weight.dtype)  # fmt: skip
        new.load_state_dict(module.state_dict())
        return new

    def forward(self, query_positions: Any, key_positions: Any) -> torch.Tensor:
        query = position_tensor("query_positions", query_positions, self.c.device)
        key = position_tensor("key_positions", key_positions, self.c.device)
        like = self.c
        causal = (query[:, None] - key[None, :]).clamp(min=0).to(like)
        c = self.c.abs()
        norm = torch.log1p(c * torch.maximum(query.to(like), self.threshold.abs()))
        inputs = torch.log1p(c * causal) / norm[:, None]
        bias: torch.Tensor = self.mlp(inputs[..., None])
        return bias.permute(2, 0, 1)

    def extra_repr(self) -> str:
        return f"heads={self.heads}"
