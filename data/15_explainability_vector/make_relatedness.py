"""Round 6 of chapter 15_explainability_vector (issue #73), registered in ``helpers.explainability_vector``
(``SINGLE_FACTOR``, ``SINGLE_FACTOR_READING``, ``checkpoint_config("relatedness")``) and committed before any of
these runs. Records, not weights: one JSON file per seed, ``relatedness_s<seed>.json``.

Per seed, from that seed's stored ``models_r4`` θ0 and τ (as the chapter loads them), each single-factor target's
prediction-only model θ_T is fine-tuned (``ev.train_all`` with ``theta0``: the same run a full ``make_models.py``
makes for a target, the round-5 recipe of the new-ink targets: 9000 images, 400 steps) and scored
(``ev.single_factor_record``: accuracies, patch AUROC of θ_T's map, of θ_T + λτ and of the two gradient maps, the
gain, the label-free features and relatedness measured as θ0's feature MMD to the source), with the target's
loss curve (100 points) and its plateau. The models are not stored (data/ has no room for 60 more). The file is
rewritten after every target (``complete`` false until the last), so a stopped job leaves what it measured.

Run from the repository root, one seed per job: ``.venv/bin/python data/15_explainability_vector/make_relatedness.py
--seeds 0`` (about 25 minutes on one core: 20 targets of ~75 s). ``--tiny``: a tiny θ0 and source pair trained
live, two targets, a few steps, into a temporary folder.
"""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path

import torch

from helpers import checkpoints, repro, scripts, train
from helpers import explainability_vector as ev

SLUG = "15_explainability_vector"
HERE = Path(__file__).resolve()
SOURCES = [HERE, Path(ev.__file__).resolve(), Path(repro.__file__).resolve(), Path(train.__file__).resolve()]
HISTORY_POINTS = 100  # points stored per loss curve, as make_models.py stores them


def tiny(name: str) -> dict:
    cfg = ev.checkpoint_config(name)
    base = ev.checkpoint_config("models_r4")
    base.update(n_train=16, n_pretrain=16, batch_size=4, pretrain_steps=2, source_steps=2, target_steps=2,
                seeds=[0], targets=[], target_recipe={}, model=dict(base["model"], d_model=8, depth=1, n_head=2,
                                                                    stem=4))
    cfg.update(models=None, base=base, model=base["model"], n_train=16, batch_size=4, target_steps=2, n_eval=8,
               n_test=8, seeds=[0], targets=cfg["targets"][:2])
    return cfg


def base_models(cfg: dict, seed: int, root: Path | None = None) -> tuple[dict, dict, float]:
    """The seed's θ0 and τ, and the worst plateau of its θ0 and source-pair loss curves (registered reading); the
    models are read from data root ``root`` when they are there (``make data ... DATA=dir`` builds them there
    first), else from the default data root."""
    c = cfg["conditions"]
    if cfg["models"] is None:  # tiny: trained live
        states, history, _ = ev.train_all(dict(cfg["base"], seeds=[seed]), n_eval=cfg["n_eval"], log=None)
        history = {k: checkpoints.subsample(v, HISTORY_POINTS) for k, v in history.items()}
    else:
        mcfg = ev.checkpoint_config(cfg["models"])
        if root is not None and checkpoints.paths(SLUG, cfg["models"], root)[1].is_file():
            mcfg = json.loads(checkpoints.paths(SLUG, cfg["models"], root)[1].read_text())["config"]
        else:
            root = None
        ckpt = checkpoints.load(SLUG, cfg["models"], config=mcfg, root=root)
        checkpoints.require_seeds(ckpt, [seed])
        states, history = ev.unpack_states(ckpt.tensors), ckpt.manifest["history"]
    theta0 = states[f"s{seed}/theta0"]
    tau = ev.task_vector(states[f"s{seed}/source_se"], states[f"s{seed}/source_pred"])
    plat = max(train.plateau(history[f"loss/s{seed}/{k}"], c["plateau_frac"], atol=c["plateau_atol"])
               for k in ("theta0", "source_pred", "source_se"))
    return theta0, tau, float(plat)


def run(seed: int, cfg: dict, out: Path | None) -> Path:
    """Every target of ``cfg`` at ``seed``, written (after each target) as ``<out>/<slug>/relatedness_s<seed>.json``."""
    t0 = time.time()
    path = scripts.data_root(out) / SLUG / f"relatedness_s{seed}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    theta0, tau, base_plateau = base_models(cfg, seed, out)
    c = cfg["conditions"]
    with torch.no_grad():
        m0 = ev.TinyViT(**cfg["model"])
        m0.load_state_dict(theta0)
        h_src = m0.eval().tokens(ev.make_domain("source", cfg["n_test"], cfg["test_seed"],
                                                aspect=cfg["aspect"]).images)[:, 0]
    targets = {}
    for name in cfg["targets"]:
        t1 = time.time()
        run_cfg = dict(model=cfg["model"], n_train=cfg["n_train"], batch_size=cfg["batch_size"],
                       target_steps=cfg["target_steps"], target_lr=cfg["target_lr"], ft_lr=cfg["target_lr"],
                       data_seed=cfg["data_seed"], aspect=cfg["aspect"], seeds=[seed], targets=[name],
                       oracle_seeds=[], target_recipe={}, target_only="all")
        states, history, metrics = ev.train_all(run_cfg, theta0={seed: theta0}, n_eval=cfg["n_eval"],
                                                log=lambda m: print(m, flush=True))
        tag = f"s{seed}/T/{ev.key(name)}"
        curve = checkpoints.subsample(history[f"loss/{tag}"], HISTORY_POINTS)
        rec = ev.single_factor_record(theta0, tau, states[tag], name, cfg, h_src)
        rec.update(acc_held_out=metrics[f"acc/{tag}"], curve=curve["value"],
                   plateau=train.plateau(curve, c["plateau_frac"], atol=c["plateau_atol"]))
        targets[name] = rec
        print(f"{name}: gain {rec['gain']:+.3f}, relatedness {rec['relatedness']:.4f}, acc_T {rec['acc_T']:.3f} "
              f"({time.time() - t1:.0f} s)", flush=True)
        body = dict(
            what=f"round 6 registered run (issue #73): single-factor targets, seed {seed}",
            registered="helpers.explainability_vector.checkpoint_config('relatedness') (committed before the run)",
            config=cfg, seed=seed, base_plateau=base_plateau, targets=targets,
            complete=len(targets) == len(cfg["targets"]), wall_seconds=round(time.time() - t0, 1),
            machine=dict(cores=os.cpu_count(), torch_threads=torch.get_num_threads(), torch=torch.__version__,
                         python=platform.python_version(), platform=platform.platform(terse=True)),
            source=checkpoints.source_hash(SOURCES))
        path.write_text(json.dumps(checkpoints.normalize(body), indent=1, default=float) + "\n")
    return path


def build(cfg: dict, out: Path | None, args) -> list[Path]:
    return [run(s, out=out, cfg=cfg) for s in cfg["seeds"]]


def main(argv: list[str] | None = None) -> list[Path]:
    return scripts.script_main(build, config=ev.checkpoint_config, tiny=tiny, names=["relatedness"], doc=__doc__,
                               argv=argv)


if __name__ == "__main__":
    main()
