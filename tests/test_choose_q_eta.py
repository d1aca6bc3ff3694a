"""The (Q, eta) chooser of TDCD (verify/papers/tdcd/choose.py QEta, `fedbound choose-q-eta`), checked against
independent computations: the default target from a finite-difference gradient at theta^0,
the refined variant's choice (derived by fedbound, not published) against a brute-force
search over steps of an independent transcription of its bound with K_j from the scenario,
the published variants' rounds against the bound itself, the simulated times against a
Python loop over the replicas of the same run, the calibrated prediction on least squares
against the exact moments of Q = 1 (mini-batch SGD), and the one-line message of a target
no configuration reaches."""

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


def test_default_grid_and_answers(default_report):
    """The eta grid: factors of 2 from a quarter of the smallest eta_max(Q) of the valid
    variants up to at most twice the largest; every answer simulated, the simulated one the
    best, each regret >= 0."""
    L, Lm = constants()[:2]
    tops = [bounds.get("tdcd.theorem1", v).max_step(L=L, L_max=Lm, Q=Q)
            for v in ("proof", "tight", "refined") for Q in (1, 2, 5, 10, 20)]
    curve = default_report["simulated"]["curve"] if "curve" in default_report["simulated"] else None
    assert curve is None  # no per-configuration curves without --curves
    assert default_report["knobs"] == ["Q", "eta"]
    chooser = QEta()
    Q_knob, eta_knob = chooser.knobs()
    assert Q_knob.values == (1, 2, 5, 10, 20)
    assert eta_knob.values[0] == pytest.approx(min(tops) / 4, rel=1e-9)
    assert np.allclose(np.diff(np.log2(eta_knob.values)), 1.0)
    assert eta_knob.values[-1] <= 2 * max(tops) * (1 + 1e-9) < 2 * eta_knob.values[-1]
    answers = [*default_report["certified"], default_report["calibrated"], default_report["simulated"]]
    assert {c["variant"] for c in default_report["certified"]} == {"proof", "tight", "refined"}
    finite = [float(a["value"]) for a in answers if math.isfinite(float(a["value"]))]  # JSON: "inf"
    assert default_report["simulated"]["value"] == min(finite)
    # every answer's regret is against the best, >= 0; the best's own against the best other
    # answer (how far ahead it is): <= 0, never 0 +- 0 against itself
    best = {a["regret_against"] for a in answers if "regret_against" in a}
    assert len(best) == 1 and default_report["simulated"]["regret_against"] in best
    assert all((float(a["regret"]) <= 0) == ("regret_against" in a) or float(a["regret"]) == 0
               for a in answers)


@pytest.mark.parametrize("t_comm", [1.0, 100.0])
def test_refined_choice_against_brute_force(t_comm):
    L, Lm, delta, sigma = constants()
    K = np.asarray(SCENARIO.clients, dtype=float)
    chooser = QEta(t_comm=t_comm, t_comp=1.0, Q=(1, 2, 5), replicas=2)
    eps = chooser.epsilon
    choice = chooser.certified("refined")
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
    chooser = QEta(Q=(1, 4), replicas=2)
    L, Lm, delta, sigma = constants()
    for variant in ("proof", "tight"):
        thm = bounds.get("tdcd.theorem1", variant)
        for row in chooser.certified(variant).curve:
            p = dict(L=L, L_max=Lm, Delta=delta, sigma=sigma, Q=row["Q"], eta=row["eta"])
            assert thm.evaluate(**p, R=row["rounds"]) <= chooser.epsilon * (1 + 1e-9)
            assert thm.evaluate(**p, R=row["rounds"] - 1) > chooser.epsilon


def test_simulated_times_against_a_loop_over_replicas():
    chooser = QEta(t_comm=10.0, t_comp=1.0, Q=(2,), replicas=4)
    grid = [{"Q": 2, "eta": eta} for eta in chooser.knobs()[1].values]
    options = chooser.simulate(grid, 4, paired=False)
    etas = [row["eta"] for row in grid]
    st = V.build(SCENARIO)
    rounds = math.ceil(150 * 31 / 32)
    state = st.generator.get_state()
    for k, o in enumerate(options):  # each step alone, on the draws of every other (common)
        tr = run_tdcd(st.model, eta=torch.full((4,), etas[k], dtype=torch.float64), Q=2,
                      rounds=rounds, theta0=st.theta0, replicas=4,
                      generator=torch.Generator().set_state(state), t_comm=10.0, t_comp=1.0)
        g = tr.grad_sq_norm.numpy()
        times = []
        for r in range(4):
            total, hit = 0.0, math.inf
            for i in range(rounds):
                total += g[r, i]
                if total / (i + 1) <= chooser.epsilon:
                    hit = (i + 1) * 32.0
                    break
            times.append(hit if not tr.diverged[r] else math.inf)
        assert o.value == pytest.approx(np.mean(times))
        if all(math.isfinite(x) for x in times):
            half = student_t.ppf(0.975, 3) * np.std(times, ddof=1) / 2
            assert o.ci == pytest.approx(half)
        else:
            assert o.ci == math.inf


