"""Figures: bounds against measurements along a swept field, sweeps, and the choosers'
figures (matplotlib; without a display it uses Agg). The figure of one check is the
adapter's (``Adapter.plot``); :func:`fixed_layout` lays it out for the report. A figure these
functions make themselves (no ``ax`` given) is laid out by matplotlib's constrained layout, so
that its text stays inside the canvas however it is shown or saved.

Axis labels name a quantity and then its unit in brackets, ``"round t [count]"``
(:func:`verify.units.label`, re-exported here with the units; see :mod:`verify.units`).
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np

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

#: the unit of a scenario field put on an axis; an adapter declares where a name means
#: another thing for its result (``Adapter.field_units``)
FIELD_UNITS = {**dict.fromkeys(("K", "q", "tau", "Q", "R", "T", "M", "m", "hubs", "workers",
                                "replicas"), COUNT),
               **dict.fromkeys(("S", "t_comm", "t_comp", "delays"), TIME),
               **dict.fromkeys(("eta", "eta_L", "alpha"), STEP),
               **dict.fromkeys(("p", "zeta", "beta"), RATIO)}


def field_label(field: str, key: str = "") -> str:
    """The axis label of scenario field ``field`` (dotted, as :func:`flatten` names it) in a
    figure of result ``key``."""
    name = field.rsplit(".", 1)[-1]
    own = adapter_for(key).field_units if key else {}
    return label(field, own.get(name, FIELD_UNITS.get(name, SCENARIO)))


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
    ax = ax or plt.subplots(figsize=(6, 4), layout="constrained")[1]
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
    ax = ax or plt.subplots(figsize=(6, 4), layout="constrained")[1]
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
    ax = ax or plt.subplots(figsize=(6, 4.5), layout="constrained")[1]
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
