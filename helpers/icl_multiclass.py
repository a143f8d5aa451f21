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
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch
from scipy.optimize import brentq
from torch import Tensor, nn

from helpers import validate as V_
from helpers.nn import Block, TransformerConfig

__all__ = [
    "stable_rank", "power_spectrum", "alpha_for_stable_rank", "random_orthonormal", "class_centers",
    "label_priors", "prompt_labels", "class_centers_batch", "sample_prompts", "lsa_forward", "reduced_scores", "LinearICL",
    "SoftmaxICL", "accuracy_by_class", "lda_scores", "bayes_scores", "subspace_oracle_scores", "matrix_cosine",
    "subspace_alignment", "pca_subspace", "offsubspace_residue", "examples_to_reach", "bootstrap_examples", "predicted_margins", "task_stream", "icl_loss", "train_icl",
    "checkpoint_config", "CHECKPOINT_SLUG", "dataset_prompts", "class_sum_prompts", "sum_scores",
    "lda_sum_scores", "with_constant_feature", "sum_stream", "train_sums", "qk_subspace_alignment",
]

CHECKPOINT_SLUG = "14_icl_multiclass"

BIG = 1e30  # largest magnitude accepted in features, centers and weights: their products and squares stay finite


def _rng(rng: Any) -> np.random.Generator:
    return V_.instance("rng", rng, np.random.Generator)


def _bounded(name: str, x: Any, **kw: Any) -> Any:
    """A float tensor (checked like :func:`helpers.validate.tensor`: finite, shape) with every |entry| <= BIG;
    one extra pass over the data (cheap next to the forward it guards)."""
    x = V_.tensor(name, x, dtype="float", finite=False, **kw)
    if x.numel():
        top = x.detach().abs().max()  # NaN propagates; one pass finds NaN, inf and huge values
        if not bool(top <= BIG):
            V_.tensor(name, x, finite=True)  # NaN/inf: its standard message
            raise ValueError(f"{name} must have entries of magnitude <= {BIG:g}, got max |{name}| = {top.item():g}")
    return x


def _bounded_array(name: str, x: Any, **kw: Any) -> np.ndarray:
    """A finite float array with every |entry| <= BIG (squares and sums of squares stay finite)."""
    return V_.array(name, x, dtype="float", min=-BIG, max=BIG, **kw)


def _prompt(X: Any, Y: Any, xq: Any, C: Any, d: int | None = None) -> tuple[int, int, int, int]:
    """The door of every scorer: ``X`` (B, N, d) float, ``Y`` (B, N) integer labels in [0, C), ``xq`` (B, d) of
    X's dtype, ``C`` >= 2; B, N, d >= 1 (``d`` given: X must have that many features). Returns (B, N, d, C)."""
    C = V_.integer("C", C, min=2)
    _bounded("X", X, ndim=3, nonempty=True, shape=None if d is None else (None, None, d))
    B, N, d = X.shape
    V_.tensor("Y", Y, shape=(B, N), dtype="int", min=0, max=C, strict_max=True)
    _bounded("xq", xq, shape=(B, d))
    if xq.dtype != X.dtype:
        raise TypeError(f"xq must have X's dtype {X.dtype}, got {xq.dtype}")
    return B, N, d, C


def _priors(name: str, pi: Any, C: int) -> np.ndarray:
    """A probability vector of length C with positive entries (a log prior of 0 would be -inf); float64."""
    pi = V_.array(name, pi, shape=(C,), dtype="float", min=0, strict_min=True).astype(np.float64)
    if not abs(pi.sum() - 1) <= 1e-6:
        raise ValueError(f"{name} must sum to 1, got sum {pi.sum()}")
    return pi


def stable_rank(M: np.ndarray) -> float:
    """``||M||_F^2 / ||M||_2^2``."""
    M = _bounded_array("M", M, ndim=2, nonempty=True).astype(np.float64)
    s = np.linalg.svd(M, compute_uv=False)
    if s[0] == 0:
        raise ValueError("M is zero: stable rank undefined")
    return float((s ** 2).sum() / s[0] ** 2)


def power_spectrum(r: int, alpha: float) -> np.ndarray:
    """Singular values ``sigma_i = i^-alpha``, i = 1..r (unnormalised)."""
    r = V_.integer("r", r, min=1)
    alpha = V_.nonnegative("alpha", alpha)
    return np.arange(1, r + 1, dtype=np.float64) ** (-float(alpha))


def alpha_for_stable_rank(srank: float, r: int) -> float:
    """The decay ``alpha`` whose spectrum ``i^-alpha`` (i <= r) has the given stable rank (in [1, r])."""
    r = V_.integer("r", r, min=1)
    srank = V_.number("srank", srank)
    if r == 1:
        if abs(srank - 1.0) > 1e-12:
            raise ValueError(f"srank (the stable rank) must be 1 for rank r = 1, got {srank}")
        return 0.0
    if not 1.0 <= srank <= r:
        raise ValueError(f"srank (the stable rank) must lie in [1, r] = [1, {r}], got {srank}")
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
    n, k = V_.integer("n", n, min=1), V_.integer("k", k, min=1)
    rng, orth_to_ones = _rng(rng), V_.boolean("orth_to_ones", orth_to_ones)
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
    d, C = V_.integer("d", d, min=1), V_.integer("C", C, min=2)
    sigma = _sigma(sigma)
    r = len(sigma)
    if r > min(d, C - 1):
        raise ValueError(f"rank r={r} (the length of sigma) must be <= min(d, C-1) = {min(d, C - 1)}")
    R2 = _R2(R2)
    rng = _rng(rng)
    if U is None:
        U = random_orthonormal(d, r, rng)
    else:
        U = V_.array("U", U, shape=(d, r), dtype="float")
    V = random_orthonormal(C, r, rng, orth_to_ones=True)
    s = sigma * math.sqrt(C * R2 / float((sigma ** 2).sum()))
    return (U * s) @ V.T


def _sigma(sigma: Any) -> np.ndarray:
    """Singular values: a non-empty vector of positive finite numbers of magnitude <= BIG; float64."""
    return V_.array("sigma", sigma, ndim=1, dtype="float", nonempty=True, min=0, strict_min=True,
                    max=BIG).astype(np.float64)


