"""Search over admissible scenarios, generic over every registered result: for a violation of
its bound (``objective="violate"``, the default) or for the scenario where the bound is
tightest (``objective="tightest"``).

``search(key)`` uses only the adapter's public methods (``random_scenario``,
``parameters``, ``check_derived``), its declared capabilities (``tags.exact``) and the
scenario's fields:

1. Random phase: scenarios drawn by the adapter's ``random_scenario`` from a seeded
   ``numpy.random.Generator``, each numeric field pushed to an edge of its range with
   probability ``EDGE_P`` the way hypothesis favours boundary values (0 or 1/100 of the
   value for a float, the least valid integer).
2. Optimiser: a first-improvement coordinate search from the best scenario so far over its
   numeric fields (top-level numbers and the numbers of nested objects, except ``seed``
   and ``replicas``; coordinates in a random order): each float is tried at a tenth,
   double and zero, each integer at half and double; a move is kept when the scenario
   stays admissible and the objective's score grows by more than round-off (``TIE``: a
   tie keeps the earlier scenario, on every machine). A field moves at most to ``SPAN``
   times the largest value the random phase drew for it (an integer also to ``SPAN``,
   and never beyond ``MAX_INT``), so the search stays near the ranges the adapter declares
   and a check never grows without bound (a batch, a horizon). A tightest search then
   refines with the smaller moves of ``FINE`` (x/f and x f for each factor f; integers -1
   and +1). When no move improves, the search restarts from a fresh random scenario.
3. Every check uses the exact-expectation mode where the adapter declares one and supports
   it for that scenario (``Adapter.supports_exact``); where the exact moments diverge a
   violation search falls back to Monte Carlo. A tightest search of a result with an exact
   mode considers only the scenarios it supports (its ratios are then exact, free of
   Monte-Carlo error); results without one are searched by Monte Carlo.
4. Violate: a first violation whose ratio measured/bound (under Monte Carlo, the lower end
   of its 95% interval: its *margin*) is below ``MIN_RATIO`` is first strengthened by the
   same coordinate moves, on the excess, while budget remains; that violation is then
   simplified (integers halved, floats set to zero or rounded to 1-2 significant digits,
   replicas reduced in exact mode) as long as it stays admissible and violated with at
   least ``KEEP`` of its excess and a margin of at least ``MIN_RATIO`` (or its own, where it
   has less): the *minimal* witness, a clear violation that neither round-off nor
   Monte-Carlo noise can undo (a refutation by a ratio of 1.00003 convinces no one). The
   *strongest* witness is the violating scenario of largest ratio the search saw. A
   Monte-Carlo minimal witness is then confirmed with ``CONFIRM`` times the replicas.
   Tightest: the search spends its whole budget; the tightest scenario is the witness, a
   Monte-Carlo one confirmed with ``CONFIRM`` times its replicas, doubled up to
   ``MAX_CONFIRM`` times until the interval of its ratio is narrower than ``NARROW``.
   Either way the witness is a scenario that ``fedbound check KEY --scenario FILE`` (with
   ``--exact`` when the verdict's mode is exact) reproduces.

Scores. Violate: the normalised excess (measured - bound)/(|measured| + |bound|). Tightest:
the ratio measured/bound (:func:`verify.verdict.tightness`; 1 = tight), exactly where the
mode is exact and the lower end of its 95% interval under Monte Carlo, so that the noise of
a few replicas is not mistaken for tightness; a measurement at round-off level
(``Verdict.atol``) scores nothing, one above the bound only within round-off scores 1.

Parallel evaluation: with an ``executor`` (a process pool), the candidates the serial search
would evaluate next are evaluated ahead, ``width`` at a time, and their results consumed in
the serial order; draws made ahead and not consumed are undone. So the result does not
depend on the executor or the number of workers: the same seed gives the same result.

Regions (``where``, ``fedbound search --where``; :mod:`verify.region`): the search can be
kept in a region of scenarios, a conjunction of comparisons of scenario fields with numbers
(``S >= 2``, ``Q >= 2``, ``problem.sigma > 0``). Every random draw outside it is first moved
onto its boundary (:meth:`verify.region.Region.projected`: the region's edges are edges too)
and skipped if still outside; every move of the optimiser and every simplification of a
witness stays inside. So a witness of a region search lies in the region, and ``fedbound
check`` replays it. A stratified budget (``stratify``, ``--stratify S=0,2,5,10``) splits the
budget evenly over the values of one field, one search per value (its region the field equal
to the value, within ``where``), seeded by (seed, stratum); the result is the best over the
strata (the first violation, for a violation search), with each stratum's own best.

"Admissible" means: the adapter derives the theorem's parameters without error and every
condition of the theorem holds there (``Theorem.admissible``). A candidate above a resource
limit (``verify.limits``: ``--max-memory``, ``--max-steps``) is refused before anything is
allocated and skipped like an inadmissible one, so the limits bound what a search allocates;
the witness's confirmation with more replicas is refused (the search fails with the
refusal's line) when it would exceed them. ``tried`` counts the
admissible scenarios checked during phases 1-2 (at most ``budget``). An adapter that
produces no admissible scenario at all, or none in the region, is an error naming the region
and the draws tried, never "no violation found".
"""

