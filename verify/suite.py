"""The verification suite behind ``fedbound check --all``.

Three kinds of rows:

* ``default``: every registered result in every variant on its default scenario;
* ``battery``: every result in its default variant, and in its ``refined`` and ``iid`` variants
  (fedbound's own results, derived by fedbound, not published: :data:`STRESSED`), on a
  seeded battery of random admissible scenarios drawn by its adapter
  (``Adapter.random_scenario``), each checked exactly where the adapter has an exact mode
  for it (as the search does: a bound attained on some scenarios, such as fedbound's
  deadline bounds on quadratics, cannot be decided by a Monte-Carlo interval there), by
  Monte Carlo elsewhere;
* ``witness``: every stored witness (``verify.witnesses``) replayed in its variant and
  mode; it must still produce the outcome it records (``expect``, "violated" for a
  refutation) and, where it records a ratio measured/bound (a tightness witness, or a
  refutation's), a ratio that did not drop below it (``verify.verdict.ratio_dropped``).

A row is *unexpected* when a result registered as ``holds`` or ``holds-with-erratum`` is
violated or diverges on a default or battery scenario where its hypotheses hold, or when
a witness no longer reproduces its outcome (the refutation or the recorded tightness went
stale): ``check --all`` exits 1. A check that raises (a refused resource estimate, a
crash) is an ``error`` row, never unexpected: ``check --all`` exits 4. Results registered
as ``unverified``, ``refuted`` or ``rate-refuted`` are reported whatever their default and
battery rows show.
"""

from __future__ import annotations

import itertools
import time
import traceback
import zlib
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Executor, as_completed
from dataclasses import dataclass, field
from functools import cache

import numpy as np

from fedbound import bounds
from fedbound.bounds.registry import did_you_mean

from . import limits
from .adapter import adapter_for, adapter_keys, default_scenario
from .check import check
from .rows import REFUTED, Figure, Row, Task
from .witnesses import witnesses


def select(only: str | None) -> list[str]:
    """Registered keys matching a comma-separated list of keys or papers ("mllsgd,hfl.lemma1");
    every key when ``only`` is None."""
    keys = adapter_keys()
    if only is None:
        return keys
    wanted = [w.strip() for w in only.split(",") if w.strip()]
    out = [k for k in keys if any(k == w or k.startswith(w + ".") for w in wanted)]
    missing = [w for w in wanted if not any(k == w or k.startswith(w + ".") for k in keys)]
    if missing or not out:
        papers = sorted({k.split(".")[0] for k in keys})
        near = did_you_mean((missing or wanted)[0], [*papers, *keys])
        raise ValueError(f"--only {only!r}: no registered result matches {missing or wanted}"
                         f"{near}; papers: {', '.join(papers)}")
    return out


def unloadable(keys: Sequence[str]) -> tuple[list[str], list[Row]]:
    """(``keys`` whose every variant builds, an error row of kind "plugin" for each installed
    plugin that failed to load and each result whose registration fails when it is built:
    a plugin's factory that raises on first use). The suite runs the others, and
    ``check --all`` exits 4 (never 1: a broken plugin contradicts nothing)."""
    from .plugins import failures

    rows = [Row(f.module, "-", "plugin", f.where, "-", None, None, f.message, 0.0)
            for f in failures()]
    good = []
    for key in keys:
        try:
            for variant in bounds.variants(key):
                bounds.get(key, variant)
            default_scenario(key)
            good.append(key)
        except Exception as e:  # noqa: BLE001 - a broken result must not stop the others
            last = traceback.format_exception_only(type(e), e)[-1].strip()
            rows.append(Row(key, "-", "plugin", "its registration", "-", None, None,
                            f"{key} cannot be built: {last}", 0.0))
    return good, rows


#: variants checked on the battery beside the default one: fedbound's own results
#: (bounds/derivations/: the refined variants, and the iid ones under a paper's i.i.d. data
#: model) get the same random stress as the published statements
STRESSED = ("refined", "iid")