def _R2(R2: Any) -> float:
    """The mean squared center norm: > 0 and <= BIG (C * R2 and its square root stay finite)."""
    return V_.number("R2", R2, min=0, strict_min=True, max=BIG)


def label_priors(C: int, majority: float | None = None) -> np.ndarray:
    """Uniform priors, or class 0 with prior ``majority`` and the rest sharing ``1 - majority`` equally."""
    C = V_.integer("C", C, min=2)
    if majority is None:
        return np.full(C, 1.0 / C)
    majority = V_.number("majority", majority)
    if not 1.0 / C <= majority < 1.0:
        raise ValueError(f"majority must be in [1/C, 1), got {majority}")
    return np.array([majority] + [(1 - majority) / (C - 1)] * (C - 1))


def prompt_labels(N: int, pi: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """N labels whose counts are exactly ``N pi`` (rounded by largest remainder), in random order."""
    N = V_.integer("N", N, min=0)
    pi = V_.array("pi", pi, ndim=1, dtype="float", nonempty=True, min=0).astype(np.float64)
    if not abs(pi.sum() - 1) <= 1e-9:
        raise ValueError(f"pi must be a probability vector (sum 1), got sum {pi.sum()}")
    rng = _rng(rng)
    raw = N * pi
    counts = np.floor(raw).astype(int)
    rest = N - counts.sum()
    counts[np.argsort(-(raw - counts), kind="stable")[:rest]] += 1
    return rng.permutation(np.repeat(np.arange(len(pi)), counts))


def class_centers_batch(B: int, d: int, C: int, sigma: Sequence[float], R2: float, rng: np.random.Generator,
                        U: np.ndarray | None = None) -> np.ndarray:
    """``B`` independent tasks at once: (B, d, C) center matrices, each as :func:`class_centers` makes one.

    A fresh ``U`` per task unless ``U`` (d x r, orthonormal) is given: then every task lies in that shared
    r-dimensional subspace and only ``V`` (the arrangement of the centers inside it) changes.
    """
    B = V_.integer("B", B, min=1)
    d = V_.integer("d", d, min=1)
    C = V_.integer("C", C, min=2)
    sigma = _sigma(sigma)
    R2 = _R2(R2)
    r = len(sigma)
    if r > min(d, C - 1):
        raise ValueError(f"rank r={r} (the length of sigma) must be <= min(d, C-1) = {min(d, C - 1)}")
    rng = _rng(rng)
    if U is None:
        U = _orthonormal_batch(B, d, r, rng)
    else:
        U = V_.array("U", U, shape=(d, r), dtype="float")[None]
    A = rng.standard_normal((B, C, r))
    A -= A.mean(1, keepdims=True)  # columns orthogonal to the ones vector: centers sum to zero
    Vm = _qr_signed(A)
    s = sigma * math.sqrt(C * R2 / float((sigma ** 2).sum()))
    return (U * s) @ Vm.transpose(0, 2, 1)


def _qr_signed(A: np.ndarray) -> np.ndarray:
    Q, R = np.linalg.qr(A)
    return Q * np.sign(np.diagonal(R, axis1=-2, axis2=-1))[..., None, :]


def _orthonormal_batch(B: int, n: int, k: int, rng: np.random.Generator) -> np.ndarray:
    return _qr_signed(rng.standard_normal((B, n, k)))


def sample_prompts(B: int, N: int, d: int, C: int, sigma: Sequence[float], R2: float, rng: np.random.Generator,
                   pi: np.ndarray | None = None, query_pi: np.ndarray | None = None,
                   U: np.ndarray | None = None, task: np.ndarray | None = None) -> dict[str, Tensor]:
    """B prompts, each a fresh task (or all of one fixed ``task``, a d x C center matrix): context ``X`` (B, N, d), labels ``Y`` (B, N), query ``xq`` (B, d), ``yq`` (B,)
    and the task's centers ``M`` (B, d, C), for references that know them (the Bayes rule).

    Context label counts follow ``pi`` exactly; the query label is drawn from ``query_pi`` (default uniform, so
    every class is tested equally often). A given ``U`` (d x r) puts every task in one shared subspace.
    Vectorised over prompts (one batched QR for the tasks, one draw for all the noise).
    """
    B = V_.integer("B", B, min=1)
    N = V_.integer("N", N, min=1)
    d, C = V_.integer("d", d, min=1), V_.integer("C", C, min=2)
    rng = _rng(rng)
    pi = label_priors(C) if pi is None else V_.array("pi", pi, shape=(C,), dtype="float", min=0).astype(float)
    qpi = label_priors(C) if query_pi is None else V_.array("query_pi", query_pi, shape=(C,), dtype="float",
                                                            min=0).astype(float)
    if not abs(qpi.sum() - 1) <= 1e-9:
        raise ValueError(f"query_pi must be a probability vector of length C={C}, got {qpi!r}")
    if task is None:
        M = class_centers_batch(B, d, C, sigma, R2, rng, U)  # (B, d, C)
    else:
        M = np.broadcast_to(_bounded_array("task", task, shape=(d, C)), (B, d, C))
    base = prompt_labels(N, pi, rng)
    Y = rng.permuted(np.broadcast_to(base, (B, N)), axis=1)
    yq = rng.choice(C, size=B, p=qpi)
    centers = M.transpose(0, 2, 1).astype(np.float32)  # (B, C, d)
    rows = np.arange(B)
    X = centers[rows[:, None], Y]
    X += rng.standard_normal((B, N, d), dtype=np.float32)
    xq = centers[rows, yq] + rng.standard_normal((B, d), dtype=np.float32)
    return {"X": torch.from_numpy(X), "Y": torch.from_numpy(Y), "xq": torch.from_numpy(xq),
            "yq": torch.from_numpy(yq), "M": torch.from_numpy(M.astype(np.float32))}


def lsa_forward(X: Tensor, Y: Tensor, xq: Tensor, W_kq: Tensor, W_pv: Tensor, C: int) -> Tensor:
    """Full linear self-attention: ``E + W_pv E (E^T W_kq E) / N``; returns the query's label slot (B, C).

    ``E`` is (d + C) x (N + 1): columns ``(x_i, onehot(y_i))`` and ``(x_q, 0)``.
    """
    B, N, d, C = _prompt(X, Y, xq, C)
    for name, W in (("W_kq", W_kq), ("W_pv", W_pv)):
        _bounded(name, W, shape=(d + C, d + C))
        if W.dtype != X.dtype:
            raise TypeError(f"{name} must have X's dtype {X.dtype}, got {W.dtype}")
    Yh = torch.nn.functional.one_hot(Y, C).to(X.dtype)
    Z = torch.cat([torch.cat([X, Yh], -1), torch.cat([xq, torch.zeros(B, C, dtype=X.dtype)], -1)[:, None]], 1)
    E = Z.transpose(1, 2)  # (B, d+C, N+1)
    Ec = E[:, :, :N]  # the context columns carry the keys/values (the query's own column is masked out)
    out = E + W_pv @ Ec @ (Ec.transpose(1, 2) @ W_kq @ E) / N
    return out[:, d:, -1]


def reduced_scores(X: Tensor, Y: Tensor, xq: Tensor, W: Tensor, C: int) -> Tensor:
    """The reduced form: ``s_c = (1/N) sum_{i: y_i = c} x_i^T W x_q`` = share_c * mean_c^T W x_q; (B, C)."""
    _, _, d, C = _prompt(X, Y, xq, C)
    _bounded("W", W, shape=(d, d))
    if W.dtype != X.dtype:
        raise TypeError(f"W must have X's dtype {X.dtype}, got {W.dtype}")
    return _reduced(X, Y, xq, W, C)


def _reduced(X: Tensor, Y: Tensor, xq: Tensor, W: Tensor, C: int) -> Tensor:
    N = X.shape[1]
    Yh = torch.nn.functional.one_hot(Y, C).to(X.dtype)
    return torch.einsum("bnc,bnd,de,be->bc", Yh, X, W, xq) / N


class LinearICL(nn.Module):
    """The linear transformer in its reduced form, with one trainable ``W`` (d x d), initialised at 0."""

    def __init__(self, d: int) -> None:
        d = V_.integer("d", d, min=1)
        super().__init__()
        self.W = nn.Parameter(torch.zeros(d, d))

    def forward(self, X: Tensor, Y: Tensor, xq: Tensor, C: int) -> Tensor:
        _, _, _, C = _prompt(X, Y, xq, C, d=self.W.shape[0])  # the model's d features
        if X.dtype != self.W.dtype:
            raise TypeError(f"X must have the model's dtype {self.W.dtype}, got {X.dtype}")
        return _reduced(X, Y, xq, self.W, C)


class SoftmaxICL(nn.Module):
    """A small softmax transformer on ``(x_i, y_i)`` tokens and a ``(x_q, 0)`` query token (pre-norm blocks
    from :mod:`helpers.nn`, no positional encoding: the context is a set); reads class logits at the query."""

    def __init__(self, d: int, C: int, d_model: int = 64, n_layer: int = 2, n_head: int = 4) -> None:
        d, C = V_.integer("d", d, min=1), V_.integer("C", C, min=2)
        V_.integer("d_model", d_model, min=1)
        V_.integer("n_layer", n_layer, min=1)
        V_.integer("n_head", n_head, min=1)
        if d_model % n_head:
            raise ValueError(f"d_model ({d_model}) must be divisible by n_head ({n_head})")
        super().__init__()
        self.C = C
        cfg = TransformerConfig(vocab_size=1, n_layer=n_layer, n_head=n_head, d_model=d_model, pos="none")
        self.inp = nn.Linear(d + C + 1, d_model)
        self.blocks = nn.ModuleList([Block(cfg) for _ in range(n_layer)])
        self.ln = nn.LayerNorm(d_model)
        self.out = nn.Linear(d_model, C)

    def forward(self, X: Tensor, Y: Tensor, xq: Tensor, C: int | None = None) -> Tensor:
        if C is not None and V_.integer("C", C) != self.C:
            raise ValueError(f"C must be the model's number of classes {self.C} (or None), got {C}")
        B, N, d, _ = _prompt(X, Y, xq, self.C, d=self.inp.in_features - self.C - 1)  # the model's d features
        if X.dtype != self.inp.weight.dtype:
            raise TypeError(f"X must have the model's dtype {self.inp.weight.dtype}, got {X.dtype}")
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
    _, _, _, C = _prompt(X, Y, xq, C)
    if pi is not None:
        _priors("pi", pi, C)
    Yh = torch.nn.functional.one_hot(Y, C).to(X.dtype)
    cnt = Yh.sum(1).clamp_min(1)
    mu = torch.einsum("bnc,bnd->bcd", Yh, X) / cnt[..., None]
    logp = torch.log(cnt / X.shape[1]) if pi is None else torch.log(torch.as_tensor(pi, dtype=X.dtype))
    return (mu @ xq[..., None])[..., 0] - 0.5 * (mu ** 2).sum(-1) + logp


def accuracy_by_class(scores: Tensor, yq: Tensor, C: int) -> np.ndarray:
    """Accuracy for queries of each class (nan for a class never queried)."""
    C = V_.integer("C", C, min=1)
    V_.tensor("scores", scores, ndim=2, dtype="numeric", finite=False, nonempty=True)
    if scores.dtype.is_floating_point and bool(torch.isnan(scores).any()):
        raise ValueError("scores must not contain NaN (an argmax over NaN is meaningless)")
    if scores.shape[1] != C:
        raise ValueError(f"scores must have C={C} columns (one per class), got shape {tuple(scores.shape)}")
    V_.tensor("yq", yq, shape=(scores.shape[0],), dtype="int", min=0, max=C, strict_max=True)
    ok = (scores.argmax(-1) == yq).float()
    return np.array([ok[yq == c].mean().item() if (yq == c).any() else float("nan") for c in range(C)])


def bayes_scores(M: Tensor, xq: Tensor, pi: np.ndarray | None = None) -> Tensor:
    """The Bayes rule of a task whose centers ``M`` (B, d, C) are known: ``mu_c^T x - ||mu_c||^2 / 2 + log pi_c``.

    The data's own ceiling: no learner that sees only the context can beat it on average.
    """
    _bounded("M", M, ndim=3, nonempty=True)
    _bounded("xq", xq, shape=(M.shape[0], M.shape[1]))
    C = M.shape[2]
    if pi is not None:
        _priors("pi", pi, C)
    logp = torch.zeros(C, dtype=M.dtype) if pi is None else torch.log(torch.as_tensor(pi, dtype=M.dtype))
    return torch.einsum("bdc,bd->bc", M, xq) - 0.5 * (M ** 2).sum(1) + logp


def subspace_oracle_scores(X: Tensor, Y: Tensor, xq: Tensor, C: int, U: np.ndarray | Tensor,
                           pi: np.ndarray | None = None) -> Tensor:
    """Plug-in LDA after projecting features onto a known subspace ``U`` (d x k): the reference for a learner that
    knows the shared subspace but, like the transformer, sees only the prompt's examples of the task."""
    _, _, d, C = _prompt(X, Y, xq, C)
    V_.array("U", U, ndim=2, dtype="float", nonempty=True, min=-BIG, max=BIG)
    Ut = torch.as_tensor(np.asarray(U), dtype=X.dtype) if not isinstance(U, Tensor) else U.to(X.dtype)
    if Ut.ndim != 2 or Ut.shape[0] != X.shape[-1]:
        raise ValueError(f"U must have shape ({X.shape[-1]}, k), got {tuple(Ut.shape)}")
    return lda_scores(X @ Ut, Y, xq @ Ut, C, pi)


def matrix_cosine(A: np.ndarray | Tensor, B: np.ndarray | Tensor) -> float:
    """``<A, B>_F / (||A||_F ||B||_F)``: 1 when A is a positive multiple of B."""
    A = _bounded_array("A", A, ndim=2, nonempty=True).astype(np.float64)
    B = _bounded_array("B", B, shape=A.shape).astype(np.float64)
    na, nb = np.linalg.norm(A), np.linalg.norm(B)
    if not (na > 0 and nb > 0):
        raise ValueError(f"A and B must be non-zero matrices, got ||A||_F = {na:g} and ||B||_F = {nb:g}")
    return float((A * B).sum() / (na * nb))


def subspace_alignment(W: np.ndarray | Tensor, U: np.ndarray) -> np.ndarray:
    """Cosines of the principal angles between the top-k eigenvectors of ``(W + W^T) / 2`` (largest eigenvalues)
    and the columns of ``U`` (d x k, orthonormal); all ones when W's leading eigenspace is span(U)."""
    W = _bounded_array("W", W, ndim=2).astype(np.float64)
    U = _bounded_array("U", U, ndim=2).astype(np.float64)
    d, k = U.shape
    if W.shape != (d, d) or not 1 <= k <= d:
        raise ValueError(f"W must be (d, d) and U (d, k) with k <= d, got W {W.shape} and U {U.shape}")
    ev, vecs = np.linalg.eigh((W + W.T) / 2)
    top = vecs[:, np.argsort(-ev)[:k]]
    Qu, _ = np.linalg.qr(U)
    return np.clip(np.linalg.svd(top.T @ Qu, compute_uv=False), 0.0, 1.0)


def pca_subspace(features: np.ndarray | Tensor, k: int) -> np.ndarray:
    """The top-k principal directions (d x k, orthonormal) of pooled features (n x d, uncentred second moment):
    how a practitioner would estimate a shared class subspace from the training tasks' examples."""
    F_ = _bounded_array("features", features, ndim=2, nonempty=True).astype(np.float64)
    k = V_.integer("k", k, min=1, max=F_.shape[1])
    ev, vecs = np.linalg.eigh(F_.T @ F_ / len(F_))
    return vecs[:, np.argsort(-ev)[:k]]


def offsubspace_residue(W: np.ndarray | Tensor, U: np.ndarray) -> dict[str, float]:
    """How ``W`` (d x d) splits into its part on span(U) (``S = P W P``, P = UU^T) and the rest ``R = W - S``.

    Returns ``ratio`` = ||R||_F^2 / ||S||_F^2; ``per_entry`` = ratio / (d^2 - k^2) (the same at every d when R is
    i.i.d. noise of fixed size per entry relative to S); ``eig_mean`` and ``eig_sd``, the mean and spread of the
    eigenvalues of the symmetric part of W on the orthogonal complement (a systematic part c (I - P) shows as
    ``eig_mean = c`` with no spread; noise as mean ~ 0); ``antisym_share``, the antisymmetric share of that block's
    squared norm (1/2 for an i.i.d. Gaussian matrix, 0 for a symmetric one)."""
    W = _bounded_array("W", W, ndim=2).astype(np.float64)
    U = _bounded_array("U", U, ndim=2).astype(np.float64)
    d, k = U.shape
    if W.shape != (d, d) or not 1 <= k < d:
        raise ValueError(f"W must be (d, d) and U (d, k) with k < d, got W {W.shape} and U {U.shape}")
    Qu, _ = np.linalg.qr(U)
    P = Qu @ Qu.T
    S = P @ W @ P
    R = W - S
    nS = float((S ** 2).sum())
    if nS <= 1e-20 * float((W ** 2).sum()):
        raise ValueError("W has no part on span(U): the residue ratio is undefined")
    Qc = np.linalg.svd(np.eye(d) - P)[0][:, : d - k]  # orthonormal basis of the complement
    B = Qc.T @ W @ Qc
    ev = np.linalg.eigvalsh((B + B.T) / 2)
    nB = float((B ** 2).sum())
    ratio = float((R ** 2).sum()) / nS
    return dict(ratio=ratio, per_entry=ratio / (d * d - k * k), eig_mean=float(ev.mean()), eig_sd=float(ev.std()),
                antisym_share=float((((B - B.T) / 2) ** 2).sum() / nB) if nB > 0 else 0.0)


def examples_to_reach(grid: Sequence[float], accs: Sequence[float], target: float) -> float:
    """Examples (per label) at which an accuracy curve first reaches ``target``, interpolated linearly in
    log(examples) between grid points; ``grid[0]`` if already reached there (an upper bound), ``nan`` if never."""
    g = V_.array("grid", grid, ndim=1, dtype="float", nonempty=True, min=0, strict_min=True)
    a = V_.array("accs", accs, shape=(len(g),), dtype="float")
    target = V_.number("target", target)
    if (np.diff(g) <= 0).any():
        raise ValueError(f"grid must be increasing, got {g.tolist()}")
    for i in range(len(g)):
        if a[i] >= target:
            if i == 0:
                return float(g[0])
            f = (target - a[i - 1]) / (a[i] - a[i - 1])
            return float(np.exp(np.log(g[i - 1]) + f * (np.log(g[i]) - np.log(g[i - 1]))))
    return float("nan")


def bootstrap_examples(correct: dict, reference: Sequence, grid: Sequence[float], rng: np.random.Generator, *,
                       frac: float = 0.9, n_boot: int = 200) -> dict:
    """Bootstrap the examples per label each model needs to reach ``frac`` of the reference's accuracy.

    ``correct[m]`` is a list, one entry per grid point, of 0/1 arrays (prompt i scored right by model m);
    ``reference`` the same for the reference (the Bayes rule), on the same prompts. Each of ``n_boot`` rounds
    resamples the prompts of every grid point with replacement (the same draw for every model and the reference, so
    ratios between models are paired), sets the bar to ``frac`` times the reference's mean accuracy over the grid and
    applies :func:`examples_to_reach`. Returns ``{m: array (n_boot,)}`` (``nan`` where the bar is never reached)."""
    g = V_.array("grid", grid, ndim=1, dtype="float", nonempty=True, min=0, strict_min=True)
    rng = _rng(rng)
    frac = V_.probability("frac", frac)
    n_boot = V_.integer("n_boot", n_boot, min=1)
    if not isinstance(correct, dict) or not correct:
        raise TypeError("correct must be a non-empty dict of model -> per-grid-point 0/1 arrays")

    def _rows(name, rows):
        rows = V_.sequence(name, rows)
        if len(rows) != len(g):
            raise ValueError(f"{name} needs one array per grid point ({len(g)}), got {len(rows)}")
        return [V_.array(f"{name}[{i}]", r, ndim=1, dtype="float", nonempty=True, min=0, max=1).astype(np.float64)
                for i, r in enumerate(rows)]

    ref = _rows("reference", reference)
    cor = {m: _rows(f"correct[{m!r}]", v) for m, v in correct.items()}
    for m, rows in cor.items():
        if [len(r) for r in rows] != [len(r) for r in ref]:
            raise ValueError(f"correct[{m!r}] must score the same prompts as the reference at every grid point")
    out = {m: np.empty(n_boot) for m in cor}
    for b in range(n_boot):
        idx = [rng.integers(0, len(r), len(r)) for r in ref]
        bar = frac * float(np.mean([r[i].mean() for r, i in zip(ref, idx)]))
        for m, rows in cor.items():
            out[m][b] = examples_to_reach(g, [r[i].mean() for r, i in zip(rows, idx)], bar)
    return out


def predicted_margins(M: np.ndarray, pi: np.ndarray) -> np.ndarray:
    """For each class y, the linear transformer's (W = I) expected score margin over its closest rival,
    ``min_{c != y} pi_y ||mu_y||^2 - pi_c mu_c^T mu_y``; a negative margin means queries of y are mostly lost."""
    M = _bounded_array("M", M, ndim=2, nonempty=True).astype(np.float64)
    C = M.shape[1]
    pi = V_.array("pi", pi, shape=(C,), dtype="float", min=0)
    G = M.T @ M  # Gram matrix: G[c, y] = mu_c^T mu_y
    m = pi[:, None] * np.diag(G)[:, None] - pi[None, :] * G  # m[y, c] = pi_y ||mu_y||^2 - pi_c mu_c^T mu_y
    np.fill_diagonal(m, np.inf)
    return m.min(1)


def task_stream(seed: int, stream: int, B: int, N: int, d: int, C: int, sigma: Sequence[float], R2: float,
                U: np.ndarray | None = None, *, pi: np.ndarray | None = None,
                shuffle_classes: bool = False) -> Callable[[int], dict[str, Tensor]]:
    """``step -> batch`` of fresh prompts for :func:`helpers.train.fit`, deterministic in (seed, stream, step).

    ``pi``: the context's label shares (default uniform; queries stay uniform). ``shuffle_classes``: each prompt
    renames its classes by a random permutation (labels, query label and the columns of ``M`` together), so with an
    imbalanced ``pi`` a random class is the majority. Defaults: the batches of the first version, unchanged."""
    V_.seed("seed", seed)
    V_.seed("stream", stream)
    V_.integer("B", B, min=1)
    V_.integer("N", N, min=1)
    d, C = V_.integer("d", d, min=1), V_.integer("C", C, min=2)
    r = len(_sigma(sigma))
    _R2(R2)
    if r > min(d, C - 1):
        raise ValueError(f"rank r={r} (the length of sigma) must be <= min(d, C-1) = {min(d, C - 1)}")
    V_.optional(V_.array, "U", U, shape=(d, r), dtype="float")
    if pi is not None:
        pi = _priors("pi", pi, C)
    shuffle_classes = V_.boolean("shuffle_classes", shuffle_classes)

    def batch(step: int) -> dict[str, Tensor]:
        V_.integer("step", step, min=0)
        rng = np.random.default_rng([seed, stream, step])
        b = sample_prompts(B, N, d, C, sigma, R2, rng, pi=pi, U=U)
        if shuffle_classes:
            perm = torch.from_numpy(rng.permuted(np.broadcast_to(np.arange(C), (B, C)), axis=1))
            inv = torch.argsort(perm, dim=1)  # new class j is old class inv[j]
            b["Y"] = torch.gather(perm, 1, b["Y"])
            b["yq"] = perm[torch.arange(B), b["yq"]]
            b["M"] = torch.gather(b["M"], 2, inv[:, None, :].expand(-1, d, -1))
        return b

    return batch


def qk_subspace_alignment(model: SoftmaxICL, U: np.ndarray, layer: int = 0) -> dict[str, Any]:
    """Which feature directions the query and key maps of one attention layer of a :class:`SoftmaxICL` read.

    The feature part of a token reaches the layer's queries and keys through the input map ``W_x`` (its first d
    columns), the pre-norm LayerNorm (centring, then the gain ``g``; the division by the token's scale changes no
    direction) and ``W_Q``, ``W_K``: ``A = [W_Q; W_K] diag(g) (I - 11^T / d_model) W_x`` (2 d_model x d; for
    ``layer`` > 0 the residual stream also carries attention and MLP outputs, so this map is the feature path
    that skips the earlier blocks). Returns ``cosines``, the cosines of the principal angles between A's top-k
    right singular vectors and ``U`` (d x k, orthonormal; all ones when A reads span(U) most strongly), and
    ``energy``, ``||A U||_F^2 / ||A||_F^2`` (k / d for a map with no preferred direction)."""
    V_.instance("model", model, SoftmaxICL)
    layer = V_.integer("layer", layer, min=0, max=len(model.blocks) - 1)
    d = model.inp.in_features - model.C - 1
    U = _bounded_array("U", U, ndim=2).astype(np.float64)
    if U.shape[0] != d or not 1 <= U.shape[1] <= d:
        raise ValueError(f"U must have shape ({d}, k) with 1 <= k <= {d}, got {U.shape}")
    with torch.no_grad():
        Wx = model.inp.weight[:, :d].double()
        D = Wx.shape[0]
        blk = model.blocks[layer]
        g = blk.ln1.weight.double()
        F_ = g[:, None] * (Wx - Wx.mean(0, keepdim=True))
        A = (blk.attn.qkv.weight[: 2 * D].double() @ F_).numpy()
    Qu, _ = np.linalg.qr(U)
    top = np.linalg.svd(A, full_matrices=False)[2][: U.shape[1]].T  # d x k
    cos = np.clip(np.linalg.svd(top.T @ Qu, compute_uv=False), 0.0, 1.0)
    return {"cosines": cos, "energy": float(((A @ Qu) ** 2).sum() / (A ** 2).sum())}


def icl_loss(model: nn.Module, b: Mapping[str, Tensor]) -> Tensor:
    """Softmax cross-entropy of the query's class scores (the number of classes is read off the centers)."""
    V_.instance("model", model, nn.Module)
    V_.instance("b", b, Mapping)
    missing = [k for k in ("X", "Y", "xq", "yq", "M") if k not in b]
    if missing:
        raise ValueError(f"b must be a batch with keys X, Y, xq, yq and M, missing {missing}")
    V_.tensor("b['M']", b["M"], ndim=3)
    V_.tensor("b['yq']", b["yq"], shape=(b["M"].shape[0],), dtype="int", min=0, max=b["M"].shape[-1],
              strict_max=True)
    return nn.functional.cross_entropy(model(b["X"], b["Y"], b["xq"], b["M"].shape[-1]), b["yq"])


def train_icl(model: nn.Module, batches: Callable[[int], dict[str, Tensor]], steps: int, *, optimizer: str,
              lr: float, seed: int, warmup: int = 0, desc: str = "train", progress: bool = True) -> Any:
    """Train ``model`` on ``batches`` with :func:`helpers.train.fit`: ``optimizer="sgd"`` is plain gradient descent
    on fresh tasks (the linear transformer: the theory's algorithm, and rotation-equivariant, so the learned W does
    not depend on the basis), ``"adamw"`` the usual transformer optimizer. Returns the training history."""
    from helpers import train

    V_.instance("model", model, nn.Module)
    V_.function("batches", batches)
    V_.one_of("optimizer", optimizer, ("sgd", "adamw"))
    lr = V_.number("lr", lr, min=0, strict_min=True, max=1e6)  # beyond: the first step overflows
    opt = torch.optim.SGD(model.parameters(), lr=lr) if optimizer == "sgd" else None
    return train.fit(model, icl_loss, batches, steps, lr=lr, warmup=warmup, seed=seed, optimizer=opt,
                     grad_clip=None if optimizer == "sgd" else 1.0, desc=desc, progress=progress)


# ----------------------------------------------------------------------------------------------------------------
# Prompts as class sums: the linear transformer, W = I and plug-in LDA read a prompt only through the sum of the
# context features of each class and the class counts, so they can be sampled directly (d per class, not d per
# example), which makes training and evaluating at d = 256 cheap.
# ----------------------------------------------------------------------------------------------------------------
def _counts(counts: Any, B: int, C: int) -> np.ndarray:
    """Class counts: (C,) or (B, C) non-negative integers, every row summing to >= 1; returned as (B, C)."""
    n = V_.array("counts", counts, ndim=(1, 2), dtype="int", min=0)
    if n.shape[-1] != C or (n.ndim == 2 and n.shape[0] != B):
        raise ValueError(f"counts must have shape ({C},) or ({B}, {C}), got {n.shape}")
    n = np.broadcast_to(n, (B, C))
    if (n.sum(1) < 1).any():
        raise ValueError("counts must give every prompt at least one context example")
    return n


def class_sum_prompts(B: int, counts: Any, d: int, C: int, sigma: Sequence[float], R2: float,
                      rng: np.random.Generator, *, U: np.ndarray | None = None,
                      query_pi: np.ndarray | None = None) -> dict[str, Tensor]:
    """B prompts as sufficient statistics: ``S`` (B, C, d), the sum of the context features of each class;
    ``n`` (B, C) the class counts (``counts``, one row for all prompts or one per prompt); the query ``xq`` (B, d),
    ``yq`` (B,) and the centers ``M`` (B, d, C), drawn as :func:`sample_prompts` draws them.

    The sum of ``n_c`` features ``mu_c + N(0, I)`` is exactly ``n_c mu_c + sqrt(n_c) N(0, I)``, so this is the same
    distribution as summing a :func:`sample_prompts` context, for every model that reads only ``S`` and ``n``
    (:func:`sum_scores`, :func:`lda_sum_scores`)."""
    B = V_.integer("B", B, min=1)
    d, C = V_.integer("d", d, min=1), V_.integer("C", C, min=2)
    n = _counts(counts, B, C)
    rng = _rng(rng)
    qpi = label_priors(C) if query_pi is None else _priors("query_pi", query_pi, C)
    M = class_centers_batch(B, d, C, sigma, R2, rng, U)  # validates sigma, R2, U
    mu = M.transpose(0, 2, 1)  # (B, C, d)
    S = n[..., None] * mu + np.sqrt(n)[..., None] * rng.standard_normal((B, C, d))
    yq = rng.choice(C, size=B, p=qpi)
    xq = mu[np.arange(B), yq] + rng.standard_normal((B, d))
    f32 = lambda a: torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32))  # noqa: E731
    return {"S": f32(S), "n": f32(n), "xq": f32(xq), "yq": torch.from_numpy(yq), "M": f32(M)}


