"""Neural networks as simulator problems: any ``torch.nn.Module`` with a cross-entropy loss.

The module's parameters (``named_parameters`` order) are flattened to one vector of
``dim`` entries per model, so the algorithms of ``sim`` run on a network exactly as on a
quadratic: a batch of models is a tensor [..., dim]. Losses and gradients of all models
at once go through ``torch.func.functional_call`` vmapped over the leading dimensions
(``torch.func.grad`` for gradients): one call for every replica and worker, never a
Python loop over them. A network of ``Linear`` and ``Tanh`` layers (:func:`mlp`, and one
``Linear``: multinomial logistic regression), or of the layers of :func:`small_cnn`, has its
forward and backward pass written out instead (:class:`DenseNetwork`: the same numbers to
round-off, several times faster on small networks, where the vmapped autograd's overhead
per call dominates, and on CPU than the vmapped convolutions, which torch runs group by
group).

- :class:`NeuralProblem`: a ``sim.problems.Problem`` (MLL-SGD, HFL): F(x) is the mean
  cross-entropy over a data set held as tensors; the stochastic gradient is the gradient
  of the mean loss over ``batch`` samples drawn uniformly with replacement, one
  ``randint`` draw [..., batch] from the generator per call, the mini-batch g(x; xi) of
  Castiglia et al. 2021, eq. (1) and Assumption 1c.
- :class:`NeuralClients`: the client interface of ``sim.afl.run_afl`` (AFA-CD, AFA-CS)
  with each worker's own data (a ``sim.data.Partition``): f(x) = (1/M) sum_i f_i(x), f_i
  the mean loss over worker i's samples (the objective of Yang et al. 2022, Section 3).
- :func:`mlp` and :func:`small_cnn`: two small architectures for the 64 features of the
  8x8 digits (``sim.data.load_digits``), with smooth activations (tanh, average pooling)
  so that the gradient is Lipschitz (Assumption 1a of Castiglia et al. 2021).

No constant is known for a general network: ``L``, ``beta``, ``sigma`` and ``G`` are None
(they must be estimated); ``f_inf = 0`` is a certified lower bound (cross-entropy >= 0).
The module runs in eval mode, float64, with its buffers held constant, so the loss is a
deterministic function of the flat parameters: the same seed gives the same numbers, bit
for bit. ``chunk_size`` bounds how many models one call evaluates at a time (memory; by
default as many as keep a call's activations near :data:`CHUNK_BYTES`); the numbers do not
depend on it beyond round-off.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence

import torch
from torch.func import functional_call, grad, grad_and_value, vmap

from fedbound.sim.clients import ClientProblem, checked_partition
from fedbound.sim.data import Partition, ShardRows
from fedbound.sim.problems import DTYPE, Problem, rand, randint


def mlp(in_features: int = 64, hidden: Sequence[int] = (32,), classes: int = 10) -> torch.nn.Module:
    """Linear layers of widths ``in_features``, ``hidden``..., ``classes`` with tanh between."""
    widths = [in_features, *hidden, classes]
    layers: list[torch.nn.Module] = []
    for i, (a, b) in enumerate(zip(widths[:-1], widths[1:], strict=True)):
        layers.append(torch.nn.Linear(a, b))
        if i < len(widths) - 2:
            layers.append(torch.nn.Tanh())
    return torch.nn.Sequential(*layers)


def small_cnn(classes: int = 10, channels: int = 8,
              image: tuple[int, int, int] = (1, 8, 8)) -> torch.nn.Module:
    """For images of ``image`` = (colours, height, width) given as flat features (8x8 single
    channel: the digits; (1, 28, 28): MNIST; (3, 32, 32): CIFAR-10): conv 3x3
    (``channels``), tanh, 2x2 average pooling, conv 3x3 (2 ``channels``), tanh, 2x2 average
    pooling, linear.
    (Its gradients are written out, :class:`DenseNetwork`. Vmapped over models, a
    convolution becomes one grouped convolution; on CPU in float64 torch runs it group by
    group, so the vmapped CNN is no faster than a loop there: see benchmarks/bench_neural.py.)"""
    c, (colours, height, width) = channels, image
    return torch.nn.Sequential(
        torch.nn.Unflatten(1, tuple(image)),
        torch.nn.Conv2d(colours, c, 3, padding=1), torch.nn.Tanh(), torch.nn.AvgPool2d(2),
        torch.nn.Conv2d(c, 2 * c, 3, padding=1), torch.nn.Tanh(), torch.nn.AvgPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(2 * c * (height // 4) * (width // 4), classes),
    )


def cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Per-sample CE = logsumexp(logits) - logits[target], [batch]: the numbers of
    ``torch.nn.functional.cross_entropy(reduction="none")`` up to round-off, written with
    ``logsumexp`` and ``gather`` because the vmapped backward of ``log_softmax`` is several
    times slower on CPU."""
    return torch.logsumexp(logits, dim=-1) - logits.gather(-1, targets[:, None]).squeeze(-1)


def _positive_int(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name}={value!r} must be an integer >= 1")
    return value


#: bytes of activations one call holds at most, about (``_FlatModule.models_within``)
CHUNK_BYTES = 64 * 2**20


