"""Train every arm of chapter 04_tree_rope (RoPE, TPE, OPT, controls, cross arms, ablations; the claims' arms x 3 seeds) at the
64x setting (train on 32 bytes, evaluate to 2048), evaluate them on shared-tail held-out windows, and write
``data/04_tree_rope/arms.safetensors`` + ``arms.json`` with :mod:`helpers.checkpoints` (``--name arms_long``: the
convergence probe, the claims' arms trained 2.5x longer, written by ``make_arms_long.py``).

Run from the repository root: ``.venv/bin/python data/04_tree_rope/make_arms.py`` (or ``make data NB=04_tree_rope``).
``--tiny`` trains a tiny config for a few steps into a temporary folder (seconds; what the tests run); ``--seeds``
and ``--out`` train other seeds into another data root (:func:`helpers.scripts.script_main`).
One torch thread: the same seed on the same machine writes a byte-identical weights file.
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

SLUG = "04_tree_rope"
HERE = Path(__file__).resolve()
SOURCES = [HERE, Path(tr.__file__).resolve(), Path(repro.__file__).resolve(), Path(train.__file__).resolve()]


def tiny_config(name: str) -> dict:
    cfg = copy.deepcopy(tr.checkpoint_config(name))
    cfg.update(d_model=16, n_layer=1, n_head=2, batch_size=4, steps=6, warmup=2, val_every=3, val_windows=4,
               seeds=[0], target_len=256)
    cfg["corpus"] = dict(train_bytes=20_000, test_bytes=5_000, every=10)
    cfg["eval"] = dict(cfg["eval"], lengths=[32, 128], windows=4)
    return cfg


def options(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--arms", nargs="*", default=None, help="only these arms (a probe; not loadable by default)")
    ap.add_argument("--steps", type=int, default=None, help="override the steps (a probe; not loadable by default)")
    ap.add_argument("--reeval", action="store_true",
                    help="no training: evaluate the stored weights again and rewrite the checkpoint")


def build(cfg: dict, out: Path | None, args: argparse.Namespace) -> Path:
    name = args.name
    if args.arms:
        cfg["arms"] = {a: cfg["arms"][a] for a in args.arms}
    if args.steps:
        cfg["steps"] = args.steps

    t0 = time.time()
    train_bytes, test_bytes = tr.stdlib_corpus(**cfg["corpus"])
    # validation: the first val_windows contiguous windows of the training length in the held-out files
    n = cfg["train_len"]
    val = torch.as_tensor(test_bytes[: cfg["val_windows"] * (n + 1)].astype(np.int64)).view(-1, n + 1)
    ev = cfg["eval"]
    windows = tr.shared_tail_windows(test_bytes, ev["lengths"], ev["windows"], repro.rng(0, ev["stream"]))

    def val_loss(model):
        return {"val_loss": float(tr.token_losses(model, val, chunk=64).mean())}

    def evaluate(model, key):
        """Per-window losses at every length on the shared-tail windows, and the per-position curve."""
        out, tails, whole = {}, [], []
        for length, w in windows.items():
            tl = tr.token_losses(model, w)
            tails.append(tl[:, -ev["tail"]:].mean(1))
            whole.append(tl.mean(1))
            if length == max(ev["lengths"]):
                out["eval_curve"] = tl.mean(0)  # per-position loss at the longest length
        out["eval_tail"] = torch.stack(tails)  # (lengths, windows): loss on the shared tail
        out["eval_whole"] = torch.stack(whole)  # (lengths, windows): whole-window loss
        return out, {str(L): float(t.mean()) for L, t in zip(ev["lengths"], tails)}

    old = checkpoints.load(SLUG, name, config=cfg, root=out, check_sources=False) if args.reeval else None
    tensors, history, metrics, timing = {}, {}, {}, {}
    for arm, spec in cfg["arms"].items():
        for s in cfg["seeds"][:1] if arm in cfg["one_seed_arms"] else cfg["seeds"]:
            t_arm, key = time.time(), f"{arm}/{s}"
            if old is not None:  # no training: the stored weights, evaluated again
                model = old.load_into(tr.make_model(spec, cfg), prefix=key + ".", ignore=["eval_"])
            else:
                with repro.seeded(s):
                    model = tr.make_model(spec, cfg)
                    hist = train.fit(model, tr.lm_loss, tr.batch_fn(spec, train_bytes, cfg, s), cfg["steps"],
                                     lr=cfg["lr"], warmup=cfg["warmup"], weight_decay=cfg["weight_decay"], seed=s,
                                     eval_fn=val_loss, eval_every=cfg["val_every"], desc=f"{arm} / seed {s}")
                # evaluate exactly the weights that are stored: round the parameters to float16 (not the buffers:
                # the rotary frequencies are rebuilt in full precision when the notebook makes the model)
                with torch.no_grad():
                    for p in model.parameters():
                        p.copy_(p.half().float())
            tensors[key] = {k: v.half() for k, v in model.state_dict().items()}
            evals, tail_loss = evaluate(model, key)
            tensors[key].update(evals)
            if old is not None:
                for k, c in old.manifest["history"].items():
                    if k.startswith(key + "/"):
                        history[k] = c
                metrics[key] = dict(old.manifest["metrics"][key], tail_loss=tail_loss)
                timing[key] = old.manifest["extra"]["seconds_per_run"][key]
            else:
                history[key] = hist
                pts = hist.evals["val_loss"]
                at_3q = [v for st, v in pts if st <= 0.75 * cfg["steps"]] or [pts[0][1]]
                metrics[key] = dict(final_val_loss=pts[-1][1], val_drop_last_quarter=at_3q[-1] - pts[-1][1],
                                    tail_loss=tail_loss)
                timing[key] = round(time.time() - t_arm, 1)
            print(f"{key}: val {metrics[key]['final_val_loss']:.4f} tail {metrics[key]['tail_loss']} "
                  f"({timing[key]} s)", flush=True)

    flat = {f"{key}.{k}": v for key, d in tensors.items() for k, v in d.items()}
    path = checkpoints.save(
        SLUG, name, flat, config=cfg, metrics=metrics, history=history, seed=cfg["seeds"], steps=cfg["steps"],
        wall_seconds=old.manifest["wall_seconds"] if old is not None else time.time() - t0,
        sources=SOURCES + ([HERE.with_name(f"make_{name}.py")] if name != "arms" else []),
        module="helpers.tree_rope",
        extra=dict(seconds_per_run=timing, eval_windows_stream=ev["stream"], tiny=args.tiny), root=out)
    print(f"wrote {path} ({path.with_suffix('.safetensors').stat().st_size / 2**20:.2f} MB) in "
          f"{time.time() - t0:.0f} s", flush=True)
    return path


def main(argv: list[str] | None = None) -> list[Path]:
    return scripts.script_main(build, config=tr.checkpoint_config, tiny=tiny_config, names=["arms", "arms_long"],
                               default_names=["arms"], options=options, doc=__doc__, argv=argv)


if __name__ == "__main__":
    main()
