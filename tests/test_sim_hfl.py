"""The HFL simulator (sim.hfl) against Algorithm 1 of Ali & Arafa 2025:
a plain per-client loop on the same draws (each client's noise, or each group's mean noise
as the quadratic draws it), S = 0 as minibatch SGD, schedule identities of
(7), (9), (13), Lemma 1 pathwise, the closed-form count moments, determinism, bad input."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from fedbound import bounds
from fedbound.bounds import delays as D
from fedbound.bounds import hfl as H  # noqa: F401  (registers hfl.*)
from fedbound.sim.hfl import HFLDelays, draw_schedule, run_hfl, schedule_from_counts
from fedbound.sim.problems import LogisticRegression, Problem, Quadratic

FAST = settings(max_examples=12, deadline=None)
FIG7A_DELAYS = HFLDelays((1.0, 1.0), (0.1, 0.1), 10.0, 1.0)


def quadratic(seed=0, sigma=1.0):
    return Quadratic.random(4, 1.0, 0.2, sigma, torch.Generator().manual_seed(seed))


def logistic(seed=0):
    return LogisticRegression.random(40, 3, 1.5, torch.Generator().manual_seed(seed), batch=1)


class PerClient(Quadratic):
    """The quadratic drawing one noise vector per client (the generic
    ``Problem.mean_gradient_sampler``), not its group mean's in one draw."""

    mean_gradient_sampler = Problem.mean_gradient_sampler


def per_client(seed=0, sigma=1.0):
    pr = quadratic(seed, sigma)
    return PerClient(pr.hessian, pr.x_star, f_star=pr.f_inf, sigma=pr.sigma)


def plain_loop(problem, sizes, alpha, x1, t, replicas, seed, upload="printed"):
    """Algorithm 1 literally: loops over replicas, rounds, groups, local iterations and
    clients, consuming the same stochastic-gradient draws as the simulator (a ``PerClient``
    problem: one per client; a ``Quadratic``: each group's mean noise, one N(0, sigma^2/(d
    n_i) I) vector per group); ``upload`` the reading of (10) and (12): Delta_i / t_i
    (printed), Delta_i t_eff / t_i (fednova) or Delta_i (sum)."""
    gen = torch.Generator().manual_seed(seed)
    G, n_max, d = len(sizes), max(sizes), problem.dim
    N = sum(sizes)
    clients = isinstance(problem, PerClient)
    x = [x1.clone() for _ in range(replicas)]
    for u in range(t.shape[0]):
        ys = [[x[r].clone() for _ in range(G)] for r in range(replicas)]
        for step in range(int(t[u].max())):
            block = torch.stack([torch.stack(ys[r]) for r in range(replicas)])
            if clients:
                g = problem.stochastic_grad(block[:, :, None, :].expand(replicas, G, n_max, d), gen)
            else:
                noise = torch.randn(replicas, G, d, generator=gen, dtype=torch.float64)
            for r in range(replicas):
                for i in range(G):
                    if step < t[u, i]:
                        if clients:
                            total = torch.zeros(d, dtype=torch.float64)
                            for k in range(sizes[i]):
                                total = total + (ys[r][i] - alpha * g[r, i, k])
                            ys[r][i] = total / sizes[i]
                        else:
                            scale = problem.sigma / math.sqrt(d * sizes[i])
                            ys[r][i] = ys[r][i] - alpha * (problem.grad(ys[r][i]) + scale * noise[r, i])
        t_eff = sum(sizes[i] / N * float(t[u, i]) for i in range(G))
        scale = [{"printed": 1 / float(t[u, i]), "fednova": t_eff / float(t[u, i]), "sum": 1.0}[upload]
                 for i in range(G)]
        for r in range(replicas):
            x[r] = x[r] + sum(sizes[i] / N * (ys[r][i] - x[r]) * scale[i] for i in range(G))
    return torch.stack(x)


@FAST
@given(sizes=st.lists(st.integers(1, 4), min_size=1, max_size=3), U=st.integers(1, 4),
       seed=st.integers(0, 50), clients=st.booleans())
def test_vectorised_equals_plain_loop(sizes, U, seed, clients):
    rng = np.random.default_rng(seed)
    t = rng.integers(1, 4, size=(U, len(sizes)))
    pr = per_client(seed) if clients else quadratic(seed)
    x1 = pr.x_star + 1.0
    tr = run_hfl(pr, sizes=sizes, alpha=0.1, x1=x1, replicas=2, t=t,
                 generator=torch.Generator().manual_seed(seed))
    ref = plain_loop(pr, sizes, 0.1, x1, t, 2, seed)
    assert torch.allclose(tr.final_loss, pr.loss(ref), rtol=1e-12, atol=1e-14)


