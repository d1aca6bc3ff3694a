"""What fedbound shows a reader: plain-text renderings for the terminal and the report
directory of ``fedbound check --all`` (``index.html``, ``summary.json``, PNGs).

Text: :func:`format_verdict`, :func:`format_suite`, :func:`format_search`,
:func:`format_choice`. Report: per paper, each result's statement (rendered by
matplotlib's mathtext, so no network and no LaTeX installation), its conditions, errata
and status per variant, its verdicts on the default and random scenarios and the replays
of its stored witnesses, and its bound-vs-measurement figure. ``summary.json`` holds the
rows without wall times: the same seed gives the same file. matplotlib is imported only
where a figure or a statement is drawn.
"""

from __future__ import annotations

import html
import itertools
import re
import sys
from collections.abc import Sequence
from functools import cache
from pathlib import Path

import sympy as sp

import bounds

from .adapter import adapter_for, default_scenario
from .output import ReportDir
from .scenario import json_text
from .suite import Row, summary
from .verdict import Verdict

# ---------------------------------------------------------------------- text


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
        ("slack", f"{v.slack:.3g}x  (bound / measured)"),
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
        slack = "-" if r.verdict is None else f"{r.verdict['slack']:.3g}x"
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
    measured/bound and, for a witness, the command that reproduces it."""
    head = f"{result.key} [{result.variant}, status {result.status}]: "
    v = result.verdict
    if result.objective == "violate" and not result.found:
        return head + (f"no violation in {result.tried} admissible scenarios; closest: measured "
                       f"{v.measured_mean:.6g} vs bound {v.bound:.6g}, {_ratio_text(result)}")
    known = " (a known refutation)" if not result.new_violation else " (NEW: not recorded as refuted)"
    if result.objective == "tightest":
        verdict = (f"VIOLATED{known}" if result.found else v.verdict)
        lines = [head + f"tightest {_ratio_text(result)} after {result.tried} admissible "
                 f"scenarios: measured {v.measured_mean:.6g}, bound {v.bound:.6g} ({verdict})",
                 f"parameters there: {_scalar_params(v.params)}"]
    else:
        lines = [head + f"VIOLATED{known} after {result.tried} admissible scenarios ({v.mode}): "
                 f"measured {v.measured_mean:.6g} > bound {v.bound:.6g} (slack {v.slack:.4g})"]
    return "\n".join(lines + [
        f"witness (fedbound check {result.key} --variant {result.variant}"
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


def format_choice(report) -> str:
    """A :class:`verify.choose.ChoiceReport` as text: the inputs, each variant's choice with
    the simulation there, the simulated table, and the one-line conclusion."""
    lines = [f"{report.chooser}: " + ", ".join(f"{k}={_cell(v)}" for k, v in report.inputs.items()
                                               if not isinstance(v, dict))]
    if report.bound:
        head = ["variant", *report.knobs, "bound objective"]
        if report.simulation is not None:
            head += [f"simulated ({report.metric})", "95% +-", "vs best"]
        body = []
        for c in report.bound:
            row = [c.variant, *(_cell(c.settings[k]) for k in report.knobs), _cell(c.value)]
            if c.simulated is not None:
                row += [_cell(c.simulated.loss), _cell(c.simulated.ci),
                        "-" if c.relative is None else f"{c.relative:.3g}x"]
            body.append(row)
        lines += ["", "The bound's choice, per variant:", _table(head, body)]
    if report.simulation is not None:
        body = [[*(_cell(o.settings[k]) for k in report.knobs), _cell(o.loss), _cell(o.ci)]
                for o in report.simulation]
        lines += ["", f"Simulation ({report.metric}):",
                  _table([*report.knobs, report.metric, "95% +-"], body)]
    lines += ["", report.message]
    return "\n".join(lines)


# ---------------------------------------------------------------------- HTML report


@cache
def _parser():
    from matplotlib.mathtext import MathTextParser

    return MathTextParser("agg")
#: LaTeX that sympy or the theorem modules write, in the subset mathtext reads
_MATHTEXT = [
    (re.compile(r"\\[Bb]igg?(?=[\[\]()|])"), ""),
    (re.compile(r"\\le(?![a-zA-Z])"), r"\\leq"),
    (re.compile(r"\\ge(?![a-zA-Z])"), r"\\geq"),
    (re.compile(r"\\text\{"), r"\\mathrm{"),
    (re.compile(r"\\displaystyle"), ""),
]


def mathtext(tex: str) -> str | None:
    """``tex`` rewritten for matplotlib's mathtext, or None when mathtext cannot read it."""
    for pattern, repl in _MATHTEXT:
        tex = pattern.sub(repl, tex)
    try:
        _parser().parse(f"${tex}$")
    except ValueError:
        return None
    return tex


