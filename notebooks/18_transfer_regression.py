# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Transfer from many overparameterized pretrained models, and undoing their shrinkage
#
# Suppose you must fit a linear regression from few target samples, but many related **pretrained** least-squares
# models are available. A natural learner fits the target data while staying close to the pretrained models:
# minimise `‖y − Xb‖² + λ Σⱼ ‖b − c·θⱼ‖²`. The paper works out the test error of this learner exactly and asks
# when more pretrained models help. The twist: if each pretrained model was **overparameterized** (fewer source
# samples than parameters), its minimum-norm solution lives in the small subspace spanned by its own training
# inputs, so on average it is the true parameter *shrunk* by `ρ = n_s/d`. Averaging many of them removes their
# noise but not this shrinkage, so the benefit saturates; a **multiplicative correction** `c` undoes it and lets
# more models keep helping.
#
# The questions this chapter measures, each against **ridge regression on the target data tuned to its best
# penalty** (the strongest learner that ignores the pretrained models): how many pretrained models are needed
# before transfer pays off, with and without the correction; does the uncorrected error stop improving; how much
# does the correction gain; and can the factor be estimated from the target data alone. Then two steps beyond
# the isotropic model the closed form needs: a **power-law feature spectrum**, where the shrinkage depends on the
# direction and one scalar `c` cannot undo it, and **heterogeneous pools** of over- and underparameterized
# sources with different mismatch, each with its own penalty `λⱼ` and factor `cⱼ`.
#
# | | the paper | this notebook |
# |---|---|---|
# | setting | linear regression, Gaussian data, several min-norm pretrained models | the same, `d = 100` parameters, `n = 40` target samples |
# | pretrained models | over- or underparameterized | `n_s = 25` (`ρ = 0.25`) and `n_s = 200` source samples, up to `m = 64` models; a pool of four source groups, 16 models |
# | features | Gaussian | isotropic; and a power-law spectrum `k^(−α)`, `α = 1` (Monte Carlo only) |
# | evaluation | analytic test error + empirical evaluation | our closed-form error next to 1,000 Monte Carlo trials per point, 3 seeds for every claim |
# | penalty `λ` | analytic optimum | the limit `λ → 0`, a fixed `λ`, the numerical optimum of our closed form, and leave-one-out cross-validation on the target data |
# | baseline | target data only | ridge on the target data at its Bayes-optimal penalty (oracle-tuned; stronger than any tuning from data) and tuned by leave-one-out |
# | hardware | not stated | 2 CPU cores, a few minutes |
#
# :::{note}
# **What is ours.** Only the paper's abstract is public. The data model (isotropic Gaussian inputs, sources
# `βⱼ = β + δⱼ` with mismatch `τ`), the **test-error expression** below, the optimal factor `c*`, the full
# correction `1/ρ` and the **data-driven factor** `ĉ` estimated from the target data are our derivation and
# proposal from the abstract's setup; the paper's formulas, regimes and numbers may differ; so is the
# Marchenko–Pastur form of the error and the cross-validated tuning; so are the power-law spectrum with its
# per-direction correction and the optimal per-model penalties and factors of a heterogeneous pool, and their
# estimate from the pool itself. The learner
# itself (least squares with a penalty on the distance to the scaled pretrained models) is the abstract's.
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
d = 100  # parameters
n = 40  # target samples (n < d: the target problem alone is underdetermined)
# samples per source when the pretrained models are overparameterized (rho = n_s / d)
n_s_over = 25
n_s_under = 200  # samples per source when they are underparameterized
tau = 0.5  # task mismatch between each source and the target
sigma = 0.5  # target noise
sigma_s = 0.5  # source noise
ms = [
    1,
    2,
    3,
    4,
    5,
    6,
    7,
    8,
    10,
    12,
    16,
    24,
    32,
    48,
    64,
]  # numbers of pretrained models
lam = 1.0  # the penalty weight per pretrained model, besides the limit lam -> 0
trials = 1000  # Monte Carlo trials per point
n_seeds = 3  # Monte Carlo repetitions (seed, seed + 1, ...) behind every claim
contour_taus = [0.5, 1.0, 2.0, 3.0]  # mismatches of the models-needed contour grid
alpha = 1.0  # power-law exponent of the feature variances k^(-alpha) (section 7)
aniso_ms = [4, 16, 64]  # numbers of pretrained models under the power-law spectrum
pool_size = 4  # pretrained models per source group of the mixed pool (section 8)

# %% tags=["hide-input"]
import time

import matplotlib.pyplot as plt
import numpy as np

from helpers import claims, plotting, repro
from helpers import transfer_regression as tr

if quick:
    d, n, n_s_over, n_s_under, trials, n_seeds = 60, 24, 15, 120, 300, 1
    ms = [1, 2, 3, 4, 6, 8, 16]
    aniso_ms = [4, 16]
seeds = [seed + k for k in range(n_seeds)]
cv_Ls = np.logspace(
    -2, 4, 49
)  # the grid of total penalties L that cross-validation picks from
t_start = time.perf_counter()

env = repro.setup(seed)
plotting.use_style()
rec = claims.ClaimsRecord(
    "18_transfer_regression",
    dict(
        quick=quick,
        seed=seed,
        seeds=seeds,
        d=d,
        n=n,
        n_s_over=n_s_over,
        n_s_under=n_s_under,
        tau=tau,
        sigma=sigma,
        sigma_s=sigma_s,
        ms=ms,
        lam=lam,
        trials=trials,
    ),
)
over = tr.Setting(d=d, n=n, n_s=n_s_over, sigma=sigma, sigma_s=sigma_s, tau=tau)
under = over.with_(n_s=n_s_under)
print(env)
print(
    f"overparameterized sources: rho = {over.rho:.2f}; underparameterized "
    f"sources: n_s = {n_s_under} > d = {d}; Monte Carlo seeds {seeds}"
)

# %% [markdown]
# ## 1. The pretrained models and the target learner
#
# Source `j` has its own parameter `βⱼ = β + δⱼ` (`‖δⱼ‖ ≈ τ`), `n_s` Gaussian inputs and noisy outputs; its
# pretrained model is the minimum-norm least-squares fit `θⱼ = Xⱼ⁺ yⱼ`. When `n_s < d`, `θⱼ = Pⱼβⱼ + Xⱼ⁺εⱼ` with
# `Pⱼ` the projection onto the `n_s`-dimensional row space of `Xⱼ`, and `E[Pⱼ] = ρI`: the shrinkage.
#
# With a weight `λⱼ` per model, `Σⱼ λⱼ‖b − cθⱼ‖² = L‖b − cθ_w‖² + const` with `L = Σⱼ λⱼ` and `θ_w` the
# `λ`-weighted average, so the learner has the closed form
#
# ```
# β̂ = (XᵀX + L I)⁻¹ (Xᵀy + L c θ_w)          L → 0:  β̂ = cθ_w + X⁺(y − X cθ_w)
# ```
#
# (the interpolator of the target data closest to `cθ_w`). Equal weights `λ` give `L = λm` and the plain average
# `θ̄`; the **anchor** `a = 0` gives ridge regression on the target data alone, our baseline. We check the closed
# form against brute-force least squares on the stacked system
# `[X; √λ₁ I; …; √λ_m I] b ≈ [y; √λ₁ cθ₁; …; √λ_m cθ_m]`.

# %%
rng = repro.rng(seed, 1)
beta = rng.normal(size=d)
beta /= np.linalg.norm(beta)
thetas = tr.pretrain(beta, 8, over, rng)
X = rng.normal(size=(n, d))
y = X @ beta + rng.normal(0, sigma, n)
closed_err = 0.0
weight_sets = [0.1, 1.0, 10.0, rng.uniform(0.1, 5.0, 8)]  # equal and per-model weights
for lam_ in weight_sets:
    for c in [1.0, 1 / over.rho]:
        for m in [1, 8]:
            w = lam_ if np.ndim(lam_) == 0 else lam_[:m]
            fast = tr.transfer_fit(X, y, thetas[:m], w, c)
            slow = tr.transfer_fit_stacked(X, y, thetas[:m], w, c)
            closed_err = max(closed_err, float(np.abs(fast - slow).max()))
Xs = rng.normal(size=(4, n_s_over, d))
ys = rng.normal(size=(4, n_s_over))
slow = np.array([tr.min_norm_lstsq(a, b) for a, b in zip(Xs, ys)])
closed_err = max(closed_err, float(np.abs(tr.batched_min_norm(Xs, ys) - slow).max()))
b0 = tr.transfer_fit(X, y, thetas, 0.0, 1.0)
interp_err = float(np.abs(X @ b0 - y).max())
print(
    f"closed form vs stacked least squares: max |diff| = {closed_err:.1e}; "
    f"lam -> 0 solution interpolates: max |X b - y| = {interp_err:.1e}"
)
proj = thetas @ beta  # <theta_j, beta> with ||beta|| = 1
print(
    f"shrinkage: <theta_j, beta> / ||beta||^2 over {len(proj)} models averages "
    f"{proj.mean():.3f} ± {proj.std(ddof=1) / np.sqrt(len(proj)):.3f} (rho = "
    f"{over.rho:.3f})"
)

