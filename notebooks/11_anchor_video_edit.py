# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Anchor-based video editing: edit a few keyframes, let a motion-guided generator fill in the rest
#
# Image editors are far ahead of video editors. The paper's idea is to not train a video editor at all: pick a
# few **keyframes**, edit them **together** with a strong image editor (one "composed" call, so the edits agree),
# then let a **motion-guided image-to-video generator** produce every other frame while the edited keyframes
# stay fixed as **anchors**. The generator only has to propagate, which it can learn from ordinary, unedited
# videos.
#
# This chapter builds both stages at toy scale and asks where the generator earns its keep. Warping the edited
# keyframes along the optical flow already gets most pixels right; what warping cannot do is fill in what no
# keyframe showed (*disoccluded* pixels), and it inherits every error of the estimated flow. So motion here is
# **estimated** from the frames (TV-L1), exactly as a real system must, and every metric is split into
# pixels some anchor saw and pixels none did. The ground-truth flow of our synthetic clips is used only to score.
#
# | | the paper | this notebook |
# |---|---|---|
# | videos | IVEBench, VIE-Bench clips | 12-frame 32×32 clips panning over scikit-image photographs, with a moving textured disk |
# | image editor | a strong instruction-following editor | a toy stochastic editor whose choices depend on the image it sees (stripes on the object, restyle the background) |
# | propagator | a motion-guided image-to-video diffusion model | a small conditional flow-matching U-Net over frames, anchors replaced at every sampling step |
# | motion guidance | estimated from the source video | TV-L1 optical flow (`skimage.registration.optical_flow_tvl1`) with a forward-backward occlusion check |
# | training | source videos | 48 unedited clips, the model rebuilds each from its own keyframes (stored checkpoint, 3 seeds) |
# | hardware | GPUs | 2 CPU cores, a few minutes |
#
# :::{note}
# **What is reconstructed.** Only the abstract is public. The two-stage decomposition (composed keyframe editing,
# then a motion-guided generator with the edited keyframes as fixed anchors, trained without editing pairs) is
# the paper's. **Our reconstruction:** the anchor replacement rule during sampling (the noised keyframe replaces
# the anchor frame's state at every step, as in inpainting with diffusion models), the conditioning of the
# generator (flow-warped anchors, flows to the neighbouring frames, the neighbours' current states), the
# self-supervised objective, tiling as the way to compose edits, the toy editor, the metrics and every size.
# :::

# %% tags=["hide-input"]
# Colab bootstrap: install this book's `helpers` package in Colab; do nothing elsewhere.
import importlib.util
import subprocess
import sys

if "google.colab" in sys.modules and importlib.util.find_spec("helpers") is None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "neurips2026-executed-helpers[image] @ "
            "git+https://github.com/neurips2026-executed/book@main",
        ],
        check=True,
    )

# %% [markdown]
# ## Parameters

# %% tags=["parameters"]
quick = False
seed = 0  # first of three seeds (model, test clips, editor draws, sampling noise)
T = 12  # frames per clip
size = 32  # pixels
n_test_clips = 6
n_diag_clips = 3  # test clips per seed in the diagnosis of section 7
n_anchors = 3
sample_steps = 8  # Euler steps of the flow-matching sampler

# %% tags=["hide-input"]
import json

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch
from IPython.display import Markdown, display
from tqdm.auto import tqdm

from helpers import anchor_video_edit as ave
from helpers import checkpoints, claims, plotting, repro, scripts, train

seeds = [seed] if quick else [seed, seed + 1, seed + 2]
if quick:
    n_test_clips = 2

# small convolutions: one thread is as fast and does not fight for cores
env = repro.setup(seed, threads=1)
plotting.use_style()
rec = claims.ClaimsRecord(
    "11_anchor_video_edit",
    dict(
        quick=quick,
        seeds=seeds,
        T=T,
        size=size,
        n_test_clips=n_test_clips,
        n_diag_clips=n_diag_clips,
        n_anchors=n_anchors,
        sample_steps=sample_steps,
    ),
)
print(env)

# %% [markdown]
# ## 1. Clips, true motion and estimated motion
#
# A 32×32 window pans over a photograph in integer steps while a textured disk moves across it. Every motion is
# an integer shift, so the true backward flow (where each pixel of frame t+1 was in frame t) and the occlusions
# are known exactly; we use them **only to score**. Every method moves pixels with flow *estimated* from the
# grey frames by TV-L1, both directions, and trusts a pixel only where following the flow there and back
# returns home (a forward-backward check). Training clips use four photographs; test clips use two others
# (coffee, chelsea) that the propagator never saw.


# %%
def test_clips_for(s):
    return [
        ave.make_clip(ave.TEST_IMAGES[i % 2], T, size, seed=s * 10_000 + 5000 + i)
        for i in range(n_test_clips)
    ]


clips0 = test_clips_for(seeds[0])
mot0 = [ave.estimate_motion(c.frames, fast=quick) for c in clips0]

# Check: the true flow reproduces frame t+1 exactly on visible pixels.
gt_psnr = min(
    min(ave.psnr(c.frames[t + 1], ave.warp(c.frames[t], c.flow[t]), c.valid[t]), 100.0)
    for c in clips0
    for t in range(T - 1)
)
rec.check("gt_flow_warp", gt_psnr, 35.0, op=">", note="min over test frames, capped")
static = ave.make_clip("coffee", T, size, seed=seed, static=True)
rec.check("warp_error_zero_static", ave.warp_error(static.frames, static), 0.0, op="==")
d0, ok0 = ave.chain_motion(mot0[0], 3, 3)
rec.check("chain_identity", float(d0.abs().max()) == 0.0 and bool(ok0.all()))

# how good is the estimated flow? end-point error, one-step warp PSNR (visible pixels)
epe, one_step = [], []
for c, mo in zip(clips0, mot0):
    for t in range(T - 1):
        epe.append((mo.bwd[t] - c.flow[t]).norm(dim=0)[c.valid[t]].mean().item())
        one_step.append(
            ave.psnr(c.frames[t + 1], ave.warp(c.frames[t], mo.bwd[t]), c.valid[t])
        )
chain_psnr = {}
for dist in (1, 2, 3, 5):
    vals = []
    for c, mo in zip(clips0, mot0):
        disp, _ = ave.chain_motion(mo, 0, dist)
        _, ok = ave.warp_chain(c.frames[0], c, 0, dist)
        vals.append(ave.psnr(c.frames[dist], ave.warp(c.frames[0], disp), ok))
    chain_psnr[dist] = float(np.mean(vals))
print(
    f"TV-L1 end-point error {np.mean(epe):.2f} px; one-step warp PSNR "
    f"{np.mean(one_step):.1f} dB (true flow: exact)"
)
print("warping frame 0 to frame d (PSNR on truly visible pixels):", chain_psnr)

c, mo = clips0[0], mot0[0]
fig, axes = plt.subplots(3, 6, figsize=(10, 5.2))
for j, t in enumerate(range(0, T - 1, 2)):
    axes[0, j].imshow(c.frames[t].permute(1, 2, 0))
    axes[0, j].set_title(f"t={t}", fontsize=8)
    axes[1, j].imshow(mo.bwd[t, 0], cmap="coolwarm", vmin=-3, vmax=3)
    axes[2, j].imshow(c.flow[t, 0], cmap="coolwarm", vmin=-3, vmax=3)
for a in axes.flat:
    a.set_xticks([])
    a.set_yticks([])
axes[0, 0].set_ylabel("frame", fontsize=8)
axes[1, 0].set_ylabel("TV-L1 dx", fontsize=8)
axes[2, 0].set_ylabel("true dx", fontsize=8)
plt.tight_layout()
plt.show()

# %% [markdown]
# The estimated flow is good on the panning background and smeared at the disk's border, where the true flow
# jumps. Its errors compound when a keyframe is carried several frames: that is the error the generator must
# fix, on top of filling the disoccluded pixels.
#
# ## 2. Stage 1: a context-dependent editor, composed or separate
#
# The editor is stochastic, like a generative editor, and **its choices depend on the image it is shown**: the
# stripes it paints on the disk take a colour that contrasts with the surroundings and an angle set by the
# scene's brightness; the background restyle picks its hue and posterization from the background's brightness
# and contrast. The stripes are drawn in the disk's own coordinates, so the true edited video has a pattern
# that moves with the object.
#
# **Composed editing** tiles the keyframes into one canvas: the editor sees them together and settles on one
# set of parameters. **Separate editing** shows it one keyframe at a time: since the panning window shows a
# different part of the photograph in each, each keyframe gets its own colour, angle and style, and the
# propagator must then interpolate between disagreeing anchors.

# %%
INSTR = list(ave.INSTRUCTIONS)
keys = ave.uniform_keyframes(T, n_anchors)
editor = ave.Editor(seed)
kf_comp, p_comp = editor.edit(c.frames[keys], c.masks[keys], c.centers[keys], INSTR[0])
gt_comp = ave.edit_video(c.frames, c.masks, c.centers, p_comp)
shared_err = max(
    (kf_comp[i] - gt_comp[k]).abs().max().item() for i, k in enumerate(keys)
)
rec.check("composed_edit_shared", shared_err, 0.0, op="==")
kf_sep = [editor.edit(c.frames[k], c.masks[k], c.centers[k], INSTR[0]) for k in keys]
# same random draws, one keyframe at a time: the context alone changes the edit
e_ctx = ave.Editor(seed, jitter=0.0)
ctx = {e_ctx.edit(c.frames[k], c.masks[k], c.centers[k], INSTR[0])[1] for k in keys}
print(
    f"separate calls without any jitter still give {len(ctx)} different parameter sets"
)
fig, axes = plt.subplots(3, len(keys), figsize=(1.6 * len(keys), 5))
for i, k in enumerate(keys):
    axes[0, i].imshow(c.frames[k].permute(1, 2, 0))
    axes[1, i].imshow(kf_comp[i].permute(1, 2, 0))
    axes[2, i].imshow(kf_sep[i][0][0].permute(1, 2, 0))
    axes[0, i].set_title(f"keyframe {k}", fontsize=8)
for a, lab in zip(axes[:, 0], ["source", "composed", "separate"]):
    a.set_ylabel(lab, fontsize=8)
for a in axes.flat:
    a.set_xticks([])
    a.set_yticks([])
plt.tight_layout()
plt.show()

# %% [markdown]
# ## 3. Stage 2: a generative propagator trained on unedited clips
#
# The propagator is a small **conditional flow-matching** model over the frames of a clip. A frame's state moves
# from noise (τ = 0) to an image (τ = 1); for each non-anchor frame a U-Net predicts the clean frame from
# * its own noisy state and its two neighbours' states warped to it with the estimated flow (so frames are
#   generated jointly and agree with each other),
# * the two nearest anchors warped to it along the chained estimated flow, with where that warp is trusted,
# * the flows to its neighbours and its time fraction between the anchors.
#
# **Anchor replacement.** At every sampling step the anchor frames' states are overwritten by the edited
# keyframes noised to the current τ, so the other frames are always generated next to the true anchors; at the
# end the anchors are returned unchanged.
#
# **Self-supervised training.** The model learns to rebuild *unedited* source clips from their own keyframes
# (1 to 4, uniform or random) and their estimated motion; no editor, no edited pairs. Pixels no anchor covers
# weigh 5× in the loss, because that is where warping has nothing to offer. Training three seeds took about
# 38 min on our shared cores, so the default run loads them (`data/11_anchor_video_edit/make_propagators.py`);
# quick mode trains a tiny one live. A wider, longer-trained version with a loss aimed at hole borders was
# probed and did not meet the fit condition below; the same build on the filled conditioning of the variant
# below was probed next, then, after a diagnosis, the variant's size with a one-step fill loss and a
# warmup-stable-decay schedule, then that recipe with a gated residual. All four are reported under *Known
# limits*.
#
# **A labelled variant, "AVE, gated".** Where no anchor's warp is trusted (a *hole*), the conditioning
# above holds warps of the wrong surfaces. The variant (its own checkpoint `propagators_gated`, the same 48
# clips and seeds) replaces both warped anchors inside the holes by a biharmonic inpainting of the frame's
# trusted pixels, at training and at sampling time, so that its residual starts from the inpainting. It is
# the fourth recipe of *Known limits*, fixed before training (`make_propagators_onestep.py --name
# propagators_gated`): a loss on the one-step prediction in and around the holes, a warmup-stable-decay
# schedule of 3,000 steps and a **gated residual**, the prediction being the base plus a per-pixel gate times
# the residual, so that the network can return the warp or the fill unchanged where they are right. It
# replaces the round-3 variant trained on the same conditioning without these changes (*AVE, filled cond.*;
# its measurements stay in the records read under *Known limits*). Section 7 motivates it; it is not the
# paper's design but a fix a practitioner would try.


