"""Train and score the learned agents of chapter 05_dsl_harness on paraphrased requests (case 4 with power),
which do not fit its 5-minute default run, and write their *measurements* with :mod:`helpers.checkpoints` (the
notebook reads no weights):

* ``paraphrase``: for each seed, interface (DSL, SQL) and training-set size ``n`` in ``n_trains``, a small
  transformer trained by teacher forcing on the first ``n`` training intents of case 4's stream with
  paraphrased requests (training frames, :func:`helpers.dsl_harness.paraphrase_split`: programs 0-299, then
  programs from 600 on), for :func:`helpers.dsl_harness.para_steps` steps, then scored on ``n_test`` held-out
  intents (programs 300-599, ``test_after``) paraphrased with the held-out frames and fillers, by each decoder of
  :data:`helpers.dsl_harness.PARA_ARMS` with ``repairs`` repairs (DSL: verifier-constrained decoding and
  verifier repair; SQL: free decoding and grammar-constrained decoding, both with SQLite-guided repair).
  Stored tensors: per arm, ``n`` and seed, a uint8 array ``(3, n_test)`` of per-request success, success at
  the first attempt and executed-invalid (``out/<arm>/<n>/<seed>``); per interface, ``n`` and seed, greedy
  success on the first ``n_fit`` training requests (metrics ``fit/...``) and the loss curve (history).

Extension of the curve (fixed in the config before its training; round 3 follow-up of issue #63): with sizes
25/50/100/300 no decoder reached the reading level 0.5 (best mean 0.30 at 300), so larger sizes are added (case
4's stream has more than 4,000 distinct programs; the held-out programs stay 300-599 and are disjoint from every
training program). One steps rule for every size, ``max(steps, ceil(min_epochs * n / batch))``. First design:
``min_epochs`` 20, sizes 1000 and 3000; its seed-0 probe missed the unchanged fit bar (>= 0.95) at 1000 (625
steps; DSL 0.80, SQL 0.85), while 3000 (1875 steps) fit (``probe_paraphrase.json``). Before any other seed it
was replaced by ``min_epochs`` 64, the passes that fit at 300 (600 * 32 / 300): 600 steps for n <= 300 (sizes
25-300 train exactly as before; the probe reproduced them), 2000 at 1000; 3000 (6000 steps per agent) did not
fit the time budget and was dropped. The fit (``n_fit`` training requests, >= 0.95) and plateau (<= 0.05)
conditions, the reading rule (``read_n_train``, ``read_level`` 0.5) and every bar are unchanged. ``--reuse``
reads the sizes the stored checkpoint holds under the same settings (same steps) instead of retraining them.

Round 4 (issue #63; both registered in ``checkpoint_config`` before their runs): ``paraphrase_seeds`` trains
and scores seeds 3-9 at n_train 1000 only, exactly as ``paraphrase`` does (with its seeds 0-2: ten seeds for a
seed-level interval of the gain, :func:`helpers.dsl_harness.seed_interval`); ``paraphrase_swap`` trains the SQL
agent at n_train 1000 with the initialisation of one of seeds 0/1 and the batch order of the other (results keyed
``i<init>o<order>``), to tell which of the two made seed 1's SQL agent the best of the three. Each is its own
``--name``; ``--parts`` keeps one part per seed (per pair for the swap).

Run from the repository root: ``.venv/bin/python data/05_dsl_harness/make_paraphrase.py``. ``--tiny`` trains a
tiny config into a temporary folder (seconds; what the tests run); ``--seeds``/``--out``: other seeds into
another data root. ``--parts DIR`` keeps each seed's results in ``DIR`` and reuses them, so the seeds can be
trained one process at a time (``--seeds 1 --out /tmp/x --parts DIR``) and merged at the end (``--parts DIR``).
One torch thread: the same seed on the same machine gives the same numbers.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch

from helpers import checkpoints, repro, scripts
from helpers import dsl_harness as dsl

SLUG = "05_dsl_harness"
HERE = Path(__file__).resolve()
SOURCES = [HERE, Path(dsl.__file__).resolve(), Path(repro.__file__).resolve()]
HISTORY_WINDOW = 10
ARM_DECODER = {"dsl_constrained": ("dsl", True), "sql_free": ("sql", False), "sql_grammar": ("sql", True)}


def data(cfg: dict):
    """The database, the paraphrased training pool and the paraphrased held-out intents."""
    con = dsl.make_database(cfg["db_seed"])
    pool_n = max(cfg["n_trains"])
    n_all = max(pool_n, cfg["test_after"]) + cfg["n_test"]
    intents = dsl.make_intents(con, n_all, seed=cfg["intent_seed"])
    train, test = dsl.paraphrase_split(intents, pool_n, cfg["n_test"], cfg["test_after"], cfg["para_seed"])
    return con, train, test


REUSABLE = ("n_trains", "min_epochs", "test_after", "seeds")  # keys an extension may add or change


def stored_sizes(cfg: dict) -> tuple[list[int], object | None]:
    """The sizes of ``cfg`` the stored checkpoint already holds for every seed of ``cfg``, trained under the
    same settings (every other config key equal, the same held-out programs, the same steps at that size), and
    the stored checkpoint; ``([], None)`` when there is none."""
    try:
        manifest = checkpoints.load_manifest(SLUG, "paraphrase")
    except checkpoints.CheckpointError:
        return [], None
    old = manifest["config"]
    if any(old.get(k) != v for k, v in cfg.items() if k not in REUSABLE) or not set(cfg["seeds"]) <= set(
            old["seeds"]) or old.get("test_after", max(old["n_trains"])) != cfg["test_after"]:
        return [], None
    old_steps = {n: dsl.para_steps(n, old["steps"], old["batch"], old.get("min_epochs", 0)) for n in old["n_trains"]}
    new_steps = {n: dsl.para_steps(n, cfg["steps"], cfg["batch"], cfg["min_epochs"]) for n in cfg["n_trains"]}
    sizes = [n for n in cfg["n_trains"] if n in old_steps and old_steps[n] == new_steps[n]]
    return sizes, checkpoints.load(SLUG, "paraphrase", config=old, check_sources=False)


def one_seed(cfg: dict, s: int, skip: tuple[int, ...] = (), order: int | None = None) -> dict:
    """Train and score seed ``s``'s agents; ``order``: train with batch order ``order`` and initialisation ``s``
    (``paraphrase_swap``; the results are keyed ``i<s>o<order>`` instead of ``s``)."""
    con, pool, test = data(cfg)
    tag, order = (s, s) if order is None else (f"i{s}o{order}", order)
    tensors, metrics, history = {}, {}, {}
    t0 = time.time()
    for n in [n for n in cfg["n_trains"] if n not in skip]:
        train = pool[:n]
        models = {}
        for iface in cfg["interfaces"]:
            with repro.seeded(s):
                m = dsl.make_agent(iface, cfg["d_model"], cfg["n_layer"], cfg["n_head"], paraphrase=True)
                steps = dsl.para_steps(n, cfg["steps"], cfg["batch"], cfg["min_epochs"])
                losses = dsl.train_agent(m, train, iface, steps, cfg["batch"], cfg["lr"], seed=order)
            models[iface] = m
            history[f"loss/{iface}/{n}/{tag}"] = losses
            metrics[f"fit/{iface}/{n}/{tag}"] = dsl.greedy_success(m, con, train[:cfg["n_fit"]], iface)
        for arm in cfg["arms"]:
            iface, constrained = ARM_DECODER[arm]
            res = [dsl.agent_answer(models[iface], con, it, iface, constrained, cfg["repairs"]) for it in test]
            out = np.array([[r.success for r in res], [r.success and r.repairs == 0 for r in res],
                            [r.executed_invalid for r in res]], dtype=np.uint8)
            tensors[f"out/{arm}/{n}/{tag}"] = torch.from_numpy(out)
            metrics[f"success/{arm}/{n}/{tag}"] = float(out[0].mean())
        print(f"seed {tag} n_train {n}: fit " + ", ".join(
            f"{i} {metrics[f'fit/{i}/{n}/{tag}']:.2f}" for i in cfg["interfaces"]) + "; held-out " + ", ".join(
            f"{a} {metrics[f'success/{a}/{n}/{tag}']:.3f}" for a in cfg["arms"])
            + f" ({time.time() - t0:.0f} s)", flush=True)
    return {"tensors": tensors, "metrics": metrics, "history": history}


def tiny(name: str) -> dict:
    cfg = dsl.checkpoint_config(name)
    cfg.update(n_trains=[10, 20] if name == "paraphrase" else [20], n_test=5, test_after=10,
               seeds=[0] if name != "paraphrase_swap" else [0, 1], steps=3, batch=4, d_model=16, n_layer=1,
               n_head=2, repairs=1, n_fit=5)
    return cfg


def swap_pairs(cfg: dict) -> list[tuple[int, int]]:
    """``paraphrase_swap``'s (initialisation, batch order) pairs: the two crossed pairs of its two seeds."""
    a, b = cfg["seeds"]
    return [(a, b), (b, a)]


