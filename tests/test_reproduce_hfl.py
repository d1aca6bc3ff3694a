"""fedbound.verify.papers.hfl.claims: Ali & Arafa 2025's claims at small scale.

One quick reproduction (module fixture); claim (a)'s S = 0 rows recomputed independently
(the delay path drawn again with bounds.delays, the simulator rerun on it, the rounds
finished by each time counted here), the bound column checked against Theorem 2 at every
corner of the estimates' box, the verdicts recomputed from the intervals, and the CLI's
exit status checked against the findings."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest

pytest.importorskip("sklearn", reason="scikit-learn (fedbound[data]) provides the digits")

import torch  # noqa: E402

from fedbound import bounds  # noqa: E402
from fedbound.bounds import delays as dl  # noqa: E402
from fedbound.bounds.references import cite  # noqa: E402
from fedbound.verify.papers.hfl import claims as rh  # noqa: E402
from fedbound.verify.reproduce import bound_order, estimation_settings, order, reproduce  # noqa: E402


@pytest.fixture(scope="module")
def result():
    return reproduce("hfl", quick=True, seed=0)


@pytest.fixture(scope="module")
def setting():
    """The network, its start, the estimates and the step, recomputed here."""
    from fedbound.verify.papers.hfl import estimated_parts

    pr, x1 = rh.problem()
    s = rh.scenario([rh.CLIENTS_A] * 2, rh.FIG7A, 0.0, rh.T_QUICK, rh.REPLICAS_QUICK, 0)
    with _one():
        parts = estimated_parts(s, bounds.get("hfl.theorem2"), problem=pr, x1=x1,
                                settings=estimation_settings(True))
    return pr, x1, s, parts, 1.0 / parts.estimates["L"].upper


def _one():
    from fedbound.sim.problems import one_thread

    return one_thread()


def test_rows_have_finite_intervals_around_their_mean(result):
    assert [len(f.rows) for f in result.findings] == [4, 3]
    for f in result.findings:
        for r in f.rows:
            assert all(math.isfinite(v) for v in (r.measured, r.low, r.high))
            assert r.low <= r.measured <= r.high and r.seeds == rh.REPLICAS_QUICK


def test_agreement_follows_the_intervals(result):
    a, b = result.findings
    s0_early, s0_late, s20_early, s20_late = a.rows
    assert a.agrees is rh._both([order(s0_early, s20_early), order(s20_late, s0_late)])
    two, four, eight = b.rows
    assert b.agrees is rh._both([order(four, two), order(four, eight)])
    for f in result.findings:
        assert f.bound_agrees is bound_order(f.rows)
        assert "derived by fedbound, not published" in f.prediction


def _path(s):
    sched = dl.sample_schedules(dl.DelayModel.linear(s.delays, s.sizes), s.S, s.T, 1,
                                np.random.default_rng(s.seed))
    U = int(sched.U[0])
    return sched.t[0, :U], np.cumsum(sched.duration[0, :U])


def test_s0_rows_recomputed_on_a_path_drawn_here(result, setting):
    from fedbound.sim.hfl import run_hfl

    pr, x1, s, _, alpha = setting
    t, end = _path(s)
    with _one():
        trace = run_hfl(pr, sizes=s.sizes, alpha=alpha, x1=x1, replicas=s.replicas, t=t,
                        generator=torch.Generator().manual_seed(s.seed + 1))
    for r, when in zip(result.findings[0].rows[:2], (rh.EARLY * s.T, s.T), strict=True):
        finished = sum(1 for e in end if e <= when)
        values = trace.loss.numpy()[:, finished]
        assert np.mean(values) == pytest.approx(r.measured, rel=1e-12)
    assert result.findings[0].rows[0].measured > result.findings[0].rows[1].measured  # it trains


def test_the_bound_column_is_theorem2_at_the_conservative_end(result, setting):
    _, _, s, parts, alpha = setting
    t, end = _path(s)
    thm = bounds.get("hfl.theorem2", "proof")
    r = result.findings[0].rows[1]  # S = 0 at time T
    finished = sum(1 for e in end if e <= s.T)
    corners = [float(thm.evaluate(alpha=alpha, sizes=np.array(s.sizes), t=t[:finished],
                                  **dict(zip(parts.estimates, ends, strict=True))))
               for ends in itertools.product(*[(e.lower, e.upper)
                                               for e in parts.estimates.values()])]
    assert max(corners) * (1 - 1e-12) <= r.bound <= max(corners) * 1.01


def test_same_seed_same_numbers_other_seed_other_numbers(setting):
    from fedbound.sim.hfl import run_hfl

    pr, x1, s, _, alpha = setting
    short = s.replace(T=40.0, replicas=2)

    def loss(scenario, noise):
        t, _ = _path(scenario)
        with _one():
            return run_hfl(pr, sizes=scenario.sizes, alpha=alpha, x1=x1, replicas=2, t=t,
                           generator=torch.Generator().manual_seed(noise)).loss

    assert torch.equal(loss(short, 1), loss(short, 1))
    assert not torch.equal(loss(short, 1), loss(short, 2))
    assert not np.array_equal(_path(short)[1], _path(short.replace(seed=1))[1])


def test_citations_resolve(result):
    for f in result.findings:
        assert f.source.startswith(cite("hfl") + ", Section V, Fig.")


def test_cli_exit_status_follows_the_findings(result, monkeypatch, capsys):
    from fedbound.verify import reproduce as reproduce_module
    from fedbound.verify.cli import main

    monkeypatch.setattr(reproduce_module, "reproduce", lambda paper, **kw: result)
    status = main(["reproduce", "hfl", "--quick", "--json"])
    payload = json.loads(capsys.readouterr().out)
    assert payload[0]["paper"] == "hfl"
    assert status == (1 if any(f.agrees is False for f in result.findings) else 0)
