# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Searching a tree with a predicted target: O(k log η) queries, k the pathwidth
#
# Binary search finds a key in a sorted array in `O(log n)` comparisons; given a *prediction* of where the key
# is, "doubling" (galloping) search needs only `O(log η)`, where `η` is how far off the prediction was. An array
# is a path. The paper asks what happens on a **tree**: a hidden target vertex, a query at vertex `v` answers
# "found" or the neighbour of `v` on the way to the target, and a predicted vertex at graph distance `η` from the
# target. It shows that `O(log η)` is impossible on general trees, but that trees which look like paths (low
# **pathwidth** `k`) allow `O(k log η)` queries, which is existentially optimal, and that on real-life trees this
# beats search that ignores the prediction.
#
# The idea we implement: remove from the tree a **spine**, a path whose removal leaves only components of
# smaller pathwidth, and recurse into those components: at most `k` levels. Our search **starts at the
# prediction**: in the component whose spine holds the prediction, it gallops along the spine from the
# prediction (doubling search); an answer that leaves the component sends it one level up, where it gallops again
# from where the prediction hangs; an answer into a part off the spine sends it down into that part. A close
# prediction therefore costs a couple of queries, and every level costs `O(log η)`. When the prediction is far,
# a **top-down** search (every level from the whole tree's spine down, galloping from where the prediction
# hangs) climbs less; our search runs the two together, sharing answers, meant to serve both regimes (whether it
# does, and where it loses to the top-down variant and to centroid search, is measured in §6 and §7).
#
# **Which search is the paper's?** Only the abstract is public. The search closest to the plan we reconstructed
# from it (ask the prediction, then search every level of the spine decomposition from the top, galloping from
# where the prediction hangs) is the **top-down variant**. *Ours*, the combination with the prediction-first
# search, is our design, chosen to keep the small-`η` constant; the claims measure ours, and their notes record
# the same numbers for the top-down variant and the other halves.
#
# | | the paper | this notebook |
# |---|---|---|
# | trees | real-life and synthetic inputs | **high degree**: CPython's stdlib directory tree, ASTs of `argparse.py` and `json/decoder.py`, the built-in exception hierarchy, a BFS tree of the Les Misérables graph; **low degree** (≤ 3 or 4): clustering dendrograms and a neighbour-joining "phylogeny" of scikit-learn's bundled datasets, a road-like grid spanning tree (all snapshotted in `data/`); paths, caterpillars, complete binary and ternary trees, random trees; **large path-like trees** (50,000 vertices, pathwidth ≤ 3, new per seed): random-weight corridor grids and minimum spanning trees of pixel strips of scikit-learn's two bundled photographs; single-linkage dendrograms of pixel colours for contrast |
# | sizes | not stated | small trees up to ~8,000 vertices, 100 random targets per tree, prediction error and seed; large trees 50,000 vertices, `η` up to 256; 3 seeds; worst case over every target at distance `η` from a few predictions |
# | search | `O(k log η)` algorithm | ours combines a search that starts at the prediction with a top-down one (shared answers); both halves are measured too |
# | baselines | search without prediction | centroid search (`≤ log₂ n + 1` queries), walking from the prediction (`η + 1`), and the robust interleaving of the prediction-first search with centroid search (`≤ 2 min`) |
# | lower bound | `Ω(k log η)` construction | the exact minimax optimum of *every* algorithm on small complete binary trees, by dynamic programming |
# | hardware | not stated | 2 CPU cores, a few minutes |
#
# :::{note}
# **What is reconstructed.** The query model is standard (Onak & Parys 2006; Emamjomeh-Zadeh et al. 2016). Only
# the paper's abstract is public, so the **search algorithm is our reconstruction**: the spine decomposition comes
# from the classical characterisation of tree pathwidth (Ellis, Sudborough & Turner 1994: `pw(T) ≤ k` iff some
# path leaves only components of pathwidth `≤ k − 1`), computed with the linear-time labelling of subtrees; the
# per-level search is doubling binary search; starting at the prediction's own component and escalating outward
# is our design, and so are the constants of our bounds. The paper's matching `Ω(k log η)` lower-bound
# construction is not recoverable from the abstract; we compute instead the exact optimum of any algorithm on
# small complete binary trees, where `O(log η)` is impossible. The "real-life inputs" of the paper are unknown;
# ours are listed above.
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
n_seeds = 3  # random targets and predictions are drawn under seed, seed + 1, seed + 2
n_targets = 100  # hidden targets per tree, prediction error and seed
etas = [0, 1, 2, 4, 8, 16, 32, 64]  # prediction errors (graph distance)
n_adversarial = 4  # predictions per tree and seed for the worst case over all targets
ring_cap = 400  # at most this many targets per ring in the worst case (all when fewer)
binary_height = 10  # height of the complete binary tree
ternary_height = 6
random_n = 2000
n_brute = 200  # random trees checked against the brute-force pathwidth
minimax_max_eta = 6  # largest eta of the exact minimax on complete binary trees
n_big = 50_000  # vertices of each large path-like tree (at least)
corridor_rows = [2, 2, 3, 3]  # rows of the random-weight corridor grids
strips = [("china.jpg", 2), ("china.jpg", 3), ("flower.jpg", 2), ("flower.jpg", 3)]
dendro_points = 25_600  # single-linkage dendrogram of this many pixel colours (2m - 1)
big_etas = [1, 2, 4, 8, 16, 32, 64, 128, 256]
big_targets = 16  # random targets per large tree and seed (each at every eta)
big_preds = 3  # predictions per large tree and seed (worst case over the full ring)

# %% tags=["hide-input"]
import math
import os
import time

import matplotlib.pyplot as plt
import networkx as nx
import numpy as np
from IPython.display import Markdown, display
from tqdm.auto import tqdm

from helpers import checkpoints, claims, plotting, repro
from helpers import tree_search_predictions as ts

if quick:
    n_seeds, n_targets, etas, n_adversarial, ring_cap = (
        1,
        15,
        [0, 1, 2, 4, 8, 16],
        2,
        60,
    )
    binary_height, ternary_height, random_n, n_brute, minimax_max_eta = 7, 4, 300, 40, 5
    n_big, corridor_rows, big_etas, big_targets, big_preds = (
        4000,
        [2, 3],
        [1, 4, 16, 64],
        6,
        1,
    )
    strips, dendro_points = [("china.jpg", 2)], 2000

SEEDS = [seed + i for i in range(n_seeds)]
env = repro.setup(seed)
plotting.use_style()
rec = claims.ClaimsRecord(
    "03_tree_search_predictions",
    dict(
        quick=quick,
        seed=seed,
        seeds=SEEDS,
        n_targets=n_targets,
        etas=etas,
        n_adversarial=n_adversarial,
        ring_cap=ring_cap,
        binary_height=binary_height,
        ternary_height=ternary_height,
        random_n=random_n,
        n_brute=n_brute,
        minimax_max_eta=minimax_max_eta,
        n_big=n_big,
        corridor_rows=corridor_rows,
        strips=strips,
        dendro_points=dendro_points,
        big_etas=big_etas,
        big_targets=big_targets,
        big_preds=big_preds,
    ),
)
T_START = time.perf_counter()
print(env)

# %% [markdown]
# ## 1. The query model
#
# `ts.Oracle(tree, target).query(v)` answers `None` ("found") or the neighbour of `v` towards the target, counts
# every call and refuses anything that is not a vertex. It answers in `O(log deg)` time from Euler-tour
# intervals: if the target lies in `v`'s subtree (rooted at 0) the answer is the child whose interval contains it,
# otherwise `v`'s parent.
#
# ## 2. Exact pathwidth of a tree, checked against brute force
#
# `ts.pathwidth` labels every rooted subtree bottom-up with a list of `(value, critical vertex)` pairs (the first
# value is the subtree's pathwidth; a *critical* vertex has two children of that pathwidth). Combining children's
# labels at a vertex: three children of the top value raise the pathwidth by one; two raise it if either is
# critical, else the vertex becomes critical; one critical child is resolved by recombining the rest. The
# brute-force reference is the vertex separation number, a DP over all vertex subsets (feasible for `n ≤ 12`).

# %%
pw_mismatch = 0
for i in tqdm(range(n_brute), desc="pathwidth vs brute force"):
    t = ts.random_tree(2 + i % 11, seed=seed * 100_000 + i)
    pw_mismatch += int(ts.pathwidth(t) != ts.pathwidth_bruteforce(t))
closed = {
    f"binary h={h}": (ts.pathwidth(ts.complete_tree(2, h)), math.ceil(h / 2))
    for h in range(1, 8)
}
closed |= {
    f"ternary h={h}": (ts.pathwidth(ts.complete_tree(3, h)), h) for h in range(1, 5)
}
closed |= {
    "path": (ts.pathwidth(ts.path_tree(50)), 1),
    "star": (ts.pathwidth(ts.star_tree(50)), 1),
}
pw_mismatch += sum(a != b for a, b in closed.values())
print(
    f"{n_brute} random trees (n = 2..12) and {len(closed)} closed forms: "
    f"{pw_mismatch} mismatches"
)

# %% [markdown]
# ## 3. The trees: high degree and low degree
#
# Centroid search, the baseline that ignores the prediction, costs about `log₂ n` queries on a path-like tree
# but far fewer on a tree of high degree: one query at a vertex with 200 children leaves only one of 200 parts.
# So the real trees come in two groups. **High degree**: the stdlib directory tree, two Python ASTs, the
# exception hierarchy and a BFS tree of the Les Misérables co-occurrence graph. **Low degree** (every vertex has
# at most 3 or 4 neighbours): Ward and average-linkage dendrograms of scikit-learn's bundled iris, breast-cancer
# and digits data, a neighbour-joining tree of the wine samples (the method biologists use to build phylogenies
# from distances), and a road-like tree (the minimum spanning tree of a 30 × 30 grid with random weights; this
# one is synthetic). `data/03_tree_search_predictions/make_trees.py` snapshotted them as edge lists; if the
# snapshot is missing (e.g. in Colab) they are rebuilt from the running Python and packages.

# %%
# data/ in a checkout; elsewhere (Colab) downloaded once (0.1 MB), verified by sha256
DATA = checkpoints.fetch("03_tree_search_predictions")


