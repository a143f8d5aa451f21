"""Snapshot the real trees of chapter 03_tree_search_predictions as edge lists, so results do not move with the
Python version. Run from the repository root: `.venv/bin/python data/03_tree_search_predictions/make_trees.py`."""

import json
import os
import platform
import sysconfig

from helpers import tree_search_predictions as ts

HERE = os.path.dirname(os.path.abspath(__file__))
stdlib = sysconfig.get_paths()["stdlib"]
trees = {
    "stdlib_dirs": ts.directory_tree(stdlib),
    "ast_argparse": ts.ast_tree(open(os.path.join(stdlib, "argparse.py")).read()),
    "ast_json_decoder": ts.ast_tree(open(os.path.join(stdlib, "json", "decoder.py")).read()),
    "exceptions": ts.exception_tree(),
}
meta = {"python": platform.python_version(), "stdlib": stdlib, "trees": {}}
for name, t in trees.items():
    ts.save_edges(t, os.path.join(HERE, f"{name}.txt.gz"))
    meta["trees"][name] = {"n": t.n}
    print(name, t.n)
with open(os.path.join(HERE, "meta.json"), "w") as f:
    json.dump(meta, f, indent=2)
