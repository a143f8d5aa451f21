"""Train the models of chapter 16_space_time_operators that do not fit its 5-minute default run, and write them with
:mod:`helpers.checkpoints`:

* ``models``: per seed (0, 1, 2) the causal river routing operator (:class:`RoutingOperator`) trained on four
  basins with every leak closed and once with each leak open (per-node embeddings with ids distinct across
  training basins, un-normalised area, shifted forcing), each with its validation curve (held-out events of the
  training basins); the recurrent message-passing baseline; and the cross-geometry models (advection-diffusion in
  a potential flow), every one trained for the same number of optimizer steps: the Chebyshev model on G = 1 and
  G = 15 geometries, one locally trained oracle per test geometry, the attention mixer (graph-aware input) on 15
  geometries, and, for the seeds in ``geometry_leak_seeds``, the Chebyshev model on 15 geometries with each leak
  of ``geometry.leaks`` open (per-node embeddings, a graph-normalised node id, per-geometry source scales). Every
  geometry model keeps its last training event per geometry for validation (its curve is stored: the
  convergence conditions read it) and ends with its best-validation weights (early stopping). Stored as int8.
* data-matched controls (part ``matched``, seeds ``geometry_matched_seeds``; measurements only, no weights),
  designed before training, in answer to the review that the G = 1 control and the oracles saw 5 training
  events of one geometry while the G = 15 model saw 75. With ``geometry_matched`` each of them trains on G_max
  = 15 copies of its one geometry holding 15 x 5 = 75 training events (the copy's 5 fresh events, drawn from the
  same source distribution and simulated on the same geometry), one copy per step, so it gets what the G = 15
  model gets: the same steps (``geometry.steps``), the same 5 events per step, 75 training events in all, the
  same validation event (early stopping on it) and the same test events. ``dm_G1``: the first training geometry
  (the G = 1 control with as many events as the G = 15 model: ``geometry_accumulation`` then compares one
  geometry with fifteen at equal steps and equal data); ``dm_oracle{k}``: test geometry ``k`` (the oracle with
  as many events as the pooled model: ``within_oracle`` and ``attention_mixer_transfer`` then compare with a
  reference that is not data-starved). Stored per model: its validation curve, its held-out test error (for
  ``dm_G1`` on the test geometries and on its own geometry's test events). Nothing else changes: every bar and
  condition (``oracle_converged``, ``oracle_is_ceiling``, ``control_converged``) reads these as it read the
  5-event models.
* leaks trained longer (part ``geolong``, seeds ``geometry_leak_seeds``): a leak named in ``leak_steps`` is
  trained for that many steps instead of ``geometry.steps`` (the ``embed`` model was still falling at 1800
  steps: ``leak_models_converged`` unmet), with the same early stopping and the same plateau condition as every
  other model; assembled after ``geoleaks``, it replaces that part's model of the same leak.

Checkpoint ``retrained`` (round 4; recipe, models and reading registered in ``checkpoint_config("retrained")``
and committed before any of them was trained): the cross-geometry models that failed their convergence condition
in ``models`` (seed 1's G = 15 model, the data-matched G = 1 controls of seeds 1 and 2, seed 2's first
data-matched oracle, the leak models short of their plateau) and seed 1's three leak models, retrained on the
same data with the same model, learning rate, warm-up (steps // 10), validation event and early stopping, but on
a warmup-stable-decay schedule (``helpers.train.fit(schedule="wsd")``, decay over the last steps // 4), with the
steps listed there (1800, the steps of every other model, or 5400 for the ``embed`` leak model as before). Their
convergence condition reads ``helpers.space_time_operators.stable_plateau``: ``plateau(val, 0.2, until=steps -
steps // 4, noise=2) <= 0.05`` (the stable phase: a decay lowers the curve by annealing alone), the same bar;
the models of ``models`` keep their plain reading. The notebook uses a retrained model in place of the stored
one of the same seed and name. One job per seed and model::

    make_models.py --name retrained --part retrain --only 1:G15 --parts /tmp/st16r    # SEED:MODEL
    make_models.py --name retrained --part assemble --parts /tmp/st16r

Run from the repository root: ``.venv/bin/python data/16_space_time_operators/make_models.py`` (or
``make data NB=16_space_time_operators``). ``--tiny`` trains a tiny config into a temporary folder (what a test can
run); ``--seeds``/``--out``: other seeds into another data root. One torch thread. On the shared build machine the
work is split into one job per seed and part, each saved to ``--parts DIR``, then assembled::

    make_models.py --part river --seeds 0 --parts /tmp/st16     # and geometry, geoleaks, matched,
                                                                 # geolong; seeds 1, 2
    make_models.py --part assemble --parts /tmp/st16

The same seed writes the same weights whichever way the work is split, and assembling again from the same parts
writes the same tensors (tests/test_space_time_operators_data.py): a part retrained leaves the others' stored
tensors bit-identical.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch

from helpers import checkpoints, repro, scripts
from helpers import space_time_operators as st

SLUG = "16_space_time_operators"
HERE = Path(__file__).resolve()
SOURCES = [HERE, Path(st.__file__).resolve(), Path(repro.__file__).resolve()]


def river_job(cfg: dict, seed: int) -> tuple[dict, dict, dict]:
    """A seed's routers (one per leak) and its recurrent baseline."""
    repro.set_threads(1)
    r = cfg["river"]
    states, hist, metrics = {}, {}, {}
    data = st.river_data_from_config(seed, r)
    for leak in st.LEAKS:
        t0 = time.time()
        model, h = st.train_router(data, leak, r["steps"], seed, r["n_events"], val_every=r["val_every"],
                                   **r["model"])
        tag = f"s{seed}.router.{leak}"
        states[tag], hist[tag], hist[f"{tag}.val"] = model.state_dict(), h.loss, h.evals["val"]
        metrics[f"{tag}.final_val"] = h.evals["val"][-1][1]
        metrics[f"{tag}.final_loss"] = float(np.mean(h.loss[-20:]))
        print(f"seed {seed} router.{leak} {time.time() - t0:.0f} s", flush=True)
    if seed in cfg["baseline_seeds"]:
        model, h = st.train_recurrent(data, r["steps"], seed, r["n_events"], hidden=cfg["baseline_hidden"])
        states[f"s{seed}.recurrent"], hist[f"s{seed}.recurrent"] = model.state_dict(), h.loss
        metrics[f"s{seed}.recurrent.final_loss"] = float(np.mean(h.loss[-20:]))
    return states, hist, metrics


