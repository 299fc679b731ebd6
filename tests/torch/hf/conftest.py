"""The Hugging Face layer (``posenc.torch.hf``) on real transformers models: marked ``compat``
(``make test-compat``: the newest transformers release) and ``kernel_sets``
(``make test-kernels``: ATen's plainer CPU kernels)."""

from tests.folders import marks_below

pytest_collection_modifyitems = marks_below(__file__, "compat", "kernel_sets")
