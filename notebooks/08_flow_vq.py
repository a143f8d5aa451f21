# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Flow-VQ: a codebook carried by a learned flow
#
# Vector quantization (VQ-VAE) turns continuous latents into tokens for autoregressive models, but its learned
# codebook is notorious for **collapse**: many codes are never chosen, so the tokenizer wastes most of its
# vocabulary. The paper replaces the learned codebook with a construction. A small **flow-matching** model learns
# the latent distribution as a transport of a fixed Gaussian; the Gaussian is cut into **K equal-mass cells**
# (per-dimension quantiles); the cells are carried through the flow into latent space and each transported cell
# is represented by its **Voronoi centroid** under the induced distribution. Because the flow preserves
# probability mass, every transported cell holds mass 1/K, so every code is used, by construction, as long as the
# flow fits the latents. The codebook has no trainable parameters: it is recomputed from the flow every R steps.
#
# This chapter builds the whole construction, then measures it against VQ-VAE, VQ with EMA and dead-code
# restarts, FSQ, a plain Gaussian-quantile grid and k-means on three tasks: 2-D latent distributions, a tokenizer
# for 8×8 digit images, and a "high-precision" task (Lorenz-63 states).
#
# | | the paper | this notebook |
# |---|---|---|
# | latents | image autoencoder latents | fixed 2-D distributions; a 4-token, d=4 MLP tokenizer of `load_digits` 8×8 images; 3-D Lorenz-63 states |
# | flow model | a lightweight flow-matching network | a 3-layer MLP (128 wide), RK4 with 16-50 steps |
# | codebook size | not given in the abstract | K ∈ {16, 64, 256} (2-D), {64, 256} (digits), 2^6 to 2^12 (Lorenz) |
# | "high-precision" tasks | two tasks, not named in the abstract | tokenizing Lorenz-63 states, error vs bits |
# | hardware | GPUs | 2 CPU cores, a few minutes |
#
# :::{note}
# **What is reconstructed.** The full paper and code are not public; only the abstract is. The construction
# follows the abstract exactly (flow-matching model trained alongside the autoencoder, a fixed Gaussian source,
# even-quantile prior codes transported through the flow, Voronoi centroids under the induced distribution), but
# these details are **our reconstruction**: the linear (rectified-flow) probability path, product-of-quantile
# cells with conditional-mean prior codes, Monte Carlo centroids plus one to three Lloyd steps, the loss
# `recon + β·commitment + λ·flow matching` with a straight-through estimator, the refresh period R, the network
# sizes and every hyper-parameter. The paper's two high-precision tasks are unknown; Lorenz-63 stands in for them.
# The abstract gives no numbers, so the "paper" column of the claims says what it asserts in words.
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

# %% [markdown]
# ## Parameters
#
# `quick = True` runs every code path on tiny sizes; the default is the experiment reported below.

# %% tags=["parameters"]
quick = False
seed = 0
n_toy = 20_000  # samples per 2-D distribution
flow_steps = 2500  # flow-matching steps on each fixed latent set (2-D, Lorenz)
toy_K = [16, 64, 256]  # codebook sizes for the 2-D study
tok_K = [64, 256]  # codebook sizes for the digits tokenizer
tok_steps = 2000  # tokenizer training steps per method
refresh_every = 100  # R: Flow-VQ recomputes its codebook every R steps
lorenz_bits = [6, 9, 12]  # log2 K for the Lorenz-63 study
n_lorenz = 15_000

# %% tags=["hide-input"]
import math
import time

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch
from IPython.display import display
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression
from tqdm.auto import tqdm

from helpers import claims, plotting, repro, train
from helpers import flow_vq as fv

if quick:
    n_toy, flow_steps, toy_K, tok_K, tok_steps, refresh_every = (
        2000,
        150,
        [16, 64],
        [64],
        120,
        40,
    )
    lorenz_bits, n_lorenz = [6, 9], 2000

