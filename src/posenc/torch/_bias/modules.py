"""Modules holding the learnable parts of attention biases: T5's bucket table, Kerple's
``r1, r2`` and FIRE's MLP, each with ``like(module)`` to take over a model's weights.

``forward(query_positions, key_positions)`` returns the dense bias ``(heads, q, k)`` in the
parameters' dtype; positions are an int ``L`` or 1-D integer positions (offsets, packed
documents, shards), checked as the NumPy core checks them. Positions given as 1-D integer
tensors are used as tensors: the bias is computed on their device without reading them on
the host, which is what ``torch.export`` and ONNX need (CPU tensors are still checked, except
while tracing). Sizes are refused before anything proportional to them is allocated.

Kerple and FIRE compute in float64 and round once to the parameters' dtype (16-bit
parameters included: the values equal the float64 formula rounded once, as the NumPy core
rounds, at any distance). A bias beyond that dtype's range is refused by name on the CPU and
NaN elsewhere (reading it would synchronise), never an infinity that would mask keys.

>>> bias = T5RelativeBias(heads=4)
>>> bias(5, 5).shape
torch.Size([4, 5, 5])
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch import nn

from ..._bias.buckets import BucketConvention
from ..._bias.distance import fire_distance
from ..._bias.positions import check_count, check_pairs, check_parameter
from .._checks import as_device, check_dtype, data_checked
from .._kernels._cast import cast_exact
from .dense import position_count, position_tensor, t5_buckets

#: T5RelativeBias reads its buckets from a table indexed by distance up to ``max_distance``
#: (every distance beyond shares the last bucket) when ``max_distance`` is at most this.
MAX_TABLE_DISTANCE = 1 << 20


def _relative(query_positions: Any, key_positions: Any, device: Any) -> torch.Tensor:
    """``key − query`` as an int64 ``(q, k)`` tensor."""
    query = position_tensor("query_positions", query_positions, device)
    key = position_tensor("key_positions", key_positions, device)
    return key[None, :] - query[:, None]


__all__ = ["FireBias", "KerpleBias", "T5RelativeBias"]


def _refuse_large(query_positions: Any, key_positions: Any, per_pair: int) -> None:
    """Refuse, before any position is built, ``per_pair`` float64 values per query/key pair
    (three such arrays at once) that cannot fit in memory."""
    if torch.compiler.is_compiling():
        return
    q = position_count("query_positions", query_positions)
    k = position_count("key_positions", key_positions)
    if q is not None and k is not None:
        check_pairs("query_positions and key_positions", (q, k, per_pair))


def _factory(owner: str, device: Any, dtype: Any) -> None:
    """The ``device`` and ``dtype`` of a module's parameters, checked by name."""
    as_device(device)
    if dtype is not None:
        check_dtype("dtype", dtype)


def _wide(device: torch.device) -> torch.dtype:
    """float64, where the device has it (MPS has not: float32 there)."""
    return torch.float32 if device.type == "mps" else torch.float64


