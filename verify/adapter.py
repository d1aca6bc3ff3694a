"""The adapter contract: what joins one registered result to the simulator, and its registry.

An :class:`Adapter` turns a scenario into the theorem's parameters and a measurement of
its left-hand side. As in scipy.stats, the public methods are written once here
(:meth:`Adapter.parameters`, :meth:`~Adapter.measure`, :meth:`~Adapter.check`,
:meth:`~Adapter.random_scenario`, :meth:`~Adapter.plot`): they validate, then call the
hooks a result implements. Hooks:

=======================  ========  ==========================================================
hook                     required  does
=======================  ========  ==========================================================
``_derive``              yes       the theorem's parameters from a scenario
``_measure``             yes       the left-hand side on a scenario (a :class:`Measurement`)
``_draw``                no        a random admissible scenario from a :class:`~verify.draw.Draw`
                                   (feeds the battery, the search and the hypothesis strategy;
                                   :meth:`~Adapter.admissible_step` draws its step from the
                                   theorem's ``max_step``)
``_exact_unsupported``   no        why exact mode is unavailable for a scenario ("" if it is)
``_estimated_parts``     no        the paper's side of a check with estimated constants (a
                                   :class:`~verify.estimated.Parts`; with ``Tags(estimated=True)``)
``_footprint``           no        the estimated peak memory and work of a scenario
                                   (a :class:`~verify.limits.Footprint`; default None: no
                                   estimate), from its sizes alone, without building anything;
                                   :meth:`~Adapter.check`, :meth:`~Adapter.parameters` and
                                   :meth:`~Adapter.measure` refuse a scenario above the limits
                                   of :mod:`verify.limits` before they build it (an adapter
                                   without it: ``check_adapter`` warns, ``fedbound plugins``
                                   flags it)
``_compare``             no        bound vs measurement (default: :func:`verify.verdict.compare`,
                                   scalar, per cell and paired)
``_bound_series``        no        the bound along the run (x values, bound), for the figure
``_plot``                no        the figure (default: running mean of the measured series
                                   against the bound, or bars per cell)
=======================  ========  ==========================================================

One adapter serves one key: a paper's base class holds the scenario type and the
simulator call, and each key is a small subclass with ``key`` and ``default``. What an
adapter can do is declared in :class:`Tags` (as scikit-learn declares estimator tags);
the search, the suite and the contract checks read the declaration.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import math
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from fedbound import bounds
from fedbound.bounds.registry import did_you_mean

from . import limits
from .boundary import checked_comparison
from .draw import Draw, RngDraw
from .inputs import read_text
from .limits import Footprint
from .plugins import ensure_loaded, note
from .scenario import Scenario, jsonable, parse_json
from .verdict import OUTCOMES, Comparison, Measurement, Verdict, compare


@dataclass(frozen=True)
class Tags:
    """What an adapter can do.

    ``exact``: an exact-expectation mode exists (for the scenarios that
    ``_exact_unsupported`` accepts); ``cells``: the bound is one number per cell (round,
    group, ...), each checked; ``paired``: some scenarios are checked paired, one bound per
    replica on its own random schedule; ``estimated``: the bound can be checked with
    constants estimated on any problem (``_estimated_parts``, :func:`verify.check_estimated`)."""

    exact: bool = False
    cells: bool = False
    paired: bool = False
    estimated: bool = False


class Adapter:
    """Base class of adapters (module docstring). Subclasses set ``key``,
    ``scenario_type``, ``default`` and ``tags``, and implement ``_derive`` and
    ``_measure``; see the hook table of the module docstring for the rest."""

    #: the registered result this adapter checks, e.g. "mllsgd.theorem1"
    key: ClassVar[str] = ""
    #: the Scenario dataclass of the result
    scenario_type: ClassVar[type[Scenario]]
    #: the default scenario (``fedbound scenario KEY``)
    default: ClassVar[Scenario]
    tags: ClassVar[Tags] = Tags()
    #: axis labels of the default figure
    series_label: ClassVar[str] = "iteration [count]"
    lhs_label: ClassVar[str] = "left-hand side [scenario units]"
    #: the unit of a scenario field whose name means something else here than in
    #: ``verify.plots.FIELD_UNITS`` (a field or a family's parameter put on an axis)
    field_units: ClassVar[dict[str, str]] = {}

    # ------------------------------------------------------------------ public
    def theorem(self, variant: str | None = None) -> bounds.Theorem:
        return bounds.get(self.key, variant)

    def default_scenario(self) -> Scenario:
        """A copy of the default scenario."""
        return copy.deepcopy(self.default)

    def load(self, data: Scenario | Mapping | str | os.PathLike | None = None) -> Scenario:
        """A validated scenario from a scenario object, a mapping (missing fields take the
        default's values), JSON text, or the path of a JSON file; None gives the default."""
        if data is None:
            return self.default_scenario()
        if isinstance(data, Scenario):
            if not isinstance(data, self.scenario_type):
                raise ValueError(f"{self.key} takes a {self.scenario_type.__name__}, got a "
                                 f"{type(data).__name__}")
            data.validate()
            return data
        if isinstance(data, os.PathLike) or (isinstance(data, str) and not data.lstrip().startswith("{")):
            data = read_text(data, f"scenario file {data}")
        if isinstance(data, str):
            data = parse_json(data, "scenario")
        if not isinstance(data, Mapping):
            raise ValueError(f"scenario must be a JSON object, got {type(data).__name__}")
        return self.scenario_type.from_dict({**self.default.to_dict(), **data})

    def parameters(self, scenario: Scenario, thm: bounds.Theorem | None = None) -> dict[str, Any]:
        """The theorem's parameters derived from ``scenario``: names of ``thm.params``, every
        one the theorem requires among them, each finite."""
        thm = self.theorem() if thm is None else thm
        self.require_resources(scenario)
        params = self._derive(scenario, thm)
        unknown = sorted(set(params) - set(thm.params))
        missing = sorted(set(thm.required()) - set(params))
        if unknown or missing:
            raise TypeError(f"adapter {self.key}: _derive must return parameters of {thm.key} "
                            f"[{thm.variant}] only, and all it requires; unknown {unknown}, "
                            f"missing {missing}")
        for name, value in params.items():
            arr = np.asarray(value, dtype=float)
            if not np.all(np.isfinite(arr)):
                raise ValueError(f"{self.key}: the derived parameter {name} is not finite "
                                 f"({value!r}) on this scenario")
        return params

    def estimated_parts(self, scenario: Scenario, thm: bounds.Theorem, *, problem, x1, settings):
        """The paper's side of a check with estimated constants on ``problem`` (default the
        scenario's own): its :class:`~verify.estimated.Parts` (``_estimated_parts``)."""
        return self._estimated_parts(scenario, thm, problem=problem, x1=x1, settings=settings)

    def supports_exact(self, scenario: Scenario) -> bool:
        return not self._exact_unsupported(scenario)

    def footprint(self, scenario: Scenario, *, exact: bool = False) -> Footprint | None:
        """The estimated peak memory and work of checking ``scenario`` (None: the adapter
        gives no estimate), computed from its sizes without building anything."""
        fp = self._footprint(scenario, exact)
        if fp is not None and not isinstance(fp, Footprint):
            raise TypeError(f"adapter {self.key}: _footprint must return a verify.limits.Footprint "
                            f"or None, got {type(fp).__name__}")
        return fp

    def require_resources(self, scenario: Scenario, *, exact: bool = False) -> None:
        """Raise :class:`verify.limits.ResourceError` (a ValueError naming the fields and the
        estimate) when ``scenario`` would exceed the memory or step limit."""
        limits.require(self.key, self.footprint(scenario, exact=exact))

    def measure(self, scenario: Scenario, params: Mapping[str, Any], *,
                exact: bool = False) -> Measurement:
        """The left-hand side on ``scenario`` (``exact``: its exact expectation)."""
        if exact:
            why = self._exact_unsupported(scenario)
            if why:
                raise ValueError(f"{self.key}: exact mode is unavailable here: {why}")
        self.require_resources(scenario, exact=exact)
        m = self._measure(scenario, params, exact)
        m.validate(self.key)
        return m

    def check(self, scenario=None, *, variant: str | None = None, exact: bool = False,
              ax=None, label: str | None = None) -> Verdict:
        """The bound of ``variant`` against the measurement on ``scenario`` (see
        :func:`verify.check`). ``ax``: also draw the figure of this check on these axes,
        from this very measurement (:meth:`plot`; ``label`` names the scenario)."""
        t0 = time.perf_counter()
        s = self.load(scenario)
        thm = self.theorem(variant)
        if exact and not self._exact_unsupported(s):
            self.require_resources(s, exact=True)
        return self.check_derived(s, thm, self.parameters(s, thm), exact=exact, t0=t0, ax=ax,
                                  label=label)

    def check_derived(self, s: Scenario, thm: bounds.Theorem, params: dict[str, Any], *,
                      exact: bool = False, t0: float | None = None, ax=None,
                      label: str | None = None) -> Verdict:
        """The verdict on a loaded scenario whose parameters are already derived
        (``parameters(s, thm)``): what :meth:`check` does after the derivation, for callers
        that derived them to decide whether to check at all (the search)."""
        t0 = time.perf_counter() if t0 is None else t0
        violations = [str(v) for v in thm.violations(**params)]
        bound = finite_bound(thm, params, violations)
        m = self.measure(s, params, exact=exact)
        c: Comparison = checked_comparison(self, self._compare(bound, m), OUTCOMES)
        verdict = Verdict(
            key=self.key, variant=thm.variant, bound=c.bound, measured_mean=c.mean,
            measured_ci=c.ci, verdict=c.outcome,
            slack=_slack(c.bound, c.mean),
            admissible=not violations, violations=violations, params=jsonable(params),
            scenario=s.to_dict(), mode=c.mode, replicas=c.replicas, diverged=m.diverged,
            cell=None if c.cell is None else list(c.cell), notes=list(c.notes), atol=m.atol,
            seconds=time.perf_counter() - t0)
        if ax is not None:
            self._plot(ax, s, thm, params, m)
            if label is None:
                label = ("the default scenario" if s == self.default_scenario() else
                         "the given scenario")
            ax.set_title(f"{ax.get_title()}\n{label}: {_outcome_text(verdict)}", fontsize=9)
        return verdict

    def admissible_step(self, scenario: Scenario, draw: Draw, low: float = 0.05,
                        high: float = 1.0, *, variant: str | None = None) -> float:
        """A step size the theorem admits on ``scenario``: a fraction, drawn uniformly in
        [``low``, ``high``] from ``draw``, of its largest admissible step (``thm.max_step``
        of ``variant``, default the default variant's) at the other parameters that
        ``_derive`` gives on ``scenario`` (the scenario's own step, if set, is left out). What
        a ``_draw`` calls so that it never solves the theorem's step condition by hand::

            s = SGDScenario(L=draw.uniform(0.5, 4.0), K=draw.integer(1, 200))
            return s.replace(eta=self.admissible_step(s, draw))
        """
        if not 0 < low <= high <= 1:
            raise ValueError(f"admissible_step: low={low!r}, high={high!r} must satisfy "
                             "0 < low <= high <= 1 (fractions of the largest admissible step)")
        thm = self.theorem(variant)
        if thm.step is None:
            raise ValueError(f"{self.key} [{thm.variant}] names no step parameter (Theorem.step)")
        params = {k: v for k, v in self._derive(scenario, thm).items() if k != thm.step}
        top = float(thm.max_step(**params))
        if not (math.isfinite(top) and top > 0):
            raise ValueError(f"{self.key} [{thm.variant}]: the largest admissible {thm.step} is "
                             f"{top:g} on this scenario: no step to draw")
        return draw.uniform(low, high) * top

    def random_scenario(self, source: np.random.Generator | Draw) -> Scenario:
        """A random scenario on which the result's hypotheses hold (small: its check takes
        about a second), from a seeded generator or any :class:`~verify.draw.Draw`."""
        draw = RngDraw(source) if isinstance(source, np.random.Generator) else source
        s = self._draw(draw)
        if not isinstance(s, self.scenario_type):
            raise TypeError(f"adapter {self.key}: _draw returned a {type(s).__name__}, not a "
                            f"{self.scenario_type.__name__}")
        s.validate()
        return s

    def plot(self, scenario=None, *, variant: str | None = None, exact: bool = False, ax=None,
             label: str | None = None):
        """The figure of the bound against the measurement on ``scenario``; returns the axes.
        Its title names the scenario (``label``; default "the default scenario" or "the
        given scenario") and says the outcome there, below the title the hook ``_plot`` set:
        the figure of :meth:`check` with ``ax``."""
        if ax is None:
            import matplotlib.pyplot as plt

            from .figures import SIZE

            ax = plt.subplots(figsize=SIZE, layout="constrained")[1]
        self.check(scenario, variant=variant, exact=exact, ax=ax, label=label)
        return ax

    def overrides(self, hook: str) -> bool:
        """Whether this adapter implements the hook ``hook`` (``"_footprint"``, ``"_draw"``,
        ...) rather than inheriting the base class's default."""
        return getattr(type(self), hook) is not getattr(Adapter, hook)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.key}>"

    # ------------------------------------------------------------------ hooks
    def _derive(self, scenario: Scenario, thm: bounds.Theorem) -> dict[str, Any]:
        raise NotImplementedError(f"adapter {self.key} must implement _derive")

    def _measure(self, scenario: Scenario, params: Mapping[str, Any], exact: bool) -> Measurement:
        raise NotImplementedError(f"adapter {self.key} must implement _measure")

    def _draw(self, draw: Draw) -> Scenario:
        raise NotImplementedError(f"adapter {self.key} declares no random scenarios (_draw): the "
                                  "random battery, the search and verify.strategies need one")

    def _estimated_parts(self, scenario: Scenario, thm: bounds.Theorem, *, problem, x1, settings):
        raise NotImplementedError(f"adapter {self.key} has no check with estimated constants "
                                  "(Tags(estimated=True) and _estimated_parts)")

    def _exact_unsupported(self, scenario: Scenario) -> str:
        return "" if self.tags.exact else f"{self.key} has no exact-expectation mode"

    def _footprint(self, scenario: Scenario, exact: bool) -> Footprint | None:
        """The scenario's estimated peak memory and work (module docstring); None: no
        estimate, no limit applies. Build it with :meth:`verify.limits.Footprint.of` from
        the sizes of the simulator's buffers, naming the fields in each term."""
        return None

    def _compare(self, bound, m: Measurement) -> Comparison:
        return compare(bound, m)

    def _bound_series(self, scenario: Scenario, thm: bounds.Theorem, params: Mapping[str, Any],
                      n: int) -> tuple[np.ndarray, np.ndarray] | None:
        """The bound after each prefix of the run, as (x values in 1..n, bound), or None
        (the default figure then draws the bound of the whole run at the run's last point
        only, where the theorem states it: a line across the run would compare it with
        running means it says nothing about)."""
        return None

    def _plot(self, ax, scenario: Scenario, thm: bounds.Theorem, params: Mapping[str, Any],
              m: Measurement) -> None:
        from .figures import integer_ticks, legend_below

        how = "exact" if m.exact is not None else "Monte Carlo mean"
        label = f"bound [{thm.variant}]"  # the title names the result: a legend below holds two
        bound = np.asarray(thm.evaluate(**params), dtype=float)
        if m.paired:
            bound = bound.mean(axis=0)
        running = m.series is not None and bound.ndim == 0
        if running:
            k = np.arange(1, m.series.size + 1)
            ax.loglog(k, np.cumsum(m.series) / k, "o-" if k.size < FEW_POINTS else "-", ms=3,
                      label=f"measured running mean ({how})")  # a point of a short run shows
            along = self._bound_series(scenario, thm, params, m.series.size)
            if along is None:  # stated for the whole run: it bounds the last point alone
                ax.loglog([k[-1]], [float(bound)], "D", ms=7, color="C1",
                          label=f"{label}, at the end of the run only")
            else:
                ax.loglog(*along, "o-", ms=3, color="C1", label=label)
            ax.set_xlabel(self.series_label)
        else:
            measured = np.asarray(m.exact if m.exact is not None else m.values.mean(axis=0))
            cells = np.arange(max(bound.size, measured.size))
            ax.bar(cells - 0.2, np.broadcast_to(bound, measured.shape).ravel(), 0.4, label=label)
            ax.bar(cells + 0.2, measured.ravel(), 0.4, label=f"measured ({how})")
            ax.set_yscale("log")
            ax.set_xlabel("cell: the round, group or worker the bound is stated for [index]")
            integer_ticks(ax.xaxis)
        ax.set_ylabel(self.lhs_label)
        ax.set_title(f"{self.key} [{thm.variant}]: bound vs measurement")
        if running:
            ax.legend()
        else:  # bars fill the axes to their top: no place inside is free
            legend_below(ax)


