"""Comparisons with the real libraries posenc reproduces (transformers, diffusers, timm,
x-transformers...): marked ``kernel_sets``, so ``make test-kernels`` runs them again under the
CPU kernels ATen would pick on an older or plainer machine."""

from tests.folders import marks_below

pytest_collection_modifyitems = marks_below(__file__, "kernel_sets")
