"""The Makefile's install as docs/install.md documents it, read from ``make -n`` (a dry run:
nothing is installed, into a virtual environment path of the test's own): ``TORCH_INDEX`` is
the index of torch's install and of nothing else, ``PIP_ARGS`` reaches every pip install, the
pin of ``constraints.txt`` is used, and the index an environment was made with is kept by a
later ``make`` while a different one installs torch again. ``.ci/heartbeat`` (what the long
installs run through) writes a line while a silent command runs in a log."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from bounded import CEILING
from doc_blocks import make_dry_run

ROOT = Path(__file__).resolve().parents[1]
MAKE = shutil.which("make")
pytestmark = pytest.mark.skipif(MAKE is None, reason="no make on PATH")
CPU = "https://download.pytorch.org/whl/cpu"
CUDA = "https://download.pytorch.org/whl/cu126"


def dry_run(venv: Path, *settings: str, target: str = "demo") -> list[str]:
    """The commands ``make -n TARGET`` would run (continuation lines joined)."""
    return make_dry_run([target, *settings], venv, ROOT, timeout=CEILING)


def installs(lines: list[str]) -> list[str]:
    return [line for line in lines if "-m pip install" in line]


def test_torch_index_is_the_index_of_torchs_install_alone(tmp_path):
    lines = dry_run(tmp_path / "v", f"TORCH_INDEX={CPU}")
    (torch,) = [line for line in installs(lines) if "torch==2.13.0" in line]
    assert f"--index-url {CPU}" in torch and "-c constraints.txt" in torch
    assert [line for line in installs(lines) if "--index-url" in line] == [torch]
    assert f"echo '{CPU}' > {tmp_path / 'v'}/.torch-index" in lines   # recorded
    assert lines[-1] == f"{tmp_path / 'v'}/bin/fedbound check --all"


def test_without_torch_index_pip_uses_its_own_index_and_the_pin(tmp_path):
    lines = dry_run(tmp_path / "v")
    assert installs(lines) and not [line for line in lines if "--index-url" in line]
    assert any("-c constraints.txt" in line and "torch==2.13.0" in line for line in installs(lines))
    assert any("pip's index" in line for line in lines)   # the line the install prints first


def test_pip_args_reach_every_install(tmp_path):
    proxy = "--proxy http://proxy.example:3128"
    lines = dry_run(tmp_path / "v", f"PIP_ARGS={proxy}", f"TORCH_INDEX={CPU}", target="docs")
    found = installs(lines)
    assert len(found) == 4 and all(proxy in line for line in found)   # pip, torch, fedbound, docs


def _installed(venv: Path, index: str) -> None:
    """A made environment: its stamp newer than pyproject.toml and constraints.txt, and the
    index its torch came from."""
    venv.mkdir()
    (venv / ".torch-index").write_text(index + "\n")
    stamp = venv / ".installed"
    stamp.touch()
    later = time.time() + 60
    os.utime(stamp, (later, later))


def test_a_made_environment_keeps_its_index_and_another_index_reinstalls_torch(tmp_path):
    venv = tmp_path / "v"
    _installed(venv, CPU)
    assert dry_run(venv) == [f"{venv}/bin/fedbound check --all"]           # kept: nothing to do
    assert dry_run(venv, f"TORCH_INDEX={CPU}") == [f"{venv}/bin/fedbound check --all"]
    lines = dry_run(venv, f"TORCH_INDEX={CUDA}")   # another build asked for: torch again
    assert any("pip uninstall --yes --quiet torch" in line for line in lines)
    assert any(f"--index-url {CUDA}" in line and "torch==2.13.0" in line for line in installs(lines))


def test_a_silent_step_in_a_log_still_writes_a_line(tmp_path):
    out = subprocess.run(["sh", str(ROOT / ".ci" / "heartbeat"), "a silent step", "sh", "-c",
                          "sleep 1.2; exit 3"], capture_output=True, text=True, timeout=CEILING,
                         env={**os.environ, "HEARTBEAT_SECONDS": "0.3"})
    lines = out.stdout.splitlines()
    assert out.returncode == 3 and len(lines) >= 2
    assert all(line.startswith("   a silent step: still running, ") for line in lines)
