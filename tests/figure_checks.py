"""What a reader needs from a figure besides its text fitting the canvas
(``figure_extents.clipped_texts``): a legend that names every curve, and a label with its
unit on every axis. The figure tests of the report, the sweeps and the notebooks use them."""

from __future__ import annotations

import re

from matplotlib.collections import PathCollection
from matplotlib.lines import Line2D

#: a label's unit: the last bracketed part, "round t [count]"
_UNIT = re.compile(r"\S.*\[([^\[\]]+)\]$")


def _drawn(artist) -> bool:
    """A line or scatter that shows data: visible, with at least one point."""
    points = artist.get_xydata() if isinstance(artist, Line2D) else artist.get_offsets()
    return artist.get_visible() and len(points) > 0


def unnamed_curves(fig) -> list[str]:
    """The curves of ``fig`` a reader cannot name, as "axes i: ...": a line or a scatter
    drawn with no label at all (matplotlib's automatic ``_child`` labels), and a labelled
    line, collection, container (an errorbar) or bar patch whose label no legend of the
    figure shows. An artist labelled ``_nolegend_`` (an errorbar's parts) and an unlabelled
    shading (a confidence band, a filled contour) are not curves."""
    shown = {t.get_text() for ax in fig.axes if ax.get_legend()
             for t in ax.get_legend().get_texts()}
    shown |= {t.get_text() for legend in fig.legends for t in legend.get_texts()}
    bad = []
    for i, ax in enumerate(fig.axes):
        artists = [*ax.get_lines(), *ax.collections, *ax.containers, *ax.patches]
        for a in artists:
            name = a.get_label() or ""
            curve = isinstance(a, (Line2D, PathCollection))
            if name.startswith("_child") and curve and _drawn(a):
                bad.append(f"axes {i}: an unlabelled {type(a).__name__}")
            elif name and not name.startswith("_") and name not in shown:
                bad.append(f"axes {i}: {name!r} is not in a legend")
    return sorted(set(bad))


def unitless_axes(fig, units, categories=()) -> list[str]:
    """Every axis of ``fig`` that shows ticks and whose label is empty or ends with no unit of
    ``units`` in brackets (``"round t [count]"``), as "axes i x|y: label"; a label in
    ``categories`` (an axis of named categories) has no unit. An axis that shares its
    neighbour's label (tick labels hidden, ``sharey``) and a colour bar are left out."""
    bad = []
    for i, ax in enumerate(fig.axes):
        if ax.get_label() == "<colorbar>":
            continue
        for which, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
            text = axis.get_label_text()
            shows = axis.get_visible() and any(t.get_visible() and t.get_text()
                                               for t in axis.get_ticklabels())
            if text in categories or (not text and not shows):
                continue
            unit = _UNIT.search(text)
            if unit is None or unit[1] not in units:
                bad.append(f"axes {i} {which}: {text!r}")
    return bad
