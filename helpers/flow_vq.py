"""Flow-VQ: quantization through a learned flow, with transported even-quantile codes.

The construction (reconstructed from the paper's abstract; see the chapter ``08_flow_vq``):

1. A small flow-matching model ``v(z, t)`` learns the latent distribution: Gaussian source ``z0 ~ N(0, I)``,
   linear path ``z_t = (1 - t) z0 + t z1``, target velocity ``z1 - z0``. The ODE flow map ``Psi`` (RK4 or Heun)
   transports the source onto the latents and back (integrate backwards for ``Psi^{-1}``).
2. Prior codes ``C0``: the source is cut into ``K = prod(m_j)`` equal-mass cells by per-dimension Gaussian
   quantiles ``Phi^{-1}(i / m_j)``; each cell's code is its conditional mean.
3. Codebook ``C1``: push the cells through ``Psi`` and take each transported cell's centroid (Monte Carlo), then
   optionally a few Lloyd steps on the model samples. The codebook has no trainable parameters; it is a function
   of the flow, refreshed every ``R`` steps.
4. Nearest-code quantization with a straight-through estimator.

Baselines for the chapter: VQ-VAE (commitment loss), VQ with EMA updates and dead-code restarts, FSQ, a plain
Gaussian-quantile grid and k-means (the distortion reference).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from scipy import stats
from torch import Tensor, nn

from helpers import validate as V

__all__ = [
    "split_levels", "check_levels", "gaussian_bin_edges", "gaussian_bin_means", "prior_codes", "source_cells",
    "VelocityField", "flow_matching_loss", "integrate", "flow_map", "flow_inverse",
    "nearest", "distortion", "lloyd", "TransportedCodes", "transport_codes", "quantize_ste", "usage",
    "equal_mass_test", "QuantOut", "FlowQuantizer", "VectorQuantizer", "EMAVectorQuantizer", "FSQ",
    "GaussianGridQuantizer", "kmeans_codes", "Tokenizer", "TOY_DISTRIBUTIONS", "toy_latents", "lorenz_states",
    "RankCells", "mmd_rbf", "distortion_at_entropy", "distortion_at_rate", "matched_rate_ratios", "TokenPrior",
    "prior_bits", "fit_prior", "grid_neighbour",
    "topology_ratio", "TOK_METHODS", "make_quantizer", "train_flow", "train_tokenizer", "checkpoint_config",
    "evaluate_tokenizer", "uniform_grid", "LORENZ_METHODS", "fixed_data_codebooks",
]


# ----------------------------------------------------------------------------------------------------------------
# Prior codes: an even-quantile partition of N(0, I)
# ----------------------------------------------------------------------------------------------------------------
def check_levels(levels: Sequence[int]) -> list[int]:
    """Validate per-dimension level counts (each an int >= 2) and return them as a list."""
    if isinstance(levels, (str, bytes)) or not isinstance(levels, Sequence) or len(levels) == 0:
        raise TypeError(f"levels must be a non-empty sequence of ints, got {levels!r}")
    out = []
    for m in levels:
        if isinstance(m, bool) or not isinstance(m, (int, np.integer)):
            raise TypeError(f"levels must be ints, got {m!r}")
        if m < 2:
            raise ValueError(f"levels must all be >= 2, got {list(levels)}")
        out.append(int(m))
    return out


def split_levels(K: int, d: int) -> list[int]:
    """Per-dimension level counts ``m_1 >= ... >= m_d >= 2`` with ``prod(m) == K``, as equal as possible.

    Raises ValueError when ``K`` is not a product of ``d`` factors >= 2 (e.g. ``K=7, d=2``).
    """
    for name, v in (("K", K), ("d", d)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"{name} must be an int, got {v!r}")
    if d < 1:
        raise ValueError(f"d must be >= 1, got {d}")
    if K < 2**d:
        raise ValueError(f"K={K} is not a product of {d} per-dimension levels >= 2 (needs K >= {2**d})")

    best: list[int] | None = None

    def search(rem: int, k: int, cap: int, acc: list[int]) -> None:
        nonlocal best
        if k == 0:
            if rem == 1 and (best is None or max(acc) - min(acc) < max(best) - min(best)):
                best = list(acc)
            return
        for m in range(min(cap, rem), 1, -1):
            if rem % m == 0 and m ** k >= rem:  # m is the largest remaining factor, so m**k must reach rem
                search(rem // m, k - 1, m, acc + [m])

    search(int(K), int(d), int(K), [])
    if best is None:
        raise ValueError(f"K={K} is not a product of {d} per-dimension levels >= 2; pick K = m_1 * ... * m_{d}")
    return best


def gaussian_bin_edges(m: int) -> np.ndarray:
    """The ``m + 1`` equal-mass bin edges ``Phi^{-1}(i / m)`` of N(0, 1), from ``-inf`` to ``inf``."""
    m = V.integer("m", m, min=2)
    return stats.norm.ppf(np.arange(m + 1) / m)


def gaussian_bin_means(m: int) -> np.ndarray:
    """Conditional means ``E[Z | a < Z < b] = (phi(a) - phi(b)) / (Phi(b) - Phi(a))`` of the ``m`` equal-mass bins."""
    e = gaussian_bin_edges(m)
    return (stats.norm.pdf(e[:-1]) - stats.norm.pdf(e[1:])) * m  # Phi(b) - Phi(a) = 1/m


def prior_codes(levels: Sequence[int]) -> Tensor:
    """The ``K = prod(levels)`` prior codes C0 (row-major: the last dimension varies fastest), shape (K, d)."""
    levels = check_levels(levels)
    axes = [torch.tensor(gaussian_bin_means(m), dtype=torch.float32) for m in levels]
    grid = torch.meshgrid(*axes, indexing="ij")
    return torch.stack([g.reshape(-1) for g in grid], dim=-1)


def source_cells(z0: Tensor, levels: Sequence[int]) -> Tensor:
    """Index of the equal-mass source cell of each row of ``z0`` (N, d), in the order of :func:`prior_codes`."""
    levels = check_levels(levels)
    V.tensor("z0", z0, shape=(None, len(levels)), dtype="float")
    u = torch.special.ndtr(z0.double())
    m = torch.tensor(levels, dtype=torch.float64)
    bins = (u * m).floor().long().clamp_(min=0)
    bins = torch.minimum(bins, (m - 1).long())
    idx = torch.zeros(len(z0), dtype=torch.long)
    for j, mj in enumerate(levels):
        idx = idx * mj + bins[:, j]
    return idx


# ----------------------------------------------------------------------------------------------------------------
# Flow matching and the ODE flow map
# ----------------------------------------------------------------------------------------------------------------
class VelocityField(nn.Module):
    """A small MLP ``v(z, t)``: the input is ``z`` and Fourier features of ``t``."""

    def __init__(self, d: int, hidden: int = 128, depth: int = 3, t_freqs: int = 6) -> None:
        super().__init__()
        d, hidden, depth = V.integer("d", d, min=1), V.integer("hidden", hidden, min=1), V.integer("depth", depth, min=1)
        t_freqs = V.integer("t_freqs", t_freqs, min=0)
        self.d = d
        self.register_buffer("freqs", math.pi * 2.0 ** torch.arange(t_freqs, dtype=torch.float32) / 2)
        layers: list[nn.Module] = []
        width = d + 2 * t_freqs + 1
        for _ in range(depth):
            layers += [nn.Linear(width, hidden), nn.SiLU()]
            width = hidden
        layers.append(nn.Linear(width, d))
        self.net = nn.Sequential(*layers)

    def forward(self, z: Tensor, t: Tensor | float) -> Tensor:
        if not isinstance(z, Tensor) or z.dim() != 2 or z.shape[1] != self.d:
            raise ValueError(f"z must be a tensor of shape (N, {self.d}), got {V.describe(z)}")
        if not isinstance(t, Tensor):
            t = V.number("t", t)
        t = torch.as_tensor(t, dtype=z.dtype, device=z.device)
        if t.dim() == 0:
            t = t.expand(z.shape[0])
        tf = t[:, None] * self.freqs
        return self.net(torch.cat([z, t[:, None], tf.sin(), tf.cos()], dim=-1))


def flow_matching_loss(v: nn.Module, z1: Tensor, generator: torch.Generator | None = None) -> Tensor:
    """Conditional flow matching, Gaussian source, linear path: ``|| v(z_t, t) - (z1 - z0) ||^2``.

    ``z1`` should be detached (stop-gradient latents); the loss trains only ``v``.
    """
    V.function("v", v)
    V.tensor("z1", z1, ndim=2, dtype="float", nonempty=True)
    V.optional(V.instance, "generator", generator, torch.Generator)
    z0 = torch.randn(z1.shape, generator=generator, dtype=z1.dtype)
    t = torch.rand(z1.shape[0], generator=generator, dtype=z1.dtype)
    zt = (1 - t[:, None]) * z0 + t[:, None] * z1
    return (v(zt, t) - (z1 - z0)).pow(2).sum(-1).mean()


def integrate(v: nn.Module, z: Tensor, t0: float = 0.0, t1: float = 1.0, steps: int = 32,
              method: str = "rk4") -> Tensor:
    """Solve ``dz/dt = v(z, t)`` from ``t0`` to ``t1`` (backwards if ``t1 < t0``) with fixed steps."""
    V.function("v", v)
    V.tensor("z", z, dtype="float")
    t0, t1 = V.number("t0", t0), V.number("t1", t1)
    if method not in ("rk4", "heun", "euler"):
        raise ValueError(f"method must be 'rk4', 'heun' or 'euler', got {method!r}")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be an int >= 1, got {steps!r}")
    h = (t1 - t0) / steps
    for i in range(steps):
        t = t0 + i * h
        if method == "euler":
            z = z + h * v(z, t)
        elif method == "heun":
            k1 = v(z, t)
            k2 = v(z + h * k1, t + h)
            z = z + h / 2 * (k1 + k2)
        else:
            k1 = v(z, t)
            k2 = v(z + h / 2 * k1, t + h / 2)
            k3 = v(z + h / 2 * k2, t + h / 2)
            k4 = v(z + h * k3, t + h)
            z = z + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return z


def flow_map(v: nn.Module, z0: Tensor, steps: int = 32, method: str = "rk4") -> Tensor:
    """``Psi(z0)``: source to latent space (t: 0 -> 1)."""
    V.tensor("z0", z0, dtype="float")
    return integrate(v, z0, 0.0, 1.0, steps, method)


def flow_inverse(v: nn.Module, z1: Tensor, steps: int = 32, method: str = "rk4") -> Tensor:
    """``Psi^{-1}(z1)``: latent to source space (t: 1 -> 0)."""
    V.tensor("z1", z1, dtype="float")
    return integrate(v, z1, 1.0, 0.0, steps, method)


# ----------------------------------------------------------------------------------------------------------------
# Voronoi centroids, Lloyd, nearest-code quantization
# ----------------------------------------------------------------------------------------------------------------
def nearest(z: Tensor, codes: Tensor, chunk: int = 8192) -> Tensor:
    """Index of the nearest code (Euclidean) for each row of ``z``; NaN/inf rows or codes raise ValueError."""
    V.tensor("z", z, ndim=2, dtype="float")
    V.tensor("codes", codes, ndim=2, dtype="float", nonempty=True)
    chunk = V.integer("chunk", chunk, min=1)
    if z.dim() != 2 or codes.dim() != 2 or z.shape[1] != codes.shape[1]:
        raise ValueError(f"z (N, d) and codes (K, d) must agree in d, got {tuple(z.shape)} and {tuple(codes.shape)}")
    c2 = codes.pow(2).sum(-1)
    out = [(c2 - 2 * zc @ codes.T).argmin(-1) for zc in z.split(chunk)]  # |z|^2 does not change the argmin
    return torch.cat(out) if out else torch.zeros(0, dtype=torch.long)


def distortion(z: Tensor, codes: Tensor) -> float:
    """Mean squared error (summed over dimensions) of nearest-code quantization."""
    V.tensor("z", z, ndim=2, dtype="float", nonempty=True)
    return (z - codes[nearest(z, codes)]).pow(2).sum(-1).mean().item()


def _cell_means(x: Tensor, idx: Tensor, K: int, fallback: Tensor) -> Tensor:
    sums = torch.zeros(K, x.shape[1], dtype=x.dtype).index_add_(0, idx, x)
    counts = torch.bincount(idx, minlength=K).to(x.dtype)
    return torch.where(counts[:, None] > 0, sums / counts.clamp(min=1)[:, None], fallback)


def lloyd(samples: Tensor, codes: Tensor, iters: int = 1) -> tuple[Tensor, list[float]]:
    """``iters`` Lloyd steps (assign to nearest, move to the mean; empty cells keep their code).

    Returns the new codes and the distortion before and after each step (``iters + 1`` values, non-increasing).
    """
    iters = V.integer("iters", iters, min=0)
    V.tensor("samples", samples, ndim=2, dtype="float", nonempty=True)
    mse = [distortion(samples, codes)]
    for _ in range(iters):
        codes = _cell_means(samples, nearest(samples, codes), len(codes), codes)
        mse.append(distortion(samples, codes))
    return codes, mse


@dataclass
class TransportedCodes:
    """The codebook and how it was made: prior codes, pushed prior codes, transported-cell centroids, Lloyd."""

    prior: Tensor  # C0, (K, d)
    pushed: Tensor  # Psi(C0)
    centroids: Tensor  # E[Psi(z0) | z0 in cell k], Monte Carlo
    codes: Tensor  # the codebook C1 (centroids after the Lloyd steps)
    mse: list[float]  # distortion on the model samples: centroids, then after each Lloyd step
    samples: Tensor  # the model samples Psi(z0)
    cells: Tensor  # their source cells


@torch.no_grad()
def transport_codes(v: nn.Module, levels: Sequence[int], n_samples: int, steps: int = 32, method: str = "rk4",
                    lloyd_steps: int = 0, generator: torch.Generator | None = None) -> TransportedCodes:
    """Build the codebook C1: transport the even-quantile cells of N(0, I) through the flow, take centroids."""
    V.function("v", v)
    levels = check_levels(levels)
    K, d = math.prod(levels), len(levels)
    n_samples = V.integer("n_samples", n_samples)
    steps, lloyd_steps = V.integer("steps", steps, min=1), V.integer("lloyd_steps", lloyd_steps, min=0)
    V.one_of("method", method, ("rk4", "heun", "euler"))
    V.optional(V.instance, "generator", generator, torch.Generator)
    if n_samples < K:
        raise ValueError(f"n_samples must be >= K={K}, got {n_samples}")
    c0 = prior_codes(levels)
    z0 = torch.randn(n_samples, d, generator=generator)
    cells = source_cells(z0, levels)
    z1 = flow_map(v, z0, steps, method)
    pushed = flow_map(v, c0, steps, method)
    centroids = _cell_means(z1, cells, K, pushed)
    codes, mse = lloyd(z1, centroids, lloyd_steps)
    return TransportedCodes(prior=c0, pushed=pushed, centroids=centroids, codes=codes, mse=mse, samples=z1,
                            cells=cells)


def quantize_ste(z: Tensor, codes: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Nearest-code quantization with a straight-through estimator.

    Returns ``(z + sg(c - z), idx, c)``: the forward value is the code, the gradient flows to ``z`` unchanged.
    """
    V.tensor("z", z, dtype="float")
    idx = nearest(z.detach(), codes)
    zq = codes[idx]
    return z + (zq - z).detach(), idx, zq


