"""Train the models of chapter 08_flow_vq that do not fit its 5-minute default run, and write them with
:mod:`helpers.checkpoints`.

Checkpoint ``models`` (float16):

* ``flow/<distribution>/s<seed>``: a flow-matching velocity field on each 2-D latent set (four distributions,
  seeds 0, 1, 2; the data sample is drawn with the same seed), 20,000 steps of batch 1024 with a cosine-decayed
  learning rate (1500 steps left the flows visibly under-fit), 40,000 for the rings (``flow_steps_by_set``: at
  20,000 two of three rings flows stayed above twice the MMD² noise floor);
* ``lorenz/s<seed>``: the velocity field on standardized Lorenz-63 states (the trajectory's start drawn with the
  same seed), trained like the 2-D flows;
* ``gauss``: the velocity field on N(0, I) samples (the ``gaussian_sanity`` check, seed 0);
* ``tok/<method>/s<seed>``: the digits tokenizer (encoder, decoder, quantizer state) for each of the five
  quantizers at K = 256, seeds 0, 1, 2, trained on the fixed training split (VQ-EMA starts from k-means).

Checkpoint ``rate`` (measurements, float32): the same tokenizers at the other codebook sizes (K = 16, 64, 1024),
each evaluated as the chapter evaluates the stored K = 256 ones (weights rounded to float16 first; test MSE, code
usage, bits per test image under a fitted autoregressive prior: :func:`helpers.flow_vq.evaluate_tokenizer`). Only
the measurements and the loss curves are kept: sixty more tokenizers' weights would not fit the data budget.

Run from the repository root: ``.venv/bin/python data/08_flow_vq/make_models.py`` (or ``make data NB=08_flow_vq``);
``--name models`` or ``--name rate`` builds one of them.
``--name models --only flow/rings`` retrains only the models under that tag prefix and keeps the other stored
tensors bit-identical (how the rings flows went from 20,000 to 40,000 steps).
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

from helpers import checkpoints, repro, scripts, train
from helpers import flow_vq as fv

SLUG = "08_flow_vq"
HERE = Path(__file__).resolve()
SOURCES = [HERE, Path(fv.__file__).resolve(), Path(repro.__file__).resolve(), Path(train.__file__).resolve()]


def digits_split(cfg: dict) -> tuple[torch.Tensor, np.ndarray]:
    from sklearn.datasets import load_digits

    X = torch.tensor(load_digits().data / 16.0, dtype=torch.float32)
    perm = np.random.default_rng(cfg["split_seed"]).permutation(len(X))
    return X, perm


def fp16_roundtrip(model: torch.nn.Module, method: str) -> torch.nn.Module:
    """Round the model's floating tensors to float16 and back, as the chapter sees a stored tokenizer (FSQ's and the
    Gaussian grid's quantizer constants are rebuilt exactly there, so they are kept)."""
    keep = method in ("FSQ", "Gaussian grid")
    sd = {k: (v if not v.is_floating_point() or (keep and k.startswith("quantizer.")) else v.half().float())
          for k, v in model.state_dict().items()}
    model.load_state_dict(sd)
    return model


