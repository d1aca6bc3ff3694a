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
from fedbound.sim.mllsgd import run_mllsgd  # noqa: E402

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


def test_a_retimed_chooser_says_whether_its_recorded_regret_is_of_its_settings(tmp_path, monkeypatch,
                                                                              capsys):
    """bench_choosers_named --time-only: the recommended settings recorded with the regret
    (a full run's figures) against those the chooser recommends now."""
    from benchmarks import regret

    path = tmp_path / "results.json"
    path.write_text("[]")
    monkeypatch.setattr(results, "RESULTS", path)
    assert regret.same_settings("s", {"S": 2.0, "alpha": 0.5}) == []     # none recorded
    assert "run it in full" in capsys.readouterr().out
    rows = [{"who": "recommended", "kind": "recommended", "within": True, "passes": True,
             "regret": 0.01, "regret_ci": 0.02, "settings": {"alpha": 0.5, "S": 2}}]
    results.record(regret.figures("s", {"seconds": 1.0, "cpu": 1.0, "calibrated_seconds": 0.1,
                                        "unflagged_edge": False, "rows": rows}), path)
    assert regret.judged_settings("s") == {"S": 2.0, "alpha": 0.5}
    assert regret.same_settings("s", {"S": 2, "alpha": 0.5})[0]["met"] is True
    # the same setting, its last bits printed differently (1.49353143123533 recorded against
    # 1.4935314312353298 recommended, seen): the same
    assert regret.same_settings("s", {"S": 2, "alpha": 0.5 + 2e-16})[0]["met"] is True
    moved = regret.same_settings("s", {"S": 2.0, "alpha": 0.25})[0]
    assert moved["value"] == 0.0 and moved["met"] is False
    assert "its regret was measured at" in capsys.readouterr().out


# ------------------------------------------------------------------ --device (issue 18, item 5)

BENCHMARKS = sorted(p.stem for p in
                    (Path(__file__).resolve().parent.parent / "benchmarks").glob("bench_*.py"))
CPU_ONLY = {"bench_bounds", "bench_choosers_hfl", "bench_choosers_mllsgd", "bench_choosers_tdcd",
            "bench_fused", "bench_hfl_deadline", "bench_hfl_iid", "bench_inflate", "bench_interrupts",
            "bench_region_search", "bench_report", "bench_startup", "bench_teardown",
            "bench_throughput"}


def _refused(name: str, device: str, capsys) -> str:
    """The usage error (exit 2, before any work) of benchmark ``name`` for ``--device``."""
    import importlib

    module = importlib.import_module(f"benchmarks.{name}")
    with pytest.raises(SystemExit) as exited:
        module.main(["--device", device])
    assert exited.value.code == 2
    return capsys.readouterr().err


def test_every_benchmark_script_is_listed():
    assert len(BENCHMARKS) >= 14 and CPU_ONLY < set(BENCHMARKS)


@pytest.mark.parametrize("name", BENCHMARKS)
def test_every_benchmark_takes_device_and_refuses_an_unknown_one(name, capsys):
    err = _refused(name, "no-such-device", capsys)
    assert "--device no-such-device" in err


@pytest.mark.parametrize("name", sorted(CPU_ONLY))
def test_cpu_only_benchmarks_say_why_they_refuse_cuda(name, capsys):
    assert "measures on the CPU only" in _refused(name, "cuda", capsys)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
@pytest.mark.parametrize("name", sorted(set(BENCHMARKS) - CPU_ONLY))
def test_simulator_benchmarks_refuse_cuda_where_there_is_none(name, capsys):
    assert "no CUDA device" in _refused(name, "cuda", capsys)


def test_figure_names_say_the_device():
    from benchmarks.device import suffix

    assert suffix("cpu") == "" and suffix("cuda") == ".cuda" and suffix("cuda:1") == ".cuda1"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("name", references.SIMULATORS)
def test_simulators_on_cuda_give_the_references_recordings(name):
    """The CUDA path of each simulator (its draws from a CPU generator, moved) against the
    hand-fused reference on the CPU, on the same draws."""
    runs = references.pair(name, 20, 16 if name == "mllsgd" else 3, device="cuda")
    assert runs.difference(seed=3) <= 1e-10


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_logistic_buffers_on_cuda():
    from fedbound.sim.problems import LogisticRegression, empty_large

    assert empty_large((1 << 21,), torch.float64, "cuda").device.type == "cuda"
    problem = LogisticRegression.random(300, 4, 2.0, torch.Generator().manual_seed(0), lam=0.1,
                                        batch=5).to("cuda")
    x = torch.randn(3, 4, dtype=torch.float64, device="cuda")
    loss, grad_sq = problem.recorder((3, 4))(x)
    expected = problem.loss_and_grad_sq(x)
    assert torch.equal(loss, expected[0]) and torch.equal(grad_sq, expected[1])