def _sums(S: Any, n: Any, xq: Any) -> tuple[int, int, int]:
    """The door of the class-sum scorers: ``S`` (B, C, d), ``n`` (B, C) >= 0 with rows summing > 0, ``xq`` (B, d),
    all float of one dtype. Returns (B, C, d)."""
    _bounded("S", S, ndim=3, nonempty=True)
    B, C, d = S.shape
    V_.tensor("n", n, shape=(B, C), dtype="float", min=0)
    _bounded("xq", xq, shape=(B, d))
    if not bool((n.sum(-1) > 0).all()):
        raise ValueError("n must give every prompt at least one context example (rows of n sum to > 0)")
    if not (S.dtype == n.dtype == xq.dtype):
        raise TypeError(f"S, n and xq must share a dtype, got {S.dtype}, {n.dtype}, {xq.dtype}")
    return B, C, d


def sum_scores(S: Tensor, n: Tensor, xq: Tensor, W: Tensor) -> Tensor:
    """The linear transformer's scores from class sums: ``s_c = S_c^T W x_q / N`` (N = sum of ``n``), equal to
    :func:`reduced_scores` on any prompt whose class sums are ``S``; (B, C)."""
    _, _, d = _sums(S, n, xq)
    _bounded("W", W, shape=(d, d))
    if W.dtype != S.dtype:
        raise TypeError(f"W must have S's dtype {S.dtype}, got {W.dtype}")
    return _sum_scores(S, n, xq, W)


