# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # In-context multiclass classification and the shape of the class centers
#
# A transformer can classify *in context*: it reads labelled examples `(x_i, y_i)` of a task it has never seen
# and labels a query. The paper studies when this works for **many classes**, and singles out the geometry of
# the class centers: stacked into a matrix `M`, their **stable rank** `‖M‖_F² / ‖M‖₂²` measures how isotropic
# (spread in many directions) they are. Its findings: isotropy (high stable rank) improves in-context
# generalisation; linear transformers trained over many tasks learn the task with near-optimal **per-label**
# sample complexity (after meta-training on tasks that share a k-dimensional class subspace, the examples needed
# per label depend on k, not on the ambient dimension d); under label imbalance at test time, majority classes
# are easier and minority classes more error-prone, and higher stable rank makes the model more robust; trained
# transformers follow the same trends. We generate tasks with a prescribed spectrum, train linear and softmax
# transformers, and measure each finding **against the data's own references**: the Bayes rule that knows the
# centers, plug-in LDA that sees only the prompt, and a plug-in rule told the shared subspace. A trend that the
# Bayes rule shows too is a property of the data, not of in-context learning.
#
# | | paper | this notebook |
# |---|---|---|
# | data | spectral class-center generator, real datasets | the same generator (d = 16, C = 5, R² = 9; shared subspace k = 4 in d ∈ {16, 64, 256}); iris, wine, digits prompts (scikit-learn) |
# | models | linear transformers (theory), trained transformers, pretrained LLMs | linear transformers (reduced form, d×d weights, gradient descent); a 2-layer softmax transformer trained from scratch; no LLM |
# | training | gradient-based, many random tasks | fresh random tasks: live for d = 16 (also an LT with a constant feature on imbalanced prompts); the d ∈ {16, 64, 256} shared-subspace models (constant and decaying step size, W saved at doubling numbers of training tasks) and the softmax transformers (balanced, imbalanced and shared-subspace tasks) from checkpoints made by `data/14_icl_multiclass/make_models.py` |
# | seeds | not stated | 3 seeds for every trained or sampled claim (1 in quick mode) |
# | hardware | not stated | 2 CPU cores, ≤ 5 min |
#
# :::{note}
# **What is reconstructed.** Only the abstract was available to us. The data generator (`M = U diag(σ) Vᵀ` with
# `σ_i ∝ i^(−α)`, scaled to `‖M‖_F² = C R²`, Gaussian features), the linear-transformer parameterisation and its
# reduced form, the shared-subspace meta-learning setting (from Magen & Vardi 2025), and all experimental
# settings are **our reconstruction** from the abstract and prior work on in-context classification (Frei &
# Vardi 2024; Magen & Vardi 2025; Zhang, Frei & Bartlett 2024). No pretrained LLM can be run offline, so the
# "consistent with LLMs" part is replaced by a small softmax transformer trained here.
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
            "git+https://github.com/neurips2026-executed/book@main",
        ],
        check=True,
    )

# %% tags=["parameters"]
quick = False
seed = 0
d, C, R2 = 16, 5, 9.0  # feature dimension, classes, mean squared center norm
per_label = 8  # context examples per label
# spectral decay: stable rank from C-1 down to ~1
alphas = [0.0, 0.25, 0.5, 1.0, 2.0, 4.0]
# the live linear transformers (d = 16, isotropic tasks): SGD steps, tasks per step
lt_steps, batch_size = 400, 128
n_eval = 3000  # test prompts per point
n_tf = 1000  # of which the softmax transformer scores the first n_tf
majority = 0.6  # context prior of class 0 in the imbalance test
n_tasks_margin = 40  # fixed tasks for the margin test
# a harder R² for the per-label sweep, so that C = 3 does not saturate
R2_small = 3.0
per_label_grid = [1, 2, 3, 4, 6, 8, 11, 16, 23, 32]  # about √2 apart
class_grid = [3, 5, 8]
n_curve = 3000  # test prompts per point of the per-label curves
n_boot = 200  # bootstrap rounds for the intervals of examples per label

# %% tags=["hide-input"]
import time

import matplotlib.pyplot as plt
import numpy as np
import torch
from IPython.display import Markdown, display
from scipy.stats import spearmanr
from sklearn import datasets
from sklearn.decomposition import PCA
from tqdm.auto import tqdm

from helpers import checkpoints, claims, plotting, repro, train
from helpers import icl_multiclass as icl

if quick:
    alphas, lt_steps, n_eval, n_tf, n_tasks_margin = [0.0, 1.0, 4.0], 100, 600, 600, 15
    per_label_grid, class_grid, n_curve, n_boot = [1, 4, 16], [3, 5], 300, 50

seeds = [seed] if quick else [seed, seed + 1, seed + 2]
env = repro.setup(seed)
# small matrices: one thread is fastest, and fair to a shared machine
torch.set_num_threads(1)
plotting.use_style()
rec = claims.ClaimsRecord(
    "14_icl_multiclass",
    dict(
        quick=quick,
        seed=seed,
        seeds=seeds,
        d=d,
        C=C,
        R2=R2,
        per_label=per_label,
        alphas=alphas,
        lt_steps=lt_steps,
        batch_size=batch_size,
        n_eval=n_eval,
        majority=majority,
        R2_small=R2_small,
        per_label_grid=per_label_grid,
        class_grid=class_grid,
    ),
)
N = per_label * C
t_start = time.time()
print(env, "| seeds", seeds)

# %% [markdown]
# ## 1. Tasks with a prescribed spectrum
#
# A task is a class-center matrix `M = U diag(σ) Vᵀ` (d × C): `U` has orthonormal columns in feature space, `V`
# orthonormal columns orthogonal to the ones vector (the centers sum to zero, so the rank is at most C − 1), and
# `σ_i = i^(−α)` rescaled so that `‖M‖_F² = C R²` (the average squared center norm is R² whatever α). The stable
# rank is then `Σσ_i² / σ_1²`: α = 0 gives the maximum C − 1 (isotropic centers), large α gives 1 (collinear
# centers). Features are `x = μ_y + N(0, I)`. Every prompt draws a fresh task; `icl.sample_prompts` draws a whole
# batch of tasks at once (one batched QR for the `U`s and `V`s, one draw for the noise).

# %%
rng = repro.rng(seed, 1)
r = C - 1
srank_target = [float((icl.power_spectrum(r, a) ** 2).sum()) for a in alphas]
srank_err = 0.0
for a, target in zip(alphas, srank_target):
    M = icl.class_centers(d, C, icl.power_spectrum(r, a), R2, rng)
    srank_err = max(srank_err, abs(icl.stable_rank(M) - target))
    print(
        f"alpha={a:4.2f}: prescribed stable rank {target:.4f}, generated "
        f"{icl.stable_rank(M):.4f}, ||M||_F^2 = {np.linalg.norm(M) ** 2:.3f}"
    )

pi_imb = icl.label_priors(C, majority)
y = icl.prompt_labels(N, pi_imb, rng)
prior_err = float(np.abs(np.bincount(y, minlength=C) / N - pi_imb).max())
print("imbalanced context label shares:", np.bincount(y, minlength=C) / N)
print("prescribed                     :", pi_imb)

# %% [markdown]
# ## 2. The linear transformer and its reduced form
#
# One linear self-attention layer reads the embedding `E` whose columns are `(x_i, onehot(y_i))` and `(x_q, 0)`
# and outputs `E + W_PV E_ctx (E_ctxᵀ W_KQ E) / N`. With the usual sparse weights (`W_KQ` has a d × d block `W`,
# `W_PV` an identity block on the label rows) the query's label slot reduces to
#
# $$ s_c(x_q) = \frac1N \sum_{i: y_i = c} x_i^\top W x_q = \hat\pi_c \, \hat\mu_c^\top W x_q , $$
#
# the **class share times the class mean**, dotted with `W x_q`; the prediction is `argmax_c s_c`. Two things
# follow. Without imbalance, the margin of the true class `y` over `c` is about `‖μ_y‖² − μ_cᵀμ_y` (for W = I):
# nearly collinear centers (low stable rank) shrink it. With imbalance the share `π̂_c` multiplies each score, so
# majority classes gain and minority classes lose, more so when centers overlap. Unlike the Bayes rule
# `μ_cᵀx − ‖μ_c‖²/2 + log π_c`, the score has no bias terms. We check that the reduction equals the full forward
# pass.

# %%
p = icl.sample_prompts(64, N, d, C, icl.power_spectrum(r, 1.0), R2, rng)
W_test = torch.randn(
    d, d, dtype=torch.float64, generator=torch.Generator().manual_seed(seed)
)
W_kq = torch.zeros(d + C, d + C, dtype=torch.float64)
W_kq[:d, :d] = W_test
W_pv = torch.zeros(d + C, d + C, dtype=torch.float64)
W_pv[d:, d:] = torch.eye(C, dtype=torch.float64)
full = icl.lsa_forward(p["X"].double(), p["Y"], p["xq"].double(), W_kq, W_pv, C)
reduced = icl.reduced_scores(p["X"].double(), p["Y"], p["xq"].double(), W_test, C)
red_err = (full - reduced).abs().max().item()
print(f"max |full forward - reduced form| = {red_err:.2e}")

# %% [markdown]
# **Training.** `W` starts at zero and is trained by gradient descent (SGD, the algorithm the theory analyses;
# unlike Adam it does not depend on the basis of feature space) on the softmax cross-entropy of the scores, over
# fresh isotropic tasks (α = 0), one model per seed. The theory predicts `W ∝ I` for isotropic tasks: with a fresh
# `U` per task, no direction of feature space is special, and the expected gradient from `W = 0` is a multiple of
# the identity; the check below confirms it (the cosine per seed is printed under the training cell). So on isotropic tasks the "trained
# LT" of sections 3–5 and 7 is the closed-form rule `W = I` plus a little noise. Next to it, a 2-layer softmax
# transformer
# (`helpers.nn.Block`, no positional encoding, tokens `(x_i, y_i)` and a query token) trained with AdamW on the
# same kind of tasks; its three seeds come from a checkpoint (its training curves are shown below), quick mode
# trains a tiny one live.

# %%
sigma_iso = icl.power_spectrum(r, 0.0)
lts, cos_I, lt_plateau = {}, [], []
for s in seeds:
    with repro.seeded(s):
        lt = icl.LinearICL(d)
        hist = icl.train_icl(
            lt,
            icl.task_stream(s, 2, batch_size, N, d, C, sigma_iso, R2),
            lt_steps,
            optimizer="sgd",
            lr=1.0,
            seed=s,
            desc=f"linear transformer, seed {s}",
        )
    lts[s] = lt
    cos_I.append(icl.matrix_cosine(lt.W.detach(), np.eye(d)))
    lt_plateau.append(train.plateau(hist.loss))
print("cos(W, I) per seed:", np.round(cos_I, 4))

# %%
tf_cfg = icl.checkpoint_config("softmax_tf")
tfs, tf_plateau = {}, []
if quick:
    for s in seeds:
        with repro.seeded(s):
            tf = icl.SoftmaxICL(d, C, d_model=32, n_layer=1, n_head=2)
            tf_hist = icl.train_icl(
                tf,
                icl.task_stream(s, 2, 32, N, d, C, sigma_iso, R2),
                100,
                optimizer="adamw",
                lr=3e-3,
                warmup=10,
                seed=s,
                desc="tiny softmax transformer",
            )
        tfs[s] = tf.eval()
        tf_plateau.append(train.plateau(tf_hist.loss))
else:
    ck_tf = checkpoints.load(icl.CHECKPOINT_SLUG, "softmax_tf", config=tf_cfg)
    checkpoints.require_seeds(ck_tf, seeds)  # a clear error for SEED outside them
    for s in seeds:
        tf = icl.SoftmaxICL(
            d, C, tf_cfg["d_model"], tf_cfg["n_layer"], tf_cfg["n_head"]
        )
        tf.load_state_dict(
            {
                k[len(f"{s}.") :]: v
                for k, v in ck_tf.tensors.items()
                if k.startswith(f"{s}.")
            }
        )
        tfs[s] = tf.eval()
        tf_plateau.append(train.plateau(ck_tf.manifest["history"][f"loss/{s}"]))
    print(
        f"softmax TF checkpoint: {tf_cfg['steps']} AdamW steps of {tf_cfg['batch']} "
        "tasks "
        f"per seed; final losses {ck_tf.manifest['metrics']}"
    )
    checkpoints.plot_history(
        ck_tf.manifest, title="softmax transformers: training loss"
    )
    plt.show()

# %% [markdown]
# ## 3. Accuracy against stable rank, next to the data's own references
#
# For each α and seed we draw `n_eval` fresh prompts and score them with the trained linear transformer (LT),
# `W = I`, the softmax transformer (on the first `n_tf` of them), **plug-in LDA** (class means and shares from
# the prompt: the natural learner that sees only the prompt) and the **Bayes rule** that knows the task's
# centers (the ceiling). If accuracy falls with the stable rank for the Bayes rule too, that fall is a property of
# the data; what is specific to the transformer is how far it stays from the references.


