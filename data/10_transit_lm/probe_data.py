"""Probe of chapter 10_transit_lm (#68), registered 2026-12-07 (PROBE_DESIGN, this docstring, the tests) before it
trained; records only (probe_data.json). Decides the NEXT recipe, no claim.

Why: models_wsd (make_wsd.py) fits its records at seed 0 (0.993, bar 0.8) but generalised poorly in an exploratory
eval (exact 0.31 ID / held-out vs splice 0.36): it memorises ~64 epochs of 8,000 records. Lever: more data.

Variant (config): models_wsd with n_sft, n_pref x8 (48,000 + 16,000; the same seeded streams, so models_wsd's
records come first), all else equal (model, batch 32, 16,000 WSD steps, seed 0), arm sft; T.train_wsd in
make_wsd.py's two stages. Test sets: T.make_data(cfg, 300, 300), the notebook's first 300 ID and held-out-zone-pair
requests; each job stops unless overlap() is all 0. Logged (monitor): make_wsd's route loss (every 250 steps) and
exact (every 1,000) on 300 SFT training records, the same on the 300 held-out and 300 ID test requests.

Reading (reading()): adopt for models_wsd2 iff (i) final train exact >= T.FIT_BAR (0.8) and (ii)
T.route_flat(held-out route-loss curve, cfg) <= T.FLAT_BAR (0.05; stable phase; a rising held-out loss reads <= 0
and meets it). Held-out exact vs splice/lookup (same 300 + 300 requests, the variant's SFT+pref+CPT records; and
models_wsd's records beside) is reported, decides nothing. On a failure, short_by says which and by how much;
nothing else is tried in this probe.

Expected wall (make_wsd.PROBE, one thread): per stage ~60 s data (10.4 s measured at 1x) + 8,000 x 0.231 + 32 x 3
x 1.02 (route loss) + 8 x 3 x 3.47 (exact) ~ 2,090 s ~ 35 min; merge ~2 min. Commands (P kept between them):

    .venv/bin/python data/10_transit_lm/probe_data.py --stage 1 --parts P   (then --stage 2, then --merge)

--tiny alone: both stages and the merge of a tiny config in a temporary folder; --out DIR: where the JSON goes.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from helpers import repro, scripts  # noqa: E402
from helpers import transit_lm as T  # noqa: E402

HERE = Path(__file__).resolve()
_spec = importlib.util.spec_from_file_location("_make_wsd_for_probe_data", HERE.parent / "make_wsd.py")
M = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(M)
OUT = HERE.parent / "probe_data.json"
SCALE, N_EVAL, ARM, SEED = 8, 300, "sft", 0
EXACT_SETS = ("train_exact", "exact_heldout", "exact_id")
LOSS_SETS = ("route_loss", "route_loss_heldout", "route_loss_id")
PROBE_DESIGN = {
    "date": "2026-12-07",
    "base": "models_wsd",
    "variant": f"n_sft and n_pref x {SCALE}; everything else models_wsd's (model, batch, 16,000 WSD steps)",
    "arm": ARM, "seed": SEED, "n_eval": N_EVAL,
    "rule": ("adopt for models_wsd2 iff (i) train exact on the first 300 SFT training records >= T.FIT_BAR and "
             "(ii) T.route_flat(route_loss_heldout, cfg) <= T.FLAT_BAR; held-out exact vs splice reported, decides "
             "nothing; if (i) or (ii) fails nothing else is tried in this probe"),
    "expected_wall_s": {"stage1": 2090, "stage2": 2090, "merge": 120},
}


def config(tiny: bool = False) -> dict:
    """The probe's config: ``models_wsd``'s (or ``make_wsd.py``'s tiny one) with ``n_sft`` and ``n_pref`` x SCALE,
    seed 0 only, and ``n_eval`` test requests of each kind (6 when tiny)."""
    cfg = M.tiny("models_wsd") if tiny else T.checkpoint_config("models_wsd")
    cfg.update(n_sft=cfg["n_sft"] * SCALE, n_pref=cfg["n_pref"] * SCALE, seeds=[SEED],
               n_eval=6 if tiny else N_EVAL)
    return cfg


def _ods(recs: list) -> set:
    return {(tuple(r[0]), tuple(r[1])) for r in recs}


def overlap(data: T.Data, cfg: dict) -> dict[str, int]:
    """Counts that must all be 0: test requests whose (o, d) is a training request's (SFT, preference, CPT), and
    training / in-distribution test requests in a held-out zone pair, held-out test requests outside one."""
    train_ods = _ods(data.sft) | _ods(data.pref) | _ods(data.cpt)
    z = (lambda r: (T.zone(data.city, r[0], cfg["zones"]), T.zone(data.city, r[1], cfg["zones"])) in data.heldout)
    return {"test_id_in_training": len(_ods(data.test_id) & train_ods),
            "test_heldout_in_training": len(_ods(data.test_heldout) & train_ods),
            "training_in_heldout_pairs": sum(map(z, data.sft + data.pref + data.cpt)),
            "test_id_in_heldout_pairs": sum(map(z, data.test_id)),
            "test_heldout_outside_heldout_pairs": sum(not z(r) for r in data.test_heldout)}


def probe_data(cfg: dict) -> T.Data:
    """The variant's records and test sets, refused when any :func:`overlap` count is not 0."""
    data = T.make_data(cfg, cfg["n_eval"], cfg["n_eval"])
    bad = {k: v for k, v in overlap(data, cfg).items() if v}
    if bad:
        raise SystemExit(f"the probe's training and test requests overlap: {bad}")
    return data


def exact(model, data: T.Data, recs: list) -> float:
    """Greedy exact match of ``model`` on records (o, d, label)."""
    pr = T.decode(model, data.tok, [(o, d) for o, d, _ in recs])
    return float(np.mean([T.evaluate(data.city, p, lab, o, d)["exact"] for p, (o, d, lab) in zip(pr, recs, strict=True)]))


def monitor(data: T.Data, cfg: dict):
    """``make_wsd.py``'s eval_fn (route loss and exact match on SFT training records) plus the route loss on the
    held-out and in-distribution test requests every call and their exact match every ``exact_every`` steps."""
    base = M.monitor(data, cfg)
    sets = {"heldout": data.test_heldout, "id": data.test_id}

    def ev(model, step: int) -> dict[str, float]:
        out = base(model, step)
        for name, recs in sets.items():
            out[f"route_loss_{name}"] = T.route_loss(T.part_losses(model, data.tok, recs))
        if "train_exact" in out:  # the steps make_wsd's monitor reads exact match at
            out.update({f"exact_{name}": exact(model, data, recs) for name, recs in sets.items()})
        return out
    return ev


def job(cfg: dict, stage: int, resume: dict | None = None) -> dict:
    """One stage of the probe's (sft, seed 0) run, with the wall seconds of this stage (data build included)."""
    repro.set_threads(1)
    t0 = time.time()
    data = probe_data(cfg)
    tensors = T.corpora(data, cfg)
    data_s = time.time() - t0
    with repro.seeded(SEED):
        res = T.train_wsd(cfg, tensors, len(data.tok), SEED, False, stage=stage, resume=resume,
                          eval_fn=monitor(data, cfg))
    res.pop("model")
    res.update({f"wall_stage{stage}": time.time() - t0, f"data_seconds_stage{stage}": data_s})
    for k in ("wall_stage1", "data_seconds_stage1"):
        if resume is not None:
            res[k] = resume[k]
    ev = res["hist"]["sft"]["evals"]
    print(f"stage {stage}: " + ", ".join(f"{k} {ev[k][-1][1]:.3f}" for k in LOSS_SETS + EXACT_SETS if k in ev)
          + f" ({time.time() - t0:.0f} s)", flush=True)
    return res


def _part(parts: Path, stage: int) -> Path:
    return parts / ARM / f"stage{stage}"


def run_stage(cfg: dict, stage: int, parts: Path) -> dict:
    """Stage ``stage`` into ``parts`` (stage 2 runs stage 1 first if its part is missing; stored parts reused)."""
    key = scripts.part_key(cfg, arm=ARM, recipe="wsd", probe="probe_data")
    one = scripts.seed_part(_part(parts, 1), SEED, key, lambda: job(cfg, 1))[0]
    if stage == 1:
        return one
    return scripts.seed_part(_part(parts, 2), SEED, key, lambda: job(cfg, 2, one))[0]


def reading(train_exact: float, heldout_flat: float) -> dict:
    """The registered reading: adopt iff train exact >= T.FIT_BAR and the held-out plateau <= T.FLAT_BAR;
    ``short_by`` says by how much each failed condition missed its bar."""
    fit = T.fits_records(train_exact)
    flat = float(heldout_flat)
    conds = {"fits_records": (fit, ">=", T.FIT_BAR, fit >= T.FIT_BAR),
             "heldout_route_flat": (flat, "<=", T.FLAT_BAR, flat <= T.FLAT_BAR)}
    short = {k: abs(v - bar) for k, (v, _, bar, ok) in conds.items() if not ok}
    return {"adopt": not short, "conditions": conds, "short_by": short}


def _curve(pts: list) -> dict:
    return {"step": [int(s) for s, _ in pts], "value": [float(v) for _, v in pts]}


def _baselines(data: T.Data, chunk: int = 50) -> dict:
    """Exact match of the lookup and splice baselines on the test sets, searching the data's records as the
    notebook does (SFT, preference, CPT); requests in chunks (lookup's distance table is requests x records)."""
    seen = data.sft + [(o, d, lab) for o, d, _, lab in data.pref] + data.cpt
    out = {}
    for name, recs in (("heldout", data.test_heldout), ("id", data.test_id)):
        ods = [(o, d) for o, d, _ in recs]
        for b, f in (("lookup", T.lookup), ("splice", T.splice_lookup)):
            pr = [p for i in range(0, len(ods), chunk) for p in f(data.city, seen, ods[i:i + chunk])]
            out[f"{b}_{name}"] = float(np.mean([T.evaluate(data.city, p, lab, o, d)["exact"]
                                                for p, (o, d, lab) in zip(pr, recs, strict=True)]))
    return out


def merge(cfg: dict, parts: Path, out: Path, tiny: bool = False) -> Path:
    """probe_data.json from stage 2's part (refused when a part is missing or was trained under another config)."""
    t0 = time.time()
    key = scripts.part_key(cfg, arm=ARM, recipe="wsd", probe="probe_data")
    for stage in (1, 2):
        p = _part(parts, stage) / f"seed{SEED}.pt"
        if not p.is_file():
            raise SystemExit(f"--merge needs stage {stage}'s part {p}: run --stage {stage} --parts {parts} first")
        if torch.load(p, weights_only=False).get("key") != key:
            raise SystemExit(f"{p} was trained under another config than the probe's; rerun its stage")
    res = torch.load(_part(parts, 2) / f"seed{SEED}.pt", weights_only=False)
    ev = res["hist"]["sft"]["evals"]
    missing = [k for k in LOSS_SETS + EXACT_SETS if k not in ev]
    if missing:
        raise SystemExit(f"stage 2's part has no curve {missing}")
    curves = {k: _curve(ev[k]) for k in LOSS_SETS + EXACT_SETS}
    loss = res["hist"]["sft"]["loss"]
    every = cfg["eval_every"]
    curves["sft_loss"] = {"step": list(range(every, len(loss) + 1, every)),
                          "value": [float(np.mean(loss[i - every:i])) for i in range(every, len(loss) + 1, every)]}
    finals = {k: curves[k]["value"][-1] for k in LOSS_SETS + EXACT_SETS}
    flats = {f"route_flat{k[len('route_loss'):]}": T.route_flat(curves[k], cfg) for k in LOSS_SETS}
    data = probe_data(cfg)
    base_cfg = M.tiny("models_wsd") if tiny else T.checkpoint_config("models_wsd")
    base = T.make_data(base_cfg, cfg["n_eval"], cfg["n_eval"])
    if (base.test_id, base.test_heldout) != (data.test_id, data.test_heldout):
        raise SystemExit("the probe's test sets are not models_wsd's")
    rec = {"name": "probe_data", "design": PROBE_DESIGN, "config": cfg,
           "counts": {"sft": len(data.sft), "pref": len(data.pref), "cpt": len(data.cpt),
                      "test_id": len(data.test_id), "test_heldout": len(data.test_heldout)},
           "overlap": overlap(data, cfg), "curves": curves, "finals": finals, **flats,
           "reading": reading(finals["train_exact"], flats["route_flat_heldout"]),
           "baselines": _baselines(data), "baselines_models_wsd_records": _baselines(base),
           "wall_seconds": {"stage1": res["wall_stage1"], "stage2": res["wall_stage2"],
                            "data_stage1": res["data_seconds_stage1"], "data_stage2": res["data_seconds_stage2"],
                            "merge": time.time() - t0},
           "date": time.strftime("%Y-%m-%d")}
    out.mkdir(parents=True, exist_ok=True)
    path = out / "probe_data.json"
    path.write_text(json.dumps(rec, separators=(",", ":")) + "\n")
    r = rec["reading"]
    print(f"adopt: {r['adopt']}; " + "; ".join(f"{k} {v[0]:.3f} {v[1]} {v[2]}" for k, v in r["conditions"].items())
          + f"; held-out exact {finals['exact_heldout']:.3f} vs splice {rec['baselines']['splice_heldout']:.3f}",
          flush=True)
    return path


def main(argv: list[str] | None = None) -> Path | None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stage", type=int, choices=(1, 2), default=None, help="train this stage into --parts")
    ap.add_argument("--merge", action="store_true", help="write probe_data.json from --parts' stage-2 part")
    ap.add_argument("--parts", type=Path, default=None, help="folder of the stages' parts (sft/stage<k>/seed0.pt)")
    ap.add_argument("--out", type=Path, default=None, help="folder for probe_data.json (default data/10_transit_lm)")
    ap.add_argument("--tiny", action="store_true", help="a tiny config: both stages and the merge, in seconds")
    args = ap.parse_args(argv)
    repro.set_threads(1)
    cfg = config(args.tiny)
    if args.tiny and args.stage is None and not args.merge:  # alone: everything into temporary folders
        with tempfile.TemporaryDirectory(prefix="probe_data_tiny_") as tmp:
            parts = args.parts or Path(tmp) / "parts"
            run_stage(cfg, 2, parts)
            path = merge(cfg, parts, args.out or Path(tmp), tiny=True)
            print("wrote", path, flush=True)
            return path if args.out else None
    if args.parts is None or (args.stage is not None) == args.merge:
        raise SystemExit("give --parts P and one of --stage 1, --stage 2, --merge (or --tiny alone)")
    if args.stage is not None:
        run_stage(cfg, args.stage, args.parts)
        return None
    path = merge(cfg, args.parts, args.out or OUT.parent, tiny=args.tiny)
    print("wrote", path, flush=True)
    return path


if __name__ == "__main__":
    main()
