"""Train the language models of chapter 13_algorithmic_cores once, so that its default run only evaluates them,
and write them with :mod:`helpers.checkpoints`:

* ``markov``: three one-layer transformers (d = 64, 4 heads, learned positions) on next-token prediction over the
  paper's 4-state cyclic chain (stay 3/4, advance 1/4): the paper's length and learning rate, 3000 training
  sequences of length 32, batch 64, 1875 steps (40 epochs), AdamW lr 1e-4 at a constant schedule after a 20-step
  warmup. Model seeds 0, 100, 200 (the paper's); the training sequences are drawn with seed 0. Weights float32.
* ``sva``: per seed (0, 1, 2) two LMs (2 layers d = 64; 3 layers d = 96) trained 600 steps (AdamW lr 3e-3, cosine
  after 30 warmup steps) on the generated subject-verb agreement grammar (``ac.sva_batch``). Weights float16 (the
  notebook evaluates the float16-rounded weights).

Each manifest holds the loss curves (the notebook's plateau conditions read them). Run from the repository root:
``.venv/bin/python data/13_algorithmic_cores/make_lms.py`` (or ``make data NB=13_algorithmic_cores``); ``--tiny``
trains a few steps into a temporary folder (seconds; what the tests run); ``--seeds``/``--out``/``--name``.
"""

from __future__ import annotations

import copy
import time
from pathlib import Path

import torch

from helpers import algorithmic_cores as ac
from helpers import checkpoints, repro, scripts, train
from helpers import nn as hnn

SLUG = ac.CHECKPOINT_SLUG
HERE = Path(__file__).resolve()
SOURCES = [HERE, Path(ac.__file__).resolve(), Path(repro.__file__).resolve(), Path(train.__file__).resolve(),
           Path(hnn.__file__).resolve()]


def tiny(name: str) -> dict:
    cfg = copy.deepcopy(ac.lm_config(name))
    cfg.update(steps=5, seeds=[0] if name == "sva" else [0, 1])
    if name == "markov":
        cfg.update(n_train=50)
    return cfg


def make_markov(cfg: dict, out: Path | None) -> Path:
    t0 = time.time()
    seqs = torch.tensor(ac.markov_sequences(ac.cyclic_transition(4, cfg["stay"]), cfg["n_train"], cfg["length"],
                                            seed=cfg["seeds"][0]))
    tensors, history, metrics = {}, {}, {}
    for i in range(len(cfg["seeds"])):
        ms = cfg["seeds"][0] + cfg["seed_stride"] * i  # the paper's model seeds: seed, seed + 100, seed + 200
        with repro.seeded(ms):
            model = hnn.Transformer(ac.markov_model_config())
            hist = train.fit(model, ac.lm_loss, lambda st: ac.markov_batch(seqs, cfg["seeds"][0], st, cfg["batch"]),
                             cfg["steps"], lr=cfg["lr"], warmup=cfg["warmup"], schedule=cfg["schedule"], seed=ms,
                             desc=f"Markov model, seed {ms}", progress=False)
        tensors.update({f"{ms}.{k}": v.detach().clone() for k, v in model.state_dict().items()})
        history[f"loss/{ms}"] = list(enumerate(hist.loss, 1))
        metrics[f"final_loss/{ms}"] = float(hist.loss[-1])
        print(f"Markov model seed {ms}: final loss {hist.loss[-1]:.4f} ({time.time() - t0:.0f} s)", flush=True)
    return checkpoints.save(SLUG, "markov", tensors, config=cfg, metrics=metrics, history=history, seed=cfg["seeds"],
                            steps=cfg["steps"], wall_seconds=time.time() - t0, sources=SOURCES,
                            module="helpers.algorithmic_cores", root=out)


def make_sva(cfg: dict, out: Path | None) -> Path:
    t0 = time.time()
    tensors, history, metrics = {}, {}, {}
    for s in cfg["seeds"]:
        for k, (name, (n_layer, d)) in enumerate(cfg["arch"].items()):
            with repro.seeded(s):
                model = hnn.Transformer(ac.sva_model_config(n_layer, d))
                hist = train.fit(model, ac.lm_loss, lambda st, s_=s: ac.sva_batch(s_, st, cfg["batch"]),
                                 cfg["steps"], lr=cfg["lr"], warmup=cfg["warmup"], schedule=cfg["schedule"], seed=s,
                                 desc=f"{name}, seed {s}", progress=False)
            tensors.update({f"{s}.{k}.{n}": v.detach().to(torch.float16) for n, v in model.state_dict().items()})
            history[f"loss/{s}.{k}"] = list(enumerate(hist.loss, 1))
            metrics[f"final_loss/{s}.{k}"] = float(hist.loss[-1])
            print(f"{name} seed {s}: final loss {hist.loss[-1]:.4f} ({time.time() - t0:.0f} s)", flush=True)
    return checkpoints.save(SLUG, "sva", tensors, config=cfg, metrics=metrics, history=history, seed=cfg["seeds"],
                            steps=cfg["steps"], wall_seconds=time.time() - t0, sources=SOURCES,
                            module="helpers.algorithmic_cores", root=out)


def main(argv: list[str] | None = None) -> list[Path]:
    return scripts.script_main(
        lambda cfg, out, args: (make_markov if args.name == "markov" else make_sva)(cfg, out),
        config=ac.lm_config, tiny=tiny, names=["markov", "sva"], doc=__doc__, argv=argv)


if __name__ == "__main__":
    main()
