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
# datasets with accuracy largely preserved, and that a few model-internal features, computed without target
# explanations, predict which targets gain; its predecessor found the one-inference maps comparable to Kernel SHAP
# with 150 inferences, and no gain between unrelated domains.
#
# | | the paper | this notebook |
# |---|---|---|
# | model | CLIP ViT (VLM-based), frozen text embeddings of class names | a 3-layer ViT (d=64, patch 4, ~160k parameters) trained here; frozen random unit "class-name" embeddings |
# | source | ImageNet-1k with patch-level explanation supervision | digits, shapes and letters on brick/gravel textures, object masks per patch |
# | targets | ten image datasets | ten synthetic domains (new textures, inverted, rotated, small, shapes, clutter, colour, letters, and one where the label is the background) |
# | reference | Kernel SHAP, 150 inferences | our Kernel SHAP over the 36 patches, 150 coalitions |
# | hardware | GPUs | 2 shared CPU cores, a few minutes |
#
# :::{note}
# **What is reconstructed.** Only the abstracts of the paper and its predecessor are available. The task-arithmetic
# recipe (τ = θ_SE − θ_pred from the same start and data order; θ_T + λτ) follows them. **Reconstructed by us:** the
# self-explaining head (the CLS projection applied to patch tokens, cosine to the frozen class embedding), the
# explanation loss (MSE between standardized map and mask), the choice λ = 1 fixed in advance, the *a priori*
# features, and everything about the data and the model, which are synthetic stand-ins for ImageNet and CLIP
# (no pretrained weights are available offline).
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
seed = 0
n_train = 1500  # images per domain for training
n_test = 300  # held-out images per domain
batch_size = 32
pretrain_steps = 600
source_steps = 300
target_steps = 200
beta = 1.0  # weight of the explanation loss
lam = 1.0  # the transfer coefficient, fixed in advance
n_shap = 32  # images per target explained by Kernel SHAP
n_coalitions = 150

# %% tags=["hide-input"]
import time

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from IPython.display import display

from helpers import claims, plotting, repro, train
from helpers import explainability_vector as ev

TARGETS = [
    "digits 5-9",
    "inverted",
    "rotated",
    "small digits",
    "shapes",
    "cluttered",
    "coloured",
    "letters",
    "background label",
]
if quick:
    n_train, n_test, pretrain_steps, source_steps, target_steps = 300, 80, 60, 40, 30
    n_shap, n_coalitions = 8, 40
    TARGETS = ["digits 5-9", "shapes", "background label"]
UNRELATED = "background label"
lams = [0.0, 0.25, 0.5, 1.0, 1.5, 2.0]

# small ops: one thread wastes nothing on a shared machine
env = repro.setup(seed, threads=1)
plotting.use_style()
rec = claims.ClaimsRecord(
    "15_explainability_vector",
    dict(
        quick=quick,
        seed=seed,
        n_train=n_train,
        n_test=n_test,
        batch_size=batch_size,
        pretrain_steps=pretrain_steps,
        source_steps=source_steps,
        target_steps=target_steps,
        beta=beta,
        lam=lam,
        n_shap=n_shap,
        n_coalitions=n_coalitions,
        targets=TARGETS,
    ),
)
print(env)

# %% [markdown]
# ## 1. Domains
#
# Every image is an object pasted on a texture; the relevance mask is the object, pooled per 4×4 patch (36 patches).
# In the last target the label is the *texture* and the object is a distractor, so its relevance is the background:
# a vector that teaches "look at the object" should not help there.

# %%
data = {
    name: (ev.make_domain(name, n_train, seed), ev.make_domain(name, n_test, seed + 1))
    for name in ["pretrain", "source", *TARGETS]
}
fig, ax = plt.subplots(2, len(data), figsize=(1.3 * len(data), 2.8))
for j, (name, (tr_, _)) in enumerate(data.items()):
    ax[0, j].imshow(tr_.images[0].permute(1, 2, 0).numpy())
    ax[0, j].set_title(name, fontsize=7)
    ax[1, j].imshow(tr_.mask[0].view(6, 6).numpy(), cmap="magma", vmin=0, vmax=1)
for a in ax.ravel():
    a.set(xticks=[], yticks=[])
    a.grid(False)
plt.tight_layout()
plt.show()

