"""Attention temperature in :func:`posenc.torch.hf.swap_positions`: the position-dependent
scale some attention layers put on their queries, computed by posenc (float64, rounded once)
in place of the model's own float32 formula, verified against it first.

An attention layer is examined when its config's rope plan gives it a temperature
(:attr:`posenc.RopeLayer.temperature`) and its ``forward`` (read through its decorators)
computes one in a form posenc can take over:

- **a module-level function** ``get_llama_4_attn_scale(position_ids, beta, original)``
  (Ministral 3, Mistral 4): the layer gets its own ``forward``, the model's code with that one
  name bound to posenc's scale (the model's globals are left as they are);
- **inline, behind switches of the layer** (Llama 4's ``attn_temperature_tuning``,
  ``floor_scale``, ``attn_scale`` on its layers without RoPE): the switch is turned off on the
  layer, and the queries get posenc's scale where they reach the attention function (the
  model's code, with the name of its attention-function registry bound to one that scales
  them); positions are the model's own, ``0 .. s-1`` after the cache's length.

Either way the layer is a copy of the model's (same class, sharing its parameters and
submodules), and both are run or called on probe positions past the temperature's first step
(to 2**20) before anything is replaced: the model's scale must equal posenc's within the error
of its float32 formula. Temperatures computed inline with no switch to turn off (Inkling's log
scaling) are reported by name and left to the model.
"""

from __future__ import annotations

import functools
import inspect
import types
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from ..._rope.plan import rope_plan
from ..._rope.temperature import AttentionTemperature
from ..._rope.temperature import _make as make_temperature
from .._temperature import temperature_at
from ._report import Replaced
from ._swap_bias import module_copy

__all__ = ["TemperatureForward", "TemperatureScale", "examine_temperatures", "temperature_swapped"]

_FUNCTION = "get_llama_4_attn_scale"
_SWITCHES = ("attn_temperature_tuning", "floor_scale", "attn_scale")
_INLINE_LOG = "log_scaling_n_floor"
_LOG_ATTRIBUTES = ("log_scaling_alpha", "log_scaling_n_floor")
_BUFFER = "qk_scale"
_REGISTRY = "ALL_ATTENTION_FUNCTIONS"
_SCALE = "posenc_query_scale"
#: float32 ulps of the scale its float32 formulas may be off by (a division, a log, a product)
_FLOAT32_ULPS = 4.0


def temperature_swapped(module: nn.Module) -> bool:
    """Whether ``module``'s ``forward`` is one this swap gave it (swapped before)."""
    return isinstance(vars(module).get("forward"), TemperatureForward)


class TemperatureForward:
    """The ``forward`` a swapped attention layer runs: the model's code with posenc's
    temperature (see the module docstring), called on ``module``.

    It is rebuilt from the layer's class, the temperature and the form when the model is
    copied or pickled (``torch.save`` of a whole model): a bound method would come back as
    the class's ``forward``, without posenc's temperature (and, for Llama 4, with the
    model's switched off).
    """

    def __init__(self, module: nn.Module, temperature: AttentionTemperature, form: str) -> None:
        self.module, self.temperature, self.form = module, temperature, form
        function = type(module).forward
        if form == "function":
            self.function = rebound(function, {_FUNCTION: _scale_function(temperature)})
        else:
            self.function = _switch_forward(function, temperature)

    # torch.compile runs the layer eagerly (a graph break on each side): dynamo reads the
    # globals of the model's code from its module, not from the function's own, and would
    # trace the model's temperature (none at all for Llama 4, whose switch is off)
    @torch.compiler.disable  # type: ignore[untyped-decorator]
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.function(self.module, *args, **kwargs)

    def __reduce__(self) -> tuple[Any, ...]:
        return (TemperatureForward, (self.module, self.temperature, self.form))


