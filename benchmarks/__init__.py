"""Reproducible measurement scripts; run from the repository root with ``python -m``."""
