"""The TDCD simulator (sim/tdcd.py) against independent computations: a literal numpy loop
over silos and clients, plain mini-batch SGD (Q = 1), the virtual-sequence identity (13),
Lemma 2 pathwise, the model constants, determinism, neural modules and bad input."""

import math

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fedbound.sim.tdcd import BlockLinear, Layout, ModuleModel, draw_batch, run_tdcd, synthetic_data

torch.set_num_threads(1)


@st.composite
def setups(draw, max_N=3):
    """Random N, feature split, unequal K_j, batch (a multiple of lcm K_j), loss, Q and eta
    up to 1/(2 Q L_max) (Lemma 2's condition, which (14) implies)."""
    N = draw(st.integers(1, max_N))
    blocks = tuple(draw(st.lists(st.integers(1, 3), min_size=N, max_size=N)))
    clients = tuple(draw(st.lists(st.integers(1, 3), min_size=N, max_size=N)))
    n = draw(st.integers(4, 30))
    C = math.lcm(*clients)
    batch = C * draw(st.integers(1, min(n, 3)))
    loss = draw(st.sampled_from(["squared", "logistic"]))
    seed = draw(st.integers(0, 2**16))
    layout = Layout(blocks, clients, n, batch)
    X, y = synthetic_data(n, layout.D, loss=loss, generator=torch.Generator().manual_seed(seed))
    model = BlockLinear(X, y, layout, loss=loss)
    Q = draw(st.integers(1, 6))
    eta = draw(st.floats(0.05, 1.0)) / (2 * Q * model.L_max)
    theta0 = torch.randn(layout.D, generator=torch.Generator().manual_seed(seed + 1),
                         dtype=torch.float64)
    return model, Q, eta, theta0, seed


def run(model, Q, eta, theta0, seed, *, rounds=4, replicas=3, **kw):
    return run_tdcd(model, eta=eta, Q=Q, rounds=rounds, theta0=theta0, replicas=replicas,
                    generator=torch.Generator().manual_seed(seed), **kw)


# ------------------------------------------------------------------ literal reference


def literal_tdcd(model, Q, eta, theta0, rows):
    """Algorithm 1 of Das et al. 2022, one replica, in numpy: loops over rounds,
    silos, clients, local steps and samples. ``rows`` [rounds, batch]: the recorded batches
    (one per round), or [rounds, Q, batch] (one per local step, ``batch="step"``: the other
    silos' embeddings of each step's batch at the round-start hub models).
    Returns the hub models (concatenated blocks) at every round start, [rounds + 1, D]."""
    lay = model.layout
    X, y = model.X.numpy(), model.y.numpy()
    starts = np.concatenate([[0], np.cumsum(lay.blocks)])
    cols = [slice(starts[j], starts[j + 1]) for j in range(lay.N)]
    slope = (lambda z, t: z - t) if model.loss_kind == "squared" else \
        (lambda z, t: -t / (1 + np.exp(t * z)))
    hub = [theta0.numpy()[c].copy() for c in cols]
    out = [np.concatenate(hub)]
    for round_rows in rows.numpy():
        batches = [round_rows] * Q if round_rows.ndim == 1 else list(round_rows)
        phis = [[[X[p, cols[j]] @ hub[j] for p in batch] for j in range(lay.N)] for batch in batches]
        new_hub = []
        for j in range(lay.N):
            b_j = lay.batch // lay.clients[j]
            models = []
            for k in range(lay.clients[j]):
                theta = hub[j].copy()
                for batch, phi in zip(batches, phis, strict=True):
                    mine = batch[k * b_j:(k + 1) * b_j]
                    stale = [sum(phi[m][k * b_j + i] for m in range(lay.N) if m != j)
                             for i in range(b_j)]
                    g = np.zeros_like(theta)
                    for i, p in enumerate(mine):
                        z = X[p, cols[j]] @ theta + stale[i]
                        g += slope(z, y[p]) * X[p, cols[j]]
                    theta = theta - eta * g / b_j
                models.append(theta)
            new_hub.append(sum(models) / lay.clients[j])
        hub = new_hub
        out.append(np.concatenate(hub))
    return np.array(out)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(setups())
