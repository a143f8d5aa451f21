"""Tree Training: one pass over a tree of rollouts, exactly equal to training on every branch separately.

The pieces, in the order the chapter ``02_tree_training`` shows them:

* :class:`TrajectoryTree` -- nodes with token segments, a parent, a loss mask and an optional per-branch
  coefficient (an advantage) on leaves; validated (cycles, empty segments, bad parents).
* :func:`serialize` -- DFS pre-order serialization: every token once, with its node, its **depth position**
  (siblings reuse positions), the **label map** ``pred(t)`` (a node's first token is predicted from its parent's
  last token) and the subtree ``horizon`` that gives the O(N) tree mask ``j <= i < horizon[j]``.
* :func:`token_weights` -- ``w_t = (1/K) sum_{k: t in P_k} c_k`` so that the tree loss equals the branch average.
* :class:`TreeLM` -- a small decoder with RoPE whose layers are attention or a selective SSM with a causal
  depthwise conv (hybrid); it runs linearized branches (causal) or a serialized tree (tree mask, SSM state routed
  from the parent's end state, conv context taken along the ancestor path), and accepts a *gateway* (ancestor
  K/V, SSM state, conv context) so a subtree can be run on its own.
* :func:`partition_tree` / :func:`partitioned_backward` -- Redundancy-Free Tree Partitioning: connected subtrees
  under a token budget, processed depth-first with detached gateway leaves whose gradients are relayed back and
  accumulated in fp32; tokens processed == N_tree and only one chain of partitions is alive at a time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from helpers import nn as hnn

__all__ = [
    "Node", "TrajectoryTree", "Serialized", "serialize", "tree_mask_dense", "tree_mask_horizon",
    "token_weights", "path_token_index", "random_tree", "random_tree_by_parents", "split_long_nodes",
    "TreeLMConfig", "TreeLM", "Gateway", "NodeBlocks", "node_blocks", "tree_logits", "tree_logprobs", "path_logprobs", "tree_loss", "branch_avg_loss",
    "Partition", "partition_tree", "partition_tokens", "naive_partition_tokens", "partitioned_backward",
    "saved_bytes",
]


# ----------------------------------------------------------------------------------------------------------------
# The trajectory tree
# ----------------------------------------------------------------------------------------------------------------
@dataclass
class Node:
    """One node: a token segment, its parent's index (``None`` for the root), a loss mask over the segment
    (default all True) and, on leaves only, a per-branch coefficient ``coef`` (e.g. an advantage; default 1)."""

    tokens: list[int]
    parent: int | None
    loss_mask: list[bool] | None = None
    coef: float | None = None


class TrajectoryTree:
    """A validated tree of token segments. ``nodes[i].parent`` indexes into ``nodes``; exactly one root.

    Children keep the order of their indices. The K root-to-leaf paths are the branches (samples).
    """

    def __init__(self, nodes: Sequence[Node]) -> None:
        if not isinstance(nodes, Sequence) or not nodes:
            raise TypeError("nodes must be a non-empty sequence of Node")
        n = len(nodes)
        roots = []
        for i, nd in enumerate(nodes):
            if not isinstance(nd, Node):
                raise TypeError(f"node {i}: expected a Node, got {type(nd).__name__}")
            if len(nd.tokens) == 0:
                raise ValueError(f"node {i}: empty token segment")
            if any((not isinstance(t, (int, np.integer))) or isinstance(t, bool) or t < 0 for t in nd.tokens):
                raise ValueError(f"node {i}: tokens must be non-negative ints")
            if nd.loss_mask is not None and len(nd.loss_mask) != len(nd.tokens):
                raise ValueError(f"node {i}: loss_mask has {len(nd.loss_mask)} entries for {len(nd.tokens)} tokens")
            if nd.parent is None:
                roots.append(i)
            elif not isinstance(nd.parent, (int, np.integer)) or not 0 <= nd.parent < n or nd.parent == i:
                raise ValueError(f"node {i}: bad parent {nd.parent!r} (expected an index in [0, {n}) other than {i})")
        if len(roots) != 1:
            raise ValueError(f"expected exactly one root (parent None), got {len(roots)}: {roots}")
        self.nodes = list(nodes)
        self.root = roots[0]
        self.children: list[list[int]] = [[] for _ in range(n)]
        for i, nd in enumerate(nodes):
            if nd.parent is not None:
                self.children[int(nd.parent)].append(i)
        # every node must reach the root (else it sits on a cycle)
        for i in range(n):
            seen, j = set(), i
            while j != self.root:
                if j in seen:
                    raise ValueError(f"node {i}: parent chain has a cycle through node {j}")
                seen.add(j)
                j = int(self.nodes[j].parent)
        for i, nd in enumerate(nodes):
            if nd.coef is not None and self.children[i]:
                raise ValueError(f"node {i}: coef is a per-branch coefficient and belongs on leaves only")

    # -- structure -------------------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.nodes)

    def dfs_order(self) -> list[int]:
        """Pre-order DFS, children in index order."""
        out, stack = [], [self.root]
        while stack:
            i = stack.pop()
            out.append(i)
            stack.extend(reversed(self.children[i]))
        return out

    def leaves(self) -> list[int]:
        """Leaves in DFS order (branch k is the path to ``leaves()[k]``)."""
        return [i for i in self.dfs_order() if not self.children[i]]

    def ancestors(self, i: int, include_self: bool = True) -> list[int]:
        """Root-first list of ancestors of node ``i``."""
        out = [i] if include_self else []
        j = self.nodes[i].parent
        while j is not None:
            out.append(int(j))
            j = self.nodes[j].parent
        return out[::-1]

    def paths(self) -> list[list[int]]:
        """The K root-to-leaf node paths, in DFS leaf order."""
        return [self.ancestors(leaf) for leaf in self.leaves()]

    def n_leaves_below(self) -> list[int]:
        """g_n: how many branches pass through each node."""
        g = [0] * len(self)
        for leaf in self.leaves():
            for a in self.ancestors(leaf):
                g[a] += 1
        return g

    @property
    def n_tree(self) -> int:
        return sum(len(nd.tokens) for nd in self.nodes)

    @property
    def n_flat(self) -> int:
        g = self.n_leaves_below()
        return sum(gi * len(nd.tokens) for gi, nd in zip(g, self.nodes))

    @property
    def overlap_ratio(self) -> float:
        """Potential overlap ratio POR = 1 - N_tree / N_flat."""
        return 1.0 - self.n_tree / self.n_flat

    @property
    def ideal_speedup(self) -> float:
        """N_flat / N_tree: the physical limit of a method that computes each token once."""
        return self.n_flat / self.n_tree

    def path_tokens(self) -> list[list[int]]:
        return [[t for n in p for t in self.nodes[n].tokens] for p in self.paths()]


def random_tree(rng: np.random.Generator, root_len: int, branching: Sequence[int], seg_len: tuple[int, int],
                vocab: int) -> TrajectoryTree:
    """A layered tree: a root prompt of ``root_len`` tokens, then ``branching[d]`` children per node at level d,
    each with a segment of ``seg_len[0]..seg_len[1]`` tokens. The root prompt is masked out of the loss."""
    if root_len < 1 or seg_len[0] < 1 or seg_len[1] < seg_len[0] or vocab < 2:
        raise ValueError(f"bad sizes: root_len={root_len}, seg_len={seg_len}, vocab={vocab}")
    if any(b < 1 for b in branching):
        raise ValueError(f"branching factors must be >= 1, got {list(branching)}")
    nodes = [Node(rng.integers(0, vocab, root_len).tolist(), None, [False] * root_len)]
    level = [0]
    for b in branching:
        nxt = []
        for p in level:
            for _ in range(b):
                L = int(rng.integers(seg_len[0], seg_len[1] + 1))
                nodes.append(Node(rng.integers(0, vocab, L).tolist(), p))
                nxt.append(len(nodes) - 1)
        level = nxt
    return TrajectoryTree(nodes)


def random_tree_by_parents(rng: np.random.Generator, n_nodes: int, max_seg: int, vocab: int,
                           mask_prob: float = 0.0, coefs: bool = False) -> TrajectoryTree:
    """An arbitrary-shape tree: node i's parent is uniform in [0, i). For property tests."""
    if n_nodes < 1 or max_seg < 1:
        raise ValueError(f"n_nodes and max_seg must be >= 1, got {n_nodes}, {max_seg}")
    nodes = []
    for i in range(n_nodes):
        L = int(rng.integers(1, max_seg + 1))
        mask = (rng.random(L) >= mask_prob).tolist()
        nodes.append(Node(rng.integers(0, vocab, L).tolist(), None if i == 0 else int(rng.integers(0, i)), mask))
    tree = TrajectoryTree(nodes)
    if coefs:
        for leaf in tree.leaves():
            tree.nodes[leaf].coef = float(rng.normal())
    return tree


