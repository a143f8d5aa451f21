"""Train the models of chapter 07_tree_cycle_pe that do not fit its 5-minute default run, and write them with
:mod:`helpers.checkpoints` (float16):

* for seeds 0, 1, 2: the synthetic ring-count + ring-membership models (Transformer with sinusoidal, cycle-only and
  tree+cycle positions; GIN; GIN given the ring features as node inputs; width 32), the property models
  (sinusoidal, tree+cycle, Graphormer-lite, GIN on MoleculeACE CHEMBL204 Ki, pKi >= 7; width 64) and the
  structural-alert models (sinusoidal, tree+cycle: "contains the BRENK alert imine_1").

Run from the repository root: ``.venv/bin/python data/07_tree_cycle_pe/make_models.py`` (or
``make data NB=07_tree_cycle_pe``). ``--tiny`` trains the quick config into a temporary folder (what a smoke test
runs); ``--seeds``/``--out``: other seeds into another data root.
One torch thread per process; ``--workers`` forks processes and does not change the weights.
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
    metrics = {tag: dict(final_loss=float(np.mean(h.loss[-20:])), cpu_seconds=round(cpu[tag], 1))
               for tag, h in sorted(hists.items())}
    return checkpoints.save(SLUG, "models", flat, config=cfg, metrics=metrics, history=dict(sorted(hists.items())),
                            seed=list(cfg["seeds"]), steps=cfg["steps_prop"], wall_seconds=time.time() - t0,
                            sources=SOURCES, module="helpers.tree_cycle_pe", dtype=torch.float16, root=root)


def main(argv: list[str] | None = None) -> list[Path]:
    def options(ap: argparse.ArgumentParser) -> None:
        ap.add_argument("--workers", type=int, default=2, help="processes (one torch thread each)")

    return scripts.script_main(lambda cfg, out, args: make_models(cfg, out, workers=args.workers),
                               config=lambda name: tc.checkpoint_config(name),
                               tiny=lambda name: tc.checkpoint_config(name, quick=True), names=["models"],
                               options=options, doc=__doc__, argv=argv)


if __name__ == "__main__":
    main()
