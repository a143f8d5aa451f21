# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Depth-first search inside a two-layer transformer
#
# Path-finding on a directed graph is a clean stand-in for multi-step reasoning: to get from a source to a
# target, a model writes a **depth-first search trace**, stepping to an unvisited child of the current node or
# backtracking to its parent. The paper asks what a transformer must look like to write such traces. Its answers:
# a **single layer needs size Ω(N²)** on dense graphs even for the core step (pick an unvisited child), while
# **two layers do full DFS with O(N log N) size**; **L layers buy a look-ahead horizon 2^(L−3)**, so depth makes
# search exponentially more efficient; and two-layer transformers **learn** DFS from curated traces and generalise
# to unseen graphs. This chapter builds the constructions with weights set by hand (real attention in torch),
# measures how wide each must be as N grows, simulates the deeper look-ahead, and trains small 1- and 2-layer
# transformers side by side.
#
# | | paper | this notebook |
# |---|---|---|
# | one- vs two-layer size | proofs (Ω(N²) vs O(N log N)) | hand-built models; width needed for 95 % child-selection accuracy, N = 8 … 64 |
# | L-layer look-ahead | a construction with horizon 2^(L−3) | its algorithmic simulation on sparse random graphs |
# | learning | gradient-flow analysis, two-layer model | Adam on curated DFS states, 1- vs 2-layer at equal parameter count, ~28 k parameters |
# | data | synthetic graphs | synthetic graphs (G(N, p) and fixed out-degree), generated here |
# | hardware | not stated | 2 CPU cores, ≤ 5 min |
#
# :::{note}
# **What is reconstructed.** The paper's text was not available to us; only its abstract. The trace format, the
# two-layer construction (a *visited* head and a *previous-token* head in layer 1, a *child* head and a *parent*
# head in layer 2), the one-layer counterpart, the look-ahead rule and the training setup are **our
# reconstruction** from the abstract and prior work on graph search in transformers (ALPINE; Saparov et al. 2025;
# Yang et al. 2026). The width measurements illustrate the Ω(N²)-vs-O(N log N) separation for *these*
# constructions; they are not a proof of the lower bound.
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
Ns = [8, 16, 32, 64]  # graph sizes for the width measurement (dense G(N, 1/2))
n_states = 100  # DFS states per (N, width)
dims_two = [4, 8, 12, 16, 24, 32, 48, 64]  # widths tried for the two-layer construction
dims_one = [8, 16, 32, 64, 128, 256, 512]  # widths tried for the one-layer construction
N_look, look_pairs = 64, 300  # look-ahead experiment: graph size, (s, t) pairs
# trained models: node vocabulary (graphs of 4-6 nodes for training, 8 for the larger
# test)
V = 8
train_graphs, steps, batch_size = 2000, 3000, 64

# %% tags=["hide-input"]
import time

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from helpers import claims, nn, plotting, repro, train
from helpers import transformer_dfs as dfs

if quick:
    Ns, n_states, dims_one = [8, 16], 30, [8, 16, 32, 64, 128]
    N_look, look_pairs, train_graphs, steps = 24, 40, 200, 60

env = repro.setup(seed)
# every matrix here is tiny: one thread is fastest, and fair to a shared machine
torch.set_num_threads(1)
plotting.use_style()
rec = claims.ClaimsRecord(
    "12_transformer_dfs",
    dict(
        quick=quick,
        seed=seed,
        Ns=Ns,
        n_states=n_states,
        dims_two=dims_two,
        dims_one=dims_one,
        N_look=N_look,
        look_pairs=look_pairs,
        V=V,
        train_graphs=train_graphs,
        steps=steps,
        batch_size=batch_size,
    ),
)
print(env)

