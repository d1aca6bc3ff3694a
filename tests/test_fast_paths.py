"""The fast paths of the simulators and of bound evaluation give what the plain code gives:
buffered gradient samplers against ``stochastic_grad``, the one-norm acceptance against
``freeze_diverged`` replica by replica, fused recordings against separate calls, TDCD's
batched client gradients against the dense one-hot contraction of (4), sparse recording,
and vectorised parameter validation and power printing against element-wise numpy."""

import math

import numpy as np
import pytest
import sympy as sp
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from fedbound import bounds
from fedbound.bounds.core import Param, _bound_value, _Printer
from fedbound.sim import problems
from fedbound.sim.afl import HeterogeneousQuadratic
from fedbound.sim.mllsgd import run_mllsgd
from fedbound.sim.problems import LogisticRegression, Problem, Quadratic
from fedbound.sim.tdcd import BlockLinear, Layout, draw_batch, synthetic_data
from fedbound.sim.trace import DIVERGENCE_THRESHOLD, Acceptance, freeze_diverged, norm_of

F64 = torch.float64
FAST = settings(max_examples=30, deadline=None)


def gen(seed):
    return torch.Generator().manual_seed(seed)


def close(a, b, rtol=1e-12):
    return torch.allclose(a, b, rtol=rtol, atol=rtol * float(b.abs().max().clamp(min=1e-300)))


# ---------------------------------------------------------------- samplers


@FAST
@given(seed=st.integers(0, 10**6), lam=st.sampled_from([0.0, 0.3]), batch=st.integers(1, 5),
       expanded=st.booleans())
def test_logistic_sampler_gives_stochastic_grad(seed, lam, batch, expanded):
    problem = LogisticRegression.random(30, 4, 2.0, gen(seed), lam=lam, batch=batch)
    base = torch.randn(2, 3, 4, generator=gen(seed + 1), dtype=F64)
    x = base[:, :, None, :].expand(2, 3, 5, 4) if expanded else base
    sample = problem.gradient_sampler(x.shape, gen(seed + 2))
    fresh = gen(seed + 2)
    for _ in range(3):  # the buffers are reused from call to call
        assert close(sample(x), problem.stochastic_grad(x, fresh))


@pytest.mark.parametrize(("batch", "block_bytes"), [(3, 1), (3, 3 * 6 * 8 * 16), (5, 5 * 6 * 8 * 40),
                                                 (8, 8 * 6 * 8 * 2), (32, 32 * 6 * 8 * 5)])
def test_logistic_sampler_in_blocks_is_the_sampler_in_one_block_bit_for_bit(
        monkeypatch, batch, block_bytes):
    """Gathered a block of models at a time (several blocks, the last one partial), the
    gradients are those of one block holding every model, bit for bit, and those of
    ``stochastic_grad``; an expanded x takes the unblocked path."""
    problem = LogisticRegression.random(200, 6, 2.0, gen(0), batch=batch)
    x = torch.randn(3, 37, 6, generator=gen(1), dtype=F64)
    monkeypatch.setattr(problems, "GATHER_BLOCK_BYTES", block_bytes)
    blocked, fresh = problem.gradient_sampler(x.shape, gen(2)), gen(2)
    monkeypatch.setattr(problems, "GATHER_BLOCK_BYTES", 1 << 40)
    whole = problem.gradient_sampler(x.shape, gen(2))
    for _ in range(3):
        got = blocked(x).clone()
        assert torch.equal(got, whole(x))
        assert close(got, problem.stochastic_grad(x, fresh))
    expanded = x[:, :1].expand(3, 37, 6)
    assert torch.equal(blocked(expanded), whole(expanded))


def test_quadratic_and_afl_samplers_are_bit_for_bit():
    problem = Quadratic.random(4, 2.0, 0.1, 1.5, gen(0), rotate=True)
    x = torch.randn(3, 6, 4, generator=gen(1), dtype=F64)
    sample, fresh = problem.gradient_sampler(x.shape, gen(2)), gen(2)
    for _ in range(3):
        assert torch.equal(sample(x), problem.stochastic_grad(x, fresh))
    clients = HeterogeneousQuadratic.random(4, 6, 2.0, 0.2, 1.0, 0.5, gen(3))
    sample, fresh = clients.worker_gradient_sampler(x.shape, gen(4)), gen(4)
    for _ in range(3):
        assert torch.equal(sample(x), clients.stochastic_worker_grads(x, fresh))


