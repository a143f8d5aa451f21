"""Round 7 of chapter 07_tree_cycle_pe (issue #65): recipes A (``fresh``) and B (``freshreg``) and the seed-0
probe of B. Registered on 2026-12-07, BEFORE any of their models was trained (:func:`helpers.tree_cycle_pe.
fresh_config`, :func:`~helpers.tree_cycle_pe.fresh_probe_reading`, :func:`~helpers.tree_cycle_pe.uses_positions`);
the conditions and their bars are the wsd recipe's, unchanged (:func:`~helpers.tree_cycle_pe.recipe_conditions`:
on the stable phase, steps <= 8,000 of 10,000, ``flat`` <= 0.05, ``val_flat`` <= 0.02, ``fits`` >= 0.95), and
so is every claim's verdict logic.

Why (round 6's cold review, commit 6d74824): most verdicts are inconclusive because ``flat`` fails (the stored
wsd property models' training loss still falls on the stable phase at constant learning rate while their
validation loss is flat), and the augmented sinusoidal comparator is position-blind (trained |PE|/|token| 0.11;
removing its positions at test time moves its test ROC-AUC by 0.001). The review proposed A:

* ``fresh``: where a randomized string is drawn (the same draws as the wsd recipe: the canonical string one
  visit in six), a new randomized SMILES is written for that visit instead of one of the five fixed ones, so no
  training string is seen twice (featurized by :func:`~helpers.tree_cycle_pe.refeaturize`, which takes the
  graph invariants from the canonical string's features: equal to ``featurize``, checked on one fresh string of
  every training molecule before training, and 1.7x faster);
* ``sin_gain``: the sinusoidal table is multiplied by a learned per-dimension gain (starting at the fixed
  ``SIN_SCALE`` of the wsd models), as the tree+cycle term has its LayerNorm's learned per-dimension gain, so the
  comparator can grow its positions when they help.

Checked before registering, by an evaluation of the stored seed-0 wsd models (no training; /tmp script, numbers
in the registering commit): mean BCE on 600 training molecules, on their six training strings vs on five fresh
randomized strings (validation molecules, canonical, beside): sinusoidal 0.196 vs 0.201 (0.503), cycle-only
0.231 vs 0.231 (0.452), tree+cycle 0.154 vs 0.211 (0.466). The augmented models memorise the MOLECULES, not their
strings (tree+cycle a little of both: its tree part is string-dependent), and cycle-only, which memorises no
string at all, fails ``flat`` at seeds 1-2 (0.060, 0.095), GIN (no string) at every seed (0.099 / 0.127 /
0.162). Fresh strings alone cannot remove what keeps the training loss falling, so A is not probed; the probe
is B, which adds what acts on memorising the molecules:

* B (``freshreg``) = A + dropout 0.1 in every trained model (Transformer blocks; GIN's node states) + AdamW
  weight decay 0.05 (A, wsd: 0.0 and 0.01). GIN, which B changes, is one of its arms.

Every model also keeps its weights every 2,000 steps (300 for the alert models) and at the end
(``snapshot_every``), written beside its checkpoint as ``<name>_snapshots.safetensors`` (float16); at each
snapshot the script records, on the validation molecules' canonical strings, the ROC-AUC as trained and, for a
sequence model, the ROC-AUC with the positional term removed (``uses_positions``: a drop >= 0.01; recorded, gates
no claim) and |PE|/|token| (:func:`~helpers.tree_cycle_pe.pe_token_ratio`). Weights are never written into
``data/`` by this script (the 50 MiB cap): ``--out`` must lie outside it; a full round's final checkpoints are
copied in afterwards.

The probe and its rule (registered now): seed 0, recipe B, arms trained in this order in one process (the data
prepared once): ``freshreg_s0_prop_gin`` (4 min; it fails ``flat`` at every seed under wsd), then
``freshreg_s0_prop_sinusoidal``, then ``freshreg_s0_prop_tree_cycle``; ``--stop-on-fail`` trains no further arm
once one misses a condition (the rule is then decided: B not met)::

    .venv/bin/python data/07_tree_cycle_pe/make_fresh.py --stop-on-fail --out /tmp/07_fresh
    .venv/bin/python data/07_tree_cycle_pe/make_fresh.py --summary freshreg --out /tmp/07_fresh

``--summary R`` reads the probe's checkpoints from ``--out`` and writes the record ``probe_<R>.json`` (no
weights) into this folder with the reading: every probed arm meets ``flat``, ``val_flat`` and ``fits`` -> train
B's families (:data:`~helpers.tree_cycle_pe.FRESH_FAMILIES`) at seeds 0-2; else no further retraining under
these conditions (the claims stay inconclusive where a condition fails). A probe is one seed: no claim is read
from it. ``--timing N`` trains ``min(N, steps)`` steps (schedule scaled, config marked ``timing``) into an
``--out`` outside ``data/``: a cost estimate, never a result. ``--tiny``: the quick config, into a temporary
folder (the smoke test).

Cost, measured before the probe: see the registering commit.

Added after the probe's first arm, BEFORE any sequence model of B was trained (disclosed: registered after GIN
missed ``flat``, 0.127, and the rule read B not met): B's rule lumped GIN with the sequence arms, while each claim
is gated per model (``given=``), so a claim between sequence models does not need GIN's conditions. The sinusoidal
arm of B is trained anyway, as information for the next round; it cannot change B's registered reading (not
met). Its own reading, :func:`sequence_reading`: if ``freshreg_s0_prop_sinusoidal`` meets ``flat``, ``val_flat``
and ``fits``, the next step is ``freshreg_s0_prop_tree_cycle``, and if that meets them too, B's sequence families
(``prop_sinusoidal``, ``prop_sinusoidal_canon``, ``prop_tree_cycle``, ``prop_cycle``, ``alert``) at seeds 0-2
with GIN, Graphormer-lite and ECFP kept at wsd (the claims naming GIN stay inconclusive through its conditions);
if a sequence arm misses a condition, B does not fit the sequence models either (no further retraining under
these conditions). Whether the learned gain makes the comparator use its positions is recorded per snapshot::

    .venv/bin/python data/07_tree_cycle_pe/make_fresh.py --name freshreg_s0_prop_sinusoidal --out /tmp/07_fresh
    .venv/bin/python data/07_tree_cycle_pe/make_fresh.py --summary freshreg --out /tmp/07_fresh

(the record then holds every trained arm; its ``reading`` stays B's, ``sequence_reading(record)`` gives this one).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

from helpers import checkpoints, repro, scripts, train
from helpers import tree_cycle_pe as tc

SLUG = "07_tree_cycle_pe"
HERE = Path(__file__).resolve()
DATA_ROOT = HERE.parents[1]
SOURCES = [HERE, Path(tc.__file__).resolve(), Path(repro.__file__).resolve(), Path(train.__file__).resolve()]
_DATA: dict = {}
_FAILED: list = []  # checkpoints built by this process whose model missed a condition (for --stop-on-fail)


def _data(cfg: dict) -> dict:
    key = repr(sorted((k, v) for k, v in cfg.items() if k in ("dataset", "n_prop", "n_synth", "n_aug", "val_frac",
                                                               "alert", "seeds")))
    if key not in _DATA:
        t0 = time.time()
        _DATA.clear()
        _DATA[key] = tc.prepare(cfg)
        _DATA[key]["seconds"] = time.time() - t0
        print(f"data ready in {_DATA[key]['seconds']:.0f} s", flush=True)
    return _DATA[key]


def timing_config(cfg: dict, n: int) -> dict:
    """``cfg`` cut to ``min(n, steps)`` steps (warm-up, decay and snapshots scaled alike), marked ``timing``."""
    steps = min(n, cfg["steps"])
    scale = steps / cfg["steps"]
    every = max(cfg["eval_every"], round(cfg["snapshot_every"] * scale / cfg["eval_every"]) * cfg["eval_every"])
    return dict(cfg, steps=steps, warmup=round(cfg["warmup"] * scale),
                decay_steps=max(1, round(cfg["decay_steps"] * scale)), snapshot_every=every, timing=n)


@contextlib.contextmanager
def no_positions(model: torch.nn.Module):
    """``model`` (a :class:`~helpers.tree_cycle_pe.SeqEncoder`) with its positional term removed."""
    model.positional = lambda batch, parts=None: torch.zeros(())
    try:
        yield model
    finally:
        del model.positional


def snapshot_measures(model: torch.nn.Module, items: list, y: np.ndarray, vocab: tc.Vocab) -> dict:
    """Validation ROC-AUC as trained and, for a sequence model, without its positions, and |PE|/|token|."""
    out = dict(val_auc=tc.roc_auc(model, items, y, vocab))
    if isinstance(model, tc.SeqEncoder):
        with no_positions(model):
            out["val_auc_no_pos"] = tc.roc_auc(model, items, y, vocab)
        out["uses_positions"] = tc.uses_positions(out["val_auc"], out["val_auc_no_pos"])
        out["pe_token_ratio"] = tc.pe_token_ratio(model, tc.collate(items[:256]))
    return out


def check_refeaturize(d: dict, seed: int) -> int:
    """Refuse to train when :func:`~helpers.tree_cycle_pe.refeaturize` differs from ``featurize`` on one fresh
    randomized string of any training molecule; returns how many were checked."""
    feats, vocab = d["prop_feats"], d["vocab"]
    for m in d["prop_tr"]:
        base = feats[m][0]
        s = tc.random_smiles(base.smiles, 1, seed=int(1_000_003 * (seed + 1) + m) % (2**31 - 2))[0]
        a, b = tc.featurize(s, vocab), tc.refeaturize(s, base, vocab)
        for key in ("token_ids", "token_atom", "tree", "cycle", "edges", "degree", "spd", "in_ring", "ring_id",
                    "ctree"):
            if not np.array_equal(getattr(a, key), getattr(b, key)):
                raise SystemExit(f"refeaturize differs from featurize on {s!r} ({key}): not training")
    return len(d["prop_tr"])


def _train(cfg: dict, d: dict) -> tuple[dict, dict, dict, dict]:
    seed, task = cfg["seeds"][0], cfg["task"]
    if cfg["fresh"] and any(k not in tc.GRAPH_KINDS for k in cfg["kinds"]) and not d.get("refeaturize_checked"):
        t0 = time.time()
        d["refeaturize_checked"] = check_refeaturize(d, seed)
        print(f"refeaturize == featurize on {d['refeaturize_checked']} fresh strings ({time.time() - t0:.0f} s)",
              flush=True)
    y = {"prop": d["prop_y"], "alert": d["alert_y"]}[task]
    feats, idx, val = d["prop_feats"], d["prop_tr"], d["prop_val"]
    until = tc.recipe_until(cfg)
    val_items, val_y = [feats[m][0] for m in val], y[torch.as_tensor(val)].numpy()
    tensors, metrics, hists, snaps_out = {}, {}, {}, {}
    for kind in cfg["kinds"]:
        tag = f"{task}-{kind}{'' if cfg['augment'] else '_canon'}-s{seed}"
        snaps: dict = {}
        t0, c0 = time.time(), time.process_time()
        model, hist = tc.fit_model(kind, feats, idx, y, d["vocab"], steps=cfg["steps"], seed=seed,
                                   batch_size=cfg["batch_size"], lr=cfg["lr"], width=cfg["width"],
                                   weight_decay=cfg["weight_decay"], val_idx=val, eval_every=cfg["eval_every"],
                                   auc_idx=tc.fit_sample(idx), schedule="wsd", warmup=cfg["warmup"],
                                   decay_steps=cfg["decay_steps"], augment=cfg["augment"], fresh=cfg["fresh"],
                                   sin_gain=cfg["sin_gain"], dropout=cfg["dropout"],
                                   snapshot_every=cfg["snapshot_every"], snapshots=snaps,
                                   progress=sys.stderr.isatty(), desc=tag)
        wall, cpu = time.time() - t0, time.process_time() - c0
        cond = tc.recipe_conditions(hist.loss, hist.evals["val_loss"], hist.evals["fit_auc"], until=until)
        probe = tc.make_model(kind, len(d["vocab"]), seed=seed, width=cfg["width"], sin_gain=cfg["sin_gain"],
                              dropout=cfg["dropout"])
        per_step = []
        for step, sd in sorted(snaps.items()):
            probe.load_state_dict(sd)
            per_step.append(dict(step=step, **snapshot_measures(probe.eval(), val_items, val_y, d["vocab"])))
            snaps_out.update({f"{tag}.step{step}.{k}": v for k, v in sd.items()})
        tensors.update({f"{tag}.{k}": v for k, v in model.state_dict().items()})
        hists[tag] = hist
        metrics[tag] = dict(final_loss=float(np.mean(hist.loss[-20:])), final_val_loss=hist.evals["val_loss"][-1][1],
                            final_fit_auc=hist.evals["fit_auc"][-1][1], final_val_auc=hist.evals["val_auc"][-1][1],
                            wall_seconds=round(wall, 1), cpu_seconds=round(cpu, 1),
                            seconds_per_step=round(wall / cfg["steps"], 4), conditions=cond, snapshots=per_step)
        print(f"{tag}: {cfg['steps']} steps in {wall:.0f} s ({wall / cfg['steps']:.3f} s/step); "
              + ", ".join(f"{k} {c['value']:.3f} {'met' if c['met'] else 'NOT met'}" for k, c in cond.items())
              + "; " + "; ".join(f"step {s['step']}: val AUC {s['val_auc']:.3f}"
                                 + (f" (no positions {s['val_auc_no_pos']:.3f}, |PE|/|tok| {s['pe_token_ratio']:.2f})"
                                    if "val_auc_no_pos" in s else "") for s in per_step), flush=True)
    return tensors, metrics, hists, snaps_out


def _outside_data(out: Path | None) -> bool:
    return out is not None and not Path(out).resolve().is_relative_to(DATA_ROOT.resolve())


def build(cfg: dict, out: Path | None, args: argparse.Namespace) -> list[Path]:
    """One round-7 checkpoint ``<recipe>_s<seed>_<family>`` of ``cfg`` (and its snapshots) under ``out``."""
    if not _outside_data(out):
        raise SystemExit("make_fresh.py writes weights outside data/ only (the size cap): give --out elsewhere")
    if args.stop_on_fail and _FAILED:
        print(f"{args.name}: not trained ({', '.join(_FAILED)} missed a condition; --stop-on-fail)", flush=True)
        return []
    if args.timing:
        cfg = timing_config(cfg, args.timing)
    t0 = time.time()
    d = _data(cfg)
    tensors, metrics, hists, snaps = _train(cfg, d)
    snap_path = Path(out) / SLUG / f"{args.name}_snapshots.safetensors"
    snap_path.parent.mkdir(parents=True, exist_ok=True)
    from safetensors.torch import save_file

    save_file({k: v.to(torch.float16).contiguous() for k, v in snaps.items()}, str(snap_path))
    if not all(c["met"] for m in metrics.values() for c in m["conditions"].values()):
        _FAILED.append(args.name)
    path = checkpoints.save(SLUG, args.name, tensors, history=dict(sorted(hists.items())), dtype=torch.float16,
                            quantize="int8", config=cfg, metrics=metrics, seed=list(cfg["seeds"]),
                            steps=cfg["steps"], wall_seconds=time.time() - t0, sources=SOURCES,
                            module="helpers.tree_cycle_pe", root=out,
                            extra=dict(registered=tc.FRESH_REGISTERED, data_seconds=round(d["seconds"], 1),
                                       snapshots=dict(file=snap_path.name,
                                                      sha256=checkpoints.sha256_file(snap_path))))
    return [path, snap_path]


def summary(recipe: str, out: Path, record: Path | None = None, config=tc.fresh_config, wsd_root=None) -> Path:
    """The probe record ``probe_<recipe>.json`` (no weights) from the probe's checkpoints under ``out``; each must
    have been built with ``config(name)`` (the registered one; tests pass the tiny one)."""
    names = [n for n in tc.FRESH_PROBE[recipe] if checkpoints.paths(SLUG, n, out)[1].exists()]
    arms, conditions = {}, {}
    for name in names:
        family = name.split("_", 2)[2]
        man = checkpoints.load_manifest(SLUG, name, out)
        if checkpoints.diff_config(config(name), man["config"]):
            raise SystemExit(f"{name} under {out} was not built with the registered config (a --timing run?)")
        (tag, m), = man["metrics"].items()
        stored = checkpoints.load_manifest(SLUG, f"wsd_s0_{family}", wsd_root)
        (_, ms), = stored["metrics"].items()
        conditions[family] = m["conditions"]
        arms[family] = dict(tag=tag, conditions=m["conditions"], snapshots=m["snapshots"],
                            final=dict((k, m[k]) for k in ("final_loss", "final_val_loss", "final_fit_auc",
                                                           "final_val_auc", "wall_seconds", "seconds_per_step")),
                            weights_sha256=man["weights"]["sha256"], snapshots_sha256=man["extra"]["snapshots"],
                            wsd_beside=dict(conditions=ms["conditions"], final_val_auc=ms["final_val_auc"]),
                            loss=man["history"][f"{tag}/loss"], val_loss=man["history"][f"{tag}/val_loss"],
                            val_auc=man["history"][f"{tag}/val_auc"])
    reading = tc.fresh_probe_reading(conditions, recipe)
    rec = dict(what=f"round 7 probe of recipe {recipe!r} (seed 0; registered {tc.FRESH_REGISTERED} before "
                    f"training): conditions of each probed arm, weights' measurements every snapshot, the "
                    f"reading by tc.fresh_probe_reading; one seed, no claim is read from it",
               recipe=recipe, config={n: config(n) for n in names}, arms=arms, reading=reading,
               source=checkpoints.source_hash(SOURCES))
    path = record or HERE.parent / f"probe_{recipe}.json"
    path.write_text(json.dumps(rec, indent=1, default=checkpoints._json_default) + "\n")
    print(f"{path}: met={reading['met']} failing={reading['failing']} -> {reading['next']}")
    return path


SEQUENCE_ARMS = ("prop_sinusoidal", "prop_tree_cycle")


def sequence_reading(record: dict) -> dict:
    """The reading of B's sequence arms, registered after GIN's arm and before them (docstring): ``{"met",
    "failing", "not_trained", "next"}``; ``met`` None while an arm is untrained and every trained one meets the
    three conditions."""
    arms = record["arms"]
    failing = {a: [k for k in tc.RECIPE_BARS if not arms[a]["conditions"][k]["met"]]
               for a in SEQUENCE_ARMS if a in arms}
    failing = {a: v for a, v in failing.items() if v}
    not_trained = [a for a in SEQUENCE_ARMS if a not in arms]
    if failing:
        return dict(met=False, failing=failing, not_trained=not_trained,
                    next="B does not fit the sequence models either: no further retraining under these conditions")
    if not_trained:
        return dict(met=None, failing={}, not_trained=not_trained,
                    next=f"train {', '.join(f'freshreg_s0_{a}' for a in not_trained)}")
    return dict(met=True, failing={}, not_trained=[],
                next="train B's sequence families at seeds 0-2 (GIN, Graphormer-lite, ECFP kept at wsd)")


def main(argv: list[str] | None = None) -> list:
    argv = list(sys.argv[1:] if argv is None else argv)
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--summary", choices=tuple(tc.FRESH_RECIPES), default=None)
    known, _ = pre.parse_known_args(argv)
    if known.summary:  # the skeleton's --out, read here without redefining the skeleton's flag
        at = [i for i, a in enumerate(argv) if a == "--out" or a.startswith("--out=")]
        if not at or (argv[at[-1]] == "--out" and at[-1] + 1 >= len(argv)):
            raise SystemExit("--summary reads the probe's checkpoints from --out")
        out = argv[at[-1]].partition("=")[2] or argv[at[-1] + 1]
        return [summary(known.summary, Path(out))]

    def options(ap: argparse.ArgumentParser) -> None:
        ap.add_argument("--timing", type=int, default=0, metavar="N",
                        help="a cost estimate: min(N, steps) steps, into an --out outside data/")
        ap.add_argument("--summary", choices=tuple(tc.FRESH_RECIPES), default=None,
                        help="write probe_<recipe>.json from the probe's checkpoints under --out")
        ap.add_argument("--stop-on-fail", action="store_true",
                        help="a probe: train no further checkpoint once one missed a condition")

    return scripts.script_main(build, config=tc.fresh_config,
                               tiny=lambda name: tc.fresh_config(name, quick=True,
                                                                 seed=int(name.split("_")[1][1:])),
                               names=list(tc.FRESH_NAMES), default_names=list(tc.FRESH_PROBE["freshreg"]),
                               options=options, doc=__doc__, argv=argv)


if __name__ == "__main__":
    main()
