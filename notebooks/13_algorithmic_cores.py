# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Algorithmic cores: the small subspace a trained transformer cannot do without
#
# Two networks trained from different seeds can compute the same function with very different weights, so a
# circuit read off one network may be an accident of its training run. The paper (Schiffman, *Transformers
# converge to invariant algorithmic cores*) looks instead for what every solution **must** contain: a low-dimensional
# subspace of one layer that is *sufficient* (keeping only it preserves the behaviour), *necessary* (removing it
# destroys the behaviour) and *shared* (the same computation appears in independently trained models). Algorithmic
# Core Extraction (ACE) finds it with **balanced truncation** from control theory: directions that both carry
# activation variance and move the output. The paper then reads the algorithm off the core: the transition
# spectrum of a Markov chain, a cyclic (Fourier) operator for modular addition that appears at grokking and later
# inflates, an inverse law for grokking time, and a single steerable subject-verb agreement axis in language models.
#
# | | paper | this notebook |
# |---|---|---|
# | Markov chain | 4-state cyclic chain, 1-layer transformers d=64, 3000 sequences, 40 epochs, 3 seeds | same chain, width and data (3000 train / 3000 test sequences), 300 steps, 3 seeds |
# | modular addition | p=53, 2-layer d=128, lr 1e-3, wd 1.0, batch 512, ~2000 epochs | p=53, 2-layer d=128, lr 1e-3, wd 1.0, full batch, 3000 epochs (the paper ~2000 at batch 512; see Known limits), 3 seeds, trained by `data/13_algorithmic_cores/make_modadd.py` |
# | grokking-time law | sweeps of weight decay and redundancy | p=31, lr 3e-3: wd 0.25-2 at d=32, width 16-64 at wd 1 (the redundancy axis), 3 seeds, by `make_groktime.py` |
# | subject-verb agreement | GPT-2 S/M/L, LLaMA-3.1, Gemma-2, Qwen2.5 | two small LMs (2L/d64, 3L/d96) per seed, trained here on a generated agreement grammar with attractors, 3 seeds |
# | hardware | GPUs | 2 CPU cores; the long training runs once, in the checkpoint scripts |
#
# :::{note}
# **What is reconstructed.** The extraction maths (Gramians, balanced SVD, energy threshold, causal scans) and the
# Markov / modular-addition configurations follow the authors' description and code, re-implemented here. Ours:
# (1) the *flip* intervention `h - 2 Q Q^T (h - mu)` (the authors' flip code was not found); (2) the subject-verb
# agreement experiment: no pretrained LM weights are available offline, so small LMs are trained on a synthetic
# grammar in place of GPT-2 and friends; (3) the memorisation step (first logged step with train accuracy
# `>= 0.99`) and the generalisation step (test accuracy `>= 0.95`) that define the grokking time; (4) the
# grokking-time study runs at a higher learning rate and a smaller width than the main run, to fit 24 runs on a CPU;
# (5) the mode count at memorisation as the measure of redundancy.
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
# `quick = True` runs every code path on tiny sizes; the default runs the experiments below.

# %% tags=["parameters"]
quick = False
seed = 0
markov_steps = 300  # training steps per Markov model
markov_test = 3000  # test sequences (the paper's 3000)
n_boot = 200  # bootstrap resamples of the test sequences for the eigenvalue intervals
sva_steps = 600  # training steps per agreement LM
n_prompts = 200  # held-out agreement prompts
n_null = 200  # draws of each ring-fraction null (class order, random subspace)
n_untrained = 19  # untrained Markov models, the CCA null

# %% tags=["hide-input"]
import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F
from IPython.display import Markdown, display
from tqdm.auto import tqdm

from helpers import algorithmic_cores as ac
from helpers import checkpoints, claims, nn, plotting, repro, scripts, train

if quick:
    markov_steps, markov_test, n_boot, sva_steps, n_prompts = 150, 300, 20, 150, 40
    n_null, n_untrained = 40, 4
SEEDS = [seed] if quick else [seed, seed + 1, seed + 2]
if not quick:  # fail early, naming the stored seeds, for a seed they lack
    for name in ("modadd", "groktime"):
        man = checkpoints.load_manifest(ac.CHECKPOINT_SLUG, name)
        checkpoints.require_seeds(man, SEEDS)

# tiny models: one thread is as fast, and does not fight over shared cores
env = repro.setup(seed, threads=1)
plotting.use_style()
rec = claims.ClaimsRecord(
    "13_algorithmic_cores",
    dict(
        quick=quick,
        seed=seed,
        markov_steps=markov_steps,
        markov_test=markov_test,
        n_boot=n_boot,
        sva_steps=sva_steps,
        n_prompts=n_prompts,
        n_null=n_null,
        n_untrained=n_untrained,
    ),
)
print(env)

# %% [markdown]
# ## 1. ACE in five lines
#
# Take the activations `H` (N x D) of one layer and the **tail** `f` (everything after the layer, here ending in
# logits). Two Gramians describe the layer as the middle of a linear system:
#
# * controllability `Wc = Cov(H)`: the directions in which the front of the network actually moves `h`;
# * observability `Wo = E[J^T J]` with `J = df/dh`: the directions in which a change of `h` moves the output
#   (`W^T W` exactly for a linear head, autograd otherwise).
#
# Neither alone is right: a high-variance direction the tail ignores is a distractor, and a direction the tail is
# sensitive to but the data never uses is dead. Balanced truncation factors `Wc = Lc Lc^T`, `Wo = Lo Lo^T` and takes
# the SVD of `Lc^T Lo`; its singular values (Hankel singular values) rank directions by *both*. The core is
# `orth(Lc U[:, :r])`, with `r` the smallest rank holding a share `threshold = 0.999` of the energy
# `sum sigma_i^2`.
#
# We first test it where the answer is known: a 3-D core read by a linear tail, hidden among 5 distractor directions
# with **four times more variance**. Principal component analysis (the baseline) picks the distractors.

# %%
rng = repro.rng(seed, 1)
D_syn, N_syn = 24, 20000
M = np.linalg.qr(rng.normal(size=(D_syn, D_syn)))[0]
S_true, distract = M[:, :3], M[:, 3:8]
H_syn = (
    rng.normal(size=(N_syn, 3)) @ S_true.T
    + 2.0 * rng.normal(size=(N_syn, 5)) @ distract.T
    + 0.05 * rng.normal(size=(N_syn, D_syn))
)
# the tail reads only the planted core
W_syn = np.linalg.qr(rng.normal(size=(6, 3)))[0] @ S_true.T

# the key lines of ACE (helpers.algorithmic_cores.balanced_core does exactly this, with
# a tiny jitter)
Wc = np.cov(H_syn, rowvar=False)
Wo = W_syn.T @ W_syn
lam_c, U_c = np.linalg.eigh(Wc)
lam_o, U_o = np.linalg.eigh(Wo)
Lc = U_c * np.sqrt(np.clip(lam_c, 0, None) + 1e-8 * np.trace(Wc) / D_syn)
Lo = U_o * np.sqrt(np.clip(lam_o, 0, None) + 1e-8 * np.trace(Wo) / D_syn)
U, hsv, _ = np.linalg.svd(Lc.T @ Lo)
r_syn = ac.energy_rank(hsv, 0.999)
Q_syn = np.linalg.qr(Lc @ U[:, :r_syn])[0]

core_syn = ac.ace(H_syn, W=W_syn, threshold=0.999)
Q_pca = np.linalg.svd(H_syn - H_syn.mean(0), full_matrices=False)[2][:3].T
ang_ace = ac.principal_angles_deg(core_syn.Q, S_true)
ang_pca = ac.principal_angles_deg(Q_pca, S_true)
print(
    f"energy rank {r_syn} (helper: {core_syn.rank}); the inline and helper cores "
    "agree: "
    f"{ac.projector_overlap(Q_syn, core_syn.Q):.6f}"
)
print(
    "principal angles to the planted core, ACE:",
    np.round(ang_ace, 2),
    " PCA:",
    np.round(ang_pca, 1),
)
rec.check("ace_recovers_planted", float(ang_ace.max()), 5.0, op="<")
rec.check(
    "basis_orthonormal",
    float(np.abs(core_syn.basis.T @ core_syn.basis - np.eye(D_syn)).max()),
    1e-6,
    op="<=",
)

# %% [markdown]
# ## 2. Markov-chain transformers: a 3-D core with the chain's spectrum
#
# The chain has 4 states; from state `i` it stays with probability 3/4 and moves to `i+1 mod 4` otherwise. The best
# possible next-token accuracy is 3/4 (always predict "stay"). Each model is a one-layer transformer (`helpers.nn`,
# d=64, 4 heads, learned positions) trained on next-token prediction; three models are trained from the paper's
# seeds (`seed`, `seed + 100`, `seed + 200`) on the same 3000 training sequences and evaluated on 3000 fresh ones.

# %%
T_markov = ac.cyclic_transition(4, 0.75)
true_eigs = ac.transition_spectrum(T_markov)
train_seqs = torch.tensor(ac.markov_sequences(T_markov, 3000, 32, seed=seed))
test_seqs = torch.tensor(
    ac.markov_sequences(T_markov, markov_test, 32, seed=seed + 10_000)
)
print("true spectrum of T:", np.round(true_eigs, 3))


def markov_batch(step: int, n: int = 64) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed * 7919 + step)
    return train_seqs[torch.randint(0, len(train_seqs), (n,), generator=g)]


def lm_loss(model, seq):
    logits = model(seq[:, :-1])
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), seq[:, 1:].reshape(-1))


@torch.no_grad()
def next_token_acc(model, seqs) -> float:
    return (model(seqs[:, :-1]).argmax(-1) == seqs[:, 1:]).float().mean().item()


markov_cfg = nn.TransformerConfig(
    vocab_size=4, n_layer=1, n_head=4, d_model=64, d_ff=256, max_len=32, pos="learned"
)
markov_seeds = [seed + 100 * i for i in range(len(SEEDS))]
if quick:
    markov_seeds = [seed, seed + 100]  # two models: one pair to compare
markov, markov_hists = [], []
for s in markov_seeds:
    with repro.seeded(s):
        model = nn.Transformer(markov_cfg)
        hist_m = train.fit(
            model,
            lm_loss,
            markov_batch,
            markov_steps,
            lr=3e-3,
            warmup=20,
            seed=s,
            desc=f"Markov model, seed {s}",
        )
    markov.append(model)
    markov_hists.append(hist_m)
print(
    "test accuracy:",
    [round(next_token_acc(m, test_seqs), 4) for m in markov],
    "(Bayes optimum 0.75)",
)

# %% [markdown]
# ACE runs on the layer output at every position. The tail is the model's own `ln_f` + `head`, so the
# observability Gramian comes from autograd on 128 sampled rows. Then the causal tests: a forward hook on the block
# replaces its output by `Q Q^T h` (keep) or `h - Q Q^T h` (remove). As baselines, the same hooks with a random
# subspace and with the top principal components, both of the same rank.


# %%
def layer_states(model, seqs):
    _, r = model(seqs[:, :-1], record=True)
    return r["hidden"][1].reshape(-1, model.cfg.d_model).numpy()


def tail_of(model):
    return lambda h: model.head(model.ln_f(h))


@torch.no_grad()
def acc_with(model, Q, mode, seqs, mean=None):
    with ac.intervene(model.blocks[-1], Q, mode, mean):
        return next_token_acc(model, seqs)


# %% [markdown]
# Per model: its core, and the keep / remove accuracies with it, with a random subspace and with the top
# principal components of the same rank.

# %%
D_m = 64
rows, cores = [], []
for i, model in enumerate(markov):
    H = layer_states(model, test_seqs)
    core = ac.ace(H, tail=tail_of(model), threshold=0.999, samples=128, seed=seed)
    Q = core.Q
    Q_rand = np.linalg.qr(repro.rng(seed, 2, i).normal(size=(D_m, core.rank)))[0]
    Q_pc = np.linalg.svd(H - H.mean(0), full_matrices=False)[2][: core.rank].T
    rows.append(
        dict(
            model=i,
            rank=core.rank,
            base=next_token_acc(model, test_seqs),
            keep=acc_with(model, Q, "keep", test_seqs),
            remove=acc_with(model, Q, "remove", test_seqs),
            keep_random=acc_with(model, Q_rand, "keep", test_seqs),
            remove_random=acc_with(model, Q_rand, "remove", test_seqs),
            keep_pca=acc_with(model, Q_pc, "keep", test_seqs),
            remove_pca=acc_with(model, Q_pc, "remove", test_seqs),
        )
    )
    cores.append((core, H))

