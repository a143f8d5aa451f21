"""Round 6 of chapter 16_space_time_operators (issue #74), registered in
``helpers.space_time_operators.round6_config`` and committed before any of these runs. Records, not weights: one
JSON file per run and seed.

* ``--name conceptual``: the generic HBV-type conceptual model (``st.hbv_runoff``, not the simulator's equations)
  calibrated with many starts (``st.hbv_calibrate``: differential evolution, then Nelder-Mead) on the training
  basins' training events (**zero-shot**: regionalised by each reach's ``K``, applied unchanged to held-out events
  and unseen basins; the only setting that can be a claims' baseline) and re-calibrated on each unseen basin's own
  events from there (**gauged**: an in-sample upper reference, never a baseline); writes
  ``conceptual_s<seed>.json`` (``st.conceptual_record``).
* ``--name rerun``: a second training run of the rainfall router and recurrent baseline (checkpoint ``rainfall``'s
  recipe, training seed ``seed + 100``, the same data), their outlet R² per basin and the router's validation
  curve; writes ``rerun_s<seed>.json`` (``st.rerun_record``): the run-to-run noise of the margins.

Run from the repository root, one seed and one kind per job: ``.venv/bin/python
data/16_space_time_operators/make_round6.py --name conceptual --seeds 0`` (about 9 minutes on one core; a rerun
about 4). With no flags every kind and seed in turn. ``--tiny``: tiny budgets and data, into a temporary folder.
"""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path

import torch

from helpers import checkpoints, repro, scripts
from helpers import space_time_operators as st

SLUG = "16_space_time_operators"
HERE = Path(__file__).resolve()
SOURCES = [HERE, Path(st.__file__).resolve(), Path(repro.__file__).resolve(),
           Path(scripts.__file__).resolve()]  # the files its records hash
KINDS = ("conceptual", "rerun")


def tiny_config() -> dict:
    cfg = dict(st.round6_config(), seeds=[0])
    cfg["data"] = dict(cfg["data"], n=8, T=12, n_events=3, n_test=2)
    cfg["conceptual"] = dict(cfg["conceptual"], popsize=1, maxiter=1, polish_iter=3,
                             gauged=dict(cfg["conceptual"]["gauged"], polish_iter=2))
    cfg["rerun"] = dict(cfg["rerun"], steps=2, val_every=1)
    return cfg


def run(kind: str, seed: int, out: Path | None, cfg: dict) -> Path:
    """One registered run (``kind`` at ``seed`` under ``cfg``), written as ``<out>/<slug>/<kind>_s<seed>.json``."""
    t0 = time.time()
    body = st.conceptual_record(seed, cfg) if kind == "conceptual" else st.rerun_record(seed, cfg)
    rec = dict(
        what=f"round 6 registered run (issue #74): {kind}, seed {seed}",
        registered="helpers.space_time_operators.round6_config (committed before the run)",
        config=checkpoints.normalize({k: cfg[k] for k in ("data", kind, "reading")}), seed=seed, record=body,
        wall_seconds=round(time.time() - t0, 1),
        machine=dict(cores=os.cpu_count(), torch_threads=torch.get_num_threads(), torch=torch.__version__,
                     python=platform.python_version(), platform=platform.platform(terse=True)),
        source=checkpoints.source_hash(SOURCES),
    )
    path = scripts.data_root(out) / SLUG / f"{kind}_s{seed}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(checkpoints.normalize(rec), indent=1, default=float) + "\n")
    return path


def build(cfg: dict, out: Path | None, args) -> list[Path]:
    """Every seed of ``cfg`` for the kind ``args.name``, one record each."""
    return [run(args.name, s, out, cfg) for s in cfg["seeds"]]


def main(argv: list[str] | None = None) -> list[Path]:
    return scripts.script_main(build, config=lambda name: st.round6_config(), tiny=lambda name: tiny_config(),
                               names=list(KINDS), doc=__doc__, argv=argv)


if __name__ == "__main__":
    main()
