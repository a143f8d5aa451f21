"""Train the generative propagators of chapter 11_anchor_video_edit that do not fit its 5-minute default run, and
write them with :mod:`helpers.checkpoints`:

* ``propagators``: for each seed (0, 1, 2) a :class:`helpers.anchor_video_edit.Propagator` (conditional flow
  matching over frames, width 16) trained self-supervised to rebuild 48 *unedited* source clips from their own
  keyframes and their TV-L1 motion (:func:`helpers.anchor_video_edit.checkpoint_config`). No editor is involved.
* ``propagators_filled`` (``--name propagators_filled``): the same training, but the conditioning's holes (pixels
  no anchor warp is trusted at) hold the biharmonic inpainting of the warped anchors instead of the warps of the
  wrong surfaces (``fill_holes=True``); sampled with the same option.

Run from the repository root: ``.venv/bin/python data/11_anchor_video_edit/make_propagators.py`` (or
``make data NB=11_anchor_video_edit``). The flow is estimated once; then one worker process per seed, one torch
thread each: the same seed writes byte-identical weights. ``--tiny`` trains a tiny config for a few steps into a
temporary folder (seconds); ``--seeds``/``--out``: other seeds into another data root.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import time
from pathlib import Path

import numpy as np
import torch

from helpers import anchor_video_edit as A
from helpers import checkpoints, repro, scripts

SLUG = "11_anchor_video_edit"
HERE = Path(__file__).resolve()
SOURCES = [HERE, Path(A.__file__).resolve(), Path(repro.__file__).resolve()]


def train_seed(args: tuple) -> tuple[int, dict, list, float]:
    cfg, seed, frames, motions = args
    repro.set_threads(1)
    t0 = time.time()
    model, hist = A.train_propagator(frames, motions, cfg["steps"], width=cfg["width"], seed=seed,
                                     batch_clips=cfg["batch_clips"], lr=cfg["lr"],
                                     hole_weight=cfg["hole_weight"], progress=False,
                                     fill_holes=cfg.get("fill_holes", False))
    final = float(np.mean(hist.loss[-50:]))
    print(f"seed {seed}: loss {final:.4f} ({time.time() - t0:.0f} s)", flush=True)
    return seed, {k: v.clone() for k, v in model.state_dict().items()}, list(hist.loss), final


def make(cfg: dict, root: Path | None, workers: int, name: str = "propagators") -> Path:
    t0 = time.time()
    clips, motions = A.training_clips(cfg)
    frames = [c.frames for c in clips]
    print(f"flow for {len(clips)} clips: {time.time() - t0:.0f} s", flush=True)
    jobs = [(cfg, s, frames, motions) for s in cfg["seeds"]]
    if workers > 1:
        with mp.get_context("spawn").Pool(workers) as pool:
            results = pool.map(train_seed, jobs)
    else:
        results = [train_seed(j) for j in jobs]
    tensors, history, metrics = {}, {}, {}
    for seed, sd, loss, final in sorted(results, key=lambda r: r[0]):
        tensors.update({f"{seed}.{k}": v for k, v in sd.items()})
        history[f"loss/{seed}"] = loss
        metrics[f"final_loss/{seed}"] = final
    return checkpoints.save(SLUG, name, tensors, config=cfg, metrics=metrics, history=history,
                            seed=list(cfg["seeds"]), steps=cfg["steps"], wall_seconds=time.time() - t0,
                            sources=SOURCES, module="helpers.anchor_video_edit", dtype=torch.float16, root=root)


def tiny(name: str) -> dict:
    cfg = A.checkpoint_config(name)
    cfg.update(n_train_clips=2, steps=3, width=4, seeds=[0])
    return cfg


def main(argv: list[str] | None = None) -> list[Path]:
    def options(ap: argparse.ArgumentParser) -> None:
        ap.add_argument("--workers", type=int, default=3, help="worker processes (one seed each)")

    return scripts.script_main(lambda cfg, out, args: make(cfg, out, 1 if args.tiny else args.workers, args.name),
                               config=A.checkpoint_config, tiny=tiny, names=["propagators", "propagators_filled"],
                               default_names=["propagators"], options=options, doc=__doc__, argv=argv)


if __name__ == "__main__":
    main()