print(
    f"{'model':>5} {'rank':>4} {'base':>6} {'keep':>6} {'remove':>7} | "
    f"{'keep/rm random':>15} | {'keep/rm PCA':>12}"
)
for r in rows:
    print(
        f"{r['model']:>5} {r['rank']:>4} {r['base']:>6.3f} {r['keep']:>6.3f} "
        f"{r['remove']:>7.3f} | {r['keep_random']:>6.3f} / {r['remove_random']:.3f} | "
        f"{r['keep_pca']:.3f} / {r['remove_pca']:.3f}"
    )

# keep with the full basis must be the identity (the hook itself changes nothing)
with torch.no_grad():
    ref = markov[0](test_seqs[:50, :-1])
    with ac.intervene(markov[0].blocks[-1], np.eye(D_m), "keep"):
        full_diff = (markov[0](test_seqs[:50, :-1]) - ref).abs().max().item()
rec.check("keep_full_is_identity", full_diff, 1e-5, op="<=")
chance = float(
    np.bincount(test_seqs[:, 1:].reshape(-1).numpy(), minlength=4).max()
    / test_seqs[:, 1:].numel()
)
rec.check(
    "markov_rank",
    sum(r["rank"] != 3 for r in rows),
    0,
    op="==",
    note=f"models whose energy rank at 0.999 is not 3; ranks "
    f"{[r['rank'] for r in rows]}",
)
rec.check("markov_keep", max(abs(r["keep"] - r["base"]) for r in rows), 0.01, op="<=")
rec.check(
    "markov_remove",
    max(r["remove"] for r in rows),
    chance + 0.05,
    op="<=",
    note=f"chance = {chance:.3f}",
)

# %% [markdown]
# **Mechanism.** In core coordinates `z_t = Q^T h_t`, fit a linear map `z_{t+1} ~ A z_t` on centered data. If the
# core encodes the current state, `A` must carry the chain's transition spectrum without its unit eigenvalue
# (centering removes the stationary mode): `{0.75 + 0.25i, 0.75 - 0.25i, 0.5}`. The paper reports agreement within
# 1%, so we judge the **relative** error `|lambda_hat - lambda| / |lambda|` (eigenvalues matched one to one) at 1%,
# with a bootstrap over the test sequences for its sampling spread. The same fit on the top three principal
# components of the layer (PCA, the practitioner's first choice of subspace) is the baseline.
#
# Where the error comes from is measured, not guessed, with one ablation: each core state is replaced by the mean
# core state of its current token. That keeps exactly the part of the core that the current token determines (for
# this chain, the Bayes-optimal prediction needs nothing else) and removes what the earlier context adds. If the
# ablated fit is within 1% while the raw one is not, the residual error is the context-dependent part of the
# states, not the sampling of 3000 test sequences (whose spread the bootstrap gives).

# %%
fits = []
for i, (core, H) in enumerate(cores):
    Z = ((H - core.mean) @ core.Q).reshape(len(test_seqs), 31, -1)
    r = core.rank
    A, eig, r2 = ac.fit_linear_dynamics(
        Z[:, :-1].reshape(-1, r), Z[:, 1:].reshape(-1, r)
    )
    ok = len(eig) == len(true_eigs) - 1
    err = (
        float(ac.matched_relative_error(eig, true_eigs[1:]).max())
        if ok
        else float("inf")
    )
    boot = ac.bootstrap_dynamics_eigs(Z, n_boot=n_boot, seed=seed + i) if ok else None
    boot_err = (
        np.array([ac.matched_relative_error(b, true_eigs[1:]).max() for b in boot])
        if ok
        else np.array([np.inf])
    )
    Q_pc = np.linalg.svd(H - H.mean(0), full_matrices=False)[2][:3].T
    Zp = ((H - H.mean(0)) @ Q_pc).reshape(len(test_seqs), 31, -1)
    eig_pc = ac.fit_linear_dynamics(
        Zp[:, :-1].reshape(-1, 3), Zp[:, 1:].reshape(-1, 3)
    )[1]
    err_pc = float(ac.matched_relative_error(eig_pc, true_eigs[1:]).max())
    # ablation: each state replaced by the mean core state of its current token (the
    # part of the core that the current token alone determines; context removed)
    tok = test_seqs[:, :-1].numpy()
    Zt = np.stack([Z[tok == v].mean(0) for v in range(4)])[tok]
    eig_tok = ac.fit_linear_dynamics(
        Zt[:, :-1].reshape(-1, r), Zt[:, 1:].reshape(-1, r)
    )[1]
    err_tok = (
        float(ac.matched_relative_error(eig_tok, true_eigs[1:]).max())
        if len(eig_tok) == len(true_eigs) - 1
        else float("inf")
    )
    # share of the core's variance that the current token explains
    r2_tok = 1 - ((Z - Zt) ** 2).sum() / ((Z - Z.mean((0, 1))) ** 2).sum()
    fits.append(
        dict(
            eig=eig,
            r2=r2,
            err=err,
            lo=np.quantile(boot_err, 0.025),
            hi=np.quantile(boot_err, 0.975),
            err_pca=err_pc,
            eig_pca=eig_pc,
            err_tok=err_tok,
            r2_tok=float(r2_tok),
        )
    )

# %% [markdown]
# The fitted spectra per model, beside the PCA-3 baseline and the token-averaged core:

# %%
for i, f in enumerate(fits):
    print(
        f"model {i}: eigenvalues {np.round(np.sort_complex(f['eig']), 4)}  max "
        "relative error "
        f"{f['err']:.4f} (bootstrap 95% [{f['lo']:.4f}, {f['hi']:.4f}]); PCA-3 "
        f"baseline {f['err_pca']:.4f}; R^2 {f['r2']:.3f} (oracle "
        f"{ac.markov_oracle_r2(T_markov):.3f})"
        f"\n  token-averaged core: error {f['err_tok']:.4f}; the current token "
        f"explains {f['r2_tok']:.3f} of the core's variance"
    )

# %% [markdown]
# **Shared, but not aligned.** Principal angles and the projector overlap `||Q_i^T Q_j||_F^2 / r` compare the
# cores as subspaces of R^64; CCA compares what the core coordinates *compute* on the same inputs. Both need a null,
# fixed here before the numbers are seen:
#
# * **Overlap.** Two independent, uniformly random 3-D subspaces of R^64 overlap by `r/D = 0.047` on average, with
#   a spread we sample (20000 pairs). "Nearly orthogonal" is read as *no more aligned than random subspaces*:
#   `markov_subspaces_orthogonal` holds for a pair whose overlap is at most the 95th percentile of that null.
# * **CCA.** The layer output of an **untrained** model of the same architecture already carries the current token
#   (through its embedding), so its 3-D ACE core is strongly CCA-correlated with a trained core too. We draw
#   `n_untrained = 19` untrained models and compute each trained core's CCA with every one of them;
#   `markov_cores_share_code` holds for a pair of trained models when their CCA beats **all** 19 untrained
#   partners of both (a rank test: under the null that a trained partner is no better than an untrained one, this
#   happens with probability at most 1/20). The current token itself (one-hot) is printed as a reference: the
#   Bayes-optimal belief of this chain depends on nothing else.

# %%
untrained_cores = []
for k in tqdm(range(n_untrained), desc="untrained models (CCA null)"):
    with repro.seeded(10_000 + k):
        u = nn.Transformer(markov_cfg)
    Hu = layer_states(u, test_seqs)
    cu = ac.ace(Hu, tail=tail_of(u), threshold=0.999, samples=128, seed=seed)
    untrained_cores.append(Hu @ cu.basis[:, :3])
# per trained model: mean top-3 CCA with every untrained model's core
cca_untrained = [
    np.array([ac.cca(H @ c.Q, Zu)[:3].mean() for Zu in untrained_cores])
    for c, H in cores
]
onehot = F.one_hot(test_seqs[:, :-1].reshape(-1), 4).double().numpy()
cca_token = [float(ac.cca(H @ c.Q, onehot)[:3].mean()) for c, H in cores]

# overlap null: pairs of uniformly random 3-D subspaces of R^64
rng_ov = repro.rng(seed, 7)
overlap_null = np.array(
    [
        ac.projector_overlap(
            np.linalg.qr(rng_ov.normal(size=(D_m, 3)))[0],
            np.linalg.qr(rng_ov.normal(size=(D_m, 3)))[0],
        )
        for _ in range(20_000)
    ]
)
overlap_q95 = float(np.quantile(overlap_null, 0.95))
print(
    f"random 3-D subspaces of R^{D_m}: overlap mean {overlap_null.mean():.4f} "
    f"(r/D = {3 / D_m:.4f}), 95th percentile {overlap_q95:.4f}"
)

# %% [markdown]
# Each pair of trained models: the overlap of their cores against the random null, their principal angles,
# and their CCA against the best untrained partner of either.

# %%
pairs = [(i, j) for i in range(len(markov)) for j in range(i + 1, len(markov))]
overlaps, ccas, ccas_null, angles = [], [], [], []
for i, j in pairs:
    (ci, Hi), (cj, Hj) = cores[i], cores[j]
    overlaps.append(ac.projector_overlap(ci.Q, cj.Q))
    angles.append(ac.principal_angles_deg(ci.Q, cj.Q))
    ccas.append(float(ac.cca(Hi @ ci.Q, Hj @ cj.Q)[:3].mean()))
    # the strongest untrained partner of either model of the pair
    ccas_null.append(float(max(cca_untrained[i].max(), cca_untrained[j].max())))
    print(
        f"models {i},{j}: overlap {overlaps[-1]:.3f} (random: mean {3 / D_m:.3f}, "
        f"{np.mean(overlap_null <= overlaps[-1]):.0%} of random pairs lower), "
        f"principal angles {np.round(angles[-1], 1)} deg\n  mean top-3 CCA "
        f"{ccas[-1]:.4f}; untrained partners of {i} and {j}: "
        f"{cca_untrained[i].mean():.4f} +- {cca_untrained[i].std():.4f} and "
        f"{cca_untrained[j].mean():.4f} +- {cca_untrained[j].std():.4f}, max "
        f"{ccas_null[-1]:.4f}; current token: {cca_token[i]:.4f}, {cca_token[j]:.4f}"
    )

# %% [markdown]
# The figure: the fitted core dynamics against the chain's spectrum, and per pair the overlap and the CCA
# against their nulls.

# %%
fig, ax = plt.subplots(1, 2, figsize=(9, 3.6))
t = np.linspace(0, 2 * np.pi, 200)
ax[0].plot(np.cos(t), np.sin(t), color="0.8", lw=1)
ax[0].scatter(
    true_eigs.real,
    true_eigs.imag,
    s=160,
    facecolors="none",
    edgecolors="k",
    label="spectrum of T",
)
for i, f in enumerate(fits):
    ax[0].scatter(
        f["eig"].real, f["eig"].imag, marker="x", s=50, label=f"model {i} core"
    )
ax[0].scatter(
    fits[0]["eig_pca"].real,
    fits[0]["eig_pca"].imag,
    marker="+",
    s=50,
    color="0.4",
    label="model 0, PCA-3",
)
ax[0].set(
    xlabel="Re", ylabel="Im", aspect="equal", title="fitted core dynamics vs chain"
)
ax[0].legend(fontsize=7)
labels = [f"{i},{j}" for i, j in pairs]
x = np.arange(len(pairs))
ax[1].bar(x - 0.27, overlaps, 0.27, label="projector overlap")
ax[1].bar(x, ccas, 0.27, label="mean top-3 CCA")
ax[1].bar(x + 0.27, ccas_null, 0.27, label="CCA, best untrained partner")
ax[1].axhline(overlap_q95, color="k", ls="--", lw=1, label="random overlap, 95th pct")
ax[1].set(
    xticks=x,
    xticklabels=labels,
    xlabel="model pair",
    ylim=(0, 1.05),
    title="different subspaces, same code",
)
ax[1].legend(fontsize=7)
plt.tight_layout()
plt.show()

