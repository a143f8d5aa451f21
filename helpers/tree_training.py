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
  accumulated in fp32; :func:`naive_partitioned_backward` is the baseline that re-prepends the ancestors.
* Realistic trees: :func:`word_language` (a toy corpus), :func:`generate` (sampling from a trained :class:`TreeLM`
  with a key/value cache), :func:`sample_tree` (a group of rollouts, independent or forked where the sampler is
  uncertain) and :func:`prefix_tree` (rollouts merged into a tree by their shared prefixes).
* Measurements made from outside the method, so that a check on them can fail: :class:`count_tokens` (a forward
  hook on the token embedding), :class:`track_memory` (storages kept alive by saved tensors, released by
  finalizers, and the C heap in use), :func:`interleaved_times` (all sides of a benchmark in one run).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import math
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from helpers import nn as hnn
from helpers import validate as V

__all__ = [
    "Node", "TrajectoryTree", "Serialized", "serialize", "tree_mask_dense", "tree_mask_horizon",
    "token_weights", "path_token_index", "random_tree", "random_tree_by_parents", "split_long_nodes",
    "TreeLMConfig", "TreeLM", "Gateway", "NodeBlocks", "node_blocks", "tree_logits", "tree_logprobs",
    "path_logprobs", "tree_loss", "branch_avg_loss", "tree_ppo_loss", "branch_ppo_loss",
    "Partition", "partition_tree", "partition_tokens", "naive_partition_tokens", "partitioned_backward",
    "naive_partitioned_backward", "accumulate_gateway_grads", "chain_bound", "count_tokens", "track_memory",
    "heap_in_use", "interleaved_times", "round_ratio", "rel_spread", "packed_inputs", "packed_loss",
    "attention_pairs", "flop_speedup", "step_functions", "checkpoint_config", "claim_tree", "width_sweep",
    "WordLanguage", "word_language", "generate", "prefix_tree", "sample_tree",
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


def _seg_range(seg_len: Sequence[int]) -> tuple[int, int]:
    lo_hi = V.sequence("seg_len", seg_len, of=lambda n, x: V.integer(n, x, min=1))
    if len(lo_hi) != 2 or lo_hi[1] < lo_hi[0]:
        raise ValueError(f"seg_len must be (lo, hi) with 1 <= lo <= hi, got {seg_len!r}")
    return lo_hi[0], lo_hi[1]


def _tree_ser(tree: TrajectoryTree, ser: Serialized | None) -> Serialized:
    """Validate a tree and (optionally) its serialization; serialize when ``ser`` is None."""
    V.instance("tree", tree, TrajectoryTree)
    if ser is None:
        return serialize(tree)
    V.instance("ser", ser, Serialized)
    if len(ser) != tree.n_tree or len(ser.order) != len(tree):
        raise ValueError(f"ser does not belong to tree: {len(ser)} tokens / {len(ser.order)} nodes for a tree of "
                         f"{tree.n_tree} tokens / {len(tree)} nodes")
    return ser


def _model_tree(model: TreeLM, tree: TrajectoryTree) -> None:
    V.instance("model", model, TreeLM)
    V.instance("tree", tree, TrajectoryTree)
    top = max(max(nd.tokens) for nd in tree.nodes)
    if top >= model.cfg.vocab_size:
        raise ValueError(f"tree has token id {top}, outside the model's vocabulary [0, {model.cfg.vocab_size})")


def _weights(weights: np.ndarray | Tensor, n: int) -> np.ndarray:
    return V.array("weights", weights, ndim=1, shape=(n,), dtype="float")


def random_tree(rng: np.random.Generator, root_len: int, branching: Sequence[int], seg_len: tuple[int, int],
                vocab: int) -> TrajectoryTree:
    """A layered tree: a root prompt of ``root_len`` tokens, then ``branching[d]`` children per node at level d,
    each with a segment of ``seg_len[0]..seg_len[1]`` tokens. The root prompt is masked out of the loss."""
    V.instance("rng", rng, np.random.Generator)
    root_len = V.integer("root_len", root_len, min=1)
    branching = V.sequence("branching", branching, of=lambda n, x: V.integer(n, x, min=1))
    seg_len = _seg_range(seg_len)
    vocab = V.integer("vocab", vocab, min=2)
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
    V.instance("rng", rng, np.random.Generator)
    n_nodes = V.integer("n_nodes", n_nodes, min=1)
    max_seg = V.integer("max_seg", max_seg, min=1)
    vocab = V.integer("vocab", vocab, min=2)
    mask_prob = V.probability("mask_prob", mask_prob)
    coefs = V.boolean("coefs", coefs)
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
    V.instance("tree", tree, TrajectoryTree)
    max_len = V.integer("max_len", max_len, min=1)
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
    ser = _tree_ser(tree, ser)
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
    hn = V.array("horizon", horizon, ndim=1, dtype="int", nonempty=True)
    idx_np = np.arange(len(hn))
    if not ((hn > idx_np) & (hn <= len(hn))).all():
        raise ValueError(f"horizon must satisfy j < horizon[j] <= N (the end of node(j)'s subtree), got {hn[:8]}...")
    h = torch.as_tensor(hn)
    idx = torch.arange(len(h))
    qi, kj = idx[:, None], idx[None, :]
    return (kj <= qi) & (qi < h[None, :])


def token_weights(tree: TrajectoryTree, ser: Serialized, mode: str = "sum") -> np.ndarray:
    """Per-token weights ``w_t = (1/K) sum_{k: t in P_k} c_k`` (0 outside the loss mask).

    ``mode="sum"``: c_k = coef_k (1 unless a leaf sets ``coef``: SFT with a summed loss, or RL advantages).
    ``mode="mean"``: c_k = coef_k / |P_k ∩ mask| (each branch's loss is its token mean).
    """
    ser = _tree_ser(tree, ser)
    V.one_of("mode", mode, ("sum", "mean"))
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
    ser = _tree_ser(tree, ser)
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
            setattr(self, k, V.integer(k, getattr(self, k), min=1))
        self.ssm_every = V.integer("ssm_every", self.ssm_every, min=0)
        self.init_std = V.positive("init_std", self.init_std)
        if self.d_model % self.n_head or (self.d_model // self.n_head) % 2:
            raise ValueError(f"d_model/n_head must be an even integer, got {self.d_model}/{self.n_head}")

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
    ser = _tree_ser(tree, ser)
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
    _model_tree(model, tree)
    ser = _tree_ser(tree, ser)
    if pos is not None:
        V.tensor("pos", pos, ndim=1, shape=(len(ser),), dtype="int", min=0)
    if mask is not None and not isinstance(mask, NodeBlocks):
        V.tensor("mask", mask, shape=(len(ser), len(ser)), dtype="bool")
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
    ser = _tree_ser(tree, ser)
    if pred is not None:
        pred = V.array("pred", pred, ndim=1, shape=(len(ser),), dtype="int", min=-1, max=len(ser) - 1)
    logits = tree_logits(model, tree, ser, mask=mask, pos=pos, route_state=route_state, route_conv=route_conv)
    logp = logits.log_softmax(-1)
    pr = torch.as_tensor(ser.pred if pred is None else pred)
    lp = logp[pr.clamp(min=0), torch.as_tensor(ser.tokens)]  # the label map: logits[pred(t)] scores x_t
    return torch.where(pr >= 0, lp, torch.zeros_like(lp))


def path_logprobs(model: TreeLM, tree: TrajectoryTree) -> list[Tensor]:
    """Baseline: each branch linearized and run on its own (causal mask, positions 0..L-1)."""
    _model_tree(model, tree)
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
    ser = _tree_ser(tree, ser)
    weights = _weights(weights, len(ser))
    lp = tree_logprobs(model, tree, ser, mask=mask)
    return -(torch.as_tensor(weights, dtype=lp.dtype) * lp).sum()


def branch_avg_loss(model: TreeLM, tree: TrajectoryTree, mode: str = "sum") -> Tensor:
    """Baseline: L = (1/K) sum_k c_k * (sum or mean over P_k's loss tokens) of -log p, each branch run alone."""
    _model_tree(model, tree)
    V.one_of("mode", mode, ("sum", "mean"))
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


def _ppo_args(model: TreeLM, tree: TrajectoryTree, old_logprobs: np.ndarray, clip_eps: float,
              ser: Serialized | None) -> tuple[Serialized, np.ndarray, float]:
    _model_tree(model, tree)
    ser = _tree_ser(tree, ser)
    old = V.array("old_logprobs", old_logprobs, ndim=1, shape=(len(ser),), dtype="float", max=0)
    return ser, old, V.number("clip_eps", clip_eps, min=0, max=1, strict_min=True, strict_max=True)


def _clipped(ratio: Tensor, adv: Tensor, eps: float) -> Tensor:
    return torch.minimum(ratio * adv, ratio.clamp(1 - eps, 1 + eps) * adv)


def tree_ppo_loss(model: TreeLM, tree: TrajectoryTree, old_logprobs: np.ndarray, clip_eps: float = 0.2,
                  ser: Serialized | None = None) -> Tensor:
    """PPO-clip on a tree with one ratio per token: ``-(1/K) sum_t sum_{k: t in P_k} min(r_t A_k,
    clip(r_t, 1±eps) A_k)`` over loss-mask tokens, ``r_t = exp(lp_t - old_t)``, ``A_k`` the leaf's ``coef``.

    The min sits inside the sum over branches, so the loss is *not* a fixed per-token weight times ``r_t`` once
    clipping is active; it still needs one log-prob per token. ``old_logprobs`` is indexed like the serialization.
    """
    ser, old, eps = _ppo_args(model, tree, old_logprobs, clip_eps, ser)
    lp = tree_logprobs(model, tree, ser)
    ratio = torch.exp(lp - torch.as_tensor(old, dtype=lp.dtype))
    adv: list[list[float]] = [[] for _ in range(len(tree))]
    paths = tree.paths()
    for p in paths:
        c = tree.nodes[p[-1]].coef
        for n in p:
            adv[n].append(1.0 if c is None else float(c))
    total = lp.new_zeros(())
    for n in ser.order:
        ix = np.arange(ser.start[n], ser.end[n])[ser.loss_mask[ser.start[n]:ser.end[n]]]
        if len(ix):
            a = torch.as_tensor(adv[n], dtype=lp.dtype)
            total = total + _clipped(ratio[torch.as_tensor(ix)][:, None], a[None, :], eps).sum()
    return -total / len(paths)


def branch_ppo_loss(model: TreeLM, tree: TrajectoryTree, old_logprobs: np.ndarray, clip_eps: float = 0.2
                    ) -> Tensor:
    """Baseline PPO-clip: each branch run alone, ``-(1/K) sum_k sum_{t in P_k} min(r_t A_k, clip(r_t) A_k)``."""
    ser, old, eps = _ppo_args(model, tree, old_logprobs, clip_eps, None)
    total = 0.0
    paths = tree.paths()
    for p, ix, lp in zip(paths, path_token_index(tree, ser), path_logprobs(model, tree)):
        m = torch.as_tensor(ser.loss_mask[ix], dtype=lp.dtype)
        c = tree.nodes[p[-1]].coef
        r = torch.exp(lp - torch.as_tensor(old[ix], dtype=lp.dtype))
        total = total + (m * _clipped(r, torch.tensor(1.0 if c is None else float(c), dtype=lp.dtype), eps)).sum()
    return -total / len(paths)


# ----------------------------------------------------------------------------------------------------------------
# Realistic trees: rollouts sampled from a trained LM, merged into a prefix tree
# ----------------------------------------------------------------------------------------------------------------
@dataclass
class WordLanguage:
    """A toy language for a small LM: ``words`` (fixed token strings) chained by a sparse word-level Markov chain
    (each word has ``next_words.shape[1]`` possible successors with probabilities ``next_p``); after any word the
    document ends with probability ``p_end`` (token ``eos``). Inside a word the next token is determined; at a word
    boundary it is a real choice, so a trained model's samples share prefixes and then diverge, as LM rollouts do."""

    words: list[list[int]]
    next_words: np.ndarray
    next_p: np.ndarray
    p_end: float
    eos: int = 0

    def document(self, rng: np.random.Generator, max_tokens: int) -> list[int]:
        """One document: a random first word, then successors until the end (``eos`` appended) or
        ``max_tokens`` tokens (truncated, no ``eos``)."""
        V.instance("rng", rng, np.random.Generator)
        max_tokens = V.integer("max_tokens", max_tokens, min=1)
        out: list[int] = []
        w = int(rng.integers(len(self.words)))
        while len(out) < max_tokens:
            out += self.words[w]
            if rng.random() < self.p_end:
                out.append(self.eos)
                break
            w = int(self.next_words[w, rng.choice(self.next_words.shape[1], p=self.next_p[w])])
        return out[:max_tokens]

    def stream(self, rng: np.random.Generator, n_tokens: int) -> tuple[np.ndarray, np.ndarray]:
        """``n_tokens`` of documents back to back, and the true entropy (nats) of each token given everything
        before it (0 inside a word; the successor choice at a boundary; log(#words) after ``eos``). The mean of the
        entropies is the cross-entropy a perfect model would reach."""
        V.instance("rng", rng, np.random.Generator)
        n_tokens = V.integer("n_tokens", n_tokens, min=1)
        h_next = -(self.next_p * np.log(self.next_p)).sum(1)
        h_boundary = -(self.p_end * math.log(self.p_end)) - (1 - self.p_end) * math.log(1 - self.p_end) \
            + (1 - self.p_end) * h_next
        toks: list[int] = []
        ent: list[float] = []
        w = prev = int(rng.integers(len(self.words)))
        first = True
        while len(toks) < n_tokens:
            h0 = math.log(len(self.words)) if first else float(h_boundary[prev])
            ent += [h0] + [0.0] * (len(self.words[w]) - 1)
            toks += self.words[w]
            first, prev = False, w
            if rng.random() < self.p_end:
                toks.append(self.eos)
                ent.append(float(h_boundary[w]))
                w, first = int(rng.integers(len(self.words))), True
            else:
                w = int(self.next_words[w, rng.choice(self.next_words.shape[1], p=self.next_p[w])])
        return np.asarray(toks[:n_tokens], np.int64), np.asarray(ent[:n_tokens])


def word_language(rng: np.random.Generator, vocab: int, n_words: int = 48, word_len: tuple[int, int] = (2, 5),
                  n_next: int = 3, p_end: float = 0.03) -> WordLanguage:
    """A random :class:`WordLanguage` over tokens ``1..vocab-1`` (token 0 is ``eos``): ``n_words`` words of
    ``word_len`` tokens, each with ``n_next`` successors (Dirichlet(1) probabilities)."""
    V.instance("rng", rng, np.random.Generator)
    vocab = V.integer("vocab", vocab, min=3)
    n_words = V.integer("n_words", n_words, min=2)
    lo, hi = _seg_range(word_len)
    n_next = V.integer("n_next", n_next, min=1, max=n_words)
    p_end = V.number("p_end", p_end, min=0, max=1, strict_min=True, strict_max=True)
    words = [rng.integers(1, vocab, int(rng.integers(lo, hi + 1))).tolist() for _ in range(n_words)]
    nxt = np.stack([rng.choice(n_words, n_next, replace=False) for _ in range(n_words)])
    p = rng.dirichlet(np.ones(n_next), n_words)
    return WordLanguage(words, nxt, p, p_end)


@torch.no_grad()
def generate(model: TreeLM, prefix: Sequence[int], n: int, max_new: int, gen: torch.Generator,
             eos: int | None = None, temperature: float = 1.0) -> tuple[list[list[int]], list[np.ndarray]]:
    """Sample ``n`` continuations of ``prefix`` (at most ``max_new`` tokens each; one stops after emitting
    ``eos``) from an attention-only :class:`TreeLM`, with a key/value cache (the model's gateway input).

    Returns the continuations and, for each, the entropy (nats) of the distribution each token was drawn from."""
    V.instance("model", model, TreeLM)
    if model.cfg.ssm_every:
        raise ValueError("generate needs an attention-only TreeLM (ssm_every=0)")
    prefix = V.sequence("prefix", prefix, min_len=1, of=lambda k, x: V.integer(k, x, min=0,
                                                                              max=model.cfg.vocab_size - 1))
    n = V.integer("n", n, min=1)
    max_new = V.integer("max_new", max_new, min=1)
    V.instance("gen", gen, torch.Generator)
    V.optional(V.integer, "eos", eos, min=0, max=model.cfg.vocab_size - 1)
    temperature = V.positive("temperature", temperature)
    was = model.training
    model.eval()
    P = len(prefix)
    logits, cache = model(torch.tensor([prefix]), torch.arange(P))
    kv = {li: (k.expand(n, -1, -1, -1), v.expand(n, -1, -1, -1)) for li, (k, v) in cache["kv"].items()}
    last = logits[:, -1].expand(n, -1)
    out = torch.zeros(n, max_new, dtype=torch.long)
    ent = torch.zeros(n, max_new, dtype=torch.float64)
    length = torch.full((n,), max_new)
    for t in range(max_new):
        logp = (last.double() / temperature).log_softmax(-1)
        ent[:, t] = -(logp.exp() * logp).sum(-1)
        tok = torch.multinomial(logp.exp(), 1, generator=gen)[:, 0]
        out[:, t] = tok
        if eos is not None:
            length = torch.where((tok == eos) & (length == max_new), torch.tensor(t + 1), length)
            if bool((length < max_new).all()):
                break
        if t + 1 < max_new:
            G = P + t
            logits, c = model(tok[:, None], torch.tensor([G]), torch.ones(1, G + 1, dtype=torch.bool), None,
                              Gateway(kv, {}))
            kv = {li: (torch.cat([kv[li][0], k], 2), torch.cat([kv[li][1], v], 2)) for li, (k, v) in c["kv"].items()}
            last = logits[:, -1]
    model.train(was)
    return ([out[i, :int(length[i])].tolist() for i in range(n)],
            [ent[i, :int(length[i])].numpy() for i in range(n)])


def prefix_tree(prompt: Sequence[int], completions: Sequence[Sequence[int]],
                coefs: Sequence[float] | None = None) -> TrajectoryTree:
    """The tree of a group of rollouts: the ``prompt`` (masked out of the loss) as the root and the
    ``completions`` merged wherever they share a prefix (a trie whose nodes are maximal shared segments).

    Every completion keeps its own leaf (branch ``k`` ends at a leaf holding ``coefs[k]``, if given): where one
    completion equals another or a prefix of it, its last token becomes a leaf of its own."""
    prompt = V.sequence("prompt", prompt, min_len=1, of=lambda k, x: V.integer(k, x, min=0))
    comps = V.sequence("completions", completions, min_len=1,
                       of=lambda k, c: V.sequence(k, c, min_len=1, of=lambda j, x: V.integer(j, x, min=0)))
    if coefs is not None:
        coefs = V.sequence("coefs", coefs, of=lambda k, x: V.number(k, x))
        if len(coefs) != len(comps):
            raise ValueError(f"coefs has {len(coefs)} entries for {len(comps)} completions")
    nodes = [Node(list(prompt), None, [False] * len(prompt))]

    def leaf(k: int, off: int, parent: int) -> None:
        nodes.append(Node(list(comps[k][off:]), parent, None, None if coefs is None else coefs[k]))

    def build(members: list[int], off: int, parent: int) -> None:
        groups: dict[int, list[int]] = {}
        for k in members:
            groups.setdefault(comps[k][off], []).append(k)
        for grp in groups.values():
            # a completion that ends at this token gets a 1-token leaf of its own (duplicates stay K branches)
            rest = [k for k in grp if len(comps[k]) > off + 1] if len(grp) > 1 else grp
            for k in grp:
                if k not in rest:
                    leaf(k, off, parent)
            if len(rest) == 1:
                leaf(rest[0], off, parent)
            elif rest:
                # shared while every member has the next token and it agrees; each keeps >= 1 token of its own
                lim, end = min(len(comps[k]) for k in rest) - 1, off + 1
                while end < lim and len({comps[k][end] for k in rest}) == 1:
                    end += 1
                nodes.append(Node(list(comps[rest[0]][off:end]), parent))
                build(rest, end, len(nodes) - 1)

    build(list(range(len(comps))), 0, 0)
    return TrajectoryTree(nodes)


def sample_tree(model: TreeLM, prompt: Sequence[int], n_leaves: int, max_new: int, gen: torch.Generator,
                branch: str = "fork", eos: int | None = None, temperature: float = 1.0
                ) -> tuple[TrajectoryTree, list[list[int]]]:
    """A group of ``n_leaves`` rollouts of ``prompt`` sampled from ``model``, as a :func:`prefix_tree`.

    ``branch="group"``: independent samples (a GRPO group), sharing whatever prefixes they happen to share.
    ``branch="fork"``: tree rollouts: one rollout, then repeatedly a rollout chosen uniformly is forked at a
    position drawn with probability proportional to the entropy the sampler had there, and a fresh continuation is
    sampled from that point (so branches split where the model is uncertain). Returns the tree and the
    completions."""
    V.instance("model", model, TreeLM)
    n_leaves = V.integer("n_leaves", n_leaves, min=1)
    max_new = V.integer("max_new", max_new, min=1)
    V.one_of("branch", branch, ("fork", "group"))
    if branch == "group":
        comps, _ = generate(model, prompt, n_leaves, max_new, gen, eos, temperature)
        return prefix_tree(prompt, comps), comps
    comps, ents = generate(model, prompt, 1, max_new, gen, eos, temperature)
    while len(comps) < n_leaves:
        j = int(torch.randint(len(comps), (1,), generator=gen))
        h = torch.as_tensor(ents[j]).clamp_min(0)
        t = int(torch.multinomial(h if float(h.sum()) > 0 else torch.ones_like(h), 1, generator=gen))
        c, e = generate(model, list(prompt) + comps[j][:t], 1, max_new - t, gen, eos, temperature)
        comps.append(comps[j][:t] + c[0])
        ents.append(np.concatenate([ents[j][:t], e[0]]))
    return prefix_tree(prompt, comps), comps


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
    V.instance("tree", tree, TrajectoryTree)
    budget = V.integer("budget", budget, min=1)
    too_long = [i for i, nd in enumerate(tree.nodes) if len(nd.tokens) > budget]
    if too_long:
        raise ValueError(f"nodes {too_long[:5]} are longer than the budget {budget}; use split_long_nodes first")
    parts: list[Partition] = []
    queue: list[tuple[int, int | None]] = [(tree.root, None)]
    while queue:
        top, parent = queue.pop(0)
        P = Partition(len(parts), [], parent)
        parts.append(P)
        if parent is not None:
            parts[parent].children.append(P.id)
        used, stack = 0, [top]
        while stack:
            n = stack.pop()
            L = len(tree.nodes[n].tokens)
            if n != top and used + L > budget:
                queue.append((n, P.id))  # a cut: the child partition receives the gateway at n
                continue
            P.nodes.append(n)
            used += L
            stack.extend(reversed(tree.children[n]))
    return parts


def _check_partitions(tree: TrajectoryTree, parts: Sequence[Partition], cover: bool) -> list[Partition]:
    """Partitions are connected subtrees whose roots hang below their parent partition; ``cover``: every node once."""
    V.instance("tree", tree, TrajectoryTree)
    parts = V.sequence("parts", parts, min_len=1, of=lambda n, x: V.instance(n, x, Partition))
    n = len(tree)
    owner: dict[int, int] = {}
    for k, P in enumerate(parts):
        if cover and P.id != k:
            raise ValueError(f"parts[{k}].id must be {k} (partitions are indexed by id), got {P.id}")
        if not P.nodes or any(not isinstance(x, (int, np.integer)) or not 0 <= x < n for x in P.nodes):
            raise ValueError(f"parts[{k}].nodes must be a non-empty list of node indices in [0, {n}), got {P.nodes}")
        for x in P.nodes:
            owner.setdefault(int(x), k)
    if cover and (sorted(owner) != list(range(n)) or sum(len(P.nodes) for P in parts) != n):
        raise ValueError("partitions must cover every node exactly once")
    if cover:
        for P in parts:
            for x in P.nodes[1:]:
                if owner[int(tree.nodes[x].parent)] != P.id:
                    raise ValueError(f"partition {P.id} is not connected: node {x}'s parent lies elsewhere")
            par = tree.nodes[P.root].parent
            if (P.parent is None) != (par is None) or (par is not None and owner[int(par)] != P.parent):
                raise ValueError(f"partition {P.id}: its root's parent must lie in its parent partition {P.parent}")
    return parts


def partition_tokens(tree: TrajectoryTree, parts: Sequence[Partition]) -> int:
    """Tokens in the partitions' own nodes (what a redundancy-free schedule should process)."""
    parts = _check_partitions(tree, parts, cover=False)
    return sum(len(tree.nodes[n].tokens) for P in parts for n in P.nodes)


def naive_partition_tokens(tree: TrajectoryTree, parts: Sequence[Partition]) -> int:
    """Tokens processed when each partition re-prepends (recomputes) its ancestors instead of a gateway."""
    parts = _check_partitions(tree, parts, cover=False)
    return sum(len(tree.nodes[n].tokens) for P in parts for n in P.nodes + tree.ancestors(P.root, False))


def accumulate_gateway_grads(grads: Sequence[Tensor | None], like: Tensor,
                             acc_dtype: torch.dtype | None = None) -> Tensor:
    """Sum the gradients several children relay to one gateway tensor in ``acc_dtype`` (default: fp32 or wider
    than ``like``) and round once to ``like``'s dtype. Summing bf16 gradients in bf16 rounds after every child."""
    V.tensor("like", like, dtype="float", finite=False)
    acc_dtype = torch.promote_types(like.dtype, torch.float32) if acc_dtype is None else acc_dtype
    acc = torch.zeros_like(like, dtype=acc_dtype)
    for g in V.sequence("grads", grads):
        if g is not None:
            acc += g.to(acc_dtype)
    return acc.to(like.dtype)


def _notify(on_event: Callable[[str, int], None] | None, what: str, pid: int) -> None:
    if on_event is not None:
        on_event(what, pid)


def partitioned_backward(model: TreeLM, tree: TrajectoryTree, parts: Sequence[Partition], weights: np.ndarray,
                         ser: Serialized | None = None, *, acc_dtype: torch.dtype | None = None,
                         on_event: Callable[[str, int], None] | None = None) -> dict:
    """Forward+backward of L_tree partition by partition, depth-first, accumulating parameter gradients.

    Each child partition gets the gateway (ancestor K/V per attention layer, SSM end state and conv context of the
    cut node's parent) as detached leaves. After the child's backward, its leaves' gradients are relayed into
    accumulators (``acc_dtype``, default fp32 or wider) over the parent's K/V, states and received gateway, rounded
    once to the model dtype, and the parent runs one ``backward([loss, *sources], [1, *relayed])``.
    ``on_event(what, pid)`` is called with ``"forward"`` / ``"forward_done"`` / ``"backward_done"`` around each
    partition (for outside measurements). Returns the loss, the tokens it fed the model and the gateway bytes.
    """
    _model_tree(model, tree)
    ser = _tree_ser(tree, ser)
    parts = _check_partitions(tree, parts, cover=True)
    w_np = _weights(weights, len(ser))
    V.optional(V.function, "on_event", on_event)
    dtype = next(model.parameters()).dtype
    acc_dtype = torch.promote_types(dtype, torch.float32) if acc_dtype is None else acc_dtype
    w_all = torch.as_tensor(w_np, dtype=dtype)
    tok_all = torch.as_tensor(ser.tokens)
    ssm_layers = [i for i, b in enumerate(model.blocks) if b.is_ssm]
    stats: dict = {"loss": 0.0, "tokens": 0, "gateway_bytes": {}}

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
        _notify(on_event, "forward", P.id)
        logits, cache = model(idx, pos, mask, seg, gw)
        # the labels this partition owns: every token whose predicting position lies in it
        owned = np.nonzero(np.isin(ser.pred, gidx) & (ser.pred >= 0))[0]
        lp = logits[0].log_softmax(-1)[[local[int(p)] for p in ser.pred[owned]], tok_all[owned]]
        loss = -(w_all[owned] * lp).sum()
        del logits
        _notify(on_event, "forward_done", P.id)
        stats["tokens"] += T
        in_P = set(P.nodes)
        acc_kv = {li: [torch.zeros(t.shape, dtype=acc_dtype) for t in kv] for li, kv in cache["kv"].items()}
        acc_gw = {li: [torch.zeros(t.shape, dtype=acc_dtype) for t in kv] for li, kv in gw.kv.items()} if gw else {}
        acc_ssm: dict[tuple[int, int], list[Tensor]] = {}
        for cid in P.children:
            C = parts[cid]
            pn = int(tree.nodes[C.root].parent)  # the cut node's parent lives in P
            anc = [n for n in tree.ancestors(pn) if n in in_P]
            aidx = torch.as_tensor(np.concatenate([np.arange(local[ser.start[n]], local[ser.end[n] - 1] + 1)
                                                   for n in anc]))
            kv = {}
            for li, (k, v) in cache["kv"].items():
                pk = gw.kv.get(li) if gw is not None else None
                kk, vv = k[:, :, aidx].detach(), v[:, :, aidx].detach()
                if pk is not None:
                    kk, vv = torch.cat([pk[0].detach(), kk], 2), torch.cat([pk[1].detach(), vv], 2)
                kv[li] = (kk.requires_grad_(True), vv.requires_grad_(True))
            si = P.nodes.index(pn)
            ssm = {li: (cache["ssm"][li]["state"][si].detach().requires_grad_(True),
                        cache["ssm"][li]["ctx"][si].detach().requires_grad_(True)) for li in ssm_layers}
            child_gw = Gateway(kv, ssm)
            stats["gateway_bytes"][cid] = child_gw.nbytes()
            run(C, child_gw)
            # relay the child's gateway gradients into the accumulators (the ancestors' K/V: own part by index)
            for li, leaves in kv.items():
                for j, leaf in enumerate(leaves):
                    if leaf.grad is not None:
                        g = leaf.grad.to(acc_dtype)
                        if G:
                            acc_gw[li][j] += g[:, :, :G]
                        acc_kv[li][j].index_add_(2, aidx, g[:, :, G:])
            for li, leaves in ssm.items():
                acc = acc_ssm.setdefault((li, si), [torch.zeros(t.shape, dtype=acc_dtype) for t in leaves])
                for a, leaf in zip(acc, leaves):
                    if leaf.grad is not None:
                        a += leaf.grad.to(acc_dtype)
            del child_gw, kv, ssm
        outs, grads = [loss], [torch.ones_like(loss)]
        if P.children:
            for li, (k, v) in cache["kv"].items():
                outs += [k, v]
                grads += [a.to(dtype) for a in acc_kv[li]]
            for (li, si), acc in acc_ssm.items():
                outs += [cache["ssm"][li]["state"][si], cache["ssm"][li]["ctx"][si]]
                grads += [a.to(dtype) for a in acc]
            for li, leaves in (gw.kv.items() if gw is not None else []):
                outs += list(leaves)
                grads += [a.to(dtype) for a in acc_gw[li]]
        del cache, acc_kv, acc_gw, acc_ssm
        torch.autograd.backward(outs, grads)
        del outs, grads
        _notify(on_event, "backward_done", P.id)
        stats["loss"] += float(loss.detach())

    run(parts[0], None)
    return stats


def naive_partitioned_backward(model: TreeLM, tree: TrajectoryTree, parts: Sequence[Partition],
                               weights: np.ndarray, ser: Serialized | None = None, *,
                               on_event: Callable[[str, int], None] | None = None) -> dict:
    """The naive baseline of partitioning: each partition re-prepends its ancestors' tokens and recomputes them
    (no gateway), then runs its own forward+backward; partitions run one at a time. The gradients equal the full
    tree's (each partition's loss covers its own nodes' tokens, ancestors weighted 0); the tokens do not."""
    _model_tree(model, tree)
    ser = _tree_ser(tree, ser)
    parts = _check_partitions(tree, parts, cover=True)
    w_np = _weights(weights, len(ser))
    V.optional(V.function, "on_event", on_event)
    stats: dict = {"loss": 0.0, "tokens": 0}
    for P in parts:
        nodes = tree.ancestors(P.root, include_self=False) + list(P.nodes)
        remap = {n: i for i, n in enumerate(nodes)}
        sub = TrajectoryTree([Node(list(tree.nodes[n].tokens), None if i == 0 else remap[int(tree.nodes[n].parent)])
                              for i, n in enumerate(nodes)])
        sser = serialize(sub)
        w_sub = np.zeros(len(sser))
        for n in P.nodes:
            w_sub[sser.start[remap[n]]:sser.end[remap[n]]] = w_np[ser.start[n]:ser.end[n]]
        _notify(on_event, "forward", P.id)
        loss = tree_loss(model, sub, w_sub, sser)
        _notify(on_event, "forward_done", P.id)
        loss.backward()
        _notify(on_event, "backward_done", P.id)
        stats["tokens"] += sub.n_tree
        stats["loss"] += float(loss.detach())
    return stats


def chain_bound(parts: Sequence[Partition], own_bytes: dict[int, int]) -> int:
    """The largest sum of ``own_bytes[pid]`` along a root-to-leaf chain of the partition tree."""
    parts = V.sequence("parts", parts, min_len=1, of=lambda n, x: V.instance(n, x, Partition))
    V.instance("own_bytes", own_bytes, dict)
    missing = [P.id for P in parts if P.id not in own_bytes]
    if missing:
        raise ValueError(f"own_bytes has no entry for partitions {missing[:5]}")
    own = {P.id: V.integer(f"own_bytes[{P.id}]", own_bytes[P.id], min=0) for P in parts}  # bytes: whole, >= 0

    def chain(pid: int) -> int:
        return own[pid] + max((chain(c) for c in parts[pid].children), default=0)

    return chain(0)


# ----------------------------------------------------------------------------------------------------------------
# Measurements from outside the method: tokens the model embeds, memory that is really held, interleaved timing
# ----------------------------------------------------------------------------------------------------------------
class count_tokens:
    """Context manager counting the tokens a :class:`TreeLM` actually embeds (a forward pre-hook on its token
    embedding), whatever code calls it: ``with count_tokens(model) as c: ...; c.tokens, c.calls``."""

    def __init__(self, model: TreeLM) -> None:
        self.model = V.instance("model", model, TreeLM)
        self.tokens = 0
        self.calls = 0

    def _hook(self, module: nn.Module, args: tuple) -> None:
        self.tokens += int(args[0].numel())
        self.calls += 1

    def __enter__(self) -> count_tokens:
        self._handle = self.model.tok.register_forward_pre_hook(self._hook)
        return self

    def __exit__(self, *exc: object) -> None:
        self._handle.remove()


class _MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]


def _libc_mallinfo2() -> Callable[[], _MallInfo2] | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        fn = libc.mallinfo2
    except (OSError, AttributeError):
        return None
    fn.restype = _MallInfo2
    return fn


_MALLINFO2 = _libc_mallinfo2()


def heap_in_use() -> int | None:
    """Bytes of the C heap in use (glibc ``mallinfo2``: arena chunks in use + mmapped chunks), which holds every
    torch CPU tensor; ``None`` where glibc's ``mallinfo2`` is not available (macOS, musl, glibc < 2.33)."""
    if _MALLINFO2 is None:
        return None
    m = _MALLINFO2()
    return int(m.uordblks + m.hblkhd)


class _Saved:
    """What autograd holds instead of a saved tensor while :class:`track_memory` is active."""

    __slots__ = ("t", "__weakref__")

    def __init__(self, t: Tensor) -> None:
        self.t = t


class track_memory:
    """Context manager measuring the memory autograd really holds, independently of the code being measured.

    * ``saved_live`` / ``saved_peak``: bytes of the **distinct storages** kept alive by tensors saved for backward
      (parameters excluded). Each saved tensor is packed into a holder; a finalizer fires when autograd drops the
      holder (after that node's backward, or when the graph is freed), and a storage counts while any holder of
      it is alive.
    * ``heap_peak``: the C heap in use (:func:`heap_in_use`) sampled at every pack, unpack and :meth:`mark`, minus
      the heap at entry (``None`` without ``mallinfo2``). Transients inside a single op are not sampled;
      ``heap_every=k`` samples only every k-th pack/unpack (a sample costs ~0.1 ms; :meth:`mark` always samples).
    """

    def __init__(self, model: nn.Module | None = None, heap_every: int = 1) -> None:
        V.optional(V.instance, "model", model, nn.Module)
        self.heap_every = V.integer("heap_every", heap_every, min=1)
        self._events = 0
        self.skip = {p.untyped_storage().data_ptr() for p in model.parameters()} if model is not None else set()
        self._refs: dict[int, int] = {}
        self._size: dict[int, int] = {}
        self.saved_live = 0
        self.saved_peak = 0
        self.packed = 0
        self.heap0 = None
        self.heap_peak = None

    def _release(self, key: int) -> None:
        self._refs[key] -= 1
        if self._refs[key] == 0:
            del self._refs[key]
            self.saved_live -= self._size.pop(key)

    def mark(self) -> None:
        """Sample the heap now."""
        if self.heap0 is not None:
            h = heap_in_use() - self.heap0
            self.heap_peak = max(self.heap_peak, h)

    def _pack(self, t: Tensor) -> object:
        st = t.untyped_storage()
        key = st.data_ptr()
        if key in self.skip or st.nbytes() == 0:
            return t
        h = _Saved(t.detach())  # detached: holding an output with its grad_fn would make a reference cycle
        if key not in self._refs:
            self._refs[key] = 0
            self._size[key] = st.nbytes()
            self.saved_live += st.nbytes()
            self.saved_peak = max(self.saved_peak, self.saved_live)
        self._refs[key] += 1
        self.packed += 1
        weakref.finalize(h, self._release, key)
        self._tick()
        return h

    def _tick(self) -> None:
        self._events += 1
        if self._events % self.heap_every == 0:
            self.mark()

    def _unpack(self, h: object) -> Tensor:
        self._tick()
        return h.t if isinstance(h, _Saved) else h

    def __enter__(self) -> track_memory:
        self.heap0 = heap_in_use()
        self.heap_peak = 0 if self.heap0 is not None else None
        self._ctx = torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack)
        self._ctx.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.mark()
        self._ctx.__exit__(*exc)