def _sum_scores(S: Tensor, n: Tensor, xq: Tensor, W: Tensor) -> Tensor:
    return torch.einsum("bcd,bd->bc", S, xq @ W.T) / n.sum(-1, keepdim=True)


def lda_sum_scores(S: Tensor, n: Tensor, xq: Tensor, U: np.ndarray | Tensor | None = None,
                   pi: np.ndarray | None = None) -> Tensor:
    """Plug-in LDA from class sums (class means ``S_c / n_c``, identity covariance, log prior: the context's
    shares, or ``pi``), after projecting on ``U`` (d x k) when given (the subspace oracle, or PCA + LDA); equal to
    :func:`lda_scores` / :func:`subspace_oracle_scores` on the same prompt; (B, C)."""
    _, C, d = _sums(S, n, xq)
    if pi is not None:
        _priors("pi", pi, C)
    if U is not None:
        V_.array("U", U, ndim=2, dtype="float", nonempty=True, min=-BIG, max=BIG)
        Ut = torch.as_tensor(np.asarray(U) if not isinstance(U, Tensor) else U, dtype=S.dtype)
        if Ut.shape[0] != d:
            raise ValueError(f"U must have shape ({d}, k), got {tuple(Ut.shape)}")
        S, xq = S @ Ut, xq @ Ut
    mu = S / n.clamp_min(1)[..., None]
    N = n.sum(-1, keepdim=True)
    logp = torch.log(n.clamp_min(1) / N) if pi is None else torch.log(torch.as_tensor(pi, dtype=S.dtype))
    return (mu @ xq[..., None])[..., 0] - 0.5 * (mu ** 2).sum(-1) + logp


