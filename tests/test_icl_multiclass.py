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


# --- the shared subspace, references and read-outs (#40) ---------------------------------------------------------

@settings(max_examples=20, deadline=None)
@given(st.integers(3, 7), st.floats(0.0, 3.0), st.integers(0, 10**6), st.booleans())
def test_batched_centers_match_the_spectrum(C, alpha, seed, shared):
    rng = np.random.default_rng(seed)
    d, r = 10, C - 1
    s = I.power_spectrum(r, alpha)
    U = I.random_orthonormal(d, r, rng) if shared else None
    Ms = I.class_centers_batch(6, d, C, s, 2.0, rng, U)
    assert Ms.shape == (6, d, C)
    for M in Ms:
        assert I.stable_rank(M) == pytest.approx(float((s ** 2).sum() / s[0] ** 2), abs=1e-9)
        assert np.linalg.norm(M) ** 2 == pytest.approx(2.0 * C, rel=1e-12)
        np.testing.assert_allclose(M.sum(1), 0, atol=1e-10)
        if shared:
            np.testing.assert_allclose(U @ (U.T @ M), M, atol=1e-10)  # every task lies in span(U)
    if not shared:  # fresh tasks differ
        assert not np.allclose(Ms[0], Ms[1])


def test_vectorised_prompts_statistics():
    rng = np.random.default_rng(3)
    d, C, N = 6, 4, 12
    p = I.sample_prompts(4000, N, d, C, I.power_spectrum(3, 0.5), 4.0, rng, pi=I.label_priors(C, 0.5))
    counts = torch.nn.functional.one_hot(p["Y"], C).sum(1)
    assert (counts == torch.tensor([6, 2, 2, 2])).all()  # exact context counts in every prompt
    centers = p["M"].transpose(1, 2)
    Z = p["X"] - torch.gather(centers, 1, p["Y"][..., None].expand(-1, -1, d))
    zq = p["xq"] - centers[torch.arange(4000), p["yq"]]
    assert abs(Z.mean().item()) < 0.01 and abs(Z.var().item() - 1) < 0.02  # unit Gaussian noise
    assert abs(zq.var().item() - 1) < 0.05
    assert np.abs(np.bincount(p["yq"].numpy(), minlength=C) / 4000 - 0.25).max() < 0.03  # uniform queries
    task = I.class_centers(d, C, I.power_spectrum(3, 0.0), 4.0, rng)
    q = I.sample_prompts(5, N, d, C, None, 1.0, rng, task=task)
    assert torch.allclose(q["M"], torch.tensor(task, dtype=torch.float32).expand(5, d, C))


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 10**6))
def test_bayes_is_nearest_center_and_oracle_projects(seed):
    rng = np.random.default_rng(seed)
    d, C = 5, 4
    p = I.sample_prompts(50, 8, d, C, I.power_spectrum(3, 0.0), 3.0, rng)
    dist = ((p["xq"][:, :, None] - p["M"]) ** 2).sum(1)  # (B, C) squared distances to the true centers
    assert (I.bayes_scores(p["M"], p["xq"]).argmax(-1) == dist.argmin(-1)).all()
    # the subspace oracle with the whole space is plain plug-in LDA; with a subspace it is LDA on projections
    assert torch.allclose(I.subspace_oracle_scores(p["X"], p["Y"], p["xq"], C, np.eye(d)),
                          I.lda_scores(p["X"], p["Y"], p["xq"], C), atol=1e-5)
    U = I.random_orthonormal(d, 2, rng)
    Ut = torch.tensor(U, dtype=torch.float32)
    assert torch.allclose(I.subspace_oracle_scores(p["X"], p["Y"], p["xq"], C, U),
                          I.lda_scores(p["X"] @ Ut, p["Y"], p["xq"] @ Ut, C), atol=1e-5)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10**6), st.floats(0.1, 10.0))
