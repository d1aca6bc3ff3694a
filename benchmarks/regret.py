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
from fedbound.verify.api import TOLERANCE, choose, paired_regret, passes, settings_text

KINDS = ("calibrated", "simulated")


def dense(knobs, searched: dict[str, list[float]] | None = None, *, beyond: int = 2,
          midpoints: bool = True) -> list[dict[str, Any]]:
    """Every knob's values and the midpoints between neighbours (a fixed knob keeps its
    value), and, for a knob the search may extend, ``beyond`` more values past each end of
    the range the chooser searched (``searched``: its report's ``search.searched``; factors
    of 2 on the log scale): the reference reaches steps beyond any theorem's range. All
    combinations."""
    import itertools

    axes = []
    for k in knobs:
        values = set(k.values)
        if searched and k.name in searched and k.extend and not k.fixed:
            low, high = searched[k.name]
            values |= {low, high}
            for up, end in ((False, low), (True, high)):
                v = end
                for _ in range(beyond):
                    v = k.beyond(v, up)
                    if v is None:
                        break
                    values.add(v)
        values = sorted(values)
        mids = [m for a, b in zip(values[:-1], values[1:], strict=True)
                if midpoints and (m := k.between(a, b)) is not None]
        axes.append(sorted(set(values + mids)))
    names = [k.name for k in knobs]
    return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*axes)]


def _key(settings: dict[str, Any]) -> tuple:
    return tuple(sorted((k, float(f"{float(v):.12g}")) for k, v in settings.items()))


def within_tolerance(regret: float, hw: float) -> bool:
    """Issue 38's criterion for the recommended answer: regret at most 10%, or not
    distinguishable from 10% at 95% (the lower end of its interval at most 10%)."""
    return bool(regret <= TOLERANCE or regret - hw <= TOLERANCE)


def evaluate(chooser, name: str, replicas: int, report: dict | None = None, *, beyond: int = 2,
             midpoints: bool = True) -> dict[str, Any]:
    """One scenario: the chooser's report (``report``: its JSON, as ``fedbound choose --json``
    printed it; None: run here, timed) and the reference search, a dense grid
    (:func:`dense`, beyond the range the chooser searched) with every answer's and the
    recommended settings, on ``replicas`` common seeds; returns a row per answer (who,
    settings, regret, its half-width, passes) and the recommended one's, and the seconds."""
    seconds = cpu = None
    if report is None:
        t0, c0 = time.perf_counter(), time.process_time()
        rep = choose(chooser)
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
        report = rep.as_dict()
    answers = [(a.get("variant") or kind, kind, a["settings"]) for kind in ("certified", "calibrated",
                                                                             "simulated")
               for a in (report[kind] if kind == "certified" else [report[kind]])
               if a is not None and a["settings"] is not None]
    rec = report.get("recommended")
    if rec is not None:
        answers.append(("recommended", "recommended", rec["settings"]))
    configs, seen = [], set()
    for s in [*(x for _, _, x in answers),
              *dense(chooser.knobs(), report["search"].get("searched"), beyond=beyond,
                     midpoints=midpoints)]:
        s = dict(chooser.canonical(dict(s))[0])
        if _key(s) not in seen and chooser.admits(s):
            seen.add(_key(s))
            configs.append(s)
    evaluated = {_key(e.settings): e for e in chooser.simulate(configs, replicas, paired=True)}
    sign = -1.0 if chooser.maximise else 1.0
    best = min(evaluated.values(), key=lambda e: sign * e.value if math.isfinite(e.value) else math.inf)
    rows = []
    for who, kind, settings in answers:
        e = evaluated[_key(chooser.canonical(dict(settings))[0])]
        regret, hw, _ = paired_regret(e.values, best.values, maximise=chooser.maximise)
        rows.append({"who": who, "kind": kind, "settings": settings, "value": e.value,
                     "regret": regret, "regret_ci": hw, "passes": passes(regret, hw),
                     "within": within_tolerance(regret, hw)})
    edge = [] if rec is None else (report["simulated"] or {}).get("edge", []) \
        if rec["answer"] == "simulated" else (report["calibrated"] or {}).get("edge", [])
    return {"name": name, "rows": rows, "best": best.settings, "best_value": best.value,
            "configurations": len(configs), "seconds": seconds, "cpu": cpu,
            "calibrated_seconds": report["seconds"]["calibrated"], "recommended_edge": edge,
            "unflagged_edge": _unflagged_edge(chooser, report)}


def _unflagged_edge(chooser, report: dict) -> bool:
    """Whether the recommended settings sit at an end of a range the chooser searched (a knob
    of ``search.searched``), not a limit of the knob, with no flag saying so: the search
    neither went beyond nor said that the best may lie there."""
    rec, searched = report.get("recommended"), report["search"].get("searched", {})
    if rec is None or rec["answer"] != "simulated" or (report["simulated"] or {}).get("edge"):
        return False
    for k in chooser.knobs():
        if k.name not in searched:
            continue
        low, high = searched[k.name]
        v = rec["settings"][k.name]
        for up, end in ((False, low), (True, high)):
            out = k.beyond(v, up)
            if v == end and out is not None and chooser.admits({**rec["settings"], k.name: out}):
                return True
    return False