def with_constant_feature(S: Tensor, n: Tensor, xq: Tensor) -> tuple[Tensor, Tensor]:
    """Append a constant feature 1 to every token: the class sums gain the counts ``n_c`` as a last coordinate and
    the query a 1. A linear transformer on the (d + 1)-dim tokens, ``W~ = [[W, w1], [w2^T, b]]``, scores
    ``pi^_c (mu^_c^T W x_q + mu^_c^T w1 + w2^T x_q + b)``: the entry ``b`` is a learnable bias times the class
    share, the one way this layer can correct for the context's label prior. Returns (S~, xq~)."""
    B, C, _ = _sums(S, n, xq)
    return torch.cat([S, n[..., None]], -1), torch.cat([xq, torch.ones(B, 1, dtype=xq.dtype)], -1)


def sum_stream(seed: int, stream: int, B: int, counts: Any, d: int, C: int, sigma: Sequence[float], R2: float, *,
               U: np.ndarray | None = None, shuffle_counts: bool = False,
               query_pi: np.ndarray | None = None) -> Callable[[int], dict[str, Tensor]]:
    """``step -> batch`` of :func:`class_sum_prompts`, deterministic in (seed, stream, step). ``shuffle_counts``:
    each prompt permutes the classes' counts (with imbalanced counts, a random class is the majority)."""
    V_.seed("seed", seed)
    V_.seed("stream", stream)
    B = V_.integer("B", B, min=1)
    d, C = V_.integer("d", d, min=1), V_.integer("C", C, min=2)
    base = _counts(counts, 1, C)[0].copy() if np.ndim(counts) == 1 else _counts(counts, B, C)
    shuffle_counts = V_.boolean("shuffle_counts", shuffle_counts)
    class_sum_prompts(1, base if base.ndim == 1 else base[:1], d, C, sigma, R2, np.random.default_rng(0), U=U,
                      query_pi=query_pi)  # validates everything once, here

    def batch(step: int) -> dict[str, Tensor]:
        V_.integer("step", step, min=0)
        rng = np.random.default_rng([seed, stream, step])
        n = base
        if shuffle_counts:
            n = rng.permuted(np.broadcast_to(base, (B, C)), axis=1)
        return class_sum_prompts(B, n, d, C, sigma, R2, rng, U=U, query_pi=query_pi)

    return batch


