"""Train the structured-credit policies of chapter 05_dsl_harness (case 5), which do not fit its 5-minute default
run, and write their *measurements* with :mod:`helpers.checkpoints` (the notebook reads no weights):

* ``credit``: per seed, a small DSL transformer warm-started by supervised training on ``n_sft`` labelled
  intents, then for each arm of :data:`helpers.dsl_harness.GROUP_ARMS` (sparse reward, blame-conserving
  per-token credit) the same warm start trained ``rl_steps`` steps by :func:`helpers.dsl_harness.group_reinforce`
  (``k`` samples per request, leave-one-out baseline, KL anchor ``beta`` to the warm start, Adam at ``rl_lr``) on
  the other training requests. Stored tensors: per arm and seed the sampled success / valid rate / KL per step
  (``curve/<q>/<arm>/<seed>``) and greedy success of every held-out, supervised and RL request at every
  evaluation step (``eval/<set>/<arm>/<seed>``, uint8, ``eval_steps`` in the manifest's extra).

Run from the repository root: ``.venv/bin/python data/05_dsl_harness/make_credit.py`` (or
``make data NB=05_dsl_harness``). ``--tiny`` trains a tiny config for a few steps into a temporary folder (seconds;
what the tests run); ``--seeds``/``--out``: other seeds into another data root. ``--parts DIR`` keeps each seed's
results in ``DIR`` and reuses them, so the seeds can be trained one process at a time
(``--seeds 1 --out /tmp/x --parts DIR``) and merged at the end (``--parts DIR``).
One torch thread: the same seed on the same machine gives the same numbers.
"""

from __future__ import annotations

import argparse
import copy
import time
from pathlib import Path

import torch

from helpers import checkpoints, repro, scripts
from helpers import dsl_harness as dsl

SLUG = "05_dsl_harness"
HERE = Path(__file__).resolve()
SOURCES = [HERE, Path(dsl.__file__).resolve(), Path(repro.__file__).resolve()]
EVAL_SETS = ("heldout", "supervised", "rl")


def one_seed(cfg: dict, s: int) -> dict:
    """One seed: the warm start, then every arm trained from it; returns tensors, metrics and eval steps."""
    con = dsl.make_database(cfg["db_seed"])
    intents = dsl.make_intents(con, cfg["n_train"] + cfg["n_test"], seed=cfg["intent_seed"])
    train, test = intents[:cfg["n_train"]], intents[cfg["n_train"]:]
    sft, pool = train[:cfg["n_sft"]], train[cfg["n_sft"]:]
    sets = {"heldout": test, "supervised": sft, "rl": pool}
    t0, cache = time.time(), {}
    with repro.seeded(s):
        warm = dsl.make_agent("dsl", cfg["d_model"], cfg["n_layer"], cfg["n_head"])
        dsl.train_agent(warm, sft, "dsl", cfg["sft_steps"], cfg["sft_batch"], cfg["sft_lr"], seed=s)
    tensors, metrics, steps = {}, {}, None
    for arm in cfg["arms"]:
        model = copy.deepcopy(warm)
        cur = dsl.group_reinforce(model, warm, con, pool, arm, cfg["rl_steps"], cfg["n_requests"], cfg["k"],
                                  cfg["rl_lr"], cfg["beta"], seed=s, eval_sets=sets,
                                  eval_every=cfg["eval_every"], cache=cache)
        steps = cur["eval_steps"].tolist()
        for q in ("success", "valid", "kl"):
            tensors[f"curve/{q}/{arm}/{s}"] = torch.tensor(cur[q], dtype=torch.float32)
        for name in EVAL_SETS:
            tensors[f"eval/{name}/{arm}/{s}"] = torch.tensor(cur[f"eval/{name}"], dtype=torch.uint8)
        ho = cur["eval/heldout"].mean(1)
        metrics[f"heldout_auc/{arm}/{s}"] = dsl.curve_auc(cur["eval_steps"], ho)
        metrics[f"supervised_min/{arm}/{s}"] = float(cur["eval/supervised"].mean(1).min())
        print(f"seed {s} {arm}: held-out greedy {ho[0]:.3f} -> {ho[-1]:.3f}, AUC "
              f"{metrics[f'heldout_auc/{arm}/{s}']:.3f}, supervised min "
              f"{metrics[f'supervised_min/{arm}/{s}']:.3f}, sampled success last 50 "
              f"{cur['success'][-50:].mean():.3f}, KL last 50 {cur['kl'][-50:].mean():.3f} "
              f"({time.time() - t0:.0f} s)", flush=True)
    return {"tensors": tensors, "metrics": metrics, "eval_steps": steps}


def tiny(name: str) -> dict:
    cfg = dsl.checkpoint_config(name)
    cfg.update(n_train=20, n_test=5, n_sft=10, seeds=[0], sft_steps=3, rl_steps=3, n_requests=2, k=2,
               eval_every=2, d_model=16, n_layer=1, n_head=2)
    return cfg


def make_credit(cfg: dict, root: Path | None, parts: Path | None = None) -> Path:
    t0 = time.time()
    tensors, metrics, steps = {}, {}, None
    key = scripts.part_key(cfg)
    for s in cfg["seeds"]:
        res, _ = scripts.seed_part(parts, s, key, lambda s=s: one_seed(cfg, s))
        tensors.update(res["tensors"])
        metrics.update(res["metrics"])
        steps = res["eval_steps"]
    history = {f"success/{k.split('/', 2)[2]}": v.numpy().tolist() for k, v in tensors.items()
               if k.startswith("curve/success/")}
    return checkpoints.save(SLUG, "credit", tensors, config=cfg, metrics=metrics, history=history,
                            seed=list(cfg["seeds"]), steps=cfg["rl_steps"], wall_seconds=time.time() - t0,
                            sources=SOURCES, module="helpers.dsl_harness", extra={"eval_steps": steps},
                            root=root)


def main(argv: list[str] | None = None) -> list[Path]:
    def options(ap: argparse.ArgumentParser) -> None:
        ap.add_argument("--parts", type=Path, default=None, help="folder keeping (and reusing) each seed's results")

    return scripts.script_main(lambda cfg, out, args: make_credit(cfg, out, args.parts),
                               config=dsl.checkpoint_config, tiny=tiny, names=["credit"], options=options,
                               doc=__doc__, argv=argv)


if __name__ == "__main__":
    main()
