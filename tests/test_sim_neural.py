"""fedbound.sim.neural: vmapped losses and gradients of flat network parameters, against per-model
autograd on nn.Module copies, finite differences, and the algorithms of sim run on them."""

import copy
import sys
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch.nn.utils import parameters_to_vector, vector_to_parameters

from fedbound.sim import run_afl, run_hfl, run_mllsgd
from fedbound.sim.data import Partition, label_partition, load_digits
from fedbound.sim.neural import NeuralClients, NeuralProblem, mlp, small_cnn
from fedbound.sim.tdcd import Layout, ModuleModel, run_tdcd

F64 = torch.float64


def gen(seed):
    return torch.Generator().manual_seed(seed)


@pytest.fixture(scope="module")
def digits():
    data = load_digits()
    return data.features[:240], data.labels[:240]


def network(kind, seed=0):
    torch.manual_seed(seed)
    return mlp(64, (12,), 10) if kind == "mlp" else small_cnn(10, channels=3)


def reference_loss_and_grad(module, x, inputs, targets):
    """Mean cross-entropy and its gradient at flat parameters x [d] on a float64 copy of
    ``module``, by torch.autograd.grad: one model at a time, no torch.func."""
    model = copy.deepcopy(module).to(F64)
    vector_to_parameters(x, model.parameters())
    loss = torch.nn.functional.cross_entropy(model(inputs), targets)
    grads = torch.autograd.grad(loss, list(model.parameters()))
    return loss.detach(), parameters_to_vector(grads)


def random_models(problem, shape, seed):
    """Models near the module's initial parameters, [*shape, d]."""
    noise = torch.randn(*shape, problem.dim, generator=gen(seed), dtype=F64)
    return problem.initial() + 0.3 * noise


@pytest.mark.parametrize("kind", ["mlp", "cnn"])
def test_vmapped_loss_and_grad_equal_a_loop_of_autograd_on_module_copies(kind, digits):
    X, y = digits
    if kind == "cnn":  # a smaller set: the reference convolutions are slow in float64
        X, y = X[:80], y[:80]
    module = network(kind)
    problem = NeuralProblem(module, X, y)
    x = random_models(problem, (2, 2), seed=1)
    loss, grad = problem.loss(x), problem.grad(x)
    value, grad_sq = problem.loss_and_grad_sq(x)
    assert loss.shape == (2, 2) and grad.shape == x.shape
    for i in range(2):
        for j in range(2):
            ref_loss, ref_grad = reference_loss_and_grad(module, x[i, j], X, y)
            torch.testing.assert_close(loss[i, j], ref_loss, rtol=1e-12, atol=0)
            torch.testing.assert_close(grad[i, j], ref_grad, rtol=1e-10, atol=1e-13)
            torch.testing.assert_close(value[i, j], ref_loss, rtol=1e-12, atol=0)
            torch.testing.assert_close(grad_sq[i, j], ref_grad.square().sum(), rtol=1e-10, atol=0)


@pytest.mark.parametrize("kind", ["mlp", "cnn"])
def test_stochastic_grad_is_the_gradient_on_the_drawn_minibatch(kind, digits):
    X, y = digits
    module = network(kind)
    problem = NeuralProblem(module, X, y, batch=5)
    x = random_models(problem, (2, 2), seed=2)
    g = problem.stochastic_grad(x, gen(7))
    idx = torch.randint(X.shape[0], (2, 2, 5), generator=gen(7))  # the documented draw
    for i in range(2):
        for j in range(2):
            _, ref = reference_loss_and_grad(module, x[i, j], X[idx[i, j]], y[idx[i, j]])
            torch.testing.assert_close(g[i, j], ref, rtol=1e-10, atol=1e-13)


