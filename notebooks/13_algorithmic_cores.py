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
# | Markov chain | 4-state cyclic chain, 1-layer transformers d=64, 3000 sequences, batch 64, 40 epochs (~1,900 steps) at lr 1e-4, 3 seeds | the same: 1875 steps at lr 1e-4 (our transformer block, pre-LN, no dropout), 3 seeds, trained by `data/13_algorithmic_cores/make_lms.py` |
# | modular addition | p=53, 2-layer d=128, lr 1e-3, wd 1.0, batch 512, ~2000 epochs | p=53, 2-layer d=128, lr 5e-4 (half the paper's, against collapses) until grokking, then decayed to 5e-5 (against the collapses that remained: less weight-decay pull after grokking than the paper's), wd 1.0, batch 512 with a 10-step warmup and gradient clipping at 1, 11000 steps, 3 seeds, and a weight-decay-0 control over the first 4000 steps, by `make_modadd.py`; inflation (rounds 8-9) read on a second run at the constant rate with Adam epsilon 1e-4 (at least the paper's weight-decay pull after grokking), 3 seeds, on the smoothed trend of `d_eff` over its checkpoints (round 9) |
# | grokking-time law | sweeps of weight decay and redundancy | p=31, lr 3e-3: wd 0.25-2 at d=32, 3 seeds, by `make_groktime.py`; redundancy set by design, p=31, d=64, 3 seeds, by `make_redundancy.py`: from one shared memorised checkpoint per seed the embedding is cut to m = 1, 2, 4, 8 Fourier modes and kept there, tau read per m (round 8, the design `redundancy_law_slope` reads; round 7 let only m modes grow from the branch, an earlier design kept the embedding to m modes from step 0) |
# | subject-verb agreement | GPT-2 S/M/L, LLaMA-3.1, Gemma-2, Qwen2.5 | two small LMs (2L/d64, 3L/d96) per seed, trained on a generated agreement grammar with attractors, 3 seeds, by `make_lms.py` |
# | hardware | GPUs | 2 CPU cores; all training runs once, in the checkpoint scripts; quick mode trains tiny models live |
#
# :::{note}
# **What is reconstructed.** The extraction maths (Gramians, balanced SVD, energy threshold, causal scans) and the
# Markov / modular-addition configurations follow the authors' description and code, re-implemented here. Ours:
# (1) the *flip* intervention `h - 2 Q Q^T (h - mu)` (the authors' flip code was not found); (2) the subject-verb
# agreement experiment: no pretrained LM weights are available offline, so small LMs are trained on a synthetic
# grammar in place of GPT-2 and friends; (3) the memorisation step (first logged step with train accuracy
# `>= 0.99`) and the generalisation step (test accuracy `>= 0.95`) that define the grokking time; (4) the
# grokking-time study runs at a higher learning rate and a smaller width than the main run, to fit its runs on a
# CPU; (5) redundancy set by design: m Fourier modes of the learned embedding kept from step 0 (round 5), then
# from one shared memorised checkpoint with only m modes free to grow (round 7) or with the other modes cut there
# (round 8, the design the claim reads); (6) the
# warmup and gradient clipping of the main mod-add run, AdamW's default `betas` (the paper's code sets neither),
# half the paper's learning rate, and its decay to a tenth after grokking, chosen because full-batch training,
# `beta2 = 0.98`, lr 1e-3 and a constant lr 5e-4 collapsed after grokking in our probes (section 3); (7) the
# inflation observables `r_kill` (the necessity rank counted from one) and `d_eff` (the participation ratio of
# the class means' Fourier power over directions, round 8; read on a smoothed trend since round 9), ours.
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
markov_steps = 150  # quick mode: steps per Markov model trained live
markov_test = 3000  # test sequences (the paper's 3000)
n_boot = 200  # bootstrap resamples of the test sequences for the eigenvalue intervals
sva_steps = 150  # quick mode: steps per agreement LM trained live
n_prompts = 200  # held-out agreement prompts
n_null = 200  # draws of each ring-fraction null (class order, random subspace)
n_untrained = 19  # untrained Markov models, the CCA null

# %% tags=["hide-input"]
import copy
import json

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F
from IPython.display import Markdown, display
from tqdm.auto import tqdm

from helpers import algorithmic_cores as ac
from helpers import checkpoints, claims, nn, plotting, repro, scripts, train

if quick:
    markov_test, n_boot, n_prompts = 300, 20, 40
    n_null, n_untrained = 40, 4
SEEDS = [seed] if quick else [seed, seed + 1, seed + 2]
if not quick:  # fail early, naming the stored seeds, for a seed they lack
    for name in ("modadd", "modadd_eps", "modadd_nowd", "groktime", "redundancy",
                 "markov", "sva"):
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
# The paper's training length (batch 64, 40 epochs: 1875 steps at lr 1e-4) does not fit the default run, so
# `data/13_algorithmic_cores/make_lms.py` trains them once and the default run loads them; quick mode trains
# `markov_steps` steps at lr 3e-3 live, with the same functions.

# %%
T_markov = ac.cyclic_transition(4, 0.75)
true_eigs = ac.transition_spectrum(T_markov)
train_seqs = torch.tensor(ac.markov_sequences(T_markov, 3000, 32, seed=seed))
test_seqs = torch.tensor(
    ac.markov_sequences(T_markov, markov_test, 32, seed=seed + 10_000)
)
print("true spectrum of T:", np.round(true_eigs, 3))


lm_loss = ac.lm_loss  # next-token cross-entropy at every position


@torch.no_grad()
def next_token_acc(model, seqs) -> float:
    return (model(seqs[:, :-1]).argmax(-1) == seqs[:, 1:]).float().mean().item()


markov_cfg = ac.markov_model_config()
markov_seeds = [seed + 100 * i for i in range(len(SEEDS))]
markov, markov_losses = [], []
if quick:
    markov_seeds = [seed, seed + 100]  # two models: one pair to compare
    for s in markov_seeds:
        with repro.seeded(s):
            model = nn.Transformer(markov_cfg)
            hist_m = train.fit(
                model,
                lm_loss,
                lambda st: ac.markov_batch(train_seqs, seed, st),
                markov_steps,
                lr=3e-3,
                warmup=20,
                seed=s,
                desc=f"Markov model, seed {s}",
            )
        markov.append(model.eval())
        markov_losses.append(hist_m.loss)
else:
    lm_cfg = scripts.with_seeds(ac.lm_config("markov"), SEEDS)
    mk = checkpoints.load(ac.CHECKPOINT_SLUG, "markov", config=lm_cfg)
    for s in markov_seeds:
        model = nn.Transformer(markov_cfg)
        model.load_state_dict(mk.state_dict(f"{s}."))
        markov.append(model.eval())
        markov_losses.append(mk.manifest["history"][f"loss/{s}"]["value"])
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
# The fitted spectra per model, beside the PCA-3 baseline and the token-averaged core. The printed R^2 of the
# core fit is pooled over its three coordinates; the oracle `ac.markov_oracle_r2` weights the four one-hot
# coordinates equally. They are different averages of the same per-direction limits: along an eigen-direction of
# `T` with eigenvalue `lambda` the best one-step prediction explains `|lambda|^2` of the variance (printed below
# from `T`), so a pooled R^2 above the equal-weight oracle means the core's variance sits mostly in the rotating
# plane, not that the fit beats the Bayes limit.

# %%
for i, f in enumerate(fits):
    print(
        f"model {i}: eigenvalues {np.round(np.sort_complex(f['eig']), 4)}  max "
        "relative error "
        f"{f['err']:.4f} (bootstrap 95% [{f['lo']:.4f}, {f['hi']:.4f}]); PCA-3 "
        f"baseline {f['err_pca']:.4f}; R^2 {f['r2']:.3f} (equal-weight oracle "
        f"{ac.markov_oracle_r2(T_markov):.3f}; per eigen-direction |lambda|^2: "
        + ", ".join(f"{x:.3f}" for x in np.abs(true_eigs[1:]) ** 2) + ")"
        f"\n  token-averaged core: error {f['err_tok']:.4f}; the current token "
        f"explains {f['r2_tok']:.3f} of the core's variance"
    )

# %% tags=["remove-input"]
straddle = [i for i, f in enumerate(fits) if f["lo"] <= 0.01 <= f["hi"]]
display(Markdown(
    "**Reading it.** The relative errors are "
    + ", ".join(f"{f['err']:.4f}" for f in fits)
    + " against the paper's 1%; the bootstrap interval of "
    + (f"{len(straddle)} of {len(fits)} models contains 1%" if straddle
       else "no model contains 1%")
    + ", and the token-averaged core, which keeps only what the current token "
      "determines, "
    "already errs by " + ", ".join(f"{f['err_tok']:.4f}" for f in fits) + " on these "
    f"{markov_test} test sequences (the sampling floor of the fit). "
    + ("Whether a model lands above or below 1% is therefore within the test set's "
      "sampling "
       "noise, and `markov_spectra_match`'s verdict should be read with that."
       if straddle else "The verdict is outside the bootstrap spread.")))

# %% [markdown]
# **Shared, but not aligned.** Principal angles and the projector overlap `||Q_i^T Q_j||_F^2 / r` compare the
# cores as subspaces of R^64; CCA compares what the core coordinates *compute* on the same inputs. Both need a null,
# fixed here before the numbers are seen:
#
# * **Overlap.** Two independent, uniformly random 3-D subspaces of R^64 overlap by `r/D = 0.047` on average, with
#   a spread we sample (20000 pairs). The paper's 0.02-0.04 is that random level: "nearly orthogonal" is what any <!-- paper -->
#   two independently initialised models of a rotation-symmetric network give unless training singles out a
#   basis. A claim that holds by our construction is not a finding, so it is the check `markov_cores_not_aligned`
#   (no trained pair above the null's `0.999` quantile), kept because a privileged basis (from the optimizer or
#   LayerNorm) would break it.
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
# of the 53^2 pairs are the training set; AdamW (weight decay 1) on minibatches of 512 pairs, as in the paper,
# first memorises, then, later, generalises (grokking).
#
# **What changed in round 7 (issue #71).** The run below is not the one the next paragraph starts from. With a
# constant rate (5e-4) it still collapsed at every seed after step ~4000; a list of changes fixed before it ran
# (probed on seed 0, judged by `no_collapse` alone; the record is at the end of this section) found that
# **decaying the learning rate after grokking** removes the collapses: the rate is held until the run's own
# grokking step (its first logged test accuracy `>= 0.95`), then falls along a cosine to a tenth (5e-5) over 1000
# steps and stays there (`ac.post_grokking_lr_factor`). The price is weight-decay pull: AdamW's decay per step is
# `lr * wd`, so after grokking the run applies far less of it than the paper's constant rate (counted below). The
# base run's measurements are kept for comparison (`modadd_base.json`). Since round 8, `modadd_core_inflates` reads
# another run that keeps the paper's pull (the end of the inflation part below). The history of the settings follows.
# Full-batch AdamW without warmup or clipping (an earlier
# version of this chapter) collapsed every few hundred steps after grokking, and those collapses, not the slow
# pull of weight decay, set the rank of the core at a checkpoint. So the run follows the paper's minibatches, adds
# a 10-step warmup and gradient clipping at norm 1, and uses AdamW's default `betas` (the paper's code sets none).
# At the paper's lr 1e-3 two of three seeds still collapsed after grokking by more than the condition below
# allows; a one-seed probe at half that rate (seed 0, the worst) met the condition over 4000 steps, and lr 5e-4
# was chosen by that criterion alone, before the claims were read (over the longer run below the condition is
# measured again, per seed, and kept as it is). Halving the rate halves the pull of weight decay per step,
# so the base run was twice as long as the paper's (before round 7's late decay): AdamW multiplies every weight by `1 - lr * wd` per step, and the
# paper's ~2000 epochs of minibatches of 512 at lr 1e-3 (about 5,500 steps on this split) apply the same
# `lr * wd * steps` as our 11000 steps at lr 5e-4. `data/13_algorithmic_cores/make_modadd.py` trains them once
# per seed (too long for a 5-minute run), logs loss and train / test accuracy every 10 steps and keeps a
# checkpoint every 100 steps; the weight-decay-0 control is the same run's first 4000 steps without decay. Quick
# mode trains a tiny model live with the same functions.
#
# **Collapses are marked, not hidden.** `ac.collapse_steps` lists the logged steps after memorisation where train
# accuracy lies more than `0.05` below its running maximum; `ac.stable_checkpoints` drops every checkpoint within
# 150 steps after (or 10 before) one, so no core is read inside a spike or its recovery. The condition
# `no_collapse` (largest train-accuracy drop after grokking `<= 0.05`) is measured per seed; the claims that read
# the trajectory rest on it.
#
# The analysis of a checkpoint (`ac.modadd_analysis`): ACE at the layer-2 output, last position, energy threshold
# `0.99`; at the named checkpoints (memorised, pre-grokking, grokking, end: the first stable checkpoint after
# each event) the **causal scans** raise the rank until removing the core drops accuracy to `2/p` (necessity) and
# keeping it preserves accuracy within 1e-3 (sufficiency). Then the class means of the core coordinates,
# `reps[c]`, and the least-squares **shift operator** `reps[c] -> reps[c+1 mod p]`: a cyclic algorithm puts its
# eigenvalues on the unit circle at the Fourier frequencies. Every checkpoint every 100 steps gets the cheap part
# (energy rank, ring fraction and mode count in the energy core), and from grokking on **`r_kill`**: the smallest
# r such that removing the first r ACE directions leaves test accuracy `<= 2/p` (`ac.kill_rank`, scanned from
# r = 1 over all 128 directions). `r_kill` is the observable for inflation, registered in round 7 with its reason
# before it was read: the energy rank cannot show ~15 -> ~60 at d = 128 (an untrained network already has ~42),
# while `r_kill` is causal, spans 1..128, and grows exactly when the computation is spread over more directions
# (removing a few leaves other copies). *Added at review (2026-12-06):* in practice `r_kill` cannot go far past
# `p - 1 = 52`: the answer's information at this layer lives in the span of the `p` class means, at most `p - 1`
# directions (two per Fourier frequency), and once they are removed every answer has the same mean state. Every
# `r_kill` measured on this run is at most `p - 1`, and it is already close to it at grokking, so the registered bar
# (a trend above `1.3`) is out of its reach there; the condition `r_kill_headroom` (section 6) records this.
#
# **Nulls for the ring fraction.** With `r` class means in `r >= p - 1` dimensions the least-squares shift is exact
# for *any* order of the classes, so a ring fraction means little on its own. Two nulls keep what matters fixed and
# break one thing each, drawn `n_null` times per checkpoint:
#
# * **permuted labels**: the same class means in the same core, the answers relabelled by a random permutation
#   (the points stay, the cycle `c -> c + 1` goes): is the ring due to the cyclic order?
# * **random subspace**: the layer's class means read in a random orthonormal subspace of the same rank `r`
#   (in place of the ACE core): is the ring specific to the core?
#
# `modadd_core_cyclic` holds at a seed when the ring fraction at grokking is above the 95th percentile of **both**.
# The nulls need the layer's class means, which the script stores (float32) for every seed and named checkpoint,
# beside the weights of seed 0's grokking and end checkpoints (the check `stored_states_reproduce`).

# %%
mod_cfg = ac.checkpoint_config("modadd")
if quick:
    mod_cfg.update(p=23, d=32, lr=3e-3, steps=300, seeds=[seed], samples=32,
                   null_draws=5, batch_size=128, ckpt_every=20, collapse_after=30)
p = mod_cfg["p"]
train_rows, test_rows = (
    torch.tensor(a)
    for a in ac.modadd_split(p, mod_cfg["train_frac"], seed=mod_cfg["split_seed"])
)


def modadd_from_state(state) -> torch.nn.Module:
    m = ac.modadd_model(p, mod_cfg["d"], mod_cfg["n_head"])
    m.load_state_dict({k: v.float() for k, v in state.items()})
    return m.eval()


def analyse(m, s, refine=True) -> dict:
    a = ac.modadd_analysis(m, test_rows, p, threshold=mod_cfg["threshold"],
                           samples=mod_cfg["samples"], seed=s, refine=refine,
                           null_draws=mod_cfg["null_draws"] if refine else 0,
                           r_max=mod_cfg["r_max"],
                           kill=refine and bool(mod_cfg.get("kill_rank")))
    a["eigs_re"], a["eigs_im"] = a["eigs"].real.tolist(), a["eigs"].imag.tolist()
    return a


def cyclic_states(m, s, r_used) -> tuple[np.ndarray, np.ndarray]:
    """Class means of the layer-2 states (p x d) and the same in the core (p x r)."""
    return ac.modadd_class_states(m, test_rows, p, r_used,
                                  threshold=mod_cfg["threshold"],
                                  samples=mod_cfg["samples"], seed=s)


# %% [markdown]
# In quick mode a tiny run is trained here, live: train, mark the collapses, keep the stable checkpoints, read
# every one cheaply and the named ones in full (the script's procedure).

# %%
def live_trajectory(cfg, s) -> dict:
    gen = {"step": None}  # the grokking step, where a late decay starts
    late = cfg.get("late_decay")

    def on_eval(step, row):
        if gen["step"] is None and row["test_acc"] >= cfg["gen_acc"]:
            gen["step"] = step

    factor = None if not late else (
        lambda st: ac.post_grokking_lr_factor(st, gen["step"], **late))
    with repro.seeded(s):
        m = ac.modadd_model(p, cfg["d"], cfg["n_head"])
        log = ac.train_modadd(m, train_rows, test_rows, cfg["steps"], lr=cfg["lr"],
                              wd=cfg["wd"], betas=cfg["betas"],
                              eval_every=cfg["eval_every"],
                              snapshot_every=cfg["ckpt_every"],
                              batch_size=cfg["batch_size"], warmup=cfg["warmup"],
                              clip=cfg["clip"], batch_seed=s, on_eval=on_eval,
                              eps=cfg.get("eps", 1e-8), lr_factor=factor)
    st, tr_a, te_a = log["step"], log["train_acc"], log["test_acc"]
    t_mem, t_gen = ac.memorise_generalise(st, tr_a, te_a, cfg["mem_acc"],
                                          cfg["gen_acc"])
    col = ac.collapse_steps(st, tr_a, start=t_mem or st[-1], drop=cfg["collapse_drop"])
    grid = sorted(log["snapshots"])
    stable = ac.stable_checkpoints(grid, col, before=cfg["eval_every"],
                                   after=cfg["collapse_after"])
    traj = []
    for g in grid:
        kill = bool(cfg.get("kill_rank")) and t_gen is not None and g >= t_gen
        m_g = modadd_from_state(log["snapshots"][g])
        a = ac.modadd_analysis(m_g, test_rows, p, threshold=cfg["threshold"],
                               samples=cfg["samples"], seed=s, refine=False, kill=kill)
        keys = ("base", "r_energy", "ring", "modes", "r_kill")
        row = {k: a[k] for k in keys if k in a}
        # round 9: the class means' d_eff at every checkpoint (the script's records)
        means_g = ac.modadd_class_means(m_g, test_rows, p).astype(float)
        dims = ac.class_mean_dims(means_g)
        row.update(d_eff=dims["pr"], n_share=dims["n_share"])
        traj.append(dict(step=g, stable=g in stable, **row))
    named = {"memorised": t_mem, "grokking": t_gen}
    named = {k: next((g for g in stable if g >= v), None) for k, v in named.items()
             if v is not None}
    if stable:
        named["end"] = stable[-1]
    return dict(log=log, collapses=col, trajectory=traj,
                named={k: v for k, v in named.items() if v is not None})


# %% [markdown]
# Quick mode: one tiny run per seed and its named checkpoints, analysed in full.