@FAST
@given(sizes=st.lists(st.integers(1, 4), min_size=1, max_size=3), U=st.integers(1, 3),
       seed=st.integers(0, 50), upload=st.sampled_from(["printed", "fednova", "sum"]))
def test_each_reading_of_the_upload_equals_the_plain_loop(sizes, U, seed, upload):
    t = np.random.default_rng(seed).integers(1, 5, size=(U, len(sizes)))
    pr = per_client(seed)
    x1 = pr.x_star + 1.0
    tr = run_hfl(pr, sizes=sizes, alpha=0.1, x1=x1, replicas=2, t=t, upload=upload,
                 generator=torch.Generator().manual_seed(seed))
    ref = plain_loop(pr, sizes, 0.1, x1, t, 2, seed, upload)
    assert torch.allclose(tr.final_loss, pr.loss(ref), rtol=1e-12, atol=1e-14)


def test_the_readings_of_the_upload_agree_where_the_counts_do():
    """t = 1 everywhere: all three readings are one SGD step (bit for bit); equal counts c in
    every group: t_eff = c, so FedNova's rescaling undoes the division (the plain sum)."""
    pr, sizes, x1 = logistic(2), [2, 3], torch.full((3,), 0.5, dtype=torch.float64)

    def run(t, upload):
        return run_hfl(pr, sizes=sizes, alpha=0.3, x1=x1, replicas=2, t=t, upload=upload,
                       generator=torch.Generator().manual_seed(4)).loss

    ones = [[1, 1]] * 3
    assert torch.equal(run(ones, "printed"), run(ones, "sum"))
    assert torch.equal(run(ones, "fednova"), run(ones, "sum"))
    equal = [[3, 3], [2, 2]]
    assert torch.allclose(run(equal, "fednova"), run(equal, "sum"), rtol=1e-13)
    assert not torch.allclose(run(equal, "printed"), run(equal, "sum"), rtol=1e-6)
    with pytest.raises(ValueError, match="upload='mean' must be one of"):
        run(ones, "mean")


def test_S_zero_is_minibatch_sgd():
    """t = 1: x^{u+1} = x^u - alpha/N sum_{i,k} g_ik(x^u) (one step of minibatch SGD)."""
    pr, sizes = per_client(1), [2, 3]
    gen = torch.Generator().manual_seed(3)
    sched = draw_schedule(FIG7A_DELAYS, 0.0, 60.0, 2, gen)
    assert (sched.t[sched.t > 0] == 1).all()
    x1 = pr.x_star + 2.0
    tr = run_hfl(pr, sizes=sizes, alpha=0.2, x1=x1, replicas=2, schedule=sched,
                 generator=torch.Generator().manual_seed(5))
    gen = torch.Generator().manual_seed(5)
    x = x1.expand(2, 4).clone()
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]], dtype=torch.float64)
    for u in range(sched.t.shape[1]):
        g = pr.stochastic_grad(x[:, None, None, :].expand(2, 2, 3, 4), gen)
        step = (g * mask[None, :, :, None]).sum(dim=(1, 2)) / 5
        live = (sched.t[:, u, 0] > 0)[:, None]
        x = torch.where(live, x - 0.2 * step, x)
    assert torch.allclose(tr.final_loss, pr.loss(x), rtol=1e-12, atol=1e-14)


@FAST
@given(S=st.floats(0, 8), T=st.floats(5, 120), seed=st.integers(0, 50), ramp=st.booleans())
def test_schedule_identities(S, T, seed, ramp):
    sched = draw_schedule(FIG7A_DELAYS, S, T, 20, torch.Generator().manual_seed(seed), ramp=ramp)
    U, ends, t = sched.U, sched.end_time, sched.t
    for r in range(20):
        assert ends[r, U[r] - 1] >= T
        assert U[r] == 1 or ends[r, U[r] - 2] < T
        assert (t[r, : U[r]] >= 1).all() and (t[r, U[r]:] == 0).all()
    t_max = max(1, math.ceil(S))  # c_i = 1
    assert t.max() <= t_max
    model = D.DelayModel.linear([0.0, 1.0, 0.0, 0.1, 0.0, 10.0, 0.0, 1.0], [15, 15])
    if not ramp:
        assert U.max() <= D.rounds_envelope(model, S, T)


