"""Train the width-limited comparison of chapter 12_transformer_dfs, which does not fit its 5-minute default run,
and write it with :mod:`helpers.checkpoints`:

* ``width_limited``: the construction's two-layer architecture (:class:`~helpers.transformer_dfs.StructuredDFS`)
  and its one-layer counterpart (:class:`~helpers.transformer_dfs.StructuredOneLayer`, the same parameters
  ``W1, W2, gamma, sink``) on 16-node graphs with sign embeddings of width 8 = N/2, trained by full-batch Adam on
  curated DFS states, one run per seed (tensors ``<model>/<seed>.<param>`` and the embeddings ``emb/<seed>``).

Run from the repository root: ``.venv/bin/python data/12_transformer_dfs/make_width_limited.py`` (or
``make data NB=12_transformer_dfs``). ``--tiny`` trains a tiny config for a few steps into a temporary folder
(seconds; what the tests run); ``--seeds``/``--out``: other seeds into another data root.
One torch thread: the same seed on the same machine writes byte-identical weights.
"""

from __future__ import annotations

import copy
import time
from pathlib import Path

import torch

from helpers import checkpoints, repro, scripts
from helpers import transformer_dfs as dfs

SLUG = dfs.CHECKPOINT_SLUG
HERE = Path(__file__).resolve()
SOURCES = [HERE, Path(dfs.__file__).resolve(), Path(repro.__file__).resolve()]


def tiny(name: str = "width_limited") -> dict:
    cfg = copy.deepcopy(dfs.checkpoint_config("width_limited"))
    cfg.update(N=8, d=4, n_train=40, n_test=30, steps=4, seeds=[0], eval_every=2)
    return cfg


def make_width_limited(cfg: dict, out: Path | None, args: object = None) -> Path:
    tensors, history, metrics = {}, {}, {}
    t0 = time.time()
    for s in cfg["seeds"]:
        train_items, test_items, emb = dfs.width_limited_data(cfg, s)
        tb, b = dfs.structured_batch(test_items), dfs.structured_batch(train_items)
        tensors[f"emb/{s}"] = torch.tensor(emb, dtype=torch.float32)
        for kind in cfg["models"]:
            with repro.seeded(s):
                model = dfs.make_structured(kind, emb, cfg)
                hist = dfs.gradient_flow(model, b, cfg["steps"], cfg["lr"], {"train": b, "test": tb},
                                         eval_every=cfg["eval_every"], method=cfg["method"])
            for k, v in model.state_dict().items():
                if k != "E":
                    tensors[f"{kind}/{s}.{k}"] = v.detach().clone()
            history[f"loss/{kind}/{s}"] = hist["loss"]
            history[f"test/{kind}/{s}"] = hist["test/all"]
            for split in ("all", "child", "backtrack"):
                metrics[f"train_{split}/{kind}/{s}"] = hist[f"train/{split}"][-1]
                metrics[f"test_{split}/{kind}/{s}"] = hist[f"test/{split}"][-1]
            print(f"seed {s} {kind}-layer: train {hist['train/all'][-1]:.3f}, test {hist['test/all'][-1]:.3f} "
                  f"(child {hist['test/child'][-1]:.3f}, backtrack {hist['test/backtrack'][-1]:.3f}), "
                  f"loss {hist['loss'][-1]:.3f}", flush=True)
    return checkpoints.save(SLUG, "width_limited", tensors, config=cfg, metrics=metrics, history=history,
                            seed=cfg["seeds"], steps=cfg["steps"], wall_seconds=time.time() - t0, sources=SOURCES,
                            module="helpers.transformer_dfs", root=out)


def main(argv: list[str] | None = None) -> list[Path]:
    return scripts.script_main(make_width_limited, config=dfs.checkpoint_config, tiny=tiny, names=["width_limited"],
                               doc=__doc__, argv=argv)


if __name__ == "__main__":
    main()