from __future__ import annotations

import dataclasses
import math
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Executor, Future
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fedbound import bounds

from . import limits
from .adapter import adapter_for
from .region import Comparison, Region, parse, parse_strata, replaced
from .scenario import INT_MAX
from .verdict import Verdict

#: what a search looks for
OBJECTIVES = ("violate", "tightest")
#: integer fields are searched up to this value
MAX_INT = 2**16
#: a field moves up to this many times the largest value drawn for it
SPAN = 16
#: fields the optimiser never changes
FROZEN = ("seed", "replicas")
#: at most this many checks while shrinking a witness
SHRINK_EVALS = 60
#: a simplification is kept only if it keeps this fraction of the excess of the violation
#: the shrink starts from (not of the last simplification: the excess cannot decay step by step)
KEEP = 0.5
#: the margin (ratio measured/bound; under Monte Carlo the lower end of its 95% interval) a
#: violation is strengthened to, and a shrunk witness keeps, where the search reaches it
MIN_RATIO = 1.1
#: a Monte-Carlo witness is re-checked with this many times its replicas
CONFIRM = 4
#: probability that the random phase pushes a numeric field to an edge of its range
EDGE_P = 0.5
#: random draws in a row refused by a resource limit after which the search gives up
REFUSED_DRAWS = 100
#: the finer multiplicative moves of a tightest search, tried in turn once coarser ones fail
FINE = (1.25, 1.05)
#: a tightest Monte-Carlo witness: confirmed until its ratio's 95% half-width is below this
#: fraction of the ratio, with at most MAX_CONFIRM times its replicas
NARROW = 0.05
MAX_CONFIRM = 16
#: scores within this relative difference are equal (:func:`better`): far above the
#: round-off of a check (about 1e-13 relative), far below any difference that matters
TIE = 1e-9
#: a random draw outside the region, even once projected onto it (evaluates to nothing)
_OUTSIDE = object()


