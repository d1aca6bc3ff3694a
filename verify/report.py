"""What fedbound shows a reader: plain-text renderings for the terminal and the report
directories of ``fedbound check --all`` and ``fedbound report``.

Text: :func:`format_verdict`, :func:`format_suite`, :func:`format_search`,
:func:`format_choice`. Report (:func:`write`): ``summary.json`` first (the rows without
wall times: the same seed gives the same file), then HTML pages from the Jinja2 templates
of ``verify/templates/`` (autoescaped): ``index.html``, a dashboard of every result and
variant; ``results/<key>.html``, one page per result (statement, conditions and errata as
MathML with their LaTeX, derived parameters, the default check, the battery, the witness
replays, each with the command that reproduces it, and the figures); ``references.html``,
the bibliography that every citation links to. No JavaScript, no external requests.
Figures are drawn by the checks themselves, each from its own measurement
(``verify.suite.tasks(..., figures=True)``; in the pool of the checks with ``--jobs``);
without them matplotlib is never imported.
"""

from __future__ import annotations

import itertools
import re
import shutil
import sys
import weakref
from collections import Counter
from collections.abc import Sequence
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

import sympy as sp
from markupsafe import Markup

from fedbound import bounds

from . import mathml
from .html import (  # noqa: F401 - the report's helpers, shared with the reproduction report
    STATUS_LEGEND,
    cite,
    derivations,
    environment,
    prose,
    render,
    term_prose,
)
from .output import ReportDir
from .rows import Row, summary
from .scenario import json_text
from .text import NO_SLACK, slack_text, summary_line

# ---------------------------------------------------------------------- HTML report
#
# Pages come from the Jinja2 templates in verify/templates/ with autoescaping on: every
# string from a scenario, a sweep database or a plugin is escaped by the template engine.
# Only MathML (built by verify.mathml, whose text is escaped where it is made) and the
# filters below (which escape first) are marked safe.

#: the pages of a check-all report, in the header of each
PAGES = (("index.html", "Results"), ("references.html", "References"))


@dataclass(frozen=True)
class Formula:
    """A formula of the report: its MathML (a ``<math>`` element) and its LaTeX source."""

    mathml: Markup
    latex: str


def formula(expr: sp.Basic) -> Formula:
    """``expr`` as a displayed MathML formula with its LaTeX."""
    return Formula(Markup(mathml.block(mathml.of_expr(expr))), sp.latex(expr))


def latex_formula(tex: str, tail: str = "", tail_tex: str = "") -> Formula:
    """LaTeX (a theorem's left-hand side) as a displayed MathML formula; ``tail`` MathML
    elements (and their LaTeX ``tail_tex``) appended."""
    return Formula(Markup(mathml.block(mathml.of_latex(tex) + tail)), tex + tail_tex)



def statement(thm: bounds.Theorem) -> dict:
    """The statement of ``thm`` for the page: the left-hand side followed by "<=", then each
    named term (aggregates written out, as ``thm.aggregates`` display them)."""
    subs = {g.symbol: g.display for g in thm.aggregates}
    terms = []
    for i, (name, e) in enumerate(thm.term_exprs.items()):
        e = e.subs(subs)
        plus = "<mo>+</mo>" if i else ""
        terms.append({"name": term_prose(name), "formula": Formula(
            Markup(mathml.block(plus + mathml.of_expr(e))), ("+ " if i else "") + sp.latex(e))})
    return {"lhs": latex_formula(thm.lhs, "<mo>\u2264</mo>", r" \le"), "terms": terms}


#: :func:`variant_context` by theorem object (a Theorem is frozen but unhashable: keyed by
#: its id, the entry dropped when the object is collected, so that the id is not reused)
_CONTEXTS: dict[int, dict] = {}


def variant_context(thm: bounds.Theorem) -> dict:
    """What a result page shows of one variant, built once per theorem object (its MathML
    takes tens of milliseconds)."""
    if id(thm) not in _CONTEXTS:
        _CONTEXTS[id(thm)] = {
            "variant": thm.variant, "status": thm.status, "notes": thm.notes,
            "rate": rate_text(thm.rate) if thm.rate else "", **statement(thm),
            "conditions": [{"name": c.name, "formula": formula(c.relation),
                            "per_worker": c.per_worker, "citation": c.citation}
                           for c in thm.conditions],
            "errata": thm.errata}
        weakref.finalize(thm, _CONTEXTS.pop, id(thm), None)
    return _CONTEXTS[id(thm)]


