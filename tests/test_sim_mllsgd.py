"""MLL-SGD simulator: exact identities and schedule of (5)-(11) of Castiglia et al. 2021."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from fedbound.sim.mllsgd import hub_period_slots, hub_weights, mixing_matrices, operator_at, run_mllsgd
from fedbound.sim.problems import LogisticRegression, Quadratic

F64 = torch.float64
SETTINGS = settings(max_examples=30, deadline=None)
DIM = 3


def gen(seed):
    return torch.Generator().manual_seed(seed)


def rank_one_H(b):
    """H = b 1^T: complete hub graph, zeta = 0."""
    return b[:, None] * torch.ones(1, b.numel(), dtype=F64)


def diffusion_H(b, fraction):
    """H = I - alpha Lap diag(b)^-1 on a path: column stochastic, H diag(b) symmetric."""
    D = b.numel()
    adjacency = torch.diag(torch.ones(D - 1, dtype=F64), 1)
    adjacency = adjacency + adjacency.T
    degree = adjacency.sum(dim=1)
    laplacian = torch.diag(degree) - adjacency
    alpha = fraction * float((b / degree.clamp(min=1)).min())
    return torch.eye(D, dtype=F64) - alpha * laplacian / b[None, :]


@st.composite
def scenarios(draw, p_one=False):
    sizes = draw(st.lists(st.integers(1, 3), min_size=1, max_size=4))
    hub_of = torch.repeat_interleave(torch.arange(len(sizes)), torch.tensor(sizes))
    N = hub_of.numel()
    w = torch.tensor(draw(st.lists(st.floats(0.2, 5.0), min_size=N, max_size=N)), dtype=F64)
    p = torch.ones(N, dtype=F64) if p_one else torch.tensor(
        draw(st.lists(st.floats(0.3, 1.0), min_size=N, max_size=N)), dtype=F64)
    b = hub_weights(hub_of, w, len(sizes)).b
    H = rank_one_H(b) if draw(st.booleans()) else diffusion_H(b, draw(st.floats(0.1, 0.99)))
    q, tau = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    seed = draw(st.integers(0, 2**31))
    problem = (Quadratic.random(DIM, 2.0, 0.2, 1.0, gen(seed), rotate=True)
               if draw(st.booleans()) else LogisticRegression.random(20, DIM, 2.0, gen(seed)))
    return dict(
        problem=problem, H=H, hub_of=hub_of, w=w, p=p, eta=draw(st.floats(0.01, 0.3)),
        K=q * tau * draw(st.integers(1, 2)), q=q, tau=tau,
        x1=torch.randn(DIM, generator=gen(seed + 1), dtype=F64),
        replicas=draw(st.integers(1, 3)), seed=seed,
    )


def run(scenario, **overrides):
    args = {**scenario, **overrides}
    seed = args.pop("seed")
    return run_mllsgd(args.pop("problem"), generator=gen(seed), **args)


def hubs_internally_equal(X, hub_of):
    """[R, N, d] -> bool: every worker equals the first worker of its hub (to rounding)."""
    first = torch.stack([X[:, hub_of == d][:, :1] for d in range(int(hub_of.max()) + 1)], dim=1)
    return torch.allclose(X, first[:, hub_of, 0], rtol=0, atol=1e-12)


def all_equal(X, target):
    return torch.allclose(X, target[:, None, :].expand_as(X), rtol=0, atol=1e-12)


# ---------------------------------------------------------------- exact identities


@SETTINGS
@given(scenarios())
def test_averaged_model_follows_eq10_for_every_realisation(scenario):
    trace = run(scenario, record_iterates=True)
    eta = scenario["eta"]
    torch.testing.assert_close(trace.u[:, 1:], trace.u[:, :-1] - eta * trace.Ga, rtol=0, atol=1e-12)
    torch.testing.assert_close(trace.u[:, 0], scenario["x1"].expand(trace.replicas, -1))
    grad_at_u = scenario["problem"].grad(trace.u[:, :-1]).square().sum(dim=-1)
    torch.testing.assert_close(trace.grad_sq_norm, grad_at_u, rtol=1e-13, atol=0)
    torch.testing.assert_close(trace.loss, scenario["problem"].loss(trace.u[:, :-1]))
    assert torch.equal(trace.steps_taken, applied_steps(trace))


def applied_steps(trace):
    """Steps per worker read off the recorded G (noise makes a taken step nonzero a.s.)."""
    return (trace.G.abs().sum(dim=-1) > 0).sum(dim=1)


@SETTINGS
@given(scenarios())
def test_worker_models_follow_the_matrix_form_eq5_with_T_from_eq6(scenario):
    """X_{k+1} = (X_k - eta G_k) T_k with dense V and Z of (7)."""
    trace = run(scenario, record_iterates=True)
    V, Z = mixing_matrices(scenario["H"], scenario["hub_of"], scenario["w"])
    q, tau = scenario["q"], scenario["tau"]
    for k in range(1, trace.K + 1):
        T = Z if k % (q * tau) == 0 else V if k % tau == 0 else torch.eye(V.shape[0], dtype=F64)
        stepped = trace.X[:, k - 1] - scenario["eta"] * trace.G[:, k - 1]
        expected = T.T @ stepped
        torch.testing.assert_close(trace.X[:, k], expected, rtol=0, atol=1e-12)


@SETTINGS
@given(scenarios())
def test_v_steps_equalise_hubs_and_rank_one_z_steps_equalise_everyone_at_u(scenario):
    scenario["H"] = rank_one_H(hub_weights(scenario["hub_of"], scenario["w"],
                                           scenario["H"].shape[0]).b)
    trace = run(scenario, record_iterates=True)
    q, tau = scenario["q"], scenario["tau"]
    for k in range(tau, trace.K + 1, tau):
        assert hubs_internally_equal(trace.X[:, k], scenario["hub_of"])
        if k % (q * tau) == 0:
            assert all_equal(trace.X[:, k], trace.u[:, k])


@SETTINGS
@given(scenarios())
def test_mixing_matrices_keep_a_and_the_ones_vector(scenario):
    """Propositions 1 and 3 (Appendix C.2): Z a = a, 1^T Z = 1^T, V a = a, V^2 = V,
    ZV = VZ = Z (needs H b = b)."""
    hub_of, w, H = scenario["hub_of"], scenario["w"], scenario["H"]
    v, a, b = hub_weights(hub_of, w, H.shape[0])
    torch.testing.assert_close(a, v * b[hub_of])
    assert float(a.sum()) == pytest.approx(1.0) and float(b.sum()) == pytest.approx(1.0)
    V, Z = mixing_matrices(H, hub_of, w)
    ones = torch.ones_like(a)
    for T in (V, Z):
        torch.testing.assert_close(T @ a, a)
        torch.testing.assert_close(ones @ T, ones)
    torch.testing.assert_close(V @ V, V)
    torch.testing.assert_close(Z @ V, Z)
    torch.testing.assert_close(V @ Z, Z)


# ---------------------------------------------------------------- schedule and special cases


def test_operator_at_follows_eq6():
    assert [operator_at(k, 2, 3) for k in range(1, 13)] == list("IIVIIZIIVIIZ")
    assert [operator_at(k, 1, 2) for k in range(1, 5)] == list("IZIZ")
    assert [operator_at(k, 1, 1) for k in range(1, 4)] == list("ZZZ")


def observed_operator(X_next, u_next, hub_of):
    if all_equal(X_next, u_next):
        return "Z"
    return "V" if hubs_internally_equal(X_next, hub_of) else "I"


def test_schedule_is_visible_in_the_consensus_pattern():
    """With p = 1, noise and H = b 1^T, the steps of (6) are recognisable from X_{k+1}."""
    hub_of = torch.tensor([0, 0, 1, 1, 2, 2])
    w = torch.tensor([1.0, 2.0, 1.0, 1.0, 3.0, 1.0], dtype=F64)
    problem = Quadratic.random(DIM, 2.0, 0.5, 1.0, gen(0))
    trace = run_mllsgd(problem, H=rank_one_H(hub_weights(hub_of, w, 3).b), hub_of=hub_of, w=w,
                       p=torch.ones(6), eta=0.1, K=12, q=3, tau=2, x1=torch.ones(DIM),
                       replicas=2, generator=gen(1), record_iterates=True)
    seen = [observed_operator(trace.X[:, k], trace.u[:, k], hub_of) for k in range(1, 13)]
    assert "".join(seen) == "IVIVIZIVIVIZ"


def consensus_run(D, per_hub, q, tau, K, seed=0):
    hub_of = torch.arange(D).repeat_interleave(per_hub)
    w = torch.ones(hub_of.numel(), dtype=F64)
    problem = Quadratic.random(DIM, 2.0, 0.5, 1.0, gen(seed))
    trace = run_mllsgd(problem, H=rank_one_H(hub_weights(hub_of, w, D).b), hub_of=hub_of, w=w,
                       p=torch.ones_like(w), eta=0.1, K=K, q=q, tau=tau, x1=torch.zeros(DIM),
                       replicas=2, generator=gen(seed + 1), record_iterates=True)
    return "".join(observed_operator(trace.X[:, k], trace.u[:, k], hub_of)
                   for k in range(1, K + 1))


@pytest.mark.parametrize(
    "name, D, per_hub, q, tau, expected",
    [
        ("distributed SGD", 1, 4, 1, 1, "ZZZZ"),
        ("local SGD, one hub", 1, 4, 1, 2, "IZIZ"),
        ("local SGD, complete hub graph", 3, 2, 1, 2, "IZIZ"),
        ("HL-SGD", 3, 2, 2, 2, "IVIZIVIZ"),
    ],
)
def test_special_cases_run_through_run_mllsgd(name, D, per_hub, q, tau, expected):
    assert consensus_run(D, per_hub, q, tau, len(expected)) == expected, name


@pytest.mark.parametrize("problem", [
    Quadratic.random(DIM, 3.0, 0.1, 2.0, gen(5), rotate=True),
    LogisticRegression.random(30, DIM, 2.0, gen(5), batch=2),
])
def test_distributed_sgd_is_minibatch_sgd_with_the_averaged_gradient(problem):
    """D = 1, q = tau = 1, p = 1, a = 1/N (Distributed SGD, Section 6):
    u_{k+1} = u_k - eta mean_i g(u_k; xi_i)."""
    N, R, K, eta = 5, 3, 6, 0.2
    x1 = torch.randn(DIM, generator=gen(6), dtype=F64)
    trace = run_mllsgd(problem, H=[[1.0]], hub_of=torch.zeros(N, dtype=torch.long),
                       w=torch.ones(N), p=torch.ones(N), eta=eta, K=K, q=1, tau=1, x1=x1,
                       replicas=R, generator=gen(7), record_iterates=True)
    generator, x, us = gen(7), x1.expand(R, DIM), [x1.expand(R, DIM)]
    for _ in range(K):
        torch.rand((R, N), generator=generator, dtype=F64)  # the p = 1 coins MLL-SGD draws
        x = x - eta * problem.stochastic_grad(x[:, None].expand(R, N, DIM), generator).mean(1)
        us.append(x)
    torch.testing.assert_close(trace.u, torch.stack(us, dim=1), rtol=0, atol=1e-13)
    assert all(all_equal(trace.X[:, k], trace.u[:, k]) for k in range(K + 1))


def test_steps_taken_per_iteration_estimates_p():
    p = torch.tensor([0.3, 0.5, 0.8, 1.0], dtype=F64)
    K, R = 200, 50
    trace = run_mllsgd(Quadratic([1.0] * DIM, sigma=1.0), H=[[1.0]],
                       hub_of=torch.zeros(4, dtype=torch.long), w=torch.ones(4), p=p, eta=0.01,
                       K=K, q=2, tau=4, x1=torch.zeros(DIM), replicas=R, generator=gen(8))
    rate = trace.steps_taken.to(F64).mean(dim=0) / K
    se = torch.sqrt(p * (1 - p) / (K * R))
    assert ((rate - p).abs() <= 5 * se).all()
    assert (trace.steps_taken[:, 3] == K).all()
    assert torch.equal(trace.slots, torch.arange(1, K + 1, dtype=F64).expand(R, K))


@pytest.mark.parametrize("sigma", [0.0, 1.0])
def test_with_p_one_the_quadratic_u_path_ignores_q_tau_and_H(sigma):
    """By (10): u_{k+1} = (I - eta A) u_k - eta sum_i a_i eps_i whatever T_k is.

    With p = 1 the draws (coins, then noise) are the same for every configuration, so with
    the same seed the u-trajectories coincide path by path, not only in law.
    """
    hub_of = torch.tensor([0, 0, 1, 2, 2, 2])
    w = torch.tensor([1.0, 3.0, 2.0, 0.5, 1.0, 1.5], dtype=F64)
    b = hub_weights(hub_of, w, 3).b
    problem = Quadratic.random(DIM, 2.0, 0.3, sigma, gen(9), rotate=True)
    paths = [
        run_mllsgd(problem, H=H, hub_of=hub_of, w=w, p=torch.ones(6), eta=0.2, K=16, q=q,
                   tau=tau, x1=torch.ones(DIM), replicas=2, generator=gen(10),
                   record_iterates=True).u
        for H, q, tau in [(rank_one_H(b), 1, 1), (diffusion_H(b, 0.5), 2, 2),
                          (rank_one_H(b), 1, 4), (diffusion_H(b, 0.9), 4, 2)]
    ]
    for path in paths[1:]:
        torch.testing.assert_close(path, paths[0], rtol=0, atol=1e-12)


def test_with_p_below_one_the_u_path_depends_on_tau():
    """Negative control of the previous test: coins make u depend on the averaging."""
    hub_of, w = torch.tensor([0, 0, 1, 1]), torch.ones(4, dtype=F64)
    problem = Quadratic.random(DIM, 2.0, 0.3, 1.0, gen(11))
    paths = [
        run_mllsgd(problem, H=rank_one_H(hub_weights(hub_of, w, 2).b), hub_of=hub_of, w=w,
                   p=torch.full((4,), 0.6), eta=0.2, K=8, q=1, tau=tau, x1=torch.ones(DIM),
                   replicas=2, generator=gen(12), record_iterates=True).u
        for tau in (1, 4)
    ]
    assert (paths[0] - paths[1]).abs().max() > 1e-3


# ---------------------------------------------------------------- randomness


def test_same_seed_gives_identical_traces_and_different_seeds_differ():
    hub_of = torch.tensor([0, 0, 1, 1, 1])
    kwargs = dict(H=diffusion_H(torch.tensor([0.4, 0.6], dtype=F64), 0.5), hub_of=hub_of,
                  w=torch.tensor([1.0, 1.0, 1.0, 2.0, 1.0]), p=torch.full((5,), 0.7), eta=0.1,
                  K=12, q=2, tau=3, x1=torch.ones(DIM), replicas=3, record_iterates=True)
    for problem in [Quadratic.random(DIM, 2.0, 0.3, 1.0, gen(13)),
                    LogisticRegression.random(20, DIM, 1.0, gen(13))]:
        for wait in (False, True):
            first, again, other = (run_mllsgd(problem, generator=gen(s), wait_for_all=wait,
                                              **kwargs) for s in (14, 14, 15))
            for name, value in vars(first).items():
                assert torch.equal(value, getattr(again, name)), name
            assert not torch.equal(first.grad_sq_norm, other.grad_sq_norm)


# ---------------------------------------------------------------- time slots


def wait_run(p, q, tau, K, replicas, hub_of, seed=16):
    w = torch.ones(hub_of.numel(), dtype=F64)
    return run_mllsgd(Quadratic([1.0] * DIM, sigma=1.0),
                      H=rank_one_H(hub_weights(hub_of, w, int(hub_of.max()) + 1).b),
                      hub_of=hub_of, w=w, p=p, eta=0.05, K=K, q=q, tau=tau,
                      x1=torch.ones(DIM), replicas=replicas, generator=gen(seed),
                      wait_for_all=True)


@SETTINGS
@given(p=st.floats(0.05, 1.0), q=st.integers(1, 3), tau=st.integers(1, 4),
       periods=st.integers(1, 3), seed=st.integers(0, 1000))
def test_waiting_slots_are_nondecreasing_and_at_least_k(p, q, tau, periods, seed):
    hub_of = torch.tensor([0, 0, 1, 2])
    K = q * tau * periods
    trace = wait_run(torch.tensor([p, 1.0, p, 0.5 * p + 0.5]), q, tau, K, 4, hub_of, seed)
    k = torch.arange(1, K + 1, dtype=F64)
    assert (trace.slots[:, 1:] >= trace.slots[:, :-1]).all()
    assert (trace.slots >= k).all()
    assert (trace.steps_taken == K).all()


def test_waiting_slots_equal_k_when_p_is_one():
    trace = wait_run(torch.ones(4), 2, 3, 12, 3, torch.tensor([0, 0, 1, 1]))
    assert torch.equal(trace.slots, torch.arange(1, 13, dtype=F64).expand(3, 12))


@pytest.mark.parametrize("q", [1, 2])
def test_waiting_period_of_one_worker_is_negative_binomial(q):
    """One worker, q rounds of tau successes at rate p: mean q tau / p, variance q tau (1-p)/p^2."""
    tau, p, R = 4, 0.4, 4000
    slots = hub_period_slots(torch.tensor([p], dtype=F64), torch.tensor([0]), 1, q, tau, R, gen(17))
    mean, var = q * tau / p, q * tau * (1 - p) / p**2
    assert abs(float(slots.mean()) - mean) <= 5 * math.sqrt(var / R)
    assert float(slots.var()) == pytest.approx(var, rel=0.15)
    assert (slots == torch.round(slots)).all() and (slots >= q * tau).all()


def test_waiting_period_is_the_slowest_hub_sum_of_round_maxima():
    """Two hubs of one worker each, q = 2: max over hubs of the two rounds' sums (Section 6)."""
    p = torch.tensor([0.5, 0.5], dtype=F64)
    slots = hub_period_slots(p, torch.tensor([0, 1]), 2, 2, 3, 3000, gen(18))
    single = hub_period_slots(p[:1], torch.tensor([0]), 1, 2, 3, 3000, gen(19))
    assert float(slots.mean()) > float(single.mean()) + 0.5  # max of two i.i.d. sums


