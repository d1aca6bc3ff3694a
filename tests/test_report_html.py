"""The HTML report as files: escaping of what plugins and stores hold, MathML of errata,
the notebooks it links, and a report without figures that never imports matplotlib."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import sympy as sp
from hypothesis import given
from hypothesis import strategies as st

import bounds
from verify import mathml, report, suite

ROOT = Path(__file__).resolve().parents[1]
PLANT = "<script>alert(1)</script>"


def _rows(key="mllsgd.theorem1"):
    """A default row per variant, without running a check (a made-up verdict)."""
    verdict = {"verdict": "holds", "bound": 2.0, "measured_mean": 1.0, "measured_ci": [0.9, 1.1],
               "slack": 2.0, "admissible": True, "params": {"eta": 0.1, "a": [0.5, 0.5]},
               "mode": "exact"}
    return [suite.Row(key, v, "default", "default", bounds.get(key, v).status, None, verdict,
                      None, 0.0) for v in bounds.variants(key)]


def test_planted_markup_in_a_title_and_a_row_is_escaped(tmp_path, monkeypatch):
    get = bounds.get
    monkeypatch.setattr(bounds, "get", lambda *a, **k: dataclasses.replace(
        get(*a, **k), title=PLANT, notes=f"``{PLANT}``"))  # as a plugin may register it
    rows = _rows()
    rows.append(suite.Row("mllsgd.theorem1", "proof", "witness", f"witness {PLANT}.json",
                          "holds", "holds", None, PLANT, 0.0))
    out = report.write(rows, tmp_path / "r", seed=0, battery=0)
    for page in ("index.html", "results/mllsgd_theorem1.html"):
        text = (out / page).read_text()
        assert PLANT not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text


def test_backticks_become_code_and_are_escaped_first():
    assert str(report.prose("see ``a<b`` and ``c``")) == "see <code>a&lt;b</code> and <code>c</code>"


def test_citations_link_to_the_bibliography():
    html = str(report.cite("Ali & Arafa 2025, Theorem 2, eq. (20)", "../"))
    assert html == '<a href="../references.html#hfl">Ali &amp; Arafa 2025</a>, Theorem 2, eq. (20)'


@given(st.integers(-9, 9), st.integers(1, 9))
def test_an_erratum_formula_parses_to_the_same_expression(a, b):
    """The text "a*x^2 + x/b" parsed with the theorem's symbols equals the sympy
    expression built directly; prose stays text."""
    x = sp.Symbol("zeta")
    parsed = mathml.parse_text(f"{a} zeta^2 + zeta/{b}", {"zeta": x})
    assert parsed is not None and sp.simplify(parsed - (a * x**2 + x / sp.Integer(b))) == 0
    assert mathml.parse_text("8 q^2 tau^2 Gamma for every beta", {}) is None
    assert mathml.parse_text("0 <= alpha <= 1/L", {}) is None  # a chain is not dropped to half


def test_every_erratum_reads_printed_and_corrected(tmp_path):
    out = report.write(_rows(), tmp_path / "r", seed=0, battery=0)
    page = (out / "results" / "mllsgd_theorem1.html").read_text()
    errata = [e for v in bounds.variants("mllsgd.theorem1")
              for e in bounds.get("mllsgd.theorem1", v).errata]
    assert page.count("printed: ") >= len(errata) and page.count("corrected: ") >= len(errata)
    # Gamma's printed value of Theorem 1 parses: shown as math
    assert "<mfrac>" in page.split("Errata", 1)[1]


def test_notebooks_are_copied_and_linked_when_the_checkout_has_them(tmp_path, monkeypatch):
    html = tmp_path / "nb"
    html.mkdir()
    (html / "01_mllsgd.html").write_text("<html>notebook 1</html>")
    (html / "notebook.css").write_text("body {}")
    monkeypatch.setattr(report, "notebooks_dir", lambda: html)
    out = report.write(_rows(), tmp_path / "r", seed=0, battery=0)
    assert (out / "notebooks" / "01_mllsgd.html").read_text() == "<html>notebook 1</html>"
    assert (out / "notebooks" / "notebook.css").read_text() == "body {}"  # the pages link it
    index = (out / "index.html").read_text()
    assert 'href="notebooks/01_mllsgd.html"' in index and 'href="notebooks/notebook.css"' not in index
    manifest = json.loads((out / "fedbound-report.json").read_text())
    assert "notebooks/01_mllsgd.html" in manifest["files"]


def test_without_notebooks_the_index_says_where_they_are(tmp_path, monkeypatch):
    monkeypatch.setattr(report, "notebooks_dir", lambda: tmp_path / "absent")
    out = report.write(_rows(), tmp_path / "r", seed=0, battery=0)
    index = (out / "index.html").read_text()
    assert "in the source repository" in index and not (out / "notebooks").exists()


def test_no_figures_imports_no_matplotlib(tmp_path):
    code = f"""
import sys
from verify.cli import main
code = main(["check", "--all", "--only", "mllsgd.theorem1", "--battery", "0", "--no-witnesses",
             "--no-figures", "--report", {str(tmp_path / 'r')!r}])
assert code == 0, code
assert "matplotlib" not in sys.modules, "matplotlib was imported"
print("ok")
"""
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-2000:]
    assert (tmp_path / "r" / "results" / "mllsgd_theorem1.html").exists()


def test_markup_in_a_plugins_latex_never_reaches_the_page():
    """latex2mathml copies the text of ``\\text{...}`` unescaped: a formula that would bring
    any element but MathML's is shown as its escaped LaTeX source instead."""
    tex = r"\frac{1}{T}\sum_t \|g_t\|^2 \text{<script>alert(1)</script>} <img src=x>"
    out = mathml.of_latex(tex)
    assert "<script" not in out and "<img" not in out and "&lt;script&gt;" in out
    assert mathml.of_latex(r"\frac{1}{T}\sum_t \|g_t\|^2").startswith("<mrow><mfrac>")
