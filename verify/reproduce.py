"""Reproducing the papers' experimental claims: run the experiments, decide every claim.

:func:`reproduce` takes papers (and optionally claim ids), runs each experiment their claims
need once per reading of an ambiguous step (``verify.claims``), in this process or in
``jobs`` worker processes (``verify.pool.executor``), after checking every run's footprint
against ``verify.limits``, and decides each claim from its experiment's outcome on paired
differences over seeds (``verify.decide``): a :class:`ClaimResult` per claim, with one
:class:`Decision` per reading. A test whose values are equal on every seed is fixed by
the setting only when the compared configurations' whole curves are identical too;
otherwise the equal values are a measured outcome (``verify.decide.measured_equal``).
The claim's verdict is its primary reading's (the algorithm as printed); every reading's
verdict is beside it.

Beside the measurement, an experiment may give the bound's prediction (constants
estimated on the same problem, ``sim.estimate``): its curves' ``bound`` and a sentence. A
decision says whether the bound orders each pair of configurations its tests compare as
the claim does (``bound_agrees``; None where no bound is evaluated there).

The same seed gives the same numbers, bit for bit, with or without ``jobs``: every
experiment draws from generators seeded by the plan, never from global state.
"""

from __future__ import annotations

import math
import time
import traceback
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace

import numpy as np

from .boundary import PluginError
from .claims import Claim, Experiment, Outcome, Plan, claims, experiment
from .claims_boundary import checked_outcome, checked_tests
from .decide import VERDICTS, Test, combine, deciding, measured_equal
from .outcome_json import outcome_dict


@dataclass(frozen=True)
class Decision:
    """A claim decided under one ``reading`` (None: its experiment has one): the verdict,
    every test, the deciding one (``effect``), whether the bound orders the compared
    configurations as the claim does, and the bound's prediction in words."""

    reading: str | None
    verdict: str
    tests: tuple[Test, ...]
    effect: Test
    bound_agrees: bool | None
    prediction: str

    def as_dict(self) -> dict:
        e = self.effect
        return {"reading": self.reading, "verdict": self.verdict,
                "effect": {"test": e.name, "value": e.effect, "low": e.low, "high": e.high,
                           "seeds": e.seeds, "region": e.region(), "margin": e.margin,
                           "source": e.source, "reason": e.reason},
                "detectable_effect": e.detectable, "seeds_needed": e.needed,
                "bound_agrees": self.bound_agrees, "prediction": self.prediction,
                "tests": [t.as_dict() for t in self.tests]}


@dataclass(frozen=True)
class ClaimResult:
    """A claim with its decisions (one per reading; none when its experiment failed, with
    the ``error``)."""

    claim: Claim
    decisions: tuple[Decision, ...]
    error: str = ""

    @property
    def primary(self) -> Decision | None:
        """The decision of the claim's primary reading (its only one without readings)."""
        return next((d for d in self.decisions if d.reading == self.claim.primary), None)

    @property
    def verdict(self) -> str:
        return "error" if self.primary is None else self.primary.verdict

    def reproduced_under(self) -> list[str]:
        """The readings under which the claim agrees."""
        return [d.reading for d in self.decisions if d.verdict == "agrees"]

    def as_dict(self) -> dict:
        c, p = self.claim, self.primary
        out = {"id": c.id, "cite": c.cite, "claim": c.claim, "setting": dict(c.setting),
               "analogue": c.analogue, "metric": c.metric, "verdict": self.verdict}
        if p is not None:
            d = p.as_dict()
            out.update(effect=d["effect"], detectable_effect=d["detectable_effect"],
                       seeds_needed=d["seeds_needed"], bound_agrees=d["bound_agrees"],
                       prediction=d["prediction"], tests=d["tests"])
        if len(self.decisions) > 1 or c.primary is not None:
            out["primary"] = c.primary
            out["readings"] = {d.reading: d.as_dict() for d in self.decisions}
            out["reproduced_under"] = self.reproduced_under()
        out.update(tolerance=c.tolerance, sensitivity=c.sensitivity,
                   stated_model=c.stated_model, experiment=c.experiment, error=self.error)
        return out


@dataclass(frozen=True)
class Run:
    """One experiment run under one plan: its outcome (None when it failed: ``error``), its
    seconds, and whether it was read from the store of an earlier run (``stored``: its
    seconds are that run's)."""

    experiment: str
    plan: Plan
    outcome: Outcome | None
    seconds: float
    error: str = ""
    stored: bool = field(default=False, compare=False)


