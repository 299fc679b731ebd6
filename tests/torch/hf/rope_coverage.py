"""The RoPE coverage harness: which rotary modules of the installed transformers posenc reproduces.

A model directory of ``transformers/models`` counts when its ``modeling_*.py`` defines a class
with ``RotaryEmbedding`` in its name. It is *reproduced* when every such class in it is: each
class is built from its own config class (the defaults, plus the overrides in
:data:`OVERRIDES`), ``posenc.rope_plan`` reads the same config, and for every rotating layer
type of the plan

1. the class's own ``forward`` for the 1-D position ids a model passes it (a batch of two rows,
   ``0..63`` and ``960..1023``) equals the plan's tables, per element within
   ``(2e-6 + 1e-6·|p|·ω_k)·max(attention_factor, 1)`` (transformers computes in float32);
2. the model's own rotation (the function named by the plan's ``pairs_source``, else the
   module's ``apply_rotary_pos_emb``) applied with the class's tables gives the same attention
   scores ``q·k`` as ``posenc.apply_rotary`` with the plan's pair layout.

Multi-axis layers (M-RoPE, 2-D vision RoPE) are checked the same way with the coordinates their
models pass them (:mod:`tests.torch.hf.rope_coverage_axes`). Classes or configs that cannot be
built here, and layers whose layout the plan marks ``unsupported``, stay in the denominator
with the reason.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

import posenc
from tests.torch.hf import rope_coverage_axes as axes
from tests.torch.hf.rope_coverage_axes import short

#: Config overrides by config class (keyword arguments), harness only: they switch on the RoPE a
#: model's real checkpoints use where the class default does not, or fix a class default that
#: no checkpoint has (an odd rotated dimension).
OVERRIDES: dict[str, dict[str, Any]] = {
    # ESM-2 checkpoints use rotary embeddings; the config class defaults to absolute ones.
    "EsmConfig": {"position_embedding_type": "rotary"},
    # Granite 4 hybrid checkpoints with attention layers that rotate say "rope".
    "GraniteMoeHybridConfig": {
        "position_embedding_type": "rope",
        "num_hidden_layers": 4,
        "layer_types": ["linear_attention", "full_attention"] * 2,
    },
    # HunYuan checkpoints: NTK-alpha, written as dynamic + alpha (with YaRN-style extras).
    "HunYuanDenseV1Config": {
        "head_dim": 128,
        "rope_parameters": {
            "rope_type": "dynamic",
            "alpha": 1000.0,
            "factor": 1.0,
            "beta_fast": 32,
            "beta_slow": 1,
            "mscale": 1.0,
            "mscale_all_dim": 1.0,
            "rope_theta": 10000.0,
        },
    },
    "HunYuanMoEV1Config": {
        "head_dim": 128,
        "rope_parameters": {
            "rope_type": "dynamic",
            "alpha": 50.0,
            "factor": 1.0,
            "rope_theta": 10000.0,
        },
    },
    # Class defaults with head_dim = hidden_size // heads = 42 and 73: no checkpoint has those.
    "Glm4MoeConfig": {"head_dim": 128},
    "Glm4vMoeTextConfig": {"head_dim": 128},
    "Qwen3OmniMoeTextConfig": {"head_dim": 128},
    "Qwen3OmniMoeCode2WavConfig": {"head_dim": 64},
    # Bamba's default has no attention layer; its checkpoints have some.
    "BambaConfig": {"num_hidden_layers": 4, "attn_layer_indices": [1, 3]},
    # GLM-4.1V and GLM-Image checkpoints rotate half of each head (the class default rotates
    # all of it, which its mrope_section [8, 12, 12] cannot split).
    "Glm4vTextConfig": {"rope_parameters": {"rope_type": "default", "partial_rotary_factor": 0.5}},
    "GlmImageTextConfig": {
        "rope_parameters": {"rope_type": "default", "partial_rotary_factor": 0.5}
    },
    # The class default has no rope parameters for its layer types (the class cannot be built).
    "CohereCompassTextConfig": {
        "rope_parameters": {
            "full_attention": {"rope_type": "default", "rope_theta": 50000.0},
        },
    },
    # HunYuan-VL checkpoints give their four position axes' sections (xdrope_section); its
    # transformers class splits the doubled table by 2·sections (posenc._rope.xdrope).
    "HunYuanVLTextConfig": {
        "head_dim": 128,
        "rope_parameters": {"rope_type": "default", "xdrope_section": [16, 16, 16, 16]},
    },
}

#: The config classes a rotary class is built with, where its signature names another one (a
#: composite whose sub-configs are not the ones the model passes it).
CONFIG_FOR: dict[str, tuple[str, ...]] = {
    "BltRotaryEmbedding": (
        "BltPatcherConfig",
        "BltLocalEncoderConfig",
        "BltLocalDecoderConfig",
        "BltGlobalTransformerConfig",
    ),
    "Qwen3OmniMoeRotaryEmbedding": (
        "Qwen3OmniMoeTalkerCodePredictorConfig",
        "Qwen3OmniMoeCode2WavConfig",
    ),
}

#: Rotary classes that take no position ids, and what their angles are made of instead.
NO_POSITIONS = {
    "EsmFold2RotaryEmbedding": ": its angles turn with 3-D atom coordinates and a per-atom id, "
    "at frequencies from keys of its atom config (num_spatial_rope_pairs_per_axis, "
    "spatial_rope_base_frequency, num_uid_rope_pairs, uid_rope_base_frequency) that no rope "
    "plan reads",
    "MusicFlamingoRotaryEmbedding": ": its angles come from audio timestamps (seconds), which no "
    "rope plan reads (posenc.timestamp_positions gives its real coordinates, and the swap's "
    "TimestampRotary its tables: tests/references/hf/test_rotary_time.py)",
}

#: Models (directories, or rotary classes) whose rotary class returns the interleaved table
#: ([θ0, θ0, θ1, θ1, ...]); every other class returns the half table ([θ0 .. θn-1, θ0 .. θn-1])
#: or one angle per pair, whatever its attention does with it (some re-pair it into interleaved
#: pairs: compare_rotation checks that).
INTERLEAVED_TABLE = frozenset(
    {
        "cohere",
        "ergo",
        "cohere2",
        "cohere2_moe",
        "blt",
        "Glm4vTextRotaryEmbedding",
        "GlmOcrTextRotaryEmbedding",
        "Inkling2VisionRotaryEmbedding",
        "Sam2VideoVisionRotaryEmbedding",
        "Sam3TrackerVideoVisionRotaryEmbedding",
        "Sam3ViTRotaryEmbedding",
        "EdgeTamVideoVisionRotaryEmbedding",
        "Ernie4_5_VLMoeTextRotaryEmbedding",
        "EfficientLoFTRRotaryEmbedding",
    }
)

#: What the tests found, by directory (read by the terminal summary in tests/summaries.py), and how
#: many directories there are.
OUTCOMES: dict[str, Outcome] = {}
TOTAL = 0

POSITIONS = torch.stack([torch.arange(64), torch.arange(960, 1024)])

_CLASS = re.compile(r"^class (\w*RotaryEmbedding\w*)\(", re.M)


@dataclass
class Outcome:
    """One directory: reproduced or not, and why not."""

    directory: str
    reproduced: bool = True
    reasons: list[str] = field(default_factory=list)

    def fail(self, reason: str) -> None:
        self.reproduced = False
        if reason not in self.reasons:
            self.reasons.append(reason)

    @property
    def reason(self) -> str:
        return "; ".join(self.reasons)


def models_root() -> Path:
    import transformers

    return Path(transformers.__file__).parent / "models"


@functools.cache
def directories() -> dict[str, list[tuple[str, str]]]:
    """directory -> [(module name, class name)] for every rotary class (a text scan, once per
    session: callers must not change the lists)."""
    found: dict[str, list[tuple[str, str]]] = {}
    for path in sorted(models_root().glob("*/modeling_*.py")):
        names = _CLASS.findall(path.read_text(encoding="utf-8"))
        if names:
            module = f"transformers.models.{path.parent.name}.{path.stem}"
            found.setdefault(path.parent.name, []).extend((module, n) for n in names)
    return found


def _config_class(module: Any, cls: type) -> type | None:
    params = list(inspect.signature(cls.__init__).parameters.values())[1:]
    if not params:
        return None
    annotation = params[0].annotation
    if isinstance(annotation, str):
        annotation = getattr(module, annotation.strip("'\""), None)
    return annotation if isinstance(annotation, type) else None


#: Rotary classes that return ``(sin, cos)``, in that order (GPT-J's and CodeGen's, since
#: transformers 5.25: the halves of their ``embed_positions`` rows, sines first).
SIN_FIRST = frozenset({"GPTJRotaryEmbedding", "CodeGenRotaryEmbedding"})


def _hf_tables(module: Any, label: str | None) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.zeros(1, dtype=torch.float32)
    with torch.no_grad():
        out = module(x, POSITIONS) if label is None else module(x, POSITIONS, label)
    if isinstance(out, torch.Tensor) and out.is_complex():  # freqs_cis = cos + i·sin
        return out.real, out.imag
    if type(module).__name__ in SIN_FIRST:
        sin, cos = out
        return cos, sin
    cos, sin = out
    return cos, sin


def compare_tables(layer: Any, cos: torch.Tensor, sin: torch.Tensor, layout: str) -> str | None:
    """None when the class's tables equal the plan's within the tolerance, else why not."""
    seq_len = int(POSITIONS.max()) + 1
    omega, attention = layer.frequencies_at(seq_len)
    ours = layer.cos_sin(POSITIONS.numpy(), dtype=np.float64)
    p = POSITIONS.numpy().astype(np.float64)[..., None]
    tolerance = (2e-6 + 1e-6 * np.abs(p) * omega) * max(attention, 1.0)
    return axes.compare_copies(layer, (cos, sin), ours, tolerance, layout)


def _rotate_theirs(fn: Any, q: torch.Tensor, k: torch.Tensor, cos: Any, sin: Any) -> Any:
    fn = axes.plain_function(fn)
    names = list(inspect.signature(fn).parameters)
    if names[:4] == ["q", "k", "cos", "sin"]:
        return fn(q, k, cos, sin)
    if names[:3] == ["x", "cos", "sin"]:
        return fn(q, cos, sin), fn(k, cos, sin)
    if names[:3] == ["xq", "xk", "freqs_cis"]:
        freqs = torch.complex(cos, sin)
        out = fn(q, k, freqs)
        if out[0].shape == q.shape:
            return out
        qt, kt = (t.transpose(1, 2) for t in (q, k))  # (b, s, h, d) layout
        return tuple(t.transpose(1, 2) for t in fn(qt, kt, freqs))
    if names[:3] == ["tensor", "sin", "cos"]:  # GPT-J, CodeGen: (b, s, h, d), sines first
        qt, kt = (t.transpose(1, 2) for t in (q, k))
        return tuple(fn(t, sin, cos).transpose(1, 2) for t in (qt, kt))
    raise AssertionError(f"no adapter for {fn.__qualname__}{inspect.signature(fn)}")


def compare_rotation(layer: Any, fn: Any, cos: torch.Tensor, sin: torch.Tensor) -> str | None:
    """None when ``fn`` with the class's tables gives the scores of posenc's rotation."""
    fn = axes.plain_function(fn)
    width = 2 * (layer.rotary_dim // 2)
    b, s = POSITIONS.shape
    q_np, k_np = np.random.default_rng(0).standard_normal((2, b, 1, s, width), dtype=np.float32)
    q, k = torch.from_numpy(q_np), torch.from_numpy(k_np)
    try:
        q_theirs, k_theirs = _rotate_theirs(fn, q, k, cos, sin)
    except Exception as exc:
        return f"rotation {getattr(fn, '__qualname__', fn)} failed: {short(exc)}"
    ours_cos, ours_sin = layer.cos_sin(POSITIONS.numpy(), dtype=np.float64)
    ours = [
        posenc.apply_rotary(t[:, 0].astype(np.float64), ours_cos, ours_sin, pairs=layer.pairs)
        for t in (q_np, k_np)
    ]
    a, c = (t[:, 0].detach().numpy().astype(np.float64) for t in (q_theirs, k_theirs))
    scores_theirs = a @ np.swapaxes(c, -1, -2)
    scores_ours = ours[0] @ np.swapaxes(ours[1], -1, -2)
    worst = float(np.abs(scores_theirs - scores_ours).max())
    if not worst <= 1e-3 * math.sqrt(width):
        return f"pairs {layer.pairs!r}: q·k differs from {fn.__qualname__}'s by {worst:.3g}"
    return None


def _has_rope(config: Any) -> bool:
    parameters = getattr(config, "rope_parameters", None)
    return bool(parameters) or getattr(config, "rope_theta", None) is not None


def _parts(config: Any) -> list[Any]:
    """The configs a rotary class is built with: ``config``, its language model's, or (for
    encoder-decoder composites) each sub-config with RoPE settings of its own."""
    if _has_rope(config) or any(
        getattr(config, n, None) for n in ("text_config", "thinker_config")
    ):
        return [config]
    subs = [v for v in vars(config).values() if hasattr(v, "to_dict") and _has_rope(v)]
    return subs or [config]


def _configs(module: Any, cls: type) -> list[Any]:
    names = CONFIG_FOR.get(cls.__name__)
    if names is not None:
        classes = [getattr(module, name) for name in names]
    else:
        config_class = _config_class(module, cls)
        if config_class is None:
            raise LookupError("no config class in its signature")
        classes = [config_class]
    configs = []
    for config_class in classes:
        configs += _parts(config_class(**OVERRIDES.get(config_class.__name__, {})))
    return configs


def _check_class(outcome: Outcome, module_name: str, class_name: str) -> None:
    try:
        module = importlib.import_module(module_name)
        cls = getattr(module, class_name)
        configs = _configs(module, cls)
    except Exception as exc:
        outcome.fail(f"{class_name}: cannot build its config: {short(exc)}")
        return
    for config in configs:
        _check_config(outcome, class_name, module, cls, config)


def _check_config(outcome: Outcome, class_name: str, module: Any, cls: type, config: Any) -> None:
    forward = list(inspect.signature(cls.forward).parameters)[1:]
    grid = axes.GRID_CALLS.get(class_name)
    if forward[:2] != ["x", "position_ids"] and grid is None:
        why = NO_POSITIONS.get(class_name, "")
        outcome.fail(f"{class_name}: forward({', '.join(forward)}) takes no position ids{why}")
        return
    try:
        plan = posenc.rope_plan(config)
    except (TypeError, ValueError) as exc:
        outcome.fail(f"{class_name}: plan: {short(exc)}")
        return
    for name in plan.source.split(".")[1:-1]:  # the sub-config the plan read (text_config)
        config = getattr(config, name)
    rotating = {k: v for k, v in plan.kinds.items() if v.uses_positions}
    try:
        rotary = cls(config)
    except Exception as exc:
        outcome.fail(f"{class_name}: cannot build it: {short(exc)}")
        return
    if not rotating:
        outcome.fail(f"{class_name}: the plan has no rotating layer")
    used = {layer.layer_type for layer in plan.layers if layer.uses_positions}
    for label, layer in rotating.items():
        typed = "layer_type" in forward and hasattr(rotary, f"{label}_inv_freq")
        if "layer_type" in forward and not typed and hasattr(rotary, "layer_types"):
            if label in used:
                outcome.fail(f"{class_name}[{label}]: the class has no table for it")
            continue  # a layer type of the rope parameters that no layer uses
        where = (class_name, module, rotary, config)
        if layer.multi_axis:
            _check_axes(outcome, where, layer, label if typed else None)
        else:
            _check_layer(outcome, class_name, module, rotary, layer, label if typed else None)


def _axes_tables(
    outcome: Outcome, where: tuple[str, Any, Any, Any], layer: Any, label: str | None
) -> tuple[np.ndarray, torch.Tensor, torch.Tensor]:
    """The coordinates (..., n_axes) the model passes the class, and the class's tables."""
    class_name, module, rotary, config = where
    if class_name in axes.GRID_CALLS:
        with torch.no_grad():
            return axes.GRID_CALLS[class_name](rotary, config)
    n_axes = len(layer.axes)
    if layer.schedule == "shared":  # M-RoPE text: (n_axes, b, s) ids
        ids = axes.text_positions(module, n_axes)
        positions = np.moveaxis(ids.numpy(), 0, -1)
    else:  # vision towers: (N, n_axes) patch coordinates
        ids = axes.vision_positions(outcome.directory, module, config, n_axes)
        positions = ids.numpy()
    x = torch.zeros(1, dtype=torch.float32)
    with torch.no_grad():
        out = rotary(x, ids) if label is None else rotary(x, ids, label)
    cos, sin = out
    return positions, cos, sin


