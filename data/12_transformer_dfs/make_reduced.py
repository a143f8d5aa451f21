"""Train the reduced-scaffold gradient-flow model of chapter 12_transformer_dfs, which does not fit its 5-minute
default run, and write it with :mod:`helpers.checkpoints`:

* ``reduced_<seed>``: :class:`~helpers.transformer_dfs.ReducedDFS` (the two-layer DFS architecture with its
  value/readout maps, its previous-token and parent heads and its child preference learned; sign embeddings of
  width ``d < V``), trained from a small random start on the set of valid moves of curated DFS states of small
  graphs (:func:`~helpers.transformer_dfs.reduced_data`), one seed per checkpoint (one training job each). Tensors
  ``reduced.<param>`` and ``emb``; the training curve and the unseen-graph accuracy curves in the history.

Configuration (issue #70): the first attempt (1,500 Adam steps) did not fit its training states at any seed
(``reduced_fits``: training valid-move accuracy 0.9497/0.920/0.926 < 0.95) although its loss was flat. Selection
rule, fixed before probing and applied to seed 0 only, on the training states only (no unseen-graph evaluation
in the probes): the first configuration whose training valid-move accuracy at its plateau (mean of the last
tenth of the curve) is >= 0.95 with a flat loss (``plateau <= 0.05``). Probes on seed 0: d = 15 (1,500 steps)
plateaued at 0.932 (flat); d = 12 with 3,000 steps reached 0.953 (flat, 0.009): chosen. Everything else (data,
d = 12, lr, Adam, scaffold) is unchanged. Diagnosis: the errors sit on child steps where some child of ``u`` is
already visited (the visited flag; 0.90 there against 0.98-0.99 elsewhere), and the hand-built construction
with the same d = 12 sign embeddings scores 0.89 on these training states (1.00 with one-hot embeddings): the
sign embeddings' overlap (cosine up to 0.83 at d = 12) blurs the flag.

Third attempt, for the fit at every seed (issue #70). The second attempt met ``reduced_fits`` at seed 0 only
(0.9533/0.9254/0.9317), so the claim rested on one seed. Probes, written down before any was run, tried in this
order; one probe = one configuration trained at one seed (``--probe``: training states only, prints the fit and
the plateau, computes nothing on unseen graphs, writes nothing), seeds 0, 1, 2 in turn, a configuration dropped
at its first failing seed. Selection rule (fixed before probing): the first configuration whose training
valid-move accuracy at its plateau (mean of the last tenth of the curve) is >= 0.95 with a flat loss
(``train.plateau <= 0.05``) at all three seeds. The conditions ``reduced_fits`` and ``reduced_converged`` and the
claim's bar 0.95 are unchanged.

* P1 ``reduced_lc_<seed>``: low-coherence sign embeddings (:func:`~helpers.transformer_dfs.low_coherence_signs`:
  the seed's same random sign draw, then single-sign flips lowering the summed fourth power of the overlaps;
  largest ``|cos|`` 1/3 instead of 0.67-0.83), still fixed, still ``d = 12 < V = 16``; all else as the second
  attempt (3,000 Adam steps, lr 0.05, 4,000 curated states). Why first: it changes only what the diagnosis
  blames (the overlap of the embeddings), and keeps the issue's "sign embeddings with d < N".
* P2: P1 with the embeddings learned (initialised at P1's codes; the tied readout moves with them), ``d = 12``.
* P3: P1 with 6,000 steps.

Probe results (``--probe``; ``reduced_lc_<seed>`` carried each configuration in turn):

* P1, seed 0: fit 0.9807, loss plateau 0.0141 (passes); seed 1: fit 0.9229, plateau 0.0117: fails, P1 dropped.
  (Not a training probe, computed after: the hand-built construction with the P1 codes scores 0.9992/0.9975/
  0.9933 on the training states of seeds 0/1/2, so at seed 1 the architecture can fit and training does not.)
* P2: probed at seed 1 first (the seed that stopped P1; the rule's outcome does not depend on the order). From
  P2 on, a probe *is* the training run: ``reduced_lc_<seed>`` evaluates nothing on unseen graphs while it
  trains (its history holds the training curve only), it writes its checkpoint into a scratch data root
  (``--out``), and the checkpoints of the selected configuration are copied into ``data/``; the notebook
  evaluates unseen graphs. (P1's probes used ``--probe``: train, print, write nothing.)
  P2, seed 1: fit 0.8183, loss plateau 0.0472 (456 s): fails (worse than P1), P2 dropped.
* P3 (a follow-up round; ``reduced_lc_<seed>`` now carries P3's config: P1's fixed codes, 6,000 steps), probed
  at seed 1 first (the seed that stopped P1 and P2) into a scratch root: fit 0.9223, loss plateau -0.0081
  (556 s): fails, P3 dropped. Adam with a constant step is deterministic, so the run's first 3,000 steps are
  P1's seed-1 run: cut there, its curve gives 0.9229 and 0.0117, P1's numbers above to the digit. The loss went
  from 0.2115 at step 3,000 to 0.2062 at step 6,000 while the training accuracy stayed at 0.92: twice the steps
  does not move the fit. Its checkpoint ``reduced_lc_1`` is committed so that the notebook reads these numbers
  from its stored training curve (no unseen-graph evaluation anywhere; 5 kB of weights).

Outcome of the third attempt: no configuration of the list met the rule, nothing was selected, and ``reduced_<seed>`` (the second
attempt) stay the claim's models. Of the probes only P3's seed-1 run is committed (``reduced_lc_1``); P1's and
P2's runs were not kept (``--probe`` / scratch root).

Fourth attempt (issue #70, round 4): the objective or the start, not the bar. The last round found that the
hand-built construction with P1's codes scores 0.998 on seed 1's training states (so the architecture can fit),
but its valid-set loss there is 0.99-2.0 against the trained plateau's 0.22: the *training objective* prefers
the trained local solution (0.92) over the construction; a cosine decay of lr to 0 ended at the same 0.9215, so
it is not step noise. Probes, written down before any was run, tried in this order; all keep P1's fixed
low-coherence codes (``d = 12 < V = 16``), 4,000 curated states, 3,000 full-batch Adam steps at lr 0.05 and
the second attempt's data; each changes one thing:

* Q1 ``reduced_q1_<seed>``: exact-next-move cross-entropy: the loss is the cross-entropy of the reference DFS
  move (the largest-index unvisited child, else the parent: the trace's next token, which is also the move of
  the exact construction with its index tie-break), instead of the valid-set loss. The model must then learn
  the tie-break through ``w_t``; the fit is still read as *valid*-move accuracy.
* Q2 ``reduced_q2_<seed>``: a margin (hinge) loss on the valid set: ``relu(1 - (max valid logit - max invalid
  logit))`` averaged over states. It is zero for every state the model gets right by a margin of 1, so unlike
  the likelihood it does not pay for calibration and does not trade wrong states for confident right ones.
* Q3 ``reduced_q3_<seed>``: the valid-set loss from a start near the construction (:meth:`ReducedDFS.
  set_construction`, beta 30, rho 10, P1's codes), each parameter tensor plus Gaussian noise of std 0.1 times
  the tensor's root-mean-square entry (10 % of its norm; an all-zero tensor gets std 0.1, the random start's
  scale), drawn from the seed. What it means for the claim: a run that starts near the answer tests whether
  gradient training *keeps* (is stable at) the construction, not whether it *finds* it; if Q3 is the one
  selected, ``gradient_flow_learns`` says so in its text and is the weaker claim.

Selection rule unchanged: the first configuration whose training valid-move accuracy at its plateau (mean of
the last tenth of the curve) is >= 0.95 with a flat loss (``train.plateau <= 0.05``) at all three seeds; never
the unseen-graph accuracy (the probes compute none). Seed 1 (the seed that stopped P1-P3) is probed first, one
seed per job, into a scratch root (``--out``); a configuration is dropped at its first failing seed; the
selected configuration's three checkpoints are copied into ``data/`` and become the claim's models. Every
probe's outcome is recorded in ``reduced_probes.json`` (read by the notebook).

Probe results (fourth attempt; the numbers are in ``reduced_probes.json``):

* Q1, seed 1: fit 0.7788, loss plateau 0.0065 (327 s): fails (below P1's 0.9229 at the same seed), Q1 dropped.
  Measured after (its scratch checkpoint, training states): valid-move accuracy 0.87 on backtrack states, 0.70
  on child states (0.62 where a child is visited); on 28 % of the child states it backtracks instead: asked for
  one particular child, the model gives up child steps for backtracks.
* Q2, seed 1: fit 0.5139, loss plateau 0.0004 (298 s): fails, Q2 dropped. Its curve reaches 0.53 within the
  first 300 steps and stays there. Measured after (same way): 0.95 on child states but 0.07 on backtrack states
  (half the states): it learned the child head and never the parent head, a local solution the hinge does not
  leave (states right by the margin give no gradient).
* Q3, seed 1: fit 1.0000 (0.9998 at the start), loss plateau 0.0016 (518 s): passes; seed 0: 1.0000, 0.0016
  (362 s): passes; seed 2: 1.0000, 0.0017 (351 s): passes. **Q3 selected** by the rule: its checkpoints
  ``reduced_q3_<seed>`` were copied from the scratch root into ``data/``. At review (eb2b580) they were taken
  off the claim: Q3's start already scores 0.998/0.998/0.987 on unseen graphs, above the claim's bar, so a claim
  on Q3 holds by construction; ``gradient_flow_learns`` reads the random-start models (``reduced_<seed>``) again
  and Q3 is shown as a stability illustration (training keeps a DFS solution it starts near). The valid-set loss near the construction falls to about 0.0003, far below the random starts' plateau
  (0.21 at seed 1 with the same codes): the last round's reading that the objective prefers the trained
  solution was wrong; the construction was at the wrong scale, and the random starts stop in a worse local
  minimum.

Outcome: Q3 selected by the rule, shown as an illustration; ``reduced_<seed>`` (second attempt, random start)
carry ``gradient_flow_learns`` (the notebook's rule: a selected probe whose start already meets the bar is not
the claim's evidence).

Fifth attempt (issue #70, round 5): a random start that fits at every seed. Written down before any probe of
this round was run. Diagnosis first (measured from the stored weights, not trained anew): the random-start
models do not lack output scale: their output maps are as large as or larger than Q3's trained ones (``O_c``
norm 135-217 against 89-108, ``O_p`` 84-130 against 57-59). What they lack is the sharpness of the visited
flag and its weight: the visited head's ``W1`` diagonal is 4-8 (Q3 trained: 30), the flag weight ``gamma`` 5-8
(Q3: 52-71), the parent head's ``lam`` 2 (Q3: 11): a soft flag with a small weight, the states they miss are
those the flag decides. Sharpness enters as a product (score scale times attention times weight), and an
additive step grows a product slowly. Probes, tried in this order, each from P1 (fixed low-coherence codes,
``d = 12 < V = 16``, valid-set loss, 4,000 curated states, 3,000 full-batch Adam steps at lr 0.05) and the
small random start (``init_std`` 0.1, the seed's draw), one change each:

* R1 ``reduced_r1_<seed>``: learned log-temperatures (``ReducedDFS(temps=True)``): each head's scores (its
  sink's included) and the logits are multiplied by ``exp(log_temp)``, one scalar per head and one on the
  output, starting at 0 (factor 1), so a sharpness can grow multiplicatively. The start is the random start
  (the temperatures add no random draw).
* R2 ``reduced_r2_<seed>``: the construction's output maps at the start (``O_c = ρI``, ``O_p = ρ/(2V) I``,
  ρ = 10, :meth:`~helpers.transformer_dfs.ReducedDFS.set_construction_outputs`), every attention parameter
  from the random start (the issue's other suggestion; the diagnosis above predicts it does not help).

(Addendum after the runs: the diagnosis above read ``reduced_0``, ``reduced_1`` and ``reduced_lc_1``; the notebook
also reads ``reduced_2``: ``W1`` diagonal 5.2, ``|gamma|`` 11.3, the same picture; the sign of ``gamma`` is the
flag's. Nothing of the probes or the rule changed.)

Selection rule (fixed before probing): the first configuration in this order whose training valid-move accuracy
at its plateau (mean of the last tenth of the curve) is >= 0.95 with a flat loss (``train.plateau <= 0.05``) at
all three seeds, judged on seed 0 first and then seeds 1 and 2 (a configuration is dropped at its first failing
seed; seeds may run at the same time, each run is deterministic and independent of the others); never the
unseen-graph accuracy (the probes compute none). Each run writes into a scratch root (``--out``) and appends its
outcome to ``reduced_probes.json``; the selected configuration's three checkpoints are copied into ``data/``.
The notebook's rule stands: a selected probe whose *start* already meets the claim's bar on unseen graphs is
not the claim's evidence. If one is selected (and its start does not pass), its models carry
``gradient_flow_learns``; the conditions, the bar 0.95 and the measure are unchanged.

Run from the repository root: ``.venv/bin/python data/12_transformer_dfs/make_reduced.py --name reduced_0`` (or
``make data NB=12_transformer_dfs``). ``--tiny`` trains a tiny config for a few steps into a temporary folder
(seconds; what the tests run); ``--seeds``/``--out``: other seeds into another data root.
One torch thread: the same seed on the same machine writes byte-identical weights.
"""

