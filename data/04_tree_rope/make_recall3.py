"""Round 7's two-key offset-recall checkpoint ``recall3`` of chapter 04_tree_rope (records only, no weights):
``tr.checkpoint_config("recall3")`` = recall2 (two keys, d = 64, 6000 cosine steps, the six arms) with the
recipe that round 7's probe (``probe_recall3.py``) chose by its registered rule, and the **restart rule**
(``tr.restart_chain``): an arm-seed (every arm but NoPE) whose final held-out accuracy is < 0.95 or whose plateau
is > 0.02 is trained again from a new initialisation (``tr.restart_seed``), at most ``restarts["max"]`` times;
the claims read the first attempt that meets both bars, else the last.

An arm whose spec equals recall2's has recall2's stored run as its attempt 0 (the same config, code and seed:
not retrained); the others are trained from attempt 0. Each trained attempt is evaluated exactly as
``make_recall.py`` evaluates a recall2 arm (per-window correctness and loss at every length, the dilution
control and the query's attention) and stored under ``<arm>/<seed>`` (attempt 0) or ``<arm>/<seed>/r<k>``.
``extra["chosen"]``: per arm-seed, the record and key the claims read, and every attempt's bars.

One job per arm-seed chain: ``.venv/bin/python data/04_tree_rope/make_recall3.py --seed S --arms "TPE + OPT"
--parts DIR`` (each attempt is kept in DIR, so a stopped chain resumes); then the merge of the seeds whose every
chain is complete: ``--merge --seeds 1 [0 2] --parts DIR``. ``--tiny``: a tiny config into a temporary folder.
One torch thread.
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import json
import tempfile
import time
from pathlib import Path

import torch

from helpers import checkpoints, repro, scripts, train
from helpers import tree_rope as tr

SLUG, NAME = "04_tree_rope", "recall3"
HERE = Path(__file__).resolve()
_spec = importlib.util.spec_from_file_location("_make_recall", HERE.parent / "make_recall.py")
MR = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(MR)
SOURCES = [HERE, HERE.parent / "make_recall.py", Path(tr.__file__).resolve(), Path(repro.__file__).resolve(),
           Path(train.__file__).resolve()]


def tiny_config() -> dict:
    cfg = MR.tiny_config("recall3")
    cfg["seeds"] = [1]
    return cfg


def attempt_key(arm: str, s: int, r: int) -> str:
    return f"{arm}/{s}" if r == 0 else f"{arm}/{s}/r{r}"


def reused(cfg: dict, arm: str) -> bool:
    """Attempt 0 of ``arm`` is recall2's stored run: its spec and everything else it trained with are recall2's."""
    r2 = tr.checkpoint_config(cfg["first_attempt_from"])
    same = ({k: v for k, v in cfg.items() if k in r2 and k not in ("arms", "seeds")}
            == {k: v for k, v in r2.items() if k not in ("arms", "seeds")})
    return same and r2["arms"].get(arm) == cfg["arms"][arm]


def stored_record(cfg: dict, arm: str, s: int) -> dict:
    man = checkpoints.fetch(SLUG, cfg["first_attempt_from"] + ".json")
    m = json.loads(Path(man).read_text())["metrics"][f"{arm}/{s}"]
    return dict(final_val_acc=m["final_val_acc"], plateau=m["plateau"], record=cfg["first_attempt_from"],
                key=f"{arm}/{s}")


def train_attempt(cfg: dict, arm: str, s: int, r: int, val: dict, tests: dict) -> dict:
    """One attempt, trained and evaluated as make_recall.train_seed does an arm (init under tr.restart_seed)."""
    out = dict(tensors={}, history={}, metrics={}, timing={})
    t0, key, spec = time.time(), attempt_key(arm, s, r), cfg["arms"][arm]
    model, hist = tr.fit_retrieval_arm(spec, cfg, s, val, desc=f"{key}", init_seed=tr.restart_seed(cfg, s, r))
    sd = {k: v.half() for k, v in model.state_dict().items()}
    model.load_state_dict({k: v.float() for k, v in checkpoints.int8_roundtrip(sd).items()})
    acc = {}
    for n, task in tests.items():
        hit, loss = tr.retrieval_scores(model, task, chunk=8)
        out["tensors"][f"{key}.eval_correct_{n}"] = hit[:, 0].to(torch.uint8)
        out["tensors"][f"{key}.eval_loss_{n}"] = loss[:, 0]
        acc[str(n)] = float(hit.float().mean())
    acc.update(MR.control(model, cfg, tests, key, out["tensors"]))
    for c in ("val_loss", "val_acc"):
        out["history"][f"{key}/{c}"] = hist.evals[c]
    out["metrics"][key] = dict(final_val_acc=hist.evals["val_acc"][-1][1], final_val_loss=hist.evals["val_loss"][-1][1],
                               plateau=train.plateau([v for _, v in hist.evals["val_loss"]]), accuracy=acc,
                               attempt=r, init_seed=tr.restart_seed(cfg, s, r), weights_stored=False)
    out["timing"][key] = round(time.time() - t0, 1)
    m = out["metrics"][key]
    print(f"{key}: val acc {m['final_val_acc']:.3f} plateau {m['plateau']:.4f} ({out['timing'][key]} s)", flush=True)
    return out


def stored_attempt(cfg: dict, key: str, root: Path | None) -> dict | None:
    """A trained attempt ``key`` as the stored recall3 checkpoint holds it (same config but the seeds), in the form
    :func:`train_attempt` returns, or None: a later merge (more seeds) after the parts of earlier seeds are gone."""
    try:
        man = checkpoints.load_manifest(SLUG, NAME, root)
    except (checkpoints.CheckpointError, FileNotFoundError):
        return None
    if key not in man["metrics"] or checkpoints.diff_config(dict(cfg, seeds=man["config"]["seeds"]), man["config"]):
        return None
    ck = checkpoints.load(SLUG, NAME, config=man["config"], root=root)
    pre = key + "."
    return dict(tensors={k: v for k, v in ck.tensors.items() if k.startswith(pre)},
                history={k: man["history"][k] for k in (f"{key}/val_loss", f"{key}/val_acc")},
                metrics={key: man["metrics"][key]}, timing={key: man["extra"]["seconds_per_run"][key]})


def chain(cfg: dict, arm: str, s: int, parts: Path, val: dict, tests: dict, train_more: bool = True,
          root: Path | None = None) -> dict:
    """The arm-seed's attempts by the restart rule: ``{"attempts": [bars record...], "read": i, "results": {r:
    trained results}}``; ``train_more=False`` only reads what ``parts`` holds (``read`` None if incomplete)."""
    key = scripts.part_key(cfg, arm=arm)
    recs, results = [], {}
    if arm in cfg["restarts"]["skip"]:
        return dict(attempts=[stored_record(cfg, arm, s)], read=0, results={})
    while True:
        r = len(recs)
        if r == 0 and reused(cfg, arm):
            recs.append(stored_record(cfg, arm, s))
        else:
            path = parts / f"{arm.replace(' ', '_').replace('+', 'p')}_s{s}_r{r}"
            res = None
            if not train_more and not (path / f"seed{s}.pt").exists():
                res = stored_attempt(cfg, attempt_key(arm, s, r), root)
                if res is None:
                    return dict(attempts=recs, read=None, results=results)
            if res is None:
                res, _ = scripts.seed_part(path, s, key, lambda r=r: train_attempt(cfg, arm, s, r, val, tests))
            results[r] = res
            m = res["metrics"][attempt_key(arm, s, r)]
            recs.append(dict(final_val_acc=m["final_val_acc"], plateau=m["plateau"], record=NAME,
                             key=attempt_key(arm, s, r)))
        step = tr.restart_chain(recs, cfg)
        if step["next"] is None:
            return dict(attempts=recs, read=step["read"], results=results)


def build(cfg: dict, args) -> Path | None:
    with tr.flush_denormal(True):  # as recall2 (make_recall.build)
        val, tests = tr.retrieval_windows(cfg)
        parts = Path(args.parts)
        if not args.merge:
            for arm in args.arms:
                c = chain(cfg, arm, args.seed, parts, val, tests)
                print(f"{arm}/{args.seed}: attempts {[(a['final_val_acc'], a['plateau']) for a in c['attempts']]}"
                      f" -> read attempt {c['read']}", flush=True)
            return None
        tensors, history, metrics, timing, chosen, pending = {}, {}, {}, {}, {}, []
        for s in cfg["seeds"]:
            for arm in cfg["arms"]:
                c = chain(cfg, arm, s, parts, val, tests, train_more=False, root=args.out)
                if c["read"] is None and not args.partial:
                    raise SystemExit(f"{arm}/{s}: its chain is not complete in {parts}; run it first")
                if c["read"] is None:  # --partial: the attempts so far, none read
                    pending.append(f"{arm}/{s}")
                    chosen[f"{arm}/{s}"] = dict(attempt=None, attempts=c["attempts"])
                else:
                    chosen[f"{arm}/{s}"] = dict(c["attempts"][c["read"]], attempt=c["read"],
                                                attempts=c["attempts"])
                for res in c["results"].values():
                    tensors.update(res["tensors"])
                    history.update(res["history"])
                    metrics.update(res["metrics"])
                    timing.update(res["timing"])
        path = checkpoints.save(
            SLUG, NAME, tensors, config=cfg, metrics=metrics, history=history, seed=cfg["seeds"],
            steps=cfg["steps"], wall_seconds=sum(timing.values()), sources=SOURCES, module="helpers.tree_rope",
            extra=dict(seconds_per_run=timing, tiny=args.tiny, chosen=chosen, pending=pending), root=args.out,
            dtype=torch.float16,
            quantize="int8")
        print(f"wrote {path} ({path.with_suffix('.safetensors').stat().st_size / 2**10:.0f} kB)", flush=True)
        return path


def main(argv: list[str] | None = None) -> Path | None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=None, help="the seed of the chains to run")
    ap.add_argument("--arms", nargs="+", default=None, help="the arms whose chains to run (default: all)")
    ap.add_argument("--merge", action="store_true", help="merge the complete chains of --seeds into the checkpoint")
    ap.add_argument("--seeds", type=int, nargs="+", default=None, help="the seeds to merge")
    ap.add_argument("--partial", action="store_true",
                    help="merge even where a chain is incomplete: its attempts so far, none read (extra.pending)")
    ap.add_argument("--parts", type=Path, default=None,
                    help="the folder keeping each attempt (required; with --tiny alone: a temporary one)")
    ap.add_argument("--out", type=Path, default=None, help="data root to write into (default: the repository's)")
    ap.add_argument("--tiny", action="store_true")
    args = ap.parse_args(argv)
    repro.set_threads(1)
    cfg = copy.deepcopy(tiny_config() if args.tiny else tr.checkpoint_config("recall3"))
    if args.tiny and args.out is None:
        args.out = Path(tempfile.mkdtemp())
    if args.parts is None:
        if not (args.tiny and args.seed is None and not args.merge):
            ap.error("--parts is required")
        # --tiny alone (the tests): every arm's chain of every tiny seed into a temporary folder, then the merge
        args.parts, args.arms = Path(tempfile.mkdtemp()), list(cfg["arms"])
        for s in cfg["seeds"]:
            args.seed = s
            build(cfg, args)
        args.merge = True
    if args.merge:
        cfg["seeds"] = args.seeds or cfg["seeds"]
    else:
        if args.seed is None:
            ap.error("--seed is required without --merge")
        args.arms = args.arms or list(cfg["arms"])
        unknown = [a for a in args.arms if a not in cfg["arms"]]
        if unknown:
            ap.error(f"unknown arms {unknown}; the config's: {list(cfg['arms'])}")
    return build(cfg, args)


if __name__ == "__main__":
    main()
