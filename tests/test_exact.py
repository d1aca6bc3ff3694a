"""Exact-expectation mode for MLL-SGD on the quadratic problem (verify.papers.mllsgd, exact mode)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedbound.bounds.topology import hub_graph, hub_matrix, hub_weights, worker_matrices
from fedbound.verify.papers.mllsgd import expected_averaged_model, expected_grad_sq_norms, expected_lhs

HUB_OF = np.array([0, 0, 1, 2])
W = np.array([1.0, 3.0, 2.0, 2.0])


def matrices(kind="path", hub_of=HUB_OF, w=W):
    _, _, b = hub_weights(hub_of, w)
    H = hub_matrix(hub_graph(kind, b.size), b)
    return worker_matrices(hub_of, w, H)


def monte_carlo(lam, U, x1, x_star, sigma, p, m, eta, K, q, tau, replicas, seed):
    """Algorithm 1 in matrix form (5)-(6), R replicas at once; returns ||grad F(u_k)||^2 and
    U^T (u_k - x*) for k = 1..K, shapes [K, R] and [K, R, d]."""
    rng = np.random.default_rng(seed)
    d, N = lam.size, p.size
    A = U @ np.diag(lam) @ U.T
    X = np.broadcast_to(x1[:, None], (replicas, d, N)).copy()
    sq_norms, coords = np.empty((K, replicas)), np.empty((K, replicas, d))
    for k in range(1, K + 1):
        offset = X @ m.a - x_star
        sq_norms[k - 1] = ((offset @ A) ** 2).sum(axis=-1)
        coords[k - 1] = offset @ U
        theta = rng.random((replicas, 1, N)) < p
        noise = rng.normal(0.0, sigma / np.sqrt(d), size=(replicas, d, N))
        G = A @ (X - x_star[:, None]) + noise
        T = m.Z if k % (q * tau) == 0 else m.V if k % tau == 0 else np.eye(N)
        X = (X - eta * theta * G) @ T
    return sq_norms, coords


def within_four_standard_errors(samples, exact):
    mean = samples.mean(axis=1)
    se = samples.std(axis=1, ddof=1) / np.sqrt(samples.shape[1])
    return np.abs(mean - exact) <= 4 * se + 1e-12 * (1 + np.abs(exact))


def test_exact_moments_match_monte_carlo():
    rng = np.random.default_rng(7)
    lam = np.array([0.5, 1.0, 2.0])
    U, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    x1, x_star = rng.normal(size=3), rng.normal(size=3)
    y1 = U.T @ (x1 - x_star)
    p = np.array([0.9, 0.6, 0.75, 1.0])
    m = matrices()
    args = dict(eta=0.15, K=8, q=2, tau=2)
    exact = expected_grad_sq_norms(lam, y1, 1.5, p, m.a, m.V, m.Z, **args)
    means = expected_averaged_model(lam, y1, p, m.a, m.V, m.Z, **args)
    sq_norms, coords = monte_carlo(lam, U, x1, x_star, 1.5, p, m, **args, replicas=20000, seed=1)
    assert within_four_standard_errors(sq_norms, exact).all()
    for c in range(3):
        assert within_four_standard_errors(coords[:, :, c], means[:, c]).all()
    assert sq_norms[0].std() == 0 and exact[0] == pytest.approx(sq_norms[0, 0], rel=1e-12)


def transposed_recursion(lam, y1, sigma, p, m, eta, K, q, tau):
    """The wrong orientation M <- T (M o C + noise) T^T, as for workers stored as rows."""
    d, N = lam.size, p.size
    s = 1 - eta * lam[:, None] * p
    C = s[:, :, None] * s[:, None, :]
    C[:, np.arange(N), np.arange(N)] = p * (1 - eta * lam[:, None]) ** 2 + 1 - p
    M = y1[:, None, None] ** 2 * np.ones((d, N, N))
    out = []
    for k in range(1, K + 1):
        out.append(np.sum(lam**2 * (m.a @ M @ m.a)))
        T = m.Z if k % (q * tau) == 0 else m.V if k % tau == 0 else np.eye(N)
        M = T @ (M * C + eta**2 * sigma**2 / d * np.diag(p)) @ T.T
    return np.array(out)


def test_monte_carlo_check_distinguishes_the_transposed_recursion():
    rng = np.random.default_rng(7)
    lam = np.array([0.5, 1.0, 2.0])
    U, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    x1, x_star = rng.normal(size=3), rng.normal(size=3)
    p, m = np.array([0.9, 0.6, 0.75, 1.0]), matrices()
    wrong = transposed_recursion(lam, U.T @ (x1 - x_star), 1.5, p, m, 0.15, 8, 2, 2)
    sq_norms, _ = monte_carlo(lam, U, x1, x_star, 1.5, p, m, 0.15, 8, 2, 2, 20000, seed=1)
    assert not within_four_standard_errors(sq_norms, wrong).all()


@given(
    lam=st.lists(st.floats(0.0, 2.0), min_size=1, max_size=4),
    eta=st.floats(0.01, 0.5),
    periods=st.integers(1, 3),
    q=st.integers(1, 3),
    tau=st.integers(1, 3),
    seed=st.integers(0, 2**32 - 1),
)
@settings(max_examples=40, deadline=None)
def test_full_participation_without_noise_is_gradient_descent(lam, eta, periods, q, tau, seed):
    lam = np.array(lam)
    y1 = np.random.default_rng(seed).normal(size=lam.size)
    m, K = matrices(), periods * q * tau
    ones = np.ones(4)
    got = expected_grad_sq_norms(lam, y1, 0.0, ones, m.a, m.V, m.Z, eta, K, q, tau)
    mean = expected_averaged_model(lam, y1, ones, m.a, m.V, m.Z, eta, K, q, tau)
    k = np.arange(K)[:, None]
    descent = (1 - eta * lam) ** k * y1
    # absolute floor: squared round-off of the initial gradient (at eta lam = 1 the descent is
    # 0 but the moments keep terms of (eps |grad|)^2)
    floor = (1e-14) ** 2 * (1 + ((lam * y1) ** 2).sum())
    # rtol: the two recursions round differently over up to 27 steps (1.9e-12 was seen)
    np.testing.assert_allclose(got, ((lam * descent) ** 2).sum(axis=1), rtol=1e-11, atol=floor)
    np.testing.assert_allclose(mean, descent, rtol=1e-12, atol=1e-15)


def test_full_participation_law_is_independent_of_q_tau_and_H():
    """Guide 7.1 E7: with p = 1, u_k is centralised SGD with noise sigma^2 sum a_i^2."""
    lam, y1, sigma, eta, K = np.array([0.3, 1.0, 1.7]), np.array([1.0, -2.0, 0.5]), 1.2, 0.2, 16
    ones = np.ones(4)
    values = []
    for kind in ("path", "complete"):
        m = matrices(kind)
        for q, tau in ((1, 1), (2, 2), (4, 1), (1, 4), (2, 8)):
            args = (lam, y1, sigma, ones, m.a, m.V, m.Z, eta, K, q, tau)
            values.append(expected_grad_sq_norms(*args))
    second = y1**2
    centralised = []
    for _ in range(K):
        centralised.append(np.sum(lam**2 * second))
        second = (1 - eta * lam) ** 2 * second + eta**2 * sigma**2 / 3 * np.sum(m.a**2)
    for value in values:
        np.testing.assert_allclose(value, centralised, rtol=1e-12)


def test_partial_participation_depends_on_topology():
    lam, y1 = np.array([0.3, 1.0, 1.7]), np.array([1.0, -2.0, 0.5])
    p = np.array([0.9, 0.6, 0.75, 1.0])
    lhs = [
        expected_lhs(lam, y1, 1.2, p, m.a, m.V, m.Z, 0.2, 16, 2, 2)
        for m in (matrices("path"), matrices("complete"))
    ]
    assert abs(lhs[0] - lhs[1]) > 1e-6 * lhs[1]


@given(p=st.floats(0.05, 1.0), eta=st.floats(0.01, 0.5), kind=st.sampled_from(["path", "complete"]))
@settings(max_examples=30, deadline=None)
def test_uniform_p_mean_is_topology_free(p, eta, kind):
    """Guide 7.2: E[u_k] - x* = (I - eta p A)^(k-1) (x1 - x*) for uniform p."""
    lam, y1, m = np.array([0.3, 1.0, 1.7]), np.array([1.0, -2.0, 0.5]), matrices(kind)
    mean = expected_averaged_model(lam, y1, np.full(4, p), m.a, m.V, m.Z, eta, 12, 3, 2)
    expected = (1 - eta * p * lam) ** np.arange(12)[:, None] * y1
    np.testing.assert_allclose(mean, expected, rtol=1e-11, atol=1e-15)


def test_expected_lhs_is_the_mean_over_k():
    m, p = matrices(), np.array([0.9, 0.6, 0.75, 1.0])
    args = (np.array([0.5, 2.0]), np.array([1.0, 1.0]), 0.7, p, m.a, m.V, m.Z, 0.1, 12, 3, 2)
    assert expected_lhs(*args) == pytest.approx(np.mean(expected_grad_sq_norms(*args)), rel=1e-15)


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(p=np.array([0.9, 0.0, 0.5, 1.0])), r"p\[1\] = 0 is outside \(0, 1\]"),
        (dict(p=np.array([0.9, 1.2, 0.5, 1.0])), r"p\[1\] = 1.2 is outside \(0, 1\]"),
        (dict(p=np.ones(3)), r"a has shape \(4,\), expected \(3,\)"),
        (dict(eta=0.0), r"eta=0.0 must be a finite number > 0"),
        (dict(sigma=-1.0), r"sigma=-1.0 must be a finite number >= 0"),
        (dict(K=10), r"K=10 is not a multiple of q \* tau = 4"),
        (dict(q=0), r"q=0 must be a positive integer"),
        (dict(eigenvalues=np.array([1.0, -0.5])), r"eigenvalues\[1\] = -0.5 must be"),
        (dict(y1=np.ones(3)), r"y1 has shape \(3,\), expected \(2,\)"),
        (dict(a=np.full(4, 0.3)), r"a sums to 1.2, not 1"),
        (dict(V=np.eye(3)), r"V has shape \(3, 3\), expected \(4, 4\)"),
        (dict(eta=50.0, K=2000, q=1, tau=1), r"eta=50.0: the moments overflow float64"),
    ],
)
def test_invalid_inputs_rejected(change, message):
    m = matrices()
    args = dict(
        eigenvalues=np.array([0.5, 2.0]),
        y1=np.array([1.0, 1.0]),
        sigma=0.7,
        p=np.array([0.9, 0.6, 0.75, 1.0]),
        a=m.a,
        V=m.V,
        Z=m.Z,
        eta=0.1,
        K=12,
        q=2,
        tau=2,
    )
    args.update(change)
    with pytest.raises(ValueError, match=message):
        expected_grad_sq_norms(**args)