#: a measured series shorter than this is drawn with a marker at each point (one point alone
#: is no line)
FEW_POINTS = 20


def _outcome_text(v: Verdict) -> str:
    """What a check concluded, in a few words (a figure's title)."""
    hypotheses = "" if v.admissible else " (hypotheses fail)"
    return (f"{v.verdict}{hypotheses}, measured {float(v.measured_mean):.3g} vs bound "
            f"{float(v.bound):.3g} ({v.mode})")


def finite_bound(thm: bounds.Theorem, params: Mapping[str, Any], violations=()):
    """``thm.evaluate(**params)`` when it is finite; else ValueError saying which term and
    which parameter make it infinite or undefined (:func:`nonfinite_bound`)."""
    with undefined_named(thm, params):
        value = thm.evaluate(**params)
    if not np.all(np.isfinite(value)):
        raise ValueError(nonfinite_bound(thm, params, violations))
    return value


@contextlib.contextmanager
def undefined_named(thm: bounds.Theorem, params: Mapping[str, Any]):
    """Add the most extreme parameter to the ValueError of a bound that is undefined (NaN)
    at ``params``, e.g. an underflowing step."""
    try:
        yield
    except ValueError as e:
        used = [p for p in thm.required() if p in params]
        if "undefined" not in str(e) or not used:
            raise
        raise ValueError(f"{e}; its most extreme parameter is {_extreme(used, params)}") from None


