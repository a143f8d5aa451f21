# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # SAIL: train the initial guess through the SCF solver
#
# A self-consistent field (SCF) calculation repeats the same expensive step, building the Fock matrix from the
# current density, until the density stops changing. How many repetitions it needs depends on where it starts.
# Machine-learned initial guesses promise fewer iterations, but models trained to reproduce the *converged*
# Hamiltonian or density have been seen to slow the solver down on molecules larger than their training set.
#
# The paper's diagnosis: this is a supervision problem. A matrix-fitting loss weighs every entry equally,
# including occupied-occupied and virtual-virtual rotations that the solver does not care about. **SAIL**
# (Solver-Aligned Initialization Learning) instead unrolls a few SCF cycles from the predicted guess, sums the
# orbital-gradient norms along the way and backpropagates through DIIS and the eigensolver into the model: the
# model learns what makes the *solver* converge, without labels. It works for a model that predicts a
# Hamiltonian and for one that predicts a density. The paper also defines **ERIC**, the number of Fock builds
# with a guess divided by the number with PySCF's standard MINAO guess, counting the Fock builds a guess needs
# before the solver starts (RIC, the plain ratio of iteration counts, ignores them). It reports ERIC reductions
# of 28-37% on molecules up to 4× larger than training, and a 1.35× wall-time speedup on molecules 10× larger. <!-- paper -->
#
# | | paper | this notebook |
# |---|---|---|
# | level of theory | Kohn-Sham DFT (PBE, SCAN, B3LYP), def2-SVP | **RHF / STO-3G** (PySCF) for training and most evaluation; the same guesses re-counted under **PBE / STO-3G** and, on the OOD molecules with ≤ 8 heavy atoms, **PBE / 6-31G** (section 9) |
# | model | SE(3)-equivariant GNN, Hamiltonian or density head | a residual model on a prior (SAP Hamiltonian or MINAO density) built from rotation-covariant σ/π blocks (~6k parameters) |
# | training data | QM9 molecules with ≤ 20 atoms | ASE's G2 molecules with ≤ 4 heavy atoms (H, C, N, O, F), with perturbed geometries; then (section 10) a few hundred random RDKit/MMFF molecules with ≤ 6 heavy atoms |
# | training | GPU, long | 600 steps per model, 4 models × 3 seeds, in a checkpoint script (20 min on one shared, loaded core); section 10: the Hamiltonian surrogate fine-tuned, then SAIL started from it for 8,000 steps, one checkpoint script job per seed |
# | out of distribution | QM40 (≤ 4× larger), QMugs (10× larger) | 26 RDKit-embedded molecules with 5-14 heavy atoms (1.25-3.5× larger) |
# | unroll | T SCF cycles, DIIS | T = 6 cycles, DIIS exactly as PySCF's, in torch float64 on PySCF's integrals (section 10: Fock builds by PySCF's own J/K routine, as an autograd function) |
# | hardware | GPU | 2 CPU cores |
#
# :::{note}
# **What is reconstructed.** The SAIL loss (per-cycle orbital-gradient norms along an unrolled SCF, backpropagated
# through DIIS and the eigensolver) follows the authors' description; the weights (all 1), the unroll length and
# the RMS normalization are ours. ERIC's exact definition is not public: we count calls of PySCF's `get_veff`
# (one Fock build each) and add the builds a guess needs before the solver starts. The model is our CPU-sized
# stand-in for the paper's equivariant GNN (its form, its priors and the purification of the density head are
# ours). The models are trained through an RHF/STO-3G solver, not a DFT one; section 9 hands the same guesses
# to PySCF's PBE solver in the same basis, without retraining. The basis is minimal: there the standard MINAO guess
# is already close to the converged density, which leaves a learned guess little room.
# :::

# %% [markdown]
# ## 1. Setup
#
# In Colab, the first code cell installs this book's `helpers` package with its chemistry extra (PySCF, RDKit,
# ASE); anywhere else it does nothing.

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
            "neurips2026-executed-helpers[chem] @ "
            "git+https://github.com/neurips2026-executed/book@main",
        ],
        check=True,
    )

# %% tags=["parameters"]
quick = False
seed = 0
n_timing = 5  # interleaved rounds of the wall-time benchmark (after one warm-up)
n_align = 45  # solver-alignment check: molecules with at most this many AOs
n_oracle = 8  # PBE oracle (converged RHF density as the guess): smallest OOD molecules
ood_names = [
    "furan",
    "pyrrole",
    "imidazole",
    "glycine",
    "benzene",
    "pyridine",
    "pyrimidine",
    "alanine",
    "ethyl acetate",
    "hexane",
    "toluene",
    "phenol",
    "aniline",
    "fluorobenzene",
    "cyclohexanone",
    "benzaldehyde",
    "anisole",
    "uracil",
    "octane",
    "benzoic acid",
    "thymine",
    "indole",
    "naphthalene",
    "adenine",
    "aspirin",
    "caffeine",
]

# %% tags=["hide-input"]
import copy
import inspect
import json
import math
import time

import matplotlib.pyplot as plt
import numpy as np
import torch
from IPython.display import Markdown, display
from pyscf import lib, scf
from scipy.stats import spearmanr
from tqdm.auto import tqdm

from helpers import checkpoints, claims, plotting, repro, train
from helpers import sail_scf as ss

OOD_SMILES = ss.OOD_SMILES  # name -> SMILES, embedded by RDKit with seed 0
cfg = ss.checkpoint_config("guesses")
seeds = [seed, seed + 1, seed + 2]
if quick:
    # tiny: 8 training molecules, one seed, a few steps, trained live
    cfg.update(
        n_train=8, n_perturb=0, steps_surrogate=15, steps_sail=10, unroll=4, warmup=2
    )
    ood_names, seeds, n_timing, n_align = ["pyridine", "toluene"], [seed], 2, 36
    n_oracle = 1

# these matrices are small: one intra-op thread is fastest
env = repro.setup(seed, threads=1)
lib.num_threads(1)  # PySCF: one OpenMP thread avoids spin-waiting on a shared CPU
plotting.use_style()
rec = claims.ClaimsRecord(
    "17_sail_scf",
    dict(
        quick=quick,
        seed=seed,
        seeds=seeds,
        n_timing=n_timing,
        n_align=n_align,
        ood_names=ood_names,
        **{k: v for k, v in cfg.items() if k not in ("heads", "objectives", "seeds")},
    ),
)
print(env)

# %% [markdown]
# ## 2. Molecules
#
# Training and in-distribution test molecules come from ASE's bundled G2 set (closed shell, H/C/N/O/F, at most
# 4 heavy atoms; a fixed split); each training molecule also appears with 2 randomly displaced geometries
# (σ = 0.03 Å). The out-of-distribution (OOD) molecules are embedded by RDKit (ETKDG with a fixed seed, then MMFF): <!-- paper -->
# 26 molecules with 5 to 14 heavy atoms, rings, chains, acids, heterocycles.


# %%
def heavy(mol):
    return sum(mol.atom_pure_symbol(i) != "H" for i in range(mol.natm))


g2 = ss.g2_molecules(cfg["max_heavy"])
train_names, test_names = ss.g2_split(
    cfg["max_heavy"], cfg["n_test"], cfg["split_seed"]
)
if quick:
    test_names = test_names[:4]
ood = {n: ss.rdkit_molecule(OOD_SMILES[n], seed=0) for n in ood_names}
print(
    f"{len(train_names)} training molecules (x{1 + cfg['n_perturb']} geometries), "
    f"{len(test_names)} held-out G2 molecules"
)
print(
    "OOD (heavy atoms, basis functions):",
    {n: (heavy(m), m.nao) for n, m in ood.items()},
)

# %% [markdown]
# ## 3. A differentiable SCF that is PySCF's
#
# RHF in a nutshell. With the overlap `S`, the core Hamiltonian `H` and the two-electron integrals `(μν|λσ)` from
# PySCF, the Fock matrix of a density `P` is `F(P) = H + J(P) − K(P)/2`; the next density occupies the lowest
# `N/2` solutions of `F C = S C ε`. The orbital gradient `g = Xᵀ(F P S − S P F)X` (with `X = S^{-1/2}`) vanishes at
# self-consistency, and DIIS extrapolates the Fock matrix from recent cycles by minimizing the norm of the
# combined gradient. Here is one cycle written out, from the core-Hamiltonian guess of water:

# %%
water = ss.build_molecule(
    ["O", "H", "H"], [[0, 0, 0.117], [0, 0.757, -0.467], [0, -0.757, -0.467]]
)
ints = ss.integrals(water)
P = ss.density_from_hamiltonian(ints.H, ints)  # the "1e" guess: occupy H_core
J = torch.einsum("ijkl,kl->ij", ints.eri, P)
K = torch.einsum("ikjl,kl->ij", ints.eri, P)
F = ints.H + J - 0.5 * K  # one Fock build
g = ints.X.T @ (F @ P @ ints.S - ints.S @ P @ F) @ ints.X  # orbital gradient
print(
    f"E = {ss.energy(P, F, ints).item():.6f} Ha, RMS orbital gradient = "
    f"{g.pow(2).mean().sqrt().item():.4f}"
)

# %% [markdown]
# The one delicate step is the derivative of the occupied projector `Q = C_occ C_occᵀ` (the aufbau step) with
# respect to the matrix being diagonalized. The generic eigenvector derivative contains `1/(ε_i − ε_j)` for every
# pair of orbitals, which blows up for degenerate levels even though `Q` does not depend on rotations *within*
# the occupied or the virtual block. The projector's derivative involves only occupied-virtual pairs: with
# `M = Cᵀ Ḡ C` for an incoming gradient `Ḡ`, the outgoing gradient is `C W Cᵀ` with
# `W_ia = W_ai = M_ia / (ε_i − ε_a)` and zero elsewhere (`ss.occupied_projector`; gaps under 1 mHa are clamped).
#
# **Check `projector_gradcheck`**: `torch.autograd.gradcheck` on water's orthogonalized Fock matrix, in float64.

# %%
F_orth = (ints.X.T @ F @ ints.X).detach().requires_grad_(True)
ok = torch.autograd.gradcheck(
    lambda A: ss.occupied_projector(0.5 * (A + A.T), ints.n_occ), (F_orth,)
)
rec.check("projector_gradcheck", bool(ok), True)

# %% [markdown]
# SAIL trains through *this* solver, so it must be the solver the guesses are judged by. `ss.scf_unrolled` uses
# PySCF's DIIS exactly: the same error vector (the orthogonalized commutator), the same history of 8, and, like
# PySCF's `diis_start_cycle = 1`, the Fock matrix of the starting density is diagonalized as is and never enters
# the history. **Check `solver_alignment`**: from the same MINAO density, the torch SCF reproduces PySCF's
# trajectory cycle by cycle, energies and orbital-gradient norms (PySCF's `|g|` is `‖2 F_vo‖ = ‖g‖_F/√2`), on
# every evaluated molecule with at most `n_align` basis functions (the torch SCF holds the full four-index
# tensor).

# %%
eval_mols = {**{n: g2[n] for n in test_names}, **ood}
align_e, align_g, align_n, traj = 0.0, 0.0, 0, {}
for name, m in tqdm(eval_mols.items(), desc="torch SCF vs PySCF, cycle by cycle"):
    if m.nao > n_align:
        continue
    mf = scf.RHF(m)
    dm0 = ss.pyscf_guess(m, "minao")
    ref = ss.run_pyscf(mf, dm0)
    it = ss.integrals(m)
    tr = ss.scf_unrolled(torch.from_numpy(dm0), it, ref.cycles + 1)
    e_t = np.array([e.item() for e in tr.energies[1 : ref.cycles + 1]])
    g_t = (
        np.array([x.item() for x in tr.grad_norms[1 : ref.cycles + 1]])
        * it.n_ao
        / 2**0.5
    )
    g_ref = np.array(ref.grad_norms)
    big = g_ref > 1e-5  # near convergence, round-off in the DIIS solve dominates
    align_e = max(align_e, np.abs(e_t - np.array(ref.energies)).max())
    align_g = max(align_g, np.abs(g_t[big] / g_ref[big] - 1).max())
    align_n += 1
    traj[name] = (g_t, g_ref)
print(
    f"{align_n} molecules: max |E_torch - E_PySCF| over all cycles {align_e:.1e} Ha, "
    f"max relative difference of |g| {align_g:.1e}"
)
rec.check(
    "solver_alignment",
    float(max(align_e / 1e-8, align_g / 1e-2)),
    1.0,
    "<=",
    note=f"{align_n} molecules; energies within {align_e:.1e} Ha (bound 1e-8), "
    "gradient norms "
    f"within {align_g:.1e} relative (bound 1e-2, cycles with |g| > 1e-5)",
)
name0 = max(traj, key=lambda n: eval_mols[n].nao)
fig, ax = plt.subplots(figsize=(5.5, 3))
ax.semilogy(range(1, len(traj[name0][1]) + 1), traj[name0][1], "o", label="PySCF")
ax.semilogy(
    range(1, len(traj[name0][0]) + 1),
    traj[name0][0],
    "-",
    label="torch (ss.scf_unrolled)",
)
ax.set(xlabel="SCF cycle", ylabel="|g|", title=f"{name0}: same trajectory from MINAO")
ax.legend()
plt.show()

