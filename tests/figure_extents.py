"""Does every text of a matplotlib figure lie inside its canvas? :func:`clipped_texts` names
the ones that do not, after drawing the figure: what a test of a figure fedbound draws checks
(issue "a front door": no text at the image's edge)."""

from __future__ import annotations

import matplotlib.text


def _drawn_texts(fig) -> list:
    """The text artists ``fig`` draws: every visible, non-empty text of a visible axes (or
    of the figure), tick labels only where their tick lies inside the axis's view (an
    axis's Tick objects outside it keep texts that are not drawn)."""
    ticks, drawn = set(), []
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            for tick in [*axis.get_major_ticks(), *axis.get_minor_ticks()]:
                ticks |= {id(tick.label1), id(tick.label2)}
            for tick in axis._update_ticks():  # the ticks the axis draws
                drawn += [t for t in (tick.label1, tick.label2) if t.get_visible()]
    for t in fig.findobj(matplotlib.text.Text):
        if id(t) in ticks or not t.get_visible():
            continue
        if t.axes is not None and not t.axes.get_visible():
            continue
        drawn.append(t)
    return [t for t in drawn if t.get_text().strip()]


def clipped_texts(fig) -> list[str]:
    """The text artists of ``fig``, named by their text, whose window extent is not inside
    the figure's after ``fig.canvas.draw()`` (empty: every text is inside the canvas)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    box = fig.bbox
    out = []
    for t in _drawn_texts(fig):
        e = t.get_window_extent(renderer)
        if e.x0 < box.x0 or e.y0 < box.y0 or e.x1 > box.x1 or e.y1 > box.y1:
            out.append(t.get_text())
    return out
