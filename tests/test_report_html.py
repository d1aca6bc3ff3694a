"""The HTML report as files: escaping of what plugins and stores hold, MathML of errata,
the notebooks it links, and a report without figures that never imports matplotlib."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from xml.sax.saxutils import escape as escape_xml

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from fedbound import bounds
from fedbound.verify import mathml, report, text
from fedbound.verify import rows as rows_module

ROOT = Path(__file__).resolve().parents[1]
PLANT = "<script>alert(1)</script>"


def _rows(key="mllsgd.theorem1"):
    """A default row per variant, without running a check (a made-up verdict)."""
    verdict = {"verdict": "holds", "bound": 2.0, "measured_mean": 1.0, "measured_ci": [0.9, 1.1],
               "slack": 2.0, "admissible": True, "params": {"eta": 0.1, "a": [0.5, 0.5]},
               "mode": "exact"}
    return [rows_module.Row(key, v, "default", "default", bounds.get(key, v).status, None, verdict,
                      None, 0.0) for v in bounds.variants(key)]


def test_planted_markup_in_a_title_and_a_row_is_escaped(tmp_path, monkeypatch):
    get = bounds.get
    monkeypatch.setattr(bounds, "get", lambda *a, **k: dataclasses.replace(
        get(*a, **k), title=PLANT, notes=f"``{PLANT}``"))  # as a plugin may register it
    rows = _rows()
    rows.append(rows_module.Row("mllsgd.theorem1", "proof", "witness", f"witness {PLANT}.json",
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


#: the four papers' results in every variant
PUBLISHED = [(row["key"], v) for row in bounds.list()
             if row["key"].split(".", 1)[0] in ("mllsgd", "hfl", "tdcd", "afl")
             for v in row["variants"]]
#: what shows a formula left as code in prose: an operator, a power or a subscript, a call,
#: LaTeX outside ``$...$``, a norm, a Greek letter's name, an arrow
CODE_LIKE = re.compile(
    r"[*^_{}$\\=<>]|sqrt\(|\|\||->|[\w)]\s*/\s*[\w(]|\b(?:alpha|beta|gamma|Gamma|delta|"
    r"Delta|eta|zeta|theta|kappa|lambda|rho|sigma|tau|xi|Xi|psi|Psi|infinity)\b")
#: a lone letter other than the articles a, A, I (a symbol such as K, m or s left as text),
#: except an appendix, section or algorithm letter ("Appendix C", "Appendices B.3 and C")
LONE_LETTER = re.compile(r"(?<![\w'.\-])[B-HJ-Zb-z](?![\w'.])")
PLACES = re.compile(r"\b(?:Appendix|Appendices|App\.|Section|Algorithms?)\s+[A-Z0-9.\-]+"
                    r"(?:,? and [A-Z0-9.]+)?")
#: fedbound's own derivation notes, named by their file in the package
DERIVATION_FILE = re.compile(r"bounds/derivations/\w+\.md")


def _code_left_in(text: str) -> list[str]:
    """The code-like pieces of prose ``text`` (math already taken out)."""
    text = PLACES.sub("", DERIVATION_FILE.sub("", text))
    return [m[0] for m in CODE_LIKE.finditer(text)] + LONE_LETTER.findall(text)


def test_the_code_detector_sees_code_and_passes_prose():
    assert _code_left_in("eta_L = O(1/(K L sqrt(tau)))")
    assert _code_left_in("larger by 1/(1+zeta)") and _code_left_in("8 q^2 tau^2 Gamma")
    assert _code_left_in("averages over all M workers") and _code_left_in("at x* ")
    assert _code_left_in("T >= Max(L**2*(12*K**2 - 18*K + 6), 180*K**2*L**2*tau)")
    assert _code_left_in(r"the \\frac{1}{2} term") and _code_left_in("f(x_0) -> 0")
    assert not _code_left_in("the factor 2 between (b9) and (b10) is dropped after (b12) "
                             "(Appendix C; Appendices B.3 and C; Section IV-B) [derived by "
                             "fedbound, not published; see bounds/derivations/hfl_refined.md]")


def _errata():
    seen = {}
    for key, v in PUBLISHED:
        for e in bounds.get(key, v).errata:
            seen.setdefault(e, f"{key} [{v}]")
    return seen


def test_every_erratum_writes_its_formulas_as_latex_math_not_code():
    """Every formula of every erratum of the four papers is a ``$...$`` span of LaTeX that
    latex2mathml lays out as MathML elements alone (no fallback to its source); the prose
    between them holds no code-like formula."""
    from latex2mathml.converter import convert

    errata = _errata()
    assert len(errata) > 40
    for e, where in errata.items():
        for name in ("where", "printed", "corrected", "citation"):
            parts = mathml.prose_parts(getattr(e, name))
            left = [c for is_math, p in parts if not is_math for c in _code_left_in(p)]
            assert not left, (where, name, left, getattr(e, name))
            for tex in (p for is_math, p in parts if is_math):
                assert mathml._only_mathml(convert(tex)), (where, tex)
                assert "\\" not in mathml.of_latex(tex), (where, tex)  # no unknown command


#: code shown as code in prose (a command, a call): ``...``
CODE_SPAN = re.compile(r"``.+?``")


@pytest.mark.parametrize("key, variant", PUBLISHED)
def test_every_note_and_title_writes_its_math_as_latex_not_code(key, variant):
    """A theorem's notes and title, like its errata: each formula a ``$...$`` span of LaTeX
    that latex2mathml lays out as MathML alone, the prose between them free of code-like
    formulas (commands and calls are marked as code, ````...````)."""
    thm = bounds.get(key, variant)
    for name in ("notes", "title"):
        parts = mathml.prose_parts(getattr(thm, name))
        left = [c for is_math, p in parts if not is_math
                for c in _code_left_in(CODE_SPAN.sub("", p))]
        assert not left, (name, left, getattr(thm, name))
        for tex in (p for is_math, p in parts if is_math):
            assert "\\" not in mathml.of_latex(tex) and "<mtext>" not in mathml.of_latex(tex), tex


def test_term_names_read_as_math():
    """A term's name (ASCII, as ``Theorem.terms`` keys it) with its symbols as math."""
    assert report.term_prose("sigma_G floor") == r"$\sigma_{G}$ floor"
    assert report.term_prose("noise: eta L Q") == r"noise: $\eta L Q$"
    assert report.term_prose("kappa^2") == r"$\kappa^{2}$"
    assert report.term_prose("noise: staleness x L") == "noise: staleness \u00d7 $L$"
    assert report.term_prose("previous-round drift") == "previous-round drift"
    assert report.term_prose("sub-network consensus") == "sub-network consensus"