def _round_once(values: torch.Tensor, dtype: torch.dtype, owner: str) -> torch.Tensor:
    """Wide ``values`` rounded once to ``dtype``; a value beyond ``dtype``'s range is refused
    where the values can be read (CPU), else NaN: never an infinity."""
    largest = float(torch.finfo(dtype).max)
    if data_checked(values):
        peak = float(values.detach().abs().max()) if values.numel() else 0.0
        if peak > largest:
            name = str(dtype).removeprefix("torch.")
            raise ValueError(
                f"{owner} with dtype={name} parameters cannot hold this bias: its values "
                f"reach {peak:.6g} in magnitude, beyond {name}'s largest finite number "
                f"{largest:.6g}; use float32 parameters (module.float())"
            )
    elif dtype != values.dtype:
        values = values.masked_fill(values.abs() > largest, float("nan"))
    values = values + 0.0  # no negative zeros, as the core
    return cast_exact(values, dtype) if values.dtype == torch.float64 else values.to(dtype)


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
    of every distance ``0 .. max_distance``, from the convention's function, read at
    construction and rebuilt by ``.to()`` and ``to_empty()``), so that it runs on the
    positions' device and exports. A ``max_distance``
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
        _factory("T5RelativeBias", device, dtype)
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

    def _apply(self, fn: Any, recurse: bool = True) -> T5RelativeBias:
        # .to(), .cuda() and to_empty() (after building on the meta device: the lookup would
        # be left uninitialised) rebuild the lookup from the settings where the table now is
        super()._apply(fn, recurse)  # type: ignore[no-untyped-call]
        self.by_distance = self._by_distance(self.table.weight.device)
        return self

    @classmethod
    def like(cls, module: nn.Module) -> T5RelativeBias:
        """The bias of a transformers ``T5Attention`` (or a module with the same attributes:
        ``relative_attention_bias``, ``relative_attention_num_buckets``,
        ``relative_attention_max_distance``, ``is_decoder``), its table copied."""
        table = getattr(module, "relative_attention_bias", None)
        if not isinstance(table, nn.Embedding):
            got = type(module).__name__
            raise TypeError(f"module must have a relative_attention_bias nn.Embedding, got {got}")
        names = ("relative_attention_num_buckets", "relative_attention_max_distance", "is_decoder")
        missing = [name for name in names if not hasattr(module, name)]
        if missing:
            raise TypeError(
                f"module must have the attributes {', '.join(names)} (T5Attention's), "
                f"{type(module).__name__} lacks {', '.join(missing)}"
            )
        settings: Any = module
        if table.num_embeddings != settings.relative_attention_num_buckets:
            raise ValueError(
                f"module's relative_attention_bias has {table.num_embeddings} rows (buckets), "
                f"its relative_attention_num_buckets is "
                f"{settings.relative_attention_num_buckets!r}: they must agree"
            )
        new = cls(
            table.embedding_dim,
            num_buckets=settings.relative_attention_num_buckets,
            max_distance=settings.relative_attention_max_distance,
            bidirectional=not settings.is_decoder,
            convention="transformers",
            device=table.weight.device,
            dtype=table.weight.dtype,
        )  # fmt: skip (the constructor checks every setting)
        new.table.weight.data.copy_(table.weight.data)
        return new

    def forward(self, query_positions: Any, key_positions: Any) -> torch.Tensor:
        _refuse_large(query_positions, key_positions, self.heads + 3)
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
        _factory("KerpleBias", device, dtype)
        self.heads, self.kind, self.eps = check_count("heads", heads), kind, floor
        self.r1 = nn.Parameter(torch.ones(self.heads, device=device, dtype=dtype))
        self.r2 = nn.Parameter(torch.ones(self.heads, device=device, dtype=dtype))

    @classmethod
    def like(cls, module: nn.Module) -> KerpleBias:
        """A copy of another Kerple module's parameters: ``r1``, ``r2`` of one shape
        ``(heads,)`` (finite), and its ``kind`` and ``eps`` where it has them (default
        ``"log"``, ``1e-2``), checked as the constructor checks them."""
        r1, r2 = getattr(module, "r1", None), getattr(module, "r2", None)
        if not isinstance(r1, torch.Tensor) or not isinstance(r2, torch.Tensor):
            raise TypeError(f"module must have tensors r1 and r2, got {type(module).__name__}")
        if r1.shape != r2.shape or r1.ndim > 1 or not r1.dtype.is_floating_point:
            raise ValueError(
                f"module's r1 and r2 must be floating-point tensors of one shape (heads,), got "
                f"{r1.dtype} {tuple(r1.shape)} and {r2.dtype} {tuple(r2.shape)}"
            )
        for name, value in (("r1", r1), ("r2", r2)):
            check_parameter(name, value.detach().cpu().double().numpy().reshape(-1))
        new = cls(
            r1.numel(), kind=getattr(module, "kind", "log"), eps=getattr(module, "eps", 1e-2),
            device=r1.device, dtype=r1.dtype,
        )  # fmt: skip
        new.r1.data.copy_(r1.detach().reshape(-1))
        new.r2.data.copy_(r2.detach().reshape(-1))
        return new

    def forward(self, query_positions: Any, key_positions: Any) -> torch.Tensor:
        _refuse_large(query_positions, key_positions, self.heads + 3)
        wide = _wide(self.r1.device)
        gap = _gap(query_positions, key_positions, self.r1.device).to(wide)
        r1 = self.r1.to(wide).clamp(min=self.eps)[:, None, None]
        r2 = self.r2.to(wide).clamp(min=self.eps)[:, None, None]
        shape = torch.log1p(r2 * gap) if self.kind == "log" else gap ** r2.clamp(max=2.0)
        return _round_once(-r1 * shape, self.r1.dtype, "KerpleBias")

    def extra_repr(self) -> str:
        return f"heads={self.heads}, kind={self.kind!r}"


