"""What the commands print: verdicts, the table of ``check --all``, searches, rate checks and
choices, as aligned plain text."""

from __future__ import annotations

from collections.abc import Sequence

from fedbound import bounds

from .rows import Row, summary
from .scenario import json_text
from .verdict import Verdict, tightness

#: what a dash in a slack column means
NO_SLACK = "no ratio measured/bound is defined (a zero or diverged measurement)"


def slack_text(bound: float, measured: float) -> str:
    """The slack of a check as shown: 1 / (ratio measured/bound), the ratio of
    :func:`verify.verdict.tightness` (1 = tight, below 1 = violated). For an upper bound it
    is bound / measured; for a lower bound written as an upper bound on a negative quantity
    (Yang et al. 2022, Theorem 1) measured / bound, so 1 is tight there too, never the
    infinite or negative bound / measured. "-" where no ratio is defined (:data:`NO_SLACK`)."""
    ratio = tightness(bound, measured)[0]
    return f"{1 / ratio:.3g}x" if ratio > 0 else "-"



def format_verdict(v: Verdict) -> str:
    """A verdict as aligned lines: result, bound, measured (interval), verdict, slack, ..."""
    lo, hi = v.measured_ci
    where = "" if v.cell is None else f"  (cell {v.cell}, the one closest to violation)"
    rows = [
        ("result", f"{v.key} [{v.variant}]"),
        ("bound", f"{v.bound:.6g}{where}"),
        ("measured", f"{v.measured_mean:.6g}" + ("" if v.mode == "exact" else
                                                 f"  (95% CI {lo:.6g} .. {hi:.6g})")),
        ("verdict", v.verdict.upper() + ("" if v.admissible else
                                          "  (hypotheses fail: " + "; ".join(v.violations) + ")")),
        ("slack", (f"{slack_text(v.bound, v.measured_mean)}  (1 / ratio measured/bound)"
                   if tightness(v.bound, v.measured_mean)[0] > 0 else f"-  ({NO_SLACK})")),
        ("mode", "exact" if v.mode == "exact" else
         f"{v.mode}, {v.replicas} replicas" + (f", {v.diverged} diverged" if v.diverged else "")),
    ]
    step = bounds.get(v.key, v.variant).step
    rows += [(name, f"{v.params[name]:.6g}") for name in ([step] if step else []) + ["zeta"]
             if isinstance(v.params.get(name), (int, float))]
    rows += [("note", n) for n in v.notes]
    rows.append(("time", f"{v.seconds:.2f} s"))
    return "\n".join(f"  {k:<9} {val}" for k, val in rows)


def _table(head: Sequence[str], body: Sequence[Sequence]) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body, strict=True)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    lines = [fmt.format(*head), fmt.format(*("-" * w for w in widths))]
    return "\n".join(lines + [fmt.format(*map(str, row)) for row in body])


def format_suite(rows: Sequence[Row]) -> str:
    """The terminal table of ``check --all`` (key, variant, scenario, status, expected,
    verdict, slack, time) and its summary line."""
    body = []
    for r in rows:
        slack = "-" if r.verdict is None else slack_text(r.verdict["bound"],
                                                         r.verdict["measured_mean"])
        verdict = r.outcome.upper() + (" (!)" if r.unexpected else "")
        body.append((r.key, r.variant, r.label, r.status, r.expect or "-", verdict, slack,
                     f"{r.seconds:.2f}s"))
    table = _table(("key", "variant", "scenario", "status", "expected", "verdict", "slack", "time"),
                   body)
    return table + "\n\n" + summary_line(summary(rows))


def summary_line(summ: dict) -> str:
    """One line per kind of row: defaults, battery, witnesses; then the unexpected count."""
    parts = []
    for kind in ("default", "battery"):
        counts = summ["outcomes"][kind]
        if counts:
            parts.append(f"{sum(counts.values())} {kind} checks: "
                         + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())))
    w = summ["witnesses"]
    if w["replayed"]:
        parts.append(f"{w['replayed']} witnesses replayed: {w['reproduced']} reproduced, "
                     f"{w['stale']} stale")
    broken = sum(summ["outcomes"].get("plugin", {}).values())
    if broken:
        parts.append(f"{broken} plugins or results could not be loaded (error rows)")
    return (f"{summ['results']} results. " + "; ".join(parts)
            + f". {len(summ['unexpected'])} unexpected.")


