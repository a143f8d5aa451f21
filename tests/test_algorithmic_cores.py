"""Tests for helpers.algorithmic_cores (ACE): Gramians, balanced truncation, hooks, mechanism fits, comparisons."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import algorithmic_cores as ac
from helpers import nn as hnn
from helpers import repro


def planted(seed=0, N=20000, D=24, r=3, distract=2.0, noise=0.05):
    """H with a planted r-D core read by a linear tail, plus high-variance distractors the tail ignores."""
    rng = np.random.default_rng(seed)
    M = np.linalg.qr(rng.normal(size=(D, D)))[0]
    S, Dis = M[:, :r], M[:, r:r + 5]
    H = rng.normal(size=(N, r)) @ S.T + distract * rng.normal(size=(N, 5)) @ Dis.T + noise * rng.normal(size=(N, D))
    W = np.linalg.qr(rng.normal(size=(6, r)))[0] @ S.T
    return H, W, S


def test_ace_recovers_planted_core_and_pca_does_not():
    H, W, S = planted()
    core = ac.ace(H, W=W, threshold=0.999)
    assert core.rank == 3
    assert ac.principal_angles_deg(core.Q, S).max() < 5.0
    pca = np.linalg.svd(H - H.mean(0), full_matrices=False)[2][:3].T
    assert ac.principal_angles_deg(pca, S).max() > 45.0  # the distractors dominate the variance


def test_autograd_gramian_equals_linear_gramian():
    H, W, _ = planted(N=500)
    Wt = torch.tensor(W, dtype=torch.float32)
    obs = ac.observability_gramian(lambda h: h @ Wt.T, H, samples=32)
    np.testing.assert_allclose(obs, ac.linear_observability(W), atol=1e-5)


def test_autograd_gramian_through_a_module_with_parameters():
    torch.manual_seed(0)
    head = torch.nn.Linear(5, 3)
    H = np.random.default_rng(0).normal(size=(40, 5))
    obs = ac.observability_gramian(head, H, samples=10)
    np.testing.assert_allclose(obs, ac.linear_observability(head.weight.detach().numpy()), atol=1e-5)


def test_autograd_gramian_nonlinear_matches_finite_differences():
    rng = np.random.default_rng(1)
    H = rng.normal(size=(5, 4))
    Wt = torch.tensor(rng.normal(size=(3, 4)), dtype=torch.float64)
    tail = lambda h: torch.tanh(h.double() @ Wt.T)
    obs = ac.observability_gramian(tail, H, samples=5)
    ref = np.zeros((4, 4))
    for h in H:
        J = (1 - np.tanh(h @ Wt.numpy().T) ** 2)[:, None] * Wt.numpy()
        ref += J.T @ J / 5
    np.testing.assert_allclose(obs, ref, atol=1e-4)


def test_basis_orthonormal_and_nested():
    H, W, _ = planted(N=3000)
    core = ac.ace(H, W=W)
    np.testing.assert_allclose(core.basis.T @ core.basis, np.eye(H.shape[1]), atol=1e-8)
    assert core.energy[-1] == pytest.approx(1.0)
    assert np.all(np.diff(core.hsv) <= 1e-12)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_basis_invariance_under_rotation(seed):
    """ACE(H R, W R) = R^T ACE(H, W): the core is a property of the computation, not the coordinates."""
    H, W, _ = planted(seed=seed, N=2000, D=12)
    R = np.linalg.qr(np.random.default_rng(seed + 1).normal(size=(12, 12)))[0]
    a, b = ac.ace(H, W=W), ac.ace(H @ R, W=W @ R)
    assert a.rank == b.rank
    P1, P2 = R.T @ a.Q @ a.Q.T @ R, b.Q @ b.Q.T
    np.testing.assert_allclose(P1, P2, atol=1e-6)


def test_energy_rank():
    assert ac.energy_rank([1.0, 0.0, 0.0], 0.999) == 1
    assert ac.energy_rank([1.0, 1.0, 1.0, 1.0], 0.5) == 2
    assert ac.energy_rank([1.0, 1.0], 1.0) == 2
    with pytest.raises(ValueError):
        ac.energy_rank([1.0], 0.0)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), r=st.integers(1, 6))
def test_hooks_algebra(seed, r):
    rng = np.random.default_rng(seed)
    D = 8
    Q = np.linalg.qr(rng.normal(size=(D, r)))[0]
    h, mu = rng.normal(size=(5, D)), rng.normal(size=D)
    keep, rem = ac.intervene_array(h, Q, "keep"), ac.intervene_array(h, Q, "remove")
    np.testing.assert_allclose(keep + rem, h, atol=1e-12)
    np.testing.assert_allclose((keep * rem).sum(1), 0, atol=1e-10)  # orthogonal parts
    flip = ac.intervene_array(h, Q, "flip", mu)
    np.testing.assert_allclose(ac.intervene_array(flip, Q, "flip", mu), h, atol=1e-10)  # a reflection
    np.testing.assert_allclose((flip - mu) @ Q, -((h - mu) @ Q), atol=1e-10)
    np.testing.assert_allclose(flip @ (np.eye(D) - Q @ Q.T), h @ (np.eye(D) - Q @ Q.T), atol=1e-10)


def test_intervene_hook_on_module():
    torch.manual_seed(0)
    lin = torch.nn.Linear(4, 4)
    x = torch.randn(3, 4)
    full = np.eye(4)
    with ac.intervene(lin, full, "keep"):
        y = lin(x)
    assert torch.equal(y, lin(x)) or torch.allclose(y, lin(x), atol=1e-6)
    with ac.intervene(lin, full, "remove"):
        assert torch.allclose(lin(x), torch.zeros(3, 4), atol=1e-6)
    assert not lin._forward_hooks  # removed on exit


def test_linear_dynamics_and_markov_oracle():
    T = ac.cyclic_transition(4, 0.75)
    true = ac.transition_spectrum(T)
    assert true[0] == pytest.approx(1.0)
    x = ac.markov_sequences(T, 4000, 20, seed=0)
    E = np.eye(4)[:, :3]  # any affine function of the state; drop one coordinate of the one-hot
    onehot = np.eye(4)[x]
    z_now, z_next = onehot[:, :-1].reshape(-1, 4) @ E, onehot[:, 1:].reshape(-1, 4) @ E
    _, eig, r2 = ac.fit_linear_dynamics(z_now, z_next)
    err = [np.min(np.abs(eig - t)) for t in true[1:]]
    assert max(err) < 0.02
    _, _, r2_full = ac.fit_linear_dynamics(onehot[:, :-1].reshape(-1, 4), onehot[:, 1:].reshape(-1, 4))
    assert r2_full == pytest.approx(ac.markov_oracle_r2(T), abs=0.01)


def test_shift_operator_on_fourier_reps():
    p = 13
    ang = 2 * np.pi * np.arange(p) / p
    rng = np.random.default_rng(0)
    reps = np.stack([np.cos(ang), np.sin(ang), np.cos(4 * ang), np.sin(4 * ang)], 1) @ rng.normal(size=(4, 10))
    eigs = ac.shift_operator_eigs(reps)
    assert len(eigs) == 4 and ac.ring_fraction(eigs, p) == 1.0 and ac.mode_count(eigs, p) == 2
    assert ac.ring_fraction(0.3 * eigs, p) == 0.0
    noise = ac.shift_operator_eigs(rng.normal(size=(p, 6)))
    assert ac.ring_fraction(noise, p) < 1.0


def test_comparisons():
    rng = np.random.default_rng(0)
    Q = np.linalg.qr(rng.normal(size=(20, 3)))[0]
    assert ac.projector_overlap(Q, Q) == pytest.approx(1.0)
    assert ac.principal_angles_deg(Q, Q @ np.linalg.qr(rng.normal(size=(3, 3)))[0]).max() < 1e-5
    rand = [ac.projector_overlap(Q, np.linalg.qr(rng.normal(size=(20, 3)))[0]) for _ in range(300)]
    assert np.mean(rand) == pytest.approx(3 / 20, abs=0.02)
    X = rng.normal(size=(500, 3))
    c = ac.cca(X, X @ rng.normal(size=(3, 3)) + 5)
    np.testing.assert_allclose(c, 1.0, atol=1e-8)
    assert ac.cca(X, rng.normal(size=(500, 2))).max() < 0.2


def test_grok_and_slope():
    assert ac.grok_step([10, 20, 30], [0.1, 0.99, 1.0]) == 20
    assert ac.grok_step([10], [0.1]) is None
    x = np.array([0.5, 1, 2, 4])
    assert ac.loglog_slope(x, 3 / x) == pytest.approx(-1.0)


def test_modadd_split():
    tr, te = ac.modadd_split(7, 0.5)
    assert len(tr) + len(te) == 49
    assert np.all((tr[:, 0] + tr[:, 1]) % 7 == tr[:, 2])
    assert not {tuple(r) for r in tr} & {tuple(r) for r in te}


def test_bad_input():
    H, W, _ = planted(N=100)
    with pytest.raises(ValueError, match="columns"):
        ac.ace(H, W=W[:, :-1])
    with pytest.raises(ValueError, match="exactly one"):
        ac.ace(H)
    with pytest.raises(ValueError, match="2-D"):
        ac.controllability_gramian(H[0])
    with pytest.raises(TypeError):
        ac.controllability_gramian([[1.0, 2.0]])
    with pytest.raises(ValueError, match="square"):
        ac.balanced_core(np.eye(3), np.eye(4))
    with pytest.raises(ValueError, match="rows"):
        ac.intervene_array(np.zeros((2, 5)), np.eye(4)[:, :2], "keep")
    with pytest.raises(ValueError, match="mode"):
        ac.intervene_array(np.zeros((2, 4)), np.eye(4)[:, :2], "swap")
    with pytest.raises(ValueError, match="same shape"):
        ac.fit_linear_dynamics(np.zeros((5, 2)), np.zeros((5, 3)))
    with pytest.raises(ValueError, match="NaN"):
        ac.controllability_gramian(np.full((3, 2), np.nan))
    with pytest.raises(ValueError, match="row-stochastic"):
        ac.transition_spectrum(np.ones((2, 2)))
    with pytest.raises(TypeError):
        with ac.intervene("not a module", np.eye(2), "keep"):
            pass


# ---------------------------------------------------------------------------------------------------------------
# grokking runs, nulls and the per-slot agreement tools
def test_checkpoint_config_names():
    assert ac.checkpoint_config("modadd")["p"] == 53 and ac.checkpoint_config("modadd")["d"] == 128
    assert set(ac.checkpoint_config("groktime")["wd_axis"]["wds"]) == {0.25, 0.5, 1.0, 2.0}
    with pytest.raises(ValueError, match="name"):
        ac.checkpoint_config("nope")


def test_train_modadd_and_analysis_tiny():
    tr, te = (torch.tensor(a) for a in ac.modadd_split(7, 0.5, seed=42))
    torch.manual_seed(0)
    m = ac.modadd_model(7, 16)
    log = ac.train_modadd(m, tr, te, 30, lr=3e-3, wd=1.0, eval_every=10, snapshot_every=10)
    assert log["step"] == [10, 20, 30] and sorted(log["snapshots"]) == [0, 10, 20, 30]
    assert all(v.dtype == torch.float16 for v in log["snapshots"][30].values())
    a = ac.modadd_analysis(m, te, 7, samples=8, null_draws=2, r_max=6)
    assert 1 <= a["r_energy"] <= 16 and a["r_suf"] <= 6 and 0 <= a["ring"] <= 1 and 0 <= a["ring_null"] <= 1
    stop = ac.train_modadd(ac.modadd_model(7, 16), tr, te, 30, lr=3e-3, wd=1.0, eval_every=10, stop_at=0.0)
    assert stop["step"] == [10]
    with pytest.raises(ValueError, match="steps"):
        ac.train_modadd(m, tr, te, 0, lr=1e-3, wd=1.0)
    with pytest.raises(ValueError, match="lr"):
        ac.train_modadd(m, tr, te, 5, lr=-1.0, wd=1.0)
    with pytest.raises(TypeError, match="model"):
        ac.modadd_analysis("not a model", te, 7)


def test_memorise_generalise_and_choose_checkpoints():
    steps = list(range(10, 210, 10))
    tr = [min(1.0, 0.2 * k) for k in range(1, 21)]  # memorised at step 50
    te = [0.05] * 10 + [0.3, 0.6, 0.9, 0.96, 0.99] + [1.0] * 5  # generalises at step 140
    assert ac.memorise_generalise(steps, tr, te) == (50, 140)
    named = ac.choose_checkpoints({"step": steps, "train_acc": tr, "test_acc": te}, 8)
    assert named["memorised"] == 50 and named["grokking"] == 140 and named["end"] == 200
    assert named["pre_grokking"] == 110  # the last step still below half way to 0.95
    assert all(140 < v < 200 for k, v in named.items() if k.startswith("after_"))
    assert ac.choose_checkpoints({"step": steps, "train_acc": [0.1] * 20, "test_acc": [0.0] * 20}) == {"end": 200}
    with pytest.raises(ValueError, match="no logged steps"):
        ac.choose_checkpoints({"step": [], "train_acc": [], "test_acc": []})


def test_ring_null_is_below_a_fourier_core():
    p = 23
    c = np.arange(p)
    fourier = np.stack([np.cos(2 * np.pi * k * c / p) for k in (1, 3)] + [np.sin(2 * np.pi * k * c / p)
                                                                          for k in (1, 3)], 1)
    assert ac.ring_fraction(ac.shift_operator_eigs(fourier), p) == 1.0
    assert ac.ring_fraction_null(4, p, draws=20) < 0.9
    with pytest.raises(ValueError, match="r"):
        ac.ring_fraction_null(0, p)


def test_spearman_and_matched_relative_error():
    assert ac.spearman([1, 2, 3, 4], [8, 6, 4, 2]) == pytest.approx(-1.0)
    assert np.isnan(ac.spearman([1, 1, 1], [1, 2, 3]))
    with pytest.raises(ValueError, match="same length"):
        ac.spearman([1, 2, 3], [1, 2])
    true = np.array([0.75 + 0.25j, 0.75 - 0.25j, 0.5])
    est = np.array([0.5 * 1.01, 0.75 - 0.25j, 0.75 + 0.25j])  # permuted, one 1% off
    np.testing.assert_allclose(np.sort(ac.matched_relative_error(est, true)), [0, 0, 0.01], atol=1e-12)
    with pytest.raises(ValueError, match="same length"):
        ac.matched_relative_error(est[:2], true)
    with pytest.raises(ValueError, match="non-zero"):
        ac.matched_relative_error(est, np.array([0.0, 1.0, 2.0]))


def test_bootstrap_dynamics_eigs_brackets_the_truth():
    rng = np.random.default_rng(0)
    A = np.array([[0.9, 0.0], [0.0, 0.5]])
    Z = np.zeros((200, 30, 2))
    for t in range(1, 30):
        Z[:, t] = Z[:, t - 1] @ A + rng.normal(size=(200, 2))
    boot = ac.bootstrap_dynamics_eigs(Z, n_boot=50)
    assert boot.shape == (50, 2)
    lo, hi = np.quantile(np.sort(boot.real, 1), [0.0, 1.0], axis=0)
    assert lo[0] < 0.5 < hi[0] and lo[1] < 0.9 < hi[1]
    with pytest.raises(ValueError, match="Z"):
        ac.bootstrap_dynamics_eigs(np.zeros((3, 4)))


def test_pooled_gramian_and_frozen_ln():
    a, b = np.eye(3), 3 * np.eye(3)
    np.testing.assert_allclose(ac.pooled_gramian([a, b], [1, 3]), 2.5 * np.eye(3))
    with pytest.raises(ValueError, match="weight"):
        ac.pooled_gramian([a, b], [1])
    with pytest.raises(ValueError, match="square"):
        ac.pooled_gramian([a, np.eye(2)], [1, 1])
    w, g = np.array([1.0, -2.0, 0.5, 0.0]), np.array([1.0, 2.0, 1.0, 1.0])
    obs = ac.ln_frozen_observability(w, g, 2.0)
    assert np.linalg.matrix_rank(obs) == 1
    # equals J^T J for the frozen-LayerNorm tail, computed by autograd
    wt, gt = torch.tensor(w), torch.tensor(g)
    tail = lambda h: ((h.double() - h.double().mean(-1, keepdim=True)) * gt / 2.0 @ wt)[:, None]
    np.testing.assert_allclose(ac.observability_gramian(tail, np.random.default_rng(0).normal(size=(5, 4))), obs,
                               atol=1e-6)
    with pytest.raises(ValueError, match="sigma"):
        ac.ln_frozen_observability(w, g, 0.0)
    with pytest.raises(ValueError, match="gamma"):
        ac.ln_frozen_observability(w, g[:2], 1.0)


def test_cyclic_fit_from_class_means_matches_analysis():
    """The notebook's ring-fraction nulls refit the shift on class means x core basis: that must give the analysis'
    eigenvalues, and a broken input (the wrong basis rank) must not."""
    tr, te = (torch.tensor(a) for a in ac.modadd_split(7, 0.5, seed=42))
    torch.manual_seed(0)
    m = ac.modadd_model(7, 16)
    ac.train_modadd(m, tr, te, 30, lr=3e-3, wd=1.0, eval_every=10)
    a = ac.modadd_analysis(m, te, 7, samples=8, r_max=6)
    with torch.no_grad():
        _, rec = m(te[:, :2], record=True)
    H = rec["hidden"][-1][:, -1].numpy()
    core = ac.ace(H, tail=lambda h: m.head(m.ln_f(h)), threshold=0.99, samples=8, seed=0)
    y = te[:, 2].numpy()
    means = np.stack([H[y == c].mean(0) for c in range(7)])
    eigs = ac.shift_operator_eigs(means @ core.basis[:, : a["r_used"]])
    assert np.allclose(np.sort_complex(eigs), np.sort_complex(a["eigs"]), atol=1e-8)
    assert ac.ring_fraction(eigs, 7) == a["ring"]
    wrong = ac.shift_operator_eigs(means @ core.basis[:, : a["r_used"] + 3])
    assert wrong.shape != a["eigs"].shape or not np.allclose(np.sort_complex(wrong), np.sort_complex(a["eigs"]))


def test_ring_fraction_nulls_logic():
    """Why the ring fraction needs a class-order null: a planted Fourier code is cyclic only in its own order, while
    at rank >= p - 1 any order (even random class means) puts every eigenvalue on the circle."""
    p, rng = 31, np.random.default_rng(0)
    c = np.arange(p)
    fourier = np.stack([f(2 * np.pi * k * c / p) for k in (1, 4) for f in (np.cos, np.sin)], axis=1)
    assert ac.ring_fraction(ac.shift_operator_eigs(fourier), p) == 1.0
    permuted = [ac.ring_fraction(ac.shift_operator_eigs(fourier[rng.permutation(p)]), p) for _ in range(20)]
    assert max(permuted) < 1.0
    full = rng.normal(size=(p, p - 1))
    assert ac.ring_fraction(ac.shift_operator_eigs(full[rng.permutation(p)]), p) == 1.0


def test_modadd_class_states():
    """The stored inputs of the ring-fraction nulls: class means and core coordinates that reproduce the analysis'
    ring fraction; other weights (a broken checkpoint) give other states, so the notebook's
    ``stored_states_reproduce`` check fails on them; bad inputs raise."""
    tr, te = (torch.tensor(a) for a in ac.modadd_split(7, 0.5, seed=42))
    torch.manual_seed(0)
    m = ac.modadd_model(7, 16)
    ac.train_modadd(m, tr, te, 30, lr=3e-3, wd=1.0, eval_every=10)
    a = ac.modadd_analysis(m, te, 7, samples=8, r_max=6)
    means, reps = ac.modadd_class_states(m, te, 7, a["r_used"], samples=8)
    assert means.shape == (7, 16) and reps.shape == (7, a["r_used"]) and means.dtype == np.float32
    assert ac.ring_fraction(ac.shift_operator_eigs(reps.astype(np.float64)), 7) == a["ring"]
    again = ac.modadd_class_states(m, te, 7, a["r_used"], samples=8)
    assert np.array_equal(again[0], means) and np.array_equal(again[1], reps)
    torch.manual_seed(1)
    other = ac.modadd_class_states(ac.modadd_model(7, 16), te, 7, a["r_used"], samples=8)
    assert np.abs(other[0] - means).max() > 1e-4
    with pytest.raises(ValueError, match="r must be at most"):
        ac.modadd_class_states(m, te, 7, 17)
    with pytest.raises(ValueError, match="every class"):
        ac.modadd_class_states(m, te[te[:, 2] != 3], 7, 2)
    with pytest.raises(TypeError, match="model"):
        ac.modadd_class_states("not a model", te, 7, 2)


def test_largest_drop():
    assert ac.largest_drop([0.1, 0.5, 1.0, 1.0]) == 0.0
    assert ac.largest_drop([0.1, 1.0, 0.3, 1.0, 0.9]) == pytest.approx(0.7)
    # only from start on: the early dip does not count
    assert ac.largest_drop([1.0, 0.2, 1.0, 0.95], start=2) == pytest.approx(0.05)
    with pytest.raises(ValueError):
        ac.largest_drop([1.0, float("nan")])


def test_record_per_seed_aligns_conditions():
    from helpers import claims
    rec = claims.ClaimsRecord("t", {})
    cond = {"stable": dict(measured=[0.0, 0.3, 0.0], op="<=", target=0.05, statement="stable")}
    rec.condition("stable", **cond["stable"])
    # all seeds defined: the condition is used as recorded
    v = ac.record_per_seed(rec, "a", "a", [2.0, 2.0, 0.5], given=("stable",), conditions=cond, paper="p",
                           op=">", target=1.0)
    assert v == "mixed" and rec.claims[-1].inconclusive_seeds == [1]
    # a seed left out: the condition is re-recorded over the kept seeds
    v = ac.record_per_seed(rec, "b", "b", [None, 2.0, 2.0], given=("stable",), conditions=cond, paper="p",
                           op=">", target=1.0, baseline=[1, 2, 3])
    assert rec.claims[-1].given == ["stable@b"] and rec.claims[-1].baseline == [2.0, 3.0]
    # the kept seeds' condition holds at 1 of 2: too few for a verdict (claims.verdict_of, 53671bd)
    assert v == "inconclusive" and rec.claims[-1].inconclusive_seeds == [0]
    cond2 = {"flat": dict(measured=[0.3, 0.0, 0.0], op="<=", target=0.05, statement="flat")}
    rec.condition("flat", **cond2["flat"])
    v = ac.record_per_seed(rec, "b2", "b2", [None, 2.0, 2.0], given=("flat",), conditions=cond2, paper="p",
                           op=">", target=1.0)
    assert rec.claims[-1].given == ["flat@b2"] and v == "held" and rec.claims[-1].inconclusive_seeds == []
    v = ac.record_per_seed(rec, "c", "c", [None, 2.0, float("nan")], given=("stable",), conditions=cond,
                           paper="p", op=">", target=1.0)
    assert v == "inconclusive"
    assert ac.record_per_seed(rec, "d", "d", [None], paper="p", op=">", target=1.0) == "untested"
    assert claims.record_problems(rec.to_dict()) == []


def test_train_modadd_minibatch_warmup_clip_deterministic():
    tr, te = (torch.tensor(a) for a in ac.modadd_split(7, 0.5, seed=42))

    def run():
        torch.manual_seed(0)
        m = ac.modadd_model(7, 16)
        return ac.train_modadd(m, tr, te, 20, lr=3e-3, wd=1.0, eval_every=10, batch_size=8, warmup=5, clip=1.0,
                               batch_seed=3)

    a, b = run(), run()
    assert a["loss"] == b["loss"] and a["test_acc"] == b["test_acc"]  # same seed, same numbers
    torch.manual_seed(0)
    full = ac.train_modadd(ac.modadd_model(7, 16), tr, te, 20, lr=3e-3, wd=1.0, eval_every=10)
    assert full["loss"] != a["loss"]  # minibatches are not the full batch
    for bad, err in ((dict(batch_size=0), "batch_size"), (dict(warmup=-1), "warmup"), (dict(clip=0.0), "clip"),
                     (dict(batch_size=2.5), "batch_size")):
        with pytest.raises((ValueError, TypeError), match=err):
            ac.train_modadd(ac.modadd_model(7, 16), tr, te, 5, lr=1e-3, wd=1.0, **bad)


def test_frozen_fourier_embedding_sets_the_modes():
    for m in (1, 2, 4):
        E = ac.fourier_embedding(31, list(range(1, m + 1)), 16, seed=m)
        assert E.shape == (31, 16) and np.allclose(np.linalg.norm(E, axis=1), 1.0)
        assert ac.embedding_modes(E, 31) == m
    assert ac.embedding_modes(np.random.default_rng(0).normal(size=(31, 16)), 31) > 8  # a random one holds many
    model = ac.modadd_model(11, 16, freqs=[2, 3])
    assert not model.tok.weight.requires_grad
    before = model.tok.weight.detach().clone()
    tr, te = (torch.tensor(a) for a in ac.modadd_split(11, 0.5, seed=42))
    ac.train_modadd(model, tr, te, 5, lr=1e-2, wd=1.0, eval_every=5)
    assert torch.equal(model.tok.weight, before)  # frozen: neither trained nor decayed
    with pytest.raises(ValueError, match="distinct"):
        ac.fourier_embedding(11, [2, 2], 8)
    with pytest.raises(ValueError, match="freqs"):
        ac.fourier_embedding(11, [6], 8)  # above p // 2
    with pytest.raises(ValueError, match="d must be"):
        ac.fourier_embedding(11, [1, 2, 3], 4)
    with pytest.raises(ValueError, match="rows"):
        ac.embedding_modes(np.zeros((5, 3)), 7)


def test_folded_spectrum_finds_the_planes_and_what_a_basis_captures():
    p = 31
    E = ac.fourier_embedding(p, [3, 7], 12, seed=1)
    spec = ac.folded_spectrum(E)
    assert spec.shape == (p // 2,)
    assert np.flatnonzero(spec > 1e-9 * spec.sum()).tolist() == [2, 6]  # k = 3 and 7 (entry k - 1)
    assert np.isclose(spec.sum(), p * (np.linalg.norm(E - E.mean(0)) ** 2))  # Parseval: nothing lost
    # the power a basis captures, plane by plane: the plane of k = 3 whole, half of k = 7's plane
    a = np.arange(p)[:, None] * 2 * np.pi / p
    M = np.concatenate([np.cos(3 * a), np.sin(3 * a), np.cos(7 * a), np.sin(7 * a)], 1)
    full, part = ac.folded_spectrum(M), ac.folded_spectrum(M[:, :3])
    assert np.isclose(part[2] / full[2], 1.0) and np.isclose(part[6] / full[6], 0.5)
    assert np.allclose(ac.folded_spectrum(np.ones((p, 4))), 0.0)  # constant rows: no power
    with pytest.raises(ValueError, match="rows"):
        ac.folded_spectrum(np.zeros((2, 3)))


def test_collapses_are_marked_and_checkpoint_selection_avoids_them():
    steps = list(range(10, 1010, 10))
    acc = [min(1.0, 0.1 * k) for k in range(1, 101)]  # memorised at step 100
    acc[39] = 0.4  # a collapse at step 400, recovered at 410
    acc[69], acc[70] = 0.9, 0.97  # a smaller one at 700 (0.1 below), then 0.03 below at 710 (not a collapse)
    col = ac.collapse_steps(steps, acc, start=100, drop=0.05)
    assert col == [400, 700]
    assert ac.collapse_steps(steps, acc, start=720) == []
    grid = list(range(100, 1100, 100))
    kept = ac.stable_checkpoints(grid, col, before=10, after=150)
    assert kept == [100, 200, 300, 600, 900, 1000]  # 400/500 and 700/800 sit in a spike or its recovery
    assert not any(k - 150 <= c <= k + 10 for k in kept for c in col)
    assert ac.stable_checkpoints(grid, []) == grid
    with pytest.raises(ValueError, match="train_acc"):
        ac.collapse_steps(steps, acc[:-1])
    with pytest.raises(ValueError, match="train_acc"):
        ac.collapse_steps([10, 20], [0.5, 1.5])
    with pytest.raises(ValueError, match="after"):
        ac.stable_checkpoints(grid, col, after=-1)


def test_trend_ratio_is_robust_to_one_spike():
    up = [10, 11, 12, 13, 14, 30, 31, 32, 33, 34]
    assert ac.trend_ratio(up, 5) == pytest.approx(32 / 12)
    spiked = [10, 11, 90, 13, 14, 30, 31, 2, 33, 34]
    assert ac.trend_ratio(spiked, 5) == pytest.approx(31 / 13)
    assert ac.trend_ratio([5.0] * 6, 3) == 1.0
    with pytest.raises(ValueError, match="2 \\* window"):
        ac.trend_ratio([1, 2, 3], 2)
    with pytest.raises(ValueError, match="positive"):
        ac.trend_ratio([1, 0, 1, 1], 2)


def test_sva_grammar_and_lm_helpers():
    rng = np.random.default_rng(0)
    words = ac.sva_vocab()
    for plural in (False, True):
        for n_attr in (0, 1, 2):
            ids, n_prompt = ac.sva_sentence(rng, plural, n_attr)
            assert len(ids) <= ac.SVA_LEN and n_prompt == 3 + 3 * n_attr
            verb, pron, be = words[ids[n_prompt]], words[ids[n_prompt + 3]], words[ids[n_prompt + 4]]
            assert (pron, be) == (("they", "are") if plural else ("it", "is"))
            assert verb.endswith("s") != plural and words[ids[2]].endswith("s") == plural
    b = ac.sva_batch(1, 7, n=5)
    assert b.shape == (5, ac.SVA_LEN) and torch.equal(b, ac.sva_batch(1, 7, n=5))
    model = hnn.Transformer(ac.sva_model_config(1, 16))
    assert torch.isfinite(ac.lm_loss(model, b))
    seqs = torch.tensor(ac.markov_sequences(ac.cyclic_transition(), 10, 8, seed=0))
    assert torch.equal(ac.markov_batch(seqs, 0, 3, n=4), ac.markov_batch(seqs, 0, 3, n=4))
    with pytest.raises(ValueError, match="n_attr"):
        ac.sva_sentence(rng, True, 9)
    with pytest.raises(ValueError, match="seq"):
        ac.lm_loss(model, b[:, :1])
    with pytest.raises(ValueError, match="name"):
        ac.lm_config("nope")


def test_dominant_frequencies_and_projection_keep_the_modes():
    p = 31
    E = ac.fourier_embedding(p, [3, 7], 16, seed=1) * 1.0
    E[:, :] += 0.05 * ac.fourier_embedding(p, [11], 16, seed=2)  # a weak third mode
    assert ac.dominant_frequencies(E, 3)[:2] in ([3, 7], [7, 3]) and ac.dominant_frequencies(E, 3)[2] == 11
    P = ac.fourier_projector(p, [3, 7])
    assert np.allclose(P @ P, P) and np.allclose(P, P.T) and np.isclose(np.trace(P), 5)  # constant + 2 planes
    F_ = ac.project_embedding(E + 2.0, [3, 7])
    assert np.allclose(F_.mean(0), (E + 2.0).mean(0))  # the mean row is kept
    assert np.isclose(np.linalg.norm(F_ - F_.mean(0)), np.linalg.norm(E - E.mean(0)))  # keep_norm
    assert ac.embedding_modes(F_, p) == 2
    assert np.allclose(ac.project_embedding(E, list(range(1, 16)), keep_norm=False), E)  # every mode: identity
    with pytest.raises(ValueError, match="freqs"):
        ac.fourier_projector(p, [3, 3])
    with pytest.raises(ValueError, match="m"):
        ac.dominant_frequencies(E, 16)
    with pytest.raises(ValueError, match="no power"):
        ac.project_embedding(ac.fourier_embedding(p, [3], 16), [5])
    with pytest.raises(ValueError, match="values"):
        ac.spread([])
    assert ac.spread([0.2, 0.9, 0.5]) == pytest.approx(0.7)


def test_keep_modes_during_training_and_continuation():
    p = 11
    tr, te = (torch.tensor(a) for a in ac.modadd_split(p, 0.5, seed=42))
    torch.manual_seed(0)
    model = ac.modadd_model(p, 16)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=1.0)
    log = ac.train_modadd(model, tr, te, 400, lr=3e-3, wd=1.0, eval_every=10, optimizer=opt, stop_at_train=0.5)
    assert log["train_acc"][-1] >= 0.5 and all(a < 0.5 for a in log["train_acc"][:-1])  # stopped at memorising
    hook = ac.keep_modes(p, [2])
    ac.train_modadd(model, tr, te, 20, lr=3e-3, wd=1.0, eval_every=10, optimizer=opt, after_step=hook)
    assert ac.embedding_modes(model.tok.weight.detach().numpy(), p) == 1  # kept in one mode while training
    with pytest.raises(TypeError, match="optimizer"):
        ac.train_modadd(model, tr, te, 5, lr=1e-3, wd=1.0, optimizer="adam")
    with pytest.raises(TypeError, match="after_step"):
        ac.train_modadd(model, tr, te, 5, lr=1e-3, wd=1.0, after_step=3)
    with pytest.raises(ValueError, match="tok.weight"):
        ac.keep_modes(7, [2])(model)
    assert 0.0 <= ac.modadd_accuracy(model, te) <= 1.0
    with pytest.raises(TypeError, match="model"):
        ac.modadd_accuracy("model", te)


class _SumOracle(torch.nn.Module):
    """Logits that put all mass on (a + b + shift) mod p at the last position."""

    def __init__(self, p: int, shift: int = 0):
        super().__init__()
        self.p, self.shift = p, shift

    def forward(self, x):
        y = (x[:, 0] + x[:, 1] + self.shift) % self.p
        out = torch.zeros(x.shape[0], x.shape[1], self.p)
        out[torch.arange(x.shape[0]), -1, y] = 1.0
        return out


def test_modadd_accuracy_is_exact_and_spread_rejects_nan():
    p = 7
    tr, _ = (torch.tensor(a) for a in ac.modadd_split(p, 0.5, seed=42))
    assert ac.modadd_accuracy(_SumOracle(p), tr) == 1.0  # the right sum everywhere
    assert ac.modadd_accuracy(_SumOracle(p, shift=1), tr) == 0.0  # off by one everywhere
    with pytest.raises(ValueError, match="rows"):
        ac.modadd_accuracy(_SumOracle(p), tr[:, 0])
    with pytest.raises(ValueError, match="finite"):
        ac.spread([0.1, float("nan")])
    assert ac.spread([0.4]) == 0.0


def test_modadd_loss_is_exact_and_refit_stops_at_the_loss():
    p = 7
    tr, te = (torch.tensor(a) for a in ac.modadd_split(p, 0.5, seed=42))
    # one-hot logits of height 1: the right answer has probability e / (e + p - 1)
    assert ac.modadd_loss(_SumOracle(p), tr) == pytest.approx(-np.log(np.e / (np.e + p - 1)), rel=1e-6)
    assert ac.modadd_loss(_SumOracle(p, shift=1), tr) == pytest.approx(-np.log(1 / (np.e + p - 1)), rel=1e-6)
    with pytest.raises(TypeError, match="model"):
        ac.modadd_loss("model", tr)
    with pytest.raises(ValueError, match="rows"):
        ac.modadd_loss(_SumOracle(p), tr[:, 0])
    torch.manual_seed(0)
    model = ac.modadd_model(11, 16)
    tr, te = (torch.tensor(a) for a in ac.modadd_split(11, 0.5, seed=42))
    start = ac.modadd_loss(model, tr)
    log = ac.train_modadd(model, tr, te, 500, lr=3e-3, wd=0.0, eval_every=10, stop_below_loss=0.5 * start)
    assert log["train_loss"][-1] <= 0.5 * start < min(log["train_loss"][:-1])  # stopped at the first step below
    assert ac.modadd_loss(model, tr) == pytest.approx(log["train_loss"][-1])
    with pytest.raises(ValueError, match="stop_below_loss"):
        ac.train_modadd(model, tr, te, 5, lr=1e-3, wd=0.0, stop_below_loss=-1.0)


def test_isolation_gap():
    assert ac.isolation_gap([1.0, 0.99], [0.05, 0.2], [True, True]) == pytest.approx(0.15)
    assert ac.isolation_gap([1.0, 0.9], [0.05, 0.06], [True, True]) == pytest.approx(0.1)
    assert ac.isolation_gap([1.0, 1.0], [0.05, 0.06], [True, False]) == 1.0  # a run not re-fitted
    assert ac.isolation_gap([1.0, 1.0], [0.05, 0.96], [True, True]) == 1.0  # a run already generalised
    assert ac.isolation_gap([1.0, 1.0], [0.05, 0.96], [True, True], gen_acc=0.99) == pytest.approx(0.91)
    with pytest.raises(ValueError, match="one entry per run"):
        ac.isolation_gap([1.0], [0.1, 0.2], [True, True])
    with pytest.raises(TypeError, match="restored"):
        ac.isolation_gap([1.0], [0.1], [1])
    with pytest.raises(ValueError, match="train_acc"):
        ac.isolation_gap([1.5], [0.1], [True])
    with pytest.raises(ValueError, match="train_acc"):
        ac.isolation_gap([], [], [])


def test_refit_embedding_moves_only_the_embedding():
    p = 11
    tr, te = (torch.tensor(a) for a in ac.modadd_split(p, 0.5, seed=42))
    torch.manual_seed(0)
    model = ac.modadd_model(p, 16)
    frozen = {n: q.detach().clone() for n, q in model.named_parameters() if n != "tok.weight"}
    E0 = model.tok.weight.detach().clone()
    start = ac.modadd_loss(model, tr)
    log = ac.refit_embedding(model, tr, te, 300, target_loss=0.97 * start, lr=3e-3)
    assert log["train_loss"][-1] <= 0.97 * start  # reached the target with the embedding alone
    assert not torch.equal(model.tok.weight, E0)
    assert all(torch.equal(q, frozen[n]) for n, q in model.named_parameters() if n != "tok.weight")
    assert all(q.requires_grad for q in model.parameters())  # everything trains again afterwards
    ac.refit_embedding(model, tr, te, 3, target_loss=0.0, keep=ac.keep_modes(p, [1, 2]))
    assert ac.embedding_modes(model.tok.weight.detach().numpy(), p) <= 2  # kept in its modes
    with pytest.raises(TypeError, match="tok.weight"):
        ac.refit_embedding(torch.nn.Linear(2, 2), tr, te, 5, target_loss=0.1)
    with pytest.raises(ValueError, match="target_loss"):
        ac.refit_embedding(model, tr, te, 5, target_loss=-1.0)


def test_train_modadd_eps_is_adams_and_validated():
    p = 7
    tr, te = (torch.tensor(a) for a in ac.modadd_split(p, 0.5, seed=42))
    outs = []
    for eps in (1e-8, 1e-8, 1.0):
        torch.manual_seed(0)
        model = ac.modadd_model(p, 8)
        ac.train_modadd(model, tr, te, 5, lr=1e-2, wd=0.0, eps=eps)
        outs.append(model.tok.weight.detach().clone())
    assert torch.equal(outs[0], outs[1]) and not torch.allclose(outs[0], outs[2])
    with pytest.raises(ValueError, match="eps"):
        ac.train_modadd(model, tr, te, 5, lr=1e-2, wd=0.0, eps=0.0)


def test_mode_order_is_a_seeded_permutation_nested_in_m():
    o = ac.mode_order(31, seed=3)
    assert sorted(o) == list(range(1, 16))
    assert o == ac.mode_order(31, seed=3) and o != ac.mode_order(31, seed=4)
    with pytest.raises(ValueError):
        ac.mode_order(2)


def test_clock_start_reads_the_memorisation_step():
    assert ac.clock_start([10, 20, 30], [0.5, 0.995, 1.0], [0.1, 0.3, 0.9]) == (20, 0.995, 0.3)
    assert ac.clock_start([10, 20], [0.5, 0.6], [0.1, 0.2]) == (None, None, None)
    with pytest.raises(ValueError):
        ac.clock_start([10, 20], [0.5], [0.1, 0.2])
    with pytest.raises(ValueError):
        ac.clock_start([10], [1.5], [0.1])


def test_train_modadd_stop_all_waits_for_every_criterion():
    p = 7
    tr, te = (torch.tensor(a) for a in ac.modadd_split(p, 0.5, seed=42))
    torch.manual_seed(0)
    log = ac.train_modadd(ac.modadd_model(p, 8), tr, te, 40, lr=1e-6, wd=0.0, eval_every=5,
                          stop_at=0.0, stop_at_train=1.0, stop_all=True)
    assert log["step"][-1] == 40  # a tiny lr never fits every pair: no early stop
    torch.manual_seed(0)
    log = ac.train_modadd(ac.modadd_model(p, 8), tr, te, 40, lr=1e-6, wd=0.0, eval_every=5,
                          stop_at=0.0, stop_at_train=1.0)
    assert log["step"][-1] == 5  # the first criterion met stops
    with pytest.raises(TypeError, match="stop_all"):
        ac.train_modadd(ac.modadd_model(p, 8), tr, te, 5, lr=1e-2, wd=0.0, stop_all=1)


# --- round 6 of issue #71: weight decay groups and the collapse-mechanism instrumentation ---


def test_decay_groups_matrices_only():
    torch.manual_seed(0)
    m = ac.modadd_model(7, 16, 4)
    groups = ac.decay_groups(m, 1.0, "matrices")
    names = {id(q): n for n, q in m.named_parameters()}
    on = {names[id(q)] for q in groups[0]["params"]}
    off = {names[id(q)] for q in groups[1]["params"]}
    assert groups[0]["weight_decay"] == 1.0 and groups[1]["weight_decay"] == 0.0
    assert "head.weight" in on and "blocks.0.attn.qkv.weight" in on
    assert {"tok.weight", "pos_emb.weight", "ln_f.weight", "blocks.0.ln1.weight", "head.weight"} - on == {
        "tok.weight", "pos_emb.weight", "ln_f.weight", "blocks.0.ln1.weight"}
    assert all(not n.endswith("bias") for n in on) and "tok.weight" in off
    assert len(on) + len(off) == len(list(m.parameters()))
    (g,) = ac.decay_groups(m, 0.5, "all")
    assert g["weight_decay"] == 0.5 and len(g["params"]) == len(list(m.parameters()))
    with pytest.raises(ValueError):
        ac.decay_groups(m, 1.0, "embeddings")
    with pytest.raises(ValueError):
        ac.decay_groups(m, -1.0)


def test_train_modadd_decay_matrices_keeps_gains():
    p = 7
    tr, te = (torch.tensor(a) for a in ac.modadd_split(p, 0.5, seed=0))
    torch.manual_seed(0)
    m = ac.modadd_model(p, 16, 4)
    ln0 = m.ln_f.weight.detach().clone()
    ac.train_modadd(m, tr, te, 5, lr=1e-3, wd=1.0, decay="matrices")
    torch.manual_seed(0)
    m2 = ac.modadd_model(p, 16, 4)
    ac.train_modadd(m2, tr, te, 5, lr=1e-3, wd=1.0, decay="all")
    # the same gradients' steps, but only "all" decays the gains: they differ
    assert not torch.allclose(m.ln_f.weight, m2.ln_f.weight)
    assert ln0.shape == m.ln_f.weight.shape
    with pytest.raises(ValueError):
        ac.train_modadd(m, tr, te, 1, lr=1e-3, wd=1.0, decay="some")


def test_decay_matrices_no_decay_on_gains_without_gradient():
    # a parameter group with weight_decay 0 and zero gradient does not move; with decay it shrinks
    torch.manual_seed(0)
    m = ac.modadd_model(7, 16, 4)
    for decay, moved in (("matrices", False), ("all", True)):
        mm = ac.modadd_model(7, 16, 4)
        mm.load_state_dict(m.state_dict())
        opt = torch.optim.AdamW(ac.decay_groups(mm, 1.0, decay), lr=0.1)
        for q in mm.parameters():
            q.grad = torch.zeros_like(q)
        opt.step()
        assert torch.equal(mm.tok.weight, m.tok.weight) != moved
        assert not torch.equal(mm.head.weight, m.head.weight)


def test_tensor_rms_and_relative_step():
    t = torch.full((2, 3), 2.0)
    assert ac.tensor_rms(t) == pytest.approx(2.0)
    assert ac.relative_step(t, 1.1 * t) == pytest.approx(0.1)
    assert ac.relative_step(t, t) == 0.0
    with pytest.raises(ValueError):
        ac.relative_step(torch.zeros(3), torch.ones(3))
    with pytest.raises(ValueError):
        ac.relative_step(t, torch.ones(3))
    with pytest.raises(TypeError):
        ac.tensor_rms([1.0, 2.0])
    with pytest.raises(ValueError):
        ac.tensor_rms(torch.zeros(0))


def test_min_logit_margin():
    class Fixed(torch.nn.Module):
        def forward(self, x):
            out = torch.zeros(len(x), 2, 3)
            out[:, -1] = torch.tensor([2.0, 0.5, -1.0])
            return out

    rows = torch.tensor([[0, 0, 0], [1, 1, 0]])
    assert ac.min_logit_margin(Fixed(), rows) == pytest.approx(1.5)
    assert ac.min_logit_margin(Fixed(), torch.tensor([[0, 0, 0], [0, 0, 1]])) == pytest.approx(-1.5)
    with pytest.raises(ValueError):
        ac.min_logit_margin(Fixed(), torch.tensor([[0, 0]]))
    with pytest.raises(TypeError):
        ac.min_logit_margin("model", rows)


def test_collapse_onsets_and_level_before():
    steps = list(range(10, 310, 10))
    assert ac.collapse_onsets(steps, [50, 60, 70, 250, 260], gap=100) == [50, 250]
    assert ac.collapse_onsets(steps, []) == []
    with pytest.raises(ValueError):
        ac.collapse_onsets(steps, [55])
    with pytest.raises(ValueError):
        ac.collapse_onsets(steps, [60, 50])
    vals = [float(s) for s in steps]
    assert ac.level_before(steps, vals, 100, window=30) == pytest.approx(80.0)
    with pytest.raises(ValueError):
        ac.level_before(steps, vals, 5)
    with pytest.raises(ValueError):
        ac.level_before(steps, vals[:-1], 100)


def test_onset_levels():
    steps = list(range(10, 1010, 10))
    vals = [1.0 + (s % 300) / 100 for s in steps]  # a sawtooth: rises to ~4, falls back to 1
    r = ac.onset_levels(steps, vals, [300, 600, 900], start=0, window=50)
    assert r["above"] and r["supports"] and r["spread"] < 1.1
    r = ac.onset_levels(steps, vals, [150, 600], start=0, window=50)  # one onset at a low level
    assert not r["above"] and not r["supports"]
    assert not ac.onset_levels(steps, vals, [], start=0)["supports"]
    with pytest.raises(ValueError):
        ac.onset_levels(steps, vals, [300], start=2000)
    with pytest.raises(ValueError):
        ac.onset_levels(steps, vals, [300], start=0, factor=0.5)
    with pytest.raises(ValueError):
        ac.onset_levels(steps, vals[:-1], [300], start=0)


def test_post_grokking_lr_factor_schedule_and_validation():
    f = ac.post_grokking_lr_factor
    assert f(500, None) == 1.0 and f(500, 600) == 1.0 and f(600, 600) == 1.0
    assert f(1100, 600, to=0.1, over=1000) == pytest.approx(0.55)  # half-way down the cosine
    assert f(1600, 600, to=0.1, over=1000) == pytest.approx(0.1)
    assert f(9000, 600, to=0.1, over=1000) == pytest.approx(0.1)  # held at the floor
    vals = [f(t, 100, to=0.2, over=50) for t in range(100, 200)]
    assert all(a >= b for a, b in zip(vals, vals[1:]))  # never rises again
    with pytest.raises(ValueError):
        f(10, 5, to=1.5)
    with pytest.raises(ValueError):
        f(10, 5, over=0)
    with pytest.raises(ValueError):
        f(-1, 5)


def test_train_modadd_lr_factor_scales_steps():
    p = 7
    tr, te = (torch.tensor(a) for a in ac.modadd_split(p, 0.5, seed=0))

    def run(factor):
        with repro.seeded(0):
            m = ac.modadd_model(p, 8, 2)
        w0 = m.head.weight.detach().clone()
        ac.train_modadd(m, tr, te, 1, lr=1e-2, wd=0.0, betas=(0.9, 0.999), lr_factor=factor)
        return float((m.head.weight.detach() - w0).norm())

    full, tenth, zero = run(None), run(lambda st: 0.1), run(lambda st: 0.0)
    assert zero == 0.0
    assert tenth == pytest.approx(0.1 * full, rel=1e-4)  # Adam's first step is linear in lr
    with pytest.raises(ValueError):
        run(lambda st: 2.0)  # a factor above 1 is refused
    with pytest.raises(TypeError):
        run(0.5)


def test_kill_rank_counts_from_one():
    Q = np.eye(6)
    # accuracy falls to chance once the first 3 directions are removed
    acc = lambda B: 0.01 if B.shape[1] >= 3 else 0.9  # noqa: E731
    assert ac.kill_rank(Q, acc, chance=0.05) == 3
    assert ac.kill_rank(Q, lambda B: 0.9, chance=0.05) is None  # never killed
    assert ac.kill_rank(Q, acc, chance=0.05, r_max=2) is None  # not within r_max
    assert ac.kill_rank(Q, lambda B: 0.0, chance=0.05) == 1
    with pytest.raises(ValueError):
        ac.kill_rank(np.ones((2, 3)), acc, chance=0.05)  # not tall
    with pytest.raises(TypeError):
        ac.kill_rank(Q, 0.5, chance=0.05)


def test_modadd_analysis_kill_rank_on_a_model():
    p = 7
    tr, te = (torch.tensor(a) for a in ac.modadd_split(p, 0.5, seed=0))
    with repro.seeded(0):
        m = ac.modadd_model(p, 8, 2)
    ac.train_modadd(m, tr, te, 30, lr=1e-2, wd=0.0, betas=(0.9, 0.999))
    a = ac.modadd_analysis(m, te, p, samples=8, refine=False, kill=True)
    assert a["r_kill"] is None or 1 <= a["r_kill"] <= 8
    assert "r_kill" not in ac.modadd_analysis(m, te, p, samples=8, refine=False)


def test_keep_update_modes_projects_the_update_not_the_decay():
    p, d = 11, 6
    with repro.seeded(0):
        m = ac.modadd_model(p, d, 2)
    W0 = m.tok.weight.detach().clone()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-2, weight_decay=0.5)
    keep = ac.keep_update_modes(m, p, [2], opt)
    tr, te = (torch.tensor(a) for a in ac.modadd_split(p, 0.5, seed=0))
    ac.train_modadd(m, tr, te, 5, lr=1e-2, wd=0.5, optimizer=opt, after_step=keep)
    P = torch.as_tensor(ac.fourier_projector(p, [2]), dtype=torch.float32)
    W = m.tok.weight.detach()
    decayed = W0 * (1 - 1e-2 * 0.5) ** 5
    # outside the kept modes the embedding only decays; inside, it moved
    off = torch.eye(p) - P
    assert torch.allclose(off @ W, off @ decayed, atol=1e-5)
    assert not torch.allclose(P @ W, P @ decayed, atol=1e-4)
    with pytest.raises(ValueError):
        ac.keep_update_modes(m, p + 1, [2], opt)  # wrong vocabulary
    with pytest.raises(ValueError):
        ac.keep_update_modes(m, p, [2], torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))]))
    with pytest.raises(TypeError):
        ac.keep_update_modes(m, p, [2], "adam")


def test_class_mean_dims_counts_fourier_directions():
    p, d = 31, 40
    c = np.arange(p)[:, None]
    rng = np.random.default_rng(0)
    R = np.linalg.qr(rng.normal(size=(d, d)))[0]
    # k frequencies of equal power, each a cos/sin pair: 2k equal directions, any rotation of the layer
    for k in (1, 3, 7):
        F = np.hstack([f(2 * np.pi * (j + 1) * c / p) for j in range(k) for f in (np.cos, np.sin)])
        M = np.hstack([F, np.zeros((p, d - 2 * k))]) @ R + 5.0  # an offset (frequency 0) is ignored
        out = ac.class_mean_dims(M)
        assert out["pr"] == pytest.approx(2 * k, rel=1e-6)
        assert out["n_share"] == 2 * k
    # one strong frequency and a weak one: the ratio sees one pair, the 99% count both
    F = np.hstack([np.cos(2 * np.pi * c / p), np.sin(2 * np.pi * c / p),
                   0.2 * np.cos(4 * np.pi * c / p), 0.2 * np.sin(4 * np.pi * c / p)])
    out = ac.class_mean_dims(F)
    assert 2.0 < out["pr"] < 2.2 and out["n_share"] == 4
    assert ac.class_mean_dims(F, share=0.9)["n_share"] == 2
    # random means fill p - 1 directions at most
    assert ac.class_mean_dims(rng.normal(size=(p, d)))["n_share"] <= p - 1
    with pytest.raises(ValueError, match="not all equal"):
        ac.class_mean_dims(np.ones((p, d)))
    with pytest.raises(ValueError, match="3 rows"):
        ac.class_mean_dims(np.ones((2, d)))
    with pytest.raises(ValueError):
        ac.class_mean_dims(F, share=0.0)
