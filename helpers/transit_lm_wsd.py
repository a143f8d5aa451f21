"""Chapter 10_transit_lm: reading the checkpoint of the recipe registered on 2026-12-06 (``models_wsd``, issue #68).

Kept apart from :mod:`helpers.transit_lm` on purpose: that module's source hash is stamped into the ``models_wsd``
checkpoint its training jobs write, so it must not change while they run. This module only reads what they write:

* :func:`recipe`: which checkpoint a default run reads (``models_wsd2``, else ``models_wsd`` when its files are
  there, else ``models``);
* :func:`curves`: a model's two logged curves (route-token loss by SFT step, training-record exact match), with a
  clear error when the manifest lacks one;
* :func:`conditions`: the two registered conditions of one model, read exactly as
  :func:`helpers.transit_lm.wsd_conditions` defines them, and cross-checked against the reading the data script
  stored (``metrics["route_flat/<arm>/<seed>"]``).

The next recipe, ``models_wsd2``, registered on :data:`REGISTERED2` before any of its models trained (issue #68;
``data/10_transit_lm/make_wsd2.py`` trains it): :func:`checkpoint_config` (``models_wsd``'s recipe on the data
probe's x8 records, 35,000 SFT steps, the same 5,000-step decay), :func:`part_bounds` / :func:`part_config` /
:func:`train_part` (the run cut into parts of ``part_steps`` SFT steps, each one call of
:func:`helpers.transit_lm.train_wsd`, so the schedule, the batches and the weights are one run's) and
:func:`first_job_reading` (the rule that decides whether the jobs after seed 0's SFT arm run). Its models are read
with the conditions and gates registered for ``models_wsd`` (:func:`helpers.transit_lm.wsd_conditions`,
:func:`helpers.transit_lm.wsd_gates`), unchanged. ``make_wsd2.py`` stamps this module (and
:mod:`helpers.transit_lm`) into ``models_wsd2``'s manifest: neither may change while its jobs run (or restamp).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from typing import Any

from helpers import checkpoints
from helpers import transit_lm as T
from helpers import validate as V

SLUG = "10_transit_lm"
NAME = "models_wsd"  # the registered recipe's checkpoint
NAME2 = "models_wsd2"  # the next registered recipe's checkpoint (read first when its files are there)
OLD = "models"  # the previous recipe's checkpoint
REGISTERED2 = "2026-12-07"
DATA_SCALE = 8  # models_wsd2 trains on the data probe's records: n_sft and n_pref x 8 (probe_data.py)
FIRST_JOB = ("sft", 0)  # (arm, seed) of the job models_wsd2 trains first; the rest wait for first_job_reading
ARMS = ("cpt", "sft")
CURVES = ("route_loss", "train_exact")


def available(root: str | os.PathLike | None = None, name: str = NAME) -> bool:
    """Whether checkpoint ``name`` (``models_wsd`` or ``models_wsd2``) can be read: its manifest and weights lie
    under the data root (``root``, else :func:`helpers.checkpoints.data_dir`), or, outside a checkout (Colab), the
    registry lists both (they are fetched by hash on first use)."""
    if root is not None:
        root = V.existing_dir("root", root)
    V.one_of("name", name, (NAME, NAME2))
    w, m = checkpoints.paths(SLUG, name, root)
    if w.is_file() and m.is_file():
        return True
    if root is None and not os.environ.get("HELPERS_DATA") and not checkpoints.in_checkout():
        listed = checkpoints.read_registry()[1]
        return f"{SLUG}/{w.name}" in listed and f"{SLUG}/{m.name}" in listed
    return False


def recipe(quick: bool, root: str | os.PathLike | None = None) -> str:
    """The models a run reads: ``"live"`` in quick mode (tiny models trained in the notebook), else the newest
    registered recipe whose checkpoint is :func:`available` (``models_wsd2``, then ``models_wsd``), else
    ``models`` (the previous recipe)."""
    if V.boolean("quick", quick):
        return "live"
    return next((n for n in (NAME2, NAME) if available(root, n)), OLD)


def _curve(hist: Mapping, key: str, have: list[str]) -> dict[str, list]:
    if key not in hist:
        raise ValueError(f"the manifest has no curve {key!r} (make_wsd.py and make_wsd2.py log it for every arm and "
                         f"seed); its curves: {have[:12]}")
    c = V.instance(f"history[{key!r}]", hist[key], Mapping)
    if "step" not in c or "value" not in c:
        raise ValueError(f"history[{key!r}] must hold 'step' and 'value' lists, got keys {sorted(c)}")
    steps = V.sequence(f"history[{key!r}]['step']", c["step"], min_len=1,
                       of=lambda n, x: V.integer(n, x, min=0))
    vals = V.sequence(f"history[{key!r}]['value']", c["value"], of=lambda n, x: V.number(n, x))
    if len(vals) != len(steps):
        raise ValueError(f"history[{key!r}] has {len(steps)} steps but {len(vals)} values")
    if any(b <= a for a, b in zip(steps, steps[1:])):
        raise ValueError(f"history[{key!r}]['step'] must increase")
    return {"step": steps, "value": vals}


def _manifest(manifest: Any) -> Mapping:
    V.instance("manifest", manifest, Mapping)
    if manifest.get("name") not in (NAME, NAME2):
        raise ValueError(f"manifest must be the {SLUG}/{NAME} or {SLUG}/{NAME2} checkpoint's, got name "
                         f"{manifest.get('name')!r}")
    if not isinstance(manifest.get("history"), Mapping):
        raise ValueError("manifest has no 'history' of curves")
    return manifest


def curves(manifest: Any, arm: str, seed: int) -> dict[str, dict[str, list]]:
    """The model's logged curves ``{"route_loss": {step, value}, "train_exact": {step, value}}`` (by SFT step) from
    a ``models_wsd`` or ``models_wsd2`` manifest. Raises ValueError naming a missing or malformed curve."""
    hist = _manifest(manifest)["history"]
    V.one_of("arm", arm, ARMS)
    seed = V.seed("seed", seed)
    have = sorted(hist)
    return {name: _curve(hist, f"{arm}/{seed}/{name}", have) for name in CURVES}


def conditions(manifest: Any, arm: str, seed: int, exact: Any, cfg: dict,
               rtol: float = 1e-9) -> dict[str, tuple[float, str, float, bool]]:
    """The registered conditions of one model (:func:`helpers.transit_lm.wsd_conditions`): the flat one read on the
    manifest's route-token loss curve under ``cfg`` (the checkpoint's config), the fit one on ``exact`` (the exact
    match on the first ``N_FIT_RECORDS`` SFT training records, greedy on the stored weights). The flat reading must
    equal the one the data script stored in ``metrics["route_flat/<arm>/<seed>"]`` (else the stored curve is not
    the curve it read: ValueError)."""
    V.instance("cfg", cfg, dict)
    out = T.wsd_conditions(curves(manifest, arm, seed)["route_loss"], exact, cfg)
    stored = (manifest.get("metrics") or {}).get(f"route_flat/{arm}/{seed}")
    if stored is not None and not math.isclose(out["route_flat"][0], float(stored), rel_tol=rtol, abs_tol=rtol):
        raise ValueError(f"the route-loss curve of {arm}/{seed} reads route_flat {out['route_flat'][0]!r}, the data "
                         f"script stored {stored!r}: the manifest's curve is not the one it read")
    return out


# --------------------------------------------------------------------------------------------- models_wsd2
# Registered on REGISTERED2 (2026-12-07), before any of its models trained (issue #68). Why these numbers, from the
# data probe's record (probe_data.json: models_wsd's recipe on x8 records, 16,000 steps, seed 0, arm sft): the
# training-record exact match missed the bar (0.720 < 0.8) while still rising in the decay (0.64 / 0.68 / 0.72 at
# 14k / 15k / 16k); the held-out route loss was flat (0.024) and held-out exact beat splice (0.630 vs 0.423), so
# the x8 data is kept and only the stable phase is lengthened (the rate, batch, warm-up and the 5,000-step decay are
# the probe's: it holds no evidence about other values). Extrapolation from its curves: the stable-phase route loss
# on the training records falls as a power of the step (exponent -0.62 fitted on steps 2k-11k, -0.77 on 5k-11k),
# the decay took it to 0.45 x its fitted stable-end value, and exact = exp(-0.70 x route loss) fits its 16 points
# (0.42-0.72). A stable phase to 30,000 predicts route loss 0.22-0.26 and exact 0.84-0.86 (32,000 steps in all,
# stable to 27,000: 0.81-0.82, within one standard error of the bar on 300 records, 0.023), and the plateau rule
# on a power-law curve with the probe's residuals reads <= 0.05 in 99% of draws. Parts of 5,000 steps: the probe's
# 8,000-step stages took 2,689 and 2,995 s on the loaded builder (0.31-0.34 s per step with its monitor), over the
# 40-minute limit per job; 5,000 steps ~ 30-34 min there (~22 min on an idle core).
WSD2_STEPS, WSD2_DECAY, WSD2_PART = 35000, 5000, 5000


def checkpoint_config(name: str = OLD) -> dict:
    """The config of checkpoint ``name``: ``models`` and ``models_wsd`` as :func:`helpers.transit_lm.checkpoint_config`
    gives them; ``models_wsd2`` (registered on :data:`REGISTERED2`): ``models_wsd``'s with ``n_sft`` and ``n_pref``
    x :data:`DATA_SCALE` (the data probe's records; the same seeded streams, so the first 300 SFT records the fit
    condition reads are ``models_wsd``'s), ``sft_steps`` 35,000 (warm-up 400, lr 3e-3 constant to step 30,000,
    cosine decay to 3e-4 over the last ``sft_decay`` = 5,000), trained in parts of ``part_steps`` = 5,000 SFT steps
    (:func:`part_config`; no ``split_at``), the monitor's ``n_eval`` = 300 in-distribution and 300 held-out test
    requests (the notebook's first 300 of each), three seeds, both arms."""
    V.one_of("name", name, (OLD, NAME, NAME2))
    if name != NAME2:
        return T.checkpoint_config(name)
    cfg = {k: v for k, v in T.checkpoint_config(NAME).items() if k != "split_at"}
    cfg.update(n_sft=cfg["n_sft"] * DATA_SCALE, n_pref=cfg["n_pref"] * DATA_SCALE, sft_steps=WSD2_STEPS,
               sft_decay=WSD2_DECAY, part_steps=WSD2_PART, n_eval=300)
    return cfg


def part_bounds(cfg: dict) -> list[tuple[int, int]]:
    """The SFT steps ``[(start, end), ...]`` of the parts of a ``models_wsd2``-style run: ``part_steps`` each.
    Raises unless the parts tile ``sft_steps``, the decay lies inside the last part and every bound is a multiple of
    ``eval_every`` (so each part's logged steps are the one-process run's)."""
    V.instance("cfg", cfg, dict)
    n = V.integer("cfg['part_steps']", cfg.get("part_steps"), min=1)
    steps, end = cfg.get("sft_steps"), T.stable_end(cfg)
    every = V.integer("cfg['eval_every']", cfg.get("eval_every"), min=1)
    if steps % n or n % every:
        raise ValueError(f"cfg['part_steps'] ({n}) must divide cfg['sft_steps'] ({steps}) and be a multiple of "
                         f"cfg['eval_every'] ({every})")
    if steps - n > end:
        raise ValueError(f"the decay (the last {cfg['sft_decay']} steps) must lie inside the last part "
                         f"({n} steps): the parts have no decay schedule of their own")
    if cfg.get("sft_warmup", 0) > n:
        raise ValueError("the warm-up must end inside the first part")
    return [(a, a + n) for a in range(0, steps, n)]


def part_config(cfg: dict, part: int) -> dict:
    """The config :func:`helpers.transit_lm.train_wsd` trains part ``part`` (1-based) under: part 1 is its stage 1
    with ``split_at`` = the part's end (CPT first in the CPT arm, warm-up, constant rate); a middle part its stage
    2 over ``[start, end)`` with ``sft_decay`` = 1 (``train.lr_at``'s one decay step sits at t = 0, the full rate:
    a constant rate); the last its stage 2 from ``start`` to ``sft_steps`` under the run's own decay. The batches
    of SFT step s are ``train_wsd``'s stream at s in every part."""
    bounds = part_bounds(cfg)
    part = V.integer("part", part, min=1, max=len(bounds))
    start, end = bounds[part - 1]
    if part == 1:
        return {**cfg, "split_at": end}
    if part < len(bounds):
        return {**cfg, "sft_steps": end, "split_at": start, "sft_decay": 1}
    return {**cfg, "split_at": start}


def train_part(cfg: dict, tensors: dict, vocab_size: int, seed: int, cpt: bool, part: int,
               resume: dict | None = None, eval_fn: Any = None) -> dict:
    """Part ``part`` of one (arm, seed) run of ``cfg``: :func:`helpers.transit_lm.train_wsd` under
    :func:`part_config`, resumed from the previous part's result (``resume``; none for part 1). The result is
    ``train_wsd``'s (weights, optimizer state, history of every part so far, by SFT step) with ``part``. Parts
    1..n in turn give the one-process run's weights (tested)."""
    V.instance("cfg", cfg, dict)
    part = V.integer("part", part, min=1, max=len(part_bounds(cfg)))
    if (part == 1) != (resume is None):
        raise ValueError("part 1 starts from scratch (no resume); every later part needs the previous part's result")
    if resume is not None and (not isinstance(resume, dict) or resume.get("part") != part - 1):
        raise ValueError(f"resume must be part {part - 1}'s result (train_part), got part "
                         f"{resume.get('part') if isinstance(resume, dict) else resume!r}")
    prev = None if resume is None else {**resume, "stage": 1}  # train_wsd resumes from a 'stage 1' result
    res = T.train_wsd(part_config(cfg, part), tensors, vocab_size, seed, cpt, stage=1 if part == 1 else 2,
                      resume=prev, eval_fn=eval_fn)
    res["part"] = part
    return res


def stored_weights(state: Mapping) -> dict:
    """A model's state dict as a checkpoint saved with ``dtype=float16, quantize="int8"`` gives it back: what the
    notebook reads, so the first-job rule reads the weights that would be stored."""
    import torch

    V.instance("state", state, Mapping)
    return checkpoints.int8_roundtrip({k: v.detach().to(torch.float16) if v.is_floating_point() else v
                                       for k, v in state.items()})


def first_job_reading(train_exact: Any, route_curve: Any, heldout_curve: Any, cfg: dict) -> dict:
    """The rule registered with ``models_wsd2`` (on :data:`REGISTERED2`, before any of its models trained): seed
    0's SFT arm (:data:`FIRST_JOB`) trains first; the other five models (seeds 1 and 2 of the SFT arm, seeds 0-2
    of the CPT arm) train iff all three hold on it:

    * ``fits_training_records``: exact match on the first 300 SFT training records, greedy on the weights as
      stored (:func:`stored_weights`), ``>= FIT_BAR`` (``train_exact``: the share, or the 0/1 list);
    * ``route_flat``: :func:`helpers.transit_lm.route_flat` of its route-token loss curve on those records
      ``<= FLAT_BAR`` (the two conditions the claims rest on, read as the notebook reads them);
    * ``heldout_route_flat``: the same reading of its route-token loss on the 300 held-out test requests (a
      falling held-out loss means an under-trained model; a rising one reads <= 0 and meets it).

    Otherwise nothing else of ``models_wsd2`` is trained: its reading is stored as a record, the notebook reads
    what it read before and every claim keeps its verdict (inconclusive where a condition fails); a next recipe is
    a new registration, which discloses this one's numbers. Returns ``{"go", "conditions": {name: (value, op,
    bar, held)}, "short_by": {name: distance to the bar}}``."""
    conds = T.wsd_conditions(route_curve, train_exact, cfg)
    flat = T.route_flat(heldout_curve, cfg)
    conds = {"fits_training_records": conds["fits_training_records"], "route_flat": conds["route_flat"],
             "heldout_route_flat": (flat, "<=", T.FLAT_BAR, flat <= T.FLAT_BAR)}
    short = {k: abs(v - bar) for k, (v, _, bar, ok) in conds.items() if not ok}
    return {"go": not short, "conditions": conds, "short_by": short}


__all__ = ["ARMS", "CURVES", "DATA_SCALE", "FIRST_JOB", "NAME", "NAME2", "OLD", "REGISTERED2", "SLUG", "available",
           "checkpoint_config", "conditions", "curves", "first_job_reading", "part_bounds", "part_config", "recipe",
           "stored_weights", "train_part"]