# %% [markdown]
# ## 3. Modular addition: a compact cyclic core at grokking, then inflation
#
# A two-layer transformer (d=128, 4 heads) reads `[a, b]` and predicts `(a + b) mod 53` at the last position. Half
# of the 53^2 pairs are the training set (full batch: one step is one epoch); AdamW (lr 1e-3, weight decay 1)
# first memorises, then, later, generalises (grokking). This is the paper's configuration; 3000 epochs for 3 seeds
# do not fit a 5-minute run, so `data/13_algorithmic_cores/make_modadd.py` trains them once, logs train and test
# accuracy every 10 steps and analyses nine checkpoints per seed (memorisation, a pre-grokking one taken while test
# accuracy is still low, the grokking step, five evenly spaced after it, the end at step 3000). Quick mode trains a
# tiny model live with the same functions.
#
# The analysis of a checkpoint (`ac.modadd_analysis`): ACE at the layer-2 output, last position, energy threshold
# `0.99`; the **causal scans** that raise the rank until removing the core drops accuracy to `2/p` (necessity) and
# keeping it preserves accuracy within 1e-3 (sufficiency); then the class means of the core coordinates,
# `reps[c]`, and the least-squares **shift operator** `reps[c] -> reps[c+1 mod p]`. A cyclic algorithm puts its
# eigenvalues on the unit circle at the Fourier frequencies.
#
# **Nulls for the ring fraction.** A ring fraction means little on its own: with `r` class means in `r >= p - 1`
# dimensions the least-squares shift is exact for *any* order of the classes, so all its eigenvalues sit on the
# circle. The checkpoint script also fits random Gaussian class means (the `null` column below), but that null is 0
# at almost every checkpoint, so it cannot tell a cyclic core from a merely rank-rich one. Two nulls keep what
# matters fixed and break one thing each, drawn `n_null` times per checkpoint:
#
# * **class order**: the same class means in the same core, with the answers relabelled by a random permutation
#   (the points stay, the cycle `c -> c + 1` goes): is the ring due to the cyclic order?
# * **random subspace**: the same class means of the layer read in a random orthonormal subspace of the same rank
#   `r` (in place of the ACE core): is the ring specific to the core?
#
# The claim `modadd_core_cyclic` holds at a seed when the ring fraction at grokking is above the 95th percentile of
# **both** nulls (a one-sided test at 5% against each). The nulls need the layer's class means, which the script
# stores (float32) for every seed and analysed checkpoint, beside the weights of four checkpoints of seed 0; the
# check `stored_states_reproduce` recomputes seed 0's from those weights. Quick mode computes them live.

# %%
mod_cfg = ac.checkpoint_config("modadd")
if quick:
    mod_cfg.update(
        p=23, d=32, lr=3e-3, steps=300, seeds=[seed], samples=32, null_draws=5
    )
p = mod_cfg["p"]
train_rows, test_rows = (
    torch.tensor(a)
    for a in ac.modadd_split(p, mod_cfg["train_frac"], seed=mod_cfg["split_seed"])
)


def modadd_from_state(state) -> torch.nn.Module:
    m = ac.modadd_model(p, mod_cfg["d"], mod_cfg["n_head"])
    m.load_state_dict({k: v.float() for k, v in state.items()})
    return m.eval()


def analyse(m, s) -> dict:
    a = ac.modadd_analysis(
        m,
        test_rows,
        p,
        threshold=mod_cfg["threshold"],
        samples=mod_cfg["samples"],
        seed=s,
        null_draws=mod_cfg["null_draws"],
        r_max=mod_cfg["r_max"],
    )
    a["eigs_re"], a["eigs_im"] = a["eigs"].real.tolist(), a["eigs"].imag.tolist()
    return a


def cyclic_states(m, s, r_used) -> tuple[np.ndarray, np.ndarray]:
    """Class means of the layer-2 states (p x d) and the same in the core (p x r)."""
    return ac.modadd_class_states(
        m,
        test_rows,
        p,
        r_used,
        threshold=mod_cfg["threshold"],
        samples=mod_cfg["samples"],
        seed=s,
    )


# %% [markdown]
# In quick mode a tiny run is trained here, live, with the functions the checkpoint script uses.

# %%
if quick:
    # a tiny run, trained live with the functions the checkpoint script uses
    logs, analysis, states, sweep_states = {}, {}, {}, {}
    for s in mod_cfg["seeds"]:
        with repro.seeded(s):
            m = ac.modadd_model(p, mod_cfg["d"], mod_cfg["n_head"])
            log = ac.train_modadd(
                m,
                train_rows,
                test_rows,
                mod_cfg["steps"],
                lr=mod_cfg["lr"],
                wd=mod_cfg["wd"],
                eval_every=mod_cfg["eval_every"],
                snapshot_every=mod_cfg["eval_every"],
            )
        named = ac.choose_checkpoints(
            log,
            mod_cfg["n_analysed"],
            mod_cfg["mem_acc"],
            mod_cfg["gen_acc"],
            mod_cfg["eval_every"],
        )
        logs[s] = log
        analysis[str(s)], states[str(s)] = {}, {}
        for k, st in sorted(named.items(), key=lambda kv: kv[1]):
            m_k = modadd_from_state(log["snapshots"][st])
            analysis[str(s)][k] = dict(step=st, **analyse(m_k, s))
            states[str(s)][k] = cyclic_states(m_k, s, analysis[str(s)][k]["r_used"])
            if s == seed:
                sweep_states[k] = log["snapshots"][st]
    sweep_seed = seed
    curves = {
        s: (logs[s]["step"], logs[s]["test_acc"], logs[s]["train_acc"]) for s in logs
    }

# %% [markdown]
# At default parameters the script's checkpoint is loaded, and the analysis is re-run live on the stored
# checkpoints of one seed: it must reproduce the stored numbers.

# %%
if not quick:
    mod_cfg = scripts.with_seeds(mod_cfg, SEEDS)  # seed 0: the committed config
    ckpt = checkpoints.load(ac.CHECKPOINT_SLUG, "modadd", config=mod_cfg)
    man = ckpt.manifest
    analysis = man["extra"]["analysis"]
    h = man["history"]
    curves = {
        s: (
            h[f"test_acc/{s}"]["step"],
            h[f"test_acc/{s}"]["value"],
            h[f"train_acc/{s}"]["value"],
        )
        for s in mod_cfg["seeds"]
    }
    # re-run the analysis live on the stored checkpoints of one seed:
    # it must reproduce the stored numbers
    s0 = mod_cfg["stored_seed"]
    stored_names = sorted(
        {k.split(".")[0] for k in ckpt.tensors if not k.startswith("states.")}
    )
    live = {}
    for name in tqdm(stored_names, desc="ACE on stored checkpoints"):
        live[name] = analyse(modadd_from_state(ckpt.state_dict(f"{name}.")), s0)
    gaps = [
        abs(live[n][k] - analysis[str(s0)][n][k])
        for n in stored_names
        for k in ("base", "r_energy", "r_nec", "r_suf", "ring", "modes")
    ]
    rec.check(
        "modadd_analysis_reproduces",
        max(gaps),
        1e-6,
        op="<=",
        note=f"live ACE on the stored checkpoints {stored_names} (seed {s0}) vs the "
        "script's numbers",
    )
    print("stored checkpoints re-analysed live:", stored_names)
    sweep_states = {n: ckpt.state_dict(f"{n}.") for n in stored_names}
    sweep_seed = s0

# %% [markdown]
# The class means that the ring-fraction fit reads are stored for every seed and checkpoint; for the stored seed
# they must match what its stored weights give.

# %%
if not quick:
    # the cyclic fit's inputs for every seed and analysed checkpoint, stored by the
    # script; for seed s0 they must match what the stored weights give
    states = {
        str(s): {
            n: tuple(
                ckpt.tensors[f"states.{s}.{n}.{k}"].numpy() for k in ("means", "reps")
            )
            for n in analysis[str(s)]
        }
        for s in mod_cfg["seeds"]
    }
    live_states = {
        n: cyclic_states(
            modadd_from_state(ckpt.state_dict(f"{n}.")), s0, live[n]["r_used"]
        )
        for n in stored_names
    }
    rec.check(
        "stored_states_reproduce",
        max(
            float(np.abs(a - b).max())
            for n in stored_names
            for a, b in zip(live_states[n], states[str(s0)][n])
        ),
        1e-4,
        op="<=",
        note="class means (layer and core) from the stored weights vs the stored "
        f"states, seed {s0}",
    )


# %% [markdown]
# The ring fraction of the shift operator and its two nulls (class order, random subspace), per seed and
# checkpoint.

# %%
def ring_of(reps) -> float:
    return ac.ring_fraction(ac.shift_operator_eigs(reps), p)


def ring_nulls(means, reps, draws, seed_) -> dict:
    """Ring fraction of the core and its two nulls (class order, random subspace)."""
    rng_ = repro.rng(seed_, 6)
    means, reps = means.astype(np.float64), reps.astype(np.float64)
    order = [ring_of(reps[rng_.permutation(p)]) for _ in range(draws)]
    shape = (means.shape[1], reps.shape[1])
    sub = [
        ring_of(means @ np.linalg.qr(rng_.normal(size=shape))[0]) for _ in range(draws)
    ]
    return dict(
        ring=ring_of(reps),
        order_mean=float(np.mean(order)),
        order_q95=float(np.quantile(order, 0.95)),
        sub_mean=float(np.mean(sub)),
        sub_q95=float(np.quantile(sub, 0.95)),
    )


nulls = {
    s: {n: ring_nulls(*st_s[n], n_null, int(s)) for n in st_s}
    for s, st_s in tqdm(states.items(), desc="ring-fraction nulls")
}
# the fit on the recomputed inputs gives the analysis' ring fraction
rec.check(
    "ring_from_states",
    max(
        abs(nl["ring"] - analysis[s][n]["ring"])
        for s in nulls
        for n, nl in nulls[s].items()
    ),
    1e-9,
    op="<=",
)
# %% [markdown]
# The table of every analysed checkpoint, with the 95th percentiles of the nulls:

# %%
for s, an in analysis.items():
    print(f"seed {s}:")
    for name, a in an.items():
        nl = nulls.get(s, {}).get(name)
        extra = (
            ""
            if nl is None
            else f" | 95th pct of the nulls: class order {nl['order_q95']:.2f}, "
            f"random subspace {nl['sub_q95']:.2f}"
        )
        print(
            f"  {name:>13} step {a['step']:>5}: test {a['base']:.3f}  r_energy "
            f"{a['r_energy']:>3}  r_nec {a['r_nec']:>3}  r_suf {a['r_suf']:>3}  keep "
            f"{a['keep']:.3f}  remove {a['remove']:.3f}  "
            f"modes {a['modes']}/{p // 2 + 1}"
            f"\n{'':>17}ring {a['ring']:.2f} (Gaussian-means null "
            f"{a['ring_null']:.2f}){extra}"
        )

# %% [markdown]
# The figure shows, per seed, test accuracy and the ranks of the analysed checkpoints; the right panel the ring
# fraction of the shift operator against the 95th percentile of the stronger of its two nulls at the same rank.

# %%
fig, ax = plt.subplots(1, 2, figsize=(10.5, 3.8))
ax2 = ax[0].twinx()
for k, (s, (st, te_acc, tr_acc)) in enumerate(curves.items()):
    an = analysis[str(s)]
    c = f"C{k}"
    ax[0].plot(st, te_acc, color=c, lw=1, label=f"test acc, seed {s}")
    ax[0].plot(st, tr_acc, color=c, lw=1, ls=":")
    xs = [a["step"] for a in an.values()]
    ax2.plot(
        xs, [a["r_energy"] for a in an.values()], color=c, marker="o", ms=3, ls="--"
    )
    ax[1].plot(
        xs,
        [a["ring"] for a in an.values()],
        color=c,
        marker="o",
        ms=3,
        label=f"ring fraction, seed {s}",
    )
    nl_s = nulls.get(str(s), {})
    ax[1].plot(
        [an[n]["step"] for n in nl_s],
        [max(v["order_q95"], v["sub_q95"]) for v in nl_s.values()],
        color=c,
        ls=":",
        marker="x",
        lw=1,
    )
ax[0].set(
    xlabel="step",
    ylabel="accuracy (dotted: train)",
    ylim=(0, 1.05),
    title="accuracy (lines) and energy rank (dashed)",
)
ax2.set_ylabel("core rank (energy 0.99)")
ax2.grid(False)
ax[0].legend(fontsize=7, loc="center right")
ax[1].set(
    xlabel="step",
    ylim=(0, 1.05),
    title="eigenvalues on the unit circle (x: stronger null, 95th pct)",
)
ax[1].legend(fontsize=7)
plt.tight_layout()
plt.show()

# %% [markdown]
# The slider walks through the analysed checkpoints of the first seed: the eigenvalues of the fitted shift operator
# against the unit circle, and where the checkpoint sits on the test curve (precomputed frames; works in the static
# page).