def geometry_job(cfg: dict, seed: int, leaks: bool = False) -> tuple[dict, dict, dict]:
    """A seed's cross-geometry models, all trained for ``steps`` optimizer steps: the G-count models, the
    oracles and the attention model, or (``leaks``) the Chebyshev models with one leak open each."""
    repro.set_threads(1)
    gc = cfg["geometry"]
    states, hist, metrics = {}, {}, {}
    geos = st.geometry_data(seed, gc["n_train"] + gc["n_test"], T=gc["T"])
    train_g, test_g = geos[: gc["n_train"]], geos[gc["n_train"]:]
    S, ve, every = gc["steps"], gc["val_events"], gc["val_every"]

    def fit(tag: str, model: st.SepOperator, on: list) -> None:
        t0 = time.time()
        h = st.train_geometry(model, on, 1, seed, steps=S, val_events=ve, val_every=every)
        states[f"s{seed}.geo.{tag}"] = model.state_dict()
        hist[f"s{seed}.geo.{tag}.val"] = h.evals["val"]
        metrics[f"s{seed}.geo.{tag}.best_val"] = min(v for _, v in h.evals["val"])
        print(f"seed {seed} geo.{tag} {time.time() - t0:.0f} s", flush=True)

    for G in gc["counts"] if not leaks else []:
        fit(f"G{G}", st.geometry_model(gc["order"], seed), train_g[:G])
    for k, g in enumerate(test_g if not leaks else []):
        fit(f"oracle{k}", st.geometry_model(gc["order"], seed), [g])
    if not leaks:
        fit("attention", st.geometry_model(gc["order"], seed, mixer="attention"), train_g)
    for leak in gc["leaks"] if leaks else []:
        if leak in cfg.get("leak_steps", {}):  # trained longer by part geolong
            continue
        leaky = st.geometry_leak(geos, gc["n_train"], leak, seed)
        model = st.geometry_model(gc["order"], seed, c_in=3 if leak == "feature" else 2,
                                  embed_nodes=100 * gc["n_train"] if leak == "embed" else 0)
        fit(f"leak_{leak}", model, leaky[: gc["n_train"]])
    return states, hist, metrics