def interleaved_times(fns: dict[str, Callable[[], object]], repeats: int, warmup: int = 1
                      ) -> dict[str, dict[str, np.ndarray]]:
    """Time several functions in one run: ``warmup`` untimed calls each, then ``repeats`` rounds in which every
    function runs once (the order rotating each round, so a burst of load hits all sides alike).

    Returns ``{"cpu": {name: seconds per round}, "wall": {...}}`` (process CPU time and wall time)."""
    V.instance("fns", fns, dict)
    if not fns:
        raise ValueError("fns must name at least one function")
    for k, f in fns.items():
        V.function(f"fns[{k!r}]", f)
    repeats = V.integer("repeats", repeats, min=1)
    warmup = V.integer("warmup", warmup, min=0)
    names = list(fns)
    for _ in range(warmup):
        for k in names:
            fns[k]()
    cpu = {k: np.zeros(repeats) for k in names}
    wall = {k: np.zeros(repeats) for k in names}
    for r in range(repeats):
        for k in names[r % len(names):] + names[:r % len(names)]:
            c, w = time.process_time(), time.perf_counter()
            fns[k]()
            cpu[k][r] = time.process_time() - c
            wall[k][r] = time.perf_counter() - w
    return {"cpu": cpu, "wall": wall}


def round_ratio(num: Sequence[float], den: Sequence[float]) -> tuple[float, float, float]:
    """Median and interquartile range ``(median, q25, q75)`` of the per-round ratios ``num[r] / den[r]`` of two
    interleaved timings (a speedup of ``den``'s side over ``num``'s when > 1)."""
    num, den = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    if num.ndim != 1 or num.shape != den.shape or len(num) == 0:
        raise ValueError(f"num and den must be non-empty 1-d sequences of equal length, got {num.shape} and "
                         f"{den.shape}")
    if not (np.all(np.isfinite(num)) and np.all(den > 0) and np.all(np.isfinite(den))):
        raise ValueError("num must be finite and den finite and > 0")
    r = num / den
    return float(np.median(r)), float(np.percentile(r, 25)), float(np.percentile(r, 75))