def test_isolated_groups_and_ramp():
    sched = draw_schedule(FIG7A_DELAYS, 50.0, 50.0, 5, torch.Generator().manual_seed(0))
    assert (sched.U == 1).all()
    det = HFLDelays((1.0,), (0.0,), 1.0, 0.0)
    sched = draw_schedule(det, 5.0, 40.0, 1, torch.Generator().manual_seed(0), ramp=True)
    U = int(sched.U[0])
    assert sched.t[0, :U, 0].tolist() == [min(u, 5) for u in range(1, U + 1)]
    # accumulated system time: round u lasts min(u, 5) + 1
    assert sched.end_time[0, :U].tolist() == list(np.cumsum([min(u, 5) + 1 for u in range(1, U + 1)]))


@pytest.mark.parametrize("S", [5.0, 5.5])
def test_ramped_schedules_of_the_simulator_and_of_bounds_agree(S):
    """Fig. 13 (Section IV-D): S_u = min(u, S), "from 1 to 5, then fixed at 5". Deterministic
    delays: sim.hfl.draw_schedule and bounds.delays.sample_schedules give the same counts,
    round by round; shifted-exponential delays: the same mean count in every round (4
    standard errors), and t_i^u at most ceil(S_u / c_i) there."""
    det = HFLDelays((0.5, 1.0), (0.0, 0.0), 1.0, 0.0)
    model = D.DelayModel((D.deterministic(0.5), D.deterministic(1.0)), D.deterministic(1.0))
    sim = draw_schedule(det, S, 60.0, 1, torch.Generator().manual_seed(0), ramp=True)
    ref = D.sample_schedules(model, S, 60.0, 1, np.random.default_rng(0), ramp=True)
    assert int(sim.U[0]) == int(ref.U[0])
    assert sim.t[0].tolist() == ref.t[0].tolist()
    levels = [min(u, S) for u in range(1, int(sim.U[0]) + 1)]
    assert sim.t[0, :, 1].tolist() == [max(1, math.ceil(v)) for v in levels]
    law = HFLDelays((0.5, 1.0), (0.3, 0.6), 1.0, 0.5)
    model = D.DelayModel((D.ShiftedExponential(0.5, 0.3), D.ShiftedExponential(1.0, 0.6)),
                         D.ShiftedExponential(1.0, 0.5))
    sim = draw_schedule(law, S, 30.0, 1500, torch.Generator().manual_seed(1), ramp=True).t[:, :6].double()
    ref = torch.as_tensor(D.sample_schedules(model, S, 30.0, 1500, np.random.default_rng(1),
                                             ramp=True).t[:, :6], dtype=torch.float64)
    se = torch.sqrt(sim.var(0) / 1500 + ref.var(0) / 1500)
    assert ((sim.mean(0) - ref.mean(0)).abs() <= 4 * se + 1e-12).all()
    caps = torch.tensor([[math.ceil(min(u, S) / c) for c in (0.5, 1.0)] for u in range(1, 7)])
    assert (sim <= caps).all()


def test_counts_match_closed_form():
    sched = draw_schedule(HFLDelays((1.0,), (0.55,), 2.0, 1.0), 5.0, 4000.0, 4,
                          torch.Generator().manual_seed(0))
    t = sched.t[sched.t > 0].double()
    Et, Et2 = D.count_moments(D.ShiftedExponential(1, 0.55), 5)
    assert abs(float(t.mean()) - Et) < 4 * float(t.std()) / math.sqrt(t.numel())
    assert abs(float((t**2).mean()) - Et2) < 4 * float((t**2).std()) / math.sqrt(t.numel())


@FAST
@given(sizes=st.lists(st.integers(1, 6), min_size=1, max_size=3), S=st.floats(0, 6),
       alpha=st.floats(0.01, 5.0), seed=st.integers(0, 50))