# %%
s_show = str(next(iter(analysis)))
frames = list(analysis[s_show].items())
st_show, te_show, _ = curves[int(s_show)]


def draw_eigs(fig, i):
    name, a = frames[i]
    axs = fig.subplots(1, 2)
    axs[0].plot(np.cos(t), np.sin(t), color="0.8", lw=1)
    axs[0].scatter(a["eigs_re"], a["eigs_im"], s=14)
    axs[0].set(
        xlim=(-1.4, 1.4),
        ylim=(-1.4, 1.4),
        aspect="equal",
        xlabel="Re",
        ylabel="Im",
        title=f"{name}: rank {a['r_energy']}, ring {a['ring']:.2f}",
    )
    axs[1].plot(st_show, te_show, color="k")
    axs[1].axvline(a["step"], color="C3")
    axs[1].set(xlabel="step", ylabel="test accuracy", ylim=(0, 1.05))


plotting.static_slider(
    range(len(frames)), draw_eigs, figsize=(8.5, 3.6), label="checkpoint", fmt="{}"
)

# %% [markdown]
# **Does the rank trend depend on the energy threshold?** The inflation claim compares energy ranks at one
# threshold (`0.99`). A sensitivity sweep recomputes the energy rank at `0.9`, `0.99` and `0.999` on the checkpoints whose
# weights we hold (the first seed's; the Gramians do not depend on the threshold, so one ACE per checkpoint), and
# the ratio at the last checkpoint that still generalises (test accuracy `>= 0.95`) guards against an end
# checkpoint that falls inside a loss spike.

# %%
sweep_thr = (0.9, 0.99, 0.999)
rank_sweep = {}
for name, st in sweep_states.items():
    m_sw = modadd_from_state(st)
    with torch.no_grad():
        _, r_sw = m_sw(test_rows[:, :2], record=True)
    c_sw = ac.ace(
        r_sw["hidden"][-1][:, -1].numpy(),
        tail=lambda h, m_=m_sw: m_.head(m_.ln_f(h)),
        threshold=mod_cfg["threshold"],
        samples=mod_cfg["samples"],
        seed=sweep_seed,
    )
    rank_sweep[name] = [ac.energy_rank(c_sw.hsv, t_) for t_ in sweep_thr]
for name in sorted(rank_sweep, key=lambda n: analysis[str(sweep_seed)][n]["step"]):
    print(
        f"seed {sweep_seed} {name:>13} step "
        f"{analysis[str(sweep_seed)][name]['step']:>5}: energy rank at {sweep_thr}: "
        f"{rank_sweep[name]}"
    )
sweep_ratio = (
    [e / max(g, 1) for e, g in zip(rank_sweep["end"], rank_sweep["grokking"])]
    if {"end", "grokking"} <= set(rank_sweep)
    else None
)


def last_generalising(s):
    """The last analysed checkpoint of seed s with test accuracy >= gen_acc."""
    ok = [
        (a["step"], n)
        for n, a in analysis[s].items()
        if a["base"] >= mod_cfg["gen_acc"] and n != "grokking"
    ]
    return max(ok)[1] if ok else None


print(
    f"end / grokking energy-rank ratio per threshold (seed {sweep_seed}):", sweep_ratio
)

# %% [markdown]
# **Compact, then inflated?** The paper's picture is a compact core at grokking (~15-D at p = 53) that inflates
# under continued weight decay (~60-D, the mode count approaching 27). The summary below reads the energy rank of
# every analysed checkpoint per seed: at memorisation, before grokking, at grokking, the largest after grokking
# (so that a transient inflation between grokking and the end is not missed) and at the end, with the Fourier mode
# count at grokking and at the end.

# %%
for s, an in analysis.items():
    if "grokking" not in an:
        print(f"seed {s}: never grokked")
        continue
    t_g = an["grokking"]["step"]
    after = {n: a for n, a in an.items() if a["step"] > t_g}
    peak = max(after, key=lambda n: after[n]["r_energy"]) if after else None
    r_at = {n: a["r_energy"] for n, a in an.items()}
    print(
        f"seed {s}: energy rank memorised {r_at.get('memorised')}, pre-grokking "
        f"{r_at.get('pre_grokking')}, grokking {r_at['grokking']}, largest after "
        + (
            "-"
            if peak is None
            else f"{after[peak]['r_energy']} ({peak}, step {after[peak]['step']})"
        )
        + f", end {an['end']['r_energy']} (step {an['end']['step']}, test "
        f"{an['end']['base']:.3f}); modes {an['grokking']['modes']} -> "
        f"{an['end']['modes']} of {p // 2 + 1}"
    )

# %% tags=["remove-input"]
def _span(v):
    v = [x for x in v if x is not None]
    return "-" if not v else (f"{min(v)}" if min(v) == max(v) else f"{min(v)}-{max(v)}")


def _listed(v):
    return ", ".join(str(x) for x in v)


grokked = {s: an for s, an in analysis.items() if "grokking" in an}
if not grokked:
    reading = (
        "**Reading it.** No seed grokked in this run, so there is no core at grokking "
        "to compare the end with."
    )
else:
    end_acc = [an["end"]["base"] for an in grokked.values()]
    n_ok = sum(a >= mod_cfg["gen_acc"] for a in end_acc)
    r_g = [an["grokking"]["r_energy"] for an in grokked.values()]
    r_e = [an["end"]["r_energy"] for an in grokked.values()]
    r_m = [an.get("memorised", {}).get("r_energy") for an in grokked.values()]
    peak = [
        max(
            (a["r_energy"] for a in an.values() if a["step"] > an["grokking"]["step"]),
            default=an["grokking"]["r_energy"],
        )
        / max(an["grokking"]["r_energy"], 1)
        for an in grokked.values()
    ]
    n_down = sum(e < g for e, g in zip(r_e, r_g))
    n_up = sum(e > g for e, g in zip(r_e, r_g))
    trend = (
        "*shrinks* it instead of inflating it: the reverse of the paper's picture, a "
        "broad core at grokking that continued regularisation compresses (the classic "
        '"cleanup" phase of grokking)'
        if n_down == len(r_g)
        else "inflates it, as in the paper"
        if n_up == len(r_g)
        else f"shrinks it at {n_down} and inflates it at {n_up} of {len(r_g)} seeds, "
        "so no single direction holds"
    )
    modes_g = _listed(an["grokking"]["modes"] for an in grokked.values())
    modes_e = _listed(an["end"]["modes"] for an in grokked.values())
    acc_e = _listed(f"{a:.3f}" for a in end_acc)
    reading = (
        f"**Reading it.** {n_ok} of {len(grokked)} grokked seeds end generalised "
        f"(test accuracy {acc_e} at the end). The core's energy rank is "
        f"{_span(r_m)} of {p - 1} at memorisation and {_span(r_g)} at grokking; "
        f"training on to the end ({_listed(r_e)} at the end, with the Fourier mode "
        f"count going from {modes_g} to {modes_e}) {trend}. The largest rank after "
        f"grokking is {_listed(f'{x:.2f}x' for x in peak)} grokking's, which "
        + (
            "says that no transient inflation is missed between checkpoints either."
            if max(peak) <= 1.25
            else "shows a transient inflation between grokking and the end."
        )
    )
display(Markdown(reading))

# %% [markdown]
# ## 4. The grokking-time law: weight decay and redundancy
#
# The paper models the delay between memorisation and generalisation as a margin that weight decay pushes towards
# generalisation at a rate set by `wd` and by how many functionally equivalent Fourier **modes** share the
# computation: `tau ~ 1/wd` and `tau ~ 1/modes`. We measure `tau = t_gen - t_mem` (generalisation step minus
# memorisation step, both at 10-step resolution) on two axes, 3 seeds each
# (`data/13_algorithmic_cores/make_groktime.py`, p = 31, lr 3e-3, a budget of 2000 steps):
#
# * weight decay `0.25, 0.5, 1, 2` at width 32: the slope of log tau against log wd (the paper: -1.02); <!-- paper -->
# * width 16, 32, 48, 64 at weight decay 1, the **redundancy axis**: at the memorisation step, ACE and the shift
#   operator count the Fourier modes already present; the law predicts that more modes give a shorter tau
#   (Spearman correlation of tau with the mode count, per seed).
#
# A run that never generalises within the budget is kept, with tau counted at the budget (a lower bound), and
# named in the table. Whether that biases the slope is checked, not assumed: in a least-squares slope, raising a
# point that lies left of the mean log wd can only lower the slope, so when every censored run is at a small wd the
# budget-counted slope is an upper bound on the true one (the bias is against the claim). The slope over the runs
# that generalised is printed beside it and recorded in the claim's note. One run is re-trained live to check the
# cached numbers. On the machine that built the cache it reproduces them exactly; on another CPU the rounding of
# floating-point kernels differs, full-batch training amplifies it, and the steps move (when we met this, the
# script's own function, run on the new machine, gave the live numbers, not the cached ones), so the check asks
# for the same outcome (generalised within the budget or not) and prints both sets of numbers.

# %%
gt_cfg = ac.checkpoint_config("groktime")
if quick:
    gt_cfg.update(
        p=23,
        max_steps=150,
        seeds=[seed],
        wd_axis=dict(d=16, wds=[1.0, 2.0]),
        width_axis=dict(wd=1.0, ds=[16, 24]),
        samples=16,
    )


# %% [markdown]
# One grokking-time run, the checkpoint script's procedure: train to generalisation, with ACE at the
# memorisation step.

# %%
def grok_run(s, d, wd) -> dict:
    """Train one run to generalisation (the checkpoint script's procedure)."""
    sp = ac.modadd_split(gt_cfg["p"], gt_cfg["train_frac"], seed=gt_cfg["split_seed"])
    tr_g, te_g = (torch.tensor(a) for a in sp)
    found = {}
    with repro.seeded(s):
        m = ac.modadd_model(gt_cfg["p"], d, gt_cfg["n_head"])

        def on_eval(step, row):
            if "mem" not in found and row["train_acc"] >= gt_cfg["mem_acc"]:
                found["mem"] = ac.modadd_analysis(
                    m,
                    te_g,
                    gt_cfg["p"],
                    threshold=gt_cfg["threshold"],
                    samples=gt_cfg["samples"],
                    seed=s,
                    refine=False,
                )
                m.train()

        log = ac.train_modadd(
            m,
            tr_g,
            te_g,
            gt_cfg["max_steps"],
            lr=gt_cfg["lr"],
            wd=wd,
            betas=gt_cfg["betas"],
            eval_every=gt_cfg["eval_every"],
            stop_at=gt_cfg["gen_acc"],
            on_eval=on_eval,
        )
    t_mem, t_gen = ac.memorise_generalise(
        log["step"],
        log["train_acc"],
        log["test_acc"],
        gt_cfg["mem_acc"],
        gt_cfg["gen_acc"],
    )
    mem = found.get("mem", {})
    return dict(
        seed=s,
        d=d,
        wd=wd,
        t_mem=t_mem,
        t_gen=t_gen,
        tau=None if t_mem is None or t_gen is None else t_gen - t_mem,
        modes_mem=mem.get("modes"),
        rank_mem=mem.get("r_energy"),
        last_step=log["step"][-1],
    )


# %% [markdown]
# In quick mode every run of the grid is trained live.

# %%
if quick:
    grid = sorted(
        {
            (s, gt_cfg["wd_axis"]["d"], float(w))
            for s in gt_cfg["seeds"]
            for w in gt_cfg["wd_axis"]["wds"]
        }
        | {
            (s, int(d), float(gt_cfg["width_axis"]["wd"]))
            for s in gt_cfg["seeds"]
            for d in gt_cfg["width_axis"]["ds"]
        }
    )
    runs = [grok_run(*r) for r in tqdm(grid, desc="grokking-time runs")]

# %% [markdown]
# At default parameters the runs come from the checkpoint, and the cheapest run of this seed that generalised is
# re-trained live as a check.

