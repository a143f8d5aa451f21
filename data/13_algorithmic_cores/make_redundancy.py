"""Run the redundancy-by-design grokking study of chapter 13_algorithmic_cores (too long for its 5-minute default
run) and write its results with :mod:`helpers.checkpoints`:

* ``redundancy``: modular addition (p = 31, two layers, d = 64, 4 heads, full batch, AdamW lr 1e-3 with the main
  run's betas, warmup and clipping, weight decay 1). Round 5 of issue #71: the number of Fourier modes m in
  {1, 2, 4, 8} is set **from step 0**. Per seed and m a fresh model (the seed's initial weights, the same for
  every m) has its learned token embedding projected onto its mean and the first m frequencies of the seed's
  random order (``ac.mode_order``, nested in m), its centred part rescaled to the norm it had
  (``ac.project_embedding``), and kept there after every optimizer step (``ac.keep_modes``): the embedding trains,
  but only inside its m modes. Training runs until the run has both memorised and generalised (test accuracy
  >= 0.95; a first version stopped at generalisation alone and so missed a memorisation that came after it: seed
  0's m = 1 run stopped unmemorised; the stop rule was fixed after that seed's first three runs had printed, and
  it changes no condition, tolerance, or tau of a run that memorised first) or 4000 steps; tau =
  generalisation step - memorisation step (train accuracy >= 0.99), logged every 10 steps. A run at m = p // 2
  (every mode, no projection) is the unconstrained reference. Per run the train and test accuracy at the
  memorisation step are stored (the condition ``redundancy_isolated`` reads ``ac.isolation_gap`` over m there).
  Only numbers are stored (the tensor file holds the tau table, -1 where a run did not give a tau).

  The design and both conditions (``redundancy_measured``, ``redundancy_isolated`` with its tolerance 0.1) were
  fixed in ``ac.checkpoint_config("redundancy")`` before any run of it was read; ``--probe 0`` was run first and
  printed only the conditions' inputs (each run stopped at memorisation). Rounds 2-4 projected a memorised network
  onto m of its own modes and re-fitted it (every weight, or the embedding alone, ``redundancy_probes.json``):
  the condition failed at every seed, and those runs are replaced by these.

* ``redundancy_branch`` (round 7 of issue #71, written down before any run of it; the reviewer's step 3): the
  redundancy set from **one shared memorised checkpoint per seed**, so that every m starts from the same memorised
  state and has a plateau to time. Per seed a network (p = 31, d = 64, the optimizer above, full batch) is trained
  from the seed's initial weights to its first logged step with train accuracy >= 0.99 (at most 4000 steps): the
  branch (weights and AdamW state copied). From the branch, per m in {1, 2, 4, 8}, training goes on with the same
  optimizer state, and after every step the token embedding's *update* (AdamW's step minus its decoupled decay)
  is projected onto the embedding's mean and the first m frequencies of ``ac.mode_order(p, seed)``
  (``ac.keep_update_modes``): the memorised embedding is kept (and fades under weight decay), only m modes can
  grow. m = p // 2 (no projection) is the unconstrained reference, outside the fit. tau = steps from the branch to
  the first logged test accuracy >= 0.95, within 4000 steps. Conditions, fixed here before any run: the seed's
  branch has test accuracy <= 0.5 (``redundancy_branch_plateau``: a plateau to time; train accuracy >= 0.99 holds
  by construction, a seed that never memorises fails it) and every m of the seed generalises within the budget
  (``redundancy_generalised``: tau measured, not censored). The claim ``redundancy_law_slope`` and its band
  [-1.5, -0.5] are unchanged; it reads this design, given both conditions. ``--name redundancy_branch``.

* ``redundancy_cut`` (round 8 of issue #71, written down and committed before any run of it): the round-7 design
  with the **modes outside m removed at the branch** (the previous reviewer's known limit: in ``redundancy_branch``
  the memorised embedding's other modes fade slowly and still hold 2-18% of their size when a restricted run
  generalises, so m was not the number of modes available). Per seed the same shared memorised checkpoint as
  ``redundancy_branch`` (same seed, same optimizer, same branch step); per m in {1, 2, 4, 8}, at the branch the
  token embedding is projected onto its mean and the first m frequencies of ``ac.mode_order(p, seed)``, its
  centred part rescaled to the norm it had (``ac.project_embedding``, keep_norm), and after every step projected
  back (``ac.keep_modes``): only m modes exist from the branch on. AdamW state copied from the branch as before.
  The accuracies right after the cut are stored (``cut_train`` / ``cut_test``: the cut may undo part of the
  memorisation; tau still counts from the branch). Budget **10000 steps** from the branch (round 7's 4000 left
  three m of seed 0 and three of seed 1 censored; 10000 is 2.5x, chosen before any run of this design).
  Conditions and claim unchanged: ``redundancy_branch_plateau`` (test accuracy at the branch <= 0.5, the same
  branch) and ``redundancy_generalised`` (every m of the seed generalises within the budget); the claim
  ``redundancy_law_slope`` (slope of log tau against log m in [-1.5, -0.5]) reads this design once it is trained at
  all three seeds. Order, fixed here: **seed 0 first** (one job, ``--name redundancy_cut --cache DIR --seeds 0``);
  if seed 0 meets ``redundancy_generalised``, seeds 1 and 2 are trained (one job each) and the claim reads this
  design; if it does not, seeds 1 and 2 are not run, the budget is not changed after seeing it, seed 0's runs are
  kept as a probe record and the claim stays on ``redundancy_branch``.

Run from the repository root: ``.venv/bin/python data/13_algorithmic_cores/make_redundancy.py`` (or ``make data
NB=13_algorithmic_cores``). ``--tiny`` runs a tiny config into a temporary folder (seconds; what the tests run);
``--seeds``/``--out``: other seeds into another data root; ``--jobs`` runs seeds in parallel processes, one thread
each; ``--cache DIR`` keeps each seed's result in ``DIR/redundancy_s<seed>.json`` and reuses it (one seed per job,
then one run that assembles the checkpoint; the same seed gives the same numbers). ``--probe SEED`` runs one seed
up to each run's memorisation and prints only what the condition ``redundancy_isolated`` reads (no tau).
"""

