"""Snapshot the real trees of chapter 03_tree_search_predictions as edge lists, so results do not move with the
Python, scipy or scikit-learn version. Run from the repository root:
`.venv/bin/python data/03_tree_search_predictions/make_trees.py`.

High-degree trees come from CPython itself (the stdlib directory tree, two ASTs, the exception hierarchy) and from
networkx's bundled Les Miserables co-occurrence graph (a BFS tree). Low-degree trees: hierarchical-clustering
dendrograms of scikit-learn's bundled datasets (standardised features), a neighbour-joining "phylogeny" of the
wine samples, and a road-like spanning tree (the MST of a 30 x 30 grid with random weights, seed 0)."""

import json
import os
import platform
import sysconfig

import networkx as nx
import scipy
import sklearn
from scipy.spatial.distance import pdist, squareform
from sklearn import datasets
from sklearn.preprocessing import StandardScaler

from helpers import tree_search_predictions as ts

HERE = os.path.dirname(os.path.abspath(__file__))
stdlib = sysconfig.get_paths()["stdlib"]


def scaled(loader):
    return StandardScaler().fit_transform(loader().data)


trees = {
    # high degree
    "stdlib_dirs": ts.directory_tree(stdlib),
    "ast_argparse": ts.ast_tree(open(os.path.join(stdlib, "argparse.py")).read()),
    "ast_json_decoder": ts.ast_tree(open(os.path.join(stdlib, "json", "decoder.py")).read()),
    "exceptions": ts.exception_tree(),
    "lesmis_bfs": ts.bfs_tree(nx.les_miserables_graph()),
    # low degree (maximum degree 3 or 4)
    "dendro_iris": ts.dendrogram_tree(scaled(datasets.load_iris), "ward"),
    "dendro_breast_cancer": ts.dendrogram_tree(scaled(datasets.load_breast_cancer), "average"),
    "dendro_digits": ts.dendrogram_tree(datasets.load_digits().data, "ward"),
    "nj_wine": ts.neighbor_joining_tree(squareform(pdist(scaled(datasets.load_wine)))),
    "grid_mst": ts.grid_mst_tree(30, 30, seed=0),
}
meta = {"python": platform.python_version(), "stdlib": stdlib, "scipy": scipy.__version__,
        "scikit-learn": sklearn.__version__, "networkx": nx.__version__, "trees": {}}
for name, t in trees.items():
    ts.save_edges(t, os.path.join(HERE, f"{name}.txt.gz"))
    meta["trees"][name] = {"n": t.n, "pathwidth": ts.pathwidth(t), "max_degree": max(len(a) for a in t.adj)}
    print(name, meta["trees"][name])
with open(os.path.join(HERE, "meta.json"), "w") as f:
    json.dump(meta, f, indent=2)