def _extreme(names, values) -> str:
    worst = max(names, key=lambda p: _magnitude(values[p]))
    return f"{worst}={_value_text(values[worst])}"


def nonfinite_bound(thm: bounds.Theorem, params: Mapping[str, Any], violations=()) -> str:
    """Why the bound of ``thm`` is not finite at ``params``, in one line: the first term that
    is not finite and the most extreme of the parameters it depends on (the one furthest from
    1 in orders of magnitude), e.g. "term 'variance' = inf overflows float64; its most
    extreme parameter is sigma=1e+308"."""
    values = {k: v for k, v in params.items() if k in thm.params}
    terms = thm.terms(**values)
    where = ""
    for name in terms:
        if np.all(np.isfinite(terms[name])):
            continue
        used = [p for p in thm.term_params(name) if p in values]
        where = f": term '{name}' = {float(np.max(terms[name])):g} overflows float64"
        if used:
            extreme = _extreme(used, values)
            others = [p for p in used if p != extreme.partition("=")[0]]
            where += (f"; its most extreme parameter is {extreme}"
                      + (f" (it also depends on {', '.join(others)})" if others else ""))
        break
    tail = f"; its conditions fail too: {'; '.join(violations)}" if violations else ""
    return f"{thm.key} [{thm.variant}]: the bound is not finite at these parameters{where}{tail}"


