"""The figure of a decided claim, in the paper's layout: its configurations' metric against
wall-clock time, rounds or iterations (the mean over seeds and its 95% Student-t band), the
places where the claim is decided marked, the bound's prediction where one is evaluated
(its own axis, on the right), one panel per reading of an ambiguous step; and beside the
curves a forest plot of every test: its mean paired difference and 95% interval, coloured by
its verdict, against its margin band (``verify.decide``). Every text stays inside the canvas
(matplotlib's constrained layout), the legend names every curve and mark, and
:func:`claim_caption` describes what the figure draws and nothing else. Used by the report
of ``fedbound reproduce``; :func:`claims_grid` draws many claims as small panels of one
figure (notebook 07: every claim of a paper)."""

from __future__ import annotations

import math
import textwrap

import numpy as np

from .claims import Curve
from .reproduce import ClaimResult, Reproduction
from .verdict import t_multiplier

#: colours of the verdicts in titles and in the forest plot
VERDICT_COLOURS = {"agrees": "#1a7f37", "contradicts": "#b42318", "negligible": "#1f5f99",
                   "undecided": "#8a6d00", "fixed-by-setting": "#555555", "error": "#555555"}
#: the colours of the forest plot's bands: an ordering's margin around the claimed value
#: (inside it the difference is negligible), a similar claim's tolerance (inside it agrees)
MARGIN_COLOUR, TOLERANCE_COLOUR = "0.85", "#cfe8d5"
#: characters per line of a test's name beside its row of the forest plot
NAME_WIDTH = 34