# %%
@torch.no_grad()
def evaluate(
    s, alpha, pi=None, n=n_eval, C_=C, per=per_label, R2_=R2, stream=3, tf=True
):
    """Per-class accuracy of every model on n fresh prompts (seed s); the softmax TF,
    the slowest by far, on the first n_tf of them."""
    key = (int(alpha * 100), C_, per, int(R2_ * 10))
    p_ = icl.sample_prompts(
        n,
        per * C_,
        d,
        C_,
        icl.power_spectrum(C_ - 1, alpha),
        R2_,
        repro.rng(s, stream, *key),
        pi=pi,
    )
    X, Y, xq = p_["X"], p_["Y"], p_["xq"]
    out = {
        "trained LT": lts[s](X, Y, xq, C_),
        "W = I": icl.reduced_scores(X, Y, xq, torch.eye(d), C_),
        "plug-in LDA": icl.lda_scores(X, Y, xq, C_),
        "Bayes": icl.bayes_scores(p_["M"], xq, pi),
    }
    acc = {k: icl.accuracy_by_class(v, p_["yq"], C_) for k, v in out.items()}
    if tf and C_ == C:
        sc = tfs[s](X[:n_tf], Y[:n_tf], xq[:n_tf])
        acc["softmax TF"] = icl.accuracy_by_class(sc, p_["yq"][:n_tf], C_)
    return acc


bal = {s: {a: evaluate(s, a) for a in alphas} for s in tqdm(seeds, desc="balanced")}
models = list(bal[seed][alphas[0]])
acc_bal = {  # acc_bal[model][seed index] = accuracy per alpha
    m: np.array([[bal[s][a][m].mean() for a in alphas] for s in seeds]) for m in models
}
print("mean over seeds; stable rank:", np.round(srank_target, 2))
for m in models:
    print(f"{m:12s}", np.round(acc_bal[m].mean(0), 3))


def rho(x, ys):
    """Spearman correlation of x with each row of ys (one per seed)."""
    return [float(spearmanr(x, y_).statistic) for y_ in ys]


rho_lt, rho_bayes = (
    rho(srank_target, acc_bal["trained LT"]),
    rho(srank_target, acc_bal["Bayes"]),
)
rho_tf = rho(srank_target, acc_bal["softmax TF"])
gap_lda = acc_bal["trained LT"] - acc_bal["plug-in LDA"]  # LT minus plug-in LDA
rho_gap = rho(srank_target, gap_lda)
print("Spearman(stable rank, accuracy) per seed:")
print(f"  LT {np.round(rho_lt, 2)}, softmax TF {np.round(rho_tf, 2)}")
print(f"  Bayes rule {np.round(rho_bayes, 2)}")
print(f"LT - plug-in LDA accuracy (mean over seeds): {np.round(gap_lda.mean(0), 3)}")
print(f"Spearman(stable rank, LT - plug-in LDA): {np.round(rho_gap, 2)}")

# %% [markdown]
# ## 4. Label imbalance at test time
#
# The context now has class 0 with share `majority` and the other classes sharing the rest; queries are drawn
# uniformly so every class is tested equally. We compare majority-class and minority-class accuracy for each
# stable rank, for the models and for the Bayes rule told the imbalanced prior (which also favours the majority,
# through `log π_c`).

# %%
imb = {
    s: {a: evaluate(s, a, pi=pi_imb, stream=4) for a in alphas}
    for s in tqdm(seeds, desc="imbalanced")
}
gap = {  # gap[model][seed index] = majority - minority accuracy per alpha
    m: np.array(
        [[imb[s][a][m][0] - imb[s][a][m][1:].mean() for a in alphas] for s in seeds]
    )
    for m in models
}
for m in models:
    print(f"{m:12s} majority - minority accuracy:", np.round(gap[m].mean(0), 3))

# %%
fig, ax = plt.subplots(1, 2, figsize=(11, 3.8))
for m in models:
    ax[0].plot(srank_target, acc_bal[m].mean(0), marker="o", label=m)
    ax[1].plot(srank_target, gap[m].mean(0), marker="o", label=m)
ax[0].set(xlabel="stable rank of M", ylabel="accuracy (balanced prompts)", ylim=(0, 1))
ax[1].set(xlabel="stable rank of M", ylabel="majority − minority accuracy")
ax[0].legend(fontsize=8)
ax[0].set_title("balanced context (mean of seeds)")
ax[1].set_title(f"class 0 has share {majority} of the context")
plt.show()

# %% [markdown]
# **Can training learn the prior correction?** The LT above was trained on balanced prompts, and its score has
# no term that could undo the share `π̂_c` that multiplies each class's score; what sections 4 and 5 test is the
# fixed rule `W = I`. A linear transformer *can* correct for the prior once its tokens carry a constant feature 1
# (standard in in-context-learning constructions): with weights `W̃ = [[W, w₁], [w₂ᵀ, b]]` on the (d + 1)-dim
# tokens the score becomes `π̂_c (μ̂_cᵀ W x_q + μ̂_cᵀ w₁ + w₂ᵀ x_q + b)`, and a negative `b` takes more from the
# majority's score than from the minorities' (`icl.with_constant_feature`). We train such an LT from `W̃ = 0` by
# SGD (decaying step) on imbalanced prompts, the context shares of section 4 with a random class as the majority
# in each prompt and queries of every class equally often, and ask whether it raises the minority classes'
# accuracy over `W = I` on the imbalanced test prompts of section 4 (isotropic tasks). The practitioner's
# reference: plug-in LDA told that queries are balanced (class means from the context, uniform prior).

# %%
counts_imb = np.bincount(y, minlength=C)  # the context shares of section 4
W_prior, prior_plateau, prior_gain, prior_gain_lda, prior_b = {}, [], [], [], []
for s in seeds:
    st_ = icl.sum_stream(s, 16, batch_size, counts_imb, d, C, sigma_iso, R2,
                         shuffle_counts=True)
    out_ = icl.train_sums(d, st_, lt_steps, lr=1.0, decay=100, constant_feature=True,
                          desc=f"LT with a constant feature, seed {s}")
    W_prior[s] = out_["W"]
    prior_plateau.append(train.plateau(out_["loss"]))
    prior_b.append(float(out_["W"][d, d] / out_["W"][:d, :d].diagonal().mean()))
    q = icl.class_sum_prompts(n_eval, counts_imb, d, C, sigma_iso, R2, repro.rng(s, 17))
    S_, xq_ = icl.with_constant_feature(q["S"], q["n"], q["xq"])
    acc_p = {
        "LT, constant feature": icl.sum_scores(S_, q["n"], xq_, W_prior[s]),
        "W = I": icl.sum_scores(q["S"], q["n"], q["xq"], torch.eye(d)),
        "LDA, uniform prior": icl.lda_sum_scores(q["S"], q["n"], q["xq"],
                                                 pi=icl.label_priors(C)),
    }
    acc_p = {m: icl.accuracy_by_class(v, q["yq"], C) for m, v in acc_p.items()}
    minor = {m: float(v[1:].mean()) for m, v in acc_p.items()}
    prior_gain.append(minor["LT, constant feature"] - minor["W = I"])
    prior_gain_lda.append(minor["LDA, uniform prior"] - minor["W = I"])
    print(f"seed {s}: b / mean diag(W) = {prior_b[-1]:+.3f}; minority accuracy "
          + ", ".join(f"{m} {v:.3f}" for m, v in minor.items())
          + f"; majority: LT {acc_p['LT, constant feature'][0]:.3f}, "
          f"W = I {acc_p['W = I'][0]:.3f}")
print(f"minority gain over W = I per seed: LT {np.round(prior_gain, 3)}, "
      f"LDA with uniform prior {np.round(prior_gain_lda, 3)}")

# %% tags=["remove-input"]
_lt_g, _lda_g = np.mean(prior_gain), np.mean(prior_gain_lda)
display(Markdown(
    f"Read from the run: the learned bias is {'negative' if max(prior_b) < 0 else 'not negative'} at "
    f"{'every' if max(prior_b) < 0 or min(prior_b) >= 0 else 'some'} seed (b ÷ the mean diagonal of W: "
    + ", ".join(f"{x:+.2f}" for x in prior_b) + f"), and minority accuracy moves by {_lt_g:+.3f} over `W = I` "
    f"(mean of seeds), against {_lda_g:+.3f} for plug-in LDA with a uniform prior"
    + (", so training recovers part of what the fixed form loses, not all of it." if 0 < _lt_g < _lda_g else ".")
))

# %% [markdown]
# **And a softmax transformer?** The softmax transformer of section 2 was trained on balanced prompts only, so an
# imbalanced context is outside its training distribution. We train the same model with the same optimiser on
# imbalanced prompts built like the constant-feature LT's (for more steps: with section 2's number the loss was
# still falling at every seed; the number is printed below): the context shares of section 4 with
# a random class as the majority in each prompt (classes renamed per prompt, `shuffle_classes`), queries of every
# class equally often (`make_models.py`, checkpoint `softmax_tf_imbalanced`; quick mode trains tiny ones live).
# Then both softmax transformers score the *same* imbalanced test prompts as in section 4 (class 0 the majority,
# isotropic tasks, the first `n_tf` of them), and we ask whether the one trained on imbalanced prompts has
# learned to correct for the prior: a higher minority-class accuracy than the balanced-trained one. For scale,
# the same difference for plug-in LDA: told the uniform query prior instead of using the context's shares.


# %% tags=["hide-input"]
def load_tfs(name, cfg, d_):
    """The softmax transformers of checkpoint `name` (one per seed), their plateaus."""
    ck_ = checkpoints.load(icl.CHECKPOINT_SLUG, name, config=cfg)
    checkpoints.require_seeds(ck_, seeds)
    out, plat = {}, []
    for s in seeds:
        tf = icl.SoftmaxICL(d_, C, cfg["d_model"], cfg["n_layer"], cfg["n_head"])
        tf.load_state_dict({k[len(f"{s}."):]: v for k, v in ck_.tensors.items()
                            if k.startswith(f"{s}.")})
        out[s] = tf.eval()
        plat.append(train.plateau(ck_.manifest["history"][f"loss/{s}"]))
    return out, plat, ck_


def tiny_tfs(stream_of, d_, desc):
    """Quick mode: tiny softmax transformers trained live on stream_of(s)."""
    out, plat = {}, []
    for s in seeds:
        with repro.seeded(s):
            tf = icl.SoftmaxICL(d_, C, d_model=32, n_layer=1, n_head=2)
            h_ = icl.train_icl(tf, stream_of(s), 100, optimizer="adamw", lr=3e-3,
                               warmup=10, seed=s, desc=desc)
        out[s] = tf.eval()
        plat.append(train.plateau(h_.loss))
    return out, plat


# %%
tfi_cfg = icl.checkpoint_config("softmax_tf_imbalanced")
pi_train = icl.label_priors(C, tfi_cfg["majority"])
if quick:
    tfs_imb, tf_imb_plateau = tiny_tfs(
        lambda s: icl.task_stream(s, 3, 32, N, d, C, sigma_iso, R2, pi=pi_train,
                                  shuffle_classes=True),
        d, "tiny softmax TF, imbalanced")
else:
    tfs_imb, tf_imb_plateau, ck_tfi = load_tfs("softmax_tf_imbalanced", tfi_cfg, d)
    print(f"checkpoint: {tfi_cfg['steps']} AdamW steps of {tfi_cfg['batch']} "
          f"imbalanced prompts per seed; final losses {ck_tfi.manifest['metrics']}")
    checkpoints.plot_history(
        ck_tfi.manifest, title="softmax transformers, imbalanced prompts: loss")
    plt.show()

