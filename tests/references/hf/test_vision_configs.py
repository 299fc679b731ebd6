"""Vision towers against transformers: every config class marked ``default_rope_type = "axial"``.

For each such class of the pinned transformers (34 model types):

(a) the plan read from ``config.json`` as files write it (the ``vision_config`` block without
    rope keys and without ``model_type``, read with ``vision=True`` from a composite of the
    parent's model_type; stand-alone towers keep their model_type), and through
    ``posenc plan --vision --json``, equals ``posenc.rope_plan`` of the transformers object;
(b) where the model has a vision rotary class, that class's cos/sin for the patch coordinates
    its model passes it equal the plan's within :data:`ULPS` float32 ulps of max(|angle|, 1),
    per element (transformers computes in float32), and the model's rotation with its tables
    gives the scores of ``posenc.apply_rotary`` with the plan's pair layout.

The towers verified numerically and those only plan-checked are listed in docs/rope-plans.md
("Vision towers"); :data:`PLAN_ONLY` says why.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import io
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import posenc

torch = pytest.importorskip("torch")
try:
    import transformers
except ImportError:  # pragma: no cover - the dev requirements install it
    if os.environ.get("CI"):
        pytest.fail("the vision config tests need transformers under CI", pytrace=False)
    pytest.skip("transformers is not installed", allow_module_level=True)

from posenc._rope.vision import VISION_OF, VISION_TOWERS  # noqa: E402
from tests.torch.hf import rope_coverage, rope_coverage_axes  # noqa: E402

PINNED = "5.23.0"

#: Towers checked on the plan only, and why no table is compared.
PLAN_ONLY = {
    "glm_image_vision": "its model has no rotary embedding (the plan rotates nothing)",
}

#: Rotary classes that return the interleaved table ([θ0, θ0, θ1, θ1, ...]).
INTERLEAVED_TABLE = rope_coverage.INTERLEAVED_TABLE

ROPE_KEYS = ("rope_parameters", "rope_scaling", "rope_theta", "model_type")


def _axial_classes() -> dict[str, type]:
    """model_type -> config class, for every config class marked axial (the first of a class
    and its deprecated alias)."""
    root = Path(transformers.__file__).parent / "models"
    found: dict[str, type] = {}
    for path in sorted(root.glob("*/configuration_*.py")):
        module = importlib.import_module(f"transformers.models.{path.parent.name}.{path.stem}")
        for cls in vars(module).values():
            if (
                inspect.isclass(cls)
                and cls.__module__ == module.__name__
                and getattr(cls, "default_rope_type", None) == "axial"
            ):
                found.setdefault(cls.model_type, cls)
    return found


@pytest.fixture(scope="module", autouse=True)
def _setup() -> None:
    if transformers.__version__ != PINNED:
        pytest.skip(f"the table describes transformers {PINNED}, not {transformers.__version__}")
    transformers.logging.set_verbosity_error()


CLASSES = _axial_classes() if transformers.__version__ == PINNED else {}
PARENT = {vision: parent for parent, vision in VISION_OF.items() if "thinker" not in parent}


def test_the_table_names_every_axial_config_class() -> None:
    assert len(CLASSES) == 34
    assert set(CLASSES) == set(VISION_TOWERS)
    for parent, vision in VISION_OF.items():  # each composite's vision_config class
        assert _sub(_sub(parent, "thinker_config") or parent, "vision_config") == vision, parent
    for model, tower in VISION_TOWERS.items():  # each class's default base
        assert CLASSES[model].default_theta == tower.theta, model


def _sub(model: str, key: str) -> str | None:
    """The model_type of the sub-config ``key`` of the config class of ``model``."""
    subs = transformers.CONFIG_MAPPING[model].sub_configs
    sub = getattr(subs.get(key), "config_class", subs.get(key))
    return getattr(sub, "model_type", None)


def file_block(config: Any) -> dict[str, Any]:
    """The config as a config.json block without rope keys nor model_type."""
    block = json.loads(config.to_json_string(use_diff=False))
    for key in ROPE_KEYS:
        block.pop(key, None)
    return block


def file_config(model: str, config: Any) -> tuple[dict[str, Any], bool]:
    """(the dict a config.json holds, whether it is read with vision=True)."""
    block = file_block(config)
    if model in PARENT:
        return {"model_type": PARENT[model], "vision_config": block}, True
    return {**block, "model_type": model}, False


def assert_same_plan(ours: Any, theirs: Any) -> None:
    assert ours.model_type == theirs.model_type
    assert len(ours.layers) == len(theirs.layers)
    assert ours.layers == theirs.layers
    assert dict(ours.kinds) == dict(theirs.kinds)
    for a, b in zip(ours.kinds.values(), theirs.kinds.values(), strict=True):
        np.testing.assert_array_equal(a.frequencies, b.frequencies)


def object_plan(model: str) -> tuple[Any, Any]:
    config = CLASSES[model]()
    return config, posenc.rope_plan(config)


@pytest.mark.parametrize("model", sorted(VISION_TOWERS))
def test_the_file_plan_equals_the_object_plan(model: str, tmp_path: Path) -> None:
    config, theirs = object_plan(model)
    data, vision = file_config(model, config)
    ours = posenc.rope_plan(data, vision=vision)
    assert_same_plan(ours, theirs)
    # the class's own dict (with its rope keys) reads the same
    assert_same_plan(posenc.rope_plan(json.loads(config.to_json_string())), theirs)
    # and posenc plan --vision --json prints that plan
    if vision:
        from posenc._io.plan_json import plan_dict
        from posenc.cli import main

        path = tmp_path / "config.json"
        path.write_text(json.dumps(data))
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert main(["plan", str(path), "--vision", "--json"]) == 0
        report = json.loads(out.getvalue())
        expected = plan_dict(theirs)
        assert report["model_type"] == expected["model_type"] == model
        assert report["kinds"] == expected["kinds"]


def _rotary_class(module: Any, config_class: type) -> type | None:
    for value in vars(module).values():
        if (
            inspect.isclass(value)
            and value.__module__ == module.__name__
            and "RotaryEmbedding" in value.__name__
            and rope_coverage._config_class(module, value) is config_class
        ):
            return value
    return None


NUMERIC = sorted(set(VISION_TOWERS) - set(PLAN_ONLY))


#: The tolerance, in float32 ulps of max(|angle|, 1). Not one: the classes' own float32
#: ``inv_freq`` is up to 4.8 ulps off the exact frequency (torch's float32 ``pow``), which posenc
#: computes in float64; on these grids the tables differ by at most 1.63 ulps.
ULPS = 2.0


def ulps(positions: np.ndarray, matrix: np.ndarray, count: float = ULPS) -> np.ndarray:
    """``count`` float32 ulps of max(|angle|, 1) per pair (the largest angle over the axes)."""
    angles = np.abs(positions.astype(np.float64))[..., :, None] * np.abs(matrix)
    ulp = np.spacing(np.maximum(angles.max(axis=-2), 1.0).astype(np.float32))
    return count * ulp.astype(np.float64)


@pytest.mark.parametrize("model", NUMERIC)
def test_the_rotary_class_gives_the_plans_tables(model: str) -> None:
    config_class = CLASSES[model]
    config = config_class()
    module = importlib.import_module(config_class.__module__.replace("configuration_", "modeling_"))
    rotary_class = _rotary_class(module, config_class)
    assert rotary_class is not None, f"no rotary class of {model} takes a {config_class.__name__}"
    data, vision = file_config(model, config)
    layer = posenc.rope_plan(data, vision=vision).layer()
    directory = module.__name__.split(".")[-2]
    grid_call = rope_coverage_axes.GRID_CALLS.get(rotary_class.__name__)
    with torch.no_grad():
        if grid_call is not None:  # a class called with its model's own grid of ids
            positions, cos, sin = grid_call(rotary_class(config), config)
        else:
            ids = rope_coverage_axes.vision_positions(directory, module, config, len(layer.axes))
            cos, sin = rotary_class(config)(torch.zeros(1), ids)
            positions = ids.numpy()
    tolerance = ulps(positions, layer.axis_frequencies().frequencies)
    ours = layer.cos_sin(positions, dtype=np.float64)
    listed = directory in INTERLEAVED_TABLE or rotary_class.__name__ in INTERLEAVED_TABLE
    table = "interleaved" if listed else "half"
    problem = rope_coverage_axes.compare_copies(layer, (cos, sin), ours, tolerance, table)
    assert problem is None, problem
    rotate = rope_coverage_axes.rotation_function(layer, module, vision=True)
    assert rotate is not None
    problem = rope_coverage_axes.compare_rotation(layer, rotate, cos, sin, positions)
    assert problem is None, problem


def test_the_tolerance_is_tight_enough_to_fail() -> None:
    config = transformers.Qwen2VLVisionConfig()
    module = importlib.import_module("transformers.models.qwen2_vl.modeling_qwen2_vl")
    ids = rope_coverage_axes.vision_positions("qwen2_vl", module, config, 2)
    cos, sin = module.Qwen2VLVisionRotaryEmbedding(config)(torch.zeros(1), ids)
    data, _ = file_config("qwen2_vl_vision", config)
    near = posenc.rope_plan(
        {**data, "vision_config": {**data["vision_config"], "rope_theta": 10001.0}}, vision=True
    ).layer()
    positions = ids.numpy()
    tolerance = ulps(positions, near.axis_frequencies().frequencies)
    ours = near.cos_sin(positions, dtype=np.float64)
    problem = rope_coverage_axes.compare_copies(near, (cos, sin), ours, tolerance, "half")
    assert "differs by" in (problem or "")


@pytest.mark.parametrize("model", sorted(PLAN_ONLY))
def test_plan_only_towers_say_why(model: str) -> None:
    _, plan = object_plan(model)
    assert not [layer for layer in plan.kinds.values() if layer.uses_positions]
    module = importlib.import_module(
        CLASSES[model].__module__.replace("configuration_", "modeling_")
    )
    assert _rotary_class(module, CLASSES[model]) is None
