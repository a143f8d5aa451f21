"""Measure the doubling look-ahead networks of chapter 12_transformer_dfs on large grids, which does not fit its
5-minute default run, and write the measurements with :mod:`helpers.checkpoints` (no weights: the networks are
set by hand):

* ``lookahead_<seed>``: :func:`~helpers.transformer_dfs.doubling_grid_run` for one seed: the hand-built
  :class:`~helpers.transformer_dfs.DoublingDFS` networks (horizons 1 to 16, 2 to 6 attention layers) rolled out
  on shuffled 20 x 20 grids between nodes at least 16 edges apart. Tensors ``length`` (pairs x horizons, the
  networks' steps until t), ``dist`` (the shortest s -> t path) and ``same`` (trace equal to the rule's).

Run from the repository root: ``.venv/bin/python data/12_transformer_dfs/make_lookahead.py --name lookahead_0``
(or ``make data NB=12_transformer_dfs``). ``--tiny``: a small grid into a temporary folder (seconds).
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
NAMES = ["lookahead_0", "lookahead_1", "lookahead_2"]


def tiny(name: str = "lookahead_0") -> dict:
    cfg = copy.deepcopy(dfs.checkpoint_config(name))
    cfg.update(side=5, pairs=2, min_dist=4, horizons=[1, 2, 4])
    return cfg


def make_lookahead(cfg: dict, out: Path | None, args: object = None) -> Path:
    t0 = time.time()
    (s,) = cfg["seeds"]
    res = dfs.doubling_grid_run(cfg, s)
    tensors = {"length": torch.from_numpy(res["length"]), "dist": torch.from_numpy(res["dist"]),
               "same": torch.from_numpy(res["same"].astype("uint8"))}
    metrics = {f"mean_length/h{h}": float(res["length"][:, j].mean()) for j, h in enumerate(cfg["horizons"])}
    metrics["mean_dist"] = float(res["dist"].mean())
    metrics["same_as_rule"] = float(res["same"].mean())
    print(f"seed {s}: {metrics} ({time.time() - t0:.0f} s)", flush=True)
    name = getattr(args, "name", f"lookahead_{s}")
    return checkpoints.save(SLUG, name, tensors, config=cfg, metrics=metrics, seed=cfg["seeds"],
                            wall_seconds=time.time() - t0, sources=SOURCES, module="helpers.transformer_dfs",
                            root=out)


def main(argv: list[str] | None = None) -> list[Path]:
    return scripts.script_main(make_lookahead, config=dfs.checkpoint_config, tiny=tiny, names=NAMES, doc=__doc__,
                               argv=argv)


if __name__ == "__main__":
    main()