def usage(idx: Tensor | np.ndarray, K: int) -> dict[str, float]:
    """Codebook usage: fraction of codes used, perplexity ``exp(H)``, perplexity / K, the usage entropy ``H`` in
    bits (the code's rate) and ``H / log K`` (1 when every code is used equally often)."""
    K = V.integer("K", K, min=1)
    idx = torch.as_tensor(V.token_ids("idx", idx, K)).reshape(-1)
    if len(idx) == 0:
        raise ValueError("idx must not be empty")
    p = torch.bincount(idx, minlength=K).double() / len(idx)
    h = -(p[p > 0] * p[p > 0].log()).sum().item()
    return {"utilization": (p > 0).double().mean().item(), "perplexity": math.exp(h),
            "perplexity_ratio": math.exp(h) / K, "entropy_bits": h / math.log(2),
            "entropy_ratio": h / math.log(K) if K > 1 else 1.0}


def equal_mass_test(idx: Tensor, K: int) -> tuple[float, float]:
    """Chi-squared test of equal cell counts: returns (p-value, max count / min count)."""
    K = V.integer("K", K, min=1)
    idx = V.token_ids("idx", idx, K)
    if idx.size == 0 if isinstance(idx, np.ndarray) else idx.numel() == 0:
        raise ValueError("idx must not be empty")
    counts = torch.bincount(torch.as_tensor(idx).reshape(-1), minlength=K).numpy()
    p = float(stats.chisquare(counts).pvalue)
    return p, float(counts.max() / max(counts.min(), 1))