def rel_spread(times: Sequence[float]) -> float:
    """Relative spread of repeated timings: interquartile range over median (0 = perfectly steady), the rule
    :meth:`helpers.repro.Timings.spread` uses, for a series that is not one benchmarked function (e.g. the
    round-by-round faster of two baselines)."""
    t = np.asarray(times, dtype=float)
    if t.ndim != 1 or len(t) == 0 or not np.all(np.isfinite(t)) or np.any(t < 0):
        raise ValueError(f"times must be a non-empty 1-d sequence of finite seconds >= 0, got shape {t.shape}")
    q1, q2, q3 = np.percentile(t, [25, 50, 75])
    return float((q3 - q1) / max(q2, 1e-12))


def packed_inputs(paths: Sequence[Tensor], masks: Sequence[Tensor], K: int | None = None
                  ) -> tuple[Tensor, Tensor, NodeBlocks, Tensor, Tensor]:
    """Sequence packing, the usual baseline: the K branches concatenated into one sequence of N_flat tokens with
    per-document causal attention (one :class:`NodeBlocks` block per branch, so no pair across documents is
    computed) and positions restarting at 0 in each document. ``paths[i]`` is a (1, L_i) token tensor and
    ``masks[i]`` its (L_i,) loss mask. Returns ``(X, pos, blocks, targets, weights)`` for :func:`packed_loss`:
    position t of a document predicts its token t + 1 with weight ``mask[t + 1] / K``; a document's last position
    predicts nothing (weight 0)."""
    if len(paths) == 0 or len(paths) != len(masks):
        raise ValueError(f"paths and masks must be non-empty and of equal length, got {len(paths)} and {len(masks)}")
    K = len(paths) if K is None else V.integer("K", K, min=1)
    starts, ends, keys, bmasks, tgts, ws, poss = [], [], [], [], [], [], []
    i = 0
    for p, m in zip(paths, masks):
        p = torch.as_tensor(p).reshape(-1)
        m = torch.as_tensor(m).reshape(-1)
        m = m if m.is_floating_point() else m.to(torch.float32)  # weights in the masks' precision
        L = len(p)
        if L == 0 or len(m) != L:
            raise ValueError(f"every path needs tokens and a loss mask of its length, got {L} and {len(m)}")
        starts.append(i)
        ends.append(i + L)
        keys.append(torch.arange(i, i + L))
        bmasks.append(torch.ones(L, L, dtype=torch.bool).tril())
        tgts.append(torch.cat([p[1:], p[:1]]))  # the last target is a placeholder with weight 0
        ws.append(torch.cat([m[1:] / K, m.new_zeros(1)]))
        poss.append(torch.arange(L))
        i += L
    X = torch.cat([torch.as_tensor(p).reshape(-1) for p in paths])[None]
    return X, torch.cat(poss), NodeBlocks(starts, ends, keys, bmasks), torch.cat(tgts), torch.cat(ws)


