"""Tree Rotary Positional Encoding (TPE) and Offset-based Positional Training (OPT), as reconstructed for the chapter
``04_tree_rope`` (the paper's full text is not public; see the chapter for what is reconstructed).

* :func:`digits` -- a position ``p < B**L`` as its L base-B digits ``c_l(p) = floor(p / B**l) mod B``.
* :class:`TreeRotaryEmbedding` -- the rotary pairs are split into L groups; group l is rotated by digit ``c_l(p)``
  with its own small base. Each score is a sum of per-level terms that depend only on the bounded digit
  differences. ``L=1`` with base 10000 is exactly RoPE (``helpers.nn.RotaryEmbedding``).
* :func:`opt_position_ids` -- OPT: per-chunk offsets that are multiples of B (the lowest digit stays contiguous,
  the higher digits jump), bounded by a target length. :func:`skip_position_ids` is the control with arbitrary
  integer offsets (PoSE-style skips for RoPE).
* :func:`digit_difference_codes` / :func:`coverage` -- which digit-difference tuples a set of windows contains.
* :func:`stdlib_corpus` -- bytes of the CPython standard library's source, split by file (offline, real text).
"""

from __future__ import annotations

import sysconfig
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from helpers import nn as hnn

__all__ = [
    "digits", "from_digits", "TreeRotaryEmbedding", "split_pairs", "rotation_matrix", "opt_position_ids",
    "skip_position_ids", "digit_difference_codes", "coverage", "stdlib_corpus",
]


def _check_radix(B: int, L: int) -> None:
    if isinstance(B, bool) or not isinstance(B, (int, np.integer)) or B < 2:
        raise ValueError(f"radix B must be an int >= 2, got {B!r}")
    if isinstance(L, bool) or not isinstance(L, (int, np.integer)) or L < 1:
        raise ValueError(f"number of levels L must be an int >= 1, got {L!r}")


