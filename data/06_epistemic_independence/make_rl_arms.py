"""Train the four arms of chapter 06_epistemic_independence for ten RL seeds, which do not fit its 5-minute default
run, and store what the notebook reads (:mod:`helpers.checkpoints`):

* ``arms``: for every RL seed (``ei.arms_config``) and arm (``ei.ARMS``: SFT-debias, accuracy reward on
  adversarial-only cues, accuracy reward on balanced cues, EIT), trained from the base judge of checkpoint
  ``base`` with ``ei.train_arm`` (GRPO, common random numbers across arms), the greedy answers on every cell of
  ``ei.chapter_eval_sets`` (tensors ``ans/<arm index>/<seed>/<cell index>``, four answers to a byte:
  ``ei.pack_answers``; the base judges are evaluated by the notebook itself) and the per-step training statistics (``curve/<arm index>/<seed>/<stat>``:
  sampled accuracy, cue-following (-1 at a step without an adversarial item), informative-group share, share of
  groups whose EIT and accuracy advantages differ: condition ``rewards_differ``). The metrics record how many (seed, step) pairs the
  arms with one data rule did not share a batch at, and how many tokens of other cue families or held-out
  subjects EIT's training data held (both must be 0). The models themselves are not stored: the notebook retrains
  its own seed's arms live and checks that they give the stored answers.

The forgetting rule (round 4), registered in ``ei.arms_config`` and committed before this script was rerun with it:
every RL arm of every seed trains with the KL weight ``beta`` = ``ei.BETA`` = 1.0 to its base judge (the arms
before it had ``ei.BETA_BEFORE`` = 0.02; their claims are kept in ``earlier_attempt.json``). Nothing else changed.

Run from the repository root: ``.venv/bin/python data/06_epistemic_independence/make_rl_arms.py`` (or
``make data NB=06_epistemic_independence``), after ``make_base.py`` (``make data`` runs the two in that order). ``--tiny``: a tiny config into a temporary
folder; ``--seeds``/``--out``: other seeds into another data root. One torch thread: the same seed on the same
machine writes byte-identical answers.
"""

from __future__ import annotations

import argparse
import copy
import time
from pathlib import Path

import numpy as np
import torch

from helpers import checkpoints, repro, scripts
from helpers import epistemic_independence as ei

SLUG = ei.CHECKPOINT_SLUG
HERE = Path(__file__).resolve()
SOURCES = [HERE, Path(ei.__file__).resolve(), Path(repro.__file__).resolve()]
STATS = ("accuracy", "follow", "informative", "rewards_differ")


def tiny(name: str = "arms") -> dict:
    cfg = copy.deepcopy(ei.arms_config((0, 1)))
    cfg.update(steps=3, batch=8, n_replay=2, G=4, eval_n=20)
    return cfg


def make_arms(cfg: dict, out: Path | None, tiny_bases: bool = False) -> Path:
    torch.set_num_threads(1)
    t0 = time.time()
    bcfg = scripts.with_seeds(ei.checkpoint_config("base"), cfg["base_seeds"])
    bases = {}
    if tiny_bases:  # the tiny run: untrained stand-ins
        bases = {b: ei.make_judge(dict(n_layer=1, n_head=2, d_model=16), b).eval() for b in cfg["base_seeds"]}
    else:
        ck = checkpoints.load(SLUG, "base", config=bcfg, root=out)
        for b in cfg["base_seeds"]:
            bases[b] = ck.load_into(ei.make_judge(bcfg["small"], b), prefix=f"small/{b}.").eval()
    sets = ei.chapter_eval_sets(cfg["eval_seed"], cfg["eval_n"], cfg["n_options"], cfg["p_hidden"])
    cells = list(sets)
    tensors, metrics = {}, {}
    unpaired, n_ood = 0, 0
    ood_ids = torch.tensor([v for n, v in ei.VOCAB.items()
                            if n.startswith(("<authority", "<distraction", "<elab", "<expert", "<ranked"))]
                           + [ei.VOCAB[f"<subj:{x}>"] for x in ei.HELDOUT_SUBJECTS])
    if cfg.get("p_aligned", ei.P_ALIGNED) != ei.ARMS["EIT"][1]:
        raise ValueError(f"cfg['p_aligned'] {cfg.get('p_aligned')} is not the balanced arms' {ei.ARMS['EIT'][1]}")
    kw = {k: cfg[k] for k in ("steps", "batch", "n_replay", "G", "lr", "beta", "n_options", "mode", "p_hidden")}
    i_eit = cfg["arms"].index("EIT")
    for k, s in enumerate(cfg["seeds"]):
        base = bases[cfg["base_seeds"][k % len(cfg["base_seeds"])]]
        digests = {}
        for i, arm in enumerate(cfg["arms"]):
            model, log, digests[arm], toks = ei.train_arm(base, arm, s, keep_tokens=arm == "EIT", **kw)
            if toks:
                n_ood += int(torch.isin(torch.cat(toks), ood_ids).sum())
            ans = ei.answers_by_cell(model, sets)
            tensors.update({f"ans/{i}/{s}/{j}": torch.from_numpy(ei.pack_answers(ans[c]))
                            for j, c in enumerate(cells)})
            for st in STATS if log else ():
                # a step without an adversarial item has no cue-following rate: stored as -1
                tensors[f"curve/{i}/{s}/{st}"] = torch.tensor(
                    np.nan_to_num([r[st] for r in log], nan=-1.0), dtype=torch.float32)
            adv = sets[("train subjects", "bandwagon", "adversarial")]
            metrics[f"adversarial/{i}/{s}"] = float((ans[("train subjects", "bandwagon", "adversarial")]
                                                     == adv.truth).mean())
            if log:  # condition rewards_differ reads the EIT arm's value (bar: cfg["rewards_differ_bar"])
                metrics[f"rewards_differ/{i}/{s}"] = float(np.mean([r["rewards_differ"] for r in log]))
        for p in sorted({v[1] for v in ei.ARMS.values()}):  # arms with one data rule share batches
            group = {a: d for a, d in digests.items() if ei.ARMS[a][1] == p}
            if len(group) > 1:
                unpaired += ei.unpaired_steps(group, cfg["steps"])
        print(f"seed {s}: adversarial bandwagon accuracy "
              + ", ".join(f"{a} {metrics[f'adversarial/{i}/{s}']:.3f}" for i, a in enumerate(cfg["arms"]))
              + f"; EIT rewards_differ {metrics[f'rewards_differ/{i_eit}/{s}']:.3f}"
              + f" ({time.time() - t0:.0f} s)", flush=True)
    metrics.update(unpaired_steps=unpaired, ood_tokens_in_eit_data=n_ood, cells=len(cells))
    return checkpoints.save(SLUG, "arms", tensors, config=cfg, metrics=metrics, seed=cfg["seeds"],
                            steps=cfg["steps"], wall_seconds=time.time() - t0, sources=SOURCES,
                            module="helpers.epistemic_independence", root=out)


def main(argv: list[str] | None = None) -> list[Path]:
    def build(cfg: dict, out: Path | None, args: argparse.Namespace) -> Path:
        return make_arms(cfg, out, tiny_bases=args.tiny)

    return scripts.script_main(build, config=ei.checkpoint_config, tiny=tiny, names=["arms"], doc=__doc__,
                               argv=argv)


if __name__ == "__main__":
    main()