def examine_temperatures(model: nn.Module) -> dict[str, tuple[Replaced, nn.Module] | str]:
    """Qualified name -> ``(record, replacement)`` or the reason the layer's temperature is
    left to the model, for every attention layer whose plan has a temperature."""
    plans: dict[int, Any] = {}
    found: dict[str, tuple[Replaced, nn.Module] | str] = {}
    for name, module in model.named_modules():
        if not name or temperature_swapped(module) or isinstance(module, TemperatureScale):
            continue
        if _log_scale_module(module):
            found[name] = _examine_log_scale(module)
            continue
        names = _code_names(type(module).forward)
        if not names & {_FUNCTION, _INLINE_LOG, _BUFFER, *_SWITCHES}:
            continue
        temperature = _planned(module, plans)
        if isinstance(temperature, AttentionTemperature):
            found[name] = _examine(module, temperature, names)
        elif temperature == "refused" and _INLINE_LOG in names:
            floor = getattr(getattr(module, "config", None), _INLINE_LOG, None)
            if floor is not None and not getattr(module, "is_sliding", False):
                found[name] = (
                    f"temperature log (log_scaling_n_floor={floor}) on the queries and "
                    "relative logits: computed inside the layer's forward, left to the model"
                )
    return found


def _code_names(function: Any) -> set[str]:
    """The global and attribute names read by ``function``, through its decorators."""
    try:
        inner = inspect.unwrap(function)
    except ValueError:
        return set()
    code = getattr(inner, "__code__", None)
    return set(code.co_names) if code is not None else set()


def _planned(module: nn.Module, plans: dict[int, Any]) -> AttentionTemperature | str | None:
    """The temperature the layer's config gives it (None for none), or ``"refused"`` when its
    config has no rope plan."""
    config, index = getattr(module, "config", None), getattr(module, "layer_idx", None)
    if config is None or not isinstance(index, int) or isinstance(index, bool):
        return None
    if id(config) not in plans:
        try:
            plans[id(config)] = rope_plan(config)
        except (TypeError, ValueError):
            plans[id(config)] = "refused"  # no RoPE settings: no plan to read it from
    plan = plans[id(config)]
    if isinstance(plan, str):
        return plan
    if not 0 <= index < len(plan):
        return None
    temperature: AttentionTemperature | None = plan[index].temperature
    return temperature


def _examine(
    module: nn.Module, temperature: AttentionTemperature, names: set[str]
) -> tuple[Replaced, nn.Module] | str:
    what = temperature.describe()
    if temperature.kind == "llama4_beta" and _FUNCTION in names:
        form = "function"
    elif temperature.kind == "llama4" and set(_SWITCHES) <= names and _REGISTRY in names:
        if getattr(module, "use_rope", False) or not getattr(module, _SWITCHES[0], False):
            return f"temperature {what}: the layer's switches disagree with its config"
        form = "switch"
    elif temperature.kind == "constant" and _BUFFER in names:
        return _examine_buffer(module, temperature)
    else:
        return f"temperature {what}: computed inside the layer's forward, left to the model"
    if any(p.device.type == "meta" for p in module.parameters()):
        return f"temperature {what}: on the meta device, nothing to verify it against"
    try:
        new = _replacement(module, temperature, form)
        worst = _verify(module, new, temperature, form)
    except (AttributeError, TypeError, ValueError, RuntimeError, IndexError) as exc:
        return f"temperature {what}: not reproduced: {type(exc).__name__}: {exc}"
    if isinstance(worst, str):
        return worst
    settings = ", ".join(f"{k}={v:g}" for k, v in temperature.params)
    detail = f"{settings}, on the {temperature.scales} (max difference {worst:.2g})"
    by = f"{_FUNCTION} by posenc" if form == "function" else "query scale by posenc"
    return Replaced("", "temperature", temperature.kind, detail, by), new


# -- the layer's own forward, with one global name bound to posenc's ----------------------------