class _MathIn(HTMLParser):
    """Of the elements of class ``css``: the text outside ``<math>``, and how many ``<math>``
    elements they hold."""

    def __init__(self, tag: str, css: str | None = None):
        super().__init__(convert_charrefs=True)
        self.tag, self.css, self.depth, self.maths, self.text, self._math = tag, css, 0, 0, [], 0

    def handle_starttag(self, tag, attrs):
        if self.depth:
            self.depth += tag == self.tag
        elif tag == self.tag and (self.css is None or ("class", self.css) in attrs):
            self.depth = 1
        if self.depth and tag == "math":
            self.maths += 1
            self._math += 1

    def handle_endtag(self, tag):
        if self.depth and tag == "math":
            self._math -= 1
        elif self.depth and tag == self.tag:
            self.depth -= 1

    def handle_data(self, data):
        if self.depth and not self._math:
            self.text.append(data)


@pytest.mark.parametrize("key", ["hfl.theorem2", "afl.theorem3", "tdcd.remark5"])
def test_notes_and_term_names_are_mathml_on_the_page(tmp_path, key):
    """A result page as a reader sees it: one ``<math>`` per ``$...$`` span of each variant's
    notes (and of its title in the heading), the names of the terms with their symbols as
    MathML, and no dollar sign left in the text."""
    out = report.write(_rows(key), tmp_path / "r", seed=0, battery=0)
    html = (out / report.page_name(key)).read_text()
    notes = _MathIn("p", "notes")
    notes.feed(html)
    spans = sum(is_math for v in bounds.variants(key)
                for is_math, _ in mathml.prose_parts(bounds.get(key, v).notes))
    assert notes.maths == spans > 0 and "$" not in "".join(notes.text)
    heading = _MathIn("h1")
    heading.feed(html)
    assert heading.maths == sum(is_math for is_math, _ in mathml.prose_parts(bounds.get(key).title))
    terms = _MathIn("td", "note")
    terms.feed(html)
    symbols = sum(is_math for v in bounds.variants(key) for name in bounds.get(key, v).term_exprs
                  for is_math, _ in mathml.prose_parts(report.term_prose(name)))
    assert terms.maths >= symbols > 0 and "$" not in "".join(terms.text)


