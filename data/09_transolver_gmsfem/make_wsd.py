"""The registered retraining recipe of chapter 09_transolver_gmsfem (issue #67, round 4), registered on 2026-12-06
before any of its models was trained: one warmup-stable-decay recipe for every seed, for the basis network and for
the pure solver (FNO), each seed trained in resumable parts of at most 40 minutes on one core, and written with
:mod:`helpers.checkpoints` by the last part.

* ``basis_wsd_s<k>`` (k = 0, 1, 2): :func:`helpers.transolver_gmsfem.wsd_config` -- the chapter's basis network
  on 300 training fields (24 300 patches), 36 000 steps of 16 (1 000 warmup, stable to 28 800, decay over the last
  7 200), 4 parts of 9 000 steps; every 450 steps the held-out ``test_energy``, ``test_sal``, ``test_sal_cut``
  (gap-cut) and ``train_energy`` (243 fixed training patches). At the end: the training-field energy-error ratio
  (first 8 training fields, f = 1) of the float and int8 weights. Tensors ``basis/<k>.<param>``, int8.
* ``pure_wsd_s<k>``: the chapter's FNO on its 2 000 pairs, 16 800 steps of 8 (600 warmup, stable to 13 440, decay
  over the last 3 360; 67 passes over the data, the stored FNOs had 9.6), 4 parts of 4 200 steps; every 210 steps
  ``test_rel_l2`` (32 held-out pairs) and ``train_rel_l2`` (first 64 training pairs). Tensors ``pure/<k>.<param>``,
  int8.

The conditions its models are read by (registered with it, in :mod:`helpers.transolver_gmsfem`):
``basis_wsd_conditions`` (``plateau(test_energy, frac=0.2, until=28 800, noise=2) <= 0.05``; training-field
energy ratio ``<= 1.3``) and ``pure_wsd_conditions`` (``plateau(test_rel_l2, until=13 440, noise=2) <= 0.05``;
training-pair relative L2 ``<=`` Transolver-GMsFEM's in-distribution relative L2 at the same seed, the bar change
of ``pure_solver_fits`` and its reason in that docstring).

**Sized by measurement.** Probe of 2026-12-06 04:31-04:38 (``--probe``, seed 0, one torch thread, on the 2-core
machine shared with two other training jobs): FNO 0.43 s/step (evaluations every 75 steps included), 2 000 pairs
in 62 s; basis network 0.14-0.21 s/step (evaluations every 100 steps included; the stored runs measured 0.10 on a
quieter machine), 300 fields' patches and eigenpairs in 120 s, the final 8-field energy ratio and saving 30 s.
Expected wall per job at the probe's load (worst part): basis part 9 000 x 0.21 s + 2 min data = **34 min**
(24 min at 0.14 s/step, 17 min at 0.10), the last part +1 min; FNO part 4 200 x 0.43 s + 1 min data = **31 min**
(19 min at the stored runs' 0.25 s/step). The stored curves were still falling at the old length (basis test
energy 0.2996 -> 0.2638 over seed 1's last 1 000 of 4 000 steps, 0.1440 -> 0.1413 over basis_long's last 800;
FNO held-out rel. L2 0.387 -> 0.363 over its last 480 of 2 400). 24 jobs in all (4 parts x 2 models x 3 seeds),
one command each, ``NAME`` one of ``basis_wsd_s0..2``, ``pure_wsd_s0..2``; part ``P`` needs part ``P - 1`` of the
same ``NAME`` in ``--parts`` (parts 1 of every name can run at once)::

    .venv/bin/python data/09_transolver_gmsfem/make_wsd.py --name NAME --part P --parts /tmp/09_wsd   # P = 1..4

The last part writes
``data/09_transolver_gmsfem/<name>.*`` (``--out``: another data root). ``--tiny``: a tiny config end to end in
seconds (what the tests run); ``--probe N``: the full data and model, every part cut to its first N steps (timing
only; write it with ``--out`` under /tmp, never into data/). One torch thread: the same seed on the same machine
writes byte-identical weights, and the parts train exactly the steps of one uninterrupted run.
"""

from __future__ import annotations

import argparse
import copy
import time
from pathlib import Path

import torch
from threadpoolctl import threadpool_limits

from helpers import checkpoints, repro, scripts, train
from helpers import transolver_gmsfem as tg

SLUG = tg.CHECKPOINT_SLUG
HERE = Path(__file__).resolve()
SOURCES = [HERE, Path(tg.__file__).resolve(), Path(train.__file__).resolve(), Path(repro.__file__).resolve()]


def tiny(name: str = "basis_wsd_s0") -> dict:
    cfg = copy.deepcopy(tg.wsd_config(name))
    if name.startswith("basis"):
        cfg.update(n_fine=16, n_coarse=4, n_bf=2, fields=2, test_fields=1, train_probe=4, dim=16, layers=1,
                   slices=4, steps=12, warmup=2, decay_steps=4, parts=2, eval_every=2, batch=4)
    else:
        cfg.update(n_fine=16, pairs=3, test_pairs=2, val_pairs=2, width=4, modes=3, rank=2, steps=8, warmup=2,
                   decay_steps=2, parts=2, eval_every=2, batch=2)
    return cfg