def rebuild(name: str) -> ts.Tree:
    """The recipe of make_trees.py, for when the snapshot is not there."""
    import sysconfig

    from scipy.spatial.distance import pdist, squareform
    from sklearn import datasets
    from sklearn.preprocessing import StandardScaler

    stdlib = sysconfig.get_paths()["stdlib"]

    def scaled(loader):
        return StandardScaler().fit_transform(loader().data)

    def src(*parts):
        return open(os.path.join(stdlib, *parts)).read()

    return {
        "stdlib_dirs": lambda: ts.directory_tree(stdlib),
        "ast_argparse": lambda: ts.ast_tree(src("argparse.py")),
        "ast_json_decoder": lambda: ts.ast_tree(src("json", "decoder.py")),
        "exceptions": ts.exception_tree,
        "lesmis_bfs": lambda: ts.bfs_tree(nx.les_miserables_graph()),
        "dendro_iris": lambda: ts.dendrogram_tree(scaled(datasets.load_iris)),
        "dendro_breast_cancer": lambda: ts.dendrogram_tree(
            scaled(datasets.load_breast_cancer), "average"
        ),
        "dendro_digits": lambda: ts.dendrogram_tree(datasets.load_digits().data),
        "nj_wine": lambda: ts.neighbor_joining_tree(
            squareform(pdist(scaled(datasets.load_wine)))
        ),
        "grid_mst": lambda: ts.grid_mst_tree(30, 30, seed=0),
    }[name]()


# %%
def real_tree(name: str) -> ts.Tree:
    path = os.path.join(DATA, f"{name}.txt.gz")
    return ts.load_edges(path) if os.path.exists(path) else rebuild(name)


HIGH = ["stdlib_dirs", "ast_argparse", "ast_json_decoder", "exceptions", "lesmis_bfs"]
LOW = ["dendro_iris", "dendro_breast_cancer", "dendro_digits", "nj_wine", "grid_mst"]
if quick:  # the smaller AST and the smaller dendrograms only
    HIGH.remove("ast_argparse")
    LOW.remove("dendro_digits")
