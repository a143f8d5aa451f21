"""Train the models of chapter 14_icl_multiclass that do not fit its 5-minute default run, and write them with
:mod:`helpers.checkpoints`:

* ``shared_lt``: linear transformers (one d x d matrix W, gradient descent on prompts drawn as class sums) on
  tasks whose class centers all lie in one k-dimensional subspace U, for each ambient dimension d and seed, with a
  constant and with a decaying step size (W stored at several numbers of training tasks, U per (d, seed);
  float16);
* ``softmax_tf``: 2-layer softmax transformers on isotropic tasks, one per seed;
* ``softmax_tf_imbalanced``: the same on imbalanced contexts (a random class is the majority in each prompt);
* ``softmax_tf_shared``: the same at d = 32 on tasks in one shared k-dimensional subspace U (U per seed).

Run from the repository root: ``.venv/bin/python data/14_icl_multiclass/make_models.py`` (or
``make data NB=14_icl_multiclass``); ``--name shared_lt`` trains one of them. ``--tiny`` trains tiny configs for a
few steps into a temporary folder (seconds; what the tests run); ``--seeds``/``--out``: other seeds into another data
root. One torch thread: the same seed on the same machine
writes byte-identical weights.
"""

from __future__ import annotations

import copy
import time
from pathlib import Path

import numpy as np
import torch

from helpers import checkpoints, repro, scripts
from helpers import icl_multiclass as icl

SLUG = icl.CHECKPOINT_SLUG
HERE = Path(__file__).resolve()
SOURCES = [HERE, Path(icl.__file__).resolve(), Path(repro.__file__).resolve()]


def tiny(name: str) -> dict:
    cfg = copy.deepcopy(icl.checkpoint_config(name))
    if name == "shared_lt":
        cfg.update(dims=[8], seeds=[0], steps={"decay": 4, "constant": 2}, batch=8,
                   snapshots={"decay": [2, 4], "constant": [2]})
    else:
        cfg.update(seeds=[0], steps=4, batch=8, warmup=1, d_model=16, n_layer=1, n_head=2)
        if name == "softmax_tf_shared":
            cfg.update(d=8)
    return cfg


def make_shared_lt(cfg: dict, out: Path | None) -> Path:
    tensors, history, metrics = {}, {}, {}
    t0 = time.time()
    sigma = icl.power_spectrum(cfg["k"], 0.0)
    arms = {"constant": None, "decay": cfg["decay"]}
    for d in cfg["dims"]:
        for s in cfg["seeds"]:
            U = icl.random_orthonormal(d, cfg["k"], repro.rng(s, cfg["subspace_stream"], d))
            tensors[f"U/{d}/{s}"] = torch.tensor(U, dtype=torch.float32)
            for arm, decay in arms.items():
                # both arms see the same tasks in the same order
                batches = icl.sum_stream(s, cfg["train_stream"] * 1000 + d, cfg["batch"],
                                         [cfg["per_label"]] * cfg["C"], d, cfg["C"], sigma, cfg["R2"], U=U)
                with repro.seeded(s):
                    res = icl.train_sums(d, batches, cfg["steps"][arm], lr=cfg["lr"], decay=decay,
                                         snapshots=cfg["snapshots"][arm], desc=f"shared LT d={d} seed {s} {arm}")
                for step, W in res["snapshots"].items():
                    tensors[f"W/{arm}/{d}/{s}/{step}"] = W
                W = res["W"]
                history[f"loss/{arm}/{d}/{s}"] = res["loss"]
                key = f"{arm}/{d}/{s}"
                metrics[f"cos_UUt/{key}"] = icl.matrix_cosine(W, U @ U.T)
                metrics[f"min_principal_cos/{key}"] = float(icl.subspace_alignment(W, U).min())
                if d > cfg["k"]:
                    metrics[f"residue/{key}"] = icl.offsubspace_residue(W, U)["ratio"]
                print(f"d={d} seed={s} {arm}: loss {np.mean(res['loss'][-200:]):.3f}, cos(W, UU^T) "
                      f"{metrics[f'cos_UUt/{key}']:.3f}, min principal cosine "
                      f"{metrics[f'min_principal_cos/{key}']:.4f}", flush=True)
    return checkpoints.save(SLUG, "shared_lt", tensors, config=cfg, metrics=metrics, history=history,
                            seed=cfg["seeds"], steps=cfg["steps"]["decay"], wall_seconds=time.time() - t0,
                            sources=SOURCES, module="helpers.icl_multiclass", root=out, dtype=torch.float16)


