"""Round 12's two-key offset-recall checkpoint ``recall6`` of chapter 04_tree_rope (records only, no weights):
round 11's ``recall5`` (``tr.checkpoint_config("recall5")``: recall2's recipe + the auxiliary previous-token loss,
weight 0.25) with a longer cosine schedule, everything else unchanged. Registered (this config, its schedule rule
and their tests) before any recall6 training.

**Why**: at recall5 seed 1 every claim arm had its onset by ~step 1000 and learned the carry windows, but each
one's held-out curve was still falling when the 6000-step schedule ended (plateau 0.031-0.052 > 0.02).

**Schedule rule** (:func:`schedule`, reproducible from the stored ``recall5.json``): for each claim arm
(``in_window_arms``) fit ``log(held-out loss) = c + b * step`` by least squares on recall5 seed 1's points at
steps >= :data:`FIT_FROM` (after every arm's onset); an N-step schedule's predicted curve is the stored curve
before ``FIT_FROM`` and ``exp(c + b * t)`` from there, at recall6's evaluation steps; the arm's N is the smallest
multiple of :data:`GRID` (>= 6000) whose predicted curve reads ``train.plateau <= 0.02`` (recall5's reading and
bar); recall6's steps are the largest arm's N. The exponential is the conservative one of the two models tried:
at 6000 steps it over-reads every arm's measured plateau (a power law in steps under-reads every one, and would
put RoPE + OPT offsets past 40000 steps); :func:`schedule` records both readings at 6000 and the power law's N
beside (decides nothing). Reading at registration: N = 12000 RoPE, 18000 RoPE + OPT offsets (tau 3165 steps, the
slowest), 10000 TPE, 11000 TPE + OPT, so recall6 trains 18000 steps. It assumes the longer run is at step t no worse than recall5 was at step t, and does not
model the cosine tail's annealing; the bars, not the extrapolation, decide.

**Change besides the steps**: ``val_every`` = steps / 120, so the held-out curve keeps recall5's 120 evaluations
(the plateau reads the last fifth of them as before) and the record keeps recall5's size (~66 kB per seed).
**Unchanged**: task, model, lr, warmup, aux loss, arms (NoPE, RoPE, RoPE + OPT offsets, TPE, TPE + OPT), **one
attempt per arm-seed, the one read** (no restarts), bars (final held-out accuracy >= 0.95, plateau <= 0.02),
claims. **Seeds**: seed 1 first; seeds 0 and 2 only if the four claim arms meet both bars at seed 1.

**Cost** (:func:`schedule`, ``cost``): recall5's measured seconds per arm-seed / 6000 x N (an upper bound: the
evaluations do not grow with N): 13-21 min per arm-seed at 18000 steps, 88 min of one core for seed 1's five arms,
4.4 core-hours for three seeds (over the ~3 core-hours hoped for: at 12000 steps, 3 core-hours, the rule itself
predicts RoPE + OPT offsets misses the plateau bar, so the cap would register a round that its own extrapolation
says fails). When merged, ``recall6`` replaces ``recall5`` in data/ (data/ has ~26 kB left): the merge into the
repository's data/ keeps what is still read of recall5 in ``extra["recall5"]`` (:func:`base_summary`).

**Amendment 2026-12-07 (written after seed 1's numbers, disclosed; before any seed 0 or 2 training).** At seed 1
TPE and TPE + OPT met both bars; RoPE (plateau 0.046) and RoPE + OPT offsets (0.037) did not, so by the rule above
seeds 0 and 2 would not train. They train (all five arms, same recipe, one attempt each) because two claims can
be decided without those two arms' convergence, by a bound that holds whatever an unconverged arm would reach:

* ``retrieval_at_64x`` reads TPE + OPT's accuracy at 64x minus RoPE's; an accuracy is >= 0, so the difference is
  at most TPE + OPT's accuracy. Where that bound is below the target at every seed the claim cannot hold whatever
  RoPE would reach, and the verdict names TPE + OPT's plateau condition but not RoPE's.
* ``needs_both_parts`` reads min(TPE + OPT - TPE, TPE + OPT - RoPE + OPT offsets) at 64x; the min is at most TPE +
  OPT - TPE. Where that bound is not above the target at every seed, the verdict names TPE + OPT's and TPE's plateau
  conditions but not RoPE + OPT offsets'.

Otherwise (a bound that could reach the target at some seed) every condition is named as before, and a claim with
an unmet one stays inconclusive. The in-window and needs-position conditions are named as before. A bound never
makes a claim hold. :func:`bound_gates` is this rule (``tr.bound_gates``, moved unchanged into the chapter's module
when the seeds were merged, so the notebook reads the same function). The claims read recall6 once its three seeds are merged
(claims' ops, targets and arms otherwise unchanged; RoPE + skips is not a recall6 arm, so the best-other baseline
of ``retrieval_at_64x`` is the best of RoPE + OPT offsets and TPE). Cost: 88 min of one core per seed.

Training, evaluation, parts and merge are ``make_recall4.py``'s (loaded from it; only the name, the config and
the source list differ), as for recall5. One job per arm-seed: ``.venv/bin/python data/04_tree_rope/make_recall6.py
--seed 1 --arms "TPE + OPT" --parts DIR``; then ``--merge --seeds 1 [0 2] --parts DIR`` (``--partial``: arm-seeds
not trained are marked pending). ``--schedule`` alone prints the rule's reading. ``--tiny`` alone: every arm of a
tiny config into temporary folders, then the merge. One torch thread.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve()
_spec = importlib.util.spec_from_file_location("_make_recall4_for_recall6", HERE.parent / "make_recall4.py")
M4 = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(M4)
SLUG, NAME, BASE = M4.SLUG, "recall6", "recall5"
SOURCES = [HERE, HERE.parent / "make_recall4.py", *M4.SOURCES[1:]]
checkpoints, tr, train = M4.checkpoints, M4.tr, M4.train
FIT_FROM, GRID, BASE_STEPS, MAX_STEPS = 1000, 1000, 6000, 40000
N_EVALS = tr.RECALL6_N_EVALS
RECALL6_STEPS = tr.RECALL6_STEPS  # = schedule()["steps"] on the stored recall5 curves (asserted by the tests)


def _fits(curve: dict) -> dict:
    step, loss = np.asarray(curve["step"], float), np.log(np.asarray(curve["value"], float))
    sel = step >= FIT_FROM
    return dict(exp=np.polyfit(step[sel], loss[sel], 1), power=np.polyfit(np.log(step[sel]), loss[sel], 1))


def predicted_plateau(curve: dict, steps: int, model: str = "exp") -> float:
    """``train.plateau`` of the curve an arm with recall5's stored held-out ``curve`` is predicted to have after a
    ``steps``-step schedule evaluated every ``steps / N_EVALS`` steps (see the module docstring)."""
    b, c = _fits(curve)[model]
    t = np.arange(1, N_EVALS + 1) * (steps / N_EVALS)
    x = t if model == "exp" else np.log(t)
    pred = np.where(t < FIT_FROM, np.interp(t, curve["step"], curve["value"]), np.exp(c + b * x))
    return float(train.plateau(list(pred)))


def _steps_needed(curve: dict, bar: float, model: str) -> int | None:
    for n in range(BASE_STEPS, MAX_STEPS + 1, GRID):
        if predicted_plateau(curve, n, model) <= bar:
            return n
    return None


def schedule(manifest: dict | None = None) -> dict:
    """The schedule rule's reading of recall5's stored seed-1 curves (default: ``recall5.json``): per claim arm the
    fit, the measured and predicted plateau at 6000 steps, the steps needed; ``steps`` (the largest) and the cost."""
    m = manifest or base_record()
    cfg, bar = tr.checkpoint_config(BASE), tr.checkpoint_config(BASE)["claims"]["plateau"]["target"]
    arms = {}
    for arm in cfg["in_window_arms"]:
        curve = m["history"][f"{arm}/1/val_loss"]
        arms[arm] = dict(tau=round(-1 / float(_fits(curve)["exp"][0])), measured=m["metrics"][f"{arm}/1"]["plateau"],
                         exp_at_6000=predicted_plateau(curve, BASE_STEPS),
                         power_at_6000=predicted_plateau(curve, BASE_STEPS, "power"),
                         steps=_steps_needed(curve, bar, "exp"), power_steps=_steps_needed(curve, bar, "power"))
    steps = max(a["steps"] for a in arms.values())
    per_step = {k.split("/")[0]: v / BASE_STEPS for k, v in m["extra"]["seconds_per_run"].items()}
    cost = {a: round(s * steps) for a, s in per_step.items()}
    return dict(arms=arms, steps=steps, seconds_per_step=per_step, cost=cost, seed_seconds=sum(cost.values()),
                three_seed_core_hours=round(3 * sum(cost.values()) / 3600, 2))


bound_gates = tr.bound_gates  # the amendment's rule (below), moved unchanged into helpers/tree_rope.py at the merge


def config() -> dict:
    """recall6 = ``tr.checkpoint_config("recall6")``: recall5 with ``steps`` = :data:`RECALL6_STEPS` and
    ``val_every`` = steps / :data:`N_EVALS`; ``base`` names recall5 (the config was registered here and moved,
    unchanged, into ``helpers/tree_rope.py`` when the three seeds were merged)."""
    return copy.deepcopy(tr.checkpoint_config(NAME))


BASE_CONDS = ("train", "prefix", "far")  # the base summary's attention columns: length 32, prefix 2048, length 2048


def base_summary(root: Path | None = None) -> dict:
    """What the chapter and :func:`schedule` still read of recall5 once recall6 replaces it in data/ (it has no room
    for both): recall5's per-arm metrics, the claim arms' held-out loss curves (seed 1), ``extra`` (seconds, chosen,
    seeds_by_rule), per-window correctness at the training length (a string of 0/1 over the held-out windows), the
    query's mean attention on the key and on the answer per layer at the training length, behind the prefix and at
    the longest length (:data:`BASE_CONDS`), and the two files' sha256."""
    folder = (root or HERE.parents[1]) / SLUG
    m = json.loads((folder / f"{BASE}.json").read_text())
    ck = checkpoints.load(SLUG, BASE, config=m["config"], root=root, check_sources=False)
    cfg, summary = m["config"], {}
    n_train = cfg["train_len"]
    conds = dict(zip(BASE_CONDS, (f"length{n_train}", f"prefix{cfg['eval']['control']['prefix_len']}",
                                  f"length{max(cfg['eval']['lengths'])}")))
    for key in m["metrics"]:
        t = {k.split(".", 1)[1]: v for k, v in ck.tensors.items() if k.startswith(key + ".")}
        att = {f"{w}_{c}_l{i}": round(float(t[f"eval_att_{w}_{conds[c]}_l{i}"].float().mean()), 4)
               for w in ("key", "answer") for c in BASE_CONDS for i in range(1, cfg["n_layer"] + 1)}
        summary[key] = dict(correct_train="".join(str(int(v)) for v in t[f"eval_correct_{n_train}"].tolist()), **att)
    files = {f: checkpoints.sha256_file(folder / f) for f in (f"{BASE}.json", f"{BASE}.safetensors")}
    curves = {f"{a}/1/val_loss": m["history"][f"{a}/1/val_loss"] for a in m["config"]["in_window_arms"]}
    return dict(files=files, seed=m["seed"], metrics=m["metrics"], history=curves,
                extra={k: m["extra"][k] for k in ("seconds_per_run", "chosen", "seeds_by_rule") if k in m["extra"]},
                windows=summary, rebuild=m["command"])


