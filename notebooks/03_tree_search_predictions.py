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
# smaller pathwidth. Search along the spine with doubling search from the point where the prediction hangs; the
# answers either find the target on the spine or point into one component off it, and the prediction stays within
# `η` of the target there. Recurse; pathwidth drops at every level, so there are at most `k` levels, each costing
# `O(log η)`.
#
# | | the paper | this notebook |
# |---|---|---|
# | trees | real-life and synthetic inputs | CPython's stdlib directory tree, ASTs of `argparse.py` and `json/decoder.py`, the built-in exception hierarchy (snapshotted in `data/`), paths, caterpillars, complete binary and ternary trees, random trees |
# | sizes | not stated | up to ~8,000 vertices, 200 targets per prediction error |
# | baseline | search without prediction | centroid search (`≤ log₂ n + 1` queries), and walking from the prediction |
# | hardware | not stated | 2 CPU cores, about a minute |
#
# :::{note}
# **What is reconstructed.** The query model is standard (Onak & Parys 2006; Emamjomeh-Zadeh et al. 2016). Only
# the paper's abstract is public, so the **search algorithm is our reconstruction**: the spine decomposition comes
# from the classical characterisation of tree pathwidth (Ellis, Sudborough & Turner 1994: `pw(T) ≤ k` iff some
# path leaves only components of pathwidth `≤ k − 1`), computed with the linear-time labelling of subtrees, and
# the per-level search is doubling binary search. The constant in our bound `1 + k(2⌈log₂(η+1)⌉ + 3)` is ours. The
# paper's matching `Ω(k log η)` lower-bound construction is not recoverable from the abstract; we show only the
# simpler fact that `O(log η)` is impossible on complete binary trees.
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
n_targets = 200  # hidden targets per tree and prediction error
etas = [0, 1, 2, 4, 8, 16, 32, 64]  # prediction errors (graph distance)
binary_height = 10  # complete binary tree (n = 2^(h+1) - 1)
ternary_height = 6
random_n = 2000
n_brute = 200  # random trees checked against the brute-force pathwidth

# %% tags=["hide-input"]
import math
import os
import time

import matplotlib.pyplot as plt
import networkx as nx
import numpy as np
from tqdm.auto import tqdm

from helpers import claims, plotting, repro
from helpers import tree_search_predictions as ts

if quick:
    n_targets, etas, binary_height, ternary_height, random_n, n_brute = (
        20,
        [0, 1, 2, 4, 8],
        7,
        4,
        300,
        40,
    )

env = repro.setup(seed)
plotting.use_style()
rec = claims.ClaimsRecord(
    "03_tree_search_predictions",
    dict(
        quick=quick,
        seed=seed,
        n_targets=n_targets,
        etas=etas,
        binary_height=binary_height,
        ternary_height=ternary_height,
        random_n=random_n,
        n_brute=n_brute,
    ),
)
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
# ## 3. The trees
#
# The real trees were snapshotted by `data/03_tree_search_predictions/make_trees.py` (edge lists, gzipped), so
# the numbers do not move with the Python version; if the snapshot is missing (e.g. in Colab) they are rebuilt
# from the running Python.

# %%
DATA = os.path.join("..", "data", "03_tree_search_predictions")


def real_tree(name: str) -> ts.Tree:
    path = os.path.join(DATA, f"{name}.txt.gz")
    if os.path.exists(path):
        return ts.load_edges(path)
    import sysconfig

    stdlib = sysconfig.get_paths()["stdlib"]
    return {
        "stdlib_dirs": lambda: ts.directory_tree(stdlib),
        "ast_argparse": lambda: ts.ast_tree(
            open(os.path.join(stdlib, "argparse.py")).read()
        ),
        "ast_json_decoder": lambda: ts.ast_tree(
            open(os.path.join(stdlib, "json", "decoder.py")).read()
        ),
        "exceptions": ts.exception_tree,
    }[name]()


