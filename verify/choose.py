"""Choosing a problem's knobs (a sync time, local steps, a step size) for the user's own
problem: the generic engine.

Three answers, side by side, each simulated on the problem with its 95% interval and its
regret against the best configuration found:

- **certified**, one per valid variant of the chooser's bound (:meth:`Chooser.certified`):
  the minimiser of the bound with the problem's certified constants, and the bound's value
  there, a guarantee;
- **calibrated** (:meth:`Chooser.calibrated`): the minimiser of a prediction built from
  constants estimated on this instance (each chooser says which model, in
  :attr:`Chooser.calibration`); a prediction, not a certificate;
- **simulated**: an adaptive search on the problem itself, started from the calibrated
  answer: successive halving (Jamieson & Talwalkar 2016; Li et al. 2018, Hyperband) over
  the grid of the knobs (:meth:`Chooser.knobs`), the survivors of each rung re-run with
  twice the replicas, then a paired comparison of the finalists, the other answers and
  the neighbours of the leader with common random numbers, run again on twice the replicas
  (up to :attr:`Chooser.resolve` times) while a configuration that cannot be told from the
  best is more than 10% behind it.

Every configuration of the last, paired stage runs on the same seeds (the same delay paths
and draws, :meth:`Chooser.simulate` with ``paired=True``), so that the difference between
two configurations is measured replica by replica. The regret of an answer is
mean(v - v_best) / |mean(v_best)| over those replicas (for a metric to maximise, v_best - v),
with the 95% Student-t interval of the paired differences; an answer **passes** when its
regret is at most :data:`TOLERANCE` or it cannot be told from the best at 95% (the lower end
of the interval of the paired difference is at most 0).

The planned simulations (every rung, the paired stage at its largest) are checked against
the resource limits (``verify.limits``) before anything runs: a grid too large or a run too
long is refused with a ResourceError naming the knobs.

Each paper's chooser lives with its paper and registers with :func:`register_chooser`
(through ``verify.api``, as a plugin's does); ``fedbound choose NAME`` runs the chooser
registered under NAME with the command-line options it declares.
"""

from __future__ import annotations

import itertools
import math
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from fedbound import bounds

from . import limits
from .plugins import ensure_loaded, note
from .scenario import jsonable
from .verdict import t_multiplier

#: what ``choose`` runs: every answer with its simulation ("both"), the certified and
#: calibrated predictions only, nothing simulated ("bound"), or the simulated search only
METHODS = ("both", "bound", "simulate")
#: an answer passes when its regret is at most this, or it cannot be told from the best
TOLERANCE = 0.1
#: the statuses of a variant whose bound is valid (a certificate)
VALID = ("holds", "holds-with-erratum")
SCALES = ("linear", "log")


# ---------------------------------------------------------------------- the knobs


@dataclass(frozen=True)
class Knob:
    """One knob and the values the search compares: ``values`` ascending (one value: the knob
    is fixed), on a ``"log"`` or ``"linear"`` ``scale`` (where the search refines between
    two values: the geometric or the arithmetic mean), ``integer`` when only integers are
    allowed; ``option`` names the command-line option that sets it (for messages)."""

    name: str
    values: tuple
    scale: str = "linear"
    integer: bool = False
    option: str = ""

    def __post_init__(self):
        if self.scale not in SCALES:
            raise ValueError(f"knob {self.name}: scale={self.scale!r} must be one of {SCALES}")
        if not self.values:
            raise ValueError(f"{self.option or self.name}: no value to choose from")
        values = sorted(set(self.values))
        for v in values:
            if not (isinstance(v, (int, float)) and math.isfinite(v)) or (self.scale == "log" and v <= 0):
                raise ValueError(f"{self.option or self.name}={v!r} must be a finite number"
                                 + (" > 0" if self.scale == "log" else ""))
        object.__setattr__(self, "values", tuple(int(v) if self.integer else float(v) for v in values))

    @property
    def fixed(self) -> bool:
        return len(self.values) == 1

    def between(self, a, b):
        """The value halfway between ``a`` and ``b`` on the knob's scale (None when an
        integer knob has none strictly between)."""
        mid = math.sqrt(a * b) if self.scale == "log" and a > 0 and b > 0 else (a + b) / 2
        if self.integer:
            mid = int(round(mid))
            return mid if min(a, b) < mid < max(a, b) else None
        return float(mid)

    def neighbours(self, value) -> list:
        """The values halfway between ``value`` and its nearest grid values on either side
        (none for a fixed knob): where the search looks around a leader."""
        if self.fixed:
            return []
        lower = [v for v in self.values if v < value]
        upper = [v for v in self.values if v > value]
        out = [self.between(value, side[k]) for side, k in ((lower, -1), (upper, 0)) if side]
        return [v for v in out if v is not None and v != value]