def train_sums(d: int, batches: Callable[[int], dict[str, Tensor]], steps: int, *, lr: float,
               decay: float | None = None, snapshots: Sequence[int] = (), constant_feature: bool = False,
               desc: str = "train", progress: bool = True) -> dict[str, Any]:
    """Gradient descent on fresh tasks for the linear transformer's ``W`` (d x d, or (d + 1) x (d + 1) with
    ``constant_feature``), from 0, on the softmax cross-entropy of :func:`sum_scores`. Step size
    ``lr / (1 + t / decay)`` at step t (constant when ``decay`` is None): a decaying step lets the SGD noise that
    a constant step keeps in W die out. Returns ``W``, the per-step ``loss`` and ``snapshots``
    ({step: W after that many steps})."""
    from tqdm.auto import tqdm

    d = V_.integer("d", d, min=1)
    V_.function("batches", batches)
    steps = V_.integer("steps", steps, min=1)
    lr = V_.number("lr", lr, min=0, strict_min=True, max=1e6)
    decay = V_.optional(V_.number, "decay", decay, min=0, strict_min=True)
    snaps = sorted({V_.integer("snapshot", t, min=1, max=steps) for t in V_.sequence("snapshots", snapshots)})
    constant_feature = V_.boolean("constant_feature", constant_feature)
    D = d + int(constant_feature)
    W = torch.zeros(D, D, requires_grad=True)
    losses, out = [], {}
    for t in tqdm(range(steps), desc=desc, disable=not progress, mininterval=1.0):
        b = batches(t)
        S, n, xq = b["S"], b["n"], b["xq"]
        if t == 0:
            _sums(S, n, xq)
            if S.shape[-1] != d:
                raise ValueError(f"batches must give d = {d} features, got {S.shape[-1]}")
        if constant_feature:
            S, xq = with_constant_feature(S, n, xq)
        loss = nn.functional.cross_entropy(_sum_scores(S, n, xq, W), b["yq"])
        (g,) = torch.autograd.grad(loss, W)
        with torch.no_grad():
            W -= (lr if decay is None else lr / (1 + t / decay)) * g
        losses.append(float(loss.detach()))
        if t + 1 in snaps:
            out[t + 1] = W.detach().clone()
    return {"W": W.detach().clone(), "loss": losses, "snapshots": out}


