"""Train ``propagators_onestep`` of chapter 11_anchor_video_edit (issue #69, round 4) and write it with
:mod:`helpers.checkpoints` (int8 weights).

**Diagnosis first** (``diagnose_fit.py`` -> ``diagnose_fit.json``, exploratory; ``explore_recipe.py``). The stored
``propagators_filled`` (filled conditioning, width 16) lose to flow warp + inpaint on their own training clips'
disoccluded pixels by 0.01-0.2 dB. The loss sits (i) on the disoccluded pixels the estimated flow wrongly trusts
(13% of them; at seed 0 all of the gap) and (ii) in hole pixels 1-2 px from a trusted pixel and in small holes,
where inpainting is already accurate; the hole interiors (3 px and more) the generator fills better than
inpainting. No anchor shows any of these pixels (an oracle over every anchor covers none; 83% are shown by some
other *source* frame, which the propagator never sees): the target is learnable only as a prior. The network's
clean-frame estimate from pure noise (the sampler's first step) already loses at the borders. Three one-seed
A/B trainings at the stored size (1,200 steps, seed 0): the stored recipe -0.13 dB; warmup-stable-decay alone
-0.15 dB; a **one-step fill loss** (the τ = 0 prediction's squared error on holes and their 2-px border band,
weight 4) +0.15 dB. The wide builds (width 32) did worse than width 16, so capacity is kept.

**Design, fixed before training (this commit).** ``propagators_filled``'s model, conditioning (``fill_holes``),
clips (48), batch (2 clips), lr (2e-3) and hole weight (4), plus

* the one-step fill loss: ``x0_weight=4`` on holes and their ``border_radius=2`` band (``train_propagator``);
* warmup-stable-decay: 5% warmup, constant lr, cosine decay to 10% over the last ``decay_steps=600``;
* 3,000 steps (2.5x the stored ones; about 10 minutes per seed on one core).

**Conditions** (the chapter's bars, read here into the manifest and again by the chapter):

* ``fits_training_clips``: rebuilding the first 6 training clips from their own 3 uniform keyframes (8 steps,
  sampler seed ``1000 * seed``, filled conditioning), PSNR on disoccluded pixels minus flow warp + inpaint
  ``>= 0`` dB (``fit_gap_db/<seed>``);
* ``converged``, read on the stable phase only: ``train.plateau(loss, until=steps - decay_steps, noise=2) <=
  0.05`` (``plateau_stable/<seed>``). ``plateau/<seed>`` (the whole curve) is stored too, for comparison only.

**Rule.** Seed 0 is probed first (``--seeds 0 --workers 1 --out DIR``, then ``--summary DIR`` writes
``probe_onestep.json``: its measurements beside the stored ``propagators_filled`` seed 0). If it meets both
conditions, seeds 1 and 2 are trained (one job each), ``--merge`` writes the int8 checkpoint and the chapter
reads its claims on it with the same bars; if not, only ``probe_onestep.json`` is stored. ``--tiny`` trains a
tiny config into a temporary folder (seconds).

**Round 5: ``propagators_gated`` (``--name propagators_gated``), registered before any of its training.**
*Diagnosis* (``diagnose_trusted.py`` -> ``diagnose_trusted.json``, no training; run on the stored
``propagators_filled`` before this design was written). The round-4 reading "the loss sits on the pixels the
flow wrongly trusts" is not specific to them: on the fit condition's clips the stored variant's sample is
0.6-1.2 dB worse than the warp on wrongly trusted pixels 1 px outside a hole, 0.9-1.1 dB worse on *truly
visible* pixels 1 px outside a hole and 3.5-4.3 dB worse on visible pixels more than 2 px from any hole, where
the warp is near exact (30 dB). So the generator adds error wherever its base (warp, or the fill) is already
accurate, also at hole pixels 1-2 px from a trusted one; its clean-frame estimate from pure noise already does
(1.6-2.2 dB on the far visible pixels) and the last sampling steps double it. Marking the wrongly trusted
pixels would not help (the truly visible ones lose as much); a border band the warp does not trust makes the
model-free fill itself worse (biharmonic inpainting of holes dilated by 1 px: -1.8 dB on disoccluded pixels,
-0.8 dB on visible ones), so it is not used.

*Design.* ``propagators_onestep``'s recipe unchanged (filled conditioning, width 16, 48 clips, one-step fill
loss ``x0_weight=4`` on holes + 2-px band, warmup-stable-decay 3,000 steps / 600 decay, batch 2, lr 2e-3, hole
weight 4), plus one change: a **gated residual** (``Propagator(gate=True)``): the last layer gives a fourth
channel, a gate logit g, and the prediction is ``base + sigmoid(g) * residual``, so that the network can return
its base exactly (close the gate) where the base is right, whatever the noisy state, instead of having to
cancel its residual to zero. The sampler, anchor replacement and conditioning are unchanged; it is still one
sample of a flow-matching generator. Cost measured before training: 0.31 s/step against 0.40 s/step for the
round-4 recipe in the same short timing (150 steps, 8 clips; the round-4 probe took 540 s for 3,000 steps).

*Conditions and rule* (the same as round 4): ``fits_training_clips`` (``fit_gap_db/<seed> >= 0`` dB, first 6
training clips, 3 uniform keyframes, 8 steps, sampler seed ``1000 * seed``, filled conditioning) and the
stable-phase plateau ``plateau_stable/<seed> <= 0.05``. Seed 0 first (``--name propagators_gated --seeds 0
--out DIR``, then ``--summary DIR`` -> ``probe_gated.json``). If it meets both, seeds 1 and 2 are trained with
the same recipe, ``--merge`` writes the int8 checkpoint, and the chapter reads on it, as a labelled variant
("AVE, gated") with its own per-seed conditions (``gated_converged`` = the stable-phase plateau,
``gated_fits_training_clips``), the claims the issue lists with the same bars: beats the strongest warping
baseline on disoccluded pixels (> 1 dB), visible parity (>= -0.1 dB against flow warp), instruction following
(> 0 dB inside the edit) and content fidelity (>= 30 dB). If it misses, only ``probe_gated.json`` is stored.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import time
from pathlib import Path

import numpy as np

from helpers import anchor_video_edit as A
from helpers import checkpoints, repro, scripts, train

SLUG = "11_anchor_video_edit"
NAME = "propagators_onestep"
GATED = "propagators_gated"  # round 5 (--name propagators_gated): the same recipe with a gated residual
HERE = Path(__file__).resolve()
WIDE = HERE.with_name("make_propagators_wide.py")
SOURCES = [HERE, Path(A.__file__).resolve(), Path(repro.__file__).resolve(), Path(train.__file__).resolve()]
N_FIT_CLIPS = 6


def _wide():
    """make_propagators_wide.py as a module (its helpers: measure, _model, read_builds)."""
    spec = importlib.util.spec_from_file_location("make_propagators_wide", WIDE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def stable_plateau(loss: list, cfg: dict) -> float:
    """The registered ``converged`` reading: the plateau of the stable phase (before the decay), noise=2."""
    return float(train.plateau(loss, until=cfg["steps"] - cfg["decay_steps"], noise=2))


def train_seed(cfg: dict, seed: int, clips: list, motions: list) -> tuple[int, dict, list, dict]:
    repro.set_threads(1)
    t0 = time.time()
    model, hist = A.train_propagator(
        [c.frames for c in clips], motions, cfg["steps"], width=cfg["width"], seed=seed,
        batch_clips=cfg["batch_clips"], lr=cfg["lr"], hole_weight=cfg["hole_weight"], progress=False,
        fill_holes=cfg["fill_holes"], border_radius=cfg["border_radius"], x0_weight=cfg["x0_weight"],
        schedule=cfg["schedule"], decay_steps=cfg["decay_steps"], gate=cfg.get("gate", False))
    t_train = time.time() - t0
    keys = A.uniform_keyframes(clips[0].frames.shape[0], 3)
    rows = [A.rebuild_errors(model, c, m, keys, 8, seed=1000 * seed, fill_holes=cfg["fill_holes"])
            for c, m in zip(clips[:N_FIT_CLIPS], motions[:N_FIT_CLIPS])]
    metrics = {f"final_loss/{seed}": float(np.mean(hist.loss[-50:])),
               f"plateau/{seed}": float(train.plateau(hist.loss)),
               f"plateau_stable/{seed}": stable_plateau(hist.loss, cfg),
               f"fit_gap_db/{seed}": A.pooled_gap_db(rows),
               f"train_seconds/{seed}": round(t_train, 1)}
    print(f"seed {seed}: {metrics} ({time.time() - t0:.0f} s)", flush=True)
    return seed, {k: v.clone() for k, v in model.state_dict().items()}, list(hist.loss), metrics


def _save(cfg: dict, results: list, root: Path | None, wall: float, quantize: bool, name: str = NAME) -> Path:
    tensors, history, metrics = {}, {}, {}
    for seed, sd, loss, mets in sorted(results, key=lambda r: r[0]):
        tensors.update({f"{seed}.{k}": v for k, v in sd.items()})
        history[f"loss/{seed}"] = loss
        metrics.update(mets)
    return checkpoints.save(SLUG, name, tensors, config=cfg, metrics=metrics, history=history,
                            seed=list(cfg["seeds"]), steps=cfg["steps"], wall_seconds=wall, sources=SOURCES,
                            module="helpers.anchor_video_edit", quantize="int8" if quantize else None,
                            dtype=None, root=root)


def make(cfg: dict, root: Path | None, name: str = NAME) -> Path:
    t0 = time.time()
    clips, motions = A.training_clips(cfg)
    print(f"flow for {len(clips)} clips: {time.time() - t0:.0f} s", flush=True)
    results = [train_seed(cfg, s, clips, motions) for s in cfg["seeds"]]
    full = sorted(cfg["seeds"]) == sorted(A.checkpoint_config(name)["seeds"]) and root is None
    return _save(cfg, results, root, time.time() - t0, quantize=full, name=name)


def merge(dirs: list[str], root: Path | None, name: str = NAME) -> Path:
    """One int8 checkpoint from per-seed float32 builds (``--seeds s --out DIR``), read by the wide script's
    ``read_builds`` (config check, seeds, curves, metrics)."""
    cfg, results, wall = _wide().read_builds(dirs, name)
    return _save(cfg, results, root, wall, quantize=True, name=name)


def probe_file(name: str) -> str:
    """The probe record of a checkpoint name: ``probe_onestep.json``, ``probe_gated.json``."""
    return f"probe_{name.removeprefix('propagators_')}.json"


def summarize(build_dir: str, out: Path | None, n_clips: int, with_stored: bool = True, name: str = NAME) -> Path:
    """``probe_onestep.json`` (``probe_gated.json`` for ``name=GATED``) from a one-seed build: the wide script's
    ``measure`` on ``n_clips`` clips of each kind (filled conditioning), beside the stored ``propagators_filled``
    of the same seed, and the rule's outcome."""
    from safetensors.torch import load_file

    wide = _wide()
    repro.set_threads(1)
    t0 = time.time()
    w_path, m_path = checkpoints.paths(SLUG, name, build_dir)
    man = json.loads(Path(m_path).read_text())
    cfg = man["config"]
    seed = int(cfg["seeds"][0])
    probe = {k.split(".", 1)[1]: v for k, v in load_file(str(w_path)).items() if k.startswith(f"{seed}.")}
    models = {"probe": wide._model(probe, cfg["width"], cfg.get("gate", False))}
    if with_stored:
        base_cfg = A.checkpoint_config("propagators_filled")
        ck = checkpoints.load(SLUG, "propagators_filled", config=base_cfg)
        models["stored"] = wide._model({k.split(".", 1)[1]: v for k, v in ck.tensors.items()
                                        if k.startswith(f"{seed}.")}, base_cfg["width"])
    res = wide.measure(models, cfg, n_clips, seed, True)
    mets = man["metrics"]
    fits = mets[f"fit_gap_db/{seed}"] >= 0 and mets[f"plateau_stable/{seed}"] <= 0.05
    curve = man["history"][f"loss/{seed}"]
    every = max(1, len(curve["step"]) // 100)
    summary = {
        "what": (f"the one-seed probe of {name} (issue #69, round {5 if name == GATED else 4}) beside the stored propagators_filled of the "
                 "same seed, on the same clips and edits (filled conditioning for both); by the rule fixed "
                 "before training, " + ("it met fits_training_clips (>= 0 dB) and the stable-phase plateau "
                                         "(<= 0.05), so seeds 1 and 2 are trained" if fits else
                                         "it did not meet both conditions, so no weights are stored")),
        "meets_rule": bool(fits),
        "provenance": {"build": f"make_propagators_onestep.py --name {name} --seeds {seed} --workers 1 --out DIR",
                       "summary": f"make_propagators_onestep.py --name {name} --summary DIR", "date": time.strftime("%Y-%m-%d"),
                       "build_wall_seconds": man["wall_seconds"], "machine": man["machine"],
                       "sources_sha256": {checkpoints._rel(p): checkpoints.sha256_file(p) for p in SOURCES}},
        "config": cfg, "seed": seed, "n_clips": n_clips, "build_metrics": mets, "measured": res,
        "parameters": {k: sum(p.numel() for p in m.parameters()) for k, m in models.items()},
        "loss_curve": {"step": curve["step"][::every], "value": curve["value"][::every]},
        "wall_seconds": round(time.time() - t0, 1),
    }
    root = Path(out) if out is not None else checkpoints.data_dir()
    path = root / SLUG / probe_file(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n")
    print(json.dumps(res, indent=1), flush=True)
    return path


def tiny(name: str) -> dict:
    cfg = A.checkpoint_config(name)
    cfg.update(n_train_clips=2, steps=6, decay_steps=2, width=4, seeds=[0])
    return cfg


def main(argv: list[str] | None = None) -> list[Path]:
    def options(ap: argparse.ArgumentParser) -> None:
        ap.add_argument("--workers", type=int, default=1, help="accepted for symmetry; seeds run one by one")
        ap.add_argument("--merge", nargs="+", metavar="DIR", help="merge per-seed builds into the data root")
        ap.add_argument("--summary", metavar="DIR",
                        help="write probe_onestep.json (probe_gated.json) from the one-seed build in DIR")

    def build(cfg: dict, out: Path | None, args: argparse.Namespace) -> Path:
        if args.merge:
            return merge(args.merge, out, args.name)
        if args.summary:
            return summarize(args.summary, out, 2 if args.tiny else 6, with_stored=not args.tiny, name=args.name)
        return make(cfg, out, args.name)

    return scripts.script_main(build, config=A.checkpoint_config, tiny=tiny, names=[NAME, GATED],
                               default_names=[NAME], options=options, doc=__doc__, argv=argv)


if __name__ == "__main__":
    main()
