"""Batches of configurations in one run, with common random numbers (``sim.hfl.run_hfl``,
``sim.mllsgd.run_mllsgd``, ``sim.tdcd.run_tdcd`` with knobs given per configuration):
configuration c of a batch against its run alone, bit for bit where
``sim.problems.CommonDraws`` says so (R >= 3 replicas on the quadratic and least squares;
R = 16 on logistic regression and networks) and to round-off otherwise; against the literal
loops of the simulators' own tests; the draws every configuration shares."""

import math

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_sim_hfl import per_client, plain_loop, quadratic
from test_sim_mllsgd import diffusion_H, rank_one_H
from test_sim_tdcd import literal_tdcd, setups

from fedbound.sim.federated import federated_problem
from fedbound.sim.hfl import HFLDelays, draw_schedule, run_hfl
from fedbound.sim.mllsgd import hub_weights, mixing_matrices, operator_at, run_mllsgd
from fedbound.sim.problems import CommonDraws, Quadratic, randn, randn_
from fedbound.sim.tdcd import BlockLinear, Layout, ModuleModel, run_tdcd, synthetic_data

torch.set_num_threads(1)
F64 = torch.float64
FAST = settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def gen(seed):
    return torch.Generator().manual_seed(seed)


def differences(alone, batched) -> dict[str, float]:
    """Every tensor of two traces whose bits differ: {field: largest relative difference}
    (inf for a shape, a dtype, an integer or a None that differs, and where one is NaN)."""
    out = {}
    for name, a in vars(alone).items():
        b = getattr(batched, name)
        if a is None or b is None:
            if (a is None) != (b is None):
                out[name] = math.inf
            continue
        if not isinstance(a, torch.Tensor):
            continue
        if a.shape != b.shape or a.dtype != b.dtype:
            out[name] = math.inf
        elif a.is_floating_point():
            if not torch.equal(a.view(torch.int64), b.view(torch.int64)):  # the bits, NaN too
                gap = ((a - b).abs() / a.abs().clamp(min=1e-300)).nan_to_num(math.inf)
                out[name] = float(gap.max())
        elif not torch.equal(a, b):
            out[name] = math.inf
    return out


def padded(counts: list[np.ndarray]) -> torch.Tensor:
    """Schedules [R, U_c, G] of unequal U_c as one [C, R, max U_c, G] (zero rows at the end)."""
    U = max(t.shape[1] for t in counts)
    return torch.stack([torch.nn.functional.pad(torch.as_tensor(t), (0, 0, 0, U - t.shape[1]))
                        for t in counts])


# ---------------------------------------------------------------- the draws


def test_common_draws_repeat_the_draw_of_one_configuration():
    draws = CommonDraws(gen(3), 4)
    out = torch.empty(4, 5, 7, dtype=F64)
    randn_(out, draws)
    one = randn((5, 7), gen(3), "cpu")
    assert all(torch.equal(out[c], one) for c in range(4))
    assert torch.equal(randn((4, 5, 7), CommonDraws(gen(3), 4), "cpu")[2], one)
    with pytest.raises(ValueError, match="configuration axis"):
        randn((3, 5), draws, "cpu")


# ---------------------------------------------------------------- HFL


@FAST
@given(sizes=st.lists(st.integers(1, 4), min_size=1, max_size=3), C=st.integers(1, 4),
       R=st.integers(3, 5), seed=st.integers(0, 10**6), clients=st.booleans(),
       upload=st.sampled_from(["printed", "fednova", "sum"]), record_grad=st.booleans())
def test_hfl_configuration_in_a_batch_is_its_run_alone_bit_for_bit(sizes, C, R, seed, clients,
                                                                    upload, record_grad):
    """Each configuration its own schedules (as unequal S give: unequal U, counts per replica
    and round) and steps (one diverging): trace c of the batch is the run of c alone."""
    rng = np.random.default_rng(seed)
    counts = [rng.integers(1, 5, size=(R, int(rng.integers(1, 5)), len(sizes))) for _ in range(C)]
    for t in counts:  # replicas end at different rounds
        for r in range(R):
            t[r, int(rng.integers(1, t.shape[1] + 1)):] = 0
    t = padded(counts)
    alpha = torch.as_tensor(rng.uniform(0.01, 0.5, size=(C, R)))
    alpha[-1, 0] = 1e120  # a replica of the last configuration diverges in its first round
    pr = per_client(seed % 50) if clients else quadratic(seed % 50)
    x1 = pr.x_star + 1.0
    kw = dict(sizes=sizes, x1=x1, replicas=R, upload=upload, record_grad=record_grad)
    batch = run_hfl(pr, alpha=alpha, t=t, generator=gen(seed), **kw)
    assert len(batch) == C and batch[-1].diverged[0]
    for c in range(C):
        alone = run_hfl(pr, alpha=alpha[c], t=t[c], generator=gen(seed), **kw)
        assert differences(alone, batch[c]) == {}


