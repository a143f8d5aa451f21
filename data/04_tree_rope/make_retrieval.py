"""Train the passkey-retrieval arms of chapter 04_tree_rope (RoPE, RoPE + skips, RoPE + OPT offsets, TPE, TPE + OPT
x 3 seeds; the old OPT with chunks of B/2, one seed) at length 32, evaluate them to 2048 (64x) on fixed held-out
windows, and write ``data/04_tree_rope/retrieval.safetensors`` + ``retrieval.json`` with :mod:`helpers.checkpoints`.

The weights of the first seed are stored (int8); every seed's evaluation is stored as measurements (per window:
correct or not, loss) next to them. Run from the repository root:
``.venv/bin/python data/04_tree_rope/make_retrieval.py``. ``--tiny`` trains a tiny config for a few steps into a
temporary folder (seconds); ``--seeds`` and ``--out`` train other seeds into another data root
(:func:`helpers.scripts.script_main`). One torch thread: the same seed on the same machine gives the same weights.
"""

from __future__ import annotations

import copy
import time
from pathlib import Path

import torch

from helpers import checkpoints, repro, scripts, train
from helpers import tree_rope as tr

SLUG = "04_tree_rope"
HERE = Path(__file__).resolve()
SOURCES = [HERE, Path(tr.__file__).resolve(), Path(repro.__file__).resolve(), Path(train.__file__).resolve()]


def tiny_config(name: str) -> dict:
    cfg = copy.deepcopy(tr.checkpoint_config(name))
    cfg.update(d_model=16, n_layer=1, batch_size=8, steps=6, warmup=2, val_every=3, val_windows=8, target_len=256)
    cfg["eval"] = dict(cfg["eval"], lengths=[32, 128], windows=4)
    return cfg


def build(cfg: dict, out: Path | None, args) -> Path:
    t0 = time.time()
    val, tests = tr.retrieval_windows(cfg)

    def val_metrics(model):
        hit, loss = tr.retrieval_scores(model, val, chunk=64)
        return {"val_loss": float(loss.mean()), "val_acc": float(hit.float().mean())}

    tensors, history, metrics, timing = {}, {}, {}, {}
    for arm, spec in cfg["arms"].items():
        for s in cfg["seeds"][:1] if arm in cfg["one_seed_arms"] else cfg["seeds"]:
            t_arm, key = time.time(), f"{arm}/{s}"
            with repro.seeded(s):
                model = tr.make_model(spec, cfg)
                hist = train.fit(model, tr.retrieval_loss, tr.retrieval_batch_fn(spec, cfg, s), cfg["steps"],
                                 lr=cfg["lr"], warmup=cfg["warmup"], weight_decay=cfg["weight_decay"], seed=s,
                                 eval_fn=val_metrics, eval_every=cfg["val_every"], desc=f"{arm} / seed {s}")
            stored = s in cfg["weight_seeds"]
            if stored:  # evaluate exactly the weights that are stored: float16, large matrices int8 per row
                sd = {k: v.half() for k, v in model.state_dict().items()}
                model.load_state_dict({k: v.float() for k, v in checkpoints.int8_roundtrip(sd).items()})
                tensors.update({f"{key}.{k}": v for k, v in sd.items()})
            acc = {}
            for n, task in tests.items():
                hit, loss = tr.retrieval_scores(model, task, chunk=8)
                tensors[f"{key}.eval_correct_{n}"] = hit[:, 0].to(torch.uint8)  # 1-D: never quantized
                tensors[f"{key}.eval_loss_{n}"] = loss[:, 0]
                acc[str(n)] = float(hit.float().mean())
            for c in ("val_loss", "val_acc"):
                history[f"{key}/{c}"] = hist.evals[c]
            metrics[key] = dict(final_val_loss=hist.evals["val_loss"][-1][1],
                                final_val_acc=hist.evals["val_acc"][-1][1],
                                plateau=train.plateau([v for _, v in hist.evals["val_loss"]]),
                                accuracy=acc, weights_stored=stored)
            timing[key] = round(time.time() - t_arm, 1)
            print(f"{key}: val acc {metrics[key]['final_val_acc']:.3f} plateau {metrics[key]['plateau']:.4f} "
                  f"acc {acc} ({timing[key]} s)", flush=True)
    path = checkpoints.save(
        SLUG, args.name, tensors, config=cfg, metrics=metrics, history=history, seed=cfg["seeds"],
        steps=cfg["steps"], wall_seconds=time.time() - t0, sources=SOURCES, module="helpers.tree_rope",
        extra=dict(seconds_per_run=timing, tiny=args.tiny), root=out, dtype=torch.float16, quantize="int8")
    print(f"wrote {path} ({path.with_suffix('.safetensors').stat().st_size / 2**10:.0f} kB) in "
          f"{time.time() - t0:.0f} s", flush=True)
    return path


def main(argv: list[str] | None = None) -> list[Path]:
    return scripts.script_main(build, config=tr.checkpoint_config, tiny=tiny_config, names=["retrieval"],
                               doc=__doc__, argv=argv)


if __name__ == "__main__":
    main()
