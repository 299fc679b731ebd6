"""Count the walk a reader takes through posenc's source to follow one call.

A reader follows each call into the function it calls. The walk of a call is every call into
a posenc function while it runs: *files opened* are the posenc files that run, and a *change
of file* is a call from one posenc file into a function of another (a call within a file is
read on the same page; a return goes back to a page already open). Calls through other
libraries (``torch``, ``transformers``) are transparent: the caller is the nearest posenc
frame. The imports are done, and every walk run once, before the walk is counted, so only the
call itself is measured.

    PYTHONPATH=src python tools/walk.py                 # every walk, one line each
    PYTHONPATH=src python tools/walk.py rope --files    # one walk and its files, in order

Walks:
- ``rope``: ``RotaryEmbedding(64)``, the constructor alone;
- ``rope-call``: ``RotaryEmbedding(64)(q, k)``, the constructor and one call;
- ``swap``: ``swap_positions`` on a tiny Llama (needs ``transformers``).

Printed per walk: files opened, changes of file, how many of those went back into a file
already opened, and the calls into posenc functions.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any, NamedTuple

import posenc

PACKAGE = Path(posenc.__file__).resolve().parent


def _posenc_file(frame: FrameType | None) -> str | None:
    """The posenc file of the nearest posenc frame at or above ``frame``."""
    while frame is not None:
        path = frame.f_code.co_filename
        if path.startswith(str(PACKAGE)):
            return str(Path(path).relative_to(PACKAGE.parent))
        frame = frame.f_back
    return None


def trace(call: Callable[[], Any]) -> list[tuple[str | None, str]]:
    """Every call into posenc code while ``call()`` runs, in order: (caller's file, callee's
    file), the caller being the nearest posenc frame (None: called from outside)."""
    steps: list[tuple[str | None, str]] = []

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code.co_filename.startswith(str(PACKAGE)):
            steps.append((_posenc_file(frame.f_back), str(_posenc_file(frame))))

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return steps


class Walk(NamedTuple):
    files: list[str]  # the posenc files that ran, in the order first entered
    calls: int  # calls into posenc functions
    changes: int  # calls into another file than the caller's
    back: int  # of those, calls into a file entered before


def summary(steps: list[tuple[str | None, str]]) -> Walk:
    """The walk of ``steps`` (from :func:`trace`)."""
    files: list[str] = []
    changes = back = 0
    for caller, callee in steps:
        if caller is not None and caller not in files:
            files.append(caller)
        if caller is not None and caller != callee:
            changes += 1
            back += callee in files
        if callee not in files:
            files.append(callee)
    return Walk(files, len(steps), changes, back)


def _rope() -> Callable[[], Any]:
    from posenc.torch import RotaryEmbedding

    RotaryEmbedding(64)  # warm: first-use caches of torch and NumPy are not the walk
    return lambda: RotaryEmbedding(64)


def _rope_call() -> Callable[[], Any]:
    import torch

    from posenc.torch import RotaryEmbedding

    q, k = torch.randn(1, 4, 16, 64), torch.randn(1, 2, 16, 64)
    RotaryEmbedding(64)(q, k)
    return lambda: RotaryEmbedding(64)(q, k)


def _swap() -> Callable[[], Any]:
    import transformers

    from posenc.torch.hf import swap_positions

    config = transformers.LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
    )

    def build() -> Any:
        import torch

        torch.manual_seed(0)
        return transformers.LlamaForCausalLM(config).eval()

    swap_positions(build())  # warm
    model = build()
    return lambda: swap_positions(model)


WALKS: dict[str, Callable[[], Callable[[], Any]]] = {
    "rope": _rope,
    "rope-call": _rope_call,
    "swap": _swap,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("walks", nargs="*", help=f"any of {', '.join(WALKS)} (default all)")
    parser.add_argument("--files", action="store_true", help="list the files, in order")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.walks) - set(WALKS))
    if unknown:
        parser.error(f"unknown walk {', '.join(unknown)}: choose from {', '.join(WALKS)}")
    for name in args.walks or list(WALKS):
        try:
            call = WALKS[name]()
        except ImportError as error:
            print(f"{name:10s} skipped: {error}")
            continue
        walk = summary(trace(call))
        print(
            f"{name:10s} files opened {len(walk.files):3d}, changes of file {walk.changes:4d} "
            f"({walk.back} back into a file seen), calls {walk.calls}"
        )
        if args.files:
            for path in walk.files:
                print(f"    {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