def matched_job(cfg: dict, seed: int) -> tuple[dict, dict, dict]:
    """A seed's data-matched controls (module docstring): measurements only."""
    repro.set_threads(1)
    gc = cfg["geometry"]
    hist, metrics = {}, {}
    geos = st.geometry_data(seed, gc["n_train"] + gc["n_test"], T=gc["T"])
    train_g, test_g = geos[: gc["n_train"]], geos[gc["n_train"]:]
    n_chunks, ve = gc["counts"][-1], gc["val_events"]
    on = {"dm_G1": train_g[0], **{f"dm_oracle{k}": g for k, g in enumerate(test_g)}}
    for tag, g in on.items():
        t0 = time.time()
        model = st.geometry_model(gc["order"], seed)
        h = st.train_geometry(model, st.geometry_matched(g, n_chunks, ve), 1, seed, steps=gc["steps"],
                              val_events=ve, val_every=gc["val_every"])
        key = f"s{seed}.geo.{tag}"
        hist[f"{key}.val"] = h.evals["val"]
        metrics[f"{key}.best_val"] = min(v for _, v in h.evals["val"])
        metrics[f"{key}.own_err"] = st.geometry_error(model.eval(), [g])
        if tag == "dm_G1":
            metrics[f"{key}.test_err"] = st.geometry_error(model, test_g)
        print(f"seed {seed} geo.{tag} {time.time() - t0:.0f} s", flush=True)
    return {}, hist, metrics


def long_leak_job(cfg: dict, seed: int) -> tuple[dict, dict, dict]:
    """A seed's leak models named in ``leak_steps``, each trained for its own number of steps."""
    repro.set_threads(1)
    gc = cfg["geometry"]
    states, hist, metrics = {}, {}, {}
    geos = st.geometry_data(seed, gc["n_train"] + gc["n_test"], T=gc["T"])
    for leak, steps in cfg.get("leak_steps", {}).items():
        t0 = time.time()
        leaky = st.geometry_leak(geos, gc["n_train"], leak, seed)
        model = st.geometry_model(gc["order"], seed, c_in=3 if leak == "feature" else 2,
                                  embed_nodes=100 * gc["n_train"] if leak == "embed" else 0)
        h = st.train_geometry(model, leaky[: gc["n_train"]], 1, seed, steps=steps, val_events=gc["val_events"],
                              val_every=gc["val_every"])
        tag = f"s{seed}.geo.leak_{leak}"
        states[tag], hist[f"{tag}.val"] = model.state_dict(), h.evals["val"]
        metrics[f"{tag}.best_val"] = min(v for _, v in h.evals["val"])
        metrics[f"{tag}.steps"] = steps
        print(f"seed {seed} geo.leak_{leak} ({steps} steps) {time.time() - t0:.0f} s", flush=True)
    return states, hist, metrics


