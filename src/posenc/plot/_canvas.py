"""The canvas every figure of :mod:`posenc.plot` is drawn on: matplotlib's object-oriented
API with an Agg canvas, constrained layout, and saving with the titles as metadata."""

from __future__ import annotations

from pathlib import Path

try:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.layout_engine import ConstrainedLayoutEngine
    from matplotlib.ticker import MaxNLocator
except ImportError as exc:  # pragma: no cover - exercised only without matplotlib
    raise ImportError(
        "posenc.plot needs matplotlib: pip install matplotlib (or, from a clone of posenc, "
        "pip install '.[plot]')"
    ) from exc

__all__ = ["Figure", "_finish", "_index_locator", "_new_figure"]

_DPI = 100  # screen dpi of the figure; PNG files are written at _SAVE_DPI
_SAVE_DPI = 150


def _new_figure(width: float, height: float, *, wspace: float | None = None) -> Figure:
    """A Figure with an Agg canvas and constrained layout (no pyplot involved)."""
    engine = ConstrainedLayoutEngine() if wspace is None else ConstrainedLayoutEngine(wspace=wspace)
    fig = Figure(figsize=(width, height), dpi=_DPI, layout=engine)
    FigureCanvasAgg(fig)
    return fig


def _finish(fig: Figure, path: Path | None) -> Figure:
    """Save ``fig`` to ``path`` (when given) in the format of its suffix; return it.

    The file's ``Description`` metadata holds the figure's titles, settings included
    (``convention=paper, base=10000, d_model=128``), so a saved figure says what it shows.
    """
    if path is not None:
        fmt = path.suffix.lower().lstrip(".")
        titles = [fig.get_suptitle()] + [ax.get_title() for ax in fig.axes]
        described = " | ".join(" ".join(t.split()) for t in titles if t)
        fig.savefig(path, format=fmt, dpi=_SAVE_DPI, metadata={"Description": described})
    return fig


def _index_locator() -> MaxNLocator:
    """Integer ticks at round steps (1, 2, 4, 5 or 10 times a power of ten)."""
    return MaxNLocator(nbins=10, integer=True, steps=[1, 2, 4, 5, 10], min_n_ticks=1)
