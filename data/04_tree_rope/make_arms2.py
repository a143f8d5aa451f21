"""The byte-corpus rebuild of chapter 04_tree_rope, ``arms2`` (registered in session 27 BEFORE any of its training;
#62, from the session-27 cold review). Nothing in this file has been trained yet.

**Why.** The byte arms the perplexity claims read (``arms``: d = 32, 8 rotary pairs split 3/3/2, 600 cosine steps,
0.3 epoch) are beaten by a model-free byte 5-gram (tail perplexity 5.21 at length 32 against the best arm's 9.63),
and their plateau conditions pass only because the cosine learning rate ran down. Ratios between such arms compare
under-trained models.

**Design (fixed now).**

* Arms: the four claim arms (:data:`helpers.tree_rope.CLAIM_ARMS`: RoPE, RoPE + skips, TPE, TPE + OPT) x seeds 0,
  1, 2; everything else as ``tr.checkpoint_config("arms")`` (corpus, train length 32, target 2048, B = 16, L = 3,
  OPT / skips ids, evaluation windows and lengths 32 / 128 / 512 / 2048, tail 32).
* Model: d = 64, 2 heads of 32, so 16 rotary pairs; TPE splits them 6/5/5 over its three levels
  (``tr.split_pairs(16, 3)``).
* Schedule: 6000 AdamW steps (batch 32: 6.1 M training bytes, ~3 epochs of the 2 MB corpus), lr 3e-3, warmup 100,
  **warmup-stable-decay** with the last 1200 steps (20%) decaying; held-out loss every 100 steps.
* Conditions, read per arm-seed by the notebook when it reads arms2:
  - plateau: ``train.plateau(val_loss, until=4800) <= 0.05`` (the book-wide rule, on the **stable phase**, so
    the decay's annealing cannot make a still-falling curve look flat; :func:`plateau_of`);
  - **beats_ngram** (new): the arm's tail perplexity at length 32 on the shared-tail windows is below the order-5
    byte n-gram's (``tr.ngram_token_losses`` counted on the training bytes) on the same windows:
    :func:`ngram_ratio` ``< 1``. A claim that reads an arm names this condition next to its plateau and
    context conditions; an arm that a 5-gram beats in distribution has not learned the data.
* Claims: the perplexity claims (``extrapolation_ppl_ratio``, ``in_distribution_parity``, ``beats_skip_control``,
  ``beats_scaled_rope``) unchanged in op, target and interval end, read on arms2 once it is merged, with the
  conditions above added to their ``given``.
* Seeds: seed 0 first (4 jobs); seeds 1 and 2 regardless of seed 0's numbers (the conditions decide, not a rule
  on seed 0), unless a seed-0 arm fails to run.

**Jobs** (one per arm-seed, each its own resumable part; a killed job loses only its own arm-seed):
``.venv/bin/python data/04_tree_rope/make_arms2.py --seeds 0 --arms "TPE + OPT" --parts /work/keep/arms2_parts``;
then ``--merge --seeds 0 1 2 --parts /work/keep/arms2_parts`` writes ``arms2.safetensors`` + ``arms2.json``
(``--partial`` marks missing arm-seeds pending). Expected wall per job on one torch thread: ~6-12 min (recall6's
measured 0.056 s/step at d = 64 with batch 64 bounds the 6000 steps at ~5.6 min; the evaluation at 2048 adds ~1
min; a loaded machine up to 2x), far under the 40-minute part limit; 12 jobs ~1.5-2.5 core-hours in all.

**Storage**: per arm-seed the weights as int8 (``checkpoints.save(quantize="int8")``, ~0.13 MB: the notebook needs
them for the window-use condition and the diagnostics) and the evaluation tensors (float16): ~1.7 MB in all. data/
has ~1 MB of headroom, so the merge into the repository replaces ``arms_long`` (superseded: its question, "does
longer training change the comparison", is what arms2 answers) and leaves ``arms`` for the integrator to reduce
to records (its ablation arms) before the notebook moves to arms2.

``--tiny`` alone trains a tiny config of every arm into a temporary folder, then merges it (seconds). One torch
thread: the same seed on the same machine writes the same weights.
"""

from __future__ import annotations

import argparse
import copy
import time
from pathlib import Path

import numpy as np
import torch

from helpers import checkpoints, repro, scripts, train
from helpers import tree_rope as tr