@dataclass(frozen=True)
class Reproduction:
    """The claims of one or more papers, decided, with the runs behind them."""

    papers: tuple[str, ...]
    plan: Plan
    results: tuple[ClaimResult, ...]
    runs: tuple[Run, ...]
    seconds: float

    def outcome(self, claim: Claim, reading: str | None = None) -> Outcome | None:
        """The outcome ``claim`` was decided on under ``reading``."""
        return next((r.outcome for r in self.runs
                     if r.experiment == claim.experiment and r.plan.reading == reading), None)

    def counts(self) -> dict[str, int]:
        """How many claims ended in each verdict (and in an error)."""
        return dict(Counter(r.verdict for r in self.results))

    def paper_seconds(self) -> dict[str, float]:
        """The seconds of each paper's runs (summed over runs, whether in parallel or not; a
        run read back from the store counts the seconds it took when it ran)."""
        out: dict[str, float] = {}
        for r in self.runs:
            paper = r.experiment.split(".")[0]
            out[paper] = out.get(paper, 0.0) + r.seconds
        return out

    def timing(self) -> str:
        """How long the reproduction took, in words, as its text and its report say it: the
        wall-clock seconds (:attr:`seconds`) and the seconds of its runs (summed: more than
        the wall clock when runs went in parallel), and the runs read back from the store."""
        stored = sum(r.stored for r in self.runs)
        return (f"{self.seconds:.1f} s wall clock, {sum(self.paper_seconds().values()):.1f} s of "
                "runs" + (f" ({stored} of {len(self.runs)} runs read back from the store)"
                          if stored else ""))

    def status(self, strict: bool = False) -> int:
        """The exit status: 1 when a claim is contradicted, 4 when one ended in an error, 3
        with ``strict`` when one is undecided, else 0."""
        verdicts = {r.verdict for r in self.results}
        if "contradicts" in verdicts:
            return 1
        if "error" in verdicts:
            return 4
        return 3 if strict and "undecided" in verdicts else 0

    def to_dict(self, curves: bool = False) -> dict:
        """The reproduction as JSON values: the plan, the counts and every claim's decision;
        with ``curves`` also every run with what it measured (``runs``: the curves, scalars,
        notes and prediction each claim's figure and report need), from which
        ``verify.reproduction_io.reproduction_from_dict`` rebuilds the reproduction, every
        number bit for bit (a NaN of an array is written null)."""
        out = {"papers": list(self.papers), "quick": self.plan.quick, "seed": self.plan.seed,
               "seeds": self.plan.seeds, "batch": self.plan.batch, "step": self.plan.step,
               "device": self.plan.device, "seconds": self.seconds, "counts": self.counts(),
               "paper_seconds": self.paper_seconds(),
               "claims": [r.as_dict() for r in self.results]}
        if curves:
            out["runs"] = [run_dict(r) for r in self.runs]
        return out

    def text(self) -> str:
        """The reproduction as plain text: per paper a header, per claim its verdict."""
        from fedbound.bounds.references import PAPERS, cite

        lines = []
        seconds = self.paper_seconds()
        for paper in self.papers:
            mine = [r for r in self.results if r.claim.paper == paper]
            title = cite(paper) if paper in PAPERS else paper
            lines += [f"{title}: {len(mine)} claims ({'quick' if self.plan.quick else 'full'} "
                      f"run, seed {self.plan.seed}, {seconds.get(paper, 0.0):.1f} s of runs): "
                      + counts_text(r.verdict for r in mine), ""]
            for r in mine:
                lines += claim_lines(r) + [""]
        lines.append(f"{len(self.results)} claims in {self.timing()}")
        return "\n".join(lines).rstrip()


def run_dict(r: Run) -> dict:
    return {"experiment": r.experiment, "reading": r.plan.reading, "seconds": r.seconds,
            "error": r.error, "outcome": None if r.outcome is None else outcome_dict(r.outcome)}


def _number(x: float) -> str:
    return f"{x:.3g}"


def counts_text(verdicts) -> str:
    """"3 agrees, 1 negligible, ...": how many of ``verdicts`` are each verdict (and an
    error), those that occur, in the order of ``verify.decide.VERDICTS``."""
    counts = Counter(verdicts)
    return ", ".join(f"{counts[v]} {v}" for v in (*VERDICTS, "error") if counts[v]) or "no claims"