def tasks(keys: Sequence[str] | None = None, *, battery: int = 2, seed: int = 0,
          replay: bool = True, figures: bool = False) -> list[Task]:
    """The suite's checks: every variant of every result (``keys``: all with an adapter) on
    its default scenario, ``battery`` random scenarios per result in its default variant
    and its :data:`STRESSED` variants (the same scenarios), drawn from
    ``numpy.random.default_rng([seed, crc32(key)])`` (a result's battery does not depend on
    which other results are selected), and (``replay``) every stored witness of the
    selected results. ``figures``: the default check of each result's default variant, and
    the replay of each refutation of a refuted result in that variant, also draw their
    figure (:data:`Row.figure`)."""
    keys = checked_keys(keys, battery)
    return [t for key in keys for t in key_tasks(key, battery=battery, seed=seed, replay=replay,
                                                 figures=figures)]


def checked_keys(keys: Sequence[str] | None, battery: int) -> list[str]:
    """``keys`` (default: every key with an adapter), each known, and ``battery`` valid: its
    random scenarios, over every selected result and variant, within the scenario limit
    (``--max-scenarios``), counted before any is drawn."""
    if isinstance(battery, bool) or not isinstance(battery, int) or battery < 0:
        raise ValueError(f"battery={battery!r} must be an integer >= 0")
    known = adapter_keys()
    keys = known if keys is None else list(keys)
    for key in keys:
        if key not in known:
            raise ValueError(f"unknown result {key!r}{did_you_mean(key, known)}; registered: "
                             f"{', '.join(known)}")
    stressed = sum(len(_stressed(key, bounds.registry.default(key))) for key in keys)
    limits.require_count(battery * stressed, f"--battery {battery} x {stressed} result variants")
    return keys


def key_tasks(key: str, *, battery: int, seed: int, replay: bool, figures: bool) -> list[Task]:
    """The tasks of one result, in :func:`tasks`' order (the same for any selection)."""
    base = default_scenario(key).to_dict()
    thm = bounds.get(key)
    stored = witnesses(key) if replay else []
    drawn = refutations(thm, stored) if figures else []
    note = "refuted: the stored witnesses drawn below violate the bound" if drawn else ""
    out = [Task(key, v, "default", "default", base,
                figure=Figure("the default scenario", note)
                if figures and v == thm.variant else None)
           for v in bounds.variants(key)]
    rng = np.random.default_rng([seed, zlib.crc32(key.encode())])
    ad = adapter_for(key)
    drawn_scenarios = [ad.random_scenario(rng) for _ in range(battery)]
    out += [Task(key, v, "battery", f"random {j + 1}", s.to_dict(),
                 exact=ad.tags.exact and ad.supports_exact(s))
            for j, s in enumerate(drawn_scenarios) for v in _stressed(key, thm.variant)]
    out += [Task(key, w.variant, "witness", w.label, w.scenario, w.exact, w.expect, w.ratio,
                 figure=Figure(f"{w.label} (a refutation)") if w in drawn else None)
            for w in stored]
    return out


def _stressed(key: str, default: str) -> list[str]:
    """The variants of ``key`` checked on its battery: ``default`` and the :data:`STRESSED`."""
    return [default] + [v for v in bounds.variants(key) if v in STRESSED]


def refutations(thm: bounds.Theorem, stored) -> list:
    """The stored witnesses that refute ``thm`` (a refuted result's default variant), the
    ones its report page draws below its default scenario."""
    if thm.status not in REFUTED:
        return []
    return [w for w in stored if w.expect == "violated" and w.variant == thm.variant]


def run_task(task: Task) -> Row:
    """Check one task, drawing its figure where it has one; an exception becomes an
    ``error`` row (with its last line)."""
    t0 = time.perf_counter()
    status = bounds.get(task.key, task.variant).status
    figure = None
    try:
        if task.figure is None:
            v = check(task.key, task.scenario, variant=task.variant, exact=task.exact)
        else:
            v, figure = _check_drawn(task)
        verdict, error = v.as_dict(), None
    except Exception as e:  # noqa: BLE001 - a suite reports every failure and goes on
        verdict, error = None, traceback.format_exception_only(type(e), e)[-1].strip()
    return Row(task.key, task.variant, task.kind, task.label, status, task.expect, verdict,
               error, time.perf_counter() - t0, ratio=task.ratio, figure=figure)


