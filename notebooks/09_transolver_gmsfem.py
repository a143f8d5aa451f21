# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Transolver-GMsFEM: a neural operator builds the multiscale basis, the finite element method keeps the physics
#
# Flow through rock with thin, highly conductive channels (a contrast of 10⁴ between channel and matrix) is hard for
# neural PDE solvers: the solution depends on the connectivity of features a few cells wide, and a network trained
# on one family of coefficients has no reason to be right on another. The **Generalized Multiscale Finite Element
# Method (GMsFEM)** handles such problems by solving, in every coarse neighbourhood, a small eigenvalue problem
# whose leading eigenfunctions capture the channels; a Galerkin solve in the span of these functions then gives an
# accurate coarse solution. The local eigenproblems are the expensive part. The paper replaces them with a
# **Transolver** (a transformer whose attention runs over a few learned "physical slices" of a point cloud) that
# predicts the local eigenfunctions, while the coarse Galerkin solve stays exact. Its claims: over 100× faster basis
# construction, accuracy close to the exact basis, and far more robustness than a pure neural solver out of
# distribution.
#
# | | the paper | this notebook |
# |---|---|---|
# | problems | 2-D/3-D, steady and time-dependent, irregular grids | 2-D, steady and implicit-Euler parabolic, a Q1 grid and a jittered P1 mesh |
# | fine grid | not public | 64 × 64 cells (4 225 nodes); 128 × 128 for the timing at the larger patch |
# | coarse grid / basis | not public | 8 × 8 coarse cells, 81 neighbourhoods, up to 4 functions each |
# | network | Transolver | Transolver, 3 blocks, width 80, 16 slices (156 k parameters), 3 seeds, trained offline by `data/09_transolver_gmsfem/make_basis.py` |
# | training data | not public | 100 coefficient fields (8 100 local problems), 4 000 steps of 16 patches, 8-fold symmetry augmentation |
# | speed baseline | classical local eigensolves | the fastest of dense LAPACK `evr`, ARPACK shift-invert (`eigsh`) and preconditioned LOBPCG (ILU, LU) at the network's accuracy, one thread, same run |
# | neural baseline | state-of-the-art neural PDE solvers | an FNO (4 Fourier layers, width 32, 12 × 12 modes, CP-factorised spectral weights of rank 256) on the 65 × 65 node grid mapping (x, y, log κ, f) → u, 2 000 fine solutions with varied forcing, 2 400 steps of 8, 3 seeds (`make_pure.py`) |
# | hardware | GPU | 2 shared CPU cores; the default run loads the checkpoints, quick mode trains tiny models live |
#
# :::{note}
# **What is reconstructed.** The full paper is not public. GMsFEM itself is standard (Efendiev, Galvis & Hou 2013)
# and is implemented exactly: Neumann local spectral problems with a lumped κ-weighted mass, bilinear partition of
# unity, Galerkin coarse solve. Physics-Attention follows the published Transolver. The rest is our
# reconstruction: the network's inputs (relative coordinates, log κ, partition-of-unity value, mask), the
# hard-wired constant first eigenfunction, and the loss. The predecessor (GMsFEM-NO, arXiv 2505.16030) aligns <!-- paper -->
# subspaces through principal angles in the mass norm; section 3 shows why that alone is the wrong yardstick for
# a Galerkin basis in high contrast, and we add an **energy-aware** term (a Rayleigh-Ritz excess), evaluate every
# truncation k = 1..N_bf (nested), and drop the truncations that fall inside a degenerate eigenspace. The "network
# + one inverse-iteration step" variant is ours, labelled as such wherever it appears. The boundary
# neighbourhoods use a Dirichlet local problem on the domain boundary (our choice; see section 2).
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
n_fine = 64  # fine cells per side (the checkpoints were trained at 64)
n_coarse = 8  # coarse cells per side
n_bf = 4  # basis functions per neighbourhood (the first is the constant)
n_test_fields = 3  # in-distribution test fields
timing_sizes = (
    64,
    96,
    128,
)  # fine cells per side for the timing (17², 25², 33² nodes per patch)
timing_repeats = 3  # timed repeats after one warm-up, per solver and size

# %% tags=["hide-input"]
import time
import warnings

import matplotlib.pyplot as plt
import numpy as np
import torch
from IPython.display import Markdown, display
from scipy.linalg import LinAlgWarning
from threadpoolctl import threadpool_limits
from tqdm.auto import tqdm

from helpers import checkpoints, claims, plotting, repro, scripts, train
from helpers import transolver_gmsfem as tg

if quick:
    n_fine, n_bf, n_test_fields, timing_sizes, timing_repeats = 32, 3, 1, (32, 48), 1

env = repro.setup(seed)
plotting.use_style()
rec = claims.ClaimsRecord(
    "09_transolver_gmsfem",
    dict(
        quick=quick,
        seed=seed,
        n_fine=n_fine,
        n_coarse=n_coarse,
        n_bf=n_bf,
        n_test_fields=n_test_fields,
        timing_sizes=list(timing_sizes),
        timing_repeats=timing_repeats,
    ),
)
H = 1 / n_coarse
print(env)

# %% [markdown]
# ## 1. The fine-scale finite element method
#
# We solve $-\nabla\cdot(\kappa\nabla u) = f$ on the unit square with $u = 0$ on the boundary. $\kappa$ is constant
# on each fine cell; the stiffness matrix $A_{ij} = \int \kappa \nabla\phi_i\cdot\nabla\phi_j$ is assembled from
# per-cell matrices in one vectorised scatter, and the load is $b = M f_h$ with the consistent mass matrix. First a
# check that the FEM is right: with $\kappa = 1$ and the manufactured solution $u = \sin\pi x\sin\pi y$, the
# $L^2$ error must fall by 4 when $h$ halves (second order).


# %%
def exact(x, y):
    return np.sin(np.pi * x) * np.sin(np.pi * y)


l2 = []
for n in (8, 16, 32):
    m = tg.structured_mesh(n)
    u_h = tg.solve_fine(m, 2 * np.pi**2 * exact(*m.points.T))
    l2.append(tg.l2_error(m, u_h, exact))
print(
    "L2 errors at h = 1/8, 1/16, 1/32:",
    np.round(l2, 6),
    " ratios:",
    np.round(np.array(l2[:-1]) / l2[1:], 3),
)
rec.check(
    "fem_convergence",
    abs(l2[1] / l2[2] - 4),
    0.2,
    op="<=",
    note="|ratio - 4| for h = 1/16 -> 1/32",
)

# %% [markdown]
# The coefficients: a background of 1 with straight channels and small inclusions of conductivity $10^4$ (the
# training distribution). Each sample is a 64 × 64 pixel map.

# %%
mesh = tg.structured_mesh(n_fine)
ones = np.ones(mesh.n)


def setup_field(pixels, m=mesh):
    """Everything the solvers need for one coefficient field (mesh, A, M,
    neighbourhoods, log kappa), with the sparse local stiffnesses."""
    fd = tg.field_setup(pixels, m, n_coarse)
    fd["Asp"] = [b.A_sparse() for b in fd["nb"]]
    return fd


fig, ax = plt.subplots(1, 4, figsize=(11, 2.9))
for i, a in enumerate(ax):
    a.imshow(
        np.log10(tg.kappa_field(seed * 1000 + i)),
        origin="lower",
        extent=(0, 1, 0, 1),
        cmap="cividis",
    )
    a.set_title(f"log10 κ, field {i}")
    a.grid(False)
plt.show()

# %% [markdown]
# ## 2. GMsFEM, step by step
#
# 1. **Neighbourhoods.** Each coarse node $x_i$ owns $\omega_i$, the (up to) 2 × 2 coarse cells around it.
# 2. **Local spectral problem.** On $\omega_i$: $A_\omega\phi = \lambda S_\omega\phi$ with the Neumann stiffness
#    $A_\omega$ and the lumped, κ-weighted mass $S_\omega = \mathrm{diag}(s)$. Small eigenvalues belong to functions
#    that are nearly constant on each high-conductivity channel: exactly what the coarse space needs. Because $S$
#    is diagonal this is the *standard* problem $S^{-1/2}AS^{-1/2}y = \lambda y$, and LAPACK's `evr` driver returns
#    only the $N_{bf}$ smallest pairs. (Section 7 times it against sparse solvers.)
# 3. **Partition of unity and basis.** $\psi_i^k = \chi_i\phi_i^k$ with the bilinear coarse hat $\chi_i$.
# 4. **Galerkin.** $A_0 = R^TAR$, $A_0c = R^Tb$, $u_{ms} = Rc$.
#
# On the domain boundary the local problem takes $u = 0$ (we remove those fine nodes). Leaving the boundary
# coarse nodes out instead (the standard coarse-FEM choice) pins every channel that comes within one coarse cell
# of the boundary to zero, and the error then stalls near 70 % however many functions are used; we measured this
# while building the chapter.


# %%
def exact_bases(nbhds, k):
    """The classical basis: one small eigenproblem per neighbourhood (LAPACK evr,
    leading k pairs).
    """
    return [tg.local_spectral(b.A, b.s, k) for b in nbhds]


def first(eig, k):
    """The leading k eigenfunctions of each neighbourhood."""
    return [phi[:, :k] for _, phi in eig]


def gmsfem(field, phis, f=ones):
    R = tg.multiscale_basis(field["mesh"], field["nb"], phis)
    u_ms, A0 = tg.gmsfem_solve(field["A"], tg.load(field["mesh"], f), R)
    return u_ms, A0


# %%
test_pix = [tg.kappa_field(seed * 1000 + i) for i in range(n_test_fields)]
test = [setup_field(pix) for pix in test_pix]
for fd in test:
    fd["u"] = tg.solve_fine(fd["mesh"], ones, fd["A"])
    fd["eig"] = exact_bases(fd["nb"], 2 * n_bf)  # a few more, for section 3

