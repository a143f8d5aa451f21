"""Scale sweep of the repair MILP on the biased German-credit model (too slow for the notebook's 5 minutes).

For each ensemble size (trees x depth) and number of counterexamples, one repair MILP (preservation of the
original predictions) is solved by HiGHS on one thread with a node limit and a wall-clock time limit; the record
keeps status, wall and CPU seconds (``time.process_time``), optimality gap, nodes, kept points and the machine's
load. Two formulations, one file each (``--name``): ``scale`` is the repair as the chapter runs it (trust region
1.0); ``scale_strong`` is the stronger formulation: a smaller trust region (0.25), the leaves no counterexample
reaches frozen at their values, and a warm start from the trivial fair repair (every unfrozen leaf moved by the
same +-delta, so every pair gets one class) handed to HiGHS as its first incumbent.

Run each through the heavy-job gate (one core: HiGHS's limit is wall clock, so the CPU seconds show what the MILP
got): ``/tmp/heavy.sh .venv/bin/python data/01_tree_ensemble_repair/make_scale.py --name scale`` (about 10 of
wall clock each, at most 13 solves x 60 s). Writes ``<name>.json`` next to this file (``--out DIR``: under
``DIR/01_tree_ensemble_repair/``; ``--tiny``: one small ensemble, seconds, into a temporary folder; ``--seeds``:
other seeds).
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
    n_cex=[20, 60, 200],  # at every size for the first seed
    n_cex_largest=[20, 200],  # the other seeds: the largest size only
    seeds=[0, 1, 2],
    n_keep=250,
    bias_rate=0.5,  # the notebook's default label bias
    delta=1.0,
    mu=1e-3,
    eps=1e-3,
    time_limit=60.0,
    node_limit=1000,
    mip_rel_gap=1e-2,
    formulation="plain",
)
STRONG = dict(delta=0.25, formulation="strong")  # smaller trust region, frozen leaves, warm start


def config(name: str) -> dict:
    return dict(CONFIG, **(STRONG if name == "scale_strong" else {}))


def tiny(name: str) -> dict:
    return dict(config(name), sizes=[(5, 2)], n_cex=[5], n_cex_largest=[5], seeds=[0], n_keep=30,
                time_limit=5.0, node_limit=20)


def solve(ens, X_keep, pairs, cfg: dict):
    """One repair of the sweep, in the formulation ``cfg["formulation"]``; returns (result, trivial kept)."""
    kw, trivial_kept = {}, None
    if cfg["formulation"] == "strong":
        inputs = np.array([p.x for p in pairs] + [p.x_prime for p in pairs])
        frozen = ~ter.slots_reached(ens, inputs)
        warm = ter.trivial_fair_values(ens, pairs, X_keep, delta=cfg["delta"], eps=cfg["eps"], freeze=frozen)
        kw = dict(freeze=frozen, warm_start=warm)
        if warm is not None:
            trivial_kept = int(np.sum((2 * ens.predict_index(X_keep) - 1) * ens.decision(X_keep, warm)
                                      >= cfg["eps"]))
    res = ter.repair(ens, X_keep, None, pairs=pairs, delta=cfg["delta"], mu=cfg["mu"], eps=cfg["eps"],
                     time_limit=cfg["time_limit"], node_limit=cfg["node_limit"], mip_rel_gap=cfg["mip_rel_gap"],
                     **kw)
    return res, trivial_kept


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
        first = seed == cfg["seeds"][0]
        sizes = cfg["sizes"] if first else cfg["sizes"][-1:]
        for trees, depth in sizes:
            model = GradientBoostingClassifier(n_estimators=trees, max_depth=depth, random_state=seed)
            model.fit(X_tr, y_bias)
            ens = ter.from_sklearn(model)
            pool = ter.data_counterexamples(ens, X_tr, S)
            order = rng.permutation(len(pool))
            for n in cfg["n_cex"] if first else cfg["n_cex_largest"]:
                pairs = [pool[i] for i in order[:n]]
                load = os.getloadavg()[0]
                c0 = time.process_time()
                res, trivial_kept = solve(ens, X_tr[keep], pairs, cfg)
                cpu = time.process_time() - c0
                row = dict(seed=seed, trees=trees, depth=depth, leaves=ens.n_slots, cex=len(pairs),
                           pair_vars=res.n_pair_vars, keep_vars=res.n_keep_vars, objective="keep predictions",
                           formulation=cfg["formulation"], delta=cfg["delta"], frozen=res.n_frozen,
                           warm_start=res.warm_start_used, trivial_kept=trivial_kept, status=res.status,
                           message=res.message, wall_s=res.seconds, cpu_s=cpu,
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
    name = getattr(args, "name", None) or "scale"
    path = scripts.data_root(out) / SLUG / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1))
    print(f"{len(rows)} solves, {result['total_wall_s']:.0f} s", flush=True)
    return path


def main(argv: list[str] | None = None) -> list[Path]:
    return scripts.script_main(build, config=config, tiny=tiny, names=["scale", "scale_strong"], doc=__doc__,
                               argv=argv)


if __name__ == "__main__":
    main()
