"""Run the redundancy-by-design grokking study of chapter 13_algorithmic_cores (too long for its 5-minute default
run) and write its results with :mod:`helpers.checkpoints`:

* ``redundancy``: modular addition (p = 31, two layers, d = 64, 4 heads, full batch, AdamW lr 1e-3 with the main
  run's betas, warmup and clipping, weight decay 1). Per seed one model with a learned embedding trains to
  **memorisation** (train accuracy >= 0.99, logged every 10 steps); there it is copied, with its optimizer state,
  once per m in {1, 2, 4, 8}: the copy's token embedding is projected onto the m Fourier frequencies that carry
  most of its own power (``ac.dominant_frequencies``, nested in m; the centred part rescaled to its norm before the
  projection, ``ac.project_embedding``) and kept there after every step (``ac.keep_modes``). The projection
  removes part of the memorised solution, more at small m; so the copy is first **re-fitted** at weight decay 0
  (no clean-up pull) until its full training loss is back at the memorised model's (at most 1000 steps), and only
  then does the grokking clock start: training goes on at weight decay 1 until generalisation (test accuracy
  >= 0.95) or 3000 steps. The number of modes the network can use is set by design *after* memorisation, and
  every copy starts the clock at the same training loss. A copy at m = p // 2 (every mode: no projection, no
  re-fit) is the unconstrained reference. The grokking time is tau = the generalisation step counted from the
  start of the clock. Per run the train and test accuracy right after the projection and at the start of the
  clock are stored (the chapter's condition ``redundancy_isolated`` reads ``ac.isolation_gap`` over m at the
  start of the clock). Only numbers are stored (the tensor file holds the tau table, -1 where a run did not
  generalise).

Run from the repository root: ``.venv/bin/python data/13_algorithmic_cores/make_redundancy.py`` (or ``make data
NB=13_algorithmic_cores``). ``--tiny`` runs a tiny config into a temporary folder (seconds; what the tests run);
``--seeds``/``--out``: other seeds into another data root; ``--jobs`` runs seeds in parallel processes, one thread
each; ``--cache DIR`` keeps each seed's result in ``DIR/redundancy_s<seed>.json`` and reuses it (one seed per job,
then one run that assembles the checkpoint; the same seed gives the same numbers). ``--probe SEED`` runs one seed
up to the start of the clock and prints only what the condition ``redundancy_isolated`` reads (no tau);
``--refit embedding`` re-fits only the token embedding (inside its m modes, every other weight frozen, a fresh
AdamW at weight decay 0: ``ac.refit_embedding``) instead of every weight: the design probed in round 4 of issue #71
(``--probe 0 --refit embedding``; its record is ``redundancy_probes.json``).
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
    cfg = copy.deepcopy(ac.checkpoint_config("redundancy"))
    cfg.update(p=11, d=16, mem_steps=200, max_steps=20, seeds=[0], ms=[1, 2], lr=3e-3)
    return cfg


def accuracy(model: torch.nn.Module, rows: torch.Tensor) -> float:
    model.eval()
    with torch.no_grad():
        return float((model(rows[:, :2])[:, -1].argmax(-1) == rows[:, 2]).float().mean())


def one_seed(cfg: dict, s: int, probe: bool = False) -> list[dict]:
    """Memorise once, then one projected continuation per m (and the unconstrained reference); ``probe``: stop
    each continuation at the start of the grokking clock (the inputs of redundancy_isolated, no tau)."""
    torch.set_num_threads(1)
    t0 = time.time()
    p = cfg["p"]
    tr, te = (torch.tensor(a) for a in ac.modadd_split(p, cfg["train_frac"], seed=cfg["split_seed"]))
    opt_kw = dict(lr=cfg["lr"], wd=cfg["wd"], betas=cfg["betas"], eval_every=cfg["eval_every"], clip=cfg["clip"])
    with repro.seeded(s):
        model = ac.modadd_model(p, cfg["d"], cfg["n_head"])
        opt = torch.optim.AdamW([q for q in model.parameters() if q.requires_grad], lr=cfg["lr"],
                                weight_decay=cfg["wd"], betas=tuple(cfg["betas"]))
        log0 = ac.train_modadd(model, tr, te, cfg["mem_steps"], warmup=cfg["warmup"], optimizer=opt,
                               stop_at_train=cfg["mem_acc"], **opt_kw)
    t_mem = ac.grok_step(log0["step"], log0["train_acc"], cfg["mem_acc"])
    E = model.tok.weight.detach().numpy().astype("float64")
    order = ac.dominant_frequencies(E, p // 2)
    loss_mem = ac.modadd_loss(model, tr)  # the memorised model's full training loss: the re-fit's target
    base = dict(seed=s, t_mem=t_mem, mem_test=log0["test_acc"][-1], mem_loss=loss_mem,
                spectrum=ac.folded_spectrum(E).tolist())
    runs = []
    for m in [*cfg["ms"], p // 2]:
        res = dict(base, m=m, reference=m == p // 2, freqs=order[:m])
        if t_mem is None:  # never memorised: nothing to project
            runs.append(dict(res, t_gen=None, tau=None, t_remem=None, modes_in=None, proj_train=None,
                             proj_test=None, proj_loss=None, refit_steps=None, restored=False, start_train=None,
                             start_test=None, start_loss=None, final_test=None, curve=[], train_curve=[]))
            continue
        m_model, m_opt = copy.deepcopy((model, opt))  # the same weights and optimizer state for every m
        keep = ac.keep_modes(p, order[:m])
        with torch.no_grad():
            m_model.tok.weight.copy_(torch.as_tensor(ac.project_embedding(E, order[:m], cfg["keep_norm"]),
                                                     dtype=torch.float32))
        res.update(proj_train=accuracy(m_model, tr), proj_test=accuracy(m_model, te),
                   proj_loss=ac.modadd_loss(m_model, tr))
        n_refit = 0
        if res["proj_loss"] > loss_mem and cfg.get("refit") == "embedding":
            # re-fit the embedding alone (inside its m modes; the rest frozen, fresh AdamW, weight decay 0) to
            # the memorised loss: the rest of the network cannot learn the algorithm while it re-fits
            log_r = ac.refit_embedding(m_model, tr, te, cfg["refit_steps"], target_loss=loss_mem, keep=keep,
                                       lr=cfg["lr"], betas=cfg["betas"], eval_every=cfg["eval_every"],
                                       clip=cfg["clip"])
            n_refit = log_r["step"][-1]
        elif res["proj_loss"] > loss_mem:  # re-fit, weight decay off, to the memorised loss (the projection kept)
            for g in m_opt.param_groups:
                g["weight_decay"] = cfg["refit_wd"]
            log_r = ac.train_modadd(m_model, tr, te, cfg["refit_steps"], warmup=0, optimizer=m_opt,
                                    after_step=keep, stop_below_loss=loss_mem, **opt_kw)
            n_refit = log_r["step"][-1]
            for g in m_opt.param_groups:
                g["weight_decay"] = cfg["wd"]
        res.update(refit_steps=n_refit, start_train=accuracy(m_model, tr), start_test=accuracy(m_model, te),
                   start_loss=ac.modadd_loss(m_model, tr))
        res["restored"] = res["start_loss"] <= loss_mem
        if probe:  # the condition's inputs only: no grokking clock, no tau
            print(f"probe seed {s} m {m:>2}: after projection train {res['proj_train']:.3f} test "
                  f"{res['proj_test']:.3f}; re-fit {n_refit} steps -> train {res['start_train']:.3f} test "
                  f"{res['start_test']:.3f} loss {res['start_loss']:.4f} (memorised {loss_mem:.4f}) restored "
                  f"{res['restored']}", flush=True)
            runs.append(res)
            continue
        log = ac.train_modadd(m_model, tr, te, cfg["max_steps"], warmup=0, optimizer=m_opt,
                              stop_at=cfg["gen_acc"], after_step=keep, **opt_kw)
        t_gen = ac.grok_step(log["step"], log["test_acc"], cfg["gen_acc"])
        if res["start_test"] >= cfg["gen_acc"]:
            t_gen = 0  # generalised during the re-fit: the clock starts generalised
        res.update(t_gen=t_gen, tau=t_gen, t_remem=ac.grok_step(log["step"], log["train_acc"], cfg["mem_acc"]),
                   modes_in=ac.embedding_modes(m_model.tok.weight.detach().numpy(), p),
                   final_test=log["test_acc"][-1], curve=list(zip(log["step"], log["test_acc"])),
                   train_curve=list(zip(log["step"], log["train_acc"])))
        runs.append(res)
        print(f"seed {s} m {m:>2} freqs {order[:m]}: t_mem {t_mem} (loss {loss_mem:.4f}); after projection "
              f"train {res['proj_train']:.3f} test {res['proj_test']:.3f} loss {res['proj_loss']:.4f}; re-fit "
              f"{n_refit} steps -> train {res['start_train']:.3f} test {res['start_test']:.3f} loss "
              f"{res['start_loss']:.4f}; tau {t_gen} ({time.time() - t0:.0f} s)", flush=True)
    return runs


def seed_runs(args: tuple[dict, int, str | None]) -> list[dict]:
    cfg, s, cache = args
    path = None if cache is None else Path(cache) / f"redundancy_s{s}.json"
    if path is not None and path.is_file():
        stored = json.loads(path.read_text())
        if stored["config"] == cfg:  # the same config: the same numbers (deterministic)
            print(f"seed {s}: reused {path}", flush=True)
            return stored["runs"]
    runs = one_seed(cfg, s)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(dict(config=cfg, runs=runs)))
    return runs


def make_redundancy(cfg: dict, out: Path | None, jobs: int = 1, cache: str | None = None,
                    probe: int | None = None) -> Path | list:
    t0 = time.time()
    if probe is not None:  # one seed up to the start of the clock: what redundancy_isolated reads
        runs = [r for r in one_seed(cfg, probe, probe=True) if not r["reference"]]
        gap = ac.isolation_gap([r["start_train"] for r in runs], [r["start_test"] for r in runs],
                               [bool(r["restored"]) for r in runs], cfg["gen_acc"])
        print(f"probe seed {probe}: isolation gap {gap:.3f} (redundancy_isolated: <= {cfg['isolate_tol']})")
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
        history[f"test_acc/s{r['seed']}_m{r['m']}"] = r.pop("curve") or [(0, 0.0)]
        history[f"train_acc/s{r['seed']}_m{r['m']}"] = r.pop("train_curve") or [(0, 0.0)]
    tau = torch.tensor([[r["seed"], r["m"], -1 if r["tau"] is None else r["tau"]] for r in results],
                       dtype=torch.float32)
    metrics = {f"tau/s{r['seed']}_m{r['m']}": r["tau"] for r in results}
    return checkpoints.save(SLUG, "redundancy", {"tau_table": tau}, config=cfg, metrics=metrics, history=history,
                            seed=cfg["seeds"], steps=cfg["max_steps"], wall_seconds=time.time() - t0,
                            sources=SOURCES, module="helpers.algorithmic_cores", extra={"runs": results}, root=out)


def main(argv: list[str] | None = None) -> list[Path]:
    def options(ap: argparse.ArgumentParser) -> None:
        ap.add_argument("--jobs", type=int, default=1, help="seeds run in parallel processes")
        ap.add_argument("--cache", default=None, help="folder for per-seed results, reused when present")
        ap.add_argument("--probe", type=int, default=None, metavar="SEED",
                        help="run this seed up to the start of the clock and print redundancy_isolated only")
        ap.add_argument("--refit", choices=["embedding"], default=None,
                        help="re-fit only the token embedding (the rest frozen) instead of every weight")

    def build(cfg: dict, out: Path | None, args: argparse.Namespace) -> Path | list:
        if args.refit is not None:
            cfg = {**cfg, "refit": args.refit}
        return make_redundancy(cfg, out, args.jobs, args.cache, args.probe)

    return scripts.script_main(build,
                               config=ac.checkpoint_config, tiny=tiny, names=["redundancy"], options=options,
                               doc=__doc__, argv=argv)


if __name__ == "__main__":
    main()
