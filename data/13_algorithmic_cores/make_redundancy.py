"""Run the redundancy-by-design grokking study of chapter 13_algorithmic_cores (too long for its 5-minute default
run) and write its results with :mod:`helpers.checkpoints`:

* ``redundancy``: modular addition (p = 31, two layers, d = 64, 4 heads, full batch, AdamW lr 1e-3 with the main
  run's betas, warmup and clipping, weight decay 1) with the token embedding **frozen** to m in {1, 2, 4, 8} Fourier frequencies (``ac.fourier_embedding``): the
  number of modes the network can use is set by design, not measured after the fact. Per seed the frequencies
  are the first m of a random order of 1..15 (nested: the m = 2 set contains the m = 1 frequency), and the
  embedding's random rotation into d dimensions is the seed's. Each run is logged every 10 steps and stops at
  generalisation (test accuracy >= 0.95) or after 3000 steps; the grokking time is tau = generalisation step -
  memorisation step (train accuracy >= 0.99). Only numbers are stored (the tensor file holds the tau table, -1
  where a run did not generalise or did not memorise first).

Run from the repository root: ``.venv/bin/python data/13_algorithmic_cores/make_redundancy.py`` (or ``make data
NB=13_algorithmic_cores``). ``--tiny`` runs a tiny config into a temporary folder (seconds; what the tests run);
``--seeds``/``--out``: other seeds into another data root; ``--jobs`` runs in parallel processes, one thread each.
"""

from __future__ import annotations

import argparse
import copy
import multiprocessing as mp
import time
from pathlib import Path

import numpy as np
import torch

from helpers import algorithmic_cores as ac
from helpers import checkpoints, repro, scripts

SLUG = ac.CHECKPOINT_SLUG
HERE = Path(__file__).resolve()
SOURCES = [HERE, Path(ac.__file__).resolve(), Path(repro.__file__).resolve()]


def tiny(name: str = "redundancy") -> dict:
    cfg = copy.deepcopy(ac.checkpoint_config("redundancy"))
    cfg.update(p=11, d=16, max_steps=20, seeds=[0], ms=[1, 2])
    return cfg


def frequencies(p: int, m: int, seed: int) -> list[int]:
    """The first m of the seed's random order of the frequencies 1..p//2 (nested in m)."""
    return [int(k) for k in np.random.default_rng(seed).permutation(np.arange(1, p // 2 + 1))[:m]]


def one_run(args: tuple[dict, tuple[int, int]]) -> dict:
    """Train one frozen-Fourier run to generalisation (or the budget)."""
    cfg, (s, m) = args
    torch.set_num_threads(1)
    t0 = time.time()
    p = cfg["p"]
    tr, te = (torch.tensor(a) for a in ac.modadd_split(p, cfg["train_frac"], seed=cfg["split_seed"]))
    freqs = frequencies(p, m, s)
    with repro.seeded(s):
        model = ac.modadd_model(p, cfg["d"], cfg["n_head"], freqs=freqs, embed_seed=s)
        log = ac.train_modadd(model, tr, te, cfg["max_steps"], lr=cfg["lr"], wd=cfg["wd"], betas=cfg["betas"],
                              eval_every=cfg["eval_every"], stop_at=cfg["gen_acc"], warmup=cfg["warmup"],
                              clip=cfg["clip"])
    t_mem, t_gen = ac.memorise_generalise(log["step"], log["train_acc"], log["test_acc"], cfg["mem_acc"],
                                          cfg["gen_acc"])
    tau = None if t_mem is None or t_gen is None or t_gen < t_mem else t_gen - t_mem
    res = dict(seed=s, m=m, freqs=freqs, modes_in=ac.embedding_modes(model.tok.weight.detach().numpy(), p),
               t_mem=t_mem, t_gen=t_gen, tau=tau, final_test=log["test_acc"][-1],
               final_train=log["train_acc"][-1], last_step=log["step"][-1], seconds=round(time.time() - t0, 1),
               curve=list(zip(log["step"], log["test_acc"])), train_curve=list(zip(log["step"], log["train_acc"])))
    print(f"seed {s} m {m} freqs {freqs}: t_mem {t_mem} t_gen {t_gen} tau {tau} ({res['seconds']} s)", flush=True)
    return res


def make_redundancy(cfg: dict, out: Path | None, jobs: int = 1) -> Path:
    t0 = time.time()
    work = [(cfg, (s, m)) for s in cfg["seeds"] for m in cfg["ms"]]
    if jobs > 1:
        with mp.get_context("spawn").Pool(min(jobs, len(work))) as pool:
            results = pool.map(one_run, work, chunksize=1)
    else:
        results = [one_run(w) for w in work]
    history = {}
    for r in results:
        history[f"test_acc/s{r['seed']}_m{r['m']}"] = r.pop("curve")
        history[f"train_acc/s{r['seed']}_m{r['m']}"] = r.pop("train_curve")
    tau = torch.tensor([[r["seed"], r["m"], -1 if r["tau"] is None else r["tau"]] for r in results],
                       dtype=torch.float32)
    metrics = {f"tau/s{r['seed']}_m{r['m']}": r["tau"] for r in results}
    return checkpoints.save(SLUG, "redundancy", {"tau_table": tau}, config=cfg, metrics=metrics, history=history,
                            seed=cfg["seeds"], steps=cfg["max_steps"], wall_seconds=time.time() - t0,
                            sources=SOURCES, module="helpers.algorithmic_cores", extra={"runs": results}, root=out)


def main(argv: list[str] | None = None) -> list[Path]:
    def options(ap: argparse.ArgumentParser) -> None:
        ap.add_argument("--jobs", type=int, default=1, help="runs trained in parallel processes")

    return scripts.script_main(lambda cfg, out, args: make_redundancy(cfg, out, args.jobs),
                               config=ac.checkpoint_config, tiny=tiny, names=["redundancy"], options=options,
                               doc=__doc__, argv=argv)


if __name__ == "__main__":
    main()