fd = test[0]
res = max(
    tg.eigen_residual(b.A, b.s, lam[:n_bf], phi[:, :n_bf])
    for b, (lam, phi) in zip(fd["nb"], fd["eig"])
)
print(
    f"{len(fd['nb'])} neighbourhoods, {len(fd['nb'][40].nodes)} fine nodes in an "
    "interior one;"
    f" max relative eigen-residual {res:.2e}"
)
rec.check("eigen_residual", res, 1e-8, op="<=")

# %%
errs_exact = np.zeros((n_test_fields, n_bf, 2))
for t, fd in enumerate(test):
    for k in range(1, n_bf + 1):
        u_ms, A0 = gmsfem(fd, first(fd["eig"], k))
        errs_exact[t, k - 1] = tg.rel_errors(fd["A"], fd["M"], fd["u"], u_ms)
        if t == 0 and k == n_bf:
            min_eig = np.linalg.eigvalsh(A0).min()
print(
    "exact basis, mean relative energy error by N_bf:",
    np.round(errs_exact[..., 0].mean(0), 4),
)
print(
    "exact basis, mean relative L2 error by N_bf:    ",
    np.round(errs_exact[..., 1].mean(0), 4),
)
rec.check(
    "error_decreases_with_basis",
    float(np.diff(errs_exact[..., 0], axis=1).max()),
    0.0,
    op="<=",
    note="largest increase of the energy error when one more function is added "
    "(Galerkin: nested spaces)",
)
rec.check(
    "coarse_matrix_spd",
    float(min_eig),
    0.0,
    op=">",
    note="smallest eigenvalue of A_0 (symmetrised)",
)

# %% [markdown]
# With $\kappa\equiv1$ and one function per neighbourhood (interior coarse nodes only), the first eigenfunction is
# the constant, $\psi_i = \chi_i$ is the coarse hat, and GMsFEM must coincide with standard coarse Q1 FEM.

# %%
nb1 = tg.neighbourhoods(mesh, n_coarse, boundary=False)
R1 = tg.multiscale_basis(mesh, nb1, [tg.local_spectral(b.A, b.s, 1)[1] for b in nb1])
u_one, _ = tg.gmsfem_solve(tg.stiffness(mesh), tg.load(mesh, ones), R1)
gap = float(np.abs(u_one - tg.coarse_q1_fem(n_coarse, n_fine)).max())
print(f"max |GMsFEM - coarse Q1 FEM| = {gap:.2e}")
rec.check("reduces_to_coarse_fem", gap, 1e-10, op="<=")

# %% [markdown]
# ## 3. What a learned basis must get right: energy, not mass
#
# A predicted basis is judged by the Galerkin solve it feeds, and that solve minimises the error in the **energy
# norm** $\|v\|_A^2 = v^TAv$. The predecessor's loss measures something else: the principal angles between the
# predicted and the exact span in the **mass** inner product $\langle u,v\rangle_S$, $\sum_k\sin^2\theta_k =
# k - \|\Phi^TSQ\|_F^2$ for an S-orthonormal $Q$ spanning the prediction. In high contrast the two disagree badly.
# A component along an eigenvector $\phi_j$ costs the same $\sin^2$ whatever $j$, but it costs energy
# proportional to $\lambda_j$, and the eigenvalues of a high-contrast patch span orders of magnitude. Below we take
# the exact basis of a test field and mix in a little of something else: (a) the *next* eigenvectors
# $\phi_{N_{bf}+2..}$, (b) white noise, which lives mostly in the highest eigenvectors. Then we apply one step of
# **block inverse iteration** with Rayleigh-Ritz, $Y = (A+\sigma S)^{-1}S\hat\Phi$ followed by the best $N_{bf}$
# functions in $\mathrm{span}(Y)$, which divides each component along $\phi_j$ by $\lambda_j+\sigma$: exactly
# the high-energy part shrinks.


# %%
def mass_sin2(field, phis, k=n_bf):
    """Mean over patches of sum_j sin^2 theta_j (mass norm) between the span of phis
    and the exact leading-k eigenspace."""
    out = []
    for b, (_, phi), p in zip(field["nb"], field["eig"], phis):
        Q = tg.s_orthonormalize(p, b.s)
        out.append(k - np.sum((phi[:, :k].T @ (b.s[:, None] * Q)) ** 2))
    return float(np.mean(out))


def energy_err(field, phis):
    """Relative energy error of GMsFEM (f = 1) with the bases phis against
    field["u"]."""
    f = np.ones(field["mesh"].n)
    return tg.rel_errors(field["A"], field["M"], field["u"], gmsfem(field, phis, f)[0])[
        0
    ]


def one_step(field, phis):
    """One block inverse-iteration + Rayleigh-Ritz step on every neighbourhood."""
    return [
        tg.inverse_iteration(A, b.s, p)[1]
        for A, b, p in zip(field["Asp"], field["nb"], phis)
    ]


# %%
fd = test[0]
rng = np.random.default_rng(seed)
eps_grid = (
    [0.0, 0.01, 0.03, 0.1, 0.3] if quick else [0.0, 0.01, 0.02, 0.05, 0.1, 0.2, 0.4]
)
sens = {k: [] for k in ("next eigenvectors", "white noise")}
for eps in tqdm(eps_grid, desc="sensitivity"):
    for kind in sens:
        phis = []
        for b, (_, phi) in zip(fd["nb"], fd["eig"]):
            p = phi[:, :n_bf].copy()
            if kind == "next eigenvectors":
                add = phi[:, n_bf + 1 : 2 * n_bf]
            else:
                add = rng.standard_normal((len(b.s), n_bf - 1))
                add /= np.sqrt((b.s[:, None] * add**2).sum(0))
            p[:, 1:] += eps * add  # the first (constant) function stays exact
            phis.append(p)
        fixed = one_step(fd, phis)
        sens[kind].append(
            (
                mass_sin2(fd, phis),
                energy_err(fd, phis),
                mass_sin2(fd, fixed),
                energy_err(fd, fixed),
            )
        )

# %%
sens = {k: np.array(v) for k, v in sens.items()}
fig, ax = plt.subplots(figsize=(6.2, 3.6))
for kind, mk in zip(sens, "os"):
    ax.plot(sens[kind][1:, 0], sens[kind][1:, 1], mk + "-", label=f"exact + {kind}")
    ax.plot(
        sens[kind][1:, 2],
        sens[kind][1:, 3],
        mk + ":",
        mfc="none",
        label="  … after one inverse-iteration step",
    )
ax.axhline(errs_exact[0, -1, 0], color="k", lw=0.8, ls="--", label="exact basis")
ax.set(
    xscale="log",
    xlabel="Σ sin²θ, mass norm (mean per patch)",
    ylabel="relative energy error",
    yscale="log",
)
ax.legend(fontsize=7)
plt.show()
i5 = eps_grid.index(0.03 if quick else 0.05)
print(
    f"mixing {eps_grid[i5]:.0%} white noise: sum sin^2 = "
    f"{sens['white noise'][i5, 0]:.4f}, energy error "
    f"{sens['white noise'][i5, 1]:.3f} (exact basis {errs_exact[0, -1, 0]:.3f}); after "
    "one step "
    f"{sens['white noise'][i5, 3]:.3f}"
)
rec.check(
    "inverse_iteration_keeps_exact_basis",
    abs(sens["white noise"][0, 3] - errs_exact[0, -1, 0]),
    1e-8,
    op="<=",
    note="one inverse-iteration step on the exact basis changes the energy error by at "
    "most this",
)

# %% [markdown]
# A loss that sees only mass-norm angles can be tiny while the solve is ruined. The cure is to measure what
# Rayleigh-Ritz measures. For an S-orthonormal $Q_k$ spanning the leading $k$ predicted functions,
#
# $$\mathcal E_k = \mathrm{tr}(Q_k^TAQ_k) - \sum_{i\le k}\lambda_i \;\ge\; 0$$
#
# (Ky Fan), with equality exactly on a lowest-energy $k$-dimensional space; a component along $\phi_j$ costs
# $\lambda_j - \lambda_i$. It needs no eigenvectors (only eigenvalues) and is blind to rotations inside a
# degenerate eigenspace. We train on $\mathcal L = \mathrm{mean}_{k\in\text{gaps}}\sum\sin^2\theta^{(k)} +
# \mathrm{mean}_{k}\log(1+\mathcal E_k/\lambda_{k+1})$ (in `helpers.transolver_gmsfem.basis_loss`). Two details
# the earlier version of this chapter got wrong:
#
# * **k = 1 is supervised.** On the boundary neighbourhoods the first function is learned (the Dirichlet problem
#   has no constant eigenfunction); averaging only $k = 2..N_{bf}$ left it free.
# * **Cuts only at spectral gaps.** If $\lambda_2\approx\lambda_3$, "the leading 2 eigenfunctions" is not a
#   subspace at all; a mass-norm target there punishes correct predictions. `spectral_cuts` keeps a truncation
#   only where $\lambda_{k+1}-\lambda_k > 0.1\,\lambda_{k+1}$ (the energy term needs no such care). <!-- paper -->

# %%
lam_te = np.array([lam[: n_bf + 1] for fdx in test for lam, _ in fdx["eig"]])
cuts_te = tg.spectral_cuts(lam_te)
print(
    "test patches whose truncation at k = 1..N_bf falls inside a near-degenerate "
    "eigenspace:",
    (~cuts_te).sum(0).tolist(),
    f"of {len(cuts_te)}",
)