# %%
if not quick:
    gt_cfg = scripts.with_seeds(gt_cfg, SEEDS)  # seed 0: the committed config
    gt = checkpoints.load(ac.CHECKPOINT_SLUG, "groktime", config=gt_cfg)
    runs = gt.manifest["extra"]["runs"]
    # re-train the cheapest run of this seed that generalised: it must reproduce the
    # cached row (a run that never generalises would only compare two non-events)
    cheap = min(
        (r for r in runs if r["seed"] == seed and r["t_gen"] is not None),
        key=lambda r: r["last_step"] * r["d"] ** 2,
    )
    again = grok_run(cheap["seed"], cheap["d"], cheap["wd"])
    # Bit-exact agreement holds on the machine that built the cache only: float
    # rounding differs between CPUs and full-batch AdamW amplifies it (the script's
    # own function, run on another CPU, gives the live numbers, not the cached).
    # What must hold anywhere: it generalises, at a tau within 25% of the cached one
    # (tolerance fixed before the first such re-run).
    tau_gap = (
        1.0
        if again["t_gen"] is None
        else abs(again["t_gen"] - cheap["t_gen"]) / cheap["t_gen"]
    )
    rec.check(
        "groktime_rerun_matches",
        tau_gap,
        0.25,
        op="<=",
        note=f"run seed {cheap['seed']}, d {cheap['d']}, wd {cheap['wd']}: live "
        f"{again} vs cached; exact fields that differ: "
        + str(
            [
                k
                for k in ("t_mem", "t_gen", "modes_mem", "rank_mem")
                if again[k] != cheap[k]
            ]
        ),
    )
    print(
        "re-trained live:",
        {k: again[k] for k in ("d", "wd", "t_mem", "t_gen", "modes_mem")},
        " cached:",
        {k: cheap[k] for k in ("d", "wd", "t_mem", "t_gen", "modes_mem")},
    )


# %% [markdown]
# The table of runs; a run that never generalised enters at the budget.

# %%
def tau_or_budget(r):
    return r["tau"] if r["tau"] is not None else gt_cfg["max_steps"] - (r["t_mem"] or 0)


print(
    f"{'seed':>4} {'d':>3} {'wd':>5} {'t_mem':>6} {'t_gen':>6} {'tau':>6} "
    f"{'modes@mem':>9} {'rank@mem':>8}"
)
for r in sorted(runs, key=lambda r: (r["seed"], r["d"], r["wd"])):
    print(
        f"{r['seed']:>4} {r['d']:>3} {r['wd']:>5} {str(r['t_mem']):>6} "
        f"{str(r['t_gen']):>6} "
        f"{str(r['tau']) if r['tau'] is not None else 'none':>6} "
        f"{str(r['modes_mem']):>9} "
        f"{str(r['rank_mem']):>8}"
    )
not_grokked = [(r["seed"], r["d"], r["wd"]) for r in runs if r["tau"] is None]
print("did not generalise within the budget (seed, d, wd):", not_grokked or "none")

# %% [markdown]
# Per seed: the log-log slope of tau against weight decay, and the rank correlation of tau with the mode
# count at memorisation.

# %%
wd_d, width_wd = gt_cfg["wd_axis"]["d"], gt_cfg["width_axis"]["wd"]
slopes, rhos, mode_slopes = [], [], []
for s in gt_cfg["seeds"]:
    wd_runs = sorted(
        (r for r in runs if r["seed"] == s and r["d"] == wd_d), key=lambda r: r["wd"]
    )
    w_, t_ = [r["wd"] for r in wd_runs], [max(tau_or_budget(r), 1) for r in wd_runs]
    n_grokked = sum(r["tau"] is not None for r in wd_runs)
    # a slope needs at least two runs that generalised;
    # censored runs enter at the budget
    slopes.append(ac.loglog_slope(w_, t_) if n_grokked >= 2 else float("nan"))
    width_runs = [
        r
        for r in runs
        if r["seed"] == s and r["wd"] == width_wd and r["modes_mem"] is not None
    ]
    m_, tw_ = (
        [r["modes_mem"] for r in width_runs],
        [max(tau_or_budget(r), 1) for r in width_runs],
    )
    rhos.append(ac.spearman(m_, tw_) if len(m_) >= 3 else float("nan"))
    x_ = np.maximum(m_, 1)  # zero modes enter the log-log fit as one
    mode_slopes.append(
        ac.loglog_slope(x_, tw_) if len(set(x_.tolist())) >= 2 else float("nan")
    )
print("log-log slope of tau vs weight decay, per seed:", np.round(slopes, 2))
# %% [markdown]
# Censoring and the redundancy diagnosis: the slope over generalised runs only, and whether tau falls with
# width itself.

# %%
# censoring: a run counted at the budget has a true tau at least that large.
# In a least-squares slope, raising a point left of the mean log wd lowers the
# slope, so when every censored run sits left of the mean the budget-counted
# slope is an upper bound on the uncensored one (conservative for `< 0`). The
# slope over generalised runs alone is printed beside it.
slopes_gen, censor_conservative = [], []
for s in gt_cfg["seeds"]:
    wd_runs = [r for r in runs if r["seed"] == s and r["d"] == wd_d]
    done = [r for r in wd_runs if r["tau"] is not None]
    slopes_gen.append(
        ac.loglog_slope([r["wd"] for r in done], [r["tau"] for r in done])
        if len(done) >= 2
        else float("nan")
    )
    mean_lw = np.mean(np.log([r["wd"] for r in wd_runs]))
    censor_conservative.append(
        all(np.log(r["wd"]) < mean_lw for r in wd_runs if r["tau"] is None)
    )
print("slope over generalised runs only, per seed:", np.round(slopes_gen, 2))
print(
    "censored runs all left of mean log wd (bound conservative):", censor_conservative
)
# diagnosis of the redundancy test: does tau fall with width itself (the redundancy
# we set), and how much range does the mode count at memorisation have?
rho_width, modes_range = [], []
for s in gt_cfg["seeds"]:
    w_runs = [r for r in runs if r["seed"] == s and r["wd"] == width_wd]
    rho_width.append(
        ac.spearman(
            [r["d"] for r in w_runs], [max(tau_or_budget(r), 1) for r in w_runs]
        )
        if len(w_runs) >= 3
        else float("nan")
    )
    modes_range.append(
        sorted({r["modes_mem"] for r in w_runs if r["modes_mem"] is not None})
    )
print("Spearman(tau, modes at memorisation) over widths, per seed:", np.round(rhos, 2))
print("Spearman(tau, width), per seed:", np.round(rho_width, 2))
print("mode counts at memorisation seen on the width axis, per seed:", modes_range)
print("log-log slope of tau vs modes, per seed:", np.round(mode_slopes, 2))

# %% [markdown]
# The figure: tau against weight decay and against the mode count at memorisation, per seed.

# %%
fig, ax = plt.subplots(1, 2, figsize=(9.5, 3.6))
for k, s in enumerate(gt_cfg["seeds"]):
    wd_runs = sorted(
        (r for r in runs if r["seed"] == s and r["d"] == wd_d), key=lambda r: r["wd"]
    )
    ax[0].loglog(
        [r["wd"] for r in wd_runs],
        [max(tau_or_budget(r), 1) for r in wd_runs],
        "o-",
        color=f"C{k}",
        label=f"seed {s} (slope {slopes[k]:.2f})",
    )
    width_runs = [r for r in runs if r["seed"] == s and r["wd"] == width_wd]
    for r in width_runs:
        ax[1].scatter(
            max(r["modes_mem"] or 0, 0.5),
            max(tau_or_budget(r), 1),
            color=f"C{k}",
            marker="o" if r["tau"] is not None else "^",
            s=12 + r["d"],
        )
ax[0].set(
    xlabel="weight decay",
    ylabel="tau = t_gen - t_mem (steps)",
    title="tau vs weight decay",
)
ax[0].legend(fontsize=7)
ax[1].set(
    xscale="log",
    yscale="log",
    xlabel="Fourier modes at memorisation",
    ylabel="tau (steps)",
    title="tau vs redundancy (marker size: width)",
)
plt.tight_layout()
plt.show()

# %% [markdown]
# ## 5. Subject-verb agreement: one axis per slot, necessary and flippable
#
# The paper finds, in six pretrained LMs, a rank-1 core for grammatical number that, when reflected, makes the
# model write the wrong number for the rest of the generation. Without pretrained weights we build the setting:
# a grammar `the N (PREP the N')* V ADV . PRON BE ADJ .` in which the verb, the pronoun (`it`/`they`) and `is`/`are`
# agree with the subject `N`, while attractor nouns `N'` have the opposite number half of the time. Per seed, two
# LMs of different size (2 layers, d=64; 3 layers, d=96) are trained on it.

# %%
nouns = ["cat", "dog", "bird", "boy", "girl", "tree"]
verbs = ["run", "sleep", "eat", "sing"]
words = (
    [
        "<bos>",
        "the",
        ".",
        "near",
        "behind",
        "with",
        "quickly",
        "here",
        "often",
        "happy",
        "tired",
        "big",
        "it",
        "they",
        "is",
        "are",
    ]
    + nouns
    + [n + "s" for n in nouns]
    + [v + "s" for v in verbs]
    + verbs
)
tok = {w: i for i, w in enumerate(words)}
SG_N, PL_N = [tok[n] for n in nouns], [tok[n + "s"] for n in nouns]
SG_V, PL_V = [tok[v + "s"] for v in verbs], [tok[v] for v in verbs]
SG_ALL, PL_ALL = SG_V + [tok["it"], tok["is"]], PL_V + [tok["they"], tok["are"]]
PREPS = [tok[w] for w in ("near", "behind", "with")]
ADVS = [tok[w] for w in ("quickly", "here", "often")]
ADJS = [tok[w] for w in ("happy", "tired", "big")]
SV_LEN = 17


# %% [markdown]
# A sentence of the grammar, and batches of them for training:

# %%
def sentence(rng, plural: bool, n_attr: int) -> tuple[list[int], int]:
    """Token ids and the length of the prompt (everything before the verb)."""
    s = [tok["<bos>"], tok["the"], rng.choice(PL_N if plural else SG_N)]
    for _ in range(n_attr):
        attr_plural = (not plural) if rng.random() < 0.5 else plural
        s += [rng.choice(PREPS), tok["the"], rng.choice(PL_N if attr_plural else SG_N)]
    n_prompt = len(s)
    k = rng.integers(len(verbs))
    s += [
        PL_V[k] if plural else SG_V[k],
        rng.choice(ADVS),
        tok["."],
        tok["they"] if plural else tok["it"],
        tok["are"] if plural else tok["is"],
        rng.choice(ADJS),
        tok["."],
    ]
    return s, n_prompt


def sv_batch_for(s_data: int):
    def batch(step: int, n: int = 64):
        rng = repro.rng(s_data, 3, step)
        seqs = [
            sentence(rng, bool(rng.integers(2)), int(rng.integers(0, 3)))[0]
            for _ in range(n)
        ]
        out = torch.full((n, SV_LEN), tok["."])
        for i, sq in enumerate(seqs):
            out[i, : len(sq)] = torch.tensor(sq)
        return out

    return batch


# %% [markdown]
# Two architectures per seed are trained on the grammar; held-out prompts with one or two attractors are
# drawn for all of them.

# %%
SV_ARCH = {"small (2L, d=64)": (2, 64), "larger (3L, d=96)": (3, 96)}
sv_models, sv_hists = {}, {}  # (seed, name) -> model, training history
for s in SEEDS:
    for name, (n_layer, d) in SV_ARCH.items():
        cfg = nn.TransformerConfig(
            vocab_size=len(words),
            n_layer=n_layer,
            n_head=4,
            d_model=d,
            max_len=SV_LEN,
            pos="learned",
        )
        with repro.seeded(s):
            model = nn.Transformer(cfg)
            sv_hists[s, name] = train.fit(
                model,
                lm_loss,
                sv_batch_for(s),
                sva_steps,
                lr=3e-3,
                warmup=30,
                seed=s,
                desc=f"{name}, seed {s}",
            )
        sv_models[s, name] = model.eval()

# held-out prompts (one or two attractors), shared by every model:
# (tokens, prompt length, plural?)
prng = repro.rng(seed, 4)
prompts = [
    (*sentence(prng, pl, n_attr), pl)
    for pl, n_attr in zip(
        prng.integers(0, 2, n_prompts).astype(bool), prng.integers(1, 3, n_prompts)
    )
]

# %% [markdown]
# **ACE per slot.** The number decision is read at three slots: the position that predicts the verb, the pronoun
# and `is`/`are`. A fair tail reads only the grammatical pair of its slot: `logit(verb_pl) - logit(verb_sg)` for the
# sentence's own verb, `logit(they) - logit(it)`, `logit(are) - logit(is)`. (Summing every plural-singular pair at
# every position, as the first version of this chapter did, mixes slots and lets `ln_f`'s Jacobian, which depends
# on `h`, add directions to the observability Gramian.) We run ACE per slot and pooled over slots (Gramians
# averaged by row count), and a variant with **LayerNorm frozen**: `ln_f`'s scale fixed at its mean over the data,
# so the tail is linear and its Gramian has rank 1 by construction; that variant tests whether the axis ACE picks
# through the real `ln_f` is the one the linear read-out uses.
#
# **Interventions in free generation.** From the prompt `the N PREP the N' ...` the model writes 7 tokens; we
# count the generated verbs, pronouns and `is`/`are` whose number matches the subject. Flip reflects the
# final-layer state along the pooled core's first axis at every position and every generated token; remove projects
# it out. If the axis is **necessary**, removing it must push agreement towards chance (one half); if it is the axis
# the model uses, flipping it must invert agreement. Baseline: the same flip along a random direction.


