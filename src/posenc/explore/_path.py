"""The guided path: the page opens on these steps, in the order of the tutorial's ideas.

Each step is one idea with one live figure (a panel's, computed by the server as the panel
is), one or two of that panel's controls (the others stay at their defaults), a sentence to
try and one to notice, and a link to the matching section of a tutorial page that the
explorer serves itself (:mod:`._docs`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ._controls import Control
from ._site import BY_NAME


@dataclass(frozen=True)
class Step:
    """One step: ``panel`` draws its figure with ``controls`` exposed (names of the panel's
    controls), ``values`` overriding some defaults, ``ranges`` narrowing an exposed control's
    range to the values the step's others allow, ``figures`` the panel's figures the step
    shows (by index: one, or two that make one idea); ``link`` is ``page#anchor``."""

    name: str
    title: str
    idea: str
    panel: str
    controls: tuple[str, ...]
    try_: str
    notice: str
    link: str
    values: tuple[tuple[str, Any], ...] = ()
    ranges: tuple[tuple[str, float, float], ...] = ()
    figures: tuple[int, ...] = (0,)

    def exposed(self) -> list[Control]:
        """The step's controls: the panel's, with the step's default and a range narrowed
        to what the step's other values allow (the server still accepts the panel's)."""
        fixed, ranges = dict(self.values), {n: (lo, hi) for n, lo, hi in self.ranges}
        shown = []
        for c in BY_NAME[self.panel].controls:
            if c.name in self.controls:
                low, high = ranges.get(c.name, (c.low, c.high))
                shown.append(replace(c, default=fixed.get(c.name, c.default), low=low, high=high))
        return shown

    def as_dict(self) -> dict[str, Any]:
        fixed = dict(self.values)
        controls = [c.as_dict() for c in self.exposed()]
        hidden = {k: v for k, v in fixed.items() if k not in self.controls}
        page, _, anchor = self.link.partition("#")
        return {
            "name": self.name,
            "title": self.title,
            "look": self.idea,
            "panel": self.panel,
            "controls": controls,
            "fixed": hidden,
            "try": self.try_,
            "notice": self.notice,
            "link": {"href": f"/docs/{page}#{anchor}", "page": page, "anchor": anchor},
            "figures": list(self.figures),
        }


STEPS = (
    Step("need", "What a position code must do", "Attention alone cannot tell the order of "
         "its tokens: each position needs a vector of its own, different from every other, "
         "bounded, and defined for any length.", "heatmap", ("length",),
         "Drag the length from 100 to ten million.",
         "Every row (position) differs from the others, and every value stays between -1 "
         "and 1, however long the sequence.", "tutorial#1-why-positions"),
    Step("table", "The sinusoid table", "Each channel is a sine or a cosine of the position, "
         "each pair of channels at its own speed.", "channels", ("length", "channels"),
         "Drag the length to see more periods; then type other channels, such as 2, 3, 20, 21.",
         "Channels 2i and 2i+1 have the same wavelength, a quarter period apart; later pairs "
         "turn more slowly.", "tutorial#2-what-the-sinusoids-are",
         (("channels", "0, 1, 10, 11"), ("length", 60))),
    Step("wavelengths", "Wavelengths", "The wavelengths grow geometrically, from 2π to "
         "base·2π.", "wavelengths", ("base",),
         "Drag the base from 10000 down to 100, then up to a million.",
         "The points stay on a straight line (a log scale): each wavelength is the previous "
         "one times the same ratio; the base sets the longest.",
         "tutorial#3-wavelengths-in-a-geometric-progression"),
    Step("shift", "The shift is a rotation", "Moving from position p to p + k turns each pair "
         "by the angle k·ω, whatever p is.", "shift", ("p", "k"),
         "Drag p: the points move round the circle, but the arc between them stays the same. "
         "Then drag k.",
         "The 2×2 block of M_k depends on k only: one matrix maps every PE[p] to PE[p+k].",
         "tutorial#4-the-shift-is-a-rotation"),
    Step("similarity", "Similarity falls with distance", "Two rows are alike when their "
         "positions are close, whatever the positions are.", "similarity", ("d_model",),
         "Drag d_model from 64 down to 8 and up to 512.",
         "The dot product is largest at distance 0 and falls, with ripples; more channels "
         "give a smoother fall.", "tutorial#5-nearby-positions-look-alike"),
    Step("precision", "Precision", "A computer stores each value with a few digits: the float32 "
         "recipe (the usual code, which computes the angles in float32) loses them at long "
         "positions; posenc does not.", "precision",
         ("max_position",),
         "Drag the largest position up to 10^8.",
         "The recipe's error grows with the position (its angles are float32); posenc's "
         "stays at one rounding of float32.", "tutorial#6-precision-what-a-computer-stores"),
    Step("bug", "The odd-exponent cosine bug", "A common tutorial bug gives the cosine of a "
         "pair another frequency than its sine.", "bug", ("pair",),
         "Drag the pair from 0 to 7.",
         "With the bug the cosine channel drifts away from the correct one, and the shift "
         "residual (the largest |PE[p+1] - M_1·PE[p]|) is far from 0: no rotation maps PE[p] "
         "to PE[p+1].",
         "tutorial#7-the-odd-exponent-cosine-bug-recognised", (), (("pair", 0, 7),)),
    Step("rope", "RoPE: rotate q and k", "RoPE turns each pair of the query by p·ω and of "
         "the key by its own position: their score depends on the distance only.", "rope",
         ("p", "distance"),
         "Drag the query position p and watch the pair turn; then drag the distance.",
         "Moving p turns query and key together: the score stays put (the lower figure is "
         "flat). Only the distance changes it.",
         "rope#2-why-the-score-depends-only-on-the-distance", (("p", 100),),
         (("p", 100, 10**7), ("distance", 0, 100)), (0, 1)),
    Step("scaling", "Scalings for long context", "To read past the trained context, "
         "scalings stretch the long wavelengths and leave the short ones alone.", "scaling",
         ("rope_type", "factor"),
         "Switch the rope type between linear, yarn and llama3, then drag the factor.",
         "Linear stretches every wavelength; yarn and llama3 stretch only those above the "
         "trained context.", "rope#4-what-the-scalings-change"),
    Step("alibi", "Biases: ALiBi", "ALiBi adds no vector: each head subtracts a slope times "
         "the distance from the attention score.", "alibi", ("heads",),
         "Drag the number of heads from 8 to 12.",
         "Steep heads look close by, shallow ones far; with 12 heads (not a power of two) "
         "the slopes zig-zag, by the paper's rule.", "attention-biases#alibi"),
    Step("buckets", "Biases: T5 buckets", "T5 gives each relative position a bucket: exact "
         "near the query, logarithmic further out.", "buckets", ("max_distance",),
         "Drag max_distance from 128 to 1000.",
         "Near distances get a bucket each; far ones share wide buckets, so the model cannot "
         "tell far keys apart.", "attention-biases#t5-and-deberta-buckets", (),
         (("max_distance", 16, 10_000),)),
)  # fmt: skip