# %% [markdown]
# ## 4. Learning the local basis: Transolver with Physics-Attention
#
# Each neighbourhood is a point cloud of fine nodes with features $[\Delta x/H, \Delta y/H, \log_{10}\kappa/4, \chi_i,
# 1]$. Physics-Attention (in `helpers.transolver_gmsfem.PhysicsAttention`) softly assigns every point to $G$ slices,
# averages the points of a slice into a token, lets the $G$ tokens attend to each other, and scatters the result
# back:
#
# ```python
# w = softmax(slice(x_mid) / tau)                    # B,H,N,G   slice weights (masked for padding)
# z = einsum("bhng,bhnd->bhgd", w, fx_mid) / w.sum(2) # slice tokens
# z = softmax(q(z) k(z)^T / sqrt(d)) v(z)            # attention among slices
# out = einsum("bhgd,bhng->bhnd", z, w)              # de-slice
# ```
#
# On interior (Neumann) patches the first output is replaced by the constant, the exact first eigenfunction there.
# A rotation or reflection of the square maps a patch to another valid patch with the same eigenfunctions at the
# same nodes, so training augments with the 8 symmetries. The loss, as trained (`tg.basis_loss`):
#
# ```python
# phi_hat = tg.with_constant(model(feats, mask), mask, neumann)
# loss = tg.sal_loss(phi_hat, phi, s, mask, cuts=cuts)                          # mass-norm angles, gap cuts only
# loss = loss + tg.energy_loss(phi_hat, lam, s, cells, cell_K, mask)           # Rayleigh-Ritz excess, k = 1..K
# ```
#
# The energy term applies $A$ cell by cell (`patch_cells`) and uses $\mathrm{tr}(G^{-1}\hat\Phi^TA\hat\Phi)$ with
# the Gram matrix $G = \hat\Phi^TS\hat\Phi$, so no orthonormalisation is differentiated through twice. The default
# run loads three networks (seeds 0, 1, 2) trained by `data/09_transolver_gmsfem/make_basis.py` (100 fields,
# 4 000 steps of 16 patches, about 8 passes over the 8 100 training patches). Their held-out curves were still
# falling when the cosine schedule ended, so `make_basis.py` also defines a run of the first seed for **twice the
# steps** (checkpoint `basis_long`, the schedule re-fitted to the new length, test losses evaluated 20 times).
# Where that checkpoint is built, it is the first seed's network everywhere below and its 4 000-step twin is kept
# for one comparison; where it is not, the first seed keeps its 4 000-step network (the run says which). Quick
# mode trains a tiny network live with the same function.

# %%
cfg_b = tg.checkpoint_config("basis")
if quick:
    tiny = dict(dim=16, layers=2, slices=8)
    cfg_b.update(
        n_fine=n_fine, n_bf=n_bf, fields=2, steps=40, batch=8, seeds=[seed], **tiny
    )
elif (cfg_b["n_fine"], cfg_b["n_coarse"], cfg_b["n_bf"]) != (n_fine, n_coarse, n_bf):
    raise ValueError(
        "the basis checkpoint was trained at n_fine=64, n_coarse=8, n_bf=4"
    )
else:  # models of seeds seed, seed + 1, seed + 2 (0: the committed configs)
    cfg_b = scripts.with_seeds(cfg_b, scripts.model_seeds(seed))
seeds = cfg_b["seeds"]
data_te = tg.basis_dataset(test, n_bf, n_coarse, cfg_b["rel_gap"])
nets, hists_b = {}, {}
if quick:
    train_fields = [
        setup_field(tg.kappa_field(cfg_b["field_seed0"] + i, n_pix=64))
        for i in range(cfg_b["fields"])
    ]
    data_tr = tg.basis_dataset(train_fields, n_bf, n_coarse, cfg_b["rel_gap"])
    for s in seeds:
        nets[s], hist = tg.train_basis(cfg_b, data_tr, s, test=data_te)
        hists_b[s] = hist
    plt.figure(figsize=(5, 3))
    plt.semilogy(hist.smoothed(5))
    plt.gca().set(xlabel="step", ylabel="loss (live, tiny)")
    plt.show()

# %% [markdown]
# The default run loads the stored networks and shows their curves: the training loss, and the held-out losses of
# the 4 000-step networks and of the first seed's network as used below.

# %%
if not quick:
    ckpt_b = checkpoints.load(tg.CHECKPOINT_SLUG, "basis", config=cfg_b)
    for s in seeds:
        nets[s] = ckpt_b.load_into(tg.make_basis_net(cfg_b), prefix=f"basis/{s}.")
    cfg_l = scripts.with_seeds(tg.checkpoint_config("basis_long"), seeds[:1])
    try:
        ckpt_l = checkpoints.load(tg.CHECKPOINT_SLUG, "basis_long", config=cfg_l)
    except checkpoints.CheckpointError:  # not built: the 4 000-step network
        print("basis_long is not built: the first seed keeps its 4 000-step network.")
        ckpt_l = ckpt_b
    net_short = nets[seeds[0]]  # the first seed's 4 000-step network, for comparison
    nets[seeds[0]] = ckpt_l.load_into(
        tg.make_basis_net(cfg_b), prefix=f"basis/{seeds[0]}."
    )
    fig, ax = plt.subplots(1, 3, figsize=(13, 3.2))
    checkpoints.plot_history(
        ckpt_b.manifest, keys=["loss"], ax=ax[0], logy=True, title="training loss"
    )
    for j, ck in enumerate([ckpt_b, ckpt_l]):
        what = f"{ck.manifest['steps']:,}"
        checkpoints.plot_history(
            ck.manifest,
            keys=["test_sal", "test_energy"],
            ax=ax[j + 1],
            title=f"test losses, {what} steps",
        )
    plt.show()
    m, m_l = ckpt_b.manifest, ckpt_l.manifest
    print(f"trained in {m['wall_seconds'] / 60:.1f} min; final metrics: {m['metrics']}")
    if ckpt_l is not ckpt_b:
        print(f"long run: {m_l['wall_seconds'] / 60:.1f} min; {m_l['metrics']}")
print(f"basis network: {nets[seeds[0]].n_params:,} parameters; seeds {seeds}")


# %%
@torch.no_grad()
def test_losses(net):
    net.eval()
    d = data_te
    out = tg.with_constant(net(d["feats"], d["mask"]), d["mask"], d["neumann"])
    return (
        float(tg.sal_loss(out, d["phi"], d["s"], d["mask"], nested=False)),
        float(
            tg.energy_loss(out, d["lam"], d["s"], d["cells"], d["cell_K"], d["mask"])
        ),
    )


losses = {s: test_losses(nets[s]) for s in seeds}
print(
    "test losses per seed (sum sin^2 at N_bf, energy):",
    {s: np.round(v, 4) for s, v in losses.items()},
)
if (
    not quick and seed == 0 and n_test_fields == 3
):  # the script evaluated on the same three fields
    stored = {s: m["metrics"][f"test_sal/{s}"] for s in seeds[1:]}
    stored[seeds[0]] = m_l["metrics"].get(  # as stored (int8)
        f"test_sal_int8/{seeds[0]}", m_l["metrics"][f"test_sal/{seeds[0]}"]
    )
    drift = max(abs(losses[s][0] - stored[s]) for s in seeds)
    rec.check(
        "checkpoint_reproduces",
        drift,
        1e-3,
        op="<=",
        note="|test sin^2 now - stored|, worst seed",
    )

# %% [markdown]
# ## 5. Transolver-GMsFEM vs the exact basis, in distribution
#
# The predicted functions go through exactly the same partition of unity and Galerkin solve. Next to the pure
# prediction we show our **hybrid** (not the paper's method): the prediction followed by one inverse-iteration
# step per neighbourhood, which costs one sparse factorisation per patch.


# %%
def neumann_flags(field):
    return torch.tensor([b.neumann for b in field["nb"]])


def predicted_bases(field, net):
    F, mk = tg.pad_patches(
        [tg.patch_features(field["mesh"], b, H, field["logk"]) for b in field["nb"]]
    )
    return tg.predict_basis(net, F, mk, neumann_flags(field))


def ortho(field, phis, k=n_bf):
    return [tg.s_orthonormalize(p[:, :k], b.s) for p, b in zip(phis, field["nb"])]


# %%
errs_pred = np.zeros((len(seeds), *errs_exact.shape))
errs_hyb = np.zeros_like(errs_pred)
for i, s in enumerate(tqdm(seeds, desc="seeds")):
    for t, fdx in enumerate(test):
        pred = predicted_bases(fdx, nets[s])
        if i == 0:
            fdx["pred"] = pred
        for k in range(1, n_bf + 1):
            P = ortho(fdx, pred, k)
            errs_pred[i, t, k - 1] = tg.rel_errors(
                fdx["A"], fdx["M"], fdx["u"], gmsfem(fdx, P)[0]
            )
            errs_hyb[i, t, k - 1] = tg.rel_errors(
                fdx["A"], fdx["M"], fdx["u"], gmsfem(fdx, one_step(fdx, P))[0]
            )
ratio_pred = errs_pred[:, :, -1, 0].mean(1) / errs_exact[:, -1, 0].mean()
ratio_hyb = errs_hyb[:, :, -1, 0].mean(1) / errs_exact[:, -1, 0].mean()
print("mean relative energy error by N_bf:")
print("  exact basis        ", np.round(errs_exact[..., 0].mean(0), 4))
for i, s in enumerate(seeds):
    print(f"  network, seed {s}    ", np.round(errs_pred[i, ..., 0].mean(0), 4))
    print(f"  + one step, seed {s} ", np.round(errs_hyb[i, ..., 0].mean(0), 4))
