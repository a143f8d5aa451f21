"""Tests for helpers.anchor_video_edit: clips, true and estimated motion, keyframes, the editor, the propagator,
the metrics."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import anchor_video_edit as ave


@pytest.fixture(scope="module")
def clip():
    return ave.make_clip("coffee", T=8, size=32, seed=3)


# -- the clip generator -------------------------------------------------------------------------------------------
def test_clip_shapes_and_range(clip):
    assert clip.frames.shape == (8, 3, 32, 32)
    assert clip.masks.shape == (8, 32, 32) and clip.masks.dtype == torch.bool
    assert clip.flow.shape == (7, 2, 32, 32) and clip.valid.shape == (7, 32, 32)
    assert clip.frames.min() >= 0 and clip.frames.max() <= 1
    assert clip.masks.any()  # the sprite is in view somewhere
    assert clip.centers.shape == (8, 2)
    for t in range(8):  # the centre is the mask's centroid when the whole sprite is in view
        if clip.masks[t].sum() == clip.masks.sum((1, 2)).max():
            yy, xx = torch.nonzero(clip.masks[t], as_tuple=True)
            assert abs(xx.float().mean() - clip.centers[t, 0]) < 0.6
            assert abs(yy.float().mean() - clip.centers[t, 1]) < 0.6


@given(st.integers(0, 10_000), st.sampled_from(["coffee", "chelsea", "astronaut"]))
@settings(max_examples=25, deadline=None)
def test_gt_flow_warp_is_exact_on_valid_pixels(seed, image):
    c = ave.make_clip(image, T=6, size=24, seed=seed)
    for t in range(5):
        w = ave.warp(c.frames[t], c.flow[t])
        m = c.valid[t]
        assert m.float().mean() > 0.3
        assert (w - c.frames[t + 1]).abs()[:, m].max().item() < 1e-5
        assert ave.psnr(c.frames[t + 1], w, m) > 35


def test_valid_excludes_disocclusions(clip):
    # where the sprite left a pixel, frame t+1 shows background that was hidden in frame t: not valid
    for t in range(7):
        left = clip.masks[t] & ~clip.masks[t + 1]
        pan = torch.tensor(clip.info["pan"])
        # background pixel p of t+1 came from p + pan in t; if that source was covered by the sprite it is invalid
        yy, xx = torch.nonzero(~clip.masks[t + 1], as_tuple=True)
        sx, sy = xx + pan[0], yy + pan[1]
        inb = (sx >= 0) & (sx < 32) & (sy >= 0) & (sy < 32)
        covered = torch.zeros_like(inb)
        covered[inb] = clip.masks[t][sy[inb], sx[inb]]
        assert not clip.valid[t][yy[covered], xx[covered]].any()
        assert left.shape == (32, 32)


def test_static_clip_has_zero_warp_error():
    s = ave.make_clip("chelsea", T=5, size=16, seed=0, static=True)
    assert all(torch.equal(s.frames[0], f) for f in s.frames)
    assert ave.warp_error(s.frames, s) == 0.0
    assert s.valid.all()


def test_bad_clip_input():
    with pytest.raises(ValueError):
        ave.make_clip("lena", 5, 16)
    with pytest.raises(ValueError):
        ave.make_clip("coffee", 1, 16)
    with pytest.raises(ValueError):
        ave.make_clip(np.zeros((40, 40)), 5, 16)


# -- warping ------------------------------------------------------------------------------------------------------
def test_warp_integer_shift_matches_roll():
    img = torch.rand(3, 10, 12)
    flow = torch.zeros(2, 10, 12)
    flow[0] = 2  # out[p] = img[p + (2, 0)]
    out = ave.warp(img, flow)
    assert torch.allclose(out[:, :, :-2], img[:, :, 2:], atol=1e-6)
    assert (out[:, :, -2:] == 0).all()  # outside: zeros
    assert torch.allclose(ave.warp(img, torch.zeros(2, 10, 12)), img, atol=1e-6)


def test_warp_half_pixel_is_bilinear():
    img = torch.arange(5.0).repeat(1, 1, 1).reshape(1, 1, 5).expand(1, 3, 5).contiguous()
    flow = torch.zeros(2, 3, 5)
    flow[0] = 0.5
    out = ave.warp(img, flow)
    assert torch.allclose(out[0, 1, :4], torch.tensor([0.5, 1.5, 2.5, 3.5]))


def test_warp_chain_both_directions(clip):
    fwd, ok = ave.warp_chain(clip.frames[0], clip, 0, 5)
    assert ok.float().mean() > 0.3 and (fwd - clip.frames[5]).abs()[:, ok].max() < 1e-5
    back, ok2 = ave.warp_chain(clip.frames[7], clip, 7, 2)
    assert ok2.float().mean() > 0.3 and (back - clip.frames[2]).abs()[:, ok2].max() < 1e-5
    same, ok3 = ave.warp_chain(clip.frames[4], clip, 4, 4)
    assert torch.equal(same, clip.frames[4]) and ok3.all()
    with pytest.raises(ValueError):
        ave.warp_chain(clip.frames[0], clip, 0, 8)
    with pytest.raises(ValueError):
        ave.warp(torch.rand(3, 8, 8), torch.zeros(2, 8, 9))


# -- metrics ------------------------------------------------------------------------------------------------------
def test_psnr_reference_and_edge_cases():
    from skimage.metrics import peak_signal_noise_ratio

    a = torch.rand(3, 16, 16, generator=torch.Generator().manual_seed(0))
    b = (a + 0.05 * torch.randn(3, 16, 16, generator=torch.Generator().manual_seed(1))).clamp(0, 1)
    assert ave.psnr(a, b) == pytest.approx(peak_signal_noise_ratio(a.numpy(), b.numpy(), data_range=1.0), rel=1e-5)
    assert ave.psnr(a, a) == math.inf
    m = torch.zeros(16, 16, dtype=torch.bool)
    m[:4] = True
    b2 = a.clone()
    b2[:, 8:] = 0  # outside the mask: ignored
    assert ave.psnr(a, b2, m) == math.inf
    with pytest.raises(ValueError):
        ave.psnr(a, b, torch.zeros(16, 16, dtype=torch.bool))
    with pytest.raises(ValueError):
        ave.psnr(a, b[:, :8])


def test_warp_error_detects_flicker(clip):
    assert ave.warp_error(clip.frames, clip) < 1e-6
    flick = clip.frames.clone()
    flick[1::2] = (flick[1::2] * 0.7).clamp(0, 1)
    assert ave.warp_error(flick, clip) > 0.02
    with pytest.raises(ValueError):
        ave.warp_error(clip.frames[:3], clip)


# -- estimated motion ---------------------------------------------------------------------------------------------
def _true_motion(c):
    """A Motion from the exact integer flow; only its backward half (used to carry frames forward) is exact."""
    return ave.Motion(c.flow, -c.flow, c.valid, c.valid)


def test_chain_motion_with_true_flow_matches_warp_chain(clip):
    m = _true_motion(clip)
    disp, ok = ave.chain_motion(m, 0, 4)
    ref, ok_ref = ave.warp_chain(clip.frames[0], clip, 0, 4)
    both = ok & ok_ref
    assert both.float().mean() > 0.3
    assert (ave.warp(clip.frames[0], disp) - clip.frames[4]).abs()[:, both].max() < 1e-5
    d0, ok0 = ave.chain_motion(m, 3, 3)
    assert d0.abs().max() == 0 and ok0.all()
    # a broken flow (off by one pixel) no longer carries frame 0 onto frame 4
    bad = ave.Motion(clip.flow + 1, -clip.flow, clip.valid, clip.valid)
    dbad, okb = ave.chain_motion(bad, 0, 4)
    assert (ave.warp(clip.frames[0], dbad) - clip.frames[4]).abs()[:, okb & ok_ref].mean() > 0.01


def test_estimate_motion_recovers_the_pan():
    c = ave.make_clip("chelsea", T=4, size=32, seed=1)
    m = ave.estimate_motion(c.frames)
    assert m.bwd.shape == (3, 2, 32, 32) and m.vb.dtype == torch.bool
    epe = torch.stack([(m.bwd[t] - c.flow[t]).norm(dim=0)[c.valid[t]].median() for t in range(3)])
    assert epe.max() < 0.5
    assert m.vb.float().mean() > 0.5 and m.vf.float().mean() > 0.5
    # frames in the wrong order: the estimated flow no longer matches the true one
    m2 = ave.estimate_motion(c.frames.flip(0))
    assert (m2.bwd[0] - c.flow[0]).norm(dim=0)[c.valid[0]].median() > 1.0
    with pytest.raises(ValueError):
        ave.estimate_motion(c.frames[:1])


def test_visibility(clip):
    keys = [0, 7]
    vis = ave.visibility(clip, keys)
    assert vis[0].all() and vis[7].all()
    assert (~vis).any()  # the moving sprite uncovers something no anchor shows
    s = ave.make_clip("chelsea", T=5, size=16, seed=0, static=True)
    assert ave.visibility(s, [0]).all()
    with pytest.raises(ValueError):
        ave.visibility(clip, [])


def test_ssim_outside(clip):
    out = ~clip.masks
    assert ave.ssim_outside(clip.frames, clip.frames, out) == pytest.approx(1.0)
    noisy = (clip.frames + 0.2 * torch.rand(clip.frames.shape, generator=torch.Generator().manual_seed(0)))
    assert ave.ssim_outside(noisy.clamp(0, 1), clip.frames, out) < 0.9
    with pytest.raises(ValueError):
        ave.ssim_outside(clip.frames, clip.frames, torch.zeros_like(out))


# -- keyframes and the editor -------------------------------------------------------------------------------------
@given(st.integers(2, 30), st.data())
@settings(max_examples=40, deadline=None)
def test_uniform_keyframes(T, data):
    m = data.draw(st.integers(1, T))
    k = ave.uniform_keyframes(T, m)
    assert len(k) == m and k[0] == 0 and k == sorted(set(k)) and k[-1] <= T - 1
    if m > 1:
        assert k[-1] == T - 1


def test_motion_keyframes(clip):
    m = _true_motion(clip)
    for n in (1, 2, 3, 8):
        k = ave.motion_keyframes(m, n)
        assert len(k) == n and k[0] == 0 and all(0 <= t < 8 for t in k)
    with pytest.raises(ValueError):
        ave.motion_keyframes(m, 9)


def test_composed_edit_shares_parameters_and_context_matters(clip):
    ed = ave.Editor(seed=0)
    keys = [0, 3, 7]
    out, p = ed.edit(clip.frames[keys], clip.masks[keys], clip.centers[keys], "stripe_object")
    gt = ave.edit_video(clip.frames, clip.masks, clip.centers, p)
    for i, k in enumerate(keys):
        assert torch.equal(out[i], gt[k])
    # no jitter at all: separate calls still differ, because each sees a different part of the photograph
    e0 = ave.Editor(seed=0, jitter=0.0)
    sep = {e0.edit(clip.frames[k], clip.masks[k], clip.centers[k], "restyle_background")[1] for k in keys}
    assert len(sep) > 1
    # ... and on a static clip (every keyframe the same image) they agree
    s = ave.make_clip("coffee", T=4, size=32, seed=0, static=True)
    same = {e0.edit(s.frames[k], s.masks[k], s.centers[k], "stripe_object")[1] for k in range(4)}
    assert len(same) == 1
    # composing changes the result: the composed call differs from a separate call on keyframe 0
    comp = e0.edit(clip.frames[keys], clip.masks[keys], clip.centers[keys], "restyle_background")[1]
    alone = e0.edit(clip.frames[0], clip.masks[0], clip.centers[0], "restyle_background")[1]
    assert comp != alone


@pytest.mark.parametrize("ins", ave.INSTRUCTIONS)
def test_true_edit_moves_with_the_video(clip, ins):
    p = ave.Editor(seed=2).draw(ins, clip.frames[0], clip.masks[0])
    gt = ave.edit_video(clip.frames, clip.masks, clip.centers, p)
    assert ave.warp_error(gt, clip) < 1e-5  # stripes are painted in the object's coordinates
    region = clip.masks if ins == "stripe_object" else ~clip.masks
    assert torch.equal(gt[:, :, ~region[0]][0], clip.frames[:, :, ~region[0]][0])
    assert (gt - clip.frames).abs().mean(1)[region].mean() > 0.02
    # a pattern fixed in the image (wrong centres) does not move with the object
    if ins == "stripe_object":
        fixed = ave.edit_video(clip.frames, clip.masks, torch.zeros_like(clip.centers), p)
        assert ave.warp_error(fixed, clip) > 1e-3


def test_lower_quality_is_worse(clip):
    keys = [0, 4]
    errs = []
    for q in (1.0, 0.5, 0.0):
        ed = ave.Editor(seed=1, quality=q)
        out, p = ed.edit(clip.frames[keys], clip.masks[keys], clip.centers[keys], "restyle_background")
        clean = ave.edit_video(clip.frames, clip.masks, clip.centers, p)[keys]
        errs.append((out - clean).abs().mean().item())
    assert errs[0] == 0 and errs[0] < errs[1] < errs[2]


# -- the propagator -----------------------------------------------------------------------------------------------
def test_propagate_holds_anchors_and_warping_baseline(clip):
    m = _true_motion(clip)
    torch.manual_seed(0)
    model = ave.Propagator(width=8)
    anchors = {0: clip.frames[0] * 0.5, 7: clip.frames[7]}
    out = ave.propagate(model, anchors, m, steps=3, seed=0)
    assert out.shape == clip.frames.shape
    assert torch.equal(out[0], anchors[0]) and torch.equal(out[7], anchors[7])
    assert torch.equal(out, ave.propagate(model, anchors, m, steps=3, seed=0))  # deterministic
    # warping the unedited first frame forward with the true (backward) flow rebuilds the clip, the source
    # filling what it never showed
    fw = ave.flow_warp_propagate({0: clip.frames[0]}, m, fill=clip.frames)
    cond = ave.anchor_condition({0: clip.frames[0], 7: clip.frames[7]}, m)
    assert cond.shape == (8, ave.COND_CH, 32, 32)
    assert (fw - clip.frames).abs().max() < 1e-5
    with pytest.raises(ValueError):
        ave.anchor_condition({}, m)


def test_true_motion_forward_flow_is_exact(clip):
    m = ave.true_motion(clip)
    assert torch.equal(m.bwd, clip.flow) and torch.equal(m.vb, clip.valid)
    for t in range(len(clip.frames) - 1):  # frame t+1 warped back along fwd rebuilds frame t where visible
        back = ave.warp(clip.frames[t + 1], m.fwd[t])
        assert m.vf[t].float().mean() > 0.5
        assert (back - clip.frames[t]).abs()[:, m.vf[t]].max() < 1e-6
    # the naive inverse (-bwd) is wrong on the object: the check would catch a broken forward flow
    assert not torch.equal(m.fwd, -clip.flow)
    with pytest.raises(TypeError):
        ave.true_motion(clip.frames)


def test_flow_warp_inpaint_fills_holes(clip):
    m = _true_motion(clip)
    flat = torch.full_like(clip.frames[0], 0.3)
    holes = ave.flow_warp_propagate({0: flat}, m)
    assert (holes - 0.3).abs().max() > 0.2  # the warp leaves zeros where it is not trusted
    filled = ave.flow_warp_propagate({0: flat}, m, inpaint=True)
    assert (filled - 0.3).abs().max() < 1e-4  # a flat image inpaints to itself
    with pytest.raises(ValueError):
        ave.flow_warp_propagate({0: flat}, m, fill=clip.frames, inpaint=True)


def test_train_propagator_is_deterministic():
    c = ave.make_clip("rocket", T=5, size=16, seed=0)
    m = _true_motion(c)
    a, ha = ave.train_propagator([c.frames], [m], 3, width=4, seed=1, progress=False)
    b, hb = ave.train_propagator([c.frames], [m], 3, width=4, seed=1, progress=False)
    assert ha.loss == hb.loss
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
    with pytest.raises(ValueError):
        ave.train_propagator([c.frames], [], 3)


def test_fill_holes_condition(clip):
    """fill_holes puts the inpainted warp into the holes of both warped anchors and nowhere else."""
    m = _true_motion(clip)
    anchors = {0: clip.frames[0], 7: clip.frames[7]}
    raw = ave.anchor_condition(anchors, m)
    filled = ave.anchor_condition(anchors, m, fill_holes=True)
    hole = raw[:, 6:8].sum(1) == 0
    assert hole[1:7].any()  # the moving disk uncovers background no anchor shows
    assert torch.equal(filled[:, 6:], raw[:, 6:])  # validity, time, flows untouched
    inp = ave.flow_warp_propagate(anchors, m, inpaint=True)
    for j in (0, 3):
        keep = ~hole[:, None].expand(-1, 3, -1, -1)
        assert torch.equal(filled[:, j:j + 3][keep], raw[:, j:j + 3][keep])
        for t in range(1, 7):
            assert torch.allclose(filled[t, j:j + 3][:, hole[t]], inp[t][:, hole[t]])
    assert not torch.equal(filled, raw)
    # a model sampled with the filled conditioning still returns the anchors exactly
    torch.manual_seed(0)
    model = ave.Propagator(width=8)
    out = ave.propagate(model, anchors, m, steps=2, seed=0, fill_holes=True)
    assert torch.equal(out[0], anchors[0]) and torch.equal(out[7], anchors[7])
    assert not torch.equal(out, ave.propagate(model, anchors, m, steps=2, seed=0))
    with pytest.raises(TypeError):
        ave.anchor_condition(anchors, m, fill_holes="yes")


def test_train_propagator_fill_holes_changes_training():
    c = ave.make_clip("rocket", T=5, size=16, seed=0)
    m = _true_motion(c)
    a, ha = ave.train_propagator([c.frames], [m], 3, width=4, seed=1, progress=False)
    b, hb = ave.train_propagator([c.frames], [m], 3, width=4, seed=1, progress=False, fill_holes=True)
    b2, hb2 = ave.train_propagator([c.frames], [m], 3, width=4, seed=1, progress=False, fill_holes=True)
    assert hb.loss == hb2.loss and ha.loss != hb.loss
    assert ave.checkpoint_config("propagators_filled")["fill_holes"] is True
    assert "fill_holes" not in ave.checkpoint_config("propagators")


def test_rebuild_errors_and_pooled_gap():
    c = ave.make_clip("coffee", 8, 24, seed=3)
    mot = ave.true_motion(c)
    keys = [0, 7]
    torch.manual_seed(0)
    model = ave.Propagator(4)
    r = ave.rebuild_errors(model, c, mot, keys, steps=2, seed=1)
    dis = ~ave.visibility(c, keys)
    dis[keys] = False
    assert r["n"] == int(dis.sum()) > 0
    inp = ave.flow_warp_propagate({k: c.frames[k] for k in keys}, mot, inpaint=True)
    assert r["inpaint"] == pytest.approx((inp - c.frames).pow(2).mean(1)[dis].sum().item())
    assert r["AVE"] >= 0
    # the pooled gap is the PSNR difference: 10 log10(inpaint error / AVE error)
    rows = [r, dict(n=10, AVE=1.0, inpaint=1.0)]
    want = 10 * math.log10((r["inpaint"] + 1.0) / (r["AVE"] + 1.0))
    assert ave.pooled_gap_db(rows) == pytest.approx(want)
    assert ave.pooled_gap_db([dict(n=4, AVE=1.0, inpaint=10.0)]) == pytest.approx(10.0)
    with pytest.raises(ValueError):
        ave.pooled_gap_db([dict(n=0, AVE=0.0, inpaint=0.0)])
    # all frames anchors: nothing to rebuild
    assert ave.rebuild_errors(model, c, mot, list(range(8)), steps=1)["n"] == 0


# -- issue #69: the hole-border loss, metrics inside the edit, the editor-quality statistic -------------------------
def test_hole_border():
    hole = torch.zeros(1, 9, 9, dtype=torch.bool)
    hole[0, 3:6, 3:6] = True
    b = ave.hole_border(hole, radius=1)
    assert b.shape == hole.shape
    assert b[0, 4, 4].item() is False  # the hole's centre is 2 px from any trusted pixel
    assert b[0, 3, 3] and b[0, 2, 2] and b[0, 3, 6]  # both sides of the seam
    assert not b[0, 0, 0] and not b[0, 8, 8]
    assert ave.hole_border(hole, radius=2)[0, 4, 4]
    assert not ave.hole_border(torch.zeros(2, 5, 5, dtype=torch.bool)).any()  # no hole: no border
    assert not ave.hole_border(torch.ones(5, 5, dtype=torch.bool)).any()  # nothing trusted: no border
    with pytest.raises(TypeError):
        ave.hole_border(hole.float())
    with pytest.raises(ValueError):
        ave.hole_border(hole, radius=0)


def test_border_weight_changes_training_only_when_on():
    c = ave.make_clip("rocket", T=5, size=16, seed=0)
    m = _true_motion(c)
    _, h0 = ave.train_propagator([c.frames], [m], 3, width=4, seed=1, progress=False)
    _, h1 = ave.train_propagator([c.frames], [m], 3, width=4, seed=1, progress=False, border_weight=0.0)
    _, h2 = ave.train_propagator([c.frames], [m], 3, width=4, seed=1, progress=False, border_weight=4.0)
    assert h0.loss == h1.loss and h2.loss != h0.loss
    with pytest.raises(ValueError):
        ave.train_propagator([c.frames], [m], 3, width=4, border_weight=-1.0)
    cfg = ave.checkpoint_config("propagators_wide")
    assert cfg["width"] == 32 and cfg["border_weight"] > 0 and "border_weight" not in ave.checkpoint_config()


def test_edit_region_and_masked_errors(clip):
    inside = ave.edit_region(clip, "stripe_object")
    assert torch.equal(inside, clip.masks)
    assert torch.equal(ave.edit_region(clip, "restyle_background"), ~clip.masks)
    with pytest.raises(ValueError):
        ave.edit_region(clip, "paint_it_black")
    v = clip.frames.clone()
    v[:, 0][clip.masks] += 0.3  # an error of 0.3 on one channel, inside the object only
    se, n = ave.masked_errors(v, clip.frames, inside)
    assert n == int(clip.masks.sum()) and se == pytest.approx(n * 0.09 / 3, rel=1e-5)
    assert ave.masked_errors(v, clip.frames, ~inside) == (0.0, int((~inside).sum()))
    assert ave.psnr_from_sums(se, n) == pytest.approx(10 * math.log10(3 / 0.09), rel=1e-5)
    assert ave.psnr_from_sums(0.0, 5) == math.inf
    with pytest.raises(ValueError):
        ave.masked_errors(v, clip.frames, inside[:3])  # wrong mask shape
    with pytest.raises(ValueError):
        ave.psnr_from_sums(1.0, 0)
    with pytest.raises(ValueError):
        ave.psnr_from_sums(-1.0, 3)


def test_pearson_r():
    assert ave.pearson_r([1, 2, 3, 4], [2, 4, 6, 8]) == pytest.approx(1.0)
    assert ave.pearson_r([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=50), rng.normal(size=50)
    assert ave.pearson_r(x, y) == pytest.approx(np.corrcoef(x, y)[0, 1])
    for bad in (([1, 2], [1, 2]), ([1, 2, 3], [1, 2]), ([1, 1, 1], [1, 2, 3]), ([1, 2, np.nan], [1, 2, 3])):
        with pytest.raises(ValueError):
            ave.pearson_r(*bad)


def test_quality_correlation():
    rng = np.random.default_rng(0)
    n_clips, levels = 6, 5
    kn = np.full((n_clips, levels), 100.0)
    vn = np.full((n_clips, levels), 400.0)
    ks = kn * 10 ** (-np.linspace(30, 10, levels) / 10) * rng.uniform(0.8, 1.2, (n_clips, levels))
    vs = vn * 10 ** (-np.linspace(25, 12, levels) / 10) * rng.uniform(0.8, 1.2, (n_clips, levels))
    out = ave.quality_correlation(ks, kn, vs, vn, n_boot=200, seed=1)
    assert out["r"] > 0.95 and out["lo"] <= out["r"] <= out["hi"] + 1e-12
    assert 0.4 < out["slope"] < 0.9  # about 13 dB of video per 20 dB of keyframes
    assert out == ave.quality_correlation(ks, kn, vs, vn, n_boot=200, seed=1)  # deterministic
    # video quality that ignores the keyframes: no correlation to speak of
    flat = ave.quality_correlation(ks, kn, vs[:, ::-1].copy(), vn, n_boot=50)
    assert flat["r"] < 0
    with pytest.raises(ValueError):
        ave.quality_correlation(ks[:, :2], kn[:, :2], vs[:, :2], vn[:, :2])  # fewer than 3 levels
    with pytest.raises(ValueError):
        ave.quality_correlation(ks, kn, vs, vn[:3])  # shapes differ
    with pytest.raises(ValueError):
        ave.quality_correlation(-ks, kn, vs, vn)


def test_fill_condition_reuses_a_precomputed_inpainting(clip, monkeypatch):
    """Training computes the inpainting of a (clip, keyframes) draw once: the same conditioning, fewer calls."""
    m = _true_motion(clip)
    keys = [0, 7]
    cond = ave._anchor_condition({k: clip.frames[k] for k in keys}, m)
    pre = ave._inpaint_holes(cond, keys)
    assert torch.equal(ave._fill_condition(cond, keys, pre), ave._fill_condition(cond, keys))
    c = ave.make_clip("rocket", T=4, size=16, seed=0)
    mc = _true_motion(c)
    _, h0 = ave.train_propagator([c.frames], [mc], 12, width=4, seed=1, progress=False, fill_holes=True)
    calls = []
    real = ave._inpaint_holes
    monkeypatch.setattr(ave, "_inpaint_holes", lambda co, ks: calls.append(tuple(ks)) or real(co, ks))
    _, h1 = ave.train_propagator([c.frames], [mc], 12, width=4, seed=1, progress=False, fill_holes=True)
    assert h1.loss == h0.loss
    assert len(calls) == len(set(calls)) < 12 * 2  # each (clip, keys) draw inpainted once


def test_wide_filled_config():
    wide, wf = ave.checkpoint_config("propagators_wide"), ave.checkpoint_config("propagators_wide_filled")
    assert wf.pop("fill_holes") is True and wf == wide
    with pytest.raises(ValueError):
        ave.checkpoint_config("propagators_wide_fill")


def test_one_step_fill_loss_and_schedule_only_when_on():
    c = ave.make_clip("rocket", T=5, size=16, seed=0)
    m = _true_motion(c)
    kw = dict(width=4, seed=1, progress=False, fill_holes=True)
    _, h0 = ave.train_propagator([c.frames], [m], 4, **kw)
    _, h1 = ave.train_propagator([c.frames], [m], 4, x0_weight=0.0, schedule="cosine", **kw)
    _, h2 = ave.train_propagator([c.frames], [m], 4, x0_weight=4.0, **kw)
    _, h3 = ave.train_propagator([c.frames], [m], 4, schedule="wsd", decay_steps=2, **kw)
    assert h0.loss == h1.loss  # off: the stored models' loss and draws
    # on: the one-step term is a non-negative addition, so the first step's loss can only grow
    assert h2.loss != h0.loss and h2.loss[0] >= h0.loss[0]
    assert h3.loss[:2] == h0.loss[:2] and h3.loss != h0.loss  # same warmup step, then another learning rate
    for bad in (dict(x0_weight=-1.0), dict(schedule="linear"), dict(schedule="wsd", decay_steps=0),
                dict(decay_steps=-1)):
        with pytest.raises(ValueError):
            ave.train_propagator([c.frames], [m], 4, **dict(kw, **bad))


def test_onestep_config_changes_only_the_registered_recipe():
    one, filled = ave.checkpoint_config("propagators_onestep"), ave.checkpoint_config("propagators_filled")
    changed = {k for k in set(one) | set(filled) if one.get(k) != filled.get(k)}
    assert changed == {"x0_weight", "border_radius", "schedule", "steps", "decay_steps"}
    assert one["fill_holes"] is True and one["schedule"] == "wsd" and 0 < one["decay_steps"] < one["steps"]


def test_gated_residual_returns_its_base_when_closed_and_is_off_by_default():
    torch.manual_seed(0)
    plain = ave.Propagator(8)
    assert plain.out.out_channels == 3 and not plain.gate
    gated = ave.Propagator(8, gate=True)
    assert gated.out.out_channels == 4
    x = torch.randn(3, ave.Propagator.IN_CH, 16, 16)
    with torch.no_grad():
        gated.out.bias[3] = -1e4  # gate closed: the prediction is the blend of the warped anchors, exactly
        assert torch.equal(gated(x), ave._base(x[:, ave.DYN_CH:]))
        gated.out.bias[3] = 1e4  # gate open: base + residual, as the plain model computes it
        plain_like = ave.Propagator(8)
        plain_like.load_state_dict({k: (v[:3] if k.startswith("out.") else v) for k, v in gated.state_dict().items()})
        assert torch.allclose(gated(x), plain_like(x), atol=1e-6)
    with pytest.raises(TypeError):
        ave.Propagator(8, gate="yes")
    c = ave.make_clip("rocket", T=5, size=16, seed=0)
    m = _true_motion(c)
    kw = dict(width=4, seed=1, progress=False)
    m0, h0 = ave.train_propagator([c.frames], [m], 3, **kw)
    m1, h1 = ave.train_propagator([c.frames], [m], 3, gate=False, **kw)
    assert h0.loss == h1.loss and not m0.gate  # off: the stored models' draws and loss
    m2, h2 = ave.train_propagator([c.frames], [m], 3, gate=True, **kw)
    assert m2.gate and h2.loss != h0.loss


def test_gated_config_changes_only_the_gate():
    gated, one = ave.checkpoint_config("propagators_gated"), ave.checkpoint_config("propagators_onestep")
    assert gated.pop("gate") is True and gated == one
    assert "gate" not in ave.checkpoint_config("propagators_filled")