# %%
def load_propagators(name):
    """The stored propagators of one checkpoint, or (quick) a tiny one trained live."""
    cfg_ = ave.checkpoint_config(name)
    fill_, gate_ = cfg_.get("fill_holes", False), cfg_.get("gate", False)
    if quick:  # a tiny model at a constant learning rate
        cfg_.update(n_train_clips=6, steps=60, width=8)
        tr_clips, tr_mot = ave.training_clips(cfg_, fast=True)
        prop, hist = ave.train_propagator(
            [c_.frames for c_ in tr_clips],
            tr_mot,
            cfg_["steps"],
            width=cfg_["width"],
            seed=seed,
            progress=False,
            fill_holes=fill_,
            gate=gate_,
        )
        return {seed: prop}, {seed: (list(range(1, len(hist.loss) + 1)), hist.loss)}
    cfg_ = scripts.with_seeds(cfg_, seeds)  # seed 0: the committed config
    ck = checkpoints.load("11_anchor_video_edit", name, config=cfg_)
    checkpoints.require_seeds(ck, seeds)  # SEED outside the stored seeds: a clear error
    models_, curves_ = {}, {}
    for s in seeds:
        m_ = ave.Propagator(cfg_["width"], gate=gate_)
        m_.load_state_dict(
            {
                k.split(".", 1)[1]: v.float()
                for k, v in ck.tensors.items()
                if k.split(".", 1)[0] == str(s)
            }
        )
        models_[s] = m_.eval()
        h_ = ck.manifest["history"][f"loss/{s}"]
        st_ = h_["step"]  # a curve stored without its steps is numbered by point
        if st_[-1] < cfg_["steps"]:  # evenly spaced points: back to training steps
            st_ = [i * cfg_["steps"] / st_[-1] for i in st_]
        curves_[s] = (st_, h_["value"])
    return models_, curves_


models, curves = load_propagators("propagators")
models_f, curves_f = load_propagators("propagators_gated")
n_par = sum(q.numel() for q in models[seeds[0]].parameters())
fig, ax = plt.subplots(figsize=(4.5, 2.8))
for (s, (st, lc)), col in zip(curves.items(), plotting.PALETTE):
    ax.plot(st, lc, color=col, label=f"seed {s}")
    ax.plot(*curves_f[s], color=col, ls="--", lw=1)
ax.set(xlabel="step", ylabel="weighted MSE", yscale="log",
       title=f"{n_par} parameters; dashed: AVE, gated")
ax.title.set_fontsize(9)
ax.legend(fontsize=8)
plt.show()

# %% [markdown]
# ## 4. Editing test videos
#
# For each seed, test clip and instruction, the methods are:
# * **per-frame**: the editor on every frame separately (each call sees its own frame);
# * **first-frame**: one edited keyframe (frame 0) propagated by the generator (AnyV2V-style);
# * **flow warp**: the composed keyframes warped along the *same estimated flow* and blended where the warp is
#   trusted; where no warp is trusted, their average (the same information the generator has);
# * **flow warp + source**: the same, but the unedited source frame fills the untrusted pixels (information the
#   generator does not get, but a practitioner has);
# * **flow warp + inpaint**: the same, but each frame's untrusted pixels are filled by biharmonic inpainting
#   from its trusted ones (`skimage.restoration.inpaint_biharmonic`; the generator's information only);
# * **AVE separate**: the generator on keyframes edited one at a time;
# * **AVE**: the generator on the composed keyframes;
# * **AVE, gated**: the variant trained with inpainted holes in its conditioning and a gated residual, same
#   keyframes.
#
# Every method is scored against **its own** edit parameters: its ground-truth video is its own call's
# parameters applied to every frame with the true masks (per-frame: each frame's own call). AVE separate has no
# single set, so it is scored only for consistency. *Video PSNR* is computed on non-anchor frames, split into
# **visible** pixels (the true motion carries them from the nearest anchor before or after) and **disoccluded**
# ones (no anchor showed that surface). *Temporal consistency* is the warping error along the true flow on
# visible pixels (lower is better). *Content fidelity* is PSNR and SSIM against the source **outside** the
# edited region.


# %%
def score(video, clip, gt, keys, vis, ins):
    """Sums of squared errors and counts, so PSNRs can be pooled over videos."""
    rest = torch.tensor([t not in keys for t in range(T)])
    inside = ave.edit_region(clip, ins)
    out = ~inside
    d = dict(
        warp_err=ave.warp_error(video, clip),
        ssim_out=ave.ssim_outside(video, clip.frames, out),
        fid_se=(video - clip.frames).pow(2).mean(1)[out].sum().item(),
        fid_n=int(out.sum()),
    )
    # fidelity outside the edit: pixels an anchor saw / none saw (non-anchor frames)
    for name, m in (("fidv", vis), ("fidd", ~vis)):
        m = m & out & rest[:, None, None]
        d[f"{name}_se"] = (video - clip.frames).pow(2).mean(1)[m].sum().item()
        d[f"{name}_n"] = int(m.sum())
    if gt is not None:
        # instruction following: the edited region of the non-anchor frames
        in_mask = inside & rest[:, None, None]
        d["in_se"], d["in_n"] = ave.masked_errors(video, gt, in_mask)
        se = (video - gt).pow(2).mean(1)
        for name, m in (
            ("vis", vis & rest[:, None, None]),
            ("dis", ~vis & rest[:, None, None]),
        ):
            d[f"{name}_se"], d[f"{name}_n"] = se[m].sum().item(), int(m.sum())
    return d


def warp_inpaint_frame(anchors, mot, t):
    """Frame t of ave.flow_warp_propagate(..., inpaint=True); only t is inpainted."""
    from skimage.restoration import inpaint_biharmonic

    v = ave.flow_warp_propagate(anchors, mot)[t]
    hole = ave.anchor_condition(anchors, mot)[t, 6:8].sum(0) == 0
    if t in anchors or not hole.any() or hole.all():
        return v
    img = inpaint_biharmonic(
        v.permute(1, 2, 0).double().numpy(), hole.numpy(), channel_axis=-1
    )
    return torch.tensor(img, dtype=v.dtype).permute(2, 0, 1).clamp(0, 1)


# %% [markdown]
# The videos of one clip and instruction: every method from the same composed keyframes (the first-frame
# propagator from frame 0's edit), plus the two references that only the diagnosis uses.


# %%
def clip_videos(model, model_f, clip, mot, ins, editor, s):
    """keys, visibility, anchors and {method: (video, ground truth, its keyframes)}."""
    keys = ave.uniform_keyframes(T, n_anchors)
    vis = ave.visibility(clip, keys)
    fr, mk, ce = clip.frames, clip.masks, clip.centers
    kf, p = editor.edit(fr[keys], mk[keys], ce[keys], ins)
    anchors = dict(zip(keys, kf))
    gt = ave.edit_video(fr, mk, ce, p)
    per = [editor.edit(fr[t], mk[t], ce[t], ins) for t in range(T)]
    f0, p0 = editor.edit(fr[:1], mk[:1], ce[:1], ins)
    sep = {k: editor.edit(fr[k], mk[k], ce[k], ins)[0][0] for k in keys}
    per_v = torch.cat([v for v, _ in per])
    videos = {
        "per-frame": (per_v, per_v, keys),
        "first-frame": (
            ave.propagate(model, {0: f0[0]}, mot, sample_steps, seed=s),
            ave.edit_video(fr, mk, ce, p0),
            [0],
        ),
        "flow warp": (ave.flow_warp_propagate(anchors, mot), gt, keys),
        "flow warp + source": (
            ave.flow_warp_propagate(anchors, mot, fill=fr),
            gt,
            keys,
        ),
        "flow warp + inpaint": (
            ave.flow_warp_propagate(anchors, mot, inpaint=True),
            gt,
            keys,
        ),
        "AVE separate": (
            ave.propagate(model, sep, mot, sample_steps, seed=s),
            None,
            keys,
        ),
        "AVE": (ave.propagate(model, anchors, mot, sample_steps, seed=s), gt, keys),
        "AVE, gated": (
            ave.propagate(model_f, anchors, mot, sample_steps, seed=s, fill_holes=True),
            gt,
            keys,
        ),
        # noise reference: the same anchors, another draw of the sampling noise
        "AVE, other noise": (
            ave.propagate(model, anchors, mot, sample_steps, seed=s + 100),
            gt,
            keys,
        ),
        # oracle for the diagnosis only: the same model and anchors, the true motion
        "AVE, true flow": (
            ave.propagate(model, anchors, ave.true_motion(clip), sample_steps, seed=s),
            gt,
            keys,
        ),
    }
    return keys, vis, anchors, videos


# %% [markdown]
# Scoring one clip and instruction, with drift: the generator from 1, 2, 3 or 5 composed anchors, PSNR at the
# farthest frame, beside the strongest warping baseline from the same keyframes.


# %%
def drift_of(model, clip, mot, ins, editor, s):
    """MSE at the farthest frame from m anchors: the generator's, warp + inpaint's."""
    fr, mk, ce = clip.frames, clip.masks, clip.centers
    drift, drift_w = {}, {}
    for m in (1, 2, 3, 5):
        ks = ave.uniform_keyframes(T, m)
        kf_m, p_m = editor.edit(fr[ks], mk[ks], ce[ks], ins)
        vid = ave.propagate(model, dict(zip(ks, kf_m)), mot, sample_steps, seed=s)
        far = max(
            (t for t in range(T) if t not in ks),
            key=lambda t: min(abs(t - k) for k in ks),
        )
        g_m = ave.edit_video(fr, mk, ce, p_m)
        drift[m] = (vid[far] - g_m[far]).pow(2).mean().item()
        w_far = warp_inpaint_frame(dict(zip(ks, kf_m)), mot, far)
        drift_w[m] = (w_far - g_m[far]).pow(2).mean().item()
    return drift, drift_w


def run_clip(model, model_f, clip, mot, ins, editor, s):
    keys, vis, anchors, videos = clip_videos(
        model, model_f, clip, mot, ins, editor, s
    )
    rows = []
    for name, (vid, g, ks) in videos.items():
        v_ = vis if ks == keys else ave.visibility(clip, ks)
        rows.append(dict(method=name, **score(vid, clip, g, ks, v_, ins)))
    drift, drift_w = drift_of(model, clip, mot, ins, editor, s)
    anchor_dev = max(
        (videos["AVE"][0][k] - a).abs().max().item() for k, a in anchors.items()
    )
    return rows, (drift, drift_w), anchor_dev, videos, vis


# %% [markdown]
# Composition with an editor whose disagreement is not designed in: the same toy editor with its random jitter
# turned off (`Editor(jitter=0)`), so that separate calls disagree only through what each keyframe shows it.
# AVE's warping error from its composed and from its separate keyframe edits (a descriptive reading, beside
# the check `composition_helps`, which uses the jittered editor of the methods above).


# %%
def context_only(model, clip, mot, ins, s):
    """AVE's warping error from composed and separate edits by a jitter-free editor."""
    keys = ave.uniform_keyframes(T, n_anchors)
    fr, mk, ce = clip.frames, clip.masks, clip.centers
    ed = ave.Editor(s + 1, jitter=0.0)
    kf, _ = ed.edit(fr[keys], mk[keys], ce[keys], ins)
    sep = {k: ed.edit(fr[k], mk[k], ce[k], ins)[0][0] for k in keys}
    return dict(
        composed=ave.warp_error(
            ave.propagate(model, dict(zip(keys, kf)), mot, sample_steps, seed=s), clip
        ),
        separate=ave.warp_error(
            ave.propagate(model, sep, mot, sample_steps, seed=s), clip
        ),
    )


# %% [markdown]
# Every seed, clip and instruction:

# %%
rows, drift_rows, anchor_dev, example, ctx_rows = [], [], 0.0, {}, []
for s in seeds:
    clips = clips0 if s == seeds[0] else test_clips_for(s)
    mots = mot0 if s == seeds[0] else [ave.estimate_motion(c_.frames) for c_ in clips]
    editor = ave.Editor(s + 1)
    for i, (clip, mot) in enumerate(tqdm(list(zip(clips, mots)), desc=f"seed {s}")):
        for ins in INSTR:
            r, dr, dev, videos, vis = run_clip(
                models[s], models_f[s], clip, mot, ins, editor, s
            )
            anchor_dev = max(anchor_dev, dev)
            rows += [dict(seed=s, clip=i, instruction=ins, **x) for x in r]
            drift_rows += [
                dict(seed=s, m=m, mse=dr[0][m], mse_warp=dr[1][m]) for m in dr[0]
            ]
            if s == seeds[0] and i == 0:
                example[ins] = (videos, vis)
            ctx_rows.append(dict(seed=s, **context_only(models[s], clip, mot, ins, s)))
rec.check("anchors_fixed", anchor_dev, 0.0, op="==", note="max |AVE[k] - keyframe k|")
# the one-frame inpainting used for the drift baseline is ave's inpainting baseline
_an = {k: clips0[0].frames[k] for k in ave.uniform_keyframes(T, 2)}
_full = ave.flow_warp_propagate(_an, mot0[0], inpaint=True)
assert torch.allclose(warp_inpaint_frame(_an, mot0[0], 5), _full[5], atol=1e-6)
res = pd.DataFrame(rows)


# %% [markdown]
# Squared errors pooled over the clips of a seed, then the seeds averaged:

# %%
def pooled(df):
    out = {}
    for name in ("vis", "dis", "in", "fid", "fidv", "fidd"):
        if f"{name}_se" in df:
            mse = df[f"{name}_se"].sum() / max(df[f"{name}_n"].sum(), 1)
            out[f"{name}_psnr"] = 10 * np.log10(1 / max(mse, 1e-12))
    out["warp_err"] = df["warp_err"].mean()
    out["ssim_out"] = df["ssim_out"].mean()
    return pd.Series(out)