def _check_drawn(task: Task):
    """The verdict of ``task`` and the PNG of its figure, drawn from the same measurement
    (matplotlib's ``Figure``, not pyplot: nothing global is touched in a worker). A figure
    that cannot be drawn leaves the check to run alone; the row then says why."""
    from matplotlib.figure import Figure as Canvas

    from .figures import SIZE

    try:
        fig = Canvas(figsize=SIZE, dpi=100)
        ax = fig.add_subplot()
        v = adapter_for(task.key).check(task.scenario, variant=task.variant, exact=task.exact,
                                        ax=ax, label=task.figure.label)
        if task.figure.note:
            ax.set_title(f"{ax.get_title()}\n{task.figure.note}",
                         fontsize=ax.title.get_fontsize())
        return v, png(fig)
    except Exception as e:  # noqa: BLE001 - the report says why a figure is missing
        why = f"{type(e).__name__}: {e}"
    return check(task.key, task.scenario, variant=task.variant, exact=task.exact), why


def png(fig) -> bytes:
    """A check's figure laid out and saved as PNG bytes (no timestamp: the same figure gives
    the same bytes): one axes (every built-in figure) by :func:`verify.figures.fixed_layout`,
    more (a plugin's twin axes or colour bar) by matplotlib's tight_layout."""
    import io

    from .figures import fixed_layout

    if len(fig.axes) == 1:
        fixed_layout(fig)
    else:
        fig.tight_layout()
    out = io.BytesIO()
    fig.savefig(out, format="png", dpi=100, metadata={"Software": None})
    return out.getvalue()


class Interrupted(KeyboardInterrupt):
    """A run interrupted by SIGINT or SIGTERM: ``rows`` are the rows finished until then,
    in task order, and ``total`` the number of tasks."""

    def __init__(self, rows: list[Row], total: int):
        super().__init__(f"{len(rows)} of {total} checks finished")
        self.rows, self.total = rows, total


def run(todo: Iterable[Task], *, executor: Executor | None = None,
        progress: Callable[[Row], None] | None = None) -> list[Row]:
    """Run the tasks (in this process, or through ``executor``); rows in task order. An
    interruption raises :class:`Interrupted` with the rows finished so far."""
    todo = list(todo)
    if executor is not None:
        return _gathered(executor, [(i, run_tasks, [t]) for i, t in enumerate(todo)], len(todo),
                         progress)
    done: list[Row] = []
    try:
        for t in todo:
            done.append(run_task(t))
            if progress:
                progress(done[-1])
    except KeyboardInterrupt:
        raise Interrupted(done, len(todo)) from None
    return done


def run_tasks(todo: Sequence[Task]) -> list[Row]:
    """:func:`run_task` of each task, in order (what a worker runs for one submission)."""
    return [run_task(t) for t in todo]


@dataclass(frozen=True)
class Share:
    """Tasks ``start`` to ``stop`` of one result (:func:`key_tasks` with the plan's
    ``battery``, ``seed``, ``replay`` and ``figures``), planned by the worker that runs the
    share (:func:`run_share`): the driver draws no scenario and builds no theorem.
    ``cost``: the estimated work of its tasks (:func:`shares`)."""

    key: str
    start: int
    stop: int
    battery: int
    seed: int
    replay: bool
    figures: bool
    cost: float = field(default=0.0, compare=False)

    def __len__(self) -> int:
        return self.stop - self.start

    def tasks(self) -> list[Task]:
        return key_tasks(self.key, **self._plan())[self.start:self.stop]

    def _plan(self) -> dict:
        return {"battery": self.battery, "seed": self.seed, "replay": self.replay,
                "figures": self.figures}


def run_share(share: Share) -> list[Row]:
    """Plan and run one share (in a worker process). A worker plans each result once
    (:func:`_planned`), however many of its shares it gets."""
    return run_tasks(_planned(share.key, **share._plan())[share.start:share.stop])


@cache
def _planned(key: str, **plan) -> tuple[Task, ...]:
    """:func:`key_tasks`, once per worker process and plan."""
    return tuple(key_tasks(key, **plan))


#: with several jobs, a result is cut into shares of at most a GRAIN-th of a worker's part
#: of the work (so that the shares can be balanced, no long result runs alone at the end,
#: and the progress bar moves)
GRAIN = 4


