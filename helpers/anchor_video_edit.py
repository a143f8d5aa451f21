"""Anchor-based video editing (AVE): edit a few keyframes with an image editor, propagate them with a
motion-guided generator that keeps the edited keyframes as fixed anchors.

Everything here is small and built for the chapter ``11_anchor_video_edit`` (a reconstruction from the paper's
abstract): synthetic clips with exact optical flow (a window panning over a scikit-image photograph, with a moving
textured sprite that occludes it), a stochastic toy image editor with a quality knob, keyframe selection, composed
(tiled) editing, flow warping, a small U-Net propagator trained self-supervised on unedited clips, the baselines
and the three metrics (instruction following, temporal consistency, content fidelity).

Conventions: a clip is a float tensor (T, 3, H, W) in [0, 1]; ``flow[t]`` (2, H, W) is the *backward* flow from
frame t+1 to frame t: pixel p of frame t+1 shows what frame t showed at ``p + flow[t][:, p]`` (dx, dy);
``valid[t]`` (H, W) marks pixels of frame t+1 that were visible in frame t at that place (not disoccluded).
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
    "IMAGES", "load_image", "Clip", "make_clip", "warp", "warp_chain", "psnr", "warp_error",
    "uniform_keyframes", "motion_keyframes", "EditParams", "Editor", "apply_edit", "Propagator",
    "propagator_inputs", "propagate", "flow_warp_propagate", "random_appearance_edit",
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
    info: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        V.tensor("frames", self.frames, ndim=4, dtype="float", nonempty=True)
        T, C, H, W = self.frames.shape
        if T < 2 or C != 3:
            raise ValueError(f"frames must have shape (T >= 2, 3, H, W), got {tuple(self.frames.shape)}")
        V.tensor("masks", self.masks, shape=(T, H, W), dtype="bool")
        V.tensor("flow", self.flow, shape=(T - 1, 2, H, W), dtype="float")
        V.tensor("valid", self.valid, shape=(T - 1, H, W), dtype="bool")
        V.instance("info", self.info, dict)


def _clip(clip: object) -> Clip:
    return V.instance("clip", clip, Clip)


def _image(name: str, x: object, clip: Clip) -> Tensor:
    """A finite float (3, H, W) image of the clip's size."""
    return V.tensor(name, x, shape=(3, *clip.frames.shape[-2:]), dtype="float")


def _anchors(anchors: object, clip: Clip) -> dict[int, Tensor]:
    V.instance("anchors", anchors, dict)
    if not anchors:
        raise ValueError("anchors must hold at least one anchor image (frame index -> (3, H, W)), got {}")
    T = len(clip.frames)
    for k, img in anchors.items():
        V.index("anchors key", k, T)
        _image(f"anchors[{k}]", img, clip)
    return anchors


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
    img = img[::scale, ::scale]  # keep some texture at our small size
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
    s = sprite_size or size // 3
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
# Keyframes
# ----------------------------------------------------------------------------------------------------------------
def uniform_keyframes(T: int, m: int) -> list[int]:
    """``m`` keyframes spread evenly over ``T`` frames, always including the first (and the last when m > 1)."""
    T = V.integer("T", T, min=1)
    m = V.integer("m", m, min=1, max=T)
    if m == 1:
        return [0]
    return sorted({round(i * (T - 1) / (m - 1)) for i in range(m)})


def motion_keyframes(clip: Clip, m: int) -> list[int]:
    """``m`` keyframes at equal steps of cumulative motion (mean flow magnitude plus disoccluded fraction)."""
    T = len(_clip(clip).frames)
    m = V.integer("m", m, min=1, max=T)
    step = clip.flow.norm(dim=1).mean((1, 2)) + 10 * (~clip.valid).float().mean((1, 2))
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
INSTRUCTIONS = ("recolor_object", "restyle_background")


@dataclass(frozen=True)
class EditParams:
    """The stochastic parameters one editor call draws (shared by everything edited in that call)."""

    instruction: str
    hue: float  # hue rotation (turns)
    gain: float  # saturation/brightness gain
    levels: int  # posterization levels (background restyle)

    def __post_init__(self) -> None:
        V.one_of("instruction", self.instruction, INSTRUCTIONS)
        object.__setattr__(self, "hue", V.number("hue", self.hue))
        object.__setattr__(self, "gain", V.nonnegative("gain", self.gain))
        object.__setattr__(self, "levels", V.integer("levels", self.levels, min=1))


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


