"""Diagnosis of case 5 of chapter 05_dsl_harness (structured credit): why every run was censored at 300 steps, and
why reinforcement learning lowered held-out greedy success. Writes ``data/05_dsl_harness/credit_sweep.json``
(summaries and learning curves, no weights), which the notebook shows; it is NOT a checkpoint and is not
hashed by one.

Part A, no training: the checkpoint ``credit``'s policies (warm start and four arms, 3 seeds) greedy-decoded on
the SFT intents, the unlabelled RL pool and the held-out intents (free and constrained decoding), with the gold
program's bits under each policy and its per-token entropy (teacher forcing on held-out gold programs). It was
first run on the first build (100 labelled intents, 300 steps; kept as ``checkpoint_first``) and is rerun on
the current one (``--part-a``, ``checkpoint``).

Part B, a sweep fixed before any of its outcomes were seen (600 REINFORCE steps, everything else as the first
build's config; seeds 0 and 1 were planned, seed 1 was dropped for time on the shared machine before any of
its runs were read, so the sweep has seed 0 only):

* warm start ``w100`` (the checkpoint's: 100 labelled intents, RL pool = the other 200) with ``sparse``,
  ``token_credit`` (penalty 1), ``token_credit`` (penalty 0.25) and the ``oracle`` arm;
* warm start ``w200`` (200 labelled intents, RL pool = the other 100) with ``sparse``, ``token_credit``
  (penalty 1) and ``oracle``.

The ``oracle`` arm is per-token credit at the *first token where the sample departs from the gold program*
(``-penalty`` there, nothing elsewhere) for every failed sample, valid or not; a correct sample is scored as in
sparse. It needs the gold program, which no learner has: it bounds what one-position credit can give. Every run
uses :func:`helpers.dsl_harness.reinforce_agent` itself; the oracle only replaces the advantages it computes.
Each run also counts rewarded samples that are not the gold program (a correct result by another program).

Run: ``.venv/bin/python data/05_dsl_harness/sweep_credit.py [--part-a]`` (one torch thread; part B about
20 minutes on a quiet core).
"""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file

from helpers import dsl_harness as dsl
from helpers import repro

HERE = Path(__file__).resolve().parent
OUT = HERE / "credit_sweep.json"
SEEDS = (0,)
STEPS = 600
GRID = [("w100", "sparse", 1.0), ("w100", "token_credit", 1.0), ("w100", "token_credit", 0.25),
        ("w100", "oracle", 1.0), ("w200", "sparse", 1.0), ("w200", "token_credit", 1.0), ("w200", "oracle", 1.0)]

_ctx: dict = {}
_orig_adv, _orig_pad = dsl.token_advantages, dsl._left_pad


def _pad(intents, index):  # remembers the batch's intents (reinforce_agent pads them first thing each step)
    _ctx["pick"] = list(intents)
    return _orig_pad(intents, index)


def _departure(out, gold):
    for i, (a, b) in enumerate(zip(out, gold)):
        if a != b:
            return i
    return min(len(out), len(gold))  # a prefix of the other: END sampled too early, or not sampled at gold's END


def _adv(programs, success, arm, ended=None, penalty=1.0):
    pick, R = _ctx["pick"], np.asarray(success, float)
    golds = [list(it.program) for it in pick]
    _ctx["rewarded"] += int(R.sum())
    _ctx["spurious"] += sum(int(r == 1 and list(p) != g) for p, r, g in zip(programs, R, golds))
    if not _ctx.get("oracle"):
        return _orig_adv(programs, success, arm, ended, penalty)
    base = _orig_adv(programs, success, "sparse", ended, penalty)
    out = []
    for p, r, g, a in zip(programs, R, golds, base):
        if r == 1:
            out.append(a)
        else:
            z = np.zeros(len(a))
            z[min(_departure(list(p), g), len(a) - 1)] = -penalty
            out.append(z)
    return out


dsl.token_advantages, dsl._left_pad = _adv, _pad


def greedy(model, con, intents, constrained=False):
    return float(np.mean([dsl.agent_answer(model, con, it, "dsl", constrained).success for it in intents]))


@torch.no_grad()
def entropy(model, intents):
    ids, at = dsl.encode(intents, "dsl")
    lp = torch.log_softmax(model(ids[:, :-1]), -1)
    h = -(lp.exp() * lp).sum(-1)
    return float(h[at[:, :-1]].mean())


