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
# generalisation; linear transformers learn the task with near-optimal **per-label** sample complexity; under
# label imbalance at test time, majority classes are easier and minority classes more error-prone, and higher
# stable rank makes the model more robust; trained transformers (and LLMs) follow the same trends. We generate
# tasks with a prescribed spectrum, train a linear transformer and a small softmax transformer, and measure each
# trend.
#
# | | paper | this notebook |
# |---|---|---|
# | data | spectral class-center generator, real datasets | the same generator (d = 16, C = 5, R² = 9); class means of iris, wine, digits (scikit-learn) |
# | models | linear transformers (theory), trained transformers, pretrained LLMs | a trained linear transformer (reduced form, d×d weights); a 2-layer softmax transformer trained from scratch; no LLM |
# | training | gradient-based, many random tasks | Adam on fresh random tasks, a few hundred to a thousand steps |
# | hardware | not stated | 2 CPU cores, ≤ 5 min |
#
# :::{note}
# **What is reconstructed.** Only the abstract was available to us. The data generator (`M = U diag(σ) Vᵀ` with
# `σ_i ∝ i^(−α)`, scaled to `‖M‖_F² = C R²`, Gaussian features), the linear-transformer parameterisation and its
# reduced form, and all experimental settings are **our reconstruction** from the abstract and prior work on
# in-context classification (Frei & Vardi 2024; Magen & Vardi 2025; Zhang, Frei & Bartlett 2024). No pretrained LLM
# can be run offline, so the "consistent with LLMs" part is replaced by a small softmax transformer trained here.
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
alphas = [
    0.0,
    0.25,
    0.5,
    1.0,
    2.0,
    4.0,
]
lt_steps, tf_steps, batch_size = 400, 1000, 128
n_eval = 3000  # test prompts per point
majority = 0.6  # context prior of class 0 in the imbalance test
per_label_grid = [1, 2, 4, 8, 16]
class_grid = [3, 5, 8]

# %% tags=["hide-input"]
import time

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F
from scipy.stats import spearmanr
from sklearn import datasets
from tqdm.auto import tqdm

from helpers import claims, plotting, repro, train
from helpers import icl_multiclass as icl

if quick:
    alphas, lt_steps, tf_steps, n_eval = [0.0, 1.0, 4.0], 200, 40, 300
    per_label_grid, class_grid = [1, 4, 16], [3, 5]

env = repro.setup(seed)
# small matrices: one thread is fastest, and fair to a shared machine
torch.set_num_threads(1)
plotting.use_style()
rec = claims.ClaimsRecord(
    "14_icl_multiclass",
    dict(
        quick=quick,
        seed=seed,
        d=d,
        C=C,
        R2=R2,
        per_label=per_label,
        alphas=alphas,
        lt_steps=lt_steps,
        tf_steps=tf_steps,
        batch_size=batch_size,
        n_eval=n_eval,
        majority=majority,
    ),
)
N = per_label * C
print(env)

# %% [markdown]
# ## 1. Tasks with a prescribed spectrum
#
# A task is a class-center matrix `M = U diag(σ) Vᵀ` (d × C): `U` has orthonormal columns in feature space, `V`
# orthonormal columns orthogonal to the ones vector (the centers sum to zero, so the rank is at most C − 1), and
# `σ_i = i^(−α)` rescaled so that `‖M‖_F² = C R²` (the average squared center norm is R² whatever α). The stable
# rank is then `Σσ_i² / σ_1²`: α = 0 gives the maximum C − 1 (isotropic centers), large α gives 1 (collinear
# centers). Features are `x = μ_y + N(0, I)`. Every prompt draws a fresh task.

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
        f"{icl.stable_rank(M):.4f}, "
        f"||M||_F^2 = {np.linalg.norm(M) ** 2:.3f}"
    )

pi_imb = icl.label_priors(C, majority)
y = icl.prompt_labels(N, pi_imb, rng)
prior_err = float(np.abs(np.bincount(y, minlength=C) / N - pi_imb).max())
print(
    "imbalanced context label shares:",
    np.bincount(y, minlength=C) / N,
    "prescribed",
    pi_imb,
)

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
# majority classes gain and minority classes lose, more so when centers overlap. We check that the reduction
# equals the full forward pass.

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
# **Training.** `W` starts at zero and is trained with softmax cross-entropy on the scores, by Adam over fresh
# isotropic tasks (α = 0), with the shared loop `helpers.train.fit`. The theory predicts `W ∝ I` for isotropic
# tasks. Next to it we train a 2-layer softmax transformer (`helpers.nn.Block`, no positional encoding, tokens
# `(x_i, y_i)` and a query token) on the same stream of tasks.