# %%
SLOTS = {"verb": -1, "pronoun": 2, "be": 3}  # offsets from the prompt length
PAIRS = {"pronoun": (tok["it"], tok["they"]), "be": (tok["is"], tok["are"])}


def slot_states(model):
    """Final-layer states per slot, the pair each row reads, the subject's number."""
    out = {k: ([], [], []) for k in SLOTS}
    by_len = {}
    for sq, n_prompt, pl in prompts:
        by_len.setdefault(len(sq), []).append((sq, n_prompt, pl))
    for group in by_len.values():
        with torch.no_grad():
            _, r = model(torch.tensor([g[0] for g in group]), record=True)
        hid = r["hidden"][-1].numpy()
        for b, (sq, n_prompt, pl) in enumerate(group):
            for k, off in SLOTS.items():
                pos = n_prompt + off
                v = sq[n_prompt]  # the sentence's own verb: its singular / plural pair
                kv = SG_V.index(v) if v in SG_V else PL_V.index(v)
                pair = PAIRS.get(k, (SG_V[kv], PL_V[kv]))
                out[k][0].append(hid[b, pos])
                out[k][1].append(pair)
                out[k][2].append(pl)
    return {k: (np.array(h), v, np.array(y)) for k, (h, v, y) in out.items()}


def pair_tail(model, sg, pl):
    return lambda h: (
        model.head(model.ln_f(h))[:, [pl]] - model.head(model.ln_f(h))[:, [sg]]
    )


# %% [markdown]
# The observability Gramian of a slot, and agreement in free generation with an optional intervention:

# %%
def slot_obs(model, H, pairs, frozen=False):
    """Observability Gramian of a slot: rows grouped by pair, averaged by count."""
    mats, counts = [], []
    for pair in sorted(set(pairs)):
        idx = [i for i, q in enumerate(pairs) if q == pair]
        if frozen:
            W = model.head.weight.detach().double().numpy()
            sigma = float(np.sqrt(H[idx].var(1) + model.ln_f.eps).mean())
            mats.append(
                ac.ln_frozen_observability(
                    W[pair[1]] - W[pair[0]],
                    model.ln_f.weight.detach().double().numpy(),
                    sigma,
                )
            )
        else:
            mats.append(
                ac.observability_gramian(
                    pair_tail(model, *pair), H[idx], samples=64, seed=seed
                )
            )
        counts.append(len(idx))
    return ac.pooled_gramian(mats, counts)


def agreement(model, Q=None, mode="flip", mean=None) -> float:
    ok = total = 0
    by_len = {}
    for sq, n_prompt, pl in prompts:
        by_len.setdefault(n_prompt, []).append((sq[:n_prompt], pl))
    for group in by_len.values():
        x = torch.tensor([g[0] for g in group])
        with torch.no_grad():
            if Q is None:
                out = model.generate(x, 7)
            else:
                with ac.intervene(model.blocks[-1], Q, mode, mean):
                    out = model.generate(x, 7)
        for row, (_, pl) in zip(out[:, x.shape[1] :].tolist(), group):
            for t_ in row:
                if t_ in SG_ALL or t_ in PL_ALL:
                    total += 1
                    ok += int((t_ in PL_ALL) == pl)
    return ok / max(total, 1)


# %% [markdown]
# Per LM: ACE per slot and pooled, the LayerNorm-frozen variant, the probes, and the interventions.

# %%
sva = {}
for (s, name), model in tqdm(sv_models.items(), desc="ACE and interventions per LM"):
    st_ = slot_states(model)
    per_slot, obs_all, frozen_all, counts = {}, [], [], []
    for k, (H, pairs_k, _y) in st_.items():
        ob = slot_obs(model, H, pairs_k)
        c = ac.balanced_core(
            ac.controllability_gramian(H), ob, threshold=0.99, mean=H.mean(0)
        )
        per_slot[k] = c.rank
        obs_all.append(ob)
        frozen_all.append(slot_obs(model, H, pairs_k, frozen=True))
        counts.append(len(H))
    H_all = np.concatenate([st_[k][0] for k in SLOTS])
    y_all = np.concatenate([st_[k][2] for k in SLOTS])
    slot_all = np.concatenate(
        [np.full(len(st_[k][0]), i) for i, k in enumerate(SLOTS)]
    )
    cov_all = ac.controllability_gramian(H_all)
    pooled = ac.balanced_core(
        cov_all, ac.pooled_gramian(obs_all, counts), 0.99, mean=H_all.mean(0)
    )
    frozen = ac.balanced_core(
        cov_all, ac.pooled_gramian(frozen_all, counts), 0.99, mean=H_all.mean(0)
    )
    axis = pooled.basis[:, :1]
    rand_axis = np.linalg.qr(repro.rng(s, 5).normal(size=(model.cfg.d_model, 1)))[0]
    probe = H_all[y_all].mean(0) - H_all[~y_all].mean(0)
    # Fisher's discriminant (lightly regularised within-class covariance)
    Sw = np.cov(H_all[y_all], rowvar=False) + np.cov(H_all[~y_all], rowvar=False)
    Sw += 1e-3 * np.trace(Sw) / len(Sw) * np.eye(len(Sw))
    lda = np.linalg.solve(Sw, probe)
    sva[s, name] = dict(
        per_slot=per_slot,
        rank=pooled.rank,
        energy1=float(pooled.energy[0]),
        frozen_rank=frozen.rank,
        frozen_angle=float(ac.principal_angles_deg(axis, frozen.basis[:, :1])[0]),
        axis=axis,
        mean=pooled.mean,
        z=(H_all - pooled.mean) @ axis[:, 0],
        z_probe=H_all @ probe,
        z_lda=H_all @ lda,
        z_rand=H_all @ rand_axis[:, 0],
        y=y_all,
        slot=slot_all,
        H=H_all,
        base=agreement(model),
        flip=agreement(model, axis, "flip", pooled.mean),
        remove=agreement(model, axis, "remove"),
        remove_core=agreement(model, pooled.Q, "remove"),
        flip_random=agreement(model, rand_axis, "flip", pooled.mean),
        remove_random=agreement(model, rand_axis, "remove"),
    )
# %% [markdown]
# Per LM, the ranks and the agreement under each intervention:

# %%
for (s, name), v in sva.items():
    print(
        f"seed {s} {name}: ranks per slot {v['per_slot']}, pooled {v['rank']} (first "
        "axis "
        f"{v['energy1']:.3f} of the energy), LN frozen {v['frozen_rank']} at "
        f"{v['frozen_angle']:.1f} deg | agreement base {v['base']:.3f}, flip "
        f"{v['flip']:.3f}, remove axis {v['remove']:.3f}, remove pooled core "
        f"{v['remove_core']:.3f}, random flip {v['flip_random']:.3f}, random remove "
        f"{v['remove_random']:.3f}"
    )

# %% [markdown]
# **Across models.** On the same prompts and slots, the two architectures' axis coordinates should be correlated if
# they encode the same variable. The baselines say how much of that needs ACE: two **supervised probes** for the
# subject's number, fitted in each model with the labels (a difference of class means, a practitioner's first
# tool, and Fisher's linear discriminant), and a random direction. The stronger probe at each seed is the claim's
# baseline: ACE finds its axis without labels, so matching the probe already means it found the number variable;
# beating it would mean ACE's axis is *more* shared than the best labelled read-out.
#
# The coordinates are **centred within each slot** before they are correlated: the three slots (verb, pronoun,
# `is`/`are`) sit at different mean states, and those offsets are not number (the uncentred numbers are printed
# and kept in the claim's note). Within a slot, the subject's number is the dominant variable of the state, so
# even a **random** direction of each model correlates strongly across models (in the first version of this
# comparison one random direction, at one seed, passed the fixed |corr| bar the claim then used). The
# claim therefore asks for more than chance: the ACE axes' |corr| minus the 95th percentile of `n_null` random
# direction pairs must be positive.

# %%
(n1, n2) = list(SV_ARCH)


def centre_slots(z, slot):
    """Coordinates with each slot's mean removed (slot offsets are not number)."""
    z = np.asarray(z, dtype=np.float64).copy()
    for sl in np.unique(slot):
        z[slot == sl] -= z[slot == sl].mean()
    return z


def slot_centred(v, key):
    return centre_slots(v[key], v["slot"])


def cross_corr(key, centre=True):
    get = slot_centred if centre else (lambda v, k: v[k])
    return [
        abs(float(np.corrcoef(get(sva[s, n1], key), get(sva[s, n2], key))[0, 1]))
        for s in SEEDS
    ]


cross, cross_probe, cross_lda, cross_rand = (
    cross_corr(k) for k in ("z", "z_probe", "z_lda", "z_rand")
)
# without slot centring: slot offsets alone correlate across models
cross_raw, cross_rand_raw = cross_corr("z", False), cross_corr("z_rand", False)
cross_best = [max(a, b) for a, b in zip(cross_probe, cross_lda)]


# %% [markdown]
# The null: the same correlation along pairs of random directions of the two models.

# %%
def random_axis_null(s, draws):
    """|corr| of slot-centred coordinates along independent random directions of the
    two models, `draws` pairs: (mean, 95th percentile)."""
    rng_ = repro.rng(s, 8)
    a, b = sva[s, n1], sva[s, n2]
    vals = []
    for _ in range(draws):
        za = centre_slots(a["H"] @ rng_.normal(size=a["H"].shape[1]), a["slot"])
        zb = centre_slots(b["H"] @ rng_.normal(size=b["H"].shape[1]), b["slot"])
        vals.append(abs(float(np.corrcoef(za, zb)[0, 1])))
    return float(np.mean(vals)), float(np.quantile(vals, 0.95))


rand_null = [random_axis_null(s, n_null) for s in SEEDS]
print(
    f"random direction pairs ({n_null} per seed), |corr| mean / 95th pct:",
    [(round(m_, 3), round(q_, 3)) for m_, q_ in rand_null],
)
print("|corr| of the two models' axis coordinates per seed:", np.round(cross, 3))
print(
    "  difference-of-means probe:",
    np.round(cross_probe, 3),
    " Fisher probe:",
    np.round(cross_lda, 3),
    " random directions:",
    np.round(cross_rand, 3),
)
print(
    "ACE axis minus the stronger probe, per seed:",
    np.round(np.subtract(cross, cross_best), 3),
)
print(
    "without slot centring: ACE axis",
    np.round(cross_raw, 3),
    " random directions",
    np.round(cross_rand_raw, 3),
)

# %% [markdown]
# The figure: the two models' axis coordinates at the first seed, and agreement under each intervention
# per LM.

# %%
fig, ax = plt.subplots(1, 2, figsize=(9.5, 3.5))
a, b = sva[SEEDS[0], n1], sva[SEEDS[0], n2]
ax[0].scatter(a["z"][~a["y"]], b["z"][~a["y"]], s=6, label="singular subject")
ax[0].scatter(a["z"][a["y"]], b["z"][a["y"]], s=6, label="plural subject")
ax[0].set(
    xlabel=f"axis coordinate, {n1}",
    ylabel=f"axis coordinate, {n2}",
    title=f"seed {SEEDS[0]}: |corr| = {cross[0]:.2f}",
)
ax[0].legend(fontsize=7)
keys = [
    ("base", "none"),
    ("flip", "flip axis"),
    ("remove", "remove axis"),
    ("flip_random", "flip random"),
    ("remove_random", "remove random"),
]
x = np.arange(len(sva))
for k, (key, lab) in enumerate(keys):
    ax[1].bar(x + (k - 2) * 0.16, [v[key] for v in sva.values()], 0.16, label=lab)
ax[1].axhline(0.5, color="k", ls=":", lw=1)
ax[1].set(
    xticks=x,
    xticklabels=[f"s{s}\n{nm.split()[0]}" for s, nm in sva],
    ylim=(0, 1.05),
    ylabel="agreement in generation",
)
ax[1].legend(fontsize=6, ncol=2)
plt.tight_layout()
plt.show()

