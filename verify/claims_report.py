"""The report of ``fedbound reproduce ... --report DIR``: ``summary.json`` first (the
reproduction's JSON, ``Reproduction.to_dict``), then every claim's figure
(``verify.claimplots``, ``figures/<claim>.png``), one page per paper
(``claims/<paper>.html``: each claim with its citation, setting, analogue, verdict, tests,
readings, notes and figure), ``index.html`` (every paper's claims and verdicts) and
``references.html``; from the Jinja2 templates ``claims_index.html`` and
``claims_paper.html`` beside the check report's, written safely (``verify.output.ReportDir``:
temporary names renamed into place, links not followed). No JavaScript, no external
request; the claims' symbols are MathML (``verify.report.prose``)."""

from __future__ import annotations

from pathlib import Path

from .output import ReportDir
from .reproduce import ClaimResult, Reproduction, counts_text, effect_text

#: the pages of a reproduction report, in the header of each
PAGES = (("index.html", "Claims"), ("references.html", "References"))
#: the row colour of each verdict: the check report's classes (``report.css``)
CSS = {"agrees": "holds", "contradicts": "bad", "negligible": "", "undecided": "inconclusive",
       "fixed-by-setting": "", "error": "error"}


def _number(x) -> str:
    return "-" if x is None else f"{x:.4g}"


def _slug(text: str) -> str:
    import re

    return re.sub(r"[^A-Za-z0-9]+", "_", text)


def _test_row(t) -> dict:
    return {"name": t.name, "effect": _number(t.effect),
            "interval": "-" if t.low is None else f"[{_number(t.low)}, {_number(t.high)}]",
            "region": t.region(), "margin": _number(t.margin), "source": t.source,
            "seeds": "-" if t.seeds is None else t.seeds, "verdict": t.verdict,
            "detectable": _number(t.detectable),
            "needed": t.reason or ("-" if t.verdict != "undecided" else (t.needed or "none"))}


def claim_context(r: ClaimResult, rep: Reproduction, figure: str | None,
                  caption: str = "") -> dict:
    from .html import term_prose

    c = r.claim
    p = r.primary
    outcome = rep.outcome(c, p.reading) if p is not None else None
    return {
        "id": c.id, "anchor": _slug(c.id), "cite": c.cite, "claim": term_prose(c.claim),
        "verdict": r.verdict, "error": r.error,
        "setting": [(k, term_prose(v)) for k, v in c.setting.items()],
        "analogue": term_prose(c.analogue), "metric": c.metric,
        "effect": effect_text(p.effect) if p else "",
        "tests": [_test_row(t) for t in p.tests] if p else [],
        "readings": [{"reading": d.reading, "verdict": d.verdict, "effect": effect_text(d.effect),
                      "primary": d.reading == c.primary} for d in r.decisions]
        if c.primary is not None else [],
        "tolerance": c.tolerance, "sensitivity": c.sensitivity,
        "stated_model": term_prose(c.stated_model),
        "prediction": p.prediction if p else "", "bound_agrees": p.bound_agrees if p else None,
        "notes": list(outcome.notes) if outcome else [], "figure": figure, "caption": caption,
        "command": f"fedbound reproduce {c.paper} --claim {c.id}"
                   + (" --quick" if rep.plan.quick else "")}


def write(rep: Reproduction, outdir: str | Path, *, force: bool = False) -> Path:
    """Write the report of ``rep`` into ``outdir`` (module docstring) and return it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from fedbound.bounds.references import PAPERS

    from .claimplots import claim_caption, claim_figure
    from .html import render
    from .scenario import json_text

    report = ReportDir(outdir, kind="reproduce", force=force).open()
    report.write_text("summary.json", json_text(rep.to_dict()))
    figures = {}
    for r in rep.results:
        fig = claim_figure(r, rep)
        if fig is None:
            continue
        name = f"{_slug(r.claim.id)}.png"
        with report.target(f"figures/{name}") as tmp:
            fig.savefig(tmp, dpi=100)
        plt.close(fig)
        figures[r.claim.id] = (name, claim_caption(r, rep))
    papers = []
    seconds = rep.paper_seconds()
    for paper in rep.papers:
        mine = [r for r in rep.results if r.claim.paper == paper]
        entry = PAPERS.get(paper)
        papers.append({"key": paper, "short": entry.short if entry else paper,
                       "title": entry.title if entry else paper,
                       "href": f"claims/{_slug(paper)}.html",
                       "counts": counts_text(r.verdict for r in mine),
                       "seconds": f"{seconds.get(paper, 0.0):.1f}",
                       "claims": [claim_context(r, rep, *figures.get(r.claim.id, (None, "")))
                                  for r in mine]})
    run = {"quick": rep.plan.quick, "seed": rep.plan.seed, "seeds": rep.plan.seeds,
           "timing": rep.timing(), "status": rep.status()}
    for p in papers:
        report.write_text(p["href"], render(
            "claims_paper.html", root="../", pages=PAGES, here="", paper=p, run=run,
            papers=papers, css=CSS))
    report.write_text("index.html", render("claims_index.html", root="", pages=PAGES,
                                           here="index.html", papers=papers, run=run, css=CSS))
    report.write_text("references.html", render(
        "references.html", root="", pages=PAGES, here="references.html",
        papers=[{"key": p.key, "short": p.short, "entry": p.entry(), "note": p.note}
                for p in PAPERS.values()]))
    return report.finish()