# ---------------------------------------------------------------- bad inputs and divergence


def valid_kwargs():
    return dict(problem=Quadratic([1.0] * DIM), H=torch.eye(2, dtype=F64),
                hub_of=torch.tensor([0, 1, 1]), w=torch.ones(3), p=torch.ones(3), eta=0.1,
                K=4, q=2, tau=2, x1=torch.zeros(DIM), replicas=1, generator=gen(0))


@pytest.mark.parametrize(
    "change, name",
    [
        (dict(K=6), "K"), (dict(K=0), "K"), (dict(q=0), "q"), (dict(tau=0), "tau"),
        (dict(tau=1.5), "tau"), (dict(replicas=0), "replicas"), (dict(eta=0.0), "eta"),
        (dict(eta=float("nan")), "eta"), (dict(p=torch.tensor([1.0, 0.0, 1.0])), "p"),
        (dict(p=torch.tensor([1.0, 1.2, 1.0])), "p"), (dict(p=torch.ones(2)), "p"),
        (dict(w=torch.tensor([1.0, -1.0, 1.0])), "w"), (dict(w=torch.ones(4)), "w"),
        (dict(hub_of=torch.tensor([0, 2, 1])), "hub_of"),
        (dict(hub_of=torch.tensor([1, 1, 1])), "hub_of"),
        (dict(hub_of=torch.tensor([0.0, 1.0, 1.0])), "hub_of"),
        (dict(H=torch.ones(2, 3)), "H"), (dict(x1=torch.zeros(DIM + 1)), "x1"),
    ],
)
def test_bad_inputs_raise_value_error_naming_the_parameter(change, name):
    kwargs = {**valid_kwargs(), **change}
    with pytest.raises(ValueError, match=rf"\b{name}\b"):
        run_mllsgd(kwargs.pop("problem"), **kwargs)


