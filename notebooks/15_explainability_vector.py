# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # An explainability vector: giving a classifier patch-level explanations by adding a weight difference
#
# A *self-explaining* image classifier outputs, in the same forward pass as its prediction, a map of which image
# patches support it. Training one needs explanation labels (patch relevance) for every domain. The paper asks
# whether that ability can be **moved by task arithmetic**: train two copies of a CLIP-style ViT on a source domain
# from the same pre-trained weights, one with explanation supervision and one without; their weight difference
# is the **explainability vector** τ. Add λ·τ to a *prediction-only* model fine-tuned on another domain, with no
# explanation labels there, and see whether it now explains itself. The paper reports consistent gains on ten target
# datasets with accuracy largely preserved, and that model-internal features, computed without target explanations,
# carry signal about which targets gain; its predecessor found the one-inference maps comparable to Kernel SHAP
# with 150 inferences, and no gain between unrelated domains.
#
# | | the paper | this notebook |
# |---|---|---|
# | pre-trained model | CLIP ViT (VLM-based), frozen text embeddings of class names | a 3-block ViT (d = 64, conv patch stem, 36 patches, 174 k parameters) pre-trained here on every class for 5000 steps; its class embeddings are learned in that pre-training and then frozen: the shared "text" space |
# | source | ImageNet-1k with patch-level explanation supervision | 14 of the 19 classes (digits, shapes, letters) on brick/gravel among distractors, the label object's box per patch |
# | targets | ten image datasets | nine synthetic domains, from "new background" to "the label is a shape beside a decoy digit or letter of a class"; fine-tuned gently from θ₀ (few steps, half the learning rate; the rotated and the three new-ink targets on three times the images, recipes chosen by registered seed-0 probes); and (round 6, section 6) twenty targets that each change one factor of the source, their relatedness measured under θ₀ |
# | explanation judged by | localisation and faithfulness | patch AUROC against the label-deciding region, and deletion/insertion on the model that produced each map |
# | reference | Kernel SHAP, 150 inferences | Kernel SHAP over the 36 patches, 150 coalitions, on the same model |
# | seeds | — | 3 seeds; each seed pre-trains its own θ₀ (initialization and batch order; the data are fixed), then fine-tunes its own source pair and target models from it |
# | hardware | GPUs | 2 shared CPU cores; training in a checkpoint script, the default run evaluates |
#
# :::{note}
# **What is reconstructed.** Only the abstracts of the paper and its predecessor are available. The task-arithmetic
# recipe (τ = θ_SE − θ_pred from the same start and data order; θ_T + λτ) follows them. **Reconstructed by us:** the
# self-explaining head (the CLS projection applied to patch tokens, cosine to the class embedding), the
# explanation loss (MSE between standardized map and mask), λ = 1 fixed in advance, the *a priori* features and
# their leave-one-target-out validation, the relatedness levels of the target series, and everything about the data
# and the model, which are synthetic stand-ins for ImageNet and CLIP (no pretrained weights are available offline).
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
#
# The default run loads the models (`models_r4`, round 4 of the benchmark with round 5's fit recipes) trained by
# `data/15_explainability_vector/make_models.py` (per seed 0, 1, 2:
# pre-training, the source pair and every target model) and evaluates them, and the faithfulness table of section 4
# computed from them by `make_shap_table.py` (part of it recomputed live and checked); `SEED=n` must then be 0 (the stored
# seeds start at it). Quick mode trains a tiny version live, for any seed.

# %% tags=["parameters"]
quick = False
seed = 0
n_test = 300  # held-out images per domain
lam = 1.0  # the transfer coefficient, fixed in advance
n_shap = (
    24  # images per target explained by Kernel SHAP and scored by deletion/insertion
)
n_coalitions = 150

# %% tags=["hide-input"]
import json
import time

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from IPython.display import Markdown, display

from helpers import checkpoints, claims, plotting, repro, train
from helpers import explainability_vector as ev

cfg = ev.checkpoint_config("models_r4")
ASPECT = cfg["aspect"]  # every digit stretched to fill its square (round 4)
if quick:  # a tiny live version of the checkpoint's training
    n_test, n_shap, n_coalitions = 80, 8, 40
    cfg.update(
        target_recipe={},  # the stored models' 9000-image recipes are too slow live
        n_train=200,
        n_pretrain=400,
        batch_size=32,
        pretrain_steps=60,
        source_steps=20,
        target_steps=15,
        seeds=[0],
        targets=["digits on grass", "rotated", "marker"],
        model=dict(cfg["model"], d_model=24, depth=1, emb_dim=16, stem=8),
    )
TARGETS = cfg["targets"]
seeds = [seed + i for i in range(len(cfg["seeds"]))]
lams = [0.0, 0.25, 0.5, 1.0, 1.5, 2.0]

env = repro.setup(
    seed, threads=1
)  # small ops: one thread wastes nothing on a shared machine
plotting.use_style()
rec = claims.ClaimsRecord(
    "15_explainability_vector",
    dict(
        quick=quick,
        seed=seed,
        n_test=n_test,
        lam=lam,
        n_shap=n_shap,
        n_coalitions=n_coalitions,
        seeds=seeds,
        targets=TARGETS,
    ),
)
print(env)

# %% [markdown]
# ## 1. Domains: a source and a graded series of targets, built so that localisation needs the model
#
# Every image holds **four objects of the same size range, stroke and ink, one per quadrant**, on a texture: the
# object that decides the label and three distractors. The distractors are letters that are no class anywhere (C,
# D, F, J, …: the same font as the class letters); "cluttered" swaps two of them for whole shapes of classes it does
# not use, and the marker domains one for a digit or letter *of a class* as a decoy. Every object is thinned to
# its skeleton and redrawn with **one stroke width** (digits, letters and shape outlines differ in form only),
# every object is **stretched to fill its square** (round 4: a digit used to keep its own aspect, and a reviewer
# found that the narrowest ink box in a scene then pointed at the digit), and each distractor is drawn so that its
# **total ink matches the label object's** (the closest of eight draws).
# The relevance mask is the label object's bounding box, pooled per 4×4 patch (36 patches). Pre-training sees all
# 19 classes on all four textures in plain white ink, with labels only (the new inks and the quarter turn of the
# targets are new to θ₀). The source covers 14 classes (digits 0–7, circle/square/triangle, A/E/H) on brick/gravel;
# the other five are *unseen* there. The targets form a series whose **relatedness to the source was fixed before
# any result**: 3 = the same kind of object on a new background; 2 = a new ink (inverted, coloured, striped); 1 = a
# harder shift (a quarter turn, or whole shapes as clutter); 0 = the label is a shape *marker* while a digit or
# letter of a class (one the source labels) sits beside it as a decoy. A vector that teaches "highlight the
# object" should help most at 3 and can hurt at 0.

# %%
test = {name: ev.make_domain(name, n_test, 1, aspect=ASPECT)
        for name in ["source", *TARGETS]}
test_pre = ev.make_domain("pretrain", n_test, 1, aspect=ASPECT)  # θ0's accuracy only
print(
    pd.Series({t: ev.RELATEDNESS[t] for t in TARGETS}, name="relatedness").to_frame().T
)
fig, ax = plt.subplots(2, len(test), figsize=(1.3 * len(test), 2.9))
for j, (name, dom) in enumerate(test.items()):
    ax[0, j].imshow(dom.images[0].permute(1, 2, 0).numpy())
    ax[0, j].set_title(name, fontsize=7)
    ax[1, j].imshow(dom.mask[0].view(6, 6).numpy(), cmap="magma", vmin=0, vmax=1)
for a in ax.ravel():
    a.set(xticks=[], yticks=[])
    a.grid(False)
plt.tight_layout()
plt.show()

# %% [markdown]
# **Does the benchmark need a model?** Maps that use no model at all (`ev.model_free_maps`): `|pixel − image
# mean|` per patch, `|pixel − median colour|`, the pixels' standard deviation within a patch, the Sobel edge
# magnitude, darkness (for dark objects), and four maps that know the layout (one object per quadrant) but no
# class and score whole quadrants: the densest and the thinnest stroke (an earlier reviewer found these
# localised the label object on three targets when each kind kept its own stroke), the most and the least ink,
# and the smallest and the largest ink bounding box (`ev.object_box_maps`; the smallest found the digit on four
# targets of round 3, when digits kept their aspect, which is why round 4 stretches them).
# Where one of them localises the label-deciding region, patch AUROC cannot tell a good explanation from a salient
# object. The condition `needs_the_model` is read **per target** (registered with these domains, before their
# models were trained): a target whose best model-free map scores patch AUROC above the registered bar
# (`cfg["conditions"]`, printed with the condition) leaves the localisation claims, and at least six targets must
# remain. The same images *without* the distractors (the label object alone
# on its texture, the chapter's first design) are the negative control: there a model-free map finds the object.

# %%
# the maps the stored models' condition reads: round 4's eleven (ev.FREE_MAPS_R4)
FREE_MAPS = cfg["conditions"].get("free_maps", ev.FREE_MAPS_R3)
free_auc = pd.DataFrame(
    {t: ev.model_free_aurocs(test[t], FREE_MAPS) for t in TARGETS}
).T
free_auc["best"] = free_auc.max(axis=1)
free_auc["best, no distractors"] = [
    max(ev.model_free_aurocs(
        ev.make_domain(t, n_test, 1, distractors=False, aspect=ASPECT), FREE_MAPS
    ).values())
    for t in TARGETS
]
display(free_auc.round(3).style.set_caption("model-free maps, patch AUROC per target"))
contrast_auc = free_auc["best"].to_dict()
# the registered per-target reading: the targets the localisation claims use
LOC_TARGETS = ev.localisation_targets(contrast_auc, cfg["conditions"])
print("targets that need the model:", len(LOC_TARGETS), "of", len(TARGETS),
      "| left out:", [t for t in TARGETS if t not in LOC_TARGETS] or "none")
# the localisation claims rank these targets (all of them when fewer than three are
# left, as in quick mode: then the condition fails and the claims are inconclusive)
EVAL_TARGETS = LOC_TARGETS if len(LOC_TARGETS) >= 3 else TARGETS

# %% [markdown]
# ## 2. The method
#
# **The model.** A ViT whose head is CLIP-like: `logit_c = s · cos(W h_CLS, t_c)`, with class embeddings `t_c`
# learned once in pre-training over every class and frozen afterwards, so every domain's head lives in one space
# (the role of CLIP's text tower). The same projection on a patch token, `e_{j,c} = cos(W h_j, t_c)`, is that patch's
# relevance for class c: prediction and explanation come from one inference.
#
# **Training.** `L = CE + β · MSE(z(e_{·,y}), z(mask))` with z a per-image standardization; β = 0 is the
# prediction-only model. **The explainability vector** is `τ = θ_SE − θ_pred`, both fine-tuned on the source from
# the same pre-trained θ₀ with the same batches; **transfer** is `θ_T + λτ`, with θ_T the target's prediction-only
# model, fine-tuned from θ₀ with β = 0 and no explanation labels. Task arithmetic is made for models that stay near
# a strong pre-trained start, so the recipe (since round 3) moves toward that regime: a wider, deeper θ₀ (d = 64, three
# blocks) pre-trained longer (5000 steps), and gentle target fine-tuning (400 steps at half the source's learning
# rate, the whole network: fine-tuning only the top left the new-ink targets far below the accuracy bar in an
# earlier round, a new ink needs the stem to move). The rotated target and the three new-ink targets (inverted,
# coloured, striped) over-fitted their 3000 training images in earlier rounds (near-perfect on them, under the
# accuracy bar held out), so they are fine-tuned on 9000 images (rotated for three times the steps), each recipe
# picked by a rule registered before a seed-0 probe (the last section). Per seed: its own pre-trained θ₀, and
# from it its own source pair (so its own τ) and its own target models. The paper starts every run from one fixed
# CLIP; here θ₀ is ours, so a seed redraws it too, and the spread over seeds includes what a different pre-training
# run would change (the claims are about the recipe, not about one θ₀).

# %%
if quick:
    cfg["seeds"] = seeds
    t0 = time.time()
    states, history, train_metrics = ev.train_all(
        cfg, n_eval=n_test, log=None, progress=not quick
    )
    print(f"trained live in {time.time() - t0:.0f} s")