# ----------------------------------------------------------------------------------------------------------------
# Quantizers (same interface: forward(z) -> QuantOut)
# ----------------------------------------------------------------------------------------------------------------
class QuantOut(NamedTuple):
    z_q: Tensor  # straight-through quantized latents (forward value = code)
    idx: Tensor  # code index per row
    loss: Tensor  # the quantizer's own loss terms (commitment, codebook, flow matching)


class FlowQuantizer(nn.Module):
    """Flow-VQ: the codebook is the transported even-quantile partition, refreshed every ``refresh_every`` steps.

    Only the velocity field has parameters (trained by flow matching on stop-gradient latents); the codebook is a
    buffer. ``loss = beta * ||z - sg(z_q)||^2 + lam_fm * L_FM``.
    """

    def __init__(self, levels: Sequence[int], hidden: int = 128, depth: int = 3, refresh_every: int = 100,
                 n_samples: int | None = None, ode_steps: int = 16, lloyd_steps: int = 1, beta: float = 0.25,
                 lam_fm: float = 1.0, seed: int = 0) -> None:
        super().__init__()
        self.levels = check_levels(levels)
        self.K, self.d = math.prod(self.levels), len(self.levels)
        refresh_every = V.integer("refresh_every", refresh_every, min=1)
        ode_steps, lloyd_steps = V.integer("ode_steps", ode_steps, min=1), V.integer("lloyd_steps", lloyd_steps, min=0)
        V.optional(V.integer, "n_samples", n_samples, min=self.K)
        beta, lam_fm = V.nonnegative("beta", beta), V.nonnegative("lam_fm", lam_fm)
        seed = V.seed("seed", seed)
        self.refresh_every, self.ode_steps, self.lloyd_steps = refresh_every, ode_steps, lloyd_steps
        self.n_samples = n_samples or 32 * self.K
        self.beta, self.lam_fm = beta, lam_fm
        self.velocity = VelocityField(self.d, hidden, depth)
        self.gen = torch.Generator().manual_seed(seed)
        self.register_buffer("codes", prior_codes(self.levels))
        self.steps_done = 0

    @property
    def codebook(self) -> Tensor:
        return self.codes

    def refresh(self) -> TransportedCodes:
        """Recompute the codebook from the current flow."""
        out = transport_codes(self.velocity, self.levels, self.n_samples, self.ode_steps, "rk4", self.lloyd_steps,
                              self.gen)
        self.codes.copy_(out.codes)
        return out

    def forward(self, z: Tensor) -> QuantOut:
        if self.training:
            if self.steps_done > 0 and self.steps_done % self.refresh_every == 0:
                self.refresh()
            self.steps_done += 1
        z_ste, idx, zq = quantize_ste(z, self.codes)
        loss = self.beta * (z - zq).pow(2).sum(-1).mean()
        if self.training:
            loss = loss + self.lam_fm * flow_matching_loss(self.velocity, z.detach(), self.gen)
        return QuantOut(z_ste, idx, loss)

    @torch.no_grad()
    def source_assign(self, z: Tensor) -> Tensor:
        """The variant assignment: the source cell of ``Psi^{-1}(z)`` (exact equal mass under the flow model)."""
        return source_cells(flow_inverse(self.velocity, z, self.ode_steps), self.levels)


class VectorQuantizer(nn.Module):
    """VQ-VAE: a learned codebook, ``||sg(z) - e||^2 + beta ||z - sg(e)||^2``, straight-through."""

    def __init__(self, K: int, d: int, beta: float = 0.25, init_scale: float = 1.0) -> None:
        super().__init__()
        K, d = V.integer("K", K, min=1), V.integer("d", d, min=1)
        beta, init_scale = V.nonnegative("beta", beta), V.positive("init_scale", init_scale)
        self.K, self.d, self.beta = K, d, beta
        # the reference VQ-VAE initialisation: uniform in (-1/K, 1/K), scaled by init_scale
        self.embed = nn.Parameter((torch.rand(K, d) * 2 - 1) / K * init_scale)

    @property
    def codebook(self) -> Tensor:
        return self.embed.detach()

    def forward(self, z: Tensor) -> QuantOut:
        idx = nearest(z.detach(), self.embed.detach())
        e = self.embed[idx]
        loss = (z.detach() - e).pow(2).sum(-1).mean() + self.beta * (z - e.detach()).pow(2).sum(-1).mean()
        return QuantOut(z + (e - z).detach(), idx, loss)


class EMAVectorQuantizer(nn.Module):
    """VQ with an exponential-moving-average codebook and dead-code restarts (codes unused for ``patience``
    steps jump to random current latents)."""

    def __init__(self, K: int, d: int, beta: float = 0.25, decay: float = 0.99, patience: int = 50,
                 init_scale: float = 1.0, seed: int = 0) -> None:
        super().__init__()
        K, d = V.integer("K", K, min=1), V.integer("d", d, min=1)
        beta, init_scale = V.nonnegative("beta", beta), V.positive("init_scale", init_scale)
        decay = V.number("decay", decay, min=0, max=1, strict_max=True)
        patience, seed = V.integer("patience", patience, min=1), V.integer("seed", seed, min=0, max=2**32 - 2)
        self.K, self.d, self.beta, self.decay, self.patience = K, d, beta, decay, patience
        init = (torch.rand(K, d, generator=torch.Generator().manual_seed(seed)) * 2 - 1) / K * init_scale
        self.register_buffer("embed", init)
        self.register_buffer("ema_count", torch.ones(K))
        self.register_buffer("ema_sum", init.clone())
        self.register_buffer("idle", torch.zeros(K, dtype=torch.long))
        self.gen = torch.Generator().manual_seed(seed + 1)
        self.restarts = 0

    @property
    def codebook(self) -> Tensor:
        return self.embed

    @torch.no_grad()
    def init_kmeans(self, z: Tensor, seed: int = 0) -> None:
        """Start the codebook (and its EMA statistics) at the k-means centroids of the latents ``z`` (N >= K rows):
        the usual strong initialisation of a VQ-EMA codebook."""
        z = V.tensor("z", z, shape=(None, self.d), dtype="float", nonempty=True)
        c = kmeans_codes(z.detach(), self.K, seed, max_iter=50)
        self.embed.copy_(c)
        self.ema_sum.copy_(c)
        self.ema_count.fill_(1.0)
        self.idle.zero_()

    def forward(self, z: Tensor) -> QuantOut:
        idx = nearest(z.detach(), self.embed)
        if self.training:
            with torch.no_grad():
                onehot = F.one_hot(idx, self.K).to(z.dtype)
                n = onehot.sum(0)
                self.ema_count.mul_(self.decay).add_(n, alpha=1 - self.decay)
                self.ema_sum.mul_(self.decay).add_(onehot.T @ z.detach(), alpha=1 - self.decay)
                self.embed.copy_(self.ema_sum / self.ema_count.clamp(min=1e-5)[:, None])
                self.idle.add_(1).masked_fill_(n > 0, 0)
                dead = (self.idle >= self.patience).nonzero().reshape(-1)
                if len(dead):
                    pick = torch.randint(len(z), (len(dead),), generator=self.gen)
                    self.embed[dead] = z.detach()[pick]
                    self.ema_sum[dead] = z.detach()[pick]
                    self.ema_count[dead] = 1.0
                    self.idle[dead] = 0
                    self.restarts += len(dead)
        e = self.embed[idx]
        return QuantOut(z + (e - z).detach(), idx, self.beta * (z - e).pow(2).sum(-1).mean())