@pytest.mark.parametrize("kind", ["mlp", "cnn"])
def test_gradient_matches_central_finite_differences(kind, digits):
    X, y = digits
    problem = NeuralProblem(network(kind), X[:60], y[:60])
    x = random_models(problem, (), seed=3)
    directions = torch.randn(4, problem.dim, generator=gen(4), dtype=F64)
    h = 1e-5
    plus, minus = problem.loss(x + h * directions), problem.loss(x - h * directions)
    slopes = (plus - minus) / (2 * h)
    torch.testing.assert_close(slopes, directions @ problem.grad(x), rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("kind", ["mlp", "cnn"])
def test_same_seed_same_bits_and_chunking_changes_nothing(digits, kind):
    X, y = digits
    problem = NeuralProblem(network(kind), X, y, batch=4)
    chunked = NeuralProblem(network(kind), X, y, batch=4, chunk_size=2)
    x = random_models(problem, (3, 2), seed=5)
    first, again = problem.stochastic_grad(x, gen(9)), problem.stochastic_grad(x, gen(9))
    assert torch.equal(first, again)
    assert not torch.equal(first, problem.stochastic_grad(x, gen(10)))
    torch.testing.assert_close(chunked.stochastic_grad(x, gen(9)), first, rtol=1e-12, atol=1e-15)
    # over the whole data set, 3 chunks of 2 models written into one result each (the CNN's
    # loss alone takes its convolutions as dense products)
    for want in ("loss", "grad", "loss_and_grad_sq"):
        torch.testing.assert_close(getattr(chunked, want)(x), getattr(problem, want)(x), rtol=1e-12,
                                   atol=1e-15)


def mllsgd_run(problem, seed):
    return run_mllsgd(problem, H=torch.tensor([[0.5, 0.5], [0.5, 0.5]], dtype=F64),
                      hub_of=torch.tensor([0, 0, 1, 1]), w=torch.ones(4), p=torch.full((4,), 0.8),
                      eta=0.3, K=24, q=2, tau=3, x1=problem.initial(), replicas=2,
                      generator=gen(seed))


def test_run_mllsgd_trains_the_mlp_on_digits_and_repeats_bit_for_bit(digits):
    X, y = digits
    problem = NeuralProblem(network("mlp"), X, y, batch=8)
    trace = mllsgd_run(problem, seed=11)
    assert not trace.diverged.any()
    assert (trace.loss[:, -1] < 0.6 * trace.loss[:, 0]).all(), trace.loss[:, [0, -1]]
    again = mllsgd_run(problem, seed=11)
    assert torch.equal(trace.loss, again.loss) and torch.equal(trace.grad_sq_norm, again.grad_sq_norm)


def test_run_hfl_trains_the_mlp_on_digits(digits):
    X, y = digits
    module = network("mlp")
    problem = NeuralProblem(module, X, y, batch=8)
    trace = run_hfl(problem, sizes=[2, 3], alpha=1.0, x1=problem.initial(), replicas=2,
                    generator=gen(12), t=torch.tensor([[2, 3]] * 6))
    assert not trace.diverged.any()
    assert (trace.final_loss < 0.6 * trace.loss[:, 0]).all(), trace.loss[:, [0, -1]]
    start_loss, start_grad = reference_loss_and_grad(module, problem.initial(), X, y)
    torch.testing.assert_close(trace.loss[:, 0], start_loss.expand(2), rtol=1e-12, atol=0)
    torch.testing.assert_close(trace.grad_sq_norm[:, 0], start_grad.square().sum().expand(2),
                               rtol=1e-10, atol=0)


def test_neural_clients_gradients_are_per_worker_autograd_and_f_is_their_mean(digits):
    X, y = digits
    module = network("mlp")
    part = label_partition(y, 4, 3, gen(13))
    clients = NeuralClients(module, X, y, part, batch=3)
    x = random_models(clients, (2, 4), seed=14)
    worker_grads = clients.worker_grads(x)
    refs = torch.stack([torch.stack([
        reference_loss_and_grad(module, x[r, i], X[part.owner == i], y[part.owner == i])[1]
        for i in range(4)]) for r in range(2)])
    torch.testing.assert_close(worker_grads, refs, rtol=1e-10, atol=1e-13)
    centre = x[:, 0]
    f_i = [reference_loss_and_grad(module, centre[0], X[part.owner == i], y[part.owner == i])
           for i in range(4)]
    torch.testing.assert_close(clients.loss(centre[0]), sum(v for v, _ in f_i) / 4, rtol=1e-12, atol=0)
    torch.testing.assert_close(clients.grad(centre[0]), sum(g for _, g in f_i) / 4,
                               rtol=1e-10, atol=1e-13)


def test_neural_clients_draw_each_workers_minibatch_from_its_own_samples(digits):
    X, y = digits
    module = network("mlp")
    part = label_partition(y, 3, 4, gen(15))
    clients = NeuralClients(module, X, y, part, batch=4)
    x = random_models(clients, (2, 3), seed=16)
    g = clients.stochastic_worker_grads(x, gen(17))
    u = torch.rand(2, 3, 4, generator=gen(17), dtype=F64)  # the documented draw
    for i in range(3):
        mine = torch.nonzero(part.owner == i).flatten()
        rows = mine[torch.floor(u[:, i] * mine.numel()).long()]
        for r in range(2):
            _, ref = reference_loss_and_grad(module, x[r, i], X[rows[r]], y[rows[r]])
            torch.testing.assert_close(g[r, i], ref, rtol=1e-10, atol=1e-13)


@pytest.mark.parametrize("algorithm", ["cd", "cs"])
def test_run_afl_trains_on_a_label_partition(algorithm, digits):
    X, y = digits
    clients = NeuralClients(network("mlp"), X, y, label_partition(y, 5, 4, gen(18)), batch=8)
    trace = run_afl(clients, algorithm=algorithm, m=3, T=10, eta=1.0, eta_L=0.3, x0=clients.initial(),
                    replicas=2, generator=gen(19), K=2, tau=2)
    assert not trace.diverged.any()
    assert (trace.loss[:, -1] < 0.7 * trace.loss[:, 0]).all(), trace.loss[:, [0, -1]]


def test_run_tdcd_trains_per_silo_networks_on_a_vertical_split_of_digits(digits):
    """TDCD's own ModuleModel with sim.data's vertical split: two silos of 32 pixels."""
    X, y = digits
    from fedbound.sim.data import vertical_split
    columns, blocks = vertical_split(64, 2)
    labels = torch.where(y % 2 == 0, 1.0, -1.0).to(F64)  # even digit or not
    layout = Layout(blocks, (1, 1), X.shape[0], 16)
    torch.manual_seed(0)
    model = ModuleModel([mlp(32, (6,), 1), mlp(32, (6,), 1)], X[:, columns], labels, layout,
                        loss="logistic")
    trace = run_tdcd(model, eta=0.2, Q=2, rounds=10, theta0=model.initial(), replicas=2,
                     generator=gen(20))
    assert (trace.loss[:, -1] < 0.5 * trace.loss[:, 0]).all(), trace.loss[:, [0, -1]]


@pytest.mark.parametrize("make, match", [
    (lambda X, y: NeuralProblem(torch.nn.Tanh(), X, y), "no parameters"),
    (lambda X, y: NeuralProblem(mlp(64, (4,), 3), X, y), "labels reach 9"),
    (lambda X, y: NeuralProblem(mlp(), X, y.to(F64)), "labels"),
    (lambda X, y: NeuralProblem(mlp(), X, y, batch=0), "batch=0"),
    (lambda X, y: NeuralProblem(mlp(), X, y, chunk_size=0), "chunk_size=0"),
    (lambda X, y: NeuralProblem("mlp", X, y), "module="),
    (lambda X, y: NeuralClients(mlp(), X, y, Partition(torch.zeros(y.numel(), dtype=torch.int64), 2)),
     r"workers \[1\] without samples"),
])
def test_bad_input_names_the_parameter(make, match, digits):
    with pytest.raises(ValueError, match=match):
        make(*digits)


def test_wrong_model_shape_is_refused(digits):
    problem = NeuralProblem(network("mlp"), *digits)
    with pytest.raises(ValueError, match=r"x must have shape \[\.\.\., "):
        problem.loss(torch.zeros(3, problem.dim + 1, dtype=F64))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_gives_the_cpu_numbers_with_a_cpu_generator(digits):
    X, y = digits
    cpu = NeuralProblem(network("cnn"), X, y, batch=6)
    cuda = cpu.to("cuda")
    assert cuda.device.type == "cuda" and cuda.module.training is False
    x = random_models(cpu, (3, 2), seed=21)
    torch.testing.assert_close(cuda.grad(x.cuda()).cpu(), cpu.grad(x), rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(cuda.stochastic_grad(x.cuda(), gen(22)).cpu(),
                               cpu.stochastic_grad(x, gen(22)), rtol=1e-9, atol=1e-12)
    on_gpu = mllsgd_run(NeuralProblem(network("mlp"), X, y, batch=8, device="cuda"), seed=23)
    on_cpu = mllsgd_run(NeuralProblem(network("mlp"), X, y, batch=8), seed=23)
    torch.testing.assert_close(on_gpu.loss, on_cpu.loss, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("net", ["mlp", "cnn"])
def test_the_benchmarks_module_loop_computes_the_vectorised_gradients(net):
    """benchmarks/bench_neural.py times a loop of nn.Module copies against
    NeuralProblem.stochastic_grad: both must compute the same gradients."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # benchmarks/ is not installed
    from benchmarks.bench_neural import loop_step, workload

    problem, models, copies = workload(net, 3, "cpu")
    assert len(copies) == 3 and all(module is not problem.module for module in copies)
    torch.testing.assert_close(loop_step(problem, copies, gen(24)),
                               problem.stochastic_grad(models, gen(24)), rtol=1e-10, atol=1e-12)


def test_the_pooled_group_mean_of_clients_gradients_is_the_generic_one(digits):
    """NeuralProblem's group mean over c clients (Ali & Arafa 2025, eqs. (5)-(6)) draws the
    indices the generic Problem.mean_gradient_sampler draws and gives its numbers to
    round-off, for unequal groups (clients beyond c unused)."""
    from fedbound.sim.problems import Problem

    X, y = digits
    problem = NeuralProblem(mlp(64, (6,), 10), X[:200], y[:200], batch=3)
    shape, counts = (2, 3, 4, problem.dim), torch.tensor([4, 1, 3])
    models = problem.initial() + 0.1 * torch.randn(2, 3, problem.dim, dtype=F64,
                                                    generator=torch.Generator().manual_seed(1))
    pooled = problem.mean_gradient_sampler(shape, counts, torch.Generator().manual_seed(5))
    generic = Problem.mean_gradient_sampler(problem, shape, counts, torch.Generator().manual_seed(5))
    for _ in range(2):
        torch.testing.assert_close(pooled(models), generic(models), rtol=1e-12, atol=1e-14)


def test_accuracy_is_the_share_of_samples_whose_largest_logit_is_the_label(digits):
    """_FlatModule.accuracy against the module's own forward pass, model by model."""
    X, y = digits
    problem = NeuralProblem(network("mlp"), X, y)
    models = problem.initial() + 0.3 * torch.randn(2, 3, problem.dim, dtype=F64,
                                                    generator=torch.Generator().manual_seed(2))
    got = problem.accuracy(models, X[:100], y[:100])
    assert got.shape == (2, 3)
    for idx in ((0, 0), (1, 2)):
        module = copy.deepcopy(problem.module)
        vector_to_parameters(models[idx], module.parameters())
        with torch.no_grad():
            expected = (module(X[:100].to(F64)).argmax(-1) == y[:100]).double().mean()
        assert float(got[idx]) == pytest.approx(float(expected), abs=1e-15)


@pytest.mark.parametrize("kind", ["mlp", "cnn"])
def test_clients_pooled_group_mean_is_the_generic_one(kind, digits):
    """NeuralClients' group mean (each group's model on its clients' pooled mini-batches) draws
    what ClientProblem.mean_gradient_sampler draws and gives its numbers to round-off, for
    unequal groups, batched leading dimensions and a CommonDraws batch."""
    from fedbound.sim.clients import ClientProblem
    from fedbound.sim.problems import CommonDraws

    X, y = digits
    partition = label_partition(y, 7, 3, gen(0))
    module = mlp(64, (6,), 10) if kind == "mlp" else small_cnn(10, channels=2)
    problem = NeuralClients(module, X, y, partition, batch=2)
    counts = torch.tensor([4, 1, 2])
    for lead, draws in (((2, 3), gen), ((2, 3), lambda s: CommonDraws(gen(s), 2))):
        shape = (*lead, 3, 4, problem.dim)
        models = problem.initial() + 0.1 * torch.randn(*lead, 3, problem.dim, dtype=F64,
                                                        generator=gen(1))
        pooled = problem.mean_gradient_sampler(shape, counts, draws(5))
        generic = ClientProblem.mean_gradient_sampler(problem, shape, counts, draws(5))
        some = problem.mean_gradient_sampler(shape, counts, draws(5))  # the rows that step only
        rows = torch.tensor([0, 4, 5, 17])
        for _ in range(2):
            every = generic(models)
            torch.testing.assert_close(pooled(models), every, rtol=1e-12, atol=1e-14)
            torch.testing.assert_close(some(models, None, rows), every.reshape(-1, problem.dim)[rows],
                                       rtol=1e-12, atol=1e-14)
        assert some(models, None, rows[:0]).shape == (0, problem.dim)


@st.composite
def dense_networks(draw):
    """A Linear, or a Sequential of Linear and Tanh layers (biases or not, tanh anywhere,
    repeated or last), its input width, and a leading shape of models."""
    widths = draw(st.lists(st.integers(1, 6), min_size=1, max_size=3))
    features, classes = draw(st.integers(1, 5)), draw(st.integers(2, 4))
    torch.manual_seed(draw(st.integers(0, 2**16)))
    if len(widths) == 1 and draw(st.booleans()):
        return torch.nn.Linear(features, classes, bias=draw(st.booleans())), features, classes
    layers, into = [], features
    for out in [*widths[1:], classes]:
        if draw(st.booleans()):
            layers.append(torch.nn.Tanh())
        layers.append(torch.nn.Linear(into, out, bias=draw(st.booleans())))
        into = out
        if draw(st.integers(0, 2)) == 0:
            layers.append(torch.nn.Tanh())
    return torch.nn.Sequential(*layers), features, classes


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dense_networks(), st.sampled_from([(), (3,), (2, 3)]), st.integers(1, 5), st.integers(0, 2**16),
       st.booleans())
def test_the_closed_form_of_linear_and_tanh_networks_is_vmapped_autograd(net, lead, b, seed, shared):
    """DenseNetwork's loss and gradient against torch.func's vmapped grad_and_value of the
    weighted loss, to round-off in float64, for random networks, leading shapes of models,
    weights and data shared by every model or one set per model."""
    module, features, classes = net
    g = gen(seed)
    n = 7
    X = torch.randn(n, features, dtype=F64, generator=g)
    labels = torch.randint(classes, (n,), generator=g)
    problem = NeuralProblem(module, X, labels)
    assert problem.dense is not None
    x = problem.initial() + torch.randn(*lead, problem.dim, dtype=F64, generator=g)
    flat = x.reshape(-1, problem.dim)
    if shared:
        data = (X[:b], labels[:b], torch.rand(b, dtype=F64, generator=g))
        dims = (None, None, None)
    else:
        idx = torch.randint(n, (flat.shape[0], b), generator=g)
        data = (X[idx], labels[idx], torch.rand(flat.shape[0], b, dtype=F64, generator=g))
        dims = (0, 0, 0)
    given = (X.clone(), x.clone(), data[0].clone())
    grads, values = problem.evaluated("both", x, data, dims)
    from torch.func import grad_and_value

    ref_grads, ref_values = problem.batched(grad_and_value(problem.weighted_loss), x, data, dims)
    torch.testing.assert_close(values, ref_values, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(grads, ref_grads, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(problem.evaluated("loss", x, data, dims), ref_values, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(problem.evaluated("grad", x, data, dims), ref_grads, rtol=1e-12, atol=1e-14)
    # the forward pass works in place on its own activations only: the samples and models as given
    assert all(torch.equal(a, b) for a, b in zip(given, (X, x, data[0]), strict=True))


def test_the_closed_form_is_only_for_plain_linear_tanh_and_small_cnn_layers(digits):
    """Other modules (strided convolutions, max pooling, another activation, a subclass, a
    hook) keep torch.func."""
    X, y = digits
    assert NeuralProblem(mlp(64, (5,), 10), X, y).dense is not None
    assert NeuralProblem(torch.nn.Linear(64, 10), X, y).dense is not None
    assert NeuralProblem(small_cnn(10, channels=2), X, y).dense is not None
    for layer in (torch.nn.Conv2d(1, 2, 3, stride=2), torch.nn.MaxPool2d(2)):
        other = torch.nn.Sequential(torch.nn.Unflatten(1, (1, 8, 8)), layer, torch.nn.Flatten(),
                                    torch.nn.LazyLinear(10))
        other(X[:1].float())  # the lazy layer takes its size
        assert NeuralProblem(other, X, y).dense is None
    relu = torch.nn.Sequential(torch.nn.Linear(64, 5), torch.nn.ReLU(), torch.nn.Linear(5, 10))
    assert NeuralProblem(relu, X, y).dense is None

    class Scaled(torch.nn.Linear):
        def forward(self, inputs):
            return 2 * super().forward(inputs)

    assert NeuralProblem(Scaled(64, 10), X, y).dense is None
    hooked = mlp(64, (5,), 10)
    hooked[0].register_forward_hook(lambda module, args, out: out * 2)
    problem = NeuralProblem(hooked, X, y)
    assert problem.dense is None
    x = problem.initial()
    _, ref = reference_loss_and_grad(hooked, x, X, y)
    torch.testing.assert_close(problem.grad(x), ref, rtol=1e-10, atol=1e-13)


@pytest.mark.parametrize("channels,shared,b", [(2, True, 1), (3, True, 4), (2, False, 1), (3, False, 3)])
def test_the_closed_form_of_the_small_cnn_is_vmapped_autograd(channels, shared, b, digits):
    """DenseNetwork's convolutions (unfold, a product per model, fold back) and 2 x 2 average
    pooling against torch.func's vmapped grad_and_value of the weighted loss, to round-off
    in float64: data shared by every model or one set per model, one sample or several."""
    X, y = digits
    problem = NeuralProblem(small_cnn(10, channels=channels), X, y)
    g = gen(channels + b)
    x = problem.initial() + 0.3 * torch.randn(2, 3, problem.dim, dtype=F64, generator=g)
    if shared:
        data = (problem.features[:b], problem.labels[:b], torch.rand(b, dtype=F64, generator=g))
        dims = (None,) * 3
    else:
        idx = torch.randint(problem.n, (6, b), generator=g)
        data = (problem.features[idx], problem.labels[idx], torch.rand(6, b, dtype=F64, generator=g))
        dims = (0,) * 3
    grads, values = problem.evaluated("both", x, data, dims)
    from torch.func import grad_and_value

    ref_grads, ref_values = problem.batched(grad_and_value(problem.weighted_loss), x, data, dims)
    torch.testing.assert_close(values, ref_values, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(grads, ref_grads, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("channels,image,samples", [(2, (1, 8, 8), 64), (3, (2, 4, 6), 30),
                                                     (1, (3, 4, 4), 200)])
def test_a_convolution_without_backward_is_its_dense_matrix_to_round_off(channels, image, samples,
                                                                        monkeypatch):
    """A loss alone over at least H W samples per model takes each convolution as one product
    with its dense [out H W, C H W] matrix (sim.neural._dense_conv), not unfold's patches:
    the same losses as the pass that keeps the patches for a gradient, and as the module."""
    g = gen(channels)
    X = torch.randn(samples, image[0] * image[1] * image[2], dtype=F64, generator=g)
    y = torch.randint(10, (samples,), generator=g)
    net = small_cnn(10, channels=channels, image=image)
    problem = NeuralProblem(net, X, y)
    x = problem.initial() + 0.3 * torch.randn(5, problem.dim, dtype=F64, generator=g)
    import fedbound.sim.neural as neural

    original, calls = neural._dense_conv, []
    monkeypatch.setattr(neural, "_dense_conv", lambda *a: calls.append(1) or original(*a))
    alone = problem.loss(x)
    assert len(calls) == 2                                   # both convolutions, once
    with_patches, _ = problem.loss_and_grad_sq(x)
    torch.testing.assert_close(alone, with_patches, rtol=1e-13, atol=0)
    ref = torch.stack([reference_loss_and_grad(net, x[m], X, y)[0] for m in range(5)])
    torch.testing.assert_close(alone, ref, rtol=1e-12, atol=1e-14)


def test_the_closed_form_clients_gradients_are_the_vmapped_ones(digits):
    """NeuralClients with the MLP: worker, group and stochastic worker gradients by the closed
    form against the same problem with the closed form switched off (torch.func), to
    round-off; the same seed gives the same bits."""
    X, y = digits
    partition = label_partition(y, 5, 3, gen(0))
    problem = NeuralClients(mlp(64, (7,), 10), X, y, partition, batch=3)
    vmapped = NeuralClients(mlp(64, (7,), 10), X, y, partition, batch=3)
    vmapped.dense = None
    x = problem.initial() + 0.2 * torch.randn(2, 5, problem.dim, dtype=F64, generator=gen(3))
    close = dict(rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(problem.worker_grads(x), vmapped.worker_grads(x), **close)
    torch.testing.assert_close(problem.group_grads(x[:, :2], [3, 2]), vmapped.group_grads(x[:, :2], [3, 2]),
                               **close)
    first = problem.stochastic_worker_grads(x, gen(4))
    torch.testing.assert_close(first, vmapped.stochastic_worker_grads(x, gen(4)), **close)
    assert torch.equal(first, problem.stochastic_worker_grads(x, gen(4)))
    sample = problem.worker_gradient_sampler(x.shape, gen(4))  # into one reused buffer
    drawn, again = sample(x), sample(x)
    assert drawn.data_ptr() == again.data_ptr()
    assert torch.equal(problem.worker_gradient_sampler(x.shape, gen(4))(x), first)
    for name in ("loss", "grad"):
        torch.testing.assert_close(getattr(problem, name)(x), getattr(vmapped, name)(x), **close)


@pytest.mark.parametrize("kind", ["mlp", "cnn"])
def test_chunks_of_a_memory_budget_give_the_same_numbers(kind, digits, monkeypatch):
    """With a tiny CHUNK_BYTES the closed form (MLP) or torch.func (CNN) takes a model or a
    few at a time: the same losses and gradients to round-off as all the models at once."""
    import fedbound.sim.neural as neural

    X, y = digits
    X, y = X[:60], y[:60]
    module = mlp(64, (7,), 10) if kind == "mlp" else small_cnn(10, channels=1)  # widest: 64, 8x8
    problem = NeuralProblem(module, X, y, batch=3)
    assert problem.widest == {"mlp": 10, "cnn": 64}[kind]
    x = problem.initial() + 0.2 * torch.randn(5, 2, problem.dim, dtype=F64, generator=gen(3))
    whole = problem.loss_and_grad_sq(x), problem.grad(x), problem.stochastic_grad(x, gen(1))
    flat, every_sample = x.reshape(-1, problem.dim), ((X,), (None,))
    assert problem.models_within(flat, *every_sample) == 10
    monkeypatch.setattr(neural, "CHUNK_BYTES", 64 * problem.widest * 3 * 7)  # 7 models of 3 samples
    assert problem.models_within(flat, *every_sample) == 1
    chunked = problem.loss_and_grad_sq(x), problem.grad(x), problem.stochastic_grad(x, gen(1))
    torch.testing.assert_close(chunked, whole, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("closed_form", [True, False])
def test_run_hfl_on_a_network_steps_the_stepping_groups_only_to_the_same_numbers(closed_form, digits):
    """NeuralProblem's group means with ``rows`` (run_hfl recording the loss only: the groups
    that step at each local iteration, unequal counts, their steps written by the closed
    form's backward pass, or by torch.addcmul after torch.func's gradients for a module
    without one) against every group's (record_grad), to round-off; the same seed, the same
    bits."""
    X, y = digits
    module = network("mlp")
    if not closed_form:  # a hook: no closed form (DenseNetwork.of), the same function
        module[0].register_forward_hook(lambda m, args, out: out)
    problem = NeuralProblem(module, X, y, batch=3)
    assert (problem.dense is not None) == closed_form
    t = torch.tensor([[[2, 3], [1, 2]], [[3, 2], [3, 1]], [[1, 1], [2, 4]]])  # [R, U, G]

    def run(record_grad):
        return run_hfl(problem, sizes=[2, 3], alpha=0.5, x1=problem.initial(), replicas=3,
                       generator=gen(12), t=t, record_grad=record_grad)

    some, every = run(False), run(True)
    torch.testing.assert_close(some.x_final, every.x_final, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(some.loss, every.loss, rtol=1e-12, atol=0)
    assert torch.equal(run(False).x_final, some.x_final)
    assert not torch.equal(some.x_final[0], some.x_final[1])
