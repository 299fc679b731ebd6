"""Hash the outputs of a fixed grid of public calls, to show that a refactor changes no value.

Run it before and after a change, on the same machine, and compare::

    PYTHONPATH=src python tools/output_hashes.py --out before.json
    PYTHONPATH=src python tools/output_hashes.py --check before.json

Every case calls the public API only (``posenc``, ``posenc.analysis``, ``posenc.torch``,
``posenc.torch.hf``), so the same script runs on both sides of a change of internal layout.
Each result is hashed bit for bit (its dtype, shape and bytes; bfloat16 through its int16
view). Covered: every 1-D convention, every rope type (length-dependent ones below and above
their original length), both pair layouts and partial rotation, every grid convention,
timestep embeddings, the position helpers, the analysis results, float64/32/16 and bfloat16,
lengths up to 10^6, offsets and explicit (negative, fractional, large, scattered) positions,
and the torch modules and drop-ins in eval mode, with inputs large enough to take the fused
and chunked paths. The hashes depend on the machine's libm (float64 sin/cos), so compare only
runs made on one machine.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

import posenc
import posenc.analysis

ROPE_SCALINGS: dict[str, Any] = {
    "none": None,
    "default": {"rope_type": "default"},
    "linear": {"rope_type": "linear", "factor": 4.0},
    "dynamic": {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 64},
    "yarn": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64},
    "yarn_mscale": {
        "rope_type": "yarn",
        "factor": 40.0,
        "original_max_position_embeddings": 64,
        "mscale": 1.0,
        "mscale_all_dim": 0.707,
        "beta_fast": 16,
        "truncate": False,
    },
    "llama3": {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 64,
    },
    "longrope": {
        "rope_type": "longrope",
        "short_factor": [1.0, 1.1, 1.3, 1.7, 2.0, 2.5, 3.0, 4.0],
        "long_factor": [1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 16.0],
        "original_max_position_embeddings": 64,
        "max_position_embeddings": 256,
    },
}

CONVENTIONS = ("paper", "tensor2tensor", "marian")
NP_DTYPES = (np.float64, np.float32, np.float16)


def digest(value: Any) -> str:
    """sha256 of a result: arrays/tensors by dtype, shape and bytes; tuples element-wise."""
    h = hashlib.sha256()
    _feed(h, value)
    return h.hexdigest()[:24]


def _feed(h: Any, value: Any) -> None:
    if isinstance(value, tuple | list):
        h.update(f"seq{len(value)}".encode())
        for item in value:
            _feed(h, item)
        return
    if type(value).__module__.startswith("torch"):
        import torch

        if isinstance(value, torch.Tensor):
            tensor = value.detach().cpu().contiguous()
            h.update(str(tensor.dtype).encode())
            if tensor.dtype == torch.bfloat16:
                tensor = tensor.view(torch.int16)
            value = tensor.numpy()
    if isinstance(value, np.ndarray):
        h.update(f"{value.dtype}{value.shape}".encode())
        h.update(np.ascontiguousarray(value).tobytes())
        return
    if hasattr(value, "as_dict"):
        value = value.as_dict()
    h.update(json.dumps(value, sort_keys=True, default=repr).encode())


def error_type(call: Callable[[], Any]) -> Any:
    """The type name of the error ``call()`` raises (the result itself when it raises none):
    a case that must raise is recorded by its error type, not its wording."""
    try:
        return call()
    except Exception as exc:
        return f"raises {type(exc).__name__}"


def numpy_cases() -> Iterator[tuple[str, Callable[[], Any]]]:
    rng = np.random.default_rng(0)
    scattered = rng.integers(-(10**7), 10**7, size=3000)
    real = rng.uniform(-1e4, 1e4, size=500)
    explicit = {
        "neg": np.arange(-300, 300),
        "frac": real,
        "large": np.array([0, 1, 10**6, 10**7 - 1, 2**40, 2**53]),
        "scattered": scattered,
        "batch": np.stack([np.arange(5, 205), np.arange(1000, 1200)]),
    }
    for conv in CONVENTIONS:
        yield f"frequencies/{conv}", lambda c=conv: posenc.frequencies(64, convention=c)
        for dtype in NP_DTYPES:
            dn = np.dtype(dtype).name
            for d in (1, 2, 7, 64):
                for length in (0, 1, 129, 5000):
                    yield (
                        f"sinusoidal/{conv}/{dn}/d{d}/L{length}",
                        lambda c=conv, t=dtype, d=d, n=length: posenc.sinusoidal(
                            n, d, convention=c, dtype=t
                        ),
                    )
            for name, pos in explicit.items():
                yield (
                    f"sinusoidal/{conv}/{dn}/{name}",
                    lambda c=conv, t=dtype, p=pos: posenc.sinusoidal(p, 24, convention=c, dtype=t),
                )
            yield (
                f"sinusoidal/{conv}/{dn}/base500",
                lambda c=conv, t=dtype: posenc.sinusoidal(
                    300, 10, base=500.0, convention=c, dtype=t
                ),
            )
        yield (
            f"sinusoidal/{conv}/float32/L1e6",
            lambda c=conv: posenc.sinusoidal(10**6, 16, convention=c),
        )
        yield (
            f"sinusoidal/{conv}/float32/offset1e6",
            lambda c=conv: posenc.sinusoidal(np.arange(10**6, 10**6 + 4096), 32, convention=c),
        )
    for name, scaling in ROPE_SCALINGS.items():
        for pairs in ("half", "interleaved"):
            for dtype in NP_DTYPES:
                dn = np.dtype(dtype).name
                for label, pos in (("L40", 40), ("L300", 300), ("pos", np.arange(50, 90))):
                    yield (
                        f"rotary_cos_sin/{name}/{pairs}/{dn}/{label}",
                        lambda s=scaling, p=pairs, t=dtype, q=pos: posenc.rotary_cos_sin(
                            q, 16, scaling=s, pairs=p, dtype=t
                        ),
                    )
        yield (
            f"rope_frequencies/{name}",
            lambda s=scaling: posenc.rope_frequencies(16, scaling=s, seq_len=200),
        )
    yield (
        "rotary_cos_sin/partial",
        lambda: posenc.rotary_cos_sin(100, 64, rotary_dim=16, base=500000.0),
    )
    yield (
        "rotary_cos_sin/partial_factor",
        lambda: posenc.rotary_cos_sin(
            100, 64, scaling={"rope_type": "default", "partial_rotary_factor": 0.25}
        ),
    )
    yield "rotary_cos_sin/L1e6", lambda: posenc.rotary_cos_sin(10**6, 8)
    x = rng.standard_normal((2, 3, 40, 16)).astype(np.float32)
    for pairs in ("half", "interleaved"):
        for dtype in NP_DTYPES:
            yield (
                f"apply_rotary/{pairs}/{np.dtype(dtype).name}",
                lambda p=pairs, t=dtype: posenc.apply_rotary(
                    x.astype(t), *posenc.rotary_cos_sin(40, 16, pairs=p, dtype=t), pairs=p
                ),
            )
        yield (
            f"apply_rotary/{pairs}/partial",
            lambda p=pairs: posenc.apply_rotary(
                x, *posenc.rotary_cos_sin(40, 16, rotary_dim=8, pairs=p), pairs=p
            ),
        )
        other = "interleaved" if pairs == "half" else "half"
        yield (
            f"apply_rotary/{pairs}/tables_for_{other}",
            lambda p=pairs, o=other: error_type(
                lambda: posenc.apply_rotary(x, *posenc.rotary_cos_sin(40, 16, pairs=o), pairs=p)
            ),
        )
    degenerate = {
        "yarn_base_1": (1.0, {"rope_type": "yarn", "factor": 4.0,
                              "original_max_position_embeddings": 64}, None),
        "longrope_length_1": (10000.0, {**ROPE_SCALINGS["longrope"],
                                        "original_max_position_embeddings": 1}, None),
        "dynamic_seq_len_1e300": (10000.0, ROPE_SCALINGS["dynamic"], 10**300),
        "base_1e-310": (1e-310, None, None),
    }  # fmt: skip
    for name, (base, scaling, seq_len) in degenerate.items():
        yield (
            f"rope_frequencies/degenerate/{name}",
            lambda b=base, s=scaling, n=seq_len: error_type(
                lambda: posenc.rope_frequencies(16, base=b, scaling=s, seq_len=n)
            ),
        )
    yield (
        "sinusoidal/tensor2tensor/degenerate/base_1e-310",
        lambda: error_type(
            lambda: posenc.sinusoidal(3, 8, base=1e-310, convention="tensor2tensor")
        ),
    )
    grids = {
        "mae": ((6, 7), {}),
        "mae_knobs": ((5, 9), {"base_size": 16, "interpolation_scale": 2.0, "extra_tokens": 2}),
        "mae_cls": ((4, 4), {"cls_token": True, "offset": (3, 1.5)}),
        "timm": ((6, 7), {}),
        "timm_interleaved": ((6, 7), {}),
        "diffusers_3d": ((3, 4, 5), {"interpolation_scale": (1.0, 2.0, 2.0)}),
        "positional_encodings": ((3, 4, 5), {}),
    }
    for name, (shape, kwargs) in grids.items():
        conv = name.split("_knobs")[0].split("_cls")[0]
        for dtype in NP_DTYPES:
            for d in (16, 48):
                yield (
                    f"sinusoidal_grid/{name}/{np.dtype(dtype).name}/d{d}",
                    lambda s=shape, c=conv, t=dtype, d=d, kw=kwargs: posenc.sinusoidal_grid(
                        s, d, convention=c, dtype=t, **kw
                    ),
                )
    steps = np.array([0, 1, 2.5, 10, 999, 1000.75])
    for flip in (False, True):
        for shift in (0.0, 1.0):
            for dim in (1, 3, 8, 321):
                for dtype in NP_DTYPES:
                    yield (
                        f"timestep/{flip}/{shift}/d{dim}/{np.dtype(dtype).name}",
                        lambda f=flip, s=shift, d=dim, t=dtype: posenc.timestep_embedding(
                            steps, d, flip_sin_to_cos=f, downscale_freq_shift=s, dtype=t, scale=3.0
                        ),
                    )
    mask = np.array([[0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0]])
    yield "positions_from_mask", lambda: posenc.positions_from_mask(mask, offset=3)
    yield "positions_from_segments", lambda: posenc.positions_from_segments([[0, 0, 1, 1, 1, 2]])
    yield "positions_from_cu_seqlens", lambda: posenc.positions_from_cu_seqlens([0, 3, 3, 9])
    yield (
        "positions_from_tokens",
        lambda: posenc.positions_from_tokens([[1, 1, 5, 6], [4, 5, 6, 1]], 1, offset=2),
    )
    an = posenc.analysis
    yield "analysis/wavelengths", lambda: an.wavelengths(64)
    yield "analysis/shift_matrix", lambda: an.shift_matrix(5, 16, convention="tensor2tensor")
    yield "analysis/check_shift", lambda: an.check_shift(posenc.sinusoidal(200, 32), 7)
    yield "analysis/similarity", lambda: an.similarity(300, 64)
    yield "analysis/distinct_rows", lambda: an.distinct_rows(20000, "bfloat16", d_model=4)
    yield "analysis/precision_report", lambda: an.precision_report(10**5, 64)
    yield (
        "analysis/identify",
        lambda: an.identify(posenc.sinusoidal(np.arange(2, 60), 16, convention="tensor2tensor")),
    )
    yield (
        "analysis/identify/max_offset_2**40",
        lambda: error_type(lambda: an.identify(posenc.sinusoidal(50, 16), max_offset=2**40)),
    )
    yield (
        "analysis/identify/offset_beyond_max_offset",
        lambda: an.identify(posenc.sinusoidal(np.arange(5, 8), 2, dtype=np.float64), max_offset=1),
    )


def torch_cases() -> Iterator[tuple[str, Callable[[], Any]]]:
    import torch

    import posenc.torch as pt
    import posenc.torch.hf as hf

    torch.manual_seed(0)
    dtypes = (torch.float64, torch.float32, torch.float16, torch.bfloat16)
    for dtype in dtypes:
        dn = str(dtype).split(".")[1]
        for conv in CONVENTIONS:
            for label, pos in (
                ("L300", 300),
                ("neg", torch.arange(-100, 100)),
                ("frac", torch.linspace(-50, 50, 77, dtype=torch.float64)),
                ("batch", torch.stack([torch.arange(0, 70), torch.arange(700, 770)])),
            ):
                yield (
                    f"torch.sinusoidal/{conv}/{dn}/{label}",
                    lambda c=conv, t=dtype, p=pos: pt.sinusoidal(p, 12, convention=c, dtype=t),
                )
        yield (
            f"torch.sinusoidal/{dn}/L1e6",
            lambda t=dtype: pt.sinusoidal(10**6, 8, dtype=t),
        )
        for name, scaling in ROPE_SCALINGS.items():
            for pairs in ("half", "interleaved"):
                yield (
                    f"torch.rotary_cos_sin/{name}/{pairs}/{dn}",
                    lambda s=scaling, p=pairs, t=dtype: pt.rotary_cos_sin(
                        torch.arange(20, 120)[None], 16, scaling=s, pairs=p, dtype=t
                    ),
                )
        yield (
            f"torch.cast_exact/{dn}",
            lambda t=dtype: pt.cast_exact(torch.linspace(-3, 3, 4099, dtype=torch.float64), t),
        )
        yield (
            f"torch.timestep_embedding/{dn}",
            lambda t=dtype: pt.timestep_embedding(
                torch.tensor([0.0, 3.5, 999.0]), 33, flip_sin_to_cos=True, dtype=t
            ),
        )

    big = torch.randn(4, 2048, 256)  # 8 MiB: the fused add path
    small = torch.randn(2, 10, 24)
    for dtype in dtypes:
        dn = str(dtype).split(".")[1]
        for conv in CONVENTIONS:
            for batch_first in (True, False):
                module = pt.SinusoidalPositionalEncoding(
                    24, convention=conv, batch_first=batch_first
                ).eval()
                xs = small.to(dtype) if batch_first else small.transpose(0, 1).to(dtype)
                per_token = torch.arange(20).view(2, 10) * 3
                per_token = per_token if batch_first else per_token.T
                yield (
                    f"module.sinusoidal/{conv}/{batch_first}/{dn}",
                    lambda m=module, x=xs, pt_=per_token: (
                        m(x),
                        m(x, offset=7),
                        m(x, positions=torch.arange(10) * 2),
                        m(x, positions=pt_),
                        m(x, positions=torch.linspace(0, 5, 10, dtype=torch.float64)),
                        m(x, offset=10**6),
                        m.encoding(33, offset=5),
                        m.encoding(torch.tensor([[1, 2], [3, 400]])),
                    ),
                )
        module = pt.SinusoidalPositionalEncoding(256).eval()
        xb = big.to(dtype)
        index = torch.randint(0, 3000, (4, 2048))
        yield (
            f"module.sinusoidal/fused/{dn}",
            lambda m=module, x=xb, i=index: (
                m(x),
                m(x, positions=i),
                m(x, positions=torch.arange(2048) + 5),
                m(x, offset=100),
            ),
        )

        def inplace(m: Any = module, x: Any = xb) -> Any:
            with torch.inference_mode():
                y = x.clone()
                m.add_(y, offset=3)
                return y

        yield f"module.sinusoidal/add_/{dn}", inplace

    def train_dropout() -> Any:
        torch.manual_seed(1)
        module = pt.SinusoidalPositionalEncoding(256, dropout=0.1).train()
        out1 = module(big)
        module.dropout.p = 0.25
        out2 = module(small.new_zeros(2, 3000, 256))
        return out1, out2

    yield "module.sinusoidal/train_dropout", train_dropout

    def embedding() -> Any:
        torch.manual_seed(2)
        emb = pt.TransformerEmbedding(1000, 64, num_segments=2, padding_idx=0, dropout=0.1).eval()
        tokens = torch.randint(0, 1000, (8, 700))
        segments = torch.randint(0, 2, (8, 700))
        with torch.no_grad():
            a = emb(tokens)
            b = emb(tokens, segments=segments, offset=4)
        c = emb(tokens[:, :9])
        return a, b, c

    yield "module.embedding", embedding

    q = torch.randn(2, 4, 300, 64)
    k = torch.randn(2, 2, 300, 64)
    qs = torch.randn(1, 2, 5, 16)
    for name, scaling in ROPE_SCALINGS.items():
        for pairs in ("half", "interleaved"):
            for dtype in dtypes:
                dn = str(dtype).split(".")[1]
                rope = pt.RotaryEmbedding(16, scaling=scaling, pairs=pairs)
                yield (
                    f"module.rotary/{name}/{pairs}/{dn}",
                    lambda r=rope, t=dtype: (
                        r(qs.to(t), qs.to(t)),
                        r(qs.to(t), qs.to(t), offset=70),
                        r.rotate(qs.to(t), positions=torch.tensor([[3, 90, 200, 201, 7]])),
                        r(qs.to(t), qs.to(t), positions=torch.arange(5), seq_len=400),
                    ),
                )
    for pairs in ("half", "interleaved"):
        for dtype in dtypes:
            dn = str(dtype).split(".")[1]
            rope = pt.RotaryEmbedding(64, pairs=pairs, base=500000.0)
            partial = pt.RotaryEmbedding(64, pairs=pairs, rotary_dim=32, seq_dim=1)
            yield (
                f"module.rotary/big/{pairs}/{dn}",
                lambda r=rope, p=partial, t=dtype: (
                    r(q.to(t), k.to(t)),
                    r(q.to(t), k.to(t), offset=4000),
                    p.rotate(q.transpose(1, 2).to(t)),
                ),
            )
            cos, sin = pt.rotary_cos_sin(300, 64, pairs=pairs)
            # partial rotation (32 of 64 channels): a slice of an interleaved table is still
            # laid out for interleaved pairs; a slice of a half table is not, so half pairs
            # take the half tables of 32 channels
            part = (
                (cos[:, :32], sin[:, :32])
                if pairs == "interleaved"
                else pt.rotary_cos_sin(300, 64, rotary_dim=32, pairs=pairs)
            )
            yield (
                f"torch.apply_rotary/{pairs}/{dn}",
                lambda p=pairs, t=dtype, c=cos, s=sin, part=part: (
                    pt.apply_rotary(q.to(t), c, s, pairs=p),
                    pt.apply_rotary(q.to(t), *part, pairs=p),
                ),
            )
        other = "interleaved" if pairs == "half" else "half"
        cos, sin = pt.rotary_cos_sin(300, 64, pairs=other)
        yield (
            f"torch.apply_rotary/{pairs}/tables_for_{other}",
            lambda p=pairs, c=cos, s=sin: error_type(lambda: pt.apply_rotary(q, c, s, pairs=p)),
        )
        per_pair = tuple(t[:, :32] for t in pt.rotary_cos_sin(300, 64))  # one column per pair
        yield (
            f"torch.apply_rotary/{pairs}/one_column_per_pair",
            lambda p=pairs, t=per_pair: pt.apply_rotary(q, *t, pairs=p, rotary_dim=64),
        )
    for conv in ("mae", "timm", "diffusers_3d", "positional_encodings"):
        shape = (3, 4, 5) if conv in ("diffusers_3d", "positional_encodings") else (6, 7)
        grid = pt.SinusoidalGridEncoding(32, convention=conv, grid_shape=shape).eval()
        n = int(np.prod(shape))
        for dtype in dtypes:
            yield (
                f"module.grid/{conv}/{str(dtype).split('.')[1]}",
                lambda g=grid, t=dtype, n=n: (g(torch.ones(2, n, 32, dtype=t)), g.encoding()),
            )
    temb = pt.TimestepEmbedding(64, flip_sin_to_cos=True, downscale_freq_shift=0)
    yield "module.timestep", lambda: temb(torch.tensor([0, 1, 50, 999]))

    ids = torch.tensor([[1, 1, 5, 6, 7], [4, 5, 6, 7, 8]])
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        dn = str(dtype).split(".")[1]
        marian = hf.MarianPositions(16, num_positions=64, dtype=dtype)
        m2m = hf.M2M100Positions(16, padding_idx=1, num_positions=64, dtype=dtype)
        whisper = hf.WhisperEncoderPositions(50, 16, dtype=dtype)
        yield (
            f"hf/{dn}",
            lambda a=marian, b=m2m, c=whisper: (
                a((2, 5)),
                a((2, 5), past_key_values_length=70),
                a((2, 5), position_ids=torch.tensor([[4, 5, 6, 7, 8]])),
                b(ids),
                b(ids, past_key_values_length=3),
                b(inputs_embeds=torch.zeros(2, 5, 16)),
                c(torch.arange(50)),
                a.weight,
                c.weight,
            ),
        )
    for name, scaling in ROPE_SCALINGS.items():
        llama = hf.LlamaRotary(16, base=10000.0, scaling=scaling)
        for dtype in dtypes:
            yield (
                f"hf.LlamaRotary/{name}/{str(dtype).split('.')[1]}",
                lambda r=llama, t=dtype: r(
                    torch.zeros(1, dtype=t), torch.stack([torch.arange(30), torch.arange(100, 130)])
                ),
            )


def all_cases(with_torch: bool) -> Iterator[tuple[str, Callable[[], Any]]]:
    yield from numpy_cases()
    if with_torch:
        yield from torch_cases()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="write the hashes to this JSON file")
    parser.add_argument("--check", help="compare with the hashes in this JSON file")
    parser.add_argument("--no-torch", action="store_true", help="NumPy cases only")
    args = parser.parse_args(argv)
    try:
        import torch

        torch.set_num_threads(2)
        with_torch = not args.no_torch
    except ImportError:
        with_torch = False
    hashes: dict[str, str] = {}
    for name, call in all_cases(with_torch):
        if name in hashes:
            raise SystemExit(f"duplicate case name {name}")
        try:
            hashes[name] = digest(call())
        except Exception as exc:  # an error is an outcome too: hash its type and message
            hashes[name] = "error:" + digest(f"{type(exc).__name__}: {exc}")
    combined = digest(json.dumps(hashes, sort_keys=True))
    errors = sorted(name for name, value in hashes.items() if value.startswith("error:"))
    print(f"{len(hashes)} cases ({len(errors)} raise), combined hash {combined}")
    for name in errors:
        print(f"  raises: {name}")
    if args.out:
        with open(args.out, "w") as fh:
            json.dump({"combined": combined, "cases": hashes}, fh, indent=1, sort_keys=True)
    if args.check:
        with open(args.check) as fh:
            before = json.load(fh)["cases"]
        differ = sorted(k for k in before.keys() | hashes.keys() if before.get(k) != hashes.get(k))
        for name in differ:
            print(f"DIFFERS {name}: {before.get(name)} -> {hashes.get(name)}")
        print(f"{len(differ)} of {len(before.keys() | hashes.keys())} cases differ")
        return 1 if differ else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