tf_prior_gain, tf_prior_gain_lda, tf_imb_acc, tf_bal_acc, same_err = [], [], [], [], []
tf_on_bal = []  # accuracy on balanced prompts: imbalance-trained, balanced-trained
with torch.no_grad():
    for s in seeds:
        # the prompts of section 4 at alpha = 0 (same generator key), first n_tf
        p_ = icl.sample_prompts(n_eval, N, d, C, sigma_iso, R2,
                                repro.rng(s, 4, 0, C, per_label, int(R2 * 10)),
                                pi=pi_imb)
        X_, Y_, xq_ = p_["X"][:n_tf], p_["Y"][:n_tf], p_["xq"][:n_tf]
        yq_ = p_["yq"][:n_tf]
        a_ = {m: icl.accuracy_by_class(sc, yq_, C) for m, sc in (
            ("balanced-trained", tfs[s](X_, Y_, xq_)),
            ("imbalance-trained", tfs_imb[s](X_, Y_, xq_)),
            ("LDA, context prior", icl.lda_scores(X_, Y_, xq_, C)),
            ("LDA, uniform prior",
             icl.lda_scores(X_, Y_, xq_, C, icl.label_priors(C))))}
        same_err.append(float(np.abs(a_["balanced-trained"]
                                     - imb[s][0.0]["softmax TF"]).max()))
        tf_prior_gain.append(float(a_["imbalance-trained"][1:].mean()
                                   - a_["balanced-trained"][1:].mean()))
        tf_prior_gain_lda.append(float(a_["LDA, uniform prior"][1:].mean()
                                       - a_["LDA, context prior"][1:].mean()))
        tf_imb_acc.append(a_["imbalance-trained"])
        tf_bal_acc.append(a_["balanced-trained"])
        # and on balanced prompts (section 3's, alpha = 0): better at everything?
        pb_ = icl.sample_prompts(n_tf, N, d, C, sigma_iso, R2,
                                 repro.rng(s, 3, 0, C, per_label, int(R2 * 10)))
        tf_on_bal.append([
            float((t_[s](pb_["X"], pb_["Y"], pb_["xq"]).argmax(-1) == pb_["yq"])
                  .float().mean()) for t_ in (tfs_imb, tfs)])
        print(f"seed {s}: minority / majority accuracy, " + "; ".join(
            f"{m} {v[1:].mean():.3f} / {v[0]:.3f}" for m, v in a_.items()))
print("minority gain of the imbalance-trained softmax TF over the balanced-trained "
      f"one per seed: {np.round(tf_prior_gain, 3)} (LDA, uniform vs context prior: "
      f"{np.round(tf_prior_gain_lda, 3)})")

# %% tags=["remove-input"]
_g, _gl = np.mean(tf_prior_gain), np.mean(tf_prior_gain_lda)
_maj = np.mean([a[0] - b[0] for a, b in zip(tf_imb_acc, tf_bal_acc)])
display(Markdown(
    f"Read from the run: trained on imbalanced prompts, the softmax transformer's minority-class accuracy moves "
    f"by {_g:+.3f} over the balanced-trained one on the same prompts (mean of seeds; per seed "
    + ", ".join(f"{x:+.3f}" for x in tf_prior_gain) + f"), and its majority-class accuracy by {_maj:+.3f}; "
    f"plug-in LDA gains {_gl:+.3f} on the minority classes by using the uniform prior instead of the context's. "
    "On balanced prompts the two reach " + ", ".join(f"{a:.3f} / {b:.3f}" for a, b in tf_on_bal)
    + " (imbalance- / balanced-trained, per seed)."
    + (" The softmax transformer learns a prior correction from imbalanced training." if min(tf_prior_gain) > 0
       else " The gain is not positive at every seed.")
))

# %% [markdown]
# ## 5. Do the predicted margins explain per-class accuracy?
#
# The reduced form predicts, for a query of class y, the expected score margin over the closest rival,
# `min_c π_y‖μ_y‖² − π_c μ_cᵀμ_y` (`icl.predicted_margins`). We fix `n_tasks_margin` tasks with stable ranks
# across the sweep, use the imbalanced context, measure each class's accuracy on 500 prompts per task, and rank
# the (task, class) pairs by predicted margin and by measured accuracy. The trained LT here is, up to SGD noise,
# `W = I` (the check of section 2), the rule the margin is derived for, so a good ranking is expected; the question is whether
# the margin says more than simpler predictors of the same accuracies. We set three against it: the Bayes rule's
# own per-class accuracy ("this class is hard in this task"), the margin of a *balanced* context (the geometry
# without the priors) and the prior alone (majority or minority). The strongest of them is the claim's baseline.
# Pooled over classes, the majority class alone drives much of any ranking, so we also rank the minority classes
# on their own.

# %%
margin_rho, margin_rho_bayes = [], []
# other predictors of the LT's per-class accuracy, to see what the margin adds:
# the Bayes rule's accuracy (how hard the class is), the margin of a balanced
# context (no priors) and the prior alone (majority or not)
alt_rho = {"Bayes accuracy": [], "balanced margin": [], "prior": []}
minority_rho, minority_rho_bayes_acc = [], []  # the same, minority classes only
for s in tqdm(seeds, desc="margins"):
    rng_m = repro.rng(s, 10)
    mg, mg_bal, acc_c, acc_c_bayes = [], [], [], []
    for t in range(n_tasks_margin):
        a = alphas[t % len(alphas)]
        M = icl.class_centers(d, C, icl.power_spectrum(r, a), R2, rng_m)
        p_ = icl.sample_prompts(
            500, N, d, C, None, R2, repro.rng(s, 11, t), pi=pi_imb, task=M
        )
        with torch.no_grad():
            sc = lts[s](p_["X"], p_["Y"], p_["xq"], C)
        acc_c += list(icl.accuracy_by_class(sc, p_["yq"], C))
        sb = icl.bayes_scores(p_["M"], p_["xq"], pi_imb)
        acc_c_bayes += list(icl.accuracy_by_class(sb, p_["yq"], C))
        mg += list(icl.predicted_margins(M, pi_imb))
        mg_bal += list(icl.predicted_margins(M, icl.label_priors(C)))
    margin_rho.append(float(spearmanr(mg, acc_c).statistic))
    margin_rho_bayes.append(float(spearmanr(mg, acc_c_bayes).statistic))
    prior_c = np.tile(pi_imb, n_tasks_margin)
    for name_, pred in [
        ("Bayes accuracy", acc_c_bayes),
        ("balanced margin", mg_bal),
        ("prior", prior_c),
    ]:
        alt_rho[name_].append(float(spearmanr(pred, acc_c).statistic))
    minor = prior_c < pi_imb.max()
    a_, m_, b_ = (np.array(v)[minor] for v in (acc_c, mg, acc_c_bayes))
    minority_rho.append(float(spearmanr(m_, a_).statistic))
    minority_rho_bayes_acc.append(float(spearmanr(b_, a_).statistic))
best_alt = max(alt_rho, key=lambda k_: np.mean(alt_rho[k_]))
print("Spearman(predicted margin, LT per-class accuracy):", np.round(margin_rho, 3))
print(
    "Spearman(predicted margin, Bayes per-class accuracy):",
    np.round(margin_rho_bayes, 3),
)
print("other predictors of the LT's per-class accuracy (Spearman per seed):")
for k_, v in alt_rho.items():
    print(f"  {k_:16s} {np.round(v, 3)}")
print(
    f"minority classes only: margin {np.round(minority_rho, 3)}, "
    f"Bayes accuracy {np.round(minority_rho_bayes_acc, 3)}"
)

fig, ax = plt.subplots(figsize=(6, 3.6))
ax.scatter(mg, acc_c, s=10, label="trained LT")
ax.scatter(mg, acc_c_bayes, s=10, marker="x", label="Bayes rule")
ax.axvline(0, color="k", lw=0.6)
ax.set(xlabel="predicted margin  min_c π_y‖μ_y‖² − π_c μ_cᵀμ_y", ylabel="accuracy")
ax.set_title(f"per-class accuracy over {n_tasks_margin} fixed tasks (seed {seeds[-1]})")
ax.legend()
plt.show()

# %% [markdown]
# ## 6. Meta-learning a shared class subspace
#
# Now every task's centers lie in **one** k-dimensional subspace `U` of R^d (k = 4, fixed for the whole training
# run; only the arrangement `V` inside it changes from task to task). A learner that sees only the prompt cannot
# know `U`: plug-in LDA and `W = I` pay for noise in all d directions, so the examples they need per label grow
# with d. The theory (Magen & Vardi 2025, extended to C classes by the paper) says that a linear transformer
# trained over many such tasks learns `W ∝ UUᵀ`, a projection on the class subspace, after which the examples it
# needs per label depend on k and not on d. The fair reference for it is the **subspace oracle**: plug-in LDA
# after projecting on the true `U`. A practitioner without the oracle would meta-learn the subspace the plain
# way: **PCA + LDA** estimates `U` as the top-k principal directions of the pooled features of one batch of
# training tasks, then runs plug-in LDA in it; that is the baseline a trained LT has to match.
#
# **Two step sizes.** The first version of this chapter trained W by SGD with a constant step (800 steps of 256
# tasks) and found a d = 256 model whose eigenspace was right but which carried an unstructured residue off the
# subspace: SGD's gradient noise, which a constant step never lets die out. Here every (d, seed) is trained twice
# on the same stream of tasks: with the **constant** step (lr 1) and with a **decaying** step `lr / (1 + t/τ)`,
# the textbook remedy for SGD noise; W is saved at doubling numbers of training tasks, so that the examples
# needed per label can be read against the number of tasks seen (the theory's *task complexity*). The training
# runs in `make_models.py` (settings printed below; quick mode trains small ones live). Prompts are drawn as
# **class sums** (`icl.class_sum_prompts`): the LT, `W = I` and plug-in LDA read a prompt only through the sum of
# each class's context features and the class counts, and the sum of `n` draws `μ + N(0, I)` is exactly
# `nμ + √n N(0, I)`; so this is the same distribution at a fraction of the cost (a unit test checks every scorer
# against its prompt form). The decaying-step model is "the trained LT" from here on.

# %%
sh_cfg = icl.checkpoint_config("shared_lt")
k_sub, C_sh, R2_sh = sh_cfg["k"], sh_cfg["C"], sh_cfg["R2"]
sigma_sh = icl.power_spectrum(k_sub, 0.0)
if quick:  # small live versions of the checkpoint's two arms
    dims = [16, 64]
    sh_cfg.update(batch=128, steps={"decay": 200, "constant": 100},
                  snapshots={"decay": [25, 50, 100, 200], "constant": [100]})
    snaps, U_sh, sh_loss = {}, {}, {}
    for dd in dims:
        for s in seeds:
            U_sh[dd, s] = icl.random_orthonormal(
                dd, k_sub, repro.rng(s, sh_cfg["subspace_stream"], dd))
            for arm, decay in (("constant", None), ("decay", sh_cfg["decay"])):
                res_ = icl.train_sums(
                    dd, icl.sum_stream(s, sh_cfg["train_stream"] * 1000 + dd,
                                       sh_cfg["batch"], [sh_cfg["per_label"]] * C_sh,
                                       dd, C_sh, sigma_sh, R2_sh, U=U_sh[dd, s]),
                    sh_cfg["steps"][arm], lr=sh_cfg["lr"], decay=decay,
                    snapshots=sh_cfg["snapshots"][arm], desc=f"d={dd} {arm}")
                snaps.update({(arm, dd, s, t): W for t, W in res_["snapshots"].items()})
                sh_loss[arm, dd, s] = res_["loss"]
else:
    dims = sh_cfg["dims"]
    ck_sh = checkpoints.load(icl.CHECKPOINT_SLUG, "shared_lt", config=sh_cfg)
    checkpoints.require_seeds(ck_sh, seeds)
    # U regenerated exactly from its seed; the checkpoint's float16 copy must match it
    U_sh = {(dd, s): icl.random_orthonormal(
        dd, k_sub, repro.rng(s, sh_cfg["subspace_stream"], dd))
        for dd in dims for s in seeds}
    U_err = max(float(np.abs(ck_sh.tensors[f"U/{dd}/{s}"].double().numpy()
                             - U_sh[dd, s]).max()) for dd, s in U_sh)
    rec.check("checkpoint_subspace_matches", U_err, 1e-3, op="<=",
              note="stored (float16) vs regenerated U, max entry difference")
    snaps = {(arm, dd, s, t): ck_sh.tensors[f"W/{arm}/{dd}/{s}/{t}"].float()
             for arm, ts in sh_cfg["snapshots"].items() for t in ts
             for dd in dims for s in seeds}
    sh_loss = {(arm, dd, s): ck_sh.manifest["history"][f"loss/{arm}/{dd}/{s}"]
               for arm in sh_cfg["steps"] for dd in dims for s in seeds}
    print(f"checkpoint: SGD on {sh_cfg['batch']} fresh tasks per step, lr "
          f"{sh_cfg['lr']}, constant for {sh_cfg['steps']['constant']} steps or "
          f"decaying (τ = {sh_cfg['decay']}) for {sh_cfg['steps']['decay']}; "
          f"{ck_sh.manifest['wall_seconds']} s to train all")
    checkpoints.plot_history(ck_sh.manifest, title="shared-subspace LTs: training loss")
    plt.show()
T_dec, T_con = sh_cfg["steps"]["decay"], sh_cfg["steps"]["constant"]
W_sh = {(dd, s): snaps["decay", dd, s, T_dec] for dd in dims for s in seeds}
W_con = {(dd, s): snaps["constant", dd, s, T_con] for dd in dims for s in seeds}
sh_plateau = {(dd, s): train.plateau(sh_loss["decay", dd, s]) for dd in dims
              for s in seeds}