def retrain_setup(cfg: dict, seed: int, key: str) -> tuple[st.SepOperator, list]:
    """The model and training geometries of cross-geometry model ``key`` at ``seed`` (as the ``models``
    checkpoint builds it: ``G<n>``, ``oracle<k>``, ``attention``, ``dm_G1``, ``dm_oracle<k>``, ``leak_<leak>``)."""
    gc = cfg["geometry"]
    geos = st.geometry_data(seed, gc["n_train"] + gc["n_test"], T=gc["T"])
    train_g, test_g = geos[: gc["n_train"]], geos[gc["n_train"]:]
    if key.startswith("dm_"):
        g = train_g[0] if key == "dm_G1" else test_g[int(key[len("dm_oracle"):])]
        return st.geometry_model(gc["order"], seed), st.geometry_matched(g, gc["counts"][-1], gc["val_events"])
    if key.startswith("leak_"):
        leak = key[5:]
        model = st.geometry_model(gc["order"], seed, c_in=3 if leak == "feature" else 2,
                                  embed_nodes=100 * gc["n_train"] if leak == "embed" else 0)
        return model, st.geometry_leak(geos, gc["n_train"], leak, seed)[: gc["n_train"]]
    if key.startswith("oracle"):
        return st.geometry_model(gc["order"], seed), [test_g[int(key[6:])]]
    if key == "attention":
        return st.geometry_model(gc["order"], seed, mixer="attention"), train_g
    if key.startswith("G"):
        return st.geometry_model(gc["order"], seed), train_g[: int(key[1:])]
    raise ValueError(f"unknown cross-geometry model {key!r}")


def retrain_job(cfg: dict, seed: int, key: str, steps: int) -> tuple[dict, dict, dict]:
    """One model of checkpoint ``retrained``: the registered warmup-stable-decay recipe."""
    repro.set_threads(1)
    gc = cfg["geometry"]
    t0 = time.time()
    model, on = retrain_setup(cfg, seed, key)
    h = st.train_geometry(model, on, 1, seed, steps=steps, val_events=gc["val_events"], val_every=gc["val_every"],
                          schedule="wsd", decay_steps=st.wsd_decay_steps(steps))
    tag = f"s{seed}.geo.{key}"
    states = {} if key.startswith("dm_") else {tag: model.state_dict()}
    metrics = {f"{tag}.best_val": min(v for _, v in h.evals["val"]), f"{tag}.steps": steps,
               f"{tag}.stable_plateau": st.stable_plateau(h.evals["val"], steps)}
    if key.startswith("dm_"):
        gcopy = on[0]
        metrics[f"{tag}.own_err"] = st.geometry_error(model.eval(), [gcopy])
        if key == "dm_G1":
            geos = st.geometry_data(seed, gc["n_train"] + gc["n_test"], T=gc["T"])
            metrics[f"{tag}.test_err"] = st.geometry_error(model, geos[gc["n_train"]:])
    print(f"seed {seed} geo.{key} wsd {steps} steps {time.time() - t0:.0f} s, stable plateau "
          f"{metrics[f'{tag}.stable_plateau']:.4f}", flush=True)
    return states, {f"{tag}.val": h.evals["val"]}, metrics


def retrain_list(cfg: dict, seed: int) -> list[tuple[str, int]]:
    """The ``(model, steps)`` that checkpoint ``retrained`` holds for ``seed`` (by its position in ``seeds``)."""
    i = list(cfg["seeds"]).index(seed)
    return [(k, int(n)) for k, n in (cfg["retrain"][i] if i < len(cfg["retrain"]) else [])]


def make_retrained(cfg: dict, root: Path | None, part: str = "all", parts: Path | None = None,
                   only: list[str] | None = None) -> list[Path] | Path:
    """Checkpoint ``retrained``: ``part="retrain"`` trains the models of each seed of ``cfg`` (``only``: those
    named ``"SEED:MODEL"``) into ``parts``; ``"assemble"`` writes the checkpoint from the parts; ``"all"`` does both in turn."""
    t0 = time.time()
    if part == "retrain":
        Path(parts).mkdir(parents=True, exist_ok=True)
        out = []
        for seed in cfg["seeds"]:
            for key, steps in retrain_list(cfg, seed):
                if only and f"{seed}:{key}" not in only:
                    continue
                t1 = time.time()
                res = retrain_job(cfg, seed, key, steps)
                path = Path(parts) / f"retrain_s{seed}_{key}.pt"
                torch.save(dict(result=res, wall=time.time() - t1, config=cfg, steps=steps), path)
                out.append(path)
        return out
    if part not in ("all", "assemble"):
        raise SystemExit(f"checkpoint retrained is built with --part retrain / assemble / all, not {part}")
    results, wall = [], 0.0
    for seed in cfg["seeds"]:
        for key, steps in retrain_list(cfg, seed):
            if part == "all":
                results.append(retrain_job(cfg, seed, key, steps))
                continue
            got = torch.load(Path(parts) / f"retrain_s{seed}_{key}.pt", weights_only=False)
            for k in ("geometry", "recipe"):
                if dict(got["config"]).get(k) != cfg.get(k):
                    raise ValueError(f"part retrain_s{seed}_{key} was trained with another {k} config")
            if got["steps"] != steps:
                raise ValueError(f"part retrain_s{seed}_{key} was trained for {got['steps']} steps, not {steps}")
            results.append(got["result"])
            wall += got["wall"]
    return assemble(cfg, results, wall if part == "assemble" else time.time() - t0, root,
                    name="retrained", steps=cfg["geometry"]["steps"])