REAL = ["stdlib_dirs", "ast_argparse", "ast_json_decoder", "exceptions"]
trees = {name: real_tree(name) for name in REAL}
if quick:
    trees["ast_argparse"] = trees["ast_json_decoder"]  # the smaller AST only
    del trees["ast_json_decoder"]
    REAL = list(trees)
trees |= {
    "path": ts.path_tree(random_n // 2),
    "caterpillar": ts.caterpillar_tree(random_n // 8, 3),
    f"binary h={binary_height}": ts.complete_tree(2, binary_height),
    f"ternary h={ternary_height}": ts.complete_tree(3, ternary_height),
    "random": ts.random_tree(random_n, seed),
}
info = {}
for name, t in trees.items():
    t0 = time.perf_counter()
    dec, ctree = ts.Decomposition(t), ts.CentroidTree(t)
    info[name] = dict(
        n=t.n,
        pw=ts.pathwidth(t),
        levels=dec.levels,
        max_deg=max(len(a) for a in t.adj),
        dec=dec,
        ctree=ctree,
        prep_s=time.perf_counter() - t0,
    )
    print(
        f"{name:18} n={t.n:6d}  pathwidth={info[name]['pw']}  levels={dec.levels}  "
        f"max degree={info[name]['max_deg']:4d}  log2(n)={math.log2(t.n):5.1f}  "
        f"decomposition {info[name]['prep_s']:.2f} s"
    )

# %% [markdown]
# ## 4. The spine decomposition and the search
#
# `ts.spine` roots a component, labels it, and reads off the spine: from the root down the unique chain of
# children of full pathwidth, or, when the label has a critical vertex `w`, the two full-pathwidth chains below `w`
# joined at `w`. We check on every tree that each component left off a spine has smaller pathwidth.


# %%
def sub_tree(t: ts.Tree, members: list[int]) -> ts.Tree:
    idx = {v: i for i, v in enumerate(members)}
    inside = set(members)
    return ts.Tree(
        len(members),
        [(idx[a], idx[b]) for a in members for b in t.adj[a] if b in inside and a < b],
    )


spine_violations = 0
for name, t in tqdm(trees.items(), desc="spine property"):
    dec = info[name]["dec"]
    for cid, comp in enumerate(dec.comps):
        for members in dec.components_off_spine(cid):
            spine_violations += int(ts.pathwidth(sub_tree(t, members)) >= comp.k)
print(
    "components off a spine with pathwidth not smaller than the spine's "
    f"component: {spine_violations}"
)

# %% [markdown]
# The search itself. First query the prediction; answers are cached, so when the prediction lies on a spine its
# answer gives the first direction there for free. Then, on one level: the prediction `p` hangs from spine index `j`. Query the spine at `j`; the
# answer says "found", "towards smaller indices", "towards larger indices", or names a neighbour off the spine.
# Gallop `j ± 1, j ± 2, j ± 4, …` while the answers keep pointing the same way, then binary-search the bracket.
# An off-spine answer `u` sends us into the component containing `u`; if `p` is not in it, the path from `p` to
# the target enters through `u`, so `u` becomes the prediction (still within `η`). These are the key lines of
# `ts.search_with_prediction`:
#
# ```text
# if ask(p) is None: return p                       # eta = 0: one query (its answer is cached)
# while True:
#     P = comp.spine; j = comp.attach[p]            # where the prediction hangs from the spine
#     r = probe(j)                                  # found / left / right / off (sets `off`)
#     gallop: i = j ± 1, 2, 4, ... while r keeps pointing away from j
#     binary search in (lo, hi) while r is left/right
#     if r == "found": return P[i]
#     comp = child component containing `off`;  if p not in comp: p = off
# ```
#
# Below, every tree gets `n_targets` uniformly random targets per prediction error `η`; the prediction is drawn
# uniformly among the vertices at distance exactly `η` from the target (skipped when there are none). Our search,
# centroid search (no prediction) and walking from the prediction all run on the same pairs.

# %%
rng = repro.rng(seed, 1)
results = {}  # name -> eta -> dict of query arrays
found_all, bound_excess, eta0_max = True, -np.inf, 0
for name, t in tqdm(trees.items(), desc="searching"):
    k, dec, ctree = info[name]["pw"], info[name]["dec"], info[name]["ctree"]
    res = {eta: dict(ours=[], centroid=[], walk=[]) for eta in etas}
    for target in rng.integers(0, t.n, n_targets):
        target = int(target)
        dist = t.distances(target)
        for eta in etas:
            ring = np.flatnonzero(dist == eta)
            if len(ring) == 0:
                continue
            p = int(ring[rng.integers(len(ring))])
            a = ts.search_with_prediction(t, dec, ts.Oracle(t, target), p)
            b = ts.centroid_search(t, ctree, ts.Oracle(t, target))
            c = ts.walk_search(t, ts.Oracle(t, target), p)
            found_all &= a.found == b.found == c.found == target
            bound_excess = max(bound_excess, a.queries - ts.query_bound(k, eta))
            if eta == 0:
                eta0_max = max(eta0_max, a.queries)
            res[eta]["ours"].append(a.queries)
            res[eta]["centroid"].append(b.queries)
            res[eta]["walk"].append(c.queries)
    results[name] = {
        eta: {kk: np.array(v) for kk, v in d.items()}
        for eta, d in res.items()
        if d["ours"]
    }

# %% [markdown]
# ## 5. Queries against the prediction error
#
# Mean queries per tree: ours (with prediction), centroid search (flat: it ignores the prediction), walking from
# the prediction (`η + 1`), and our bound `1 + k(2⌈log₂(η+1)⌉ + 3)` dashed.


# %%
def crossover(name: str):
    """Smallest eta at which our mean is no better than centroid search (None if we win
    at every eta tried).
    """
    for eta, d in results[name].items():
        if eta > 0 and d["ours"].mean() >= d["centroid"].mean():
            return eta
    return None


names = list(trees)
fig, axes = plt.subplots(3, 3, figsize=(13, 10), sharex=True)
for ax, name in zip(axes.ravel(), names):
    r = results[name]
    e = np.array(list(r))
    x = np.log2(e + 1)
    ax.plot(x, [r[q]["ours"].mean() for q in e], marker="o", label="ours (prediction)")
    ax.plot(
        x,
        [r[q]["centroid"].mean() for q in e],
        marker="s",
        label="centroid (no prediction)",
    )
    ax.plot(
        x,
        [min(r[q]["walk"].mean(), 70) for q in e],
        ls=":",
        color="gray",
        label="walk from prediction",
    )
    ax.plot(
        x,
        [ts.query_bound(info[name]["pw"], q) for q in e],
        ls="--",
        color="k",
        lw=0.8,
        label="our bound",
    )
    ax.set(title=f"{name} (n={trees[name].n}, pw={info[name]['pw']})", ylim=(0, None))
    ax.set_xticks(x, [str(q) for q in e])
for ax in axes[-1]:
    ax.set_xlabel("prediction error η")
for ax in axes[:, 0]:
    ax.set_ylabel("mean queries")
axes[0, 0].legend(fontsize=8)
plt.tight_layout()
plt.show()

print(
    f"{'tree':18} {'n':>6} {'pw':>3} {'centroid':>9} {'ours η=1':>9} {'η=4':>6} "
    f"{'η=16':>6} {'crossover η':>12}"
)
for name in names:
    r = results[name]

    def at(q, r=r):
        return f"{r[q]['ours'].mean():.2f}" if q in r else "-"

    cen = np.mean(np.concatenate([d["centroid"] for d in r.values()]))
    print(
        f"{name:18} {trees[name].n:>6} {info[name]['pw']:>3} {cen:>9.2f} "
        f"{at(1):>9} {at(4):>6} {at(16):>6} "
        f"{str(crossover(name)):>12}"
    )

# %% [markdown]
# **Reading the table.** With a good prediction (small `η`) our search needs a handful of queries whatever `n`
# is; centroid search pays `~log₂ n` on path-like trees but very little on trees of high degree (an AST or a
# directory tree splits into many parts at one query), which is why the crossover `η` is small there. On the
# path the search is exactly doubling binary search; below we compare it with the array version.

# %%
n_path = trees["path"].n
pairs = [
    (int(t_), int(min(n_path - 1, t_ + eta)))
    for eta in etas
    for t_ in rng.integers(0, max(1, n_path - eta), 50)
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
    "queries, doubling search on the "
    f"array {np.mean(arr):.2f}, our tree search {np.mean(tre):.2f}; identical "
    "counts on "
    f"{np.mean(np.array(arr) == np.array(tre)):.0%} of pairs"
)

# %% [markdown]
# ## 6. Why `O(log η)` is impossible in general: complete binary trees
#
# Put the prediction at the root of a complete binary tree. The `2^η` vertices at depth `η` are all at distance
# `η`: any of them may be the target. A query has at most four answers (found, parent, two children), so any
# algorithm needs at least `log₄(2^η) = η/2` queries on some target: linear in `η`, not logarithmic. We measure the
# worst case of our algorithm over all targets at depth `η` against this line and against our `O(k log η)` bound
# (`k = ⌈h/2⌉`).

# %%
tb = trees[f"binary h={binary_height}"]
decb = info[f"binary h={binary_height}"]["dec"]
depth = np.array(tb.depth)
lb_etas = list(range(1, binary_height + 1))
worst = []
for eta in tqdm(lb_etas, desc="binary tree, all targets at depth eta"):
    worst.append(
        max(
            ts.search_with_prediction(tb, decb, ts.Oracle(tb, int(v)), 0).queries
            for v in np.flatnonzero(depth == eta)
        )
    )
worst = np.array(worst)
lower = np.ceil(np.array(lb_etas) / 2)
kb = info[f"binary h={binary_height}"]["pw"]
fig, ax = plt.subplots(figsize=(6, 3.4))
ax.plot(lb_etas, worst, marker="o", label="ours, worst case over the 2^η targets")
ax.plot(lb_etas, lower, marker="s", label="any algorithm needs ≥ ⌈η/2⌉")
ax.plot(
    lb_etas,
    [ts.query_bound(kb, q) for q in lb_etas],
    ls="--",
    color="k",
    label=f"our bound, k={kb}",
)
ax.set(xlabel="η (prediction at the root)", ylabel="queries")
ax.legend(fontsize=8)
plt.show()
lin = np.polyfit(lb_etas, worst, 1)
lin_res = float(np.sum((np.polyval(lin, lb_etas) - worst) ** 2))
logx = np.log2(np.array(lb_etas) + 1)
lg = np.polyfit(logx, worst, 1)
log_res = float(np.sum((np.polyval(lg, logx) - worst) ** 2))
print(
    f"worst case vs eta: linear fit slope {lin[0]:.2f} (residual {lin_res:.2f}); "
    f"fit in log2(eta+1): residual {log_res:.2f}"
)

# %% [markdown]
# ## 7. Interaction
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
    ts.search_with_prediction(tx, decx, oa, p)
    ts.centroid_search(tx, info["exceptions"]["ctree"], ob)
    demo.append((eta, p, list(dict.fromkeys(oa.log)), ob.log))


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
    ax.set_title(f"ours: {len(ours)} queries, centroid: {len(cen)}", fontsize=9)
    ax.axis("off")


plotting.static_slider(
    range(len(demo)), draw_search, figsize=(6.5, 5), label="η index", fmt="{}"
)

# %% [markdown]
# Live: pick a tree, a prediction error and a random seed, and compare the three searches.


# %%
def live_search(
    tree_name: str = "ast_argparse" if "ast_argparse" in trees else names[0],
    eta: int = 4,
    trial: int = 0,
):
    t = trees[tree_name]
    r = repro.rng(seed, 100 + trial)
    target = int(r.integers(t.n))
    ring = np.flatnonzero(t.distances(target) == eta)
    if not len(ring):
        print(f"no vertex at distance {eta} from target {target}")
        return
    p = int(ring[r.integers(len(ring))])
    inf = info[tree_name]
    a = ts.search_with_prediction(t, inf["dec"], ts.Oracle(t, target), p).queries
    b = ts.centroid_search(t, inf["ctree"], ts.Oracle(t, target)).queries
    print(
        f"ours {a} (bound {ts.query_bound(inf['pw'], eta)}), centroid {b}, walk "
        f"{eta + 1}"
    )


plotting.live_controls(live_search, tree_name=names, eta=(0, 64), trial=(0, 20))

# %% [markdown]
# ## 8. Checks

# %%
rec.check(
    "always_finds",
    bool(found_all),
    True,
    note="ours, centroid and walk, every search on every tree",
)
rec.check(
    "query_bound",
    int(bound_excess),
    0,
    op="<=",
    note="max over searches of queries - (1 + k(2⌈log2(η+1)⌉+3))",
)
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

# %% [markdown]
# ## 9. The claims record

# %%
small = [q for q in etas if q in (1, 2)]
gains = {}
for name in REAL:
    r = results[name]
    ours = np.concatenate([r[q]["ours"] for q in small if q in r])
    cen = np.concatenate([r[q]["centroid"] for q in small if q in r])
    gains[name] = float(cen.mean() / ours.mean())
gain = float(np.mean(list(gains.values())))
rec.claim(
    "real_tree_gain",
    "On real-life trees, search with a good prediction needs notably fewer "
    "queries than "
    "search without one (mean over real trees of centroid queries / our queries "
    "at η ∈ {1, 2}; "
    "'notably' taken as >= 1.2)",
    paper="notably better",
    measured=round(gain, 3),
    unit="× fewer queries",
    holds=gain >= 1.2,
    note="per tree: "
    + ", ".join(f"{k} {v:.2f}" for k, v in gains.items())
    + ". Crossover η (ours no better than centroid): "
    + ", ".join(f"{k} {crossover(k)}" for k in REAL),
)
slopes = {}
for name in names:
    r = results[name]
    e = np.array([q for q in r if q > 0])
    if len(e) >= 2 and info[name]["pw"] > 0:
        x = np.ceil(np.log2(e + 1))  # the bound's own variable, 2⌈log2(η+1)⌉ per level
        slopes[name] = float(
            np.polyfit(x, [r[q]["ours"].mean() for q in e], 1)[0] / info[name]["pw"]
        )
max_slope = max(slopes.values())
rec.claim(
    "log_eta_scaling",
    "Queries grow like k log η: the slope of mean queries against ⌈log2(η+1)⌉, "
    "divided by the pathwidth k, stays below the bound's 2 on every tree",
    paper="O(k log η)",
    measured=round(max_slope, 3),
    unit="max over trees of slope / k",
    holds=max_slope <= 2.0,
    note="slope / k per tree: "
    + ", ".join(f"{k} {v:.2f}" for k, v in slopes.items())
    + ". On pw-1 trees the search is doubling binary search (gallop + bisection, 2 "
    "log η + O(1)); a "
    "fitted slope near 2 there is the bound's own constant, and finite-η terms "
    "can push it over.",
)
rec.claim(
    "no_log_eta_on_binary",
    "On complete binary trees queries grow linearly in η (worst case over targets), "
    "so O(log η) is impossible in general",
    paper="no O(log η) algorithm",
    measured=round(float(lin[0]), 3),
    unit="queries per unit η (worst case)",
    holds=bool(np.all(worst >= lower)) and lin_res < log_res,
    note=f"h={binary_height}; the linear fit (residual {lin_res:.2f}) beats the log "
    f"fit ({log_res:.2f}); "
    f"every algorithm needs ≥ ⌈η/2⌉ by counting answers",
)
rec.save()
