"""Train the models of chapter 07_tree_cycle_pe that do not fit its 5-minute default run, one checkpoint per model
seed (``models_s0``, ``models_s1``, ``models_s2``), stored as float16 with the large matrices as int8
(:mod:`helpers.checkpoints`):

* the synthetic ring-count + ring-membership models (Transformer with sinusoidal, cycle-only and tree+cycle
  positions; GIN; GIN given the ring features as node inputs; width 32);
* the property models on MoleculeACE CHEMBL204 Ki, pKi >= 7 (Transformer with sinusoidal, tree+cycle, cycle-only
  and canonical-spanning-tree + cycle positions; Graphormer-lite; GIN; width 64), with the property task's own
  regime (``steps_prop``, ``lr_prop``; the training-sample ROC-AUC recorded along training);
* the structural-alert models ("contains the BRENK alert imine_1": sinusoidal, tree+cycle, cycle-only).

Each seed's randomized training strings are drawn from that seed; every model records its validation loss every
few steps (the validation-plateau condition). Run from the repository root:
``.venv/bin/python data/07_tree_cycle_pe/make_models.py --name models_s0`` trains everything of seed 0 in one job
(about 35 min on one core; ``make data NB=07_tree_cycle_pe`` does all three seeds). To keep jobs short, train parts
and merge them: ``--tasks prop --kinds sinusoidal tree_cycle --out DIR`` writes an unquantized part of the
checkpoint under DIR (a model's weights do not depend on which other models its job trains), and
``--merge DIR [DIR ...]`` writes the int8 checkpoint from the parts found there (into ``--out`` or ``data/``); a
model that no part holds is carried over unchanged from the existing checkpoint (``--carry-from``, default the
current one), provided the config keys that decide its training are the same (:data:`TASK_KEYS`); the manifest
lists what was carried. ``--tiny`` trains a tiny config (:func:`tiny`, seconds) into a temporary folder (what a
smoke test runs).
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
_DATA_KEYS = ["dataset", "n_prop", "n_synth", "n_aug", "val_frac", "batch_size", "seeds", "sin_scale", "pe_gain"]
# the config keys that decide how a task's models were trained (a carried model must agree on all of them)
TASK_KEYS = {
    "synth": _DATA_KEYS + ["steps_synth", "lr", "eval_every", "width_synth", "synth_kinds"],
    "prop": _DATA_KEYS + ["steps_prop", "lr_prop", "eval_every_prop", "width", "prop_kinds"],
    "alert": _DATA_KEYS + ["steps_alert", "lr", "eval_every", "width", "alert", "alert_kinds"],
}


def _metrics(hists: dict, cpu: dict) -> dict:
    out = {}
    for tag, h in sorted(hists.items()):
        out[tag] = dict(final_loss=float(np.mean(h.loss[-20:])), cpu_seconds=round(cpu[tag], 1),
                        final_val_loss=h.evals["val_loss"][-1][1])
        if "fit_auc" in h.evals:
            out[tag]["final_fit_auc"] = h.evals["fit_auc"][-1][1]
    return out


def make_models(cfg: dict, root: Path | None, workers: int = 1, tasks: list[str] | None = None,
                kinds: list[str] | None = None) -> Path:
    part = tasks is not None or kinds is not None
    if part and root is None:
        raise SystemExit("--tasks/--kinds train a part of a checkpoint: give --out DIR, then --merge DIR")
    t0 = time.time()
    data = tc.prepare(cfg)
    print(f"data ready in {time.time() - t0:.0f} s; vocabulary {len(data['vocab'])}", flush=True)
    states, hists, cpu = tc.train_all(cfg, data, workers=workers, log=lambda m: print(m, flush=True),
                                      tasks=tasks, kinds=kinds)
    flat = {f"{tag}.{k}": v for tag, sd in sorted(states.items()) for k, v in sd.items()}
    name = f"models_s{cfg['seeds'][0]}"
    kw = dict(config=cfg, metrics=_metrics(hists, cpu), history=dict(sorted(hists.items())),
              seed=list(cfg["seeds"]), steps=cfg["steps_prop"], wall_seconds=time.time() - t0, sources=SOURCES,
              module="helpers.tree_cycle_pe", root=root)
    if part:  # float32, unquantized: quantized once, at the merge
        return checkpoints.save(SLUG, name, flat, extra={"part": sorted(states)}, **kw)
    return checkpoints.save(SLUG, name, flat, dtype=torch.float16, quantize="int8", **kw)


def _no_kinds(cfg: dict) -> dict:
    return {k: v for k, v in cfg.items() if not k.endswith("_kinds")}


def merge(cfg: dict, root: Path | None, dirs: list[Path], carry_from: Path | None = None) -> Path:
    """The int8 checkpoint of ``cfg``'s seed from the parts under ``dirs`` (plus carried models)."""
    name = f"models_s{cfg['seeds'][0]}"
    want = {tc.tag_of(*j) for j in tc.jobs_of(cfg)}
    tensors, metrics, history, parts = {}, {}, {}, {}
    for d in dirs:  # a later part wins where two hold the same model
        if not checkpoints.paths(SLUG, name, d)[1].is_file():
            continue
        # a part must have this config; its lists of kinds may differ (they pick models, not how one trains)
        part_cfg = checkpoints.load_manifest(SLUG, name, d)["config"]
        diff = checkpoints.diff_config(_no_kinds(cfg), _no_kinds(part_cfg))
        if diff:
            raise SystemExit(f"{name}: the part under {d} was trained with other {diff}")
        ck = checkpoints.load(SLUG, name, config=part_cfg, root=d)
        tags = [t for t in ck.manifest["extra"]["part"] if t in want]
        for k, v in ck.tensors.items():
            if k.split(".")[0] in tags:
                tensors[k] = v.to(torch.float16) if v.is_floating_point() else v
        metrics.update({t: ck.manifest["metrics"][t] for t in tags})
        history.update({k: v for k, v in ck.manifest["history"].items() if k.split("/")[0] in tags})
        parts[str(d)] = dict(tags=tags, wall_seconds=ck.manifest["wall_seconds"])
    missing = sorted(want - set(metrics))
    carried = {}
    if missing:
        old = checkpoints.load_manifest(SLUG, name, carry_from)
        for task in sorted({t.split("-")[0] for t in missing}):
            diff = [k for k in TASK_KEYS[task] if old["config"].get(k) != cfg.get(k)]
            if diff:
                raise SystemExit(f"{name}: {task} models are in no part and the checkpoint to carry them from "
                                 f"was trained with other {diff}; train them (--tasks {task})")
        ck = checkpoints.load(SLUG, name, config=old["config"], root=carry_from, check_sources=False)
        for tag in missing:
            keys = [k for k in ck.tensors if k.startswith(tag + ".")]
            if not keys:
                raise SystemExit(f"{name}: no part and no existing checkpoint holds model {tag}")
            tensors.update({k: ck.tensors[k] for k in keys})  # int8 weights come back exactly at the merge
            metrics[tag] = old["metrics"][tag]
            history.update({k: v for k, v in old["history"].items() if k.split("/")[0] == tag})
        carried = dict(tags=missing, weights_sha256=old["weights"]["sha256"], source=old["source"],
                       why="trained in an earlier round with the same config keys for their task (TASK_KEYS)")
    if set(metrics) != want:
        raise SystemExit(f"{name}: parts hold models {sorted(set(metrics) - want)} that cfg does not train")
    print(f"{name}: {len(want) - len(carried.get('tags', []))} models from parts, {len(carried.get('tags', []))} "
          "carried", flush=True)
    return checkpoints.save(SLUG, name, tensors, config=cfg, metrics=metrics, history=history,
                            seed=list(cfg["seeds"]), steps=cfg["steps_prop"],
                            wall_seconds=sum(p["wall_seconds"] for p in parts.values()), sources=SOURCES,
                            module="helpers.tree_cycle_pe", quantize="int8", root=root,
                            extra={"merged_parts": parts, "carried": carried})


