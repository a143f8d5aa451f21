"""Diagnosis and probes of chapter 10_transit_lm's training fit (issue #68, round 4), written to
``data/10_transit_lm/probe_fit.json`` (measurements only, no weights), which the chapter reads.

* ``diagnose``: the stored SFT-only model of seed 0 (``models``, the recipe before this round): its
  teacher-forced loss on SFT training records by record part (:func:`helpers.transit_lm.part_losses`), and which
  part its greedy routes on 150 SFT training records get wrong.
* ``probe NAME``: train the SFT-only arm of seed 0 under recipe ``NAME`` of :data:`PROBES` (the list was fixed
  before any probe ran) and log every ``eval_every`` steps the exact match on the same 150 SFT training records
  the chapter's condition reads, and the loss by part. Recipes are chosen by this training fit (and the plateau
  of the loss) only, never by a held-out number.

Run from the repository root: ``.venv/bin/python data/10_transit_lm/probe_fit.py diagnose`` or
``... probe NAME``; one torch thread.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from helpers import checkpoints, repro, train  # noqa: E402
from helpers import transit_lm as T  # noqa: E402

HERE = Path(__file__).resolve().parent
OUT = HERE / "probe_fit.json"
N_FIT, N_LOSS = 150, 400  # records for the exact match (as the chapter) and for the loss by part

# The probe list, fixed before probing: each entry overrides the checkpoint config (keys of train_lm's cfg; a
# "tail" > 0 means constant lr for sft_steps - tail steps, then a cosine decay to 0 over the last tail steps).
PROBES = {
    "current": dict(sft_steps=1000),  # the recipe of the stored models: warm-up, cosine over 1000 steps
    "long_const_tail": dict(sft_steps=4000, tail=800),  # 4x the steps at the same lr, constant + cosine tail
    "high_lr_tail": dict(sft_steps=4000, tail=800, lr=6e-3),  # same, twice the lr
    "wide_tail": dict(sft_steps=2000, tail=400, d_model=192),  # a wider model, half the steps (same wall)
    "batch64_tail": dict(sft_steps=2000, tail=400, batch=64),  # twice the batch, half the steps (same wall)
}


# The decision, written after the first probe (long_const_tail) and before any held-out number of its models was
# read: its recipe trains the stored models; the other probes of the list were not run (see "why").
DECISION = {
    "chosen": "long_const_tail",
    "not_run": ["current", "high_lr_tail", "wide_tail", "batch64_tail"],
    "why": ("each probe costs about as much as one model job (14 min on one core); after the first probe the "
            "session's compute held the remaining jobs of one recipe, not a second probe (and in the end not all "
            "of them in the builder's slot: the third seed's CPT+SFT job was trained afterwards), so the first probe's recipe was taken although "
            "its fit (below the 0.8 bar) was not the issue's; 'current' is read from the stored models of that "
            "recipe (the diagnosis) instead of a rerun"),
}


def fit_eval(data: T.Data):
    recs = data.sft[:N_FIT]
    ods = [(o, d) for o, d, _ in recs]
    loss_recs = data.sft[:N_LOSS]

    def ev(model) -> dict[str, float]:
        pr = T.decode(model, data.tok, ods)
        out = {"train_exact": float(np.mean([T.evaluate(data.city, p, lab, o, d)["exact"]
                                              for p, (o, d, lab) in zip(pr, recs, strict=True)]))}
        out.update({f"loss/{k}": v["per_token"] for k, v in T.part_losses(model, data.tok, loss_recs).items()})
        return out
    return ev


def wrong_parts(data: T.Data, model) -> dict[str, float]:
    """Share of the 150 training records whose greedy route gets each part wrong."""
    recs = data.sft[:N_FIT]
    pr = T.decode(model, data.tok, [(o, d) for o, d, _ in recs])
    out = {k: [] for k in ("malformed", "start_mode", "end_mode", "first_station", "last_station", "lines",
                           "stations", "exact")}
    for p, (o, d, lab) in zip(pr, recs, strict=True):
        out["malformed"].append(p is None)
        p = p or {k: None for k in lab}
        st = [s for s in (p["station_sequence"] or []) if s != T.TRANSFER]
        ls = [s for s in lab["station_sequence"] if s != T.TRANSFER]
        out["start_mode"].append(p["start_transfer_mode"] != lab["start_transfer_mode"])
        out["end_mode"].append(p["end_transfer_mode"] != lab["end_transfer_mode"])
        out["first_station"].append(not st or st[0] != ls[0])
        out["last_station"].append(not st or st[-1] != ls[-1])
        out["lines"].append(p["line_sequence"] != lab["line_sequence"])
        out["stations"].append(p["station_sequence"] != lab["station_sequence"])
        out["exact"].append(not T.evaluate(data.city, p if p.get("line_sequence") is not None else None,
                                           lab, o, d)["exact"])
    return {f"wrong/{k}": float(np.mean(v)) for k, v in out.items()}


def load() -> dict:
    return json.loads(OUT.read_text()) if OUT.exists() else {"probes": {}, "order": list(PROBES)}


def diagnose(old_root: str | None) -> None:
    root = None if old_root is None else Path(old_root)
    old_cfg = checkpoints.load_manifest("10_transit_lm", "models", root)["config"]
    if old_cfg["sft_steps"] != 1000 or old_cfg.get("sft_tail", 0):
        raise ValueError("diagnose reads the models of the previous recipe (1000 SFT steps, cosine); point "
                         "--old-root at a data root holding them")
    data = T.make_data(old_cfg)
    ck = checkpoints.load("10_transit_lm", "models", config=old_cfg, root=root, check_sources=False)
    model = ck.load_into(T.make_model(old_cfg, len(data.tok)), prefix="sft/0.").float().eval()
    res = load()
    parts = T.part_losses(model, data.tok, data.sft[:N_LOSS])
    res["diagnosis"] = {"model": "stored sft/0 (1000 SFT steps, cosine)", "n_loss": N_LOSS, "n_fit": N_FIT,
                        "parts": parts, **wrong_parts(data, model),
                        "label_tokens": float(sum(v["tokens"] for v in parts.values()))}
    res["decision"] = DECISION
    agree = T.cell_agreement(data.city, data.sft[:N_FIT], n=20, seed=0)
    res["diagnosis"]["cell_agreement"] = {"mean": float(agree.mean()), "all": float(np.mean(agree == 1)),
                                          "majority": float(np.mean(agree > 0.5)), "n_points": 20}
    OUT.write_text(json.dumps(res, indent=1))
    print(json.dumps(res["diagnosis"], indent=1))


def probe(cfg: dict, name: str, eval_every: int, args_save: str | None = None) -> None:
    over = dict(PROBES[name])
    tail = over.pop("tail", 0)
    cfg = dict(cfg, **over)
    data = T.make_data(cfg)
    tensors = T.corpora(data, cfg)
    t0 = time.time()
    with repro.seeded(0):
        model, hists = T.train_lm(cfg, tensors, len(data.tok), 0, False, progress=False, tail=tail,
                                  eval_fn=fit_eval(data), eval_every=eval_every)
    h = hists["sft"]
    res = load()
    res["probes"][name] = {"recipe": PROBES[name], "wall_seconds": time.time() - t0,
                           "plateau": train.plateau(h.loss), "final_loss": train.tail_mean(h.loss),
                           "evals": {k: v for k, v in h.evals.items()}, **wrong_parts(data, model)}
    OUT.write_text(json.dumps(res, indent=1))
    if args_save:  # the trained job, in make_models.py's part format (reused if the recipe is chosen)
        torch.save({"state": model.state_dict(), "history": {f"sft/0/{k}": v.loss for k, v in hists.items()},
                    "evals": h.evals, "cfg": cfg, "wall_seconds": time.time() - t0}, args_save)
    print(json.dumps({k: v for k, v in res["probes"][name].items() if k != "evals"}, indent=1))
    print("train_exact by step:", h.evals["train_exact"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=["diagnose", "probe"])
    ap.add_argument("name", nargs="?", choices=list(PROBES))
    ap.add_argument("--eval-every", type=int, default=250)
    ap.add_argument("--save", default=None, help="also save the trained model here (torch.save)")
    ap.add_argument("--old-root", default=None, help="data root holding the previous recipe's models")
    args = ap.parse_args()
    repro.set_threads(1)
    cfg = T.checkpoint_config("models")
    if args.what == "diagnose":
        diagnose(args.old_root)
    else:
        probe(cfg, args.name, args.eval_every, args.save)


if __name__ == "__main__":
    main()
