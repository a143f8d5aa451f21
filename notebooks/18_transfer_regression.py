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
# | | the paper | this notebook |
# |---|---|---|
# | setting | linear regression, Gaussian data, several min-norm pretrained models | the same, `d = 100` parameters, `n = 40` target samples |
# | pretrained models | over- or underparameterized | `n_s = 25` (`ρ = 0.25`) and `n_s = 200` source samples, up to `m = 64` models |
# | evaluation | analytic test error + empirical evaluation | our closed-form error next to 1,000 Monte Carlo trials per point |
# | hardware | not stated | 2 CPU cores, under a minute |
#
# :::{note}
# **What is ours.** Only the paper's abstract is public. The data model (isotropic Gaussian inputs, sources
# `βⱼ = β + δⱼ` with mismatch `τ`), the **test-error expression** below, the optimal factor `c*`, the full
# correction `1/ρ` and the **data-driven factor** `ĉ` estimated from the target data are our derivation and
# proposal from the abstract's setup; the paper's formulas, regimes and numbers may differ. The learner itself
# (least squares with a penalty on the distance to the scaled pretrained models) is the abstract's.
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
ms = [1, 2, 4, 8, 16, 32, 64]  # numbers of pretrained models
lam = 1.0  # the penalty weight per pretrained model, besides the limit lam -> 0
trials = 1000  # Monte Carlo trials per point

# %% tags=["hide-input"]
import matplotlib.pyplot as plt
import numpy as np

from helpers import claims, plotting, repro
from helpers import transfer_regression as tr

if quick:
    d, n, n_s_over, n_s_under, ms, trials = 60, 24, 15, 120, [1, 4, 16], 300