def test_matches_the_literal_loop_over_silos_and_clients(drawn):
    model, Q, eta, theta0, seed = drawn
    tr = run(model, Q, eta, theta0, seed, replicas=2, record_iterates=True)
    for r in range(2):
        ref = literal_tdcd(model, Q, eta, theta0, tr.rows[r])
        np.testing.assert_allclose(model.join(tr.hub[r]).numpy(), ref, rtol=1e-10, atol=1e-12)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(setups())
def test_a_fresh_batch_per_step_matches_the_literal_loop(drawn):
    model, Q, eta, theta0, seed = drawn
    tr = run(model, Q, eta, theta0, seed, replicas=2, record_iterates=True, batch="step")
    assert tr.rows.shape == (2, 4, Q, model.layout.batch)
    for r in range(2):
        ref = literal_tdcd(model, Q, eta, theta0, tr.rows[r])
        np.testing.assert_allclose(model.join(tr.hub[r]).numpy(), ref, rtol=1e-10, atol=1e-12)
    again = run(model, Q, eta, theta0, seed, replicas=2, record_iterates=True, batch="step")
    assert torch.equal(tr.hub, again.hub)
    if Q > 1:  # the batches of a round's steps are drawn afresh (on some replica and round:
        # on a small shard two steps of one round may draw the same rows by chance)
        assert not all(torch.equal(tr.rows[r, k, 0], tr.rows[r, k, q])
                       for r in range(2) for k in range(4) for q in range(1, Q))


def _sharded(loss="logistic", clients=(2, 4), seed=0):
    """A layout of C = lcm(clients) = 4 label-skewed cells (one class each, two classes per
    cell when the labels are +-1 split in four classes by feature sign) of 40 samples."""
    from fedbound.sim.data import label_partition

    lay = Layout((2, 3), clients, 40, 8)
    X, y = synthetic_data(40, 5, loss=loss, generator=torch.Generator().manual_seed(seed))
    classes = (y > 0).long() * 2 + (X[:, 0] > 0).long()
    shards = label_partition(classes, lay.cells, 1, torch.Generator().manual_seed(seed + 1))
    return lay, X, y, shards


def test_sharded_cells_give_every_client_only_its_own_samples():
    lay, X, y, shards = _sharded()
    model = BlockLinear(X, y, lay, loss="logistic")
    theta0 = torch.zeros(lay.D, dtype=torch.float64)
    tr = run(model, 3, 0.1, theta0, 5, rounds=6, record_iterates=True, shards=shards)
    b = lay.per_cell
    for r in range(3):
        for rnd in range(6):
            picked = tr.rows[r, rnd].view(lay.cells, b)
            for c in range(lay.cells):  # b distinct samples of cell c's own shard
                assert (shards.owner[picked[c]] == c).all() and picked[c].unique().numel() == b
        ref = literal_tdcd(model, 3, 0.1, theta0, tr.rows[r])
        np.testing.assert_allclose(model.join(tr.hub[r]).numpy(), ref, rtol=1e-10, atol=1e-12)
    assert tr.sigma2 is None and torch.allclose(tr.loss[:, 0], model.loss(model.split(theta0)[None]))
    again = run(model, 3, 0.1, theta0, 5, rounds=6, record_iterates=True, shards=shards)
    assert torch.equal(tr.hub, again.hub)


def test_sharded_cells_run_a_module_model_and_bad_shards_are_named():
    from fedbound.sim.data import Partition

    _, X, y, four = _sharded()
    lay, shards = Layout((2, 3), (2, 2), 40, 4), Partition(four.owner % 2, 2)
    model = ModuleModel([_mlp(2, 0), _mlp(3, 1)], X, y, lay, loss="logistic")
    tr = run(model, 2, 0.1, model.initial(), 3, rounds=3, shards=shards, batch="step")
    assert torch.isfinite(tr.loss).all()
    with pytest.raises(ValueError, match="into C = lcm"):
        run(model, 2, 0.1, model.initial(), 3, shards=Partition(shards.owner, 3))
    tiny = Partition(torch.cat([torch.zeros(39, dtype=torch.int64), torch.ones(1, dtype=torch.int64)]), 2)
    with pytest.raises(ValueError, match="cell 1 holds 1 samples"):
        run(model, 2, 0.1, model.initial(), 3, shards=tiny)
    with pytest.raises(ValueError, match="batch='epoch' must be one of"):
        run(model, 2, 0.1, model.initial(), 3, batch="epoch")


