"""Round 7's diagnosis probe of chapter 04_tree_rope (``probe_recall3.json``, records only, no weights).
Registered (committed) before any of its runs started; only held-out accuracy and loss at the training length are
recorded and read, never a longer length, never NoPE.

**Why.** Round 6 (``recall2``: two-key offset recall, d = 64, 6000 cosine steps, seeds 0-2) left both claims
inconclusive at every seed: some arm below 0.95 in-window at each seed, the weakest an OPT arm every time. Read
from the stored validation curves (``recall2.json``; the bars: final held-out accuracy >= 0.95, plateau <= 0.02):
learned and flat at 5 of 15 arm-seeds (RoPE + skips 0, TPE 0, RoPE 1, RoPE 2, TPE 2); still improving at the end
at 5 (RoPE + OPT offsets 0: 0.53, plateau 0.119; RoPE + skips 1 and RoPE + OPT offsets 1: jumps to 0.97 / 1.00
after step ~5000, plateau 0.219; RoPE + skips 2: 0.52, 0.028; TPE + OPT 2: 0.46, 0.087); flat below the bar at 5
(RoPE 0: 0.66; RoPE + OPT offsets 2: 0.30; TPE + OPT 1: 0.22; TPE 1: 0.93; TPE + OPT 0: 0.93). The arms that
learned jumped at widely spread steps (~1500 to ~5300): a waiting time, not a fixed step count; round 6's probe
already saw RoPE at seed 0 stall again at 9000 steps. But the arms whose training position ids jump (RoPE +
skips, RoPE + OPT offsets, TPE + OPT) met the bars at 1 of 9 arm-seeds, the plain-id arms (RoPE, TPE) at 4 of 6.
Those arms never train on a contiguous window (their second chunk starts a random offset after the first, so the
query sees the keys of the first chunk at tens to thousands of positions), while the in-window score, the
validation curve and the ``retrieval_in_window`` condition all use the contiguous ids 0..31. Two explanations:
(stall) these arms do not learn the task either on the ids they train with: an optimisation stall, as RoPE's at
seed 0; (mismatch) they learn it on their training ids but do not carry it over to contiguous ids.

**Runs** (``RUNS``; one gated job each: ``.venv/bin/python data/04_tree_rope/probe_recall3.py RUN``): the two OPT
arm-seeds that are flat far below the bar, ``tpe_opt_s1`` (TPE + OPT, seed 1) and ``rope_opt_s2`` (RoPE + OPT
offsets, seed 2), each trained exactly as ``make_recall.py`` trains it (``tr.checkpoint_config("recall2")``,
the same seed, steps, batches and ids, subnormals flushed), scored every ``val_every`` steps on the validation
windows twice: with the contiguous ids (the stored curve, which it should reproduce) and with **training ids**
(the same windows with ids drawn by the arm's own ``tr.train_position_ids``, fixed stream ``[0, stream + 1,
11]``): how well the arm does the task it is trained on.

**Rule for round 7** (:func:`round7`, fixed here before any run): a run reads ``mismatch`` if its final accuracy
on training ids is >= 0.95 while the contiguous one is < 0.95, ``stall`` if the training-ids accuracy is < 0.95,
``learned`` if the contiguous one is >= 0.95 (the stored stall did not reproduce). (M) If any run reads mismatch,
round 7 is ``recall3`` = recall2 with the three jumping-id arms (RoPE + skips, RoPE + OPT offsets, TPE + OPT)
trained on a **mix**: in each batch every window keeps its jumping ids with probability 1/2 and has the plain ids
0..n otherwise (``plain_frac=0.5``, the same for the three arms; the arms then see the contiguous ids they are
scored on, and still the jumps), NoPE, RoPE and TPE unchanged (their recall2 runs are their first attempt), plus
the restart rule below. (S) Otherwise (both runs read stall or learned), round 7 is recall2 unchanged plus the
restart rule. **Restart rule** (both cases; every arm but NoPE, identically): an arm-seed whose final held-out
accuracy is < 0.95 or whose plateau is > 0.02 is trained again from a new initialisation (attempt r: the model
built under seed ``1000 r + s``; the same batches and ids as attempt 0), at most 2 restarts; the claims read the
first attempt that meets both bars, else the last. **Probe seed**: seed 1 first (its OPT arm is the weakest of
all, TPE + OPT at 0.25, and it has the most arms below the bars, 4 of 5: the recipe is tried where it is
hardest); seeds 0 and 2 are trained only if at seed 1 every arm but NoPE meets both bars after the rule.
"""

from __future__ import annotations

import argparse
import copy
import fcntl
import json
import time
from pathlib import Path

import numpy as np
import torch

from helpers import checkpoints, repro, train
from helpers import tree_rope as tr

HERE = Path(__file__).resolve()
OUT = HERE.parent / "probe_recall3.json"
RUNS = {"tpe_opt_s1": ("TPE + OPT", 1), "rope_opt_s2": ("RoPE + OPT offsets", 2)}
BARS = dict(acc=0.95, plateau=0.02)


def reading(rec: dict | None) -> str | None:
    """``mismatch`` / ``stall`` / ``learned`` of one record (module docstring); None when not recorded."""
    if rec is None:
        return None
    if rec["final_val_acc"] >= BARS["acc"]:
        return "learned"
    return "mismatch" if rec["final_train_ids_acc"] >= BARS["acc"] else "stall"