def timing_figures(prefix: str, seconds: float, cpu: float, rss_mb: float | None = None,
                   load: float | None = None, seconds_goal: float = 10) -> list[dict]:
    """The time of a chooser run with its defaults: wall-clock seconds (goal ``seconds_goal``),
    CPU seconds, peak memory (goal < 1 GB) and the machine's 1-minute load, where measured."""
    out = [figure(f"{prefix}.seconds", seconds, "s", at_most=seconds_goal),
           figure(f"{prefix}.cpu_seconds", cpu, "s")]
    if rss_mb is not None:
        out.append(figure(f"{prefix}.peak_memory", rss_mb, "MB", at_most=1024))
    if load is not None:
        out.append(figure(f"{prefix}.load", load, "1-min load, 2 cores"))
    return out


def figures(prefix: str, result: dict[str, Any], seconds_goal: float = 10) -> list[dict]:
    """The scenario's figures: per answer its regret and half-width (where finite) and
    whether it passes; the recommended answer's: within 10% (issue 38's criterion, goal 1)
    and whether it sits on an unflagged edge of the search (goal 0); the seconds of the
    chooser with its defaults (goal ``seconds_goal``, wall clock) and its CPU seconds, its
    peak memory (goal < 1 GB) and the machine's load where the scenario measured them."""
    out = [*timing_figures(prefix, result["seconds"], result["cpu"], result.get("rss_mb"),
                           result.get("load"), seconds_goal),
           figure(f"{prefix}.calibrated_seconds", result["calibrated_seconds"], "s")]
    out.append(figure(f"{prefix}.unflagged_edge", float(result["unflagged_edge"]), "0/1", at_most=0))
    for row in result["rows"]:
        name = f"{prefix}.{row['who']}"
        if row["kind"] == "recommended":
            out.append(figure(f"{name}.within", float(row["within"]), "0/1", at_least=1))
            out += [figure(f"{name}.setting.{knob}", float(v), "the setting")  # what was judged
                    for knob, v in sorted(row["settings"].items())]
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
    """Pass rates over the scenarios: the recommended answer within 10% (goal >= 0.9) and on
    no unflagged edge (goal 0 scenarios), calibrated (reported), simulated (goal 1), and each
    certified variant's (reported)."""
    out = []
    whos = sorted({row["who"] for r in results for row in r["rows"]})
    for who in whos:
        rows = [row for r in results for row in r["rows"] if row["who"] == who]
        rate = sum(row["passes"] for row in rows) / len(rows)
        goal = {"simulated": {"at_least": 1.0}}.get(who, {})
        out.append(figure(f"{prefix}.{who}.pass_rate", rate, f"of {len(rows)} scenarios", **goal))
    rec = [row for r in results for row in r["rows"] if row["kind"] == "recommended"]
    if rec:
        out.append(figure(f"{prefix}.recommended.within_rate", sum(r["within"] for r in rec) / len(rec),
                          f"of {len(rec)} scenarios", at_least=0.9))
    if results and all("unflagged_edge" in r for r in results):
        out.append(figure(f"{prefix}.unflagged_edges", sum(r["unflagged_edge"] for r in results),
                          f"of {len(results)} scenarios", at_most=0))
    return out


def judged_settings(prefix: str) -> dict[str, float]:
    """The recommended settings whose regret is recorded under ``prefix`` (a scenario's) in
    benchmarks/results.json: {knob: value}, empty where none is recorded."""
    import json

    from benchmarks.results import RESULTS

    head = f"{prefix}.recommended.setting."
    return {e["name"].removeprefix(head): e["value"] for e in json.loads(RESULTS.read_text())
            if e["name"].startswith(head)}


def same_settings(prefix: str, settings: dict[str, Any]) -> list[dict]:
    """For a re-timed scenario: whether the chooser still recommends the settings its
    recorded regret was measured at, to 12 significant digits as the reference keys them
    (the report and benchmarks/results.json may differ in a value's last bits; goal 1; the
    times of other settings say nothing of that regret: run the scenario again in full).
    None recorded: no figure, and a line saying so."""
    judged = judged_settings(prefix)
    if not judged:
        print(f"{prefix}: no recommended settings recorded with its regret; run it in full to "
              "record them", flush=True)
        return []
    same = _key(settings) == _key(judged)  # as the reference keys them: 12 significant digits
    if not same:
        print(f"{prefix}: recommends {settings}, its regret was measured at {judged}: run it "
              "in full", flush=True)
    return [figure(f"{prefix}.recommended.same_settings", float(same), "0/1", at_least=1)]


def stored(prefix: str) -> list[dict[str, Any]]:
    """The scenarios recorded under ``prefix`` in benchmarks/results.json, as rows of
    :func:`summary` (per scenario: who and whether it passes)."""
    import json

    from benchmarks.results import RESULTS

    scenarios: dict[str, list[dict[str, Any]]] = {}
    entries = {e["name"]: e for e in json.loads(RESULTS.read_text())}
    for name, e in entries.items():
        rest = name.removeprefix(f"{prefix}.")
        if rest != name and rest.endswith(".passes"):
            scenario, who = rest.removesuffix(".passes").rsplit(".", 1)
            within = entries.get(f"{prefix}.{scenario}.{who}.within")
            scenarios.setdefault(scenario, []).append(
                {"who": who, "kind": who if who in ("recommended", *KINDS) else "certified",
                 "passes": bool(e["value"]), "within": bool(within and within["value"])})
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