def options(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--part", type=int, default=None, metavar="P",
                    help="train part P of the seed's run (1-based; default: every part in turn, in one job)")
    ap.add_argument("--parts", type=Path, default=None, metavar="DIR",
                    help="folder for the state between parts (<name>.part<P>.pt); needed with --part")
    ap.add_argument("--probe", type=int, default=None, metavar="N",
                    help="timing probe: every part cut to its first N steps (write it with --out under /tmp)")


def _state_path(parts: Path, name: str, part: int) -> Path:
    return parts / f"{name}.part{part}.pt"


def _load_state(args: argparse.Namespace, name: str, part: int, key: str) -> dict | None:
    if part == 1:
        return None
    if args.parts is None:
        raise SystemExit(f"part {part} resumes from part {part - 1}: give --parts DIR")
    path = _state_path(args.parts, name, part - 1)
    if not path.exists():
        raise SystemExit(f"{path} does not exist: run --part {part - 1} first")
    state = torch.load(path, weights_only=False)
    if state.get("key") != key:
        raise SystemExit(f"{path} was trained under another config or probe: run its part again")
    return state


def _part_steps(cfg: dict, probe: int | None) -> dict:
    """A probe keeps the schedule's shape but cuts every part to its first ``probe`` steps (timing only)."""
    if probe is None:
        return cfg
    plan = tg.wsd_parts(cfg)
    n = len(plan)
    every = max(1, min(cfg["eval_every"], probe // 2))
    probe = max(every, probe // every * every)
    return dict(cfg, steps=n * probe, warmup=min(cfg["warmup"], probe), decay_steps=max(1, probe // 2),
                eval_every=every)


def _basis_data(cfg: dict) -> tuple[dict, dict, dict, list[dict]]:
    mesh = tg.structured_mesh(cfg["n_fine"])

    def fields(seeds: range) -> list[dict]:
        return [tg.field_setup(tg.kappa_field(i, n_pix=cfg["n_fine"]), mesh, cfg["n_coarse"]) for i in seeds]

    s0 = cfg["field_seed0"]
    with threadpool_limits(1):
        train_fields = fields(range(s0, s0 + cfg["fields"]))
        train_set = tg.basis_dataset(train_fields, cfg["n_bf"], cfg["n_coarse"], cfg["rel_gap"])
        test_set = tg.basis_dataset(fields(range(cfg["test_fields"])), cfg["n_bf"], cfg["n_coarse"], cfg["rel_gap"])
    probe_idx = torch.linspace(0, len(train_set["feats"]) - 1, cfg["train_probe"]).round().long()
    probe = {k: v[probe_idx] for k, v in train_set.items()}
    return train_set, test_set, probe, train_fields[:tg.BASIS_FIT_FIELDS]


def make_wsd(cfg: dict, out: Path | None, args: argparse.Namespace) -> Path | list:
    t0 = time.time()
    (s,) = cfg["seeds"]
    kind = "basis" if args.name.startswith("basis") else "pure"
    name = f"{kind}_wsd_s{s}"
    probe = getattr(args, "probe", None)
    if probe is not None and out is None:
        raise SystemExit("--probe writes timing runs: give --out under /tmp (never the repository's data/)")
    cfg = _part_steps(cfg, probe)
    plan = tg.wsd_parts(cfg)
    part_arg = getattr(args, "part", None)
    todo = range(1, len(plan) + 1) if part_arg is None else [part_arg]
    if part_arg is not None and not 1 <= part_arg <= len(plan):
        raise SystemExit(f"--part must be in 1..{len(plan)} for {name}, got {part_arg}")
    if part_arg is not None and args.parts is None and len(plan) > 1:
        raise SystemExit("--part needs --parts DIR (where the state between parts is kept)")
    key = scripts.part_key(cfg, name=name, seed=s)
    repro.set_threads(1)

    if kind == "basis":
        train_set, test_set, probe_set, fit_fields = _basis_data(cfg)
        print(f"{len(train_set['feats'])} training patches, {len(test_set['feats'])} test patches "
              f"({time.time() - t0:.0f} s)", flush=True)
        make_net = tg.make_basis_net
        loss_fn = lambda m, b: tg.basis_loss(m, b, cfg["energy_weight"])  # noqa: E731
        batches = tg.basis_batches(cfg, train_set, s)
        evals = lambda m: tg.basis_wsd_evals(m, test_set, probe_set)  # noqa: E731
        prefix = f"basis/{s}."
    else:
        with threadpool_limits(1):
            X, Y = tg.grid_dataset(cfg, cfg["pairs"])
        t_data = time.time() - t0
        Xt, Yt = tg.grid_dataset(dict(cfg, field_seed0=cfg["test_seed0"]), cfg["test_pairs"])
        Xv, Yv = tg.grid_dataset(dict(cfg, field_seed0=cfg["val_seed0"], forcing="constant"), cfg["val_pairs"])
        Xf, Yf = X[:tg.PURE_FIT_PAIRS], Y[:tg.PURE_FIT_PAIRS]
        print(f"{len(X)} training pairs in {t_data:.0f} s, {len(Xt)} held-out pairs", flush=True)
        make_net = tg.make_pure_net
        loss_fn = tg.pure_loss
        batches = tg.pure_batches(cfg, X, Y, s)

        def evals(m: torch.nn.Module) -> dict[str, float]:
            return dict(test_rel_l2=float(tg.pure_rel_l2(m, Xt, Yt).mean()),
                        train_rel_l2=float(tg.pure_rel_l2(m, Xf, Yf).mean()))

        prefix = f"pure/{s}."
    t_data = time.time() - t0

    state = None
    for part in todo:
        state = _load_state(args, name, part, key) if state is None else state
        with repro.seeded(s):
            model = make_net(cfg)
        if state is not None:
            model.load_state_dict(state["model"])
        t1, done = time.time(), list(state.get("seconds", [])) if state is not None else []
        state = tg.train_wsd_part(cfg, model, loss_fn, batches, part, state=state, eval_fn=evals,
                                  desc=f"{name}")
        lo, hi = plan[part - 1]
        sec = time.time() - t1
        data_s = t_data if part == todo[0] else 0.0  # one job builds the data once, for all its parts
        state["seconds"] = done + [dict(part=part, data=round(data_s, 1), train=round(sec, 1),
                                           per_step=round(sec / (hi - lo), 4))]
        last_evals = {k: round(v[-1][1], 4) for k, v in state["evals"].items()}
        print(f"{name} part {part}/{len(plan)}: steps {lo}-{hi} in {sec:.0f} s ({sec / (hi - lo):.3f} s/step, "
              f"evaluations included), data {data_s:.0f} s; {last_evals}", flush=True)
        if args.parts is not None:
            args.parts.mkdir(parents=True, exist_ok=True)
            torch.save({**state, "key": key}, _state_path(args.parts, name, part))
    if todo[-1] != len(plan):
        return []  # not the last part: nothing to write yet

    model.eval()
    tensors = {prefix + k: v.detach().clone() for k, v in model.state_dict().items()}
    metrics: dict[str, float] = {}
    if kind == "basis":
        history = {"loss/" + str(s): state["loss"], **{f"{k}/{s}": v for k, v in state["evals"].items()}}
        metrics.update({f"{k}/{s}": v[-1][1] for k, v in state["evals"].items()})
        with threadpool_limits(1):
            fit = tg.basis_energy_ratio(model, fit_fields, cfg["n_bf"], cfg["n_coarse"])
        metrics.update({f"train_energy_ratio/{s}": fit["ratio"], f"params/{s}": model.n_params})
    else:
        history = {"loss": state["loss"], **state["evals"]}
        metrics.update({k: v[-1][1] for k, v in state["evals"].items()})
        metrics.update(final_loss=sum(state["loss"][-50:]) / len(state["loss"][-50:]), params=model.n_params,
                       val_f1_rel_l2=float(tg.pure_rel_l2(model, Xv, Yv).mean()), data_seconds=round(t_data, 1))
    metrics["stable_end"] = tg.wsd_stable_end(cfg)
    extra = dict(parts=state["seconds"], registered_on=tg.WSD_REGISTERED_ON)

    def save() -> Path:
        return checkpoints.save(SLUG, name, tensors, config=cfg, metrics=metrics, history=history, seed=cfg["seeds"],
                                steps=cfg["steps"], wall_seconds=sum(p["data"] + p["train"] for p in state["seconds"]),
                                sources=SOURCES, module="helpers.transolver_gmsfem", quantize="int8", root=out,
                                extra=extra)

    save()  # then the conditions' fit measures on the weights as stored (int8), what the chapter loads
    stored = checkpoints.load(SLUG, name, config=cfg, root=out).load_into(make_net(cfg), prefix=prefix)
    if kind == "basis":
        with threadpool_limits(1):
            metrics[f"train_energy_ratio_int8/{s}"] = tg.basis_energy_ratio(stored, fit_fields, cfg["n_bf"],
                                                                           cfg["n_coarse"])["ratio"]
        metrics.update({f"{k}_int8/{s}": v for k, v in tg.basis_test_losses(stored, test_set).items()})
    else:
        metrics["train_rel_l2_int8"] = float(tg.pure_rel_l2(stored, Xf, Yf).mean())
        metrics["test_rel_l2_int8"] = float(tg.pure_rel_l2(stored, Xt, Yt).mean())
        metrics["val_f1_rel_l2_int8"] = float(tg.pure_rel_l2(stored, Xv, Yv).mean())
    print("int8 weights:", {k: round(v, 4) for k, v in metrics.items() if "int8" in k}, flush=True)
    return save()


def main(argv: list[str] | None = None) -> list:
    return scripts.script_main(make_wsd, config=tg.wsd_config, tiny=tiny, names=list(tg.WSD_NAMES), doc=__doc__,
                               options=options, argv=argv)


if __name__ == "__main__":
    main()
