"""Seed 0's oracles on round 6's single-factor targets, chapter 15_explainability_vector (issue #73, the build
item "one seed's oracles stored"), registered in ``helpers.explainability_vector`` (``checkpoint_config("oracles")``,
``train_oracle``, ``oracle_record``, ``oracle_gaps``; the comment above ``train_oracle``) and committed before any
of these runs. Records, not weights: ``oracles_s<seed>.json`` (data/ has no room for twenty more models).

Per seed (0 by default), from that seed's stored ``models_r4`` θ0 and τ (read as ``make_relatedness.py`` reads
them), each target of the relatedness config gets its *oracle*: θ0 fine-tuned on the target with the target's own
masks (β of models_r4), θ_T's recipe otherwise (9000 images, 400 steps; the model ``make_models.py``'s
``oracle_seeds`` trains). Scored by ``ev.oracle_record`` on the 300 test images ``relatedness_s<seed>.json``
scored θ_T and θ_T + λτ on, with the oracle's loss curve (100 points) and plateau. The chapter puts it beside
that record (``ev.oracle_gaps``): how far the transferred map is from the oracle's. The file is rewritten after
every target (``complete`` false until the last).

Run from the repository root: ``.venv/bin/python data/15_explainability_vector/make_oracles.py`` (about 20
minutes on one core: 20 targets of ~55 s). ``--tiny``: a tiny θ0 and source pair trained live, two targets, a few
steps, into a temporary folder.
"""

from __future__ import annotations

import importlib.util
import json
import os
import platform
import time
from pathlib import Path

import torch

from helpers import checkpoints, repro, scripts, train
from helpers import explainability_vector as ev

SLUG = "15_explainability_vector"
HERE = Path(__file__).resolve()
RELATED = HERE.with_name("make_relatedness.py")  # its base_models and tiny config (one reading of θ0 and τ)
SOURCES = [HERE, RELATED, Path(ev.__file__).resolve(), Path(repro.__file__).resolve(),
           Path(train.__file__).resolve()]
HISTORY_POINTS = 100  # points stored per loss curve, as make_models.py stores them


def _related():
    spec = importlib.util.spec_from_file_location("make_relatedness", RELATED)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def tiny(name: str) -> dict:
    cfg = ev.checkpoint_config(name)
    small = _related().tiny("relatedness")
    return dict(small, beta=cfg["beta"], n_faith=4, related=cfg["related"])


def run(seed: int, cfg: dict, out: Path | None) -> Path:
    """Every target's oracle at ``seed``, written (after each target) as ``<out>/<slug>/oracles_s<seed>.json``."""
    t0 = time.time()
    path = scripts.data_root(out) / SLUG / f"oracles_s{seed}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    theta0, tau, base_plateau = _related().base_models(cfg, seed, out)
    c = cfg["conditions"]
    targets = {}
    for name in cfg["targets"]:
        t1 = time.time()
        with repro.seeded(seed):
            state_O, losses = ev.train_oracle(theta0, name, cfg, seed)
        curve = checkpoints.subsample(losses, HISTORY_POINTS)
        rec = ev.oracle_record(theta0, tau, state_O, name, cfg)
        rec.update(curve=curve["value"], plateau=train.plateau(curve, c["plateau_frac"], atol=c["plateau_atol"]))
        targets[name] = rec
        print(f"{name}: oracle AUROC {rec['auroc_oracle']:.3f}, acc {rec['acc_oracle']:.3f}, plateau "
              f"{rec['plateau']:.3f} ({time.time() - t1:.0f} s)", flush=True)
        body = dict(
            what=f"seed {seed}'s oracles on round 6's single-factor targets (issue #73), records only",
            registered="helpers.explainability_vector.checkpoint_config('oracles') (committed before the run)",
            config=cfg, seed=seed, base_plateau=base_plateau, targets=targets,
            complete=len(targets) == len(cfg["targets"]), wall_seconds=round(time.time() - t0, 1),
            machine=dict(cores=os.cpu_count(), torch_threads=torch.get_num_threads(), torch=torch.__version__,
                         python=platform.python_version(), platform=platform.platform(terse=True)),
            source=checkpoints.source_hash(SOURCES))
        path.write_text(json.dumps(checkpoints.normalize(body), indent=1, default=float) + "\n")
    return path


def build(cfg: dict, out: Path | None, args) -> list[Path]:
    return [run(s, out=out, cfg=cfg) for s in cfg["seeds"]]


def main(argv: list[str] | None = None) -> list[Path]:
    return scripts.script_main(build, config=ev.checkpoint_config, tiny=tiny, names=["oracles"], doc=__doc__,
                               argv=argv)


if __name__ == "__main__":
    main()
