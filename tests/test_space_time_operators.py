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


# --------------------------------------------------------------------------------------- unbounded-reach mixer
def test_sweep_equals_dense_solve_and_is_differentiable():
    p, _, _ = _basin(70, seed=3, bias=0.6)
    g = st.RiverGraph(p)
    P = st.area_weighted_operator(p).toarray()
    rng = np.random.default_rng(0)
    H = torch.tensor(0.9 * rng.uniform(size=70) * np.exp(1j * rng.uniform(-1, 1, 70)), requires_grad=True)
    s = torch.tensor(rng.normal(size=(70, 3)) + 1j * rng.normal(size=(70, 3)))
    y = st.upstream_sweep(g, H[:, None], s)
    ref = np.linalg.solve(np.eye(70) - np.diag(H.detach().numpy()) @ P, H.detach().numpy()[:, None] * s.numpy())
    assert np.abs(y.detach().numpy() - ref).max() < 1e-12
    y.abs().sum().backward()
    assert H.grad is not None and torch.isfinite(H.grad).all()
    # reach is unbounded: a headwater's source reaches the outlet however deep the basin is
    e = torch.zeros(70, dtype=torch.complex128)
    deepest = int(g.levels[-1][0])
    e[deepest] = 1
    assert abs(st.upstream_sweep(g, torch.full((70,), 0.9 + 0j, dtype=torch.complex128), e)[0]) > 0
    assert g.depth > 8


