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
# model learns what makes the *solver* converge, without labels. The paper also defines **ERIC**, the number of
# Fock builds with a guess divided by the number with PySCF's standard MINAO guess, counting any Fock build the
# guess itself needs. It reports ERIC reductions of 28-37% on molecules up to 4× larger than training, and a
# 1.35× wall-time speedup on molecules 10× larger.
#
# | | paper | this notebook |
# |---|---|---|
# | level of theory | Kohn-Sham DFT (PBE, SCAN, B3LYP), def2-SVP | **RHF / STO-3G** (PySCF) |
# | model | SE(3)-equivariant GNN predicting Hamiltonian or density matrices | a Hückel-like Hamiltonian head, equivariant by construction (~3k parameters) |
# | training data | QM9 molecules with ≤ 20 atoms | ASE's G2 molecules with ≤ 4 heavy atoms (H, C, N, O, F), with perturbed geometries |
# | out of distribution | QM40 (≤ 4× larger), QMugs (10× larger) | RDKit-embedded molecules with 6-14 heavy atoms (benzene ... caffeine), 1.5-3.5× larger |
# | unroll | T SCF cycles, DIIS | T = 6 cycles, DIIS, in torch float64 on PySCF's integrals |
# | hardware | GPU | 2 CPU cores |
#
# :::{note}
# **What is reconstructed.** The SAIL loss (per-cycle orbital-gradient norms along an unrolled SCF, backpropagated
# through DIIS and the eigensolver) follows the authors' description; the weights (all 1), the unroll length and
# the RMS normalization are ours. ERIC's exact definition is not public: we count calls of PySCF's `get_veff`
# (one Fock build each) and add the builds a guess needs before the solver starts (zero for every guess here: our
# model uses only one-electron integrals). The model is our CPU-sized stand-in for the paper's equivariant GNN,
# and only the Hamiltonian head is implemented (no density head). The level of theory is RHF/STO-3G, not DFT.
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
max_heavy = 4  # training molecules: G2 with at most this many heavy atoms
n_test_id = 12  # held-out G2 molecules (in distribution)
n_perturb = 2  # perturbed geometries per training molecule (plus the original)
unroll = 6  # SCF cycles unrolled in the SAIL loss
steps_surrogate = 200
steps_sail = 120
batch_mols = 4
n_timing = 3  # repeats of the wall-time benchmark
ood_names = [
    "benzene",
    "pyridine",
    "toluene",
    "phenol",
    "indole",
    "naphthalene",
    "paracetamol",
    "aspirin",
    "caffeine",
]

# %% tags=["hide-input"]
import time

import matplotlib.pyplot as plt
import numpy as np
import torch
from pyscf import lib, scf
from tqdm.auto import tqdm

from helpers import claims, plotting, repro, train
from helpers import sail_scf as ss

OOD_SMILES = {
    "benzene": "c1ccccc1",
    "pyridine": "c1ccncc1",
    "toluene": "Cc1ccccc1",
    "phenol": "Oc1ccccc1",
    "indole": "c1ccc2[nH]ccc2c1",
    "naphthalene": "c1ccc2ccccc2c1",
    "paracetamol": "CC(=O)Nc1ccc(O)cc1",
    "aspirin": "CC(=O)Oc1ccccc1C(=O)O",
    "caffeine": "Cn1cnc2c1c(=O)n(C)c(=O)n2C",
}
if quick:
    n_test_id, n_perturb, unroll, steps_surrogate, steps_sail, batch_mols, n_timing = (
        4,
        0,
        4,
        20,
        8,
        2,
        1,
    )
    ood_names = ["benzene", "pyridine"]

# these matrices are small: one intra-op thread is fastest
env = repro.setup(seed, threads=1)
# PySCF: these molecules are small; one OpenMP thread avoids spin-waiting on a
# shared CPU
lib.num_threads(1)
plotting.use_style()
rec = claims.ClaimsRecord(
    "17_sail_scf",
    dict(
        quick=quick,
        seed=seed,
        max_heavy=max_heavy,
        n_test_id=n_test_id,
        n_perturb=n_perturb,
        unroll=unroll,
        steps_surrogate=steps_surrogate,
        steps_sail=steps_sail,
        batch_mols=batch_mols,
        n_timing=n_timing,
        ood_names=ood_names,
    ),
)
print(env)