def apply_edit(frame: Tensor, mask: Tensor, p: EditParams) -> Tensor:
    """Apply edit ``p`` to one frame (3, H, W) with the object's mask (H, W): a deterministic, pixelwise map."""
    V.tensor("frame", frame, ndim=3, dtype="float")
    if frame.shape[0] != 3:
        raise ValueError(f"frame must have shape (3, H, W), got {tuple(frame.shape)}")
    V.tensor("mask", mask, shape=frame.shape[1:], dtype="bool")
    V.instance("p", p, EditParams)
    return _apply_edit(frame, mask, p)


def _apply_edit(frame: Tensor, mask: Tensor, p: EditParams) -> Tensor:
    if p.instruction == "recolor_object":
        grey = frame.mean(0, keepdim=True)
        rec = (grey + p.gain * (_hue_rotate(frame, p.hue) - grey)).clamp(0, 1)
        return torch.where(mask[None], rec, frame)
    if p.instruction == "restyle_background":
        sty = _hue_rotate(frame, p.hue)
        sty = (torch.floor(sty.clamp(0, 1) * p.levels) + 0.5) / p.levels
        sty = (0.5 + p.gain * (sty - 0.5)).clamp(0, 1)
        return torch.where(mask[None], frame, sty)
    raise ValueError(f"instruction must be one of {INSTRUCTIONS}, got {p.instruction!r}")


class Editor:
    """A stochastic image editor. Each call draws one :class:`EditParams` (hue jitter, gain, levels) and applies
    it. ``quality`` in [0, 1] emulates weaker editors: noise, blur and a hue bias grow as quality drops.

    ``edit(frames, masks, instruction)`` with several frames is *composed editing*: the frames are tiled into one
    canvas and edited in one call, so they share the parameters.
    """

    def __init__(self, seed: int = 0, quality: float = 1.0) -> None:
        seed = V.seed("seed", seed)
        quality = V.probability("quality", quality)
        self.rng = np.random.default_rng(seed)
        self.quality = quality
        self.calls: list[EditParams] = []

    def draw(self, instruction: str) -> EditParams:
        """Draw one call's parameters for ``instruction``."""
        V.one_of("instruction", instruction, INSTRUCTIONS)
        hue = 0.33 + self.rng.uniform(-0.08, 0.08)
        gain = 1.3 + self.rng.uniform(-0.2, 0.2)
        levels = int(self.rng.integers(3, 6))
        return EditParams(instruction, float(hue), float(gain), levels)

    @staticmethod
    def ideal(instruction: str) -> EditParams:
        """The parameters of the instruction without jitter (what an ideal editor would do)."""
        return EditParams(instruction, 0.33, 1.3, 4)

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

    def edit(self, frames: Tensor, masks: Tensor, instruction: str) -> tuple[Tensor, EditParams]:
        """One editor call on (n, 3, H, W) frames tiled side by side; returns the edited frames and the params."""
        V.tensor("frames", frames, ndim=(3, 4), dtype="float", nonempty=True)
        V.tensor("masks", masks, dtype="bool")
        V.one_of("instruction", instruction, INSTRUCTIONS)
        if frames.dim() == 3:
            frames, masks = frames[None], masks[None]
        if frames.shape[1] != 3:
            raise ValueError(f"frames must have shape (n, 3, H, W), got {tuple(frames.shape)}")
        if masks.shape != (frames.shape[0], *frames.shape[2:]):
            raise ValueError(f"masks must have shape (n, H, W) = {(frames.shape[0], *frames.shape[2:])}, "
                             f"got {tuple(masks.shape)}")
        n, _, H, W = frames.shape
        canvas = torch.cat(list(frames), dim=-1)  # tile: (3, H, n*W)
        cmask = torch.cat(list(masks), dim=-1)
        p = self.draw(instruction)
        self.calls.append(p)
        out = self.degrade(_apply_edit(canvas, cmask, p))
        return torch.stack(out.split(W, dim=-1)), p


# ----------------------------------------------------------------------------------------------------------------
# The propagator
# ----------------------------------------------------------------------------------------------------------------
def _conv(i: int, o: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(i, o, 3, padding=1), nn.GroupNorm(4, o), nn.SiLU(),
                         nn.Conv2d(o, o, 3, padding=1), nn.GroupNorm(4, o), nn.SiLU())


