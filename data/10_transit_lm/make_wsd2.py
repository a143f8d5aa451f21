"""Train chapter 10_transit_lm's ``models_wsd2`` (issue #68), registered 2026-12-07 before any of its models
trained: the design and its reasons in ``helpers/transit_lm_wsd.py`` (``checkpoint_config("models_wsd2")``,
``part_config``, ``first_job_reading``), the tests in ``tests/test_transit_lm_wsd2.py``.

Recipe: ``models_wsd``'s (4-layer d=128 model, batch 32, AdamW, lr 3e-3, 400 warm-up steps; CPT arm: 300 CPT steps
first) on the data probe's x8 records (48,000 SFT + ~15,150 preference), 35,000 SFT steps: constant rate to
30,000, cosine decay over the last 5,000. Each (arm, seed) runs as 7 parts of 5,000 SFT steps, one process each
(``T.train_wsd`` per part, resumed from the previous part's weights and optimizer: the one-process run's weights).
Logged: probe_data.py's monitor (route-token loss every 250 steps and greedy exact every 1,000, on the first 300 SFT
training records and on 300 held-out / 300 in-distribution test requests; each job refuses overlapping requests).

First-job rule (``first_job_reading``): seed 0's SFT arm trains first; the other five models train only if it
fits its records (exact on the first 300, int8 weights, >= 0.8), its route-token loss is flat (stable phase,
<= 0.05) and so is its held-out route-token loss. If not, only ``wsd2_first.json`` (records) is stored, the
notebook reads what it read before, and every claim keeps its verdict. The claims read models_wsd2 with the
conditions and gates registered for models_wsd (2d5b325), unchanged.

Jobs, in this order (P: a parts folder kept between them, ~10 MB a part; K = 1..7 in turn)::

    .venv/bin/python data/10_transit_lm/make_wsd2.py --seeds 0 --arms sft --part K --parts P
    .venv/bin/python data/10_transit_lm/make_wsd2.py --first --parts P      # the rule: go or stop (~2 min)
    # only on go, any order (a part needs the previous part of its (arm, seed)):
    .venv/bin/python data/10_transit_lm/make_wsd2.py --seeds S --arms A --part K --parts P   (S 0-2, A cpt|sft)
    .venv/bin/python data/10_transit_lm/make_wsd2.py --parts P              # all 42 parts: the checkpoint (~2 min)

Expected wall per part from the data probe (8,000-step stages: 2,689 and 2,995 s on the loaded builder, 0.31-0.34
s per SFT step with the monitor, data 40-71 s): ~5,000 x 0.34 + 70 + 160 s ~ 32 min (CPT arm's part 1 +2 min;
~22 min on an idle core). First job: 7 parts, ~2.6-3.7 h of one core; all six models: 42 parts, ~15-23
core-hours (two slots: ~8-12 h). ``--probe N``
times N SFT steps, the data build and one evaluation of each kind and prints the estimate per part.
``--tiny`` alone: every part of both arms of a tiny config, the rule (not enforced) and the checkpoint, in seconds.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import tempfile
import time
from pathlib import Path

import torch

from helpers import checkpoints, repro, scripts, train
from helpers import transit_lm as T
from helpers import transit_lm_wsd as W

HERE = Path(__file__).resolve()
_spec = importlib.util.spec_from_file_location("_probe_data_for_wsd2", HERE.parent / "probe_data.py")
P = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(P)  # its monitor, test sets and overlap check (it loads make_wsd.py)
SOURCES = [HERE, HERE.parent / "probe_data.py", HERE.parent / "make_wsd.py"] + [
    Path(m.__file__).resolve() for m in (T, W, repro, train)]
CURVES = P.LOSS_SETS + P.EXACT_SETS


def tiny(name: str) -> dict:
    cfg = W.checkpoint_config(name)
    cfg.update(P.M.tiny("models_wsd"), sft_steps=12, part_steps=4, n_eval=6)
    cfg.update(n_sft=cfg["n_sft"] * W.DATA_SCALE, n_pref=cfg["n_pref"] * W.DATA_SCALE)
    cfg.pop("split_at")
    return cfg


def job(cfg: dict, seed: int, arm: str, part: int, prev: dict | None) -> dict:
    t0 = time.time()
    data = P.probe_data(cfg)  # refuses overlapping training and test requests
    tensors = T.corpora(data, cfg)
    with repro.seeded(seed):
        res = W.train_part(cfg, tensors, len(data.tok), seed, arm == "cpt", part, prev, P.monitor(data, cfg))
    res.pop("model")
    res["walls"] = (prev or {}).get("walls", []) + [time.time() - t0]
    ev = res["hist"]["sft"]["evals"]
    print(f"{arm} seed {seed} part {part}: " + ", ".join(f"{k} {ev[k][-1][1]:.3f}" for k in CURVES if k in ev)
          + f" ({time.time() - t0:.0f} s)", flush=True)
    return res


def stored(cfg: dict, seed: int, arm: str, k: int, parts: Path) -> dict:
    """Part ``k`` of (arm, seed) as stored in ``parts`` under this config (never trained here)."""
    def missing():
        raise SystemExit(f"{parts}/{arm}/part{k}/seed{seed}.pt is missing or was trained under another config: "
                         f"run --seeds {seed} --arms {arm} --part {k} --parts {parts} first")
    return scripts.seed_part(parts / arm / f"part{k}", seed, scripts.part_key(cfg, arm=arm, recipe="wsd2"), missing)[0]


def part(cfg: dict, seed: int, arm: str, k: int, parts: Path, chain: bool = False) -> dict:
    """Part ``k`` of (arm, seed) into ``parts`` (reused when stored); part k - 1 must be stored (``chain``: the
    missing earlier parts are trained here, for --tiny)."""
    def compute():
        prev = None if k == 1 else part(cfg, seed, arm, k - 1, parts, True) if chain else stored(
            cfg, seed, arm, k - 1, parts)
        return job(cfg, seed, arm, k, prev)
    return scripts.seed_part(parts / arm / f"part{k}", seed, scripts.part_key(cfg, arm=arm, recipe="wsd2"),
                             compute)[0]


def _curve(pts: list) -> dict:
    return {"step": [int(s) for s, _ in pts], "value": [float(v) for _, v in pts]}


def first(cfg: dict, parts: Path, out: Path | None) -> dict:
    """The first-job rule on (sft, seed 0)'s last part: parts/first_job.json and <out>/10_transit_lm/wsd2_first.json."""
    arm, seed = W.FIRST_JOB
    res = stored(cfg, seed, arm, len(W.part_bounds(cfg)), parts)
    data = P.probe_data(cfg)
    model = T.make_model(cfg, len(data.tok))
    model.load_state_dict(W.stored_weights(res["state"]))
    exact = P.exact(model.float().eval(), data, data.sft[:cfg["n_fit"]])
    ev = {k: _curve(v) for k, v in res["hist"]["sft"]["evals"].items()}
    rec = {"name": "wsd2_first", "registered": W.REGISTERED2, "job": [arm, seed], "train_exact_stored": exact,
           "reading": W.first_job_reading(exact, ev["route_loss"], ev["route_loss_heldout"], cfg),
           "curves": {k: ev[k] for k in CURVES}, "config": cfg, "wall_seconds": res["walls"]}
    (parts / "first_job.json").write_text(json.dumps(rec))
    path = scripts.data_root(out) / W.SLUG / "wsd2_first.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rec, separators=(",", ":")) + "\n")
    r = rec["reading"]
    print(f"go: {r['go']}; " + "; ".join(f"{k} {v[0]:.3f} {v[1]} {v[2]}" for k, v in r["conditions"].items()))
    return rec


