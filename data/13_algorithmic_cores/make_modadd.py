"""Train the modular-addition grokking runs of chapter 13_algorithmic_cores, which do not fit its 5-minute default
run, and write them with :mod:`helpers.checkpoints`:

* ``modadd``: per seed (0, 1, 2) a two-layer transformer (p = 53, d = 128, 4 heads) trained full batch with AdamW
  (lr 1e-3, weight decay 1) for 3000 steps (= epochs; the paper ~2000 epochs at batch 512, about 6000 optimizer
  steps; the issue asks 3-5k epochs), logged every 10 steps; one seed takes 10-30 min on the shared 2-core
  machine, depending on its load. About ten checkpoints per seed are chosen after training
  (memorisation, a pre-grokking one, grokking, then evenly spaced to the end) and analysed with ACE (energy rank,
  causal necessity / sufficiency scans, the cyclic fit and its random-means null); the analysis goes into the
  manifest. The weights of four of seed 0's checkpoints (pre-grokking, grokking, middle, end) are stored in float16
  (the analysis runs on the same float16-rounded weights, so the notebook reproduces it); for every seed and
  analysed checkpoint the class means of the layer (p x d) and the same means in the core (p x r) are stored in
  float32 (``states.<seed>.<name>.means`` / ``.reps``), which the notebook's ring-fraction nulls need.

Run from the repository root: ``.venv/bin/python data/13_algorithmic_cores/make_modadd.py`` (or ``make data
NB=13_algorithmic_cores``). ``--tiny`` trains a tiny config for a few steps into a temporary folder (seconds; what
the tests run); ``--seeds``/``--out``: other seeds into another data root. ``--jobs`` runs seeds in parallel
processes, one torch thread each: the same seed on the same machine writes byte-identical weights.
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


def tiny(name: str = "modadd") -> dict:
    cfg = copy.deepcopy(ac.checkpoint_config("modadd"))
    cfg.update(p=7, d=16, steps=20, seeds=[0], n_analysed=4, samples=8, null_draws=2, r_max=8)
    return cfg


def run_seed(args: tuple[dict, int]) -> dict:
    cfg, s = args
    torch.set_num_threads(1)
    t0 = time.time()
    tr, te = (torch.tensor(a) for a in ac.modadd_split(cfg["p"], cfg["train_frac"], seed=cfg["split_seed"]))

    def progress(step: int, row: dict) -> None:
        if step % 250 == 0:
            print(f"seed {s} step {step}: train {row['train_acc']:.3f} test {row['test_acc']:.3f} "
                  f"({time.time() - t0:.0f} s)", flush=True)

    with repro.seeded(s):
        model = ac.modadd_model(cfg["p"], cfg["d"], cfg["n_head"])
        log = ac.train_modadd(model, tr, te, cfg["steps"], lr=cfg["lr"], wd=cfg["wd"], betas=cfg["betas"],
                              eval_every=cfg["eval_every"], snapshot_every=cfg["eval_every"], on_eval=progress)
    named = ac.choose_checkpoints(log, cfg["n_analysed"], cfg["mem_acc"], cfg["gen_acc"], cfg["eval_every"])
    analysis, states = {}, {}
    for name, step in sorted(named.items(), key=lambda kv: kv[1]):
        m = ac.modadd_model(cfg["p"], cfg["d"], cfg["n_head"])
        m.load_state_dict({k: v.float() for k, v in log["snapshots"][step].items()})
        a = ac.modadd_analysis(m, te, cfg["p"], threshold=cfg["threshold"], samples=cfg["samples"], seed=s,
                               null_draws=cfg["null_draws"], r_max=cfg["r_max"])
        a["eigs_re"], a["eigs_im"] = a["eigs"].real.tolist(), a["eigs"].imag.tolist()
        del a["eigs"]
        analysis[name] = dict(step=step, **a)
        # the inputs of the cyclic fit's nulls (class order, random subspace), for every seed and checkpoint
        means, reps = ac.modadd_class_states(m, te, cfg["p"], a["r_used"], threshold=cfg["threshold"],
                                             samples=cfg["samples"], seed=s)
        states[f"states.{s}.{name}.means"] = torch.from_numpy(means)
        states[f"states.{s}.{name}.reps"] = torch.from_numpy(reps)
        print(f"seed {s} {name:>12} step {step:>5}: test {a['base']:.3f} r_energy {a['r_energy']:>3} "
              f"r_nec {a['r_nec']:>3} r_suf {a['r_suf']:>3} ring {a['ring']:.2f} (null {a['ring_null']:.2f}) "
              f"modes {a['modes']}", flush=True)
    keep = dict(states)
    if s == cfg["stored_seed"]:
        for name in ("pre_grokking", "grokking", f"after_{max(1, (cfg['n_analysed'] - 4) // 2)}", "end"):
            if name in named:
                keep.update({f"{name}.{k}": v for k, v in log["snapshots"][named[name]].items()})
    return dict(seed=s, log={k: v for k, v in log.items() if k != "snapshots"}, named=named, analysis=analysis,
                tensors=keep, seconds=time.time() - t0)


def make_modadd(cfg: dict, out: Path | None, jobs: int = 1) -> Path:
    t0 = time.time()
    work = [(cfg, s) for s in cfg["seeds"]]
    if jobs > 1:
        with mp.get_context("spawn").Pool(min(jobs, len(work))) as pool:
            results = pool.map(run_seed, work)
    else:
        results = [run_seed(w) for w in work]
    tensors, history, metrics, extra = {}, {}, {}, {"analysis": {}, "named": {}}
    for r in results:
        s, log = r["seed"], r["log"]
        tensors.update(r["tensors"])
        history[f"test_acc/{s}"] = list(zip(log["step"], log["test_acc"]))
        history[f"train_acc/{s}"] = list(zip(log["step"], log["train_acc"]))
        history[f"loss/{s}"] = list(zip(log["step"], log["loss"]))
        t_mem, t_gen = ac.memorise_generalise(log["step"], log["train_acc"], log["test_acc"], cfg["mem_acc"],
                                              cfg["gen_acc"])
        metrics[f"t_mem/{s}"], metrics[f"t_gen/{s}"] = t_mem, t_gen
        metrics[f"final_test_acc/{s}"] = log["test_acc"][-1]
        extra["analysis"][str(s)] = r["analysis"]
        extra["named"][str(s)] = r["named"]
        extra.setdefault("seconds_per_seed", {})[str(s)] = round(r["seconds"], 1)
    return checkpoints.save(SLUG, "modadd", tensors, config=cfg, metrics=metrics, history=history,
                            seed=cfg["seeds"], steps=cfg["steps"], wall_seconds=time.time() - t0, sources=SOURCES,
                            module="helpers.algorithmic_cores", extra=extra, root=out)


def main(argv: list[str] | None = None) -> list[Path]:
    def options(ap: argparse.ArgumentParser) -> None:
        ap.add_argument("--jobs", type=int, default=1, help="seeds trained in parallel processes")

    return scripts.script_main(lambda cfg, out, args: make_modadd(cfg, out, args.jobs), config=ac.checkpoint_config,
                               tiny=tiny, names=["modadd"], options=options, doc=__doc__, argv=argv)


if __name__ == "__main__":
    main()
