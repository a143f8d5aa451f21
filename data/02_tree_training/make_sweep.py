"""Width sweep of Tree Training's speedup on the K=16 claim tree (too slow for the notebook's 5 minutes).

For each seed (its own random tree: a 384-token prompt, two levels of 4 children, segments of 32-96 tokens; its
own initialization), each depth (1 and 2 attention layers) and each width d_model (128 ... 1024), one training
step (forward, backward, AdamW) is timed for three sides in interleaved rounds (``helpers.repro.benchmark``: one
warm-up call each, then ``repeats`` rounds in which every side runs once, the order rotating): per-branch
micro-batches, sequence packing (one call, per-document attention) and Tree Training with node-block attention
(``helpers.tree_training.width_sweep``). Every call's process CPU time (one thread) and wall time are stored per
round, with the FLOP model's prediction and the load average. Nothing is trained and no checkpoint is
written: the result is a plain data file (timings are measurements, not weights, so two runs differ). Run:
``.venv/bin/python data/02_tree_training/make_sweep.py`` (about 15-25 minutes on the shared 2-core machine).
Writes ``sweep.json`` next to this file: ``config``, ``rows`` (the table the notebook reads), ``rounds``
(per configuration ``seed<S>_L<layers>_d<d>``, the per-round seconds as nested lists (sides, clocks, rounds) in
the order of ``sides`` and ``clocks``) and the machine (``--out DIR``: under ``DIR/02_tree_training/``;
``--tiny``: two small widths, seconds, into a temporary folder; ``--seeds``: other seeds).
"""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path

import torch

from helpers import repro, scripts
from helpers import tree_training as tt

SLUG = "02_tree_training"
HERE = Path(__file__).resolve()
SOURCES = [HERE, Path(tt.__file__).resolve(), Path(repro.__file__).resolve()]  # what the sweep runs (no checkpoint)
SIDES = ["linear", "packed", "blocks"]


def tiny(name: str) -> dict:
    return dict(tt.checkpoint_config(name), seeds=[0], d_models=[32, 64], layers=[1], root_len=48,
                branching=[2, 2], seg_len=[8, 16], repeats=2)


def build(cfg: dict, out: Path | None, args: object = None) -> Path:
    """Time every configuration of the sweep ``cfg``; write ``<out>/02_tree_training/sweep.json``."""
    t_start = time.time()

    def show(row: dict) -> None:
        print({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()}, flush=True)

    rows, rounds = tt.width_sweep(cfg, SIDES, progress=show)
    result = dict(config=cfg, rows=rows, sides=SIDES, clocks=["cpu", "wall"], rounds=rounds,
                  what="per-round seconds of one training step; rounds key seed<S>_L<layers>_d<d>, nested lists "
                       "(sides, clocks, rounds) in the order of sides and clocks",
                  wall_seconds=time.time() - t_start,
                  machine=dict(cores=os.cpu_count(), torch_threads=torch.get_num_threads(), torch=torch.__version__,
                               python=platform.python_version(), platform=platform.platform()))
    path = scripts.data_root(out) / SLUG / "sweep.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1))
    print(f"{len(rows)} configurations, {result['wall_seconds']:.0f} s", flush=True)
    return path


def main(argv: list[str] | None = None) -> list[Path]:
    return scripts.script_main(build, config=tt.checkpoint_config, tiny=tiny, names=["sweep"], doc=__doc__,
                               argv=argv)


if __name__ == "__main__":
    main()
