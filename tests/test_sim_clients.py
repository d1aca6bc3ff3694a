"""Non-i.i.d. clients (sim.clients, sim.federated, sim.data.group_label_partition): each
client draws its mini-batches from its own shard. Checked against per-client loops written
plainly here (the same draws), per-client problems built directly, and the i.i.d. numbers
of a shared problem."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from fedbound.sim.clients import LogisticClients
from fedbound.sim.data import (
    Partition,
    ShardRows,
    dirichlet_partition,
    group_label_partition,
    iid_partition,
    label_partition,
)
from fedbound.sim.hfl import run_hfl
from fedbound.sim.mllsgd import run_mllsgd
from fedbound.sim.neural import NeuralClients, NeuralProblem, mlp
from fedbound.sim.problems import DTYPE, LogisticRegression

SETTINGS = settings(max_examples=15, deadline=None)


def gen(seed):
    return torch.Generator().manual_seed(seed)


def binary_data(seed, n=40, d=3, classes=4):
    """Features, labels in {-1, +1} and classes 0..classes-1 (the partitions' labels)."""
    g = gen(seed)
    features = torch.randn(n, d, generator=g, dtype=DTYPE)
    classes_ = torch.cat([torch.arange(classes), torch.randint(classes, (n - classes,), generator=g)])
    signs = torch.where(classes_ % 2 == 0, 1.0, -1.0).to(DTYPE)
    return features, signs, classes_


def logistic_clients(seed=0, sizes=(2, 3), batch=2, weights="data", lam=0.0):
    features, signs, classes = binary_data(seed)
    part = dirichlet_partition(classes, sum(sizes), 1.0, gen(seed + 1))
    if (part.sizes == 0).any():
        part = iid_partition(classes.numel(), sum(sizes), gen(seed + 1))
    return LogisticClients(features, signs, part, batch=batch, weights=weights, lam=lam)


def own(problem, k):
    """Client k's objective f_k as a LogisticRegression on its own samples only."""
    mine = problem.partition.owner == k
    return LogisticRegression(problem.features[mine], problem.labels[mine], lam=problem.lam)


# ---------------------------------------------------------------- partitions


@SETTINGS
@given(sizes=st.lists(st.integers(1, 4), min_size=1, max_size=4), classes=st.integers(1, 8),
       seed=st.integers(0, 500))
def test_group_label_partition_gives_each_group_its_own_classes(sizes, classes, seed):
    labels = torch.cat([torch.arange(classes), torch.randint(classes, (60,), generator=gen(seed))])
    G = len(sizes)
    if G > classes:
        with pytest.raises(ValueError, match="classes"):
            group_label_partition(labels, sizes, gen(seed))
        return
    part = group_label_partition(labels, sizes, gen(seed))
    assert part.workers == sum(sizes) and torch.equal(part.sizes.sum(), torch.tensor(labels.numel()))
    start = 0
    for g, size in enumerate(sizes):
        block = {k for k in range(classes) if k * G // classes == g}      # group g's classes
        clients = range(start, start + size)
        mine = torch.isin(part.owner, torch.tensor(list(clients)))
        assert set(labels[mine].tolist()) == block                          # only, and all of them
        counts = part.sizes[start:start + size]
        assert int(counts.max()) - int(counts.min()) <= 1                   # dealt evenly
        start += size


def test_group_label_partition_refuses_a_group_with_fewer_samples_than_clients():
    with pytest.raises(ValueError, match=r"sizes\[1\]=3"):
        group_label_partition(torch.tensor([0, 0, 0, 1, 1]), [1, 3], gen(0))


def test_shard_rows_draw_each_worker_from_its_own_samples():
    labels = torch.randint(5, (200,), generator=gen(1))
    part = label_partition(labels, 6, 2, gen(2))
    u = torch.rand(3, 6, 50, generator=gen(3), dtype=DTYPE)
    idx = ShardRows(part)(u)
    table, sizes = part.table()
    for k in range(6):  # a plain loop: rank floor(u n_k) of worker k's samples
        expected = table[k, torch.clamp((u[:, k] * sizes[k]).floor().long(), max=int(sizes[k]) - 1)]
        assert torch.equal(idx[:, k], expected)
        assert (part.owner[idx[:, k]] == k).all()
    with pytest.raises(ValueError, match="without samples"):
        ShardRows(Partition(torch.zeros(4, dtype=torch.int64), 2))


# ---------------------------------------------------------------- objectives


@pytest.mark.parametrize("weights", ["data", "uniform"])
def test_global_loss_is_the_weighted_mean_of_the_clients_losses(weights):
    pr = logistic_clients(3, weights=weights, lam=0.05)
    x = torch.randn(4, pr.dim, generator=gen(4), dtype=DTYPE)
    sizes = pr.partition.sizes.to(DTYPE)
    p = sizes / sizes.sum() if weights == "data" else torch.full((pr.M,), 1 / pr.M, dtype=DTYPE)
    loss = sum(p[k] * own(pr, k).loss(x) for k in range(pr.M))
    grad = sum(p[k] * own(pr, k).grad(x) for k in range(pr.M))
    assert torch.allclose(pr.loss(x), loss, rtol=1e-12, atol=1e-14)
    assert torch.allclose(pr.grad(x), grad, rtol=1e-12, atol=1e-14)
    value, grad_sq = pr.recorder((4, pr.dim))(x)
    assert torch.allclose(value, loss, rtol=1e-12)
    assert torch.allclose(grad_sq, grad.square().sum(-1), rtol=1e-12)
    if weights == "data":  # the mean over all samples: the shared problem's numbers, bit for bit
        shared = LogisticRegression(pr.features, pr.labels, lam=0.05)
        assert torch.equal(pr.loss(x), shared.loss(x)) and torch.equal(pr.grad(x), shared.grad(x))


@pytest.mark.parametrize("weights", ["data", "uniform"])
def test_worker_and_group_gradients_are_the_clients_and_groups_objectives(weights):
    pr, sizes = logistic_clients(5, sizes=(2, 3), weights=weights), (2, 3)
    x = torch.randn(2, pr.M, pr.dim, generator=gen(6), dtype=DTYPE)
    worker = pr.worker_grads(x)
    for k in range(pr.M):
        assert torch.allclose(worker[:, k], own(pr, k).grad(x[:, k]), rtol=1e-12, atol=1e-14)
    y = x[:, :2]
    groups = pr.group_grads(y, sizes)
    p = pr.client_weights
    for g, members in enumerate((range(0, 2), range(2, 5))):
        share = sum(p[k] for k in members)
        expected = sum(p[k] / share * own(pr, k).grad(y[:, g]) for k in members)
        assert torch.allclose(groups[:, g], expected, rtol=1e-12, atol=1e-14)


def test_client_k_samples_its_own_shard_as_a_plain_loop_does():
    pr = logistic_clients(7, batch=3)
    x = torch.randn(2, pr.M, pr.dim, generator=gen(8), dtype=DTYPE)
    g = pr.stochastic_grad(x, gen(9))
    u = torch.rand(2, pr.M, 3, generator=gen(9), dtype=DTYPE)            # the same draws
    table, sizes = pr.partition.table()
    for r in range(2):
        for k in range(pr.M):
            rows = table[k, (u[r, k] * sizes[k]).floor().long()]
            batch = LogisticRegression(pr.features[rows], pr.labels[rows])
            assert torch.allclose(g[r, k], batch.grad(x[r, k]), rtol=1e-12, atol=1e-14)
    with pytest.raises(ValueError, match=r"M=5 clients"):
        pr.stochastic_grad(x[:, :4], gen(9))


# ---------------------------------------------------------------- simulators


def hfl_loop(pr, sizes, alpha, x1, t, replicas, seed):
    """Algorithm 1 of Ali & Arafa 2025 with a loop over replicas, groups and clients, client
    k (group after group) on its own shard, the draws of the simulator: one rand [R, M, batch]
    per local iteration."""
    g_ = gen(seed)
    table, counts = pr.partition.table()
    N = sum(sizes)
    x = [x1.clone() for _ in range(replicas)]
    for u in range(t.shape[0]):
        ys = [[x[r].clone() for _ in sizes] for r in range(replicas)]
        for step in range(int(t[u].max())):
            draws = torch.rand(replicas, pr.M, pr.batch, generator=g_, dtype=DTYPE)
            for r in range(replicas):
                k = 0
                for i, size in enumerate(sizes):
                    total = torch.zeros(pr.dim, dtype=DTYPE)
                    for _ in range(size):
                        rows = table[k, (draws[r, k] * counts[k]).floor().long()]
                        total = total + ys[r][i] - alpha * LogisticRegression(
                            pr.features[rows], pr.labels[rows]).grad(ys[r][i])
                        k += 1
                    if step < t[u, i]:
                        ys[r][i] = total / size
        for r in range(replicas):
            x[r] = x[r] + sum(sizes[i] / N * (ys[r][i] - x[r]) / t[u, i] for i in range(len(sizes)))
    return torch.stack(x)


@pytest.mark.parametrize("weights", ["data", "uniform"])
def test_hfl_on_client_shards_equals_a_per_client_loop(weights):
    pr, sizes = logistic_clients(11, sizes=(2, 3), batch=2, weights=weights), (2, 3)
    t = torch.tensor([[2, 1], [1, 3], [2, 2]])
    x1 = torch.full((pr.dim,), 0.3, dtype=DTYPE)
    trace = run_hfl(pr, sizes=sizes, alpha=0.4, x1=x1, replicas=2, t=t, generator=gen(12))
    ref = hfl_loop(pr, sizes, 0.4, x1, t, 2, 12)
    assert torch.allclose(trace.final_loss, pr.loss(ref), rtol=1e-12, atol=1e-14)
    assert torch.equal(trace.loss, run_hfl(pr, sizes=sizes, alpha=0.4, x1=x1, replicas=2, t=t,
                                           generator=gen(12)).loss)          # same seed, same bits
    with pytest.raises(ValueError, match="must sum to the problem's M=5"):
        run_hfl(pr, sizes=(2, 2), alpha=0.4, x1=x1, replicas=2, t=t[:, :2], generator=gen(12))


def test_mllsgd_on_client_shards_equals_a_per_worker_loop():
    pr = logistic_clients(13, sizes=(4,), batch=2)
    N, R, K, tau, eta = 4, 2, 6, 2, 0.3
    hub_of, w = torch.tensor([0, 0, 1, 1]), pr.partition.sizes.to(DTYPE)
    H = torch.full((2, 2), 0.5, dtype=DTYPE)
    x1 = torch.full((pr.dim,), -0.2, dtype=DTYPE)
    trace = run_mllsgd(pr, H=H, hub_of=hub_of, w=w, p=torch.ones(N), eta=eta, K=K, q=1, tau=tau,
                       x1=x1, replicas=R, generator=gen(14))
    g_ = gen(14)
    table, counts = pr.partition.table()
    X = x1.expand(R, N, pr.dim).clone()
    a = w / w.sum()
    for k in range(1, K + 1):
        assert torch.allclose(trace.loss[:, k - 1], pr.loss(torch.einsum("rnd,n->rd", X, a)), rtol=1e-12)
        torch.rand(R, N, generator=g_, dtype=DTYPE)                     # the coins (p = 1)
        draws = torch.rand(R, N, pr.batch, generator=g_, dtype=DTYPE)
        for r in range(R):
            for i in range(N):
                rows = table[i, (draws[r, i] * counts[i]).floor().long()]
                X[r, i] = X[r, i] - eta * LogisticRegression(pr.features[rows], pr.labels[rows]).grad(X[r, i])
        if k % tau == 0:  # q = 1: every average is a hub average, H = b 1^T with equal b
            X[:] = torch.einsum("rnd,n->rd", X, a)[:, None]
    with pytest.raises(ValueError, match="M=4 clients"):
        run_mllsgd(pr, H=H, hub_of=torch.tensor([0, 0, 1]), w=torch.ones(3), p=torch.ones(3),
                   eta=eta, K=K, q=1, tau=tau, x1=x1, replicas=R, generator=gen(14))


@pytest.fixture(scope="module")
def digits():
    pytest.importorskip("sklearn", reason="scikit-learn (fedbound[data]) provides the digits")
    from fedbound.sim.data import Dataset, load_digits

    whole = load_digits()
    return Dataset("digits", whole.features[:300], whole.labels[:300], whole.classes)  # fast


def test_network_clients_are_a_problem_of_the_whole_data_set(digits):
    torch.manual_seed(0)
    module = mlp(hidden=(8,))
    part = group_label_partition(digits.labels, (2, 2), gen(0))
    clients = NeuralClients(module, digits.features, digits.labels, part, batch=4, weights="data")
    shared = NeuralProblem(module, digits.features, digits.labels)
    x = clients.initial()[None] + 0.1 * torch.randn(2, clients.dim, generator=gen(1), dtype=DTYPE)
    assert torch.allclose(clients.loss(x), shared.loss(x), rtol=1e-12)
    value, grad_sq = clients.loss_and_grad_sq(x)
    assert torch.allclose(grad_sq, shared.grad(x).square().sum(-1), rtol=1e-10)
    groups = clients.group_grads(x[:, None].expand(2, 2, clients.dim), (2, 2))
    for g, members in enumerate(((0, 1), (2, 3))):  # group g's data only, its mean loss
        mine = torch.isin(part.owner, torch.tensor(members))
        alone = NeuralProblem(module, digits.features[mine], digits.labels[mine])
        assert torch.allclose(groups[:, g], alone.grad(x), rtol=1e-10, atol=1e-13)
    y = x[:, None].expand(2, 4, clients.dim).contiguous()
    g = clients.gradient_sampler(y.shape, gen(2))(y)
    assert torch.equal(g, clients.stochastic_worker_grads(y, gen(2)))


# ---------------------------------------------------------------- federated_problem


@pytest.mark.parametrize("model, split", [
    ("mlp", "shards"), ("mlp", ("dirichlet", 0.5)), ("mlp", ("labels", 3)), ("mlp", "group_labels"),
    ("mlp", ("fedml", 0.1)), ("logistic", ("dirichlet", 0.5)), ("cnn", "group_labels")])
def test_federated_problem_builds_every_split_and_model(digits, split, model):
    from fedbound.sim.federated import federated_problem

    problem, x1 = federated_problem(digits, model, split, (3, 3), seed=1, batch=2)
    assert problem.M == 6 and problem.partition.workers == 6 and x1.shape == (problem.dim,)
    again, x1_again = federated_problem(digits, model, split, (3, 3), seed=1, batch=2)
    assert torch.equal(problem.partition.owner, again.partition.owner) and torch.equal(x1, x1_again)
    trace = run_hfl(problem, sizes=(3, 3), alpha=0.05, x1=x1, replicas=1, t=[[1, 2]], generator=gen(0))
    assert torch.isfinite(trace.loss).all()


def test_federated_iid_split_is_the_shared_problem_bit_for_bit():
    pytest.importorskip("sklearn")
    from fedbound.sim.data import load_breast_cancer
    from fedbound.sim.federated import federated_problem

    problem, x1 = federated_problem("breast_cancer", "logistic", "iid", (2, 2), batch=4)
    data = load_breast_cancer()
    shared = LogisticRegression(data.features, data.labels.to(DTYPE) * 2 - 1, batch=4)
    runs = [run_hfl(p, sizes=(2, 2), alpha=0.5, x1=x1, replicas=3, t=[[2, 1], [1, 1]], generator=gen(5))
            for p in (problem, shared)]
    assert torch.equal(runs[0].loss, runs[1].loss) and torch.equal(runs[0].grad_sq_norm, runs[1].grad_sq_norm)
    clients, _ = federated_problem("breast_cancer", "logistic", "shards", (2, 2), batch=4)
    assert torch.equal(clients.loss(x1), shared.loss(x1))                  # f: the whole data set


def test_federated_problem_reads_mnist_and_cifar10_from_files(tmp_path):
    from test_data import write_cifar10, write_mnist

    from fedbound.sim.federated import federated_problem

    (tmp_path / "mnist").mkdir()
    write_mnist(tmp_path / "mnist", n=(40, 4))
    write_cifar10(tmp_path / "cifar")
    mnist, _ = federated_problem("mnist", "cnn", ("labels", 5), (2,), data_dir=tmp_path / "mnist")
    cifar, _ = federated_problem("cifar10", "cnn", "shards", (2,), data_dir=tmp_path / "cifar")
    assert mnist.features.shape[1] == 784 and cifar.features.shape[1] == 3072
    with pytest.raises(ValueError, match="data_dir"):
        federated_problem("mnist")
    with pytest.raises(ValueError, match="split="):
        federated_problem("breast_cancer", split=("dirichlet",))


# ---------------------------------------------------------------- AFL


def afl_loop(pr, schedule, eta, eta_L, x0, seed, algorithm):
    """AFA-CD / AFA-CS (Yang et al. 2022, Algorithms 2 and 3), one replica, worker and local
    step at a time, worker i's mini-batches from its own shard on the simulator's draws (one
    rand [R, M, batch] per local step of the round)."""
    g_ = gen(seed)
    R, T, M = schedule.arrivals.shape
    table, counts = pr.partition.table()

    def local(x, i, K, draws, r):
        total = torch.zeros(pr.dim, dtype=DTYPE)
        for j in range(K):
            rows = table[i, (draws[j][r, i] * counts[i]).floor().long()]
            g = LogisticRegression(pr.features[rows], pr.labels[rows]).grad(x)
            total, x = total + g, x - eta_L * g
        return total / K

    def drawn(K):
        return [torch.rand(R, M, pr.batch, generator=g_, dtype=DTYPE) for _ in range(int(K.max()))]

    memory = None
    if algorithm == "cs":
        draws = drawn(schedule.K0)
        memory = [[local(x0, i, int(schedule.K0[r, i]), draws, r) for i in range(M)] for r in range(R)]
    models, out = [[x0.clone()] for _ in range(R)], torch.empty(R, T, dtype=DTYPE)
    for t in range(T):
        draws = drawn(schedule.K[:, t])
        for r in range(R):
            x = models[r][t]
            out[r, t] = pr.grad(x).square().sum()
            updates = []
            for i in range(M):
                if schedule.arrivals[r, t, i]:
                    start = models[r][t - int(schedule.delays[r, t, i])]
                    updates.append(local(start, i, int(schedule.K[r, t, i]), draws, r))
                    if memory is not None:
                        memory[r][i] = updates[-1]
            G_t = sum(memory[r]) / M if memory is not None else sum(updates) / len(updates)
            models[r].append(x - eta * eta_L * G_t)
    return out


@pytest.mark.parametrize("algorithm", ["cd", "cs"])
@pytest.mark.parametrize("split", ["dirichlet", "group_labels"])
def test_afl_on_partitioned_clients_equals_a_per_worker_loop(algorithm, split):
    from fedbound.sim.afl import draw_schedule, run_afl

    features, signs, classes = binary_data(17, n=60)
    part = (dirichlet_partition(classes, 4, 2.0, gen(18)) if split == "dirichlet"
            else group_label_partition(classes, (2, 2), gen(18)))
    pr = LogisticClients(features, signs, part, batch=3)           # f = (1/M) sum_i f_i
    p = torch.full((4,), 0.25, dtype=DTYPE)
    x = torch.randn(2, pr.dim, generator=gen(1), dtype=DTYPE)
    assert torch.allclose(pr.grad(x), sum(p[k] * own(pr, k).grad(x) for k in range(4)), rtol=1e-12)
    sch = draw_schedule(M=4, m=2, T=6, replicas=2, generator=gen(19), K=(1, 3), tau=2)
    kw = dict(eta=1.5, eta_L=0.2, x0=torch.full((pr.dim,), 0.1, dtype=DTYPE))
    tr = run_afl(pr, algorithm=algorithm, m=2, T=6, replicas=2, schedule=sch, generator=gen(20), **kw)
    ref = afl_loop(pr, sch, seed=20, algorithm=algorithm, **kw)
    assert torch.allclose(tr.grad_sq_norm, ref, rtol=1e-10, atol=1e-14)


def test_afl_runs_network_clients_on_a_group_label_split(digits):
    from fedbound.sim.afl import run_afl
    from fedbound.sim.federated import federated_problem

    clients, x0 = federated_problem(digits, "mlp", "group_labels", (2, 2), batch=4, weights="uniform",
                                    hidden=(8,))
    assert isinstance(clients, NeuralClients) and clients.weights == "uniform"
    kw = dict(algorithm="cd", m=2, T=4, eta=1.0, eta_L=0.1, x0=x0, replicas=2, K=2)
    a, b = run_afl(clients, generator=gen(3), **kw), run_afl(clients, generator=gen(3), **kw)
    assert torch.equal(a.grad_sq_norm, b.grad_sq_norm) and torch.isfinite(a.loss).all()