def test_matrix_cosine_and_alignment(seed, scale):
    rng = np.random.default_rng(seed)
    d, k = 9, 3
    U = I.random_orthonormal(d, k, rng)
    P = U @ U.T
    assert I.matrix_cosine(scale * P, P) == pytest.approx(1.0, abs=1e-12)
    assert I.matrix_cosine(-P, P) == pytest.approx(-1.0, abs=1e-12)
    assert I.matrix_cosine(np.eye(d), P) == pytest.approx(np.sqrt(k / d), abs=1e-12)
    W = U @ np.diag(scale * (1 + rng.random(k))) @ U.T  # positive spectrum inside span(U)
    np.testing.assert_allclose(I.subspace_alignment(W, U), 1.0, atol=1e-9)
    Q = I.random_orthonormal(d, d, rng)
    Uperp = Q[:, :k] - U @ (U.T @ Q[:, :k])
    Uperp, _ = np.linalg.qr(Uperp)
    np.testing.assert_allclose(I.subspace_alignment(Uperp @ Uperp.T + 0.5 * P, U), 0.0, atol=1e-9)  # wrong space
    # alignment is about the eigenspace, not the basis: a rotated U inside the same span gives the same cosines
    R = I.random_orthonormal(k, k, rng)
    np.testing.assert_allclose(I.subspace_alignment(W, U @ R), 1.0, atol=1e-9)


def test_examples_to_reach():
    grid = [1, 2, 4, 8]
    accs = [0.2, 0.4, 0.6, 0.8]  # linear in log2(examples)
    assert I.examples_to_reach(grid, accs, 0.5) == pytest.approx(2 * np.sqrt(2), rel=1e-12)
    assert I.examples_to_reach(grid, accs, 0.6) == pytest.approx(4.0, rel=1e-12)
    assert I.examples_to_reach(grid, accs, 0.1) == 1.0  # reached at the first point: an upper bound
    assert np.isnan(I.examples_to_reach(grid, accs, 0.9))
    with pytest.raises(ValueError, match="increasing"):
        I.examples_to_reach([1, 1, 2, 3], accs, 0.5)


def test_predicted_margins():
    M = np.array([[2.0, -2.0, 0.0], [0.0, 0.0, 1.0]])  # mu_0 = (2, 0), mu_1 = (-2, 0), mu_2 = (0, 1)
    pi = np.array([0.5, 0.25, 0.25])
    m = I.predicted_margins(M, pi)
    # class 0: min(0.5*4 - 0.25*(-4), 0.5*4 - 0.25*0) = 2; class 1: min(0.25*4 + 0.5*4, 0.25*4 - 0) = 1;
    # class 2: min(0.25*1 - 0, 0.25*1 - 0) = 0.25
    np.testing.assert_allclose(m, [2.0, 1.0, 0.25])
    # a collinear class pushed outward takes the inner class's queries: a negative margin
    assert I.predicted_margins(np.array([[1.0, 3.0, -4.0]]), np.full(3, 1 / 3))[0] < 0


def test_new_functions_refuse_bad_input():
    with pytest.raises(ValueError):
        I.class_centers_batch(0, 4, 3, [1.0], 1.0, np.random.default_rng(0))
    with pytest.raises(ValueError, match="rank r"):
        I.class_centers_batch(2, 4, 3, [1.0, 1.0, 1.0], 1.0, np.random.default_rng(0))
    with pytest.raises(ValueError):
        I.class_centers_batch(2, 4, 3, [1.0], float("nan"), np.random.default_rng(0))
    with pytest.raises(ValueError):
        I.matrix_cosine(np.zeros((2, 2)), np.eye(2))
    with pytest.raises(ValueError):
        I.subspace_alignment(np.eye(3), np.ones((4, 2)))
    with pytest.raises(ValueError):
        I.sample_prompts(2, 4, 3, 3, [1.0], 1.0, np.random.default_rng(0), query_pi=np.array([0.5, 0.5]))


def test_dataset_prompts_rotate_and_keep_labels():
    rng = np.random.default_rng(0)
    feats = np.concatenate([rng.normal(0, 1, (20, 3)), rng.normal(5, 1, (20, 3)), rng.normal(-5, 1, (20, 3))])
    labels = np.repeat([0, 1, 2], 20)
    p = I.dataset_prompts(feats, labels, 30, 4, rng, d=6)
    assert p["X"].shape == (30, 12, 6) and p["xq"].shape == (30, 6)
    assert (torch.nn.functional.one_hot(p["Y"], 3).sum(1) == 4).all()
    # a rotation keeps norms (features were zero-padded), and each prompt has its own rotation
    norms = np.sort(np.linalg.norm(feats, axis=1))
    got = p["X"].norm(dim=-1).numpy().ravel()
    assert np.abs(norms[np.searchsorted(norms, got).clip(0, 59)] - got).min() < 1e-4
    assert not torch.allclose(p["X"][0].mean(0), p["X"][1].mean(0))
    # the classes stay separable: plug-in LDA on these prompts is nearly perfect
    assert (I.lda_scores(p["X"], p["Y"], p["xq"], 3).argmax(-1) == p["yq"]).float().mean() > 0.9
    with pytest.raises(ValueError, match="per_label"):
        I.dataset_prompts(feats, labels, 2, 20, rng)