# ------------------------------------------------------------------ identities


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(setups())
def test_virtual_sequence_identity_13(drawn):
    """theta^{t+1} = theta^t - eta G^t to machine precision, (13); theta^{rQ} = hub."""
    model, Q, eta, theta0, seed = drawn
    tr = run(model, Q, eta, theta0, seed, record_iterates=True)
    v, G = tr.virtual, tr.G
    scale = max(1.0, float(v.abs().max()))
    assert torch.allclose(v[:, 1:], v[:, :-1] - eta * G, rtol=0, atol=1e-13 * scale)
    assert torch.allclose(v[:, ::Q], tr.hub, rtol=1e-15, atol=1e-16)
    assert v.shape[1] == 4 * Q + 1


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(setups())
def test_q1_is_minibatch_sgd_on_the_union_batch(drawn):
    model, _, eta, theta0, seed = drawn
    tr = run(model, 1, eta, theta0, seed, rounds=5, record_iterates=True)
    X, y = model.X, model.y
    for r in range(tr.hub.shape[0]):
        theta = theta0.clone()
        for t in range(5):
            rows = tr.rows[r, t]
            z = X[rows] @ theta
            slope = z - y[rows] if model.loss_kind == "squared" else -y[rows] * torch.sigmoid(-y[rows] * z)
            theta = theta - eta * (slope @ X[rows]) / rows.numel()
            assert torch.allclose(model.join(tr.hub[r, t + 1]), theta, rtol=1e-11, atol=1e-13)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(setups())
def test_lemma2_holds_pathwise_every_round_every_replica(drawn):
    """Lemma 2, (30), with the paper's 4 Q^2 (1+Q) and the exact sum."""
    model, Q, eta, theta0, seed = drawn
    tr = run(model, Q, eta, theta0, seed, rounds=5, replicas=4)
    paper = 4 * Q**2 * (1 + Q) * model.L_max**2 * eta**2 * tr.g0
    tight = 2 * (1 + Q) * sum(((1 + 2 / Q) ** s - 1) / (2 / Q) for s in range(Q)) \
        * model.L_max**2 * eta**2 * tr.g0
    slack = 1e-12 * (tr.g0 + 1)
    assert (tr.drift <= tight + slack).all() and (tight <= paper + slack).all()
    if Q == 1:
        assert (tr.drift == 0).all()


def test_n1_k1_is_q_gradient_steps_on_one_batch_per_round():
    """N = 1, K = 1: Q full steps on the round's batch."""
    lay = Layout((4,), (1,), 20, 5)
    X, y = synthetic_data(20, 4, loss="logistic", generator=torch.Generator().manual_seed(3))
    model = BlockLinear(X, y, lay, loss="logistic")
    theta0 = torch.full((4,), 0.3, dtype=torch.float64)
    tr = run(model, 3, 0.2, theta0, 5, rounds=3, replicas=2, record_iterates=True)
    for r in range(2):
        theta = theta0.clone()
        for t in range(3):
            rows = tr.rows[r, t]
            for _ in range(3):
                theta = theta + 0.2 * (y[rows] * torch.sigmoid(-y[rows] * (X[rows] @ theta))) @ X[rows] / 5
            assert torch.allclose(tr.hub[r, t + 1, 0], theta, rtol=1e-12, atol=1e-14)


def test_per_replica_steps_equal_separate_runs():
    lay = Layout((2, 1), (2, 1), 12, 4)
    X, y = synthetic_data(12, 3, loss="logistic", generator=torch.Generator().manual_seed(2))
    model = BlockLinear(X, y, lay, loss="logistic")
    both = run(model, 3, torch.tensor([0.1, 0.3], dtype=torch.float64), torch.zeros(3), 4, replicas=2)
    one = run(model, 3, 0.3, torch.zeros(3), 4, replicas=2)
    assert torch.allclose(both.grad_sq_norm[1], one.grad_sq_norm[1], rtol=1e-13, atol=0)


def test_time_axis_is_the_latency_model():
    lay = Layout((2, 2), (2, 2), 10, 4)
    X, y = synthetic_data(10, 4, loss="squared", generator=torch.Generator().manual_seed(0))
    tr = run(BlockLinear(X, y, lay, loss="squared"), 5, 0.01, torch.zeros(4), 0, rounds=3,
             t_comm=10.0, t_comp=2.0)
    assert tr.time.tolist() == [0.0, 40.0, 80.0, 120.0]