@pytest.mark.parametrize("counts", [[3, 3, 3], [1, 3, 2]])
def test_quadratic_group_mean_is_one_draw_of_the_mean_noise(counts):
    """Quadratic's mean of c noisy gradients: grad F(y) plus one N(0, sigma^2/(dim c) I) draw
    per group model, the draws those of randn on [..., G, d] from the same generator."""
    problem = Quadratic.random(4, 2.0, 0.1, 1.5, gen(0), rotate=True)
    y = torch.randn(2, 3, 4, generator=gen(1), dtype=F64)
    c = torch.tensor(counts)
    fast, fresh = problem.mean_gradient_sampler((2, 3, 3, 4), c, gen(2)), gen(2)
    scale = 1.5 / torch.sqrt(4.0 * c.to(F64))[:, None]
    for _ in range(3):
        want = y @ problem.hessian - problem.x_star @ problem.hessian \
            + torch.randn(2, 3, 4, generator=fresh, dtype=F64) * scale
        assert close(fast(y), want, rtol=1e-13)
    want = problem.grad(y) + torch.randn(2, 3, 4, generator=fresh, dtype=F64) * scale
    assert close(fast(y, problem.grad(y)), want, rtol=1e-13)


def test_quadratic_group_mean_has_the_law_of_the_mean_of_client_gradients():
    """In law, the one draw is the mean of c stochastic_grad draws (the generic sampler):
    per group, the noise's mean is 0 and its variance per coordinate sigma^2/(dim c), both
    samplers within 5 standard errors on 4000 x 4 coordinates."""
    problem = Quadratic.random(4, 2.0, 0.1, 1.5, gen(0))
    counts = torch.tensor([1, 3, 8])
    y = torch.zeros(4000, 3, 4, dtype=F64)
    want = 1.5**2 / (4 * counts.to(F64))
    for sampler in (problem.mean_gradient_sampler, lambda *a: Problem.mean_gradient_sampler(problem, *a)):
        noise = sampler((4000, 3, 8, 4), counts, gen(3))(y) - problem.grad(y)
        n = noise.shape[0] * noise.shape[2]
        mean = noise.mean(dim=(0, 2))
        var = noise.square().mean(dim=(0, 2))
        assert (mean.abs() <= 5 * (want / n).sqrt()).all(), mean
        assert ((var / want - 1).abs() <= 5 * math.sqrt(2 / n)).all(), var / want


@pytest.mark.parametrize("lam", [0.0, 0.2])
def test_logistic_loss_and_grad_sq_is_loss_and_grad(lam):
    problem = LogisticRegression.random(40, 5, 3.0, gen(0), lam=lam, batch=2)
    u = 3 * torch.randn(4, 5, generator=gen(1), dtype=F64)
    loss, grad_sq = problem.loss_and_grad_sq(u)
    assert torch.equal(loss, problem.loss(u))
    assert torch.equal(grad_sq, problem.grad(u).square().sum(-1))


# ---------------------------------------------------------------- acceptance


@FAST
@given(data=st.data())
def test_acceptance_freezes_what_freeze_diverged_freezes(data):
    R, steps = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 5))
    special = st.sampled_from([math.nan, math.inf, -math.inf, 2 * DIVERGENCE_THRESHOLD,
                               -DIVERGENCE_THRESHOLD, 0.6 * DIVERGENCE_THRESHOLD, 1.0])
    state = torch.zeros(R, 3, dtype=F64)
    reference, diverged = state.clone(), torch.zeros(R, dtype=torch.bool)
    accept = Acceptance(R, "cpu")
    for k in range(steps):
        candidate = torch.randn(R, 3, generator=gen(k), dtype=F64)
        for _ in range(data.draw(st.integers(0, 2))):
            r, i = data.draw(st.integers(0, R - 1)), data.draw(st.integers(0, 2))
            candidate[r, i] = data.draw(special)
        reference, diverged = freeze_diverged(reference, candidate.clone(), diverged)
        state = accept(state, candidate.clone())
        assert torch.equal(state, reference)
        assert torch.equal(accept.diverged, diverged)


