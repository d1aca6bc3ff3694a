"""fedbound.verify.papers.mllsgd.claims: Castiglia et al. 2021's claims at small scale.

One quick reproduction (module fixture); its rows are recomputed independently (the
simulator rerun with every iteration recorded, the loss evaluated directly with torch's
own cross-entropy), its verdicts recomputed from the intervals, the bound recomputed with
verify.estimated, and the CLI's exit status checked against the findings."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

pytest.importorskip("sklearn", reason="scikit-learn (fedbound[data]) provides the digits")

import torch  # noqa: E402

from fedbound import bounds  # noqa: E402
from fedbound.bounds.references import cite  # noqa: E402
from fedbound.sim.problems import one_thread  # noqa: E402
from fedbound.verify.papers.mllsgd import claims as rm  # noqa: E402
from fedbound.verify.reproduce import bound_order, order, reproduce  # noqa: E402


@pytest.fixture(scope="module")
def result():
    return reproduce("mllsgd", quick=True, seed=0)


def test_rows_have_finite_intervals_around_their_mean(result):
    assert len(result.findings) == 2
    for f in result.findings:
        for r in f.rows:
            assert all(math.isfinite(v) for v in (r.measured, r.low, r.high))
            assert r.low <= r.measured <= r.high and r.seeds == rm.REPLICAS_QUICK


def test_agreement_follows_the_intervals(result):
    a, b = result.findings
    assert a.agrees is order(a.rows[0], a.rows[1])
    assert b.agrees is rm.increasing(b.rows)
    for f in result.findings:
        assert f.bound_agrees is bound_order(f.rows)


@pytest.fixture(scope="module")
def claim_a():
    """Claim (a)'s problem, configurations, estimates and step, recomputed here."""
    thm = bounds.get("mllsgd.theorem1")
    pr, x1 = rm.problem()
    configs = {"a": rm.configurations(True, 0)["a"]}
    with one_thread():
        parts = rm.estimated(thm, configs, True, pr, x1)
    eta = rm.step(thm, parts, list(parts))
    return thm, pr, x1, configs["a"], parts, eta


def test_a_row_recomputed_from_a_finer_record_and_a_direct_loss(result, claim_a):
    """Claim (a)'s first row: the run again recording every 16 iterations (the same
    draws), every other loss kept, the mean taken here; the first loss checked against
    torch.nn.functional.cross_entropy of the module itself."""
    from fedbound.sim.mllsgd import run_mllsgd
    from fedbound.verify.papers.mllsgd import build

    _, pr, x1, configs, _, eta = claim_a
    s = configs[0][1]
    st = build(s)
    with one_thread():
        trace = run_mllsgd(pr, H=torch.as_tensor(st.H), hub_of=torch.as_tensor(st.hub_of),
                           w=torch.as_tensor(st.w), p=torch.as_tensor(st.p), eta=eta, K=s.K,
                           q=s.q, tau=s.tau, x1=x1, replicas=s.replicas,
                           generator=st.generator, record_every=rm.PERIOD // 2,
                           record_grad=False)
    values = trace.loss.numpy()[:, ::2].mean(axis=1)
    r = result.findings[0].rows[0]
    assert np.mean(values) == pytest.approx(r.measured, rel=1e-12)
    assert np.std(values, ddof=1) > 0
    with torch.no_grad():
        direct = torch.nn.functional.cross_entropy(pr.module(pr.features), pr.labels)
    assert float(trace.loss[0, 0]) == pytest.approx(float(direct), rel=1e-12)


def test_the_bound_column_is_theorem1_at_the_conservative_end(result, claim_a):
    """Every corner of the estimates' box evaluated here: the bound column is at least
    their maximum (the grid holds the corners) and within 1% of it (monotone there)."""
    import itertools

    thm, _, _, configs, parts, eta = claim_a
    a = result.findings[0]
    for (label, _), r in zip(configs, a.rows, strict=True):
        p = parts[label]
        corners = [thm.evaluate(**p.params, eta=eta, **dict(zip(p.estimates, ends, strict=True)))
                   for ends in itertools.product(*[(e.lower, e.upper)
                                                   for e in p.estimates.values()])]
        assert max(corners) * (1 - 1e-12) <= r.bound <= max(corners) * 1.01
    # F9: at fixed q tau the bound is larger for the larger q; claim (b) runs outside (12)
    assert a.rows[0].bound > a.rows[1].bound
    assert all(r.bound is None for r in result.findings[1].rows)
    assert "inadmissible" in result.findings[1].prediction


def test_same_seed_same_numbers_other_seed_other_numbers():
    pr, x1 = rm.problem()
    s0 = rm.configurations(True, 0)["b"][0][1].replace(K=64)
    s1 = rm.configurations(True, 1)["b"][0][1].replace(K=64)
    with one_thread():
        one, again, other = (rm.measure(s, pr, x1, 0.005) for s in (s0, s0, s1))
    assert torch.equal(one, again) and not torch.equal(one, other)


def test_citations_resolve(result):
    for f in result.findings:
        assert f.source.startswith(cite("mllsgd") + ", Section")


def test_cli_exit_status_follows_the_findings(result, monkeypatch, capsys):
    from fedbound.verify import reproduce as reproduce_module
    from fedbound.verify.cli import main

    monkeypatch.setattr(reproduce_module, "reproduce", lambda paper, **kw: result)
    status = main(["reproduce", "mllsgd", "--quick", "--json"])
    payload = json.loads(capsys.readouterr().out)
    assert payload[0]["paper"] == "mllsgd"
    expected = 1 if any(f.agrees is False for f in result.findings) else 0
    assert status == expected
    strict = main(["reproduce", "mllsgd", "--quick", "--json", "--strict"])
    capsys.readouterr()
    undecided = any(f.agrees is None for f in result.findings)
    assert strict == (1 if expected else 3 if undecided else 0)