def grid(knobs: Sequence[Knob]) -> list[dict[str, Any]]:
    """Every combination of the knobs' values (the product), knob order kept."""
    return [dict(zip((k.name for k in knobs), combo, strict=True))
            for combo in itertools.product(*(k.values for k in knobs))]


def around(knobs: Sequence[Knob], settings: dict[str, Any]) -> list[dict[str, Any]]:
    """The settings one knob at a time halfway to its neighbouring grid values."""
    out = []
    for k in knobs:
        for v in k.neighbours(settings[k.name]):
            out.append({**settings, k.name: v})
    return out


# ---------------------------------------------------------------------- results


class NoCertificate(ValueError):
    """What :meth:`Chooser.certified` raises when the problem has no certified constants for
    the variant (a neural network's L and G): :func:`choose` gives that variant's answer no
    settings, and the message as its note, and goes on with the other answers."""


@dataclass
class Evaluation:
    """The simulation of one configuration: ``values`` per replica (inf where a replica
    diverged or never reached the target), ``extra`` what else it measured."""

    settings: dict[str, Any]
    values: np.ndarray
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def value(self) -> float:
        """The mean over replicas (inf when any replica is inf)."""
        v = np.asarray(self.values, dtype=float)
        return float(v.mean()) if np.all(np.isfinite(v)) else math.inf

    @property
    def ci(self) -> float:
        """The half-width of its 95% interval."""
        return half_width(self.values)


@dataclass
class Proposal:
    """What a certified bound or the calibrated prediction proposes: ``settings``, the
    ``predicted`` value there (the bound's value, or the predicted metric), the prediction
    over the configurations it compared (``curve``) and a ``note``."""

    settings: dict[str, Any]
    predicted: float
    curve: list[dict[str, Any]] = field(default_factory=list)
    note: str = ""


@dataclass
class Answer:
    """One answer of :func:`choose`: its ``kind`` ("certified", "calibrated" or
    "simulated"), the ``variant`` of a certified one, its ``settings``, the simulated
    ``value`` of the metric there (mean over the paired replicas) with the half-width ``ci``
    of its 95% interval, its ``regret`` against the best with the half-width ``regret_ci``
    (paired), whether it ``passes`` (module docstring), what its method ``predicted`` there
    and a ``note``. ``curve``: the prediction (or, for the simulated answer, every simulated
    configuration) over the configurations compared. A certified answer of a variant the
    problem has no certified constants for (:class:`NoCertificate`) has no ``settings``
    (None), nothing simulated, and the reason as its ``note``."""

    kind: str
    settings: dict[str, Any] | None
    predicted: float | None = None
    variant: str | None = None
    value: float | None = None
    ci: float | None = None
    regret: float | None = None
    regret_ci: float | None = None
    passes: bool | None = None
    note: str = ""
    curve: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self, curves: bool = False) -> dict[str, Any]:
        out = {"settings": self.settings, "value": self.value, "ci": self.ci,
               "regret": self.regret, "regret_ci": self.regret_ci, "passes": self.passes}
        if self.variant is not None:
            out["variant"] = self.variant
        if self.kind == "certified":
            out["bound"] = self.predicted
        elif self.kind == "calibrated":
            out["predicted"] = self.predicted
        if self.note:
            out["note"] = self.note
        if curves:
            out["curve"] = self.curve
        return jsonable(out)


