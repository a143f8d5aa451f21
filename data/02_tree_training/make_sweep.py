"""Width sweep of Tree Training's speedup on the K=16 claim tree (too slow for the notebook's 5 minutes).

For each seed (its own random tree: a 384-token prompt, two levels of 4 children, segments of 32-96 tokens; its
own initialization), each depth (1 and 2 attention layers) and each width d_model (128 ... 1024), one training
step (forward, backward, AdamW) is timed for three sides in interleaved rounds (``helpers.repro.benchmark``: one
warm-up call each, then ``repeats`` rounds in which every side runs once, the order rotating): per-branch
micro-batches, sequence packing (one call, per-document attention) and Tree Training with node-block attention
(``helpers.tree_training.width_sweep``). Every call's process CPU time (one thread) and wall time are stored per
round, with the FLOP model's prediction and the load average. Run:
``.venv/bin/python data/02_tree_training/make_sweep.py`` (about 25 minutes on the shared 2-core machine). Writes
``sweep.safetensors`` (per-round seconds, one (sides, clocks, rounds) tensor per configuration) and ``sweep.json``
(the manifest; ``metrics.rows`` is the table the notebook reads) next to this file (``--out DIR``: under
``DIR/02_tree_training/``; ``--tiny``: two small widths, seconds, into a temporary folder; ``--seeds``: other
seeds).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from helpers import checkpoints, repro, scripts
from helpers import tree_training as tt

SLUG = "02_tree_training"
HERE = Path(__file__).resolve()
SOURCES = [HERE, Path(tt.__file__).resolve(), Path(repro.__file__).resolve()]
SIDES = ["linear", "packed", "blocks"]


def tiny(name: str) -> dict:
    return dict(tt.checkpoint_config(name), seeds=[0], d_models=[32, 64], layers=[1], root_len=48,
                branching=[2, 2], seg_len=[8, 16], repeats=2)


def build(cfg: dict, out: Path | None, args: object = None) -> Path:
    """Time every configuration of the sweep ``cfg``; write ``<out>/02_tree_training/sweep.*``."""
    t_start = time.time()

    def show(row: dict) -> None:
        print({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()}, flush=True)

    rows, tensors = tt.width_sweep(cfg, SIDES, progress=show)
    return checkpoints.save(
        SLUG, "sweep", tensors, config=cfg, metrics=dict(rows=rows, sides=SIDES, clocks=["cpu", "wall"]),
        seed=list(cfg["seeds"]), wall_seconds=time.time() - t_start, sources=SOURCES, module="tree_training",
        root=out, extra=dict(what="per-round seconds of one training step; tensor key seed<S>_L<layers>_d<d>, "
                                  "shape (sides, clocks, rounds) in the order of metrics.sides and metrics.clocks",
                             cpu_count=os.cpu_count()))


def main(argv: list[str] | None = None) -> list[Path]:
    return scripts.script_main(build, config=tt.checkpoint_config, tiny=tiny, names=["sweep"], doc=__doc__,
                               argv=argv)


if __name__ == "__main__":
    main()