# %% [markdown]
# First the weights. For each model: the cosines of the principal angles between W's top-k eigenvectors and `U`
# (is the eigenspace right?) and the matrix cosine `cos(W, UUᵀ)` (is W the projection itself, with nothing off
# the subspace?), for both step sizes, and the same for the PCA estimate.


# %%
def UUt(dd, s):
    """The projection on the shared subspace of seed s at dimension dd."""
    return U_sh[dd, s] @ U_sh[dd, s].T


align = {key: icl.subspace_alignment(W_sh[key], U_sh[key]) for key in W_sh}
for dd in dims:
    for s in seeds:
        print(f"d={dd:3d} seed {s}: principal cosines {np.round(align[dd, s], 4)}, "
              "cos(W, UU^T) decaying step "
              f"{icl.matrix_cosine(W_sh[dd, s], UUt(dd, s)):.3f}, constant step "
              f"{icl.matrix_cosine(W_con[dd, s], UUt(dd, s)):.3f}")
min_cos = [min(float(align[dd, s].min()) for dd in dims) for s in seeds]
cos_UU = {dd: np.mean([icl.matrix_cosine(W_sh[dd, s], UUt(dd, s)) for s in seeds])
          for dd in dims}
cos_UU_con = {dd: np.mean([icl.matrix_cosine(W_con[dd, s], UUt(dd, s)) for s in seeds])
              for dd in dims}

# the practitioner's route to the same subspace: PCA of the pooled features of
# n_pca training-like tasks (one training batch; the LT saw steps x batch tasks)
n_pca = sh_cfg["batch"]
U_pca, align_pca = {}, {}
for dd in dims:
    for s in seeds:
        p_ = icl.sample_prompts(n_pca, sh_cfg["per_label"] * C_sh, dd, C_sh, sigma_sh,
                                R2_sh, repro.rng(s, 14, dd), U=U_sh[dd, s])
        U_pca[dd, s] = icl.pca_subspace(p_["X"].reshape(-1, dd), k_sub)
        align_pca[dd, s] = icl.subspace_alignment(U_pca[dd, s] @ U_pca[dd, s].T,
                                                  U_sh[dd, s])
min_cos_pca = [min(float(align_pca[dd, s].min()) for dd in dims) for s in seeds]
print(f"PCA of {n_pca} tasks' features, min principal cosine per seed (worst d): "
      f"{np.round(min_cos_pca, 4)}; trained LT {np.round(min_cos, 4)}")

# %% [markdown]
# How early is the eigenspace right? The first 5 steps of the same training run (same tasks, same step size),
# replayed here: the expected gradient at `W = 0` is already ∝ `UUᵀ`, so the principal cosines are close to 1
# almost at once; this is why the claim `learns_shared_subspace` is judged by `cos(W, UUᵀ)` at the end of
# training, which also counts what W holds off the subspace.

# %%
early_cos = {}
for dd in dims:
    for s in seeds:
        stream5 = icl.sum_stream(s, sh_cfg["train_stream"] * 1000 + dd, sh_cfg["batch"],
                                 [sh_cfg["per_label"]] * C_sh, dd, C_sh, sigma_sh,
                                 R2_sh, U=U_sh[dd, s])
        W5 = icl.train_sums(dd, stream5, 5, lr=sh_cfg["lr"], decay=sh_cfg["decay"],
                            progress=False)["W"]
        early_cos[dd, s] = float(icl.subspace_alignment(W5, U_sh[dd, s]).min())
cos_W_UU = [min(icl.matrix_cosine(W_sh[dd, s], UUt(dd, s)) for dd in dims)
            for s in seeds]
cos_con_UU = [min(icl.matrix_cosine(W_con[dd, s], UUt(dd, s)) for dd in dims)
              for s in seeds]
cos_pca_UU = [min(icl.matrix_cosine(U_pca[dd, s] @ U_pca[dd, s].T, UUt(dd, s))
                  for dd in dims) for s in seeds]
min_cos_5 = [min(early_cos[dd, s] for dd in dims) for s in seeds]
print(f"cos(W, UU^T), worst d per seed: decaying step {np.round(cos_W_UU, 3)}, "
      f"constant step {np.round(cos_con_UU, 3)}, PCA {np.round(cos_pca_UU, 3)}")
print(f"min principal cosine after 5 SGD steps: {np.round(min_cos_5, 3)}, "
      f"after training: {np.round(min_cos, 4)}")

# %% [markdown]
# Then accuracy against examples per label, on `n_curve` fresh prompts per grid point (a grid about √2 apart),
# for every d and seed, with every model scoring the same prompts: the trained LT, the constant-step LT, `W = I`,
# plug-in LDA, PCA + LDA, the subspace oracle and the Bayes rule; at the largest d also every saved snapshot of
# both training runs. "Examples needed" is where a curve first reaches 90 % of the Bayes rule's mean accuracy
# over the grid (interpolated in log examples).

# %%
names = ("trained LT", "LT, constant step", "W = I", "plug-in LDA", "PCA + LDA",
         "subspace oracle", "Bayes")


@torch.no_grad()
def shared_curves(dd, s, chunk=1000):
    """0/1 scores of every model on n_curve prompts per grid point (d = dd, seed s),
    prompts drawn as class sums; at the largest d also every saved snapshot."""
    U_ = U_sh[dd, s]
    Ws = {"trained LT": W_sh[dd, s], "LT, constant step": W_con[dd, s],
          "W = I": torch.eye(dd)}
    if dd == dims[-1]:
        Ws.update({(a, t): snaps[a, dd, s, t] for a, ts in sh_cfg["snapshots"].items()
                   for t in ts})
    correct = {m: [] for m in [*names, *Ws]}
    for n_ in per_label_grid:
        hits = {m: [] for m in correct}
        for c in range(0, n_curve, chunk):
            q = icl.class_sum_prompts(min(chunk, n_curve - c), [n_] * C_sh, dd, C_sh,
                                      sigma_sh, R2_sh, repro.rng(s, 12, dd, n_, c),
                                      U=U_)
            S, n, xq = q["S"], q["n"], q["xq"]
            sc = {m: icl.sum_scores(S, n, xq, W) for m, W in Ws.items()}
            sc["plug-in LDA"] = icl.lda_sum_scores(S, n, xq)
            sc["PCA + LDA"] = icl.lda_sum_scores(S, n, xq, U=U_pca[dd, s])
            sc["subspace oracle"] = icl.lda_sum_scores(S, n, xq, U=U_)
            sc["Bayes"] = icl.bayes_scores(q["M"], xq)
            for m, v in sc.items():
                hits[m].append((v.argmax(-1) == q["yq"]).float().numpy())
        for m in correct:
            correct[m].append(np.concatenate(hits[m]))
    return correct

# %%
correct_sh = {}
for dd in dims:
    for s in tqdm(seeds, desc=f"d={dd}"):
        correct_sh[dd, s] = shared_curves(dd, s)
curves = {key: {m: [float(h.mean()) for h in v] for m, v in cs.items()}
          for key, cs in correct_sh.items()}
need_sh = {}  # examples per label to reach 90 % of the Bayes accuracy
for (dd, s), cv in curves.items():
    target = 0.9 * float(np.mean(cv["Bayes"]))
    for m in cv:
        if m != "Bayes":
            need_sh[m, dd, s] = icl.examples_to_reach(per_label_grid, cv[m], target)
print(f"examples per label for 90 % of Bayes, per seed, at d = {dims}:")
for m in names[:-1]:
    row = [np.round([need_sh[m, dd, s] for s in seeds], 2).tolist() for dd in dims]
    print(f"  {m:18s} {row}")

# %% [markdown]
# The curves for each d (mean over seeds). If the theory holds at our scale, the trained LT's curves lie on top
# of each other and on the subspace oracle's, while `W = I` and plug-in LDA slide to the right as d grows. The
# horizontal line is 90 % of the Bayes accuracy, the bar for "examples needed".

# %%
fig, axs = plt.subplots(1, len(dims), figsize=(4 * len(dims), 3.6), sharey=True)
styles = {"trained LT": "-o", "LT, constant step": "-", "W = I": "--s",
          "plug-in LDA": ":^", "PCA + LDA": ":", "subspace oracle": "-."}
for ax, dd in zip(axs, dims):
    for m, st in styles.items():
        ax.plot(per_label_grid, np.mean([curves[dd, s][m] for s in seeds], 0), st,
                label=m)
    ax.axhline(0.9 * np.mean([curves[dd, s]["Bayes"] for s in seeds]), color="k",
               lw=0.7)
    ax.set(xscale="log", xlabel="examples per label", title=f"d = {dd}, k = {k_sub}")
axs[0].set_ylabel("accuracy")
axs[0].legend(fontsize=8)
plt.show()


# %%
def ratio_or_bound(num, den):
    """num / den, where a curve that never reached the bar counts the grid's end
    (a missing numerator gives a lower bound, a missing denominator an upper one)."""
    end = per_label_grid[-1]
    return (end if np.isnan(num) else num) / (end if np.isnan(den) else den)


d_lo, d_hi = dims[0], dims[-1]


def d_ratio(m):
    """Per seed: examples per label of m at the largest d over those at the smallest."""
    return [ratio_or_bound(need_sh[m, d_hi, s], need_sh[m, d_lo, s]) for s in seeds]


def worst_over_oracle(m):
    """Per seed: examples per label of m over the subspace oracle's, worst d."""
    return [max(ratio_or_bound(need_sh[m, dd, s], need_sh["subspace oracle", dd, s])
                for dd in dims) for s in seeds]


lt_d_ratio, con_d_ratio, wi_d_ratio, lda_d_ratio, pca_d_ratio = (d_ratio(m) for m in (
    "trained LT", "LT, constant step", "W = I", "plug-in LDA", "PCA + LDA"))
lt_vs_oracle, con_vs_oracle, pca_vs_oracle = (worst_over_oracle(m) for m in (
    "trained LT", "LT, constant step", "PCA + LDA"))
# intervals: bootstrap the prompts of every grid point (paired across models), 90 %
# intervals of the ratios; a claim at most 1.5x holds only where the upper end of its
# interval is (_end: a bar never reached counts the grid's end, as in ratio_or_bound)
boot = {key: icl.bootstrap_examples(
            {m: correct_sh[key][m] for m in ("trained LT", "subspace oracle")},
            correct_sh[key]["Bayes"], per_label_grid, repro.rng(key[1], 15, key[0]),
            n_boot=n_boot) for key in correct_sh}
_end = lambda a: np.where(np.isnan(a), per_label_grid[-1], a)  # noqa: E731
ci = lambda r: np.percentile(r, [5, 95])  # noqa: E731
lt_d_ci = [ci(_end(boot[d_hi, s]["trained LT"]) / _end(boot[d_lo, s]["trained LT"]))
           for s in seeds]
lt_oracle_ci = [{dd: ci(_end(boot[dd, s]["trained LT"])
                        / _end(boot[dd, s]["subspace oracle"])) for dd in dims}
                for s in seeds]
lt_d_hi = [float(c[1]) for c in lt_d_ci]
lt_oracle_hi = [max(float(c[1]) for c in cs.values()) for cs in lt_oracle_ci]
print(f"90 % intervals, trained LT: d = {d_hi} over d = {d_lo} "
      + ", ".join(f"[{a:.2f}, {b:.2f}]" for a, b in lt_d_ci) + "; over the subspace "
      "oracle, worst d (upper end) " + ", ".join(f"{v:.2f}" for v in lt_oracle_hi))
print(f"examples per label, d = {d_hi} over d = {d_lo}:")
print(f"  trained LT {np.round(lt_d_ratio, 2)}, constant step "
      f"{np.round(con_d_ratio, 2)}")
print(f"  W = I {np.round(wi_d_ratio, 2)}, plug-in LDA {np.round(lda_d_ratio, 2)} "
      "(lower bounds if never reached)")
print(f"  PCA + LDA {np.round(pca_d_ratio, 2)}")
print("over the subspace oracle, worst d per seed: trained LT "
      f"{np.round(lt_vs_oracle, 2)}, constant step {np.round(con_vs_oracle, 2)}, "
      f"PCA + LDA {np.round(pca_vs_oracle, 2)}")

# %% [markdown]
# **Task complexity.** The saved snapshots give, at d = 256, the examples per label the LT needs (over the
# oracle's) after each number of training tasks, and how much of W lies off the subspace
# (`‖R‖²/‖UUᵀWUUᵀ‖²` with `R = W − UUᵀWUUᵀ`, from `icl.offsubspace_residue`). The theory says that the gap to the
# oracle closes as the number of tasks grows; a constant step stops closing it once its noise floor is reached.

# %%
tasks_seen = {a: [t * sh_cfg["batch"] for t in ts]
              for a, ts in sh_cfg["snapshots"].items()}
task_ratio = {(a, s): [ratio_or_bound(need_sh[(a, t), d_hi, s],
                                      need_sh["subspace oracle", d_hi, s]) for t in ts]
              for a, ts in sh_cfg["snapshots"].items() for s in seeds}
