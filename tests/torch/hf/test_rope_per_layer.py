"""Per-layer RoPE properties for every model of the installed transformers with per-layer rope
settings: the checks transformers' own suite skips for them (frequencies per layer type,
scaling properties per layer), against posenc's plan, on the pinned release and (``make
test-compat``) the newest.

The models are found by a scan (:func:`rope_per_layer.per_layer_directories`): a rotary class
with one table per layer type (nested ``rope_parameters``, ``None`` for a type without RoPE, or
keyed by another label, as DeepSeek-V4's ``main``/``compress``) or a per-layer list
(``layer_rope_theta``). The ones transformers skips by name (Gemma 4, Gemma4Unified,
DeepSeek-V4, MiMo-V2-Flash, A.X-K2) must be in the release. Each model is checked with its
class defaults and with YaRN on one layer type and linear scaling on another, so that every
model has a scaled layer next to an unscaled one.
"""

from __future__ import annotations

import copy
import importlib
import inspect
import warnings
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")

import posenc  # noqa: E402
from tests.torch.hf import rope_coverage  # noqa: E402
from tests.torch.hf import rope_per_layer as checks  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")

ROOT = rope_coverage.models_root()
_CLASSES = rope_coverage.directories()  # one scan of the modeling files, shared
SCANNED = checks.per_layer_directories(ROOT, _CLASSES)
CHECKED = sorted(set(SCANNED) | set(checks.NAMED))

YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 256}
LINEAR = {"rope_type": "linear", "factor": 2.0}

#: Models whose scaled copy must have checked a YaRN layer next to a default one.
SCALED = ("gemma4", "gemma4_unified", "deepseek_v4", "mimo_v2_flash", "axk2", "gemma3", "lfm3")


def test_the_models_transformers_skips_are_in_the_release_and_found() -> None:
    missing = [d for d in checks.NAMED if not (ROOT / d).is_dir()]
    assert not missing, missing
    by_type = {d for d, kind in SCANNED.items() if kind == "by layer type"}
    assert {"gemma4", "gemma4_unified", "deepseek_v4", "mimo_v2_flash"} <= by_type
    assert {"granite_swa", "muse_spark"} <= {d for d, k in SCANNED.items() if k != "by layer type"}


def _variants(config: Any, used: set[str]) -> list[Any]:
    """The class default, and a scaled copy: YaRN on the last layer type of rope type default
    and linear scaling on another one, of those the layers use (``used``); a flat parameter
    set: YaRN."""
    try:
        params = config.rope_parameters
    except AttributeError:  # ESM: rotary_pct-style settings, no parameter sets
        return [config]
    if not isinstance(params, dict) or not params:
        return [config]
    keep = ("rope_theta", "partial_rotary_factor")
    if not any(isinstance(v, dict) for v in params.values()):
        scaled = {**{k: v for k, v in params.items() if k in keep}, **YARN}
    else:
        plain = [
            k
            for k, v in params.items()
            if k in used and isinstance(v, dict) and v["rope_type"] == "default"
        ]
        if not plain:
            return [config]
        scaled = copy.deepcopy(params)
        scaled[plain[-1]] = {**{k: v for k, v in params[plain[-1]].items() if k in keep}, **YARN}
        if len(plain) > 1:
            scaled[plain[0]] = {**params[plain[0]], **LINEAR}
    variant = copy.deepcopy(config)
    variant.rope_parameters = scaled
    return [config, variant]


def _rotary_classes(directory: str) -> list[tuple[Any, type]]:
    found = []
    for module_name, class_name in _CLASSES.get(directory, []):
        module = importlib.import_module(module_name)
        cls = getattr(module, class_name)
        if "position_ids" in inspect.signature(cls.forward).parameters:
            found.append((module, cls))
    return found


def _check_typed(module: Any, cls: type, config: Any, types: set[str]) -> list[str]:
    """A rotary class (one table per layer type, or one for all) against the plan; the rope
    types of the layers checked go into ``types``."""
    plan = posenc.rope_plan(config)
    for name in plan.source.split(".")[1:-1]:
        config = getattr(config, name)
    rotary = cls(config)
    used = {layer.layer_type for layer in plan.layers} or set(plan.kinds)
    problems = []
    for label, layer in plan.kinds.items():
        if label not in used or layer.schedule not in (None, "shared"):  # vision towers
            continue
        inv_freq = getattr(rotary, f"{label}_inv_freq", None)
        scaling = getattr(rotary, f"{label}_attention_scaling", None)
        if inv_freq is None and not any(hasattr(rotary, f"{k}_inv_freq") for k in plan.kinds):
            inv_freq, scaling = rotary.inv_freq, rotary.attention_scaling  # one table for all
        found = [checks.nope_problem(layer, inv_freq is not None)]
        if layer.uses_positions and inv_freq is not None:
            found += [
                checks.frequency_problem(layer, inv_freq.numpy()),
                checks.attention_problem(layer, scaling),
            ]
            found += checks.property_problems(layer)
            types.add(str(layer.rope_type))
        problems += [f"{cls.__name__}[{label}]: {p}" for p in found if p is not None]
    return problems


