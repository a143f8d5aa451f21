"""Anchor-based video editing (AVE): edit a few keyframes with an image editor, then let a motion-guided
generative model produce the other frames while the edited keyframes stay fixed as anchors.

Everything here is small and built for the chapter ``11_anchor_video_edit`` (a reconstruction from the paper's
abstract): synthetic clips with exact optical flow (a window panning over a scikit-image photograph, with a moving
textured sprite that occludes it), optical flow *estimated* from the frames (TV-L1), a stochastic,
context-dependent toy image editor (composing keyframes into one canvas changes its output), a small conditional
flow-matching model over frames with anchor replacement at every sampling step, trained self-supervised to
rebuild source clips from their own keyframes, the flow-warping baseline, and metrics split into visible and
disoccluded pixels.

Conventions: a clip is a float tensor (T, 3, H, W) in [0, 1]; ``flow[t]`` (2, H, W) is the *backward* flow from
frame t+1 to frame t: pixel p of frame t+1 shows what frame t showed at ``p + flow[t][:, p]`` (dx, dy);
``valid[t]`` (H, W) marks pixels of frame t+1 that were visible in frame t at that place (not disoccluded).
The ground-truth flow is used only for scoring; every method moves pixels with the estimated :class:`Motion`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from helpers import validate as V

__all__ = [
    "IMAGES", "INSTRUCTIONS", "load_image", "Clip", "make_clip", "warp", "warp_chain", "psnr", "warp_error",
    "Motion", "estimate_motion", "true_motion", "chain_motion", "visibility", "ssim_outside", "uniform_keyframes",
    "motion_keyframes", "EditParams", "Editor", "apply_edit", "edit_video", "Propagator", "anchor_condition",
    "train_propagator", "propagate", "flow_warp_propagate", "TRAIN_IMAGES", "TEST_IMAGES", "checkpoint_config",
    "training_clips", "hole_border", "rebuild_errors", "pooled_gap_db", "edit_region", "masked_errors",
    "psnr_from_sums", "pearson_r", "quality_correlation",
]

IMAGES = ("astronaut", "coffee", "chelsea", "rocket", "immunohistochemistry", "motorcycle_left")


# ----------------------------------------------------------------------------------------------------------------
# Clips with exact flow
# ----------------------------------------------------------------------------------------------------------------
def load_image(name: str) -> np.ndarray:
    """A colour photograph bundled with scikit-image, as float (H, W, 3) in [0, 1]."""
    from skimage import data
    from skimage.util import img_as_float

    V.instance("name", name, str)
    V.one_of("name", name, IMAGES)
    if name == "motorcycle_left":
        img = data.stereo_motorcycle()[0]
    else:
        img = getattr(data, name)()
    return img_as_float(img)[..., :3].astype(np.float32)


@dataclass
class Clip:
    """A synthetic clip and its ground truth."""

    frames: Tensor  # (T, 3, H, W)
    masks: Tensor  # (T, H, W) bool: the sprite (the object an edit may target)
    flow: Tensor  # (T-1, 2, H, W) backward flow t+1 -> t, pixels
    valid: Tensor  # (T-1, H, W) bool: visible in frame t at the flow's source
    centers: Tensor  # (T, 2) float: the sprite's centre (x, y) in pixels, possibly outside the frame
    info: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        V.tensor("frames", self.frames, ndim=4, dtype="float", nonempty=True)
        T, C, H, W = self.frames.shape
        if T < 2 or C != 3:
            raise ValueError(f"frames must have shape (T >= 2, 3, H, W), got {tuple(self.frames.shape)}")
        V.tensor("masks", self.masks, shape=(T, H, W), dtype="bool")
        V.tensor("flow", self.flow, shape=(T - 1, 2, H, W), dtype="float")
        V.tensor("valid", self.valid, shape=(T - 1, H, W), dtype="bool")
        V.tensor("centers", self.centers, shape=(T, 2), dtype="float")
        V.instance("info", self.info, dict)


def _clip(clip: object) -> Clip:
    return V.instance("clip", clip, Clip)


def _image(name: str, x: object, clip: Clip) -> Tensor:
    """A finite float (3, H, W) image of the clip's size."""
    return V.tensor(name, x, shape=(3, *clip.frames.shape[-2:]), dtype="float")