def base_record() -> dict:
    """recall5's stored record: ``recall5.json`` while it is in data/, else the summary kept in recall6's manifest
    (``extra["recall5"]``, :func:`base_summary`)."""
    own = HERE.parent / f"{BASE}.json"
    if own.is_file():
        return json.loads(own.read_text())
    return json.loads(checkpoints.fetch(SLUG, f"{NAME}.json").read_text())["extra"][BASE]


class _Checkpoints:
    """``helpers.checkpoints`` as this module's copy of make_recall4 sees it: a merge into the repository's data/
    (no ``--out``) while recall5 is still there also writes :func:`base_summary` into recall6's ``extra``."""

    def __getattr__(self, name):
        return getattr(checkpoints, name)

    @staticmethod
    def save(slug, name, tensors, *, extra=None, root=None, **kw):
        extra = dict(extra or {})
        if name == NAME and root is None and (HERE.parent / f"{BASE}.json").is_file():
            extra[BASE] = base_summary()
        return checkpoints.save(slug, name, tensors, extra=extra, root=root, **kw)


def tiny_config() -> dict:
    cfg = M4.MR.tiny_config(BASE)
    cfg.update(seeds=[1], d_model=8 * cfg["n_head"], base=BASE)  # TPE needs one rotary pair per level
    return cfg


class _TreeRope:
    """``helpers.tree_rope`` as this module's copy of make_recall4 sees it: it also knows recall6's config."""

    def __getattr__(self, name):
        return getattr(tr, name)

    @staticmethod
    def checkpoint_config(name: str = "arms") -> dict:
        return config() if name == NAME else tr.checkpoint_config(name)


M4.NAME, M4.SOURCES, M4.tiny_config, M4.tr, M4.checkpoints = NAME, SOURCES, tiny_config, _TreeRope(), _Checkpoints()


def main(argv: list[str] | None = None) -> Path | None:
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["--schedule"]:
        print(json.dumps(schedule(), indent=1))
        return None
    return M4.main(argv)


if __name__ == "__main__":
    main()