# %% [markdown]
# ## 2. The test error in closed form (our derivation)
#
# With `B = ‖β‖²`, the anchor's error `D = E‖cθ̄ − β‖²` splits into a **bias** that averaging cannot remove and a
# **variance** that falls like `1/m`:
#
# ```
# D(c, m) = (cρ − 1)² B + c² V / m
# V = ρ(1−ρ)B + ρτ² + σ_s² n_s/(d − n_s − 1)       (overparameterized sources, n_s < d − 1)
# V = τ² + σ_s² d/(n_s − d − 1),  ρ = 1             (underparameterized sources, n_s > d + 1)
# ```
#
# The target learner then has test error (exact as `L → 0`, with `n < d − 1`)
#
# ```
# E = σ² + (1 − n/d) D + σ² n/(d − n − 1)
# ```
#
# and for `L > 0`, with `sᵢ` the eigenvalues of `XᵀX`, `E = σ² + E_X[σ² Σᵢ sᵢ/(sᵢ+L)² + L² (D/d) Σᵢ 1/(sᵢ+L)²]`.
# We evaluate the expectation over `X` two ways: averaging over random designs, and in closed form from the
# Marchenko–Pastur limit of the spectrum (no sampling; exact as `n, d → ∞`).
#
# **One consequence decides the comparison with ridge.** Because `X` is rotation invariant, the error depends on
# the anchor only through `D`, and it increases with `D` at every `L`. Ridge is the anchor `a = 0`, i.e. `D = B`.
# So the transfer learner beats ridge, both at their best `L`, **exactly when `D(c, m) < B`**. With `c = 1` this
# needs `m > V / (ρ(2 − ρ)B)` models. Minimising `D` over `c`:
#
# ```
# c* = ρB / (ρ²B + V/m)   →  1/ρ  as m → ∞;    D(c*) → 0,   but   D(1) → (1 − ρ)² B
# ```
#
# So with `c = 1` the error of overparameterized sources is stuck at a floor set by the shrinkage, however many
# models we average; `c = 1/ρ` removes the bias but multiplies the variance by `1/ρ²` (bad for small `m`); `c*`
# balances both and, since `D(c*) < B` for every `m`, beats ridge from the first model **by construction** (a
# check below, not a claim). `c*` needs `B`, `τ` and `σ_s`, which a practitioner does not know; the data-driven
# `ĉ = ⟨Xθ̄, y⟩ / ‖Xθ̄‖²` is the least-squares fit of the scalar on the target data, which estimates `c*`.
#
# The cell computes the analytic errors at `λ → 0`, at the fixed `λ`, and at the `L` that minimises the closed
# form (found numerically), and compares the two evaluations of the expectation.

# %%
rules = ["1", "1/rho", "c*"]


def factor(rule: str, m: int, s: tr.Setting) -> float:
    return {"1": 1.0, "1/rho": 1 / s.rho, "c*": tr.c_star(m, s)}[rule]