def statement_lines(thm: bounds.Theorem) -> list[str]:
    """The statement, one line per piece (the left-hand side, each term, each condition),
    each a mathtext string ``$...$``, or sympy's plain text where mathtext cannot read it."""
    def show(tex: str, plain: str) -> str:
        math = mathtext(tex)
        return f"${math}$" if math is not None else plain

    subs = {g.symbol: g.display for g in thm.aggregates}
    lines = [show(thm.lhs + r" \leq", thm.lhs + " <=")]
    for i, (name, e) in enumerate(thm.term_exprs.items()):
        e, plus = e.subs(subs), "+ " if i else ""
        label = r"\qquad\mathrm{[" + name.replace(" ", r"\ ").replace("_", r"\_") + "]}"
        lines.append(show(r"\quad " + plus + sp.latex(e) + label, f"    {plus}{e}    [{name}]"))
    for c in thm.conditions:
        tail = r"\ \forall i" if c.per_worker else ""
        lines.append(show(r"\mathrm{if}\quad " + sp.latex(c.relation) + tail,
                          f"if  {c.relation}" + (" for all i" if c.per_worker else "")))
    return lines


def render_statement(thm: bounds.Theorem, path: Path) -> Path:
    """The statement as a PNG (one line per piece)."""
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(10, 1), dpi=100)
    renderer = fig.canvas.get_renderer()
    texts = [fig.text(0.01, 0, line, fontsize=12, va="bottom", parse_math=line.startswith("$"))
             for line in statement_lines(thm)]
    heights = [t.get_window_extent(renderer).height + 8 for t in texts]  # pixels, with a gap
    fig.set_size_inches(10, sum(heights) / fig.dpi)
    top = 1.0
    for t, h in zip(texts, heights, strict=True):  # stacked by each line's own height
        top -= h / sum(heights)
        t.set_y(top)
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return path


def _figure(key: str, path: Path) -> Path | str:
    """The adapter's bound-vs-measurement figure on the default scenario, or why not."""
    import matplotlib.pyplot as plt

    try:
        ax = plt.subplots(figsize=(6, 4))[1]
        adapter_for(key).plot(default_scenario(key), ax=ax)
        ax.figure.tight_layout()
        ax.figure.savefig(path, dpi=100)
        return path
    except Exception as e:  # noqa: BLE001 - the report says why a figure is missing
        return f"{type(e).__name__}: {e}"
    finally:
        plt.close("all")


def _slug(text: str) -> str:
    """A file-name part: runs of anything but letters and digits become one underscore."""
    return re.sub(r"[^A-Za-z0-9]+", "_", text)


def _paper_title(prefix: str) -> str:
    mod = sys.modules.get(f"bounds.{prefix}")
    doc = (mod.__doc__ or prefix).strip().splitlines()[0] if mod else prefix
    return doc