# The models here are tiny (a few thousand multiply-adds per sample): one thread is
# faster than two, and much
# faster when the machine is shared, so we fix it.
env = repro.setup(seed, threads=1)
plotting.use_style()
rec = claims.ClaimsRecord(
    "08_flow_vq",
    dict(
        quick=quick,
        seed=seed,
        n_toy=n_toy,
        flow_steps=flow_steps,
        toy_K=toy_K,
        tok_K=tok_K,
        tok_steps=tok_steps,
        refresh_every=refresh_every,
        lorenz_bits=lorenz_bits,
        n_lorenz=n_lorenz,
    ),
)
print(env)

# %% [markdown]
# ## 1. The method, piece by piece
#
# **Prior codes C0.** The source is $p_0 = \mathcal N(0, I_d)$. Dimension $j$ is cut into $m_j$ bins of equal
# probability at $\Phi^{-1}(i/m_j)$, so the $K = \prod_j m_j$ product cells each carry mass exactly $1/K$. A cell's
# prior code is its conditional mean, per dimension $\mathbb E[Z \mid a<Z<b] = (\varphi(a)-\varphi(b))/(\Phi(b)-\Phi(a))$.
# `K` must factor into per-dimension levels ($K=64$ in 2-D is 8×8, in 4-D it is 4×4×2×2); otherwise we refuse.

# %%
levels = fv.split_levels(64, 2)
edges = fv.gaussian_bin_edges(levels[0])  # Phi^{-1}(i/m), i = 0..m
# (phi(a) - phi(b)) / (Phi(b) - Phi(a)) per bin
means = fv.gaussian_bin_means(levels[0])
c0 = fv.prior_codes(levels)  # the K x d product grid of conditional means
print(
    "levels", levels, "| edges", np.round(edges, 3), "\ncell means", np.round(means, 3)
)
try:
    fv.split_levels(7, 2)
except ValueError as e:
    print("K=7, d=2 ->", e)

# %% [markdown]
# **The flow.** A velocity field $v_\theta(z,t)$ is trained by conditional flow matching on the linear path from
# the source to the (stop-gradient) latents:
# $\mathcal L_{FM} = \mathbb E\,\|v_\theta((1-t)z_0 + t z_1, t) - (z_1 - z_0)\|^2$ with $z_0\sim p_0$,
# $t\sim U[0,1]$, $z_1 = \mathrm{sg}(E(x))$. The flow map $\Psi$ integrates $\dot z = v_\theta(z,t)$ from 0 to 1
# (RK4); integrating back from 1 to 0 gives $\Psi^{-1}$.
#
# **Transported codes and Voronoi centroids.** Sample $z_0 \sim p_0$, label each sample by its source cell, push
# it through $\Psi$, and average per cell: $c^1_k = \mathbb E[\Psi(z_0) \mid z_0 \in \Omega^0_k]$, the MSE-optimal
# reproduction point of the transported cell. A few Lloyd steps on the model samples $\Psi(z_0)$ then move the
# codes to the nearest-neighbour Voronoi centroids. Here are those lines, exactly as `fv.transport_codes` runs
# them, on a flow trained for the two-moons distribution:


# %%
def fit_flow(
    x: torch.Tensor, steps: int, name: str, hidden: int = 128
) -> fv.VelocityField:
    """Flow matching on a fixed latent set (the same loss Flow-VQ uses inside a
    tokenizer).
    """
    torch.manual_seed(seed)
    v = fv.VelocityField(x.shape[1], hidden)
    g = torch.Generator().manual_seed(seed)
    batches = lambda step: x[torch.randint(len(x), (1024,), generator=g)]
    hist = train.fit(
        v,
        lambda m, z1: fv.flow_matching_loss(m, z1, g),
        batches,
        steps,
        lr=2e-3,
        warmup=min(100, steps // 10),
        seed=seed,
        desc=f"flow {name}",
    )
    v.fm_loss = hist.smoothed(50)
    return v.requires_grad_(False)


toy = {name: fv.toy_latents(name, n_toy, seed) for name in fv.TOY_DISTRIBUTIONS}
flows = {name: fit_flow(x, flow_steps, name) for name, x in toy.items()}

# %%
v, K = flows["moons"], 64
gen = torch.Generator().manual_seed(seed)
with torch.no_grad():
    z0 = torch.randn(32 * K, 2, generator=gen)  # samples of the source
    cells = fv.source_cells(z0, levels)  # which equal-mass cell each came from
    z1 = fv.flow_map(v, z0, steps=32)  # pushed through Psi (RK4)
    centroids = (
        torch.zeros(K, 2).index_add_(0, cells, z1)
        / torch.bincount(cells, minlength=K)[:, None]
    )
    codes, mse = fv.lloyd(z1, centroids, iters=3)  # Lloyd steps on the model samples
same = fv.transport_codes(
    v, levels, 32 * K, 32, lloyd_steps=3, generator=torch.Generator().manual_seed(seed)
)
print(
    "helper reproduces the lines above:",
    torch.allclose(same.codes, codes),
    "| distortion per Lloyd step",
    np.round(mse, 4),
)

# %% [markdown]
# **The quantizer** assigns a latent to its nearest code and passes gradients straight through,
# $z_q = z + \mathrm{sg}(c_{q(z)} - z)$. Inside a tokenizer the loss is
# $\|x - D(z_q)\|^2 + \beta\|z - \mathrm{sg}(z_q)\|^2 + \lambda\,\mathcal L_{FM}$; every R steps the codebook is
# rebuilt from the current flow (`fv.FlowQuantizer`). The variant assignment "source cell of $\Psi^{-1}(z)$" gives
# exactly equal mass under the flow model; we report both.
#
# ## 2. Two-dimensional latents: every method on the same points
#
# The latents are fixed samples of four distributions (standardized). The methods:
# **k-means** (the distortion reference); **VQ** trained online with the codebook loss from the VQ-VAE
# initialisation; **VQ-EMA** with dead-code restarts; **FSQ** (a per-dimension uniform grid after `tanh`; with fixed
# latents we give it its best decoder, the cell means); the plain **Gaussian grid** (the prior codes, no flow);
# **Flow (centroids)** and **Flow + Lloyd** (3 steps), the paper's construction.


# %%
def train_online_vq(quantizer, x: torch.Tensor, steps: int, lr: float = 1e-2):
    """Fit a VQ or VQ-EMA codebook to fixed latents on minibatches (the latents do not
    move).
    """
    g = torch.Generator().manual_seed(seed)
    params = [p for p in quantizer.parameters() if p.requires_grad]
    opt = torch.optim.Adam(params, lr=lr) if params else None
    quantizer.train()
    for _ in range(steps):
        out = quantizer(x[torch.randint(len(x), (512,), generator=g)])
        if opt is not None:
            opt.zero_grad()
            out.loss.backward()
            opt.step()
    return quantizer.eval().codebook.detach()


def fsq_cells(x: torch.Tensor, levels):
    """FSQ with fixed latents: its cells, and the best decoder for them (the cell
    means).
    """
    idx = fv.FSQ(levels)(x).idx
    K = math.prod(levels)
    sums = torch.zeros(K, x.shape[1]).index_add_(0, idx, x)
    return sums / torch.bincount(idx, minlength=K).clamp(min=1)[:, None], idx


METHODS = [
    "k-means",
    "VQ",
    "VQ-EMA",
    "FSQ",
    "Gaussian grid",
    "Flow (centroids)",
    "Flow + Lloyd",
]
toy_res, toy_codes, lloyd_traces = {}, {}, []
vq_steps = 150 if quick else 1500
for name, x in tqdm(toy.items(), desc="2-D study"):
    for K in toy_K:
        lv = fv.split_levels(K, 2)
        tc = fv.transport_codes(
            flows[name],
            lv,
            64 * K,
            32,
            lloyd_steps=3,
            generator=torch.Generator().manual_seed(seed),
        )
        lloyd_traces.append(tc.mse)
        torch.manual_seed(seed)
        books = {
            "k-means": fv.kmeans_codes(x, K, seed),
            "VQ": train_online_vq(fv.VectorQuantizer(K, 2), x, vq_steps),
            "VQ-EMA": train_online_vq(
                fv.EMAVectorQuantizer(K, 2, seed=seed), x, vq_steps
            ),
            "Gaussian grid": fv.prior_codes(lv),
            "Flow (centroids)": tc.centroids,
            "Flow + Lloyd": tc.codes,
        }
        for m in METHODS:
            if m == "FSQ":
                codes_m, idx = fsq_cells(x, lv)
            else:
                codes_m = books[m]
                idx = fv.nearest(x, codes_m)
            u = fv.usage(idx, K)
            toy_res[name, K, m] = dict(
                mse=(x - codes_m[idx]).pow(2).sum(-1).mean().item(), **u
            )
            toy_codes[name, K, m] = (codes_m, idx)

# %%
df = pd.DataFrame(
    [dict(distribution=n, K=K, method=m, **r) for (n, K, m), r in toy_res.items()]
)
print("distortion (MSE, standardized units)")
display(
    df.pivot_table(index=["distribution", "K"], columns="method", values="mse")[
        METHODS
    ].round(4)
)
print("utilization (fraction of codes used)")
display(
    df.pivot_table(index=["distribution", "K"], columns="method", values="utilization")[
        METHODS
    ].round(3)
)

# %%
fig, axes = plt.subplots(1, len(toy), figsize=(13, 3.2), sharex=True)
for ax, name in zip(axes, toy):
    for i, m in enumerate(METHODS):
        ys = [toy_res[name, K, m]["mse"] for K in toy_K]
        ax.plot(
            np.log2(toy_K),
            ys,
            marker="o",
            label=m,
            color=plotting.PALETTE[i % 8],
            ls="--" if m == "k-means" else "-",
        )
    ax.set(title=name, xlabel="log2 K", yscale="log")
axes[0].set_ylabel("distortion (MSE)")
axes[-1].legend(fontsize=7, loc="lower left")
plt.tight_layout()
plt.show()

# %% [markdown]
# Voronoi pictures at K = 64 (or the largest K in quick mode): points coloured by their code, codes in black, and
# the sorted code-usage histogram underneath. Where the flow fits the data, Flow-VQ's codes follow it and are all
# used; where it does not (the checkerboard's empty squares, the heavy tails), the flow leaves some probability
# mass where there is no data and the codes placed there go unused: "full utilization by construction" holds
# only as far as the flow fits. VQ trained online from the reference initialisation leaves many codes dead on the
# moons and the rings.

# %%
K_show = 64 if 64 in toy_K else toy_K[-1]
show = ["k-means", "VQ", "Gaussian grid", "Flow + Lloyd"]


def voronoi_panel(ax, name, K, m, hist_ax=None):
    x = toy[name]
    codes_m, idx = toy_codes[name, K, m]
    sub = slice(0, 4000)
    ax.scatter(
        x[sub, 0],
        x[sub, 1],
        c=(idx[sub] * 37 % K),
        cmap="tab20",
        s=1.5,
        rasterized=True,
    )
    ax.scatter(codes_m[:, 0], codes_m[:, 1], c="k", s=6)
    ax.set(xlim=(-3.2, 3.2), ylim=(-3.2, 3.2), xticks=[], yticks=[])
    ax.set_title(
        f"{m}\nused {toy_res[name, K, m]['utilization']:.0%}, MSE "
        f"{toy_res[name, K, m]['mse']:.3f}",
        fontsize=8,
    )
    if hist_ax is not None:
        counts = np.sort(np.bincount(idx.numpy(), minlength=K))[::-1]
        hist_ax.bar(range(K), counts / counts.sum() * K, width=1.0)
        hist_ax.axhline(1.0, color="k", lw=0.8, ls=":")
        hist_ax.set(
            xticks=[],
            ylim=(0, 4),
            ylabel="usage × K" if hist_ax.get_subplotspec().is_first_col() else "",
        )


for name in ["moons", "checkerboard"]:
    fig, axes = plt.subplots(
        2, len(show), figsize=(11, 4.6), gridspec_kw=dict(height_ratios=[3, 1])
    )
    for j, m in enumerate(show):
        voronoi_panel(axes[0, j], name, K_show, m, axes[1, j])
    fig.suptitle(f"{name}, K = {K_show}", fontsize=10)
    plt.tight_layout()
    plt.show()

# %% [markdown]
# ### Checks on the construction
#
# * `equal_mass_cells`: push 10 000 fresh source samples through $\Psi$, assign them back by the source cell of
#   $\Psi^{-1}$, and test the K = 64 counts for equality (χ², p ≥ 0.01).
# * `ode_roundtrip`: $\max\|\Psi^{-1}(\Psi(z)) - z\| \le 10^{-3}$ (RK4, 50 steps), on every trained flow.
# * `lloyd_monotone`: no Lloyd step ever increased the distortion on the model samples.
# * `gaussian_sanity`: if the latents are exactly $\mathcal N(0,I)$, the flow is the identity and the transported
#   codes must land on the prior codes (max error < 0.1).

# %%
g = torch.Generator().manual_seed(seed + 1)
with torch.no_grad():
    z0 = torch.randn(10_000, 2, generator=g)
    back = fv.flow_inverse(flows["moons"], fv.flow_map(flows["moons"], z0, 32), 32)
    p_equal, max_min = fv.equal_mass_test(
        fv.source_cells(back, fv.split_levels(64, 2)), 64
    )
    roundtrip = max(
        (fv.flow_inverse(f, fv.flow_map(f, z0[:2000], 50), 50) - z0[:2000])
        .norm(dim=1)
        .max()
        .item()
        for f in flows.values()
    )
print(
    f"equal mass: chi2 p = {p_equal:.3f}, max/min count = {max_min:.2f}; round "
    f"trip error {roundtrip:.2e}"
)
rec.check(
    "equal_mass_cells", p_equal, 0.01, op=">=", note=f"max/min count {max_min:.2f}"
)
rec.check("ode_roundtrip", roundtrip, 1e-3, op="<=")
rec.check(
    "lloyd_monotone",
    max(max(np.diff(t)) for t in lloyd_traces),
    1e-7,
    op="<=",
    note="largest increase of the distortion over a Lloyd step",
)

gauss = torch.randn(200_000, 2, generator=torch.Generator().manual_seed(seed + 2))
# fixed size: this check must not depend on `quick`
v_gauss = fit_flow(gauss, 2000, "N(0,I)", hidden=64)
tc_gauss = fv.transport_codes(
    v_gauss,
    fv.split_levels(64, 2),
    1000 * 64,
    32,
    generator=torch.Generator().manual_seed(seed),
)
gauss_err = (tc_gauss.centroids - tc_gauss.prior).norm(dim=1).max().item()
print(f"N(0,I) latents: max |transported code - prior code| = {gauss_err:.3f}")
rec.check("gaussian_sanity", gauss_err, 0.1, op="<")

# %% [markdown]
# ## 3. A tokenizer for digit images
#
# An MLP autoencoder maps each 8×8 `load_digits` image to 4 tokens of dimension 4; the decoder rebuilds the image
# from the quantized tokens. The five quantizers share everything else (architecture, optimizer, steps, seed).
# Flow-VQ's flow is trained inside the same loop on stop-gradient latents and its codebook is refreshed every R
# steps. We report test reconstruction error, codebook utilization and perplexity (over the tokens of all 1797
# images), and the accuracy of a fixed digit classifier (logistic regression trained on real training images) on
# the reconstructions.

# %%
digits = load_digits()
X_all = torch.tensor(digits.data / 16.0, dtype=torch.float32)
y_all = digits.target
perm = np.random.default_rng(seed).permutation(len(X_all))
tr, te = perm[:1437], perm[1437:]
X_tr, X_te = X_all[tr], X_all[te]
clf = LogisticRegression(max_iter=3000).fit(X_tr.numpy(), y_all[tr])
clf_acc_real = clf.score(X_te.numpy(), y_all[te])
N_TOK, D_TOK = 4, 4


def make_quantizer(method: str, K: int):
    lv = fv.split_levels(K, D_TOK)
    return {
        "VQ-VAE": lambda: fv.VectorQuantizer(K, D_TOK),
        "VQ-EMA": lambda: fv.EMAVectorQuantizer(K, D_TOK, seed=seed),
        "FSQ": lambda: fv.FSQ(lv),
        "Gaussian grid": lambda: fv.GaussianGridQuantizer(lv),
        "Flow-VQ": lambda: fv.FlowQuantizer(
            lv, hidden=64, refresh_every=refresh_every, seed=seed
        ),
    }[method]()


def tok_loss(model, batch):
    recon, out = model(batch)
    return (recon - batch).pow(2).sum(-1).mean() + out.loss


def train_tokenizer(method: str, K: int):
    torch.manual_seed(seed)
    model = fv.Tokenizer(64, N_TOK, D_TOK, make_quantizer(method, K))
    g = torch.Generator().manual_seed(seed)
    hist = train.fit(
        model,
        tok_loss,
        lambda step: X_tr[torch.randint(len(X_tr), (128,), generator=g)],
        tok_steps,
        lr=2e-3,
        warmup=tok_steps // 20,
        seed=seed,
        desc=f"{method} K={K}",
    )
    with torch.no_grad():
        recon_te, _ = model(X_te)
        _, out_all = model(X_all)
    r = dict(
        recon_mse=(recon_te - X_te).pow(2).mean().item(),
        clf_acc=clf.score(recon_te.clamp(0, 1).numpy(), y_all[te]),
        **fv.usage(out_all.idx, K),
    )
    if method == "Flow-VQ":
        with torch.no_grad():
            r["utilization_inverse_flow"] = fv.usage(
                model.quantizer.source_assign(model.encode(X_all)), K
            )["utilization"]
    return model, hist, r


TOK_METHODS = ["VQ-VAE", "VQ-EMA", "FSQ", "Gaussian grid", "Flow-VQ"]
tok_res, tok_models = {}, {}
for K in tok_K:
    for m in TOK_METHODS:
        tok_models[m, K], _, tok_res[m, K] = train_tokenizer(m, K)

tdf = pd.DataFrame(
    [dict(method=m, K=K, **r) for (m, K), r in tok_res.items()]
).set_index(["K", "method"])
print(f"classifier accuracy on real test images: {clf_acc_real:.3f}")
display(tdf.round(4))

# %% [markdown]
# `ste_gradient`: the straight-through estimator must deliver the reconstruction loss's gradient to the encoder
# through Flow-VQ (the quantizer's own nearest-code step has zero gradient almost everywhere).

# %%
flow_tok = tok_models["Flow-VQ", tok_K[-1]]
flow_tok.zero_grad()
flow_tok.train(False)
recon, _ = flow_tok(X_te[:64])
(recon - X_te[:64]).pow(2).sum(-1).mean().backward()
enc_grad = sum(p.grad.norm().item() ** 2 for p in flow_tok.enc.parameters()) ** 0.5
rec.check("ste_gradient", enc_grad, 0.0, op=">")
print(f"encoder gradient norm through the quantizer: {enc_grad:.3g}")

# %%
fig, axes = plt.subplots(1, len(TOK_METHODS), figsize=(13, 2.6), sharey=True)
Kmax = tok_K[-1]
for ax, m in zip(axes, TOK_METHODS):
    with torch.no_grad():
        idx = tok_models[m, Kmax](X_all)[1].idx.numpy()
    counts = np.sort(np.bincount(idx, minlength=Kmax))[::-1]
    ax.bar(range(Kmax), counts / counts.sum() * Kmax, width=1.0)
    ax.axhline(1.0, color="k", lw=0.8, ls=":")
    ax.set(
        title=f"{m}\nused {tok_res[m, Kmax]['utilization']:.0%}",
        xlabel="code (sorted)",
        xticks=[],
    )
axes[0].set_ylabel("usage × K")
plt.tight_layout()
plt.show()

fig, axes = plt.subplots(len(TOK_METHODS) + 1, 10, figsize=(8, 5.4))
with torch.no_grad():
    rows = [("original", X_te[:10])] + [
        (m, tok_models[m, Kmax](X_te[:10])[0].clamp(0, 1)) for m in TOK_METHODS
    ]
for i, (m, imgs) in enumerate(rows):
    for j in range(10):
        axes[i, j].imshow(imgs[j].reshape(8, 8), cmap="gray_r", vmin=0, vmax=1)
        axes[i, j].axis("off")
    axes[i, 0].text(-1, 3.5, m, ha="right", va="center", fontsize=8)
plt.suptitle(f"test reconstructions, K = {Kmax}", fontsize=10)
plt.show()

# %% [markdown]
# ## 4. High-precision tokenization: Lorenz-63 states
#
# When a token must pin down a continuous value precisely, what matters is the error after de-tokenizing for a
# given number of bits. We tokenize standardized states of the Lorenz-63 attractor (a thin, curved 2-D set in
# 3-D) with K = 2^bits codes and report the RMS error after de-tokenizing, relative to the attractor's standard
# deviation. Methods: k-means, Flow + Lloyd (one flow, trained once, transported at every K), the Gaussian grid
# and a uniform per-dimension grid over the data range (FSQ-like, cell-midpoint decoder).

# %%
S = fv.lorenz_states(n_lorenz, seed=seed)
S = torch.tensor((S - S.mean(0)) / S.std(0), dtype=torch.float32)
v_lorenz = fit_flow(S, flow_steps, "Lorenz-63")


def uniform_grid(x: torch.Tensor, levels) -> torch.Tensor:
    lo, hi = x.min(0).values, x.max(0).values
    axes = [
        lo[j] + (torch.arange(m) + 0.5) * (hi[j] - lo[j]) / m
        for j, m in enumerate(levels)
    ]
    grid = torch.meshgrid(*axes, indexing="ij")
    return torch.stack([g.reshape(-1) for g in grid], dim=-1)


lor = {}
for b in tqdm(lorenz_bits, desc="Lorenz bits"):
    K = 2**b
    lv = fv.split_levels(K, 3)
    books = {
        "k-means": fv.kmeans_codes(S, K, seed, max_iter=50),
        "Flow + Lloyd": fv.transport_codes(
            v_lorenz,
            lv,
            16 * K,
            16,
            lloyd_steps=2,
            generator=torch.Generator().manual_seed(seed),
        ).codes,
        "Gaussian grid": fv.prior_codes(lv),
        "uniform grid": uniform_grid(S, lv),
    }
    for m, c in books.items():
        idx = fv.nearest(S, c)
        lor[m, b] = dict(rmse=math.sqrt(fv.distortion(S, c) / 3), **fv.usage(idx, K))
ldf = pd.DataFrame([dict(method=m, bits=b, **r) for (m, b), r in lor.items()])
display(ldf.pivot_table(index="bits", columns="method", values="rmse").round(4))

fig, ax = plt.subplots(figsize=(5.5, 3.4))
for m in ["k-means", "Flow + Lloyd", "Gaussian grid", "uniform grid"]:
    ax.plot(lorenz_bits, [lor[m, b]["rmse"] for b in lorenz_bits], marker="o", label=m)
ax.set(
    xlabel="bits per token (log2 K)",
    ylabel="RMS error after de-tokenizing (std units)",
    yscale="log",
)
ax.legend()
plt.show()

# %% [markdown]
# ## 5. Interactive: codebooks across K
#
# The slider steps through the precomputed codebooks of the 2-D study (two moons) for every K: k-means, VQ, the
# Gaussian grid and Flow + Lloyd. It works in the static page. In Jupyter or Colab, the live controls below
# rebuild the Flow-VQ codebook for any distribution, K and number of Lloyd steps from the trained flows.


# %%
def draw_K(fig, K):
    axes = fig.subplots(1, len(show))
    for ax, m in zip(axes, show):
        voronoi_panel(ax, "moons", K, m)


plotting.static_slider(toy_K, draw_K, figsize=(11, 3.3), label="K")


# %%
def live(distribution="moons", log2_K=6, lloyd_steps=3):
    K = 2 ** int(log2_K)
    lv = fv.split_levels(K, 2)
    tc = fv.transport_codes(
        flows[distribution],
        lv,
        32 * K,
        32,
        lloyd_steps=lloyd_steps,
        generator=torch.Generator().manual_seed(seed),
    )
    x = toy[distribution]
    idx = fv.nearest(x, tc.codes)
    fig, ax = plt.subplots(figsize=(4, 4))
    ax.scatter(x[:4000, 0], x[:4000, 1], c=idx[:4000] * 37 % K, cmap="tab20", s=1.5)
    ax.scatter(tc.codes[:, 0], tc.codes[:, 1], c="k", s=6)
    u = fv.usage(idx, K)
    ax.set_title(
        f"K={K}: used {u['utilization']:.0%}, MSE {fv.distortion(x, tc.codes):.4f}",
        fontsize=9,
    )
    plt.show()


plotting.live_controls(
    live, distribution=list(fv.TOY_DISTRIBUTIONS), log2_K=(4, 8, 2), lloyd_steps=(0, 5)
)

# %% [markdown]
# ## 6. The claims record
#
# The abstract asserts full codebook utilization (VQ-VAE's known collapse is the motivation), a more expressive
# codebook, and a structured discretization from Voronoi centroids. It gives no numbers, so the "paper" column
# states the assertion. The tokenizer claims use the largest K of the run.

# %%
Kc = tok_K[-1]
flow_r, vq_r = tok_res["Flow-VQ", Kc], tok_res["VQ-VAE", Kc]
rec.claim(
    "utilization_flow",
    f"Flow-VQ uses the whole codebook (digits tokenizer, K={Kc})",
    paper="full utilization",
    measured=flow_r["utilization"],
    op=">=",
    target=0.98,
    unit="fraction of codes used",
    baseline=tok_res["VQ-EMA", Kc]["utilization"],
    note=f"nearest-code assignment over all {len(X_all) * N_TOK} tokens; inverse-flow "
    "assignment uses "
    f"{flow_r['utilization_inverse_flow']:.1%}; baseline: VQ-EMA with restarts",
)
rec.claim(
    "utilization_vq",
    f"The VQ-VAE baseline collapses (digits tokenizer, K={Kc})",
    paper="codebook collapse",
    measured=vq_r["utilization"],
    op="<",
    target=0.9,
    unit="fraction of codes used",
    note="reference VQ-VAE initialisation, uniform in (-1/K, 1/K)",
)
rec.claim(
    "perplexity_ratio",
    f"Flow-VQ's codes are used evenly (perplexity / K, K={Kc})",
    paper="full, even utilization (≈ 1)",
    measured=flow_r["perplexity_ratio"],
    op=">=",
    target=0.8,
    unit="perplexity / K",
    baseline=tok_res["VQ-EMA", Kc]["perplexity_ratio"],
    note=f"VQ-VAE: {vq_r['perplexity_ratio']:.3f}, VQ-EMA (baseline): "
    f"{tok_res['VQ-EMA', Kc]['perplexity_ratio']:.3f}",
)
ratio = flow_r["recon_mse"] / vq_r["recon_mse"]
rec.claim(
    "recon_vs_vq",
    f"Flow-VQ reconstructs better than VQ-VAE (test MSE ratio, K={Kc})",
    paper="improved expressivity (< 1)",
    measured=ratio,
    op="<",
    target=1.0,
    unit="MSE Flow-VQ / MSE VQ-VAE",
    baseline=vq_r["recon_mse"],
    note="VQ-EMA with restarts: "
    f"{tok_res['VQ-EMA', Kc]['recon_mse'] / vq_r['recon_mse']:.3f}; "
    f"classifier accuracy on reconstructions: Flow-VQ {flow_r['clf_acc']:.3f}, VQ-VAE "
    f"{vq_r['clf_acc']:.3f}, real images {clf_acc_real:.3f}",
)
K_ref = 64 if 64 in toy_K else toy_K[-1]
ratios = [
    toy_res[n, K_ref, "Flow + Lloyd"]["mse"] / toy_res[n, K_ref, "k-means"]["mse"]
    for n in toy
]
gm = float(np.exp(np.mean(np.log(ratios))))
rec.claim(
    "distortion_vs_kmeans",
    f"Flow + Lloyd codes are close to the k-means distortion (2-D, K={K_ref}, "
    "geometric mean over the four distributions)",
    paper="Voronoi centroids: near-optimal (≈ 1)",
    measured=gm,
    op="<=",
    target=1.25,
    unit="MSE / k-means MSE",
    note="per distribution: "
    + ", ".join(f"{n} {r:.2f}" for n, r in zip(toy, ratios))
    + ". The Lloyd codes are near optimal for the flow's own samples; the gap to "
    "k-means on the data "
    "comes from where the flow's distribution differs from the data's (mass in "
    "gaps, tails).",
)
rec.save()
