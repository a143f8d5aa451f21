"""Tests for helpers.flow_vq: quantile codes, the ODE integrator, transport, quantizers, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
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
