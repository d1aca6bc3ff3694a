"""Progress where standard error is not a terminal (verify/cli/progress.py): a long command
writes a plain line at least every ``EVERY`` seconds, even while no step ends, and a last
line at the end; a short one writes nothing. The periods are shortened here (monkeypatch)
so that the test takes a second."""

from __future__ import annotations

import io
import sys
import time

import pytest

from fedbound.verify.cli import common, main, progress


@pytest.fixture
def fast(monkeypatch):
    """A line at most every 0.4 s, looked at every 0.05 s."""
    monkeypatch.setattr(progress, "EVERY", 0.4)
    monkeypatch.setattr(progress, "BEAT", 0.05)


def _log(monkeypatch) -> io.StringIO:
    """Standard error as a log (set in the test itself: pytest's capture resets it after
    the fixtures)."""
    log = io.StringIO()
    monkeypatch.setattr(sys, "stderr", log)
    return log


def test_a_long_step_in_a_log_gets_a_line_at_least_every_period(fast, monkeypatch):
    log = _log(monkeypatch)
    with common.progress_bar(total=3, desc="work", unit="step") as bar:
        bar.update(1)
        t0 = time.monotonic()
        time.sleep(1.3)   # one step that takes three periods: the heartbeat writes
        slept = time.monotonic() - t0
        bar.update(2)
    lines = log.getvalue().splitlines()
    assert "\r" not in log.getvalue() and all(line.startswith("work: ") for line in lines)
    assert len(lines) >= int(slept / progress.EVERY) + 1   # ... and the last line at the end
    assert "1/3" in lines[0] and "3/3" in lines[-1]


def test_a_short_run_in_a_log_prints_nothing(monkeypatch):
    log = _log(monkeypatch)
    with common.progress_bar(total=2, desc="work") as bar:
        bar.update(2)
    assert log.getvalue() == ""


def test_check_all_in_a_log_says_how_far_it_got(fast, monkeypatch, tmp_path):
    """``make demo`` printed nothing for 11 minutes in a log: check --all's bar now writes
    its lines there, each naming the command and the checks done. A line is due at every
    beat here: the run (a fraction of a second with warm caches) is long whatever its speed."""
    monkeypatch.setattr(progress, "EVERY", 0.002)
    monkeypatch.setattr(progress, "BEAT", 0.001)
    log = _log(monkeypatch)
    code = main(["check", "--all", "--only", "mllsgd.theorem1", "--battery", "2",
                 "--no-figures", "--report", str(tmp_path / "r"), "--jobs", "1"])
    lines = [line for line in log.getvalue().splitlines() if "check --all" in line]
    assert code == 0 and lines and "\r" not in log.getvalue()
    assert all(line.startswith("fedbound check --all: ") for line in lines)
    assert "100%" in lines[-1]
