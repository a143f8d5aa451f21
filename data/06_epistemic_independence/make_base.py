"""Pre-train the base judges of chapter 06_epistemic_independence, which do not fit its 5-minute default run, and
write them with :mod:`helpers.checkpoints`:

* ``base``: per seed, the three-option judge the RL arms train, supervised on every subject and cue family by a
  sycophantic annotator who labels the cue's option on close items and the correct option on clear ones (see
  ``ei.checkpoint_config``), with label smoothing (the judge is never fully sure, so GRPO groups of its answers
  can disagree), on items half of which hide the last digits of every option (``p_hidden``). Tensors ``small/<seed>.<param>`` (float16). The metrics hold, per judge, no-cue accuracy and
  aligned / adversarial accuracy on each cue family (``aligned:<family>/small/<seed>``); the script prints each
  family's aligned − adversarial gap, how much the base follows it.

Run from the repository root: ``.venv/bin/python data/06_epistemic_independence/make_base.py`` (or
``make data NB=06_epistemic_independence``). One seed per job: ``--seeds S --parts DIR --only-parts`` for each
seed, then ``--parts DIR`` writes the checkpoint from the stored parts. ``--tiny`` trains a tiny config for a few steps into a temporary
folder (seconds; what the tests run); ``--seeds``/``--out``: other seeds into another data root.
One torch thread: the same seed on the same machine writes byte-identical weights.
"""

from __future__ import annotations

import argparse
import copy
import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import torch

from helpers import checkpoints, repro, scripts, train
from helpers import epistemic_independence as ei

SLUG = ei.CHECKPOINT_SLUG
HERE = Path(__file__).resolve()
SOURCES = [HERE, Path(ei.__file__).resolve(), Path(repro.__file__).resolve(), Path(train.__file__).resolve()]


def tiny(name: str = "base") -> dict:
    cfg = copy.deepcopy(ei.checkpoint_config("base"))
    cfg.update(seeds=[0], small=dict(n_layer=1, n_head=2, d_model=16), steps=6, batch=16, warmup=2)
    return cfg


def eval_sets(n: int, k: int, p_hidden: float = 0.0) -> dict[str, ei.Batch]:
    """No-cue items of every subject, and aligned / adversarial bandwagon items (training subjects), a share
    ``p_hidden`` of them with hidden digits; and adversarial bandwagon items with every digit shown."""
    rng = np.random.default_rng([0, 99])
    return {"none": ei.make_batch(rng, n, subjects=ei.SUBJECTS, p_cue=0.0, n_options=k, p_hidden=p_hidden),
            "aligned": ei.make_batch(rng, n, p_cue=1.0, p_aligned=1.0, n_options=k, p_hidden=p_hidden),
            "adversarial": ei.make_batch(rng, n, p_cue=1.0, p_aligned=0.0, n_options=k, p_hidden=p_hidden),
            "adversarial, shown": ei.make_batch(rng, n, p_cue=1.0, p_aligned=0.0, n_options=k)}


def family_sets(n: int, k: int, p_hidden: float = 0.0) -> dict[str, ei.Batch]:
    """Aligned and adversarial items of each cue family (training subjects), for the final metrics."""
    rng = np.random.default_rng([0, 98])
    return {f"{c}:{f}": ei.make_batch(rng, n, families=(f,), p_cue=1.0, p_aligned=p, n_options=k,
                                      p_hidden=p_hidden)
            for f in ei.FAMILIES for c, p in (("aligned", 1.0), ("adversarial", 0.0))}


