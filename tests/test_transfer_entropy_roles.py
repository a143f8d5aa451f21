"""Tests for the interventional, final-state and token-level TE of helpers.transfer_entropy."""

import numpy as np
import pytest
import torch

from helpers import transfer_entropy as te


def test_gaussian_entropy_closed_form():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40000, 2)) * np.array([1.0, 3.0])
    truth = 0.5 * (2 * np.log(2 * np.pi * np.e) + np.log(9.0))
    assert te.gaussian_entropy(X) == pytest.approx(truth, abs=0.02)
    # a projection on the first axis is the entropy of that coordinate
    assert te.gaussian_entropy(X, np.array([[1.0], [0.0]])) == pytest.approx(0.5 * np.log(2 * np.pi * np.e), abs=0.02)
    with pytest.raises(ValueError, match="basis"):
        te.gaussian_entropy(X, np.ones((3, 1)))


def test_interventional_te_scores_what_removal_changes():
    rng = np.random.default_rng(1)
    full = rng.normal(size=(5000, 3))
    assert te.interventional_te(full, full.copy(), k=3) == 0.0
    # removing a unit that carried half of the spread of one direction: |dH| = ln 2
    half = full * np.array([0.5, 1.0, 1.0])
    assert te.interventional_te(full, half, k=3) == pytest.approx(np.log(2), abs=1e-9)
    # a constant shift leaves the entropy unchanged: the entropy difference is blind to it
    assert te.interventional_te(full, full + 5.0, k=3) == pytest.approx(0.0, abs=1e-9)
    with pytest.raises(ValueError, match="same shape"):
        te.interventional_te(full, full[:10])
    with pytest.raises(TypeError, match="numpy array"):
        te.interventional_te([[1.0]], full)


def test_final_head_te_reads_the_final_state():
    rng = np.random.default_rng(2)
    n = 3000
    y0 = rng.normal(size=(n, 2))
    w = rng.normal(size=(n, 2, 2))  # two heads; head 0 reaches the final state, head 1 only the middle one
    y1 = y0 + w[:, 0] + w[:, 1] + 0.1 * rng.normal(size=(n, 2))
    y2 = y0 + 2 * w[:, 0] + 0.1 * rng.normal(size=(n, 2))
    out = te.final_head_te([y0, y1], [w], final=y2, k=2)
    assert out.shape == (1, 2) and out[0, 0] > 1.0 and out[0, 1] < 0.01
    # without final, the last hidden state is the target: plain head TE
    np.testing.assert_allclose(te.final_head_te([y0, y1], [w], k=2), te.head_te(y0, y1, w, k=2)[None])
    with pytest.raises(ValueError, match="one more entry"):
        te.final_head_te([y0], [w])
    with pytest.raises(TypeError, match="lists"):
        te.final_head_te(y0, w)


def test_token_te_finds_the_broadcaster():
    rng = np.random.default_rng(3)
    n, T = 3000, 4
    now = rng.normal(size=(n, T, 2))
    nxt = now + 0.3 * rng.normal(size=(n, T, 2))
    nxt[:, 1:] += now[:, :1]  # position 0 writes into every other position
    M = te.token_te(now, nxt, k=2)
    assert M.shape == (T, T) and np.all(np.diag(M) == 0)
    out_te, in_te = te.token_roles(M)
    assert int(np.argmax(out_te)) == 0 and out_te[0] > 0.5 and np.all(out_te[1:] < 0.05)
    assert in_te[0] < 0.01 and np.all(in_te[1:] > 0.1)
    with pytest.raises(ValueError, match="same shape"):
        te.token_te(now, nxt[:, :3])
    with pytest.raises(ValueError, match="square"):
        te.token_roles(np.zeros((2, 3)))


