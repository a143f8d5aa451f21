"""Transfer learning for linear regression from many least-squares pretrained models, and its debiasing.

Data model (Gaussian, as in the paper's setting): target ``y = X beta + eps`` with ``X`` i.i.d. N(0, 1) of size
``n x d`` and noise variance ``sigma^2``; the test error of an estimate ``b`` is ``sigma^2 + ||b - beta||^2``.
Source ``j = 1..m`` has ``beta_j = beta + delta_j`` (``delta_j ~ N(0, tau^2/d I)``: the task mismatch) and
``n_s`` samples with noise ``sigma_s``. Each pretrained model is the minimum-L2-norm least-squares fit
``theta_j = X_j^+ y_j``; when ``n_s < d`` it lies in the ``n_s``-dimensional row space of ``X_j`` and is shrunk
towards zero: ``E[theta_j] = rho beta`` with ``rho = n_s / d`` (the overparameterisation bias).

The target learner penalises the distance to the scaled pretrained models::

    beta_hat = argmin_b ||y - X b||^2 + lam * sum_j ||b - c theta_j||^2
             = (X^T X + lam m I)^{-1} (X^T y + lam m c theta_bar)

and, as ``lam -> 0``, the interpolator closest to ``c theta_bar``: ``c theta_bar + X^+ (y - X c theta_bar)``.

The test-error expression and the correction factors (``c* ``, ``1/rho``, the data-driven ``c_hat``) are our
derivation from this setup; the paper's own formulas are not public.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

__all__ = [
    "Setting", "min_norm_lstsq", "batched_min_norm", "pretrain", "transfer_fit", "transfer_fit_stacked", "source_moments",
    "bias_D", "c_star", "test_error", "target_eigenvalues", "test_error_target_only", "data_driven_c", "monte_carlo", "lambda_star",
]


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
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        for name in ("sigma", "sigma_s", "tau", "B"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if abs(self.n_s - self.d) <= 1:
            raise ValueError(f"n_s = {self.n_s} is within 1 of d = {self.d}: the min-norm source fit has "
                             "unbounded variance there")

    @property
    def rho(self) -> float:
        """Shrinkage of a min-norm pretrained model: ``n_s / d`` if overparameterised, else 1."""
        return min(1.0, self.n_s / self.d)

    @property
    def overparameterized(self) -> bool:
        return self.n_s < self.d

    def with_(self, **kw) -> Setting:
        return replace(self, **kw)


def _check_lam(lam: float) -> float:
    if not np.isscalar(lam) or not np.isfinite(lam) or lam < 0:
        raise ValueError(f"lam must be a finite number >= 0, got {lam!r}")
    return float(lam)


def min_norm_lstsq(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The minimum-L2-norm least-squares solution ``X^+ y`` (interpolates when ``n < d``)."""
    X, y = np.asarray(X, float), np.asarray(y, float)
    if X.ndim != 2 or y.shape != (X.shape[0],):
        raise ValueError(f"need X of shape (n, d) and y of shape (n,), got {X.shape} and {y.shape}")
    return np.linalg.lstsq(X, y, rcond=None)[0]


def pretrain(beta: np.ndarray, m: int, s: Setting, rng: np.random.Generator) -> np.ndarray:
    """``m`` pretrained models (rows), each the min-norm least-squares fit on its own related source task."""
    beta = np.asarray(beta, float)
    if beta.shape != (s.d,):
        raise ValueError(f"beta must have shape ({s.d},), got {beta.shape}")
    if m < 1:
        raise ValueError(f"m must be >= 1, got {m}")
    betas = beta + rng.normal(0, s.tau / np.sqrt(s.d), (m, s.d))
    Xs = rng.normal(size=(m, s.n_s, s.d))
    ys = np.einsum("jnd,jd->jn", Xs, betas) + rng.normal(0, s.sigma_s, (m, s.n_s))
    return batched_min_norm(Xs, ys)


