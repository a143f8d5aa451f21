"""Train the language models of chapter 10_transit_lm that do not fit its 5-minute default run, and write them with
:mod:`helpers.checkpoints`:

* ``models``: for each seed (0, 1, 2) two arms of a 4-layer, d = 128 transformer on the planned city's records
  (:func:`helpers.transit_lm.checkpoint_config`): ``sft`` (SFT only) and ``cpt`` (CPT on line, station-coordinate
  and route texts, then the same SFT steps on the same batches). SFT mixes optimal-route records with preference
  records (request types 2, 5, 7, 8).

Run from the repository root: ``.venv/bin/python data/10_transit_lm/make_models.py`` (or
``make data NB=10_transit_lm``). Six jobs (seed x arm) on ``--workers`` processes, one torch thread each: the same seed writes
byte-identical weights. ``--tiny`` trains a tiny config for a few steps into a temporary folder (seconds; what the
tests run); ``--seeds``/``--out``: other seeds into another data root.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import time
from pathlib import Path

import numpy as np
import torch

from helpers import checkpoints, repro, scripts
from helpers import transit_lm as T

SLUG = "10_transit_lm"
HERE = Path(__file__).resolve()
SOURCES = [HERE, Path(T.__file__).resolve(), Path(repro.__file__).resolve()]


def train_arm(args: tuple[dict, int, str]) -> tuple[tuple[int, str], dict, dict, dict]:
    """One arm of one seed: state dict, loss curves, final SFT loss."""
    cfg, seed, arm = args
    repro.set_threads(1)
    data = T.make_data(cfg)
    tensors = T.corpora(data, cfg)
    t0 = time.time()
    with repro.seeded(seed):
        model, hists = T.train_lm(cfg, tensors, len(data.tok), seed, arm == "cpt", progress=False)
    states = {f"{arm}/{seed}": {k: v.clone() for k, v in model.state_dict().items()}}
    history = {f"{arm}/{seed}/{stage}": h.loss for stage, h in hists.items()}
    metrics = {f"final_sft_loss/{arm}/{seed}": float(np.mean(hists["sft"].loss[-20:]))}
    print(f"seed {seed} {arm}: SFT loss {metrics[f'final_sft_loss/{arm}/{seed}']:.4f} "
          f"({time.time() - t0:.0f} s)", flush=True)
    return (seed, arm), states, history, metrics


def tiny(name: str) -> dict:
    cfg = T.checkpoint_config(name)
    cfg.update(n_sft=40, n_cpt_routes=20, n_pref=8, cpt_repeat=1, seeds=[0], cpt_steps=2, sft_steps=3, batch=4,
               d_model=16, n_layer=1, n_head=2)
    return cfg


def make_models(cfg: dict, root: Path | None, workers: int) -> Path:
    t0 = time.time()
    jobs = [(cfg, s, arm) for arm in ("cpt", "sft") for s in cfg["seeds"]]  # longest jobs first
    if workers > 1:
        with mp.get_context("spawn").Pool(workers) as pool:
            results = pool.map(train_arm, jobs, chunksize=1)
    else:
        results = [train_arm(j) for j in jobs]
    tensors, history, metrics = {}, {}, {}
    for _, states, hist, met in sorted(results, key=lambda r: r[0]):
        for key, sd in states.items():
            tensors.update({f"{key}.{k}": v for k, v in sd.items()})
        history.update(hist)
        metrics.update(met)
    return checkpoints.save(SLUG, "models", tensors, config=cfg, metrics=metrics, history=history,
                            seed=list(cfg["seeds"]), steps=cfg["cpt_steps"] + cfg["sft_steps"],
                            wall_seconds=time.time() - t0, sources=SOURCES, module="helpers.transit_lm",
                            dtype=torch.float16, quantize="int8", root=root)  # int8: 5 MB, not 10


def main(argv: list[str] | None = None) -> list[Path]:
    def options(ap: argparse.ArgumentParser) -> None:
        ap.add_argument("--workers", type=int, default=2, help="worker processes (one job each at a time)")

    return scripts.script_main(lambda cfg, out, args: make_models(cfg, out, 1 if args.tiny else args.workers),
                               config=T.checkpoint_config, tiny=tiny, names=["models"], options=options, doc=__doc__,
                               argv=argv)


if __name__ == "__main__":
    main()