# %% [markdown]
# ## 2. The method
#
# **The model.** A ViT whose head is CLIP-like: `logit_c = s · cos(W h_CLS, t_c)` with frozen class embeddings
# `t_c`, so every domain's head lives in one space. The same projection on a patch token, `e_{j,c} = cos(W h_j, t_c)`,
# is that patch's relevance for class c: the prediction and the explanation come from one inference.
#
# **Training.** `L = CE + β · MSE(z(e_{·,y}), z(mask))` with z a per-image standardization; β = 0 is the
# prediction-only model. **The explainability vector** is `τ = θ_SE − θ_pred`, both fine-tuned on the source from
# the same pre-trained θ₀ with the same batches; **transfer** is `θ_T + λτ`, with θ_T the target's prediction-only
# model (fine-tuned from θ₀ with β = 0, no explanation labels).


# %%
def batches(dom):
    def get(step):
        idx = torch.as_tensor(
            repro.rng(seed, 7, step).integers(0, len(dom), batch_size)
        )
        return dom.images[idx], dom.labels[idx], dom.mask[idx]

    return get


def fine_tune(init_state, dom, steps, beta_, desc, lr=1e-3):
    model = ev.TinyViT()
    model.load_state_dict(init_state)

    def loss_fn(m, batch):
        x, y, mask = batch
        logits, patches = m(x, dom.classes)
        loss = F.cross_entropy(logits, y)
        return loss + beta_ * ev.explanation_loss(patches, y, mask) if beta_ else loss

    train.fit(
        model,
        loss_fn,
        batches(dom),
        steps,
        lr=lr,
        warmup=steps // 10,
        seed=seed,
        desc=desc,
        progress=not quick,
    )
    return model


@torch.no_grad()
def evaluate(model, dom):
    """Accuracy and the explanation maps of the true class (one inference)."""
    model.eval()
    logits, patches = model(dom.images, dom.classes)
    maps = patches[torch.arange(len(dom)), :, dom.labels]
    return (logits.argmax(1) == dom.labels).float().mean().item(), maps, patches


def prob_fn(model, dom, idx):
    def f(x):
        return model(x, dom.classes)[0].softmax(1)[
            torch.arange(len(idx)), dom.labels[idx]
        ]

    return f


torch.manual_seed(seed)
theta0 = ev.TinyViT().state_dict()
pre = fine_tune(theta0, data["pretrain"][0], pretrain_steps, 0.0, "pre-train θ0")
theta0 = {k: v.clone() for k, v in pre.state_dict().items()}
src_tr, src_te = data["source"]
src_pred = fine_tune(theta0, src_tr, source_steps, 0.0, "source, β=0")
src_se = fine_tune(theta0, src_tr, source_steps, beta, f"source, β={beta}")
# the explainability vector: the key line
tau = ev.task_vector(src_se.state_dict(), src_pred.state_dict())
print(f"‖τ‖ = {ev.flat(tau).norm():.3f}, ‖θ0‖ = {ev.flat(theta0).norm():.1f}")

# %% [markdown]
# **Checks on the source.** Two β = 0 runs with the same seed and batches give the same weights (so τ measures only
# the explanation loss); random maps score AUROC ≈ 0.5; the self-explaining model explains better than its
# prediction-only twin.

# %%
again_a = fine_tune(theta0, src_tr, 20, 0.0, "repeat a")
again_b = fine_tune(theta0, src_tr, 20, 0.0, "repeat b")
rec.check(
    "zero_vector_when_same",
    float(
        ev.flat(ev.task_vector(again_a.state_dict(), again_b.state_dict())).abs().max()
    ),
    0.0,
    op="==",
    note="two identical β=0 runs: τ = 0 exactly",
)
rand_auc = ev.patch_auroc(
    torch.as_tensor(repro.rng(seed, 3).random(src_te.mask.shape)), src_te.mask
)
rec.check(
    "random_map_auroc",
    abs(rand_auc - 0.5),
    0.05,
    op="<=",
    note=f"random maps AUROC {rand_auc:.3f}",
)
acc_sp, maps_sp, _ = evaluate(src_pred, src_te)
acc_se, maps_se, _ = evaluate(src_se, src_te)
auc_sp, auc_se = (
    ev.patch_auroc(maps_sp, src_te.mask),
    ev.patch_auroc(maps_se, src_te.mask),
)
print(
    f"source: prediction-only acc {acc_sp:.3f}, AUROC {auc_sp:.3f} | "
    f"self-explaining acc {acc_se:.3f}, "
    f"AUROC {auc_se:.3f}"
)
rec.check(
    "source_se_better",
    auc_se,
    auc_sp,
    op=">",
    note="source self-explaining AUROC > prediction-only",
)

