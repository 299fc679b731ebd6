"""``posenc identify FILE``: which convention, base and offset produced a stored table.

Reads ``.npy``, ``.npz`` (``--key`` picks the array), and with the optional packages installed
``.pt``/``.pth``/``.bin`` (PyTorch, loaded with ``weights_only=True``) and ``.safetensors``
state dicts (``--key`` names the tensor, e.g. ``model.encoder.embed_positions.weight``).

Exit code 0 when a convention matches, 1 when none does, 2 when the file cannot be used.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ._common import add_subcommand

HELP = "report which convention, base and position offset produced a stored table"

_TORCH_SUFFIXES = (".pt", ".pth", ".bin")


def add_parser(sub: Any) -> None:
    parser = add_subcommand(sub, "identify", HELP, __doc__)
    parser.add_argument("file", type=Path, metavar="FILE", help=".npy, .npz, .pt or .safetensors")
    parser.add_argument("--key", help="the array's name inside .npz/.pt/.safetensors files")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from .._describe import describe
    from ..analysis import identify

    name, table, tolerance = load_table(args.file, args.key)
    result = identify(table, tolerance=tolerance)
    if args.json:
        report = {"file": str(args.file), "key": name, "shape": list(table.shape)}
        report["dtype"] = str(table.dtype) if tolerance is None else "bfloat16"
        print(json.dumps(report | result.as_dict() | {"message": describe(result)}, indent=2))
    else:
        where = f"{args.file}" + (f" [{name}]" if name else "")
        dtype = str(table.dtype) if tolerance is None else "bfloat16"
        print(f"{where}: {table.shape[0]} x {table.shape[1]} {dtype}")
        print(describe(result))
    return 0 if result.matched else 1


def load_table(path: Path, key: str | None) -> tuple[str | None, npt.NDArray[Any], float | None]:
    """Load the 2-D table ``key`` from ``path``: ``(name, array, tolerance)``.

    ``tolerance`` is None except for bfloat16 tensors, which arrive as float32 and need a
    bfloat16-sized tolerance.
    """
    if not path.exists():
        raise FileNotFoundError(f"no such file: {path}")
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a directory, expected a file")
    suffix = path.suffix.lower()
    if suffix == ".npy":
        if key is not None:
            raise ValueError(f"--key does not apply to .npy files (got --key {key!r})")
        return None, _check_table(path, None, _load_npy(path)), None
    if suffix == ".npz":
        with np.load(path, allow_pickle=False) as archive:
            name = _choose(path, key, {k: archive[k] for k in archive.files})
            array = archive[name]
        return name, _check_table(path, name, array), None
    if suffix in _TORCH_SUFFIXES or suffix == ".safetensors":
        tensors = _load_torch(path) if suffix in _TORCH_SUFFIXES else _load_safetensors(path)
        name = _choose(path, key, tensors)
        array, tolerance = _tensor_to_numpy(tensors[name])
        return name, _check_table(path, name, array), tolerance
    raise ValueError(
        f"FILE must end in .npy, .npz, .pt, .pth, .bin or .safetensors, got {path.name!r}"
    )


def _load_npy(path: Path) -> npt.NDArray[Any]:
    try:
        return np.load(path, allow_pickle=False)  # type: ignore[no-any-return]
    except ValueError as exc:
        raise ValueError(f"{path} is not a readable .npy array ({exc})") from None


def _check_table(path: Path, name: str | None, value: Any) -> npt.NDArray[Any]:
    where = f"{path}" + (f" [{name}]" if name else "")
    array: npt.NDArray[Any] = np.asarray(value)
    if array.dtype.kind not in "fiu":
        raise TypeError(f"{where} must hold numbers, got dtype {array.dtype}")
    if array.ndim != 2:
        raise ValueError(
            f"{where} must be a 2-D table (positions x channels), got shape {array.shape}"
        )
    return array


def _choose(path: Path, key: str | None, arrays: Mapping[str, Any]) -> str:
    """The key to use: ``key`` if given (and present), else the only 2-D array in the file."""
    if key is not None:
        if key not in arrays:
            raise ValueError(f"--key {key!r} is not in {path}; it holds: {_listing(arrays)}")
        return key
    tables = [k for k, v in arrays.items() if len(getattr(v, "shape", ())) == 2]
    if len(tables) == 1:
        return tables[0]
    if not tables:
        raise ValueError(f"{path} holds no 2-D array; it holds: {_listing(arrays)}")
    raise ValueError(f"{path} holds several 2-D arrays; choose one with --key: {_listing(arrays)}")


def _listing(arrays: Mapping[str, Any], limit: int = 12) -> str:
    """Up to ``limit`` names with shapes, 2-D arrays named like positions first."""

    def rank(item: tuple[str, Any]) -> tuple[bool, bool]:
        name, value = item
        return (len(getattr(value, "shape", ())) != 2, "pos" not in name.lower())

    items = sorted(arrays.items(), key=rank)
    shown = [f"{k} {tuple(getattr(v, 'shape', ()))}" for k, v in items[:limit]]
    more = f" and {len(items) - limit} more" if len(items) > limit else ""
    return ", ".join(shown) + more if shown else "nothing"


def _load_torch(path: Path) -> dict[str, Any]:
    try:
        import torch
    except ImportError:
        raise ImportError(f"reading {path.suffix} files needs PyTorch: pip install torch") from None
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many kinds for unreadable files
        raise ValueError(f"{path} is not a readable PyTorch file ({type(exc).__name__})") from None
    flat: dict[str, Any] = {}
    _flatten(obj, "", flat, torch.Tensor)
    if not flat:
        raise ValueError(f"{path} holds no tensors")
    return flat


def _flatten(obj: Any, prefix: str, out: dict[str, Any], tensor: type) -> None:
    if isinstance(obj, tensor):
        out[prefix or "tensor"] = obj
    elif isinstance(obj, Mapping):
        for k, v in obj.items():
            _flatten(v, f"{prefix}.{k}" if prefix else str(k), out, tensor)
    elif isinstance(obj, list | tuple):
        for i, v in enumerate(obj):
            _flatten(v, f"{prefix}.{i}" if prefix else str(i), out, tensor)


def _load_safetensors(path: Path) -> dict[str, Any]:
    try:
        from safetensors import safe_open
    except ImportError:
        raise ImportError("reading .safetensors files needs: pip install safetensors") from None
    try:
        import torch  # noqa: F401  (bfloat16 tensors need the torch framework)

        framework = "pt"
    except ImportError:
        framework = "np"
    try:
        with safe_open(str(path), framework=framework) as f:
            return {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118 (not a dict)
    except Exception as exc:  # safetensors raises its own error types
        raise ValueError(f"{path} is not a readable .safetensors file ({exc})") from None


def _tensor_to_numpy(tensor: Any) -> tuple[npt.NDArray[Any], float | None]:
    if isinstance(tensor, np.ndarray):
        return tensor, None
    import torch

    if tensor.dtype == torch.bfloat16:
        # bfloat16 values are exact in float32; tolerate one bfloat16 unit (2^-8 near 1).
        return tensor.float().numpy(), 2.0**-8
    return tensor.detach().numpy(), None