# %% [markdown]
# ## 2. Molecules
#
# Training and in-distribution test molecules come from ASE's bundled G2 set (closed shell, H/C/N/O/F, at most
# `max_heavy` heavy atoms); each training molecule also appears with `n_perturb` randomly displaced geometries
# (σ = 0.03 Å). The out-of-distribution (OOD) molecules are embedded by RDKit (ETKDG with a fixed seed, then MMFF).


# %%
def heavy(mol):
    return sum(mol.atom_pure_symbol(i) != "H" for i in range(mol.natm))


g2 = ss.g2_molecules(max_heavy)
names = list(g2)
repro.rng(seed, 1).shuffle(names)
test_names, train_names = names[:n_test_id], names[n_test_id:]
if quick:
    train_names = train_names[:10]
rng = repro.rng(seed, 2)
train_mols = []
for name in train_names:
    m = g2[name]
    train_mols.append(m)
    sym = [m.atom_symbol(i) for i in range(m.natm)]
    for _ in range(n_perturb):
        train_mols.append(
            ss.build_molecule(
                sym, m.atom_coords(unit="Angstrom") + rng.normal(0, 0.03, (m.natm, 3))
            )
        )
ood = {n: ss.rdkit_molecule(OOD_SMILES[n], seed=seed) for n in ood_names}
print(
    f"{len(train_mols)} training geometries ({len(train_names)} molecules, up to "
    f"{max(map(heavy, train_mols))} heavy "
    f"atoms, up to {max(m.nao for m in train_mols)} basis functions); "
    f"{len(test_names)} held-out G2 molecules"
)
print(
    "OOD:",
    {n: (heavy(m), m.nao) for n, m in ood.items()},
    "(heavy atoms, basis functions)",
)

# %% [markdown]
# ## 3. A differentiable SCF
#
# RHF in a nutshell. With the overlap `S`, the core Hamiltonian `H` and the two-electron integrals `(μν|λσ)` from
# PySCF, the Fock matrix of a density `P` is `F(P) = H + J(P) − K(P)/2`; the next density occupies the lowest
# `N/2` solutions of `F C = S C ε`. The orbital gradient `g = Xᵀ(F P S − S P F)X` (with `X = S^{-1/2}`) vanishes at
# self-consistency, and DIIS extrapolates the Fock matrix from recent cycles by minimizing the norm of the
# combined gradient. Here is one cycle written out with the helper's pieces, from the core-Hamiltonian guess
# of water:

# %%
water = ss.build_molecule(
    ["O", "H", "H"], [[0, 0, 0.117], [0, 0.757, -0.467], [0, -0.757, -0.467]]
)
ints = ss.integrals(water)
# the "1e" guess: occupy the core Hamiltonian
P = ss.density_from_hamiltonian(ints.H, ints)
J = torch.einsum("ijkl,kl->ij", ints.eri, P)
K = torch.einsum("ikjl,kl->ij", ints.eri, P)
F = ints.H + J - 0.5 * K  # one Fock build
g = ints.X.T @ (F @ P @ ints.S - ints.S @ P @ F) @ ints.X  # orbital gradient
print(
    f"E = {ss.energy(P, F, ints).item():.6f} Ha, RMS orbital gradient = "
    f"{g.pow(2).mean().sqrt().item():.4f}"
)
print("electrons: Tr(P S) =", torch.trace(P @ ints.S).item())

