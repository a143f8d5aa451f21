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
# measures how wide each must be as N grows, builds the deeper look-ahead by hand (the reach set squared per
# layer, horizons 1 to 16) and measures its search length, runs gradient descent on the
# construction's own architecture (curated vs naive data), and trains one- and two-layer models of equal size at
# a width where the one-layer model is limited.
#
# | | paper | this notebook |
# |---|---|---|
# | one- vs two-layer size | proofs (Ω(N²) vs O(N log N)) | hand-built models; width needed for 95 % child-selection accuracy, N = 8 … 64 (one layer), 8 … 256 with 5 embedding draws (two layers) |
# | L-layer look-ahead | a construction with horizon 2^(L−3) | hand-built doubling networks (horizon 2^J in J + 2 layers, J = 0 … 4), checked token for token against a look-ahead rule; search length on sparse random graphs (N = 64) and on 20 × 20 grids (measured by a data script), 3 seeds |
# | learning | gradient-flow analysis, two-layer model | full-batch gradient descent on the construction's architecture (learnable `W1, W2`), graphs of 6–12 nodes, tested on 16; and a reduced scaffold (value/output maps, previous-token and parent heads learned, sign embeddings of width 12 < 16; checkpoint); 3 seeds |
# | one vs two layers, trained | — | the same architecture vs its one-layer counterpart, equal parameters, N = 16, width 8, and widths 4 … 24 at N = 16, 4 … 48 at N = 32 (one layer); checkpoints, 3 seeds; plus generic transformers (~28 k parameters) as an illustration |
# | data | synthetic graphs | synthetic graphs (G(N, p) and fixed out-degree), generated here |
# | hardware | not stated | 2 CPU cores, ≤ 5 min |
#
# :::{note}
# **What is reconstructed.** The paper's text was not available to us; only its abstract. The trace format, the
# two-layer construction (a *visited* head and a *previous-token* head in layer 1, a *child* head and a *parent*
# head in layer 2), the one-layer counterpart, the doubling look-ahead network and its rule, the learnable
# architecture of the
# gradient-flow experiment, what "curated" data means, and the training setup are **our reconstruction** from the
# abstract and prior work on graph search in transformers (ALPINE; Saparov et al. 2025; Yang et al. 2026). The width measurements illustrate the Ω(N²)-vs-O(N log N) separation for *these*
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
N_look, look_pairs = 64, 60  # look-ahead networks: graph size, (s, t) pairs per seed
# doubling on long distances (quick mode only: the default run loads the measurements
# of data/12_transformer_dfs/make_lookahead.py): grid side, pairs per seed, least s -> t
# distance
grid_side, grid_pairs, grid_min_dist = 8, 2, 8
# trained models: node vocabulary (graphs of 4-6 nodes for training, 8 for the larger
# test)
V = 8
train_graphs, steps, batch_size = 2000, 3000, 64
# two-layer width scaling: graph sizes, embedding draws per (N, d), widths tried
Ns_scale, n_draws = [8, 16, 32, 64, 128, 256], 5
dims_scale = [4, 6, 8, 10, 12, 14, 16, 20, 24, 28, 32, 40, 48, 64, 80, 96, 128]
scale_states = 40  # child-selection states per (N, draw)
# gradient flow: node labels 0..gf_V-1 (training graphs of gf_range nodes, test
# graphs of gf_V nodes), states per training set, full-batch GD steps and step size
gf_V, gf_states, gf_test, gf_steps, gf_lr = 16, 800, 600, 150, 2.0
gf_range = (6, 12)  # sizes of the training graphs
n_seeds = 3  # seeds for everything trained (seed, seed+1, ...)

# %% tags=["hide-input"]
import json
import time

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F
from IPython.display import Markdown, display
from scipy.sparse.csgraph import shortest_path
from tqdm.auto import tqdm

from helpers import checkpoints, claims, nn, plotting, repro, scripts, train
from helpers import transformer_dfs as dfs

if quick:
    Ns, n_states, dims_one = [8, 16], 30, [8, 16, 32, 64, 128]
    N_look, look_pairs, train_graphs, steps = 24, 10, 200, 60
    Ns_scale, n_draws, scale_states = [8, 16, 32], 2, 20
    gf_V, gf_states, gf_test, gf_steps, n_seeds = 10, 200, 200, 40, 1
    gf_range = (5, 8)