def test_norm_of_is_the_euclidean_norm_and_inf_past_float64():
    """Acceptance's norm (one dot product for a contiguous tensor) against
    torch.linalg.vector_norm, on a contiguous and a transposed tensor; a sum of squares past
    float64 is inf (the replica-by-replica test then decides), never a wrong finite value."""
    x = torch.randn(5, 7, 3, generator=gen(1), dtype=F64)
    for y in (x, x.transpose(0, 2)):
        assert norm_of(y).item() == pytest.approx(torch.linalg.vector_norm(y).item(), rel=1e-13)
    assert norm_of(torch.full((4,), 1e160, dtype=F64)).item() == math.inf


# ---------------------------------------------------------------- sparse recording


def test_record_every_and_loss_only_record_the_same_numbers():
    problem = LogisticRegression.random(64, 3, 2.0, gen(0), batch=4)
    kw = dict(H=torch.full((2, 2), 0.5, dtype=F64), hub_of=torch.tensor([0, 0, 1, 1]),
              w=torch.ones(4, dtype=F64), p=torch.full((4,), 0.8, dtype=F64), eta=0.1, K=24,
              q=2, tau=3, x1=torch.ones(3, dtype=F64), replicas=2)
    full = run_mllsgd(problem, generator=gen(1), **kw)
    sparse = run_mllsgd(problem, generator=gen(1), record_every=6, **kw)
    loss_only = run_mllsgd(problem, generator=gen(1), record_every=6, record_grad=False, **kw)
    assert torch.equal(sparse.loss, full.loss[:, ::6])
    assert torch.equal(sparse.grad_sq_norm, full.grad_sq_norm[:, ::6])
    assert torch.equal(loss_only.loss, sparse.loss) and loss_only.grad_sq_norm is None
    assert torch.equal(loss_only.steps_taken, full.steps_taken)
    assert (sparse.record_every, sparse.K, full.record_every) == (6, 24, 1)
    with pytest.raises(ValueError, match="record_every"):
        sparse.lhs  # noqa: B018
    with pytest.raises(ValueError, match="record_every=5"):
        run_mllsgd(problem, generator=gen(1), record_every=5, **kw)


def test_loss_only_runs_of_hfl_afl_and_tdcd_record_the_same_losses():
    """record_grad=False skips the full gradients and keeps the dynamics and the draws; TDCD's
    record_loss=False records the hub models, at which the loss is the one recorded."""
    from fedbound.sim.afl import run_afl
    from fedbound.sim.hfl import run_hfl
    from fedbound.sim.tdcd import run_tdcd

    pr = LogisticRegression(torch.randn(30, 3, generator=gen(0), dtype=F64),
                            torch.randint(0, 2, (30,), generator=gen(1)).to(F64) * 2 - 1, batch=4)
    t = np.array([[2, 3], [1, 2]])
    hfl = {g: run_hfl(pr, sizes=(2, 3), alpha=0.1, x1=torch.zeros(3, dtype=F64), replicas=2, t=t,
                      upload="fednova", generator=gen(2), record_grad=g) for g in (True, False)}
    quad = HeterogeneousQuadratic([1.0, 2.0], [[0.0, 1.0], [1.0, 0.0], [2.0, 2.0]], sigma_L=0.5)
    afl = {g: run_afl(quad, m=2, T=5, eta=0.5, eta_L=0.1, x0=torch.zeros(2), replicas=2, K=2,
                      generator=gen(3), record_grad=g) for g in (True, False)}
    layout = Layout((2, 2), (2, 2), 20, 4)
    X, y = synthetic_data(20, layout.D, loss="logistic", generator=gen(4))
    model = BlockLinear(X, y, layout, loss="logistic")
    tdcd = {g: run_tdcd(model, eta=0.1, Q=2, rounds=3, theta0=torch.zeros(model.dim, dtype=F64),
                        replicas=2, generator=gen(5), batch="step", record_grad=g)
            for g in (True, False)}
    for runs in (hfl, afl, tdcd):
        assert torch.equal(runs[False].loss, runs[True].loss)
        assert runs[False].grad_sq_norm is None and runs[True].grad_sq_norm is not None
    assert hfl[False].group_grad_sq_sum is None and torch.equal(hfl[False].t, hfl[True].t)
    assert torch.equal(hfl[False].x_final, hfl[True].x_final)
    assert torch.equal(pr.loss(hfl[False].x_final), hfl[False].loss[:, -1])
    assert torch.equal(afl[False].x_final, afl[True].x_final)
    assert tdcd[False].sigma2 is None and torch.equal(tdcd[False].drift, tdcd[True].drift)
    hubs = run_tdcd(model, eta=0.1, Q=2, rounds=3, theta0=torch.zeros(model.dim, dtype=F64),
                    replicas=2, generator=gen(5), batch="step", record_grad=False, record_loss=False)
    assert hubs.loss is None and torch.equal(hubs.drift, tdcd[True].drift)
    assert torch.equal(model.loss(hubs.hub.flatten(0, 1)).view(2, 4), tdcd[True].loss)
    assert torch.equal(hubs.time, tdcd[True].time)
    with pytest.raises(ValueError, match="record_loss=False"):
        run_tdcd(model, eta=0.1, Q=2, rounds=3, theta0=torch.zeros(model.dim, dtype=F64),
                 replicas=2, generator=gen(5), record_loss=False)