METHODS = [
    "per-frame",
    "first-frame",
    "flow warp",
    "flow warp + source",
    "flow warp + inpaint",
    "AVE separate",
    "AVE",
    "AVE, gated",
    "AVE, true flow",
]
per_seed = res.groupby(["method", "seed"]).apply(pooled, include_groups=False)
summary = per_seed.groupby("method").mean().loc[METHODS]
summary.loc[["per-frame", "AVE separate"], ["vis_psnr", "dis_psnr", "in_psnr"]] = np.nan
display(summary.round(3))

# %%
fig, axes = plt.subplots(1, 3, figsize=(11, 3))
sub = ["first-frame", "flow warp", "flow warp + source", "flow warp + inpaint", "AVE",
       "AVE, gated"]
x = np.arange(len(sub))
axes[0].bar(x - 0.2, summary.loc[sub, "vis_psnr"], 0.4, label="visible")
axes[0].bar(x + 0.2, summary.loc[sub, "dis_psnr"], 0.4, label="disoccluded")
axes[0].set_xticks(x, sub, rotation=20, fontsize=8)
axes[0].set_title("PSNR vs own ground truth (↑)", fontsize=9)
axes[0].legend(fontsize=8)
axes[1].bar(METHODS, summary["warp_err"], color=plotting.PALETTE[: len(METHODS)])
axes[1].set_yscale("log")
axes[1].set_title("warping error along the true flow (↓)", fontsize=9)
axes[1].tick_params(axis="x", labelsize=8, rotation=30)
axes[2].bar(METHODS, summary["fid_psnr"], color=plotting.PALETTE[: len(METHODS)])
axes[2].axhline(30, color="k", lw=0.8, ls="--")
axes[2].set_title("PSNR vs source outside the edit (↑)", fontsize=9)
axes[2].tick_params(axis="x", labelsize=8, rotation=30)
plt.tight_layout()
plt.show()

# %% tags=["remove-input"]
def col(m, c):
    return per_seed.xs(m, level="method")[c]


def span(v, fmt="+.1f"):
    v = list(v)
    return f"{min(v):{fmt}} to {max(v):{fmt}}" if len(v) > 1 else f"{v[0]:{fmt}}"


def sign_word(v, pos, neg, mixed):
    return pos if min(v) > 0 else neg if max(v) < 0 else mixed


S = summary
vis_d = col("AVE", "vis_psnr") - col("flow warp", "vis_psnr")
dis_d = {m: col("AVE", "dis_psnr") - col(m, "dis_psnr")
         for m in ("flow warp", "flow warp + source", "flow warp + inpaint")}
fill_d = col("AVE, gated", "dis_psnr") - col("flow warp + inpaint", "dis_psnr")
sep_rel = (col("AVE separate", "warp_err") - col("AVE", "warp_err")) / col("AVE", "warp_err")
noise_d = (col("AVE, other noise", "warp_err") - col("AVE", "warp_err")).abs() / col("AVE", "warp_err")
ctx_w = pd.DataFrame(ctx_rows).groupby("seed").mean()
ctx_rel = (ctx_w["separate"] - ctx_w["composed"]) / ctx_w["composed"]
inp_d = dis_d["flow warp + inpaint"]
in_d = col("AVE", "in_psnr") - col("flow warp + inpaint", "in_psnr")
inp_word = sign_word(
    inp_d, "the generator fills holes better than a smooth interpolation.",
    "at this scale the generator does not continue the anchors' surroundings as well as a "
    "smooth interpolation does; section 7 measures why.", "neither is better at every seed.")
display(Markdown(f"""
**Reading the table** (this run: {n_test_clips} test clips × {len(INSTR)} instructions × {len(seeds)}
seed(s), per-seed differences; *AVE, true flow* is an oracle for diagnosis, not a method). On pixels some
anchor saw, AVE minus plain warping with the same flow is {span(vis_d, '+.2f')} dB: the generator
{sign_word(vis_d, 'improves on', 'loses to', 'is better at some seeds and worse at others than')} the warp
there. On disoccluded pixels it
is {span(dis_d['flow warp'])} dB against plain warping (whose holes can only hold a mix of the wrong
surfaces) and {span(dis_d['flow warp + source'])} dB against warping whose holes hold the *unedited* source
frame. Against a practitioner's cheapest fix, **biharmonic inpainting** of the holes from the warped pixels
around them, it is {span(inp_d)} dB ({S.loc['AVE', 'dis_psnr']:.1f} vs
{S.loc['flow warp + inpaint', 'dis_psnr']:.1f} dB):
{inp_word} The variant trained with the inpainted holes in its
conditioning and a gated residual (*AVE, gated*) is {span(fill_d)} dB against the same baseline
({S.loc['AVE, gated', 'dis_psnr']:.1f} vs {S.loc['flow warp + inpaint', 'dis_psnr']:.1f} dB).

**Inside the edited region** (instruction following: the object for the stripes, the background for the
restyle) AVE reaches {S.loc['AVE', 'in_psnr']:.1f} dB against the intended edit, plain warping
{S.loc['flow warp', 'in_psnr']:.1f} dB and warp + inpaint {S.loc['flow warp + inpaint', 'in_psnr']:.1f} dB
(per seed, AVE minus warp + inpaint: {span(in_d, '+.2f')} dB).

Per-frame editing is exact outside the edit (its fidelity PSNR is capped at 120 dB) but flickers: each call
settles on its own stripes and style. AVE's warping error is {S.loc['AVE', 'warp_err']:.3f} against
per-frame editing's {S.loc['per-frame', 'warp_err']:.3f} and plain warping's
{S.loc['flow warp', 'warp_err']:.3f}. Editing the keyframes separately changes AVE's warping error by
{span(100 * sep_rel, '+.0f')}% compared with composing them, against
{span(100 * noise_d, '.1f')}% from another draw of the sampling noise. That separate calls disagree is built into
our toy editor (its choices depend on the frame it sees, plus a random draw per call), and any
propagator that keeps its anchors carries it into the video: the check `composition_helps` only confirms
that the effect is larger than the sampling noise; its size, not its existence, is the measurement. With the
editor's random jitter turned off, so that separate calls disagree only through what each keyframe shows,
separate editing changes AVE's warping error by {span(100 * ctx_rel, '+.0f')}% (per seed).

**Content fidelity and the estimated flow.** Outside the edit AVE reaches {S.loc['AVE', 'fid_psnr']:.1f} dB
against the source (the claim's bar is 30 dB); warping with holes filled from the source reaches
{S.loc['flow warp + source', 'fid_psnr']:.1f} dB. The oracle splits the cause: giving the same model the
*true* flow moves the pixels an anchor saw from {S.loc['AVE', 'fidv_psnr']:.1f} to
{S.loc['AVE, true flow', 'fidv_psnr']:.1f} dB (the flow's share) and the pixels no anchor saw from
{S.loc['AVE', 'fidd_psnr']:.1f} to {S.loc['AVE, true flow', 'fidd_psnr']:.1f} dB (the generator's invented
background), for {S.loc['AVE, true flow', 'fid_psnr']:.1f} dB in all.

Filmstrips for the first test clip: the source, the disoccluded pixels (white: no anchor showed them), flow
warping, AVE and the ground-truth edited video. Anchors are frames {', '.join(map(str, keys))}.
"""))


# %%
def filmstrip(ins, frames_idx=(1, 2, 3, 4, 7, 9)):
    videos, vis = example[ins]
    rows_ = [
        ("source", test_clips_for(seeds[0])[0].frames),
        ("disoccluded", (~vis).float()[:, None].expand(-1, 3, -1, -1)),
        ("flow warp", videos["flow warp"][0]),
        ("AVE", videos["AVE"][0]),
        ("AVE separate", videos["AVE separate"][0]),
        ("GT edit", videos["AVE"][1]),
    ]
    fig, axes = plt.subplots(
        len(rows_), len(frames_idx), figsize=(1.3 * len(frames_idx), 1.3 * len(rows_))
    )
    for r, (name, vid) in enumerate(rows_):
        for j, t in enumerate(frames_idx):
            axes[r, j].imshow(vid[t].permute(1, 2, 0).clamp(0, 1))
            axes[r, j].set_xticks([])
            axes[r, j].set_yticks([])
            if r == 0:
                axes[r, j].set_title(f"t={t}", fontsize=8)
        axes[r, 0].set_ylabel(name, fontsize=8)
    plt.tight_layout()
    plt.show()


filmstrip("stripe_object")
filmstrip("restyle_background")

# %% [markdown]
# ### The videos, frame by frame
#
# The slider plays the first test clip's edited videos (stripes on the disk) one frame at a time; it works in
# the static page.


# %%
def draw_frame(fig, t):
    videos, _ = example["stripe_object"]
    rows_ = [("source", clips0[0].frames)] + [(m, videos[m][0]) for m in METHODS]
    axes = fig.subplots(1, len(rows_))
    for ax, (name, vid) in zip(axes, rows_):
        ax.imshow(vid[t].permute(1, 2, 0).clamp(0, 1))
        ax.set_title(name, fontsize=7)
        ax.axis("off")


plotting.static_slider(range(T), draw_frame, figsize=(11, 2.0), label="frame")

# %% [markdown]
# Live (in Jupyter or Colab): choose the edit and the frame; every method's video of the first test clip.


# %%
def show_frame(edit="stripe_object", t=0):
    videos, _ = example[edit]
    rows_ = [("source", clips0[0].frames)] + [(m, videos[m][0]) for m in METHODS]
    fig, axes = plt.subplots(1, len(rows_), figsize=(11, 2.0))
    for ax, (name, vid) in zip(axes, rows_):
        ax.imshow(vid[t].permute(1, 2, 0).clamp(0, 1))
        ax.set_title(name, fontsize=7)
        ax.axis("off")
    plt.show()


plotting.live_controls(show_frame, edit=list(example), t=(0, T - 1))

# %% [markdown]
# ## 5. Drift against the number of anchors
#
# With one anchor everything frame 0 did not show must be invented, and the estimated flow's errors compound
# with distance. We vary the number of composed keyframes and measure the PSNR against the ground-truth edited
# video at the non-anchor frame farthest from any anchor.
#
# More anchors put every frame closer to one, so *any* propagator drifts less with more of them: that bar
# is the geometry's, so `anchors_reduce_drift` is a check, not a claim. What says something about the
# generator is the comparison with the strongest warping baseline (flow warp + inpaint) from the same
# keyframes, drawn dashed: the claim `drift_vs_warping`.

# %%
drd = pd.DataFrame(drift_rows).groupby(["seed", "m"])[["mse", "mse_warp"]].mean()
drift_psnr = (10 * np.log10(1 / drd["mse"])).unstack("m")
drift_warp = (10 * np.log10(1 / drd["mse_warp"])).unstack("m")
display(
    pd.concat({"AVE": drift_psnr, "flow warp + inpaint": drift_warp}, axis=1).round(2)
)
fig, ax = plt.subplots(figsize=(4.5, 3))
for s, col in zip(seeds, plotting.PALETTE):
    ax.plot(drift_psnr.columns, drift_psnr.loc[s], marker="o", color=col,
            label=f"AVE, seed {s}")
    ax.plot(drift_warp.columns, drift_warp.loc[s], ls="--", color=col, lw=1)
ax.set(xlabel="number of anchors", ylabel="PSNR at the farthest frame (dB)",
       title="dashed: flow warp + inpaint")
ax.title.set_fontsize(9)
ax.legend(fontsize=8)
plt.show()

# %% tags=["remove-input"]
g_ave, g_w = drift_psnr[5] - drift_psnr[1], drift_warp[5] - drift_warp[1]
below = drift_psnr - drift_warp
display(Markdown(f"""
**Reading.** From one to five anchors the generator gains {span(g_ave)} dB at the farthest frame (per
seed), flow warp + inpaint {span(g_w)} dB from the same keyframes. Across the numbers of anchors, AVE minus
that baseline is {span(below.values.ravel())} dB ({drift_psnr[1].mean():.1f} vs {drift_warp[1].mean():.1f}
dB with one anchor, {drift_psnr[5].mean():.1f} vs {drift_warp[5].mean():.1f} dB with five). More anchors
reduce drift for any propagator; what says something about the generator is whether it drifts less than
warping with inpainting: {sign_word(below.values.ravel(), 'here it does at every point.',
'here it does not at any point: the anchors do the work.', 'here it does at some points only.')}
"""))


# %% [markdown]
# ## 6. A better image editor, a better video
#
# The paper's ablation: the final video's quality follows the image editor's. We emulate editors of five quality
# levels with `Editor(quality=q)`: the same call settles on the same edit parameters at every level (same seed,
# same draws), and a weaker editor adds a hue bias, blur and noise to its output (`Editor.degrade`). Against the
# *intended* edit (the parameters applied to every frame, no degradation) we measure the PSNR of the edited
# keyframes and the PSNR of the non-anchor frames the propagator makes from them, pooled over clips and both
# instructions per level; then Pearson's r between the two over the five levels, with a bootstrap interval over
# clips (`ave.quality_correlation`). Flow warp + inpaint from the same keyframes is the reference for how much
# of the keyframes' quality any propagator passes on: the slope (video dB per keyframe dB) of each.

