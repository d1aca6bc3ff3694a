"""Each paper's headline experimental claims, reproduced at small scale beside its bound.

``reproduce(paper, quick=...)`` runs, for one paper, the small-scale analogue of the
experiments behind its claims (networks from ``sim.neural`` on the 8x8 digits of
``sim.data``), and returns one :class:`Finding` per claim: the claim with its place in the
paper, each configuration's measurement over seeds with a 95% Student-t interval
(``verify.verdict.LEVEL``), whether the measurement agrees with the claim, and what the
paper's bound, with constants estimated on the same problem (``sim.estimate``), predicts
for the same configurations: does it order them the way the measurement does?

Agreement is decided from the intervals, never from the means alone: a claim "A is lower
than B" agrees when A's interval lies below B's, disagrees when it lies above, and is
undecided (None) when they overlap (:func:`order`). The bound agrees when it orders every
pair that the measurement separates the same way (:func:`bound_order`).

Each paper registers its reproduction with :func:`register_reproduction` (through
``verify.api``, from its plugin): ``run(*, quick: bool, seed: int, device) ->
tuple[Finding, ...]``, which :func:`reproduce` runs with torch on one thread. ``quick`` is
the setting the tests and notebook 07 run (seconds); the default is the full run (more
seeds, longer runs). The same seed gives the same numbers, bit for bit.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from . import limits
from .plugins import ensure_loaded
from .verdict import t_multiplier

#: the registered reproductions: paper -> run(quick=, seed=, device=) -> findings
_RUNS: dict[str, Callable[..., Sequence]] = {}
#: their estimates: paper -> footprints(quick=) -> {run: Footprint} (``register_reproduction``)
_FOOTPRINTS: dict[str, Callable[..., Mapping[str, limits.Footprint | None]]] = {}


@dataclass(frozen=True)
class Row:
    """One configuration: ``measured`` (mean over seeds) with its 95% interval
    ``[low, high]``, and the bound with estimated constants at the same configuration
    (None where the bound is not evaluated, e.g. inadmissible there)."""

    config: str
    measured: float
    low: float
    high: float
    seeds: int
    bound: float | None = None


@dataclass(frozen=True)
class Finding:
    """One claim of a paper, measured and predicted.

    ``claim``: the paper's claim in words; ``source``: where the paper makes it (figure,
    table or section); ``metric``: what each row measures; ``rows``: the configurations;
    ``measured``: one sentence on what the measurement shows; ``agrees``: True/False, or
    None when the intervals cannot tell; ``prediction``: one sentence on what the bound
    says; ``bound_agrees``: does the bound order the configurations as the measurement
    does (None when it was not evaluated, or the measurement separates no pair)."""

    claim: str
    source: str
    metric: str
    rows: tuple[Row, ...]
    measured: str
    agrees: bool | None
    prediction: str
    bound_agrees: bool | None


@dataclass(frozen=True)
class Reproduction:
    """Every finding of one paper's reproduction."""

    paper: str
    quick: bool
    seed: int
    findings: tuple[Finding, ...]
    seconds: float

    def to_dict(self) -> dict:
        return asdict(self)

    def summary(self) -> list[dict]:
        """One row per claim: claim, measured, bound's prediction, agreement."""
        return [{"paper": self.paper, "claim": f.claim, "source": f.source,
                 "measured": f.measured, "agrees": word(f.agrees),
                 "bound's prediction": f.prediction, "bound agrees": word(f.bound_agrees)}
                for f in self.findings]

    def text(self) -> str:
        """The reproduction as plain text: per claim, its table and its verdicts."""
        from fedbound.bounds.references import PAPERS, cite

        title = cite(self.paper) if self.paper in PAPERS else self.paper  # a plugin's paper
        lines = [f"{title}: {len(self.findings)} claims "
                 f"({'quick' if self.quick else 'full'} run, seed {self.seed}, "
                 f"{self.seconds:.1f} s)"]
        for f in self.findings:
            lines += ["", f"claim: {f.claim} ({f.source})", f"  {f.metric}"]
            width = max(len(r.config) for r in f.rows)
            for r in f.rows:
                bound = "" if r.bound is None else f"   bound {r.bound:.4g}"
                lines.append(f"  {r.config:<{width}}  {r.measured:.4g} "
                             f"[{r.low:.4g}, {r.high:.4g}] over {r.seeds} seeds{bound}")
            lines += [f"  measured: {f.measured} -> {word(f.agrees)}",
                      f"  bound:    {f.prediction} -> {word(f.bound_agrees)}"]
        return "\n".join(lines)