class FireBias(nn.Module):
    """FIRE: an MLP ``1 → hidden → heads`` of the normalised causal distance
    ``ψ(i − j) / ψ(max(L, i))``, ``ψ(x) = ln(1 + c·x)``, with ``c`` and ``L`` learnable.

    Args:
        heads: attention heads.
        hidden: the MLP's width (32).
        c, threshold: ψ's scale and ``L``, > 0 (see :func:`posenc.fire_distance`).
        activation: the MLP's activation, a parameter-free module (default ``nn.ReLU()``;
            e.g. ``nn.GELU()``).

    Query positions must be >= 0 (refused on the CPU; NaN rows elsewhere). ``like(module)``
    copies a module of the same structure: ``mlp`` (Linear(1, hidden), activation,
    Linear(hidden, heads)), ``c`` and ``threshold``, the activation included.
    """

    def __init__(
        self, heads: int, *, hidden: int = 32, c: float = 1.0, threshold: float = 1.0,
        activation: nn.Module | None = None, device: Any = None,
        dtype: torch.dtype | None = None,
    ) -> None:  # fmt: skip
        super().__init__()
        self.heads = check_count("heads", heads)
        fire_distance(1, 1, c=c, threshold=threshold)  # checks c and threshold
        width = check_count("hidden", hidden)
        _factory("FireBias", device, dtype)
        act = nn.ReLU() if activation is None else _activation(activation)
        kwargs: dict[str, Any] = {"device": device, "dtype": dtype}
        self.mlp = nn.Sequential(
            nn.Linear(1, width, **kwargs), act, nn.Linear(width, self.heads, **kwargs)
        )
        self.c = nn.Parameter(torch.tensor(float(c), **kwargs))
        self.threshold = nn.Parameter(torch.tensor(float(threshold), **kwargs))

    @classmethod
    def like(cls, module: nn.Module) -> FireBias:
        """A copy of a FIRE module with ``mlp`` (Linear(1, hidden), activation,
        Linear(hidden, heads)), ``c`` and ``threshold`` (one number each), checked as the
        constructor checks them; the activation is copied as it is."""
        mlp = getattr(module, "mlp", None)
        shape = "nn.Sequential(Linear(1, hidden), activation, Linear(hidden, heads))"
        if (
            not isinstance(mlp, nn.Sequential) or len(mlp) != 3
            or not isinstance(mlp[0], nn.Linear) or not isinstance(mlp[2], nn.Linear)
        ):  # fmt: skip
            raise TypeError(f"module must have an mlp {shape}, got {type(module).__name__}")
        first: Any = mlp[0]
        act: Any = mlp[1]
        last: Any = mlp[2]
        if first.in_features != 1 or last.in_features != first.out_features:
            raise ValueError(
                f"module's mlp must be {shape}, got Linear({first.in_features}, "
                f"{first.out_features}) then Linear({last.in_features}, {last.out_features})"
            )
        numbers = {}
        for name in ("c", "threshold"):
            value = getattr(module, name, None)
            if not isinstance(value, torch.Tensor) or value.numel() != 1:
                got = tuple(value.shape) if isinstance(value, torch.Tensor) else value
                raise ValueError(f"module's {name} must be a tensor of one number, got {got!r}")
            numbers[name] = float(value.detach().reshape(()))
        weight = first.weight
        new = cls(
            last.out_features,
            hidden=first.out_features,
            c=numbers["c"],
            threshold=numbers["threshold"],
            activation=copy.deepcopy(act),
            device=weight.device,
            dtype=weight.dtype,
        )  # the constructor checks c, threshold and the activation
        layers: Any = new.mlp
        with torch.no_grad():
            for ours, theirs in ((layers[0], first), (layers[2], last)):
                ours.weight.copy_(theirs.weight)
                ours.bias.copy_(theirs.bias if theirs.bias is not None else 0.0)
        return new

    def forward(self, query_positions: Any, key_positions: Any) -> torch.Tensor:
        layers: Any = self.mlp
        width = max(int(layers[0].out_features), self.heads)
        _refuse_large(query_positions, key_positions, width + 3)
        query = position_tensor("query_positions", query_positions, self.c.device)
        key = position_tensor("key_positions", key_positions, self.c.device)
        readable = data_checked(query)
        if readable and query.numel() and int(query.min()) < 0:
            raise ValueError(f"query_positions must be >= 0 for FIRE, got {int(query.min())}")
        wide = _wide(self.c.device)
        causal = (query[:, None] - key[None, :]).clamp(min=0).to(wide)
        c = self.c.to(wide).abs()
        norm = torch.log1p(c * torch.maximum(query.to(wide), self.threshold.to(wide).abs()))
        inputs = torch.log1p(c * causal) / norm[:, None]
        if not readable:  # a negative query position: NaN, never a plausible bias
            inputs = inputs.masked_fill((query < 0)[:, None], float("nan"))
        hidden = inputs[..., None]
        for layer in self.mlp:
            if isinstance(layer, nn.Linear):
                bias = None if layer.bias is None else layer.bias.to(wide)
                hidden = nn.functional.linear(hidden, layer.weight.to(wide), bias)
            else:
                hidden = layer(hidden)
        return _round_once(hidden.permute(2, 0, 1), self.c.dtype, "FireBias")

    def extra_repr(self) -> str:
        return f"heads={self.heads}"


def _activation(value: Any) -> nn.Module:
    """A parameter-free module (FIRE's MLP is computed in float64 from its Linear layers;
    an activation with state of its own could not be copied as it is)."""
    if not isinstance(value, nn.Module):
        raise TypeError(f"activation must be an nn.Module such as nn.GELU(), got {value!r:.80}")
    state = [name for name, _ in value.named_parameters()] + [
        name for name, _ in value.named_buffers()
    ]
    if state:
        raise TypeError(
            f"activation must be a parameter-free module (ReLU, GELU, SiLU, ...), got "
            f"{type(value).__name__} with {', '.join(state)}"
        )
    return value
