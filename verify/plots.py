"""Figures: bounds against measurements along a swept field, sweeps, and the choosers'
figures (matplotlib; without a display it uses Agg). The figure of one check is the
adapter's (``Adapter.plot``); :func:`fixed_layout` lays it out for the report.

Axis labels name a quantity and then its unit in brackets, ``"round t [count]"``
(:func:`verify.units.label`, re-exported here with the units; see :mod:`verify.units`).
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import LogFormatter, MaxNLocator
from matplotlib.transforms import ScaledTranslation

from .adapter import adapter_for, default_scenario
from .check import check
from .units import (  # noqa: F401 - re-exported: plots.label, plots.UNITS, the units
    COUNT,
    GRAD2,
    INDEX,
    LOSS,
    PARAM2,
    RATIO,
    SCENARIO,
    STEP,
    TIME,
    UNITS,
    label,
)

# ---------------------------------------------------------------- axis labels

#: the unit of a scenario field put on an axis; per paper where a name means another thing
#: there (HFL's T is a time, Ali & Arafa 2025; AFL's server step eta multiplies eta_L, Yang
#: et al. 2022, Algorithms 2 and 3, so it has no unit)
FIELD_UNITS = {**dict.fromkeys(("K", "q", "tau", "Q", "R", "T", "M", "m", "hubs", "workers",
                                "replicas"), COUNT),
               **dict.fromkeys(("S", "t_comm", "t_comp", "delays"), TIME),
               **dict.fromkeys(("eta", "eta_L", "alpha"), STEP),
               **dict.fromkeys(("p", "zeta", "beta"), RATIO)}
PAPER_FIELD_UNITS = {"hfl": {"T": TIME}, "afl": {"eta": RATIO, "s = eta eta_L": STEP}}


def field_label(field: str, key: str = "") -> str:
    """The axis label of scenario field ``field`` (dotted, as :func:`flatten` names it) in a
    figure of result ``key``."""
    name = field.rsplit(".", 1)[-1]
    paper = PAPER_FIELD_UNITS.get(key.split(".", 1)[0], {})
    return label(field, paper.get(name, FIELD_UNITS.get(name, SCENARIO)))


def lhs_label(key: str) -> str:
    """The label of the left-hand side of ``key``'s bound (its adapter's, with its unit);
    a generic one with the scenario's units where ``key`` has no adapter."""
    try:
        return adapter_for(key).lhs_label
    except ValueError:
        return label("left-hand side", SCENARIO)


def against(key: str, field: str, values: Sequence, scenario=None, *,
            variant: str | None = None, exact: bool = False, x: str | None = None, ax=None):
    """Bound and measurement of ``key`` as one scenario field takes ``values``.

    ``x`` names the derived parameter to put on the horizontal axis (e.g. ``"zeta"``
    while sweeping ``hubs`` on a path graph); by default the swept field itself."""
    scenario = default_scenario(key) if scenario is None else scenario
    verdicts = [check(key, scenario.replace(**{field: v}), variant=variant, exact=exact)
                for v in values]
    xs = [vd.params[x] for vd in verdicts] if x else list(values)
    ax = ax or plt.subplots(figsize=(6, 4))[1]
    ax.plot(xs, [vd.bound for vd in verdicts], "o-", label=f"bound [{verdicts[0].variant}]")
    mean = np.array([vd.measured_mean for vd in verdicts])
    lo, hi = (np.array(c) for c in zip(*(vd.measured_ci for vd in verdicts), strict=True))
    ax.errorbar(xs, mean, yerr=[mean - lo, hi - mean], fmt="s-", capsize=3,
                label="measured" + (" (exact)" if exact else " (95% CI)"))
    ax.set_yscale("log")
    ax.set_xlabel(field_label(x or field, key))
    ax.set_ylabel(lhs_label(key))
    ax.set_title(f"{key} against {x or field}")
    ax.legend()
    return ax


