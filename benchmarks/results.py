"""benchmarks/results.json: every benchmark's figures, one entry per figure.

    python benchmarks/results.py     # the whole file as a table, and how many goals are met

An entry is ``{"name", "value", "unit", "goal", "met"}``: ``goal`` is a string such as
``"<= 1.2"`` or ``">= 25"`` (``null`` for a figure reported without a goal) and ``met``
says whether ``value`` meets it (``null`` without a goal). Each script merges its entries
into the file by name, so the scripts can run separately or all together (``make bench``),
and a regression in speed shows in the file as plainly as a regression in a bound.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
from pathlib import Path

RESULTS = Path(__file__).resolve().with_name("results.json")


def figure(name: str, value: float, unit: str, *, at_most: float | None = None,
           at_least: float | None = None) -> dict:
    """One entry; ``at_most`` / ``at_least`` state the goal (at most one of them)."""
    if at_most is not None and at_least is not None:
        raise ValueError(f"{name}: give at_most or at_least, not both")
    if not math.isfinite(value):
        raise ValueError(f"{name}: value={value} is not a finite number")
    goal, met = None, None
    if at_most is not None:
        goal, met = f"<= {at_most:g}", bool(value <= at_most)
    elif at_least is not None:
        goal, met = f">= {at_least:g}", bool(value >= at_least)
    return {"name": name, "value": float(value), "unit": unit, "goal": goal, "met": met}


def record(entries: list[dict], path: Path = RESULTS) -> None:
    """Merge ``entries`` into ``path`` by name (under a lock on ``path`` with suffix .lock,
    written to a temporary file, then renamed) and print them as a table."""
    with open(path.with_suffix(".lock"), "w") as lock:  # two scripts at once: no lost entries
        fcntl.flock(lock, fcntl.LOCK_EX)
        merged = {}
        if path.exists():
            merged = {e["name"]: e for e in json.loads(path.read_text())}
        merged.update({e["name"]: e for e in entries})
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(sorted(merged.values(), key=lambda e: e["name"]), indent=1) + "\n")
        os.replace(tmp, path)
    print_table(entries)
    print(f"({len(entries)} figures merged into {path.name})")


def print_table(entries: list[dict]) -> None:
    width = max((len(e["name"]) for e in entries), default=4)
    print(f"\n{'figure':<{width}}  {'value':>12}  {'unit':<16} {'goal':<8} met")
    for e in entries:
        met = "-" if e["met"] is None else ("yes" if e["met"] else "NO")
        print(f"{e['name']:<{width}}  {e['value']:>12.4g}  {e['unit']:<16} {e['goal'] or '-':<8} {met}")


def main() -> None:
    entries = json.loads(RESULTS.read_text()) if RESULTS.exists() else []
    print_table(entries)
    goals = [e for e in entries if e["met"] is not None]
    missed = [e["name"] for e in goals if not e["met"]]
    print(f"\n{len(goals) - len(missed)} of {len(goals)} goals met"
          + (f"; not met: {', '.join(missed)}" if missed else ""))


if __name__ == "__main__":
    main()
