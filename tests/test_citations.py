"""Citations a reader of the published papers can follow (issue 15, item 1).

Every text file of the project (README.md and every file under SWEPT_DIRS: the package,
the benchmarks, the docs, the examples, the tests and the notebooks) cites the papers by
theorem, equation, section, appendix or algorithm and never by the maintainers' private text
copies of the papers, their reading guides, a path above the repository or line numbers of
those copies (the forms FORBIDDEN matches; the self-test below builds made-up examples of
each).
"""

import json
import re
from pathlib import Path

import pytest

from fedbound import bounds
from fedbound.bounds.references import PAPERS

ROOT = Path(__file__).resolve().parents[1]

SWEPT = ("README.md",)

#: folders swept whole (their text files: SUFFIXES), except what GENERATED names; this file
#: too: its patterns and its self-test's examples are assembled so as to hold no forbidden form
SWEPT_DIRS = ("bounds", "sim", "verify", "benchmarks", "docs", "examples", "tests", "notebooks")
SUFFIXES = (".py", ".md", ".rst", ".toml", ".cfg", ".txt", ".html", ".css", ".ipynb")


#: what the folders hold that is generated from swept files (the notebooks' HTML renderings,
#: whose stylesheets trip the line-number pattern) or written by them (a report)
GENERATED = ("_build", "html", "quickstart-report")


def _swept_dir_files() -> list[str]:
    return sorted(str(p.relative_to(ROOT)) for d in SWEPT_DIRS for p in (ROOT / d).rglob("*")
                  if p.suffix in SUFFIXES and p.is_file() and not set(GENERATED) & set(p.parts))


#: what a citation a reader cannot follow looks like
FORBIDDEN = {
    # a folder of text copies (the package's verify/papers/ is fine) or a copy by its file name
    "text copy": re.compile(r"(?<![\w/])paper[s]/|\b(?:mllsgd|tdcd|afl|hfl\w*)\.txt\b"),
    "reading guide": re.compile(r"theor[y]/|[(]guide\b|\bguide\W{1,3}(section|§|\d|[A-Z]\d)"),
    "path outside the repository": re.compile(r"\.\./shared"),
    "line number of a text copy": re.compile(r"\b[LJA][1-9]\d{1,3}\b"),
}


def _text(path: Path) -> str:
    """The text a reader sees: the file, or a notebook's cell sources and the text of its
    stored outputs (images aside)."""
    if path.suffix == ".ipynb":
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        outputs = [o for c in cells for o in c.get("outputs", [])]
        texts = [o.get("text", "") for o in outputs] + [
            v for o in outputs for k, v in o.get("data", {}).items() if k.startswith("text/")]
        return "\n".join("".join(x) for x in ["".join(c["source"]) for c in cells] + texts)
    return path.read_text(encoding="utf-8")


def _hits(text: str) -> list[str]:
    return [f"{kind}: {line.strip()[:120]!r}" for line in text.splitlines()
            for kind, pattern in FORBIDDEN.items() if pattern.search(line)]


@pytest.mark.parametrize("name", SWEPT + tuple(_swept_dir_files()))
def test_swept_file_cites_no_text_copy(name):
    assert _hits(_text(ROOT / name)) == []


def test_the_swept_folders_are_not_empty():
    files = _swept_dir_files()
    assert all(any(f.startswith(d + "/") for f in files) for d in SWEPT_DIRS)
    assert {"verify/cli/__init__.py", "verify/report.py", "verify/templates/result.html"} <= set(files)


#: made-up examples of each forbidden form, joined from parts (SEP) so that no line of this
#: file holds one
SEP = ""
CAUGHT = [SEP.join(parts) for parts in (
    ("papers", "/example.txt ", "L", "247"), ("(", "J", "128)"), ("A", "298"),
    ("see theory", "/example.md"), ("..", "/shared/EXAMPLE.md"), ("(gui", "de 6.3)"),
    ("the gui", "de (section 3.4)"), ("L", "1102"), ("see papers", "/"), ("the copy afl", ".txt"),
)]


@pytest.mark.parametrize("line", CAUGHT)
def test_the_ratchet_catches_each_form(line):
    assert _hits(line)


@pytest.mark.parametrize("line", [
    "Ali & Arafa 2025, Theorem 2, eq. (20)", "# noqa: A001", "an L2 norm", "Fig. 13 (Section IV-D)",
    "verify/papers/afl.py", "entry_points.txt",
])
def test_the_ratchet_passes_a_readable_citation(line):
    assert _hits(line) == []


#: the papers whose module is swept: every citation of their results is checked below
SWEPT_PAPERS = ("hfl", "mllsgd", "tdcd", "afl")


def _swept_results():
    return [(row["key"], v) for row in bounds.list()
            if row["key"].split(".", 1)[0] in SWEPT_PAPERS for v in row["variants"]]


@pytest.mark.parametrize("key, variant", _swept_results())
def test_citations_name_their_paper_and_a_followable_place(key, variant):
    thm = bounds.get(key, variant)
    citations = [thm.citation, *(e.citation for e in thm.errata),
                 *(c.citation for c in thm.conditions),
                 *([thm.rate.citation] if thm.rate else [])]
    # a citation names its own paper, or (a condition of fedbound's own derivation,
    # tdcd.theorem1 [refined]) says first that fedbound derived it
    own = (PAPERS[key.split(".", 1)[0]].short, "derived by fedbound, not published")
    assert all(c.startswith(own) for c in citations), citations
    texts = [thm.title, thm.notes, *citations, *(p.description for p in thm.params.values()),
             *(f"{e.where} {e.printed} {e.corrected}" for e in thm.errata),
             *(c.name for c in thm.conditions)]
    assert _hits("\n".join(texts)) == []
