"""Small transformer building blocks shared by the chapters (in the spirit of nanoGPT's ``model.py``).

* Attention takes an **arbitrary boolean mask** (``True`` = may attend): causal, tree-shaped, block-diagonal, …
* The positional encoding is a **swappable part**: ``"none"``, ``"learned"``, ``"sinusoidal"`` (added to the token
  embeddings) or ``"rope"`` (rotary, applied to queries and keys). Position ids are passed explicitly, so a chapter
  can feed depth-based or offset positions; a chapter can also pass its own :class:`RotaryEmbedding` subclass.
* ``forward(..., record=True)`` also returns every block's residual stream, attention weights and per-head outputs,
  which the interpretability chapters read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from helpers import validate as V

__all__ = [
    "TransformerConfig", "RotaryEmbedding", "apply_rotary", "sinusoidal_table", "causal_mask",
    "Attention", "MLP", "Block", "Transformer",
]

POS_KINDS = ("none", "learned", "sinusoidal", "rope")


def causal_mask(T: int, device: torch.device | str | None = None) -> Tensor:
    """Lower-triangular boolean mask of shape (T, T): position i may attend to j <= i."""
    T = V.integer("T", T, min=1)
    return torch.ones(T, T, dtype=torch.bool, device=device).tril()


def sinusoidal_table(pos: Tensor, d_model: int, base: float = 10000.0) -> Tensor:
    """The sinusoidal encoding of Vaswani et al. for (possibly non-contiguous) positions ``pos`` (..., T)."""
    V.tensor("pos", pos, dtype="numeric")
    d_model = V.integer("d_model", d_model, min=2)
    if d_model % 2:
        raise ValueError(f"d_model must be even for sinusoidal encoding, got {d_model}")
    base = V.number("base", base, min=1, strict_min=True)
    inv = base ** (-torch.arange(0, d_model, 2, dtype=torch.float32, device=pos.device) / d_model)
    ang = pos.to(torch.float32)[..., None] * inv
    out = torch.stack([ang.sin(), ang.cos()], dim=-1)
    return out.flatten(-2)


class RotaryEmbedding(nn.Module):
    """Rotary position embedding (RoPE): pair i of a head rotates by ``pos * base**(-2i/d)``.

    Subclasses override :meth:`angles` to map position ids to per-pair angles differently (e.g. a tree or
    mixed-radix positional scheme) and reuse :func:`apply_rotary`.
    """

    def __init__(self, head_dim: int, base: float = 10000.0) -> None:
        super().__init__()
        head_dim = V.integer("head_dim", head_dim, min=2)
        if head_dim % 2:
            raise ValueError(f"head_dim must be even for rotary embedding, got {head_dim}")
        base = V.number("base", base, min=1, strict_min=True)
        self.head_dim = head_dim
        self.base = base
        inv_freq = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
        self.register_buffer("inv_freq", inv_freq.float(), persistent=False)

    def angles(self, pos: Tensor) -> Tensor:
        """Angles of shape (..., T, head_dim/2) for position ids ``pos`` of shape (..., T)."""
        return pos.to(torch.float32)[..., None] * self.inv_freq

    def forward(self, q: Tensor, k: Tensor, pos: Tensor) -> tuple[Tensor, Tensor]:
        ang = self.angles(pos)
        if ang.dim() == 2:  # (T, D/2): shared by the batch
            ang = ang[None]
        ang = ang[:, None]  # (B, 1, T, D/2): shared by the heads
        return apply_rotary(q, ang), apply_rotary(k, ang)


def apply_rotary(x: Tensor, angles: Tensor) -> Tensor:
    """Rotate consecutive halves ``(x[..., :D/2], x[..., D/2:])`` of ``x`` (..., T, D) by ``angles`` (..., T, D/2)."""
    V.tensor("x", x, dtype="float", finite=False)
    V.tensor("angles", angles, dtype="float", finite=False)
    d2 = x.shape[-1] // 2
    if angles.shape[-1] != d2:
        raise ValueError(f"angles last dim must be {d2}, got {angles.shape[-1]}")
    x1, x2 = x[..., :d2], x[..., d2:]
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


@dataclass
class TransformerConfig:
    vocab_size: int
    n_layer: int = 2
    n_head: int = 4
    d_model: int = 64
    max_len: int = 256
    pos: str = "rope"
    rope_base: float = 10000.0
    d_ff: int | None = None
    dropout: float = 0.0
    bias: bool = True
    tie_weights: bool = True

    def __post_init__(self) -> None:
        for name in ("vocab_size", "n_layer", "n_head", "d_model", "max_len"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        if self.d_model % self.n_head:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by n_head ({self.n_head})")
        V.one_of("pos", self.pos, POS_KINDS)
        self.rope_base = V.number("rope_base", self.rope_base, min=1, strict_min=True)
        self.dropout = V.number("dropout", self.dropout, min=0, max=1, strict_max=True)
        V.boolean("bias", self.bias)
        V.boolean("tie_weights", self.tie_weights)
        if self.d_ff is None:
            self.d_ff = 4 * self.d_model
        self.d_ff = V.integer("d_ff", self.d_ff, min=1)

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_head


class Attention(nn.Module):
    """Multi-head self-attention with an arbitrary mask and optional rotary positions.

    ``mask`` is boolean (``True`` = may attend) or a float additive bias on the attention logits (``-inf`` where a
    query may not attend), broadcastable to (B, H, T, T); graph encoders pass structural biases this way.
    """

    def __init__(self, d_model: int, n_head: int, bias: bool = True, dropout: float = 0.0) -> None:
        super().__init__()
        d_model, n_head = V.integer("d_model", d_model, min=1), V.integer("n_head", n_head, min=1)
        dropout = V.number("dropout", dropout, min=0, max=1, strict_max=True)
        if d_model % n_head:
            raise ValueError(f"d_model ({d_model}) must be divisible by n_head ({n_head})")
        self.n_head, self.head_dim = n_head, d_model // n_head
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.proj = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = dropout

    def forward(
        self, x: Tensor, mask: Tensor, rotary: RotaryEmbedding | None = None, pos: Tensor | None = None,
        record: dict | None = None,
    ) -> Tensor:
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=-1)
        q, k, v = (t.view(B, T, self.n_head, self.head_dim).transpose(1, 2) for t in (q, k, v))  # (B, H, T, Dh)
        if rotary is not None:
            q, k = rotary(q, k, pos)
        if record is None:
            y = F.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, dropout_p=self.dropout if self.training else 0.0
            )
        else:
            att = (q @ k.transpose(-2, -1)) / math.sqrt(self.head_dim)
            att = att.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else att + mask
            att = att.softmax(dim=-1)
            y = att @ v
            record.setdefault("attn", []).append(att.detach())
            record.setdefault("heads", []).append(y.detach())  # (B, H, T, Dh): each head's output before proj
        y = y.transpose(1, 2).reshape(B, T, C)
        return self.proj(y)


class MLP(nn.Module):
    def __init__(self, d_model: int, d_ff: int, bias: bool = True, dropout: float = 0.0) -> None:
        super().__init__()
        d_model, d_ff = V.integer("d_model", d_model, min=1), V.integer("d_ff", d_ff, min=1)
        dropout = V.number("dropout", dropout, min=0, max=1, strict_max=True)
        self.fc = nn.Linear(d_model, d_ff, bias=bias)
        self.out = nn.Linear(d_ff, d_model, bias=bias)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.drop(self.out(F.gelu(self.fc(x))))


class Block(nn.Module):
    """Pre-norm transformer block: ``x + attn(ln(x))`` then ``x + mlp(ln(x))``."""

    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        V.instance("cfg", cfg, TransformerConfig)
        self.ln1 = nn.LayerNorm(cfg.d_model, bias=cfg.bias)
        self.attn = Attention(cfg.d_model, cfg.n_head, cfg.bias, cfg.dropout)
        self.ln2 = nn.LayerNorm(cfg.d_model, bias=cfg.bias)
        self.mlp = MLP(cfg.d_model, cfg.d_ff, cfg.bias, cfg.dropout)

    def forward(self, x: Tensor, mask: Tensor, rotary=None, pos=None, record: dict | None = None) -> Tensor:
        x = x + self.attn(self.ln1(x), mask, rotary, pos, record)
        return x + self.mlp(self.ln2(x))


class Transformer(nn.Module):
    """A decoder-only language model: token embedding, positional part, ``n_layer`` blocks, final norm, head.

    ``forward(idx, mask=None, pos=None)``: ``idx`` (B, T) token ids; ``mask`` boolean, (T, T), (B, T, T) or
    (B, 1, T, T), ``True`` where a query may attend to a key (default: causal); ``pos`` (T,) or (B, T) position ids
    (default ``0..T-1``). Returns logits (B, T, vocab), and with ``record=True`` also a dict with ``hidden``
    (the residual stream after the embedding and after each block), ``attn`` and ``heads`` per block.
    """

    def __init__(self, cfg: TransformerConfig, rotary: RotaryEmbedding | None = None) -> None:
        super().__init__()
        V.instance("cfg", cfg, TransformerConfig)
        V.optional(V.instance, "rotary", rotary, RotaryEmbedding)
        self.cfg = cfg
        self.tok = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos_emb = nn.Embedding(cfg.max_len, cfg.d_model) if cfg.pos == "learned" else None
        if cfg.pos == "rope":
            self.rotary = rotary if rotary is not None else RotaryEmbedding(cfg.head_dim, cfg.rope_base)
        elif rotary is not None:
            raise ValueError("a rotary module was given but cfg.pos is not 'rope'")
        else:
            self.rotary = None
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList([Block(cfg) for _ in range(cfg.n_layer)])
        self.ln_f = nn.LayerNorm(cfg.d_model, bias=cfg.bias)
        self.head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        if cfg.tie_weights:
            self.head.weight = self.tok.weight
        self.apply(self._init)

    @staticmethod
    def _init(m: nn.Module) -> None:
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, std=0.02)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, std=0.02)

    def n_params(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def _prepare(self, idx: Tensor, mask: Tensor | None, pos: Tensor | None) -> tuple[Tensor, Tensor]:
        V.instance("idx", idx, Tensor)
        if idx.dim() != 2 or idx.dtype not in (torch.int64, torch.int32):
            raise ValueError(f"idx must be an integer tensor of shape (B, T), got {tuple(idx.shape)} {idx.dtype}")
        B, T = idx.shape
        if T < 1:
            raise ValueError(f"idx must have at least one position (T >= 1), got shape {tuple(idx.shape)}")
        if B and not (0 <= int(idx.min()) and int(idx.max()) < self.cfg.vocab_size):
            raise ValueError(f"idx must hold token ids in [0, vocab_size={self.cfg.vocab_size}), "
                             f"got values in [{int(idx.min())}, {int(idx.max())}]")
        if pos is None:
            pos = torch.arange(T, device=idx.device)
        V.tensor("pos", pos, dtype="numeric")
        if pos.shape[-1] != T or pos.dim() not in (1, 2):
            raise ValueError(f"pos must have shape (T,) or (B, T) with T={T}, got {tuple(pos.shape)}")
        if self.cfg.pos in ("learned",) and (pos.min() < 0 or pos.max() >= self.cfg.max_len):
            raise ValueError(f"learned positions must lie in [0, {self.cfg.max_len}), got [{pos.min()}, {pos.max()}]")
        if mask is None:
            mask = causal_mask(T, idx.device)
        V.instance("mask", mask, Tensor)
        if mask.dtype != torch.bool:
            raise TypeError(f"mask must be boolean (True = may attend), got {mask.dtype}")
        if mask.shape[-2:] != (T, T):
            raise ValueError(f"mask must end in ({T}, {T}), got {tuple(mask.shape)}")
        if mask.dim() == 3:
            mask = mask[:, None]
        if not bool(mask.any(-1).all()):
            raise ValueError("every query must be allowed to attend to at least one key (a mask row is all False)")
        return mask, pos

    def forward(
        self, idx: Tensor, mask: Tensor | None = None, pos: Tensor | None = None, record: bool = False
    ) -> Tensor | tuple[Tensor, dict]:
        mask, pos = self._prepare(idx, mask, pos)
        x = self.tok(idx)
        if self.cfg.pos == "learned":
            x = x + self.pos_emb(pos)
        elif self.cfg.pos == "sinusoidal":
            x = x + sinusoidal_table(pos, self.cfg.d_model)
        x = self.drop(x)
        rec: dict | None = {"hidden": [x.detach()]} if record else None
        for blk in self.blocks:
            x = blk(x, mask, self.rotary, pos, rec)
            if rec is not None:
                rec["hidden"].append(x.detach())
        logits = self.head(self.ln_f(x))
        return (logits, rec) if record else logits

    @torch.no_grad()
    def generate(self, idx: Tensor, n_new: int, greedy: bool = True, temperature: float = 1.0,
                 generator: torch.Generator | None = None) -> Tensor:
        """Append ``n_new`` tokens (causal mask, default positions)."""
        V.tensor("idx", idx, ndim=2, dtype="int")
        n_new = V.integer("n_new", n_new, min=0)
        V.boolean("greedy", greedy)
        temperature = V.positive("temperature", temperature)
        for _ in range(n_new):
            logits = self(idx[:, -self.cfg.max_len:])[:, -1]
            if greedy:
                nxt = logits.argmax(-1, keepdim=True)
            else:
                probs = (logits / temperature).softmax(-1)
                nxt = torch.multinomial(probs, 1, generator=generator)
            idx = torch.cat([idx, nxt], dim=1)
        return idx