def checkpoint_config(name: str) -> dict:
    """The training config of the chapter's checkpoints (what ``data/14_icl_multiclass/make_models.py`` trains and
    the default run loads): ``shared_lt`` (linear transformers on tasks in a shared k-dim subspace, per d and
    seed, with a constant and a decaying step size, W saved at several numbers of training tasks) and ``softmax_tf`` (2-layer softmax transformers on isotropic tasks, per seed)."""
    V_.instance("name", name, str)
    if name == "shared_lt":
        # two arms per (d, seed): the constant step of the first version (lr 1) and a decaying one
        # (lr / (1 + t / decay)); W saved at the snapshot steps (tasks seen = step x batch)
        return dict(k=4, C=5, R2=4.0, per_label=8, dims=[16, 64, 256], seeds=[0, 1, 2], batch=256,
                    optimizer="sgd", lr=1.0, decay=100, sampler="class sums",
                    steps={"decay": 6400, "constant": 3200},
                    snapshots={"decay": [50, 100, 200, 400, 800, 1600, 3200, 6400], "constant": [800, 3200]},
                    subspace_stream=7, train_stream=8)
    if name == "softmax_tf":
        return dict(d=16, C=5, R2=9.0, per_label=8, seeds=[0, 1, 2], steps=600, batch=128, optimizer="adamw",
                    lr=1e-3, warmup=60, d_model=64, n_layer=2, n_head=4, train_stream=2)
    if name == "softmax_tf_imbalanced":
        # softmax_tf's model and optimiser on imbalanced contexts: class share `majority` for a random class in
        # each prompt, queries of every class equally often (other tasks than softmax_tf's: train_stream 3).
        # 1500 steps: a first run with softmax_tf's 600 left the loss still falling at every seed (it leaves
        # chance level some 300 steps later than on balanced prompts; plateau 0.16, 0.41, 0.14 > 0.05)
        return dict(checkpoint_config("softmax_tf"), majority=0.6, shuffle_classes=True, train_stream=3,
                    steps=1500)
    if name == "softmax_tf_shared":
        # softmax_tf's model and optimiser on tasks in one shared k-dim subspace U of R^d (U per seed, drawn as
        # shared_lt draws it)
        return dict(checkpoint_config("softmax_tf"), d=32, k=4, subspace_stream=7, train_stream=4)
    raise ValueError(f"name must be one of 'shared_lt', 'softmax_tf', 'softmax_tf_imbalanced', "
                     f"'softmax_tf_shared', got {name!r}")


