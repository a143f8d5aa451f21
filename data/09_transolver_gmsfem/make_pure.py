"""Train the pure neural solvers of chapter 09_transolver_gmsfem (the baseline), which do not fit its 5-minute
default run, and write them with :mod:`helpers.checkpoints`:

* ``pure``: one Transolver per seed (0, 1, 2) mapping ``[x, y, log10 kappa / 4, f]`` at every fine node to
  ``u / 0.05``, trained on relative squared error over 200 fine solutions whose forcing is varied (``1`` plus
  random low sine modes, :func:`helpers.transolver_gmsfem.forcing` ``"smooth"``) and whose coefficients come from
  the training distribution, each step on a random subset of the nodes (``points``); tensors
  ``pure/<seed>.<param>``. The manifest stores the loss curves and the relative L2 error on ``test_pairs``
  held-out pairs (coefficient/forcing seeds from ``test_seed0``) over training.

Run from the repository root: ``.venv/bin/python data/09_transolver_gmsfem/make_pure.py`` (or
``make data NB=09_transolver_gmsfem``). ``--tiny`` trains a tiny config for a few steps into a temporary folder
(seconds; what the tests run); ``--seeds``/``--out``: other seeds into another data root.
One torch thread: the same seed on the same machine writes byte-identical weights.
"""

from __future__ import annotations

import copy
import time
from pathlib import Path

from helpers import checkpoints, scripts
from helpers import transolver_gmsfem as tg

SLUG = tg.CHECKPOINT_SLUG
HERE = Path(__file__).resolve()
SOURCES = [HERE, Path(tg.__file__).resolve()]


def tiny(name: str = "pure") -> dict:
    cfg = copy.deepcopy(tg.checkpoint_config("pure"))
    cfg.update(n_fine=16, pairs=3, test_pairs=2, dim=16, layers=1, slices=4, steps=3, seeds=[0])
    return cfg


def make_pure(cfg: dict, out: Path | None, args: object = None) -> Path:
    t0 = time.time()
    X, Y = tg.pure_dataset(cfg, cfg["pairs"])
    Xt, Yt = tg.pure_dataset(dict(cfg, field_seed0=cfg["test_seed0"]), cfg["test_pairs"])
    print(f"{len(X)} training pairs, {len(Xt)} held-out pairs ({time.time() - t0:.0f} s)", flush=True)
    tensors, history, metrics = {}, {}, {}
    for s in cfg["seeds"]:
        model, hist = tg.train_pure(cfg, X, Y, s, test=(Xt, Yt))
        for k, v in model.state_dict().items():
            tensors[f"pure/{s}.{k}"] = v.detach().clone()
        history[f"loss/{s}"] = hist.loss
        history[f"test_rel_l2/{s}"] = hist.evals["test_rel_l2"]
        metrics[f"final_loss/{s}"] = sum(hist.loss[-20:]) / len(hist.loss[-20:])
        metrics[f"test_rel_l2/{s}"] = hist.evals["test_rel_l2"][-1][1]
        metrics[f"params/{s}"] = sum(p.numel() for p in model.parameters())
        print(f"seed {s}: loss (last 20 steps) {metrics[f'final_loss/{s}']:.4f}, held-out rel L2 "
              f"{metrics[f'test_rel_l2/{s}']:.4f} ({time.time() - t0:.0f} s)", flush=True)
    return checkpoints.save(SLUG, "pure", tensors, config=cfg, metrics=metrics, history=history,
                            seed=cfg["seeds"], steps=cfg["steps"], wall_seconds=time.time() - t0, sources=SOURCES,
                            module="helpers.transolver_gmsfem", root=out)


def main(argv: list[str] | None = None) -> list[Path]:
    return scripts.script_main(make_pure, config=tg.checkpoint_config, tiny=tiny, names=["pure"], doc=__doc__,
                               argv=argv)


if __name__ == "__main__":
    main()
