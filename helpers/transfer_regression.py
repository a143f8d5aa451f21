"""Transfer learning for linear regression from many least-squares pretrained models, and its debiasing.

Data model (Gaussian, as in the paper's setting): target ``y = X beta + eps`` with ``X`` i.i.d. N(0, 1) of size
``n x d`` and noise variance ``sigma^2``; the test error of an estimate ``b`` is ``sigma^2 + ||b - beta||^2``.
Source ``j = 1..m`` has ``beta_j = beta + delta_j`` (``delta_j ~ N(0, tau^2/d I)``: the task mismatch) and
``n_s`` samples with noise ``sigma_s``. Each pretrained model is the minimum-L2-norm least-squares fit
``theta_j = X_j^+ y_j``; when ``n_s < d`` it lies in the ``n_s``-dimensional row space of ``X_j`` and is shrunk
towards zero: ``E[theta_j] = rho beta`` with ``rho = n_s / d`` (the overparameterisation bias).

The target learner penalises the distance to the scaled pretrained models::

    beta_hat = argmin_b ||y - X b||^2 + sum_j lam_j ||b - c theta_j||^2
             = (X^T X + L I)^{-1} (X^T y + L c theta_w),   L = sum_j lam_j,  theta_w = sum_j lam_j theta_j / L

(``lam_j = lam`` for all ``j`` gives ``L = lam m`` and the plain average) and, as ``L -> 0``, the interpolator
closest to ``c theta_w``: ``c theta_w + X^+ (y - X c theta_w)``. With the anchor ``a = 0`` the same formula is
ridge regression on the target data alone: the baseline.

Because ``X`` is rotation invariant and ``beta`` isotropic, the expected test error depends on the anchor only
through ``D = E||a - beta||^2`` and increases with it, at every ``L``. The test-error expression, the correction
factors (``c*``, ``1/rho``, the data-driven ``c_hat``) and the leave-one-out tuning are our derivation from this
setup; the paper's own formulas are not public.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from helpers import validate

__all__ = [
    "Setting", "min_norm_lstsq", "batched_min_norm", "pretrain", "transfer_fit", "transfer_fit_stacked",
    "source_moments", "bias_D", "bias_D_weighted", "c_star", "test_error", "test_error_D", "test_error_mp",
    "target_eigenvalues", "test_error_target_only", "ridge_error", "optimal_L", "data_driven_c", "loo_cv",
    "cv_fit", "monte_carlo", "paired", "lambda_star", "models_needed", "contour_point", "RULES",
    "power_law_spectrum", "shrinkage_profile", "direction_moments", "direction_D", "c_direction",
    "c_scalar_weighted", "pool_optimal", "pool_equal_c", "pool_estimate", "anchor_monte_carlo", "pick_by_loo",
]

RULES = ("1", "1/rho", "c*", "c_hat")


@dataclass(frozen=True)
class Setting:
    """Sizes and noise levels of one transfer problem."""

    d: int = 100  # parameters
    n: int = 40  # target samples
    n_s: int = 25  # samples per source task
    sigma: float = 0.5  # target noise std
    sigma_s: float = 0.5  # source noise std
    tau: float = 0.5  # task mismatch: ||beta_j - beta|| is about tau
    B: float = 1.0  # ||beta||^2

    def __post_init__(self) -> None:
        for name in ("d", "n", "n_s"):
            object.__setattr__(self, name, validate.integer(name, getattr(self, name), min=1))
        for name in ("sigma", "sigma_s", "tau"):
            object.__setattr__(self, name, validate.nonnegative(name, getattr(self, name)))
        object.__setattr__(self, "B", validate.positive("B", self.B))
        if abs(self.n_s - self.d) <= 1:
            raise ValueError(f"n_s = {self.n_s} is within 1 of d = {self.d}: the min-norm source fit has "
                             "unbounded variance there")

    @property
    def rho(self) -> float:
        """Shrinkage of a min-norm pretrained model: ``n_s / d`` if overparameterised, else 1."""
        return min(1.0, self.n_s / self.d)

    @property
    def overparameterized(self) -> bool:
        """True when each source has fewer samples than parameters (``n_s < d``)."""
        return self.n_s < self.d

    def with_(self, **kw) -> Setting:
        """A copy with some fields replaced (validated again)."""
        return replace(self, **kw)


def _setting(s: object) -> Setting:
    return validate.instance("s", s, Setting)


def _lam(name: str, lam: object) -> float:
    return validate.nonnegative(name, lam)


def _m(m: object) -> int:
    return validate.integer("m", m, min=1)


def _spec(spec: object, d: int) -> np.ndarray:
    return validate.array("spec", spec, shape=(d,), dtype="float", min=0, strict_min=True)


def min_norm_lstsq(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The minimum-L2-norm least-squares solution ``X^+ y`` (interpolates when ``n < d``)."""
    X = validate.array("X", X, ndim=2, dtype="float", nonempty=True)
    y = validate.array("y", y, shape=(X.shape[0],), dtype="float")
    return np.linalg.lstsq(X, y, rcond=None)[0]


def pretrain(beta: np.ndarray, m: int, s: Setting, rng: np.random.Generator, spec: np.ndarray | None = None
             ) -> np.ndarray:
    """``m`` pretrained models (rows), each the min-norm least-squares fit on its own related source task.

    ``spec``: the variances of the input features (a diagonal covariance); None is isotropic (all ones)."""
    s = _setting(s)
    beta = validate.array("beta", beta, shape=(s.d,), dtype="float")
    m = _m(m)
    rng = validate.instance("rng", rng, np.random.Generator)
    scale = None if spec is None else np.sqrt(_spec(spec, s.d))
    betas = beta + rng.normal(0, s.tau / np.sqrt(s.d), (m, s.d))
    Xs = rng.normal(size=(m, s.n_s, s.d))
    if scale is not None:
        Xs *= scale
    ys = (Xs @ betas[..., None])[..., 0] + rng.normal(0, s.sigma_s, (m, s.n_s))
    return batched_min_norm(Xs, ys)