def _ratio_text(result) -> str:
    lo, hi = result.ratio_ci
    v = result.verdict
    how = ("exact" if v.mode == "exact" else
           f"Monte Carlo, {v.replicas} replicas, 95% CI {lo:.4g} .. {hi:.4g}")
    return f"ratio measured/bound {result.ratio:.6g} ({how})"


def _scalar_params(params: dict) -> str:
    return ", ".join(f"{k}={v:.6g}" for k, v in params.items()
                     if isinstance(v, (int, float)) and not isinstance(v, bool))


def format_search(result) -> str:
    """A few lines saying what a search found (or how much it tried), its ratio
    measured/bound and, for a witness, the command that reproduces it; the region searched
    and each stratum's best, where the search had them."""
    where = f" in the region {result.region}" if result.region else ""
    head = f"{result.key} [{result.variant}, status {result.status}]{where}: "
    strata = [f"stratum {row['field']} = {row['value']:g}: {row['tried']} admissible scenarios, "
              f"best ratio {row['ratio']:.4g}" + (" (VIOLATED)" if row["found"] else "")
              for row in result.strata]
    v = result.verdict
    if result.objective == "violate" and not result.found:
        return "\n".join([head + f"no violation in {result.tried} admissible scenarios; closest: "
                          f"measured {v.measured_mean:.6g} vs bound {v.bound:.6g}, "
                          f"{_ratio_text(result)}", *strata])
    known = " (a known refutation)" if not result.new_violation else " (NEW: not recorded as refuted)"
    if result.objective == "tightest":
        verdict = (f"VIOLATED{known}" if result.found else v.verdict)
        lines = [head + f"tightest {_ratio_text(result)} after {result.tried} admissible "
                 f"scenarios: measured {v.measured_mean:.6g}, bound {v.bound:.6g} ({verdict})",
                 f"parameters there: {_scalar_params(v.params)}"]
    else:
        lines = [head + f"VIOLATED{known} after {result.tried} admissible scenarios ({v.mode}): "
                 f"measured {v.measured_mean:.6g} > bound {v.bound:.6g} (slack {v.slack:.4g})"]
    from .plugins import needed_for

    plugin = "".join(f"--plugin {m} " for m in needed_for(result.key))
    return "\n".join(lines + strata + [
        f"witness (fedbound {plugin}check {result.key} --variant {result.variant}"
        f"{' --exact' if result.exact else ''} --scenario FILE reproduces it):",
        json_text(result.witness)])


def format_rate(results) -> str:
    """Rate checks (``verify.rate``) as text: per swept variable, the fitted exponent with
    its interval, the published one along the sweep and the verdict, then the points."""
    lines = []
    for r in results:
        lo, hi = r.interval
        lines += [f"{r.key} [{r.variant}] over {r.over} ({r.mode}): fitted exponent "
                  f"{r.exponent:+.3f} (95% interval {lo:+.3f} .. {hi:+.3f}), stated "
                  f"{r.stated:+.3f}: {r.verdict.upper()}",
                  f"  rate: {r.citation}" + (f"; regime: {r.regime}" if r.regime else "")]
        if r.note:
            lines.append(f"  sweep: {r.note}")
        moving = {k: v for k, v in r.powers.items() if v}
        lines.append("  along the sweep: " + ", ".join(f"{k} ~ {r.over}^{v:.3g}"
                                                        for k, v in moving.items()))
        body = [(f"{x:.6g}", f"{y:.6g}", "-" if r.mode == "exact" else f"{c[0]:.4g} .. {c[1]:.4g}")
                for x, y, c in zip(r.x, r.lhs, r.lhs_ci, strict=True)]
        lines += ["  " + row for row in _table((r.over, "left-hand side", "95% CI"), body).split("\n")]
        lines.append("")
    return "\n".join(lines).rstrip()


def _cell(x) -> str:
    if isinstance(x, float):
        return f"{x:.4g}"
    return "-" if x is None else str(x)


def _scalars(v: dict) -> bool:
    """A dict of numbers, strings and lists of them (shown inline in a report's inputs)."""
    return all(x is None or isinstance(x, (str, int, float)) or (
        isinstance(x, list) and all(isinstance(y, (int, float)) for y in x)) for x in v.values())


