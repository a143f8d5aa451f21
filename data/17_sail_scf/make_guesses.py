"""Train the guess models of chapter 17_sail_scf, which do not fit its 5-minute default run, and write them with
:mod:`helpers.checkpoints`:

* ``guesses``: :class:`~helpers.sail_scf.GuessModel` with both heads (Hamiltonian on the SAP prior, density on the
  MINAO prior), each trained with both objectives (ground-state ``surrogate`` supervision and label-free ``sail``)
  under seeds 0, 1, 2, on ASE G2 molecules with at most 4 heavy atoms and their perturbed copies (RHF/STO-3G).
  Tensors ``<head>/<objective>/<seed>.<param>``; the manifest holds the config, the loss curves and the final
  smoothed losses.

Run from the repository root: ``.venv/bin/python data/17_sail_scf/make_guesses.py`` (or ``make data
NB=17_sail_scf``). ``--tiny`` trains a tiny config for a few steps into a temporary folder (seconds; what the
tests run); ``--seeds``/``--out``: other seeds into another data root. One torch thread and one PySCF thread.
"""

from __future__ import annotations

import copy
import time
from pathlib import Path

import numpy as np
from pyscf import lib

from helpers import checkpoints, scripts
from helpers import sail_scf as ss

SLUG = "17_sail_scf"
HERE = Path(__file__).resolve()
SOURCES = [HERE, Path(ss.__file__).resolve()]


def tiny(name: str = "guesses") -> dict:
    cfg = copy.deepcopy(ss.checkpoint_config("guesses"))
    cfg.update(n_train=3, n_perturb=0, seeds=[0], steps_surrogate=2, steps_sail=2, unroll=2, hidden=4, warmup=0)
    return cfg


def make_guesses(cfg: dict, out: Path | None, args: object = None) -> Path:
    lib.num_threads(1)  # PySCF's own threads
    t0 = time.time()
    samples, train_names, test_names = ss.training_samples(cfg, progress=True)
    print(f"{len(samples)} training samples ({len(train_names)} molecules) in {time.time() - t0:.0f} s", flush=True)
    tensors, history, metrics = {}, {}, {}
    for s in cfg["seeds"]:
        for head in cfg["heads"]:
            for obj in cfg["objectives"]:
                model, hist = ss.train_guess(head, obj, samples, cfg, s)
                key = f"{head}/{obj}/{s}"
                for k, v in model.state_dict().items():
                    tensors[f"{key}.{k}"] = v.detach().clone()
                history[f"loss/{key}"] = hist.loss
                metrics[f"final_loss/{key}"] = float(np.mean(hist.loss[-20:]))
                print(f"{key}: loss {hist.loss[0]:.4g} -> {metrics[f'final_loss/{key}']:.4g} "
                      f"({time.time() - t0:.0f} s)", flush=True)
    metrics["n_samples"] = len(samples)
    return checkpoints.save(SLUG, "guesses", tensors, config=cfg, metrics=metrics, history=history,
                            seed=cfg["seeds"], steps=cfg["steps_sail"], wall_seconds=time.time() - t0,
                            sources=SOURCES, module="helpers.sail_scf", root=out,
                            extra=dict(train_names=train_names, test_names=test_names))


def main(argv: list[str] | None = None) -> list[Path]:
    return scripts.script_main(make_guesses, config=ss.checkpoint_config, tiny=tiny, names=["guesses"], doc=__doc__,
                               argv=argv)


if __name__ == "__main__":
    main()