# %% [markdown]
# ## 4. The guess models: a good prior plus a rotation-covariant correction
#
# Two heads share one architecture, `ss.GuessModel`:
#
# * **Hamiltonian head**: `H = H_SAP + ΔH`, where `H_SAP = H_core + V_SAP` is PySCF's superposition of atomic
#   potentials (no Fock build); the guess density is the aufbau density of `H`. The untrained head *is* PySCF's
#   `sap` guess.
# * **Density head**: `P₀ = purify(P_MINAO + ΔP)`, where `purify` occupies the `N/2` strongest natural orbitals of
#   its argument (`S^{1/2} P S^{1/2}`'s largest eigenvectors), so `P₀` is idempotent with exactly `N` electrons.
#   The untrained head is the purified MINAO density.
#
# The correction is built from blocks that rotate with the atomic orbitals, each times a scalar predicted from
# rotation-invariant descriptors (elements, radial neighbour densities per element, distances). Between atoms A
# and B (unit vector `u` from A to B) every s-s, s-p and p-s block of the overlap matrix gets its own scalar, and
# the p-p block is split into its **σ part** `u uᵀ S_pp u uᵀ` and its **π part** (the rest), each with its own
# scalar: a one-scalar Hückel form cannot make a σ bond stronger without making the π bond stronger too. On each
# atom the model shifts the 1s, 2s and 2p levels, couples 1s-2s, hybridizes s with p along `Σ_B w_AB u_AB` and
# splits the p levels along `Σ_B w'_AB (u uᵀ − I/3)`. The last layers start at zero, so training starts from the
# prior.

# %%
x_demo = ss.inputs(ss.rdkit_molecule("C=O"))
demo = ss.GuessModel("hamiltonian", hidden=cfg["hidden"])
print(f"{sum(p.numel() for p in demo.parameters()):,} parameters per model")
print(inspect.getsource(ss._correction).split("# on-site blocks")[0][-900:])

# %% [markdown]
# ## 5. Two ways to train each head
#
# **Surrogate** (ground-state supervision, the baseline): fit the converged Fock matrix `F*` (Hamiltonian head)
# or the converged density `P*` (density head, after purification) entry by entry. **SAIL**: no labels; unroll
# `T = 6` SCF cycles from the predicted density with the solver above and minimize the sum of RMS orbital
# gradients along the trajectory, backpropagating through DIIS and the projector:

# %%
print(inspect.getsource(ss.sail_loss))
print(inspect.getsource(ss.surrogate_loss))

# %% [markdown]
# Each of the 4 models (2 heads × 2 objectives) is trained 600 AdamW steps (batches of 4 molecules, cosine
# decay) under 3 seeds, five times the 120 SAIL steps of this chapter's first version. That does not fit the
# default run: `data/17_sail_scf/make_guesses.py` trains them once (`make data NB=17_sail_scf`) and the default
# run loads the weights and the curves; quick mode trains tiny models live.

# %%
models, curves = {}, {}  # (head, objective, seed) -> model, its training loss
if quick:
    samples, _, _ = ss.training_samples(cfg, progress=True)
    for s in seeds:
        for head in ss.HEADS:
            for obj in ss.OBJECTIVES:
                models[head, obj, s], h = ss.train_guess(head, obj, samples, cfg, s)
                curves[head, obj, s] = h.loss
else:
    ckpt = checkpoints.load("17_sail_scf", "guesses", config=cfg)
    checkpoints.require_seeds(ckpt, seeds)  # a clear error for SEED outside them
    for s in seeds:
        for head in ss.HEADS:
            for obj in ss.OBJECTIVES:
                model = ss.GuessModel(head, hidden=cfg["hidden"])
                ckpt.load_into(model, prefix=f"{head}/{obj}/{s}.")
                models[head, obj, s] = model.eval()
                curves[head, obj, s] = ckpt.manifest["history"][
                    f"loss/{head}/{obj}/{s}"]
    fig, ax = plt.subplots(1, 2, figsize=(11, 3.4))
    for i, obj in enumerate(ss.OBJECTIVES):
        checkpoints.plot_history(
            ckpt.manifest,
            keys=[f"loss/{h}/{obj}/" for h in ss.HEADS],
            ax=ax[i],
            logy=True,
            title=f"{obj} loss (3 seeds, from the checkpoint)",
        )
    fig.tight_layout()
    plt.show()

# %%
KINDS = [(h, o) for h in ss.HEADS for o in ss.OBJECTIVES]
LABEL = {
    ("hamiltonian", "surrogate"): "H surrogate",
    ("hamiltonian", "sail"): "H SAIL",
    ("density", "surrogate"): "D surrogate",
    ("density", "sail"): "D SAIL",
}

# %% [markdown]
# **Check `rotation_invariance`**: rotating a molecule changes nothing the solver sees: the guess energy and the
# solver's whole trajectory (two OOD molecules, a random rotation, every model of the first seed). The check fails
# if the energy moves by more than 10⁻⁸ Ha, if the orbital-gradient norms of any cycle differ by more than 10⁻⁴
# relative (cycles with `|g|` > 10⁻⁶), or if a build count changes by more than one. One build either way is
# allowed: rotation changes the round-off, and a run whose last energy change lands at PySCF's threshold
# (`conv_tol = 1e-9`) can stop one cycle earlier or later on an identical trajectory; how often that happened
# is printed and kept in the check's note. This tolerance was added after the stricter version (any changed
# build count fails) failed on one such run of this build's models; it does not weaken what catches a rotation
# bug: a correction that does not rotate with the molecule moves the guess energy far above 10⁻⁸ Ha (unit test
# `test_rotation_check_sees_a_non_covariant_correction`), and its trajectory with it.


# %%
def random_rotation(r):
    q, _ = np.linalg.qr(r.normal(size=(3, 3)))
    return q * np.sign(np.linalg.det(q))


def guess_density(model, x):
    with torch.no_grad():
        return model.density(x).numpy()


def trace_gap(a, b):
    """Largest relative difference of two |g| traces over their common cycles."""
    a, b = np.asarray(a[: len(b)]), np.asarray(b[: len(a)])
    big = np.maximum(a, b) > 1e-6
    d = np.abs(a[big] - b[big]) / np.maximum(a[big], b[big])
    return float(np.max(d, initial=0))


rot_gap, rot_trace, rot_count, rot_flips, rr = 0.0, 0.0, 0, 0, repro.rng(seed, 4)
for name in ood_names[:2]:
    m = ood[name]
    out = []
    for mol in (m, ss.rotate(m, random_rotation(rr))):
        mf, x = scf.RHF(mol), ss.inputs(mol, eri=False)
        res = []
        for kind in KINDS:
            P0 = guess_density(models[(*kind, seeds[0])], x)
            r = ss.run_pyscf(mf, P0)
            res.append((mf.energy_tot(dm=P0), r.fock_builds, r.grad_norms))
        out.append(res)
    for a, b in zip(*out):
        rot_gap = max(rot_gap, abs(a[0] - b[0]))
        rot_trace = max(rot_trace, trace_gap(a[2], b[2]))
        rot_count = max(rot_count, abs(a[1] - b[1]))
        rot_flips += a[1] != b[1]
print(
    f"largest guess-energy change under rotation {rot_gap:.1e} Ha; largest relative "
    f"|g| change {rot_trace:.1e}; build counts changed: {rot_flips} (by at most "
    f"{rot_count})"
)
rec.check(
    "rotation_invariance",
    max(rot_gap / 1e-8, rot_trace / 1e-4, rot_count / 1.0),
    1.0,
    "<=",
    note=f"guess-energy change {rot_gap:.1e} Ha (bound 1e-8), |g| traces within "
    f"{rot_trace:.1e} relative (bound 1e-4), {rot_flips} of "
    f"{2 * len(KINDS)} build counts changed, by at most {rot_count} (bound 1)",
)

# %% [markdown]
# ## 6. Counting Fock builds: ERIC and RIC
#
# Every guess is handed to the same PySCF RHF solver (DIIS, default thresholds) as `dm0`; a wrapper counts each
# call of `get_veff`, i.e. each Fock build, including the one for the starting density and PySCF's final check.
# Over a set of molecules,
#
# * `RIC = Σ cycles(guess) / Σ cycles(MINAO)` counts solver iterations only;
# * `ERIC = Σ (builds(guess) + hidden(guess)) / Σ builds(MINAO)` adds the Fock builds a guess needs before the
#   solver starts.
#
# Both are **ratios of sums** over molecules: a median over a few molecules with integer counts of 8-20 builds
# jumps by 0.05-0.12 with a single build. Our models need no Fock build (hidden = 0); to show where the two <!-- paper -->
# differ we add a guess that does: **MINAO + 1 step**, the aufbau density of `F(P_MINAO)` (one hidden build).
# PySCF's own guesses are measured side by side: `minao`, `atom` (atomic HF densities), `sap` (= the untrained
# Hamiltonian head), `huckel`; and the purified MINAO density (= the untrained density head).
#
# For the diagnosis we also record each model's error on its surrogate target (`‖H − F*‖/‖F*‖` or
# `‖P₀ − P*‖/‖P*‖`, with PySCF's converged `F*`, `P*`), in distribution (held-out G2) and out of it.
#
# **Check `eric_minao_is_one`**: handing PySCF's MINAO density in as `dm0` costs exactly as many builds as
# letting PySCF make its default guess (held-out G2 molecules). **Check `electron_count`**: every model guess
# holds exactly `N` electrons.

# %%
PYSCF_GUESSES = ("minao", "atom", "sap", "huckel")
builds, cycles, hidden, fit_err, traces, conv = {}, {}, {}, {}, {}, {}
# per molecule and model: occupied-virtual block / whole-matrix density error
ov_err, full_err = {}, {}
prior_fit = {}  # the untrained Hamiltonian head (the SAP prior) on its target
minao_gap, e_count_gap = 0, 0.0
for name, m in tqdm(eval_mols.items(), desc="PySCF runs"):
    mf = scf.RHF(m)
    # PySCF's own default guess first: a second kernel() call would restart from the
    # converged orbitals
    default = ss.run_pyscf(mf, None) if name in test_names else None
    runs = {"minao": ss.run_pyscf(mf, ss.pyscf_guess(m, "minao"))}
    if default is not None:
        minao_gap = max(minao_gap, abs(default.fock_builds - runs["minao"].fock_builds))
    F_star, P_star = mf.get_fock(), mf.make_rdm1()  # converged (not counted)
    S = mf.get_ovlp()
    # converged orbitals
    C_o, C_v = mf.mo_coeff[:, mf.mo_occ > 0], mf.mo_coeff[:, mf.mo_occ == 0]
    ov_err[name], full_err[name] = {}, {}
    for gname in PYSCF_GUESSES[1:]:
        runs[gname] = ss.run_pyscf(mf, ss.pyscf_guess(m, gname))
    # MINAO + 1 step: one Fock build before the solver starts
    F1 = mf.get_fock(dm=ss.pyscf_guess(m, "minao"))
    e1, c1 = mf.eig(F1, S)
    runs["MINAO + 1 step"] = ss.run_pyscf(mf, mf.make_rdm1(c1, mf.get_occ(e1, c1)))
    x = ss.inputs(m, eri=False)
    runs["purified MINAO"] = ss.run_pyscf(mf, ss.purify(x.P_minao, x.ints).numpy())
    sample = ss.Sample(x, torch.from_numpy(F_star), torch.from_numpy(P_star))
    prior_fit[name] = float(
        np.linalg.norm(x.H_sap.numpy() - F_star) / np.linalg.norm(F_star)
    )
    errs = {}
    for key, model in models.items():
        P0 = guess_density(model, x)
        e_count_gap = max(e_count_gap, abs(np.trace(P0 @ S) - m.nelectron))
        runs[key] = ss.run_pyscf(mf, P0)
        # the part of the guess that mixes occupied and virtual converged orbitals (what
        # SCF must rotate away)
        ov_err[name][key] = float(np.linalg.norm(C_v.T @ S @ P0 @ S @ C_o)
                                  / np.linalg.norm(P_star))
        full_err[name][key] = float(np.linalg.norm(P0 - P_star)
                                    / np.linalg.norm(P_star))
        with torch.no_grad():
            errs[key] = ss.target_error(model, sample).item()
    builds[name] = {k: r.fock_builds for k, r in runs.items()}
    cycles[name] = {k: r.cycles for k, r in runs.items()}
    traces[name] = {k: r.grad_norms for k, r in runs.items()}
    conv[name] = {k: r.converged for k, r in runs.items()}
    fit_err[name] = errs
    bad = [k for k, r in runs.items() if not r.converged]
    if bad:
        print(f"{name}: not converged in 100 cycles (counted at 100): {bad}")
hidden = {k: (1 if k == "MINAO + 1 step" else 0) for k in builds[test_names[0]]}
rec.check("eric_minao_is_one", float(minao_gap), 0.0, "==")
rec.check("electron_count", float(e_count_gap), 1e-8, "<=")


# %%
def eric(group, k):
    return ss.ratio_of_sums(
        [builds[n][k] + hidden[k] for n in group], [builds[n]["minao"] for n in group]
    )


def ric(group, k):
    return ss.ratio_of_sums(
        [cycles[n][k] for n in group], [cycles[n]["minao"] for n in group]
    )


def eric_ci(group, k):
    return ss.bootstrap_ratio(
        [builds[n][k] + hidden[k] for n in group],
        [builds[n]["minao"] for n in group],
        seed=seed,
    )


references = list(PYSCF_GUESSES) + ["MINAO + 1 step", "purified MINAO"]
print(f"{'guess':>22}  {'ERIC G2':>8}  {'ERIC OOD':>8}  {'90% CI':>13}  {'RIC OOD':>8}")
for k in references + list(models):
    lab = k if isinstance(k, str) else f"{LABEL[k[:2]]} s{k[2]}"
    lo, hi = eric_ci(ood_names, k)
    print(
        f"{lab:>22}  {eric(test_names, k):8.3f}  {eric(ood_names, k):8.3f}  "
        f"[{lo:.3f}, {hi:.3f}]  {ric(ood_names, k):8.3f}"
    )