def evaluate(model, con, sft, pool, test):
    return {"greedy_sft": greedy(model, con, sft), "greedy_pool": greedy(model, con, pool),
            "greedy_test": greedy(model, con, test), "greedy_test_constrained": greedy(model, con, test, True),
            "bits_test": float(dsl.bits_per_intent(model, test, "dsl").mean()),
            "bits_pool": float(dsl.bits_per_intent(model, pool, "dsl").mean()),
            "entropy_test": entropy(model, test)}


def main() -> None:
    import sys

    repro.set_threads(1)
    cfg = dsl.checkpoint_config("credit")
    n_sft = cfg["n_sft"]
    con = dsl.make_database(cfg["db_seed"])
    intents = dsl.make_intents(con, cfg["n_train"] + cfg["n_test"], seed=cfg["intent_seed"])
    train, test = intents[:cfg["n_train"]], intents[cfg["n_train"]:]
    res = json.loads(OUT.read_text()) if OUT.exists() else {}
    res.update(seeds=list(SEEDS), steps=STEPS, grid=[list(g) for g in GRID])
    t0 = time.time()
    if res.get("checkpoint_config") != cfg:  # part A, on the checkpoint of the current config
        if "checkpoint" in res and "checkpoint_first" not in res:
            res["checkpoint_first"] = res.pop("checkpoint")
            res["checkpoint_first_config"] = {**cfg, "n_sft": 100, "rl_steps": 300}
        w = load_file(HERE / "credit.safetensors")
        res["checkpoint"] = {}
        for s in cfg["seeds"]:
            for arm in ("warm", *dsl.CREDIT_ARMS):
                m = dsl.make_agent("dsl", cfg["d_model"], cfg["n_layer"], cfg["n_head"])
                pre = f"{arm}/{s}."
                m.load_state_dict({k[len(pre):]: v.float() for k, v in w.items() if k.startswith(pre)})
                m.eval()
                res["checkpoint"][f"{arm}/{s}"] = evaluate(m, con, train[:n_sft], train[n_sft:], test)
                print(arm, s, res["checkpoint"][f"{arm}/{s}"], f"{time.time() - t0:.0f} s", flush=True)
        res["checkpoint_config"] = cfg
        OUT.write_text(json.dumps(res))
    if "--part-a" in sys.argv:
        return
    res.setdefault("runs", {})
    cache: dict = {}
    for s in SEEDS:
        warms = {}
        for ws, n in (("w100", 100), ("w200", 200)):
            with repro.seeded(s):
                warm = dsl.make_agent("dsl", cfg["d_model"], cfg["n_layer"], cfg["n_head"])
                dsl.train_agent(warm, train[:n], "dsl", cfg["sft_steps"], cfg["sft_batch"], cfg["sft_lr"], seed=s)
            warms[ws] = (warm, train[:n], train[n:])
            key = f"{ws}/warm/{s}"
            if key not in res["runs"]:
                res["runs"][key] = evaluate(warm, con, train[:n], train[n:], test)
        for ws, arm, pen in GRID:
            key = f"{ws}/{arm}/{pen:g}/{s}"
            if key in res["runs"]:
                continue
            warm, sft, pool = warms[ws]
            model = copy.deepcopy(warm)
            _ctx.update(oracle=arm == "oracle", rewarded=0, spurious=0)
            cur = dsl.reinforce_agent(model, con, pool, "token_credit" if arm == "oracle" else arm, STEPS,
                                      cfg["rl_batch"], cfg["rl_lr"], seed=s, penalty=pen, cache=cache)
            r = evaluate(model, con, sft, pool, test)
            r.update(success=cur["success"].round(4).tolist(), valid=cur["valid"].round(4).tolist(),
                     rewarded=_ctx["rewarded"], spurious=_ctx["spurious"],
                     reach={str(b): dsl.steps_to_level(cur["success"][:b], 0.5) for b in (300, 600)})
            res["runs"][key] = r
            OUT.write_text(json.dumps(res))
            print(key, {k: v for k, v in r.items() if k not in ("success", "valid")},
                  f"last-20 success {cur['success'][-20:].mean():.2f}", f"{time.time() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main()
