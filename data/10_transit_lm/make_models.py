"""Train the language models of chapter 10_transit_lm that do not fit its 5-minute default run, and write them with
:mod:`helpers.checkpoints`:

* ``models``: for each seed (0, 1, 2) two arms of a 4-layer, d = 128 transformer on the planned city's records
  (:func:`helpers.transit_lm.checkpoint_config`): ``sft`` (SFT only) and ``cpt`` (CPT on line, station-coordinate
  and route texts, then the same SFT steps on the same batches). SFT mixes optimal-route records with preference
  records (request types 2, 5, 7, 8); it runs at a constant learning rate and ends with a cosine tail
  (``sft_tail`` steps), the recipe the fit probe chose (``probe_fit.py``, ``probe_fit.json``). Every
  ``eval_every`` SFT steps each job logs its exact match on the 150 SFT training records the chapter's condition
  reads (stored as the curves ``<arm>/<seed>/train_exact``).

Run from the repository root: ``.venv/bin/python data/10_transit_lm/make_models.py`` (or
``make data NB=10_transit_lm``): six jobs (seed x arm) on ``--workers`` processes, one torch thread each; the same
seed writes byte-identical weights. One job at a time, each its own process: ``--seeds S --arms A --parts DIR
--out /tmp/x`` trains and keeps that job in ``DIR``; ``--parts DIR`` alone then reuses the six jobs and writes the
checkpoint. ``--tiny`` trains a tiny config for a few steps into a temporary folder (seconds; what the tests run);
``--seeds``/``--out``: other seeds into another data root.
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
ARMS = ("cpt", "sft")
N_FIT = 150  # SFT training records whose exact match each job logs (the chapter's condition reads the same)


def fit_eval(data: T.Data):
    """exact match on the first N_FIT SFT training records (greedy, as the chapter decodes)."""
    recs = data.sft[:N_FIT]
    ods = [(o, d) for o, d, _ in recs]

    def ev(model) -> dict[str, float]:
        pr = T.decode(model, data.tok, ods)
        return {"train_exact": float(np.mean([T.evaluate(data.city, p, lab, o, d)["exact"]
                                              for p, (o, d, lab) in zip(pr, recs, strict=True)]))}
    return ev


def train_arm(args: tuple[dict, int, str]) -> dict:
    """One arm of one seed: state dict, loss and training-fit curves, final SFT loss."""
    cfg, seed, arm = args
    repro.set_threads(1)
    data = T.make_data(cfg)
    tensors = T.corpora(data, cfg)
    t0 = time.time()
    with repro.seeded(seed):
        model, hists = T.train_lm(cfg, tensors, len(data.tok), seed, arm == "cpt", progress=False,
                                  eval_fn=fit_eval(data), eval_every=cfg.get("eval_every", 0))
    key = f"{arm}/{seed}"
    states = {f"{key}.{k}": v.clone() for k, v in model.state_dict().items()}
    history = {f"{key}/{stage}": h.loss for stage, h in hists.items()}
    history[f"{key}/train_exact"] = hists["sft"].evals["train_exact"]
    metrics = {f"final_sft_loss/{key}": float(np.mean(hists["sft"].loss[-20:])),
               f"train_exact/{key}": hists["sft"].evals["train_exact"][-1][1],
               f"wall_seconds/{key}": time.time() - t0}
    print(f"seed {seed} {arm}: SFT loss {metrics[f'final_sft_loss/{key}']:.4f}, exact match on {N_FIT} SFT "
          f"training records {metrics[f'train_exact/{key}']:.3f} ({time.time() - t0:.0f} s)", flush=True)
    return {"tensors": states, "history": history, "metrics": metrics}


def tiny(name: str) -> dict:
    cfg = T.checkpoint_config(name)
    cfg.update(n_sft=40, n_cpt_routes=20, n_pref=8, cpt_repeat=1, seeds=[0], cpt_steps=2, sft_steps=4, sft_tail=2,
               eval_every=2, batch=4, d_model=16, n_layer=1, n_head=2)
    return cfg


def make_models(cfg: dict, root: Path | None, workers: int, arms: tuple[str, ...] = ARMS,
                parts: Path | None = None) -> Path:
    t0 = time.time()
    jobs = [(cfg, s, arm) for arm in arms for s in cfg["seeds"]]  # longest jobs first

    def run(job: tuple[dict, int, str]) -> dict:
        key = scripts.part_key(cfg, arm=job[2])
        return scripts.seed_part(None if parts is None else parts / job[2], job[1], key,
                                 lambda: train_arm(job))[0]

    if workers > 1 and parts is None:
        with mp.get_context("spawn").Pool(workers) as pool:
            results = pool.map(train_arm, jobs, chunksize=1)
    else:
        results = [run(j) for j in jobs]
    tensors, history, metrics = {}, {}, {}
    for res in results:
        tensors.update(res["tensors"])
        history.update(res["history"])
        metrics.update(res["metrics"])
    tensors = dict(sorted(tensors.items()))
    wall = sum(v for k, v in metrics.items() if k.startswith("wall_seconds/")) if parts else time.time() - t0
    return checkpoints.save(SLUG, "models", tensors, config=cfg, metrics=metrics, history=history,
                            seed=list(cfg["seeds"]), steps=cfg["cpt_steps"] + cfg["sft_steps"],
                            wall_seconds=wall, sources=SOURCES, module="helpers.transit_lm",
                            dtype=torch.float16, quantize="int8", root=root)  # int8: 5 MB, not 10


def main(argv: list[str] | None = None) -> list[Path]:
    def options(ap: argparse.ArgumentParser) -> None:
        ap.add_argument("--workers", type=int, default=2, help="worker processes (one job each at a time)")
        ap.add_argument("--arms", nargs="+", choices=ARMS, default=list(ARMS), help="which arms to train")
        ap.add_argument("--parts", type=Path, default=None,
                        help="folder keeping (and reusing) each job's results (<arm>/seed<S>.pt)")

    return scripts.script_main(
        lambda cfg, out, args: make_models(cfg, out, 1 if args.tiny else args.workers, tuple(args.arms),
                                           args.parts),
        config=T.checkpoint_config, tiny=tiny, names=["models"], options=options, doc=__doc__, argv=argv)


if __name__ == "__main__":
    main()