def band(c: Curve) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mean, low, high) over seeds at each point of ``c``: the 95% Student-t interval."""
    n = c.y.shape[0]
    mean = c.y.mean(axis=0)
    half = t_multiplier(n) * c.y.std(axis=0, ddof=1) / math.sqrt(n) if n > 1 else 0 * mean
    return mean, mean - half, mean + half


def _labels(result: ClaimResult, outcome) -> list[str]:
    return list(result.claim.curves) or list(outcome.curves)


def _drawn(result: ClaimResult, reproduction: Reproduction) -> dict:
    """What the curve panels of ``result`` draw: marks (the decision points), bounds."""
    marks = bounds = False
    for d in result.decisions:
        outcome = reproduction.outcome(result.claim, d.reading)
        marks |= any(t.at is not None for t in d.tests)
        bounds |= any(outcome.curve(label).bound is not None
                      and np.isfinite(outcome.curve(label).bound).any()
                      for label in _labels(result, outcome))
    return {"marks": marks, "bounds": bounds}


def _panel(ax, result: ClaimResult, decision, outcome, small: bool = False) -> None:
    labels = _labels(result, outcome)
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
        ax.axvline(at, color="0.45", ls=":", lw=1, label="where the claim is decided")
    first = outcome.curve(labels[0])
    ax.set_xlabel(first.xlabel or outcome.xlabel or "x")
    ax.set_ylabel(outcome.ylabel or result.claim.metric)
    values = np.concatenate([outcome.curve(label).y.ravel() for label in labels])
    values = values[np.isfinite(values)]
    if values.size and values.min() > 0 and values.max() > 10 * values.min():
        ax.set_yscale("log")  # a loss falling over decades: the differences at the end show
    if bounds_drawn:
        twin = ax.twinx()
        for c, colour in bounds_drawn:
            ok = np.isfinite(c.bound)
            twin.plot(c.x[ok], c.bound[ok], "D", color=colour, ms=4 if small else 5, mfc="none",
                      label="the bound (estimated constants), right axis")
        twin.set_yscale("log")
        twin.set_ylabel("bound (estimated constants)")
    if decision.reading is not None and not small:
        ax.set_title(f"reading '{decision.reading}': {decision.verdict}",
                     color=VERDICT_COLOURS[decision.verdict], fontsize=10)


def _claimed_value(t) -> float | None:
    return t.lower if t.kind == "above" else t.upper if t.kind == "below" else None


def _forest_range(tests) -> tuple[float, float]:
    """The horizontal range of the forest plot: every finite effect, interval end, claimed
    value and margin or tolerance edge, with a margin of 8% either side."""
    xs = [0.0]
    for t in tests:
        xs += [x for x in (t.effect, t.low, t.high, _claimed_value(t)) if x is not None]
        if t.margin is not None and t.kind in ("above", "below", "between"):
            xs += t.boundaries()
    xs = [x for x in xs if math.isfinite(x)]
    lo, hi = min(xs), max(xs)
    pad = 0.08 * (hi - lo) if hi > lo else max(abs(hi), 1.0) * 0.1
    return lo - pad, hi + pad


def forest(ax, result: ClaimResult) -> None:
    """The forest plot of ``result`` on ``ax``: one row per test of every reading (top to
    bottom), its mean paired difference and 95% interval coloured by its verdict, the claimed
    value (a thin line) inside its margin band (an ordering: grey, +- the margin) or the
    tolerance of a similar claim (green); a test the setting fixes is said so in its row."""
    rows = [(d.reading, t) for d in result.decisions for t in d.tests]
    lo, hi = _forest_range([t for _, t in rows])
    n = len(rows)
    names = []
    for i, (reading, t) in enumerate(rows):
        y = n - 1 - i
        v = _claimed_value(t)
        if t.kind in ("above", "below") and t.margin is not None:
            ax.fill_betweenx([y - 0.4, y + 0.4], v - t.margin, v + t.margin, color=MARGIN_COLOUR,
                             lw=0, label="+- the margin around the claimed value")
            ax.plot([v, v], [y - 0.4, y + 0.4], color="0.35", lw=0.8)
        elif t.kind == "between":
            ax.fill_betweenx([y - 0.4, y + 0.4], max(t.lower, lo), min(t.upper, hi),
                             color=TOLERANCE_COLOUR, lw=0, label="the tolerance of a similar claim")
        colour = VERDICT_COLOURS[t.verdict]
        if t.effect is None:
            ax.text((lo + hi) / 2, y, "fixed by the setting", ha="center", va="center",
                    fontsize=8, color=colour)
        else:
            ax.errorbar([t.effect], [y], xerr=[[t.effect - t.low], [t.high - t.effect]], fmt="o",
                        color=colour, ms=4, capsize=3, lw=1.2,
                        label="mean paired difference, 95% interval")
        name = f"{reading}: {t.name}" if reading is not None else t.name
        names.append(textwrap.fill(name, NAME_WIDTH) + f"\n[{t.verdict}]")
    ax.set_yticks(range(n - 1, -1, -1), names, fontsize=7)
    for tick, (_, t) in zip(ax.get_yticklabels(), rows, strict=True):
        tick.set_color(VERDICT_COLOURS[t.verdict])
    ax.set_xlim(lo, hi)
    ax.set_ylim(-0.6, n - 0.4)
    ax.set_xlabel(f"paired difference ({result.claim.metric})")
    ax.set_title("each test against its margin", fontsize=10)
    ax.tick_params(axis="x", labelsize=8)


def _legend_entries(fig) -> tuple[list, list]:
    """One legend entry per distinct label of every axes of ``fig``, in drawing order."""
    seen: dict = {}
    for ax in fig.axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            seen.setdefault(label, handle)
    return list(seen.values()), list(seen)


def claim_figure(result: ClaimResult, reproduction: Reproduction):
    """The matplotlib figure of ``result`` (module docstring): one panel of curves per
    reading, the forest plot of every test beside them, one legend naming every curve, mark
    and band below; None when the claim ended in an error (no outcome to draw)."""
    import matplotlib.pyplot as plt

    if not result.decisions:
        return None
    n = len(result.decisions)
    rows = sum(len(d.tests) for d in result.decisions)
    fig = plt.figure(figsize=(4.6 * n + 4.8, max(4.2, 0.5 * rows + 2.6)), layout="constrained")
    axes = fig.subplots(1, n + 1, width_ratios=[1] * n + [1.05])
    for ax, d in zip(axes[:n], result.decisions, strict=True):
        _panel(ax, result, d, reproduction.outcome(result.claim, d.reading))
    forest(axes[n], result)
    handles, labels = _legend_entries(fig)
    fig.legend(handles, labels, loc="outside lower center", ncol=min(len(labels), 3),
               fontsize=8, frameon=False)
    fig.suptitle(textwrap.fill(f"{result.claim.id}: {result.verdict} ({result.claim.cite})",
                               int(16 * (4.6 * n + 4.8))), fontsize=10,
                 color=VERDICT_COLOURS[result.verdict])
    return fig


def claim_caption(result: ClaimResult, reproduction: Reproduction) -> str:
    """The caption of :func:`claim_figure` (``result``): what it draws, and only that."""
    if not result.decisions:
        return ""
    drawn = _drawn(result, reproduction)
    parts = [f"Left: each configuration's {result.claim.metric}, the mean over seeds and its "
             "95% band" + ("; one panel per reading of the algorithm" if len(result.decisions) > 1
                           else "")]
    if drawn["marks"]:
        parts.append("dotted vertical lines: where the claim is decided")
    if drawn["bounds"]:
        parts.append("diamonds (right axis): the bound with estimated constants")
    tests = [t for d in result.decisions for t in d.tests]
    right = ("Right: each test's mean paired difference and 95% interval, coloured by its "
             "verdict")
    if any(t.kind in ("above", "below") for t in tests):
        right += ", against the claimed value and +- its margin (grey: an interval inside it is " \
                 "negligible)"
    if any(t.kind == "between" for t in tests):
        right += ", against its tolerance (green: an interval inside it agrees)"
    if any(t.effect is None for t in tests):
        right += "; a test the setting fixes runs no test and is said so in its row"
    return "; ".join(parts) + ". " + right + "."


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
        _panel(ax, r, d, reproduction.outcome(r.claim, d.reading), small=True)
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