# %% [markdown]
# ## 3. Transfer to the targets, λ sweep
#
# For each target: its prediction-only model θ_T, the transferred models θ_T + λτ, and (for reference only) an
# *oracle* fine-tuned with the target's own masks. Explanation quality is patch AUROC against the mask and the
# pointing game (is the top patch relevant?).

# %%
rows, models_T, oracles, vecs = [], {}, {}, {}
for name in TARGETS:
    tr_, te_ = data[name]
    models_T[name] = fine_tune(theta0, tr_, target_steps, 0.0, f"{name}: β=0")
    oracles[name] = fine_tune(theta0, tr_, target_steps, beta, f"{name}: oracle")
    vecs[name] = ev.task_vector(models_T[name].state_dict(), theta0)
    base = models_T[name].state_dict()
    for lm in lams:
        m = ev.TinyViT()
        m.load_state_dict(ev.add_vector(base, tau, lm))  # θ_T + λ τ
        acc, maps, _ = evaluate(m, te_)
        rows.append(
            dict(
                target=name,
                lam=lm,
                acc=acc,
                auroc=ev.patch_auroc(maps, te_.mask),
                pointing=ev.pointing_game(maps, te_.mask),
            )
        )
    acc_o, maps_o, _ = evaluate(oracles[name], te_)
    rows.append(
        dict(
            target=name,
            lam="oracle",
            acc=acc_o,
            auroc=ev.patch_auroc(maps_o, te_.mask),
            pointing=ev.pointing_game(maps_o, te_.mask),
        )
    )
sweep = pd.DataFrame(rows)
display(
    sweep.pivot(index="target", columns="lam", values="auroc")
    .round(3)
    .style.set_caption("patch AUROC")
)
display(
    sweep.pivot(index="target", columns="lam", values="acc")
    .round(3)
    .style.set_caption("accuracy")
)

# %% [markdown]
# `lambda_zero_identity`: adding the vector with λ = 0 gives back the prediction-only model exactly.

# %%
name0 = TARGETS[0]
m0 = ev.TinyViT()
m0.load_state_dict(ev.add_vector(models_T[name0].state_dict(), tau, 0.0))
with torch.no_grad():
    same = torch.equal(
        m0(data[name0][1].images, data[name0][1].classes)[0],
        models_T[name0](data[name0][1].images, data[name0][1].classes)[0],
    )
rec.check(
    "lambda_zero_identity", same, True, note="θ_T + 0·τ gives bit-identical logits"
)

# %%
sw = sweep[sweep.lam != "oracle"].astype({"lam": float})
fig, ax = plt.subplots(1, 2, figsize=(10, 3.4))
for name in TARGETS:
    r = sw[sw.target == name]
    style = dict(ls="--", color="k") if name == UNRELATED else {}
    ax[0].plot(r.lam, r.auroc, marker="o", label=name, **style)
    ax[1].plot(r.lam, r.acc, marker="o", label=name, **style)
ax[0].axhline(0.5, color="gray", lw=0.8, ls=":")
ax[0].set(xlabel="λ", ylabel="patch AUROC", title="explanation quality")
ax[1].set(xlabel="λ", ylabel="accuracy", title="classification")
ax[0].axvline(lam, color="gray", lw=0.8)
ax[1].axvline(lam, color="gray", lw=0.8)
ax[1].legend(fontsize=7, ncol=2)
plt.tight_layout()
plt.show()

# %% [markdown]
# ## 4. Faithfulness and the Kernel SHAP reference
#
# AUROC compares a map with the *object*; deletion/insertion ask the *model*: remove (or reveal) patches in the order
# of the map and follow the true-class probability (deletion: lower area is better; insertion: higher). Kernel SHAP
# estimates each patch's Shapley value for the prediction-only target model with 150 coalitions (150 inferences per
# image), the many-inference reference of the predecessor paper.

