"""Snapshot the real trees of chapter 03_tree_search_predictions as edge lists, so results do not move with the
Python, scipy or scikit-learn version. Run from the repository root:
`.venv/bin/python data/03_tree_search_predictions/make_trees.py`.

High-degree trees come from CPython itself (the stdlib directory tree, two ASTs, the exception hierarchy) and from
networkx's bundled Les Miserables co-occurrence graph (a BFS tree). Low-degree trees: hierarchical-clustering
dendrograms of scikit-learn's bundled datasets (standardised features), a neighbour-joining "phylogeny" of the
wine samples, and a road-like spanning tree (the MST of a 30 x 30 grid with random weights, seed 0).

``--out DIR`` writes under ``DIR/03_tree_search_predictions/``; ``--tiny`` writes two small trees into a temporary
folder (seconds). The trees are data, not trained models: ``--seeds`` does not apply."""

import json
import os
import platform
import sysconfig
from pathlib import Path

import networkx as nx
import scipy
import sklearn
from scipy.spatial.distance import pdist, squareform
from sklearn import datasets
from sklearn.preprocessing import StandardScaler

from helpers import scripts
from helpers import tree_search_predictions as ts

SLUG = "03_tree_search_predictions"
HERE = Path(__file__).resolve()
SOURCES = [HERE, Path(ts.__file__).resolve()]  # what makes the trees (they are edge lists, not a checkpoint)
stdlib = sysconfig.get_paths()["stdlib"]


def scaled(loader):
    return StandardScaler().fit_transform(loader().data)


TREES = {
    # high degree
    "stdlib_dirs": lambda: ts.directory_tree(stdlib),
    "ast_argparse": lambda: ts.ast_tree(open(os.path.join(stdlib, "argparse.py")).read()),
    "ast_json_decoder": lambda: ts.ast_tree(open(os.path.join(stdlib, "json", "decoder.py")).read()),
    "exceptions": lambda: ts.exception_tree(),
    "lesmis_bfs": lambda: ts.bfs_tree(nx.les_miserables_graph()),
    # low degree (maximum degree 3 or 4)
    "dendro_iris": lambda: ts.dendrogram_tree(scaled(datasets.load_iris), "ward"),
    "dendro_breast_cancer": lambda: ts.dendrogram_tree(scaled(datasets.load_breast_cancer), "average"),
    "dendro_digits": lambda: ts.dendrogram_tree(datasets.load_digits().data, "ward"),
    "nj_wine": lambda: ts.neighbor_joining_tree(squareform(pdist(scaled(datasets.load_wine)))),
    "grid_mst": lambda: ts.grid_mst_tree(30, 30, seed=0),
}


def build(cfg: dict, out: Path | None, args: object = None) -> Path:
    """Write the trees named in ``cfg["trees"]`` and ``meta.json`` under ``<out>/03_tree_search_predictions/``."""
    folder = scripts.data_root(out) / SLUG
    folder.mkdir(parents=True, exist_ok=True)
    meta = {"python": platform.python_version(), "stdlib": stdlib, "scipy": scipy.__version__,
            "scikit-learn": sklearn.__version__, "networkx": nx.__version__, "trees": {}}
    for name in cfg["trees"]:
        t = TREES[name]()
        ts.save_edges(t, str(folder / f"{name}.txt.gz"))
        meta["trees"][name] = {"n": t.n, "pathwidth": ts.pathwidth(t), "max_degree": max(len(a) for a in t.adj)}
        print(name, meta["trees"][name])
    with open(folder / "meta.json", "w") as f:
        json.dump(meta, f, indent=2)
    return folder / "meta.json"


def main(argv: list[str] | None = None) -> list[Path]:
    return scripts.script_main(build, config=lambda name: dict(trees=list(TREES)),
                               tiny=lambda name: dict(trees=["exceptions", "dendro_iris"]), names=["trees"],
                               doc=__doc__, argv=argv)


if __name__ == "__main__":
    main()