def merge(cfg: dict, parts: Path, out: Path | None, enforce: bool = True) -> Path:
    """The models_wsd2 checkpoint (int8) from every (arm, seed)'s last part; refused unless the rule said go."""
    rule = parts / "first_job.json"
    reading = json.loads(rule.read_text())["reading"] if rule.is_file() else None
    if enforce and not (reading and reading["go"]):
        raise SystemExit(f"the first-job rule has not said go ({rule}): models_wsd2 is not merged")
    n = len(W.part_bounds(cfg))
    tensors, history, metrics = {}, {}, {}
    for arm in W.ARMS:
        for s in cfg["seeds"]:
            res, key = stored(cfg, s, arm, n, parts), f"{arm}/{s}"
            tensors.update({f"{key}.{k}": v for k, v in res["state"].items()})
            history.update({f"{key}/{st}": h["loss"] for st, h in res["hist"].items()})
            ev = res["hist"]["sft"]["evals"]
            history.update({f"{key}/{k}": v for k, v in ev.items()})
            metrics.update({f"train_exact/{key}": ev["train_exact"][-1][1], f"route_loss/{key}": ev["route_loss"][-1][1],
                            f"route_flat/{key}": T.route_flat(ev["route_loss"], cfg),
                            f"route_flat_heldout/{key}": T.route_flat(ev["route_loss_heldout"], cfg),
                            f"exact_heldout/{key}": ev["exact_heldout"][-1][1],
                            f"wall_seconds/{key}": sum(res["walls"])})
    return checkpoints.save(W.SLUG, W.NAME2, dict(sorted(tensors.items())), config=cfg, metrics=metrics,
                            history=history, seed=list(cfg["seeds"]), steps=cfg["cpt_steps"] + cfg["sft_steps"],
                            wall_seconds=sum(v for k, v in metrics.items() if k.startswith("wall_seconds/")),
                            sources=SOURCES, module="helpers.transit_lm_wsd", dtype=torch.float16, quantize="int8",
                            extra={"registered": W.REGISTERED2, "first_job": reading}, root=out)


