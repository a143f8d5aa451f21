"""Multiclass in-context classification with class centers of a prescribed singular spectrum.

Reconstructed from the paper's abstract and prior work on in-context classification (Frei & Vardi 2024; Magen &
Vardi 2025; Zhang, Frei & Bartlett 2024):

* **Data.** The class centers are the columns of ``M = U diag(sigma) V^T`` (d x C) with a prescribed singular
  spectrum ``sigma_i ~ i^-alpha``, scaled so that ``||M||_F^2 = C R^2``. Its **stable rank**
  ``||M||_F^2 / ||M||_2^2 = sum sigma_i^2 / sigma_1^2`` runs from 1 (collinear centers) to r (isotropic).
  Features are ``x = mu_y + N(0, I_d)``; each prompt draws a fresh task (fresh U, V).
* **Linear transformer.** One linear self-attention layer on tokens ``(x_i, y_i)`` and ``(x_q, 0)``; with the
  standard sparse weights its query label slot is ``s(x_q) = (1/N) sum_i y_i x_i^T W x_q``: for each class, the
  class share times the class mean, dotted with ``W x_q``. :func:`lsa_forward` is the full forward pass,
  :func:`reduced_scores` the reduced form.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
from scipy.optimize import brentq
from torch import Tensor, nn

from helpers.nn import Block, TransformerConfig

__all__ = [
    "stable_rank", "power_spectrum", "alpha_for_stable_rank", "random_orthonormal", "class_centers",
    "label_priors", "prompt_labels", "sample_prompts", "lsa_forward", "reduced_scores", "LinearICL",
    "SoftmaxICL", "accuracy_by_class", "lda_scores",
]


def stable_rank(M: np.ndarray) -> float:
    """``||M||_F^2 / ||M||_2^2``."""
    M = np.asarray(M, dtype=np.float64)
    if M.ndim != 2 or M.size == 0:
        raise ValueError(f"M must be a non-empty matrix, got shape {M.shape}")
    s = np.linalg.svd(M, compute_uv=False)
    if s[0] == 0:
        raise ValueError("M is zero: stable rank undefined")
    return float((s ** 2).sum() / s[0] ** 2)


def power_spectrum(r: int, alpha: float) -> np.ndarray:
    """Singular values ``sigma_i = i^-alpha``, i = 1..r (unnormalised)."""
    if isinstance(r, bool) or not isinstance(r, (int, np.integer)) or r < 1:
        raise ValueError(f"r must be a positive int, got {r!r}")
    if alpha < 0:
        raise ValueError(f"alpha must be >= 0, got {alpha}")
    return np.arange(1, r + 1, dtype=np.float64) ** (-float(alpha))


def alpha_for_stable_rank(srank: float, r: int) -> float:
    """The decay ``alpha`` whose spectrum ``i^-alpha`` (i <= r) has the given stable rank (in [1, r])."""
    if r == 1:
        if abs(srank - 1.0) > 1e-12:
            raise ValueError(f"stable rank must be 1 for rank 1, got {srank}")
        return 0.0
    if not 1.0 <= srank <= r:
        raise ValueError(f"stable rank must lie in [1, r] = [1, {r}], got {srank}")
    if srank >= r - 1e-12:
        return 0.0
    if srank <= 1.0 + 1e-12:
        return 60.0  # i^-60: numerically rank one

    def f(a: float) -> float:
        s = power_spectrum(r, a)
        return float((s ** 2).sum()) - srank

    return float(brentq(f, 0.0, 60.0, xtol=1e-14))


def random_orthonormal(n: int, k: int, rng: np.random.Generator, orth_to_ones: bool = False) -> np.ndarray:
    """An (n, k) matrix with orthonormal columns, Haar-distributed (optionally orthogonal to the ones vector)."""
    if k > n - int(orth_to_ones):
        raise ValueError(f"need k <= {n - int(orth_to_ones)} orthonormal columns in R^{n}, got k={k}")
    A = rng.standard_normal((n, k))
    if orth_to_ones:
        A -= A.mean(0, keepdims=True)
    Q, R = np.linalg.qr(A)
    return Q * np.sign(np.diag(R))


def class_centers(d: int, C: int, sigma: Sequence[float], R2: float, rng: np.random.Generator,
                  U: np.ndarray | None = None) -> np.ndarray:
    """Class-center matrix ``M = U diag(sigma) V^T`` (d x C), scaled to ``||M||_F^2 = C R2``.

    ``V`` is orthogonal to the ones vector (centers sum to zero), so the rank r = len(sigma) must be <= C - 1.
    A fixed ``U`` (d x r, orthonormal) gives tasks in a shared subspace.
    """
    sigma = np.asarray(sigma, dtype=np.float64)
    r = len(sigma)
    if r < 1 or (sigma <= 0).any():
        raise ValueError("sigma must be a non-empty sequence of positive singular values")
    if r > min(d, C - 1):
        raise ValueError(f"rank r={r} must be <= min(d, C-1) = {min(d, C - 1)}")
    if R2 <= 0:
        raise ValueError(f"R2 must be > 0, got {R2}")
    if U is None:
        U = random_orthonormal(d, r, rng)
    elif U.shape != (d, r):
        raise ValueError(f"U must have shape {(d, r)}, got {U.shape}")
    V = random_orthonormal(C, r, rng, orth_to_ones=True)
    s = sigma * math.sqrt(C * R2 / float((sigma ** 2).sum()))
    return (U * s) @ V.T


def label_priors(C: int, majority: float | None = None) -> np.ndarray:
    """Uniform priors, or class 0 with prior ``majority`` and the rest sharing ``1 - majority`` equally."""
    if isinstance(C, bool) or not isinstance(C, (int, np.integer)) or C < 2:
        raise ValueError(f"C must be an int >= 2, got {C!r}")
    if majority is None:
        return np.full(C, 1.0 / C)
    if not 1.0 / C <= majority < 1.0:
        raise ValueError(f"majority must be in [1/C, 1), got {majority}")
    return np.array([majority] + [(1 - majority) / (C - 1)] * (C - 1))


def prompt_labels(N: int, pi: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """N labels whose counts are exactly ``N pi`` (rounded by largest remainder), in random order."""
    pi = np.asarray(pi, dtype=np.float64)
    if pi.ndim != 1 or (pi < 0).any() or abs(pi.sum() - 1) > 1e-9:
        raise ValueError("pi must be a probability vector")
    raw = N * pi
    counts = np.floor(raw).astype(int)
    rest = N - counts.sum()
    counts[np.argsort(-(raw - counts), kind="stable")[:rest]] += 1
    return rng.permutation(np.repeat(np.arange(len(pi)), counts))


def sample_prompts(B: int, N: int, d: int, C: int, sigma: Sequence[float], R2: float, rng: np.random.Generator,
                   pi: np.ndarray | None = None, query_pi: np.ndarray | None = None,
                   U: np.ndarray | None = None) -> dict[str, Tensor]:
    """B prompts, each a fresh task: context ``X`` (B, N, d), labels ``Y`` (B, N), query ``xq`` (B, d), ``yq`` (B,).

    Context label counts follow ``pi`` exactly; the query label is drawn from ``query_pi`` (default uniform, so
    every class is tested equally often).
    """
    pi = label_priors(C) if pi is None else np.asarray(pi, float)
    qpi = label_priors(C) if query_pi is None else np.asarray(query_pi, float)
    X = np.empty((B, N, d))
    Y = np.empty((B, N), dtype=np.int64)
    xq = np.empty((B, d))
    yq = rng.choice(C, size=B, p=qpi)
    for b in range(B):
        M = class_centers(d, C, sigma, R2, rng, U)
        Y[b] = prompt_labels(N, pi, rng)
        X[b] = M.T[Y[b]] + rng.standard_normal((N, d))
        xq[b] = M[:, yq[b]] + rng.standard_normal(d)
    return {"X": torch.tensor(X, dtype=torch.float32), "Y": torch.tensor(Y), "xq": torch.tensor(xq, dtype=torch.float32),
            "yq": torch.tensor(yq)}


def lsa_forward(X: Tensor, Y: Tensor, xq: Tensor, W_kq: Tensor, W_pv: Tensor, C: int) -> Tensor:
    """Full linear self-attention: ``E + W_pv E (E^T W_kq E) / N``; returns the query's label slot (B, C).

    ``E`` is (d + C) x (N + 1): columns ``(x_i, onehot(y_i))`` and ``(x_q, 0)``.
    """
    B, N, d = X.shape
    if W_kq.shape != (d + C, d + C) or W_pv.shape != (d + C, d + C):
        raise ValueError(f"W_kq and W_pv must be ({d + C}, {d + C})")
    Yh = torch.nn.functional.one_hot(Y, C).to(X.dtype)
    Z = torch.cat([torch.cat([X, Yh], -1), torch.cat([xq, torch.zeros(B, C, dtype=X.dtype)], -1)[:, None]], 1)
    E = Z.transpose(1, 2)  # (B, d+C, N+1)
    Ec = E[:, :, :N]  # the context columns carry the keys/values (the query's own column is masked out)
    out = E + W_pv @ Ec @ (Ec.transpose(1, 2) @ W_kq @ E) / N
    return out[:, d:, -1]


def reduced_scores(X: Tensor, Y: Tensor, xq: Tensor, W: Tensor, C: int) -> Tensor:
    """The reduced form: ``s_c = (1/N) sum_{i: y_i = c} x_i^T W x_q`` = share_c * mean_c^T W x_q; (B, C)."""
    N = X.shape[1]
    Yh = torch.nn.functional.one_hot(Y, C).to(X.dtype)
    return torch.einsum("bnc,bnd,de,be->bc", Yh, X, W, xq) / N


class LinearICL(nn.Module):
    """The linear transformer in its reduced form, with one trainable ``W`` (d x d), initialised at 0."""

    def __init__(self, d: int) -> None:
        super().__init__()
        self.W = nn.Parameter(torch.zeros(d, d))

    def forward(self, X: Tensor, Y: Tensor, xq: Tensor, C: int) -> Tensor:
        return reduced_scores(X, Y, xq, self.W, C)


class SoftmaxICL(nn.Module):
    """A small softmax transformer on ``(x_i, y_i)`` tokens and a ``(x_q, 0)`` query token (pre-norm blocks
    from :mod:`helpers.nn`, no positional encoding: the context is a set); reads class logits at the query."""

    def __init__(self, d: int, C: int, d_model: int = 64, n_layer: int = 2, n_head: int = 4) -> None:
        super().__init__()
        self.C = C
        cfg = TransformerConfig(vocab_size=1, n_layer=n_layer, n_head=n_head, d_model=d_model, pos="none")
        self.inp = nn.Linear(d + C + 1, d_model)
        self.blocks = nn.ModuleList([Block(cfg) for _ in range(n_layer)])
        self.ln = nn.LayerNorm(d_model)
        self.out = nn.Linear(d_model, C)

    def forward(self, X: Tensor, Y: Tensor, xq: Tensor, C: int | None = None) -> Tensor:
        B, N, _ = X.shape
        Yh = torch.nn.functional.one_hot(Y, self.C).to(X.dtype)
        ctx = torch.cat([X, Yh, torch.zeros(B, N, 1)], -1)
        q = torch.cat([xq, torch.zeros(B, self.C), torch.ones(B, 1)], -1)[:, None]
        h = self.inp(torch.cat([ctx, q], 1))
        mask = torch.ones(N + 1, N + 1, dtype=torch.bool)
        mask[:N, N] = False  # context tokens do not see the query
        for blk in self.blocks:
            h = blk(h, mask)
        return self.out(self.ln(h[:, -1]))


def lda_scores(X: Tensor, Y: Tensor, xq: Tensor, C: int, pi: np.ndarray | None = None) -> Tensor:
    """A plug-in Bayes rule from the context (class means, identity covariance, log prior): a reference."""
    Yh = torch.nn.functional.one_hot(Y, C).to(X.dtype)
    cnt = Yh.sum(1).clamp_min(1)
    mu = torch.einsum("bnc,bnd->bcd", Yh, X) / cnt[..., None]
    logp = torch.log(cnt / X.shape[1]) if pi is None else torch.log(torch.as_tensor(pi, dtype=X.dtype))
    return (mu @ xq[..., None])[..., 0] - 0.5 * (mu ** 2).sum(-1) + logp


def accuracy_by_class(scores: Tensor, yq: Tensor, C: int) -> np.ndarray:
    """Accuracy for queries of each class (nan for a class never queried)."""
    ok = (scores.argmax(-1) == yq).float()
    return np.array([ok[yq == c].mean().item() if (yq == c).any() else float("nan") for c in range(C)])