# %% [markdown]
# The one delicate step is the derivative of the occupied projector `Q = C_occ C_occᵀ` (the aufbau step) with
# respect to the matrix being diagonalized. The generic eigenvector derivative contains `1/(ε_i − ε_j)` for every
# pair of orbitals, which blows up for degenerate levels (common in symmetric molecules) even though `Q` does not
# depend on rotations *within* the occupied or the virtual block. The projector's derivative involves only
# occupied-virtual pairs: with `M = Cᵀ Ḡ C` for an incoming gradient `Ḡ`, the outgoing gradient is `C W Cᵀ` with
# `W_ia = W_ai = M_ia / (ε_i − ε_a)` (i occupied, a virtual) and zero elsewhere. That is `ss.occupied_projector`
# (occupied-virtual gaps under 1 mHa are clamped there, so a closing gap during training cannot give an infinite
# gradient).
#
# **Check `projector_gradcheck`**: `torch.autograd.gradcheck` (finite differences) on water's orthogonalized Fock
# matrix, in float64.

# %%
F_orth = (ints.X.T @ F @ ints.X).detach().requires_grad_(True)
ok = torch.autograd.gradcheck(
    lambda A: ss.occupied_projector(0.5 * (A + A.T), ints.n_occ), (F_orth,)
)
rec.check("projector_gradcheck", bool(ok), True)

# %% [markdown]
# **Check `scf_matches_pyscf`**: run the torch SCF to convergence on every held-out G2 molecule and on the OOD
# molecules small enough for the full four-index integral tensor (≤ 40 basis functions), and compare the energy
# with PySCF's RHF (both on the same integrals).

# %%
check_mols = [g2[n] for n in test_names] + [m for m in ood.values() if m.nao <= 40]
scf_gap = 0.0
for m in tqdm(check_mols, desc="torch SCF vs PySCF"):
    mf = scf.RHF(m)
    mf.conv_tol = 1e-11
    e_ref = mf.kernel()
    it = ss.integrals(m)
    trace = ss.scf_unrolled(
        torch.from_numpy(ss.pyscf_guess(m, "minao")), it, 80, tol=1e-9
    )
    scf_gap = max(scf_gap, abs(trace.energies[-1].item() - e_ref))
print(f"largest |E_torch - E_PySCF| over {len(check_mols)} molecules: {scf_gap:.2e} Ha")
rec.check("scf_matches_pyscf", scf_gap, 1e-6, "<=")

# %% [markdown]
# ## 4. The guess model: a learned, equivariant Hückel Hamiltonian
#
# `HuckelGuess` predicts `H_pred = H_core + diag(a_μ) + b_μν S_μν` (μ ≠ ν). The on-site shifts `a` (per atom and
# shell: 1s, 2s, 2p) come from an MLP on invariant descriptors of the atom's environment (element and radial
# neighbour densities per element); the couplings `b` (per atom pair and shell pair) from an MLP on symmetric pair
# descriptors. Scalars times blocks of `S` and `H_core` rotate with the atomic orbitals, so the guess is
# rotation-equivariant by construction, with no Fock build. Its last layers start at zero, so the untrained
# model is exactly the core-Hamiltonian guess. The density guess is the aufbau density of `H_pred`.

# %%
feats = {id(m): ss.features(m) for m in train_mols}
train_ints = {id(m): ss.integrals(m) for m in train_mols}
print(f"{sum(p.numel() for p in ss.HuckelGuess().parameters()):,} parameters")

# %% [markdown]
# ## 5. Three ways to train it
#
# **(a) Surrogate** (ground-state supervision, the baseline): fit `H_pred` to PySCF's converged Fock matrix,
# `||H_pred − F*||²`. **(b) SAIL**: no labels; unroll `T` SCF cycles from the predicted density and minimize the
# sum of RMS orbital gradients along the trajectory, `L = Σ_t ||g(P_t)||`, backpropagating through DIIS and the
# projector. **(c) SAIL from the surrogate**: (b) started from (a)'s weights. All use `train.fit` (AdamW).

# %%
targets = {}
for m in tqdm(train_mols, desc="converged Fock targets"):
    mf = scf.RHF(m)
    mf.conv_tol = 1e-10
    mf.kernel()
    targets[id(m)] = torch.from_numpy(mf.get_fock())