# %%
def task_batch(step: int):
    return icl.sample_prompts(
        batch_size, N, d, C, icl.power_spectrum(r, 0.0), R2, repro.rng(seed, 2, step)
    )


def loss_fn(model, b):
    return F.cross_entropy(model(b["X"], b["Y"], b["xq"], C), b["yq"])


t0 = time.process_time()
lt = icl.LinearICL(d)
lt_hist = train.fit(
    lt, loss_fn, task_batch, lt_steps, lr=1e-2, seed=seed, desc="linear transformer"
)
torch.manual_seed(seed)
tf = icl.SoftmaxICL(d, C, d_model=64, n_layer=2, n_head=4)
tf_hist = train.fit(
    tf,
    loss_fn,
    task_batch,
    tf_steps,
    lr=1e-3,
    warmup=tf_steps // 10,
    seed=seed,
    desc="softmax transformer",
)
W = lt.W.detach()
cos_I = float((W * torch.eye(d)).sum() / (W.norm() * np.sqrt(d)))
print(f"training: {time.process_time() - t0:.1f} s CPU;  cos(W, I) = {cos_I:.3f}")

# %% [markdown]
# ## 3. Accuracy against stable rank (balanced prompts)
#
# For each α we draw `n_eval` fresh prompts and score them with the trained linear transformer, with `W = I`, with
# the softmax transformer, and with a plug-in Bayes rule from the context (class means + log shares; a reference).


# %%
@torch.no_grad()
def evaluate(alpha, pi=None, n=n_eval, C_=C, per=per_label, stream=3):
    p_ = icl.sample_prompts(
        n,
        per * C_,
        d,
        C_,
        icl.power_spectrum(C_ - 1, alpha),
        R2,
        repro.rng(seed, stream, int(alpha * 100), C_, per),
        pi=pi,
    )
    out = {
        "trained LT": lt(p_["X"], p_["Y"], p_["xq"], C_),
        "W = I": icl.reduced_scores(p_["X"], p_["Y"], p_["xq"], torch.eye(d), C_),
        "plug-in Bayes": icl.lda_scores(p_["X"], p_["Y"], p_["xq"], C_),
    }
    if C_ == C:
        out["softmax TF"] = tf(p_["X"], p_["Y"], p_["xq"])
    return {k: icl.accuracy_by_class(v, p_["yq"], C_) for k, v in out.items()}


bal = {a: evaluate(a) for a in tqdm(alphas, desc="balanced")}
models = list(bal[alphas[0]])
acc_bal = {m: [float(np.mean(bal[a][m])) for a in alphas] for m in models}
for m in models:
    print(f"{m:14s}", np.round(acc_bal[m], 3))
rho_lt = spearmanr(srank_target, acc_bal["trained LT"]).statistic
rho_tf = spearmanr(srank_target, acc_bal["softmax TF"]).statistic
print(
    f"Spearman(stable rank, accuracy): trained LT {rho_lt:.2f}, softmax TF {rho_tf:.2f}"
)

# %% [markdown]
# ## 4. Label imbalance at test time
#
# The context now has class 0 with share `majority` and the other classes sharing the rest; queries are drawn
# uniformly so every class is tested equally. We compare majority-class and minority-class accuracy, for each
# stable rank.

# %%
imb = {a: evaluate(a, pi=pi_imb, stream=4) for a in tqdm(alphas, desc="imbalanced")}
gap = {
    m: [float(imb[a][m][0] - np.mean(imb[a][m][1:])) for a in alphas] for m in models
}
for m in models:
    print(f"{m:14s} majority - minority accuracy:", np.round(gap[m], 3))

# %%
fig, ax = plt.subplots(1, 2, figsize=(10, 3.6))
for m in models:
    ax[0].plot(srank_target, acc_bal[m], marker="o", label=m)
    ax[1].plot(srank_target, gap[m], marker="o", label=m)
ax[0].set(xlabel="stable rank of M", ylabel="accuracy (balanced prompts)", ylim=(0, 1))
ax[1].set(xlabel="stable rank of M", ylabel="majority − minority accuracy")
ax[0].legend()
plt.show()

