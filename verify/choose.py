"""Choosing a problem's knobs (a sync time, local steps, a step size) from a bound and by
simulation: the generic engine.

One interface for every chooser: a :class:`Chooser` knows its knobs, the choice each
variant of its bound makes (:meth:`Chooser.bound_choice`), the configurations worth
simulating (:meth:`Chooser.candidates`) and how to simulate them (:meth:`Chooser.simulate`,
which returns one :class:`Option` per configuration: the simulated loss with its 95%
interval). :func:`choose` puts the two side by side: every variant's choice is also
simulated, so the report says how far each bound's choice is from the best simulated
configuration.

Each paper's chooser lives with its paper and registers with :func:`register_chooser`
(through ``verify.api``, as a plugin's does); ``fedbound choose NAME`` runs the chooser
registered under NAME with the command-line options it declares.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

import numpy as np

from fedbound import bounds

from . import limits
from .plugins import ensure_loaded
from .scenario import jsonable
from .verdict import t_multiplier

METHODS = ("bound", "simulate", "both")


@dataclass
class Option:
    """One simulated configuration: ``settings`` (the knobs), ``loss`` (the simulated
    metric, mean over replicas; inf when it diverged or never reached the target) and the
    half-width ``ci`` of its 95% interval; ``extra``: what else the simulation measured."""

    settings: dict[str, Any]
    loss: float
    ci: float
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class BoundChoice:
    """The configuration a variant of the bound chooses, the bound's objective there, the
    objective over the candidates (``curve``), and the simulation at exactly that choice
    with its loss relative to the best simulated one."""

    variant: str
    settings: dict[str, Any]
    value: float
    curve: list[dict[str, Any]]
    simulated: Option | None = None
    relative: float | None = None


@dataclass
class ChoiceReport:
    """What :func:`choose` returns (see the module docstring); ``message`` is one line on
    how the choices compare, or why there is nothing to compare."""

    chooser: str
    knobs: list[str]
    metric: str
    inputs: dict[str, Any]
    bound: list[BoundChoice]
    simulation: list[Option] | None
    best: Option | None
    message: str

    def as_dict(self) -> dict[str, Any]:
        return jsonable(asdict(self))


class Chooser(ABC):
    """A choice of configuration, by the bound and by simulation (module docstring).

    ``name`` names the chooser in its report; ``key`` is the result whose bound it
    minimises; ``command`` the name of ``fedbound choose COMMAND`` (default: the key's
    prefix, the paper), ``aliases`` other command names that run it, ``summary`` and
    ``example`` its help. Its command-line options are its own: :meth:`add_arguments` adds
    them, :meth:`from_arguments` builds the chooser from them."""

    name: str
    knobs: tuple[str, ...]
    metric: str
    key: str
    command: ClassVar[str] = ""
    aliases: ClassVar[tuple[str, ...]] = ()
    summary: ClassVar[str] = ""
    example: ClassVar[str] = ""

    @classmethod
    def add_arguments(cls, parser) -> None:
        """Add the chooser's options to ``parser`` (an ``argparse.ArgumentParser``); none
        by default."""
        return None

    @classmethod
    def from_arguments(cls, args, read_scenario: Callable[[str, str], Any]) -> Chooser:
        """The chooser of the parsed options ``args``; ``read_scenario(key, path)`` reads a
        scenario file of a result (``-`` for standard input) the way ``fedbound check
        --scenario`` does."""
        raise NotImplementedError(f"chooser {cls.__name__} has no command-line options "
                                  "(Chooser.from_arguments)")

    @abstractmethod
    def inputs(self) -> dict[str, Any]:
        """The validated inputs, as JSON values."""

    @abstractmethod
    def bound_choice(self, variant: str) -> BoundChoice:
        """The configuration that ``variant`` of the bound prefers."""

    @abstractmethod
    def candidates(self) -> list[dict[str, Any]]:
        """The configurations the simulation compares."""

    @abstractmethod
    def simulate(self, settings: list[dict[str, Any]]) -> list[Option]:
        """One Option per configuration, in order."""

    def bound_footprints(self) -> dict[str, limits.Footprint | None]:
        """The estimated memory and work of what :meth:`bound_choice` computes (for every
        variant), by a label naming it in the chooser's options ("S = 0 with --T 600"), from
        the sizes alone (:class:`verify.limits.Footprint`); :func:`choose` refuses them above
        the limits before it computes anything. Default {}: no estimate."""
        return {}

    def footprints(self, settings: list[dict[str, Any]]) -> dict[str, limits.Footprint | None]:
        """The same for each run that :meth:`simulate` makes on ``settings`` ("--Q 20": one
        vectorised run per Q, say). Default {}: no estimate."""
        return {}

    def unreached(self, options: list[Option]) -> str:
        """One line when no simulated configuration reached a finite metric."""
        return f"No simulated configuration reached a finite {self.metric}."


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


def choose(chooser: Chooser, *, variants=None, method: str = "both") -> ChoiceReport:
    """Each variant's choice (``variants``: default every variant of the chooser's result)
    beside the simulation's, each bound choice simulated too (module docstring)."""
    from fedbound.sim.problems import one_thread

    with one_thread():
        return _choose(chooser, variants, method)