# ------------------------------------------------------------------ sampling and constants


def test_batches_take_distinct_samples_per_cell_and_equal_counts_per_client():
    lay = Layout((1, 1), (2, 3), 7, 12)           # C = 6 cells, 2 per cell
    rows = draw_batch(lay, 50, torch.Generator().manual_seed(0), "cpu")
    cells = rows.reshape(50, 6, 2)
    assert (cells[..., 0] != cells[..., 1]).all() and rows.min() >= 0 and rows.max() < 7
    assert lay.client_batch == (6, 4) and lay.owner().tolist()[1] == [0] * 4 + [1] * 4 + [2] * 4


@pytest.mark.parametrize("loss", ["squared", "logistic"])
def test_client_gradients_are_unbiased_with_the_exact_variance(loss):
    """Assumption 3, (8)-(9), at a fixed theta: over many batches, every client's
    g_kj averages to grad_(j) L and its variance is sigma2_at (Monte Carlo, 5 sigma)."""
    lay = Layout((2, 3), (2, 3), 12, 12)
    X, y = synthetic_data(12, 5, loss=loss, generator=torch.Generator().manual_seed(4))
    model = BlockLinear(X, y, lay, loss=loss)
    theta = model.split(torch.linspace(-1, 1, 5, dtype=torch.float64))[None]
    R = 4000
    hub = theta.expand(R, -1, -1).clone()
    rows = draw_batch(lay, R, torch.Generator().manual_seed(5), "cpu")
    own = model.embed(hub, rows)
    other = own.sum(1, keepdim=True) - own
    owner = lay.owner()
    b = torch.tensor(lay.client_batch, dtype=torch.float64)
    weights = torch.nn.functional.one_hot(owner, 3).to(torch.float64) / b[:, None, None]
    g = model.client_grads(hub[:, :, None].expand(R, 2, 3, 3).clone(), rows, other, owner, weights)
    full = model.grad(theta)[0]
    var = model.sigma2_at(theta)[0]
    for j in range(2):
        for k in range(lay.clients[j]):
            gk = g[:, j, k]
            se = gk.std(0) / math.sqrt(R) + 1e-15
            assert ((gk.mean(0) - full[j]).abs() <= 5 * se).all()
            emp = (gk - full[j]).square().sum(-1)
            assert abs(float(emp.mean()) - float(var[j])) <= 5 * float(emp.std()) / math.sqrt(R) + 1e-15
    if loss == "logistic":
        assert (var <= torch.tensor(model.sigma) ** 2).all()


def test_smoothness_constants_bound_the_hessians():
    lay = Layout((2, 3), (1, 2), 15, 2)
    for loss in ("squared", "logistic"):
        X, y = synthetic_data(15, 5, loss=loss, generator=torch.Generator().manual_seed(6))
        model = BlockLinear(X, y, lay, loss=loss)
        def objective(t, X=X, y=y, loss=loss):
            z = X @ t
            return (0.5 * (z - y) ** 2 if loss == "squared" else torch.log1p(torch.exp(-y * z))).mean()

        H = torch.autograd.functional.hessian(objective, torch.zeros(5, dtype=torch.float64))
        assert float(torch.linalg.eigvalsh(H)[-1]) == pytest.approx(model.L, rel=1e-10)
        worst = max(float(torch.linalg.eigvalsh(X[[p]][:, c].T @ X[[p]][:, c])[-1])
                    for p in range(15) for c in (slice(0, 2), slice(2, 5)))
        assert model.L_max == pytest.approx(worst * (0.25 if loss == "logistic" else 1), rel=1e-12)


def test_least_squares_f_inf_is_the_minimum():
    lay = Layout((2, 2), (1, 1), 12, 1)
    X, y = synthetic_data(12, 4, loss="squared", generator=torch.Generator().manual_seed(7))
    model = BlockLinear(X, y, lay, loss="squared")
    best = np.linalg.lstsq(X.numpy(), y.numpy(), rcond=None)[0]
    assert model.f_inf == pytest.approx(0.5 * np.mean((X.numpy() @ best - y.numpy()) ** 2), rel=1e-10)


