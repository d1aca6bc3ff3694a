"""The documentation's pages as Sphinx renders them, with the configuration of ``docs/conf.py``
(``make docs`` builds the whole site in CI; these build a few pages, in seconds):

- the derivations (``bounds/derivations/*.md``): every formula of the Markdown source, and
  nothing else, is a MathML formula in the page (its LaTeX kept as an annotation), none
  loads a script, and a page whose prose MyST took for math fails the build;
- the command-line reference: a section per command line, with the options and exit
  statuses that its ``--help`` shows.
"""

from __future__ import annotations

import html
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("sphinx", reason="Sphinx (fedbound[docs], in fedbound[dev]) builds the docs")
pytest.importorskip("myst_parser")

ROOT = Path(__file__).resolve().parents[1]
DERIVATIONS = sorted((ROOT / "bounds" / "derivations").glob("*.md"))
#: math of a Markdown page: $$display$$ first, then $inline$ (not an escaped dollar)
DISPLAY = re.compile(r"\$\$(.+?)\$\$", re.S)
INLINE = re.compile(r"(?<![\\$])\$(?!\$)(.+?)(?<![\\$])\$(?!\$)", re.S)
ANNOTATION = re.compile(r'<annotation encoding="application/x-tex">(.*?)</annotation>', re.S)


def build(pages: dict[str, str], tmp: Path, *overrides: str) -> subprocess.CompletedProcess:
    """Build ``pages`` (name -> Markdown) with the docs' configuration, warnings as errors."""
    src = tmp / "src"
    src.mkdir()
    for name, text in pages.items():
        (src / f"{name}.md").write_text(text)
    (src / "index.md").write_text("# pages\n\n```{toctree}\n" + "\n".join(pages) + "\n```\n")
    return subprocess.run([sys.executable, "-m", "sphinx", "-W", "-q", "-b", "html", "-c",
                           str(ROOT / "docs"), *overrides, str(src), str(tmp / "out")],
                          capture_output=True, text=True, timeout=600)


def formulas(markdown: str) -> list[str]:
    """The LaTeX of every formula of a Markdown page, displays and inline ones, whitespace
    collapsed, sorted (a display and the inline formulas around it come in another order)."""
    found = DISPLAY.findall(markdown) + INLINE.findall(DISPLAY.sub(" ", markdown))
    return sorted(" ".join(f.split()) for f in found)


