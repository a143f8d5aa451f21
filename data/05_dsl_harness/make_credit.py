"""Train the structured-credit policies of chapter 05_dsl_harness (case 5), which do not fit its 5-minute default
run, and write them with :mod:`helpers.checkpoints`:

* ``credit``: per seed, a small DSL transformer warm-started by supervised training on ``n_sft`` labelled
  intents (``warm/<seed>``), then for each arm of :data:`helpers.dsl_harness.CREDIT_ARMS` (sparse reward, prefix
  reward, filtering, per-token credit) the same warm start trained ``rl_steps`` REINFORCE steps on the other
  training requests (``<arm>/<seed>``); the manifest's history holds every run's sampled success and valid rates.

Run from the repository root: ``.venv/bin/python data/05_dsl_harness/make_credit.py`` (or
``make data NB=05_dsl_harness``). ``--tiny`` trains a tiny config for a few steps into a temporary folder (seconds;
what the tests run); ``--seeds``/``--out``: other seeds into another data root.
One torch thread: the same seed on the same machine writes byte-identical weights. Weights
are stored as float16 (the chapter's data stays under 5 MB); the notebook casts them back to float32.
"""

from __future__ import annotations

import argparse
import copy
import multiprocessing
import time
from pathlib import Path

import torch

from helpers import checkpoints, repro, scripts
from helpers import dsl_harness as dsl

SLUG = "05_dsl_harness"
HERE = Path(__file__).resolve()
SOURCES = [HERE, Path(dsl.__file__).resolve(), Path(repro.__file__).resolve()]


def _one_seed(args: tuple[dict, int]) -> tuple[dict, dict, dict]:
    """One seed: the warm start and every arm trained from it (a process of its own, one torch thread)."""
    cfg, s = args
    repro.set_threads(1)
    con = dsl.make_database(cfg["db_seed"])
    intents = dsl.make_intents(con, cfg["n_train"] + cfg["n_test"], seed=cfg["intent_seed"])
    train = intents[:cfg["n_train"]]
    sft, pool = train[:cfg["n_sft"]], train[cfg["n_sft"]:]
    tensors, history, metrics, cache = {}, {}, {}, {}
    t0 = time.time()
    with repro.seeded(s):
        warm = dsl.make_agent("dsl", cfg["d_model"], cfg["n_layer"], cfg["n_head"])
        dsl.train_agent(warm, sft, "dsl", cfg["sft_steps"], cfg["sft_batch"], cfg["sft_lr"], seed=s)
    tensors[f"warm/{s}"] = {k: v.clone() for k, v in warm.state_dict().items()}
    for arm in cfg["arms"]:
        model = copy.deepcopy(warm)
        cur = dsl.reinforce_agent(model, con, pool, arm, cfg["rl_steps"], cfg["rl_batch"], cfg["rl_lr"],
                                  seed=s, penalty=cfg["penalty"], cache=cache)
        tensors[f"{arm}/{s}"] = {k: v.clone() for k, v in model.state_dict().items()}
        history[f"success/{arm}/{s}"] = cur["success"].tolist()
        history[f"valid/{arm}/{s}"] = cur["valid"].tolist()
        reach = dsl.steps_to_level(cur["success"], 0.5)
        metrics[f"steps_to_50/{arm}/{s}"] = -1 if reach is None else reach
        print(f"seed {s} {arm}: final success {cur['success'][-20:].mean():.2f}, steps to 50% {reach} "
              f"({time.time() - t0:.0f} s)", flush=True)
    return tensors, history, metrics


def tiny(name: str) -> dict:
    cfg = dsl.checkpoint_config(name)
    cfg.update(n_train=20, n_test=5, n_sft=10, seeds=[0], sft_steps=3, rl_steps=2, rl_batch=4, d_model=16,
               n_layer=1, n_head=2)
    return cfg


def make_credit(cfg: dict, root: Path | None, jobs: int = 1) -> Path:
    t0 = time.time()
    todo = [(cfg, s) for s in cfg["seeds"]]
    if jobs > 1:
        with multiprocessing.get_context("spawn").Pool(min(jobs, len(todo))) as pool:
            parts = pool.map(_one_seed, todo)
    else:
        parts = [_one_seed(a) for a in todo]
    tensors, history, metrics = {}, {}, {}
    for tn, hi, me in parts:  # in seed order, whatever the number of processes
        for k, sd in tn.items():
            tensors.update({f"{k}.{n}": v for n, v in sd.items()})
        history.update(hi)
        metrics.update(me)
    return checkpoints.save(SLUG, "credit", tensors, config=cfg, metrics=metrics, history=history,
                            seed=list(cfg["seeds"]), steps=cfg["rl_steps"], wall_seconds=time.time() - t0,
                            sources=SOURCES, module="helpers.dsl_harness", dtype=torch.float16,
                            root=root)


def main(argv: list[str] | None = None) -> list[Path]:
    def options(ap: argparse.ArgumentParser) -> None:
        ap.add_argument("--jobs", type=int, default=1, help="processes (one per seed at most); same weights for any")

    return scripts.script_main(lambda cfg, out, args: make_credit(cfg, out, args.jobs), config=dsl.checkpoint_config,
                               tiny=tiny, names=["credit"], options=options, doc=__doc__, argv=argv)


if __name__ == "__main__":
    main()