from __future__ import annotations

import copy
import fcntl
import json
import tempfile
import time
from pathlib import Path

import torch

from helpers import checkpoints, repro, scripts, train
from helpers import transformer_dfs as dfs

SLUG = dfs.CHECKPOINT_SLUG
HERE = Path(__file__).resolve()
SOURCES = [HERE, Path(dfs.__file__).resolve(), Path(repro.__file__).resolve(), Path(train.__file__).resolve()]
NAMES = ["reduced_0", "reduced_1", "reduced_2", "reduced_lc_0", "reduced_lc_1", "reduced_lc_2",
         *(f"reduced_q{k}_{s}" for k in (1, 2, 3) for s in (0, 1, 2)),
         *(f"reduced_r{k}_{s}" for k in (1, 2) for s in (0, 1, 2))]
DEFAULT_NAMES = ["reduced_0", "reduced_1", "reduced_2", "reduced_q3_0", "reduced_q3_1", "reduced_q3_2"]
PROBES = HERE.parent / "reduced_probes.json"  # the fourth and fifth attempts' probe record (one per probe run)


def tiny(name: str = "reduced_0") -> dict:
    cfg = copy.deepcopy(dfs.checkpoint_config(name))
    cfg.update(V=8, d=6, n_range=[4, 6], n_train=40, n_test=30, steps=4, eval_every=2)
    return cfg


