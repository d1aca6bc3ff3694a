"""fedbound.verify.papers.tdcd.claims: Q against slow communication on per-silo MLPs over digits.

One quick reproduction (module fixture); its rows are checked against an independent rerun
of the simulator, its agreement fields against order/bound_order applied to its rows, its
bound column against the theorem evaluated here, and its numbers for bit-for-bit repeats."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

pytest.importorskip("sklearn", reason="scikit-learn (fedbound[data]) provides the digits")

from fedbound.bounds.references import cite  # noqa: E402
from fedbound.verify.papers.tdcd import claims as rt  # noqa: E402
from fedbound.verify.reproduce import bound_order, order, reproduce  # noqa: E402


@pytest.fixture(scope="module")
def rep():
    return reproduce("tdcd", quick=True, seed=0)


def test_every_row_has_a_finite_interval_around_its_mean(rep):
    assert len(rep.findings) == len(rt.RATIOS)
    for f in rep.findings:
        assert f.rows
        for r in f.rows:
            assert math.isfinite(r.low) and math.isfinite(r.high)
            assert r.low <= r.measured <= r.high and r.seeds == rt.SEEDS[True]


def test_a_row_is_the_loss_of_an_independent_rerun_at_its_budget(rep):
    """Q = 4 at t_comm/t_comp = 10: rerun the simulator at the row's step alone (its own
    generator: the batches differ) and evaluate L(theta) at the rerun's round with the
    model's loss directly; the row's interval and the rerun's must overlap."""
    from fedbound.sim.tdcd import run_tdcd

    r = rep.findings[0].rows[1]
    eta = float(r.config.split("eta = ")[1].rstrip(")"))
    R = rt.budget_rounds(4, 10.0, rt.ROUNDS[True])
    assert f"{R} rounds" in r.config
    assert R == math.floor(rt.ROUNDS[True] * (3 * 10 + 1) / (3 * 10 + 4))
    model, theta0 = rt.build_model(0)
    trace = run_tdcd(model, eta=eta, Q=4, rounds=R, theta0=theta0, replicas=8,
                     generator=torch.Generator().manual_seed(123), record_iterates=True)
    direct = model.loss(trace.hub[:, R]).numpy()
    assert np.allclose(direct, trace.loss[:, R].numpy(), rtol=1e-12)
    mean, half = direct.mean(), 3 * direct.std(ddof=1)
    assert mean - half < r.high and r.low < mean + half


def test_agreement_fields_follow_the_ordering_rules(rep):
    for f in rep.findings[:-1]:
        q1, *others = f.rows
        verdicts = [order(r, q1) for r in others]
        expected = True if True in verdicts else (False if all(v is False for v in verdicts)
                                                 else None)
        assert f.agrees is expected
        assert f.bound_agrees is bound_order(f.rows)
    growth = rep.findings[-1]
    pairs = [order(a, b) for a, b in zip(growth.rows[:-1], growth.rows[1:], strict=True)]
    assert growth.agrees is (False if False in pairs else True if all(pairs) else None)
    assert growth.bound_agrees is None and all(r.bound is None for r in growth.rows)


def test_the_bound_column_is_the_published_bound_at_the_estimates_upper_ends(rep):
    """The bound at its best admissible step is at most the bound at (14)'s largest step
    and at least the bound at the estimated constants' values there (conservative end);
    the published bound's best Q is 1 at every ratio, as the prediction says."""
    for f in rep.findings[:-1]:
        bounds_by_q = [r.bound for r in f.rows]
        assert all(b is not None and b > 0 for b in bounds_by_q)
        assert bounds_by_q[0] == min(bounds_by_q)
        assert "best Q = 1" in f.prediction and "refined" in f.prediction
    assert "Q = 1 at every ratio" in rep.findings[-1].prediction


def test_the_published_bound_evaluated_here_is_minimal_at_q1():
    """Independent of the reproduction: (15) at eta Q = a fixed depends on Q only through R,
    so with equal rounds every Q gives the same number (numpy transcription)."""
    L, Lm, S, D, a, R = 0.7, 2.0, 0.3, 0.5, 0.05, 30

    def published(a, R):
        return 4 * D / (a * R) + 4 * S * (a * L + 4 * a**2 * Lm**2 + 8 * a**3 * L * Lm**2)

    from fedbound import bounds

    thm = bounds.get("tdcd.theorem1")
    for Q in (1, 4, 16):
        v = thm.evaluate(L=L, L_max=Lm, sigma=np.sqrt([S / 2, S / 2]), Delta=D, eta=a / Q, Q=Q, R=R)
        assert v == pytest.approx(published(a, R), rel=1e-12)


def test_another_seed_gives_other_networks_and_other_numbers():
    """Cheap stand-in for a second full reproduction: the seed reaches the networks and the
    runs (the full repeat with the same seed is the CLI test below)."""
    runs = []
    for seed in (0, 1):
        model, theta0 = rt.build_model(seed)
        runs.append((theta0, rt.run_q(model, theta0, 1, 3, 2, torch.Generator().manual_seed(seed))[0]))
    assert not torch.equal(runs[0][0], runs[1][0])
    assert not np.array_equal(runs[0][1], runs[1][1])


def test_citations_resolve(rep):
    for f in rep.findings:
        assert f.source.startswith(cite("tdcd") + ", Section 5.3.1")


def test_cli_repeats_the_numbers_bit_for_bit_and_exits_as_the_findings_imply(rep, capsys):
    from fedbound.verify.cli import main

    code = main(["reproduce", "tdcd", "--quick", "--json"])
    (out,) = json.loads(capsys.readouterr().out)
    assert code == (1 if any(f.agrees is False for f in rep.findings) else 0)
    expected = json.loads(json.dumps({**rep.to_dict(), "seconds": 0}))
    assert {**out, "seconds": 0} == expected
