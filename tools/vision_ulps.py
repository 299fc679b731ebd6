"""How far transformers' vision rotary classes are from posenc, in float32 ulps.

For every tower of ``tests/references/hf/test_vision_configs.py`` that rotates: the worst
distance of the class's float32 ``inv_freq`` from posenc's float64 frequencies (ulps of the
frequency), and of its cos/sin tables from the plan's (ulps of max(|angle|, 1)), over the
coordinates its model passes it. Run from the repository root: ``PYTHONPATH=src:. python
tools/vision_ulps.py``.
"""

from __future__ import annotations

import importlib

import numpy as np
import torch
import transformers

import posenc
from tests.torch import rope_coverage_axes as axes
from tests.torch import test_vision_configs as case


def main() -> None:
    transformers.logging.set_verbosity_error()
    worst_freq = worst_table = 0.0
    for model in case.NUMERIC:
        config_class = case.CLASSES[model]
        config = config_class()
        name = config_class.__module__.replace("configuration_", "modeling_")
        module = importlib.import_module(name)
        rotary_class = case._rotary_class(module, config_class)
        assert rotary_class is not None
        data, vision = case.file_config(model, config)
        layer = posenc.rope_plan(data, vision=vision).layer()
        rotary = rotary_class(config)
        matrix = np.abs(layer.axis_frequencies().frequencies)
        ours = np.unique(matrix[matrix > 0])
        theirs = np.sort(np.unique(rotary.inv_freq.double().numpy()))
        freq = float((np.abs(theirs - ours) / np.spacing(ours.astype(np.float32))).max())
        directory = module.__name__.split(".")[-2]
        grid_call = axes.GRID_CALLS.get(rotary_class.__name__)
        with torch.no_grad():
            if grid_call is not None:  # called with its model's own grid of ids
                positions, cos, sin = grid_call(rotary, config)
            else:
                ids = axes.vision_positions(directory, module, config, len(layer.axes))
                cos, sin = rotary(torch.zeros(1), ids)
                positions = ids.numpy()
        unit = case.ulps(positions, layer.axis_frequencies().frequencies, 1.0)
        listed = (
            directory in case.INTERLEAVED_TABLE or rotary_class.__name__ in case.INTERLEAVED_TABLE
        )
        # a pairs_per_axis layer (Gemma 4) lays out each axis's block on its own
        blocks = axes.axis_blocks(layer) if layer.pairs_per_axis else [(0, layer.rotary_dim // 2)]
        table = 0.0
        for theirs_table, ours_table in zip(
            (cos, sin), layer.cos_sin(positions, dtype=np.float64), strict=True
        ):
            theirs_flat = theirs_table.reshape(*ours_table.shape[:-1], -1)
            for start, stop in blocks:
                part, n = slice(2 * start, 2 * stop), stop - start
                layout = "interleaved" if listed else "half"
                copies = axes.per_pair(theirs_flat[..., part], layout, n)
                expected = axes.per_pair(ours_table[..., part], layer.pairs, n)[0]
                scale = unit[..., start:stop]
                table = max(table, max(float((np.abs(c - expected) / scale).max()) for c in copies))
        worst_freq, worst_table = max(worst_freq, freq), max(worst_table, table)
        print(f"{model:32s} inv_freq {freq:5.2f} ulps   tables {table:5.2f} ulps")
    print(f"worst: inv_freq {worst_freq:.2f} ulps, tables {worst_table:.2f} ulps")


if __name__ == "__main__":
    main()
