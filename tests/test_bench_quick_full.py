"""benchmarks/bench_quick_full.py's reading of a claim's quick and full verdicts (issue 29,
item 5: quick "undecided rather than wrong"), every pair of the five verdicts, and its table
of every reading's verdict, without a run."""

import sys
from itertools import product
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # benchmarks/ is not installed

from benchmarks.bench_quick_full import kind  # noqa: E402

VERDICTS = ("agrees", "contradicts", "negligible", "fixed-by-setting", "undecided", "error")


@pytest.mark.parametrize("quick,full", list(product(VERDICTS, VERDICTS)))
def test_each_pair_of_verdicts_is_read_as_the_issue_asks(quick, full):
    moved, stated = kind(quick, full, ""), kind(quick, full, "the quick run decides it at ...")
    decided = {"agrees", "contradicts", "negligible", "fixed-by-setting"}
    if quick == full or "error" in (quick, full):
        assert moved is None and stated is None
    elif quick in decided and full in decided:
        assert moved == stated == "wrong"  # a sensitivity never excuses the other direction
    elif quick in decided:
        assert (moved, stated) == ("overconfident", "stated")
    else:
        assert moved == stated == "power"


def test_the_command_line_has_no_full_flag_and_refuses_an_unknown_paper(capsys):
    from benchmarks.bench_quick_full import main

    for argv in (["--full"], ["--papers", "mllsgd,nope"]):
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 2
    assert "--papers mllsgd,nope" in capsys.readouterr().err


def test_every_readings_verdict_is_compared_and_an_error_is_one_entry():
    from types import SimpleNamespace as NS

    from benchmarks.bench_quick_full import verdicts

    claim = NS(id="p.fig1.x", primary="printed", sensitivity="s")
    decided = NS(claim=claim, decisions=(NS(reading="printed", verdict="agrees"),
                                         NS(reading="sum", verdict="negligible")))
    failed = NS(claim=NS(id="p.fig2.y", primary=None, sensitivity=""), decisions=())
    assert verdicts(NS(results=(decided, failed))) == {
        ("p.fig1.x", "printed"): ("agrees", "s"), ("p.fig1.x", "sum"): ("negligible", "s"),
        ("p.fig2.y", None): ("error", "")}