# %% [markdown]
# ## 7. The diagnosis, measured
#
# The paper's claim is specific: ground-state supervision fits its target well out of distribution, *yet* its
# guesses slow the solver, while SAIL fits the same target worse and speeds the solver up. Below, per model kind
# (mean over seeds): the target-fit error in and out of distribution, and ERIC in and out of distribution; then
# paired per-molecule comparisons for each seed (molecules where the guess needs fewer / as many / more builds
# than the comparison, and the mean difference in builds).

# %%
kinds_seeds = {kind: [(*kind, s) for s in seeds] for kind in KINDS}


def mean_fit(group, key):
    return float(np.mean([fit_err[n][key] for n in group]))


print(
    f"{'model':>12}  {'fit err G2':>10}  {'fit err OOD':>11}  {'ERIC G2':>8}  "
    f"{'ERIC OOD':>8}"
)
for kind, keys in kinds_seeds.items():
    print(
        f"{LABEL[kind]:>12}  {np.mean([mean_fit(test_names, k) for k in keys]):10.4f}  "
        f"{np.mean([mean_fit(ood_names, k) for k in keys]):11.4f}  "
        f"{np.mean([eric(test_names, k) for k in keys]):8.3f}  "
        f"{np.mean([eric(ood_names, k) for k in keys]):8.3f}"
    )


def paired(a, b, group):
    d = np.array([builds[n][a] + hidden[a] - builds[n][b] - hidden[b] for n in group])
    return f"{(d < 0).sum():2d}/{(d == 0).sum():2d}/{(d > 0).sum():2d}  {d.mean():+.2f}"


print("\npaired on the OOD molecules: fewer/same/more builds, mean difference")
for s in seeds:
    for head in ss.HEADS:
        sail_key, sur_key = (head, "sail", s), (head, "surrogate", s)
        print(
            f"seed {s} {head:>11}: SAIL vs MINAO "
            f"{paired(sail_key, 'minao', ood_names)}; "
            f"SAIL vs surrogate {paired(sail_key, sur_key, ood_names)}; "
            f"surrogate vs MINAO {paired(sur_key, 'minao', ood_names)}"
        )

# %% [markdown]
# **Where do the saved builds come from?** A diagnostic for the size of the effect: we split each PySCF run into
# an *early* phase (cycles until the orbital gradient `|g|` first drops below 10⁻²) and a *tail* (the cycles from
# there to convergence, where DIIS converges at a rate set by the molecule rather than by the start). It says
# where the saved cycles fall, not what no guess can save: a start close enough to convergence shortens the tail
# too (the oracle of section 9 restarts PBE from a converged density). Means over the OOD molecules (models: over
# seeds too).


# %%
def phases(norms, thr=1e-2):
    early = next((i + 1 for i, v in enumerate(norms) if v <= thr), len(norms))
    return early, len(norms) - early, norms[0]


print(
    f"{'guess':>16}  {'early cycles':>12}  {'tail cycles':>11}  "
    f"{'|g| after cycle 1':>17}"
)
# guess -> (early cycles, tail cycles), means over molecules (and seeds)
phase_mean = {}
for k in ["minao", "purified MINAO"] + KINDS:
    keys = kinds_seeds.get(k, [k])
    ph = np.array([phases(traces[n][q]) for n in ood_names for q in keys])
    phase_mean[k] = (ph[:, 0].mean(), ph[:, 1].mean())
    print(
        f"{LABEL.get(k, k):>16}  {ph[:, 0].mean():12.2f}  {ph[:, 1].mean():11.2f}  "
        f"{np.median(ph[:, 2]):17.2e}"
    )


# %% [markdown]
# Left: each OOD molecule's build ratio to MINAO against its size (mean over seeds). Right: each trained model
# (one point per seed) placed by its OOD target-fit error and its OOD ERIC. The paper's diagnosis predicts the
# surrogates to the left of and above SAIL.

# %%
fig, ax = plt.subplots(1, 2, figsize=(11.5, 4))
order = sorted(eval_mols, key=lambda n: (heavy(eval_mols[n]), n))
xs = np.array([heavy(eval_mols[n]) for n in order], float)
show = ["sap", "purified MINAO", "MINAO + 1 step"] + KINDS
for i, k in enumerate(show):
    keys = kinds_seeds.get(k, [k])
    y = [
        np.mean([(builds[n][q] + hidden[q]) / builds[n]["minao"] for q in keys])
        for n in order
    ]
    ax[0].plot(
        xs + (i - len(show) / 2) * 0.07,
        y,
        "o" if k in KINDS else ".",
        ms=6 if k in KINDS else 4,
        label=LABEL.get(k, k),
        color=plotting.PALETTE[i % len(plotting.PALETTE)],
    )
ax[0].axhline(1, color="k", lw=1, ls=":")
ax[0].axvline(cfg["max_heavy"] + 0.5, color="grey", lw=1)
ax[0].set(
    xlabel="heavy atoms", ylabel="builds / MINAO's builds", title="per molecule vs size"
)
ax[0].legend(fontsize=7, ncol=2)
for i, kind in enumerate(KINDS):
    ax[1].scatter(
        [mean_fit(ood_names, k) for k in kinds_seeds[kind]],
        [eric(ood_names, k) for k in kinds_seeds[kind]],
        label=LABEL[kind],
        marker="s" if kind[0] == "density" else "o",
        color=plotting.PALETTE[(i + 3) % len(plotting.PALETTE)],
    )
ax[1].axhline(1, color="k", lw=1, ls=":")
ax[1].set(
    xscale="log",
    xlabel="target-fit error, OOD (mean relative)",
    ylabel="ERIC, OOD (ratio of sums)",
    title="fitting the target vs helping the solver",
)
ax[1].legend(fontsize=8)
fig.tight_layout()
plt.show()

# %% [markdown]
# ## 8. Convergence traces, and wall time
#
# The slider steps through the OOD molecules (precomputed; it works in the static page): PySCF's orbital-gradient
# norm per cycle from each starting guess (models of the first seed).


# %%
def draw_trace(fig, name):
    ax = fig.add_subplot(111)
    for i, k in enumerate(["minao", "sap", "purified MINAO"] + KINDS):
        key = (*k, seeds[0]) if k in KINDS else k
        norms = traces[name][key]
        ax.semilogy(
            range(1, len(norms) + 1),
            norms,
            marker="o" if k in KINDS else ".",
            ms=3,
            label=LABEL.get(k, k),
            color=plotting.PALETTE[i % len(plotting.PALETTE)],
            lw=2 if k in KINDS else 1,
        )
    ax.set(
        xlabel="SCF cycle",
        ylabel="|g| (PySCF)",
        title=f"{name}: {heavy(ood[name])} heavy atoms",
    )
    ax.legend(fontsize=7, ncol=2)


plotting.static_slider(ood_names, draw_trace, figsize=(7, 3.8), label="molecule")

# %% [markdown]
# Wall time, model included: on the two largest OOD molecules we time (MINAO guess + SCF) against (features,
# MINAO prior, density-SAIL model, purification + SCF) for each seed, `n_timing` interleaved rounds after a
# warm-up (`repro.benchmark`), median CPU time (wall time is kept beside it); the integrals are computed once beforehand and shared, so both sides time exactly the guess
# plus the iterations. (The density head is timed because its prior costs what MINAO costs.) The same loop times
# the best reference without a model, the purified MINAO density (overlap, MINAO, purification + SCF): the
# speedup a practitioner gets for free.


# %%
biggest = sorted(ood_names, key=lambda n: ood[n].nao)[-2:]
t_minao, t_purified, t_sail = 0.0, 0.0, {s: 0.0 for s in seeds}
# largest spread over the molecules
t_spread = {k: 0.0 for k in ["minao", "purified", *seeds]}
for name in biggest:
    m = ood[name]
    mf = scf.RHF(m)
    mf.kernel()  # builds and caches the integrals; warm-up

    def with_minao(mf=mf, m=m):
        mf.kernel(dm0=ss.pyscf_guess(m, "minao"))

    def with_sail(s, mf=mf, m=m):
        model = models["density", "sail", s]
        mf.kernel(dm0=guess_density(model, ss.inputs(m, eri=False, head="density")))

    def with_purified(mf=mf, m=m):  # no model, so no features
        ints = ss.integrals(m, eri=False)
        P0 = torch.from_numpy(ss.pyscf_guess(m, "minao"))
        mf.kernel(dm0=ss.purify(P0, ints).numpy())

    # every side timed in one run, interleaved rounds, CPU time beside wall
    tm = repro.benchmark({"minao": with_minao, "purified": with_purified,
                          **{str(s): (lambda s=s: with_sail(s)) for s in seeds}},
                         repeats=n_timing, warmup=1)
    t_minao += tm.median("minao")
    t_purified += tm.median("purified")
    for s in seeds:
        t_sail[s] += tm.median(str(s))
    for k in t_spread:
        t_spread[k] = max(t_spread[k], tm.spread(str(k)))
speedup = [t_minao / t_sail[s] for s in seeds]
print(
    f"{biggest}, CPU s (median, summed): MINAO {t_minao:.2f}; "
    f"purified MINAO {t_purified:.2f} "
    f"(speedup {t_minao / t_purified:.3f}); density SAIL "
    + ", ".join(f"seed {s} {t_sail[s]:.2f}" for s in seeds)
    + f" -> speedup {np.round(speedup, 3).tolist()}; spreads (IQR/median) "
    + ", ".join(f"{k} {v:.2f}" for k, v in t_spread.items())
)

# %% [markdown]
# Live (Jupyter or Colab): pick a molecule by SMILES and compare the solver's cost from MINAO and from each model
# of the first seed.


# %%
def compare(smiles="c1ccc2ccccc2c1"):
    try:
        m = ss.rdkit_molecule(smiles, seed=0)
    except ValueError as e:
        print(e)
        return
    mf = scf.RHF(m)
    base = ss.run_pyscf(mf, ss.pyscf_guess(m, "minao")).fock_builds
    print(f"{heavy(m)} heavy atoms, {m.nao} basis functions; MINAO: {base} Fock builds")
    x = ss.inputs(m, eri=False)
    for kind in KINDS:
        n = ss.run_pyscf(mf, guess_density(models[(*kind, seeds[0])], x)).fock_builds
        print(f"{LABEL[kind]:>12}: {n} Fock builds, ERIC {n / base:.2f}")


plotting.live_controls(compare, smiles="c1ccc2ccccc2c1")

# %% [markdown]
# ## 9. Toward the paper's level of theory: the same guesses under PBE
#
# The paper's solver is Kohn-Sham DFT. We hand the *same* initial densities (models trained through the RHF
# solver, not retrained) to PySCF's restricted Kohn-Sham solver with the PBE functional in the same STO-3G basis
# (`ss.dft_solver`: integration grid level 1, PySCF's default convergence settings, 100 cycles at most,
# identical for every guess) and count its Kohn-Sham builds exactly as before. MINAO + 1 step now costs one
# hidden *Kohn-Sham* build. A PBE run costs 1-25 s here (the exchange-correlation integration dominates), so
# 26 molecules × 10 guesses do not fit the default run: `data/17_sail_scf/count_pbe.py` ran them once from the
# checkpoint's SAIL models (both heads, seeds 0, 1, 2) and the references MINAO, `atom`, purified MINAO and
# MINAO + 1 step, and wrote `pbe_sto-3g.json` (counts and energies, no weights, with the checkpoint's sha256).
# PySCF's `sap` and `huckel` guesses were dropped after the five smallest molecules of a first run, where both
# needed more builds than MINAO (`huckel` 101 on pyrimidine); the surrogates were dropped for time.
#
# **Check `pbe_counts_reproduce`**: on the smallest OOD molecule the notebook recounts live, with this run's
# models, MINAO, the purified MINAO density and the first seed's two SAIL models: every build count must
# equal the stored one (quick mode, whose models are trained live, recounts the two references only).

# %%
pbe = json.loads(checkpoints.fetch("17_sail_scf", "pbe_sto-3g.json").read_text())
pmol, p_hidden = pbe["molecules"], pbe["hidden"]
if not quick and pbe["checkpoint_sha256"] != ckpt.manifest["weights"]["sha256"]:
    raise ValueError(
        "pbe_sto-3g.json was counted with other weights than the checkpoint's; "
        "recount with: .venv/bin/python data/17_sail_scf/count_pbe.py"
    )
p_names = [n for n in ood_names if n in pmol]
P_KINDS = [("hamiltonian", "sail"), ("density", "sail")]
p_seeds = sorted({int(k.split("/")[2]) for k in p_hidden if k.count("/") == 2})
p_refs = [k for k in references if k in p_hidden]
print(
    f"PBE counts: {len(pmol)} molecules "
    f"({'complete' if pbe['complete'] else 'partial'})"
    f", solver {pbe['solver']}; seeds {p_seeds}"
)

name_live = min(p_names, key=lambda n: (pmol[n]["nao"], n))
m_live = ood[name_live]
mf_live = ss.dft_solver(m_live, pbe["solver"]["xc"], pbe["solver"]["grid_level"])
x_live = ss.inputs(m_live, eri=False)
live = {
    "minao": ss.pyscf_guess(m_live, "minao"),
    "purified MINAO": ss.purify(x_live.P_minao, x_live.ints).numpy(),
}
if not quick:
    for kind in P_KINDS:
        model = models[(*kind, seeds[0])]
        live[f"{kind[0]}/{kind[1]}/{seeds[0]}"] = guess_density(model, x_live)
live_builds = {k: ss.run_pyscf(mf_live, P).fock_builds for k, P in live.items()}
stored = {k: pmol[name_live]["runs"][k]["builds"] for k in live}
print(f"{name_live}: live {live_builds}\n{' ' * len(name_live)}  stored {stored}")
rec.check(
    "pbe_counts_reproduce",
    float(sum(live_builds[k] != stored[k] for k in live)),
    0.0,
    "==",
    note=f"{name_live}, {len(live)} guesses recounted live under RKS-PBE/STO-3G",
)


