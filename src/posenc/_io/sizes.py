"""Sizes in bytes: the default limit on what a reader allocates, and how a size is written."""

from __future__ import annotations

import os

__all__ = ["FALLBACK_MAX_BYTES", "default_max_bytes", "format_size"]

#: ``default_max_bytes()`` where the size of physical memory cannot be read: 2 GiB.
FALLBACK_MAX_BYTES = 2 * 2**30


def default_max_bytes() -> int:
    """A quarter of physical memory (``SC_PAGE_SIZE * SC_PHYS_PAGES / 4``), or 2 GiB
    (:data:`FALLBACK_MAX_BYTES`) where the system does not say."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return FALLBACK_MAX_BYTES
    return total // 4 if total > 0 else FALLBACK_MAX_BYTES


def format_size(size: int) -> str:
    """``size`` bytes for a message: exact below 1 MiB, else 4 digits in MiB .. PiB.

    >>> format_size(4096), format_size(200_000_000), format_size(500 * 2**30)
    ('4,096 bytes', '190.7 MiB', '500 GiB')
    """
    for power, unit in ((50, "PiB"), (40, "TiB"), (30, "GiB"), (20, "MiB")):
        if size >= 2**power:
            return f"{size / 2**power:.4g} {unit}"
    return f"{size:,} bytes"
