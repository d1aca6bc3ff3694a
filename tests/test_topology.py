"""Hub graphs, hub matrices, Assumption 2 and zeta (bounds/topology.py)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedbound.bounds.topology import (
    GRAPH_KINDS,
    diffusion_alpha_bound,
    hub_graph,
    hub_matrix,
    hub_weights,
    is_connected,
    validate_hub_matrix,
    weighted_op_norm,
    worker_matrices,
    zeta,
)


def second_modulus(H):
    """Second largest |eigenvalue| of H from the general (non-symmetric) eigensolver."""
    moduli = np.sort(np.abs(np.linalg.eigvals(H)))[::-1]
    return moduli[1] if moduli.size > 1 else 0.0


def probability_vector(draw, size, low=0.05):
    raw = np.array(draw(st.lists(st.floats(low, 1.0), min_size=size, max_size=size)))
    return raw / raw.sum()


@st.composite
def hub_setups(draw):
    kind = draw(st.sampled_from(GRAPH_KINDS))
    D = draw(st.integers(1, 8))
    adj = hub_graph(kind, D, seed=draw(st.integers(0, 2**32 - 1)))
    b = probability_vector(draw, D)
    rules = ["mh", "diffusion"] + (["complete"] if kind == "complete" else [])
    return adj, b, draw(st.sampled_from(rules))


@st.composite
def worker_setups(draw):
    adj, _, rule = draw(hub_setups())
    D = adj.shape[0]
    sizes = draw(st.lists(st.integers(1, 4), min_size=D, max_size=D))
    hub_of = np.array(draw(st.permutations(np.repeat(np.arange(D), sizes).tolist())))
    w = np.array(draw(st.lists(st.floats(0.1, 10.0), min_size=hub_of.size, max_size=hub_of.size)))
    _, _, b = hub_weights(hub_of, w)
    H = hub_matrix(adj, b, rule)
    return hub_of, w, H, adj


# ---------------------------------------------------------------- graphs


@pytest.mark.parametrize(
    "kind, D, edges",
    [
        ("complete", 6, 15),
        ("path", 6, 5),
        ("ring", 6, 6),
        ("ring", 2, 1),
        ("ring", 3, 3),
        ("star", 6, 5),
        ("grid", 12, 17),
        ("grid", 7, 6),
        ("complete", 1, 0),
        ("random", 1, 0),
    ],
)
def test_graph_edge_counts(kind, D, edges):
    adj = hub_graph(kind, D, seed=0)
    assert adj.dtype == bool and adj.shape == (D, D)
    assert (adj == adj.T).all() and not adj.diagonal().any()
    assert adj.sum() // 2 == edges
    assert is_connected(adj)


def test_grid_shape_and_default_is_most_square():
    assert (hub_graph("grid", 12) == hub_graph("grid", 12, shape=(3, 4))).all()
    assert hub_graph("grid", 12, shape=(2, 6)).sum() // 2 == 2 * 5 + 6
    with pytest.raises(ValueError, match=r"shape=\(3, 5\).*not D = 12"):
        hub_graph("grid", 12, shape=(3, 5))


@given(D=st.integers(1, 15), seed=st.integers(0, 2**32 - 1), edge_prob=st.floats(0, 1))
@settings(max_examples=40, deadline=None)
def test_random_graph_connected_and_reproducible(D, seed, edge_prob):
    adj = hub_graph("random", D, seed=seed, edge_prob=edge_prob)
    assert is_connected(adj)
    assert (adj == hub_graph("random", D, seed=seed, edge_prob=edge_prob)).all()
    assert (adj == adj.T).all() and not adj.diagonal().any()


def test_random_graph_without_extra_edges_is_a_tree():
    adj = hub_graph("random", 20, seed=3, edge_prob=0.0)
    assert adj.sum() // 2 == 19 and is_connected(adj)


def test_is_connected_detects_two_components():
    adj = np.zeros((4, 4), dtype=bool)
    adj[0, 1] = adj[1, 0] = adj[2, 3] = adj[3, 2] = True
    assert not is_connected(adj)


# ---------------------------------------------------------------- weights


def test_hub_weights_by_hand():
    v, a, b = hub_weights([0, 0, 1], [1.0, 3.0, 4.0])
    np.testing.assert_allclose(v, [0.25, 0.75, 1.0])
    np.testing.assert_allclose(a, [1 / 8, 3 / 8, 4 / 8])
    np.testing.assert_allclose(b, [0.5, 0.5])


# ---------------------------------------------------------------- zeta: known values


@pytest.mark.parametrize("D", range(3, 31))
def test_path_mh_uniform_zeta_closed_form(D):
    b = np.full(D, 1 / D)
    H = hub_matrix(hub_graph("path", D), b)
    laplacian = np.diag(hub_graph("path", D).sum(0)) - hub_graph("path", D)
    np.testing.assert_allclose(H, np.eye(D) - laplacian / 3, atol=1e-15)
    assert zeta(H, b) == pytest.approx((1 + 2 * np.cos(np.pi / D)) / 3, rel=1e-12)


@pytest.mark.parametrize("D, expected", [(5, 0.87268), (10, 0.96737), (20, 0.99179)])
def test_path_zeta_matches_guide_values(D, expected):
    b = np.full(D, 1 / D)
    assert zeta(hub_matrix(hub_graph("path", D), b, "mh"), b) == pytest.approx(expected, abs=5e-6)


@given(data=st.data(), D=st.integers(1, 12))
@settings(max_examples=30, deadline=None)
def test_complete_graph_rank_one_matrix_has_zeta_zero(data, D):
    b = probability_vector(data.draw, D)
    H = hub_matrix(hub_graph("complete", D), b)
    np.testing.assert_allclose(H, np.outer(b, np.ones(D)))
    assert zeta(H, b) < 1e-12


def test_two_hub_path_mh_is_complete_average():
    b = np.array([0.5, 0.5])
    H = hub_matrix(hub_graph("path", 2), b, "mh")
    np.testing.assert_allclose(H, np.full((2, 2), 0.5))
    assert zeta(H, b) < 1e-15


def test_single_hub():
    H = hub_matrix(hub_graph("path", 1), [1.0], "diffusion")
    np.testing.assert_array_equal(H, [[1.0]])
    assert zeta(H, [1.0]) == 0.0


# ---------------------------------------------------------------- properties of H


@given(hub_setups())
@settings(max_examples=80, deadline=None)
def test_constructed_hub_matrices_satisfy_assumption_2(setup):
    adj, b, rule = setup
    H = hub_matrix(adj, b, rule)
    assert validate_hub_matrix(H, b, adj) is None
    np.testing.assert_allclose(H @ b, b, atol=1e-12)
    np.testing.assert_allclose(H.sum(axis=0), 1.0, atol=1e-12)
    z = zeta(H, b)
    assert 0.0 <= z < 1.0
    assert z == pytest.approx(second_modulus(H), abs=1e-9)


# ---------------------------------------------------------------- worker matrices


@given(worker_setups())
@settings(max_examples=60, deadline=None)
def test_worker_matrix_identities(setup):
    hub_of, w, H, _ = setup
    m = worker_matrices(hub_of, w, H)
    N, ones = hub_of.size, np.ones(hub_of.size)
    np.testing.assert_allclose(m.a, m.v * m.b[hub_of], atol=1e-15)
    for T in (m.Z, m.V):
        np.testing.assert_allclose(T @ m.a, m.a, atol=1e-12)
        np.testing.assert_allclose(ones @ T, ones, atol=1e-12)
        np.testing.assert_allclose(T @ m.A, m.A, atol=1e-12)
        np.testing.assert_allclose(m.A @ T, m.A, atol=1e-12)
    np.testing.assert_allclose(m.V @ m.V, m.V, atol=1e-12)
    np.testing.assert_allclose(m.Z @ m.V, m.Z, atol=1e-12)
    np.testing.assert_allclose(m.V @ m.Z, m.Z, atol=1e-12)
    weighted = m.Z @ np.diag(m.a)
    np.testing.assert_allclose(weighted, weighted.T, atol=1e-12)
    spec_Z = np.sort(np.linalg.eigvals(m.Z).real)
    spec_H = np.sort(np.concatenate([np.linalg.eigvals(H).real, np.zeros(N - H.shape[0])]))
    np.testing.assert_allclose(spec_Z, spec_H, atol=1e-7)


@given(worker_setups())
@settings(max_examples=60, deadline=None)
def test_corrected_lemma_5_in_the_weighted_norm(setup):
    hub_of, w, H, _ = setup
    m = worker_matrices(hub_of, w, H)
    z = zeta(H, m.b)
    for j in (1, 2, 3):
        Zj = np.linalg.matrix_power(m.Z, j)
        assert weighted_op_norm(Zj - m.A, m.a) == pytest.approx(z**j, abs=1e-9)
    if hub_of.size > 1:
        assert weighted_op_norm(np.eye(hub_of.size) - m.A, m.a) == pytest.approx(1.0, abs=1e-9)
    if H.shape[0] > 1:
        assert weighted_op_norm(m.V - m.A, m.a) == pytest.approx(1.0, abs=1e-9)


def test_plain_spectral_norm_breaks_lemma_5_for_non_uniform_a():
    hub_of = np.array([0, 0, 0, 1, 2, 2, 3])
    w = np.array([1.0, 2.0, 3.0, 4.0, 1.0, 5.0, 2.0])
    _, _, b = hub_weights(hub_of, w)
    H = hub_matrix(hub_graph("path", 4), b)
    m = worker_matrices(hub_of, w, H)
    z = zeta(H, m.b)
    identity = np.eye(hub_of.size)
    assert weighted_op_norm(m.Z - m.A, m.a) == pytest.approx(z, abs=1e-12)
    assert abs(np.linalg.norm(m.Z - m.A, 2) - z) > 1e-2
    assert weighted_op_norm(identity - m.A, m.a) == pytest.approx(1.0, abs=1e-12)
    assert np.linalg.norm(identity - m.A, 2) > 1.05


def test_worker_matrices_entries_and_orientation_match_algorithm_1():
    hub_of = np.array([1, 0, 1, 2, 0])
    w = np.array([2.0, 1.0, 1.0, 3.0, 4.0])
    v, _, b = hub_weights(hub_of, w)
    H = hub_matrix(hub_graph("path", 3), b)
    m = worker_matrices(hub_of, w, H)
    for i in range(5):
        for j in range(5):
            assert m.Z[i, j] == pytest.approx(H[hub_of[i], hub_of[j]] * v[i], abs=1e-15)
            assert m.V[i, j] == (v[i] if hub_of[i] == hub_of[j] else 0.0)
    X = np.random.default_rng(0).normal(size=(3, 5))
    z = np.stack([X[:, hub_of == d] @ v[hub_of == d] for d in range(3)], axis=1)
    y = np.stack([sum(H[j, d] * z[:, j] for j in range(3)) for d in range(3)], axis=1)
    np.testing.assert_allclose(X @ m.Z, y[:, hub_of], atol=1e-14)
    np.testing.assert_allclose(X @ m.V, z[:, hub_of], atol=1e-14)


# ---------------------------------------------------------------- errors


def test_non_stochastic_matrix_rejected():
    b = np.full(4, 0.25)
    adj = hub_graph("path", 4)
    H = hub_matrix(adj, b)
    H[:, 2] *= 0.9
    with pytest.raises(ValueError,
                       match=r"H\[:, 2\] sums to 0\.9.*not 1.*2b.*Castiglia et al\. 2021, Section 4"):
        validate_hub_matrix(H, b, adj)
    with pytest.raises(ValueError, match=r"H\[:, 2\] sums to"):
        zeta(H, b)


def printed_form_matrix():
    """Column-stochastic H on a 3-path with b_i H_ij symmetric (printed 2c), Hb != b."""
    b = np.array([0.2, 0.3, 0.5])
    s = 0.05
    S = np.array(
        [
            [b[0] * (1 - s / b[1]), s, 0.0],
            [s, b[1] * (1 - s / b[0] - s / b[2]), s],
            [0.0, s, b[2] * (1 - s / b[1])],
        ]
    )
    return S / b[:, None], b


def test_printed_form_of_2c_is_rejected_and_named():
    H, b = printed_form_matrix()
    np.testing.assert_allclose(H.sum(axis=0), 1.0)
    assert np.allclose(b[:, None] * H, (b[:, None] * H).T)
    assert not np.allclose(H @ b, b)
    adj = hub_graph("path", 3)
    with pytest.raises(ValueError, match=r"Castiglia et al\. 2021, proof of Proposition 1, \(32\)"
                                         r".*printed 2c.*indices reversed"):
        validate_hub_matrix(H, b, adj)
    with pytest.raises(ValueError, match=r"indices reversed"):
        zeta(H, b)


def test_proof_form_violation_without_printed_form_does_not_blame_indices():
    b = np.array([0.2, 0.3, 0.5])
    adj = hub_graph("path", 3)
    H = hub_matrix(adj, np.full(3, 1 / 3))
    with pytest.raises(ValueError, match=r"\(32\)") as info:
        validate_hub_matrix(H, b, adj)
    assert "reversed" not in str(info.value)


def test_disconnected_graph_rejected():
    adj = np.zeros((4, 4), dtype=bool)
    adj[0, 1] = adj[1, 0] = adj[2, 3] = adj[3, 2] = True
    b = np.full(4, 0.25)
    with pytest.raises(ValueError, match=r"disconnected: zeta = 1.*Castiglia et al\. 2021, Section 4"):
        hub_matrix(adj, b)
    H = np.kron(np.eye(2), np.full((2, 2), 0.5))
    with pytest.raises(ValueError, match=r"disconnected"):
        validate_hub_matrix(H, b, adj)
    assert zeta(H, b) == pytest.approx(1.0)


def test_periodic_matrix_rejected():
    H = np.array([[0.0, 1.0], [1.0, 0.0]])
    b = np.array([0.5, 0.5])
    with pytest.raises(ValueError, match=r"H\[0, 0\] = 0: the diagonal must be positive.*zeta = 1"):
        validate_hub_matrix(H, b, hub_graph("path", 2))
    assert zeta(H, b) == pytest.approx(1.0)


def test_sparsity_violations_rejected():
    b = np.full(3, 1 / 3)
    adj = hub_graph("path", 3)
    with pytest.raises(ValueError, match=r"H\[0, 2\].*not an edge.*2a"):
        validate_hub_matrix(np.full((3, 3), 1 / 3), b, adj)
    with pytest.raises(ValueError, match=r"H\[0, 1\] = 0 but \(0, 1\) is an edge"):
        validate_hub_matrix(np.eye(3), b, adj)
    H = hub_matrix(adj, b)
    H[0, 1] -= 0.5
    H[1, 1] += 0.5
    with pytest.raises(ValueError, match=r"H\[0, 1\] = -0\.1.* < 0: H must be nonnegative"):
        validate_hub_matrix(H, b, adj)


def test_bad_weights_rejected():
    with pytest.raises(ValueError, match=r"w\[1\] = -1 <= 0"):
        hub_weights([0, 0, 1], [1.0, -1.0, 2.0])
    with pytest.raises(ValueError, match=r"hub 1 has no workers"):
        hub_weights([0, 2, 2], [1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match=r"b\[2\] = 0 <= 0"):
        hub_matrix(hub_graph("path", 3), [0.5, 0.5, 0.0])
    with pytest.raises(ValueError, match=r"b sums to 0\.9"):
        hub_matrix(hub_graph("path", 3), [0.3, 0.3, 0.3])


def test_unknown_kind_and_rule_rejected():
    with pytest.raises(ValueError, match=r"kind='tree' is unknown.*complete, path, ring"):
        hub_graph("tree", 4)
    with pytest.raises(ValueError, match=r"rule='max' is unknown.*mh"):
        hub_matrix(hub_graph("path", 4), np.full(4, 0.25), "max")
    with pytest.raises(ValueError, match=r"rule='complete' needs a complete hub graph"):
        hub_matrix(hub_graph("path", 4), np.full(4, 0.25), "complete")


@pytest.mark.parametrize("factor", [0.0, -1.0, 1.0, 1.5])
def test_diffusion_alpha_out_of_range_rejected(factor):
    adj, b = hub_graph("star", 5), np.array([0.4, 0.1, 0.2, 0.2, 0.1])
    bound = diffusion_alpha_bound(adj, b)
    assert bound == pytest.approx(0.1)
    with pytest.raises(ValueError, match=r"alpha=.* is outside \(0, min_j b_j/deg_j\)"):
        hub_matrix(adj, b, "diffusion", alpha=factor * bound)
    validate_hub_matrix(hub_matrix(adj, b, "diffusion", alpha=0.99 * bound), b, adj)


def test_zeta_takes_the_negative_end_of_the_spectrum():
    """Eigenvalues 1, 0.05, -0.9: the second entry of a signed sort (0.05) is wrong."""
    H = np.array([[0.05, 0.475, 0.0], [0.95, 0.05, 0.95], [0.0, 0.475, 0.05]])
    b = np.array([0.25, 0.5, 0.25])
    validate_hub_matrix(H, b, hub_graph("path", 3))
    np.testing.assert_allclose(np.sort(np.linalg.eigvals(H).real), [-0.9, 0.05, 1.0], atol=1e-12)
    assert zeta(H, b) == pytest.approx(0.9, abs=1e-12)
