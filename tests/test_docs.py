"""Every code block of the documentation (``docs/``, Markdown) runs in CI: the README's blocks
run in ``tests/test_readme.py``, the docstrings' examples in ``tests/test_docstrings.py``.

- ```python blocks run, in order, one namespace per page, in a fresh interpreter from a
  temporary directory.
- ```sh blocks run as the README's do (``tests/doc_blocks.py``: one command a line, each
  exiting 0 or the status its ``# exits N`` comment states), ``fedbound`` and ``python``
  being this interpreter on this source tree, each block in a temporary directory of its
  own; a ```text block after one is its output, abridged, and must be what it prints.
- ```json blocks are sweep specs that ``verify.sweep.SweepSpec`` accepts.
- Blocks without a language hold no runnable command: a line starting with ``fedbound`` is a
  usage line (an option in brackets, an alternative ``|`` or a metavariable in capitals).

A block of ``make`` commands (which create a virtual environment and install torch) is
preceded by the line ``<!-- dry run: REASON -->``: each command runs as ``make -n``, into a
virtual environment path of the test's own, must exit 0, and each ``VARIABLE=value`` it sets
must reach the commands printed (``tests/doc_blocks.py``). A block that must not run at all
(one that installs packages from the network) is preceded by the line ``<!-- not run:
REASON -->``, which names what runs it instead in CI; it is listed as a skip with its
reason, never dropped silently. A block preceded by ``<!-- excerpt: PATH -->`` (any language) shows part of
the repository's file PATH (``docs/extending.md`` walks through the example plugin that
way): it is not run, and must appear in that file word for word. The page of the encoded
results lists every registered result.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from doc_blocks import blocks, check_make_command, commands, is_usage, run_commands, shell_env, shown_in

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
#: a fenced block of any language, with the marker that keeps it from running
BLOCK = re.compile(r"(?:^<!-- not run: (?P<skip>.*?) -->\n)?^```(?P<lang>\w*)\n(?P<code>.*?)^```",
                   re.M | re.S)
#: a ```text block right after a block: its output
OUTPUT = re.compile(r"\s*```text\n(?P<shown>.*?)^```", re.M | re.S)
#: a block that shows part of a file of the repository: not run, found in that file
EXCERPT = re.compile(r"^<!-- excerpt: (?P<path>\S+) -->\n```\w*\n(?P<code>.*?)^```", re.M | re.S)
#: a block of make commands, run as dry runs
DRY = re.compile(r"^<!-- dry run: (?P<why>.*?) -->\n```sh\n(?P<code>.*?)^```", re.M | re.S)
TIMEOUT = 600

#: runs the blocks given as JSON on standard input, in order, in one namespace
RUNNER = """
import json, sys
page, blocks = json.load(sys.stdin)
ns = {"__name__": "docs"}
for i, code in blocks:
    exec(compile(code, f"{page}, python block {i}", "exec"), ns)
