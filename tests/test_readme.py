"""Every command of README.md runs as written, from a directory outside the clone, and shows
what it prints.

How the README's fenced code blocks are read (``tests/doc_blocks.py`` states the rules of
``sh`` blocks and of the ``text`` blocks that show a block's output):

- ``sh`` blocks run, ``fedbound`` being the command of this interpreter and this source
  tree. The few commands that install something or take minutes are listed in ``SLOW``
  with the reason, and skipped (``make demo`` and ``make test`` then run as dry runs,
  ``make -n``); a listed command that is no longer in the README fails the test, so the list
  cannot go stale.
- ``python`` blocks run as scripts with this interpreter and must exit 0.
- A ``text`` block after a block is its output, abridged, and must be what it prints.
- Blocks without a language (a synopsis) are not run. A line of them that starts with
  ``fedbound`` is a usage line and must say so: an option in brackets, an alternative ``|``
  or a metavariable in capitals (``KEY``, ``JSON``); a runnable command cannot hide there.
- An inline ``fedbound ...`` in the prose is either such a usage form or the beginning of a
  command of an ``sh`` block, so it is run too.
- The citations are the package's bibliography's (``bounds/references.py``), entry for entry.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from doc_blocks import (
    FENCE,
    bare,
    blocks,
    check_make_command,
    commands,
    expected_status,
    is_usage,
    run_commands,
    shell_env,
    shown_in,
    with_outputs,
)

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
LANGUAGES = {"sh", "python", "text", ""}
#: the README is a front door: what fedbound is, its install, three uses, exit codes,
#: citations and links; the rest lives in docs/
MAX_LINES = 200
#: seconds a command may take before the test calls it hung: a generous ceiling, ten times what
#: the slowest (check --all, about 13 s) takes on an idle machine, so that load never fails it
TIMEOUT = 600

#: commands of the README that this test does not run, each with the reason
SLOW = {
    "pip install torch --index-url https://download.pytorch.org/whl/cpu": "installs torch's CPU "
        "build from the network; .ci/wheel.sh installs the pinned torch, then the wheel",
    "pip install -c constraints.txt .": "installs fedbound and torch; .ci/wheel.sh installs "
                                        "the built wheel and runs commands from it instead",
    "make demo": "creates a virtual environment and runs check --all: minutes; run dry below",
    "make test": "creates a virtual environment and runs this very test suite; run dry below",
}


def sh_blocks() -> list[list[str]]:
    return [commands(body) for lang, body in blocks(README) if lang == "sh"]


def all_commands() -> list[str]:
    return [bare(c) for block in sh_blocks() for c in block]


#: the interpreter whose fedbound the commands run: this one on this source tree, or an
#: installed fedbound's (``.ci/wheel.sh`` runs this file against the built wheel, installed
#: alone into a fresh environment, with ``FEDBOUND_README_PYTHON`` naming its interpreter)
PYTHON = os.environ.get("FEDBOUND_README_PYTHON", sys.executable)


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> dict:
    """The environment of the commands: ``fedbound`` on PATH is :data:`PYTHON` running
    ``verify.cli``, this tree's unless another interpreter is named."""
    return shell_env(tmp_path_factory.mktemp("bin"), PYTHON,
                     ROOT if PYTHON == sys.executable else None)


def _id(block) -> str:
    return bare(commands(block[0])[0])[:40]


SH = [(body, out) for lang, body, out in with_outputs(README) if lang == "sh"]
PY = [(body, out) for lang, body, out in with_outputs(README) if lang == "python"]


def test_the_readme_is_a_front_door():
    """At most 200 lines, with links to the docs pages that hold the rest, each of which
    exists, and the blocks this test reads."""
    assert README.count("\n") <= MAX_LINES
    for page in ("install", "quickstart", "choosing", "claims", "results", "performance", "cli",
                 "extending"):
        assert f"docs/{page}.md" in README, page
        assert (ROOT / "docs" / f"{page}.md").is_file(), page
    assert {lang for lang, _ in blocks(README)} <= LANGUAGES
    assert SH and PY and any(out for _, out in SH + PY)   # examples with their output


