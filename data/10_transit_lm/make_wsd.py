"""Retrain the language models of chapter 10_transit_lm under the recipe registered on 2026-12-06 (issue #68),
before any of its models trained, and write them with :mod:`helpers.checkpoints` as ``models_wsd`` (the stored
``models`` of the previous recipe are left as they are):

* the recipe (``helpers.transit_lm.checkpoint_config("models_wsd")``, :func:`helpers.transit_lm.train_wsd`): the
  data and the 4-layer, d = 128 model of ``models``, both arms (``sft``; ``cpt``: 300 CPT steps first), 16,000 SFT
  steps under warmup-stable-decay (400 warm-up steps, lr 3e-3 constant to step 11,000, cosine decay to 3e-4 over
  the last 5,000), one AdamW throughout. The stored ``models`` hold the weights after SFT, not after CPT, so the
  CPT arm reruns its 300 CPT steps (about 1 minute) rather than resuming from them.
* logged per job: the loss on the route-deciding tokens (``T.route_loss`` of ``T.part_losses`` on the first 300
  SFT training records) every 250 SFT steps, and the exact match on the same 300 records every 1,000 SFT steps
  (curves ``<arm>/<seed>/route_loss`` and ``<arm>/<seed>/train_exact``).
* the conditions, registered with the recipe (``helpers.transit_lm``: ``route_flat``, ``fits_records``,
  ``wsd_gates``): ``route_flat(route_loss curve) <= 0.05`` (``train.plateau(frac=0.2, until=11000, noise=2)``,
  the stable phase only), and exact match on the first 300 SFT training records, greedy on the stored weights,
  ``>= 0.8``; ``exact_match``, ``beats_lookup_heldout``, ``beats_splice_baseline``, ``cpt_helps``,
  ``grounding_destination`` and ``full_r2`` rest on both, every other claim on the flat one.

Jobs: each (arm, seed) runs in two processes of one torch thread, stage 1 (CPT, SFT steps 0-8,000) and stage 2
(SFT steps 8,000-16,000, resumed from stage 1's weights and optimizer state; the same weights as one process)::

    .venv/bin/python data/10_transit_lm/make_wsd.py --seeds S --arms A --stage 1 --parts P
    .venv/bin/python data/10_transit_lm/make_wsd.py --seeds S --arms A --stage 2 --parts P
    .venv/bin/python data/10_transit_lm/make_wsd.py --parts P --out ROOT     # all 12 parts present: the checkpoint

with S in 0 1 2, A in cpt sft, P a folder kept between the jobs (``P/<arm>/stage<k>/seed<S>.pt``, ~10 MB each).
Without ``--parts`` everything trains in this process. ``--tiny``: a tiny config in seconds (the tests).

Expected wall, from a probe on 2026-12-06 (``PROBE``: the CPT arm, seed 0, through both stages with SFT cut to
500 + 500 steps, one torch thread on the shared 2-core builder, through ``/tmp/heavy.sh``): 0.23 s per CPT step,
0.231 s per SFT step, 1.0 s per route-loss evaluation, 3.5 s per exact-match evaluation, ~5 s to build the data.
So stage 1 ~ 5 + 69 (CPT arm only) + 8,000 x 0.231 + 32 x 1.0 + 8 x 3.5 s ~ 33 min (SFT arm ~ 32 min), stage 2
~ 8,000 x 0.231 + 60 s ~ 32 min: each job under 40 min; one process per (arm, seed) would take ~65 min. Twelve
jobs, ~6.5 core-hours. At the previous recipe's length the loss was still falling: the route-token loss of
``probe_fit.py``'s run (stored per part every 250 steps) reads ``plateau(frac=0.2, until=3200, noise=2)`` = 0.084
over its constant phase (> 0.05), an exploratory reading of a probe, not of the stored models.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch

from helpers import checkpoints, repro, scripts, train
from helpers import transit_lm as T

SLUG = "10_transit_lm"
HERE = Path(__file__).resolve()
SOURCES = [HERE, Path(T.__file__).resolve(), Path(repro.__file__).resolve(), Path(train.__file__).resolve()]
ARMS = ("cpt", "sft")
PROBE = {"date": "2026-12-06", "s_per_cpt_step": 0.228, "s_per_sft_step": 0.231, "s_per_route_eval": 1.02,
         "s_per_exact_eval": 3.47, "probe_steps": {"cpt": 300, "sft": 1000}}  # measured, see the docstring


def monitor(data: T.Data, cfg: dict):
    """eval_fn(model, step) of a job: the route-token loss every call, the exact match every ``exact_every``."""
    recs = data.sft[:cfg["n_fit"]]
    ods = [(o, d) for o, d, _ in recs]

    def ev(model, step: int) -> dict[str, float]:
        out = {"route_loss": T.route_loss(T.part_losses(model, data.tok, recs))}
        if step % cfg["exact_every"] == 0 or step == cfg["sft_steps"]:
            pr = T.decode(model, data.tok, ods)
            out["train_exact"] = float(np.mean([T.evaluate(data.city, p, lab, o, d)["exact"]
                                                for p, (o, d, lab) in zip(pr, recs, strict=True)]))
        return out
    return ev


def job(cfg: dict, seed: int, arm: str, stage: int, resume: dict | None = None) -> dict:
    """One stage of one (arm, seed): what stage 2 resumes from, and the wall seconds."""
    repro.set_threads(1)
    data = T.make_data(cfg)
    tensors = T.corpora(data, cfg)
    t0 = time.time()
    with repro.seeded(seed):
        res = T.train_wsd(cfg, tensors, len(data.tok), seed, arm == "cpt", stage=stage, resume=resume,
                          eval_fn=monitor(data, cfg))
    res.pop("model")
    res["wall_seconds"] = time.time() - t0 + (resume or {}).get("wall_seconds", 0.0)
    res[f"wall_stage{stage}"] = time.time() - t0
    if resume is not None:
        res["wall_stage1"] = resume["wall_stage1"]
    ev = res["hist"]["sft"]["evals"]
    print(f"seed {seed} {arm} stage {stage}: route loss {ev['route_loss'][-1][1]:.4f}, exact on {cfg['n_fit']} "
          f"training records {ev['train_exact'][-1][1]:.3f} ({time.time() - t0:.0f} s)", flush=True)
    return res


def run_job(cfg: dict, seed: int, arm: str, stage: int, parts: Path | None) -> dict:
    """Stage ``stage`` of (arm, seed), reusing stored parts (stage 2 runs stage 1 first if its part is missing)."""
    key = scripts.part_key(cfg, arm=arm, recipe="wsd")
    where = (lambda k: None if parts is None else parts / arm / f"stage{k}")
    one = scripts.seed_part(where(1), seed, key, lambda: job(cfg, seed, arm, 1))[0]
    if stage == 1:
        return one
    return scripts.seed_part(where(2), seed, key, lambda: job(cfg, seed, arm, 2, one))[0]


def tiny(name: str) -> dict:
    cfg = T.checkpoint_config(name)
    cfg.update(n_sft=40, n_cpt_routes=20, n_pref=8, cpt_repeat=1, seeds=[0], cpt_steps=2, sft_steps=8, sft_decay=3,
               sft_warmup=2, split_at=4, eval_every=2, exact_every=4, n_fit=6, batch=4, d_model=16, n_layer=1,
               n_head=2)
    return cfg


def build(cfg: dict, out: Path | None, args: argparse.Namespace) -> list[Path] | Path:
    t0 = time.time()
    jobs = [(s, arm) for arm in args.arms for s in cfg["seeds"]]
    if args.stage is not None:
        if args.parts is None:
            raise SystemExit("--stage needs --parts (the folder stage 2 resumes from)")
        for s, arm in jobs:
            run_job(cfg, s, arm, args.stage, args.parts)
        return []
    if tuple(args.arms) != ARMS:
        raise SystemExit("the checkpoint holds both arms; --arms is for --stage jobs")
    tensors, history, metrics = {}, {}, {}
    for s, arm in jobs:
        res = run_job(cfg, s, arm, 2, args.parts)
        key = f"{arm}/{s}"
        tensors.update({f"{key}.{k}": v for k, v in res["state"].items()})
        hist = res["hist"]
        for stage, h in hist.items():
            history[f"{key}/{stage}"] = h["loss"]
        for name, pts in hist["sft"]["evals"].items():
            history[f"{key}/{name}"] = pts
        ev = hist["sft"]["evals"]
        metrics.update({f"final_sft_loss/{key}": train.tail_mean(hist["sft"]["loss"], 0.02),
                        f"train_exact/{key}": ev["train_exact"][-1][1],
                        f"route_loss/{key}": ev["route_loss"][-1][1],
                        f"route_flat/{key}": T.route_flat(ev["route_loss"], cfg),
                        f"wall_seconds/{key}": res["wall_seconds"],
                        f"wall_stage1/{key}": res["wall_stage1"], f"wall_stage2/{key}": res["wall_stage2"]})
    wall = sum(v for k, v in metrics.items() if k.startswith("wall_seconds/")) if args.parts else time.time() - t0
    return checkpoints.save(SLUG, "models_wsd", dict(sorted(tensors.items())), config=cfg, metrics=metrics,
                            history=history, seed=list(cfg["seeds"]), steps=cfg["cpt_steps"] + cfg["sft_steps"],
                            wall_seconds=wall, sources=SOURCES, module="helpers.transit_lm",
                            extra={"registered": T.REGISTERED}, dtype=torch.float16, quantize="int8", root=out)


def main(argv: list[str] | None = None) -> list[Path]:
    def options(ap: argparse.ArgumentParser) -> None:
        ap.add_argument("--arms", nargs="+", choices=ARMS, default=list(ARMS), help="which arms (with --stage)")
        ap.add_argument("--stage", type=int, choices=(1, 2), default=None,
                        help="train only this stage of each (arm, seed) into --parts (stage 2 resumes stage 1)")
        ap.add_argument("--parts", type=Path, default=None,
                        help="folder keeping (and reusing) each job's stages (<arm>/stage<k>/seed<S>.pt)")

    return scripts.script_main(build, config=T.checkpoint_config, tiny=tiny, names=["models_wsd"], options=options,
                               doc=__doc__, argv=argv)


if __name__ == "__main__":
    main()