def test_pca_subspace_and_residue():
    rng = np.random.default_rng(0)
    d, k = 12, 3
    U = I.random_orthonormal(d, k, rng)
    feats = rng.standard_normal((4000, k)) * 3 @ U.T + rng.standard_normal((4000, d))
    assert I.subspace_alignment(I.pca_subspace(feats, k) @ I.pca_subspace(feats, k).T, U).min() > 0.95
    with pytest.raises(ValueError):
        I.pca_subspace(feats, d + 1)
    P = U @ U.T
    r0 = I.offsubspace_residue(2 * P, U)
    assert r0["ratio"] == pytest.approx(0.0, abs=1e-20)
    # a systematic part c (I - P): mean eigenvalue c, no spread, symmetric
    r1 = I.offsubspace_residue(P + 0.1 * (np.eye(d) - P), U)
    assert r1["eig_mean"] == pytest.approx(0.1, abs=1e-12) and r1["eig_sd"] < 1e-12
    assert r1["antisym_share"] == pytest.approx(0.0, abs=1e-12)
    assert r1["ratio"] == pytest.approx(0.01 * (d - k) / k, rel=1e-9)
    # i.i.d. noise: mean ~ 0, antisymmetric share ~ 1/2, per-entry size the same at any d
    per = []
    for dd in (12, 48):
        Ud = I.random_orthonormal(dd, k, rng)
        r = I.offsubspace_residue(Ud @ Ud.T + 0.01 * rng.standard_normal((dd, dd)), Ud)
        assert abs(r["eig_mean"]) < 0.3 * r["eig_sd"] and abs(r["antisym_share"] - 0.5) < 0.15
        per.append(r["per_entry"])
    assert per[1] / per[0] == pytest.approx(1.0, abs=0.35)
    with pytest.raises(ValueError, match="no part"):
        I.offsubspace_residue(np.eye(d) - P, U)
    with pytest.raises(ValueError):
        I.offsubspace_residue(np.eye(d), np.eye(d))


def test_door_checks_of_the_issue_58_cases():
    """Empty prompts, a huge R2, an extra leading axis, labels out of range: a clear error naming the argument."""
    rng = np.random.default_rng(0)
    p = I.sample_prompts(3, 6, 4, 3, I.power_spectrum(2, 0.0), 2.0, rng)
    X, Y, xq = p["X"], p["Y"], p["xq"]
    with pytest.raises(ValueError, match="R2"):
        I.class_centers(4, 3, [1.0, 0.5], 1e308, rng)  # was: NaN centers
    with pytest.raises(ValueError, match="X must have ndim 3"):
        I.lda_scores(X[None], Y[None], xq[None], 3)  # was: accepted with an extra leading axis
    for f in (lambda X_: I.reduced_scores(X_, Y[:, :0], xq, torch.eye(4), 3), lambda X_: I.lda_scores(X_, Y[:, :0], xq, 3),
              lambda X_: I.lsa_forward(X_, Y[:, :0], xq, torch.zeros(7, 7), torch.zeros(7, 7), 3)):
        with pytest.raises(ValueError, match="X must not be empty"):
            f(X[:, :0])  # was: an einsum broadcast error
    with pytest.raises(ValueError, match="Y must have values"):
        I.reduced_scores(X, Y + 3, xq, torch.eye(4), 3)
    with pytest.raises(TypeError, match="rng"):
        I.random_orthonormal(4, 2, 0)
    with pytest.raises(ValueError, match="pi"):
        I.lda_scores(X, Y, xq, 3, pi=np.array([0.0, 0.5, 0.5]))  # log 0: a -inf score
    with pytest.raises(ValueError, match="scores must have C=3 columns"):
        I.accuracy_by_class(torch.zeros(3, 2), p["yq"], 3)
    with pytest.raises(ValueError, match="missing"):
        I.icl_loss(I.LinearICL(4), {"X": X})
    with pytest.raises(ValueError, match="X must have shape"):
        I.LinearICL(5)(X, Y, xq, 3)  # the model's d is 5, the prompt's 4