print(
    "energy error ratio to the exact basis at N_bf:",
    np.round(ratio_pred, 3),
    "(network);",
    np.round(ratio_hyb, 3),
    "(hybrid)",
)
ratio_short = None  # the first seed's 4 000-step network (the default run only)
if not quick and ckpt_l is not ckpt_b:
    e_short = [energy_err(f, ortho(f, predicted_bases(f, net_short))) for f in test]
    ratio_short = float(np.mean(e_short) / errs_exact[:, -1, 0].mean())
    print(
        f"seed {seeds[0]}: energy error ratio after 4 000 steps {ratio_short:.3f}, "
        f"after 8 000 steps {ratio_pred[0]:.3f}"
    )


# %%
fig, ax = plt.subplots(1, 2, figsize=(9, 3.2))
ks = np.arange(1, n_bf + 1)
for j, name in enumerate(["energy", "L2"]):
    ax[j].semilogy(
        ks, errs_exact[..., j].mean(0), "ko-", label="exact basis (eigensolves)"
    )
    for i in range(len(seeds)):
        ax[j].semilogy(
            ks,
            errs_pred[i, ..., j].mean(0),
            "s--",
            color="C0",
            alpha=0.7,
            label="network" if i == 0 else None,
        )
        ax[j].semilogy(
            ks,
            errs_hyb[i, ..., j].mean(0),
            "^:",
            color="C1",
            alpha=0.7,
            label="network + one step (hybrid)" if i == 0 else None,
        )
    ax[j].set(
        xlabel="basis functions per neighbourhood",
        ylabel=f"relative {name} error",
        xticks=ks,
    )
ax[0].legend(fontsize=7)
plt.show()

# %% [markdown]
# **Diagnosis.** How much of the hybrid's accuracy comes from the network? Two controls on the same test fields:
# the correction applied to a **random** start (white noise, the constant kept on interior patches) instead of
# the prediction, and a **second** inverse-iteration step on the prediction. If the random start did as well, the
# network would be contributing nothing; if a second step closes the gap, the network's basis is a useful start
# that is simply not accurate enough for one step.

# %%
diag = {
    "random start + one step": [],
    "network + one step": [],
    "network + two steps": [],
}
for fdx in test:
    rnd = []
    for b in fdx["nb"]:
        r = np.random.default_rng(seed).standard_normal((len(b.s), n_bf))
        if b.neumann:
            r[:, 0] = 1.0
        rnd.append(r)
    P = ortho(fdx, fdx["pred"])
    diag["random start + one step"].append(
        energy_err(fdx, one_step(fdx, ortho(fdx, rnd)))
    )
    diag["network + one step"].append(energy_err(fdx, one_step(fdx, P)))
    diag["network + two steps"].append(energy_err(fdx, one_step(fdx, one_step(fdx, P))))
print(f"energy error at N_bf = {n_bf} (seed {seeds[0]} network), ÷ exact basis:")
for k, v in diag.items():
    print(
        f"  {k:26s} {np.mean(v):.4f}  ({np.mean(v) / errs_exact[:, -1, 0].mean():.2f}x)"
    )

# %% [markdown]
# ## 6. The pure neural solver baseline
#
# A pure neural solver maps the coefficient and the source straight to the solution. We use the standard neural
# operator for this problem (Darcy flow is the Fourier neural operator's benchmark), an **FNO** (`tg.FNO`: a 1 × 1
# lift to 32 channels, four Fourier layers $x \leftarrow \mathrm{GELU}(Kx + Wx)$ whose $K$ multiplies the lowest
# 12 × 12 frequencies by learned complex channel-mixing matrices, a 1 × 1 projection; the grid is zero-padded by
# 7 nodes because the domain is not periodic). The spectral weights are CP-factorised (rank 256, the TFNO of the
# neuraloperator library), which keeps the network small enough to store at three seeds (the dense FNO has over
# two million parameters). The choice came from probes on training pairs only (listed in `tg.checkpoint_config`):
# the previous round's U-Net could not fit 16 training pairs with $f = 1$ in 600 steps, while both FNOs fitted 8
# such pairs within a few hundred full-batch steps, the dense one faster. Whether the FNO fits all 2 000 pairs
# within our budget is measured below. Grid: the 65 × 65 nodes, input channels $(x, y, \log_{10}\kappa/4, f)$ at every node, output $u$ (scaled by a fixed
# constant), zero on the boundary. It is trained
# (`data/09_transolver_gmsfem/make_pure.py`, one job per seed, 3 seeds, stored as int8) on **2 000** fine
# solutions whose coefficients come from the training distribution and whose forcing **varies** ($1$ plus random
# low sine modes), so that a new forcing at test time is a real test of generalisation; every pair is seen under
# a random symmetry of the square (the PDE and the domain have all 8). Before looking at any out-of-distribution
# number we ask that it **fits its own distribution**: relative $L^2$ error at most 5 % on the chapter's test
# fields (the condition `pure_solver_fits`, section 11). The right panel is its relative $L^2$ error on 32
# held-out pairs during training. On the irregular mesh of section 8 a grid network needs a grid: it reads the
# same coefficient pixels and forcing on the 65 × 65 grid, and its answer is interpolated (bilinearly) to the
# mesh's nodes.

# %%
pure, cfg_p = {}, {}
for s in seeds:
    cfg_p[s] = scripts.with_seeds(tg.checkpoint_config(f"pure_s{seeds[0]}"), [s])
if quick:
    for s in seeds:
        tiny_p = dict(pairs=6, steps=30, batch=2, width=8, modes=4, rank=8)
        cfg_p[s].update(n_fine=n_fine, **tiny_p)
        X_p, Y_p = tg.grid_dataset(cfg_p[s], cfg_p[s]["pairs"])
        pure[s], _ = tg.train_pure(cfg_p[s], X_p, Y_p, s)
else:
    ckpt_p = {
        s: checkpoints.load(tg.CHECKPOINT_SLUG, f"pure_s{s}", config=cfg_p[s])
        for s in seeds
    }
    fig, ax = plt.subplots(1, 2, figsize=(10, 3.2))
    for s in seeds:
        net_p = tg.make_pure_net(cfg_p[s])
        pure[s] = ckpt_p[s].load_into(net_p, prefix=f"pure/{s}.")
        h = ckpt_p[s].manifest["history"]
        ax[0].plot(h["loss"]["step"], h["loss"]["value"], lw=0.8, label=f"seed {s}")
        ax[1].plot(*h["test_rel_l2"].values(), "o-", ms=3, label=f"seed {s}")
    ax[0].set(yscale="log", xlabel="step", title="training loss (relative squared)")
    ax[1].set(yscale="log", xlabel="step", title="held-out relative L2")
    ax[1].axhline(0.05, color="k", lw=0.8, ls="--")
    ax[0].legend(fontsize=7)
    plt.show()
    mp = {s: ckpt_p[s].manifest["metrics"] for s in seeds}
    print(
        f"{nets[seeds[0]].n_params:,}-parameter basis network vs a "
        f"{pure[seeds[0]].n_params:,}-parameter FNO; the "
        f"{cfg_p[seeds[0]]['pairs']:,} "
        "training solves took "
        f"{np.mean([v['data_seconds'] for v in mp.values()]):.0f} s, training "
        + ", ".join(f"{v['train_seconds'] / 60:.0f}" for v in mp.values())
        + " min per seed; held-out rel. L2 (int8 weights) "
        + ", ".join(f"{v['test_rel_l2_int8']:.4f}" for v in mp.values())
    )

# %%
grid = tg.structured_mesh(cfg_p[seeds[0]]["n_fine"])


@torch.no_grad()
def pure_predict(net, pix, f_kind="constant", f_seed=0, points=None):
    """The pure solver's u on the grid from the coefficient pixels and a forcing,
    interpolated to other points if given."""
    g = grid.with_kappa(pix)
    f = tg.forcing(g.points, f_kind, seed=f_seed)
    x = tg.grid_features(tg.pure_features(g, g.node_log_kappa(), f))[None]
    u = tg.pure_forward(net.eval(), x)[0].double().numpy() * tg.U_SCALE
    return u.ravel() if points is None else tg.grid_to_points(u, points)


pure_err = np.array(
    [
        [
            tg.rel_errors(
                fdx["A"], fdx["M"], fdx["u"], pure_predict(pure[s], pix, "constant")
            )
            for fdx, pix in zip(test, test_pix)
        ]
        for s in seeds
    ]
)
print(
    "pure FNO, in distribution (f = 1): mean relative energy / L2 error per "
    "seed",
    np.round(pure_err.mean(1), 4).tolist(),
)

# %% [markdown]
# Solutions and error maps on a test field: fine FEM (the reference), GMsFEM with the exact basis, Transolver-GMsFEM
# (seed 0 network, no correction) and the pure FNO.

# %%
fd = test[0]
sols = {
    "fine FEM": fd["u"],
    "GMsFEM (exact basis)": gmsfem(fd, first(fd["eig"], n_bf))[0],
    "Transolver-GMsFEM": gmsfem(fd, ortho(fd, fd["pred"]))[0],
    "pure FNO": pure_predict(pure[seeds[0]], test_pix[0]),
}
fig, ax = plt.subplots(2, 4, figsize=(12, 6))
vmax = fd["u"].max()
for j, (name, u) in enumerate(sols.items()):
    ax[0, j].imshow(
        u.reshape(n_fine + 1, -1),
        origin="lower",
        extent=(0, 1, 0, 1),
        vmin=0,
        vmax=vmax,
    )
    ax[0, j].set_title(name, fontsize=9)
    ax[1, j].imshow(
        np.abs(u - fd["u"]).reshape(n_fine + 1, -1),
        origin="lower",
        extent=(0, 1, 0, 1),
        cmap="magma",
        vmin=0,
        vmax=0.3 * vmax,
    )
    ax[1, j].set_title("|error|" if j else "log10 κ", fontsize=9)
    if j == 0:
        ax[1, 0].imshow(
            np.log10(tg.kappa_field(seed * 1000)),
            origin="lower",
            extent=(0, 1, 0, 1),
            cmap="cividis",
        )