def test_least_squares_f_inf_is_the_same_bits_every_time():
    """L_inf of least squares (and so Delta = L(theta^0) - L_inf, and every verdict) is the
    same, bit for bit, however often the model is built: with LAPACK's default gelsy, 100
    builds on copies of one 60 x 6 data set gave 2 values of L_inf in each of 5 runs (a check
    of tdcd.deadline_pl once differed from the next in the last bit of Delta)."""
    lay = Layout((3, 3), (1, 1), 60, 1)
    X, y = synthetic_data(60, 6, loss="squared", generator=torch.Generator().manual_seed(7))
    assert len({BlockLinear(X.clone(), y.clone(), lay, loss="squared").f_inf for _ in range(100)}) == 1


# ------------------------------------------------------------------ determinism, divergence


def test_same_seed_same_trace_bit_for_bit():
    lay = Layout((2, 1), (2, 3), 20, 6)
    X, y = synthetic_data(20, 3, loss="logistic", generator=torch.Generator().manual_seed(1))
    model = BlockLinear(X, y, lay, loss="logistic")
    a, b = (run(model, 3, 0.1, torch.zeros(3), 9) for _ in range(2))
    c = run(model, 3, 0.1, torch.zeros(3), 10)
    assert torch.equal(a.grad_sq_norm, b.grad_sq_norm) and torch.equal(a.drift, b.drift)
    assert not torch.equal(a.grad_sq_norm, c.grad_sq_norm)


def test_divergence_is_flagged_and_frozen_not_nan():
    lay = Layout((2, 2), (1, 2), 10, 2)
    X, y = synthetic_data(10, 4, loss="squared", generator=torch.Generator().manual_seed(2),
                          scale=3.0)
    model = BlockLinear(X, y, lay, loss="squared")
    tr = run(model, 5, 50.0, torch.ones(4), 0, rounds=40)
    assert tr.diverged.all()
    for t in (tr.grad_sq_norm, tr.loss, tr.drift, tr.g0):
        assert torch.isfinite(t).all()


# ------------------------------------------------------------------ neural modules


def _mlp(d_in, seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(d_in, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))


def test_module_model_runs_and_is_deterministic():
    lay = Layout((2, 3), (2, 1), 16, 4)
    X, y = synthetic_data(16, 5, loss="logistic", generator=torch.Generator().manual_seed(0))
    model = ModuleModel([_mlp(2, 0), _mlp(3, 1)], X, y, lay, loss="logistic")
    theta0 = model.initial()
    a, b = (run(model, 3, 0.1, theta0, 4, rounds=5, record_iterates=True) for _ in range(2))
    assert torch.equal(a.grad_sq_norm, b.grad_sq_norm) and torch.equal(a.hub, b.hub)
    assert torch.isfinite(a.loss).all() and a.loss[:, -1].mean() < a.loss[:, 0].mean()
    v = a.virtual
    assert torch.allclose(v[:, 1:], v[:, :-1] - 0.1 * a.G, rtol=0, atol=1e-13)
    # the full gradient agrees with autograd on the concatenated parameters
    flat = theta0.clone().requires_grad_(True)
    loss = model._total_loss(model.split(flat))
    (auto,) = torch.autograd.grad(loss, flat)
    assert torch.allclose(model.join(model.grad(model.split(theta0)[None]))[0], auto, atol=1e-14)


def _named_as_callable(kind):
    """The named loss ``kind`` as a callable: ModuleModel then takes its vmapped autograd path."""
    from fedbound.sim.neural import cross_entropy
    from fedbound.sim.tdcd import loss_value

    if kind == "cross_entropy":
        return lambda z, y: cross_entropy(z, y.long())
    return lambda z, y: loss_value(kind, z[..., 0], y)