def batched_min_norm(Xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """Min-norm least squares for a batch of full-rank problems, via the normal equations: ``X^T (X X^T)^{-1} y``
    when ``n < d``, ``(X^T X)^{-1} X^T y`` otherwise (equal to :func:`min_norm_lstsq`, much faster)."""
    Xs, ys = np.asarray(Xs, float), np.asarray(ys, float)
    if Xs.ndim != 3 or ys.shape != Xs.shape[:2]:
        raise ValueError(f"need Xs of shape (m, n, d) and ys of shape (m, n), got {Xs.shape} and {ys.shape}")
    n, d = Xs.shape[1:]
    if n < d:
        G = Xs @ Xs.transpose(0, 2, 1)
        return np.einsum("jnd,jn->jd", Xs, np.linalg.solve(G, ys[..., None])[..., 0])
    G = Xs.transpose(0, 2, 1) @ Xs
    return np.linalg.solve(G, np.einsum("jnd,jn->jd", Xs, ys)[..., None])[..., 0]


def _check_target(X, y, thetas) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    X, y = np.asarray(X, float), np.asarray(y, float)
    thetas = np.atleast_2d(np.asarray(thetas, float))
    if X.ndim != 2 or y.shape != (X.shape[0],):
        raise ValueError(f"need X of shape (n, d) and y of shape (n,), got {X.shape} and {y.shape}")
    if thetas.shape[1] != X.shape[1]:
        raise ValueError(f"pretrained models must have d = {X.shape[1]} entries, got shape {thetas.shape}")
    return X, y, thetas


def transfer_fit(X: np.ndarray, y: np.ndarray, thetas: np.ndarray, lam: float, c: float = 1.0) -> np.ndarray:
    """Closed form of ``argmin ||y - X b||^2 + lam sum_j ||b - c theta_j||^2``; ``lam = 0`` gives the limit
    ``lam -> 0+`` (the interpolator nearest to ``c theta_bar`` when ``n < d``)."""
    X, y, thetas = _check_target(X, y, thetas)
    lam = _check_lam(lam)
    m, d = thetas.shape
    anchor = c * thetas.mean(axis=0)
    if lam == 0:
        return anchor + min_norm_lstsq(X, y - X @ anchor)
    L = lam * m
    return np.linalg.solve(X.T @ X + L * np.eye(d), X.T @ y + L * anchor)


def transfer_fit_stacked(X: np.ndarray, y: np.ndarray, thetas: np.ndarray, lam: float, c: float = 1.0
                         ) -> np.ndarray:
    """The same estimate by brute force: ordinary least squares on ``[X; sqrt(lam) I; ...]`` against
    ``[y; sqrt(lam) c theta_1; ...]`` (one block per pretrained model). The reference for :func:`transfer_fit`."""
    X, y, thetas = _check_target(X, y, thetas)
    lam = _check_lam(lam)
    if lam == 0:
        raise ValueError("the stacked form needs lam > 0")
    d = X.shape[1]
    A = np.vstack([X] + [np.sqrt(lam) * np.eye(d)] * len(thetas))
    b = np.concatenate([y] + [np.sqrt(lam) * c * t for t in thetas])
    return np.linalg.lstsq(A, b, rcond=None)[0]


def source_moments(s: Setting) -> tuple[float, float]:
    """``(rho, V)``: ``E[theta_j] = rho beta`` and ``V = E||theta_j - rho beta||^2``.

    Overparameterised (``n_s < d - 1``): ``V = rho (1 - rho) B + rho tau^2 + sigma_s^2 n_s / (d - n_s - 1)``.
    Underparameterised (``n_s > d + 1``): ``rho = 1`` and ``V = tau^2 + sigma_s^2 d / (n_s - d - 1)``.
    """
    if s.overparameterized:
        rho = s.n_s / s.d
        return rho, rho * (1 - rho) * s.B + rho * s.tau**2 + s.sigma_s**2 * s.n_s / (s.d - s.n_s - 1)
    return 1.0, s.tau**2 + s.sigma_s**2 * s.d / (s.n_s - s.d - 1)


def bias_D(c: float, m: int, s: Setting) -> float:
    """``D = E||c theta_bar - beta||^2 = (c rho - 1)^2 B + c^2 V / m``."""
    if m < 1:
        raise ValueError(f"m must be >= 1, got {m}")
    rho, V = source_moments(s)
    return (c * rho - 1) ** 2 * s.B + c**2 * V / m


def c_star(m: int, s: Setting) -> float:
    """The factor minimising ``D``: ``rho B / (rho^2 B + V / m)`` (tends to ``1/rho`` as ``m`` grows)."""
    if m < 1:
        raise ValueError(f"m must be >= 1, got {m}")
    rho, V = source_moments(s)
    return rho * s.B / (rho**2 * s.B + V / m)


def _eigs(s: Setting, draws: int, rng: np.random.Generator) -> np.ndarray:
    """Nonzero eigenvalues of ``X^T X`` for ``draws`` target design matrices, shape (draws, min(n, d))."""
    out = []
    with _one_thread():
        for _ in range(draws):
            X = rng.normal(size=(s.n, s.d))
            G = X @ X.T if s.n <= s.d else X.T @ X
            out.append(np.linalg.eigvalsh(G))
    return np.array(out)


def _one_thread():
    """Tiny matrices: one BLAS thread is much faster than several fighting over the cores."""
    try:
        from threadpoolctl import threadpool_limits

        return threadpool_limits(1)
    except ImportError:  # pragma: no cover
        import contextlib

        return contextlib.nullcontext()


def target_eigenvalues(s: Setting, draws: int = 2000, seed: int = 0) -> np.ndarray:
    """Nonzero eigenvalues of ``X^T X`` for ``draws`` random target designs (reuse them across calls of
    :func:`test_error`)."""
    return _eigs(s, draws, np.random.default_rng(seed))


def test_error(s: Setting, m: int, c: float, lam: float, *, draws: int = 2000, seed: int = 0,
               eigs: np.ndarray | None = None) -> float:
    """Expected test error ``sigma^2 + E||beta_hat - beta||^2`` of the transfer learner.

    ``lam = 0`` (the limit) with ``n < d - 1``: exact, ``sigma^2 + (1 - n/d) D + sigma^2 n / (d - n - 1)``.
    ``lam > 0``: ``sigma^2 + E_X[sigma^2 sum s_i/(s_i+L)^2 + L^2 (D/d) sum_{i<=d} 1/(s_i+L)^2]`` with ``L = lam m``,
    exact given the eigenvalues ``s_i`` of ``X^T X``; the expectation over ``X`` is averaged over ``draws`` random
    designs (a semi-analytic estimate).
    """
    lam = _check_lam(lam)
    D = bias_D(c, m, s)
    if lam == 0:
        if s.n >= s.d - 1:
            raise ValueError("the lam -> 0 formula needs an overparameterised target, n < d - 1")
        return s.sigma**2 + (1 - s.n / s.d) * D + s.sigma**2 * s.n / (s.d - s.n - 1)
    L = lam * m
    ev = _eigs(s, draws, np.random.default_rng(seed)) if eigs is None else np.asarray(eigs, float)
    if ev.ndim != 2 or ev.shape[1] != min(s.n, s.d):
        raise ValueError(f"eigs must have shape (draws, {min(s.n, s.d)}) for this setting, got {ev.shape}")
    noise = s.sigma**2 * np.sum(ev / (ev + L) ** 2, axis=1)
    zeros = s.d - ev.shape[1]  # eigenvalues of X^T X that are exactly zero
    shrink = L**2 * (D / s.d) * (np.sum(1 / (ev + L) ** 2, axis=1) + zeros / L**2)
    return float(s.sigma**2 + np.mean(noise + shrink))


def test_error_target_only(s: Setting) -> float:
    """Min-norm least squares on the target data alone (``n < d - 1``): ``sigma^2 + (1 - n/d) B +
    sigma^2 n / (d - n - 1)``."""
    if s.n >= s.d - 1:
        raise ValueError("needs n < d - 1")
    return s.sigma**2 + (1 - s.n / s.d) * s.B + s.sigma**2 * s.n / (s.d - s.n - 1)


def lambda_star(m: int, c: float, s: Setting) -> float:
    """``lam`` with ``lam m = sigma^2 d / D`` (optimal if ``c theta_bar - beta`` were isotropic Gaussian)."""
    return s.sigma**2 * s.d / bias_D(c, m, s) / m


def data_driven_c(X: np.ndarray, y: np.ndarray, thetas: np.ndarray) -> float:
    """A factor from the target data alone: least squares for the scalar, ``<X theta_bar, y> / ||X theta_bar||^2``."""
    X, y, thetas = _check_target(X, y, thetas)
    z = X @ thetas.mean(axis=0)
    zz = float(z @ z)
    return float(z @ y / zz) if zz > 0 else 1.0


def monte_carlo(s: Setting, ms: list[int], lams: list[float], trials: int, seed: int = 0,
                rules: tuple[str, ...] = ("1", "1/rho", "c*", "c_hat"), progress: bool = False) -> dict:
    """Monte Carlo test error over ``trials`` independent draws of ``beta``, sources and target data.

    Each trial draws ``max(ms)`` pretrained models and uses the first ``m`` of them for every ``m`` in ``ms``, so
    the curves over ``m`` share randomness. Returns ``{(rule, m, lam): (mean, standard error)}`` plus
    ``"c_hat"``: ``{m: mean data-driven factor}``. The test error is computed exactly given the estimate:
    ``sigma^2 + ||beta_hat - beta||^2``.
    """
    if trials < 2:
        raise ValueError("trials must be >= 2")
    if not ms or min(ms) < 1:
        raise ValueError("ms must be a non-empty list of positive ints")
    for lam in lams:
        _check_lam(lam)
    with _one_thread():
        return _monte_carlo(s, ms, lams, trials, seed, rules, progress)


def _monte_carlo(s, ms, lams, trials, seed, rules, progress) -> dict:
    rng = np.random.default_rng(seed)
    rho = s.rho
    errs = {(r, m, lam): [] for r in rules for m in ms for lam in lams}
    chat = {m: [] for m in ms}
    it = range(trials)
    if progress:
        from tqdm.auto import tqdm

        it = tqdm(it, desc=f"Monte Carlo n_s={s.n_s}")
    for _ in it:
        beta = rng.normal(size=s.d)
        beta *= np.sqrt(s.B) / np.linalg.norm(beta)
        thetas = pretrain(beta, max(ms), s, rng)
        X = rng.normal(size=(s.n, s.d))
        y = X @ beta + rng.normal(0, s.sigma, s.n)
        pinv = np.linalg.pinv(X)
        ev, U = np.linalg.eigh(X.T @ X)
        Xty = X.T @ y
        for m in ms:
            tbar = thetas[:m].mean(axis=0)
            ch = data_driven_c(X, y, thetas[:m])
            chat[m].append(ch)
            cs = {"1": 1.0, "1/rho": 1 / rho, "c*": c_star(m, s), "c_hat": ch}
            for r in rules:
                anchor = cs[r] * tbar
                for lam in lams:
                    if lam == 0:
                        b = anchor + pinv @ (y - X @ anchor)
                    else:
                        L = lam * m
                        b = U @ ((U.T @ (Xty + L * anchor)) / (ev + L))
                    errs[(r, m, lam)].append(s.sigma**2 + float(np.sum((b - beta) ** 2)))
    out: dict = {k: (float(np.mean(v)), float(np.std(v, ddof=1) / np.sqrt(len(v)))) for k, v in errs.items()}
    out["c_hat"] = {m: float(np.mean(v)) for m, v in chat.items()}
    return out