# %%
def p_builds(group, k):
    return [pmol[n]["runs"][k]["builds"] + p_hidden[k] for n in group]


def p_eric(group, k):
    return ss.ratio_of_sums(p_builds(group, k), p_builds(group, "minao"))


def p_ric(group, k):
    return ss.ratio_of_sums(
        [pmol[n]["runs"][k]["cycles"] for n in group],
        [pmol[n]["runs"]["minao"]["cycles"] for n in group],
    )


def p_ok(group, k):
    return [n for n in group if pmol[n]["runs"][k]["converged"]]


p_keys = p_refs + [f"{h}/{o}/{s}" for h, o in P_KINDS for s in p_seeds]
print(
    f"{'guess':>24}  {'PBE ERIC':>8}  {'90% CI':>13}  {'PBE RIC':>7}  {'RHF ERIC':>8}"
)
for k in p_keys:
    lo, hi = ss.bootstrap_ratio(
        p_builds(p_names, k), p_builds(p_names, "minao"), seed=seed
    )
    parts = k.split("/")
    rhf_key = k if len(parts) == 1 else (parts[0], parts[1], int(parts[2]))
    rhf = f"{eric(p_names, rhf_key):8.3f}" if rhf_key in builds[p_names[0]] else " " * 8
    bad = len(p_names) - len(p_ok(p_names, k))
    print(
        f"{k:>24}  {p_eric(p_names, k):8.3f}  [{lo:.3f}, {hi:.3f}]  "
        f"{p_ric(p_names, k):7.3f}  {rhf}" + (f"  ({bad} not converged)" if bad else "")
    )

# %% [markdown]
# Per molecule, the ratio of PBE builds to MINAO's for the models (mean over seeds) and the best reference,
# against the same ratio under RHF: does a guess that saves builds in one solver save them in the other?

# %%
p_ref_eric = {k: p_eric(p_ok(p_names, k), k) for k in p_refs}
p_best = min(p_refs, key=p_ref_eric.get)
fig, ax = plt.subplots(figsize=(5.5, 4))
for i, kind in enumerate(P_KINDS):
    both = [s for s in p_seeds if (*kind, s) in models]  # quick: live models differ
    if not both:
        continue
    rx = [
        np.mean([builds[n][(*kind, s)] / builds[n]["minao"] for s in both])
        for n in p_names
    ]
    py = [
        np.mean([p_builds([n], f"{kind[0]}/{kind[1]}/{s}")[0] for s in both])
        / pmol[n]["runs"]["minao"]["builds"]
        for n in p_names
    ]
    ax.scatter(rx, py, s=18, label=LABEL[kind], color=plotting.PALETTE[i + 3])
ax.axhline(1, color="k", lw=1, ls=":")
ax.axvline(1, color="k", lw=1, ls=":")
ax.set(
    xlabel="builds / MINAO's, RHF",
    ylabel="builds / MINAO's, PBE",
    title="the same guesses in two solvers (per OOD molecule)",
)
ax.legend(fontsize=8)
plt.show()

# %% [markdown]
# **Diagnosis: how far can an RHF-trained guess go under PBE?** SAIL drives its guess toward what the *RHF*
# solver converges to. An oracle bounds that: hand PBE the converged RHF density itself, the end point of the RHF
# trajectory that no guess trained through RHF can beat by RHF's measure. If even that density saves little
# under PBE, the gap is the change of solver, not the training. Live, on the `n_oracle` smallest OOD molecules
# (ratio of sums against the stored MINAO counts; the printout also gives how many builds the converged PBE
# density itself needs, for comparison).

# %%
o_names = sorted(p_names, key=lambda n: (pmol[n]["nao"], n))[:n_oracle]
o_builds, o_pbe = [], []
for n in tqdm(o_names, desc="oracle: converged RHF density under PBE"):
    mf_o = ss.dft_solver(ood[n], pbe["solver"]["xc"], pbe["solver"]["grid_level"])
    rhf = scf.RHF(ood[n])
    rhf.kernel()
    o_builds.append(ss.run_pyscf(mf_o, rhf.make_rdm1()).fock_builds)
    o_pbe.append(ss.run_pyscf(mf_o, mf_o.make_rdm1()).fock_builds)  # converged PBE
o_eric = ss.ratio_of_sums(o_builds, p_builds(o_names, "minao"))
o_sail = [p_eric(o_names, f"hamiltonian/sail/{s}") for s in p_seeds]
print(
    f"{len(o_names)} smallest OOD molecules under PBE/STO-3G: converged RHF density "
    f"ERIC {o_eric:.3f}; H SAIL per seed {np.round(o_sail, 3).tolist()}; "
    f"atom {p_eric(o_names, 'atom'):.3f}; converged PBE density restarts in "
    f"{np.mean(o_pbe):.1f} builds"
)

# %% [markdown]
# **A larger basis.** The paper's basis is not minimal. Where `count_pbe.py --basis 6-31g` has been run (here on
# the OOD molecules with at most 8 heavy atoms only, a size set by run time; see Known limits), the same
# STO-3G guesses are carried into 6-31G (`ss.project_density`, `P' = T P Tᵀ` with `T = S₆₋₃₁G⁻¹ S₆₋₃₁G,STO-3G`)
# and compared with PySCF's own guesses made in 6-31G, including its MINAO; the projected STO-3G MINAO density
# shows what the projection alone costs.

# %%
p631_path = checkpoints.data_dir() / "17_sail_scf" / "pbe_6-31g.json"
p631 = json.loads(p631_path.read_text()) if p631_path.exists() else None
if p631 is not None:
    q_mol, q_hidden = p631["molecules"], p631["hidden"]
    q_names = [n for n in ood_names if n in q_mol]

    def q_builds(group, k):
        return [q_mol[n]["runs"][k]["builds"] + q_hidden[k] for n in group]

    def q_eric(group, k):
        return ss.ratio_of_sums(q_builds(group, k), q_builds(group, "minao"))

    q_refs = [k for k in q_hidden if k.count("/") != 2]
    q_ref_eric = {
        k: q_eric([n for n in q_names if q_mol[n]["runs"][k]["converged"]], k)
        for k in q_refs
    }
    q_best = min(q_refs, key=q_ref_eric.get)
    print(
        f"PBE/6-31G, {len(q_names)} OOD molecules "
        f"({'complete' if p631['complete'] else 'partial'}), ERIC (ratio of sums):"
    )
    for k in q_refs + [f"{h}/{o}/{s}" for h, o in P_KINDS for s in p_seeds]:
        print(f"{k:>24}  {q_eric(q_names, k):.3f}")
else:
    print("pbe_6-31g.json not present (not counted)")

# %% [markdown]
# ## 10. SAIL from the surrogate, on a few hundred molecules, through PySCF's J/K build
#
# Three changes to the training, together. **The solver**: the unrolled SCF above contracts the full four-index
# tensor with `einsum`; here each Fock build is PySCF's own J/K routine (`scf.hf.dot_eri_dm` on the 8-fold
# symmetric integrals, the call PySCF's solver makes), wrapped as an autograd function. `J` and `K` are linear in
# the density and self-adjoint (`∂L/∂P = J(Ḡ_J) + K(Ḡ_K)` for incoming gradients `Ḡ_J`, `Ḡ_K`), so the backward
# pass is one more J/K build. **The data**: random closed-shell molecules with 2-6 heavy atoms (chains, rings,
# Kekulé heteroaromatics; `ss.random_smiles`, none of them an OOD molecule), embedded by RDKit ETKDG + MMFF like
# the OOD molecules, so training and test geometries come from the same force field. **The start**: each seed's
# Hamiltonian surrogate from section 5 is first fine-tuned on these molecules with its own loss (so the surrogate
# it is compared with has seen the same molecules), and SAIL starts from those weights. The surrogate's fine-tune
# is far shorter than SAIL's training (`steps_surrogate` steps against SAIL's 8,000, the reading gives both); the
# comparison leans on the surrogate's own curve being flat as well (`sail_ft_converged` takes the worse of the
# two curves), not on equal step counts. **The budget**, the same
# for every seed: 4,000 SAIL steps of warm-up and cosine decay to a tenth of the learning rate, then 4,000 more at
# that floor (`ss.sail_tail`; fresh AdamW moments, batches continuing the same seeded draw). The previous round
# stopped at the end of the cosine, where two seeds' losses were still falling by more than the plateau rule
# allows; the continuation was fixed from those training curves alone, before any claim was read again, and
# `sail_ft_converged` below is the same rule as before. The OOD set for these models is the OOD molecules with
# more heavy atoms than any training molecule. The training (`data/17_sail_scf/make_sail_ft.py`, one checkpoint
# per seed, about 20 minutes each on one shared core; `--resume` continues a checkpoint of the first 4,000 steps)
# does not fit the default run; quick mode trains a tiny version live.

# %%
print(inspect.getsource(ss._JK))

# %% [markdown]
# **Check `jk_autograd`**: on formaldehyde, the J/K path's SAIL loss (8 unrolled cycles) and its gradient with
# respect to every model parameter equal the `einsum` path's, and `gradcheck` (finite differences) passes on the
# J/K function itself with a non-symmetric density.

# %%
form = ss.rdkit_molecule("C=O")
x_e, x_j = ss.inputs(form), ss.inputs(form, eri="jk")
probe = copy.deepcopy(models["hamiltonian", "sail", seeds[0]])
jk_l, jk_g = [], []
for x in (x_e, x_j):
    probe.zero_grad()
    loss = torch.stack(ss.scf_unrolled(probe.density(x), x.ints, 8).grad_norms).sum()
    loss.backward()
    jk_l.append(loss.item())
    jk_g.append(torch.cat([p.grad.flatten() for p in probe.parameters()]))
D = torch.from_numpy(repro.rng(seed, 8).normal(size=(x_j.ints.n_ao,) * 2))
jk_fd = torch.autograd.gradcheck(
    lambda P: ss.coulomb_exchange(P, x_j.ints), (D.requires_grad_(True),)
)
jk_gap = max(abs(jk_l[0] - jk_l[1]), (jk_g[0] - jk_g[1]).abs().max().item())
print(f"loss and gradient gap, J/K vs einsum: {jk_gap:.1e}; gradcheck: {jk_fd}")
rec.check("jk_autograd", jk_gap if jk_fd else float("inf"), 1e-9, "<=",
          note=f"max |loss or gradient difference| {jk_gap:.1e}; gradcheck {jk_fd}")

# %%
ft_cfg = {s: ss.checkpoint_config(f"sail_ft_{s}") for s in seeds}
if quick:  # a tiny version, trained live from this run's surrogates
    for c in ft_cfg.values():
        c.update(n_mols=10, n_held=4, steps_surrogate=4, steps_sail=4, unroll=4,
                 warmup=0, steps_sail_tail=4, warmup_tail=0)
ft_mols, ft_train, ft_held = ss.ft_molecules(ft_cfg[seeds[0]])


def try_sample(smi):
    """The training sample of a molecule, or None where its reference RHF does not
    converge (the data script drops those molecules too)."""
    try:
        return ss.sample(ft_mols[smi], eri="jk")
    except ValueError:
        return None


ft_curves, ft_models = {}, {}  # (head, objective, seed) -> fine-tuned model
for s in seeds:
    c = ft_cfg[s]
    if quick:
        smp = [x for x in map(try_sample, ft_train) if x is not None]
        init = models["hamiltonian", "surrogate", s]
        sur, h1 = ss.train_guess("hamiltonian", "surrogate", smp, c, s, init=init)
        sail, h2 = ss.train_guess("hamiltonian", "sail", smp, c, s, init=sur)
        sail, h3 = ss.sail_tail(sail, smp, c, s)  # continued at the schedule's floor
        ft_models["hamiltonian", "surrogate_ft", s] = sur
        ft_models["hamiltonian", "sail_ft", s] = sail
        ft_curves[s] = {"surrogate_ft": h1.loss,
                        "sail_ft": ss.join_curves(h2.loss, h3.loss)}
        continue
    ck_ft = checkpoints.load("17_sail_scf", f"sail_ft_{s}", config=c)
    # the molecules the script kept (its reference RHF converged)
    ft_train = ck_ft.manifest["extra"]["train_smiles"]
    ft_held = ck_ft.manifest["extra"]["held_smiles"]
    ft_curves[s] = {}
    for obj in ("surrogate_ft", "sail_ft"):
        mdl = ss.GuessModel("hamiltonian", hidden=c["hidden"])
        ck_ft.load_into(mdl, prefix=f"hamiltonian/{obj}/{s}.")
        ft_models["hamiltonian", obj, s] = mdl.double().eval()
        ft_curves[s][obj] = ck_ft.manifest["history"][f"loss/hamiltonian/{obj}/{s}"]
ft_ood = [n for n in ood_names if heavy(ood[n]) > ft_cfg[seeds[0]]["max_heavy"]]
print(f"{len(ft_train)} training / {len(ft_held)} held-out molecules; OOD for these "
      f"models: {len(ft_ood)} molecules with {min(heavy(ood[n]) for n in ft_ood)}-"
      f"{max(heavy(ood[n]) for n in ft_ood)} heavy atoms")

# %%
fig, ax = plt.subplots(1, 2, figsize=(11, 3.2))
for i, obj in enumerate(("surrogate_ft", "sail_ft")):
    for s in seeds:
        cv = ft_curves[s][obj]
        v = np.asarray(cv["value"] if isinstance(cv, dict) else cv, float)
        st = np.asarray(cv["step"]) if isinstance(cv, dict) else np.arange(len(v)) + 1
        ax[i].plot(st, v, lw=0.8, label=f"seed {s}")
    ax[i].set(yscale="log", xlabel="step", title=f"{obj} loss", ylabel="batch loss")
    ax[i].legend(fontsize=8)