def make_softmax_tf(cfg: dict, out: Path | None, name: str = "softmax_tf") -> Path:
    tensors, history, metrics = {}, {}, {}
    t0 = time.time()
    for s in cfg["seeds"]:
        kw, sigma = {}, icl.power_spectrum(cfg["C"] - 1, 0.0)
        if name == "softmax_tf_imbalanced":
            kw = dict(pi=icl.label_priors(cfg["C"], cfg["majority"]), shuffle_classes=cfg["shuffle_classes"])
        elif name == "softmax_tf_shared":
            U = icl.random_orthonormal(cfg["d"], cfg["k"], repro.rng(s, cfg["subspace_stream"], cfg["d"]))
            tensors[f"U/{s}"] = torch.tensor(U, dtype=torch.float32)
            kw, sigma = dict(U=U), icl.power_spectrum(cfg["k"], 0.0)
        batches = icl.task_stream(s, cfg["train_stream"], cfg["batch"], cfg["per_label"] * cfg["C"], cfg["d"],
                                  cfg["C"], sigma, cfg["R2"], **kw)
        with repro.seeded(s):
            tf = icl.SoftmaxICL(cfg["d"], cfg["C"], d_model=cfg["d_model"], n_layer=cfg["n_layer"],
                                n_head=cfg["n_head"])
            if name == "softmax_tf_shared":
                init = icl.qk_subspace_alignment(tf, U)
                metrics[f"init_min_principal_cos/{s}"] = float(init["cosines"].min())
                metrics[f"init_energy/{s}"] = init["energy"]
            hist = icl.train_icl(tf, batches, cfg["steps"], optimizer=cfg["optimizer"], lr=cfg["lr"],
                                 warmup=cfg["warmup"], seed=s, desc=f"{name} seed {s}")
        for k, v in tf.state_dict().items():
            tensors[f"{s}.{k}"] = v
        history[f"loss/{s}"] = hist.loss
        metrics[f"final_loss/{s}"] = float(np.mean(hist.loss[-50:]))
        msg = ""
        if name == "softmax_tf_shared":
            fin = icl.qk_subspace_alignment(tf, U)
            metrics[f"min_principal_cos/{s}"] = float(fin["cosines"].min())
            metrics[f"energy/{s}"] = fin["energy"]
            msg = (f"; query/key min principal cosine with U {metrics[f'init_min_principal_cos/{s}']:.3f} -> "
                   f"{fin['cosines'].min():.3f}, energy on U {metrics[f'init_energy/{s}']:.3f} -> "
                   f"{fin['energy']:.3f}")
        print(f"{name} seed {s}: final loss {metrics[f'final_loss/{s}']:.3f}{msg}", flush=True)
    return checkpoints.save(SLUG, name, tensors, config=cfg, metrics=metrics, history=history,
                            seed=cfg["seeds"], steps=cfg["steps"], wall_seconds=time.time() - t0, sources=SOURCES,
                            module="helpers.icl_multiclass", root=out)


def main(argv: list[str] | None = None) -> list[Path]:
    makers = {"shared_lt": make_shared_lt, "softmax_tf": make_softmax_tf,
              "softmax_tf_imbalanced": make_softmax_tf, "softmax_tf_shared": make_softmax_tf}

    def build(cfg: dict, out: Path | None, args) -> Path:
        if args.name == "shared_lt":
            return make_shared_lt(cfg, out)
        return make_softmax_tf(cfg, out, args.name)

    return scripts.script_main(build, config=icl.checkpoint_config, tiny=tiny, names=list(makers), doc=__doc__,
                               argv=argv)


if __name__ == "__main__":
    main()
