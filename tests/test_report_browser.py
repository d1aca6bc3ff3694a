"""The report as a reader sees it: ``index.html`` and a result page opened in headless
Chromium (Debian's ``chromium``; skipped where there is none). At 1280 px every statement's
MathML must lay out (a non-zero box), no table may overflow the page, no text is set under
10 px (MathML's scripts aside: their size is the formula's typography), and every row that
carries a status shows it in that status's colour, one colour per status, refuted and
rate-refuted apart from the rest. Screenshots go to ``$FEDBOUND_ARTIFACTS`` (CI keeps that
directory) or the test's temporary directory.

The page is loaded in an iframe of a small harness page whose script measures it and writes
the measurements into the harness's DOM, which ``--dump-dom`` prints: no browser driver
package needed."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from bounded import CEILING

from fedbound import bounds
from fedbound.verify import report
from fedbound.verify import rows as rows_module

BROWSER = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(BROWSER is None, reason="no chromium on PATH (CI installs "
                                "Debian's chromium package; install it to run this test)")
WIDTH = 1280
#: afl.theorem3 has the longest errata, afl.corollary1 the longest inline formula in one
KEYS = ("mllsgd.theorem1", "afl.theorem3", "afl.corollary1")

HARNESS = """<!DOCTYPE html><html><body style="margin:0">
<iframe id="f" src="{src}" style="width:{width}px;height:900px;border:0"></iframe>
<pre id="out">pending</pre>
<script>
document.getElementById("f").onload = function () {{
  var d = this.contentDocument, vw = d.documentElement.clientWidth;
  var box = function (e) {{ var r = e.getBoundingClientRect(); return [r.width, r.height, r.right]; }};
  document.getElementById("out").textContent = JSON.stringify({{
    width: vw, scroll: d.documentElement.scrollWidth,
    maths: Array.prototype.map.call(d.querySelectorAll("math"), box),
    tables: Array.prototype.map.call(d.querySelectorAll("table"), box),
    small: Array.prototype.filter.call(d.querySelectorAll("body *"), function (e) {{
      var own = Array.prototype.some.call(e.childNodes, function (n) {{
        return n.nodeType === 3 && n.textContent.trim(); }});
      return own && !e.closest("math") && e.getClientRects().length &&
        parseFloat(d.defaultView.getComputedStyle(e).fontSize) < 10;
    }}).map(function (e) {{ return [e.tagName, e.textContent.slice(0, 40),
      d.defaultView.getComputedStyle(e).fontSize]; }}),
    rows: Array.prototype.map.call(d.querySelectorAll("tr"), function (r) {{
      var b = r.querySelector(".badge");
      return b ? [b.textContent, d.defaultView.getComputedStyle(b).backgroundColor,
                  d.defaultView.getComputedStyle(b).color] : null; }}),
    banner: Array.prototype.map.call(d.querySelectorAll(".banner > p"), function (p) {{
      return p.textContent; }})}});
}};
</script></body></html>"""


def _chromium(*args: str) -> str:
    sandbox = ["--no-sandbox"] if os.geteuid() == 0 else []
    proc = subprocess.run([BROWSER, "--headless", "--disable-gpu", *sandbox, *args],
                          capture_output=True, text=True, timeout=CEILING)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def _rows() -> list:
    """Made-up default rows (the layout is under test, not the checks)."""
    verdict = {"verdict": "holds", "bound": 2.0, "measured_mean": 1.0, "measured_ci": [0.9, 1.1],
               "slack": 2.0, "admissible": True, "params": {"eta": 0.1}, "mode": "exact"}
    return [rows_module.Row(k, v, "default", "default", bounds.get(k, v).status, None, verdict, None, 0.0)
            for k in KEYS for v in bounds.variants(k)]


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    return report.write(_rows(), tmp_path_factory.mktemp("browser") / "report", seed=0,
                        battery=0)


@pytest.mark.parametrize("page", ["index.html", "results/afl_theorem3.html",
                                  "results/afl_corollary1.html"])
def test_math_lays_out_and_no_table_overflows(site, page, tmp_path):
    harness = tmp_path / "harness.html"
    harness.write_text(HARNESS.format(src=(site / page).as_uri(), width=WIDTH))
    dom = _chromium("--allow-file-access-from-files", "--virtual-time-budget=10000",
                    "--dump-dom", harness.as_uri())
    m = re.search(r'<pre id="out">(.*?)</pre>', dom, re.S)
    assert m and m.group(1) != "pending", dom[-2000:]
    seen = json.loads(m.group(1).replace("&quot;", '"'))
    text = (site / page).read_text()
    # every formula (the displayed ones, and the inline ones of the errata) was laid out ...
    assert len(seen["maths"]) == len(re.findall(r"<math[ >]", text))
    assert all(w > 0 and h > 0 for w, h, _ in seen["maths"]), seen["maths"]  # ... with a size
    if page.startswith("results/"):
        assert len(seen["maths"]) > 10
    assert seen["scroll"] <= seen["width"], f"the page scrolls sideways: {seen}"
    assert not seen["small"], f"text under 10 px: {seen['small']}"
    # a status colour per row: each row of a status table shows its status in a badge, and
    # the colours tell the statuses apart (white on a saturated colour)
    badges = [r for r in seen["rows"] if r is not None]
    statuses = set(re.findall(r'<td class="status"><span class="badge status-([\w-]+)"', text)
                   + re.findall(r'<td><span class="badge status-([\w-]+)"', text))
    assert {s for s, _, _ in badges} == statuses and statuses
    colour = {s: c for s, c, _ in badges}
    assert all(colour[s] == c for s, c, _ in badges), badges   # one colour per status
    assert len(set(colour.values())) == len(colour), colour    # and none shared
    assert all(fg == "rgb(255, 255, 255)" for _, _, fg in badges)
    if page == "index.html":
        assert {"refuted", "holds-with-erratum", "unverified"} <= statuses
        assert len(seen["rows"]) > len(badges)  # the header and paper rows carry none
    else:   # the verdict banner: each variant's status and its default verdict
        key = page.removeprefix("results/").removesuffix(".html").replace("_", ".", 1)
        assert [b.split(":")[0].split("variant ")[-1] for b in seen["banner"]] == list(bounds.variants(key))
        assert all(bounds.get(key, b.split(":")[0].split("variant ")[-1]).status in b
                   and "on the default scenario: holds" in b for b in seen["banner"])
    assert all(right <= seen["width"] + 0.5 for _, _, right in seen["tables"]), seen["tables"]
    shots = Path(os.environ.get("FEDBOUND_ARTIFACTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    shot = shots / f"report_{page.replace('/', '_')}.png"
    _chromium(f"--window-size={WIDTH},2000", f"--screenshot={shot}", (site / page).as_uri())
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