# dotted: the end of the cosine schedule; shaded: the fifths the plateau rule compares
n_cos = ft_cfg[seeds[0]]["steps_sail"]
n_all = n_cos + ft_cfg[seeds[0]]["steps_sail_tail"]
ax[1].axvline(n_cos, color="grey", lw=1, ls=":")
ax[1].axvspan(0.6 * n_all, n_all, color="grey", alpha=0.1, lw=0)
fig.tight_layout()
plt.show()

# %% [markdown]
# In the SAIL curves above the dotted line marks the end of the cosine schedule and the shaded band the last two
# fifths of the run, which the plateau rule compares. Every guess is counted as in section 6: the fine-tuned
# surrogate and SAIL-from-surrogate models of each seed on the larger OOD molecules (MINAO and the references
# were counted there already) and, in distribution, on the held-out random molecules, with MINAO. The table adds
# the G2-trained models of section 5 on the OOD molecules and the SAIL loss on the held-out molecules.

# %%
FT_KINDS = [("hamiltonian", "surrogate_ft"), ("hamiltonian", "sail_ft")]
ft_keys = [(*k, s) for k in FT_KINDS for s in seeds]
for k in ft_keys:
    hidden[k] = 0
for name in tqdm(ft_ood, desc="fine-tuned models, OOD"):
    m = ood[name]
    mf, x = scf.RHF(m), ss.inputs(m, eri=False)
    for k in ft_keys:
        r = ss.run_pyscf(mf, guess_density(ft_models[k], x))
        builds[name][k], cycles[name][k] = r.fock_builds, r.cycles
        conv[name][k] = r.converged
h_samples = {n: try_sample(n) for n in ft_held}
ft_held = [n for n in ft_held if h_samples[n] is not None]  # (all, in the default run)
h_samples = [h_samples[n] for n in ft_held]
h_builds = {}  # held-out random molecules: guess -> builds
for smi in tqdm(ft_held, desc="fine-tuned models, held-out"):
    m = ft_mols[smi]
    mf, x = scf.RHF(m), ss.inputs(m, eri=False)
    h_builds[smi] = {"minao": ss.run_pyscf(mf, ss.pyscf_guess(m, "minao")).fock_builds}
    for k in ft_keys:
        h_builds[smi][k] = ss.run_pyscf(mf, guess_density(ft_models[k], x)).fock_builds


def h_loss(mdl):
    with torch.no_grad():
        return ss.sail_loss(mdl, h_samples, ft_cfg[seeds[0]]["unroll"]).item()


h_sail_loss = {k: h_loss(ft_models[k] if k in ft_models else models[k])
               for k in [("hamiltonian", o, s) for o in ("surrogate", "surrogate_ft",
                                                          "sail_ft") for s in seeds]}


def h_eric(k):
    return ss.ratio_of_sums([h_builds[n][k] for n in ft_held],
                            [h_builds[n]["minao"] for n in ft_held])


print(f"{'model':>22}  {'ERIC held-out':>13}  {'ERIC OOD':>8}  "
      f"{'SAIL loss held-out':>18}")
for o in ("surrogate", "sail", "surrogate_ft", "sail_ft"):
    for s in seeds:
        k = ("hamiltonian", o, s)
        hl = f"{h_sail_loss[k]:18.5f}" if k in h_sail_loss else ""
        he = f"{h_eric(k):13.3f}" if k in h_builds[ft_held[0]] else " " * 13
        print(f"{'H ' + o + ' s' + str(s):>22}  {he}  {eric(ft_ood, k):8.3f}  {hl}")

# %% [markdown]
# ### A longer unroll for DIIS's later cycles
#
# SAIL's loss sums the orbital-gradient norms of the first T = 6 cycles, which lie mostly in the early phase of
# section 7; the DIIS tail after them is never in the loss. The question: does a longer unroll, whose loss
# reaches those later cycles, lower the OOD build count? The design, fixed before any number of it was read:
# each seed's SAIL-from-surrogate model above (T = 6) is continued 1,500 steps at the floor learning rate of its
# tail (fresh AdamW moments, the same training molecules and batch size, batches drawn on from the step after
# its last) with **T = 12** unrolled cycles (`sail_t12_<seed>`), and, as the control that separates "more steps"
# from "a longer unroll", the same 1,500 steps on the same batches at **T = 6** (`sail_t6c_<seed>`). The step
# count was sized from a timing probe of seed 0 alone, so that one seed's job (both continuations, on one shared
# core) stays under 15 minutes (`data/17_sail_scf/make_sail_long.py`); quick mode trains a few steps live.
# The stored loss curves are 100 means of 15-step bins; the script first stored 500 3-step bins and the
# curves were rebinned once afterwards from those (each manifest's `extra.curve_rebinned`, weights untouched).
# The plateau rule compares the means of the last two fifths (300 steps each), which both binnings give exactly.
# The claim `longer_unroll_helps` is the hypothesis stated before the run: the T = 12 model's OOD ERIC is below
# the control's (ratio < 1). It rests on `sail_long_converged` (both continuations' curves flat by the
# book-wide plateau rule, as `sail_ft_converged`) and `sail_long_fits` (both save builds on the held-out random
# molecules). A property of the loss to keep in mind: gradient norms fall quickly along a DIIS run, so cycles
# 7-12 carry a small share of a T = 12 loss; the table below measures that share for the starting models.

# %%
LONG = ("sail_t12", "sail_t6c")  # T = 12 and its T = 6 control, both from sail_ft
long_keys = [("hamiltonian", k, s) for k in LONG for s in seeds]
for _, k, s in long_keys:
    c = ss.checkpoint_config(f"{k}_{s}")
    long_steps = 4 if quick else c["steps"]
    if quick:  # a few steps from this run's tiny sail_ft models, on its molecules
        c.update(steps=long_steps, warmup=0)
        start = ft_models["hamiltonian", "sail_ft", s]
        ft_models["hamiltonian", k, s], h = ss.sail_continue(start, smp, c, s)
        ft_curves[s][k] = h.loss
        continue
    ck_l = checkpoints.load("17_sail_scf", f"{k}_{s}", config=c)
    mdl = ss.GuessModel("hamiltonian", hidden=c["hidden"])
    ck_l.load_into(mdl, prefix=f"hamiltonian/{k[5:]}/{s}.")
    ft_models["hamiltonian", k, s] = mdl.double().eval()
    ft_curves[s][k] = ck_l.manifest["history"][f"loss/hamiltonian/{k[5:]}/{s}"]
for k in long_keys:
    hidden[k] = 0
long_traces = {}  # (model, molecule) -> PySCF's |g| per cycle, for the phase split
for name in tqdm(ft_ood, desc="longer unroll, OOD"):
    m = ood[name]
    mf, x = scf.RHF(m), ss.inputs(m, eri=False)
    for k in long_keys + [("hamiltonian", "sail_ft", s) for s in seeds]:
        r = ss.run_pyscf(mf, guess_density(ft_models[k], x))
        long_traces[k, name] = r.grad_norms
        if k in long_keys:
            builds[name][k], cycles[name][k] = r.fock_builds, r.cycles
            conv[name][k] = r.converged
for smi in tqdm(ft_held, desc="longer unroll, held-out"):
    m = ft_mols[smi]
    mf, x = scf.RHF(m), ss.inputs(m, eri=False)
    for k in long_keys:
        h_builds[smi][k] = ss.run_pyscf(mf, guess_density(ft_models[k], x)).fock_builds


def tail_share(mdl, n_long=12, n_short=6):
    """A model's n_long-cycle SAIL loss on the held-out molecules (mean over them) and
    the share of it from the cycles after the first n_short."""
    with torch.no_grad():
        g = [torch.stack(ss.scf_unrolled(mdl.density(smpl.x), smpl.x.ints,
                                         n_long).grad_norms) for smpl in h_samples]
    tot = sum(v.sum() for v in g)
    return float(sum(v[n_short:].sum() for v in g) / tot), float(tot) / len(g)


fig, ax = plt.subplots(1, 2, figsize=(11, 3.2), sharey=True)
for i, k in enumerate(LONG):
    for s in seeds:
        cv = ft_curves[s][k]
        v = np.asarray(cv["value"] if isinstance(cv, dict) else cv, float)
        st = np.asarray(cv["step"]) if isinstance(cv, dict) else np.arange(len(v)) + 1
        ax[i].plot(st, v, lw=0.8, label=f"seed {s}")
    ax[i].set(yscale="log", xlabel="step (after sail_ft)", ylabel="batch loss",
              title=f"{k}: T = {ss.checkpoint_config(f'{k}_0')['unroll']}")
    ax[i].legend(fontsize=8)
fig.tight_layout()
plt.show()

# %% [markdown]
# Per seed: OOD ERIC of the starting model (T = 6, `sail_ft`), its T = 6 continuation (the control) and its
# T = 12 continuation; the in-distribution ERIC on the held-out random molecules; the phase split of section 7 on
# the OOD molecules (mean early and tail cycles); and the share of a 12-cycle SAIL loss, on the held-out
# molecules, that comes from cycles 7-12.

# %%
LONG_ROWS = [("sail_ft", "T=6 start"), ("sail_t6c", "T=6 control"),
             ("sail_t12", "T=12")]


def long_phase(k):
    """Mean early and tail cycles over the OOD molecules (section 7's split)."""
    ph = np.array([phases(long_traces[k, n])[:2] for n in ft_ood])
    return ph.mean(0)


share, loss12 = {}, {}  # share of a 12-cycle loss from cycles 7-12; that loss, held-out
for o, _ in LONG_ROWS:
    for s in seeds:
        k = ("hamiltonian", o, s)
        share[k], loss12[k] = tail_share(ft_models[k])
# OOD molecules whose build count differs: T = 12 vs control, control vs start
def n_differ(a: str, b: str, s: int) -> int:
    """OOD molecules whose build count differs between models a and b (seed s)."""
    return int(sum(
        builds[n]["hamiltonian", a, s] != builds[n]["hamiltonian", b, s] for n in ft_ood
    ))


n_moved = {(a, b): [n_differ(a, b, s) for s in seeds]
           for a, b in (("sail_t12", "sail_t6c"), ("sail_t6c", "sail_ft"))}


def theta(o, s):
    return torch.cat([p.detach().flatten() for p in
                      ft_models["hamiltonian", o, s].parameters()])


# how far T = 12 ended from the control, as a share of how far the control moved
drift = [float((theta("sail_t12", s) - theta("sail_t6c", s)).norm()
               / (theta("sail_t6c", s) - theta("sail_ft", s)).norm()) for s in seeds]
print(f"{'model':>20}  {'ERIC OOD':>8}  {'ERIC held-out':>13}  {'early':>5}  "
      f"{'tail':>5}  {'loss share 7-12':>15}  {'12-cycle loss':>13}")
for o, label in LONG_ROWS:
    for s in seeds:
        k = ("hamiltonian", o, s)
        e, t = long_phase(k)
        print(f"{label + ' s' + str(s):>20}  {eric(ft_ood, k):8.3f}  "
              f"{h_eric(k):13.3f}  {e:5.2f}  {t:5.2f}  {share[k]:15.4f}  "
              f"{loss12[k]:13.6f}")
print(f"OOD molecules (of {len(ft_ood)}) with another build count, per seed: "
      f"T = 12 vs control {n_moved['sail_t12', 'sail_t6c']}, control vs start "
      f"{n_moved['sail_t6c', 'sail_ft']}")

# %% [markdown]
# ## 11. The claims record
#
# Every claim is measured per seed on OOD molecules (the ERIC claims as ratios of sums, `ov_block_predicts_builds`
# as a rank correlation, `wall_time_speedup` as a time ratio): `eric_sail_ood` and `sail_beats_surrogate` with the
# models of section 10 on the OOD molecules larger than their training molecules, the others with the G2 models
# of section 5 (on all OOD molecules, or on those counted under PBE). The ERIC claims use the paper's bar loosely
# (`≤ 0.9`, a 10% reduction; the paper reports 28-37%) and record as baseline the best guess a practitioner has <!-- paper -->
# without a model: the lowest OOD ERIC among PySCF's guesses, the purified MINAO density and MINAO + 1 step.
# A reference that does not converge on some molecule (PySCF's `sap` guess on benzoic acid runs into the
# 100-cycle cap) is scored on the molecules where it converged, not charged 100 cycles: this can only make the
# baseline stronger. (The table in section 6 counts such runs at 100 cycles.)
# The paper's diagnosis has two halves. The *fit* half (the surrogate fits its own target out of distribution
# about as well as in it) is shown as an **illustration, without a verdict**: the paper puts no number on "fits
# well", and the bar an earlier round used (OOD error at most twice the held-out error) was chosen after these
# errors had been printed, so a verdict against it could not honestly fail; we found no bar that rests on
# anything but these numbers. The reading below gives the ratios per seed next to the untrained SAP prior's. The
# *slows* half is the claim `surrogate_slows_solver` (do its guesses need more builds than MINAO, ERIC > 1);
# neither is the ERIC ratio against SAIL, which is `sail_beats_surrogate`.
#
# **Conditions.** Every claim names what it rests on: each guess model's training loss is flat at the end
# (`train.plateau` ≤ 0.05, the book-wide rule, from the checkpoint's curves), a SAIL model saves builds on held-out <!-- paper -->
# molecules like its training ones (in-distribution ERIC below 1; for the models of section 10, on their held-out
# random molecules), and the speed claim's timing spread is below the speedup it measures. At a seed where one fails the claim is left out; with none left it is *inconclusive*.

# %% tags=["hide-input"]
# the references, the per-seed helpers and the notes the claims carry (numbers beside
# each verdict)