else:
    ckpt = checkpoints.load("15_explainability_vector", "models_r4", config=cfg)
    try:  # SEED=n outside the stored seeds: a clear error, not a KeyError below
        checkpoints.require_seeds(ckpt, seeds)
    except checkpoints.CheckpointError as e:
        raise checkpoints.CheckpointError(
            f"{e} (Other seeds: set them in ev.checkpoint_config and rebuild with "
            "`make data NB=15_explainability_vector`, about an hour.)"
        ) from None
    # θ0 is stored whole, every other model as its difference from θ0 (τ as itself)
    states = ev.unpack_states(ckpt.tensors)
    print("steps:", {k: cfg[k] for k in ("pretrain_steps", "source_steps",
                                         "target_steps")})
    train_metrics, history = ckpt.manifest["metrics"], ckpt.manifest["history"]
    fig, ax = plt.subplots(1, 2, figsize=(10, 3.2))
    checkpoints.plot_history(
        ckpt.manifest,
        [f"loss/s{s}/theta0" for s in seeds],
        ax=ax[0],
        logy=True,
        title="pre-training θ0, one per seed (all classes)",
    )
    checkpoints.plot_history(
        ckpt.manifest,
        ["loss/s0/source", "loss/s0/T/"],
        ax=ax[1],
        logy=True,
        title="fine-tuning, seed 0",
    )
    ax[1].legend(fontsize=5, ncol=2)
    plt.show()


def model_from(state):
    m = ev.TinyViT(**cfg["model"])
    m.load_state_dict(state)
    return m.eval()


# %%
theta0 = {s: states[f"s{s}/theta0"] for s in seeds}
# the explainability vector, one per seed: the key line
tau = {
    s: ev.task_vector(states[f"s{s}/source_se"], states[f"s{s}/source_pred"])
    for s in seeds
}
print(
    f"‖τ‖ = {ev.flat(tau[seeds[0]]).norm():.3f}, "
    f"‖θ0‖ = {ev.flat(theta0[seeds[0]]).norm():.1f} (seed {seeds[0]})"
)
acc_table = pd.DataFrame(
    {
        s: {
            "θ0, pre-training domain": ev.evaluate(model_from(theta0[s]), test_pre)[0],
            "θ0 on the source, not fine-tuned": ev.evaluate(
                model_from(theta0[s]), test["source"]
            )[0],
            "source, prediction-only": ev.evaluate(
                model_from(states[f"s{s}/source_pred"]), test["source"]
            )[0],
            "source, self-explaining": ev.evaluate(
                model_from(states[f"s{s}/source_se"]), test["source"]
            )[0],
            **{
                f"θ_T {t}": ev.evaluate(
                    model_from(states[f"s{s}/T/{ev.key(t)}"]), test[t]
                )[0]
                for t in TARGETS
            },
        }
        for s in seeds
    }
)
acc_table.columns = [f"seed {s}" for s in seeds]
display(acc_table.round(3).style.set_caption("held-out accuracy of the trained models"))
t_acc = acc_table.loc[[f"θ_T {t}" for t in TARGETS]].mean(axis=1)
print(
    "targets whose θ_T is below 80 % accuracy (mean over seeds):",
    {k[4:]: round(v, 3) for k, v in t_acc[t_acc < 0.8].items()} or "none",
)
print(
    "θ0 before fine-tuning, accuracy on each target (seed 0):",
    {
        t: round(ev.evaluate(model_from(theta0[seeds[0]]), test[t])[0], 3)
        for t in TARGETS
    },
)

# %% [markdown]
# **Checks.** Two β = 0 runs with the same seed and batches give the same weights (so τ measures only the explanation
# loss; a tiny live run); random maps score AUROC ≈ 0.5; on the source, the self-explaining model localises better <!-- paper -->
# than its prediction-only twin at every seed; θ_T + 0·τ is θ_T exactly; and the stored models (their weights
# compressed, the target models' changes at 4 bits) reproduce the held-out accuracy the trained ones had, within
# two points.

# %%
if not quick:  # the stored models (int8, target changes at 4 bits) against the trained
    held = {t: ev.make_domain(t, 300, 1000, aspect=ASPECT)  # the script's held-out
            for t in TARGETS}
    acc_gap = {
        (s, t): ev.evaluate(model_from(states[f"s{s}/T/{ev.key(t)}"]), held[t])[0]
        - train_metrics[f"acc/s{s}/T/{ev.key(t)}"]
        for s in seeds
        for t in TARGETS
    }
    worst_gap = max(acc_gap, key=lambda k: abs(acc_gap[k]))
    rec.check(
        "stored_models_reproduce_accuracy",
        abs(acc_gap[worst_gap]),
        0.02,
        op="<=",
        note="held-out accuracy of each stored θ_T minus the trained model's; worst: "
        f"seed {worst_gap[0]}, {worst_gap[1]}, {acc_gap[worst_gap]:+.3f}",
    )

# %%
tiny = ev.make_domain("source", 64, 5)
small = dict(d_model=16, depth=1, n_head=2, emb_dim=8, stem=4)
with repro.seeded(seed):
    init = ev.TinyViT(**small).state_dict()
a_, _ = ev.train_model(tiny, 5, init=init, batch_size=8, seed=seed, model_cfg=small)
b_, _ = ev.train_model(tiny, 5, init=init, batch_size=8, seed=seed, model_cfg=small)
rec.check(
    "zero_vector_when_same",
    float(ev.flat(ev.task_vector(a_.state_dict(), b_.state_dict())).abs().max()),
    0.0,
    op="==",
    note="two identical β=0 runs: τ = 0 exactly",
)
rand_auc = ev.patch_auroc(
    torch.as_tensor(repro.rng(seed, 3).random(test["source"].mask.shape)),
    test["source"].mask,
)
rec.check(
    "random_map_auroc",
    abs(rand_auc - 0.5),
    0.05,
    op="<=",
    note=f"random maps AUROC {rand_auc:.3f}",
)
src_auc = {
    s: {
        tag: ev.patch_auroc(
            ev.evaluate(model_from(states[f"s{s}/{tag}"]), test["source"])[1],
            test["source"].mask,
        )
        for tag in ("source_pred", "source_se")
    }
    for s in seeds
}
print(pd.DataFrame(src_auc).round(3))
rec.check(
    "source_se_better",
    min(v["source_se"] - v["source_pred"] for v in src_auc.values()),
    0.0,
    op=">",
    note="source self-explaining AUROC > prediction-only, at every seed",
)
name0 = TARGETS[0]
m0 = model_from(
    ev.add_vector(states[f"s{seeds[0]}/T/{ev.key(name0)}"], tau[seeds[0]], 0.0)
)
with torch.no_grad():
    same = torch.equal(
        m0(test[name0].images, test[name0].classes)[0],
        model_from(states[f"s{seeds[0]}/T/{ev.key(name0)}"])(
            test[name0].images, test[name0].classes
        )[0],
    )
rec.check(
    "lambda_zero_identity", same, True, note="θ_T + 0·τ gives bit-identical logits"
)

# %% [markdown]
# ## 3. Transfer to the targets, λ sweep
#
# For each seed and target: the transferred models θ_T + λτ over a grid of λ, scored by accuracy and patch AUROC
# against the label-deciding region (and the pointing game: is the top patch relevant?). Two maps that need no
# explanation labels are the **baselines**: the prediction-only model's own patch map (λ = 0), and **gradient ×
# input** saliency of θ_T pooled per patch (one forward and one backward pass), the usual post-hoc choice, and
# plain **|gradient|** (the same pass without multiplying by the input, so a dark object is not faded). The AUROC is
# also split by whether the test image's class was seen in the source. Task arithmetic works when vectors are
# *disentangled* (Ortiz-Jiménez et al. 2023): adding τ should change what the model explains, not what it predicts.
# The third table measures that on each target's own task, the share of θ_T's predictions that adding λτ changes;
# beside the accuracy against λ it is the cost of the transfer.

# %%
seen_ids = {ev.CLASS_NAMES.index(c) for c in ev.SEEN}


def sweep_rows(s, name):
    """One seed and target: accuracy, patch AUROC (all, seen / unseen classes) and
    pointing game of θ_T + λτ for every λ, and the gradient × input and |gradient|
    maps of θ_T."""
    te_, base, rows = test[name], states[f"s{s}/T/{ev.key(name)}"], []
    seen = torch.tensor([te_.classes[y] in seen_ids for y in te_.labels.tolist()])
    with torch.no_grad():
        pred0 = model_from(base)(te_.images, te_.classes)[0].argmax(1)
    for lm in lams:
        m = model_from(ev.add_vector(base, tau[s], lm))
        acc, maps = ev.evaluate(m, te_)
        with torch.no_grad():  # which predictions adding λτ changes
            pred = m(te_.images, te_.classes)[0].argmax(1)
        row = dict(seed=s, target=name, map=f"λ={lm}", lam=lm, acc=acc,
                   changed=float((pred != pred0).float().mean()),
                   auroc=ev.patch_auroc(maps, te_.mask),
                   pointing=ev.pointing_game(maps, te_.mask))
        for part, sel in (("seen", seen), ("unseen", ~seen)):
            ok = sel & (te_.mask > 0.25).any(1)
            row[f"auroc {part}"] = (ev.patch_auroc(maps[ok], te_.mask[ok])
                                    if ok.sum() >= 5 else np.nan)
        rows.append(row)
    grad = ev.gradient_map(model_from(base), te_.images, te_.classes, te_.labels)
    rows.append(dict(seed=s, target=name, map="gradient×input", lam=np.nan, acc=np.nan,
                     auroc=ev.patch_auroc(grad, te_.mask),
                     pointing=ev.pointing_game(grad, te_.mask)))
    gmag = ev.gradient_magnitude_map(model_from(base), te_.images, te_.classes,
                                     te_.labels)
    rows.append(dict(seed=s, target=name, map="|gradient|", lam=np.nan, acc=np.nan,
                     auroc=ev.patch_auroc(gmag, te_.mask),
                     pointing=ev.pointing_game(gmag, te_.mask)))
    return rows


rows = [row for s in seeds for name in TARGETS for row in sweep_rows(s, name)]
sweep = pd.DataFrame(rows)
order = [f"λ={lm}" for lm in lams] + ["gradient×input", "|gradient|"]
mean_auc = sweep.pivot_table(index="target", columns="map", values="auroc").reindex(
    index=TARGETS, columns=order
)
display(mean_auc.round(3).style.set_caption("patch AUROC, mean over seeds"))
display(
    sweep.pivot_table(index="target", columns="map", values="acc")
    .reindex(index=TARGETS, columns=[o for o in order if o.startswith("λ")])
    .round(3)
    .style.set_caption("accuracy, mean over seeds")
)
# weight disentanglement on the target's own task: the share of θ_T's predictions that
# adding λτ changes (0: τ leaves what θ_T does alone)
display(
    sweep.pivot_table(index="target", columns="map", values="changed")
    .reindex(index=TARGETS, columns=[o for o in order if o.startswith("λ")])
    .round(3)
    .style.set_caption("predictions changed by adding λτ, mean over seeds")
)

# %% [markdown]
# **Is this task arithmetic's regime?** (Exploratory, no claim; planned before these models' maps were scored.)
# Task vectors of different tasks are near orthogonal in weight space, and in the regime where task arithmetic
# works, adding one leaves the other task alone. Orthogonality alone does not show that: a random direction is
# orthogonal too. So beside cos(τ, τ_T), with τ_T = θ_T − θ₀, we add to θ_T a **random direction with τ's norm
# in every tensor** (`ev.random_like`) and compare the accuracy it costs with what τ costs. If the random
# direction costs as much, the loss is simply that sensitive to a step of τ's size (the model is not in the
# linear regime); if τ costs more, it interferes with the target task through what it encodes.

# %%
def regime_row(s, name):
    """cos(τ, τ_T), the norms, and the accuracy change of θ_T + λτ and of θ_T + λ·(a
    random direction with τ's per-tensor norms), on the target's test images."""
    sd_T, rnd = states[f"s{s}/T/{ev.key(name)}"], ev.random_like(tau[s], seed=s)
    v_T, v_tau = ev.flat(ev.task_vector(sd_T, theta0[s])), ev.flat(tau[s])
    steps = (("θ_T", tau[s], 0.0), ("τ", tau[s], lam), ("random", rnd, lam))
    acc = {k: ev.evaluate(model_from(ev.add_vector(sd_T, v, lm)), test[name])[0]
           for k, v, lm in steps}
    return {"seed": s, "target": name,
            "cos(τ, τ_T)": float(F.cosine_similarity(v_tau, v_T, dim=0)),
            "cos(random, τ_T)": float(F.cosine_similarity(ev.flat(rnd), v_T, dim=0)),
            "‖τ‖/‖τ_T‖": float(v_tau.norm() / v_T.norm()),
            "Δacc, τ": acc["τ"] - acc["θ_T"],
            "Δacc, random": acc["random"] - acc["θ_T"]}


