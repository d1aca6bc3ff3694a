"""fedbound.verify.papers.afl.claims: AFA-CD and AFA-CS under anarchic arrivals against FedAvg on digits.

One quick reproduction (module fixture); its FedAvg row is recomputed from an independent
evaluation of the loss at the final models, the agreement fields from order/bound_order on
the rows, and the numbers repeat bit for bit through the CLI."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

pytest.importorskip("sklearn", reason="scikit-learn (fedbound[data]) provides the digits")

from fedbound.bounds.references import cite  # noqa: E402
from fedbound.verify.papers.afl import claims as ra  # noqa: E402
from fedbound.verify.reproduce import bound_order, order, reproduce  # noqa: E402


@pytest.fixture(scope="module")
def rep():
    return reproduce("afl", quick=True, seed=0)


def test_every_row_has_a_finite_interval_around_its_mean(rep):
    assert len(rep.findings) == 2
    for f in rep.findings:
        assert f.rows[0].config.startswith("FedAvg")
        for r in f.rows:
            assert math.isfinite(r.low) and math.isfinite(r.high)
            assert r.low <= r.measured <= r.high and r.seeds == ra.SEEDS[True]


def test_the_fedavg_row_is_the_cross_entropy_of_the_final_models():
    """A FedAvg rerun (own generator); f(x_T) evaluated here with torch's cross-entropy on
    each worker's samples, averaged over workers: equal to the module's loss."""
    clients, x0 = ra.build_clients(0)
    trace = ra.run_config(clients, x0, ra.CONFIGS[0], 5, 2, torch.Generator().manual_seed(7))
    owner = clients.table  # [M, n_max] sample indices, padded
    direct = []
    for x in trace.x_final:
        logits = torch.func.functional_call(clients.module, clients.parameters_of(x),
                                            (clients.features,))
        per_sample = torch.nn.functional.cross_entropy(logits, clients.labels, reduction="none")
        per_worker = [per_sample[owner[i, : int(clients.counts[i])]].mean() for i in range(ra.M)]
        direct.append(float(torch.stack(per_worker).mean()))
    assert np.allclose(ra.final_losses(clients, trace), direct, rtol=1e-10)
    # FedAvg is synchronous with uniform arrivals: no delay used, m arrivals every round
    assert trace.schedule.max_delay() == 0
    assert (trace.schedule.arrivals.sum(-1) == ra.m).all()


def test_agreement_fields_follow_the_ordering_rules(rep):
    for f in rep.findings:
        fedavg, other = f.rows
        tolerance = ra.scaled(fedavg, 1 + ra.TOLERANCE)
        assert tolerance.low == pytest.approx(fedavg.low * 1.1, rel=1e-12)
        assert f.agrees is order(other, tolerance)
        assert f.bound_agrees is bound_order(f.rows)


def test_the_prediction_names_the_theorems_and_theorem4_refuted(rep):
    assert "Theorem 2" in rep.findings[0].prediction
    assert "Theorem 4" in rep.findings[1].prediction and "refuted" in rep.findings[1].prediction
    for f in rep.findings:
        for r in f.rows:
            said = f.prediction.split(r.config.split(" (")[0] + ":")[1].split(";")[0]
            assert (r.bound is None) == ("inadmissible" in said)


def test_citations_resolve(rep):
    for f in rep.findings:
        assert f.source.startswith(cite("afl") + ", Section 5, Fig. 1")


def test_another_seed_gives_another_partition_and_network():
    a, xa = ra.build_clients(0)
    b, xb = ra.build_clients(1)
    assert not torch.equal(xa, xb) and not torch.equal(a.table, b.table)


def test_cli_repeats_the_numbers_bit_for_bit_and_exits_as_the_findings_imply(rep, capsys):
    from fedbound.verify.cli import main

    code = main(["reproduce", "afl", "--quick", "--json"])
    (out,) = json.loads(capsys.readouterr().out)
    assert code == (1 if any(f.agrees is False for f in rep.findings) else 0)
    assert {**out, "seconds": 0} == json.loads(json.dumps({**rep.to_dict(), "seconds": 0}))