SLUG, NAME = "04_tree_rope", "arms2"
HERE = Path(__file__).resolve()
SOURCES = [HERE, Path(tr.__file__).resolve(), Path(repro.__file__).resolve(), Path(train.__file__).resolve()]
NGRAM_ORDER = 5  # the byte n-gram of the beats_ngram condition
PLATEAU_BAR, NGRAM_BAR = 0.05, 1.0  # plateau(until=stable end) <= 0.05; arm ppl / n-gram ppl at 32 < 1


def config() -> dict:
    """arms2's training config (the design in the docstring)."""
    cfg = copy.deepcopy(tr.checkpoint_config("arms"))
    cfg.update(d_model=64, n_head=2, steps=6000, warmup=100, lr=3e-3, schedule="wsd", decay_steps=1200,
               val_every=100, seeds=[0, 1, 2], one_seed_arms=[])
    cfg["arms"] = {a: cfg["arms"][a] for a in tr.CLAIM_ARMS}
    return cfg


def tiny_config() -> dict:
    cfg = config()
    cfg.update(d_model=16, n_layer=1, n_head=2, batch_size=4, steps=8, warmup=2, decay_steps=2, val_every=2,
               val_windows=4, seeds=[0], target_len=256)
    cfg["corpus"] = dict(train_bytes=20_000, test_bytes=5_000, every=10)
    cfg["eval"] = dict(cfg["eval"], lengths=[32, 128], windows=4)
    return cfg


def plateau_of(curve: dict, cfg: dict) -> float:
    """The plateau reading of a held-out curve ``{"step": [..], "value": [..]}`` on the stable phase (steps <=
    steps - decay_steps), as registered."""
    return train.plateau(curve, until=cfg["steps"] - cfg["decay_steps"])


def ngram_ratio(arm_tail_loss: np.ndarray, ngram_tail_loss: np.ndarray) -> float:
    """beats_ngram's value: the arm's tail perplexity over the n-gram's on the same windows (per-window mean
    losses at the training length); the condition reads ``< 1``."""
    a = np.asarray(arm_tail_loss, dtype=float)
    b = np.asarray(ngram_tail_loss, dtype=float)
    if a.ndim != 1 or a.shape != b.shape or not len(a) or not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise ValueError(f"need two finite 1-d per-window losses of the same windows, got {a.shape} and {b.shape}")
    return float(np.exp(a.mean() - b.mean()))


def _data(cfg: dict):
    train_bytes, test_bytes = tr.stdlib_corpus(**cfg["corpus"])
    n = cfg["train_len"]
    val = torch.as_tensor(test_bytes[: cfg["val_windows"] * (n + 1)].astype(np.int64)).view(-1, n + 1)
    ev = cfg["eval"]
    windows = tr.shared_tail_windows(test_bytes, ev["lengths"], ev["windows"], repro.rng(0, ev["stream"]))
    return train_bytes, val, windows


def train_arm_seed(cfg: dict, arm: str, s: int) -> dict:
    """One arm-seed: trained, rounded to what is stored, evaluated; its part's dict."""
    t0 = time.time()
    train_bytes, val, windows = _data(cfg)
    spec, ev, key = cfg["arms"][arm], cfg["eval"], f"{arm}/{s}"
    with repro.seeded(s):
        model = tr.make_model(spec, cfg)
        hist = train.fit(model, tr.lm_loss, tr.batch_fn(spec, train_bytes, cfg, s), cfg["steps"], lr=cfg["lr"],
                         warmup=cfg["warmup"], weight_decay=cfg["weight_decay"], schedule=cfg["schedule"],
                         decay_steps=cfg["decay_steps"], seed=s,
                         eval_fn=lambda m: {"val_loss": float(tr.token_losses(m, val, chunk=64).mean())},
                         eval_every=cfg["val_every"], desc=key)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    tails, whole, evals = [], [], {}
    for length, w in windows.items():
        tl = tr.token_losses(model, w)
        tails.append(tl[:, -ev["tail"]:].mean(1))
        whole.append(tl.mean(1))
        if length == max(ev["lengths"]):
            evals["eval_curve"] = tl.mean(0).half()
    evals["eval_tail"], evals["eval_whole"] = torch.stack(tails).half(), torch.stack(whole).half()
    ng = tr.ngram_token_losses(train_bytes, windows[cfg["train_len"]], NGRAM_ORDER)[:, -ev["tail"]:].mean(1)
    pts = hist.evals["val_loss"]
    curve = {"step": [st for st, _ in pts], "value": [v for _, v in pts]}
    metrics = dict(final_val_loss=pts[-1][1], plateau_stable=plateau_of(curve, cfg),
                   ngram_ratio_at_train_len=ngram_ratio(tails[0].numpy(), ng.numpy()),
                   tail_loss={str(n): float(t.mean()) for n, t in zip(ev["lengths"], tails)})
    return dict(state={f"{key}.{k}": v for k, v in state.items()},
                evals={f"{key}.{k}": v for k, v in evals.items()},
                history={f"{key}/loss": [float(v) for v in hist.loss], f"{key}/val_loss": list(pts)},
                metrics={key: metrics}, seconds={key: round(time.time() - t0, 1)})


