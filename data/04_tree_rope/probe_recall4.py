"""Round 8's recipe probe of chapter 04_tree_rope (``probe_recall4.json``, records only, no weights). Registered
(committed) with round 8's design (``tr._recall4_config``) before any of its runs; only held-out accuracy and loss
at the training length are recorded and read.

**Why** (``tr._recall4_config``): at recall2's recipe the TPE arms' stalls are circuits a 2-head layer did not
form (carry: misses only where the answer crosses a carry of the lowest digit; first key: the query ignored;
none: chance). Candidates (``tr.RECALL4_CHANGES``): ``H4`` (4 heads of 16 instead of 2 of 32) and ``WD`` (AdamW
weight decay 0.1), each alone.

**Runs** (``RUNS``; one gated job runs them in turn: ``.venv/bin/python data/04_tree_rope/probe_recall4.py``,
or a subset by name): each candidate on the two worst attempts of round 7, TPE and TPE + OPT at seed 1, attempt 2
(model built under seed 2001, batches and ids of seed 1; round 7 ended them at 0.145 and 0.230, at chance until
step ~1500), trained as ``make_recall3.py`` trained them (6000-step cosine schedule, subnormals flushed) with
the candidate's change, and **stopped after ``PROBE_STEPS`` = 1500 steps** (the same schedule, cut: ~7 CPU min for
the four runs, where four full runs cost ~28). Recorded beside the curves (decide nothing): accuracy at step 1500
on the held-out windows whose key sits at p mod 8 = 7 (the carry) and elsewhere, and on the windows asking the
later / the earlier of the two keys.

**Rule** (:func:`round8`, fixed before any run): a candidate qualifies when at both runs its held-out accuracy at
step 1500 exceeds round 7's stored curve of the same attempt at step 1500 (``recall3.json``) by >= 0.3 (learning
has started where the baseline was at chance). Round 8's change is the qualifying candidate with the highest mean
accuracy at step 1500 (within 0.05 of each other: the first of ``H4``, ``WD``); with none, round 8 has no
supported change and ``recall4`` is not trained (the round reports the probe).
"""

from __future__ import annotations

import argparse
import copy
import json
import time
from pathlib import Path

import numpy as np
import torch

from helpers import checkpoints, repro, train
from helpers import tree_rope as tr

HERE = Path(__file__).resolve()
OUT = HERE.parent / "probe_recall4.json"
PROBE_STEPS = 1500
SEED, ATTEMPT = 1, 2  # round 7's worst attempts of the TPE arms (recall3.json "<arm>/1/r2")
RUNS = {f"{c.lower()}_{a.lower().replace(' + ', '_')}": (c, a) for c in tr.RECALL4_CHANGES for a in ("TPE", "TPE + OPT")}
LIFT, TIE = 0.3, 0.05


def baseline(arm: str, step: int = PROBE_STEPS, root: Path | None = None) -> float:
    """Round 7's stored held-out accuracy of ``<arm>/1/r2`` at ``step`` (recall3.json)."""
    man = json.loads(((root or HERE.parent) / "recall3.json").read_text())
    h = man["history"][f"{arm}/{SEED}/r{ATTEMPT}/val_acc"]
    return float(h["value"][h["step"].index(step)])


def round8(records: dict) -> dict:
    """The registered rule on ``{run: record}`` (records carry ``change``, ``acc_at_probe`` and ``baseline``):
    ``{"decided", "change" (a candidate or None), "qualifies": {candidate: bool}, "mean_acc": {...}}``."""
    if any(r not in records for r in RUNS):
        return dict(decided=False, change=None, qualifies={}, mean_acc={})
    qual, mean = {}, {}
    for c in tr.RECALL4_CHANGES:
        recs = [records[r] for r, (cc, _) in RUNS.items() if cc == c]
        qual[c] = all(r["acc_at_probe"] - r["baseline"] >= LIFT for r in recs)
        mean[c] = float(np.mean([r["acc_at_probe"] for r in recs]))
    ok = [c for c in tr.RECALL4_CHANGES if qual[c]]
    if not ok:
        return dict(decided=True, change=None, qualifies=qual, mean_acc=mean)
    best = max(mean[c] for c in ok)
    return dict(decided=True, change=next(c for c in ok if mean[c] >= best - TIE), qualifies=qual, mean_acc=mean)


class _Stop(Exception):
    pass


