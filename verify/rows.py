"""What ``check --all`` runs and what it gets back: a :class:`Task` per check, a
:class:`Row` per outcome, and the :func:`summary` of the rows (``verify.suite`` runs the
tasks, ``verify.report`` writes the rows)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .verdict import ratio_dropped

#: statuses under which a violation is unexpected
TRUSTED = ("holds", "holds-with-erratum")
#: outcomes that contradict a trusted result
FAILURES = ("violated", "diverged")
#: statuses whose report page draws the stored refutations below the default scenario
REFUTED = ("refuted", "rate-refuted")


#: kinds of rows: "plugin" is a plugin that failed to load, or a result whose registration
#: fails when it is built (an error row: nothing of it could be checked)
KINDS = ("default", "battery", "witness", "plugin")


@dataclass(frozen=True)
class Figure:
    """The figure a task draws from its own measurement (``Adapter.check`` with ``ax``):
    its title names the scenario (``label``) and adds ``note`` on a line of its own."""

    label: str
    note: str = ""


@dataclass(frozen=True)
class Task:
    """One check to run: a result, a variant, a scenario (as JSON values) and, for a
    witness, its mode and the outcome it must reproduce."""

    key: str
    variant: str
    kind: str  # one of KINDS
    label: str  # "default", "random 1", ..., "witness <file>"
    scenario: dict
    exact: bool = False
    expect: str | None = None
    ratio: float | None = None  # a witness's recorded ratio measured/bound
    figure: Figure | None = None


@dataclass
class Row:
    """The outcome of one task. ``verdict`` is ``Verdict.as_dict()``, or None with
    ``error`` set when the check raised."""

    key: str
    variant: str
    kind: str
    label: str
    status: str
    expect: str | None
    verdict: dict | None
    error: str | None
    seconds: float
    ratio: float | None = None  # a witness's recorded ratio measured/bound
    #: the PNG of the task's figure, drawn from this check's measurement, or why it could
    #: not be drawn (None: the task draws no figure)
    figure: bytes | str | None = None

    @property
    def outcome(self) -> str:
        return "error" if self.verdict is None else self.verdict["verdict"]

    @property
    def unexpected(self) -> bool:
        """A witness that no longer reproduces its outcome or whose ratio dropped, or a
        trusted result violated (or diverged) where its hypotheses hold. A check that could
        not run (an ``error`` row: a refused resource estimate, a crash of the simulator)
        contradicts nothing: it is counted as an error (exit 4), never as a violation or a
        stale refutation (exit 1)."""
        if self.outcome == "error":
            return False
        if self.kind == "witness":
            return self.outcome != self.expect or ratio_dropped(self.ratio, self.verdict)
        admissible = self.verdict is None or self.verdict["admissible"]
        return self.status in TRUSTED and self.outcome in FAILURES and admissible

    def as_dict(self) -> dict:
        """JSON values; the wall time is left out so that a seed fixes the output."""
        return {"key": self.key, "variant": self.variant, "kind": self.kind,
                "scenario_label": self.label, "status": self.status, "expect": self.expect,
                "outcome": self.outcome, "unexpected": self.unexpected,
                "verdict": self.verdict, "error": self.error, "recorded_ratio": self.ratio}


def summary(rows: Sequence[Row]) -> dict:
    """Counts by kind of row and outcome, the errors and the unexpected rows."""
    by_kind: dict[str, dict[str, int]] = {k: {} for k in KINDS}
    for r in rows:
        by_kind[r.kind][r.outcome] = by_kind[r.kind].get(r.outcome, 0) + 1
    witness_rows = [r for r in rows if r.kind == "witness"]
    return {"checks": len(rows), "results": len({r.key for r in rows if r.kind != "plugin"}),
            "outcomes": by_kind,
            "witnesses": {"replayed": len(witness_rows),
                          "reproduced": sum(r.outcome != "error" and not r.unexpected
                                            for r in witness_rows),
                          "stale": sum(r.unexpected for r in witness_rows)},
            "errors": sum(r.outcome == "error" for r in rows),
            "unexpected": [r.as_dict() for r in rows if r.unexpected]}