# %% [markdown]
# ## 1. The task and the DFS trace
#
# A graph is given as edge tokens `(a, b)`. The trace starts at the source `s`; each step emits the
# **largest-index unvisited child** of the current node, or, when it has none, **backtracks** to the node's DFS
# parent. Everything the model needs is in the trace itself: the current node is the last token, the visited set
# is every emitted token, and the parent of `u` is the token just before `u`'s first occurrence.

# %%
rng = repro.rng(seed, 1)
adj = dfs.random_digraph(8, rng, out_degree=(1, 2))
edges = dfs.edge_list(adj)
print("edges:", [tuple(e) for e in edges.tolist()])
print("DFS trace 0 -> 7:", dfs.dfs_trace(8, edges, 0, 7))
u, visited, parent = dfs.dfs_state(dfs.dfs_trace(8, edges, 0, 7)[:5])
print(f"state after 5 tokens: current {u}, visited {sorted(visited)}, parents {parent}")

# %% [markdown]
# The reference generator must agree with an independent DFS: networkx's `dfs_labeled_edges`, with children
# offered largest-index first, gives the same walk (forward edges = steps down, reverse edges = backtracks).

# %%
mismatch = 0
for i in range(200):
    g = repro.rng(seed, 2, i)
    n = int(g.integers(2, 16))
    a = dfs.random_digraph(n, g, p=float(g.uniform(0.05, 0.6)))
    e = dfs.edge_list(a)
    s_, t_ = int(g.integers(n)), int(g.integers(n))
    mismatch += dfs.dfs_trace(n, e, s_, t_) != dfs.networkx_dfs_walk(n, e, s_, t_)
print("traces that differ from networkx's DFS:", mismatch, "of 200")

# %% [markdown]
# ## 2. Two layers, weights set by hand
#
# Every token is a vector in a residual stream with named slots: edge tokens carry `e_a` (src) and `e_b` (dst),
# trace tokens carry `e_v` (node) and their position. Node embeddings are either one-hot (`d = N`, exact) or random
# signs `e_v ∈ {±1/√d}^d` with `d = O(log N)`, nearly orthogonal. One DFS step is then:
#
# * **Layer 1, visited head.** Each edge `(a, b)` attends to trace tokens with score `β₁⟨e_b, e_v⟩`, and to a
#   sink with score `¾β₁`. The value is 1 on trace tokens, so the head writes `≈ 1[b visited]`; an MLP thresholds
#   it to a clean flag `f_ab ∈ {0, 1}`. *This is what one layer cannot do: the edge has to look at the trace.*
# * **Layer 1, previous-token head.** Trace token `j` attends to position `j−1` (score `−c (i − (j−1))²`, bilinear
#   in `(pos, pos²)`) and copies its node into a `prev` slot.
# * **Layer 2, child head.** The current node `u` attends to edges with score
#   `β₂(⟨e_u, e_a⟩ − 2 f_ab) + τ·b/N`, and to a sink with `¾β₂`: the largest unvisited child wins (τ/N = 20 makes
#   the tie-break hard), else the sink (value 0).
# * **Layer 2, parent head.** `u` attends to its own first occurrence in the trace (score `β₃⟨e_u, e_v⟩ − λ·pos`)
#   and adds `¼·prev`, the parent. A found child (weight ≈ 1) outvotes it; otherwise the parent wins.
# * **Readout** `logits = E·out`, plus a constant `⅛` for STOP (the search is exhausted).
#
# The size is `N·d` for the embeddings plus `O(d)` nonzero weights per matrix: `O(N log N)` at `d = O(log N)`.
# The key lines of the forward pass (`helpers/transformer_dfs.py`, `TwoLayerDFS.forward`):
#
# ```python
# h_vis, _ = self.visited(x, x)       # layer 1: edges look at the trace
# h_prev, _ = self.previous(x, x)     # layer 1: trace token j copies token j-1
# x = x + h_vis + h_prev
# x = x + relu(x @ W1 + b1) @ W2      # MLP: threshold the visited flag
# q = x[-1:]                          # the current node
# y = q + self.child(q, x)[0] + self.parent(q, x)[0]
# logits = E @ y[out], STOP = 1/8
# ```
#
# Here is one head's weights, written exactly as in the module, so you can see nothing is hidden:

