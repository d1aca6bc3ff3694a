"""The choosers' certified answers from fedbound's deadline bounds (issue 39, item 2): --mu
(and --zeta) as certified constants, the deadline variants among the certified answers when
given, each a guarantee on the expected loss at the deadline, checked against the simulation."""

from __future__ import annotations

import math

import pytest

from fedbound.verify.api import choose
from fedbound.verify.cli import main

#: Ali & Arafa 2025, Fig. 6's delays (the chooser's example)
FIG6 = [0.01, 0.85, 0.001, 0.085, 4, 2, 0.4, 0.2]
HFL = ["choose", "hfl", "--sizes", "4,4", "--delays", ",".join(map(str, FIG6)), "--T", "300",
       "--L", "1", "--sigma", "10", "--Delta", "1", "--method", "bound"]


def test_hfl_certified_deadline_answer_on_a_quadratic_against_the_simulated_best():
    """On the synthetic quadratic (spectrum [L/10, L], sigma 10, T 300: local steps pay), the
    deadline_quadratic answer picks S > 0, its simulated loss is within 2x of the simulated
    best (and passes: within 10% or not told apart), and its bound is a guarantee: the
    simulated mean loss there does not exceed it beyond its interval."""
    from fedbound.verify.papers.hfl import SyncTime

    chooser = SyncTime(sizes=[4, 4], delays=FIG6, T=300, L=1.0, sigma=10.0, Delta=1.0, mu=0.1,
                       replicas=16)
    assert chooser.variants()[-2:] == ["deadline_quadratic", "deadline_pl"]
    report = choose(chooser, variants=["deadline_quadratic", "deadline_pl"])
    quadratic, pl = report.certified
    best = min(a.value for a in report.answers if a.value is not None)
    assert quadratic.settings["S"] > 0
    assert quadratic.value <= 2 * best and quadratic.passes
    assert quadratic.value - quadratic.ci <= quadratic.predicted
    assert pl.value - pl.ci <= pl.predicted  # the PL bound holds too (it is looser)
    assert "guarantee on the expected loss at the deadline" in quadratic.note
    assert report.inputs["constants"]["mu"] == 0.1
    assert "for the deadline variants" in report.bounded


def test_without_mu_no_deadline_variant_and_asked_for_it_says_what_to_give():
    from fedbound.verify.papers.hfl import SyncTime

    chooser = SyncTime(sizes=[2, 2], delays=FIG6, T=60, L=1.0, sigma=1.0, Delta=1.0, replicas=4)
    assert not any(v.startswith("deadline") for v in chooser.variants())
    report = choose(chooser, variants=["deadline_pl"], method="bound")
    assert report.certified[0].settings is None and "give mu" in report.certified[0].note


def test_deadline_pl_needs_zeta_where_the_clients_hold_their_own_data():
    from fedbound.verify.papers.hfl import SyncTime

    chooser = SyncTime(sizes=[2, 2], delays=FIG6, T=60, L=1.0, sigma=1.0, Delta=1.0, mu=0.1,
                       replicas=4)
    chooser.problem.M = 4  # a problem whose clients hold their own data (its marker)
    report = choose(chooser, variants=["deadline_quadratic", "deadline_pl"], method="bound")
    assert all(a.settings is None for a in report.certified)
    assert "quadratics" in report.certified[0].note and "give zeta" in report.certified[1].note


@pytest.mark.parametrize("value, message", [
    ("0", "--mu=0 must lie in (0, inf)"),
    ("-1", "--mu=-1 must lie in (0, inf)"),
    ("2", "--mu=2 must be at most L = 1"),
    ("nan", "--mu=NaN must be finite"),
    ("inf", "--mu=Infinity must be finite"),
])
def test_bad_mu_exits_2_with_one_line_naming_it(capsys, value, message):
    code = main([*HFL, "--mu", value])
    err = capsys.readouterr().err.strip()
    assert code == 2 and message in err and "\n" not in err, err


def test_bad_mu_of_mllsgd_and_tdcd_exits_2_naming_it(capsys):
    for argv, message in ((["choose", "mllsgd", "--mu", "5"], "--mu=5 must be at most L = 1"),
                          (["choose", "tdcd", "--mu", "nan"], "--mu=NaN must be finite")):
        code = main([*argv, "--method", "bound"])
        err = capsys.readouterr().err.strip()
        assert code == 2 and message in err and "\n" not in err, err


def test_mllsgd_and_tdcd_certified_deadline_answers_are_finite_guarantees():
    """With --mu the MLL-SGD and TDCD choosers give their deadline bound's pick, at its full
    precision, and say what it bounds."""
    from fedbound.verify.papers.mllsgd import TauEta
    from fedbound.verify.papers.tdcd import QEta

    mll = choose(TauEta(mu=0.1, K=64, tau=[1, 2, 4], replicas=4), variants=["deadline_quadratic"],
                 method="bound").certified[0]
    assert mll.settings["tau"] in (1, 2, 4) and 0 < mll.predicted < math.inf
    assert "E F(u_K) - F_inf <=" in mll.note
    tdcd = choose(QEta(mu=0.001, replicas=4, Q=[1, 2]), variants=["deadline_pl"],
                  method="bound").certified[0]
    assert tdcd.settings["Q"] in (1, 2) and 0 < tdcd.predicted < math.inf
    assert "E L(theta^(RQ)) - L_inf <=" in tdcd.note