for a in ax.ravel():
    a.grid(False)
    a.set_xticks([])
    a.set_yticks([])
plt.tight_layout()
plt.show()

# %% [markdown]
# ## 7. Basis-construction time against the best classical eigensolver, at matched accuracy
#
# A fair speed baseline is the fastest way a practitioner would get a basis **as good as the network's**, not the
# first eigensolver that comes to mind run to machine precision. We time, each on **one thread**, on the same
# patches, in the same run, after a warm-up, as the median of repeats, a family of classical solvers with the
# accuracy knobs a practitioner would turn:
#
# * dense LAPACK `evr` on the standard form with a subset of eigenvalues (section 2);
# * ARPACK in **shift-invert** mode (`scipy.sparse.linalg.eigsh(B, k, sigma=-σ)` with a tiny σ, one sparse LU
#   per patch), at machine precision with its default Krylov size, with the smallest Krylov size
#   ($2N_{bf}+1$ vectors), and with that size and a loose tolerance (`tol=1e-2`);
# * LOBPCG (`scipy.sparse.linalg.lobpcg`) from a random start with two real preconditioners for $A+\sigma S$:
#   an incomplete LU (`spilu`, drop tolerance 1e-4) run for 8 or 16 iterations, and the exact sparse LU (the
#   factorised shift operator) for 8. Its tolerance is an absolute residual, meaningless across contrasts, so the
#   iteration count is the knob.
#
# For each solver we measure the GMsFEM energy error its basis gives on the timing field for three forcings
# ($f = 1$, a sine, four Gaussian sources), and the network's and the hybrid's on the same field and forcings. The
# baseline for the network is then the **fastest classical solver whose error is no larger than the network's for
# every one of the three forcings** at that size, and likewise for the hybrid. We also count, per solver, the
# patches where it did not return the leading $N_{bf}$ eigenpairs (eigenvalues off by more than 1 % of
# $\lambda_{N_{bf}}$). The network side is one batched forward pass over all neighbourhoods (one torch
# thread), timed with everything it needs: building its input features and S-orthonormalising its output (the
# eigensolvers return S-orthonormal eigenvectors); the hybrid adds one sparse LU and solve per patch. The fine
# grid grows (17², 25², 33² nodes per patch) with the same 8 × 8 coarse grid; the network was trained at 17². At
# these sizes the *fine* solve itself takes a fraction of a second, so GMsFEM is not cheaper than solving the fine
# problem; the claim is about basis construction, which dominates in 3-D, multi-query and time-dependent settings
# where the basis is reused.


# %% tags=["hide-input"]
TIMING_FORCINGS = ("constant", "sine", "sources")


def errs_all(field, phis):
    """GMsFEM relative energy errors with the bases phis, one per forcing in
    TIMING_FORCINGS (field["rhs"] holds each forcing's load and fine solution)."""
    R = tg.multiscale_basis(field["mesh"], field["nb"], phis)
    A, M = field["A"], field["M"]
    out = [tg.rel_errors(A, M, u, tg.gmsfem_solve(A, b, R)[0]) for b, u in field["rhs"]]
    return np.array([e[0] for e in out])


def basis_err(field, eig):
    """errs_all with a classical solver's basis; inf where it is unusable."""
    bad = np.full(len(TIMING_FORCINGS), np.inf)
    if any(e is None for e in eig):
        return bad
    try:
        e = errs_all(field, ortho(field, first(eig, n_bf)))
    except (np.linalg.LinAlgError, ValueError):
        return bad
    return np.where(np.isfinite(e), e, np.inf)


def timing_field(n_f):
    """The timing field at n_f fine cells per side, with its three forcings' loads
    and fine solutions."""
    fld = setup_field(tg.kappa_field(seed * 1000), tg.structured_mesh(n_f))
    fld["u"] = tg.solve_fine(fld["mesh"], np.ones(fld["mesh"].n), fld["A"])
    fld["rhs"] = []
    for kind in TIMING_FORCINGS:
        f_t = tg.forcing(fld["mesh"].points, kind, seed=seed)
        fld["rhs"].append(
            (tg.load(fld["mesh"], f_t), tg.solve_fine(fld["mesh"], f_t, fld["A"]))
        )
    return fld


def timing_summary(fld, out, tm):
    """Each solver's CPU median, spread, error and missed pairs; the fastest solver at
    the exact basis's, the network's and the hybrid's accuracy; the ratios."""
    ref = out["LAPACK evr (dense)"]
    err = {k: basis_err(fld, out[k]) for k in solvers}
    t_cpu = {k: tm.median(k) for k in tm.cpu}
    err_exact, err_pred, err_hyb = (
        err["LAPACK evr (dense)"],
        errs_all(fld, out["network"]),
        errs_all(fld, out["hybrid"]),
    )
    b_full, b_net, b_hyb = (
        tg.fastest_at({k: t_cpu[k] for k in solvers}, err, e)
        for e in (err_exact, err_pred, err_hyb)
    )
    b_strict = tg.fastest_at(
        {k: t_cpu[k] for k in solvers}, err, err_pred, exclude="tol"
    )
    return dict(
        rows={
            k: dict(
                t=t_cpu[k],
                wall=tm.median(k, "wall"),
                spread=tm.spread(k),
                err=err[k],
                miss=tg.missed_pairs(out[k], ref, n_bf),
            )
            for k in solvers
        },
        network=t_cpu["network"],
        hybrid=t_cpu["hybrid"],
        fine_solve=t_cpu["fine solve"],
        spread_net=tm.spread("network"),
        spread_best=tm.spread(b_net),
        gap_arpack=max(
            np.abs(la - le).max() / le.max()
            for (la, _), (le, _) in zip(out["ARPACK shift-invert"], ref)
        ),
        best_full=b_full,
        best_net=b_net,
        best_hyb=b_hyb,
        best_strict=b_strict,
        t_best=t_cpu[b_net],
        t_best_hyb=t_cpu[b_hyb],
        speedup=tm.ratio(b_net, "network"),
        speedup_hybrid=tm.ratio(b_hyb, "hybrid"),
        speedup_full=tm.ratio(b_full, "network"),
        speedup_evr=tm.ratio("LAPACK evr (dense)", "network"),
        speedup_strict=tm.ratio(b_strict, "network"),
        speedup_wall=tm.ratio(b_net, "network", clock="wall"),
        err_exact=err_exact,
        err_pred=err_pred,
        err_hyb=err_hyb,
    )


# %% [markdown]
# Every side is timed in one `repro.benchmark` run: the rounds interleave the solvers, so load hits each alike;
# process CPU time is recorded beside wall time, and the claim compares CPU-time medians. Each solver's output
# (its basis) is computed once first, which also serves as the warm-up.

# %%
timing, net0 = {}, nets[seeds[0]]
# dense evr, ARPACK (3 settings), LOBPCG (3 settings)
solvers = tg.classical_solvers(n_bf)
threads = torch.get_num_threads()
torch.set_num_threads(1)
for n_f in tqdm(timing_sizes, desc="timing"):
    fld = timing_field(n_f)
    nbs, As = fld["nb"], fld["Asp"]
    fns = {
        name: (
            lambda solve=solve, As=As, nbs=nbs: [solve(A, b) for A, b in zip(As, nbs)]
        )
        for name, solve in solvers.items()
    }
    fns["network"] = lambda fld=fld: ortho(
        fld, predicted_bases(fld, net0)
    )  # features + S-orthonormalisation
    fns["hybrid"] = lambda fld=fld: one_step(
        fld, predicted_bases(fld, net0)
    )  # + a sparse LU per patch
    fns["fine solve"] = lambda fld=fld: tg.solve_fine(
        fld["mesh"], np.ones(fld["mesh"].n), fld["A"]
    )
    with threadpool_limits(1), warnings.catch_warnings():
        # LOBPCG at a fixed iteration count warns that it did not reach tol, and about
        # ill-conditioned Rayleigh-Ritz steps (the matching sees the error)
        warnings.simplefilter("ignore", UserWarning)
        warnings.simplefilter("ignore", LinAlgWarning)
        out = {k: fn() for k, fn in fns.items()}  # each side's result, and its warm-up
        tm = repro.benchmark(fns, repeats=timing_repeats, warmup=0)
    timing[len(nbs[40].nodes)] = timing_summary(fld, out, tm)
torch.set_num_threads(threads)

# %% tags=["hide-input"]
for size, t in timing.items():
    print(
        f"{size} nodes/patch: fine solve {t['fine_solve'] * 1e3:.0f} ms CPU; energy "
        "error "
        f"for f = {', '.join(TIMING_FORCINGS)}: exact {np.round(t['err_exact'], 3)}, "
        f"network {np.round(t['err_pred'], 3)}, hybrid {np.round(t['err_hyb'], 3)}"
    )
    for name, r in t["rows"].items():
        print(
            f"  {name:28s} {r['t'] * 1e3:8.1f} ms CPU (spread {r['spread']:.2f})   "
            "energy error "
            f"{np.round(r['err'], 3)}   not the leading {n_bf} eigenpairs in "
            f"{r['miss']} of {len(nbs)} patches"
        )
    print(
        f"  {'network':28s} {t['network'] * 1e3:8.1f} ms CPU (spread "
        f"{t['spread_net']:.2f})  -> vs "
        f"{t['best_net']}: {t['speedup']:.2f}x (wall {t['speedup_wall']:.2f}x)"
    )
    print(
        f"  {'hybrid (network + one step)':28s} {t['hybrid'] * 1e3:8.1f} ms CPU   -> "
        "vs "
        f"{t['best_hyb']}: {t['speedup_hybrid']:.2f}x"
    )
    print(
        f"  at the exact basis's error or better: fastest {t['best_full']}, network "
        f"{t['speedup_full']:.1f}x; vs dense evr {t['speedup_evr']:.1f}x; vs the "
        f"fastest converged solver at its accuracy ({t['best_strict']}) "
        f"{t['speedup_strict']:.2f}x"
    )

