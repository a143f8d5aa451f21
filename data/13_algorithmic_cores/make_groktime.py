"""Run the grokking-time study of chapter 13_algorithmic_cores (too long for its 5-minute default run) and write
its results with :mod:`helpers.checkpoints`:

* ``groktime``: modular addition (p = 31, two layers, 4 heads, full batch, AdamW lr 3e-3) on two axes, seeds 0, 1,
  2: weight decay 0.25, 0.5, 1, 2 at width 32, and width (the redundancy axis) 16, 32, 48, 64 at weight decay 1.
  Each run is logged every 10 steps and stops at generalisation (test accuracy >= 0.95) or after 2000 steps. At the
  memorisation step (train accuracy >= 0.99) and at generalisation, ACE (energy rank 0.99) and the cyclic fit give
  the number of Fourier modes. The grokking time is tau = generalisation step - memorisation step. Only numbers
  are stored (the tensor file holds the tau table; a run that did not generalise has tau = -1).

Run from the repository root: ``.venv/bin/python data/13_algorithmic_cores/make_groktime.py`` (or ``make data
NB=13_algorithmic_cores``). ``--tiny`` runs a tiny config into a temporary folder (seconds; what the tests run);
``--seeds``/``--out``: other seeds into another data root.
``--jobs`` runs the runs in parallel processes, one torch thread each.
"""

from __future__ import annotations

import argparse
import copy
import multiprocessing as mp
import time
from pathlib import Path

import torch

from helpers import algorithmic_cores as ac
from helpers import checkpoints, repro, scripts

SLUG = ac.CHECKPOINT_SLUG
HERE = Path(__file__).resolve()
SOURCES = [HERE, Path(ac.__file__).resolve(), Path(repro.__file__).resolve()]


def tiny(name: str = "groktime") -> dict:
    cfg = copy.deepcopy(ac.checkpoint_config("groktime"))
    cfg.update(p=7, max_steps=20, seeds=[0], wd_axis=dict(d=16, wds=[1.0, 2.0]), width_axis=dict(wd=1.0, ds=[8, 16]),
               samples=8)
    return cfg


def runs(cfg: dict) -> list[tuple[int, int, float]]:
    """The unique (seed, width, weight decay) runs of both axes, the most expensive first."""
    out = set()
    for s in cfg["seeds"]:
        out |= {(s, cfg["wd_axis"]["d"], float(w)) for w in cfg["wd_axis"]["wds"]}
        out |= {(s, int(d), float(cfg["width_axis"]["wd"])) for d in cfg["width_axis"]["ds"]}
    return sorted(out, key=lambda r: (-r[1] / r[2] ** 0.5, r[0]))


def one_run(args: tuple[dict, tuple[int, int, float]]) -> dict:
    """Train one run to generalisation; the mode counts at memorisation and at generalisation."""
    cfg, (s, d, wd) = args
    torch.set_num_threads(1)
    t0 = time.time()
    p = cfg["p"]
    tr, te = (torch.tensor(a) for a in ac.modadd_split(p, cfg["train_frac"], seed=cfg["split_seed"]))
    found: dict = {}

    with repro.seeded(s):
        model = ac.modadd_model(p, d, cfg["n_head"])

        def on_eval(step: int, row: dict) -> None:
            if "mem" not in found and row["train_acc"] >= cfg["mem_acc"]:
                found["mem"] = ac.modadd_analysis(model, te, p, threshold=cfg["threshold"],
                                                  samples=cfg["samples"], seed=s, refine=False)
                model.train()

        log = ac.train_modadd(model, tr, te, cfg["max_steps"], lr=cfg["lr"], wd=wd, betas=cfg["betas"],
                              eval_every=cfg["eval_every"], stop_at=cfg["gen_acc"], on_eval=on_eval)
    t_mem, t_gen = ac.memorise_generalise(log["step"], log["train_acc"], log["test_acc"], cfg["mem_acc"],
                                          cfg["gen_acc"])
    gen = ac.modadd_analysis(model, te, p, threshold=cfg["threshold"], samples=cfg["samples"], seed=s,
                             refine=False)
    mem = found.get("mem", {})
    res = dict(seed=s, d=d, wd=wd, t_mem=t_mem, t_gen=t_gen,
               tau=None if t_mem is None or t_gen is None else t_gen - t_mem,
               modes_mem=mem.get("modes"), rank_mem=mem.get("r_energy"), ring_mem=mem.get("ring"),
               modes_gen=gen["modes"], rank_gen=gen["r_energy"], ring_gen=gen["ring"],
               final_test=log["test_acc"][-1], last_step=log["step"][-1], seconds=round(time.time() - t0, 1),
               curve=list(zip(log["step"], log["test_acc"])))
    print(f"seed {s} d {d:>3} wd {wd:<4}: t_mem {t_mem} t_gen {t_gen} tau {res['tau']} modes at mem "
          f"{res['modes_mem']} (rank {res['rank_mem']}), at gen {res['modes_gen']} ({res['seconds']} s)", flush=True)
    return res


def make_groktime(cfg: dict, out: Path | None, jobs: int = 1) -> Path:
    t0 = time.time()
    work = [(cfg, r) for r in runs(cfg)]
    if jobs > 1:
        with mp.get_context("spawn").Pool(min(jobs, len(work))) as pool:
            results = pool.map(one_run, work, chunksize=1)
    else:
        results = [one_run(w) for w in work]
    results.sort(key=lambda r: (r["seed"], r["d"], r["wd"]))
    history = {f"test_acc/s{r['seed']}_d{r['d']}_wd{r['wd']}": r.pop("curve") for r in results}
    tau = torch.tensor([[r["seed"], r["d"], r["wd"], -1 if r["tau"] is None else r["tau"]] for r in results],
                       dtype=torch.float32)
    metrics = {f"tau/s{r['seed']}_d{r['d']}_wd{r['wd']}": r["tau"] for r in results}
    return checkpoints.save(SLUG, "groktime", {"tau_table": tau}, config=cfg, metrics=metrics, history=history,
                            seed=cfg["seeds"], steps=cfg["max_steps"], wall_seconds=time.time() - t0,
                            sources=SOURCES, module="helpers.algorithmic_cores", extra={"runs": results}, root=out)


def main(argv: list[str] | None = None) -> list[Path]:
    def options(ap: argparse.ArgumentParser) -> None:
        ap.add_argument("--jobs", type=int, default=1, help="runs trained in parallel processes")

    return scripts.script_main(lambda cfg, out, args: make_groktime(cfg, out, args.jobs), config=ac.checkpoint_config,
                               tiny=tiny, names=["groktime"], options=options, doc=__doc__, argv=argv)


if __name__ == "__main__":
    main()