from __future__ import annotations

import argparse
import copy
import json
import multiprocessing as mp
import time
from pathlib import Path

import torch

from helpers import algorithmic_cores as ac
from helpers import checkpoints, repro, scripts

SLUG = ac.CHECKPOINT_SLUG
HERE = Path(__file__).resolve()
SOURCES = [HERE, Path(ac.__file__).resolve(), Path(repro.__file__).resolve()]


def tiny(name: str = "redundancy") -> dict:
    cfg = copy.deepcopy(ac.checkpoint_config(name))
    cfg.update(p=11, d=16, max_steps=60, seeds=[0], ms=[1, 2], lr=3e-3)
    if name in ("redundancy_branch", "redundancy_cut"):
        cfg.update(mem_budget=200)
    return cfg


def one_run(cfg: dict, s: int, m: int, probe: bool = False) -> dict:
    """Train one run with m modes kept from step 0 (every mode: m = p // 2, no projection) to generalisation or
    the budget; ``probe``: stop at memorisation (the condition's inputs, no tau)."""
    p = cfg["p"]
    tr, te = (torch.tensor(a) for a in ac.modadd_split(p, cfg["train_frac"], seed=cfg["split_seed"]))
    freqs = ac.mode_order(p, s)[:m]
    reference = m == p // 2
    with repro.seeded(s):
        model = ac.modadd_model(p, cfg["d"], cfg["n_head"])  # the seed's initial weights, the same for every m
        keep = None
        if not reference:
            with torch.no_grad():
                E = model.tok.weight.detach().numpy().astype("float64")
                model.tok.weight.copy_(torch.as_tensor(ac.project_embedding(E, freqs, cfg["keep_norm"]),
                                                       dtype=torch.float32))
            keep = ac.keep_modes(p, freqs)
        log = ac.train_modadd(model, tr, te, cfg["max_steps"], lr=cfg["lr"], wd=cfg["wd"], betas=cfg["betas"],
                              eval_every=cfg["eval_every"], warmup=cfg["warmup"], clip=cfg["clip"],
                              after_step=keep, stop_at=None if probe else cfg["gen_acc"],
                              stop_at_train=cfg["mem_acc"], stop_all=True)  # memorised and generalised
    t_mem, mem_train, mem_test = ac.clock_start(log["step"], log["train_acc"], log["test_acc"], cfg["mem_acc"])
    t_gen = ac.grok_step(log["step"], log["test_acc"], cfg["gen_acc"])
    tau = None if probe or t_mem is None or t_gen is None else max(t_gen - t_mem, 0)
    return dict(seed=s, m=m, reference=reference, freqs=freqs, t_mem=t_mem, mem_train=mem_train,
                mem_test=mem_test, t_gen=None if probe else t_gen, tau=tau,
                modes_in=ac.embedding_modes(model.tok.weight.detach().numpy(), p),
                final_train=log["train_acc"][-1], final_test=log["test_acc"][-1], last_step=log["step"][-1],
                curve=list(zip(log["step"], log["test_acc"])), train_curve=list(zip(log["step"], log["train_acc"])))


