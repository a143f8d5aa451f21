"""SAIL started from the surrogate, on a few hundred RDKit molecules, trained through PySCF's J/K build
(chapter 17_sail_scf). One checkpoint per seed: ``sail_ft_0``, ``sail_ft_1``, ``sail_ft_2``.

For seed ``s``: the Hamiltonian-head surrogate of the ``guesses`` checkpoint (seed ``s``) is first fine-tuned with
ground-state supervision (``steps_surrogate`` steps, target: the converged RHF Fock matrix) on ``n_mols`` random
closed-shell molecules with at most 6 heavy atoms (:func:`helpers.sail_scf.random_smiles`, embedded by RDKit
ETKDG + MMFF like the chapter's OOD molecules; none of them is an OOD molecule; ``n_held`` held out); SAIL then
starts from that fine-tuned surrogate (``steps_sail`` steps, warm-up and cosine decay to a tenth of ``lr_sail``)
on the same molecules and continues ``steps_sail_tail`` steps at that floor (``lr_sail_tail``;
:func:`helpers.sail_scf.sail_tail`, from the float32-rounded weights a checkpoint stores). The unrolled SCF builds its
Fock matrices with PySCF's own J/K routine (:class:`helpers.sail_scf.JKEngine`, backward = one more J/K build),
RHF/STO-3G. Molecules whose reference RHF does not converge are dropped (listed in the manifest). Tensors ``hamiltonian/surrogate_ft/<s>.<param>`` and ``hamiltonian/sail_ft/<s>.<param>`` (float32);
the manifest holds the config, both loss curves, the held-out SAIL loss before and after and the molecule lists.

Run from the repository root, one seed per job: ``.venv/bin/python data/17_sail_scf/make_sail_ft.py --name
sail_ft_0`` (or ``make data NB=17_sail_scf``, all three). ``--tiny``: a few molecules and steps into a temporary
folder (seconds). ``--resume``: take the surrogate fine-tune and the first ``steps_sail`` SAIL steps (weights and
loss curves) from an existing ``sail_ft_<seed>`` checkpoint that holds just those (same config without the
``*_tail`` keys) and train only the continuation: the same model as a run from scratch, in half the time. One
torch thread and one PySCF thread.
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
    cfg.update(n_mols=8, n_held=2, steps_surrogate=2, steps_sail=2, unroll=2, warmup=0, steps_sail_tail=2,
               warmup_tail=0)
    return cfg


def options(ap) -> None:
    ap.add_argument("--resume", action="store_true",
                    help="take phase 1 (surrogate fine-tune and the first steps_sail SAIL steps) from the existing "
                         "checkpoint of that name and train only the continuation")


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

    k_sur, k_sail = f"loss/{cfg['head']}/surrogate_ft/{s}", f"loss/{cfg['head']}/sail_ft/{s}"
    resumed = None
    if args is not None and getattr(args, "resume", False):
        # phase 1 (surrogate fine-tune, steps_sail SAIL steps) from a checkpoint that holds just that
        phase1 = {k: v for k, v in cfg.items() if not k.endswith("_tail")}
        ck1 = checkpoints.load(SLUG, args.name, config=phase1, root=out, check_sources=False)
        sur, sail = (ss.GuessModel(cfg["head"], hidden=cfg["hidden"]) for _ in range(2))
        ck1.load_into(sur, prefix=f"{cfg['head']}/surrogate_ft/{s}.")
        ck1.load_into(sail, prefix=f"{cfg['head']}/sail_ft/{s}.")
        curve_sur, curve_sail = ck1.manifest["history"][k_sur], ck1.manifest["history"][k_sail]
        curve_sur = {"step": curve_sur["step"], "value": curve_sur["value"]}
        resumed = dict(weights_sha256=ck1.manifest["weights"]["sha256"], wall_seconds=ck1.manifest["wall_seconds"],
                       source=ck1.manifest["source"])
        print(f"resumed from {args.name} ({resumed['weights_sha256'][:12]})", flush=True)
    else:
        sur, h_sur = ss.train_guess(cfg["head"], "surrogate", samples, cfg, s, init=init)
        print(f"surrogate_ft: loss {h_sur.loss[0]:.4g} -> {np.mean(h_sur.loss[-20:]):.4g} "
              f"({time.time() - t0:.0f} s)", flush=True)
        sail, h_sail = ss.train_guess(cfg["head"], "sail", samples, cfg, s, init=sur)
        # the curves as a checkpoint stores them, so both paths join the same numbers
        curve_sur, curve_sail = (checkpoints.subsample(h.loss) for h in (h_sur, h_sail))
        curve_sur = {"step": curve_sur["step"], "value": curve_sur["value"]}
    print(f"SAIL after {cfg['steps_sail']} steps: held-out SAIL loss {held_sail(sail):.5g} "
          f"({time.time() - t0:.0f} s)", flush=True)
    sail, h_tail = ss.sail_tail(sail, samples, cfg, s)
    curve_sail = ss.join_curves(curve_sail, h_tail.loss)
    metrics = {
        "final_loss/surrogate_ft": float(np.mean(curve_sur["value"][-20:])),
        "final_loss/sail_ft": float(np.mean(h_tail.loss[-20:])),
        "held_sail_loss/init": held_sail(init), "held_sail_loss/surrogate_ft": held_sail(sur),
        "held_sail_loss/sail_ft": held_sail(sail), "n_train": len(samples), "n_held": len(held),
    }
    print(metrics, f"({time.time() - t0:.0f} s)", flush=True)
    tensors = {}
    for obj, model in (("surrogate_ft", sur), ("sail_ft", sail)):
        for k, v in model.state_dict().items():
            tensors[f"{cfg['head']}/{obj}/{s}.{k}"] = v.detach().clone()
    history = {k_sur: curve_sur, k_sail: curve_sail}
    return checkpoints.save(SLUG, args.name if args is not None else f"sail_ft_{s}", tensors, config=cfg,
                            metrics=metrics, history=history, seed=s,
                            steps=cfg["steps_sail"] + cfg["steps_sail_tail"], wall_seconds=time.time() - t0, sources=SOURCES, module="helpers.sail_scf", root=out,
                            dtype=torch.float32,
                            extra=dict(train_smiles=train_smi, held_smiles=held_smi, dropped_smiles=dropped,
                                       init_sha256=ck.manifest["weights"]["sha256"], resumed_from=resumed))


def main(argv: list[str] | None = None) -> list[Path]:
    return scripts.script_main(make_sail_ft, config=ss.checkpoint_config, tiny=tiny, names=list(ss.FT_NAMES),
                               doc=__doc__, options=options, argv=argv)


if __name__ == "__main__":
    main()