def test_divergence_freezes_replicas_and_records_finite_numbers():
    kwargs = {**valid_kwargs(), "eta": 1e10, "K": 40, "replicas": 3, "record_iterates": True,
              "problem": Quadratic([1.0, 2.0, 4.0], sigma=1.0), "x1": torch.ones(DIM),
              "p": torch.full((3,), 0.9)}
    trace = run_mllsgd(kwargs.pop("problem"), **kwargs)
    assert trace.diverged.all()
    for value in (trace.grad_sq_norm, trace.loss, trace.u, trace.Ga, trace.X, trace.G):
        assert torch.isfinite(value).all()
    assert (trace.grad_sq_norm[:, -1] > 1e100).all()
    assert (trace.steps_taken < 40).all()
    assert torch.equal(trace.steps_taken, applied_steps(trace))
    torch.testing.assert_close(trace.u[:, 1:], trace.u[:, :-1] - 1e10 * trace.Ga, rtol=1e-12,
                               atol=0)


def test_explicit_cpu_device_gives_the_same_trace():
    kwargs = valid_kwargs()
    problem = kwargs.pop("problem")
    default = run_mllsgd(problem, **kwargs)
    kwargs["generator"] = gen(0)
    explicit = run_mllsgd(problem, device="cpu", **kwargs)
    assert torch.equal(default.grad_sq_norm, explicit.grad_sq_norm)