def probe(cfg: dict, n: int) -> None:
    """Seconds per SFT step (n steps of part 1), per data build and per evaluation, and the estimate per part."""
    t0 = time.time()
    data = P.probe_data(cfg)
    tensors, t_data = T.corpora(data, cfg), time.time() - t0
    model = T.make_model(cfg, len(data.tok))
    ev = P.monitor(data, cfg)
    t1 = time.time()
    ev(model, 1)  # route-token loss on the three sets
    t2 = time.time()
    ev(model, cfg["exact_every"])  # the same and greedy exact on the three sets (an untrained model: no early stop)
    t3 = time.time()
    T.train_wsd({**cfg, "split_at": n}, tensors, len(data.tok), 0, False, stage=1)
    step = (time.time() - t3) / n
    route, both = t2 - t1, t3 - t2
    k = cfg["part_steps"]
    est = t_data + k * step + k / cfg["eval_every"] * route + k / cfg["exact_every"] * (both - route)
    print(f"data {t_data:.0f} s, {step:.3f} s/SFT step, route-loss eval {route:.1f} s, exact eval "
          f"{both - route:.1f} s: ~{est / 60:.0f} min per part of {k} steps", flush=True)


def build(cfg: dict, out: Path | None, args: argparse.Namespace):
    if args.probe:
        return probe(cfg, args.probe) or []
    if args.tiny and args.parts is None:  # alone: every part of both arms, the rule (not enforced), the merge
        with tempfile.TemporaryDirectory(prefix="wsd2_tiny_") as tmp:
            for arm in ("sft", "cpt"):  # the first job's arm first, as the jobs run
                for s in cfg["seeds"]:
                    part(cfg, s, arm, len(W.part_bounds(cfg)), Path(tmp), chain=True)
                if arm == W.FIRST_JOB[0]:
                    first(cfg, Path(tmp), out)
            return merge(cfg, Path(tmp), out, enforce=False)
    if args.parts is None:
        raise SystemExit("give --parts P (with --part K, --first, or nothing: the merge), or --tiny alone")
    if args.first:
        first(cfg, args.parts, out)
        return []
    if args.part is None:
        return merge(cfg, args.parts, out, enforce=not args.tiny)
    for arm in args.arms:
        for s in cfg["seeds"]:
            rule = args.parts / "first_job.json"
            if (arm, s) != W.FIRST_JOB and not args.tiny and not (
                    rule.is_file() and json.loads(rule.read_text())["reading"]["go"]):
                raise SystemExit(f"{arm} seed {s} waits for the first-job rule's go ({rule}); see the docstring")
            part(cfg, s, arm, args.part, args.parts)
    return []


def main(argv: list[str] | None = None) -> list:
    def options(ap: argparse.ArgumentParser) -> None:
        ap.add_argument("--arms", nargs="+", choices=W.ARMS, default=list(W.ARMS), help="which arms (with --part)")
        ap.add_argument("--part", type=int, default=None, help="train part K (1-based) into --parts")
        ap.add_argument("--parts", type=Path, default=None, help="folder of the parts (<arm>/part<K>/seed<S>.pt)")
        ap.add_argument("--first", action="store_true", help="read the first-job rule on (sft, 0)'s last part")
        ap.add_argument("--probe", type=int, default=0, metavar="N",
                        help="time N SFT steps (a multiple of eval_every, >= the warm-up: e.g. 500)")

    return scripts.script_main(build, config=W.checkpoint_config, tiny=tiny, names=[W.NAME2], options=options,
                               doc=__doc__, argv=argv)


if __name__ == "__main__":
    main()
