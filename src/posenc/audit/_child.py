"""A ``"module:attr"`` subject runs in a child process, killed after a time limit.

The parent sends the config, the subject's name and the options as JSON on the child's standard
input; the child imports the subject, runs the audit and writes the report's JSON data (or
``{"error": "..."}``) on its standard output. A subject that raises is one line; one that runs
past the limit is killed with its process group.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

__all__ = ["load_spec", "run_child"]


def load_spec(spec: str) -> Any:
    """The object ``module:attr`` names (``attr`` may be dotted)."""
    module_name, _, attr = spec.partition(":")
    try:
        value: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ImportError(f"{spec}: cannot import {module_name} ({exc})") from None
    for part in attr.split("."):
        if not hasattr(value, part):
            raise AttributeError(f"{spec}: {module_name} has no attribute {attr}")
        value = getattr(value, part)
    return value


def run_child(
    config: dict[str, Any],
    reference: str,
    spec: str,
    *,
    layer_type: str | None,
    positions: list[int] | None,
    timeout: float | None,
) -> dict[str, Any]:
    """The report data of ``spec`` audited in a child process; ValueError with one line when
    it fails, TimeoutError when it runs past ``timeout`` seconds."""
    if timeout is not None and not timeout > 0:
        raise ValueError(f"timeout must be a number of seconds > 0, got {timeout!r}")
    request = json.dumps(
        {
            "config": config,
            "reference": reference,
            "spec": spec,
            "layer_type": layer_type,
            "positions": positions,
        }
    )
    child = subprocess.Popen(
        [sys.executable, "-m", "posenc.audit._child_main"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env={**os.environ, "PYTHONPATH": _python_path()},
    )
    try:
        out, err = child.communicate(request, timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill(child)
        raise TimeoutError(
            f"{spec} ran for more than {timeout:g} s (--timeout): the audit stopped it"
        ) from None
    except BaseException:
        _kill(child)
        raise
    try:
        document = json.loads(out.strip().splitlines()[-1]) if out.strip() else None
    except ValueError:
        document = None
    if not isinstance(document, dict):
        last = (err.strip().splitlines() or [f"exit status {child.returncode}"])[-1]
        raise ValueError(f"{spec}: the subject's process ended without a report ({last[:300]})")
    if "error" in document:
        raise ValueError(f"{spec}: {document['error']}")
    return document


def _python_path() -> str:
    """The working directory (where ``module`` is looked for, as ``python -m`` does), this
    posenc's folder, then the caller's ``PYTHONPATH``."""
    here = str(Path(__file__).resolve().parents[2])
    parts = [os.getcwd(), here, os.environ.get("PYTHONPATH", "")]
    return os.pathsep.join(p for p in parts if p)


def _kill(child: subprocess.Popen[str]) -> None:
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        child.kill()
    child.communicate()