# %%
faith = []
shap_maps = {}
for name in TARGETS:
    te_ = data[name][1]
    idx = torch.arange(min(n_shap, len(te_)))
    x, msk = te_.images[idx], te_.mask[idx]
    transferred = ev.TinyViT()
    transferred.load_state_dict(ev.add_vector(models_T[name].state_dict(), tau, lam))
    maps = {}
    for label, m in [
        ("prediction-only", models_T[name]),
        ("transferred", transferred),
        ("oracle", oracles[name]),
    ]:
        m.eval()
        with torch.no_grad():
            maps[label] = m(x, te_.classes)[1][idx, :, te_.labels[idx]]
    t0 = time.process_time()
    maps["Kernel SHAP"] = ev.kernel_shap(
        prob_fn(models_T[name], te_, idx), x, n_coalitions, seed
    )
    t_shap = time.process_time() - t0
    maps["random"] = torch.as_tensor(
        repro.rng(seed, 9).random(msk.shape), dtype=torch.float32
    )
    shap_maps[name] = (x, msk, maps)
    for label, mp in maps.items():
        d, i = ev.deletion_insertion(prob_fn(models_T[name], te_, idx), x, mp)
        faith.append(
            dict(
                target=name,
                map=label,
                auroc=ev.patch_auroc(mp, msk),
                deletion=d,
                insertion=i,
                inferences=n_coalitions if label == "Kernel SHAP" else 1,
                cpu_s=t_shap if label == "Kernel SHAP" else float("nan"),
            )
        )
faith = pd.DataFrame(faith)
display(
    faith.groupby("map")[["auroc", "deletion", "insertion", "inferences"]]
    .mean()
    .round(3)
)

# %% [markdown]
# Deletion/insertion here always probe the *prediction-only* target model (the one a user has), so the maps are
# compared on the same model; the transferred map is computed by θ_T + λτ. A saliency grid for three targets:

# %%
show = [t for t in TARGETS if t != UNRELATED][:2] + [UNRELATED]
labels_ = ["prediction-only", "transferred", "oracle", "Kernel SHAP"]
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
# ## 5. Can the gain be predicted a priori?
#
# Without any target explanation labels, we compute for each target: the cosine between τ and the target's own task
# vector `θ_T − θ₀`; the norm ratio `‖θ_T − θ₀‖ / ‖τ‖`; the linear CKA between the target's CLS features before and
# after adding τ (how much the vector disturbs the representation); the change in the entropy of the predicted
# class's patch map after adding τ (does it become concentrated?); and the fraction of predictions left unchanged.
# Each is correlated (Spearman, permutation p-value) with the measured AUROC gain at λ = 1. With about ten targets
# this is a small sample, and five predictors are tried, so the p-values are Bonferroni-corrected.

# %%
gain = {
    t: float(
        sw[(sw.target == t) & (sw.lam == lam)].auroc.iloc[0]
        - sw[(sw.target == t) & (sw.lam == 0)].auroc.iloc[0]
    )
    for t in TARGETS
}
feat = {}
tau_flat = ev.flat(tau)
for name in TARGETS:
    te_ = data[name][1]
    base = models_T[name]
    moved = ev.TinyViT()
    moved.load_state_dict(ev.add_vector(base.state_dict(), tau, lam))
    base.eval()
    moved.eval()
    with torch.no_grad():
        h0, h1 = base.tokens(te_.images)[:, 0], moved.tokens(te_.images)[:, 0]
        l0, p0 = base(te_.images, te_.classes)
        l1, p1 = moved(te_.images, te_.classes)
    pred0, pred1 = l0.argmax(1), l1.argmax(1)
    ar = torch.arange(len(te_))
    vT = ev.flat(vecs[name])
    feat[name] = {
        "cos(τ, τ_T)": float(F.cosine_similarity(tau_flat, vT, dim=0)),
        "‖τ_T‖/‖τ‖": float(vT.norm() / tau_flat.norm()),
        "CKA before/after": ev.linear_cka(h0, h1),
        "Δ map entropy": ev.map_entropy(p1[ar, :, pred1])
        - ev.map_entropy(p0[ar, :, pred0]),
        "unchanged predictions": float((pred0 == pred1).float().mean()),
    }
feat = pd.DataFrame(feat).T
feat["AUROC gain"] = pd.Series(gain)
display(feat.round(3))
stats = {
    c: ev.spearman_perm(feat[c].values, feat["AUROC gain"].values, seed=seed)
    for c in feat.columns[:-1]
}
stats = pd.DataFrame(stats, index=["spearman ρ", "perm p"]).T
stats["Bonferroni p"] = (stats["perm p"] * len(stats)).clip(upper=1.0)
display(stats.round(3))
best = stats["spearman ρ"].abs().idxmax()

fig, ax = plt.subplots(figsize=(5.2, 3.4))
ax.scatter(feat[best], feat["AUROC gain"])
for t in TARGETS:
    ax.annotate(
        t,
        (feat.loc[t, best], feat.loc[t, "AUROC gain"]),
        fontsize=7,
        xytext=(3, 3),
        textcoords="offset points",
    )
