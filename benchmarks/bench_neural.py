"""The vectorised neural problem (sim.neural) against a per-worker loop of nn.Module copies.

    python benchmarks/bench_neural.py [--quick] [--device cpu]

One step's stochastic gradients of N workers (N = 10, 100, 1000; ``--quick``: 10 and
100), each at its own parameters, on mini-batches of 16 digits (sim.data.load_digits),
for the MLP (64-32-10) and the small CNN of sim.neural:

- vectorised: ``NeuralProblem.stochastic_grad`` on the [N, d] models: one ``randint``
  draw, then for both networks the closed form of ``sim.neural.DenseNetwork`` (batched
  products over the models; the vmapped ``torch.func.grad`` of ``functional_call`` is the
  path of any other module);
- loop: N float64 ``nn.Module`` copies holding the same parameters (built once, not
  timed), the same index draw, then worker by worker a forward pass, the mean
  cross-entropy and ``torch.autograd.grad``, the gradients flattened into one [N, d]
  tensor (what a per-worker simulator does at every step).

Both give the same gradients (checked to 1e-10 before timing). The two run interleaved
(benchmarks/timing.py, one intra-op thread), and the ratio is loop over vectorised of the
best of the repeats, in one run. Peak memory: each (method, N) runs once more in its own
process, and the figure is the growth of its peak resident memory (Linux's VmHWM, reset
after a warm-up at N = 1) over the resident memory before the workload is built (on
CUDA: ``torch.cuda.max_memory_allocated``).
Goal: the vectorised step at least 5 times faster than the loop at N = 100 (MLP).
Writes the figures to benchmarks/results.json.
"""

from __future__ import annotations

import argparse
import copy
import json
import subprocess
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.device import add_device_argument, checked_device, suffix  # noqa: E402
from benchmarks.results import figure, record  # noqa: E402
from benchmarks.timing import interleaved  # noqa: E402
from fedbound.sim.data import load_digits  # noqa: E402
from fedbound.sim.neural import NeuralProblem, mlp, small_cnn  # noqa: E402

BATCH = 16
GOAL = 5.0
NETWORKS = {"mlp": lambda: mlp(64, (32,), 10), "cnn": lambda: small_cnn(10, channels=8)}


def workload(net: str, N: int, device: str, seed: int = 0, data=None):
    """(problem, models [N, d], module copies holding them): the two sides of the benchmark."""
    data = load_digits(device=device) if data is None else data
    torch.manual_seed(seed)
    problem = NeuralProblem(NETWORKS[net](), data.features, data.labels, batch=BATCH, device=device)
    noise = torch.randn(N, problem.dim, generator=torch.Generator().manual_seed(seed),
                        dtype=torch.float64).to(device)
    models = problem.initial() + 0.1 * noise
    copies = []
    for x in models:
        module = copy.deepcopy(problem.module)
        torch.nn.utils.vector_to_parameters(x, module.parameters())
        copies.append(module)
    return problem, models, copies


def loop_step(problem: NeuralProblem, copies, generator: torch.Generator) -> torch.Tensor:
    """The N workers' stochastic gradients, one nn.Module at a time (the same index draw
    as ``problem.stochastic_grad``)."""
    idx = torch.randint(problem.n, (len(copies), BATCH), generator=generator,
                        device=generator.device).to(problem.device)
    grads = []
    for module, rows in zip(copies, idx, strict=True):
        loss = torch.nn.functional.cross_entropy(module(problem.features[rows]), problem.labels[rows])
        grads.append(torch.cat([g.reshape(-1) for g in
                                torch.autograd.grad(loss, list(module.parameters()))]))
    return torch.stack(grads)