def effect_text(t: Test) -> str:
    """A test's measured effect with its interval, its claimed region and margin, and
    (undecided) what the run could have detected and the seeds that would decide it; for a
    test the setting fixes, why."""
    if t.effect is None:
        return f"{t.name}: fixed by the setting: {t.reason}"
    text = (f"{t.name}: {_number(t.effect)} [{_number(t.low)}, {_number(t.high)}] over "
            f"{t.seeds} seeds (claimed {t.region()})")
    if t.censored:
        text += f"; {t.censored} of {t.seeds} seeds censored at the horizon"
    if t.reason:
        text += f"; {t.reason}"
    elif t.verdict == "undecided":
        text += f"; detectable {_number(t.detectable)}, " + (
            f"{t.needed} seeds would decide it" if t.needed is not None
            else "no number of seeds decides it at the observed effect")
    return text


def claim_lines(r: ClaimResult) -> list[str]:
    c = r.claim
    lines = [f"{c.id}  ({c.cite})", f"  {c.claim}"]
    if r.error:
        return [*lines, f"  error: {r.error}"]
    p = r.primary
    readings = ""
    if c.primary is not None:
        readings = "  [" + "; ".join(f"{d.reading}: {d.verdict}" for d in r.decisions) + "]"
    lines += [f"  verdict: {r.verdict}{readings}", f"  effect: {effect_text(p.effect)}"]
    if p.effect.margin is not None:
        lines.append(f"  margin: {_number(p.effect.margin)} ({p.effect.source})")
    if c.stated_model:
        lines.append(f"  the stated model: {c.stated_model}")
    if p.prediction:
        bound = {True: "orders the compared configurations as claimed",
                 False: "orders them otherwise", None: "no order to compare"}[p.bound_agrees]
        lines.append(f"  bound: {p.prediction} ({bound})")
    return lines


def bound_agrees(tests: Sequence[Test], outcome: Outcome) -> bool | None:
    """Does the bound order every pair of configurations the tests compare as the claim
    does (the first of ``Test.compares`` lower)? None when no such pair has a bound on both
    curves."""
    said = []
    for t in tests:
        if t.compares is None or t.at is None:
            continue
        low, high = (outcome.curves[label].bound_at(t.at) if label in outcome.curves else None
                     for label in t.compares)
        if low is not None and high is not None:
            said.append(low < high)
    return all(said) if said else None


def _equal_not_identical(t: Test, outcome: Outcome) -> bool:
    """Whether ``t`` is fixed-by-setting only because its values are equal on every seed
    (the engine's identical-runs rule) while the whole curves of the two configurations it
    compares differ: equal outcomes of different runs, decided as a measurement
    (``verify.decide.measured_equal``)."""
    if t.verdict != "fixed-by-setting" or t.kind == "fixed" or t.compares is None \
            or not all(label in outcome.curves for label in t.compares):
        return False
    first, second = (outcome.curves[label] for label in t.compares)
    return not (np.array_equal(first.x, second.x) and np.array_equal(first.y, second.y))


def decision(claim: Claim, outcome: Outcome, reading: str | None) -> Decision:
    """``claim`` decided on ``outcome`` (module docstring)."""
    tests = tuple(measured_equal(t) if _equal_not_identical(t, outcome) else t
                  for t in checked_tests(claim, claim.decide(outcome), VERDICTS))
    return Decision(reading, combine(tests, claim.rule), tests, deciding(tests, claim.rule),
                    bound_agrees(tests, outcome), outcome.prediction)


def run_experiment(experiment_id: str, plan: Plan) -> Run:
    """Run one experiment under ``plan`` with torch on one thread; a failure is recorded in
    the run (its message), not raised, except a package the experiments need and that is
    not installed (ImportError: the environment, not the experiment, so every claim would
    fail alike)."""
    from fedbound.sim.problems import one_thread

    exp = experiment(experiment_id)
    t0 = time.perf_counter()
    try:
        with one_thread():
            outcome = checked_outcome(exp, exp.run(replace(plan, seeds=plan.count(exp))))
    except (KeyboardInterrupt, MemoryError, ImportError, PluginError):
        raise
    except Exception as e:  # noqa: BLE001 - recorded, the other claims go on
        last = traceback.extract_tb(e.__traceback__)[-1]
        return Run(experiment_id, plan, None, time.perf_counter() - t0,
                   f"{type(e).__name__}: {e} ({last.filename.rsplit('/', 1)[-1]}:{last.lineno})")
    return Run(experiment_id, plan, outcome, time.perf_counter() - t0)


def planned_runs(selected: Sequence[Claim], plan: Plan) -> list[tuple[Experiment, Plan]]:
    """Each experiment the claims need, once per reading, in the claims' order."""
    out: dict[tuple[str, str | None], tuple[Experiment, Plan]] = {}
    for c in selected:
        exp = experiment(c.experiment)
        for p in exp.plans(plan):
            out.setdefault((exp.id, p.reading), (exp, p))
    return list(out.values())