task_resid = {(a, s): [icl.offsubspace_residue(snaps[a, d_hi, s, t],
                                               U_sh[d_hi, s])["ratio"] for t in ts]
              for a, ts in sh_cfg["snapshots"].items() for s in seeds}
rho_tasks = [float(np.nan_to_num(spearmanr(tasks_seen["decay"],
                                           task_ratio["decay", s]).statistic))
             for s in seeds]
for a in sh_cfg["snapshots"]:
    print(f"{a} step, tasks seen {tasks_seen[a]}:")
    print("  LT ÷ oracle examples per label (mean of seeds) "
          f"{np.round(np.mean([task_ratio[a, s] for s in seeds], 0), 2)}")
    print("  off-subspace residue |R|^2/|S|^2 (mean of seeds) "
          f"{np.round(np.mean([task_resid[a, s] for s in seeds], 0), 3)}")
print("Spearman(tasks seen, LT ÷ oracle), decaying step, per seed: "
      f"{np.round(rho_tasks, 2)}")

fig, ax = plt.subplots(1, 2, figsize=(11, 3.6))
for j, (a, mk) in enumerate((("decay", "-o"), ("constant", "s"))):
    for i, s in enumerate(seeds):
        lab = f"{a} step" if i == 0 else None
        ax[0].plot(tasks_seen[a], task_ratio[a, s], mk, color=f"C{j}", label=lab)
        ax[1].plot(tasks_seen[a], task_resid[a, s], mk, color=f"C{j}", label=lab)
ax[0].axhline(1.5, color="k", lw=0.6, ls="--")
ax[0].set(xscale="log", xlabel="training tasks seen",
          ylabel="examples per label ÷ oracle",
          title=f"d = {d_hi}: examples needed (one line per seed)")
ax[1].set(xscale="log", yscale="log", xlabel="training tasks seen",
          ylabel="‖R‖² / ‖UUᵀWUUᵀ‖²", title=f"d = {d_hi}: weight off the subspace")
ax[0].legend()
plt.show()

# %% [markdown]
# What is the part of W off the subspace? Two readings: a **systematic** part (say `c (I − UUᵀ)`, an
# identity-like leak that training converges to) or **noise** (SGD's gradient noise, accumulated entry by entry).
# Noise of a fixed size per entry makes `‖R‖²/‖UUᵀWUUᵀ‖²` grow like the number of off-subspace entries `d² − k²`
# (slope 1 on a log-log plot against `d² − k²`), gives the symmetric part of `R` on the complement eigenvalues of
# mean ≈ 0, and puts half of that block's norm in its antisymmetric part; a systematic `c (I − UUᵀ)` grows like
# `d − k` (slope ½), has eigenvalue mean `c` with no spread, and is symmetric. Both step sizes, at the end of
# training:

# %%
res = {(arm, dd, s): icl.offsubspace_residue(W[dd, s], U_sh[dd, s])
       for arm, W in (("constant", W_con), ("decay", W_sh))
       for dd in dims for s in seeds}
res_slope = {}
for arm in ("constant", "decay"):
    for dd in dims:
        r_ = {f: np.mean([res[arm, dd, s][f] for s in seeds])
              for f in res[arm, dd, seeds[0]]}
        print(f"{arm:8s} d={dd:3d}: |R|^2/|S|^2 {r_['ratio']:.4f}, per off-subspace "
              f"entry {r_['per_entry']:.2e}; complement eigenvalues mean "
              f"{r_['eig_mean']:+.4f}, sd {r_['eig_sd']:.4f}; antisymmetric share "
              f"{r_['antisym_share']:.3f}")
    res_slope[arm] = [float(np.polyfit(
        np.log([dd * dd - k_sub**2 for dd in dims]),
        np.log([res[arm, dd, s]["ratio"] for dd in dims]), 1)[0]) for s in seeds]
    print(f"  log-log slope against d^2 - k^2, per seed: {np.round(res_slope[arm], 3)}")
res_mean_over_sd = max(abs(v["eig_mean"]) / v["eig_sd"] for v in res.values())
noise_like = bool(all(abs(x - 1) < abs(x - 0.5) for x in res_slope["constant"])
                  and res_mean_over_sd < 0.5)
print(f"largest |eigenvalue mean| / sd over all models: {res_mean_over_sd:.3f}; the "
      "constant step's residue behaves like "
      + ("unstructured per-entry noise" if noise_like else "something other than "
         "i.i.d. noise: see the numbers above"))

# %% tags=["remove-input"]
_r = lambda a, t: np.mean([task_ratio[a, s][sh_cfg["snapshots"][a].index(t)]  # noqa: E731
                           for s in seeds])
_c800 = 800 if 800 in sh_cfg["snapshots"]["constant"] else T_con
_falls = all(x < 0 for x in rho_tasks)
_res_d = [res["decay", d_hi, s]["ratio"] for s in seeds]
_res_c = [res["constant", d_hi, s]["ratio"] for s in seeds]
_smaller = all(a_ < b_ for a_, b_ in zip(_res_d, _res_c))
_dec_noise = all(abs(x - 1) < abs(x - 0.5) for x in res_slope["decay"])
display(Markdown(
    f"Read from the run: with the decaying step, `cos(W, UUᵀ)` at d = {d_hi} is {cos_UU[d_hi]:.3f} (mean of "
    f"seeds) against {cos_UU_con[d_hi]:.3f} with the constant step on the same tasks. At d = {d_hi} the trained "
    f"LT needs {_r('decay', T_dec):.2f}× the oracle's examples per label after {tasks_seen['decay'][-1]:,} "
    f"training tasks; the constant step needed {_r('constant', _c800):.2f}× after "
    f"{_c800 * sh_cfg['batch']:,} tasks (the first version's budget) and {_r('constant', T_con):.2f}× after "
    f"{T_con * sh_cfg['batch']:,}. "
    + ("The ratio falls as the decaying-step run goes on at every seed (more tasks, each seen once, at a "
       "smaller step): at this budget the gap is not a fixed cost of the linear transformer. " if _falls else
       "The ratio does not fall with the number of tasks at every seed (Spearman per seed "
       f"{', '.join(f'{x:.2f}' for x in rho_tasks)}). ")
    + f"What remains off the subspace at d = {d_hi} is "
    + ("still noise-like" if _dec_noise else "not simply noise-like")
    + " (log-log slope against `d² − k²` "
    + ", ".join(f"{x:.2f}" for x in res_slope["decay"]) + " per seed, against "
    + ", ".join(f"{x:.2f}" for x in res_slope["constant"]) + " with the constant step), and `‖R‖²/‖S‖²` is "
    + ", ".join(f"{x:.3f}" for x in _res_d) + " against " + ", ".join(f"{x:.3f}" for x in _res_c)
    + (": the decaying step shrinks the residue, it does not remove it at our budget. " if _smaller else
       ": the decaying step does not shrink the residue at every seed. ")
    + "The PCA + LDA line needs "
    + ", ".join(f"{v:.2f}" for v in pca_vs_oracle) + "× the oracle's examples (worst d, per seed) against the "
    "trained LT's " + ", ".join(f"{v:.2f}" for v in lt_vs_oracle) + "×."
))

# %% [markdown]
# **Does a softmax transformer meta-learn `U` too?** We train the softmax transformer of section 2 (same size,
# optimiser and number of steps) on tasks in one shared k-dimensional subspace `U` of R^d at d = 32
# (`make_models.py`, checkpoint `softmax_tf_shared`; `U` per seed, drawn as for the LTs; quick mode trains tiny
# ones live). A softmax transformer has no single `W`; what corresponds to it is the bilinear form its first
# attention layer applies to the features of two tokens. The feature part of a token reaches the first layer's
# queries and keys through the input map, the LayerNorm (centring and gain; the division by the token's scale
# changes no direction) and `W_Q`, `W_K`; `icl.qk_subspace_alignment` stacks the two resulting d-column maps and
# asks which feature directions they read most strongly: the principal cosines between their top-k right
# singular vectors and `U`, and the share of their squared norm on `U` (k/d for a map with no preferred
# direction). Unlike the LT, which starts from `W = 0`, the transformer starts from a random map that reads every
# direction about equally, so the measurement at initialisation (same seed) is the reference for what training
# did; the practitioner's baseline is again PCA of one training batch's features. Whether the model solves its
# tasks is checked on fresh prompts of its own task distribution against the Bayes rule.

# %%
tsh_cfg = icl.checkpoint_config("softmax_tf_shared")
d_tsh, k_tsh = tsh_cfg["d"], tsh_cfg["k"]
sigma_tsh = icl.power_spectrum(k_tsh, 0.0)
U_tsh = {s: icl.random_orthonormal(
    d_tsh, k_tsh, repro.rng(s, tsh_cfg["subspace_stream"], d_tsh)) for s in seeds}


def tsh_stream(s, batch):
    """Training prompts of the shared-subspace softmax TF of seed s."""
    return icl.task_stream(s, tsh_cfg["train_stream"], batch, N, d_tsh, C, sigma_tsh,
                           R2, U=U_tsh[s])


if quick:
    tfs_sh, tf_sh_plateau = tiny_tfs(lambda s: tsh_stream(s, 32), d_tsh,
                                     "tiny softmax TF, shared U")
    tsh_arch = dict(d_model=32, n_layer=1, n_head=2)
else:
    tfs_sh, tf_sh_plateau, ck_tsh = load_tfs("softmax_tf_shared", tsh_cfg, d_tsh)
    tsh_arch = {k_: tsh_cfg[k_] for k_ in ("d_model", "n_layer", "n_head")}
    U_tsh_err = max(float(np.abs(ck_tsh.tensors[f"U/{s}"].double().numpy()
                                 - U_tsh[s]).max()) for s in seeds)
    checkpoints.plot_history(
        ck_tsh.manifest, title="softmax transformers, shared subspace: training loss")
    plt.show()
tsh_init, tsh_fin, tsh_pca, tsh_skill, tsh_acc = {}, {}, [], [], {}
with torch.no_grad():
    for s in seeds:
        with repro.seeded(s):  # the initial weights, as the training script drew them
            tsh_init[s] = icl.qk_subspace_alignment(
                icl.SoftmaxICL(d_tsh, C, **tsh_arch), U_tsh[s])
        tsh_fin[s] = icl.qk_subspace_alignment(tfs_sh[s], U_tsh[s])
        b0 = tsh_stream(s, tsh_cfg["batch"])(0)  # one training batch
        P_ = icl.pca_subspace(torch.cat([b0["X"].reshape(-1, d_tsh), b0["xq"]]), k_tsh)
        tsh_pca.append(float(np.linalg.svd(P_.T @ U_tsh[s], compute_uv=False).min()))
        p_ = icl.sample_prompts(n_tf, N, d_tsh, C, sigma_tsh, R2, repro.rng(s, 19),
                                U=U_tsh[s])
        X_, Y_, xq_ = p_["X"], p_["Y"], p_["xq"]
        a_ = {m: float((sc.argmax(-1) == p_["yq"]).float().mean()) for m, sc in (
            ("softmax TF", tfs_sh[s](X_, Y_, xq_)),
            ("plug-in LDA", icl.lda_scores(X_, Y_, xq_, C)),
            ("subspace oracle", icl.subspace_oracle_scores(X_, Y_, xq_, C, U_tsh[s])),
            ("Bayes", icl.bayes_scores(p_["M"], xq_)))}
        tsh_acc[s] = a_
        tsh_skill.append((a_["softmax TF"] - 1 / C) / (a_["Bayes"] - 1 / C))
        print(f"seed {s}: min principal cosine with U "
              f"{tsh_init[s]['cosines'].min():.3f} (init) -> "
              f"{tsh_fin[s]['cosines'].min():.3f}; share on U "
              f"{tsh_init[s]['energy']:.3f} -> {tsh_fin[s]['energy']:.3f} (k/d = "
              f"{k_tsh / d_tsh:.3f}); PCA {tsh_pca[-1]:.3f}; accuracy "
              + ", ".join(f"{m} {v:.3f}" for m, v in a_.items()))
tsh_cos = [float(tsh_fin[s]["cosines"].min()) for s in seeds]

# %% tags=["remove-input"]
display(Markdown(
    "Read from the run: after training, the first layer's query and key maps read `U` with a smallest "
    "principal cosine of " + ", ".join(f"{x:.3f}" for x in tsh_cos) + " per seed (at initialisation "
    + ", ".join(f"{tsh_init[s]['cosines'].min():.3f}" for s in seeds) + "), and "
    + ", ".join(f"{tsh_fin[s]['energy']:.2f}" for s in seeds) + f" of their squared norm lies on `U` (k/d = "
    f"{k_tsh / d_tsh:.3f}; at initialisation " + ", ".join(f"{tsh_init[s]['energy']:.2f}" for s in seeds)
    + "). The softmax transformer reaches " + ", ".join(f"{tsh_acc[s]['softmax TF']:.3f}" for s in seeds)
    + " accuracy on fresh tasks of its distribution, against the subspace oracle's "
    + ", ".join(f"{tsh_acc[s]['subspace oracle']:.3f}" for s in seeds) + " and plug-in LDA's "
    + ", ".join(f"{tsh_acc[s]['plug-in LDA']:.3f}" for s in seeds) + "."
))

