"""Train the basis networks of chapter 09_transolver_gmsfem, which do not fit its 5-minute default run, and write
them with :mod:`helpers.checkpoints`:

* ``basis``: one Transolver per seed (0, 1, 2) mapping a coarse neighbourhood's point cloud to its ``n_bf`` local
  eigenfunctions, trained with the gap-cut nested subspace loss plus the energy-aware loss
  (:func:`helpers.transolver_gmsfem.basis_loss`) on every neighbourhood of 100 training coefficient fields, with
  8-fold symmetry augmentation; tensors ``basis/<seed>.<param>``. The manifest stores the loss curves and the test
  losses on the chapter's three in-distribution test fields (seeds 0, 1, 2 of ``kappa_field``).
* ``basis_long``: seed 0's network trained the same way for twice the steps (8 000, the cosine schedule
  re-fitted to that length, test losses 20 times), to see whether the test curves reach a plateau; stored as
  int8.

Run from the repository root: ``.venv/bin/python data/09_transolver_gmsfem/make_basis.py --name basis_long`` (or
``make data NB=09_transolver_gmsfem``). ``--tiny`` trains a tiny config for a few steps into a temporary folder
(seconds; what the tests run); ``--seeds``/``--out``: other seeds into another data root.
One torch thread: the same seed on the same machine writes byte-identical weights.
"""

from __future__ import annotations

import copy
import time
from pathlib import Path

from threadpoolctl import threadpool_limits

from helpers import checkpoints, scripts
from helpers import transolver_gmsfem as tg

SLUG = tg.CHECKPOINT_SLUG
HERE = Path(__file__).resolve()
SOURCES = [HERE, Path(tg.__file__).resolve()]


def tiny(name: str = "basis") -> dict:
    cfg = copy.deepcopy(tg.checkpoint_config(name))
    cfg.update(n_fine=16, n_coarse=4, n_bf=2, fields=1, dim=16, layers=1, slices=4, steps=3, batch=4, seeds=[0])
    return cfg


def make_basis(cfg: dict, out: Path | None, args: object = None) -> Path:
    t0 = time.time()
    mesh = tg.structured_mesh(cfg["n_fine"])

    def fields(seeds: range) -> list[dict]:
        return [tg.field_setup(tg.kappa_field(i, n_pix=cfg["n_fine"]), mesh, cfg["n_coarse"]) for i in seeds]

    with threadpool_limits(1):
        train_set = tg.basis_dataset(fields(range(cfg["field_seed0"], cfg["field_seed0"] + cfg["fields"])),
                                     cfg["n_bf"], cfg["n_coarse"], cfg["rel_gap"])
        test_set = tg.basis_dataset(fields(range(3 if cfg["fields"] > 1 else 1)), cfg["n_bf"], cfg["n_coarse"],
                                    cfg["rel_gap"])
    print(f"{len(train_set['feats'])} training patches, {len(test_set['feats'])} test patches "
          f"({time.time() - t0:.0f} s)", flush=True)
    tensors, history, metrics = {}, {}, {}
    for s in cfg["seeds"]:
        model, hist = tg.train_basis(cfg, train_set, s, test=test_set)
        for k, v in model.state_dict().items():
            tensors[f"basis/{s}.{k}"] = v.detach().clone()
        history[f"loss/{s}"] = hist.loss
        for key in ("test_sal", "test_energy"):
            history[f"{key}/{s}"] = hist.evals[key]
            metrics[f"{key}/{s}"] = hist.evals[key][-1][1]
        metrics[f"params/{s}"] = sum(p.numel() for p in model.parameters())
        print(f"seed {s}: loss {hist.loss[-1]:.3f}, test sin^2 {metrics[f'test_sal/{s}']:.3f}, "
              f"test energy {metrics[f'test_energy/{s}']:.3f} ({time.time() - t0:.0f} s)", flush=True)
    name = getattr(args, "name", "basis")

    def save() -> Path:
        return checkpoints.save(SLUG, name, tensors, config=cfg, metrics=metrics, history=history,
                                seed=cfg["seeds"], steps=cfg["steps"], wall_seconds=time.time() - t0,
                                sources=SOURCES, module="helpers.transolver_gmsfem", root=out,
                                quantize="int8" if name == "basis_long" else None)

    if name != "basis_long":
        return save()
    save()  # then the test losses of the weights as stored (int8), what the chapter loads
    ckpt = checkpoints.load(SLUG, name, config=cfg, root=out)
    for s in cfg["seeds"]:
        net = ckpt.load_into(tg.make_basis_net(cfg), prefix=f"basis/{s}.")
        metrics.update({f"{k}_int8/{s}": v for k, v in tg.basis_test_losses(net, test_set).items()})
    print("int8 weights:", {k: round(v, 4) for k, v in metrics.items() if "int8" in k}, flush=True)
    return save()


def main(argv: list[str] | None = None) -> list[Path]:
    return scripts.script_main(make_basis, config=tg.checkpoint_config, tiny=tiny, names=["basis", "basis_long"], doc=__doc__,
                               argv=argv)


if __name__ == "__main__":
    main()