def split_long_nodes(tree: TrajectoryTree, max_len: int) -> TrajectoryTree:
    """Split every node longer than ``max_len`` into a parent->child chain (same branches, same tokens)."""
    if max_len < 1:
        raise ValueError(f"max_len must be >= 1, got {max_len}")
    new: list[Node] = []
    last_of: dict[int, int] = {}
    for i in tree.dfs_order():
        nd = tree.nodes[i]
        mask = nd.loss_mask if nd.loss_mask is not None else [True] * len(nd.tokens)
        parent = None if nd.parent is None else last_of[int(nd.parent)]
        for s in range(0, len(nd.tokens), max_len):
            e = min(s + max_len, len(nd.tokens))
            new.append(Node(list(nd.tokens[s:e]), parent, list(mask[s:e]), nd.coef if e == len(nd.tokens) else None))
            parent = len(new) - 1
        last_of[i] = parent
    return TrajectoryTree(new)


# ----------------------------------------------------------------------------------------------------------------
# DFS serialization, mask, positions, labels, weights
# ----------------------------------------------------------------------------------------------------------------
@dataclass
class Serialized:
    """A tree laid out in DFS pre-order. All arrays have length N_tree (numpy int64 / bool)."""

    tokens: np.ndarray      # token ids
    node: np.ndarray        # node id of each token
    pos: np.ndarray         # depth position: tokens on the ancestor path before it
    pred: np.ndarray        # index of the position whose logits predict this token (-1 for the very first)
    horizon: np.ndarray     # end (exclusive) of the DFS interval of the subtree of node(t)
    loss_mask: np.ndarray   # the node's loss mask (False where no label exists)
    order: list[int]        # nodes in DFS order
    start: dict[int, int]   # node -> first index
    end: dict[int, int]     # node -> end index (exclusive)

    def __len__(self) -> int:
        return len(self.tokens)


