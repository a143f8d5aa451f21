"""Train the offset-recall arms of chapter 04_tree_rope (NoPE, RoPE, RoPE + skips, RoPE + OPT offsets, TPE, TPE +
OPT x 3 seeds) at length 32, evaluate them to 2048 (64x) on fixed held-out windows, and write
``data/04_tree_rope/<name>.safetensors`` + ``<name>.json`` with :mod:`helpers.checkpoints`
(``tr.checkpoint_config(name)``: the answer is the token right after a key, so the task needs the order).
``--name recall`` (default): round 4, one key, d = 32; ``--name recall2``: round 5, two keys, d = 64, records
only (no weights), plus the dilution control of ``tr.dilution_tasks`` and the query's attention on the answer
(``tr.query_attention``) at the training length, the longest length and each control condition.

The weights of the first seed are stored (int8); every seed's evaluation is stored as measurements (per window:
correct or not, loss). ``--parts DIR`` keeps each seed's results, so that each seed can be its own job
(``--seeds S --parts DIR --out /tmp/x``) and the checkpoint is merged at the end (``--parts DIR``). Run from the
repository root: ``.venv/bin/python data/04_tree_rope/make_recall.py``; ``--tiny`` trains a tiny config for a few
steps into a temporary folder (seconds). One torch thread: the same seed on the same machine gives the same weights.
"""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path

import torch

from helpers import checkpoints, repro, scripts, train
from helpers import tree_rope as tr

SLUG = "04_tree_rope"
HERE = Path(__file__).resolve()
SOURCES = [HERE, Path(tr.__file__).resolve(), Path(repro.__file__).resolve(), Path(train.__file__).resolve()]


def tiny_config(name: str) -> dict:
    cfg = copy.deepcopy(tr.checkpoint_config(name))
    cfg.update(d_model=16, n_layer=1, batch_size=8, steps=6, warmup=2, val_every=3, val_windows=8, target_len=256)
    cfg["eval"] = dict(cfg["eval"], lengths=[32, 128], windows=4)
    if "control" in cfg["eval"]:
        cfg["eval"]["control"] = dict(shifts=[48, 96], prefix_len=128, attention_windows=2)
    return cfg


def train_seed(cfg: dict, s: int, val: dict, tests: dict) -> dict:
    """One seed's arms: weights (float16), per-window evaluation, curves, metrics, seconds."""
    out = dict(tensors={}, history={}, metrics={}, timing={})
    for arm, spec in cfg["arms"].items():
        t_arm, key = time.time(), f"{arm}/{s}"
        model, hist = tr.fit_retrieval_arm(spec, cfg, s, val, desc=f"{arm} / seed {s}")
        sd = {k: v.half() for k, v in model.state_dict().items()}
        out["tensors"].update({f"{key}.{k}": v for k, v in sd.items()})
        # evaluate exactly the weights that are stored: float16, large matrices int8 per row
        model.load_state_dict({k: v.float() for k, v in checkpoints.int8_roundtrip(sd).items()})
        acc = {}
        for n, task in tests.items():
            hit, loss = tr.retrieval_scores(model, task, chunk=8)
            out["tensors"][f"{key}.eval_correct_{n}"] = hit[:, 0].to(torch.uint8)  # 1-D: never quantized
            out["tensors"][f"{key}.eval_loss_{n}"] = loss[:, 0]
            acc[str(n)] = float(hit.float().mean())
        if "control" in cfg["eval"]:
            acc.update(control(model, cfg, tests, key, out["tensors"]))
        for c in ("val_loss", "val_acc"):
            out["history"][f"{key}/{c}"] = hist.evals[c]
        out["metrics"][key] = dict(final_val_loss=hist.evals["val_loss"][-1][1],
                                   final_val_acc=hist.evals["val_acc"][-1][1],
                                   plateau=train.plateau([v for _, v in hist.evals["val_loss"]]), accuracy=acc)
        out["timing"][key] = round(time.time() - t_arm, 1)
        print(f"{key}: val acc {out['metrics'][key]['final_val_acc']:.3f} plateau "
              f"{out['metrics'][key]['plateau']:.4f} acc {acc} ({out['timing'][key]} s)", flush=True)
    return out