env = repro.setup(seed)
plotting.use_style()
rec = claims.ClaimsRecord(
    "18_transfer_regression",
    dict(
        quick=quick,
        seed=seed,
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
    f"sources: n_s = {n_s_under} > d = {d}"
)

# %% [markdown]
# ## 1. The pretrained models and the target learner
#
# Source `j` has its own parameter `βⱼ = β + δⱼ` (`‖δⱼ‖ ≈ τ`), `n_s` Gaussian inputs and noisy outputs; its
# pretrained model is the minimum-norm least-squares fit `θⱼ = Xⱼ⁺ yⱼ`. When `n_s < d`, `θⱼ = Pⱼβⱼ + Xⱼ⁺εⱼ` with
# `Pⱼ` the projection onto the `n_s`-dimensional row space of `Xⱼ`, and `E[Pⱼ] = ρI`: the shrinkage.
#
# Because `Σⱼ ‖b − cθⱼ‖² = m‖b − cθ̄‖² + const`, the learner has the closed form
#
# ```
# β̂ = (XᵀX + λm I)⁻¹ (Xᵀy + λm c θ̄)          λ → 0:  β̂ = cθ̄ + X⁺(y − X cθ̄)
# ```
#
# (the interpolator of the target data closest to `cθ̄`). We check it against brute-force least squares on the
# stacked system `[X; √λ I; …; √λ I] b ≈ [y; √λ cθ₁; …; √λ cθ_m]`.

# %%
rng = repro.rng(seed, 1)
beta = rng.normal(size=d)
beta /= np.linalg.norm(beta)
thetas = tr.pretrain(beta, 8, over, rng)
X = rng.normal(size=(n, d))
y = X @ beta + rng.normal(0, sigma, n)
closed_err = 0.0
for lam_ in [0.1, 1.0, 10.0]:
    for c in [1.0, 1 / over.rho]:
        for m in [1, 8]:
            closed_err = max(
                closed_err,
                float(
                    np.abs(
                        tr.transfer_fit(X, y, thetas[:m], lam_, c)
                        - tr.transfer_fit_stacked(X, y, thetas[:m], lam_, c)
                    ).max()
                ),
            )
Xs = rng.normal(size=(4, n_s_over, d))
ys = rng.normal(size=(4, n_s_over))
closed_err = max(
    closed_err,
    float(
        np.abs(
            tr.batched_min_norm(Xs, ys)
            - np.array([tr.min_norm_lstsq(a, b) for a, b in zip(Xs, ys)])
        ).max()
    ),
)
b0 = tr.transfer_fit(X, y, thetas, 0.0, 1.0)
interp_err = float(np.abs(X @ b0 - y).max())
print(
    f"closed form vs stacked least squares: max |diff| = {closed_err:.1e}; "
    f"lam -> 0 solution interpolates: max |X b - y| = {interp_err:.1e}"
)
print(
    "shrinkage: <theta_j, beta> / ||beta||^2 averages "
    f"{np.mean(thetas @ beta):.3f} (rho = {over.rho:.3f})"
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
# The target learner then has test error (exact as `λ → 0`, with `n < d − 1`)
#
# ```
# E = σ² + (1 − n/d) D + σ² n/(d − n − 1)
# ```
#
# and for `λ > 0`, with `sᵢ` the eigenvalues of `XᵀX` and `L = λm`,
# `E = σ² + E_X[σ² Σᵢ sᵢ/(sᵢ+L)² + L² (D/d) Σᵢ 1/(sᵢ+L)²]`, where we average over random designs. Learning the
# target alone gives `σ² + (1 − n/d) B + σ² n/(d − n − 1)`. Minimising `D` over `c`:
#
# ```
# c* = ρB / (ρ²B + V/m)   →  1/ρ  as m → ∞;    D(c*) → 0,   but   D(1) → (1 − ρ)² B
# ```
#
# So with `c = 1` the error of overparameterized sources is stuck at a floor set by the shrinkage, however many
# models we average; `c = 1/ρ` removes the bias but multiplies the variance by `1/ρ²` (bad for small `m`); `c*`
# balances both. The data-driven `ĉ = ⟨Xθ̄, y⟩ / ‖Xθ̄‖²` is the least-squares fit of the scalar on the target data.

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
target_only = tr.test_error_target_only(over)
for s in (over, under):
    rho, V = tr.source_moments(s)
    print(
        f"n_s={s.n_s}: rho={rho:.2f}, V={V:.3f}; c* at m={ms[0]}..{ms[-1]}: "
        + ", ".join(f"{tr.c_star(m, s):.2f}" for m in ms)
    )
print(f"target only: {target_only:.4f}")

# %% [markdown]
# ## 3. Monte Carlo, side by side
#
# Every trial draws a fresh `β`, `max(m)` source tasks with their pretrained models, and target data; the curves
# over `m` use the first `m` models of the same draw. The error of each estimate is exact given it:
# `σ² + ‖β̂ − β‖²`.

# %%
mc = {
    s.n_s: tr.monte_carlo(s, ms, [0.0, lam], trials, seed=seed + i, progress=True)
    for i, s in enumerate((over, under))
}
worst_dev, rows = 0.0, []
for (ns, r, m, l_), a in analytic.items():
    mean, se = mc[ns][(r, m, l_)]
    dev = abs(mean - a) / a
    worst_dev = max(worst_dev, dev)
    rows.append((ns, r, m, l_, a, mean, se, dev))
print(
    f"{'n_s':>4} {'c':>6} {'m':>3} {'lam':>4} {'analytic':>9} "
    f"{'Monte Carlo':>16} {'dev':>6}"
)
for ns, r, m, l_, a, mean, se, dev in rows:
    if m in (ms[0], ms[len(ms) // 2], ms[-1]):
        print(
            f"{ns:>4} {r:>6} {m:>3} {l_:>4} {a:>9.4f} {mean:>9.4f} ± {se:.4f} "
            f"{dev:>6.2%}"
        )
print(f"largest relative deviation over all {len(rows)} points: {worst_dev:.2%}")

# %%
styles = {
    "1": ("c = 1 (no correction)", plotting.PALETTE[0]),
    "1/rho": ("c = 1/ρ", plotting.PALETTE[1]),
    "c*": ("c = c*", plotting.PALETTE[2]),
    "c_hat": ("c = ĉ (data-driven)", plotting.PALETTE[3]),
}
fig, axes = plt.subplots(2, 2, figsize=(11, 7), sharex=True)
for col, s in enumerate((over, under)):
    for row, l_ in enumerate((0.0, lam)):
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
                ms=4,
                capsize=2,
                label=f"{name}, Monte Carlo" if r == "c_hat" else None,
            )
            if r != "c_hat":
                ax.plot(
                    ms,
                    [analytic[(s.n_s, r, m, l_)] for m in ms],
                    color=color,
                    label=f"{name}, analytic",
                )
        ax.axhline(target_only, ls="--", color="gray", label="target data only (λ → 0)")
        kind = (
            f"overparameterized sources, ρ = {s.rho:.2f}"
            if s.overparameterized
            else f"underparameterized sources, n_s = {s.n_s}"
        )
        ax.set(
            xscale="log",
            title=f"{kind}, λ {'→ 0' if l_ == 0 else '= ' + str(l_)}",
            ylim=(0, 1.6 * target_only),
        )
        ax.set_xticks(ms, [str(m) for m in ms])
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
# and `c = 1` keeps improving with `m`.
#
# ## 4. When does transfer beat learning the target alone?
#
# As `λ → 0`, transfer wins exactly when `D < B`. With `c = 1` that needs `m > V / (ρ(2 − ρ)B)` models, and for
# `ρ` small the achievable gain is capped; with `c*` any `m` helps a little and many models help a lot. The phase
# diagram shows the analytic gain `E_target only − E_transfer` over the source size `n_s` (hence `ρ`) and `m`.

# %%
ns_grid = [k for k in range(4, 2 * d, max(1, d // 25)) if abs(k - d) > 2]
m_grid = np.unique(np.round(np.logspace(0, np.log10(4 * ms[-1]), 30)).astype(int))
gain = {}
for r in ("1", "c*"):
    G = np.zeros((len(ns_grid), len(m_grid)))
    for i, ns in enumerate(ns_grid):
        s = over.with_(n_s=ns)
        for j, m in enumerate(m_grid):
            G[i, j] = target_only - tr.test_error(s, int(m), factor(r, int(m), s), 0.0)
    gain[r] = G
# colours saturate below -vmax (near n_s = d the loss is large)
vmax = max(float(g.max()) for g in gain.values())
fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), sharey=True)
for ax, r in zip(axes, ("1", "c*")):
    im = ax.pcolormesh(
        m_grid, ns_grid, gain[r], cmap="RdBu", vmin=-vmax, vmax=vmax, shading="nearest"
    )
    ax.contour(m_grid, ns_grid, gain[r], levels=[0], colors="k", linewidths=1)
    ax.axhline(d, color="gray", ls=":")
    ax.set(
        xscale="log",
        xlabel="number of pretrained models m",
        title=f"gain of transfer, {styles[r][0]}",
    )
axes[0].set_ylabel("source samples n_s (d dotted)")
fig.colorbar(im, ax=axes, label="target-only error − transfer error")
plt.show()

# %% [markdown]
# ## 5. The penalty weight
#
# Analytic test error against `λ` for a few `m` (overparameterized sources, `c = 1` and `c*`); the marker is
# `λ* = σ²d / (m D)`, optimal if `cθ̄ − β` were isotropic Gaussian.

# %%
lams = np.logspace(-3, 2, 30)
fig, ax = plt.subplots(figsize=(7, 3.6))
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
        ls_ = tr.lambda_star(m, c, over)
        ax.plot(
            [ls_],
            [tr.test_error(over, m, c, ls_, eigs=eig[over.n_s][:1000])],
            "o",
            color=plotting.PALETTE[k],
        )
ax.axhline(target_only, ls=":", color="gray")
ax.set(xscale="log", xlabel="λ (per pretrained model)", ylabel="test error")
ax.legend(fontsize=7, ncol=2)
plt.show()

# %% [markdown]
# ## 6. Interaction
#
# The slider moves the task mismatch `τ`: analytic error against `m` for the three factors (overparameterized
# sources, `λ → 0`). A larger mismatch adds variance `ρτ²/m` per model, so more models are needed before the
# correction pays off.

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
    ax.axhline(target_only, ls="--", color="gray", label="target only")
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
        print(
            f"{styles[r][0]:24} c = {factor(r, m, s):6.3f}   test error "
            f"{tr.test_error(s, m, factor(r, m, s), 0.0):.4f}"
        )
    print(f"{'target data only':24} {'':10}   test error {target_only:.4f}")


plotting.live_controls(live, n_s=(2, 3 * d), tau_=(0.0, 3.0, 0.1), m=(1, 256))

# %% [markdown]
# ## 7. Checks

# %%
d_excess = max(
    tr.bias_D(tr.c_star(int(m), s), int(m), s)
    - min(tr.bias_D(1.0, int(m), s), tr.bias_D(1 / s.rho, int(m), s))
    for s in [over.with_(n_s=ns) for ns in ns_grid]
    for m in m_grid
)
rec.check("closed_form_matches_lstsq", closed_err, 1e-8, op="<=")
rec.check(
    "analytic_matches_monte_carlo",
    worst_dev,
    0.03,
    op="<=",
    note=f"{len(rows)} points (c = 1, 1/ρ, c*; λ → 0 and λ = {lam}; over- and "
    "underparameterized sources), "
    f"{trials} trials each",
)
rec.check(
    "debias_optimal",
    d_excess,
    0.0,
    op="<=",
    note="max over the phase-diagram grid of D(c*) − min(D(1), D(1/ρ))",
)
rec.check("interpolates_at_zero_lambda", interp_err, 1e-8, op="<=")

# %% [markdown]
# ## 8. The claims record

# %%
M = ms[-1]
e1, se1 = mc[over.n_s][("1", M, 0.0)]
ec, sec = mc[over.n_s][("c*", M, 0.0)]
eh, seh = mc[over.n_s][("c_hat", M, 0.0)]
e1_small = mc[over.n_s][("1", ms[0], 0.0)][0]
rho, V = tr.source_moments(over)
m_needed = V / (rho * (2 - rho) * over.B)
floor = (
    over.sigma**2 + (1 - n / d) * (1 - rho) ** 2 * over.B + sigma**2 * n / (d - n - 1)
)
diff_se = float(np.hypot(se1, sec))
rec.claim(
    "more_models_need_debiasing",
    "With overparameterized pretrained models, many models are needed and, "
    "without correction, the "
    "shrinkage bias limits them: at the largest m, c = 1 is clearly worse than c*",
    paper="many models important; bias limits them",
    measured=f"{e1:.4f} vs {ec:.4f}",
    unit=f"test error at m = {M}, c = 1 vs c* (λ → 0)",
    holds=e1 - ec > 2 * diff_se,
    note=f"c = 1 needs m > {m_needed:.1f} models to beat the target alone "
    f"({target_only:.4f}); its error "
    f"went {e1_small:.4f} (m = {ms[0]}) -> {e1:.4f} (m = {M}) towards the "
    f"analytic floor {floor:.4f}.",
)
gain_rel = (e1 - ec) / e1
rec.claim(
    "debiasing_gain",
    "The multiplicative correction c* reduces the test error at the largest m",
    paper="debiasing reduces the overparameterization bias",
    measured=round(gain_rel, 4),
    unit=f"relative error reduction at m = {M} (λ → 0)",
    holds=e1 - ec > 2 * diff_se,
    note=f"c* = {tr.c_star(M, over):.2f} (1/ρ = {1 / rho:.2f}); at λ = {lam}: "
    f"{mc[over.n_s][('1', M, lam)][0]:.4f} -> {mc[over.n_s][('c*', M, lam)][0]:.4f}",
)
ratio = eh / ec
rec.claim(
    "data_driven_factor_close",
    "The factor estimated from the target data alone is nearly as good as the "
    "oracle c* (error ratio <= 1.05)",
    paper="simple debiasing factor (ours: data-driven ĉ)",
    measured=round(ratio, 4),
    unit=f"error(ĉ) / error(c*) at m = {M}",
    holds=ratio <= 1.05,
    note=f"mean ĉ = {mc[over.n_s]['c_hat'][M]:.2f} vs c* = {tr.c_star(M, over):.2f}; "
    "ratios at every m: "
    + ", ".join(
        f"{m}: "
        f"{mc[over.n_s][('c_hat', m, 0.0)][0] / mc[over.n_s][('c*', m, 0.0)][0]:.3f}"
        for m in ms
    ),
)
rec.save()