def prepare(keys: Sequence[str]) -> None:
    """Build what the pages of the results ``keys`` show that no check changes: every
    variant's theorem, its statement and its conditions (:func:`variant_context`).
    ``check --all``'s driver does it while its workers start, so that :func:`write`, after
    the checks, renders only their rows. A variant that fails to build is left to
    :func:`write`, which meets the same error."""
    for key in keys:
        for variant in bounds.variants(key):
            with suppress(Exception):
                variant_context(bounds.get(key, variant))


def _number(x, spec: str = ".4g") -> str:
    return x if isinstance(x, str) else format(x, spec)


def command(r: Row, *, seed: int, battery: int) -> str:
    """The command that reproduces row ``r``."""
    if r.kind == "default":
        return f"fedbound check {r.key} --variant {r.variant}"
    if r.kind == "battery":
        return (f"fedbound check --all --only {r.key} --seed {seed} --battery {battery} "
                f"--no-witnesses  (row {r.label})")
    exact = " --exact" if r.verdict and r.verdict.get("mode") == "exact" else ""
    name = r.label.removeprefix("witness ").strip() or "WITNESS.json"
    return f"fedbound check {r.key} --variant {r.variant}{exact} --scenario {name}"


def row_context(r: Row, *, seed: int, battery: int) -> dict:
    v = r.verdict
    cells = {}
    if v is not None:
        lo, hi = v["measured_ci"]
        cells = {"bound": _number(v["bound"]),
                 "measured": f"{_number(v['measured_mean'])} ({_number(lo)} .. {_number(hi)})",
                 "slack": slack_text(v["bound"], v["measured_mean"])}
    return {"kind": r.kind, "variant": r.variant, "label": r.label, "status": r.status,
            "expect": r.expect or "-", "outcome": r.outcome, "unexpected": r.unexpected,
            "css": "bad" if r.unexpected else r.outcome, "error": r.error, **cells,
            "command": command(r, seed=seed, battery=battery)}


def _parameters(rows: Sequence[Row]) -> list[tuple[str, str]]:
    """The derived parameters of the default check of the default variant (vectors
    shortened)."""
    r = next((r for r in rows if r.kind == "default" and r.verdict is not None
              and r.variant == bounds.get(r.key).variant), None)
    if r is None:
        return []
    def show(x):
        if isinstance(x, bool) or not isinstance(x, (int, float, list)):
            return str(x)
        if isinstance(x, list):
            flat = list(_flat(x))
            body = ", ".join(show(y) for y in flat[:8])
            return f"[{body}{', ...' if len(flat) > 8 else ''}] ({len(flat)} values)"
        return _number(x, ".6g")
    return [(k, show(x)) for k, x in r.verdict["params"].items()]


def _flat(x):
    for y in x:
        if isinstance(y, list):
            yield from _flat(y)
        else:
            yield y


def _dashboard_row(key: str, variant: str, rows: Sequence[Row], href: str) -> dict:
    """One row of the index: a result in one variant."""
    from .tightness import by_variant, row

    mine = [r for r in rows if r.variant == variant]
    default = next((r for r in mine if r.kind == "default"), None)
    battery = Counter(r.outcome for r in mine if r.kind == "battery")
    witness = [r for r in mine if r.kind == "witness"]
    t = by_variant(row(key)).get(variant)
    tightest = t["tightest"]["ratio"] if t and t["tightest"] else None
    v = default.verdict if default else None
    return {"key": key, "variant": variant, "title": bounds.get(key, variant).title,
            "href": f"{href}#variant-{variant}", "status": bounds.get(key, variant).status,
            "default": default.outcome if default else "-",
            "battery": ", ".join(f"{n} {k}" for k, n in sorted(battery.items())) or "-",
            "witnesses": (f"{sum(not r.unexpected and r.outcome != 'error' for r in witness)} of "
                          f"{len(witness)} reproduced" if witness else "-"),
            "slack": "-" if v is None else slack_text(v["bound"], v["measured_mean"]),
            "tightest": "-" if tightest is None else _number(tightest),
            "css": "bad" if any(r.unexpected for r in mine) else (default.outcome if default else "")}


def _banner(key: str, rows: Sequence[Row]) -> list[dict]:
    """The verdict banner of a result's page: each variant's status and its verdict on the
    default scenario (with "unexpected" where that verdict contradicts the status)."""
    out = []
    for variant in dict.fromkeys(r.variant for r in rows):
        default = next((r for r in rows if r.variant == variant and r.kind == "default"), None)
        verdict = "not checked" if default is None else default.outcome + (
            " (unexpected)" if default.unexpected else "")
        status = bounds.get(key, variant).status
        out.append({"variant": variant, "status": status, "meaning": STATUS_LEGEND[status],
                    "verdict": verdict})
    return out