def main(argv: list[str] | None = None) -> list[Path]:
    def options(ap: argparse.ArgumentParser) -> None:
        ap.add_argument("--workers", type=int, default=1, help="processes (one torch thread each)")
        ap.add_argument("--tasks", nargs="+", choices=tc.TASKS, default=None, help="train these tasks only (a part)")
        ap.add_argument("--kinds", nargs="+", choices=tc.SEQ_KINDS + tc.GRAPH_KINDS, default=None,
                        help="train these model kinds only (a part)")
        ap.add_argument("--merge", nargs="+", type=Path, default=None, metavar="DIR",
                        help="merge the parts under these data roots into the checkpoint (no training)")
        ap.add_argument("--carry-from", type=Path, default=None, metavar="DIR",
                        help="data root of the checkpoint whose models no part holds (default: data/)")

    def build(cfg: dict, out: Path | None, args: argparse.Namespace) -> Path:
        if args.merge:
            return merge(cfg, out, args.merge, args.carry_from)
        return make_models(cfg, out, workers=args.workers, tasks=args.tasks, kinds=args.kinds)

    return scripts.script_main(build, config=lambda name: tc.checkpoint_config(name), tiny=tiny,
                               names=list(tc.MODEL_NAMES), options=options, doc=__doc__, argv=argv)


def tiny(name: str) -> dict:
    """The script's own tiny config (seconds): the chapter's quick config (what its quick mode trains live) cut to
    fewer molecules, 4 steps and one sequence and one graph model per task, every task kept."""
    cfg = tc.checkpoint_config(name, quick=True, seed=int(name[8:]))
    cfg.update(n_synth=40, n_prop=60, steps_synth=4, steps_prop=4, steps_alert=4, eval_every=2, eval_every_prop=2,
               synth_kinds=["tree_cycle", "gin"], prop_kinds=["tree_cycle", "gin"], alert_kinds=["tree_cycle"])
    return cfg


if __name__ == "__main__":
    main()
