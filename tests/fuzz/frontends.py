"""The two front-ends the fuzz suite calls, and what differs between them.

A property that both front-ends have is one test body over a :class:`Frontend`
(``@each_frontend``): the namespace it calls, the argument values it takes, how a result is
checked and read back as NumPy values, which dtype a call returns.

- NumPy (``posenc``): arrays in, arrays out; a call returns ``dtype=`` as given, else float32
  (``numpy_dtype``); it computes in float64.
- PyTorch (``posenc.torch``): tensors in, CPU tensors out; a call returns ``dtype=`` as given,
  else ``torch.get_default_dtype()`` (``torch_dtype``); bfloat16 too, and a ``device=``.

Without torch the torch half of every ``@each_frontend`` test, and every ``@torch_only``
test, is skipped with the reason; the NumPy half runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import pytest
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from . import values
from .contract import Args, Drawn, expect_array

if TYPE_CHECKING:
    import torch

PAIRS = ("half", "interleaved")  # the two RoPE layouts, spelled the same in both front-ends

F64 = 2.0**-52
F32 = 2.0**-23


def numpy_dtype(args: Args, default: Any = np.float32) -> np.dtype:
    """The dtype a NumPy call returns: its ``dtype=`` argument, else ``default``."""
    return np.dtype(args.kwargs["dtype"]) if "dtype" in args.kwargs else np.dtype(default)


def torch_dtype(args: Args) -> torch.dtype:
    """The dtype a PyTorch call returns: its ``dtype=`` argument, else the default dtype."""
    import torch

    dtype = args.kwargs.get("dtype")
    return torch.get_default_dtype() if dtype is None else dtype


def expect_tensor(result: Any, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """``result`` is a CPU tensor of ``shape`` and ``dtype``, all finite; its values (float64
    for a float dtype, else exact)."""
    import torch

    assert isinstance(result, torch.Tensor), f"expected a tensor, got {type(result).__name__}"
    assert tuple(result.shape) == tuple(shape), f"shape {tuple(result.shape)}, expected {shape}"
    assert result.dtype == dtype, f"dtype {result.dtype}, expected {dtype}"
    assert result.device.type == "cpu", f"device {result.device}"
    if not result.dtype.is_floating_point:
        return result.detach().numpy()
    values = result.detach().to(torch.float64).numpy()
    assert np.all(np.isfinite(values)), "non-finite values in the result"
    return values


class Frontend:
    """What one front-end's fuzz tests need: the namespace, argument values, result checks.

    Dtypes are named by strings (``"float32"``, ``"bfloat16"``) where both front-ends meet;
    :meth:`dtype` gives the front-end's own object.
    """

    #: the test id, and the start of every call label (``prefix + "." + name``)
    name: str
    prefix: str
    #: the namespace the public functions are called in
    api: Any
    #: float dtypes the front-end takes and returns
    float_names: tuple[str, ...]
    #: ``dtype=`` of a table: valid, hostile and doubtful values
    dtypes: st.SearchStrategy[Drawn]
    #: ``dtype=`` of a bias (float16 may overflow: doubtful) and of a bias float16 holds
    bias_dtypes: st.SearchStrategy[Drawn]
    bounded_bias_dtypes: st.SearchStrategy[Drawn]
    #: values it refuses where an array of floats is expected
    not_arrays: list[Any]
    #: whether ALiBi's ``total_heads`` and ``shard`` combine (``posenc.torch``: not together)
    shards_total_heads: bool

    def label(self, function: str) -> str:
        """The label of a call of ``function`` (``test_coverage.py`` reads it)."""
        return f"{self.prefix}.{function}"

    def positions(self) -> st.SearchStrategy[Drawn]:
        """Positions of a table: an int is a length."""
        raise NotImplementedError

    def timesteps(self) -> st.SearchStrategy[Drawn]:
        """Timesteps: an int is one timestep."""
        raise NotImplementedError

    def bias_positions(self) -> st.SearchStrategy[Drawn]:
        """Query or key positions of a bias."""
        raise NotImplementedError

    def relative_positions(self) -> st.SearchStrategy[Drawn]:
        """Relative positions to bucket."""
        raise NotImplementedError

    def meaning(self, value: Any) -> tuple[tuple[int, ...], list[Any]]:
        """Shape and exact flat values of valid ``positions`` (an int is a length)."""
        raise NotImplementedError

    def draw_device(self, a: Args) -> None:
        """Draw ``device=`` where the front-end has one."""

    def dtype(self, name: str) -> Any:
        """The front-end's dtype object of ``name``."""
        raise NotImplementedError

    def dtype_name(self, dtype: Any) -> str:
        """The name of the front-end's dtype object ``dtype``."""
        raise NotImplementedError

    def result_dtype(self, a: Args, default: str | None = None) -> Any:
        """The dtype a call returns: its ``dtype=``, else ``default`` (None: the front-end's
        own default)."""
        raise NotImplementedError

    def float_arrays(self, shape: tuple[int, ...], name: str) -> st.SearchStrategy[Any]:
        """Arrays of ``shape`` and dtype ``name`` holding floats in [-4, 4]."""
        raise NotImplementedError

    def array(self, value: np.ndarray, name: str | None = None) -> Any:
        """``value`` as the front-end's array (cast to dtype ``name``)."""
        raise NotImplementedError

    def cast(self, value: Any, name: str) -> Any:
        """The front-end's array ``value`` cast to dtype ``name``."""
        raise NotImplementedError

    def to_numpy(self, value: Any) -> Any:
        """The front-end's array ``value`` as NumPy (float64 for floats, exact integers);
        anything else as it is."""
        raise NotImplementedError

    def forms(self, value: Any, dtype: Any = None) -> st.SearchStrategy[Any]:
        """Valid ``value`` in the forms the front-end takes: as it is, or as its array."""
        return st.just(value)

    def misplaced(self, value: Any) -> list[Any]:
        """``value`` where the front-end cannot use it (another device, another framework)."""
        return []

    def work_eps(self, *names: str) -> float:
        """The relative error of the arithmetic on operands of dtypes ``names``."""
        raise NotImplementedError

    def expect(self, result: Any, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        """``result`` is the front-end's array of ``shape`` and ``dtype``, all finite; its
        values (float64 for floats, exact integers)."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{self.name} front-end>"


class NumpyFrontend(Frontend):
    name, prefix = "numpy", "posenc"
    float_names = ("float16", "float32", "float64")
    dtypes = values.NUMPY_DTYPES
    not_arrays: ClassVar[list[Any]] = [None, "x", [["a"]]]
    shards_total_heads = True

    bias_dtypes, bounded_bias_dtypes = values.FLOAT_OUT, values.FLOAT_BOUNDED

    def __init__(self) -> None:
        import posenc

        self.api = posenc

    def positions(self) -> st.SearchStrategy[Drawn]:
        return values.positions()

    def timesteps(self) -> st.SearchStrategy[Drawn]:
        return values.timesteps()

    def bias_positions(self) -> st.SearchStrategy[Drawn]:
        return values.bias_positions(wrapped=True)

    def relative_positions(self) -> st.SearchStrategy[Drawn]:
        return values.NUMPY_RELATIVE

    def meaning(self, value: Any) -> tuple[tuple[int, ...], list[Any]]:
        return values.meaning(value)

    def dtype(self, name: str) -> Any:
        return np.dtype(name)

    def dtype_name(self, dtype: Any) -> str:
        return np.dtype(dtype).name

    def result_dtype(self, a: Args, default: str | None = None) -> Any:
        return numpy_dtype(a, default or np.float32)

    def float_arrays(self, shape: tuple[int, ...], name: str) -> st.SearchStrategy[Any]:
        return hnp.arrays(name, shape, elements=st.floats(-4, 4, width=16))

    def array(self, value: np.ndarray, name: str | None = None) -> Any:
        return np.asarray(value) if name is None else np.asarray(value).astype(name)

    def cast(self, value: Any, name: str) -> Any:
        return value.astype(name)

    def to_numpy(self, value: Any) -> Any:
        if isinstance(value, np.ndarray) and value.dtype.kind == "f":
            return value.astype(np.float64)
        return value

    def work_eps(self, *names: str) -> float:
        return F64  # float64 throughout, rounded once at the end

    def expect(self, result: Any, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        out = expect_array(result, shape, dtype)
        return out.astype(np.float64) if out.dtype.kind == "f" else out


class TorchFrontend(Frontend):
    name, prefix = "torch", "posenc.torch"
    float_names = ("float16", "bfloat16", "float32", "float64")
    shards_total_heads = False

    def __init__(self) -> None:
        import torch

        import posenc.torch

        from . import torch_values

        self.torch, self.values = torch, torch_values
        self.api = posenc.torch
        self.dtypes = torch_values.DTYPES
        self.bias_dtypes = torch_values.BIAS_DTYPES
        self.bounded_bias_dtypes = torch_values.BOUNDED_BIAS_DTYPES
        self.not_arrays = torch_values.NOT_TENSORS

    def positions(self) -> st.SearchStrategy[Drawn]:
        return self.values.positions()

    def timesteps(self) -> st.SearchStrategy[Drawn]:
        return self.values.timesteps()

    def bias_positions(self) -> st.SearchStrategy[Drawn]:
        return values.bias_positions()

    def relative_positions(self) -> st.SearchStrategy[Drawn]:
        return self.values.relative_positions()

    def meaning(self, value: Any) -> tuple[tuple[int, ...], list[Any]]:
        return self.values.meaning(value)

    def draw_device(self, a: Args) -> None:
        a.draw("device", self.values.DEVICES, optional=True)

    def dtype(self, name: str) -> Any:
        return getattr(self.torch, name)

    def dtype_name(self, dtype: Any) -> str:
        return str(self.values.NAMES[dtype])

    def result_dtype(self, a: Args, default: str | None = None) -> Any:
        dtype = a.kwargs.get("dtype")
        if dtype is not None:
            return dtype
        return self.torch.get_default_dtype() if default is None else self.dtype(default)

    def float_arrays(self, shape: tuple[int, ...], name: str) -> st.SearchStrategy[Any]:
        return self.values.float_tensors(shape, self.dtype(name))

    def array(self, value: np.ndarray, name: str | None = None) -> Any:
        tensor = self.torch.from_numpy(np.array(value))
        return tensor if name is None else tensor.to(self.dtype(name))

    def cast(self, value: Any, name: str) -> Any:
        return value.to(self.dtype(name))

    def to_numpy(self, value: Any) -> Any:
        if not isinstance(value, self.torch.Tensor):
            return value
        if value.is_floating_point():
            return value.detach().to(self.torch.float64).numpy()
        return value.detach().numpy()

    def forms(self, value: Any, dtype: Any = None) -> st.SearchStrategy[Any]:
        return st.sampled_from([value, self.torch.as_tensor(np.asarray(value, dtype=dtype))])

    def misplaced(self, value: Any) -> list[Any]:
        return [value.to("meta"), self.to_numpy(value)]

    def work_eps(self, *names: str) -> float:
        return F64 if "float64" in names else F32  # float32 unless a float64 operand

    def expect(self, result: Any, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        return expect_tensor(result, shape, dtype)


def _torch_frontend() -> TorchFrontend | None:
    try:
        import torch  # noqa: F401
    except ImportError:
        return None
    return TorchFrontend()


NUMPY: Frontend = NumpyFrontend()
TORCH = _torch_frontend()
NO_TORCH = "torch is not installed"

#: the parameter ``frontend`` of a property both front-ends have: NumPy, then PyTorch
each_frontend = pytest.mark.parametrize(
    "frontend",
    [
        pytest.param(NUMPY, id="numpy"),
        pytest.param(TORCH, id="torch", marks=[pytest.mark.skipif(TORCH is None, reason=NO_TORCH)]),
    ],
)
#: a property only the PyTorch front-end has
torch_only = pytest.mark.skipif(TORCH is None, reason=NO_TORCH)
#: ``pytestmark`` of a module with torch tests: one intra-op thread (``one_thread``) for them
MODULE_MARKS = [] if TORCH is None else [pytest.mark.usefixtures("one_thread")]