def test_door_checks_do_not_change_numbers():
    """The checked entry points compute exactly what the unchecked reduced form computes."""
    rng = np.random.default_rng(3)
    p = I.sample_prompts(8, 10, 5, 4, I.power_spectrum(3, 1.0), 4.0, rng)
    W = torch.randn(5, 5, generator=torch.Generator().manual_seed(0))
    ref = I._reduced(p["X"], p["Y"], p["xq"], W, 4)
    assert torch.equal(I.reduced_scores(p["X"], p["Y"], p["xq"], W, 4), ref)
    lt = I.LinearICL(5)
    with torch.no_grad():
        lt.W.copy_(W)
    assert torch.equal(lt(p["X"], p["Y"], p["xq"], 4), ref)


def test_bootstrap_examples_brackets_the_point_estimate_and_pairs_models():
    rng = np.random.default_rng(0)
    grid = [1, 2, 4, 8]
    n = 2000
    ref = [np.ones(n)] * 4  # the reference is always right: bar = frac
    fast = [(rng.random(n) < p).astype(float) for p in (0.5, 0.8, 0.95, 0.99)]
    slow = [(rng.random(n) < p).astype(float) for p in (0.3, 0.5, 0.8, 0.95)]
    boot = I.bootstrap_examples({"fast": fast, "slow": slow}, ref, grid, np.random.default_rng(1), frac=0.9,
                                n_boot=100)
    point = {m: I.examples_to_reach(grid, [c.mean() for c in v], 0.9) for m, v in (("fast", fast), ("slow", slow))}
    for m in boot:
        lo, hi = np.percentile(boot[m], [5, 95])
        assert lo <= point[m] <= hi and hi - lo > 0  # the interval has width and holds the estimate
    assert (boot["slow"] > boot["fast"]).all()  # paired draws keep the order of two well-separated models
    never = [np.zeros(n)] * 4
    assert np.isnan(I.bootstrap_examples({"never": never}, ref, grid, np.random.default_rng(2), n_boot=5)["never"]).all()
    with pytest.raises(ValueError):
        I.bootstrap_examples({"fast": fast[:3]}, ref, grid, np.random.default_rng(3))
    with pytest.raises(ValueError):
        I.bootstrap_examples({"fast": [c[:10] for c in fast]}, ref, grid, np.random.default_rng(3))


# --- prompts as class sums (round 3: cheap training and evaluation at d = 256) ---------------------------------
def _sums_of(p, C):
    Yh = torch.nn.functional.one_hot(p["Y"], C).double()
    return torch.einsum("bnc,bnd->bcd", Yh, p["X"].double()), Yh.sum(1)


