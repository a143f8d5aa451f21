"""SAIL started from the surrogate, on a few hundred RDKit molecules, trained through PySCF's J/K build
(chapter 17_sail_scf). One checkpoint per seed: ``sail_ft_0``, ``sail_ft_1``, ``sail_ft_2``.

For seed ``s``: the Hamiltonian-head surrogate of the ``guesses`` checkpoint (seed ``s``) is first fine-tuned with
ground-state supervision (``steps_surrogate`` steps, target: the converged RHF Fock matrix) on ``n_mols`` random
closed-shell molecules with at most 6 heavy atoms (:func:`helpers.sail_scf.random_smiles`, embedded by RDKit
ETKDG + MMFF like the chapter's OOD molecules; none of them is an OOD molecule; ``n_held`` held out); SAIL then
starts from that fine-tuned surrogate (``steps_sail`` steps) on the same molecules. The unrolled SCF builds its
Fock matrices with PySCF's own J/K routine (:class:`helpers.sail_scf.JKEngine`, backward = one more J/K build),
RHF/STO-3G. Molecules whose reference RHF does not converge are dropped (listed in the manifest). Tensors ``hamiltonian/surrogate_ft/<s>.<param>`` and ``hamiltonian/sail_ft/<s>.<param>`` (float32);
the manifest holds the config, both loss curves, the held-out SAIL loss before and after and the molecule lists.

Run from the repository root, one seed per job: ``.venv/bin/python data/17_sail_scf/make_sail_ft.py --name
sail_ft_0`` (or ``make data NB=17_sail_scf``, all three). ``--tiny``: a few molecules and steps into a temporary
folder (seconds). One torch thread and one PySCF thread.
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


def tiny(name: str = "sail_ft_0") -> dict:
    cfg = copy.deepcopy(ss.checkpoint_config(name))
    cfg.update(n_mols=8, n_held=2, steps_surrogate=2, steps_sail=2, unroll=2, warmup=0)
    return cfg


def make_sail_ft(cfg: dict, out: Path | None, args: object = None) -> Path:
    lib.num_threads(1)
    torch.set_num_threads(1)
    t0 = time.time()
    (s,) = cfg["seeds"]
    mols, train_smi, held_smi = ss.ft_molecules(cfg)
    samples, held, dropped = {}, {}, []
    for group, dest in ((train_smi, samples), (held_smi, held)):
        for k in group:
            try:
                dest[k] = ss.sample(mols[k], eri="jk")
            except ValueError:  # the reference RHF did not converge: no target, no molecule
                dropped.append(k)
    train_smi, held_smi = list(samples), list(held)
    samples, held = list(samples.values()), list(held.values())
    print(f"{len(samples)} training / {len(held)} held-out molecules ({len(dropped)} dropped: reference RHF "
          f"not converged) in {time.time() - t0:.0f} s", flush=True)
    base = ss.checkpoint_config("guesses")
    ck = checkpoints.load(SLUG, "guesses", config=base)
    init = ss.GuessModel(cfg["head"], hidden=base["hidden"])
    ck.load_into(init, prefix=f"{cfg['head']}/surrogate/{s}.")

    def held_sail(model):
        with torch.no_grad():
            return float(ss.sail_loss(model, held, int(cfg["unroll"])).item())

    sur, h_sur = ss.train_guess(cfg["head"], "surrogate", samples, cfg, s, init=init)
    print(f"surrogate_ft: loss {h_sur.loss[0]:.4g} -> {np.mean(h_sur.loss[-20:]):.4g} ({time.time() - t0:.0f} s)",
          flush=True)
    sail, h_sail = ss.train_guess(cfg["head"], "sail", samples, cfg, s, init=sur)
    metrics = {
        "final_loss/surrogate_ft": float(np.mean(h_sur.loss[-20:])),
        "final_loss/sail_ft": float(np.mean(h_sail.loss[-20:])),
        "held_sail_loss/init": held_sail(init), "held_sail_loss/surrogate_ft": held_sail(sur),
        "held_sail_loss/sail_ft": held_sail(sail), "n_train": len(samples), "n_held": len(held),
    }
    print(metrics, f"({time.time() - t0:.0f} s)", flush=True)
    tensors = {}
    for obj, model in (("surrogate_ft", sur), ("sail_ft", sail)):
        for k, v in model.state_dict().items():
            tensors[f"{cfg['head']}/{obj}/{s}.{k}"] = v.detach().clone()
    history = {f"loss/{cfg['head']}/surrogate_ft/{s}": h_sur.loss, f"loss/{cfg['head']}/sail_ft/{s}": h_sail.loss}
    return checkpoints.save(SLUG, args.name if args is not None else f"sail_ft_{s}", tensors, config=cfg,
                            metrics=metrics, history=history, seed=s, steps=cfg["steps_sail"],
                            wall_seconds=time.time() - t0, sources=SOURCES, module="helpers.sail_scf", root=out,
                            dtype=torch.float32,
                            extra=dict(train_smiles=train_smi, held_smiles=held_smi, dropped_smiles=dropped,
                                       init_sha256=ck.manifest["weights"]["sha256"]))


def main(argv: list[str] | None = None) -> list[Path]:
    return scripts.script_main(make_sail_ft, config=ss.checkpoint_config, tiny=tiny, names=list(ss.FT_NAMES),
                               doc=__doc__, argv=argv)


if __name__ == "__main__":
    main()
