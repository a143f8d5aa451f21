"""Exploratory (issue #69, round 4; not a registered build): short one-seed A/B trainings of the filled-conditioning
propagator at the stored ``propagators_filled`` size (width 16, 48 clips, 1,200 steps, ``--seed``, default 0), each
changing one thing, read with the chapter's ``filled_fits_training_clips`` measure (first 6 training clips, 3 uniform
keyframes, 8 steps, sampler seed ``1000 * seed``) against the stored model of that seed (``diagnose_fit.json``).

``--variant x0``: + the one-step fill loss (``x0_weight=4``: the τ = 0 prediction on holes and their 2-px border
band); ``wsd``: warmup-stable-decay (last 20% decay) instead of cosine; ``x0wsd``: both; ``base``: neither (the
stored recipe retrained, to see the retraining noise). Writes ``--out`` JSON. About 5 minutes on one core.
"""

from __future__ import annotations

import argparse
import json
import time

from helpers import anchor_video_edit as A
from helpers import repro, train

VARIANTS = {"base": {}, "x0": {"x0_weight": 4.0}, "wsd": {"schedule": "wsd", "decay_steps": 240},
            "x0wsd": {"x0_weight": 4.0, "schedule": "wsd", "decay_steps": 240}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--variant", choices=sorted(VARIANTS), required=True)
    ap.add_argument("--steps", type=int, default=1200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    repro.set_threads(1)
    t0 = time.time()
    cfg = A.checkpoint_config("propagators_filled")
    clips, mots = A.training_clips(cfg)
    t_flow = time.time() - t0
    kw = dict(VARIANTS[args.variant])
    if "decay_steps" in kw:
        kw["decay_steps"] = args.steps // 5
    model, hist = A.train_propagator([c.frames for c in clips], mots, args.steps, width=cfg["width"], seed=args.seed,
                                     batch_clips=cfg["batch_clips"], lr=cfg["lr"], hole_weight=cfg["hole_weight"],
                                     progress=False, fill_holes=True, **kw)
    keys = A.uniform_keyframes(cfg["T"], 3)
    rows = [A.rebuild_errors(model, c, m, keys, 8, seed=1000 * args.seed, fill_holes=True)
            for c, m in zip(clips[:6], mots[:6])]
    until = args.steps - kw.get("decay_steps", 0) if "decay_steps" in kw else None
    out = {"variant": args.variant, "seed": args.seed, "kwargs": kw, "steps": args.steps, "fit_gap_db": A.pooled_gap_db(rows),
           "plateau": train.plateau(hist.loss), "plateau_stable": train.plateau(hist.loss, until=until, noise=2)
           if until else None, "final_loss": float(sum(hist.loss[-50:]) / 50), "flow_s": round(t_flow, 1),
           "wall_s": round(time.time() - t0, 1)}
    print(json.dumps(out), flush=True)
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
