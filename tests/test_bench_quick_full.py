"""benchmarks/bench_quick_full.py's reading of a claim's quick and full verdicts (issue 29,
item 5: quick "undecided rather than wrong"), every pair of verdicts, without a run."""

import sys
from itertools import product
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # benchmarks/ is not installed

from benchmarks.bench_quick_full import kind  # noqa: E402

VERDICTS = ("agrees", "contradicts", "undecided", "error")


@pytest.mark.parametrize("quick,full", list(product(VERDICTS, VERDICTS)))
def test_each_pair_of_verdicts_is_read_as_the_issue_asks(quick, full):
    moved, stated = kind(quick, full, ""), kind(quick, full, "the quick run decides it at ...")
    decided = {"agrees", "contradicts"}
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