# %% [markdown]
# ## 5. Per-label sample complexity
#
# How many examples **per label** does the trained linear transformer need as the number of classes grows? We
# sweep the per-label count for several C (isotropic tasks, same R²) and read off the count needed for 80 %
# accuracy by log-linear interpolation. Near-optimal per-label complexity means this count barely grows with C.

# %%
target_acc = 0.8
acc_pl = {}
for C_ in class_grid:
    acc_pl[C_] = [
        float(np.mean(evaluate(0.0, C_=C_, per=m_, stream=5)["trained LT"]))
        for m_ in per_label_grid
    ]
    print(
        f"C={C_}: accuracy vs examples per label {per_label_grid}: "
        f"{np.round(acc_pl[C_], 3)}"
    )


def needed(accs):
    for i, a_ in enumerate(accs):
        if a_ >= target_acc:
            if i == 0:
                return float(per_label_grid[0])
            x0, x1 = np.log(per_label_grid[i - 1]), np.log(per_label_grid[i])
            f = (target_acc - accs[i - 1]) / (a_ - accs[i - 1])
            return float(np.exp(x0 + f * (x1 - x0)))
    return float("nan")


need = {C_: needed(acc_pl[C_]) for C_ in class_grid}
print("examples per label for 80 %:", {k: round(v, 2) for k, v in need.items()})

# %% [markdown]
# ## 6. Real datasets on the same axis
#
# The stable rank of the (centered, per-feature standardised) class-mean matrix of three datasets that ship with
# scikit-learn, divided by its maximum C − 1 so the datasets are comparable with our sweep.

# %%
real = {}
for name, loader in [
    ("iris", datasets.load_iris),
    ("wine", datasets.load_wine),
    ("digits", datasets.load_digits),
]:
    Xr, yr = loader(return_X_y=True)
    Xr = (Xr - Xr.mean(0)) / (Xr.std(0) + 1e-9)
    means = np.stack([Xr[yr == c].mean(0) for c in np.unique(yr)], 1)
    means -= means.mean(1, keepdims=True)
    real[name] = (icl.stable_rank(means), len(np.unique(yr)) - 1)
    print(f"{name:6s}: stable rank {real[name][0]:.2f} of at most {real[name][1]}")

# %%
fig, ax = plt.subplots(1, 2, figsize=(10, 3.4))
for C_ in class_grid:
    ax[0].plot(per_label_grid, acc_pl[C_], marker="o", label=f"C = {C_}")
ax[0].axhline(target_acc, color="k", lw=0.8)
ax[0].set(xscale="log", xlabel="examples per label", ylabel="accuracy (trained LT)")
ax[0].legend()
ax[1].plot(
    np.array(srank_target) / r,
    acc_bal["trained LT"],
    marker="o",
    label="synthetic sweep (LT)",
)
for name, (sr, mx) in real.items():
    ax[1].axvline(sr / mx, ls=":", color="gray")
    ax[1].text(sr / mx, 0.05, name, rotation=90)
ax[1].set(xlabel="stable rank / (C − 1)", ylabel="accuracy", ylim=(0, 1))
plt.show()

# %% [markdown]
# ## 7. Interaction
#
# The slider walks through the stable-rank sweep: per-class accuracy of the trained linear transformer under the
# imbalanced context (class 0 is the majority).


