"""Round 8's two-key offset-recall checkpoint ``recall4`` of chapter 04_tree_rope (records only, no weights):
``tr.checkpoint_config("recall4")`` = recall2 (two keys, d = 64, 6000 cosine steps) with the one change
(``tr.RECALL4_CHANGE``) that round 8's probe (``probe_recall4.py``) picked by its registered rule, the arms NoPE,
RoPE, RoPE + OPT offsets, TPE and TPE + OPT, and **one attempt per arm-seed, the one the claims read** (no
restarts). Each arm-seed is trained and evaluated exactly as ``make_recall.py`` trains and evaluates a recall2 arm
(``train_seed`` on that one arm: per-window correctness and loss at every length, the dilution control, the
query's attention; no weights kept), stored under ``<arm>/<seed>``; ``extra["chosen"]``: per arm-seed, its bars (final held-out accuracy >= 0.95, plateau <= 0.02)
and whether it meets them.

One job per arm-seed: ``.venv/bin/python data/04_tree_rope/make_recall4.py --seed S --arms "TPE + OPT" --parts
DIR`` (a finished arm-seed is kept in DIR and reused); then ``--merge --seeds 1 [0 2] --parts DIR`` (``--partial``:
arm-seeds not yet trained are marked pending). ``--tiny`` alone: every arm of a tiny config into temporary folders,
then the merge. One torch thread. Refuses to train while the probe's rule has not picked a change.

It does not call ``scripts.script_main`` itself: each arm-seed is trained by ``make_recall.py``'s ``train_seed``
(a script built on that skeleton), with this script's own per-arm parts and merge.
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import tempfile
from pathlib import Path

import torch

from helpers import checkpoints, repro, scripts, train
from helpers import tree_rope as tr

SLUG, NAME = "04_tree_rope", "recall4"
HERE = Path(__file__).resolve()
_spec = importlib.util.spec_from_file_location("_make_recall", HERE.parent / "make_recall.py")
MR = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(MR)
SOURCES = [HERE, HERE.parent / "make_recall.py", Path(tr.__file__).resolve(), Path(repro.__file__).resolve(),
           Path(train.__file__).resolve()]


def tiny_config() -> dict:
    cfg = MR.tiny_config("recall4")
    cfg.update(seeds=[1], d_model=8 * cfg["n_head"])  # TPE needs one rotary pair per level: head_dim >= 2 L
    return cfg


def part_dir(parts: Path, arm: str, s: int) -> Path:
    return parts / f"{arm.replace(' ', '_').replace('+', 'p')}_s{s}"


def arm_seed(cfg: dict, arm: str, s: int, parts: Path, val: dict, tests: dict, train_more: bool = True) -> dict | None:
    """The arm-seed's one attempt (trained, or read from ``parts``); None when not trained and ``train_more`` is
    False."""
    path = part_dir(parts, arm, s)
    if not train_more and not (path / f"seed{s}.pt").exists():
        return None
    one = dict(cfg, arms={arm: cfg["arms"][arm]})
    res, _ = scripts.seed_part(path, s, scripts.part_key(cfg, arm=arm), lambda: MR.train_seed(one, s, val, tests))
    res["tensors"] = {k: v for k, v in res["tensors"].items() if ".eval_" in k}  # records only
    res["metrics"] = {k: dict(m, attempt=0, weights_stored=False) for k, m in res["metrics"].items()}
    return res


def build(cfg: dict, args) -> Path | None:
    with tr.flush_denormal(True):  # as recall2 and recall3
        val, tests = tr.retrieval_windows(cfg)
        if not args.merge:
            for arm in args.arms:
                arm_seed(cfg, arm, args.seed, args.parts, val, tests)
            return None
        tensors, history, metrics, timing, chosen, pending = {}, {}, {}, {}, {}, []
        for s in cfg["seeds"]:
            for arm in cfg["arms"]:
                res = arm_seed(cfg, arm, s, args.parts, val, tests, train_more=False)
                key = f"{arm}/{s}"
                if res is None:
                    if not args.partial:
                        raise SystemExit(f"{key}: not trained in {args.parts}; run it first")
                    pending.append(key)
                    continue
                m = res["metrics"][key]
                chosen[key] = dict(final_val_acc=m["final_val_acc"], plateau=m["plateau"], record=NAME, key=key,
                                   attempt=0, meets_bars=tr.meets_bars(m, cfg))
                tensors.update(res["tensors"])
                history.update(res["history"])
                metrics.update(res["metrics"])
                timing.update(res["timing"])
        path = checkpoints.save(
            SLUG, NAME, tensors, config=cfg, metrics=metrics, history=history, seed=cfg["seeds"],
            steps=cfg["steps"], wall_seconds=sum(timing.values()), sources=SOURCES, module="helpers.tree_rope",
            extra=dict(seconds_per_run=timing, tiny=args.tiny, chosen=chosen, pending=pending), root=args.out,
            dtype=torch.float16, quantize="int8")
        print(f"wrote {path} ({path.with_suffix('.safetensors').stat().st_size / 2**10:.0f} kB)", flush=True)
        return path


def main(argv: list[str] | None = None) -> Path | None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=None, help="the seed of the arm-seeds to train")
    ap.add_argument("--arms", nargs="+", default=None, help="the arms to train (default: all)")
    ap.add_argument("--merge", action="store_true", help="merge the trained arm-seeds of --seeds into the checkpoint")
    ap.add_argument("--seeds", type=int, nargs="+", default=None, help="the seeds to merge")
    ap.add_argument("--partial", action="store_true", help="merge even where an arm-seed is not trained (pending)")
    ap.add_argument("--parts", type=Path, default=None,
                    help="the folder keeping each arm-seed (required; with --tiny alone: a temporary one)")
    ap.add_argument("--out", type=Path, default=None, help="data root to write into (default: the repository's)")
    ap.add_argument("--tiny", action="store_true")
    args = ap.parse_args(argv)
    repro.set_threads(1)
    cfg = copy.deepcopy(tiny_config() if args.tiny else tr.checkpoint_config(NAME))
    if not args.tiny and cfg["change"] is None:
        raise SystemExit("tr.RECALL4_CHANGE is None: round 8's probe rule has not picked a change (probe_recall4.py)")
    if args.tiny and args.out is None:
        args.out = Path(tempfile.mkdtemp())
    if args.parts is None:
        if not (args.tiny and args.seed is None and not args.merge):
            ap.error("--parts is required")
        args.parts, args.arms = Path(tempfile.mkdtemp()), list(cfg["arms"])
        for s in cfg["seeds"]:
            args.seed = s
            build(cfg, args)
        args.merge = True
    if args.merge:
        cfg["seeds"] = args.seeds or cfg["seeds"]
    else:
        if args.seed is None:
            ap.error("--seed is required without --merge")
        args.arms = args.arms or list(cfg["arms"])
        unknown = [a for a in args.arms if a not in cfg["arms"]]
        if unknown:
            ap.error(f"unknown arms {unknown}; the config's: {list(cfg['arms'])}")
    return build(cfg, args)


if __name__ == "__main__":
    main()
