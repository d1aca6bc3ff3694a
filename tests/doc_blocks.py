"""How the README and the docs pages are read by their tests (``tests/test_readme.py``,
``tests/test_docs.py``): fenced code blocks, the commands of an ``sh`` block, the exit status
a command's comment states, usage lines, the output a ``text`` block shows, and the
environment in which ``fedbound`` is this interpreter's.

The rules:

- ``sh`` blocks hold commands. Each line is one command (a line ending in a backslash
  continues on the next); lines that start with ``#`` are comments. A command runs verbatim
  in bash, in a temporary directory shared by the commands of its block (in order). It must
  exit 0, or N when its trailing comment says ``# exits N``.
- ``make`` commands, which create a virtual environment and install torch, run as dry runs
  (:func:`make_dry_run`: ``make -n``, into a virtual environment path of the test's own):
  they must exit 0, and each ``VARIABLE=value`` they set must reach the commands printed.
- A ``text`` block right after a code block is that block's output, abridged: each of its
  lines but ``...`` must be a line of what the block prints, in order, its words the same
  and each number equal up to the last digit shown (:func:`shown_in`).
"""

from __future__ import annotations

import os
import re
import shlex
import stat
import subprocess
from pathlib import Path

#: a fenced block; its language may be a MyST directive (``{toctree}``), which no test runs
FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>\{[\w-]+\}|\w*)[^\n]*\n(?P<body>.*?)^(?P=indent)```$",
                   re.M | re.S)
_EXITS = re.compile(r"\s#\s*exits (\d+)\b[^'\"]*$")
_USAGE = re.compile(r"\[|\||(?:^|(?<=[\s\[|]))[A-Z][A-Z_]*(?=[\s\]|,]|\.\.\.|$)")
_NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")


def blocks(text: str) -> list[tuple[str, str]]:
    """The fenced code blocks of ``text`` as (language, body), the body dedented."""
    out = []
    for m in FENCE.finditer(text):
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
    """A usage line (``fedbound check KEY [--exact]``), not a command: an option in brackets,
    an alternative ``|`` or a metavariable in capitals."""
    return bool(_USAGE.search(line.removeprefix("fedbound")))


def with_outputs(text: str) -> list[tuple[str, str, str | None]]:
    """Each code block of ``text`` as (language, body, the ``text`` block after it or None)."""
    found = blocks(text)
    return [(lang, body, found[i + 1][1] if i + 1 < len(found) and found[i + 1][0] == "text"
             else None) for i, (lang, body) in enumerate(found) if lang != "text"]


def _same_line(shown: str, actual: str) -> bool:
    """The same words, and each number equal up to the last digit shown (so that a shown
    0.01308 matches a printed 0.01308, not 0.0131 or 0.01309)."""
    if _NUMBER.sub("#", shown).split() != _NUMBER.sub("#", actual).split():
        return False
    for s, a in zip(_NUMBER.findall(shown), _NUMBER.findall(actual), strict=True):
        mantissa = s.lower().split("e")[0]
        digits = len(mantissa.split(".")[1]) if "." in mantissa else 0
        exponent = int(s.lower().split("e")[1]) if "e" in s.lower() else 0
        if abs(float(s) - float(a)) > 0.51 * 10.0 ** (exponent - digits):
            return False
    return True


def shown_in(shown: str, actual: str) -> list[str]:
    """The lines of ``shown`` (an abridged output; ``...`` skips lines) not found, in order,
    among the lines of ``actual``; empty when the output shows what the command prints."""
    lines = [line for line in actual.splitlines() if line.strip()]
    missing, at = [], 0
    for want in (line for line in shown.splitlines() if line.strip() and line.strip() != "..."):
        hit = next((i for i in range(at, len(lines)) if _same_line(want, lines[i])), None)
        if hit is None:
            missing.append(want)
        else:
            at = hit + 1
    return missing


def shell_env(bindir: Path, python: str, source: Path | None) -> dict:
    """The environment of a documented command: ``fedbound`` on PATH is ``python -m
    fedbound`` and ``python`` is ``python``, with ``source`` (a source tree) on
    ``PYTHONPATH`` where given."""
    for name, command in (("fedbound", f"{shlex.quote(python)} -m fedbound"),
                          ("python", shlex.quote(python))):
        shim = bindir / name
        shim.write_text(f'#!/bin/sh\nexec {command} "$@"\n')
        shim.chmod(shim.stat().st_mode | stat.S_IXUSR)
    path = os.pathsep.join([str(bindir), os.environ.get("PATH", "")])
    base = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return {**base, "PATH": path, "COLUMNS": "100",
            **({"PYTHONPATH": str(source)} if source is not None else {})}


def run_commands(body: str, cwd: Path, env: dict, where: str, *, skip=frozenset(),
                 timeout: float = 600) -> str:
    """Run the commands of an ``sh`` block in ``cwd`` (those in ``skip`` left out), each
    asserted to exit with the status its comment states and without a traceback (``where``
    names the document in the message); what they printed, and that a ``text`` block after it
    shows (:func:`shown_in`)."""
    printed = []
    for command in commands(body):
        if bare(command) in skip:
            continue
        r = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True,
                           text=True, timeout=timeout)
        assert r.returncode == expected_status(command), (
            f"{where}: {bare(command)}\nexited {r.returncode}, {where} says "
            f"{expected_status(command)}\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
        assert "Traceback" not in r.stderr, r.stderr
        printed.append(r.stdout)
    return "\n".join(printed)


def make_dry_run(arguments: list[str], venv: Path, root: Path, timeout: float = 600) -> list[str]:
    """The commands ``make -n ARGUMENTS`` would run in ``root`` (continuation lines joined),
    its virtual environment at ``venv``: nothing is installed or run."""
    # as from a shell: under `make test` (CI) the suite inherits MAKELEVEL, MAKEFLAGS and
    # MFLAGS, and a make started with MAKELEVEL > 0 prints "make[1]: Entering directory"
    env = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
    out = subprocess.run(["make", "-n", "--no-print-directory", f"VENV={venv}", *arguments],
                         cwd=root, capture_output=True, text=True, timeout=timeout, env=env)
    assert out.returncode == 0, f"make -n {shlex.join(arguments)}: {out.stderr}"
    return out.stdout.replace("\\\n", " ").splitlines()


def check_make_command(command: str, venv: Path, root: Path, where: str) -> list[str]:
    """Dry-run a documented ``make`` command (:func:`make_dry_run`) and check that every
    ``VARIABLE=value`` it sets is in the commands it would run; those commands."""
    words = shlex.split(bare(command))
    assert words[0] == "make", f"{where}: {bare(command)} is not a make command"
    lines = make_dry_run(words[1:], venv, root)
    for name, value in (w.split("=", 1) for w in words[1:] if "=" in w):
        assert any(value in line for line in lines), f"{where}: {name}={value} reaches no command"
    return lines
