"""The catalogue of the papers' experimental claims and the experiments that decide them.

A paper's experiment section makes qualitative claims ("S = 5 beats the baseline S = 0 with
a notable gap", Ali & Arafa 2025, Fig. 7a). Each is one :class:`Claim`: its ``id``, its
citation by the paper's own numbering, the claim in words, its setting as the paper states
it (model, data split, clients and groups, delays, batch, step, horizon), the smallest
faithful analogue fedbound runs and what differs, and a ``decide`` function that turns what
an :class:`Experiment` measured (an :class:`Outcome`: per-seed curves of each
configuration) into the paired :class:`~verify.decide.Test` s that decide it. Several claims
share one experiment (the runs of a figure), so that each configuration runs once.

An experiment is a function of a :class:`Plan` (quick or full, the seed, the number of
seeds, the device, the reading of an ambiguous step of the algorithm, and overrides of the
batch size and the step within the paper's setting); where the paper is ambiguous about a
step (Ali & Arafa 2025, eq. (12)'s upload), the experiment declares each reading
(:class:`Reading`) and runs under each; a claim says which reading is the algorithm as
printed (``primary``), and its verdict is that reading's, beside every reading's.

Plugins register experiments and claims with :func:`register_experiment` and
:func:`register_claim` (through ``verify.api``); ``verify.reproduce`` runs them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from .limits import Footprint
from .plugins import ensure_loaded, note

#: the fields of a claim's setting, in the order they are shown (a setting may hold others)
SETTING_FIELDS = ("model", "data", "split", "clients", "delays", "batch", "step", "horizon",
                  "metric", "seeds")


@dataclass(frozen=True)
class Plan:
    """How an experiment runs: ``quick`` (the tests' and notebook's setting) or full, the
    first ``seed`` (the data split, the initial model and every seed's draws derive from
    it), the number of ``seeds`` (None: the experiment's own), the torch ``device``, the
    ``reading`` of an ambiguous step (None: the experiment has one), and ``batch`` and
    ``step`` overriding the experiment's own within the paper's setting (None: its own):
    what a test of a verdict's sensitivity moves."""

    quick: bool = False
    seed: int = 0
    seeds: int | None = None
    device: str | None = None
    reading: str | None = None
    batch: int | None = None
    step: float | None = None

    def count(self, experiment: Experiment) -> int:
        """The seeds this plan runs ``experiment`` with."""
        return self.seeds if self.seeds is not None else experiment.seeds[0 if self.quick else 1]


@dataclass(frozen=True)
class Curve:
    """One configuration's metric along the run: ``y`` [seeds, points] at ``x`` [points]
    (wall-clock time or rounds, increasing), the bound's prediction at each point
    (``bound`` [points], NaN where it is not evaluated or inadmissible) where one is made,
    and the label of ``x`` where it is not the outcome's."""

    label: str
    x: np.ndarray
    y: np.ndarray
    bound: np.ndarray | None = None
    xlabel: str = ""

    def __post_init__(self):
        x, y = np.asarray(self.x, dtype=float), np.asarray(self.y, dtype=float)
        if x.ndim != 1 or y.ndim != 2 or y.shape[1] != x.size or x.size == 0:
            raise ValueError(f"curve {self.label!r}: need x [points] and y [seeds, points], got "
                             f"{x.shape} and {y.shape}")
        if np.any(np.diff(x) < 0):
            raise ValueError(f"curve {self.label!r}: x must be non-decreasing")
        object.__setattr__(self, "x", x)
        object.__setattr__(self, "y", y)
        if self.bound is not None:
            object.__setattr__(self, "bound", np.asarray(self.bound, dtype=float).reshape(x.shape))

    @classmethod
    def sampled(cls, label: str, times, values, grid, **kw) -> Curve:
        """A curve on the common ``grid`` [points] from each seed's own times: ``times`` and
        ``values`` [seeds, records] (times non-decreasing per seed, every seed's first record
        at or before the grid's first point); each seed's value at a grid point is its last
        record at or before it (the model of the last round finished by then)."""
        times, values = np.asarray(times, dtype=float), np.asarray(values, dtype=float)
        grid = np.asarray(grid, dtype=float)
        if times.shape != values.shape or times.ndim != 2:
            raise ValueError(f"curve {label!r}: times and values must be [seeds, records], got "
                             f"{times.shape} and {values.shape}")
        index = np.stack([np.searchsorted(t, grid, side="right") - 1 for t in times])
        if (index < 0).any():
            raise ValueError(f"curve {label!r}: a seed has no record at or before {grid[0]:g}")
        return cls(label, grid, np.take_along_axis(values, index, axis=1), **kw)

    def at(self, when: float) -> np.ndarray:
        """The metric per seed [seeds] at the last point at or before ``when`` (the model of
        the last round finished by then); ValueError before the first point."""
        i = int(np.searchsorted(self.x, when, side="right")) - 1
        if i < 0:
            raise ValueError(f"curve {self.label!r} starts at {self.x[0]:g}, after {when:g}")
        return self.y[:, i]

    def bound_at(self, when: float) -> float | None:
        """The bound at the point of :meth:`at` (None where none is evaluated)."""
        i = int(np.searchsorted(self.x, when, side="right")) - 1
        if self.bound is None or i < 0:
            return None
        value = float(self.bound[i])
        return value if np.isfinite(value) else None


@dataclass(frozen=True)
class Outcome:
    """What one run of an experiment measured: its ``curves`` by configuration label, the
    axes' labels, per-seed ``scalars`` by name (rounds run, local iterations: [seeds] each),
    ``notes`` (the step chosen, what was estimated) and the bound's ``prediction`` in words
    (constants estimated on the same problem; "" where no bound is evaluated)."""

    curves: Mapping[str, Curve]
    xlabel: str
    ylabel: str
    scalars: Mapping[str, np.ndarray] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    prediction: str = ""

    def curve(self, label: str) -> Curve:
        if label not in self.curves:
            raise KeyError(f"no curve {label!r}; the outcome has {', '.join(self.curves)}")
        return self.curves[label]

    def at(self, label: str, when: float) -> np.ndarray:
        """Curve ``label``'s metric per seed at ``when`` (:meth:`Curve.at`)."""
        return self.curve(label).at(when)

    @property
    def seeds(self) -> int:
        return next(iter(self.curves.values())).y.shape[0]


@dataclass(frozen=True)
class Reading:
    """One reading of a step of the algorithm the paper is ambiguous about: its ``name``
    (the value of ``Plan.reading``) and what it does, with the equation it reads."""

    name: str
    description: str


@dataclass(frozen=True)
class Experiment:
    """The runs behind one or more claims (a figure's configurations): ``id`` ("hfl.fig7a":
    the paper's key prefix first), ``run(plan) -> Outcome``, the seeds of a quick and of a
    full run, ``footprint(plan) -> Footprint`` (its memory and work, checked against
    ``verify.limits`` before anything runs), the ``readings`` it runs under (none: one
    run) and ``setting``: what it runs, in words (the analogue of the paper's setting)."""

    id: str
    run: Callable[[Plan], Outcome]
    seeds: tuple[int, int]
    footprint: Callable[[Plan], Footprint]
    readings: tuple[Reading, ...] = ()
    setting: str = ""

    @property
    def paper(self) -> str:
        return self.id.split(".")[0]

    def plans(self, plan: Plan) -> list[Plan]:
        """``plan`` under each reading (itself when the experiment has none)."""
        return [replace(plan, reading=r.name) for r in self.readings] or [plan]


@dataclass(frozen=True)
class Claim:
    """One qualitative claim of a paper's experiments (module docstring).

    ``id`` ("hfl.fig7a.s5-beats-s0"), ``cite`` (the paper and its own numbering), ``claim``
    (in words), ``setting`` (as the paper states it: :data:`SETTING_FIELDS`), ``analogue``
    (what fedbound runs instead where the setting cannot be met here, and what differs),
    ``experiment`` (the id of the :class:`Experiment` that measures it), ``decide``
    (``decide(outcome) -> tests``, combined under ``rule``: "all" or "any"), ``metric`` (the
    unit of its effect: "training loss", "rounds"), ``curves`` (the labels its figure shows;
    empty: all), ``marks`` (where on the horizontal axis it is decided), ``tolerance`` (where
    a tolerance comes from: the paper's word, or fedbound's reading of it), ``sensitivity``
    (what moves its verdict within the paper's setting, and why; empty: nothing should),
    ``stated_model`` (why the model the paper states cannot produce it, with the
    arithmetic; empty when it can) and ``primary`` (for an experiment with readings: the one
    that is the algorithm as printed, whose verdict is the claim's)."""

    id: str
    cite: str
    claim: str
    setting: Mapping[str, str]
    analogue: str
    experiment: str
    decide: Callable[[Outcome], Sequence]
    rule: str = "all"
    metric: str = "training loss"
    curves: tuple[str, ...] = ()
    marks: tuple[float, ...] = ()
    tolerance: str = ""
    sensitivity: str = ""
    stated_model: str = ""
    primary: str | None = None

    @property
    def paper(self) -> str:
        return self.id.split(".")[0]


#: the registered experiments and claims, by id, in registration order
_EXPERIMENTS: dict[str, Experiment] = {}
_CLAIMS: dict[str, Claim] = {}


def register_experiment(experiment: Experiment) -> Experiment:
    """Register ``experiment`` (its id not yet taken); returns it."""
    if experiment.id in _EXPERIMENTS:
        raise ValueError(f"an experiment {experiment.id!r} is already registered")
    if "." not in experiment.id:
        raise ValueError(f"experiment id {experiment.id!r} must start with its paper's key "
                         "prefix and a dot, e.g. 'mypaper.fig2'")
    _EXPERIMENTS[experiment.id] = experiment
    note("experiments", experiment.id)
    return experiment


def register_claim(claim: Claim) -> Claim:
    """Register ``claim``, whose experiment is registered already; returns it."""
    if claim.id in _CLAIMS:
        raise ValueError(f"a claim {claim.id!r} is already registered")
    exp = _EXPERIMENTS.get(claim.experiment)
    if exp is None:
        raise ValueError(f"claim {claim.id!r}: no experiment {claim.experiment!r} is registered")
    if exp.paper != claim.paper:
        raise ValueError(f"claim {claim.id!r} belongs to paper {claim.paper!r}, its experiment "
                         f"to {exp.paper!r}")
    names = [r.name for r in exp.readings]
    if (claim.primary is None) != (not names) or (names and claim.primary not in names):
        raise ValueError(f"claim {claim.id!r}: primary={claim.primary!r} must name one of the "
                         f"experiment's readings ({', '.join(names) or 'none'})")
    if claim.rule not in ("all", "any"):
        raise ValueError(f"claim {claim.id!r}: rule={claim.rule!r} must be 'all' or 'any'")
    _CLAIMS[claim.id] = claim
    note("claims", claim.id)
    return claim


def unregister_paper(paper: str) -> None:
    """Remove every experiment and claim of ``paper`` (for tests)."""
    for table in (_CLAIMS, _EXPERIMENTS):
        for key in [k for k, v in table.items() if v.paper == paper]:
            del table[key]


def experiment(experiment_id: str) -> Experiment:
    ensure_loaded()
    return _EXPERIMENTS[experiment_id]


def experiment_ids() -> list[str]:
    """The ids of the registered experiments, in registration order (the plugins loaded)."""
    ensure_loaded()
    return list(_EXPERIMENTS)


def papers() -> list[str]:
    """The papers with registered claims, sorted (the plugins loaded)."""
    ensure_loaded()
    return sorted({c.paper for c in _CLAIMS.values()})


def claims(papers: Sequence[str] | None = None, ids: Sequence[str] | None = None) -> list[Claim]:
    """The registered claims of ``papers`` (None: every paper), in registration order; with
    ``ids``, only those (each a claim's full id, or its id without the paper's prefix when
    that names one claim of the papers given). ValueError names an unknown paper or id."""
    ensure_loaded()
    known = sorted({c.paper for c in _CLAIMS.values()})
    for p in papers or ():
        if p not in known:
            raise ValueError(f"paper={p!r}: claims are registered for {', '.join(known) or 'none'}")
    mine = [c for c in _CLAIMS.values() if papers is None or c.paper in papers]
    if ids is None:
        return mine
    out = []
    for wanted in ids:
        found = [c for c in mine if c.id == wanted or c.id.partition(".")[2] == wanted]
        if len(found) != 1:
            shown = ", ".join(c.id for c in mine[:6]) + (", ..." if len(mine) > 6 else "")
            why = "is ambiguous" if found else "is not a claim of the papers given"
            raise ValueError(f"--claim {wanted!r} {why} ({shown}; see fedbound reproduce "
                             f"{' '.join(papers or known)} --list)")
        out.append(found[0])
    return list({c.id: c for c in out}.values())
