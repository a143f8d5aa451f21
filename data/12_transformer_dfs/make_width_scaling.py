"""Train the width scaling of chapter 12_transformer_dfs, which does not fit its 5-minute default run, and write
it with :mod:`helpers.checkpoints`:

* ``width_scaling``: the construction's two-layer architecture (:class:`~helpers.transformer_dfs.StructuredDFS`)
  and its one-layer counterpart (:class:`~helpers.transformer_dfs.StructuredOneLayer`, the same parameters
  ``W1, W2, gamma, sink``) at every sign-embedding width ``d`` of ``dims`` and graph size ``N`` of ``Ns``,
  trained by full-batch Adam on curated DFS states, one run per (N, d, model, seed); every width of a (N, seed)
  sees the same states (:func:`~helpers.transformer_dfs.width_scaling_data`). Tensors
  ``<model>/N<N>/d<d>/<seed>.<param>`` and ``emb/N<N>/d<d>/<seed>``.
* ``width_wide_<seed>``: the same run at N = 32 extended to the widths ``train_dims`` (32 and 48; same states and,
  for the old widths, the same embeddings), the one-layer model only, one seed per checkpoint so that each is
  one training job. Saved with ``quantize="int8"``, which applies only to tensors of at least
  ``helpers.checkpoints.QUANTIZE_MIN_NUMEL`` values: none at widths 32 and 48, so the weights are float32.

Run from the repository root: ``.venv/bin/python data/12_transformer_dfs/make_width_scaling.py`` (or
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


def tiny(name: str = "width_scaling") -> dict:
    cfg = copy.deepcopy(dfs.checkpoint_config(name))
    cfg.update(Ns=[8], dims=[4, 8], n_train=40, n_test=30, steps=4, eval_every=2)
    if "train_dims" in cfg:
        cfg["train_dims"] = [8]
    else:
        cfg["seeds"] = [0]
    return cfg


def make_width_scaling(cfg: dict, out: Path | None, args: object = None) -> Path:
    tensors, history, metrics = {}, {}, {}
    t0 = time.time()
    for s in cfg["seeds"]:
        for N in cfg["Ns"]:
            train_items, test_items, embs = dfs.width_scaling_data(cfg, N, s)
            tb, b = dfs.structured_batch(test_items), dfs.structured_batch(train_items)
            for d, emb in embs.items():
                if d not in cfg.get("train_dims", cfg["dims"]):
                    continue
                tensors[f"emb/N{N}/d{d}/{s}"] = torch.tensor(emb, dtype=torch.float32)
                for kind in cfg["models"]:
                    key = f"{kind}/N{N}/d{d}/{s}"
                    with repro.seeded(s):
                        model = dfs.make_structured(kind, emb, cfg)
                        hist = dfs.gradient_flow(model, b, cfg["steps"], cfg["lr"], {"train": b},
                                                 eval_every=cfg["eval_every"], method=cfg["method"])
                    for k, v in model.state_dict().items():
                        if k != "E":
                            tensors[f"{key}.{k}"] = v.detach().clone()
                    with torch.no_grad():
                        logits = model(tb)
                    valid = float(dfs.valid_moves(logits, tb).float().mean())
                    exact = dfs.move_accuracy(logits, tb)["all"]
                    history[f"loss/{key}"] = hist["loss"]
                    metrics[f"train_all/{key}"] = hist["train/all"][-1]
                    metrics[f"test_exact/{key}"] = exact
                    metrics[f"test_valid/{key}"] = valid
                    print(f"seed {s} N={N} d={d} {kind}-layer: train {hist['train/all'][-1]:.3f}, unseen graphs "
                          f"exact {exact:.3f}, valid {valid:.3f}, loss {hist['loss'][-1]:.3f} "
                          f"({time.time() - t0:.0f} s)", flush=True)
    name = getattr(args, "name", "width_scaling")
    return checkpoints.save(SLUG, name, tensors, config=cfg, metrics=metrics, history=history,
                            seed=cfg["seeds"], steps=cfg["steps"], wall_seconds=time.time() - t0, sources=SOURCES,
                            module="helpers.transformer_dfs", root=out,
                            quantize="int8" if name.startswith("width_wide_") else None)


def main(argv: list[str] | None = None) -> list[Path]:
    return scripts.script_main(make_width_scaling, config=dfs.checkpoint_config, tiny=tiny,
                               names=["width_scaling", "width_wide_0", "width_wide_1", "width_wide_2"],
                               doc=__doc__, argv=argv)


if __name__ == "__main__":
    main()