# %% [markdown]
# ## 7. Per-label sample complexity across the number of classes
#
# Back to isotropic tasks with a fresh subspace each (nothing to meta-learn), at a smaller R² (`R2_small`) so
# that even C = 3 needs more than one example per label. For C ∈ `class_grid` we sweep the examples per label,
# and read off how many each learner needs to reach 90 % of the Bayes accuracy for that C. Near-optimal
# per-label complexity means: the trained LT needs about as many examples per label as plug-in LDA, the
# learner that uses the prompt as well as a context-only learner can, at every C.

# %%
need_C = {}
for s in tqdm(seeds, desc="per-label sweep"):
    for C_ in class_grid:
        cv = {m: [] for m in ("trained LT", "plug-in LDA", "Bayes")}
        for n_ in per_label_grid:
            e = evaluate(
                s, 0.0, n=n_curve, C_=C_, per=n_, R2_=R2_small, stream=5, tf=False
            )
            for m in cv:
                cv[m].append(float(e[m].mean()))
        target = 0.9 * float(np.mean(cv["Bayes"]))
        for m in ("trained LT", "plug-in LDA"):
            need_C[m, C_, s] = icl.examples_to_reach(per_label_grid, cv[m], target)
        need_C["curves", C_, s] = cv
for C_ in class_grid:
    lt_n = [need_C["trained LT", C_, s] for s in seeds]
    lda_n = [need_C["plug-in LDA", C_, s] for s in seeds]
    print(f"C={C_}: examples per label for 90 % of Bayes (per seed):")
    print(f"  LT {np.round(lt_n, 2)}, plug-in LDA {np.round(lda_n, 2)}")
lt_vs_lda = [
    max(
        ratio_or_bound(need_C["trained LT", C_, s], need_C["plug-in LDA", C_, s])
        for C_ in class_grid
    )
    for s in seeds
]
print("LT over plug-in LDA, worst C per seed:", np.round(lt_vs_lda, 2))

fig, ax = plt.subplots(figsize=(6.4, 3.6))
for C_ in class_grid:
    cv = need_C["curves", C_, seeds[0]]
    (ln,) = ax.plot(per_label_grid, cv["trained LT"], "-o", label=f"LT, C = {C_}")
    ax.plot(
        per_label_grid,
        cv["plug-in LDA"],
        ":^",
        color=ln.get_color(),
        label="plug-in LDA",
    )
    ax.axhline(0.9 * np.mean(cv["Bayes"]), color=ln.get_color(), lw=0.6)
ax.set(xscale="log", xlabel="examples per label", ylabel="accuracy")
ax.set_title(f"isotropic tasks, R² = {R2_small}, seed {seeds[0]}")
ax.legend(fontsize=7, ncol=2)
plt.show()

# %% [markdown]
# **The R⁻⁴ scaling.** The theory's per-label complexity `Õ(k/R⁴)` (d in place of k for a learner that does not
# know the subspace) is a statement about the regime where the noise of the estimated class means dominates. For
# `W = I` (the isotropic LT) the score of class c is `μ_cᵀ x_q` plus the mean estimate's noise, of variance about
# `d/n` with n examples per label; the effective signal-to-noise ratio is about `R / √(1 + 2d/(nR²))`. To reach a
# **fixed** accuracy a* (fixed signal-to-noise ratio ρ) it needs `n* ≈ 2dρ² / (R²(R² − ρ²))`: `n* ∝ d/R⁴` once
# `R² ≫ ρ²`, with a local exponent in R of `−2 − 2R²/(R² − ρ²)`, below −4 at finite R. (A target relative to the
# Bayes accuracy, as in the claims above, moves with R and has no R⁻⁴ law.) So the test, fixed before running:
# isotropic tasks at d = `d_r4`, C = 5, R² on a √2-spaced grid `R2_r4`, the examples per label `W = I` and plug-in
# LDA need to reach accuracy `acc_r4` (interpolated on a √2-spaced grid, class-sum prompts), and the exponent of
# a least-squares fit of log n* on log R, per seed. The claim holds if the exponent lies within 1 of −4; it
# rests on n* being measured inside the grid (reached, and not at its first point) at every R².

# %%
d_r4, acc_r4, R2_r4 = 512, 0.5, [4.0, 5.66, 8.0, 11.31, 16.0]
grid_r4 = [1, 2, 3, 4, 6, 8, 11, 16, 23, 32, 45, 64, 91, 128, 181, 256]
n_r4 = n_curve
if quick:
    d_r4, R2_r4, grid_r4, n_r4 = 128, [4.0, 8.0, 16.0], [1, 2, 4, 8, 16, 32, 64], 300
sigma_r4 = icl.power_spectrum(C - 1, 0.0)
need_r4, bayes_r4 = {}, {}
for s in tqdm(seeds, desc="R^-4 sweep"):
    for R2_ in R2_r4:
        cv = {"W = I": [], "plug-in LDA": [], "Bayes": []}
        for n_ in grid_r4:
            q = icl.class_sum_prompts(n_r4, [n_] * C, d_r4, C, sigma_r4, R2_,
                                      repro.rng(s, 21, int(R2_ * 100), n_))
            S, n, xq = q["S"], q["n"], q["xq"]
            for m, v in (("W = I", icl.sum_scores(S, n, xq, torch.eye(d_r4))),
                         ("plug-in LDA", icl.lda_sum_scores(S, n, xq)),
                         ("Bayes", icl.bayes_scores(q["M"], xq))):
                cv[m].append(float((v.argmax(-1) == q["yq"]).float().mean()))
        bayes_r4[R2_, s] = float(np.mean(cv["Bayes"]))
        for m in ("W = I", "plug-in LDA"):
            need_r4[m, R2_, s] = icl.examples_to_reach(grid_r4, cv[m], acc_r4)
logR = 0.5 * np.log(R2_r4)


def fit_exponent(m, s):
    """Least-squares slope of log n* on log R (nan if n* is missing anywhere)."""
    y_ = [need_r4[m, R2_, s] for R2_ in R2_r4]
    if not all(np.isfinite(y_)):
        return float("nan")
    return float(np.polyfit(logR, np.log(y_), 1)[0])


slope_r4 = {m: [fit_exponent(m, s) for s in seeds] for m in ("W = I", "plug-in LDA")}
r4_inside = [float(all(grid_r4[0] < need_r4["W = I", R2_, s] < grid_r4[-1]
                       for R2_ in R2_r4)) for s in seeds]
for m in ("W = I", "plug-in LDA"):
    print(f"{m:12s} n* per R² {R2_r4} (per seed):",
          [np.round([need_r4[m, R2_, s] for R2_ in R2_r4], 1).tolist() for s in seeds],
          "exponent in R:", np.round(slope_r4[m], 2))
print("Bayes accuracy per R² (mean of seeds):",
      np.round([np.mean([bayes_r4[R2_, s] for s in seeds]) for R2_ in R2_r4], 3))

# %% tags=["remove-input"]
display(Markdown(
    "Read from the run: the fitted exponent of n* in R for `W = I` is "
    + ", ".join(f"{x:.2f}" for x in slope_r4["W = I"]) + " per seed (plug-in LDA "
    + ", ".join(f"{x:.2f}" for x in slope_r4["plug-in LDA"]) + "), against −4 in the limit `R² ≫ ρ²` and a "
    "steeper local exponent at finite R."
))

# %% [markdown]
# ## 8. Real datasets
#
# Three datasets that ship with scikit-learn, standardised per feature: iris (C = 3), wine (C = 3) and digits
# (C = 10, reduced to 16 principal components). First the stable rank of their class-mean matrix, divided by its
# maximum C − 1 so that they sit on one axis with our sweep. Then prompts made from them
# (`icl.dataset_prompts`: `per_label` examples of every class, a query, all turned by a fresh random rotation of
# R^16, zero-padding the features first), scored by the trained LT, `W = I` and plug-in LDA, and, for the two
# 3-class datasets, by the softmax transformer (trained with 5 label slots: the 3 labels use the first three,
# and we read the first three logits; digits, with 10 classes, does not fit its label slots). The real classes do
# not have unit isotropic noise, so these numbers show where each dataset sits, not a test of the theory.

# %%
real, real_acc = {}, {}
for name, loader in [
    ("iris", datasets.load_iris),
    ("wine", datasets.load_wine),
    ("digits", datasets.load_digits),
]:
    Xr, yr = loader(return_X_y=True)
    Xr = (Xr - Xr.mean(0)) / (Xr.std(0) + 1e-9)
    if Xr.shape[1] > d:
        Xr = PCA(d, random_state=0).fit_transform(Xr)
    means = np.stack([Xr[yr == c].mean(0) for c in np.unique(yr)], 1)
    means -= means.mean(1, keepdims=True)
    Cr = len(np.unique(yr))
    real[name] = (icl.stable_rank(means), Cr - 1)
    accs = {m: [] for m in ("trained LT", "W = I", "plug-in LDA")}
    if Cr <= C:
        accs["softmax TF"] = []
    for s in seeds:
        p_ = icl.dataset_prompts(Xr, yr, 500, per_label, repro.rng(s, 13, Cr), d=d)
        with torch.no_grad():
            sc = {
                "trained LT": lts[s](p_["X"], p_["Y"], p_["xq"], Cr),
                "W = I": icl.reduced_scores(
                    p_["X"], p_["Y"], p_["xq"], torch.eye(d), Cr
                ),
                "plug-in LDA": icl.lda_scores(p_["X"], p_["Y"], p_["xq"], Cr),
            }
            if Cr <= C:
                sc["softmax TF"] = tfs[s](p_["X"], p_["Y"], p_["xq"])[:, :Cr]
        for m, v in sc.items():
            accs[m].append(float((v.argmax(-1) == p_["yq"]).float().mean()))
    real_acc[name] = {m: float(np.mean(v)) for m, v in accs.items()}
    print(
        f"{name:6s}: stable rank {real[name][0]:.2f} of at most {real[name][1]}; "
        + ", ".join(f"{m} {v:.3f}" for m, v in real_acc[name].items())
    )

# %%
fig, ax = plt.subplots(figsize=(6.4, 3.6))
x_syn = np.array(srank_target) / r
ax.plot(x_syn, acc_bal["trained LT"].mean(0), "-o", label="synthetic sweep: LT")
ax.plot(
    x_syn, acc_bal["plug-in LDA"].mean(0), ":^", label="synthetic sweep: plug-in LDA"
)
for name, (sr, mx) in real.items():
    ax.scatter([sr / mx], [real_acc[name]["trained LT"]], color="C0", zorder=3)
    ax.scatter(
        [sr / mx], [real_acc[name]["plug-in LDA"]], color="C1", marker="^", zorder=3
    )
    ax.annotate(
        name,
        (sr / mx, real_acc[name]["trained LT"]),
        xytext=(4, -12),
        textcoords="offset points",
    )
ax.set(xlabel="stable rank / (C − 1)", ylabel="accuracy", ylim=(0, 1.02))
ax.set_title("synthetic sweep (C = 5) and real-data prompts (dots)")
ax.legend(fontsize=8)
plt.show()

# %% [markdown]
# ## 9. Interaction
#
# The slider walks through the stable-rank sweep: per-class accuracy of the trained linear transformer (first
# seed) with a balanced and with the imbalanced context (class 0 is the majority).


# %%
def draw(fig, alpha):
    ax = fig.add_subplot(111)
    ax.bar(
        np.arange(C) - 0.2,
        bal[seed][alpha]["trained LT"],
        width=0.4,
        label="balanced context",
    )
    ax.bar(
        np.arange(C) + 0.2,
        imb[seed][alpha]["trained LT"],
        width=0.4,
        label=f"class 0 share {majority}",
    )
    sr = float((icl.power_spectrum(r, alpha) ** 2).sum())
    ax.set_title(f"stable rank {sr:.2f}")
    ax.set(xlabel="query class", ylabel="accuracy", ylim=(0, 1), xticks=range(C))
    ax.legend(loc="lower right")


plotting.static_slider(alphas, draw, label="spectral decay α", fmt="{:.2f}")

# %% [markdown]
# Live: pick a decay α and a majority share and see the per-class accuracy of the trained linear transformer.


# %%
def play(alpha: float = 1.0, share: float = 0.6):
    pi_ = icl.label_priors(C, max(share, 1.0 / C))
    acc = evaluate(seed, alpha, pi=pi_, n=600, stream=6)["trained LT"]
    sr = float((icl.power_spectrum(r, alpha) ** 2).sum())
    print(f"stable rank {sr:.2f}; per-class accuracy {np.round(acc, 3)}")