def _rows_html(rows: Sequence[Row]) -> str:
    out = ["<table><tr><th>variant</th><th>scenario</th><th>status</th><th>expected</th>"
           "<th>verdict</th><th>bound</th><th>measured (95% CI)</th><th>slack</th></tr>"]
    for r in rows:
        v = r.verdict
        cls = "bad" if r.unexpected else r.outcome
        if v is None:
            cells = [html.escape(r.error or ""), "", ""]
        else:
            lo, hi = v["measured_ci"]
            cells = [f"{v['bound']:.4g}", f"{v['measured_mean']:.4g} ({lo:.4g} .. {hi:.4g})",
                     f"{v['slack']:.3g}x"]
        out.append(f"<tr class='{cls}'><td>{html.escape(r.variant)}</td><td>{html.escape(r.label)}"
                   f"</td><td>{r.status}</td><td>{r.expect or '-'}</td><td>{r.outcome}</td>"
                   + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    return "\n".join(out + ["</table>"])


def _errata_html(thm: bounds.Theorem) -> str:
    if not thm.errata:
        return ""
    items = "".join(
        f"<li><b>{html.escape(e.where)}</b>: printed <code>{html.escape(e.printed)}</code>, "
        f"corrected <code>{html.escape(e.corrected)}</code> ({html.escape(e.citation)})</li>"
        for e in thm.errata)
    return f"<p>Errata of variant <i>{thm.variant}</i>:</p><ul>{items}</ul>"


def _tightness_text(key: str) -> str:
    """One sentence per tracked variant: the slack at the default scenario and the tightest
    ratio known (shipped in ``verify/tightness.json``), or "" for a result not in that table."""
    from .tightness import by_variant, row

    return " ".join(_variant_tightness_text(t) for t in by_variant(row(key)).values())


def _variant_tightness_text(t: dict) -> str:
    """The sentence of one variant's tightness entry."""
    d = t["default"]
    text = (f"Tightness ({t['variant']}): slack {d['slack']:.3g}x at the default scenario "
            f"({d['mode']}, ratio measured/bound {d['ratio']:.3g})")
    if t["tightest"] is not None:
        where = t["tightest"]["witness"] or "the default scenario"
        text += (f"; tightest ratio known {t['tightest']['ratio']:.4g} ({where}, "
                 f"{t['tightest']['mode']})")
    if t["unbounded"]:
        text += f"; unbounded along its refutation family ({t['growth']})"
    return text + "."


def rate_text(rate) -> str:
    """A published rate (``bounds.Rate``) as O(.) + O(.) ... with its citation."""
    def term(t):
        return " ".join((f"({v})" if " " in v else v) + (f"^{e:g}" if e != 1 else "")
                        for v, e in t.items())
    return " + ".join(f"O({term(t)})" for t in rate.terms) + f" ({rate.citation})"


def _tightness_table_html(keys) -> str:
    """Every result's status, default slack and tightest ratio, in one table."""
    from .tightness import by_variant, row

    out = ["<h2>Tightness</h2><p>Slack = bound/measured on the default scenario; tightest = "
           "the largest ratio measured/bound known (1 = tight, above 1 = violated), from the "
           "stored witnesses, which this run replays.</p><table><tr><th>result</th>"
           "<th>status</th><th>default slack</th><th>tightest ratio</th><th>unbounded</th></tr>"]
    for key in keys:
        for t in by_variant(row(key)).values():
            best = "-" if t["tightest"] is None else f"{t['tightest']['ratio']:.4g}"
            name = key if t["variant"] == bounds.get(key).variant else f"{key} [{t['variant']}]"
            out.append(f"<tr><td><a href='#{html.escape(key)}'>{html.escape(name)}</a></td>"
                       f"<td>{html.escape(t['status'])}</td><td>{t['default']['slack']:.3g}x</td>"
                       f"<td>{best}</td><td>{html.escape(t['growth'] or '-')}</td></tr>")
    return "\n".join(out + ["</table>"])


_STYLE = """body{font-family:sans-serif;max-width:1100px;margin:auto}
table{border-collapse:collapse;font-size:90%}td,th{border:1px solid #ccc;padding:2px 6px}
tr.holds td{background:#eaf7ea}tr.violated td,tr.bad td{background:#fbe3e3}
tr.inconclusive td,tr.diverged td,tr.error td{background:#fff6d5}img{max-width:100%}"""


def write_summary(rows: Sequence[Row], outdir: str | Path, *, seed: int, battery: int,
                  interrupted: bool = False, total: int | None = None,
                  force: bool = False) -> ReportDir:
    """Write ``summary.json`` (the results: seed, battery, summary, rows, each result's
    tightness) into the report
    directory ``outdir`` first, before anything is rendered, so that a rendering failure or
    an interruption loses no result. ``interrupted``: the run stopped after ``rows`` of
    ``total`` checks (the file says so). Returns the open report directory."""
    from .tightness import row

    out = ReportDir(outdir, kind="check-all", force=force).open()
    data = {"seed": seed, "battery": battery, "summary": summary(rows),
            "rows": [r.as_dict() for r in rows],
            "tightness": {key: row(key) for key in dict.fromkeys(r.key for r in rows)}}
    if interrupted:
        data.update(interrupted=True, finished=len(rows), total=total)
    out.write_text("summary.json", json_text(data))
    return out


def write(rows: Sequence[Row], outdir: str | Path, *, seed: int, battery: int,
          figures: bool = True, force: bool = False) -> Path:
    """Write ``summary.json`` (first), the PNGs and ``index.html`` into ``outdir`` (a new or
    empty directory or a previous fedbound report, else ``force``; files are renamed into
    place, links are not followed: ``verify.output``); return it."""
    report = write_summary(rows, outdir, seed=seed, battery=battery, force=force)
    summ = summary(rows)
    by_key: dict[str, list[Row]] = {}
    for r in rows:
        by_key.setdefault(r.key, []).append(r)
    parts = [f"<html><head><meta charset='utf-8'><title>fedbound report</title>"
             f"<style>{_STYLE}</style></head><body><h1>fedbound verification report</h1>",
             f"<p>{summ['checks']} checks (seed {seed}, {battery} random scenarios per result). "
             f"{html.escape(summary_line(summ))}</p>", _tightness_table_html(by_key)]
    prefix = None
    for key, krows in by_key.items():
        if key.split(".")[0] != prefix:
            prefix = key.split(".")[0]
            parts.append(f"<h2>{html.escape(_paper_title(prefix))}</h2>")
        thm = bounds.get(key)
        parts.append(f"<h3 id='{html.escape(key)}'>{html.escape(key)}: {html.escape(thm.title)}</h3>"
                     f"<p>{html.escape(thm.citation)}</p>")
        if _tightness_text(key):
            parts.append(f"<p>{html.escape(_tightness_text(key))}</p>")
        stem = _slug(key)
        for variant in dict.fromkeys(r.variant for r in krows):
            v = bounds.get(key, variant)
            png = f"{stem}_{variant}_statement.png"
            with report.target(f"figures/{png}") as tmp:
                render_statement(v, tmp)
            parts.append(f"<p>Variant <i>{variant}</i> (status <b>{v.status}</b>)"
                         + (f": {html.escape(v.notes)}" if v.notes else "")
                         + (f"<br>Published rate: {html.escape(rate_text(v.rate))}" if v.rate else "")
                         + "</p>"
                         f"<img src='figures/{png}' alt='statement of {key} [{variant}]'>"
                         + _errata_html(v))
        parts.append(_rows_html(krows))
        if figures:
            with report.target(f"figures/{stem}.png") as tmp:
                fig = _figure(key, tmp)
            alt = html.escape(f"{key}: bound vs measurement")
            parts.append(f"<p><img src='figures/{stem}.png' alt='{alt}'></p>"
                         if isinstance(fig, Path) else f"<p>No figure: {html.escape(fig)}</p>")
    parts.append("</body></html>")
    report.write_text("index.html", "\n".join(parts))
    return report.finish()



def write_sweep(rows: Sequence[dict], outdir: str | Path, *, force: bool = False) -> Path:
    """A sweep's report: per result and variant, bound and measurement against each swept
    field, slack heat maps over pairs of swept fields, and the table of stored verdicts
    (written safely into ``outdir`` as :func:`write` does)."""
    from . import plots

    if not rows:
        raise ValueError("the sweep database holds no results yet")
    report = ReportDir(outdir, kind="sweep", force=force).open()
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        groups.setdefault((r["key"], r["variant"]), []).append(r)
    parts = [f"<html><head><meta charset='utf-8'><title>fedbound sweep</title>"
             f"<style>{_STYLE}</style></head><body><h1>fedbound sweep report</h1>"]
    for (key, variant), grows in groups.items():
        fields = plots.swept_fields(grows)
        stem = _slug(f"{key}_{variant}")
        parts.append(f"<h2>{html.escape(key)} [{html.escape(variant)}]: {len(grows)} scenarios</h2>"
                     f"<p>swept: {html.escape(', '.join(fields)) or '(nothing numeric)'}</p>")
        for f in fields:
            name = f"{stem}_{_slug(f)}.png"
            with report.target(f"figures/{name}") as tmp:
                plots.save(plots.sweep_against(grows, f), str(tmp))
            parts.append(f"<img src='figures/{name}' alt='{html.escape(key)} against {html.escape(f)}'>")
        for fx, fy in list(itertools.combinations(fields, 2))[:6]:
            name = f"{stem}_slack_{_slug(fx)}_{_slug(fy)}.png"
            with report.target(f"figures/{name}") as tmp:
                plots.save(plots.slack_heatmap(grows, fx, fy), str(tmp))
            alt = html.escape(f"slack over {fx}, {fy}")
            parts.append(f"<img src='figures/{name}' alt='{alt}'>")
        head = "".join(f"<th>{html.escape(f)}</th>" for f in fields)
        parts.append(f"<table><tr>{head}<th>verdict</th><th>bound</th><th>measured</th>"
                     "<th>slack</th></tr>")
        for r in grows:
            flat = plots.flatten(r["scenario"])
            v = r["verdict"]
            cells = ([v["verdict"], f"{float(v['bound']):.4g}", f"{float(v['measured_mean']):.4g}",
                      f"{float(v['slack']):.3g}x"] if v else ["error", r["error"], "", ""])
            parts.append(f"<tr class='{html.escape(cells[0])}'>" + "".join(
                f"<td>{html.escape(str(c))}</td>" for c in [*(flat[f] for f in fields), *cells]) + "</tr>")
        parts.append("</table>")
    parts.append("</body></html>")
    report.write_text("index.html", "\n".join(parts))
    return report.finish()