regime = pd.DataFrame([regime_row(s, t) for s in seeds for t in TARGETS])
display(regime.groupby("target").mean(numeric_only=True).drop(columns="seed")
        .reindex(TARGETS).round(3)
        .style.set_caption(f"task-arithmetic regime at λ={lam}, mean over seeds"))

# %%
sw = sweep[sweep["map"].str.startswith("λ")]
fig, ax = plt.subplots(1, 2, figsize=(10, 3.4))
for name in TARGETS:
    r = sw[sw.target == name].groupby("lam")[["auroc", "acc"]].mean()
    style = dict(ls="--") if ev.RELATEDNESS[name] == 0 else {}
    ax[0].plot(
        r.index, r.auroc, marker="o", label=f"{name} ({ev.RELATEDNESS[name]})", **style
    )
    ax[1].plot(r.index, r.acc, marker="o", **style)
ax[0].axhline(0.5, color="gray", lw=0.8, ls=":")
ax[0].set(
    xlabel="λ", ylabel="patch AUROC", title="explanation quality (mean over seeds)"
)
ax[1].set(xlabel="λ", ylabel="accuracy", title="classification")
for a in ax:
    a.axvline(lam, color="gray", lw=0.8)
ax[0].legend(fontsize=7, ncol=2, title="target (relatedness)", title_fontsize=7)
plt.tight_layout()
plt.show()
at = sw[sw.lam == lam].set_index(["seed", "target"])
at0 = sw[sw.lam == 0].set_index(["seed", "target"])
split = (
    (at[["auroc seen", "auroc unseen"]] - at0[["auroc seen", "auroc unseen"]])
    .groupby("target")
    .mean()
    .reindex(TARGETS)
)
display(
    split.round(3).style.set_caption(
        f"AUROC gain at λ={lam} over θ_T's own map (λ=0), "
        "by class seen / unseen in the source"
    )
)

# %% [markdown]
# ## 4. Faithfulness, and the Kernel SHAP reference
#
# AUROC compares a map with the region we *know* decides the label; deletion/insertion ask the *model*: remove (or
# reveal) patches in the order of the map and follow the true-class probability (deletion: lower area is better;
# insertion: higher). Each map is scored on **the model that produced it**: θ_T's own map and its gradient map on
# θ_T, the transferred map on θ_T + λτ. Kernel SHAP (150 coalitions, so 150 inferences per image, the predecessor's
# reference) explains the *transferred* model too, so the one-inference map and SHAP are compared on one model, and
# so is the one-pass competitor, gradient × input computed on θ_T + λτ. **How a patch is removed** matters: a flat
# square of the image's mean colour is something no training image contains, so its deletion curve mixes what the
# patch carried with how far the fill pushes the model off its data, and Kernel SHAP, whose coalitions use that
# same fill, has a home advantage there. The claim therefore reads deletion with a **ROAD-style fill** (registered
# before these models were read): the removed pixels are imputed from their neighbours (each the weighted mean of
# its eight neighbours, a linear system solved with the kept pixels fixed) plus a little noise
# (`ev.road_fill`), so a removed patch continues the texture and strokes around it. The mean fill and a blurred
# fill are reported beside it. Deletion AUCs of maps on *different* models (θ_T vs θ_T + λτ, whose accuracies differ)
# are not comparable, so compare rows that share a model. One more label-free baseline sits in this table:
# **occlusion** on θ_T (each patch in turn replaced by the blurred image, the fall in log p(true) as its score,
# 37 inferences per image; `ev.occlusion_map`), too slow for the 300 images of section 3, so it is compared with
# the transferred map here on the same images (exploratory; added before these models' maps were scored).

# %% [markdown]
# `ev.faithfulness` scores one target's maps this way on its first `n_shap` test images. Kernel SHAP's 150
# inferences per image over every seed and target, and each map's deletion under three fills, are the slowest part
# of the chapter, so the default run reads the table that `data/15_explainability_vector/make_shap_table.py`
# computed from the stored models (with these parameters; other parameters compute it all live), **recomputes the
# rows of three targets at the first seed live** (also the saliency grid below) and checks that they agree with the
# stored ones. Quick mode computes everything live.