# %%
if quick:
    logs, analysis, states, traj, collapses = {}, {}, {}, {}, {}
    for s in mod_cfg["seeds"]:
        run = live_trajectory(mod_cfg, s)
        logs[s], traj[str(s)], collapses[str(s)] = (
            run["log"], run["trajectory"], run["collapses"])
        analysis[str(s)], states[str(s)] = {}, {}
        for k, st in sorted(run["named"].items(), key=lambda kv: kv[1]):
            m_k = modadd_from_state(run["log"]["snapshots"][st])
            analysis[str(s)][k] = dict(step=st, **analyse(m_k, s))
            states[str(s)][k] = cyclic_states(m_k, s, analysis[str(s)][k]["r_used"])
    curves = {
        s: (logs[s]["step"], logs[s]["test_acc"], logs[s]["train_acc"]) for s in logs
    }
    nowd = None  # the weight-decay-0 control comes from its checkpoint only

# %% [markdown]
# At default parameters the script's checkpoints are loaded (the run and its weight-decay-0 control), and the
# analysis is re-run live on seed 0's stored checkpoints: it must reproduce the stored numbers.

# %%
if not quick:
    mod_cfg = scripts.with_seeds(mod_cfg, SEEDS)  # seed 0: the committed config
    ckpt = checkpoints.load(ac.CHECKPOINT_SLUG, "modadd", config=mod_cfg)
    man = ckpt.manifest
    analysis, traj = man["extra"]["analysis"], man["extra"]["trajectory"]
    collapses = man["extra"]["collapses"]
    h = man["extra"]["log"]  # every logged step (the history keeps at most 500 points)
    curves = {s: (h[str(s)]["step"], h[str(s)]["test_acc"], h[str(s)]["train_acc"])
              for s in mod_cfg["seeds"]}
    nowd_cfg = scripts.with_seeds(ac.checkpoint_config("modadd_nowd"), SEEDS)
    nowd = checkpoints.load(ac.CHECKPOINT_SLUG, "modadd_nowd", config=nowd_cfg).manifest
    s0 = mod_cfg["stored_seed"]
    stored_names = sorted(
        {k.split(".")[0] for k in ckpt.tensors if not k.startswith("states.")}
    )
    live = {n: analyse(modadd_from_state(ckpt.state_dict(f"{n}.")), s0)
            for n in tqdm(stored_names, desc="ACE on stored checkpoints")}
    gaps = [abs(live[n][k] - analysis[str(s0)][n][k]) for n in stored_names
            for k in ("base", "r_energy", "r_nec", "r_suf", "ring", "modes",
                      *(("r_kill",) if mod_cfg.get("kill_rank") else ()))]
    rec.check("modadd_analysis_reproduces", max(gaps), 1e-6, op="<=",
              note=f"live ACE on the stored checkpoints {stored_names} (seed {s0}) "
              "vs the script's numbers")
    print("stored checkpoints re-analysed live:", stored_names)

# %% [markdown]
# The class means that the ring-fraction fit reads are stored for every seed and named checkpoint; for seed 0 they
# must match what its stored weights give.

# %%
if not quick:
    states = {
        str(s): {n: tuple(ckpt.tensors[f"states.{s}.{n}.{k}"].numpy()
                          for k in ("means", "reps")) for n in analysis[str(s)]}
        for s in mod_cfg["seeds"]
    }
    live_states = {
        n: cyclic_states(modadd_from_state(ckpt.state_dict(f"{n}.")), s0,
                         live[n]["r_used"])
        for n in stored_names
    }
    rec.check(
        "stored_states_reproduce",
        max(float(np.abs(a - b).max()) for n in stored_names
            for a, b in zip(live_states[n], states[str(s0)][n])),
        1e-4, op="<=",
        note="class means (layer and core) from the stored weights vs the stored "
        f"states, seed {s0}",
    )


# %% [markdown]
# The ring fraction of the shift operator and its two nulls (permuted labels, random subspace), per seed and named
# checkpoint.

# %%
def ring_of(reps) -> float:
    return ac.ring_fraction(ac.shift_operator_eigs(reps), p)


def ring_nulls(means, reps, draws, seed_) -> dict:
    """Ring fraction of the core and its nulls (permuted labels, random subspace)."""
    rng_ = repro.rng(seed_, 6)
    means, reps = means.astype(np.float64), reps.astype(np.float64)
    order = [ring_of(reps[rng_.permutation(p)]) for _ in range(draws)]
    shape = (means.shape[1], reps.shape[1])
    sub = [
        ring_of(means @ np.linalg.qr(rng_.normal(size=shape))[0]) for _ in range(draws)
    ]
    return dict(ring=ring_of(reps), order_mean=float(np.mean(order)),
                order_q95=float(np.quantile(order, 0.95)),
                sub_mean=float(np.mean(sub)), sub_q95=float(np.quantile(sub, 0.95)))


nulls = {
    s: {n: ring_nulls(*st_s[n], n_null, int(s)) for n in st_s}
    for s, st_s in tqdm(states.items(), desc="ring-fraction nulls")
}
# the fit on the recomputed inputs gives the analysis' ring fraction
rec.check("ring_from_states", max(abs(nl["ring"] - analysis[s][n]["ring"])
                                  for s in nulls for n, nl in nulls[s].items()),
          1e-9, op="<=")
for s, an in analysis.items():
    print(f"seed {s}: collapses after memorisation at steps {collapses[s] or 'none'}")
    for name, a in an.items():
        nl = nulls[s][name]
        print(
            f"  {name:>13} step {a['step']:>5}: test {a['base']:.3f}  r_energy "
            f"{a['r_energy']:>3}  r_nec {a['r_nec']:>3}  r_suf {a['r_suf']:>3}  keep "
            f"{a['keep']:.3f}  remove {a['remove']:.3f}  "
            f"modes {a['modes']}/{p // 2 + 1}"
            f"\n{'':>17}ring {a['ring']:.2f}; 95th pct of the nulls: permuted labels "
            f"{nl['order_q95']:.2f}, random subspace {nl['sub_q95']:.2f}"
        )

# %% [markdown]
# **Why a generalising checkpoint can have a low ring fraction.** The shift `reps[c] -> reps[c+1]` is exact on any set
# of *whole* Fourier planes (each plane rotates by `2 pi k / p`), so the ring fraction asks whether the core holds
# the planes whole. The Fourier spectrum of the class means (`ac.folded_spectrum`, power per frequency k) says how
# many planes carry the computation, and the same spectrum of the means read in the core (the first `r_used`
# directions) says which of them the core keeps whole (> 99% of the plane's power) or cuts (5-95%). A core that
# cuts many planes gives a shift that no linear map fits exactly, and its eigenvalues fall inside the circle even
# when the network computes the sum perfectly.

# %%
def plane_reading(means, reps, share=0.9):
    """Planes holding `share` of the class means' power; of those, kept whole / cut
    by the core."""
    full, core_ = ac.folded_spectrum(means.astype(np.float64)), ac.folded_spectrum(
        reps.astype(np.float64))
    top = np.argsort(full)[::-1][: int(np.searchsorted(
        np.cumsum(np.sort(full)[::-1]) / full.sum(), share) + 1)]
    kept = core_[top] / np.maximum(full[top], 1e-300)
    return dict(n_top=len(top), whole=int((kept > 0.99).sum()),
                cut=int(((kept > 0.05) & (kept < 0.95)).sum()),
                captured=float(core_.sum() / full.sum()))


planes = {s: {n: plane_reading(*states[s][n]) for n in states[s]} for s in states}
for s, an in analysis.items():
    for name, a in an.items():
        pr = planes[s][name]
        print(f"seed {s} {name:>13}: ring {a['ring']:.2f} at rank {a['r_used']}; "
              f"{pr['n_top']} of {p // 2} frequencies hold 90% of the class means' "
              f"power, "
              f"the core keeps {pr['whole']} whole and cuts {pr['cut']} "
              f"({pr['captured']:.3f} of the power captured)")

# %% tags=["remove-input"]
def _span(v):
    v = [x for x in v if x is not None]
    return "-" if not v else (f"{min(v)}" if min(v) == max(v) else f"{min(v)}-{max(v)}")


def _listed(v):
    return ", ".join(str(x) for x in v)


PAPER_GROK_RANK = 15  # the paper's core dimension at grokking (p = 53, d = 128)
at_g = {s: (analysis[s]["grokking"], planes[s]["grokking"]) for s in analysis
        if "grokking" in analysis[s]}
if at_g:
    g_ring = [a["ring"] for a, _ in at_g.values()]
    display(Markdown(
        "**Reading it.** At grokking the class means spread 90% of their power over "
        + _listed(pr["n_top"] for _, pr in at_g.values()) + f" of the {p // 2} "
        "frequencies (seeds " + _listed(at_g) + "); the energy core (rank "
        + _listed(a["r_used"] for a, _ in at_g.values()) + ", against the paper's ~"
        f"{PAPER_GROK_RANK}) keeps " + _listed(pr["whole"] for _, pr in at_g.values())
        + " of those planes whole and cuts "
        + _listed(pr["cut"] for _, pr in at_g.values()) + ", while holding "
        + _listed(f"{pr['captured']:.3f}" for _, pr in at_g.values())
        + " of the power; its ring fraction is "
        + _listed(f"{v:.2f}" for v in g_ring) + ". At our scale the core is not "
        "compact at grokking and cuts planes of similar power, so most eigenvalues of "
        "its shift fall inside the circle although the network computes the sum: a "
        "ring fraction (and a mode count) read in a truncated core is a weak probe of "
        "the cyclic algorithm here, and `modadd_core_cyclic` asks only that it beat "
        "its nulls, not that the eigenvalues lie on the circle."))


# %% [markdown]
# **Inflation, judged on a smoothed trend.** A single end checkpoint can sit in a spike; the trajectory cannot
# hide one. Per seed, the energy ranks of the stable checkpoints from the grokking checkpoint on are smoothed by
# `ac.trend_ratio`: the median of the last five over the median of the first five (500 steps each). The paper's
# picture (~15-D at grokking, ~60-D later) is a ratio near 4; the claim asks for more than `1.3`. The control trained
# without weight decay (the paper: no mode proliferation without it) covers the first 4000 steps only, so it is
# compared with the run's trend over those same steps, not with the run's whole trend.

# %%
def stable_ranks(tr_s, from_step, key="r_energy"):
    pts = [(t["step"], t[key]) for t in tr_s
           if t["stable"] and t["step"] >= from_step and t.get(key) is not None]
    return [x for x, _ in pts], [max(r, 1) for _, r in pts]


TREND_W = 2 if quick else 5  # checkpoints per end of the smoothed trend
INFLATE_BAR = 1.3  # the trend modadd_core_inflates asks for (fixed with the claim)
trend, trend_nowd, trend_same = {}, {}, {}  # same: the run over the control's steps
for s, an in analysis.items():
    trend[s] = trend_nowd[s] = trend_same[s] = None
    if "grokking" not in an:
        continue
    st_s, r_s = stable_ranks(traj[s], an["grokking"]["step"])
    trend[s] = ac.trend_ratio(r_s, TREND_W) if len(r_s) >= 2 * TREND_W else None
    if nowd is not None and s in nowd["extra"]["trajectory"]:
        st_n, r_n = stable_ranks(nowd["extra"]["trajectory"][s], an["grokking"]["step"])
        same = [r for x, r in zip(st_s, r_s) if x <= st_n[-1]] if st_n else []
        if len(r_n) >= 2 * TREND_W and len(same) >= 2 * TREND_W:
            trend_nowd[s] = ac.trend_ratio(r_n, TREND_W)
            trend_same[s] = ac.trend_ratio(same, TREND_W)
KILL = bool(mod_cfg.get("kill_rank"))  # round 7's registered observable, r_kill
trend_kill, kill_ends = {}, {}  # seed -> trend; seed -> (first, last) medians
for s, an in analysis.items():
    trend_kill[s] = None
    if KILL and "grokking" in an:
        r_k = stable_ranks(traj[s], an["grokking"]["step"], key="r_kill")[1]
        if len(r_k) >= 2 * TREND_W:
            trend_kill[s] = ac.trend_ratio(r_k, TREND_W)
            kill_ends[s] = (float(np.median(r_k[:TREND_W])),
                            float(np.median(r_k[-TREND_W:])))
# added at review (2026-12-06): how far r_kill can go. The answer's information at the
# layer lies in the span of the p class means (at most p - 1 directions), so r_kill
# has little room past p - 1; the largest r_kill measured anywhere on the trajectory,
# and the share of p - 1 that the bar asks for from the trend's start (condition
# r_kill_headroom, section 6: <= 1 where the bar is reachable below p - 1)
kill_max = max((t["r_kill"] for s in analysis for t in traj[s]
                if t.get("r_kill") is not None), default=None)
kill_room = {}  # seed -> INFLATE_BAR * first-five median of r_kill / (p - 1)
for s, an in analysis.items():
    first = kill_ends[s][0] if s in kill_ends else an.get("grokking", {}).get("r_kill")
    kill_room[s] = 0.0 if first is None else INFLATE_BAR * first / (p - 1)
print("smoothed rank trend after grokking (last / first medians), per seed:", trend)
if KILL:
    print("the same trend of r_kill (the registered observable):", trend_kill)
    print(f"largest r_kill on any checkpoint: {kill_max} (p - 1 = {p - 1}); the bar "
          "from the trend's start as a share of p - 1:",
          {s: round(v, 3) for s, v in kill_room.items()})
print("the run over the control's steps:", trend_same)
print("the weight-decay-0 control over its steps:", trend_nowd)

# %% [markdown]
# The figure shows, per seed, train (dotted) and test accuracy with the collapses marked (x), the energy rank of
# every checkpoint (filled: stable, hollow: near a collapse; grey: the weight-decay-0 control), and the ring
# fraction at the named checkpoints against the stronger null's 95th percentile.

# %%
fig, ax = plt.subplots(1, 3, figsize=(13, 3.8))
for k, (s, (st, te_acc, tr_acc)) in enumerate(curves.items()):
    c, s_ = f"C{k}", str(s)
    ax[0].plot(st, te_acc, color=c, lw=1, label=f"test acc, seed {s}")
    ax[0].plot(st, tr_acc, color=c, lw=1, ls=":")
    acc_at = dict(zip(st, tr_acc))
    ax[0].scatter(collapses[s_], [acc_at[x] for x in collapses[s_]], color=c,
                  marker="x")
    pts = traj[s_]
    ax[1].plot([t["step"] for t in pts], [t["r_energy"] for t in pts], color=c, lw=0.8)
    ax[1].scatter([t["step"] for t in pts], [t["r_energy"] for t in pts], s=12,
                  facecolors=[c if t["stable"] else "none" for t in pts], edgecolors=c)
    pk = [t for t in pts if t.get("r_kill") is not None and t["stable"]]
    if pk:
        ax[1].plot([t["step"] for t in pk], [t["r_kill"] for t in pk], color=c,
                   lw=1.2, ls="-.", marker="^", ms=3)
    if nowd is not None and s_ in nowd["extra"]["trajectory"]:
        pn = nowd["extra"]["trajectory"][s_]
        ax[1].plot([t["step"] for t in pn], [t["r_energy"] for t in pn], color="0.6",
                   lw=0.8, ls="--")
    an = analysis[s_]
    ax[2].plot([a["step"] for a in an.values()], [a["ring"] for a in an.values()],
               color=c, marker="o", ms=3, label=f"ring fraction, seed {s}")
    ax[2].plot([a["step"] for a in an.values()],
               [max(nulls[s_][n]["order_q95"], nulls[s_][n]["sub_q95"]) for n in an],
               color=c, ls=":", marker="x", lw=1)
ax[0].set(xlabel="step", ylabel="accuracy (dotted: train)", ylim=(0, 1.05),
          title="accuracy; x: collapses")
ax[0].legend(fontsize=7, loc="center right")
ax[1].set(xlabel="step", ylabel="rank",
          title="energy rank; dash-dot: r_kill" if KILL else
          "energy rank (dashed grey: wd 0)")
ax[2].set(xlabel="step", ylim=(0, 1.05), title="ring fraction (x: stronger null)")
ax[2].legend(fontsize=7)
plt.tight_layout()
plt.show()

# %% [markdown]
# The slider walks through the named checkpoints of the first seed: the eigenvalues of the fitted shift operator
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
    axs[0].set(xlim=(-1.4, 1.4), ylim=(-1.4, 1.4), aspect="equal", xlabel="Re",
               ylabel="Im", title=f"{name}: rank {a['r_energy']}, ring {a['ring']:.2f}")
    axs[1].plot(st_show, te_show, color="k")
    axs[1].axvline(a["step"], color="C3")
    axs[1].set(xlabel="step", ylabel="test accuracy", ylim=(0, 1.05))


plotting.static_slider(
    range(len(frames)), draw_eigs, figsize=(8.5, 3.6), label="checkpoint", fmt="{}"
)


# %% tags=["remove-input"]
grokked = {s: an for s, an in analysis.items() if "grokking" in an}
if not grokked:
    reading = ("**Reading it.** No seed grokked in this run, so there is no core at "
               "grokking to compare the later trajectory with.")