class _ErratumText(HTMLParser):
    """The text of the page's errata outside ``<math>`` and the LaTeX ``<details>``, and
    each erratum's ``<math>`` elements as markup."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.text, self.maths, self._in, self._skip, self._math = [], [], 0, 0, None

    def handle_starttag(self, tag, attrs):
        if tag == "li" and ("class", "erratum") in attrs:
            self._in = 1
        elif self._in and tag == "details":
            self._skip += 1
        elif self._in and tag == "math":
            self._math = []
        if self._math is not None:
            self._math.append(f"<{tag}>")

    def handle_endtag(self, tag):
        if self._math is not None:
            self._math.append(f"</{tag}>")
            if tag == "math":
                self.maths.append("".join(self._math))
                self._math = None
        elif tag == "details" and self._in:
            self._skip -= 1
        elif tag == "li":
            self._in = 0

    def handle_data(self, data):
        if self._math is not None:
            self._math.append(escape_xml(data))
        elif self._in and not self._skip:
            self.text.append(data)


def test_every_erratum_of_every_result_renders_as_mathml(tmp_path):
    """The result pages as a reader sees them: every erratum's formulas are MathML that
    parses (one ``<math>`` per ``$...$`` span), and the text around them holds no code."""
    keys = list(dict.fromkeys(k for k, _ in PUBLISHED))
    out = report.write([r for k in keys for r in _rows(k)], tmp_path / "r", seed=0, battery=0)
    for key in keys:
        page = _ErratumText()
        page.feed((out / report.page_name(key)).read_text())
        spans = sum(is_math for v in bounds.variants(key) for e in bounds.get(key, v).errata
                    for f in (e.where, e.printed, e.corrected, e.citation)
                    for is_math, _ in mathml.prose_parts(f))
        assert len(page.maths) == spans > 0, key
        assert all(mathml._only_mathml(m) for m in page.maths), key
        text = " ".join(page.text)
        assert "printed:" in text and not _code_left_in(text.replace("printed:", "")
                                                         .replace("corrected:", "")), key


def test_math_in_prose_is_escaped_by_construction():
    html = str(report.prose(r"a $\frac{1}{2} <script>alert(1)</script>$ and $x$"))
    assert "<script" not in html and html.count("<math>") == 2 and html.startswith("a <math>")
    with pytest.raises(ValueError, match=r"printed=.*1 unescaped"):
        bounds.Erratum("w", "$x", "y", "c")


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
from fedbound.verify.cli import main
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


def _shows(shown: str, slack: float) -> bool:
    """Whether ``shown`` is ``slack`` as the reports print it: three significant digits and
    "x", or the fewest more that do not read 1 for a slack other than 1 (up to round-off)."""
    digits = next((d for d in range(3, text.ROUND_OFF_DIGITS + 1)
                   if float(f"{slack:.{d}g}") != 1 or slack == 1), text.ROUND_OFF_DIGITS)
    return shown == f"{slack:.{digits}g}x"


@example(1.0001, 1.0)
@given(st.floats(1e-6, 1e6), st.floats(1e-6, 1e6))
def test_slack_is_bound_over_measured_for_an_upper_bound_and_the_inverse_for_a_lower_one(b, m):
    assert _shows(text.slack_text(b, m), b / m)
    assert _shows(text.slack_text(-b, -m), m / b)  # a lower bound: 1 tight, below violated
    assert text.slack_text(b, 0.0) == text.slack_text(b, -m) == "-"
    if b != m:
        assert text.slack_text(b, m) != "1x"


def test_the_dashboard_shows_a_lower_bounds_slack_as_a_number_never_inf(tmp_path):
    """afl.theorem1 bounds a negative quantity from above (a lower bound): its verdict's
    bound / measured is infinite or negative, the dashboard shows the slack of the tightness
    table (1x: the bound is attained) and no page says "inf"."""
    from fedbound.verify.cli import main
    from fedbound.verify.tightness import by_variant, row

    out = tmp_path / "r"
    assert main(["check", "--all", "--only", "afl.theorem1", "--battery", "1", "--no-witnesses",
                 "--no-figures", "--report", str(out)]) == 0
    index = (out / "index.html").read_text()
    cells = re.search(r'href="results/afl_theorem1.html#variant-proof">afl.theorem1</a>.*?</tr>',
                      index, re.DOTALL)[0]
    expected = by_variant(row("afl.theorem1"))["proof"]["default"]["slack"]
    assert f'<td class="num">{expected:.3g}x</td>' in cells
    for page in (index, (out / "results" / "afl_theorem1.html").read_text()):
        assert not re.search(r"\binf", page), re.search(r".{80}\binf.{20}", page)[0]


def test_a_variant_context_is_built_once_per_theorem_and_dropped_with_it():
    """``report.prepare`` builds the formulas before the checks end; ``write`` reuses them
    for the same theorem object, builds them anew for another and keeps no collected
    theorem's (its id may be reused)."""
    import gc

    thm = bounds.get("mllsgd.theorem1")
    report.prepare(["mllsgd.theorem1"])
    first = report.variant_context(thm)
    assert report.variant_context(bounds.get("mllsgd.theorem1")) is first
    other = dataclasses.replace(thm, title="another")
    assert report.variant_context(other) is not first
    held = id(other)
    del other
    gc.collect()
    assert held not in report._CONTEXTS and id(thm) in report._CONTEXTS