@pytest.mark.parametrize("loss", ["cross_entropy", "squared", "logistic"])
def test_dense_closed_form_agrees_with_vmapped_autograd(loss):
    """ModuleModel's closed form (sim.neural.DenseNetwork: linear layers and tanh, a named loss) against
    torch.func.grad through functional_call (the same loss as a callable): embeddings,
    L, grad L, every client's g_kj, and a whole run, on silos of different architectures."""
    from fedbound.sim.neural import mlp

    E = 3 if loss == "cross_entropy" else 1
    lay = Layout((3, 2, 4), (2, 3, 1), 18, 12)
    X, y = synthetic_data(18, 9, loss="logistic", generator=torch.Generator().manual_seed(2))
    if loss == "cross_entropy":
        y = torch.arange(18, dtype=torch.float64) % 3
    torch.manual_seed(5)
    modules = [mlp(3, (4, 5), E), torch.nn.Linear(2, E, bias=False), mlp(4, (6,), E)]
    fast = ModuleModel(modules, X, y, lay, loss=loss)
    slow = ModuleModel(modules, X, y, lay, loss=_named_as_callable(loss))
    assert fast.dense is not None and slow.dense is None
    g = torch.Generator().manual_seed(7)
    R, K = 4, max(lay.clients)
    theta = fast.split(fast.initial()) + torch.randn(R, lay.N, fast.d, generator=g, dtype=torch.float64)
    rows = draw_batch(lay, R, g, None)
    clients = theta[:, :, None] + 0.5 * torch.randn(R, lay.N, K, fast.d, generator=g, dtype=torch.float64)

    def close(a, b):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-14)

    close(fast.embed(theta, rows), slow.embed(theta, rows))
    close(fast.loss(theta), slow.loss(theta))
    close(fast.grad(theta), slow.grad(theta))
    (other, grads), (other_slow, grads_slow) = (m.round_problem(theta, rows) for m in (fast, slow))
    close(grads(clients, other), grads_slow(clients, other_slow))
    a, b = (run(m, 3, 0.2, m.initial(), 4, rounds=4, batch="step") for m in (fast, slow))
    close(a.loss, b.loss)
    close(a.grad_sq_norm, b.grad_sq_norm)


def test_other_modules_take_the_vmapped_path_and_cross_entropy_labels_are_checked():
    lay = Layout((2, 3), (2, 1), 16, 4)
    X, y = synthetic_data(16, 5, loss="logistic", generator=torch.Generator().manual_seed(0))
    relu = torch.nn.Sequential(torch.nn.Linear(2, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))
    assert ModuleModel([relu, _mlp(3, 1)], X, y, lay, loss="logistic").dense is None
    assert ModuleModel([_mlp(2, 0), _mlp(3, 1)], X, y, lay, loss=_named_as_callable("logistic")).dense is None
    with pytest.raises(ValueError, match="cross_entropy loss needs labels"):
        ModuleModel([_mlp(2, 0), _mlp(3, 1)], X, y, lay, loss="cross_entropy")
    with pytest.raises(ValueError, match="loss='hinge' must be one of"):
        ModuleModel([_mlp(2, 0), _mlp(3, 1)], X, y, lay, loss="hinge")


@pytest.mark.parametrize("loss", ["squared", "logistic"])
def test_linear_modules_agree_with_the_block_linear_model(loss):
    lay = Layout((3, 1, 2), (2, 3, 1), 12, 6)
    X, y = synthetic_data(12, 6, loss=loss, generator=torch.Generator().manual_seed(8))
    modules = [torch.nn.Linear(D, 1, bias=False) for D in lay.blocks]
    net = ModuleModel(modules, X, y, lay, loss=loss)
    lin = BlockLinear(X, y, lay, loss=loss)
    theta0 = net.initial()
    a = run(net, 4, 0.2, theta0, 3, rounds=6, record_iterates=True)
    b = run(lin, 4, 0.2, theta0, 3, rounds=6, record_iterates=True)
    assert torch.allclose(net.join(a.hub), lin.join(b.hub), rtol=1e-12, atol=1e-14)
    assert torch.allclose(a.drift, b.drift, rtol=1e-10, atol=1e-16)
    assert torch.allclose(a.grad_sq_norm, b.grad_sq_norm, rtol=1e-10, atol=1e-16)


# ------------------------------------------------------------------ bad input


