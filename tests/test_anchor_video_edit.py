"""Tests for helpers.anchor_video_edit: the clip generator, flow warping, keyframes, the editor, the metrics."""

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
    for m in (1, 2, 3, 8):
        k = ave.motion_keyframes(clip, m)
        assert len(k) == m and k[0] == 0 and all(0 <= t < 8 for t in k)
    with pytest.raises(ValueError):
        ave.motion_keyframes(clip, 9)


def test_composed_edit_shares_parameters(clip):
    ed = ave.Editor(seed=0)
    keys = [0, 3, 7]
    out, p = ed.edit(clip.frames[keys], clip.masks[keys], "recolor_object")
    for i, k in enumerate(keys):
        assert torch.equal(out[i], ave.apply_edit(clip.frames[k], clip.masks[k], p))
    separate = [ed.edit(clip.frames[k], clip.masks[k], "recolor_object")[1] for k in keys]
    assert len(set(separate)) == 3  # separate calls draw separate parameters
    assert len(ed.calls) == 4


def test_edit_touches_only_its_region(clip):
    f, m = clip.frames[2], clip.masks[2]
    for ins in ave.INSTRUCTIONS:
        out = ave.apply_edit(f, m, ave.Editor.ideal(ins))
        region = m if ins == "recolor_object" else ~m
        assert torch.equal(out[:, ~region], f[:, ~region])
        assert (out[:, region] - f[:, region]).abs().mean() > 0.02
    with pytest.raises(ValueError):
        ave.apply_edit(f, m, ave.EditParams("sharpen", 0.0, 1.0, 4))
    with pytest.raises(ValueError):
        ave.Editor(quality=1.5)


def test_lower_quality_is_worse(clip):
    keys = [0, 4]
    errs = []
    for q in (1.0, 0.5, 0.0):
        ed = ave.Editor(seed=1, quality=q)
        out, p = ed.edit(clip.frames[keys], clip.masks[keys], "restyle_background")
        clean = torch.stack([ave.apply_edit(clip.frames[k], clip.masks[k], p) for k in keys])
        errs.append((out - clean).abs().mean().item())
    assert errs[0] == 0 and errs[0] < errs[1] < errs[2]


# -- the propagator -----------------------------------------------------------------------------------------------
def test_propagate_holds_anchors_and_baseline_is_exact_on_unedited(clip):
    torch.manual_seed(0)
    model = ave.Propagator(width=8)
    anchors = {0: clip.frames[0] * 0.5, 7: clip.frames[7]}
    out = ave.propagate(model, anchors, clip)
    assert out.shape == clip.frames.shape
    assert torch.equal(out[0], anchors[0]) and torch.equal(out[7], anchors[7])
    # flow warping of the *unedited* keyframes rebuilds the unedited clip exactly (holes come from the source)
    fw = ave.flow_warp_propagate({0: clip.frames[0], 7: clip.frames[7]}, clip)
    assert (fw - clip.frames).abs().max() < 1e-5
    x = ave.propagator_inputs(anchors, clip, 3)
    assert x.shape == (ave.Propagator.IN_CH, 32, 32)
    with pytest.raises(ValueError):
        ave.propagator_inputs({}, clip, 3)
