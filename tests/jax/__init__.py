"""Tests of posenc.jax (helpers in ``tests/jax/helpers.py``)."""