def packed_loss(model: nn.Module, X: Tensor, pos: Tensor, blocks: NodeBlocks, targets: Tensor, weights: Tensor,
                reset_state: bool = True) -> Tensor:
    """The loss of packed branches in one forward call (see :func:`packed_inputs`): the weighted negative
    log-likelihood summed over every document, equal to the average of the per-branch losses.

    SSM layers restart at every document boundary (zero state, zero conv context: each document is a segment
    with no parent); ``reset_state=False`` lets the state run on across documents (the leak packing must avoid)."""
    V.instance("blocks", blocks, NodeBlocks)
    if not isinstance(X, Tensor) or X.dim() != 2 or X.shape[0] != 1:
        raise ValueError(f"X must be a (1, N) token tensor from packed_inputs, got {getattr(X, 'shape', X)}")
    if not blocks.start or blocks.start[0] != 0 or blocks.end[-1] != X.shape[1] or \
            any(e != s for e, s in zip(blocks.end[:-1], blocks.start[1:])):
        raise ValueError("blocks must tile X's positions document by document (packed_inputs' layout)")
    n = len(blocks.start)
    seg = Segments(list(blocks.start), list(blocks.end), [-1] * n) if reset_state else \
        Segments([0], [X.shape[1]], [-1])
    logits, _ = model(X, pos, blocks, seg)
    lp = logits[0].log_softmax(-1).gather(-1, targets[:, None])[:, 0]
    return -(weights * lp).sum()


