"""The (Q, eta) chooser of TDCD (verify/papers/tdcd/choose.py QEta, `fedbound choose-q-eta`), checked against
independent computations: the default target from a finite-difference gradient at theta^0,
the refined variant's choice (derived by fedbound, not published) against a brute-force
search over steps of an independent transcription of its bound with K_j from the scenario,
the published variants' rounds against the bound itself, the simulated times against a
Python loop over the replicas of the same run, and the one-line message of a target no
configuration reaches."""

import json
import math

import numpy as np
import pytest
import torch
from scipy.stats import t as student_t
from tdcd_reference import refined_bound

from fedbound import bounds
from fedbound.sim.tdcd import run_tdcd
from fedbound.verify.api import choose
from fedbound.verify.cli import main
from fedbound.verify.papers import tdcd as V
from fedbound.verify.papers.tdcd.choose import QEta

torch.set_num_threads(1)
SCENARIO = V.Theorem1.default
REFINED = bounds.get("tdcd.theorem1", "refined")


@pytest.fixture(scope="module")
def default_report():
    """`fedbound choose-q-eta --json` with no options (the CLI's defaults)."""
    import io
    from contextlib import redirect_stdout

    buf = io.StringIO()
    with redirect_stdout(buf):
        code = main(["choose-q-eta", "--json"])
    assert code == 0
    return json.loads(buf.getvalue())


def constants():
    """L, L_max, Delta and sigma of the default scenario, straight from the model."""
    st = V.build(SCENARIO)
    m = st.model
    delta = float(m.loss(m.split(st.theta0)[None])[0]) - m.f_inf
    return m.L, m.L_max, delta, np.asarray(m.sigma, dtype=float)


def grad_sq_norm_fd() -> float:
    """||grad L(theta^0)||^2 by central differences of the loss (not the model's gradient)."""
    st = V.build(SCENARIO)
    m, th = st.model, st.theta0.clone()
    h, g = 1e-6, []
    for i in range(th.numel()):
        e = torch.zeros_like(th)
        e[i] = h
        f = [float(m.loss(m.split(th + s * e)[None])[0]) for s in (1, -1)]
        g.append((f[0] - f[1]) / (2 * h))
    return float(np.sum(np.square(g)))


def test_defaults_target_and_inputs(default_report):
    inp = default_report["inputs"]
    assert inp["t_comm"] == SCENARIO.t_comm and inp["t_comp"] == SCENARIO.t_comp
    g0 = grad_sq_norm_fd()
    assert inp["grad_sq_norm_0"] == pytest.approx(g0, rel=1e-6)
    assert inp["epsilon"] == pytest.approx(max(0.25 * g0, 2 * inp["noise_floor"]), rel=1e-6)
    assert 0 < inp["noise_floor"] < inp["epsilon"] < g0


def test_default_table_discriminates(default_report):
    sim = default_report["simulation"]
    finite = [float(o["loss"]) for o in sim if math.isfinite(float(o["loss"]))]  # JSON: "inf"
    assert len(set(finite)) >= 10 and max(finite) > 2 * min(finite)
    assert {o["settings"]["Q"] for o in sim} == {1, 2, 5, 10, 20}
    for Q in (1, 5, 20):  # factors of 2 from a quarter of the smallest eta_max(Q)
        etas = [o["settings"]["eta"] for o in sim if o["settings"]["Q"] == Q]
        tops = [bounds.get("tdcd.theorem1", v).max_step(
            L=constants()[0], L_max=constants()[1], Q=Q) for v in ("proof", "refined")]
        assert etas[0] == pytest.approx(min(tops) / 4, rel=1e-9)
        assert np.allclose(np.diff(np.log2(etas)), 1.0)
        top1 = bounds.get("tdcd.theorem1", "refined").max_step(L=constants()[0],
                                                                L_max=constants()[1], Q=1)
        hi = 2 * max(*tops, top1 / Q)  # up to twice the largest eta_max(Q), or eta_max(1) / Q
        assert etas[-1] <= hi * (1 + 1e-9) < 2 * etas[-1]
    best = default_report["best"]
    assert best["loss"] == min(finite)
    variants = {c["variant"]: c for c in default_report["bound"]}
    assert set(variants) == {"printed", "proof", "tight", "refined"}
    for c in variants.values():  # each choice simulated, relative to the best
        assert float(c["relative"]) == pytest.approx(float(c["simulated"]["loss"]) / best["loss"])