def test_hfl_batch_follows_the_plain_loop_of_algorithm_1():
    """One delay path per configuration (S = 0, 2, 5 on the same delay law), the literal loop
    over replicas, rounds, groups, local iterations and clients on the same draws."""
    pr, sizes, R = per_client(3), [2, 3], 3
    delays = HFLDelays((1.0, 1.5), (0.5, 0.2), 2.0, 1.0)
    paths = [draw_schedule(delays, S, 12.0, 1, gen(5)).t[0] for S in (0.0, 2.0, 5.0)]
    t = padded([p.expand(R, *p.shape).numpy() for p in paths])
    alphas = (0.1, 0.05, 0.2)
    batch = run_hfl(pr, sizes=sizes, alpha=torch.tensor(alphas, dtype=F64)[:, None], x1=pr.x_star + 1,
                    replicas=R, t=t, generator=gen(7))
    for c, (path, alpha) in enumerate(zip(paths, alphas, strict=True)):
        ref = plain_loop(pr, sizes, alpha, pr.x_star + 1, path, R, 7)
        assert torch.allclose(batch[c].final_loss, pr.loss(ref), rtol=1e-12, atol=1e-14)


def test_hfl_duplicated_configurations_are_identical_and_a_shared_schedule_expands():
    """Common random numbers: two configurations with the same knobs see the same draws.
    One schedule [R, U, G] serves every configuration of a [C, R] step."""
    pr = quadratic(1)
    delays = HFLDelays((1.0, 1.0), (0.5, 0.5), 1.0, 0.5)
    sched = draw_schedule(delays, 3.0, 20.0, 4, gen(0))
    alpha = torch.tensor([[0.1], [0.3], [0.1]], dtype=F64)
    batch = run_hfl(pr, sizes=[2, 2], alpha=alpha, x1=pr.x_star + 1, replicas=4,
                    schedule=sched, generator=gen(2))
    assert differences(batch[0], batch[2]) == {}
    assert not torch.equal(batch[0].loss, batch[1].loss)
    drawn = run_hfl(pr, sizes=[2, 2], alpha=alpha, x1=pr.x_star + 1, replicas=4, delays=delays,
                    S=3.0, T=20.0, generator=gen(0))  # drawn once, then the SGD draws
    alone = run_hfl(pr, sizes=[2, 2], alpha=alpha[1].expand(4), x1=pr.x_star + 1, replicas=4,
                    delays=delays, S=3.0, T=20.0, generator=gen(0))
    assert differences(alone, drawn[1]) == {}


@pytest.mark.parametrize("R", [4, 16])
def test_hfl_batch_on_logistic_clients(R):
    """Digits, logistic regression on Dirichlet(0.5) shards: bit for bit at R = 16; at R = 4
    the vectorised and scalar sigmoid and log1p differ in the last bit (round-off)."""
    fed, x1 = federated_problem("digits", "logistic", ("dirichlet", 0.5), (2, 3), batch=2)
    delays = HFLDelays((1.0, 1.5), (0.5, 0.2), 2.0, 1.0)
    counts = [draw_schedule(delays, S, 10.0, R, gen(1)).t.numpy() for S in (0.0, 3.0)]
    t, alpha = padded(counts), torch.tensor([[0.5], [2.0]], dtype=F64)
    batch = run_hfl(fed, sizes=(2, 3), alpha=alpha, x1=x1, replicas=R, t=t, generator=gen(4))
    for c in range(2):
        gaps = differences(run_hfl(fed, sizes=(2, 3), alpha=alpha[c].expand(R), x1=x1,
                                   replicas=R, t=t[c], generator=gen(4)), batch[c])
        assert (gaps == {}) if R == 16 else max(gaps.values(), default=0.0) <= 1e-12


