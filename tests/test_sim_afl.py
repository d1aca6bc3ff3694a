"""The AFA-CD / AFA-CS simulator (sim/afl.py): exact constants, Lemma 1, the local-drift bound
(1), arrival processes, delays, the loop reference, AFA-CS memory, server steps, errors."""

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from fedbound.sim.afl import (
    ARRIVALS,
    HeterogeneousQuadratic,
    LabelSkewedLogistic,
    arrival_masks,
    delay_draws,
    draw_schedule,
    local_update,
    run_afl,
)

F64 = torch.float64
_spec = importlib.util.spec_from_file_location(
    "bench_afl", Path(__file__).resolve().parent.parent / "benchmarks" / "bench_afl.py")
bench_afl = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_afl)


def gen(seed=0):
    return torch.Generator().manual_seed(seed)


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 5), st.integers(2, 9), st.floats(0.1, 3), st.floats(0, 2), st.integers(0, 999))
def test_heterogeneous_quadratic_constants_are_exact(dim, M, L, sigma_G, seed):
    c = HeterogeneousQuadratic.random(dim, M, L, L if dim == 1 else L / 4, 1.0, sigma_G, gen(seed))
    assert c.L == pytest.approx(L)
    x = torch.randn(7, dim, dtype=F64, generator=gen(seed + 1))
    per_worker = c.worker_grads(x[:, None, :].expand(7, M, dim))
    torch.testing.assert_close(per_worker.mean(1), c.grad(x))  # f = mean_i f_i
    spread = (per_worker - c.grad(x)[:, None]).norm(dim=-1)  # ||grad f_i - grad f|| for every x
    assert float(spread.max()) == pytest.approx(sigma_G, abs=1e-12)
    assert float(c.loss(c.x_star)) == pytest.approx(c.f_star)
    assert float(c.grad(c.x_star).norm()) == 0


def test_noise_has_exact_variance_sigma_L_squared():
    c = HeterogeneousQuadratic.random(4, 3, 1.0, 0.5, 1.7, 0.3, gen())
    eps = c.noise((200_000, 4), gen(1), "cpu")
    assert float(eps.square().sum(-1).mean()) == pytest.approx(1.7**2, rel=0.01)


@pytest.mark.parametrize("K", [1, 3, 6])
def test_lemma1_mean_and_variance_of_a_worker_update(K):
    """E[G_i] = Delta_i and E||G_i - Delta_i||^2 = sigma_L^2 / K (equality for Gaussian
    noise), Lemma 1 of Yang et al. 2022 (Appendix A)."""
    c = HeterogeneousQuadratic.random(3, 4, 1.0, 0.3, 1.5, 0.8, gen())
    R = 20_000
    x = torch.ones(R, 4, 3, dtype=F64)
    upd = local_update(c, x, torch.full((R, 4), K), 0.05, gen(2), diagnostics=True)
    err = upd.G - upd.Delta
    se = float(err.std()) / math.sqrt(R)
    assert float(err.mean(0).abs().max()) < 5 * se
    var = err.square().sum(-1)  # [R, M]
    assert float(var.mean()) == pytest.approx(1.5**2 / K, rel=0.03)


def test_lemma1_on_logistic_regression_the_variance_is_at_most_sigma_L_squared_over_K():
    c = LabelSkewedLogistic.random(4, 30, 3, 1.0, gen(), skew=0.9, batch=2)
    R, K = 5000, 4
    upd = local_update(c, torch.zeros(R, 4, 3, dtype=F64), torch.full((R, 4), K), 0.5, gen(1),
                       diagnostics=True)
    err = upd.G - upd.Delta
    assert float(err.mean(0).abs().max()) < 5 * float(err.std()) / math.sqrt(R)
    assert float(err.square().sum(-1).mean()) <= c.sigma_L**2 / K


@settings(max_examples=15, deadline=None)
@given(st.integers(1, 8), st.floats(0.05, 1.0), st.integers(0, 999))
def test_local_drift_bound_1(K, frac, seed):
    """E||x_{t,k} - x_t||^2 <= 5 K eta_L^2 (sigma_L^2 + 6 K sigma_G^2) + 30 K^2 eta_L^2
    ||grad f(x_t)||^2 for k <= K when 6 eta_L^2 (2K^2-3K+1) L^2 <= 1 (proof of Theorem 2,
    Appendix B.2, the bound on A_6)."""
    c = HeterogeneousQuadratic.random(3, 5, 1.0, 0.2, 1.0, 0.7, gen(seed))
    q = 6 * (2 * K - 1) * (K - 1)
    eta_L = frac / (c.L * math.sqrt(q)) if q else frac
    x_t = c.x_star + torch.randn(3, dtype=F64, generator=gen(seed + 1))
    R = 4000
    upd = local_update(c, x_t.expand(R, 5, 3).clone(), torch.full((R, 5), K), eta_L, gen(seed + 2),
                       diagnostics=True)
    drift = upd.drift.mean(0)  # [M, K]
    bound = (5 * K * eta_L**2 * (c.sigma_L**2 + 6 * K * c.sigma_G**2)
             + 30 * K**2 * eta_L**2 * float(c.grad(x_t).square().sum()))
    assert float(drift.max()) <= bound