def word(agrees: bool | None) -> str:
    return {True: "agrees", False: "disagrees", None: "undecided"}[agrees]


def row(config: str, values: Sequence[float], bound: float | None = None) -> Row:
    """A :class:`Row` from one value per seed: the mean and its Student-t interval."""
    v = np.asarray(values, dtype=float)
    if v.ndim != 1 or v.size < 2 or not np.isfinite(v).all():
        raise ValueError(f"{config}: need at least two finite values over seeds, got {values!r}")
    half = t_multiplier(v.size) * float(v.std(ddof=1)) / math.sqrt(v.size)
    mean = float(v.mean())
    return Row(config, mean, mean - half, mean + half, int(v.size),
               None if bound is None else float(bound))


def order(lower: Row, higher: Row) -> bool | None:
    """Does the measurement say ``lower`` < ``higher``? True when the intervals separate
    them that way, False when they separate them the other way, None when they overlap."""
    if lower.high < higher.low:
        return True
    if higher.high < lower.low:
        return False
    return None


def bound_order(rows: Sequence[Row]) -> bool | None:
    """Does the bound order the rows as the measurement does? Every pair that the
    measurement separates (disjoint intervals) must be in the same order by the bound
    (ties in the bound count as disagreement); None when no pair is separated or a row has
    no bound."""
    if any(r.bound is None for r in rows):
        return None
    separated = [(a, b) for i, a in enumerate(rows) for b in rows[i + 1:] if order(a, b) is not None]
    if not separated:
        return None
    return all((a.bound < b.bound) == order(a, b) and a.bound != b.bound for a, b in separated)


def increasing(rows: Sequence[Row]) -> bool | None:
    """Does the measurement say rows[0] < rows[1] < ...? True when every neighbouring pair
    is ordered so, False when one is ordered the other way, else None (:func:`order`)."""
    steps = [order(a, b) for a, b in zip(rows[:-1], rows[1:], strict=True)]
    if False in steps:
        return False
    return True if all(steps) else None


def digits_mlp(batch: int, device=None):
    """(problem, x_1): the mean cross-entropy of ``sim.neural.mlp`` on all the digits
    (``sim.data.load_digits``) with mini-batches of ``batch``, and its initial parameters
    (the module built after ``torch.manual_seed(0)``: the same start for every seed, the
    seed drives the runs). The problem of the papers' reproductions on real data."""
    import torch

    from fedbound.sim.data import load_digits
    from fedbound.sim.neural import NeuralProblem, mlp

    data = load_digits(device=device)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        module = mlp()
    pr = NeuralProblem(module, data.features, data.labels, batch=batch, device=device)
    return pr, pr.initial()


def mlp_parameters(widths: Sequence[int]) -> int:
    """The parameters of ``sim.neural.mlp`` of layer widths ``widths`` (weights and biases)."""
    return sum(a * b + b for a, b in zip(widths[:-1], widths[1:], strict=True))