# ---------------------------------------------------------------- TDCD


def dense_client_grads(model, theta, rows, other):
    """g_kj of Das et al. 2022, (4), as the dense contraction with one-hot slot weights."""
    lay = model.layout
    K = max(lay.clients)
    owner = lay.owner()
    weights = torch.nn.functional.one_hot(owner, K).to(F64) / torch.tensor(
        lay.client_batch, dtype=F64)[:, None, None]
    xb = model.Xp[rows].transpose(1, 2)
    own = theta[:, torch.arange(lay.N)[:, None], owner]
    z = (xb * own).sum(-1) + other[..., 0]
    y = model.y[rows][:, None, :]
    slope = z - y if model.loss_kind == "squared" else -y * torch.sigmoid(-y * z)
    return torch.einsum("rnb,rnbd,nbk->rnkd", slope, xb, weights)


@pytest.mark.parametrize("clients, loss", [((3, 3), "logistic"), ((2, 3, 1), "squared"),
                                           ((2, 4), "logistic")])
def test_tdcd_client_gradients_are_the_dense_contraction(clients, loss):
    layout = Layout((2,) * len(clients), clients, 20, 2 * math.lcm(*clients))
    X, y = synthetic_data(20, layout.D, loss=loss, generator=gen(0))
    model = BlockLinear(X, y, layout, loss=loss)
    R, K = 3, max(clients)
    rows = draw_batch(layout, R, gen(1), "cpu")
    theta = torch.randn(R, layout.N, K, model.d, generator=gen(2), dtype=F64)
    other = torch.randn(R, layout.N, layout.batch, 1, generator=gen(3), dtype=F64)
    grads = model.client_gradients(rows)
    assert close(grads(theta, other), dense_client_grads(model, theta, rows, other))
    assert close(model.client_grads(theta, rows, other), dense_client_grads(model, theta, rows,
                                                                             other))


@pytest.mark.parametrize("clients, loss", [((3, 3), "logistic"), ((2, 3, 1), "squared")])
def test_tdcd_round_problem_is_the_literal_embedding_and_the_dense_contraction(clients, loss):
    """Phi_{-j} of the round: sum over the other silos l of x_pl^T theta_l, one sample at a
    time in numpy; the client gradients: the dense one-hot contraction of (4)."""
    layout = Layout((2, 1, 3)[:len(clients)], clients, 15, 2 * math.lcm(*clients))
    X, y = synthetic_data(15, layout.D, loss=loss, generator=gen(4))
    model = BlockLinear(X, y, layout, loss=loss)
    R, K = 2, max(clients)
    rows = draw_batch(layout, R, gen(5), "cpu")
    hub = torch.randn(R, layout.N, model.d, generator=gen(6), dtype=F64)
    other, grads = model.round_problem(hub, rows)
    Xp, h = model.Xp.numpy(), hub.numpy()
    own = np.array([[[Xp[p, j] @ h[r, j] for p in rows[r].tolist()] for j in range(layout.N)]
                    for r in range(R)])
    assert np.allclose(other[..., 0].numpy(), own.sum(1, keepdims=True) - own, rtol=1e-12,
                       atol=1e-12)
    theta = torch.randn(R, layout.N, K, model.d, generator=gen(7), dtype=F64)
    assert close(grads(theta, other), dense_client_grads(model, theta, rows, other))


# ---------------------------------------------------------------- bound evaluation