def ok(group, k):
    """The molecules of `group` on which guess `k` converged within 100 cycles."""
    return [n for n in group if conv[n][k]]


# A reference that fails to converge on a molecule is scored without that molecule
# (and without MINAO's builds there), which can only favour the reference.
ref_eric = {k: eric(ok(ood_names, k), k) for k in references}
best_ref = min(references, key=ref_eric.get)
e_best = ref_eric[best_ref]
refs_note = ", ".join(
    f"{k} {ref_eric[k]:.3f}"
    + (
        f" (without {sorted(set(ood_names) - set(ok(ood_names, k)))})"
        if len(ok(ood_names, k)) < len(ood_names)
        else ""
    )
    for k in references
)
models_failed = sorted({n for n in ood_names for k in models if not conv[n][k]})


def per_seed(kind):
    return [eric(ood_names, (*kind, s)) for s in seeds]


def cis(kind):
    return [tuple(round(v, 3) for v in eric_ci(ood_names, (*kind, s))) for s in seeds]


def diagnosis(head):
    """Per seed: fit(SAIL) / fit(surrogate) and ERIC(surrogate) / ERIC(SAIL), OOD."""
    sail_k = [(head, "sail", s) for s in seeds]
    sur_k = [(head, "surrogate", s) for s in seeds]
    fit = [
        mean_fit(ood_names, a) / mean_fit(ood_names, b) for a, b in zip(sail_k, sur_k)
    ]
    slow = [eric(ood_names, b) / eric(ood_names, a) for a, b in zip(sail_k, sur_k)]
    return fit, slow


def sign_p(a, b, group):
    """Two-sided sign test over molecules, ties dropped (a fewer vs more builds)."""
    d = np.array([builds[n][a] + hidden[a] - builds[n][b] - hidden[b] for n in group])
    k, n = int((d < 0).sum()), int((d != 0).sum())
    tail = sum(math.comb(n, i) for i in range(min(k, n - k) + 1)) / 2**n
    return min(1.0, 2 * tail)


def sign_ps(head):
    """Per seed: the sign-test p-value of SAIL vs the surrogate (same head), OOD."""
    return [
        round(sign_p((head, "sail", s), (head, "surrogate", s), ood_names), 3)
        for s in seeds
    ]


fit_ratio, eric_ratio = diagnosis("hamiltonian")
d_fit, d_eric = diagnosis("density")


def fit_shifts(head):
    """Per seed: the surrogate's OOD target-fit error ÷ its held-out G2 one."""
    return [mean_fit(ood_names, (head, "surrogate", s))
            / mean_fit(test_names, (head, "surrogate", s)) for s in seeds]


fit_shift, d_shift = fit_shifts("hamiltonian"), fit_shifts("density")
prior_shift = (np.mean([prior_fit[n] for n in ood_names])
               / np.mean([prior_fit[n] for n in test_names]))


notes = {}  # the numbers each claim carries beside its verdict
def ft_pair(s):
    return ("hamiltonian", "sail_ft", s), ("hamiltonian", "surrogate_ft", s)


ref_eric_ft = {k: eric(ok(ft_ood, k), k) for k in references}
best_ref_ft = min(references, key=ref_eric_ft.get)
e_best_ft = ref_eric_ft[best_ref_ft]
notes["eric_sail_ood"] = (
    f"baseline: the best reference guess on these molecules ({best_ref_ft}); "
    "references: " + ", ".join(f"{k} {v:.3f}" for k, v in ref_eric_ft.items())
    + f". {len(ft_ood)} OOD molecules with more heavy atoms than any training molecule;"
    " RHF/STO-3G; 90% bootstrap intervals per seed: "
    f"{[tuple(np.round(eric_ci(ft_ood, ft_pair(s)[0]), 3).tolist()) for s in seeds]}"
    ". The G2-trained SAIL model of section 5 (600 steps from the prior): "
    f"{np.round([eric(ft_ood, ('hamiltonian', 'sail', s)) for s in seeds], 3).tolist()}"
    f" on these molecules, {np.round(per_seed(('hamiltonian', 'sail')), 3).tolist()} "
    f"on all {len(ood_names)} OOD molecules (bootstrap {cis(('hamiltonian', 'sail'))})."
    f" OOD molecules where a model guess did not converge (counted at 100): "
    f"{models_failed or 'none'}."
)
notes["density_head_ood"] = (
    "surrogate density head per seed: "
    f"{np.round(per_seed(('density', 'surrogate')), 3).tolist()}; "
    f"untrained head (purified MINAO): {eric(ood_names, 'purified MINAO'):.3f}; 90% "
    "bootstrap "
    f"intervals per seed: {cis(('density', 'sail'))}."
)
notes["surrogate_slows_solver"] = (
    "baseline: MINAO (ERIC 1 by definition); density-head surrogate per seed: "
    f"{np.round(per_seed(('density', 'surrogate')), 3).tolist()}"
)
notes["sail_beats_surrogate"] = (
    "paired sign test over these OOD molecules (SAIL vs surrogate, ties dropped), "
    "two-sided p per seed: "
    f"{[round(sign_p(*ft_pair(s), ft_ood), 3) for s in seeds]}"
    "; the G2-trained pair of section 5 on all OOD molecules: SAIL / surrogate "
    f"{np.round([1 / r for r in eric_ratio], 3).tolist()} (sign-test p "
    f"{sign_ps('hamiltonian')}); density head "
    f"{np.round([1 / r for r in d_eric], 3).tolist()} (p {sign_ps('density')})"
)
notes["longer_unroll_helps"] = (
    "baseline: the same model continued the same steps on the same batches at T = 6; "
    "the starting model (sail_ft, T = 6) per seed: "
    f"{[round(eric(ft_ood, ('hamiltonian', 'sail_ft', s)), 3) for s in seeds]}; "
    "OOD molecules with another build count, T = 12 vs control, per seed: "
    f"{n_moved['sail_t12', 'sail_t6c']}, control vs start: "
    f"{n_moved['sail_t6c', 'sail_ft']}; "
    "paired sign test over the OOD molecules (T = 12 vs control, ties dropped), "
    "two-sided p per seed: "
    + str([round(sign_p(("hamiltonian", "sail_t12", s), ("hamiltonian", "sail_t6c", s),
                        ft_ood), 3) for s in seeds])
)
notes["wall_time_speedup"] = (
    f"{', '.join(biggest)}; density head; {n_timing} interleaved rounds after a "
    "warm-up (repro.benchmark), medians of CPU time; RHF/STO-3G cycles are cheap, so "
    "the guess's own cost weighs "
    "more than at the paper's hybrid-DFT level. Baseline: the speedup of the purified "
    f"MINAO density (no model), timed in the same rounds; MINAO {t_minao:.3f} s, "
    f"purified MINAO {t_purified:.3f} s."
)
notes["paper_level_of_theory"] = (
    f"models trained through the RHF solver, evaluated under PBE (grid level "
    f"{pbe['solver']['grid_level']}), {len(p_names)} OOD molecules, seeds {p_seeds}, "
    "counts from data/17_sail_scf/pbe_sto-3g.json. Baseline: the best reference "
    f"under PBE ({p_best}); references: "
    + ", ".join(f"{k} {v:.3f}" for k, v in p_ref_eric.items())
    + ". Density SAIL per seed: "
    f"{[round(p_eric(p_names, f'density/sail/{s}'), 3) for s in p_seeds]}. "
    f"Oracle (converged RHF density as guess) on the {len(o_names)} smallest: "
    f"{o_eric:.3f} vs H SAIL {np.round(o_sail, 3).tolist()} there. "
    "The paper's basis (def2-SVP) and training under the DFT solver are not tested."
)
if p631 is not None:  # counted only where count_pbe.py --basis 6-31g has been run
    notes["paper_level_of_theory_631g"] = (
        f"{len(q_names)} OOD molecules ({p631['command']}; "
        f"{'complete' if p631['complete'] else 'partial, cut off by its time limit'}; "
        "its size set from a timing of the smallest molecules, whose counts that probe "
        "also printed), guesses projected from STO-3G, PySCF's "
        f"guesses made in 6-31G; baseline: the best reference ({q_best}); references: "
        + ", ".join(f"{k} {v:.3f}" for k, v in q_ref_eric.items())
        + ". Density SAIL per seed: "
        f"{[round(q_eric(q_names, f'density/sail/{s}'), 3) for s in p_seeds]}."
    )

# %%
# Conditions, fixed before reading the claims: each model's training loss is flat at the
# end (train.plateau <= 0.05, the book-wide rule), a SAIL model saves builds on held-out
# molecules like its training ones (in-distribution ERIC < 1: the method works where it
# was trained), and a timing's spread is below its effect.
rec.condition("models_converged",
              [max(train.plateau(curves[(*k, s)]) for k in KINDS) for s in seeds],
              "<=", 0.05, unit="plateau (last fifth), worst of the four models",
              statement="all four guess models of the seed are trained to a flat loss")
for head in ss.HEADS:
    rec.condition(f"{head}_sail_fits",
                  [eric(test_names, (head, "sail", s)) for s in seeds], "<", 1.0,
                  unit="ERIC, held-out G2 molecules",
                  statement=f"the {head} SAIL model saves Fock builds in distribution")
SPEEDUP_BAR = 1.2  # the claim's bar (the paper reports 1.35x)
rec.condition("timing_above_noise",
              [max(t_spread["minao"], t_spread[s]) / max(abs(v - SPEEDUP_BAR), 1e-12)
               for s, v in zip(seeds, speedup)],
              "<", 1.0, unit="largest spread (IQR/median) ÷ |speedup − bar|",
              statement="the timing spread of MINAO and of the SAIL side is smaller "
              "than the speedup's distance from the claim's bar")
H_SAIL = ("models_converged", "hamiltonian_sail_fits")
ft_plateau = [max(train.plateau(ft_curves[s][o]) for o in ("surrogate_ft", "sail_ft"))
              for s in seeds]
rec.condition("sail_ft_converged", ft_plateau,
              "<=", 0.05, unit="plateau (last fifth), worse of the two models",
              statement="the fine-tuned surrogate and SAIL-from-surrogate of the "
              "seed are trained to a flat loss")
rec.condition("sail_ft_fits", [h_eric(("hamiltonian", "sail_ft", s)) for s in seeds],
              "<", 1.0, unit="ERIC, held-out random molecules (<= 6 heavy atoms)",
              statement="SAIL from the surrogate saves Fock builds in distribution")
FT = ("sail_ft_converged", "sail_ft_fits")
long_plateau = [max(train.plateau(ft_curves[s][k]) for k in LONG) for s in seeds]
rec.condition("sail_long_converged", long_plateau,
              "<=", 0.05, unit="plateau (last fifth), worse of T = 12 and its control",
              statement="both continuations of the seed's SAIL model (T = 12 and the "
              "T = 6 control) are trained to a flat loss")
rec.condition("sail_long_fits",
              [max(h_eric(("hamiltonian", k, s)) for k in LONG) for s in seeds],
              "<", 1.0, unit="ERIC, held-out random molecules, worse of the two",
              statement="both continuations save Fock builds in distribution")
LONG_GIVEN = ("sail_long_converged", "sail_long_fits")
# the PBE counts were made with the checkpoint's models (seeds p_seeds): their curves
# come from its manifest; the in-distribution ERIC is this run's, so it applies only
# where this run's models are the checkpoint's
ck_hist = json.loads(
    checkpoints.fetch("17_sail_scf", "guesses.json").read_text())["history"]
rec.condition("pbe_models_converged",
              [train.plateau(ck_hist[f"loss/hamiltonian/sail/{s}"]) for s in p_seeds],
              "<=", 0.05, unit="plateau (last fifth)",
              statement="the checkpoint's Hamiltonian SAIL models whose guesses were "
              "counted under PBE are trained to a flat loss")
PBE = (("pbe_models_converged",)
       + (("hamiltonian_sail_fits",) if p_seeds == seeds else ()))

# %%
rec.claim(
    "eric_sail_ood",
    "SAIL (Hamiltonian head, started from the surrogate, trained through PySCF's J/K "
    "on random molecules with <= 6 heavy atoms) needs fewer Fock builds than MINAO on "
    "larger molecules",
    paper="-28% to -37% (ERIC 0.63-0.72)",
    measured=[eric(ft_ood, ("hamiltonian", "sail_ft", s)) for s in seeds],
    op="<=", target=0.9,
    unit="ERIC, OOD (> 6 heavy atoms), ratio of sums",
    baseline=e_best_ft,
    note=notes["eric_sail_ood"],
    given=FT,
)
rec.claim(
    "density_head_ood",
    "SAIL (density head on the MINAO prior) needs fewer Fock builds than MINAO on "
    "larger molecules",
    paper="SAIL works for density heads too (ERIC 0.63-0.72 overall)",
    measured=per_seed(("density", "sail")),
    op="<=", target=0.9,
    unit="ERIC, OOD, ratio of sums",
    baseline=e_best,
    note=notes["density_head_ood"],
    given=("models_converged", "density_sail_fits"),
)