def digits(p: Tensor | np.ndarray | int, B: int, L: int) -> Tensor:
    """Digits ``(..., L)`` of positions ``p`` in radix B, lowest first. Raises if any p is outside [0, B**L)."""
    _check_radix(B, L)
    p = torch.as_tensor(p)
    if p.is_floating_point():
        raise TypeError(f"positions must be integers, got {p.dtype}")
    if p.numel() and (int(p.min()) < 0 or int(p.max()) >= B**L):
        raise ValueError(f"positions must lie in [0, B**L) = [0, {B**L}), got [{int(p.min())}, {int(p.max())}]")
    scale = torch.tensor([B**lv for lv in range(L)], dtype=torch.int64)
    return (p.to(torch.int64)[..., None] // scale) % B


def from_digits(c: Tensor, B: int) -> Tensor:
    """Inverse of :func:`digits`."""
    _check_radix(B, c.shape[-1])
    scale = torch.tensor([B**lv for lv in range(c.shape[-1])], dtype=torch.int64)
    return (c.to(torch.int64) * scale).sum(-1)


def split_pairs(n_pairs: int, L: int) -> list[int]:
    """How many rotary pairs each level drives: as equal as possible, the lowest level gets the extra ones."""
    if n_pairs < L:
        raise ValueError(f"need at least one rotary pair per level: {n_pairs} pairs < L={L}")
    base, extra = divmod(n_pairs, L)
    return [base + (1 if lv < extra else 0) for lv in range(L)]


class TreeRotaryEmbedding(hnn.RotaryEmbedding):
    """TPE: rotary pair j of level l rotates by ``c_l(p) * b_l ** (-j / |G_l|)``.

    ``bases`` are the per-level bases (default ``2*B`` for every level, small because a digit only spans [0, B)).
    With ``L=1``, ``bases=(10000,)`` and ``B`` larger than every position, this is exactly RoPE.
    """

    def __init__(self, head_dim: int, B: int, L: int, bases: Sequence[float] | None = None,
                 groups: Sequence[int] | None = None) -> None:
        super().__init__(head_dim)
        _check_radix(B, L)
        n_pairs = head_dim // 2
        groups = list(groups) if groups is not None else split_pairs(n_pairs, L)
        if len(groups) != L or sum(groups) != n_pairs or min(groups) < 1:
            raise ValueError(f"groups must be L={L} positive sizes summing to {n_pairs}, got {groups}")
        bases = list(bases) if bases is not None else [2.0 * B] * L
        if len(bases) != L or min(bases) <= 1:
            raise ValueError(f"bases must be L={L} numbers > 1, got {bases}")
        self.B, self.L, self.groups, self.bases = int(B), int(L), groups, bases
        level = torch.cat([torch.full((g,), lv, dtype=torch.int64) for lv, g in enumerate(groups)])
        theta = torch.cat([torch.tensor(float(b), dtype=torch.float64) ** (-torch.arange(g, dtype=torch.float64) / g)
                           for b, g in zip(bases, groups)])
        self.register_buffer("level", level, persistent=False)
        self.register_buffer("theta", theta.float(), persistent=False)

    def angles(self, pos: Tensor) -> Tensor:
        c = digits(pos, self.B, self.L)  # (..., T, L)
        return c[..., self.level].to(torch.float32) * self.theta  # each pair reads its level's digit


def rotation_matrix(rotary: hnn.RotaryEmbedding, p: int) -> Tensor:
    """The (head_dim, head_dim) orthogonal matrix R(p) that ``rotary`` applies at position ``p``."""
    eye = torch.eye(rotary.head_dim)[None, None]  # rows are basis vectors, as (B=1, H=1, T=D, D)
    ang = rotary.angles(torch.tensor([p]))  # (1, D/2)
    return hnn.apply_rotary(eye, ang.expand(rotary.head_dim, -1)[None, None])[0, 0].T


def _check_lengths(n: int, target: int, n_chunks: int) -> None:
    if n < 1 or n_chunks < 1 or n_chunks > n:
        raise ValueError(f"need 1 <= n_chunks <= n, got n={n}, n_chunks={n_chunks}")
    if target < n:
        raise ValueError(f"target length {target} is shorter than the window {n}")


def _chunked(n: int, offsets: np.ndarray) -> np.ndarray:
    """Positions i + offset of i's chunk (chunks of near-equal size), one row per offsets row."""
    m = offsets.shape[-1]
    chunk = np.minimum(np.arange(n) * m // n, m - 1)
    return np.arange(n) + offsets[..., chunk]


def opt_position_ids(rng: np.random.Generator, batch: int, n: int, B: int, target: int,
                     n_chunks: int = 4) -> np.ndarray:
    """OPT position ids ``(batch, n)``: chunk r of the window is shifted by a non-decreasing random offset ``O_r``
    that is a multiple of B, with the largest id below ``target``. ``p mod B == i mod B`` (the lowest digit is
    contiguous) while the higher digits see jumps of any size up to the target."""
    _check_radix(B, 1)
    _check_lengths(n, target, n_chunks)
    budget = (target - n) // B  # the largest offset, in units of B
    off = np.sort(rng.integers(0, budget + 1, size=(batch, n_chunks)), axis=1) * B
    return _chunked(n, off)


def skip_position_ids(rng: np.random.Generator, batch: int, n: int, target: int, n_chunks: int = 4) -> np.ndarray:
    """The control: the same chunked skips with arbitrary integer offsets (PoSE-style), below ``target``."""
    _check_lengths(n, target, n_chunks)
    off = np.sort(rng.integers(0, target - n + 1, size=(batch, n_chunks)), axis=1)
    return _chunked(n, off)


def digit_difference_codes(pos: np.ndarray, B: int, L: int) -> np.ndarray:
    """Integer codes of the digit-difference tuples ``c(p_n) - c(p_m)`` of all causal pairs m <= n in each row of
    ``pos`` (rows are windows); ``B**L`` must exceed every position (``L=1, B > max`` codes the plain distance)."""
    pos = np.atleast_2d(np.asarray(pos, dtype=np.int64))
    c = digits(torch.as_tensor(pos), B, L).numpy()  # (W, T, L)
    n_idx, m_idx = np.tril_indices(pos.shape[1])  # rows n >= columns m
    d = c[:, n_idx] - c[:, m_idx] + (B - 1)  # in [0, 2B-1)
    return (d * (2 * B - 1) ** np.arange(L)).sum(-1).ravel()


def coverage(train_pos: np.ndarray, test_pos: np.ndarray, B: int, L: int) -> float:
    """Fraction of the distinct digit-difference tuples of the test windows that occur in the training windows."""
    tr = np.unique(digit_difference_codes(train_pos, B, L))
    te = np.unique(digit_difference_codes(test_pos, B, L))
    return float(np.isin(te, tr).mean())


def stdlib_corpus(train_bytes: int = 2_000_000, test_bytes: int = 200_000, every: int = 10,
                  root: str | Path | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Bytes (uint8) of the standard library's ``*.py`` files: every ``every``-th file (sorted by path) is held
    out. Tests and the site-packages tree are skipped. Deterministic for a given Python installation."""
    if train_bytes < 1 or test_bytes < 1 or every < 2:
        raise ValueError("train_bytes, test_bytes must be >= 1 and every >= 2")
    root = Path(root or sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in root.rglob("*.py")
                   if not any(part in ("test", "tests", "site-packages", "idle_test") for part in p.parts))
    if not files:
        raise FileNotFoundError(f"no .py files under {root}")
    train, test, nt, ne = [], [], 0, 0
    for i, f in enumerate(files):
        held = i % every == every - 1
        if (held and ne >= test_bytes) or (not held and nt >= train_bytes):
            if nt >= train_bytes and ne >= test_bytes:
                break
            continue
        b = np.frombuffer(f.read_bytes(), dtype=np.uint8)
        (test if held else train).append(b)
        if held:
            ne += len(b)
        else:
            nt += len(b)
    return np.concatenate(train)[:train_bytes], np.concatenate(test)[:test_bytes]