def _magnitude(v) -> float:
    """How far ``v`` (or its most extreme entry) is from 1, in orders of magnitude."""
    x = np.abs(np.asarray(v, dtype=float)).ravel()
    x = x[(x > 0) & np.isfinite(x)]
    return float(np.max(np.abs(np.log10(x)))) if x.size else 0.0


def _value_text(v) -> str:
    arr = np.asarray(v, dtype=float)
    if arr.ndim == 0:
        return f"{float(arr):g}"
    i = int(np.argmax(np.abs(arr)))
    return f"{arr.ravel()[i]:g} (entry {i} of {arr.size})"


def _slack(bound: float, mean: float) -> float:
    """bound / measured mean: inf when the mean is 0 (or below), 0 when it is infinite."""
    if mean <= 0:
        return math.inf
    return 0.0 if math.isinf(mean) else bound / mean


# ---------------------------------------------------------------------- the registry

_ADAPTERS: dict[str, Adapter] = {}


def register_adapter(adapter: Adapter | type[Adapter]):
    """Register an adapter (an instance, or a class, which is instantiated); usable as a
    class decorator, it returns its argument. The result's theorem must already be
    registered (``bounds.register``); registering a key twice is an error."""
    inst = adapter() if isinstance(adapter, type) else adapter
    if not isinstance(inst, Adapter):
        raise TypeError(f"register_adapter takes an Adapter, got {type(inst).__name__}")
    key = inst.key
    if not key:
        raise ValueError(f"{type(inst).__name__}.key is empty: name the result it checks")
    if key not in bounds.keys():
        raise ValueError(f"adapter {type(inst).__name__}: no result {key!r} is registered; "
                         "register its theorem first (bounds.register)")
    st = getattr(inst, "scenario_type", None)
    if not (isinstance(st, type) and issubclass(st, Scenario) and dataclasses.is_dataclass(st)):
        raise TypeError(f"adapter {key}: scenario_type must be a dataclass subclass of Scenario")
    if not isinstance(getattr(inst, "default", None), st):
        raise TypeError(f"adapter {key}: default must be a {st.__name__}")
    if key in _ADAPTERS:
        raise ValueError(f"an adapter for {key!r} is already registered "
                         f"({type(_ADAPTERS[key]).__name__})")
    _ADAPTERS[key] = inst
    note("adapters", key)
    return adapter


def unregister_adapter(key: str) -> None:
    """Remove the adapter of ``key`` (see ``verify.testing.registered`` for tests)."""
    _ADAPTERS.pop(key, None)


def adapter_for(key: str) -> Adapter:
    """The adapter of the registered result ``key``."""
    ensure_loaded()
    if key not in _ADAPTERS:
        if key in bounds.keys():
            raise ValueError(f"result {key!r} is registered but has no adapter "
                             "(verify.api.register_adapter)")
        raise ValueError(f"unknown result {key!r}{did_you_mean(key, _ADAPTERS)}; registered: "
                         f"{', '.join(adapter_keys())}")
    return _ADAPTERS[key]


def adapter_keys() -> list[str]:
    """The keys that have an adapter, sorted."""
    ensure_loaded()
    return sorted(_ADAPTERS)


def default_scenario(key: str) -> Scenario:
    """A copy of the default scenario of ``key``."""
    return adapter_for(key).default_scenario()


def load_scenario(key: str, data) -> Scenario:
    """A scenario of ``key`` from a mapping, JSON text or a path (missing fields take the
    default's values); see :meth:`Adapter.load`."""
    return adapter_for(key).load(data)
