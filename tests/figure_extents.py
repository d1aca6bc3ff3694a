"""Where a figure's text lies once drawn: :func:`clipped_texts` names every text artist that
does not fit inside the figure's canvas (a tick label cut at the edge, a legend hanging off
the side, a title above the top). The figure tests of the report, the sweeps, the claims
and the notebooks use it."""

from __future__ import annotations

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.text import Text

#: how far (pixels) a text's extent may pass the canvas's edge: anti-aliasing, not clipping
TOLERANCE = 0.5


def _hidden_tick_labels(fig) -> set[int]:
    """The ids of the tick labels that are not drawn: those of ticks outside their axis's
    view (matplotlib keeps them, at stale positions, but draws only the ticks in view)."""
    hidden = set()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            lo, hi = sorted(axis.get_view_interval())
            for ticks, locs in ((axis.get_major_ticks(), axis.get_majorticklocs()),
                                (axis.get_minor_ticks(), axis.get_minorticklocs())):
                for tick, x in zip(ticks, locs, strict=False):
                    if not lo <= x <= hi:
                        hidden.update((id(tick.label1), id(tick.label2)))
    return hidden


def clipped_texts(fig) -> list[str]:
    """The text artists of ``fig`` (named by their text) whose window extent is not inside
    the figure's after ``fig.canvas.draw()``: every visible, non-empty text (titles, axis
    labels, tick labels in view, legend entries and title, annotations, a colorbar's). A
    figure made without pyplot (``matplotlib.figure.Figure``) is given an Agg canvas."""
    if not hasattr(fig.canvas, "get_renderer"):
        FigureCanvasAgg(fig)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    inside = fig.bbox.padded(TOLERANCE)
    hidden = _hidden_tick_labels(fig)
    out = []
    for t in fig.findobj(lambda a: isinstance(a, Text)):
        if id(t) in hidden or not t.get_visible() or not t.get_text().strip():
            continue
        box = t.get_window_extent(renderer)
        if not (inside.x0 <= box.x0 and box.x1 <= inside.x1
                and inside.y0 <= box.y0 and box.y1 <= inside.y1):
            out.append(t.get_text())
    return out