def serialize(tree: TrajectoryTree) -> Serialized:
    """DFS serialization with depth positions, the ``pred`` label map and the subtree horizon."""
    if not isinstance(tree, TrajectoryTree):
        raise TypeError(f"expected a TrajectoryTree, got {type(tree).__name__}")
    order = tree.dfs_order()
    start, end, depth = {}, {}, {}
    i = 0
    for n in order:
        start[n] = i
        i += len(tree.nodes[n].tokens)
        end[n] = i
        p = tree.nodes[n].parent
        depth[n] = 0 if p is None else depth[int(p)] + len(tree.nodes[int(p)].tokens)
    sub_end = dict(end)  # end of the DFS interval of each subtree: max over descendants
    for n in reversed(order):
        p = tree.nodes[n].parent
        if p is not None:
            sub_end[int(p)] = max(sub_end[int(p)], sub_end[n])
    N = i
    tokens, node, pos = np.zeros(N, np.int64), np.zeros(N, np.int64), np.zeros(N, np.int64)
    pred, horizon, lmask = np.zeros(N, np.int64), np.zeros(N, np.int64), np.zeros(N, bool)
    for n in order:
        nd, s, e = tree.nodes[n], start[n], end[n]
        tokens[s:e] = nd.tokens
        node[s:e] = n
        pos[s:e] = depth[n] + np.arange(e - s)
        pred[s:e] = np.arange(s - 1, e - 1)
        pred[s] = -1 if nd.parent is None else end[int(nd.parent)] - 1
        horizon[s:e] = sub_end[n]
        lmask[s:e] = True if nd.loss_mask is None else nd.loss_mask
    lmask &= pred >= 0
    return Serialized(tokens, node, pos, pred, horizon, lmask, order, start, end)


def tree_mask_dense(tree: TrajectoryTree, ser: Serialized) -> np.ndarray:
    """Reference mask by brute force: i may attend j iff j <= i and node(j) is an ancestor-or-self of node(i)."""
    anc = {n: set(tree.ancestors(n)) for n in range(len(tree))}
    N = len(ser)
    m = np.zeros((N, N), bool)
    for i in range(N):
        a = anc[int(ser.node[i])]
        for j in range(i + 1):
            m[i, j] = int(ser.node[j]) in a
    return m


def tree_mask_horizon(horizon: np.ndarray | Tensor) -> Tensor:
    """The O(N) form of the tree mask, expanded to a dense bool (N, N): ``j <= i < horizon[j]``."""
    h = torch.as_tensor(np.asarray(horizon) if not isinstance(horizon, Tensor) else horizon)
    if h.dim() != 1:
        raise ValueError(f"horizon must be 1-D, got shape {tuple(h.shape)}")
    idx = torch.arange(len(h))
    qi, kj = idx[:, None], idx[None, :]
    return (kj <= qi) & (qi < h[None, :])


def token_weights(tree: TrajectoryTree, ser: Serialized, mode: str = "sum") -> np.ndarray:
    """Per-token weights ``w_t = (1/K) sum_{k: t in P_k} c_k`` (0 outside the loss mask).

    ``mode="sum"``: c_k = coef_k (1 unless a leaf sets ``coef``: SFT with a summed loss, or RL advantages).
    ``mode="mean"``: c_k = coef_k / |P_k ∩ mask| (each branch's loss is its token mean).
    """
    if mode not in ("sum", "mean"):
        raise ValueError(f"mode must be 'sum' or 'mean', got {mode!r}")
    paths = tree.paths()
    K = len(paths)
    node_c = np.zeros(len(tree))
    for p in paths:
        leaf = tree.nodes[p[-1]]
        c = 1.0 if leaf.coef is None else float(leaf.coef)
        if mode == "mean":
            c /= max(1, int(sum(ser.loss_mask[ser.start[n]:ser.end[n]].sum() for n in p)))
        for n in p:
            node_c[n] += c
    return np.where(ser.loss_mask, node_c[ser.node] / K, 0.0)


def path_token_index(tree: TrajectoryTree, ser: Serialized) -> list[np.ndarray]:
    """For each branch, the serialized index of each of its tokens, in path order."""
    return [np.concatenate([np.arange(ser.start[n], ser.end[n]) for n in p]) for p in tree.paths()]


