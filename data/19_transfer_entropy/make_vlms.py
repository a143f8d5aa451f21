"""Train chapter 19_transfer_entropy's toy vision-language models (three seeds), which do not fit its 5-minute
default run next to the MiniLM analysis, and write them with :mod:`helpers.checkpoints`: ``vlms`` (4 blocks,
the pruning experiments) and ``vlms8`` (8 blocks, the depth profile of vision -> text TE).

Run from the repository root: ``.venv/bin/python data/19_transfer_entropy/make_vlms.py`` (or
``make data NB=19_transfer_entropy``). ``--tiny`` trains a tiny config for a few steps into a temporary folder
(seconds; what the tests run); ``--seeds``/``--out``: other seeds into another data root.
One torch thread: the same seed on the same machine writes the same weights.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import torch

from helpers import checkpoints, scripts
from helpers import transfer_entropy as te

SLUG = "19_transfer_entropy"
HERE = Path(__file__).resolve()
SOURCES = [HERE, Path(te.__file__).resolve()]  # the model it trains lives in the chapter's module


def tiny(name: str = "vlms") -> dict:
    cfg = te.checkpoint_config(name)
    cfg.update(seeds=[0], steps=3, d_model=16, n_layer=1, n_head=2, batch_size=8, warmup=1)
    return cfg


def make_vlms(cfg: dict, out: Path | None, args: object = None) -> Path:
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
    name = getattr(args, "name", "vlms")
    return checkpoints.save(SLUG, name, tensors, config=cfg, metrics=metrics, history=history, seed=cfg["seeds"],
                            steps=cfg["steps"], wall_seconds=time.time() - t0, sources=SOURCES,
                            module="helpers.transfer_entropy", root=out)


def main(argv: list[str] | None = None) -> list[Path]:
    return scripts.script_main(make_vlms, config=te.checkpoint_config, tiny=tiny, names=["vlms", "vlms8"], doc=__doc__,
                               argv=argv)


if __name__ == "__main__":
    main()
