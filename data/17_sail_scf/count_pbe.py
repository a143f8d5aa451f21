"""Count the Fock builds of chapter 17_sail_scf's guesses under PySCF's Kohn-Sham PBE (too slow for the default run).

The chapter trains its guess models at RHF/STO-3G. The paper works with Kohn-Sham DFT; this script hands every
guess (PySCF's ``minao`` and ``atom``, the purified MINAO density, MINAO + 1 step, and the checkpoint's
Hamiltonian-SAIL and density-SAIL models of seeds 0, 1, 2) as ``dm0``
to one PySCF RKS-PBE solver per OOD molecule (:func:`helpers.sail_scf.dft_solver`: the same grid and the same
default convergence settings for every guess) and counts its Kohn-Sham builds (:func:`helpers.sail_scf.run_pyscf`).
PySCF's ``sap`` and ``huckel`` guesses are left out: on the five smallest molecules of a first run they needed more
builds than MINAO (``huckel`` hit the 100-cycle cap on pyrimidine), and a run that hits the cap costs as much as
eight ordinary ones; the surrogate models are left out for time as well.

* ``--max-heavy N`` restricts the run to the OOD molecules with at most ``N`` heavy atoms (counted in the SMILES).
* ``--basis sto-3g`` (default) writes ``pbe_sto-3g.json``; ``--basis 6-31g`` writes ``pbe_6-31g.json``, where the
  STO-3G guesses are carried into 6-31G with :func:`helpers.sail_scf.project_density` and PySCF's own guesses are
  made in 6-31G directly.
* The JSON holds no weights: per molecule and guess the number of builds, of cycles, whether it converged and the
  final energy, with the solver settings, the sha256 of the checkpoint weights used and of the sources. It is
  written after every molecule (smallest first), so an interrupted run leaves a valid, partial file.

Run from the repository root: ``.venv/bin/python data/17_sail_scf/count_pbe.py [--basis 6-31g]``. ``--tiny``: one
small molecule and two guesses into a temporary folder (seconds). One PySCF thread.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from pyscf import lib

from helpers import checkpoints, repro
from helpers import sail_scf as ss

SLUG = "17_sail_scf"
HERE = Path(__file__).resolve()
DATA = HERE.parent
SOURCES = [HERE, Path(ss.__file__).resolve()]
GRID_LEVEL = 1
XC = "pbe"
REFERENCES = ["minao", "atom", "purified MINAO", "MINAO + 1 step"]
MODEL_KINDS = [("hamiltonian", "sail"), ("density", "sail")]
SEEDS = [0, 1, 2]


def load_models() -> tuple[dict, str]:
    cfg = ss.checkpoint_config("guesses")
    ckpt = checkpoints.load(SLUG, "guesses", config=cfg)
    models = {}
    for head, obj in MODEL_KINDS:
        for s in SEEDS:
            model = ss.GuessModel(head, hidden=cfg["hidden"])
            ckpt.load_into(model, prefix=f"{head}/{obj}/{s}.")
            models[f"{head}/{obj}/{s}"] = model.eval()
    return models, ckpt.manifest["weights"]["sha256"]


def guesses(name: str, basis: str, models: dict, mf) -> dict[str, tuple[np.ndarray, int]]:
    """guess key -> (initial density in ``basis``, hidden builds)."""
    m0 = ss.rdkit_molecule(ss.OOD_SMILES[name], seed=0)  # STO-3G: the models' basis
    m = mf.mol

    def carry(P):
        return P if basis == "sto-3g" else ss.project_density(P, m0, m)

    x = ss.inputs(m0, eri=False)
    out = {k: (ss.pyscf_guess(m, k), 0) for k in ("minao", "atom")}
    out["purified MINAO"] = (carry(ss.purify(x.P_minao, x.ints).numpy()), 0)
    if basis != "sto-3g":
        out["projected STO-3G MINAO"] = (carry(ss.pyscf_guess(m0, "minao")), 0)
    F1 = mf.get_fock(dm=out["minao"][0])  # one Kohn-Sham build before the solver starts
    e1, c1 = mf.eig(F1, mf.get_ovlp())
    out["MINAO + 1 step"] = (mf.make_rdm1(c1, mf.get_occ(e1, c1)), 1)
    with torch.no_grad():
        for key, model in models.items():
            out[key] = (carry(model.density(x).numpy()), 0)
    return out


def make_pbe(basis: str, names: list[str], out: Path, models: dict, sha: str, keys: list[str] | None = None,
             max_heavy: int | None = None) -> Path:
    t0 = time.time()
    path = out / f"pbe_{basis}.json"
    mols = {n: ss.rdkit_molecule(ss.OOD_SMILES[n], seed=0, basis=basis) for n in names}
    order = sorted(names, key=lambda n: (mols[n].nao, n))
    record = dict(
        what=f"Kohn-Sham builds of chapter {SLUG}'s guesses under PySCF RKS-{XC.upper()}/{basis} (no weights)",
        command=f".venv/bin/python data/{SLUG}/count_pbe.py --basis {basis}"
        + ("" if max_heavy is None else f" --max-heavy {max_heavy}"),
        solver=dict(xc=XC, basis=basis, grid_level=GRID_LEVEL, conv_tol=None, max_cycle=100, threads=1),
        checkpoint_sha256=sha, sources={str(p.relative_to(HERE.parents[2])): checkpoints.sha256_file(p)
                                         for p in SOURCES},
        hidden={}, molecules={}, complete=False, wall_seconds=0.0,
    )
    for name in order:
        mf = ss.dft_solver(mols[name], XC, GRID_LEVEL)
        record["solver"]["conv_tol"] = mf.conv_tol
        runs = {}
        for key, (P0, hid) in guesses(name, basis, models, mf).items():
            if keys is not None and key not in keys:
                continue
            r = ss.run_pyscf(mf, P0)
            runs[key] = dict(builds=r.fock_builds, cycles=r.cycles, converged=r.converged, energy=r.energy)
            record["hidden"][key] = hid
        record["molecules"][name] = dict(nao=mols[name].nao, heavy=int(sum(
            mols[name].atom_pure_symbol(i) != "H" for i in range(mols[name].natm))), runs=runs)
        record["wall_seconds"] = round(time.time() - t0, 1)
        record["complete"] = name == order[-1]
        path.write_text(json.dumps(record, indent=1) + "\n")
        print(f"{name} ({mols[name].nao} AOs): minao {runs['minao']['builds']} builds, "
              + ", ".join(f"{k} {v['builds']}" for k, v in runs.items() if k != "minao")
              + f" ({time.time() - t0:.0f} s)", flush=True)
    return path


def main(argv: list[str] | None = None) -> Path:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--basis", default="sto-3g", choices=["sto-3g", "6-31g"])
    ap.add_argument("--tiny", action="store_true", help="one small molecule, two guesses, into a temporary folder")
    ap.add_argument("--max-heavy", type=int, default=None,
                    help="only the OOD molecules with at most this many heavy atoms (default: all 26)")
    ap.add_argument("--out", type=Path, default=None, help="folder to write pbe_<basis>.json into")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    repro.set_threads(1)
    lib.num_threads(1)
    out = args.out if args.out is not None else (Path(tempfile.mkdtemp(prefix="sail_pbe_")) if args.tiny else DATA)
    models, sha = load_models()
    names = ["glycine"] if args.tiny else list(ss.OOD_SMILES)
    if args.max_heavy is not None:
        names = [n for n in names if sum(c.isalpha() and c.upper() != "H" for c in ss.OOD_SMILES[n])
                 <= args.max_heavy]
    keys = ["minao", "density/sail/0"] if args.tiny else None
    path = make_pbe(args.basis, names, out, models, sha, keys, args.max_heavy)
    print("wrote", path)
    return path


if __name__ == "__main__":
    main()