# ----------------------------------------------------------------------------------------------------------------
# The model: attention (RoPE) and selective-SSM layers, runnable on a chain or on a tree
# ----------------------------------------------------------------------------------------------------------------
@dataclass
class TreeLMConfig:
    vocab_size: int = 64
    n_layer: int = 2
    n_head: int = 4
    d_model: int = 64
    ssm_every: int = 0      # 0: attention only; 2: every 2nd layer is an SSM (hybrid)
    d_state: int = 8
    d_conv: int = 4
    expand: int = 2
    init_std: float = 0.02  # std of linear/embedding weights (larger: sharper, more position-sensitive models)

    def __post_init__(self) -> None:
        for k in ("vocab_size", "n_layer", "n_head", "d_model", "d_state", "d_conv", "expand"):
            v = getattr(self, k)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{k} must be a positive int, got {v!r}")
        if self.d_model % self.n_head or (self.d_model // self.n_head) % 2:
            raise ValueError(f"d_model/n_head must be an even integer, got {self.d_model}/{self.n_head}")
        if not self.init_std > 0:
            raise ValueError(f"init_std must be > 0, got {self.init_std}")
        if self.ssm_every < 0:
            raise ValueError(f"ssm_every must be >= 0, got {self.ssm_every}")

    def is_ssm(self, layer: int) -> bool:
        return self.ssm_every > 0 and (layer + 1) % self.ssm_every == 0


@dataclass
class Gateway:
    """What a parent partition hands a child: per layer either ancestor (K, V) or (SSM state, conv context)."""

    kv: dict[int, tuple[Tensor, Tensor]] = field(default_factory=dict)
    ssm: dict[int, tuple[Tensor, Tensor]] = field(default_factory=dict)

    def tensors(self) -> list[Tensor]:
        return [t for layer in sorted(self.kv) for t in self.kv[layer]] + \
               [t for layer in sorted(self.ssm) for t in self.ssm[layer]]

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.tensors())


@dataclass
class Segments:
    """SSM layout of a sequence: node segments [start, end) in serialized order with the segment index of the
    parent (-1: start from the gateway state, or zeros)."""

    start: list[int]
    end: list[int]
    parent: list[int]


@dataclass
class NodeBlocks:
    """Node-block attention layout: for each node (in serialized order), its query range [start, end), the
    indices of the keys it may see (ancestor path, then itself) and the (T_n, A_n + T_n) mask (ancestors all
    visible, causal on its own part). Computes exactly the needed query-key pairs, sum_t (pos_t + 1)."""

    start: list[int]
    end: list[int]
    keys: list[Tensor]
    masks: list[Tensor]


def node_blocks(tree: TrajectoryTree, ser: Serialized) -> NodeBlocks:
    """The per-node block layout of a serialized tree (an exact, sparse alternative to the dense tree mask)."""
    starts, ends, keys, masks = [], [], [], []
    for n in ser.order:
        s, e = ser.start[n], ser.end[n]
        anc = tree.ancestors(n)
        keys.append(torch.as_tensor(np.concatenate([np.arange(ser.start[a], ser.end[a]) for a in anc])))
        A, L = len(keys[-1]) - (e - s), e - s
        masks.append(torch.cat([torch.ones(L, A, dtype=torch.bool), torch.ones(L, L, dtype=torch.bool).tril()], 1))
        starts.append(s)
        ends.append(e)
    return NodeBlocks(starts, ends, keys, masks)


