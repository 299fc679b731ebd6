"""The fast paths (``posenc.torch._kernels``) against their formulas: marked ``kernel_sets``,
since what a kernel computes can depend on the vector width of ATen's CPU kernels
(``make test-kernels`` runs them under ``default`` and ``avx2``)."""

from tests.folders import marks_below

pytest_collection_modifyitems = marks_below(__file__, "kernel_sets")