# %%
rec.check(
    "arpack_matches_evr",
    max(t["gap_arpack"] for t in timing.values()),
    1e-8,
    op="<=",
    note="relative eigenvalue gap",
)

sizes = list(timing)
fig, ax = plt.subplots(1, 2, figsize=(10, 3.6))
for j, name in enumerate(solvers):
    ax[0].plot(
        sizes,
        [timing[s]["rows"][name]["t"] for s in sizes],
        "os^vdP*"[j % 7] + (":" if "LOBPCG" in name else "-"),
        color=f"C{j}",
        lw=0.9,
        ms=4,
        label=name,
    )
for key, mk, c, lab in [
    ("network", "^-", "k", "network"),
    ("hybrid", "v--", "0.45", "network + one step"),
]:
    ax[0].plot(sizes, [timing[s][key] for s in sizes], mk, color=c, lw=2, label=lab)
ax[0].set(
    xlabel="fine nodes per interior patch",
    ylabel="seconds for all patches",
    yscale="log",
    xscale="log",
)
ax[0].legend(fontsize=6, ncol=2)
for key, mk, lab in [
    ("speedup", "^-", "network vs fastest at its accuracy"),
    ("speedup_hybrid", "v--", "hybrid vs fastest at its accuracy"),
    ("speedup_full", "^:", "network vs fastest at the exact basis's error"),
    ("speedup_evr", "x:", "network vs dense evr (the old baseline)"),
]:
    ax[1].plot(sizes, [timing[s][key] for s in sizes], mk, label=lab)
ax[1].axhline(1, color="k", lw=0.8)
ax[1].axhline(10, color="C3", lw=0.8, ls="--", label="claim bar (10x)")
ax[1].set(
    xlabel="fine nodes per interior patch",
    ylabel="speedup (classical ÷ network)",
    xscale="log",
    yscale="log",
)
ax[1].legend(fontsize=7)
plt.tight_layout()
plt.show()

# %% [markdown]
# ## 8. Out of distribution: Transolver-GMsFEM vs the pure solver
#
# Four shifts, none seen in training: a **higher contrast** (10⁵), a **new geometry** (curved and diagonal channels,
# more and larger inclusions), a **new forcing** (four Gaussian sources of both signs; the pure solver was trained
# on smooth forcings) and an **irregular mesh** (jittered nodes, Delaunay P1 triangles) with the training
# coefficients. The networks are used as trained; the Galerkin solve always uses the true κ and f. Errors are
# relative L2, per seed.

# %%
jmesh = tg.jittered_mesh(n_fine, 0.3, seed)
ood_sets = {
    "contrast 1e5": [
        dict(pix=tg.kappa_field(seed * 1000 + i, contrast=1e5))
        for i in range(n_test_fields)
    ],
    "new geometry": [
        dict(pix=tg.kappa_field(seed * 1000 + i, geometry="curved"))
        for i in range(n_test_fields)
    ],
    "new forcing": [
        dict(pix=tg.kappa_field(seed * 1000 + i), f="sources")
        for i in range(n_test_fields)
    ],
    "irregular mesh": [
        dict(pix=tg.kappa_field(seed * 1000 + i), mesh=jmesh)
        for i in range(n_test_fields)
    ],
}
ood = {}
for name, cases in tqdm(ood_sets.items(), desc="out-of-distribution sets"):
    e = {k: np.zeros((len(seeds), len(cases))) for k in ("network", "hybrid", "pure")}
    e_ex = []
    for j, case in enumerate(cases):
        fld = setup_field(case["pix"], case.get("mesh", mesh))
        kind = case.get("f", "constant")
        f = tg.forcing(fld["mesh"].points, kind, seed=seed + j)
        pts = fld["mesh"].points if fld["mesh"].kind == "p1" else None
        u = tg.solve_fine(fld["mesh"], f, fld["A"])
        err = lambda v, fld=fld, u=u: tg.rel_errors(fld["A"], fld["M"], u, v)[1]
        e_ex.append(err(gmsfem(fld, first(exact_bases(fld["nb"], n_bf), n_bf), f)[0]))
        for i, s in enumerate(seeds):
            P = ortho(fld, predicted_bases(fld, nets[s]))
            e["network"][i, j] = err(gmsfem(fld, P, f)[0])
            e["hybrid"][i, j] = err(gmsfem(fld, one_step(fld, P), f)[0])
            u_p = pure_predict(pure[s], case["pix"], kind, seed + j, pts)
            e["pure"][i, j] = err(u_p)
    ood[name] = {k: v.mean(1) for k, v in e.items()} | {"exact": float(np.mean(e_ex))}
    ood[name]["ratio"] = ood[name]["pure"] / ood[name]["network"]
    ood[name]["ratio_hyb"] = ood[name]["pure"] / ood[name]["hybrid"]
print(
    f"{'relative L2 error':16s} {'exact basis':>11s} {'network':>16s} {'hybrid':>16s} "
    f"{'pure FNO':>16s}   pure ÷ network per seed"
)
for name, r in ood.items():
    print(
        f"{name:16s} {r['exact']:11.4f} {r['network'].mean():9.4f} ± "
        f"{r['network'].std():.3f} {r['hybrid'].mean():9.4f} ± {r['hybrid'].std():.3f}"
        f" {r['pure'].mean():9.4f} ± {r['pure'].std():.3f}   "
        f"{np.round(r['ratio'], 1).tolist()}"
    )

# %% [markdown]
# ## 9. The time-dependent case
#
# $u_t - \nabla\cdot(\kappa\nabla u) = f$ with implicit Euler, $u(0) = 0$: the multiscale basis is built once and
# reused at every step, $(R^TMR + \Delta t\,A_0)c^{n+1} = R^TMRc^n + \Delta t\,R^Tb$.

# %%
fd = test[0]
inner = ~fd["mesh"].boundary
b = tg.load(fd["mesh"], ones)
dt, n_steps = 2e-3, (5 if quick else 25)
U_fine = tg.parabolic(fd["A"], fd["M"], b, np.zeros(mesh.n), dt, n_steps, inner=inner)
P0 = ortho(fd, fd["pred"])
bases = {
    "GMsFEM (exact basis)": first(fd["eig"], n_bf),
    "Transolver-GMsFEM": P0,
    "network + one step": one_step(fd, P0),
}
par = {}
for name, phis in bases.items():
    U = tg.parabolic(
        fd["A"],
        fd["M"],
        b,
        np.zeros(mesh.n),
        dt,
        n_steps,
        R=tg.multiscale_basis(fd["mesh"], fd["nb"], phis),
    )
    par[name] = [
        np.sqrt(
            (e := U_fine[t] - U[t]) @ fd["M"] @ e / (U_fine[t] @ fd["M"] @ U_fine[t])
        )
        for t in range(1, n_steps + 1)
    ]
fig, ax = plt.subplots(figsize=(6, 3.2))
tt = dt * np.arange(1, n_steps + 1)
for (name, v), mk in zip(par.items(), ["o-", "s--", "^:"]):
    ax.plot(tt, v, mk, ms=3, label=name)
ax.set(xlabel="time", ylabel="relative L2 error", yscale="log")
ax.legend()
plt.show()
print(
    f"relative L2 error at t = {tt[-1]:.3f}:",
    {k: round(float(v[-1]), 4) for k, v in par.items()},
)

# %% [markdown]
# ## 10. Interactive: the local eigenfunctions, exact and predicted
#
# The slider walks through neighbourhoods of the first test field: log κ, the exact eigenfunctions 2..N_bf and the
# predicted ones (seed 0 network) after the best alignment (the predicted subspace projected onto each exact
# function). Frames were computed when the notebook ran, so the slider works in the static page.


# %%
def aligned(pred, phi, s):
    """Each exact eigenfunction's S-projection onto the predicted span (what the
    mass-norm loss compares)."""
    Q = tg.s_orthonormalize(pred, s)
    return Q @ (Q.T @ (s[:, None] * phi))


def draw_patch(fig, i):
    fd, b = test[0], test[0]["nb"][i]
    phi = fd["eig"][i][1][:, :n_bf]
    pa = aligned(fd["pred"][i], phi, b.s)
    p = fd["mesh"].points[b.nodes]
    ax = fig.subplots(2, n_bf)
    ax[0, 0].scatter(p[:, 0], p[:, 1], c=fd["logk"][b.nodes], s=6, cmap="cividis")
    ax[0, 0].set_title("log10 κ", fontsize=8)
    ax[1, 0].axis("off")
    for k in range(1, n_bf):
        v = np.abs(phi[:, k]).max()
        ax[0, k].scatter(
            p[:, 0], p[:, 1], c=phi[:, k], s=6, cmap="RdBu", vmin=-v, vmax=v
        )
        ax[1, k].scatter(
            p[:, 0], p[:, 1], c=pa[:, k], s=6, cmap="RdBu", vmin=-v, vmax=v
        )
        ax[0, k].set_title(f"exact φ{k + 1}", fontsize=8)
        ax[1, k].set_title(f"predicted φ{k + 1}", fontsize=8)
    for a in ax.ravel():
        a.set_xticks([])
        a.set_yticks([])
        a.set_aspect("equal")
        a.grid(False)