def rebound(function: Any, names: dict[str, Any]) -> Any:
    """``function`` with the globals ``names`` replaced, for it alone, through decorators
    made with ``functools.wraps`` that hold the function they wrap in their closure."""
    wrapped = getattr(function, "__wrapped__", None)
    closure = function.__closure__
    if wrapped is None:
        scope = {**function.__globals__, **names}
    else:
        scope = function.__globals__
        cells = [c for c in closure or () if _holds(c, wrapped)]
        if not cells:
            raise ValueError(f"the decorator of {function.__qualname__} is not understood")
        inner = types.CellType(rebound(wrapped, names))
        closure = tuple(inner if _holds(c, wrapped) else c for c in closure or ())
    new = types.FunctionType(
        function.__code__, scope, function.__name__, function.__defaults__, closure
    )
    new.__kwdefaults__ = function.__kwdefaults__
    new.__qualname__, new.__doc__ = function.__qualname__, function.__doc__
    vars(new).update(vars(function))
    if wrapped is not None:
        vars(new)["__wrapped__"] = inner.cell_contents
    return new


def _holds(cell: Any, value: Any) -> bool:
    try:
        return cell.cell_contents is value
    except ValueError:  # an empty cell
        return False


def _original_function(module: nn.Module, name: str) -> Any:
    return inspect.unwrap(type(module).forward).__globals__[name]


class _ScaledQueries:
    """Stands for the model's attention-function registry in one layer's ``forward``: the
    functions it hands out multiply the queries by the scale the layer passes them (float64
    from posenc, rounded to float32 unless the queries are float64), then call the model's."""

    def __init__(self, registry: Any) -> None:
        self.registry = registry

    def get_interface(self, implementation: Any, default: Any) -> Callable[..., Any]:
        return functools.partial(
            _scaled_attention, self.registry.get_interface(implementation, default)
        )

    def __getitem__(self, key: Any) -> Callable[..., Any]:
        return functools.partial(_scaled_attention, self.registry[key])

    def __getattr__(self, name: str) -> Any:
        return getattr(self.registry, name)


def _scaled_attention(
    inner: Any, module: Any, query: torch.Tensor, *args: Any, **kwargs: Any
) -> Any:
    scale = kwargs.pop(_SCALE)
    if query.dtype != torch.float64:
        scale = scale.to(torch.float32)
    return inner(module, (query * scale.to(query.device)).to(query.dtype), *args, **kwargs)


def _cache_place(function: Any) -> tuple[str, int]:
    """The name of the cache parameter of the layer's ``forward`` (``past_key_values``, or
    ``cache`` from transformers 5.25 on) and its place after ``hidden_states``."""
    names = list(inspect.signature(inspect.unwrap(function)).parameters)[2:]
    for name in ("cache", "past_key_values"):
        if name in names:
            return name, names.index(name)
    raise ValueError(f"{function.__qualname__} takes no cache ({', '.join(names)})")