# ---------------------------------------------------------------- performance paths, same numbers


@SETTINGS
@given(seed=st.integers(0, 2**31 - 1), lam=st.sampled_from([0.0, 0.3]), rows=st.integers(1, 4))
def test_logistic_recorder_gives_loss_and_grad_sq_exactly(seed, lam, rows):
    """The recorder's reused buffers give the numbers of loss_and_grad_sq and of loss, bit for
    bit, call after call (a buffer left dirty by the previous call would show)."""
    problem = LogisticRegression.random(57, DIM, 2.0, gen(seed), lam=lam, batch=4)
    with_grad, loss_only = problem.recorder((rows, DIM)), problem.recorder((rows, DIM), grad=False)
    for x in torch.randn(3, rows, DIM, generator=gen(seed + 1), dtype=F64):
        loss, grad_sq = with_grad(x)
        expected_loss, expected_grad_sq = problem.loss_and_grad_sq(x)
        assert torch.equal(loss, expected_loss) and torch.equal(grad_sq, expected_grad_sq)
        only, none = loss_only(x)
        assert none is None and torch.equal(only, problem.loss(x))
        # independent transcription of F and ||grad F||^2, eq. (1)
        margins = problem.labels * (x @ problem.features.T)
        f = torch.log1p(torch.exp(-margins)).mean(-1) + 0.5 * lam * (x * x).sum(-1)
        g = -(problem.labels * torch.sigmoid(-margins)) @ problem.features / problem.n + lam * x
        torch.testing.assert_close(loss, f, rtol=1e-12, atol=0)
        torch.testing.assert_close(grad_sq, g.square().sum(-1), rtol=1e-10, atol=0)