@dataclass
class SearchResult:
    """What a search found. ``witness``: the violating scenario (violate) or the tightest one
    (tightest), in the form ``fedbound check --scenario`` takes, ``exact``: whether its
    verdict is exact; ``verdict``: that of the witness, or of the closest scenario when a
    violation search found nothing; ``best_excess``: the largest (measured - bound) /
    (|measured| + |bound|) seen; ``ratio`` and ``ratio_ci``: measured/bound at the reported
    verdict and its 95% interval; ``trajectory``: the best ratio after each admissible
    evaluation; ``status``: the variant's registered status (a violation is *new* unless
    the result is recorded as refuted, ``bounds.REFUTED``). Where a violation was found,
    ``witness`` is the *minimal* one (simplified while it keeps a clear margin) and
    ``strongest`` the violating scenario of largest ratio measured/bound the search saw
    (``strongest_ratio``; the same scenario as ``witness`` where nothing was stronger)."""

    key: str
    variant: str
    status: str
    found: bool
    witness: dict[str, Any] | None
    exact: bool
    verdict: Verdict | None
    tried: int
    best_excess: float
    objective: str = "violate"
    ratio: float = math.nan
    ratio_ci: tuple[float, float] = (math.nan, math.nan)
    trajectory: list[float] = field(default_factory=list)
    #: the region searched (``where``; "" for every scenario) and, for a stratified budget,
    #: one entry per stratum: its value, budget, admissible scenarios tried, best ratio,
    #: whether it found a violation
    region: str = ""
    strata: list[dict[str, Any]] = field(default_factory=list)
    strongest: dict[str, Any] | None = None
    strongest_ratio: float | None = None

    @property
    def new_violation(self) -> bool:
        """A violation of a result not recorded as refuted (``fedbound search`` exits 1)."""
        return self.found and self.status not in bounds.REFUTED

    def as_dict(self) -> dict[str, Any]:
        v = self.verdict
        return {"key": self.key, "variant": self.variant, "status": self.status,
                "objective": self.objective, "found": self.found,
                "new_violation": self.new_violation, "witness": self.witness,
                "exact": self.exact, "verdict": None if v is None else v.as_dict(),
                "params": None if v is None else v.as_dict()["params"],
                "tried": self.tried, "best_excess": self.best_excess, "ratio": self.ratio,
                "ratio_ci": list(self.ratio_ci), "trajectory": list(self.trajectory),
                "region": self.region, "strata": [dict(s) for s in self.strata],
                "strongest": self.strongest, "strongest_ratio": self.strongest_ratio}

    def as_witness(self, note: str = ""):
        """The witness as a :class:`verify.witnesses.Witness` (to store and replay): a
        violation (``expect`` "violated"), or the tightest scenario with the outcome it
        had and its ``ratio``, which a replay must not fall below."""
        from .witnesses import Witness

        if self.witness is None:
            raise ValueError(f"{self.key} [{self.variant}]: the search found no witness")
        where = f" in the region {self.region}" if self.region else ""
        how = f"found by fedbound search ({self.tried} admissible scenarios{where})"
        if self.objective == "violate":
            return Witness(self.key, self.variant, self.exact, "violated", note or how,
                           self.witness)
        return Witness(self.key, self.variant, self.exact, self.verdict.verdict,
                       note or f"tightest scenario {how}", self.witness, ratio=self.ratio)


@dataclass
class _Eval:
    scenario: Any
    verdict: Verdict
    excess: float
    ratio: float
    score: float


def evaluate(key: str, variant: str, objective: str, scenario) -> tuple[Verdict | None, str]:
    """Check ``scenario`` if admissible (exact mode where the adapter supports it): the
    verdict and "", or None and why it was skipped. Module level: process pools run it."""
    ad, thm = adapter_for(key), bounds.get(key, variant)
    if isinstance(scenario, dict):
        scenario = ad.load(scenario)
    if objective == "tightest" and ad.tags.exact and not ad.supports_exact(scenario):
        return None, "a tightest search of a result with an exact mode stays in exact mode"
    try:
        params = ad.parameters(scenario, thm)
    except ValueError as e:
        return None, str(e)
    if not thm.admissible(**params):
        return None, "; ".join(map(str, thm.violations(**params)))
    exact = ad.tags.exact and ad.supports_exact(scenario)
    try:
        try:
            return ad.check_derived(scenario, thm, params, exact=exact), ""
        except limits.ResourceError:
            raise
        except ValueError as e:
            if not exact:
                raise
            if objective == "tightest":
                return None, str(e)  # the exact moments diverge: nothing tight there
            # the exact moments diverge: Monte Carlo says so
            return ad.check_derived(scenario, thm, params, exact=False), ""
    except limits.ResourceError as e:  # refused before anything is allocated: skipped
        return None, str(e)