# %% [markdown]
# Live controls (Jupyter / Colab): pick a subject and attractor, and generate with or without the flip.


# %%
def generate_live(subject="cats", attractor="dog", flip=True, model_name=n1):
    model = sv_models[SEEDS[0], model_name]
    s_ = sva[SEEDS[0], model_name]
    x = torch.tensor(
        [
            [
                tok["<bos>"],
                tok["the"],
                tok[subject],
                tok["near"],
                tok["the"],
                tok[attractor],
            ]
        ]
    )
    with torch.no_grad():
        if flip:
            with ac.intervene(model.blocks[-1], s_["axis"], "flip", s_["mean"]):
                out = model.generate(x, 7)
        else:
            out = model.generate(x, 7)
    print(" ".join(words[t_] for t_ in out[0, 1:].tolist()))


plotting.live_controls(
    generate_live,
    subject=nouns + [n + "s" for n in nouns],
    attractor=nouns + [n + "s" for n in nouns],
    flip=True,
    model_name=list(SV_ARCH),
)

# %% [markdown]
# ## Known limits
#
# * **Cached runs are exact on their own machine only.** The grokking-time re-run is checked for the same outcome,
#   not the same step (see section 4).
# * **Training length.** The main grokking run is 3000 full-batch epochs per seed (the issue asked 3000-5000; the
#   rebuild took 57 min wall, 1114 s of CPU, on the shared 2-core machine under a load average of 8-11). The paper trains ~2000 epochs at batch 512, about 6000
#   optimizer steps on our 1404 training pairs, twice our 3000, so "inflation under continued regularisation" is
#   tested over fewer optimizer steps after grokking than the paper's (`make_modadd.py` takes the length from
#   `checkpoint_config`: a longer run is a one-number change and a rebuild). The causal rank scans stop at rank 64
#   of 128. A rebuild on another CPU moves the training trajectories (full-batch training amplifies float
#   rounding), so every mod-add number would move with it.
#   Full-batch AdamW at this learning rate is not monotone after grokking: the curves above show loss spikes in
#   which test (and even train) accuracy collapses and recovers, and a checkpoint can fall inside one (the table
#   prints each checkpoint's test accuracy). The paper's mini-batches of 512 may smooth this; we did not test that.
# * **Grokking-time study.** Run at p = 31, lr 3e-3 and widths 16-64 (the main run's p = 53, d = 128, lr 1e-3 would
#   take hours for 21 runs on a CPU); tau is measured at 10-step resolution. The mode count at memorisation is
#   our operationalisation of the paper's redundancy.
# * **The live grokking-time re-run covers one run.** It re-trains the cheapest run of the seed that generalised
#   (until 2026-12-04 it was a width-16 run that never generalises, so the check compared two non-events) and
#   asks for its tau within 25% of the cached one; the other cached runs are trusted from the build.
# * **Language models.** The six pretrained LMs are replaced by small LMs trained on a synthetic grammar, so the
#   paper's cross-architecture claim is tested between two small architectures trained on the same data.
# * Steering full open-ended generation in GPT-2 and friends is untested (no pretrained weights offline).
#
# What this run measured adds these limits:


# %% tags=["remove-input"]
def known_limits() -> str:
    """The limits that this run's numbers state (worded for any outcome)."""
    out = []
    # grokking-time study: censored runs and the range of the redundancy proxy
    cens = [r for r in runs if r["tau"] is None]
    txt = (
        f"* **Grokking-time censoring.** {len(cens)} of the {len(runs)} runs never "
        f"generalised in the {gt_cfg['max_steps']}-step budget"
    )
    if cens:
        named = "; ".join(f"seed {r['seed']}, d {r['d']}, wd {r['wd']:g}" for r in cens)
        txt += f" ({named}); a longer budget would turn these lower bounds into "
        txt += "measurements. On the wd axis the censoring " + (
            "plays no part (no censored run there)."
            if not any(r["d"] == wd_d for r in cens)
            else "works against the claim (every censored run lies left of the mean "
            "log wd; the slope over generalised runs only is printed beside it)."
            if all(censor_conservative)
            else "is not a bound in one direction at every seed: read the slope over "
            "generalised runs only, printed beside it."
        )
    else:
        txt += "."
    out.append(txt)
    seen = sorted({m for ms in modes_range for m in ms})
    rw, rm = np.round(rho_width, 2).tolist(), np.round(rhos, 2).tolist()
    out.append(
        f"* **Redundancy proxy.** At p = {gt_cfg['p']} the core has "
        + (_span(seen) if seen else "no measured number of")
        + " Fourier modes at memorisation on the width axis, the count on which the "
        "Spearman test of `redundancy_speeds_grokking` works. Spearman(tau, width), "
        f"the redundancy set by design, is {rw} per seed, against {rm} for the mode "
        "count."
    )
    # Markov: ACE against PCA-3
    err = ", ".join(f"{f['err']:.4f}" for f in fits)
    err_pc = ", ".join(f"{f['err_pca']:.4f}" for f in fits)
    gap_acc = max(
        abs(r[k] - r[f"{k}_pca"]) for r in rows for k in ("keep", "remove")
    )
    same = err == err_pc and gap_acc < 1e-3
    txt = (
        "* **Markov: ACE adds nothing over PCA here.** The 3-D ACE core of each model "
        f"is its top-3 principal subspace: PCA-3 gives the same eigenvalue error to "
        f"four decimals ({err}) and the same keep / remove accuracies. Section 1's "
        "planted core, with distractors of larger variance, is where the two differ."
        if same
        else f"* **Markov: ACE against PCA.** Eigenvalue errors {err} (ACE) and "
        f"{err_pc} (PCA-3); keep / remove accuracies differ by up to {gap_acc:.3f}."
    )
    tok_err = {f"{f['err_tok']:.4f}" for f in fits}
    txt += (
        f" The token-averaged diagnosis (error {tok_err.pop()} for every model) is the "
        "same number for all models because averaging by current token leaves an "
        "invertible image of the one-hot token: it is the test set's own sampling "
        "floor, not a property of any model."
        if len(tok_err) == 1
        else " The token-averaged diagnosis gives errors "
        + ", ".join(f"{f['err_tok']:.4f}" for f in fits)
        + "."
    )
    out.append(txt)
    # pre-grokking checkpoints: before the rise, or on it
    pre = {
        s_: an["pre_grokking"] for s_, an in analysis.items() if "pre_grokking" in an
    }
    if pre:
        rise = [s_ for s_, a in pre.items() if a["base"] > mod_cfg["gen_acc"] / 4]
        listed = "; ".join(
            f"seed {s_}: step {a['step']}, test accuracy {a['base']:.3f}"
            for s_, a in pre.items()
        )
        out.append(
            f"* **Pre-grokking checkpoints** ({listed}). "
            + (
                f"Seed(s) {', '.join(rise)} are taken on the rise (test accuracy above "
                "a quarter of `gen_acc`), because `choose_checkpoints` takes the last "
                "step below half the way to `gen_acc`. A stricter rule needs a rebuild."
                if rise
                else "Every one lies before the rise (test accuracy below a quarter "
                "of `gen_acc`)."
            )
        )
    # weight-decay law: the slopes against the paper's
    fin = [x for x in slopes if np.isfinite(x)]
    fin_g = [x for x in slopes_gen if np.isfinite(x)]
    rises = []
    for s_ in gt_cfg["seeds"]:
        w_runs = sorted(
            (r for r in runs if r["seed"] == s_ and r["d"] == wd_d),
            key=lambda r: r["wd"],
        )
        rises += [
            f"seed {s_}'s tau rises from wd {a['wd']:g} to wd {b['wd']:g}"
            for a, b in zip(w_runs, w_runs[1:])
            if tau_or_budget(b) > tau_or_budget(a)
        ]
    txt = "* **Weight-decay law.** `grok_time_slope` tests the sign only."
    if fin:
        txt += (
            f" The measured slopes ({min(fin):.2f} to {max(fin):.2f}"
            + (
                f", or {min(fin_g):.2f} to {max(fin_g):.2f} over generalised runs"
                if fin_g
                else ""
            )
            + f") are {np.mean(fin) / PAPER_WD_SLOPE:.0%} of the paper's "
            f"{PAPER_WD_SLOPE} on average."
        )
        txt += (" S" + "; ".join(rises)[1:] + ".") if rises else (
            " At no seed does tau rise with weight decay."
        )
    else:
        txt += " No seed has two generalised runs on the wd axis: no slope is measured."
    out.append(txt)
    return "\n".join(out)


PAPER_WD_SLOPE = -1.02  # the paper's log-log slope of tau against weight decay
display(Markdown(known_limits()))

# %% [markdown]
# ## 6. The claims record
#
# Every claim below is measured once per seed (per model or model pair for the Markov chain). A seed where a claim
# cannot be measured (a run that never grokked) is named in the note and left out; a claim with no measurable seed
# is untested.
#
# **Conditions**, fixed with the claims and measured at the same seeds: every trained model's loss is flat at the end
# (`train.plateau <= 0.05`, the book-wide rule; for a pair of Markov models, both); the agreement LMs get agreement <!-- paper -->
# right on held-out prompts of their grammar (`>= 0.95`, the book-wide fit bar); every grokking-time run memorises <!-- paper -->
# its training set (a tau needs a memorisation step); and the modular-addition trajectory is stable after grokking:
# its training accuracy never falls by more than 0.05 below its running maximum (`no_collapse`, issue #71: <!-- paper -->
# full-batch AdamW without warmup collapses every few hundred steps, which confounds reading a core at a checkpoint).
# Where a condition fails at a seed the claim is left out there; with no seed left it is *inconclusive*.
#
# A claim that is not held carries a measured diagnosis in its note, not a guess:
#
# * `modadd_core_cyclic` (where it fails at a seed): the rank at which the ring is read, beside the nulls; as the
#   rank approaches p - 1 any subspace gives a near-exact shift, so the random-subspace null rises towards 1;
# * `markov_spectra_match`: the token-averaged core (each state replaced by its current token's mean state) and
#   the bootstrap interval say whether the error is the context-dependent part of the states or sampling;
# * `modadd_core_inflates`: the ranks at every checkpoint (table above), the ratio at the last checkpoint that
#   still generalises (an end inside a loss spike is not a converged core), and an energy-threshold sweep;
# * `redundancy_speeds_grokking`: tau against width itself (the redundancy we set) and the range of mode counts
#   at memorisation (a Spearman test needs spread in its predictor);
# * `sva_single_axis` and `sva_axis_necessary`: the per-slot ranks and the agreement after removing the whole
#   pooled core, which separate "one axis suffices" from "one axis is necessary".


# %%
def at(s, name, key):
    a = analysis[s].get(name)
    return None if a is None else a[key]


# conditions (fixed with the claims): each trained model at its plateau, the models
# fit what they were trained on, and the grokking trajectory is stable after grokking
COND = {}


def condition(cid, measured, op, target, statement, unit=""):
    COND[cid] = dict(measured=measured, op=op, target=target, statement=statement,
                     unit=unit)
    rec.condition(cid, measured, op, target, statement=statement, unit=unit)


PLATEAU = "share of the loss drop in the last fifth"
m_flat = [train.plateau(h.loss) for h in markov_hists]
# %%
condition("markov_converged", m_flat, "<=", 0.05,
          "each Markov model's training loss is flat at the end", PLATEAU)
condition("markov_pair_converged", [max(m_flat[i], m_flat[j]) for i, j in pairs], "<=",
          0.05, "both models of each compared pair are at their plateau", PLATEAU)
i_gen = {  # first evaluation at or after the grokking checkpoint (0 if none)
    s: next((k for k, st in enumerate(curves[int(s)][0])
             if at(s, "grokking", "step") is not None
             and st >= at(s, "grokking", "step")),
            0)
    for s in analysis
}
condition("no_collapse",
          [ac.largest_drop(curves[int(s)][2], i_gen[s]) for s in analysis], "<=", 0.05,
          "training accuracy never falls by more than 0.05 after grokking (a stable "
          "trajectory)", "largest training-accuracy drop after grokking")
condition("groktime_memorised",
          [np.mean([r["t_mem"] is not None for r in runs if r["seed"] == s])
           for s in gt_cfg["seeds"]], ">=", 1.0,
          "every run of the seed's sweep memorises its training set", "share of runs")
condition("sva_converged",
          [max(train.plateau(sv_hists[s, nm].loss) for nm in SV_ARCH) for s in SEEDS],
          "<=", 0.05, "both agreement LMs of the seed are at their plateau", PLATEAU)