else:
    n_col = [len(collapses[s]) for s in grokked]
    r_g = [an["grokking"]["r_energy"] for an in grokked.values()]
    r_e = [an["end"]["r_energy"] for an in grokked.values()]
    tr_v = [trend[s] for s in grokked if trend[s] is not None]
    up = sum(v > 1 for v in tr_v)
    d_gap = [trend_same[s] - trend_nowd[s] for s in grokked
             if trend_same.get(s) is not None and trend_nowd.get(s) is not None]
    # seeds where the run rises more than twice as much as the control, same steps
    beyond = [s for s in grokked if trend_same.get(s) is not None and trend_nowd.get(s)
              is not None and trend_same[s] - 1 > 2 * max(trend_nowd[s] - 1, 0)]
    n_ctl = nowd["config"]["steps"] if nowd is not None else None
    med_ends = {}  # seed -> medians of the first and last TREND_W stable ranks
    for s in grokked:
        r_s = stable_ranks(traj[s], grokked[s]["grokking"]["step"])[1]
        if len(r_s) >= 2 * TREND_W:
            med_ends[s] = (float(np.median(r_s[:TREND_W])),
                           float(np.median(r_s[-TREND_W:])))
    reading = (
        f"**Reading it.** The trajectories have {_listed(n_col)} collapse(s) after "
        "memorisation per seed"
        + (" (the first at step "
           + _listed(collapses[s][0] if collapses[s] else "-" for s in grokked) + ")"
           if any(collapses[s] for s in grokked) else "")
        + f". The core's energy rank is {_span(r_g)} (layer width "
        f"{mod_cfg['d']}) at grokking and {_span(r_e)} at the last stable checkpoint; "
        f"the smoothed trend (last over first five stable checkpoints after grokking) "
        f"is {_listed(f'{v:.2f}' for v in tr_v) or 'not measurable'}, so the energy "
        "rank "
        + ("rises" if tr_v and up == len(tr_v) else "falls" if tr_v and up == 0
           else "moves in no single direction")
        + " after grokking"
        + (" at every seed" if tr_v and up in (0, len(tr_v)) else "")
        + (" (median rank of the first / last five stable checkpoints: "
           + "; ".join(f"{a:g} -> {b:g}" for a, b in med_ends.values())
           + ", a rise of " + _span([int(b - a) for a, b in med_ends.values()])
           + f" of the layer's {mod_cfg['d']} dimensions; the paper's ~15 -> ~60 is "
           "a factor of about 4)" if med_ends else "")
        + (f". Over the control's {n_ctl} steps the run's trend is "
           f"{_listed(f'{trend_same[s]:.2f}' for s in grokked if trend_same.get(s))}"
           f" and the weight-decay-0 control's "
           f"{_listed(f'{v:.2f}' for v in trend_nowd.values() if v is not None)}"
           f" (with weight decay minus without, per seed: "
           f"{_listed(f'{v:+.2f}' for v in d_gap)}), so over those steps "
           + ("the movement is not specific to weight decay (the control moves at "
              "least half as much at every seed)." if not beyond else
              f"the run rises more than twice as much as the control at seed(s) "
              f"{', '.join(beyond)}.")
           if d_gap else ".")
        + f" {sum(v > INFLATE_BAR for v in tr_v)} of {len(tr_v)} trends exceed the "
        f"`{INFLATE_BAR}` bar (since round 8 `modadd_core_inflates` reads another "
        "observable on another run, below)."
        + " Fourier modes go from "
        + _listed(an["grokking"]["modes"] for an in grokked.values())
        + " at grokking to "
        + _listed(an["end"]["modes"] for an in grokked.values())
        + " at "
        f"the end, of {p // 2 + 1}."
    )
    tk = [trend_kill[s] for s in grokked if trend_kill.get(s) is not None]
    if KILL and tk:
        reading += (
            " **The registered observable, `r_kill`** (leading ACE directions to "
            "remove before the sum is lost), is "
            + _listed(grokked[s]["grokking"].get("r_kill") for s in grokked)
            + f" of {mod_cfg['d']} at grokking (the paper's core: ~{PAPER_GROK_RANK}) "
            "and " + _listed(grokked[s]["end"].get("r_kill") for s in grokked)
            + " at the "
            "end; medians of the first / last five stable checkpoints "
            + "; ".join(f"{a:g} -> {b:g}" for a, b in kill_ends.values())
            + ", a smoothed trend of " + _listed(f"{v:.2f}" for v in tk) + ": "
            + f"{sum(v > INFLATE_BAR for v in tk)} of {len(tk)} above the "
            f"`{INFLATE_BAR}` bar. Removing about "
            + _span([grokked[s]["grokking"].get("r_kill") for s in grokked])
            + " directions is needed to stop the computation already at grokking"
            + (": at our scale the computation is spread over many directions when "
               "it appears, not compact"
               if min(grokked[s]["grokking"].get("r_kill") or 0 for s in grokked)
               > 2 * PAPER_GROK_RANK else "")
            + "; after grokking it "
            + ("spreads further at every seed." if min(tk) > INFLATE_BAR else
               "does not spread much further at any seed on this trajectory (whose "
               "weight-decay pull after grokking is counted below)."
               if max(tk) <= INFLATE_BAR else
               "spreads further at some seeds only.")
            + f" *Added at review:* no checkpoint has `r_kill` above {kill_max} "
            f"(`p - 1` = {p - 1}, the directions that the {p} class means span), and "
            f"the bar asks for {_listed(f'{v:.0%}' for v in kill_room.values())} of "
            f"`p - 1` from where the trend starts (seeds {_listed(kill_room)}): "
            + ("above the room `r_kill` has at every seed, so on this run the trend "
               "cannot show inflation whether or not it happens (condition "
               "`r_kill_headroom`, section 6, made this reading of "
               "`modadd_core_inflates`, the one before round 8, inconclusive)."
               if min(kill_room.values()) > 1 else
               "within that room at some seed (condition `r_kill_headroom`, "
               "section 6).")
        )
display(Markdown(reading))


# %% [markdown]
# **How much weight decay the trajectory saw.** AdamW's decoupled decay multiplies every weight by `1 - lr * wd`
# per step, so `lr * wd * steps` (summed over the steps, with the rate each step had) counts the e-folds of pure
# decay a run applies. Halving the learning rate halved that pull per step, and decaying it after grokking (round
# 7) cut the pull after grokking by far more than 11000 steps can make up. Below: this run's exposure
# beside the paper's (lr 1e-3, wd 1, ~2000 epochs of minibatches of 512, grokking at about epoch 800), the same
# smoothed trend read at the checkpoint where the pull after grokking equals the paper's (the median of the five
# stable checkpoints up to it over the first five), whether the rank was still rising when the run ended (the
# trend over the second half of the stable checkpoints after grokking), the rank of the untrained network at
# step 0, and the test accuracy the weight-decay-0 control reaches.

# %% tags=["remove-input"]
PAPER_LR, PAPER_EPOCHS, PAPER_GROK_EPOCH, PAPER_BATCH = 1e-3, 2000, 800, 512
paper_spe = len(train_rows) / PAPER_BATCH  # the paper's steps per epoch on our split
expo_paper = PAPER_LR * 1.0 * PAPER_EPOCHS * paper_spe
expo_paper_post = PAPER_LR * 1.0 * (PAPER_EPOCHS - PAPER_GROK_EPOCH) * paper_spe
LATE = mod_cfg.get("late_decay")  # round 7: lr decayed after the run's grokking step
late_pull = mod_cfg["lr"] * mod_cfg["wd"] * (LATE["to"] if LATE else 1.0)  # per step


def pull(a, b, g):
    """lr * wd summed over the steps a+1..b of a run that grokked at step g."""
    f = (lambda t: ac.post_grokking_lr_factor(t, g, **LATE)) if LATE else (lambda t: 1)
    return mod_cfg["lr"] * mod_cfg["wd"] * sum(f(t) for t in range(a + 1, b + 1))


t_gens = {s: next((st for st, a in zip(*curves[int(s)][:2])  # first test >= gen_acc
                  if a >= mod_cfg["gen_acc"]), None) for s in grokked}