# %%
model = dfs.TwoLayerDFS(dfs.one_hot_embeddings(8))
S = model.slots
print(
    "residual stream width:",
    S.width,
    "  slots:",
    {k: (v.start, v.stop) for k, v in S.idx.items()},
)
print(
    "child head, query weights on 'node':",
    model.child.wq[S["node"], :8].diag().tolist()[:3],
    "...",
)
print(
    "child head, query constant on flag / tie-break / sink:",
    model.child.wq[S["one"], 8:].tolist(),
    " keys allowed:",
    model.child.keys,
)
logits, att = model.forward(edges, dfs.dfs_trace(8, edges, 0)[:5], record=True)
print("next-token logits (nodes 0..7, STOP):", np.round(logits.numpy(), 3))

# %% [markdown]
# **Check: the one-hot construction is exact.** On random graphs of several sizes and densities, the model's move
# must equal the reference DFS move in every state, and full autoregressive rollouts must reproduce the trace.

# %%
exact_states = exact_total = rollouts_ok = rollouts = 0
for i in tqdm(range(12 if quick else 40), desc="one-hot construction"):
    g = repro.rng(seed, 3, i)
    n = int(g.choice([6, 10, 16, 24]))
    a = dfs.random_digraph(n, g, p=float(g.choice([0.15, 0.3, 0.5])))
    e = dfs.edge_list(a)
    m = dfs.TwoLayerDFS(dfs.one_hot_embeddings(n))
    for st in dfs.sample_states(a, g, 10):
        exact_total += 1
        exact_states += m.step(e, st) == dfs.next_step(a, st)
    s_, t_ = int(g.integers(n)), int(g.integers(n))
    rollouts += 1
    rollouts_ok += dfs.rollout(m, n, e, s_, t_) == dfs.dfs_trace(n, e, s_, t_)
exact_frac = exact_states / exact_total
print(
    f"one-hot: {exact_states}/{exact_total} states exact, "
    f"{rollouts_ok}/{rollouts} rollouts identical"
)

# %% [markdown]
# ## 3. How wide must each model be? One layer vs two layers
#
# **The one-layer counterpart.** In one layer no edge token can learn whether its head is visited: attention
# reads the *input* tokens only. The best a single layer can do with our building blocks is two heads at the
# current node, one averaging its children `e_b`, one averaging the visited `e_v`, and a readout of
# `children − γ·visited`. An unvisited child then scores `≈ 1/deg`, while the visited average brings cross-talk
# of size `~γ/√(k d)` from the `k` visited nodes; on dense graphs `deg ~ N/2` and `k ~ N`, so the width must grow
# like `d ~ N`, and the size `N·d ~ N²`. We tune `γ` for the one-layer model on separate calibration states at
# each `(N, d)` (a favourable baseline). Both models use random sign embeddings of width `d`; we measure the
# fraction of states where the move is an unvisited child (states where one exists) and the smallest `d` that
# reaches 95 %.