def one_seed(cfg: dict, s: int, probe: bool = False) -> list[dict]:
    """Every m of the seed (and the every-mode reference); ``probe``: each run stopped at memorisation."""
    torch.set_num_threads(1)
    t0 = time.time()
    runs = []
    for m in [*cfg["ms"], cfg["p"] // 2]:
        r = one_run(cfg, s, m, probe=probe)
        runs.append(r)
        at = ("never memorised" if r["t_mem"] is None else
              f"memorised at {r['t_mem']} (train {r['mem_train']:.3f}, test {r['mem_test']:.3f})")
        print(f"{'probe ' if probe else ''}seed {s} m {m:>2} freqs {r['freqs']}: {at}"
              + ("" if probe else f"; t_gen {r['t_gen']} tau {r['tau']}") + f" ({time.time() - t0:.0f} s)",
              flush=True)
    return runs


def branch_seed(cfg: dict, s: int) -> list[dict]:
    """Round 7: the seed's shared memorised checkpoint, then one run per m (and the reference) from it."""
    torch.set_num_threads(1)
    t0 = time.time()
    p = cfg["p"]
    tr, te = (torch.tensor(a) for a in ac.modadd_split(p, cfg["train_frac"], seed=cfg["split_seed"]))
    with repro.seeded(s):
        model = ac.modadd_model(p, cfg["d"], cfg["n_head"])
        opt = torch.optim.AdamW(model.parameters(), lr=cfg["lr"], weight_decay=cfg["wd"], betas=tuple(cfg["betas"]))
        log = ac.train_modadd(model, tr, te, cfg["mem_budget"], lr=cfg["lr"], wd=cfg["wd"], optimizer=opt,
                              eval_every=cfg["eval_every"], warmup=cfg["warmup"], clip=cfg["clip"],
                              stop_at_train=cfg["mem_acc"])
    t_branch, b_train, b_test = ac.clock_start(log["step"], log["train_acc"], log["test_acc"], cfg["mem_acc"])
    print(f"seed {s}: branch at {t_branch} (train {b_train}, test {b_test}) ({time.time() - t0:.0f} s)", flush=True)
    runs = []
    if t_branch is None:
        return [dict(seed=s, m=m, reference=m == p // 2, t_branch=None, branch_train=None, branch_test=None,
                     tau=None) for m in [*cfg["ms"], p // 2]]
    state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(opt.state_dict())
    for m in [*cfg["ms"], p // 2]:
        reference = m == p // 2
        freqs = ac.mode_order(p, s)[:m]
        net = ac.modadd_model(p, cfg["d"], cfg["n_head"])
        net.load_state_dict(state)
        o = torch.optim.AdamW(net.parameters(), lr=cfg["lr"], weight_decay=cfg["wd"], betas=tuple(cfg["betas"]))
        o.load_state_dict(copy.deepcopy(opt_state))
        cut = cfg.get("design") == "cut_at_branch" and not reference  # round 8: outside modes removed
        if cut:
            with torch.no_grad():
                E = net.tok.weight.detach().numpy().astype("float64")
                net.tok.weight.copy_(torch.as_tensor(ac.project_embedding(E, freqs, cfg["keep_norm"]),
                                                     dtype=torch.float32))
        at_cut = dict(cut_train=ac.modadd_accuracy(net, tr), cut_test=ac.modadd_accuracy(net, te)) if cut else {}
        keep = None if reference else ac.keep_modes(p, freqs) if cut else ac.keep_update_modes(net, p, freqs, o)
        lg = ac.train_modadd(net, tr, te, cfg["max_steps"], lr=cfg["lr"], wd=cfg["wd"], optimizer=o,
                             eval_every=cfg["eval_every"], clip=cfg["clip"], after_step=keep,
                             stop_at=cfg["gen_acc"])
        tau = ac.grok_step(lg["step"], lg["test_acc"], cfg["gen_acc"])
        runs.append(dict(seed=s, m=m, reference=reference, freqs=freqs, t_branch=t_branch, branch_train=b_train,
                         branch_test=b_test, tau=tau, min_train_after=min(lg["train_acc"]), **at_cut,
                         final_train=lg["train_acc"][-1], final_test=lg["test_acc"][-1], last_step=lg["step"][-1],
                         modes_in=ac.embedding_modes(net.tok.weight.detach().numpy(), p),
                         curve=list(zip(lg["step"], lg["test_acc"])),
                         train_curve=list(zip(lg["step"], lg["train_acc"]))))
        print(f"seed {s} m {m:>2} freqs {freqs}: tau {tau} (min train after the branch "
              f"{runs[-1]['min_train_after']:.3f}) ({time.time() - t0:.0f} s)", flush=True)
    return runs


def seed_runs(args: tuple[dict, int, str | None]) -> list[dict]:
    cfg, s, cache = args
    stem = {"shared_memorised_branch": "redundancy_branch", "cut_at_branch": "redundancy_cut"}.get(
        cfg.get("design"), "redundancy")
    branch = stem != "redundancy"
    path = None if cache is None else Path(cache) / f"{stem}_s{s}.json"
    if path is not None and path.is_file():
        stored = json.loads(path.read_text())
        if stored["config"] == cfg:  # the same config: the same numbers (deterministic)
            print(f"seed {s}: reused {path}", flush=True)
            return stored["runs"]
    runs = branch_seed(cfg, s) if branch else one_seed(cfg, s)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(dict(config=cfg, runs=runs)))
    return runs


def make_redundancy(cfg: dict, out: Path | None, jobs: int = 1, cache: str | None = None,
                    probe: int | None = None, name: str = "redundancy") -> Path | list:
    t0 = time.time()
    if probe is not None:  # one seed up to each run's memorisation: what redundancy_isolated reads
        runs = [r for r in one_seed(cfg, probe, probe=True) if not r["reference"]]
        ok = [r["t_mem"] is not None for r in runs]
        gap = ac.isolation_gap([r["mem_train"] or 0.0 for r in runs], [r["mem_test"] or 0.0 for r in runs], ok,
                               cfg["gen_acc"])
        print(f"probe seed {probe}: memorised at {sum(ok)} of {len(ok)} m (redundancy_measured: all); isolation "
              f"gap {gap:.3f} (redundancy_isolated: <= {cfg['isolate_tol']})")
        return []
    one = [dict(cfg, seeds=[s]) for s in cfg["seeds"]]  # a seed's result does not depend on the others
    work = [(c, s, cache) for c, s in zip(one, cfg["seeds"])]
    if jobs > 1:
        with mp.get_context("spawn").Pool(min(jobs, len(work))) as pool:
            results = [r for rs in pool.map(seed_runs, work, chunksize=1) for r in rs]
    else:
        results = [r for w in work for r in seed_runs(w)]
    history = {}
    for r in results:
        history[f"test_acc/s{r['seed']}_m{r['m']}"] = r.pop("curve", None) or [(0, 0.0)]
        history[f"train_acc/s{r['seed']}_m{r['m']}"] = r.pop("train_curve", None) or [(0, 0.0)]
    tau = torch.tensor([[r["seed"], r["m"], -1 if r["tau"] is None else r["tau"]] for r in results],
                       dtype=torch.float32)
    metrics = {f"tau/s{r['seed']}_m{r['m']}": r["tau"] for r in results}
    return checkpoints.save(SLUG, name, {"tau_table": tau}, config=cfg, metrics=metrics, history=history,
                            seed=cfg["seeds"], steps=cfg["max_steps"], wall_seconds=time.time() - t0,
                            sources=SOURCES, module="helpers.algorithmic_cores", extra={"runs": results}, root=out)


def main(argv: list[str] | None = None) -> list[Path]:
    def options(ap: argparse.ArgumentParser) -> None:
        ap.add_argument("--jobs", type=int, default=1, help="seeds run in parallel processes")
        ap.add_argument("--cache", default=None, help="folder for per-seed results, reused when present")
        ap.add_argument("--probe", type=int, default=None, metavar="SEED",
                        help="run this seed up to each run's memorisation and print redundancy_isolated only")

    return scripts.script_main(lambda cfg, out, args: make_redundancy(cfg, out, args.jobs, args.cache, args.probe,
                                                                      args.name),
                               config=ac.checkpoint_config, tiny=tiny, names=["redundancy", "redundancy_branch", "redundancy_cut"],
                               options=options,
                               doc=__doc__, argv=argv)


if __name__ == "__main__":
    main()