def split_scores(model: torch.nn.Module, val: dict, B: int = 8) -> dict:
    """Held-out accuracy on the windows whose key sits at p mod B = B - 1 (the answer across a carry) and elsewhere;
    on the windows asking the later / the earlier of the two keys."""
    hit = tr.retrieval_scores(model, val, chunk=64)[0][:, 0].numpy()
    kp = val["key_pos"][:, 0].numpy()
    return dict(carry=float(hit[kp % B == B - 1].mean()), no_carry=float(hit[kp % B != B - 1].mean()),
                n_carry=int((kp % B == B - 1).sum()), hit=hit)


def run(name: str, probe_steps: int = PROBE_STEPS) -> dict:
    change, arm = RUNS[name]
    cfg = copy.deepcopy(tr.recall4_config(change))
    spec = cfg["arms"][arm]
    val, _ = tr.retrieval_windows(cfg)  # the evaluation windows are never scored here
    keys = (val["tokens"] >= cfg["task"]["n_values"]) & (val["tokens"] < cfg["task"]["n_values"] + cfg["task"]["n_keys"])
    keys[:, -2:] = False
    later = np.array([int(val["key_pos"][w, 0]) == int(torch.nonzero(keys[w]).max()) for w in range(len(keys))])
    hist, calls = train.History(), [0]

    def metrics(model):
        out = tr._val_metrics(model, val)
        calls[0] += 1
        if calls[0] * cfg["val_every"] >= probe_steps:
            hist.evals.setdefault("val_acc", []).append((probe_steps, out["val_acc"]))
            hist.evals.setdefault("val_loss", []).append((probe_steps, out["val_loss"]))
            raise _Stop
        return out

    source = checkpoints.source_hash([HERE, Path(tr.__file__).resolve(), Path(train.__file__).resolve()])
    t0 = time.time()
    with tr.flush_denormal(True):  # as make_recall3 (tr.fit_retrieval_arm with init_seed)
        with repro.seeded(1000 * ATTEMPT + SEED):
            model = tr.make_model(spec, cfg)
        with repro.seeded(SEED):
            try:
                train.fit(model, tr.retrieval_loss, tr.retrieval_batch_fn(spec, cfg, SEED), cfg["steps"], lr=cfg["lr"],
                          warmup=cfg["warmup"], weight_decay=cfg["weight_decay"], seed=SEED, eval_fn=metrics,
                          eval_every=cfg["val_every"], desc=f"{name}", history=hist)
                raise RuntimeError(f"the run ended before step {probe_steps}")
            except _Stop:
                pass
        sp = split_scores(model, val)
    secs = time.time() - t0
    hit = sp.pop("hit")
    rec = dict(change=change, arm=arm, seed=SEED, attempt=ATTEMPT, init_seed=1000 * ATTEMPT + SEED,
               steps_of_schedule=cfg["steps"], probe_steps=probe_steps, acc_at_probe=hist.evals["val_acc"][-1][1],
               baseline=baseline(arm, probe_steps) if probe_steps == PROBE_STEPS else None,
               **sp, later_key=float(hit[later].mean()), earlier_key=float(hit[~later].mean()),
               val_acc=hist.evals["val_acc"], val_loss=hist.evals["val_loss"], seconds=round(secs, 1),
               seconds_per_step=round(secs / probe_steps, 4), source=source)
    print(f"{name}: {change} {arm}: acc at {probe_steps} {rec['acc_at_probe']:.3f} (round 7: {rec['baseline']}); "
          f"carry {rec['carry']:.2f} / else {rec['no_carry']:.2f}; later key {rec['later_key']:.2f} / earlier "
          f"{rec['earlier_key']:.2f} ({rec['seconds']} s)", flush=True)
    return rec


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="*", help=f"of {list(RUNS)}; default: all, in turn")
    args = ap.parse_args(argv)
    unknown = [r for r in args.runs if r not in RUNS]
    if unknown:  # not argparse's choices=, which refuses an empty list for nargs="*" (Python 3.11)
        ap.error(f"unknown runs {unknown}; the probe's: {list(RUNS)}")
    repro.set_threads(1)
    for name in args.runs or list(RUNS):
        rec = run(name)
        out = json.loads(OUT.read_text()) if OUT.exists() else dict(records={})
        out["records"][name] = rec
        out["round8"] = round8(out["records"])
        out["source"] = rec["source"]
        OUT.write_text(json.dumps(out, indent=1) + "\n")
        print(f"wrote {OUT}; round 8: {out['round8']}", flush=True)


if __name__ == "__main__":
    main()