class _Searcher:
    def __init__(self, key: str, variant: str | None, objective: str, rng: np.random.Generator,
                 executor: Executor | None, width: int,
                 progress: Callable[[int, float], None] | None, region: Region):
        self.key, self.rng, self.objective, self.region = key, rng, objective, region
        self.outside = 0  # random draws outside the region, even once projected onto it
        self.thm = bounds.get(key, variant)
        self.adapter = adapter_for(key)
        self.executor, self.width = executor, (max(1, width) if executor is not None else 1)
        self.progress = progress
        self.tried = 0
        self.attempts = 0
        self.best: _Eval | None = None
        self.strongest: _Eval | None = None  # the violation of largest ratio seen
        self.budget = 0  # admissible scenarios the search may check (set by _search)
        self.trajectory: list[float] = []
        self.drawn: dict[tuple[str, ...], float] = {}  # field -> largest |value| drawn
        self.reason = ""  # why the last inadmissible scenario was

    # ---- evaluation
    def check(self, scenario, exact: bool) -> Verdict:
        return self.adapter.check(scenario, variant=self.thm.variant, exact=exact)

    def _eval(self, scenario, verdict: Verdict | None, reason: str) -> _Eval | None:
        if verdict is None:
            self.reason = reason
            return None
        e = _Eval(scenario, verdict, _excess(verdict), verdict.ratio, self._score(verdict))
        if verdict.verdict == "violated" and (self.strongest is None
                                               or better(e.ratio, self.strongest.ratio)):
            self.strongest = e
        return e

    def _score(self, v: Verdict) -> float:
        """Violate: the excess. Tightest: the ratio (the lower end of its interval under
        Monte Carlo), at most 1 where the bound holds (above it only within round-off: tight);
        no signal (-inf) where the measurement is at round-off level."""
        if self.objective == "violate":
            return _excess(v)
        r = v.ratio if v.mode == "exact" else v.ratio_ci[0]
        if not math.isfinite(r) or abs(v.measured_mean) <= v.atol:
            return -math.inf
        return min(r, 1.0) if v.holds else r

    def evaluate(self, scenario) -> _Eval | None:
        return self._eval(scenario, *evaluate(self.key, self.thm.variant, self.objective, scenario))

    def _submit(self, scenario) -> Future | None:
        if self.executor is None:
            return None
        return self.executor.submit(evaluate, self.key, self.thm.variant, self.objective,
                                    scenario.to_dict())

    @contextmanager
    def evaluations(self, items: Iterator, drawn: bool = False
                    ) -> Iterator[Callable[[], _Eval | None]]:
        """A function giving the evaluation (or None) of the next scenario of ``items``
        each time it is called (StopIteration when there is none). With an executor, up to
        ``width`` scenarios are drawn and evaluated ahead; on leaving the context, the random
        generator is set back to where it was after the last scenario taken, as if the
        others had never been drawn. So callers decide whether to take the next scenario
        exactly as the serial search does. ``drawn``: the items are random draws, whose
        values set the range of each field (``SPAN``) as they are taken."""
        pending: deque = deque()
        state = None

        def take() -> _Eval | None:
            nonlocal state
            while len(pending) < self.width:
                scenario = next(items, None)
                if scenario is None:
                    break
                future = None if scenario is _OUTSIDE else self._submit(scenario)
                pending.append((scenario, self.rng.bit_generator.state, future))
            if not pending:
                raise StopIteration
            scenario, state, future = pending.popleft()
            if scenario is _OUTSIDE:
                self.outside += 1
                self.reason = f"outside the region {self.region}"
                return None
            if drawn:
                for path, value in _numeric_fields(scenario):
                    self.drawn[path] = max(self.drawn.get(path, 0.0), abs(float(value)))
            return (self.evaluate(scenario) if future is None
                    else self._eval(scenario, *future.result()))

        try:
            yield take
        finally:
            for _, _, future in pending:
                if future is not None:
                    future.cancel()
            if pending and state is not None:
                self.rng.bit_generator.state = state

    def record(self, e: _Eval) -> None:
        """Count an admissible evaluation; keep the best and the trajectory."""
        self.tried += 1
        if self.best is None or better(e.score, self.best.score):
            self.best = e
        self.trajectory.append(self.best.ratio)
        if self.progress is not None:
            self.progress(self.tried, self.best.ratio)

    # ---- candidates
    def draws(self) -> Iterator:
        """Random scenarios: the adapter's draw with, as hypothesis does, each numeric field
        pushed to an edge of its range (0 or 1/100 of its value for a float, its least valid
        value for an integer) with probability ``EDGE_P`` (a push that leaves the region is
        not made), then moved onto the region's boundary where it lies outside; ``_OUTSIDE``
        where it is outside even then. A draw above a resource limit is
        skipped; ``REFUSED_DRAWS`` of them in a row end the search with the refusal (the
        limit is below what the adapter draws)."""
        refused = 0
        while True:
            try:
                scenario = self.adapter.random_scenario(self.rng)
            except limits.ResourceError:
                refused += 1
                if refused == REFUSED_DRAWS:
                    raise
                continue
            refused = 0
            for path, value in _numeric_fields(scenario):
                if self.rng.random() < EDGE_P:
                    for c in _edges(value):
                        moved = replaced(scenario, path, c)
                        if moved is not None and (self.region.contains(moved)
                                                  or not self.region.contains(scenario)):
                            scenario = moved
                            break
            if self.region and not self.region.contains(scenario):
                scenario = self.region.projected(scenario)
            yield _OUTSIDE if scenario is None else scenario

    def neighbours(self, scenario, level: int = 0) -> list:
        """Scenarios one coordinate move away (invalid ones dropped), coordinates in a
        random order; ``level`` 0: the coarse moves, k >= 1: the moves of ``FINE[k - 1]``."""
        out = []
        fields = _numeric_fields(scenario)
        for j in self.rng.permutation(len(fields)):
            path, value = fields[j]
            integer = isinstance(value, (int, np.integer))
            top = SPAN * max(self.drawn.get(path, abs(float(value))), 1.0 if integer else 0.0)
            for c in _moves(value, level):
                if c != value and abs(c) <= top:
                    moved = replaced(scenario, path, type(value)(c))
                    if moved is not None and self.region.contains(moved):
                        out.append(moved)
        return out

    def restart(self, budget: int) -> _Eval | None:
        """A fresh admissible random scenario (None when the budget or the attempts run out)."""
        with self.evaluations(self.draws(), drawn=True) as take:
            while self.attempts < 10 * budget and self.tried < budget:
                self.attempts += 1
                e = take()
                if e is not None:
                    self.record(e)
                    return e
        return None

    def first_improvement(self, scenario, level: int, accept: Callable[[_Eval], bool]
                          ) -> _Eval | None:
        """The first neighbour of ``scenario`` (:meth:`neighbours` at ``level``) that
        ``accept`` takes, each one evaluated and recorded until then or until the budget
        (``self.budget``) is spent; None if none is taken."""
        with self.evaluations(iter(self.neighbours(scenario, level))) as take:
            while self.tried < self.budget:
                try:
                    e = take()
                except StopIteration:
                    return None
                if e is None:
                    continue
                self.record(e)
                if accept(e):
                    return e
        return None

    def strengthen(self, found: _Eval) -> _Eval:
        """From the violation ``found``, while its margin is below ``MIN_RATIO`` and budget
        remains: first-improvement coordinate moves on the excess, to a violating scenario."""
        current = found
        while margin(current.verdict) < MIN_RATIO and self.tried < self.budget:
            improved = self.first_improvement(
                current.scenario, 0, lambda e, c=current: e.verdict.verdict == "violated"
                and better(e.excess, c.excess))
            if improved is None:
                break
            current = improved
        return current

    def shrink(self, found: _Eval) -> _Eval:
        """Simplify a violating scenario while it stays admissible and violated with at least
        ``KEEP`` of ``found``'s excess and a margin of at least ``MIN_RATIO`` (``found``'s own
        where that is less)."""
        floor = min(MIN_RATIO, margin(found.verdict))
        best, evals, changed = found, 0, True
        while changed and evals < SHRINK_EVALS:
            changed = False
            for cand in _simpler(best.scenario, best.verdict.mode == "exact"):
                if not self.region.contains(cand):
                    continue
                if evals >= SHRINK_EVALS:
                    break
                evals += 1
                e = self.evaluate(cand)
                if (e is not None and e.verdict.verdict == "violated"
                        and e.excess >= KEEP * found.excess and margin(e.verdict) >= floor):
                    best, changed = e, True
                    break
        return best