def training_footprint(*, steps: float, models: float, parameters: float, batch: float,
                       samples: float = 1797, features: float = 64) -> limits.Footprint:
    """The estimated memory and work of ``steps`` vectorised training steps of ``models``
    copies of a network (workers x replicas, one stacked tensor) of ``parameters``
    parameters on mini-batches of ``batch`` of a data set of ``samples`` x ``features``
    (the digits by default): memory, 8 buffers of the models' size (the models, their
    gradients, averages, the sampler's state) and the batch's activations; work, a forward
    and a backward pass (6 operations per parameter and sample) per step and the loop's
    overhead (``limits.LOOP_OVERHEAD``). The estimate of a reproduction's runs
    (:func:`register_reproduction`)."""
    shape = f"models={limits.count_text(models)} x parameters={limits.count_text(parameters)}"
    return limits.Footprint.of(
        {f"{shape} x 8 buffers of 8 B": 64 * models * parameters,
         f"models={limits.count_text(models)} x batch={limits.count_text(batch)} x "
         f"features={limits.count_text(features)} x 4 of 8 B": 32 * models * batch * features,
         f"the data, samples={limits.count_text(samples)} x features={limits.count_text(features)}"
         " x 3 of 8 B": 24 * samples * features},
        {f"steps={limits.count_text(steps)} x {shape} x batch={limits.count_text(batch)} x 6":
         steps * (6 * models * parameters * batch + limits.LOOP_OVERHEAD)})


def estimation_settings(quick: bool):
    """How a reproduction estimates its bound's constants (``verify.estimated``): fewer
    points and samples in a quick run."""
    from .estimated import EstimationSettings

    return (EstimationSettings(points=2, steps=20, power_steps=15, starts=2, samples=50)
            if quick else EstimationSettings())


def register_reproduction(paper: str, run: Callable[..., Sequence],
                          footprints: Callable[..., Mapping[str, limits.Footprint | None]]
                          | None = None) -> None:
    """Register the reproduction of ``paper`` (the key prefix of its results, e.g. "hfl"):
    ``run(*, quick, seed, device)`` returns its :class:`Finding` s (module docstring).
    ``footprints(*, quick)``: the estimated memory and work of each of its runs, by a label
    naming it ({"q = 8, tau = 4": Footprint, ...}, :func:`training_footprint`), which
    :func:`reproduce` holds to the resource limits (``verify.limits.require_runs``) before
    anything runs; without it no limit applies. Registering a paper twice is an error."""
    if paper in _RUNS:
        raise ValueError(f"a reproduction of {paper!r} is already registered")
    _RUNS[paper] = run
    if footprints is not None:
        _FOOTPRINTS[paper] = footprints


def unregister_reproduction(paper: str) -> None:
    """Remove the reproduction of ``paper`` (for tests)."""
    _RUNS.pop(paper, None)
    _FOOTPRINTS.pop(paper, None)


def reproductions() -> list[str]:
    """The papers with a registered reproduction, sorted (the plugins loaded)."""
    ensure_loaded()
    return sorted(_RUNS)


def reproduce(paper: str, *, quick: bool = False, seed: int = 0, device=None) -> Reproduction:
    """Run ``paper``'s reproduction (one of :func:`reproductions`; see the module docstring),
    with torch on one thread (``sim.problems.one_thread``: the tensors are small, and extra
    threads only slow them down, by up to ten times on a loaded machine)."""
    if paper not in reproductions():
        raise ValueError(f"paper={paper!r}: reproductions exist for {', '.join(reproductions())}")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63:
        raise ValueError(f"seed={seed!r} must be an integer in [0, 2^63)")
    from fedbound.sim.problems import checked_device, one_thread

    if device is not None:
        checked_device(device)
    if paper in _FOOTPRINTS:
        limits.require_runs(f"reproduce {paper}" + (" --quick" if quick else ""),
                            _FOOTPRINTS[paper](quick=quick))
    t0 = time.perf_counter()
    with one_thread():
        findings = _RUNS[paper](quick=quick, seed=seed, device=device)
    return Reproduction(paper, quick, seed, tuple(findings), time.perf_counter() - t0)