# %%
gammas = [0.5, 1.0, 2.0, 4.0]
acc_two, acc_one, gamma_used = {}, {}, {}
t0 = time.process_time()
for N in Ns:
    g = repro.rng(seed, 4, N)
    adj_N = dfs.random_digraph(N, g, p=0.5)
    test_states = dfs.sample_states(adj_N, g, n_states, kind="child")
    calib_states = dfs.sample_states(adj_N, g, n_states // 2, kind="child")
    acc_two[N] = [
        dfs.child_accuracy(
            dfs.TwoLayerDFS(dfs.sign_embeddings(N, d, g)), adj_N, test_states
        )
        for d in tqdm(dims_two, desc=f"two-layer N={N}", leave=False)
    ]
    acc_one[N], gamma_used[N] = [], []
    for d in tqdm(dims_one, desc=f"one-layer N={N}", leave=False):
        E = dfs.sign_embeddings(N, d, g)
        best = max(
            gammas,
            key=lambda gm: dfs.child_accuracy(
                dfs.OneLayerDFS(E, gamma=gm), adj_N, calib_states
            ),
        )
        gamma_used[N].append(best)
        acc_one[N].append(
            dfs.child_accuracy(dfs.OneLayerDFS(E, gamma=best), adj_N, test_states)
        )
    print(
        f"N={N:3d}  two-layer {np.round(acc_two[N], 2)}\n       one-layer "
        f"{np.round(acc_one[N], 2)}"
        f"  (gamma {gamma_used[N]})"
    )
print(f"width sweep: {time.process_time() - t0:.1f} s CPU")

width_two = [dfs.width_needed(dims_two, acc_two[N]) for N in Ns]
width_one = [dfs.width_needed(dims_one, acc_one[N]) for N in Ns]
exp_two, exp_one = dfs.fit_exponent(Ns, width_two), dfs.fit_exponent(Ns, width_one)
print("width for 95 %: two-layer", width_two, " one-layer", width_one)
print(
    f"fitted d ~ N^a: two-layer a = {exp_two:.2f}, one-layer a = {exp_one:.2f} "
    f"(size N·d ~ N^{1 + exp_two:.2f} vs N^{1 + exp_one:.2f})"
)

# %% [markdown]
# **Check: random embeddings of width `8⌈log₂N⌉` suffice for the two-layer model** (≥ 99 % valid moves, child
# and backtrack states alike).

# %%
acc_log = {}
for N in Ns:
    g = repro.rng(seed, 5, N)
    adj_N = dfs.random_digraph(N, g, p=0.5)
    d = 8 * int(np.ceil(np.log2(N)))
    acc_log[N] = dfs.child_accuracy(
        dfs.TwoLayerDFS(dfs.sign_embeddings(N, d, g)),
        adj_N,
        dfs.sample_states(adj_N, g, n_states),
    )
    print(f"N={N}: d={d}, valid moves {acc_log[N]:.3f}")

# %%
fig, ax = plt.subplots(1, 2, figsize=(10, 3.6))
for i, N in enumerate(Ns):
    ax[0].plot(
        dims_two,
        acc_two[N],
        marker="o",
        color=plotting.PALETTE[i],
        label=f"2 layers, N={N}",
    )
    ax[0].plot(
        dims_one,
        acc_one[N],
        marker="s",
        ls="--",
        color=plotting.PALETTE[i],
        label=f"1 layer, N={N}",
    )
ax[0].axhline(0.95, color="k", lw=0.8)
ax[0].set(
    xscale="log", xlabel="width d", ylabel="valid child selection", ylim=(0, 1.02)
)
ax[0].legend(fontsize=7, ncol=2)
ax[1].plot(Ns, width_two, marker="o", label=f"2 layers (d ~ N^{exp_two:.2f})")
ax[1].plot(Ns, width_one, marker="s", label=f"1 layer (d ~ N^{exp_one:.2f})")
ax[1].plot(Ns, 8 * np.ceil(np.log2(Ns)), "k:", label="8⌈log₂N⌉")
ax[1].set(xscale="log", yscale="log", xlabel="N", ylabel="width needed for 95 %")
ax[1].legend()
plt.show()

# %% [markdown]
# ## 4. Depth buys look-ahead
#
# With more layers, the model can compute, before choosing a child, whether the target is reachable from it
# through unvisited nodes: each extra layer squares the reachability relation, so `L` layers see `2^(L−3)` steps
# ahead. We simulate that rule (prefer children from which `t` is reachable within the horizon, largest index
# among them) on sparse random graphs and count the trace length until `t` is emitted. Horizon 0 is plain DFS.

# %%
horizons = [0, 1, 2, 4, 8, 16]
g = repro.rng(seed, 6)
lengths = {h: [] for h in horizons}
for _ in tqdm(range(look_pairs), desc="look-ahead"):
    a = dfs.random_digraph(N_look, g, out_degree=(1, 3))
    s_, t_ = (int(x) for x in g.choice(N_look, 2, replace=False))
    if t_ not in dfs.dfs_trace(N_look, dfs.edge_list(a), s_, t_):
        continue  # t unreachable: every horizon explores everything
    for h in horizons:
        lengths[h].append(len(dfs.lookahead_trace(a, s_, t_, h)) - 1)
mean_len = [float(np.mean(lengths[h])) for h in horizons]
boot = repro.rng(seed, 7)
ci = []
for h in horizons:
    x = np.asarray(lengths[h])
    bs = [x[boot.integers(len(x), size=len(x))].mean() for _ in range(300)]
    ci.append(np.percentile(bs, [2.5, 97.5]))
for h, m_, c in zip(horizons, mean_len, ci):
    print(
        f"horizon {h:2d} (L = {'2' if h == 0 else int(np.log2(h)) + 3}): mean "
        f"trace length {m_:.1f} "
        f"[{c[0]:.1f}, {c[1]:.1f}]"
    )
print(f"{len(lengths[0])} reachable (s, t) pairs")

# %%
fig, ax = plt.subplots(figsize=(5.5, 3.4))
ci = np.array(ci)
ax.errorbar(
    range(len(horizons)),
    mean_len,
    yerr=[np.array(mean_len) - ci[:, 0], ci[:, 1] - np.array(mean_len)],
    marker="o",
    capsize=3,
)
ax.set_xticks(
    range(len(horizons)),
    [f"h={h}\nL={'2' if h == 0 else int(np.log2(h)) + 3}" for h in horizons],
)
ax.set(
    ylabel="mean steps until t",
    title=f"DFS with look-ahead, N={N_look}, out-degree 1–3",
)
plt.show()

# %% [markdown]
# ## 5. Learning DFS: trained one-layer vs two-layer transformers
#
# Now the weights are learned. Each training example is a DFS state: the edge tokens of a random graph
# (4–6 nodes with random labels from `0..V−1`, edge tokens `(a, b)` as single tokens), then the trace so far;
# the target is the next move. The data is **curated**: each graph contributes equally many child-selection and
# backtrack states. All tokens of a state see each other (the state is re-read at every step); edge tokens get
# position 0, trace tokens positions 1, 2, …. We train the book's `helpers.nn.Transformer` with one layer and
# with two layers at (almost) equal parameter count, on the same batches, and test on **unseen graphs** of the
# same sizes and on **larger graphs** (8 nodes).

# %%
codec = dfs.TokenCodec(V)
g = repro.rng(seed, 8)
train_pool = dfs.make_state_pool(train_graphs, V, (4, 6), 0.35, g)
seen = {it["key"] for it in train_pool}
test_pool = dfs.make_state_pool(
    max(60, train_graphs // 8), V, (4, 6), 0.35, g, exclude=seen
)
big_pool = dfs.make_state_pool(
    max(60, train_graphs // 8), V, (V, V), 0.35, g, exclude=seen
)
print(
    f"{len(train_pool)} training states, {len(test_pool)} test states (unseen graphs), "
    f"{len(big_pool)} states on {V}-node graphs"
)


def batches(step: int):
    idx = repro.rng(seed, 9, step).integers(len(train_pool), size=batch_size)
    return dfs.collate([train_pool[i] for i in idx], codec)


def next_logits(model, b):
    out = model(b["ids"], mask=b["mask"], pos=b["pos"])
    # node tokens only, at the current node
    return out[torch.arange(len(b["last"])), b["last"], :V]


def loss_fn(model, b):
    return F.cross_entropy(next_logits(model, b), b["target"])


@torch.no_grad()
def evaluate(model, pool):
    b = dfs.collate(pool, codec)
    ok = next_logits(model, b).argmax(-1) == b["target"]
    return {
        "all": ok.float().mean().item(),
        "child": ok[b["is_child"]].float().mean().item(),
        "backtrack": ok[~b["is_child"]].float().mean().item(),
    }


def make_model(n_layer: int, d_model: int):
    torch.manual_seed(seed)
    return nn.Transformer(
        nn.TransformerConfig(
            vocab_size=codec.vocab_size,
            n_layer=n_layer,
            n_head=2,
            d_model=d_model,
            max_len=2 * V + 2,
            pos="learned",
        )
    )


two = make_model(2, 32)
d_one = min(
    range(32, 80, 2), key=lambda d: abs(make_model(1, d).n_params() - two.n_params())
)
one = make_model(1, d_one)
print(
    f"parameters: two-layer (d=32) {two.n_params()}, one-layer (d={d_one}) "
    f"{one.n_params()}"
)
hist = {}
for name, m in [("two-layer", two), ("one-layer", one)]:
    hist[name] = train.fit(
        m,
        loss_fn,
        batches,
        steps,
        lr=3e-3,
        warmup=max(1, steps // 15),
        weight_decay=0.01,
        seed=seed,
        eval_fn=lambda mm: {"test": evaluate(mm, test_pool)["all"]},
        eval_every=max(1, steps // 6),
        desc=name,
    )
res = {
    name: {"unseen": evaluate(m, test_pool), "larger": evaluate(m, big_pool)}
    for name, m in [("two-layer", two), ("one-layer", one)]
}
for name, r in res.items():
    print(
        f"{name:9s} unseen graphs: {r['unseen']}\n{'':9s} {V}-node graphs: "
        f"{r['larger']}"
    )

# %%
fig, ax = plt.subplots(1, 2, figsize=(10, 3.4))
for name, h in hist.items():
    ax[0].plot(h.smoothed(25), label=name)
    s_, v_ = zip(*h.evals["test"])
    ax[1].plot(s_, v_, marker="o", label=name)
ax[0].set(xlabel="step", ylabel="loss", yscale="log")
ax[1].set(xlabel="step", ylabel="next-move accuracy, unseen graphs", ylim=(0, 1.02))
ax[0].legend()
plt.show()

# %% [markdown]
# **Attention maps: trained vs constructed.** For one unseen graph and state we show, for the trained two-layer
# model, the layer-1 attention from edge tokens to trace tokens and the layer-2 attention of the current node
# over the edge tokens; next to them, the construction's *visited* head and *child* head on the same state (one-hot
# embeddings). If the trained model found the construction's mechanism, edges whose head is visited should
# attend to that node's trace token, and the current node should attend to its unvisited out-edges.

# %%
ex = next(it for it in test_pool if it["kind"] == "child" and len(it["trace"]) >= 3)
b = dfs.collate([ex], codec)
with torch.no_grad():
    _, r = two(b["ids"], mask=b["mask"], pos=b["pos"], record=True)
m_e, k_t = len(ex["edges"]), len(ex["trace"])
cons = dfs.TwoLayerDFS(dfs.one_hot_embeddings(V))
_, rc = cons.forward(ex["edges"], ex["trace"], record=True)
edge_lbl = [f"{a}→{b_}" for a, b_ in ex["edges"].tolist()]
trace_lbl = [str(v) for v in ex["trace"]]
panels = [
    (
        "trained L1 (head avg): edges → trace",
        r["attn"][0][0].mean(0)[:m_e, m_e : m_e + k_t].numpy(),
        trace_lbl,
    ),
    (
        "constructed L1 visited head",
        rc["visited"][1 : 1 + m_e, 1 + m_e :].numpy(),
        trace_lbl,
    ),
]
fig, ax = plt.subplots(1, 3, figsize=(11, 4), gridspec_kw={"width_ratios": [1, 1, 1.6]})
for a_, (title, mat, xl) in zip(ax[:2], panels):
    a_.imshow(mat, cmap="viridis", vmin=0, vmax=1, aspect="auto")
    a_.set(title=title, xticks=range(len(xl)), yticks=range(m_e))
    a_.set_xticklabels(xl)
    a_.set_yticklabels(edge_lbl, fontsize=6)
    a_.grid(False)
l2_trained = r["attn"][1][0][:, m_e + k_t - 1, :m_e].numpy()
l2_cons = rc["child"][1 : 1 + m_e].numpy()
ax[2].imshow(
    np.vstack([l2_trained, l2_cons[None]]),
    cmap="viridis",
    vmin=0,
    vmax=1,
    aspect="auto",
)
ax[2].set(
    title=f"L2: current node {ex['trace'][-1]} → edges",
    yticks=range(3),
    xticks=range(m_e),
)
ax[2].set_yticklabels(["trained head 0", "trained head 1", "constructed child"])
ax[2].set_xticklabels(edge_lbl, rotation=90, fontsize=6)
ax[2].grid(False)
plt.tight_layout()
plt.show()
print(
    "trace:",
    ex["trace"],
    " next move:",
    ex["target"],
    " trained model says:",
    int(next_logits(two, b).argmax()),
)

# %% [markdown]
# ## 6. Interaction
#
# The slider steps through the graph sizes of the width sweep: accuracy against width for both constructions.
# The frames were computed when the notebook ran, so it works in the static page.


# %%
def draw(fig, N):
    ax = fig.add_subplot(111)
    ax.plot(dims_two, acc_two[N], marker="o", label="two layers")
    ax.plot(dims_one, acc_one[N], marker="s", label="one layer (γ tuned)")
    ax.axvline(8 * np.ceil(np.log2(N)), color="k", ls=":", label="8⌈log₂N⌉")
    ax.axhline(0.95, color="k", lw=0.8)
    ax.set(
        xscale="log", xlabel="width d", ylabel="valid child selection", ylim=(0, 1.02)
    )
    ax.legend(loc="lower right")


plotting.static_slider(Ns, draw, label="N", fmt="{}")

# %% [markdown]
# In Jupyter or Colab, roll out the constructed two-layer model on a random graph of your choice and compare it
# with the reference DFS.


# %%
def play(N: int = 12, p: float = 0.3, width: int = 32, graph_seed: int = 0):
    g_ = repro.rng(seed, 10, graph_seed)
    a_ = dfs.random_digraph(N, g_, p=p)
    e_ = dfs.edge_list(a_)
    m_ = dfs.TwoLayerDFS(dfs.sign_embeddings(N, width, g_))
    s0, t0_ = 0, N - 1
    got, ref = dfs.rollout(m_, N, e_, s0, t0_), dfs.dfs_trace(N, e_, s0, t0_)
    print(f"model:     {got}\nreference: {ref}\nidentical: {got == ref}")


plotting.live_controls(
    play, N=(4, 40), p=(0.05, 0.9, 0.05), width=(4, 64, 4), graph_seed=(0, 20)
)

# %% [markdown]
# ## 7. The claims record
#
# Checks first (they fail the notebook if false), then the paper's claims next to our measurements. The record
# computes each claim's verdict (held / not held) from the measured number and a target fixed before running: a
# one-layer width exponent of at least 0.75 counts as quadratic size (`N·d ≳ N^1.75`); a two-layer width exponent
# of at most 0.5 counts as near-linear size; a trained gap of at least 10 points counts as "a second layer is
# necessary"; unseen-graph accuracy of at least 95 % counts as generalisation. A width exponent that cannot be
# fitted (fewer than two N reach 95 % in the width grid) is recorded as untested, with the widths.

# %%
rec.check(
    "trace_valid",
    mismatch,
    0,
    op="==",
    note="reference DFS walk vs networkx's DFS on 200 random graphs",
)
rec.check(
    "construction_exact",
    exact_frac,
    1.0,
    op="==",
    note=f"one-hot two-layer construction: {exact_states}/{exact_total} states, "
    f"{rollouts_ok}/{rollouts} rollouts identical to the reference",
)
rec.check(
    "construction_random_embed",
    min(acc_log.values()),
    0.99,
    op=">=",
    note="random sign embeddings of width 8⌈log₂N⌉, worst N of " + str(Ns),
)
rec.check(
    "lookahead_monotone",
    float(np.max(np.diff(mean_len))),
    0.0,
    op="<=",
    note="largest increase of the mean trace length between consecutive horizons "
    f"{horizons}",
)

finite_one = [w for w in width_one if np.isfinite(w)]
one_statement = (
    "One layer needs width ~N (size ~N²) for DFS child selection on dense graphs"
)
one_note = (
    f"widths for 95 %: {dict(zip(Ns, width_one))}; γ tuned per (N, d); "
    "illustration for our one-layer construction, not a lower-bound proof"
    + (
        ""
        if len(finite_one) == len(Ns)
        else "; some N never reached 95 % in the grid (left out)"
    )
)
if np.isfinite(exp_one):
    rec.claim(
        "one_layer_width_growth",
        one_statement,
        paper="size Ω(N²) (width exponent 1)",
        measured=exp_one,
        op=">=",
        target=0.75,
        unit="fitted exponent of d vs N",
        note=one_note,
    )
else:
    rec.untested(
        "one_layer_width_growth",
        one_statement,
        paper="size Ω(N²) (width exponent 1)",
        reason="fewer than two N reached 95 % within the width grid, so no exponent "
        "can be fitted; " + one_note,
    )
two_statement = "Two layers need only width O(log N) (size O(N log N))"
two_note = f"widths for 95 %: {dict(zip(Ns, width_two))}"
if np.isfinite(exp_two):
    rec.claim(
        "two_layer_width_growth",
        two_statement,
        paper="size O(N log N) (width exponent ≈ 0)",
        measured=exp_two,
        op="<=",
        target=0.5,
        unit="fitted exponent of d vs N",
        note=two_note,
    )
else:
    rec.untested(
        "two_layer_width_growth",
        two_statement,
        paper="size O(N log N) (width exponent ≈ 0)",
        reason="fewer than two N reached 95 % within the width grid, so no exponent "
        "can be fitted; " + two_note,
    )
gap = res["two-layer"]["unseen"]["all"] - res["one-layer"]["unseen"]["all"]
rec.claim(
    "trained_two_vs_one",
    "A trained two-layer transformer beats a one-layer one of equal size",
    paper="a second layer is necessary",
    measured=gap,
    op=">=",
    target=0.10,
    unit="accuracy gap (unseen graphs), two-layer − one-layer",
    baseline=res["one-layer"]["unseen"]["all"],
    note=f"two-layer {res['two-layer']['unseen']['all']:.3f} vs one-layer "
    f"{res['one-layer']['unseen']['all']:.3f}; {steps} Adam steps, {two.n_params()} vs "
    f"{one.n_params()} parameters",
)
acc2 = res["two-layer"]["unseen"]["all"]
rec.claim(
    "generalizes_unseen",
    "The trained two-layer model executes DFS on unseen graphs",
    paper="provably learns DFS and generalises (gradient flow)",
    measured=acc2,
    op=">=",
    target=0.95,
    unit="next-move accuracy",
    note=f"child {res['two-layer']['unseen']['child']:.3f}, backtrack "
    f"{res['two-layer']['unseen']['backtrack']:.3f}; on {V}-node graphs "
    f"{res['two-layer']['larger']['all']:.3f}. Trained with Adam for {steps} "
    "steps, not gradient flow",
)
rec.save()
