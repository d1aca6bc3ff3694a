"""Every command of README.md runs as written, from a directory outside the clone.

How the README's fenced code blocks are read (the rule this test enforces):

- ``sh`` blocks hold commands. Each line is one command (a line ending in a backslash
  continues on the next); lines that start with ``#`` are comments. A command runs
  verbatim in bash, in a temporary directory shared by the commands of its block (in order),
  with ``fedbound`` the command of this interpreter and this source tree. It must exit 0,
  or N when its trailing comment says ``# exits N``. The few commands that install
  something or take minutes are listed in ``SLOW`` with the reason, and skipped; a listed
  command that is no longer in the README fails the test, so the list cannot go stale.
- ``python`` blocks run as scripts with this interpreter and must exit 0.
- ``json`` blocks are sweep specs and must be accepted by ``verify.sweep.SweepSpec``.
- Blocks without a language (the synopsis of the command line, the layout) are not run.
  A line of them that starts with ``fedbound`` is a usage line and must say so: an option
  in brackets, an alternative ``|`` or a metavariable in capitals (``KEY``, ``JSON``); a
  runnable command cannot hide there.
- An inline ``fedbound ...`` in the prose is either such a usage form or the beginning of a
  command of an ``sh`` block, so it is run too.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
LANGUAGES = {"sh", "python", "json", ""}
#: seconds a command may take before the test calls it hung: a generous ceiling, ten times what
#: the slowest (check --all, about 13 s) takes on an idle machine, so that load never fails it
TIMEOUT = 600

#: commands of the README that this test does not run, each with the reason
SLOW = {
    "pip install torch --index-url https://download.pytorch.org/whl/cpu": "installs torch's CPU "
        "build from the network; .ci/wheel.sh installs the pinned torch, then the wheel",
    "pip install -c constraints.txt .": "installs fedbound and torch; .ci/wheel.sh installs "
                                        "the built wheel and runs commands from it instead",
    "make demo": "creates a virtual environment and runs check --all: minutes",
    "make test": "creates a virtual environment and runs this very test suite",
    "make docs": "installs Sphinx and builds the documentation (CI builds it)",
}

_FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>\w*)\n(?P<body>.*?)^(?P=indent)```$",
                    re.M | re.S)
_EXITS = re.compile(r"\s#\s*exits (\d+)\b[^'\"]*$")
_USAGE = re.compile(r"\[|\||(?:^|(?<=[\s\[|]))[A-Z][A-Z_]*(?=[\s\]|,]|$)")


def blocks(text: str = README) -> list[tuple[str, str]]:
    """The fenced code blocks of ``text`` as (language, body), the body dedented."""
    out = []
    for m in _FENCE.finditer(text):
        n = len(m["indent"])
        out.append((m["lang"], "".join(line[n:] for line in m["body"].splitlines(True))))
    return out


def commands(body: str) -> list[str]:
    """The commands of an ``sh`` block: its lines, continuations joined, comments left out."""
    out, pending = [], ""
    for line in body.splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        pending += line + "\n"
        if not line.endswith("\\"):
            out.append(pending.rstrip("\n"))
            pending = ""
    assert not pending, f"an sh block ends in a continuation: {pending!r}"
    return out


def bare(command: str) -> str:
    """A command without its trailing comment, continuations folded into one line."""
    return re.split(r"\s+#\s", command.replace("\\\n", " "))[0].strip()


def expected_status(command: str) -> int:
    m = _EXITS.search(command)
    return int(m[1]) if m else 0


def is_usage(line: str) -> bool:
    return bool(_USAGE.search(line.removeprefix("fedbound")))


def sh_blocks() -> list[list[str]]:
    return [commands(body) for lang, body in blocks() if lang == "sh"]


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
    bindir = tmp_path_factory.mktemp("bin")
    shim = bindir / "fedbound"
    shim.write_text(f'#!/bin/sh\nexec {shlex.quote(PYTHON)} -m fedbound "$@"\n')
    shim.chmod(shim.stat().st_mode | stat.S_IXUSR)
    path = os.pathsep.join([str(bindir), os.environ.get("PATH", "")])
    source = {"PYTHONPATH": str(ROOT)} if PYTHON == sys.executable else {}
    base = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return {**base, "PATH": path, "COLUMNS": "100", **source}


def _id(block: list[str]) -> str:
    return bare(block[0])[:40]


def test_the_readme_uses_only_the_languages_this_test_reads():
    assert {lang for lang, _ in blocks()} <= LANGUAGES
    assert sh_blocks() and any(lang == "python" for lang, _ in blocks())


@pytest.mark.parametrize("block", sh_blocks(), ids=_id)
def test_every_command_runs_as_written_with_the_exit_status_the_readme_states(
        block, env, tmp_path):
    for command in block:
        if bare(command) in SLOW:
            continue
        r = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True,
                           text=True, timeout=TIMEOUT)
        assert r.returncode == expected_status(command), (
            f"{command}\nexited {r.returncode}, the README says {expected_status(command)}\n"
            f"{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
        assert "Traceback" not in r.stderr, r.stderr


@pytest.mark.parametrize("code", [b for lang, b in blocks() if lang == "python"])
def test_every_python_example_runs(code, env, tmp_path):
    script = tmp_path / "example.py"
    script.write_text(code)
    r = subprocess.run([PYTHON, str(script)], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr[-3000:]


@pytest.mark.parametrize("text", [b for lang, b in blocks() if lang == "json"])
def test_every_json_block_is_a_sweep_spec_fedbound_accepts(text):
    from fedbound.verify.sweep import SweepSpec

    spec = SweepSpec.from_dict(json.loads(text))
    assert spec.size() == len(spec.entries()) > 0


def test_every_slow_command_is_still_in_the_readme():
    assert not set(SLOW) - set(all_commands()), "SLOW lists commands the README dropped"


def test_blocks_without_a_language_hold_usage_lines_not_commands():
    lines = [line for lang, body in blocks() if lang == ""
             for line in body.splitlines() if line.startswith("fedbound")]
    assert lines, "the synopsis of the command line is gone"
    assert [line for line in lines if not is_usage(line)] == []


def test_inline_fedbound_commands_are_usage_forms_or_run_above():
    prose = _FENCE.sub("", README)
    spans = set(re.findall(r"`(fedbound [^`]*)`", prose))
    run = [shlex.split(c) for c in all_commands()]
    unrun = [s for s in spans if not is_usage(s)
             and not any(c[:len(shlex.split(s))] == shlex.split(s) for c in run)]
    assert spans and unrun == []


@pytest.mark.parametrize("line, usage", [
    ("fedbound list [--json]", True),
    ("fedbound scenario KEY", True),
    ("fedbound --version | --plugin MODULE ... | --debug ...", True),
    ("fedbound list", False),
    ("fedbound check afl.theorem3 --witness proof --exact", False),
    ("fedbound bound mllsgd.theorem1 --params '{\"L\": 1}'", False),
])
def test_the_usage_rule(line, usage):
    assert is_usage(line) is usage


def test_the_block_reader():
    text = ("a\n```sh\nfedbound list   # all\n# a comment\nfedbound x \\\n  --y 1  # exits 1\n"
            "```\n- item\n\n  ```python\n  print(1)\n  ```\n")
    (lang1, sh), (lang2, py) = blocks(text)
    assert (lang1, lang2, py) == ("sh", "python", "print(1)\n")
    cmds = commands(sh)
    assert cmds == ["fedbound list   # all", "fedbound x \\\n  --y 1  # exits 1"]
    assert [bare(c) for c in cmds] == ["fedbound list", "fedbound x    --y 1"]
    assert [expected_status(c) for c in cmds] == [0, 1]