condition("sva_fits", [min(sva[s, nm]["base"] for nm in SV_ARCH) for s in SEEDS], ">=",
          0.95, "both LMs get agreement right on held-out prompts of their grammar",
          "agreement, smaller of the two models")
# %%
GIVEN = {"markov_spectra_match": ("markov_converged",),
         "markov_subspaces_orthogonal": ("markov_pair_converged",),
         "markov_cores_share_code": ("markov_pair_converged",),
         "modadd_core_cyclic": ("no_collapse",),
         "modadd_core_inflates": ("no_collapse",),
         "grok_time_slope": ("groktime_memorised",),
         "redundancy_speeds_grokking": ("groktime_memorised",),
         **{c: ("sva_converged", "sva_fits") for c in (
             "sva_single_axis", "sva_flip_inverts", "sva_axis_necessary",
             "sva_axes_align")}}


def claim_per_seed(cid, statement, values, **kw):
    """Record a claim per seed with its conditions; undefined seeds are left out."""
    return ac.record_per_seed(rec, cid, statement, values, given=GIVEN[cid],
                              conditions=COND, **kw)


# %%
claim_per_seed(
    "markov_spectra_match",
    "Cores of independently trained Markov transformers carry the chain's transition "
    "spectrum "
    "(largest relative eigenvalue error, per model)",
    [f["err"] for f in fits],
    paper="identical spectra, < 1% error",
    op="<=",
    target=0.01,
    unit="relative error",
    baseline=[f["err_pca"] for f in fits],
    note="bootstrap 95% intervals of the error over test sequences: "
    + ", ".join(f"[{f['lo']:.4f}, {f['hi']:.4f}]" for f in fits)
    + "; baseline: the same fit on the top-3 principal components; diagnosis, the "
    "token-averaged core (context removed): error "
    + ", ".join(f"{f['err_tok']:.4f}" for f in fits)
    + ", share of core variance explained by the current token "
    + ", ".join(f"{f['r2_tok']:.3f}" for f in fits),
)
claim_per_seed(
    "markov_subspaces_orthogonal",
    "The cores lie in nearly orthogonal subspaces: no more aligned than two random "
    "3-D subspaces of R^64 (projector overlap per model pair, held if <= the random "
    "pairs' 95th percentile)",
    overlaps,
    paper="0.02-0.04",
    op="<=",
    target=round(overlap_q95, 4),
    unit="overlap",
    baseline=[float(overlap_null.mean())] * len(overlaps),
    note="baseline: mean overlap of random subspace pairs (r/D = "
    f"{3 / D_m:.4f}); share of random pairs below each measured overlap: "
    + ", ".join(f"{np.mean(overlap_null <= o):.2f}" for o in overlaps),
)
# %%
claim_per_seed(
    "markov_cores_share_code",
    "The cores compute the same thing: two trained cores are more CCA-correlated "
    "than a trained core with any of n untrained models' cores (mean top-3 CCA of "
    "the pair minus the best untrained partner of either, per pair; held if > 0)",
    [c - n for c, n in zip(ccas, ccas_null)],
    paper="CCA 0.93-0.99",
    op=">",
    target=0.0,
    unit="CCA gain over best untrained",
    baseline=ccas_null,
    note=f"{n_untrained} untrained models; trained-pair CCA "
    + ", ".join(f"{c:.4f}" for c in ccas)
    + "; untrained CCA mean +- sd per trained model: "
    + ", ".join(f"{u.mean():.4f} +- {u.std():.4f}" for u in cca_untrained)
    + "; CCA with the current token (one-hot): "
    + ", ".join(f"{c:.4f}" for c in cca_token),
)

# %%
seeds_m = list(analysis)




def null95(s, name):
    """The 95th percentile of the stronger ring-fraction null at checkpoint name."""
    nl = nulls.get(s, {}).get(name)
    return None if nl is None else max(nl["order_q95"], nl["sub_q95"])


claim_per_seed(
    "modadd_core_cyclic",
    "At grokking the core's shift operator is cyclic beyond chance (ring fraction "
    "minus the 95th percentile of the stronger null: random class order or random "
    "subspace of the same rank; held if > 0, per seed)",
    [
        None
        if null95(s, "grokking") is None
        else nulls[s]["grokking"]["ring"] - null95(s, "grokking")
        for s in seeds_m
    ],
    paper="on the unit circle",
    op=">",
    target=0.0,
    unit="ring fraction - null 95th pct",
    baseline=[null95(s, "grokking") for s in seeds_m],
    note="at grokking, ring fraction / class-order null 95th pct / random-subspace "
    "null 95th pct: "
    + "; ".join(
        f"seed {s}: "
        + (
            "no class means stored"
            if null95(s, "grokking") is None
            else f"{nulls[s]['grokking']['ring']:.3f} / "
            f"{nulls[s]['grokking']['order_q95']:.3f} / "
            f"{nulls[s]['grokking']['sub_q95']:.3f} at rank "
            f"{at(s, 'grokking', 'r_used')} of p - 1 = {p - 1}"
        )
        for s in seeds_m
    )
    + f" ({n_null} draws each)",
)


# %%
def rank_ratio(s, name):
    return at(s, name, "r_energy") / max(at(s, "grokking", "r_energy"), 1)


def peak_after(s):
    """The largest energy rank after grokking, as a ratio to grokking's, and where."""
    t_g = at(s, "grokking", "step")
    after = [(a["r_energy"], n) for n, a in analysis[s].items() if a["step"] > t_g]
    return None if not after else (rank_ratio(s, max(after)[1]), max(after)[1])


# %%
claim_per_seed(
    "modadd_core_inflates",
    "Under continued weight decay the core inflates after grokking (energy rank at the "
    "end / at "
    "grokking, per seed)",
    [
        None
        if at(s, "grokking", "r_energy") is None
        else at(s, "end", "r_energy") / max(at(s, "grokking", "r_energy"), 1)
        for s in seeds_m
    ],
    paper="~15 -> ~60 at p=53",
    op=">",
    target=1.3,
    unit="rank ratio",
    note="energy ranks memorised -> pre-grokking -> grokking -> end: "
    + "; ".join(
        f"seed {s}: {at(s, 'memorised', 'r_energy')} -> "
        f"{at(s, 'pre_grokking', 'r_energy')} -> "
        f"{at(s, 'grokking', 'r_energy')} -> "
        f"{at(s, 'end', 'r_energy')} (r_suf {at(s, 'grokking', 'r_suf')} -> "
        f"{at(s, 'end', 'r_suf')}, "
        f"modes {at(s, 'grokking', 'modes')} -> {at(s, 'end', 'modes')} of "
        f"{p // 2 + 1}, test acc at end {at(s, 'end', 'base'):.3f})"
        for s in seeds_m
    )
    + "; diagnosis: largest ratio after grokking "
    + ", ".join(
        "none"
        if at(s, "grokking", "r_energy") is None or peak_after(s) is None
        else f"{peak_after(s)[0]:.2f} ({peak_after(s)[1]})"
        for s in seeds_m
    )
    + "; ratio at the last generalising checkpoint "
    + ", ".join(
        "none"
        if last_generalising(s) is None or at(s, "grokking", "r_energy") is None
        else f"{rank_ratio(s, last_generalising(s)):.2f} ({last_generalising(s)})"
        for s in seeds_m
    )
    + f"; seed {sweep_seed} ratio at energy thresholds {sweep_thr}: "
    + ("n/a" if sweep_ratio is None else ", ".join(f"{v:.2f}" for v in sweep_ratio)),
)
# %%
claim_per_seed(
    "grok_time_slope",
    "Grokking time falls with weight decay (log-log slope of tau = t_gen - t_mem "
    "against wd, per seed)",
    slopes,
    paper=-1.02,
    op="<",
    target=0.0,
    unit="slope",
    note=f"width {wd_d}; runs that never generalised counted at the budget: "
    f"{not_grokked or 'none'}; slope over generalised runs only: "
    + ", ".join(f"{v:.2f}" for v in slopes_gen)
    + "; censored runs left of mean log wd (budget slope is an upper bound): "
    + ", ".join(str(c) for c in censor_conservative),
)
claim_per_seed(
    "redundancy_speeds_grokking",
    "More redundant Fourier modes at memorisation give a shorter grokking time "
    "(Spearman of tau vs "
    "mode count across widths, per seed)",
    rhos,
    paper="tau ~ 1/modes",
    op="<",
    target=-0.5,
    unit="Spearman rho",
    note="log-log slope of tau vs modes per seed: "
    + ", ".join(f"{m:.2f}" for m in mode_slopes)
    + "; diagnosis: Spearman of tau vs width (the redundancy set by design) "
    + ", ".join(f"{v:.2f}" for v in rho_width)
    + "; mode counts at memorisation seen "
    + ", ".join(str(v) for v in modes_range),
)
# %%
sv_seed = {s: [v for (s2, _), v in sva.items() if s2 == s] for s in SEEDS}
claim_per_seed(
    "sva_single_axis",
    "Agreement is governed by a rank-1 core at each slot (largest per-slot energy rank "
    "at 0.99 "
    "over slots and models, per seed)",
    [max(max(v["per_slot"].values()) for v in vs) for vs in sv_seed.values()],
    paper=1,
    op="<=",
    target=1,
    unit="rank",
    note="; ".join(
        f"seed {s} {nm.split()[0]}: slots {v['per_slot']}, pooled {v['rank']}, LN "
        "frozen "
        f"{v['frozen_rank']} ({v['frozen_angle']:.0f} deg from the pooled axis)"
        for (s, nm), v in sva.items()
    ),
)
claim_per_seed(
    "sva_flip_inverts",
    "Flipping the axis inverts number in open-ended generation (agreement drop, "
    "smaller of the two "
    "models, per seed)",
    [min(v["base"] - v["flip"] for v in vs) for vs in sv_seed.values()],
    paper="inverts number",
    op=">=",
    target=0.5,
    unit="agreement drop",
    baseline=[max(v["base"] - v["flip_random"] for v in vs) for vs in sv_seed.values()],
    note="baseline: the larger drop from flipping a random direction",
)
# %%
claim_per_seed(
    "sva_axis_necessary",
    "The axis is necessary: removing it brings agreement towards chance (agreement "
    "after removal, "
    "larger of the two models, per seed)",
    [max(v["remove"] for v in vs) for vs in sv_seed.values()],
    paper="necessary and sufficient",
    op="<=",
    target=0.6,
    unit="agreement",
    baseline=[max(v["remove_random"] for v in vs) for vs in sv_seed.values()],
    note="after removing the whole pooled core: "
    + ", ".join(f"{v['remove_core']:.3f}" for v in sva.values())
    + "; baseline: removing a random direction",
)
# %%
claim_per_seed(
    "sva_axes_align",
    "The unsupervised ACE axis aligns across architectures beyond chance (|corr| of "
    "the two models' slot-centred axis coordinates on the same prompts minus the "
    "95th percentile of random direction pairs, per seed; baseline: the stronger of "
    "two supervised number probes, minus the same null)",
    [c - q_ for c, (_, q_) in zip(cross, rand_null)],
    paper="aligns across architectures",
    op=">",
    target=0.0,
    unit="|corr| - random null 95th pct",
    baseline=[c - q_ for c, (_, q_) in zip(cross_best, rand_null)],
    note="ACE axis |corr| "
    + ", ".join(f"{c:.3f}" for c in cross)
    + "; random direction pairs mean / 95th pct "
    + ", ".join(f"{m_:.3f} / {q_:.3f}" for m_, q_ in rand_null)
    + f" ({n_null} pairs); ACE minus the stronger probe: "
    + ", ".join(f"{c - b:+.3f}" for c, b in zip(cross, cross_best))
    + "; difference-of-means probe "
    + ", ".join(f"{c:.3f}" for c in cross_probe)
    + "; Fisher probe "
    + ", ".join(f"{c:.3f}" for c in cross_lda)
    + "; one random direction "
    + ", ".join(f"{c:.3f}" for c in cross_rand)
    + "; all coordinates centred within each slot; without centring, ACE axis "
    + ", ".join(f"{c:.3f}" for c in cross_raw)
    + ", random directions "
    + ", ".join(f"{c:.3f}" for c in cross_rand_raw),
)
rec.untested(
    "sva_pretrained_lms",
    "In six pretrained LMs (GPT-2 S/M/L, LLaMA-3.1, Gemma-2, Qwen2.5) agreement is one "
    "steerable axis",
    paper="six LMs",
    reason="no pretrained LM weights offline and no GPU; tested on small LMs trained "
    "on a synthetic grammar",
)
rec.save()