# %%
rec.claim(
    "surrogate_slows_solver",
    "Out of distribution, the ground-state surrogate's guesses need more Fock builds "
    "than MINAO (the paper's strong form of the diagnosis; Hamiltonian head)",
    paper="surrogates produce initial guesses that slow convergence (ERIC > 1)",
    measured=per_seed(("hamiltonian", "surrogate")),
    op=">", target=1.0,
    unit="ERIC, OOD, ratio of sums",
    baseline=1.0,
    note=notes["surrogate_slows_solver"],
    given=("models_converged",),
)
rec.claim(
    "sail_beats_surrogate",
    "SAIL started from the surrogate needs fewer Fock builds than the surrogate on "
    "larger molecules (Hamiltonian head, both fine-tuned on the same molecules)",
    paper="SAIL < surrogate",
    measured=[eric(ft_ood, ("hamiltonian", "sail_ft", s))
              / eric(ft_ood, ("hamiltonian", "surrogate_ft", s)) for s in seeds],
    op="<", target=1.0,
    unit="ERIC OOD (> 6 heavy atoms), SAIL / surrogate",
    baseline=[eric(ft_ood, ("hamiltonian", "surrogate_ft", s)) for s in seeds],
    note=notes["sail_beats_surrogate"],
    given=FT,
)
rec.claim(
    "longer_unroll_helps",
    "Continuing SAIL with a 12-cycle unroll (the loss reaches DIIS's later cycles) "
    "lowers the OOD build count more than continuing it the same steps at 6 cycles",
    paper="trains with T of about 6-10; a longer unroll is this chapter's question",
    measured=[eric(ft_ood, ("hamiltonian", "sail_t12", s))
              / eric(ft_ood, ("hamiltonian", "sail_t6c", s)) for s in seeds],
    op="<", target=1.0,
    unit="ERIC OOD (> 6 heavy atoms), T = 12 / T = 6 control",
    baseline=[eric(ft_ood, ("hamiltonian", "sail_t6c", s)) for s in seeds],
    note=notes["longer_unroll_helps"],
    given=LONG_GIVEN,
)


# %%
def ov_rho(s, err):
    """Spearman, over OOD molecules and the four guess models of seed s, of a density
    error with builds ÷ MINAO's."""
    keys = [(n, (*k, s)) for n in ood_names for k in KINDS]
    return float(spearmanr([err[n][k] for n, k in keys],
                           [builds[n][k] / builds[n]["minao"] for n, k in keys])[0])


rec.claim(
    "ov_block_predicts_builds",
    "Across molecules and guesses, the Fock builds a guess needs track its "
    "occupied-virtual block error",
    paper="SCF convergence is governed by the occupied-virtual rotation the guess "
    "leaves (SAIL's motivation)",
    measured=[ov_rho(s, ov_err) for s in seeds], op=">=", target=0.5,
    unit="Spearman ρ (‖C_vᵀ S P₀ S C_o‖ ÷ ‖P*‖, builds ÷ MINAO's)",
    baseline=[ov_rho(s, full_err) for s in seeds],
    note="baseline: the same Spearman with the whole-matrix error ‖P₀ − P*‖ ÷ ‖P*‖; "
    f"per seed, over the {len(ood_names)} OOD molecules and the four models (both "
    "heads, both objectives)",
    given=("models_converged",),
)

# %%
rec.claim(
    "wall_time_speedup",
    "Speedup (CPU time) of SAIL over MINAO on the largest molecules, model included",
    paper="1.35x (10x larger, B3LYP)",
    measured=speedup,
    op=">=", target=SPEEDUP_BAR,
    unit="x (MINAO CPU time / SAIL CPU time)",
    baseline=t_minao / t_purified,
    note=notes["wall_time_speedup"],
    given=("models_converged", "density_sail_fits", "timing_above_noise"),
)
rec.claim(
    "paper_level_of_theory",
    "Under Kohn-Sham DFT (PySCF PBE, STO-3G), the Hamiltonian SAIL model's guesses "
    "need fewer Kohn-Sham builds than MINAO on the larger molecules",
    paper="-37% with PBE (ERIC 0.63; def2-SVP, trained under PBE)",
    measured=[p_eric(p_names, f"hamiltonian/sail/{s}") for s in p_seeds],
    op="<=", target=0.9,
    unit="ERIC under RKS-PBE/STO-3G, OOD, ratio of sums",
    baseline=p_ref_eric[p_best],
    note=notes["paper_level_of_theory"],
    given=PBE,
)
if p631 is not None:
    rec.claim(
        "paper_level_of_theory_631g",
        "Under PBE in a split-valence basis (6-31G), the Hamiltonian SAIL model's "
        "STO-3G guesses, projected, need fewer Kohn-Sham builds than MINAO",
        paper="-37% with PBE (ERIC 0.63; def2-SVP, trained under PBE)",
        measured=[q_eric(q_names, f"hamiltonian/sail/{s}") for s in p_seeds],
        op="<=", target=0.9,
        unit="ERIC under RKS-PBE/6-31G, OOD, ratio of sums",
        baseline=q_ref_eric[q_best],
        note=notes["paper_level_of_theory_631g"],
        given=PBE,
    )
else:
    rec.untested(
        "paper_level_of_theory_631g",
        "Under PBE in a split-valence basis, SAIL's guesses need fewer Kohn-Sham "
        "builds than MINAO",
        paper="-37% with PBE (def2-SVP)",
        reason="pbe_6-31g.json not counted (data/17_sail_scf/count_pbe.py --basis "
        "6-31g, about twice the STO-3G cost)",
    )
rec.save()

# %% [markdown]
# ## Reading the results

# %% tags=["remove-input"]
verdict = {c.id: c.verdict for c in rec.claims}
cond = {c.id: c.verdict for c in rec.conditions}
_l = lambda v, f=".3f": ", ".join(format(float(x), f) for x in v)
_ft = [eric(ft_ood, ("hamiltonian", "sail_ft", s)) for s in seeds]
_ft_sur = [eric(ft_ood, ("hamiltonian", "surrogate_ft", s)) for s in seeds]
_g2_on_ft = [eric(ft_ood, ("hamiltonian", "sail", s)) for s in seeds]
_sur = per_seed(("hamiltonian", "surrogate"))
_sur_fit = [mean_fit(ood_names, ("hamiltonian", "surrogate", s)) for s in seeds]
_prior_ood = [prior_fit[n] for n in ood_names]
_h_pbe = [p_eric(p_names, f"hamiltonian/sail/{s}") for s in p_seeds]
_d_pbe = [p_eric(p_names, f"density/sail/{s}") for s in p_seeds]
_early, _tail = phase_mean["minao"], phase_mean[("hamiltonian", "sail")]
_hl = {o: [h_sail_loss[("hamiltonian", o, s)] for s in seeds]
       for o in ("surrogate", "surrogate_ft", "sail_ft")}
_rho_ov = [ov_rho(s, ov_err) for s in seeds]
_rho_full = [ov_rho(s, full_err) for s in seeds]
_gap = [a - b for a, b in zip(_rho_ov, _rho_full)]
V, C = verdict, cond
# which seeds the fine-tuned claims rest on, and which curve failed at the others
_ft_obj = {s: {o: train.plateau(ft_curves[s][o]) for o in ("surrogate_ft", "sail_ft")}
           for s in seeds}
_ft_q = [s for s, v in zip(seeds, ft_plateau) if v <= 0.05]
_ft_x = [s for s in seeds if s not in _ft_q]
_ft_why = "; ".join(
    f"seed {s}: " + ", ".join(f"{o} {v:.3f}" for o, v in _ft_obj[s].items() if v > 0.05)
    for s in _ft_x)
if not _ft_q:
    _ft_basis = ("No seed qualifies for either verdict: at every seed a fine-tuned loss "
                 f"was still falling (plateau > 0.05; {_ft_why}).")
elif _ft_x:
    _ft_basis = (
        f"These two verdicts rest on {len(_ft_q)} of {len(seeds)} seeds "
        f"(seed{'s' if len(_ft_q) > 1 else ''} {', '.join(map(str, _ft_q))}), where "
        "both fine-tuned curves are flat; at seed"
        f"{'s' if len(_ft_x) > 1 else ''} {', '.join(map(str, _ft_x))} they are "
        f"inconclusive whatever the values (still falling, plateau > 0.05: {_ft_why})"
        ", so each verdict is "
        + ("that one seed's" if len(_ft_q) == 1 else "those seeds'") + " alone.")
else:
    _ft_basis = "Both fine-tuned curves are flat at every seed."
# how far eric_sail_ood's per-seed values sit from its bar, in builds, and the surrogate's
# fine-tune budget next to SAIL's (the fairness of sail_beats_surrogate rests on its flat curve)
_b_minao = sum(builds[n]["minao"] for n in ft_ood)
_b_sail = [sum(builds[n][("hamiltonian", "sail_ft", s)] for n in ft_ood) for s in seeds]
_ci_ft = [eric_ci(ft_ood, ("hamiltonian", "sail_ft", s)) for s in seeds]
_ci_over = [s for s, (lo, hi) in zip(seeds, _ci_ft) if hi > 0.9]
_c0 = ft_cfg[seeds[0]]
_sur_plateau = [_ft_obj[s]["surrogate_ft"] for s in seeds]
_margin = (
    f" In builds: MINAO needs {_b_minao} on these {len(ft_ood)} molecules, the bar 0.9 "
    f"allows {0.9 * _b_minao:.1f}, SAIL needs {', '.join(map(str, _b_sail))} per seed "
    f"(seed-to-seed spread of the ratio {max(_ft) - min(_ft):.3f}); the 90% bootstrap "
    "intervals over molecules are "
    + ", ".join(f"[{lo:.3f}, {hi:.3f}]" for lo, hi in _ci_ft)
    + (f", whose upper end crosses 0.9 at seed{'s' if len(_ci_over) > 1 else ''} "
       f"{', '.join(map(str, _ci_over))}: the bar is met, not cleared by a wide margin."
       if _ci_over else ", all below 0.9.")
    + f" The two sides of `sail_beats_surrogate` are not trained equally long: the "
    f"surrogate's fine-tune ran {_c0['steps_surrogate']} steps, SAIL then "
    f"{_c0['steps_sail']} + {_c0['steps_sail_tail']} more from it; the comparison rests "
    "on the surrogate's own curve being flat (plateau "
    f"{_l(_sur_plateau)} per seed, bar 0.05), and a longer-trained surrogate was not "
    "tested. Paired sign test over the molecules, SAIL vs surrogate, two-sided p per "
    f"seed: {_l([sign_p(*ft_pair(s), ft_ood) for s in seeds], '.2g')}."
)
# claims left inconclusive at some seeds by a failed condition: which seeds, which
# condition, by how much
_cval = {c.id: c for c in rec.conditions}
_groups = {}
for c in rec.claims:
    if not c.inconclusive_seeds or c.verdict == "untested":
        continue
    sd = p_seeds if c.id.startswith("paper_level") else seeds
    fails = sorted({f for v in c.failed_conditions.values() for f in v})
    key = (tuple(sd[i] for i in c.inconclusive_seeds), tuple(fails),
           tuple(s for i, s in enumerate(sd) if i not in c.inconclusive_seeds))
    _groups.setdefault(key, []).append(c.id)
_inc = " ".join(
    f"`{'`, `'.join(ids)}` {'are' if len(ids) > 1 else 'is'} inconclusive at seed"
    f"{'s' if len(bad) > 1 else ''} {', '.join(map(str, bad))} ("
    + "; ".join(
        f"`{f}` fails there: "
        + ", ".join(f"{v:.4f}" for v, h in zip(np.atleast_1d(_cval[f].measured),
                                               _cval[f].holds_per_seed) if not h)
        + f" against the bar {_cval[f].op} {_cval[f].target:g}" for f in fails)
    + f"), so {'their verdicts rest' if len(ids) > 1 else 'its verdict rests'} on seed"
    f"{'s' if len(good) > 1 else ''} {', '.join(map(str, good)) or 'none'} alone."
    for (bad, fails, good), ids in _groups.items())
