"""How ``posenc.torch.hf.swap_positions`` finds positional modules by what they compute.

``_probe`` calls a module safely, ``_rotary`` and ``_absolute`` recognise and verify the two
families, ``_seam`` reads the rope settings of a config, ``_report`` is the result and
``_swap`` walks a model. Nothing here imports ``transformers``.
"""