# %%
QUALITIES = (0.9, 0.7, 0.5, 0.3, 0.1)  # 1.0: a perfect keyframe (infinite PSNR)
n_quality_clips = 2 if quick else 4


def quality_sums(model, clip, mot, ins, s, i):
    """Per quality level: squared-error sums and counts of the keyframes, AVE's and
    warp + inpaint's non-anchor frames, all against the intended edit."""
    keys = ave.uniform_keyframes(T, n_anchors)
    rest = torch.tensor([t not in keys for t in range(T)])[:, None, None]
    rest = rest.expand(T, size, size)
    fr, mk, ce = clip.frames, clip.masks, clip.centers
    out = []
    for q in QUALITIES:
        ed = ave.Editor(50_000 + 1000 * s + 10 * i + INSTR.index(ins), quality=q)
        kf, p = ed.edit(fr[keys], mk[keys], ce[keys], ins)
        gt = ave.edit_video(fr, mk, ce, p)
        anchors = dict(zip(keys, kf))
        vid = ave.propagate(model, anchors, mot, sample_steps, seed=s)
        wip = ave.flow_warp_propagate(anchors, mot, inpaint=True)
        ks_, kn_ = ave.masked_errors(kf, gt[keys], torch.ones_like(mk[keys]))
        vs_, vn_ = ave.masked_errors(vid, gt, rest)
        out.append(dict(q=q, key_se=ks_, key_n=kn_, vid_se=vs_, vid_n=vn_,
                        warp_se=ave.masked_errors(wip, gt, rest)[0]))
    return out


q_rows = []
for s in seeds:
    clips = clips0 if s == seeds[0] else test_clips_for(s)
    mots = mot0 if s == seeds[0] else [ave.estimate_motion(c_.frames) for c_ in clips]
    for i in tqdm(range(n_quality_clips), desc=f"editor quality, seed {s}"):
        for ins in INSTR:
            q_rows += [dict(seed=s, clip=f"{i}/{ins}", **r)
                       for r in quality_sums(models[s], clips[i], mots[i], ins, s, i)]
qdf = pd.DataFrame(q_rows)

# %% [markdown]
# Per seed: the pooled PSNRs per level, r with its interval and the slope, for AVE and for warp + inpaint.


# %%
def q_stats(df, video_col):
    """ave.quality_correlation over one seed's clips (rows: clip and instruction)."""
    piv = {
        c_: df.pivot(index="clip", columns="q", values=c_)[list(QUALITIES)].to_numpy()
        for c_ in ("key_se", "key_n", video_col, "vid_n")
    }
    return ave.quality_correlation(
        piv["key_se"], piv["key_n"], piv[video_col], piv["vid_n"], n_boot=1000, seed=0
    )


q_ave = pd.DataFrame({s: q_stats(qdf[qdf.seed == s], "vid_se") for s in seeds}).T
q_warp = pd.DataFrame({s: q_stats(qdf[qdf.seed == s], "warp_se") for s in seeds}).T
q_cols = ["key_se", "key_n", "vid_se", "vid_n", "warp_se"]
qsum = qdf.groupby(["seed", "q"])[q_cols].sum()
q_psnr = pd.DataFrame({
    "keyframes": 10 * np.log10(qsum["key_n"] / qsum["key_se"]),
    "AVE": 10 * np.log10(qsum["vid_n"] / qsum["vid_se"]),
    "flow warp + inpaint": 10 * np.log10(qsum["vid_n"] / qsum["warp_se"]),
})
display(q_psnr.unstack("seed").round(2))
display(pd.concat({"AVE": q_ave, "flow warp + inpaint": q_warp}, axis=1).round(3))
fig, ax = plt.subplots(figsize=(4.5, 3))
for s, col in zip(seeds, plotting.PALETTE):
    d_ = q_psnr.xs(s, level="seed")
    ax.plot(d_["keyframes"], d_["AVE"], marker="o", color=col, label=f"AVE, seed {s}")
    ax.plot(d_["keyframes"], d_["flow warp + inpaint"], ls="--", color=col, lw=1)
ax.set(xlabel="keyframe PSNR (dB)", ylabel="non-anchor frames PSNR (dB)",
       title="dashed: flow warp + inpaint")
ax.title.set_fontsize(9)
ax.legend(fontsize=8)
plt.show()

# %% tags=["remove-input"]
q_word = sign_word(
    q_ave["slope"] - q_warp["slope"],
    "The generator passes on more of the editor's quality than warping does.",
    "The generator passes on less of it than warping: its own error, or its smoothing of "
    "the keyframes' artefacts, dilutes the editor's quality.",
    "Whether it passes on more than warping depends on the seed.")
display(Markdown(f"""
**Reading.** Over the five editor qualities the keyframes span
{q_psnr['keyframes'].min():.1f}–{q_psnr['keyframes'].max():.1f} dB and AVE's non-anchor frames
{q_psnr['AVE'].min():.1f}–{q_psnr['AVE'].max():.1f} dB. Pearson's r between the two is
{span(q_ave['r'], '.3f')} per seed (bootstrap intervals over clips
{'; '.join(f"[{lo:.2f}, {hi:.2f}]" for lo, hi in zip(q_ave['lo'], q_ave['hi']))}); the slope is
{span(q_ave['slope'], '.2f')} dB of video per dB of keyframe, against {span(q_warp['slope'], '.2f')} for
flow warp + inpaint from the same keyframes. {q_word} The correlation itself is
expected of any propagator that copies its anchors, and warp + inpaint, with no learned part, shows it as
strongly (r {span(q_warp['r'], '.3f')} per seed): `editor_quality_correlation` holding supports the paper's
decomposition (better keyframes, better video), not the generator. What could break it is a propagator
whose own error swamps the keyframes' (a flat curve); five levels ordered by degradation make a Pearson r
of 0.7 an easy bar.
"""))


# %% [markdown]
# ## 7. Where does the generator stand against inpainting on disoccluded pixels, and why?
#
# On pixels no anchor showed, section 4 compares the generator with biharmonic inpainting of the warped
# anchors. Four explanations were written down **before** measuring, each with what it predicts:
#
# * **(a) sample variance.** A generative model returns *one sample* of what the hidden surface could be; PSNR
#   is a squared error, and the squared error of a sample is its bias² plus the variance of the samples,
#   while inpainting is a smooth, mean-like guess with no variance term. If the samples spread about as far
#   as they miss, a single sample pays about twice the error of their mean: about 3 dB. *Prediction:* the
#   mean of k samples gains up to ~3 dB as k grows, and the variance is a large share of a sample's error.
# * **(b) too few sampling steps.** *Prediction:* the disoccluded PSNR changes with the number of Euler steps.
#   (One step returns the network's prediction from pure noise, its estimate of the conditional mean; more
#   steps give sharper, more sample-like frames, so we expect PSNR to *fall* with steps, not rise.)
# * **(c) training.** Holes are a small share of the training pixels, so the network may simply not have
#   learned to fill them. *Prediction:* on training-like data (source clips rebuilt from their own keyframes,
#   as in training), the network's clean-frame prediction is worse than biharmonic inpainting on holes even
#   at τ = 0, where it should be a conditional mean.
# * **(d) missing conditioning.** The network never sees an inpainted frame; near a hole its inputs hold the
#   warps of the wrong surfaces. *Prediction:* replacing the warped anchors inside the holes by the biharmonic
#   fill (test time only, no retraining) recovers the gap.
#
# Everything below uses the stored propagators and fresh composed edits of the first `n_diag_clips` test
# clips of each seed (both instructions; its own editor draws). Each run of the sampler is our copy of `ave.propagate`
# that can take another conditioning; a check confirms it reproduces `ave.propagate` exactly.


# %%
def sample(model, anchors, motion, steps, seed_, cond=None):
    """ave.propagate, with an optional replacement of the conditioning."""
    cond = ave.anchor_condition(anchors, motion) if cond is None else cond
    A = torch.stack([anchors.get(t, torch.zeros_like(cond[0, :3])) for t in range(T)])
    eps = torch.randn(A.shape, generator=torch.Generator().manual_seed(seed_))
    ks, rest_ = sorted(anchors), [t for t in range(T) if t not in anchors]
    x = eps.clone()
    with torch.no_grad():
        for i in range(steps):
            tau = i / steps
            x[ks] = (1 - tau) * eps[ks] + tau * A[ks]
            tt = torch.full((T,), tau)
            x1 = model(ave._inputs(x, cond, motion, tt, rest_))
            x[rest_] = x[rest_] + (x1 - x[rest_]) / (1 - tau) / steps
    x[ks] = A[ks]
    return x.clamp(0, 1)


def dist_bins(hole):
    """Each hole pixel's distance (px) to the nearest trusted pixel, binned."""
    from scipy.ndimage import distance_transform_edt

    d = torch.tensor(np.stack([distance_transform_edt(h) for h in hole.numpy()]))
    return {"1 px": d == 1, "2 px": (d > 1) & (d <= 2), "3-4 px": (d > 2) & (d <= 4),
            "5+ px": d > 4}


def rebuild_gap(model, clip, mot, s, where, fill=False):
    """Source clip rebuilt from its own (unedited) keyframes: AVE and inpainting on
    disoccluded pixels, as squared-error sums (ave.rebuild_errors)."""
    keys = ave.uniform_keyframes(T, n_anchors)
    return dict(where=where, seed=s, **ave.rebuild_errors(
        model, clip, mot, keys, sample_steps, seed=1000 * s, fill_holes=fill))


# %% [markdown]
# One composed edit of a test clip under the diagnosis: `K_SAMPLES` samples of the generator, the variants
# (filled conditioning, fewer or more steps) and the inpainting baseline, scored per region of the frame.


# %%
def diagnose_edit(model, clip, mot, ins, ed, s, same_dev, diag_rows, ladder, bins):
    """Appends the edit's rows to diag_rows, ladder and bins; returns same_dev (set on
    the first call: our sampler against ave.propagate)."""
    keys = ave.uniform_keyframes(T, n_anchors)
    fr, mk, ce = clip.frames, clip.masks, clip.centers
    kf, p = ed.edit(fr[keys], mk[keys], ce[keys], ins)
    anchors = dict(zip(keys, kf))
    gt = ave.edit_video(fr, mk, ce, p)
    rest = torch.tensor([t not in keys for t in range(T)])[:, None, None]
    dis = ~ave.visibility(clip, keys) & rest
    cond = ave.anchor_condition(anchors, mot)
    hole = cond[:, 6:8].sum(1) == 0  # no anchor warp trusted (estimated flow)
    inp = ave.flow_warp_propagate(anchors, mot, inpaint=True)
    xs = torch.stack(
        [sample(model, anchors, mot, sample_steps, 1000 * s + j)
         for j in range(K_SAMPLES)]
    )
    if not same_dev:
        ref = ave.propagate(model, anchors, mot, sample_steps, seed=1000 * s)
        same_dev = float((ref - xs[0]).abs().max()) + 1e-30
    # (d): the warped anchors inside the holes replaced by the inpainted frame
    cfill = cond.clone()
    for j in (0, 3):
        cfill[:, j:j + 3] = torch.where(hole[:, None], inp, cond[:, j:j + 3])
    fillv = sample(model, anchors, mot, sample_steps, 1000 * s, cond=cfill)
    stepv = {
        n: xs[0] if n == sample_steps
        else sample(model, anchors, mot, n, 1000 * s)
        for n in STEP_SWEEP
    }
    mean = xs.mean(0)
    var = xs.var(0, unbiased=True).mean(1)  # (T, H, W), per pixel over samples

    def se(v, m, gt=gt):
        return (v - gt).pow(2).mean(1)[m].sum().item()

    for region, m in (("dis", dis), ("dis_hole", dis & hole),
                      ("dis_trusted", dis & ~hole), ("vis", ~dis & rest)):
        if not m.any():
            continue
        r = dict(seed=s, region=region, n=int(m.sum()), inpaint=se(inp, m),
                 single=float(np.mean([se(x_, m) for x_ in xs])),
                 bias2=se(mean, m) - var[m].sum().item() / K_SAMPLES,
                 variance=var[m].sum().item(), cond_fill=se(fillv, m))
        for k in (1, 2, 4, 8):
            if k <= K_SAMPLES:
                r[f"mean{k}"] = se(xs[:k].mean(0), m)
        for n, v in stepv.items():
            r[f"steps{n}"] = se(v, m)
        diag_rows.append(r)
    ladder.append(dict(where="test clips, edited anchors", seed=s,
                       n=int(dis.sum()), AVE=se(xs[0], dis),
                       inpaint=se(inp, dis)))
    for b, m in dist_bins(hole).items():
        m = m & dis
        bins.append(dict(seed=s, bin=b, n=int(m.sum()), AVE=se(xs[0], m),
                         inpaint=se(inp, m)))
    return same_dev


# %% [markdown]
# Every seed, clip and instruction, with the rebuild of the source clip from its own keyframes beside:

