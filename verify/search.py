"""Counterexample search over admissible scenarios, generic over every registered result.

``search(key)`` uses only the adapter's public methods (``random_scenario``,
``parameters``, ``check``), its declared capabilities (``tags.exact``) and the scenario's
fields:

1. Random phase: scenarios drawn by the adapter's ``random_scenario`` from a seeded
   ``numpy.random.Generator``, each numeric field pushed to an edge of its range with
   probability ``EDGE_P`` the way hypothesis favours boundary values (0 or 1/100 of the
   value for a float, the least valid integer).
2. Optimiser: a first-improvement coordinate search from the best scenario so far over its
   numeric fields (top-level numbers and the numbers of nested objects, except ``seed``
   and ``replicas``; coordinates in a random order): each float is tried at a tenth,
   double and zero, each integer at half and double (up to ``MAX_INT``); a move is kept
   when the scenario stays admissible and the normalised excess (measured - bound)/|bound|
   grows. When no move improves the search restarts from a fresh random scenario.
3. Every check uses the exact-expectation mode where the adapter declares one and supports
   it for that scenario (``Adapter.supports_exact``); where the exact moments diverge the
   check falls back to Monte Carlo.
4. Shrinking: a violating scenario is simplified (integers halved, floats set to zero or
   rounded to 1-2 significant digits, replicas reduced in exact mode) as long as it stays
   admissible and violated with at least ``KEEP`` of its excess; a Monte-Carlo witness is
   then confirmed with ``CONFIRM`` times the replicas. The result is the witness, a
   scenario that ``fedbound check KEY --scenario FILE`` (with ``--exact`` when the
   verdict's mode is exact) reproduces.

"Admissible" means: the adapter derives the theorem's parameters without error and every
condition of the theorem holds there (``Theorem.admissible``). ``tried`` counts the
admissible scenarios checked during phases 1-2 (at most ``budget``). An adapter that
produces no admissible scenario at all is an error, never "no violation found". The same
seed gives the same result.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

import bounds

from . import limits
from .adapter import adapter_for
from .scenario import INT_MAX
from .verdict import Verdict

#: integer fields are searched up to this value
MAX_INT = 2**16
#: fields the optimiser never changes
FROZEN = ("seed", "replicas")
#: at most this many checks while shrinking a witness
SHRINK_EVALS = 60
#: a simplification is kept only if it keeps this fraction of the excess (a clear witness)
KEEP = 0.5
#: a Monte-Carlo witness is re-checked with this many times its replicas
CONFIRM = 4
#: probability that the random phase pushes a numeric field to an edge of its range
EDGE_P = 0.5


@dataclass
class SearchResult:
    """What a search found. ``witness``: the violating scenario (the form ``fedbound check
    --scenario`` takes), ``exact``: whether its verdict is exact; ``verdict``: that of the
    witness, or of the closest scenario when nothing was found; ``best_excess``: the
    largest (measured - bound) / (|measured| + |bound|) seen; ``status``: the variant's
    registered status (a violation is *new* unless the status is "refuted")."""

    key: str
    variant: str
    status: str
    found: bool
    witness: dict[str, Any] | None
    exact: bool
    verdict: Verdict | None
    tried: int
    best_excess: float

    @property
    def new_violation(self) -> bool:
        """A violation of a result not recorded as refuted (``fedbound search`` exits 1)."""
        return self.found and self.status != "refuted"

    def as_dict(self) -> dict[str, Any]:
        return {"key": self.key, "variant": self.variant, "status": self.status,
                "found": self.found, "new_violation": self.new_violation,
                "witness": self.witness, "exact": self.exact,
                "verdict": None if self.verdict is None else self.verdict.as_dict(),
                "tried": self.tried, "best_excess": self.best_excess}

    def as_witness(self, note: str = ""):
        """The witness as a :class:`verify.witnesses.Witness` (to store and replay)."""
        from .witnesses import Witness

        if not self.found:
            raise ValueError(f"{self.key} [{self.variant}]: the search found no witness")
        return Witness(self.key, self.variant, self.exact, "violated",
                       note or f"found by fedbound search ({self.tried} admissible scenarios)",
                       self.witness)


@dataclass
class _Eval:
    scenario: Any
    verdict: Verdict
    excess: float


class _Searcher:
    def __init__(self, key: str, variant: str | None, rng: np.random.Generator):
        self.key, self.rng = key, rng
        self.thm = bounds.get(key, variant)
        self.adapter = adapter_for(key)
        self.tried = 0
        self.reason = ""  # why the last inadmissible scenario was

    def check(self, scenario, exact: bool) -> Verdict:
        return self.adapter.check(scenario, variant=self.thm.variant, exact=exact)

    def evaluate(self, scenario) -> _Eval | None:
        """Check ``scenario`` if admissible (exact mode where the adapter supports it), else
        None (with the reason in ``self.reason``)."""
        try:
            params = self.adapter.parameters(scenario, self.thm)
        except ValueError as e:
            self.reason = str(e)
            return None
        if not self.thm.admissible(**params):
            self.reason = "; ".join(map(str, self.thm.violations(**params)))
            return None
        exact = self.adapter.tags.exact and self.adapter.supports_exact(scenario)
        try:
            v = self.check(scenario, exact)
        except ValueError:
            if not exact:
                raise
            v = self.check(scenario, False)  # the exact moments diverge: Monte Carlo says so
        return _Eval(scenario, v, _excess(v))

    def random(self) -> _Eval | None:
        """A random admissible scenario: the adapter's draw with, as hypothesis does, each
        numeric field pushed to an edge of its range (0 or 1/100 of its value for a float,
        its least valid value for an integer) with probability ``EDGE_P``."""
        scenario = self.adapter.random_scenario(self.rng)
        for path, value in _numeric_fields(scenario):
            if self.rng.random() < EDGE_P:
                for c in _edges(value):
                    moved = _replace(scenario, path, c)
                    if moved is not None:
                        scenario = moved
                        break
        found = self.evaluate(scenario)
        self.tried += found is not None
        return found

    def neighbours(self, scenario) -> list:
        """Scenarios one coordinate move away (invalid ones dropped), coordinates in a
        random order."""
        out = []
        fields = _numeric_fields(scenario)
        for j in self.rng.permutation(len(fields)):
            path, value = fields[j]
            if isinstance(value, (int, np.integer)):
                cands = [value // 2, value * 2] if value * 2 <= MAX_INT else [value // 2]
            else:
                cands = [value / 10, value * 2, 0.0]
            for c in cands:
                if c != value:
                    moved = _replace(scenario, path, type(value)(c))
                    if moved is not None:
                        out.append(moved)
        return out

    def shrink(self, best: _Eval) -> _Eval:
        """Simplify a violating scenario while it stays admissible and violated."""
        evals, changed = 0, True
        while changed and evals < SHRINK_EVALS:
            changed = False
            for cand in _simpler(best.scenario, best.verdict.mode == "exact"):
                if evals >= SHRINK_EVALS:
                    break
                evals += 1
                e = self.evaluate(cand)
                if e is not None and e.verdict.verdict == "violated" and e.excess >= KEEP * best.excess:
                    best, changed = e, True
                    break
        return best


def search(key: str, *, variant: str | None = None, budget: int = 50, seed: int = 0) -> SearchResult:
    """Search for a scenario where ``key``'s bound is violated (module docstring).

    ``budget``: the number of admissible scenarios to check; half go to the random phase.
    Returns a :class:`SearchResult`; ``found`` with the shrunk ``witness`` when a check
    ended "violated"."""
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise ValueError(f"budget={budget!r} must be an integer >= 1")
    limits.require_count(budget, "search budget")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= INT_MAX:
        raise ValueError(f"seed={seed!r} must be an integer in [0, 2^63)")
    s = _Searcher(key, variant, np.random.default_rng(seed))
    best: _Eval | None = None
    attempts = 0
    while s.tried < max(1, budget // 2) and attempts < 10 * budget:
        attempts += 1
        e = s.random()
        if e is not None and (best is None or e.excess > best.excess):
            best = e
        if best is not None and best.verdict.verdict == "violated":
            return _found(s, best)
    if best is None:
        raise ValueError(f"{key}: the adapter produced no admissible scenario in {attempts} random "
                         f"draws (last reason: {s.reason or 'none'}); its _draw must produce "
                         "scenarios on which the theorem's hypotheses hold")
    current = best
    while s.tried < budget and current is not None:
        improved = None
        for cand in s.neighbours(current.scenario):
            if s.tried >= budget:
                break
            e = s.evaluate(cand)
            if e is None:
                continue
            s.tried += 1
            if e.verdict.verdict == "violated":
                return _found(s, e)
            if e.excess > current.excess:  # first improvement: move on from there
                improved = e
                break
        if improved is not None:
            current = improved
            best = improved if improved.excess > best.excess else best
        else:  # local optimum: restart from a fresh random scenario
            restart = None
            while restart is None and attempts < 10 * budget and s.tried < budget:
                attempts += 1
                restart = s.random()
            current = restart
            if current is not None and current.verdict.verdict == "violated":
                return _found(s, current)
    return SearchResult(key, s.thm.variant, s.thm.status, False, None, False, best.verdict,
                        s.tried, best.excess)


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
    """Shrink the violating scenario; a Monte-Carlo witness must also be violated with
    ``CONFIRM`` times as many replicas (else the search reports nothing found)."""
    w = s.shrink(e)
    if w.verdict.mode != "exact":
        more = w.scenario.replace(replicas=CONFIRM * w.scenario.replicas)
        again = s.check(more, False)
        if again.verdict != "violated":
            return SearchResult(s.key, s.thm.variant, s.thm.status, False, None, False, again,
                                s.tried, _excess(again))
        w = _Eval(more, again, _excess(again))
    return SearchResult(s.key, s.thm.variant, s.thm.status, True, w.scenario.to_dict(),
                        w.verdict.mode == "exact", w.verdict, s.tried, w.excess)


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


def _replace(scenario, path: tuple[str, ...], value):
    """``scenario`` with the field at ``path`` set to ``value``, or None if invalid."""
    try:
        if len(path) == 1:
            return scenario.replace(**{path[0]: value})
        nested = dict(getattr(scenario, path[0]))
        nested[path[1]] = value
        return scenario.replace(**{path[0]: nested})
    except (ValueError, TypeError):
        return None


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
        out.append(_replace(scenario, ("replicas",), max(2, scenario.replicas // 2)))
    for path, v in _numeric_fields(scenario):
        if isinstance(v, (int, np.integer)):
            cands = [v // 2] if v > 1 else []
        else:
            cands = [0.0, *_round(v)]
        out += [_replace(scenario, path, type(v)(c)) for c in cands if c != v]
    return [c for c in out if c is not None]