def test_hfl_batch_of_a_network_at_16_replicas_is_bit_for_bit():
    fed, x1 = federated_problem("digits", "mlp", ("dirichlet", 0.5), (2, 2), batch=2, hidden=(4,))
    t = torch.tensor([[[1, 2], [2, 1]], [[3, 1], [0, 0]]]).expand(16, 2, 2, 2).transpose(0, 1)
    alpha = torch.tensor([[0.3], [1.0]], dtype=F64)
    batch = run_hfl(fed, sizes=(2, 2), alpha=alpha, x1=x1, replicas=16, t=t, generator=gen(1))
    for c in range(2):
        alone = run_hfl(fed, sizes=(2, 2), alpha=alpha[c].expand(16), x1=x1, replicas=16,
                        t=t[c], generator=gen(1))
        assert differences(alone, batch[c]) == {}


def test_hfl_batch_bad_input_names_the_axis():
    pr = quadratic(0)
    t = torch.ones(2, 3, 4, 1, dtype=torch.int64)
    with pytest.raises(ValueError, match="alpha has 3, t has 2"):
        run_hfl(pr, sizes=[2], alpha=torch.full((3, 3), 0.1, dtype=F64), x1=pr.x_star, replicas=3,
                t=t, generator=gen(0))
    with pytest.raises(ValueError, match=r"\[2, 3\] or \[2, 1\]"):
        run_hfl(pr, sizes=[2], alpha=torch.full((4,), 0.1, dtype=F64), x1=pr.x_star, replicas=3,
                t=t, generator=gen(0))


# ---------------------------------------------------------------- MLL-SGD


@st.composite
def hub_batches(draw):
    sizes = draw(st.lists(st.integers(1, 3), min_size=1, max_size=3))
    hub_of = torch.repeat_interleave(torch.arange(len(sizes)), torch.tensor(sizes))
    N = hub_of.numel()
    w = torch.tensor(draw(st.lists(st.floats(0.2, 5.0), min_size=N, max_size=N)), dtype=F64)
    p = torch.tensor(draw(st.lists(st.sampled_from([0.4, 0.8, 1.0]), min_size=N, max_size=N)),
                     dtype=F64)
    b = hub_weights(hub_of, w, len(sizes)).b
    H = rank_one_H(b) if draw(st.booleans()) else diffusion_H(b, draw(st.floats(0.1, 0.99)))
    q, C = draw(st.integers(1, 2)), draw(st.integers(1, 4))
    taus = draw(st.lists(st.integers(1, 3), min_size=C, max_size=C))
    Ks = [q * tau * draw(st.integers(1, 3)) for tau in taus]
    R, seed = draw(st.integers(3, 4)), draw(st.integers(0, 2**31))
    etas = torch.tensor(draw(st.lists(st.floats(0.01, 0.3), min_size=C, max_size=C)), dtype=F64)
    return dict(problem=Quadratic.random(3, 2.0, 0.2, 1.0, gen(seed), rotate=True), H=H,
                hub_of=hub_of, w=w, p=p, q=q, tau=taus, K=Ks, eta=etas[:, None].expand(C, R),
                x1=torch.randn(3, generator=gen(seed + 1), dtype=F64), replicas=R, seed=seed)


def mllsgd(args, **overrides):
    args = {**args, **overrides}
    return run_mllsgd(args.pop("problem"), generator=gen(args.pop("seed")), **args)


@FAST
@given(hub_batches(), st.booleans())
def test_mllsgd_configuration_in_a_batch_is_its_run_alone_bit_for_bit(batch, iterates):
    """Each configuration its own tau (T_k of (6) per configuration), K and step."""
    traces = mllsgd(batch, record_iterates=iterates)
    assert len(traces) == len(batch["tau"])
    for c, trace in enumerate(traces):
        alone = mllsgd(batch, tau=batch["tau"][c], K=batch["K"][c], eta=batch["eta"][c],
                       record_iterates=iterates)
        assert differences(alone, trace) == {}


