"""Train the models of chapter 15_explainability_vector that do not fit its 5-minute default run, and write them with
:mod:`helpers.checkpoints`:

* ``models``: per seed (0, 1, 2) its own pre-trained θ0 (every class, class embeddings learned and then frozen;
  initialization and batch order drawn from the seed), and from that θ0 the source's prediction-only and
  self-explaining models (same batches, β = 0 vs β > 0) and each target's prediction-only model θ_T (β = 0, no
  explanation labels). 33 models, float16 (under 5 MB). The config can also ask for oracles (fine-tuned with a
  target's own masks); the stored checkpoint has none, to stay under 5 MB.

Run from the repository root: ``.venv/bin/python data/15_explainability_vector/make_models.py`` (or
``make data NB=15_explainability_vector``). ``--tiny`` trains a tiny config for a few steps into a temporary folder
(seconds; what the tests run); ``--seeds``/``--out``: other seeds into another data root. One torch thread
per process; ``--workers`` (default 2) forked processes run the
three pre-trainings, then the fine-tuning runs: the same seed on the same machine writes identical weights, whatever
the number of workers.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from helpers import checkpoints, repro, scripts
from helpers import explainability_vector as ev

SLUG = "15_explainability_vector"
HERE = Path(__file__).resolve()
SOURCES = [HERE, Path(ev.__file__).resolve(), Path(repro.__file__).resolve()]
HISTORY_POINTS = 100  # points stored per loss curve


def make_models(cfg: dict, root: Path | None, n_eval: int = 300, workers: int = 1) -> Path:
    t0 = time.time()
    states, history, metrics = ev.train_all(cfg, n_eval=n_eval, log=lambda m: print(m, flush=True), workers=workers)
    flat = {f"{tag}.{k}": v for tag, sd in states.items() for k, v in sd.items()}
    # 100 points a curve (means over equal bins of steps) keep the manifest small: the chapter stays under 5 MB
    history = {k: checkpoints.subsample(v, max_points=HISTORY_POINTS) for k, v in history.items()}
    return checkpoints.save(SLUG, "models", flat, config=cfg, metrics=metrics, history=history,
                            seed=list(cfg["seeds"]), steps=cfg["pretrain_steps"], wall_seconds=time.time() - t0,
                            sources=SOURCES, module="helpers.explainability_vector", dtype=torch.float16, root=root)


def tiny(name: str) -> dict:
    cfg = ev.checkpoint_config(name)
    cfg.update(n_train=16, batch_size=4, pretrain_steps=2, source_steps=2, target_steps=2, seeds=[0, 1],
               oracle_seeds=[0], targets=cfg["targets"][:2],
               model=dict(cfg["model"], d_model=8, depth=1, n_head=2, stem=4))
    return cfg


def build(cfg: dict, out: Path | None, args: argparse.Namespace) -> Path:
    if args.tiny:
        return make_models(cfg, out, n_eval=8)
    return make_models(cfg, out, workers=args.workers)


def main(argv: list[str] | None = None) -> list[Path]:
    def options(ap: argparse.ArgumentParser) -> None:
        ap.add_argument("--workers", type=int, default=2, help="processes for the fine-tuning runs (one thread each)")

    return scripts.script_main(build, config=ev.checkpoint_config, tiny=tiny, names=["models"], options=options,
                               doc=__doc__, argv=argv)


if __name__ == "__main__":
    main()