class FSQ(nn.Module):
    """Finite scalar quantization (Mentzer et al. 2023): bound each dimension with tanh, round to ``levels``."""

    def __init__(self, levels: Sequence[int], eps: float = 1e-3) -> None:
        super().__init__()
        eps = V.positive("eps", eps)  # eps = 0 puts an even level's offset at atanh(1) = inf
        self.levels = check_levels(levels)
        self.K, self.d = math.prod(self.levels), len(self.levels)
        L = torch.tensor(self.levels, dtype=torch.float32)
        self.register_buffer("half_l", (L - 1) * (1 + eps) / 2)
        self.register_buffer("offset", torch.where(L % 2 == 0, 0.5, 0.0))
        self.register_buffer("shift", torch.atanh(self.offset / self.half_l))
        self.register_buffer("half_w", (L // 2).float())
        self.register_buffer("L", L)

    def bound(self, z: Tensor) -> Tensor:
        return (z + self.shift).tanh() * self.half_l - self.offset

    def forward(self, z: Tensor) -> QuantOut:
        V.tensor("z", z, shape=(None, self.d), dtype="float")
        b = self.bound(z)
        q = b + (b.round() - b).detach()  # straight-through rounding
        digits = (b.round().detach() + self.half_w).long()  # 0 .. L-1 per dimension
        idx = torch.zeros(len(z), dtype=torch.long)
        for j, m in enumerate(self.levels):
            idx = idx * m + digits[:, j]
        return QuantOut(q / self.half_w, idx, z.new_zeros(()))

    @property
    def codebook(self) -> Tensor:
        """The K output values (row-major), each dimension ``(k - L // 2) / (L // 2)`` for ``k = 0 .. L-1``."""
        axes = [(torch.arange(m, dtype=torch.float32) - m // 2) / (m // 2) for m in self.levels]
        grid = torch.meshgrid(*axes, indexing="ij")
        return torch.stack([g.reshape(-1) for g in grid], dim=-1)


class GaussianGridQuantizer(nn.Module):
    """The plain Gaussian-quantile grid: the prior codes C0 as a fixed codebook (no flow), with commitment."""

    def __init__(self, levels: Sequence[int], beta: float = 0.25) -> None:
        super().__init__()
        beta = V.nonnegative("beta", beta)
        self.levels = check_levels(levels)
        self.K, self.d, self.beta = math.prod(self.levels), len(self.levels), beta
        self.register_buffer("codes", prior_codes(self.levels))

    @property
    def codebook(self) -> Tensor:
        return self.codes

    def forward(self, z: Tensor) -> QuantOut:
        z_ste, idx, zq = quantize_ste(z, self.codes)
        return QuantOut(z_ste, idx, self.beta * (z - zq).pow(2).sum(-1).mean())


def kmeans_codes(x: Tensor | np.ndarray, K: int, seed: int = 0, max_iter: int = 100) -> Tensor:
    """k-means centroids (scikit-learn, k-means++ init): the distortion reference."""
    from sklearn.cluster import KMeans

    x = V.array("x", x, ndim=2, dtype="float").astype(np.float64)
    K, seed = V.integer("K", K, min=1), V.seed("seed", seed)
    max_iter = V.integer("max_iter", max_iter, min=1)
    if len(x) < K:
        raise ValueError(f"x must have at least K={K} rows, got shape {x.shape}")
    km = KMeans(K, n_init=1, max_iter=max_iter, random_state=seed).fit(x)
    return torch.tensor(km.cluster_centers_, dtype=torch.float32)


# ----------------------------------------------------------------------------------------------------------------
# A small image tokenizer
# ----------------------------------------------------------------------------------------------------------------
class Tokenizer(nn.Module):
    """MLP autoencoder with ``n_tokens`` latent tokens of dimension ``d`` per image and a swappable quantizer."""

    def __init__(self, n_pixels: int, n_tokens: int, d: int, quantizer: nn.Module, hidden: int = 256) -> None:
        super().__init__()
        n_pixels, n_tokens = V.integer("n_pixels", n_pixels, min=1), V.integer("n_tokens", n_tokens, min=1)
        d, hidden = V.integer("d", d, min=1), V.integer("hidden", hidden, min=1)
        V.instance("quantizer", quantizer, nn.Module)
        self.n_tokens, self.d = n_tokens, d
        self.enc = nn.Sequential(nn.Linear(n_pixels, hidden), nn.GELU(), nn.Linear(hidden, hidden), nn.GELU(),
                                 nn.Linear(hidden, n_tokens * d))
        self.dec = nn.Sequential(nn.Linear(n_tokens * d, hidden), nn.GELU(), nn.Linear(hidden, hidden), nn.GELU(),
                                 nn.Linear(hidden, n_pixels))
        self.quantizer = quantizer

    def encode(self, x: Tensor) -> Tensor:
        """Latent tokens, shape (B * n_tokens, d)."""
        return self.enc(x).reshape(-1, self.d)

    def decode(self, zq: Tensor) -> Tensor:
        return self.dec(zq.reshape(-1, self.n_tokens * self.d))

    def forward(self, x: Tensor) -> tuple[Tensor, QuantOut]:
        out = self.quantizer(self.encode(x))
        return self.decode(out.z_q), out


# ----------------------------------------------------------------------------------------------------------------
# Data: 2-D latent distributions and Lorenz-63 states
# ----------------------------------------------------------------------------------------------------------------
TOY_DISTRIBUTIONS = ("rings", "moons", "checkerboard", "heavy_tails")


def toy_latents(name: str, n: int, seed: int = 0) -> Tensor:
    """``n`` standardized 2-D samples (zero mean, unit variance per dimension) of a named distribution:
    three concentric rings, two moons, a 4x4 checkerboard, or a Student-t with 3 degrees of freedom."""
    if name not in TOY_DISTRIBUTIONS:
        raise ValueError(f"name must be one of {TOY_DISTRIBUTIONS}, got {name!r}")
    n, seed = V.integer("n", n, min=2), V.seed("seed", seed)
    rng = np.random.default_rng(seed)
    if name == "rings":
        r = rng.choice([1.0, 2.0, 3.0], n)
        a = rng.uniform(0, 2 * np.pi, n)
        x = np.c_[r * np.cos(a), r * np.sin(a)] + 0.15 * rng.standard_normal((n, 2))
    elif name == "moons":
        a = rng.uniform(0, np.pi, n)
        upper = rng.random(n) < 0.5
        x = np.where(upper[:, None], np.c_[np.cos(a), np.sin(a)], np.c_[1 - np.cos(a), 0.5 - np.sin(a)])
        x = x + 0.06 * rng.standard_normal((n, 2))
    elif name == "checkerboard":
        u = rng.uniform(0, 1, (n, 2))
        cell = rng.integers(0, 8, n)  # 8 black cells of a 4x4 board
        row = cell // 2
        col = 2 * (cell % 2) + row % 2
        x = np.c_[col + u[:, 0], row + u[:, 1]] - 2.0
    else:
        x = rng.standard_t(3, (n, 2))
    x = (x - x.mean(0)) / x.std(0)
    return torch.tensor(x, dtype=torch.float32)


LORENZ_MAX_HORIZON = 1e5  # time units: a few minutes of DOP853 at rtol 1e-10


def lorenz_states(n: int, dt: float = 0.02, seed: int = 0, burn_in: float = 20.0) -> np.ndarray:
    """``n`` states (x, y, z) of the Lorenz-63 system (sigma=10, rho=28, beta=8/3) every ``dt`` time units,
    integrated with scipy (DOP853, rtol 1e-10) from a seeded start after a burn-in."""
    from scipy.integrate import solve_ivp

    n, seed = V.integer("n", n, min=1), V.seed("seed", seed)
    dt, burn_in = V.positive("dt", dt), V.nonnegative("burn_in", burn_in)
    # the integrator resolves the attractor's time scale (~0.01 per step), ~500 time units a second: a horizon
    # beyond LORENZ_MAX_HORIZON (or an infinite one, dt=1e308) would run for minutes, hours or forever
    horizon = burn_in + dt * (n - 1)
    if not horizon <= LORENZ_MAX_HORIZON:
        raise ValueError(f"burn_in + dt * (n - 1) must be <= {LORENZ_MAX_HORIZON:g} time units (dt={dt:g}, n={n}, "
                         f"burn_in={burn_in:g}): the integration could not resolve that horizon in reasonable time")

    def f(_t: float, s: np.ndarray) -> list[float]:
        x, y, z = s
        return [10.0 * (y - x), x * (28.0 - z) - y, x * y - 8.0 / 3.0 * z]

    s0 = np.random.default_rng(seed).normal(size=3) + np.array([1.0, 1.0, 20.0])
    t = burn_in + dt * np.arange(n)
    sol = solve_ivp(f, (0.0, t[-1]), s0, t_eval=t, method="DOP853", rtol=1e-10, atol=1e-10)
    return sol.y.T.copy()


# ----------------------------------------------------------------------------------------------------------------
# References and measures: exact equal-mass cells, flow fit, rate at matched entropy
# ----------------------------------------------------------------------------------------------------------------
class RankCells:
    """The exact equal-mass partition of a sample (the Knothe-Rosenblatt rearrangement, cut at quantiles).

    Dimension 0 is cut into ``levels[0]`` slabs of equal count, each slab's points are cut along dimension 1 into
    ``levels[1]`` equal-count pieces, and so on. This is what the product cells of N(0, I) become under the exact
    triangular transport onto the sample's distribution, in the order of :func:`prior_codes`; it is the oracle
    equal-mass quantizer that a perfectly fitted flow would give (any exact transport gives cells of mass 1/K).
    """

    def __init__(self, ref: Tensor | np.ndarray, levels: Sequence[int]) -> None:
        self.levels = check_levels(levels)
        ref = V.array("ref", ref, ndim=2, dtype="float").astype(np.float64)
        if ref.shape[1] != len(self.levels):
            raise ValueError(f"ref must have {len(self.levels)} columns (one per level), got shape {ref.shape}")
        K = math.prod(self.levels)
        if len(ref) < K:
            raise ValueError(f"ref must have at least K={K} rows, got {len(ref)}")
        self.K, self.d = K, len(self.levels)
        self.tree = self._build(ref, 0)

    def _build(self, x: np.ndarray, j: int) -> tuple:
        m = self.levels[j]
        edges = np.quantile(x[:, j], np.arange(1, m) / m) if len(x) else np.zeros(m - 1)
        if j == self.d - 1:
            return (edges, None)
        slab = np.searchsorted(edges, x[:, j], side="right")
        return (edges, [self._build(x[slab == i], j + 1) for i in range(m)])

    def _assign(self, x: np.ndarray, node: tuple, j: int) -> np.ndarray:
        edges, children = node
        slab = np.searchsorted(edges, x[:, j], side="right")
        if children is None:
            return slab
        rest = math.prod(self.levels[j + 1:])
        out = np.zeros(len(x), dtype=np.int64)
        for i, child in enumerate(children):
            sel = slab == i
            if sel.any():
                out[sel] = i * rest + self._assign(x[sel], child, j + 1)
        return out

    def assign(self, x: Tensor | np.ndarray) -> Tensor:
        """The cell index of each row of ``x`` (N, d)."""
        x = V.array("x", x, shape=(None, self.d), dtype="float").astype(np.float64)
        return torch.as_tensor(self._assign(x, self.tree, 0), dtype=torch.long)


def mmd_rbf(x: Tensor, y: Tensor, scales: Sequence[float] = (0.1, 0.3, 1.0)) -> float:
    """Squared maximum mean discrepancy between samples ``x`` and ``y`` (biased V-statistic), with a Gaussian
    kernel summed over the bandwidths ``scales``. 0 for identical samples; a flow-fit metric when ``x`` are the
    flow's samples and ``y`` the data."""
    V.tensor("x", x, ndim=2, dtype="float", nonempty=True)
    V.tensor("y", y, ndim=2, dtype="float", nonempty=True)
    if x.shape[1] != y.shape[1]:
        raise ValueError(f"x and y must have the same number of columns, got {tuple(x.shape)} and {tuple(y.shape)}")
    scales = V.sequence("scales", scales, min_len=1, of=V.positive)
    x, y = x.double(), y.double()

    def k(a: Tensor, b: Tensor) -> Tensor:
        d2 = torch.cdist(a, b).pow(2)
        return sum(torch.exp(-d2 / (2 * s * s)) for s in scales).mean()

    return float(k(x, x) + k(y, y) - 2 * k(x, y))


def distortion_at_entropy(entropies: Sequence[float], distortions: Sequence[float], h: float) -> float:
    """The distortion a family of quantizers reaches at entropy ``h``, interpolated linearly in ``log D``.

    High-rate theory makes ``log D`` linear in the entropy (``D ~ 2^(-2H/d)``), so the interpolation is linear in
    ``log D`` against ``H``; outside the measured range the nearest segment is extended. Needs >= 2 points.
    """
    e = V.array("entropies", entropies, ndim=1, dtype="float").astype(np.float64)
    dist = V.array("distortions", distortions, ndim=1, dtype="float", min=0, strict_min=True).astype(np.float64)
    h = V.number("h", h)
    if len(e) != len(dist) or len(e) < 2:
        raise ValueError(f"entropies and distortions must have the same length >= 2, got {len(e)} and {len(dist)}")
    order = np.argsort(e)
    e, ld = e[order], np.log(dist[order])
    if np.any(np.diff(e) <= 0):
        raise ValueError("entropies must be distinct")
    i = int(np.clip(np.searchsorted(e, h) - 1, 0, len(e) - 2))
    slope = (ld[i + 1] - ld[i]) / (e[i + 1] - e[i])
    return float(np.exp(ld[i] + slope * (h - e[i])))


def distortion_at_rate(rates: Sequence[float], distortions: Sequence[float], r: float, slack: float = 0.0) -> float:
    """The distortion a rate-distortion curve reaches at rate ``r``: linear in ``log D`` between the two measured
    points around ``r`` (points sorted by rate). Up to ``slack`` beyond the measured rates the nearest segment is
    extended; further out the answer is NaN (no long extrapolation). Needs >= 2 points with distinct rates."""
    e = V.array("rates", rates, ndim=1, dtype="float").astype(np.float64)
    dist = V.array("distortions", distortions, ndim=1, dtype="float", min=0, strict_min=True).astype(np.float64)
    r, slack = V.number("r", r), V.nonnegative("slack", slack)
    if len(e) != len(dist) or len(e) < 2:
        raise ValueError(f"rates and distortions must have the same length >= 2, got {len(e)} and {len(dist)}")
    if not np.all(np.isfinite(e)):
        raise ValueError("rates must be finite")
    order = np.argsort(e)
    e, ld = e[order], np.log(dist[order])
    if np.any(np.diff(e) <= 0):
        raise ValueError(f"rates must be distinct, got {sorted(e.tolist())}")
    if r < e[0] - slack or r > e[-1] + slack:
        return math.nan
    i = int(np.clip(np.searchsorted(e, r) - 1, 0, len(e) - 2))
    slope = (ld[i + 1] - ld[i]) / (e[i + 1] - e[i])
    return float(np.exp(ld[i] + slope * (r - e[i])))


def matched_rate_ratios(curves: dict[str, tuple[Sequence[float], Sequence[float]]], method: str,
                        baselines: Sequence[str], slack: float = 0.0) -> list[dict]:
    """Compare ``method`` with the best of ``baselines`` at matched rate.

    ``curves[m] = (rates, distortions)``, one point per codebook size. At each of ``method``'s own points the
    baselines' distortions are read off their curves at the same rate (:func:`distortion_at_rate`; a baseline whose
    measured rates, widened by ``slack``, do not cover that rate is left out there). Returns one dict per point of ``method``: ``rate``,
    ``mse`` (the method's), ``best`` (name of the best covering baseline, or None), ``best_mse`` and ``ratio``
    (``mse / best_mse``; NaN where no baseline covers the rate)."""
    V.instance("curves", curves, dict)
    V.instance("method", method, str)
    baselines = V.sequence("baselines", baselines, min_len=1, of=lambda n, x: V.instance(n, x, str))
    for m in [method, *baselines]:
        if m not in curves:
            raise ValueError(f"curves must hold a curve for {m!r}, got {sorted(curves)}")
    rates, mses = (np.asarray(a, dtype=np.float64) for a in curves[method])
    if rates.shape != mses.shape or rates.ndim != 1 or len(rates) == 0:
        raise ValueError(f"curves[{method!r}] must be two 1-d sequences of the same non-zero length")
    out = []
    for r, d in zip(rates.tolist(), mses.tolist()):
        at = {b: distortion_at_rate(*curves[b], r, slack) for b in baselines}
        cover = {b: v for b, v in at.items() if math.isfinite(v)}
        best = min(cover, key=cover.get) if cover else None
        best_mse = cover[best] if best else math.nan
        out.append(dict(rate=r, mse=d, best=best, best_mse=best_mse, ratio=d / best_mse if best else math.nan))
    return out


# ----------------------------------------------------------------------------------------------------------------
# Downstream: an autoregressive prior over tokens, and index topology
# ----------------------------------------------------------------------------------------------------------------
class TokenPrior(nn.Module):
    """A tiny autoregressive prior ``p(t_1) p(t_2 | t_1) ... p(t_n | t_<n)`` over the ``n_tokens`` tokens of an
    image. Position ``i`` sees the embeddings of the tokens before it (later ones are masked to zero) and a learned
    position vector; an MLP turns that into logits over the ``K`` codes, added to a learned per-position table of
    logits (the per-position code frequencies, which the MLP alone learns slowly from few images)."""

    def __init__(self, K: int, n_tokens: int, dim: int = 16, hidden: int = 64) -> None:
        super().__init__()
        K, n_tokens = V.integer("K", K, min=2), V.integer("n_tokens", n_tokens, min=1)
        dim, hidden = V.integer("dim", dim, min=1), V.integer("hidden", hidden, min=1)
        self.K, self.n = K, n_tokens
        self.emb = nn.Embedding(K, dim)
        self.inp = nn.Linear(n_tokens * dim, hidden)
        self.pos = nn.Parameter(torch.zeros(n_tokens, hidden))
        self.out = nn.Sequential(nn.GELU(), nn.Linear(hidden, hidden), nn.GELU(), nn.Linear(hidden, K))
        self.unigram = nn.Parameter(torch.zeros(n_tokens, K))  # per-position code frequencies (log scale)
        self.register_buffer("mask", torch.tril(torch.ones(n_tokens, n_tokens), -1))  # i sees j < i

    def forward(self, tokens: Tensor) -> Tensor:
        """Logits (B, n_tokens, K) for tokens (B, n_tokens)."""
        tokens = V.tensor("tokens", tokens, shape=(None, self.n))
        V.token_ids("tokens", tokens, self.K)
        e = self.emb(tokens)  # B, n, dim
        ctx = (self.mask[None, :, :, None] * e[:, None, :, :]).flatten(2)  # B, n, n * dim
        return self.unigram + self.out(self.inp(ctx) + self.pos)


def prior_bits(prior: TokenPrior, tokens: Tensor) -> Tensor:
    """Code length of each token sequence under the prior, in bits (B,)."""
    V.instance("prior", prior, TokenPrior)
    logits = prior(tokens)
    nll = F.cross_entropy(logits.reshape(-1, prior.K), tokens.reshape(-1), reduction="none")
    return nll.reshape(tokens.shape).sum(-1) / math.log(2)


def fit_prior(train_tokens: Tensor, val_tokens: Tensor, K: int, steps: int = 200, seed: int = 0, lr: float = 1e-2,
              weight_decay: float = 1e-2, eval_every: int = 10, dim: int = 16, hidden: int = 64
              ) -> tuple[TokenPrior, float]:
    """Fit a :class:`TokenPrior` on full batches of ``train_tokens`` (B, n) with AdamW, starting from the per-position
    code frequencies of ``train_tokens`` (add-1/2 smoothing; the context MLP starts at zero); keep the weights with
    the lowest mean bits on ``val_tokens`` (early stopping). Returns ``(prior, best validation bits per sequence)``."""
    train_tokens = V.tensor("train_tokens", train_tokens, ndim=2, nonempty=True)
    val_tokens = V.tensor("val_tokens", val_tokens, ndim=2, nonempty=True)
    K, steps, seed = V.integer("K", K, min=2), V.integer("steps", steps, min=1), V.seed("seed", seed)
    lr, weight_decay = V.positive("lr", lr), V.nonnegative("weight_decay", weight_decay)
    eval_every = V.integer("eval_every", eval_every, min=1)
    if val_tokens.shape[1] != train_tokens.shape[1]:
        raise ValueError(f"train_tokens and val_tokens must have the same length, got {tuple(train_tokens.shape)} "
                         f"and {tuple(val_tokens.shape)}")
    torch.manual_seed(seed)
    prior = TokenPrior(K, train_tokens.shape[1], dim, hidden)
    V.token_ids("train_tokens", train_tokens, K)
    with torch.no_grad():  # start from the per-position frequencies (add-1/2), the MLP adds the context
        counts = torch.stack([torch.bincount(col, minlength=K) for col in train_tokens.T]).float() + 0.5
        prior.unigram.copy_((counts / counts.sum(1, keepdim=True)).log())
        prior.out[-1].weight.zero_()
        prior.out[-1].bias.zero_()
    opt = torch.optim.AdamW(prior.parameters(), lr=lr, weight_decay=weight_decay)
    best, best_state = math.inf, None
    for step in range(steps + 1):
        if step % eval_every == 0 or step == steps:
            with torch.no_grad():
                v = prior_bits(prior.eval(), val_tokens).mean().item()
            if v < best:
                best, best_state = v, {k: t.clone() for k, t in prior.state_dict().items()}
            prior.train()
        if step == steps:
            break
        loss = prior_bits(prior, train_tokens).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    prior.load_state_dict(best_state)
    return prior.eval().requires_grad_(False), best


def grid_neighbour(idx: Tensor, levels: Sequence[int], generator: torch.Generator | None = None) -> Tensor:
    """A random neighbour of each index on the product grid of :func:`prior_codes` (row-major): one coordinate,
    chosen at random, moves one level up or down (down when it is already at the top, up at the bottom)."""
    levels = check_levels(levels)
    K = math.prod(levels)
    idx = torch.as_tensor(V.token_ids("idx", idx, K)).reshape(-1).long()
    V.optional(V.instance, "generator", generator, torch.Generator)
    radix = torch.tensor([math.prod(levels[j + 1:]) for j in range(len(levels))])
    digits = (idx[:, None] // radix) % torch.tensor(levels)
    dim = torch.randint(len(levels), (len(idx),), generator=generator)
    step = torch.randint(2, (len(idx),), generator=generator) * 2 - 1
    cur = digits.gather(1, dim[:, None]).squeeze(1)
    top = torch.tensor(levels)[dim] - 1
    step = torch.where(cur + step > top, -1, torch.where(cur + step < 0, 1, step))
    return idx + step * radix[dim]


@torch.no_grad()
def topology_ratio(decoder: nn.Module, tokens: Tensor, codebook: Tensor, levels: Sequence[int],
                   generator: torch.Generator | None = None) -> dict[str, float]:
    """Index-topology preservation of a tokenizer: in each image (row of ``tokens``, (B, n)) one token, at a
    random position, is replaced by a grid neighbour of its index (:func:`grid_neighbour`), or by a uniformly
    random other code; the decoded images are compared with the unchanged decoding. Returns the mean squared
    change of each (``neighbour``, ``random``) and their ratio: well below 1 when neighbouring indices decode to
    neighbouring images, about 1 when the indices carry no geometry. ``decoder`` maps (B, n * d) to images."""
    V.instance("decoder", decoder, nn.Module)
    levels = check_levels(levels)
    K = math.prod(levels)
    tokens = V.tensor("tokens", tokens, ndim=2, nonempty=True)
    V.token_ids("tokens", tokens, K)
    codebook = V.tensor("codebook", codebook, shape=(K, None), dtype="float")
    V.optional(V.instance, "generator", generator, torch.Generator)
    B, n = tokens.shape
    rows = torch.arange(B)
    pos = torch.randint(n, (B,), generator=generator)
    near, rand = tokens.clone(), tokens.clone()
    near[rows, pos] = grid_neighbour(tokens[rows, pos], levels, generator)
    rand[rows, pos] = (tokens[rows, pos] + torch.randint(1, K, (B,), generator=generator)) % K

    def dec(t: Tensor) -> Tensor:
        return decoder(codebook[t].reshape(B, -1))

    base = dec(tokens)
    a = (dec(near) - base).pow(2).mean().item()
    b = (dec(rand) - base).pow(2).mean().item()
    return {"neighbour": a, "random": b, "ratio": a / b if b > 0 else math.nan}


# ----------------------------------------------------------------------------------------------------------------
# Training (used live in quick mode and by data/08_flow_vq/make_models.py)
# ----------------------------------------------------------------------------------------------------------------
# ----------------------------------------------------------------------------------------------------------------
# The 2-D study: every quantizer on the same fixed latents, and the flow's own fit
# ----------------------------------------------------------------------------------------------------------------
METHODS_2D = ("k-means", "VQ-EMA", "FSQ", "Gaussian grid", "Oracle (centroids)", "Oracle + Lloyd",
              "Flow (centroids)", "Flow + Lloyd")


def cell_means(x: Tensor, idx: Tensor, K: int) -> Tensor:
    """The mean of the points of ``x`` in each of the ``K`` cells ``idx`` (0 for an empty cell)."""
    x = V.tensor("x", x, ndim=2, dtype="float", nonempty=True)
    K = V.integer("K", K, min=1)
    idx = torch.as_tensor(V.token_ids("idx", idx, K)).reshape(-1)
    if len(idx) != len(x):
        raise ValueError(f"idx must hold one cell per row of x ({len(x)}), got {len(idx)}")
    sums = torch.zeros(K, x.shape[1], dtype=x.dtype).index_add_(0, idx, x)
    return sums / torch.bincount(idx, minlength=K).clamp(min=1)[:, None]


def train_online_vq(x: Tensor, K: int, seed: int, steps: int, batch: int = 512, init: Tensor | None = None
                    ) -> Tensor:
    """A VQ-EMA codebook (dead-code restarts) fitted online to fixed latents ``x`` on minibatches of ``batch``,
    from the reference random start or from the codes ``init`` (K, d), e.g. the k-means centroids of ``x``."""
    x = V.tensor("x", x, ndim=2, dtype="float", nonempty=True)
    K, seed, steps = V.integer("K", K, min=1), V.seed("seed", seed), V.integer("steps", steps, min=1)
    V.optional(V.tensor, "init", init, shape=(K, x.shape[1]), dtype="float")
    g = torch.Generator().manual_seed(seed)
    q = EMAVectorQuantizer(K, x.shape[1], seed=seed).train()
    if init is not None:
        with torch.no_grad():
            q.embed.copy_(init)
            q.ema_sum.copy_(init)
    for _ in range(steps):
        q(x[torch.randint(len(x), (batch,), generator=g)])
    return q.eval().codebook.clone()


def quantizers_2d(x: Tensor, ref: Tensor, flow: nn.Module, K: int, seed: int, vq_steps: int,
                  ode_steps: int = 16, lloyd_steps: int = 3) -> tuple[dict, dict, TransportedCodes]:
    """Every method of :data:`METHODS_2D` at codebook size ``K`` on the fixed latents ``x``.

    ``ref`` is an independent sample of the same distribution, on which the oracle equal-mass quantizer (the exact
    Knothe–Rosenblatt transport, :class:`RankCells`) is built; ``flow`` is the trained velocity field whose
    transported cells give the Flow-VQ codes. FSQ gets its best decoder, the cell means. Returns ``(metrics,
    codes, transported)``: per method the distortion (``mse``) and :func:`usage`, per method ``(codes, idx)``,
    and the :class:`TransportedCodes` of the flow (its samples and Lloyd trace).
    """
    x = V.tensor("x", x, ndim=2, dtype="float", nonempty=True)
    ref = V.tensor("ref", ref, ndim=2, dtype="float", nonempty=True)
    V.instance("flow", flow, nn.Module)
    K = V.integer("K", K, min=1)
    lv = split_levels(K, x.shape[1])
    tc = transport_codes(flow, lv, 32 * K, ode_steps, lloyd_steps=lloyd_steps,
                         generator=torch.Generator().manual_seed(seed))
    oracle = cell_means(ref, RankCells(ref, lv).assign(ref), K)
    books = {"k-means": kmeans_codes(x, K, seed), "VQ-EMA": train_online_vq(x, K, seed, vq_steps),
             "Gaussian grid": prior_codes(lv), "Oracle (centroids)": oracle,
             "Oracle + Lloyd": lloyd(ref, oracle, lloyd_steps)[0], "Flow (centroids)": tc.centroids,
             "Flow + Lloyd": tc.codes}
    metrics, codes = {}, {}
    for m in METHODS_2D:
        if m == "FSQ":
            idx = FSQ(lv)(x).idx
            c = cell_means(x, idx, K)
        else:
            c = books[m]
            idx = nearest(x, c)
        metrics[m] = dict(mse=(x - c[idx]).pow(2).sum(-1).mean().item(), **usage(idx, K))
        codes[m] = (c, idx)
    return metrics, codes, tc


def flow_fit(flow: nn.Module, x: Tensor, ref: Tensor, samples: Tensor, K: int, n: int = 2000,
             ode_steps: int = 16) -> dict[str, float]:
    """How well a flow fits latents ``x``: squared MMD of its ``samples`` to the data beside the noise floor (MMD
    of an independent sample ``ref`` to the data), their ratio, and equal mass on the data: the entropy ratio of the
    source cells the data fall into through the inverse flow, next to the same cells with no flow."""
    V.instance("flow", flow, nn.Module)
    x = V.tensor("x", x, ndim=2, dtype="float", nonempty=True)
    K, n = V.integer("K", K, min=1), V.integer("n", n, min=2)
    lv = split_levels(K, x.shape[1])
    with torch.no_grad():
        back = flow_inverse(flow, x[:5 * n], ode_steps)
    mmd_flow, mmd_floor = mmd_rbf(samples[:n], x[:n]), mmd_rbf(ref[:n], x[:n])
    return dict(mmd_flow=mmd_flow, mmd_floor=mmd_floor, mmd_ratio=mmd_flow / max(mmd_floor, 1e-12),
                equal_mass_flow=usage(source_cells(back, lv), K)["entropy_ratio"],
                equal_mass_no_flow=usage(source_cells(x[:5 * n], lv), K)["entropy_ratio"])


def uniform_grid(x: Tensor, levels: Sequence[int]) -> Tensor:
    """The product grid of cell midpoints of ``levels[j]`` equal-width bins over the range of ``x[:, j]``, in the
    order of :func:`prior_codes` (a uniform per-dimension quantizer fitted to the data's range)."""
    levels = check_levels(levels)
    x = V.tensor("x", x, shape=(None, len(levels)), dtype="float", nonempty=True)
    lo, hi = x.min(0).values, x.max(0).values
    axes = [lo[j] + (torch.arange(m) + 0.5) * (hi[j] - lo[j]) / m for j, m in enumerate(levels)]
    grid = torch.meshgrid(*axes, indexing="ij")
    return torch.stack([g.reshape(-1) for g in grid], dim=-1)


LORENZ_METHODS = ("k-means", "VQ-EMA", "FSQ", "Flow + Lloyd", "Gaussian grid", "uniform grid")


def fixed_data_codebooks(x: Tensor, flow: nn.Module, K: int, seed: int, vq_steps: int, ode_steps: int = 16,
                         lloyd_steps: int = 2, samples_per_code: int = 8) -> dict[str, Tensor]:
    """Codebooks of size ``K`` fitted to fixed data ``x`` (N, d) by every method of :data:`LORENZ_METHODS`:
    k-means; VQ-EMA run online for ``vq_steps`` from the k-means codes; FSQ with its cell means as codes; the
    flow's transported cells (``samples_per_code * K`` samples) plus ``lloyd_steps`` Lloyd steps; the Gaussian
    grid; a uniform grid over the data's range."""
    x = V.tensor("x", x, ndim=2, dtype="float", nonempty=True)
    V.instance("flow", flow, nn.Module)
    K, seed, vq_steps = V.integer("K", K, min=2), V.seed("seed", seed), V.integer("vq_steps", vq_steps, min=1)
    samples_per_code = V.integer("samples_per_code", samples_per_code, min=1)
    lv = split_levels(K, x.shape[1])
    tc = transport_codes(flow, lv, samples_per_code * K, ode_steps, lloyd_steps=lloyd_steps,
                         generator=torch.Generator().manual_seed(seed))
    km = kmeans_codes(x, K, seed, max_iter=50)
    return {"k-means": km, "VQ-EMA": train_online_vq(x, K, seed, vq_steps, init=km),
            "FSQ": cell_means(x, FSQ(lv)(x).idx, K), "Flow + Lloyd": tc.codes, "Gaussian grid": prior_codes(lv),
            "uniform grid": uniform_grid(x, lv)}


TOK_METHODS = ("VQ-VAE", "VQ-EMA", "FSQ", "Gaussian grid", "Flow-VQ")


def checkpoint_config(name: str = "models") -> dict:
    """The configuration of a checkpoint of the chapter (what its default parameters ask for): ``models`` (the
    flows and the K = 256 tokenizers) or ``rate`` (the tokenizers' rate sweep over the other codebook sizes)."""
    V.one_of("name", name, ("models", "rate"))
    tok = dict(tok_steps=2000, tok_batch=128, tok_lr=2e-3, tok_hidden=128, refresh_every=100, n_tokens=4, d_tok=4,
               n_train=1437, split_seed=0, methods=list(TOK_METHODS), ema_kmeans_init=True)
    if name == "rate":
        return dict(seeds=[0, 1, 2], rate_K=[16, 64, 1024], prior_steps=200, **tok)
    # the rings flows get 40,000 steps: at 20,000 two of three seeds stayed above twice the MMD² floor (flow_fit)
    return dict(seeds=[0, 1, 2], toy=list(TOY_DISTRIBUTIONS), n_toy=20_000, flow_steps=20_000,
                flow_steps_by_set={"rings": 40_000}, flow_batch=1024, flow_hidden=128, flow_lr=2e-3,
                n_lorenz=15_000, gauss_steps=2000, gauss_hidden=64, tok_K=256, **tok)


@torch.no_grad()
def evaluate_tokenizer(model: Tokenizer, X_tr: Tensor, X_te: Tensor, X_all: Tensor, prior_steps: int = 200,
                       seed: int = 0) -> dict[str, float]:
    """Rate and distortion of a trained tokenizer: test MSE per pixel (``recon_mse``), :func:`usage` of the codes
    of all images ``X_all``, and ``bits_per_image``: the mean code length of the test images' tokens under a
    :class:`TokenPrior` fitted (:func:`fit_prior`, ``prior_steps``, ``seed``) on the first 80% of the training
    images' tokens and stopped early on the rest."""
    V.instance("model", model, Tokenizer)
    for n, x in (("X_tr", X_tr), ("X_te", X_te), ("X_all", X_all)):
        V.tensor(n, x, ndim=2, dtype="float", nonempty=True)
    prior_steps, seed = V.integer("prior_steps", prior_steps, min=1), V.seed("seed", seed)
    K, n = model.quantizer.K, model.n_tokens
    if len(X_tr) < 5:
        raise ValueError(f"X_tr must hold at least 5 images (80% to fit the prior, 20% to stop it), got {len(X_tr)}")
    model.eval()
    recon, out_te = model(X_te)
    r = dict(recon_mse=(recon - X_te).pow(2).mean().item(), **usage(model(X_all)[1].idx, K))
    t_tr, t_te = model(X_tr)[1].idx.reshape(-1, n), out_te.idx.reshape(-1, n)
    n_fit = int(0.8 * len(t_tr))
    with torch.enable_grad():
        prior, _ = fit_prior(t_tr[:n_fit], t_tr[n_fit:], K, prior_steps, seed)
    r["bits_per_image"] = prior_bits(prior, t_te).mean().item()
    return r


def train_flow(x: Tensor, steps: int, seed: int = 0, hidden: int = 128, batch: int = 512, lr: float = 2e-3,
               progress: bool = True, desc: str = "flow") -> tuple[VelocityField, list[float]]:
    """Flow matching on a fixed latent set ``x`` (N, d): the same loss Flow-VQ uses inside a tokenizer. Returns
    the frozen velocity field and its smoothed loss curve."""
    from helpers import train

    x = V.tensor("x", x, ndim=2, dtype="float", nonempty=True)
    steps, seed = V.integer("steps", steps, min=1), V.seed("seed", seed)
    batch = V.integer("batch", batch, min=1)
    torch.manual_seed(seed)
    v = VelocityField(x.shape[1], hidden)
    g = torch.Generator().manual_seed(seed)
    hist = train.fit(v, lambda m, z1: flow_matching_loss(m, z1, g),
                     lambda step: x[torch.randint(len(x), (batch,), generator=g)], steps, lr=lr,
                     warmup=min(100, steps // 10), seed=seed, progress=progress, desc=desc)
    return v.requires_grad_(False), hist.smoothed(50)


def make_quantizer(method: str, K: int, d: int, seed: int = 0, refresh_every: int = 100) -> nn.Module:
    """A fresh quantizer of one of :data:`TOK_METHODS` with ``K`` codes of dimension ``d``."""
    V.one_of("method", method, TOK_METHODS)
    lv = split_levels(K, d)
    if method == "VQ-VAE":
        return VectorQuantizer(K, d)
    if method == "VQ-EMA":
        return EMAVectorQuantizer(K, d, seed=seed)
    if method == "FSQ":
        return FSQ(lv)
    if method == "Gaussian grid":
        return GaussianGridQuantizer(lv)
    return FlowQuantizer(lv, hidden=64, refresh_every=refresh_every, seed=seed)


def train_tokenizer(method: str, X: Tensor, K: int, steps: int, seed: int = 0, n_tokens: int = 4, d: int = 4,
                    refresh_every: int = 100, batch: int = 128, lr: float = 2e-3, hidden: int = 128,
                    progress: bool = True, ema_kmeans_init: bool = True) -> tuple[Tokenizer, list[float]]:
    """Train a :class:`Tokenizer` with quantizer ``method`` on images ``X`` (N, pixels); loss
    ``||x - D(z_q)||^2 + quantizer loss``. With ``ema_kmeans_init`` the VQ-EMA codebook starts at the k-means
    centroids of the untrained encoder's latents of ``X`` (needs ``len(X) * n_tokens >= K``). Returns the model
    (eval mode) and its loss curve."""
    from helpers import train

    X = V.tensor("X", X, ndim=2, dtype="float", nonempty=True)
    steps, seed = V.integer("steps", steps, min=1), V.seed("seed", seed)
    V.boolean("ema_kmeans_init", ema_kmeans_init)
    torch.manual_seed(seed)
    model = Tokenizer(X.shape[1], n_tokens, d, make_quantizer(method, K, d, seed, refresh_every), hidden)
    if method == "VQ-EMA" and ema_kmeans_init:
        if len(X) * n_tokens < K:
            raise ValueError(f"k-means init needs len(X) * n_tokens >= K={K}, got {len(X)} * {n_tokens}")
        with torch.no_grad():
            model.quantizer.init_kmeans(model.encode(X), seed)
    g = torch.Generator().manual_seed(seed)

    def loss(m: Tokenizer, b: Tensor) -> Tensor:
        recon, out = m(b)
        return (recon - b).pow(2).sum(-1).mean() + out.loss

    hist = train.fit(model, loss, lambda step: X[torch.randint(len(X), (batch,), generator=g)], steps, lr=lr,
                     warmup=max(1, steps // 20), seed=seed, progress=progress, desc=f"{method} K={K} seed {seed}")
    return model.eval(), hist.smoothed(50)