def checked_plan(*, quick: bool, seed, seeds, device, batch, step) -> Plan:
    """A :class:`Plan` from the arguments, or ValueError naming the first bad one."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63:
        raise ValueError(f"seed={seed!r} must be an integer in [0, 2^63)")
    if seeds is not None and (isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 2):
        raise ValueError(f"seeds={seeds!r} must be an integer >= 2 (a paired interval needs two)")
    if batch is not None and (isinstance(batch, bool) or not isinstance(batch, int) or batch < 1):
        raise ValueError(f"batch={batch!r} must be an integer >= 1")
    if step is not None and (isinstance(step, bool) or not isinstance(step, (int, float))
                             or not (math.isfinite(step) and step > 0)):
        raise ValueError(f"step={step!r} must be a finite number > 0")
    if device is not None:
        from fedbound.sim.problems import checked_device

        checked_device(device)
        device = str(device)
    return Plan(quick=bool(quick), seed=seed, seeds=seeds, device=device, batch=batch,
                step=None if step is None else float(step))


#: the kind of the rows a reproduction keeps in a store (the ``variant`` column: a sweep's
#: rows hold a theorem's variant there)
STORE_KIND = "reproduce"


def code_fingerprint(experiments: Sequence[Experiment]) -> str:
    """SHA-256 of the code that makes a run's numbers: every ``.py`` file of fedbound's
    packages and of the top-level package (or module) defining each of ``experiments``' run
    functions (by their paths inside it: the same code in another directory has the same
    fingerprint), with the versions of torch and numpy. A stored run is reused only by the
    code that made it: a changed experiment or simulator runs again."""
    import hashlib
    import importlib.util
    import sys
    from importlib.metadata import PackageNotFoundError, version
    from pathlib import Path

    roots = ["fedbound", "fedbound.bounds", "fedbound.sim", "fedbound.verify"]
    roots += sorted({e.run.__module__.partition(".")[0] for e in experiments} - {"fedbound"})
    h = hashlib.sha256()
    for name in roots:
        try:
            spec = importlib.util.find_spec(name)
        except ValueError:  # a module without a spec: a script's __main__
            spec = None
        if spec is not None and spec.submodule_search_locations:
            bases = [Path(p) for p in spec.submodule_search_locations]
            files = sorted((f.relative_to(b).as_posix(), f) for b in bases for f in b.rglob("*.py"))
        else:
            origin = spec.origin if spec is not None else getattr(sys.modules.get(name), "__file__", None)
            files = [] if origin is None else [(Path(origin).name, Path(origin))]
        for rel, path in files:
            h.update(f"{name}/{rel}\0".encode() + path.read_bytes() + b"\0")
    for package in ("torch", "numpy"):
        try:
            h.update(f"{package}=={version(package)}\0".encode())
        except PackageNotFoundError:  # pragma: no cover - a source tree without them
            h.update(f"{package} missing\0".encode())
    return h.hexdigest()


def run_digest(exp: Experiment, plan: Plan, code: str) -> str:
    """The store key of ``exp`` run under ``plan`` by the code ``code``
    (:func:`code_fingerprint`): the SHA-256 of the experiment, the plan (its seeds counted)
    and the code."""
    import hashlib
    import json

    text = json.dumps({"experiment": exp.id, "plan": asdict(replace(plan, seeds=plan.count(exp))),
                       "code": code}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def stored_run(experiment_id: str, plan: Plan) -> dict:
    """Run one experiment (in a worker process, a Dask worker or this one) and return it as
    a row of the store: ``{"verdict": the run's JSON (run_dict) or None, "error", "seconds"}``
    (``run_experiment``'s exceptions pass through)."""
    run = run_experiment(experiment_id, plan)
    return {"verdict": None if run.outcome is None else run_dict(run), "error": run.error or None,
            "seconds": run.seconds}


def _run_of(exp: Experiment, plan: Plan, row: dict, stored: bool) -> Run:
    """The :class:`Run` of a stored row (``stored_run``'s, or the store's read back)."""
    from .outcome_json import outcome_from_dict

    if row["verdict"] is None:
        return Run(exp.id, plan, None, row["seconds"], row["error"] or "")
    try:
        outcome = outcome_from_dict(row["verdict"]["outcome"], f"the stored run of {exp.id}")
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(f"--db holds a run of {exp.id} that does not read back ({e}): remove the "
                         "store, or give another --db") from None
    return Run(exp.id, plan, outcome, row["seconds"], "", stored)


def _runs_in_store(todo: list[tuple[Experiment, Plan]], path, pool,
                   progress: Callable[[Run], None] | None) -> list[Run]:
    """Every run of ``todo``: read from the store at ``path`` where it holds it (a run of the
    same experiment, plan and code: :func:`run_digest`), else run (through ``pool``) and
    stored as soon as it finishes; a failed run is not stored (a rerun tries it again). An
    interruption keeps what is stored (``verify.store.run_stored``)."""
    from .store import Store, run_stored

    code = code_fingerprint([exp for exp, _ in todo])
    keyed = {run_digest(exp, p, code): (exp, p) for exp, p in todo}
    store = Store(path, flag="--db")
    runs: dict[str, Run] = {}

    def record(digest: str, row: dict) -> None:
        exp, p = keyed[digest]
        if row["error"] is None:
            store.add(digest, exp.id, STORE_KIND, p.quick,
                      {"plan": asdict(replace(p, seeds=p.count(exp))), "code": code}, row)
        runs[digest] = _run_of(exp, p, row, False)
        if progress:
            progress(runs[digest])

    try:
        calls = {d: (stored_run, exp.id, p) for d, (exp, p) in keyed.items()}
        run_stored(calls, store, pool, record, window=1 if pool is None else len(calls),
                   noun="experiment runs", reraise=(ImportError, MemoryError, PluginError))
        for digest, row in store.results([d for d in keyed if d not in runs]).items():
            runs[digest] = _run_of(*keyed[digest], row, True)
            if progress:
                progress(runs[digest])
    finally:
        store.close()
    return [runs[d] for d in keyed]


def reproduce(papers: str | Sequence[str], *, claim_ids: Sequence[str] | None = None,
              quick: bool = False, seed: int = 0, seeds: int | None = None, device=None,
              batch: int | None = None, step: float | None = None, jobs: int = 1,
              scheduler: str | None = None, dask_local: int | None = None,
              connect_timeout: float = 10.0, store=None,
              progress: Callable[[Run], None] | None = None) -> Reproduction:
    """Decide the claims of ``papers`` (a key prefix, or several; ``claim_ids`` selects some
    of their claims) from their experiments, run with ``quick`` or full settings from
    ``seed``, with ``seeds`` seeds (None: each experiment's own), on ``device``, with the
    batch size and step ``batch`` and ``step`` where given (the experiments' own otherwise),
    in ``jobs`` processes, on the Dask scheduler at ``scheduler`` or on a Dask LocalCluster
    of ``dask_local`` workers (``verify.pool.executor``, as ``fedbound sweep`` does);
    ``progress(run)`` is called as each run finishes. With ``store`` (the path of an SQLite
    store, ``verify.store.Store``), each run is kept as it finishes and a run the store holds
    already (the same experiment, plan and code) is read back, not run: an interrupted
    reproduction resumes where it stopped, with the same numbers, bit for bit. Every run's
    footprint is checked first (``verify.limits``: ResourceError before anything runs)."""
    from .limits import require
    from .pool import executor

    papers = (papers,) if isinstance(papers, str) else tuple(dict.fromkeys(papers))
    if not papers:
        raise ValueError("give at least one paper")
    plan = checked_plan(quick=quick, seed=seed, seeds=seeds, device=device, batch=batch, step=step)
    selected = claims(papers, claim_ids)
    todo = planned_runs(selected, plan)
    for exp, p in todo:
        require(f"reproduce {exp.id}" + (f" ({p.reading})" if p.reading else ""),
                exp.footprint(replace(p, seeds=p.count(exp))))
    t0 = time.perf_counter()
    runs: list[Run] = []
    with executor(jobs=jobs, scheduler=scheduler, dask_local=dask_local,
                  connect_timeout=connect_timeout) as pool:
        if store is not None:
            runs = _runs_in_store(todo, store, pool, progress)
        elif pool is None:
            for exp, p in todo:
                runs.append(run_experiment(exp.id, p))
                if progress:
                    progress(runs[-1])
        else:
            futures = [pool.submit(run_experiment, exp.id, p) for exp, p in todo]
            for f in futures:
                runs.append(f.result())
                if progress:
                    progress(runs[-1])
    results = []
    for c in selected:
        mine = [r for r in runs if r.experiment == c.experiment]
        failed = next((r.error for r in mine if r.outcome is None), "")
        if failed:
            results.append(ClaimResult(c, (), failed))
            continue
        try:
            results.append(ClaimResult(c, tuple(decision(c, r.outcome, r.plan.reading)
                                                for r in mine)))
        except (ValueError, KeyError) as e:
            results.append(ClaimResult(c, (), f"{type(e).__name__}: {e}"))
    return Reproduction(papers, replace(plan, seeds=seeds), tuple(results), tuple(runs),
                        time.perf_counter() - t0)


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