def test_huge_page_buffers_change_no_number(monkeypatch):
    """Every buffer on huge pages (threshold lowered to one byte) or none (threshold above
    every size): the same MLL-SGD trace bit for bit, and the buffers really are mappings."""
    import fedbound.sim.problems as problems

    def run(threshold):
        monkeypatch.setattr(problems, "HUGE_PAGE_MIN_BYTES", threshold)
        problem = LogisticRegression.random(96, 5, 3.0, gen(2), lam=0.1, batch=8)
        b = torch.tensor([0.5, 0.5], dtype=F64)
        trace = run_mllsgd(problem, H=rank_one_H(b), hub_of=torch.tensor([0, 0, 1, 1, 1]),
                           w=torch.ones(5, dtype=F64), p=torch.full((5,), 0.8, dtype=F64),
                           eta=0.2, K=16, q=2, tau=2, x1=torch.zeros(5, dtype=F64), replicas=3,
                           generator=gen(9))
        return problem, trace

    mapped, on_huge_pages = run(1)
    plain, ordinary = run(2**62)
    if hasattr(problems.mmap, "MADV_HUGEPAGE"):
        assert mapped.features.untyped_storage().data_ptr() % 4096 == 0  # a mapping of its own
    for name in ("grad_sq_norm", "loss", "steps_taken", "slots", "diverged"):
        assert torch.equal(getattr(on_huge_pages, name), getattr(ordinary, name)), name