ax.axhline(0, color="gray", lw=0.8)
ax.set(
    xlabel=best,
    ylabel=f"AUROC gain at λ={lam}",
    title=f"best predictor: ρ = {stats.loc[best, 'spearman ρ']:.2f} (n = "
    f"{len(TARGETS)})",
)
plt.show()

# %% [markdown]
# ## 6. Interaction
#
# The slider moves λ and shows the transferred model's map for one test image of each target (precomputed frames,
# works in the static page). The live control recomputes for any target and λ.

# %%
frames = {}
for lm in lams:
    row = []
    for name in TARGETS:
        te_ = data[name][1]
        m = ev.TinyViT()
        m.load_state_dict(ev.add_vector(models_T[name].state_dict(), tau, lm))
        m.eval()
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
        axs[0, j].imshow(data[name][1].images[0].permute(1, 2, 0).numpy())
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
    te_ = data[target][1]
    m = ev.TinyViT()
    m.load_state_dict(ev.add_vector(models_T[target].state_dict(), tau, lam_))
    m.eval()
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
# ## 7. The claims record
#
# How to read it. λ = 1 was fixed before any result was seen (no target explanation labels may choose it); the
# sweep above shows what other values would have given. In the background-label domain the relevance mask is the
# background, so a gain there means the vector changed the maps in a way that happens to rank background patches
# higher, not that it learned that domain's rule. The *a priori* analysis has about ten points and five candidate
# features: even a corrected p-value from it is weak evidence.

# %%
related = [t for t in TARGETS if t != UNRELATED]
improved = sum(gain[t] > 0 for t in related)
at = sw[sw.lam == lam].set_index("target")
at0 = sw[sw.lam == 0].set_index("target")
acc_change = float((at.loc[related, "acc"] - at0.loc[related, "acc"]).mean())
rec.claim(
    "targets_improved",
    f"Adding the explainability vector (λ={lam}) raises explanation AUROC on "
    "most related "
    "targets (holds for at least two thirds)",
    paper="consistent gains on 10 targets (predecessor: 9/10)",
    measured=improved / len(related),
    op=">=",
    target=2 / 3,
    unit="share of related targets improved",
    note=f"{improved}/{len(related)} targets improved; mean AUROC gain on related "
    f"targets {np.mean([gain[t] for t in related]):+.3f}",
)
rec.claim(
    "accuracy_preserved",
    "Accuracy is largely preserved (mean change within 3 points)",
    paper="largely preserved",
    measured=acc_change,
    op=">=",
    target=-0.03,
    unit="accuracy change (related targets)",
    baseline=float(at0.loc[related, "acc"].mean()),
)
rec.claim(
    "unrelated_domain_no_gain",
    "No gain on the less-related domain (label = background)",
    paper="transfer fails between less-related domains",
    measured=gain[UNRELATED],
    op="<=",
    target=0.02,
    unit="AUROC gain",
    note="the relevance there is the background; the source vector teaches 'look at "
    "the object'",
)
fm = faith.groupby("map").auroc.mean()
rec.claim(
    "vs_kernel_shap",
    "The transferred one-inference map is comparable to Kernel SHAP with ~150 "
    "inferences "
    "(holds if its AUROC is at least Kernel SHAP's − 0.05)",
    paper="comparable (predecessor)",
    measured=float(fm["transferred"] - fm["Kernel SHAP"]),
    op=">=",
    target=-0.05,
    unit="mean patch AUROC over targets, transferred − Kernel SHAP",
    baseline=float(fm["Kernel SHAP"]),
    note=f"transferred {fm['transferred']:.3f}, Kernel SHAP {fm['Kernel SHAP']:.3f}; "
    f"inferences 1 vs {n_coalitions}. AUROC against the object mask, which "
    "favours object-centred maps; see deletion/insertion for faithfulness to the "
    "model",
)
rec.claim(
    "apriori_signal",
    "A model-internal feature computed without target explanations predicts the gain "
    "(holds if its Bonferroni-corrected permutation p < 0.05)",
    paper="non-trivial signal",
    measured=float(stats.loc[best, "Bonferroni p"]),
    op="<",
    target=0.05,
    unit="Bonferroni-corrected permutation p",
    note=f"best feature {best}: Spearman ρ {stats.loc[best, 'spearman ρ']:.3f}; "
    f"n = {len(TARGETS)} targets: a small sample",
)
rec.save()