@pytest.mark.parametrize("kwargs, message", [
    (dict(blocks=(2, 0), clients=(1, 1), n=10, batch=2), r"blocks\[1\]=0 .*empty feature block"),
    (dict(blocks=(2, 2), clients=(0, 1), n=10, batch=2), r"clients\[0\]=0 .*K_j >= 1"),
    (dict(blocks=(2, 2), clients=(2, 3), n=10, batch=4), r"batch=4 must be a multiple of lcm"),
    (dict(blocks=(2, 2), clients=(2, 3), n=10, batch=66), r"batch=66 is larger than the data"),
    (dict(blocks=(2,), clients=(1, 1), n=10, batch=1), r"clients has 2 entries"),
])
def test_bad_layouts_raise_a_clear_value_error(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Layout(**kwargs)


@pytest.mark.parametrize("kwargs, message", [
    (dict(Q=0), r"Q=0 must be an integer >= 1"),
    (dict(eta=-0.1), r"eta=-0.1 must be finite and > 0"),
    (dict(eta=[0.1, 0.2]), r"one step per replica \(1\)"),
    (dict(rounds=0), r"rounds=0"),
    (dict(theta0=torch.zeros(3)), r"theta0 must be finite with shape \(4,\)"),
])
def test_bad_run_arguments_raise_a_clear_value_error(kwargs, message):
    lay = Layout((2, 2), (1, 1), 10, 2)
    X, y = synthetic_data(10, 4, loss="squared", generator=torch.Generator().manual_seed(0))
    args = dict(eta=0.1, Q=2, rounds=2, theta0=torch.zeros(4), replicas=1,
                generator=torch.Generator().manual_seed(0), **{})
    with pytest.raises(ValueError, match=message):
        run_tdcd(BlockLinear(X, y, lay, loss="squared"), **{**args, **kwargs})


def test_logistic_labels_and_data_shape_are_checked():
    lay = Layout((2, 2), (1, 1), 10, 2)
    X, _ = synthetic_data(10, 4, loss="squared", generator=torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match=r"labels y in \{-1, \+1\}"):
        BlockLinear(X, torch.zeros(10), lay, loss="logistic")
    with pytest.raises(ValueError, match=r"X has shape \(10, 3\)"):
        BlockLinear(X[:, :3], torch.ones(10), lay, loss="squared")
    with pytest.raises(ValueError, match="loss='hinge'"):
        BlockLinear(X, torch.ones(10), lay, loss="hinge")


@pytest.mark.parametrize("at", [0, 12, 29, None])
def test_stop_below_stops_at_the_first_round_every_replica_has_reached(at):
    """The same run (same seed) with and without ``stop_below``: the stopped run ends at the
    first round by which every replica's running left side of (15), computed here from the
    full run's gradients by a cumulative mean, has been at most the threshold (the largest
    best-so-far of the replicas at round ``at``; None: below every replica's, never reached),
    and what it recorded is the full run's prefix, bit for bit."""
    layout = Layout((2, 3), (2, 3), 36, 12)
    X, y = synthetic_data(36, layout.D, loss="squared", generator=torch.Generator().manual_seed(3), noise=0.3)
    model = BlockLinear(X, y, layout, loss="squared")
    theta0 = torch.randn(layout.D, generator=torch.Generator().manual_seed(4), dtype=torch.float64)

    def go(**kw):
        return run_tdcd(model, eta=0.5 / (2 * 3 * model.L_max), Q=3, rounds=30, theta0=theta0, replicas=5,
                        generator=torch.Generator().manual_seed(5), t_comm=2.0, t_comp=1.0, **kw)

    full = go()
    assert not full.diverged.any()
    g = full.grad_sq_norm.numpy()
    running = np.cumsum(g, axis=1) / np.arange(1, g.shape[1] + 1)        # [R, rounds]
    best = np.minimum.accumulate(running, axis=1)                         # best so far per replica
    threshold = best[:, -1].min() / 2 if at is None else best[:, at].max()
    everyone = np.all(best <= threshold, axis=0)                          # [rounds]
    first = int(np.argmax(everyone)) if everyone.any() else g.shape[1] - 1
    assert not everyone.any() if at is None else first <= at
    stopped = go(stop_below=float(threshold))
    assert stopped.grad_sq_norm.shape[1] == first + 1
    for name in ("grad_sq_norm", "loss", "drift", "g0", "time", "sigma2"):
        a, b = getattr(stopped, name), getattr(full, name)
        prefix = b[:, :a.shape[1]] if b.ndim > 1 else b[:a.shape[0]]
        assert torch.equal(a, prefix), name
    assert torch.equal(stopped.diverged, full.diverged)
