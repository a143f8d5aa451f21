"""Record round 5's seed-0 probe of chapter 15_explainability_vector (``probe_r5.json``): the new-ink targets' fit
recipe (``ev.INK_RECIPES``, the rule written beside it), judged before any map of a model is scored; its models are
not stored here.

The probe starts from round 4's seed-0 probe part (``make_models.py --name models_r4 --seeds 0 --parts DIR``: the
seed's theta0 at full precision, the same theta0 a full seed-0 run of models_r4 trains) and records:

* the diagnosis: each target model of that part on its own training images and on the 300 held-out images
  (data seed 1000) the script scores (under-fit or over-fit?);
* for each candidate of ``ev.INK_RECIPES`` in order, the three targets of ``ev.INK_TARGETS`` fine-tuned from that
  theta0 (``ev.train_all`` with ``theta0``: the same models a full run makes), their held-out and training
  accuracy, and the candidate the registered rule picks (the first under which all three reach ``fit_min``).

Run from the repository root: ``.venv/bin/python data/15_explainability_vector/probe_r5.py DIR/seed0.pt``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

import torch

from helpers import checkpoints, repro
from helpers import explainability_vector as ev

HERE = Path(__file__).resolve()


def accuracy(state: dict, cfg: dict, name: str, n: int, seed: int) -> float:
    model = ev.TinyViT(**cfg["model"])
    model.load_state_dict(state)
    return ev.evaluate(model, ev.make_domain(name, n, seed, aspect=cfg["aspect"]))[0]


def record(part: Path) -> dict:
    repro.set_threads(1)
    res = torch.load(part, weights_only=False)
    cfg4 = json.loads(res["key"])  # round 4's config (without seeds) the part was trained under
    theta0 = res["states"]["s0/theta0"]
    digest = hashlib.sha256(b"".join(theta0[k].float().numpy().tobytes() for k in sorted(theta0))).hexdigest()
    fit_min = ev.CONDITIONS["fit_min"]
    diagnosis = {}
    for t in cfg4["targets"]:
        n = cfg4["target_recipe"].get(t, {}).get("n_train", cfg4["n_train"])
        diagnosis[t] = {"train": accuracy(res["states"][f"s0/T/{ev.key(t)}"], cfg4, t, n, cfg4["data_seed"]),
                        "held_out": res["metrics"][f"acc/s0/T/{ev.key(t)}"]}
    cfg = ev.checkpoint_config("models_r4")
    candidates = []
    for recipe in ev.INK_RECIPES:
        run = dict(cfg, seeds=[0], targets=list(ev.INK_TARGETS),
                   target_recipe={**cfg["target_recipe"], **{t: dict(recipe) for t in ev.INK_TARGETS}})
        states, _, metrics = ev.train_all(run, theta0={0: theta0}, log=lambda m: print(m, flush=True))
        acc = {t: metrics[f"acc/s0/T/{ev.key(t)}"] for t in ev.INK_TARGETS}
        train = {t: accuracy(states[f"s0/T/{ev.key(t)}"], run, t, recipe["n_train"], run["data_seed"])
                 for t in ev.INK_TARGETS}
        candidates.append({"recipe": dict(recipe), "held_out": acc, "train": train,
                           "meets": all(v >= fit_min for v in acc.values())})
    chosen = next((i for i, c in enumerate(candidates) if c["meets"]), 0)
    return {"part": str(part), "theta0_sha256_float32": digest, "round4_config": cfg4, "fit_min": fit_min,
            "diagnosis_round4_recipe": diagnosis, "ink_targets": list(ev.INK_TARGETS), "candidates": candidates,
            "chosen": chosen, "chosen_recipe": dict(ev.INK_RECIPES[chosen]),
            "script_sha256": checkpoints.sha256_file(HERE)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("part", type=Path, help="round 4's seed-0 probe part (seed0.pt)")
    out = record(ap.parse_args().part)
    (HERE.parent / "probe_r5.json").write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    print(json.dumps({k: out[k] for k in ("diagnosis_round4_recipe", "candidates", "chosen")}, indent=1))


if __name__ == "__main__":
    main()
