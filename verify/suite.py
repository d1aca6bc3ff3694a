"""The verification suite behind ``fedbound check --all``.

Every registered result is checked in every variant on its default scenario, and in
its default variant on a seeded battery of random admissible scenarios drawn by its
adapter (``Adapter.random_scenario``). A row is *unexpected* when a result registered
as ``holds`` or ``holds-with-erratum`` is violated or diverges on a scenario where its
hypotheses hold, or cannot be checked; results registered as ``unverified`` or ``refuted`` are reported
whatever happens.
"""

from __future__ import annotations

import time
import traceback
import zlib
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass

import numpy as np
import torch

import bounds

from .check import check
from .scenario import adapter_for, default_scenario, load_scenario

#: statuses under which a violation (or a failure to check) is unexpected
TRUSTED = ("holds", "holds-with-erratum")
#: outcomes that contradict a trusted result
FAILURES = ("violated", "diverged", "error")


@dataclass(frozen=True)
class Task:
    """One check to run: a result, a variant and a scenario (as JSON values)."""

    key: str
    variant: str
    label: str  # "default" or "random 1", "random 2", ...
    scenario: dict


@dataclass
class Row:
    """The outcome of one task. ``verdict`` is ``Verdict.as_dict()``, or None with
    ``error`` set when the check raised."""

    key: str
    variant: str
    label: str
    status: str
    verdict: dict | None
    error: str | None
    seconds: float

    @property
    def outcome(self) -> str:
        return "error" if self.verdict is None else self.verdict["verdict"]

    @property
    def unexpected(self) -> bool:
        """A trusted result failed where its hypotheses hold (or could not be checked)."""
        admissible = self.verdict is None or self.verdict["admissible"]
        return self.status in TRUSTED and self.outcome in FAILURES and admissible

    def as_dict(self) -> dict:
        """JSON values; the wall time is left out so that a seed fixes the output."""
        return {"key": self.key, "variant": self.variant, "scenario_label": self.label,
                "status": self.status, "outcome": self.outcome, "unexpected": self.unexpected,
                "verdict": self.verdict, "error": self.error}


def select(only: str | None) -> list[str]:
    """Registered keys matching a comma-separated list of keys or papers ("mllsgd,hfl.lemma1");
    every key when ``only`` is None."""
    keys = sorted(row["key"] for row in bounds.list())
    if only is None:
        return keys
    wanted = [w.strip() for w in only.split(",") if w.strip()]
    out = [k for k in keys if any(k == w or k.startswith(w + ".") for w in wanted)]
    missing = [w for w in wanted if not any(k == w or k.startswith(w + ".") for k in keys)]
    if missing or not out:
        raise ValueError(f"--only {only!r}: no registered result matches {missing or wanted}; "
                         f"papers: {', '.join(sorted({k.split('.')[0] for k in keys}))}")
    return out


def tasks(keys: Sequence[str] | None = None, *, battery: int = 2, seed: int = 0) -> list[Task]:
    """The suite's checks: every variant of every result (``keys``: all registered) on
    its default scenario, then ``battery`` random scenarios per result in its default
    variant, drawn from ``numpy.random.default_rng([seed, crc32(key)])``: a result's battery
    does not depend on which other results are selected."""
    if battery < 0:
        raise ValueError(f"battery={battery} must be >= 0")
    registered = {row["key"]: row for row in bounds.list()}
    keys = sorted(registered) if keys is None else list(keys)
    out: list[Task] = []
    for key in keys:
        if key not in registered:
            raise ValueError(f"unknown result {key!r}; registered: {', '.join(sorted(registered))}")
        base = default_scenario(key).to_dict()
        out += [Task(key, v, "default", base) for v in registered[key]["variants"]]
        rng = np.random.default_rng([seed, zlib.crc32(key.encode())])
        default_variant = bounds.get(key).variant
        ad = adapter_for(key)
        out += [Task(key, default_variant, f"random {j + 1}",
                     ad.random_scenario(key, rng).to_dict()) for j in range(battery)]
    return out


def run_task(task: Task) -> Row:
    """Check one task; an exception becomes an ``error`` row (with its last line)."""
    t0 = time.perf_counter()
    status = bounds.get(task.key, task.variant).status
    try:
        v = check(task.key, load_scenario(task.key, task.scenario), variant=task.variant)
        return Row(task.key, task.variant, task.label, status, v.as_dict(), None,
                   time.perf_counter() - t0)
    except Exception as e:  # noqa: BLE001 - a suite reports every failure and goes on
        last = traceback.format_exception_only(type(e), e)[-1].strip()
        return Row(task.key, task.variant, task.label, status, None, last,
                   time.perf_counter() - t0)


def single_threaded() -> None:
    """Initializer of worker processes: one torch thread each (no oversubscription)."""
    torch.set_num_threads(1)


def run(todo: Iterable[Task], *, executor: Executor | None = None,
        progress: Callable[[Row], None] | None = None) -> list[Row]:
    """Run the tasks (in this process, or through ``executor``); rows in task order."""
    todo = list(todo)
    if executor is None:
        rows = []
        for t in todo:
            rows.append(run_task(t))
            if progress:
                progress(rows[-1])
        return rows
    futures = [executor.submit(run_task, t) for t in todo]
    rows = []
    for f in futures:
        rows.append(f.result())
        if progress:
            progress(rows[-1])
    return rows


def table(rows: Sequence[Row]) -> str:
    """The terminal table: key, variant, scenario, status, verdict, slack, time."""
    head = ("key", "variant", "scenario", "status", "verdict", "slack", "time")
    body = []
    for r in rows:
        slack = "-" if r.verdict is None else f"{r.verdict['slack']:.3g}x"
        verdict = r.outcome.upper() + (" (!)" if r.unexpected else "")
        body.append((r.key, r.variant, r.label, r.status, verdict, slack, f"{r.seconds:.2f}s"))
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body, strict=True)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    lines = [fmt.format(*head), fmt.format(*("-" * w for w in widths))]
    lines += [fmt.format(*row) for row in body]
    return "\n".join(lines)


def summary(rows: Sequence[Row]) -> dict:
    """Counts by outcome and the unexpected rows."""
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.outcome] = counts.get(r.outcome, 0) + 1
    return {"checks": len(rows), "results": len({r.key for r in rows}), "outcomes": counts,
            "unexpected": [r.as_dict() for r in rows if r.unexpected]}
