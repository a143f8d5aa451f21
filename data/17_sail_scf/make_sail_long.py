"""SAIL with a longer unroll for DIIS's later cycles (chapter 17_sail_scf): each seed's stored ``sail_ft_<seed>``
model continued at 12 unrolled SCF cycles (``sail_t12_<seed>``) and, as the control for "more steps", at the
same 6 cycles it was trained with (``sail_t6c_<seed>``).

Both continue from the float32 weights of ``sail_ft_<seed>`` on its training molecules (the manifest's
``train_smiles``), ``steps`` steps at the constant floor learning rate of its tail (``lr``, fresh AdamW moments,
``warmup`` warm-up steps), batches of ``batch`` drawn by the same seeded draw from step ``step_offset`` (the
step after ``sail_ft``'s last), so both unrolls of a seed see the same batches: only the number of unrolled
cycles differs (:func:`helpers.sail_scf.sail_continue`). RHF/STO-3G, Fock builds through PySCF's J/K routine.
One float32 tensor set ``hamiltonian/sail_t12/<s>.<param>`` (or ``sail_t6c``); the manifest holds the config and
the loss curve (``CURVE_POINTS`` bin means). One torch thread and one PySCF thread.

Run from the repository root, one seed per job (both of its checkpoints share the training molecules' RHF
references, built once): ``.venv/bin/python data/17_sail_scf/make_sail_long.py --name sail_t12_0 sail_t6c_0``. ``--tiny``: a few molecules and steps into a temporary folder (seconds).
"""

from __future__ import annotations

import copy
import time
from pathlib import Path

import numpy as np
import torch
from pyscf import lib

from helpers import checkpoints, scripts
from helpers import sail_scf as ss

SLUG = "17_sail_scf"
HERE = Path(__file__).resolve()
SOURCES = [HERE, Path(ss.__file__).resolve()]
CURVE_POINTS = 100  # the stored loss curve: means over 15-step bins (the chapter's data budget is small)
_SAMPLES: dict = {}  # (start, n_train) -> samples: both checkpoints of a seed in one job build them once


def tiny(name: str = "sail_t12_0") -> dict:
    cfg = copy.deepcopy(ss.checkpoint_config(name))
    cfg.update(steps=2, warmup=0, n_train=6)
    return cfg


def make_sail_long(cfg: dict, out: Path | None, args: object = None) -> Path:
    lib.num_threads(1)
    torch.set_num_threads(1)
    t0 = time.time()
    (s,) = cfg["seeds"]
    name = args.name if args is not None else f"sail_t{cfg['unroll']}_{s}"
    kind = name.rsplit("_", 1)[0]
    start_cfg = ss.checkpoint_config(cfg["start"])
    # the starting model always comes from the repository's data (also in --tiny)
    ck = checkpoints.load(SLUG, cfg["start"], config=start_cfg)
    model = ss.GuessModel(cfg["head"], hidden=cfg["hidden"])
    ck.load_into(model, prefix=f"{cfg['head']}/sail_ft/{s}.")
    mols, _, _ = ss.ft_molecules(start_cfg)
    train_smi = ck.manifest["extra"]["train_smiles"][: cfg.get("n_train")]
    key = (cfg["start"], cfg.get("n_train"))
    if key not in _SAMPLES:
        _SAMPLES[key] = [ss.sample(mols[k], eri="jk") for k in train_smi]
    samples = _SAMPLES[key]
    print(f"{len(samples)} training molecules ({time.time() - t0:.0f} s)", flush=True)
    run_cfg = {k: v for k, v in cfg.items() if k != "n_train"}
    model, hist = ss.sail_continue(model, samples, run_cfg, s)
    metrics = {"final_loss": float(np.mean(hist.loss[-20:])), "first_loss": float(np.mean(hist.loss[:20])),
               "n_train": len(samples)}
    print(metrics, f"({time.time() - t0:.0f} s)", flush=True)
    curve = checkpoints.subsample(hist.loss, CURVE_POINTS)
    curve = {"step": curve["step"], "value": curve["value"]}
    tensors = {f"{cfg['head']}/{kind[5:]}/{s}.{k}": v.detach().clone() for k, v in model.state_dict().items()}
    return checkpoints.save(SLUG, name, tensors, config=cfg, metrics=metrics,
                            history={f"loss/{cfg['head']}/{kind[5:]}/{s}": curve}, seed=s,
                            steps=cfg["steps"], wall_seconds=time.time() - t0, sources=SOURCES,
                            module="helpers.sail_scf", root=out, dtype=torch.float32,
                            extra=dict(start_sha256=ck.manifest["weights"]["sha256"]))


def main(argv: list[str] | None = None) -> list[Path]:
    return scripts.script_main(make_sail_long, config=ss.checkpoint_config, tiny=tiny, names=list(ss.LONG_NAMES),
                               doc=__doc__, argv=argv)


if __name__ == "__main__":
    main()