class Propagator(nn.Module):
    """A small two-level U-Net: from the two nearest anchors warped to frame t (with validity masks), the source
    frame t and the normalized time offset, predict frame t of the edited video.

    Input channels: prev anchor (3), next anchor (3), their validity (2), source frame (3), the source frame's
    version of the two anchors' frames warped the same way (3 + 3), and the time fraction (1) = 18.
    """

    IN_CH = 18

    def __init__(self, width: int = 24) -> None:
        width = V.integer("width", width, min=4)
        if width % 4:
            raise ValueError(f"width must be a multiple of 4 (GroupNorm with 4 groups), got {width}")
        super().__init__()
        self.d1 = _conv(self.IN_CH, width)
        self.d2 = _conv(width, 2 * width)
        self.mid = _conv(2 * width, 2 * width)
        self.u1 = _conv(3 * width, width)
        self.out = nn.Conv2d(width, 3, 1)

    def forward(self, x: Tensor) -> Tensor:
        """Frames (n, 3, H, W) from inputs (n, 18, H, W), H and W even."""
        V.tensor("x", x, ndim=4, dtype="float")
        if x.shape[1] != self.IN_CH or x.shape[2] % 2 or x.shape[3] % 2:
            raise ValueError(f"x must have shape (n, {self.IN_CH}, H, W) with H, W even, got {tuple(x.shape)}")
        h1 = self.d1(x)
        h2 = self.mid(self.d2(F.avg_pool2d(h1, 2)))
        h = self.u1(torch.cat([h1, F.interpolate(h2, scale_factor=2, mode="nearest")], 1))
        # a residual on the blend of the warped anchors (or the source frame where neither is valid)
        return (_base(x) + self.out(h)).clamp(0, 1)


def _base(x: Tensor) -> Tensor:
    a, b, va, vb, src = x[:, 0:3], x[:, 3:6], x[:, 6:7], x[:, 7:8], x[:, 8:11]
    w = va + vb
    return torch.where(w > 0, (a * va + b * vb) / w.clamp(min=1e-6), src)


def propagator_inputs(anchors: dict[int, Tensor], clip: Clip, t: int) -> Tensor:
    """The propagator's input for frame ``t`` (18, H, W) from anchor images keyed by frame index."""
    _anchors(anchors, _clip(clip))
    t = V.index("t", t, len(clip.frames))
    return _propagator_inputs(anchors, clip, t)


def _propagator_inputs(anchors: dict[int, Tensor], clip: Clip, t: int) -> Tensor:
    keys = sorted(anchors)
    prev = max([k for k in keys if k <= t], default=None)
    nxt = min([k for k in keys if k >= t], default=None)
    prev = prev if prev is not None else nxt
    nxt = nxt if nxt is not None else prev
    parts = []
    for k in (prev, nxt):
        img, ok = _warp_chain(anchors[k], clip, k, t)
        src_img, _ = _warp_chain(clip.frames[k], clip, k, t)
        parts.append((img * ok, ok.float()[None], src_img * ok))
    frac = torch.full((1, *clip.frames.shape[-2:]), (t - prev) / (nxt - prev) if nxt != prev else 0.0)
    return torch.cat([parts[0][0], parts[1][0], parts[0][1], parts[1][1], clip.frames[t], parts[0][2],
                      parts[1][2], frac], 0)


@torch.no_grad()
def propagate(model: Propagator, anchors: dict[int, Tensor], clip: Clip) -> Tensor:
    """Generate every frame; anchor frames are held fixed (returned exactly as given)."""
    V.instance("model", model, Propagator)
    _anchors(anchors, _clip(clip))
    T = len(clip.frames)
    out = torch.empty_like(clip.frames)
    rest = [t for t in range(T) if t not in anchors]
    if rest:
        x = torch.stack([_propagator_inputs(anchors, clip, t) for t in rest])
        out[rest] = model.eval()(x)
    for k, img in anchors.items():
        out[k] = img
    return out


@torch.no_grad()
def flow_warp_propagate(anchors: dict[int, Tensor], clip: Clip) -> Tensor:
    """Baseline: blend the two nearest anchors warped along the flow; the source frame fills holes."""
    _anchors(anchors, _clip(clip))
    out = torch.empty_like(clip.frames)
    for t in range(len(clip.frames)):
        out[t] = anchors[t] if t in anchors else _base(_propagator_inputs(anchors, clip, t)[None])[0]
    return out


def random_appearance_edit(frames: Tensor, masks: Tensor, rng: np.random.Generator) -> Tensor:
    """Self-supervised training target: one random pixelwise appearance change (hue, gain, posterize) applied to
    the object or the background of a whole *unedited* clip. No editor and no edited pairs are involved."""
    V.tensor("frames", frames, ndim=4, dtype="float")
    if frames.shape[1] != 3:
        raise ValueError(f"frames must have shape (T, 3, H, W), got {tuple(frames.shape)}")
    V.tensor("masks", masks, shape=(frames.shape[0], *frames.shape[2:]), dtype="bool")
    V.instance("rng", rng, np.random.Generator)
    p = EditParams(str(rng.choice(INSTRUCTIONS)), float(rng.uniform(0, 1)), float(rng.uniform(0.6, 1.6)),
                   int(rng.integers(3, 8)))
    return torch.stack([_apply_edit(f, m, p) for f, m in zip(frames, masks)])