@pytest.mark.parametrize("directory", [d for d in CHECKED if SCANNED.get(d) != "per-layer list"])
def test_each_layer_type_has_the_frequencies_and_scaling_of_the_plan(directory: str) -> None:
    classes = _rotary_classes(directory)
    assert classes, f"{directory}: no rotary class that takes position ids"
    problems, checked, types = [], 0, set()
    for module, cls in classes:
        try:
            configs = rope_coverage._configs(module, cls)
        except Exception:  # composite classes the coverage harness lists with the reason
            continue
        for config in configs:
            plan = posenc.rope_plan(config)
            if any(kind.schedule not in (None, "shared") for kind in plan.kinds.values()):
                continue  # vision towers: the coverage harness checks them
            if checks.uses_layer_types(cls) or directory in checks.NAMED:
                for variant in _variants(config, {layer.layer_type for layer in plan.layers}):
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        problems += _check_typed(module, cls, variant, types)
                    checked += 1
    assert checked, f"{directory}: no rotary class checked"
    assert not problems, problems
    if directory in SCALED:
        assert {"default", "yarn"} <= types, types  # a scaled layer type next to a plain one


# -- per-layer lists (layer_rope_theta): what the model passes each decoder layer -------------

#: Sizes that make the text models tiny (the MoE ones too).
TINY = dict(
    hidden_size=32, intermediate_size=32, num_hidden_layers=4, num_attention_heads=2,
    num_key_value_heads=1, head_dim=16, vocab_size=64, num_local_experts=2,
    num_experts_per_tok=1, moe_intermediate_size=16, moe_hidden_size=32,
)  # fmt: skip

#: Bases per layer: the global one, none, another one, the global one.
BASES = [10000.0, 0, 500.0, 10000.0]


def _config_class(directory: str) -> type:
    module = importlib.import_module(f"transformers.models.{directory}")
    names = [n for n in dir(module) if n.endswith("Config") and "Vision" not in n]
    text = [n for n in names if "Text" in n]
    return getattr(module, (text or sorted(names, key=len))[0])


def _passed_tables(directory: str, bases: list[float]) -> tuple[Any, list[Any]]:
    """The tiny config, and the ``position_embeddings`` each decoder layer receives."""
    config = _config_class(directory)(
        **TINY, rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        layer_rope_theta=bases,
    )  # fmt: skip
    torch.manual_seed(0)
    model = transformers.AutoModel.from_config(config).eval()
    seen: dict[int, Any] = {}
    for i, layer in enumerate(model.layers):
        layer.register_forward_pre_hook(
            lambda _m, _a, kw, i=i: seen.__setitem__(i, kw.get("position_embeddings")),
            with_kwargs=True,
        )
    with torch.no_grad():
        model(input_ids=torch.arange(8)[None])
    return config, [seen[i] for i in range(len(bases))]


#: The models whose attention rotates every layer with a non-zero layer_rope_theta at the
#: global rope_theta (the value is read as a flag): MuseSpark, MuseGlimmer.
GLOBAL_BASE = ("muse_spark", "muse_glimmer")

LISTED = [d for d in CHECKED if SCANNED.get(d) == "per-layer list"]


@pytest.mark.parametrize("directory", LISTED)
def test_each_layer_gets_the_base_and_the_no_rope_of_its_list_entry(directory: str) -> None:
    config, passed = _passed_tables(directory, BASES)
    plan = posenc.rope_plan(config)
    positions = np.arange(8)
    for i, (layer, tables) in enumerate(zip(plan, passed, strict=True)):
        assert checks.nope_problem(layer, tables is not None) is None, i
        if tables is None:
            continue
        ours = layer
        if directory in GLOBAL_BASE:
            assert any("layer_rope_theta" in n and "global" in n for n in plan.notes), plan.notes
            ours = posenc.rope_plan({**config.to_dict(), "layer_rope_theta": None})[i]
        cos, _ = ours.cos_sin(positions, dtype=np.float64)
        assert np.abs(tables[0][0].double().numpy() - cos).max() < 1e-6, (directory, i)