@dataclass
class ChoiceReport:
    """What :func:`choose` returns: the chooser, its knobs, the metric (and whether it is
    maximised), the validated inputs, the answers (``certified``: one per variant,
    ``calibrated``, ``simulated``), what the calibrated model is (``calibration``), how the
    search went (``search``: its rungs, the paired replicas, the configurations run), the
    seconds each part took, and a one-line ``message``."""

    chooser: str
    knobs: list[str]
    metric: str
    maximise: bool
    inputs: dict[str, Any]
    certified: list[Answer]
    calibrated: Answer | None
    simulated: Answer | None
    calibration: str
    search: dict[str, Any]
    seconds: dict[str, float]
    message: str

    def text(self) -> str:
        """The report as aligned text (what ``fedbound choose`` prints)."""
        from .text import format_choice

        return format_choice(self)

    @property
    def answers(self) -> list[Answer]:
        """Every answer: the certified ones, the calibrated, the simulated."""
        return [*self.certified, *(a for a in (self.calibrated, self.simulated) if a is not None)]

    def as_dict(self, curves: bool = False) -> dict[str, Any]:
        """The report as JSON values; the per-configuration curves only with ``curves``."""
        def one(a):
            return None if a is None else a.as_dict(curves)

        return jsonable({
            "chooser": self.chooser, "knobs": self.knobs, "metric": self.metric,
            "maximise": self.maximise, "inputs": self.inputs,
            "certified": [a.as_dict(curves) for a in self.certified],
            "calibrated": one(self.calibrated), "simulated": one(self.simulated),
            "calibration": self.calibration, "search": self.search, "seconds": self.seconds,
            "message": self.message})


# ---------------------------------------------------------------------- the chooser


class Chooser(ABC):
    """A choice of configuration (module docstring).

    ``name`` names the chooser in its report; ``key`` is the result whose bound gives the
    certified answers; ``metric`` says what the simulation measures (``maximise``: True for
    an accuracy); ``calibration`` what the calibrated prediction is. ``command`` the name
    of ``fedbound choose COMMAND`` (default: the key's prefix, the paper), ``aliases`` other
    command names that run it, ``summary`` and ``example`` its help. Its command-line options
    are its own: :meth:`add_arguments` adds them, :meth:`from_arguments` builds the chooser
    from them.

    The search: ``screen_replicas`` replicas per configuration in its first rung (doubled
    at every rung, half the configurations kept), ``replicas`` in the paired stage,
    ``finalists`` configurations carried into it; ``resolve``: the paired stage is run again
    on twice the replicas, up to ``resolve`` times ``replicas``, while a configuration that
    cannot be told from its best at 95% is more than TOLERANCE behind it (1: never)."""

    name: str
    key: str
    metric: str
    maximise: bool = False
    calibration: str = ""
    command: ClassVar[str] = ""
    aliases: ClassVar[tuple[str, ...]] = ()
    summary: ClassVar[str] = ""
    example: ClassVar[str] = ""
    replicas: int = 32
    screen_replicas: int = 4
    finalists: int = 2
    resolve: int = 1

    @classmethod
    def add_arguments(cls, parser) -> None:
        """Add the chooser's options to ``parser`` (an ``argparse.ArgumentParser``); none
        by default."""
        return None

    @classmethod
    def from_arguments(cls, args, read_scenario: Callable[[str, str], Any]) -> Chooser:
        """The chooser of the parsed options ``args``; ``read_scenario(key, path)`` reads a
        scenario file of a result (``-`` for standard input) the way ``fedbound check
        --scenario`` does, less the fields that name the problem (``data``, ``model``, ...:
        the command has already put them in ``args`` where no option gave them,
        ``verify.named_problem.take_file_fields``)."""
        raise NotImplementedError(f"chooser {cls.__name__} has no command-line options "
                                  "(Chooser.from_arguments)")

    @abstractmethod
    def inputs(self) -> dict[str, Any]:
        """The validated inputs, as JSON values."""

    @abstractmethod
    def knobs(self) -> list[Knob]:
        """The knobs and the grid of values the search compares (a fixed knob: one value)."""

    @abstractmethod
    def certified(self, variant: str) -> Proposal:
        """The configuration that ``variant`` of the bound prefers, with the bound's value."""

    @abstractmethod
    def calibrated(self) -> Proposal:
        """The configuration the calibrated prediction prefers, with the predicted metric."""

    @abstractmethod
    def simulate(self, settings: list[dict[str, Any]], replicas: int, *,
                 paired: bool) -> list[Evaluation]:
        """One Evaluation per configuration, in order, each on ``replicas`` replicas. With
        ``paired``, every configuration runs on the same seeds 0 .. replicas - 1 (the
        same delay paths and draws): replica r of one configuration is paired with replica
        r of every other. Without, the chooser may run them in one batch."""

    def footprint(self, settings: dict[str, Any], replicas: int) -> limits.Footprint | None:
        """The memory and work of simulating ``settings`` on ``replicas`` replicas, from the
        sizes alone (None: no estimate, no limit applies); :func:`choose` refuses the planned
        search above the limits (``verify.limits.require_runs``) before anything runs."""
        return None

    def bound_footprints(self) -> dict[str, limits.Footprint | None]:
        """The estimated memory and work of what :meth:`certified` computes (for every
        variant), by a label naming it in the chooser's options ("the bound at S = 0 with
        --T 600"), from the sizes alone (:class:`verify.limits.Footprint`); :func:`choose`
        refuses them above the limits before it computes anything. Default {}: no estimate."""
        return {}

    def variants(self) -> list[str]:
        """The variants of :attr:`key` whose bound is valid (status holds or
        holds-with-erratum): one certified answer each."""
        return [v for v in bounds.variants(self.key) if bounds.get(self.key, v).status in VALID]


