"""Round 10's recipe probe of chapter 04_tree_rope (``probe_recall5.json``, records only, no weights). Registered
(committed) with its rule before any of its runs; only held-out accuracy and loss at the training length are
recorded and read.

**Why** (rounds 8 and 9, ``probe_recall4.json``, ``probe_carry.json``): both ways a TPE arm misses the in-window
bar are circuits that form late or not at all when the only training signal is the one answer per window. (a) No
onset: arm-seeds stay at chance while the schedule runs down. (b) The carry gap: the previous-token step that
reaches the answer is learned everywhere but across a carry of the lowest digit. Round 9 read (b) as trainable:
on a dense previous-token task every arm, TPE + OPT included, gets the carries within 200 steps (the TPE arms
later than the RoPE arms, where the construction's margin is 2.4x-4.8x smaller). Round 8's candidates do not
fit this diagnosis: heads of 16 leave TPE two rotary pairs per level, where one head's best carry margin falls to
~0.001 (vs 0.26 without carries; the construction of probe_carry.py at n_head = 4), and weight decay works against
the larger query-key norms the carry step needs.

**Candidate** ``AUX``: recall2's recipe unchanged (d = 64, 2 heads of 32, no weight decay, 6000 cosine steps)
plus an auxiliary dense previous-token loss on the same training windows: ``loss = answer CE + AUX_WEIGHT *
CE(token i - 1 at every position 1 <= i < query position)`` (:func:`aux_loss`; the query positions are left
out, where the answer is the target). ``AUX_WEIGHT`` = 0.25, fixed now. Every arm would get the same loss, so the
comparison between encodings stays fair; the task and its evaluation are unchanged.

**Runs** (``RUNS``): round 8's two runs, the worst attempts of round 7 (TPE and TPE + OPT, seed 1, init 2001,
batches and ids of seed 1; round 7's curves at chance, 0.082, at step 1500), trained with ``AUX`` and stopped after
``PROBE_STEPS`` = 1500 steps of the 6000-step schedule (as round 8; ~90 s a run). Recorded beside (decide
nothing): accuracy at step 1500 on the carry windows (key at p mod 8 = 7) and elsewhere.

**Rule** (:func:`round10`, round 8's): ``AUX`` qualifies when at both runs its held-out accuracy at step 1500
exceeds round 7's stored curve at step 1500 by >= 0.3. If it qualifies, the next round trains ``recall5`` =
recall2 + ``AUX`` (arms NoPE, RoPE, RoPE + OPT offsets, TPE, TPE + OPT; one attempt per arm-seed, the one read;
bars and claims unchanged; seed 1 first, seeds 0 and 2 only if the four claim arms meet both bars there), to be
registered as a checkpoint config before it is trained; if not, ``AUX`` is not used.
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import json
import time
from pathlib import Path

import torch

from helpers import checkpoints, repro, train
from helpers import tree_rope as tr

HERE = Path(__file__).resolve()
OUT = HERE.parent / "probe_recall5.json"
_spec = importlib.util.spec_from_file_location("_probe_recall4", HERE.parent / "probe_recall4.py")
P4 = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(P4)
PROBE_STEPS, SEED, ATTEMPT, LIFT = P4.PROBE_STEPS, P4.SEED, P4.ATTEMPT, P4.LIFT
AUX_WEIGHT = 0.25
RUNS = {"aux_tpe": "TPE", "aux_tpe_opt": "TPE + OPT"}


def aux_loss(model: torch.nn.Module, batch, weight: float = AUX_WEIGHT) -> torch.Tensor:
    """The answers' cross-entropy plus ``weight`` times the cross-entropy of predicting token i - 1 at every
    position 1 <= i < the first query position (batch as :func:`tr.retrieval_loss`'s); since round 11 the code
    lives in :func:`tr.retrieval_aux_loss`, which recall5 trains with."""
    return tr.retrieval_aux_loss(model, batch, weight)


def round10(records: dict) -> dict:
    """The registered rule on ``{run: record}``: ``{"decided", "qualifies", "lifts"}``."""
    if any(r not in records or records[r]["baseline"] is None for r in RUNS):  # missing, or cut elsewhere
        return dict(decided=False, qualifies=None, lifts={})
    lifts = {r: records[r]["acc_at_probe"] - records[r]["baseline"] for r in RUNS}
    return dict(decided=True, qualifies=all(v >= LIFT for v in lifts.values()), lifts=lifts)


def config() -> dict:
    return copy.deepcopy(tr.recall4_config(None))  # recall2's recipe, the five arms


def run(name: str, probe_steps: int = PROBE_STEPS, cfg: dict | None = None) -> dict:
    arm = RUNS[name]
    cfg = cfg or config()
    spec = cfg["arms"][arm]
    val, _ = tr.retrieval_windows(cfg)
    hist, calls = train.History(), [0]

    def metrics(model):
        out = tr._val_metrics(model, val)
        calls[0] += 1
        if calls[0] * cfg["val_every"] >= probe_steps:
            hist.evals.setdefault("val_acc", []).append((probe_steps, out["val_acc"]))
            hist.evals.setdefault("val_loss", []).append((probe_steps, out["val_loss"]))
            raise P4._Stop
        return out

    source = checkpoints.source_hash([HERE, HERE.parent / "probe_recall4.py", Path(tr.__file__).resolve(),
                                      Path(train.__file__).resolve()])
    t0 = time.time()
    with tr.flush_denormal(True):  # as make_recall3 / probe_recall4
        with repro.seeded(1000 * ATTEMPT + SEED):
            model = tr.make_model(spec, cfg)
        with repro.seeded(SEED):
            try:
                train.fit(model, aux_loss, tr.retrieval_batch_fn(spec, cfg, SEED), cfg["steps"], lr=cfg["lr"],
                          warmup=cfg["warmup"], weight_decay=cfg["weight_decay"], seed=SEED, eval_fn=metrics,
                          eval_every=cfg["val_every"], desc=name, history=hist)
                raise RuntimeError(f"the run ended before step {probe_steps}")
            except P4._Stop:
                pass
        sp = P4.split_scores(model, val)
    secs = time.time() - t0
    sp.pop("hit")
    rec = dict(change="AUX", aux_weight=AUX_WEIGHT, arm=arm, seed=SEED, attempt=ATTEMPT,
               init_seed=1000 * ATTEMPT + SEED, steps_of_schedule=cfg["steps"], probe_steps=probe_steps,
               acc_at_probe=hist.evals["val_acc"][-1][1],
               baseline=P4.baseline(arm, probe_steps) if probe_steps == PROBE_STEPS else None, **sp,
               val_acc=hist.evals["val_acc"], val_loss=hist.evals["val_loss"], seconds=round(secs, 1),
               source=source)
    print(f"{name}: acc at {probe_steps} {rec['acc_at_probe']:.3f} (round 7: {rec['baseline']}); carry "
          f"{rec['carry']:.2f} / else {rec['no_carry']:.2f} ({rec['seconds']} s)", flush=True)
    return rec


def main(argv: list[str] | None = None) -> Path:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="*", help=f"of {list(RUNS)}; default: both, in turn")
    ap.add_argument("--tiny", action="store_true", help="a run of seconds (tiny model) into --out")
    ap.add_argument("--out", type=Path, default=None, help="the folder of probe_recall5.json")
    args = ap.parse_args(argv)
    unknown = [r for r in args.runs if r not in RUNS]
    if unknown:
        ap.error(f"unknown runs {unknown}; the probe's: {list(RUNS)}")
    repro.set_threads(1)
    cfg, steps = config(), PROBE_STEPS
    if args.tiny:
        import tempfile
        cfg.update(d_model=16, n_layer=1, batch_size=8, steps=12, warmup=2, val_every=3, val_windows=64)
        steps = 6
        args.out = args.out or Path(tempfile.mkdtemp(prefix="probe_recall5_"))
    path = (args.out or OUT.parent) / OUT.name
    path.parent.mkdir(parents=True, exist_ok=True)
    for name in args.runs or list(RUNS):
        rec = run(name, steps, cfg)
        out = json.loads(path.read_text()) if path.exists() else dict(records={}, tiny=args.tiny)
        out["records"][name] = rec
        out["round10"] = round10(out["records"])
        out["source"] = rec["source"]
        path.write_text(json.dumps(out, indent=1) + "\n")
        print(f"wrote {path}; round 10: {out['round10']}", flush=True)
    return path


if __name__ == "__main__":
    main()
