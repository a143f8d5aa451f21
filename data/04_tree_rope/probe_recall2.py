"""Round 6's diagnosis probe of chapter 04_tree_rope (``probe_recall2.json``, records only, no weights).
Registered (committed) before any of its runs started; only held-out accuracy and loss at the training length
(the validation curve) are recorded and read, never a longer length, never NoPE.

**Why.** Round 5 (``recall2``: two-key offset recall, d = 64, 6000 cosine steps) stopped at its probe seed: plain
RoPE reached 0.680 in-window (< 0.95). Its stored validation curve stalls near 0.44 from step ~450 to ~2050,
climbs to ~0.65 by step ~3000 and then stays there with a flat loss (plateau 0.003) while the learning rate
decays; TPE climbed the same kind of staircase to 1.00 (jump at ~3450), RoPE + skips jumped at ~2250, and round
4's probe (part B, the retrieval config at d = 64 x 4500 steps, seed 0) had RoPE jump to 1.00 at step ~3950.
Explanations: (seed) the stall is a draw of the initialisation and data order, other seeds learn at the same
recipe; (steps) a longer cosine schedule (more steps at a high learning rate) gets past it at the same seed.

**Runs** (``RUNS``; one gated job each: ``.venv/bin/python data/04_tree_rope/probe_recall2.py RUN``), RoPE only,
``tr.checkpoint_config("recall2")`` with only ``steps`` changed, trained exactly as ``make_recall.py`` trains an
arm (``tr.fit_retrieval_arm``, subnormals flushed as in round 5): ``s1``, ``s2``: seeds 1 and 2 at 6000 steps
(the same recipe; the same runs round 5's seeds 1-2 would have trained); ``s0x1.5``: seed 0 at 9000 steps; then,
if the session's share allows, ``opt0x1.5``: RoPE + OPT offsets, seed 0 at 9000 steps (round 5's only arm
that was still improving, plateau 0.119; recorded, it decides nothing).

**Learned** = final held-out accuracy >= 0.95 and plateau (``train.plateau`` of the val loss) <= 0.02, round 5's
bars. **Rule for round 6** (:func:`round6`; fixed here, before any run): (1) if RoPE learns at seed 0 at 9000
steps, round 6 is the recall2 config at 9000 steps (its claims' arms flat more often: RoPE + OPT was not at
6000); (2) else if RoPE learns at both seeds 1 and 2 at 6000 steps, round 6 is recall2 unchanged, the stall of
seed 0 a draw (seed 0's stored record is its seed 0, the claims inconclusive there by its conditions); (3)
otherwise no round-6 training: RoPE does not learn the two-key task reliably at d = 64 within 9000 cosine steps,
and the recipe (not the schedule length) is the next question. In (1) and (2) the seed-0 stop rule of round 5 is
dropped: every seed runs, each seed's conditions make the claims naming them inconclusive where they fail.
"""

from __future__ import annotations

import argparse
import copy
import json
import time
from pathlib import Path

from helpers import checkpoints, repro, train
from helpers import tree_rope as tr

HERE = Path(__file__).resolve()
OUT = HERE.parent / "probe_recall2.json"
RUNS = {"s1": ("RoPE", 1, 6000), "s2": ("RoPE", 2, 6000), "s0x1.5": ("RoPE", 0, 9000),
        "opt0x1.5": ("RoPE + OPT offsets", 0, 9000)}
BARS = dict(acc=0.95, plateau=0.02)


def learned(rec: dict | None) -> bool | None:
    """Round 5's bars on one record; None when the run is not recorded."""
    if rec is None:
        return None
    return rec["final_val_acc"] >= BARS["acc"] and rec["plateau"] <= BARS["plateau"]


def round6(records: dict) -> dict:
    """The registered rule (module docstring) on the records ``{run: record}``: ``steps`` for round 6 (None: no
    round-6 training) and which clause decided; ``decided=False`` while a run it needs is missing."""
    x15, s1, s2 = (learned(records.get(r)) for r in ("s0x1.5", "s1", "s2"))
    if x15:
        return dict(decided=True, clause=1, steps=9000)
    if x15 is None:
        return dict(decided=False, clause=None, steps=None)
    if s1 and s2:
        return dict(decided=True, clause=2, steps=6000)
    if s1 is None or s2 is None:
        return dict(decided=False, clause=None, steps=None)
    return dict(decided=True, clause=3, steps=None)


def run(name: str) -> dict:
    arm, seed, steps = RUNS[name]
    cfg = copy.deepcopy(tr.checkpoint_config("recall2"))
    cfg.update(steps=steps, seeds=[seed])
    val, _ = tr.retrieval_windows(cfg)  # the evaluation windows are never scored here
    source = checkpoints.source_hash([HERE, Path(tr.__file__).resolve(), Path(train.__file__).resolve()])
    t0 = time.time()
    with tr.flush_denormal(True):
        _, hist = tr.fit_retrieval_arm(cfg["arms"][arm], cfg, seed, val, desc=f"{name}: {arm} seed {seed}")
    loss = [v for _, v in hist.evals["val_loss"]]
    rec = dict(arm=arm, seed=seed, steps=steps, final_val_acc=hist.evals["val_acc"][-1][1], final_val_loss=loss[-1],
               plateau=train.plateau(loss), val_acc=hist.evals["val_acc"], val_loss=hist.evals["val_loss"],
               seconds=round(time.time() - t0, 1), source=source)
    rec["learned"] = learned(rec)
    print(f"{name}: {arm} seed {seed} {steps} steps: in-window acc {rec['final_val_acc']:.3f} plateau "
          f"{rec['plateau']:.4f} ({rec['seconds']} s)", flush=True)
    return rec


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", choices=list(RUNS))
    args = ap.parse_args()
    repro.set_threads(1)
    rec = run(args.run)
    out = json.loads(OUT.read_text()) if OUT.exists() else dict(records={})
    out["records"][args.run] = rec
    out["round6"] = round6(out["records"])
    out["source"] = rec["source"]  # the sources the latest run started with (each record keeps its own)
    OUT.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {OUT}; round 6: {out['round6']}", flush=True)


if __name__ == "__main__":
    main()