# %%
K_SAMPLES = 2 if quick else 4
STEP_SWEEP = (1, 2, 8) if quick else (1, 2, 4, 8, 16)
diag_rows, same_dev, ladder, bins = [], 0.0, [], []
for s in seeds:
    clips = clips0 if s == seeds[0] else test_clips_for(s)
    mots = mot0 if s == seeds[0] else [ave.estimate_motion(c_.frames) for c_ in clips]
    ed = ave.Editor(1000 + s)
    for clip, mot in zip(clips[:n_diag_clips], mots[:n_diag_clips]):
        ladder.append(
            rebuild_gap(models[s], clip, mot, s, "test clips, source anchors")
        )
        for ins in INSTR:
            same_dev = diagnose_edit(
                models[s], clip, mot, ins, ed, s, same_dev, diag_rows, ladder, bins
            )
# our copy of the sampler must be ave.propagate exactly (same seed, same frames)
assert same_dev < 1e-6, f"sampler copy differs from ave.propagate by {same_dev}"
diag = pd.DataFrame(diag_rows)
cols = [c_ for c_ in diag.columns if c_ not in ("seed", "region", "n")]
dsum = diag.groupby(["region", "seed"])[cols + ["n"]].sum()
dmse = dsum[cols].div(dsum["n"], axis=0)  # pooled MSE per region and seed
dpsnr = 10 * np.log10(1 / dmse.clip(lower=1e-12))
dis_mse, dis_psnr = dmse.xs("dis"), dpsnr.xs("dis")
share_hole = dsum.xs("dis_hole")["n"].sum() / dsum.xs("dis")["n"].sum()

# %% [markdown]
# **(c)** on training-like data: training clips rebuilt from their own keyframes, drawn as in training, and
# the network's clean-frame prediction at fixed τ against inpainting on the holes.

# %%
# (c) training-like data: the first training clips rebuilt from their own keyframes,
# keyframes drawn as in training; the network's clean-frame prediction at fixed τ
TAUS = (0.0, 0.5, 0.9) if quick else (0.0, 0.25, 0.5, 0.75, 0.9)
tr_cfg = dict(ave.checkpoint_config(), n_train_clips=2 if quick else 6)
trc, trm = ave.training_clips(tr_cfg, fast=quick)
tr_rows = []
for s in seeds:
    rng = np.random.default_rng(s)
    g = torch.Generator().manual_seed(s)
    for c_, mo_ in zip(trc, trm):
        for _ in range(3):
            x1 = c_.frames
            m = int(rng.integers(1, 5))
            ks = ave.uniform_keyframes(T, m) if rng.random() < 0.5 else sorted(
                int(k) for k in rng.choice(T, m, replace=False))
            an = {k: x1[k] for k in ks}
            cond = ave.anchor_condition(an, mo_)
            rest_ = [t for t in range(T) if t not in ks]
            hole = (cond[rest_, 6:8].sum(1) == 0)
            inp = ave.flow_warp_propagate(an, mo_, inpaint=True)[rest_]
            err_inp = (inp - x1[rest_]).pow(2).mean(1)
            for tau in TAUS:
                x = (1 - tau) * torch.randn(x1.shape, generator=g) + tau * x1
                with torch.no_grad():
                    pred = models[s](
                        ave._inputs(x, cond, mo_, torch.full((T,), tau), rest_)
                    )
                err = (pred - x1[rest_]).pow(2).mean(1)
                tr_rows.append(dict(
                    seed=s, tau=tau, n_hole=int(hole.sum()), n_all=hole.numel(),
                    hole=err[hole].sum().item(), seen=err[~hole].sum().item(),
                    inpaint=err_inp[hole].sum().item(),
                ))
# %% [markdown]
# The gap to inpainting on training clips, for the generator and the filled-conditioning variant, and the
# tables: the ladder from training to edited test clips, the distance bins, the training-like errors.

# %%
fit_rows = []  # the filled-conditioning variant on the same training clips
for s in seeds:
    for c_, mo_ in zip(trc, trm):
        ladder.append(
            rebuild_gap(models[s], c_, mo_, s, "training clips, source anchors")
        )
        fit_rows.append(rebuild_gap(models_f[s], c_, mo_, s, "filled", fill=True))
# per seed: generator minus inpainting on training clips' disoccluded pixels (dB)
fit_gap = {
    "AVE": [ave.pooled_gap_db([r for r in ladder if r["seed"] == s
                               and r["where"] == "training clips, source anchors"])
            for s in seeds],
    "AVE, gated": [
        ave.pooled_gap_db([r for r in fit_rows if r["seed"] == s]) for s in seeds
    ],
}


def gap_db(df, by):
    g = df.groupby(by)[["n", "AVE", "inpaint"]].sum()
    ps_ = {m_: 10 * np.log10(g["n"] / g[m_]) for m_ in ("AVE", "inpaint")}
    return pd.DataFrame({**ps_, "AVE - inpaint": ps_["AVE"] - ps_["inpaint"]})


WHERE = ["training clips, source anchors", "test clips, source anchors",
         "test clips, edited anchors"]
lad = gap_db(pd.DataFrame(ladder), "where").loc[WHERE]
bin_tab = gap_db(pd.DataFrame(bins), "bin")
bin_tab["share of hole pixels"] = (
    pd.DataFrame(bins).groupby("bin")["n"].sum() / pd.DataFrame(bins)["n"].sum()
)
tr = pd.DataFrame(tr_rows).groupby("tau").sum()
tr_mse = pd.DataFrame({
    "holes (no warp trusted)": tr["hole"] / tr["n_hole"],
    "other pixels": tr["seen"] / (tr["n_all"] - tr["n_hole"]),
    "inpainting, holes": tr["inpaint"] / tr["n_hole"],
})
hole_frac = float(tr["n_hole"].sum() / tr["n_all"].sum())
hw = ave.checkpoint_config()["hole_weight"]
loss_share = (1 + hw) * hole_frac / ((1 + hw) * hole_frac + 1 - hole_frac)

# %%
k_cols = [f"mean{k}" for k in (1, 2, 4, 8) if k <= K_SAMPLES]
tab = pd.DataFrame({
    "flow warp + inpaint": dis_psnr["inpaint"],
    "AVE, 1 sample": dis_psnr["single"],
    **{f"mean of {c_[4:]}": dis_psnr[c_] for c_ in k_cols[1:]},
    "bias² only (k → ∞)": 10 * np.log10(1 / dis_mse["bias2"]),
    "1 step": dis_psnr["steps1"],
    "fill as condition": dis_psnr["cond_fill"],
    "variance share": dis_mse["variance"] / dis_mse["single"],
})
display(tab.round(2))
split = pd.DataFrame({
    (reg, m_): dpsnr.xs(reg)[m_].mean()
    for reg in ("dis_hole", "dis_trusted") for m_ in ("inpaint", "single")
}, index=["dB"])
display(split.round(2))
print("disoccluded PSNR against sampling steps (mean over seeds):")
print(dis_psnr[[f"steps{n}" for n in STEP_SWEEP]].mean().round(2).to_dict())
print(
    f"{share_hole:.0%} of disoccluded pixels lie in an estimated hole; training-like "
    f"data: {hole_frac:.1%} of rebuilt pixels are holes, "
    f"{loss_share:.0%} of the loss weight"
)
display(tr_mse.round(4))
display(lad.round(2))
display(bin_tab.round(2))

fig, axes = plt.subplots(1, 3, figsize=(11, 3))
ks_ = [int(c_[4:]) for c_ in k_cols]
for s, col in zip(seeds, plotting.PALETTE):
    axes[0].plot(ks_, dis_psnr.loc[s, k_cols], marker="o", color=col, label=f"seed {s}")
    axes[0].axhline(dis_psnr.loc[s, "inpaint"], color=col, ls="--", lw=1)
    axes[0].plot(ks_[-1] * 1.5, 10 * np.log10(1 / dis_mse.loc[s, "bias2"]), marker="_",
                 ms=12, color=col)
axes[0].set(xscale="log", xlabel="samples averaged (k)", ylabel="disoccluded PSNR (dB)",
            title="dashed: flow warp + inpaint; bar: bias² only (k → ∞)")
axes[0].title.set_fontsize(8)
axes[0].set_xticks(ks_, [str(k) for k in ks_])
axes[0].minorticks_off()
axes[0].legend(fontsize=7)
st_cols = [f"steps{n}" for n in STEP_SWEEP]
for s in seeds:
    axes[1].plot(STEP_SWEEP, dis_psnr.loc[s, st_cols], marker="o", label=f"seed {s}")
axes[1].axhline(dis_psnr["inpaint"].mean(), color="k", ls="--", lw=1,
                label="inpaint (mean)")
axes[1].set(xscale="log", xlabel="Euler sampling steps", ylabel="disoccluded PSNR (dB)")
axes[1].set_xticks(STEP_SWEEP, [str(n) for n in STEP_SWEEP])
axes[1].minorticks_off()
axes[1].legend(fontsize=7)
for col, ls in zip(tr_mse.columns, ("-", "-", "--")):
    axes[2].plot(tr_mse.index, tr_mse[col], marker="o", ls=ls, label=col)
axes[2].set(yscale="log", xlabel="noise level τ (0 = pure noise)",
            ylabel="MSE of the clean-frame prediction", title="training-like clips")
axes[2].title.set_fontsize(9)
axes[2].legend(fontsize=7)
plt.tight_layout()
plt.show()

# %% tags=["remove-input"]
steps_m = dis_psnr[[f"steps{n}" for n in STEP_SWEEP]].mean()
gap_inp = tab["AVE, 1 sample"] - tab["flow warp + inpaint"]
mean_gain = tab[f"mean of {k_cols[-1][4:]}"] - tab["AVE, 1 sample"] if len(k_cols) > 1 else None
bias_gap = tab["bias² only (k → ∞)"] - tab["flow warp + inpaint"]
one_vs = tab["1 step"] - dis_psnr[f"steps{sample_steps}"]
fillc = tab["fill as condition"]
tau_beats = [t for t in tr_mse.index
             if tr_mse.loc[t, "holes (no warp trusted)"] < tr_mse.loc[t, "inpainting, holes"]]
display(Markdown(f"""
**Reading the diagnosis** (this run; the left table is per seed; generator minus inpainting is
{span(gap_inp)} dB on disoccluded pixels).

* **(a) sample variance.** The variance of the samples is {span(100 * tab['variance share'], '.0f')}% of a
  sample's squared error on disoccluded pixels{'' if mean_gain is None else f'; averaging {k_cols[-1][4:]} samples gains {span(mean_gain, "+.2f")} dB'};
  the bias²-only limit (infinitely many samples averaged) is {span(bias_gap)} dB against inpainting.
  {'Variance explains the gap only if that limit reaches inpainting, which it does here.' if min(bias_gap) >= 0
   else 'Even without any variance the generator would not reach inpainting: what it loses is bias.'}
* **(b) sampling steps.** One step (the network's conditional-mean estimate) minus {sample_steps} steps is
  {span(one_vs)} dB; over {STEP_SWEEP[0]} to {STEP_SWEEP[-1]} steps the pooled PSNR spans
  {steps_m.min():.1f}–{steps_m.max():.1f} dB, against {dis_psnr['inpaint'].mean():.1f} dB for inpainting.
* **(c) training.** Holes are {hole_frac:.0%} of the rebuilt training pixels and, with their
  {1 + hw:g}× weight, {loss_share:.0%} of the loss. On training-like clips the network's prediction from pure
  noise errs {tr_mse.iloc[0, 0]:.3f} (MSE) on holes against {tr_mse.iloc[0, 2]:.3f} for biharmonic
  inpainting; it beats inpainting {'at no noise level we tried' if not tau_beats
  else f'from τ = {min(tau_beats):g} on (a noisy state that already carries the answer)'}. Rebuilding its own
  *training* clips from their unedited keyframes, the generator minus inpainting is
  {lad.loc[WHERE[0], 'AVE - inpaint']:+.1f} dB (per seed: {span(fit_gap["AVE"], '+.1f')} dB, the
  `fits_training_clips` condition); unseen photographs give {lad.loc[WHERE[1], 'AVE - inpaint']:+.1f} dB and
  edited anchors {lad.loc[WHERE[2], 'AVE - inpaint']:+.1f} dB. A gap already on training clips is the learned
  fill itself, not a shift to test edits.
* **Where.** By distance to the nearest trusted pixel the gap is
  {', '.join(f"{b} {bin_tab.loc[b, 'AVE - inpaint']:+.1f} dB" for b in bin_tab.index)} (shares of hole
  pixels {', '.join(f"{v:.0%}" for v in bin_tab['share of hole pixels'])}). {1 - share_hole:.0%} of the
  disoccluded pixels are not in an estimated hole (the flow wrongly trusts a warp there); on those the
  generator minus inpainting is {split.iloc[0, 3] - split.iloc[0, 2]:+.1f} dB.
* **(d) missing conditioning.** Putting the biharmonic fill into the holes of the conditioning, with no
  retraining, moves the generator by {span(fillc - tab['AVE, 1 sample'])} dB, to {span(fillc - tab['flow warp + inpaint'])}
  dB against the fill itself. The variant *trained* that way, with a gated residual (*AVE, gated*,
  section 3), is {span(fill_d)} dB against flow warp + inpaint (claim `beats_flow_warping_disoccluded_gated`);
  its own training-clip gap is {span(fit_gap["AVE, gated"], '+.1f')} dB.
"""))


# %% [markdown]
# ## 8. The claims record