# %%
def draw(fig, alpha):
    ax = fig.add_subplot(111)
    ax.bar(
        np.arange(C) - 0.2,
        bal[alpha]["trained LT"],
        width=0.4,
        label="balanced context",
    )
    ax.bar(
        np.arange(C) + 0.2,
        imb[alpha]["trained LT"],
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
    acc = evaluate(alpha, pi=pi_, n=600, stream=6)["trained LT"]
    sr = float((icl.power_spectrum(r, alpha) ** 2).sum())
    print(f"stable rank {sr:.2f}; per-class accuracy {np.round(acc, 3)}")


plotting.live_controls(play, alpha=(0.0, 4.0, 0.25), share=(0.2, 0.9, 0.05))

# %% [markdown]
# ## 8. The claims record
#
# The record computes each verdict (held / not held) from the measured number and a target fixed before running:
# Spearman ρ ≥ 0.9 for a monotone trend; a majority-minority gap of at least 5 points at the isotropic end; the gap
# at the lowest stable rank larger than at the highest; the per-label count for 80 % growing by at most 2× from
# the smallest to the largest C; the softmax transformer with ρ ≥ 0.9 (`softmax_transformer_agrees`) and a
# positive majority gap (`softmax_majority_easier`).

# %%
rec.check(
    "stable_rank_exact",
    srank_err,
    1e-9,
    op="<=",
    note="generated vs prescribed stable rank, all α",
)
rec.check(
    "reduction_matches_forward",
    red_err,
    1e-6,
    op="<=",
    note="full LSA forward vs reduced form, float64",
)
rec.check(
    "label_priors_exact",
    prior_err,
    0.0,
    op="==",
    note="context label shares vs prescribed priors",
)
rec.check(
    "trained_weights_structure",
    cos_I,
    0.9,
    op=">=",
    note="cosine between trained W and the identity",
)

rec.claim(
    "accuracy_increases_with_stable_rank",
    "Isotropic class centers (high stable rank) improve ICL",
    paper="accuracy increases with stable rank",
    measured=float(rho_lt),
    op=">=",
    target=0.9,
    unit="Spearman ρ",
    note=f"trained LT accuracy {np.round(acc_bal['trained LT'], 3).tolist()} "
    f"at stable ranks {np.round(srank_target, 2).tolist()}",
)
g0 = gap["trained LT"][0]
rec.claim(
    "majority_easier",
    "Under context imbalance, majority-class queries are easier than minority ones",
    paper="minority classes more error-prone",
    measured=g0,
    op=">=",
    target=0.05,
    unit="majority − minority accuracy (isotropic)",
)
shrink = gap["trained LT"][-1] - gap["trained LT"][0]
rec.claim(
    "imbalance_gap_shrinks",
    "Robustness to imbalance improves with stable rank",
    paper="gap smaller at high stable rank",
    measured=shrink,
    op=">",
    target=0.0,
    unit="gap(lowest srank) − gap(highest srank)",
    note=f"gaps {np.round(gap['trained LT'], 3).tolist()} from high to low stable rank",
)
vals = [need[c] for c in class_grid]
pl_statement = "Examples per label needed barely grow with the number of classes"
pl_paper = "near-optimal per-label sample complexity"
pl_unit = f"ratio of per-label counts for 80 %, C={class_grid[-1]} vs C={class_grid[0]}"
pl_counts = f"per-label counts { ({k: round(v, 2) for k, v in need.items()}) }"
# a C that never reaches 80 % needs more than the largest grid count: a lower bound
pl_bound = per_label_grid[-1] / vals[0] if np.isfinite(vals[0]) else float("nan")
if all(np.isfinite(vals)):
    rec.claim(
        "per_label_sample_complexity",
        pl_statement,
        paper=pl_paper,
        measured=vals[-1] / vals[0],
        op="<=",
        target=2.0,
        unit=pl_unit,
        note=pl_counts
        + (
            "; the smallest C already reaches 80 % at the first grid point, so its "
            "count is an upper bound "
            "and the ratio a lower bound"
            if acc_pl[class_grid[0]][0] >= target_acc
            else ""
        ),
    )
elif not np.isfinite(vals[-1]) and pl_bound > 2.0:
    rec.claim(
        "per_label_sample_complexity",
        pl_statement,
        paper=pl_paper,
        measured=pl_bound,
        op="<=",
        target=2.0,
        unit=pl_unit + " (lower bound)",
        note=pl_counts + f"; C={class_grid[-1]} never reached 80 % within "
        f"{per_label_grid[-1]} examples per label, so the ratio is at least "
        f"{per_label_grid[-1]} ÷ the count of C={class_grid[0]}",
    )
else:
    rec.untested(
        "per_label_sample_complexity",
        pl_statement,
        paper=pl_paper,
        reason=pl_counts + "; nan: never reached 80 % within the grid of examples "
        "per label, so the ratio cannot be measured",
    )
rec.claim(
    "softmax_transformer_agrees",
    "A softmax transformer trained from scratch shows the same trend with stable rank",
    paper="consistent with trained transformers and LLMs",
    measured=float(rho_tf),
    op=">=",
    target=0.9,
    unit="Spearman ρ (softmax TF)",
    note=f"softmax TF accuracy {np.round(acc_bal['softmax TF'], 3).tolist()}, "
    f"majority gap {gap['softmax TF'][0]:.3f}; no pretrained LLM offline",
)
rec.claim(
    "softmax_majority_easier",
    "In the softmax transformer too, majority-class queries are easier than "
    "minority ones",
    paper="consistent with trained transformers and LLMs",
    measured=gap["softmax TF"][0],
    op=">",
    target=0.0,
    unit="majority − minority accuracy (isotropic, softmax TF)",
)
rec.save()