def test_lemma1_pathwise_on_logistic(sizes, S, alpha, seed):
    """||g~|| <= G = R a.s.: (18) holds on every path and for every alpha."""
    pr = logistic(seed)
    delays = HFLDelays((1.0,) * len(sizes), (0.3,) * len(sizes), 2.0, 0.5)
    tr = run_hfl(pr, sizes=sizes, alpha=alpha, x1=torch.zeros(3), replicas=4, delays=delays,
                 S=S, T=30.0, generator=torch.Generator().manual_seed(seed))
    bound = bounds.get("hfl.lemma1").evaluate(alpha=alpha, G=pr.G, sizes=np.array(sizes),
                                              t=tr.t.numpy())
    real = tr.real.numpy()
    assert (tr.deviation.numpy()[real] <= bound[real] * (1 + 1e-12)).all()
    if len(sizes) == 1:  # exact single-group identity: deviation <= alpha^2 (t-1)^2 G^2
        t = tr.t.numpy()[..., 0][real]
        dev = tr.deviation.numpy()[..., 0][real]
        assert (dev <= alpha**2 * (t - 1) ** 2 * pr.G**2 * (1 + 1e-12) + 1e-15).all()


def test_theorem2_holds_on_fixed_path():
    pr = logistic(2)
    sched = draw_schedule(FIG7A_DELAYS, 3.0, 150.0, 1, torch.Generator().manual_seed(1))
    t = sched.t[0, : int(sched.U[0])]
    tr = run_hfl(pr, sizes=[4, 6], alpha=0.5 / pr.L, x1=torch.full((3,), 2.0), replicas=64,
                 t=t, generator=torch.Generator().manual_seed(2))
    params = dict(alpha=0.5 / pr.L, L=pr.L, G=pr.G, sigma=pr.sigma,
                  Delta=pr.delta(torch.full((3,), 2.0)), sizes=np.array([4, 6]), t=t.numpy())
    assert float(tr.lhs.mean()) <= bounds.get("hfl.theorem2", "tight").evaluate(**params)
    assert (tr.t == t).all()


def test_same_seed_same_trace_and_divergence():
    pr = quadratic(0)
    kw = dict(sizes=[3, 2], alpha=0.1, x1=pr.x_star + 1, replicas=3, delays=FIG7A_DELAYS,
              S=2.0, T=40.0)
    a = run_hfl(pr, generator=torch.Generator().manual_seed(9), **kw)
    b = run_hfl(pr, generator=torch.Generator().manual_seed(9), **kw)
    assert torch.equal(a.loss, b.loss) and torch.equal(a.t, b.t)
    big = run_hfl(pr, generator=torch.Generator().manual_seed(9), **{**kw, "alpha": 1e6, "T": 300.0})
    assert big.diverged.all() and torch.isfinite(big.loss).all()


@pytest.mark.parametrize("kw, match", [
    (dict(sizes=[2, 0]), r"sizes\[1\]=0"),
    (dict(alpha=-1.0), "alpha=-1.0"),
    (dict(t=[[1, 0]]), "every real round"),
    (dict(t=[[1, 1, 1]]), "groups=2"),
    (dict(delays=FIG7A_DELAYS, S=1.0, T=5.0, t=[[1, 1]]), "exactly one"),
])
def test_bad_input(kw, match):
    pr = quadratic(0)
    base = dict(sizes=[2, 2], alpha=0.1, x1=pr.x_star, replicas=2,
                generator=torch.Generator().manual_seed(0))
    if not {"t", "delays"} & set(kw):
        base["t"] = [[1, 1]]
    with pytest.raises(ValueError, match=match):
        run_hfl(pr, **{**base, **kw})


def test_bad_delays():
    with pytest.raises(ValueError, match="local_shift"):
        HFLDelays((-1.0,), (0.1,), 1.0, 1.0)
    with pytest.raises(ValueError, match="S=-1"):
        draw_schedule(FIG7A_DELAYS, -1.0, 5.0, 1, torch.Generator())
    with pytest.raises(ValueError, match="zero rows"):
        schedule_from_counts(np.array([[0, 0], [1, 1]]), 1)


def test_given_schedule_keeps_its_wall_clock():
    model = D.DelayModel.linear([0.01, 0.85, 1e-3, 0.085, 4, 2, 0.4, 0.2], [2, 3])
    sched = D.sample_schedules(model, 2, 60, 3, np.random.default_rng(0))
    pr = quadratic(0)
    tr = run_hfl(pr, sizes=[2, 3], alpha=0.1, x1=pr.x_star, replicas=3, t=sched.t,
                 end_time=sched.end_time, generator=torch.Generator().manual_seed(0))
    real = sched.t[..., 0] > 0
    assert np.array_equal(tr.end_time.numpy()[real], sched.end_time[real])
    assert np.array_equal(tr.U.numpy(), sched.U)
    with pytest.raises(ValueError, match="non-decreasing"):
        schedule_from_counts(np.ones((2, 2), dtype=int), 1, end_time=[5.0, 1.0])