# ---------------------------------------------------------------- a check's figure, laid out

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
    ax.figure.tight_layout()
    ax.figure.savefig(path, dpi=120)
    plt.close(ax.figure)
    return path


# ---------------------------------------------------------------- sweeps


def flatten(d: dict, prefix: str = "") -> dict:
    """Nested scenario fields as dotted names: {"problem": {"sigma": 1}} -> {"problem.sigma": 1}."""
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def swept_fields(rows: Sequence[dict]) -> list[str]:
    """Numeric scalar scenario fields that take more than one value over the sweep's rows."""
    flat = [flatten(r["scenario"]) for r in rows]
    names = sorted(set().union(*flat)) if flat else []
    def numeric(v):
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    return [n for n in names
            if all(numeric(f.get(n)) for f in flat) and len({f.get(n) for f in flat}) > 1]


def sweep_against(rows: Sequence[dict], field: str, ax=None):
    """Bound and measured mean (95% interval) of a sweep's stored verdicts against ``field``."""
    done = sorted((r for r in rows if r["verdict"] is not None),
                  key=lambda r: flatten(r["scenario"])[field])
    x = np.array([flatten(r["scenario"])[field] for r in done], dtype=float)
    bound = np.array([r["verdict"]["bound"] for r in done], dtype=float)
    mean = np.array([r["verdict"]["measured_mean"] for r in done], dtype=float)
    lo, hi = (np.array([r["verdict"]["measured_ci"][i] for r in done], dtype=float) for i in (0, 1))
    ax = ax or plt.subplots(figsize=(6, 4))[1]
    ax.plot(x, bound, "o", label="bound")
    ax.errorbar(x, mean, yerr=[mean - lo, hi - mean], fmt="s", capsize=3, label="measured (95% CI)")
    ax.set_yscale("log")
    key = done[0]["key"] if done else ""
    ax.set_xlabel(field_label(field, key))
    ax.set_ylabel(lhs_label(key))
    ax.set_title(f"{key}: bound and measurement against {field}")
    ax.legend()
    return ax


def slack_heatmap(rows: Sequence[dict], fx: str, fy: str, ax=None):
    """log10 of the slack (bound / measured) over two swept fields; the median over the
    sweep's other fields in each cell. Below 0 (red) is a violation of the bound."""
    cells: dict[tuple, list[float]] = {}
    for r in rows:
        if r["verdict"] is None:
            continue
        f = flatten(r["scenario"])
        slack = r["verdict"]["slack"]
        slack = np.inf if slack == "inf" else float(slack)
        cells.setdefault((f[fx], f[fy]), []).append(np.log10(slack) if slack > 0 else -np.inf)
    xs = sorted({c[0] for c in cells})
    ys = sorted({c[1] for c in cells})
    grid = np.full((len(ys), len(xs)), np.nan)
    for (x, y), v in cells.items():
        grid[ys.index(y), xs.index(x)] = np.median(v)
    finite = np.abs(grid[np.isfinite(grid)])
    lim = max(float(finite.max()) if finite.size else 1.0, 0.1)
    ax = ax or plt.subplots(figsize=(6, 4.5))[1]
    im = ax.imshow(np.clip(grid, -lim, lim), origin="lower", cmap="RdBu", vmin=-lim, vmax=lim,
                   aspect="auto")
    ax.set_xticks(range(len(xs)), [f"{x:g}" for x in xs])
    ax.set_yticks(range(len(ys)), [f"{y:g}" for y in ys])
    for (i, j), v in np.ndenumerate(grid):
        if not np.isnan(v):
            ax.text(j, i, f"{v:.2g}", ha="center", va="center", fontsize=8)
    key = rows[0]["key"] if rows else ""
    ax.set_xlabel(field_label(fx, key))
    ax.set_ylabel(field_label(fy, key))
    ax.set_title("log10 slack (bound / measured)")
    ax.figure.colorbar(im, ax=ax, label=label("log10 slack", RATIO))
    return ax


# ---------------------------------------------------------------- choosers


