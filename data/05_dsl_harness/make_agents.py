"""Train the learned agents of chapter 05_dsl_harness that do not fit its 5-minute default run, and write them with
:mod:`helpers.checkpoints`:

* ``agents``: for each interface (DSL, SQL) and seed, a small transformer trained by teacher forcing on
  ``request -> program`` for the chapter's training intents (:func:`helpers.dsl_harness.checkpoint_config`).

Run from the repository root: ``.venv/bin/python data/05_dsl_harness/make_agents.py`` (or
``make data NB=05_dsl_harness``). ``--tiny`` trains a tiny config for a few steps into a temporary folder (seconds;
what the tests run); ``--seeds``/``--out``: other seeds into another data root.
One torch thread: the same seed on the same machine writes byte-identical weights.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from helpers import checkpoints, repro, scripts
from helpers import dsl_harness as dsl

SLUG = "05_dsl_harness"
HERE = Path(__file__).resolve()
SOURCES = [HERE, Path(dsl.__file__).resolve(), Path(repro.__file__).resolve()]


def tiny(name: str) -> dict:
    cfg = dsl.checkpoint_config(name)
    cfg.update(n_train=20, n_test=5, seeds=[0], steps=3, batch=4, d_model=16, n_layer=1, n_head=2)
    return cfg


def make_agents(cfg: dict, root: Path | None, args: argparse.Namespace | None = None) -> Path:
    con = dsl.make_database(cfg["db_seed"])
    intents = dsl.make_intents(con, cfg["n_train"] + cfg["n_test"], seed=cfg["intent_seed"])
    train, test = intents[:cfg["n_train"]], intents[cfg["n_train"]:]
    tensors, history, metrics = {}, {}, {}
    t0 = time.time()
    for iface in cfg["interfaces"]:
        for s in cfg["seeds"]:
            with repro.seeded(s):
                model = dsl.make_agent(iface, cfg["d_model"], cfg["n_layer"], cfg["n_head"])
                losses = dsl.train_agent(model, train, iface, cfg["steps"], cfg["batch"], cfg["lr"], seed=s)
            tensors[f"{iface}/{s}"] = model
            history[f"loss/{iface}/{s}"] = losses
            metrics[f"final_loss/{iface}/{s}"] = sum(losses[-20:]) / len(losses[-20:])
            metrics[f"test_bits/{iface}/{s}"] = float(dsl.bits_per_intent(model, test, iface).mean())
            print(f"{iface} seed {s}: loss {metrics[f'final_loss/{iface}/{s}']:.4f} "
                  f"({time.time() - t0:.0f} s)", flush=True)
    return checkpoints.save(SLUG, "agents", tensors, config=cfg, metrics=metrics, history=history,
                            seed=list(cfg["seeds"]), steps=cfg["steps"], wall_seconds=time.time() - t0,
                            sources=SOURCES, module="helpers.dsl_harness", root=root)


def main(argv: list[str] | None = None) -> list[Path]:
    return scripts.script_main(make_agents, config=dsl.checkpoint_config, tiny=tiny, names=["agents"], doc=__doc__,
                               argv=argv)


if __name__ == "__main__":
    main()
