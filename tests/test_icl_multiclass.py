"""Tests for helpers.icl_multiclass: spectral generator, priors, the linear-transformer reduction."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import icl_multiclass as I


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 9), st.floats(0.0, 5.0), st.integers(0, 10**6))
def test_generator_spectrum_and_norm(C, alpha, seed):
    rng = np.random.default_rng(seed)
    d = 12
    r = min(C - 1, d)
    s = I.power_spectrum(r, alpha)
    M = I.class_centers(d, C, s, 4.0, rng)
    assert I.stable_rank(M) == pytest.approx(float((s ** 2).sum() / s[0] ** 2), abs=1e-9)
    assert np.linalg.norm(M) ** 2 == pytest.approx(C * 4.0, rel=1e-12)
    np.testing.assert_allclose(M.sum(1), 0, atol=1e-10)  # centers sum to zero
    np.testing.assert_allclose(np.linalg.svd(M, compute_uv=False)[:r] / np.linalg.svd(M, compute_uv=False)[0],
                               s / s[0], atol=1e-9)
    assert 1 - 1e-12 <= I.stable_rank(M) <= r + 1e-9


@settings(max_examples=25, deadline=None)
@given(st.floats(1.0, 6.0))
def test_alpha_for_stable_rank(target):
    a = I.alpha_for_stable_rank(target, 6)
    s = I.power_spectrum(6, a)
    assert float((s ** 2).sum() / s[0] ** 2) == pytest.approx(target, abs=1e-6)


def test_isotropic_spectrum_has_full_stable_rank():
    M = I.class_centers(10, 6, I.power_spectrum(5, 0.0), 1.0, np.random.default_rng(0))
    assert I.stable_rank(M) == pytest.approx(5.0, abs=1e-12)


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 8), st.integers(1, 12), st.floats(0.3, 0.9))
def test_label_counts_exact(C, per, maj):
    rng = np.random.default_rng(0)
    N = per * C * 10
    pi = I.label_priors(C, max(maj, 1.0 / C))
    y = I.prompt_labels(N, pi, rng)
    counts = np.bincount(y, minlength=C)
    assert counts.sum() == N
    assert np.abs(counts - N * pi).max() < 1.0  # largest-remainder rounding
    y2 = I.prompt_labels(10 * C, I.label_priors(C), rng)
    assert (np.bincount(y2, minlength=C) == 10).all()


def test_reduction_matches_full_forward():
    rng = np.random.default_rng(1)
    d, C, N = 8, 4, 20
    p = I.sample_prompts(16, N, d, C, I.power_spectrum(3, 1.0), 4.0, rng)
    W = torch.randn(d, d, dtype=torch.float64)
    Wkq = torch.zeros(d + C, d + C, dtype=torch.float64)
    Wkq[:d, :d] = W
    Wpv = torch.zeros(d + C, d + C, dtype=torch.float64)
    Wpv[d:, d:] = torch.eye(C, dtype=torch.float64)
    X, xq = p["X"].double(), p["xq"].double()
    full = I.lsa_forward(X, p["Y"], xq, Wkq, Wpv, C)
    red = I.reduced_scores(X, p["Y"], xq, W, C)
    assert torch.allclose(full, red, atol=1e-10)
    # and the reduced form is share_c * mean_c^T W x_q
    Yh = torch.nn.functional.one_hot(p["Y"], C).double()
    share = Yh.mean(1)
    mean = torch.einsum("bnc,bnd->bcd", Yh, X) / Yh.sum(1)[..., None]
    assert torch.allclose(red, share * torch.einsum("bcd,de,be->bc", mean, W, xq), atol=1e-10)
    # a wrong W_pv breaks the match: the test can fail
    assert not torch.allclose(I.lsa_forward(X, p["Y"], xq, Wkq, 2 * Wpv, C), red)


def test_isotropic_beats_collinear_with_identity():
    rng = np.random.default_rng(2)
    acc = []
    for a in (0.0, 4.0):
        p = I.sample_prompts(600, 40, 16, 5, I.power_spectrum(4, a), 9.0, rng)
        s = I.reduced_scores(p["X"], p["Y"], p["xq"], torch.eye(16), 5)
        acc.append((s.argmax(-1) == p["yq"]).float().mean().item())
    assert acc[0] > acc[1] + 0.2


def test_softmax_model_shapes():
    torch.manual_seed(0)
    m = I.SoftmaxICL(6, 3, d_model=16, n_layer=1, n_head=2)
    p = I.sample_prompts(4, 9, 6, 3, I.power_spectrum(2, 0.0), 1.0, np.random.default_rng(0))
    out = m(p["X"], p["Y"], p["xq"])
    assert out.shape == (4, 3)
    # permuting the context does not change the prediction (no positional encoding)
    perm = torch.randperm(9)
    assert torch.allclose(out, m(p["X"][:, perm], p["Y"][:, perm], p["xq"]), atol=1e-5)


def test_bad_inputs():
    with pytest.raises(ValueError, match=r"\[1, r\]"):
        I.alpha_for_stable_rank(5.5, 4)
    with pytest.raises(ValueError, match=r"\[1, r\]"):
        I.alpha_for_stable_rank(0.5, 4)
    with pytest.raises(ValueError, match="rank r"):
        I.class_centers(8, 4, I.power_spectrum(4, 0.0), 1.0, np.random.default_rng(0))
    with pytest.raises(ValueError):
        I.class_centers(8, 4, [1.0, -1.0], 1.0, np.random.default_rng(0))
    with pytest.raises(ValueError, match="majority"):
        I.label_priors(4, 0.1)
    with pytest.raises(ValueError, match="probability"):
        I.prompt_labels(10, np.array([0.5, 0.6]), np.random.default_rng(0))
    with pytest.raises(ValueError):
        I.stable_rank(np.zeros((3, 3)))
    with pytest.raises(ValueError):
        I.power_spectrum(0, 1.0)