eig = {s.n_s: tr.target_eigenvalues(s, 4000, seed) for s in (over, under)}
analytic = {
    (s.n_s, r, m, l_): tr.test_error(s, m, factor(r, m, s), l_, eigs=eig[s.n_s])
    for s in (over, under)
    for r in rules
    for m in ms
    for l_ in (0.0, lam)
}
# at the best penalty (numerical minimum of the closed form, Marchenko-Pastur)
best = {
    (s.n_s, r, m): tr.optimal_L(s, tr.bias_D(factor(r, m, s), m, s))
    for s in (over, under)
    for r in rules
    for m in ms
}
target_only = tr.test_error_target_only(over)  # min-norm least squares, L -> 0
L_ridge, ridge_best = tr.optimal_L(over, over.B, eigs=eig[over.n_s])
ridge_oracle = tr.ridge_error(over, over.sigma**2 * d / over.B, eigs=eig[over.n_s])
mp_dev = max(
    abs(tr.test_error_mp(over, D, L) - tr.test_error_D(over, D, L, eigs=eig[over.n_s]))
    / tr.test_error_D(over, D, L, eigs=eig[over.n_s])
    for D in (0.1, 0.5, 1.0, 3.0)
    for L in (0.3, 3.0, 30.0, 300.0)
)
for s in (over, under):
    rho, V = tr.source_moments(s)
    print(
        f"n_s={s.n_s}: rho={rho:.2f}, V={V:.3f}; c* by m: "
        + ", ".join(f"{m}: {tr.c_star(m, s):.2f}" for m in ms[:: max(1, len(ms) // 6)])
    )
print(f"target data only, min-norm (L -> 0): {target_only:.4f}")
print(
    f"target data only, ridge at its best L = {L_ridge:.2f} (numerical minimum; "
    f"sigma^2 d / B = {over.sigma**2 * d / over.B:.2f}): {ridge_best:.4f}"
)
print(f"Marchenko-Pastur vs eigenvalue average: largest relative gap {mp_dev:.2%}")

# %% [markdown]
# ## 3. Monte Carlo, side by side
#
# Every trial draws a fresh `β`, `max(m)` source tasks with their pretrained models, and target data; the curves
# over `m` use the first `m` models of the same draw, so differences between factors are paired. The error of
# each estimate is exact given it: `σ² + ‖β̂ − β‖²`. Besides `λ → 0` and the fixed `λ`, each learner is
# **tuned on the target data by leave-one-out cross-validation** (closed form, over a grid of `L`), which a
# practitioner can do; ridge is run the same way and at its Bayes-optimal `L = σ²d/B` (an oracle no tuning from
# data beats on average). The overparameterized setting, which the claims use, is repeated for every seed.

# %%
mcs = {
    sd: tr.monte_carlo(
        over, ms, [0.0, lam], trials, seed=sd, cv_Ls=cv_Ls, progress=True
    )
    for sd in seeds
}
mc_under = tr.monte_carlo(
    under, ms, [0.0, lam], trials, seed=seed + 100, cv_Ls=cv_Ls, progress=True
)
mc = {over.n_s: mcs[seed], under.n_s: mc_under}
worst_dev, worst_excess, rows = 0.0, 0.0, []
for (ns, r, m, l_), a in analytic.items():
    for sd, res in [(seed, mc_under)] if ns == under.n_s else mcs.items():
        mean, se = res[(r, m, l_)]
        dev = abs(mean - a) / a
        worst_dev = max(worst_dev, dev)
        # what sampling noise (4 standard errors) cannot explain, relative to the error
        worst_excess = max(worst_excess, (abs(mean - a) - 4 * se) / a)
        rows.append((ns, sd, r, m, l_, a, mean, se, dev))
print(
    f"{'n_s':>4} {'c':>6} {'m':>3} {'lam':>4} {'analytic':>9} "
    f"{'Monte Carlo':>16} {'dev':>6}   (seed {seed})"
)
for ns, sd, r, m, l_, a, mean, se, dev in rows:
    if sd == seed and m in (ms[0], ms[len(ms) // 2], ms[-1]):
        print(
            f"{ns:>4} {r:>6} {m:>3} {l_:>4} {a:>9.4f} {mean:>9.4f} ± {se:.4f} "
            f"{dev:>6.2%}"
        )
print(
    f"largest relative deviation over all {len(rows)} points and seeds: "
    f"{worst_dev:.2%}; "
    f"beyond 4 standard errors: {max(worst_excess, 0.0):.2%}"
)
for s in (over, under):
    r_cv, r_or = mc[s.n_s][("ridge", 0, "cv")], mc[s.n_s][("ridge", 0, "oracle")]
    print(
        f"n_s={s.n_s}, ridge on the target data: tuned by leave-one-out "
        f"{r_cv[0]:.4f} ± {r_cv[1]:.4f}, at L = sigma^2 d / B {r_or[0]:.4f} ± "
        f"{r_or[1]:.4f}"
    )

# %% [markdown]
# The figure shows seed 0. Top row: `λ → 0`, where the analytic lines are exact. Bottom row: each learner tuned
# by leave-one-out (dots) next to the analytic error at the best `L` (lines), which tuning from 40 samples cannot
# quite reach. The dashed grey line is ridge at its best `L`, the baseline every claim uses.

# %%
styles = {
    "1": ("c = 1 (no correction)", plotting.PALETTE[0]),
    "1/rho": ("c = 1/ρ", plotting.PALETTE[1]),
    "c*": ("c = c*", plotting.PALETTE[2]),
    "c_hat": ("c = ĉ (data-driven)", plotting.PALETTE[3]),
}
fig, axes = plt.subplots(2, 2, figsize=(11, 7.5), sharex=True)
for col, s in enumerate((over, under)):
    for row, l_ in enumerate((0.0, "cv")):
        ax = axes[row, col]
        for r in rules + ["c_hat"]:
            name, color = styles[r]
            mean = np.array([mc[s.n_s][(r, m, l_)][0] for m in ms])
            se = np.array([mc[s.n_s][(r, m, l_)][1] for m in ms])
            ax.errorbar(
                ms,
                mean,
                yerr=2 * se,
                fmt="o",
                color=color,
                ms=3,
                capsize=2,
                label=f"{name}, Monte Carlo" if r == "c_hat" else None,
            )
            if r != "c_hat":
                line = [
                    analytic[(s.n_s, r, m, 0.0)]
                    if l_ == 0.0
                    else best[(s.n_s, r, m)][1]
                    for m in ms
                ]
                ax.plot(ms, line, color=color, label=f"{name}, analytic")
        ax.axhline(ridge_best, ls="--", color="gray", label="ridge at its best L")
        kind = (
            f"overparameterized, ρ = {s.rho:.2f}"
            if s.overparameterized
            else f"underparameterized, n_s = {s.n_s}"
        )
        how = "λ → 0" if l_ == 0.0 else "λ tuned by leave-one-out"
        ax.set(xscale="log", title=f"{kind}, {how}", ylim=(0, 1.6 * target_only))
        ax.set_xticks([m for m in ms if m in (1, 2, 4, 8, 16, 32, 64)])
        ax.set_xticklabels([str(m) for m in ms if m in (1, 2, 4, 8, 16, 32, 64)])
for ax in axes[-1]:
    ax.set_xlabel("number of pretrained models m")
for ax in axes[:, 0]:
    ax.set_ylabel("test error")
axes[0, 0].legend(fontsize=7, loc="upper right")
plt.tight_layout()
plt.show()

# %% [markdown]
# **Reading the figure.** Top left is the paper's point: with overparameterized pretrained models and no
# correction (`c = 1`) more models help, then stall at the shrinkage floor; `c = 1/ρ` is terrible with one model
# (it amplifies one model's noise by `1/ρ`) and best with many; `c*` is never worse than either, and the
# data-driven `ĉ` follows it closely. With underparameterized pretrained models there is no shrinkage, `c* ≤ 1`,
# and `c = 1` keeps improving with `m`. Tuning `λ` lowers every curve; leave-one-out (dots) stays a little above
# the best-`L` lines, since it picks `L` from 40 samples.
#
# ## 4. How many pretrained models are needed?
#
# The smallest `m` at which each learner beats ridge on the target data at its best `L`: analytically (both at
# their best `L`, where the answer is the smallest `m` with `D(c, m) < B`; and with the transfer learner at
# `λ → 0`), and in Monte Carlo with the transfer learner tuned by leave-one-out against the oracle-tuned ridge,
# per seed (the first `m` of the grid whose mean error is lower).

# %%
noise_term = sigma**2 * n / (d - n - 1)


def crossing(rule: str, tuned: bool) -> int | None:
    """Analytic smallest m at which the rule beats ridge at its best L."""
    if tuned:
        return tr.models_needed(over, rule)
    for m in range(1, 100_000):
        if tr.test_error(over, m, factor(rule, m, over), 0.0) < ridge_best:
            return m
    return None


def mc_crossing_in(res: dict, grid: list, rule: str, base: tuple) -> int | None:
    """Smallest m in `grid` where the tuned rule's Monte Carlo mean beats `base`."""
    return next((m for m in grid if tr.paired(res, (rule, m, "cv"), base)[0] < 0), None)


def mc_crossing(res: dict, rule: str, base: tuple) -> int | None:
    return mc_crossing_in(res, ms, rule, base)


oracle_key, cv_key = ("ridge", 0, "oracle"), ("ridge", 0, "cv")
need = {}
print(
    f"{'factor':>8} {'analytic, both tuned':>21} {'analytic, λ → 0':>16} "
    f"{'MC vs oracle ridge':>19} {'MC vs LOO ridge':>16}"
)
for r in rules + ["c_hat"]:
    a_t = crossing(r, True) if r != "c_hat" else "—"
    a_0 = crossing(r, False) if r != "c_hat" else "—"
    mc_o = [mc_crossing(mcs[sd], r, oracle_key) for sd in seeds]
    mc_c = [mc_crossing(mcs[sd], r, cv_key) for sd in seeds]
    need[r] = mc_o
    print(f"{r:>8} {a_t!s:>21} {a_0!s:>16} {mc_o!s:>19} {mc_c!s:>16}")
rho, V = tr.source_moments(over)
print(
    f"c = 1 beats ridge (both tuned) iff m > V / (rho (2 - rho) B) = "
    f"{V / (rho * (2 - rho) * over.B):.2f}"
)

# %% [markdown]
# **When is one model not enough?** With `c = 1`, transfer beats ridge from `m = 1` exactly when
# `V < ρ(2 − ρ)B`, which for overparameterized sources reads `τ² + σ_s² d/(d − n_s − 1) < B`: the mismatch plus
# the source noise, both measured on the scale of `‖β‖²`. Our default mismatch is below that line. To test this
# explanation rather than assume it, the next cell repeats the Monte Carlo comparison (seed 0, the transfer
# learners tuned by leave-one-out, against the oracle-tuned ridge) at a larger mismatch `τ`, where the theory says
# `c = 1` needs more than one model. It runs the corrections there too: this is the setting where a correction
# *could* lower the number of models needed. The oracle `c*` beats ridge from one model by construction; whether
# the data-driven `ĉ`, estimated from 40 samples, does so is the open question.

# %%
tau_hi = 1.0
hi = over.with_(tau=tau_hi)
need_hi = tr.models_needed(hi, "1")
ms_hi = sorted({1, need_hi - 1, need_hi, need_hi + 1} - {0})
res_hi = tr.monte_carlo(
    hi, ms_hi, [], trials, seed=seed + 300, rules=("1", "c*", "c_hat"), cv_Ls=cv_Ls
)
print(
    f"tau = {tau_hi}: tau^2 + sigma_s^2 d/(d - n_s - 1) = "
    f"{tau_hi**2 + sigma_s**2 * d / (d - n_s_over - 1):.2f} (B = {over.B:.0f}); "
    f"analytic: c = 1 needs m = {need_hi}, c* needs {tr.models_needed(hi, 'c*')}"
)
need_hi_mc = {}
for r in ("1", "c*", "c_hat"):
    cells = [tr.paired(res_hi, (r, m, "cv"), oracle_key) for m in ms_hi]
    print(
        f"  {r:>5}, transfer − ridge: "
        + ", ".join(f"m = {m}: {a:+.4f} ± {b:.4f}" for m, (a, b) in zip(ms_hi, cells))
    )
    need_hi_mc[r] = mc_crossing_in(res_hi, ms_hi, r, oracle_key)
mc_need_hi = need_hi_mc["1"]
print(
    "Monte Carlo: first beats ridge at m = "
    + ", ".join(f"{r}: {v}" for r, v in need_hi_mc.items())
)

# %% [markdown]
# **The models-needed count across settings, measured.** The count `m` from which uncorrected transfer beats
# ridge (both at their best penalty) is our closed form's `D(1, m) < B`. We test it by Monte Carlo on a grid of
# mismatches `τ` and source sizes `n_s` (all overparameterized), per seed: at each point the transfer learner at
# the closed form's best `L` and ridge at its Bayes-optimal `L`, paired over `trials` draws, at the analytic count
# and one model fewer (`tr.contour_point`). The count is *consistent* with the sampling when transfer is not
# resolved (2 standard errors) to lose at the count, nor to win with one model fewer.

# %%
contour_ns = [d // 10, d // 4, d // 2, 3 * d // 4]
contour = {
    sd: {
        (t_, ns): tr.contour_point(over.with_(tau=t_, n_s=ns), trials, seed=sd + 400)
        for t_ in contour_taus
        for ns in contour_ns
    }
    for sd in seeds
}
print(
    f"{'τ':>4} "
    + " ".join(f"n_s={ns:<4}" for ns in contour_ns)
    + "   analytic count (✓ consistent, seed "
    f"{seed})"
)
for t_ in contour_taus:
    cells = [contour[seed][(t_, ns)] for ns in contour_ns]
    print(
        f"{t_:4} "
        + " ".join(
            f"{c['analytic']:>4} {'✓' if c['consistent'] else '✗'} " for c in cells
        )
    )
contour_share = [
    float(np.mean([c["consistent"] for c in contour[sd].values()])) for sd in seeds
]
print(
    "share of grid points consistent, per seed:", [round(v, 3) for v in contour_share]
)

# %% [markdown]
# ## 5. Where more models help: the phase diagram
#
# The analytic gain of transfer over ridge, both at their best `L`, over the source size `n_s` (hence `ρ`) and
# `m`; the black contour is `D(c, m) = B`, where transfer starts to pay off (red: transfer loses; the colours
# saturate for the large losses next to `n_s = d`, where one min-norm source fit is very noisy). Dots are Monte
# Carlo spot checks (seed 0, both tuned by leave-one-out): filled where the sampled transfer error is lower than
# the sampled ridge error, open where it is not; they should be filled on the blue side of the contour only.

# %%
ns_grid = [k for k in range(4, 2 * d, max(1, d // 25)) if abs(k - d) > 2]
m_grid = np.unique(np.round(np.logspace(0, np.log10(4 * ms[-1]), 24)).astype(int))
gain = {}
for r in ("1", "c*"):
    G = np.zeros((len(ns_grid), len(m_grid)))
    for i, ns in enumerate(ns_grid):
        s = over.with_(n_s=ns)
        for j, m in enumerate(m_grid):
            G[i, j] = (
                ridge_best
                - tr.optimal_L(s, tr.bias_D(factor(r, int(m), s), int(m), s))[1]
            )
    gain[r] = G
spots = [(ns, m) for ns in (n_s_over, 3 * d // 4, d - d // 20) for m in (1, 3, 16)]
spot_mc = {}
for ns, m in spots:
    res = tr.monte_carlo(
        over.with_(n_s=ns),
        [m],
        [],
        max(100, trials // 5),
        seed=seed + 200 + ns,
        rules=("1", "c*"),
        cv_Ls=cv_Ls,
    )
    for r in ("1", "c*"):
        spot_mc[(r, ns, m)] = tr.paired(res, (r, m, "cv"), cv_key)
vmax = max(float(g.max()) for g in gain.values())  # losses beyond -vmax saturate
fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), sharey=True)
for ax, r in zip(axes, ("1", "c*")):
    im = ax.pcolormesh(
        m_grid, ns_grid, gain[r], cmap="RdBu", vmin=-vmax, vmax=vmax, shading="nearest"
    )
    ax.contour(m_grid, ns_grid, gain[r], levels=[0], colors="k", linewidths=1)
    ax.axhline(d, color="gray", ls=":")
    for ns, m in spots:
        wins = spot_mc[(r, ns, m)][0] < 0
        ax.plot(m, ns, "o", ms=6, mec="k", mfc="k" if wins else "none")
    ax.set(xscale="log", xlabel="number of pretrained models m")
    ax.set_title(f"gain over tuned ridge, {styles[r][0]}")
axes[0].set_ylabel("source samples n_s (d dotted)")
fig.colorbar(im, ax=axes, label="ridge error − transfer error")
plt.show()
spot_agree = sum(
    (spot_mc[(r, ns, m)][0] < 0)
    == (tr.bias_D(factor(r, m, over.with_(n_s=ns)), m, over.with_(n_s=ns)) < over.B)
    for r in ("1", "c*")
    for ns, m in spots
)
print(
    f"Monte Carlo spot checks agreeing with the sign of the analytic gain: "
    f"{spot_agree} of {2 * len(spots)}"
)

# %% [markdown]
# ## 6. The penalty weight
#
# Analytic test error against `λ` for a few `m` (overparameterized sources, `c = 1` and `c*`). The filled marker
# is the numerical minimum of the closed form; the cross is `λ* = σ²d / (m D)`. They coincide: differentiating
# the closed form, every eigenvalue's term `σ² sᵢ/(sᵢ+L)² + L²(D/d)/(sᵢ+L)²` is smallest at `L = σ²d/D`, so this
# penalty is exactly optimal in our model (checked below), whatever the spectrum of `XᵀX`.

# %%
lams = np.logspace(-3, 2, 30)
fig, ax = plt.subplots(figsize=(9, 3.6))
shortcut_gap = (
    0.0  # largest relative gap between the numerical optimum and sigma^2 d / D
)
for k, m in enumerate([ms[0], ms[len(ms) // 2], ms[-1]]):
    for r, ls in (("1", "--"), ("c*", "-")):
        c = factor(r, m, over)
        errs = [
            tr.test_error(over, m, c, float(l_), eigs=eig[over.n_s][:1000])
            for l_ in lams
        ]
        ax.plot(
            lams,
            errs,
            ls=ls,
            color=plotting.PALETTE[k],
            label=f"m = {m}, {styles[r][0]}",
        )
        L_opt, e_opt = tr.optimal_L(
            over, tr.bias_D(c, m, over), eigs=eig[over.n_s][:1000]
        )
        ax.plot([L_opt / m], [e_opt], "o", color=plotting.PALETTE[k])
        ls_ = tr.lambda_star(m, c, over)
        e_ls = tr.test_error(over, m, c, ls_, eigs=eig[over.n_s][:1000])
        ax.plot([ls_], [e_ls], "x", color=plotting.PALETTE[k])
        shortcut_gap = max(shortcut_gap, abs(L_opt / (ls_ * m) - 1))
ax.axhline(ridge_best, ls=":", color="gray", label="ridge at its best L")
ax.set(xscale="log", xlabel="λ (per pretrained model)", ylabel="test error")
ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
plt.show()
print(
    "numerical optimum vs sigma^2 d / (m D): largest relative difference in lambda "
    f"{shortcut_gap:.1e}"
)

# %% [markdown]
# ## 7. Beyond isotropy: a power-law spectrum
#
# Everything so far used isotropic inputs, where the row space of a source design is a uniformly random subspace
# and every direction is shrunk by the same `ρ`. Real features are not like that. Give the inputs (target and
# sources alike) the covariance `Σ = diag(σ₁², …, σ_d²)` with the power law `σ_k² ∝ k^(−α)`. The row space of
# `Xⱼ` now leans towards the strong directions, so the min-norm fit keeps most of `β` there and little in the
# weak ones: `E[Pⱼ] = diag(s₁, …, s_d)` (diagonal, since flipping one feature's sign leaves the law of `Xⱼ`
# unchanged) with `s_k` falling with `k`, and `E[θⱼ | β] = s ⊙ β`. One scalar `c` cannot undo a shrinkage that
# differs by direction.
#
# The algebra of section 2 still holds direction by direction. With `b = B/d` and `g_k = E[(XⱼᵀXⱼ)⁺]_kk`,
#
# ```
# D_k(C_k) = E(C_k θ̄_k − β_k)² = (C_k s_k − 1)² b + C_k² v_k / m,   v_k = s_k(1 − s_k) b + s_k τ²/d + σ_s² g_k
# C_k* = s_k b / (s_k² b + v_k / m)                                  (the per-direction c*)
# ```
#
# `s_k` and `g_k` depend only on the source design, so we estimate them by Monte Carlo over random source
# designs (`tr.shrinkage_profile`; it needs `Σ` and `n_s`, no labels). Like `c*`, the correction `C*` also uses
# `B`, `τ` and `σ_s`, which a practitioner does not know: it is an oracle, and a factor per direction estimated
# from the target data is not tested here. The learner's test error,
# `σ² + (β̂ − β)ᵀΣ(β̂ − β)`, we measure by Monte Carlo alone: the closed form of section 2 assumed isotropy.
#
# Against the per-direction `C*` we run every scalar we can think of: `c = 1`; the isotropic `c*` (which takes
# `ρ = n_s/d`); `c_Σ`, the one scalar that minimises the anchor's own prediction error `Σ_k σ_k² D_k(c)`; the
# data-driven `ĉ`; a grid of scalars from 1 to `1/ρ`; and what a practitioner would do with that grid: pick the
# scalar *and* `λ` per data set by leave-one-out on the target data (`tr.pick_by_loo`). The baseline is the best
# of all of these **with hindsight**, picked on the very Monte Carlo draws it is scored on (an oracle no
# practitioner has: the strongest scalar baseline). All learners are tuned by leave-one-out on the target data.
# Next to the oracle `C*` we also run the full per-direction correction `1/s_k` (the analogue of `1/ρ`), which
# needs only the feature variances and `n_s`, no `B`, `τ` or `σ_s`. The profile is re-estimated for every seed.
# A control shows the claim can fail: the same comparison with isotropic features (`α = 0`, seed 0 only), where
# every direction is shrunk alike and one scalar should do as well as the per-direction factor.

# %%
spec = tr.power_law_spectrum(d, alpha)
scalar_grid = np.linspace(1.0, 1 / over.rho, 13)  # scalars from no correction to 1/rho
M_a = max(aniso_ms)
SCALARS = ["1", "c* (isotropic)", "c_Σ", "ĉ"] + [f"c = {c:.2f}" for c in scalar_grid]


def aniso_anchors(profile: tuple, spec: np.ndarray, ms_=aniso_ms) -> dict:
    """(rule, m) -> coefficients on the M_a pretrained models (the first m used)."""
    out = {}
    for m in ms_:
        first = (np.arange(M_a) < m)[:, None] / m

        def take(c, first=first):  # c / m on the first m models, c scalar or (d,)
            return first * np.broadcast_to(c, (d,))

        out[("1", m)] = take(1.0)
        out[("c* (isotropic)", m)] = take(tr.c_star(m, over))
        out[("c_Σ", m)] = take(tr.c_scalar_weighted(m, over, profile, spec))
        out[("1/s_k", m)] = take(1 / profile[0])  # no oracle: Σ and n_s only
        out[("ĉ", m)] = take(1.0)  # its scale is refit on the target data
        out[("per-direction C*", m)] = take(tr.c_direction(m, over, profile))
        for c, name in zip(scalar_grid, SCALARS[4:]):
            out[(name, m)] = take(c)
    return out


profiles, aniso = {}, {}
for sd in seeds:
    profiles[sd] = tr.shrinkage_profile(spec, n_s_over, draws=4000, seed=sd + 500)
    anchors = aniso_anchors(profiles[sd], spec)
    aniso[sd] = tr.anchor_monte_carlo(
        over,
        [over] * M_a,
        anchors,
        trials,
        seed=sd + 600,
        spec=spec,
        Ls=[0.0],
        cv_Ls=cv_Ls,
        rescale=[k for k in anchors if k[0] == "ĉ"],
        progress=True,
    )
# the control: isotropic features (alpha = 0), seed 0, m = M_a only
prof0 = tr.shrinkage_profile(np.ones(d), n_s_over, draws=4000, seed=seed + 800)
anchors0 = aniso_anchors(prof0, np.ones(d), [M_a])
aniso_iso = tr.anchor_monte_carlo(
    over, [over] * M_a, anchors0, trials, seed=seed + 900, Ls=[0.0], cv_Ls=cv_Ls,
    rescale=[k for k in anchors0 if k[0] == "ĉ"],
)
s_k = profiles[seed][0]
spread = [float(profiles[sd][0].max() / profiles[sd][0].min()) for sd in seeds]
print(
    f"alpha = {alpha}: shrinkage s_k from {s_k.max():.3f} (strongest feature) to "
    f"{s_k.min():.3f} (weakest); isotropic rho = {over.rho:.3f}; sum s_k = "
    f"{s_k.sum():.2f} = n_s"
)

# %% [markdown]
# The table lists the excess risk `(β̂ − β)ᵀΣ(β̂ − β)` (test error minus `σ²`) of each anchor, seed 0, with `λ`
# tuned by leave-one-out and at `λ → 0`; "LOO pick" is the scalar picked per data set by leave-one-out, "best
# scalar" the best of all scalars with hindsight, "ridge" the oracle-tuned ridge; then the isotropic control.

# %%
def excess(sd, rule: str, m: int, how) -> float:
    """Excess risk of one anchor; sd a seed (power law) or a result dict."""
    res = sd if isinstance(sd, dict) else aniso[sd]
    if rule == "LOO pick":  # scalar and λ picked per data set by leave-one-out
        return tr.pick_by_loo(res, [(r, m) for r in SCALARS])[0] - sigma**2
    return res[((rule, m), how)][0] - sigma**2


def best_scalar(sd, m: int, how) -> tuple[float, str]:
    """The best scalar with hindsight (λ tuned by LOO, or λ → 0)."""
    rules_ = SCALARS + (["LOO pick"] if how == "cv" else [])
    return min((excess(sd, r, m, how), r) for r in rules_)


print(
    f"{'m':>3} {'how':>4} {'c = 1':>7} {'c* iso':>7} {'c_Σ':>7} {'ĉ':>7} "
    f"{'LOO pick':>8} {'best scalar':>19} {'per-dir C*':>10} {'1/s_k':>7} {'ridge':>7}"
)
for m in aniso_ms:
    for how in ("cv", 0.0):
        row = [excess(seed, r, m, how) for r in ("1", "c* (isotropic)", "c_Σ", "ĉ")]
        pick = f"{'—':>8}"
        if how == "cv":
            pick = f"{excess(seed, 'LOO pick', m, how):8.4f}"
        b, name = best_scalar(seed, m, how)
        pd_ = excess(seed, "per-direction C*", m, how)
        rid = aniso[seed][("ridge", "oracle")][0] - sigma**2
        print(
            f"{m:>3} {'LOO' if how == 'cv' else 'λ→0':>4} "
            + " ".join(f"{v:7.4f}" for v in row)
            + f" {pick} {b:7.4f} ({name:>9}) {pd_:10.4f} "
            f"{excess(seed, '1/s_k', m, how):7.4f} {rid:7.4f}"
        )
iso_ratio = best_scalar(aniso_iso, M_a, "cv")[0] / excess(
    aniso_iso, "per-direction C*", M_a, "cv"
)
print(
    f"control, isotropic features (α = 0), m = {M_a}, λ tuned: best scalar "
    f"{best_scalar(aniso_iso, M_a, 'cv')[0]:.4f} "
    f"({best_scalar(aniso_iso, M_a, 'cv')[1]}), per-direction C* "
    f"{excess(aniso_iso, 'per-direction C*', M_a, 'cv'):.4f}: ratio {iso_ratio:.3f}"
)

# %% [markdown]
# Left: the measured shrinkage by feature and the per-direction factor `C*_k` it calls for (right axis), next
# to the scalars `c_Σ` and `1/ρ`. Right: excess risk against the number of models, seed 0, `λ` tuned.

# %%
fig, axes = plt.subplots(1, 2, figsize=(11, 3.6))
k = np.arange(1, d + 1)
axes[0].plot(k, s_k, color=plotting.PALETTE[0], label="shrinkage s_k (Monte Carlo)")
axes[0].axhline(over.rho, ls=":", color=plotting.PALETTE[0], label="isotropic ρ")
axes[0].set(xscale="log", xlabel="feature k (variance ∝ k^−α)", ylabel="s_k")
axes[0].legend(fontsize=7, loc="lower left")
ax2 = axes[0].twinx()
ax2.plot(k, tr.c_direction(M_a, over, profiles[seed]), color=plotting.PALETTE[2],
         label=f"C*_k, m = {M_a}")
ax2.axhline(tr.c_scalar_weighted(M_a, over, profiles[seed], spec), ls="--",
            color=plotting.PALETTE[2], label="c_Σ")
ax2.axhline(1 / over.rho, ls=":", color=plotting.PALETTE[2], label="1/ρ")
ax2.set_ylabel("correction factor")
ax2.legend(fontsize=7, loc="upper center")
for r, name, col in (
    ("1", "c = 1", 0),
    ("ĉ", "ĉ (data-driven scalar)", 3),
    ("per-direction C*", "per-direction C*", 2),
):
    axes[1].plot(aniso_ms, [excess(seed, r, m, "cv") for m in aniso_ms], "o-",
                 color=plotting.PALETTE[col], label=name)
axes[1].plot(aniso_ms, [best_scalar(seed, m, "cv")[0] for m in aniso_ms], "s--",
             color=plotting.PALETTE[1], label="best scalar (hindsight)")
axes[1].axhline(aniso[seed][("ridge", "oracle")][0] - sigma**2, ls=":", color="gray",
                label="ridge at its best L")
axes[1].set(xscale="log", xlabel="number of pretrained models m",
            ylabel="excess risk, λ tuned (LOO)", ylim=(0, None))
axes[1].set_xticks(aniso_ms)
axes[1].set_xticklabels([str(m) for m in aniso_ms])
axes[1].legend(fontsize=7)
plt.tight_layout()
plt.show()

# %% tags=["remove-input"]
from IPython.display import Markdown


def reading_aniso() -> str:
    """The power-law section's reading, from this run's numbers."""
    r = [
        best_scalar(sd, M_a, "cv")[0] / excess(sd, "per-direction C*", M_a, "cv")
        for sd in seeds
    ]
    c_sig = tr.c_scalar_weighted(M_a, over, profiles[seed], spec)
    best_name = min((excess(seed, r_, M_a, "cv"), r_) for r_ in SCALARS)[1]
    inv = [
        best_scalar(sd, M_a, "cv")[0] / excess(sd, "1/s_k", M_a, "cv") for sd in seeds
    ]
    loo = [excess(sd, "LOO pick", M_a, "cv") for sd in seeds]
    fixed = [min(excess(sd, r_, M_a, "cv") for r_ in SCALARS) for sd in seeds]
    txt = (
        f"**Reading it.** The min-norm source fit keeps a share {s_k.max():.2f} of `β` "
        f"along the strongest feature and {s_k.min():.2f} along the weakest, where the "
        f"isotropic model says {over.rho:.2f} everywhere. With m = {M_a} models and "
        "`λ` tuned, the best scalar (with hindsight) leaves "
        f"{min(r):.2f} to {max(r):.2f} times the excess risk of the oracle "
        f"per-direction correction `C*` over the {len(seeds)} seeds"
    )
    txt += (
        f": one factor cannot fit a shrinkage that varies {max(spread):.0f}-fold "
        "across directions. "
        if min(r) > 1
        else ": at this size the per-direction correction does not improve on a scalar. "
    )
    txt += (
        "Against the full per-direction correction `1/s_k`, which needs no oracle, the "
        f"same ratio is {min(inv):.2f} to {max(inv):.2f}"
        + (
            ": it too beats every scalar. "
            if min(inv) > 1
            else ": without the oracle's damping of the noisy weak directions, undoing "
            "the shrinkage per direction does not beat a scalar at this m. "
            if max(inv) < 1
            else ": it beats the best scalar on some seeds only. "
        )
        + "Picking the scalar per data set by leave-one-out "
        + (
            "does better than any fixed scalar on "
            f"{sum(a < b for a, b in zip(loo, fixed))} of {len(seeds)} seeds. "
            if any(a < b for a, b in zip(loo, fixed))
            else "does not beat the best fixed scalar picked with hindsight. "
        )
        + "In the isotropic control (α = 0, seed "
        f"{seed}) the ratio is {iso_ratio:.2f}"
        + (
            ", below the claim's bar: the gap comes from the anisotropy. "
            if iso_ratio < 1.1
            else ", not below the claim's bar: the gap is not only the anisotropy's. "
        )
    )
    txt += (
        f"The best fixed scalar for the learner (seed {seed}: {best_name}) differs from "
        f"`c_Σ` = {c_sig:.2f}, the best scalar for the anchor alone: the target data "
        "already pins down the strong directions, so what the anchor contributes is "
        "mostly in the weak ones, which call for a larger factor."
    )
    return txt


Markdown(reading_aniso())

# %% [markdown]
# ## 8. Heterogeneous pools: a penalty and a factor per model
#
# A practitioner's pool is rarely uniform. Take four groups of `pool_size` pretrained models each, from
# overparameterized sources with small mismatch to underparameterized ones with large mismatch (the table below
# lists them). With a penalty `λⱼ` and a factor `cⱼ` per model the anchor is `Σⱼ uⱼθⱼ` with `uⱼ = cⱼλⱼ/L`, and in
# the isotropic model its error is again all that matters:
#
# ```
# D(u) = (Σⱼ uⱼρⱼ − 1)² B + Σⱼ uⱼ² Vⱼ        minimised by   uⱼ = B/(1 + B S) · ρⱼ/Vⱼ,   S = Σⱼ ρⱼ²/Vⱼ
# D* = B / (1 + B S)                          λⱼ ∝ ρⱼ²/Vⱼ,   cⱼ = (B S/(1 + B S)) / ρⱼ
# ```
#
# Each model is debiased by its own `1/ρⱼ`, weighted by the inverse variance of that debiased model, and all are
# shrunk by one common factor. The baseline is what section 2 offers a pool: **equal** penalties with the best
# common factor (`tr.pool_equal_c`, which minimises `D` over one `c`), with `c = 1` and with the data-driven `ĉ`;
# every learner tuned by leave-one-out. The closed form of the test error applies unchanged (the anchor is still
# independent of the target data and isotropic given its norm), so we check it against the Monte Carlo at each
# anchor's best `L = σ²d/D` and at `λ → 0`. Because the optimal anchor minimises `D` over *every* linear anchor,
# equal-weight ones included, and the error grows with `D`, its advantage holds by our closed form: the Monte
# Carlo measures its size, and the record keeps it as a check (section 10), not a claim.
#
# What can fail is the same rule **estimated from observable quantities** (`tr.pool_estimate`): a practitioner
# knows which group each model came from and how many samples it was fit on, so `ρⱼ = min(1, n_s/d)`; `Vⱼ` is
# estimated from the spread of the group's own models around their mean, and `B` from the group means
# (`E‖θ̄_g‖² = ρ_g²B + V_g/k_g`). The plug-in weights are recomputed from the pretrained models of every trial,
# with `pool_size` models per group; the claim `weighted_pool_gain` (section 11) compares this rule with the
# strongest equal-weight learner, all tuned by leave-one-out.

# %%
pool_groups = [(n_s_over, tau), (d // 2, 1.5), (2 * d, tau), (4 * d, 2.0)]  # (n_s, τ)
pool = [over.with_(n_s=ns, tau=t_) for ns, t_ in pool_groups for _ in range(pool_size)]
m_p = len(pool)
opt = tr.pool_optimal(pool)
c_eq = tr.pool_equal_c(pool)
pool_labels = np.repeat(np.arange(len(pool_groups)), pool_size)
pool_ns = np.array([t_.n_s for t_ in pool])


def pool_u_hat(thetas: np.ndarray) -> np.ndarray:
    """The data-driven pool anchor: the optimal rule with ρⱼ, Vⱼ, B estimated."""
    return tr.pool_estimate(thetas, pool_labels, pool_ns)["u"]


D_eq = tr.bias_D_weighted(c_eq, np.full(m_p, 1 / m_p), pool)
POOL = {
    "optimal λⱼ, cⱼ": (opt["u"], opt["D"]),
    "equal, best common c": (np.full(m_p, c_eq / m_p), D_eq),
    "equal, c = 1": (
        np.full(m_p, 1 / m_p),
        tr.bias_D_weighted(1.0, np.full(m_p, 1 / m_p), pool),
    ),
    "equal, ĉ": (np.full(m_p, 1 / m_p), None),
    "estimated λⱼ, cⱼ": (pool_u_hat, None),
}
EQUAL = [k for k in POOL if k.startswith("equal")]
pool_L = {k: sigma**2 * d / D for k, (_, D) in POOL.items() if D is not None}
pool_mc = {
    sd: tr.anchor_monte_carlo(
        over,
        pool,
        {k: u for k, (u, _) in POOL.items()},
        trials,
        seed=sd + 700,
        Ls=[0.0, *pool_L.values()],
        cv_Ls=cv_Ls,
        rescale=["equal, ĉ"],
    )
    for sd in seeds
}
print(f"{'n_s':>4} {'τ':>4} {'ρ':>5} {'V':>6} {'share of L (λⱼ/L)':>18} {'cⱼ':>6}")
for g, (ns, t_) in enumerate(pool_groups):
    j = g * pool_size
    rho_j, V_j = tr.source_moments(pool[j])
    share = pool_size * opt["weights"][j]
    c_j = opt["factors"][j]
    print(f"{ns:>4} {t_:>4} {rho_j:5.2f} {V_j:6.3f} {share:18.3f} {c_j:6.3f}")
print(f"equal penalties: each group 1/{len(pool_groups)} of L; common c {c_eq:.3f}")

# %% [markdown]
# What the estimate gives on one draw of the pool (not a Monte Carlo trial), next to the true shares and
# factors above.

# %%
# one draw of the pool (not a Monte Carlo trial): the estimated shares and factors
_rng = np.random.default_rng(seed + 750)
_beta = _rng.normal(size=d)
_beta *= np.sqrt(over.B) / np.linalg.norm(_beta)
_th = np.vstack([tr.pretrain(_beta, pool_size, t_, _rng) for t_ in pool[::pool_size]])
pool_est_one = tr.pool_estimate(_th, pool_labels, pool_ns)
print(
    "estimated from one draw: shares "
    + ", ".join(f"{pool_size * w:.3f}" for w in pool_est_one["weights"][::pool_size])
    + "; factors "
    + ", ".join(f"{c_:.3f}" for c_ in pool_est_one["factors"][::pool_size])
    + f"; B {pool_est_one['B']:.3f} (true {over.B})"
)

# %% [markdown]
# Analytic error at each anchor's best `L` and at `λ → 0` next to the Monte Carlo (seed 0), and the learners
# tuned by leave-one-out, all seeds.

# %%
pool_rows, pool_dev = [], 0.0
for k, (_, D) in POOL.items():
    if D is None:
        continue
    for L in (0.0, pool_L[k]):
        a = tr.test_error_D(over, D, L, eigs=eig[over.n_s])
        for sd in seeds:
            mean, se = pool_mc[sd][(k, L)]
            pool_dev = max(pool_dev, (abs(mean - a) - 4 * se) / a)
            if sd == seed:
                pool_rows.append((k, L, a, mean, se))
for k, L, a, mean, se in pool_rows:
    print(f"{k:>22}, L = {L:7.1f}: analytic {a:.4f}, Monte Carlo {mean:.4f} ± {se:.4f}")
for k in POOL:
    tuned = [pool_mc[sd][(k, "cv")] for sd in seeds]
    cells = ", ".join(f"{m_:.4f} ± {s_:.4f}" for m_, s_ in tuned)
    print(f"{k:>22}, λ tuned (LOO): {cells}")
print(f"{'ridge':>22}, oracle L: {pool_mc[seed][('ridge', 'oracle')][0]:.4f}")

# %% tags=["remove-input"]
def reading_pool() -> str:
    """The pool section's reading, from this run's numbers."""
    share = {g: pool_size * opt["weights"][i * pool_size] for i, g in enumerate(pool_groups)}
    top = max(share, key=share.get)
    gains_ = [
        1 - pool_mc[sd][("optimal λⱼ, cⱼ", "cv")][0]
        / min(pool_mc[sd][(k, "cv")][0] for k in EQUAL)
        for sd in seeds
    ]
    est_ = [
        min(pool_mc[sd][(k, "cv")][0] for k in EQUAL)
        - pool_mc[sd][("estimated λⱼ, cⱼ", "cv")][0]
        for sd in seeds
    ]
    orc_ = [
        min(pool_mc[sd][(k, "cv")][0] for k in EQUAL)
        - pool_mc[sd][("optimal λⱼ, cⱼ", "cv")][0]
        for sd in seeds
    ]
    verdict = (
        "beats the strongest equal-weight learner at every seed"
        if min(est_) > 0
        else "does not beat the strongest equal-weight learner at every seed"
    )
    return (
        f"**Reading it.** The optimal anchor puts {share[top]:.0%} of the penalty on "
        f"the group with n_s = {top[0]} and τ = {top[1]}, whose debiased models vary "
        "least, and debiases the overparameterized groups by their own `1/ρⱼ`. With "
        "`λ` tuned by leave-one-out, the error relative to the best equal-weight "
        f"learner is lower by {min(gains_):.1%} to {max(gains_):.1%} over the seeds "
        "(negative: higher). "
        f"The rule estimated from the pool itself {verdict}: its error is lower by "
        f"{min(est_):.4f} to {max(est_):.4f} (the oracle's: {min(orc_):.4f} to "
        f"{max(orc_):.4f}), so it keeps {min(e / o for e, o in zip(est_, orc_)):.0%} "
        "or more of the oracle's gain. "
        + (
            "The closed form and the Monte Carlo agree within 4 standard errors at "
            "every point and seed."
            if pool_dev <= 0
            else "The closed form and the Monte Carlo differ by at most "
            f"{pool_dev:.2%} of the error beyond 4 standard errors."
        )
    )


Markdown(reading_pool())

# %% [markdown]
# ## 9. Interaction
#
# The slider moves the task mismatch `τ`: analytic error against `m` for the three factors (overparameterized
# sources, `λ → 0`) and ridge at its best `L` (dashed). A larger mismatch adds variance `ρτ²/m` per model, so
# more models are needed before transfer, and before the correction, pays off.

# %%
taus = [0.0, 0.25, 0.5, 1.0, 1.5, 2.0]
m_line = np.unique(np.round(np.logspace(0, np.log10(4 * ms[-1]), 40)).astype(int))


def draw_tau(fig, t):
    ax = fig.add_subplot(111)
    s = over.with_(tau=t)
    for r in rules:
        ax.plot(
            m_line,
            [tr.test_error(s, int(m), factor(r, int(m), s), 0.0) for m in m_line],
            color=styles[r][1],
            label=styles[r][0],
        )
    ax.axhline(ridge_best, ls="--", color="gray", label="ridge, target only")
    ax.set(xscale="log", xlabel="m", ylabel="test error", ylim=(0, 2 * target_only))
    ax.legend(fontsize=8)


plotting.static_slider(taus, draw_tau, figsize=(6, 3.6), label="τ", fmt="{}")

# %% [markdown]
# Live: choose the source size, mismatch and number of models.


# %%
def live(n_s: int = n_s_over, tau_: float = tau, m: int = 16):
    if abs(n_s - d) <= 1:
        print("n_s must differ from d by more than 1")
        return
    s = over.with_(n_s=n_s, tau=tau_)
    for r in rules:
        c = factor(r, m, s)
        print(
            f"{styles[r][0]:24} c = {c:6.3f}   test error λ → 0 "
            f"{tr.test_error(s, m, c, 0.0):.4f}, best λ "
            f"{tr.optimal_L(s, tr.bias_D(c, m, s))[1]:.4f}"
        )
    print(f"{'ridge, target data only':24} {'':10}   best λ {ridge_best:.4f}")


plotting.live_controls(live, n_s=(2, 3 * d), tau_=(0.0, 3.0, 0.1), m=(1, 256))

# %% [markdown]
# ## 10. Checks
#
# Properties that hold at any size, asserted: the closed form, the analytic error against sampling, the
# Marchenko–Pastur form, the optimality of `c*`, and the facts that make statements true by construction here
# (so they are checks, not claims): `c*` beats ridge from the first model, and the best `L` is `σ²d/D` (for ridge,
# `D = B`: the Bayes-optimal penalty). For the later sections: the pool's closed form against its Monte Carlo,
# the optimal pool anchor no worse than the best equal-weight one (by construction) and, in the claims section,
# its tuned Monte Carlo error below theirs at every seed (the estimated rule is a claim); and the measured shrinkage profile summing to `n_s`
# (the trace of a rank-`n_s` projection).

# %%
# the two "by construction" facts, over the phase-diagram grid
grid_settings = [over.with_(n_s=ns) for ns in ns_grid]
d_excess = max(
    tr.bias_D(tr.c_star(int(m), s), int(m), s)
    - min(tr.bias_D(1.0, int(m), s), tr.bias_D(1 / s.rho, int(m), s))
    for s in grid_settings
    for m in m_grid
)
c_star_margin = max(
    tr.bias_D(tr.c_star(int(m), s), int(m), s) - s.B
    for s in grid_settings
    for m in m_grid
)

# %%
rec.check(
    "closed_form_matches_lstsq",
    closed_err,
    1e-8,
    op="<=",
    note="equal and per-model weights; batched min-norm vs lstsq",
)
rec.check(
    "analytic_matches_monte_carlo",
    worst_excess,
    0.01,
    op="<=",
    note="largest |MC − analytic| beyond 4 SE, relative (largest raw gap "
    f"{worst_dev:.2%}); "
    f"{len(rows)} points (c = 1, 1/ρ, c*; λ → 0 and λ = {lam}; over- and "
    f"underparameterized sources; {len(seeds)} seeds), {trials} trials each",
)
rec.check(
    "marchenko_pastur_matches_eigen_average",
    mp_dev,
    0.02,
    op="<=",
    note="relative gap at D in {0.1, 0.5, 1, 3}, L in {0.3, 3, 30, 300}",
)
rec.check(
    "debias_optimal",
    d_excess,
    0.0,
    op="<=",
    note="max over the phase-diagram grid of D(c*) − min(D(1), D(1/ρ))",
)
rec.check(
    "c_star_beats_ridge_from_one_model",
    c_star_margin,
    0.0,
    op="<",
    note="max over the phase-diagram grid of D(c*, m) − B: true by construction",
)
rec.check(
    "ridge_best_L_is_bayes",
    abs(L_ridge / (sigma**2 * d / over.B) - 1),
    0.01,
    op="<=",
    note=f"numerical optimum {L_ridge:.3f} vs σ²d/B = {sigma**2 * d / over.B:.3f}",
)
rec.check(
    "best_L_is_sigma2_d_over_D",
    shortcut_gap,
    1e-3,
    op="<=",
    note="numerical minimum of the closed form vs σ²d/D, relative; exact by calculus",
)
rec.check("interpolates_at_zero_lambda", interp_err, 1e-8, op="<=")

# %% [markdown]
# The checks of the heterogeneous pool (section 8) and of the measured shrinkage profile (section 7).

# %%
rec.check(
    "pool_analytic_matches_monte_carlo",
    pool_dev,
    0.01,
    op="<=",
    note="heterogeneous pool: largest |MC − analytic| beyond 4 SE, relative; "
    "optimal, equal with best c and c = 1, at λ → 0 and at each best L, all seeds",
)
rec.check(
    "pool_optimum_below_equal",
    opt["D"] - D_eq,
    0.0,
    op="<=",
    note="D* − D(equal weights, best common c): true by construction",
)
rec.check(
    "shrinkage_profile_trace",
    max(abs(profiles[sd][0].sum() - n_s_over) for sd in seeds),
    1e-8,
    op="<=",
    note="sum of s_k = trace of a rank-n_s projection, every draw",
)

# %% [markdown]
# ## 11. The claims record
#
# Each claim is measured once per seed (Monte Carlo with `trials` trials), each from its own measurement: the
# gain of the data-driven correction at the largest `m` with `λ` tuned; the gains from `m/4` to `m` models at
# `λ → 0` (the plateau); the models-needed count across the `(τ, n_s)` grid, against ridge at its Bayes-optimal
# penalty (stronger than any ridge tuned from data); the data-driven factor against the oracle `c*`; the best
# scalar against the per-direction correction under the power-law spectrum; the pool rule estimated from the
# pretrained models against the best equal-weight learner. The optimal per-model penalties and factors with the
# true moments beat equal weights by our closed form, so their measured gain is a check below. "How many
# models does uncorrected transfer need?" is answered by the contour claim alone: at our default mismatch the
# closed form says one model already beats tuned ridge (section 4), so a claim at that single point would only
# repeat one cell of the contour, and a condition requiring the closed form to say "more than one" would be that
# same count read twice; both were dropped.

# %%
M = ms[-1]
M4 = max(m for m in ms if m <= M // 4)
ridge_per_seed = [mcs[sd][oracle_key][0] for sd in seeds]
floor = tr.test_error_D(
    over, (1 - over.rho) ** 2 * over.B, 0.0
)  # c = 1 as m -> infinity


def gains(res: dict) -> tuple[float, float, float, float]:
    """Paired error reductions from M4 to M models at lam -> 0:
    (c = 1, its SE, c*, its SE)."""
    g1, se1 = tr.paired(res, ("1", M4, 0.0), ("1", M, 0.0))
    return (g1, se1, *tr.paired(res, ("c*", M4, 0.0), ("c*", M, 0.0)))


def gain_ratio_analytic(s: tr.Setting) -> float:
    g = {
        r: tr.test_error(s, M4, factor(r, M4, s), 0.0)
        - tr.test_error(s, M, factor(r, M, s), 0.0)
        for r in ("1", "c*")
    }
    return g["1"] / g["c*"]


def err(sd, key):
    return mcs[sd][key][0]


G = {sd: gains(mcs[sd]) for sd in seeds}
plateau = [round(G[sd][0] / G[sd][2], 4) for sd in seeds]  # c = 1's gain / c*'s gain
gain_rel = [
    (err(sd, ("1", M, "cv")) - err(sd, ("c_hat", M, "cv"))) / err(sd, ("1", M, "cv"))
    for sd in seeds
]
ratio = [err(sd, ("c_hat", M, 0.0)) / err(sd, ("c*", M, 0.0)) for sd in seeds]
need_c1_analytic = crossing("1", True)
aniso_ratio = [
    round(best_scalar(sd, M_a, "cv")[0] / excess(sd, "per-direction C*", M_a, "cv"), 4)
    for sd in seeds
]
pool_base = {sd: min(pool_mc[sd][(k, "cv")][0] for k in EQUAL) for sd in seeds}
pool_gain = [
    round(1 - pool_mc[sd][("optimal λⱼ, cⱼ", "cv")][0] / pool_base[sd], 4)
    for sd in seeds
]
# excess risk (test error − σ²) of the best equal-weight learner minus that of the
# estimated rule; σ² cancels in the difference
pool_est_gain = [
    round(pool_base[sd] - pool_mc[sd][("estimated λⱼ, cⱼ", "cv")][0], 5) for sd in seeds
]

# %% [markdown]
# **Conditions: is each experiment in the regime its claim speaks of?** Fixed from what each claim needs, not
# from where the numbers fall. The shrinkage claims need overparameterized sources (`ρ < 1`). Every Monte Carlo mean a claim
# uses has a standard error under 5% of itself (`mc_precise`, per seed). A ratio of gains needs a resolved
# denominator: `c*`'s gain from `m/4` to `m` is at least 2 standard errors (`cstar_gain_resolved`). "ĉ is nearly as
# good as `c*`" says something only if doing nothing (`c = 1`) is not already that close: `c = 1` is at least 5%
# worse than `c*` (`correction_matters`, the claim's own bar). The contour test needs a grid that the `m = 1`
# contour crosses (`contour_crossed`) and precise estimates there (`contour_mc_precise`). The power-law claim
# needs a spectrum under which the shrinkage really varies by direction: the largest `s_k` at least twice the
# smallest (`anisotropy_matters`, from the source designs alone, per seed), and precise means
# (`aniso_mc_precise`). The pool claim needs a pool whose groups differ enough that weights could matter: the
# closed form's error floor `D` of the best equal-weight anchor at least 10% above the optimal one's
# (`pool_weights_matter`, analytic), and precise means (`pool_mc_precise`).

# %%
keys = [
    ("1", M, "cv"),
    ("c_hat", M, "cv"),
    ("1", M, 0.0),
    ("c*", M, 0.0),
    ("c_hat", M, 0.0),
    ("1", M4, 0.0),
    ("c*", M4, 0.0),
    oracle_key,
]

# %%
rec.condition(
    "sources_overparameterized",
    over.rho,
    "<",
    1.0,
    unit="ρ = n_s / d",
    statement="the pretrained models are overparameterized, so their min-norm fits are "
    "shrunk",
)
rec.condition(
    "mc_precise",
    [max(mcs[sd][k][1] / mcs[sd][k][0] for k in keys) for sd in seeds],
    "<=",
    0.05,
    unit="largest standard error ÷ mean among the Monte Carlo means the claims use",
    statement="the Monte Carlo estimates behind the claims are precise",
)

# %%
rec.condition(
    "cstar_gain_resolved",
    [G[sd][2] / G[sd][3] for sd in seeds],
    ">=",
    2.0,
    unit=f"c*'s error reduction m = {M4} → {M} ÷ its standard error",
    statement="the optimal correction's gain from more models is resolved by the Monte "
    "Carlo",
)
counts = [c["analytic"] for c in contour[seed].values()]
rec.condition(
    "contour_crossed",
    min(sum(k == 1 for k in counts), sum(k >= 2 for k in counts)),
    ">=",
    1,
    unit="grid points on the smaller side of the m = 1 contour",
    statement="the (τ, n_s) grid has points where one model suffices and points where "
    "it does not",
)
rec.condition(
    "contour_mc_precise",
    [max(c["max_rel_se"] for c in contour[sd].values()) for sd in seeds],
    "<=",
    0.05,
    unit="largest standard error ÷ mean on the contour grid",
    statement="the contour's Monte Carlo estimates are precise",
)
rec.condition(
    "correction_matters",
    [err(sd, ("1", M, 0.0)) / err(sd, ("c*", M, 0.0)) for sd in seeds],
    ">=",
    1.05,
    unit=f"error(c = 1) ÷ error(c*) at m = {M}, λ → 0",
    statement="no correction (c = 1) is not already as good as the oracle factor",
)

# %%
rec.condition(
    "anisotropy_matters",
    spread,
    ">=",
    2.0,
    unit="largest ÷ smallest shrinkage s_k of the min-norm source fit (power law)",
    statement="under the power-law spectrum the shrinkage differs by direction",
)
rec.condition(
    "aniso_mc_precise",
    [
        max(
            v[1] / v[0]
            for k, v in aniso[sd].items()
            if isinstance(k, tuple) and k[0][1] == M_a
        )
        for sd in seeds
    ],
    "<=",
    0.05,
    unit=f"largest standard error ÷ mean among the power-law test errors at m = {M_a}",
    statement="the Monte Carlo estimates behind the power-law claim are precise",
)
rec.condition(
    "pool_weights_matter",
    D_eq / opt["D"],
    ">=",
    1.1,
    unit="D(equal weights, best common c) ÷ D(optimal λⱼ, cⱼ), closed form",
    statement="the pool is heterogeneous enough that per-model weights can matter",
)
rec.condition(
    "pool_mc_precise",
    [max(pool_mc[sd][(k, "cv")][1] / pool_mc[sd][(k, "cv")][0] for k in POOL)
     for sd in seeds],
    "<=",
    0.05,
    unit="largest standard error ÷ mean among the pool's tuned test errors",
    statement="the Monte Carlo estimates behind the pool claim are precise",
)

# %% tags=["hide-input"]
# the notes: diagnostics written from the numbers (bookkeeping, not rules)
g1_u, _, gs_u, _ = gains(mc_under)
plat_note = "; ".join(
    f"seed {sd}: c = 1 gains {G[sd][0]:.4f} ± {G[sd][1]:.4f}, c* gains {G[sd][2]:.4f}; "
    f"c = 1 at m = {M}: "
    f"{mcs[sd][('1', M, 0.0)][0]:.4f} ± {mcs[sd][('1', M, 0.0)][1]:.4f} (floor "
    f"{floor:.4f})"
    for sd in seeds
) + (
    f". Analytic ratio {gain_ratio_analytic(over):.3f}. The control without shrinkage, "
    "underparameterized sources "
    f"(n_s = {n_s_under}): analytic {gain_ratio_analytic(under):.3f}, Monte Carlo "
    f"{g1_u / gs_u:.3f} (seed "
    f"{seed + 100}), so the ratio can fail. An earlier version asked c = 1 at m = {M} "
    "to lie within 2 SE of its "
    "m → ∞ floor; it sits (1 − n/d) V / m = "
    f"{tr.test_error(over, M, 1.0, 0.0) - floor:.4f} above it, so that test "
    "passed or failed with the sampling noise and would fail for sure with more "
    "trials."
)
def sharp(c: dict) -> bool:
    """Both sides of a contour point resolved at 2 standard errors."""
    (a, se) = c["diffs"][c["m_claimed"]]
    m_c = c["m_claimed"]
    below = m_c == 1 or c["diffs"][m_c - 1][0] > 2 * c["diffs"][m_c - 1][1]
    return a < -2 * se and below


aniso_note = "; ".join(
    f"seed {sd}: best scalar {best_scalar(sd, M_a, 'cv')[1]} "
    f"{best_scalar(sd, M_a, 'cv')[0]:.4f}, c_Σ {excess(sd, 'c_Σ', M_a, 'cv'):.4f}, "
    f"ĉ {excess(sd, 'ĉ', M_a, 'cv'):.4f}, per-direction "
    f"{excess(sd, 'per-direction C*', M_a, 'cv'):.4f}, "
    f"scalar picked by LOO {excess(sd, 'LOO pick', M_a, 'cv'):.4f}, "
    f"1/s_k (no oracle) {excess(sd, '1/s_k', M_a, 'cv'):.4f}; at λ → 0 best scalar / "
    "per-direction "
    f"{best_scalar(sd, M_a, 0.0)[0] / excess(sd, 'per-direction C*', M_a, 0.0):.3f}"
    for sd in seeds
) + (
    f". Excess risk = test error − σ², α = {alpha}, m = {M_a}. Control with isotropic "
    f"features (α = 0, seed {seed}): ratio {iso_ratio:.3f}"
)
pool_note = "; ".join(
    f"seed {sd}: "
    + ", ".join(f"{k} {pool_mc[sd][(k, 'cv')][0]:.4f}" for k in POOL)
    + " (paired difference best equal − optimal "
    + "{:.4f} ± {:.4f})".format(*tr.paired(
        pool_mc[sd],
        (min(EQUAL,
             key=lambda k, sd=sd: pool_mc[sd][(k, "cv")][0]), "cv"),
        ("optimal λⱼ, cⱼ", "cv"),
    ))
    for sd in seeds
) + (
    ". Analytic at the best L: "
    + ", ".join(
        f"{k} {tr.test_error_D(over, D, pool_L[k], eigs=eig[over.n_s]):.4f}"
        for k, (_, D) in POOL.items()
        if D is not None
    )
)
pool_est_note = "; ".join(
    f"seed {sd}: paired difference best equal − estimated "
    + "{:.4f} ± {:.4f}".format(*tr.paired(
        pool_mc[sd],
        (min(EQUAL, key=lambda k, sd=sd: pool_mc[sd][(k, "cv")][0]), "cv"),
        ("estimated λⱼ, cⱼ", "cv"),
    ))
    + f", oracle's gain {pool_base[sd] - pool_mc[sd][('optimal λⱼ, cⱼ', 'cv')][0]:.4f}"
    for sd in seeds
) + (
    f". Estimated from {pool_size} models per group (ρⱼ from n_s and d, Vⱼ from the "
    "within-group spread, B from the group means); the oracle uses the true ρⱼ, Vⱼ, B "
    "and is the check pool_optimum_beats_equal_tuned. Baseline: the best of "
    f"{', '.join(EQUAL)} per seed (equal, best common c uses the true moments)"
)
close_note = (
    f"mean ĉ = {mcs[seed]['c_hat'][M]:.2f} vs c* = {tr.c_star(M, over):.2f} (seed "
    f"{seed}); ratios at every "
    f"m (seed {seed}): "
    + ", ".join(
        f"{m}: "
        f"{mc[over.n_s][('c_hat', m, 0.0)][0] / mc[over.n_s][('c*', m, 0.0)][0]:.3f}"
        for m in ms
    )
)
TEXT = {
    "debiasing_gain": (
        f"At m = {M}, the data-driven correction reduces the test error of the "
        "uncorrected learner by at least "
        "20% (both with λ tuned by leave-one-out)",
        "debiasing reduces the overparameterization bias",
        f"relative error reduction at m = {M}, ĉ vs c = 1",
        f"analytic, oracle c* at the best L: "
        f"{1 - best[(over.n_s, 'c*', M)][1] / best[(over.n_s, '1', M)][1]:.3f}",
    ),
    "uncorrected_plateaus": (
        "With overparameterized pretrained models and no correction, going from m = "
        f"{M4} to {M} models buys less "
        "than half the error reduction that the optimal correction c* gets from the "
        "same models: the uncorrected "
        "learner has stalled at its shrinkage floor",
        "the learning may be compromised by the overparameterization bias",
        f"error reduction of c = 1 / that of c*, m = {M4} → {M}, λ → 0 (paired)",
        plat_note,
    ),
    "models_needed_contour": (
        "Across a grid of mismatches and source sizes, the analytic number of "
        "uncorrected models needed to beat "
        "tuned ridge is consistent with Monte Carlo at 90% of the grid points or more",
        "if the pretrained models are overparameterized, using sufficiently many of "
        "them is important for "
        "beneficial transfer (the count, measured)",
        "share of (τ, n_s) points where Monte Carlo is consistent",
        f"τ in {contour_taus}, n_s in {contour_ns}; analytic counts (seed {seed}) "
        + ", ".join(
            f"({t_}, {ns}): {c['analytic']}" for (t_, ns), c in contour[seed].items()
        )
        + "; inconsistent points per seed: "
        + "; ".join(
            f"{sd}: {[k for k, c in contour[sd].items() if not c['consistent']]}"
            for sd in seeds
        )
        + "; points where the sampling resolves both sides (transfer wins at the "
        "count and, where the count is above 1, loses one model earlier, 2 SE), per "
        "seed: "
        + ", ".join(
            f"{sd}: {sum(sharp(c) for c in contour[sd].values())} of {len(contour[sd])}"
            for sd in seeds
        )
        + " (consistency is a non-rejection test; these counts are its power). "
        f"At the default τ = {tau}: analytic count {need_c1_analytic}, Monte Carlo "
        f"(transfer tuned by LOO) {need['1']}; at τ = {tau_hi}: analytic {need_hi}, "
        f"Monte Carlo {mc_need_hi}, and the data-driven ĉ {need_hi_mc['c_hat']}",
    ),
    "data_driven_factor_close": (
        "The factor estimated from the target data alone is nearly as good as the "
        "oracle c* (error ratio <= 1.05)",
        "simple debiasing factor (ours: data-driven ĉ)",
        f"error(ĉ) / error(c*) at m = {M}, λ → 0",
        close_note,
    ),
    "scalar_debias_anisotropic": (
        "Under a power-law feature spectrum, no single scalar factor debiases the "
        "overparameterized pretrained models: the best scalar, picked with hindsight, "
        "leaves at least 1.1 times the excess risk of the per-direction correction C* "
        "(an oracle, like c*; both with λ tuned by leave-one-out)",
        "a simple multiplicative correction reduces the overparameterization bias "
        "(the paper's setting is Gaussian; the power-law spectrum is our extension)",
        f"excess risk of the best scalar c ÷ that of the per-direction C*, m = {M_a}",
        aniso_note,
    ),
    "weighted_pool_gain": (
        "In a heterogeneous pool, a penalty and a factor per model estimated from the "
        "pretrained models alone (group labels and sample sizes known) lower the "
        "excess risk below that of the best equal-weight learner (both with λ tuned by "
        "leave-one-out)",
        "per-model penalties for pretrained models of different quality (ours: the "
        "heterogeneous pool and its plug-in rule)",
        "excess risk of the best equal-weight learner − that of the estimated λⱼ, cⱼ",
        pool_est_note,
    ),
}

# %%
# the pool's optimal lambda_j, c_j against the best equal-weight learner, measured:
# a check, not a claim (it holds by our closed form: D* < D(equal) and the error
# increases with D at every L; tuning by LOO only perturbs it)
rec.check(
    "pool_optimum_beats_equal_tuned",
    max(-g for g in pool_gain),
    0.0,
    op="<",
    note="Monte Carlo, λ tuned by leave-one-out, every seed: optimal λⱼ, cⱼ ÷ best "
    "equal-weight learner − 1 (largest ÷ smallest optimal penalty share "
    f"{float(opt['weights'].max() / opt['weights'].min()):.1f}). " + pool_note,
)

# %%
# id: measured per seed, rule (op, target), baseline per seed, conditions it rests on
CLAIMS = {}

# %%
CLAIMS |= {
    "debiasing_gain": (
        [round(g, 4) for g in gain_rel],
        ">=",
        0.2,
        [err(sd, ("1", M, "cv")) for sd in seeds],
        ("sources_overparameterized", "mc_precise"),
    ),
    "uncorrected_plateaus": (
        plateau,
        "<",
        0.5,
        [round(G[sd][2], 4) for sd in seeds],
        ("sources_overparameterized", "mc_precise", "cstar_gain_resolved"),
    ),
    "models_needed_contour": (
        contour_share,
        ">=",
        0.9,
        None,
        ("sources_overparameterized", "contour_crossed", "contour_mc_precise"),
    ),
    "data_driven_factor_close": (
        [round(r_, 4) for r_ in ratio],
        "<=",
        1.05,
        [err(sd, ("c*", M, 0.0)) for sd in seeds],
        ("mc_precise", "correction_matters"),
    ),
    "scalar_debias_anisotropic": (
        aniso_ratio,
        ">=",
        1.1,
        [round(best_scalar(sd, M_a, "cv")[0], 4) for sd in seeds],
        ("sources_overparameterized", "anisotropy_matters", "aniso_mc_precise"),
    ),
    "weighted_pool_gain": (
        pool_est_gain,
        ">",
        0.0,
        [round(pool_base[sd], 4) for sd in seeds],
        ("pool_weights_matter", "pool_mc_precise"),
    ),
}
for cid, (measured, op, target, baseline, given) in CLAIMS.items():
    statement, paper, unit, note = TEXT[cid]
    rec.claim(
        cid,
        statement,
        paper=paper,
        measured=measured,
        op=op,
        target=target,
        unit=unit,
        baseline=baseline,
        note=note,
        given=given,
    )
rec.save()
print(f"notebook ran in {time.perf_counter() - t_start:.0f} s")