def make_reduced(cfg: dict, out: Path | None, args: object = None) -> Path | list:
    t0 = time.time()
    (s,) = cfg["seeds"]
    train_items, test_items, emb = dfs.reduced_data(cfg, s)
    b = dfs.structured_batch(train_items)
    evals = {"train": b}
    if "emb" not in cfg:  # the earlier attempts tracked unseen graphs during training; the third attempt's
        # runs (reduced_lc_*) are its selection probes and never evaluate them (the notebook does, afterwards)
        evals["test"] = dfs.structured_batch(test_items)
    with repro.seeded(s):
        model = dfs.reduced_model(cfg, emb)  # Q3: near the construction; R1: temperatures; R2: output maps
        hist = dfs.train_reduced(model, b, cfg["steps"], cfg["lr"], evals, eval_every=cfg["eval_every"],
                                 method=cfg["method"], loss=cfg.get("loss", "valid"))
    fit, flat = train.tail_mean(hist["train/valid"]), train.plateau(hist["loss"])
    name = getattr(args, "name", None) or f"reduced_{s}"
    if name.startswith(("reduced_q", "reduced_r")) and not getattr(args, "tiny", False):  # the probe record
        with open(Path(tempfile.gettempdir()) / "reduced_probes.lock", "w") as lock:  # seeds may end together
            fcntl.flock(lock, fcntl.LOCK_EX)
            rec = json.loads(PROBES.read_text()) if PROBES.exists() else []
            rec = [r for r in rec if r["name"] != name] + [dict(
                name=name, probe=name[8:10].upper(), seed=s, loss=cfg.get("loss", "valid"),
                init=cfg.get("init", "random"), temps=bool(cfg.get("temps", False)), steps=cfg["steps"],
                train_fit=round(fit, 4), loss_plateau=round(flat, 4), passes=bool(fit >= 0.95 and flat <= 0.05),
                start_fit=round(hist["train/valid"][0], 4), wall_seconds=round(time.time() - t0))]
            PROBES.write_text(json.dumps(sorted(rec, key=lambda r: r["name"]), indent=1) + "\n")
    print(f"PROBE emb={cfg.get('emb', 'sign')} learn_emb={cfg.get('learn_emb', False)} temps={cfg.get('temps', False)} d={cfg['d']} "
          f"loss={cfg.get('loss', 'valid')} init={cfg.get('init', 'random')} steps={cfg['steps']} seed {s}: training valid-move accuracy at plateau {fit:.4f} (bar 0.95), "
          f"loss plateau {flat:.4f} (bar 0.05), {'PASS' if fit >= 0.95 and flat <= 0.05 else 'FAIL'} "
          f"({time.time() - t0:.0f} s)", flush=True)
    if getattr(args, "probe", False):
        return []
    tensors = {f"reduced.{k}": v.detach().clone() for k, v in model.state_dict().items()
               if k != "E" or cfg.get("learn_emb")}  # learned embeddings: reduced.E
    tensors["emb"] = torch.tensor(emb, dtype=torch.float32)  # the fixed (or initial) embeddings
    metrics = {k: v[-1] for k, v in hist.items() if "/" in k}
    metrics.update(final_loss=hist["loss"][-1], train_fit=fit, loss_plateau=flat)
    history = {k: list(zip(hist["step"], v)) for k, v in hist.items() if k != "step"}
    if "test" in evals:
        print(f"seed {s}: unseen graphs valid {hist['test/valid'][-1]:.3f}, exact {hist['test/exact'][-1]:.3f}",
              flush=True)
    return checkpoints.save(SLUG, name, tensors, config=cfg, metrics=metrics, history=history, seed=cfg["seeds"],
                            steps=cfg["steps"], wall_seconds=time.time() - t0, sources=SOURCES,
                            module="helpers.transformer_dfs", root=out)


def options(ap) -> None:
    ap.add_argument("--probe", action="store_true",
                    help="train, print the training fit and loss plateau, write nothing")


def main(argv: list[str] | None = None) -> list[Path]:
    return scripts.script_main(make_reduced, config=dfs.checkpoint_config, tiny=tiny, names=NAMES,
                               default_names=DEFAULT_NAMES, doc=__doc__, options=options, argv=argv)


if __name__ == "__main__":
    main()