# ---------------------------------------------------------------------- the registry

_CHOOSERS: dict[str, type[Chooser]] = {}


def command_of(cls: type[Chooser]) -> str:
    """The name of ``fedbound choose NAME`` that runs ``cls``."""
    return cls.command or cls.key.split(".", 1)[0]


def register_chooser(cls: type[Chooser]) -> type[Chooser]:
    """Register a :class:`Chooser` subclass under :func:`command_of` (usable as a class
    decorator; it returns its argument). A name or alias registered twice is an error."""
    if not (isinstance(cls, type) and issubclass(cls, Chooser)):
        raise TypeError(f"register_chooser takes a Chooser subclass, got {cls!r}")
    name = command_of(cls)
    taken = {n for c in _CHOOSERS.values() for n in (command_of(c), *c.aliases)}
    clash = sorted({name, *cls.aliases} & taken)
    if clash:
        raise ValueError(f"chooser {cls.__name__}: the name {clash[0]!r} is already registered")
    _CHOOSERS[name] = cls
    note("choosers", name)
    return cls


def unregister_chooser(name: str) -> None:
    """Remove the chooser registered under ``name`` (for tests)."""
    _CHOOSERS.pop(name, None)


def choosers() -> dict[str, type[Chooser]]:
    """The registered choosers by command name (the plugins loaded)."""
    ensure_loaded()
    return dict(sorted(_CHOOSERS.items()))


def chooser_class(name: str) -> type[Chooser]:
    """The chooser registered under ``name`` or one of its aliases; ValueError listing the
    registered ones otherwise."""
    for command, cls in choosers().items():
        if name == command or name in cls.aliases:
            return cls
    raise ValueError(f"no chooser {name!r}; registered: {', '.join(choosers()) or 'none'}")


# ---------------------------------------------------------------------- statistics


def half_width(v) -> float:
    """Half-width of the 95% Student-t interval of the mean of ``v`` (inf when a value is
    not finite or there are fewer than two)."""
    v = np.asarray(v, dtype=float)
    if v.size < 2 or not np.all(np.isfinite(v)):
        return math.inf
    return float(t_multiplier(v.size) * v.std(ddof=1) / math.sqrt(v.size))