def part(parts: Path, cfg: dict, arm: str, s: int, train_more: bool = True) -> dict | None:
    path = Path(parts) / arm.replace(" ", "_").replace("+", "p")
    if not train_more and not (path / f"seed{s}.pt").exists():
        return None
    res, _ = scripts.seed_part(path, s, scripts.part_key(cfg, arm=arm), lambda: train_arm_seed(cfg, arm, s))
    return res


def merge(cfg: dict, parts: Path, out: Path | None, partial: bool, tiny: bool) -> Path:
    state, evals, history, metrics, seconds, pending = {}, {}, {}, {}, {}, []
    for s in cfg["seeds"]:
        for arm in cfg["arms"]:
            res = part(parts, cfg, arm, s, train_more=False)
            if res is None:
                if not partial:
                    raise SystemExit(f"{arm}/{s}: not trained in {parts}; run it first")
                pending.append(f"{arm}/{s}")
                continue
            for d, k in ((state, "state"), (evals, "evals"), (history, "history"), (metrics, "metrics"),
                         (seconds, "seconds")):
                d.update(res[k])
    path = checkpoints.save(SLUG, NAME, {**state, **evals}, config=cfg, metrics=metrics, history=history,
                            seed=cfg["seeds"], steps=cfg["steps"], wall_seconds=sum(seconds.values()),
                            sources=SOURCES, module="helpers.tree_rope", root=out, dtype=torch.float16,
                            quantize="int8",
                            extra=dict(seconds_per_run=seconds, pending=pending, tiny=tiny,
                                       eval_windows_stream=cfg["eval"]["stream"]))
    print(f"wrote {path} ({path.with_suffix('.safetensors').stat().st_size / 2**10:.0f} kB)", flush=True)
    return path


def options(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--arms", nargs="+", default=None, help="this job's arms (default: all four)")
    ap.add_argument("--parts", type=Path, default=None, help="folder of the arm-seed parts (one job per arm-seed)")
    ap.add_argument("--merge", action="store_true", help="merge the parts of --seeds into arms2.safetensors/.json")
    ap.add_argument("--partial", action="store_true", help="--merge: mark missing arm-seeds pending")


def build(cfg: dict, out: Path | None, args: argparse.Namespace) -> Path | None:
    unknown = sorted(set(args.arms or []) - set(cfg["arms"]))
    if unknown:
        raise SystemExit(f"unknown arms {unknown}; choose from {list(cfg['arms'])}")
    if args.tiny:  # every arm of the tiny config into temporary parts, then the merge
        parts = args.parts or Path(out) / "arms2_parts"  # out: a temporary folder unless --out
        for arm in cfg["arms"]:
            part(parts, cfg, arm, cfg["seeds"][0])
        return merge(cfg, parts, out, False, True)
    if args.parts is None:
        raise SystemExit("--parts is required (one job per arm-seed: --seeds S --arms A --parts DIR; then --merge)")
    if args.merge:
        return merge(cfg, args.parts, out, args.partial, False)
    for s in cfg["seeds"]:
        for arm in args.arms or list(cfg["arms"]):
            part(args.parts, cfg, arm, s)
    return None


def main(argv: list[str] | None = None) -> list:
    return scripts.script_main(build, config=lambda name: config(), tiny=lambda name: tiny_config(),
                               names=[NAME], options=options, doc=__doc__, argv=argv)


if __name__ == "__main__":
    main()