def _sprite(size: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A textured disk: (size, size, 3) colours and a (size, size) mask."""
    yy, xx = np.mgrid[:size, :size] - (size - 1) / 2
    mask = xx**2 + yy**2 <= (size / 2) ** 2
    base = rng.uniform(0.2, 0.9, 3)
    freq, ang = rng.uniform(0.5, 1.2), rng.uniform(0, np.pi)
    wave = 0.5 + 0.5 * np.sin(freq * (xx * np.cos(ang) + yy * np.sin(ang)))
    col = base[None, None] * (0.6 + 0.4 * wave[..., None])
    return col.astype(np.float32), mask


def make_clip(image: str | np.ndarray, T: int = 12, size: int = 32, seed: int = 0, sprite_size: int | None = None,
              static: bool = False) -> Clip:
    """A window of ``size`` pixels panning over a photograph (integer steps) with a moving sprite on top.

    Pan and sprite velocities are integers, so the flow is exact and warping with it is exact on visible pixels.
    ``static=True`` gives a clip whose frames are all equal (no pan, no sprite motion).
    """
    T, size = V.integer("T", T, min=2), V.integer("size", size, min=8)
    seed = V.seed("seed", seed)
    sprite_size = V.optional(V.integer, "sprite_size", sprite_size, min=1, max=size)
    static = V.boolean("static", static)
    rng = np.random.default_rng(seed)
    if isinstance(image, str):
        img = load_image(image) if image in IMAGES else V.one_of("image", image, IMAGES)
    else:
        img = V.array("image", image, ndim=3, dtype="float", min=0, max=1).astype(np.float32)
        if img.shape[2] != 3:
            raise ValueError(f"image must have shape (H, W, 3), got {img.shape}")
    scale = max(1, min(img.shape[0], img.shape[1]) // (3 * size))
    if scale > 1:  # anti-aliased subsampling: keep some texture at our small size, without aliasing
        from scipy.ndimage import gaussian_filter

        img = gaussian_filter(img, (0.6 * scale, 0.6 * scale, 0))
    img = img[::scale, ::scale]
    H0, W0 = img.shape[:2]
    pan = np.zeros(2, int) if static else rng.integers(-2, 3, 2)
    if not static and not pan.any():
        pan[0] = 1
    span = np.abs(pan) * (T - 1)
    if H0 < size + span[1] + 1 or W0 < size + span[0] + 1:
        raise ValueError(f"image too small for this clip: {H0}x{W0} pixels after subsampling, the window of "
                         f"size={size} panning over T={T} frames needs {size + span[1] + 1}x{size + span[0] + 1}")
    x0 = rng.integers(0, W0 - size - span[0]) + (span[0] if pan[0] < 0 else 0)
    y0 = rng.integers(0, H0 - size - span[1]) + (span[1] if pan[1] < 0 else 0)
    s = sprite_size or 3 * size // 8
    col, smask = _sprite(s, rng)
    vel = np.zeros(2, int) if static else rng.integers(-3, 4, 2)
    if not static and (vel == pan).all():
        vel[1] += 2
    pos0 = rng.integers(size // 4 - s // 2, 3 * size // 4 - s // 2, 2)
    if not static:  # start so that the sprite crosses the window
        pos0 = pos0 - vel * (T // 2)

    frames = np.zeros((T, size, size, 3), np.float32)
    masks = np.zeros((T, size, size), bool)
    for t in range(T):
        x, y = x0 + pan[0] * t, y0 + pan[1] * t
        f = img[y:y + size, x:x + size].copy()
        px, py = pos0 + vel * t
        m = np.zeros((size, size), bool)
        ys, xs = np.nonzero(smask)
        X, Y = xs + px, ys + py
        ok = (X >= 0) & (X < size) & (Y >= 0) & (Y < size)
        m[Y[ok], X[ok]] = True
        f[Y[ok], X[ok]] = col[ys[ok], xs[ok]]
        frames[t], masks[t] = f, m
    # backward flow t+1 -> t: background content came from p + pan, sprite pixels from p - vel
    flow = np.zeros((T - 1, 2, size, size), np.float32)
    valid = np.zeros((T - 1, size, size), bool)
    yy, xx = np.mgrid[:size, :size]
    for t in range(T - 1):
        on = masks[t + 1]
        dx = np.where(on, -vel[0], pan[0])
        dy = np.where(on, -vel[1], pan[1])
        flow[t, 0], flow[t, 1] = dx, dy
        sx, sy = xx + dx, yy + dy
        inb = (sx >= 0) & (sx < size) & (sy >= 0) & (sy < size)
        src_on = np.zeros_like(on)
        src_on[inb] = masks[t][sy[inb], sx[inb]]
        valid[t] = inb & (src_on == on)  # same surface at the source: not disoccluded, not newly covered
    return Clip(frames=torch.tensor(frames).permute(0, 3, 1, 2).contiguous(), masks=torch.tensor(masks),
                flow=torch.tensor(flow), valid=torch.tensor(valid),
                centers=torch.tensor(np.array([pos0 + vel * t + (s - 1) / 2 for t in range(T)]),
                                     dtype=torch.float32),
                info=dict(image=image if isinstance(image, str) else "array", pan=pan.tolist(), vel=vel.tolist()))


# ----------------------------------------------------------------------------------------------------------------
# Warping and metrics
# ----------------------------------------------------------------------------------------------------------------
def warp(img: Tensor, flow: Tensor) -> Tensor:
    """Backward warp: ``out[p] = img[p + flow[p]]``, bilinear (exact gather for integer flows), zeros outside.

    img (..., C, H, W); flow (2, H, W) or (..., 2, H, W).
    """
    V.tensor("img", img, dtype="float", nonempty=True)
    V.tensor("flow", flow, dtype="float")
    if img.dim() < 3 or flow.dim() < 3 or flow.shape[-3] != 2 or flow.shape[-2:] != img.shape[-2:]:
        raise ValueError(f"img (..., C, H, W) and flow (..., 2, H, W) must agree, got {tuple(img.shape)}, "
                         f"{tuple(flow.shape)}")
    if flow.dim() > 3 and flow.shape[:-3] != img.shape[:-3]:
        raise ValueError(f"flow's leading axes must match img's, got {tuple(flow.shape)} and {tuple(img.shape)}")
    return _warp(img, flow)


def _warp(img: Tensor, flow: Tensor) -> Tensor:
    H, W = img.shape[-2:]
    lead = img.shape[:-3]
    im = img.reshape(-1, *img.shape[-3:])
    fl = flow.expand(*lead, 2, H, W).reshape(-1, 2, H, W) if flow.dim() == 3 else flow.reshape(-1, 2, H, W)
    if torch.equal(fl, fl.round()):  # integer flow: an exact gather (no interpolation round-off)
        yi, xi = torch.meshgrid(torch.arange(H), torch.arange(W), indexing="ij")
        sx, sy = xi + fl[:, 0].long(), yi + fl[:, 1].long()
        inb = (sx >= 0) & (sx < W) & (sy >= 0) & (sy < H)
        flat = (sy.clamp(0, H - 1) * W + sx.clamp(0, W - 1)).reshape(len(fl), 1, H * W)
        out = im.reshape(len(im), im.shape[1], H * W).gather(2, flat.expand(-1, im.shape[1], -1))
        return (out.reshape(im.shape) * inb[:, None]).reshape(img.shape)
    yy, xx = torch.meshgrid(torch.arange(H, dtype=im.dtype), torch.arange(W, dtype=im.dtype), indexing="ij")
    gx = (xx + fl[:, 0]) / max(W - 1, 1) * 2 - 1
    gy = (yy + fl[:, 1]) / max(H - 1, 1) * 2 - 1
    out = F.grid_sample(im, torch.stack([gx, gy], -1), mode="bilinear", padding_mode="zeros", align_corners=True)
    return out.reshape(img.shape)


def warp_chain(img: Tensor, clip: Clip, src: int, dst: int) -> tuple[Tensor, Tensor]:
    """Carry frame ``src``'s content to frame ``dst`` along the ground-truth flow, step by step.

    Returns the warped image (3, H, W) and where it is valid (H, W): pixels whose whole path stayed visible.
    """
    _image("img", img, _clip(clip))
    T = len(clip.frames)
    src, dst = V.index("src", src, T), V.index("dst", dst, T)
    return _warp_chain(img, clip, src, dst)


def _warp_chain(img: Tensor, clip: Clip, src: int, dst: int) -> tuple[Tensor, Tensor]:
    out = img
    ok = torch.ones(img.shape[-2:], dtype=torch.bool)
    if dst > src:
        for t in range(src, dst):  # frame t -> t+1 with the backward flow t+1 -> t
            out = _warp(out, clip.flow[t])
            ok = (_warp(ok[None].float(), clip.flow[t])[0] > 0.999) & clip.valid[t]
    else:
        for t in range(src, dst, -1):  # frame t -> t-1: invert the integer flow by scattering
            out, ok = _forward_scatter(out, ok, clip.flow[t - 1], clip.valid[t - 1])
    return out, ok


def _forward_scatter(img: Tensor, ok: Tensor, flow: Tensor, valid: Tensor) -> tuple[Tensor, Tensor]:
    """Move frame t+1 back to frame t: pixel p of t+1 lands at p + flow[p] (integer flows)."""
    H, W = img.shape[-2:]
    yy, xx = torch.meshgrid(torch.arange(H), torch.arange(W), indexing="ij")
    sx, sy = xx + flow[0].round().long(), yy + flow[1].round().long()
    keep = valid & ok & (sx >= 0) & (sx < W) & (sy >= 0) & (sy < H)
    out = torch.zeros_like(img)
    new_ok = torch.zeros_like(ok)
    out[:, sy[keep], sx[keep]] = img[:, yy[keep], xx[keep]]
    new_ok[sy[keep], sx[keep]] = True
    return out, new_ok


def psnr(a: Tensor, b: Tensor, mask: Tensor | None = None) -> float:
    """PSNR in dB for images in [0, 1], optionally over a mask (H, W); ``inf`` when they are equal."""
    V.tensor("a", a, dtype="float", nonempty=True)
    V.tensor("b", b, dtype="float")
    if a.shape != b.shape:
        raise ValueError(f"a and b must have the same shape, got {tuple(a.shape)} vs {tuple(b.shape)}")
    d = (a - b).pow(2)
    if mask is not None:
        V.tensor("mask", mask, dtype="bool")
        try:
            m = mask.expand_as(d) if mask.dim() < d.dim() else mask
        except RuntimeError:
            m = None
        if m is None or m.shape != d.shape:
            raise ValueError(f"mask must have shape (H, W) = {tuple(d.shape[-2:])} or a's, got {tuple(mask.shape)}")
        if m.sum() == 0:
            raise ValueError("mask must select at least one pixel, got an all-False mask")
        mse = d[m.bool()].mean().item()
    else:
        mse = d.mean().item()
    return math.inf if mse == 0 else 10 * math.log10(1.0 / mse)


def warp_error(video: Tensor, clip: Clip) -> float:
    """Temporal consistency: mean over t of the L1 error ``|M_t * (y_{t+1} - W(y_t))|`` on visible pixels."""
    V.tensor("video", video, dtype="float")
    if video.shape != _clip(clip).frames.shape:
        raise ValueError(f"video must have the clip's shape {tuple(clip.frames.shape)}, got {tuple(video.shape)}")
    errs = []
    for t in range(len(video) - 1):
        m = clip.valid[t]
        if m.sum() == 0:
            continue
        d = (video[t + 1] - _warp(video[t], clip.flow[t])).abs().mean(0)
        errs.append(d[m].mean().item())
    return float(np.mean(errs)) if errs else 0.0


# ----------------------------------------------------------------------------------------------------------------
# Estimated motion
# ----------------------------------------------------------------------------------------------------------------
@dataclass
class Motion:
    """Optical flow estimated from the source frames, both directions, with a forward-backward occlusion check.

    ``bwd[t]`` (2, H, W): pixel p of frame t+1 shows frame t at ``p + bwd[t][:, p]`` (dx, dy).
    ``fwd[t]`` (2, H, W): pixel p of frame t shows frame t+1 at ``p + fwd[t][:, p]``.
    ``vb[t]`` / ``vf[t]`` (H, W) bool: where the two flows agree (the pixel is judged visible in the other frame).
    """

    bwd: Tensor
    fwd: Tensor
    vb: Tensor
    vf: Tensor

    def __post_init__(self) -> None:
        V.tensor("bwd", self.bwd, ndim=4, dtype="float", nonempty=True)
        if self.bwd.shape[1] != 2:
            raise ValueError(f"bwd must have shape (T-1, 2, H, W), got {tuple(self.bwd.shape)}")
        V.tensor("fwd", self.fwd, shape=tuple(self.bwd.shape), dtype="float")
        V.tensor("vb", self.vb, shape=(self.bwd.shape[0], *self.bwd.shape[2:]), dtype="bool")
        V.tensor("vf", self.vf, shape=(self.bwd.shape[0], *self.bwd.shape[2:]), dtype="bool")

    @property
    def T(self) -> int:
        return self.bwd.shape[0] + 1


def _motion(motion: object) -> Motion:
    return V.instance("motion", motion, Motion)


def estimate_motion(frames: Tensor, fast: bool = False, tol: float = 0.75) -> Motion:
    """TV-L1 optical flow (``skimage.registration.optical_flow_tvl1``) between consecutive grey frames, both ways.

    A pixel is marked visible in the neighbouring frame when following the flow there and back returns within
    ``tol`` pixels. ``fast=True`` uses fewer warps and iterations (quick mode).
    """
    from skimage.registration import optical_flow_tvl1

    V.tensor("frames", frames, ndim=4, dtype="float", nonempty=True)
    if frames.shape[0] < 2 or frames.shape[1] != 3:
        raise ValueError(f"frames must have shape (T >= 2, 3, H, W), got {tuple(frames.shape)}")
    fast = V.boolean("fast", fast)
    tol = V.positive("tol", tol)
    kw = dict(attachment=40, prefilter=True)  # sharper than the default (15): our textures are fine
    if fast:
        kw.update(num_warp=3, num_iter=5)
    g = frames.mean(1).double().numpy()
    bwd, fwd = [], []
    for t in range(len(g) - 1):
        vy, vx = optical_flow_tvl1(g[t + 1], g[t], **kw)  # g[t] sampled at p + v matches g[t+1]
        bwd.append(np.stack([vx, vy]))
        vy, vx = optical_flow_tvl1(g[t], g[t + 1], **kw)
        fwd.append(np.stack([vx, vy]))
    bwd = torch.tensor(np.array(bwd), dtype=torch.float32)
    fwd = torch.tensor(np.array(fwd), dtype=torch.float32)
    return Motion(bwd, fwd, _fb_check(bwd, fwd, tol), _fb_check(fwd, bwd, tol))


def true_motion(clip: Clip) -> Motion:
    """An *oracle* :class:`Motion` from the clip's exact integer motion (for diagnosis only): the true backward
    flow and visibility, and the true forward flow (background moves by ``-pan``, the object by ``vel``) with
    where a pixel of frame t is the same surface at its landing point in frame t+1."""
    clip = _clip(clip)
    pan, vel = clip.info.get("pan"), clip.info.get("vel")
    if pan is None or vel is None:
        raise ValueError("clip.info must hold the integer 'pan' and 'vel' of a make_clip clip")
    T, H, W = clip.masks.shape
    yy, xx = torch.meshgrid(torch.arange(H), torch.arange(W), indexing="ij")
    fwd = torch.zeros(T - 1, 2, H, W)
    vf = torch.zeros(T - 1, H, W, dtype=torch.bool)
    for t in range(T - 1):
        on = clip.masks[t]
        dx = torch.where(on, torch.tensor(vel[0]), torch.tensor(-pan[0]))
        dy = torch.where(on, torch.tensor(vel[1]), torch.tensor(-pan[1]))
        fwd[t, 0], fwd[t, 1] = dx.float(), dy.float()
        sx, sy = xx + dx, yy + dy
        inb = (sx >= 0) & (sx < W) & (sy >= 0) & (sy < H)
        dst_on = torch.zeros_like(on)
        dst_on[inb] = clip.masks[t + 1][sy[inb], sx[inb]]
        vf[t] = inb & (dst_on == on)
    return Motion(clip.flow.clone(), fwd, clip.valid.clone(), vf)


def _fb_check(a: Tensor, b: Tensor, tol: float) -> Tensor:
    """Where following flow ``a`` and then ``b`` (sampled at the landing point) returns home, inside the frame."""
    H, W = a.shape[-2:]
    back = _warp(b, a)  # b at p + a(p)
    yy, xx = torch.meshgrid(torch.arange(H, dtype=a.dtype), torch.arange(W, dtype=a.dtype), indexing="ij")
    sx, sy = xx + a[:, 0], yy + a[:, 1]
    inb = (sx >= 0) & (sx <= W - 1) & (sy >= 0) & (sy <= H - 1)
    return inb & ((a + back).norm(dim=1) < tol)


def chain_motion(motion: Motion, src: int, dst: int) -> tuple[Tensor, Tensor]:
    """Compose the estimated flow from frame ``dst`` back to frame ``src``: a displacement (2, H, W) with
    ``warp(frame_src, disp)`` ≈ frame ``dst``, and where every step of the path passed the occlusion check."""
    T = _motion(motion).T
    src, dst = V.index("src", src, T), V.index("dst", dst, T)
    return _chain_motion(motion, src, dst)


def _chain_motion(motion: Motion, src: int, dst: int) -> tuple[Tensor, Tensor]:
    H, W = motion.bwd.shape[-2:]
    disp = torch.zeros(2, H, W)
    ok = torch.ones(1, H, W)
    # dst > src: pixel p of u shows u-1 at p + bwd[u-1]; dst < src: p of u shows u+1 at p + fwd[u]
    steps = ([(motion.bwd[u - 1], motion.vb[u - 1]) for u in range(dst, src, -1)] if dst > src
             else [(motion.fwd[u], motion.vf[u]) for u in range(dst, src)])
    for f, v in steps:  # sample the next step's flow where the path has landed so far
        disp, ok = disp + _warp(f, disp), ok * _warp(v[None].float(), disp)
    return disp, ok[0] > 0.5


def visibility(clip: Clip, keys: list[int]) -> Tensor:
    """(T, H, W) bool: pixels that the ground-truth motion carries from the nearest anchor before or after them
    (anchor frames are all True). The rest are *disoccluded*: no anchor showed that surface."""
    T = len(_clip(clip).frames)
    keys = _keys(keys, T)
    out = torch.zeros(clip.frames.shape[0], *clip.frames.shape[-2:], dtype=torch.bool)
    for t in range(T):
        for k in _neighbours(keys, t):
            out[t] |= _warp_chain(clip.frames[k], clip, k, t)[1]
    return out


def _keys(keys: object, T: int) -> list[int]:
    V.instance("keys", keys, (list, tuple))
    if not keys:
        raise ValueError("keys must name at least one anchor frame, got an empty list")
    return sorted({V.index("keys item", k, T) for k in keys})


def _neighbours(keys: list[int], t: int) -> tuple[int, int]:
    """The nearest anchor at or before t and at or after t (the other one when t is outside their range)."""
    prev = max([k for k in keys if k <= t], default=None)
    nxt = min([k for k in keys if k >= t], default=None)
    return (prev if prev is not None else nxt), (nxt if nxt is not None else prev)


def ssim_outside(video: Tensor, source: Tensor, outside: Tensor) -> float:
    """Mean SSIM (scikit-image, 7×7 windows) between ``video`` and ``source`` (T, 3, H, W) over the pixels where
    ``outside`` (T, H, W) is True: content fidelity outside the edited region."""
    from skimage.metrics import structural_similarity

    V.tensor("video", video, ndim=4, dtype="float", nonempty=True)
    V.tensor("source", source, shape=tuple(video.shape), dtype="float")
    V.tensor("outside", outside, shape=(video.shape[0], *video.shape[2:]), dtype="bool")
    if video.shape[1] != 3:
        raise ValueError(f"video must have shape (T, 3, H, W), got {tuple(video.shape)}")
    if not outside.any():
        raise ValueError("outside must select at least one pixel, got an all-False mask")
    vals = []
    for v, s, m in zip(video, source, outside):
        _, smap = structural_similarity(v.permute(1, 2, 0).double().numpy(), s.permute(1, 2, 0).double().numpy(),
                                        channel_axis=2, data_range=1.0, full=True)
        vals.append(smap.mean(2)[m.numpy()])
    return float(np.concatenate(vals).mean())


# ----------------------------------------------------------------------------------------------------------------
# Keyframes
# ----------------------------------------------------------------------------------------------------------------
def uniform_keyframes(T: int, m: int) -> list[int]:
    """``m`` keyframes spread evenly over ``T`` frames, always including the first (and the last when m > 1)."""
    T = V.integer("T", T, min=1)
    m = V.integer("m", m, min=1, max=T)
    if m == 1:
        return [0]
    return sorted({round(i * (T - 1) / (m - 1)) for i in range(m)})


def motion_keyframes(motion: Motion, m: int) -> list[int]:
    """``m`` keyframes at equal steps of cumulative *estimated* motion (mean flow magnitude plus the fraction of
    pixels that fail the occlusion check)."""
    T = _motion(motion).T
    m = V.integer("m", m, min=1, max=T)
    step = motion.bwd.norm(dim=1).mean((1, 2)) + 10 * (~motion.vb).float().mean((1, 2))
    cum = torch.cat([torch.zeros(1), step.cumsum(0)]).numpy()
    if m == 1:
        return [0]
    targets = np.linspace(0, cum[-1], m)
    keys = sorted({int(np.argmin(np.abs(cum - v))) for v in targets})
    for t in range(T):  # fill up if two targets hit the same frame
        if len(keys) >= m:
            break
        if t not in keys:
            keys = sorted(keys + [t])
    return keys


# ----------------------------------------------------------------------------------------------------------------
# The toy image editor
# ----------------------------------------------------------------------------------------------------------------
INSTRUCTIONS = ("stripe_object", "restyle_background")


@dataclass(frozen=True)
class EditParams:
    """The parameters one editor call settles on (shared by everything edited in that call)."""

    instruction: str
    hue: float  # hue rotation (turns), background restyle
    gain: float  # contrast gain, background restyle
    levels: int  # posterization levels, background restyle
    freq: float  # stripes per pixel, object pattern
    angle: float  # stripe direction (radians)
    phase: float  # stripe phase (turns)
    color: tuple = (1.0, 1.0, 1.0)  # stripe colour (r, g, b)

    def __post_init__(self) -> None:
        V.one_of("instruction", self.instruction, INSTRUCTIONS)
        for k in ("hue", "angle", "phase"):
            object.__setattr__(self, k, V.number(k, getattr(self, k)))
        object.__setattr__(self, "gain", V.nonnegative("gain", self.gain))
        object.__setattr__(self, "freq", V.nonnegative("freq", self.freq))
        object.__setattr__(self, "levels", V.integer("levels", self.levels, min=1))
        V.instance("color", self.color, tuple)
        if len(self.color) != 3:
            raise ValueError(f"color must be an (r, g, b) tuple, got {self.color!r}")
        object.__setattr__(self, "color", tuple(V.probability("color item", c) for c in self.color))


def _hue_rotate(x: Tensor, turns: float | Tensor) -> Tensor:
    """Rotate colours (3, ...) about the grey axis by ``turns`` of a full turn (a linear map in RGB)."""
    a = torch.as_tensor(turns, dtype=x.dtype) * 2 * math.pi
    c, s = torch.cos(a), torch.sin(a)
    k = 1 / 3
    sq = math.sqrt(k)
    M = torch.stack([
        torch.stack([c + (1 - c) * k, k * (1 - c) - sq * s, k * (1 - c) + sq * s]),
        torch.stack([k * (1 - c) + sq * s, c + (1 - c) * k, k * (1 - c) - sq * s]),
        torch.stack([k * (1 - c) - sq * s, k * (1 - c) + sq * s, c + (1 - c) * k]),
    ])
    return torch.einsum("ij,j...->i...", M, x)


def apply_edit(frame: Tensor, mask: Tensor, center: Tensor, p: EditParams) -> Tensor:
    """Apply edit ``p`` to one frame (3, H, W) with the object's mask (H, W) and centre (x, y).

    ``stripe_object`` paints soft stripes in the object's own coordinates (so the pattern moves with it);
    ``restyle_background`` rotates the hue, posterizes and changes the contrast of everything but the object.
    """
    V.tensor("frame", frame, ndim=3, dtype="float")
    if frame.shape[0] != 3:
        raise ValueError(f"frame must have shape (3, H, W), got {tuple(frame.shape)}")
    V.tensor("mask", mask, shape=frame.shape[1:], dtype="bool")
    V.tensor("center", center, shape=(2,), dtype="float")
    V.instance("p", p, EditParams)
    return _apply_edit(frame, mask, center, p)


def _apply_edit(frame: Tensor, mask: Tensor, center: Tensor, p: EditParams) -> Tensor:
    if p.instruction == "stripe_object":
        H, W = frame.shape[-2:]
        yy, xx = torch.meshgrid(torch.arange(H, dtype=frame.dtype), torch.arange(W, dtype=frame.dtype),
                                indexing="ij")
        u = (xx - center[0]) * math.cos(p.angle) + (yy - center[1]) * math.sin(p.angle)
        w = torch.sigmoid(6 * torch.sin(2 * math.pi * (p.freq * u + p.phase)))
        col = torch.tensor(p.color, dtype=frame.dtype)[:, None, None]
        return torch.where(mask[None], frame * (1 - w) + col * w, frame)
    sty = _hue_rotate(frame, p.hue)
    sty = (torch.floor(sty.clamp(0, 1) * p.levels) + 0.5) / p.levels
    sty = (0.5 + p.gain * (sty - 0.5)).clamp(0, 1)
    return torch.where(mask[None], frame, sty)


def edit_video(frames: Tensor, masks: Tensor, centers: Tensor, p: EditParams) -> Tensor:
    """The ground-truth edited video: edit ``p`` applied to every frame (T, 3, H, W) with its mask and centre."""
    V.tensor("frames", frames, ndim=4, dtype="float", nonempty=True)
    T = frames.shape[0]
    if frames.shape[1] != 3:
        raise ValueError(f"frames must have shape (T, 3, H, W), got {tuple(frames.shape)}")
    V.tensor("masks", masks, shape=(T, *frames.shape[2:]), dtype="bool")
    V.tensor("centers", centers, shape=(T, 2), dtype="float")
    V.instance("p", p, EditParams)
    return torch.stack([_apply_edit(f, m, c, p) for f, m, c in zip(frames, masks, centers)])


class Editor:
    """A stochastic, context-dependent image editor.

    One call looks at the whole image it is given (its background colour and contrast) and settles on edit
    parameters that depend on that context, plus random jitter (like a generative editor, each call draws its
    own). ``edit`` with several frames is *composed editing*: the frames are tiled into one canvas, so the editor
    sees them together and settles on one set of parameters; editing each keyframe alone gives each its own.
    ``quality`` in [0, 1] emulates weaker editors (noise, blur and a hue bias grow as it drops).
    """

    def __init__(self, seed: int = 0, quality: float = 1.0, jitter: float = 1.0) -> None:
        seed = V.seed("seed", seed)
        self.quality = V.probability("quality", quality)
        self.jitter = V.probability("jitter", jitter)
        self.rng = np.random.default_rng(seed)
        self.calls: list[EditParams] = []

    def draw(self, instruction: str, canvas: Tensor, cmask: Tensor) -> EditParams:
        """The parameters of one call on ``canvas`` (3, H, W) with the object's mask ``cmask`` (H, W)."""
        V.one_of("instruction", instruction, INSTRUCTIONS)
        V.tensor("canvas", canvas, ndim=3, dtype="float")
        if canvas.shape[0] != 3:
            raise ValueError(f"canvas must have shape (3, H, W), got {tuple(canvas.shape)}")
        V.tensor("cmask", cmask, shape=canvas.shape[1:], dtype="bool")
        bg = canvas[:, ~cmask] if (~cmask).any() else canvas.reshape(3, -1)
        mean = bg.mean(1).double().numpy()
        lum, con = float(mean.mean()), float(bg.mean(0).std()) if bg.shape[1] > 1 else 0.0
        j, r = self.jitter, self.rng.uniform(-1, 1, 5)
        # context: stripes contrast with the surroundings and lie at an angle set by the brightness;
        # the restyle's hue and posterization follow the background's brightness and contrast
        color = tuple(float(np.clip(1 - c + 0.1 * j * r[0], 0, 1)) for c in mean)
        return EditParams(instruction, hue=0.15 + 0.6 * lum + 0.05 * j * r[1],
                          gain=max(0.0, 1.5 - 0.8 * con + 0.1 * j * r[2]),
                          levels=int(np.clip(round(3 + 8 * con + j * r[3]), 2, 8)),
                          freq=0.22 + 0.02 * j * r[4], angle=math.pi * (2 * lum + 0.15 * j * r[3]),
                          phase=float(j * self.rng.uniform(0, 1)), color=color)

    def degrade(self, img: Tensor) -> Tensor:
        """The weak-editor artefacts at this quality (a no-op at quality 1)."""
        V.tensor("img", img, ndim=3, dtype="float")
        if img.shape[0] != 3:
            raise ValueError(f"img must have shape (3, H, W), got {tuple(img.shape)}")
        bad = 1.0 - self.quality
        if bad == 0:
            return img
        out = _hue_rotate(img, 0.12 * bad)
        k = 1 + 2 * int(round(2 * bad))
        if k > 1:
            out = F.avg_pool2d(F.pad(out[None], (k // 2,) * 4, mode="replicate"), k, stride=1)[0]
        noise = torch.tensor(self.rng.standard_normal(out.shape), dtype=out.dtype) * 0.12 * bad
        return (out + noise).clamp(0, 1)

    def edit(self, frames: Tensor, masks: Tensor, centers: Tensor, instruction: str) -> tuple[Tensor, EditParams]:
        """One editor call on (n, 3, H, W) frames tiled side by side (masks (n, H, W), object centres (n, 2));
        returns the edited frames and the parameters of the call."""
        V.tensor("frames", frames, ndim=(3, 4), dtype="float", nonempty=True)
        V.tensor("masks", masks, dtype="bool")
        V.tensor("centers", centers, dtype="float")
        V.one_of("instruction", instruction, INSTRUCTIONS)
        if frames.dim() == 3:
            frames, masks, centers = frames[None], masks[None], centers[None]
        if frames.shape[1] != 3:
            raise ValueError(f"frames must have shape (n, 3, H, W), got {tuple(frames.shape)}")
        n = frames.shape[0]
        if masks.shape != (n, *frames.shape[2:]):
            raise ValueError(f"masks must have shape (n, H, W) = {(n, *frames.shape[2:])}, "
                             f"got {tuple(masks.shape)}")
        if centers.shape != (n, 2):
            raise ValueError(f"centers must have shape (n, 2) = {(n, 2)}, got {tuple(centers.shape)}")
        p = self.draw(instruction, torch.cat(list(frames), dim=-1), torch.cat(list(masks), dim=-1))
        self.calls.append(p)
        out = torch.stack([self.degrade(_apply_edit(f, m, c, p)) for f, m, c in zip(frames, masks, centers)])
        return out, p


# ----------------------------------------------------------------------------------------------------------------
# The generative propagator: conditional flow matching over frames, anchors replaced at every step
# ----------------------------------------------------------------------------------------------------------------
def _conv(i: int, o: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(i, o, 3, padding=1), nn.GroupNorm(4, o), nn.SiLU(),
                         nn.Conv2d(o, o, 3, padding=1), nn.GroupNorm(4, o), nn.SiLU())


COND_CH = 13  # per frame: warped prev/next anchor (3 + 3), their validity (2), time fraction (1), flows (2 + 2)
DYN_CH = 10  # per step: the frame's state (3), its neighbours' states warped to it (3 + 3), the noise level (1)


class Propagator(nn.Module):
    """A three-level U-Net that, for one frame, predicts the clean frame from its noisy state x_τ, its
    neighbours' states warped to it with the estimated flow, the two nearest anchors warped to it (with where
    the warp is trusted), the flows to its neighbours, the time fraction between the anchors and τ.

    It predicts a residual on the blend of the warped anchors; the flow-matching velocity is
    ``(x̂_1 - x_τ) / (1 - τ)``. Input channels ``IN_CH`` = 10 + 13 = 23. ``gate=True`` (a *gated residual*):
    the last layer also gives a per-pixel gate logit g and the prediction is ``base + sigmoid(g) * residual``,
    so where the warped anchors (or, with filled conditioning, the inpainted fill) are already right the network
    can return them exactly whatever its noisy inputs, by closing the gate (``False``: the stored models).
    """

    IN_CH = DYN_CH + COND_CH

    def __init__(self, width: int = 16, gate: bool = False) -> None:
        width = V.integer("width", width, min=4)
        if width % 4:
            raise ValueError(f"width must be a multiple of 4 (GroupNorm with 4 groups), got {width}")
        gate = V.boolean("gate", gate)
        super().__init__()
        self.gate = gate
        self.d1 = _conv(self.IN_CH, width)
        self.d2 = _conv(width, 2 * width)
        self.d3 = _conv(2 * width, 2 * width)
        self.u2 = _conv(4 * width, 2 * width)
        self.u1 = _conv(3 * width, width)
        self.out = nn.Conv2d(width, 4 if gate else 3, 1)

    def forward(self, x: Tensor) -> Tensor:
        """Clean frames (n, 3, H, W) from inputs (n, 23, H, W), H and W divisible by 4."""
        V.tensor("x", x, ndim=4, dtype="float")
        if x.shape[1] != self.IN_CH or x.shape[2] % 4 or x.shape[3] % 4:
            raise ValueError(f"x must have shape (n, {self.IN_CH}, H, W) with H, W divisible by 4, "
                             f"got {tuple(x.shape)}")
        h1 = self.d1(x)
        h2 = self.d2(F.avg_pool2d(h1, 2))
        h3 = self.d3(F.avg_pool2d(h2, 2))
        h = self.u2(torch.cat([h2, F.interpolate(h3, scale_factor=2, mode="nearest")], 1))
        h = self.u1(torch.cat([h1, F.interpolate(h, scale_factor=2, mode="nearest")], 1))
        r = self.out(h)
        if self.gate:
            r = torch.sigmoid(r[:, 3:]) * r[:, :3]
        return _base(x[:, DYN_CH:]) + r


def _base(cond: Tensor) -> Tensor:
    """Blend of the warped anchors, weighted by where each is trusted (a plain average where neither is)."""
    a, b, va, vb = cond[:, 0:3], cond[:, 3:6], cond[:, 6:7], cond[:, 7:8]
    w = va + vb
    return torch.where(w > 0, (a * va + b * vb) / w.clamp(min=1e-6), (a + b) / 2)


def anchor_condition(anchors: dict[int, Tensor], motion: Motion, fill_holes: bool = False) -> Tensor:
    """The per-frame conditioning (T, 13, H, W) from anchor images keyed by frame index: the nearest anchors
    warped along the estimated flow, where the warp is trusted, the time fraction and the flows to the
    neighbouring frames (divided by 4). ``fill_holes=True``: where neither anchor's warp is trusted, both warped
    anchors are replaced by a biharmonic inpainting of the frame's trusted pixels (the validity channels stay
    0, so the holes are still marked)."""
    _anchors(anchors, _motion(motion))
    fill_holes = V.boolean("fill_holes", fill_holes)
    cond = _anchor_condition(anchors, motion)
    return _fill_condition(cond, sorted(anchors)) if fill_holes else cond


def _anchors(anchors: object, motion: Motion) -> dict[int, Tensor]:
    V.instance("anchors", anchors, dict)
    if not anchors:
        raise ValueError("anchors must hold at least one anchor image (frame index -> (3, H, W)), got {}")
    for k, img in anchors.items():
        V.index("anchors key", k, motion.T)
        V.tensor(f"anchors[{k}]", img, shape=(3, *motion.bwd.shape[-2:]), dtype="float")
    return anchors


def _anchor_condition(anchors: dict[int, Tensor], motion: Motion) -> Tensor:
    keys = sorted(anchors)
    T, (H, W) = motion.T, motion.bwd.shape[-2:]
    out = torch.zeros(T, COND_CH, H, W)
    for t in range(T):
        prev, nxt = _neighbours(keys, t)
        for j, k in enumerate((prev, nxt)):
            disp, ok = _chain_motion(motion, k, t)
            out[t, 3 * j:3 * j + 3] = _warp(anchors[k], disp)
            out[t, 6 + j] = ok.float()
        out[t, 8] = (t - prev) / (nxt - prev) if nxt != prev else 0.0
        if t > 0:
            out[t, 9:11] = motion.bwd[t - 1] / 4
        if t < T - 1:
            out[t, 11:13] = motion.fwd[t] / 4
    return out


def _inpaint_holes(cond: Tensor, keys: list[int]) -> tuple[Tensor, Tensor]:
    """The blend of the warped anchors with each non-anchor frame's holes (no warp trusted) filled by biharmonic
    inpainting from its trusted pixels (``skimage.restoration.inpaint_biharmonic``), and the holes (T, H, W)."""
    from skimage.restoration import inpaint_biharmonic

    out = _base(cond)
    hole = cond[:, 6:8].sum(1) == 0  # (T, H, W): neither anchor's warp trusted
    for t in range(len(out)):
        if t in keys or not hole[t].any() or hole[t].all():
            continue
        img = inpaint_biharmonic(out[t].permute(1, 2, 0).double().numpy(), hole[t].numpy(), channel_axis=-1)
        out[t] = torch.tensor(img, dtype=out.dtype).permute(2, 0, 1).clamp(0, 1)
    return out, hole


def _fill_condition(cond: Tensor, keys: list[int],
                    filled: tuple[Tensor, Tensor] | None = None) -> Tensor:
    """The conditioning with both warped anchors replaced by the inpainted blend inside the holes (``filled``:
    :func:`_inpaint_holes` of the same ``cond`` and ``keys``, computed before)."""
    fill, hole = _inpaint_holes(cond, keys) if filled is None else filled
    out = cond.clone()
    for j in (0, 3):
        out[:, j:j + 3] = torch.where(hole[:, None], fill, cond[:, j:j + 3])
    return out


def _inputs(x: Tensor, cond: Tensor, motion: Motion, tau: Tensor, frames: list[int]) -> Tensor:
    """Network inputs for ``frames`` of the video state ``x`` (T, 3, H, W) at noise levels ``tau`` (T,)."""
    T = len(x)
    rows = []
    for t in frames:
        prev = _warp(x[t - 1], motion.bwd[t - 1]) if t > 0 else x[t]
        nxt = _warp(x[t + 1], motion.fwd[t]) if t < T - 1 else x[t]
        rows.append(torch.cat([x[t], prev, nxt, tau[t].expand(1, *x.shape[-2:]), cond[t]]))
    return torch.stack(rows)


def _noisy(x1: Tensor, eps: Tensor, tau: float | Tensor) -> Tensor:
    return (1 - tau) * eps + tau * x1


def hole_border(hole: Tensor, radius: int = 2) -> Tensor:
    """Pixels within ``radius`` pixels (chessboard distance) of the border between a hole and the trusted pixels,
    on either side: ``hole`` (..., H, W) bool -> a bool mask of the same shape (all False where there is no hole
    or nothing is trusted)."""
    V.tensor("hole", hole, dtype="bool")
    if hole.dim() < 2:
        raise ValueError(f"hole must have shape (..., H, W), got {tuple(hole.shape)}")
    radius = V.integer("radius", radius, min=1)
    return _hole_border(hole, radius)


def _hole_border(hole: Tensor, radius: int) -> Tensor:
    h = hole.reshape(-1, 1, *hole.shape[-2:]).float()
    k = 2 * radius + 1
    near_hole = F.max_pool2d(h, k, stride=1, padding=radius) > 0
    near_trusted = F.max_pool2d(1 - h, k, stride=1, padding=radius) > 0
    return (near_hole & near_trusted).reshape(hole.shape)


def train_propagator(frames: list[Tensor], motions: list[Motion], steps: int, width: int = 16, seed: int = 0,
                     batch_clips: int = 2, lr: float = 2e-3, hole_weight: float = 4.0,
                     progress: bool = True, fill_holes: bool = False, border_weight: float = 0.0,
                     border_radius: int = 2, x0_weight: float = 0.0, schedule: str = "cosine",
                     decay_steps: int = 0, gate: bool = False) -> tuple[Propagator, object]:
    """Train a :class:`Propagator` self-supervised: rebuild each *source* clip from its own keyframes (1 to 4,
    uniform or random) and its estimated motion. No editor, no edited pairs. Each step takes ``batch_clips``
    clips, one noise level τ ~ U(0, 1) per clip, and the squared error of the predicted clean non-anchor frames,
    weighted ``1 + hole_weight`` where neither anchor's warp is trusted. ``fill_holes=True`` trains on the
    conditioning of :func:`anchor_condition` with ``fill_holes=True`` (holes hold the inpainted warp); the model
    must then be sampled with the same option. ``border_weight`` > 0 adds that weight on the pixels within
    ``border_radius`` pixels of a hole's border (:func:`hole_border`), where the learned fill meets the warp
    (0: the loss of the stored ``propagators``). ``x0_weight`` > 0 adds a *one-step fill loss*: each clip is also
    given at τ = 0 (pure noise, the sampler's first step), and the squared error of that clean-frame prediction on
    the holes and their border band (``border_radius``) is added with this weight, so that the network's
    conditional-mean estimate is trained where the fill matters (0: off, the draws of the stored models).
    ``schedule``/``decay_steps`` go to :func:`helpers.train.fit` (``"wsd"``: warmup-stable-decay). ``gate=True``
    trains a :class:`Propagator` with a gated residual (off: the stored models' draws). Returns the model and its
    history."""
    from helpers import train

    V.instance("frames", frames, list)
    V.instance("motions", motions, list)
    if not frames or len(frames) != len(motions):
        raise ValueError(f"frames and motions must be non-empty lists of equal length, got {len(frames)} and "
                         f"{len(motions)}")
    for i, (f, m) in enumerate(zip(frames, motions)):
        V.tensor(f"frames[{i}]", f, ndim=4, dtype="float")
        V.instance(f"motions[{i}]", m, Motion)
        if f.shape[0] != m.T or f.shape[1] != 3 or f.shape[-2:] != m.bwd.shape[-2:]:
            raise ValueError(f"frames[{i}] {tuple(f.shape)} does not match its motion ({m.T} frames of "
                             f"{tuple(m.bwd.shape[-2:])})")
    steps = V.integer("steps", steps, min=1)
    seed = V.seed("seed", seed)
    batch_clips = V.integer("batch_clips", batch_clips, min=1)
    lr = V.positive("lr", lr)
    hole_weight = V.nonnegative("hole_weight", hole_weight)
    progress = V.boolean("progress", progress)
    fill_holes = V.boolean("fill_holes", fill_holes)
    border_weight = V.nonnegative("border_weight", border_weight)
    border_radius = V.integer("border_radius", border_radius, min=1)
    x0_weight = V.nonnegative("x0_weight", x0_weight)
    V.one_of("schedule", schedule, train.SCHEDULES)
    decay_steps = V.integer("decay_steps", decay_steps, min=0)
    gate = V.boolean("gate", gate)
    torch.manual_seed(seed)
    model = Propagator(width, gate=gate)
    rng = np.random.default_rng(seed)
    g = torch.Generator().manual_seed(seed)
    fills: dict[tuple, tuple[Tensor, Tensor]] = {}  # (clip, keys) -> its inpainting: a pure function, computed once

    def batch(step: int) -> tuple[Tensor, ...]:
        xs, ys, ws, x0s, w0s = [], [], [], [], []
        for _ in range(batch_clips):
            i = int(rng.integers(len(frames)))
            x1, mo = frames[i], motions[i]
            T = len(x1)
            m = int(rng.integers(1, min(4, T - 1) + 1))  # 1 to 4 anchors, leaving a frame to rebuild
            keys = uniform_keyframes(T, m) if rng.random() < 0.5 else sorted(
                int(k) for k in rng.choice(T, m, replace=False))
            cond = _anchor_condition({k: x1[k] for k in keys}, mo)
            if fill_holes:
                if (i, tuple(keys)) not in fills:
                    fills[i, tuple(keys)] = _inpaint_holes(cond, keys)
                cond = _fill_condition(cond, keys, fills[i, tuple(keys)])
            tau = torch.full((T,), float(rng.uniform(0, 1)))
            x = _noisy(x1, torch.randn(x1.shape, generator=g), tau[:, None, None, None])
            rest = [t for t in range(T) if t not in keys]
            xs.append(_inputs(x, cond, mo, tau, rest))
            ys.append(x1[rest])
            hole = cond[rest, 6:8].sum(1, keepdim=True) == 0
            w = 1 + hole_weight * hole.float()
            if border_weight:  # off by default: the stored propagators' loss, draws and order unchanged
                w = w + border_weight * _hole_border(hole, border_radius).float()
            ws.append(w)
            if x0_weight:  # off by default: no extra draw, the stored models' stream unchanged
                e0 = torch.randn(x1.shape, generator=g)
                x0s.append(_inputs(e0, cond, mo, torch.zeros(T), rest))
                w0s.append((hole | _hole_border(hole, border_radius)).float())
        if x0_weight:
            return torch.cat(xs), torch.cat(ys), torch.cat(ws), torch.cat(x0s), torch.cat(w0s)
        return torch.cat(xs), torch.cat(ys), torch.cat(ws)

    def loss(mdl: nn.Module, b: tuple[Tensor, ...]) -> Tensor:
        out = (b[2] * (mdl(b[0]) - b[1]).pow(2)).mean()
        if len(b) > 3:
            out = out + x0_weight * (b[4] * (mdl(b[3]) - b[1]).pow(2)).mean()
        return out

    hist = train.fit(model, loss, batch, steps, lr=lr, warmup=max(1, steps // 20), seed=seed,
                     progress=progress, desc="propagator", schedule=schedule, decay_steps=decay_steps)
    return model.eval(), hist


@torch.no_grad()
def propagate(model: Propagator, anchors: dict[int, Tensor], motion: Motion, steps: int = 8,
              seed: int = 0, fill_holes: bool = False) -> Tensor:
    """Generate every frame (T, 3, H, W) by Euler integration of the flow-matching ODE from noise (τ = 0) to
    data (τ = 1). At every step the anchor frames' states are *replaced* by their edited keyframes noised to the
    current τ (with the frames' own starting noise), so every other frame is generated in agreement with them;
    the returned anchor frames are the keyframes exactly. ``fill_holes``: condition on the inpainted warp in the
    holes (for a model trained with ``fill_holes=True``)."""
    V.instance("model", model, Propagator)
    _anchors(anchors, _motion(motion))
    steps = V.integer("steps", steps, min=1)
    seed = V.seed("seed", seed)
    fill_holes = V.boolean("fill_holes", fill_holes)
    T = motion.T
    cond = _anchor_condition(anchors, motion)
    if fill_holes:
        cond = _fill_condition(cond, sorted(anchors))
    A = torch.stack([anchors.get(t, torch.zeros(3, *motion.bwd.shape[-2:])) for t in range(T)])
    eps = torch.randn(A.shape, generator=torch.Generator().manual_seed(seed))
    keys = sorted(anchors)
    rest = [t for t in range(T) if t not in anchors]
    x = eps.clone()
    model.eval()
    for i in range(steps):
        tau = i / steps
        x[keys] = _noisy(A[keys], eps[keys], tau)  # anchor replacement
        if rest:
            x1 = model(_inputs(x, cond, motion, torch.full((T,), tau), rest))
            x[rest] = x[rest] + (x1 - x[rest]) / (1 - tau) / steps
    x[keys] = A[keys]
    return x.clamp(0, 1)


@torch.no_grad()
def flow_warp_propagate(anchors: dict[int, Tensor], motion: Motion, fill: Tensor | None = None,
                        inpaint: bool = False) -> Tensor:
    """Baseline: the two nearest anchors warped along the same estimated flow and blended where the warp is
    trusted. Where neither is trusted, their plain average, or ``fill`` (T, 3, H, W) if given (e.g. the
    unedited source frames), or with ``inpaint=True`` a biharmonic inpainting of each frame's untrusted pixels
    from its trusted ones (``skimage.restoration.inpaint_biharmonic``). ``fill`` and ``inpaint`` exclude each
    other."""
    _anchors(anchors, _motion(motion))
    inpaint = V.boolean("inpaint", inpaint)
    if fill is not None and inpaint:
        raise ValueError("give fill or inpaint=True, not both")
    cond = _anchor_condition(anchors, motion)
    if inpaint:
        out, hole = _inpaint_holes(cond, sorted(anchors))
    else:
        out = _base(cond)
        hole = cond[:, 6:8].sum(1) == 0  # (T, H, W): neither anchor's warp trusted
    if fill is not None:
        V.tensor("fill", fill, shape=tuple(out.shape), dtype="float")
        out = torch.where(hole[:, None], fill, out)
    for k, img in anchors.items():
        out[k] = img
    return out


# ----------------------------------------------------------------------------------------------------------------
# The stored propagators
# ----------------------------------------------------------------------------------------------------------------
TRAIN_IMAGES = ("astronaut", "rocket", "immunohistochemistry", "motorcycle_left")
TEST_IMAGES = ("coffee", "chelsea")


def checkpoint_config(name: str = "propagators") -> dict:
    """The configuration of the stored propagators (``data/11_anchor_video_edit/make_propagators.py``):
    ``propagators`` (conditioned on the raw warped anchors) or ``propagators_filled`` (the same training, but
    the holes of the conditioning hold the inpainted warp: ``fill_holes=True``); ``propagators_wide``
    (``make_propagators_wide.py``): the raw conditioning, twice the width, 200 clips, 4,000 steps and a loss that
    also weighs the pixels at hole borders; ``propagators_wide_filled``: that build on the filled conditioning of
    ``propagators_filled``; ``propagators_onestep`` (``make_propagators_onestep.py``): ``propagators_filled``'s
    size and conditioning with the one-step fill loss (``x0_weight``) and a warmup-stable-decay schedule over
    3,000 steps; ``propagators_gated`` (the same script, ``--name``; issue #69 round 5): that recipe with a
    gated residual (``gate=True``)."""
    V.one_of("name", name, ("propagators", "propagators_filled", "propagators_wide", "propagators_wide_filled",
                            "propagators_onestep", "propagators_gated"))
    cfg = dict(T=12, size=32, n_train_clips=48, train_images=list(TRAIN_IMAGES), clip_seed0=0, steps=1200,
               width=16, batch_clips=2, lr=2e-3, hole_weight=4.0, seeds=[0, 1, 2])
    if name == "propagators_filled":
        cfg["fill_holes"] = True
    if name in ("propagators_wide", "propagators_wide_filled"):  # make_propagators_wide.py: issue #69's rebuild
        cfg.update(n_train_clips=200, steps=4000, width=32, border_weight=4.0, border_radius=2)
    if name == "propagators_wide_filled":  # the same, on the filled conditioning of propagators_filled
        cfg["fill_holes"] = True
    if name in ("propagators_onestep", "propagators_gated"):  # make_propagators_onestep.py: issue #69, round 4
        cfg.update(fill_holes=True, x0_weight=4.0, border_radius=2, schedule="wsd", steps=3000, decay_steps=600)
    if name == "propagators_gated":  # round 5: the round-4 recipe with a gated residual
        cfg["gate"] = True
    return cfg


def training_clips(cfg: dict, fast: bool = False) -> tuple[list[Clip], list[Motion]]:
    """The (unedited) training clips of a config and their estimated motion."""
    V.instance("cfg", cfg, dict)
    clips = [make_clip(cfg["train_images"][i % len(cfg["train_images"])], cfg["T"], cfg["size"],
                       seed=cfg["clip_seed0"] + i) for i in range(cfg["n_train_clips"])]
    return clips, [estimate_motion(c.frames, fast=fast) for c in clips]


@torch.no_grad()
def rebuild_errors(model: Propagator, clip: Clip, motion: Motion, keys: list[int], steps: int = 8, seed: int = 0,
                   fill_holes: bool = False) -> dict[str, float]:
    """A source clip rebuilt from its own (unedited) keyframes ``keys``, as in training: squared-error sums on the
    disoccluded pixels of the non-anchor frames (no anchor showed them, by the true motion) of the generator
    (``"AVE"``) and of flow warp + inpaint (``"inpaint"``), and their count ``"n"``; sums, so that PSNRs can be
    pooled over clips. The fit condition of the chapter compares the two on training clips."""
    V.instance("model", model, Propagator)
    clip, motion = _clip(clip), _motion(motion)
    keys = _keys(keys, clip.frames.shape[0])
    T = clip.frames.shape[0]
    an = {k: clip.frames[k] for k in keys}
    rest = torch.tensor([t not in keys for t in range(T)])[:, None, None]
    dis = ~visibility(clip, keys) & rest
    out = {"n": int(dis.sum())}
    for name, v in (("AVE", propagate(model, an, motion, steps, seed=seed, fill_holes=fill_holes)),
                    ("inpaint", flow_warp_propagate(an, motion, inpaint=True))):
        out[name] = (v - clip.frames).pow(2).mean(1)[dis].sum().item()
    return out


def pooled_gap_db(rows: list[dict]) -> float:
    """PSNR of ``"AVE"`` minus PSNR of ``"inpaint"`` (dB), pooled over rows of :func:`rebuild_errors`."""
    rows = V.sequence("rows", rows, min_len=1)
    n = sum(r["n"] for r in rows)
    if n == 0:
        raise ValueError("rows hold no disoccluded pixel")
    se = {k: max(sum(r[k] for r in rows), 1e-12) for k in ("AVE", "inpaint")}
    return float(10 * np.log10(se["inpaint"] / se["AVE"]))


# ----------------------------------------------------------------------------------------------------------------
# Metrics inside a region, and the editor-quality correlation
# ----------------------------------------------------------------------------------------------------------------
def edit_region(clip: Clip, instruction: str) -> Tensor:
    """(T, H, W) bool: the pixels an instruction edits (the object for ``stripe_object``, everything else for
    ``restyle_background``)."""
    clip = _clip(clip)
    V.one_of("instruction", instruction, INSTRUCTIONS)
    return clip.masks.clone() if instruction == "stripe_object" else ~clip.masks


def masked_errors(video: Tensor, ref: Tensor, mask: Tensor) -> tuple[float, int]:
    """The sum of squared errors (mean over channels) between ``video`` and ``ref`` (T, 3, H, W) over the pixels of
    ``mask`` (T, H, W), and their count: sums, so that PSNRs can be pooled over clips (:func:`psnr_from_sums`)."""
    V.tensor("video", video, ndim=4, dtype="float", nonempty=True)
    V.tensor("ref", ref, shape=tuple(video.shape), dtype="float")
    V.tensor("mask", mask, shape=(video.shape[0], *video.shape[2:]), dtype="bool")
    if video.shape[1] != 3:
        raise ValueError(f"video must have shape (T, 3, H, W), got {tuple(video.shape)}")
    return float((video - ref).pow(2).mean(1)[mask].sum()), int(mask.sum())


def psnr_from_sums(se: float, n: int) -> float:
    """Pooled PSNR (dB, images in [0, 1]) from a sum of squared errors over ``n`` pixels; ``inf`` when ``se`` is 0."""
    se = V.nonnegative("se", se)
    n = V.integer("n", n, min=1)
    return math.inf if se == 0 else 10 * math.log10(n / se)


def pearson_r(x: object, y: object) -> float:
    """Pearson's correlation of two equally long sequences of at least 3 finite numbers, neither constant."""
    a = V.array("x", x, ndim=1, dtype="float").astype(float)
    b = V.array("y", y, ndim=1, dtype="float").astype(float)
    if len(a) != len(b) or len(a) < 3:
        raise ValueError(f"x and y must have the same length >= 3, got {len(a)} and {len(b)}")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise ValueError("x and y must be finite")
    a, b = a - a.mean(), b - b.mean()
    if not (a.any() and b.any()):
        raise ValueError("x and y must not be constant (the correlation is undefined)")
    return float((a * b).sum() / math.sqrt((a * a).sum() * (b * b).sum()))


def quality_correlation(key_se: object, key_n: object, vid_se: object, vid_n: object, n_boot: int = 1000,
                        seed: int = 0, level: float = 0.95) -> dict[str, float]:
    """The editor-quality ablation's statistic. Inputs are arrays (clips, quality levels): squared-error sums and
    pixel counts of the edited keyframes and of the propagated non-anchor frames against the intended edit. Per
    level the PSNRs are pooled over clips; returns Pearson's ``r`` between keyframe and video PSNR over the levels,
    a bootstrap interval (``lo``, ``hi``; clips resampled with replacement, ``level`` coverage) and the least-squares
    ``slope`` (video dB per keyframe dB)."""
    arrs = [V.array(k, v, ndim=2, dtype="float").astype(float) for k, v in
            (("key_se", key_se), ("key_n", key_n), ("vid_se", vid_se), ("vid_n", vid_n))]
    if len({a.shape for a in arrs}) != 1:
        raise ValueError(f"key_se, key_n, vid_se and vid_n must have one shape (clips, levels), got "
                         f"{[a.shape for a in arrs]}")
    if arrs[0].shape[1] < 3:
        raise ValueError(f"need at least 3 quality levels (columns), got {arrs[0].shape[1]}")
    if any((a < 0).any() or not np.isfinite(a).all() for a in arrs) or (arrs[1] <= 0).any() or (arrs[3] <= 0).any():
        raise ValueError("errors must be finite and >= 0 and pixel counts > 0")
    n_boot = V.integer("n_boot", n_boot, min=10)
    seed = V.seed("seed", seed)
    level = V.probability("level", level)

    def stats(idx: np.ndarray) -> tuple[float, float]:
        ks, kn, vs, vn = (a[idx].sum(0) for a in arrs)
        kp, vp = 10 * np.log10(kn / np.maximum(ks, 1e-12)), 10 * np.log10(vn / np.maximum(vs, 1e-12))
        kc = kp - kp.mean()
        return pearson_r(kp, vp), float((kc * (vp - vp.mean())).sum() / (kc * kc).sum())

    n = arrs[0].shape[0]
    r, slope = stats(np.arange(n))
    rng = np.random.default_rng(seed)
    boots = []
    for _ in range(n_boot):
        try:
            boots.append(stats(rng.integers(0, n, n))[0])
        except ValueError:  # a resample with a constant column: no correlation defined
            continue
    lo, hi = np.quantile(boots, [(1 - level) / 2, (1 + level) / 2]) if boots else (math.nan, math.nan)
    return dict(r=r, lo=float(lo), hi=float(hi), slope=slope)
