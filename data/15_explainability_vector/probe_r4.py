"""Record what round 4's seed-0 probe of chapter 15_explainability_vector showed (``probe_r4.json``), without storing
its models (they stay outside data/ until all three seeds are trained).

The probe: ``make_models.py --name models_r4 --seeds 0 --parts DIR --out ROOT`` (the registered round-4 config,
``ev.checkpoint_config("models_r4")``). This reads ROOT's ``models_r4`` manifest and records, before any map of a
model is scored: every model's held-out accuracy (the script's 300 images of data seed 1000), the registered
conditions that need no map (``models_converged``, ``targets_fit``), the rotated recipe the registered rule
(``ev.ROTATED_RECIPES``) picks, and, needing no model, the eleven model-free maps' patch AUROC on each round-4 test
domain (``needs_the_model``'s input).

Run from the repository root: ``.venv/bin/python data/15_explainability_vector/probe_r4.py ROOT``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from helpers import checkpoints
from helpers import explainability_vector as ev

SLUG = "15_explainability_vector"
HERE = Path(__file__).resolve()


def record(root: Path, n_test: int = 300) -> dict:
    m = checkpoints.load_manifest(SLUG, "models_r4", root)
    cfg, acc, hist = m["config"], m["metrics"], m["history"]
    c = cfg["conditions"]
    out = {"config": cfg, "weights_sha256_not_stored": m["weights"]["sha256"], "seeds": cfg["seeds"],
           "script_sha256": checkpoints.sha256_file(HERE), "held_out_accuracy": acc}
    for s in cfg["seeds"]:
        targets = {t: acc[f"acc/s{s}/T/{ev.key(t)}"] for t in cfg["targets"]}
        out[f"s{s}"] = {
            "models_converged": {"worst_plateau": ev.converged(hist, s, c), "bar": c["plateau_max"]},
            "targets_fit": {"min": min(targets.values()), "bar": c["fit_min"],
                            "below": {t: v for t, v in targets.items() if v < c["fit_min"]}},
            "rotated_rule": {"recipe": cfg["target_recipe"]["rotated"], "accuracy": targets["rotated"],
                             "meets": targets["rotated"] >= c["fit_min"],
                             "candidates": [dict(r) for r in ev.ROTATED_RECIPES]},
        }
    free = {t: ev.model_free_aurocs(ev.make_domain(t, n_test, 1, aspect=cfg["aspect"]), c["free_maps"])
            for t in ["source", *cfg["targets"]]}
    out["model_free_auroc"] = free
    out["needs_the_model"] = {"best": {t: max(v.values()) for t, v in free.items()}, "bar": c["free_auroc_max"],
                              "targets_left": ev.localisation_targets(
                                  {t: max(free[t].values()) for t in cfg["targets"]}, c)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("root", type=Path, help="the data root the probe wrote models_r4 into")
    args = ap.parse_args()
    out = record(args.root)
    (HERE.parent / "probe_r4.json").write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    print(json.dumps({k: v for k, v in out.items() if k.startswith("s") or k == "needs_the_model"}, indent=1))


if __name__ == "__main__":
    main()