@pytest.mark.parametrize("t_comm", [1.0, 100.0])
def test_refined_choice_against_brute_force(t_comm):
    L, Lm, delta, sigma = constants()
    K = np.asarray(SCENARIO.clients, dtype=float)
    chooser = QEta(t_comm=t_comm, t_comp=1.0, Q_grid=(1, 2, 5), replicas=2)
    eps = chooser.epsilon
    choice = chooser.bound_choice("refined")
    for row in choice.curve:
        Q = row["Q"]
        top = REFINED.max_step(L=L, L_max=Lm, Q=Q)
        # brute force: the least R over 2,000 admissible steps, R = the first R with bound <= eps
        best = math.inf
        for eta in np.geomspace(top * 1e-4, top, 2000):
            lim = refined_bound(eta, Q, 1e300, L, Lm, sigma, K, delta)
            if lim >= eps:
                continue
            lo, hi = 1, 1
            while refined_bound(eta, Q, hi, L, Lm, sigma, K, delta) > eps:
                hi *= 2
            while lo < hi:
                mid = (lo + hi) // 2
                lo, hi = (mid + 1, hi) if refined_bound(eta, Q, mid, L, Lm, sigma, K, delta) > eps \
                    else (lo, mid)
            best = min(best, lo)
        assert best * 0.995 <= row["rounds"] <= best
        assert refined_bound(row["eta"], Q, row["rounds"], L, Lm, sigma, K, delta) <= eps * (1 + 1e-9)
        assert row["time"] == pytest.approx(row["rounds"] * (3 * t_comm + Q))
    # section 6 of the derivation: no Q needs fewer rounds than Q = 1, so Q = 1 is chosen
    assert all(r["rounds"] >= choice.curve[0]["rounds"] for r in choice.curve)
    assert choice.settings["Q"] == 1


def test_published_rounds_are_the_first_r_where_the_bound_reaches_epsilon():
    chooser = QEta(Q_grid=(1, 4), replicas=2)
    L, Lm, delta, sigma = constants()
    for variant in ("proof", "tight"):
        thm = bounds.get("tdcd.theorem1", variant)
        for row in chooser.bound_choice(variant).curve:
            p = dict(L=L, L_max=Lm, Delta=delta, sigma=sigma, Q=row["Q"], eta=row["eta"])
            assert thm.evaluate(**p, R=row["rounds"]) <= chooser.epsilon * (1 + 1e-9)
            assert thm.evaluate(**p, R=row["rounds"] - 1) > chooser.epsilon


def test_simulated_times_against_a_loop_over_replicas():
    chooser = QEta(t_comm=10.0, t_comp=1.0, Q_grid=(2,), replicas=4)
    grid = chooser.candidates()
    options = chooser.simulate(grid)
    etas = [row["eta"] for row in grid]
    st = V.build(SCENARIO)
    rounds = math.ceil(150 * 31 / 32)
    tr = run_tdcd(st.model, eta=torch.tensor(etas, dtype=torch.float64).repeat_interleave(4), Q=2,
                  rounds=rounds, theta0=st.theta0, replicas=4 * len(etas), generator=st.generator,
                  t_comm=10.0, t_comp=1.0)
    g = tr.grad_sq_norm.numpy()
    for k, o in enumerate(options):
        times = []
        for r in range(4 * k, 4 * k + 4):
            total, hit = 0.0, math.inf
            for i in range(rounds):
                total += g[r, i]
                if total / (i + 1) <= chooser.epsilon:
                    hit = (i + 1) * 32.0
                    break
            times.append(hit)
        assert o.loss == pytest.approx(np.mean(times))
        if all(math.isfinite(x) for x in times):
            half = student_t.ppf(0.975, 3) * np.std(times, ddof=1) / 2
            assert o.ci == pytest.approx(half)
        else:
            assert o.ci == math.inf


def test_a_target_nobody_reaches_is_said_in_one_line(capsys):
    report = choose(QEta(epsilon=1e-12, Q_grid=(1,), replicas=2), variants=["refined"])
    assert report.best is None and "\n" not in report.message
    assert report.message.startswith("No configuration reaches epsilon = 1e-12")
    code = main(["choose-q-eta", "--epsilon", "1e-12", "--Q", "1", "--replicas", "2",
                 "--variant", "refined"])
    assert code == 0 and report.message in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["--replicas", "1"], "replicas=1"),
    (["--t-comm", "0", "--t-comp", "0"], "t_comm + t_comp > 0"),
])
def test_bad_input(capsys, argv, message):
    code = main(["choose-q-eta", *argv])
    assert code == 2 and message in capsys.readouterr().err