"""

PAGES_MD = sorted(p for p in DOCS.rglob("*.md") if "_build" not in p.parts)


def fenced(text: str, lang: str) -> list[tuple[int, str, str | None, str | None]]:
    """(number, code, reason not to run or None, the output shown after it or None) of each
    block of language ``lang`` of ``text`` that is not an excerpt."""
    shown_files = {m.start("code") for m in EXCERPT.finditer(text)}
    out = []
    for i, m in enumerate((m for m in BLOCK.finditer(text) if m["lang"] == lang
                           and m.start("code") not in shown_files), start=1):
        shown = OUTPUT.match(text, m.end())
        out.append((i, m["code"], m["skip"], shown["shown"] if shown else None))
    return out


def excerpts(text: str) -> list[tuple[str, str]]:
    """(path in the repository, text) of each block of ``text`` marked as an excerpt."""
    return [(m["path"], m["code"]) for m in EXCERPT.finditer(text)]


def _id(page: Path) -> str:
    return str(page.relative_to(ROOT))


PAGES = [p for p in PAGES_MD if fenced(p.read_text(), "python")]
SH = [(p, i, code, skip, shown) for p in PAGES_MD
      for i, code, skip, shown in fenced(p.read_text(), "sh")]


def test_the_guide_has_code_to_run():
    assert DOCS / "extending.md" in PAGES and DOCS / "quickstart.md" in PAGES
    assert {p.name for p, *_ in SH} >= {"install.md", "quickstart.md", "choosing.md", "claims.md",
                                         "results.md"}


def test_make_commands_run_dry():
    """docs/install.md's make commands are read as dry runs; a variable that reaches no command
    fails."""
    (found,) = [m["code"] for m in DRY.finditer((DOCS / "install.md").read_text())]
    assert "make test TORCH_INDEX=" in found and "PIP_ARGS=" in found


@pytest.mark.skipif(shutil.which("make") is None, reason="no make on PATH")
def test_a_variable_that_reaches_no_command_fails(tmp_path):
    assert check_make_command("make demo  # the demo", tmp_path / "v", ROOT, "x")[-1].endswith(
        "bin/fedbound check --all")
    with pytest.raises(AssertionError, match="NOWHERE=zz reaches no command"):
        check_make_command("make demo NOWHERE=zz", tmp_path / "v", ROOT, "x")


def test_an_excerpt_is_recognised_and_not_run():
    text = ("<!-- excerpt: examples/plugin/pyproject.toml -->\n```toml\na = 1\n```\n\n"
            "<!-- excerpt: m.py -->\n```python\nx = 1\n```\n\n```python\ny = 2\n```\n")
    assert excerpts(text) == [("examples/plugin/pyproject.toml", "a = 1\n"), ("m.py", "x = 1\n")]
    assert fenced(text, "python") == [(1, "y = 2\n", None, None)]


EXCERPTS = [(page, path, code) for page in PAGES_MD for path, code in excerpts(page.read_text())]


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
    found = fenced("<!-- not run: installs a package -->\n```python\nx = 1\n```\n\n"
                   "```python\ny = 2\n```\n```text\n2\n```\n", "python")
    assert found == [(1, "x = 1\n", "installs a package", None), (2, "y = 2\n", None, "2\n")]


@pytest.mark.parametrize("page", PAGES, ids=_id)
def test_the_python_blocks_of_a_page_run(page, tmp_path):
    found = fenced(page.read_text(), "python")
    run = [(i, code) for i, code, skip, _ in found if skip is None]
    env = {**os.environ, "MPLBACKEND": "Agg"}
    env.pop("FEDBOUND_PLUGINS", None)
    out = subprocess.run([sys.executable, "-c", RUNNER], input=json.dumps([page.name, run]),
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    assert out.returncode == 0, out.stdout + out.stderr
    skipped = [f"block {i}: {skip}" for i, _, skip, _ in found if skip is not None]
    if skipped:
        pytest.skip(f"ran {len(run)} blocks; not run: {'; '.join(skipped)}")


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> dict:
    base = shell_env(tmp_path_factory.mktemp("bin"), sys.executable, ROOT)
    base.pop("FEDBOUND_PLUGINS", None)
    return {**base, "MPLBACKEND": "Agg"}


@pytest.mark.parametrize("block", SH, ids=lambda b: f"{_id(b[0])}, sh block {b[1]}")
def test_the_sh_blocks_of_a_page_run_as_written(block, env, tmp_path):
    page, _, code, skip, shown = block
    if skip is not None:
        pytest.skip(f"not run: {skip}")
    if code in {m["code"] for m in DRY.finditer(page.read_text())}:
        if shutil.which("make") is None:
            pytest.skip("a dry run of make commands, and no make on PATH")
        for command in commands(code):
            check_make_command(command, tmp_path / "venv", ROOT, _id(page))
        return
    printed = run_commands(code, tmp_path, env, f"docs/{page.name}", timeout=TIMEOUT)
    if shown is not None:
        assert shown_in(shown, printed) == [], printed[-3000:]


def own_blocks(page: Path) -> list[tuple[str, str]]:
    """The fenced blocks of ``page`` (language, body) but its excerpts of other files."""
    return blocks(EXCERPT.sub("", page.read_text()))


@pytest.mark.parametrize("text", [b for p in PAGES_MD for lang, b in own_blocks(p) if lang == "json"])
def test_every_json_block_is_a_sweep_spec_fedbound_accepts(text):
    from fedbound.verify.sweep import SweepSpec

    spec = SweepSpec.from_dict(json.loads(text))
    assert spec.size() == len(spec.entries()) > 0


def test_blocks_without_a_language_hold_usage_lines_not_commands():
    lines = [line for p in PAGES_MD for lang, body in own_blocks(p) if lang == ""
             for line in body.splitlines() if line.startswith("fedbound ")]
    assert len(lines) > 20, "the synopsis of the command line (docs/cli.md) is gone"
    assert [line for line in lines if not is_usage(line)] == []


def test_the_results_page_lists_every_result_with_its_variants():
    """docs/results.md's table: a row per registered result, naming each of its variants."""
    from fedbound import bounds

    rows = {m[1]: m[2] for m in re.finditer(r"^\| `([\w.]+)`[^|]*\|[^|]*\| ([^|]*) \|",
                                            (DOCS / "results.md").read_text(), re.M)}
    text = (DOCS / "results.md").read_text()
    missing = [k for k in bounds.keys() if f"`{k}`" not in text]
    assert missing == []
    for key, variants in rows.items():
        if key in bounds.keys():
            named = set(re.findall(r"[\w-]+", variants.replace("**", "")))
            assert named == set(bounds.variants(key)), key


