"""Train the models of chapter 07_tree_cycle_pe that do not fit its 5-minute default run, one checkpoint per model
seed (``models_s0``, ``models_s1``, ``models_s2``; one job each), stored as float16 with the large matrices as int8
(:mod:`helpers.checkpoints`):

* the synthetic ring-count + ring-membership models (Transformer with sinusoidal, cycle-only and tree+cycle
  positions; GIN; GIN given the ring features as node inputs; width 32);
* the property models on MoleculeACE CHEMBL204 Ki, pKi >= 7 (Transformer with sinusoidal, tree+cycle, cycle-only
  and canonical-spanning-tree + cycle positions; Graphormer-lite; GIN; width 64);
* the structural-alert models ("contains the BRENK alert imine_1": sinusoidal, tree+cycle, cycle-only).

Each seed's randomized training strings are drawn from that seed; every model records its validation loss every
``eval_every`` steps (the validation-plateau condition). Run from the repository root, one seed per job:
``.venv/bin/python data/07_tree_cycle_pe/make_models.py --name models_s0`` (or ``make data NB=07_tree_cycle_pe``
for all three). ``--tiny`` trains the quick config into a temporary folder (what a smoke test runs); ``--out``:
another data root. One torch thread per process; ``--workers`` forks processes and does not change the weights.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch

from helpers import checkpoints, repro, scripts
from helpers import tree_cycle_pe as tc

SLUG = "07_tree_cycle_pe"
HERE = Path(__file__).resolve()
SOURCES = [HERE, Path(tc.__file__).resolve(), Path(repro.__file__).resolve()]


def make_models(cfg: dict, root: Path | None, workers: int = 1) -> Path:
    t0 = time.time()
    data = tc.prepare(cfg)
    print(f"data ready in {time.time() - t0:.0f} s; vocabulary {len(data['vocab'])}", flush=True)
    states, hists, cpu = tc.train_all(cfg, data, workers=workers, log=lambda m: print(m, flush=True))
    flat = {f"{tag}.{k}": v for tag, sd in sorted(states.items()) for k, v in sd.items()}
    metrics = {tag: dict(final_loss=float(np.mean(h.loss[-20:])), cpu_seconds=round(cpu[tag], 1),
                         final_val_loss=h.evals["val_loss"][-1][1])
               for tag, h in sorted(hists.items())}
    name = f"models_s{cfg['seeds'][0]}"
    return checkpoints.save(SLUG, name, flat, config=cfg, metrics=metrics, history=dict(sorted(hists.items())),
                            seed=list(cfg["seeds"]), steps=cfg["steps_prop"], wall_seconds=time.time() - t0,
                            sources=SOURCES, module="helpers.tree_cycle_pe", dtype=torch.float16, quantize="int8",
                            root=root)


def main(argv: list[str] | None = None) -> list[Path]:
    def options(ap: argparse.ArgumentParser) -> None:
        ap.add_argument("--workers", type=int, default=1, help="processes (one torch thread each)")

    return scripts.script_main(lambda cfg, out, args: make_models(cfg, out, workers=args.workers),
                               config=lambda name: tc.checkpoint_config(name),
                               tiny=lambda name: tc.checkpoint_config(name, quick=True, seed=int(name[8:])),
                               names=list(tc.MODEL_NAMES),
                               options=options, doc=__doc__, argv=argv)


if __name__ == "__main__":
    main()