def train_one(cfg: dict, kind: str, s: int, eval_n: int) -> tuple[dict, object, dict]:
    """Pre-train one judge (``kind`` small or large, seed ``s``) on one torch thread: (state, history, metrics)."""
    torch.set_num_threads(1)
    sets = eval_sets(eval_n, cfg["n_options"], cfg.get("p_hidden", 0.0))

    @torch.no_grad()
    def evaluate(model, sets=sets, log=False) -> dict[str, float]:
        out = {k: float((ei.answer_logits(model, b.x).argmax(-1).numpy() == b.truth).mean())
               for k, b in sets.items()}
        if log:
            print(f"  {kind} {s} at {time.time() - t0:.0f} s: "
                  + ", ".join(f"{k} {v:.3f}" for k, v in out.items()), flush=True)
        return out

    t0 = time.time()
    with repro.seeded(s):
        model = ei.make_judge(cfg[kind], s)
        hist = ei.pretrain(model, cfg, s, lr=cfg["lr"], eval_fn=lambda m: evaluate(m, log=True), eval_every=max(1, cfg["steps"] // 10),
                           progress=False, desc=f"{kind} {s}")
    final = evaluate(model) | evaluate(model, family_sets(eval_n // 2, cfg["n_options"], cfg.get("p_hidden", 0.0)))
    gaps = {f: final[f"aligned:{f}"] - final[f"adversarial:{f}"] for f in ei.FAMILIES}
    print(f"seed {s} {kind}: " + ", ".join(f"{k} {final[k]:.3f}" for k in sets)
          + "; aligned - adversarial: " + ", ".join(f"{f} {g:+.2f}" for f, g in gaps.items())
          + f" ({time.time() - t0:.0f} s)", flush=True)
    return {k: v.detach().clone() for k, v in model.state_dict().items()}, hist, final


def _as_part(state: dict, hist: train.History, final: dict) -> dict:
    """One seed's results as plain containers (a part file loads without unpickling classes)."""
    return dict(state=state, hist=dict(loss=hist.loss, lr=hist.lr, evals=hist.evals), final=final)


def make_base(cfg: dict, out: Path | None, eval_n: int = 1000, workers: int = 1, parts: Path | None = None,
              only_parts: bool = False) -> Path | None:
    """Train (or, with ``parts``, reuse the stored part of) each seed's judge and write checkpoint ``base``;
    ``only_parts``: store the parts and write no checkpoint (one seed per job, merged by a later run)."""
    jobs = [("small", s) for s in cfg["seeds"]]
    t0 = time.time()
    if workers > 1:  # one process per judge: each run is the same as alone (one thread, its own seed)
        ctx = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(workers, mp_context=ctx) as pool:
            results = list(pool.map(train_one, *zip(*[(cfg, k, s, eval_n) for k, s in jobs])))
    else:
        key = scripts.part_key(cfg, eval_n=eval_n)
        results = []
        for k, s in jobs:
            res, _ = scripts.seed_part(parts, s, key, lambda k=k, s=s: _as_part(*train_one(cfg, k, s, eval_n)))
            results.append((res["state"], train.History(**res["hist"]), res["final"]))
    if only_parts:
        return None
    tensors, history, metrics = {}, {}, {}
    for (kind, s), (state, hist, final) in zip(jobs, results):
        tensors.update({f"{kind}/{s}.{k}": v for k, v in state.items()})
        history[f"{kind}/{s}"] = hist
        metrics.update({f"{k}/{kind}/{s}": v for k, v in final.items()})
    return checkpoints.save(SLUG, "base", tensors, config=cfg, metrics=metrics, history=history,
                            seed=cfg["seeds"], steps=cfg["steps"], wall_seconds=time.time() - t0, sources=SOURCES,
                            module="helpers.epistemic_independence", dtype=torch.float16, root=out)


def main(argv: list[str] | None = None) -> list[Path]:
    def options(ap: argparse.ArgumentParser) -> None:
        ap.add_argument("--workers", type=int, default=1, help="processes training judges side by side")
        ap.add_argument("--parts", type=Path, default=None,
                        help="folder of per-seed parts: a seed stored there (same config) is reused, not retrained")
        ap.add_argument("--only-parts", action="store_true", help="store the seeds' parts, write no checkpoint")

    def build(cfg: dict, out: Path | None, args: argparse.Namespace) -> Path | list:
        made = make_base(cfg, out, eval_n=50 if args.tiny else 1000, workers=1 if args.tiny else args.workers,
                         parts=args.parts, only_parts=args.only_parts)
        return [] if made is None else made

    return scripts.script_main(build, config=ei.checkpoint_config, tiny=tiny, names=["base"], options=options,
                               doc=__doc__, argv=argv)


if __name__ == "__main__":
    main()
