"""What the chooser benchmarks share: each answer's regret against an independent reference,
the figures they record and the table they print.

The reference of a scenario is a paired search of its own: a dense grid (every knob's
values of the chooser and the midpoints between them, on the knob's scale) together with
every answer's settings, all simulated on the same ``replicas`` seeds (common random
numbers, ``Chooser.simulate(paired=True)``), more replicas than the chooser's own paired
stage. Its best configuration is the best to beat; every answer's regret is its paired
regret against it, with its 95% interval (``verify.api.paired_regret``), and it passes when
the regret is at most 10% or the difference cannot be told from 0 at 95%
(``verify.api.passes``): the chooser's own report is not used to judge it.
"""

from __future__ import annotations

import math
import time
from typing import Any

from benchmarks.results import figure
from fedbound.verify.api import choose, paired_regret, passes, settings_text

KINDS = ("calibrated", "simulated")


def dense(knobs) -> list[dict[str, Any]]:
    """Every knob's values and the midpoints between neighbours (a fixed knob keeps its
    value), all combinations."""
    import itertools

    axes = []
    for k in knobs:
        values = list(k.values)
        mids = [m for a, b in zip(values[:-1], values[1:], strict=True)
                if (m := k.between(a, b)) is not None]
        axes.append(sorted(set(values + mids)))
    names = [k.name for k in knobs]
    return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*axes)]


def _key(settings: dict[str, Any]) -> tuple:
    return tuple(sorted((k, float(v)) for k, v in settings.items()))


def evaluate(chooser, name: str, replicas: int) -> dict[str, Any]:
    """One scenario: the chooser's report (timed) and the reference search; returns a row per
    answer (who, settings, regret, its half-width, passes) and the seconds."""
    t0, c0 = time.perf_counter(), time.process_time()
    report = choose(chooser)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    configs, seen = [], set()
    answers = [a for a in report.answers if a.settings is not None]  # no certificate: no settings
    for s in [*(a.settings for a in answers), *dense(chooser.knobs())]:
        if _key(s) not in seen:
            seen.add(_key(s))
            configs.append(dict(s))
    evaluated = {_key(e.settings): e for e in chooser.simulate(configs, replicas, paired=True)}
    sign = -1.0 if chooser.maximise else 1.0
    best = min(evaluated.values(), key=lambda e: sign * e.value if math.isfinite(e.value) else math.inf)
    rows = []
    for a in answers:
        e = evaluated[_key(a.settings)]
        regret, hw, _ = paired_regret(e.values, best.values, maximise=chooser.maximise)
        rows.append({"who": a.variant or a.kind, "kind": a.kind, "settings": a.settings,
                     "value": e.value, "regret": regret, "regret_ci": hw,
                     "passes": passes(regret, hw)})
    return {"name": name, "rows": rows, "best": best.settings, "best_value": best.value,
            "configurations": len(configs), "seconds": seconds, "cpu": cpu,
            "calibrated_seconds": report.seconds["calibrated"]}


def figures(prefix: str, result: dict[str, Any]) -> list[dict]:
    """The scenario's figures: per answer its regret and half-width (where finite) and
    whether it passes; the seconds of the chooser with its defaults (goal <= 10, wall clock)
    and its CPU seconds."""
    out = [figure(f"{prefix}.seconds", result["seconds"], "s", at_most=10),
           figure(f"{prefix}.cpu_seconds", result["cpu"], "s"),
           figure(f"{prefix}.calibrated_seconds", result["calibrated_seconds"], "s")]
    for row in result["rows"]:
        name = f"{prefix}.{row['who']}"
        out.append(figure(f"{name}.passes", float(row["passes"]), "0/1",
                          **({"at_least": 1} if row["kind"] in KINDS else {})))
        if math.isfinite(row["regret"]):
            out.append(figure(f"{name}.regret", row["regret"], "x best - 1"))
            if math.isfinite(row["regret_ci"]):
                out.append(figure(f"{name}.regret_ci", row["regret_ci"], "95% half-width"))
        else:
            out.append(figure(f"{name}.reached", 0.0, "0/1"))
    return out


def summary(prefix: str, results: list[dict[str, Any]]) -> list[dict]:
    """Pass rates over the scenarios: calibrated (goal >= 0.9), simulated (goal 1), and each
    certified variant's (reported)."""
    out = []
    whos = sorted({row["who"] for r in results for row in r["rows"]})
    for who in whos:
        rows = [row for r in results for row in r["rows"] if row["who"] == who]
        rate = sum(row["passes"] for row in rows) / len(rows)
        goal = {"calibrated": {"at_least": 0.9}, "simulated": {"at_least": 1.0}}.get(who, {})
        out.append(figure(f"{prefix}.{who}.pass_rate", rate, f"of {len(rows)} scenarios", **goal))
    return out


def stored(prefix: str) -> list[dict[str, Any]]:
    """The scenarios recorded under ``prefix`` in benchmarks/results.json, as rows of
    :func:`summary` (per scenario: who and whether it passes)."""
    import json

    from benchmarks.results import RESULTS

    scenarios: dict[str, list[dict[str, Any]]] = {}
    for e in json.loads(RESULTS.read_text()):
        rest = e["name"].removeprefix(f"{prefix}.")
        if rest != e["name"] and rest.endswith(".passes"):
            scenario, who = rest.removesuffix(".passes").rsplit(".", 1)
            scenarios.setdefault(scenario, []).append({"who": who, "passes": bool(e["value"])})
    return [{"name": name, "rows": rows} for name, rows in sorted(scenarios.items())]


def table(results: list[dict[str, Any]]) -> str:
    """A markdown table: per scenario and answer, its settings, regret with interval and
    verdict."""
    lines = ["| scenario | answer | settings | regret (95% +-) | passes |", "|---|---|---|---|---|"]
    for r in results:
        for row in r["rows"]:
            reg = ("inf" if not math.isfinite(row["regret"]) else
                   f"{row['regret']:.1%} (+- {row['regret_ci']:.1%})")
            lines.append(f"| {r['name']} | {row['who']} | {settings_text(row['settings'])} | {reg} | "
                         f"{'yes' if row['passes'] else 'no'} |")
    return "\n".join(lines)