def batches(step):
    idx = repro.rng(seed, 3, step).choice(
        len(train_mols), size=min(batch_mols, len(train_mols)), replace=False
    )
    return [train_mols[i] for i in idx]


def surrogate_loss(model, mols):
    return sum(
        ((model(feats[id(m)], train_ints[id(m)]) - targets[id(m)]) ** 2).mean()
        for m in mols
    ) / len(mols)


def sail_loss(model, mols):
    total = 0.0
    for m in mols:
        it = train_ints[id(m)]
        P0 = model.density(feats[id(m)], it)
        trace = ss.scf_unrolled(P0, it, unroll)  # T cycles, DIIS, all in autograd
        # label-free: the solver's own residuals
        total = total + torch.stack(trace.grad_norms).sum()
    return total / len(mols)


torch.manual_seed(seed)
surrogate = ss.HuckelGuess()
hist_sur = train.fit(
    surrogate,
    surrogate_loss,
    batches,
    steps_surrogate,
    lr=1e-2,
    warmup=10,
    seed=seed,
    desc="(a) surrogate",
)
torch.manual_seed(seed)
sail = ss.HuckelGuess()
hist_sail = train.fit(
    sail, sail_loss, batches, steps_sail, lr=3e-3, warmup=10, seed=seed, desc="(b) SAIL"
)
sail_ft = ss.HuckelGuess()
sail_ft.load_state_dict(surrogate.state_dict())
hist_ft = train.fit(
    sail_ft,
    sail_loss,
    batches,
    steps_sail,
    lr=3e-3,
    warmup=10,
    seed=seed,
    desc="(c) SAIL from surrogate",
)
models = {"surrogate": surrogate, "SAIL": sail, "SAIL from surrogate": sail_ft}

fig, ax = plt.subplots(1, 2, figsize=(9, 3))
ax[0].plot(hist_sur.smoothed(10))
ax[0].set(
    xlabel="step", ylabel="||H_pred - F*||² (mean)", yscale="log", title="(a) surrogate"
)
ax[1].plot(hist_sail.smoothed(10), label="(b) SAIL")
ax[1].plot(hist_ft.smoothed(10), label="(c) SAIL from surrogate")
ax[1].set(xlabel="step", ylabel="Σ_t RMS orbital gradient", title="SAIL loss")
ax[1].legend()
fig.tight_layout()
plt.show()

# %% [markdown]
# ## 6. Counting Fock builds: ERIC
#
# Every guess is handed to the same PySCF RHF solver (DIIS, default thresholds) as `dm0`; a wrapper counts each
# call of `get_veff`, i.e. each Fock build, including the one for the starting density and PySCF's final check.
# `ERIC(guess) = (builds with the guess + builds hidden in making the guess) / builds with MINAO`; the hidden term
# is zero for every guess here. PySCF's own guesses are measured side by side: `minao`, `atom` (atomic HF
# densities), `huckel`, `sap` (superposition of atomic potentials) and `1e` (core Hamiltonian).
#
# **Check `eric_minao_is_one`**: handing PySCF's MINAO density in as `dm0` costs exactly as many builds as
# letting PySCF make its default guess itself (ERIC = 1 for every molecule).
#
# **Check `electron_count`**: our models' guesses hold exactly `N` electrons, `Tr(P0 S) = N` (aufbau of `H_pred`).
# PySCF's projected guesses need not (MINAO's, for one, is not normalized); we print their deviation.

# %%
PYSCF_GUESSES = ("minao", "atom", "huckel", "sap", "1e")


def model_guess(model, m):
    # the guess needs only S and H_core: no two-electron integrals
    it = ss.integrals(m, eri=False)
    with torch.no_grad():
        H = model(ss.features(m), it)
        return ss.density_from_hamiltonian(H, it).numpy(), H, it


