"""Train the models of chapter 16_space_time_operators that do not fit its 5-minute default run, and write them with
:mod:`helpers.checkpoints`:

* ``models``: per seed (0, 1, 2) the river routing operator (:class:`RoutingOperator`) trained on four basins with
  every leak closed and once with each leak open (per-node embeddings with ids distinct across training basins,
  un-normalised area, shifted forcing), each with its validation curve (held-out events of the training basins);
  the recurrent message-passing baseline; and the cross-geometry models (advection-diffusion in a potential flow):
  the Chebyshev model trained on G = 1, 3, 7, 15 geometries for the same number of epochs per geometry, the
  no-mixer ablation on 15 geometries, one locally trained oracle per test geometry, and (the diagnosis of the
  oracle ratio) the G = 15 model and the oracles trained 2x longer with their held-out learning curves. Every
  geometry model keeps its last training event per geometry for validation and ends with its best-validation
  weights (early stopping). Stored in float16.

Run from the repository root: ``.venv/bin/python data/16_space_time_operators/make_models.py`` (or
``make data NB=16_space_time_operators``). ``--tiny`` trains a tiny config into a temporary folder (what a test can
run); ``--seeds``/``--out``: other seeds into another data root. One torch thread per process; ``--workers`` processes (default 1, what the shared 2-core build machine
affords): the same seed writes the same weights whatever the number of workers.
"""

from __future__ import annotations

import argparse
import time
from multiprocessing import get_context
from pathlib import Path

import numpy as np
import torch

from helpers import checkpoints, repro, scripts
from helpers import space_time_operators as st

SLUG = "16_space_time_operators"
HERE = Path(__file__).resolve()
SOURCES = [HERE, Path(st.__file__).resolve(), Path(repro.__file__).resolve()]


def run_job(args: tuple[dict, int, str]) -> tuple[dict, dict, dict]:
    """One unit of work: a router with one leak (``router.<leak>``), the baseline, or a seed's geometry models."""
    cfg, seed, what = args
    repro.set_threads(1)
    r = cfg["river"]
    states, hist, metrics = {}, {}, {}
    if what.startswith("router.") or what == "recurrent":
        data = st.river_data_from_config(seed, r)
        if what == "recurrent":
            model, h = st.train_recurrent(data, r["steps"], seed, r["n_events"], hidden=cfg["baseline_hidden"])
        else:
            model, h = st.train_router(data, what.split(".")[1], r["steps"], seed, r["n_events"],
                                       val_every=r["val_every"], **r["model"])
            hist[f"s{seed}.{what}.val"] = h.evals["val"]
            metrics[f"s{seed}.{what}.final_val"] = h.evals["val"][-1][1]
        states[f"s{seed}.{what}"] = model.state_dict()
        hist[f"s{seed}.{what}"] = h.loss
        metrics[f"s{seed}.{what}.final_loss"] = float(np.mean(h.loss[-20:]))
    else:
        gcfg = cfg["geometry"]
        geos = st.geometry_data(seed, gcfg["n_train"] + gcfg["n_test"], T=gcfg["T"])
        train_g, test_g = geos[: gcfg["n_train"]], geos[gcfg["n_train"]:]
        E, ve = gcfg["epochs"], gcfg["val_events"]
        for G in gcfg["counts"]:
            model = st.geometry_model(gcfg["order"], seed)
            h = st.train_geometry(model, train_g[:G], E, seed, val_events=ve)
            states[f"s{seed}.geo.G{G}"] = model.state_dict()
            hist[f"s{seed}.geo.G{G}"] = h.loss
        model = st.geometry_model(0, seed)
        st.train_geometry(model, train_g, E, seed, val_events=ve)
        states[f"s{seed}.geo.nomix"] = model.state_dict()
        for k, g in enumerate(test_g):
            model = st.geometry_model(gcfg["order"], seed)
            st.train_geometry(model, [g], E, seed, steps=E * gcfg["n_train"], val_events=ve,
                              val_every=gcfg["n_train"])
            states[f"s{seed}.geo.oracle{k}"] = model.state_dict()
        # diagnosis of the oracle ratio: the G = n_train model and each oracle trained sweep_epochs per geometry
        # (the same number of steps for both), with the held-out error recorded along the way
        Es, every = gcfg["sweep_epochs"], gcfg["sweep_every"] * gcfg["n_train"]
        model = st.geometry_model(gcfg["order"], seed)
        h = st.train_geometry(model, train_g, Es, seed, eval_geos=test_g, eval_every=every, val_events=ve,
                              val_every=every)
        states[f"s{seed}.geo.long"] = model.state_dict()
        hist[f"s{seed}.geo.long.heldout"] = h.evals["heldout"]
        for k, g in enumerate(test_g):
            model = st.geometry_model(gcfg["order"], seed)
            h = st.train_geometry(model, [g], Es, seed, steps=Es * gcfg["n_train"], eval_geos=[g],
                                  eval_every=every, val_events=ve, val_every=every)
            states[f"s{seed}.geo.long_oracle{k}"] = model.state_dict()
            hist[f"s{seed}.geo.long_oracle{k}.heldout"] = h.evals["heldout"]
    print(f"seed {seed} {what} done", flush=True)
    return states, hist, metrics


def make_models(cfg: dict, root: Path | None, workers: int = 1) -> Path:
    t0 = time.time()
    jobs = [(cfg, s, f"router.{leak}") for s in cfg["seeds"] for leak in st.LEAKS]
    jobs += [(cfg, s, "geometry") for s in cfg["seeds"]]
    jobs += [(cfg, s, "recurrent") for s in cfg["baseline_seeds"]]
    if workers > 1:
        with get_context("fork").Pool(min(workers, len(jobs))) as pool:
            results = pool.map(run_job, jobs, chunksize=1)
    else:
        results = [run_job(j) for j in jobs]
    flat, hist, metrics = {}, {}, {}
    for states, h, m in results:
        for tag, sd in states.items():
            flat.update({f"{tag}.{k}": v for k, v in sd.items()})
        hist.update(h)
        metrics.update(m)
    return checkpoints.save(SLUG, "models", flat, config=cfg, metrics=metrics, history=hist,
                            seed=list(cfg["seeds"]), steps=cfg["river"]["steps"], wall_seconds=time.time() - t0,
                            sources=SOURCES, module="helpers.space_time_operators", dtype=torch.float16, root=root)


def tiny(name: str) -> dict:
    cfg = st.checkpoint_config(name)
    cfg["seeds"], cfg["baseline_seeds"] = [0], [0]
    cfg["river"].update(n=12, T=16, n_events=4, n_test=2, steps=2, val_every=1)
    cfg["geometry"].update(n_train=3, n_test=1, counts=[1, 3], epochs=1, T=8, sweep_epochs=2, sweep_every=1)
    return cfg


def main(argv: list[str] | None = None) -> list[Path]:
    def options(ap: argparse.ArgumentParser) -> None:
        ap.add_argument("--workers", type=int, default=1, help="processes (one torch thread each)")

    return scripts.script_main(lambda cfg, out, args: make_models(cfg, out, workers=1 if args.tiny else args.workers),
                               config=st.checkpoint_config, tiny=tiny, names=["models"], options=options,
                               doc=__doc__, argv=argv)


if __name__ == "__main__":
    main()