def run_job(args: tuple) -> tuple[str, dict, list[float], dict]:
    kind, name, seed, cfg = args
    repro.set_threads(1)
    if kind == "flow":
        x = fv.toy_latents(name, cfg["n_toy"], seed)
        steps = cfg.get("flow_steps_by_set", {}).get(name, cfg["flow_steps"])
        v, curve = fv.train_flow(x, steps, seed, cfg["flow_hidden"], cfg["flow_batch"], cfg["flow_lr"],
                                 progress=False)
        return f"flow/{name}/s{seed}", v.state_dict(), curve, {"fm_loss_final": curve[-1]}
    if kind == "lorenz":
        s = fv.lorenz_states(cfg["n_lorenz"], seed=seed)
        s = torch.tensor((s - s.mean(0)) / s.std(0), dtype=torch.float32)
        v, curve = fv.train_flow(s, cfg["flow_steps"], seed, cfg["flow_hidden"], cfg["flow_batch"], cfg["flow_lr"],
                                 progress=False)
        return f"lorenz/s{seed}", v.state_dict(), curve, {"fm_loss_final": curve[-1]}
    if kind == "gauss":
        g = torch.randn(200_000, 2, generator=torch.Generator().manual_seed(seed + 2))
        v, curve = fv.train_flow(g, cfg["gauss_steps"], seed, cfg["gauss_hidden"], 1024, cfg["flow_lr"],
                                 progress=False)
        return "gauss", v.state_dict(), curve, {"fm_loss_final": curve[-1]}
    X, perm = digits_split(cfg)
    tr, te = perm[: cfg["n_train"]], perm[cfg["n_train"]:]
    K = cfg["tok_K"] if kind == "tok" else int(kind.split("/")[1])
    t0 = time.time()
    model, curve = fv.train_tokenizer(name, X[tr], K, cfg["tok_steps"], seed, cfg["n_tokens"],
                                      cfg["d_tok"], cfg["refresh_every"], cfg["tok_batch"], cfg["tok_lr"],
                                      cfg["tok_hidden"], progress=False, ema_kmeans_init=cfg["ema_kmeans_init"])
    if kind == "tok":
        with torch.no_grad():
            recon, _ = model(X[te])
        return f"tok/{name}/s{seed}", model.state_dict(), curve, {"test_mse": (recon - X[te]).pow(2).mean().item()}
    met = fv.evaluate_tokenizer(fp16_roundtrip(model, name), X[tr], X[te], X, cfg["prior_steps"], seed)
    met["plateau"] = train.plateau(curve)
    met["seconds"] = time.time() - t0
    return f"rate/{name}/K{K}/s{seed}", {}, curve, met


def tiny(name: str) -> dict:
    cfg = fv.checkpoint_config(name)
    if name == "rate":
        cfg.update(seeds=[0], rate_K=[16], tok_steps=3, refresh_every=2, prior_steps=2)
    else:
        cfg.update(seeds=[0], n_toy=500, flow_steps=3, flow_steps_by_set={"rings": 4}, n_lorenz=300, gauss_steps=3, tok_steps=3, refresh_every=2)
    return cfg


def _run(jobs: list, workers: int) -> list:
    if workers > 1:
        with mp.get_context("fork").Pool(workers) as pool:
            return pool.map(run_job, jobs, chunksize=1)
    return [run_job(j) for j in jobs]


def _kept(cfg: dict, root: Path | None, only: list[str]) -> tuple[dict, dict, dict, float]:
    """The stored ``models`` checkpoint's tensors, curves and metrics of every job not under a prefix of ``only``
    (a partial rebuild: those are kept bit-identical). The stored config must equal ``cfg`` except for keys that
    only change the retrained jobs (``flow_steps_by_set``)."""
    from safetensors.torch import load_file

    w_path, _ = checkpoints.paths(SLUG, "models", root)
    man = checkpoints.load_manifest(SLUG, "models", root)
    if checkpoints.sha256_file(w_path) != man["weights"]["sha256"]:
        raise SystemExit(f"{w_path} does not match its manifest: rebuild it whole")
    old = {k: v for k, v in man["config"].items() if k != "flow_steps_by_set"}
    diff = checkpoints.diff_config({k: v for k, v in cfg.items() if k != "flow_steps_by_set"}, old)
    if diff:
        raise SystemExit(f"the stored models were trained with another config ({', '.join(diff)}): rebuild it whole")
    keep = lambda tag: not any(tag.startswith(p) for p in only)  # noqa: E731
    flat = {k: v for k, v in load_file(str(w_path)).items() if keep(k.split(".")[0])}
    hist = {k: v for k, v in man["history"].items() if keep(k)}
    return flat, hist, {k: v for k, v in man["metrics"].items() if keep(k)}, man.get("wall_seconds") or 0.0