def test_empty_large_shape_dtype_and_small_sizes():
    from fedbound.sim.problems import empty_large

    big = empty_large((3, 1 << 20), torch.float64, "cpu")
    assert big.shape == (3, 1 << 20) and big.dtype == torch.float64 and big.is_contiguous()
    big.fill_(2.5)
    assert float(big.sum()) == 2.5 * 3 * (1 << 20)
    small = empty_large((4, 2), torch.int64, "cpu")
    assert small.shape == (4, 2) and small.dtype == torch.int64


def test_coins_folded_into_per_replica_steps_change_no_bit():
    """With a step per replica, a run that records nothing per worker puts the coins in the
    step, -eta theta_k, instead of masking G_k (the path ``record_iterates`` keeps): the same
    numbers, bit for bit, coins that miss included."""
    hub_of = torch.tensor([0, 0, 1, 1, 1])
    kwargs = dict(H=diffusion_H(torch.tensor([0.4, 0.6], dtype=F64), 0.5), hub_of=hub_of,
                  w=torch.tensor([1.0, 1.0, 1.0, 2.0, 1.0]), p=torch.tensor([0.3, 1, 0.5, 0.7, 1]),
                  eta=torch.tensor([0.05, 0.1, 0.2, 0.4], dtype=F64), K=12, q=2, tau=3,
                  x1=torch.ones(DIM), replicas=4)
    for problem in [Quadratic.random(DIM, 2.0, 0.3, 1.0, gen(13)),
                    LogisticRegression.random(20, DIM, 1.0, gen(13))]:
        folded, masked = (run_mllsgd(problem, generator=gen(17), record_iterates=r, **kwargs)
                          for r in (False, True))
        assert (folded.steps_taken < masked.slots.shape[1]).any()  # some coins missed
        for name in ("grad_sq_norm", "loss", "steps_taken", "diverged"):
            assert torch.equal(getattr(folded, name), getattr(masked, name)), name


