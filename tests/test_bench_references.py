"""The benchmarks' hand-fused references (benchmarks/fused_*.py) give the simulators'
recordings on the same draws; the official MLL-SGD loop's re-implementation trains the
same model; benchmarks/results.json merges figures by name."""

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # benchmarks/ is not installed

from benchmarks import official_mllsgd as official  # noqa: E402
from benchmarks import references, results  # noqa: E402
from benchmarks.fused_mllsgd import workload  # noqa: E402
from sim.mllsgd import run_mllsgd  # noqa: E402

torch.set_num_threads(1)  # as the benchmarks run: small products, no thread-pool waits

@pytest.mark.parametrize("name", references.SIMULATORS)
@pytest.mark.parametrize("N", [10, 20])
def test_reference_gives_the_simulators_recordings(name, N):
    runs = references.pair(name, N, 16 if name == "mllsgd" else 3)
    assert runs.difference(seed=3) <= 1e-10


@pytest.mark.parametrize("name", references.SIMULATORS)
def test_a_different_seed_is_seen(name):
    """The comparison can fail: another seed's reference differs from the simulator."""
    runs = references.pair(name, 10, 16 if name == "mllsgd" else 3)
    trace, other = runs.simulator(3), runs.reference(4)
    gaps = [references.relative_difference(getattr(trace, k)[0], v) for k, v in other.items()]
    assert max(gaps) > 1e-6


def test_relative_difference():
    a = torch.tensor([0.0, 1.0, -2.0], dtype=torch.float64)
    assert references.relative_difference(a, a.clone()) == 0.0
    b = torch.tensor([0.0, 1.0, -2.002], dtype=torch.float64)
    assert references.relative_difference(a, b) == pytest.approx(0.002 / 2.002)


def test_official_loop_trains_the_same_model_as_fedbound():
    """Same workload (N = 10 workers, 10 hubs), 32 hub rounds: final losses within 3%, and
    both far below the loss at the start (log 2)."""
    problem, kw = workload(10, 32 * 8)
    losses = official.official_mllsgd(problem.features.numpy(), problem.labels.numpy(), hubs=10,
                                      workers=1, tau=4, q=2, hub_rounds=32, batch=32, alpha=0.2)
    trace = run_mllsgd(problem, generator=torch.Generator().manual_seed(1), record_every=8,
                       record_grad=False, **kw)
    ours = float(trace.loss[0, -1])
    assert len(losses) == trace.loss.shape[1] == 32
    assert abs(losses[-1] - ours) / ours < 0.03
    assert ours < 0.8 * math.log(2) and losses[-1] < 0.8 * math.log(2)


def test_official_cost_is_the_logistic_loss():
    rng = np.random.default_rng(0)
    x, theta = rng.normal(size=(50, 3)), rng.normal(size=3)
    y = np.where(rng.random(50) < 0.5, -1.0, 1.0)
    cost, grad = official.cost_and_grad(theta, x, y, np.unique(y))
    target = (y == -1).astype(float)  # the first half of the classes is the positive class
    margin = (2 * target - 1) * (x @ theta)
    assert cost == pytest.approx(np.mean(np.log1p(np.exp(-margin))), rel=1e-12)
    h = 1 / (1 + np.exp(-(x @ theta)))
    assert np.allclose(grad, (target - h) @ x / 50, rtol=1e-12)


def test_results_merge_by_name_and_state_goals(tmp_path):
    path = tmp_path / "results.json"
    results.record([results.figure("a", 1.1, "ratio", at_most=1.2),
                    results.figure("b", 3.0, "ratio", at_least=25)], path)
    results.record([results.figure("b", 30.0, "ratio", at_least=25),
                    results.figure("c", 7.0, "s")], path)
    entries = {e["name"]: e for e in json.loads(path.read_text())}
    assert set(entries) == {"a", "b", "c"}
    assert entries["a"] == {"name": "a", "value": 1.1, "unit": "ratio", "goal": "<= 1.2",
                            "met": True}
    assert entries["b"]["value"] == 30.0 and entries["b"]["met"] is True
    assert entries["c"]["goal"] is None and entries["c"]["met"] is None
    with pytest.raises(ValueError, match="value"):
        results.figure("d", float("nan"), "s")