# %% [markdown]
# **Conditions** (fixed with the claims, measured per seed). A claim about the generator speaks of a model trained
# to its plateau (`train.plateau` of its training loss `<= 0.05`, the book-wide rule). The claims about what it <!-- paper -->
# makes, pixel by pixel, against warping (disoccluded and visible pixels, inside the edit, fidelity outside it)
# also need a generator that fits its own training task where warping has nothing to offer at least as well as
# the model-free fill: rebuilding its *training* clips from their own unedited keyframes, its PSNR on
# disoccluded pixels minus that of flow warp + inpaint must be `>= 0` dB. Where that fails, the model never
# learned the task the claim tests, and the claim is inconclusive at that seed rather than not held.

# %% [markdown]
# The gated variant's recipe has a warmup-stable-decay schedule, so its `gated_converged` is read, as
# registered with the recipe, on the stable phase only, before the decay (`train.plateau` up to that step,
# noise 2): the value the training script computed on the full 3,000-step curve and stored in the manifest
# (`plateau_stable/<seed>`; the manifest keeps the curve as 500 bins). Quick mode trains a tiny model at a
# constant rate and reads its whole curve.

# %%
rec.condition("converged", [train.plateau(curves[s][1]) for s in seeds], "<=", 0.05,
              statement="the AVE propagator's training loss is flat at the end",
              unit="share of the loss drop in the last fifth",
              note="read on a cosine decay's tail (learning rate below 10% of "
              "its peak in the last fifth), so a flat end is partly the "
              "schedule's; it does not show that longer training would not "
              "help (see the text below the conditions)")
cfg_g = ave.checkpoint_config("propagators_gated")
if quick:
    plat_g = [train.plateau(curves_f[s][1]) for s in seeds]
else:
    man_g = json.loads(checkpoints.fetch(
        "11_anchor_video_edit", "propagators_gated.json").read_text())["metrics"]
    plat_g = [man_g[f"plateau_stable/{s}"] for s in seeds]
rec.condition("gated_converged", plat_g, "<=", 0.05,
              statement="the AVE, gated propagator's training loss is flat in the "
              "stable phase of its schedule",
              unit="share of the loss drop in the last fifth of the stable phase",
              note=f"up to step {cfg_g['steps'] - cfg_g['decay_steps']} of "
              f"{cfg_g['steps']} (before the decay), noise=2, as registered with the "
              "recipe (make_propagators_onestep.py); quick: the whole curve")
for cid, what in (("fits_training_clips", "AVE"),
                  ("gated_fits_training_clips", "AVE, gated")):
    rec.condition(cid, fit_gap[what], ">=", 0.0, unit="dB, generator - inpainting",
                  statement=f"{what} rebuilds its training clips' disoccluded pixels "
                  "at least as well as flow warp + inpaint",
                  note="training clips rebuilt from their own unedited keyframes")


# %% tags=["remove-input"]
def fifths(v):
    """Mean of each fifth of a curve."""
    v = np.asarray(v, dtype=float)
    return [v[int(len(v) * a / 5):int(len(v) * (a + 1) / 5)].mean() for a in range(5)]


mid_drop = [100 * (1 - f[3] / f[2]) for f in (fifths(curves[s][1]) for s in seeds)]
lr_last = (1 + np.cos(np.pi * 0.8)) / 2  # cosine decay: learning rate left at 80% of training
display(Markdown(f"""
**What `converged` can and cannot say.** The propagators are trained with a cosine decay, so in the last
fifth of training the learning rate is below {lr_last:.0%} of its peak and the loss can hardly move
whatever the model's state: a flat end is partly the schedule's doing. One fifth earlier, at a larger learning rate, the loss was still falling
({', '.join(f"{v:.0f}" for v in mid_drop)}% from the third to the fourth fifth, per seed). The condition is kept as fixed,
but it does not show that longer training would not help; `fits_training_clips` is the informative one.
"""))

# %%
ps = per_seed


def m_(method, col):
    """Per-seed values of one method's metric."""
    return ps.xs(method, level="method")[col]


def per(vals, fmt="+.2f"):
    return ", ".join(f"{v:{fmt}}" for v in vals)


WARPS = ["flow warp", "flow warp + source", "flow warp + inpaint"]
warp_dis = pd.DataFrame({m: m_(m, "dis_psnr") for m in WARPS})
# the strongest warping baseline on disoccluded pixels, chosen on the pooled mean
best_warp = warp_dis.mean().idxmax()
dis_gain = m_("AVE", "dis_psnr") - warp_dis[best_warp]
gated_gain = m_("AVE, gated", "dis_psnr") - warp_dis[best_warp]
vis_gain = m_("AVE", "vis_psnr") - m_("flow warp", "vis_psnr")
tc = m_("AVE", "warp_err") / m_("per-frame", "warp_err")
tc_w = m_("AVE", "warp_err") / m_("flow warp + inpaint", "warp_err")
comp = m_("AVE separate", "warp_err") - m_("AVE", "warp_err")
noise_ref = (m_("AVE, other noise", "warp_err") - m_("AVE", "warp_err")).abs()
gain_drift, gain_drift_w = drift_psnr[5] - drift_psnr[1], drift_warp[5] - drift_warp[1]
best_fid = summary.loc[WARPS, "fid_psnr"].idxmax()
S = summary
GATED_GIVEN = ("gated_converged", "gated_fits_training_clips")
CLAIMS = [  # id, statement, paper, measured, op, target, unit, baseline, given, note
    ("beats_flow_warping_disoccluded", "The generative propagator beats the strongest "
     "flow-warping baseline (same estimated flow) on disoccluded pixels",
     "a motion-guided generator, not warping, produces the non-anchor frames",
     dis_gain, ">", 1.0, f"dB PSNR gain on disoccluded pixels, AVE - {best_warp}",
     S.loc[best_warp, "dis_psnr"], ("converged", "fits_training_clips"),
     f"AVE {S.loc['AVE', 'dis_psnr']:.2f} dB; "
     + "; ".join(f"AVE - {w}: {per(m_('AVE', 'dis_psnr') - warp_dis[w])} dB"
                 for w in WARPS)
     + f". Diagnosis (section 7): variance share {per(tab['variance share'], '.0%')}; "
     f"bias²-only limit {per(tab['bias² only (k → ∞)'], '.1f')} dB; gap to inpainting "
     f"on training clips {per(fit_gap['AVE'])} dB"),
    ("beats_flow_warping_disoccluded_gated", "The variant with inpainted holes in its "
     "conditioning and a gated residual beats the strongest flow-warping baseline on "
     "disoccluded pixels",
     "a motion-guided generator, not warping, produces the non-anchor frames",
     gated_gain, ">", 1.0,
     f"dB PSNR gain on disoccluded pixels, AVE gated - {best_warp}",
     S.loc[best_warp, "dis_psnr"], GATED_GIVEN,
     "a labelled variant (not the paper's conditioning; recipe registered before its "
     f"training); AVE, gated {S.loc['AVE, gated', 'dis_psnr']:.2f} dB disoccluded; "
     + "; ".join(f"AVE, gated - {w}: "
                 f"{per(m_('AVE, gated', 'dis_psnr') - warp_dis[w])} dB"
                 for w in WARPS)
     + f"; gap to inpainting on training clips {per(fit_gap['AVE, gated'])} dB"),
    ("visible_parity", "On pixels an anchor saw, the generator is no worse than plain "
     "warping with the same flow", "the generator propagates what the anchors show",
     vis_gain, ">=", -0.1, "dB PSNR on visible pixels, AVE - flow warp",
     S.loc["flow warp", "vis_psnr"], ("converged", "fits_training_clips"),
     "the issue's bar: within 0.1 dB"),
]

# %% [markdown]
# Two bars are met by construction, so they are checks, not claims: more anchors put the farthest frame closer
# to one (any propagator gains), and our editor's separate calls disagree by design (any propagator that keeps
# its anchors carries that disagreement into the video). What the generator adds to drift is the claim
# `drift_vs_warping`, against flow warp + inpaint.

# %%
# per seed, averaged over the numbers of anchors
drift_gap = (drift_psnr - drift_warp).mean(axis=1)
rec.check("anchors_reduce_drift", float(gain_drift.min()), 0.0, op=">",
          note="dB at the farthest frame, 5 vs 1 anchors, min over seeds")
rec.check("composition_helps", float((comp - noise_ref).min()), 0.0, op=">",
          note="AVE's warp error, separate - composed keyframes, minus the "
          "sampling-noise reference; min over seeds")

# %%
CLAIMS += [
    ("temporal_consistency_vs_per_frame", "AVE is temporally more consistent than "
     "per-frame editing", "strong temporal consistency", tc, "<", 1.0,
     "warp error AVE / per-frame", S.loc["per-frame", "warp_err"], ("converged",),
     "per-frame editing is the weak baseline (our editor draws new parameters per "
     "call, "
     "so it flickers by design); the strongest is in temporal_consistency_vs_warping. "
     "Warp error " + ", ".join(
         f"{k} {S.loc[k, 'warp_err']:.4f}"
         for k in ("first-frame", "flow warp", "flow warp + inpaint", "AVE"))),
    ("temporal_consistency_vs_warping", "AVE is temporally at least as consistent as "
     "the strongest warping baseline", "strong temporal consistency", tc_w, "<=", 1.0,
     "warp error AVE / flow warp + inpaint", S.loc["flow warp + inpaint", "warp_err"],
     ("converged",), "warping copies the anchors along one flow field, so it is "
     "consistent by construction; a generator must not add flicker on top"),
    ("drift_vs_warping", "At the frame farthest from any anchor, AVE stays closer to "
     "the edit than flow warp + inpaint from the same keyframes (mean over 1, 2, 3, 5 "
     "anchors)", "anchors keep the video on the edit", drift_gap, ">", 0.0,
     "dB PSNR at the farthest frame, AVE - flow warp + inpaint",
     drift_warp.values.mean(), ("converged", "fits_training_clips"),
     f"from 1 to 5 anchors AVE gains {per(gain_drift)} dB, flow warp + inpaint "
     f"{per(gain_drift_w)} dB (the geometric part, a check: anchors_reduce_drift); "
     "this claim was added at review after its numbers had been computed once, so "
     "it is not pre-registered"),
    ("content_fidelity", "AVE leaves content outside the edit intact (PSNR vs source "
     "outside the edit)", "strong content fidelity", m_("AVE", "fid_psnr"), ">=", 30.0,
     "dB", S.loc[best_fid, "fid_psnr"], ("converged", "fits_training_clips"),
     f"baseline {best_fid}; AVE seen / unseen pixels {S.loc['AVE', 'fidv_psnr']:.1f} / "
     f"{S.loc['AVE', 'fidd_psnr']:.1f} dB; true-flow oracle "
     f"{per(m_('AVE, true flow', 'fid_psnr'), '.1f')} dB"),
]
in_warp = pd.DataFrame({m: m_(m, "in_psnr") for m in WARPS})
best_in = in_warp.mean().idxmax()  # the strongest warping baseline inside the edit
in_gain = m_("AVE", "in_psnr") - in_warp[best_in]
CLAIMS += [
    ("instruction_following", "Inside the edited region AVE matches the intended edit "
     "better than the strongest flow-warping baseline", "strong instruction following",
     in_gain, ">", 0.0, f"dB PSNR inside the edit (non-anchor frames), AVE - {best_in}",
     S.loc[best_in, "in_psnr"], ("converged", "fits_training_clips"),
     f"AVE {S.loc['AVE', 'in_psnr']:.2f} dB; "
     + "; ".join(f"AVE - {w}: {per(m_('AVE', 'in_psnr') - in_warp[w])} dB"
                 for w in WARPS)
     + "; the keyframes are the composed edit itself, so this measures propagation"),
    ("editor_quality_correlation", "Video quality follows image-editor quality: "
     "Pearson r between keyframe PSNR and non-anchor-frame PSNR over five editor "
     "quality levels", "final video quality is strongly correlated with the image "
     "editor's quality", q_ave["r"], ">=", 0.7, "Pearson r over 5 levels",
     q_warp["r"].mean(), ("converged",),
     "flow warp + inpaint from the same keyframes: r "
     f"{per(q_warp['r'], '.3f')}, so the correlation is a property of "
     "anchor-based propagation, not evidence for the generator; bootstrap 95% "
     "intervals over clips "
     + "; ".join(f"[{lo:.2f}, {hi:.2f}]" for lo, hi in zip(q_ave["lo"], q_ave["hi"]))
     + f"; slope {per(q_ave['slope'])} dB/dB vs flow warp + inpaint "
     f"{per(q_warp['slope'])} (baseline: warp + inpaint's r)"),
]

# %% [markdown]
# The labelled variant *AVE, gated* is read on the same claims as AVE, with the same bars and baselines, under
# its own conditions (registered with its recipe before its training); its claim ids end in `_gated`.