def rainfall_job(cfg: dict, seed: int) -> tuple[dict, dict, dict]:
    """Checkpoint ``rainfall`` (round 5, registered before training): a seed's factorized router and recurrent
    baseline on the rainfall-runoff benchmark (:func:`helpers.space_time_operators.rainfall_data`)."""
    repro.set_threads(1)
    data = st.rainfall_data_from_config(seed, cfg)
    n_ev = cfg["data"]["n_events"]
    t0 = time.time()
    model, h = st.train_router(data, "none", cfg["steps"], seed, n_ev, val_every=cfg["val_every"], **cfg["model"])
    tag = f"s{seed}.router"
    states, hist = {tag: model.state_dict()}, {tag: h.loss, f"{tag}.val": h.evals["val"]}
    metrics = {f"{tag}.final_val": h.evals["val"][-1][1], f"{tag}.seconds": time.time() - t0}
    print(f"seed {seed} rainfall router {time.time() - t0:.0f} s", flush=True)
    t0 = time.time()
    model, h = st.train_recurrent(data, cfg["steps"], seed, n_ev, hidden=cfg["baseline_hidden"])
    states[f"s{seed}.recurrent"], hist[f"s{seed}.recurrent"] = model.state_dict(), h.loss
    metrics[f"s{seed}.recurrent.seconds"] = time.time() - t0
    print(f"seed {seed} rainfall recurrent {time.time() - t0:.0f} s", flush=True)
    return states, hist, metrics


def make_per_seed(name: str, job, cfg: dict, root: Path | None, part: str = "all",
                  parts: Path | None = None) -> list[Path] | Path:
    """A checkpoint of one ``job(cfg, seed)`` per seed (``rainfall``, ``noarea``): ``part=name`` trains each
    seed of ``cfg`` into ``parts``; ``"assemble"`` writes the checkpoint from the parts (refusing a part trained
    with another config); ``"all"`` does both in turn."""
    t0 = time.time()
    if part == name:
        Path(parts).mkdir(parents=True, exist_ok=True)
        out = []
        for seed in cfg["seeds"]:
            t1 = time.time()
            res = job(cfg, seed)
            path = Path(parts) / f"{name}_s{seed}.pt"
            torch.save(dict(result=res, wall=time.time() - t1, config=cfg), path)
            out.append(path)
        return out
    if part not in ("all", "assemble"):
        raise SystemExit(f"checkpoint {name} is built with --part {name} / assemble / all, not {part}")
    results, wall = [], 0.0
    same = {k: v for k, v in cfg.items() if k != "seeds"}
    for seed in cfg["seeds"]:
        if part == "all":
            results.append(job(cfg, seed))
            continue
        got = torch.load(Path(parts) / f"{name}_s{seed}.pt", weights_only=False)
        if {k: v for k, v in dict(got["config"]).items() if k != "seeds"} != same:
            raise ValueError(f"part {name}_s{seed} was trained with another config")
        results.append(got["result"])
        wall += got["wall"]
    steps = cfg["steps"] if "steps" in cfg else None
    return assemble(cfg, results, wall if part == "assemble" else time.time() - t0, root, name=name,
                    steps=steps)


def make_rainfall(cfg: dict, root: Path | None, part: str = "all", parts: Path | None = None) -> list[Path] | Path:
    """Checkpoint ``rainfall`` (:func:`make_per_seed` with :func:`rainfall_job`)."""
    return make_per_seed("rainfall", rainfall_job, cfg, root, part, parts)


