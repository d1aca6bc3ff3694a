"""The layout of fedbound's figures (matplotlib; without a display it uses Agg): fixed
margins instead of ``tight_layout``, plain-text log tick labels, legends below the axes,
wrapped titles. Imports nothing of fedbound: the adapter's default figure and every
paper's figures use it (:mod:`verify.plots` draws the sweeps)."""

from __future__ import annotations

import math
import textwrap

import matplotlib.pyplot as plt
from matplotlib.ticker import LogFormatter, MaxNLocator
from matplotlib.transforms import ScaledTranslation

#: the size of the figure of one check, in inches (:meth:`verify.adapter.Adapter.plot`)
SIZE = (7, 4.6)
#: margins of a one-axes figure in inches, wide enough for log tick labels (``4×10⁻¹``), a
#: two-line label of the vertical axis (a fraction) and one line of the horizontal axis
MARGIN_LEFT, MARGIN_RIGHT, MARGIN_BOTTOM = 1.1, 0.3, 0.62
#: a title line (1.2 times the title's font size) and the room above and below the title
TITLE_LINE, TITLE_ROOM = 1.2 / 72, 0.2
#: how far below the axes a legend put there by :func:`legend_below` starts, and its height
LEGEND_DROP, LEGEND_ROW = 0.52, 0.38
#: the width of a character, in font sizes, that a title wraps at (wider than DejaVu Sans'
#: average, so that a wrapped line always fits)
CHAR_WIDTH = 0.62
_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


class PowerFormatter(LogFormatter):
    """Tick labels of a base-10 log axis as plain text, ``10⁻²`` and ``3×10⁻²``: the labels
    matplotlib writes by default, without going through mathtext (which parses every label
    and made most of a figure's cost). Which minor ticks get a label is
    :class:`~matplotlib.ticker.LogFormatter`'s choice."""

    def _num_to_string(self, x, vmin, vmax):
        exponent = math.floor(math.log10(x) + 1e-9)
        coeff = round(x / 10.0 ** exponent)
        power = "10" + str(exponent).translate(_SUPERSCRIPT)
        return power if coeff == 1 else f"{coeff}×{power}"


def plain_log_ticks(ax) -> None:
    """Every log axis of ``ax`` labelled by :class:`PowerFormatter` (major and minor ticks)."""
    for axis in (ax.xaxis, ax.yaxis):
        if axis.get_scale() == "log":
            axis.set_major_formatter(PowerFormatter())
            axis.set_minor_formatter(PowerFormatter(labelOnlyBase=False))


def integer_ticks(axis) -> None:
    """Ticks only at whole numbers on ``axis`` (an index: a cell, a round)."""
    axis.set_major_locator(MaxNLocator(integer=True))


def legend_below(ax, ncol: int = 2):
    """The legend of ``ax`` in one row below its horizontal axis label, where it cannot
    cover what the axes draw (:func:`fixed_layout` leaves room for it)."""
    below = ax.transAxes + ScaledTranslation(0, -LEGEND_DROP, ax.figure.dpi_scale_trans)
    return ax.legend(loc="upper center", bbox_to_anchor=(0.5, 0), bbox_transform=below,
                     ncol=ncol)


def wrapped_title(ax) -> int:
    """Wrap each line of the title of ``ax`` to the width of its figure, at the top of the
    axes (not moved above tick labels at the top, which a check's figure does not have:
    finding them measures every tick label); the number of lines."""
    size = ax.title.get_fontsize()
    chars = int(ax.figure.get_figwidth() * 72 / (CHAR_WIDTH * size))
    lines = [w for line in ax.get_title().split("\n") for w in textwrap.wrap(line, chars) or [""]]
    ax.set_title("\n".join(lines), fontsize=size, y=1.0)
    return len(lines) if ax.get_title() else 0


def fixed_layout(fig) -> None:
    """Lay out a figure of one axes (a check's figure) with margins computed from what it
    holds, not measured: tight_layout measures every tick label's text and made about half
    of a figure's cost. The title is wrapped to the figure's width, log axes get
    :class:`PowerFormatter` labels, and a legend below the axes (:func:`legend_below`) gets
    its row."""
    (ax,) = fig.axes
    width, height = fig.get_size_inches()
    lines = wrapped_title(ax)
    plain_log_ticks(ax)
    legend = ax.get_legend()
    below = legend is not None and legend.get_bbox_to_anchor().y1 < ax.bbox.y0
    bottom = LEGEND_DROP + LEGEND_ROW if below else MARGIN_BOTTOM
    top = lines * TITLE_LINE * ax.title.get_fontsize() + TITLE_ROOM
    fig.subplots_adjust(left=MARGIN_LEFT / width, right=1 - MARGIN_RIGHT / width,
                        bottom=bottom / height, top=1 - top / height)


def save(ax, path: str) -> str:
    """Save the figure of ``ax`` as a PNG at ``path``, laid out by tight_layout unless it
    has a layout engine of its own (:mod:`verify.plots`' figures are constrained)."""
    if ax.figure.get_layout_engine() is None:
        ax.figure.tight_layout()
    ax.figure.savefig(path, dpi=120)
    plt.close(ax.figure)
    return path