def round7(records: dict) -> dict:
    """The registered rule on ``{run: record}``: ``recipe`` "M" (plain mix + restarts) or "S" (restarts only);
    ``decided=False`` while a run is missing."""
    reads = {r: reading(records.get(r)) for r in RUNS}
    if any(v == "mismatch" for v in reads.values()):
        return dict(decided=True, recipe="M", readings=reads)
    if any(v is None for v in reads.values()):
        return dict(decided=False, recipe=None, readings=reads)
    return dict(decided=True, recipe="S", readings=reads)


def train_ids_scores(model: torch.nn.Module, task: dict, pos: torch.Tensor, chunk: int = 64) -> tuple[float, float]:
    """Accuracy and mean loss of the answers of ``task`` with per-window position ids ``pos`` (W, n + 1)."""
    x, qp = task["tokens"], task["query_pos"]
    was = model.training
    model.eval()
    hits, losses = [], []
    with torch.no_grad():
        for i in range(0, len(x), chunk):
            logits = model(x[i: i + chunk, :-1], pos=pos[i: i + chunk, :-1])[:, qp]
            tgt = x[i: i + chunk, qp + 1]
            hits.append(logits.argmax(-1) == tgt)
            losses.append(torch.nn.functional.cross_entropy(logits.transpose(1, 2), tgt, reduction="none"))
    model.train(was)
    return float(torch.cat(hits).float().mean()), float(torch.cat(losses).mean())


def run(name: str) -> dict:
    arm, seed = RUNS[name]
    cfg = copy.deepcopy(tr.checkpoint_config("recall2"))
    spec = cfg["arms"][arm]
    val, _ = tr.retrieval_windows(cfg)  # the evaluation windows are never scored here
    n = cfg["train_len"]
    pos = torch.as_tensor(tr.train_position_ids(
        spec, np.random.default_rng([0, cfg["eval"]["stream"] + 1, 11]), len(val["tokens"]), n + 1,
        cfg["target_len"], spec.get("n_chunks", cfg["n_chunks"])))

    def both(model):
        hit, loss = tr.retrieval_scores(model, val, chunk=64)
        acc_t, loss_t = train_ids_scores(model, val, pos)
        return {"val_loss": float(loss.mean()), "val_acc": float(hit.float().mean()),
                "train_ids_loss": loss_t, "train_ids_acc": acc_t}

    source = checkpoints.source_hash([HERE, Path(tr.__file__).resolve(), Path(train.__file__).resolve()])
    t0 = time.time()
    with tr.flush_denormal(True), repro.seeded(seed):  # as tr.fit_retrieval_arm, with a second scoring
        model = tr.make_model(spec, cfg)
        hist = train.fit(model, tr.retrieval_loss, tr.retrieval_batch_fn(spec, cfg, seed), cfg["steps"],
                         lr=cfg["lr"], warmup=cfg["warmup"], weight_decay=cfg["weight_decay"], seed=seed,
                         eval_fn=both, eval_every=cfg["val_every"], desc=f"{name}: {arm} seed {seed}")
    loss = [v for _, v in hist.evals["val_loss"]]
    stored = json.loads((HERE.parent / "recall2.json").read_text())["history"][f"{arm}/{seed}/val_acc"]
    mine = [v for _, v in hist.evals["val_acc"]]
    same = len(stored["value"]) == len(mine)
    rec = dict(arm=arm, seed=seed, steps=cfg["steps"], final_val_acc=mine[-1], final_val_loss=loss[-1],
               final_train_ids_acc=hist.evals["train_ids_acc"][-1][1], plateau=train.plateau(loss),
               plateau_train_ids=train.plateau([v for _, v in hist.evals["train_ids_loss"]]),
               reproduces_stored=same and bool(np.allclose(stored["value"], mine)),
               max_diff_stored=float(np.max(np.abs(np.subtract(stored["value"], mine)))) if same else None,
               **{c: hist.evals[c] for c in ("val_acc", "val_loss", "train_ids_acc", "train_ids_loss")},
               seconds=round(time.time() - t0, 1), seconds_per_step=round((time.time() - t0) / cfg["steps"], 4),
               source=source)
    rec["reading"] = reading(rec)
    print(f"{name}: {arm} seed {seed}: in-window acc {rec['final_val_acc']:.3f} training-ids acc "
          f"{rec['final_train_ids_acc']:.3f} plateau {rec['plateau']:.4f} -> {rec['reading']} "
          f"(reproduces stored: {rec['reproduces_stored']}; {rec['seconds']} s)", flush=True)
    return rec


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", choices=list(RUNS))
    args = ap.parse_args()
    repro.set_threads(1)
    rec = run(args.run)
    with open("/tmp/probe_recall3.lock", "w") as lock:  # the two runs are two jobs that may end together
        fcntl.flock(lock, fcntl.LOCK_EX)
        out = json.loads(OUT.read_text()) if OUT.exists() else dict(records={})
        out["records"][args.run] = rec
        out["round7"] = round7(out["records"])
        out["source"] = rec["source"]
        OUT.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {OUT}; round 7: {out['round7']}", flush=True)


if __name__ == "__main__":
    main()
