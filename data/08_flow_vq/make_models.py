"""Train the models of chapter 08_flow_vq that do not fit its 5-minute default run, and write them with
:mod:`helpers.checkpoints` as one checkpoint ``models`` (float16):

* ``flow/<distribution>/s<seed>``: a flow-matching velocity field on each 2-D latent set (four distributions,
  seeds 0, 1, 2; the data sample is drawn with the same seed);
* ``lorenz``: the velocity field on standardized Lorenz-63 states (seed 0);
* ``gauss``: the velocity field on N(0, I) samples (the ``gaussian_sanity`` check, seed 0);
* ``tok/<method>/s<seed>``: the digits tokenizer (encoder, decoder, quantizer state) for each of the five
  quantizers at K = 256, seeds 0, 1, 2, trained on the fixed training split.

Run from the repository root: ``.venv/bin/python data/08_flow_vq/make_models.py`` (or ``make data NB=08_flow_vq``).
``--tiny`` trains a tiny config for a few steps into a temporary folder (what a smoke test runs);
``--seeds``/``--out``: other seeds into another data root. One torch thread per process; ``--workers`` forks
independent jobs (the same weights whatever the number of workers).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import time
from pathlib import Path

import numpy as np
import torch

from helpers import checkpoints, repro, scripts
from helpers import flow_vq as fv

SLUG = "08_flow_vq"
HERE = Path(__file__).resolve()
SOURCES = [HERE, Path(fv.__file__).resolve(), Path(repro.__file__).resolve()]


def digits_split(cfg: dict) -> tuple[torch.Tensor, np.ndarray]:
    from sklearn.datasets import load_digits

    X = torch.tensor(load_digits().data / 16.0, dtype=torch.float32)
    perm = np.random.default_rng(cfg["split_seed"]).permutation(len(X))
    return X, perm


def run_job(args: tuple) -> tuple[str, dict, list[float], dict]:
    kind, name, seed, cfg = args
    repro.set_threads(1)
    if kind == "flow":
        x = fv.toy_latents(name, cfg["n_toy"], seed)
        v, curve = fv.train_flow(x, cfg["flow_steps"], seed, cfg["flow_hidden"], cfg["flow_batch"], cfg["flow_lr"],
                                 progress=False)
        return f"flow/{name}/s{seed}", v.state_dict(), curve, {"fm_loss_final": curve[-1]}
    if kind == "lorenz":
        s = fv.lorenz_states(cfg["n_lorenz"], seed=seed)
        s = torch.tensor((s - s.mean(0)) / s.std(0), dtype=torch.float32)
        v, curve = fv.train_flow(s, cfg["flow_steps"], seed, cfg["flow_hidden"], cfg["flow_batch"], cfg["flow_lr"],
                                 progress=False)
        return "lorenz", v.state_dict(), curve, {"fm_loss_final": curve[-1]}
    if kind == "gauss":
        g = torch.randn(200_000, 2, generator=torch.Generator().manual_seed(seed + 2))
        v, curve = fv.train_flow(g, cfg["gauss_steps"], seed, cfg["gauss_hidden"], 1024, cfg["flow_lr"],
                                 progress=False)
        return "gauss", v.state_dict(), curve, {"fm_loss_final": curve[-1]}
    X, perm = digits_split(cfg)
    tr, te = perm[: cfg["n_train"]], perm[cfg["n_train"]:]
    model, curve = fv.train_tokenizer(name, X[tr], cfg["tok_K"], cfg["tok_steps"], seed, cfg["n_tokens"],
                                      cfg["d_tok"], cfg["refresh_every"], cfg["tok_batch"], cfg["tok_lr"],
                                      cfg["tok_hidden"], progress=False)
    with torch.no_grad():
        recon, _ = model(X[te])
    return f"tok/{name}/s{seed}", model.state_dict(), curve, {"test_mse": (recon - X[te]).pow(2).mean().item()}


def tiny(name: str) -> dict:
    cfg = fv.checkpoint_config(name)
    cfg.update(seeds=[0], n_toy=500, flow_steps=3, n_lorenz=300, gauss_steps=3, tok_steps=3, refresh_every=2)
    return cfg


def make_models(cfg: dict, root: Path | None, workers: int = 1) -> Path:
    t0 = time.time()
    jobs = [("tok", m, s, cfg) for s in cfg["seeds"] for m in cfg["methods"]]
    jobs += [("flow", n, s, cfg) for s in cfg["seeds"] for n in cfg["toy"]]
    jobs += [("lorenz", "", 0, cfg), ("gauss", "", 0, cfg)]
    if workers > 1:
        with mp.get_context("fork").Pool(workers) as pool:
            out = pool.map(run_job, jobs, chunksize=1)
    else:
        out = [run_job(j) for j in jobs]
    flat, history, metrics = {}, {}, {}
    for tag, sd, curve, met in out:
        print(tag, {k: round(v, 5) for k, v in met.items()}, flush=True)
        flat.update({f"{tag}.{k}": v for k, v in sd.items() if v.is_floating_point()})
        history[tag] = curve
        metrics[tag] = met
    return checkpoints.save(SLUG, "models", flat, config=cfg, metrics=metrics, history=history,
                            seed=list(cfg["seeds"]), steps=cfg["tok_steps"], wall_seconds=time.time() - t0,
                            sources=SOURCES, module="helpers.flow_vq", dtype=torch.float16, root=root)


def main(argv: list[str] | None = None) -> list[Path]:
    def options(ap: argparse.ArgumentParser) -> None:
        ap.add_argument("--workers", type=int, default=2, help="processes (one torch thread each)")

    return scripts.script_main(lambda cfg, out, args: make_models(cfg, out, args.workers),
                               config=fv.checkpoint_config, tiny=tiny, names=["models"], options=options, doc=__doc__,
                               argv=argv)


if __name__ == "__main__":
    main()
