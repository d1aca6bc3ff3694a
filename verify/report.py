"""The report directory of ``fedbound check --all``: ``index.html``, ``summary.json``, PNGs.

Per paper, each result's statement (rendered by matplotlib's mathtext, so no network
and no LaTeX installation), its conditions, errata and status per variant, its verdicts
on the default and random scenarios, and its bound-vs-measurement figure.
``summary.json`` holds the rows without wall times: the same seed gives the same file.
"""

from __future__ import annotations

import html
import itertools
import re
import sys
from collections.abc import Sequence
from pathlib import Path

import matplotlib.pyplot as plt
import sympy as sp
from matplotlib.mathtext import MathTextParser

import bounds

from . import plots
from .scenario import adapter_for, default_scenario, json_text
from .suite import Row, summary

_PARSER = MathTextParser("agg")
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
        _PARSER.parse(f"${tex}$")
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
    try:
        ax = plt.subplots(figsize=(6, 4))[1]
        adapter_for(key).plot(key, default_scenario(key), variant=None, exact=False, ax=ax)
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
    out = ["<table><tr><th>variant</th><th>scenario</th><th>status</th><th>verdict</th>"
           "<th>bound</th><th>measured (95% CI)</th><th>slack</th></tr>"]
    for r in rows:
        v = r.verdict
        cls = "bad" if r.unexpected else r.outcome
        if v is None:
            cells = [html.escape(r.error or ""), "", ""]
        else:
            lo, hi = v["measured_ci"]
            cells = [f"{v['bound']:.4g}", f"{v['measured_mean']:.4g} ({lo:.4g} .. {hi:.4g})",
                     f"{v['slack']:.3g}x"]
        out.append(f"<tr class='{cls}'><td>{r.variant}</td><td>{r.label}</td><td>{r.status}</td>"
                   f"<td>{r.outcome}</td>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    return "\n".join(out + ["</table>"])


def _errata_html(thm: bounds.Theorem) -> str:
    if not thm.errata:
        return ""
    items = "".join(
        f"<li><b>{html.escape(e.where)}</b>: printed <code>{html.escape(e.printed)}</code>, "
        f"corrected <code>{html.escape(e.corrected)}</code> ({html.escape(e.citation)})</li>"
        for e in thm.errata)
    return f"<p>Errata of variant <i>{thm.variant}</i>:</p><ul>{items}</ul>"


_STYLE = """body{font-family:sans-serif;max-width:1100px;margin:auto}
table{border-collapse:collapse;font-size:90%}td,th{border:1px solid #ccc;padding:2px 6px}
tr.holds td{background:#eaf7ea}tr.violated td,tr.bad td{background:#fbe3e3}
tr.inconclusive td,tr.diverged td,tr.error td{background:#fff6d5}img{max-width:100%}"""


def write(rows: Sequence[Row], outdir: str | Path, *, seed: int, battery: int,
          figures: bool = True) -> Path:
    """Write ``index.html``, ``summary.json`` and the PNGs into ``outdir``; return it."""
    out = Path(outdir)
    (out / "figures").mkdir(parents=True, exist_ok=True)
    summ = summary(rows)
    (out / "summary.json").write_text(json_text(
        {"seed": seed, "battery": battery, "summary": summ, "rows": [r.as_dict() for r in rows]}))
    by_key: dict[str, list[Row]] = {}
    for r in rows:
        by_key.setdefault(r.key, []).append(r)
    parts = [f"<html><head><meta charset='utf-8'><title>fedbound report</title>"
             f"<style>{_STYLE}</style></head><body><h1>fedbound verification report</h1>",
             f"<p>{summ['checks']} checks of {summ['results']} results (seed {seed}, "
             f"{battery} random scenarios per result): "
             + ", ".join(f"{n} {k}" for k, n in sorted(summ["outcomes"].items()))
             + f". <b>{len(summ['unexpected'])} unexpected.</b></p>"]
    prefix = None
    for key, krows in by_key.items():
        if key.split(".")[0] != prefix:
            prefix = key.split(".")[0]
            parts.append(f"<h2>{html.escape(_paper_title(prefix))}</h2>")
        thm = bounds.get(key)
        parts.append(f"<h3 id='{key}'>{key}: {html.escape(thm.title)}</h3>"
                     f"<p>{html.escape(thm.citation)}</p>")
        stem = _slug(key)
        for variant in dict.fromkeys(r.variant for r in krows):
            v = bounds.get(key, variant)
            png = render_statement(v, out / "figures" / f"{stem}_{variant}_statement.png")
            parts.append(f"<p>Variant <i>{variant}</i> (status <b>{v.status}</b>)"
                         + (f": {html.escape(v.notes)}" if v.notes else "") + "</p>"
                         f"<img src='figures/{png.name}' alt='statement of {key} [{variant}]'>"
                         + _errata_html(v))
        parts.append(_rows_html(krows))
        if figures:
            fig = _figure(key, out / "figures" / f"{stem}.png")
            parts.append(f"<p><img src='figures/{fig.name}' alt='{key}: bound vs measurement'></p>"
                         if isinstance(fig, Path) else f"<p>No figure: {html.escape(fig)}</p>")
    parts.append("</body></html>")
    (out / "index.html").write_text("\n".join(parts))
    return out



def write_sweep(rows: Sequence[dict], outdir: str | Path) -> Path:
    """A sweep's report: per result and variant, bound and measurement against each swept
    field, slack heat maps over pairs of swept fields, and the table of stored verdicts."""
    if not rows:
        raise ValueError("the sweep database holds no results yet")
    out = Path(outdir)
    (out / "figures").mkdir(parents=True, exist_ok=True)
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        groups.setdefault((r["key"], r["variant"]), []).append(r)
    parts = [f"<html><head><meta charset='utf-8'><title>fedbound sweep</title>"
             f"<style>{_STYLE}</style></head><body><h1>fedbound sweep report</h1>"]
    for (key, variant), grows in groups.items():
        fields = plots.swept_fields(grows)
        stem = _slug(f"{key}_{variant}")
        parts.append(f"<h2>{key} [{variant}]: {len(grows)} scenarios</h2>"
                     f"<p>swept: {', '.join(fields) or '(nothing numeric)'}</p>")
        for f in fields:
            path = out / "figures" / f"{stem}_{_slug(f)}.png"
            plots.save(plots.sweep_against(grows, f), str(path))
            parts.append(f"<img src='figures/{path.name}' alt='{key} against {f}'>")
        for fx, fy in list(itertools.combinations(fields, 2))[:6]:
            path = out / "figures" / f"{stem}_slack_{_slug(fx)}_{_slug(fy)}.png"
            plots.save(plots.slack_heatmap(grows, fx, fy), str(path))
            parts.append(f"<img src='figures/{path.name}' alt='slack over {fx}, {fy}'>")
        head = "".join(f"<th>{html.escape(f)}</th>" for f in fields)
        parts.append(f"<table><tr>{head}<th>verdict</th><th>bound</th><th>measured</th>"
                     "<th>slack</th></tr>")
        for r in grows:
            flat = plots.flatten(r["scenario"])
            v = r["verdict"]
            cells = ([v["verdict"], f"{float(v['bound']):.4g}", f"{float(v['measured_mean']):.4g}",
                      f"{float(v['slack']):.3g}x"] if v else ["error", html.escape(r["error"]), "", ""])
            parts.append(f"<tr class='{cells[0]}'>" + "".join(
                f"<td>{c}</td>" for c in [*(flat[f] for f in fields), *cells]) + "</tr>")
        parts.append("</table>")
    parts.append("</body></html>")
    (out / "index.html").write_text("\n".join(parts))
    return out