def _check_axes(
    outcome: Outcome, where: tuple[str, Any, Any, Any], layer: Any, label: str | None
) -> None:
    """A multi-axis layer: the class's tables for the model's coordinates, and its rotation."""
    class_name, module = where[:2]
    name = f"{class_name}[{label or layer.layer_type}]"
    if layer.unsupported:
        outcome.fail(f"{name}: {layer.unsupported}")
        return
    try:
        positions, cos, sin = _axes_tables(outcome, where, layer, label)
    except Exception as exc:
        outcome.fail(f"{name}: forward failed: {short(exc)}")
        return
    layout = _table_layout(outcome, class_name)
    problem = axes.compare_tables(layer, positions, cos, sin, layout)
    if problem is not None and layout == "half":  # a departure the plan names
        problem = axes.doubled_split(layer, positions, cos, sin) or problem
    if problem is None:
        fn = axes.rotation_function(layer, module, vision=layer.schedule != "shared")
        if fn is None:
            problem = "no rotation function to check the pairs with"
        else:
            problem = axes.compare_rotation(layer, fn, cos, sin, positions)
    if problem is not None:
        outcome.fail(f"{name}: {problem}")


def _table_layout(outcome: Outcome, class_name: str) -> str:
    """How the class lays out its table: ``"interleaved"`` or ``"half"``."""
    listed = outcome.directory in INTERLEAVED_TABLE or class_name in INTERLEAVED_TABLE
    return "interleaved" if listed else "half"


def _check_layer(
    outcome: Outcome, class_name: str, module: Any, rotary: Any, layer: Any, label: str | None
) -> None:
    try:
        cos, sin = _hf_tables(rotary, label)
    except Exception as exc:
        outcome.fail(f"{class_name}[{label or layer.layer_type}]: forward failed: {short(exc)}")
        return
    problem = compare_tables(layer, cos, sin, _table_layout(outcome, class_name))
    if problem is None:
        fn = axes.rotation_function(layer, module, vision=False)
        if fn is None:
            problem = "no apply_rotary_pos_emb to check the pairs with"
        else:
            problem = compare_rotation(layer, fn, cos, sin)
    if problem is not None:
        outcome.fail(f"{class_name}[{label or layer.layer_type}]: {problem}")


def check_directory(directory: str, classes: list[tuple[str, str]]) -> Outcome:
    """Whether posenc reproduces every rotary class of ``directory``."""
    outcome = Outcome(directory)
    for module_name, class_name in classes:
        _check_class(outcome, module_name, class_name)
    return outcome
