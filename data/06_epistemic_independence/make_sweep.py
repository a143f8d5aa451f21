"""Round 5 of chapter 06_epistemic_independence (issue #64): the beta sweep and the forgetting fix, registered in
``helpers.epistemic_independence`` (``BETA_SWEEP``, ``SWEEP_READINGS``, ``FORGETTING_READING``, ``ANCHOR``) and
committed before any of these runs. Records, not weights: one JSON file per run.

* ``--beta B`` (B in ``ei.BETA_SWEEP`` = 0.02, 0.2, 1.0): the three RL arms (accuracy reward on adversarial-only
  cues, accuracy reward on balanced cues, EIT; the SFT-debias arm has no KL term, so beta does not touch it) for
  the ten RL seeds of ``ei.arms_config`` with KL weight ``B``, everything else as ``arms_config``; writes
  ``beta_sweep_<B>.json``. At B = ``ei.BETA`` (1.0) this repeats the stored ``arms`` run, and the record counts
  the items whose answers differ from the stored ones (0 on the machine that made them).
* ``--anchor``: the registered forgetting fix, the two balanced arms at ``ei.BETA`` with ``ei.ANCHOR``'s anchor
  term (KL to the base judge on extra uncued prompts of the training subjects); writes ``anchor_fix.json``.

Every record holds, per arm and seed, the accuracy on every evaluation cell (all items), the forgetting
measurement ``ei.forgetting_shift`` on the held-out no-cue cell against the seed's base judge, the mean of
``rewards_differ`` over the run, and, per arm, the training curves' mean over the seeds (sampled accuracy); the
base judges' cell accuracies; the paired EIT - accuracy differences per seed and ``ei.cluster_interval``.

Run from the repository root, one run per job: ``.venv/bin/python data/06_epistemic_independence/make_sweep.py
--beta 0.2`` (about 10 minutes on one core); with no flag every run in turn (``make data`` does this, after
``make_base.py`` and ``make_rl_arms.py``). ``--tiny``: two seeds, three steps, into a temporary folder.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from helpers import checkpoints, scripts
from helpers import epistemic_independence as ei

SLUG = ei.CHECKPOINT_SLUG
HERE = Path(__file__).resolve()
SOURCES = [HERE, Path(ei.__file__).resolve()]  # the files its records hash
RL_ARMS = ("RL acc, adversarial-only", "RL acc, balanced", "EIT")


def cell_name(cell: tuple) -> str:
    return " | ".join(cell)


def run(beta: float | None, anchor: bool, seeds: list[int], out: Path | None, tiny: bool) -> Path:
    torch.set_num_threads(1)
    t0 = time.time()
    cfg = ei.arms_config(seeds)
    if tiny:
        cfg.update(steps=3, batch=8, n_replay=2, G=4, eval_n=20)
    arms = ei.ANCHOR["arms"] if anchor else RL_ARMS
    cfg["beta"] = ei.ANCHOR["beta"] if anchor else beta
    extra = {k: ei.ANCHOR[k] for k in ("n_anchor", "beta_anchor", "anchor_subjects")} if anchor else {}
    bcfg = scripts.with_seeds(ei.checkpoint_config("base"), cfg["base_seeds"])
    if tiny:
        bases = {b: ei.make_judge(dict(n_layer=1, n_head=2, d_model=16), b).eval() for b in cfg["base_seeds"]}
    else:
        ck = checkpoints.load(SLUG, "base", config=bcfg, root=out)
        bases = {b: ck.load_into(ei.make_judge(bcfg["small"], b), prefix=f"small/{b}.").eval()
                 for b in cfg["base_seeds"]}
    stored = None
    if not anchor and not tiny and beta == ei.BETA:
        try:
            stored = checkpoints.load(SLUG, "arms", config=ei.arms_config(seeds), root=out)
        except (checkpoints.CheckpointError, OSError) as e:
            print(f"no stored arms to compare with ({e})")
    sets = ei.chapter_eval_sets(cfg["eval_seed"], cfg["eval_n"], cfg["n_options"], cfg["p_hidden"])
    cells = list(sets)
    ho = ei.FORGETTING_READING["cell"]
    ho_set = sets[ho]

    @torch.no_grad()
    def probs(m: torch.nn.Module) -> np.ndarray:
        return torch.softmax(ei.answer_logits(m, ho_set.x), -1).numpy()

    base_acc, base_p = {}, {}
    for b, m in bases.items():
        ans = ei.answers_by_cell(m, sets)
        base_acc[b] = {cell_name(c): float((ans[c] == sets[c].truth).mean()) for c in cells}
        base_p[b] = probs(m)
    kw = {k: cfg[k] for k in ("steps", "batch", "n_replay", "G", "lr", "beta", "n_options", "mode", "p_hidden")}
    per = {a: {} for a in arms}
    curves = {a: [] for a in arms}
    mismatched = 0
    adv = ("train subjects", "bandwagon", "adversarial")
    for k, s in enumerate(seeds):
        b = cfg["base_seeds"][k % len(cfg["base_seeds"])]
        correct = {}
        for a in arms:
            model, log, _, _ = ei.train_arm(bases[b], a, s, **kw, **extra)
            ans = ei.answers_by_cell(model, sets)
            if stored is not None:
                i = cfg["arms"].index(a)
                for j, c in enumerate(cells):
                    want = ei.unpack_answers(stored.tensors[f"ans/{i}/{s}/{j}"].numpy(), len(sets[c]))
                    mismatched += int((want != ans[c]).sum())
            correct[a] = ans[adv] == sets[adv].truth
            per[a][s] = dict(
                base=b, acc={cell_name(c): float((ans[c] == sets[c].truth).mean()) for c in cells},
                forgetting=ei.forgetting_shift(base_p[b], probs(model), ho_set.truth,
                                               ei.FORGETTING_READING["tie"], ei.FORGETTING_READING["ratio"]),
                rewards_differ=float(np.mean([r["rewards_differ"] for r in log])),
                anchor_kl=float(np.mean([r.get("anchor_kl", 0.0) for r in log])))
            curves[a].append([r["accuracy"] for r in log])
        if "EIT" in arms and "RL acc, balanced" in arms:
            per["EIT"][s]["paired_vs_accuracy"] = ei.paired_bootstrap_diff(correct["EIT"],
                                                                           correct["RL acc, balanced"])
        print(f"beta {cfg['beta']:g}{' + anchor' if anchor else ''}, seed {s}: adversarial "
              + ", ".join(f"{a} {correct[a].mean():.3f}" for a in arms)
              + f"; held-out no cue EIT - base {per['EIT'][s]['acc'][cell_name(ho)] - base_acc[b][cell_name(ho)]:+.3f}"
              + f" ({time.time() - t0:.0f} s)", flush=True)
    diffs = [per["EIT"][s]["paired_vs_accuracy"][0] for s in seeds]
    clusters = [per["EIT"][s]["base"] for s in seeds]
    iv = ei.cluster_interval(diffs, clusters) if len(set(clusters)) > 1 else (float(np.mean(diffs)),) * 3
    differ_ok = all(per["EIT"][s]["rewards_differ"] >= cfg["rewards_differ_bar"] for s in seeds)
    rec = dict(
        what=("round 5 registered run (issue #64): " + (
            "the forgetting fix ei.ANCHOR" if anchor else f"the beta sweep at beta = {beta:g}")),
        registered="ei.BETA_SWEEP, ei.SWEEP_READINGS, ei.FORGETTING_READING, ei.ANCHOR (committed before the run)",
        config=checkpoints.normalize(cfg | {"arms": list(arms)} | extra), beta=cfg["beta"], anchor=anchor,
        seeds=seeds, base_acc={str(b): v for b, v in base_acc.items()},
        arms={a: {str(s): v for s, v in d.items()} for a, d in per.items()},
        curves={a: np.mean(v, 0).round(4).tolist() for a, v in curves.items()},
        eit_vs_accuracy_reward=dict(per_seed=diffs, mean=iv[0], low=iv[1], high=iv[2],
                                    rewards_differ_met=differ_ok,
                                    held=bool(iv[1] > 0 and differ_ok)),
        stored_answers_mismatched=None if stored is None else mismatched,
        wall_seconds=round(time.time() - t0, 1),
        machine=dict(cores=os.cpu_count(), torch_threads=torch.get_num_threads(), torch=torch.__version__,
                     python=platform.python_version(), platform=platform.platform(terse=True)),
        source=checkpoints.source_hash(SOURCES),
    )
    root = Path(tempfile.mkdtemp()) if tiny and out is None else (out or checkpoints.data_dir())
    path = Path(root) / SLUG / ("anchor_fix.json" if anchor else f"beta_sweep_{beta:g}.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rec, indent=1, default=float) + "\n")
    print(f"wrote {path} ({rec['wall_seconds']} s)")
    return path


def main(argv: list[str] | None = None) -> list[Path]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--beta", type=float, choices=ei.BETA_SWEEP)
    p.add_argument("--anchor", action="store_true")
    p.add_argument("--seeds", type=int, nargs="+", default=list(range(10)))
    p.add_argument("--out", type=Path)
    p.add_argument("--tiny", action="store_true")
    a = p.parse_args(argv)
    if a.tiny:
        a.seeds = a.seeds[:2]
    jobs = ([(a.beta, False)] if a.beta is not None else []) + ([(None, True)] if a.anchor else [])
    if not jobs:
        jobs = [(b, False) for b in ei.BETA_SWEEP] + [(None, True)]
    return [run(b, anc, a.seeds, a.out, a.tiny) for b, anc in jobs]


if __name__ == "__main__":
    main()