def test_calibrated_prediction_on_least_squares_at_q1_is_minibatch_sgd_exactly():
    """On least squares with one client per silo and Q = 1, a round is one step of mini-batch
    SGD on the union batch: with e = theta - theta_ref and u_p(e) = x_p x_p^T e + r_p x_p the
    per-sample gradients (r_p the residual at theta_ref), e' = (I - eta H) e - eta xi with
    E[xi | e] = 0 and Cov(xi | e) = (n - b)/(b (n - 1)) Cov_p(u_p(e)) (b samples drawn without
    replacement), so the second moment S = E[e e^T] follows a closed form in S and m = E[e].
    The prediction's E||grad L||^2 = tr(H S H) matches it up to the Monte-Carlo average over
    its drawn batches (4000 here)."""
    from fedbound.verify.papers.tdcd import predict

    s = SCENARIO.replace(loss="squared", label_noise=0.5, clients=[1, 1], batch=12)
    st = V.build(s)
    m = st.model
    X, y = m.X.numpy(), m.y.numpy()
    n, b, eta = X.shape[0], 12, 0.5 / m.L
    H = X.T @ X / n
    ref = np.linalg.lstsq(X, y, rcond=None)[0]
    theta0 = st.theta0.numpy()
    points = predict.anchors(m, np.stack([np.random.default_rng(k).choice(n, b, replace=False)
                                          for k in range(4000)]), theta0, ref)
    curve = predict.grad_sq_curves(m, points, theta0, 1, [eta], 6)[0]
    r = X @ ref - y
    outer = np.einsum("pi,pj->pij", X, X)                        # x_p x_p^T
    f = (n - b) / (b * (n - 1))
    A = np.eye(X.shape[1]) - eta * H
    mean, second = theta0 - ref, np.outer(theta0 - ref, theta0 - ref)
    exact = []
    for _ in range(6):
        exact.append(float(np.trace(H @ second @ H)))
        xm = X @ mean
        moments = (np.einsum("pij,jk,pkl->il", outer, second, outer)
                   + np.einsum("p,pi,pj->ij", r * xm, X, X) * 2 + np.einsum("p,pij->ij", r**2, outer)) / n
        second = A @ second @ A + eta**2 * f * (moments - H @ second @ H)
        mean = A @ mean
    assert curve[0] == pytest.approx(exact[0], rel=1e-12)
    assert curve[1:] == pytest.approx(exact[1:], rel=0.03)


def test_calibrated_moments_are_the_average_over_batches_written_out():
    """grad_sq_curves' round recursion, vectorised over steps, batches and anchors, against
    the moments written out batch by batch for one step at a time (logistic regression: the
    anchor nearest the mean picks the round's maps; Q = 3 local steps)."""
    from fedbound.verify.papers.tdcd import predict

    s = SCENARIO.replace(loss="logistic", clients=[2, 1], batch=8)
    st = V.build(s)
    m = st.model
    n = m.X.shape[0]
    batches = np.stack([np.random.default_rng(k).choice(n, 8, replace=False) for k in range(12)])
    theta0 = st.theta0.numpy()
    points = predict.anchors(m, batches, theta0, predict.reference(m))
    etas, Q, rounds = [0.2 / m.L, 1.0 / m.L, 3.0 / m.L], 3, 5
    curves = predict.grad_sq_curves(m, points, theta0, Q, etas, rounds)
    where = np.stack([a.anchor for a in points])
    for eta, curve in zip(etas, curves, strict=True):
        mean, second = theta0.copy(), np.outer(theta0, theta0)
        for r in range(rounds):
            point = points[int(np.argmin(((where - mean) ** 2).sum(-1)))]
            H = point.hessian
            expected = (predict.gradient(m, mean) ** 2).sum() + np.trace(
                H @ H @ (second - np.outer(mean, mean)))
            assert curve[r] == pytest.approx(expected, rel=1e-10)
            A, b = point.maps(Q, eta)
            second = np.mean([a @ second @ a.T + np.outer(a @ mean, c) + np.outer(c, a @ mean)
                              + np.outer(c, c) for a, c in zip(A, b, strict=True)], axis=0)
            mean = A.mean(0) @ mean + b.mean(0)


def test_a_target_nobody_reaches_is_said_in_one_line(capsys):
    report = choose(QEta(epsilon=1e-12, Q=1, replicas=2), variants=["refined"])
    assert not math.isfinite(report.simulated.value) and "\n" not in report.message
    assert report.message.startswith("No simulated configuration reached a finite wall-clock time")
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