def search(key: str, *, variant: str | None = None, budget: int = 50, seed: int = 0,
           objective: str = "violate", executor: Executor | None = None, width: int = 1,
           progress: Callable[[int, float], None] | None = None,
           where: str | Sequence[str] | Region | None = None,
           stratify: str | Mapping[str, Sequence[float]] | None = None) -> SearchResult:
    """Search admissible scenarios of ``key`` (module docstring).

    ``objective``: "violate" stops at the first violation and returns it shrunk as the
    ``witness``; "tightest" spends the whole budget and returns the scenario with the
    largest ratio measured/bound. ``budget``: the number of admissible scenarios to check
    (half go to the random phase). ``executor`` (e.g. a process pool) evaluates ``width``
    candidates ahead; the result is the same with or without it. ``progress(tried,
    best_ratio)`` is called after each admissible evaluation. ``where``: the region to stay
    in, one comparison or several combined with and (``"S >= 2"``; :mod:`verify.region`).
    ``stratify``: the budget split evenly over the values of one field (``"S=0,2,5,10"`` or
    ``{"S": [0, 2, 5, 10]}``), one search per value within ``where``.

    >>> from fedbound.verify.search import search
    >>> r = search("mllsgd.theorem1", budget=4, where=["tau >= 2", "q >= 2"], objective="tightest")
    >>> r.region, r.witness["tau"] >= 2 and r.witness["q"] >= 2
    ('tau >= 2 and q >= 2', True)
    """
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise ValueError(f"budget={budget!r} must be an integer >= 1")
    limits.require_count(budget, f"search --budget {budget}")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= INT_MAX:
        raise ValueError(f"seed={seed!r} must be an integer in [0, 2^63)")
    if objective not in OBJECTIVES:
        raise ValueError(f"objective={objective!r} must be one of {OBJECTIVES}")
    default = adapter_for(key).default
    region = parse(where, default, frozen=FROZEN)
    strata = parse_strata(stratify, default, frozen=FROZEN)
    if not strata:
        return _search(key, variant, objective, np.random.default_rng(seed), executor, width,
                       progress, region, budget)
    if budget < len(strata):
        raise ValueError(f"budget={budget} is below the {len(strata)} strata of "
                         f"stratify={stratify!r}: each needs at least one scenario")
    return _stratified(key, variant, objective, seed, executor, width, progress, region, strata,
                       budget)