def make_models(cfg: dict, root: Path | None, workers: int = 1, only: list[str] | None = None) -> Path:
    t0 = time.time()
    jobs = [("tok", m, s, cfg) for s in cfg["seeds"] for m in cfg["methods"]]
    jobs += [("flow", n, s, cfg) for s in cfg["seeds"] for n in cfg["toy"]]
    jobs += [("lorenz", "", s, cfg) for s in cfg["seeds"]] + [("gauss", "", 0, cfg)]
    flat, history, metrics, before = {}, {}, {}, 0.0
    if only:
        tag_of = {"tok": "tok/{1}/s{2}", "flow": "flow/{1}/s{2}", "lorenz": "lorenz/s{2}", "gauss": "gauss"}
        jobs = [j for j in jobs if any(tag_of[j[0]].format(*j).startswith(p) for p in only)]
        flat, history, metrics, before = _kept(cfg, root, only)
        print(f"partial rebuild: {len(jobs)} jobs ({', '.join(only)}); {len(history)} stored models kept", flush=True)
    for tag, sd, curve, met in _run(jobs, workers):
        print(tag, {k: round(v, 5) for k, v in met.items()}, flush=True)
        flat.update({f"{tag}.{k}": v for k, v in sd.items() if v.is_floating_point()})
        history[tag] = curve
        metrics[tag] = met
    return checkpoints.save(SLUG, "models", flat, config=cfg, metrics=metrics, history=history,
                            seed=list(cfg["seeds"]), steps=cfg["tok_steps"], wall_seconds=before + time.time() - t0,
                            sources=SOURCES, module="helpers.flow_vq", dtype=torch.float16, root=root)


RATE_METRICS = ("recon_mse", "bits_per_image", "entropy_bits", "utilization", "plateau")


def make_rate(cfg: dict, root: Path | None, workers: int = 1) -> Path:
    t0 = time.time()
    jobs = [(f"rate/{K}", m, s, cfg) for s in cfg["seeds"] for K in cfg["rate_K"] for m in cfg["methods"]]
    history, metrics = {}, {}
    for tag, _, curve, met in _run(jobs, workers):
        print(tag, {k: round(v, 5) for k, v in met.items()}, flush=True)
        history[tag] = checkpoints.subsample(curve, 50)
        metrics[tag] = met
    # the measurements as one tensor (method, K, seed, metric), in the order of the config and RATE_METRICS
    table = torch.tensor([[[[metrics[f"rate/{m}/K{K}/s{s}"][k] for k in RATE_METRICS] for s in cfg["seeds"]]
                           for K in cfg["rate_K"]] for m in cfg["methods"]], dtype=torch.float32)
    return checkpoints.save(SLUG, "rate", {"table": table}, config=cfg, metrics=metrics, history=history,
                            seed=list(cfg["seeds"]), steps=cfg["tok_steps"], wall_seconds=time.time() - t0,
                            sources=SOURCES, module="helpers.flow_vq", extra={"table_axes": [
                                "method", "K", "seed", list(RATE_METRICS)]}, root=root)


def main(argv: list[str] | None = None) -> list[Path]:
    def options(ap: argparse.ArgumentParser) -> None:
        ap.add_argument("--workers", type=int, default=2, help="processes (one torch thread each)")
        ap.add_argument("--only", nargs="+", default=None, metavar="PREFIX",
                        help="models: retrain only the models whose tag starts with PREFIX (e.g. flow/rings) and "
                             "keep every other stored tensor as it is")

    def build(cfg: dict, out: Path | None, args: argparse.Namespace) -> Path:
        if args.name == "rate":
            return make_rate(cfg, out, args.workers)
        return make_models(cfg, out, args.workers, args.only)

    return scripts.script_main(build, config=fv.checkpoint_config, tiny=tiny, names=["models", "rate"],
                               options=options, doc=__doc__, argv=argv)


if __name__ == "__main__":
    main()