# ----------------------------------------------------------------------------------------------------------------
# Timing: the training steps a benchmark compares, and the FLOP model of their ratio
# ----------------------------------------------------------------------------------------------------------------
def attention_pairs(tree: TrajectoryTree, ser: Serialized | None = None) -> tuple[int, int, int]:
    """Query-key pairs per attention layer: ``(flat, tree, dense)`` = linearized branches
    ``sum_k L_k (L_k + 1) / 2``, the tree's exact pairs ``sum_t (pos_t + 1)`` and a dense N_tree x N_tree mask."""
    V.instance("tree", tree, TrajectoryTree)
    ser = _tree_ser(tree, ser)
    flat = sum(len(p) * (len(p) + 1) // 2 for p in tree.path_tokens())
    return flat, int((np.asarray(ser.pos) + 1).sum()), len(ser) ** 2


def flop_speedup(n_flat: float, n_tree: float, pairs_flat: float, pairs_tree: float, d_model: int,
                 n_layer: int, vocab: int) -> float:
    """The speedup a FLOP count predicts: per token the linear layers (``12 d^2`` per layer: q, k, v, output and
    a 4x MLP) and the head (``d * vocab``), per query-key pair ``2 d`` per layer (q.k and the weighted sum of v);
    forward and backward scale alike, so only the ratio flat / tree matters. Equals ``n_flat / n_tree`` when the
    pairs are negligible."""
    for name, x in (("n_flat", n_flat), ("n_tree", n_tree), ("pairs_flat", pairs_flat),
                    ("pairs_tree", pairs_tree)):
        V.number(name, x, min=0)
    if n_tree <= 0:
        raise ValueError(f"n_tree must be > 0, got {n_tree}")
    d = V.integer("d_model", d_model, min=1)
    layers = V.integer("n_layer", n_layer, min=1)
    vocab = V.integer("vocab", vocab, min=1)
    a_tok = layers * 12 * d ** 2 + d * vocab
    b_pair = layers * 2 * d
    return float((a_tok * n_flat + b_pair * pairs_flat) / (a_tok * n_tree + b_pair * pairs_tree))


def step_functions(model: TreeLM, tree: TrajectoryTree, opt: torch.optim.Optimizer,
                   sides: Sequence[str] = ("linear", "packed", "blocks")) -> dict[str, Callable[[], Tensor]]:
    """One optimizer step (zero_grad, forward, backward, step) per side, as zero-argument callables for
    :func:`helpers.repro.benchmark`; each returns its loss (SFT, summed over the loss mask, averaged over
    branches), and all sides compute the same loss:

    * ``"linear"``: each branch its own causal call (micro-batches, gradients accumulated);
    * ``"padded"``: the K branches as one right-padded batch (pads weigh 0);
    * ``"packed"``: sequence packing (:func:`packed_inputs`): one call, per-document attention, SSM state reset;
    * ``"blocks"``: Tree Training with node-block attention; ``"dense"``: with the dense N x N tree mask.
    """
    V.instance("model", model, TreeLM)
    V.instance("tree", tree, TrajectoryTree)
    _model_tree(model, tree)
    known = ("linear", "padded", "packed", "blocks", "dense")
    sides = list(V.sequence("sides", sides, of=lambda n, x: V.one_of(n, x, known), min_len=1))
    if len(set(sides)) != len(sides):
        raise ValueError(f"sides must be distinct, got {sides}")
    dtype = next(model.parameters()).dtype
    ser = serialize(tree)
    w = torch.as_tensor(token_weights(tree, ser), dtype=dtype)
    paths = [torch.tensor(p)[None] for p in tree.path_tokens()]
    masks = [torch.as_tensor(ser.loss_mask[ix], dtype=dtype) for ix in path_token_index(tree, ser)]
    K = len(paths)

    def step(loss_fn: Callable[[], Tensor]) -> Tensor:
        opt.zero_grad(set_to_none=True)
        loss = loss_fn()
        if loss.requires_grad:
            loss.backward()
        opt.step()
        return loss.detach()

    def linear() -> Tensor:
        total = torch.zeros((), dtype=dtype)
        for idx, m in zip(paths, masks):  # gradient accumulation over the K micro-batches
            logits, _ = model(idx, torch.arange(idx.shape[1]))
            lp = logits[0, :-1].log_softmax(-1).gather(-1, idx[0, 1:, None])[:, 0]
            loss = -(m[1:] * lp).sum() / K
            loss.backward()
            total = total + loss.detach()
        return total

    fns: dict[str, Callable[[], Tensor]] = {}
    for side in sides:
        if side == "linear":
            fns[side] = lambda: step(linear)
        elif side == "padded":
            L = max(p.shape[1] for p in paths)
            X = torch.zeros(K, L, dtype=torch.long)
            M = torch.zeros(K, L, dtype=dtype)
            for i, (p, m) in enumerate(zip(paths, masks)):
                X[i, :p.shape[1]], M[i, :p.shape[1]] = p[0], m

            def padded(X: Tensor = X, M: Tensor = M) -> Tensor:
                logits, _ = model(X, torch.arange(X.shape[1]))
                lp = logits[:, :-1].log_softmax(-1).gather(-1, X[:, 1:, None])[..., 0]
                return -(M[:, 1:] * lp).sum() / K

            fns[side] = lambda f=padded: step(f)
        elif side == "packed":
            X, pos, blocks, tgt, pw = packed_inputs(paths, masks, K)
            pw = pw.to(dtype)
            fns[side] = lambda a=(X, pos, blocks, tgt, pw): step(lambda: packed_loss(model, *a))
        else:
            attn = node_blocks(tree, ser) if side == "blocks" else tree_mask_horizon(ser.horizon)
            fns[side] = lambda a=attn: step(lambda: tree_loss(model, tree, w, ser, mask=a))
    return fns


def checkpoint_config(name: str) -> dict:
    """The config of the chapter's stored data, by name. ``"sweep"``: the width sweep
    (``data/02_tree_training/make_sweep.py``) on the notebook's claim tree of each seed (a 384-token prompt, two
    levels of 4 children, segments of 32-96 tokens), 1 and 2 attention layers, ``repeats`` interleaved rounds."""
    V.one_of("name", name, ("sweep",))
    return dict(seeds=[0, 1, 2], d_models=[128, 256, 512, 1024], layers=[1, 2], n_head=4, vocab=64, root_len=384,
                branching=[4, 4], seg_len=[32, 96], repeats=3, init_std=0.02, lr=1e-4)


def claim_tree(cfg: dict, seed: int) -> TrajectoryTree:
    """The chapter's claim tree of ``seed`` under config ``cfg`` (keys ``root_len``, ``branching`` (equal
    factors), ``seg_len``, ``vocab``): the notebook's ``speed_tree(seed, b)``, drawn from stream ``(seed, 10 + b)``."""
    from helpers import repro

    V.instance("cfg", cfg, dict)
    missing = [k for k in ("root_len", "branching", "seg_len", "vocab") if k not in cfg]
    if missing:
        raise ValueError(f"cfg lacks {missing}")
    b = V.sequence("cfg['branching']", cfg["branching"], of=lambda n, x: V.integer(n, x, min=1), min_len=1)
    return random_tree(repro.rng(V.seed("seed", seed), 10 + int(b[0])), cfg["root_len"], list(b),
                       tuple(cfg["seg_len"]), cfg["vocab"])


def width_sweep(cfg: dict, sides: Sequence[str] = ("linear", "packed", "blocks"),
                progress: Callable[[dict], None] | None = None) -> tuple[list[dict], dict[str, list]]:
    """Time one training step of every side on each seed's claim tree (:func:`claim_tree`) for every depth in
    ``cfg["layers"]`` and width in ``cfg["d_models"]`` (attention-only :class:`TreeLM`, ``n_head`` heads,
    initialization from ``torch.manual_seed(seed)``, AdamW at ``lr``), in ``repeats`` interleaved rounds after one
    warm-up (:func:`helpers.repro.benchmark`, process CPU time and wall time).

    Returns one row per configuration (sizes, the ideal, the FLOP model, per side the median CPU and wall seconds
    and the spread, the load average before and after) and, per configuration ``seed<S>_L<layers>_d<d>``, the
    per-round seconds as nested lists of shape ``(sides, 2, repeats)`` (clocks: CPU, wall; plain floats, for a JSON
data file). ``progress(row)`` sees each row."""
    import os

    from helpers import repro

    V.instance("cfg", cfg, dict)
    missing = [k for k in ("seeds", "d_models", "layers", "n_head", "repeats", "init_std", "lr") if k not in cfg]
    if missing:
        raise ValueError(f"cfg lacks {missing}")
    sides = list(sides)
    rows, rounds = [], {}
    for seed in cfg["seeds"]:
        tree = claim_tree(cfg, seed)
        ser = serialize(tree)
        pf, pt, _ = attention_pairs(tree, ser)
        for layers in cfg["layers"]:
            for d in cfg["d_models"]:
                torch.manual_seed(seed)
                model = TreeLM(TreeLMConfig(vocab_size=cfg["vocab"], n_layer=layers, n_head=cfg["n_head"],
                                            d_model=d, init_std=cfg["init_std"]))
                opt = torch.optim.AdamW(model.parameters(), lr=cfg["lr"])
                load = os.getloadavg()[0]
                T = repro.benchmark(step_functions(model, tree, opt, sides), cfg["repeats"], warmup=1)
                rounds[f"seed{seed}_L{layers}_d{d}"] = np.stack(
                    [[T.cpu[s], T.wall[s]] for s in sides]).astype(float).tolist()
                row = dict(seed=seed, layers=layers, d_model=d, K=len(tree.leaves()), N_tree=tree.n_tree,
                           N_flat=tree.n_flat, ideal=tree.ideal_speedup, pairs_flat=pf, pairs_tree=pt,
                           flop_model=flop_speedup(tree.n_flat, tree.n_tree, pf, pt, d, layers, cfg["vocab"]),
                           load_start=load, load_end=os.getloadavg()[0])
                for s in sides:
                    row[f"t_{s}"] = T.median(s)
                    row[f"wall_{s}"] = T.median(s, "wall")
                    row[f"spread_{s}"] = T.spread(s)
                rows.append(row)
                if progress is not None:
                    progress(row)
    return rows, rounds