def _stratified(key, variant, objective, seed, executor, width, progress, region,
                strata: list[Comparison], budget: int) -> SearchResult:
    """One search per stratum, ``budget`` split evenly (the first strata take the
    remainder), each seeded by (seed, stratum index); the best result over the strata."""
    share, extra = divmod(budget, len(strata))
    results, rows, done = [], [], 0
    for j, c in enumerate(strata):
        def shifted(tried, ratio, done=done):
            if progress is not None:
                progress(done + tried, ratio)
        r = _search(key, variant, objective, np.random.default_rng([seed, j]), executor, width,
                    shifted, region.and_(Region((c,))), share + (j < extra))
        done += r.tried
        results.append(r)
        rows.append({"value": c.value, "budget": share + (j < extra), "tried": r.tried,
                     "ratio": r.ratio, "found": r.found})
        if objective == "violate" and r.found:
            break
    if objective == "violate":
        best = next((r for r in results if r.found), max(results, key=lambda r: r.best_excess))
    else:
        best = max(results, key=lambda r: r.ratio if math.isfinite(r.ratio) else -math.inf)
    return dataclasses.replace(best, tried=done, region=region.text,
                               strata=[{"field": strata[0].field, **row} for row in rows])


def _search(key, variant, objective, rng, executor, width, progress, region: Region,
            budget: int) -> SearchResult:
    s = _Searcher(key, variant, objective, rng, executor, width, progress, region)
    s.budget = budget
    violate = objective == "violate"
    with s.evaluations(s.draws(), drawn=True) as take:
        while s.tried < max(1, budget // 2) and s.attempts < 10 * budget:
            s.attempts += 1
            e = take()
            if e is not None:
                s.record(e)
                if violate and s.best.verdict.verdict == "violated":
                    break
    if violate and s.best is not None and s.best.verdict.verdict == "violated":
        return _found(s, s.best)
    if s.best is None:
        if region:
            raise ValueError(f"{key}: no admissible scenario in the region {region} in "
                             f"{s.attempts} random draws ({s.outside} outside it even once "
                             f"moved onto its boundary; last reason: {s.reason or 'none'})")
        raise ValueError(f"{key}: the adapter produced no admissible scenario in {s.attempts} "
                         f"random draws (last reason: {s.reason or 'none'}); its _draw must "
                         "produce scenarios on which the theorem's hypotheses hold")
    current, level = s.best, 0
    while s.tried < budget and current is not None:
        improved = s.first_improvement(   # first improvement: move on from there
            current.scenario, level, lambda e, c=current: (violate and e.verdict.verdict == "violated")
            or better(e.score, c.score))
        if violate and improved is not None and improved.verdict.verdict == "violated":
            return _found(s, improved)
        if improved is not None:
            current, level = improved, 0
        elif not violate and level < len(FINE):
            level += 1  # a tightest search refines before it restarts
        else:  # local optimum: restart from a fresh random scenario
            current, level = s.restart(budget), 0
            if violate and current is not None and current.verdict.verdict == "violated":
                return _found(s, current)
    if violate:
        return SearchResult(key, s.thm.variant, s.thm.status, False, None, False,
                            s.best.verdict, s.tried, s.best.excess, objective,
                            s.best.ratio, s.best.verdict.ratio_ci, s.trajectory, region.text)
    return _tightest(s)


def better(score: float, than: float) -> bool:
    """Whether ``score`` improves on ``than`` by more than round-off (``TIE`` relative).
    Scores equal up to round-off are a tie, which the serial order breaks (the first one
    stays): the last bits of a score depend on the processor's vector kernels and the
    BLAS, and a search that followed them would take another path on another machine."""
    return score - than > TIE * max(abs(score), abs(than)) if math.isfinite(than) else score > than


def margin(v: Verdict) -> float:
    """How clearly ``v`` exceeds its bound: the ratio measured/bound, under Monte Carlo the
    lower end of its 95% interval (NaN counts as no margin)."""
    r = v.ratio if v.mode == "exact" else v.ratio_ci[0]
    return r if math.isfinite(r) else -math.inf


def _excess(v: Verdict) -> float:
    """(measured - bound) / (|measured| + |bound|) in [-1, 1]: > 0 iff the mean exceeds the
    bound; -1 when both are 0, the excess is within round-off, or the run diverged."""
    scale = abs(v.measured_mean) + abs(v.bound)
    if not math.isfinite(v.measured_mean) or scale == 0:
        return -1.0
    if v.verdict == "holds" and v.measured_mean > v.bound:  # within round-off: no signal
        return -1.0
    return (v.measured_mean - v.bound) / scale


def _found(s: _Searcher, e: _Eval) -> SearchResult:
    """Strengthen the violation to a clear margin where it has none, shrink it; a
    Monte-Carlo witness must also be violated with ``CONFIRM`` times as many replicas (else
    the search reports nothing found). The strongest violation seen goes with it."""
    w = s.shrink(s.strengthen(e))
    if w.verdict.mode != "exact":
        more = w.scenario.replace(replicas=CONFIRM * w.scenario.replicas)
        again = s.check(more, False)
        if again.verdict != "violated":
            return SearchResult(s.key, s.thm.variant, s.thm.status, False, None, False, again,
                                s.tried, _excess(again), s.objective, again.ratio,
                                again.ratio_ci, s.trajectory, s.region.text)
        w = _Eval(more, again, _excess(again), again.ratio, _excess(again))
    strongest = s.strongest if better(s.strongest.ratio, w.ratio) else w
    return SearchResult(s.key, s.thm.variant, s.thm.status, True, w.scenario.to_dict(),
                        _exact_mode(s, w.scenario, w.verdict), w.verdict, s.tried, w.excess,
                        s.objective, w.verdict.ratio, w.verdict.ratio_ci, s.trajectory,
                        s.region.text, strongest=strongest.scenario.to_dict(),
                        strongest_ratio=strongest.ratio)


def _exact_mode(s: _Searcher, scenario, v: Verdict) -> bool:
    """Whether ``v`` came from the adapter's exact mode (what ``check --exact`` reproduces;
    a measurement can be exact without it, e.g. a pathwise maximum)."""
    return v.mode == "exact" and s.adapter.tags.exact and s.adapter.supports_exact(scenario)


def _tightest(s: _Searcher) -> SearchResult:
    """The tightest scenario; a Monte-Carlo one re-checked with more replicas (``CONFIRM``
    times, doubled up to ``MAX_CONFIRM`` times) until its ratio's interval is narrow."""
    best = s.best
    scenario, v = best.scenario, best.verdict
    if v.mode != "exact":
        base, factor = scenario.replicas, CONFIRM
        while True:
            scenario = scenario.replace(replicas=factor * base)
            v = s.check(scenario, False)
            lo, hi = v.ratio_ci
            if not (hi - lo > 2 * NARROW * v.ratio) or 2 * factor > MAX_CONFIRM:
                break
            factor *= 2
    found = v.verdict == "violated"
    return SearchResult(s.key, s.thm.variant, s.thm.status, found,
                        scenario.to_dict(), _exact_mode(s, scenario, v), v, s.tried, _excess(v),
                        s.objective, v.ratio, v.ratio_ci, s.trajectory, s.region.text,
                        strongest=scenario.to_dict() if found else None,
                        strongest_ratio=v.ratio if found else None)


# ---------------------------------------------------------------------- scenario fields


def _numeric_fields(scenario) -> list[tuple[tuple[str, ...], float | int]]:
    """(path, value) of every number of the scenario, one level into nested objects."""
    out = []
    for f in dataclasses.fields(scenario):
        if f.name in FROZEN:
            continue
        v = getattr(scenario, f.name)
        if _is_number(v):
            out.append(((f.name,), v))
        elif isinstance(v, dict):
            out += [((f.name, k), x) for k, x in v.items() if _is_number(x)]
    return out


def _is_number(v) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)


