"""FedProx and SCAFFOLD as the worker's optimiser inside AFA-CD and AFA-CS (sim/afl.py, Yang
et al. 2022, Appendix E.2, Table 3): the vectorised run against a plain loop over replicas,
workers and steps with the same schedule and noise draws, and the special cases that pin
each reading down."""

import pytest
import torch
from test_sim_afl import F64, bench_afl, gen  # the plain-loop reference, loaded once

from fedbound.sim.afl import HeterogeneousQuadratic, draw_schedule, local_update, run_afl


@pytest.mark.parametrize("algorithm", ["cd", "cs"])
@pytest.mark.parametrize("worker", ["fedprox", "scaffold"])
def test_vectorised_run_equals_the_plain_loop(algorithm, worker):
    """Same schedule (delays up to 2, K from 1 to 3), same noise draws: the same trace as
    the literal loop of benchmarks/bench_afl.py."""
    c = HeterogeneousQuadratic.random(3, 5, 2.0, 0.3, 1.0, 0.6, gen())
    sch = draw_schedule(M=5, m=2, T=15, replicas=3, generator=gen(1), K=(1, 3), tau=2)
    kw = dict(eta=2.0, eta_L=0.05, x0=torch.ones(3, dtype=F64))
    ref = bench_afl.loop_afl(c, algorithm=algorithm, worker=worker, schedule=sch,
                             generator=gen(2), **kw)
    tr = run_afl(c, algorithm=algorithm, worker=worker, m=2, T=15, replicas=3, schedule=sch,
                 generator=gen(2), **kw)
    torch.testing.assert_close(tr.grad_sq_norm, ref, rtol=1e-10, atol=1e-12)


def test_one_local_step_of_fedprox_is_plain_sgd():
    """The proximal term vanishes at x_start: with K = 1 FedProx draws and moves as SGD."""
    c = HeterogeneousQuadratic.random(3, 4, 2.0, 0.3, 1.0, 0.6, gen())
    kw = dict(m=2, T=10, eta=2.0, eta_L=0.1, x0=torch.ones(3, dtype=F64), replicas=2, K=1, tau=1)
    sgd = run_afl(c, generator=gen(4), **kw)
    prox = run_afl(c, worker="fedprox", mu=0.5, generator=gen(4), **kw)
    assert torch.equal(sgd.loss, prox.loss)


def test_fedprox_local_steps_contract_towards_the_start():
    """On a noiseless quadratic a larger mu keeps the K-step local run closer to x_start."""
    c = HeterogeneousQuadratic.random(3, 4, 2.0, 0.3, 0.0, 0.6, gen())
    start = torch.zeros(1, 4, 3, dtype=F64)
    K = torch.full((1, 4), 8)
    moves = [local_update(c, start, K, 0.1, gen(), mu=mu).G.norm() for mu in (0.0, 1.0, 5.0)]
    assert moves[0] > moves[1] > moves[2]


def test_scaffold_corrections_make_every_worker_descend_f():
    """Karimireddy et al. 2020's point: with c_i = grad f_i(y) and c = grad f(y) (a noiseless
    quadratic), g_i(x) - c_i + c = grad f(x) for every worker, so every worker's K local
    steps are K steps of gradient descent on f, whatever its own centre."""
    c = HeterogeneousQuadratic.random(3, 4, 1.0, 0.5, 0.0, 0.8, gen())
    y = torch.randn(1, 4, 3, dtype=F64, generator=gen(1))[:, :1].expand(1, 4, 3)
    correction = c.grad(y) - c.worker_grads(y)
    start = torch.randn(1, 3, dtype=F64, generator=gen(2))[:, None].expand(1, 4, 3)
    K, eta_L = 5, 0.2
    G = local_update(c, start, torch.full((1, 4), K), eta_L, gen(), correction=correction).G
    x, total = start[0, 0].clone(), torch.zeros(3, dtype=F64)
    for _ in range(K):
        g = c.grad(x)
        total, x = total + g, x - eta_L * g
    torch.testing.assert_close(G[0], (total / K).expand(4, 3), rtol=1e-12, atol=1e-14)


def test_bad_worker_or_mu_is_a_clear_error():
    c = HeterogeneousQuadratic.random(2, 3, 1.0, 0.5, 1.0, 0.5, gen())
    kw = dict(m=1, T=2, eta=1.0, eta_L=0.1, x0=torch.zeros(2), replicas=1, generator=gen())
    with pytest.raises(ValueError, match="worker='adam'"):
        run_afl(c, worker="adam", **kw)
    with pytest.raises(ValueError, match="mu=0"):
        run_afl(c, worker="fedprox", mu=0.0, **kw)


def test_score_is_recorded_every_round_and_draws_nothing():
    c = HeterogeneousQuadratic.random(2, 3, 1.0, 0.5, 1.0, 0.5, gen())
    kw = dict(m=2, T=6, eta=1.0, eta_L=0.1, x0=torch.zeros(2), replicas=3, K=2, tau=1)
    plain = run_afl(c, generator=gen(5), **kw)
    scored = run_afl(c, generator=gen(5), score=lambda x: x.sum(-1), **kw)
    assert torch.equal(plain.loss, scored.loss)
    assert scored.score.shape == (3, 7) and plain.score is None
    torch.testing.assert_close(scored.score[:, -1], scored.x_final.sum(-1))