@FAST
@given(hub_batches())
def test_mllsgd_batch_follows_the_matrix_form_eq5_with_each_configurations_T(batch):
    """X_{k+1} = (X_k - eta G_k) T_k with the dense V and Z of (7) and T_k of (6) at tau_c."""
    V, Z = mixing_matrices(batch["H"], batch["hub_of"], batch["w"])
    q = batch["q"]
    for c, trace in enumerate(mllsgd(batch, record_iterates=True)):
        eta = batch["eta"][c, 0]
        for k in range(1, trace.K + 1):
            T = {"Z": Z, "V": V, "I": torch.eye(V.shape[0], dtype=F64)}[
                operator_at(k, q, batch["tau"][c])]
            expected = T.T @ (trace.X[:, k - 1] - eta * trace.G[:, k - 1])
            torch.testing.assert_close(trace.X[:, k], expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("R", [4, 16])
def test_mllsgd_batch_on_logistic_clients(R):
    fed, x1 = federated_problem("digits", "logistic", ("dirichlet", 0.5), (6,), batch=2)
    kw = dict(H=torch.full((2, 2), 0.5, dtype=F64), hub_of=torch.arange(6) // 3, w=torch.ones(6),
              p=torch.full((6,), 0.7), q=2, x1=x1, replicas=R)
    eta = torch.tensor([[0.3], [1.0], [3.0]], dtype=F64).expand(3, R)
    batch = run_mllsgd(fed, eta=eta, K=[8, 8, 16], tau=[1, 2, 4], generator=gen(2), **kw)
    for c, (K, tau) in enumerate(((8, 1), (8, 2), (16, 4))):
        gaps = differences(run_mllsgd(fed, eta=eta[c], K=K, tau=tau, generator=gen(2), **kw),
                           batch[c])
        assert (gaps == {}) if R == 16 else max(gaps.values(), default=0.0) <= 1e-12


def test_mllsgd_waiting_for_stragglers_needs_one_tau():
    pr = Quadratic.random(3, 2.0, 0.2, 1.0, gen(0))
    kw = dict(H=torch.ones(1, 1, dtype=F64), hub_of=torch.zeros(4, dtype=torch.int64),
              w=torch.ones(4), p=torch.full((4,), 0.5), q=1, x1=pr.x_star + 1, replicas=3,
              wait_for_all=True)
    eta = torch.tensor([[0.1], [0.2]], dtype=F64)
    batch = run_mllsgd(pr, eta=eta, K=8, tau=2, generator=gen(1), **kw)
    alone = run_mllsgd(pr, eta=eta[1].expand(3), K=8, tau=2, generator=gen(1), **kw)
    assert differences(alone, batch[1]) == {}
    with pytest.raises(ValueError, match="a batch needs one tau"):
        run_mllsgd(pr, eta=eta, K=8, tau=[2, 4], generator=gen(1), **kw)
    with pytest.raises(ValueError, match="tau has 2, eta has 3"):
        run_mllsgd(pr, eta=torch.full((3, 1), 0.1, dtype=F64), K=8, tau=[2, 4], generator=gen(1),
                   **{**kw, "wait_for_all": False})


# ---------------------------------------------------------------- TDCD


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(setups(), st.lists(st.integers(1, 4), min_size=1, max_size=3),
       st.sampled_from(["round", "step"]), st.booleans())
def test_tdcd_configuration_in_a_batch_is_its_run_alone_and_the_literal_loop(
        drawn, Qs, batch, stop):
    """Each configuration its own Q (its rounds on its own clock), rounds and step; least
    squares at R = 3 and logistic regression at R = 16, bit for bit; and configuration c's
    hub models are those of the literal loop on its recorded batches."""
    model, _, eta, theta0, seed = drawn
    R = 3 if model.loss_kind == "squared" else 16
    C = len(Qs)
    rounds = [max(1, 6 // Q) + c for c, Q in enumerate(Qs)]
    steps = torch.tensor([eta * (c + 1) / Q for c, Q in enumerate(Qs)], dtype=F64)[:, None]
    kw = dict(theta0=theta0, replicas=R, batch=batch)
    if stop:  # stop_below at the median left side of a short run: some configurations stop
        probe = run_tdcd(model, eta=steps, Q=Qs, rounds=rounds, generator=gen(seed), **kw)
        kw["stop_below"] = float(np.median([float(t.running_lhs[:, -1].max()) for t in probe]))
    traces = run_tdcd(model, eta=steps, Q=Qs, rounds=rounds, generator=gen(seed),
                      record_iterates=not stop, **kw)
    assert len(traces) == C
    for c, trace in enumerate(traces):
        alone = run_tdcd(model, eta=steps[c].expand(R), Q=Qs[c], rounds=rounds[c],
                         generator=gen(seed), record_iterates=not stop, **kw)
        assert differences(alone, trace) == {}
        if not stop:
            ref = literal_tdcd(model, Qs[c], float(steps[c]), theta0, trace.rows[0])
            np.testing.assert_allclose(model.join(trace.hub[0]).numpy(), ref, rtol=1e-10,
                                       atol=1e-12)


def test_tdcd_round_r_of_every_configuration_takes_the_same_batch():
    lay = Layout((2, 2), (2, 2), 20, 4)
    X, y = synthetic_data(20, 4, loss="logistic", generator=gen(0))
    model = BlockLinear(X, y, lay, loss="logistic")
    traces = run_tdcd(model, eta=0.1, Q=[1, 3, 2], rounds=[6, 2, 4], theta0=torch.zeros(4),
                      replicas=3, generator=gen(1), record_iterates=True)
    assert all(torch.equal(t.rows[:, :2], traces[0].rows[:, :2]) for t in traces)
    step = run_tdcd(model, eta=0.1, Q=[1, 3], rounds=[6, 2], theta0=torch.zeros(4), replicas=3,
                    generator=gen(1), record_iterates=True, batch="step")
    assert torch.equal(step[0].rows[:, :, 0].reshape(3, 2, 3, 4), step[1].rows)  # step t: one batch
    R4 = run_tdcd(model, eta=torch.tensor([[0.1], [0.2]], dtype=F64), Q=2, rounds=3, theta0=torch.zeros(4),
                  replicas=4, generator=gen(1))
    alone = run_tdcd(model, eta=torch.full((4,), 0.2, dtype=F64), Q=2, rounds=3,
                     theta0=torch.zeros(4), replicas=4, generator=gen(1))
    assert max(differences(alone, R4[1]).values(), default=0.0) <= 1e-12  # round-off at R = 4


def test_tdcd_batch_of_networks_is_bit_for_bit():
    """One torch module per silo (sim.tdcd.ModuleModel, tanh: 16 replicas), least squares:
    each configuration of a batch of Q = 1, 3 is its run alone."""
    lay = Layout((3, 2), (2, 2), 20, 4)
    X, y = synthetic_data(20, 5, loss="squared", generator=gen(0))
    torch.manual_seed(0)
    modules = [torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1)),
               torch.nn.Linear(2, 1)]
    model = ModuleModel(modules, X, y, lay, loss="squared")
    eta = torch.tensor([[0.05], [0.1]], dtype=F64)
    batch = run_tdcd(model, eta=eta, Q=[1, 3], rounds=[6, 2], theta0=model.initial(), replicas=16,
                     generator=gen(1))
    for c, (Q, rounds) in enumerate(((1, 6), (3, 2))):
        alone = run_tdcd(model, eta=eta[c].expand(16), Q=Q, rounds=rounds, theta0=model.initial(),
                         replicas=16, generator=gen(1))
        assert differences(alone, batch[c]) == {}


def test_tdcd_batch_bad_input_names_the_axis():
    lay = Layout((2,), (1,), 10, 2)
    X, y = synthetic_data(10, 2, loss="squared", generator=gen(0))
    model = BlockLinear(X, y, lay, loss="squared")
    with pytest.raises(ValueError, match="Q has 2, rounds has 3"):
        run_tdcd(model, eta=0.1, Q=[1, 2], rounds=[1, 2, 3], theta0=torch.zeros(2), replicas=3,
                 generator=gen(0))
    with pytest.raises(ValueError, match=r"Q\[1\]=0 must be an integer >= 1"):
        run_tdcd(model, eta=0.1, Q=[1, 0], rounds=2, theta0=torch.zeros(2), replicas=3,
                 generator=gen(0))
    with pytest.raises(ValueError, match=r"\[2, 3\] or \[2, 1\]"):
        run_tdcd(model, eta=torch.ones(5), Q=[1, 2], rounds=2, theta0=torch.zeros(2), replicas=3,
                 generator=gen(0))


# ---------------------------------------------------------------- what a chooser reads


def test_records_of_the_end_alone_are_those_of_the_full_record():
    """run_hfl(record_loss=False): f(x^{U+1}) only, no deviation; run_mllsgd(record_first=False): F(u_k) at
    k = e, 2e, ..., K (in a batch of unequal K too); run_tdcd(record_variance=False): no
    sigma2. The dynamics and every number recorded are the full record's, bit for bit."""
    pr = quadratic(2)
    t = torch.tensor([[2, 1], [1, 3], [4, 4]])
    kw = dict(sizes=[2, 3], alpha=0.1, x1=pr.x_star + 1, replicas=3, t=t, record_grad=False)
    full, end = (run_hfl(pr, generator=gen(3), record_loss=flag, **kw) for flag in (True, False))
    assert end.loss.shape == (3, 1) and torch.equal(end.loss[:, 0], full.final_loss)
    assert end.deviation is None and full.deviation is not None
    assert differences(full, end).keys() == {"loss", "deviation"}
    with pytest.raises(ValueError, match="needs record_grad=False"):
        run_hfl(pr, generator=gen(3), record_loss=False, **{**kw, "record_grad": True})
    mk = dict(H=torch.full((2, 2), 0.5, dtype=F64), hub_of=torch.tensor([0, 0, 1, 1]),
              w=torch.ones(4), p=torch.full((4,), 0.7), q=2, x1=pr.x_star + 1, replicas=3)
    eta = torch.tensor([[0.1], [0.2]], dtype=F64).expand(2, 3)
    every = run_mllsgd(pr, eta=eta, K=[8, 16], tau=[2, 4], generator=gen(4), **mk)
    last = run_mllsgd(pr, eta=eta, K=[8, 16], tau=[2, 4], generator=gen(4), record_every=4,
                      record_first=False, **mk)
    for a, b in zip(every, last, strict=True):
        assert torch.equal(b.loss, a.loss[:, 3::4]) and torch.equal(b.grad_sq_norm, a.grad_sq_norm[:, 3::4])
        assert b.recorded.tolist() == list(range(4, b.K + 1, 4)) and b.record_every == 4
        assert a.recorded.tolist() == list(range(1, a.K + 1))
    lay = Layout((2, 2), (2, 2), 20, 4)
    X, y = synthetic_data(20, 4, loss="logistic", generator=gen(0))
    model = BlockLinear(X, y, lay, loss="logistic")
    tk = dict(eta=0.1, Q=[1, 3], rounds=[6, 2], theta0=torch.zeros(4), replicas=3)
    with_var, without = (run_tdcd(model, generator=gen(1), record_variance=flag, **tk)
                         for flag in (True, False))
    for a, b in zip(with_var, without, strict=True):
        assert b.sigma2 is None and a.sigma2 is not None
        assert differences(a, b).keys() == {"sigma2"}


@pytest.mark.parametrize("R", [3, 5])
def test_hfl_network_steps_only_its_stepping_groups_and_is_bit_for_bit_at_any_replicas(R):
    """With the loss recorded only (the choosers' runs), sim.neural's group means compute the
    gradients of the groups that step only (``rows``), in batches padded to whole vectorised
    chunks: a configuration in a batch is its run alone bit for bit at any R, and the run is
    the one computing every group's gradient (record_grad=True's path) to round-off."""
    fed, x1 = federated_problem("digits", "mlp", ("dirichlet", 0.5), (2, 3), batch=2, hidden=(5,))
    delays = HFLDelays((1.0, 1.5), (0.5, 0.2), 2.0, 1.0)
    counts = [draw_schedule(delays, S, 6.0, R, gen(1)).t.numpy() for S in (0.0, 3.0)]
    t, alpha = padded(counts), torch.tensor([[0.5], [2.0]], dtype=F64)
    kw = dict(sizes=(2, 3), x1=x1, replicas=R, record_grad=False)
    batch = run_hfl(fed, alpha=alpha, t=t, generator=gen(4), **kw)
    for c in range(2):
        alone = run_hfl(fed, alpha=alpha[c].expand(R), t=t[c], generator=gen(4), **kw)
        assert differences(alone, batch[c]) == {}
        every = run_hfl(fed, alpha=alpha[c].expand(R), t=t[c], generator=gen(4),
                        **{**kw, "record_grad": True})
        torch.testing.assert_close(every.loss, alone.loss, rtol=1e-12, atol=0)
        torch.testing.assert_close(every.x_final, alone.x_final, rtol=1e-12, atol=1e-14)
    assert not torch.equal(batch[0].x_final, batch[1].x_final)