def _sweep_muskingum(p, K, q, H_scale=1.0):
    g = st.RiverGraph(p)
    a = g.area.double()
    M = 8 * q.shape[-1]
    c0, c1, c2 = (torch.tensor(v) for v in st.muskingum_coeffs(K))
    z = torch.exp(-2j * torch.pi * torch.arange(M // 2 + 1, dtype=torch.float64) / M)
    H = H_scale * (c0[:, None] + c1[:, None] * z) / (1 - c2[:, None] * z)
    S = torch.fft.rfft(torch.tensor(q).permute(1, 0, 2) / a[:, None, None], n=M)
    Y = st.upstream_sweep(g, H[:, None], S)
    return (torch.fft.irfft(Y, n=M)[..., : q.shape[-1]] * a[:, None, None]).permute(1, 0, 2).numpy()


def test_sweep_with_muskingum_filters_is_exact_routing_and_a_wrong_filter_fails():
    p, K, rng = _basin(60, seed=1, bias=0.4)
    q = st.lateral_inflow(60, 32, 2, rng)
    ref = st.route_spectral(p, K, q, pad_factor=8)
    assert np.abs(_sweep_muskingum(p, K, q) - ref).max() <= 1e-10 * np.abs(ref).max()
    # the check the notebook asserts fails on a broken filter
    assert np.abs(_sweep_muskingum(p, K, q, 0.99) - ref).max() > 1e-10 * np.abs(ref).max()


def test_area_feature_is_capped():
    a = np.array([1.0, 10.0, 64.0, 1000.0, 1e6])
    f = st.area_feature(a)
    assert f.min() == 0 and f.max() == 1 and np.all(np.diff(f) >= 0) and f[-1] == f[-2]
    with pytest.raises(ValueError):
        st.area_feature(np.array([0.5]))


def _router_case(n, seed, T=12):
    p, K, rng = _basin(n, seed=seed, bias=0.3)
    q = st.lateral_inflow(n, T, 2, rng)
    return p, K, q


def test_router_graph_free_and_permutation_equivariant():
    torch.manual_seed(0)
    model = st.RoutingOperator(2, 2, width=8, channels=4, blocks=2).eval()
    shapes = {k: v.shape for k, v in model.state_dict().items()}
    for n in (15, 40, 90):
        p, K, q = _router_case(n, n)
        x, s, g = st.river_inputs(p, K, q)
        with torch.no_grad():
            y = model(x, s, g)
        assert y.shape == (n, 2, 12, 1)
        perm = np.concatenate([[0], 1 + np.random.default_rng(n).permutation(n - 1)])
        inv = np.argsort(perm)
        pp = np.where(p[perm] >= 0, inv[np.maximum(p[perm], 0)], -1)
        xb, sb, gb = st.river_inputs(pp, K[perm], q[:, perm])
        with torch.no_grad():
            assert (model(xb, sb, gb) - y[perm]).abs().max() < 1e-5
            # a broken permutation (outputs not permuted) is caught
            assert (model(xb, sb, gb) - y).abs().max() > 1e-5
    assert shapes == {k: v.shape for k, v in model.state_dict().items()}


def test_embedding_leak_is_not_equivariant():
    torch.manual_seed(0)
    model = st.RoutingOperator(2, 2, width=8, channels=4, blocks=1, embed_nodes=30).eval()
    p, K, q = _router_case(30, 2)
    perm = np.concatenate([[0], 1 + np.random.default_rng(0).permutation(29)])
    inv = np.argsort(perm)
    pp = np.where(p[perm] >= 0, inv[np.maximum(p[perm], 0)], -1)
    with torch.no_grad():
        y = model(*st.river_inputs(p, K, q))
        yb = model(*st.river_inputs(pp, K[perm], q[:, perm]))
    assert (yb - y[perm]).abs().max() > 1e-4


def test_embedding_ids_are_per_basin_and_validated():
    data = st.river_data(1, n=10, T=12, n_events=3, n_test=2, biases=(0.0, 0.5, 0.9), deep_bias=0.95)
    assert [k for k in data] == ["train0", "train1", "train2", "zero-shot", "5x", "deep"]
    assert [data[f"train{k}"]["id_offset"] for k in range(3)] == [0, 10, 20]
    assert "id_offset" not in data["zero-shot"]
    m, _ = st.train_router(data, "embed", 2, 0, 3, width=4, channels=2, blocks=1)
    assert m.embed.num_embeddings == 30  # one row per training reach: ids distinct across basins
    # the ids change the output of an embedding model, and only of an embedding model
    x, s, g = st.river_inputs(data["train1"]["parents"], data["train1"]["K"], data["train1"]["q"][:1])
    with torch.no_grad():
        a, b = m(x, s, g, torch.arange(10)), m(x, s, g, torch.arange(10) + 10)
        assert (a - b).abs().max() > 1e-6
        plain = st.RoutingOperator(2, 2, width=4, channels=2, blocks=1).eval()
        assert torch.equal(plain(x, s, g, torch.arange(10)), plain(x, s, g))
    for bad in (torch.arange(9), torch.arange(10) + 25, torch.zeros(10)):
        with pytest.raises(ValueError):
            m(x, s, g, bad)
    # an unseen basin gets random ids (not i mod table size, where the outlet always gets id 0), reproducibly
    ids = st._ids(data["zero-shot"], m)
    assert ids.shape == (20,) and int(ids.min()) >= 0 and int(ids.max()) < 30
    assert torch.equal(ids, st._ids(data["zero-shot"], m))
    assert not torch.equal(ids, torch.arange(20) % 30)


def test_validation_and_learning_curves_recorded():
    data = st.river_data(0, n=8, T=8, n_events=2, n_test=1, biases=(0.0, 0.5))
    _, h = st.train_router(data, "none", 4, 0, 2, val_every=2, width=4, channels=2, blocks=1)
    assert [step for step, _ in h.evals["val"]] == [2, 4]
    geos = st.geometry_data(0, 2, size=6, T=6, n_events=2, n_test=1)
    h = st.train_geometry(st.geometry_model(1, 0), geos[:1], 4, 0, eval_geos=geos[1:], eval_every=2)
    assert [step for step, _ in h.evals["heldout"]] == [2, 4]
    with pytest.raises(ValueError):
        st.train_geometry(st.geometry_model(1, 0), geos, 1, 0, eval_geos=[], eval_every=1)


def test_geometry_early_stopping_keeps_best_validation_weights():
    geos = st.geometry_data(0, 2, size=6, T=6, n_events=3, n_test=1)
    m = st.geometry_model(1, 0)
    h = st.train_geometry(m, geos, 4, 0, val_events=1)
    vals = [v for _, v in h.evals["val"]]
    assert len(vals) == 4  # one evaluation per pass over the geometries (2 steps) and at the end
    # the model ends with the weights of the best validation score, which it reproduces
    with torch.no_grad():
        errs = []
        for g in geos:
            pred, y = m(g["x"][:, 2:3], g["ops"]), g["y"][:, 2:3]
            errs.append(((pred - y).norm() / y.norm()).item())
    assert float(np.mean(errs)) == pytest.approx(min(vals), rel=1e-5)
    for bad in (dict(val_events=3), dict(val_events=-1)):
        with pytest.raises(ValueError):
            st.train_geometry(st.geometry_model(1, 0), geos, 1, 0, **bad)


def test_local_transfer_can_be_lossless():
    lt = st.LocalTransfer(3, 4)
    H = lt(torch.zeros(5, 3), 6, 12)
    # gains start near 1 (a lossless reach: |H(0)| = rho = 1 before the weights' share) and can exceed 1
    assert torch.allclose(H[:, 0].abs(), torch.ones(5, 4), atol=0.02)
    rho0 = st.RHO_MAX * torch.sigmoid(lt.net[-1].bias.view(3, 4)[2])
    assert torch.allclose(rho0, torch.ones(4), atol=1e-6)
    assert 1.0 < st.RHO_MAX <= 1.1


def test_to_torch_sparse_opts_in_to_invariant_checks():
    import warnings

    import scipy.sparse as sp

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        t = st.to_torch_sparse(sp.eye(3, format="csr"))
    assert t.is_sparse and torch.equal(t.to_dense(), torch.eye(3))


def test_river_inputs_leaks():
    p, K, q = _router_case(40, 5)
    _, s_closed, _ = st.river_inputs(p, K, q)
    _, s_area, _ = st.river_inputs(p, K, q, leak="area")
    assert float(s_closed[:, 1].max()) <= 1
    # graph-normalised area: 1 at the outlet of any basin, so the same reach differs between basins
    a = st.upstream_area(p)
    assert torch.allclose(s_area[:, 1], torch.tensor(a / a.max(), dtype=torch.float32))
    p2, K2, q2 = _router_case(80, 5)
    assert float(st.river_inputs(p2, K2, q2, leak="area")[1][:, 1].max()) == pytest.approx(1.0)
    with pytest.raises(ValueError):
        st.river_inputs(p, K, q, leak="ids")
    with pytest.raises(ValueError):
        st.river_inputs(p, K, q[:, :5])


def test_river_protocol_tiny_is_deterministic():
    data = st.river_data(0, n=10, T=12, n_events=3, n_test=2, biases=(0.0, 0.5))
    assert [k for k in data] == ["train0", "train1", "zero-shot", "5x"]
    assert data["5x"]["parents"].size == 50 and data["train0"]["q"].shape == (5, 10, 12)
    assert np.all(data["train0"]["q_shift"] <= data["train0"]["q"][:3] + 1e-12)
    # the forcing leak differs per basin: mild storms on train0, strong ones on train1 (scales 0.3, 1.7)
    assert [data[f"train{k}"]["shift_scale"] for k in range(2)] == pytest.approx([0.3, 1.7])
    assert np.all(data["train1"]["q_shift"] >= data["train1"]["q"][:3] - 1e-12)
    outs = []
    for _ in range(2):
        m, h = st.train_router(data, "embed", 3, 0, 3, width=4, channels=2, blocks=1)
        outs.append(st.predict_router(m, data["zero-shot"], "embed"))
    assert outs[0].shape == (2, 20, 12) and np.array_equal(outs[0], outs[1])
    rm, _ = st.train_recurrent(data, 2, 0, 3, hidden=4)
    assert st.predict_recurrent(rm, data["train1"]).shape == (2, 10, 12)


def test_potential_flow_and_advection_diffusion():
    mask = st.masked_grid(8, np.random.default_rng(3))
    while not (mask[:, 0].any() and mask[:, -1].any()):
        mask = st.masked_grid(8, np.random.default_rng(4))
    F = st.potential_flow(mask)
    assert F.min() >= 0
    A = st.advection_diffusion_operator(mask, F, kappa=0.1, decay=0.0)
    # mass can only leave (through the outlet): column sums of A are >= 0
    assert np.asarray(A.sum(0)).min() >= -1e-12
    n = int(mask.sum())
    u = st.simulate_implicit(A, np.zeros((1, n, 4)))
    assert np.allclose(u, 0)
    u = st.simulate_implicit(A, np.ones((2, n, 6)))
    assert u.min() > 0 and np.all(np.diff(u.sum(1), axis=-1) > 0)
    with pytest.raises(ValueError):
        st.potential_flow(np.eye(4, dtype=bool)[:, ::-1] & np.eye(4, dtype=bool))  # no inlet/outlet
    with pytest.raises(ValueError):
        st.advection_diffusion_operator(mask, F[:3, :3])


def test_geometry_pipeline_tiny():
    geos = st.geometry_data(0, 2, size=6, T=6, n_events=2, n_test=1)
    assert len(geos) == 2 and geos[0]["x"].shape[1:] == (3, 6, 2)
    m = st.geometry_model(2, 0)
    st.train_geometry(m, geos, 1, 0)
    e = st.geometry_error(m, geos)
    assert np.isfinite(e) and e > 0
    assert st.geometry_error(st.geometry_model(0, 0), geos) > 0
    with pytest.raises(ValueError):
        st.SepOperator(2, n_ops=2)(geos[0]["x"], geos[0]["ops"][0])


def test_checks_fail_on_broken_inputs():
    """The mass-balance and spectral checks detect what they guard against."""
    p, K, rng = _basin(80)
    q = st.lateral_inflow(80, 64, 2, rng)
    # a horizon too short for the flood to leave the basin: water is missing at the outlet
    out = st.route_sequential(p, K, q)
    assert abs(out[:, 0].sum() - q.sum()) / q.sum() > 1e-3
    # no zero-padding: the circular (wrapped) solution is not the causal one
    seq = st.route_sequential(p, K, q)
    assert np.abs(seq - st.route_spectral(p, K, q, pad_factor=1)).max() > 1e-6


def test_config_dicts_name_the_missing_key():
    """#58: a basin or geometry dict without a key the function reads: a ValueError naming it, not a bare KeyError."""
    data = st.river_data(0, n=4, T=8, n_events=2, n_test=1, biases=(0.0,))
    router = st.RoutingOperator(2, 2, width=4, channels=2, blocks=1)
    no_q = {k: v for k, v in data["zero-shot"].items() if k != "q"}
    with pytest.raises(ValueError, match=r"d must have the keys .*missing \['q'\]"):
        st.predict_router(router, no_q)
    with pytest.raises(ValueError, match=r"missing \['n_test'\]"):
        st.predict_recurrent(st.RecurrentMP(4, hidden=4), {k: v for k, v in data["train0"].items() if k != "n_test"})
    with pytest.raises(ValueError, match=r"data\['train0'\] must have the keys .*missing \['q_shift'\]"):
        st.train_router({"train0": {k: v for k, v in data["train0"].items() if k != "q_shift"}}, "shift", 1, 0, 2)
    geos = st.geometry_data(0, 1, size=6, T=6, n_events=2, n_test=1)
    bad = [{k: v for k, v in geos[0].items() if k != "n_events"}]
    with pytest.raises(ValueError, match=r"geos\[0\] must have the keys .*missing \['n_events'\]"):
        st.geometry_error(st.geometry_model(1, 0), bad)
    with pytest.raises(ValueError, match=r"geos\[0\] must have the keys"):
        st.train_geometry(st.geometry_model(1, 0), bad, 1, 0)
    with pytest.raises(ValueError, match=r"eval_geos\[0\] must have the keys"):
        st.train_geometry(st.geometry_model(1, 0), geos, 1, 0, eval_geos=bad, eval_every=1)


# --------------------------------------------------------------------------------------- causal router (round 3)
def _deep_case(T=32):
    p, K, rng = _basin(60, seed=4, bias=0.9)
    q = st.lateral_inflow(60, T, 2, rng)
    return p, K, q


def test_router_is_causal_and_the_check_catches_acausal_operators():
    torch.manual_seed(0)
    model = st.RoutingOperator(2, 2, width=8, channels=4, blocks=2).eval()
    p, K, q = _deep_case()
    x, s, g = st.river_inputs(p, K, q)
    assert st.causality_violation(lambda xx: model(xx, s, g), x, 20) <= 1e-5
    # a window mean reads the future: caught
    assert st.causality_violation(lambda xx: xx.mean(2, keepdim=True).expand_as(xx), x, 20) > 1e-2
    # an IIR filter applied by a circular FFT of length 2T (the previous router's sweep): its slow tail wraps
    # future inflow into the past, caught
    lt = st.LocalTransfer(2, 4)
    with torch.no_grad():
        lt.net[-1].bias.view(3, 4)[0].fill_(4.0)  # c near 1: a slow reach

    def circular(xx):
        T = xx.shape[2]
        H = lt(s, T + 1, 2 * T)[:, None]  # (N, 1, F, C)
        S = torch.fft.rfft(xx[..., :1].expand(-1, -1, -1, 4), n=2 * T, dim=2)
        return torch.fft.irfft(st.upstream_sweep(g, H, S), n=2 * T, dim=2)[:, :, :T]

    assert st.causality_violation(circular, x, 20) > 1e-3
    with pytest.raises(ValueError):
        st.causality_violation(lambda xx: xx, x, 32)
    with pytest.raises(ValueError):
        st.causality_violation(lambda xx: xx[:, :, :3], x, 10)
    with pytest.raises(ValueError):
        st.RoutingOperator(2, 2, pad=1)


def test_causal_sweep_equals_the_exact_iir_solution_and_is_padding_safe():
    p, K, q = _deep_case(T=24)
    g = st.RiverGraph(p)
    lt = st.LocalTransfer(2, 3)
    feat = torch.rand(p.size, 2)
    s = torch.randn(p.size, 2, 24, 3, dtype=torch.float32)
    with torch.no_grad():
        taps = lt.taps(feat, 24)
        y2 = st.causal_sweep(g, torch.fft.rfft(taps, n=48, dim=1)[:, None], s, 48)
        y8 = st.causal_sweep(g, torch.fft.rfft(taps, n=192, dim=1)[:, None], s, 192)
        M = 4096  # IIR filters, padded far beyond their tails: the exact causal solution
        H = lt(feat, M // 2 + 1, M)[:, None]
        ref = torch.fft.irfft(st.upstream_sweep(g, H, torch.fft.rfft(s, n=M, dim=2)), n=M, dim=2)[:, :, :24]
    assert (y2 - ref).abs().max() <= 1e-4 * ref.abs().max()
    assert (y2 - y8).abs().max() <= 1e-5 * ref.abs().max()
    with pytest.raises(ValueError):
        st.causal_sweep(g, torch.fft.rfft(taps, n=40, dim=1)[:, None], s, 40)  # n_fft < 2T: circular


def test_router_is_padding_safe():
    torch.manual_seed(1)
    a = st.RoutingOperator(2, 2, width=8, channels=4, blocks=2, pad=2).eval()
    b = st.RoutingOperator(2, 2, width=8, channels=4, blocks=2, pad=8).eval()
    b.load_state_dict(a.state_dict())
    p, K, q = _deep_case()
    x, s, g = st.river_inputs(p, K, q)
    with torch.no_grad():
        ya, yb = a(x, s, g), b(x, s, g)
    assert (ya - yb).abs().max() <= 1e-5 * ya.abs().max()


def test_router_discharge_is_non_negative_and_the_check_catches_a_signed_head():
    p, K, q = _deep_case()
    x, s, g = st.river_inputs(p, K, q)
    shares = []
    for positive in (True, False):
        torch.manual_seed(2)
        model = st.RoutingOperator(2, 2, width=8, channels=4, blocks=2, positive=positive).eval()
        with torch.no_grad():
            model.head.bias.fill_(-0.5)  # push outputs down
            shares.append(st.negative_share(model(-5 * x, s, g).numpy()))
    assert shares[0] == 0 and shares[1] > 0
    assert st.negative_share(np.array([1.0, -1.0])) == 0.5
    with pytest.raises(ValueError):
        st.negative_share(np.array([np.nan]))
    with pytest.raises((TypeError, ValueError)):
        st.negative_share("x")


def test_taps_are_the_series_of_the_transfer_function():
    lt = st.LocalTransfer(2, 3)
    feat = torch.rand(4, 2)
    with torch.no_grad():
        taps = lt.taps(feat, 400)
        H = lt(feat, 5, 400)
    assert torch.allclose(torch.fft.rfft(taps.double(), n=400, dim=1)[:, :5].to(H.dtype), H, atol=1e-4)
    with pytest.raises(ValueError):
        lt.taps(feat, 0)


# --------------------------------------------------------------------------------------- cross-geometry (round 3)
def test_geometry_leaks_and_graph_aware_attention():
    geos = st.geometry_data(0, 3, size=6, T=6, n_events=2, n_test=1)
    emb = st.geometry_leak(geos, 2, "embed", 0)
    assert torch.equal(emb[1]["ids"], torch.arange(geos[1]["x"].shape[0]) + 100)
    assert int(emb[2]["ids"].max()) < 200 and "ids" not in geos[0]
    feat = st.geometry_leak(geos, 2, "feature")
    assert feat[0]["x"].shape[-1] == 3 and float(feat[0]["x"][..., 2].max()) < 1
    sh = st.geometry_leak(geos, 2, "shift")
    assert torch.allclose(sh[0]["y"], 0.3 * geos[0]["y"]) and torch.allclose(sh[1]["y"], 1.7 * geos[1]["y"])
    assert torch.equal(sh[2]["y"], geos[2]["y"])
    for leak, kw in (("embed", dict(embed_nodes=200)), ("feature", dict(c_in=3)), ("shift", {})):
        m = st.geometry_model(1, 0, **kw)
        st.train_geometry(m, st.geometry_leak(geos, 2, leak)[:2], 1, 0)
        assert np.isfinite(st.geometry_error(m, st.geometry_leak(geos, 2, leak)[2:]))
    with pytest.raises(ValueError):
        st.geometry_leak(geos, 2, "ids")
    # the attention mixer reads the geometry's operators (graph-aware) and stays permutation-equivariant
    m = st.geometry_model(1, 0, mixer="attention").eval()
    g = geos[0]
    n = g["x"].shape[0]
    perm = torch.randperm(n)
    ops_p = [o.to_dense()[perm][:, perm] for o in g["ops"]]
    with torch.no_grad():
        y = m(g["x"], g["ops"])
        assert (m(g["x"][perm], ops_p) - y[perm]).abs().max() < 1e-5
        assert (m(g["x"], [torch.zeros(n, n)] * 2) - y).abs().max() > 1e-5  # it does read the graph
    with pytest.raises(ValueError):
        m(g["x"], g["ops"][0])


def test_the_cross_geometry_time_block_is_not_causal():
    # the notebook says the stand-in's FNO-1D time block reads the future (unlike the river router): the check
    # that guards the router must see it
    g = st.geometry_data(0, 1, size=6, T=12, n_events=2, n_test=1)[0]
    for mixer in ("cheb", "attention"):
        model = st.geometry_model(order=2, seed=0, mixer=mixer).eval()
        assert st.causality_violation(lambda xx, m=model: m(xx, g["ops"]), g["x"], 9) > 1e-2


def test_travel_time_to_outlet_is_the_muskingum_lag():
    """On a chain, a pulse entering the top reach reaches the outlet with its centroid delayed by the sum of the
    reaches' K (linear Muskingum delays a wave's centroid by K per reach): the travel time the helper returns."""
    p = np.array([-1, 0, 1, 2])
    K = np.array([1.5, 2.0, 3.0, 2.5])
    t = st.travel_time_to_outlet(p, K)
    assert np.allclose(t, np.cumsum(K))
    q = np.zeros((1, 4, 200))
    q[0, 3, 0] = 1.0
    out = st.route_sequential(p, K, q)[0, 0]
    assert abs((np.arange(200) * out).sum() / out.sum() - t[3]) < 1e-6
    assert np.allclose(st.travel_time_to_outlet(p, 2.0), [2, 4, 6, 8])
    with pytest.raises(ValueError):
        st.travel_time_to_outlet(p, np.array([1.0, 2.0]))  # not one K per reach
    with pytest.raises(ValueError):
        st.travel_time_to_outlet(p, -1.0)
    with pytest.raises(ValueError):
        st.travel_time_to_outlet(np.array([1, 0]), 1.0)  # a cycle, no outlet


def test_scramble_operators_relabels_the_graph_and_the_model_notices():
    g = st.geometry_data(0, 1, size=6, T=6, n_events=2, n_test=1)[0]
    sc = st.scramble_operators(g, 3)
    n = g["x"].shape[0]
    perm = torch.as_tensor(np.random.default_rng([3, 1617]).permutation(n))
    for a, b in zip(g["ops"], sc["ops"], strict=True):
        d, e = a.to_dense(), b.to_dense()
        assert torch.equal(e, d[perm][:, perm])  # P op P^T: same operator, cells relabelled
        assert not torch.equal(e, d)
    assert sc["x"] is g["x"] and sc["y"] is g["y"] and len(g["ops"]) == 2  # the input is left as it is
    assert torch.equal(st.scramble_operators(g, 3)["ops"][0].to_dense(), sc["ops"][0].to_dense())
    m = st.geometry_model(1, 0).eval()
    with torch.no_grad():
        assert (m(g["x"], sc["ops"]) - m(g["x"], g["ops"])).abs().max() > 1e-5  # the Chebyshev mixer reads it
    with pytest.raises(ValueError):
        st.scramble_operators({"x": g["x"]})


def test_geometry_matched_holds_more_events_of_the_same_geometry():
    """The data-matched control: copy 0 is the geometry, later copies swap only its training events for fresh
    ones simulated on the same geometry (the flow and operator rebuilt from the mask reproduce its own fields);
    validation and test events are shared, so a model trained on the copies is scored on what the oracle is."""
    g = st.geometry_data(0, 1, size=6, T=8, n_events=3, n_test=2)[0]
    ch = st.geometry_matched(g, 4, val_events=1)
    assert len(ch) == 4 and ch[0] is g and st.geometry_matched(g, 1) == [g]
    A = st.advection_diffusion_operator(g["mask"], st.potential_flow(g["mask"]))
    for c in ch:
        assert c["x"].shape == g["x"].shape and c["n_events"] == 3
        assert torch.equal(c["x"][:, 2:], g["x"][:, 2:]) and torch.equal(c["y"][:, 2:], g["y"][:, 2:])
        assert torch.equal(c["x"][..., 1], g["x"][..., 1])  # the degree channel
        u = st.simulate_implicit(A, c["x"][..., 0].permute(1, 0, 2).double().numpy())
        assert np.abs(u - c["y"][..., 0].permute(1, 0, 2).numpy()).max() < 1e-4 * float(g["y"].abs().max())
    fresh = torch.cat([c["x"][:, :2, :, 0] for c in ch[1:]], 1)
    assert not torch.equal(ch[1]["x"][:, :2], g["x"][:, :2]) and fresh.unique(dim=1).shape[1] == 6
    assert all(torch.equal(a["x"], b["x"]) for a, b in zip(ch, st.geometry_matched(g, 4), strict=True))
    m = st.geometry_model(1, 0)
    h = st.train_geometry(m, ch, 1, 0, steps=4, val_events=1, val_every=2)
    assert len(h.evals["val"]) >= 2
    with pytest.raises(ValueError):
        st.geometry_matched(g, 0)
    with pytest.raises(ValueError):
        st.geometry_matched(g, 2, val_events=3)  # no training event left
    with pytest.raises(ValueError):
        st.geometry_matched({k: v for k, v in g.items() if k != "mask"}, 2)
    with pytest.raises(ValueError):
        st.geometry_matched(dict(g, mask=np.ones((2, 2), bool)), 2)  # mask and cells disagree


def test_train_geometry_wsd_schedule_holds_then_decays():
    geos = st.geometry_data(0, 2, size=6, T=8, n_events=3, n_test=1)
    h = st.train_geometry(st.geometry_model(1, 0), geos, 1, 0, steps=16, val_events=1, val_every=4,
                          schedule="wsd", decay_steps=st.wsd_decay_steps(16))
    lr = h.lr
    assert st.wsd_decay_steps(16) == 4 and len(lr) == 16
    assert lr[1] == lr[11] == max(lr) and lr[-1] < lr[11]  # stable until step 12, then the decay
    assert [s for s, _ in h.evals["val"]] == [4, 8, 12, 16]
    with pytest.raises(ValueError, match="decay_steps"):
        st.train_geometry(st.geometry_model(1, 0), geos, 1, 0, steps=16, schedule="wsd")


def test_stable_plateau_reads_the_stable_phase_with_noise():
    steps = 1800
    stable = steps - st.wsd_decay_steps(steps)
    xs = list(range(60, steps + 1, 60))
    # flat but noisy during the stable phase, then a decay that lowers the curve by annealing
    rng = np.random.default_rng(0)
    flat = [0.2 + 0.03 * rng.standard_normal() if s <= stable else 0.12 for s in xs]
    flat[:4] = [1.0, 0.6, 0.4, 0.3]
    curve = {"step": xs, "value": flat}
    from helpers import train
    assert train.plateau(flat) > 0.05  # the plain reading sees the decay's drop as "still improving"
    assert st.stable_plateau(curve, steps) <= 0.05
    pairs = list(zip(xs, flat))
    assert st.stable_plateau(pairs, steps) == st.stable_plateau(curve, steps)
    # a curve still falling steadily through the stable phase fails the same reading (broken input)
    falling = {"step": xs, "value": [1.0 / (1 + s / 300) + (0.0 if s <= stable else -0.05) for s in xs]}
    assert st.stable_plateau(falling, steps) > 0.05
    # and so does a noisy one, whose fall over a window is well above its step noise (every draw)
    for seed in range(20):
        r = np.random.default_rng(seed)
        noisy = [(0.3 - 0.15 * s / stable if s <= stable else 0.1) + 0.002 * r.standard_normal() for s in xs]
        assert st.stable_plateau({"step": xs, "value": noisy}, steps) > 0.05
    with pytest.raises(TypeError, match="manifest curve"):
        st.stable_plateau(flat, steps)
    with pytest.raises(ValueError, match="pairs"):
        st.stable_plateau([(60, 0.1, 3), (120, 0.1, 3)], steps)
    with pytest.raises(ValueError):
        st.wsd_decay_steps(3)