# -- each check fails on a wrong plan -----------------------------------------------------------

GEMMA4 = {
    "model_type": "gemma4_text", "head_dim": 16, "global_head_dim": 32, "num_hidden_layers": 2,
    "layer_types": ["sliding_attention", "full_attention"],
    "rope_parameters": {
        "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
        "full_attention": {
            "rope_type": "proportional", "rope_theta": 1000000.0, "partial_rotary_factor": 0.25
        },
    },
}  # fmt: skip


def _kind(rope_type: str, **params: Any) -> Any:
    config = {
        "model_type": "llama", "head_dim": 32, "num_hidden_layers": 1,
        "max_position_embeddings": 4096,
        "rope_parameters": {"rope_type": rope_type, "rope_theta": 10000.0, **params},
    }  # fmt: skip
    return posenc.rope_plan(config).layer()


def test_the_frequency_check_fails_when_every_layer_has_the_global_base() -> None:
    module = importlib.import_module("transformers.models.gemma4.modeling_gemma4")
    config = transformers.Gemma4TextConfig(
        head_dim=16, global_head_dim=32, num_hidden_layers=2,
        layer_types=["sliding_attention", "full_attention"],
    )  # fmt: skip
    rotary = module.Gemma4TextRotaryEmbedding(config)
    theirs = rotary.sliding_attention_inv_freq.numpy()
    right = posenc.rope_plan(config).layer("sliding_attention")
    assert checks.frequency_problem(right, theirs) is None
    wrong = replace(right, frequencies=posenc.rope_frequencies(16, base=1000000.0)[0])
    assert "differ" in checks.frequency_problem(wrong, theirs)


def test_the_attention_check_fails_without_yarns_factor() -> None:
    yarn = _kind("yarn", factor=4.0, original_max_position_embeddings=256)
    assert yarn.attention_factor > 1
    assert checks.attention_problem(yarn, yarn.attention_factor) is None
    assert checks.attention_problem(replace(yarn, attention_factor=1.0), yarn.attention_factor)


def test_the_default_check_fails_on_a_scaled_schedule() -> None:
    plain = _kind("default")
    assert checks.default_problem(plain) is None
    assert checks.default_problem(replace(plain, frequencies=plain.frequencies / 2))


@pytest.mark.parametrize(
    ("rope_type", "params"),
    [
        ("yarn", {"factor": 4.0, "original_max_position_embeddings": 256}),
        ("linear", {"factor": 4.0}),
        (
            "llama3",
            {
                "factor": 4.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                "original_max_position_embeddings": 256,
            },
        ),
    ],
)  # fmt: skip
def test_the_scaling_check_fails_on_each_wrong_schedule(rope_type: str, params: dict) -> None:
    layer = _kind(rope_type, **params)
    assert checks.scaling_problem(layer) is None
    plain = posenc.rope_frequencies(32, base=10000.0)[0]
    ramp = plain / np.linspace(1.0, 4.0, plain.size)
    wrong = [plain, plain / 4, plain / np.linspace(4.0, 1.0, plain.size)]  # reversed ramp
    if rope_type == "linear":
        wrong = [plain, ramp]
    for frequencies in wrong:
        assert checks.scaling_problem(replace(layer, frequencies=frequencies)), frequencies


def test_the_proportional_check_fails_when_every_pair_turns() -> None:
    full = posenc.rope_plan(GEMMA4).layer("full_attention")
    assert checks.scaling_problem(full) is None
    every = posenc.rope_frequencies(32, base=1000000.0)[0]
    assert checks.scaling_problem(replace(full, frequencies=every))


def test_the_no_rope_check_fails_when_the_plan_rotates_a_layer_the_model_does_not() -> None:
    plan = posenc.rope_plan({**GEMMA4, "rope_parameters": {
        "sliding_attention": GEMMA4["rope_parameters"]["sliding_attention"],
        "full_attention": None,
    }})  # fmt: skip
    assert checks.nope_problem(plan.layer("full_attention"), False) is None
    assert checks.nope_problem(plan.layer("sliding_attention"), False)
    assert checks.nope_problem(plan.layer("full_attention"), True)


def test_the_per_layer_list_check_fails_when_the_plan_uses_the_global_base() -> None:
    config, passed = _passed_tables("granite_swa", BASES)
    wrong = posenc.rope_plan({**config.to_dict(), "layer_rope_theta": None})[2]
    cos, _ = wrong.cos_sin(np.arange(8), dtype=np.float64)
    assert np.abs(passed[2][0][0].double().numpy() - cos).max() > 0.1