def _choose(chooser: Chooser, variants, method: str) -> ChoiceReport:
    if method not in METHODS:
        raise ValueError(f"method={method!r} must be one of {METHODS}")
    names = list(bounds.variants(chooser.key)) if variants is None else list(variants)
    for v in names:
        bounds.get(chooser.key, v)  # unknown variant: ValueError naming it
    what = f"choose {command_of(type(chooser))}"
    if method != "simulate":
        limits.require_runs(what, chooser.bound_footprints())
    if method != "bound":
        grid = chooser.candidates()
        limits.require_count(len(grid), f"{what}: the grid", "runs")  # before any estimate
        limits.require_runs(what, chooser.footprints(grid))
    choices = [chooser.bound_choice(v) for v in names] if method != "simulate" else []
    options, best = None, None
    if method != "bound":
        grid = chooser.candidates()
        grid += [c.settings for c in choices if c.settings not in grid]
        limits.require_runs(what, chooser.footprints(grid))
        options = chooser.simulate(grid)
        finite = [o for o in options if math.isfinite(o.loss)]
        best = min(finite, key=lambda o: o.loss) if finite else None
        for c in choices:
            c.simulated = options[grid.index(c.settings)]
            if best is not None and best.loss > 0:
                c.relative = c.simulated.loss / best.loss
        options = options[:len(chooser.candidates())]
    return ChoiceReport(chooser.name, list(chooser.knobs), chooser.metric, chooser.inputs(),
                        choices, options, best, _message(chooser, choices, options, best))


def settings_text(settings: dict[str, Any]) -> str:
    """Knob settings as text: "Q = 5, eta = 0.1"."""
    return ", ".join(f"{k} = {v:.4g}" if isinstance(v, float) else f"{k} = {v}"
                     for k, v in settings.items())


def _message(chooser: Chooser, choices, options, best) -> str:
    if options is None:
        return "Bound only: " + "; ".join(f"{c.variant} chooses {settings_text(c.settings)}"
                                          for c in choices)
    if best is None:
        return chooser.unreached(options)
    if not choices:
        return f"Simulation only: best {settings_text(best.settings)}."
    within = [c.variant for c in choices if c.relative is not None and c.relative <= 1.1]
    return (f"Best simulated: {settings_text(best.settings)} ({chooser.metric} {best.loss:.4g}); "
            f"within 10% of it: {', '.join(within) if within else 'no variant of the bound'}.")


def half_width(v: np.ndarray) -> float:
    """Half-width of the 95% Student-t interval of the mean of ``v``."""
    v = np.asarray(v, dtype=float)
    if not np.all(np.isfinite(v)):
        return math.inf
    return float(t_multiplier(v.size) * v.std(ddof=1) / math.sqrt(v.size))


