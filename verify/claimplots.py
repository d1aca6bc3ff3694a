"""The figure of a decided claim, in the paper's layout: its configurations' metric against
wall-clock time, rounds or iterations (the mean over seeds and its 95% Student-t band), the
places where the claim is decided marked, the bound's prediction where one is evaluated
(its own axis, on the right), and the verdict in the title; one panel per reading of an
ambiguous step. Used by the report of ``fedbound reproduce``; :func:`claims_grid` draws many
claims as small panels of one figure (notebook 07: every claim of a paper)."""

from __future__ import annotations

import math
import textwrap

import numpy as np

from .claims import Curve
from .reproduce import ClaimResult, Reproduction
from .verdict import t_multiplier

#: colours of the verdicts in titles
VERDICT_COLOURS = {"agrees": "#1a7f37", "contradicts": "#b42318", "negligible": "#1f5f99",
                   "undecided": "#8a6d00", "fixed-by-setting": "#555555", "error": "#555555"}


def band(c: Curve) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mean, low, high) over seeds at each point of ``c``: the 95% Student-t interval."""
    n = c.y.shape[0]
    mean = c.y.mean(axis=0)
    half = t_multiplier(n) * c.y.std(axis=0, ddof=1) / math.sqrt(n) if n > 1 else 0 * mean
    return mean, mean - half, mean + half


def _panel(ax, result: ClaimResult, decision, outcome) -> None:
    claim = result.claim
    labels = list(claim.curves) or list(outcome.curves)
    bounds_drawn = []
    for i, label in enumerate(labels):
        c = outcome.curve(label)
        mean, low, high = band(c)
        colour = f"C{i % 10}"
        ax.plot(c.x, mean, color=colour, label=label, lw=1.4)
        ax.fill_between(c.x, low, high, color=colour, alpha=0.18, lw=0)
        if c.bound is not None and np.isfinite(c.bound).any():
            bounds_drawn.append((c, colour))
    for at in sorted({t.at for t in decision.tests if t.at is not None}):
        ax.axvline(at, color="0.45", ls=":", lw=1)
    first = outcome.curve(labels[0])
    ax.set_xlabel(first.xlabel or outcome.xlabel)
    ax.set_ylabel(outcome.ylabel)
    values = np.concatenate([outcome.curve(label).y.ravel() for label in labels])
    if values.min() > 0 and values.max() > 10 * values.min():
        ax.set_yscale("log")  # a loss falling over decades: the differences at the end show
    if bounds_drawn:
        twin = ax.twinx()
        for c, colour in bounds_drawn:
            ok = np.isfinite(c.bound)
            twin.plot(c.x[ok], c.bound[ok], "D", color=colour, ms=5, mfc="none")
        twin.set_yscale("log")
        twin.set_ylabel("bound (estimated constants), diamonds", fontsize=8)
    if decision.reading is not None:
        ax.set_title(f"reading '{decision.reading}': {decision.verdict}",
                     color=VERDICT_COLOURS[decision.verdict], fontsize=10)


def claim_figure(result: ClaimResult, reproduction: Reproduction):
    """The matplotlib figure of ``result`` (module docstring); None when the claim ended in
    an error (no outcome to draw)."""
    import matplotlib.pyplot as plt

    if not result.decisions:
        return None
    n = len(result.decisions)
    fig, axes = plt.subplots(1, n, figsize=(5.2 * n, 3.9), squeeze=False)
    for ax, d in zip(axes[0], result.decisions, strict=True):
        _panel(ax, result, d, reproduction.outcome(result.claim, d.reading))
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 4), fontsize=8,
               frameon=False)
    rows = math.ceil(len(labels) / 4)
    title = textwrap.fill(f"{result.claim.id}: {result.verdict} ({result.claim.cite})",
                          int(95 * n ** 0.8))
    fig.suptitle(title, fontsize=10, color=VERDICT_COLOURS[result.verdict])
    fig.subplots_adjust(left=0.1 / n ** 0.5, right=1 - 0.08 / n ** 0.5, top=0.84,
                        bottom=0.2 + 0.06 * rows, wspace=0.45)
    return fig


def claims_grid(results, reproduction: Reproduction, columns: int = 4, size=(3.4, 2.6)):
    """One figure of small panels, one per claim of ``results`` that was decided (in order,
    ``columns`` to a row, each ``size`` inches): its primary reading's curves, marks and
    bound as in :func:`claim_figure`, its id and verdict in the panel's title, its curves'
    labels in a small legend. None when no claim was decided."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter

    drawn = [r for r in results if r.decisions]
    if not drawn:
        return None
    rows = math.ceil(len(drawn) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(size[0] * columns, size[1] * rows),
                             squeeze=False)
    for ax, r in zip(axes.ravel(), drawn, strict=False):  # the last row may have blanks
        d = r.primary or r.decisions[0]
        _panel(ax, r, d, reproduction.outcome(r.claim, d.reading))
        ax.set_title(textwrap.fill(f"{r.claim.id.partition('.')[2]}: {r.verdict}", 40),
                     color=VERDICT_COLOURS[r.verdict], fontsize=8)
        ax.legend(fontsize=6, frameon=False)
    for ax in axes.ravel()[len(drawn):]:
        ax.set_visible(False)
    for ax in fig.axes:  # the panels and the bound's axes on their right
        ax.xaxis.label.set_size(7)
        ax.yaxis.label.set_size(7)
        ax.tick_params(which="both", labelsize=6)
        ax.yaxis.set_minor_formatter(NullFormatter())  # a log axis's decades only: legible, and
        # a third of the figure's drawing time spared (each minor label is typeset as math)
    # margins in inches, fixed: tight_layout would lay out every tick of every panel (seconds)
    width, height = fig.get_size_inches()
    fig.subplots_adjust(left=0.7 / width, right=1 - 0.6 / width, bottom=0.45 / height,
                        top=1 - 0.3 / height, wspace=0.6, hspace=0.55)
    return fig