# %%
G = "AVE, gated"
CLAIMS += [
    ("visible_parity_gated", "On pixels an anchor saw, the gated variant is no worse "
     "than plain warping with the same flow", "the generator propagates what the "
     "anchors show", m_(G, "vis_psnr") - m_("flow warp", "vis_psnr"), ">=", -0.1,
     "dB PSNR on visible pixels, AVE gated - flow warp", S.loc["flow warp", "vis_psnr"],
     GATED_GIVEN,
     f"a labelled variant; AVE, gated {S.loc[G, 'vis_psnr']:.2f} dB visible, "
     f"AVE {S.loc['AVE', 'vis_psnr']:.2f} dB"),
    ("instruction_following_gated",
     "Inside the edited region the gated variant matches "
     "the intended edit better than the strongest flow-warping baseline",
     "strong instruction following", m_(G, "in_psnr") - in_warp[best_in], ">", 0.0,
     f"dB PSNR inside the edit (non-anchor frames), AVE gated - {best_in}",
     S.loc[best_in, "in_psnr"], GATED_GIVEN,
     f"a labelled variant; AVE, gated {S.loc[G, 'in_psnr']:.2f} dB; "
     + "; ".join(f"AVE, gated - {w}: {per(m_(G, 'in_psnr') - in_warp[w])} dB"
                 for w in WARPS)),
    ("content_fidelity_gated",
     "The gated variant leaves content outside the edit intact "
     "(PSNR vs source outside the edit)", "strong content fidelity", m_(G, "fid_psnr"),
     ">=", 30.0, "dB", S.loc[best_fid, "fid_psnr"], GATED_GIVEN,
     f"a labelled variant; baseline {best_fid}; AVE, gated seen / unseen pixels "
     f"{S.loc[G, 'fidv_psnr']:.1f} / {S.loc[G, 'fidd_psnr']:.1f} dB"),
]
for cid, st_, paper, meas, op, tgt, unit, base, given, note in CLAIMS:
    rec.claim(cid, st_, paper=paper, measured=[float(v) for v in meas], op=op,
              target=tgt, unit=unit, baseline=float(base), given=given, note=note)
rec.save()

# %% [markdown]
# ## Known limits
#
# **A larger propagator was tried and did not fit either** (issue #69). Its design was fixed in
# `data/11_anchor_video_edit/make_propagators_wide.py` before training: width 32 (four times the parameters),
# 200 training clips instead of 48, 4,000 steps instead of 1,200, and a loss that adds weight within 2 px of
# every hole's border, where the stored model loses most to inpainting. One seed was trained as a probe; the
# rule fixed beforehand was to train the other two seeds and switch the chapter to it only if it met
# `fits_training_clips`. Its measurements, beside the stored seed-0 model on the same clips and edits
# (`probe_wide.json`, written by that script's `--summary`):

# %% tags=["remove-input"]
probe = json.loads(checkpoints.fetch("11_anchor_video_edit", "probe_wide.json").read_text())
pm = pd.DataFrame(probe["measured"]).loc[
    ["fit_gap_db", "test_rebuild_gap_db", "dis_gain_db", "vis_gain_db", "in_gain_db"]]
pm.index = ["training clips rebuilt: AVE - warp + inpaint, disoccluded (the condition)",
            "test clips rebuilt: AVE - warp + inpaint, disoccluded",
            "test edits: AVE - warp + inpaint, disoccluded",
            "test edits: AVE - flow warp, visible",
            "test edits: AVE - flow warp, inside the edit (the claim uses warp + inpaint)"]
ROWS = pm.index
pm.columns = [f"{'probe' if c_ == 'probe' else 'stored'} "
              f"({probe['parameters'][c_]:,} parameters)" for c_ in pm.columns]
display(pm.round(2).rename_axis("dB, seed 0"))
pr = probe["measured"]["probe"]
n_better = int((pm.iloc[:, 0] > pm.iloc[:, 1]).sum())
fits_p = pr["fit_gap_db"] >= 0
any_fits = fits_p or max(fit_gap["AVE"] + fit_gap["AVE, gated"]) >= 0
flat_p = probe["build_metrics"]["plateau/0"] <= 0.05
display(Markdown(f"""
The probe is better than the stored model on {n_better} of the {len(pm)} lines; on its **own training
clips** it is {pr['fit_gap_db']:+.2f} dB against biharmonic inpainting, so it
{'meets' if fits_p else 'does not meet'} the condition{'' if fits_p else
', and the chapter keeps its stored propagators'} (this run's models: {span(fit_gap['AVE'], '+.2f')} dB
per seed, the `fits_training_clips` condition). {'' if fits_p else
'Every claim that names that condition is inconclusive where it fails.'} {'' if any_fits else
'No generator we trained, this one, the stored ones or the filled-conditioning variant, learned a fill '
'that beats a smooth interpolation even on the clips it was trained on.'} The probe's loss was
{'flat' if flat_p else 'still falling'} at the end (plateau {probe['build_metrics']['plateau/0']:.3f},
under a cosine decay that brings the learning rate near zero in the last fifth, so a flat end does not
show that more steps would not help). The probe took
{probe['build_metrics']['train_seconds/0'] / 60:.0f} min on one core. Tried next (below): the inpainted fill
*and* the width and border loss together, then a fill loss on the one-step (τ = 0) prediction, the conditional
mean that a PSNR rewards. Still untried for lack of compute: larger clips, where a hole has more context
around it than at 32×32.
"""))

# %% [markdown]
# **The same build on the filled conditioning** (`propagators_wide_filled`, the follow-up of issue #69). The
# width-16 variant trained on the inpainted conditioning (*AVE, filled cond.*) came closest to the fit bar, so
# the untried combination was its conditioning with the wider build above: width 32, 200 clips, 4,000 steps,
# the hole-border loss, cosine decay. Design, conditions (`filled_fits_training_clips` at `>= 0` dB, the plateau
# at `<= 0.05`) and rule were written into `make_propagators_wide.py` before training: only if its first seed met
# both would seeds 1 and 2 be trained and the filled claims switched to it. Its measurements beside the stored
# seed-0 *AVE, filled cond.* on the same clips and edits (`probe_wide_filled.json`), both sampled with the
# filled conditioning:

# %% tags=["remove-input"]
probe_f = json.loads(
    checkpoints.fetch("11_anchor_video_edit", "probe_wide_filled.json").read_text()
)
pmf = pd.DataFrame(probe_f["measured"]).loc[
    ["fit_gap_db", "test_rebuild_gap_db", "dis_gain_db", "vis_gain_db", "in_gain_db"]]
pmf.index = ROWS
pmf.columns = [f"{'probe, filled' if c_ == 'probe' else 'stored, filled'} "
               f"({probe_f['parameters'][c_]:,} parameters)" for c_ in pmf.columns]
display(pmf.round(2).rename_axis("dB, seed 0"))
prf, bmf = probe_f["measured"]["probe"], probe_f["build_metrics"]
fits_f, flat_f = prf["fit_gap_db"] >= 0, bmf["plateau/0"] <= 0.05
nb_f = int((pmf.iloc[:, 0] > pmf.iloc[:, 1]).sum())
cf_, cs_ = probe_f["config"], ave.checkpoint_config("propagators_filled")
fit_r3 = [v["dis"]["sample_minus_inpaint_db"] for v in json.loads(checkpoints.fetch(
    "11_anchor_video_edit", "diagnose_fit.json").read_text())["per_seed"].values()]
more = (f"{probe_f['parameters']['probe'] / probe_f['parameters']['stored']:.1f} times the parameters, "
        f"{cf_['n_train_clips'] / cs_['n_train_clips']:.1f} times the clips and "
        f"{cf_['steps'] / cs_['steps']:.1f} times the steps")
display(Markdown(f"""
The filled probe is better than the stored width-16 variant on {nb_f} of the {len(pmf)} lines
{f'({more} did not buy a better fill on the filled conditioning)' if nb_f == 0 else f'({more})'}.
On its own training clips the filled probe is {prf['fit_gap_db']:+.2f} dB against biharmonic inpainting
(the stored width-16 variant: {probe_f['measured']['stored']['fit_gap_db']:+.2f} dB at seed 0, and
{span(fit_r3, '+.2f')} dB per seed, `diagnose_fit.json`); its loss was
{'flat' if flat_f else 'still falling'} at the end (plateau {bmf['plateau/0']:.3f}). It
{'meets' if fits_f else 'does not meet'} `filled_fits_training_clips` and {'meets' if flat_f else
'does not meet'} the plateau condition, so by the rule fixed beforehand {'seeds 1 and 2 were to be trained '
'next; they were not trained in that round, and the chapter kept its stored variant' if fits_f and flat_f
else 'no weights of it are stored and the chapter kept its stored variant'} (since replaced by *AVE, gated*). On edited test clips it is
{prf['dis_gain_db']:+.2f} dB against flow warp + inpaint on disoccluded pixels and {prf['vis_gain_db']:+.2f}
dB against flow warp on visible pixels (the stored variant: {probe_f['measured']['stored']['dis_gain_db']:+.2f}
and {probe_f['measured']['stored']['vis_gain_db']:+.2f} dB). Training took
{bmf['train_seconds/0'] / 60:.0f} min on one core.
"""))

# %% [markdown]
# **Round 4: diagnosis first, then a one-step fill loss** (issue #69). Before the round-4 recipe was
# designed, `data/11_anchor_video_edit/diagnose_fit.py` measured where the stored *AVE, filled cond.* loses to
# flow warp + inpaint on its own training clips (the condition's clips, keyframes and sampler; exploratory,
# `diagnose_fit.json`), and `explore_recipe.py` trained one seed at that size with one change each
# (`explore_recipe.json`). Then `make_propagators_onestep.py` fixed the recipe, the conditions and the rule,
# and its seed 0 was trained as a probe (`probe_onestep.json`, beside the stored variant's seed 0):

# %% tags=["remove-input"]
def jfile(name):
    return json.loads(checkpoints.fetch("11_anchor_video_edit", name).read_text())


def probe_table(rec_, columns):
    """A probe record's measurements beside the stored model's, one row per line of ROWS."""
    t_ = pd.DataFrame(rec_["measured"]).loc[
        ["fit_gap_db", "test_rebuild_gap_db", "dis_gain_db", "vis_gain_db", "in_gain_db"]]
    t_.index, t_.columns = ROWS, columns
    display(t_.round(2).rename_axis("dB, seed 0"))
    return t_


dg, ex, po = jfile("diagnose_fit.json"), jfile("explore_recipe.json"), jfile("probe_onestep.json")
dpr = jfile("diagnose_probe_onestep.json")["per_seed"]["0"]  # the probe, same diagnosis
dp = dpr["dis"]
REG = {"dis": "all disoccluded", "dis_trusted": "flow wrongly trusts a warp",
       "hole_d1": "hole, 1 px from a trusted pixel", "hole_d2": "hole, 2 px",
       "hole_d3-4": "hole, 3-4 px", "hole_d5+": "hole, 5 px or more",
       "hole_small<30px": "holes under 30 px", "hole_large>=30px": "holes of 30 px or more"}
d0 = dg["per_seed"]["0"]
dtab = pd.DataFrame({
    "share": {v: d0[k]["n"] / d0["dis"]["n"] for k, v in REG.items()},
    **{f"seed {s_}": {v: dg["per_seed"][s_][k]["sample_minus_inpaint_db"] for k, v in REG.items()}
       for s_ in dg["per_seed"]},
    "first-step estimate": {v: np.mean([dg["per_seed"][s_][k]["est_step0_minus_inpaint_db"]
                                        for s_ in dg["per_seed"]]) for k, v in REG.items()},
})
display(dtab.round(2).rename_axis("AVE filled - inpaint (dB)"))
any_frame = d0["dis_shown_by_any_frame"]["n"] / d0["dis"]["n"]
# diagnose_fit.py stores only non-empty regions: absent means no such pixel at any clip
any_anchor = d0.get("dis_shown_by_any_anchor", {"n": 0})["n"] / d0["dis"]["n"]
exr = {(r["variant"], r.get("seed", 0)): r["fit_gap_db"] for r in ex["runs"]}
x0_seeds = sorted(s_ for v_, s_ in exr if v_ == "x0")
stored_f = [dg["per_seed"][str(s_)]["dis"]["sample_minus_inpaint_db"] for s_ in x0_seeds]
x0_f = [exr["x0", s_] for s_ in x0_seeds]
pmo = probe_table(po, ["probe (round-4 recipe)", "stored AVE, filled cond."])
bmo = po["build_metrics"]
fit_o, flat_o = bmo["fit_gap_db/0"] >= 0, bmo["plateau_stable/0"] <= 0.05
x0_ahead = np.subtract(x0_f, stored_f)
mean_border = [dpr[k]["mean4_minus_inpaint_db"] for k in ("dis_trusted", "hole_d1")]
if len(x0_seeds) < 3:
    after_word = "The other seeds were not run, so the retraining noise is not known."
elif min(x0_ahead) > 0:
    after_word = ("It is ahead at every seed there, so the loss may help at that schedule and "
                  "the longer one lose it (untested): a three-seed probe at 1,200 steps is next.")
else:
    within = max(abs(x0_ahead[1:])) < np.ptp(stored_f)
    after_word = (f"It is not ahead at every seed ({per(x0_ahead)} dB against the stored recipe): "
                  "the single-seed gain on which the recipe was registered does not replicate; at "
                  f"the other seeds the difference is {'within' if within else 'not within'} the "
                  f"stored recipe's own spread over seeds ({np.ptp(stored_f):.2f} dB).")