def page_name(key: str) -> str:
    """The file of a result's page inside the report."""
    return f"results/{_slug(key)}.html"


def _slug(text: str) -> str:
    """A file-name part: runs of anything but letters and digits become one underscore."""
    return re.sub(r"[^A-Za-z0-9]+", "_", text)


def _papers(by_key: dict[str, list[Row]], href) -> list[dict]:
    """The results grouped by paper (bibliography entry, or the key's prefix for a plugin
    outside the bibliography)."""
    from fedbound.bounds.references import PAPERS

    out: dict[str, dict] = {}
    for key, krows in by_key.items():
        prefix = key.split(".")[0]
        paper = PAPERS.get(prefix)
        entry = out.setdefault(prefix, {"key": prefix, "short": paper.short if paper else prefix,
                                        "title": paper.title if paper else _paper_title(prefix),
                                        "results": [], "rows": []})
        entry["results"].append(key)
        entry["rows"] += [_dashboard_row(key, v, krows, href(key))
                          for v in dict.fromkeys(r.variant for r in krows)]
    return list(out.values())


def _paper_title(prefix: str) -> str:
    mod = sys.modules.get(f"fedbound.bounds.{prefix}")
    return (mod.__doc__ or prefix).strip().splitlines()[0] if mod else prefix


def _tightness_lines(key: str) -> list[str]:
    """One sentence per tracked variant: the slack at the default scenario and the tightest
    ratio known (shipped in its plugin's tightness table, ``verify.tightness``); none for a
    result in no table."""
    from .tightness import by_variant, row

    return [_variant_tightness_text(t) for t in by_variant(row(key)).values()]


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


# ---------------------------------------------------------------------- notebooks


def notebooks_dir() -> Path:
    """Where a source checkout keeps the rendered notebooks (absent from an installed wheel)."""
    return Path(__file__).resolve().parent.parent / "notebooks" / "html"


def _copy_notebooks(report: ReportDir) -> list[str]:
    """Copy the rendered notebooks (``notebooks_dir()``) and the stylesheet they share into
    the report; the notebooks' names."""
    src = notebooks_dir()
    if not src.is_dir():
        return []
    files = sorted(p.name for p in src.iterdir() if p.suffix in (".html", ".css")
                   and p.is_file() and not p.is_symlink())
    for name in files:
        with report.target(f"notebooks/{name}") as tmp:
            shutil.copyfile(src / name, tmp)
    return [name for name in files if name.endswith(".html")]


# ---------------------------------------------------------------------- figures


def _figures(report: ReportDir, rows: Sequence[Row]) -> dict[str, list[dict]]:
    """Write the figures the rows carry (``Row.figure``, drawn by the checks themselves);
    per key, what its page shows."""
    out: dict[str, list[dict]] = {}
    for r in rows:
        if r.figure is None:
            continue
        file = f"{_slug(r.key)}.png" if r.kind == "default" else f"{_slug(r.key)}_{_slug(r.label)}.png"
        label = "the default scenario" if r.kind == "default" else f"{r.label} (a refutation)"
        entry = {"file": None, "caption": f"{r.key} [{r.variant}]: bound and measurement on {label}",
                 "error": ""}
        if isinstance(r.figure, bytes):
            with report.target(f"figures/{file}") as tmp:
                tmp.write_bytes(r.figure)
            entry["file"] = file
        else:
            entry["error"] = r.figure
        out.setdefault(r.key, []).append(entry)
    return out


# ---------------------------------------------------------------------- writers


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
            "tightness": {key: row(key) for key in dict.fromkeys(r.key for r in rows
                                                                   if r.kind != "plugin")}}
    if interrupted:
        data.update(interrupted=True, finished=len(rows), total=total)
    out.write_text("summary.json", json_text(data))
    return out