def control(model, cfg: dict, tests: dict, key: str, tensors: dict) -> dict:
    """The dilution control (registered in ``tr._recall2_config``): per-window correctness of each condition, and
    the query's attention (per layer, on the key and on the answer) on the first windows of the training
    length, the longest length and each condition. Returns the accuracies by condition."""
    acc, far, n = {}, max(tests), cfg["train_len"]
    conds = dict(tr.dilution_tasks(cfg))
    for c, (task, pos) in conds.items():
        hit, _ = tr.retrieval_scores(model, task, chunk=8, pos=pos)
        tensors[f"{key}.eval_correct_{c.replace(' ', '')}"] = hit[:, 0].to(torch.uint8)
        acc[c] = float(hit.float().mean())
    conds.update({f"length {n}": (tests[n], None), f"length {far}": (tests[far], None)})
    for c, (task, pos) in conds.items():
        att = tr.query_attention(model, task, gap=cfg["task"]["gap"], pos=pos,
                                 n_windows=cfg["eval"]["control"]["attention_windows"])
        for i in range(att.shape[1]):
            for j, what in enumerate(("key", "answer")):  # 1-D float16: never quantized
                tensors[f"{key}.eval_att_{what}_{c.replace(' ', '')}_l{i + 1}"] = torch.as_tensor(att[:, i, j])
    return acc


def check_chosen(cfg: dict) -> None:
    """Refuse to train a config other than the one the probe's registered rule chose (probe_recall_C.json)."""
    path = HERE.parent / "probe_recall_C.json"
    if not path.exists():
        raise SystemExit(f"{path} is missing: the probe's rule has not chosen the recall recipe yet")
    chosen = json.loads(path.read_text())["chosen"]
    if cfg["task"] != chosen["task"] or any(cfg[k] != v for k, v in chosen["change"].items()):
        raise SystemExit(f"the recall config {cfg['task']}, d_model {cfg['d_model']}, {cfg['steps']} steps is "
                         f"not the recipe the probe's rule chose: {chosen}")


def build(cfg: dict, out: Path | None, args) -> Path:
    # recall2: flush subnormal floats to zero (FTZ/DAZ): once a model's attention is sharp, subnormal products make
    # the CPU's matrix kernels several times slower (round 5's seed 0 fell from ~20 to ~4 steps/s); it changes
    # values below ~1e-38 only. recall (round 4) was trained without it and rebuilds as it was. The state found on
    # entry is restored when the build ends (process-wide CPU state; a test runs this script in-process).
    with tr.flush_denormal(args.name == "recall2"):
        return _build(cfg, out, args)


def _build(cfg: dict, out: Path | None, args) -> Path:
    t0 = time.time()
    if not args.tiny and args.name == "recall":
        check_chosen(cfg)
    val, tests = tr.retrieval_windows(cfg)
    key = scripts.part_key({k: v for k, v in cfg.items() if k != "weight_seeds"})
    tensors, history, metrics, timing, reused = {}, {}, {}, {}, []
    for s in cfg["seeds"]:
        res, was = scripts.seed_part(args.parts, s, key, lambda s=s: train_seed(cfg, s, val, tests))
        reused += [s] if was else []
        keep = s in cfg["weight_seeds"]
        tensors.update({k: v for k, v in res["tensors"].items() if keep or ".eval_" in k})
        history.update(res["history"])
        metrics.update({k: dict(m, weights_stored=keep) for k, m in res["metrics"].items()})
        timing.update(res["timing"])
    path = checkpoints.save(
        SLUG, args.name, tensors, config=cfg, metrics=metrics, history=history, seed=cfg["seeds"],
        steps=cfg["steps"], wall_seconds=sum(timing.values()) if reused else time.time() - t0, sources=SOURCES,
        module="helpers.tree_rope", extra=dict(seconds_per_run=timing, tiny=args.tiny, seeds_from_parts=reused),
        root=out, dtype=torch.float16, quantize="int8")
    print(f"wrote {path} ({path.with_suffix('.safetensors').stat().st_size / 2**10:.0f} kB) in "
          f"{time.time() - t0:.0f} s", flush=True)
    return path


def options(ap) -> None:
    ap.add_argument("--parts", type=Path, default=None,
                    help="keep each seed's results in DIR/seed<S>.pt (one job per seed: --seeds S --parts DIR "
                         "--out /tmp/x), then merge with --parts DIR")


def main(argv: list[str] | None = None) -> list[Path]:
    return scripts.script_main(build, config=tr.checkpoint_config, tiny=tiny_config, names=["recall", "recall2"],
                               doc=__doc__, options=options, argv=argv)


if __name__ == "__main__":
    main()
