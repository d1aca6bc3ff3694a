"""Every ```python block of the documentation (``docs/``, Markdown) runs, in order, one
namespace per page, in a fresh interpreter from a temporary directory (the README's blocks
run in ``tests/test_readme.py``, the docstrings' examples in ``tests/test_docstrings.py``).

A block that must not run (one that installs something, or takes minutes) is preceded by
the line ``<!-- not run: REASON -->``; it is listed as a skip with its reason, never
dropped silently. A block preceded by ``<!-- excerpt: PATH -->`` (any language) shows part of
the repository's file PATH (``docs/extending.md`` walks through the example plugin that
way): it is not run, and must appear in that file word for word.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
BLOCK = re.compile(r"(?:^<!-- not run: (?P<skip>.*?) -->\n)?^```python\n(?P<code>.*?)^```", re.M | re.S)
EXCERPT = re.compile(r"^<!-- excerpt: (?P<path>\S+) -->\n```\w*\n(?P<code>.*?)^```", re.M | re.S)
TIMEOUT = 600

#: runs the blocks given as JSON on standard input, in order, in one namespace
RUNNER = """
import json, sys
page, blocks = json.load(sys.stdin)
ns = {"__name__": "docs"}
for i, code in blocks:
    exec(compile(code, f"{page}, python block {i}", "exec"), ns)
"""


def blocks(text: str) -> list[tuple[int, str, str | None]]:
    """(number, code, reason not to run or None) of each ```python block of ``text`` that is
    not an excerpt."""
    shown = {m.start("code") for m in EXCERPT.finditer(text)}
    found = [m for m in BLOCK.finditer(text) if m.start("code") not in shown]
    return [(i, m["code"], m["skip"]) for i, m in enumerate(found, start=1)]


def excerpts(text: str) -> list[tuple[str, str]]:
    """(path in the repository, text) of each block of ``text`` marked as an excerpt."""
    return [(m["path"], m["code"]) for m in EXCERPT.finditer(text)]


PAGES = sorted(p for p in DOCS.rglob("*.md") if "_build" not in p.parts and blocks(p.read_text()))


def test_the_extension_guide_has_code_to_run():
    assert DOCS / "extending.md" in PAGES


def test_an_excerpt_is_recognised_and_not_run():
    text = ("<!-- excerpt: examples/plugin/pyproject.toml -->\n```toml\na = 1\n```\n\n"
            "<!-- excerpt: m.py -->\n```python\nx = 1\n```\n\n```python\ny = 2\n```\n")
    assert excerpts(text) == [("examples/plugin/pyproject.toml", "a = 1\n"), ("m.py", "x = 1\n")]
    assert blocks(text) == [(1, "y = 2\n", None)]


EXCERPTS = [(page, path, code) for page in sorted(DOCS.rglob("*.md")) if "_build" not in page.parts
            for path, code in excerpts(page.read_text())]


def test_the_extension_guide_walks_through_the_example_plugin():
    shown = {path for page, path, _ in EXCERPTS if page.name == "extending.md"}
    assert {"examples/plugin/pyproject.toml", "examples/plugin/fedbound_sgd/__init__.py",
            "examples/plugin/fedbound_sgd/theorems.py", "examples/plugin/fedbound_sgd/theorem.py",
            "examples/plugin/fedbound_sgd/adapter.py"} <= shown


@pytest.mark.parametrize("page, path, code", EXCERPTS,
                         ids=[f"{p.name}:{path}:{i}" for i, (p, path, _) in enumerate(EXCERPTS)])
def test_an_excerpt_is_word_for_word_in_its_file(page, path, code):
    assert code in (ROOT / path).read_text(), f"{page.name}: the excerpt of {path} is not in it"


def test_a_block_marked_not_run_is_recognised():
    found = blocks("<!-- not run: installs a package -->\n```python\nx = 1\n```\n\n"
                   "```python\ny = 2\n```\n")
    assert found == [(1, "x = 1\n", "installs a package"), (2, "y = 2\n", None)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_python_blocks_of_a_page_run(page, tmp_path):
    import json

    found = blocks(page.read_text())
    run = [(i, code) for i, code, skip in found if skip is None]
    env = {**os.environ, "MPLBACKEND": "Agg"}
    env.pop("FEDBOUND_PLUGINS", None)
    out = subprocess.run([sys.executable, "-c", RUNNER], input=json.dumps([page.name, run]),
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    assert out.returncode == 0, out.stdout + out.stderr
    skipped = [f"block {i}: {skip}" for i, _, skip in found if skip is not None]
    if skipped:
        pytest.skip(f"ran {len(run)} blocks; not run: {'; '.join(skipped)}")