@pytest.mark.parametrize("block", SH, ids=_id)
def test_every_command_runs_as_written_with_the_exit_status_and_output_the_readme_states(
        block, env, tmp_path):
    body, shown = block
    printed = run_commands(body, tmp_path, env, "README.md", skip=SLOW, timeout=TIMEOUT)
    if shown is not None:
        assert shown_in(shown, printed) == [], printed[-3000:]


@pytest.mark.parametrize("block", PY, ids=lambda b: b[0].splitlines()[0][:40])
def test_every_python_example_runs_and_prints_what_the_readme_shows(block, env, tmp_path):
    code, shown = block
    script = tmp_path / "example.py"
    script.write_text(code)
    r = subprocess.run([PYTHON, str(script)], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr[-3000:]
    if shown is not None:
        assert shown_in(shown, r.stdout) == [], r.stdout[-3000:]


@pytest.mark.skipif(shutil.which("make") is None, reason="no make on PATH")
def test_the_make_commands_run_dry(tmp_path):
    """``make demo`` and ``make test`` as ``make -n`` (tests/doc_blocks.py): the install, then
    check --all and the test suite."""
    made = {bare(c): check_make_command(c, tmp_path / "v", ROOT, "README.md")
            for c in all_commands() if c.startswith("make")}
    assert set(made) == {"make demo", "make test"}
    assert made["make demo"][-1] == f"{tmp_path / 'v'}/bin/fedbound check --all"
    assert made["make test"][-1].startswith(f"{tmp_path / 'v'}/bin/python -m pytest")
    assert any("torch==2.13.0" in line for line in made["make test"])


def test_every_slow_command_is_still_in_the_readme():
    assert not set(SLOW) - set(all_commands()), "SLOW lists commands the README dropped"


def test_blocks_without_a_language_hold_usage_lines_not_commands():
    lines = [line for lang, body in blocks(README) if lang == ""
             for line in body.splitlines() if line.startswith("fedbound ")]
    assert [line for line in lines if not is_usage(line)] == []


def test_inline_fedbound_commands_are_usage_forms_or_run_above():
    prose = FENCE.sub("", README)
    spans = set(re.findall(r"`(fedbound [^`]*)`", prose))
    run = [shlex.split(c) for c in all_commands()]
    unrun = [s for s in spans if not is_usage(s)
             and not any(c[:len(shlex.split(s))] == shlex.split(s) for c in run)]
    assert spans and unrun == []


def test_the_exit_codes_are_every_code_fedbound_returns():
    """The README's table of exit statuses lists the codes of ``verify.cli.common.EXIT_STATUS``
    (74 included), each once."""
    from fedbound.verify.cli.common import EXIT_STATUS

    table = re.findall(r"^\| *(\d+) *\|", README, re.M)
    assert sorted(map(int, table)) == sorted(EXIT_STATUS)


def test_the_citations_are_the_bibliographys():
    """How to cite the four papers: each entry of bounds/references.py, verbatim; and
    fedbound itself at the version of pyproject.toml."""
    from importlib.metadata import version

    from fedbound.bounds.references import PAPERS

    cite = README[README.index("## Cite"):]
    for paper in PAPERS.values():
        assert paper.entry() in " ".join(cite.split()), paper.key
    assert f"version = {{{version('fedbound')}}}" in cite


#: the papers as the README's counts name them
PAPER_NAMES = {"MLL-SGD": "mllsgd", "HFL": "hfl", "TDCD": "tdcd", "AFL": "afl"}


def counted(row: str) -> tuple[int, dict[str, int]]:
    """The total and the per-paper counts of a row of the README's "In numbers" table:
    ``| what | 17 (MLL-SGD 3, HFL 4, TDCD 3, AFL 7), ... |``."""
    section = README[README.index("## In numbers"):].split("\n## ")[0]
    line = next(line for line in section.splitlines() if line.startswith(f"| {row} |"))
    m = re.search(r"\| (\d+) \(([^)]*)\)", line)
    per = {PAPER_NAMES[name]: int(n) for name, n in re.findall(r"([\w-]+) (\d+)", m[2])}
    return int(m[1]), per


def test_the_counts_in_numbers_are_the_registries():
    """The README's one place for the numbers that change as fedbound grows: its counts of
    results, variants and claims are the registries' (update that table when this fails)."""
    from collections import Counter

    from fedbound import bounds
    from fedbound.verify import claims

    # the four papers' (a test may have registered a plugin of its own in this process)
    keys = [k for k in bounds.keys() if k.split(".")[0] in PAPER_NAMES.values()]
    assert counted("encoded results") == (len(keys), Counter(k.split(".")[0] for k in keys))
    variants = sum(len(bounds.variants(k)) for k in keys)
    assert f"{variants} variants" in README[README.index("## In numbers"):]
    found = [c for c in claims.claims() if c.paper in PAPER_NAMES.values()]
    assert counted("the papers' experimental claims") == (len(found),
                                                          Counter(c.paper for c in found))


def test_the_plugins_and_their_tightness_tables_are_introduced():
    """The README names the command that lists the plugins and says that each plugin ships
    its own tightness table (there is no central one)."""
    assert "fedbound plugins" in all_commands()
    prose = " ".join(FENCE.sub("", README).split())
    assert "ships its own witnesses and its own tightness table (`tightness.json`" in prose
    assert "**tightest ratio**" in prose and "**slack**" in prose and "**regret**" in prose


@pytest.mark.parametrize("line, usage", [
    ("fedbound list [--json]", True),
    ("fedbound scenario KEY", True),
    ("fedbound reproduce PAPER...", True),
    ("fedbound reproduce hfl.", False),
    ("fedbound --version | --plugin MODULE ... | --debug ...", True),
    ("fedbound list", False),
    ("fedbound check afl.theorem3 --witness proof --exact", False),
    ("fedbound bound mllsgd.theorem1 --params '{\"L\": 1}'", False),
])
def test_the_usage_rule(line, usage):
    assert is_usage(line) is usage


def test_the_block_reader():
    text = ("a\n```sh\nfedbound list   # all\n# a comment\nfedbound x \\\n  --y 1  # exits 1\n"
            "```\n- item\n\n  ```python\n  print(1)\n  ```\n```text\n1\n```\n")
    (lang1, sh), (lang2, py), (lang3, out) = blocks(text)
    assert (lang1, lang2, py, lang3) == ("sh", "python", "print(1)\n", "text")
    cmds = commands(sh)
    assert cmds == ["fedbound list   # all", "fedbound x \\\n  --y 1  # exits 1"]
    assert [bare(c) for c in cmds] == ["fedbound list", "fedbound x    --y 1"]
    assert [expected_status(c) for c in cmds] == [0, 1]
    assert with_outputs(text) == [("sh", sh, None), ("python", py, "1\n")]


@pytest.mark.parametrize("shown, printed, missing", [
    ("holds bound 3.511 >= measured 1.503", "x\nholds bound 3.511 >= measured 1.503\n", []),
    ("a 0.01308\n...\nb 27.2%", "a 0.01308\nz\nb 27.2%", []),
    ("a 0.01308", "a 0.01309", ["a 0.01308"]),        # the last digit shown counts
    ("a 0.0131", "a 0.01308", []),                    # fewer digits shown: rounded
    ("b 2\na 1", "a 1\nb 2", ["a 1"]),               # in order
    ("a holds 1", "a violated 1", ["a holds 1"]),     # words too
])
def test_an_output_shown_is_what_is_printed(shown, printed, missing):
    assert shown_in(shown, printed) == missing