class SelectiveSSM(nn.Module):
    """A Mamba-style selective SSM: in_proj -> causal depthwise conv -> SiLU -> selective diagonal scan, gated.

    ``h_t = exp(Δ_t A) ⊙ h_{t-1} + Δ_t B_t x_t``, ``y_t = C_t · h_t + D x_t``, output ``y ⊙ SiLU(z)``.
    """

    def __init__(self, d_model: int, d_state: int, d_conv: int, expand: int) -> None:
        super().__init__()
        d_in = expand * d_model
        self.d_in, self.d_state, self.d_conv = d_in, d_state, d_conv
        self.in_proj = nn.Linear(d_model, 2 * d_in)
        self.conv_w = nn.Parameter(torch.randn(d_in, 1, d_conv) / math.sqrt(d_conv))
        self.conv_b = nn.Parameter(torch.zeros(d_in))
        self.x_proj = nn.Linear(d_in, 1 + 2 * d_state)  # Δ (shared rank-1 then broadcast), B, C
        self.dt_proj = nn.Linear(1, d_in)
        self.A_log = nn.Parameter(torch.log(torch.arange(1, d_state + 1, dtype=torch.float32)).repeat(d_in, 1))
        self.D = nn.Parameter(torch.ones(d_in))
        self.out_proj = nn.Linear(d_in, d_model)

    def _conv(self, ctx: Tensor, u: Tensor) -> Tensor:
        """Causal depthwise conv of ``u`` (T, d_in) with left context ``ctx`` (d_conv-1, d_in)."""
        x = torch.cat([ctx, u], 0).T[None]  # (1, d_in, d_conv-1+T)
        return F.conv1d(x, self.conv_w, self.conv_b, groups=self.d_in)[0].T

    def _scan(self, h: Tensor, dA: Tensor, dBu: Tensor, C: Tensor) -> tuple[Tensor, Tensor]:
        ys = []
        for t in range(dA.shape[-3]):
            h = dA[..., t, :, :] * h + dBu[..., t, :, :]
            ys.append((h * C[..., t, None, :]).sum(-1))
        return torch.stack(ys, -2), h

    def _params(self, u: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        dbc = self.x_proj(u)
        delta = F.softplus(self.dt_proj(dbc[..., :1]))  # (..., T, d_in)
        Bm, Cm = dbc[..., 1:1 + self.d_state], dbc[..., 1 + self.d_state:]
        A = -torch.exp(self.A_log.to(u.dtype))
        dA = torch.exp(delta[..., None] * A)
        dBu = delta[..., None] * Bm[..., None, :] * u[..., None]
        return dA, dBu, Cm

    def forward(self, x: Tensor, seg: Segments | None = None, init: tuple[Tensor, Tensor] | None = None,
                route_state: bool = True, route_conv: bool = True) -> tuple[Tensor, dict]:
        """``x`` (B, T, d). Without ``seg``: each row is one chain. With ``seg`` (B=1): a serialized tree; each
        segment starts from its parent's end state and takes its conv context along the ancestor path.
        Returns the output and ``{"state": [...], "ctx": [...]}`` per segment (tree mode)."""
        B, T, _ = x.shape
        u, z = self.in_proj(x).chunk(2, dim=-1)
        zeros_ctx = x.new_zeros(self.d_conv - 1, self.d_in)
        zeros_h = x.new_zeros(self.d_in, self.d_state)
        if seg is None:
            uc = torch.stack([self._conv(zeros_ctx, u[b]) for b in range(B)])
            uc = F.silu(uc)
            dA, dBu, Cm = self._params(uc)
            y, _ = self._scan(x.new_zeros(B, self.d_in, self.d_state), dA, dBu, Cm)
            y = y + self.D * uc
            return self.out_proj(y * F.silu(z)), {}
        if B != 1:
            raise ValueError("tree mode runs one serialized tree (B=1)")
        h0, c0 = init if init is not None else (zeros_h, zeros_ctx)
        ys, states, ctxs = [None] * len(seg.start), [], []
        for s, (a, e, p) in enumerate(zip(seg.start, seg.end, seg.parent)):
            prev = p if route_state else s - 1  # ablation: the physically previous segment's state
            prevc = p if route_conv else s - 1
            h = h0 if prev < 0 else states[prev]
            ctx = c0 if prevc < 0 else ctxs[prevc]
            ui = u[0, a:e]
            uc = F.silu(self._conv(ctx, ui))
            dA, dBu, Cm = self._params(uc)
            y, h_end = self._scan(h, dA, dBu, Cm)
            ys[s] = y + self.D * uc
            states.append(h_end)
            ctxs.append(torch.cat([ctx, ui], 0)[-(self.d_conv - 1):] if self.d_conv > 1 else ctx)
        order = np.argsort(seg.start)
        y = torch.cat([ys[i] for i in order], 0)[None]
        return self.out_proj(y * F.silu(z)), {"state": states, "ctx": ctxs}


class TreeBlock(nn.Module):
    """Pre-norm block: attention (``helpers.nn.Attention`` weights, gateway-aware) or a selective SSM, then MLP."""

    def __init__(self, cfg: TreeLMConfig, ssm: bool) -> None:
        super().__init__()
        self.is_ssm = ssm
        self.ln1 = nn.LayerNorm(cfg.d_model)
        if ssm:
            self.mix = SelectiveSSM(cfg.d_model, cfg.d_state, cfg.d_conv, cfg.expand)
        else:
            self.mix = hnn.Attention(cfg.d_model, cfg.n_head)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.mlp = hnn.MLP(cfg.d_model, 4 * cfg.d_model)

    def attend(self, x: Tensor, mask: Tensor | NodeBlocks, rotary: hnn.RotaryEmbedding, pos: Tensor,
               prefix: tuple[Tensor, Tensor] | None) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        att: hnn.Attention = self.mix
        B, T, C = x.shape
        q, k, v = att.qkv(x).split(C, dim=-1)
        q, k, v = (t.view(B, T, att.n_head, att.head_dim).transpose(1, 2) for t in (q, k, v))
        q, k = rotary(q, k, pos)  # RoPE on depth positions
        own = (k, v)
        if prefix is not None:  # gateway: the ancestors' keys/values, visible to every query
            k, v = torch.cat([prefix[0], k], 2), torch.cat([prefix[1], v], 2)
        if isinstance(mask, NodeBlocks):  # node-block attention: each node against its ancestor path
            if prefix is not None:
                raise ValueError("node-block attention does not take a gateway prefix")
            y = torch.cat([F.scaled_dot_product_attention(q[:, :, s:e], k[:, :, ks], v[:, :, ks], attn_mask=m)
                           for s, e, ks, m in zip(mask.start, mask.end, mask.keys, mask.masks)], 2)
        else:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return att.proj(y.transpose(1, 2).reshape(B, T, C)), own


class TreeLM(nn.Module):
    """Decoder-only LM with RoPE; layers are attention or (hybrid) selective SSM. Weights tied.

    ``forward(idx, pos, mask, seg=None, gateway=None)`` returns ``(logits, cache)``; ``cache["kv"][l]`` holds the
    rotated keys/values of attention layer ``l`` and ``cache["ssm"][l]`` the per-segment end states and contexts.
    """

    def __init__(self, cfg: TreeLMConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.tok = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.rotary = hnn.RotaryEmbedding(cfg.d_model // cfg.n_head)
        self.blocks = nn.ModuleList([TreeBlock(cfg, cfg.is_ssm(i)) for i in range(cfg.n_layer)])
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.head.weight = self.tok.weight
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=cfg.init_std)
                if getattr(m, "bias", None) is not None:
                    nn.init.zeros_(m.bias)

    def forward(self, idx: Tensor, pos: Tensor, mask: Tensor | NodeBlocks | None = None, seg: Segments | None = None,
                gateway: Gateway | None = None, route_state: bool = True, route_conv: bool = True
                ) -> tuple[Tensor, dict]:
        if idx.dim() != 2:
            raise ValueError(f"idx must be (B, T), got {tuple(idx.shape)}")
        B, T = idx.shape
        if mask is None:
            mask = torch.ones(T, T, dtype=torch.bool, device=idx.device).tril()
        x = self.tok(idx)
        cache: dict = {"kv": {}, "ssm": {}}
        for li, blk in enumerate(self.blocks):
            h = blk.ln1(x)
            if blk.is_ssm:
                init = gateway.ssm.get(li) if gateway is not None else None
                y, st = blk.mix(h, seg, init, route_state, route_conv)
                cache["ssm"][li] = st
            else:
                prefix = gateway.kv.get(li) if gateway is not None else None
                y, cache["kv"][li] = blk.attend(h, mask, self.rotary, pos, prefix)
            x = x + y
            x = x + blk.mlp(blk.ln2(x))
        return self.head(self.ln_f(x)), cache


# ----------------------------------------------------------------------------------------------------------------
# Log-probs and losses: tree (one pass) vs linearized branches
# ----------------------------------------------------------------------------------------------------------------
def _tree_inputs(tree: TrajectoryTree, ser: Serialized, device=None):
    idx = torch.as_tensor(ser.tokens, device=device)[None]
    pos = torch.as_tensor(ser.pos, device=device)
    order = ser.order
    seg = Segments([ser.start[n] for n in order], [ser.end[n] for n in order],
                   [-1 if tree.nodes[n].parent is None else order.index(int(tree.nodes[n].parent)) for n in order])
    return idx, pos, seg


def tree_logits(model: TreeLM, tree: TrajectoryTree, ser: Serialized | None = None, *, mask: Tensor | None = None,
                pos: Tensor | None = None, route_state: bool = True, route_conv: bool = True) -> Tensor:
    """Logits (N_tree, vocab) of the serialized tree in one pass (tree mask, depth positions, routed SSM)."""
    if not isinstance(model, TreeLM):
        raise TypeError(f"model must be a TreeLM, got {type(model).__name__}")
    ser = ser or serialize(tree)
    idx, dpos, seg = _tree_inputs(tree, ser)
    mask = tree_mask_horizon(ser.horizon) if mask is None else mask
    logits, _ = model(idx, dpos if pos is None else pos, mask, seg, None, route_state, route_conv)
    return logits[0]


def tree_logprobs(model: TreeLM, tree: TrajectoryTree, ser: Serialized | None = None, *, mask: Tensor | None = None,
                  pos: Tensor | None = None, pred: np.ndarray | None = None, route_state: bool = True,
                  route_conv: bool = True) -> Tensor:
    """log p(x_t | ancestors) for every serialized token (index 0 of the root gets 0): ONE forward pass.

    ``mask``, ``pos`` and ``pred`` default to the tree mask, depth positions and the ``pred`` label map; the
    ablations pass the wrong ones."""
    ser = ser or serialize(tree)
    logits = tree_logits(model, tree, ser, mask=mask, pos=pos, route_state=route_state, route_conv=route_conv)
    logp = logits.log_softmax(-1)
    pr = torch.as_tensor(ser.pred if pred is None else pred)
    lp = logp[pr.clamp(min=0), torch.as_tensor(ser.tokens)]  # the label map: logits[pred(t)] scores x_t
    return torch.where(pr >= 0, lp, torch.zeros_like(lp))


def path_logprobs(model: TreeLM, tree: TrajectoryTree) -> list[Tensor]:
    """Baseline: each branch linearized and run on its own (causal mask, positions 0..L-1)."""
    out = []
    for toks in tree.path_tokens():
        idx = torch.tensor(toks)[None]
        logits, _ = model(idx, torch.arange(len(toks)))
        lp = logits[0, :-1].log_softmax(-1).gather(-1, idx[0, 1:, None])[:, 0]
        out.append(torch.cat([lp.new_zeros(1), lp]))
    return out


def tree_loss(model: TreeLM, tree: TrajectoryTree, weights: np.ndarray, ser: Serialized | None = None,
              mask: Tensor | None = None) -> Tensor:
    """L_tree = -sum_t w_t log p(x_t | ancestors)."""
    lp = tree_logprobs(model, tree, ser, mask=mask)
    return -(torch.as_tensor(weights, dtype=lp.dtype) * lp).sum()


def branch_avg_loss(model: TreeLM, tree: TrajectoryTree, mode: str = "sum") -> Tensor:
    """Baseline: L = (1/K) sum_k c_k * (sum or mean over P_k's loss tokens) of -log p, each branch run alone."""
    ser = serialize(tree)
    idxs = path_token_index(tree, ser)
    lps = path_logprobs(model, tree)
    total = 0.0
    for p, ix, lp in zip(tree.paths(), idxs, lps):
        m = torch.as_tensor(ser.loss_mask[ix], dtype=lp.dtype)
        c = tree.nodes[p[-1]].coef
        c = 1.0 if c is None else c
        s = -(m * lp).sum()
        total = total + c * (s / max(1.0, float(m.sum())) if mode == "mean" else s)
    return total / len(lps)


# ----------------------------------------------------------------------------------------------------------------
# Redundancy-Free Tree Partitioning
# ----------------------------------------------------------------------------------------------------------------
@dataclass
class Partition:
    """A connected subtree: ``nodes`` in DFS order (``nodes[0]`` is its root), its parent partition, children."""

    id: int
    nodes: list[int]
    parent: int | None
    children: list[int] = field(default_factory=list)

    @property
    def root(self) -> int:
        return self.nodes[0]


def partition_tree(tree: TrajectoryTree, budget: int) -> list[Partition]:
    """Cut the tree at node boundaries into connected subtrees of at most ``budget`` tokens.

    Greedy DFS fill (our reconstruction of the paper's choice): open a partition at a node, add the nodes of its
    subtree in DFS pre-order while they fit; a node that does not fit (with its subtree) becomes a cut node, the
    root of a child partition. Every node must be at most ``budget`` long (see :func:`split_long_nodes`).
    """
    if not isinstance(budget, int) or budget < 1:
        raise ValueError(f"budget must be a positive int, got {budget!r}")
    too_long = [i for i, nd in enumerate(tree.nodes) if len(nd.tokens) > budget]
    if too_long:
        raise ValueError(f"nodes {too_long[:5]} are longer than the budget {budget}; use split_long_nodes first")
    parts: list[Partition] = []
    todo: list[tuple[int, int | None]] = [(tree.root, None)]
    while todo:
        top, parent = todo.pop(0)
        P = Partition(len(parts), [], parent)
        parts.append(P)
        if parent is not None:
            parts[parent].children.append(P.id)
        used, stack = 0, [top]
        while stack:
            n = stack.pop()
            L = len(tree.nodes[n].tokens)
            if n != top and used + L > budget:
                todo.append((n, P.id))  # a cut: the child partition receives the gateway at n
                continue
            P.nodes.append(n)
            used += L
            stack.extend(reversed(tree.children[n]))
    return parts


def partition_tokens(tree: TrajectoryTree, parts: Sequence[Partition]) -> int:
    """Tokens processed by the redundancy-free partitioning (each token once)."""
    return sum(len(tree.nodes[n].tokens) for P in parts for n in P.nodes)


def naive_partition_tokens(tree: TrajectoryTree, parts: Sequence[Partition]) -> int:
    """Tokens processed when each partition re-prepends (recomputes) its ancestors instead of a gateway."""
    return sum(len(tree.nodes[n].tokens) for P in parts for n in P.nodes + tree.ancestors(P.root, False))


def _param_ptrs(model: nn.Module) -> set[int]:
    return {p.data_ptr() for p in model.parameters()}


class saved_bytes:
    """Context manager counting the bytes autograd saves for backward (parameters excluded) into ``self.bytes``."""

    def __init__(self, model: nn.Module, counter: list[int] | None = None) -> None:
        self.ptrs = _param_ptrs(model)
        self.bytes = 0
        self.counter = counter

    def _pack(self, t: Tensor) -> Tensor:
        if t.data_ptr() not in self.ptrs:
            b = t.numel() * t.element_size()
            self.bytes += b
            if self.counter is not None:
                self.counter[0] += b
        return t

    def __enter__(self):
        self._ctx = torch.autograd.graph.saved_tensors_hooks(self._pack, lambda t: t)
        self._ctx.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._ctx.__exit__(*exc)


def partitioned_backward(model: TreeLM, tree: TrajectoryTree, parts: Sequence[Partition], weights: np.ndarray,
                         ser: Serialized | None = None) -> dict:
    """Forward+backward of L_tree partition by partition, depth-first, accumulating parameter gradients.

    Each child partition gets the gateway (ancestor K/V per attention layer, SSM end state and conv context of the
    cut node's parent) as detached leaves; their gradients are relayed to the parent's tensors (accumulated in
    fp32 or wider) before the parent's backward. Returns the loss, tokens processed, saved bytes per partition,
    the peak of live saved bytes and the chain bound.
    """
    ser = ser or serialize(tree)
    node_part = {n: P.id for P in parts for n in P.nodes}
    if sorted(node_part) != list(range(len(tree))) or sum(len(P.nodes) for P in parts) != len(tree):
        raise ValueError("partitions must cover every node exactly once")
    dtype = next(model.parameters()).dtype
    acc_dtype = torch.promote_types(dtype, torch.float32)
    w_all = torch.as_tensor(weights, dtype=dtype)
    tok_all = torch.as_tensor(ser.tokens)
    ssm_layers = [i for i, b in enumerate(model.blocks) if b.is_ssm]
    live = [0]
    stats = {"loss": 0.0, "tokens": 0, "saved": {}, "peak_live": 0, "gateway_bytes": {}}

    def run(P: Partition, gw: Gateway | None) -> None:
        gidx = np.concatenate([np.arange(ser.start[n], ser.end[n]) for n in P.nodes])
        local = {int(g): i for i, g in enumerate(gidx)}
        T, G = len(gidx), 0 if gw is None or not gw.kv else next(iter(gw.kv.values()))[0].shape[2]
        idx = tok_all[gidx][None]
        pos = torch.as_tensor(ser.pos[gidx])
        # the tree mask restricted to this partition (DFS intervals stay contiguous), plus all gateway keys
        own = tree_mask_horizon(np.searchsorted(gidx, ser.horizon[gidx]))
        mask = torch.cat([torch.ones(T, G, dtype=torch.bool), own], 1)
        seg_par = [-1 if (tree.nodes[n].parent is None or int(tree.nodes[n].parent) not in P.nodes)
                   else P.nodes.index(int(tree.nodes[n].parent)) for n in P.nodes]
        seg = Segments([local[ser.start[n]] for n in P.nodes], [local[ser.end[n] - 1] + 1 for n in P.nodes], seg_par)
        counter = saved_bytes(model, live)
        with counter:
            logits, cache = model(idx, pos, mask, seg, gw)
            # the labels this partition owns: every token whose predicting position lies in it
            owned = np.nonzero(np.isin(ser.pred, gidx) & (ser.pred >= 0))[0]
            lp = logits[0].log_softmax(-1)[[local[int(p)] for p in ser.pred[owned]], tok_all[owned]]
            loss = -(w_all[owned] * lp).sum()
        stats["saved"][P.id] = counter.bytes
        stats["tokens"] += T
        stats["peak_live"] = max(stats["peak_live"], live[0])
        in_P = set(P.nodes)
        srcs: list[Tensor] = []
        grads: list[Tensor] = []
        for cid in P.children:
            C = parts[cid]
            pn = int(tree.nodes[C.root].parent)  # the cut node's parent lives in P
            anc = [n for n in tree.ancestors(pn) if n in in_P]
            aidx = torch.as_tensor(np.concatenate([np.arange(local[ser.start[n]], local[ser.end[n] - 1] + 1)
                                                   for n in anc]))
            src = Gateway()
            for li, (k, v) in cache["kv"].items():
                pk = gw.kv[li] if gw is not None and li in gw.kv else None
                kk, vv = k[:, :, aidx], v[:, :, aidx]
                src.kv[li] = (torch.cat([pk[0], kk], 2), torch.cat([pk[1], vv], 2)) if pk else (kk, vv)
            si = P.nodes.index(pn)
            for li in ssm_layers:
                st = cache["ssm"][li]
                src.ssm[li] = (st["state"][si], st["ctx"][si])
            s_t = src.tensors()
            leaves = [t.detach().requires_grad_(True) for t in s_t]
            it = iter(leaves)
            child_gw = Gateway({li: (next(it), next(it)) for li in sorted(src.kv)},
                               {li: (next(it), next(it)) for li in sorted(src.ssm)})
            stats["gateway_bytes"][cid] = child_gw.nbytes()
            run(C, child_gw)
            acc = [torch.zeros_like(t, dtype=acc_dtype) for t in s_t]
            for a, leaf in zip(acc, leaves):
                if leaf.grad is not None:
                    a += leaf.grad.to(acc_dtype)
            srcs += s_t
            grads += [a.to(t.dtype) for a, t in zip(acc, s_t)]
        torch.autograd.backward([loss, *srcs], [torch.ones_like(loss), *grads])
        live[0] -= counter.bytes
        stats["loss"] += float(loss.detach())

    run(parts[0], None)
    # the bound: the largest sum of saved bytes (+ gateway bytes) along a root-to-leaf chain of partitions
    def chain(pid: int) -> int:
        own = stats["saved"][pid] + stats["gateway_bytes"].get(pid, 0)
        return own + max((chain(c) for c in parts[pid].children), default=0)

    stats["chain_bound"] = chain(0)
    return stats
