"""Round 6 of chapter 16_space_time_operators (issue #74), registered in
``helpers.space_time_operators.round6_config`` and committed before any of these runs. Records, not weights: one
JSON file per run and seed.

* ``--what conceptual``: the generic HBV-type conceptual model (``st.hbv_runoff``, not the simulator's equations)
  calibrated with many starts (``st.hbv_calibrate``: differential evolution, then Nelder-Mead) on the training
  basins' training events (**zero-shot**: regionalised by each reach's ``K``, applied unchanged to held-out events
  and unseen basins; the only setting that can be a claims' baseline) and re-calibrated on each unseen basin's own
  events from there (**gauged**: an in-sample upper reference, never a baseline); writes
  ``conceptual_s<seed>.json`` (``st.conceptual_record``).
* ``--what rerun``: a second training run of the rainfall router and recurrent baseline (checkpoint ``rainfall``'s
  recipe, training seed ``seed + 100``, the same data), their outlet R² per basin and the router's validation
  curve; writes ``rerun_s<seed>.json`` (``st.rerun_record``): the run-to-run noise of the margins.

Run from the repository root, one seed and one kind per job: ``.venv/bin/python
data/16_space_time_operators/make_round6.py --what conceptual --seeds 0`` (about 9 minutes on one core; a rerun
about 4). With no flags every kind and seed in turn. ``--tiny``: tiny budgets and data, into a temporary folder.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

import torch

from helpers import checkpoints, repro
from helpers import space_time_operators as st

SLUG = "16_space_time_operators"
HERE = Path(__file__).resolve()
SOURCES = [HERE, Path(st.__file__).resolve(), Path(repro.__file__).resolve()]  # the files its records hash
KINDS = ("conceptual", "rerun")


def tiny_config() -> dict:
    cfg = st.round6_config()
    cfg["data"] = dict(cfg["data"], n=8, T=12, n_events=3, n_test=2)
    cfg["conceptual"] = dict(cfg["conceptual"], popsize=1, maxiter=1, polish_iter=3,
                             gauged=dict(cfg["conceptual"]["gauged"], polish_iter=2))
    cfg["rerun"] = dict(cfg["rerun"], steps=2, val_every=1)
    return cfg


def run(kind: str, seed: int, out: Path | None, tiny: bool) -> Path:
    repro.set_threads(1)
    t0 = time.time()
    cfg = tiny_config() if tiny else st.round6_config()
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
    root = Path(tempfile.mkdtemp()) if tiny and out is None else (out or checkpoints.data_dir())
    path = Path(root) / SLUG / f"{kind}_s{seed}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(checkpoints.normalize(rec), indent=1, default=float) + "\n")
    print(f"wrote {path} ({rec['wall_seconds']} s)", flush=True)
    return path


def main(argv: list[str] | None = None) -> list[Path]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--what", choices=KINDS, nargs="+", default=list(KINDS))
    p.add_argument("--seeds", type=int, nargs="+", default=None)
    p.add_argument("--out", type=Path)
    p.add_argument("--tiny", action="store_true")
    a = p.parse_args(argv)
    seeds = a.seeds if a.seeds is not None else ([0] if a.tiny else st.round6_config()["seeds"])
    return [run(k, s, a.out, a.tiny) for k in a.what for s in seeds]


if __name__ == "__main__":
    main()