@pytest.mark.parametrize("model,batch", [("logistic", 1), ("mlp", 1), ("mlp", 2)])
def test_closed_form_step_into_the_state_is_the_step_with_a_gradient_buffer(model, batch):
    """sim.neural's closed form writes X_k - eta theta_k g_k directly (the sampler's ``step``,
    taken with a step per replica when nothing records G_k): against the path through a
    gradient buffer (``record_iterates``), the same coins and draws, the same numbers: bit
    for bit where a layer sees several samples (the same products), to round-off on a
    one-sample layer ((delta scale) below against (delta below) scale)."""
    from fedbound.sim.federated import federated_problem

    fed, x1 = federated_problem("digits", model, ("dirichlet", 0.5), (4,), batch=batch,
                                hidden=(5,))
    kw = dict(H=torch.full((2, 2), 0.5, dtype=F64), hub_of=torch.arange(4) // 2,
              w=torch.ones(4), p=torch.tensor([0.3, 1.0, 0.6, 0.9], dtype=F64),
              eta=torch.tensor([[0.5], [2.0]], dtype=F64).expand(2, 3), K=[12, 12], q=2,
              tau=[3, 2], x1=x1, replicas=3)  # tau > 1: the workers' form (tau = 1: the hubs')
    fused, buffered = (run_mllsgd(fed, generator=gen(5), record_iterates=r, **kw) for r in (False, True))
    for one, other in zip(fused, buffered, strict=True):
        assert torch.equal(one.steps_taken, other.steps_taken)
        assert (one.steps_taken < 12).any()  # some coins missed
        if batch > 1:
            assert torch.equal(one.loss, other.loss) and torch.equal(one.grad_sq_norm, other.grad_sq_norm)
        else:
            torch.testing.assert_close(one.loss, other.loss, rtol=1e-12, atol=0)
            torch.testing.assert_close(one.grad_sq_norm, other.grad_sq_norm, rtol=1e-12, atol=0)
            assert not torch.equal(one.loss, other.loss)  # round-off: two paths, not one


def _digits_hubs(model: str):
    """A federated digits problem of 6 clients in 3 hubs of 2, and run_mllsgd's arguments."""
    from fedbound.sim.federated import federated_problem

    fed, x1 = federated_problem("digits", model, ("dirichlet", 0.5), (6,), batch=2, hidden=(5,))
    kw = dict(H=diffusion_H(torch.tensor([0.2, 0.3, 0.5], dtype=F64), 0.5),
              hub_of=torch.arange(6) // 2, w=torch.tensor([1.0, 2.0, 1.0, 1.0, 3.0, 1.0]),
              p=torch.tensor([0.3, 1.0, 0.6, 0.9, 0.5, 1.0], dtype=F64), q=2, x1=x1)
    return fed, kw