results = {}  # name -> {guess: ScfRun}
fit_err = {}  # name -> {model: relative ||H_pred - F*|| / ||F*||}
e_count_gap, minao_ratio = 0.0, []
pyscf_count_gap = {g: 0.0 for g in PYSCF_GUESSES}
eval_mols = {**{n: g2[n] for n in test_names}, **ood}
for name, m in tqdm(eval_mols.items(), desc="PySCF runs"):
    mf = scf.RHF(m)
    default = ss.run_pyscf(mf, None)  # PySCF's default MINAO guess, made inside kernel
    F_star = torch.from_numpy(mf.get_fock())
    S = m.intor("int1e_ovlp")
    runs, errs = {}, {}
    for g in PYSCF_GUESSES:
        dm0 = ss.pyscf_guess(m, g)
        runs[g] = ss.run_pyscf(mf, dm0)
        pyscf_count_gap[g] = max(
            pyscf_count_gap[g], abs(np.trace(dm0 @ S) - m.nelectron)
        )
    for mname, model in models.items():
        dm0, H, _ = model_guess(model, m)
        runs[mname] = ss.run_pyscf(mf, dm0)
        e_count_gap = max(e_count_gap, abs(np.trace(dm0 @ S) - m.nelectron))
        errs[mname] = ((H - F_star).norm() / F_star.norm()).item()
    minao_ratio.append(runs["minao"].fock_builds / default.fock_builds)
    results[name], fit_err[name] = runs, errs
guesses = list(next(iter(results.values())))
eric = {
    name: {g: r.fock_builds / runs_["minao"].fock_builds for g, r in runs_.items()}
    for name, runs_ in results.items()
}
rec.check("eric_minao_is_one", float(max(abs(r - 1) for r in minao_ratio)), 0.0, "==")
rec.check(
    "electron_count",
    float(e_count_gap),
    1e-8,
    "<=",
    note="max |Tr(P0 S) - N| over the three models' guesses on every evaluated "
    "molecule",
)
print(
    "PySCF's own guesses, max |Tr(P0 S) - N|:",
    {g: round(v, 4) for g, v in pyscf_count_gap.items()},
)
unconverged = [
    (n, g) for n, runs_ in results.items() for g, r in runs_.items() if not r.converged
]
print(
    "runs that did not converge in 100 cycles (counted at 100 cycles):",
    unconverged or "none",
)


def median_eric(group, g):
    return float(np.median([eric[n][g] for n in group]))


table = {g: (median_eric(test_names, g), median_eric(ood_names, g)) for g in guesses}
print(f"{'guess':>20}  median ERIC (G2 held-out)  median ERIC (OOD)")
for g, (a, b) in table.items():
    print(f"{g:>20}  {a:24.3f}  {b:17.3f}")

# %% [markdown]
# **Check `rotation_invariance`**: rotating a molecule must not change what the model predicts, up to the
# rotation of the p orbitals: the generalized eigenvalues of `(H_pred, S)`, the guess energy and the SCF's number
# of Fock builds. We rotate each OOD molecule with a random rotation.


# %%
def random_rotation(r):
    q, _ = np.linalg.qr(r.normal(size=(3, 3)))
    return q * np.sign(np.linalg.det(q))


rot_gap, rot_builds = 0.0, 0
rr = repro.rng(seed, 4)
for name in ood_names[:2]:
    m = ood[name]
    m_rot = ss.rotate(m, random_rotation(rr))
    out = []
    for mol in (m, m_rot):
        dm0, H, it = model_guess(sail, mol)
        eps = torch.linalg.eigvalsh(it.X.T @ H @ it.X)
        P0, it = torch.from_numpy(dm0), ss.integrals(mol)
        e0 = ss.energy(P0, ss.fock(P0, it), it)
        out.append((eps, e0, ss.run_pyscf(scf.RHF(mol), dm0).fock_builds))
    rot_gap = max(
        rot_gap,
        (out[0][0] - out[1][0]).abs().max().item(),
        abs(out[0][1] - out[1][1]).item(),
    )
    rot_builds += out[0][2] != out[1][2]
print(
    f"largest change under rotation: {rot_gap:.2e}; Fock-build counts changed "
    f"for {rot_builds} molecules"
)
rec.check("rotation_invariance", rot_gap, 1e-8, "<=")

