import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as hst

from helpers import space_time_operators as st


def _basin(n=60, seed=0, bias=0.0):
    rng = np.random.default_rng(seed)
    p = st.random_river_tree(n, rng, bias)
    return p, rng.uniform(1, 4, n), rng


def test_tree_structure():
    p, _, _ = _basin(200, bias=0.5)
    assert p[0] == -1 and np.all(p[1:] < np.arange(1, 200))
    assert np.bincount(p[1:], minlength=200).max() <= 2
    assert st.upstream_area(p)[0] == 200


def test_cycle_rejected():
    with pytest.raises(ValueError, match="cycle"):
        st.validate_tree(np.array([-1, 2, 3, 1]))
    with pytest.raises(ValueError, match="cycle"):
        st.tree_from_edges([(1, 2), (2, 1)], 3)
    with pytest.raises(ValueError, match="outlet"):
        st.validate_tree(np.array([-1, -1]))
    with pytest.raises(TypeError):
        st.validate_tree(np.array([0.5, -1.0]))


def test_coefficients_sum_to_one_and_nonnegative():
    c = st.muskingum_coeffs(np.linspace(0.6, 5.0, 50))
    assert np.allclose(sum(c), 1.0, atol=1e-14) and min(x.min() for x in c) >= 0
    with pytest.raises(ValueError):
        st.muskingum_coeffs(np.array([-1.0]))


@settings(max_examples=25, deadline=None)
@given(n=hst.integers(1, 80), seed=hst.integers(0, 10_000), bias=hst.floats(0, 1))
def test_spectral_equals_sequential(n, seed, bias):
    p, K, rng = _basin(n, seed, bias)
    q = st.lateral_inflow(n, 48, 2, rng)
    seq, spec = st.route_sequential(p, K, q), st.route_spectral(p, K, q)
    assert np.abs(seq - spec).max() <= 1e-10 * max(1.0, np.abs(seq).max())


def test_single_reach_matches_hand_recursion():
    q = np.array([[[0.0, 1.0, 2.0, 0.0, 0.0]]])
    c0, c1, c2 = st.muskingum_coeffs(np.array([2.0]))
    o, prev_i, prev_o = [], 0.0, 0.0
    for x in q[0, 0]:
        prev_o = c0[0] * x + c1[0] * prev_i + c2[0] * prev_o
        prev_i = x
        o.append(prev_o)
    assert np.allclose(st.route_sequential(np.array([-1]), [2.0], q)[0, 0], o)


@pytest.mark.parametrize("nonlinear", [False, True])
def test_mass_balance(nonlinear):
    p, K, rng = _basin(80)
    q = np.concatenate([st.lateral_inflow(80, 64, 2, rng), np.zeros((2, 80, 1500))], -1)
    out = st.route_sequential(p, K, q, nonlinear=nonlinear)
    assert abs(out[:, 0].sum() - q.sum()) / q.sum() < 1e-3
    assert nonlinear or out.min() >= -1e-12


def test_nonlinear_with_constant_k_is_linear():
    p, K, rng = _basin(30)
    q = st.lateral_inflow(30, 40, 1, rng)
    assert np.allclose(st.route_sequential(p, K, q, nonlinear=True, K_range=(1.0, 1.0)),
                       st.route_sequential(p, np.ones(30), q), atol=1e-12)


def test_nonlinear_differs_from_linear():
    p, K, rng = _basin(50)
    q = st.lateral_inflow(50, 64, 1, rng)
    assert np.abs(st.route_sequential(p, K, q, nonlinear=True) - st.route_sequential(p, K, q)).max() > 1e-3


def test_chebyshev_recursion_equals_dense():
    p, _, _ = _basin(40)
    P = st.area_weighted_operator(p).toarray()
    x = torch.randn(40, 3, dtype=torch.float64)
    rec = st.chebyshev_apply(torch.tensor(P), x, 5)
    for k in range(6):
        assert np.abs(rec[k].numpy() - st.chebyshev_dense(P, k) @ x.numpy()).max() < 1e-10
    L = st.grid_laplacian_operator(st.masked_grid(6, np.random.default_rng(1)))[1].toarray()
    assert np.abs(st.chebyshev_apply(torch.tensor(L), x[: L.shape[0]], 3)[3].numpy()
                  - st.chebyshev_dense(L, 3) @ x[: L.shape[0]].numpy()).max() < 1e-10


@pytest.mark.parametrize("mixer", ["cheb", "attention"])
def test_graph_independent_params_and_equivariance(mixer):
    torch.manual_seed(0)
    model = st.SepOperator(3, width=8, blocks=2, modes=4, order=2, mixer=mixer).eval()
    shapes = {k: v.shape for k, v in model.state_dict().items()}
    for n in (10, 30):
        p, _, _ = _basin(n, seed=n)
        op = st.to_torch_sparse(st.area_weighted_operator(p))
        x = torch.randn(n, 2, 16, 3)
        y = model(x, op)
        assert y.shape == (n, 2, 16, 1)
        perm = torch.randperm(n)
        Pm = st.area_weighted_operator(p).toarray()[perm.numpy()][:, perm.numpy()]
        yp = model(x[perm], torch.tensor(Pm, dtype=torch.float32))
        assert (yp - y[perm]).abs().max() < 1e-5
    assert shapes == {k: v.shape for k, v in model.state_dict().items()}


def test_bad_inputs():
    with pytest.raises(ValueError):
        st.SepOperator(3, mixer="gcn")
    with pytest.raises(ValueError):
        st.SepOperator(3)(torch.randn(5, 3), None)
    with pytest.raises(ValueError):
        st.route_sequential(np.array([-1, 0]), 2.0, np.zeros((3, 5)))
    with pytest.raises(ValueError):
        st.random_river_tree(0, np.random.default_rng(0))
    with pytest.raises(ValueError):
        st.r2_score(np.zeros(3), np.zeros(4))


def test_recurrent_baseline_and_diffusion():
    p, _, _ = _basin(12)
    op = st.to_torch_sparse(st.area_weighted_operator(p))
    assert st.RecurrentMP(2, hidden=8)(torch.randn(12, 2, 7, 2), op).shape == (12, 2, 7, 1)
    mask = st.masked_grid(8, np.random.default_rng(0))
    L, Lt = st.grid_laplacian_operator(mask)
    n = int(mask.sum())
    assert np.allclose(np.asarray(L.sum(1)).ravel(), 0) and np.linalg.eigvalsh(Lt.toarray()).max() <= 1 + 1e-12
    u = st.diffuse(L, np.ones((1, n)), np.zeros((1, n, 5)), decay=0.0)
    assert np.allclose(u, 1.0)  # no-flux walls conserve a constant state
    assert st.r2_score(np.arange(5.0), np.arange(5.0)) == 1.0