def noarea_job(cfg: dict, seed: int) -> tuple[dict, dict, dict]:
    """Checkpoint ``noarea`` (round 5, registered before training): a seed's routers on the routing-only
    benchmark without their area-carrying inputs, leaks closed and with the area leak open."""
    repro.set_threads(1)
    r = cfg["river"]
    data = st.river_data_from_config(seed, r)
    states, hist, metrics = {}, {}, {}
    for leak in cfg["leaks"]:
        t0 = time.time()
        model, h = st.train_router(data, leak, r["steps"], seed, r["n_events"], val_every=r["val_every"],
                                   area_input=False, **r["model"])
        tag = f"s{seed}.noarea.{leak}"
        states[tag], hist[tag], hist[f"{tag}.val"] = model.state_dict(), h.loss, h.evals["val"]
        metrics[f"{tag}.final_val"] = h.evals["val"][-1][1]
        print(f"seed {seed} noarea.{leak} {time.time() - t0:.0f} s", flush=True)
    return states, hist, metrics


def make_noarea(cfg: dict, root: Path | None, part: str = "all", parts: Path | None = None) -> list[Path] | Path:
    """Checkpoint ``noarea`` (:func:`make_per_seed` with :func:`noarea_job`)."""
    return make_per_seed("noarea", noarea_job, cfg, root, part, parts)


JOBS = {"river": river_job, "geometry": geometry_job,
        "geoleaks": lambda cfg, seed: geometry_job(cfg, seed, leaks=True),
        "matched": matched_job, "geolong": long_leak_job}  # assembled in this order: a later part wins
PART_CONFIG = {"river": ("river",), "geometry": ("geometry",), "geoleaks": ("geometry",),
               "matched": ("geometry",), "geolong": ("geometry", "leak_steps")}  # what a part must match


def part_seeds(cfg: dict, part: str) -> list[int]:
    """The seeds a part is trained for (river: ``seeds``; geometry: ``geometry_seeds``; geoleaks:
    ``geometry_leak_seeds``, none when the config has no ``geometry.leaks``; matched:
    ``geometry_matched_seeds``; geolong: ``geometry_leak_seeds`` when ``leak_steps`` names a leak)."""
    if part == "geoleaks":
        return list(cfg.get("geometry_leak_seeds", [])) if cfg["geometry"]["leaks"] else []
    if part == "matched":
        return list(cfg.get("geometry_matched_seeds", []))
    if part == "geolong":
        return list(cfg.get("geometry_leak_seeds", [])) if cfg.get("leak_steps") else []
    return list(cfg["seeds"] if part == "river" else cfg.get("geometry_seeds", cfg["seeds"]))


def save_parts(cfg: dict, part: str, parts: Path) -> list[Path]:
    """Run one part (``river``, ``geometry`` or ``geoleaks``) for each seed of ``cfg`` (``--seeds``) and save
    it under ``parts``."""
    parts.mkdir(parents=True, exist_ok=True)
    out = []
    for seed in cfg["seeds"]:
        t0 = time.time()
        res = JOBS[part](cfg, seed)
        path = parts / f"{part}_s{seed}.pt"
        torch.save(dict(result=res, wall=time.time() - t0, config=cfg), path)
        out.append(path)
    return out


def assemble(cfg: dict, results: list[tuple[dict, dict, dict]], wall: float, root: Path | None,
             name: str = "models", steps: int | None = None) -> Path:
    """One int8 checkpoint ``name`` from per-job ``(states, history, metrics)`` results."""
    flat, hist, metrics = {}, {}, {}
    for states, h, m in results:
        for tag, sd in states.items():
            flat.update({f"{tag}.{k}": v for k, v in sd.items()})
        hist.update(h)
        metrics.update(m)
    return checkpoints.save(SLUG, name, flat, config=cfg, metrics=metrics, history=hist,
                            seed=list(cfg["seeds"]), steps=cfg["river"]["steps"] if steps is None else steps,
                            wall_seconds=wall,
                            sources=SOURCES, module="helpers.space_time_operators", quantize="int8", root=root)