def plot_sync_time(report, ax=None):
    """Each variant's expected bound (left axis, log) and the simulated loss with its 95%
    interval (right axis) against S, from :func:`verify.choose.choose` on a
    :class:`verify.choose.SyncTime` run with ``method="both"``."""
    ax = ax or plt.subplots(figsize=(6, 4))[1]
    for c in report.bound:
        ax.semilogy([p["S"] for p in c.curve], [p["bound"] for p in c.curve], "-",
                    label=f"E bound [{c.variant}] (chooses S = {c.settings['S']:g})")
    ax.set_xlabel(label("sync time S", TIME))
    ax.set_ylabel(label("expected bound over delay paths", GRAD2))
    right = ax.twinx()
    sim = report.simulation
    right.errorbar([o.settings["S"] for o in sim], [o.loss for o in sim], yerr=[o.ci for o in sim],
                   fmt="s--", color="k", capsize=3, label=f"simulated {report.metric}")
    right.set_yscale("log")
    right.set_ylabel(label(f"simulated {report.metric}",
                           {"lhs": GRAD2, "final_loss": LOSS}[report.inputs["metric"]]))
    best = report.best.settings["S"] if report.best else float("nan")
    ax.set_title(f"choosing S: best simulated S = {best:g}")
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = right.get_legend_handles_labels()
    ax.legend(h1 + h2, l1 + l2, loc="best", fontsize=8)
    return ax


def plot_loss_vs_wallclock(report, ax=None):
    """Loss gap of one replica against wall-clock time (round ends) for every simulated S."""
    ax = ax or plt.subplots(figsize=(6, 4))[1]
    for o in report.simulation:
        curve = o.extra["wallclock"]
        ax.step(curve["time"], curve["loss"], where="post", label=f"S = {o.settings['S']:g}")
    ax.set_yscale("log")
    ax.set_xlabel(label("wall-clock time", TIME))
    ax.set_ylabel(label("f(x) - f* (one replica)", LOSS))
    ax.set_title("loss against wall-clock time")
    ax.legend()
    return ax


def plot_against_q(scenario=None, *, Qs=(1, 2, 5, 10), fixed: str = "etaQ",
                   variant: str | None = None, ax=None):
    """Bound and measured (95% CI) left side of (15) against Q at fixed eta Q or fixed eta
    (:func:`verify.choose.q_sweep`)."""
    from .choose import q_sweep

    rows = q_sweep(scenario, Qs=Qs, fixed=fixed, variant=variant)
    ax = ax or plt.subplots(figsize=(6, 4))[1]
    qs = [r["Q"] for r in rows]
    mean = np.array([r["measured"] for r in rows])
    lo, hi = (np.array(c) for c in zip(*(r["ci"] for r in rows), strict=True))
    ax.plot(qs, [r["bound"] for r in rows], "o-", label="bound (15)")
    ax.errorbar(qs, mean, yerr=[mean - lo, hi - mean], fmt="s-", capsize=3, label="measured (95% CI)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(label("Q, local steps per round", COUNT))
    ax.set_ylabel(lhs_label("tdcd.theorem1"))
    ax.set_title("TDCD against Q at fixed " + ("eta Q and R" if fixed == "etaQ" else "eta and T = QR"))
    ax.legend()
    return ax


def plot_loss_vs_time(curves: dict, *, axes=None):
    """One panel per t_comm of :func:`verify.choose.loss_vs_time`'s curves."""
    if axes is None:
        axes = plt.subplots(1, len(curves), figsize=(5 * len(curves), 3.6), squeeze=False)[1][0]
    for ax, (t_comm, per_q) in zip(axes, curves.items(), strict=True):
        for Q, (time, loss) in per_q.items():
            ax.plot(time, loss, label=f"Q = {Q}")
        ax.set_xlabel(label("wall-clock time", TIME))
        ax.set_ylabel(label("training loss", LOSS))
        ax.set_title(f"t_comm = {t_comm:g}, t_comp = 1")
        ax.legend()
    return axes