def test_a_derivation_named_in_prose_links_to_its_page_in_the_report(tmp_path):
    """tdcd.theorem1's refined variant says "see bounds/derivations/tdcd_refined.md": the
    report ships that derivation as a page and the path becomes a link to it."""
    out = report.write(_rows("tdcd.theorem1"), tmp_path / "r", seed=0, battery=0)
    page = (out / "results/tdcd_theorem1.html").read_text()
    link = '<a href="../derivations/tdcd_refined.html">bounds/derivations/tdcd_refined.md</a>'
    assert link in page
    assert "bounds/derivations/" not in page.replace(link, "")   # no path left unlinked
    shipped = (ROOT / "bounds/derivations/tdcd_refined.md").read_text()
    derivation = (out / "derivations/tdcd_refined.html").read_text()
    heading = shipped.splitlines()[0].lstrip("# ")
    assert escape_xml(heading) in derivation and derivation.count("\n") >= shipped.count("\n")
    assert sorted(p.name for p in (out / "derivations").iterdir()) == \
        sorted(f"{p.stem}.html" for p in (ROOT / "bounds/derivations").glob("*.md"))
    assert report.prose("see bounds/derivations/tdcd_refined.md") == \
        "see bounds/derivations/tdcd_refined.md"   # no root, no link
