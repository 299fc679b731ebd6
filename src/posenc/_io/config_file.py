"""The JSON object of a ``config.json`` that may be hostile: its size checked against the limit
before it is read, UTF-8 JSON holding one object nested at most :data:`MAX_DEPTH` levels deep."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .files import FileError, check_regular_file
from .sizes import format_size

__all__ = ["MAX_DEPTH", "read_config_file"]

#: The deepest nesting of lists and objects accepted in a config file.
MAX_DEPTH = 64

_CHUNK = 1 << 20  # bytes read at a time


def read_config_file(path: Path, max_bytes: int) -> dict[str, Any]:
    """The JSON object in ``path``, read at most ``max_bytes``; one-line errors naming it."""
    check_regular_file(path, expected="a config.json file")
    size = path.stat().st_size
    if size > max_bytes:
        raise FileError(
            f"{path} holds {format_size(size)}, more than --max-bytes ({format_size(max_bytes)});"
            " pass a larger --max-bytes to read it"
        )
    data = _read_bounded(path, max_bytes)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FileError(f"{path} is not UTF-8 text (byte {exc.start})") from None
    try:
        config = json.loads(text)
    except RecursionError:
        raise FileError(f"{path} nests lists or objects deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:
        raise FileError(f"{path} is not valid JSON ({exc})") from None
    if not isinstance(config, dict):
        raise FileError(f"{path} must hold a JSON object (a config.json), got {_kind(config)}")
    if _depth(config) > MAX_DEPTH:
        raise FileError(f"{path} nests lists or objects deeper than {MAX_DEPTH} levels")
    return config


def _read_bounded(path: Path, max_bytes: int) -> bytes:
    """The bytes of ``path``, read in chunks of at most :data:`_CHUNK` (a device or a growing
    file may hold more than its size said): what is allocated is what the file holds."""
    chunks, total = [], 0
    with path.open("rb") as file:
        while chunk := file.read(min(_CHUNK, max_bytes + 1 - total)):
            chunks.append(chunk)
            total += len(chunk)
            if total > max_bytes:
                raise FileError(f"{path} holds more than --max-bytes ({format_size(max_bytes)})")
    return b"".join(chunks)


def _kind(value: Any) -> str:
    names = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number")


def _depth(value: Any) -> int:
    """How deeply lists and dicts nest in ``value`` (without recursion)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item
        deepest = max(deepest, depth)
        stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list))
    return deepest
