"""Tests for helpers.flow_vq: quantile codes, the ODE integrator, transport, quantizers, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from _loader import load_module
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, stats

from helpers import flow_vq as fv


class LinearField(torch.nn.Module):
    """v(z, t) = A z: the exact flow map is expm(A t)."""

    def __init__(self, A: torch.Tensor) -> None:
        super().__init__()
        self.A = A

    def forward(self, z, t):
        return z @ self.A.T


class AffineGaussianField(torch.nn.Module):
    """The exact flow-matching velocity from N(0, I) to N(mu, s^2 I) on the linear path (independent coupling)."""

    def __init__(self, mu: torch.Tensor, s: float) -> None:
        super().__init__()
        self.mu, self.s = mu, s

    def forward(self, z, t):
        t = torch.as_tensor(t, dtype=z.dtype)
        var = (1 - t) ** 2 + (t * self.s) ** 2
        dvar = -2 * (1 - t) + 2 * t * self.s**2
        return self.mu + (z - t * self.mu) * dvar / (2 * var)


# -- prior codes --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("m", [2, 3, 4, 8, 16])
def test_bin_means_match_numerical_integration(m):
    edges = fv.gaussian_bin_edges(m)
    means = fv.gaussian_bin_means(m)
    for i in range(m):
        num, _ = integrate.quad(lambda z: z * stats.norm.pdf(z), edges[i], edges[i + 1])
        assert means[i] == pytest.approx(num * m, abs=1e-7)
    assert np.allclose(np.diff(stats.norm.cdf(edges)), 1 / m)
    assert np.allclose(means, -means[::-1])  # symmetric


def test_prior_codes_order_and_source_cells_agree():
    levels = [4, 3]
    c0 = fv.prior_codes(levels)
    assert c0.shape == (12, 2)
    assert torch.equal(fv.source_cells(c0, levels), torch.arange(12))  # a cell's mean lies in the cell


def test_source_cells_equal_mass():
    z = torch.randn(200_000, 2, generator=torch.Generator().manual_seed(0))
    counts = torch.bincount(fv.source_cells(z, [8, 8]), minlength=64).numpy()
    assert stats.chisquare(counts).pvalue > 1e-3
    assert counts.max() / counts.min() < 1.15


@given(st.integers(2, 6), st.integers(1, 4))
@settings(max_examples=40, deadline=None)
def test_split_levels_product(m, d):
    K = m**d * (2 if d > 1 else 1)
    lv = fv.split_levels(K, d)
    assert math.prod(lv) == K and len(lv) == d and min(lv) >= 2
    assert max(lv) - min(lv) <= max(2, m)


@pytest.mark.parametrize("K,d", [(7, 2), (2, 2), (9, 3), (13, 4)])
def test_split_levels_rejects_non_products(K, d):
    with pytest.raises(ValueError, match="product"):
        fv.split_levels(K, d)


def test_bad_levels():
    with pytest.raises(ValueError):
        fv.prior_codes([4, 1])
    with pytest.raises(TypeError):
        fv.prior_codes([4.0, 2])
    with pytest.raises(TypeError):
        fv.prior_codes(8)
    with pytest.raises(ValueError):
        fv.source_cells(torch.randn(5, 3), [4, 4])


# -- the integrator -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("method,steps,tol", [("rk4", 20, 1e-6), ("heun", 200, 1e-4), ("euler", 2000, 5e-3)])
def test_integrator_matches_matrix_exponential(method, steps, tol):
    from scipy.linalg import expm

    A = torch.tensor([[0.0, -1.0], [1.0, -0.3]], dtype=torch.float64)
    z = torch.randn(50, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    out = fv.integrate(LinearField(A), z, 0.0, 1.0, steps, method)
    ref = z @ torch.tensor(expm(A.numpy())).T
    assert (out - ref).abs().max().item() < tol


def test_roundtrip_and_exact_affine_flow():
    mu, s = torch.tensor([1.0, -2.0], dtype=torch.float64), 0.5
    v = AffineGaussianField(mu, s)
    z0 = torch.randn(100, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    z1 = fv.flow_map(v, z0, 50)
    assert torch.allclose(z1, mu + s * z0, atol=1e-6)  # the probability-flow map of the Gaussian path
    assert (fv.flow_inverse(v, z1, 50) - z0).abs().max().item() < 1e-6


def test_integrator_bad_input():
    v = LinearField(torch.eye(2))
    with pytest.raises(ValueError):
        fv.integrate(v, torch.zeros(3, 2), steps=0)
    with pytest.raises(ValueError):
        fv.integrate(v, torch.zeros(3, 2), method="midpoint")


def test_flow_matching_learns_a_shift():
    torch.manual_seed(0)
    v = fv.VelocityField(2, hidden=32, depth=2)
    opt = torch.optim.Adam(v.parameters(), 1e-2)
    g = torch.Generator().manual_seed(0)
    target = torch.tensor([2.0, -1.0])
    for _ in range(300):
        loss = fv.flow_matching_loss(v, target + 0.3 * torch.randn(256, 2, generator=g), g)
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        z1 = fv.flow_map(v, torch.randn(2000, 2, generator=g), 20)
    assert (z1.mean(0) - target).abs().max() < 0.15


# -- transport, Lloyd, quantization ---------------------------------------------------------------------------------
def test_transport_through_affine_flow_gives_affine_codes():
    mu, s = torch.tensor([1.0, -2.0]), 0.5
    tc = fv.transport_codes(AffineGaussianField(mu, s), [4, 4], 64_000, 20,
                            generator=torch.Generator().manual_seed(0))
    exact = mu + s * fv.prior_codes([4, 4])  # an affine map keeps cells' means
    assert (tc.pushed - exact).abs().max() < 1e-4
    assert (tc.centroids - exact).abs().max() < 0.03


@given(st.integers(0, 10_000), st.integers(2, 12))
@settings(max_examples=30, deadline=None)
def test_lloyd_never_increases_distortion(seed, K):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(300, 2, generator=g, dtype=torch.float64) * torch.tensor([1.0, 3.0], dtype=torch.float64)
    codes = torch.randn(K, 2, generator=g, dtype=torch.float64)
    _, mse = fv.lloyd(x, codes, 5)
    assert all(b <= a + 1e-12 for a, b in zip(mse, mse[1:]))


@given(st.integers(0, 10_000))
@settings(max_examples=30, deadline=None)
def test_nearest_matches_brute_force(seed):
    g = torch.Generator().manual_seed(seed)
    z, codes = torch.randn(200, 3, generator=g, dtype=torch.float64), torch.randn(17, 3, generator=g,
                                                                                 dtype=torch.float64)
    brute = torch.cdist(z, codes).argmin(1)
    assert torch.equal(fv.nearest(z, codes, chunk=37), brute)


def test_quantize_ste_value_and_gradient():
    codes = torch.tensor([[0.0, 0.0], [1.0, 1.0]])
    z = torch.tensor([[0.2, 0.1], [0.9, 0.7]], requires_grad=True)
    zq, idx, c = fv.quantize_ste(z, codes)
    assert torch.equal(idx, torch.tensor([0, 1])) and torch.equal(zq.detach(), c)
    (zq * torch.tensor([[1.0, 2.0], [3.0, 4.0]])).sum().backward()
    assert torch.equal(z.grad, torch.tensor([[1.0, 2.0], [3.0, 4.0]]))  # identity gradient


def test_usage_metrics():
    u = fv.usage(torch.tensor([0, 1, 2, 3]), 8)
    assert u["utilization"] == 0.5 and u["perplexity"] == pytest.approx(4.0)
    assert fv.usage(torch.zeros(10, dtype=torch.long), 4)["perplexity"] == pytest.approx(1.0)
    with pytest.raises(ValueError):
        fv.usage(torch.tensor([0, 9]), 4)
    with pytest.raises(ValueError):
        fv.nearest(torch.zeros(3, 2), torch.zeros(4, 3))


# -- quantizer modules --------------------------------------------------------------------------------------------
def test_flow_quantizer_has_no_codebook_parameters_and_refreshes():
    q = fv.FlowQuantizer([4, 4], hidden=16, depth=2, refresh_every=2, n_samples=512, ode_steps=4)
    names = [n for n, _ in q.named_parameters()]
    assert names and all(n.startswith("velocity.") for n in names)
    before = q.codes.clone()
    assert torch.allclose(before, fv.prior_codes([4, 4]))
    q.train()
    z = torch.randn(64, 2, requires_grad=True)
    for _ in range(3):
        out = q(z)
    assert not torch.equal(q.codes, before)  # rebuilt from the flow at step 2
    out.loss.backward()
    assert z.grad is not None and z.grad.abs().sum() > 0
    assert q.source_assign(z.detach()).shape == (64,)


def test_fsq_and_baselines_shapes():
    z = torch.randn(100, 4) * 2
    f = fv.FSQ([4, 4, 3, 2])
    out = f(z)
    assert torch.equal(f.codebook[out.idx], out.z_q)
    assert out.idx.max() < f.K
    for q in (fv.VectorQuantizer(16, 4), fv.EMAVectorQuantizer(16, 4, patience=1), fv.GaussianGridQuantizer([4, 4])):
        zz = torch.randn(100, q.d)
        o = q.train()(zz)
        assert o.z_q.shape == zz.shape and torch.isfinite(o.loss)
        assert torch.allclose(o.z_q, q.codebook[o.idx], atol=1e-6)


def test_ema_restarts_dead_codes():
    q = fv.EMAVectorQuantizer(8, 2, patience=2, seed=0).train()
    z = torch.randn(256, 2) + 5.0  # far from the init: all but one code is dead at first
    for _ in range(5):
        q(z)
    assert q.restarts > 0
    assert fv.usage(fv.nearest(z, q.codebook), 8)["utilization"] > 0.5


def test_kmeans_and_data():
    x = fv.toy_latents("moons", 2000, 0)
    assert x.shape == (2000, 2) and torch.allclose(x.std(0), torch.ones(2), atol=1e-3)
    km = fv.kmeans_codes(x, 16)
    assert fv.distortion(x, km) < fv.distortion(x, fv.prior_codes([4, 4]))
    with pytest.raises(ValueError):
        fv.toy_latents("spiral", 10)
    s = fv.lorenz_states(200, dt=0.01)
    assert s.shape == (200, 3) and np.isfinite(s).all() and s[:, 2].mean() > 10
    with pytest.raises(ValueError):
        fv.kmeans_codes(x[:3], 16)


# -- rate-distortion references, flow fit, downstream measures --------------------------------------------------
def test_usage_entropy():
    u = fv.usage(torch.arange(16), 16)
    assert u["entropy_bits"] == pytest.approx(4.0) and u["entropy_ratio"] == pytest.approx(1.0)
    assert fv.usage(torch.tensor([0, 0, 0, 1]), 4)["entropy_ratio"] < 0.5


def test_rank_cells_are_exactly_equal_mass_and_ordered_like_prior_codes():
    g = torch.Generator().manual_seed(0)
    ref = torch.randn(6400, 2, generator=g) * torch.tensor([1.0, 3.0]) + torch.tensor([0.0, 1.0])
    rc = fv.RankCells(ref, [8, 8])
    counts = torch.bincount(rc.assign(ref), minlength=64)
    assert counts.min() >= 99 and counts.max() <= 101  # exact up to ties at the cut points
    # on N(0, I) data the exact transport is the identity: the rank cells are the source cells
    z = torch.randn(200_000, 2, generator=g)
    agree = (fv.RankCells(z, [4, 4]).assign(z) == fv.source_cells(z, [4, 4])).float().mean()
    assert agree > 0.97  # the cut points are sample quantiles
    with pytest.raises(ValueError):
        fv.RankCells(ref[:10], [8, 8])
    with pytest.raises(ValueError):
        fv.RankCells(ref, [4, 4, 4])


def test_mmd_separates_distributions():
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(800, 2, generator=g), torch.randn(800, 2, generator=g)
    assert fv.mmd_rbf(a, a) == pytest.approx(0.0, abs=1e-12)
    assert fv.mmd_rbf(a, b) < 0.01 < fv.mmd_rbf(a, b + 1.0)
    with pytest.raises(ValueError):
        fv.mmd_rbf(a, torch.zeros(5, 3))


def test_distortion_at_entropy_is_log_linear():
    h, d = [4.0, 5.0, 6.0], [1.0, 0.5, 0.25]
    assert fv.distortion_at_entropy(h, d, 5.5) == pytest.approx(0.5 / math.sqrt(2))
    assert fv.distortion_at_entropy(h, d, 7.0) == pytest.approx(0.125)  # extends the last segment
    with pytest.raises(ValueError):
        fv.distortion_at_entropy([1.0], [1.0], 1.0)
    with pytest.raises(ValueError):
        fv.distortion_at_entropy([1.0, 1.0], [1.0, 0.5], 1.0)


def test_token_prior_is_causal_and_learns():
    torch.manual_seed(0)
    p = fv.TokenPrior(16, 4)
    t = torch.randint(16, (8, 4))
    t2 = t.clone()
    t2[:, 2] = (t2[:, 2] + 1) % 16
    a, b = p(t), p(t2)
    assert torch.allclose(a[:, :3], b[:, :3]) and not torch.allclose(a[:, 3], b[:, 3])
    g = torch.Generator().manual_seed(0)
    first = torch.randint(16, (400, 1), generator=g)
    seq = torch.cat([first, (first + 1) % 16, (first + 2) % 16, (first + 3) % 16], dim=1)  # t_i determined by t_1
    prior, val = fv.fit_prior(seq[:300], seq[300:], 16, steps=150, seed=0)
    assert val < 4.0 + 1.0  # about log2(16) for t_1, nearly nothing for the rest
    assert fv.prior_bits(prior, seq[300:]).mean() == pytest.approx(val, rel=1e-5)


def test_grid_neighbour_moves_one_coordinate_by_one():
    levels = [4, 3, 2]
    idx = torch.arange(24).repeat(20)
    nb = fv.grid_neighbour(idx, levels, torch.Generator().manual_seed(0))
    c = fv.prior_codes(levels)
    # prior codes are a product grid in the same order: a neighbour differs in exactly one coordinate
    diff = (c[nb] != c[idx]).sum(1)
    assert torch.equal(diff, torch.ones_like(diff)) and nb.min() >= 0 and nb.max() < 24
    with pytest.raises(ValueError):
        fv.grid_neighbour(torch.tensor([24]), levels)


def test_topology_ratio_tells_a_grid_from_arbitrary_labels():
    levels = [4, 4, 4, 4]
    codes = fv.prior_codes(levels)
    dec = torch.nn.Linear(8, 16)
    tokens = torch.randint(256, (500, 2), generator=torch.Generator().manual_seed(0))
    grid = fv.topology_ratio(dec, tokens, codes, levels, torch.Generator().manual_seed(1))
    shuffled = codes[torch.randperm(256, generator=torch.Generator().manual_seed(2))]
    arbitrary = fv.topology_ratio(dec, tokens, shuffled, levels, torch.Generator().manual_seed(1))
    assert grid["ratio"] < 0.5 < 0.8 < arbitrary["ratio"] < 1.25


def test_training_helpers_run_and_are_deterministic():
    x = fv.toy_latents("moons", 300, 0)
    v1, c1 = fv.train_flow(x, 5, seed=0, hidden=8, batch=32, progress=False)
    v2, _ = fv.train_flow(x, 5, seed=0, hidden=8, batch=32, progress=False)
    assert len(c1) == 5 and all(torch.equal(a, b) for a, b in zip(v1.parameters(), v2.parameters()))
    X = torch.rand(40, 16)
    for m in fv.TOK_METHODS:
        model, curve = fv.train_tokenizer(m, X, 16, 3, seed=0, n_tokens=2, d=2, refresh_every=2, batch=8,
                                          hidden=8, progress=False)
        assert not model.training and len(curve) == 3
    assert fv.checkpoint_config()["tok_K"] == 256


def test_quantizers_2d_equal_mass_where_the_flow_is_exact_and_flow_fit_tells_a_wrong_flow():
    mu, s = torch.tensor([1.0, -2.0]), 0.5
    g = torch.Generator().manual_seed(0)
    x, ref = mu + s * torch.randn(4000, 2, generator=g), mu + s * torch.randn(4000, 2, generator=g)
    exact = AffineGaussianField(mu, s)
    metrics, codes, tc = fv.quantizers_2d(x, ref, exact, 16, 0, vq_steps=30)
    assert list(metrics) == list(fv.METHODS_2D) and set(codes) == set(fv.METHODS_2D)
    for m in ("Oracle (centroids)", "Flow (centroids)"):  # exact transport: equal mass on the data
        assert metrics[m]["entropy_ratio"] > 0.98 and metrics[m]["utilization"] == 1.0
    # the prior codes sit around the origin, the data around mu: far worse than k-means
    assert metrics["k-means"]["mse"] < 0.2 * metrics["Gaussian grid"]["mse"]
    assert all(a >= b - 1e-9 for a, b in zip(tc.mse, tc.mse[1:]))  # Lloyd never increases distortion
    c, idx = codes["FSQ"]
    assert torch.allclose(c, fv.cell_means(x, idx, 16))
    good = fv.flow_fit(exact, x, ref, tc.samples, 16)
    wrong = fv.flow_fit(AffineGaussianField(mu + 1.0, s), x, ref, tc.samples + 1.0, 16)
    assert good["mmd_ratio"] < 3 and wrong["mmd_ratio"] > 10
    assert good["equal_mass_flow"] > 0.98 > wrong["equal_mass_flow"]


def test_cell_means_and_online_vq():
    x = torch.tensor([[0.0, 0.0], [2.0, 0.0], [5.0, 5.0]])
    m = fv.cell_means(x, torch.tensor([0, 0, 2]), 3)
    assert torch.allclose(m, torch.tensor([[1.0, 0.0], [0.0, 0.0], [5.0, 5.0]]))
    with pytest.raises(ValueError):
        fv.cell_means(x, torch.tensor([0, 1]), 3)
    g = torch.Generator().manual_seed(1)
    blobs = torch.cat([torch.randn(500, 2, generator=g) * 0.05 + torch.tensor(c) for c in ([0.0, 0.0], [3.0, 3.0])])
    book = fv.train_online_vq(blobs, 2, 0, 200, batch=64)
    assert fv.distortion(blobs, book) < 0.05


def test_distortion_at_rate_interpolates_inside_and_refuses_to_extrapolate():
    r, d = [6.0, 4.0, 5.0], [0.25, 1.0, 0.5]  # unsorted on purpose
    assert fv.distortion_at_rate(r, d, 4.5) == pytest.approx(1 / math.sqrt(2))
    assert fv.distortion_at_rate(r, d, 6.0) == pytest.approx(0.25)
    assert math.isnan(fv.distortion_at_rate(r, d, 6.5)) and math.isnan(fv.distortion_at_rate(r, d, 3.9))
    assert fv.distortion_at_rate(r, d, 6.5, slack=0.5) == pytest.approx(0.25 / math.sqrt(2))  # extends a segment
    with pytest.raises(ValueError):
        fv.distortion_at_rate(r, d, 5.0, slack=-1.0)
    with pytest.raises(ValueError):
        fv.distortion_at_rate([1.0], [1.0], 1.0)
    with pytest.raises(ValueError):
        fv.distortion_at_rate([1.0, 1.0], [1.0, 0.5], 1.0)
    with pytest.raises(ValueError):
        fv.distortion_at_rate([1.0, 2.0], [1.0, 0.0], 1.5)  # log of a zero distortion
    with pytest.raises(ValueError):
        fv.distortion_at_rate([1.0, float("nan")], [1.0, 0.5], 1.5)


def test_matched_rate_ratios_picks_the_best_covering_baseline():
    curves = {"ours": ([4.5, 5.5, 7.0], [0.6, 0.3, 0.1]),
              "a": ([4.0, 5.0, 6.0], [1.0, 0.5, 0.25]),  # at 4.5: 1/sqrt(2), at 5.5: 0.5/sqrt(2)
              "b": ([5.0, 6.0], [0.4, 0.2])}  # covers 5.5 only: 0.4/sqrt(2)
    out = fv.matched_rate_ratios(curves, "ours", ["a", "b"])
    assert [o["best"] for o in out] == ["a", "b", None]
    assert out[0]["ratio"] == pytest.approx(0.6 * math.sqrt(2))
    assert out[1]["best_mse"] == pytest.approx(0.4 / math.sqrt(2))
    assert math.isnan(out[2]["ratio"]) and out[2]["mse"] == 0.1
    assert fv.matched_rate_ratios(curves, "ours", ["a"], slack=1.0)[2]["best"] == "a"  # 7.0 is within 1 of 6.0
    with pytest.raises(ValueError):
        fv.matched_rate_ratios(curves, "ours", ["c"])
    with pytest.raises(ValueError):
        fv.matched_rate_ratios({"ours": ([1.0], [1.0, 2.0]), "a": curves["a"]}, "ours", ["a"])
    with pytest.raises(TypeError):
        fv.matched_rate_ratios(curves, "ours", [3])


def test_online_vq_from_given_codes_and_kmeans_init():
    g = torch.Generator().manual_seed(0)
    centres = torch.tensor([[-3.0, 0.0], [3.0, 0.0]])
    x = centres[torch.arange(400) % 2] + 0.1 * torch.randn(400, 2, generator=g)
    c = fv.train_online_vq(x, 2, 0, 20, batch=64, init=centres)
    assert torch.allclose(c, centres, atol=0.05)  # started at the clusters, it stays there
    with pytest.raises(ValueError):
        fv.train_online_vq(x, 2, 0, 5, init=torch.zeros(3, 2))
    q = fv.EMAVectorQuantizer(2, 2, seed=0)
    q.init_kmeans(x, 0)
    assert torch.allclose(q.codebook[q.codebook[:, 0].argsort()], centres, atol=0.05)
    with pytest.raises(ValueError):
        q.init_kmeans(torch.zeros(5, 3))


def test_evaluate_tokenizer_measures_rate_and_distortion():
    X = torch.rand(50, 16)
    model, _ = fv.train_tokenizer("VQ-EMA", X[:40], 16, 3, seed=0, n_tokens=2, d=2, batch=8, hidden=8,
                                  progress=False)
    r = fv.evaluate_tokenizer(model, X[:40], X[40:], X, prior_steps=2, seed=0)
    assert {"recon_mse", "bits_per_image", "entropy_bits", "utilization"} <= set(r)
    assert r["recon_mse"] > 0 and 0 <= r["bits_per_image"] and 0 < r["utilization"] <= 1
    assert r == fv.evaluate_tokenizer(model, X[:40], X[40:], X, prior_steps=2, seed=0)  # deterministic
    with pytest.raises(ValueError):
        fv.evaluate_tokenizer(model, X[:3], X[40:], X)
    with pytest.raises(TypeError):
        fv.evaluate_tokenizer(torch.nn.Linear(2, 2), X[:40], X[40:], X)
    with pytest.raises(ValueError):
        fv.train_tokenizer("VQ-EMA", X[:3], 16, 3, n_tokens=2, d=2, progress=False)  # k-means needs >= K latents


def test_uniform_grid_and_fixed_data_codebooks():
    x = torch.tensor([[0.0, -1.0], [4.0, 1.0]])
    g = fv.uniform_grid(x, [2, 2])
    assert torch.allclose(g, torch.tensor([[1.0, -0.5], [1.0, 0.5], [3.0, -0.5], [3.0, 0.5]]))
    with pytest.raises(ValueError):
        fv.uniform_grid(x, [2, 2, 2])
    mu, s = torch.tensor([1.0, -2.0]), 0.5
    data = mu + s * torch.randn(3000, 2, generator=torch.Generator().manual_seed(0))
    books = fv.fixed_data_codebooks(data, AffineGaussianField(mu, s), 16, 0, vq_steps=20)
    assert list(books) == list(fv.LORENZ_METHODS) and all(c.shape == (16, 2) for c in books.values())
    d = {m: fv.distortion(data, c) for m, c in books.items()}
    assert d["Flow + Lloyd"] < 1.3 * d["k-means"] < d["Gaussian grid"]  # the exact flow is near k-means
    assert d["VQ-EMA"] < 1.3 * d["k-means"]  # started at k-means, it stays near it
    with pytest.raises(ValueError):
        fv.fixed_data_codebooks(data, AffineGaussianField(mu, s), 7, 0, vq_steps=5)


def test_make_models_partial_rebuild_keeps_other_tensors(tmp_path):
    """`make_models.py --only flow/rings` retrains the rings flows (with `flow_steps_by_set`) and keeps every other
    stored tensor, curve and metric bit-identical."""
    from pathlib import Path

    from safetensors.torch import load_file

    from helpers import checkpoints

    mm = load_module(Path(__file__).resolve().parents[1] / "data" / "08_flow_vq" / "make_models.py",
                     "make_models_08")
    cfg = mm.tiny("models")
    mm.make_models(dict(cfg, flow_steps_by_set={}), tmp_path)
    w, _ = checkpoints.paths("08_flow_vq", "models", tmp_path)
    before, man0 = load_file(str(w)), checkpoints.load_manifest("08_flow_vq", "models", tmp_path)
    mm.make_models(dict(cfg, flow_steps_by_set={"rings": 6}), tmp_path, only=["flow/rings"])
    after, man1 = load_file(str(w)), checkpoints.load_manifest("08_flow_vq", "models", tmp_path)
    assert before.keys() == after.keys()
    assert all(torch.equal(before[k], after[k]) for k in before if not k.startswith("flow/rings/"))
    assert not all(torch.equal(before[k], after[k]) for k in before if k.startswith("flow/rings/"))
    assert man1["history"]["flow/rings/s0"] != man0["history"]["flow/rings/s0"]
    assert {k: v for k, v in man1["history"].items() if not k.startswith("flow/rings")} == \
        {k: v for k, v in man0["history"].items() if not k.startswith("flow/rings")}
    assert man1["config"]["flow_steps_by_set"] == {"rings": 6}
    checkpoints.load("08_flow_vq", "models", config=man1["config"], root=tmp_path, check_sources=False)
    with pytest.raises(SystemExit, match="another config"):
        mm.make_models(dict(cfg, flow_steps=4), tmp_path, only=["flow/rings"])