@pytest.mark.parametrize("process", [*ARRIVALS, [[0, 2], [1, 3]]])
def test_arrival_processes(process):
    M, m, T, R = 6, 1 if process == "single" else 2, 300, 50
    probs = torch.tensor([8.0, 4, 2, 1, 1, 1], dtype=F64)
    masks = arrival_masks(process, T, R, M, m, gen(), "cpu", probs)
    assert masks.shape == (R, T, M)
    assert (masks.sum(-1) == m).all()
    freq = masks.double().mean((0, 1))
    if process == "uniform":
        assert torch.allclose(freq, torch.full((M,), m / M, dtype=F64), atol=0.02)
    elif process == "biased":
        assert freq[0] > freq[1] > freq[2] > freq[3] and freq[0] > 0.5
    elif process == "round_robin":
        assert (masks[:, :M // m].sum(1) == 1).all()  # every worker once per cycle
    elif process == "single":
        assert masks[..., 0].all() and not masks[..., 1:].any()
    else:
        assert masks[0, 0].tolist() == [True, False, True, False, False, False]
        assert torch.equal(masks[:, 2], masks[:, 0])


def test_a_user_supplied_arrival_generator_is_called_each_round():
    seen = []

    def process(t, R, M, generator):
        seen.append(t)
        mask = torch.zeros(R, M, dtype=torch.bool)
        mask[:, t % M] = True
        return mask
    c = HeterogeneousQuadratic.random(2, 3, 1.0, 0.5, 0.0, 0.5, gen())
    tr = run_afl(c, m=1, T=7, eta=1.0, eta_L=0.1, x0=torch.zeros(2), replicas=2, generator=gen(),
                 arrivals=process)
    assert seen == list(range(7)) and tr.schedule.arrivals[0, 4, 1]


def test_delays_are_bounded_and_max_is_exact():
    d = delay_draws("uniform", 50, 3, 20, 5, gen(), "cpu")
    t = torch.arange(50)[None, :, None]
    assert (d >= 0).all() and (d <= t.clamp(max=3)).all() and (d == 3).any()
    assert torch.equal(delay_draws("max", 50, 3, 2, 5, gen(), "cpu"), t.clamp(max=3).expand(2, 50, 5))


@pytest.mark.parametrize("algorithm", ["cd", "cs"])
@pytest.mark.parametrize("delays", ["uniform", "max"])
def test_vectorised_run_equals_the_plain_loop(algorithm, delays):
    """Same schedule, same noise draws: the literal loop of benchmarks/bench_afl.py."""
    c = HeterogeneousQuadratic.random(3, 5, 2.0, 0.3, 1.0, 0.6, gen())
    sch = draw_schedule(M=5, m=2, T=15, replicas=3, generator=gen(1), K=(1, 3), tau=2, delays=delays)
    kw = dict(eta=2.0, eta_L=0.05, x0=torch.ones(3, dtype=F64))
    ref = bench_afl.loop_afl(c, algorithm=algorithm, schedule=sch, generator=gen(2), **kw)
    tr = run_afl(c, algorithm=algorithm, m=2, T=15, replicas=3, schedule=sch, generator=gen(2), **kw)
    torch.testing.assert_close(tr.grad_sq_norm, ref, rtol=1e-10, atol=1e-12)


def test_same_seed_same_trace_bit_for_bit():
    c = LabelSkewedLogistic.random(5, 10, 3, 1.0, gen())
    kw = dict(algorithm="cs", m=2, T=20, eta=1.0, eta_L=0.1, x0=torch.zeros(3), replicas=4, K=(1, 3),
              tau=2, arrivals="biased", probs=[5, 1, 1, 1, 1])
    a, b = run_afl(c, generator=gen(7), **kw), run_afl(c, generator=gen(7), **kw)
    assert torch.equal(a.grad_sq_norm, b.grad_sq_norm) and torch.equal(a.schedule.K, b.schedule.K)


def test_afa_cs_with_every_worker_fresh_is_afa_cd():
    """m = M, no delays: the memory holds exactly this round's updates (Algorithm 3 = Algorithm 2)."""
    c = HeterogeneousQuadratic.random(2, 4, 1.0, 0.5, 1.0, 0.5, gen())
    sch = draw_schedule(M=4, m=4, T=10, replicas=3, generator=gen(1), K=2, delays="zero")
    kw = dict(m=4, T=10, eta=2.0, eta_L=0.1, x0=torch.ones(2), replicas=3, schedule=sch)
    cs = run_afl(c, algorithm="cs", generator=gen(3), **kw)
    g = gen(3)
    torch.randn((3, 4, 2), generator=g, dtype=F64)  # AFA-CS first draws its initial memory
    torch.randn((3, 4, 2), generator=g, dtype=F64)  # (K0 = 2 local steps)
    cd = run_afl(c, algorithm="cd", generator=g, **kw)
    torch.testing.assert_close(cs.grad_sq_norm, cd.grad_sq_norm, rtol=1e-12, atol=1e-14)


def test_memory_ages_and_stored_K():
    sch = draw_schedule(M=4, m=1, T=12, replicas=2, generator=gen(), K=(1, 5), arrivals="round_robin",
                        delays="zero")
    ages, stored = sch.memory()
    assert sch.staleness() == (int(ages.max()), 1)
    assert int(ages[:, 4:].max()) == 3  # each worker refreshed every 4 rounds
    assert torch.equal(stored[:, 5, 1], sch.K[:, 5, 1])  # worker 1 arrives at t = 5


def test_printed_server_step_diverges_where_the_proof_step_converges():
    """x <- x - eta G (Algorithm 2) at Corollary 1's eta = sqrt(mK) blows up once
    sqrt(mK) L > 2; x <- x - eta eta_L G (the proofs, Appendix B.2) converges."""
    c = HeterogeneousQuadratic.random(3, 8, 1.0, 0.5, 0.5, 0.3, gen())
    T, m, K = 400, 4, 4
    kw = dict(m=m, T=T, eta=math.sqrt(m * K), eta_L=1 / math.sqrt(T), x0=torch.ones(3), replicas=4, K=K)
    printed = run_afl(c, server_step="printed", generator=gen(1), **kw)
    proof = run_afl(c, server_step="proof", generator=gen(1), **kw)
    assert printed.diverged.all()
    assert not proof.diverged.any() and float(proof.grad_sq_norm[:, -1].mean()) < 0.1


def test_lower_bound_instance_converges_to_the_floor():
    c = HeterogeneousQuadratic([2.0], [[-1.0], [1.0]])
    tr = run_afl(c, m=1, T=300, eta=1.0, eta_L=0.1, x0=torch.zeros(1), replicas=2, generator=gen(),
                 arrivals="single", K=3)
    assert float(tr.x_final[0]) == pytest.approx(-1.0)
    assert float(tr.grad_sq_norm[0, -1]) == pytest.approx(c.sigma_G**2)


@pytest.mark.parametrize("kwargs, match", [
    (dict(m=5), "m=5 exceeds M=4"),
    (dict(tau=-1), "tau=-1 must be an integer >= 0"),
    (dict(K=0), "K=0 must be an integer >= 1"),
    (dict(K=(2, 1)), "K=.* must be an integer >= 1 or a pair"),
    (dict(arrivals="sometimes"), "arrivals='sometimes' must be one of"),
    (dict(arrivals="single", m=2), "needs m=1|m=2 must be 1"),
    (dict(arrivals="biased"), "probs must be 4 positive"),
    (dict(eta_L=-0.1), "eta_L=-0.1 must be finite and > 0"),
    (dict(algorithm="sync"), "algorithm='sync' must be one of"),
])
def test_bad_input_is_a_clear_error(kwargs, match):
    c = HeterogeneousQuadratic.random(2, 4, 1.0, 0.5, 0.0, 0.5, gen())
    kw = dict(m=2, T=5, eta=1.0, eta_L=0.1, x0=torch.zeros(2), replicas=2, generator=gen())
    with pytest.raises(ValueError, match=match):
        run_afl(c, **{**kw, **kwargs})


def test_logistic_constants_are_certified_bounds():
    c = LabelSkewedLogistic.random(4, 25, 3, 2.0, gen(), batch=3)
    x = torch.randn(50, 3, dtype=F64, generator=gen(1))
    y = torch.randn(50, 3, dtype=F64, generator=gen(2))
    xs = x[:, None].expand(50, 4, 3)
    ys = y[:, None].expand(50, 4, 3)
    lip = (c.worker_grads(xs) - c.worker_grads(ys)).norm(dim=-1) / (x - y).norm(dim=-1)[:, None]
    assert float(lip.max()) <= c.L * (1 + 1e-12)
    spread = (c.worker_grads(xs) - c.grad(x)[:, None]).norm(dim=-1)
    assert float(spread.max()) <= c.sigma_G
    assert np.isclose(c.R, 2.0)