def write(rows: Sequence[Row], outdir: str | Path, *, seed: int, battery: int,
          force: bool = False) -> Path:
    """Write the report of ``check --all`` into ``outdir`` (a new or empty directory or a
    previous fedbound report, else ``force``; files are renamed into place, links are not
    followed: ``verify.output``) and return it: ``summary.json`` first, then
    ``index.html`` (the dashboard), ``results/<key>.html`` (one page per result),
    ``references.html``, ``derivations/<name>.html`` (the package's derivations, which the
    pages link where they name them), the figures the rows carry (``verify.suite.tasks(...,
    figures=True)``: each drawn by its check from its own measurement) and the rendered
    notebooks of a source checkout (``notebooks/``). Writing imports no matplotlib."""
    report = write_summary(rows, outdir, seed=seed, battery=battery, force=force)
    summ = summary(rows)
    by_key: dict[str, list[Row]] = {}
    for r in rows:
        if r.kind != "plugin":  # a plugin or result that could not be loaded: no page
            by_key.setdefault(r.key, []).append(r)
    drawn = _figures(report, rows)
    def href(key: str, root: str = "") -> str:
        return root + page_name(key)
    papers = _papers(by_key, href)
    siblings = [(k, href(k, "../")) for k in by_key]
    for key, krows in by_key.items():
        thm = bounds.get(key)
        checks = {kind: [row_context(r, seed=seed, battery=battery) for r in krows if r.kind == kind]
                  for kind in ("default", "battery", "witness")}
        report.write_text(page_name(key), render(
            "result.html", root="../", pages=PAGES, here="", key=key, title=thm.title,
            citation=thm.citation, tightness=_tightness_lines(key), siblings=siblings,
            variants=[variant_context(bounds.get(key, v))
                      for v in dict.fromkeys(r.variant for r in krows)],
            banner=_banner(key, krows),
            parameters=_parameters(krows), checks=checks, no_slack=NO_SLACK,
            figures=drawn.get(key, [])))
    from fedbound.bounds.references import PAPERS

    report.write_text("references.html", render(
        "references.html", root="", pages=PAGES, here="references.html",
        papers=[{"key": p.key, "short": p.short, "entry": p.entry(), "note": p.note}
                for p in PAPERS.values()]))
    for name, markdown in derivations().items():
        report.write_text(f"derivations/{name}.html", render(
            "derivation.html", root="../", pages=PAGES, here="", name=name, text=markdown))
    report.write_text("index.html", render(
        "index.html", root="", pages=PAGES, here="index.html", checks=summ["checks"], seed=seed,
        no_slack=NO_SLACK,
        battery=battery, summary_line=summary_line(summ), papers=papers,
        key_pages={k: href(k) for k in by_key}, notebooks=_copy_notebooks(report),
        unloaded=[r.error for r in rows if r.kind == "plugin"]))
    return report.finish()


def write_sweep(rows: Sequence[dict], outdir: str | Path, *, force: bool = False) -> Path:
    """A sweep's report: per result and variant, bound and measurement against each swept
    field, slack heat maps over pairs of swept fields, and the table of stored verdicts
    (written safely into ``outdir`` as :func:`write` does)."""
    from . import plots
    from .figures import save

    if not rows:
        raise ValueError("the sweep database holds no results yet")
    report = ReportDir(outdir, kind="sweep", force=force).open()
    by_group: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        by_group.setdefault((r["key"], r["variant"]), []).append(r)
    groups = []
    for (key, variant), grows in by_group.items():
        fields = plots.swept_fields(grows)
        stem = _slug(f"{key}_{variant}")
        figs = []
        for f in fields:
            name = f"{stem}_{_slug(f)}.png"
            with report.target(f"figures/{name}") as tmp:
                save(plots.sweep_against(grows, f), str(tmp))
            figs.append({"file": name, "caption": f"{key} [{variant}]: bound and measurement "
                                                  f"against {f}"})
        for fx, fy in list(itertools.combinations(fields, 2))[:6]:
            name = f"{stem}_slack_{_slug(fx)}_{_slug(fy)}.png"
            with report.target(f"figures/{name}") as tmp:
                save(plots.slack_heatmap(grows, fx, fy), str(tmp))
            figs.append({"file": name, "caption": f"{key} [{variant}]: slack over {fx}, {fy}"})
        table = []
        for r in grows:
            flat = plots.flatten(r["scenario"])
            v = r["verdict"]
            cells = ([v["verdict"], f"{float(v['bound']):.4g}", f"{float(v['measured_mean']):.4g}",
                      f"{float(v['slack']):.3g}x"] if v else ["error", r["error"], "", ""])
            table.append({"css": cells[0], "cells": [*(flat[f] for f in fields), *cells]})
        groups.append({"key": key, "variant": variant, "anchor": f"g{len(groups)}", "rows": table,
                       "fields": fields, "figures": figs})
    report.write_text("index.html", render("sweep.html", root="", pages=(("index.html", "Sweep"),),
                                           here="index.html", groups=groups))
    return report.finish()