REAL = HIGH + LOW
trees = {name: real_tree(name) for name in REAL}
trees |= {
    "path": ts.path_tree(random_n // 2),
    "caterpillar": ts.caterpillar_tree(random_n // 8, 3),
    f"binary h={binary_height}": ts.complete_tree(2, binary_height),
    f"ternary h={ternary_height}": ts.complete_tree(3, ternary_height),
    "random": ts.random_tree(random_n, seed),
}

# %%
names = list(trees)
info = {}
for name, t in trees.items():
    t0 = time.perf_counter()
    dec, ctree = ts.Decomposition(t), ts.CentroidTree(t)
    group = "high" if name in HIGH else "low" if name in LOW else "synthetic"
    info[name] = dict(
        n=t.n,
        pw=ts.pathwidth(t),
        levels=dec.levels,
        max_deg=max(len(a) for a in t.adj),
        group=group,
        dec=dec,
        ctree=ctree,
        prep_s=time.perf_counter() - t0,
    )
print(
    f"{'tree':21} {'group':9} {'n':>6} {'pw':>3} {'levels':>6} {'max deg':>7} "
    f"{'log2 n':>6} {'prep s':>6}"
)
for name in names:
    d = info[name]
    print(
        f"{name:21} {d['group']:9} {d['n']:6d} {d['pw']:3d} {d['levels']:6d} "
        f"{d['max_deg']:7d} {math.log2(d['n']):6.1f} {d['prep_s']:6.2f}"
    )

# %% [markdown]
# ## 4. The spine decomposition
#
# `ts.spine` roots a component, labels it, and reads off the spine: from the root down the unique chain of
# children of full pathwidth, or, when the label has a critical vertex `w`, the two full-pathwidth chains below `w`
# joined at `w`. We check on every tree that each component left off a spine has smaller pathwidth.


# %%
def sub_tree(t: ts.Tree, members: list[int]) -> ts.Tree:
    idx = {v: i for i, v in enumerate(members)}
    inside = set(members)
    edges = [
        (idx[a], idx[b]) for a in members for b in t.adj[a] if b in inside and a < b
    ]
    return ts.Tree(len(members), edges)


spine_violations = 0
for name, t in tqdm(trees.items(), desc="spine property"):
    dec = info[name]["dec"]
    for cid, comp in enumerate(dec.comps):
        for members in dec.components_off_spine(cid):
            spine_violations += int(ts.pathwidth(sub_tree(t, members)) >= comp.k)
print(
    "components off a spine with pathwidth not smaller than the spine's component: "
    f"{spine_violations}"
)

# %% [markdown]
# ## 5. The search that starts at the prediction
#
# Every vertex lies on exactly one spine; the components holding the prediction `p` form a chain from the whole
# tree down to the component whose spine holds `p`. The search is a generator of queries (so that two searches
# can take turns, below). These are the key lines of `ts.search_with_prediction`:
#
# ```text
# ask p                                         # eta = 0: one query; the answer is kept
# lvl = the deepest level (p is on that component's spine)
# loop:
#     C = the component of p at level lvl
#     gallop along C's spine from where p hangs: j, j ± 1, j ± 2, j ± 4, ..., then bisect,
#         until an answer points off the spine, to u
#     if u is outside C:                 the target is outside: go up to the level that edge enters
#     elif u's part is the one p came from (known not to hold the target): go up one level
#     elif u's part holds a way out of C: ask its entry vertices (once each); if one answers
#         "outside", go up; else the target is in u's part
#     else: descend top-down from u's part with prediction u    (d(u, t) < d(p, t))
# ```
#
# A component's ways out are its own entry edge and the entry edges of the enclosing components whose entry vertex
# it contains. On each level the spine index where the answers turn off is within `η` of where `p` hangs, so a
# spine search costs at most `2⌈log₂(η+1)⌉ + 3` queries; at most `2k + 1` spine searches (up, then down) and `k`
# entry queries give our bound `1 + (2k+1)(2⌈log₂(η+1)⌉ + 3) + k`, checked on every search below. The
# **top-down variant** (`start="top"`, the chapter's first reconstruction) searches every level from the whole
# tree's spine down, within `1 + k(2⌈log₂(η+1)⌉ + 3)`: a tighter bound, but it pays a query per level even when the
# prediction is exact.
#
# **One search for both regimes** (`start="both"`; from here on *ours*). The prediction-first search is cheap when
# the prediction is close; when it is far, climbing level by level costs up to `2k + 1` spine searches, where the
# top-down variant needs `k`. The combined search runs the prediction-first search alone for its first `2k + 2`
# queries (`ts.combined_head`: about one query up and one down per level, plus the prediction and the target),
# then lets the two take turns, the top-down one first, **sharing every answer** (a vertex one of them asked is
# answered for free to the other), and stops when either finds the target. A close prediction costs exactly what
# the prediction-first search costs; a far one at most `2k + 2 + 2·(top-down's queries) − 1`.
# `ts.combined_bound` gives the exact bound from the two searches' own counts, checked on every search.
#
# A fourth variant came out of measuring the combination (§6): the **informed top-down** search
# (`start="informed"`) is the top-down one that reads the prediction's own answer. On a level where the
# prediction hangs off the spine and its answer points away from the spine, the target must lie in the
# prediction's part of the component, so the search steps down a level without a query. It only skips queries
# of the top-down search, so it stays within the top-down bound (checked).
#
# Baselines on the same (target, prediction) pairs: **centroid search** (query the centroid of what is left; no
# prediction), **walking** from the prediction along the answers (`η + 1` queries), and the robust **interleaving**
# `ts.interleaved_search`, which alternates queries of the prediction-first search and of centroid search,
# sharing answers, and stops when either finds the target: never more than `2 min(prediction-first, centroid)`.
#
# Each tree gets `n_targets` uniformly random targets per prediction error `η` and seed; the prediction is drawn
# uniformly among the vertices at distance exactly `η` from the target (skipped when there are none).

# %%
# "ours" is the combined search; the ball search is measured on the large trees (§7)
METHODS = [m for m in ts.SWEEP_METHODS if m != "ball"]


def run_all(t, inf, target, p):
    """Queries of each method for one (target, prediction) pair; the found vertices."""
    dec, ctree = inf["dec"], inf["ctree"]
    r = {
        "ours": ts.search_with_prediction(
            t, dec, ts.Oracle(t, target), p, start="both"
        ),
        "prediction-first": ts.search_with_prediction(t, dec, ts.Oracle(t, target), p),
        "informed": ts.search_with_prediction(
            t, dec, ts.Oracle(t, target), p, start="informed"
        ),
        "top-down": ts.search_with_prediction(
            t, dec, ts.Oracle(t, target), p, start="top"
        ),
        "centroid": ts.centroid_search(t, ctree, ts.Oracle(t, target)),
        "walk": ts.walk_search(t, ts.Oracle(t, target), p),
        "interleaved": ts.interleaved_search(t, dec, ctree, ts.Oracle(t, target), p),
    }
    return {m: x.queries for m, x in r.items()}, {x.found for x in r.values()}


# %%
t0 = time.perf_counter()
results = {}  # seed -> name -> eta -> method -> array of queries
found_all, eta0_max = True, 0
excess_top, excess_first, excess_inter = -np.inf, -np.inf, -np.inf
excess_both = -np.inf
for s in SEEDS:
    rng = repro.rng(s, 1)
    results[s] = {}
    for name, t in tqdm(trees.items(), desc=f"searching, seed {s}"):
        k = info[name]["pw"]
        res = {eta: {m: [] for m in METHODS} for eta in etas}
        for target in rng.integers(0, t.n, n_targets):
            target = int(target)
            dist = t.distances(target)
            for eta in etas:
                ring = np.flatnonzero(dist == eta)
                if len(ring) == 0:
                    continue
                p = int(ring[rng.integers(len(ring))])
                q, found = run_all(t, info[name], target, p)
                found_all &= found == {target}
                excess_top = max(
                    excess_top,
                    max(q["top-down"], q["informed"]) - ts.query_bound(k, eta),
                )
                first = q["prediction-first"]
                excess_first = max(
                    excess_first, first - ts.query_bound_from_prediction(k, eta)
                )
                excess_both = max(
                    excess_both,
                    q["ours"]
                    - ts.combined_bound(first, q["top-down"], ts.combined_head(k)),
                )
                excess_inter = max(
                    excess_inter, q["interleaved"] - 2 * min(first, q["centroid"])
                )
                if eta == 0:
                    eta0_max = max(eta0_max, q["ours"], first, q["top-down"])
                for m in METHODS:
                    res[eta][m].append(q[m])
        results[s][name] = {
            eta: {m: np.array(v) for m, v in d.items()}
            for eta, d in res.items()
            if d["ours"]
        }
print(f"searching: {time.perf_counter() - t0:.1f} s")


# %%
def pooled(name, eta, method):
    """Queries of one method on one tree at one eta, over all seeds."""
    return np.concatenate(
        [results[s][name][eta][method] for s in SEEDS if eta in results[s][name]]
    )


# %% [markdown]
# ## 6. Queries against the prediction error
#
# Mean queries per tree, pooled over the seeds: ours (combined), its two halves (prediction-first and top-down),
# centroid search (flat: it ignores the prediction), walking (`η + 1`), the interleaving, and the bound for ours
# dashed (`ts.combined_query_bound`; the x axis is `log₂(η+1)`).

# %%
COLORS = dict(
    ours="tab:blue",
    **{"top-down": "tab:cyan", "prediction-first": "tab:purple"},
    informed="tab:red",
    centroid="tab:orange",
    walk="tab:gray",
    interleaved="tab:green",
    ball="tab:brown",
)
ncol = 3
nrow = math.ceil(len(names) / ncol)
fig, axes = plt.subplots(nrow, ncol, figsize=(13, 3.1 * nrow), sharex=True)
for ax, name in zip(axes.ravel(), names):
    e = np.array([q for q in etas if q in results[SEEDS[0]][name]])
    x = np.log2(e + 1)
    top = 0.0
    for m in METHODS:
        y = [pooled(name, q, m).mean() for q in e]
        ls = ":" if m == "walk" else "-"
        ax.plot(x, y, marker="o", ms=3, ls=ls, color=COLORS[m], label=m)
        top = max(top, max(y)) if m != "walk" else top
    bound = [ts.combined_query_bound(info[name]["pw"], q) for q in e]
    ax.plot(x, bound, ls="--", color="k", lw=0.8, label="bound (ours)")
    d = info[name]
    ax.set_title(
        f"{name} [{d['group']}] n={d['n']} pw={d['pw']} Δ={d['max_deg']}", fontsize=9
    )
    ax.set_ylim(0, 1.15 * top)
    ax.set_xticks(x, [str(q) for q in e], fontsize=8)
for ax in axes.ravel()[len(names) :]:
    ax.axis("off")
for ax in axes[-1]:
    ax.set_xlabel("prediction error η")
for ax in axes[:, 0]:
    ax.set_ylabel("mean queries")
axes[0, 0].legend(fontsize=7, ncol=2)
plt.tight_layout()
plt.show()

# %% [markdown]
# The table: mean queries at a few prediction errors (pooled over seeds), and the **crossover** `η*`, the
# smallest `η` at which ours is no better on average than centroid search.


# %%
def crossover(name: str):
    for eta in etas:
        if eta > 0 and eta in results[SEEDS[0]][name]:
            if pooled(name, eta, "ours").mean() >= pooled(name, eta, "centroid").mean():
                return eta
    return None


def cell(name, eta, m):
    return (
        f"{pooled(name, eta, m).mean():.2f}" if eta in results[SEEDS[0]][name] else "-"
    )


print(
    f"{'tree':21} {'Δ':>4} {'pw':>3} {'centroid':>8} | ours η=1 {'η=4':>5} {'η=16':>5} "
    "| "
    f"top-down η=1 {'η=4':>5} {'η=16':>5} | {'η*':>4}"
)
for name in names:
    cen = np.concatenate([pooled(name, q, "centroid") for q in results[SEEDS[0]][name]])
    print(
        f"{name:21} {info[name]['max_deg']:4d} {info[name]['pw']:3d} {cen.mean():8.2f} "
        "| "
        f"{cell(name, 1, 'ours'):>8} {cell(name, 4, 'ours'):>5} "
        f"{cell(name, 16, 'ours'):>5} | "
        f"{cell(name, 1, 'top-down'):>12} {cell(name, 4, 'top-down'):>5} "
        f"{cell(name, 16, 'top-down'):>5} | {str(crossover(name)):>4}"
    )

# %% [markdown]
# Against the strongest baseline at each `η`, not only centroid search: the mean over the low-degree real trees
# of ours, the top-down variant, walking and centroid search.

# %%
print(f"{'η':>4} " + " ".join(f"{m:>11}" for m in METHODS))
for q in [q for q in etas if q > 0]:
    if all(q in results[SEEDS[0]][nm] for nm in LOW):
        row = [np.mean([pooled(nm, q, m).mean() for nm in LOW]) for m in METHODS]
        print(f"{q:4d} " + " ".join(f"{v:11.2f}" for v in row))

# %% tags=["remove-input"]
low_mean = {
    q: {m: float(np.mean([pooled(nm, q, m).mean() for nm in LOW])) for m in METHODS}
    for q in etas
    if q > 0 and all(q in results[SEEDS[0]][nm] for nm in LOW)
}
q1 = low_mean.get(1)
away = next((q for q, v in low_mean.items() if v["ours"] <= v["walk"] - 1), None)
txt = "**Reading the two tables.** "
if q1:
    txt += (
        f"At `η = 1` on the low-degree trees ours costs {q1['ours']:.2f} queries on "
        "average against walking's "
        f"{q1['walk']:.2f}, and the top-down variant {q1['top-down']:.2f} (it pays "
        "roughly a query per level of the "
        "decomposition above the target). "
    )
if away is None:
    txt += "Over the whole grid of `η` ours never saves a full query over walking. "
else:
    cheaper = low_mean[away]["centroid"] < min(
        low_mean[away]["ours"], low_mean[away]["walk"]
    )
    txt += f"Ours first saves a full query over walking at `η = {away}`" + (
        ", where centroid search is already cheaper than both. " if cheaper else ". "
    )
txt += (
    "Why does a galloping search not pull away sooner? It saves queries over walking "
    "only where the path from "
    "the prediction to the target runs along one spine for several edges; on a stretch "
    "of one or two edges, "
    "galloping asks the same vertices walking asks. The experiment below splits each "
    "path from the prediction "
    "to the target (low-degree trees, first seed) into its maximal stretches along one "
    "spine "
    "(`ts.spine_runs`); the other edges step from one component's spine to another's."
)
display(Markdown(txt))

# %%
runs_rng = repro.rng(seed, 6)
print(
    f"{'η':>3} {'on a spine':>10} {'longest':>7} {'ours = walk':>11} | ours − walk "
    "when the "
    "longest stretch is ≤ 2 edges | ≥ 3 edges"
)
run_stats = {}
for q in [q for q in (4, 8, 16) if q in etas]:
    rows = []
    for nm in LOW:
        t, dec = trees[nm], info[nm]["dec"]
        for target in runs_rng.integers(0, t.n, n_targets):
            ring = np.flatnonzero(t.distances(int(target)) == q)
            if len(ring) == 0:
                continue
            p = int(ring[runs_rng.integers(len(ring))])
            ours_q = ts.search_with_prediction(
                t, dec, ts.Oracle(t, int(target)), p, start="both"
            ).queries
            r = ts.spine_runs(dec, p, int(target))
            rows.append((ours_q - (q + 1), max(r, default=0), sum(r) / q))
    a = np.array(rows)
    short = a[:, 1] <= 2
    run_stats[q] = dict(
        on_spine=a[:, 2].mean(),
        longest=a[:, 1].mean(),
        equal=np.mean(a[:, 0] == 0),
        short=short.mean(),
        d_short=a[short, 0].mean() if short.any() else np.nan,
        d_long=a[~short, 0].mean() if (~short).any() else np.nan,
    )
    st_ = run_stats[q]
    print(
        f"{q:3d} {st_['on_spine']:10.0%} {st_['longest']:7.1f} {st_['equal']:11.0%} | "
        f"{st_['d_short']:+.2f} on {st_['short']:.0%} of searches"
        f"{'':>18} | {st_['d_long']:+.2f}"
    )

# %%
if 4 in run_stats:
    r4 = run_stats[4]
    print(
        f"At η = 4 only {r4['on_spine']:.0%} of the path's edges lie along spines, the "
        f"longest stretch is {r4['longest']:.1f} edges on average, and on the "
        f"{r4['short']:.0%} of searches whose longest stretch is at most 2 edges ours "
        "− "
        f"walking is {r4['d_short']:+.2f} queries; on the others it is "
        f"{r4['d_long']:+.2f} (galloping over 3 or 4 spine edges overshoots and "
        "bisects "
        "back)."
    )
if 16 in run_stats:
    r16 = run_stats[16]
    print(
        f"At η = 16 the longest stretch averages {r16['longest']:.1f} edges and "
        f"ours − walking is {r16['d_long']:+.2f} queries on the searches with a "
        "stretch "
        "of 3 or more edges."
    )

# %% tags=["remove-input"]
q_max = max(low_mean)
top_wins = [q for q, v in low_mean.items() if v["top-down"] < v["ours"]]
display(
    Markdown(
        "So the mechanism is not that the spines near the prediction are short (they "
        "need not be), but how often the "
        "path from the prediction to the target leaves a spine: the share of its edges "
        "along a spine and the longest "
        "stretch are printed above; each edge that steps between components costs the "
        "one query walking pays too. "
        + (
            "The top-down variant, which pays one query per level above the target's "
            "level and gallops only from "
            "there, is the cheaper of the two on average at `η` = "
            f"{', '.join(map(str, top_wins))}"
            if top_wins
            else "The top-down variant is never the cheaper of the two on average on "
            "these trees"
        )
        + f" (largest `η` of the grid: {q_max}); the interleaving with centroid search "
        "inherits the better of the prediction-first search and "
        "centroid within a factor of two (a check). "
        + (
            f"**Ours, the combined search**, costs {low_mean[1]['ours']:.2f} queries at "
            f"`η = 1` (prediction-first {low_mean[1]['prediction-first']:.2f}, "
            f"top-down {low_mean[1]['top-down']:.2f}) and {low_mean[q_max]['ours']:.2f} "
            f"at `η = {q_max}` (prediction-first "
            f"{low_mean[q_max]['prediction-first']:.2f}, top-down "
            f"{low_mean[q_max]['top-down']:.2f}): "
            + (
                "it keeps the small-`η` constant but does not reach the top-down "
                "variant at large `η`. Once its head of `2k + 2` queries is spent, "
                "taking turns pays for both halves' queries until one finishes, and "
                "the prediction-first half is rarely far behind: a combination that "
                "reaches the better of the two in both regimes is not built here."
                if low_mean[q_max]["ours"] > low_mean[q_max]["top-down"] + 0.5
                else "it keeps the small-`η` constant and stays within half a query "
                "of the top-down variant at the largest `η`."
            )
            + " The informed top-down variant costs "
            f"{low_mean[1]['informed']:.2f} at `η = 1` and "
            f"{low_mean[q_max]['informed']:.2f} at `η = {q_max}`."
            if 1 in low_mean
            else ""
        )
    )
)

# %% [markdown]
# ### The gain at small prediction errors, per tree, and its dependence on degree
#
# For each tree: centroid queries ÷ our queries, pooled over `1 ≤ η ≤ 4` (the prediction errors in our grid up to
# 4) and over the seeds, with a 95% bootstrap interval over the (target, η) pairs. A ratio above 1 means the
# prediction pays.

# %%
SMALL = [q for q in etas if 1 <= q <= 4]


def small_eta(name, m, seeds=SEEDS):
    return np.concatenate(
        [results[s][name][q][m] for s in seeds for q in SMALL if q in results[s][name]]
    )


boot = repro.rng(seed, 3)
gain_ci = {}
for name in names:
    c, o = small_eta(name, "centroid"), small_eta(name, "ours")
    idx = boot.integers(0, len(c), (1000, len(c)))
    b = c[idx].mean(1) / o[idx].mean(1)
    gain_ci[name] = (c.mean() / o.mean(), *np.percentile(b, [2.5, 97.5]))

order = sorted(names, key=lambda nm: info[nm]["max_deg"])
fig, (ax, ax2) = plt.subplots(1, 2, figsize=(13, 4), width_ratios=[2, 1])
gcol = dict(high="tab:red", low="tab:blue", synthetic="tab:gray")
for i, name in enumerate(order):
    g, lo, hi = gain_ci[name]
    col = gcol[info[name]["group"]]
    ax.bar(i, g, color=col, alpha=0.7)
    ax.errorbar(i, g, yerr=[[g - lo], [hi - g]], color="k", capsize=3)
    ax2.scatter(info[name]["max_deg"], g, color=col, s=25)
ax.axhline(1, color="k", lw=0.8)
ax.set_xticks(range(len(order)), order, rotation=60, ha="right", fontsize=8)
ax.set_ylabel("centroid ÷ ours, 1 ≤ η ≤ 4")
ax.set_title(
    "per tree, sorted by maximum degree (red high, blue low, gray synthetic)",
    fontsize=9,
)
ax2.set_xscale("log")
ax2.axhline(1, color="k", lw=0.8)
ax2.set(
    xlabel="maximum degree Δ", ylabel="centroid ÷ ours", title="gain against degree"
)
plt.tight_layout()
plt.show()
for name in order:
    g, lo, hi = gain_ci[name]
    print(
        f"{name:21} [{info[name]['group']:9}] Δ={info[name]['max_deg']:4d} "
        f"pw={info[name]['pw']}  gain {g:.2f}  (95% CI {lo:.2f}-{hi:.2f})"
    )
rho = np.corrcoef(
    [math.log(info[nm]["max_deg"]) for nm in REAL], [gain_ci[nm][0] for nm in REAL]
)[0, 1]
print(f"correlation of the gain with log(max degree) over the real trees: {rho:.2f}")

# %% [markdown]
# **Why degree matters.** Centroid search needs at most `⌊log₂ n⌋ + 1` queries on any tree, and much fewer on a
# tree of high degree, where a single query splits the tree into many parts. Our search pays `O(log η)` per level
# of the decomposition whatever the degree, so its advantage is largest on low-degree trees with many vertices,
# and smallest where centroid search is already cheap. Pathwidth enters through the number of levels an
# escalation may cross: the cost grows with `k` at fixed `η`.
#
# On the path, the search is exactly doubling binary search; we compare it with the array version.

# %%
n_path = trees["path"].n
prng = repro.rng(seed, 4)
pairs = [
    (int(t_), int(min(n_path - 1, t_ + eta)))
    for eta in etas
    for t_ in prng.integers(0, max(1, n_path - eta), 50)
]
arr = [ts.doubling_search_path(n_path, t_, p_).queries for t_, p_ in pairs]
tre = [
    ts.search_with_prediction(
        trees["path"], info["path"]["dec"], ts.Oracle(trees["path"], t_), p_
    ).queries
    for t_, p_ in pairs
]
print(
    f"path of {n_path}, the same {len(pairs)} (target, prediction) pairs: mean "
    "queries, "
    f"doubling search on the array {np.mean(arr):.2f}, prediction-first tree search "
    f"{np.mean(tre):.2f}; "
    f"identical counts on {np.mean(np.array(arr) == np.array(tre)):.0%} of pairs"
)

# %% [markdown]
# ## 7. The shape: worst case over all targets at distance η
#
# Random targets measure the typical cost; the theorem is about the worst case. For a few random predictions per
# tree and seed, we run our search against **every** target at distance exactly `η` (up to `ring_cap` of them,
# sampled, when the ring is larger) and keep the maximum. Averaged over the predictions, this worst case is
# fitted per tree both as `a + b log₂(η+1)` and as `a + b η`; the fit with the smaller squared error names the
# shape. A tree needs at least four prediction errors with targets to be fitted (through three points of a
# short range both fits are nearly exact, and the comparison is a coin flip).


# %%
# the worst case over a ring of targets and the two fits: ts.worst_case, ts.fit_shape
t0 = time.perf_counter()
pos_etas = [q for q in etas if q > 0]
adv = {}  # seed -> name -> start -> {eta: mean over predictions of the worst case}
adv_preds = {}  # seed -> name -> the predictions
for s in SEEDS:
    rng = repro.rng(s, 5)
    adv[s] = {}
    for name, t in tqdm(trees.items(), desc=f"worst cases, seed {s}"):
        dec = info[name]["dec"]
        adv[s][name] = {}
        preds = adv_preds.setdefault(s, {})[name] = rng.integers(0, t.n, n_adversarial)
        for start in ts.START_VARIANTS:
            w = {q: [] for q in pos_etas}
            for p in preds:
                for q in pos_etas:
                    v = ts.worst_case(t, dec, int(p), q, rng, ring_cap, start)
                    if v is not None:
                        w[q].append(v)
            adv[s][name][start] = {q: float(np.mean(v)) for q, v in w.items() if v}
print(f"worst cases: {time.perf_counter() - t0:.1f} s")

# %%
shape = {}  # seed -> start -> name -> (sse log, sse linear)
for s in SEEDS:
    shape[s] = {}
    for start in ts.START_VARIANTS:
        shape[s][start] = {}
        for name in names:
            w = adv[s][name][start]
            if len(w) >= 4:
                shape[s][start][name] = ts.fit_shape(list(w), list(w.values()))
LOWPW = [nm for nm in names if info[nm]["pw"] <= 3]
print(
    f"{'tree':21} {'pw':>3}  log fit wins (seeds): ours, prediction-first, top-down"
)
for name in names:
    row = []
    for start in ("both", "prediction", "top"):
        wins = [
            shape[s][start][name][0] < shape[s][start][name][1]
            for s in SEEDS
            if name in shape[s][start]
        ]
        row.append(f"{sum(wins)}/{len(wins)}" if wins else "not fitted")
    print(f"{name:21} {info[name]['pw']:3d}  {row[0]:>10} {row[1]:>10} {row[2]:>10}")

# %%
show = [nm for nm in LOWPW if nm in shape[SEEDS[0]]["both"]]
ncol = 4
nrow = max(1, math.ceil(len(show) / ncol))
fig, axes = plt.subplots(nrow, ncol, figsize=(13, 3 * nrow), squeeze=False)
for ax, name in zip(axes.ravel(), show):
    for start, col in (("both", "tab:blue"), ("top", "tab:cyan")):
        w = adv[SEEDS[0]][name][start]
        e, y = np.array(list(w)), np.array(list(w.values()))
        ax.plot(
            e,
            y,
            "o",
            color=col,
            ms=4,
            label=f"{'ours' if start == 'both' else 'top-down'}",
        )
        if start == "both":
            xs = np.linspace(e.min(), e.max(), 100)
            ax.plot(
                xs,
                np.polyval(np.polyfit(np.log2(e + 1), y, 1), np.log2(xs + 1)),
                color=col,
                lw=1,
                label="log fit",
            )
            ax.plot(
                xs,
                np.polyval(np.polyfit(e, y, 1), xs),
                color=col,
                lw=1,
                ls="--",
                label="linear fit",
            )
    ax.set_title(f"{name} (pw={info[name]['pw']})", fontsize=9)
    ax.set_xscale("symlog", base=2)
    ax.set_xlabel("η")
for ax in axes.ravel()[len(show) :]:
    ax.axis("off")
axes[0, 0].set_ylabel("worst case over targets")
axes[0, 0].legend(fontsize=7)
plt.tight_layout()
plt.show()

# %% tags=["remove-input"]
n_log = sum(
    shape[SEEDS[0]]["both"][nm][0] < shape[SEEDS[0]]["both"][nm][1]
    for nm in show
)
eta_top = max(etas)
above = [
    k for k in (1, 2, 3) if ts.combined_query_bound(k, eta_top) > eta_top + 1
]
display(
    Markdown(
        "**Where the log fit wins and where it loses.** On the first seed the log fit "
        f"wins on {n_log} of {len(show)} "
        "trees of pathwidth ≤ 3. "
        + (
            f"Our bound is above walking's `η + 1` even at the largest `η = {eta_top}` "
            "of the grid for pathwidth k in "
            f"{above}, so for those trees the theorem does not predict a visible `log "
            "η` shape at this scale. "
            if above
            else ""
        )
        + "One possible reason a worst case is linear is the lower bound of §8: if the "
        "tree contains a complete "
        "binary tree of height `h` rooted at the prediction, then *every* algorithm "
        "needs `η + 1` queries for some "
        "target at distance `η ≤ h`. Below, for the trees of pathwidth ≤ 3 (first "
        "seed): that height at each "
        "prediction (`ts.binary_height_at`), and our worst case minus walking's `η + "
        "1`, per `η`."
    )
)

# %%
print(
    f"{'tree':14} {'binary height at the predictions':>33}   ours worst − (η + 1), by η"
)
for name in show:
    hts = [ts.binary_height_at(trees[name], int(p)) for p in adv_preds[SEEDS[0]][name]]
    w = adv[SEEDS[0]][name]["both"]
    print(
        f"{name:14} {str(hts):>33}   "
        + "  ".join(f"{q}: {v - q - 1:+.1f}" for q, v in w.items())
    )
    beyond = [v - q - 1 for q, v in w.items() if q > max(hts)]
    print(
        f"{'':14} η beyond the largest height {max(hts)}: no algorithm is forced to η "
        "+ 1 "
        f"by the binary-tree bound; ours − walking there, mean "
        f"{np.mean(beyond) if beyond else float('nan'):+.2f}"
    )

# %% [markdown]
# Where the binary-tree bound stops (η beyond the printed height), a worst case close to `η + 1` is not forced on
# every algorithm by that argument: it is the cost of our search on the worst target, for the reason measured in
# §6 (the path to that target leaves a spine every one or two edges). Whether some other algorithm does better
# there we cannot say: the exact minimax is out of reach on trees of this size.

# %% [markdown]
# ### Large path-like trees: where a prediction should pay
#
# The trees above are small (the largest has a few thousand vertices), so centroid search needs few queries
# anyway, and most of their `η` grid is where walking is cheap. The theorem's regime is a large tree of small
# pathwidth with a long diameter: there centroid search pays about `log₂ n` queries, walking pays `η + 1`, and a
# search that costs `O(k log η)` should beat both at moderate `η`. We build trees of that shape, new ones for
# every seed, at least `n_big` vertices each:
#
# * **corridors**: the minimum spanning tree of a `rows × n/rows` grid with random weights (`ts.corridor_tree`,
#   pathwidth at most `rows`), synthetic road-like trees;
# * **image strips**: a strip of pixels two or three rows high that snakes through one of scikit-learn's two
#   bundled photographs, as a grid graph whose edge weights are colour differences; the tree is its minimum
#   spanning tree (`ts.image_strip_tree`), the tree that graph-based image segmentation (Felzenszwalb &
#   Huttenlocher 2004) cuts. Each seed takes another stretch of the snake;
# * for contrast, a **single-linkage dendrogram** of a real point set (`ts.single_linkage_tree`): the colours of
#   `dendro_points` pixels of `china.jpg`, drawn per seed. Single linkage "chains", so its dendrogram has a long
#   diameter, but it is a binary tree with bushy parts and may have a larger pathwidth (measured below).
#
# On these trees one more baseline joins: the **ball search** (`ts.ball_search`), what a practitioner who has a
# prediction but knows nothing of pathwidth would write. It asks the prediction, then runs centroid search on the
# vertices within distance `r` of the prediction that the answers so far allow, for `r = 1, 2, 4, ...`, doubling
# `r` whenever that set runs empty (the target is farther). Each phase costs about `log₂` of the ball's size, so it
# should grow like `log² η` where ours grows like `k log η`.
#
# A tree is *path-like* if it has pathwidth ≤ 3, diameter ≥ 256 and at least 50,000 vertices. On every tree
# `ts.measure_tree` runs every search on `big_targets` random targets, each at every `η` up to 256, and the worst
# case of ours and of its two halves over the **full ring** of targets at each `η`, from `big_preds` random
# predictions (the dendrogram gets the mean queries only).

# %%
from sklearn.datasets import load_sample_image  # noqa: E402  (bundled photographs)

IMAGES = {nm: load_sample_image(nm) for nm in ["china.jpg", "flower.jpg"]}


def large_trees(s):
    """(family, label, tree) of the large trees of seed s."""
    out = []
    for j, r in enumerate(corridor_rows):
        t = ts.corridor_tree(r, -(-n_big // r), seed=1000 * s + j)
        out.append(("corridor", f"corridor, {r} rows", t))
    for im, band in strips:
        img, length = IMAGES[im], -(-n_big // band)
        total = (img.shape[0] // band) * img.shape[1]
        off = (s * length) % (total - length + 1)  # another stretch per seed
        t = ts.image_strip_tree(img, band, length, offset=off)
        out.append(("image strip", f"{im}, band {band}", t))
    colours = np.unique(IMAGES["china.jpg"].reshape(-1, 3), axis=0).astype(float)
    pick = repro.rng(s, 9).choice(len(colours), dendro_points, replace=False)
    out.append(("dendrogram", "single linkage", ts.single_linkage_tree(colours[pick])))
    return out


# %%
t0 = time.perf_counter()
big = {}  # seed -> one dict per large tree (ts.measure_tree, plus family and label)
for s in SEEDS:
    rng = repro.rng(s, 8)
    big[s] = []
    for fam, label, t in tqdm(large_trees(s), desc=f"large trees, seed {s}"):
        preds = 0 if fam == "dendrogram" else big_preds
        b = ts.measure_tree(t, big_etas, big_targets, preds, rng)
        big[s].append(dict(b, family=fam, label=label))
path_like = {
    s: [b for b in big[s] if b["pw"] <= 3 and b["diam"] >= 256 and b["n"] >= 50_000]
    for s in SEEDS
}
print(f"large trees: {time.perf_counter() - t0:.1f} s")
print(f"{'seed':>4} {'tree':22} {'n':>7} {'pw':>3} {'diameter':>8} {'path-like':>9}")
for s in SEEDS:
    for b in big[s]:
        like = any(b is x for x in path_like[s])
        print(
            f"{s:4d} {b['label']:22} {b['n']:7,d} {b['pw']:3d} {b['diam']:8,d} "
            f"{like!s:>9}"
        )


# %%
def group_of(s):
    """The path-like trees of seed s (if none is, the large trees of pathwidth <= 3)."""
    return path_like[s] or [b for b in big[s] if b["pw"] <= 3]


def big_mean(s, eta, m, group=None):
    """Mean queries of method m at eta over a group of large trees of seed s."""
    group = group_of(s) if group is None else group
    return float(np.mean([b["sweep"][eta][m] for b in group if eta in b["sweep"]]))


def big_worst(s, eta, start):
    """Worst case over the ring, mean over the predictions and the path-like trees."""
    return float(np.nanmean([b["worst"][start].get(eta, np.nan) for b in group_of(s)]))


print(f"mean queries over the path-like trees, seed {SEEDS[0]}")
print(f"{'η':>4} " + " ".join(f"{m:>16}" for m in ts.SWEEP_METHODS))
for q in big_etas:
    row = [big_mean(SEEDS[0], q, m) for m in ts.SWEEP_METHODS]
    print(f"{q:4d} " + " ".join(f"{v:16.2f}" for v in row))

# %% [markdown]
# The same numbers as curves, averaged over the seeds: mean queries of every search (left), and the worst case over
# the full ring of targets of ours, of its halves and of the ball search next to walking's `η + 1` (right).

# %% tags=["hide-input"]
fig, (ax, ax2) = plt.subplots(1, 2, figsize=(13, 4))
xb = np.log2(np.array(big_etas) + 1)
for m in ts.SWEEP_METHODS:
    y = [np.mean([big_mean(s, q, m) for s in SEEDS]) for q in big_etas]
    ax.plot(xb, y, marker="o", ms=3, color=COLORS[m], ls=":" if m == "walk" else "-",
            label=m)
ax.set(ylim=(0, 45), ylabel="mean queries", title="path-like trees: mean over targets")
STARTS = {
    "both": "ours",
    "prediction": "prediction-first",
    "top": "top-down",
    "informed": "informed",
}
for start, m in STARTS.items():
    y = [np.mean([big_worst(s, q, start) for s in SEEDS]) for q in big_etas]
    ax2.plot(xb, y, marker="o", ms=3, color=COLORS[m], label=m)
y = [np.mean([big_worst(s, q, "ball") for s in SEEDS]) for q in big_etas]
ax2.plot(xb, y, marker="o", ms=3, color=COLORS["ball"], label="ball")
ax2.plot(xb, np.array(big_etas) + 1, ls=":", color=COLORS["walk"], label="walk")
ax2.set(
    ylim=(0, 45), ylabel="worst case over the ring", title="path-like trees: worst case"
)
for a in (ax, ax2):
    a.set_xticks(xb, [str(q) for q in big_etas], fontsize=8)
    a.set_xlabel("prediction error η")
    a.legend(fontsize=7)
plt.tight_layout()
plt.show()

# %% tags=["remove-input"]
b_gain = {
    s: ts.best_baseline_gain(
        {q: {m: big_mean(s, q, m) for m in ts.SWEEP_METHODS} for q in big_etas}
    )
    for s in SEEDS
}
b0, pl0 = big[SEEDS[0]], path_like[SEEDS[0]]
dend = [b for s in SEEDS for b in big[s] if b["family"] == "dendrogram"]
g_s, g_q = b_gain[SEEDS[0]]
at = {m: big_mean(SEEDS[0], g_q, m) for m in ts.SWEEP_METHODS}
display(
    Markdown(
        f"Seed {SEEDS[0]} built {len(b0)} large trees; {len(pl0)} of them are path-like"
        + (
            f" ({min(b['n'] for b in pl0):,}–{max(b['n'] for b in pl0):,} vertices, "
            f"pathwidth {min(b['pw'] for b in pl0)}–{max(b['pw'] for b in pl0)}, "
            f"diameter {min(b['diam'] for b in pl0):,}–{max(b['diam'] for b in pl0):,})"
            if pl0
            else ""
        )
        + ". The single-linkage dendrograms have pathwidth "
        + ", ".join(str(b["pw"]) for b in dend)
        + " and diameter "
        + ", ".join(f"{b['diam']:,}" for b in dend)
        + " (per seed): chaining gives the long diameter, not a small pathwidth, so"
        " they are not path-like. On the path-like trees the better of walking and"
        f" centroid search needs {g_s:.2f}× our queries at `η = {g_q}`, the `η` where"
        " ours gains most (per seed: "
        + ", ".join(f"{g:.2f}× at η = {q}" for g, q in b_gain.values())
        + "); above 1 means ours beats both there. At that `η`, first seed: "
        + ", ".join(f"{m} {v:.2f}" for m, v in at.items())
        + "."
    )
)


# %% [markdown]
# **Where ours loses on the path-like trees.** The claim `beats_best_baseline_somewhere` below reads the best
# `η` of the grid (the grid `big_etas` is fixed in the parameters, before the run). A best case alone hides the
# rest of the curve, so here is the gain at every `η`, where it clears the claim's bar, and where a baseline or
# another variant is cheaper than ours.

# %% tags=["remove-input"]
GAIN_BAR = 1.2  # the bar of beats_best_baseline_somewhere (issue #61), fixed before the run
PRED = ("ours", "prediction-first", "top-down", "informed")
gain_eta = {  # seed -> eta -> min(walk, centroid) / ours
    s: {
        q: min(big_mean(s, q, "walk"), big_mean(s, q, "centroid"))
        / big_mean(s, q, "ours")
        for q in big_etas
    }
    for s in SEEDS
}
mean_q = {q: {m: np.mean([big_mean(s, q, m) for s in SEEDS]) for m in ts.SWEEP_METHODS}
          for q in big_etas}
over_bar = [q for q in big_etas if all(gain_eta[s][q] > GAIN_BAR for s in SEEDS)]
over_one = [q for q in big_etas if all(gain_eta[s][q] > 1 for s in SEEDS)]
near_walk = [q for q in big_etas if mean_q[q]["walk"] - mean_q[q]["ours"] < 1]
cen_wins = [q for q in big_etas if mean_q[q]["centroid"] < mean_q[q]["ours"]]
cen_all = [
    q for q in cen_wins if mean_q[q]["centroid"] < min(mean_q[q][m] for m in PRED)
]
top_wins = [q for q in big_etas if mean_q[q]["top-down"] < mean_q[q]["ours"]]
gap_first = max(
    abs(mean_q[q]["ours"] - mean_q[q]["prediction-first"]) for q in big_etas
)
gap_top = max(mean_q[q]["ours"] - mean_q[q]["top-down"] for q in big_etas)
ball_eta = {  # seed -> eta -> ball / ours
    s: {q: big_mean(s, q, "ball") / big_mean(s, q, "ours") for q in big_etas}
    for s in SEEDS
}
ball_wins = [q for q in big_etas if mean_q[q]["ball"] < mean_q[q]["ours"]]
ball_bar = [q for q in big_etas if all(ball_eta[s][q] > GAIN_BAR for s in SEEDS)]
worst_q = {  # eta -> (ball, ours): worst case over the full ring, mean over seeds
    q: tuple(np.nanmean([big_worst(s, q, st) for s in SEEDS]) for st in ("ball", "both"))
    for q in big_etas
}
ball_worst_wins = [q for q in big_etas if worst_q[q][0] < worst_q[q][1]]
fmt = lambda qs: ", ".join(map(str, qs)) if qs else "none"  # noqa: E731
display(Markdown(
    "Mean over the seeds, min(walking, centroid) ÷ ours at each `η`: "
    + ", ".join(
        f"{q}: {np.mean([gain_eta[s][q] for s in SEEDS]):.2f}" for q in big_etas
    )
    + f". Ours beats both baselines by more than the bar of {GAIN_BAR} on every seed at"
    f" `η` = {fmt(over_bar)}, and at all at `η` = {fmt(over_one)}. It saves less than"
    f" one query over walking at `η` = {fmt(near_walk)}. **Centroid search, which"
    f" ignores the prediction, needs fewer queries than ours at `η` = {fmt(cen_wins)}**"
    + (f", and fewer than every prediction-based search here at `η` = {fmt(cen_all)}"
       if cen_all else "")
    + f" (at `η = {big_etas[-1]}`: centroid {mean_q[big_etas[-1]]['centroid']:.2f},"
    f" ours {mean_q[big_etas[-1]]['ours']:.2f}, top-down"
    f" {mean_q[big_etas[-1]]['top-down']:.2f}). The top-down variant is cheaper than"
    f" ours at `η` = {fmt(top_wins)} (by up to {gap_top:.2f} queries); ours stays"
    f" within {gap_first:.2f} queries of its"
    " prediction-first half at every `η`"
    + (", so on these trees the combination costs what the prediction-first search"
       " costs: its turns with the top-down search do not bring it down to the"
       " top-down variant's cost." if top_wins and gap_first < 0.5 else ".")
    + " **The ball search**, which uses the prediction but not the pathwidth, needs"
    f" fewer queries than ours at `η` = {fmt(ball_wins)}; ball ÷ ours at each `η`"
    " (mean over the seeds): "
    + ", ".join(
        f"{q}: {np.mean([ball_eta[s][q] for s in SEEDS]):.2f}" for q in big_etas
    )
    + f"; ours beats it by more than the bar of {GAIN_BAR} on every seed at `η` ="
    f" {fmt(ball_bar)} (at `η = {big_etas[-1]}`: ball"
    f" {mean_q[big_etas[-1]]['ball']:.2f}, ours {mean_q[big_etas[-1]]['ours']:.2f})."
    " In the worst case over the full ring it needs fewer queries than ours at `η` ="
    f" {fmt(ball_worst_wins)}"
    + (" (" + ", ".join(f"{q}: {worst_q[q][0]:.1f} vs {worst_q[q][1]:.1f}"
                        for q in ball_worst_wins) + ")" if ball_worst_wins else "")
    + (". A prediction-aware search without the spine decomposition is as good for"
       " close predictions; what the pathwidth buys shows only from"
       f" `η = {ball_bar[0]}` on." if ball_bar else
       ". Ours never clears the bar against the ball search on every seed.")
))


# %% [markdown]
# ## 8. The lower bound, for every algorithm: exact minimax on complete binary trees
#
# Put the prediction at the root of a complete binary tree. The `2^η` vertices at depth `η` are all at distance
# `η`, so any of them may be the target. A query has at most four answers (found, parent, two children), so by
# counting any algorithm needs at least `η/2` queries on some target. Counting is only a bound; `ts.binary_minimax`
# computes the **exact** fewest worst-case queries of *any* adaptive algorithm that knows `η`, by a dynamic program
# over candidate sets: only the Steiner tree of the remaining candidates matters, and a vertex with one child in it
# is never better to ask than its nearest branching descendant, so a state is an unordered full binary tree shape.
# The DP agrees with a brute-force recursion over candidate sets on trees of height ≤ 3 (in the unit tests, and on
# height 3 here). We put our worst case (over every target at depth `η`, prediction at the root of the tree of height
# `binary_height`) next to it.

# %%
t0 = time.perf_counter()
mm_etas = list(range(1, minimax_max_eta + 1))
opt = np.array([ts.binary_minimax(q) for q in mm_etas])
t3 = ts.complete_tree(2, 3)
dp_vs_brute = max(
    abs(
        ts.binary_minimax(q)
        - ts.minimax_queries(t3, [v for v in range(t3.n) if t3.depth[v] == q])
    )
    for q in range(4)
)
tb = trees[f"binary h={binary_height}"]
decb = info[f"binary h={binary_height}"]["dec"]
depth = np.array(tb.depth)
lb_etas = list(range(1, binary_height + 1))
worst_b = {}
for start in ts.START_VARIANTS:
    worst_b[start] = np.array(
        [
            max(
                ts.search_with_prediction(
                    tb, decb, ts.Oracle(tb, int(v)), 0, start=start
                ).queries
                for v in np.flatnonzero(depth == q)
            )
            for q in lb_etas
        ]
    )
print(f"minimax DP and worst cases: {time.perf_counter() - t0:.1f} s")
kb = info[f"binary h={binary_height}"]["pw"]

# %% tags=["hide-input"]
fig, ax = plt.subplots(figsize=(7, 3.8))
ax.plot(
    mm_etas, opt, marker="s", ms=9, color="k", label="exact minimax (any algorithm)"
)
ax.plot(
    lb_etas,
    worst_b["both"],
    marker="o",
    lw=3,
    alpha=0.6,
    label="ours, worst case",
)
ax.plot(
    lb_etas,
    worst_b["prediction"],
    marker="v",
    ls="--",
    color="tab:purple",
    label="prediction-first, worst case",
)
ax.plot(
    lb_etas,
    worst_b["top"],
    marker="^",
    ls="--",
    color="tab:cyan",
    label="top-down, worst case",
)
ax.plot(
    lb_etas, np.array(lb_etas) / 2, ls=":", color="gray", label="counting bound η/2"
)
ax.set(
    xlabel="η (prediction at the root)",
    ylabel="queries",
    title=f"complete binary tree, height {binary_height}",
)
ax.legend(fontsize=7)
plt.show()

# %%
print("eta:              ", " ".join(f"{q:3d}" for q in mm_etas))
print("exact minimax:    ", " ".join(f"{v:3d}" for v in opt))
print(
    "ours, worst case: ", " ".join(f"{v:3d}" for v in worst_b["both"][: len(mm_etas)])
)
print(
    "prediction-first: ",
    " ".join(f"{v:3d}" for v in worst_b["prediction"][: len(mm_etas)]),
)
print("top-down, worst:  ", " ".join(f"{v:3d}" for v in worst_b["top"][: len(mm_etas)]))
ratio_lb = opt / (np.array(mm_etas) / 2)
h_pw = ts.pathwidth(ts.complete_tree(2, minimax_max_eta))
print(
    f"a complete binary tree of height {minimax_max_eta} has pathwidth {h_pw}: any "
    "tree "
    f"containing one (rooted at the prediction) forces every algorithm to "
    f"{opt[-1]} queries at η = {mm_etas[-1]}"
)
print(
    f"exact minimax ÷ (η/2): min {ratio_lb.min():.2f}; exact minimax − (η + 1), "
    f"the cost of walking: {sorted(set((opt - np.array(mm_etas) - 1).tolist()))}"
)

# %% [markdown]
# ## 9. Interaction
#
# The slider steps through the prediction errors on the exception hierarchy: the spine of the first level is
# drawn thick, the prediction is a blue square, the target a red star, and our queries are numbered in order
# (centroid search's queries are orange rings).

# %%
tx = trees["exceptions"]
gx = tx.to_networkx()
pos = nx.kamada_kawai_layout(gx)
decx = info["exceptions"]["dec"]
target_x = int(repro.rng(seed, 2).integers(tx.n))
distx = tx.distances(target_x)
demo = []
for eta in range(int(distx.max()) + 1):
    p = int(np.flatnonzero(distx == eta)[0])
    oa, ob = ts.Oracle(tx, target_x), ts.Oracle(tx, target_x)
    ts.search_with_prediction(tx, decx, oa, p, start="both")
    ts.centroid_search(tx, info["exceptions"]["ctree"], ob)
    demo.append((eta, p, oa.log, ob.log))


# %% tags=["hide-input"]
def draw_search(fig, i):
    eta, p, ours, cen = demo[i]
    ax = fig.add_subplot(111)
    nx.draw_networkx_edges(gx, pos, ax=ax, alpha=0.3)
    sp = decx.comps[0].spine
    nx.draw_networkx_edges(
        gx,
        pos,
        edgelist=list(zip(sp[:-1], sp[1:])),
        ax=ax,
        width=3,
        edge_color="tab:green",
    )
    nx.draw_networkx_nodes(gx, pos, ax=ax, node_size=12, node_color="lightgray")
    nx.draw_networkx_nodes(
        gx,
        pos,
        nodelist=cen,
        ax=ax,
        node_size=120,
        node_color="none",
        edgecolors="tab:orange",
    )
    nx.draw_networkx_nodes(
        gx,
        pos,
        nodelist=[p],
        ax=ax,
        node_size=90,
        node_shape="s",
        node_color="tab:blue",
    )
    nx.draw_networkx_nodes(
        gx,
        pos,
        nodelist=[target_x],
        ax=ax,
        node_size=200,
        node_shape="*",
        node_color="red",
    )
    for n_, v in enumerate(ours, 1):
        ax.annotate(
            str(n_),
            pos[v],
            fontsize=9,
            fontweight="bold",
            xytext=(4, 4),
            textcoords="offset points",
        )
    ax.set_title(
        f"η = {eta}: ours {len(ours)} queries, centroid {len(cen)}", fontsize=9
    )
    ax.axis("off")


plotting.static_slider(
    range(len(demo)), draw_search, figsize=(6.5, 5), label="η index", fmt="{}"
)

# %% [markdown]
# Live: pick a tree, a prediction error and a trial, and compare the searches.


# %%
def live_search(tree_name: str = "dendro_iris", eta: int = 4, trial: int = 0):
    t = trees[tree_name]
    r = repro.rng(seed, 100 + trial)
    target = int(r.integers(t.n))
    ring = np.flatnonzero(t.distances(target) == eta)
    if not len(ring):
        print(f"no vertex at distance {eta} from target {target}")
        return
    p = int(ring[r.integers(len(ring))])
    q, _ = run_all(t, info[tree_name], target, p)
    bound = ts.query_bound_from_prediction(info[tree_name]["pw"], eta)
    print(", ".join(f"{m} {v}" for m, v in q.items()) + f" (our bound {bound})")


plotting.live_controls(live_search, tree_name=names, eta=(0, 64), trial=(0, 20))

# %% [markdown]
# ## 10. Checks

# %%
rec.check(
    "always_finds",
    bool(found_all),
    True,
    note="ours, prediction-first, top-down, centroid, walk and interleaved, every "
    "search on every small tree (query_sweep asserts it on the large ones)",
)
rec.check(
    "query_bound_top_down",
    int(excess_top),
    0,
    op="<=",
    note="max over searches of queries - (1 + k(2⌈log2(η+1)⌉+3)), top-down and "
    "informed top-down",
)
rec.check(
    "query_bound_from_prediction",
    int(excess_first),
    0,
    op="<=",
    note="max over searches of queries - (1 + (2k+1)(2⌈log2(η+1)⌉+3) + k), "
    "prediction-first",
)
rec.check(
    "combined_within_its_bound",
    int(excess_both),
    0,
    op="<=",
    note="max over searches of ours - ts.combined_bound(prediction-first, top-down, "
    "2k + 2)",
)
rec.check(
    "interleaved_within_twice_min",
    int(excess_inter),
    0,
    op="<=",
    note="max over searches of interleaved - 2 min(prediction-first, centroid)",
)

# %%
rec.check(
    "pathwidth_bruteforce",
    pw_mismatch,
    0,
    note=f"{n_brute} random trees + {len(closed)} closed forms",
)
rec.check(
    "spine_property",
    spine_violations,
    0,
    note="components off a spine with pathwidth not smaller",
)
rec.check(
    "eta_zero_one_query",
    eta0_max,
    1,
    note="max queries when the prediction is the target",
)
rec.check(
    "minimax_dp_equals_brute_force",
    dp_vs_brute,
    0,
    note="shape DP vs brute-force recursion, complete binary tree of height 3",
)
rec.check(
    "minimax_at_least_counting_bound",
    float(ratio_lb.min()),
    1.0,
    op=">=",
    note="min over η of exact minimax ÷ (η/2): the counting bound (≤ 4 answers per "
    "query, "
    "2^η candidates) holds for any correct DP",
)
rec.check(
    "no_algorithm_below_minimax",
    int(
        np.min(np.min(list(worst_b.values()), axis=0)[: len(mm_etas)] - opt)
    ),
    0,
    op=">=",
    note="our worst cases on the binary tree are at least the exact minimax",
)

# %% [markdown]
# ## 11. The claims record
#
# Five claims, each measured per seed where it depends on the random targets, predictions and large trees, and
# one left untested:
#
# * `real_tree_gain`: on the **low-degree** real trees, the mean over trees of centroid queries ÷ our queries at
#   `1 ≤ η ≤ 4` is above 1 (the paper: "notably better than the simple non-prediction based algorithm"). Centroid
#   search is the paper's comparison; the strongest baseline at these `η` is walking from the prediction, which
#   ties ours (§6): its own gain over centroid search is recorded in the note.
# * `log_eta_shape`: among the large path-like trees, the fraction on which the worst case over the full ring of
#   targets is fitted better by `log η` than by `η` is at least 0.8 (the small trees' fraction is in the note). <!-- paper -->
#   It separates sublinear from linear growth, not `log η` from other slow shapes, and it does not single out
#   ours: the top-down variant is its recorded baseline and every variant's fraction is in the note.
# * `beats_best_baseline_somewhere`: on the large path-like trees, at the `η` where ours gains most, the better of
#   walking and centroid search needs more than 1.2 times our queries. <!-- paper -->
#   A best case over a grid fixed before the run (`big_etas`), against the better baseline *at each* `η` (an
#   oracle choice no search without `η` can make). It can fail: the note gives the same statistic on the
#   single-linkage dendrograms, outside the regime. The gain at every `η`, and where centroid search or the
#   top-down variant is cheaper than ours, are in the note and in the paragraph "Where ours loses" of §7.
# * `beats_ball_search`: on the same trees and the same grid, at the `η` where ours gains most over the **ball
#   search** (the prediction-aware search without pathwidth, §7), the ball search needs more than the same bar
#   times our queries. The ball search is a single algorithm, not a per-`η` choice; it is cheaper than ours at
#   small `η`, and the note and "Where ours loses" say where.
# * `binary_lower_bound`: on complete binary trees the exact minimax optimum of any algorithm divided by walking's
#   `η + 1` is at least 1 for every `η` computed: no algorithm beats walking there, so none is `O(log η)`. (That
#   the minimax is at least `η/2` follows from counting and is a check.)
#
# That a close prediction is cheap is a check, not a claim: ours asks the prediction first and, when the
# prediction is next to the target, its neighbour on the way, so at `η = 1` it is within a query of walking's
# optimal 2 by design (`small_eta_cost`).

# %%
eta1 = {
    s: {
        m: float(np.mean([results[s][nm][1][m].mean() for nm in names]))
        for m in METHODS
    }
    for s in SEEDS
}
rec.check(
    "small_eta_cost",
    max(eta1[s]["ours"] - eta1[s]["walk"] for s in SEEDS),
    1.0,
    op="<=",
    note="max over seeds of (ours - walking), mean queries at η = 1 over all small "
    "trees; per seed, ours "
    + "/".join(f"{eta1[s]['ours']:.2f}" for s in SEEDS)
    + ", walking "
    + "/".join(f"{eta1[s]['walk']:.2f}" for s in SEEDS),
)

# %% [markdown]
# **Condition.** The two claims on the large trees speak of the theorem's regime, large trees of small pathwidth
# and long diameter, and `log_eta_shape` is a share over trees with a bar of 0.8, which one tree moves by more <!-- paper -->
# than the margin when there are few (the round-3 review found it decided by four small trees). The review's
# minimum, at least 8 path-like trees (n ≥ 50,000, pathwidth ≤ 3, diameter ≥ 256) per seed, is the condition
# `shape_trees`, fixed before reading the numbers. The other claims are about exact algorithms on fixed trees and
# need none.


# %%
def gain_of(name, s):
    return small_eta(name, "centroid", [s]).mean() / small_eta(name, "ours", [s]).mean()


def mean_small(m, group, s):
    return float(np.mean([small_eta(nm, m, [s]).mean() for nm in group]))


gain_low = [float(np.mean([gain_of(nm, s) for nm in LOW])) for s in SEEDS]
gain_high = [float(np.mean([gain_of(nm, s) for nm in HIGH])) for s in SEEDS]
gain_walk_low = [
    mean_small("centroid", LOW, s) / mean_small("walk", LOW, s) for s in SEEDS
]
cen_low = [mean_small("centroid", LOW, s) for s in SEEDS]
per_tree = {nm: [gain_of(nm, s) for s in SEEDS] for nm in REAL}
base_txt = "; ".join(
    f"{m} {np.mean([mean_small(m, LOW, s) for s in SEEDS]):.2f}" for m in METHODS
)
print("low-degree trees, mean queries at 1 ≤ η ≤ 4 (mean over seeds): " + base_txt)
fitted = [nm for nm in LOWPW if all(nm in shape[s]["both"] for s in SEEDS)]
frac_small = {
    start: [
        float(
            np.mean([shape[s][start][nm][0] < shape[s][start][nm][1] for nm in fitted])
        )
        for s in SEEDS
    ]
    for start in ts.START_VARIANTS
}


# %%
def log_wins(b, start):
    """Does the log fit beat the linear fit on this large tree's worst case (finite
    points only)?"""
    w = {q: v for q, v in b["worst"][start].items() if np.isfinite(v)}
    sse = ts.fit_shape(list(w), list(w.values()))
    return sse[0] < sse[1]


frac = {
    start: [float(np.mean([log_wins(b, start) for b in group_of(s)])) for s in SEEDS]
    for start in ts.START_VARIANTS
}
gain_of_method = {  # max over eta of min(walk, centroid) / method, per seed
    m: [
        max(
            min(big_mean(s, q, "walk"), big_mean(s, q, "centroid")) / big_mean(s, q, m)
            for q in big_etas
        )
        for s in SEEDS
    ]
    for m in ("ours", "prediction-first", "top-down", "informed", "interleaved")
}
dend_gain = [ts.best_baseline_gain(b["sweep"]) for b in dend]  # per seed
ball_best = {s: max(ball_eta[s].items(), key=lambda kv: kv[1]) for s in SEEDS}
frac_ball = [float(np.mean([log_wins(b, "ball") for b in group_of(s)])) for s in SEEDS]
ratio_walk = opt / (np.array(mm_etas) + 1)
rec.condition(
    "shape_trees",
    [len(path_like[s]) for s in SEEDS],
    ">=",
    8,
    unit="path-like trees (n ≥ 50,000, pathwidth ≤ 3, diameter ≥ 256)",
    statement="enough large path-like trees, the regime of the theorem, to decide a "
    "share over trees",
)

# %% tags=["hide-input"]
# the notes: diagnostics written from the numbers (bookkeeping, not rules)
slash = lambda xs: "/".join(f"{v:.2f}" for v in xs)  # noqa: E731
NOTES = {
    "real_tree_gain": "baseline = centroid search's mean queries on these trees at 1 ≤ "
    "η ≤ 4, per seed. Per tree (per seed): "
    + "; ".join(f"{nm} {slash(per_tree[nm])}" for nm in LOW)
    + ". High-degree trees, for comparison (mean over trees per seed): "
    f"{slash(gain_high)} ("
    + "; ".join(f"{nm} {slash(per_tree[nm])}" for nm in HIGH)
    + f"). Mean queries on the low-degree trees at 1 ≤ η ≤ 4: {base_txt}. Walking from "
    "the prediction, the strongest baseline at these η, gains as much over centroid "
    f"search (centroid ÷ walk, per seed: {slash(gain_walk_low)}): the gain is the "
    "prediction's, not our search's; any search that starts at the prediction has "
    "it. Where our search itself gains is beats_best_baseline_somewhere.",
    "log_eta_shape": "ours (the combined search) on the large path-like trees "
    f"({n_big:,} vertices or more; corridors of rows {corridor_rows} and image "
    f"strips {strips}, new per seed), worst case over the full "
    f"ring of targets at η in {big_etas}, mean over {big_preds} random predictions per "
    "tree; baseline = the same fraction for the top-down variant; prediction-first: "
    f"{slash(frac['prediction'])}; informed top-down: {slash(frac['informed'])}. "
    "On the small trees of pathwidth ≤ 3 of §7 "
    f"({', '.join(fitted)}; up to {ring_cap} targets per ring) the fraction for ours "
    f"is {slash(frac_small['both'])} per seed (top-down {slash(frac_small['top'])}). "
    f"The ball search's worst case (same rings): {slash(frac_ball)} per seed.",
    "beats_ball_search": "ball search = ts.ball_search: ask the prediction, then "
    "centroid search inside the ball of radius r = 1, 2, 4, ... around it (restricted "
    "to what the answers allow), doubling r when the ball is exhausted; it knows "
    "nothing of pathwidth. Mean queries over the path-like trees per η, the same "
    "targets and predictions as ours. Per seed the η where ours gains most: "
    + ", ".join(f"η = {q}" for q, _ in ball_best.values())
    + ". Ball ÷ ours at every η (mean over seeds): "
    + ", ".join(
        f"{q}: {np.mean([ball_eta[s][q] for s in SEEDS]):.2f}" for q in big_etas
    )
    + f"; the ball search is cheaper than ours at η = {fmt(ball_wins)}; above the bar "
    f"on every seed at η = {fmt(ball_bar)}. Worst case over the full ring (mean over "
    "seeds), ball / ours: "
    + ", ".join(
        f"{q}: {np.nanmean([big_worst(s, q, 'ball') for s in SEEDS]):.1f}/"
        f"{np.nanmean([big_worst(s, q, 'both') for s in SEEDS]):.1f}"
        for q in big_etas
    )
    + ".",
    "beats_best_baseline_somewhere": "ours = the combined search (prediction-first "
    "alone for 2k + 2 queries, then taking turns with top-down, shared answers); mean "
    "queries over the path-like trees per η; per seed the η where ours gains most: "
    + ", ".join(f"η = {q}" for _, q in b_gain.values())
    + ". Gain at every η (mean over seeds): "
    + ", ".join(
        f"{q}: {np.mean([gain_eta[s][q] for s in SEEDS]):.2f}" for q in big_etas
    )
    + f"; above the bar on every seed at η = {fmt(over_bar)}; centroid search needs "
    f"fewer queries than ours at η = {fmt(cen_wins)}; the top-down variant fewer "
    f"than ours at η = {fmt(top_wins)}"
    + ". Mean queries at that η, first seed: "
    + ", ".join(f"{m} {big_mean(SEEDS[0], b_gain[SEEDS[0]][1], m):.2f}"
                for m in ts.SWEEP_METHODS)
    + ". The ball search (prediction-aware, no pathwidth; see beats_ball_search), "
    "mean queries per η (mean over seeds): "
    + ", ".join(f"{q}: {mean_q[q]['ball']:.2f}" for q in big_etas)
    + ". The same max-over-η gain for the variants, per seed: "
    + "; ".join(f"{m} {slash(v)}" for m, v in gain_of_method.items() if m != "ours")
    + ". Outside the regime, the single-linkage dendrograms of pixel colours "
    "(pathwidth "
    + "/".join(str(b["pw"]) for b in dend)
    + "): "
    + ", ".join(f"{g:.2f}× at η = {q}" for g, q in dend_gain)
    + " per seed.",
    "binary_lower_bound": "the counting bound η/2 holds for every algorithm by "
    "construction and is a check (minimax_at_least_counting_bound); this claim asks "
    "for more: that no algorithm beats walking. Exact minimax per η: "
    + ", ".join(f"{q}: {v}" for q, v in zip(mm_etas, opt))
    + "; ours, worst case: "
    + ", ".join(f"{q}: {v}" for q, v in zip(mm_etas, worst_b["both"]))
    + "; prediction-first: "
    + ", ".join(f"{q}: {v}" for q, v in zip(mm_etas, worst_b["prediction"]))
    + "; top-down: "
    + ", ".join(f"{q}: {v}" for q, v in zip(mm_etas, worst_b["top"])),
}

# %%
# id: (statement, paper, measured (per seed), op, target, unit, baseline, given)
CLAIMS = {
    "real_tree_gain": (
        "On low-degree real-life trees, search with a prediction needs fewer queries "
        "than search without one: mean over the low-degree trees of (centroid queries "
        "÷ our queries) at 1 ≤ η ≤ 4",
        "notably better than the simple non-prediction based algorithm (no number "
        "given)",
        gain_low,
        ">",
        1.0,
        "× fewer queries than centroid search",
        cen_low,
        (),
    ),
    "log_eta_shape": (
        "Queries grow like log η: on large path-like trees (pathwidth ≤ 3), the worst "
        "case of ours over all targets at distance η is fitted better by a + b "
        "log2(η+1) than by a + b η (fraction of trees)",
        "O(k log η)",
        frac["both"],
        ">=",
        0.8,
        "fraction of path-like trees",
        frac["top"],
        ("shape_trees",),
    ),
}

# %%
CLAIMS |= {
    "beats_best_baseline_somewhere": (
        "On large path-like trees, at some prediction error our search needs 1.2× "
        "fewer queries than the better of walking from the prediction and centroid "
        "search",
        "O(k log η) queries, better than search without a prediction when the "
        "prediction is good",
        [g for g, _ in b_gain.values()],
        ">",
        GAIN_BAR,
        "max over η of min(walking, centroid) ÷ ours",
        [
            min(big_mean(s, q, "walk"), big_mean(s, q, "centroid"))
            for s, (_, q) in b_gain.items()
        ],
        ("shape_trees",),
    ),
    "beats_ball_search": (
        "On large path-like trees, at some prediction error the ball search (centroid "
        "search in a doubling ball around the prediction, blind to pathwidth) needs "
        "1.2× our queries",
        "O(k log η) queries: the pathwidth structure, not just the prediction, is what "
        "makes the search cheap (our reading; the paper compares only with search "
        "without prediction)",
        [ball_best[s][1] for s in SEEDS],
        ">",
        GAIN_BAR,
        "max over η of ball ÷ ours",
        [big_mean(s, ball_best[s][0], "ball") for s in SEEDS],
        ("shape_trees",),
    ),
    "binary_lower_bound": (
        "No algorithm achieves O(log η) on general trees: on complete binary trees "
        "with the prediction at the root, the exact minimax optimum over all "
        "algorithms (that know η) needs as many queries as walking, "
        f"η + 1, for every η = 1..{minimax_max_eta}",
        "there is no search algorithm that uses O(log η) queries",
        float(ratio_walk.min()),
        ">=",
        1.0,
        "min over η of minimax ÷ (η + 1)",
        None,
        (),
    ),
}

# %%
for cid, (
    statement,
    paper,
    measured,
    op,
    target,
    unit,
    baseline,
    given,
) in CLAIMS.items():
    rec.claim(
        cid,
        statement,
        paper=paper,
        measured=measured,
        op=op,
        target=target,
        unit=unit,
        baseline=baseline,
        note=NOTES[cid],
        given=given,
    )
rec.untested(
    "k_log_eta_optimal",
    "The O(k log η) bound is existentially optimal (a matching Ω(k log η) lower bound)",
    paper="a lower bound showing that our algorithm has existentially optimal query "
    "complexity",
    reason="the paper's lower-bound construction is not recoverable from its abstract; "
    "the exact minimax DP is "
    f"feasible only for complete binary trees of height ≤ {minimax_max_eta}, too small "
    "to separate k log η from "
    "other shapes",
)
print(f"whole notebook: {time.perf_counter() - T_START:.1f} s")
rec.save()
