"""Precompute the faithfulness table of chapter 15_explainability_vector (its section 4), the part of the default run
that does not fit its time budget, and write it with :mod:`helpers.checkpoints`:

* ``faithfulness``: for each seed and target of the stored models checkpoint (``cfg['models']``), :func:`ev.faithfulness` on the
  first ``n_shap`` test images (``ev.make_domain(target, n_test, test_seed)``): every map (θ_T's own, gradient x
  input on θ_T and on θ_T + λτ, the transferred map, Kernel SHAP with ``n_coalitions`` coalitions on θ_T + λτ, a
  random map) with its patch AUROC and deletion / insertion AUCs under the mean, blurred and ROAD fills. The table
  is stored as one float32 tensor (rows: seed x target x map, in the order of ``extra.index``; columns
  ``extra.columns``); Kernel SHAP's CPU seconds, which vary from run to run, go to the manifest's metrics. The
  manifest records the sha256 of the models' weights it was computed from; the notebook reads the table, recomputes
  some of its rows live and checks they agree.

Run from the repository root: ``.venv/bin/python data/15_explainability_vector/make_shap_table.py`` (or ``make data
NB=15_explainability_vector``, which runs it after make_models.py: the scripts run in the order of their names),
about 3 minutes on one core. The models are read from the data root the table is written to (``--out``) when they
are there (``make data DATA=dir`` trains them there first), else from the default one; ``--seeds`` reads the models
of those seeds. ``--tiny``: one seed and target,
a few images and coalitions, into a temporary folder (seconds).
"""

from __future__ import annotations

import time
from pathlib import Path

import torch

from helpers import checkpoints, repro, scripts
from helpers import explainability_vector as ev

SLUG = "15_explainability_vector"
HERE = Path(__file__).resolve()
SOURCES = [HERE, Path(ev.__file__).resolve(), Path(repro.__file__).resolve()]
COLUMNS = [c for c in ev.FAITH_COLUMNS if c != "cpu_s"]  # cpu_s varies by run: metrics, not the tensor


def table(cfg: dict, root: Path | None = None, log=print) -> tuple[list[list], torch.Tensor, dict[str, float], str]:
    """The faithfulness rows of every seed and target of ``cfg`` from the models under data root ``root``: (index
    [seed, target, map], table (rows, columns), Kernel SHAP's CPU seconds per seed/target, the models' sha256)."""
    mcfg = ev.checkpoint_config(cfg["models"])
    if cfg["seeds"] != mcfg["seeds"][:len(cfg["seeds"])]:  # --seeds: the models of those seeds
        mcfg = scripts.with_seeds(mcfg, cfg["seeds"])
    ckpt = checkpoints.load(SLUG, cfg["models"], config=mcfg, root=root)
    checkpoints.require_seeds(ckpt, cfg["seeds"])
    states = ev.unpack_states(ckpt.tensors)

    def model(sd: dict) -> torch.nn.Module:
        m = ev.TinyViT(**mcfg["model"])
        m.load_state_dict(sd)
        return m.eval()

    index, rows, cpu, t0 = [], [], {}, time.time()
    for t in cfg["targets"]:
        dom = ev.make_domain(t, cfg["n_test"], cfg["test_seed"], aspect=mcfg.get("aspect", "keep"))
        for s in cfg["seeds"]:
            sd = states[f"s{s}/T/{ev.key(t)}"]
            tau = ev.task_vector(states[f"s{s}/source_se"], states[f"s{s}/source_pred"])
            out, _ = ev.faithfulness(model(sd), model(ev.add_vector(sd, tau, cfg["lam"])), dom, cfg["n_shap"],
                                     cfg["n_coalitions"], s)
            for r in out:
                index.append([s, t, r["map"]])
                rows.append([float(r[c]) for c in COLUMNS])
            cpu[f"shap_cpu_s/s{s}/{ev.key(t)}"] = next(r["cpu_s"] for r in out if r["map"] == "Kernel SHAP")
            log(f"seed {s}, {t}: done ({time.time() - t0:.0f} s)")
    return index, torch.tensor(rows, dtype=torch.float32), cpu, ckpt.manifest["weights"]["sha256"]


def build(cfg: dict, out: Path | None, args) -> Path:
    t0 = time.time()
    repro.set_threads(1)
    here = out is not None and checkpoints.paths(SLUG, cfg["models"], out)[1].is_file()
    index, tab, cpu, sha = table(cfg, out if here else None, log=lambda m: print(m, flush=True))
    return checkpoints.save(SLUG, args.name, {"table": tab}, config=cfg,
                            metrics={"models_weights_sha256": sha, "rows": len(index), **cpu},
                            seed=list(cfg["seeds"]), wall_seconds=time.time() - t0, sources=SOURCES,
                            module="helpers.explainability_vector", root=out,
                            extra={"columns": COLUMNS, "index": index})


def tiny(name: str) -> dict:
    cfg = ev.checkpoint_config(name)
    cfg.update(n_test=20, n_shap=3, n_coalitions=6, seeds=[0], targets=cfg["targets"][:1])
    return cfg


def main(argv: list[str] | None = None) -> list[Path]:
    return scripts.script_main(build, config=ev.checkpoint_config, tiny=tiny, names=["faithfulness"], doc=__doc__,
                               argv=argv)


if __name__ == "__main__":
    main()
