"""Plots of bounds against measurements (matplotlib; without a display it uses Agg)."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np

import bounds

from .check import check
from .scenario import adapter_for, default_scenario


def along_K(key: str, scenario=None, *, variant: str | None = None, exact: bool = False,
            ax=None):
    """Bound and measured running average of ||grad F(u_k)||^2 against K.

    One run of length K gives the left-hand side for every K' <= K (its prefix means);
    the bound is evaluated at every K' that is a multiple of q*tau with the same step."""
    scenario = default_scenario(key) if scenario is None else scenario
    thm = bounds.get(key, variant)
    ad = adapter_for(key)
    params = ad.parameters(key, scenario, thm)
    m = ad.measure(key, scenario, params, exact)
    if m.series is None:
        raise ValueError(f"{key}: every replica diverged; nothing to plot")
    k = np.arange(1, m.series.size + 1)
    running = np.cumsum(m.series) / k
    period = scenario.q * scenario.tau
    ks = k[k % period == 0]
    bound = thm.evaluate(**{**params, "K": ks.astype(float)})
    ax = ax or plt.subplots(figsize=(6, 4))[1]
    ax.loglog(k, running, label="measured " + ("(exact)" if exact else "(Monte Carlo mean)"))
    ax.loglog(ks, bound, "o-", ms=3, label=f"bound {key} [{thm.variant}]")
    ax.set_xlabel("K (iterations)")
    ax.set_ylabel(r"$\frac{1}{K}\sum_{k\leq K}\|\nabla F(u_k)\|^2$")
    ax.set_title(f"{key}: bound vs measurement along K")
    ax.legend()
    return ax


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
    ax.set_xlabel(x or field)
    ax.set_ylabel("average squared gradient norm")
    ax.set_title(f"{key} against {x or field}")
    ax.legend()
    return ax


def save(ax, path: str) -> str:
    ax.figure.tight_layout()
    ax.figure.savefig(path, dpi=120)
    plt.close(ax.figure)
    return path