def shares(keys: Sequence[str] | None = None, *, battery: int = 2, seed: int = 0,
           replay: bool = True, figures: bool = False, jobs: int = 1,
           executor: Executor | None = None) -> list[Share]:
    """The tasks of :func:`tasks` (the same arguments) as shares for ``jobs`` workers, in
    task order. With one job, one share per result, nothing planned yet. With more, each
    result's tasks are planned and their work estimated (``Adapter.footprint``, elementary
    operations) through ``executor`` if given, i.e. by the workers, which import the
    simulator (torch) anyway and keep the plan for the shares they get; the driver then
    draws no scenario and imports no torch. Each result is cut into contiguous shares of at
    most a :data:`GRAIN`-th of a worker's part (the whole work over ``jobs``) or of one
    task."""
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs={jobs!r} must be an integer >= 1")
    keys = checked_keys(keys, battery)
    if jobs == 1:
        return [Share(key, 0, _count(key, battery, replay), battery, seed, replay, figures)
                for key in keys]
    plan = {"battery": battery, "seed": seed, "replay": replay, "figures": figures}
    estimated = (executor.map if executor else map)(_costs, keys, [plan] * len(keys))
    costs = dict(zip(keys, estimated, strict=True))
    piece = sum(map(sum, costs.values())) / (jobs * GRAIN)
    return [Share(key, start, stop, battery, seed, replay, figures, sum(costs[key][start:stop]))
            for key in keys for start, stop in _split(costs[key], piece)]


def _count(key: str, battery: int, replay: bool) -> int:
    """The number of tasks of ``key`` (:func:`key_tasks`), without planning them."""
    return (len(bounds.variants(key)) + battery * len(_stressed(key, bounds.registry.default(key)))
            + (len(witnesses(key)) if replay else 0))


def _costs(key: str, plan: dict) -> list[float]:
    """The estimated work of each task of ``key`` under ``plan`` (:func:`key_tasks`' keyword
    arguments), in task order; the tasks are planned as :func:`run_share` plans them (once
    per process)."""
    ad = adapter_for(key)
    return [_work(ad, t.scenario, t.exact) for t in _planned(key, **plan)]


def _work(ad, scenario: dict, exact: bool) -> float:
    """The adapter's estimate of the work of checking ``scenario``; the least a check costs
    (``limits.LOOP_OVERHEAD``) where the adapter gives none or the scenario is invalid (its
    check will say why)."""
    try:
        fp = ad.footprint(ad.load(scenario), exact=exact)
    except ValueError:
        fp = None
    return float(max(fp.steps, limits.LOOP_OVERHEAD)) if fp else float(limits.LOOP_OVERHEAD)


def _split(costs: Sequence[float], piece: float) -> list[tuple[int, int]]:
    """(start, stop) of contiguous runs of ``costs``, each at most ``piece`` or of one
    task: a run ends before the task that would take it over ``piece``."""
    edges, run = [0], 0.0
    for i, c in enumerate(costs):
        if run and run + c > piece:
            edges.append(i)
            run = 0.0
        run += c
    return list(itertools.pairwise([*edges, len(costs)]))


def run_shares(todo: Sequence[Share], *, executor: Executor | None = None,
               progress: Callable[[Row], None] | None = None) -> list[Row]:
    """The rows of the shares' tasks in task order, as :func:`run` gives them for
    :func:`tasks`. Through ``executor``, the shares are submitted by decreasing estimated
    work (the longest first, so that no long share starts last and runs alone). An
    interruption raises :class:`Interrupted` with the rows finished so far."""
    todo = list(todo)
    if executor is None:
        return run([t for s in todo for t in s.tasks()], progress=progress)
    starts = list(itertools.accumulate((len(s) for s in todo), initial=0))
    order = sorted(range(len(todo)), key=lambda i: -todo[i].cost)
    return _gathered(executor, [(starts[i], run_share, todo[i]) for i in order], starts[-1],
                     progress)


def _gathered(executor: Executor, calls, total: int,
              progress: Callable[[Row], None] | None) -> list[Row]:
    """Submit ``calls`` (position of the first row, function, its argument; each function
    returns consecutive rows) in their order and gather the rows by position. An
    interruption raises :class:`Interrupted` with the rows finished so far."""
    done: dict[int, Row] = {}
    try:
        futures = {executor.submit(fn, arg): start for start, fn, arg in calls}
        for f in as_completed(futures):
            for j, row in enumerate(f.result()):
                done[futures[f] + j] = row
                if progress:
                    progress(row)
    except KeyboardInterrupt:
        raise Interrupted([done[i] for i in sorted(done)], total) from None
    return [done[i] for i in range(total)]
