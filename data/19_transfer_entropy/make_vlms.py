"""Train chapter 19_transfer_entropy's toy vision-language models (three seeds), which do not fit its 5-minute
default run next to the MiniLM analysis, and write them with :mod:`helpers.checkpoints` as ``vlms``.

Run from the repository root: ``.venv/bin/python data/19_transfer_entropy/make_vlms.py`` (or
``make data NB=19_transfer_entropy``). ``--tiny`` trains a tiny config for a few steps into a temporary folder
(seconds; what the tests run). One torch thread: the same seed on the same machine writes the same weights.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from helpers import checkpoints, repro
from helpers import transfer_entropy as te

SLUG = "19_transfer_entropy"
HERE = Path(__file__).resolve()
SOURCES = [HERE]


def config(tiny: bool = False) -> dict:
    cfg = te.checkpoint_config("vlms")
    if tiny:
        cfg.update(seeds=[0], steps=3, d_model=16, n_layer=1, n_head=2, batch_size=8, warmup=1)
    return cfg


def main(argv: list[str] | None = None) -> Path:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tiny", action="store_true", help="a few steps of a tiny config, into a temporary folder")
    ap.add_argument("--out", type=Path, default=None, help="data root to write <slug>/vlms.* into")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    repro.set_threads(1)
    out = args.out if args.out is not None else (Path(tempfile.mkdtemp(prefix="te_vlms_")) if args.tiny else None)
    cfg = config(args.tiny)
    tensors, history, metrics = {}, {}, {}
    t0 = time.time()
    for s in cfg["seeds"]:
        data = te.digits_vqa(s)
        model, losses = te.train_vlm(data["train"], s, cfg)
        for k, v in model.state_dict().items():
            tensors[f"{s}.{k}"] = v
        history[f"loss/{s}"] = losses
        with torch.no_grad():
            p, q, a = data["test"]
            metrics[f"test_accuracy/{s}"] = float((model(p, q).argmax(-1) == a).float().mean())
        metrics[f"final_loss/{s}"] = float(np.mean(losses[-20:]))
        print(f"seed {s}: test accuracy {metrics[f'test_accuracy/{s}']:.3f}")
    path = checkpoints.save(SLUG, "vlms", tensors, config=cfg, metrics=metrics, history=history, seed=cfg["seeds"],
                            steps=cfg["steps"], wall_seconds=time.time() - t0, sources=SOURCES,
                            module="helpers.transfer_entropy", root=out)
    print("wrote", path)
    return path


if __name__ == "__main__":
    main()