_txt = [
    "* **The solver is PySCF's.** Along every checked trajectory the torch SCF's "
    "energies agree with PySCF's to round-off (`solver_alignment`), and the J/K path "
    "used for the larger training set gives the einsum path's loss and gradient "
    "(`jk_autograd`): SAIL optimizes the very solver its guesses are judged by (RHF).",
    f"* **Conditions.** G2 models trained to a flat loss: **{C['models_converged']}**; "
    "their SAIL saves builds in distribution: Hamiltonian head "
    f"**{C['hamiltonian_sail_fits']}**, density head **{C['density_sail_fits']}**; "
    f"fine-tuned models flat: **{C['sail_ft_converged']}**; SAIL from the surrogate "
    f"saves builds in distribution: **{C['sail_ft_fits']}**; timing spread below the "
    f"effect: **{C['timing_above_noise']}**. " + _inc,
    f"* **How much SAIL saves.** On the {len(ft_ood)} OOD molecules larger than every "
    "training molecule, SAIL started from the surrogate and trained on "
    f"{len(ft_train)} random molecules has ERIC {_l(_ft)} per seed, against "
    f"{e_best_ft:.3f} for the best reference ({best_ref_ft}), our bar 0.9 and the "
    "paper's 0.63-0.72 "
    f"(`eric_sail_ood`: {V['eric_sail_ood']}); the G2-trained SAIL model of section 5 "
    f"has {_l(_g2_on_ft)} there and {_l(per_seed(('hamiltonian', 'sail')))} on all "
    f"{len(ood_names)} OOD molecules. The surrogate it started from, fine-tuned on the "
    f"same molecules, has {_l(_ft_sur)} (SAIL ÷ surrogate "
    f"{_l([a / b for a, b in zip(_ft, _ft_sur)])}; `sail_beats_surrogate`: "
    f"{V['sail_beats_surrogate']}). " + _ft_basis + _margin + " "
    "The density head (G2-trained) has "
    f"{_l(per_seed(('density', 'sail')))} on all OOD molecules (`density_head_ood`: "
    f"{V['density_head_ood']}).",
    f"* **Held-out SAIL loss.** On the {len(ft_held)} held-out random molecules the "
    f"SAIL loss is {_l(_hl['surrogate'], '.5f')} for the G2 surrogates, "
    f"{_l(_hl['surrogate_ft'], '.5f')} after their fine-tune and "
    f"{_l(_hl['sail_ft'], '.5f')} after SAIL (per seed).",
    "* **The diagnosis, measured (fit half: an illustration, no verdict).** The "
    "Hamiltonian surrogate's OOD target-fit error is "
    f"{_l(fit_shift, '.2f')}× its held-out G2 error per seed (the SAP prior's: "
    f"{prior_shift:.2f}; density head: {_l(d_shift, '.2f')}). The paper gives no bar "
    "for fitting 'well', and any bar we set now would be set with these ratios known, "
    "so they carry no verdict. Out of distribution the untrained prior's error grows "
    + ("less than the surrogate's at every seed" if prior_shift < min(fit_shift)
       else "more than the surrogate's at every seed" if prior_shift > max(fit_shift)
       else "more than the surrogate's at some seeds, less at others")
    + "; the surrogate's OOD error "
    f"({_l(_sur_fit, '.4f')}) is "
    f"{np.mean(_prior_ood) / np.mean(_sur_fit):.1f}× below the prior's "
    f"({np.mean(_prior_ood):.3f}). Its ERIC is {_l(_sur)} per seed, "
    + ("above" if min(_sur) > 1 else "below" if max(_sur) < 1 else "around")
    + f" MINAO's 1 (`surrogate_slows_solver`: {V['surrogate_slows_solver']}).",
    "* **What the build count follows.** Across OOD molecules and the four G2 models, "
    "the Spearman of builds ÷ MINAO's with the occupied-virtual block error of the "
    f"guess is {_l(_rho_ov, '.2f')} per seed, against {_l(_rho_full, '.2f')} with the "
    f"whole-matrix error (differences {_l(_gap, '+.3f')}; "
    "`ov_block_predicts_builds`: "
    f"{V['ov_block_predicts_builds']}).",
    "* **Where the saved cycles fall.** From MINAO a run spends "
    f"{_early[0]:.1f} cycles in the early phase and {_early[1]:.1f} in the tail; from "
    f"Hamiltonian SAIL {_tail[0]:.1f} and {_tail[1]:.1f} (means). SAIL's "
    f"{cfg['unroll']}-cycle unroll sees mostly the early phase. The tail is not a "
    "bound on what a guess can save: under PBE a converged density restarts in "
    f"{np.mean(o_pbe):.1f} builds, against {np.mean(p_builds(o_names, 'minao')):.1f} "
    "from MINAO on the same molecules.",
    "* **CPU time.** SAIL's speedup over MINAO, model included, is "
    f"{_l(speedup)} per seed on {', '.join(biggest)} (purified MINAO, no model: "
    f"{t_minao / t_purified:.3f}; `wall_time_speedup`: {V['wall_time_speedup']}).",
    "* **Under PBE.** Handed to PySCF's PBE solver in the same basis, the G2-trained "
    f"Hamiltonian SAIL guesses have ERIC {_l(_h_pbe)} and the density ones "
    f"{_l(_d_pbe)}, against {p_ref_eric[p_best]:.3f} for the best reference "
    f"({p_best}) (`paper_level_of_theory`: {V['paper_level_of_theory']}). The oracle, "
    f"the converged RHF density SAIL trains toward, has ERIC {o_eric:.3f} under PBE on "
    f"the {len(o_names)} smallest molecules (Hamiltonian SAIL there: {_l(o_sail)}): a "
    "guess aligned with one solver is not aligned with another; the paper trains "
    "through the solver it evaluates with, which here is RHF only.",
]
_lg = {o: [eric(ft_ood, ("hamiltonian", o, s)) for s in seeds]
       for o in ("sail_ft", "sail_t6c", "sail_t12")}
_lr = [a / b for a, b in zip(_lg["sail_t12"], _lg["sail_t6c"])]
_lph = {o: np.mean([long_phase(("hamiltonian", o, s))[1] for s in seeds])
        for o in ("sail_ft", "sail_t6c", "sail_t12")}
_lsh = {o: [share["hamiltonian", o, s] for s in seeds] for o in ("sail_ft", "sail_t12")}
_l12 = {o: [loss12["hamiltonian", o, s] for s in seeds]
        for o in ("sail_ft", "sail_t6c", "sail_t12")}
_mv12, _mv6 = n_moved["sail_t12", "sail_t6c"], n_moved["sail_t6c", "sail_ft"]


def _ends(cv):
    """Means of a curve's first and last fifth (the plateau rule's windows)."""
    v = np.asarray(cv["value"] if isinstance(cv, dict) else cv, float)
    k = max(1, int(round(0.2 * len(v))))
    return v[:k].mean(), v[-k:].mean()


_drop = [1 - _ends(ft_curves[s]["sail_t12"])[1] / _ends(ft_curves[s]["sail_t12"])[0]
         for s in seeds]
_miss = [s for s, v in zip(seeds, long_plateau) if v > 0.05]
_arm = max(abs(a / b - 1) for s in seeds for a, b in
           zip(_ends(ft_curves[s]["sail_t12"]), _ends(ft_curves[s]["sail_t6c"])))
_txt.append(
    f"* **A longer unroll.** Continued {long_steps} steps from the T = 6 model, the "
    f"T = 12 model has OOD ERIC {_l(_lg['sail_t12'])} per seed, the T = 6 control "
    f"{_l(_lg['sail_t6c'])}, the starting model {_l(_lg['sail_ft'])}; T = 12 ÷ control "
    f"{_l(_lr)} (`longer_unroll_helps`: {V['longer_unroll_helps']}; continuations flat: "
    f"**{C['sail_long_converged']}**, plateau {_l(long_plateau)} per seed; both save "
    f"builds in distribution: **{C['sail_long_fits']}**). The T = 12 loss fell by "
    f"{_l(_drop)} (share, first to last fifth, per seed) over the continuation, and "
    f"its first- and last-fifth means lie within {_arm:.4f} of the control's"
    + (f"; where the plateau bar is missed (seed {', '.join(map(str, _miss))}) "
       "the curve fell by less than 0.05 from its first fifth to its last: its plateau "
       "value is batch noise between the last two fifths, not a loss still falling. "
       if _miss and max(_drop[seeds.index(s)] for s in _miss) < 0.05 else ". ")
    + ("The build totals are equal at every seed. "
       if all(r == 1 for r in _lr) else
       f"Lower at {sum(r < 1 for r in _lr)}, equal at {sum(r == 1 for r in _lr)} "
       f"and higher at {sum(r > 1 for r in _lr)} of {len(seeds)} seeds. ")
    + f"Of the {len(ft_ood)} OOD molecules, {', '.join(map(str, _mv12))} (per seed) "
    "converge in another number of builds from the T = 12 guess than from the "
    f"control's, and {', '.join(map(str, _mv6))} from the control's than from the "
    "start's"
    + (": at this budget (a continuation at the floor learning rate of a model already "
       "on its plateau) neither the extra steps nor the longer unroll moves a single "
       "build, so `not held` here records that the longer unroll changed nothing "
       "measurable, not that a model trained at T = 12 from the surrogate would do no "
       "better. " if max(_mv12 + _mv6) == 0 else
       ": the extra steps move a few molecules' counts, the longer unroll none beyond "
       "them, so `not held` here records that the longer unroll changed nothing "
       "measurable at this budget (a continuation at the floor learning rate of a model "
       "already on its plateau), not that a model trained at T = 12 from the surrogate "
       "would do no better. " if max(_mv12) == 0 else ". ")
    + f"The T = 12 weights end {_l(drift, '.3f')} (per seed) of the control's own "
    "distance from the start away from the control's; the 12-cycle SAIL loss on the "
    f"held-out molecules is {_l(_l12['sail_ft'], '.6f')} for the start, "
    f"{_l(_l12['sail_t6c'], '.6f')} for the control and {_l(_l12['sail_t12'], '.6f')} "
    "for T = 12, which was trained on that loss"
    + ("; on it T = 12 ends no lower than the control at any seed. "
       if all(x >= y for x, y in zip(_l12["sail_t12"], _l12["sail_t6c"])) else ". ")
    + "T = 12 ÷ control differs from 1 "
    f"by at most {max(abs(1 - r) for r in _lr):.3f}; "
    f"the seed-to-seed spread of the control itself is "
    f"{max(_lg['sail_t6c']) - min(_lg['sail_t6c']):.3f}. The DIIS tail (section 7's "
    f"split, mean cycles over OOD molecules and seeds) is {_lph['sail_ft']:.2f} from "
    f"the start, {_lph['sail_t6c']:.2f} from the control and {_lph['sail_t12']:.2f} "
    "from T = 12. Cycles 7-12 carry "
    f"{_l(_lsh['sail_ft'], '.4f')} of a 12-cycle SAIL loss on the held-out molecules "
    f"for the starting models and {_l(_lsh['sail_t12'], '.4f')} after the T = 12 "
    "training (per seed)"
    + (": the gradient norms there are small beside the early ones, so with the "
       "paper's plain sum the longer unroll changes the loss, and its gradient, "
       "little; "
       "a fair test of the DIIS tail needs a loss that weights those cycles, or a "
       "model trained at T = 12 from the surrogate (not run)."
       if max(_lsh["sail_ft"] + _lsh["sail_t12"]) < 0.05 else "."))
if p631 is not None:
    _q_heavy = [q_mol[n]["heavy"] for n in q_names]
    _q_out = [n for n in ood_names if n not in q_mol]
    _txt.append(
        f"* **In 6-31G.** On the {len(q_names)} OOD molecules the 6-31G count covers "
        f"({min(_q_heavy)}-{max(_q_heavy)} heavy atoms; "
        f"{p631['wall_seconds'] / 60:.0f} minutes of one core), the projected "
        "Hamiltonian SAIL guesses have ERIC "
        f"{_l([q_eric(q_names, f'hamiltonian/sail/{s}') for s in p_seeds])} under "
        f"PBE/6-31G, against {q_ref_eric[q_best]:.3f} for the best reference ({q_best}"
        + ("" if q_best == "projected STO-3G MINAO" else
           "; the projected STO-3G MINAO density: "
           f"{q_ref_eric['projected STO-3G MINAO']:.3f}")
        + f") (`paper_level_of_theory_631g`: {V['paper_level_of_theory_631g']})."
        + (f" The other {len(_q_out)} OOD molecules "
           f"({min(heavy(ood[n]) for n in _q_out)}-{max(heavy(ood[n]) for n in _q_out)}"
           " heavy atoms) were not counted in 6-31G." if _q_out else ""))
display(Markdown("\n".join(_txt)))

# %% [markdown]
# ## Known limits
#
# * **Level of theory.** The models are trained through an RHF/STO-3G solver. The paper trains and evaluates
#   under Kohn-Sham DFT in def2-SVP, where the MINAO guess is further from the converged density. Section 9
#   re-counts the same guesses under PBE in STO-3G only (`paper_level_of_theory`), on a coarse integration grid
#   (level 1, the same for every guess) and with 4 references (PySCF's `sap` and `huckel` and the surrogates were
#   left out for time). No model was trained through the PBE solver. The 6-31G count (`count_pbe.py --basis
#   6-31g --max-heavy 8`, STO-3G guesses projected with `ss.project_density`) covers only the OOD molecules with at
#   most 8 heavy atoms: a one-core timing of the smallest ones (a probe that also printed their counts) put the
#   whole set well over the 25 minutes the count was given, so `paper_level_of_theory_631g` says nothing about
#   the largest molecules. The model itself is written for a minimal basis (1s, 2s, 2p slots).
# * **Training length.** SAIL from the surrogate (section 10) runs 4,000 cosine steps and 4,000 at the floor
#   learning rate, the same for every seed (about 20 minutes per seed on one shared core). At a seed where its
#   loss is still falling over the last fifth (`sail_ft_converged`, per seed in the reading above) the claims
#   that rest on it are inconclusive there. The continuation restarts AdamW's moments (the first 4,000 steps'
#   optimizer state was not stored); the run from scratch in the data script does the same, so both give one
#   model. The longer unroll (`longer_unroll_helps`) is a continuation: 1,500 steps at T = 12 from each seed's
#   T = 6 model, against the same steps at T = 6, not a model trained at T = 12 from the surrogate; T = 16 was not
#   trained (one seed's job was sized for T = 12 from a timing probe).
# * **Scale.** The G2 models' training molecules have at most 4 heavy atoms and OOD molecules 5-14 (up to 3.5× <!-- paper -->
#   larger, not 10×); for them the shift is not size alone: G2's reference geometries (plus 0.03 Å noise) against <!-- paper -->
#   RDKit's MMFF force field. The models of section 10 are trained on MMFF geometries with at most 6 heavy atoms
#   and judged on the OOD molecules with 7-14 (up to 14 heavy atoms against 6), so their shift is size and
#   chemistry only; that OOD set is smaller (16 molecules), so its ratios move more with one build. The model is a small
#   residual on a prior, not the paper's equivariant GNN.
# * **The phase split is a description, not an ablation.** It shows where the saved cycles fall (section 7), but
#   the only longer unroll trained is the T = 12 continuation of section 10, whose phase split the reading gives;
#   whether a loss that weights the later cycles more (the plain sum lets the first cycles dominate it) would
#   shorten the tail was not tested. Times
#   are medians of CPU time over `n_timing` interleaved rounds on a shared machine.
# * **Statistics.** Ratios of sums over 26 (section 10: 16) OOD molecules with per-molecule build counts around 8-20; the bootstrap
#   intervals above resample molecules and say how much one more or one fewer build on a few molecules moves the
#   ratio. The counts also depend on the convergence threshold, which is PySCF's default (`conv_tol = 1e-9`) for
#   every guess. Measured once during review, outside this notebook (seed 0, the 26 OOD molecules): a looser
#   threshold (`1e-6`) lowered both SAIL ERICs by a few hundredths and a tighter one (`1e-11`) raised them, while
#   purified MINAO barely moved. A looser threshold cuts the DIIS tail and so raises the share of the early phase
#   that a guess can shorten; the claims keep the default.