def _switch_forward(function: Any, temperature: AttentionTemperature, registry: Any = None) -> Any:
    """The ``forward`` of a layer whose temperature was switched off: posenc's scale at
    ``0 .. s-1`` after the cache's length, handed to the queries by :class:`_ScaledQueries`
    (around the model's registry, or ``registry``)."""
    registry = _original_registry(function) if registry is None else registry
    inner = rebound(function, {_REGISTRY: _ScaledQueries(registry)})
    cache_name, place = _cache_place(function)

    def forward(self: Any, hidden_states: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        cache = args[place] if len(args) > place else kwargs.get(cache_name)
        if cache is None and cache_name == "cache":
            cache = kwargs.get("past_key_values")
        past = cache.get_seq_length(self.layer_idx) if cache is not None else 0
        positions = torch.arange(hidden_states.shape[1], device=hidden_states.device) + past
        kwargs[_SCALE] = temperature_at(positions, temperature).view(1, 1, -1, 1)
        return inner(self, hidden_states, *args, **kwargs)

    return forward


def _original_registry(function: Any) -> Any:
    return inspect.unwrap(function).__globals__[_REGISTRY]


def _scale_function(temperature: AttentionTemperature) -> Callable[..., torch.Tensor]:
    """posenc's ``get_llama_4_attn_scale``: ``(b, 1, s, 1)`` float64 from the plan's
    parameters (the arguments the model passes are its config's, checked equal when swapped),
    which the model rounds once to the queries' dtype."""

    def get_llama_4_attn_scale(positions_ids: torch.Tensor, *args: Any) -> torch.Tensor:
        scale = temperature_at(positions_ids, temperature)
        if positions_ids.device != scale.device:  # MPS: no float64
            scale = scale.to(device=positions_ids.device, dtype=torch.float32)
        return scale[:, None, :, None]

    return get_llama_4_attn_scale


def _replacement(module: nn.Module, temperature: AttentionTemperature, form: str) -> nn.Module:
    new = module_copy(module)
    if form == "switch":
        vars(new)[_SWITCHES[0]] = False
    vars(new)["forward"] = TemperatureForward(new, temperature, form)
    return new


# -- verification -------------------------------------------------------------------------------


def _probe_positions(temperature: AttentionTemperature) -> list[int]:
    """Starts of 8-token probes: the first positions, each side of the first two steps, and
    far ones."""
    params = dict(temperature.params)
    step = int(params.get("floor_scale", params.get("original_max_position_embeddings", 1)))
    starts = [0, step - 4, 2 * step - 4, 3 * step + 5, 2**20]
    return sorted({max(s, 0) for s in starts})


def _verify(
    module: nn.Module, new: nn.Module, temperature: AttentionTemperature, form: str
) -> float | str:
    """The largest difference of the model's scale from posenc's, relative to the scale, or
    the reason the layer stays (naming the position where they differ)."""
    if form == "function":
        return _verify_function(module, temperature)
    return _verify_switch(module, new, temperature)


def _difference(
    theirs: torch.Tensor,
    ours: torch.Tensor,
    positions: torch.Tensor,
    temperature: AttentionTemperature,
    tolerance: float,
) -> float | str:
    error = ((theirs.double() - ours.double()).abs() / ours.double().abs()).reshape(-1)
    worst = int(error.nan_to_num(nan=float("inf")).argmax())
    if not float(error[worst]) <= tolerance:
        return (
            f"temperature differs from posenc's {temperature.describe()}: the model's "
            f"{float(theirs.reshape(-1)[worst]):.9g}, posenc's "
            f"{float(ours.reshape(-1)[worst]):.9g} at position {int(positions.reshape(-1)[worst])}"
        )
    return float(error[worst])


def _verify_function(module: nn.Module, temperature: AttentionTemperature) -> float | str:
    """The model's ``get_llama_4_attn_scale`` with its config's arguments, against posenc's."""
    params = dict(temperature.params)
    rope = getattr(module.config, "rope_parameters", None) or {}
    given = (rope.get("llama_4_scaling_beta"), rope.get("original_max_position_embeddings"))
    if given != (params["beta"], params["original_max_position_embeddings"]):
        return (
            f"temperature {temperature.describe()}: the layer passes beta and "
            f"original_max_position_embeddings {given}, not the plan's"
        )
    device = next(module.parameters()).device
    positions = torch.tensor(
        [s + i for s in _probe_positions(temperature) for i in range(8)], device=device
    )[None]
    theirs = _original_function(module, _FUNCTION)(positions, *given)
    ours = _scale_function(temperature)(positions)
    if theirs.shape != ours.shape:
        shape = tuple(theirs.shape)
        return f"temperature {temperature.describe()}: the model's scale has shape {shape}"
    return _difference(theirs, ours, positions, temperature, _FLOAT32_ULPS * 2.0**-23)


class _OffsetCache:
    """A cache that holds nothing and says it holds ``length`` tokens: the layer's positions
    start there."""

    def __init__(self, length: int) -> None:
        self.length = length

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self.length

    def update(self, key: torch.Tensor, value: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        return key, value


class _Recorder:
    """An attention-function registry that records the queries and returns zeros."""

    def __init__(self) -> None:
        self.queries: list[torch.Tensor] = []

    def get_interface(self, implementation: Any, default: Any) -> Callable[..., Any]:
        return self.record

    def record(
        self,
        module: Any,
        query: torch.Tensor,
        key: Any,
        value: torch.Tensor,
        *args: Any,
        **kwargs: Any,
    ) -> Any:
        self.queries.append(query.detach())
        b, h, s = query.shape[:3]
        return torch.zeros(b, s, h, value.shape[-1], dtype=query.dtype, device=query.device), None


def _run(
    module: nn.Module, start: int, hidden: torch.Tensor, temperature: AttentionTemperature | None
) -> torch.Tensor:
    """The queries that reach the attention function of ``module`` (its temperature switched
    as it is), with posenc's ``temperature`` or none, at ``start .. start+7``."""
    recorder = _Recorder()
    forward = type(module).forward
    if temperature is None:
        function = rebound(forward, {_REGISTRY: recorder})
    else:
        function = _switch_forward(forward, temperature, recorder)
    cache_name, _ = _cache_place(forward)
    with torch.no_grad():
        function(module, hidden, None, None, **{cache_name: _OffsetCache(start)})
    return recorder.queries[-1]


def _verify_switch(
    module: nn.Module, new: nn.Module, temperature: AttentionTemperature
) -> float | str:
    """The layer run on probe positions, its temperature on (the model's) and off with
    posenc's: the queries reaching the attention function must agree."""
    parameter = next(module.parameters())
    width = getattr(getattr(module, "config", None), "hidden_size", None)
    if not isinstance(width, int):
        return f"temperature {temperature.describe()}: the layer's config has no hidden_size"
    generator = torch.Generator().manual_seed(0)
    hidden = torch.randn(1, 8, width, generator=generator).to(parameter)
    eps = torch.finfo(parameter.dtype).eps
    worst = 0.0
    for start in _probe_positions(temperature):
        theirs = _run(module, start, hidden, None)
        ours = _run(new, start, hidden, temperature)
        plain = _run(new, start, hidden, None)  # switched off: no temperature
        positions = torch.arange(start, start + 8)
        # per position: each scale, measured where the query is largest
        found = _difference(
            _measured(theirs, plain),
            _measured(ours, plain),
            positions,
            temperature,
            _FLOAT32_ULPS * 2.0**-23 + 2 * eps,
        )
        if isinstance(found, str):
            return found
        worst = max(worst, found)
    return worst


def _measured(scaled: torch.Tensor, plain: torch.Tensor) -> torch.Tensor:
    """The scale per position of ``scaled`` queries over ``plain`` ones, read at each
    position's largest query channel: ``(s,)``."""
    s = plain.shape[2]
    flat_plain = plain.double().permute(2, 0, 1, 3).reshape(s, -1)
    flat_scaled = scaled.double().permute(2, 0, 1, 3).reshape(s, -1)
    where = flat_plain.abs().argmax(dim=1, keepdim=True)
    return flat_scaled.gather(1, where)[:, 0] / flat_plain.gather(1, where)[:, 0]


# -- Ergo's constant: a buffer of the layer ---------------------------------------------------


def _examine_buffer(
    module: nn.Module, temperature: AttentionTemperature
) -> tuple[Replaced, nn.Module] | str:
    """Ergo's ``qk_scale``, ``sqrt(global_attention_scale)`` on q and on k: a copy of the layer
    gets posenc's value (float64, rounded once to the buffer's dtype), which must equal the
    model's."""
    what = temperature.describe()
    theirs = module._buffers.get(_BUFFER)
    if theirs is None or theirs.numel() != 1 or not theirs.is_floating_point():
        return f"temperature {what}: the layer's {_BUFFER} is not one number"
    if theirs.device.type == "meta":
        return f"temperature {what}: on the meta device, nothing to verify it against"
    value = dict(temperature.params)["scale"]
    ours = torch.tensor(value, dtype=torch.float64).to(theirs.dtype).to(theirs.device)
    ours = ours.reshape(theirs.shape)
    if not torch.equal(ours, theirs):
        return (
            f"temperature differs from posenc's {what}: the layer's {_BUFFER} "
            f"{float(theirs):.9g}, posenc's {value:.17g} rounded to {theirs.dtype} "
            f"{float(ours):.9g}"
        )
    new = module_copy(module)
    new._buffers[_BUFFER] = ours
    detail = f"scale={value:g} on the {temperature.scales} (its buffer {_BUFFER}, equal)"
    return Replaced("", "temperature", "constant", detail, f"{_BUFFER} by posenc"), new


# -- Inkling2-loop's log scale: a module --------------------------------------------------------


class TemperatureScale(nn.Module):
    """Replaces a module that scales per-head states by an attention temperature at their
    positions (Inkling2-loop's ``Inkling2LoopLogScale``, on its queries and relative states).

    ``forward(hidden_states, position_ids)``: ``hidden_states`` ``(b, s, heads, d)`` times the
    scale of ``position_ids`` ``(b, s)``, computed in float64 by posenc and multiplied in
    float64 (float32 on MPS), rounded once to the states' dtype.

    Args:
        temperature: the :class:`posenc.AttentionTemperature` to apply.
    """

    def __init__(self, temperature: AttentionTemperature) -> None:
        super().__init__()
        self.temperature = temperature

    def forward(self, hidden_states: torch.Tensor, position_ids: torch.Tensor) -> torch.Tensor:
        scale = temperature_at(position_ids, self.temperature)[..., None, None]
        work = torch.float32 if hidden_states.device.type == "mps" else torch.float64
        scaled = hidden_states.to(work) * scale.to(device=hidden_states.device, dtype=work)
        return scaled.to(hidden_states.dtype)

    def extra_repr(self) -> str:
        return self.temperature.describe()


def _log_scale_module(module: nn.Module) -> bool:
    """Parameter-free, holding the log scaling's settings, called ``(hidden_states,
    position_ids)``."""
    if not all(hasattr(module, a) for a in _LOG_ATTRIBUTES):
        return False
    if next(module.parameters(), None) is not None or next(module.children(), None) is not None:
        return False
    try:
        names = list(inspect.signature(module.forward).parameters)
    except (TypeError, ValueError):
        return False
    return names[:2] == ["hidden_states", "position_ids"]


def _examine_log_scale(module: nn.Module) -> tuple[Replaced, nn.Module] | str:
    alpha, floor = (getattr(module, a) for a in _LOG_ATTRIBUTES)
    try:
        temperature = _log_temperature(alpha, floor)
    except (TypeError, ValueError) as exc:
        return f"log scaling not read: {exc}"
    starts = [0, int(floor) - 4, 2 * int(floor) - 4, 2**20]
    positions = torch.tensor([[max(s, 0) + i for s in starts for i in range(8)]])
    hidden = torch.ones(1, positions.shape[1], 1, 1)
    new = TemperatureScale(temperature)
    try:
        with torch.no_grad():
            theirs = module(hidden, positions)
    except Exception as exc:  # its call is not understood
        return f"log scaling not reproduced: {type(exc).__name__}: {exc}"
    ours = new(hidden, positions)
    if not isinstance(theirs, torch.Tensor) or theirs.shape != ours.shape:
        return "log scaling not reproduced: its result has another shape"
    worst = _difference(theirs, ours, positions, temperature, _FLOAT32_ULPS * 2.0**-23)
    if isinstance(worst, str):
        return worst
    settings = ", ".join(f"{k}={v:g}" for k, v in temperature.params)
    detail = f"{settings}, on the {temperature.scales} (max difference {worst:.2g})"
    return Replaced("", "temperature", "log", detail, "TemperatureScale"), new


def _log_temperature(alpha: Any, floor: Any) -> AttentionTemperature:
    """The log scaling of a module's settings (checked: a ValueError or TypeError names them)."""
    source = "the module's log_scaling_alpha, log_scaling_n_floor"
    return make_temperature("log", source, alpha=alpha, n_floor=floor)