@pytest.fixture(scope="module")
def derivations(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("derivations")
    out = build({p.stem: p.read_text() for p in DERIVATIONS}, tmp)
    assert out.returncode == 0, out.stderr[-3000:]
    return tmp / "out"


@pytest.mark.parametrize("page", DERIVATIONS, ids=lambda p: p.name)
def test_every_formula_of_a_derivation_is_mathml_and_nothing_else_is(derivations, page):
    text = (derivations / f"{page.stem}.html").read_text()
    body = text.split('<div class="sphinxsidebar"')[0]  # not the sidebar's contents (headings)
    rendered = sorted(" ".join(html.unescape(a).split()) for a in ANNOTATION.findall(body))
    assert rendered == formulas(page.read_text())
    assert body.count("<math") == len(rendered)
    assert not re.search(r"<script[^>]*src=[\"']?https?:", text), "a script from the network"
    assert not re.search(r"<script[^>]*mathjax", text, re.I) and r"\(" not in text


def test_hfl_refined_has_its_displays_in_list_items_as_displays(derivations):
    """The derivation's list items hold displays ($$...$$ inside the item's paragraph):
    each is a displayed formula, not the end of one inline formula and the start of another."""
    text = (derivations / "hfl_refined.html").read_text()
    displays = DISPLAY.findall((ROOT / "bounds/derivations/hfl_refined.md").read_text())
    assert len(displays) > 10 and text.count('<math display="block">') == len(displays)


def test_prose_taken_for_math_fails_the_build(tmp_path):
    """Without myst_dmath_double_inline (MyST's default) the list items' displays are read
    as inline math and the prose between them becomes math: the build must fail, naming it."""
    page = DERIVATIONS[[p.stem for p in DERIVATIONS].index("hfl_refined")]
    out = build({"hfl_refined": page.read_text()}, tmp_path, "-D", "myst_dmath_double_inline=0")
    assert out.returncode != 0 and "prose typeset as math" in out.stderr


def test_the_prose_check_spares_words_in_text_and_commands():
    sys.path.insert(0, str(ROOT / "docs" / "_ext"))
    try:
        from mathml_math import prose
    finally:
        sys.path.pop(0)
    assert prose(r"\underbrace{x}_{\text{within-round drift}} + \frac{\sigma}{\sqrt{T}}") is None
    assert prose(r"\le \max_i T_i \quad \operatorname{Var} x") is None
    assert prose(r" follow (7) and the number of rounds ") == "and the"


# ------------------------------------------------------------------ the CLI reference

@pytest.fixture(scope="module")
def cli_page(tmp_path_factory) -> str:
    tmp = tmp_path_factory.mktemp("cli")
    out = build({"cli": "# CLI\n\n```{fedbound-cli}\n```\n"}, tmp)
    assert out.returncode == 0, out.stderr[-3000:]
    return (tmp / "out" / "cli.html").read_text()


def _section(page: str, command: str) -> str:
    """The HTML of the section of ``command``, up to the next section."""
    anchor = re.search(rf'<section id="[^"]*">\s*<h\d>{re.escape(command)}<', page)
    assert anchor, f"no section for {command!r}"
    rest = page[anchor.end():]
    return rest[:rest.find("<section") if "<section" in rest else None]


def test_the_cli_reference_has_every_command_with_its_help(cli_page):
    from fedbound.verify.cli import command_parsers

    parsers = command_parsers()
    assert {"fedbound", "fedbound check", "fedbound choose hfl", "fedbound choose tdcd"} <= set(parsers)
    for command, parser in parsers.items():
        section = html.unescape(_section(cli_page, command))
        helped = parser.format_help()
        shown = set(re.findall(r"^  (--[\w-]+)", helped, re.M))
        assert set(re.findall(r"<code[^>]*>(?:<span[^>]*>)?(--[\w-]+)", section)) == shown, command
        statuses = re.findall(r"^  (\d+) ", helped.split("exit status:\n")[-1], re.M)
        listed = re.findall(r"<dt><code[^>]*>(?:<span[^>]*>)?(\d+)<", section)
        assert listed == statuses, command
        if parser.description:  # the page's quotes are typographic (smartquotes)
            plain = section.translate(str.maketrans("\u2018\u2019\u201c\u201d", "''\"\""))
            assert " ".join(parser.description.split())[:60] in " ".join(plain.split())


def test_docs_conf_serves_no_math_from_a_cdn():
    conf = (ROOT / "docs" / "conf.py").read_text()
    assert 'html_math_renderer = "mathml"' in conf and "sphinx.ext.mathjax" not in conf


# ------------------------------------------------------------------ the page as a reader sees it

#: a page of things wider than the text column: a code line, a display formula, a table
WIDE = """# Wide things

```python
x = 1  # """ + "a comment that runs on " * 12 + """
```

$$
""" + " + ".join(rf"\frac{{\sigma_{{{i}}}^2 L \eta^2 (\tau - 1)}}{{(1 - \zeta)^2}}" for i in range(12)) + """
$$

| """ + " | ".join(f"column {i}" for i in range(14)) + """ |
|""" + "---|" * 14 + """
| """ + " | ".join(f"a_rather_long_value_{i}" for i in range(14)) + """ |
"""

#: measures, in the page it loads: how far the page scrolls sideways, and every element that
#: passes the text column's right edge outside a box that scrolls sideways
LAYOUT = """<!DOCTYPE html><html><body style="margin:0">
<iframe id="f" src="{src}" style="width:1280px;height:900px;border:0"></iframe>
<pre id="out">pending</pre><script>
document.getElementById("f").onload = function () {{
  var d = this.contentDocument, body = d.querySelector("div.body");
  var edge = body.getBoundingClientRect().right;
  var scrolls = function (e) {{
    for (var p = e.parentElement; p && p !== body; p = p.parentElement)
      if (["auto", "scroll"].indexOf(d.defaultView.getComputedStyle(p).overflowX) >= 0) return true;
    return false; }};
  document.getElementById("out").textContent = JSON.stringify({{
    width: d.documentElement.clientWidth, scroll: d.documentElement.scrollWidth,
    past: Array.prototype.filter.call(body.querySelectorAll("*"), function (e) {{
      return e.getBoundingClientRect().right > edge + 1 && !scrolls(e); }}).map(function (e) {{
      return [e.tagName, e.className, e.textContent.slice(0, 40)]; }})}});
}};
</script></body></html>"""


@pytest.mark.skipif(not (shutil.which("chromium") or shutil.which("chromium-browser")),
                    reason="no chromium on PATH (CI installs Debian's chromium package)")
@pytest.mark.parametrize("page", ["wide", "hfl_refined"])
def test_nothing_passes_the_text_columns_edge_at_1280_px(page, tmp_path):
    """docs/_static/fedbound.css: a display formula wider than the text column (the
    hfl_refined derivation has one), a long code line and a wide table each scroll inside
    their own box; the page does not scroll sideways, and nothing else passes the edge."""
    import json

    from test_report_browser import _chromium

    refined = DERIVATIONS[[p.stem for p in DERIVATIONS].index("hfl_refined")].read_text()
    out = build({"wide": WIDE, "hfl_refined": refined}, tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    harness = tmp_path / "harness.html"
    harness.write_text(LAYOUT.format(src=(tmp_path / "out" / f"{page}.html").as_uri()))
    dom = _chromium("--allow-file-access-from-files", "--virtual-time-budget=10000",
                    "--dump-dom", harness.as_uri())
    seen = json.loads(re.search(r'<pre id="out">(.*?)</pre>', dom, re.S)[1].replace("&quot;", '"'))
    assert seen["scroll"] <= seen["width"] and seen["past"] == [], seen