# %%
show = [TARGETS[0], TARGETS[len(TARGETS) // 2], TARGETS[-1]]  # live, and in the grid


def faith_rows(s, name):
    """One seed and target: every map's AUROC and deletion / insertion AUCs, each on
    the model it comes from (θ_T, or θ_T + λτ for the transferred map and SHAP)."""
    base = states[f"s{s}/T/{ev.key(name)}"]
    m_T, m_tr = model_from(base), model_from(ev.add_vector(base, tau[s], lam))
    rows_, first = ev.faithfulness(m_T, m_tr, test[name], n_shap, n_coalitions, s)
    return [dict(seed=s, target=name, **r) for r in rows_], first


fcfg = dict(ev.checkpoint_config("faithfulness"), n_test=n_test, n_shap=n_shap,
            n_coalitions=n_coalitions, lam=lam, seeds=seeds, targets=TARGETS)
stored = None
if not quick:
    try:
        stored = checkpoints.load("15_explainability_vector", "faithfulness",
                                  config=fcfg)
    except checkpoints.ConfigMismatch:
        print("parameters differ from the stored table's: computing it all live")
live_cells = ([(s, t) for s in seeds for t in TARGETS] if stored is None
              else [(seeds[0], t) for t in show])
live, shap_maps = [], {}
for s, name in live_cells:
    rows_, first = faith_rows(s, name)
    live += rows_
    if s == seeds[0]:
        shap_maps[name] = first
live = pd.DataFrame(live)
faith = live
if stored is not None:
    faith = pd.DataFrame(stored.tensors["table"].double().numpy(),
                         columns=stored.manifest["extra"]["columns"])
    faith[["seed", "target", "map"]] = stored.manifest["extra"]["index"]
    cols = stored.manifest["extra"]["columns"]
    # inf when a live row has no stored twin (ev.table_gap; tested with other models)
    gap = ev.table_gap(live.to_dict("records"), faith.to_dict("records"), cols)
    same_models = (stored.manifest["metrics"]["models_weights_sha256"]
                   == ckpt.manifest["weights"]["sha256"])
    rec.check("faithfulness_table_reproduces", gap if same_models else np.inf, 1e-4,
              op="<=", note=f"{len(live)} rows recomputed live (seed {seeds[0]}, "
              f"{', '.join(show)}) against the stored table, largest difference "
              f"{gap:.1e}; the table was computed from these models: {same_models}")
occ_vs = faith.pivot_table(index=["seed", "target"], columns="map", values="auroc")
occ_wins = (occ_vs["transferred"] > occ_vs["occlusion"]).groupby("seed").mean()
print("patch AUROC on these images: occlusion on θ_T",
      f"{occ_vs['occlusion'].mean():.3f}, transferred",
      f"{occ_vs['transferred'].mean():.3f};",
      "share of targets where the transferred map beats occlusion, per seed:",
      {s: round(v, 2) for s, v in occ_wins.items()})
display(faith.groupby("map")[["auroc", "deletion (ROAD)", "insertion (ROAD)",
                              "deletion", "insertion", "deletion (blur)",
                              "insertion (blur)", "inferences"]].mean()
        .round(3)
        .style.set_caption("mean over seeds and targets (deletion lower is better)"))


# %%
def shap_ratio(label, col="deletion"):
    """Per seed: a map's mean deletion AUC over Kernel SHAP's, on the same model."""
    def mean(s, lab):
        return faith[(faith.seed == s) & (faith["map"] == lab)][col].mean()

    return {s: float(mean(s, label) / mean(s, "Kernel SHAP")) for s in seeds}


# the claim's fill, registered before these models were read (ev.FAITHFULNESS_FILL)
prim = f"deletion ({ev.FAITHFULNESS_FILL.upper()})"
del_ratio = shap_ratio("transferred", prim)
grad_ratio = shap_ratio("gradient×input (transferred)", prim)
# beside it: the mean fill SHAP is fitted to, and a blurred fill
side_ratio = {f"{fl} fill": {lab: shap_ratio(lab, col) for lab in
                             ("transferred", "gradient×input (transferred)")}
              for fl, col in (("mean", "deletion"), ("blurred", "deletion (blur)"))}
blur_ratio = side_ratio["blurred fill"]
print("deletion AUC (ROAD fill) ratio to Kernel SHAP on θ_T + λτ, per seed:",
      "transferred",
      {k: round(v, 3) for k, v in del_ratio.items()}, "| gradient×input",
      {k: round(v, 3) for k, v in grad_ratio.items()})
# added at review (descriptive, no verdict reads it): how far the per-seed ratio
# moves when the targets are resampled (bootstrap over targets, 2000 draws, 95 %)
def ratio_interval(s, col=prim, n_boot=2000):
    by = {lab: faith[(faith.seed == s) & (faith["map"] == lab)].set_index("target")[col]
          for lab in ("transferred", "Kernel SHAP")}
    a = by["transferred"].values
    b = by["Kernel SHAP"].reindex(by["transferred"].index).values
    idx = repro.rng(s, 13).integers(0, len(a), (n_boot, len(a)))
    return tuple(np.percentile(a[idx].mean(1) / b[idx].mean(1), [2.5, 97.5]))


del_ci = {s: ratio_interval(s) for s in seeds}
print("the ROAD ratio's 95 % interval over targets (bootstrap), per seed:",
      {s: (round(float(lo), 2), round(float(hi), 2)) for s, (lo, hi) in del_ci.items()})
print("the same ratio with other fills:", {f: {k: {s: round(v, 3) for s, v in d.items()}
                                               for k, d in r.items()}
                                           for f, r in side_ratio.items()})

# %% [markdown]
# A saliency grid for three targets (seed 0): the image, the label-deciding region, and each map.

# %%
labels_ = ["prediction-only", "gradient×input", "transferred", "Kernel SHAP"]
fig, ax = plt.subplots(
    len(show), 2 + len(labels_), figsize=(1.6 * (2 + len(labels_)), 1.7 * len(show))
)
for r, name in enumerate(show):
    x, msk, maps = shap_maps[name]
    ax[r, 0].imshow(x[0].permute(1, 2, 0).numpy())
    ax[r, 0].set_ylabel(name, fontsize=8)
    ax[r, 1].imshow(msk[0].view(6, 6).numpy(), cmap="magma")
    for j, lab in enumerate(labels_):
        ax[r, 2 + j].imshow(maps[lab][0].view(6, 6).numpy(), cmap="magma")
for j, t in enumerate(["image", "mask", *labels_]):
    ax[0, j].set_title(t, fontsize=8)
for a in ax.ravel():
    a.set(xticks=[], yticks=[])
    a.grid(False)
plt.tight_layout()
plt.show()

# %% [markdown]
# ## 5. Does relatedness predict the gain, and can the gain be predicted a priori?
#
# The gain is the AUROC at λ = 1 minus the AUROC of the strongest baseline map (θ_T's own map or one of its two
# gradient maps).
# First, against the relatedness level fixed in advance (Spearman per seed). Second, from features computed
# **without any target explanation labels**: the cosine between τ and the target's own task vector θ_T − θ₀; the
# norm ratio ‖θ_T − θ₀‖ / ‖τ‖; the linear CKA between θ_T's CLS features before and after adding τ; the change in
# entropy of the predicted class's patch map; the fraction of predictions left unchanged; and relatedness
# *measured* rather than assigned, the (negated) linear-kernel MMD between θ₀'s CLS features on the source and on
# the target (`ev.feature_mmd`; the relatedness Spearman is also reported with it). Each feature is validated
# **leave-one-target-out**: a line fitted on the other targets predicts the held-out target's gain, and we report the
# Spearman correlation of those predictions with the real gains. With so few targets this is weak evidence.

# %%
aurocs = sweep.set_index(["seed", "target", "map"]).auroc
gain = {
    (s, t): float(
        aurocs[(s, t, f"λ={lam}")]
        - max(aurocs[(s, t, "λ=0.0")], aurocs[(s, t, "gradient×input")],
              aurocs[(s, t, "|gradient|")])
    )
    for s in seeds
    for t in TARGETS
}
feat = {}
for s in seeds:
    tau_flat = ev.flat(tau[s])
    with torch.no_grad():  # θ0's CLS features on the source: relatedness, measured
        m_0 = model_from(theta0[s])
        h_src = m_0.tokens(test["source"].images)[:, 0]
    for name in EVAL_TARGETS:
        te_ = test[name]
        sd_T = states[f"s{s}/T/{ev.key(name)}"]
        base, moved = model_from(sd_T), model_from(ev.add_vector(sd_T, tau[s], lam))
        with torch.no_grad():
            h0, h1 = base.tokens(te_.images)[:, 0], moved.tokens(te_.images)[:, 0]
            l0, p0 = base(te_.images, te_.classes)
            l1, p1 = moved(te_.images, te_.classes)
        pred0, pred1 = l0.argmax(1), l1.argmax(1)
        ar = torch.arange(len(te_))
        vT = ev.flat(ev.task_vector(sd_T, theta0[s]))
        feat[(s, name)] = {
            "cos(τ, τ_T)": float(F.cosine_similarity(tau_flat, vT, dim=0)),
            "‖τ_T‖/‖τ‖": float(vT.norm() / tau_flat.norm()),
            "CKA before/after": ev.linear_cka(h0, h1),
            "Δ map entropy": ev.map_entropy(p1[ar, :, pred1])
            - ev.map_entropy(p0[ar, :, pred0]),
            "unchanged predictions": float((pred0 == pred1).float().mean()),
            "−MMD to source under θ0": -ev.feature_mmd(
                h_src, m_0.tokens(te_.images)[:, 0].detach()),
            "relatedness": ev.RELATEDNESS[name],
            "gain": gain[(s, name)],
        }
feat = pd.DataFrame(feat).T
feat.index.names = ["seed", "target"]
display(feat.groupby("target").mean().reindex(EVAL_TARGETS).round(3))

# %%
rel_rho = {
    s: ev.spearman_perm(
        feat.loc[s].relatedness.values, feat.loc[s].gain.values, seed=s
    )[0]
    for s in seeds
}
# relatedness measured rather than assigned: θ0's feature distance (MMD) to the source
rel_rho_mmd = {
    s: ev.spearman_perm(
        feat.loc[s]["−MMD to source under θ0"].values, feat.loc[s].gain.values, seed=s
    )[0]
    for s in seeds
}
# robustness: the same Spearman without the two level-0 marker targets
# (6 targets, 3 levels)
no0 = {s: feat.loc[s][feat.loc[s].relatedness > 0] for s in seeds}
rel_rho_no0 = {
    s: ev.spearman_perm(no0[s].relatedness.values, no0[s].gain.values, seed=s)[0]
    if len(no0[s]) >= 3
    else float("nan")  # quick mode: too few targets
    for s in seeds
}
# sensitivity: the gain over θ_T's own map only (transferred vs prediction-only)
rel_rho_own = {
    s: ev.spearman_perm(
        [ev.RELATEDNESS[t] for t in EVAL_TARGETS],
        [aurocs[(s, t, f"λ={lam}")] - aurocs[(s, t, "λ=0.0")] for t in EVAL_TARGETS],
        seed=s,
    )[0]
    for s in seeds
}
print(
    "Spearman(relatedness, gain) per seed, all targets:",
    ", ".join(f"{v:.2f}" for v in rel_rho.values()),
    "| without the level-0 marker targets:",
    ", ".join(f"{v:.2f}" for v in rel_rho_no0.values()),
    "| gain over θ_T's own map only:",
    ", ".join(f"{v:.2f}" for v in rel_rho_own.values()),
    "| relatedness measured (−MMD under θ0):",
    ", ".join(f"{v:.2f}" for v in rel_rho_mmd.values()),
)

# %%
loo = {}
for c in feat.columns[:-2]:
    loo[c] = [
        ev.spearman_perm(
            ev.loo_predictions(feat.loc[s][c].values, feat.loc[s].gain.values),
            feat.loc[s].gain.values,
            seed=s,
        )[0]
        for s in seeds
    ]
loo = pd.DataFrame(loo, index=[f"seed {s}" for s in seeds]).T
loo["mean"] = loo.mean(axis=1)
display(
    loo.round(3).style.set_caption(
        "leave-one-target-out: Spearman(predicted gain, gain)"
    )
)
# the same statistic when the feature carries no signal (random feature and gain,
# as many targets): leave-one-out is biased negative on a few points
g_null = repro.rng(seed, 11)
loo_null = np.array(
    [
        ev.spearman_perm(ev.loo_predictions(f_, y_), y_, n_perm=1)[0]
        for f_, y_ in (g_null.normal(size=(2, len(EVAL_TARGETS))) for _ in range(1000))
    ]
)
print(
    f"no-signal null of the leave-one-out Spearman ({len(EVAL_TARGETS)} targets): "
    f"mean {loo_null.mean():.2f}, 95th percentile {np.percentile(loo_null, 95):.2f}"
)

# %%
fig, ax = plt.subplots(figsize=(5.4, 3.4))
g = feat.groupby("target").mean().reindex(EVAL_TARGETS)
ax.scatter(g.relatedness + 0.05 * np.arange(len(g)) % 0.2, g.gain)
for t in EVAL_TARGETS:
    ax.annotate(
        t,
        (g.loc[t, "relatedness"], g.loc[t, "gain"]),
        fontsize=7,
        xytext=(3, 3),
        textcoords="offset points",
    )
ax.axhline(0, color="gray", lw=0.8)
ax.set(
    xlabel="relatedness to the source (fixed in advance)",
    ylabel=f"AUROC gain at λ={lam} over the best baseline",
    title=f"Spearman per seed: {', '.join(f'{v:.2f}' for v in rel_rho.values())}",
)
plt.show()

# %% [markdown]
# ## 6. Relatedness measured, on twenty targets that each change one factor (round 6)
#
# Nine targets on four relatedness levels that *we* assigned, several of them changing two things at once, give a
# Spearman correlation little power. Round 6 (registered before any of its models was trained, with its reading
# in `ev.SINGLE_FACTOR_READING`) builds **twenty targets that each change one factor of the source**
# (`ev.SINGLE_FACTOR`: its background, its ink, the objects' orientation or size, the kind of distractor, its
# class set, or an image-level blur, noise or contrast change) and **measures** relatedness instead of assigning
# it: the (negated) MMD between θ₀'s CLS features on the source's and on the target's test images. Each target's
# θ_T is fine-tuned from the seed's stored θ₀ (9000 images, 400 steps: the new-ink targets' recipe) by
# `data/15_explainability_vector/make_relatedness.py`, which stores records, not models (one JSON file per seed);
# the gain and the six label-free features are the ones of section 5. A target counts at a seed when no model-free
# map localises it, its θ_T fits and its loss is flat; a seed counts when at least twelve targets do and its θ₀
# and source pair trained to a flat loss. The claims `relatedness_predicts_gain` (Spearman of measured relatedness
# with the gain above its registered bar; its one-sided permutation p and a bootstrap interval over targets beside
# it) and `apriori_signal` (the leave-one-target-out Spearman of cos(τ, τ_T), the same bar) read this set **once every seed's
# records exist**; until then they keep the nine-target reading of section 5, and what is here is a probe, read
# for no verdict. Quick mode fine-tunes three of the targets live.

# %%
R6 = ev.checkpoint_config("relatedness")
C6 = cfg["conditions"]  # the registered bars (ev.CONDITIONS), as the claims read them
r6 = {}  # seed -> the targets' records (and the worst θ0 / source-pair plateau)
if quick:  # three targets fine-tuned live from the quick θ0, same code as the script
    R6.update(model=cfg["model"], n_train=cfg["n_train"], batch_size=cfg["batch_size"],
              target_steps=cfg["target_steps"], n_test=n_test, n_eval=n_test,
              targets=["brick only", "inverted ink", "unseen classes"])
    for s in seeds:
        run6 = dict(cfg, seeds=[s], targets=R6["targets"], target_recipe={},
                    n_train=R6["n_train"])
        st6, hist6, _ = ev.train_all(run6, theta0={s: theta0[s]}, log=None)
        recs = {}
        for t in R6["targets"]:
            tag = f"s{s}/T/{ev.key(t)}"
            curve = checkpoints.subsample(hist6[f"loss/{tag}"], 100)
            recs[t] = dict(ev.single_factor_record(theta0[s], tau[s], st6[tag], t, R6),
                           plateau=train.plateau(curve, C6["plateau_frac"],
                                                 atol=C6["plateau_atol"]))
        r6[s] = dict(targets=recs, base_plateau=max(train.plateau(
            history[f"loss/s{s}/{k}"], C6["plateau_frac"], atol=C6["plateau_atol"])
            for k in ("theta0", "source_pred", "source_se")))
else:
    for s in seeds:
        try:
            body = json.loads(checkpoints.fetch(
                "15_explainability_vector", f"relatedness_s{s}.json").read_text())
        except (FileNotFoundError, checkpoints.CheckpointError):
            continue
        # the registered config (less its seeds) must be the one the records ran with
        want = {k: v for k, v in checkpoints.normalize(R6).items() if k != "seeds"}
        got = {k: v for k, v in body["config"].items() if k != "seeds"}
        if got != want or not body["complete"]:
            diff6 = sorted(k for k in want if got.get(k) != want[k])
            raise ValueError(f"relatedness_s{s}.json: not a complete run of the "
                             f"registered config (differs in {diff6})")
        r6[s] = body
read6 = {s: ev.single_factor_reading(b["targets"], b["base_plateau"], C6,
                                     R6["reading"], seed=s)
         for s, b in r6.items()}
have_r6 = bool(r6) and all(s in r6 for s in seeds)  # the claims read round 6 only then
print("round-6 records for seeds", sorted(r6), "| claims read them:", have_r6)


# %% [markdown]
# What the records say, per target (mean over the seeds that have records), and the registered reading per seed.
# A live check recomputes, without training anything, what the records measured before any fine-tuning: each
# target's best model-free map and its measured relatedness under the first seed's θ₀.

# %%
if r6:
    s0_ = min(r6)
    with torch.no_grad():
        m0_ = model_from(theta0[s0_])
        h0_ = m0_.tokens(ev.make_domain("source", R6["n_test"], R6["test_seed"],
                                        aspect=ASPECT).images)[:, 0]
    gap6 = 0.0
    for t, r_ in r6[s0_]["targets"].items():
        te6 = ev.make_domain(t, R6["n_test"], R6["test_seed"], aspect=ASPECT)
        with torch.no_grad():
            rel_ = -ev.feature_mmd(h0_, m0_.tokens(te6.images)[:, 0])
        free_ = max(ev.model_free_aurocs(te6, FREE_MAPS).values())
        gap6 = max(gap6, abs(rel_ - r_["relatedness"]), abs(free_ - r_["free_best"]))
    rec.check("relatedness_records_reproduce", gap6, 1e-5, op="<=",
              note=f"seed {s0_}: measured relatedness and best model-free map of each "
              f"single-factor target recomputed live, largest difference {gap6:.1e}")
    cols6 = ["relatedness", "acc_T", "acc_lam", "auroc_own", "auroc_lam", "auroc_grad",
             "auroc_gmag", "gain", "cos_tau_tauT", "free_best"]
    tab6 = pd.DataFrame([dict(seed=s, target=t, **{c: r_[c] for c in cols6})
                         for s, b in r6.items() for t, r_ in b["targets"].items()])
    tab6["factor"] = tab6.target.map(lambda t: ev.SINGLE_FACTOR[t][0])
    display(tab6.groupby(["factor", "target"], sort=False)[cols6].mean().round(3)
            .style.set_caption("single-factor targets, mean over seeds with records"))
    display(pd.DataFrame({f"seed {s}": {
        "targets counted": f"{v['n']} of {len(r6[s]['targets'])}",
        "θ0 / source plateau": round(v["base_plateau"], 3),
        "Spearman(relatedness, gain)": round(v["rho"], 3),
        "one-sided permutation p": round(v["p"], 4),
        "bootstrap 95 % interval": tuple(round(x, 2) for x in v["ci"]),
        "Spearman with the gain over θ_T's map": round(v["rho_own"], 3),
        "leave-one-out Spearman, cos(τ, τ_T)": round(v["loo"]["cos_tau_tauT"], 3)}
        for s, v in read6.items()}))
    fig, ax = plt.subplots(1, len(r6), figsize=(4.2 * len(r6), 3.3), squeeze=False)
    for a, (s, v) in zip(ax[0], read6.items()):
        d = tab6[tab6.seed == s]
        for f, g in d.groupby("factor"):
            a.scatter(g.relatedness, g.gain, label=f, s=18)
        a.axhline(0, color="gray", lw=0.8)
        a.set(xlabel="relatedness: −MMD to the source under θ0", ylabel="gain",
              title=f"seed {s}: ρ = {v['rho']:.2f} ({v['n']} targets counted)")
    ax[0, 0].legend(fontsize=6)
    plt.tight_layout()
    plt.show()

# %% tags=["remove-input"]
def _sp6(s, f, g=lambda r: r["gain"]):  # added at review, descriptive: Spearman over the
    kept = read6[s]["targets"]  # seed's counted targets of a record field with the gain
    return pd.Series([r6[s]["targets"][t][f] if isinstance(f, str) else f(r6[s]["targets"][t])
                      for t in kept]).corr(pd.Series([g(r6[s]["targets"][t]) for t in kept]),
                                           method="spearman")


def _rho_noflat(s):  # added at review, descriptive: Spearman(relatedness, gain) with the
    b = r6[s]["targets"]  # targets' flat-loss rule dropped (the other two rules kept)
    ks = [t for t, r in b.items() if r["free_best"] <= C6["free_auroc_max"]
          and r["acc_T"] >= C6["fit_min"]]
    return pd.Series([b[t]["relatedness"] for t in ks]).corr(
        pd.Series([b[t]["gain"] for t in ks]), method="spearman")


if r6:
    display(Markdown(
        ("**Round 6, read as registered.** " if have_r6 else
         f"**Round 6 probe (seed{'s' if len(r6) > 1 else ''} {', '.join(map(str, sorted(r6)))} of "
         f"{seeds}; no verdict is read from it).** ")
        + " ".join(
            f"Seed {s}: {v['n']} of {len(r6[s]['targets'])} targets count"
            + (" (left out: " + "; ".join(f"{t}: {', '.join(w)}" for t, w in v["left_out"].items())
               + ")" if v["left_out"] else "")
            + ("" if v["seed_ok"] else " (so the seed does not count: " + (
                f"θ₀ / source-pair plateau {v['base_plateau']:.3f} above the bar {C6['plateau_max']}"
                if v["base_plateau"] > C6["plateau_max"] else
                f"fewer than {R6['reading']['min_targets']} targets") + ")")
            + f"; Spearman(measured relatedness, gain) {v['rho']:.2f} (one-sided permutation p "
            f"{v['p']:.3f}, 95 % bootstrap interval over targets {v['ci'][0]:.2f} to {v['ci'][1]:.2f}; "
            f"with the gain over θ_T's own map {v['rho_own']:.2f}); the a-priori cosine's "
            f"leave-one-out Spearman {v['loo']['cos_tau_tauT']:.2f} (the line it fits has the sign "
            f"of the raw Spearman of the cosine with the gain, {_sp6(s, 'cos_tau_tauT'):.2f}: a larger "
            f"cosine goes with a {'smaller' if _sp6(s, 'cos_tau_tauT') < 0 else 'larger'} gain); "
            "the gain's Spearman with the accuracy change adding τ causes (θ_T + λτ minus θ_T), "
            f"{_sp6(s, lambda r: r['acc_lam'] - r['acc_T']):.2f} (added at review, descriptive: "
            "positive where the targets τ costs the most accuracy gain the least)."
            for s, v in read6.items())
        + f" The gain is negative on {int((tab6.gain < 0).sum())} of {len(tab6)} target-seed pairs"
        + (": what relatedness orders is how much the transferred map loses to the best baseline."
           if (tab6.gain < 0).mean() > 0.5 else ".")
        + f" Measured relatedness spans {tab6.relatedness.min():.3f} to {tab6.relatedness.max():.3f}"
        f" (seed {s0_}'s nearest target: {tab6[tab6.seed == s0_].set_index('target').relatedness.idxmax()}, "
        f"farthest: {tab6[tab6.seed == s0_].set_index('target').relatedness.idxmin()})."))


# %% [markdown]
# ### How far the transfer is from explanation supervision on the target (seed 0's oracles)
#
# The gain above compares the transferred map with maps anyone could make without explanation labels. The
# reference above it is the **oracle**: θ₀ fine-tuned on the target *with the target's own masks* (the explanation loss at the
# source's β), θ_T's recipe otherwise: the model a user who had explanation labels on the target would train. For
# seed 0, `data/15_explainability_vector/make_oracles.py` trained one oracle per single-factor target (its design
# registered before the run: `ev.checkpoint_config("oracles")`; records only, `oracles_s0.json`: data/ has no room
# for the weights) and scored it on the same 300 test images as θ_T and θ_T + λτ. `ev.oracle_gaps` sets the two
# records side by side: the **gap** (the oracle's patch AUROC minus the transferred map's), the **share** of the
# way from θ_T's own map to the oracle that τ covers, the accuracy each costs against θ_T, and the oracle's
# deletion ratio (a random map's ROAD deletion AUC over its own map's, on the oracle: above 1 when its map finds
# what its prediction rests on). This describes; no claim reads it. θ_T itself is not stored, so the transferred
# model's deletion AUC on these targets is not measured (that would mean training θ_T again beside each oracle).
# Quick mode trains the three quick targets' oracles live.

# %%
RO = ev.checkpoint_config("oracles")
orc = None  # target -> seed 0's oracle record
if quick and 0 in r6:  # the quick targets' oracles, live, with the quick recipe
    RO.update({k: R6[k] for k in ("model", "n_train", "batch_size", "target_steps",
                                  "n_test", "n_eval", "targets")}, n_faith=16)
    orc = {}
    for t in RO["targets"]:
        st_o, loss_o = ev.train_oracle(theta0[0], t, RO, 0)
        curve_o = checkpoints.subsample(loss_o, 100)
        orc[t] = dict(ev.oracle_record(theta0[0], tau[0], st_o, t, RO),
                      plateau=train.plateau(curve_o, C6["plateau_frac"],
                                            atol=C6["plateau_atol"]))
elif 0 in r6:
    try:
        body_o = json.loads(checkpoints.fetch(
            "15_explainability_vector", "oracles_s0.json").read_text())
    except (FileNotFoundError, checkpoints.CheckpointError):
        body_o = None
    if body_o is not None:  # the registered config, complete, or nothing is read
        if body_o["config"] != checkpoints.normalize(RO) or not body_o["complete"]:
            raise ValueError("oracles_s0.json: not a complete run of the registered "
                             "config")
        orc = body_o["targets"]
print("seed 0's oracle records:", "none for this run (they are seed 0's; seeds here: "
      f"{seeds})" if not orc else f"{len(orc)} targets"
      + (" (trained live)" if quick else ""))

# %%
if orc:  # the oracle beside the transferred map, per target (seed 0)
    rel0 = r6[0]["targets"]
    gapsO = ev.oracle_gaps(rel0, orc)
    tabO = pd.DataFrame([dict(
        target=t, factor=ev.SINGLE_FACTOR[t][0], counted=t in read6[0]["targets"],
        relatedness=rel0[t]["relatedness"], **{"θ_T's map": rel0[t]["auroc_own"]},
        **{"best baseline": max(rel0[t][k]
                                for k in ("auroc_own", "auroc_grad", "auroc_gmag"))},
        transferred=rel0[t]["auroc_lam"], oracle=o["auroc_oracle"], **gapsO[t],
        acc_T=rel0[t]["acc_T"], acc_lam=rel0[t]["acc_lam"], acc_oracle=o["acc_oracle"],
        oracle_plateau=o["plateau"], cos_tau_oracle=o["cos_tau_oracle"])
        for t, o in orc.items()]).set_index("target")
    display(tabO.drop(columns=["cost_lam", "cost_oracle"]).round(3).style.set_caption(
        "seed 0: patch AUROC of θ_T's map, the best label-free baseline, the "
        "transferred map and the oracle; gap = oracle − transferred"))
    order = tabO.sort_values("gap").index
    fig, ax = plt.subplots(figsize=(7.4, 0.26 * len(order) + 1.2))
    for col, mk in (("θ_T's map", "x"), ("best baseline", "s"), ("transferred", "o"),
                    ("oracle", "*")):
        ax.scatter(tabO.loc[order, col], range(len(order)), marker=mk, label=col, s=30)
    ax.hlines(range(len(order)), tabO.loc[order, "transferred"],
              tabO.loc[order, "oracle"], color="gray", lw=0.8)
    ax.set_yticks(range(len(order)),
                  [f"{t}{'' if tabO.counted[t] else ' (not counted)'}" for t in order],
                  fontsize=7)
    ax.set(xlabel="patch AUROC (seed 0, 300 test images)",
           title="transferred vs oracle")
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    plt.tight_layout()
    plt.show()

# %% tags=["remove-input"]
if orc:
    cnt = tabO[tabO.counted]
    flat_o = int((tabO.oracle_plateau <= C6["plateau_max"]).sum())
    near, above = int((tabO.gap <= 0.05).sum()), int((tabO.gap < 0).sum())
    ob = tabO.oracle - tabO["best baseline"]  # the oracle over the best label-free map
    own_med = tabO["θ_T's map"].median()
    display(Markdown(
        f"**Seed 0's oracles.** {flat_o} of {len(tabO)} oracles trained to a flat loss (plateau "
        f"≤ {C6['plateau_max']}" + ("; the others' gaps may understate the ceiling" if flat_o < len(tabO)
                                    else "") + "). The oracle's patch "
        f"AUROC spans {tabO.oracle.min():.2f} to {tabO.oracle.max():.2f} (median "
        f"{tabO.oracle.median():.2f}); the transferred map's {tabO.transferred.min():.2f} to "
        f"{tabO.transferred.max():.2f} (median {tabO.transferred.median():.2f}). The gap, oracle minus "
        f"transferred, has median {tabO.gap.median():.2f} (range {tabO.gap.min():.2f} to "
        f"{tabO.gap.max():.2f}); the transferred map is less than 0.05 below the oracle on {near} of "
        f"{len(tabO)} targets (above it on {above}), and on the "
        f"{len(cnt)} targets round 6 counts at seed 0 the median gap "
        f"is {cnt.gap.median():.2f}. Of the way from θ_T's own map to the oracle, τ covers a median "
        f"{tabO.share.median():.0%} (range {tabO.share.min():.0%} to {tabO.share.max():.0%}). "
        f"Accuracy against θ_T: the transferred model {tabO.cost_lam.mean():+.3f} on average "
        f"(worst {tabO.cost_lam.min():+.3f}), the oracle {tabO.cost_oracle.mean():+.3f} (worst "
        f"{tabO.cost_oracle.min():+.3f}): explanation supervision on the target itself "
        + ("costs less accuracy than adding τ. " if tabO.cost_oracle.mean() > tabO.cost_lam.mean()
           else "costs at least as much accuracy as adding τ. ")
        + f"The oracle's deletion ratio (random map over its own, ROAD fill) is above 1 on "
        f"{int((tabO.ratio > 1).sum())} of {len(tabO)} targets (range {tabO.ratio.min():.2f} to "
        f"{tabO.ratio.max():.2f}). The oracle is trained with θ_T's recipe ({RO['target_steps']} steps "
        f"at learning rate {RO['target_lr']:g}), the source's self-explaining model with "
        f"{cfg['source_steps']} steps at {cfg['ft_lr']:g}: the oracle is the ceiling at θ_T's budget, "
        "not the best a model supervised on the target could reach. "
        "Against the best label-free baseline on θ_T (the map the claims compare "
        f"with), the oracle is ahead by a median {ob.median():.2f} (range "
        f"{ob.min():.2f} to {ob.max():.2f}) and not ahead on {int((ob <= 0).sum())} "
        f"of {len(tabO)} targets" + (
            ": at this budget explanation supervision on the target adds little over "
            "a gradient map of θ_T, and the share above starts from θ_T's own map "
            f"(median AUROC {own_med:.2f}), not from that baseline"
            if ob.median() < 0.05 else "")
        + " (review-time reading, descriptive). "
        "It moves θ₀ in a direction with cosine "
        f"{tabO.cos_tau_oracle.min():.2f} to {tabO.cos_tau_oracle.max():.2f} to τ. Over the counted "
        f"targets the gap's Spearman with measured relatedness is "
        f"{cnt.relatedness.corr(cnt.gap, method='spearman'):.2f} (descriptive, one seed)."))


# %% [markdown]
# ## 7. Interaction
#
# The slider moves λ and shows the transferred model's map for one test image of each target (seed 0, precomputed
# frames, works in the static page). The live control recomputes for any target, λ and image.

# %%
frames = {}
for lm in lams:
    row = []
    for name in TARGETS:
        te_ = test[name]
        m = model_from(
            ev.add_vector(states[f"s{seeds[0]}/T/{ev.key(name)}"], tau[seeds[0]], lm)
        )
        with torch.no_grad():
            row.append(
                m(te_.images[:1], te_.classes)[1][0, :, te_.labels[0]]
                .view(6, 6)
                .numpy()
            )
    frames[lm] = row


def draw(fig, lm):
    axs = fig.subplots(2, len(TARGETS))
    for j, name in enumerate(TARGETS):
        axs[0, j].imshow(test[name].images[0].permute(1, 2, 0).numpy())
        axs[0, j].set_title(name, fontsize=6)
        axs[1, j].imshow(frames[lm][j], cmap="magma")
        for a in axs[:, j]:
            a.set(xticks=[], yticks=[])
            a.grid(False)


plotting.static_slider(
    lams, draw, figsize=(1.2 * len(TARGETS), 2.8), label="λ", fmt="{:.2f}"
)


# %%
def live(target=TARGETS[0], lam_=1.0, image=0):
    te_ = test[target]
    m = model_from(
        ev.add_vector(states[f"s{seeds[0]}/T/{ev.key(target)}"], tau[seeds[0]], lam_)
    )
    with torch.no_grad():
        logits, patches = m(te_.images[image : image + 1], te_.classes)
    fig, ax = plt.subplots(1, 3, figsize=(6, 2))
    ax[0].imshow(te_.images[image].permute(1, 2, 0).numpy())
    ax[1].imshow(te_.mask[image].view(6, 6).numpy(), cmap="magma")
    ax[2].imshow(patches[0, :, te_.labels[image]].view(6, 6).numpy(), cmap="magma")
    ax[2].set_title(
        f"p(true) = {logits.softmax(1)[0, te_.labels[image]]:.2f}", fontsize=8
    )
    for a in ax:
        a.set(xticks=[], yticks=[])
        a.grid(False)
    plt.show()


plotting.live_controls(live, target=TARGETS, lam_=(0.0, 2.0, 0.25), image=(0, 20))

# %% [markdown]
# ## 8. The claims record
#
# How to read it. λ = 1 was fixed before any result was seen (no target explanation labels may choose it); the
# sweep above shows what other values would have given. A target counts as improved only if the transferred map
# beats **every** label-free baseline (θ_T's own map, gradient × input and |gradient|). The relatedness levels were
# set by design before the runs; the level-0 marker targets are where a "highlight the object" vector is expected
# to fail, so the Spearman claim can be carried by them: the claim's note also gives the Spearman without them.
# The a-priori feature for the claim, cos(τ, τ_T), was chosen before the runs (the leave-one-out table shows all
# six). Once every seed has round 6's records (section 6), `relatedness_predicts_gain` and `apriori_signal` read
# the single-factor targets instead, with relatedness measured, as registered; the nine-target readings then move
# to their notes. Each claim has one number per seed.
#
# **Conditions.** The localisation claims (`targets_improved`, and on the nine targets `relatedness_predicts_gain`
# and `apriori_signal`) rest on a benchmark that needs a model, read per target: a target where one of the
# model-free maps exceeds the registered AUROC bar leaves them, and at least six targets must stay. On round 6's
# set those two claims name round 6's own conditions instead: `single_factor_set` (at least twelve targets that
# need the model, fit and trained flat) and `base_models_converged` (θ₀ and the source pair flat). Every claim on
# the nine targets rests on the models being trained to a flat loss (`ev.converged`: `train.plateau` with a small
# absolute tolerance, because the fine-tuning curves of easy targets start near zero; the tolerance was registered
# before these models were trained) on every curve of the seed, and on every θ_T fitting its domain. The bars are
# in `ev.CONDITIONS`. At a seed where a condition fails the claim is left out; with none left it is
# *inconclusive*: the experiment could not have shown the effect, which says nothing for or against the paper.

# %% tags=["hide-input"]
# per-seed summaries and the notes the claims carry (numbers beside each verdict)
improved = [float(np.mean([gain[(s, t)] > 0 for t in EVAL_TARGETS])) for s in seeds]
grad_beats = [float(np.mean([aurocs[(s, t, "gradient×input")] > aurocs[(s, t, "λ=0.0")]
                             for t in EVAL_TARGETS]))
              for s in seeds]
gmag_beats = [float(np.mean([aurocs[(s, t, "|gradient|")] > aurocs[(s, t, "λ=0.0")]
                             for t in EVAL_TARGETS]))
              for s in seeds]
# the paper's comparison: the transferred map against θ_T's own map only
beats_own = [float(np.mean([aurocs[(s, t, f"λ={lam}")] > aurocs[(s, t, "λ=0.0")]
                            for t in EVAL_TARGETS]))
             for s in seeds]
acc_change = [float((at.loc[s].acc - at0.loc[s].acc).mean()) for s in seeds]
notes = {}  # the numbers each claim carries beside its verdict
notes["targets_improved"] = (
    "baseline: share of targets where |gradient| (the strongest baseline) beats "
    "θ_T's own map; the transferred map beats θ_T's own map alone (the paper's "
    "comparison) on a share "
    + ", ".join(f"{v:.2f}" for v in beats_own) + " per seed; "
    "mean AUROC over seeds and targets: "
    f"transferred {sw[sw.lam == lam].auroc.mean():.3f}, "
    f"θ_T's map {sw[sw.lam == 0].auroc.mean():.3f}, "
    f"gradient×input {sweep[sweep['map'] == 'gradient×input'].auroc.mean():.3f}, "
    f"|gradient| {sweep[sweep['map'] == '|gradient|'].auroc.mean():.3f}"
)
notes["accuracy_preserved"] = (
    "baseline: θ_T's own mean accuracy; the λ sweep as a diagnosis: mean "
    "accuracy change / AUROC at "
    + ", ".join(
        f"λ={lm}: {(sw[sw.lam == lm].acc.mean() - sw[sw.lam == 0].acc.mean()):+.3f} / "
        f"{sw[sw.lam == lm].auroc.mean():.3f}"
        for lm in lams
    )
)
def _tf(col):  # a faithfulness column's mean for the transferred map and for SHAP
    return " vs SHAP ".join(f"{faith[faith['map'] == m][col].mean():.3f}"
                            for m in ("transferred", "Kernel SHAP"))


def _per_seed(d):
    return ", ".join(f"{d[s]:.2f}" for s in seeds)


notes["faithfulness_vs_kernel_shap"] = (
    "baseline: Kernel SHAP's deletion AUC (ROAD fill); 95 % interval of the ratio "
    "when the targets are resampled (bootstrap, added at review, descriptive) per "
    "seed: "
    + ", ".join(f"{del_ci[s][0]:.2f} to {del_ci[s][1]:.2f}" for s in seeds)
    + "; insertion AUC (ROAD) "
    f"transferred {_tf('insertion (ROAD)')}; AUROC transferred {_tf('auroc')}; the "
    "one-pass competitor, gradient×input on the same model, deletion ratio per seed: "
    + _per_seed(grad_ratio)
    + "; with the mean fill SHAP is fitted to, ratio per seed: transferred "
    + _per_seed(side_ratio["mean fill"]["transferred"]) + ", gradient×input "
    + _per_seed(side_ratio["mean fill"]["gradient×input (transferred)"])
    + "; with a blurred fill (2 px): transferred "
    + _per_seed(blur_ratio["transferred"]) + ", gradient×input "
    + _per_seed(blur_ratio["gradient×input (transferred)"])
)
notes["relatedness_predicts_gain"] = (
    f"{len(EVAL_TARGETS)} targets on {feat.relatedness.nunique()} levels (ties); "
    "mean gain per level: "
    + ", ".join(
        f"{k}: {v:+.3f}" for k, v in feat.groupby("relatedness").gain.mean().items()
    )
    + "; without the level-0 marker targets, Spearman per seed: "
    + ", ".join(f"{v:.2f}" for v in rel_rho_no0.values())
    + "; with the gain over θ_T's own map only (not gradient×input): "
    + ", ".join(f"{v:.2f}" for v in rel_rho_own.values())
    + "; with relatedness measured (−MMD to the source under θ0) instead of assigned: "
    + ", ".join(f"{v:.2f}" for v in rel_rho_mmd.values())
)
notes["apriori_signal"] = (
    f"best of the six features afterwards: {loo['mean'].idxmax()} "
    f"(mean ρ {loo['mean'].max():.2f}); "
    f"{len(EVAL_TARGETS)} targets per seed; no-signal null of this statistic: mean "
    f"{loo_null.mean():.2f}, 95th percentile {np.percentile(loo_null, 95):.2f}"
)

# %%
# Conditions and their readings, registered in ev.CONDITIONS before these models were
# trained (and stored with them in the config): needs_the_model per target (the best
# of the eleven model-free maps <= free_auroc_max; the targets above it leave the
# localisation claims, and at least min_targets must stay; the images are shared by
# the seeds, so one number for all); every loss curve of a seed flat at the end
# (ev.converged: train.plateau with the registered frac and atol); every target model
# fits its domain (held-out accuracy >= fit_min).
C = cfg["conditions"]
rec.condition("needs_the_model", len(LOC_TARGETS), ">=", C["min_targets"],
              unit=f"targets whose best model-free map is <= {C['free_auroc_max']}",
              statement=f"no model-free map (the {len(FREE_MAPS)} registered: five "
              "per-patch ink maps, six layout-aware quadrant maps) localises the "
              "label-deciding region on the targets the localisation claims use",
              note="best model-free map per target: " + ", ".join(
                  f"{t} {v:.3f}" for t, v in contrast_auc.items()))
rec.condition("models_converged", [ev.converged(history, s, C) for s in seeds],
              "<=", C["plateau_max"],
              unit=f"plateau (last fifth, atol {C['plateau_atol']}), worst curve",
              statement="θ₀, the source pair and every target model trained to a flat "
              "loss")
rec.condition("targets_fit",
              [float(acc_table.loc[[f"θ_T {t}" for t in TARGETS], f"seed {s}"].min())
               for s in seeds],
              ">=", C["fit_min"], unit="held-out accuracy, worst target",
              statement="every target's prediction-only model θ_T fits its domain")
FIT = ("models_converged", "targets_fit")
LOC = ("needs_the_model", *FIT)
if have_r6:  # round 6's conditions (registered with its set): they gate its claims
    rec.condition("single_factor_set", [read6[s]["n"] for s in seeds], ">=",
                  R6["reading"]["min_targets"],
                  unit="single-factor targets counted (no model-free map localises "
                  f"it, θ_T fits at {C['fit_min']}, its loss flat)",
                  statement="enough single-factor targets are usable at the seed",
                  note="; ".join(f"seed {s} left out: "
                                 + (", ".join(read6[s]["left_out"]) or "none")
                                 for s in seeds))
    rec.condition("base_models_converged", [read6[s]["base_plateau"] for s in seeds],
                  "<=", C["plateau_max"],
                  unit="plateau of θ0 and the source pair, worst curve",
                  statement="θ₀ and the source pair (τ) trained to a flat loss")
R6_GIVEN = ("single_factor_set", "base_models_converged")


def _r6(s, key, sub=None):  # a seed's round-6 number; 0 where fewer than three targets
    v = read6[s][key] if sub is None else read6[s][key][sub]  # count (undefined there,
    return float(v) if np.isfinite(v) else 0.0  # and the seed does not qualify)

# %%
rec.claim(
    "targets_improved",
    f"Adding the explainability vector (λ={lam}) improves localisation (patch AUROC) "
    "over the best label-free baseline map on most targets (holds for at least 60 %)",
    paper="consistent gains on 10 targets (predecessor: 9/10)",
    measured=improved,
    op=">=", target=0.6,
    unit="share of targets improved",
    baseline=gmag_beats,
    note=notes["targets_improved"],
    given=LOC,
)
rec.claim(
    "accuracy_preserved",
    "Accuracy is largely preserved (mean change over targets within 2 points)",
    paper="largely preserved",
    measured=acc_change,
    op=">=", target=-0.02,
    unit="accuracy change at λ=1, mean over targets",
    baseline=[float(at0.loc[s].acc.mean()) for s in seeds],
    note=notes["accuracy_preserved"],
    given=FIT,
)
rec.claim(
    "faithfulness_vs_kernel_shap",
    "The one-inference transferred map is about as faithful as Kernel SHAP with 150 "
    "inferences on the same model (deletion AUC ratio ours ÷ SHAP at most 1.2, "
    "ROAD-style fill)",
    paper="comparable to Kernel SHAP with 150 inferences (predecessor)",
    measured=[del_ratio[s] for s in seeds],
    op="<=", target=1.2,
    unit="deletion AUC ratio (ROAD fill)",
    baseline=[float(faith[(faith.seed == s) & (faith["map"] == "Kernel SHAP")]
                    [prim].mean()) for s in seeds],
    note=notes["faithfulness_vs_kernel_shap"],
    given=FIT,
)
# %%
if have_r6:  # round 6's registered reading (ev.SINGLE_FACTOR_READING), section 6
    g6 = repro.rng(seed, 12)  # the no-signal null of the leave-one-out Spearman,
    null6 = {n: float(np.percentile(  # per count of targets
        [ev.spearman_perm(ev.loo_predictions(*xy), xy[1], n_perm=1)[0]
         for xy in g6.normal(size=(1000, 2, n))], 95))
             for n in sorted({read6[s]["n"] for s in seeds if read6[s]["n"] >= 3})}
    rec.claim(
        "relatedness_predicts_gain",
        "Transfer gains less, or fails, the less related the target is to the source "
        "(over the single-factor targets, Spearman of the gain with relatedness "
        "measured as θ0's feature MMD to the source > 0.5)",
        paper="fails between less-related domains (predecessor)",
        measured=[_r6(s, "rho") for s in seeds],
        op=">", target=R6["reading"]["rho_min"],
        unit="Spearman ρ",
        note="one-sided permutation p per seed: " + ", ".join(
            f"{read6[s]['p']:.3f}" for s in seeds) + "; 95 % bootstrap interval over "
        "targets: " + ", ".join(f"{read6[s]['ci'][0]:.2f} to {read6[s]['ci'][1]:.2f}"
                                for s in seeds)
        + "; with the gain over θ_T's own map: " + ", ".join(
            f"{read6[s]['rho_own']:.2f}" for s in seeds)
        + "; the nine-target reading of section 5 (assigned levels, round 5's claim): "
        + ", ".join(f"{v:.2f}" for v in rel_rho.values())
        + "; added at review (descriptive): with the targets' flat-loss rule dropped "
        + ", ".join(f"{_rho_noflat(s):.2f}" for s in seeds),
        given=R6_GIVEN,
    )
    rec.claim(
        "apriori_signal",
        "A model-internal feature computed without target explanations, cos(τ, τ_T), "
        "predicts the gain on a held-out single-factor target (leave-one-target-out "
        "Spearman > 0.5)",
        paper="a small set of internal features carries non-trivial signal",
        measured=[_r6(s, "loo", "cos_tau_tauT") for s in seeds],
        op=">", target=R6["reading"]["loo_min"],
        unit="Spearman ρ, leave-one-target-out",
        note="the other five features per seed: " + "; ".join(
            f"{f} " + ", ".join(f"{read6[s]['loo'][f]:.2f}" for s in seeds)
            for f in ev.SINGLE_FACTOR_FEATURES if f != "cos_tau_tauT")
        + "; the nine-target reading of section 5: " + ", ".join(
            f"{v:.2f}" for v in loo.loc["cos(τ, τ_T)", [f"seed {s}" for s in seeds]])
        + "; no-signal null of this statistic (random feature and gain, as many "
        "targets), "
        "95th percentile per seed: " + ", ".join(
            f"{null6.get(read6[s]['n'], float('nan')):.2f}" for s in seeds)
        + "; raw Spearman of the cosine with the gain per seed (the fitted line's "
        "sign): "
        + ", ".join(f"{_sp6(s, 'cos_tau_tauT'):.2f}" for s in seeds),
        given=R6_GIVEN,
    )

# %%
if not have_r6:  # round 5's nine-target readings, until every seed's round-6 records
    rec.claim(
        "relatedness_predicts_gain",
        "Transfer gains less, or fails, the less related the target is to the source "
        "(Spearman of gain with the a-priori relatedness level > 0.5)",
        paper="fails between less-related domains (predecessor)",
        measured=[rel_rho[s] for s in seeds],
        op=">", target=0.5,
        unit="Spearman ρ",
        note=notes["relatedness_predicts_gain"],
        given=LOC,
    )
    rec.claim(
        "apriori_signal",
        "A model-internal feature computed without target explanations, cos(τ, τ_T), "
        "predicts the gain on a held-out target (leave-one-target-out Spearman > 0.5)",
        paper="a small set of internal features carries non-trivial signal",
        measured=loo.loc["cos(τ, τ_T)", [f"seed {s}" for s in seeds]].tolist(),
        op=">", target=0.5,
        unit="Spearman ρ, leave-one-target-out",
        note=notes["apriori_signal"],
        given=LOC,
    )
rec.save()


# %% tags=["remove-input"]
verdict = {c.id: c.verdict for c in rec.claims}
cond = {c.id: c.verdict for c in rec.conditions}
nT = len(EVAL_TARGETS)
f2_ = lambda x: f"{x:.2f}".replace("-0.00", "0.00")  # noqa: E731
rng_ = lambda v: f2_(min(v)) if f2_(min(v)) == f2_(max(v)) else f"{f2_(min(v))} to {f2_(max(v))}"  # noqa: E731
fa = faith.groupby("map")[["auroc", "deletion", "insertion", "insertion (ROAD)"]].mean()
auc_tr, auc_own = sw[sw.lam == lam].auroc.mean(), sw[sw.lam == 0].auroc.mean()
auc_grad = sweep[sweep["map"] == "gradient×input"].auroc.mean()
auc_gmag = sweep[sweep["map"] == "|gradient|"].auroc.mean()
seen_more = int((split["auroc seen"] > split["auroc unseen"]).sum())
C_ = cfg["conditions"]


def _plat(c):  # the registered reading of one curve
    return train.plateau(c, C_["plateau_frac"], atol=C_["plateau_atol"])


flat_fail = []  # the curve failing the flat-loss rule at each failing seed
for s in seeds:
    curves = {k: history[k] for k in history if k.startswith(f"loss/s{s}/")}
    worst = max(curves, key=lambda k: _plat(curves[k]))
    if _plat(curves[worst]) > C_["plateau_max"]:
        v_ = curves[worst]["value"] if isinstance(curves[worst], dict) else curves[worst]
        k_ = max(1, round(C_["plateau_frac"] * len(v_)))
        drop = np.mean(v_[-2 * k_:-k_]) - np.mean(v_[-k_:])  # what the reading compares with atol
        flat_fail.append(f"seed {s}: {worst[5:]}, plateau {_plat(curves[worst]):.3f}: its loss fell "
                         f"{drop:.3f} nats between the last two fifths, to {np.mean(v_[-k_:]):.3f}, "
                         f"against a tolerance of {C_['plateau_atol']}")
out_idx = sorted({i for c in rec.claims for i in c.inconclusive_seeds})
ci_in = [s for s in seeds if del_ci[s][0] <= 1.2 <= del_ci[s][1]]  # added at review
# added at review, descriptive: the label-free features whose leave-one-out Spearman clears
# the no-signal null's 95th percentile at every seed, and whether counting the left-out
# seeds would change any verdict
post_hoc = [c for c in loo.index if c != "cos(τ, τ_T)"
            and (loo.loc[c, [f"seed {s}" for s in seeds]] > np.percentile(loo_null, 95)).all()]
same_all = all(claims.verdict_of(c.measured, c.op, c.target) == c.verdict for c in rec.claims
               if c.op is not None)
kept = [s for i, s in enumerate(seeds) if i not in out_idx]
seeds_line = (f" Every verdict below rests on seed{'s' if len(kept) > 1 else ''} "
              + ", ".join(map(str, kept)) + f" only ({len(kept)} of {len(seeds)}); "
              "the numbers of every seed are still shown." if out_idx and kept else "")
acc_vs_lam = ", ".join(f"λ = {lm}: {(sw[sw.lam == lm].acc.mean() - sw[sw.lam == 0].acc.mean()):+.3f}"
                       for lm in lams[1:])
left_out = [t for t in TARGETS if t not in LOC_TARGETS]
# the targets under the fit bar, scored on their own training images (the script's
# images of data_seed, the target's recipe), to tell over-fitting from stopping short
train_acc = {}
for t in TARGETS:
    low = [s for s in seeds if acc_table.loc[f"θ_T {t}", f"seed {s}"] < C_["fit_min"]]
    if low and not quick:
        n_tr = cfg.get("target_recipe", {}).get(t, {}).get("n_train", cfg["n_train"])
        tr_ = ev.make_domain(t, n_tr, cfg["data_seed"], aspect=ASPECT)
        for s in low:
            train_acc[(s, t)] = ev.evaluate(model_from(states[f"s{s}/T/{ev.key(t)}"]), tr_)[0]
unfit = [  # the targets under the fit bar: held-out accuracy and the end of the training loss
    f"seed {s}: {t} {acc_table.loc[f'θ_T {t}', f'seed {s}']:.3f} (training loss "
    f"{train.tail_mean(history[f'loss/s{s}/T/{ev.key(t)}']):.3f}"
    + (f", accuracy on its own training images {train_acc[(s, t)]:.3f}: "
       + ("over-fits" if train_acc[(s, t)] >= 0.95 else "stops short") if (s, t) in train_acc
       else "") + ")"
    for s in seeds for t in TARGETS
    if acc_table.loc[f"θ_T {t}", f"seed {s}"] < C_["fit_min"]
]
if out_idx and not kept:
    seeds_line = (" No seed meets every condition, so every claim is inconclusive: the numbers "
                  "below are exploratory, shown for what they suggest, not as a test.")
display(Markdown(
    f"**What this run shows.** The best of the {len(FREE_MAPS)} model-free maps (five per-patch ink maps, the "
    f"others knowing the one-object-per-quadrant layout) scores patch AUROC {rng_(contrast_auc.values())} over the "
    f"targets; {len(LOC_TARGETS)} of {len(TARGETS)} stay at or below {C_['free_auroc_max']}"
    + (" (left out of the localisation claims: " + ", ".join(left_out) + ")" if left_out else "")
    + f", so `needs_the_model` is **{cond['needs_the_model']}**"
    + ((f": fewer targets than the {C_['min_targets']} the condition asks for. " if not left_out else
        ": the localisation claims cannot tell a good explanation from a salient object here. ")
       if cond["needs_the_model"] != "met" else
       f": with one stroke width, matched ink and every object filling its square, none of the "
       f"{len(FREE_MAPS)} registered maps says which object decides the label. ")
    + f"The models trained to a flat loss: **{cond['models_converged']}**"
    + (" (failing at " + "; ".join(flat_fail) + ")" if flat_fail else "")
    + f"; every θ_T fits its domain: **{cond['targets_fit']}**"
    + (" (below the bar: " + "; ".join(unfit) + "; a model near-perfect on its own training images "
       "(0.95 or more) and under the bar held out over-fits, one that is not stops short"
       + ("" if train_acc else ": not tested in quick mode") + ")" if unfit else "") + "." + seeds_line + f" At λ = {lam} the transferred map's mean patch AUROC is {auc_tr:.2f}, against "
    f"{auc_own:.2f} for θ_T's own map, {auc_grad:.2f} for gradient × input and {auc_gmag:.2f} for |gradient| on "
    "θ_T; it beats all three on "
    + ", ".join(f"{round(v * nT)}" for v in improved) + f" of {nT} targets (seeds {seeds}; `targets_improved`: "
    f"{verdict['targets_improved']}), while gradient × input beats θ_T's own map on "
    + ", ".join(f"{round(v * nT)}" for v in grad_beats) + "; against θ_T's own map alone, the paper's "
    "comparison, the transferred map is better on " + ", ".join(f"{round(v * nT)}" for v in beats_own)
    + ". Mean accuracy changes by "
    + ", ".join(f"{v:+.3f}" for v in acc_change) + f" against θ_T's {np.mean(at0.acc):.2f} "
    f"(`accuracy_preserved`: {verdict['accuracy_preserved']}); against λ, the mean change is {acc_vs_lam}, "
    "and the share of θ_T's predictions that adding λτ changes is "
    + ", ".join(f"λ = {lm}: {sw[sw.lam == lm].changed.mean():.3f}" for lm in lams[1:])
    + f". On the regime (exploratory): cos(τ, τ_T) is {rng_(regime['cos(τ, τ_T)'])} over seeds and "
    f"targets (a random direction: {rng_(regime['cos(random, τ_T)'])}), and at λ = {lam} τ changes "
    f"accuracy by {regime['Δacc, τ'].mean():+.3f} on average, a random direction of τ's norms by "
    f"{regime['Δacc, random'].mean():+.3f}: "
    + ("τ costs more than a random step of its size, so it interferes with the target tasks through "
       "what it encodes" if regime["Δacc, τ"].mean() < regime["Δacc, random"].mean() - 0.02 else
       "a random step of τ's size costs about as much or more, so the cost is the size of the step, not "
       "what τ encodes")
    + ". On the same model as Kernel SHAP, the transferred "
    f"map's AUROC is {fa.auroc['transferred']:.2f} against SHAP's {fa.auroc['Kernel SHAP']:.2f} (occlusion "
    f"on θ_T, {ev.N_PATCH + 1} inferences: {fa.auroc['occlusion']:.2f}; the transferred map beats it on a share "
    + ", ".join(f"{v:.2f}" for v in occ_wins.values) + " of targets per seed), and its deletion "
    "AUC with the ROAD-style fill is " + ", ".join(f"{del_ratio[s]:.2f}" for s in seeds)
    + "× SHAP's per seed (resampling the targets moves it within "
    + ", ".join(f"{del_ci[s][0]:.2f} to {del_ci[s][1]:.2f}" for s in seeds)
    + (f": at seed{'s' if len(ci_in) > 1 else ''} " + ", ".join(map(str, ci_in))
       + " the interval includes the bar 1.2, so the verdict there is within the spread over targets"
       if ci_in else "") + "; insertion "
    f"{fa.loc['transferred', 'insertion (ROAD)']:.2f} vs {fa.loc['Kernel SHAP', 'insertion (ROAD)']:.2f}; "
    f"`faithfulness_vs_kernel_shap`: {verdict['faithfulness_vs_kernel_shap']}); gradient × input on that "
    "model gives " + ", ".join(f"{grad_ratio[s]:.2f}" for s in seeds) + "×. With the mean fill SHAP's "
    "coalitions use (its home ground) the transferred map's ratio is "
    + ", ".join(f"{side_ratio['mean fill']['transferred'][s]:.2f}" for s in seeds)
    + ", with a blurred fill " + ", ".join(f"{blur_ratio['transferred'][s]:.2f}" for s in seeds)
    + ". The gain over θ_T's own map is larger for classes the "
    f"source saw than for unseen ones on {seen_more} of {nT} targets (seen {rng_(split['auroc seen'])}, unseen "
    f"{rng_(split['auroc unseen'])}): part of what τ carries is tied to the source's classes when that count is "
    "high. The relatedness Spearman is " + ", ".join(f"{v:.2f}" for v in rel_rho.values())
    + (" (nine targets: no longer the claim's reading, which is section 6's: "
       f"`relatedness_predicts_gain`: {verdict['relatedness_predicts_gain']})" if have_r6 else
       f" (`relatedness_predicts_gain`: {verdict['relatedness_predicts_gain']})")
    + "; without the level-0 marker "
    "targets " + ", ".join(f"{v:.2f}" for v in rel_rho_no0.values()) + ", and with the gain over θ_T's own map "
    "only " + ", ".join(f"{v:.2f}" for v in rel_rho_own.values()) + "; with relatedness measured (θ₀'s "
    "feature MMD to the source, which the issue asked for) rather than the levels we assigned, "
    + ", ".join(f"{v:.2f}" for v in rel_rho_mmd.values())
    + (". Round 6's twenty single-factor targets (section 6) measure relatedness the same way, and the "
       "verdict is theirs. " if have_r6 else
       ". On these nine the verdict uses the assigned levels, the choice made before the runs, so its "
       "outcome depends on that choice; round 6's twenty single-factor targets (section 6) measure "
       "relatedness instead and take the claim over once every seed's records exist. ")
    + ("Every gain is negative, so what relatedness orders here is how much the transferred map loses to "
       "the best baseline. " if max(gain.values()) < 0 else "")
    + "The a-priori cosine predicts held-out "
    "gains with leave-one-target-out Spearman "
    + ", ".join(f"{v:.2f}" for v in loo.loc["cos(τ, τ_T)", [f"seed {s}" for s in seeds]])
    + (" (nine targets: no longer the claim's reading; on section 6's single-factor targets "
       f"`apriori_signal`: {verdict['apriori_signal']})" if have_r6 else
       f" (`apriori_signal`: {verdict['apriori_signal']})")
    + "; with a random feature the same statistic has mean "
    f"{loo_null.mean():.2f} and 95th percentile {np.percentile(loo_null, 95):.2f}, so a value below that "
    "percentile is what no signal looks like. "
    + (("Read after the run (not the registered feature; six were tried, so this is a lead for a next "
        "round, not a result): " + "; ".join(
            f"{c} " + ", ".join(f"{v:.2f}" for v in loo.loc[c, [f'seed {s}' for s in seeds]])
            for c in post_hoc) + f" clear{'s' if len(post_hoc) == 1 else ''} that percentile at every "
        "seed. These features measure how much adding τ moves θ_T (its size against θ_T's own change, the "
        "predictions and features it leaves alone), and the gain is lowest where τ does the most damage "
        "(the accuracy table), so they may predict the damage rather than the explanation. ")
       if post_hoc else "")
    + (("The verdicts would read the same with the left-out seed"
        + ("s " if len(out_idx) > 1 else " ") + ", ".join(str(seeds[i]) for i in out_idx)
        + " counted (a review-time reading, no verdict uses it). ") if out_idx and kept and same_all else
       ("Counting every seed, conditions or not (a review-time reading, no verdict uses it), "
        + "; ".join(f"`{c.id}` would read {claims.verdict_of(c.measured, c.op, c.target)} instead of "
                    f"{c.verdict}" for c in rec.claims if c.op is not None
                    and claims.verdict_of(c.measured, c.op, c.target) != c.verdict)
        + ". ") if out_idx and kept else "")
))

# %% tags=["remove-input"]
th0_src = acc_table.loc["θ0 on the source, not fine-tuned"]
recipes_ = cfg.get("target_recipe", {})
display(Markdown(
    "**Known limits.** Each seed pre-trains its own θ₀ (initialization and batch order) on the same pre-training "
    "images, so the spread over seeds includes a fresh pre-training run but not a resampling of the data: all "
    "seeds share the training and test images. The stored checkpoint keeps θ₀ whole and every other model as "
    "its difference from θ₀ (matrices int8 with one scale per row, the target and source prediction-only "
    "models' changes at 4 bits, the rest float16; a check compares the stored target models' accuracy with "
    "the trained ones'), no oracle (a target model fine-tuned with its own masks, a ceiling: seed 0's "
    "oracles on the single-factor targets are stored as records only, section 6, and no oracle exists for "
    "the nine targets), and each loss "
    "curve as 100 points. The fit recipes changed between rounds, each time after models had missed the "
    "accuracy bar and before any map of the models it governs was scored: "
    + (", ".join(f"{t} on {r['n_train']} images for {r['ft_steps'] * cfg['target_steps']} steps"
                 for t, r in recipes_.items()) + " (the other targets on "
       f"{cfg['n_train']} for {cfg['target_steps']}), chosen by seed-0 probes (last section), "
       "so these targets move further from θ₀ than the others. Seed 0's models are its round-4 probe's "
       "(the same code; θ₀, the source pair and the six other targets were trained under round 4's config, "
       "which differs from this one only in the new-ink recipe: the stored part's config key was rewritten "
       "by hand to this config's so that the script reused it, and a review found those models bit-identical "
       "to the round-4 probe's; the three new-ink targets were trained again from its θ₀ under the chosen "
       "recipe, as the manifest's `extra` lists)" if recipes_ else "none in quick mode")
    + ". The relevance mask "
    "is the label object's bounding box, not its strokes: in a scene of four objects drawn with one stroke "
    f"width and matched ink the question is *which object*, and none of the {len(FREE_MAPS)} model-free "
    "maps of the condition answers it (section 1); a cue we did not think of could, and the test that "
    f"guards the design only knows these {len(FREE_MAPS)} (a reviewer found the box map after round 3's "
    "run). Drawing every object as a skeleton at one width makes the sklearn digits "
    "harder to read than their originals (the accuracy table shows what the models make of them). Kernel "
    "SHAP explains only the transferred model (not θ_T) and runs on the first `n_shap` test images of each "
    "target; its coalitions use the mean fill, while the claim's deletion uses a ROAD-style fill (noisy "
    "linear imputation, our implementation of its idea: Jacobi sweeps over an eight-neighbour average, "
    "noise of std 0.02), the mean and blurred fills beside it. That puts SHAP on away ground under the "
    "claim's fill, which favours the one-inference map, not SHAP (a reviewer's check on round 3's "
    "seed-0 models, not part of this run nor repeated on these, found SHAP with the ROAD fill in its "
    "coalitions lower still on deletion). "
    + ("The relatedness claims read round 6's single-factor targets (section 6): relatedness measured "
       "under each seed's θ₀, one fine-tuning run per target and seed, the models not stored (records "
       "only); each target changes one factor of the source, and three of them (brick only, source digits, "
       "source glyphs) are parts of the source's own distribution, so the set spans from the source itself "
       "outward. " if have_r6 else
       "The relatedness levels are our design (the Spearman with a measured one, θ₀'s feature MMD to the "
       f"source, is in the claim's note), and {nT} targets on "
       f"{len(set(ev.RELATEDNESS[t] for t in TARGETS))} levels make the Spearman claims coarse; round 6's "
       "single-factor targets (section 6) take the claims over once every seed's records exist. ")
    + "The images are synthetic; nothing here says how the vector behaves on "
    f"ImageNet. Pre-training covers every class on every texture, so θ₀ already classifies the source "
    f"({rng_(th0_src)} over seeds) before any fine-tuning: \"new background\" is new to the source, not to θ₀. "
    f"θ_T's own patch maps score mean AUROC {auc_own:.2f}"
    + (" (below chance: they point away from the object)" if auc_own < 0.45 else
       " (about chance: they do not localise the object)" if auc_own < 0.55 else "")
    + ", so λ = 0 is a weak baseline on its own; the claims therefore also compare with gradient × input and "
    f"|gradient| ({auc_gmag:.2f}, the strongest), both computed on θ_T, the model a user already has."
))

# %% [markdown]
# ## How the fit recipes were chosen: two seed-0 probes
#
# The stored models are round 4 of the benchmark (`ev.checkpoint_config("models_r4")`, registered before any of
# its models was trained: every digit stretched to its square, `needs_the_model` reading the box maps too) with
# two fit recipes, each a fixed list of candidates judged on a seed-0 probe by held-out accuracy alone, before any
# map was scored, the first candidate that meets `targets_fit`'s bar being used at every seed. Round 4's probe
# (`probe_r4.json`) judged the rotated target's (`ev.ROTATED_RECIPES`); it left striped under the bar, and round
# 5's probe (`probe_r5.json`, from round 4's probe θ₀) first asked why, then judged one recipe for the three
# new-ink targets (`ev.INK_RECIPES`). Both records are read here.

# %% tags=["remove-input"]
probe = json.loads(checkpoints.fetch("15_explainability_vector", "probe_r4.json").read_text())
probe5 = json.loads(checkpoints.fetch("15_explainability_vector", "probe_r5.json").read_text())
p0, diag5 = probe["s0"], probe5["diagnosis_round4_recipe"]
cands5 = probe5["candidates"]
gaps5 = [diag5[t]["train"] - diag5[t]["held_out"] for t in probe5["ink_targets"]]


def _recipe(r):  # the probes' steps (the stored config's, not quick mode's)
    return f"{r['n_train']} images × {r['ft_steps'] * probe['config']['target_steps']} steps"


display(Markdown(
    f"Round 4's probe: the rotated model reached held-out accuracy {p0['rotated_rule']['accuracy']:.3f} "
    f"with the first recipe ({_recipe(p0['rotated_rule']['recipe'])}"
    + ("; it meets the bar, so the rule kept it" if p0["rotated_rule"]["meets"] else
       "; below the bar: the rule moved to the second")
    + "), and " + (", ".join(f"{t} {v:.3f}" for t, v in p0["targets_fit"]["below"].items())
                   + f" stayed under the bar {p0['targets_fit']['bar']}" if p0["targets_fit"]["below"]
                   else "every target met the bar")
    + ". Round 5's diagnosis of that probe's new-ink models, accuracy on their own training images "
    "against held out: " + ", ".join(f"{t} {diag5[t]['train']:.3f} / {diag5[t]['held_out']:.3f}"
                                    for t in probe5["ink_targets"])
    + (f" (over-fitting: {rng_(gaps5)} higher on the training images)" if min(gaps5) >= 0.05 else "")
    + ". The candidates for the three new-ink targets, held out (training images): "
    + "; ".join(f"{_recipe(c['recipe'])}: " + ", ".join(
        f"{t} {c['held_out'][t]:.3f} ({c['train'][t]:.3f})" for t in probe5["ink_targets"])
        + (" (meets the bar)" if c["meets"] else " (misses the bar)") for c in cands5)
    + f". The rule uses {_recipe(probe5['chosen_recipe'])} at every seed. A probe is one seed: whether "
    "the recipe fits at the other seeds is `targets_fit` in the claims record."
))
