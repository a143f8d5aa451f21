"""Train the pure neural solvers of chapter 09_transolver_gmsfem (the baseline), which do not fit its 5-minute
default run, and write them with :mod:`helpers.checkpoints`, one checkpoint per model seed:

* ``pure_s<k>`` (k = 0, 1, 2): the network of ``checkpoint_config("pure_s<k>")`` (an FNO with CP-factorised
  spectral weights, :class:`helpers.transolver_gmsfem.FNO`, via ``make_pure_net``) on the 65 x 65 node grid
  mapping ``[x, y, log10 kappa / 4, f]`` to ``u / 0.05``, trained on the relative squared error over 2 000 fine
  FEM solutions (coefficients from the training distribution, forcing ``1`` plus random low sine modes,
  :func:`helpers.transolver_gmsfem.forcing` ``"smooth"``), each pair under a random symmetry of the square;
  tensors ``pure/<k>.<param>``, stored as int8. The manifest stores the loss curve, the relative L2 error on
  ``test_pairs`` held-out pairs over training, the error on the first 64 training pairs and on ``val_pairs``
  validation pairs with ``f = 1`` (float and int8 weights), and the seconds the FEM solves that made the data took.

Run from the repository root: ``.venv/bin/python data/09_transolver_gmsfem/make_pure.py --name pure_s0`` (or
``make data NB=09_transolver_gmsfem``). ``--tiny`` trains a tiny config for a few steps into a temporary folder
(seconds; what the tests run); ``--out``: another data root.
One torch thread: the same seed on the same machine writes byte-identical weights.
"""

from __future__ import annotations

import copy
import time
from pathlib import Path

from threadpoolctl import threadpool_limits

from helpers import checkpoints, scripts
from helpers import transolver_gmsfem as tg

SLUG = tg.CHECKPOINT_SLUG
HERE = Path(__file__).resolve()
SOURCES = [HERE, Path(tg.__file__).resolve()]


def tiny(name: str = "pure_s0") -> dict:
    cfg = copy.deepcopy(tg.checkpoint_config(name))
    cfg.update(n_fine=16, pairs=3, test_pairs=2, val_pairs=2, width=4, modes=3, rank=2, steps=3, batch=2)
    return cfg


def make_pure(cfg: dict, out: Path | None, args: object = None) -> Path:
    t0 = time.time()
    with threadpool_limits(1):
        X, Y = tg.grid_dataset(cfg, cfg["pairs"])
    t_data = time.time() - t0
    Xt, Yt = tg.grid_dataset(dict(cfg, field_seed0=cfg["test_seed0"]), cfg["test_pairs"])
    Xv, Yv = tg.grid_dataset(dict(cfg, field_seed0=cfg["val_seed0"], forcing="constant"), cfg["val_pairs"])
    print(f"{len(X)} training pairs in {t_data:.0f} s ({1e3 * t_data / len(X):.0f} ms per pair: coefficient, "
          f"assembly, fine solve), {len(Xt)} held-out pairs", flush=True)
    (s,) = cfg["seeds"]
    model, hist = tg.train_pure(cfg, X, Y, s, test=(Xt, Yt))
    tensors = {f"pure/{s}.{k}": v.detach().clone() for k, v in model.state_dict().items()}
    metrics = {"final_loss": sum(hist.loss[-50:]) / len(hist.loss[-50:]),
               "test_rel_l2": hist.evals["test_rel_l2"][-1][1], "params": model.n_params,
               "train_rel_l2": float(tg.pure_rel_l2(model, X[:64], Y[:64]).mean()),
               "val_f1_rel_l2": float(tg.pure_rel_l2(model, Xv, Yv).mean()),
               "data_seconds": round(t_data, 1), "train_seconds": round(time.time() - t0 - t_data, 1)}
    print(f"seed {s}: loss (last 50 steps) {metrics['final_loss']:.4f}, held-out rel L2 "
          f"{metrics['test_rel_l2']:.4f}, first 64 training pairs {metrics['train_rel_l2']:.4f}, f = 1 "
          f"validation {metrics['val_f1_rel_l2']:.4f} ({time.time() - t0:.0f} s)", flush=True)
    history = {"loss": hist.loss, "test_rel_l2": hist.evals["test_rel_l2"]}

    def save() -> Path:
        return checkpoints.save(SLUG, f"pure_s{s}", tensors, config=cfg, metrics=metrics, history=history,
                                seed=cfg["seeds"], steps=cfg["steps"], wall_seconds=time.time() - t0,
                                sources=SOURCES, module="helpers.transolver_gmsfem", quantize="int8", root=out)

    save()  # then the held-out error of the weights as stored (int8), what the chapter loads
    stored = checkpoints.load(SLUG, f"pure_s{s}", config=cfg, root=out).load_into(tg.make_pure_net(cfg),
                                                                                  prefix=f"pure/{s}.")
    metrics["test_rel_l2_int8"] = float(tg.pure_rel_l2(stored, Xt, Yt).mean())
    metrics["val_f1_rel_l2_int8"] = float(tg.pure_rel_l2(stored, Xv, Yv).mean())
    print(f"int8 weights: held-out rel L2 {metrics['test_rel_l2_int8']:.4f}, f = 1 validation "
          f"{metrics['val_f1_rel_l2_int8']:.4f}", flush=True)
    return save()


def main(argv: list[str] | None = None) -> list[Path]:
    return scripts.script_main(make_pure, config=tg.checkpoint_config, tiny=tiny, names=list(tg.PURE_NAMES),
                               doc=__doc__, argv=argv)


if __name__ == "__main__":
    main()