# %% [markdown]
# ## 7. ERIC against molecule size
#
# Below 1 the guess saves Fock builds relative to MINAO; above 1 it costs extra. The right panel puts the
# surrogate's and SAIL's *target-fit* error (how far `H_pred` is from the converged Fock matrix) next to their ERIC
# on the OOD molecules: the paper's diagnosis is that fitting the target well does not make a good starting point.

# %%
fig, ax = plt.subplots(1, 2, figsize=(11, 3.8))
order = sorted(eval_mols, key=lambda n: (heavy(eval_mols[n]), n))
x = [heavy(eval_mols[n]) for n in order]
jit = {g: (i - len(guesses) / 2) * 0.06 for i, g in enumerate(guesses)}
for i, g in enumerate(guesses):
    style = dict(
        marker="o" if g in models else ".",
        ls="none",
        ms=7 if g in models else 5,
        color=plotting.PALETTE[i % len(plotting.PALETTE)],
    )
    ax[0].plot(np.array(x) + jit[g], [eric[n][g] for n in order], label=g, **style)
ax[0].axhline(1, color="k", lw=1, ls=":")
ax[0].axvline(max_heavy + 0.5, color="grey", lw=1)
ax[0].text(
    max_heavy + 0.6,
    ax[0].get_ylim()[1] * 0.95,
    "out of distribution ->",
    fontsize=8,
    va="top",
)
ax[0].set(
    xlabel="heavy atoms",
    ylabel="ERIC (Fock builds / MINAO's)",
    title="ERIC vs molecule size",
)
ax[0].legend(fontsize=7, ncol=2)
for mname in models:
    ax[1].scatter(
        [fit_err[n][mname] for n in ood_names],
        [eric[n][mname] for n in ood_names],
        label=mname,
        color=plotting.PALETTE[(guesses.index(mname)) % len(plotting.PALETTE)],
    )
ax[1].axhline(1, color="k", lw=1, ls=":")
ax[1].set(
    xlabel="||H_pred - F*|| / ||F*|| (OOD)",
    ylabel="ERIC (OOD)",
    title="target fit vs solver cost",
)
ax[1].legend(fontsize=8)
fig.tight_layout()
plt.show()

# %% [markdown]
# ## 8. Convergence traces, and wall time
#
# The slider steps through the OOD molecules (precomputed; it works in the static page): PySCF's orbital-gradient
# norm per cycle from every starting guess.


# %%
def draw_trace(fig, name):
    ax = fig.add_subplot(111)
    for i, g in enumerate(guesses):
        norms = results[name][g].grad_norms
        ax.semilogy(
            range(1, len(norms) + 1),
            norms,
            marker="o" if g in models else ".",
            ms=3,
            label=g,
            color=plotting.PALETTE[i % len(plotting.PALETTE)],
            lw=2 if g in models else 1,
        )
    ax.set(
        xlabel="SCF cycle",
        ylabel="||orbital gradient||",
        title=f"{name}: {heavy(ood[name])} heavy atoms",
    )
    ax.legend(fontsize=7, ncol=2)


plotting.static_slider(ood_names, draw_trace, figsize=(7, 3.8), label="molecule")

# %% [markdown]
# Wall time, including the model: for the largest OOD molecules we time (MINAO guess + SCF) against (features +
# SAIL model + aufbau + SCF), after a warm-up, `n_timing` repeats, median; the integrals are computed once
# beforehand and shared, so both sides time exactly the guess plus the iterations.


# %%
def timed(fn, repeats):
    fn()  # warm-up
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts))


big = sorted(ood_names, key=lambda n: ood[n].nao)[-3:]
t_minao, t_sail = 0.0, 0.0
for name in big:
    m = ood[name]
    mf = scf.RHF(m)
    mf.kernel()  # builds and caches the integrals

    def with_minao(mf=mf, m=m):
        mf.kernel(dm0=ss.pyscf_guess(m, "minao"))

    def with_sail(mf=mf, m=m):
        mf.kernel(dm0=model_guess(sail, m)[0])

    t_minao += timed(with_minao, n_timing)
    t_sail += timed(with_sail, n_timing)
