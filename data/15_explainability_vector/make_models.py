"""Train the models of chapter 15_explainability_vector that do not fit its 5-minute default run, and write them with
:mod:`helpers.checkpoints`:

* ``models`` (round 3 of #73; ``--name models``, no longer stored): per seed (0, 1, 2) its own pre-trained θ0 (every class, class embeddings learned and then frozen;
  initialization and batch order drawn from the seed), and from that θ0 the source's prediction-only and
  self-explaining models (same batches, β = 0 vs β > 0) and each target's prediction-only model θ_T (β = 0, no
  explanation labels). θ0 is stored whole, every other model as its difference from θ0 (the self-explaining model
  as τ), matrices int8 with one scale per row, small tensors float16 (``ev.pack_states``). The config can also
  ask for oracles (fine-tuned with a target's own masks); the stored checkpoint has none.
* ``models_r4`` (the stored checkpoint, built by default): round 4 of #73, the same recipe on domains
  where every digit fills its square like the other objects, with the rotated target's own data and steps
  (``ev.ROTATED_RECIPES``, chosen by the rule written beside it) and, round 5, the new-ink targets' own data
  (``ev.INK_RECIPES``, the same kind of rule, judged by ``probe_r5.py``).

Run from the repository root: ``.venv/bin/python data/15_explainability_vector/make_models.py`` (or
``make data NB=15_explainability_vector``), about 15 minutes a seed on one core (round 3's recipe). ``--tiny`` trains a tiny config for
a few steps into a temporary folder (seconds; what the tests run); ``--seeds``/``--out``: other seeds into another
data root. ``--parts DIR`` keeps each seed's models, so that each seed can be its own job
(``--seeds 1 --parts DIR --out /tmp/x``) and the checkpoint is merged at the end (``--parts DIR``);
``--redo 0:striped`` trains seed 0's striped target again from its stored θ0 (after a change to that domain). One torch thread per process: the same seed on the same
machine writes identical weights (``--workers`` forks processes for the independent runs, same results).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from helpers import checkpoints, repro, scripts
from helpers import explainability_vector as ev

SLUG = "15_explainability_vector"
HERE = Path(__file__).resolve()
SOURCES = [HERE, Path(ev.__file__).resolve(), Path(repro.__file__).resolve()]
HISTORY_POINTS = 100  # points stored per loss curve
INT4 = ("T/", "source_pred", "oracle/")  # differences stored at 4 bits (ev.pack4)


def make_models(cfg: dict, root: Path | None, n_eval: int = 300, workers: int = 1, parts: Path | None = None,
                redo: list[tuple[int, str]] | None = None, name: str = "models") -> Path:
    t0 = time.time()
    states, history, metrics, redone = {}, {}, {}, {}
    key = scripts.part_key(cfg)
    for s in cfg["seeds"]:  # one seed at a time: with --parts each seed can be its own job, merged at the end
        def train(s: int = s) -> dict:
            out = ev.train_all(dict(cfg, seeds=[s]), n_eval=n_eval, log=lambda m: print(m, flush=True),
                               workers=workers)
            return dict(zip(("states", "history", "metrics"), out), wall=time.time() - t0)

        res, reused = scripts.seed_part(parts, s, key, train)
        again = [t for seed, t in redo or [] if seed == s] if reused else []
        if again:  # targets whose domain changed after this part was trained: again, from its stored theta0
            out = ev.train_all(dict(cfg, seeds=[s], targets=again), n_eval=n_eval,
                               log=lambda m: print(m, flush=True), theta0={s: res["states"][f"s{s}/theta0"]})
            for d, new in zip(("states", "history", "metrics"), out):
                res[d].update(new)
            res["redone"] = sorted(set(res.get("redone", [])) | set(again))
            torch.save({**res, "key": key}, parts / f"seed{s}.pt")
        redone.update({f"s{s}": res["redone"]} if res.get("redone") else {})
        states.update(res["states"])
        history.update(res["history"])
        metrics.update(res["metrics"])
    # theta0 whole, everything else as its (small) difference; matrices int8 with one scale per row, the other
    # tensors float16, and the target and source prediction-only models' matrices at 4 bits (the chapter stays
    # within its data budget; tau, the vector itself, stays int8): see ev.pack_states
    flat = ev.pack_states(states, int4=INT4)
    # 100 points a curve (means over equal bins of steps) keep the manifest small
    curves = {k: checkpoints.subsample(v, max_points=HISTORY_POINTS) for k, v in history.items()}
    history = {k: list(zip(c["step"], c["value"])) for k, c in curves.items()}
    return checkpoints.save(SLUG, name, flat, config=cfg, metrics=metrics, history=history,
                            seed=list(cfg["seeds"]), steps=cfg["pretrain_steps"], wall_seconds=time.time() - t0,
                            sources=SOURCES, module="helpers.explainability_vector", dtype=torch.float16,
                            quantize="int8", root=root,
                            extra={"retrained_from_stored_theta0": redone} if redone else None)


def tiny(name: str) -> dict:
    cfg = ev.checkpoint_config(name)
    cfg.update(n_train=16, batch_size=4, pretrain_steps=2, source_steps=2, target_steps=2, seeds=[0, 1],
               oracle_seeds=[0], targets=cfg["targets"][:2],
               model=dict(cfg["model"], d_model=8, depth=1, n_head=2, stem=4))
    return cfg


def build(cfg: dict, out: Path | None, args: argparse.Namespace) -> Path:
    if args.tiny:
        return make_models(cfg, out, n_eval=8, parts=args.parts, name=args.name)
    return make_models(cfg, out, workers=args.workers, parts=args.parts, redo=args.redo, name=args.name)


def redo_item(text: str) -> tuple[int, str]:
    """``"0:striped"`` -> ``(0, "striped")`` (a seed and a target of ``ev.TARGETS``)."""
    seed, _, target = text.partition(":")
    if not seed.isdigit() or target not in ev.TARGETS:
        raise argparse.ArgumentTypeError(f"expected SEED:TARGET with TARGET one of {ev.TARGETS}, got {text!r}")
    return int(seed), target


def main(argv: list[str] | None = None) -> list[Path]:
    def options(ap: argparse.ArgumentParser) -> None:
        ap.add_argument("--workers", type=int, default=1, help="processes for the fine-tuning runs (one thread each)")
        ap.add_argument("--parts", type=Path, default=None,
                        help="folder keeping (and reusing) each seed's trained models: train one seed per job "
                        "(--seeds S --parts DIR --out /tmp/x), then merge with --parts DIR")
        ap.add_argument("--redo", nargs="+", default=None, metavar="SEED:TARGET", type=redo_item,
                        help="with --parts: train these target models again from the stored part's theta0 (after "
                        "a change to their domain); what a full run would train, each run being seeded on its own")

    # models_r4 (rounds 4-5) replaced round 3's models, which --name models still trains
    return scripts.script_main(build, config=ev.checkpoint_config, tiny=tiny, names=["models", "models_r4"],
                               default_names=["models_r4"], options=options, doc=__doc__, argv=argv)


if __name__ == "__main__":
    main()
