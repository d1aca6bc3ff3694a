"""Choosing the sync time S of Ali & Arafa 2025 (and its step alpha) from the expected bound
of Theorem 2 or Corollary 1 over the delay paths: ``bounds.choose_sync_time``.

The paper cannot give S ("not directly obtainable analytically from the bound", Remark 7);
this minimises the bound's expectation over a grid of S, for a delay model
(:class:`bounds.delays.DelayModel`) and the system time T.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .deadline import COARSE, deadline_steps, deadline_theorem
from .registry import get, variants

#: the results whose expected bound :func:`choose_sync_time` minimises (global bounds)
KEYS = ("hfl.theorem2", "hfl.corollary1")
#: fedbound's deadline bounds of Ali & Arafa 2025 (derived by fedbound, not published), which
#: :func:`choose_deadline_sync_time` minimises (and :func:`choose_sync_time` through it)
DEADLINE_KEYS = ("hfl.deadline_quadratic", "hfl.deadline_pl")

SYNC_ESTIMATES = ("plug-in", "monte-carlo")


@dataclass(frozen=True)
class SyncTimeChoice:
    """The S (and alpha) minimising the expected bound, the curve over the S grid, and the
    term that dominates at the best S. ``estimate`` says how E_delays[bound] was computed:
    "plug-in" (closed-form renewal approximation, :func:`bounds.hfl.plug_in`)
    or "monte-carlo" (mean over sampled delay paths). ``inadmissible``: the S of the grid
    left out because no alpha of the search satisfies the variant's conditions on every delay
    path there (alpha L tau <= 1/2 of the iid variant, on the a.s. envelope t <= t^max)."""

    key: str
    variant: str
    best_S: float
    best_alpha: float
    best_bound: float
    dominant_term: str
    terms: dict
    S: list
    bound: list
    alpha: list
    mean_U: list
    mean_t: list
    estimate: str
    inadmissible: list = ()

    def as_dict(self) -> dict:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


def default_sync_grid(model, T: float, points: int = 41) -> np.ndarray:
    """0 and ``points - 1`` values up to min(T, 40 max_i E tau_i): the range where a group
    does up to about 40 local iterations per round."""
    top = min(float(T), 40.0 * max(law.expectation for law in model.local))
    return np.linspace(0.0, top, points)


def choose_sync_time(key: str = "hfl.theorem2", *, model, T, variant: str | None = None,
                     S_grid=None, joint_alpha: bool = False, estimate: str = "plug-in",
                     paths: int = 100, draws: int = 2000, seed: int = 0,
                     **params) -> SyncTimeChoice:
    """Minimise the expected HFL bound ``key`` over the sync time S for system time T,
    delay model ``model`` (bounds.delays.DelayModel) and the theorem's parameters
    (``alpha, L, G, sigma, Delta, sizes``; ``alpha`` may be omitted with
    ``joint_alpha=True``, which minimises over alpha in (0, 1/L] jointly, on a log grid).

    The paper cannot give S ("not directly obtainable analytically from the bound",
    Ali & Arafa 2025, Remark 7); for the proof variant of Theorem 2 the expected bound is
    non-decreasing in S (derived by fedbound), so the bound's choice is S = 0.
    ``variant="refined"`` (derived by fedbound, not published; bounds/derivations/hfl_refined.md)
    keeps the variance reduction of a round's local gradients, through E[1/t_i] of the
    count law, and can choose S > 0 when the gradient noise is large. ``variant="iid"``
    (derived by fedbound, not published; bounds/derivations/hfl_iid.md) holds under the
    paper's Section II model (data i.i.d. among clients) and needs no G: its drift grows like
    alpha^2 L^2 sigma^2 t; an S where its condition alpha L tau <= 1/2 fails on the a.s.
    envelope of the delay paths (t_i <= t_i^max of (22)) is left out of the minimisation and
    listed in ``inadmissible``.

    ``key="hfl.deadline_quadratic"`` or ``"hfl.deadline_pl"`` (derived by fedbound, not
    published; bounds/derivations/hfl_deadline.md) minimises a bound on the expected loss at
    the deadline, E f(x^{U+1}) - f*, instead: parameters ``L, mu, sigma, Delta, sizes`` (and
    ``zeta`` for the PL bound, ``G1`` for the quadratic bound, both default 0) and ``alpha``
    or ``joint_alpha``; the expectation over the delay paths is Monte Carlo over ``paths``
    paths from ``seed`` whatever ``estimate`` says (:func:`choose_deadline_sync_time`)."""
    from . import delays as dl
    from . import hfl

    if key in DEADLINE_KEYS:
        return _choose_deadline(key, model=model, T=T, variant=variant, S_grid=S_grid,
                                joint_alpha=joint_alpha, estimate=estimate, paths=paths, seed=seed,
                                params=params)
    if estimate not in SYNC_ESTIMATES:
        raise ValueError(f"estimate={estimate!r} must be one of {SYNC_ESTIMATES}")
    if key not in KEYS:
        raise ValueError(f"key={key!r}: choose_sync_time minimises a global bound, "
                         f"{' or '.join(KEYS)}, or a deadline bound, {' or '.join(DEADLINE_KEYS)}")
    thm = get(key, variant)
    params = _own_params(key, thm, params)
    grid = default_sync_grid(model, T) if S_grid is None else np.asarray(S_grid, dtype=float)
    if grid.ndim != 1 or grid.size == 0 or not np.all(np.isfinite(grid)) or (grid < 0).any():
        raise ValueError(f"S_grid={S_grid!r} must be a non-empty list of finite S >= 0")
    L = float(params["L"])
    if joint_alpha and key == "hfl.theorem2":
        if "alpha" in params:
            raise ValueError("joint_alpha=True chooses alpha: do not pass alpha")
        alphas = np.exp(np.linspace(math.log(1.0 / L) - 9.0, math.log(1.0 / L), 400))
    elif key == "hfl.theorem2":
        alphas = np.array([float(params["alpha"])])
        if not thm.admissible(alpha=alphas[0], L=L, t=np.ones((1, 1))):  # t = 1: S-free conditions
            raise ValueError(f"alpha={alphas[0]:g} > 1/L={1 / L:g}: condition alpha <= 1/L of "
                             f"{thm.citation} fails")
    rest = {k: v for k, v in params.items() if k != "alpha"}
    rows, skipped = [], []
    for S in grid:
        stats = dl.round_statistics(model, S, T, draws=draws, seed=seed)
        extra = hfl.schedule_params(key, model, S)
        if key == "hfl.corollary1":
            a = np.array([1.0 / max(math.sqrt(stats.mean_U), L)])
            ok = np.atleast_1d(_admissible_on_envelope(thm, stats, {**rest, **extra}))
        else:
            a = alphas
            ok = np.atleast_1d(_admissible_on_envelope(thm, stats, {**rest, **extra, "alpha": a}))
        if not ok.any():
            skipped.append(float(S))
            continue
        args = {**rest, **extra} if key == "hfl.corollary1" else {**rest, **extra, "alpha": a[ok]}
        values = np.atleast_1d(_expected_value(hfl, key, thm, model, S, T, stats, estimate,
                                               paths, seed, args))
        j = int(np.argmin(values))
        rows.append((float(S), float(a[ok][j]), float(values[j]), stats, extra))
    if not rows:
        raise ValueError(f"{key} [{thm.variant}]: no S of the grid {grid.tolist()} is admissible: "
                         + "; ".join(f"{c.name} ({c.citation})" for c in thm.conditions))
    best = min(range(len(rows)), key=lambda k: rows[k][2])
    S_b, a_b, bound_b, stats_b, extra_b = rows[best]
    args = {**rest, **extra_b} if key == "hfl.corollary1" else {**rest, **extra_b, "alpha": a_b}
    terms = {k: float(v) for k, v in hfl.plug_in(key, stats_b, variant=thm.variant, terms=True,
                                                  **args).items()}
    return SyncTimeChoice(
        key=key, variant=thm.variant, best_S=S_b, best_alpha=a_b, best_bound=bound_b,
        dominant_term=max(terms, key=terms.get), terms=terms, S=[r[0] for r in rows],
        bound=[r[2] for r in rows], alpha=[r[1] for r in rows],
        mean_U=[r[3].mean_U for r in rows], mean_t=[r[3].mean_t.tolist() for r in rows],
        estimate=estimate, inadmissible=skipped)


def choose_deadline_sync_time(key: str = "hfl.deadline_quadratic", *, model, T, S_grid=None,
                              alpha=None, joint_alpha: bool = False, paths: int = 100,
                              seed: int = 0, **params) -> SyncTimeChoice:
    """The (S, alpha) minimising the expected deadline bound ``key`` (one of
    :data:`DEADLINE_KEYS`; derived by fedbound, not published, bounds/derivations/
    hfl_deadline.md) at system time T under the delay model ``model``: for every S of
    ``S_grid`` (default :func:`default_sync_grid`) the Monte-Carlo mean over ``paths`` delay
    paths from ``seed`` (the same paths for every step; :func:`bounds.hfl_deadline.expected`)
    at ``alpha`` (a number or a list), or, with ``joint_alpha``, at every step of
    :func:`deadline_steps`. ``params``: L, mu, sigma, Delta, sizes (and zeta for the PL
    bound, default 0; G1, a lower bound on ||grad f(x^1)||^2, for the quadratic bound, default
    0). The quadratic bound is compared at the coarse precision ``bounds.deadline.COARSE``
    (an upper bound within about 2% of its full value). ``best_bound`` is a bound on
    E f(x^{U+1}) - f* at the pick, at the full precision (its expectation over the delays
    estimated by Monte Carlo, by the tower property); ``terms`` its terms there."""
    from . import hfl_deadline as hd

    thm = deadline_theorem(key, DEADLINE_KEYS, "choose_deadline_sync_time", ("alpha", "t"), params)
    if key == "hfl.deadline_pl":
        params.setdefault("zeta", 0.0)
    L = float(params["L"])
    if joint_alpha == (alpha is not None):
        raise ValueError("give alpha (a step or a list of steps) or joint_alpha=True, not both")
    alphas = deadline_steps(L) if joint_alpha else np.atleast_1d(np.asarray(alpha, dtype=float))
    grid = default_sync_grid(model, T) if S_grid is None else np.asarray(S_grid, dtype=float)
    if grid.ndim != 1 or grid.size == 0 or not np.all(np.isfinite(grid)) or (grid < 0).any():
        raise ValueError(f"S_grid={S_grid!r} must be a non-empty list of finite S >= 0")
    coarse = COARSE if key == "hfl.deadline_quadratic" else {}
    rows = []
    for S in grid:
        e = hd.expected(key, model, float(S), T, alpha=alphas, paths=paths, seed=seed,
                        **coarse, **params)
        j = int(np.argmin(e.mean))
        rows.append((float(S), float(alphas[j]), float(e.mean[j]), e))
    S_b, a_b, _, _ = min(rows, key=lambda r: r[2])
    # the pick's bound at the full precision (every value above is an upper bound too)
    e_b = hd.expected(key, model, S_b, T, alpha=a_b, paths=paths, seed=seed, **params)
    terms = {k: float(np.asarray(v)[0]) for k, v in e_b.terms.items()}
    return SyncTimeChoice(
        key=key, variant=thm.variant, best_S=S_b, best_alpha=a_b, best_bound=float(e_b.mean[0]),
        dominant_term=max(terms, key=terms.get), terms=terms, S=[r[0] for r in rows],
        bound=[r[2] for r in rows], alpha=[r[1] for r in rows], mean_U=[r[3].mean_U for r in rows],
        mean_t=[r[3].mean_t for r in rows], estimate="monte-carlo")


def _choose_deadline(key, *, model, T, variant, S_grid, joint_alpha, estimate, paths, seed,
                     params) -> SyncTimeChoice:
    """:func:`choose_sync_time` for a deadline key: :func:`choose_deadline_sync_time`."""
    if estimate not in SYNC_ESTIMATES:
        raise ValueError(f"estimate={estimate!r} must be one of {SYNC_ESTIMATES}")
    if variant not in (None, get(key).variant):
        raise ValueError(f"{key}: unknown variant {variant!r}; its variant is {get(key).variant!r}")
    params = dict(params)
    alpha = params.pop("alpha", None)
    return choose_deadline_sync_time(key, model=model, T=T, S_grid=S_grid, alpha=alpha,
                                     joint_alpha=joint_alpha, paths=paths, seed=seed, **params)


def _own_params(key: str, thm, params: dict) -> dict:
    """The parameters of ``thm`` among ``params``: one set of constants serves every variant
    of ``key`` (G, which the iid variant does not use, is left out for it); a name no variant
    knows is an error."""
    known = set().union(*(get(key, v).params for v in variants(key)))
    unknown = sorted(set(params) - known)
    if unknown:
        raise ValueError(f"{key}: unknown parameter(s) {unknown}; parameters are {sorted(known)}")
    return {k: v for k, v in params.items() if k in thm.params}


def _admissible_on_envelope(thm, stats, args) -> np.ndarray | bool:
    """Whether the conditions of ``thm`` hold on every delay path at one S: evaluated on the
    a.s. envelope of the schedule, every count at t_i^max of (22) (the conditions of the HFL
    results are non-decreasing in every count), for E U rounds (the corollary's step depends
    on U; the plug-in uses E U too). A count without an a.s. maximum (a zero shift) fails a
    condition on the counts."""
    t_max = np.where(np.isfinite(stats.t_max), stats.t_max, 2.0**52)
    rounds = max(1, math.ceil(stats.mean_U))
    return thm.admissible(**{**args, "t": np.tile(t_max, (rounds, 1))})


def _expected_value(hfl, key, thm, model, S, T, stats, estimate, paths, seed, args):
    """E_delays[bound] at one S: plug-in (broadcasts over an alpha grid) or Monte Carlo."""
    if estimate == "plug-in":
        return hfl.plug_in(key, stats, variant=thm.variant, **args)
    alphas = np.atleast_1d(args.get("alpha", np.nan))
    out = []
    for a in alphas:
        one = {k: v for k, v in args.items() if k not in ("alpha", "t_max")}
        if key == "hfl.theorem2":
            one["alpha"] = float(a)
        out.append(hfl.expected(key, model, S, T, variant=thm.variant, paths=paths, seed=seed,
                                **one).mean)
    return np.array(out)