DOMAINS = ["positive", "nonnegative", "unit", "probability", "positive_integer"]
values = st.one_of(st.floats(-2, 3), st.sampled_from([math.nan, math.inf, -math.inf, 0.0, 1.0,
                                                      2.0, 0.5]))


@settings(max_examples=200, deadline=None)
@given(domain=st.sampled_from(DOMAINS), entries=st.lists(values, min_size=1, max_size=40))
def test_param_check_accepts_exactly_the_finite_in_domain_arrays(domain, entries):
    x = np.array(entries)
    inside = {"positive": x > 0, "nonnegative": x >= 0, "unit": (x >= 0) & (x < 1),
              "probability": (x > 0) & (x <= 1),
              "positive_integer": (x >= 1) & (x == np.floor(x))}[domain]
    param = Param("theta", "a test parameter", domain)
    if (np.isfinite(x) & inside).all():
        assert np.array_equal(param.check(x), x)
    else:
        with pytest.raises(ValueError, match=r"^theta"):
            param.check(x)


@settings(max_examples=100, deadline=None)
@given(rows=st.lists(st.lists(st.floats(0.01, 1), min_size=3, max_size=3), min_size=1,
                     max_size=70000 // 3 + 2), normalise=st.booleans())
def test_weights_check_accepts_rows_summing_to_one(rows, normalise):
    a = np.array(rows)
    if normalise:
        a = a / a.sum(axis=-1, keepdims=True)
    param = Param("a", "weights", "weights", vector=True)
    if (np.abs(a.sum(axis=-1) - 1) <= 1e-9).all():
        assert np.array_equal(param.check(a), a)
    else:
        with pytest.raises(ValueError, match="a sums to"):
            param.check(a)


def test_check_of_a_large_array_names_the_first_bad_entry():
    """Arrays of many blocks: the bad entry in a late block is found and named."""
    x = np.full(200_000, 0.5)
    x[150_001] = 1.5
    with pytest.raises(ValueError, match=r"zeta\[150001\]=1\.5"):
        Param("zeta", "spectral gap", "unit").check(x)
    x[150_001] = math.nan
    with pytest.raises(ValueError, match=r"zeta\[150001\]=nan is not a finite number"):
        Param("zeta", "spectral gap", "unit").check(x)
    a = np.full((40_000, 4), 0.25)
    assert Param("a", "weights", "weights", vector=True).check(a) is not None
    a[39_999, 0] = 0.3
    with pytest.raises(ValueError, match=r"a sums to 1\.05"):
        Param("a", "weights", "weights", vector=True).check(a)


@settings(max_examples=50, deadline=None)
@given(exponents=st.lists(st.integers(-5, 5), min_size=1, max_size=4), seed=st.integers(0, 99))
def test_printed_powers_agree_with_numpy_powers(exponents, seed):
    x, y = sp.symbols("x y", positive=True)
    expr = sum((x + i) ** e * y ** (e % 3) for i, e in enumerate(exponents))
    ours = sp.lambdify([x, y], expr, "numpy", cse=True,
                       printer=_Printer({"fully_qualified_modules": False, "inline": True,
                                         "allow_unknown_functions": True}))
    theirs = sp.lambdify([x, y], expr, "numpy")
    rng = np.random.default_rng(seed)
    a, b = rng.uniform(0.1, 3, 50), rng.uniform(0.1, 3, 50)
    assert np.allclose(ours(a, b), theirs(a, b), rtol=1e-13, atol=0)


def test_evaluate_returns_inf_and_refuses_nan():
    thm = bounds.get("mllsgd.theorem1")
    v = dict(L=1.0, sigma=1.0, Delta=1.0, eta=1e-3, K=64, q=2, tau=4, a=np.full(4, 0.25),
             p=np.ones(4))
    grid = thm.evaluate(zeta=np.array([0.0, 0.5]), **v)
    assert np.isfinite(grid).all() and (grid > 0).all()
    assert thm.evaluate(zeta=0.5, **{**v, "Delta": 1e308, "eta": 1e-300}) == math.inf
    assert np.array_equal(_bound_value(np.array([1.0, math.inf]), "x"), [1.0, math.inf])
    for bad in ([1.0, math.nan], [-math.inf, 2.0], [math.nan, -math.inf]):
        with pytest.raises(ValueError, match="undefined"):
            _bound_value(np.array(bad), "x")
