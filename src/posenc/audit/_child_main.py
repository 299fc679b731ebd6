"""The child process of a ``"module:attr"`` subject (``python -m posenc.audit._child_main``):
the request on standard input, the report's JSON data (or ``{"error": ...}``) on the last line
of standard output."""

from __future__ import annotations

import json
import sys
from typing import Any

from .._rope.plan import rope_plan
from ._audit import audit_plan, context_of, resolve_subject
from ._child import load_spec


def _main() -> None:  # pragma: no cover - runs in the child process
    request = json.loads(sys.stdin.read())
    try:
        value = load_spec(request["spec"])
        subject = resolve_subject(value)
        report = audit_plan(
            rope_plan(request["config"]),
            subject,
            reference=request["reference"],
            context=context_of(request["config"]),
            layer_type=request["layer_type"],
            positions=request["positions"],
        )
        document: dict[str, Any] = report.as_dict()
        document["subject"] = request["spec"]
    except Exception as exc:
        text = " ".join(str(exc).split()) or type(exc).__name__
        document = {"error": f"{type(exc).__name__}: {text}"[:500]}
    sys.stdout.write("\n" + json.dumps(document) + "\n")


if __name__ == "__main__":  # pragma: no cover
    _main()