plotting.live_controls(play, alpha=(0.0, 4.0, 0.25), share=(0.2, 0.9, 0.05))

# %% [markdown]
# ## 10. The claims record
#
# The record computes each verdict (held / mixed / not held over the seeds) from the measured numbers and a bar
# fixed before running. Trends: Spearman ρ ≥ 0.9 over the stable-rank sweep (≥ 0.7 for the margin test, <!-- paper -->
# which ranks noisy per-class accuracies). Imbalance: a majority-minority gap of at least 5 points at the
# isotropic end (for both transformers), larger at the lowest stable rank than at the highest. Shared subspace:
# cos(W, UUᵀ) ≥ 0.9 at every d; examples per label at the largest d at most 1.5× those at d = 16, and at most <!-- paper -->
# 1.5× the subspace oracle's, both judged by the upper end of a 90 % bootstrap interval over the test prompts; <!-- paper -->
# task complexity: Spearman ρ between the tasks seen and the LT ÷ oracle ratio at most −0.8 (the ratio falls). <!-- paper -->
# Prior correction: a minority-accuracy gain over `W = I` above 0 (for the softmax transformer: over the <!-- paper -->
# balanced-trained one). Softmax shared subspace: smallest principal cosine ≥ 0.9 between the first layer's <!-- paper -->
# query/key feature directions and `U`. R⁻⁴ scaling: the fitted exponent within 1 of −4.
# Per-label complexity: at most 1.5× plug-in LDA's at every C. Each claim records as <!-- paper -->
# its baseline the same number for the strongest reference we have for that question: the Bayes rule where the
# question is "is this the data or the model?", PCA + LDA (a practitioner's meta-learner) for the shared
# subspace, the best other predictor for the margins.
#
# **Conditions.** Each claim about a trained model names the conditions it rests on: the model's training loss is
# flat at the end (`train.plateau` ≤ 0.05, the book-wide rule; for the checkpoints, from the curves in their <!-- paper -->
# manifests), and for the softmax transformer also that it solves its own training tasks (at least half of the
# Bayes rule's accuracy above chance on fresh isotropic tasks). The stable-rank trend claims also rest on the data
# showing the trend (`data_shows_trend`, `data_gap_shrinks`: the Bayes rule's own ρ ≥ 0.9, its own gap <!-- paper -->
# shrinking): what they test is that the model *follows* a trend of the data. At a seed where a condition fails
# the claim is left out; unless most seeds are left (2 of 3) it is *inconclusive*.
#
# **How to read the trend claims.** Three of them the Bayes rule shows too
# (`accuracy_increases_with_stable_rank`, `imbalance_gap_shrinks`, `softmax_transformer_agrees`; each records the
# Bayes rule's number as its baseline and names the condition that the data shows the trend): where they hold
# they confirm the paper's trends at our scale, but they are properties of the spectral data, not evidence about
# in-context learning. The ICL-specific questions are whether the LT's shortfall against plug-in LDA grows at low
# stable rank, how its majority gap compares with the Bayes rule's (both recorded in `majority_easier`), whether
# training learns a prior correction (`learned_prior_correction`), and the shared-subspace results. On isotropic
# tasks the LT trained on balanced prompts *is* `W = I` (the check `trained_weights_structure`), so the claims of
# sections 3–5 and 7 test that closed-form rule; training matters in the prior correction and in section 6.
#
# **Known limits.** (i) The per-label references are plug-in rules (LDA, the subspace oracle, PCA + LDA); the
# Bayes-optimal context-only learner for this task prior (centers forming a randomly rotated simplex of known
# norm) is not computed, and on isotropic tasks `W = I` itself is the plug-in rule that knows the center norms are
# equal, which is why it can need fewer examples than LDA. Multinomial logistic regression on the context is not
# run; for Gaussian classes with identity covariance plug-in LDA is the better-specified learner. (ii) The PCA
# baseline sees one training batch, far less than the LT; with more it would only get closer to the oracle.
# (iii) One decay schedule (`lr / (1 + t/τ)`, τ fixed before training) and one growth of the number of tasks are
# run; a growing batch or weight decay, the other remedies for SGD noise, are not. The number of training steps of
# the decaying run was doubled once after seed 0's first run (which had stopped at the constant run's number of
# steps), to give the task-complexity curve one more point; what that doubling did to `learns_shared_subspace` is
# read from the saved snapshot just below. Each training task is seen once (online SGD), so "tasks seen" and
# "steps taken at a falling step size" are one axis: `task_complexity_curve` cannot separate more tasks from more
# optimisation. (iv) The R⁻⁴ scaling is tested for `W = I` in d dimensions (the isotropic LT), not for the
# meta-trained LT's k/R⁴, and with a fixed accuracy target. `softmax_majority_easier` and
# `softmax_transformer_agrees` are about a model trained on balanced prompts only, for which an imbalanced context
# is outside its training distribution; `softmax_learned_prior_correction` trains one on imbalanced prompts.
# `softmax_learns_shared_subspace` reads only the first layer's direct feature path (the second layer's queries
# and keys see features only after the first block has mixed them), at one d, and says which directions the maps
# read, not that the model's sample complexity is independent of d.
# The LT of section 7 is `W = I` up to SGD noise, so `per_label_vs_lda` compares two closed-form rules, not a
# learned one against LDA.

# %% tags=["remove-input"]
# what doubling the decaying run's steps did to learns_shared_subspace: the snapshot
# saved at the constant run's budget, where the first decaying run had stopped
bar_cos = 0.9  # the claim's bar (unchanged since it was set)
T_half = T_con if T_con in sh_cfg["snapshots"]["decay"] and T_con < T_dec else None
cos_half = [min(icl.matrix_cosine(snaps["decay", dd, s, T_half], UUt(dd, s))
                for dd in dims) for s in seeds] if T_half else []
cos_traj = [[min(icl.matrix_cosine(snaps["decay", dd, s, t], UUt(dd, s)) for dd in dims)
             for t in sh_cfg["snapshots"]["decay"]] for s in seeds]
cos_rising = all(bool(np.all(np.diff(tr) > 0)) for tr in cos_traj)
if T_half:
    _below = sum(c_ < bar_cos for c_ in cos_half)
    display(Markdown(
        f"Read from the run: after {T_half:,} decaying steps ({T_half * sh_cfg['batch']:,} tasks) `cos(W, UUᵀ)` "
        "at the worst d was " + ", ".join(f"{c_:.4f}" for c_ in cos_half) + " per seed, against "
        + ", ".join(f"{c_:.4f}" for c_ in cos_W_UU) + f" after {T_dec:,}; "
        + (f"{_below} of {len(seeds)} seeds were below the bar of {bar_cos}, so the verdict of "
           "`learns_shared_subspace` rests on the doubled budget: it says where "
           + ("a still-rising curve" if cos_rising else "the curve")
           + " stands at the budget we chose, not that W has reached `UUᵀ`." if _below else
           f"every seed was already above the bar of {bar_cos}, so the doubling did not decide that verdict.")))

# %% tags=["hide-input"]
# checks (asserted) and the notes the claims carry: numbers beside each verdict, for the
# reader
rec.check("stable_rank_exact", srank_err, 1e-9, op="<=",
          note="generated vs prescribed stable rank, all α")
rec.check("reduction_matches_forward", red_err, 1e-6, op="<=",
          note="full LSA forward vs reduced form, float64")
rec.check("label_priors_exact", prior_err, 0.0, op="==",
          note="context label shares vs prescribed priors")
rec.check("softmax_prior_same_prompts", max(same_err), 0.0, op="==",
          note="balanced-trained softmax TF per-class accuracy, recomputed on the "
          "regenerated section-4 prompts vs section 4")
if not quick:
    rec.check("softmax_shared_subspace_matches", U_tsh_err, 1e-6, op="<=",
              note="stored (float32) vs regenerated U, shared-subspace softmax TFs")
rec.check("trained_weights_structure", min(cos_I), 0.9, op=">=",
          note="cosine between the trained W (isotropic tasks) and the identity, "
          "worst seed")
r3 = lambda v: np.round(v, 3).tolist()
r2_ = lambda v: np.round(v, 2).tolist()
shrink = gap["trained LT"][:, -1] - gap["trained LT"][:, 0]
need_per_C = {C_: round(float(np.mean([need_C["trained LT", C_, s] for s in seeds])), 2)
              for C_ in class_grid}
notes = {
    "accuracy_increases_with_stable_rank": "baseline: the Bayes rule's own ρ; it falls "
    "with stable rank too (condition data_shows_trend), so this trend is a property "
    "of the data that the LT follows; see isotropy_helps_lt_beyond_the_data for the "
    "transformer's part",
    "isotropy_helps_lt_beyond_the_data": "LT − LDA accuracy from high to low stable "
    f"rank (mean of seeds): {r3(gap_lda.mean(0))}",
    "majority_easier": "baseline: the Bayes rule told the prior",
    "imbalance_gap_shrinks": "LT gaps from high to low stable rank (mean of seeds) "
    f"{r3(gap['trained LT'].mean(0))}; baseline: the Bayes rule's own difference",
    "margin_predicts_accuracy": "baseline: the strongest other predictor of the LT's "
    f"per-class accuracy ({best_alt}); others (mean of seeds): "
    + ", ".join(f"{k_} {np.mean(v):.3f}" for k_, v in alt_rho.items())
    + f"; minority classes only: margin {r3(minority_rho)}, Bayes accuracy "
    f"{r3(minority_rho_bayes_acc)}; the margins against the Bayes rule's accuracy "
    f"{r3(margin_rho_bayes)}",
    "learns_shared_subspace": f"baseline: PCA of the pooled features of {n_pca} tasks "
    f"(one training batch; the LT saw {T_dec} batches), cos(P_PCA, UUᵀ). "
    "cos(W, UUᵀ) at d = "
    + ", ".join(f"{dd}: {cos_UU[dd]:.3f}" for dd in dims)
    + " (mean of seeds; decaying step); with the constant step on the same tasks "
    + ", ".join(f"{dd}: {cos_UU_con[dd]:.3f}" for dd in dims)
    + f" (worst d per seed {r3(cos_con_UU)}). "
    "The eigenspace alone (min principal cosine of W's "
    f"top-{k_sub} eigenvectors with U, worst d) is {r3(min_cos)} after training and "
    f"already {r3(min_cos_5)} after 5 SGD steps (the expected gradient at W = 0 is "
    "∝ UUᵀ), so it is not what the claim tests; cos(W, UUᵀ) also counts what W holds "
    "off the subspace"
    + (f". After {T_half} decaying steps (the first run's budget, doubled after seed 0 "
       f"was seen) cos(W, UUᵀ), worst d: {np.round(cos_half, 4).tolist()}"
       + ("; it rises at every snapshot, so the verdict depends on the budget"
          if cos_rising else "") if T_half else ""),
    "complexity_independent_of_d": f"point estimates {r2_(lt_d_ratio)}, 90 % intervals "
    f"(bootstrap over prompts, {n_boot} rounds) "
    + ", ".join(f"[{a:.2f}, {b:.2f}]" for a, b in lt_d_ci) + "; "
    f"baseline: PCA + LDA (subspace from {n_pca} tasks' features, then plug-in "
    "LDA); context-only learners, lower bounds where they never reach the bar: "
    f"W = I {r2_(wi_d_ratio)}, plug-in LDA {r2_(lda_d_ratio)}; the constant-step LT "
    f"{r2_(con_d_ratio)}",
    "per_label_vs_subspace_oracle": f"point estimates {r2_(lt_vs_oracle)}; baseline: "
    "PCA + LDA ÷ the oracle (point estimates); the constant-step LT "
    f"{r2_(con_vs_oracle)}",
    "task_complexity_curve": "each task is seen once (online SGD, decaying step), so "
    "more tasks and more optimisation are one axis here; "
    f"d = {d_hi}; tasks seen {tasks_seen['decay']}; LT ÷ "
    "oracle examples per label (mean of seeds) "
    f"{r2_(np.mean([task_ratio['decay', s] for s in seeds], 0))}; off-subspace "
    "residue ‖R‖²/‖S‖² "
    f"{r3(np.mean([task_resid['decay', s] for s in seeds], 0))}; constant step at "
    f"{tasks_seen['constant']} tasks: "
    f"{r2_(np.mean([task_ratio['constant', s] for s in seeds], 0))}, residue "
    f"{r3(np.mean([task_resid['constant', s] for s in seeds], 0))}; residue log-log "
    f"slope vs d² − k² (constant step) {r2_(res_slope['constant'])}",
    "learned_prior_correction": f"b / mean diag(W) per seed {r3(prior_b)} (negative: "
    "the majority's score is cut more); baseline: plug-in LDA with a uniform prior, "
    "its minority gain over W = I",
    "per_label_vs_lda": f"R² = {R2_small}; examples per label for 90 % of Bayes, LT "
    f"per C: {need_per_C}; the LT here is W = I up to SGD noise (cos(W, I) ≥ "
    f"{min(cos_I):.3f}), so this compares two closed-form rules",
    "softmax_learned_prior_correction": "same softmax TF architecture and optimiser, "
    "trained on contexts with a random majority class (share "
    f"{tfi_cfg['majority']}) and balanced queries; scored on section 4's α = 0 prompts "
    f"(first {n_tf}); minority accuracy imbalance-trained "
    f"{r3([a[1:].mean() for a in tf_imb_acc])} vs balanced-trained "
    f"{r3([a[1:].mean() for a in tf_bal_acc])}, majority "
    f"{r3([a[0] for a in tf_imb_acc])} vs {r3([a[0] for a in tf_bal_acc])}; on "
    f"balanced prompts {r3([a for a, _ in tf_on_bal])} vs "
    f"{r3([b for _, b in tf_on_bal])}; "
    f"trained for {tfi_cfg['steps']} steps against the balanced one's "
    f"{tf_cfg['steps']}; baseline: plug-in LDA's minority gain from the uniform prior "
    "over the context's",
    "softmax_learns_shared_subspace": "the same measure at initialisation (same seed) "
    f"{r3([tsh_init[s]['cosines'].min() for s in seeds])}; share of the maps' squared "
    f"norm on U {r3([tsh_fin[s]['energy'] for s in seeds])} (init "
    f"{r3([tsh_init[s]['energy'] for s in seeds])}, k/d = {k_tsh / d_tsh:.3f}); "
    "baseline: PCA of one training batch's features, min principal cosine with U; "
    "accuracy on its own tasks (softmax TF, subspace oracle, plug-in LDA): "
    + "; ".join(f"{tsh_acc[s]['softmax TF']:.3f}, {tsh_acc[s]['subspace oracle']:.3f}, "
                f"{tsh_acc[s]['plug-in LDA']:.3f}" for s in seeds),
    "per_label_scales_as_R_minus_4": "fitted exponents per seed: W = I "
    f"{r2_(slope_r4['W = I'])}, plug-in LDA {r2_(slope_r4['plug-in LDA'])}; R² "
    f"{R2_r4}; n* for W = I (mean of seeds) "
    f"{r2_([np.mean([need_r4['W = I', R2_, s] for s in seeds]) for R2_ in R2_r4])}; "
    "the theory's local exponent at finite R is below −4 (n* ∝ 1/(R²(R² − ρ²))); "
    "baseline: plug-in LDA's |exponent + 4|",
    "softmax_transformer_agrees": "softmax TF accuracy (mean of seeds) "
    f"{r3(acc_bal['softmax TF'].mean(0))}, majority gap {r3(gap['softmax TF'][:, 0])}; "
    "no pretrained LLM offline",
    "softmax_majority_easier": "the softmax TF was trained on balanced prompts "
    "only, so an imbalanced context is outside its training distribution; "
    "baseline: the Bayes rule told the prior; the bar is "
    "majority_easier's 0.05 (a bar of 0, used before, is one the Bayes rule clears "
    "too)",
}