@pytest.mark.parametrize("model", ["mlp", "cnn"])
def test_tau_one_runs_on_the_hub_models_with_the_numbers_of_the_workers(model, monkeypatch):
    """tau = 1 averages every iteration, so the workers of a hub always start from its model:
    run_mllsgd steps the hub models by the v_i theta_i-weighted gradients of their workers'
    samples (``NeuralClients.hub_step_sampler``), the same coins and draws as the workers'
    form (``record_iterates``, which keeps it). The same numbers to round-off, the same steps
    taken, the generator left in the same state; and in a batch that mixes taus, each
    configuration's trace is that of its run alone, bit for bit."""
    fed, kw = _digits_hubs(model)
    eta = torch.tensor([[0.3], [1.0], [0.6]], dtype=F64).expand(3, 16)
    steps = []
    made = type(fed).hub_step_sampler

    def counted(self, *args):
        step = made(self, *args)
        return lambda *a: (steps.append(1), step(*a))[1]

    monkeypatch.setattr(type(fed), "hub_step_sampler", counted)
    if model == "cnn":  # the loss alone, every 4th iteration: the CNN's gradient over the data is slow
        kw.update(record_every=4, record_grad=False)
    g_hub, g_workers = gen(3), gen(3)
    hubs = run_mllsgd(fed, eta=eta, K=[8, 8, 8], tau=[1, 2, 1], replicas=16, generator=g_hub, **kw)
    assert len(steps) == 8  # the two configurations of tau = 1: one batch, a step per iteration
    workers = run_mllsgd(fed, eta=eta, K=[8, 8, 8], tau=[1, 2, 1], replicas=16,
                         generator=g_workers, record_iterates=True, **kw)
    assert torch.equal(g_hub.get_state(), g_workers.get_state())
    for c, (one, other) in enumerate(zip(hubs, workers, strict=True)):
        assert torch.equal(one.steps_taken, other.steps_taken)
        assert (one.steps_taken < 8).any()  # some coins missed
        torch.testing.assert_close(one.loss, other.loss, rtol=1e-12, atol=0)
        if model == "mlp":
            torch.testing.assert_close(one.grad_sq_norm, other.grad_sq_norm, rtol=1e-12, atol=0)
        alone = run_mllsgd(fed, eta=eta[c], K=8, tau=[1, 2, 1][c], replicas=16, generator=gen(3), **kw)
        for name in ("loss", "steps_taken", "diverged"):
            assert torch.equal(getattr(one, name), getattr(alone, name)), (c, name)
        assert one.grad_sq_norm is None or torch.equal(one.grad_sq_norm, alone.grad_sq_norm)
    assert len(steps) == 8 + 2 * 8  # the runs alone of tau = 1 on the hubs too


def test_hub_form_needs_the_workers_of_each_hub_together(monkeypatch):
    """Hubs whose workers are not consecutive run in the workers' form (the sampler pools
    consecutive clients): no hub step is made, and with 2 samples a step the numbers of the
    path through a gradient buffer, bit for bit."""
    fed, kw = _digits_hubs("mlp")

    def made(*args):
        raise LookupError("a hub step sampler was made")

    monkeypatch.setattr(type(fed), "hub_step_sampler", made)
    kw["hub_of"] = torch.tensor([0, 1, 2, 0, 1, 2])
    with pytest.raises(LookupError):  # consecutive: made
        run_mllsgd(fed, eta=0.5, K=8, tau=1, replicas=16, generator=gen(4),
                   **{**kw, "hub_of": torch.arange(6) // 2})
    eta = torch.full((16,), 0.5, dtype=F64)
    fused, buffered = (run_mllsgd(fed, eta=eta, K=8, tau=1, replicas=16, generator=gen(4),
                                  record_iterates=r, **kw) for r in (False, True))
    assert torch.equal(fused.loss, buffered.loss)


def test_hub_form_without_a_closed_form_steps_by_vmapped_gradients():
    """A network outside ``DenseNetwork``'s closed form (ReLU) takes the hub steps through
    the vmapped gradients: the numbers of the workers' form to round-off."""
    from fedbound.sim.data import dirichlet_partition, load_digits
    from fedbound.sim.neural import NeuralClients

    data = load_digits()
    net = torch.nn.Sequential(torch.nn.Linear(64, 6), torch.nn.ReLU(), torch.nn.Linear(6, 10))
    fed = NeuralClients(net, data.features, data.labels,
                        dirichlet_partition(data.labels, 6, 0.5, gen(2)), batch=2)
    assert fed.dense is None
    _, kw = _digits_hubs("mlp")
    kw["x1"] = fed.initial()
    eta = torch.full((16,), 0.4, dtype=F64)
    hubs, workers = (run_mllsgd(fed, eta=eta, K=4, tau=1, replicas=16, generator=gen(6),
                                record_iterates=r, **kw) for r in (False, True))
    assert torch.equal(hubs.steps_taken, workers.steps_taken)
    torch.testing.assert_close(hubs.loss, workers.loss, rtol=1e-12, atol=0)