def dataset_prompts(features: np.ndarray, labels: np.ndarray, B: int, per_label: int, rng: np.random.Generator,
                    d: int | None = None) -> dict[str, Tensor]:
    """Prompts from a labelled dataset: per prompt, ``per_label`` context examples of every class and one query of a
    uniformly drawn class (distinct from the context), all turned by a fresh random rotation of R^d (features are
    zero-padded to ``d`` first), so that no prompt can be solved by remembering a fixed direction.

    Returns ``X``, ``Y``, ``xq``, ``yq`` like :func:`sample_prompts` (no ``M``: the centers are unknown).
    """
    F_ = _bounded_array("features", features, ndim=2, nonempty=True)
    y = V_.array("labels", labels, shape=(F_.shape[0],), dtype="int")
    B = V_.integer("B", B, min=1)
    per_label = V_.integer("per_label", per_label, min=1)
    d = F_.shape[1] if d is None else V_.integer("d", d, min=F_.shape[1])
    rng = _rng(rng)
    classes = np.unique(y)
    C = len(classes)
    pools = [np.flatnonzero(y == c) for c in classes]
    if min(len(p) for p in pools) < per_label + 1:
        raise ValueError(f"every class needs at least per_label + 1 = {per_label + 1} examples")
    Fp = np.zeros((F_.shape[0], d))
    Fp[:, : F_.shape[1]] = F_
    yq = rng.integers(0, C, size=B)
    ctx = np.empty((B, C * per_label), dtype=np.int64)
    q = np.empty(B, dtype=np.int64)
    for b in range(B):
        picks = [rng.choice(p, per_label + 1, replace=False) for p in pools]
        ctx[b] = np.concatenate([p[:per_label] for p in picks])
        q[b] = picks[yq[b]][per_label]
    Y = np.repeat(np.arange(C), per_label)[None].repeat(B, 0)
    order = rng.permuted(np.broadcast_to(np.arange(C * per_label), (B, C * per_label)), axis=1)
    ctx, Y = np.take_along_axis(ctx, order, 1), np.take_along_axis(Y, order, 1)
    Q = _orthonormal_batch(B, d, d, rng)  # a Haar rotation per prompt
    X = np.einsum("bnd,bed->bne", Fp[ctx], Q)
    xq = np.einsum("bd,bed->be", Fp[q], Q)
    return {"X": torch.tensor(X, dtype=torch.float32), "Y": torch.from_numpy(Y), "xq": torch.tensor(xq, dtype=torch.float32),
            "yq": torch.from_numpy(yq)}