# %%
# Conditions (fixed before reading the claims): every trained model's loss is flat at
# the end (the book-wide rule, train.plateau <= 0.05), and the softmax transformer has
# learned the in-context task: on fresh isotropic tasks (its training distribution) it
# captures at least half of the Bayes rule's accuracy above chance.
tf_skill = [(acc_bal["softmax TF"][i, 0] - 1 / C) / (acc_bal["Bayes"][i, 0] - 1 / C)
            for i in range(len(seeds))]
rec.condition("lt_converged", lt_plateau, "<=", 0.05, unit="plateau (last fifth)",
              statement="the isotropic linear transformer's training loss is flat at "
              "the end")
rec.condition("tf_converged", tf_plateau, "<=", 0.05, unit="plateau (last fifth)",
              statement="the softmax transformer's training loss is flat at the end")
rec.condition("tf_learned_task", tf_skill, ">=", 0.5,
              unit="(acc − chance) ÷ (Bayes − chance), α = 0",
              statement="the softmax transformer solves its own training tasks: at "
              "least half of the Bayes rule's accuracy above chance")
rec.condition("shared_converged",
              [max(sh_plateau[dd, s] for dd in dims) for s in seeds], "<=", 0.05,
              unit="plateau (last fifth), worst d",
              statement="every shared-subspace linear transformer's training loss is "
              "flat at the end")
rec.condition("prior_lt_converged", prior_plateau, "<=", 0.05,
              unit="plateau (last fifth)", statement="the linear transformer with a "
              "constant feature (imbalanced prompts) has a flat training loss at the "
              "end")
# the data's own trend: where the Bayes rule shows it, a stable-rank claim says that
# the model follows a property of the data, not that in-context learning creates it
rec.condition("data_shows_trend", rho_bayes, ">=", 0.9,
              unit="Spearman ρ (stable rank, Bayes accuracy)",
              statement="the Bayes rule's accuracy rises with stable rank too")
rec.condition("data_gap_shrinks", gap["Bayes"][:, -1] - gap["Bayes"][:, 0], ">", 0.0,
              unit="Bayes gap(lowest srank) − gap(highest srank)",
              statement="the Bayes rule's majority gap shrinks with stable rank too")
rec.condition("tf_imb_converged", tf_imb_plateau, "<=", 0.05,
              unit="plateau (last fifth)", statement="the softmax transformer "
              "trained on imbalanced prompts has a flat training loss at the end")
rec.condition("tf_shared_converged", tf_sh_plateau, "<=", 0.05,
              unit="plateau (last fifth)", statement="the softmax transformer "
              "trained on shared-subspace tasks has a flat training loss at the end")
rec.condition("tf_shared_learned_task", tsh_skill, ">=", 0.5,
              unit="(acc − chance) ÷ (Bayes − chance), its own tasks",
              statement="the shared-subspace softmax transformer solves its own "
              "training tasks: at least half of the Bayes rule's accuracy above chance")
rec.condition("r4_inside_grid", r4_inside, "==", 1.0,
              unit="1 if n* is reached inside the grid at every R²",
              statement="the examples W = I needs for the fixed accuracy are measured "
              "inside the grid (reached, not at its first point) at every R²")
LT, TF, SH = (("lt_converged",), ("tf_converged", "tf_learned_task"),
              ("shared_converged",))

# %%
# id, statement, paper, measured (per seed), op, target, unit, baseline, conditions
CLAIMS = [
    ("accuracy_increases_with_stable_rank",
     "Isotropic class centers (high stable rank) improve ICL",
     "accuracy increases with stable rank", rho_lt, ">=", 0.9,
     "Spearman ρ (stable rank, LT accuracy)", rho_bayes, LT + ("data_shows_trend",)),
    ("isotropy_helps_lt_beyond_the_data",
     "The LT's shortfall against plug-in LDA grows as the stable rank falls",
     "stable rank improves ICL (margin ‖μ_y‖² − μ_cᵀμ_y, no bias terms)", rho_gap,
     ">=", 0.9, "Spearman ρ (stable rank, LT − LDA accuracy)", None, LT),
    ("majority_easier",
     "Under context imbalance, majority-class queries are easier than minority ones",
     "minority classes more error-prone", gap["trained LT"][:, 0], ">=", 0.05,
     "majority − minority accuracy (isotropic)", gap["Bayes"][:, 0], LT),
    ("imbalance_gap_shrinks", "Robustness to imbalance improves with stable rank",
     "gap smaller at high stable rank", shrink, ">", 0.0,
     "gap(lowest srank) − gap(highest srank)",
     gap["Bayes"][:, -1] - gap["Bayes"][:, 0], LT + ("data_gap_shrinks",)),
    ("margin_predicts_accuracy", "The predicted margin π_y‖μ_y‖² − π_c μ_cᵀμ_y ranks "
     "per-class accuracy", "majority classes easier, minority error-prone, via the "
     "margin", margin_rho, ">=", 0.7, "Spearman ρ over (task, class)",
     alt_rho[best_alt], LT),
]

# %%
# the shared-subspace, task-complexity, prior-correction and per-label claims
CLAIMS += [
    ("learns_shared_subspace", "Trained on tasks in a shared k-dim subspace, the LT's "
     "W aligns with UUᵀ", "W → UUᵀ (meta-learning)", cos_W_UU, ">=", bar_cos,
     "cos(W, UUᵀ) at the end of training (decaying step), worst d", cos_pca_UU, SH),
    ("complexity_independent_of_d",
     "After meta-training, the examples needed per label do not grow with d",
     "Õ(k/R⁴) examples, independent of d", lt_d_hi, "<=", 1.5,
     f"examples per label for 90 % of Bayes, d = {d_hi} ÷ d = {d_lo}, upper end of "
     "the 90 % interval", pca_d_ratio, SH),
    ("per_label_vs_subspace_oracle",
     "The meta-trained LT needs about as many examples per label as a learner told the "
     "subspace", "near-optimal per-label sample complexity", lt_oracle_hi, "<=", 1.5,
     "examples per label, LT ÷ subspace-oracle LDA, worst d, upper end of the 90 % "
     "interval", pca_vs_oracle, SH),
    ("task_complexity_curve", "The meta-trained LT's gap to the subspace oracle closes "
     "as it sees more training tasks", "near-optimal per-label complexity after enough "
     "training tasks (task complexity)", rho_tasks, "<=", -0.8,
     f"Spearman ρ (tasks seen, LT ÷ oracle examples per label at d = {d_hi}), "
     "decaying step", None, ()),
    ("learned_prior_correction", "Trained on imbalanced prompts, an LT with a constant "
     "feature learns a prior correction that raises minority-class accuracy over "
     "W = I", "minority classes more error-prone under imbalance", prior_gain, ">", 0.0,
     "minority accuracy, trained LT − W = I (isotropic, imbalanced context)",
     prior_gain_lda, ("prior_lt_converged",)),
    ("per_label_vs_lda", "On isotropic tasks the LT needs about as many examples per "
     "label as plug-in LDA, at every C",
     "near-optimal per-label sample complexity beyond binary", lt_vs_lda, "<=", 1.5,
     f"examples per label, LT ÷ plug-in LDA, worst C in {class_grid}", None, LT),
    ("softmax_transformer_agrees",
     "A softmax transformer trained from scratch shows the same stable-rank trend",
     "consistent with trained transformers and LLMs", rho_tf, ">=", 0.9,
     "Spearman ρ (stable rank, softmax TF accuracy)", rho_bayes,
     TF + ("data_shows_trend",)),
    ("softmax_majority_easier",
     "In the softmax transformer too, majority-class queries are easier than "
     "minority ones", "consistent with trained transformers and LLMs",
     gap["softmax TF"][:, 0], ">=", 0.05,
     "majority − minority accuracy (isotropic, softmax TF)", gap["Bayes"][:, 0], TF),
]
# %%
# the claims on the softmax transformers trained here for #72 and the R^-4 scaling
CLAIMS += [
    ("softmax_learned_prior_correction", "Trained on imbalanced prompts, a softmax "
     "transformer learns a prior correction: higher minority-class accuracy than the "
     "balanced-trained one on the same imbalanced prompts",
     "minority classes more error-prone under imbalance", tf_prior_gain, ">", 0.0,
     "minority accuracy, imbalance-trained − balanced-trained softmax TF (isotropic, "
     "imbalanced context)", tf_prior_gain_lda, TF + ("tf_imb_converged",)),
    ("softmax_learns_shared_subspace", "Trained on tasks in a shared k-dim subspace, a "
     "softmax transformer's first-layer query and key maps read mainly that subspace",
     "W → UUᵀ (meta-learning), for a softmax transformer", tsh_cos, ">=", 0.9,
     f"min principal cosine, top-{k_tsh} feature directions of [W_Q; W_K] (layer 1) "
     f"vs U, d = {d_tsh}", tsh_pca, ("tf_shared_converged", "tf_shared_learned_task")),
]
CLAIMS += [
    ("per_label_scales_as_R_minus_4", "At a fixed accuracy, in the regime where the "
     "class-mean noise dominates, W = I needs examples per label ∝ R⁻⁴",
     "Õ(k/R⁴) examples per label", [abs(b + 4) for b in slope_r4["W = I"]], "<=", 1.0,
     f"|fitted exponent of n* in R + 4|, d = {d_r4}, accuracy {acc_r4}",
     [abs(b + 4) for b in slope_r4["plug-in LDA"]], ("r4_inside_grid",)),
]
for cid, statement, paper, measured, op, target, unit, baseline, given in CLAIMS:
    rec.claim(cid, statement, paper=paper, measured=measured, op=op, target=target,
              unit=unit, baseline=baseline, note=notes[cid], given=given)
rec.save()
print(f"notebook time {time.time() - t_start:.0f} s")