speedup = t_minao / t_sail
print(
    f"{big}: MINAO {t_minao:.2f} s, SAIL {t_sail:.2f} s (wall, summed medians): "
    f"speedup {speedup:.2f}x"
)


# %% [markdown]
# Live (Jupyter or Colab): pick a molecule by SMILES and compare the solver's cost from MINAO and from each model.


# %%
def compare(smiles="c1ccc2ccccc2c1"):
    try:
        m = ss.rdkit_molecule(smiles, seed=seed)
    except ValueError as e:
        print(e)
        return
    mf = scf.RHF(m)
    base = ss.run_pyscf(mf, ss.pyscf_guess(m, "minao")).fock_builds
    print(f"{heavy(m)} heavy atoms, {m.nao} basis functions; MINAO: {base} Fock builds")
    for mname, model in models.items():
        n = ss.run_pyscf(mf, model_guess(model, m)[0]).fock_builds
        print(f"{mname:>20}: {n} Fock builds, ERIC {n / base:.2f}")


plotting.live_controls(compare, smiles="c1ccc2ccccc2c1")

# %% [markdown]
# ## 9. The claims record

# %%
e_sail, e_sur = table["SAIL"][1], table["surrogate"][1]
e_ft = table["SAIL from surrogate"][1]
best_pyscf = min(PYSCF_GUESSES, key=lambda g: table[g][1])
rec.claim(
    "eric_sail_ood",
    "SAIL guesses need fewer Fock builds than MINAO on larger molecules (median ERIC)",
    paper="-28% to -37% (ERIC 0.63-0.72)",
    measured=e_sail,
    op="<=",
    target=0.72,
    unit="median ERIC, OOD",
    baseline=table[best_pyscf][1],
    note="Held if at least the paper's smallest reduction (28%). Baseline: the best "
    f"PySCF guess ({best_pyscf}). SAIL from surrogate {e_ft:.3f}; "
    f"PySCF guesses: "
    + ", ".join(f"{g} {table[g][1]:.2f}" for g in PYSCF_GUESSES)
    + ". RHF/STO-3G, molecules 1.5-3.5x larger than training.",
)
fit_sur = float(np.median([fit_err[n]["surrogate"] for n in ood_names]))
fit_sail = float(np.median([fit_err[n]["SAIL"] for n in ood_names]))
rec.claim(
    "eric_surrogate_ood",
    "A model trained to fit the converged Fock matrix slows convergence out of "
    "distribution (median ERIC above 1) although it fits its target",
    paper="matrix-fitting models slow convergence OOD",
    measured=e_sur,
    op=">",
    target=1.0,
    unit="median ERIC, OOD",
    note=f"median target-fit error OOD: surrogate {fit_sur:.3f}, SAIL {fit_sail:.3f} "
    "(||H - F*|| / ||F*||).",
)
rec.claim(
    "sail_beats_surrogate",
    "SAIL needs fewer Fock builds than the surrogate on larger molecules",
    paper="SAIL < surrogate",
    measured=e_sail / e_sur,
    op="<",
    target=1.0,
    unit="median ERIC OOD, SAIL ÷ surrogate",
    baseline=e_sur,
    note=f"SAIL {e_sail:.3f} vs surrogate {e_sur:.3f}",
)
rec.claim(
    "wall_time_speedup",
    "Wall-time speedup of SAIL over MINAO on the largest molecules, model included",
    paper="1.35x (10x larger, B3LYP)",
    measured=speedup,
    op=">=",
    target=1.35,
    unit="x (MINAO time ÷ SAIL time)",
    baseline=t_minao,
    note=f"{', '.join(big)}; warm-up + {n_timing} repeats, median; RHF/STO-3G cycles "
    "are cheap, so the "
    f"guess's own cost weighs more than at the paper's hybrid-DFT level. Baseline: "
    f"MINAO {t_minao:.3f} s, SAIL {t_sail:.3f} s.",
)
rec.save()