expo_all = {s: pull(0, mod_cfg["steps"], t_gens[s]) for s in grokked}
expo = float(np.mean(list(expo_all.values()))) if expo_all else float("nan")
expo_post, late, r0, nowd_end, at_paper = {}, {}, {}, {}, {}
for s, an in grokked.items():
    g_step = an["grokking"]["step"]
    expo_post[s] = pull(g_step, mod_cfg["steps"], t_gens[s])
    st_s, r_s = stable_ranks(traj[s], g_step)
    # the stable checkpoints up to the step where the pull after grokking is the paper's
    upto = [r for x, r in zip(st_s, r_s)
            if x <= g_step + expo_paper_post / (mod_cfg["lr"] * mod_cfg["wd"])]
    if expo_post[s] >= expo_paper_post and len(upto) >= 2 * TREND_W:
        at_paper[s] = ac.trend_ratio(upto, TREND_W)
    half = r_s[len(r_s) // 2:]
    late[s] = ac.trend_ratio(half, TREND_W) if len(half) >= 2 * TREND_W else None
    r0[s] = next((t["r_energy"] for t in traj[s] if t["step"] == 0), None)
    if nowd is not None and s in nowd["extra"]["trajectory"]:
        nowd_end[s] = nowd["extra"]["trajectory"][s][-1]["base"]
ctl = [v for v in trend_nowd.values() if v is not None]


def vs_control(vals: dict) -> str:
    """How trends compare with the bar and with the weight-decay-0 control's drift."""
    v = [x for x in vals.values() if x is not None]
    if not v:
        return ""
    out = f": {sum(x > INFLATE_BAR for x in v)} of {len(v)} above the `{INFLATE_BAR}` bar"
    if ctl:
        n_in = sum(x <= max(ctl) for x in v)
        out += (f", {n_in} of {len(v)} no larger than the drift of the weight-decay-0 "
                f"control over its {nowd['config']['steps']} steps ("
                + _listed(f"{x:.2f}" for x in ctl) + ")")
    return out


def late_reading() -> str:
    """Was the rank still moving over the second half of the stable checkpoints?"""
    v = {s: x for s, x in late.items() if x is not None}
    n_up = sum(x > 1.0 + 1e-9 for x in v.values())
    return (f"; the rank still rose over the second half at {n_up} of {len(v)} seeds"
            + (f", by a factor of at most {max(v.values()):.2f}" if n_up else "")
            + vs_control(v).replace(":", ";", 1) + ". ")


if grokked:
    display(Markdown(
        f"**Reading it.** This run applies `lr * wd * steps` = {expo:.1f} e-folds of "
        f"decay in all (mean over seeds) and {_listed(f'{v:.2f}' for v in expo_post.values())} after "
        f"grokking (seeds {_listed(grokked)}); the paper's configuration, at "
        f"{paper_spe:.2f} steps per epoch on this split, applies about "
        f"{expo_paper:.1f} and {expo_paper_post:.1f}: "
        f"{np.mean(list(expo_post.values())) / expo_paper_post:.0%} of its "
        "post-grokking pull. "
        + ("Read where the pull after grokking equals the paper's, the smoothed rank "
           "trend is " + _listed(f"{v:.2f}" for v in at_paper.values())
           + f" (seeds {_listed(at_paper)})" + vs_control(at_paper) + ". "
           if at_paper else "")
        + ("Over the second half of the stable checkpoints after grokking the "
           "smoothed rank trend is "
           + _listed(f"{v:.2f}" for v in late.values() if v is not None)
           + late_reading() if any(v is not None for v in late.values())
           else "")
        + ("The untrained network at step 0 already has an energy rank of "
           + _listed(r0.values()) + " (the last stable checkpoint: "
           + _listed(an["end"]["r_energy"] for an in grokked.values())
           + "): the energy rank also counts directions that an untrained network "
           "has, so its size alone does not mark a redundant algorithm. "
           if all(v is not None for v in r0.values()) else "")
        + ("The weight-decay-0 control never generalises (test accuracy "
           + _listed(f"{v:.2f}" for v in nowd_end.values())
           + " at its last checkpoint), so it is a control for how the rank drifts "
           "with training steps, not a grokked network without decay. "
           if nowd_end and max(nowd_end.values()) < mod_cfg["gen_acc"] else "")
        + "The late-decay trajectory (the one `modadd_core_inflates` read until "
        "round 8) applies "
        + ("at least the paper's exposure after grokking at every seed."
           if min(expo_post.values()) >= expo_paper_post else
           f"{min(expo_post.values()) / expo_paper_post:.0%} or more of the paper's "
           "exposure after grokking: "
           + ("with the rate decayed after grokking to "
              f"{mod_cfg['lr'] * LATE['to']:g} (the price of the stable run), the "
              "paper's pull after grokking would take about "
              + f"{(expo_paper_post - min(expo_post.values())) / late_pull:,.0f}"
              " more steps." if LATE else
              f"a run with the paper's exposure at lr {mod_cfg['lr']:g} would need "
              f"about {expo_paper / (mod_cfg['lr'] * mod_cfg['wd']):,.0f} steps."))))

# %% [markdown]
# ### Round 8: inflation read on a trajectory that keeps the paper's pull
#
# The late-decay run above is stable but applies a fraction of the paper's weight decay after grokking (counted
# above), and `r_kill` has no room to rise on it. Round 8 (issue #71) registered a new reading before the runs it governs were
# read (`make_modadd.py`'s docstring; the staged runs' log tails had been seen by the integrator, not read here):
#
# * **the trajectory**: round 7's second probe setting, Adam epsilon `1e-4` at the constant rate 5e-4 with no
#   late decay (checkpoint `modadd_eps`, 3 seeds, stored as records: the accuracy log, the ranks at every
#   checkpoint and the class means at grokking and at the end; no weights). Its weight-decay pull after
#   grokking is at least the paper's (counted below); `no_collapse`'s rule and bar are measured on it again
#   (`eps_no_collapse`).
# * **the observable**: `d_eff`, the participation ratio `(sum s)^2 / sum s^2` of the spectrum `s` of the centred
#   class means (the answer's mean layer-2 state, per answer). Centring removes frequency 0 and by Parseval the
#   rest of the class means' Fourier power is spread over directions exactly as `s`, so `d_eff` counts how many
#   directions share that power: `k` for `k` equal directions, and it can rise up to `p - 1`
#   (`ac.class_mean_dims`). Round 8's reading of `modadd_core_inflates` was `d_eff(end) / d_eff(grokking) > 1.3`
#   per seed (the bar unchanged), given `d_eff_headroom`: `1.3 x d_eff(grokking) <= p - 1`, so the bar is
#   reachable. Since round 9 (below) that ratio is the claim's second reading.
# * **beside it, exploratory**: the previous reviewer's candidate, the number of directions holding 99% of that
#   power (`n_share`; found on the late-decay run's stored means, and recomputed there by this round's builder to
#   pin its definition before registering, so it is not the claim's value), round 7's `r_kill` trend, and the
#   same ratio on the late-decay run (far less pull after grokking: if weight decay drives the rise, the eps run
#   should rise more). Round 8 read only two checkpoints per seed, because the class means were stored there
#   only (both stable checkpoints); round 9 (below) reads `d_eff` at every checkpoint.

# %%
EFF_ROOM = min(p - 1, mod_cfg["d"])  # the most directions the class means can span


def d_eff_read(means, curves_) -> dict:
    """Per seed: class_mean_dims at grokking and end, their ratios, the room the
    1.3 bar needs, and the largest training-accuracy drop after grokking."""
    out = {}
    for s, ms in means.items():
        if not {"grokking", "end"} <= set(ms):
            continue  # a run that never grokked
        g, e = (ac.class_mean_dims(np.asarray(ms[n], dtype=np.float64))
                for n in ("grokking", "end"))
        _, te_, tr_ = curves_[s]
        i = next((k for k, a in enumerate(te_) if a >= mod_cfg["gen_acc"]),
                 len(te_) - 1)
        out[s] = dict(g=g, e=e, ratio=e["pr"] / g["pr"],
                      room=INFLATE_BAR * g["pr"] / EFF_ROOM,
                      n_ratio=e["n_share"] / g["n_share"],
                      n_room=INFLATE_BAR * g["n_share"] / EFF_ROOM,
                      drop=ac.largest_drop(tr_, i))
    return out


means_ld = {s: {n: v[0] for n, v in states[s].items()} for s in states}
curves_ld = {s: curves[int(s)] for s in states}
if quick:  # no stored eps run: the live tiny run is read the same way
    eps_named, eps_traj, eff_ld = {s: an["grokking"]["step"] for s, an in
                                   grokked.items()}, traj, {}
    eff = d_eff_read(means_ld, curves_ld)
else:
    eps_cfg = scripts.with_seeds(ac.checkpoint_config("modadd_eps"), SEEDS)
    eps_ck = checkpoints.load(ac.CHECKPOINT_SLUG, "modadd_eps", config=eps_cfg)
    ex = eps_ck.manifest["extra"]
    eps_named, eps_traj = {s: v["grokking"] for s, v in ex["named"].items()
                           if "grokking" in v}, ex["trajectory"]
    eff = d_eff_read(
        {s: {n: eps_ck.tensors[f"states.{s}.{n}.means"] for n in ("grokking", "end")}
         for s in eps_named},
        {s: (v["step"], v["test_acc"], v["train_acc"]) for s, v in ex["log"].items()})
    eff_ld = d_eff_read(means_ld, curves_ld)  # the late-decay run, second reading
# r_kill's trend (round 7) on this run; added at review: the ACE core's own readings
# at grokking / end (eps_an) and its smoothed energy-rank trend (exploratory)
eps_an, eps_kill, eps_rank = analysis if quick else ex["analysis"], {}, {}
for s, g_step in eps_named.items():
    r_k = stable_ranks(eps_traj[s], g_step, key="r_kill")[1]
    r_e = stable_ranks(eps_traj[s], g_step)[1]
    if len(r_k) >= 2 * TREND_W:
        eps_kill[s] = (ac.trend_ratio(r_k, TREND_W),
                       INFLATE_BAR * float(np.median(r_k[:TREND_W])) / EFF_ROOM)
    if len(r_e) >= 2 * TREND_W:
        eps_rank[s] = ac.trend_ratio(r_e, TREND_W)
for run, e_ in (("eps 1e-4", eff), ("late decay", eff_ld)):
    for s, v in e_.items():
        print(f"{run:>10} seed {s}: d_eff {v['g']['pr']:.1f} -> {v['e']['pr']:.1f} "
              f"(ratio {v['ratio']:.2f}, room {v['room']:.2f}); 99% count "
              f"{v['g']['n_share']} -> {v['e']['n_share']}; largest drop after "
              f"grokking {v['drop']:.3f}")
print("r_kill trend on the eps run (trend, room):",
      {s: (round(a, 2), round(b, 2)) for s, (a, b) in eps_kill.items()})

# %% [markdown]
# Per seed, `d_eff` and the 99% count at grokking and at the end, on the eps run (solid) and the late-decay run
# (dashed); the grey line is `p - 1`, the most directions the class means can span.

# %%
fig, ax = plt.subplots(1, 2, figsize=(8.5, 3.2))
for run, e_, ls in (("eps 1e-4", eff, "-"), ("late decay", eff_ld, "--")):
    for s, v in e_.items():
        for a_, key in ((ax[0], "pr"), (ax[1], "n_share")):
            a_.plot([0, 1], [v["g"][key], v["e"][key]], ls, color=f"C{int(s)}",
                    marker="o", label=f"{run}, seed {s}")
for a_, t_ in zip(ax, ("d_eff (participation ratio)", "directions holding 99%")):
    a_.axhline(EFF_ROOM, color="0.6", lw=0.8)
    a_.set(xticks=[0, 1], xticklabels=["grokking", "end"], xlim=(-0.2, 1.2),
           ylim=(0, EFF_ROOM + 4), title=t_)
ax[0].legend(fontsize=6)
plt.tight_layout()
plt.show()

# %% tags=["remove-input"]
if eff:
    vs, vl = list(eff.values()), list(eff_ld.values())
    e_held = [s for s, v in eff.items() if v["drop"] <= mod_cfg["collapse_drop"]
              and v["room"] <= 1 and v["ratio"] > INFLATE_BAR]
    n_dir = {"falls" if v["e"]["n_share"] < v["g"]["n_share"] else "rises"
             if v["e"]["n_share"] > v["g"]["n_share"] else "stays" for v in vs}
    eps_pull = {s: mod_cfg["lr"] * mod_cfg["wd"] * (mod_cfg["steps"] - g)
                for s, g in eps_named.items()}
    more = [s for s in eff_ld if s in eff and eff_ld[s]["ratio"] > eff[s]["ratio"]]
    txt = ("**Reading it.** " + ("Quick mode reads the live tiny run in place of the "
                                 "stored eps run. " if quick else "")
           + "The largest training-accuracy drop after grokking is "
           + _listed(f"{v['drop']:.3f}" for v in vs) + " (seeds " + _listed(eff)
           + f"; `eps_no_collapse` asks `<= {mod_cfg['collapse_drop']}`). `d_eff` "
           "goes from " + _listed(f"{v['g']['pr']:.1f}" for v in vs)
           + " at grokking to " + _listed(f"{v['e']['pr']:.1f}" for v in vs)
           + " at the end, ratios " + _listed(f"{v['ratio']:.2f}" for v in vs)
           + f" against the `{INFLATE_BAR}` bar; the bar needs "
           + _listed(f"{v['room']:.0%}" for v in vs)
           + f" of the {EFF_ROOM} directions available (`d_eff_headroom`), so it is "
           + ("reachable at every seed. " if max(v["room"] for v in vs) <= 1
              else "out of reach at some seed. "))
    txt += ("The power spreads over more directions after grokking at every seed, "
            if min(v["ratio"] for v in vs) > 1 else
            "The power does not spread over more directions at every seed, ")
    txt += (f"by more than the bar at seed(s) {_listed(e_held)} only"
            if e_held and len(e_held) < len(eff) else
            "by more than the bar at every seed" if e_held else
            "by less than the bar at every seed")
    txt += ("; the paper's ~15 -> ~60 is a factor of about 4, and at our scale the "
            "power already spreads over " + _span([round(v["g"]["pr"]) for v in vs])
            + " directions at grokking. The 99% count "
            + (f"{next(iter(n_dir))} at every seed" if len(n_dir) == 1
               else "moves both ways")
            + " (" + "; ".join(f"{v['g']['n_share']} -> {v['e']['n_share']}"
                               for v in vs) + ")"
            + (": fewer directions hold 99% of the power while it spreads more "
               "evenly over the strong ones. "
               if n_dir == {"falls"} else ". "))
    ratios = [v["ratio"] for v in vs]
    spread = max(ratios) - min(ratios)
    if len(ratios) > 1:  # added at review: the margin against the seeds' spread
        top = max(r - INFLATE_BAR for r in ratios)
        txt += ("*Added at review:* the margins over the bar are "
                + _listed(f"{r - INFLATE_BAR:+.2f}" for r in ratios)
                + f" and the ratio varies by {spread:.2f} across seeds"
                + (f"; the largest margin ({top:+.2f}) is smaller than that spread, "
                   "so which side of the bar a seed lands on is within run-to-run "
                   "variation. " if 0 < top < spread else ". "))
    an_e = {s: eps_an[s] for s in eff if {"grokking", "end"} <= set(eps_an.get(s, {}))}
    if an_e:  # added at review: the paper's own core observables on the same run
        def ge(key, fmt="{}"):
            return (_listed(fmt.format(a["grokking"][key]) for a in an_e.values())
                    + " -> " + _listed(fmt.format(a["end"][key]) for a in an_e.values()))
        n_up = sum(a["end"]["modes"] > a["grokking"]["modes"] for a in an_e.values())
        txt += ("*Added at review, exploratory:* on the same run the ACE core's energy "
                "rank goes " + ge("r_energy")
                + (" (smoothed trend after grokking "
                   + _listed(f"{v:.2f}" for v in eps_rank.values()) + ")"
                   if eps_rank else "")
                + ", the Fourier modes of its shift operator " + ge("modes")
                + f" of {p // 2 + 1} and its ring fraction " + ge("ring", "{:.2f}")
                + f": the mode count rises at {n_up} of {len(an_e)} seeds (the paper: "
                "it approaches 27 under continued decay)"
                + (", so on the paper's own observables the core does not inflate on "
                   "this run; `d_eff` sees the class means' power spread, not more "
                   "cyclic modes in the core. " if n_up == 0 else ". "))
    if eps_kill:
        txt += ("Round 7's `r_kill` trend on this run is "
                + _listed(f"{a:.2f}" for a, _ in eps_kill.values())
                + ", its bar at " + _listed(f"{b:.0%}" for _, b in eps_kill.values())
                + " of `p - 1` (above 100%: out of its reach; exploratory). ")
    if eff_ld:
        txt += ("**The late-decay run**, whose pull after grokking is "
                + _listed(f"{expo_post[s]:.2f}" for s in eff_ld if s in expo_post)
                + " against this run's "
                + _listed(f"{v:.2f}" for v in eps_pull.values())
                + ", goes from " + _listed(f"{v['g']['pr']:.1f}" for v in vl)
                + " to " + _listed(f"{v['e']['pr']:.1f}" for v in vl) + " (ratios "
                + _listed(f"{v['ratio']:.2f}" for v in vl)
                + f"): it rises more at {len(more)} of {len(eff_ld)} seeds"
                + (", so at our scale the spread after grokking does not grow with "
                   "the weight-decay pull: the run whose rate was decayed spreads "
                   "more. Which difference between the runs (the late rate, Adam's "
                   "epsilon) causes it is not tested here." if len(more) == len(vl)
                   else "."))
    pts = [(eps_an[s]["grokking"]["base"], v["g"]["pr"]) for s, v in eff.items()
           if s in an_e]
    pts += [(analysis[s]["grokking"]["base"], v["g"]["pr"]) for s, v in eff_ld.items()]
    if len(pts) >= 4:  # added at review: where the grokking checkpoint falls
        rho_g = ac.spearman([a for a, _ in pts], [b for _, b in pts])
        txt += (f" *Added at review, exploratory:* over the {len(pts)} runs (this run's "
                "seeds, then the late-decay run's) the test accuracy at the grokking "
                "checkpoint is " + _listed(f"{a:.3f}" for a, _ in pts)
                + f" and its rank correlation with `d_eff` there is {rho_g:+.2f}"
                + (": the earlier on the rise the 100-step checkpoint grid catches a "
                   "run, the smaller the denominator and the larger the ratio, so part "
                   "of the ratio's spread is where the checkpoint falls, not what "
                   "happens after grokking." if rho_g > 0.5 else "."))
    display(Markdown(txt))

# %% [markdown]
# ### Round 9: inflation judged on a smoothed trend of `d_eff`
#
# Round 8 read `d_eff` at two checkpoints, but issue #71 asked from the start that inflation be judged on a
# smoothed trend, and round 8's review found that where the 100-step checkpoint grid catches the grokking rise
# drives `d_eff` at grokking, the ratio's denominator. Round 9 registered (`make_modadd.py`'s docstring) a new
# reading, committed before the run it governs but **after round 8's two-checkpoint ratios had been seen**; it
# can move the verdict either way. The eps run was re-run with `d_eff` (and the 99% count) recorded at every
# checkpoint, as records (the training is unchanged, so the re-run must reproduce round 8's stored records).
# `modadd_core_inflates` now reads `d_eff` as the energy rank is read above: over the stable checkpoints from the
# grokking checkpoint on, `ac.trend_ratio` (the median of the last five over the median of the first five)
# `> 1.3` per seed, given `eps_no_collapse` and `d_eff_headroom` on the trend's start (`1.3 x` the first-five
# median `<= p - 1`). The two-checkpoint ratio above is kept as the second reading.

# %%
eff_trend = {}  # seed -> round 9's smoothed d_eff reading on the eps run
for s, g_step in eps_named.items():
    st_d, r_d = stable_ranks(eps_traj[s], g_step, key="d_eff")
    n_d = stable_ranks(eps_traj[s], g_step, key="n_share")[1]
    if len(r_d) < 2 * TREND_W:
        continue
    first, last = float(np.median(r_d[:TREND_W])), float(np.median(r_d[-TREND_W:]))
    eff_trend[s] = dict(steps=st_d, d=r_d, trend=ac.trend_ratio(r_d, TREND_W),
                        first=first, last=last, room=INFLATE_BAR * first / EFF_ROOM,
                        n_trend=ac.trend_ratio(n_d, TREND_W),
                        peak=st_d[int(np.argmax(r_d))])
for s, v in eff_trend.items():
    print(f"seed {s}: d_eff trend {v['trend']:.2f} over {len(v['d'])} stable "
          f"checkpoints ({v['first']:.1f} -> {v['last']:.1f}, room {v['room']:.2f}); "
          f"99% count trend {v['n_trend']:.2f}; largest d_eff at step {v['peak']}")

# %% [markdown]
# Per seed, `d_eff` at every checkpoint of the eps run (thin), the stable checkpoints the trend reads (dots), the
# grokking checkpoint (dotted) and the two medians the trend divides (dashed, over their five checkpoints).

# %%
fig, ax = plt.subplots(figsize=(7.5, 3.2))
for s, v in eff_trend.items():
    c = f"C{int(s)}"
    allp = [(t["step"], t["d_eff"]) for t in eps_traj[s] if t.get("d_eff") is not None]
    ax.plot(*zip(*allp), color=c, lw=0.6, alpha=0.6)
    ax.plot(v["steps"], v["d"], ".", color=c, ms=3, label=f"seed {s}")
    ax.axvline(eps_named[s], color=c, ls=":", lw=0.8)
    ends = ((v["steps"][:TREND_W], v["first"]), (v["steps"][-TREND_W:], v["last"]))
    for seg, y in ends:
        ax.plot([seg[0], seg[-1]], [y, y], "--", color=c, lw=1.5)
ax.axhline(EFF_ROOM, color="0.6", lw=0.8)
ax.set(xlabel="step", ylabel="d_eff", ylim=(0, EFF_ROOM + 4),
       title="d_eff of the class means, eps 1e-4 run")
if eff_trend:
    ax.legend(fontsize=7)
plt.tight_layout()
plt.show()

# %% tags=["remove-input"]
if eff_trend:
    vt = {s: v for s, v in eff_trend.items() if s in eff}
    t_held = [s for s, v in vt.items() if eff[s]["drop"] <= mod_cfg["collapse_drop"]
              and v["room"] <= 1 and v["trend"] > INFLATE_BAR]
    r_held = [s for s, v in eff.items() if v["drop"] <= mod_cfg["collapse_drop"]
              and v["room"] <= 1 and v["ratio"] > INFLATE_BAR]
    below = [s for s, v in vt.items() if v["first"] > eff[s]["g"]["pr"]]
    txt = ("**Reading it (round 9).** Over "
           + _listed(len(v["d"]) for v in vt.values())
           + " stable checkpoints after grokking (seeds " + _listed(vt) + "), `d_eff` "
           "goes from a first-five median of "
           + _listed(f"{v['first']:.1f}" for v in vt.values()) + " to a last-five "
           "median of " + _listed(f"{v['last']:.1f}" for v in vt.values())
           + ": smoothed trends " + _listed(f"{v['trend']:.2f}" for v in vt.values())
           + f" against the `{INFLATE_BAR}` bar, which needs "
           + _listed(f"{v['room']:.0%}" for v in vt.values())
           + f" of the {EFF_ROOM} directions (`d_eff_headroom`). The trend is "
           "above the bar at " + (f"seed(s) {_listed(t_held)}" if t_held else "no seed")
           + "; the two-checkpoint ratio (round 8, the second reading) was above it at "
           + (f"seed(s) {_listed(r_held)}" if r_held else "no seed") + ". ")
    txt += ("`d_eff` at the grokking checkpoint ("
            + _listed(f"{eff[s]['g']['pr']:.1f}" for s in vt)
            + ") lies below the first-five median at "
            + f"{len(below)} of {len(vt)} seeds"
            + (": the grokking checkpoint catches `d_eff` still rising, so the "
               "two-checkpoint ratio's denominator is smaller than where the "
               "trajectory settles. " if below else ". "))
    txt += ("The largest `d_eff` on the stable checkpoints is at step "
            + _listed(v["peak"] for v in vt.values()) + " (grokking checkpoints "
            + _listed(eps_named[s] for s in vt) + "). *Exploratory:* the 99% count's "
            "trend is " + _listed(f"{v['n_trend']:.2f}" for v in vt.values()) + ".")
    display(Markdown(txt))

# %% [markdown]
# **Looking for a collapse-free trajectory at the same exposure.** With the base run (the chapter's run until
# round 7) `no_collapse` failed, so both trajectory claims were inconclusive. Before any new run, an ordered list
# of optimizer changes that keep `lr * wd * steps` was written down: AdamW's `beta2` lowered to the grokking literature's value (a smaller
# worst-case Adam step after a stretch of small gradients), a larger Adam epsilon, a smaller gradient clip, a
# longer warmup, and half the rate over twice the steps. Each was to be probed on seed 0, in that order, judged by
# `no_collapse` alone (the probe stops as soon as the condition has failed: `make_modadd.py --only 0 --probe`),
# and the first that met it trained at every seed. The probes are stored as measurements
# (`modadd_probes.json`):

# %% tags=["remove-input"]
BASE = json.loads(checkpoints.fetch(ac.CHECKPOINT_SLUG, "modadd_base.json").read_text())
PROBES = json.loads(checkpoints.fetch(ac.CHECKPOINT_SLUG, "modadd_probes.json").read_text())


def probe_reading() -> str:
    """The one-seed probes of optimizer settings, read from their stored record."""
    pr = PROBES
    rows = [f"{q['order']}. `{q['setting']}`: " + (
        "met the condition" if q["met"] else
        f"failed at step {q['stopped_at_step']} (grokking at step "
        f"{q['grokking_step']}, training accuracy {q['drop_when_stopped']:.3f} below "
        "its running maximum)") for q in pr["probes"]]
    rows += [f"{q['order']}. `{q['setting']}`: not probed ({q['why']})"
             for q in pr["not_probed"]]
    met = [q for q in pr["probes"] if q["met"]]
    b0 = BASE["log"]["0"]  # the base setting, seed 0, read the same way
    st0, te0, tr0 = b0["step"], b0["test_acc"], b0["train_acc"]
    i0 = next((k for k, a in enumerate(te0) if a >= mod_cfg["gen_acc"]), len(te0) - 1)
    run_max = np.maximum.accumulate(tr0[i0:])
    first = next((st0[i0 + k] for k, (a, m_) in enumerate(zip(tr0[i0:], run_max))
                  if m_ - a > 0.05), None)
    stops = [q["stopped_at_step"] for q in pr["probes"]]
    return ("\n".join(rows) + "\n\n" + (
        "No probed setting met `no_collapse` at seed 0. The base setting "
        "first falls more than `0.05` below its running maximum at step "
        f"{first} (largest drop {COND_NC[0]:.3f}); the probes did so at steps "
        + _listed(stops) + ", i.e. "
        + ("all earlier" if first and all(x < first for x in stops) else
           "not all earlier") + ": none of these changes removes the collapses at "
        "this exposure, so the base run was kept (until round 7)." if not met else
        "The first setting that met the condition is the run above."))


def probe5_reading() -> str:
    """Round 5: full-batch training, read from the same record."""
    pr = PROBES
    r5 = pr.get("round_5")
    if not r5:
        return ""
    rows = [f"{q['order']}. `{q['setting']}` (`None`: full batch): " + (
        "met the condition" if q["met"] else
        f"failed at step {q['stopped_at_step']} (grokking at step "
        f"{q['grokking_step']}, training accuracy {q['drop_when_stopped']:.3f} below "
        "its running maximum)") for q in r5["probes"]]
    met = [q for q in r5["probes"] if q["met"]]
    worst = max(q["drop_when_stopped"] for q in r5["probes"])
    r4 = max(q["drop_when_stopped"] for q in pr["probes"])
    return ("**Full batch (round 5).** Minibatch noise is one source of collapses, "
            "and the paper's own setting for this task trains on every training pair "
            "at each step, so the next list (fixed before its first probe) kept "
            "`lr * wd * steps` and trained on the full batch: at the base optimizer, "
            "then with the round-4 setting that came closest (clip 0.1). Seed 0, "
            "judged by `no_collapse` alone:\n\n" + "\n".join(rows) + "\n\n" + (
                "No full-batch setting met it: without minibatch noise the run still "
                "collapses after grokking (a probe stops at its first drop past the "
                f"bar; the larger of the two is {worst:.3f}, against at most {r4:.3f} "
                "in the round-4 probes; the base run reaches "
                f"{COND_NC[0]:.3f} over its whole length), so minibatch noise is not "
                "what drives the collapses at this exposure. The base run was kept." if not met else
                "A setting met the condition at seed 0 (see the run above)."))


COND_NC = [ac.largest_drop(lg["train_acc"], next(  # the base run's, per seed
    (k for k, a in enumerate(lg["test_acc"]) if a >= BASE["config"]["gen_acc"]),
    len(lg["test_acc"]) - 1)) for lg in BASE["log"].values()]
if not quick:
    display(Markdown(probe_reading()))
    display(Markdown(probe5_reading()))

# %% [markdown]
# **Why it collapses (round 6): the mechanism, measured.** A reading of the stored seed-0 weights (grokking
# against end) suggested a mechanism that no run had logged. Under weight decay on every parameter the LayerNorm
# gains drain and the embeddings shrink, while the matrices after them grow (the network's function does not
# depend on a LayerNorm input's scale, so decay can shrink it at little cost). Adam moves every coordinate by
# about the learning rate whatever the weight's size, so the **relative step** `|dw|/|w|` of a shrinking tensor
# rises, until training is unstable; after the spike the step is relatively small again and the cycle repeats.
# This is the periodic instability of normalised networks under weight decay (Lobacheva et al., 2021; Li and
# Arora's "intrinsic learning rate"), not slingshot-style norm growth. To test it, seed 0 of the base setting
# (weight decay on every parameter, as in the paper) was repeated over its whole length (`make_modadd.py
# --mechanism`: the same batches, the same numbers) with a log every 10 steps:
# the rms and the relative step (mean over the 10 steps) of the token and position embeddings, the four block
# LayerNorm gains (pooled), the final LayerNorm gain and the unembedding, and the smallest logit margin over the
# training pairs (`collapse_mechanism.json`, measurements only). The reading was fixed before the run: a
# **collapse onset** is the first step of a collapse event (training accuracy more than `0.05` below its running
# maximum after grokking; events more than 100 steps apart); at each onset we take a relative step's median
# over the 100 steps before it. For a series the mechanism is **supported** when every onset's level is above
# the series' median after grokking and the onsets' levels lie within a factor 2 of each other (a spike starts
# when the step has risen to a level). The plan fixed a 6000-step run; it had no collapse onset past the bar, so
# the registered reading was inconclusive, and the run was repeated over the base run's whole length with the rule
# unchanged (the extension written down before it ran).

# %% tags=["remove-input"]
MECH = json.loads(checkpoints.fetch(ac.CHECKPOINT_SLUG,
                                    "collapse_mechanism.json").read_text())
mlog = MECH["log"]
mlog["step"] = list(range(mlog["step"]["first"], mlog["step"]["last"] + 1,
                          mlog["step"]["every"]))  # stored as a range
m_steps = mlog["step"]
m_gen = next((st for st, a in zip(m_steps, mlog["test_acc"])
              if a >= MECH["config"]["gen_acc"]), m_steps[-1])
M_GROUPS = ("tok", "pos", "gains", "ln_f", "head")
# the registered reading: onsets of collapses past the bar (train accuracy > 0.05 down)
m_onsets = ac.collapse_onsets(m_steps, ac.collapse_steps(
    m_steps, mlog["train_acc"], start=m_gen, drop=0.05), gap=100)
m_read = {g: ac.onset_levels(m_steps, mlog[f"rel_{g}"], m_onsets, start=m_gen)
          for g in M_GROUPS}
# exploratory (defined after the run was read): a spike starts where the smallest
# training logit margin turns negative (a training pair misclassified)
m_spikes = ac.collapse_onsets(m_steps, [st for st, mg in zip(m_steps, mlog["margin"])
                                        if st >= m_gen and mg < 0], gap=100)
m_spike_read = {g: ac.onset_levels(m_steps, mlog[f"rel_{g}"], m_spikes, start=m_gen)
                for g in M_GROUPS}
m_read_all = {g: m_spike_read[g]["median"] for g in M_GROUPS}  # median after grokking

fig, ax = plt.subplots(2, 2, figsize=(11, 6.4), sharex=True)
ax[0, 0].plot(m_steps, mlog["train_acc"], lw=0.8, label="train")
ax[0, 0].plot(m_steps, mlog["test_acc"], lw=0.8, label="test")
ax[0, 0].set(ylabel="accuracy", title="seed 0: accuracy (base setting)",
             ylim=(min(mlog["train_acc"][m_steps.index(m_gen):]) - 0.02, 1.005))
ax[0, 1].plot(m_steps, mlog["margin"], lw=0.8, color="k", label="margin")
ax[0, 1].axhline(0, color="grey", lw=0.6)
ax[0, 1].set(ylabel="smallest train logit margin", title="logit margin",
             ylim=(min(-1, min(mlog["margin"][m_steps.index(m_gen):]) - 1),
                   max(mlog["margin"]) + 1))
for g, c in (("tok", "C0"), ("pos", "C3"), ("gains", "C1"), ("head", "C2")):
    ax[1, 0].plot(m_steps, mlog[f"rel_{g}"], lw=0.8, color=c, label=g)
    ax[1, 1].plot(m_steps, mlog[f"rms_{g}"], lw=0.8, color=c, label=g)
ax[1, 0].set(xlabel="step", ylabel="|dw| / |w| per step", yscale="log",
             title="relative step")
ax[1, 1].set(xlabel="step", ylabel="rms", yscale="log", title="weight size")
for a in ax.flat:
    for o in m_spikes:
        a.axvline(o, color="k", lw=0.6, ls=":")
    for o in m_onsets:
        a.axvline(o, color="r", lw=0.8, ls="--")
    a.axvline(m_gen, color="grey", lw=0.8)
    a.legend(fontsize=8)
plt.tight_layout()
plt.show()


# %% tags=["remove-input"]
def mech_rule(reads) -> str:
    """One line per tensor group: its levels at the onsets against the rule."""
    return "\n".join(
        f"* `{g}`: levels " + _listed(f"{x:.2e}" for x in r["levels"])
        + f" against a median of {r['median']:.2e} after grokking, spread "
        f"{r['spread']:.2f}: " + ("supports" if r["supports"] else (
            "does not support" + (" (some onset at or below the median)"
                                  if not r["above"] else
                                  " (levels spread more than a factor 2)")))
        for g, r in reads.items())


def mech_reading() -> str:
    """What the instrumented seed-0 run shows, by the rule fixed before it."""
    i_g = m_steps.index(m_gen)
    drift = ", ".join(f"{g} {mlog[f'rms_{g}'][i_g]:.3g} to {mlog[f'rms_{g}'][-1]:.3g}"
                      for g in M_GROUPS)
    worst = ac.largest_drop(mlog["train_acc"], i_g)
    sup = [g for g in M_GROUPS if m_spike_read[g]["supports"]]
    no = [g for g in M_GROUPS if not m_spike_read[g]["supports"]]
    tok = m_spike_read["tok"]
    # tok's rms at each spike onset and its largest value over the 200 steps after
    r_at = [mlog["rms_tok"][m_steps.index(o)] for o in m_spikes]
    full = [o for o in m_spikes if o + 200 <= m_steps[-1]]  # 200 logged steps after
    r_at = [mlog["rms_tok"][m_steps.index(o)] for o in full]
    r_up = [max(x for st, x in zip(m_steps, mlog["rms_tok"]) if o < st <= o + 200)
            for o in full]
    reg = [g for g in M_GROUPS if m_read[g]["supports"]]
    return (
        f"The instrumented run grokks at step {m_gen}; from there to step {m_steps[-1]} "
        f"the rms moves: {drift}. **The registered reading finds "
        + (f"{len(m_onsets)} collapse onset(s)** (red dashed), at step(s) "
           + _listed(m_onsets) + ":\n\n" + mech_rule(m_read) + "\n\n"
           + ("By the registered rule the reading supports the mechanism for "
              + " and ".join(f"`{g}`" for g in reg) + " (on "
              + f"{len(m_onsets)} onset(s) only) and not for the other groups. "
              if reg else "By the registered rule the reading does **not** support "
              "the mechanism for any tensor group. ")
           if m_onsets else
           "no collapse onset**: over these steps training accuracy never falls more "
           f"than 0.05 below its running maximum after grokking (largest drop "
           f"{worst:.3f}); at this seed the base run first crosses the bar after step "
           f"{m_steps[-1]}. So the test fixed before the run reads nothing: it is "
           "inconclusive, and this run was too short for it. ")
        + "\n\n**Exploratory, defined after the run was read:** the spikes below the "
          "bar are plain in the logit margin, which turns negative (a training pair "
          f"misclassified) {len(m_spikes)} times after grokking, at step(s) "
        + _listed(m_spikes) + " (dotted). The same rule at those onsets:\n\n"
        + mech_rule(m_spike_read) + "\n\n"
        + ("Each spike starts after the token embedding's relative step has climbed "
           "above its median (levels "
           + _listed(f"{x:.2e}" for x in tok["levels"])
           + f", median {tok['median']:.2e}); the spike throws the embedding back up "
             "(its rms at the onsets followed for 200 steps: "
           + _listed(f"{x:.3g}" for x in r_at) + "; at most "
           + _listed(f"{x:.3g}" for x in r_up)
           + " in the 200 steps after), so its relative step falls again and the "
             "cycle restarts: the periodic pattern of a normalised layer under weight "
             f"decay. The levels spread by a factor {tok['spread']:.2f}"
           + (", close to the 2 the rule allows, so the trigger reads as a rising "
              "relative step more than a sharp threshold. " if tok["spread"] > 1.5
              else ". ")
           if tok["supports"] else
           "The token embedding's relative step does not meet the rule at these "
           "onsets. ")
        + ("In this exploratory reading the rule holds for "
           + ", ".join(f"`{g}`" for g in sup) + " and not for "
           + ", ".join(f"`{g}`" for g in no) + ". " if sup else
           "No tensor group meets the rule here: this reading does **not** support the "
           "proposed mechanism. ")
        + ("In particular the LayerNorm gains drain, but their relative step does "
           "not rise before the spikes: the gains are not the trigger. "
           if not m_spike_read["gains"]["supports"] else "")
        + "This is one seed and a timing association, not an intervention: the "
          "cure probe below is the intervention.")


display(Markdown(mech_reading()))

# %% [markdown]
# **A cure probe (round 6), registered before it ran.** If shrinking normalised weights drive the spikes, standard
# transformer practice should remove them: AdamW with weight decay only on the weight matrices of the linear
# layers (none on the embeddings, the LayerNorm gains and biases, or any bias), the matrices' exposure
# `lr * wd * steps` unchanged, everything else as the base setting. It was judged by `no_collapse` alone over the
# window from grokking to the end, at all three seeds, seed 0 first, stopping if seed 0 failed; had all three
# passed it would have become the chapter's run (a deviation from the paper, which decays every parameter). Its seed
# 0 was then instrumented like the base run over its first 3000 steps (`collapse_mechanism_matrices.json`;
# exploratory, added after the probe had failed, no verdict).

# %% tags=["remove-input"]
def probe6_reading() -> str:
    """Round 6: the decay-on-matrices probe and its instrumented seed 0."""
    pr = PROBES
    r6 = pr.get("round_6")
    if not r6:
        return ""
    rows = [f"* seed {q['seed']}: " + (
        f"met the condition (largest drop {q['largest_drop_after_grokking']:.3f})"
        if q["met"] else
        f"failed at step {q['stopped_at_step']} (grokking at step "
        f"{q['grokking_step']}, training accuracy {q['drop_when_stopped']:.3f} below "
        "its running maximum)") for q in r6["probes"]]
    out = ("Outcome:\n\n" + "\n".join(rows) + "\n\n"
           + ("All three seeds met it." if r6["met_all"] else
              "The probe failed (" + r6.get("not_run", "") + "). "))
    mx = json.loads(checkpoints.fetch(ac.CHECKPOINT_SLUG,
                                      "collapse_mechanism_matrices.json").read_text())
    lx, rng = mx["log"], mx["log"]["step"]  # the logged steps, stored as a range
    sx = list(range(rng["first"], rng["last"] + 1, rng["every"]))
    gx = next((st for st, a in zip(sx, lx["test_acc"])
               if a >= mx["config"]["gen_acc"]), sx[-1])
    on = ac.collapse_onsets(sx, ac.collapse_steps(sx, lx["train_acc"], start=gx,
                                                  drop=0.05), gap=100)
    if not on:
        return out
    o, i_g = on[0], sx.index(gx)
    k = sx.index(o)
    med = {g: float(np.median(lx[f"rel_{g}"][i_g:k])) for g in ("tok", "gains")}
    base = {g: m_read_all[g] for g in ("tok", "gains")}
    drained = [g for g in ("tok", "gains") if lx[f"rms_{g}"][-1] < lx[f"rms_{g}"][i_g]]
    quiet = lx["margin"][k - 1] >= float(np.median(lx["margin"][i_g:k]))
    return out + (
        f"In the instrumented run of this setting (seed 0, grokking at step {gx}) "
        + ("neither tok nor the gains drain" if not drained else
           "still " + " and ".join(drained) + " shrink")
        + f": from grokking to step {sx[-1]} tok's rms goes "
        f"{lx['rms_tok'][i_g]:.3g} to {lx['rms_tok'][-1]:.3g} and the gains' "
        f"{lx['rms_gains'][i_g]:.3g} to {lx['rms_gains'][-1]:.3g}, and the median "
        f"relative steps between grokking and the collapse are {med['tok']:.2e} (tok) "
        f"and {med['gains']:.2e} (gains), against {base['tok']:.2e} and "
        f"{base['gains']:.2e} in the base run after grokking. Yet at step {o} "
        f"training accuracy falls to {min(lx['train_acc'][k:k + 10]):.3f}, out of a "
        f"smallest logit margin of {lx['margin'][k - 1]:.2f} ten steps before ("
        + ("at or above its median since grokking: a sudden spike from a confident "
           "state" if quiet else "below its median since grokking") + "). "
        + ("So the shrinking of normalised weights is not needed for a collapse "
           "here: removing it leaves an instability of another kind"
           if not drained else "The decay-free tensors still shrink here, so this "
           "run does not separate the mechanism from the collapse")
        + ", and the chapter's run "
        "stayed the base setting. Which "
        "instability that is (Adam's update after a long stretch of near-zero "
        "gradients is one candidate; in the base setting a larger Adam epsilon, "
        "round 4, did not remove the collapses) is what round 7 probes.")


display(Markdown(probe6_reading()))

# %% [markdown]
# **The other instability (round 7), registered before it ran.** The decay-on-matrices run collapsed from a large
# margin with no weight drain, so a second list targeted the size of the optimizer's step itself, on seed 0, in an
# order fixed beforehand (`make_modadd.py`'s docstring), judged by `no_collapse` alone over the window from grokking
# to the end (a probe stops as soon as the condition has failed, or if it has not generalised by step 5000):
#
# 1. **a smaller learning rate late**: the rate held until the run's own grokking step, then a cosine down to a
#    tenth over 1000 steps and held there (the stable phase of a warmup-stable-decay schedule ending at grokking);
#    the cost is less weight-decay pull after grokking, counted below;
# 2. **a larger Adam epsilon** (1e-4) at the base rate: once gradients are small, Adam's step becomes proportional
#    to the gradient instead of a full normalised step.
#
# The first that met the condition was to become the chapter's run, trained at seeds 1 and 2, with the base run's
# record kept for comparison (`modadd_base.json`, measurements only). Every probe logged the relative step of the
# embeddings, the LayerNorm gains and the head; at a failure its level over the 100 steps before is read against
# its median since grokking (exploratory, no verdict).

# %% tags=["remove-input"]
def base_drops() -> dict:
    """Per seed of the base run: largest drop after grokking, first collapse."""
    out = {}
    for s_, lg in BASE["log"].items():
        i0 = next((k for k, a in enumerate(lg["test_acc"])
                   if a >= BASE["config"]["gen_acc"]), len(lg["test_acc"]) - 1)
        col = BASE["collapses"][s_]
        out[s_] = (ac.largest_drop(lg["train_acc"], i0), col[0] if col else None)
    return out


def probe7_reading() -> str:
    """Round 7: the step-size probes, read from their stored record."""
    pr = PROBES
    r7 = pr.get("round_7")
    if not r7:
        return ""
    rows = []
    for q in r7["probes"]:
        if q["met"]:
            rows.append(f"{q['order']}. `{q['setting']}`: **met the condition** "
                        f"(grokking at step {q['grokking_step']}, largest drop after "
                        f"it {q['drop']:.3f} over the whole run)")
            continue
        us = q.get("update_sizes", {})
        rows.append(
            f"{q['order']}. `{q['setting']}`: failed at step {q['stopped_at_step']} "
            f"(grokking at step {q['grokking_step']}, training accuracy "
            f"{q['drop']:.3f} below its running maximum); relative step over the 100 "
            "steps before, against its median since grokking: "
            + ", ".join(f"{g} {v['before']:.2e} / {v['median_since_grokking']:.2e}"
                        for g, v in us.items()))
    bd = base_drops()
    return ("\n".join(rows) + "\n\n" + r7["outcome"] + " The base run, kept for "
            "comparison: largest drop after grokking "
            + _listed(f"{v[0]:.3f}" for v in bd.values()) + ", first collapse at step "
            + _listed(v[1] if v[1] is not None else "none" for v in bd.values())
            + f" (seeds {_listed(bd)}).")


if not quick:
    display(Markdown(probe7_reading()))

# %% [markdown]
# ## 4. The grokking-time law: weight decay and redundancy
#
# The paper models the delay between memorisation and generalisation as a margin that weight decay pushes towards
# generalisation at a rate set by `wd` and by how many functionally equivalent Fourier **modes** share the
# computation: `tau ~ 1/wd` and `tau ~ 1/modes`. We measure `tau = t_gen - t_mem` (generalisation step minus
# memorisation step, both at 10-step resolution) on two axes, 3 seeds each
# (`data/13_algorithmic_cores/make_groktime.py`, p = 31, lr 3e-3, a budget of 2000 steps):
#
# * weight decay `0.25, 0.5, 1, 2` at width 32: the slope of log tau against log wd (the paper: -1.02); the claim <!-- paper -->
#   `grok_time_slope` asks for a slope in the band `[-1.5, -0.5]`, not only its sign;
# * width 16, 32, 48, 64 at weight decay 1, with the Fourier modes counted at memorisation (the previous
#   version's redundancy proxy, kept as a diagnosis); the redundancy law itself is tested below with the number of
#   modes set by design.
#
# A run that never generalises within the budget is kept, with tau counted at the budget (a lower bound), and
# named in the table. Whether that biases the slope is checked, not assumed: in a least-squares slope, raising a
# point that lies left of the mean log wd can only lower the slope, so when every censored run is at a small wd the
# budget-counted slope is an upper bound on the true one (the bias is against the claim). The slope over the runs
# that generalised is printed beside it and recorded in the claim's note. One run is re-trained live to check the
# cached numbers. On the machine that built the cache it reproduces them exactly; on another CPU the rounding of
# floating-point kernels differs, full-batch training amplifies it, and the steps move (when we met this, the
# script's own function, run on the new machine, gave the live numbers, not the cached ones), so the check asks
# that the run generalise, at a generalisation step within 25% of the cached one, and prints both sets of numbers.

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
# ### Redundancy set by design, from step 0
#
# Counting the Fourier modes a trained network happens to hold at memorisation gave 0-2 modes at p = 31, too
# narrow a range for a law, so the number of modes m = 1, 2, 4, 8 is set by design. Earlier builds set it *after*
# memorisation (a memorised network projected onto m of its own modes, then re-fitted to its memorised loss):
# the re-fit either partly generalised on its own at small m or, when only the embedding could move, never got
# back to memorisation, so the starting point moved with m at every seed (their record closes this section). Here m is
# fixed **from step 0**. Per seed and m a fresh model, with the seed's initial weights (the same for every m),
# has its learned token embedding projected onto its mean and m Fourier frequencies, the first m of the seed's
# random order (`ac.mode_order`, nested in m), its centred part rescaled to the norm it had
# (`ac.project_embedding`: every m starts with the same token spread), and kept there after every optimizer
# step (`ac.keep_modes`). Unlike a frozen Fourier embedding (an even earlier build), the embedding still trains
# inside its m modes, so the network sets each mode's amplitude and direction itself. Training runs until the
# run has memorised and generalised (test accuracy `>= 0.95`), in either order, or a budget of 4000 steps
# (`data/13_algorithmic_cores/make_redundancy.py`: p = 31, d = 64, full batch, the main run's optimizer settings
# at lr 1e-3 and wd 1; quick mode: tiny runs live). tau = generalisation step - memorisation step, as on the
# weight-decay axis; a run at m = 15 (every mode, no projection) is the unconstrained reference, outside the fit.
# The law predicts `tau ~ 1/m`, a log-log slope near -1.
#
# m also sets how distinct the input tokens are, so it can move when and how a run memorises, not only how fast
# it then generalises. Two conditions, fixed in the script's config with this design before any of its runs was
# read (one seed was probed for the conditions' inputs only), say where the taus compare the modes alone:
# `redundancy_measured` asks that every m of the seed memorises within the budget (a run that then does not
# generalise enters at the budget, a lower bound: the note says on which side of the fit such runs lie), and
# `redundancy_isolated` asks that the clock starts from a comparable memorised state: at each run's memorisation
# step none has already generalised and the train and test accuracies differ across m by at most `0.1`
# (`ac.isolation_gap`). One thing was changed after runs had printed: the stop rule (a first version stopped at
# generalisation alone, so seed 0's m = 1 run stopped before it memorised); it changes no condition or tolerance.
# Where either failed at a seed, this design could not test `redundancy_law_slope` there (since round 7 the claim
# reads the design at the end of this section). tau below the 10-step log resolution enters at 10.
#
# One run, as the script trains it (quick mode runs it here on a tiny budget):

# %%
red_cfg = ac.checkpoint_config("redundancy")
if quick:
    red_cfg.update(p=23, d=32, max_steps=300, lr=3e-3, seeds=[seed], ms=[1, 2, 4])


def red_run(s, m) -> dict:
    """Train with m Fourier modes of the embedding kept from step 0 (p // 2: all)."""
    c = red_cfg
    tr_r, te_r = (torch.tensor(a) for a in ac.modadd_split(
        c["p"], c["train_frac"], seed=c["split_seed"]))
    freqs = ac.mode_order(c["p"], s)[:m]  # nested in m
    keep = None
    with repro.seeded(s):
        mm = ac.modadd_model(c["p"], c["d"], c["n_head"])  # same init for every m
        if m < c["p"] // 2:
            E = mm.tok.weight.detach().numpy().astype("float64")
            E_m = ac.project_embedding(E, freqs, c["keep_norm"])  # same norm
            with torch.no_grad():
                mm.tok.weight.copy_(torch.as_tensor(E_m, dtype=torch.float32))
            keep = ac.keep_modes(c["p"], freqs)  # projected after every step
        log = ac.train_modadd(mm, tr_r, te_r, c["max_steps"], lr=c["lr"], wd=c["wd"],
                              betas=c["betas"], eval_every=c["eval_every"],
                              warmup=c["warmup"], clip=c["clip"], after_step=keep,
                              stop_at=c["gen_acc"], stop_at_train=c["mem_acc"],
                              stop_all=True)  # stop once memorised and generalised
    t_mem, mem_train, mem_test = ac.clock_start(log["step"], log["train_acc"],
                                                log["test_acc"], c["mem_acc"])
    t_gen = ac.grok_step(log["step"], log["test_acc"], c["gen_acc"])
    return dict(seed=s, m=m, reference=m == c["p"] // 2, freqs=freqs, t_mem=t_mem,
                mem_train=mem_train, mem_test=mem_test, t_gen=t_gen,
                tau=None if t_mem is None or t_gen is None else max(t_gen - t_mem, 0),
                modes_in=ac.embedding_modes(mm.tok.weight.detach().numpy(), c["p"]))


# %% [markdown]
# At default parameters the script's runs are loaded. Every kept embedding must hold exactly its m modes at the
# end of training (`projected_embedding_modes`).

# %%
if quick:
    red_all = [red_run(s, m) for s in red_cfg["seeds"]
               for m in [*red_cfg["ms"], red_cfg["p"] // 2]]
else:
    red_cfg = scripts.with_seeds(red_cfg, SEEDS)
    red_all = checkpoints.load(ac.CHECKPOINT_SLUG, "redundancy",
                               config=red_cfg).manifest["extra"]["runs"]
red_runs = [r for r in red_all if not r["reference"]]
red_ref = {r["seed"]: r for r in red_all if r["reference"]}
rec.check("projected_embedding_modes",
          max([abs(r["modes_in"] - r["m"]) for r in red_runs] or [0]), 0, op="<=",
          note="Fourier modes carrying 99% of each kept embedding after training vs m")
print(f"{'seed':>4} {'m':>3} {'t_mem':>5} {'train, test at t_mem':>20} {'t_gen':>5} "
      f"{'tau':>5}  frequencies")
for r in red_all:
    at_mem = ("-" if r["t_mem"] is None
              else f"{r['mem_train']:.3f}, {r['mem_test']:.3f}")
    print(f"{r['seed']:>4} {r['m']:>3} {str(r['t_mem']):>5} {at_mem:>20} "
          f"{str(r['t_gen']):>5} {str(r['tau']):>5}  {r['freqs']}")

# %% [markdown]
# Per seed: the two conditions, and the log-log slope of tau against m over the runs that memorised (at least
# two m), with the figure.

# %%
RES = red_cfg["eval_every"]


def red_tau(r):
    """tau of a run; budget - t_mem (a lower bound) if memorised, not generalised."""
    if r["tau"] is not None:
        return max(r["tau"], RES)
    return red_cfg["max_steps"] - r["t_mem"] if r["t_mem"] is not None else None


red_slopes, red_ok, red_iso, red_censored = [], [], [], []
for s in red_cfg["seeds"]:
    rs = [r for r in red_runs if r["seed"] == s]
    mem = [r for r in rs if r["t_mem"] is not None]
    red_ok.append(len(mem) / len(red_cfg["ms"]))
    red_iso.append(ac.isolation_gap([r["mem_train"] or 0.0 for r in rs],
                                    [r["mem_test"] or 0.0 for r in rs],
                                    [r["t_mem"] is not None for r in rs],
                                    red_cfg["gen_acc"]) if rs else float("nan"))
    red_slopes.append(ac.loglog_slope([r["m"] for r in mem], [red_tau(r) for r in mem])
                      if len(mem) >= 2 else float("nan"))
    mean_lm = np.mean(np.log([r["m"] for r in mem])) if mem else 0.0
    cens = [r for r in mem if r["tau"] is None]
    red_censored.append("none" if not cens else "all right of mean log m (slope is a "
                        "lower bound)" if all(np.log(r["m"]) > mean_lm for r in cens)
                        else "not all right of mean log m (no bound)")
print("isolation gap at memorisation, per seed:", np.round(red_iso, 3))
print("log-log slope of tau vs m, per seed:", np.round(red_slopes, 2))
fig, ax = plt.subplots(figsize=(4.8, 3.6))
for k, s in enumerate(red_cfg["seeds"]):
    rs = [r for r in red_runs if r["seed"] == s and r["t_mem"] is not None]
    ax.loglog([r["m"] for r in rs], [red_tau(r) for r in rs], "o-", color=f"C{k}",
              label=f"seed {s} (slope {red_slopes[k]:.2f})")
    ax.scatter([r["m"] for r in rs if r["tau"] is None],
               [red_tau(r) for r in rs if r["tau"] is None], marker="^", color=f"C{k}",
               s=40)
    if s in red_ref and red_tau(red_ref[s]) is not None:
        ax.axhline(red_tau(red_ref[s]), color=f"C{k}", ls=":", lw=1)
ax.set(xlabel="Fourier modes kept from step 0 (m)",
       ylabel="tau (steps; ^: budget bound)",
       title="tau vs redundancy set by design\n(dotted: every mode kept)")
ax.legend(fontsize=7)
plt.tight_layout()
plt.show()


# %% tags=["remove-input"]
def red_why(s) -> str:
    """Which part of the conditions fails at seed s (worded for any outcome)."""
    rs = [r for r in red_runs if r["seed"] == s]
    bad = [f"m = {r['m']} never memorised" for r in rs if r["t_mem"] is None]
    bad += [f"m = {r['m']} had generalised by its memorisation step (test "
            f"{r['mem_test']:.2f})" for r in rs
            if r["t_mem"] is not None and r["mem_test"] >= red_cfg["gen_acc"]]
    mem = [r["mem_test"] for r in rs if r["t_mem"] is not None]
    if len(mem) >= 2:
        bad.append(f"test accuracy at memorisation spans {min(mem):.2f}-{max(mem):.2f} "
                   "across m")
    return "; ".join(bad)


def _r(r, f):
    return "-" if r[f] is None else f"{r[f]:.2f}"


def red_reading() -> str:
    seeds_ = red_cfg["seeds"]
    tol = red_cfg["isolate_tol"]
    ok = [s for s, a, b in zip(seeds_, red_ok, red_iso) if a >= 1.0 and b <= tol]
    per = lambda f: "; ".join(  # noqa: E731
        f"seed {s}: " + ", ".join(f(r) for r in red_runs if r["seed"] == s)
        for s in seeds_)
    txt = ("**Reading it.** Memorisation steps run "
           + per(lambda r: f"{r['t_mem']} at m = {r['m']}")
           + "; test accuracy at memorisation "
           + per(lambda r: f"{_r(r, 'mem_test')} at m = {r['m']}")
           + ". Both conditions hold at "
           + (f"seed(s) {', '.join(map(str, ok))}" if ok else "no seed"))
    fails = [s for s in seeds_ if s not in ok]
    txt += (". They fail at " + "; ".join(f"seed {s} ({red_why(s)})" for s in fails)
            if fails else "") + ". "
    txt += ("tau per m runs " + per(lambda r: f"{'>= ' if r['tau'] is None else ''}"
                                    f"{red_tau(r)} at m = {r['m']}")
            + "; with every mode kept it is "
            + ", ".join(f"{red_tau(r)} (seed {s})" for s, r in red_ref.items())
            + "; the log-log slopes of tau against m are "
            + ", ".join(f"{v:.2f}" for v in red_slopes) + " (the law: -1). ")
    if ok:
        txt += ("Where both conditions hold every run of the seed memorised and "
                "started its clock from a comparable memorised state, so those taus "
                "compare the modes (a record: since round 7 `redundancy_law_slope` "
                "reads the design below).")
    else:
        txt += ("With a condition failing at every seed, m moves the starting point as "
                "well as the modes, so this design could not test the law (it left "
                "`redundancy_law_slope` inconclusive until round 7, whose design below "
                "the claim now reads); nothing in this design is evidence for or "
                "against `tau ~ 1/m`. ")
    early = [r for r in red_runs if r["t_mem"] is not None
             and r["mem_test"] >= red_cfg["gen_acc"]]
    if early:
        ms_ = sorted({r["m"] for r in early})
        txt += (f"In {len(early)} of the {len(red_runs)} runs (at m = "
                + ", ".join(map(str, ms_)) + ") the test accuracy had reached the "
                "generalisation bar by the memorisation step: with so few input modes "
                "the network fits its training pairs through the general solution, so "
                "there is no memorisation plateau to time, and such a tau measures how "
                "early memorisation came, not how long redundancy took to clean it up. ")
    rho = [ac.spearman([r["m"] for r in rs], [red_tau(r) for r in rs])
           for rs in ([r for r in red_runs if r["seed"] == s and r["t_mem"] is not None]
                      for s in seeds_) if len(rs) >= 3]
    if rho:
        txt += ("The rank correlation of tau with m per seed is "
                + ", ".join(f"{v:+.2f}" for v in rho) + " (the law predicts a "
                "negative one); with the start of the clock moving with m, it is a "
                "description of these runs, not a verdict on the law.")
    return txt


display(Markdown(red_reading()))

# %% [markdown]
# **The earlier designs, for the record.** Round 4 of issue #71 probed, on seed 0, a re-fit after memorisation
# that could move only the token embedding (every other weight frozen, inside the m modes, weight decay 0), against
# the same condition, up to the start of its clock (`make_redundancy.py` of that round, stored as
# `redundancy_probes.json`):


# %% tags=["remove-input"]
def red_probe_reading() -> str:
    pr = json.loads(checkpoints.fetch(ac.CHECKPOINT_SLUG,
                                      "redundancy_probes.json").read_text())
    rs = [r for r in pr["runs"] if not r["reference"]]
    return ("Training loss after the embedding-only re-fit (memorised: "
            f"{rs[0]['mem_loss']:.3f}): " + ", ".join(
                f"{r['start_loss']:.3f} at m = {r['m']} ({r['refit_steps']} steps; "
                f"train / test {r['start_train']:.2f} / {r['start_test']:.2f})"
                for r in rs)
            + f"; restored at {sum(r['restored'] for r in rs)} of {len(rs)} m, an "
            f"isolation gap of {pr['isolation_gap']:.2f} (the condition asks "
            f"`<= {pr['isolate_tol']}`). That design, and the re-fit of every weight "
            "before it, could not hold memorisation fixed while m varied; the runs "
            "above replace them.")


if not quick:
    display(Markdown(red_probe_reading()))

# %% [markdown]
# ### Redundancy from one shared memorised checkpoint (round 7)
#
# Set from step 0, m moved the memorisation itself (m = 1, 2 fitted their training pairs through the general
# solution: no plateau to time). So the last design, registered before any of its runs, starts every m from **the
# same memorised network**. Per seed one network is trained (the optimizer above, full batch) to its first logged
# step with train accuracy `>= 0.99`: the **branch**, weights and AdamW state copied. From the branch, per m,
# training goes on, and after every step the token embedding's *update* (AdamW's step minus its weight decay) is
# projected onto its mean and the first m frequencies of the seed's random order (`ac.keep_update_modes`): the
# memorised embedding is kept (and fades under weight decay), and only m modes can grow. m = 15 (no projection) is
# the reference, outside the fit. tau = steps from the branch to the first logged test accuracy `>= 0.95`, within
# 4000 steps. Two conditions, fixed with the design: the branch has a plateau to time (test accuracy there
# `<= 0.5`, `redundancy_branch_plateau`), and every m of the seed generalises within the budget
# (`redundancy_generalised`: tau measured, not censored). `redundancy_law_slope` (band `[-1.5, -0.5]`) read
# this design, given both, until round 8 moved it to the design after this one (same conditions).

# %%
rb_cfg = ac.checkpoint_config("redundancy_branch")
if quick:
    rb_cfg.update(p=23, d=32, max_steps=150, mem_budget=200, lr=3e-3, seeds=[seed],
                  ms=[1, 2])


def rb_seed(s, c=None) -> list:
    """The branch (memorised), then one run per m with only m modes free to grow
    (round 8, design cut_at_branch: only m modes left at the branch)."""
    c = rb_cfg if c is None else c
    p_ = c["p"]
    tr_r, te_r = (torch.tensor(a) for a in ac.modadd_split(
        p_, c["train_frac"], seed=c["split_seed"]))

    def adamw(params):
        return torch.optim.AdamW(params, lr=c["lr"], weight_decay=c["wd"],
                                 betas=tuple(c["betas"]))

    with repro.seeded(s):
        net0 = ac.modadd_model(p_, c["d"], c["n_head"])
        opt0 = adamw(net0.parameters())
        lg = ac.train_modadd(net0, tr_r, te_r, c["mem_budget"], lr=c["lr"], wd=c["wd"],
                             optimizer=opt0, eval_every=c["eval_every"],
                             warmup=c["warmup"], clip=c["clip"],
                             stop_at_train=c["mem_acc"])
    t_b, b_tr, b_te = ac.clock_start(lg["step"], lg["train_acc"], lg["test_acc"],
                                     c["mem_acc"])
    out = []
    for m in [*c["ms"], p_ // 2] if t_b is not None else []:
        net = copy.deepcopy(net0)  # the same memorised weights for every m
        o = adamw(net.parameters())
        o.load_state_dict(copy.deepcopy(opt0.state_dict()))  # and optimizer state
        freqs = ac.mode_order(p_, s)[:m]
        cut = c["design"] == "cut_at_branch" and m != p_ // 2
        if cut:  # the modes outside m removed, the centred norm kept
            E = net.tok.weight.detach().numpy().astype(np.float64)
            with torch.no_grad():
                net.tok.weight.copy_(torch.as_tensor(ac.project_embedding(
                    E, freqs, c["keep_norm"]), dtype=torch.float32))
        at_cut = (dict(cut_train=ac.modadd_accuracy(net, tr_r),  # as the script
                       cut_test=ac.modadd_accuracy(net, te_r)) if cut else {})
        keep = (None if m == p_ // 2 else ac.keep_modes(p_, freqs) if cut
                else ac.keep_update_modes(net, p_, freqs, o))
        lg_m = ac.train_modadd(net, tr_r, te_r, c["max_steps"], lr=c["lr"], wd=c["wd"],
                               optimizer=o, eval_every=c["eval_every"], clip=c["clip"],
                               after_step=keep, stop_at=c["gen_acc"])
        out.append(dict(seed=s, m=m, reference=m == p_ // 2, freqs=freqs, t_branch=t_b,
                        branch_train=b_tr, branch_test=b_te,
                        tau=ac.grok_step(lg_m["step"], lg_m["test_acc"], c["gen_acc"]),
                        min_train_after=min(lg_m["train_acc"]), **at_cut))
    return out


# %% [markdown]
# Quick mode trains the tiny version here; at default parameters the script's runs are loaded.

# %%
if quick:
    rb_all = [r for s in rb_cfg["seeds"] for r in rb_seed(s)]
else:
    rb_cfg = scripts.with_seeds(rb_cfg, SEEDS)
    rb_all = checkpoints.load(ac.CHECKPOINT_SLUG, "redundancy_branch",
                              config=rb_cfg).manifest["extra"]["runs"]


# %% [markdown]
# Per seed: the runs, whether the branch is a plateau, the share of m that generalised and the slope of log tau
# against log m; then the table and the log-log plot.

# %%
def rb_summary(all_, c) -> tuple:
    """Runs, references, branch test accuracy, share generalised and slope per seed."""
    runs = [r for r in all_ if not r["reference"]]
    ref = {r["seed"]: r for r in all_ if r["reference"]}
    plateau, gen, slopes = [], [], []
    for s in c["seeds"]:
        rs = [r for r in runs if r["seed"] == s]
        b = next((r["branch_test"] for r in all_ if r["seed"] == s), None)
        plateau.append(1.0 if b is None else b)  # no branch: the condition fails
        done = [r for r in rs if r["tau"] is not None]
        gen.append(len(done) / len(c["ms"]))
        slopes.append(ac.loglog_slope([r["m"] for r in done],
                                      [max(r["tau"], RES) for r in done])
                      if len(done) >= 2 else float("nan"))
    return runs, ref, plateau, gen, slopes


def rb_show(all_, c, title) -> None:
    """The table of runs and tau against m on log-log axes."""
    runs, ref, _, _, slopes = rb_summary(all_, c)
    print(f"{'seed':>4} {'m':>3} {'branch':>6} {'test at branch':>14} {'tau':>5} "
          f"{'min train after':>15}")
    for r in all_:
        b_te = "-" if r["branch_test"] is None else f"{r['branch_test']:.3f}"
        print(f"{r['seed']:>4} {r['m']:>3} {str(r['t_branch']):>6} {b_te:>14}"
              f" {str(r['tau']):>5} {r.get('min_train_after', float('nan')):>15.3f}")
    print("log-log slope of tau vs m, per seed:", np.round(slopes, 2))
    fig, ax = plt.subplots(figsize=(4.8, 3.6))
    for k, s in enumerate(c["seeds"]):
        rs = [r for r in runs if r["seed"] == s and r["tau"] is not None]
        ax.loglog([r["m"] for r in rs], [max(r["tau"], RES) for r in rs], "o-",
                  color=f"C{k}", label=f"seed {s} (slope {slopes[k]:.2f})")
        if s in ref and ref[s]["tau"] is not None:
            ax.axhline(max(ref[s]["tau"], RES), color=f"C{k}", ls=":", lw=1)
    ax.set(xlabel="Fourier modes free to grow from the branch (m)",
           ylabel="tau (steps from the branch)", title=title)
    ax.legend(fontsize=7)
    plt.tight_layout()
    plt.show()


# %%
rb_runs, rb_ref, rb_plateau, rb_gen, rb_slopes = rb_summary(rb_all, rb_cfg)
rb_show(rb_all, rb_cfg,
        "tau vs redundancy from a shared branch\n(dotted: every mode free)")


# %% tags=["remove-input"]
def tau_listing(runs, ref, c) -> str:
    """tau per m from the branch, per seed, with the every-mode reference."""
    return "; ".join(
        f"seed {s}: " + ", ".join(
            f"m = {r['m']}: " + (f"{r['tau']}" if r["tau"] is not None else
                                 f"not within {c['max_steps']}")
            for r in runs if r["seed"] == s)
        + (f" (every mode free: {ref[s]['tau']})" if s in ref else "")
        for s in c["seeds"])


def rb_reading() -> str:
    """The round-7 redundancy runs, worded for any outcome."""
    tol = rb_cfg["branch_test_max"]
    ok = [s for s, b, g in zip(rb_cfg["seeds"], rb_plateau, rb_gen)
          if b <= tol and g >= 1.0]
    per = tau_listing(rb_runs, rb_ref, rb_cfg)
    txt = ("**Reading it.** Test accuracy at the branch is "
           + _listed(f"{v:.3f}" for v in rb_plateau) + " (a plateau to time at "
           + ("every seed" if max(rb_plateau) <= tol else "some seeds only")
           + "). Steps from the branch to generalisation: " + per + ". ")
    if ok:
        txt += ("Both conditions hold at seed(s) " + _listed(ok) + ", where "
                "the slope of log tau against log m is "
                + _listed(f"{rb_slopes[rb_cfg['seeds'].index(s)]:.2f}"
                          for s in ok)
                + " there (the law: -1); at the other seeds some m did not "
                "generalise within the budget, so they cannot test the law.")
    else:
        txt += ("At no seed does every m generalise within the budget, so this "
                "design cannot test the law (why a restricted run "
                "stalls is not diagnosed here; the lowest training accuracy after the "
                "branch, per run, is in the known limits). What the runs do show, as a "
                "description and not a verdict: ")
        fast = [s for s in rb_cfg["seeds"] if s in rb_ref
                and rb_ref[s]["tau"] is not None
                and all(r["tau"] is None or r["tau"] >= rb_ref[s]["tau"]
                        for r in rb_runs if r["seed"] == s)]
        txt += (f"at {len(fast)} of {len(rb_cfg['seeds'])} seeds no restricted run "
                "generalises sooner than the run with every mode free.")
    return txt + (" Since round 8, `redundancy_law_slope` reads the design below.")


display(Markdown(rb_reading()))

# %% [markdown]
# ### Redundancy with the other modes removed at the branch (round 8)
#
# In the design above the memorised embedding keeps every mode it had at the branch, fading under weight decay,
# so a restricted run can still use modes outside its m (they hold 2-18% of their branch size when such a run
# generalises): m is not the number of modes available. Round 8 (issue #71) registered, before any run of it,
# the same shared branch with the **modes outside m removed at the branch**: the embedding projected onto its
# mean and its m frequencies, the centred part rescaled to the norm it had (`ac.project_embedding`), and kept
# there after every step (`ac.keep_modes`); budget 10000 steps from the branch (the 4000 above left runs of seeds
# 0 and 1 censored); seed 0 first, seeds 1 and 2 only if seed 0 met `redundancy_generalised` (it did). The
# conditions and `redundancy_law_slope`'s band are unchanged; the claim reads this design. The cut can undo part
# of the memorisation (the lowest training accuracy after the branch is in the table): tau still counts from the
# shared branch. *Added at review:* a third condition, `redundancy_cut_memorised`, asks that the cut leave the
# runs memorised (the reading below).

# %%
rc_cfg = ac.checkpoint_config("redundancy_cut")
if quick:
    rc_cfg.update(p=23, d=32, max_steps=150, mem_budget=200, lr=3e-3, seeds=[seed],
                  ms=[1, 2])
    rc_all = [r for s in rc_cfg["seeds"] for r in rb_seed(s, rc_cfg)]
else:
    rc_cfg = scripts.with_seeds(rc_cfg, SEEDS)
    rc_all = checkpoints.load(ac.CHECKPOINT_SLUG, "redundancy_cut",
                              config=rc_cfg).manifest["extra"]["runs"]
rc_runs, rc_ref, rc_plateau, rc_gen, rc_slopes = rb_summary(rc_all, rc_cfg)
rb_show(rc_all, rc_cfg, "tau vs m, modes outside m removed at the branch\n"
        "(dotted: every mode free)")

# %% tags=["remove-input"]
rc_ok = [s for s, b, g in zip(rc_cfg["seeds"], rc_plateau, rc_gen)
         if b <= rc_cfg["branch_test_max"] and g >= 1.0]
rc_fast = [s for s, ref in rc_ref.items() if ref["tau"] is not None and all(
    r["tau"] is not None and r["tau"] < ref["tau"] for r in rc_runs if r["seed"] == s)]
# added at review (2026-12-06), after round 8's numbers were read: the smallest training
# accuracy right after the cut over the seed's restricted runs (condition
# redundancy_cut_memorised, section 6: the clock starts from a memorised state)
rc_cut = [min([r.get("cut_train", 0.0) for r in rc_runs if r["seed"] == s] or [0.0])
          for s in rc_cfg["seeds"]]
rc_cut_ok = [s for s, v in zip(rc_cfg["seeds"], rc_cut) if v >= rc_cfg["mem_acc"]]
display(Markdown(
    "**Reading it.** Steps from the branch to generalisation: "
    + tau_listing(rc_runs, rc_ref, rc_cfg)
    + ". Right after the cut the restricted runs' training accuracy is "
    + "; ".join(_span([round(r.get("cut_train", r["min_train_after"]), 2)
                       for r in rc_runs if r["seed"] == s]) for s in rc_cfg["seeds"])
    + f" per seed (at least {rc_cfg['mem_acc']} at the branch)"
    + (": the cut undoes most of the memorisation. " if max(rc_cut) < 0.5 else
       ": the cut undoes part of the memorisation. " if min(rc_cut) < rc_cfg["mem_acc"]
       else ": the cut leaves the memorisation in place. ")
    + (f"Both registered conditions hold at seed(s) {_listed(rc_ok)}: the slope of log tau "
       "against log m is " + _listed(
           f"{rc_slopes[rc_cfg['seeds'].index(s)]:.2f}" for s in rc_ok)
       + " (the law: -1, band [-1.5, -0.5]). " if rc_ok else
       "At no seed do both registered conditions hold. ")
    + (f"At {len(rc_fast)} of {len(rc_ref)} seeds every restricted run generalises "
       "before the run with every mode free"
       + (", and at those seeds the cut drops training accuracy below "
          f"{rc_cfg['mem_acc']} in every restricted run: tau there times a re-fit "
          "from a damaged memorisation, which finds the general solution with few "
          "modes, more than the wait on a memorised plateau that the law is about."
          if rc_fast and all(r["min_train_after"] < rc_cfg["mem_acc"]
                             for r in rc_runs if r["seed"] in rc_fast) else ".")
       if rc_ref else "")
    + " *Added at review (2026-12-06), after these numbers were read:* the law is about "
    "the wait from a memorised network to generalisation, and no condition registered "
    "with this design asked that the cut leave one, so condition "
    "`redundancy_cut_memorised` (section 6; it can only make the claim inconclusive) "
    "asks that the clock start from a memorised state: training accuracy right after "
    f"the cut at least {rc_cfg['mem_acc']} (the memorisation bar) in every restricted "
    "run of the seed. It holds at "
    + (f"seed(s) {_listed(rc_cut_ok)}" if rc_cut_ok else "no seed")
    + " (smallest per seed: " + _listed(f"{v:.2f}" for v in rc_cut) + ")"
    + ("; where it fails `redundancy_law_slope` is inconclusive: there this design "
       "times learning from a damaged fit, not grokking, so its slopes describe these "
       "runs and are not evidence for or against `tau ~ 1/m`."
       if len(rc_cut_ok) < len(rc_cut) else ".")))

# %% [markdown]
# ## 5. Subject-verb agreement: is there one necessary, flippable axis?
#
# The paper finds, in six pretrained LMs, a rank-1 core for grammatical number that, when reflected, makes the
# model write the wrong number for the rest of the generation. Without pretrained weights we build the setting:
# a grammar `the N (PREP the N')* V ADV . PRON BE ADJ .` in which the verb, the pronoun (`it`/`they`) and `is`/`are`
# agree with the subject `N`, while attractor nouns `N'` have the opposite number half of the time. Per seed, two
# LMs of different size (2 layers, d=64; 3 layers, d=96) are trained on it.

# %%
words = ac.sva_vocab()  # the grammar's words; a word's index is its token id
tok = {w: i for i, w in enumerate(words)}
nouns, verbs = list(ac.SVA_NOUNS), list(ac.SVA_VERBS)
SG_N, PL_N = [tok[n] for n in nouns], [tok[n + "s"] for n in nouns]
SG_V, PL_V = [tok[v + "s"] for v in verbs], [tok[v] for v in verbs]
SG_ALL, PL_ALL = SG_V + [tok["it"], tok["is"]], PL_V + [tok["they"], tok["are"]]
SV_LEN = ac.SVA_LEN
sentence = ac.sva_sentence  # (rng, plural, n_attractors) -> (token ids, prompt length)
ex, n_ex = sentence(repro.rng(seed, 5), True, 1)
print("a sentence:", " ".join(words[i] for i in ex), f"(prompt: {n_ex} tokens)")

# %% [markdown]
# Two architectures per seed are trained on the grammar (batches from `ac.sva_batch`, 64 sentences with 0-2
# attractors): at default parameters by `data/13_algorithmic_cores/make_lms.py` (600 steps each, stored in float16;
# the analysis runs on those weights), in quick mode live for `sva_steps` steps. Held-out prompts with one or two
# attractors are drawn for all of them.

# %%
SV_ARCH = ac.SVA_ARCH
sv_models, sv_losses = {}, {}  # (seed, name) -> model, training loss per step
if not quick:
    sv_cfg = scripts.with_seeds(ac.lm_config("sva"), SEEDS)
    sv_ck = checkpoints.load(ac.CHECKPOINT_SLUG, "sva", config=sv_cfg)
for s in SEEDS:
    for k, (name, (n_layer, d)) in enumerate(SV_ARCH.items()):
        if quick:
            with repro.seeded(s):
                model = nn.Transformer(ac.sva_model_config(n_layer, d))
                hist_sv = train.fit(
                    model,
                    lm_loss,
                    lambda st, s_=s: ac.sva_batch(s_, st),
                    sva_steps,
                    lr=3e-3,
                    warmup=30,
                    seed=s,
                    desc=f"{name}, seed {s}",
                )
            sv_losses[s, name] = hist_sv.loss
        else:
            model = nn.Transformer(ac.sva_model_config(n_layer, d))
            state = sv_ck.state_dict(f"{s}.{k}.")
            model.load_state_dict({n_: v.float() for n_, v in state.items()})
            sv_losses[s, name] = sv_ck.manifest["history"][f"loss/{s}.{k}"]["value"]
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
def analyse_lm(s, model) -> dict:
    """ACE per slot and pooled, the LN-frozen variant, probes and interventions."""
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
    return dict(
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


sva = {k: analyse_lm(k[0], m_) for k, m_ in tqdm(sv_models.items(),
                                                 desc="ACE and interventions per LM")}

# %% [markdown]
# **Does float16 storage change the analysis?** The stored LMs are float16. At this seed the smaller LM is
# re-trained in float32 by the checkpoint script's procedure (in quick mode: the live float32 model) and analysed
# twice, as trained and rounded to float16; the ranks must be equal and the agreements within `0.01` (check
# `sva_float16_faithful`). A failure here would make the rank and necessity results below artefacts of storage.

# %%
lm_name = list(SV_ARCH)[0]
if quick:
    lm32 = sv_models[SEEDS[0], lm_name]
else:
    with repro.seeded(seed):
        lm32 = nn.Transformer(ac.sva_model_config(*SV_ARCH[lm_name]))
        train.fit(lm32, lm_loss, lambda st: ac.sva_batch(seed, st, sv_cfg["batch"]),
                  sv_cfg["steps"], lr=sv_cfg["lr"], warmup=sv_cfg["warmup"],
                  schedule=sv_cfg["schedule"], seed=seed, desc=f"{lm_name} in float32")
lm16 = nn.Transformer(lm32.cfg)
lm16.load_state_dict({k: v.half().float() for k, v in lm32.state_dict().items()})
f32_, f16_ = analyse_lm(seed, lm32.eval()), analyse_lm(seed, lm16.eval())
RANK_KEYS = ("rank", "frozen_rank")
AGREE_KEYS = ("base", "flip", "remove", "remove_core")
f16_gap = max([abs(f32_[k] - f16_[k]) for k in AGREE_KEYS] + [
    float(f32_["per_slot"] != f16_["per_slot"]),
    *(abs(f32_[k] - f16_[k]) for k in RANK_KEYS)])
rec.check("sva_float16_faithful", f16_gap, 0.01, op="<=",
          note=f"{lm_name}, seed {seed}: float32 / float16-rounded per-slot ranks "
          f"{f32_['per_slot']} / {f16_['per_slot']}; "
          + ", ".join(f"{k} {f32_[k]:.3f} / {f16_[k]:.3f}" for k in AGREE_KEYS))
print(f"{lm_name}, seed {seed}, float32 vs float16-rounded: per-slot ranks "
    f"{f32_['per_slot']} vs "
      f"{f16_['per_slot']}; "
      + ", ".join(f"{k} {f32_[k]} vs {f16_[k]}" for k in RANK_KEYS)
      + "; " + ", ".join(f"{k} {f32_[k]:.3f} vs {f16_[k]:.3f}" for k in AGREE_KEYS))

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

# %% tags=["remove-input"]
sv_v = list(sva.values())


def rng_of(k, fmt="{:.2f}"):
    """min-max of a per-LM number over the LMs."""
    lo, hi = min(v[k] for v in sv_v), max(v[k] for v in sv_v)
    return fmt.format(lo) if lo == hi else fmt.format(lo) + "-" + fmt.format(hi)


wide = sorted({sl for v in sv_v for sl, r in v["per_slot"].items() if r > 1})
needed = all(v["remove"] <= 0.6 for v in sv_v)  # the bar of sva_axis_necessary
display(Markdown(
    f"**Reading it.** Over the {len(sv_v)} LMs, flipping the axis takes agreement from "
    f"{rng_of('base')} to {rng_of('flip')} (a random flip: {rng_of('flip_random')}): "
    f"below one half, number written the wrong way more often than the right one, in "
    f"{sum(v['flip'] < 0.5 for v in sv_v)} of {len(sv_v)} LMs, and at most "
    f"{max(0.5 - v['flip'] for v in sv_v):.2f} below it; "
    f"{sum(v['flip'] <= 0.1 for v in sv_v)} of {len(sv_v)} are inverted almost fully "
    "(agreement <= 0.1). `sva_flip_inverts` asks for a drop of 0.5, which a model "
    "pushed only to chance already meets. "
    f"Removing it leaves agreement at {rng_of('remove')} (a random removal: "
    f"{rng_of('remove_random')}), "
    + ("so the one axis is necessary. " if needed else
       "so one axis is **not** necessary here: the models still read number from the "
       "rest of the pooled core. ")
    + f"Removing the whole pooled core (rank {rng_of('rank', '{}')}) brings agreement "
    f"to {rng_of('remove_core')} (chance: one half). The largest per-slot energy rank "
    f"is {max(max(v['per_slot'].values()) for v in sv_v)}"
    + (f" (slot(s) with more than one axis: {', '.join(wide)})" if wide else "")
    + ". "
    + ("In these small LMs number is steerable along one axis but carried by "
       "several." if wide or not needed else "")))

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
# * **Cached runs are exact on their own machine only.** The grokking-time re-run is checked for a generalisation
#   step within 25% of the cached one, not the same step (see section 4).
# * **Training length and stability.** The main grokking run is 11000 minibatch steps of 512 per seed at lr 5e-4
#   until grokking, then decayed to 5e-5 (round 7): the decay is what removed the collapses, and it cuts the
#   weight-decay pull `lr * wd * steps` after grokking well below the paper's (section 3 counts both), so
#   the late-decay trajectory has less continued regularization than the paper's. A larger Adam epsilon (1e-4)
#   at the constant rate, the second setting of the same list, also met `no_collapse` at seed 0 and keeps the
#   paper-like pull; it was trained at seeds 1 and 2 after round 7, and round 8 registered (before reading it)
#   that `modadd_core_inflates` reads it (`modadd_eps`: records and class means only, no weights, so the other
#   mod-add claims and the live re-analysis stay on the late-decay run). The weight-decay-0 control covers the first 4000 steps
#   only (its 11000-step run did not fit the build budget). The warmup, the clipping, AdamW's default `betas`,
#   the halved learning rate and its late decay are our choices against the collapses of earlier runs (issue
#   #71). The causal rank scans stop at rank 64 of 128 and run at the named checkpoints only; `r_kill` scans all
#   128 directions at every checkpoint from grokking on.
# * **What the energy rank can show.** The paper's picture is a ~15-D core at grokking growing to ~60-D. At d = 128
#   the energy rank at threshold `0.99` starts far above 15 already at grokking, and an untrained network has
#   ~42, so it cannot show that picture here. Round 7 registered `r_kill` (the necessity rank counted from one)
#   as the inflation observable before reading it; it was read only on the round-7 run, never on the base run's
#   stored models, which were trained before it was registered. *Added at review:* `r_kill` has little room past
#   `p - 1` (the directions the class means span), which it nearly fills at grokking, so on this run it cannot show
#   a rise of `1.3` whatever happens after grokking (`r_kill_headroom`). Round 8 registered `d_eff`, the
#   participation ratio of the class means' Fourier power over directions (room up to `p - 1`), before reading
#   the eps run; round 8 read it at two checkpoints per seed (grokking and end). Round 9 re-ran the eps run
#   with `d_eff` at every checkpoint and reads its smoothed trend, a reading registered after round 8's
#   two-checkpoint values had been seen (the issue had asked for a trend). `d_eff` was chosen over the
#   reviewer's 99% count after that count had
#   been computed on the late-decay run (it had no room for the bar there). The weight-decay-0 control stores no
#   class means, so `d_eff` has no no-decay baseline; the late-decay run (less pull) is the comparison. *Added
#   at review:* the paper's own observables on the eps run (the ACE core's energy rank, its mode count and ring
#   fraction) are reported beside `d_eff`, and the ratio's denominator depends on where the 100-step checkpoint
#   grid falls on the grokking rise (section 3 reads both).
# * **The collapse mechanism is read at one seed.** The instrumented runs of section 3 (the base setting over its
#   whole length, the decay-on-matrices setting over its first 3000 steps) are seed 0 only, and their reading of
#   the small spikes (logit margin below 0) was defined after the runs were read (exploratory).
# * **Grokking-time study.** Run at p = 31, lr 3e-3 and width 32 (the main run's p = 53, d = 128, lr 5e-4 would
#   take hours on a CPU); tau is measured at 10-step resolution. Redundancy is set by design: the learned
#   embedding is kept to m Fourier modes from step 0; the paper's redundancy grows inside a trained network, so
#   ours tests the law's form (tau against the number of usable modes), not the paper's mechanism for growing
#   them. Kept from step 0, m also moved memorisation (conditions `redundancy_measured`, `redundancy_isolated`);
#   two designs that set m after memorisation by a re-fit could not hold memorisation fixed. Round 7 branches
#   every m from one shared memorised checkpoint per seed, with only the embedding's update restricted to m modes
#   (the memorised embedding fades under weight decay rather than being cut): our construction, not the paper's.
#   Round 8 cuts the other modes at the branch, which removes that leak but also undoes part of the
#   memorisation (the lowest training accuracy after the cut is in section 4), so its tau also counts a re-fit;
#   *added at review*, `redundancy_cut_memorised` leaves the claim inconclusive at a seed where the cut leaves a
#   run below the memorisation bar.
# * **The live grokking-time re-run covers one run.** It re-trains the cheapest run of the seed that generalised
#   (until 2026-12-04 it was a width-16 run that never generalises, so the check compared two non-events) and
#   asks for its generalisation step within 25% of the cached one; the other cached runs are trusted from the
#   build.
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
    red_cens = [r for r in red_runs if r["tau"] is None]
    out.append(
        "* **Redundancy by design.** "
        + (f"{len(red_cens)} of the {len(red_runs)} runs with m modes kept gave no tau "
           f"in the {red_cfg['max_steps']}-step budget (a run that memorised enters "
           "at its lower bound): " + "; ".join(
               f"seed {r['seed']}, m {r['m']} (t_mem {r['t_mem']}, t_gen {r['t_gen']})"
               for r in red_cens) + "." if red_cens else
           f"All {len(red_runs)} runs with m modes kept memorised and generalised in "
           f"the {red_cfg['max_steps']}-step budget; what fails is the start of the "
           "clock (`redundancy_isolated`, section 4).")
        + " The width-axis proxy of the previous version (modes counted at "
        "memorisation) spans " + (_span(sorted({m for ms in modes_range for m in ms})))
        + " modes only, which is why the modes are now set by design."
    )
    rb_cens = [r for r in rb_runs if r["tau"] is None]
    out.append(
        "* **Redundancy from a shared branch (round 7).** "
        + (f"{len(rb_cens)} of the {len(rb_runs)} runs from the branch did not "
           f"generalise in the {rb_cfg['max_steps']}-step budget ("
           + "; ".join(f"seed {r['seed']}, m {r['m']}" for r in rb_cens)
           + "), so `redundancy_generalised` fails at seed(s) "
           + _listed(sorted({r["seed"] for r in rb_cens})) + ". "
           if rb_cens else
           f"All {len(rb_runs)} runs from the branch generalised in the budget. ")
        + "The lowest training accuracy after the branch, per run: "
        + "; ".join(f"seed {s}: " + ", ".join(
            f"{r['min_train_after']:.2f} (m {r['m']})" for r in rb_runs
            if r["seed"] == s) for s in rb_cfg["seeds"])
        + " (a value below the memorisation bar means the run lost part of its "
        "memorised fit after the branch, so its tau, where it has one, also counts a "
        "re-fit; why is not diagnosed here)."
        # added at review: the modes outside m are not gone when a run generalises
        + " Outside its m modes the memorised embedding only decays, by `1 - lr * wd` "
        "per step, so when a restricted run generalises it still holds "
        + _listed(f"{(1 - rb_cfg['lr'] * rb_cfg['wd']) ** r['tau']:.0%}"
                  for r in rb_runs if r["tau"] is not None)
        + " of its size in those modes at the branch (runs "
        + _listed(f"seed {r['seed']} m {r['m']}" for r in rb_runs
                  if r["tau"] is not None)
        + "): m bounds the modes that can grow, not the modes the network can use "
        "(added at review)."
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
                "a quarter of `gen_acc`), because `make_modadd.py` takes the last "
                "stable checkpoint below half the way to `gen_acc`. A stricter rule "
                "needs a rebuild."
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
    txt = "* **Weight-decay law.** `grok_time_slope` asks for a slope in [-1.5, -0.5]."
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
# its training set (a tau needs a memorisation step); for the redundancy design the claim reads (round 8's cut
# at the shared branch), the seed's shared memorised checkpoint has not generalised (test accuracy `<= 0.5`,
# `redundancy_branch_plateau`) and every m run from it generalises within the budget (`redundancy_generalised`),
# and (*added at review*, after round 8's numbers were read; it can only make the claim inconclusive) the cut at the
# branch leaves every restricted run memorised, training accuracy right after it at least the memorisation bar
# (`redundancy_cut_memorised`: tau must time the wait from a memorised network, not a re-fit);
# the mod-add inflation run of round 8 is stable after grokking (`eps_no_collapse`) and the bar is within the
# room of `d_eff` (`d_eff_headroom`, read on the smoothed trend's start since round 9); the round-5 design's conditions
# (`redundancy_measured`, `redundancy_isolated`) are still recorded for its record; and the modular-addition
# trajectory is stable after grokking: its training accuracy never falls by more than `0.05` below its running
# maximum (`no_collapse`, issue #71: a collapse, and the recovery after it, confounds reading a core at a
# checkpoint; the smoothed trend and the stable checkpoints reduce that, the condition says where it remains).
# Where a condition fails at a seed the claim is left out there; unless most seeds
# are left (2 of 3) it is *inconclusive*.
#
# A claim that is not held carries a measured diagnosis in its note, not a guess:
#
# * `modadd_core_cyclic` (where it fails at a seed): the rank at which the ring is read, beside the nulls; as the
#   rank approaches p - 1 any subspace gives a near-exact shift, so the random-subspace null rises towards 1;
# * `markov_spectra_match`: the token-averaged core (each state replaced by its current token's mean state) and
#   the bootstrap interval say whether the error is the context-dependent part of the states or sampling;
# * `modadd_core_inflates` (round 9): the trend's two medians and round 8's two-checkpoint ratio; `d_eff` and
#   the 99% count at grokking and at the end per seed, and as its
#   baseline column the same ratio on the late-decay run (far less weight-decay pull after grokking); the
#   `r_kill` trends of both runs and the energy-rank readings of the late-decay run (with the weight-decay-0
#   control's drift and the rank of the untrained network);
# * `grok_time_slope` and `redundancy_law_slope`: the slopes themselves and the tau of every run.
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
m_flat = [train.plateau(loss_) for loss_ in markov_losses]
# %%
condition("markov_converged", m_flat, "<=", 0.05,
          "each Markov model's training loss is flat at the end", PLATEAU)
condition("markov_pair_converged", [max(m_flat[i], m_flat[j]) for i, j in pairs], "<=",
          0.05, "both models of each compared pair are at their plateau", PLATEAU)
i_gen = {  # first logged step with test accuracy >= gen_acc (the last one if never)
    s: next((k for k, a in enumerate(curves[int(s)][1]) if a >= mod_cfg["gen_acc"]),
            len(curves[int(s)][1]) - 1)
    for s in analysis
}
condition("no_collapse",
          [ac.largest_drop(curves[int(s)][2], i_gen[s]) for s in analysis], "<=", 0.05,
          "training accuracy never falls by more than 0.05 below its running maximum "
          "after grokking (a stable trajectory)",
          "largest training-accuracy drop after grokking")
if KILL:  # added at review (2026-12-06), after the round-7 numbers were read
    condition("r_kill_headroom", [kill_room[s] for s in analysis], "<=", 1.0,
              "the bar of the r_kill reading of modadd_core_inflates (its reading "
              "before round 8, on the late-decay run) is within r_kill's room: "
              f"{INFLATE_BAR} x the median r_kill of the first five stable "
              "checkpoints after grokking is at most p - 1, the directions the class "
              "means span (added at review after the numbers were read; it can only "
              "make the claim inconclusive; 0: no r_kill at the seed)",
              f"{INFLATE_BAR} x first r_kill / (p - 1)")
# %%
# round 8 (registered before the eps run was read): the same stability rule on the
# eps trajectory, and the room d_eff's bar needs (0 where a seed never grokked)
condition("eps_no_collapse",
          [eff[s]["drop"] if s in eff else COND["no_collapse"]["measured"][i]
           for i, s in enumerate(analysis)], "<=", 0.05,
          "the eps 1e-4 trajectory (constant rate) is stable after grokking: training "
          "accuracy never falls by more than 0.05 below its running maximum",
          "largest training-accuracy drop after grokking")
condition("d_eff_headroom",
          [eff_trend[s]["room"] if s in eff_trend else 0.0 for s in analysis],
          "<=", 1.0, f"the bar of modadd_core_inflates is reachable: {INFLATE_BAR} x "
          "the trend's start (the median d_eff of the first five stable checkpoints "
          "after grokking) is at most p - 1, the directions the class means can span "
          "(registered in round 8 on d_eff at grokking, before the eps run was read; "
          "moved to the trend's start in round 9, after round 8's values were seen)",
          f"{INFLATE_BAR} x first-five median d_eff / (p - 1)")
condition("groktime_memorised",
          [np.mean([r["t_mem"] is not None for r in runs if r["seed"] == s])
           for s in gt_cfg["seeds"]], ">=", 1.0,
          "every run of the seed's sweep memorises its training set", "share of runs")
condition("redundancy_measured", red_ok, ">=", 1.0,
          "every run of the seed (m modes kept from step 0) memorises in the budget, "
          "so it gives a tau or, not generalised, its lower bound", "share of runs")
condition("redundancy_isolated", red_iso, "<=", red_cfg["isolate_tol"],
          "at each run's memorisation step (the start of its clock) none has "
          "generalised and the train and test accuracies agree across m within the "
          "tolerance (m changes the modes, not the start)",
          "ac.isolation_gap over m at memorisation")
condition("redundancy_branch_plateau", rc_plateau, "<=", rc_cfg["branch_test_max"],
          "the seed's shared memorised checkpoint (the branch) has not generalised: "
          "a plateau to time (round 7; read on round 8's design, the same branch)",
          "test accuracy at the branch")
condition("redundancy_generalised", rc_gen, ">=", 1.0,
          "every m run from the seed's branch generalises within the budget (tau "
          f"measured, not censored; round 8's design, {rc_cfg['max_steps']} steps)",
          "share of runs")
# added at review (2026-12-06), after round 8's numbers were read; it can only make
# redundancy_law_slope inconclusive (computed with the round-8 reading, section 4)
condition("redundancy_cut_memorised", rc_cut, ">=", rc_cfg["mem_acc"],
          "the clock starts from a memorised state: in every restricted run of the "
          "seed, training accuracy right after the cut at the branch is at least the "
          "memorisation bar (added at review after round 8's numbers were read; it can "
          "only make redundancy_law_slope inconclusive)",
          "smallest training accuracy right after the cut")
condition("sva_converged",
          [max(train.plateau(sv_losses[s, nm]) for nm in SV_ARCH) for s in SEEDS],
          "<=", 0.05, "both agreement LMs of the seed are at their plateau", PLATEAU)
condition("sva_fits", [min(sva[s, nm]["base"] for nm in SV_ARCH) for s in SEEDS], ">=",
          0.95, "both LMs get agreement right on held-out prompts of their grammar",
          "agreement, smaller of the two models")
# %% tags=["remove-input"]
nc = COND["no_collapse"]
nc_ok = [s_ for s_, v in zip(analysis, nc["measured"]) if v <= nc["target"]]
nc_bad = [f"seed {s_} ({v:.3f})" for s_, v in zip(analysis, nc["measured"])
          if v > nc["target"]]


def g_margin(s_):
    """Ring fraction at grokking minus the stronger null's 95th percentile."""
    g = nulls[s_]["grokking"]
    return g["ring"] - max(g["order_q95"], g["sub_q95"])


display(Markdown(
    "**Where the mod-add claims rest.** `no_collapse` holds at "
    + (("seed(s) " + ", ".join(nc_ok)) if nc_ok else "no seed")
    + (f"; it fails at {', '.join(nc_bad)} (largest training-accuracy drop after "
      f"grokking)"
       if nc_bad else "")
    + ". `modadd_core_cyclic` is judged at "
    + (("seed(s) " + ", ".join(nc_ok) + " only") if nc_ok else "no seed (inconclusive)")
    + (": their verdicts rest on "
       + ("one run" if len(nc_ok) == 1 else f"{len(nc_ok)} runs")
       + ", and the other seeds' numbers stay in the record, marked inconclusive. "
       if nc_ok and nc_bad else ". ")
    + "It reads one checkpoint, at grokking (step "
    + _listed(at(s_, "grokking", "step") for s_ in analysis)
    + ("), and no seed collapses after memorisation" if not any(collapses.values())
       else "), and the first collapse comes "
       + ("later at every seed" if all(not collapses[s_] or collapses[s_][0]
                                       > (at(s_, "grokking", "step") or 0)
                                       for s_ in analysis)
          else "before it at some seed")
       + " (step "
       + _listed(collapses[s_][0] if collapses[s_] else "none" for s_ in analysis)
       + ")")
    + ": the condition spans the whole trajectory after grokking, more than this "
      "claim reads. Its margins over the stronger null at grokking are "
    + _listed(f"{g_margin(s_):+.3f}" for s_ in analysis
              if "grokking" in nulls.get(s_, {}))
    + (" (positive: above the null): the claim's values, judged at every seed. "
       if not nc_bad else
       " (positive: above the null), judged only where the condition holds. ")
    + "The gating on `no_collapse` dates from the chapter's first conditions, before "
      "this build's runs were trained or read, and is kept as it was fixed rather "
      "than narrowed after the numbers. Since round 8, `modadd_core_inflates` reads "
      "the eps 1e-4 trajectory, gated by the same rule on that run "
      "(`eps_no_collapse`: " + _listed(f"{v:.3f}" for v in COND["eps_no_collapse"]
                                       ["measured"])
    + ") and by `d_eff_headroom` ("
    + _listed(f"{v:.2f}" for v in COND["d_eff_headroom"]["measured"])
    + " against `<= 1`), both registered before that run was read; round 9 moved "
      "the headroom to the start of the smoothed trend it now reads (after round "
      "8's values were seen)."
    + (" Before round 8 it read `r_kill` on the late-decay run; one condition was "
       "**added at review** there, after the round-7 numbers were read: "
       "`r_kill_headroom` "
       f"asks that the bar ({INFLATE_BAR} x the first r_kill) stay within `p - 1` = "
       f"{p - 1}, the directions the class means span (no checkpoint has r_kill above "
       f"{kill_max}); it is "
       + _listed(f"{v:.2f}" for v in kill_room.values()) + " against `<= 1` (seeds "
       + _listed(kill_room) + "), so that reading could be judged at "
       + (_listed(s_ for s_, v in kill_room.items() if v <= 1) or "no seed")
       + "; its values stay in the claim's note." if KILL else "")))

# %%
GIVEN = {"markov_spectra_match": ("markov_converged",),
         "markov_cores_share_code": ("markov_pair_converged",),
         "modadd_core_cyclic": ("no_collapse",),
         "modadd_core_inflates": ("eps_no_collapse", "d_eff_headroom"),
         "grok_time_slope": ("groktime_memorised",),
         "redundancy_law_slope": ("redundancy_branch_plateau",
                                  "redundancy_generalised",
                                  "redundancy_cut_memorised"),
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
# "nearly orthogonal" is the random level for independently initialised models of a
# rotation-symmetric network: a check (trained cores no more aligned than the null's
# 99.9th percentile), not a claim
rec.check(
    "markov_cores_not_aligned",
    max(overlaps),
    round(float(np.quantile(overlap_null, 0.999)), 4),
    op="<=",
    note="largest projector overlap of a trained pair vs the 99.9th percentile of "
    f"random 3-D subspace pairs of R^{D_m}; overlaps "
    + ", ".join(f"{o:.3f}" for o in overlaps)
    + f" (paper 0.02-0.04; random mean {overlap_null.mean():.4f}, r/D = "
      f"{3 / D_m:.4f}); "
    "share of random pairs below each: "
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
    "minus the 95th percentile of the stronger null: permuted labels or random "
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
    note="at grokking, ring fraction / permuted-labels null 95th pct / random-subspace "
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
def ranks_note(s):
    """Energy ranks of the named checkpoints, modes and the end's test accuracy."""
    return (f"seed {s}: {at(s, 'memorised', 'r_energy')} -> "
            f"{at(s, 'pre_grokking', 'r_energy')} -> "
            f"{at(s, 'grokking', 'r_energy')} -> "
            f"{at(s, 'end', 'r_energy')} (r_suf {at(s, 'grokking', 'r_suf')} -> "
            f"{at(s, 'end', 'r_suf')}, modes {at(s, 'grokking', 'modes')} -> "
            f"{at(s, 'end', 'modes')} of {p // 2 + 1}, collapses {len(collapses[s])})")


def eff_note(e_):
    """d_eff and the 99% count at grokking -> end, per seed."""
    return "; ".join(f"seed {s_}: {v['g']['pr']:.1f} -> {v['e']['pr']:.1f} (99% count "
                     f"{v['g']['n_share']} -> {v['e']['n_share']})"
                     for s_, v in e_.items())


def eps_core_note():
    """The eps run's ACE core at grokking -> end, per seed (added at review)."""
    return "; ".join(
        f"seed {s_}: energy rank {a['grokking']['r_energy']} -> "
        f"{a['end']['r_energy']}, modes {a['grokking']['modes']} -> "
        f"{a['end']['modes']} of {p // 2 + 1}, ring {a['grokking']['ring']:.2f} -> "
        f"{a['end']['ring']:.2f}"
        for s_, a in eps_an.items() if s_ in eff and {"grokking", "end"} <= set(a))


# %%
claim_per_seed(
    "modadd_core_inflates",
    "Under continued weight decay the core inflates after grokking: on the eps 1e-4 "
    "constant-rate trajectory (the paper's pull after grokking), d_eff, the "
    "participation ratio of the class means' Fourier power over directions, rises "
    "after grokking by more than the bar, on a smoothed trend (median of the last "
    "five over the first five stable checkpoints from grokking, per seed; round 9 "
    "of issue #71, registered after round 8's two-checkpoint ratios were seen)",
    [eff_trend[s]["trend"] if s in eff_trend else None for s in seeds_m],
    paper="~15 -> ~60 at p=53",
    op=">",
    target=INFLATE_BAR,
    unit="d_eff ratio",
    baseline=[eff_ld[s]["ratio"] for s in seeds_m]
    if all(s in eff_ld for s in seeds_m) else None,
    note="d_eff trend (eps run, first-five -> last-five median): " + "; ".join(
        f"seed {s_}: {v['first']:.1f} -> {v['last']:.1f}"
        for s_, v in eff_trend.items())
    + "; second reading, d_eff(end) / d_eff(grokking) (round 8): " + ", ".join(
        f"{eff[s_]['ratio']:.2f}" for s_ in seeds_m if s_ in eff)
    + "; d_eff grokking -> end (eps run): " + eff_note(eff)
    + "; eps run, the paper's own core observables grokking -> end (added at review, "
    "exploratory): " + eps_core_note()
    + "; baseline column: the two-checkpoint ratio on the late-decay run (it has "
    "no d_eff trajectory; pull after grokking "
    + ", ".join(f"{expo_post[s]:.2f}" for s in seeds_m if s in expo_post)
    + f", the paper's ~{expo_paper_post:.1f}; exploratory): " + eff_note(eff_ld)
    + ("; it rises more than the eps run at " + str(sum(
        s_ in eff and v["ratio"] > eff[s_]["ratio"] for s_, v in eff_ld.items()))
       + f" of {len(eff_ld)} seeds, so "
       "this design does not attribute a rise to weight decay" if eff_ld else "")
    + "; r_kill trend on the eps run (round 7's observable, exploratory): "
    + ", ".join(f"{eps_kill[s][0]:.2f}" for s in seeds_m if s in eps_kill)
    + ("; on the late-decay run (the reading before round 8): r_kill trend "
       + ", ".join("-" if trend_kill.get(s_) is None else f"{trend_kill[s_]:.2f}"
                   for s_ in seeds_m)
       + ", r_kill_headroom (added at review) "
       + ", ".join(f"{kill_room[s_]:.2f}" for s_ in seeds_m) if KILL else "")
    + "; late-decay run: energy-rank trend "
    + ", ".join("-" if trend[s_] is None else f"{trend[s_]:.2f}" for s_ in seeds_m)
    + " (weight-decay-0 control over its first "
    f"{nowd['config']['steps'] if nowd else '-'} steps: "
    + str([None if trend_nowd[s] is None else round(trend_nowd[s], 2)
           for s in seeds_m])
    + "); energy ranks memorised -> pre-grokking -> grokking -> end: "
    + "; ".join(ranks_note(s) for s in seeds_m if at(s, "grokking", "step"))
    + "; energy rank at step 0: " + ", ".join(str(r0.get(s)) for s in seeds_m),
)
# %%
claim_per_seed(
    "grok_time_slope",
    "Grokking time scales as 1/weight decay (log-log slope of tau = t_gen - t_mem "
    "against wd, per seed; held in the band [-1.5, -0.5], recorded as the distance "
    "|slope + 1|)",
    [abs(v + 1) for v in slopes],
    paper=-1.02,
    op="<=",
    target=0.5,
    unit="|slope + 1|",
    note="slopes " + ", ".join(f"{v:.2f}" for v in slopes)
    + f"; width {wd_d}; runs that never generalised counted at the budget: "
    f"{not_grokked or 'none'}; slope over generalised runs only: "
    + ", ".join(f"{v:.2f}" for v in slopes_gen)
    + "; censored runs left of mean log wd (budget slope is an upper bound): "
    + ", ".join(str(c) for c in censor_conservative),
)
claim_per_seed(
    "redundancy_law_slope",
    "Redundancy speeds grokking as tau ~ 1/m: log-log slope of tau (steps from a "
    "shared memorised checkpoint to generalisation) against the number m of Fourier "
    "modes the embedding keeps from there (set by design: the other modes removed "
    "at the branch, round 8), per seed; held in the band [-1.5, -0.5], recorded as "
    "the distance |slope + 1|",
    [abs(v + 1) for v in rc_slopes],
    paper="tau ~ 1/p, slope -1 at high redundancy",
    op="<=",
    target=0.5,
    unit="|slope + 1|",
    note="slopes " + ", ".join(f"{v:.2f}" for v in rc_slopes)
    + "; tau per m from the branch (None: not generalised in the budget), per seed: "
    + "; ".join(f"seed {s} (branch at step "
                f"{rc_ref[s]['t_branch'] if s in rc_ref else '-'}): "
                + ", ".join(f"{r['m']}: {r['tau']}" for r in rc_runs if r["seed"] == s)
                for s in rc_cfg["seeds"])
    + "; every mode free (reference): " + ", ".join(
        f"seed {s}: {r['tau']}" for s, r in rc_ref.items())
    + "; train accuracy right after the cut (per m), per seed: " + "; ".join(
        ", ".join(f"{r.get('cut_train', float('nan')):.2f}" for r in rc_runs
                  if r["seed"] == s) for s in rc_cfg["seeds"])
    + "; round 7's design (other modes kept, fading; 4000 steps): slopes "
    + ", ".join(f"{v:.2f}" for v in rb_slopes) + ", share generalised "
    + ", ".join(f"{v:.2f}" for v in rb_gen)
    + "; the round-5 design (modes kept from step 0; its conditions failed): slopes "
    + ", ".join(f"{v:.2f}" for v in red_slopes)
    + ", isolation gap per seed " + ", ".join(f"{v:.2f}" for v in red_iso)
    + "; the width-axis proxy (Fourier modes counted at memorisation), Spearman of "
    "tau vs modes per seed: " + ", ".join(f"{v:.2f}" for v in rhos),
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
