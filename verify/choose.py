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
  twice the replicas (for a chooser that simulates on common random numbers,
  :attr:`Chooser.common_numbers`, less those the rung shows more than 10% behind its
  leader, as a racing algorithm would: Maron & Moore 1997), then a paired comparison of
  the finalists, the other answers and the neighbours of the leader with common random
  numbers, run again on twice the replicas (up to :attr:`Chooser.resolve` times) while a
  configuration that cannot be told from the best is more than 10% behind it: the
  configurations still in contention (those not shown more than 10% behind the leader),
  the other answers and the leader's neighbours, each with the same numbers on its
  replicas as in a run of every configuration.

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
registered under NAME with the options, and the scenario-file fields, that its declared inputs
generate (``verify.declare``; :meth:`Chooser.from_inputs`).
"""

from __future__ import annotations

import itertools
import math
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from fedbound import bounds

from . import limits
from .declare import Group, Input, Written, assemble, checked_declaration, inputs_of
from .plugins import ensure_loaded, note
from .scenario import FieldError, _short, jsonable
from .text import settings_text
from .verdict import t_multiplier

#: what ``choose`` runs: every answer with its simulation ("both"), the certified and
#: calibrated predictions only, nothing simulated ("bound"), or the simulated search only
METHODS = ("both", "bound", "simulate")
#: an answer passes when its regret is at most this, or it cannot be told from the best
TOLERANCE = 0.1
#: the statuses of a variant whose bound is valid (a certificate)
VALID = ("holds", "holds-with-erratum")
SCALES = ("linear", "log")
#: the options every chooser has (``fedbound choose NAME``), which no declared input may take
RESERVED = ("json", "curves", "variant", "method", "scenario", "max_memory", "max_steps",
            "max_scenarios", "max_input", "help")


# ---------------------------------------------------------------------- the knobs


@dataclass(frozen=True)
class Knob:
    """One knob and the values the search compares: ``values`` ascending (one value: the knob
    is fixed), on a ``"log"`` or ``"linear"`` ``scale`` (where the search refines between
    two values: the geometric or the arithmetic mean), ``integer`` when only integers are
    allowed; ``option`` names the command-line option that sets it (for messages).

    ``lower`` and ``upper``: the knob's own limits (S >= 0, tau >= 1): a pick there is at no
    edge of the search. ``extend``: whether the search may go beyond ``values`` when its pick
    sits at an edge of them (:meth:`beyond`: a factor of 2 on the log scale, one more spacing
    of the grid on the linear; False for a grid the user gave, whose edge is flagged
    instead)."""

    name: str
    values: tuple
    scale: str = "linear"
    integer: bool = False
    option: str = ""
    lower: float = -math.inf
    upper: float = math.inf
    extend: bool = False

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

    def beyond(self, value, up: bool):
        """The value one step beyond ``value`` outward (up or down; a factor of 2 on the log
        scale, the grid's spacing at that end on the linear), or None where the knob's
        limits or the integers leave none."""
        if self.scale == "log":
            out = value * 2.0 if up else value / 2.0
        else:
            ends = self.values[-2:] if up else self.values[:2]
            spacing = (ends[1] - ends[0]) if len(ends) == 2 else abs(value) or 1.0
            out = value + spacing if up else value - spacing
        if self.integer:
            out = int(math.ceil(out) if up else math.floor(out))
        if out == value or not self.lower <= out <= self.upper:
            return None
        return out if self.integer else float(out)

    def neighbours(self, value, among: Sequence | None = None) -> list:
        """The values halfway between ``value`` and its nearest values on either side among
        ``among`` (default: the grid; none for a fixed knob): where the search looks around
        a leader."""
        if self.fixed:
            return []
        values = self.values if among is None else among
        lower = [v for v in values if v < value]
        upper = [v for v in values if v > value]
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
    over the configurations it compared (``curve``) and a ``note``; ``edge``: where the pick
    sits at an edge of the range its prediction compared, unresolved, a line each."""

    settings: dict[str, Any]
    predicted: float
    curve: list[dict[str, Any]] = field(default_factory=list)
    note: str = ""
    edge: tuple[str, ...] = ()
    edge: tuple[str, ...] = ()


@dataclass
class Answer:
    """One answer of :func:`choose`: its ``kind`` ("certified", "calibrated" or
    "simulated"), the ``variant`` of a certified one, its ``settings``, the simulated
    ``value`` of the metric there (mean over the paired replicas) with the half-width ``ci``
    of its 95% interval, its ``regret`` against the best with the half-width ``regret_ci``
    (paired; the simulated answer's against the best of the other answers, ``against``
    naming it, never against itself), whether it ``passes`` (module docstring), what its
    method ``predicted`` there and a ``note``; ``edge``: the knobs at whose edge of the
    searched range it sits, unresolved (the search could not go beyond, or stopped short
    of divergence there). ``curve``: the prediction (or, for the simulated answer, every simulated
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
    against: str = ""
    edge: list[str] = field(default_factory=list)

    @property
    def who(self) -> str:
        """The answer's name in a table: "certified proof", "calibrated", "simulated"."""
        return f"certified {self.variant}" if self.kind == "certified" else self.kind

    def as_dict(self, curves: bool = False) -> dict[str, Any]:
        out = {"settings": self.settings, "value": self.value, "ci": self.ci,
               "regret": self.regret, "regret_ci": self.regret_ci, "passes": self.passes}
        if self.against:
            out["regret_against"] = self.against
        if self.edge:
            out["edge"] = self.edge
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
    search went (``search``: its rungs, the paired replicas, the configurations run, the
    range searched per knob), the seconds each part took, a one-line ``message``, the
    ``recommended`` settings (which answer they come from, and why: :func:`recommendation`),
    what a certified bound bounds (``bounded``) and ``same``: the answers whose settings
    run the same configuration (one row per distinct run), each with the reason."""

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
    recommended: dict[str, Any] | None = None
    bounded: str = ""
    same: list[dict[str, Any]] = field(default_factory=list)

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
            "message": self.message, "recommended": self.recommended, "bounded": self.bounded,
            "same": self.same})


# ---------------------------------------------------------------------- the chooser


class Chooser(ABC):
    """A choice of configuration (module docstring).

    ``name`` names the chooser in its report; ``key`` is the result whose bound gives the
    certified answers; ``metric`` says what the simulation measures (``maximise``: True for
    an accuracy); ``calibration`` what the calibrated prediction is. ``command`` the name
    of ``fedbound choose COMMAND`` (default: the key's prefix, the paper), ``aliases`` other
    command names that run it, ``summary`` and ``example`` its help.

    Its inputs are declared once, in ``declared`` (``verify.declare``: :class:`Input` and
    :class:`Group`, name, type, range, unit, help and default): ``fedbound choose COMMAND``
    generates its options and the fields a ``--scenario`` file may give from it, checks
    every value by it and builds the chooser with :meth:`from_inputs`; its constructor takes
    the inputs as keywords (and ``scenario``, the paper's scenario of a file) and checks
    each with :meth:`value`, naming it as the user wrote it (:meth:`named`). No chooser
    parses arguments.

    The search: ``screen_replicas`` replicas per configuration in its first rung (doubled
    at every rung, half the configurations kept), ``replicas`` in the paired stage,
    ``finalists`` configurations carried into it; ``resolve``: the paired stage is run again
    on twice the replicas, up to ``resolve`` times ``replicas``, while a configuration that
    cannot be told from its best at 95% is more than TOLERANCE behind it (1: never).
    ``common_numbers``: :meth:`simulate` runs every configuration of a call on the same
    seeds, ``paired`` or not (the same draws for replica r of each: the built-in choosers);
    each rung of the screen then also drops the survivors it shows more than TOLERANCE
    behind its leader (the lower end of the paired regret's 95% interval above TOLERANCE),
    which the paired stage would leave out of a close race too (:func:`_contenders`).
    ``replica_blocks``: ``simulate(settings, replicas, paired=True, block=b)`` runs block b
    of replicas, b = 0 those of a call without it and every other block on seeds of its own
    (independent of the other blocks', the same for every configuration); a close race then
    adds a block of new replicas to those it has instead of running them all again
    (:func:`_on_blocks`).
    ``bounded``: what the certified bound bounds (the theorem's left-hand side, which may not
    be the simulated metric), for the report."""

    name: str
    key: str
    metric: str
    maximise: bool = False
    calibration: str = ""
    command: ClassVar[str] = ""
    aliases: ClassVar[tuple[str, ...]] = ()
    summary: ClassVar[str] = ""
    example: ClassVar[str] = ""
    declared: ClassVar[tuple[Input | Group, ...]] = ()
    written: Mapping[str, str] = {}
    bounded: ClassVar[str] = ""
    replicas: int = 32
    screen_replicas: int = 4
    finalists: int = 2
    resolve: int = 1
    common_numbers: ClassVar[bool] = False
    replica_blocks: ClassVar[bool] = False

    @classmethod
    def from_inputs(cls, values: Mapping[str, Any], *, scenario=None,
                    written: Written | None = None) -> Chooser:
        """The chooser of the declared inputs ``values`` (by name; a :class:`~verify.declare.Group`'s
        gathered into its keyword), with the paper's ``scenario`` (a file's; None: the
        chooser's default), each input named in messages as ``written`` (its option, or the
        scenario file's field it came from; default its keyword): what ``fedbound choose
        NAME`` builds from the options and the ``--scenario`` file."""
        obj = cls.__new__(cls)
        obj.written = dict(written or {})
        kwargs = assemble(cls.declared, values, obj.written)
        if scenario is not None:
            kwargs["scenario"] = scenario
        obj.__init__(**kwargs)
        return obj

    def named(self, name: str) -> str:
        """How messages name the input ``name`` (``alpha``, or an entry ``p[3]``): as the user
        wrote it (``--alpha``, ``--scenario s.json: p[3]``; :meth:`from_inputs`), else the
        keyword itself."""
        head, bracket, rest = name.partition("[")
        return self.written.get(head, head) + bracket + rest

    def value(self, name: str, given):
        """The declared input ``name`` given as ``given`` (None: its declared default),
        checked by its declaration (``verify.declare.Input.check``), a bad value refused
        naming it as the user wrote it (:meth:`named`)."""
        for inp in inputs_of(self.declared):
            if inp.name == name:
                return inp.check(given, self.named(name))
        raise KeyError(f"chooser {type(self).__name__} declares no input {name!r}")

    def device_of(self, given):
        """The ``torch.device`` of the declared input ``device`` (:meth:`value`), or a
        FieldError naming it as the user wrote it (a name torch does not know, or CUDA on a
        machine without it)."""
        from fedbound.sim.problems import checked_device

        try:
            return checked_device(self.value("device", given))
        except ValueError as e:
            raise self.renamed("device", e) from None

    def renamed(self, name: str, error: ValueError) -> FieldError:
        """``error``, raised about the input ``name`` by code that calls it by its keyword (a
        message that starts "delays[0..3] ..."), as a FieldError naming it as the user wrote
        it ("--delays[0..3] ..."); a message that starts otherwise is prefixed with the name."""
        text = str(error)
        if isinstance(error, FieldError):
            return error
        if text.startswith(name) and text[len(name):len(name) + 1] in ("", "=", "[", " ", ":"):
            return FieldError(self.named(name) + text[len(name):])
        return FieldError(f"{self.named(name)}: {text}")

    def replaced(self, scenario, changes: Mapping[str, Any]):
        """``scenario.replace(**changes)`` for the inputs given (None: not given) that set a
        field of the paper's scenario; the scenario's own refusal of the combination is
        prefixed with the inputs as the user wrote them (``--p=[0.3, 1]: p has 2 entries
        ...``)."""
        given = {k: v for k, v in changes.items() if v is not None}
        if not given:
            return scenario
        try:
            return scenario.replace(**given)
        except FieldError:
            raise
        except ValueError as e:
            said = ", ".join(f"{self.named(k)}={_short(v)}" for k, v in given.items())
            raise FieldError(f"{said}: {e}") from None

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

    def admits(self, settings: dict[str, Any]) -> bool:
        """Whether ``settings`` can run at all (a period that divides the iterations, say):
        the search extends a knob beyond its grid only to settings it admits. Every
        setting by default."""
        return True

    def canonical(self, settings: dict[str, Any]) -> tuple[dict[str, Any], str]:
        """The settings that run exactly the same configuration as ``settings`` (the same
        schedule, the same draws), with the reason; ``settings`` itself and "" by default.
        The search runs one of each, and the report shows one row per distinct run."""
        return settings, ""

    def monotone_reason(self, variant: str, knob: str) -> str:
        """Why ``variant`` of the bound is monotone in ``knob`` (one line, cited), where it
        is; "" when the chooser has no reason to give (the report still says that it is)."""
        return ""

    def variants(self) -> list[str]:
        """The variants of :attr:`key` whose bound is valid (status holds or
        holds-with-erratum): one certified answer each."""
        return [v for v in bounds.variants(self.key) if bounds.get(self.key, v).status in VALID]

    def result(self, variant: str):
        """The registered result whose bound gives ``variant``'s certified answer: ``key`` in
        that variant by default (ValueError naming an unknown one); a chooser whose certified
        answers come from more than one result (a deadline bound beside the paper's theorem)
        says which."""
        return bounds.get(self.key, variant)


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
    try:
        checked_declaration(cls.declared, RESERVED)
    except ValueError as e:
        raise ValueError(f"chooser {cls.__name__}: {e}") from None
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
    """The settings as a key: values equal to 12 significant digits are one configuration (a
    grid's 2 x 2^-3 and a prediction's 2^(-8/4) differ in the last bit)."""
    return tuple(sorted((k, _value(v)) for k, v in settings.items()))


def _value(v) -> float:
    return float(f"{float(v):.12g}")


def _unresolved(evaluations: list[Evaluation], maximise: bool, answers: set | None = None) -> bool:
    """Whether a race is still open, on the paired regrets against the leader: a runner-up's
    interval reaches more than TOLERANCE below the leader's (the leader could be more than
    TOLERANCE behind it: the recommendation is at stake), or an answer's (its settings' key
    in ``answers``; every configuration when None) reaches within TOLERANCE while its
    estimate, or its interval's upper end, lies beyond (its verdict is at stake)."""
    best = _ranked(evaluations, maximise)[0]
    for e in evaluations:
        if e is not best:
            regret, hw, _ = paired_regret(e.values, best.values, maximise=maximise)
            if not math.isfinite(regret) or not math.isfinite(hw):
                continue
            low, high = regret - hw, regret + hw
            if low < -TOLERANCE:
                return True
            if (answers is None or _key(e.settings) in answers) and low <= TOLERANCE < high:
                return True
    return False


def _contenders(knobs: Sequence[Knob], evaluations: list[Evaluation], maximise: bool,
                answers: set) -> list[dict[str, Any]]:
    """The settings a close race is run again on, in their order: the leader, every
    configuration not shown more than TOLERANCE behind it (the lower end of its paired
    regret's interval at most TOLERANCE), the answers (their settings' keys in ``answers``:
    their regrets are reported) and the leader's nearest neighbours along each knob (its
    edges, :func:`_edges`). The others are left out: on common random numbers a
    configuration's values do not depend on which others run with it."""
    best = _ranked(evaluations, maximise)[0]
    kept = {_key(best.settings)} | set(answers)
    for k in knobs:
        for up in (True, False):
            near = None if k.fixed else _beyond_simulated(k, evaluations, best, up)
            if near is not None:
                kept.add(_key(near.settings))
    for e in evaluations:
        if not _shown_behind(e, best, maximise):
            kept.add(_key(e.settings))
    return [e.settings for e in evaluations if _key(e.settings) in kept]


def _shown_behind(e: Evaluation, best: Evaluation, maximise: bool) -> bool:
    """Whether ``e`` is shown more than TOLERANCE behind ``best`` on the same replicas: the
    lower end of its paired regret's 95% interval above TOLERANCE, or worse without limit
    (a replica inf where the best's is finite). An unknown width shows nothing."""
    if e is best:
        return False
    regret, hw, _ = paired_regret(e.values, best.values, maximise=maximise)
    return regret == math.inf or regret - hw > TOLERANCE


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


#: how many times the search steps a knob beyond its grid while its pick sits at an edge
EXTENSIONS = 6


def choose(chooser: Chooser, *, variants=None, method: str = "both",
           progress=None) -> ChoiceReport:
    """The three answers of the module docstring and the one to train with
    (:func:`recommendation`). ``variants``: the certified answers to give (default
    :meth:`Chooser.variants`); ``method``: one of :data:`METHODS`; ``progress``: a tqdm-like
    bar advanced by replica runs (None: none)."""
    from fedbound.sim.problems import one_thread

    from .boundary import checked_chooser

    with one_thread(), _one_blas_thread():
        return _choose(checked_chooser(chooser), variants, method, progress)


def _one_blas_thread():
    """numpy's BLAS on one thread inside (``threadpoolctl``, which scikit-learn, the data
    sets' extra, brings; without it, as it is): the predictions' many small products only
    slow down with threads, by a factor 3 or more on a busy machine."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        from contextlib import nullcontext

        return nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


def _choose(chooser: Chooser, variants, method: str, progress) -> ChoiceReport:
    if method not in METHODS:
        raise ValueError(f"method={method!r} must be one of {METHODS}")
    names = chooser.variants() if variants is None else list(variants)
    for v in names:
        chooser.result(v)  # unknown variant: ValueError naming it
    knobs = chooser.knobs()
    candidates = _distinct(chooser, grid(knobs))
    free = [k for k in knobs if not k.fixed]
    extended = EXTENSIONS * 2 * len(free)
    p = plan(chooser, len(candidates), len(names) + 1 + 2 * len(free) + extended)
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
            note = "; ".join(x for x in (prop.note, _monotone(chooser, v, knobs, prop)) if x)
            certified.append(Answer("certified", dict(prop.settings), prop.predicted, v,
                                    note=note, curve=prop.curve))
    seconds["certified"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    step("calibrated")
    prop = chooser.calibrated()
    calibrated = None if method == "simulate" else Answer(
        "calibrated", dict(prop.settings), prop.predicted, note=prop.note, curve=prop.curve,
        edge=list(prop.edge))
    seconds["calibrated"] = time.perf_counter() - t0
    report = ChoiceReport(chooser.name, [k.name for k in knobs], chooser.metric, chooser.maximise,
                          chooser.inputs(), certified, calibrated, None, chooser.calibration,
                          {}, seconds, "", bounded=chooser.bounded)
    if method == "bound":
        return _finished(chooser, report)

    t0 = time.perf_counter()
    start = _canonical(chooser, prop.settings)
    pool = _distinct(chooser, [start, *_admitted(chooser, around(knobs, start)), *candidates])
    rungs = []
    for k, (_, r) in enumerate(p.rungs):
        if len(pool) <= chooser.finalists:
            break
        step(f"search: rung {k + 1}, {len(pool)} configurations x {r} replicas")
        ranked = _ranked(chooser.simulate(pool, r, paired=False), chooser.maximise)
        step("search", len(pool) * r)
        kept = ranked[:math.ceil(len(pool) / 2)]
        if chooser.common_numbers:
            kept = [e for e in kept if not _shown_behind(e, ranked[0], chooser.maximise)]
        rungs.append({"configurations": len(pool), "replicas": r,
                      "shown_behind": math.ceil(len(pool) / 2) - len(kept)})
        pool = [e.settings for e in kept]
    finalists = pool[:chooser.finalists]
    others = [a.settings for a in certified if a.settings is not None] + [prop.settings]
    stage = _distinct(chooser, [*finalists, *_admitted(chooser, around(knobs, finalists[0])), *others])
    replicas = chooser.replicas
    step(f"search: paired, {len(stage)} configurations x {replicas} replicas")
    blocks = [(0, replicas)]  # the paired stage's replicas: (block, replicas) of each
    evaluated = chooser.simulate(stage, replicas, paired=True)
    step("search", len(stage) * replicas)
    evaluated = _extended(chooser, knobs, evaluated, blocks, step)
    answers = {_key(_canonical(chooser, x)) for x in others}
    for _, r in p.resolving:
        if not _unresolved(evaluated, chooser.maximise, answers):
            break
        stage = _contenders(knobs, evaluated, chooser.maximise, answers)
        step(f"search: paired, {len(stage)} configurations x {r} replicas (a close race)")
        if chooser.replica_blocks:  # the replicas it has, and a block of new ones
            had = {_key(e.settings): e for e in evaluated}
            blocks.append((len(blocks), r - replicas))
            evaluated = [_joined([had[_key(s)], e]) for s, e in zip(
                stage, _on_blocks(chooser, stage, blocks[-1:]), strict=True)]
            step("search", len(stage) * (r - replicas))
        else:
            blocks = [(0, r)]
            evaluated = chooser.simulate(stage, r, paired=True)
            step("search", len(stage) * r)
        replicas = r
        evaluated = _extended(chooser, knobs, evaluated, blocks, step)
    best = _ranked(evaluated, chooser.maximise)[0]
    seconds["simulated"] = time.perf_counter() - t0
    simulated = Answer("simulated", dict(best.settings), best.value,
                       curve=[{**e.settings, "value": e.value, "ci": e.ci} for e in evaluated],
                       edge=_edges(chooser, knobs, evaluated, best))
    by_key = {_key(e.settings): e for e in evaluated}
    rival = _rival(chooser, report, best, by_key)
    for a in [*certified, *([calibrated] if calibrated else []), simulated]:
        if a.settings is not None:
            _judged(a, by_key[_key(_canonical(chooser, a.settings))], best, rival, chooser.maximise)
    report.simulated = simulated
    report.search = {"grid": len(candidates), "rungs": rungs, "paired": len(evaluated),
                     "replicas": replicas, "start": start,
                     "searched": {k.name: _span(k, evaluated) for k in free}}
    return _finished(chooser, report)


def _rival(chooser: Chooser, report: ChoiceReport, best: Evaluation,
           by_key: dict) -> tuple[str, Evaluation] | None:
    """What the best configuration's own answers are judged against: the best of the other
    answers that run another configuration, else the best other configuration simulated
    (the runner-up); None when nothing else ran."""
    own = _key(best.settings)
    rivals = {}
    for a in (*report.certified, report.calibrated):
        if a is not None and a.settings is not None:
            k = _key(_canonical(chooser, a.settings))
            if k != own:
                rivals.setdefault(k, a.who)
    pool = [by_key[k] for k in rivals] or [e for k, e in by_key.items() if k != own]
    if not pool:
        return None
    top = _ranked(pool, chooser.maximise)[0]
    who = rivals.get(_key(top.settings), f"the runner-up ({settings_text(top.settings)})")
    return who, top


def _judged(answer: Answer, e: Evaluation, best: Evaluation, rival, maximise: bool) -> None:
    """The answer's simulated value and its paired regret: against the best configuration,
    or, for an answer that is the best, against ``rival`` (:func:`_rival`; how far ahead
    it is, never 0 +- 0 against itself)."""
    answer.value, answer.ci = e.value, e.ci
    against = best
    if _key(e.settings) == _key(best.settings):
        if rival is None:
            return
        answer.against, against = rival
    answer.regret, answer.regret_ci, _ = paired_regret(e.values, against.values, maximise=maximise)
    answer.passes = passes(answer.regret, answer.regret_ci)


def _extended(chooser: Chooser, knobs: Sequence[Knob], evaluated: list[Evaluation],
              blocks: list[tuple[int, int]], step) -> list[Evaluation]:
    """The paired stage completed around its leader: while, along a free knob, nothing is
    simulated on one side of the leader (its other knobs equal), the next value that way is
    simulated on the same replicas, ``blocks`` (:func:`_on_blocks`), up to EXTENSIONS times
    (:func:`_next_values`: halfway to the next grid value, or one step beyond the grid where
    the knob may extend). A value beyond that diverges ends the search that way (the range
    is searched until divergence shows)."""
    for _ in range(EXTENSIONS):
        best = _ranked(evaluated, chooser.maximise)[0]
        seen = {_key(e.settings) for e in evaluated}
        new = []
        for k in knobs:
            for up in (True, False):
                if k.fixed or _beyond_simulated(k, evaluated, best, up) is not None:
                    continue
                for v in _next_values(k, best.settings[k.name], up):
                    s = _canonical(chooser, {**best.settings, k.name: v})
                    if chooser.admits(s):
                        if _key(s) not in seen:
                            new.append(s)
                            seen.add(_key(s))
                        break
        if not new:
            break
        replicas = sum(r for _, r in blocks)
        step(f"search: around the leader, {len(new)} configurations x {replicas} replicas")
        evaluated = [*evaluated, *_on_blocks(chooser, new, blocks)]
        step("search", len(new) * replicas)
    return evaluated


def _on_blocks(chooser: Chooser, settings: list[dict[str, Any]],
               blocks: list[tuple[int, int]]) -> list[Evaluation]:
    """``settings`` simulated paired on every block of replicas, ``blocks`` [(block,
    replicas)] (block 0 a plain call; :attr:`Chooser.replica_blocks`), each configuration's
    values joined in the blocks' order (:func:`_joined`)."""
    parts = [chooser.simulate(settings, r, paired=True, **({"block": b} if b else {}))
             for b, r in blocks]
    return [_joined(list(es)) for es in zip(*parts, strict=True)]


def block_seed(seed: int, block: int) -> int:
    """The seed of block ``block`` > 0 of a chooser's replicas (:attr:`Chooser.replica_blocks`)
    from its ``seed``: numpy's SeedSequence of the two (streams independent of each other's
    and of the seed's own)."""
    return int(np.random.SeedSequence([seed, block]).generate_state(1, np.uint64)[0])


def _joined(parts: list[Evaluation]) -> Evaluation:
    """One configuration's evaluations on several blocks of replicas as one: the values in
    the blocks' order; in ``extra`` a float the replicas' weighted mean over the blocks,
    anything else the first block's."""
    if len(parts) == 1:
        return parts[0]
    sizes = [len(e.values) for e in parts]
    extra = {k: (sum(n * e.extra[k] for n, e in zip(sizes, parts, strict=True)) / sum(sizes)
                 if isinstance(v, float) and all(isinstance(e.extra.get(k), float) for e in parts)
                 else v)
             for k, v in parts[0].extra.items()}
    return Evaluation(dict(parts[0].settings),
                      np.concatenate([np.asarray(e.values, dtype=float) for e in parts]), extra)


def _next_values(k: Knob, value, up: bool) -> list:
    """The values next to ``value`` that way along ``k``, the nearest first: halfway to the
    next grid value beyond it (:meth:`Knob.between`), then that grid value; past the grid,
    one step beyond (:meth:`Knob.beyond`) where the knob extends; none at its limit."""
    side = [v for v in k.values if (v > value if up else v < value)]
    if side:
        nxt = side[0] if up else side[-1]
        return [v for v in (k.between(value, nxt), nxt) if v is not None]
    out = k.beyond(value, up) if k.extend else None
    return [] if out is None else [out]


def _beyond_simulated(k: Knob, evaluated: list[Evaluation], best: Evaluation, up: bool):
    """The simulated configuration next beyond the leader along ``k`` (its other knobs
    equal), or None."""
    here = _value(best.settings[k.name])
    line = [e for e in evaluated if all(_value(e.settings[n]) == _value(best.settings[n])
                                        for n in best.settings if n != k.name)
            and (_value(e.settings[k.name]) > here if up else _value(e.settings[k.name]) < here)]
    if not line:
        return None
    return min(line, key=lambda e: abs(e.settings[k.name] - here))


def _edges(chooser: Chooser, knobs: Sequence[Knob], evaluated: list[Evaluation],
           best: Evaluation) -> list[str]:
    """The free knobs at whose edge the leader sits, unresolved: nothing simulated beyond it
    (with its other knobs), and the knob's own limit not reached there; each as a line."""
    out = []
    for k in knobs:
        if k.fixed:
            continue
        for up in (True, False):
            here = best.settings[k.name]
            if _beyond_simulated(k, evaluated, best, up) is not None:
                continue
            out_there = k.beyond(here, up)
            if out_there is None or not chooser.admits({**best.settings, k.name: out_there}):
                continue  # the knob's own limit: no edge of the search
            side = "largest" if up else "smallest"
            how = "extended as far as the search goes" if k.extend else "the grid given"
            out.append(f"{k.name} = {here:g} is the {side} {k.name} searched ({how}): the best "
                       f"may lie beyond it")
    return out


def predicted_over_steps(predict: Callable[[list[float]], Any], steps: Sequence[float], *,
                         extend: bool = True, per_octave: int = 1, limit: int = EXTENSIONS,
                         lower: float = 0.0, upper: float = math.inf, upper_note: str = "",
                         maximise: bool = False,
                         name: str = "step") -> tuple[list[float], np.ndarray, list[str]]:
    """A prediction over a grid of steps that reaches its optimum inside the grid:
    ``predict(steps)`` gives the predicted metric at each step, [..., len(steps)] (inf where
    the prediction diverges). While the optimum over every entry sits at the largest step
    (and is finite there), ``per_octave`` steps are added above it up to twice the largest;
    likewise below the smallest (not below ``lower``); up to ``limit`` octaves each way, with
    ``extend`` (False: a grid the user gave). A step above that diverges ends the search
    upward: the range is searched until divergence shows; a step above ``upper`` counts as
    diverging without being predicted (where the caller knows the run diverges there and
    the prediction cannot see it: gradient descent above 2 / the curvature at the start);
    ``upper_note``: where the prediction is only trusted up to ``upper`` (not a divergence),
    why, and a pick at ``upper`` is flagged with it. Returns the steps (ascending), the
    predictions [..., len(steps)] and, where the optimum still sits at an edge, a line
    naming it (``name``: the knob)."""
    order = sorted(float(x) for x in steps)

    lead: list[tuple] = []

    def predicted(xs: list[float]) -> np.ndarray:
        inside = np.asarray(xs) <= upper
        if not lead or inside.any():
            values = np.asarray(predict([x for x, ok in zip(xs, inside, strict=True) if ok]
                                        or xs[:1]), dtype=float)
            lead[:] = [values.shape[:-1]]
        out = np.full((*lead[0], len(xs)), np.inf)
        if inside.any():
            out[..., inside] = values
        return out

    values = predicted(order)
    sign = -1.0 if maximise else 1.0

    def best_index() -> int:
        v = np.where(np.isfinite(values), sign * values, np.inf).reshape(-1, len(order))
        return int(np.unravel_index(np.argmin(v), v.shape)[1])

    edges = []
    for up in (True, False):
        for _ in range(limit if extend else 0):
            if best_index() != (len(order) - 1 if up else 0):
                break
            end = order[-1] if up else order[0]
            new = [end * 2.0 ** ((i if up else -i) / per_octave) for i in range(1, per_octave + 1)]
            new = [x for x in new if x > lower]
            if not new:
                break
            more = predicted(new)
            every = order + new
            idx = np.argsort(every, kind="stable")
            order = [every[i] for i in idx]
            values = np.concatenate([values, more], axis=-1)[..., idx]
        j = best_index()
        if len(order) == 1 and not extend:
            break  # a fixed step: no range, no edge
        if up and upper_note and order[j] <= upper and all(x > upper for x in order[j + 1:]) \
                and j < len(order) - 1:
            edges.append(f"{name} = {order[j]:.4g} is the largest {name} predicted: {upper_note}")
        elif j == (len(order) - 1 if up else 0) and (order[j] * (2.0 if up else 0.5)) > lower:
            how = "extended as far as the prediction goes" if extend else "the grid given"
            edges.append(f"{name} = {order[j]:.4g} is the {'largest' if up else 'smallest'} {name} "
                         f"predicted ({how}): the best may lie beyond it")
    return order, values, edges


def _span(k: Knob, evaluated: list[Evaluation]) -> list[float]:
    """The smallest and largest values of ``k`` simulated in the paired stage."""
    values = [e.settings[k.name] for e in evaluated]
    return [min(values), max(values)]


def _monotone(chooser: Chooser, variant: str, knobs: Sequence[Knob], prop: Proposal) -> str:
    """Where the variant's bound over its curve is monotone in a free knob at every value of
    the others (and so picks an end of that knob's range), one line saying so and why
    (:meth:`Chooser.monotone_reason`)."""
    key = next((k for k in ("bound", "time") if prop.curve and k in prop.curve[0]), None)
    if key is None:
        return ""
    out = []
    for k in knobs:
        if k.fixed or k.name not in prop.curve[0] or not {row[k.name] for row in prop.curve} <= set(k.values):
            continue
        lines: dict[tuple, list] = {}
        for row in prop.curve:
            rest = tuple((x.name, row[x.name]) for x in knobs if x.name != k.name and x.name in row
                         and {r[x.name] for r in prop.curve} <= set(x.values))
            lines.setdefault(rest, []).append((row[k.name], row[key]))
        rising = falling = True
        for pts in lines.values():
            vals = [v for _, v in sorted(pts)]
            if len(vals) < 2 or not all(math.isfinite(v) for v in vals):
                rising = falling = False
                break
            rising &= all(b >= a for a, b in zip(vals, vals[1:], strict=False))
            falling &= all(b <= a for a, b in zip(vals, vals[1:], strict=False))
        if rising or falling:
            end = "smallest" if rising else "largest"
            why = chooser.monotone_reason(variant, k.name)
            out.append(f"its bound is non-{'de' if rising else 'in'}creasing in {k.name} over the "
                       f"values compared, so it picks the {end}" + (f": {why}" if why else ""))
    return "; ".join(out)


def _admitted(chooser: Chooser, settings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [s for s in settings if chooser.admits(s)]


def _canonical(chooser: Chooser, settings: dict[str, Any]) -> dict[str, Any]:
    return dict(chooser.canonical(dict(settings))[0])


def _distinct(chooser: Chooser, settings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``settings`` each as its canonical run (:meth:`Chooser.canonical`), once each, in order."""
    seen, out = set(), []
    for s in settings:
        c = _canonical(chooser, s)
        if _key(c) not in seen:
            seen.add(_key(c))
            out.append(c)
    return out


def _finished(chooser: Chooser, report: ChoiceReport) -> ChoiceReport:
    """The report with its rows that run the same configuration named (``same``), its
    recommendation and its message."""
    groups: dict[tuple, list[Answer]] = {}
    for a in report.answers:
        if a.settings is not None:
            groups.setdefault(_key(_canonical(chooser, a.settings)), []).append(a)
    for answers in groups.values():
        if len(answers) > 1:
            distinct = _distinct_settings([a.settings for a in answers])
            reasons = {chooser.canonical(dict(s))[1] for s in distinct} - {""}
            report.same.append({"answers": [a.who for a in answers], "settings": distinct,
                                "reason": "; ".join(sorted(reasons))})
    report.recommended = recommendation(report)
    report.message = _message(chooser, report)
    return report


def _distinct_settings(settings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    seen, out = set(), []
    for s in settings:
        if _key(s) not in seen:
            seen.add(_key(s))
            out.append(dict(s))
    return out


def recommendation(report: ChoiceReport) -> dict[str, Any] | None:
    """The settings to train with, the answer they come from and why: the simulated answer
    (the best configuration measured on the paired replicas) where there is one with a
    finite metric, saying how the calibrated answer compares and whether the pick sits at
    an unresolved edge of the search; without a simulation (``--method bound``), the
    calibrated answer (a prediction; the certified bounds' minimisers guarantee a bound on
    the theorem's left-hand side, not the best metric). None when no answer has settings."""
    sim, cal = report.simulated, report.calibrated
    if sim is not None and sim.value is not None and math.isfinite(sim.value):
        why = [f"the best of {report.search.get('paired', 0)} configurations simulated on "
               f"{report.search.get('replicas', 0)} paired replicas"]
        if sim.against and sim.regret is not None and math.isfinite(sim.regret):
            ahead = "ahead of" if sim.regret <= 0 else "behind"
            why.append(f"{_percent_text(sim.regret, sim.regret_ci)} {ahead} {sim.against}")
        if cal is not None and cal.regret is not None:
            agree = cal.settings == sim.settings or (math.isfinite(cal.regret)
                                                     and cal.regret - cal.regret_ci <= 0)
            why.append("the calibrated answer agrees within its interval" if agree else
                       f"the calibrated answer is {_percent_text(cal.regret, cal.regret_ci)} behind")
        if sim.edge:
            why.append("flagged: " + "; ".join(sim.edge))
        return {"settings": sim.settings, "answer": "simulated", "why": "; ".join(why)}
    if cal is not None and cal.settings is not None:
        why = ["the minimiser of the calibrated prediction (a prediction, not a certificate)"]
        why.append("not simulated: run with --method both to check it" if sim is None else
                   "no simulated configuration reached a finite metric")
        if cal.edge:
            why.append("flagged: " + "; ".join(cal.edge))
        return {"settings": cal.settings, "answer": "calibrated", "why": "; ".join(why)}
    if sim is not None and sim.settings is not None:
        return {"settings": sim.settings, "answer": "simulated",
                "why": "no simulated configuration reached a finite metric; the closest"}
    return None


def _percent_text(x: float, hw: float) -> str:
    return f"{abs(x):.1%} (+- {hw:.1%})" if math.isfinite(hw) else f"{abs(x):.1%}"


def _message(chooser: Chooser, report: ChoiceReport) -> str:
    certified, calibrated, simulated = report.certified, report.calibrated, report.simulated
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
    cal = "" if calibrated is None or calibrated.regret is None else (
        f"; calibrated {settings_text(calibrated.settings)} "
        + ("passes" if calibrated.passes else "misses") + f" (regret {calibrated.regret:.1%}"
        + (f" against {calibrated.against})" if calibrated.against else ")"))
    return (f"Best simulated: {settings_text(simulated.settings)} ({chooser.metric} "
            f"{simulated.value:.4g}){cal}; certified answers that pass (regret <= "
            f"{TOLERANCE:.0%} or indistinguishable at 95%): {', '.join(ok) if ok else 'none'}.")