picks = [
    i
    for i in range(len(test[0]["nb"]))
    if len(test[0]["nb"][i].nodes) == len(test[0]["nb"][40].nodes)
]
picks = picks[:: max(1, len(picks) // (4 if quick else 10))]
plotting.static_slider(
    picks, draw_patch, figsize=(2.2 * n_bf, 4.4), label="neighbourhood", fmt="{}"
)

# %% [markdown]
# Live (Jupyter or Colab): pick a field seed and the number of basis functions, and compare the bases on it.


# %%
def live(field_seed: int = 7, k: int = n_bf, geometry: str = "channels"):
    fld = setup_field(tg.kappa_field(int(field_seed), geometry=geometry))
    fld["u"] = tg.solve_fine(fld["mesh"], ones, fld["A"])
    P = ortho(fld, predicted_bases(fld, nets[seeds[0]]), k)
    print(
        "energy error: exact basis "
        f"{energy_err(fld, first(exact_bases(fld['nb'], k), k)):.4f},"
        f" network {energy_err(fld, P):.4f}, network + one step "
        f"{energy_err(fld, one_step(fld, P)):.4f}"
    )


plotting.live_controls(
    live, field_seed=(0, 100), k=(1, n_bf), geometry=["channels", "curved"]
)

# %% [markdown]
# ## 11. The claims record
#
# **Conditions**, fixed before the claims' numbers were read. Every claim rests on the basis network being
# trained to its plateau: `basis_plateau` reads the network's held-out test losses ($\sum\sin^2$ and the energy
# term, stored in the checkpoint) and asks that each fell by at most `FALL` (2%) of its value over the last 20% of
# the training steps (`tg.relative_fall`, the worse of the two curves per seed). A network whose test curves are
# still falling is not the network the paper describes. The out-of-distribution comparison also needs a pure
# solver that works where it was trained: `pure_solver_fits`, its in-distribution relative L2 error at most
# `FITS_L2` (a strawman that fails in distribution says nothing about robustness). The timing claim times one
# network, the first seed's, so it rests on that network's plateau (`timed_basis_plateau`), and it needs the
# timing noise to be smaller than the distance to its decision line: `timing_spread`, the larger spread
# (IQR/median of CPU time) of the two sides compared, divided by |ratio − bar|, below 1 (a speedup far from the
# bar is decided even by noisy timings).


# %%
def basis_curves(s):
    """Held-out (steps, values) of Σsin² and of the energy term for seed s's network
    (its checkpoint, or the live tiny run)."""
    if quick:
        ev = hists_b[s].evals
        return [tuple(zip(*ev[k])) for k in ("test_sal", "test_energy")]
    h = (ckpt_l if s == seeds[0] else ckpt_b).manifest["history"]
    return [tuple(h[f"{k}/{s}"].values()) for k in ("test_sal", "test_energy")]


def basis_fall(s):
    return max(tg.relative_fall(st, v) for st, v in basis_curves(s))


FALL, FITS_L2 = 0.02, 0.05  # the plateau rule; a pure solver that fits its own data
SPEEDUP_BAR = 10.0  # the claim's bar (paper: an order of magnitude)
RATIO_BAR = 2.0  # "significantly": the pure solver's error at least twice the method's
big = max(timing)
tb = timing[big]
pure_in = pure_err[:, :, 1].mean(1)  # in-distribution relative L2 error per seed
net_in = errs_pred[:, :, -1, 1].mean(1)
hyb_in = errs_hyb[:, :, -1, 1].mean(1)
FALL_UNIT = "relative fall of the held-out loss over the last 20% of steps, worse curve"
rec.condition(
    "basis_plateau",
    [basis_fall(s) for s in seeds],
    "<=",
    FALL,
    unit=FALL_UNIT,
    statement="the basis network's held-out losses are flat at the end of training",
)
rec.condition(
    "pure_solver_fits",
    pure_in.tolist(),
    "<=",
    FITS_L2,
    unit="relative L2, in distribution",
    statement="the pure neural solver works in distribution",
)
rec.condition(
    "timed_basis_plateau",
    basis_fall(seeds[0]),
    "<=",
    FALL,
    unit=FALL_UNIT,
    statement="the network that is timed (the first seed's) is trained to its plateau",
)
rec.condition(
    "timing_spread",
    max(tb["spread_net"], tb["spread_best"])
    / max(abs(tb["speedup"] - SPEEDUP_BAR), 1e-12),
    "<",
    1.0,
    unit="max spread (IQR/median, CPU) / |ratio − bar|",
    statement="the timing noise of the network and of its matched solver is smaller "
    "than the distance "
    f"of the speedup from the claim's bar, at {big} nodes/patch",
)

# %% tags=["hide-input"]
# What each claim says, the paper's words, and the numbers printed beside its
# verdict (notes).
loose = next(k for k in solvers if "tol" in k)
ex_mean = float(errs_exact[:, -1, 0].mean())
# the raw error ratio pure ÷ network on each shift (per seed); the growth of each
# model's error over its own in-distribution error is reported beside it
ood_counts = [
    int(sum(v["ratio"][i] >= RATIO_BAR for v in ood.values()))
    for i in range(len(seeds))
]
degr = {k: (v["pure"] / pure_in) / (v["network"] / net_in) for k, v in ood.items()}
irr = ood["irregular mesh"]
TEXT = {
    "learned_basis_accuracy": (
        "Predicted-basis energy error ÷ exact-basis energy error, in distribution, "
        f"N_bf = {n_bf} (per seed)",
        "close to 1 (GMsFEM-NO: small loss of accuracy)",
        f"exact {ex_mean:.4f}; predicted per seed "
        f"{np.round(errs_pred[:, :, -1, 0].mean(1), 4).tolist()}; "
        f"a {nets[seeds[0]].n_params:,}-parameter network per seed",
    ),
    "hybrid_accuracy": (
        "Network + one inverse-iteration step (our hybrid): energy error ÷ "
        f"exact-basis energy error, N_bf = {n_bf}",
        "(not in the paper; issue #35's bar)",
        f"hybrid per seed {np.round(errs_hyb[:, :, -1, 0].mean(1), 4).tolist()}",
    ),
    "basis_speedup_vs_best": (
        "Basis construction: the fastest classical eigensolver at the network's "
        "accuracy ÷ batched network, at "
        f"{big} nodes/patch (CPU-time medians)",
        "> 100x",
        f"one thread each, {timing_repeats} interleaved rounds after a warm-up "
        "(repro.benchmark); fastest "
        "classical with energy error <= the network's for f = "
        f"{', '.join(TIMING_FORCINGS)} "
        f"({np.round(tb['err_pred'], 3).tolist()}): {tb['best_net']} "
        f"{tb['t_best'] * 1e3:.1f} ms CPU, network "
        f"{tb['network'] * 1e3:.1f} ms (spreads {tb['spread_best']:.2f}, "
        f"{tb['spread_net']:.2f}; wall ratio "
        f"{tb['speedup_wall']:.2f}x); hybrid {tb['hybrid'] * 1e3:.1f} ms vs "
        f"{tb['best_hyb']} "
        f"{tb['t_best_hyb'] * 1e3:.1f} ms = {tb['speedup_hybrid']:.2f}x; at the exact "
        "basis's error "
        f"({tb['best_full']}) {tb['speedup_full']:.1f}x, vs dense evr "
        f"{tb['speedup_evr']:.1f}x; vs the fastest "
        f"converged eigensolver at the network's accuracy ({tb['best_strict']}) "
        f"{tb['speedup_strict']:.2f}x. The "
        "loose ARPACK misses a copy of a double eigenvalue in "
        f"{tb['rows'][loose]['miss']} of {len(nbs)} patches. Per "
        "size: " + ", ".join(f"{s}: {t['speedup']:.2f}x" for s, t in timing.items()),
    ),
    "ood_vs_pure_solver": (
        "Out of distribution the pure FNO's relative L2 error is at least "
        f"{RATIO_BAR:g}x Transolver-GMsFEM's (the network's basis, no correction) "
        "on at "
        "least 3 of the 4 shifts (count per seed)",
        "pure neural solvers fail dramatically",
        "baseline = the pure solver's in-distribution relative L2 error per seed "
        f"(the network's: {np.round(net_in, 4).tolist()}, ratio "
        f"{np.round(pure_in / net_in, 1).tolist()}). Pure ÷ network per seed: "
        + "; ".join(f"{k} {np.round(v['ratio'], 1).tolist()}" for k, v in ood.items())
        + ". Pure ÷ hybrid: "
        + "; ".join(
            f"{k} {np.round(v['ratio_hyb'], 1).tolist()}" for k, v in ood.items()
        )
        + ". Error growth over in-distribution, pure ÷ network's: "
        + "; ".join(f"{k} {np.round(v, 2).tolist()}" for k, v in degr.items()),
    ),
    "irregular_mesh": (
        "Transolver-GMsFEM on a jittered P1 Delaunay mesh (network trained on the Q1 "
        "grid) is within 1.5x of "
        "GMsFEM with the exact basis (per seed)",
        "works on irregular grids",
        f"network {np.round(irr['network'], 4).tolist()}, hybrid "
        f"{np.round(irr['hybrid'], 4).tolist()}, exact "
        f"basis {irr['exact']:.4f}, pure {np.round(irr['pure'], 4).tolist()}",
    ),
}

# %%
BASIS = ("basis_plateau",)
# fmt: off
CLAIMS = [  # id, measured (per seed, or once), op, target, unit, baseline, conditions
    ("learned_basis_accuracy", ratio_pred.tolist(), "<=", 1.5, "ratio", ex_mean, BASIS),
    ("hybrid_accuracy", ratio_hyb.tolist(), "<=", 1.1, "ratio", ex_mean, BASIS),
    ("basis_speedup_vs_best", tb["speedup"], ">=", SPEEDUP_BAR, "x (CPU-time medians)",
     tb["t_best"], ("timed_basis_plateau", "timing_spread")),
    ("ood_vs_pure_solver", [float(c) for c in ood_counts], ">=", 3, "shifts of 4",
     pure_in.tolist(), BASIS + ("pure_solver_fits",)),
    ("irregular_mesh", (irr["network"] / irr["exact"]).tolist(), "<=", 1.5,
     "relative L2 error, network ÷ exact basis", irr["exact"], BASIS),
]
# fmt: on
for cid, measured, op, target, unit, baseline, given in CLAIMS:
    statement, paper, note = TEXT[cid]
    rec.claim(cid, statement, paper=paper, measured=measured, op=op, target=target,
              unit=unit, baseline=baseline, note=note, given=given)  # fmt: skip
cross = [size for size, t in timing.items() if t["speedup"] >= 1]
CROSS = ("crossover_size", "The network is at least as fast as the fastest classical "
         "solver at its accuracy from some patch size of the sweep on, and stays "
         "ahead")
if cross:  # a claim only where the sweep has a crossover: the network stays ahead
    rec.claim(*CROSS, paper="speedup grows with the size of the local problems",
              measured=min(t["speedup"] for z, t in timing.items() if z >= min(cross)),
              op=">=", target=1.0, unit="x, smallest speedup from the crossover on",
              baseline=float(min(cross)), note=f"crossover at {min(cross)} nodes/patch",
              given=("timed_basis_plateau",))
else:
    rec.untested(*CROSS, paper="speedup grows with the size of the local problems",
                 reason="no crossover within the sweep: speedups " + ", ".join(
                     f"{z}: {t['speedup']:.2f}x" for z, t in timing.items()))
rec.save()
verdict = {c.id: c.verdict for c in rec.claims}
cond = {c.id: c for c in rec.conditions}

# %% [markdown]
# ## 12. Reading the results, and known limits


# %% tags=["remove-input"]
def cond_line(cid):
    c = cond[cid]
    vals = ", ".join(f"{v:.3g}" for v in np.atleast_1d(c.measured))
    return f"`{cid}` {c.verdict} ({vals}, rule {c.op} {c.target:g})"


sw = sens["white noise"]
fast_everywhere = all(t["speedup"] < 1 for t in timing.values())
fall0 = cond["basis_plateau"].measured
fall0 = fall0[0] if isinstance(fall0, list) else fall0
if ratio_short is None:
    long_line = "(The longer training of the first seed is not loaded in this run.)"
else:
    long_line = (
        f"Doubling the first seed's training (4 000 to 8 000 steps) moved its "
        f"energy-error ratio from {ratio_short:.2f} to {ratio_pred[0]:.2f}; over the "
        "last "
        f"fifth of the long run its held-out losses still fell by {fall0:.1%}."
    )
if quick:
    pure_line = "(quick mode: tiny FNOs trained live.)"
else:
    pure_fall = [
        tg.relative_fall(*ckpt_p[s].manifest["history"]["test_rel_l2"].values())
        for s in seeds
    ]
    still, c0 = max(pure_fall) > FALL, cfg_p[seeds[0]]
    pure_line = (
        f"The FNO saw the {c0['pairs']:,} solutions "
        f"{c0['steps'] * c0['batch'] // c0['pairs']} times each; its held-out error "
        + ("was still falling when the schedule ended" if still else "had levelled off")
        + " (it fell by "
        + ", ".join(f"{v:.0%}" for v in pure_fall)
        + " over the last fifth of training, per seed)"
        + (
            ": more compute would lower it; how far, this run cannot say."
            if still
            else "."
        )
        + " Its relative L2 error on its first 64 training pairs was "
        + ", ".join(f"{mp[s]['train_rel_l2']:.3f}" for s in seeds)
        + " and on 16 validation fields with $f = 1$ (int8 weights) "
        + ", ".join(f"{mp[s]['val_f1_rel_l2_int8']:.3f}" for s in seeds)
        + " per seed: "
        + (
            "it does not fit its own training data, so the gap is one of fit, "
            "not of generalisation."
            if min(mp[s]["train_rel_l2"] for s in seeds) > FITS_L2
            else "the training pairs are fitted within the bar."
        )
    )
long_limit = (
    "The basis networks keep their 4 000-step schedule: no longer run is loaded."
    if ratio_short is None
    else "Only the first seed's basis network was trained longer; the other two keep "
    "the 4 000-step schedule."
)
cross_line = (
    f"The network catches up at {min(cross)} nodes/patch."
    if cross
    else "No crossover lies within the sweep (`crossover_size` untested)."
)
display(
    Markdown(f"""
* **Is the network trained to its regime?** {cond_line("basis_plateau")}. {long_line}
  Where the held-out curves were still falling at the end of the schedule, every claim
  that rests on the network is inconclusive at that seed: more training might close
  the gap, and this run cannot say. The pure solver: {cond_line("pure_solver_fits")};
  the timing: {cond_line("timing_spread")}.
* **Accuracy.** Section 3 is the main finding: in high contrast a basis can be within a
  tiny mass-norm angle of the exact one and still give a several-times larger energy
  error ({eps_grid[i5]:.0%} white noise, $\\sum\\sin^2\\theta = {sw[i5, 0]:.3f}$,
  raises the error from {errs_exact[0, -1, 0]:.3f} to {sw[i5, 1]:.3f}), because what
  matters is *which* eigenvectors contaminate it. The network's held-out
  $\\sum\\sin^2$ is {", ".join(f"{losses[s][0]:.3f}" for s in seeds)} per seed, and
  its energy-error ratio to the exact basis {", ".join(f"{r:.2f}" for r in ratio_pred)}
  (`learned_basis_accuracy` {verdict["learned_basis_accuracy"]}, bar 1.5). With **one**
  inverse-iteration step the hybrid reaches {", ".join(f"{r:.2f}" for r in ratio_hyb)}
  times the exact error (`hybrid_accuracy` {verdict["hybrid_accuracy"]}, bar 1.1). That
  bar is measured for $f = 1$; on section 7's timing field with four point sources the
  hybrid's energy error is {tb["err_hyb"][2]:.3f} against the exact basis's
  {tb["err_exact"][2]:.3f} at {big} nodes. Section 5's controls: the same step on a
  random start gives {np.mean(diag["random start + one step"]) / ex_mean:.2f}x, on the
  prediction {np.mean(diag["network + one step"]) / ex_mean:.2f}x, a second step
  {np.mean(diag["network + two steps"]) / ex_mean:.2f}x.
* **Speed.** CPU-time medians of interleaved rounds, one thread per side. Dense LAPACK
  takes {", ".join(f"{t['speedup_evr']:.1f}x" for t in timing.values())} the network's
  time at {", ".join(map(str, timing))} nodes/patch, but that is not the classical
  solver a practitioner would use. The fastest classical setting at the network's
  accuracy ({"; ".join(dict.fromkeys(t["best_net"] for t in timing.values()))}) takes
  {", ".join(f"{t['speedup']:.2f}x" for t in timing.values())} the network's time
  ({"slower at every size" if fast_everywhere else "faster at some size"};
  `basis_speedup_vs_best` {verdict["basis_speedup_vs_best"]}). {cross_line} The loose
  ARPACK setting misses a copy of a double eigenvalue in {tb["rows"][loose]["miss"]} of
  {len(nbs)} patches at {big} nodes (the channel-free patches, where the square's
  symmetry makes $\\lambda_2 = \\lambda_3$): its span is then not the leading
  eigenspace, which is why the matching uses three forcings. The paper's > 100x is a
  GPU-batched network against (as far as we can tell) a dense eigensolver; we cannot
  test a GPU here, and we do not extrapolate.
* **Out of distribution.** In distribution the pure FNO's relative L2 error is
  {", ".join(f"{v:.3f}" for v in pure_in)} per seed against
  {", ".join(f"{v:.3f}" for v in net_in)} for Transolver-GMsFEM (ratio
  {", ".join(f"{v:.1f}" for v in pure_in / net_in)}). Out of distribution the ratio is
  {"; ".join(f"{k} {np.mean(v['ratio']):.1f}" for k, v in ood.items())} (seed means):
  at least {RATIO_BAR:g}x on {", ".join(map(str, ood_counts))} of 4 shifts per seed
  (`ood_vs_pure_solver` {verdict["ood_vs_pure_solver"]}). On the irregular mesh the
  FNO answers on its grid, so that shift changes only the points it is read at. The
  uncorrected network's error on the irregular mesh is
  {", ".join(f"{v:.1f}" for v in irr["network"] / irr["exact"])}x the exact basis's
  (`irregular_mesh` {verdict["irregular_mesh"]}), the hybrid's
  {", ".join(f"{v:.2f}" for v in irr["hybrid"] / irr["exact"])}x.

**Known limits.** All networks are small and CPU-trained (the basis network
{nets[seeds[0]].n_params:,} parameters, the FNO {pure[seeds[0]].n_params:,}).
{pure_line} {long_limit} The width/locality ablation, the small-network speed-accuracy frontier and
3-D patches asked for in issue #67 are not done. A retraining recipe for every seed
(basis network and FNO, warmup-stable-decay, its conditions registered before
training) is in `data/09_transolver_gmsfem/make_wsd.py`; its models are not trained
yet, and nothing above reads it. The matched classical baseline is
chosen by the GMsFEM error on one field (three forcings), from a fixed menu of seven
solver settings; LOBPCG is driven by its iteration count and breaks down now and then,
which the matching catches as a larger error. The network was trained at 289 nodes per
patch and is applied unchanged to the larger patches.
""")
)