def timed(net: str, N: int, device: str, repeats: int) -> dict:
    problem, models, copies = workload(net, N, device)
    vectorised = problem.stochastic_grad(models, torch.Generator().manual_seed(1))
    looped = loop_step(problem, copies, torch.Generator().manual_seed(1))
    torch.testing.assert_close(vectorised, looped, rtol=1e-10, atol=1e-12)
    sync = torch.cuda.synchronize if torch.device(device).type == "cuda" else (lambda: None)
    generator = torch.Generator().manual_seed(2)

    def run(fn):
        def call():
            fn()
            sync()
        return call

    times = interleaved({"loop": run(lambda: loop_step(problem, copies, generator)),
                         "vectorised": run(lambda: problem.stochastic_grad(models, generator))},
                        repeats)
    return {name: min(t) for name, t in times.items()}


def _status_bytes(field: str) -> int:
    """``field`` (VmRSS, VmHWM) of /proc/self/status in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"/proc/self/status has no {field}")


def peak_memory(net: str, N: int, method: str, device: str) -> int:
    """Bytes the workload and one step add to the peak (this process, see the docstring).
    On the CPU: Linux's peak resident set (VmHWM, reset through /proc/self/clear_refs
    once the data set is loaded and both sides ran once at N = 1, for the lazy imports
    and first-call allocations) minus the resident set at that point."""
    torch.set_num_threads(1)
    cuda = torch.device(device).type == "cuda"
    data = load_digits(device=device)
    warm_up, models, copies = workload(net, 1, device, data=data)  # lazy imports, first calls
    loop_step(warm_up, copies, torch.Generator().manual_seed(1))
    warm_up.stochastic_grad(models, torch.Generator().manual_seed(1))
    del warm_up, models, copies
    if cuda:
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
    else:
        Path("/proc/self/clear_refs").write_text("5")
        before = _status_bytes("VmRSS")
    problem, models, copies = workload(net, N, device, data=data)
    if method == "loop":
        loop_step(problem, copies, torch.Generator().manual_seed(1))
    else:
        del copies
        problem.stochastic_grad(models, torch.Generator().manual_seed(1))
    peak = torch.cuda.max_memory_allocated() if cuda else _status_bytes("VmHWM")
    return peak - before


def in_subprocess(net: str, N: int, method: str, device: str) -> int:
    out = subprocess.run([sys.executable, __file__, "--device", device, "--child", net, str(N), method],
                         check=True, capture_output=True, text=True)
    return int(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="N = 10 and 100 only")
    add_device_argument(parser)
    parser.add_argument("--child", nargs=3, metavar=("NET", "N", "METHOD"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    checked_device(parser, args.device)
    if args.child:
        print(json.dumps(peak_memory(args.child[0], int(args.child[1]), args.child[2], args.device)))
        return
    torch.set_num_threads(1)
    sizes = (10, 100) if args.quick else (10, 100, 1000)
    where = suffix(args.device)
    print(f"{'net':>4} {'N':>5} | {'loop s':>9} | {'vectorised s':>12} | {'ratio':>6} | "
          f"{'loop MB':>8} | {'vectorised MB':>13}")
    entries = []
    for net in NETWORKS:
        for N in sizes:
            best = timed(net, N, args.device, repeats=5 if N < 1000 else 3)
            ratio = best["loop"] / best["vectorised"]
            memory = {m: in_subprocess(net, N, m, args.device) for m in ("loop", "vectorised")}
            print(f"{net:>4} {N:>5} | {best['loop']:>9.4f} | {best['vectorised']:>12.4f} | "
                  f"{ratio:>6.1f} | {memory['loop'] / 2**20:>8.1f} | {memory['vectorised'] / 2**20:>13.1f}")
            goal = GOAL if (net, N) == ("mlp", 100) else None
            entries.append(figure(f"neural.{net}{where}.loop_over_vectorised.N{N}", ratio, "ratio",
                                  at_least=goal))
            for method, value in memory.items():
                entries.append(figure(f"neural.{net}{where}.peak_memory.{method}.N{N}", value, "bytes"))
    record(entries)


if __name__ == "__main__":
    main()