def make_models(cfg: dict, root: Path | None, part: str = "all", parts: Path | None = None) -> list[Path] | Path:
    if part in JOBS:
        return save_parts(cfg, part, Path(parts))
    if part == "both":  # one job per seed: its river models, then its geometry models
        return save_parts(cfg, "river", Path(parts)) + save_parts(cfg, "geometry", Path(parts))
    t0 = time.time()
    if part == "assemble":
        results, wall = [], 0.0
        for kind in JOBS:
            for seed in part_seeds(cfg, kind):
                got = torch.load(Path(parts) / f"{kind}_s{seed}.pt", weights_only=False)
                for key in PART_CONFIG[kind]:
                    if dict(got["config"]).get(key) != cfg.get(key):
                        raise ValueError(f"part {kind}_s{seed} was trained with another {key} config")
                results.append(got["result"])
                wall += got["wall"]
        return assemble(cfg, results, wall, root)
    results = [JOBS[kind](cfg, s) for kind in JOBS for s in part_seeds(cfg, kind)]
    return assemble(cfg, results, time.time() - t0, root)


def tiny(name: str) -> dict:
    cfg = st.checkpoint_config(name)
    if name == "noarea":
        cfg["seeds"] = [0]
        cfg["river"] = dict(cfg["river"], n=12, T=16, n_events=4, n_test=2, steps=2, val_every=1)
        return cfg
    if name == "rainfall":
        cfg["seeds"] = [0]
        cfg["data"].update(n=12, T=16, n_events=4, n_test=2)
        cfg.update(steps=2, val_every=1)
        return cfg
    if name == "retrained":
        cfg["seeds"] = [0]
        cfg["geometry"].update(n_train=3, n_test=1, counts=[1, 3], steps=3, val_every=2, T=8)
        cfg["retrain"] = [[["G3", 8], ["dm_G1", 8], ["dm_oracle0", 8], ["leak_embed", 8]]]
        return cfg
    cfg["seeds"], cfg["baseline_seeds"], cfg["geometry_seeds"] = [0], [0], [0]
    cfg["geometry_leak_seeds"], cfg["geometry_matched_seeds"] = [0], [0]
    cfg["leak_steps"] = {k: 4 for k in cfg["leak_steps"]}
    cfg["river"].update(n=12, T=16, n_events=4, n_test=2, steps=2, val_every=1)
    cfg["geometry"].update(n_train=3, n_test=1, counts=[1, 3], steps=3, val_every=1, T=8)
    return cfg


def main(argv: list[str] | None = None) -> list[Path]:
    def options(ap: argparse.ArgumentParser) -> None:
        ap.add_argument("--part", choices=("all", *JOBS, "both", "assemble", "retrain", "rainfall", "noarea"), default="all",
                        help="one part per job (river / geometry / geoleaks / matched / geolong / "
                        "both, for --seeds), "
                        "then assemble")
        ap.add_argument("--parts", type=Path, default=None, help="folder of the parts (with --part)")
        ap.add_argument("--only", nargs="+", default=None, metavar="MODEL",
                        help="with --name retrained --part retrain: train only these SEED:MODEL (e.g. 1:G15)")

    def build(cfg: dict, out: Path | None, args: argparse.Namespace) -> list[Path] | Path:
        if args.part != "all" and args.parts is None:
            raise SystemExit("--part needs --parts DIR")
        if args.name == "retrained":
            return make_retrained(cfg, out, args.part, args.parts, args.only)
        if args.name == "rainfall":
            return make_rainfall(cfg, out, args.part, args.parts)
        if args.name == "noarea":
            return make_noarea(cfg, out, args.part, args.parts)
        if args.part in ("retrain", "rainfall", "noarea"):
            raise SystemExit("--part retrain / rainfall / noarea is for --name retrained / rainfall / noarea")
        return make_models(cfg, out, args.part, args.parts)

    return scripts.script_main(build, config=st.checkpoint_config, tiny=tiny, names=["models", "retrained", "rainfall", "noarea"],
                               options=options, doc=__doc__, argv=argv)


if __name__ == "__main__":
    main()
