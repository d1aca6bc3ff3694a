"""Vectorised run_tdcd against a plain Python loop over replicas, silos and clients.

    python benchmarks/bench_tdcd.py [--quick] [--device cpu]

The loop reference implements Algorithm 1 of Das et al. 2022 literally: one
1-D tensor per client model, loops over replicas, silos, clients and local steps, the
other silos' embeddings summed once per round from the hub models and the client's own
embedding recomputed every step. It draws each round's batches with the same
``draw_batch`` call on the same generator as run_tdcd, so both must give the same
||grad L(theta^{rQ})||^2 trace to 1e-10. Prints the configuration, loop seconds,
vectorised seconds and their ratio (best of a few repeats, time.perf_counter, one
intra-op thread for both).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.device import add_device_argument, checked_device, suffix  # noqa: E402
from benchmarks.results import figure, record  # noqa: E402
from benchmarks.timing import best_time  # noqa: E402
from fedbound.sim.tdcd import BlockLinear, Layout, draw_batch, run_tdcd, synthetic_data  # noqa: E402

F64 = torch.float64


def scenario(N: int, K: int, replicas: int, seed: int = 0, device: str = "cpu") -> dict:
    """Logistic regression, 3 features per silo, K clients per silo, 200 base samples,
    batch 4K, Q = 5, eta = 1/(8 Q max(L, L_max)); the model on ``device``."""
    layout = Layout((3,) * N, (K,) * N, 200, 4 * K)
    X, y = synthetic_data(200, layout.D, loss="logistic",
                          generator=torch.Generator().manual_seed(seed))
    model = BlockLinear(X, y, layout, loss="logistic", device=device)
    Q = 5
    return dict(model=model, Q=Q, eta=1 / (8 * Q * max(model.L, model.L_max)),
                theta0=torch.full((layout.D,), 0.5, dtype=F64), replicas=replicas)


def loop_reference(model: BlockLinear, *, Q: int, eta: float, theta0, replicas: int, rounds: int,
                   generator: torch.Generator) -> torch.Tensor:
    """||grad L(theta^{rQ})||^2 [replicas, rounds], one replica, silo and client at a time."""
    lay = model.layout
    X, y = model.X, model.y
    starts = [0, *torch.tensor(lay.blocks).cumsum(0).tolist()]
    cols = [slice(starts[j], starts[j + 1]) for j in range(lay.N)]
    hubs = [[theta0[c].clone() for c in cols] for _ in range(replicas)]
    out = torch.empty(replicas, rounds, dtype=F64)
    for r in range(rounds):
        for i in range(replicas):
            theta = torch.cat(hubs[i])
            slope = -y * torch.sigmoid(-y * (X @ theta))
            out[i, r] = ((slope @ X) / lay.n).square().sum()
        batches = draw_batch(lay, replicas, generator, "cpu")
        for i in range(replicas):
            rows = batches[i]
            phi = [X[rows][:, cols[j]] @ hubs[i][j] for j in range(lay.N)]
            total = sum(phi)
            new_hub = []
            for j in range(lay.N):
                b = lay.batch // lay.clients[j]
                stale = total - phi[j]
                models = []
                for k in range(lay.clients[j]):
                    mine, other = rows[k * b:(k + 1) * b], stale[k * b:(k + 1) * b]
                    xs, ys = X[mine][:, cols[j]], y[mine]
                    w = hubs[i][j].clone()
                    for _ in range(Q):
                        z = xs @ w + other
                        w = w - eta * ((-ys * torch.sigmoid(-ys * z)) @ xs) / b
                    models.append(w)
                new_hub.append(sum(models) / lay.clients[j])
            hubs[i] = new_hub
    return out



def compare(N: int, K: int, replicas: int, rounds: int, repeats: int,
            device: str = "cpu") -> tuple[float, float]:
    """Loop (on the CPU) and vectorised (on ``device``) seconds on the same scenario and
    draws; asserts equal traces."""
    sc = scenario(N, K, replicas)
    model = sc.pop("model")
    simulated = model if device == "cpu" else scenario(N, K, replicas, device=device)["model"]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    loop_s, loop = best_time(lambda: loop_reference(
        model, rounds=rounds, generator=torch.Generator().manual_seed(1), **sc), repeats)
    vec_s, trace = best_time(lambda: run_tdcd(
        simulated, rounds=rounds, generator=torch.Generator().manual_seed(1), **sc), 3 * repeats)
    torch.set_num_threads(threads)
    torch.testing.assert_close(trace.grad_sq_norm, loop, rtol=1e-10, atol=1e-12)
    return loop_s, vec_s


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small smoke-test sizes (< 20 s)")
    add_device_argument(parser)
    args = parser.parse_args(argv)
    device = checked_device(parser, args.device)
    configs = [(2, 4, 1), (2, 4, 16), (4, 10, 16)] if args.quick else \
        [(2, 4, 1), (2, 4, 64), (4, 10, 64), (8, 20, 64)]
    rounds, repeats = (5, 1) if args.quick else (10, 2)
    print(f"TDCD, logistic regression, 3 features per silo, Q = 5, {rounds} rounds, "
          "traces equal to 1e-10")
    print(f"{'N':>3} {'K_j':>4} {'replicas':>8} | {'loop s':>9} | {'vectorised s':>12} | {'ratio':>7}")
    entries = []
    for N, K, replicas in configs:
        loop_s, vec_s = compare(N, K, replicas, rounds, repeats, device)
        print(f"{N:>3} {K:>4} {replicas:>8} | {loop_s:>9.4f} | {vec_s:>12.4f} | "
              f"{loop_s / vec_s:>6.1f}x")
        entries.append(figure(f"tdcd{suffix(device)}.loop_over_vectorised.N{N}_K{K}_R{replicas}",
                              loop_s / vec_s, "ratio"))
    record(entries)


if __name__ == "__main__":
    main()