def paired_regret(values, best, *, maximise: bool = False) -> tuple[float, float, bool]:
    """(regret, half-width of its 95% interval, whether the difference is significant) of
    per-replica ``values`` against the best configuration's ``best`` on the same replicas:
    the paired differences d = values - best (best - values when maximising), regret =
    mean(d) / |mean(best)|. A replica that is inf for ``values`` but not for ``best`` makes
    the regret inf; one inf in both counts as no difference."""
    v, b = np.asarray(values, dtype=float), np.asarray(best, dtype=float)
    if v.shape != b.shape:
        raise ValueError(f"paired values need the same replicas: {v.shape} and {b.shape}")
    both = np.isinf(v) & np.isinf(b) & (np.sign(v) == np.sign(b))
    with np.errstate(invalid="ignore"):
        d = np.where(both, 0.0, (b - v) if maximise else (v - b))
    scale = np.abs(b[~both]).mean() if (~both).any() else math.nan
    if not np.all(np.isfinite(d)):
        worse = np.any(d == np.inf)
        return (math.inf if worse else -math.inf), math.inf, True
    if not (math.isfinite(scale) and scale > 0):
        scale = 1.0  # a best of exactly 0: the regret is the difference itself
    mean = float(d.mean())
    hw = 0.0 if d.size and np.all(d == d[0]) else half_width(d)
    return mean / scale, hw / scale, bool(mean - hw > 0)


def passes(regret: float, regret_ci: float) -> bool:
    """Regret at most :data:`TOLERANCE`, or not told from the best at 95%."""
    return bool(regret <= TOLERANCE or regret - regret_ci <= 0)


# ---------------------------------------------------------------------- the search


@dataclass
class Plan:
    """The simulations :func:`choose` will run: per rung (configurations, replicas), and the
    paired stage's largest size."""

    rungs: list[tuple[int, int]]
    paired: tuple[int, int]
    resolving: list[tuple[int, int]] = field(default_factory=list)

    def runs(self) -> int:
        """Replica runs in all (configurations x replicas, summed), the paired stage's
        resolving runs included (the most it may take)."""
        return sum(n * r for n, r in [*self.rungs, self.paired, *self.resolving])


def plan(chooser: Chooser, candidates: int, extra: int) -> Plan:
    """Successive halving over ``candidates`` configurations: rungs of screen_replicas x 2^k
    replicas keeping half (rounded up) until at most ``finalists`` remain or the next rung
    would reach the paired replicas; then a paired stage of the finalists and ``extra``
    more configurations (the other answers and the leader's neighbours)."""
    rungs, n, r = [], candidates, chooser.screen_replicas
    while n > chooser.finalists and r < chooser.replicas:
        rungs.append((n, r))
        n, r = math.ceil(n / 2), 2 * r
    paired = (min(n, candidates) + extra, chooser.replicas)
    resolving, r = [], 2 * chooser.replicas
    while r <= chooser.resolve * chooser.replicas:
        resolving.append((paired[0], r))
        r *= 2
    return Plan(rungs, paired, resolving)


def _check_limits(what: str, chooser: Chooser, knobs: Sequence[Knob], candidates: list[dict],
                  p: Plan) -> None:
    """Refuse, before anything runs, a grid or a search above the resource limits
    (``verify.limits.require_runs``; ``what`` names the command): the number of
    configurations, the memory of the largest run and the work of every planned run, each
    counted at the costliest configuration of the grid."""
    options = " x ".join(k.option or k.name for k in knobs if not k.fixed) or "the knobs"
    limits.require_count(len(candidates), f"{what} over {options}: the grid", "runs")
    costliest = max(candidates, key=lambda s: _steps(chooser, s, 1))
    stages = [*p.rungs, p.paired, *p.resolving]
    prints = [chooser.footprint(costliest, r) for _, r in stages]
    if any(fp is None for fp in prints):
        return
    runs = " + ".join(f"{n} x {r} replicas" for n, r in stages)
    total = limits.Footprint.of(
        {f"the costliest configuration ({settings_text(costliest)}) at {stages[-1][1]} replicas: "
         f"{prints[-1].what}": max(fp.bytes for fp in prints)},
        {f"the search over {options} ({len(candidates)} configurations; runs of {runs}), each "
         f"counted as {settings_text(costliest)}":
         sum(n * fp.steps for (n, _), fp in zip(stages, prints, strict=True))})
    at = " ".join(f"{k.option or k.name} {costliest[k.name]:g}" if not k.integer
                  else f"{k.option or k.name} {costliest[k.name]}" for k in knobs)
    limits.require_runs(what, {f"the search over {options}, the costliest at {at}": total})