def batched_min_norm(Xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """Min-norm least squares for a batch of full-rank problems, via the normal equations: ``X^T (X X^T)^{-1} y``
    when ``n < d``, ``(X^T X)^{-1} X^T y`` otherwise (equal to :func:`min_norm_lstsq`, much faster)."""
    Xs = validate.array("Xs", Xs, ndim=3, dtype="float", nonempty=True)
    ys = validate.array("ys", ys, shape=Xs.shape[:2], dtype="float")
    n, d = Xs.shape[1:]
    if n < d:
        G = Xs @ Xs.transpose(0, 2, 1)
        return (Xs.transpose(0, 2, 1) @ np.linalg.solve(G, ys[..., None]))[..., 0]
    G = Xs.transpose(0, 2, 1) @ Xs
    return np.linalg.solve(G, Xs.transpose(0, 2, 1) @ ys[..., None])[..., 0]


def _check_target(X, y, thetas) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    X = validate.array("X", X, ndim=2, dtype="float", nonempty=True)
    y = validate.array("y", y, shape=(X.shape[0],), dtype="float")
    thetas = validate.array("thetas", np.atleast_2d(validate.array("thetas", thetas, ndim=(1, 2), dtype="float")),
                            shape=(None, X.shape[1]), nonempty=True)
    return X, y, thetas


def _weights(lam: object, m: int) -> tuple[float, np.ndarray]:
    """``(L, w)``: the total penalty ``sum_j lam_j`` and the weights ``lam_j / L`` (uniform if ``L = 0``)."""
    if np.ndim(lam) == 0:
        lam = _lam("lam", lam)
        return lam * m, np.full(m, 1.0 / m)
    lam = validate.array("lam", lam, shape=(m,), dtype="float", min=0)
    L = float(lam.sum())
    return L, (lam / L if L > 0 else np.full(m, 1.0 / m))


def transfer_fit(X: np.ndarray, y: np.ndarray, thetas: np.ndarray, lam: float | np.ndarray, c: float = 1.0
                 ) -> np.ndarray:
    """Closed form of ``argmin ||y - X b||^2 + sum_j lam_j ||b - c theta_j||^2``.

    ``lam``: one weight for every pretrained model, or an array with one per model. ``lam = 0`` gives the limit
    ``lam -> 0+`` (the interpolator nearest to ``c theta_bar`` when ``n < d``).
    """
    X, y, thetas = _check_target(X, y, thetas)
    c = validate.number("c", c)
    m, d = thetas.shape
    L, w = _weights(lam, m)
    anchor = c * (w @ thetas)
    if L == 0:
        return anchor + min_norm_lstsq(X, y - X @ anchor)
    return np.linalg.solve(X.T @ X + L * np.eye(d), X.T @ y + L * anchor)


def transfer_fit_stacked(X: np.ndarray, y: np.ndarray, thetas: np.ndarray, lam: float | np.ndarray,
                         c: float = 1.0) -> np.ndarray:
    """The same estimate by brute force: ordinary least squares on ``[X; sqrt(lam_1) I; ...]`` against
    ``[y; sqrt(lam_1) c theta_1; ...]`` (one block per pretrained model). The reference for :func:`transfer_fit`."""
    X, y, thetas = _check_target(X, y, thetas)
    c = validate.number("c", c)
    m, d = thetas.shape
    lams = np.full(m, _lam("lam", lam)) if np.ndim(lam) == 0 else validate.array("lam", lam, shape=(m,), min=0)
    if not (lams.min() > 0):
        raise ValueError(f"the stacked form needs lam > 0 for every model, got min {lams.min()}")
    A = np.vstack([X] + [np.sqrt(lj) * np.eye(d) for lj in lams])
    b = np.concatenate([y] + [np.sqrt(lj) * c * t for lj, t in zip(lams, thetas)])
    return np.linalg.lstsq(A, b, rcond=None)[0]


def source_moments(s: Setting) -> tuple[float, float]:
    """``(rho, V)``: ``E[theta_j] = rho beta`` and ``V = E||theta_j - rho beta||^2``.

    Overparameterised (``n_s < d - 1``): ``V = rho (1 - rho) B + rho tau^2 + sigma_s^2 n_s / (d - n_s - 1)``.
    Underparameterised (``n_s > d + 1``): ``rho = 1`` and ``V = tau^2 + sigma_s^2 d / (n_s - d - 1)``.
    """
    s = _setting(s)
    if s.overparameterized:
        rho = s.n_s / s.d
        return rho, rho * (1 - rho) * s.B + rho * s.tau**2 + s.sigma_s**2 * s.n_s / (s.d - s.n_s - 1)
    return 1.0, s.tau**2 + s.sigma_s**2 * s.d / (s.n_s - s.d - 1)


def bias_D(c: float, m: int, s: Setting) -> float:
    """``D = E||c theta_bar - beta||^2 = (c rho - 1)^2 B + c^2 V / m``."""
    c, m = validate.number("c", c), _m(m)
    rho, V = source_moments(s)
    return (c * rho - 1) ** 2 * s.B + c**2 * V / m


def bias_D_weighted(c: float, weights: Sequence[float], sources: Sequence[Setting]) -> float:
    """``D`` for a weighted anchor ``c sum_j w_j theta_j`` from heterogeneous sources (same ``d`` and ``B``):
    ``(c sum_j w_j rho_j - 1)^2 B + c^2 sum_j w_j^2 V_j`` (the deviations ``theta_j - rho_j beta`` are
    independent with mean zero given ``beta``)."""
    c = validate.number("c", c)
    sources = validate.sequence("sources", sources, min_len=1, of=lambda k, v: validate.instance(k, v, Setting))
    w = validate.array("weights", weights, shape=(len(sources),), dtype="float", min=0)
    if not (abs(w.sum() - 1) < 1e-9):
        raise ValueError(f"weights must sum to 1, got {w.sum()}")
    if len({(t.d, t.B) for t in sources}) != 1:
        raise ValueError("sources must share d and B")
    mom = np.array([source_moments(t) for t in sources])
    return float((c * (w @ mom[:, 0]) - 1) ** 2 * sources[0].B + c**2 * (w**2 @ mom[:, 1]))


def c_star(m: int, s: Setting) -> float:
    """The factor minimising ``D``: ``rho B / (rho^2 B + V / m)`` (tends to ``1/rho`` as ``m`` grows)."""
    m = _m(m)
    rho, V = source_moments(s)
    return rho * s.B / (rho**2 * s.B + V / m)


def _one_thread():
    """Tiny matrices: one BLAS thread is much faster than several fighting over the cores."""
    try:
        from threadpoolctl import threadpool_limits

        return threadpool_limits(1)
    except ImportError:  # pragma: no cover
        import contextlib

        return contextlib.nullcontext()


def target_eigenvalues(s: Setting, draws: int = 2000, seed: int = 0) -> np.ndarray:
    """Nonzero eigenvalues of ``X^T X`` for ``draws`` random target designs, shape ``(draws, min(n, d))`` (reuse
    them across calls of :func:`test_error`)."""
    s = _setting(s)
    draws = validate.integer("draws", draws, min=1)
    rng = np.random.default_rng(validate.seed("seed", seed))
    out = []
    with _one_thread():
        for _ in range(draws):
            X = rng.normal(size=(s.n, s.d))
            out.append(np.linalg.eigvalsh(X @ X.T if s.n <= s.d else X.T @ X))
    return np.array(out)


def test_error_D(s: Setting, D: float, L: float, *, eigs: np.ndarray | None = None, draws: int = 2000,
                 seed: int = 0) -> float:
    """Expected test error of ``(X^T X + L I)^{-1}(X^T y + L a)`` for an anchor with ``E||a - beta||^2 = D``
    (independent of the target data, isotropic given its norm).

    ``L = 0`` (the limit) with ``n < d - 1``: exact, ``sigma^2 + (1 - n/d) D + sigma^2 n / (d - n - 1)``.
    ``L > 0``: ``sigma^2 + E_X[sigma^2 sum s_i/(s_i+L)^2 + L^2 (D/d) sum_{i<=d} 1/(s_i+L)^2]``, exact given the
    eigenvalues ``s_i`` of ``X^T X``; the expectation over ``X`` is averaged over random designs (``eigs``, or
    ``draws`` fresh ones).
    """
    s = _setting(s)
    D, L = validate.nonnegative("D", D), _lam("L", L)
    if L == 0:
        if not (s.n < s.d - 1):
            raise ValueError(f"the L -> 0 formula needs an overparameterised target, n < d - 1; got n = {s.n}, "
                             f"d = {s.d}")
        return s.sigma**2 + (1 - s.n / s.d) * D + s.sigma**2 * s.n / (s.d - s.n - 1)
    ev = target_eigenvalues(s, draws, seed) if eigs is None else validate.array(
        "eigs", eigs, shape=(None, min(s.n, s.d)), dtype="float", min=0, nonempty=True)
    noise = s.sigma**2 * np.sum(ev / (ev + L) ** 2, axis=1)
    zeros = s.d - ev.shape[1]  # eigenvalues of X^T X that are exactly zero
    shrink = L**2 * (D / s.d) * (np.sum(1 / (ev + L) ** 2, axis=1) + zeros / L**2)
    return float(s.sigma**2 + np.mean(noise + shrink))


def test_error(s: Setting, m: int, c: float, lam: float, *, draws: int = 2000, seed: int = 0,
               eigs: np.ndarray | None = None) -> float:
    """Expected test error ``sigma^2 + E||beta_hat - beta||^2`` of the transfer learner with ``m`` models, factor
    ``c`` and penalty ``lam`` per model (``L = lam m``); see :func:`test_error_D`."""
    m, lam = _m(m), _lam("lam", lam)
    return test_error_D(s, bias_D(c, m, s), lam * m, eigs=eigs, draws=draws, seed=seed)


def _mp_stieltjes(s: Setting, L: float) -> tuple[float, float]:
    """``(t1, t2)`` with ``t1 = E tr (X^T X + L)^{-1}`` and ``t2 = E tr (X^T X + L)^{-2}`` under the
    Marchenko-Pastur limit (``d x d`` matrix, zero eigenvalues included)."""
    g = s.d / s.n
    z = -L / s.n  # Stieltjes transform of S = X^T X / n at z: g z m^2 - (1 - g - z) m + 1 = 0
    a, b = g * z, -(1 - g - z)
    disc = np.sqrt(b * b - 4 * a)
    roots = [(-b + disc) / (2 * a), (-b - disc) / (2 * a)]
    mz = min(r for r in roots if r > 0)  # the Stieltjes transform at z < 0 is positive and at most -1/z
    dm = -(g * mz**2 + mz) / (2 * g * z * mz - (1 - g - z))  # implicit differentiation in z
    t1 = s.d * mz / s.n
    t2 = s.d * dm / s.n**2
    return t1, t2


def test_error_mp(s: Setting, D: float, L: float) -> float:
    """:func:`test_error_D` for ``L > 0`` with the expectation over ``X`` in closed form: the Marchenko-Pastur
    limit of the spectrum of ``X^T X`` (``n, d -> infinity`` with ``d/n`` fixed); no random draws."""
    s = _setting(s)
    D, L = validate.nonnegative("D", D), validate.positive("L", L)
    t1, t2 = _mp_stieltjes(s, L)
    # sum s/(s+L)^2 = sum 1/(s+L) - L sum 1/(s+L)^2 over all d eigenvalues (zeros contribute 0)
    return float(s.sigma**2 + s.sigma**2 * (t1 - L * t2) + L**2 * (D / s.d) * t2)


def test_error_target_only(s: Setting) -> float:
    """Min-norm least squares on the target data alone (``n < d - 1``): ``sigma^2 + (1 - n/d) B +
    sigma^2 n / (d - n - 1)``."""
    s = _setting(s)
    return test_error_D(s, s.B, 0.0)


def ridge_error(s: Setting, L: float, *, eigs: np.ndarray | None = None) -> float:
    """Expected test error of ridge regression ``(X^T X + L I)^{-1} X^T y`` on the target data alone: the anchor
    is 0, so ``D = B``."""
    s = _setting(s)
    return test_error_D(s, s.B, L, eigs=eigs)


def optimal_L(s: Setting, D: float, *, eigs: np.ndarray | None = None, bounds: tuple[float, float] = (1e-4, 1e5)
              ) -> tuple[float, float]:
    """``(L*, error)``: the total penalty minimising the expected test error :func:`test_error_D` for anchor error
    ``D``, found numerically (bounded search over ``log L``; ``eigs`` as in :func:`test_error_D`, or the
    Marchenko-Pastur closed form when ``eigs`` is None)."""
    from scipy.optimize import minimize_scalar

    s = _setting(s)
    D = validate.nonnegative("D", D)
    lo, hi = validate.positive("bounds[0]", bounds[0]), validate.positive("bounds[1]", bounds[1])
    if not lo < hi:
        raise ValueError(f"bounds must be increasing, got {bounds}")

    def f(t: float) -> float:
        L = float(np.exp(t))
        return test_error_D(s, D, L, eigs=eigs) if eigs is not None else test_error_mp(s, D, L)

    res = minimize_scalar(f, bounds=(np.log(lo), np.log(hi)), method="bounded", options={"xatol": 1e-4})
    return float(np.exp(res.x)), float(res.fun)


def lambda_star(m: int, c: float, s: Setting) -> float:
    """``lam`` with ``lam m = sigma^2 d / D`` (optimal if ``c theta_bar - beta`` were isotropic Gaussian)."""
    m = _m(m)
    return s.sigma**2 * s.d / bias_D(c, m, s) / m


def models_needed(s: Setting, c: float | str, *, m_max: int = 10**6) -> int | None:
    """The smallest ``m`` with ``D(c, m) < B``: from there on the transfer learner beats learning from the target
    data alone, at every common ``L`` (the error increases with ``D``), hence also with both penalties tuned.
    ``c`` is a number or one of ``"1"``, ``"1/rho"``, ``"c*"``. None if no ``m <= m_max`` does."""
    s = _setting(s)
    m_max = validate.integer("m_max", m_max, min=1)
    rho, V = source_moments(s)
    if isinstance(c, str):
        validate.one_of("c", c, ("1", "1/rho", "c*"))
        if c == "c*":  # D(c*, m) = B (V/m) / (rho^2 B + V/m) < B for every m
            return 1
        c = 1.0 if c == "1" else 1 / rho
    c = validate.number("c", c)
    bias = (c * rho - 1) ** 2 * s.B
    if not bias < s.B:  # the bias alone is at least B: no number of models helps
        return None
    m = max(1, int(np.floor(c**2 * V / (s.B - bias))) + 1)  # smallest m with bias + c^2 V / m < B
    while m > 1 and bias_D(c, m - 1, s) < s.B:  # guard against rounding at the boundary
        m -= 1
    while bias_D(c, m, s) >= s.B:
        m += 1
    return m if m <= m_max else None


def data_driven_c(X: np.ndarray, y: np.ndarray, thetas: np.ndarray) -> float:
    """A factor from the target data alone: least squares for the scalar, ``<X theta_bar, y> / ||X theta_bar||^2``."""
    X, y, thetas = _check_target(X, y, thetas)
    z = X @ thetas.mean(axis=0)
    zz = float(z @ z)
    return float(z @ y / zz) if zz > 0 else 1.0


def _svd(X: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    U, S, Vt = np.linalg.svd(X, full_matrices=False)
    return U, S, Vt


def _loo(U: np.ndarray, S: np.ndarray, r: np.ndarray, Ls: np.ndarray) -> np.ndarray:
    """Leave-one-out mean squared error of ridge on residual ``r`` for each ``L`` in ``Ls`` (thin SVD of ``X``)."""
    F = S**2 / (S**2 + Ls[:, None])  # (K, k) shrinkage of each singular direction
    z = U.T @ r
    fitted = (F * z) @ U.T  # (K, n): H r
    lev = F @ (U**2).T  # (K, n): diag H
    return np.mean(((r - fitted) / (1 - lev)) ** 2, axis=1)


def loo_cv(X: np.ndarray, y: np.ndarray, Ls: Sequence[float], anchor: np.ndarray | None = None) -> np.ndarray:
    """Leave-one-out cross-validation error on the target data of ``(X^T X + L I)^{-1}(X^T y + L anchor)`` for
    each total penalty ``L`` in ``Ls`` (closed form: ``e_i = r_i - (H r)_i`` over ``1 - H_ii`` with
    ``r = y - X anchor`` and ``H = X (X^T X + L I)^{-1} X^T``). ``anchor = None`` is plain ridge."""
    X = validate.array("X", X, ndim=2, dtype="float", nonempty=True)
    y = validate.array("y", y, shape=(X.shape[0],), dtype="float")
    Ls = validate.array("Ls", Ls, ndim=1, dtype="float", nonempty=True, min=0, strict_min=True)
    a = np.zeros(X.shape[1]) if anchor is None else validate.array("anchor", anchor, shape=(X.shape[1],),
                                                                   dtype="float")
    U, S, _ = _svd(X)
    return _loo(U, S, y - X @ a, Ls)


def cv_fit(X: np.ndarray, y: np.ndarray, Ls: Sequence[float], anchor: np.ndarray | None = None
           ) -> tuple[np.ndarray, float]:
    """``(estimate, L)``: the penalised fit towards ``anchor`` (ridge if None) at the ``L`` in ``Ls`` with the
    smallest leave-one-out error on the target data (:func:`loo_cv`)."""
    cv = loo_cv(X, y, Ls, anchor)
    L = float(np.asarray(Ls, float)[int(np.argmin(cv))])
    a = np.zeros(X.shape[1]) if anchor is None else np.asarray(anchor, float)
    U, S, Vt = _svd(np.asarray(X, float))
    return a + Vt.T @ (S / (S**2 + L) * (U.T @ (np.asarray(y, float) - X @ a))), L


def monte_carlo(s: Setting, ms: Sequence[int], lams: Sequence[float], trials: int, seed: int = 0,
                rules: Sequence[str] = RULES, cv_Ls: Sequence[float] | None = None, progress: bool = False) -> dict:
    """Monte Carlo test error over ``trials`` independent draws of ``beta``, sources and target data.

    Each trial draws ``max(ms)`` pretrained models and uses the first ``m`` of them for every ``m`` in ``ms``, so
    the curves over ``m`` share randomness (and differences between rules are paired). Keys ``(rule, m, lam)``
    with ``lam`` a penalty per model (``L = lam m``; 0 is the limit) and, if ``cv_Ls`` is given, ``(rule, m,
    "cv")`` with ``L`` chosen from ``cv_Ls`` by leave-one-out on the target data, plus the baselines
    ``("ridge", 0, "cv")`` (ridge tuned the same way) and ``("ridge", 0, "oracle")`` (ridge at the Bayes-optimal
    ``L = sigma^2 d / B``). Returns ``{key: (mean, standard error)}``, ``"samples"``: ``{key: per-trial errors}``
    and ``"c_hat"``: ``{m: mean data-driven factor}``. The test error is exact given the estimate:
    ``sigma^2 + ||beta_hat - beta||^2``.
    """
    s = _setting(s)
    trials = validate.integer("trials", trials, min=2)
    ms = validate.sequence("ms", ms, min_len=1, of=lambda k, v: validate.integer(k, v, min=1))
    lams = validate.sequence("lams", lams, of=_lam)
    seed = validate.seed("seed", seed)
    rules = validate.sequence("rules", rules, min_len=1, of=lambda k, v: validate.one_of(k, v, RULES))
    if cv_Ls is not None:
        cv_Ls = validate.array("cv_Ls", cv_Ls, ndim=1, dtype="float", nonempty=True, min=0, strict_min=True)
    progress = validate.boolean("progress", progress)
    with _one_thread():
        return _monte_carlo(s, ms, lams, trials, seed, tuple(rules), cv_Ls, progress)


def _monte_carlo(s, ms, lams, trials, seed, rules, cv_Ls, progress) -> dict:
    rng = np.random.default_rng(seed)
    rho = s.rho
    keys = [(r, m, lam) for r in rules for m in ms for lam in lams]
    if cv_Ls is not None:
        keys += [(r, m, "cv") for r in rules for m in ms] + [("ridge", 0, "cv"), ("ridge", 0, "oracle")]
    errs = {k: np.empty(trials) for k in keys}
    chat = {m: np.empty(trials) for m in ms}
    it = range(trials)
    if progress:
        from tqdm.auto import tqdm

        it = tqdm(it, desc=f"Monte Carlo n_s={s.n_s}")
    ms_arr = np.array(ms)
    cstar = np.array([c_star(m, s) for m in ms])
    pairs = [(r, i) for i in range(len(ms)) for r in rules]  # one row per (rule, m)
    L_oracle = s.sigma**2 * s.d / s.B
    for t in it:
        beta = rng.normal(size=s.d)
        beta *= np.sqrt(s.B) / np.linalg.norm(beta)
        thetas = pretrain(beta, max(ms), s, rng)
        X = rng.normal(size=(s.n, s.d))
        y = X @ beta + rng.normal(0, s.sigma, s.n)
        U, S, Vt = _svd(X)
        tbar = np.cumsum(thetas, axis=0)[ms_arr - 1] / ms_arr[:, None]  # (M, d): mean of the first m models
        Xt = tbar @ X.T  # (M, n)
        zz = np.einsum("mn,mn->m", Xt, Xt)
        ch = np.where(zz > 0, Xt @ y / np.where(zz > 0, zz, 1), 1.0)
        for i, m in enumerate(ms):
            chat[m][t] = ch[i]
        factors = {"1": np.ones(len(ms)), "1/rho": np.full(len(ms), 1 / rho), "c*": cstar, "c_hat": ch}
        c = np.array([factors[r][i] for r, i in pairs])
        rows = np.array([i for _, i in pairs])
        A = c[:, None] * tbar[rows]  # anchors, (P, d)
        resid = y - c[:, None] * Xt[rows]  # (P, n)
        Z = resid @ U  # U^T (y - X a), per row
        dev = A - beta
        N = np.einsum("pd,pd->p", dev, dev)
        Pv = dev @ Vt.T  # (P, n)

        def err(g: np.ndarray) -> np.ndarray:
            # ||a + V g - beta||^2 = ||a - beta||^2 + 2 <V^T (a - beta), g> + ||g||^2  (V has orthonormal columns)
            return s.sigma**2 + N + 2 * np.einsum("pn,pn->p", Pv, g) + np.einsum("pn,pn->p", g, g)  # noqa: B023

        mrow = ms_arr[rows].astype(float)
        for lam in lams:
            shrink = 1 / S if lam == 0 else S / (S**2 + lam * mrow[:, None])
            e = err(Z * shrink)
            for k, (r, i) in enumerate(pairs):
                errs[(r, ms[i], lam)][t] = e[k]
        if cv_Ls is not None:
            F = S**2 / (S**2 + cv_Ls[:, None])  # (K, n)
            lev = F @ (U**2).T  # (K, n): diag of the hat matrix
            fitted = (Z[:, None, :] * F[None]) @ U.T  # (P, K, n): H r
            cv = np.mean(((resid[:, None, :] - fitted) / (1 - lev)) ** 2, axis=2)  # (P, K)
            Lb = cv_Ls[np.argmin(cv, axis=1)]
            e = err(Z * (S / (S**2 + Lb[:, None])))
            for k, (r, i) in enumerate(pairs):
                errs[(r, ms[i], "cv")][t] = e[k]
            zy = U.T @ y
            Lr = float(cv_Ls[np.argmin(_loo(U, S, y, cv_Ls))])
            for key, L in ((("ridge", 0, "cv"), Lr), (("ridge", 0, "oracle"), L_oracle)):
                b = Vt.T @ (zy * S / (S**2 + L))
                errs[key][t] = s.sigma**2 + float(np.sum((b - beta) ** 2))
    out: dict = {k: (float(np.mean(v)), float(np.std(v, ddof=1) / np.sqrt(len(v)))) for k, v in errs.items()}
    out["samples"] = errs
    out["c_hat"] = {m: float(np.mean(v)) for m, v in chat.items()}
    return out


def paired(mc: dict, key_a: tuple, key_b: tuple) -> tuple[float, float]:
    """``(mean, standard error)`` of the per-trial difference ``error[key_a] - error[key_b]`` in a
    :func:`monte_carlo` result (the trials are shared, so the difference is paired)."""
    validate.instance("mc", mc, dict)
    if "samples" not in mc:
        raise ValueError("mc must be a result of monte_carlo (no 'samples' entry)")
    for name, k in (("key_a", key_a), ("key_b", key_b)):
        if k not in mc["samples"]:
            raise ValueError(f"{name} = {k!r} is not a key of this Monte Carlo result")
    diff = mc["samples"][key_a] - mc["samples"][key_b]
    return float(diff.mean()), float(diff.std(ddof=1) / np.sqrt(len(diff)))


def contour_point(s: Setting, trials: int, seed: int = 0, rule: str = "1", m_claimed: int | None = None,
                  z: float = 2.0) -> dict:
    """Monte Carlo test of the analytic number of models needed (:func:`models_needed`) at one setting.

    Both learners at their best penalty: the transfer learner with ``c`` from ``rule`` at the ``L`` that minimises
    the closed form for each ``m``, ridge at its Bayes-optimal ``L``; paired over ``trials`` draws. The count
    ``m_claimed`` (default: the analytic one) is *consistent* with the sampling when transfer is not resolved to
    lose at ``m_claimed`` (difference < ``z`` standard errors) and not resolved to win at ``m_claimed - 1``
    (difference > ``-z`` SE; nothing to check when ``m_claimed = 1``). Returns ``analytic``, ``m_claimed``,
    ``diffs`` (``{m: (transfer - ridge mean, SE)}``), ``max_rel_se`` (largest SE ÷ mean error of the two sides) and
    ``consistent``."""
    s = _setting(s)
    validate.one_of("rule", rule, ("1", "1/rho", "c*"))
    z = validate.positive("z", z)
    analytic = models_needed(s, rule)
    if analytic is None:
        raise ValueError(f"no number of models makes rule {rule!r} beat ridge at this setting")
    m_c = analytic if m_claimed is None else validate.integer("m_claimed", m_claimed, min=1)
    ms = sorted({m for m in (m_c - 1, m_c) if m >= 1})
    c_of = {m: {"1": 1.0, "1/rho": 1 / s.rho, "c*": c_star(m, s)}[rule] for m in ms}
    lams = [optimal_L(s, bias_D(c_of[m], m, s))[0] / m for m in ms]
    res = monte_carlo(s, ms, lams, trials, seed=seed, rules=(rule,), cv_Ls=[1.0])
    ridge = ("ridge", 0, "oracle")
    diffs = {m: paired(res, (rule, m, lam), ridge) for m, lam in zip(ms, lams)}
    rel = [res[(rule, m, lam)][1] / res[(rule, m, lam)][0] for m, lam in zip(ms, lams)] + [res[ridge][1] / res[ridge][0]]
    ok = diffs[m_c][0] < z * diffs[m_c][1] and (m_c == 1 or diffs[m_c - 1][0] > -z * diffs[m_c - 1][1])
    return dict(analytic=analytic, m_claimed=m_c, diffs=diffs, max_rel_se=float(max(rel)), consistent=bool(ok))


# ----------------------------------------------------------------------------------------------------------------
# Beyond isotropy: a power-law feature spectrum, where the min-norm shrinkage depends on the direction
# ----------------------------------------------------------------------------------------------------------------
def power_law_spectrum(d: int, alpha: float) -> np.ndarray:
    """Feature variances ``k^(-alpha)``, ``k = 1..d``, scaled to mean 1 (``E||x||^2 = d``, as when isotropic;
    ``alpha = 0`` is isotropic)."""
    d = validate.integer("d", d, min=1)
    alpha = validate.nonnegative("alpha", alpha)
    v = np.arange(1, d + 1, dtype=float) ** -alpha
    return v / v.mean()


def shrinkage_profile(spec: np.ndarray, n_s: int, draws: int = 2000, seed: int = 0
                      ) -> tuple[np.ndarray, np.ndarray]:
    """``(s, g)``: ``s_k = E[P]_kk`` and ``g_k = E[(X^T X)^+]_kk`` for a source design ``X`` of ``n_s`` rows
    ``N(0, diag(spec))``, ``P = X^+ X`` the projection onto its row space; estimated over ``draws`` designs.

    ``E[P]`` is diagonal (flipping the sign of one feature leaves the design's law unchanged), so a min-norm
    pretrained model has ``E[theta | beta] = s * beta``: direction ``k`` is shrunk by ``s_k``. Isotropic
    (``spec`` all ones, ``n_s < d``): ``s_k = n_s / d`` and ``g_k = n_s / (d (d - n_s - 1))``."""
    spec = validate.array("spec", spec, ndim=1, dtype="float", nonempty=True, min=0, strict_min=True)
    d = spec.size
    n_s = validate.integer("n_s", n_s, min=1)
    if abs(n_s - d) <= 1:
        raise ValueError(f"n_s = {n_s} is within 1 of d = {d}: the min-norm fit has unbounded variance there")
    draws = validate.integer("draws", draws, min=2)
    rng = np.random.default_rng(validate.seed("seed", seed))
    s_sum, g_sum, done = np.zeros(d), np.zeros(d), 0
    with _one_thread():
        while done < draws:
            b = min(200, draws - done)
            X = rng.normal(size=(b, n_s, d)) * np.sqrt(spec)
            if n_s < d:
                GiX = np.linalg.solve(X @ X.transpose(0, 2, 1), X)  # (b, n_s, d): (X X^T)^{-1} X
                s_sum += np.einsum("bik,bik->k", GiX, X)  # diag X^T (X X^T)^{-1} X
                g_sum += np.einsum("bik,bik->k", GiX, GiX)  # diag X^T (X X^T)^{-2} X
            else:
                s_sum += b
                g_sum += np.linalg.inv(X.transpose(0, 2, 1) @ X).diagonal(axis1=1, axis2=2).sum(axis=0)
            done += b
    return s_sum / draws, g_sum / draws


def _profile(profile: object, d: int) -> tuple[np.ndarray, np.ndarray]:
    if not isinstance(profile, tuple) or len(profile) != 2:
        raise TypeError(f"profile must be the pair (s, g) returned by shrinkage_profile, got "
                        f"{validate.describe(profile)}")
    sk = validate.array("profile[0]", profile[0], shape=(d,), dtype="float", min=0, max=1 + 1e-9)
    g = validate.array("profile[1]", profile[1], shape=(d,), dtype="float", min=0)
    return sk, g


def direction_moments(s: Setting, profile: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """``(s_k, v_k)`` per direction: ``E[theta_k | beta] = s_k beta_k`` and ``v_k = E(theta_k - s_k beta_k)^2``
    ``= s_k (1 - s_k) B/d + s_k tau^2/d + sigma_s^2 g_k`` (``beta``, ``delta_j`` isotropic; ``profile`` from
    :func:`shrinkage_profile` at ``s.n_s``). Isotropic: they sum to :func:`source_moments`'s ``V``."""
    s = _setting(s)
    sk, g = _profile(profile, s.d)
    b = s.B / s.d
    return sk, sk * (1 - sk) * b + sk * s.tau**2 / s.d + s.sigma_s**2 * g


def direction_D(C: float | np.ndarray, m: int, s: Setting, profile: tuple[np.ndarray, np.ndarray]
                ) -> np.ndarray:
    """Per-direction anchor error ``E(C_k theta_bar_k - beta_k)^2 = (C_k s_k - 1)^2 B/d + C_k^2 v_k / m`` for a
    scalar or per-direction factor ``C`` (exact: the models are independent given ``beta``)."""
    m = _m(m)
    s = _setting(s)
    C = validate.array("C", C, ndim=(0, 1), dtype="float")
    if C.ndim == 1 and C.shape != (s.d,):
        raise ValueError(f"C must be a number or have shape ({s.d},), got shape {C.shape}")
    sk, v = direction_moments(s, profile)
    return (C * sk - 1) ** 2 * s.B / s.d + C**2 * v / m


def c_direction(m: int, s: Setting, profile: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """The per-direction factor minimising each direction's anchor error: ``C_k = s_k b / (s_k^2 b + v_k/m)``
    with ``b = B/d`` (the direction-wise ``c*``; equal to :func:`c_star` in every direction when isotropic)."""
    m = _m(m)
    s = _setting(s)
    sk, v = direction_moments(s, profile)
    b = s.B / s.d
    return sk * b / (sk**2 * b + v / m)


def c_scalar_weighted(m: int, s: Setting, profile: tuple[np.ndarray, np.ndarray], spec: np.ndarray) -> float:
    """The one scalar factor minimising the anchor error weighted by the feature variances,
    ``sum_k spec_k D_k(c)``: ``sum spec_k s_k b / sum spec_k (s_k^2 b + v_k/m)`` (the best a scalar can do
    for the anchor's own prediction error)."""
    m = _m(m)
    s = _setting(s)
    spec = _spec(spec, s.d)
    sk, v = direction_moments(s, profile)
    b = s.B / s.d
    return float(np.sum(spec * sk * b) / np.sum(spec * (sk**2 * b + v / m)))


# ----------------------------------------------------------------------------------------------------------------
# Heterogeneous pools: one penalty lam_j and one factor c_j per pretrained model
# ----------------------------------------------------------------------------------------------------------------
def _pool(sources: object) -> list[Setting]:
    sources = validate.sequence("sources", sources, min_len=1, of=lambda k, v: validate.instance(k, v, Setting))
    if len({(t.d, t.B) for t in sources}) != 1:
        raise ValueError("sources must share d and B")
    return sources


def pool_optimal(sources: Sequence[Setting]) -> dict:
    """The best anchor ``sum_j u_j theta_j`` for a pool of different sources (one :class:`Setting` per model, same
    ``d`` and ``B``): ``D(u) = (sum u_j rho_j - 1)^2 B + sum u_j^2 V_j`` is minimised by
    ``u_j = B/(1 + B S) rho_j / V_j`` with ``S = sum rho_j^2 / V_j``, and ``D* = B / (1 + B S)``.

    Written as penalties and factors (only the products ``u_j = w_j c_j`` matter, ``w_j = lam_j / L``): the
    weight ``w_j`` proportional to ``rho_j^2 / V_j`` (the inverse variance of the debiased model
    ``theta_j / rho_j``) and ``c_j = (B S / (1 + B S)) / rho_j`` (each model debiased by its own ``1/rho_j``,
    all shrunk by one common factor). Returns ``u``, ``weights``, ``factors``, ``D``."""
    sources = _pool(sources)
    mom = np.array([source_moments(t) for t in sources])
    rho, V = mom[:, 0], mom[:, 1]
    B = sources[0].B
    S = float(np.sum(rho**2 / V))
    u = B / (1 + B * S) * rho / V
    return dict(u=u, weights=(rho**2 / V) / S, factors=(B * S / (1 + B * S)) / rho, D=B / (1 + B * S))


def pool_equal_c(sources: Sequence[Setting]) -> float:
    """The best common factor ``c`` for equal weights (``lam_j = lam``): minimises :func:`bias_D_weighted` with
    ``w_j = 1/m``, ``c = rho_bar B / (rho_bar^2 B + sum V_j / m^2)``."""
    sources = _pool(sources)
    mom = np.array([source_moments(t) for t in sources])
    m, B = len(sources), sources[0].B
    rho_bar = float(mom[:, 0].mean())
    return rho_bar * B / (rho_bar**2 * B + float(mom[:, 1].sum()) / m**2)


def pool_estimate(thetas: np.ndarray, groups: Sequence[int], n_s: Sequence[int]) -> dict:
    """The optimal pool anchor of :func:`pool_optimal`, with every unknown estimated from observable quantities:
    the pretrained models ``thetas`` (``m x d``), which group each came from (``groups``, at least 2 models per
    group; models of a group share their source distribution) and how many source samples each was fit on
    (``n_s``, constant within a group).

    ``rho_g = min(1, n_s / d)``; ``V_g`` from the spread of the group's models around their mean
    (``sum_i ||theta_i - theta_bar_g||^2 / (k_g - 1)``, unbiased given ``beta``); ``B`` from the group means,
    ``E||theta_bar_g||^2 = rho_g^2 B + V_g / k_g``, pooled as ``sum_g (||theta_bar_g||^2 - V_g / k_g) /
    sum_g rho_g^2`` (floored at 0). Plugged into ``u_j = B/(1 + B S) rho_j / V_j``. Returns ``u``, ``weights``,
    ``factors``, ``rho``, ``V`` (per model) and ``B``."""
    thetas = validate.array("thetas", thetas, ndim=2, dtype="float", nonempty=True)
    m, d = thetas.shape
    g = validate.array("groups", groups, shape=(m,))
    ns = validate.array("n_s", n_s, shape=(m,), dtype="float", min=1)
    if not np.all(np.isfinite(thetas)):
        raise ValueError("thetas must be finite")
    labels, inv, counts = np.unique(g, return_inverse=True, return_counts=True)
    if counts.min() < 2:
        raise ValueError(f"every group needs at least 2 models to estimate its variance, got {counts.min()}")
    rho = np.minimum(1.0, ns / d)
    V_g, num, den = np.empty(len(labels)), 0.0, 0.0
    for k in range(len(labels)):
        rows = inv == k
        if np.ptp(ns[rows]) > 0:
            raise ValueError(f"n_s must be constant within group {labels[k]!r}")
        th = thetas[rows]
        mean = th.mean(axis=0)
        V_g[k] = float(np.sum((th - mean) ** 2)) / (counts[k] - 1)
        if V_g[k] <= 0:
            raise ValueError(f"group {labels[k]!r} has identical models: its variance cannot be estimated")
        num += float(mean @ mean) - V_g[k] / counts[k]
        den += float(rho[rows][0]) ** 2
    B = max(num / den, 0.0)
    V = V_g[inv]
    S = float(np.sum(rho**2 / V))
    u = B / (1 + B * S) * rho / V
    return dict(u=u, weights=(rho**2 / V) / S, factors=(B * S / (1 + B * S)) / rho, rho=rho, V=V, B=B)


# ----------------------------------------------------------------------------------------------------------------
# Monte Carlo for any linear anchor, any pool, any feature spectrum
# ----------------------------------------------------------------------------------------------------------------
def anchor_monte_carlo(s: Setting, sources: Sequence[Setting], anchors: dict, trials: int, seed: int = 0, *,
                       spec: np.ndarray | None = None, Ls: Sequence[float] = (0.0,),
                       cv_Ls: Sequence[float] | None = None, rescale: Sequence[str] = (),
                       progress: bool = False) -> dict:
    """Monte Carlo test error of the target learner ``(X^T X + L I)^{-1}(X^T y + L a)`` for linear anchors
    ``a = sum_j U_j * theta_j`` of a pool of pretrained models.

    ``s``: the target problem (``d``, ``n``, ``sigma``, ``B``); ``sources``: one :class:`Setting` per pretrained
    model (its ``n_s``, ``sigma_s``, ``tau``; same ``d`` and ``B`` as ``s``). ``anchors``: name -> coefficients
    ``U`` of shape ``(m,)`` (one per model) or ``(m, d)`` (one per model and direction); zeros drop a model; or a
    function of the pretrained models ``thetas`` (``m x d``) returning such coefficients, called per trial (an
    anchor estimated from the pool, e.g. with :func:`pool_estimate`).
    ``rescale``: anchor names whose overall scale is refit on the target data by least squares (the data-driven
    ``c_hat``). ``spec``: the feature variances of every design, target and sources (None: isotropic). The error
    of an estimate is exact given it: ``sigma^2 + (b - beta)^T diag(spec) (b - beta)``.

    Keys ``(name, L)`` for each total penalty ``L`` in ``Ls`` (0: the limit), and with ``cv_Ls`` ``(name, "cv")``
    (``L`` chosen by leave-one-out on the target data), ``("ridge", "cv")`` and ``("ridge", "oracle")`` (ridge
    at ``L = sigma^2 d / B``, Bayes-optimal for isotropic ``beta``). Returns ``{key: (mean, SE)}`` and
    ``"samples"`` (per-trial errors; the trials are shared, so differences are paired, see :func:`paired`); with
    ``cv_Ls`` also ``"cv_scores"``: name -> per-trial smallest leave-one-out error over ``cv_Ls`` (what a
    practitioner sees on the target data, e.g. to pick one anchor among several per data set, see
    :func:`pick_by_loo`).
    """
    s = _setting(s)
    sources = _pool(sources)
    if sources[0].d != s.d or sources[0].B != s.B:
        raise ValueError(f"sources must have the target's d = {s.d} and B = {s.B}")
    m = len(sources)
    anchors = validate.instance("anchors", anchors, dict)
    if not anchors:
        raise ValueError("anchors must name at least one anchor")
    U = {}
    for name, u in anchors.items():
        if callable(u):
            U[name] = u
            continue
        u = validate.array(f"anchors[{name!r}]", u, ndim=(1, 2), dtype="float")
        if u.shape not in ((m,), (m, s.d)):
            raise ValueError(f"anchors[{name!r}] must have shape ({m},) or ({m}, {s.d}), got {u.shape}")
        U[name] = u if u.ndim == 2 else np.repeat(u[:, None], s.d, axis=1)
    rescale = set(validate.sequence("rescale", rescale, of=lambda k, v: validate.one_of(k, v, list(U))))
    trials = validate.integer("trials", trials, min=2)
    seed = validate.seed("seed", seed)
    spec = np.ones(s.d) if spec is None else _spec(spec, s.d)
    Ls = validate.sequence("Ls", Ls, of=_lam)
    if cv_Ls is not None:
        cv_Ls = validate.array("cv_Ls", cv_Ls, ndim=1, dtype="float", nonempty=True, min=0, strict_min=True)
    progress = validate.boolean("progress", progress)
    with _one_thread():
        return _anchor_mc(s, sources, U, trials, seed, spec, Ls, cv_Ls, rescale, progress)


def _anchor_mc(s, sources, U, trials, seed, spec, Ls, cv_Ls, rescale, progress) -> dict:
    rng = np.random.default_rng(seed)
    names = list(U)
    est = [p for p, k in enumerate(names) if callable(U[k])]
    Us = np.stack([np.zeros((len(sources), s.d)) if callable(U[k]) else U[k] for k in names])  # (P, m, d)
    resc = np.array([k in rescale for k in names])
    groups = []  # runs of identical sources, pretrained together
    for t in sources:
        if groups and groups[-1][0] == t:
            groups[-1][1] += 1
        else:
            groups.append([t, 1])
    keys = [(k, L) for k in names for L in Ls]
    if cv_Ls is not None:
        keys += [(k, "cv") for k in names] + [("ridge", "cv"), ("ridge", "oracle")]
    errs = {k: np.empty(trials) for k in keys}
    scores = {k: np.empty(trials) for k in names} if cv_Ls is not None else None
    it = range(trials)
    if progress:
        from tqdm.auto import tqdm

        it = tqdm(it, desc="Monte Carlo")
    root = np.sqrt(spec)
    for t in it:
        beta = rng.normal(size=s.d)
        beta *= np.sqrt(s.B) / np.linalg.norm(beta)
        thetas = np.vstack([pretrain(beta, k, src, rng, spec) for src, k in groups])
        X = rng.normal(size=(s.n, s.d)) * root
        y = X @ beta + rng.normal(0, s.sigma, s.n)
        Uo, S, Vt = _svd(X)
        for p in est:
            u = np.asarray(U[names[p]](thetas), dtype=float)
            if u.shape not in ((len(sources),), (len(sources), s.d)) or not np.all(np.isfinite(u)):
                raise ValueError(f"anchor {names[p]!r} must return finite coefficients of shape "
                                 f"({len(sources)},) or ({len(sources)}, {s.d}), got {u.shape}")
            Us[p] = u if u.ndim == 2 else u[:, None]
        A = np.einsum("pmd,md->pd", Us, thetas)  # (P, d) anchors
        XA = A @ X.T  # (P, n)
        if resc.any():
            zz = np.einsum("pn,pn->p", XA, XA)
            ch = np.where(zz > 0, XA @ y / np.where(zz > 0, zz, 1), 1.0)
            ch = np.where(resc, ch, 1.0)
            A, XA = A * ch[:, None], XA * ch[:, None]
        resid = y - XA  # (P, n)
        Z = resid @ Uo  # (P, k)
        dev = A - beta

        def err(g: np.ndarray, dev: np.ndarray = dev, Vt: np.ndarray = Vt) -> np.ndarray:
            e = dev + g @ Vt
            return s.sigma**2 + (e * e) @ spec

        for L in Ls:
            e = err(Z / S if L == 0 else Z * (S / (S**2 + L)))
            for p, k in enumerate(names):
                errs[(k, L)][t] = e[p]
        if cv_Ls is not None:
            F = S**2 / (S**2 + cv_Ls[:, None])  # (K, k)
            lev = F @ (Uo**2).T  # (K, n)
            fitted = (Z[:, None, :] * F[None]) @ Uo.T  # (P, K, n)
            cv = np.mean(((resid[:, None, :] - fitted) / (1 - lev)) ** 2, axis=2)
            Lb = cv_Ls[np.argmin(cv, axis=1)]
            for p, k in enumerate(names):
                scores[k][t] = cv[p].min()
            e = err(Z * (S / (S**2 + Lb[:, None])))
            for p, k in enumerate(names):
                errs[(k, "cv")][t] = e[p]
            zy = Uo.T @ y
            Lr = float(cv_Ls[np.argmin(_loo(Uo, S, y, cv_Ls))])
            for key, L in ((("ridge", "cv"), Lr), (("ridge", "oracle"), s.sigma**2 * s.d / s.B)):
                b = Vt.T @ (zy * S / (S**2 + L)) - beta
                errs[key][t] = s.sigma**2 + float((b * b) @ spec)
    out: dict = {k: (float(np.mean(v)), float(np.std(v, ddof=1) / np.sqrt(len(v)))) for k, v in errs.items()}
    out["samples"] = errs
    if scores is not None:
        out["cv_scores"] = scores
    return out


def pick_by_loo(res: dict, names: Sequence) -> tuple[float, float, np.ndarray]:
    """Per trial, the anchor among ``names`` with the smallest leave-one-out error on the target data, and its
    tuned test error: a factor (or any anchor) *and* ``L`` chosen from the target data alone. ``res`` from
    :func:`anchor_monte_carlo` with ``cv_Ls``. Returns ``(mean, SE, picks)`` (``picks``: index into ``names``)."""
    res = validate.instance("res", res, dict)
    if "cv_scores" not in res:
        raise ValueError("res has no leave-one-out scores: run anchor_monte_carlo with cv_Ls")
    names = validate.sequence("names", names, min_len=1,
                              of=lambda k, v: validate.one_of(k, v, list(res["cv_scores"])))
    sc = np.stack([res["cv_scores"][k] for k in names])  # (P, trials)
    picks = np.argmin(sc, axis=0)
    e = np.stack([res["samples"][(k, "cv")] for k in names])[picks, np.arange(sc.shape[1])]
    return float(e.mean()), float(e.std(ddof=1) / np.sqrt(e.size)), picks
