"""Do the stored wsd property models of chapter 07_tree_cycle_pe memorise their training STRINGS or their training
MOLECULES? (issue #65, round 7; an evaluation, no training). The check behind round 7's choice of probe
(make_fresh.py: recipe A, fresh strings at every visit, is aimed at string memorisation; B adds dropout and
weight decay, aimed at molecule memorisation).

For each augmented sequence model of seed ``k`` (``wsd_s<k>_prop_<kind>``: sinusoidal, tree+cycle, cycle-only;
the canonical-only sinusoidal beside it), the mean binary cross-entropy on the :func:`~helpers.tree_cycle_pe.
fit_sample` training molecules (600) read through

* ``canonical``: their canonical string (trained on, one visit in six),
* ``seen_random``: the five randomized strings the model trained on (mean over the five),
* ``fresh_random``: five randomized strings it never saw (seeded ``777_000 + molecule``),

and ``val_canonical``: the validation molecules' canonical strings. ``fresh_random`` close to ``seen_random``
and far below ``val_canonical``: the model memorises molecules, not strings; fresh strings would not stop its
training loss from falling. Writes ``string_diagnosis.json`` (records only). ``--tiny``: tiny models trained live
(12 steps) on the quick config, into a temporary folder (the smoke test).

    .venv/bin/python data/07_tree_cycle_pe/make_string_diagnosis.py            # seed 0, into data/
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from helpers import checkpoints, scripts
from helpers import tree_cycle_pe as tc

SLUG = "07_tree_cycle_pe"
HERE = Path(__file__).resolve()
SOURCES = [HERE, Path(tc.__file__).resolve()]
FAMILIES = ("prop_sinusoidal", "prop_tree_cycle", "prop_cycle", "prop_sinusoidal_canon")
N_FRESH = 5


def config(name: str = "string_diagnosis", quick: bool = False) -> dict:
    cfg = tc.checkpoint_config("models_s0", quick=quick)
    return dict(base=cfg, families=list(FAMILIES), n_fresh=N_FRESH, fresh_seed=777_000, seeds=[0],
                n_sample=60 if quick else 600)


def _bce(model, items, y, vocab) -> float:
    out, _ = tc.predict(model, items, vocab)
    return float(F.binary_cross_entropy_with_logits(out[:, 0], y))


def _models(cfg: dict, d: dict, tiny: bool) -> dict:
    seed, base = cfg["seeds"][0], cfg["base"]
    out = {}
    for fam in cfg["families"]:
        kind = fam.removeprefix("prop_").removesuffix("_canon")
        if tiny:  # tiny models trained live: the smoke test has no stored recipe checkpoints at the quick config
            model, _ = tc.fit_model(kind, d["prop_feats"], d["prop_tr"], d["prop_y"], d["vocab"], steps=12,
                                    seed=seed, batch_size=base["batch_size"], width=base["width"], progress=False,
                                    augment=not fam.endswith("_canon"))
        else:
            name = f"wsd_s{seed}_{fam}"
            ck = checkpoints.load(SLUG, name, config=tc.recipe_config(name))
            model = tc.build_model(base, d["vocab"], "prop", kind, seed)
            ck.load_into(model, prefix=f"prop-{fam.removeprefix('prop_')}-s{seed}.")
        out[fam] = model.float().eval()
    return out


def build(cfg: dict, out: Path | None, args) -> Path:
    t0 = time.time()
    seed = cfg["seeds"][0]
    base = dict(cfg["base"], seeds=[seed])
    d = tc.prepare(base)
    vocab, y = d["vocab"], d["prop_y"]
    samp = tc.fit_sample(d["prop_tr"], cfg["n_sample"])
    fresh = {int(m): [tc.featurize(s, vocab) for s in
                      tc.random_smiles(d["prop_smiles"][m], cfg["n_fresh"], cfg["fresh_seed"] + int(m))]
             for m in samp}
    ys, val = y[samp], d["prop_val"]
    res = {}
    models = _models(dict(cfg, base=base), d, args.tiny)
    with torch.no_grad():
        for fam, model in models.items():
            n_seen = len(d["prop_feats"][samp[0]]) - 1
            res[fam] = dict(
                canonical=_bce(model, [d["prop_feats"][m][0] for m in samp], ys, vocab),
                seen_random=float(np.mean([_bce(model, [d["prop_feats"][m][j] for m in samp], ys, vocab)
                                           for j in range(1, n_seen + 1)])),
                fresh_random=float(np.mean([_bce(model, [fresh[int(m)][j] for m in samp], ys, vocab)
                                            for j in range(cfg["n_fresh"])])),
                val_canonical=_bce(model, [d["prop_feats"][m][0] for m in val], y[val], vocab))
            print(fam, {k: round(v, 4) for k, v in res[fam].items()}, flush=True)
    rec = dict(what="mean BCE of the stored wsd property models on training molecules' canonical, seen "
                    "randomized and fresh randomized strings, and on validation molecules (no training)",
               config=cfg, seed=seed, n_sample=len(samp), models=res, wall_seconds=round(time.time() - t0, 1),
               source=checkpoints.source_hash(SOURCES))
    path = scripts.data_root(out) / SLUG / "string_diagnosis.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rec, indent=1, default=checkpoints._json_default) + "\n")
    return path


def main(argv=None):
    return scripts.script_main(build, config=lambda n: config(n), tiny=lambda n: config(n, quick=True),
                               names=["string_diagnosis"], doc=__doc__, argv=argv)


if __name__ == "__main__":
    main()
