"""Round 11's two-key offset-recall checkpoint ``recall5`` of chapter 04_tree_rope (records only, no weights):
``tr.checkpoint_config("recall5")`` = recall2's recipe (two keys, d = 64, 2 heads, 6000 cosine steps) trained with
round 10's auxiliary dense previous-token loss (``aux_weight`` 0.25, ``tr.retrieval_aux_loss``), which round
10's probe (``probe_recall5.py``) found qualifies by its registered rule; the arms NoPE, RoPE, RoPE + OPT
offsets, TPE and TPE + OPT, and **one attempt per arm-seed, the one the claims read** (no restarts). Registered
(config, this script, its tests) before any recall5 training.

Training, evaluation, parts and merge are ``make_recall4.py``'s (loaded from it; only the checkpoint's name, the
config and the source list differ): each arm-seed is trained and evaluated as ``make_recall.py`` trains and
evaluates a recall2 arm, stored under ``<arm>/<seed>``; ``extra["chosen"]``: per arm-seed its bars (final held-out
accuracy >= 0.95, plateau <= 0.02) and whether it meets them. Seed 1 first; seeds 0 and 2 only if the four claim
arms (``in_window_arms``) meet both bars at seed 1.

One job per arm-seed: ``.venv/bin/python data/04_tree_rope/make_recall5.py --seed 1 --arms "TPE + OPT" --parts
DIR`` (a finished arm-seed is kept in DIR and reused); then ``--merge --seeds 1 [0 2] --parts DIR`` (``--partial``:
arm-seeds not yet trained are marked pending). ``--tiny`` alone: every arm of a tiny config into temporary folders,
then the merge. One torch thread.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

HERE = Path(__file__).resolve()
_spec = importlib.util.spec_from_file_location("_make_recall4_for_recall5", HERE.parent / "make_recall4.py")
M4 = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(M4)
SLUG, NAME = M4.SLUG, "recall5"
SOURCES = [HERE, HERE.parent / "make_recall4.py", *M4.SOURCES[1:]]
checkpoints, tr = M4.checkpoints, M4.tr


def tiny_config() -> dict:
    cfg = M4.MR.tiny_config(NAME)
    cfg.update(seeds=[1], d_model=8 * cfg["n_head"])  # TPE needs one rotary pair per level: head_dim >= 2 L
    return cfg


M4.NAME, M4.SOURCES, M4.tiny_config = NAME, SOURCES, tiny_config  # this module's own copy of make_recall4


def main(argv: list[str] | None = None) -> Path | None:
    return M4.main(argv)


if __name__ == "__main__":
    main()