def _steps(chooser: Chooser, settings: dict, replicas: int) -> float:
    fp = chooser.footprint(settings, replicas)
    return 0.0 if fp is None else fp.steps


def _key(settings: dict[str, Any]) -> tuple:
    return tuple(sorted((k, float(v)) for k, v in settings.items()))


def _unresolved(evaluations: list[Evaluation], maximise: bool) -> bool:
    """Whether a configuration that cannot be told from the best at 95% is more than
    TOLERANCE behind it (its paired regret)."""
    best = _ranked(evaluations, maximise)[0]
    for e in evaluations:
        if e is not best:
            regret, hw, _ = paired_regret(e.values, best.values, maximise=maximise)
            if math.isfinite(regret) and regret > TOLERANCE and regret - hw <= 0:
                return True
    return False


def _ranked(evaluations: list[Evaluation], maximise: bool) -> list[Evaluation]:
    """Best first (by the mean; a configuration with an inf replica last)."""
    sign = -1.0 if maximise else 1.0
    return sorted(evaluations, key=lambda e: (not math.isfinite(e.value), sign * e.value
                                              if math.isfinite(e.value) else 0.0))


class _Progress:
    """Advances a tqdm-like ``bar`` (``update``, ``set_description``) by replica runs."""

    def __init__(self, bar, total: int):
        self.bar = bar
        if bar is not None:
            bar.total = total
            bar.refresh()

    def __call__(self, what: str, runs: int = 0) -> None:
        if self.bar is not None:
            self.bar.set_description(what)
            self.bar.update(runs)


def choose(chooser: Chooser, *, variants=None, method: str = "both",
           progress=None) -> ChoiceReport:
    """The three answers of the module docstring. ``variants``: the certified answers to
    give (default :meth:`Chooser.variants`); ``method``: one of :data:`METHODS`;
    ``progress``: a tqdm-like bar advanced by replica runs (None: none)."""
    from fedbound.sim.problems import one_thread

    from .boundary import checked_chooser

    with one_thread():
        return _choose(checked_chooser(chooser), variants, method, progress)