#: a path of the repository as the README and the docs pages name it (`verify/report.py`,
#: `.ci/wheel.sh`, `results/<key>.html` is a pattern, not a file of the clone)
REPO_PATH = re.compile(r"(?<![\w/.-])((?:\.ci|docs|bounds|sim|verify|tests|benchmarks|notebooks|"
                       r"examples)/[\w/.-]*\w)(?![\w<*])")


def named_paths(page: Path) -> list[str]:
    """The repository paths that ``page`` names, but the built site (``docs/_build``)."""
    return [m[1] for m in REPO_PATH.finditer(page.read_text()) if "_build" not in m[1]]


def exists(path: str, page: Path) -> bool:
    """``path`` is a file or folder of the clone, from its root or from ``page``'s folder (a
    toctree entry), with or without its suffix (``notebooks/00_quickstart``)."""
    return any((base / path).exists() or any(base.glob(f"{path}.*")) for base in (ROOT, page.parent))


def test_the_path_reader():
    page = ROOT / "README.md"
    text = "`verify/report.py`, (.ci/wheel.sh), `results/<key>.html`, docs/_build/html, bounds/x.py"
    found = [m[1] for m in REPO_PATH.finditer(text)]
    assert found == ["verify/report.py", ".ci/wheel.sh", "docs/_build/html", "bounds/x.py"]
    assert exists("verify/report.py", page) and not exists("bounds/x.py", page)
    assert exists("notebooks/00_quickstart", page)


@pytest.mark.parametrize("page", [ROOT / "README.md", *PAGES_MD], ids=_id)
def test_every_file_a_page_names_exists(page):
    """No page sends a reader to a file that is gone (``verify/tightness.json`` became each
    plugin's ``tightness.json``, ``bounds/catalog.py`` the registry)."""
    assert [p for p in named_paths(page) if not exists(p, page)] == []


def test_every_page_is_in_a_toctree():
    """Every page of the docs is reachable from the index's tables of contents (Sphinx, which
    ``make docs`` runs with warnings as errors, would also refuse an orphan)."""
    index = (DOCS / "index.md").read_text()
    listed = {line.strip() for lang, body in blocks(index) if lang == "{toctree}"
              for line in body.splitlines() if line.strip() and not line.startswith(":")}
    pages = {str(p.relative_to(DOCS).with_suffix("")) for p in [*PAGES_MD, *DOCS.glob("*.rst")]}
    assert listed == pages - {"index"}
