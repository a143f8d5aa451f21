"""Scale sweep of the repair MILP on the biased German-credit model (too slow for the notebook's 5 minutes).

For each ensemble size (trees x depth), number of counterexamples and preservation objective, one repair MILP is
solved by HiGHS with a node limit and a wall-clock time limit; the record keeps status, wall and CPU seconds,
optimality gap, nodes and the machine's load. Run: ``.venv/bin/python data/01_tree_ensemble_repair/make_scale.py``
(13-17 minutes of wall clock on the shared 2-core machine; HiGHS's limit is wall clock, so each row keeps
the CPU seconds too, the honest measure on a shared machine). Writes ``scale.json`` next to this file
(``--out DIR``: under ``DIR/01_tree_ensemble_repair/``; ``--tiny``: one small ensemble, seconds, into a temporary
folder; ``--seeds``: other seeds).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
from sklearn.ensemble import GradientBoostingClassifier
from sklearn.model_selection import train_test_split

from helpers import scripts
from helpers import tree_ensemble_repair as ter

SLUG = "01_tree_ensemble_repair"
HERE = Path(__file__).resolve()
SOURCES = [HERE, Path(ter.__file__).resolve()]  # what the sweep runs (it writes no checkpoint)

CONFIG = dict(
    sizes=[(50, 4), (100, 5), (200, 6)],  # (trees, depth)
    n_cex=[20, 200],
    seeds=[0, 1, 2],  # all three only at the largest size; the smaller sizes use the first seed
    n_keep=250,
    bias_rate=0.5,  # the notebook's default label bias
    delta=1.0,
    mu=1e-3,
    eps=1e-3,
    time_limit=60.0,
    node_limit=1000,
    mip_rel_gap=1e-2,
)


def tiny(name: str) -> dict:
    return dict(CONFIG, sizes=[(5, 2)], n_cex=[5], seeds=[0], n_keep=30, time_limit=5.0, node_limit=20)


def build(cfg: dict, out: Path | None, args: object = None) -> Path:
    """Solve every repair of the sweep ``cfg`` and write ``<out>/01_tree_ensemble_repair/scale.json``."""
    X, y, names, _ = ter.load_german_credit()
    S = names.index("sex")
    rows = []
    t_start = time.time()
    for seed in cfg["seeds"]:
        X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.3, random_state=seed, stratify=y)
        rng = np.random.default_rng([seed, 7])
        y_bias = ter.bias_labels(X_tr, y_tr, S, 0.0, cfg["bias_rate"], rng)
        keep = rng.choice(len(X_tr), cfg["n_keep"], replace=False)
        sizes = cfg["sizes"] if seed == cfg["seeds"][0] else cfg["sizes"][-1:]
        for trees, depth in sizes:
            model = GradientBoostingClassifier(n_estimators=trees, max_depth=depth, random_state=seed)
            model.fit(X_tr, y_bias)
            ens = ter.from_sklearn(model)
            pool = ter.data_counterexamples(ens, X_tr, S)
            order = rng.permutation(len(pool))
            for n in cfg["n_cex"]:
                pairs = [pool[i] for i in order[:n]]
                for objective, labels in [("keep predictions", None), ("keep labels", y_bias[keep])]:
                    load = os.getloadavg()[0]
                    c0 = time.process_time()
                    res = ter.repair(ens, X_tr[keep], labels, pairs=pairs, delta=cfg["delta"], mu=cfg["mu"],
                                     eps=cfg["eps"], time_limit=cfg["time_limit"],
                                     node_limit=cfg["node_limit"], mip_rel_gap=cfg["mip_rel_gap"])
                    cpu = time.process_time() - c0
                    row = dict(seed=seed, trees=trees, depth=depth, leaves=ens.n_slots, cex=len(pairs),
                               pair_vars=res.n_pair_vars, keep_vars=res.n_keep_vars, objective=objective,
                               status=res.status, message=res.message, wall_s=res.seconds, cpu_s=cpu,
                               mip_gap=res.mip_gap if np.isfinite(res.mip_gap) else None, nodes=res.nodes,
                               kept=int(res.kept.sum()), load=load)
                    if res.ok:
                        fixed = ter.fixed_fraction(ens, res.values, pairs)
                        repaired = ter.to_sklearn(model, ens, res.values)
                        row.update(fixed=fixed, test_acc=float(np.mean(repaired.predict(X_te) == y_te)),
                                   test_flip=ter.flip_rate(repaired.predict, X_te, S))
                    rows.append(row)
                    print({k: (round(v, 3) if isinstance(v, float) else v) for k, v in row.items()
                           if k != "message"}, flush=True)
    result = dict(config=cfg, rows=rows, total_wall_s=time.time() - t_start, cpu_count=os.cpu_count())
    path = scripts.data_root(out) / SLUG / "scale.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1))
    print(f"{len(rows)} solves, {result['total_wall_s']:.0f} s", flush=True)
    return path


def main(argv: list[str] | None = None) -> list[Path]:
    return scripts.script_main(build, config=lambda name: CONFIG, tiny=tiny, names=["scale"], doc=__doc__,
                               argv=argv)


if __name__ == "__main__":
    main()