def _choose(chooser: Chooser, variants, method: str, progress) -> ChoiceReport:
    if method not in METHODS:
        raise ValueError(f"method={method!r} must be one of {METHODS}")
    names = chooser.variants() if variants is None else list(variants)
    for v in names:
        bounds.get(chooser.key, v)  # unknown variant: ValueError naming it
    knobs = chooser.knobs()
    candidates = grid(knobs)
    free = sum(not k.fixed for k in knobs)
    p = plan(chooser, len(candidates), len(names) + 1 + 2 * free)
    what = f"choose {command_of(type(chooser))}"
    if method != "simulate":
        limits.require_runs(what, chooser.bound_footprints())
    if method != "bound":
        _check_limits(what, chooser, knobs, candidates, p)
    step = _Progress(progress, 0 if method == "bound" else p.runs())
    seconds: dict[str, float] = {}

    t0 = time.perf_counter()
    certified = []
    if method != "simulate":
        for v in names:
            step(f"certified: {v}")
            try:
                prop = chooser.certified(v)
            except NoCertificate as e:
                certified.append(Answer("certified", None, None, v, note=str(e)))
                continue
            certified.append(Answer("certified", dict(prop.settings), prop.predicted, v,
                                    note=prop.note, curve=prop.curve))
    seconds["certified"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    step("calibrated")
    prop = chooser.calibrated()
    calibrated = None if method == "simulate" else Answer(
        "calibrated", dict(prop.settings), prop.predicted, note=prop.note, curve=prop.curve)
    seconds["calibrated"] = time.perf_counter() - t0
    if method == "bound":
        return ChoiceReport(chooser.name, [k.name for k in knobs], chooser.metric, chooser.maximise,
                            chooser.inputs(), certified, calibrated, None, chooser.calibration,
                            {}, seconds, _message(chooser, certified, calibrated, None))

    t0 = time.perf_counter()
    start = dict(prop.settings)
    pool = _unique([start, *around(knobs, start), *candidates])
    rungs = []
    for k, (_, r) in enumerate(p.rungs):
        if len(pool) <= chooser.finalists:
            break
        step(f"search: rung {k + 1}, {len(pool)} configurations x {r} replicas")
        ranked = _ranked(chooser.simulate(pool, r, paired=False), chooser.maximise)
        step("search", len(pool) * r)
        rungs.append({"configurations": len(pool), "replicas": r})
        pool = [e.settings for e in ranked[:math.ceil(len(pool) / 2)]]
    finalists = pool[:chooser.finalists]
    others = [a.settings for a in certified if a.settings is not None] + (
        [calibrated.settings] if calibrated else [])
    stage = _unique([*finalists, *around(knobs, finalists[0]), *others])
    step(f"search: paired, {len(stage)} configurations x {chooser.replicas} replicas")
    evaluated = chooser.simulate(stage, chooser.replicas, paired=True)
    step("search", len(stage) * chooser.replicas)
    replicas = chooser.replicas
    for _, r in p.resolving:
        if not _unresolved(evaluated, chooser.maximise):
            break
        step(f"search: paired, {len(stage)} configurations x {r} replicas (a close one unresolved)")
        evaluated, replicas = chooser.simulate(stage, r, paired=True), r
        step("search", len(stage) * r)
    best = _ranked(evaluated, chooser.maximise)[0]
    seconds["simulated"] = time.perf_counter() - t0
    by_key = {_key(e.settings): e for e in evaluated}
    simulated = Answer("simulated", dict(best.settings), best.value,
                       curve=[{**e.settings, "value": e.value, "ci": e.ci} for e in evaluated])
    for a in [*certified, *([calibrated] if calibrated else []), simulated]:
        if a.settings is None:
            continue
        e = by_key[_key(a.settings)]
        a.value, a.ci = e.value, e.ci
        a.regret, a.regret_ci, _ = paired_regret(e.values, best.values, maximise=chooser.maximise)
        a.passes = passes(a.regret, a.regret_ci)
    search = {"grid": len(candidates), "rungs": rungs, "paired": len(stage),
              "replicas": replicas, "start": start}
    return ChoiceReport(chooser.name, [k.name for k in knobs], chooser.metric, chooser.maximise,
                        chooser.inputs(), certified, calibrated, simulated, chooser.calibration,
                        search, seconds, _message(chooser, certified, calibrated, simulated))


def _unique(settings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    seen, out = set(), []
    for s in settings:
        if _key(s) not in seen:
            seen.add(_key(s))
            out.append(dict(s))
    return out


def settings_text(settings: dict[str, Any]) -> str:
    """Knob settings as text: "Q = 5, eta = 0.1"."""
    return ", ".join(f"{k} = {v:.4g}" if isinstance(v, float) else f"{k} = {v}"
                     for k, v in settings.items())


def _message(chooser: Chooser, certified, calibrated, simulated) -> str:
    if simulated is None:
        parts = [f"{a.variant} chooses {settings_text(a.settings)}" if a.settings is not None
                 else f"{a.variant}: no certificate" for a in certified]
        if calibrated is not None:
            parts.append(f"calibrated (not a certificate) chooses {settings_text(calibrated.settings)}")
        return "Predictions only: " + "; ".join(parts) + "."
    if not math.isfinite(simulated.value):
        return (f"No simulated configuration reached a finite {chooser.metric}; the closest is "
                f"{settings_text(simulated.settings)}.")
    ok = [a.variant for a in certified if a.passes]
    cal = "" if calibrated is None else (
        f"; calibrated {settings_text(calibrated.settings)} "
        + ("passes" if calibrated.passes else "misses") + f" (regret {calibrated.regret:.1%})")
    return (f"Best simulated: {settings_text(simulated.settings)} ({chooser.metric} "
            f"{simulated.value:.4g}){cal}; certified answers that pass (regret <= "
            f"{TOLERANCE:.0%} or indistinguishable at 95%): {', '.join(ok) if ok else 'none'}.")