def make_paraphrase(cfg: dict, root: Path | None, parts: Path | None = None, reuse: bool = False,
                    name: str = "paraphrase") -> Path:
    t0 = time.time()
    tensors, metrics, history = {}, {}, {}
    skip, old = stored_sizes(cfg) if reuse and name == "paraphrase" else ([], None)
    if skip:
        print(f"sizes {skip} read from the stored checkpoint (same settings), not retrained", flush=True)
    key = scripts.part_key(cfg, skip=skip, name=name)
    jobs = ([(s, lambda s=s: one_seed(cfg, s, tuple(skip))) for s in cfg["seeds"]] if name != "paraphrase_swap"
            else [(k, lambda i=i, o=o: one_seed(cfg, i, (), o)) for k, (i, o) in enumerate(swap_pairs(cfg))])
    for s, job in jobs:
        res, _ = scripts.seed_part(parts, s, key, job)
        tensors.update(res["tensors"])
        metrics.update(res["metrics"])
        history.update(res["history"])
    # loss curves as means over windows of `window` steps, rounded (the manifest stays small; plateau() reads
    # means of fifths of the curve, which windowing does not change)
    w = HISTORY_WINDOW
    history = {k: [(i + w, round(float(np.mean(v[i:i + w])), 5)) for i in range(0, len(v) - w + 1, w)]
               for k, v in history.items()}
    for n in skip:  # the stored sizes: outcomes, fit and (already windowed) loss curves as stored
        for s in cfg["seeds"]:
            for arm in cfg["arms"]:
                tensors[f"out/{arm}/{n}/{s}"] = old.tensors[f"out/{arm}/{n}/{s}"]
                metrics[f"success/{arm}/{n}/{s}"] = old.manifest["metrics"][f"success/{arm}/{n}/{s}"]
            for iface in cfg["interfaces"]:
                metrics[f"fit/{iface}/{n}/{s}"] = old.manifest["metrics"][f"fit/{iface}/{n}/{s}"]
                history[f"loss/{iface}/{n}/{s}"] = old.manifest["history"][f"loss/{iface}/{n}/{s}"]
    extra = {"reused_sizes": skip, "reused_from": old.manifest["source"]} if skip else None
    return checkpoints.save(SLUG, name, tensors, config=cfg, metrics=metrics, history=history,
                            seed=list(cfg["seeds"]), steps=cfg["steps"], wall_seconds=time.time() - t0,
                            sources=SOURCES, module="helpers.dsl_harness", root=root, extra=extra)


def main(argv: list[str] | None = None) -> list[Path]:
    def options(ap: argparse.ArgumentParser) -> None:
        ap.add_argument("--parts", type=Path, default=None, help="folder keeping (and reusing) each seed's results")
        ap.add_argument("--reuse", action="store_true",
                        help="read the sizes the stored checkpoint holds under the same settings, train the rest")

    return scripts.script_main(lambda cfg, out, args: make_paraphrase(cfg, out, args.parts, args.reuse,
                                                                      args.name),
                               config=dsl.checkpoint_config, tiny=tiny,
                               names=["paraphrase", "paraphrase_seeds", "paraphrase_swap"], options=options,
                               doc=__doc__, argv=argv)


if __name__ == "__main__":
    main()