display(Markdown(f"""
**What the diagnosis found.** Per seed the variant loses most where inpainting is already accurate: on the
{dtab.loc['flow wrongly trusts a warp', 'share']:.0%} of disoccluded pixels the estimated flow wrongly
trusts, and in hole pixels next to a trusted one; it wins in hole interiors. No anchor shows any of these
surfaces ({any_anchor:.0%} of them), while {any_frame:.0%} are shown by some other *source* frame, which the
propagator never sees: the target is learnable only as a prior over photographs. Its estimate from pure
noise, the sampler's first step, already loses at the borders. At the variant's size (1,200 steps, seed 0)
the stored recipe reads {d0['dis']['sample_minus_inpaint_db']:+.2f} dB, warmup-stable-decay alone
{exr['wsd', 0]:+.2f} dB and the one-step fill loss {exr['x0', 0]:+.2f} dB; on those single-seed A/Bs the
recipe below was registered.

**The probe** of that recipe (the variant's size, conditioning and clips, the one-step fill loss, 3,000 steps
with warmup-stable-decay) reads {bmo['fit_gap_db/0']:+.2f} dB on its training clips and a stable-phase plateau
of {bmo['plateau_stable/0']:.3f}: it {'meets' if fit_o else 'misses'} the fit condition and
{'meets' if flat_o else 'misses'} the plateau, so by the rule fixed before training {'seeds 1 and 2 were to be trained' if po['meets_rule'] else
'no weights of it are stored and the chapter keeps its stored models'}. On edited test clips it is
{po['measured']['probe']['dis_gain_db']:+.2f} dB against flow warp + inpaint on disoccluded pixels and
{po['measured']['probe']['vis_gain_db']:+.2f} dB against flow warp on visible pixels. Training took
{bmo['train_seconds/0'] / 60:.0f} min on one core. The same diagnosis of the probe
(`diagnose_probe_onestep.json`, seed 0), against inpainting on the same disoccluded pixels: its first-step
estimate {dp['est_step0_minus_inpaint_db']:+.2f} dB (stored variant {d0['dis']['est_step0_minus_inpaint_db']:+.2f}
dB), the mean of four samples {dp['mean4_minus_inpaint_db']:+.2f} dB ({d0['dis']['mean4_minus_inpaint_db']:+.2f}
dB), one sample {dp['sample_minus_inpaint_db']:+.2f} dB ({d0['dis']['sample_minus_inpaint_db']:+.2f} dB). Pooled,
the loss moved the conditional-mean estimate and one sample loses by its spread; by region, the mean of four
samples is {mean_border[0]:+.2f} dB on the pixels the flow wrongly trusts and {mean_border[1]:+.2f} dB at 1 px
from a trusted pixel, {'so there even the mean loses (bias, not spread)' if max(mean_border) < 0
else 'so the mean does not lose everywhere there'}.

**After the probe** (exploratory, not registered): the one-step loss at 1,200 steps, seeds
{', '.join(map(str, x0_seeds))}, reads {per(x0_f)} dB against the stored recipe's {per(stored_f)} dB at the
same seeds. {after_word}
"""))


# %% [markdown]
# **Round 5: a gated residual** (issue #69). A second diagnosis, without training
# (`data/11_anchor_video_edit/diagnose_trusted.py`, `diagnose_trusted.json`), asked whether the stored
# variant's loss on the pixels the flow wrongly trusts is about *those* pixels or about every pixel whose
# base (the warp, or the fill) is already accurate, and whether a band around each hole that the warp does not
# trust would give a better fill. Per seed, the variant's sample against flow warp + inpaint on the fit
# condition's clips, by region (dB; the last column is the model-free band fill, holes dilated by 1 px):

# %% tags=["remove-input"]
dt, pg = jfile("diagnose_trusted.json"), jfile("probe_gated.json")
REG5 = {"dis": "disoccluded, all", "dis_hole": "disoccluded, in a hole",
        "dis_out1": "disoccluded, 1 px outside a hole (wrongly trusted)",
        "vis_out1": "visible, 1 px outside a hole", "vis_far": "visible, > 2 px from any hole"}
dt_tab = pd.DataFrame({
    **{f"seed {s_}": {v: dt["per_seed"][s_][k]["sample_minus_inpaint_db"] for k, v in REG5.items()}
       for s_ in dt["per_seed"]},
    "first-step estimate (mean)": {v: np.mean([dt["per_seed"][s_][k]["est_step0_minus_inpaint_db"]
                                               for s_ in dt["per_seed"]]) for k, v in REG5.items()},
    "band fill (1 px)": {v: dt["model_free"][k]["band1_inpaint_minus_inpaint_db"] for k, v in REG5.items()},
})
display(dt_tab.round(2).rename_axis("vs flow warp + inpaint (dB)"))
probe_table(pg, ["probe (gated residual)", "stored AVE, filled cond."])
bmg = pg["build_metrics"]
fit_g, flat_g = bmg["fit_gap_db/0"] >= 0, bmg["plateau_stable/0"] <= 0.05
w_out1 = [dt["per_seed"][s_]["dis_out1"]["sample_minus_inpaint_db"] for s_ in dt["per_seed"]]
v_out1 = [dt["per_seed"][s_]["vis_out1"]["sample_minus_inpaint_db"] for s_ in dt["per_seed"]]
v_far = [dt["per_seed"][s_]["vis_far"]["sample_minus_inpaint_db"] for s_ in dt["per_seed"]]
# the merged checkpoint's other seeds, and what each _gated claim would read at every seed
g_fit, g_ok = fit_gap["AVE, gated"], [v >= 0 for v in fit_gap["AVE, gated"]]
g_all = {c_.id: claims.verdict_of(c_.measured, c_.op, c_.target)
         for c_ in rec.claims if c_.id.endswith("_gated")}
g_reg = {c_.id: c_.verdict for c_ in rec.claims if c_.id.endswith("_gated")}
gated_seeds_text = "" if quick else (
    f" The merged checkpoint's seeds read {per(g_fit)} dB on their training clips (this run, "
    f"`gated_fits_training_clips`), so the condition holds at seed(s) "
    f"{', '.join(str(s_) for s_, ok in zip(seeds, g_ok) if ok) or 'none'}"
    + ("" if all(g_ok) else ": the probe's pass did not replicate at every seed, and the `_gated` claims "
       "are read at the qualifying seed(s) only")
    + ". Counted at every seed instead (descriptive, not the registered reading), they would read "
    + "; ".join(f"`{k}` {g_all[k]} ({'the same' if g_all[k] == g_reg[k] else 'registered: ' + g_reg[k]})"
                for k in g_all) + ".")
display(Markdown(f"""
**What it found.** The wrongly trusted pixels are not special: 1 px outside a hole the sample is
{span(w_out1, '+.1f')} dB against the warp where the flow wrongly trusts it, and {span(v_out1, '+.1f')} dB where
the pixel is truly visible; more than 2 px from any hole, where the warp is near exact
({dt['per_seed']['0']['vis_far']['inpaint_db']:.0f} dB), {span(v_far, '+.1f')} dB. The generator adds error
wherever its base is already right, and its estimate from pure noise already does. A band the warp does not
trust makes the model-free fill itself {dt['model_free']['dis']['band1_inpaint_minus_inpaint_db']:+.1f} dB
on disoccluded pixels, so it was not used, and marking the wrongly trusted pixels would not reach the truly
visible ones that lose as much.

**The registered recipe** (`make_propagators_onestep.py --name propagators_gated`, fixed before training):
round 4's recipe unchanged plus a **gated residual**: the network's last layer also gives a per-pixel gate,
and its prediction is the base plus the gated residual, so it can return the warp or the fill exactly where
they are right, whatever its noisy state. Same conditions and rule as round 4. The seed-0 probe reads
{bmg['fit_gap_db/0']:+.2f} dB on its training clips and a stable-phase plateau of
{bmg['plateau_stable/0']:.3f}: it {'meets' if fit_g else 'misses'} the fit condition and
{'meets' if flat_g else 'misses'} the plateau, so by the rule {"seeds 1 and 2 were trained with the same recipe, and the merged checkpoint is the chapter's labelled variant *AVE, gated* (sections 3-8; its claims end in `_gated`), replacing the round-3 *AVE, filled cond.*" if pg['meets_rule'] else
'no weights of it are stored and the chapter keeps its stored models'}. On edited test clips it is
{pg['measured']['probe']['dis_gain_db']:+.2f} dB against flow warp + inpaint on disoccluded pixels and
{pg['measured']['probe']['vis_gain_db']:+.2f} dB against flow warp on visible pixels (stored variant:
{pg['measured']['stored']['dis_gain_db']:+.2f} and {pg['measured']['stored']['vis_gain_db']:+.2f} dB). Training took
{bmg['train_seconds/0'] / 60:.0f} min on one core.{gated_seeds_text}
"""))

# %% [markdown]
# **The probe's own diagnosis** (the same two diagnoses run on its seed-0 build: `diagnose_probe_gated.json`,
# `diagnose_trusted_probe_gated.json`). Did the gate close where the base is right, and where does it still
# lose to flow warp + inpaint?

# %% tags=["remove-input"]
dgp = jfile("diagnose_probe_gated.json")["per_seed"]["0"]
dtp = jfile("diagnose_trusted_probe_gated.json")["per_seed"]["0"]
REG_P = {"dis": "disoccluded, all", "dis_trusted": "flow wrongly trusts a warp",
         "hole_d1": "hole, 1 px from a trusted pixel", "hole_d2": "hole, 2 px",
         "hole_d3-4": "hole, 3-4 px", "hole_d5+": "hole, 5 px or more"}
gp_tab = pd.DataFrame({
    f"{lab}: {col}": {v: src[k][key] for k, v in REG_P.items()}
    for lab, src in (("gated probe", dgp), ("round-4 probe", dpr), ("stored", d0))
    for col, key in (("first step", "est_step0_minus_inpaint_db"), ("1 sample", "sample_minus_inpaint_db"))
})
display(gp_tab.round(2).rename_axis("seed 0, vs flow warp + inpaint (dB)"))
far_g, far_s = dtp["vis_far"]["sample_minus_inpaint_db"], dt["per_seed"]["0"]["vis_far"]["sample_minus_inpaint_db"]
out1_g = dtp["vis_out1"]["sample_minus_inpaint_db"]
out1_s = dt["per_seed"]["0"]["vis_out1"]["sample_minus_inpaint_db"]
border_g = [dgp[k]["sample_minus_inpaint_db"] for k in ("dis_trusted", "hole_d1")]
display(Markdown(f"""
On visible pixels more than 2 px from any hole the probe's sample is {far_g:+.2f} dB against the warp (stored
variant {far_s:+.2f} dB), and 1 px outside a hole {out1_g:+.2f} dB ({out1_s:+.2f} dB): the gate
{'moved the generator to the warp where the warp is right' if far_g > far_s / 2 else 'did not bring the generator back to the warp where the warp is right'}.
On the disoccluded pixels of the fit condition its first-step estimate is {dgp['dis']['est_step0_minus_inpaint_db']:+.2f}
dB against inpainting and one sample {dgp['dis']['sample_minus_inpaint_db']:+.2f} dB; on the pixels the flow wrongly
trusts and 1 px inside a hole one sample is {border_g[0]:+.2f} and {border_g[1]:+.2f} dB
{'(still losing there)' if max(border_g) < 0 else '(no longer losing on both)'}.
"""))


# %% [markdown]
# - **Disoccluded pixels.** Against warping plus biharmonic inpainting, section 7 measures where the learned fill
#   stands and why (sampling variance, sampling steps, the fill learned on training clips, the conditioning); the
#   variant trained with the inpainted warp in its conditioning and a gated residual (*AVE, gated*) is read on
#   the same claims under its own conditions.
# - **Instruction following** is the PSNR inside the edited region against the intended edit, on the frames the
#   propagator made; the keyframes are the editor's own output, so it measures how well propagation keeps the
#   edit, not the editor. The toy editor stands in for an instruction-following image editor.
# - **Editor quality** is emulated by degrading one toy editor's output (hue bias, blur, noise) at five levels;
#   the paper compares different image editors. A correlation is expected of any propagator that copies its
#   anchors; the slope beside warp + inpaint's is the informative part.
# - **Temporal consistency** is claimed twice: against per-frame editing (which flickers by construction) and
#   against flow warp + inpaint (consistent by construction), the bar a generator has to meet.
# - **Content fidelity** is split by section 4's true-flow oracle into the flow's share and the invented
#   background's.
# - **Reconstructed method.** Only the abstract is public; the conditioning, the anchor replacement rule and the
#   training objective are ours.

# %% tags=["remove-input"]
cfg_run = ave.checkpoint_config("propagators")
if quick:
    cfg_run.update(n_train_clips=6, steps=60)
g_sched = "" if quick else " with a warmup-stable-decay schedule"
display(Markdown(f"""
- **Scale** (this run). {T}-frame {size}×{size} clips, a {n_par / 1000:.0f}k-parameter U-Net trained for
  {cfg_run['steps']:,} steps on {cfg_run['n_train_clips']} clips, {n_test_clips} test clips per seed
  ({min(n_diag_clips, n_test_clips)} in the diagnosis of section 7, {n_quality_clips} in the editor-quality
  ablation), {len(seeds)} seed(s). The gated variant (*AVE, gated*): the same width and
  clips, trained for {cfg_run['steps'] if quick else cfg_g['steps']:,} steps{g_sched}.
"""))