def _flat(v) -> str:
    """An input as text: a dict as (key=value, ...)."""
    if isinstance(v, dict):
        return "(" + ", ".join(f"{k}={_cell(x)}" for k, x in v.items()) + ")"
    return _cell(v)


def settings_text(settings: dict) -> str:
    """Knob settings as text: "Q = 5, eta = 0.1"."""
    return ", ".join(f"{k} = {v:.4g}" if isinstance(v, float) else f"{k} = {v}"
                     for k, v in settings.items())


def format_choice(report) -> str:
    """A :class:`verify.choose.ChoiceReport` as text: the recommendation first (the settings
    to train with, from which answer, why), then the inputs, one row per distinct run
    (answers that run the same configuration share it: certified per variant, calibrated,
    simulated) with the certified bound and the calibrated prediction there, the simulated
    metric with its 95% interval, the paired regret with its interval and whether it
    passes; then what each column means, the notes and the conclusion."""
    rec = report.recommended
    lines = ([f"Recommended: {settings_text(rec['settings'])} (the {rec['answer']} answer): "
              f"{rec['why']}.", ""] if rec else ["Recommended: none (no answer has settings).", ""])
    lines.append(f"{report.chooser}: " + ", ".join(f"{k}={_flat(v)}" for k, v in report.inputs.items()
                                                   if not isinstance(v, dict) or _scalars(v)))
    head = ["answer", *report.knobs, "bound", "predicted"]
    simulated = report.simulated is not None
    if simulated:
        head += [f"simulated {report.metric}", "95% +-", "regret", "95% +-", "passes"]
    merged = {name: group["answers"] for group in report.same for name in group["answers"]}
    body, shown = [], set()
    for a in report.answers:
        if a.who in shown:
            continue
        names = merged.get(a.who, [a.who]) if a.settings is not None else [a.who]
        shown.update(names)
        row_of = [b for b in report.answers if b.who in names]
        best = next((b for b in row_of if b.against), a)  # the best's row: its regret vs the rival
        bound = next((b.predicted for b in row_of if b.kind == "certified"), None)
        predicted = next((b.predicted for b in row_of if b.kind == "calibrated"), None)
        row = [_names(names), *(_cell(None if a.settings is None else a.settings[k])
                                    for k in report.knobs), _cell(bound), _cell(predicted)]
        if simulated:
            row += [_cell(best.value), _cell(best.ci), _percent(best.regret), _percent(best.regret_ci),
                    "-" if best.passes is None else "yes" if best.passes else "no"]
        body.append(row)
    lines += ["", _table(head, body), ""]
    bounded = f", a bound on {report.bounded}" if report.bounded else ""
    lines.append(f"bound: the certified variant's bound at its settings{bounded} (a guarantee; "
                 f"not the {report.metric} simulated); predicted: {report.calibration}.")
    if simulated:
        rivals = sorted({a.against for a in report.answers if a.against})
        lines.append("regret: paired, against the best configuration simulated" + (
            f"; the best's own row against {', '.join(rivals)} (how far ahead it is)" if rivals else ""))
    for group in report.same:
        if len(group["settings"]) > 1:
            lines.append(f"{' and '.join(settings_text(x) for x in group['settings'])} run the same "
                         f"configuration" + (f" ({group['reason']})" if group["reason"] else "")
                         + f": shown once ({', '.join(group['answers'])})")
    for a in report.answers:
        if a.note and (a.kind == "certified" or a.settings is None):
            lines.append(f"{a.who}: {a.note}")
        for e in a.edge:
            lines.append(f"{a.who}: flagged: {e}")
    lines += ["", report.message]
    return "\n".join(lines)


def _names(whos: Sequence[str]) -> str:
    """Answers that share a row: "certified proof, tight = calibrated = simulated"."""
    variants = [w.removeprefix("certified ") for w in whos if w.startswith("certified ")]
    rest = [w for w in whos if not w.startswith("certified ")]
    return " = ".join(([f"certified {', '.join(variants)}"] if variants else []) + rest)


def _percent(x) -> str:
    if x is None:
        return "-"
    return f"{x:.1%}" if abs(x) < 1e6 else ("inf" if x > 0 else "-inf")


