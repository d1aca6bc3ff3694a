"""The reports as a reader sees them: each kind of page of the check report (the dashboard, a
result page, the bibliography, a derivation) and of the claims report (its index and a
paper's page) opened in headless Chromium (Debian's ``chromium``; skipped where there is
none) at 1280 px. No page scrolls sideways: no table passes the window's right edge and no
table scrolls inside its box (the witness tables keep their "reproduce" column in view), the
sidebar cuts no name (``mllsgd.theorem1_limit``), every statement's MathML lays out (a
non-zero box), no text is set under 10 px (MathML's scripts aside: their size is the
formula's typography), every row that carries a status shows it in that status's colour,
one colour per status, and a refuted or rate-refuted result's rows are tinted as such, never
as holding. Screenshots go to ``$FEDBOUND_ARTIFACTS`` (CI keeps that directory) or the
test's temporary directory.

The check report is written from every registered result's real tasks (the default
scenarios, a battery, every stored witness with its file name) with made-up verdicts: the
layout is under test, not the checks. The claims report is written from the stored quick
reproduction of notebook 07 (``notebooks/data/claims_quick.json``), two papers of it.

A page is loaded in an iframe of a small harness page whose script opens every
``<details>``, measures the page and writes the measurements into the harness's DOM, which
``--dump-dom`` prints: no browser driver package needed."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from bounded import CEILING

from fedbound import bounds
from fedbound.verify import report, suite
from fedbound.verify import rows as rows_module

BROWSER = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(BROWSER is None, reason="no chromium on PATH (CI installs "
                                "Debian's chromium package; install it to run this test)")
WIDTH = 1280
ROOT = Path(__file__).resolve().parents[1]
#: result pages with the longest content: afl.theorem3's errata and witness files,
#: afl.corollary1's inline formula, tdcd.theorem1's widest terms, hfl.corollary1's
#: derivation links, mllsgd.theorem1_limit's key (the longest, in the sidebar)
RESULT_PAGES = ("afl.theorem3", "afl.corollary1", "tdcd.theorem1", "hfl.corollary1",
                "mllsgd.theorem1_limit")
#: the claims report's papers written here (its figures take a few seconds a paper)
CLAIM_PAPERS = ("afl", "tdcd")
#: the background of a row that holds (``report.css``'s tr.holds)
HOLDS_TINT = "rgb(234, 247, 234)"

HARNESS = """<!DOCTYPE html><html><body style="margin:0">
<iframe id="f" src="{src}" style="width:{width}px;height:900px;border:0"></iframe>
<pre id="out">pending</pre>
<script>
document.getElementById("f").onload = function () {{
  var d = this.contentDocument, vw = d.documentElement.clientWidth;
  var all = function (s) {{ return Array.prototype.slice.call(d.querySelectorAll(s)); }};
  all("details").forEach(function (e) {{ e.open = true; }});
  var box = function (e) {{ var r = e.getBoundingClientRect(); return [r.width, r.height, r.right]; }};
  var style = function (e) {{ return d.defaultView.getComputedStyle(e); }};
  document.getElementById("out").textContent = JSON.stringify({{
    width: vw, scroll: d.documentElement.scrollWidth,
    maths: all("math").map(box),
    tables: all("table").map(box),
    scrolled: all(".wide, nav.toc").filter(function (e) {{
      return e.scrollWidth > e.clientWidth + 1; }}).map(function (e) {{
      return [e.className, e.scrollWidth, e.clientWidth]; }}),
    headers: all("th").map(function (e) {{ return [e.textContent, e.getBoundingClientRect().right]; }}),
    small: all("body *").filter(function (e) {{
      var own = Array.prototype.some.call(e.childNodes, function (n) {{
        return n.nodeType === 3 && n.textContent.trim(); }});
      return own && !e.closest("math") && e.getClientRects().length &&
        parseFloat(style(e).fontSize) < 10;
    }}).map(function (e) {{ return [e.tagName, e.textContent.slice(0, 40), style(e).fontSize]; }}),
    rows: all("tr").map(function (r) {{
      var b = r.querySelector(".badge");
      return b ? [b.textContent, style(b).backgroundColor, style(b).color,
                  style(r.cells[r.cells.length - 1]).backgroundColor] : null; }}),
    banner: all(".banner > p").map(function (p) {{ return p.textContent; }})}});
}};
</script></body></html>"""


def _chromium(*args: str) -> str:
    sandbox = ["--no-sandbox"] if os.geteuid() == 0 else []
    proc = subprocess.run([BROWSER, "--headless", "--disable-gpu", *sandbox, *args],
                          capture_output=True, text=True, timeout=CEILING)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def _verdict(violated: bool) -> dict:
    bound, measured = (1.0, 3.0) if violated else (2.0, 1.0)
    return {"verdict": "violated" if violated else "holds", "bound": bound,
            "measured_mean": measured, "measured_ci": [0.9 * measured, 1.1 * measured],
            "slack": bound / measured, "admissible": True, "params": {"eta": 0.1},
            "mode": "exact"}


def _rows() -> list:
    """Every registered result's tasks (``check --all``'s: defaults, a battery, every
    stored witness), each with a made-up verdict that is the one expected of it."""
    return [rows_module.Row(t.key, t.variant, t.kind, t.label, bounds.get(t.key, t.variant).status,
                            t.expect, _verdict(t.expect == "violated"), None, 0.0)
            for t in suite.tasks(None, battery=2)]


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    return report.write(_rows(), tmp_path_factory.mktemp("browser") / "report", seed=0,
                        battery=2)


@pytest.fixture(scope="module")
def claims_site(tmp_path_factory) -> Path:
    from fedbound.verify import claims_report
    from fedbound.verify.api import load_reproduction

    rep = load_reproduction(ROOT / "notebooks" / "data" / "claims_quick.json")
    rep = dataclasses.replace(rep, papers=CLAIM_PAPERS, results=tuple(
        r for r in rep.results if r.claim.paper in CLAIM_PAPERS))
    return claims_report.write(rep, tmp_path_factory.mktemp("claims") / "report")


def _measure(page: Path, tmp_path: Path) -> dict:
    harness = tmp_path / "harness.html"
    harness.write_text(HARNESS.format(src=page.as_uri(), width=WIDTH))
    dom = _chromium("--allow-file-access-from-files", "--virtual-time-budget=10000",
                    "--dump-dom", harness.as_uri())
    m = re.search(r'<pre id="out">(.*?)</pre>', dom, re.S)
    assert m and m.group(1) != "pending", dom[-2000:]
    return json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&"))


def _fits(seen: dict, page: str) -> None:
    """No sideways scroll of the page, of a table's box or of the sidebar; every table and
    every column header inside the window; no text under 10 px."""
    assert seen["scroll"] <= seen["width"], f"{page} scrolls sideways: {seen['scroll']} px"
    assert not seen["scrolled"], f"{page}: a box scrolls sideways: {seen['scrolled']}"
    assert all(right <= seen["width"] + 0.5 for _, _, right in seen["tables"]), seen["tables"]
    assert all(right <= seen["width"] + 0.5 for _, right in seen["headers"]), seen["headers"]
    assert not seen["small"], f"text under 10 px: {seen['small']}"


def _screenshot(page: Path, name: str, tmp_path: Path) -> None:
    shots = Path(os.environ.get("FEDBOUND_ARTIFACTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    shot = shots / f"report_{name.replace('/', '_')}.png"
    _chromium(f"--window-size={WIDTH},2000", f"--screenshot={shot}", page.as_uri())
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


CHECK_PAGES = ["index.html", *(report.page_name(k) for k in RESULT_PAGES), "references.html",
               "derivations/hfl_refined.html"]


@pytest.mark.parametrize("page", CHECK_PAGES)
def test_a_check_report_page_fits_1280_px_and_shows_each_status(site, page, tmp_path):
    seen = _measure(site / page, tmp_path)
    _fits(seen, page)
    text = (site / page).read_text()
    # every formula (the displayed ones, and the inline ones of the errata) was laid out ...
    assert len(seen["maths"]) == len(re.findall(r"<math[ >]", text))
    assert all(w > 0 and h > 0 for w, h, _ in seen["maths"]), seen["maths"]  # ... with a size
    if page.startswith("results/"):
        assert len(seen["maths"]) > 10
        # the witness tables keep their last column in view
        assert any(h.strip() == "reproduce" for h, _ in seen["headers"])
    if page in ("index.html",) or page.startswith("results/"):
        _statuses_shown(seen, text, page)
    _screenshot(site / page, page, tmp_path)


def _statuses_shown(seen: dict, text: str, page: str) -> None:
    """A status colour per row: each row of a status table shows its status in a badge, the
    colours tell the statuses apart (white on a saturated colour), and a refuted or
    rate-refuted result's row is tinted with its own light colour, never as holding."""
    badges = [r for r in seen["rows"] if r is not None]
    statuses = set(re.findall(r'<td class="status"><span class="badge status-([\w-]+)"', text)
                   + re.findall(r'<td><span class="badge status-([\w-]+)"', text))
    assert {s for s, _, _, _ in badges} == statuses and statuses
    colour = {s: c for s, c, _, _ in badges}
    assert all(colour[s] == c for s, c, _, _ in badges), badges   # one colour per status
    assert len(set(colour.values())) == len(colour), colour       # and none shared
    assert all(fg == "rgb(255, 255, 255)" for _, _, fg, _ in badges)
    tint = {s: {t for b, _, _, t in badges if b == s} for s in bounds.REFUTED}
    for status, tints in tint.items():   # one light tint per refuted status, not green
        assert len(tints) <= 1 and HOLDS_TINT not in tints, (status, tints)
    if page == "index.html":
        assert {"refuted", "rate-refuted", "holds-with-erratum", "unverified"} <= statuses
        assert tint["refuted"] and tint["rate-refuted"] and tint["refuted"] != tint["rate-refuted"]
        assert len(seen["rows"]) > len(badges)  # the header and paper rows carry none
    else:   # the verdict banner: each variant's status and its default verdict
        key = page.removeprefix("results/").removesuffix(".html").replace("_", ".", 1)
        variants = [b.split(":")[0].split("variant ")[-1] for b in seen["banner"]]
        assert variants == list(bounds.variants(key))
        assert all(bounds.get(key, v).status in b and "on the default scenario: holds" in b
                   for v, b in zip(variants, seen["banner"], strict=True))


def test_the_sidebar_keeps_the_longest_key_whole(site, tmp_path):
    """mllsgd.theorem1_limit, the longest key, wraps after its underscore in the sidebar
    instead of being cut (the sidebar does not scroll: ``_fits``)."""
    page = site / report.page_name("mllsgd.theorem1_limit")
    assert "mllsgd.<wbr>theorem1_<wbr>limit" in page.read_text()
    assert not _measure(page, tmp_path)["scrolled"]


@pytest.mark.parametrize("page", ["index.html", *(f"claims/{p}.html" for p in CLAIM_PAPERS)])
def test_a_claims_report_page_fits_1280_px(claims_site, page, tmp_path):
    seen = _measure(claims_site / page, tmp_path)
    _fits(seen, page)
    if page.startswith("claims/"):   # every claim's setting table, opened, fits too
        assert len(seen["tables"]) >= 2 * len(re.findall(r'<section class="claim"',
                                                          (claims_site / page).read_text()))
    _screenshot(claims_site / page, f"claims_{page}", tmp_path)