@pytest.mark.parametrize("seed", [0, 1])
def test_class_sum_scorers_equal_the_prompt_scorers(seed):
    rng = np.random.default_rng(seed)
    d, C = 7, 4
    p = I.sample_prompts(12, 20, d, C, I.power_spectrum(3, 0.5), 4.0, rng, pi=I.label_priors(C, 0.55))
    S, n = _sums_of(p, C)
    X, xq = p["X"].double(), p["xq"].double()
    W = torch.randn(d, d, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
    torch.testing.assert_close(I.sum_scores(S, n, xq, W), I.reduced_scores(X, p["Y"], xq, W, C))
    torch.testing.assert_close(I.lda_sum_scores(S, n, xq), I.lda_scores(X, p["Y"], xq, C))
    U = I.random_orthonormal(d, 3, rng)
    torch.testing.assert_close(I.lda_sum_scores(S, n, xq, U=U), I.subspace_oracle_scores(X, p["Y"], xq, C, U))
    pi = I.label_priors(C)
    torch.testing.assert_close(I.lda_sum_scores(S, n, xq, pi=pi), I.lda_scores(X, p["Y"], xq, C, pi))
    # the constant feature: W~ = blockdiag(W, b) adds b times the class share to every score
    St, xt = I.with_constant_feature(S, n, xq)
    Wt = torch.zeros(d + 1, d + 1, dtype=torch.float64)
    Wt[:d, :d], Wt[d, d] = W, -2.5
    torch.testing.assert_close(I.sum_scores(St, n, xt, Wt), I.sum_scores(S, n, xq, W) - 2.5 * n / n.sum(-1, True))


def test_class_sum_prompts_have_the_distribution_of_summed_prompts():
    rng = np.random.default_rng(3)
    B, d, C, per = 4000, 5, 3, 6
    q = I.class_sum_prompts(B, [per, 2 * per, per], d, C, I.power_spectrum(2, 0.0), 9.0, rng)
    n = torch.tensor([per, 2 * per, per], dtype=torch.float32)
    assert (q["n"] == n).all()
    mu = q["M"].transpose(1, 2)
    z = (q["S"] - n[:, None] * mu) / n.sqrt()[:, None]  # standard normal if the sums are right
    assert abs(z.mean().item()) < 0.02 and abs(z.var().item() - 1) < 0.03
    zq = q["xq"] - mu[torch.arange(B), q["yq"]]
    assert abs(zq.var().item() - 1) < 0.05
    assert np.abs(np.bincount(q["yq"].numpy(), minlength=C) / B - 1 / C).max() < 0.03
    # a fixed U: every center in span(U)
    U = I.random_orthonormal(d, 2, rng)
    q2 = I.class_sum_prompts(5, [2, 2, 2], d, C, I.power_spectrum(2, 0.0), 4.0, rng, U=U)
    M = q2["M"].double().numpy()
    np.testing.assert_allclose(M - U @ U.T @ M, 0, atol=1e-5)


def test_sum_stream_is_deterministic_and_shuffles_counts():
    s1 = I.sum_stream(0, 1, 64, [6, 1, 1], 4, 3, I.power_spectrum(2, 0.0), 4.0, shuffle_counts=True)
    s2 = I.sum_stream(0, 1, 64, [6, 1, 1], 4, 3, I.power_spectrum(2, 0.0), 4.0, shuffle_counts=True)
    a, b = s1(5), s2(5)
    for k in a:
        assert torch.equal(a[k], b[k])
    assert (a["n"].sort(1).values == torch.tensor([1.0, 1.0, 6.0])).all()
    assert len({int(r.argmax()) for r in a["n"]}) == 3  # the majority class varies across prompts
    assert not torch.equal(s1(6)["S"], a["S"])


def test_train_sums_learns_identity_and_is_deterministic():
    d, C = 6, 4
    st = I.sum_stream(0, 2, 64, [6] * C, d, C, I.power_spectrum(C - 1, 0.0), 9.0)
    r1 = I.train_sums(d, st, 60, lr=1.0, decay=20, snapshots=[10, 60], progress=False)
    r2 = I.train_sums(d, st, 60, lr=1.0, decay=20, snapshots=[10, 60], progress=False)
    assert torch.equal(r1["W"], r2["W"]) and sorted(r1["snapshots"]) == [10, 60]
    assert torch.equal(r1["snapshots"][60], r1["W"])
    assert I.matrix_cosine(r1["W"], np.eye(d)) > 0.9
    assert np.mean(r1["loss"][-10:]) < np.mean(r1["loss"][:10])
    r3 = I.train_sums(d, st, 3, lr=1.0, constant_feature=True, progress=False)
    assert r3["W"].shape == (d + 1, d + 1)


def test_class_sum_functions_refuse_bad_input():
    rng = np.random.default_rng(0)
    sig = I.power_spectrum(2, 0.0)
    with pytest.raises(ValueError, match="counts must have shape"):
        I.class_sum_prompts(4, [1, 2], 5, 3, sig, 4.0, rng)
    with pytest.raises(ValueError, match="at least one context example"):
        I.class_sum_prompts(4, [0, 0, 0], 5, 3, sig, 4.0, rng)
    with pytest.raises(ValueError, match="counts"):
        I.class_sum_prompts(4, [1, -1, 2], 5, 3, sig, 4.0, rng)
    q = I.class_sum_prompts(4, [2, 2, 2], 5, 3, sig, 4.0, rng)
    with pytest.raises(ValueError, match="W must have shape"):
        I.sum_scores(q["S"], q["n"], q["xq"], torch.eye(4))
    with pytest.raises(TypeError, match="dtype"):
        I.sum_scores(q["S"], q["n"], q["xq"], torch.eye(5, dtype=torch.float64))
    with pytest.raises(ValueError, match="n must"):
        I.sum_scores(q["S"], q["n"][:, :2], q["xq"], torch.eye(5))
    with pytest.raises(ValueError, match="U must have shape"):
        I.lda_sum_scores(q["S"], q["n"], q["xq"], U=np.eye(4)[:, :2])
    st = I.sum_stream(0, 1, 4, [2, 2, 2], 5, 3, sig, 4.0)
    with pytest.raises(ValueError, match="snapshot"):
        I.train_sums(5, st, 3, lr=1.0, snapshots=[4], progress=False)
    with pytest.raises(ValueError, match="decay"):
        I.train_sums(5, st, 3, lr=1.0, decay=0.0, progress=False)
    with pytest.raises(ValueError, match="d = 6"):
        I.train_sums(6, st, 3, lr=1.0, progress=False)
    with pytest.raises(TypeError, match="shuffle_counts must be a bool"):
        I.sum_stream(0, 1, 4, [2, 2, 2], 5, 3, sig, 4.0, shuffle_counts="yes")


def test_constant_feature_learns_a_prior_correction():
    """The mechanism behind learned_prior_correction: trained on imbalanced contexts with balanced queries, the
    constant-feature LT learns a negative bias entry and beats W = I on the minority classes."""
    d, C, counts = 6, 4, [9, 1, 1, 1]
    sig = I.power_spectrum(C - 1, 0.0)
    st = I.sum_stream(0, 3, 128, counts, d, C, sig, 9.0, shuffle_counts=True)
    W = I.train_sums(d, st, 150, lr=1.0, decay=50, constant_feature=True, progress=False)["W"]
    assert W[d, d] < 0 < W[:d, :d].diagonal().mean()
    q = I.class_sum_prompts(4000, counts, d, C, sig, 9.0, np.random.default_rng(5))
    S, xq = I.with_constant_feature(q["S"], q["n"], q["xq"])
    acc_lt = I.accuracy_by_class(I.sum_scores(S, q["n"], xq, W), q["yq"], C)
    acc_id = I.accuracy_by_class(I.sum_scores(q["S"], q["n"], q["xq"], torch.eye(d)), q["yq"], C)
    assert acc_lt[1:].mean() > acc_id[1:].mean() + 0.02


def test_task_stream_imbalanced_and_shuffled():
    """Defaults give the first version's batches; ``pi`` + ``shuffle_classes`` give a random majority class per
    prompt, with labels, query label and the columns of M renamed together."""
    d, C, N, B = 6, 4, 12, 256
    sig = I.power_spectrum(C - 1, 0.0)
    plain = I.task_stream(0, 1, B, N, d, C, sig, 9.0)(3)
    ref = I.sample_prompts(B, N, d, C, sig, 9.0, np.random.default_rng([0, 1, 3]))
    for k in ref:
        assert torch.equal(plain[k], ref[k])
    pi = I.label_priors(C, 0.5)
    st = I.task_stream(0, 1, B, N, d, C, sig, 9.0, pi=pi, shuffle_classes=True)
    a, b = st(3), st(3)
    for k in a:
        assert torch.equal(a[k], b[k])
    counts = torch.nn.functional.one_hot(a["Y"], C).sum(1)
    assert (counts.sort(1).values == torch.tensor([2, 2, 2, 6])).all()
    assert len(set(counts.argmax(1).tolist())) == C  # the majority class varies across prompts
    # every context point and the query sit nearest their own (renamed) center
    mu = a["M"].transpose(1, 2)  # (B, C, d)
    near = torch.cdist(a["X"], mu).argmin(-1)
    assert (near == a["Y"]).float().mean() > 0.9
    assert (I.bayes_scores(a["M"], a["xq"]).argmax(-1) == a["yq"]).float().mean() > 0.9
    with pytest.raises(ValueError, match="pi"):
        I.task_stream(0, 1, B, N, d, C, sig, 9.0, pi=[0.5, 0.5])
    with pytest.raises(TypeError, match="shuffle_classes must be a bool"):
        I.task_stream(0, 1, B, N, d, C, sig, 9.0, shuffle_classes="yes")


def test_qk_subspace_alignment():
    d, C, k = 8, 5, 3
    U = I.random_orthonormal(d, k, np.random.default_rng(0))
    torch.manual_seed(0)
    tf = I.SoftmaxICL(d, C, d_model=16, n_layer=2, n_head=2)
    rand = I.qk_subspace_alignment(tf, U)
    assert rand["cosines"].shape == (k,) and 0 < rand["energy"] < 1
    assert rand["cosines"].min() < 0.99
    with torch.no_grad():  # a feature map that reads span(U) only
        tf.inp.weight[:, :d] = torch.randn(16, k) @ torch.tensor(U.T, dtype=torch.float32)
    out = I.qk_subspace_alignment(tf, U)
    assert np.allclose(out["cosines"], 1, atol=1e-5) and out["energy"] == pytest.approx(1, abs=1e-6)
    with pytest.raises(ValueError, match="U must have shape"):
        I.qk_subspace_alignment(tf, U[:5])
    with pytest.raises(TypeError, match="model"):
        I.qk_subspace_alignment(I.LinearICL(d), U)
    with pytest.raises(ValueError, match="layer"):
        I.qk_subspace_alignment(tf, U, layer=2)