class DenseNetwork:
    """Closed-form outputs, cross-entropy losses and gradients of a network of
    ``torch.nn.Linear`` and ``torch.nn.Tanh`` layers (:func:`mlp`; one ``Linear``:
    multinomial logistic regression), or with the convolutions, 2 x 2 average pooling and
    reshapes of :func:`small_cnn` (:meth:`of`; a convolution as ``unfold``, a product per
    model and ``fold`` back, or, for a loss alone, one product with its dense matrix), at
    flat parameters, with every leading dimension a
    batch of models: the forward pass by batched matrix products (:meth:`forward`), the
    backward pass written out (:meth:`backward`), the gradient packed in
    ``named_parameters`` order. The numbers of ``torch.func.grad`` of
    :meth:`_FlatModule.weighted_loss` up to round-off, without its per-call overhead (about
    7 ms a call on CPU, most of a simulation's time on small networks). ``sim.tdcd``'s
    ``ModuleModel`` uses it for each silo's network.

    :meth:`of` returns None for any other module (the vmapped autograd path is used)."""

    def __init__(self, plan: list[tuple], dim: int):
        self.plan, self.dim = plan, dim

    @classmethod
    def of(cls, module: torch.nn.Module) -> DenseNetwork | None:
        """The closed form of ``module`` for inputs that are rows of features, or None unless
        the module is a plain ``Linear`` or a ``Sequential`` of plain layers (their exact
        types, no hooks or buffers): ``Linear`` and ``Tanh``, and for images
        (:func:`small_cnn`) ``Unflatten`` of the features to [C, H, W], ``Conv2d`` (stride 1,
        no dilation or groups, zero padding), ``AvgPool2d`` (2 x 2, stride 2) and
        ``Flatten``."""
        layers = list(module) if type(module) is torch.nn.Sequential else [module]
        modules = [module, *layers]
        if (not layers
                or any(m._forward_hooks or m._forward_pre_hooks or m._backward_hooks
                       or m._backward_pre_hooks or list(m.buffers()) for m in modules)):
            return None
        where, start = {}, 0
        for p in module.parameters():
            where[id(p)] = slice(start, start + p.numel())
            start += p.numel()
        plan, image = [], None  # image: (C, H, W) of the activations, None while flat
        for m in layers:
            kind = type(m)
            if kind is torch.nn.Tanh:
                plan.append(("tanh",))
            elif kind is torch.nn.Linear and image is None:
                plan.append(("linear", where[id(m.weight)], m.out_features, m.in_features,
                             None if m.bias is None else where[id(m.bias)]))
            elif (kind is torch.nn.Unflatten and image is None and m.dim in (1, -1)
                  and len(m.unflattened_size) == 3):
                image = tuple(int(v) for v in m.unflattened_size)
                plan.append(("image", image))
            elif kind is torch.nn.Flatten and image is not None and (m.start_dim, m.end_dim) == (1, -1):
                plan.append(("flatten", image))
                image = None
            elif (kind is torch.nn.Conv2d and image is not None and m.stride == (1, 1)
                  and m.dilation == (1, 1) and m.groups == 1 and m.padding_mode == "zeros"
                  and isinstance(m.padding, tuple) and image[0] == m.in_channels):
                (kh, kw), (ph, pw) = m.kernel_size, m.padding
                after = (m.out_channels, image[1] + 2 * ph - kh + 1, image[2] + 2 * pw - kw + 1)
                plan.append(("conv", where[id(m.weight)], m.out_channels, m.in_channels * kh * kw,
                             None if m.bias is None else where[id(m.bias)], image, (kh, kw),
                             (ph, pw), after))
                image = after
            elif (kind is torch.nn.AvgPool2d and image is not None and m.kernel_size in (2, (2, 2))
                  and m.stride in (2, (2, 2)) and m.padding in (0, (0, 0)) and not m.ceil_mode
                  and m.divisor_override is None):
                plan.append(("pool", image))
                image = (image[0], image[1] // 2, image[2] // 2)
            else:
                return None
        if image is not None:
            return None
        return cls(plan, start)

    def forward(self, x: torch.Tensor, inputs: torch.Tensor,
                backward: bool = True) -> tuple[torch.Tensor, list]:
        """(h(x; inputs) [..., n, out], the layers' saved inputs for :meth:`backward`) for
        x [..., dim] and ``inputs`` [..., n, f] (leading dimensions broadcast). Without a
        ``backward`` to follow, a convolution over many samples per model is one product
        with its dense matrix (:func:`_conv_matrix`), nothing saved for it."""
        h, saved = inputs, []                    # saved[k]: step k's input (tanh: its output)
        own = False  # whether h may be overwritten: this pass's own array, not saved
        for step in self.plan:
            if step[0] == "tanh":  # in place where h is a pre-activation of ours (never saved)
                h = h.tanh_() if own else torch.tanh(h)
                saved.append(h)
                own = False  # saved: the next tanh of a tanh makes its own
                continue
            if step[0] in ("image", "flatten", "pool", "conv"):
                dense = step[0] == "conv" and not backward and h.shape[-4] >= step[5][1] * step[5][2]
                h, kept = (_dense_conv(step, h, x), None) if dense else _image_forward(step, h, x)
                saved.append(kept)
                own = own or step[0] in ("pool", "conv")  # image and flatten are views
                continue
            saved.append(h)
            _, w, out, into, b = step
            # h W^T as (W h^T)^T: MKL's product of each model's W with its samples as columns
            # takes 1/2 to 2/3 of the time of h W^T (one to a few samples per model, and the data)
            h = torch.matmul(x[..., w].unflatten(-1, (out, into)), h.mT).mT
            if b is not None:
                h.add_(x[..., None, b])
            own = True
        return h, saved

    def backward(self, x: torch.Tensor, saved: list, delta: torch.Tensor,
                 out: torch.Tensor | None = None, scale: torch.Tensor | None = None) -> torch.Tensor:
        """The sum over the n samples of ``delta`` [..., n, out] (dl/dh per sample) times
        dh/dx at the forward pass ``saved``: the gradient [..., dim], written into ``out``
        where given (every entry is written). ``scale`` [..., 1] (with ``out``): write the
        step x + scale * gradient into ``out`` instead, layer by layer, the gradient never
        stored (an SGD step without a pass over a gradient buffer; the numbers of
        ``torch.addcmul(x, gradient, scale)`` bit for bit, but for the weights of a
        one-sample linear layer, (delta scale) below instead of (delta below) scale:
        round-off)."""
        grad = out if out is not None else x.new_empty(
            torch.broadcast_shapes(x.shape[:-1], delta.shape[:-2]) + x.shape[-1:])
        for k in range(len(self.plan) - 1, -1, -1):
            step, below = self.plan[k], saved[k]
            if step[0] == "tanh":
                delta = delta * (1 - below.square())
                continue
            if step[0] in ("image", "flatten", "pool"):
                delta = _image_backward(step, delta)
                continue
            if step[0] == "conv":
                delta = _conv_backward(step, delta, below, x, grad, scale, any(
                    s[0] in ("linear", "conv") for s in self.plan[:k]))
                if delta is None:  # no parameters below
                    break
                continue
            _, w, fan_out, fan_in, b = step
            if delta.shape[-2] == 1 and scale is not None:  # x + (delta scale) below, in place
                torch.addcmul(x[..., w].unflatten(-1, (fan_out, fan_in)),
                              delta[..., 0, :, None] * scale[..., None], below[..., 0, None, :],
                              out=grad[..., w].unflatten(-1, (fan_out, fan_in)))
            elif delta.shape[-2] == 1:  # one sample: the outer product, written in place
                torch.mul(delta[..., 0, :, None], below[..., 0, None, :],
                          out=grad[..., w].unflatten(-1, (fan_out, fan_in)))
            elif scale is not None:
                torch.addcmul(x[..., w], torch.matmul(delta.mT, below).flatten(-2), scale,
                              out=grad[..., w])
            else:
                grad[..., w] = torch.matmul(delta.mT, below).flatten(-2)
            if b is not None and scale is not None:
                torch.addcmul(x[..., b], delta.sum(-2), scale, out=grad[..., b])
            elif b is not None:
                grad[..., b] = delta.sum(-2)
            if k:
                delta = torch.matmul(delta, x[..., w].unflatten(-1, (fan_out, fan_in)))
        return grad

    def __call__(self, x: torch.Tensor, inputs: torch.Tensor, targets: torch.Tensor,
                 weights: torch.Tensor, *, gradient: bool = True, out: torch.Tensor | None = None,
                 scale: torch.Tensor | None = None):
        """sum_j weights_j CE(h(x; inputs_j), targets_j) for every model of x [..., dim],
        [...], and (``gradient``) its gradient [..., dim]: ``inputs`` [..., n, f], ``targets``
        and ``weights`` [..., n], their leading dimensions broadcast against x's (none: the
        same samples for every model). ``out``: where to write the gradient (x's shape), if
        given; ``scale`` [..., 1] (with ``out``): the step x + scale * gradient instead
        (:meth:`backward`)."""
        h, saved = self.forward(x, inputs, gradient)
        lse = torch.logsumexp(h, dim=-1)
        labels = targets.expand(h.shape[:-1])[..., None]
        weights = weights.expand(h.shape[:-1])
        value = (weights * (lse - h.gather(-1, labels).squeeze(-1))).sum(-1)
        if not gradient:
            return value
        delta = torch.exp(h - lse[..., None]).mul_(weights[..., None])
        delta.scatter_add_(-1, labels, -weights[..., None])                   # [..., n, classes]
        return value, self.backward(x, saved, delta, x.new_empty(x.shape) if out is None else out,
                                    scale)


def _image_forward(step: tuple, h: torch.Tensor, x: torch.Tensor):
    """The forward pass of an image step of :class:`DenseNetwork` on h [..., n, features] or
    [..., n, C, H, W], and what its backward pass needs (a convolution: its patches)."""
    if step[0] == "image":
        return h.unflatten(-1, step[1]), None
    if step[0] == "flatten":
        return h.flatten(-3), None
    if step[0] == "pool":
        lead = h.shape[:-3]
        pooled = torch.nn.functional.avg_pool2d(h.reshape(-1, *h.shape[-3:]), 2)
        return pooled.reshape(*lead, *pooled.shape[-3:]), None
    _, w, out, into, b, (C, H, W), kernel, padding, after = step
    lead = h.shape[:-3]
    patches = torch.nn.functional.unfold(h.reshape(-1, C, H, W), kernel, padding=padding)
    patches = patches.reshape(*lead, into, patches.shape[-1])               # [..., n, C k k, L]
    h = torch.matmul(x[..., None, w].unflatten(-1, (out, into)), patches)   # [..., n, out, L]
    if b is not None:
        h.add_(x[..., None, b, None])
    return h.unflatten(-1, after[1:]), patches


def _dense_conv(step: tuple, h: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """A convolution step of :class:`DenseNetwork` forwards as one product of the samples
    h [..., n, C, H, W] with each model's convolution written as the dense [out H' W', C H W]
    matrix it is (:func:`_conv_matrix`): a pass of a few large products where the patches
    of every sample (``torch.nn.functional.unfold``, C k k times the input) would be copied
    in many small ones; the same sums (the matrix's other entries are 0)."""
    _, w, out, into, b, (C, H, W), kernel, padding, after = step
    weights = x[..., w].unflatten(-1, (out, into))                          # [..., out, C k k]
    index = _conv_matrix(C, H, W, kernel, padding, x.device)                # [H' W' C H W]
    padded = torch.cat([weights, weights.new_zeros(weights.shape[:-1] + (1,))], -1)
    matrix = padded[..., index].unflatten(-1, (after[1] * after[2], C * H * W))
    y = torch.matmul(h.flatten(-3), matrix.flatten(-3, -2).mT)            # [..., n, out H' W']
    y = y.unflatten(-1, (out, after[1] * after[2]))
    if b is not None:
        y.add_(x[..., None, b, None])
    return y.unflatten(-1, after[1:])


_CONV_MATRICES: dict[tuple, torch.Tensor] = {}


def _conv_matrix(C: int, H: int, W: int, kernel: tuple, padding: tuple, device) -> torch.Tensor:
    """For a stride-1 convolution of a [C, H, W] input: for each entry (output position p,
    input entry q) of its dense matrix, the index of the weight (c, i, j) it holds (in the
    [C k k] order of ``unfold``'s patches), or C k k where it holds none (a 0 appended to
    the weights); made once per shape."""
    key = (C, H, W, tuple(kernel), tuple(padding), str(device))
    if key not in _CONV_MATRICES:
        positions = torch.arange(1, C * H * W + 1, dtype=DTYPE).view(1, C, H, W)
        source = torch.nn.functional.unfold(positions, kernel, padding=padding)[0].long() - 1
        taps, outputs = source.shape                                   # [C k k, H' W']: q or -1
        index = torch.full((outputs, C * H * W), taps, dtype=torch.int64)
        tap, p = torch.nonzero(source >= 0, as_tuple=True)
        index[p, source[tap, p]] = tap
        _CONV_MATRICES[key] = index.view(-1).to(device)
    return _CONV_MATRICES[key]


def _image_backward(step: tuple, delta: torch.Tensor) -> torch.Tensor:
    """delta through an "image", "flatten" or "pool" step of :class:`DenseNetwork`: the
    transpose of the forward pass (2 x 2 average pooling: each value spread over its 4
    inputs, / 4; rows and columns the pooling dropped get 0)."""
    if step[0] == "image":
        return delta.flatten(-3)
    if step[0] == "flatten":
        return delta.unflatten(-1, step[1])
    H, W = step[1][1:]
    h, w = delta.shape[-2:]
    lead = delta.shape[:-2]
    up = (delta * 0.25)[..., :, None, :, None].expand(*lead, h, 2, w, 2).reshape(*lead, 2 * h, 2 * w)
    return up if (H, W) == (2 * h, 2 * w) else torch.nn.functional.pad(up, (0, W - 2 * w, 0, H - 2 * h))


def _conv_backward(step: tuple, delta: torch.Tensor, patches: torch.Tensor, x: torch.Tensor,
                   grad: torch.Tensor, scale: torch.Tensor | None, below: bool) -> torch.Tensor | None:
    """A convolution of :class:`DenseNetwork` backwards: its weights' and bias's gradient
    (the sum over samples of delta patches^T, of delta) written into ``grad`` (with
    ``scale``: x + scale * gradient), and the delta of its input (``below``: there is a
    layer below), folded back from W^T delta."""
    _, w, out, into, b, (C, H, W), kernel, padding, _ = step
    delta = delta.flatten(-2)                                                # [..., n, out, L]
    g = torch.matmul(delta, patches.mT)                                      # [..., n, out, C k k]
    g = (g.squeeze(-3) if g.shape[-3] == 1 else g.sum(-3)).flatten(-2)      # one sample: no pass
    if scale is None:
        grad[..., w] = g
    else:
        torch.addcmul(x[..., w], g, scale, out=grad[..., w])
    if b is not None:
        gb = delta.sum((-3, -1))
        if scale is None:
            grad[..., b] = gb
        else:
            torch.addcmul(x[..., b], gb, scale, out=grad[..., b])
    if not below:
        return None
    cols = torch.matmul(x[..., None, w].unflatten(-1, (out, into)).mT, delta)  # [..., n, C k k, L]
    lead = cols.shape[:-2]
    folded = torch.nn.functional.fold(cols.reshape(-1, into, cols.shape[-1]), (H, W), kernel,
                                      padding=padding)
    return folded.reshape(*lead, C, H, W)


class _FlatModule:
    """A module evaluated at flat parameter vectors: layout, initial vector, weighted loss."""

    def __init__(self, module: torch.nn.Module, features, labels, device, chunk_size):
        if not isinstance(module, torch.nn.Module):
            raise ValueError(f"module={type(module).__name__} must be a torch.nn.Module")
        self.features = torch.as_tensor(features, dtype=DTYPE, device=device)
        self.labels = torch.as_tensor(labels, device=self.features.device)
        n = self.features.shape[0] if self.features.ndim else 0
        if n < 1 or not torch.isfinite(self.features).all():
            raise ValueError(f"features must be finite with at least one sample, got shape "
                             f"{tuple(self.features.shape)}")
        if (self.labels.shape != (n,) or self.labels.dtype.is_floating_point
                or self.labels.dtype == torch.bool or (self.labels < 0).any()):
            raise ValueError(f"labels must be {n} integer class indices >= 0")
        self.labels = self.labels.long()
        self.n = n
        self.chunk_size = None if chunk_size is None else _positive_int("chunk_size", chunk_size)
        self.module = copy.deepcopy(module).to(device=self.features.device, dtype=DTYPE).eval()
        named = list(self.module.named_parameters())
        if not named:
            raise ValueError("module has no parameters: nothing to train")
        self.names = [name for name, _ in named]
        self.shapes = [p.shape for _, p in named]
        self.sizes = [p.numel() for _, p in named]
        self.dim = sum(self.sizes)
        widths = []  # every submodule's output per sample: the activations a model holds
        hooks = [m.register_forward_hook(lambda m, args, out: widths.append(
            out.numel() if isinstance(out, torch.Tensor) else 0)) for m in self.module.modules()]
        try:
            with torch.no_grad():
                out = self.module(self.features[:1])
        finally:
            for hook in hooks:
                hook.remove()
        self.widest = max(widths, default=1)
        if out.ndim != 2 or out.shape[0] != 1:
            raise ValueError(f"module must map [batch, ...] inputs to [batch, classes] logits, "
                             f"got output shape {tuple(out.shape)} for one sample")
        self.classes = int(out.shape[1])
        if int(self.labels.max()) >= self.classes:
            raise ValueError(f"labels reach {int(self.labels.max())} but the module has "
                             f"{self.classes} outputs")
        self.dense = DenseNetwork.of(self.module) if self.features.ndim == 2 else None

    @property
    def device(self) -> torch.device:
        return self.features.device

    def initial(self) -> torch.Tensor:
        """The module's own parameters as one flat float64 vector [dim] (a start x1)."""
        return torch.cat([p.detach().reshape(-1) for p in self.module.parameters()])

    def parameters_of(self, flat: torch.Tensor) -> dict[str, torch.Tensor]:
        """{name: tensor} of one flat vector [dim] (views, as ``functional_call`` takes)."""
        pieces = flat.split(self.sizes)
        return {name: piece.reshape(shape)
                for name, shape, piece in zip(self.names, self.shapes, pieces, strict=True)}

    def weighted_loss(self, flat: torch.Tensor, inputs: torch.Tensor, targets: torch.Tensor,
                      weights: torch.Tensor) -> torch.Tensor:
        """sum_j weights_j CE(h(flat; inputs_j), targets_j) for one model."""
        logits = functional_call(self.module, self.parameters_of(flat), (inputs,))
        return (weights * cross_entropy(logits, targets)).sum()

    def accuracy(self, x: torch.Tensor, features, labels) -> torch.Tensor:
        """The share of the samples ``features`` [n, ...] whose largest logit under the model
        x is its label in ``labels`` [n], for each model of x [..., dim]: [...] (the
        papers' test accuracy, on held-out samples)."""
        features = torch.as_tensor(features, dtype=DTYPE, device=self.device)
        labels = torch.as_tensor(labels, device=self.device).long()

        def one(flat, inputs, targets):
            logits = functional_call(self.module, self.parameters_of(flat), (inputs,))
            return (logits.argmax(-1) == targets).to(DTYPE).mean()

        return self.batched(one, x, (features, labels), (None, None))

    def models_within(self, flat: torch.Tensor, data: tuple, data_dims: tuple) -> int:
        """``chunk_size`` if given, else how many of the models of ``flat``'s first dimension
        one call takes for their activations on their samples (``data``, mapped along
        dimension 0 where ``data_dims`` says 0) to stay near :data:`CHUNK_BYTES`: about eight
        float64 arrays of the widest submodule output per sample and model (forward, backward,
        the vmapped gradients' copies), at least 1, a multiple of 16 where it is 16 or more
        (see :meth:`pooled_grads`). A pass over the whole data set for hundreds of models at
        once would otherwise take gigabytes (the CNN: 12 GB)."""
        if self.chunk_size is not None:
            return self.chunk_size
        models = max(flat.shape[0], 1)
        rows = data[0].shape[:data[0].ndim - self.features.ndim + 1].numel()
        rows //= models if data_dims[0] == 0 else 1
        fits = int(CHUNK_BYTES // (64 * max(rows, 1) * self.widest))
        return max(1, min(models, fits if fits < 16 else fits - fits % 16))

    def batched(self, fn: Callable, x: torch.Tensor, data: tuple, data_dims: tuple) -> object:
        """``fn`` vmapped over the leading dimensions of ``x`` [..., dim] (flattened to one),
        with ``data`` mapped along dimension 0 where ``data_dims`` says 0 (already flattened
        to match) and shared where None; results reshaped back to ``x``'s leading shape."""
        if x.shape[-1] != self.dim:
            raise ValueError(f"x must have shape [..., {self.dim}], got {tuple(x.shape)}")
        lead = x.shape[:-1]
        flat = x.reshape(-1, self.dim)
        out = vmap(fn, in_dims=(0, *data_dims),
                   chunk_size=self.models_within(flat, data, data_dims))(flat, *data)
        if isinstance(out, tuple):
            return tuple(o.reshape(lead + o.shape[1:]) for o in out)
        return out.reshape(lead + out.shape[1:])

    def evaluated(self, want: str, x: torch.Tensor, data: tuple, data_dims: tuple):
        """The weighted loss (``want="loss"``), its gradient (``"grad"``) or both (``"both"``:
        (gradient, loss), as ``torch.func.grad_and_value``) of every model of x [..., dim],
        ``data`` = (inputs, targets, weights) as in :meth:`batched`: by :class:`DenseNetwork`
        where the module has a closed form, else by ``torch.func`` vmapped."""
        if self.dense is None:
            fn = {"loss": self.weighted_loss, "grad": grad(self.weighted_loss),
                  "both": grad_and_value(self.weighted_loss)}[want]
            return self.batched(fn, x, data, data_dims)
        if x.shape[-1] != self.dim:
            raise ValueError(f"x must have shape [..., {self.dim}], got {tuple(x.shape)}")
        out = self.dense_chunks(want, x.reshape(-1, self.dim), data, data_dims)
        lead = x.shape[:-1]
        if want == "both":
            return out[0].reshape(x.shape), out[1].reshape(lead)
        return out.reshape(lead + out.shape[1:])

    def dense_chunks(self, want: str, flat: torch.Tensor, data: tuple, data_dims: tuple,
                     out: torch.Tensor | None = None, scale: torch.Tensor | None = None):
        """:meth:`evaluated` by :class:`DenseNetwork` on ``flat`` [B, ..., dim], at most
        :meth:`models_within` models of its first dimension at a time (the data where
        ``data_dims`` says 0 split with them, the others broadcast); ``out`` (``flat``'s
        shape): where the gradients go, if given (with ``scale`` [B, ..., 1]: the steps
        flat + scale * gradient, :class:`DenseNetwork`)."""
        size = self.models_within(flat, data, data_dims)
        # every chunk writes into tensors made before the first: nothing a chunk makes outlives
        # it (a small result kept per chunk splits the heap's free space, and the next chunk's
        # large activations take new memory: 224 CNN models over the digits, 1 GB at peak)
        grads = out if out is not None or want == "loss" else torch.empty_like(flat)
        values = None
        for start in range(0, flat.shape[0], size):
            part = slice(start, start + size)
            found = self.dense(flat[part], *(d[part] if dim == 0 else d
                                             for d, dim in zip(data, data_dims, strict=True)),
                               gradient=want != "loss", out=None if grads is None else grads[part],
                               scale=None if scale is None else scale[part])
            value = found if want == "loss" else found[0]
            if values is None:
                values = value.new_empty((flat.shape[0], *value.shape[1:]))
            values[part] = value
            del found, value
        if want == "loss":
            return values
        return grads if want == "grad" else (grads, values)

    def pooled_grads(self, y: torch.Tensor, idx: torch.Tensor, weights: torch.Tensor,
                     rows: torch.Tensor | None = None,
                     scale: torch.Tensor | None = None) -> torch.Tensor:
        """The gradients at the models y [..., dim] (flattened to [Y, dim]) of the loss over
        their samples ``idx`` [Y, b] weighted by ``weights`` [Y, b]: every model's [..., dim]
        (``rows`` None), or only those of ``rows`` [A] (int64 indices into the Y models),
        [A, dim], the others not computed (a run loop whose models do not all step). The
        rows' models are evaluated in a batch padded (repeating the first) to a multiple of
        16, so that every element-wise kernel takes all of them in its vectorised path: a
        model's numbers do not depend on which others are evaluated with it. ``scale`` [A, 1]
        (with ``rows``): the steps y + scale * gradient of the rows' models instead, [A, dim]
        (with the closed form, written by its backward pass, :class:`DenseNetwork`; the
        numbers of ``torch.addcmul``)."""
        if rows is None:
            return self.evaluated("grad", y, (self.features[idx], self.labels[idx], weights), (0, 0, 0))
        if not rows.numel():
            return y.new_empty(0, self.dim)
        pad = -rows.numel() % 16
        picked = torch.cat([rows, rows[:1].expand(pad)]) if pad else rows
        mine = idx[picked]
        models = y.reshape(-1, self.dim)[picked]
        data = (self.features[mine], self.labels[mine], weights[picked])
        if scale is None:
            return self.evaluated("grad", models, data, (0, 0, 0))[:rows.numel()]
        scale = torch.cat([scale, scale[:1].expand(pad, 1)]) if pad else scale
        if self.dense is None:
            return torch.addcmul(models, self.evaluated("grad", models, data, (0, 0, 0)),
                                 scale)[:rows.numel()]
        return self.dense_chunks("grad", models, data, (0, 0, 0), torch.empty_like(models),
                                 scale)[:rows.numel()]

    def moved(self, device):
        """A shallow copy with the data and the module on ``device``."""
        copied = copy.copy(self)
        for name, value in vars(self).items():
            if isinstance(value, torch.Tensor):
                setattr(copied, name, value.to(device))
        copied.module = copy.deepcopy(self.module).to(device)
        return copied


class NeuralProblem(_FlatModule, Problem):
    """F(x) = (1/n) sum_j CE(h(x; a_j), y_j) over ``features`` [n, ...] and ``labels`` [n]
    for the network ``module`` with flat parameters x (see the module docstring).

    ``batch``: samples per stochastic gradient, drawn uniformly with replacement.
    Constants: ``L = beta = sigma = G = None`` (unknown), ``f_inf = 0`` (lower bound).
    """

    def __init__(self, module: torch.nn.Module, features, labels, *, batch: int = 1,
                 device=None, chunk_size: int | None = None):
        super().__init__(module, features, labels, device, chunk_size)
        self.batch = _positive_int("batch", batch)
        self.uniform = torch.full((self.n,), 1.0 / self.n, dtype=DTYPE, device=self.device)
        self.L = self.beta = self.sigma = self.G = None
        self.f_inf = 0.0

    def _full(self, want: str, x: torch.Tensor):
        return self.evaluated(want, x, (self.features, self.labels, self.uniform), (None, None, None))

    def loss(self, x: torch.Tensor) -> torch.Tensor:
        return self._full("loss", x)

    def grad(self, x: torch.Tensor) -> torch.Tensor:
        return self._full("grad", x)

    def loss_and_grad_sq(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """F(x) and ||grad F(x)||^2 from one forward and backward pass per model."""
        g, value = self._full("both", x)
        return value, g.square().sum(-1)

    def stochastic_grad(self, x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """The gradient of the mean loss over ``batch`` indices per model, drawn by one
        ``randint(n, [..., batch])``."""
        idx = randint(self.n, (*x.shape[:-1], self.batch), generator, self.device).reshape(-1, self.batch)
        weights = torch.full((self.batch,), 1.0 / self.batch, dtype=DTYPE, device=self.device)
        return self.evaluated("grad", x, (self.features[idx], self.labels[idx], weights), (0, 0, None))

    def mean_gradient_sampler(self, shape, counts, generator):
        """``(y, grad_y) ->`` the mean over c = ``counts`` clients of one :meth:`stochastic_grad`
        each at the model y [..., d] (``shape`` = [..., n, d], n >= max(counts)), as the
        gradient of the mean loss over the c x ``batch`` samples the c clients draw: the
        same ``randint(n, [..., n, batch])`` draw as ``Problem.mean_gradient_sampler`` (the
        clients beyond c unused) and the same numbers up to round-off, in one pass over the
        pooled samples per model instead of one per client (Ali & Arafa 2025, Fig. 6's groups
        of 500 clients). ``grad_y`` is not used; ``rows`` (int64 indices into y's models,
        flattened): the gradients of those models only, [len(rows), d], the draws those of
        every model (:meth:`pooled_grads`; ``sim.hfl.run_hfl`` passes the groups that step,
        as the sampler's attribute ``rows = True`` says it may); with ``scale`` [len(rows),
        1], their steps y + scale * gradient instead."""
        shape = tuple(shape)
        lead, n = shape[:-2], shape[-2]
        counts = torch.as_tensor(counts, device=self.device).expand(lead)
        pooled = n * self.batch
        used = torch.arange(pooled, device=self.device) < (counts * self.batch)[..., None]
        weights = (used.to(DTYPE) / (counts * self.batch).to(DTYPE)[..., None]).reshape(-1, pooled)

        def mean(y: torch.Tensor, grad_y: torch.Tensor | None = None,
                 rows: torch.Tensor | None = None, scale: torch.Tensor | None = None) -> torch.Tensor:
            idx = randint(self.n, (*lead, n, self.batch), generator, self.device).reshape(-1, pooled)
            return self.pooled_grads(y, idx, weights, rows, scale)

        mean.rows = True
        return mean

    def to(self, device) -> NeuralProblem:
        return self.moved(device)


class NeuralClients(_FlatModule, ClientProblem):
    """Workers with their own data: worker i holds the samples ``partition.owner == i`` of
    ``features``/``labels``; f_i is the mean loss over them and f = sum_i p_i f_i with
    p_i = 1/M (``weights="uniform"``, Yang et al. 2022, Section 3) or n_i/n (``"data"``:
    the mean loss over all the samples). A ``sim.clients.ClientProblem``: the client
    interface of ``sim.afl.run_afl`` (``M``, ``dim``, ``loss``, ``grad`` of f,
    ``worker_grads`` and ``worker_gradient_sampler`` of the f_i on x [..., M, dim]), and a
    ``sim.problems.Problem`` whose samplers put worker i on row i (``sim.mllsgd.run_mllsgd``)
    or in its group (``sim.hfl.run_hfl``).

    A stochastic gradient of worker i is the gradient of the mean loss over ``batch`` of
    its samples drawn uniformly with replacement: one ``rand([..., M, batch])`` draw per
    call, sample floor(u n_i) of worker i (``sim.data.ShardRows``). Constants as for
    :class:`NeuralProblem` (``L``, ``beta``, ``sigma``, ``G``, ``sigma_L``, ``sigma_G``
    None; ``f_inf = f_star = 0`` a lower bound).
    """

    def __init__(self, module: torch.nn.Module, features, labels, partition: Partition, *,
                 batch: int = 1, weights: str = "uniform", device=None,
                 chunk_size: int | None = None):
        super().__init__(module, features, labels, device, chunk_size)
        self._client_setup(checked_partition(partition, self.n), weights)
        table, sizes = partition.table()
        self.batch = _positive_int("batch", batch)
        self.table = table.to(self.device)                                   # [M, n_max]
        self.counts = sizes.to(self.device)                                  # [M] n_i
        mask = torch.arange(table.shape[1], device=self.device) < self.counts[:, None]
        self.local_weights = mask.to(DTYPE) / self.counts[:, None]           # [M, n_max]
        share = (1.0 / self.counts.to(DTYPE) / self.M if weights == "uniform"
                 else 1.0 / self.counts.to(DTYPE) * self.client_weights)
        self.sample_weights = share[self.partition.owner.to(self.device)]   # [n] p_i / n_i
        self.L = self.beta = self.sigma = self.G = self.sigma_L = self.sigma_G = None
        self.f_inf = self.f_star = 0.0

    def _mean_of_workers(self, want: str, x: torch.Tensor):
        """``fn`` at x [..., dim] on every sample, weighted p_i/n_i by its worker i:
        f = sum_i p_i f_i (one pass over the n samples, no padding to the largest shard)."""
        return self.evaluated(want, x, (self.features, self.labels, self.sample_weights),
                              (None, None, None))

    def loss(self, x: torch.Tensor) -> torch.Tensor:
        return self._mean_of_workers("loss", x)

    def grad(self, x: torch.Tensor) -> torch.Tensor:
        return self._mean_of_workers("grad", x)

    def loss_and_grad_sq(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """f(x) and ||grad f(x)||^2 from one forward and backward pass per model."""
        g, value = self._mean_of_workers("both", x)
        return value, g.square().sum(-1)

    def rows_grads(self, x: torch.Tensor, rows) -> torch.Tensor:
        """Each row's gradient on its own samples (``rows.table``, ``rows.weights``)."""
        return self._per_worker(x, self.features[rows.table], self.labels[rows.table], rows.weights)

    def _per_worker(self, x: torch.Tensor, inputs, targets, weights,
                    out: torch.Tensor | None = None,
                    scale: torch.Tensor | None = None) -> torch.Tensor:
        """grad f_i-type gradients at x [..., K, dim] with per-row data [K, b, ...]
        (shared over the other leading dimensions) or [P, K, b, ...] (one per model); K = M
        for the workers. ``out`` (x's shape, contiguous): where the closed form writes them
        (with ``scale`` [..., K, 1]: the steps x + scale * gradient, ``DenseNetwork``)."""
        K = weights.shape[-2]
        if x.ndim < 2 or x.shape[-2:] != (K, self.dim):
            raise ValueError(f"x must have shape [..., {K}, {self.dim}], got {tuple(x.shape)}")
        flat = x.reshape(-1, K, self.dim)
        shared = inputs.ndim == self.features.ndim + 1
        if self.dense is not None:
            dims = (None,) * 3 if shared else (0,) * 3
            return self.dense_chunks("grad", flat, (inputs, targets, weights), dims,
                                     None if out is None else out.view(flat.shape),
                                     None if scale is None else scale.reshape(*flat.shape[:2], 1)
                                     ).reshape(x.shape)
        inner = vmap(grad(self.weighted_loss), in_dims=(0, 0, 0, 0))
        outer = vmap(inner, in_dims=(0, None, None, None) if shared else (0, 0, 0, 0),
                     chunk_size=self.models_within(flat, (inputs,), (None,) if shared else (0,)))
        return outer(flat, inputs, targets, weights).reshape(x.shape)

    def worker_grads(self, x: torch.Tensor) -> torch.Tensor:
        """grad f_i at x [..., M, dim] (worker i on row i)."""
        return self._per_worker(x, self.features[self.table], self.labels[self.table],
                                self.local_weights)

    def stochastic_worker_grads(self, x: torch.Tensor, generator: torch.Generator,
                                rows: ShardRows | None = None, out: torch.Tensor | None = None,
                                scale: torch.Tensor | None = None) -> torch.Tensor:
        """One mini-batch gradient per worker at x [..., M, dim]: row i's ``batch`` samples
        drawn from worker i's (``rows``: the partition's ``ShardRows``, made if None; ``out``
        and ``scale``: see :meth:`_per_worker`)."""
        lead = x.shape[:-2]
        rows = ShardRows(self.partition, self.device) if rows is None else rows
        idx = rows(rand((*lead, self.M, self.batch), generator, self.device)).reshape(-1, self.M, self.batch)
        weights = torch.full((idx.shape[0], self.M, self.batch), 1.0 / self.batch, dtype=DTYPE,
                             device=self.device)
        return self._per_worker(x, self.features[idx], self.labels[idx], weights, out, scale)

    def worker_gradient_sampler(self, shape, generator: torch.Generator):
        """``x -> stochastic_worker_grads(x, generator)`` (the interface run_afl and
        run_mllsgd use); with the closed form, written into one buffer of ``shape`` reused by
        every call (valid until the next, as ``Problem.gradient_sampler`` allows): no fresh
        state-sized tensor per iteration. With the closed form the sampler also has
        ``step(x, scale, out)``: the same draws, and x + scale * g(x) written into ``out``
        (x's shape; ``scale`` [..., M, 1], -eta theta_k for ``sim.mllsgd.run_mllsgd``) without
        storing g(x) (``DenseNetwork``)."""
        rows = ShardRows(self.partition, self.device)
        shape = tuple(shape)
        buffer = None if self.dense is None else torch.empty(shape, dtype=DTYPE, device=self.device)

        def sample(x: torch.Tensor) -> torch.Tensor:
            fits = buffer is not None and tuple(x.shape) == shape
            return self.stochastic_worker_grads(x, generator, rows, buffer if fits else None)

        def step(x: torch.Tensor, scale: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
            return self.stochastic_worker_grads(x, generator, rows, out, scale)

        if self.dense is not None:
            sample.step = step
        return sample

    def mean_gradient_sampler(self, shape, counts, generator):
        """``ClientProblem.mean_gradient_sampler``'s group means (group g's clients each take
        one :meth:`stochastic_worker_grads` at the group's model y [..., G, d], Ali & Arafa
        2025, eqs. (5)-(6)) as the gradient of each group's model on the samples its clients
        draw, pooled (weight 1 / (n_g ``batch``), the clients of smaller groups padded with
        weight 0): the same ``rand([..., M, batch])`` draw and the same numbers up to
        round-off, one gradient per group instead of one per client, and no copy of the
        group models to their clients. ``grad_y`` is not used; ``rows``: the gradients of
        those groups only, as for :meth:`NeuralProblem.mean_gradient_sampler`."""
        lead = tuple(shape)[:-3]
        counts, used, clients = self._groups(counts)
        G, pooled = clients.shape[0], clients.shape[1] * self.batch
        weights = (used.to(DTYPE) / (counts * self.batch).to(DTYPE)[:, None]).repeat_interleave(
            self.batch, dim=1)                                              # [G, pooled]
        shard = ShardRows(self.partition, self.device)

        def mean(y: torch.Tensor, grad_y: torch.Tensor | None = None,
                 rows: torch.Tensor | None = None, scale: torch.Tensor | None = None) -> torch.Tensor:
            idx = shard(rand((*lead, self.M, self.batch), generator, self.device))
            idx = idx[..., clients, :].reshape(-1, G, pooled)
            if rows is None:
                return self._per_worker(y, self.features[idx], self.labels[idx],
                                        weights.expand(idx.shape[0], G, pooled))
            return self.pooled_grads(y, idx.view(-1, pooled), weights.repeat(idx.shape[0], 1), rows,
                                     scale)

        mean.rows = True
        return mean

    def _groups(self, counts) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Groups of ``counts`` [G] consecutive clients (:meth:`group_of`) as slots: their
        sizes [G], which of the n_max slots of each are used [G, n_max], and the client in
        each slot (0 in the unused ones) [G, n_max]."""
        counts = torch.bincount(self.group_of(counts))                        # [G] n_g
        slot = torch.arange(int(counts.max()), device=self.device)
        used = slot < counts[:, None]                                         # [G, n_max]
        return counts, used, torch.where(used, (counts.cumsum(0) - counts)[:, None] + slot, 0)

    def hub_step_sampler(self, shape, counts, generator):
        """``(y, client_weights, scale, out) ->`` the steps y_g + scale_g sum_{i in g}
        client_weights_i g_i(y_g) of every group's model y [..., G, d] (``shape``; groups of
        ``counts`` [G] consecutive clients, :meth:`group_of`), written into ``out`` (y's
        shape), ``client_weights`` [..., M] and ``scale`` [..., G, 1]; g_i is one
        :meth:`stochastic_worker_grads` of client i at its group's model, the same
        ``rand([..., M, batch])`` draw. As one gradient per group of the loss over the
        samples its clients draw, each weighing client_weights_i / ``batch`` (the smaller
        groups' clients padded with weight 0): no copy of the group models to their clients.
        ``sim.mllsgd.run_mllsgd`` steps the sub-network models with it where every iteration
        averages (tau = 1): client_weights_i = v_i theta_i, scale = -eta, the sub-network
        average of the workers' steps from its model (Castiglia et al. 2021, (5)-(6))."""
        lead = tuple(shape)[:-2]
        _, used, clients = self._groups(counts)
        G, pooled = clients.shape[0], clients.shape[1] * self.batch
        padding = (used.to(DTYPE) / self.batch).repeat_interleave(self.batch, dim=1)  # [G, pooled]
        shard = ShardRows(self.partition, self.device)

        def step(y: torch.Tensor, client_weights: torch.Tensor, scale: torch.Tensor,
                 out: torch.Tensor) -> torch.Tensor:
            idx = shard(rand((*lead, self.M, self.batch), generator, self.device))
            idx = idx[..., clients, :].reshape(-1, G, pooled)
            weights = client_weights[..., clients].repeat_interleave(self.batch, dim=-1)
            weights = weights.reshape(-1, G, pooled).mul_(padding)
            data = (self.features[idx], self.labels[idx], weights)
            if self.dense is None:
                return torch.addcmul(y, self._per_worker(y, *data), scale, out=out)
            return self._per_worker(y, *data, out, scale)

        return step

    def to(self, device) -> NeuralClients:
        moved = self.moved(device)
        moved._rows = {}
        return moved