seeds = [seed + i for i in range(n_seeds)]

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
        grid=[grid_side, grid_pairs, grid_min_dist],
        V=V,
        train_graphs=train_graphs,
        steps=steps,
        batch_size=batch_size,
        Ns_scale=Ns_scale,
        n_draws=n_draws,
        dims_scale=dims_scale,
        scale_states=scale_states,
        gf=dict(
            V=gf_V,
            states=gf_states,
            test=gf_test,
            steps=gf_steps,
            lr=gf_lr,
            range=gf_range,
        ),
        seeds=seeds,
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
# reaches 95 %. (Both are evaluated with their `fast_logits`: the same forward pass in closed form, tested equal
# to the attention code.)

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
            dfs.TwoLayerDFS(dfs.sign_embeddings(N, d, g)), adj_N, test_states, fast=True
        )
        for d in tqdm(dims_two, desc=f"two-layer N={N}", leave=False)
    ]
    acc_one[N], gamma_used[N] = [], []
    for d in tqdm(dims_one, desc=f"one-layer N={N}", leave=False):
        E = dfs.sign_embeddings(N, d, g)
        best = max(
            gammas,
            key=lambda gm: dfs.child_accuracy(
                dfs.OneLayerDFS(E, gamma=gm), adj_N, calib_states, fast=True
            ),
        )
        gamma_used[N].append(best)
        acc_one[N].append(
            dfs.child_accuracy(
                dfs.OneLayerDFS(E, gamma=best), adj_N, test_states, fast=True
            )
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
# **The two-layer width, measured robustly.** The exponent above rests on one embedding draw per `(N, d)` and a
# coarse grid, and it is fragile: a lucky or unlucky draw moves the width needed by a grid step. Here, for each `N`
# up to 256, we draw `n_draws` independent sign embeddings and find, for each, the smallest width in a fine grid
# that reaches 95 % child selection (by bisection over the grid; the model is evaluated with `fast_logits`, the
# same forward pass in closed form, which computes the visited flag once per node instead of once per edge). The
# construction predicts `d = O(log N)`: the width should grow linearly in `log N`, so a fit `d = a + b·log₂N`
# should beat a fit `d = a + b·N`.

# %%
width_draws = {}
t0 = time.process_time()
for N in tqdm(Ns_scale, desc="two-layer width vs N"):
    g = repro.rng(seed, 11, N)
    adj_N = dfs.random_digraph(N, g, p=0.5)
    states_N = dfs.sample_states(adj_N, g, scale_states, kind="child")
    width_draws[N] = []
    for r in range(n_draws):
        g_r = repro.rng(seed, 12, N, r)

        def acc_at(d, N=N, adj_N=adj_N, states_N=states_N, g_r=g_r):
            m_d = dfs.TwoLayerDFS(dfs.sign_embeddings(N, d, g_r))
            return dfs.child_accuracy(m_d, adj_N, states_N, fast=True)

        width_draws[N].append(dfs.width_bisect(acc_at, dims_scale))
    print(f"N={N:3d}: widths for 95 % over {n_draws} draws {width_draws[N]}")
print(f"scaling sweep: {time.process_time() - t0:.1f} s CPU")

xs = np.array([N for N in Ns_scale for _ in width_draws[N]], dtype=float)
ys = np.array([w for N in Ns_scale for w in width_draws[N]], dtype=float)
fin = np.isfinite(ys)
(b_log, a_log), cov_log = np.polyfit(np.log2(xs[fin]), ys[fin], 1, cov=True)
b_lin, a_lin = np.polyfit(xs[fin], ys[fin], 1)
sse_log = float(np.sum((ys[fin] - (a_log + b_log * np.log2(xs[fin]))) ** 2))
sse_lin = float(np.sum((ys[fin] - (a_lin + b_lin * xs[fin])) ** 2))
half = 1.96 * float(np.sqrt(cov_log[0, 0]))
print(
    f"fit d = {a_log:.1f} + {b_log:.2f}·log2 N  (slope 95 % interval "
    f"[{b_log - half:.2f}, {b_log + half:.2f}]), squared error {sse_log:.0f}"
)
print(
    f"fit d = {a_lin:.1f} + {b_lin:.3f}·N, squared error {sse_lin:.0f}; "
    f"ratio linear/log {sse_lin / max(sse_log, 1e-9):.2f}; "
    f"{int((~fin).sum())} draws never reached 95 % (left out)"
)

# %%
fig, ax = plt.subplots(figsize=(5.5, 3.4))
ax.scatter(xs, ys, s=14, alpha=0.6, label=f"{n_draws} embedding draws per N")
grid_N = np.geomspace(min(Ns_scale), max(Ns_scale), 50)
ax.plot(
    grid_N, a_log + b_log * np.log2(grid_N), label=f"{a_log:.1f} + {b_log:.2f}·log₂N"
)
ax.plot(grid_N, a_lin + b_lin * grid_N, ls="--", label=f"{a_lin:.1f} + {b_lin:.3f}·N")
ax.set(xscale="log", xlabel="N (dense G(N, 1/2))", ylabel="two-layer width for 95 %")
ax.legend(fontsize=8)
plt.show()

# %% [markdown]
# **The one-layer width, measured the same way.** The one-layer exponent of the first sweep rests on one
# embedding draw per `(N, d)` and a grid of factors of two. We repeat it like the two-layer scaling: for each `N`,
# `n_draws` independent sign embeddings, and for each the smallest width in a finer grid (each width about half as large again as the one before) that
# reaches 95 % valid child selection, found by bisection; `γ` is tuned on calibration states at every width
# tried. The exponent is fitted to all draws together.

# %%
dims_one_fine = [8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768]
one_draws = {}
t0 = time.process_time()
for N in tqdm(Ns, desc="one-layer width vs N"):
    g = repro.rng(seed, 15, N)
    adj_N = dfs.random_digraph(N, g, p=0.5)
    test_N = dfs.sample_states(adj_N, g, n_states, kind="child")
    calib_N = dfs.sample_states(adj_N, g, n_states // 2, kind="child")
    one_draws[N] = []
    for r in range(n_draws):

        def acc_one_at(d, N=N, adj_N=adj_N, test_N=test_N, calib_N=calib_N, r=r):
            E = dfs.sign_embeddings(N, d, repro.rng(seed, 16, N, r, d))
            best = max(gammas, key=lambda gm: dfs.child_accuracy(
                dfs.OneLayerDFS(E, gamma=gm), adj_N, calib_N, fast=True))
            return dfs.child_accuracy(dfs.OneLayerDFS(E, gamma=best), adj_N, test_N,
                                      fast=True)

        one_draws[N].append(dfs.width_bisect(acc_one_at, dims_one_fine))
    print(f"N={N:3d}: one-layer widths for 95 % over {n_draws} draws {one_draws[N]}")
print(f"one-layer scaling sweep: {time.process_time() - t0:.1f} s CPU")
xs1 = np.array([N for N in Ns for _ in one_draws[N]], dtype=float)
ys1 = np.array([w for N in Ns for w in one_draws[N]], dtype=float)
exp_one_draws = dfs.fit_exponent(xs1, ys1)
print(f"fitted d ~ N^a over all draws: one-layer a = {exp_one_draws:.2f}; "
      f"{int(np.isnan(ys1).sum())} draws never reached 95 % (left out)")

# %% [markdown]
# ## 4. Depth buys look-ahead: the doubling network
#
# With more layers, the model can check, before choosing a child, whether the target `t` is reachable from it
# through unvisited nodes. The paper's mechanism is **repeated squaring**: a token that holds the set of nodes
# reachable within `k` steps can, in one attention layer, collect the sets of every node in it and so learn what
# is reachable within `2k`. We build that network with weights set by hand (`dfs.DoublingDFS`, one-hot node
# embeddings: each set of nodes is a width-`N` vector in the residual stream):
#
# * **Node tokens.** Besides the edge tokens and the trace, the input has one token per node `v`. In layer 1 it
#   attends to the edges leaving `v` and to those entering `v`, and a threshold MLP turns the averages into its
#   out-neighbour and in-neighbour sets; a third head marks whether `v` is visited.
# * **Squaring layers.** Node token `v` attends to the unvisited node tokens `w` in its reach set `hi_j(v)`
#   (score `β⟨hi_j(v), e_w⟩ − 2β·vis_w`) and averages their sets; the MLP turns the average into the union. From
#   `hi_0(v) = {v} ∪ out(v)` and `lo_0(v) = {v}`, layer `j` writes `hi_{j+1} = hi_j ∘ hi_j` (at most `2^(j+1)`
#   edges) and `lo_{j+1} = hi_j ∘ lo_j` (at most `2^(j+1) − 1` edges): the reach set squared per layer.
# * **Last layer.** The current node `u` attends to node tokens `c` with score
#   `β₂(⟨e_u, in(c)⟩ − 2·vis_c) + τ·c/N + κ·Σ_j ⟨e_t, lo_j(c)⟩`: an unvisited child, preferring the one from which
#   `t` is seen at the smallest level (`u → c → … → t` in at most `2^j` edges), largest index within a level.
#   The parent head backtracks as in section 2.
#
# Horizon `h = 2^J` takes `J + 2` attention layers (2 for plain DFS and for `h = 1`): one fewer than the paper's
# `L = 3 + log₂h`, because `t` is an input token here. The rule of `dfs.lookahead_trace` (a breadth-first search
# toward `t`) is the reference the networks must reproduce, token for token; the trace lengths below are the
# networks' own rollouts. Each rollout step uses `DoublingDFS.fast_logits`, the same attention and MLPs in closed
# form (tested equal to the token-by-token forward pass, which we also run on small graphs).

# %%
horizons = [0, 1, 2, 4, 8, 16] if not quick else [0, 1, 2, 4]
nets = {h: dfs.DoublingDFS(N_look, h) for h in horizons}
n_layers = {h: nets[h].n_layers for h in horizons}
print("attention layers per horizon:", n_layers)
net_len, look_same, look_total, dist = {}, 0, 0, {s_: [] for s_ in seeds}
for s_ in seeds:
    g = repro.rng(s_, 6)
    for h in horizons:
        net_len[s_, h] = []
    for _ in tqdm(range(look_pairs), desc=f"look-ahead networks, seed {s_}"):
        a = dfs.random_digraph(N_look, g, out_degree=(1, 3))
        e = dfs.edge_list(a)
        src, tgt = (int(x) for x in g.choice(N_look, 2, replace=False))
        if tgt not in dfs.dfs_trace(N_look, e, src, tgt):
            continue  # t unreachable: every horizon explores everything
        # the floor no search can beat: the shortest s -> t path (scipy's BFS)
        dist[s_].append(float(shortest_path(a.astype(float), unweighted=True,
                                            indices=src)[tgt]))
        for h in horizons:
            tr = dfs.rollout(nets[h], N_look, e, src, tgt, fast=True)
            net_len[s_, h].append(len(tr) - 1)
            look_total += 1
            look_same += tr == dfs.lookahead_trace(a, src, tgt, h)
mean_len = {s_: [float(np.mean(net_len[s_, h])) for h in horizons] for s_ in seeds}
for s_ in seeds:
    print(
        f"seed {s_} ({len(net_len[s_, 0])} reachable pairs): mean steps until t "
        + ", ".join(f"h={h} (L={n_layers[h]}) {m_:.1f}"
                    for h, m_ in zip(horizons, mean_len[s_]))
    )
print(f"network traces equal to the rule's: {look_same}/{look_total}")
mean_dist = {s_: float(np.mean(dist[s_])) for s_ in seeds}
at_floor = {h: float(np.mean([ln == d_ for s_ in seeds
                              for ln, d_ in zip(net_len[s_, h], dist[s_])]))
            for h in horizons}
print("mean shortest s -> t path per seed:",
      {s_: round(m_, 2) for s_, m_ in mean_dist.items()})
print("share of pairs whose trace is a shortest path, per horizon:",
      {h: round(f_, 2) for h, f_ in at_floor.items()})

# %% [markdown]
# The same networks, run token by token (explicit attention over the whole residual stream), on small graphs:
# their traces must equal the rule's too.

# %%
la_same = la_total = 0
for i in tqdm(range(3 if quick else 6), desc="doubling network, full forward"):
    g = repro.rng(seed, 14, i)
    n = int(g.integers(6, 11))
    a = dfs.random_digraph(n, g, out_degree=(1, 3))
    src, tgt = (int(x) for x in g.choice(n, 2, replace=False))
    for h in (1, 2, 4, 8):
        got = dfs.rollout(dfs.DoublingDFS(n, h), n, dfs.edge_list(a), src, tgt)
        la_total += 1
        la_same += got == dfs.lookahead_trace(a, src, tgt, h)
print(f"full forward: {la_same}/{la_total} traces identical to the rule")

# %% [markdown]
# **Long distances: grids.** On the sparse random graphs above the shortest `s → t` path is short, so the larger
# horizons already see `t` from `s` and the last layers cannot change the trace: there, `L` and `L + 1` layers
# cannot be told apart. For the per-layer doubling we therefore run the same networks on a family with long
# distances and many dead ends: a square grid, edges both ways between neighbours, node labels shuffled
# (`dfs.grid_digraph`), with `s` and `t` a uniform draw among the pairs at least `min_dist` edges apart
# (`dfs.far_pair`). A search that guesses wanders into the grid; a horizon-`h` network goes straight once `t` is
# within `h` edges through unvisited nodes. No trace is shorter than the shortest path, so over `k` doublings
# the geometric-mean shrink per layer of *any* network is at most `(h = 1 trace ÷ shortest path)^(1/k)`, its
# **room** (`dfs.grid_room`; the condition `lookahead_room` in section 9). An earlier build measured horizons
# 1–16 (four doublings) on 20 × 20 grids with 8 pairs per seed; there even a perfect network had little room
# above the bar (read below). This build measures **three doublings (horizons 1–8, 2 to 5 <!-- paper -->
# attention layers) on fresh 20 × 20 grids with 16 pairs per seed**, a design chosen on the room alone (a pilot
# on other draws) and registered before its draws were made; `make_lookahead.py` computes the room on the
# claim's own draws *first* and runs the networks only where it is at least 2.0. Rolling out four networks with <!-- paper -->
# 400-node reach sets takes minutes per seed, so `data/12_transformer_dfs/make_lookahead.py`
# (`dfs.doubling_grid_run`) measured them, one seed per job, and the default run loads the measurements: the
# networks' trace lengths, the shortest paths, whether each trace equals the rule's, and the room computed
# before. Quick mode runs `dfs.doubling_grid_run` live on a small grid.

# %%
horizons_g = [h for h in horizons[1:] if h <= 8]  # one squaring layer per doubling
grid_len, grid_dist, grid_same, room_pre = {}, {}, 0, {}
for i, s_ in enumerate(seeds):
    la_cfg = scripts.with_seeds(dfs.checkpoint_config(f"lookahead8_{i}"), [s_])
    if quick:
        la_cfg.update(side=grid_side, pairs=grid_pairs, min_dist=grid_min_dist,
                      horizons=horizons_g)
        r_ = dfs.doubling_grid_run(la_cfg, s_, progress=True)
    else:
        la_ck = checkpoints.load(dfs.CHECKPOINT_SLUG, f"lookahead8_{i}", config=la_cfg)
        r_ = {k: la_ck.tensors[k].numpy() for k in ("length", "dist", "same")}
        room_pre[s_] = (la_ck.manifest["metrics"]["room"],  # before the networks ran
                        la_ck.tensors["len1_rule"].numpy())
    assert la_cfg["horizons"] == horizons_g, "the grid run must use these horizons"
    for j, h in enumerate(horizons_g):
        grid_len[s_, h] = r_["length"][:, j].tolist()
    grid_dist[s_] = r_["dist"].astype(float).tolist()
    grid_same += int(r_["same"].sum())
    look_total += r_["same"].size
    look_same += int(r_["same"].sum())
grid_side, grid_pairs = la_cfg["side"], la_cfg["pairs"]
grid_min_dist = la_cfg["min_dist"]
n_grid = grid_side**2
grid_mean = {s_: [float(np.mean(grid_len[s_, h])) for h in horizons_g] for s_ in seeds}
if room_pre:
    print("perfect-network room per seed, computed before the networks ran:",
          [round(room_pre[s_][0], 3) for s_ in seeds], f"(needed {dfs.ROOM_BAR})")
for s_ in seeds:
    print(f"seed {s_}: mean shortest path {np.mean(grid_dist[s_]):.1f}; "
          "mean steps until t " + ", ".join(f"h={h} (L={n_layers[h]}) {m_:.1f}"
                          for h, m_ in zip(horizons_g, grid_mean[s_])))
print(f"{grid_side}×{grid_side} grids: network traces equal to the rule's "
      f"{grid_same}/{len(seeds) * grid_pairs * len(horizons_g)}; all rollouts (random "
      f"graphs and grids) {look_same}/{look_total}")
fig, ax = plt.subplots(figsize=(5.5, 3.2))
for i, s_ in enumerate(seeds):
    ax.plot(range(len(horizons_g)), grid_mean[s_], marker="o",
            color=plotting.PALETTE[i], label=f"seed {s_}")
    ax.axhline(np.mean(grid_dist[s_]), ls=":", color=plotting.PALETTE[i], lw=1)
ax.set_xticks(range(len(horizons_g)),
              [f"h={h}\nL={n_layers[h]}" for h in horizons_g])
ax.set(ylabel="mean steps until t (networks)", yscale="log",
       title=f"Doubling networks on {grid_side}×{grid_side} grids "
       "(dotted: shortest path)")
ax.legend(fontsize=8)
plt.show()

# %% [markdown]
# **How much the search shrinks per layer, and why: an experiment.** A horizon-`h` network acts only once
# `t` is within `h` edges of the current node through unvisited nodes; before that moment its last layer sees
# no child that reaches `t` and it searches like plain DFS. We split every grid trace at that moment
# (`dfs.lookahead_phases`) into a *blind* phase (plain DFS, before `t` is in view) and a *guided* phase (after),
# and measure how many guided steps exceed the distance left when `t` came into view (`excess`: the guided
# steps that are not a shortest path). The traces are the networks': the rule reproduces them token for token
# (the `same` record above), and we assert that every regenerated trace has the network's stored length. A
# second, counterfactual measurement on the same grids and pairs (`dfs.grid_pairs` redraws them): the rule with
# one-edge resolution (`exact=True`: prefer the child *nearest* to `t`, instead of the child at the smallest
# doubling level `⌈log₂(dist + 1)⌉`, which is what the networks can compute). It is not a network; it tells
# whether the power-of-two resolution of the last layer or the blind phase costs the missing shrink.

# %%
phase, exact_mean = {}, {}
for i, s_ in enumerate(seeds):
    cfg_ = scripts.with_seeds(dfs.checkpoint_config(f"lookahead8_{i}"), [s_])
    if quick:
        cfg_.update(side=grid_side, pairs=grid_pairs, min_dist=grid_min_dist,
                    horizons=horizons_g)
    ex_len = {h: [] for h in horizons_g}
    for k_, (a, src, tgt, _) in enumerate(dfs.grid_pairs(cfg_, s_)):
        for h in horizons_g:
            tr = dfs.lookahead_trace(a, src, tgt, h)
            assert len(tr) - 1 == grid_len[s_, h][k_], "not the network's trace"
            phase.setdefault((s_, h), []).append(dfs.lookahead_phases(a, tr, tgt, h))
            ex_len[h].append(len(dfs.lookahead_trace(a, src, tgt, h, exact=True)) - 1)
    exact_mean[s_] = [float(np.mean(ex_len[h])) for h in horizons_g]


def _gm_ratio(m):  # geometric mean of the per-layer ratios (telescoped)
    return float((m[0] / m[-1]) ** (1 / (len(m) - 1)))


def _ph(key):
    return {s_: [float(np.mean([p[key] for p in phase[s_, h]])) for h in horizons_g]
            for s_ in seeds}


blind, guided, excess = _ph("blind"), _ph("guided"), _ph("excess")
blind_share = {s_: [b_ / m_ for b_, m_ in zip(blind[s_], grid_mean[s_])]
               for s_ in seeds}
shrink_net = [_gm_ratio(grid_mean[s_]) for s_ in seeds]
shrink_exact = [_gm_ratio(exact_mean[s_]) for s_ in seeds]
shrink_blind_early = [_gm_ratio(blind[s_][:3]) for s_ in seeds]  # h = 1, 2, 4
for s_ in seeds:
    print(f"seed {s_}: blind share per horizon "
          f"{np.round(blind_share[s_], 2).tolist()}, "
          f"guided excess {np.round(excess[s_], 1).tolist()}, exact-resolution mean "
          f"lengths {np.round(exact_mean[s_], 1).tolist()}")
print("per-layer shrink (geometric mean): networks", np.round(shrink_net, 2).tolist(),
      "| exact-resolution rule", np.round(shrink_exact, 2).tolist(),
      "| blind phase, h = 1 -> 4", np.round(shrink_blind_early, 2).tolist())

# %% [markdown]
# **The earlier build's grids**, for comparison (horizons 1–16, 8 pairs per seed, other draws, stored as
# `lookahead_<seed>`): its networks' shrink per layer and the room a perfect network had there.

# %%
old_ratio, old_ratio8, old_room = [], [], []  # the earlier build (default run only)
for i, s_ in enumerate(seeds if not quick else []):
    cfg_ = scripts.with_seeds(dfs.checkpoint_config(f"lookahead_{i}"), [s_])
    ck_ = checkpoints.load(dfs.CHECKPOINT_SLUG, f"lookahead_{i}", config=cfg_)
    L_ = ck_.tensors["length"].numpy().mean(0)
    k_ = L_.size - 1
    old_ratio.append(float((L_[0] / L_[-1]) ** (1 / k_)))
    old_ratio8.append(float((L_[0] / L_[3]) ** (1 / 3)))  # the same runs, h = 1 ... 8
    old_room.append(float((L_[0] / ck_.tensors["dist"].numpy().mean()) ** (1 / k_)))
if old_ratio:
    print("earlier build, horizons 1-16: networks' shrink per layer",
          np.round(old_ratio, 2).tolist(), "(over h = 1-8 only:",
          np.round(old_ratio8, 2).tolist(), ") | room", np.round(old_room, 2).tolist())

# %%
pooled = {h: np.concatenate([net_len[s_, h] for s_ in seeds]) for h in horizons}
boot = repro.rng(seed, 7)
ci = np.array([
    np.percentile([x[boot.integers(len(x), size=len(x))].mean() for _ in range(300)],
                  [2.5, 97.5])
    for x in (pooled[h] for h in horizons)
])
fig, ax = plt.subplots(figsize=(5.5, 3.4))
for i, s_ in enumerate(seeds):
    ax.plot(range(len(horizons)), mean_len[s_], marker="o", alpha=0.6,
            color=plotting.PALETTE[i], label=f"seed {s_}")
pm = np.array([pooled[h].mean() for h in horizons])
ax.errorbar(range(len(horizons)), pm, yerr=[pm - ci[:, 0], ci[:, 1] - pm], color="k",
            capsize=3, label="pooled (95 % bootstrap)")
ax.set_xticks(range(len(horizons)),
              [f"h={h}\nL={n_layers[h]}" for h in horizons])
ax.set(ylabel="mean steps until t (networks)",
       title=f"Doubling networks, N={N_look}, out-degree 1–3")
ax.legend(fontsize=8)
plt.show()

# %% [markdown]
# ## 5. Learning DFS by gradient flow, on curated and on naive data
#
# The paper's learning result is about the construction's own architecture: with *curated* training data, gradient
# flow on its attention matrices finds the DFS mechanism and generalises to unseen graphs. We rebuild that setting
# (reconstructed: the paper's model and data recipe are not public). `StructuredDFS` keeps the two-layer
# architecture of section 2 with fixed one-hot node embeddings (`d = gf_V`) and makes its two bilinear forms
# learnable, together with two scalars:
#
# * layer 1, *visited* head: edge `(a, b)` attends to the trace with scores `e_bᵀ W1 e_v` and reads the flag
#   `f_ab = Σ_v att_v ⟨e_b, e_v⟩` (the construction has `W1 = β₁I`);
# * layer 2, *child* head: the current node `u` attends to edges with scores `e_uᵀ W2 e_a − γ f_ab + τ·b/V` and to a
#   sink with score `σ` whose value is the parent (from the exact parent head); readout `ρ·E·out`.
#
# Everything starts at zero (`W1 = W2 = 0`, `γ = σ = 0`) and moves by full-batch gradient descent on the
# cross-entropy of the next move: Euler steps of gradient flow. Two training sets of equal size, on graphs of
# 6–12 nodes (5–8 in quick mode):
#
# * **curated**: from full searches, every backtrack state and as many child-selection states, half of them states
#   whose current node already has a *visited* child (where the flag decides the move);
# * **naive**: every prefix of the path-finding trace from a random `s` to a random `t`, the traces the task
#   itself produces (mostly forward steps, few backtracks).
#
# The test set is every state of full searches on **unseen graphs with `gf_V` nodes** (larger than any training
# graph). We follow `cos(W, I)`, the direction the construction predicts, and the held-out accuracy.

# %%
gf_hist, gf_mix, gf_models = {}, {}, {}
for s_ in seeds:
    g = repro.rng(s_, 13)
    pools = {
        data: dfs.structured_states(gf_states, gf_V, gf_range, 0.3, g, data)
        for data in ("curated", "naive")
    }
    seen = {it["key"] for pool in pools.values() for it in pool}
    test_gf = dfs.structured_states(gf_test, gf_V, (gf_V, gf_V), 0.3, g, "full", seen)
    test_b = dfs.structured_batch(test_gf)
    for data, pool in pools.items():
        b = dfs.structured_batch(pool)
        gf_mix[data, s_] = float(b["is_backtrack"].float().mean())
        with repro.seeded(s_):
            m = dfs.StructuredDFS(dfs.one_hot_embeddings(gf_V))
            gf_hist[data, s_] = dfs.gradient_flow(
                m, b, gf_steps, gf_lr, {"test": test_b, "train": b}, eval_every=10
            )
        gf_models[data, s_] = m
        h = gf_hist[data, s_]
        print(
            f"seed {s_} {data:7s} ({gf_mix[data, s_]:.0%} backtracks): train "
            f"{h['train/all'][-1]:.3f}, unseen {gf_V}-node graphs "
            f"{h['test/all'][-1]:.3f} (child {h['test/child'][-1]:.3f}, "
            f"backtrack {h['test/backtrack'][-1]:.3f}), "
            f"cos(W1, I) {h['cos_W1'][-1]:.2f}, cos(W2, I) {h['cos_W2'][-1]:.2f}"
        )
    if s_ == seeds[0]:
        m_cur = dfs.StructuredDFS(dfs.one_hot_embeddings(gf_V)).set_construction(30.0)
        cons_acc = dfs.move_accuracy(m_cur(test_b), test_b)["all"]
        print(f"the same architecture at the hand-built point: {cons_acc:.3f}")
gf_acc = {
    data: [gf_hist[data, s_]["test/all"][-1] for s_ in seeds]
    for data in ("curated", "naive")
}

# %%
fig, ax = plt.subplots(1, 3, figsize=(12, 3.4))
for data, ls in (("curated", "-"), ("naive", "--")):
    for i, s_ in enumerate(seeds):
        h = gf_hist[data, s_]
        lab = data if i == 0 else None
        ax[0].plot(h["step"], h["cos_W1"], ls=ls, color=plotting.PALETTE[0], label=lab)
        ax[0].plot(h["step"], h["cos_W2"], ls=ls, color=plotting.PALETTE[1])
        ax[1].plot(
            h["step"], h["test/child"], ls=ls, color=plotting.PALETTE[2], label=lab
        )
        ax[1].plot(h["step"], h["test/backtrack"], ls=ls, color=plotting.PALETTE[3])
        ax[2].plot(
            h["step"], h["test/all"], ls=ls, color=plotting.PALETTE[4], label=lab
        )
ax[0].set(xlabel="GD step", ylabel="cos(W, I)", title="W1 (blue), W2 (orange)")
ax[1].set(xlabel="GD step", ylabel="accuracy", title="child (green), backtrack (red)")
ax[2].set(
    xlabel="GD step", ylabel="next-move accuracy", title=f"unseen {gf_V}-node graphs"
)
for a_ in ax:
    a_.legend(fontsize=8)
plt.tight_layout()
plt.show()

# %% [markdown]
# **Why does naive data fall short, and where?** A guess to test, not to assume: naive traces are short and
# rarely backtrack, so the learned layer-1 attention stays too soft to mark a visited child as visited once the
# trace grows long, and the child head then prefers a visited child over backtracking. If that is the cause, the
# naive model's errors sit at long traces and on backtrack states, and its flags for visited children are lower
# there than the curated model's.

# %%
# the last seed's models and unseen-graph test states (from the loop above)
lengths_t = test_b["trace_mask"].sum(1)
bins = [(1, 6), (6, 12), (12, 40)]
diag = {}
for data in ("curated", "naive"):
    with torch.no_grad():
        logits, r = gf_models[data, seeds[-1]](test_b, record=True)
    ok = logits.argmax(-1) == test_b["target"]
    # flag of the edge u -> b for visited children b of the current node
    vis = (F.one_hot(test_b["trace"], gf_V).bool()
           & test_b["trace_mask"][:, :, None]).any(1)
    from_u = (test_b["src"] == test_b["current"][:, None]) & test_b["edge_mask"]
    vis_child = from_u & vis.gather(1, test_b["dst"])
    row = []
    for lo, hi in bins:
        sel = (lengths_t >= lo) & (lengths_t < hi)
        sel_f = vis_child & sel[:, None]
        row.append(
            (
                float(ok[sel].float().mean()),
                float(r["flag"][sel_f].mean()) if sel_f.any() else float("nan"),
            )
        )
    diag[data] = row
    print(
        f"{data:7s} "
        + "  ".join(
            f"trace {lo}-{hi - 1}: acc {a:.2f}, flag of visited children {f:.2f}"
            for (lo, hi), (a, f) in zip(bins, row)
        )
    )

# %% [markdown]
# **A reduced scaffold.** The model above is told a lot: one-hot embeddings make the visited flag exact, the
# parent arrives through the sink, the tie-break and the readout are fixed, and only `W1`, `W2`, `γ`, `σ` move.
# `dfs.ReducedDFS` keeps the two-layer routing (which token reads which) and learns the rest, from a small
# random start (exactly zero is a saddle: a zero flag and a zero flag weight `γ` keep each other still):
#
# * layer 1, *visited* head at edge `(a, b)`: scores `e_bᵀ W1 e_v` over the trace and a learned sink score; the
#   **value map** `w_vᵀ e_v + c_v` of each trace token is learned, the flag `f_ab` is what it returns;
# * layer 1, *previous-token* head: trace position `j` reads earlier positions with a learned score `θ[j − i]`
#   per offset (the construction puts all weight on offset 1);
# * layer 2, *child* head at `u`: scores `e_uᵀ W2 e_a − γ f_ab + w_tᵀ e_b` and a learned sink; `w_t` is a
#   learned preference in place of the hard-wired largest-index tie-break; **output map** `O_c`;
# * layer 2, **parent head** at `u`: scores `e_uᵀ W3 e_v − λ·j` over the trace positions `j`, value the stored
#   predecessor; **output map** `O_p`; readout `logits = E (O_c·child + O_p·parent)`.
#
# Node embeddings are random signs of width `d < V`, fixed. With no tie-break imposed, any valid move is right:
# the loss is `−log` of the probability on the set of valid moves (every unvisited child of `u`, else its
# parent), and we measure **valid-move** accuracy (exact-move accuracy, against the largest-index reference,
# is reported too). Same data recipe as above: curated states of small graphs, tested on every state of full
# searches on unseen `V`-node graphs.
#
# Two design steps were taken on one-seed probes (seed 0) before the three seeds were trained, and are part of
# the result: plain gradient descent moved far too slowly at any step size we could afford, so the model is
# trained by **full-batch Adam** (not gradient flow); and with the full-scaffold experiment's 800 training states
# the model memorised its training graphs (high training, low unseen accuracy), so the training set has 4,000
# curated states. `data/12_transformer_dfs/make_reduced.py` trains one seed per job (minutes each, too long for
# the default run); quick mode trains a small model live. The conditions are the same book-wide rules as above,
# fixed before the seeds were trained: flat loss at the end (`reduced_converged`) and a fit of its own training
# states (`reduced_fits`, valid-move accuracy ≥ 0.95). <!-- paper -->
#
# **A second attempt, for the fit.** The first attempt trained 1,500 steps and missed `reduced_fits` at every
# seed with a flat loss, so it could not test the claim; the book's rule then asks for more training or more
# capacity, not a smaller claim. The new configuration was chosen on seed 0 alone, by the fit condition alone
# (training states only; the probes did not evaluate unseen graphs): the first probe whose training accuracy at
# its plateau reached the bar with a flat loss. Wider embeddings (`d = 15 < 16`) plateaued below it; twice the
# steps (3,000, everything else unchanged) reached it, and were taken. Adam with a constant step size is
# deterministic, so the first 1,500 steps of each second-attempt run *are* the first attempt: its numbers are
# read off the same curves below. The probes' numbers are in the data script's docstring.
#
# **A third attempt, for the fit at every seed (not found).** The second attempt met `reduced_fits` at seed 0
# only, so the claim rests on one seed, and its errors sit where the visited flag decides (measured below):
# random sign vectors of width 12 for 16 nodes overlap (the largest |cosine| between two nodes is two thirds or
# more), and even the hand-built weights lose accuracy with them. Before any probe ran, we wrote down an order of
# configurations and a rule (in `make_reduced.py`): **P1** low-coherence sign codes (the seed's same random sign
# draw, then single sign flips that lower the summed fourth power of the overlaps, `dfs.low_coherence_signs`;
# largest |cosine| 1/3), still fixed and still `d = 12 < 16`, everything else unchanged; **P2** the same codes
# learned; **P3** P1 with twice the steps. The first configuration whose training valid-move accuracy at its
# plateau reaches the bar with a flat loss at **all three seeds** would replace the second attempt; a probe
# trains one seed and computes nothing on unseen graphs. The conditions and the claim's bar are unchanged.
#
# P1 met the rule at seed 0 and missed it at seed 1 (flat loss, fit below the bar, no better than the second
# attempt there), although the hand-built weights with its codes fit seed 1's training states almost perfectly
# (measured below): there training, not the codes, fell short. P2 missed it at seed 1 by more (learning the
# embeddings made the fit worse). P3 was then run at seed 1 first (the seed that stopped P1 and P2); its run is
# kept (`reduced_lc_1`, training curve only: the unseen graphs were not evaluated) and read below. Because
# Adam with a constant step size is deterministic, the first 3,000 steps of that run *are* P1's run at seed 1,
# so P1's seed-1 numbers are read off the same curve. No configuration of that list met the rule, so after the
# third attempt the claim still rested on the **second attempt's** models, loaded and plotted here; P2's and P1's
# seed-0 numbers are in the data script's docstring (those runs were not kept). A fourth attempt follows below.
#
# %%
red_hist, red_loss, red_res, red_models, red_tb, red_b = {}, {}, {}, {}, {}, {}
for i, s_ in enumerate(seeds):
    red_cfg = scripts.with_seeds(dfs.checkpoint_config(f"reduced_{i}"), [s_])
    if quick:
        red_cfg.update(V=10, d=8, n_range=[5, 8], n_train=300, n_test=200, steps=150)
    tr_items, te_items, emb = dfs.reduced_data(red_cfg, s_)
    b, tb = dfs.structured_batch(tr_items), dfs.structured_batch(te_items)
    with repro.seeded(s_):
        model = dfs.ReducedDFS(emb)  # a small random start (zero is a saddle)
    if quick:
        with repro.seeded(s_):
            h = dfs.train_reduced(model, b, red_cfg["steps"], red_cfg["lr"],
                                  {"train": b},  # unseen: after training
                                  eval_every=red_cfg["eval_every"],
                                  method=red_cfg["method"])
    else:
        red_ck = checkpoints.load(dfs.CHECKPOINT_SLUG, f"reduced_{i}", config=red_cfg)
        model.load_state_dict({"E": model.E, **red_ck.state_dict("reduced.")})
        h = {k: v["value"] for k, v in red_ck.manifest["history"].items()}
        h["step"] = red_ck.manifest["history"]["loss"]["step"]
        rec.check(f"reduced_data_{s_}",
                  float((red_ck.tensors["emb"] - torch.tensor(emb).float())
                        .abs().max()), 0.0, op="==",
                  note="the regenerated embeddings equal the checkpoint's")
    red_hist[s_], red_loss[s_], red_models[s_], red_tb[s_] = h, h["loss"], model, tb
    red_b[s_] = b
    with torch.no_grad():
        lg, rr = model(tb, record=True)
        red_res[s_] = dict(valid=float(dfs.valid_moves(lg, tb).float().mean()),
                           exact=dfs.move_accuracy(lg, tb)["all"],
                           train=float(dfs.valid_moves(model(b), b).float().mean()),
                           **dfs.reduced_diagnostics(model, tb, rr))
    print(f"seed {s_}: unseen {red_cfg['V']}-node graphs valid "
          f"{red_res[s_]['valid']:.3f}"
          f" (exact {red_res[s_]['exact']:.3f}), training states valid "
          f"{red_res[s_]['train']:.3f}; learned previous-token weight on offset 1 "
          f"{red_res[s_]['prev_offset1']:.2f}, parent head on u's first occurrence "
          f"{red_res[s_]['parent_first']:.2f}, flag visited vs unvisited child "
          f"{red_res[s_]['flag_visited']:.2f} vs {red_res[s_]['flag_fresh']:.2f}")
red_opt = {"gd": "gradient-descent", "adam": "Adam"}[red_cfg["method"]]
red_emb = "fixed random sign embeddings"
fig, ax = plt.subplots(1, 2, figsize=(10, 3.2))
for i, s_ in enumerate(seeds):
    ax[0].plot(red_hist[s_]["step"], red_hist[s_]["loss"], color=plotting.PALETTE[i],
               label=f"seed {s_}")
    ax[1].plot(red_hist[s_]["step"], red_hist[s_]["train/valid"],
               color=plotting.PALETTE[i])
    ax[1].scatter([red_hist[s_]["step"][-1]], [red_res[s_]["valid"]], marker="x",
                  color=plotting.PALETTE[i])
ax[1].axhline(0.95, color="grey", lw=0.8, ls="--")
ax[0].set(xlabel=f"{red_opt} step", ylabel="loss (valid-move set)", yscale="log")
ax[1].set(xlabel=f"{red_opt} step", ylabel="valid-move accuracy",
          title="training states (curve), unseen graphs after training (×)")
ax[0].legend(fontsize=8)
plt.tight_layout()
plt.show()

# %% [markdown]
# **Where the model errs on its training states.** The visited flag is the hard part: on child steps where some
# child of `u` is already visited, the flag must tell that child from the unvisited ones, and a sign embedding
# of width `d < V` overlaps with the others, so the flag of an unvisited node picks up visited look-alikes. Two
# measurements per seed: the trained model's training accuracy on those steps against all other steps, and the
# hand-built construction (section 2's weights, no training) with the *same* sign embeddings, against one-hot
# embeddings and against probe P1's low-coherence codes, on the same training states. The first attempt's
# numbers (its curve cut at its last step) and probe P3's (its stored training curve) follow.

# %%
red_first, red_diag = 1500, {}  # the first attempt's length (issue #70)
for i, s_ in enumerate(seeds):
    h_ = red_hist[s_]
    red_diag["second", s_] = dfs.reduced_flag_split(red_models[s_], red_b[s_])
    red_diag["unseen", s_] = dfs.reduced_flag_split(red_models[s_], red_tb[s_])
    if quick:
        continue
    # the first attempt: the same runs cut at step red_first (Adam is deterministic)
    k_ = max(j for j, st in enumerate(h_["step"]) if st <= red_first)
    red_diag["first", s_] = dict(fit=train.tail_mean(h_["train/valid"][:k_ + 1]),
                                 flat=train.plateau(h_["loss"][:k_ + 1]),
                                 valid=h_["test/valid"][k_])
    # probe P1's codes (same states, same starting draw), hand-built weights only
    cfg_ = scripts.with_seeds(dfs.checkpoint_config(f"reduced_lc_{i}"), [s_])
    with repro.seeded(s_):
        m_ = dfs.ReducedDFS(dfs.reduced_data(cfg_, s_)[2])
    red_diag["codes", s_] = dfs.reduced_flag_split(m_, red_b[s_])
red_p3 = None  # probe P3 ran at seed 1 only (the committed seeds), training curve only
if not quick and seed == 0:
    ck_ = checkpoints.load(dfs.CHECKPOINT_SLUG, "reduced_lc_1",
                           config=dfs.checkpoint_config("reduced_lc_1"))
    v_, l_ = (ck_.manifest["history"][k]["value"] for k in ("train/valid", "loss"))
    st_ = ck_.manifest["history"]["loss"]["step"]
    k_ = max(j for j, st in enumerate(st_) if st <= red_cfg["steps"])  # P1's length
    red_p3 = dict(steps=st_[-1], fit=train.tail_mean(v_), flat=train.plateau(l_),
                  p1_fit=train.tail_mean(v_[:k_ + 1]),
                  p1_flat=train.plateau(l_[:k_ + 1]),
                  p1_steps=st_[k_], loss_p1=l_[k_], loss_end=l_[-1])
    red_p3["pass"] = red_p3["fit"] >= 0.95 and red_p3["flat"] <= 0.05


def _rd(run, key, nd=3):
    return [round(red_diag[run, s_][key], nd) for s_ in seeds]


display(Markdown(
    f"Training valid-move accuracy on child steps with a visited child "
    f"{_rd('second', 'flagged')} per seed, on all other training states "
    f"{_rd('second', 'rest')}. The hand-built construction scores "
    f"{_rd('second', 'construction')} on the training states with the seeds' sign "
    f"embeddings (largest |cosine| between two nodes {_rd('second', 'coherence')}) and "
    f"{_rd('second', 'construction_onehot')} with one-hot embeddings. "
    + (f"With probe P1's low-coherence codes (largest |cosine| "
       f"{_rd('codes', 'coherence')}) the construction scores "
       f"{_rd('codes', 'construction')}. **First attempt** (the same runs at step "
       f"{red_first}): training fit {_rd('first', 'fit', 4)} (bar 0.95), loss plateau "
       f"{_rd('first', 'flat')}, valid-move accuracy on unseen graphs "
       f"{_rd('first', 'valid')}."
       if not quick else "(Quick mode: the run is shorter than the earlier attempt.)")
    + (f" **Probe P3** (P1's codes, {red_p3['steps']} steps), seed {seeds[1]}, from "
       f"its stored training curve: fit {red_p3['fit']:.4f} (bar 0.95), loss plateau "
       f"{red_p3['flat']:.4f} (bar 0.05): "
       + ("meets" if red_p3["pass"] else "misses") + " the rule. The same run at step "
       f"{red_p3['p1_steps']} (P1): fit {red_p3['p1_fit']:.4f}, plateau "
       f"{red_p3['p1_flat']:.4f}; its loss goes from {red_p3['loss_p1']:.4f} there to "
       f"{red_p3['loss_end']:.4f} at the end." if red_p3 else "")))

# %% [markdown]
# **A fourth attempt: the objective or the start, not the bar.** The construction with P1's codes fits seed 1's
# training states almost perfectly, yet the trained models stop lower; the valid-set loss of the construction *at
# its hand-built scale* is higher than that of the trained plateau, which the last round read as the loss
# preferring the trained solution (a decaying step size ended at the same fit). Before any probe ran, we wrote
# down three more configurations in `make_reduced.py`, each changing one thing of P1 (fixed low-coherence codes,
# 3,000 Adam steps): **Q1** the cross-entropy of the exact reference move (largest-index unvisited child, else
# the parent) instead of the valid-set loss; **Q2** a hinge on the valid set (`relu(1 − (best valid logit − best
# invalid logit))`), which does not pay for calibration; **Q3** the valid-set loss from a start *near the
# construction* (each tensor plus Gaussian noise of a tenth of its root-mean-square entry). Q3 would test whether
# training *keeps* the construction, not whether it *finds* it: a weaker claim, and the claim's text says so if Q3
# is selected. Same rule as before (the fit bar with a flat loss at all three seeds, training states only), seed 1
# first, one seed per job. Every probe run appends its outcome to `reduced_probes.json`, read here.

# %% tags=["remove-input"]
red_q_what = {"Q1": "exact-move cross-entropy", "Q2": "hinge on the valid set",
              "Q3": "valid-set loss from near the construction (10 % noise)"}
with open(checkpoints.fetch(dfs.CHECKPOINT_SLUG, "reduced_probes.json")) as f_:
    red_probes = json.load(f_)


def probe_rule(what: dict, first_seed: int = 0):
    """The probes named in `what` under the fit rule: the selected one (the first
    that meets the rule at all three seeds, or None) and one Markdown line per run."""
    passes = {q: {r["seed"]: r["passes"] for r in red_probes if r["probe"] == q}
              for q in what}
    sel = next((q for q in what
                if all(passes[q].get(s_, False) for s_ in (0, 1, 2))), None)
    runs = sorted((r for r in red_probes if r["probe"] in what),
                  key=lambda r: (r["probe"], r["seed"] != first_seed, r["seed"]))
    return sel, [
        f"* **{r['probe']}** ({what[r['probe']]}), seed {r['seed']}: training fit "
        f"{r['train_fit']:.4f} (bar 0.95; {r['start_fit']:.3f} at the start), loss "
        f"plateau {r['loss_plateau']:.4f} (bar 0.05), {r['steps']} steps, "
        f"{r['wall_seconds']} s: "
        + ("**meets** the rule" if r["passes"] else "**misses** the rule")
        for r in runs]


red_sel, _lines = probe_rule(red_q_what, first_seed=1)
display(Markdown("\n".join(
    _lines
    + [f"\nSelected by the fit rule: **{red_sel}** ({red_q_what[red_sel]}); its three "
       "models are read below (whether they can carry the claim depends on their start)."
       if red_sel else
       "\nNo configuration met the rule at all three seeds: nothing was selected, and the "
       "claim below still rests on the second attempt's models."])))

# %% [markdown]
# If a configuration was selected, its three checkpoints (`reduced_<q>_<seed>`, trained by `make_reduced.py`
# on the same training states, with P1's codes) are loaded below (quick mode trains the selected configuration
# live, small) and evaluated on the same unseen graphs, **together with their start before any training**.
# Read at review: a start near the construction may already meet the claim's bar on unseen graphs; models
# trained from it then cannot test whether gradient training *learns* DFS (the claim would hold by construction,
# whatever training did). In that case the claim `gradient_flow_learns` keeps reading the models trained from a
# small random start (the second attempt, above), and the selected probe's models are an illustration of
# stability, reported beside it and not counted. The bar, the conditions and the measure are unchanged.

# %%
# the random-start (second attempt) models, kept before the selected probe's are loaded
red_rand = {s_: dict(red_res[s_], fit=train.tail_mean(red_hist[s_]["train/valid"]),
                     flat=train.plateau(red_loss[s_])) for s_ in seeds}
red_rand_cfg, red_rand_emb = dict(red_cfg), red_emb
red_rand_models = dict(red_models)
red_from = "a small random start"
red_loss_what = "the set of valid moves"
red_start = {}  # the selected models' start, evaluated before training
if red_sel:
    for i, s_ in enumerate(seeds):
        q_name = f"reduced_{red_sel.lower()}_{i}"
        red_cfg = scripts.with_seeds(dfs.checkpoint_config(q_name), [s_])
        if quick:
            red_cfg.update(V=10, d=8, n_range=[5, 8], n_train=300, n_test=200,
                           steps=150)
        tr_items, te_items, emb = dfs.reduced_data(red_cfg, s_)
        b, tb = dfs.structured_batch(tr_items), dfs.structured_batch(te_items)
        with repro.seeded(s_):  # the start: as make_reduced.py draws it
            model = dfs.ReducedDFS(emb)
            if red_cfg.get("init") == "construction":
                model.near_construction(float(red_cfg["init_noise"]))
            red_start[s_] = dfs.reduced_eval(model, b, tb)  # before any training
            if quick:
                h = dfs.train_reduced(model, b, red_cfg["steps"], red_cfg["lr"],
                                      {"train": b}, eval_every=red_cfg["eval_every"],
                                      method=red_cfg["method"], loss=red_cfg["loss"])
        if not quick:
            ck_ = checkpoints.load(dfs.CHECKPOINT_SLUG, q_name, config=red_cfg)
            model.load_state_dict({"E": model.E, **ck_.state_dict("reduced.")})
            h = {k: v["value"] for k, v in ck_.manifest["history"].items()}
            h["step"] = ck_.manifest["history"]["loss"]["step"]
        red_hist[s_], red_loss[s_], red_models[s_] = h, h["loss"], model
        red_b[s_], red_tb[s_] = b, tb
        red_res[s_] = dfs.reduced_eval(model, b, tb)
        print(f"{red_sel}, seed {s_}: unseen graphs valid {red_res[s_]['valid']:.3f} "
              f"(exact {red_res[s_]['exact']:.3f}; at the start "
              f"{red_start[s_]['valid']:.3f}), training states valid "
              f"{red_res[s_]['train']:.3f}")
    red_emb = "fixed low-coherence sign embeddings"
    if red_cfg.get("init") == "construction":
        red_from = (f"the construction plus {red_cfg['init_noise']:.0%} noise (a test "
                    "of stability, not of discovery)")
    red_loss_what = {"valid": "the set of valid moves",
                     "hinge": "a hinge on the valid set",
                     "exact": "the exact reference move"}[red_cfg["loss"]]
# a start that already meets the claim's bar on unseen graphs cannot test learning:
# then the claim reads the random-start models (read at review, #70)
red_start_passes = bool(red_start) and max(
    v["valid"] for v in red_start.values()) >= 0.95
red_c_rand = not red_sel or red_start_passes
red_c = red_rand if red_c_rand else {
    s_: dict(red_res[s_], fit=train.tail_mean(red_hist[s_]["train/valid"]),
             flat=train.plateau(red_loss[s_])) for s_ in seeds}
red_c_cfg, red_c_emb = ((red_rand_cfg, red_rand_emb) if red_c_rand
                        else (red_cfg, red_emb))

# %%
if red_sel:  # the selected probe's models: training curves; unseen graphs after (×)
    fig, ax = plt.subplots(1, 2, figsize=(10, 3.2))
    for i, s_ in enumerate(seeds):
        ax[0].plot(red_hist[s_]["step"], red_hist[s_]["loss"],
                   color=plotting.PALETTE[i], label=f"seed {s_}")
        ax[1].plot(red_hist[s_]["step"], red_hist[s_]["train/valid"],
                   color=plotting.PALETTE[i])
        ax[1].scatter([red_hist[s_]["step"][-1]], [red_res[s_]["valid"]],
                      marker="x", color=plotting.PALETTE[i])
    ax[1].axhline(0.95, color="grey", lw=0.8, ls="--")
    ax[0].set(xlabel=f"{red_opt} step", ylabel=f"loss ({red_cfg['loss']})",
              title=f"probe {red_sel}")
    ax[1].set(xlabel=f"{red_opt} step", ylabel="valid-move accuracy",
              title="training states (curve), unseen graphs after training (×)")
    ax[0].legend(fontsize=8)
    plt.tight_layout()
    plt.show()
red_shift = {}  # how far training moved each tensor from the noise-free construction
if red_sel and red_cfg.get("init") == "construction":
    for s_ in seeds:
        with torch.random.fork_rng():  # the constructor's random draw leaves no trace
            ref_ = dict(dfs.ReducedDFS(red_models[s_].E.detach().numpy())
                        .set_construction().named_parameters())
        red_shift[s_] = {n: (float(F.cosine_similarity(p.detach().flatten(),
                                                       ref_[n].detach().flatten(), 0)),
                             float(p.detach().norm() / ref_[n].detach().norm()))
                         for n, p in red_models[s_].named_parameters()
                         if n != "E" and float(ref_[n].detach().norm()) > 0}
        print(f"{red_sel}, seed {s_}, trained vs construction (cosine, norm ratio): "
              + ", ".join(f"{n} {c:.2f}/{r:.2f}"
                          for n, (c, r) in red_shift[s_].items()))

# %% [markdown]
# **A fifth attempt: a random start that fits at every seed.** Probe Q3 showed that a point of far lower loss
# exists near the construction; the random starts stop short of it. Before the fifth attempt's probes were
# written down we measured, on the stored weights, what the random-start models lack (next cell: the visited
# head's `W1` diagonal, the flag weight `|γ|` and the output maps' norms, each times its learned temperature
# where a model has one): not output
# scale (their output maps are as large as Q3's trained ones or larger) but the sharpness of the visited head
# and the weight of its flag, products that an additive optimiser step grows slowly. Two probes, written down in
# `make_reduced.py` before any ran, each from the small random start with P1's codes and the valid-set loss:
# **R1** a learned log-temperature per head and one on the logits (each head's scores, its sink's included, and
# the logits times `exp(log_temp)`, starting at 1), so a sharpness can grow multiplicatively (noted at review:
# every score a temperature multiplies has its own learned form and sink, so `exp(t)·W` is again a `W`: R1 is
# the same two-layer network, reparametrised; it changes the optimiser's path, not the function class, and the
# optimiser is Adam, not the gradient flow of the paper's theorem); **R2** the
# construction's output maps at the start (`O_c = ρI`, `O_p = ρ/(2V)·I`), every attention parameter random.
# Same rule as before: the first configuration whose training fit reaches the bar with a flat loss at all three
# seeds (seed 0 first), judged on training states only. If one is selected and its start does not already meet
# the claim's bar on unseen graphs (evaluated below), its models carry `gradient_flow_learns`.

# %%
def _sharp(m):  # the quantities the diagnosis compares (stored weights), each times
    # its learned temperature where the model has one (R1; else 1); |γ|: the sign is
    # the flag's
    with torch.no_grad():
        t = {k: float(m.temp(k)) for k in dfs.TEMP_NAMES}
        return dict(W1=float(m.W1.diagonal().mean()) * t["visited"],
                    gamma=abs(float(m.gamma)) * t["child"],
                    O_c=float(m.O_c.norm()) * t["out"],
                    O_p=float(m.O_p.norm()) * t["out"])


red_sharp = {("random", s_): _sharp(red_rand_models[s_]) for s_ in seeds}
if red_sel:
    red_sharp.update({(red_sel, s_): _sharp(red_models[s_]) for s_ in seeds})
for (who, s_), v in red_sharp.items():
    print(f"{who:>6}, seed {s_}: " + ", ".join(f"{k} {x:.1f}" for k, x in v.items()))
red_r_what = {"R1": "learned temperatures",
              "R2": "construction's output maps at the start"}
red_r_sel, _lines = probe_rule(red_r_what)
display(Markdown("\n".join(
    _lines
    + [f"\nSelected by the fit rule: **{red_r_sel}** ({red_r_what[red_r_sel]})."
       if red_r_sel else "\nNo configuration of the fifth attempt met the rule at all "
       "three seeds: nothing was selected."])))

# %%
red_r, red_r_start, red_r_hist, red_r_cfg = {}, {}, {}, None
for i, s_ in enumerate(seeds if red_r_sel else []):  # the selected probe's models
    red_r_cfg = scripts.with_seeds(
        dfs.checkpoint_config(f"reduced_{red_r_sel.lower()}_{i}"), [s_])
    if quick:
        red_r_cfg.update(V=10, d=8, n_range=[5, 8], n_train=300, n_test=200, steps=150)
    tr_items, te_items, emb = dfs.reduced_data(red_r_cfg, s_)
    b, tb = dfs.structured_batch(tr_items), dfs.structured_batch(te_items)
    with repro.seeded(s_):  # the start, as make_reduced.py draws it
        model = dfs.reduced_model(red_r_cfg, emb)
        red_r_start[s_] = dfs.reduced_eval(model, b, tb)  # before any training
        if quick:
            h = dfs.train_reduced(model, b, red_r_cfg["steps"], red_r_cfg["lr"],
                                  {"train": b}, eval_every=red_r_cfg["eval_every"],
                                  method=red_r_cfg["method"], loss=red_r_cfg["loss"])
    if not quick:
        ck_ = checkpoints.load(dfs.CHECKPOINT_SLUG,
                               f"reduced_{red_r_sel.lower()}_{i}", config=red_r_cfg)
        model.load_state_dict({"E": model.E, **ck_.state_dict("reduced.")})
        h = {k: v["value"] for k, v in ck_.manifest["history"].items()}
        h["step"] = ck_.manifest["history"]["loss"]["step"]
    red_r_hist[s_] = h
    red_r[s_] = dict(dfs.reduced_eval(model, b, tb),
                     fit=train.tail_mean(h["train/valid"]),
                     flat=train.plateau(h["loss"]), **_sharp(model))
    print(f"{red_r_sel}, seed {s_}: unseen graphs valid {red_r[s_]['valid']:.3f} "
          f"(at the start {red_r_start[s_]['valid']:.3f}), training fit "
          f"{red_r[s_]['fit']:.4f}; "
          + ", ".join(f"{k} {red_r[s_][k]:.1f}" for k in ("W1", "gamma", "O_c", "O_p")))
red_sharp.update({(red_r_sel, s_): {k: red_r[s_][k]
                                    for k in ("W1", "gamma", "O_c", "O_p")}
                  for s_ in red_r})
# a start that already meets the claim's bar on unseen graphs cannot test learning
red_r_start_passes = bool(red_r_start) and max(
    v["valid"] for v in red_r_start.values()) >= 0.95
red_c_is_r = bool(red_r_sel) and not red_r_start_passes
red_c_label = (f"probe {red_r_sel}, {red_r_what[red_r_sel]}" if red_c_is_r else
               "second attempt" if red_c_rand else f"probe {red_sel}")
red_c_loss = "the set of valid moves" if red_c_rand or red_c_is_r else red_loss_what
red_c_from = "small random start" if red_c_rand or red_c_is_r else red_from
if red_c_is_r:
    red_c, red_c_cfg = red_r, red_r_cfg
    red_c_emb = "fixed low-coherence sign embeddings"
if red_r_sel:
    fig, ax = plt.subplots(1, 2, figsize=(10, 3.2))
    for i, s_ in enumerate(seeds):
        ax[0].plot(red_r_hist[s_]["step"], red_r_hist[s_]["loss"],
                   color=plotting.PALETTE[i], label=f"seed {s_}")
        ax[1].plot(red_r_hist[s_]["step"], red_r_hist[s_]["train/valid"],
                   color=plotting.PALETTE[i])
        ax[1].scatter([red_r_hist[s_]["step"][-1]], [red_r[s_]["valid"]], marker="x",
                      color=plotting.PALETTE[i])
    ax[1].axhline(0.95, color="grey", lw=0.8, ls="--")
    ax[0].set(xlabel="Adam step", ylabel="loss (valid-move set)", yscale="log",
              title=f"probe {red_r_sel} (random start)")
    ax[1].set(xlabel="Adam step", ylabel="valid-move accuracy",
              title="training states (curve), unseen graphs after training (×)")
    ax[0].legend(fontsize=8)
    plt.tight_layout()
    plt.show()

# %% [markdown]
# **What a rule with no learning scores** (added at review, for scale; no bar depends on it). About half of the
# test states are backtracks, so *always return to the parent* is right on those; a rule that is **told** when
# to backtrack and otherwise picks a uniformly random child of `u`, visited or not, isolates the part the
# visited flag has to learn. The learned model should beat both by a clear margin.

# %%
red_base = {}
for s_ in seeds:
    tb_ = red_tb[s_]
    n_ = red_models[s_].E.shape[0]
    child_ = (tb_["src"] == tb_["current"][:, None]) & tb_["edge_mask"]
    vis_ = (F.one_hot(tb_["trace"], n_).bool() & tb_["trace_mask"][:, :, None]).any(1)
    fresh_ = child_ & ~vis_.gather(1, tb_["dst"])
    r_ = torch.rand(child_.shape, generator=torch.Generator().manual_seed(s_))
    pick_ = r_.masked_fill(~child_, -1).argmax(1, keepdim=True)
    pick_ = tb_["dst"].gather(1, pick_)[:, 0]  # a uniformly random child of u
    for name_, mv_ in (("always parent", tb_["parent"]),
                       ("told when to backtrack, random child",
                        torch.where(fresh_.any(1), pick_, tb_["parent"]))):
        lg_ = F.one_hot(mv_.clamp(min=0), n_).float()
        red_base[name_, s_] = float(dfs.valid_moves(lg_, tb_).float().mean())
for name_ in ("always parent", "told when to backtrack, random child"):
    print(f"{name_:38s} valid-move accuracy per seed "
          f"{[round(red_base[name_, s_], 3) for s_ in seeds]}")
# the claim's models (red_c: same unseen test states, which do not depend on the
# embeddings or the start); the fourth attempt's selected probe (red_res) beside them
print(f"{'ReducedDFS, the claim (' + red_c_label + ')':38s} valid-move accuracy per "
      f"seed {[round(red_c[s_]['valid'], 3) for s_ in seeds]}")
if red_sel and (red_c_is_r or red_c_rand):  # red_res: the probe's, not the claim's
    print(f"{'ReducedDFS, probe ' + red_sel + ' (not counted)':38s} valid-move "
          f"accuracy per seed {[round(red_res[s_]['valid'], 3) for s_ in seeds]}")

# %% [markdown]
# ## 6. A width-limited trained comparison: one layer vs two layers
#
# The separation is about width: a single layer can only cancel visited children in the residual stream, which
# needs `d ~ N`; two layers mark them with a flag and need only `d = O(log N)`. A trained comparison can only show
# this when the one-layer model is *narrower than N*. We train both architectures with the **same parameters**
# (`W1, W2 ∈ R^{d×d}`, `γ`, `σ`): the two-layer `StructuredDFS` above and its one-layer counterpart
# `StructuredOneLayer` (a child head over the edges, a visited head over the trace, `logits = ρE(child − γ·visited)`,
# the construction `OneLayerDFS` made learnable). Graphs have `N = 16` nodes (G(16, 0.3)), node embeddings are <!-- paper -->
# random signs of width `d = 8 = N/2`, training data is curated, and both are trained to a plateau by full-batch
# Adam, one run per seed. The training does not fit the 5-minute run: `data/12_transformer_dfs/make_width_limited.py`
# trained it once and the default run loads the weights, regenerates the same data from the seed and evaluates;
# quick mode trains a smaller pair live.

# %%
wl_cfg = dfs.checkpoint_config("width_limited")
if quick:
    wl_cfg.update(N=10, d=5, n_train=200, n_test=200, steps=80, seeds=[seed])
    wl_ck = None
else:
    # seed 0: the committed config; other seeds: `make data SEEDS=...`
    wl_cfg = scripts.with_seeds(wl_cfg, seeds)
    wl_ck = checkpoints.load(dfs.CHECKPOINT_SLUG, "width_limited", config=wl_cfg)
    wl_cfg["seeds"] = checkpoints.require_seeds(wl_ck, seeds)  # clear error if absent
wl_res, wl_models, wl_loss = {}, {}, {}
for s_ in wl_cfg["seeds"]:
    train_items, test_items, emb = dfs.width_limited_data(wl_cfg, s_)
    tb, b = dfs.structured_batch(test_items), dfs.structured_batch(train_items)
    if wl_ck is not None:
        rec.check(
            f"width_limited_data_{s_}",
            float((wl_ck.tensors[f"emb/{s_}"] - torch.tensor(emb).float()).abs().max()),
            0.0,
            op="==",
            note="the regenerated embeddings equal the checkpoint's "
            "(same data, same seed)",
        )
    for kind in wl_cfg["models"]:
        model = dfs.make_structured(kind, emb, wl_cfg)
        if wl_ck is None:
            with repro.seeded(s_):
                wl_loss[kind, s_] = dfs.gradient_flow(
                    model, b, wl_cfg["steps"], wl_cfg["lr"], method=wl_cfg["method"]
                )["loss"]
        else:
            wl_loss[kind, s_] = wl_ck.manifest["history"][f"loss/{kind}/{s_}"]["value"]
            model.load_state_dict({**wl_ck.state_dict(f"{kind}/{s_}."), "E": model.E})
        wl_models[kind, s_] = model
        with torch.no_grad():
            wl_res[kind, s_] = {
                "train": dfs.move_accuracy(model(b), b),
                "test": dfs.move_accuracy(model(tb), tb),
            }
        r_ = wl_res[kind, s_]
        print(
            f"seed {s_} {kind}-layer (d={wl_cfg['d']}, N={wl_cfg['N']}): train "
            f"{r_['train']['all']:.3f}; unseen graphs {r_['test']['all']:.3f} (child "
            f"{r_['test']['child']:.3f}, backtrack {r_['test']['backtrack']:.3f})"
        )
n_par = {
    k: sum(p.numel() for p in wl_models[k, wl_cfg["seeds"][0]].parameters())
    for k in wl_cfg["models"]
}
print("learnable parameters:", n_par)
wl_two = [wl_res["two", s_]["test"]["all"] for s_ in wl_cfg["seeds"]]
wl_one = [wl_res["one", s_]["test"]["all"] for s_ in wl_cfg["seeds"]]
if wl_ck is not None:
    checkpoints.plot_history(wl_ck.manifest)

# %% [markdown]
# **Control: is it the width?** The same pair trained live with one-hot embeddings (`d = N`, one seed, fewer
# steps): if the one-layer model's child selection recovers at full width, its failure above is the width limit,
# not an optimisation failure of the architecture.

# %%
ctl_cfg = dict(wl_cfg, d=wl_cfg["N"], steps=wl_cfg["steps"] // 2)
train_items, test_items, emb = dfs.width_limited_data(ctl_cfg, seeds[0])
tb, b = dfs.structured_batch(test_items), dfs.structured_batch(train_items)
ctl = {}
for kind in ctl_cfg["models"]:
    model = dfs.make_structured(kind, emb, ctl_cfg)
    with repro.seeded(seeds[0]):
        dfs.gradient_flow(model, b, ctl_cfg["steps"], ctl_cfg["lr"], method="adam")
    with torch.no_grad():
        ctl[kind] = dfs.move_accuracy(model(tb), tb)
    print(
        f"d = N = {ctl_cfg['N']}, {kind}-layer: unseen graphs {ctl[kind]['all']:.3f} "
        f"(child {ctl[kind]['child']:.3f}, backtrack {ctl[kind]['backtrack']:.3f})"
    )

# %% [markdown]
# **The separation as a scaling.** One width is one point. We train the same pair at every width
# `d ∈ {4, 6, 8, 12, 16, 24}` on graphs of `N = 16` and `N = 32` nodes (G(N, p) as above, curated states), 3 seeds, and
# measure on unseen graphs both the **exact-move** accuracy (the reference move, largest index first) and the
# **valid-move** accuracy (any unvisited child when one exists, else the parent): the separation is about
# telling visited from unvisited children, and the valid-move accuracy measures exactly that. The width a model
# *needs* is the smallest `d` in the grid whose valid-move accuracy reaches `scale_bar` (fixed before training).
# The training does not fit the 5-minute run: `data/12_transformer_dfs/make_width_scaling.py` trained it once;
# the default run regenerates the data from the seed and evaluates the stored weights; quick mode trains a small
# version live.

# %%
scale_bar = 0.9  # valid-move accuracy that counts as "the width suffices"
ws_cfg = scripts.with_seeds(dfs.checkpoint_config("width_scaling"), seeds)
if quick:
    ws_cfg.update(Ns=[10], dims=[4, 8], n_train=200, n_test=200, steps=60)
    ws_ck = None
else:
    ws_ck = checkpoints.load(dfs.CHECKPOINT_SLUG, "width_scaling", config=ws_cfg)
    ws_cfg["seeds"] = checkpoints.require_seeds(ws_ck, seeds)
ws, emb_diff = {}, 0.0


def width_eval(model, b, tb, loss):
    """One model of the sweep: unseen valid/exact accuracy, training exact, plateau."""
    with torch.no_grad():
        logits = model(tb)
        return dict(valid=float(dfs.valid_moves(logits, tb).float().mean()),
                    exact=dfs.move_accuracy(logits, tb)["all"],
                    train=dfs.move_accuracy(model(b), b)["all"],
                    plateau=train.plateau(loss))


for s_ in tqdm(ws_cfg["seeds"], desc="width scaling"):
    for N in ws_cfg["Ns"]:
        train_items, test_items, embs = dfs.width_scaling_data(ws_cfg, N, s_)
        b, tb = dfs.structured_batch(train_items), dfs.structured_batch(test_items)
        for d, emb in embs.items():
            for kind in ws_cfg["models"]:
                key = f"{kind}/N{N}/d{d}/{s_}"
                model = dfs.make_structured(kind, emb, ws_cfg)
                if ws_ck is None:
                    with repro.seeded(s_):
                        loss = dfs.gradient_flow(model, b, ws_cfg["steps"],
                                                 ws_cfg["lr"], method=ws_cfg["method"])
                        loss = loss["loss"]
                else:
                    loss = ws_ck.manifest["history"][f"loss/{key}"]["value"]
                    model.load_state_dict({**ws_ck.state_dict(key + "."), "E": model.E})
                    stored = ws_ck.tensors[f"emb/N{N}/d{d}/{s_}"]
                    emb_diff = max(emb_diff, float((stored - model.E).abs().max()))
                ws[kind, N, d, s_] = width_eval(model, b, tb, loss)
Ns_ws = ws_cfg["Ns"]
dims_of = {(k, N): list(ws_cfg["dims"]) for k in ws_cfg["models"] for N in Ns_ws}
if ws_ck is not None:
    rec.check("width_scaling_data", emb_diff, 0.0, op="==",
              note="the regenerated embeddings equal the checkpoint's at every (N, d, "
              "seed) (same data, same seed)")

# %% [markdown]
# **Wider one-layer models.** At `N = 32` the one-layer model stayed below the bar up to `d = 24`, so its
# width was only a lower bound. `make_width_scaling.py` trained the one-layer model further at `d = 32` and
# `d = 48` (`width_wide_<seed>`: the same training and test states, the same embeddings for the old widths, one
# seed per job; the two-layer model already reaches the bar inside the old grid). A one-layer model that still
# misses the bar at `d = 48` leaves the ratio a lower bound, now at 48.

# %%
if not quick:
    wide_gap = 0.0
    for i, s_ in enumerate(ws_cfg["seeds"]):
        wd_cfg = scripts.with_seeds(dfs.checkpoint_config(f"width_wide_{i}"), [s_])
        wd_ck = checkpoints.load(dfs.CHECKPOINT_SLUG, f"width_wide_{i}", config=wd_cfg)
        N = wd_cfg["Ns"][0]
        train_items, test_items, embs = dfs.width_scaling_data(wd_cfg, N, s_)
        b, tb = dfs.structured_batch(train_items), dfs.structured_batch(test_items)
        for d in wd_cfg["train_dims"]:
            for kind in wd_cfg["models"]:
                key = f"{kind}/N{N}/d{d}/{s_}"
                model = dfs.make_structured(kind, embs[d], wd_cfg)
                model.load_state_dict({**wd_ck.state_dict(key + "."), "E": model.E})
                emb_diff = max(emb_diff, float(
                    (wd_ck.tensors[f"emb/N{N}/d{d}/{s_}"] - model.E).abs().max()))
                ws[kind, N, d, s_] = width_eval(
                    model, b, tb, wd_ck.manifest["history"][f"loss/{key}"])
                stored = wd_ck.manifest["metrics"][f"test_valid/{key}"]
                wide_gap = max(wide_gap, abs(ws[kind, N, d, s_]["valid"] - stored))
            for kind in wd_cfg["models"]:
                dims_of[kind, N] = sorted(set(dims_of[kind, N]) | {d})
    rec.check("width_wide_data", emb_diff, 0.0, op="==",
              note="the regenerated embeddings of the wider widths equal the "
              "checkpoints'")
    rec.check("width_wide_eval", wide_gap, 1e-6, op="<=",
              note="largest difference of a wide model's unseen-graph valid-move "
              "accuracy between this run and the training script's (stored weights, "
              "same data)")
dims_ws = dims_of["one", max(Ns_ws)]  # the widest grid: the one-layer model's at N = 32
need = {(k, N, s_): dfs.width_needed(dims_of[k, N], [ws[k, N, d, s_]["valid"]
                                                     for d in dims_of[k, N]],
                                     target=scale_bar)
        for k in ws_cfg["models"] for N in Ns_ws for s_ in ws_cfg["seeds"]}
for N in Ns_ws:
    for k in ws_cfg["models"]:
        for q in ("valid", "exact"):
            row = [np.mean([ws[k, N, d, s_][q] for s_ in ws_cfg["seeds"]])
                   for d in dims_of[k, N]]
            print(f"N={N:2d} {k}-layer {q:5s} (mean over seeds) by d {dims_of[k, N]}: "
                  f"{np.round(row, 3).tolist()}")
        print(f"      {k}-layer width needed per seed: "
              f"{[need[k, N, s_] for s_ in ws_cfg['seeds']]}")

# %%
fig, ax = plt.subplots(1, len(Ns_ws), figsize=(5 * len(Ns_ws), 3.4), squeeze=False)
for a_, N in zip(ax[0], Ns_ws):
    for i, k in enumerate(ws_cfg["models"]):
        for q, ls in (("valid", "-"), ("exact", "--")):
            v = np.array([[ws[k, N, d, s_][q] for d in dims_of[k, N]]
                          for s_ in ws_cfg["seeds"]])
            a_.plot(dims_of[k, N], v.mean(0), ls=ls, marker="o",
                    color=plotting.PALETTE[i],
                    label=f"{k} layer{'s' if k == 'two' else ''}, {q} move")
            a_.fill_between(dims_of[k, N], v.min(0), v.max(0),
                            color=plotting.PALETTE[i],
                            alpha=0.12)
    a_.axhline(scale_bar, color="k", lw=0.8)
    a_.set(title=f"N = {N}", xlabel="width d", ylabel="accuracy, unseen graphs",
           ylim=(0, 1.02))
ax[0][0].legend(fontsize=7)
plt.tight_layout()
plt.show()

# %% [markdown]
# ## 7. Generic transformers (not width-limited): an illustration
#
# For comparison with common practice, a generic transformer (`helpers.nn.Transformer`, one edge token per pair)
# trained with Adam. Its width (32 and more) exceeds the graphs' 4–8 nodes, so no width separation can show here;
# this section illustrates how far a small generic model gets, and compares its attention with the construction.
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


def loss_fn(model, b):  # node tokens only, read at the current node
    return F.cross_entropy(dfs.generic_next_logits(model, b, V), b["target"])


def evaluate(model, pool):
    return dfs.generic_accuracy(model, pool, codec)


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


# %%
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

# %% [markdown]
# **Where the generic models' errors sit.** Both generic models stop well short of the constructions. Two
# readings are possible: they cannot tell visited from unvisited children (then their moves are often *invalid*),
# or they pick a valid move but not the reference's tie-break (the largest label among the unvisited children,
# which the model has to infer from node labels it sees as unrelated tokens). The valid-move accuracy
# separates the two, and the accuracy on the training states tells underfitting from poor generalisation.

# %%
gvalid = {
    name: {"unseen": dfs.generic_valid(m, test_pool, codec),
           "larger": dfs.generic_valid(m, big_pool, codec)}
    for name, m in [("two-layer", two), ("one-layer", one)]
}
gtrain = {name: evaluate(m, train_pool)["all"] for name, m in [("two-layer", two),
                                                               ("one-layer", one)]}
print("exact-move accuracy on the training states:",
      {k: round(v, 3) for k, v in gtrain.items()})
for name, r in gvalid.items():
    print(f"{name:9s} valid moves, unseen graphs: {r['unseen']}\n{'':9s} "
          f"{V}-node graphs: {r['larger']}")

# %% tags=["remove-input"]
_ex = {k: res[k]["unseen"] for k in res}
_va = {k: gvalid[k]["unseen"] for k in gvalid}
_lines = []
for k in ("two-layer", "one-layer"):
    _gap = _va[k]["all"] - _ex[k]["all"]
    _lines.append(
        f"* The {k} model: exact moves {_ex[k]['all']:.2f} (child steps "
        f"{_ex[k]['child']:.2f}, backtracks {_ex[k]['backtrack']:.2f}), valid moves "
        f"{_va[k]['all']:.2f} (child steps {_va[k]['child']:.2f}); "
        + (f"{_gap:.2f} of its accuracy is lost to the tie-break alone."
           if _gap >= 0.05 else "the tie-break explains little of its error.")
    )
_gap_fit = {k: gtrain[k] - _ex[k]["all"] for k in gtrain}
_gflat = {k: train.plateau(hist[k].loss) for k in hist}  # the generic models' loss
_fit_txt = (
    "both fit their training states about as poorly as the unseen ones (training "
    + ", ".join(f"{k} {gtrain[k]:.2f}" for k in gtrain)
    + "): they underfit within this budget, rather than memorise the training graphs "
    + ("(their loss still falls at the end" if min(_gflat.values()) > 0.05 else
       "(their loss is flat at the end" if max(_gflat.values()) <= 0.05 else
       "(one model's loss still falls at the end, the other's is flat")
    + ": plateau " + ", ".join(f"{k} {v:.2f}" for k, v in _gflat.items())
    + " of the drop in the last fifth, against the book's 0.05 for a flat curve; "
    "noted at review)"
    if max(_gap_fit.values()) < 0.1 else
    "they fit their training states better than unseen ones (training "
    + ", ".join(f"{k} {gtrain[k]:.2f}" for k in gtrain)
    + "): part of the gap is generalisation"
)
_hard = "backtracks" if all(_va[k]["backtrack"] < _va[k]["child"] for k in _va) else \
    "child steps"
display(Markdown("\n".join(_lines + [
    f"* Why both stop near the same accuracy: {_fit_txt}. Their hardest steps are "
    f"{_hard} (finding the parent means locating the first occurrence of the current "
    "node and reading the token before it), and on larger graphs their valid-move "
    "accuracy falls to "
    + ", ".join(f"{gvalid[k]['larger']['all']:.2f} ({k})" for k in gvalid)
    + ". At these sizes (graphs of 4–6 nodes, width 32 or more) no width limit applies, "
    "so one and two layers end up alike; the paper's separation is about width, "
    "measured in sections 3 and 6."
])))

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
    int(dfs.generic_next_logits(two, b, V).argmax()),
)

# %% [markdown]
# **How close is the trained attention to the construction's, over many states?** One picture is one state. Over
# the child-selection states of the unseen graphs we measure, for the trained two-layer model, the attention
# mass its best head puts where the construction looks: in layer 2, from the current node onto the out-edges of
# that node (the *child* head); in layer 1, from an edge `(a, b)` whose head `b` is visited onto the trace
# tokens of `b` (the *visited* head). Next to each, the mass that uniform attention over the same keys would put
# there.

# %%
agree = {"L2 current → its out-edges": [], "L1 edge → trace tokens of its head": []}
chance = {k: [] for k in agree}
child_items = [it for it in test_pool if it["kind"] == "child"][:150]
with torch.no_grad():
    b_all = dfs.collate(child_items, codec)
    _, r_all = two(b_all["ids"], mask=b_all["mask"], pos=b_all["pos"], record=True)
for i, it in enumerate(child_items):
    e_i, tr_i = np.asarray(it["edges"]), list(it["trace"])
    m_i, k_i = len(e_i), len(tr_i)
    a1, a2 = r_all["attn"][0][i], r_all["attn"][1][i]  # (heads, T, T)
    own = torch.tensor(e_i[:, 0] == tr_i[-1])
    agree["L2 current → its out-edges"].append(
        float(a2[:, m_i + k_i - 1, :m_i][:, own].sum(-1).max()))
    chance["L2 current → its out-edges"].append(float(own.float().mean()))
    for j in np.flatnonzero(np.isin(e_i[:, 1], tr_i)):
        hit = torch.tensor([v == e_i[j, 1] for v in tr_i])
        agree["L1 edge → trace tokens of its head"].append(
            float(a1[:, j, m_i:m_i + k_i][:, hit].sum(-1).max()))
        chance["L1 edge → trace tokens of its head"].append(
            float(hit.sum()) / (m_i + k_i))
for k in agree:
    print(f"{k}: trained best head {np.mean(agree[k]):.2f}, uniform "
          f"{np.mean(chance[k]):.2f} (mean over {len(agree[k])} cases)")

# %% [markdown]
# ## 8. Interaction
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
# ## 9. The claims record
#
# Checks first (they fail the notebook if false), then the paper's claims next to our measurements. The record
# computes each claim's verdict (held / mixed / not held) from the measured number, one per seed where training is
# involved, and a target fixed before running: a one-layer width exponent of at least 0.75 counts as quadratic <!-- paper -->
# size (`N·d ≳ N^1.75`); for two layers, width growing like `log N` means a fit linear in `log N` beats one linear <!-- paper -->
# in `N`; halving the mean search length at horizon 2 counts as a large look-ahead gain, and shortening it by a
# factor of at least 1.8 per extra squaring layer (geometric mean over the built horizons) counts as the <!-- paper -->
# exponential gain of doubling; a one-layer width at least twice the two-layer's (trained, bar `scale_bar`,
# `N = 32`) counts as the separation; 95 % on unseen graphs
# counts as learning DFS; 10 points count as "curation matters" and as "a second layer is necessary". A width
# exponent that cannot be fitted (fewer than two N reach 95 % in the width grid) is recorded as untested.
#
# **Conditions.** The claims about trained models rest on conditions, measured per seed and fixed with the claims:
# every trained model's loss curve is flat at the end (`train.plateau(loss) <= 0.05`, the book-wide rule), and a <!-- paper -->
# model whose *generalisation* a claim speaks of fits its own training states (final training accuracy, mean of the
# last tenth of its evaluations, `>= 0.95`). The width-limited one-layer model is not asked to fit: its failure to <!-- paper -->
# fit at `d = N/2` is the effect the claim measures. At a seed where a condition fails, the claim is left out there;
# unless most seeds are left (2 of 3) it is *inconclusive*.
#
# **The doubling bar and its floor** (condition `lookahead_room`, added at review after the numbers were read;
# it is arithmetic on the claim's own definition, not a threshold). The per-layer ratios telescope: their
# geometric mean over `k` doublings is `(len(h = 1) ÷ len(h = 2^k))^(1/k)`, and no trace is shorter than the
# shortest `s → t` path. So `(len(h = 1) ÷ shortest path)^(1/k)` is the most *any* network could show on these
# graphs; where it is below the bar, halving per layer is impossible at our scale and the claim is inconclusive,
# not "not held". The paper's statement itself, horizon `2^J` from `J` squaring layers, is what the checks
# `lookahead_construction_exact` and `lookahead_networks_equal_rule` verify; search length is our
# operationalization of its "exponential gain in search efficiency". The doubling is measured on grids whose
# `s → t` pairs are at least `grid_min_dist` edges apart (section 4), because on the sparse random graphs the
# floor left no room at all. An earlier build used 12 × 12 grids, where the room stayed below the bar at every
# seed; the grid was then enlarged to 20 × 20 with 8 pairs per seed, a choice made from a pilot on other draws that
# computed only the room (the rule's `h = 1` trace against the shortest path), not the claim's ratio. The
# condition and the bar are unchanged. (Read at review: the `h = 1` length is also the numerator of the
# telescoped claim, so a grid picked for a long `h = 1` trace can only have helped the claim, not hurt it.)
# That build's room (section 4) was too close to the bar to tell a failing network from a capped one.
# **This build** (round 5, registered in `make_lookahead.py` before its draws were made): three doublings
# (horizons 1–8) on fresh 20 × 20 grids with 16 pairs per seed, a design chosen from a pilot on other draws that
# again computed only the room; on the claim's draws the room is computed first and the networks run only where
# it is at least 2.0 (the check `lookahead_room_before` confirms the stored room is the networks' own). <!-- paper -->
# Known when choosing: the earlier build's networks' shrink per layer over horizons 1–16, and that on those
# draws it is smaller over horizons 1–8 (both computed in section 4), so dropping horizon 16 did not favour
# the claim there.
#
# **The reduced scaffold** (`gradient_flow_learns`): the bar (95 % on unseen graphs) and the conditions are <!-- paper -->
# those of the full-scaffold claim; the measure is the valid-move accuracy, because no tie-break is imposed.
# What stays given is said in section 5 and in the claim's note. A claim about *learning* must start from a point
# that does not already pass: where the selected probe's start (Q3: the construction plus 10 % noise) already
# meets the bar on unseen graphs, its models cannot fail the claim, so the claim reads the models trained from a
# small random start (the second attempt) and Q3's are reported beside it as an illustration of stability
# (read at review; the bar, the measure and the conditions are unchanged). The fifth attempt's probes (R1, R2)
# start from the small random start; a selected one whose start does not meet the bar carries the claim
# (the rule written down with them, before they ran).
#
# **Known limits.** The doubling networks use one-hot node embeddings: a reach set is an arbitrary subset of
# nodes and takes width `N` per level, so their size is `O(N² log h)`, not the paper's (unknown) budget; their
# rollouts use the closed-form forward pass, checked equal to the token-by-token one on small graphs. The
# constructed width scalings use one graph per `N` (the embedding draws are the replication). The first
# gradient-flow experiment is heavily scaffolded: one-hot embeddings make the visited flag exact, the parent
# enters through the sink, the tie-break and the readout are fixed, and only `W1`, `W2` and two scalars are
# learned; the trained width comparisons share that scaffold with sign embeddings. The reduced-scaffold model
# learns its value and output maps, the previous-token and parent heads and a child preference, but its routing
# (which token attends to which), its fixed sign embeddings and the readout through them are still given, it has
# no MLP, and it is trained on the set of valid moves rather than on one reference trace. Everything about the
# paper's architecture, data curation and trace format is reconstructed from its abstract.

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
    float(np.max(np.diff(pm))),
    0.0,
    op="<=",
    note="largest increase of the networks' mean trace length (pooled over seeds) "
    f"between consecutive horizons {horizons}",
)
rec.check(
    "lookahead_construction_exact",
    la_same / la_total,
    1.0,
    op="==",
    note=f"hand-built DoublingDFS, token-by-token forward (horizons 1, 2, 4, 8: 2 to 5 "
    f"layers) vs the rule, {la_total} rollouts on random graphs of 6–10 nodes",
)
rec.check(
    "lookahead_networks_equal_rule",
    look_same / look_total,
    1.0,
    op="==",
    note=f"every rollout of the look-ahead experiment ({look_total}: random graphs, "
    f"N = {N_look}, horizons {horizons}, run here; {grid_side}×{grid_side} grids, "
    "horizons "
    f"{horizons_g}, {'run here' if quick else 'measured by make_lookahead.py'}) equals "
    "the rule's trace",
)
rec.check(
    "structured_construction_exact",
    cons_acc,
    1.0,
    op="==",
    note="the gradient-flow architecture at the hand-built point (W1 = W2 = 30 I, "
    f"γ = 60, σ = 22.5) on the unseen {gf_V}-node test states",
)

# %%
one_statement = (
    "One layer needs width ~N (size ~N²) for DFS child selection on dense graphs"
)
one_note = (
    f"widths for 95 % per N ({n_draws} embedding draws each, bisection over "
    f"{dims_one_fine[0]}–{dims_one_fine[-1]}): {one_draws}; γ tuned per width; "
    f"single-draw ×2 grid gave exponent {exp_one:.2f}; illustration for our one-layer "
    "construction, not a lower-bound proof; the draws are the replication (one seed)"
)
if np.isfinite(exp_one_draws):
    rec.claim(
        "one_layer_width_growth",
        one_statement,
        paper="size Ω(N²) (width exponent 1)",
        measured=exp_one_draws,
        op=">=",
        target=0.75,
        unit="fitted exponent of d vs N (all draws)",
        note=one_note,
    )
else:
    rec.untested(
        "one_layer_width_growth",
        one_statement,
        paper="size Ω(N²) (width exponent 1)",
        reason="fewer than two draws reached 95 % within the width grid, so no "
        "exponent can be fitted; " + one_note,
    )
rec.claim(
    "two_layer_width_log",
    "Two layers need only width O(log N) (size O(N log N))",
    paper="size O(N log N)",
    measured=sse_lin / max(sse_log, 1e-9),
    op=">",
    target=1.0,
    unit="squared error of a fit linear in N ÷ that of a fit linear in log₂N",
    note=f"width for 95 % child selection, N = {Ns_scale}, {n_draws} embedding draws "
    f"per N (one graph per N): d ≈ {a_log:.1f} + {b_log:.2f}·log₂N, slope 95 % "
    f"interval [{b_log - half:.2f}, {b_log + half:.2f}]; linear fit "
    f"{a_lin:.1f} + {b_lin:.3f}·N; {int((~fin).sum())} draws never reached 95 % in "
    f"the grid (left out). The draws are the replication (one seed)",
)

# %%
h0, h2 = horizons.index(0), horizons.index(2)
gain = [mean_len[s_][h0] / mean_len[s_][h2] for s_ in seeds]
rec.claim(
    "lookahead_gain",
    "Depth buys look-ahead: horizon 2 shortens the search a lot",
    paper="L layers give look-ahead 2^(L−3): an exponential gain in search "
    "efficiency",
    measured=gain,
    op=">",
    target=2.0,
    unit="mean trace length, horizon 0 ÷ horizon 2 (networks)",
    baseline=[mean_len[s_][h0] for s_ in seeds],
    note=f"hand-built networks ({n_layers[0]} layers for plain DFS, {n_layers[2]} for "
    f"horizon 2), reachable (s, t) pairs on sparse random graphs, N = {N_look}, "
    f"{look_pairs} draws per seed; mean lengths per seed "
    f"{ {s_: np.round(mean_len[s_], 1).tolist() for s_ in seeds} } for horizons "
    f"{horizons}",
)
doubling = {s_: [grid_mean[s_][i] / grid_mean[s_][i + 1]
                 for i in range(len(horizons_g) - 1)] for s_ in seeds}
# the ratios telescope: their geometric mean is (len at h=1 / len at the last h)^(1/k),
# and no trace is shorter than the shortest path: this is the most any network can show
n_dbl = len(horizons_g) - 1
ceiling = [(grid_mean[s_][0] / np.mean(grid_dist[s_])) ** (1 / n_dbl) for s_ in seeds]
doubling_bar = 1.8  # the issue's bar (#70)
rec.condition(
    "lookahead_room", ceiling, ">=", doubling_bar,
    statement="the shortest-path floor leaves room for the bar: halving per layer is "
    "possible at all on these graphs",
    unit=f"(mean trace at h = 1 ÷ mean shortest s→t path)^(1/{n_dbl}), the largest "
    "geometric-mean shrink any network could show",
)
rec.claim(
    "lookahead_doubling",
    "Each extra squaring layer doubles the horizon and so nearly halves the search",
    paper="an L-layer transformer performs DFS with look-ahead horizon 2^(L−3)",
    measured=[float(np.exp(np.mean(np.log(doubling[s_])))) for s_ in seeds],
    op=">=",
    target=doubling_bar,
    unit="trace length at L layers ÷ at L + 1 layers (geometric mean over h = 1 … "
    f"{horizons_g[-1]})",
    given=("lookahead_room",),
    note="hand-built doubling networks (one squaring layer per doubling) on "
    f"{grid_side}×{grid_side} grids, {grid_pairs} (s, t) pairs per seed at least "
    f"{grid_min_dist} edges apart (mean shortest path "
    f"{[round(float(np.mean(grid_dist[s_])), 1) for s_ in seeds]}); ratios per layer "
    f"and seed {({s_: np.round(doubling[s_], 2).tolist() for s_ in seeds})} for "
    f"horizons {horizons_g} (layers {[n_layers[h] for h in horizons_g]})"
    + (f"; earlier build (h = 1–16, other draws): {np.round(old_ratio, 2).tolist()}, "
       f"room {np.round(old_room, 2).tolist()}" if old_ratio else ""),
)

# %%
if room_pre:  # the room make_lookahead.py computed before the networks: their own?
    rec.check(
        "lookahead_room_before",
        max(max(abs(room_pre[s_][0] - c_) for s_, c_ in zip(seeds, ceiling)),
            max(float(np.abs(room_pre[s_][1] - np.asarray(grid_len[s_, 1])).max())
                for s_ in seeds)),
        1e-9, op="<=",
        note="room and h = 1 traces stored by make_lookahead.py before the networks "
        "ran (rule only) vs the networks' h = 1 traces: the same numbers; every seed's "
        f"room was >= {dfs.ROOM_BAR} there (else no networks would have run)",
    )

# %%
# conditions: each trained model at its plateau; a model whose generalisation is claimed
# fits its own training states (the book-wide rules, fixed with the claims)
flat, fits = "<=", ">="
for data in ("curated", "naive"):
    rec.condition(f"gf_{data}_converged",
                  [train.plateau(gf_hist[data, s_]["loss"]) for s_ in seeds],
                  flat, 0.05,
                  statement=f"gradient flow on {data} data: loss flat at the end",
                  unit="share of the loss drop in the last fifth")
    rec.condition(f"gf_{data}_fits",
                  [train.tail_mean(gf_hist[data, s_]["train/all"]) for s_ in seeds],
                  fits, 0.95,
                  statement=f"gradient flow on {data} data fits its training states",
                  unit="training next-move accuracy")
for kind in wl_cfg["models"]:
    rec.condition(f"wl_{kind}_converged",
                  [train.plateau(wl_loss[kind, s_]) for s_ in wl_cfg["seeds"]], flat,
                  0.05,
                  statement=f"width-limited {kind}-layer model: loss flat at the end",
                  unit="share of the loss drop in the last fifth")

# %%
cos = {k: [round(gf_hist["curated", s_][f"cos_{k}"][-1], 2) for s_ in seeds]
       for k in ("W1", "W2")}
rec.claim(
    "gradient_flow_learns_curated",
    "Gradient flow on the two-layer architecture, with curated data, learns DFS that "
    "generalises to unseen (larger) graphs",
    paper="two-layer transformers provably learn DFS via gradient flow with "
    "curated data",
    measured=gf_acc["curated"], op=">=", target=0.95,
    unit=f"next-move accuracy, unseen {gf_V}-node graphs",
    given=("gf_curated_converged", "gf_curated_fits"),
    note=f"{gf_steps} full-batch GD steps (lr {gf_lr}) from W = 0 on "
    f"{gf_states} states of {gf_range[0]}–{gf_range[1]}-node graphs; "
    f"final cos(W1, I) {cos['W1']}, cos(W2, I) {cos['W2']}; reconstructed "
    "architecture (one-hot embeddings, exact parent head given)",
)
# %%
for cid, key, op_, bar, what in (
    ("reduced_converged", "flat", flat, 0.05, "loss flat at the end"),
    ("reduced_fits", "fit", fits, 0.95, "fits its training states (valid moves)"),
):
    rec.condition(cid, [red_c[s_][key] for s_ in seeds], op_, bar,
                  statement=f"reduced-scaffold model: {what}",
                  unit="share of the loss drop in the last fifth" if op_ == flat
                  else "training valid-move accuracy (last tenth of the curve)")
red_q_note = (  # the selected probe, when its start already meets the bar: not counted
    f"; not counted: probe {red_sel}'s models (from {red_from}), whose start already "
    f"scores {[round(red_start[s_]['valid'], 3) for s_ in seeds]} on unseen graphs "
    "(a claim on them would hold by construction), reach "
    f"{[round(red_res[s_]['valid'], 3) for s_ in seeds]} after training"
    if red_sel and red_c_rand else "")
rec.claim(
    "gradient_flow_learns",
    "Gradient training from a " + red_c_from
    + ", with a reduced scaffold (learned value/output maps, previous-token and parent "
    "heads; sign embeddings with d < N), learns DFS that generalises to unseen graphs",
    paper="two-layer transformers provably learn DFS via gradient flow with "
    "curated data",
    measured=[red_c[s_]["valid"] for s_ in seeds], op=">=", target=0.95,
    unit=f"valid-move accuracy, unseen {red_c_cfg['V']}-node graphs",
    given=("reduced_converged", "reduced_fits"),
    note=f"ReducedDFS, {red_c_emb} d = {red_c_cfg['d']} < V = {red_c_cfg['V']}, "
    f"{red_c_cfg['steps']} full-batch {red_opt} steps (lr {red_c_cfg['lr']}) on "
    f"{red_c_cfg['n_train']} curated states of {red_c_cfg['n_range'][0]}–"
    f"{red_c_cfg['n_range'][1]}-node graphs, loss on "
    + red_c_loss + " (" + red_c_label + "); exact-move "
    f"accuracy {[round(red_c[s_]['exact'], 3) for s_ in seeds]}; training valid-move "
    f"{[round(red_c[s_]['train'], 3) for s_ in seeds]}; still given: the embeddings' "
    "width and start, the routing of each head, the readout through E" + red_q_note
    + ("; the learned temperatures multiply scores that each have their own learned "
       "form and sink (and the logits), so they reparametrise the same two-layer "
       "function class: they change the optimiser's path (Adam, not gradient flow), "
       "not the network (noted at review)" if red_c_is_r else "")
    + ("; loss plateau " + str([round(red_c[s_]["flat"], 4) for s_ in seeds])
       + ": a negative value means the loss rose over its last fifth (Adam's spikes),"
       " which the registered reading counts as flat (noted at review)"
       if min(red_c[s_]["flat"] for s_ in seeds) < 0 else ""),
)
# %%
naive_last = {k: [round(gf_hist["naive", s_][k][-1], 3) for s_ in seeds]
              for k in ("test/backtrack", "test/child", "train/all")}
rec.claim(
    "naive_data_fails",
    "Without curation (the task's own s→t traces) gradient flow generalises worse",
    paper="curated data is what makes the learning provable",
    measured=[a - b for a, b in zip(gf_acc["curated"], gf_acc["naive"])],
    op=">", target=0.10, unit="accuracy, curated − naive (unseen graphs)",
    baseline=gf_acc["naive"],
    given=("gf_curated_converged", "gf_naive_converged", "gf_naive_fits"),
    note=f"naive backtrack accuracy {naive_last['test/backtrack']}, child "
    f"{naive_last['test/child']}; naive training accuracy {naive_last['train/all']}",
)
wl_acc = {(k, part): [round(wl_res[k, s_][split][part], 3) for s_ in wl_cfg["seeds"]]
          for k in ("two", "one")
          for split, part in (("train", "all"), ("test", "child"))}
rec.claim(
    "trained_two_vs_one",
    "Trained at equal size and width d = N/2, two layers beat one layer",
    paper="a second layer is necessary (one layer needs size Ω(N²))",
    measured=[a - b for a, b in zip(wl_two, wl_one)],
    op=">", target=0.10,
    unit="next-move accuracy gap on unseen graphs, two-layer − one-layer",
    baseline=wl_one, given=("wl_two_converged", "wl_one_converged"),
    note=f"N = {wl_cfg['N']}, d = {wl_cfg['d']}, {n_par['two']} learnable parameters "
    f"each; two-layer {np.round(wl_two, 3).tolist()}, one-layer "
    f"{np.round(wl_one, 3).tolist()}; training accuracy two {wl_acc['two', 'all']}, "
    f"one {wl_acc['one', 'all']}; one-layer child selection {wl_acc['one', 'child']}; "
    f"control at d = N: two {ctl['two']['all']:.3f}, one {ctl['one']['all']:.3f} "
    f"(child {ctl['one']['child']:.3f})",
)
# %% [markdown]
# The width scaling's claim rests on two conditions, measured per seed at the larger graph size and fixed with
# the bar: every model there trained to a flat loss, and the two-layer model reaches the bar somewhere in the
# width grid (else no width ratio exists). A one-layer model that never reaches the bar is counted at the largest
# width of the grid, which makes the measured ratio a lower bound.

# %%
N_c, ws_seeds = max(Ns_ws), ws_cfg["seeds"]
rec.condition(
    "scaling_converged",
    [max(ws[k, N_c, d, s_]["plateau"] for k in ws_cfg["models"]
         for d in dims_of[k, N_c])
     for s_ in ws_seeds],
    flat, 0.05,
    statement=f"width scaling at N = {N_c}: every model's loss flat at the end",
    unit="largest share of the loss drop in the last fifth",
)
rec.condition(
    "scaling_two_reaches",
    [max(ws["two", N_c, d, s_]["valid"] for d in dims_of["two", N_c])
     for s_ in ws_seeds],
    fits, scale_bar,
    statement=f"the two-layer model reaches the bar within the width grid at N = {N_c}",
    unit="best valid-move accuracy over the grid, unseen graphs",
)
censored = [not np.isfinite(need["one", N_c, s_]) for s_ in ws_seeds]
w_of = {k: [need[k, N_c, s_] if np.isfinite(need[k, N_c, s_]) else float(dims_ws[-1])
            for s_ in ws_seeds] for k in ("one", "two")}
ratio_16 = {s_: (need["one", min(Ns_ws), s_], need["two", min(Ns_ws), s_])
            for s_ in ws_seeds}
best = {k: [round(max(ws[k, N_c, d, s_]["valid"] for d in dims_of[k, N_c]), 3)
            for s_ in ws_seeds] for k in ("one", "two")}
dims_small = dims_of["one", min(Ns_ws)]
best_small = [round(max(ws["one", min(Ns_ws), d, s_]["valid"] for d in dims_small), 3)
              for s_ in ws_seeds]
rec.claim(
    "trained_separation_scaling",
    "Trained at equal size, one layer needs a much wider model than two layers to "
    "pick valid moves",
    paper="one layer needs size Ω(N²), two layers O(N log N)",
    measured=[a / b for a, b in zip(w_of["one"], w_of["two"])],
    op=">=", target=2.0,
    unit=f"width needed for valid-move accuracy ≥ {scale_bar} on unseen graphs, "
    f"one-layer ÷ two-layer, N = {N_c}",
    baseline=w_of["two"],
    given=("scaling_converged", "scaling_two_reaches"),
    note=f"widths {dims_ws}; one-layer widths {w_of['one']} (never reached the bar at "
    f"seeds {[s_ for s_, c in zip(ws_seeds, censored) if c]}: counted at "
    f"{dims_ws[-1]}, so the value there is a lower bound, the true ratio is larger); "
    f"best valid-move accuracy one {best['one']}, two "
    f"{best['two']}; at N = {min(Ns_ws)} (one, two) per seed {ratio_16}",
)

# %%
rec.save()

# %% [markdown]
# ## 10. Reading the results
#
# Generated from the record above and the run's variables.

# %% tags=["remove-input"]
C = {c.id: c for c in rec.claims}
K = {c.id: c.verdict for c in rec.conditions}


def _m(cid, f=".2f"):
    """A claim's measured values (one per seed) and its verdict, as text."""
    c = C[cid]
    if c.measured is None:
        return f"untested ({c.reason})"
    vals = c.measured if isinstance(c.measured, list) else [c.measured]
    return ", ".join(format(float(x), f) for x in vals) + f" (`{cid}`: **{c.verdict}**)"


_pm = [float(x) for x in pm]
_last_step = [ws["one", N_c, dims_ws[-1], s_]["valid"]
              - ws["one", N_c, dims_ws[-2], s_]["valid"] for s_ in ws_seeds]
_gm = [float(np.mean([grid_mean[s_][i] for s_ in seeds])) for i in range(len(horizons_g))]
_drops = [_gm[i] / _gm[i + 1] for i in range(len(_gm) - 1)]
_big = int(np.argmax(_drops))
_fit = {c.id: c for c in rec.conditions}["reduced_fits"]
_q_low = bool(red_p3) and max(red_loss[s_][-1] for s_ in seeds) < red_p3["loss_end"]
_q_summary = (
    "In the fourth attempt (the objective or the start changed, the bar not; written "
    "down before probing) "
    + "; ".join(f"{q} ({red_q_what[q]}) fit "
                + ", ".join(f"{r['train_fit']:.4f} at seed {r['seed']}"
                            + ("" if r["passes"] else " (missed)") for r in rs)
                for q in red_q_what
                for rs in [sorted((r for r in red_probes if r["probe"] == q),
                                  key=lambda r: (r["seed"] != 1, r["seed"]))] if rs)
    + (f", so **{red_sel}** met the fit rule and was selected"
       + (", but its start already meets the claim's bar (see above), so the claim reads "
          "the random-start models. " if red_c_rand else " and its models carry the "
          "claim. ") if red_sel else ", so none was selected. ")
)
_fit_seeds = [s_ for s_, x in zip(seeds, _fit.measured) if x >= _fit.target]
_gf_ok = [s_ for s_, x in zip(seeds, C["gradient_flow_learns"].measured)
          if s_ in _fit_seeds and x >= C["gradient_flow_learns"].target]


def _sh(who, k, f=".1f"):  # a diagnosis quantity over seeds, as a range
    v = [red_sharp[who, s_][k] for s_ in seeds]
    return f"{min(v):{f}}–{max(v):{f}}"


# the diagnosis read against R1's trained weights, per seed (added at review): did
# the fit come with a sharper visited head and a larger flag weight than the random
# start's (second attempt, same seed)?
_diag_up = [s_ for s_ in seeds if red_c_is_r and all(
    red_sharp[red_r_sel, s_][k] > red_sharp["random", s_][k] for k in ("W1", "gamma"))]
_diag_text = (
    "Per seed against the second attempt's trained models (random start, random sign "
    "codes; `W1` diagonal, `|γ|`): "
    + "; ".join(f"seed {s_} {red_sharp['random', s_]['W1']:.1f} → "
                f"{red_sharp[red_r_sel, s_]['W1']:.1f}, "
                f"{red_sharp['random', s_]['gamma']:.1f} → "
                f"{red_sharp[red_r_sel, s_]['gamma']:.1f}" for s_ in seeds)
    + (f": both grew at seeds {_diag_up} only, so the diagnosis (sharpness and flag "
       "weight were missing) is borne out there and not at the others, where one of "
       "the two is no larger and the fit came by another route (read at review). "
       if len(_diag_up) < len(seeds) else
       ": both grew at every seed, as the diagnosis predicted (read at review). ")
    if red_c_is_r else "")
_r_summary = (
    "In the fifth attempt (a small random start with P1's codes, written down before "
    "probing, after measuring what the random starts lack: their visited-head `W1` "
    f"diagonal is {_sh('random', 'W1')} and their flag weight `|γ|` {_sh('random', 'gamma')}"
    + (f" against {_sh(red_sel, 'W1')} and {_sh(red_sel, 'gamma')} in probe {red_sel}'s "
       f"trained models, while their output map `O_c` has norm {_sh('random', 'O_c')} "
       f"against {_sh(red_sel, 'O_c')}" if red_sel else "")
    + ") "
    + "; ".join(f"{q} ({red_r_what[q]}) fit "
                + ", ".join(f"{r['train_fit']:.4f} at seed {r['seed']}"
                            + ("" if r["passes"] else " (missed)") for r in rs)
                for q in red_r_what
                for rs in [sorted((r for r in red_probes if r["probe"] == q),
                                  key=lambda r: r["seed"])] if rs)
    + (f", so **{red_r_sel}** met the fit rule and was selected; its start scores "
       f"{[round(red_r_start[s_]['valid'], 3) for s_ in seeds]} on unseen graphs, "
       "below the bar, so its models carry the claim; trained, their effective visited "
       f"sharpness is {_sh(red_r_sel, 'W1')} and flag weight {_sh(red_r_sel, 'gamma')} "
       "(times the learned temperatures). " + _diag_text if red_c_is_r else
       f", so **{red_r_sel}** met the fit rule, but its start already meets the bar "
       f"({[round(red_r_start[s_]['valid'], 3) for s_ in seeds]}): not counted. "
       if red_r_sel else ", so none was selected. ")
)


def _span(name, k, f=".2f"):  # range over seeds of red_shift's cosine (k=0) or ratio (1)
    v = [red_shift[s_][name][k] for s_ in seeds]
    return f"{min(v):{f}}–{max(v):{f}}"


_att = [n for n in ("W1", "W2", "W3", "theta") if red_shift and n in red_shift[seeds[0]]]
_shift_text = (
    "How far training moved from the noise-free construction (measured): the attention "
    f"maps {', '.join(f'`{n}`' for n in _att)} keep their direction (cosine at least "
    f"{min(red_shift[s_][n][0] for s_ in seeds for n in _att):.2f}), while the output "
    "maps grow and turn (`O_c` norm ×" + _span("O_c", 1, ".1f") + ", cosine "
    + _span("O_c", 0) + "; `O_p` norm ×" + _span("O_p", 1, ".0f") + ", cosine "
    + _span("O_p", 0) + "), besides a child preference and a value map the "
    "construction leaves at zero: the routing is kept, the hand-built output scale is "
    "not the loss's. " if red_shift and {"O_c", "O_p"} <= set(red_shift[seeds[0]])
    else "")
_zero_ex = [h for j, h in enumerate(horizons_g) if all(excess[s_][j] == 0 for s_ in seeds)]
_pos_ex = [h for h in horizons_g if h not in _zero_ex]
_bs = [x for s_ in seeds for x in blind_share[s_][:3]]
_ex_mean = [round(float(np.mean([excess[s_][horizons_g.index(h)] for s_ in seeds])), 1)
            for h in _pos_ex]
_why_doubling = (
    f" **Why** (the experiment in section 4): at horizons {horizons_g[:3]} the *blind* "
    f"phase, plain DFS before `t` comes within the horizon, is {min(_bs):.0%}–"
    f"{max(_bs):.0%} of the trace (near 1 by the design: with `t` at least "
    f"{grid_min_dist} edges away a guided phase of at most `h` shortest-path steps "
    "is a few steps of a mean trace of "
    f"{min(grid_mean[s_][j] for s_ in seeds for j in range(3)):.0f} or more; noted at "
    "review), and it shrinks by "
    f"{', '.join(f'{x:.2f}' for x in shrink_blind_early)} per layer there. "
    + (f"Once `t` is in view the networks walk a shortest path at horizons {_zero_ex}"
       if _zero_ex else "Once `t` is in view the networks never walk a shortest path")
    + (f"; at {_pos_ex} they take {_ex_mean} extra "
       "steps on average, because the last layer ranks children by doubling level "
       "(`⌈log₂(dist + 1)⌉`), not by distance" if _pos_ex else "")
    + ". The counterfactual rule with one-edge resolution shrinks the search by "
    f"{', '.join(f'{x:.2f}' for x in shrink_exact)} per layer (networks "
    f"{', '.join(f'{x:.2f}' for x in shrink_net)}), "
    + ("still below the bar: "
       + ("the level resolution costs part of the shrink (at most "
          f"{max(e_ - n_ for e_, n_ in zip(shrink_exact, shrink_net)):.2f} per layer), "
          "the blind phase the rest. "
          if any(e_ > n_ + 0.01 for e_, n_ in zip(shrink_exact, shrink_net)) else
          "the level resolution costs nothing here, the blind phase is the whole "
          "shortfall. ") if max(shrink_exact) < doubling_bar else
       "at or above the bar at some seed: the level resolution is what costs the shrink "
       "there. ")
    + ("For the paper's claim this means: the horizon `2^(L−3)` is built and verified "
       "token for token, but an exponentially growing horizon is not a halving of the "
       "search per layer; how fast the search shrinks is set by how long a blind DFS takes "
       "to come within `h` of `t` on the graph family, which on these grids falls more "
       "slowly than `1/h`." if C["lookahead_doubling"].verdict == "not held" else
       "For the paper's claim this means: the horizon `2^(L−3)` is built and verified "
       "token for token, and on these grids the search shrinks per layer as recorded; "
       "how fast is set by how long a blind DFS takes to come within `h` of `t`.")
    + (f" The earlier build (horizons 1–16, 8 pairs per seed, other draws) shrank by "
       f"{', '.join(f'{x:.2f}' for x in old_ratio)} per layer against a room of "
       f"{', '.join(f'{x:.2f}' for x in old_room)} (over its horizons 1–8 only: "
       f"{', '.join(f'{x:.2f}' for x in old_ratio8)}); this build's room was computed on "
       "its own draws before any network ran." if old_ratio else "")
)
_of_cap = np.mean([m_ / c_
                   for m_, c_ in zip(C["lookahead_doubling"].measured, ceiling)])
display(Markdown("\n".join([
    f"* **The constructions work as built.** The one-hot two-layer model reproduces the "
    f"reference DFS in {exact_states}/{exact_total} states; with sign embeddings of width "
    f"8⌈log₂N⌉ its worst valid-move rate is {min(acc_log.values()):.3f}. The doubling "
    f"networks reproduce the look-ahead rule in {look_same}/{look_total} rollouts.",
    f"* **Width of the hand-built models.** The one-layer width exponent is "
    f"{_m('one_layer_width_growth')}; for two layers a fit in log N beats a fit in N by "
    f"{_m('two_layer_width_log')} in squared error.",
    f"* **Depth and look-ahead, on networks.** Horizon 2 against plain DFS shortens the "
    f"search by {_m('lookahead_gain')} per seed. Each squaring layer doubles the horizon "
    f"(checked token for token). On the random graphs the pooled mean lengths "
    f"{[round(x, 1) for x in _pm]} (horizons {horizons}) stop falling once the horizon "
    f"covers the shortest s → t path (mean {np.mean(list(mean_dist.values())):.1f} "
    f"steps; share of traces that are shortest paths "
    f"{[round(at_floor[h], 2) for h in horizons]}). On {grid_side}×{grid_side} grids "
    f"(s → t at least {grid_min_dist} edges, mean "
    f"{np.mean([np.mean(v) for v in grid_dist.values()]):.1f}) "
    + ("every layer shortens the search: " if min(_drops) > 1 else "")
    + f"the pooled mean lengths are {[round(x, 1) for x in _gm]} for horizons {horizons_g}, "
    f"largest drop between horizons {horizons_g[_big]} and {horizons_g[_big + 1]} "
    f"(×{_drops[_big]:.2f}), and per extra layer the trace shrinks by "
    f"{_m('lookahead_doubling')} (geometric mean). The shortest path caps that mean at "
    f"{', '.join(f'{x:.2f}' for x in ceiling)} per seed (condition `lookahead_room`: "
    f"**{K['lookahead_room']}**)"
    + (f", below the bar {doubling_bar}: even on the grids no network could halve the "
       "search per layer, so the claim could not be tested at our scale; the networks' "
       f"shrink is {_of_cap:.0%} of that cap." if K["lookahead_room"] == "not met" else
       f"; where the cap is at least {doubling_bar} the claim is tested, and the "
       f"networks' shrink is {_of_cap:.0%} of the cap: "
       + (("each extra layer shortens the search, but by less than half."
           if min(_drops) > 1 else "the search shrinks by less than half per layer.")
          if C["lookahead_doubling"].verdict == "not held" else
          f"the verdict is **{C['lookahead_doubling'].verdict}**."))
    + _why_doubling,
    f"* **Trained, width-limited.** At N = {wl_cfg['N']}, d = {wl_cfg['d']} the two-layer "
    f"model beats the one-layer model by {_m('trained_two_vs_one')} in next-move "
    f"accuracy. Across widths, the one-layer model needs {_m('trained_separation_scaling')} "
    f"times the two-layer model's width at N = {N_c} (conditions: converged "
    f"**{K['scaling_converged']}**, two-layer reaches the bar "
    f"**{K['scaling_two_reaches']}**); its best valid-move accuracy there is "
    f"{best['one']} per seed against {best['two']} for two layers"
    + (f". The one-layer model never reached the bar at "
       f"{sum(censored)} of {len(censored)} seeds within d ≤ {dims_ws[-1]}, where it "
       "counts at the grid's largest width: there the ratio is a lower bound set by "
       "the grid, not a measured width. Failing at every width up to "
       f"{dims_ws[-1]}, its needed width is larger, so the ratio exceeds what is "
       f"recorded; but at N = {min(Ns_ws)} it also stays below the bar up to d = "
       f"{dims_small[-1]} (best valid-move accuracy {best_small} per seed), so the grid "
       "shows a separation, not how the one-layer width grows with N. Between d = "
       f"{dims_ws[-2]} and d = {dims_ws[-1]} its valid-move accuracy at N = {N_c} "
       "changes by "
       + ", ".join(f"{x:+.3f}" for x in _last_step)
       + " per seed"
       + (": flat, so on this trend no width we could train reaches the bar."
          if max(abs(x) for x in _last_step) < 0.02 else
          ": still moving, so a wider grid might reach the bar.")
       + " The claim could have failed only if the one-layer model had reached the bar "
       f"at a width up to {C['trained_separation_scaling'].target:g}× the two-layer's "
       f"(d ≤ {max(w_of['two']) * C['trained_separation_scaling'].target:g}); its flat "
       "accuracy shows that this scaffolded one-layer model gains little from extra width, "
       "which is a weaker statement than a measured Ω(N²) width"
       + (f" (the hand-built one-layer model needs d = {min(one_draws[N_c]):g}–"
          f"{max(one_draws[N_c]):g} for 95 % child selection at N = {N_c}, beyond this "
          "grid)." if N_c in one_draws else ".")
       if any(censored) else "."),
    f"* **Gradient flow (scaffolded).** With curated data the architecture learns DFS on "
    f"unseen larger graphs at {_m('gradient_flow_learns_curated', '.3f')}; curated minus "
    f"naive {_m('naive_data_fails', '.3f')}. Only `W1`, `W2` and two scalars are learned "
    "there (see Known limits).",
    "* **Gradient training, reduced scaffold.** From "
    + f"a {red_c_from} ({red_c_label})"
    + f", with learned value/output maps, learned previous-token and parent heads and "
    f"{red_c_emb} of width {red_c_cfg['d']} < {red_c_cfg['V']}, the valid-move accuracy "
    f"on unseen graphs is {_m('gradient_flow_learns', '.3f')} (conditions: flat loss "
    f"**{K['reduced_converged']}**, fits its training states **{K['reduced_fits']}**: "
    "training valid-move accuracy, mean of the last tenth of the curve, "
    + ", ".join(f"{x:.4f}" for x in _fit.measured) + f" against {_fit.target}). "
    + (f"Where the fit is met (seeds {_fit_seeds}) the claim is tested, and it reads "
       f"**{C['gradient_flow_learns'].verdict}**"
       + (": the models fit their training states (graphs of "
          f"{red_c_cfg['n_range'][0]}–{red_c_cfg['n_range'][1]} nodes); on unseen "
          f"{red_c_cfg['V']}-node graphs they reach the bar at seeds {_gf_ok} and not at "
          f"{[s_ for s_ in _fit_seeds if s_ not in _gf_ok]}. "
          if C["gradient_flow_learns"].verdict == "mixed" else
          ": the model fits its training states (graphs of "
          f"{red_c_cfg['n_range'][0]}–{red_c_cfg['n_range'][1]} nodes) but does not "
          f"reach the bar on unseen {red_c_cfg['V']}-node graphs. "
          if C["gradient_flow_learns"].verdict != "held" else ": it generalises. ")
       if _fit_seeds else "No seed fits its training states, so the claim is "
       "inconclusive. ")
    + (f"**Probe {red_sel}, not counted.** Its runs start from {red_from}; on unseen "
       "graphs that start, before any training, already scores "
       f"{[round(red_start[s_]['valid'], 3) for s_ in seeds]} against the bar 0.95, so "
       "a claim on these models would hold by construction whatever training did. "
       "After training they score "
       f"{[round(red_res[s_]['valid'], 3) for s_ in seeds]} (training moved them by "
       + ", ".join(f"{red_res[s_]['valid'] - red_start[s_]['valid']:+.3f}"
                   for s_ in seeds)
       + "): training keeps the construction's generalisation, an illustration of "
       "stability, not of learning. Their valid-set loss falls from "
       f"{[round(red_loss[s_][0], 3) for s_ in seeds]} to "
       f"{[round(red_loss[s_][-1], 4) for s_ in seeds]} per seed"
       + (f"; the random start with the same codes at seed {seeds[1]} ended at "
          f"{red_p3['loss_end']:.4f} after {red_p3['steps']} steps"
          + (": a point of much lower loss exists near the construction, so the "
             "random starts stop in a worse local minimum of the same objective: what "
             "is missing is the optimisation's, not the loss's. " if _q_low else
             ": near the construction the loss does not end lower. ")
          if red_p3 else ". ")
       + _shift_text
       if red_sel and red_c_rand and red_cfg.get("init") == "construction" else "")
    + (f"The claim rests on {len(_fit_seeds)} of {len(seeds)} seeds"
       + (": a configuration trained from a random start that fits at every seed was "
          "looked for and not found. Of "
          "three probes written down before any ran, P1 (low-coherence sign codes) fit "
          "seed 0 and missed seed 1, P2 (the codes learned) missed seed 1 by more"
          + (f", and P3 (P1 with twice the steps) {'met' if red_p3['pass'] else 'missed'}"
             f" seed {seeds[1]} too (fit {red_p3['fit']:.4f} after {red_p3['steps']} steps against "
             f"P1's {red_p3['p1_fit']:.4f} after {red_p3['p1_steps']}, loss plateau "
             f"{red_p3['flat']:.4f})"
             if red_p3 else "")
          + "; P1's seed-0 and P2's numbers are in `make_reduced.py`. "
          + _q_summary + _r_summary
          if len(_fit_seeds) < len(seeds) else ". " + _q_summary + _r_summary)
       if not quick else "")
    + ("The second attempt's models (random sign draws, a small random start), for "
       "comparison: " if red_c_is_r else
       "The claim's models (the second attempt: random sign draws, a small random "
       "start): " if red_sel and red_c_rand else
       "The second attempt's models, for comparison: " if red_sel else "")
    + (f"On unseen graphs the model is right on {_rd('unseen', 'flagged')} of the child "
       f"steps with a visited child and {_rd('unseen', 'rest')} of the others; the "
       f"hand-built construction with the same embeddings scores "
       f"{_rd('unseen', 'construction')} there (one-hot "
       f"{_rd('unseen', 'construction_onehot')}). ")
    + (f"This is the second attempt: the first ({red_first} steps, the same runs cut "
       f"there) fit its training states at {_rd('first', 'fit', 4)} per seed and reached "
       f"{_rd('first', 'valid')} on unseen graphs. " if not quick else "")
    + "The errors sit on the visited flag (training accuracy on child steps with a "
    f"visited child {_rd('second', 'flagged')}, elsewhere {_rd('second', 'rest')}); the "
    f"hand-built construction with the same sign embeddings scores "
    f"{_rd('second', 'construction')} on the training states, "
    f"{_rd('second', 'construction_onehot')} with one-hot ones"
    + (f" and {_rd('codes', 'construction')} with P1's low-coherence codes (largest "
       f"|cosine| {_rd('codes', 'coherence', 2)} against {_rd('second', 'coherence', 2)})"
       ": the overlap of the random draws costs even the hand-built weights accuracy, "
       "yet with codes that remove that cost training still missed the fit at seed 1, "
       + (f"with {red_p3['p1_steps']} steps or {red_p3['steps']}, " if red_p3 else "")
       + "so at this width, data and optimizer the shortfall is the training's as much "
       "as the embeddings'"
       + (f" (with fixed temperatures; with learned ones, probe {red_r_sel}, the fit is met "
          "at every seed). " if red_c_is_r else ". ") if not quick else ". ")
    + "For scale, rules with no learning: always backtracking scores "
    f"{[round(red_base['always parent', s_], 3) for s_ in seeds]}, a rule told when to "
    "backtrack that picks a random child "
    f"{[round(red_base['told when to backtrack, random child', s_], 3) for s_ in seeds]}"
    " per seed. "
    + "The claim's models: "
    + f"Exact-move accuracy {[round(red_c[s_]['exact'], 3) for s_ in seeds]} (the "
    "loss does not ask for the reference order). Against "
    "the construction, per seed: the previous-token head puts "
    f"{[round(red_c[s_]['prev_offset1'], 2) for s_ in seeds]} of its weight on the "
    "token just before (construction: 1), the parent head "
    f"{[round(red_c[s_]['parent_first'], 2) for s_ in seeds]} on the first "
    "occurrence of the current node, and the flag of an edge to a visited child is "
    f"{[round(red_c[s_]['flag_visited'], 2) for s_ in seeds]} against "
    f"{[round(red_c[s_]['flag_fresh'], 2) for s_ in seeds]} for an unvisited one (only "
    "the difference matters: the sign of the learned flag weight `γ` absorbs the "
    "flag's).",
    f"* **Generic transformers.** Exact-move accuracy on unseen graphs: two-layer "
    f"{res['two-layer']['unseen']['all']:.2f}, one-layer "
    f"{res['one-layer']['unseen']['all']:.2f}; valid-move accuracy "
    f"{gvalid['two-layer']['unseen']['all']:.2f} and "
    f"{gvalid['one-layer']['unseen']['all']:.2f} (one seed, an illustration). "
    + " ".join(
        f"Its attention ({k}): best head {np.mean(agree[k]):.2f} against "
        f"{np.mean(chance[k]):.2f} for uniform attention"
        + (", the construction's pattern." if np.mean(agree[k]) > 2 * np.mean(chance[k])
           else ", not the construction's pattern.")
        for k in agree
    ),
])))