def test_key_keep_hides_a_token_from_the_others():
    model = te.MiniBert(vocab_size=50, d_model=16, n_layer=2, n_head=2, d_ff=32, max_len=16).init_random(0)
    ids = torch.tensor([[1, 5, 6, 7, 2]])
    att = torch.ones_like(ids)
    with torch.no_grad():
        base = model(ids, att)
        same = model(ids, att, key_keep=torch.ones(5, dtype=torch.bool))
        hid = model(ids, att, key_keep=torch.tensor([True, True, False, True, True]))
        rec = {}
        model(ids, att, key_keep=torch.tensor([True, True, False, True, True]), record=rec)
    assert torch.equal(base, same) and not torch.allclose(base, hid)
    a = rec["attn"][0][0]  # (H, Tq, Tk): nobody but itself attends to position 2
    assert float(a[:, [0, 1, 3, 4], 2].max()) == 0.0 and float(a[:, 2, 2].min()) > 0
    with pytest.raises(ValueError, match="key_keep"):
        model(ids, att, key_keep=torch.ones(4, dtype=torch.bool))


def test_start_resumes_from_a_layer():
    model = te.MiniBert(vocab_size=50, d_model=16, n_layer=3, n_head=2, d_ff=32, max_len=16).init_random(1)
    ids = torch.tensor([[1, 5, 6, 7, 2], [1, 8, 2, 0, 0]])
    att = (ids > 0).long()
    att[:, 0] = 1
    mask = np.ones((3, 2))
    mask[2, 1] = 0
    with torch.no_grad():
        rec = {}
        full = model(ids, att, head_mask=mask, record=rec)
        for layer in range(3):
            resumed = model(ids, att, head_mask=mask, start=(layer, rec["hidden"][layer]))
            torch.testing.assert_close(resumed, full, atol=1e-6, rtol=1e-6)
    with pytest.raises(ValueError, match="start"):
        model(ids, att, start=(0, rec["hidden"][0]), record={})
    with pytest.raises(ValueError, match="start layer"):
        model(ids, att, start=(3, rec["hidden"][0]))


def test_peak_prominence():
    assert te.peak_prominence([0.0, 1.0, 0.0]) == 1.0
    assert te.peak_prominence([0.0, 0.5, 1.0]) == pytest.approx(-0.5)
    assert te.peak_prominence([3.0, 2.0, 1.0, 0.0]) == pytest.approx(-1 / 3)
    assert te.peak_prominence([2.0, 2.0, 2.0]) == 0.0
    assert te.peak_prominence(np.array([0.1, 0.4, 0.3, 0.2]) * 7) == pytest.approx(te.peak_prominence([1, 4, 3, 2]))
    with pytest.raises(ValueError, match="at least 3"):
        te.peak_prominence([1.0, 2.0])
    with pytest.raises(ValueError, match="finite"):
        te.peak_prominence([1.0, np.nan, 2.0])


def test_auc_ratio_interval_is_paired_over_items():
    fr = np.array([0.0, 0.5, 1.0])
    rng = np.random.default_rng(3)
    b = (rng.random((3, 400)) < np.array([[0.9], [0.7], [0.5]])).astype(float)
    # the same order on both sides: ratio 1 and, resampled in pairs, no spread at all
    assert te.auc_ratio_interval(fr, b, b.copy()) == (1.0, 1.0, 1.0)
    # the ratio on all items is the ratio of the two curve areas
    a = np.clip(b + (rng.random((3, 400)) < 0.3), 0, 1)
    point, lo, hi = te.auc_ratio_interval(fr, a, b, n_boot=500, seed=1)
    assert point == pytest.approx(te.curve_auc(fr, a.mean(1)) / te.curve_auc(fr, b.mean(1)))
    # a is never worse item by item and better on about 30%: the whole interval lies above 1
    assert 1.0 < lo <= point <= hi
    # one item decides the comparison: the interval straddles the point and is wide
    c = b.copy()
    c[:, 0] = 1 - c[:, 0]
    _, lo1, hi1 = te.auc_ratio_interval(fr, c, b, n_boot=500)
    assert lo1 < hi1
    with pytest.raises(ValueError, match="same shape"):
        te.auc_ratio_interval(fr, a, b[:, :10])
    with pytest.raises(ValueError, match="one row per budget"):
        te.auc_ratio_interval(fr[:2], a, b)
