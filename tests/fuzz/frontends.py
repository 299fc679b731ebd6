"""The two front-ends the fuzz suite calls, defined once for the NumPy/PyTorch twins
(``test_core``/``test_torch``, ``test_multi_axis``/``test_torch_multi_axis``, and the torch
module and hf files): what a result must be and which dtype a call returns.

- NumPy (``posenc``): a result is checked by ``expect_array`` (``contract.py``); a call
  returns ``dtype=`` as given, else ``numpy_dtype``'s default (float32).
- PyTorch (``posenc.torch``): a result is checked by ``expect_tensor``; a call returns
  ``dtype=`` as given, else ``torch.get_default_dtype()`` (``torch_dtype``).

torch is imported only when a torch helper is called: the torch files skip without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .contract import Args

if TYPE_CHECKING:
    import torch

PAIRS = ("half", "interleaved")  # the two RoPE layouts, spelled the same in both front-ends


def numpy_dtype(args: Args, default: Any = np.float32) -> np.dtype:
    """The dtype a NumPy call returns: its ``dtype=`` argument, else ``default``."""
    return np.dtype(args.kwargs["dtype"]) if "dtype" in args.kwargs else np.dtype(default)


def torch_dtype(args: Args) -> torch.dtype:
    """The dtype a PyTorch call returns: its ``dtype=`` argument, else the default dtype."""
    import torch

    dtype = args.kwargs.get("dtype")
    return torch.get_default_dtype() if dtype is None else dtype


def expect_tensor(result: Any, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """``result`` is a CPU tensor of ``shape`` and ``dtype``, all finite; its float64 values."""
    import torch

    assert isinstance(result, torch.Tensor), f"expected a tensor, got {type(result).__name__}"
    assert tuple(result.shape) == tuple(shape), f"shape {tuple(result.shape)}, expected {shape}"
    assert result.dtype == dtype, f"dtype {result.dtype}, expected {dtype}"
    assert result.device.type == "cpu", f"device {result.device}"
    values = result.detach().to(torch.float64).numpy()
    assert np.all(np.isfinite(values)), "non-finite values in the result"
    return values