def _moves(v, level: int) -> list:
    """The values a coordinate move tries: coarse (level 0) or by ``FINE[level - 1]``."""
    integer = isinstance(v, (int, np.integer))
    if level == 0:
        if integer:
            return [v // 2, v * 2] if v * 2 <= MAX_INT else [v // 2]
        return [v / 10, v * 2, 0.0]
    if integer:
        return [v - 1, v + 1] if level == 1 and v + 1 <= MAX_INT else []
    f = FINE[level - 1]
    return [v / f, v * f]


def _edges(v) -> list:
    """Edge values to try for a field, in order (the first valid one is taken)."""
    if isinstance(v, (int, np.integer)):
        return [type(v)(0), type(v)(1)]
    return [0.0, v / 100]


def _round(x: float) -> list[float]:
    if x == 0 or not math.isfinite(x):
        return []
    digits = math.floor(math.log10(abs(x)))
    return [round(x, -digits + k) for k in (0, 1)]


def _simpler(scenario, exact: bool) -> list:
    """Candidate simplifications: fewer replicas (exact mode only: Monte Carlo keeps its
    sample), integers halved, floats zeroed or rounded."""
    out = []
    if exact and hasattr(scenario, "replicas") and scenario.replicas > 2:
        out.append(replaced(scenario, ("replicas",), max(2, scenario.replicas // 2)))
    for path, v in _numeric_fields(scenario):
        if isinstance(v, (int, np.integer)):
            cands = [v // 2] if v > 1 else []
        else:
            cands = [0.0, *_round(v)]
        out += [replaced(scenario, path, type(v)(c)) for c in cands if c != v]
    return [c for c in out if c is not None]
