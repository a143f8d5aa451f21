"""Round 9 of chapter 07_tree_cycle_pe (issue #65), REGISTERED ON 2026-12-07 BEFORE ANY OF ITS TRAINING: the
issue's three build items still missing (A, B, C) and the hashes of every seed's training strings (D). Records
only: no weights go into ``data/`` (about 0.95 MB of the 50 MiB budget is free); every number a reading needs is
measured by this script, on the weights as a checkpoint would store them (float16, then int8 with a scale per
row: :func:`helpers.checkpoints.int8_roundtrip`), and written into ``round9_s<k>.json``.

**Recipe.** Round 8's converged recipe, unchanged: the registered wsd recipe (:func:`helpers.tree_cycle_pe.
recipe_config`; property models 10,000 steps of 32, warm-up 1,000, constant 2e-3, cosine decay over the last
2,000, evaluated every 100 steps; alert models 1,500 steps, warm-up 150, constant 1e-3, decay 300, every 25;
weight decay 0.01, no dropout, the same five randomized strings per training molecule drawn from the seed).
Round 8's records do not show it wrong: every stored property and alert model meets ``fits``, and ``val_flat``
except where the round-8 reading says so; round 7's recipe B (dropout, weight decay) did not stop the training
loss falling either (``probe_freshreg.json``). Seeds 0, 1, 2. Snapshots: the weights every 2,000 steps
(property) / 300 steps (alert) and at the end, measured in the job and then dropped.

**Jobs** (one part each, one process on one core, one torch thread; part ``P`` of name ``round9_s<k>`` is the
``P``-th of :data:`JOBS`):

==  ======================  ================================================================  ============
P   job                     what                                                              wall (est.)
==  ======================  ================================================================  ============
1   A_prop_ctree_cycle      A: canonical-spanning-tree + cycle PE, property (CHEMBL204)       26 min
2   A_alert_ctree_cycle     A: the same kind on the alert task (imine_1)                      6 min
3   C_prop_tree_cycle       C: tree+cycle as stored (``wsd_s<k>_prop_tree_cycle``) again      26 min
4   C_prop_sinusoidal       C: the claims' sinusoidal comparator (``wsd_s<k>_prop_sinusoidal``) 25 min
5   B_prop_tree_cycle       B: tree+cycle on CHEMBL214 Ki, Murcko-scaffold split              28 min
6   B_prop_cycle            B: cycle-only                                                     26 min
7   B_prop_graphormer_cycle B: Graphormer-lite + ring features                                21 min
8   B_prop_gin              B: GIN                                                            6 min
9   B_ecfp                  B: ECFP4 + logistic regression / random forest (500 trees)        2 min
10  B_prop_sinusoidal       B: sinusoidal (re-rooting on the second set; no claim needs it)   25 min
==  ======================  ================================================================  ============

Walls: make_wsd.py's measured 0.145 s/step for tree+cycle on one core (probe of 2026-12-06; sinusoidal and
cycle-only 0.93-0.97x, Graphormer-lite 0.73-0.79x, GIN 0.023 s/step), data 38-70 s, plus the snapshot
measures (6 per property model: re-rooting of 30 molecules ~1 s, ROC-AUCs ~3 s; 6 per alert model: integrated
gradients on 120 molecules x 96 points ~10 s). Every part is under 30 min at that speed and under 40 min at a
third slower (a shared machine). About 3.2 core-hours per seed, 9.6 for three; A alone 1.6, C 2.5, B 5.5.

* **A** (``ctree_cycle``): the tree part built on the canonical spanning tree (canonical root, canonical DFS,
  :func:`~helpers.tree_cycle_pe.canonical_tree_paths`) instead of the string's own tree: an encoding invariant by
  construction. It separates the paper's construction (the serialization's tree + the cycle anchor) from our
  choice of tree. Same data, strings and recipe as ``wsd_s<k>_prop_tree_cycle`` / ``wsd_s<k>_alert``.
* **C**: ``prop_tree_cycle`` and ``prop_sinusoidal`` trained again exactly as stored (same config, code, seed,
  one thread), now with snapshots, so that invariance (relative |dp|, centred cosine) and ROC-AUC can be read
  against training steps. Check ``reproduces_stored``: the final weights after the int8 round trip equal the
  stored checkpoint's (largest absolute difference recorded; 0 expected on the same machine and library). Where
  it fails, the curve is of a model retrained with the same recipe, not of the model the claims read, and is
  labelled so. (The comparator with a learned sinusoidal gain, proposed at round 8's close, is NOT trained:
  the claims compare the stored comparator; its use of positions is recorded at every snapshot instead.)
* **B**: MoleculeACE CHEMBL214_Ki (serotonin 5-HT1A Ki, 3,317 molecules, shipped in the pinned
  ``MoleculeACE==3.0.0`` wheel, offline; 61% active at pKi >= 7), split by Bemis-Murcko scaffold
  (:func:`scaffold_split`: scaffold groups, largest first, fill the training side up to 80%, the rest is test;
  a seeded tenth of the training side is validation, :func:`~helpers.tree_cycle_pe.val_split`), vocabulary of
  this set, the wsd recipe. The chapter's CHEMBL204 set keeps MoleculeACE's own split.
* **D** (``strings``, records only, ``strings.json``): per seed, sha256 of the training strings every stored
  model of that seed saw (``tc.prepare`` of the wsd config: each training molecule's canonical + 5 randomized
  strings, in molecule order, joined by newlines; the synthetic task's likewise), of the canonical strings of
  every molecule and of the split, as the current code draws them (``tc.prepare`` is deterministic given the
  seed; C's ``reproduces_stored`` checks that they are the strings the stored property models saw: the same
  weights cannot come from other strings). Each round-9 record also stores the hash of its own training strings
  (A and C must equal D's property hash of the same seed).

**Measured at every snapshot** (:func:`snapshot_measures`, on the canonical strings of validation / test
molecules): ``val_auc``, ``test_auc``; sequence models: ``val_auc_no_pos`` and ``uses_positions`` (the
positional term removed at test time; bar 0.01, :data:`~helpers.tree_cycle_pe.POSITION_USE_BAR`) and
``pe_token_ratio``; property sequence models: the re-rooting measures of the chapter's section 8, computed the
same way (:func:`reroot_measures`: 30 test molecules ``repro.rng(0, 5)``, rooted at every heavy atom, whole
strings, length-sorted batches of 128; ``rel_dp`` = mean |p(rooted) - p(canonical)| / mean |p_i - p_j| over
2,000 pairs of test molecules ``repro.rng(0, 6)``; ``cos`` = centred cosine of [CLS] embeddings, centred on the
test set's mean; ``between``; ``raw``); alert models: ``alignment`` (the section 9 reading: integrated gradients,
96 points, on the first 120 test molecules whose alert is a proper subset of the atoms; share of the top-k
atoms inside the alert) and ``chance``. The final snapshot is the final model.

**Conditions** (registered with the recipe, :func:`~helpers.tree_cycle_pe.recipe_conditions`, read on the
stable phase): ``flat`` (recorded, gates nothing since round 8), ``val_flat`` and ``fits`` (gating, round 8).

**Reading rules** (registered now; :func:`read_round9` computes them from the records, tested):

1. ``canonical_tree_vs_tree_cycle`` (A, property): per seed, test ROC-AUC of tree+cycle (``wsd_s<k>_prop_
   tree_cycle``) minus canonical-tree + cycle (A), ``>= 0`` (the paper's string tree is no worse than an
   invariant one), gated by ``val_flat`` and ``fits`` of both; reported both ways, with a paired bootstrap 90%
   interval over test molecules (500 resamples, as section 11's). The difference is called **resolved** at a
   seed when the interval excludes 0; the chapter's text says "no resolved difference" unless it is resolved at
   2 or more qualifying seeds with the same sign. The same reading, descriptive (no verdict), for the alert task
   (test ROC-AUC and alignment, tree+cycle minus A) and for re-rooting (A's ``rel_dp`` and ``cos`` beside
   tree+cycle's: A's tree part is invariant, so what moves A is the structural tokens).
2. ``cycle_only_vs_tree_cycle`` keeps its CHEMBL204 verdict and its resolution reading (1dd1cd3): the same
   rule (interval excludes 0 at >= 2 qualifying seeds, same sign). On CHEMBL214 (B) its twin
   ``cycle_only_vs_tree_cycle_chembl214`` is read the same way.
3. Second-set property claims (B): ``property_auc_vs_graphormer_chembl214``, ``property_auc_vs_gin_chembl214``,
   ``property_auc_vs_strongest_chembl214`` (best of GIN, ECFP4 + LR, ECFP4 + RF on the test set),
   ``cycle_only_vs_tree_cycle_chembl214``: same measure, op, target and gating as the CHEMBL204 claims, 3 seeds.
   The paper's "better on BACE and BBBP" is read over the two sets by :func:`two_set_verdict`: held on both ->
   held; not held on either -> not held; inconclusive on either (the other not "not held") -> inconclusive;
   otherwise mixed. The per-set verdicts are shown beside it.
4. Against steps (C, and A's snapshots), descriptive: rel |dp| ratio tree+cycle / sinusoidal and centred cosine
   per snapshot; ``rerooting_invariance`` keeps reading the final models (a snapshot never replaces them). If
   ``reproduces_stored`` fails at a seed, that seed's curve is labelled "retrained" in the text.
5. D gates nothing; a round-9 record whose property strings hash differs from D's at its seed is refused by the
   reader (the models would not have seen the stored models' strings).

A seed with a missing part is read as not trained (``--merge --partial`` writes what exists and lists what is
missing; a claim needing a missing job is untested at that seed).

**Storage**: ``round9_s<k>.json`` about 150 kB per seed (curves: training loss as means over blocks of
``eval_every`` steps, validation loss and training-sample ROC-AUC exact at every evaluation (the gating
conditions are recomputed from them, :func:`record_problems`), validation ROC-AUC to 6 digits, test
probabilities to 5 digits, snapshot measures), ``strings.json`` about 2 kB: about 0.45 MB in all. If weights must be stored later (e.g.
A's final models for the notebook's section 9 figures), ``wsd_s<k>_prop_sinusoidal_canon.safetensors`` (3 x
121 kB) is the superseded 07 file to free: no claim reads the canonical-only model since round 6.

**Commands** (in this order; seed 0 of each arm first, then seeds 1-2; each line one gated job; ``P`` as in
the table)::

    .venv/bin/python data/07_tree_cycle_pe/make_round9.py --name strings                       # D, ~4 min
    .venv/bin/python data/07_tree_cycle_pe/make_round9.py --name round9_s0 --part P --parts /tmp/r9
    ...                                                    --name round9_s1 / round9_s2, same parts
    .venv/bin/python data/07_tree_cycle_pe/make_round9.py --name round9_s0 --merge --parts /tmp/r9 [--partial]

A part already in ``--parts`` with the same config is reused, not retrained (resumable). ``--tiny``: every job of
a tiny config and the merge, and ``strings`` of a tiny config, into a temporary folder (seconds).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import math
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from sklearn.metrics import roc_auc_score

from helpers import checkpoints, repro, scripts, train
from helpers import tree_cycle_pe as tc

SLUG = "07_tree_cycle_pe"
HERE = Path(__file__).resolve()
SOURCES = [HERE, Path(tc.__file__).resolve(), Path(repro.__file__).resolve(), Path(train.__file__).resolve()]
REGISTERED = "2026-12-07"
JOBS = ("A_prop_ctree_cycle", "A_alert_ctree_cycle", "C_prop_tree_cycle", "C_prop_sinusoidal",
        "B_prop_tree_cycle", "B_prop_cycle", "B_prop_graphormer_cycle", "B_prop_gin", "B_ecfp", "B_prop_sinusoidal")
NAMES = ("strings", "round9_s0", "round9_s1", "round9_s2")
SECOND_SET = "CHEMBL214_Ki"
SCAFFOLD_TEST_FRAC = 0.2
RESOLVED_AT = 2  # seeds whose bootstrap interval excludes 0 (same sign) for a difference to be "resolved"
N_REROOT, N_PAIRS, N_ALERT, IG_STEPS = 30, 2000, 120, 96


# ---- configs ---------------------------------------------------------------------------------------------------
def job_config(job: str, k: int, quick: bool = False) -> dict:
    """The config of one round-9 job at seed ``k`` (``quick``: the tiny one): the wsd recipe's, see the docstring."""
    if job not in JOBS:
        raise ValueError(f"job must be one of {JOBS}, got {job!r}")
    arm, family = job.split("_", 1)
    kind = family.removeprefix("prop_").removeprefix("alert_")
    base = {"prop": "prop_tree_cycle", "alert": "alert", "ecfp": "ecfp"}[family.split("_")[0]]
    if arm == "C":
        base = family
    cfg = tc.recipe_config(f"wsd_s{k}_{base}", quick=quick, seed=k)
    if family != "ecfp":
        cfg["kinds"] = [kind]
        cfg["snapshot_every"] = 2 * cfg["eval_every"] if quick else (2000 if cfg["task"] == "prop" else 300)
    cfg.update(family=family, round=9, job=job, registered=REGISTERED, quick=quick,
               n_reroot=4 if quick else N_REROOT, n_alert=6 if quick else N_ALERT, ig_steps=4 if quick else IG_STEPS)
    if arm == "B":
        cfg.update(dataset=SECOND_SET, n_prop=48 if quick else 3317, split="murcko_scaffold",
                   test_frac=SCAFFOLD_TEST_FRAC)
    return cfg


def round9_config(name: str, *, quick: bool = False, seed: int = 0) -> dict:
    """The config of ``strings`` (D) or ``round9_s<k>`` (every job of seed ``k``)."""
    if name not in NAMES:
        raise ValueError(f"name must be one of {NAMES}, got {name!r}")
    if name == "strings":
        return dict(round=9, registered=REGISTERED, what="sha256 of training strings", quick=quick,
                    seeds=[seed] if quick else [0, 1, 2])
    k = seed if quick else int(name.removeprefix("round9_s"))
    return dict(round=9, registered=REGISTERED, seeds=[k], quick=quick, jobs=list(JOBS))


# ---- data ------------------------------------------------------------------------------------------------------
def scaffold_split(smiles: list[str], test_frac: float = SCAFFOLD_TEST_FRAC) -> tuple[np.ndarray, np.ndarray]:
    """Bemis-Murcko scaffold split: molecules grouped by scaffold, groups sorted by size (largest first, ties by
    scaffold string), each put on the training side while it stays within ``1 - test_frac`` of the molecules,
    the rest on the test side. No scaffold is on both sides. Returns sorted (train, test) indices."""
    from rdkit.Chem.Scaffolds import MurckoScaffold

    if not isinstance(smiles, (list, tuple)) or len(smiles) < 2 or not all(isinstance(s, str) for s in smiles):
        raise TypeError("smiles must be a list of at least 2 SMILES strings")
    if not (isinstance(test_frac, float) and 0 < test_frac < 1):
        raise ValueError(f"test_frac must be a float in (0, 1), got {test_frac!r}")
    groups: dict[str, list[int]] = {}
    for i, s in enumerate(smiles):
        groups.setdefault(MurckoScaffold.MurckoScaffoldSmiles(mol=tc.parse_smiles(s), includeChirality=False),
                          []).append(i)
    cut = (1 - test_frac) * len(smiles)
    train_idx, test_idx = [], []
    for scaf in sorted(groups, key=lambda g: (-len(groups[g]), g)):
        (train_idx if len(train_idx) + len(groups[scaf]) <= cut else test_idx).extend(groups[scaf])
    if not train_idx or not test_idx:
        raise ValueError("the scaffold split left one side empty")
    return np.array(sorted(train_idx)), np.array(sorted(test_idx))


def strings_sha256(feats: list, idx) -> str:
    """sha256 of the strings of molecules ``idx`` (each molecule's strings in order, one per line)."""
    h = hashlib.sha256()
    for m in idx:
        for f in feats[int(m)]:
            h.update(f.smiles.encode() + b"\n")
    return h.hexdigest()


_DATA: dict = {}


def prepare(cfg: dict) -> dict:
    """The data of a job (cached per data config): CHEMBL204 exactly as make_wsd.py prepares it; CHEMBL214 with
    the scaffold split and this set's vocabulary (no synthetic set)."""
    keys = ("dataset", "n_prop", "n_synth", "n_aug", "val_frac", "alert", "seeds", "split")
    key = json.dumps({k: cfg.get(k) for k in keys}, sort_keys=True)
    if key in _DATA:
        return _DATA[key]
    _DATA.clear()
    t0 = time.time()
    if cfg.get("split") == "murcko_scaffold":
        ps, py, _, source = tc.property_set(cfg["dataset"], cfg["n_prop"])
        tr_all, te = scaffold_split(ps, cfg["test_frac"])
        tr, val = tc.val_split(tr_all, cfg["val_frac"])
        vocab = tc.vocab_for(ps)
        d = dict(prop_smiles=ps, prop_y=torch.tensor(py, dtype=torch.float32), prop_tr=tr, prop_val=val,
                 prop_te=te, source=source + " (Murcko-scaffold split)", vocab=vocab,
                 prop_feats=tc.featurize_set(ps, vocab, cfg["n_aug"], seed=int(cfg["seeds"][0]), only=tr))
    else:
        d = tc.prepare(cfg)
    d["seconds"] = round(time.time() - t0, 1)
    d["prop_strings_sha256"] = strings_sha256(d["prop_feats"], d["prop_tr"])
    print(f"data ready in {d['seconds']:.0f} s ({d['source']})", flush=True)
    _DATA[key] = d
    return d


# ---- measures --------------------------------------------------------------------------------------------------
def pooled_sorted(model, items, chunk: int = 128) -> np.ndarray:
    """[CLS] embeddings in batches of ``chunk`` strings sorted by length (as the chapter's section 6)."""
    order = np.argsort([len(f.tokens) for f in items], kind="stable")
    z = np.concatenate([tc.pooled(model, [items[j] for j in order[i:i + chunk]]) for i in range(0, len(items), chunk)])
    out = np.empty_like(z)
    out[order] = z
    return out


def probs(model, items, vocab) -> tuple[np.ndarray, np.ndarray | None]:
    """P(active) and, for a sequence model, the [CLS] embeddings of ``items``."""
    if isinstance(model, tc.SeqEncoder):
        z = pooled_sorted(model, items)
        with torch.no_grad():
            return torch.sigmoid(model.head(torch.from_numpy(z))[:, 0]).numpy(), z
    return torch.sigmoid(tc.predict(model, items, vocab)[0][:, 0]).numpy(), None


def reroot_set(d: dict, n: int) -> dict:
    """The chapter's section 8 molecules: ``n`` test molecules, canonical + every rooted string, and the pairs."""
    idx = repro.rng(0, 5).choice(d["prop_te"], size=min(n, len(d["prop_te"])), replace=False)
    items, owner = [], []
    for m in idx:
        mol = tc.parse_smiles(d["prop_smiles"][m])
        strings = [d["prop_smiles"][m]] + [tc.rooted_smiles(mol, r) for r in range(mol.GetNumAtoms())]
        items += [tc.featurize(x, d["vocab"]) for x in strings]
        owner += [m] * len(strings)
    owner = np.array(owner)
    first = np.r_[True, owner[1:] != owner[:-1]]
    pairs = repro.rng(0, 6).integers(0, len(d["prop_te"]), size=(N_PAIRS, 2))
    return dict(items=items, canon_of=np.flatnonzero(first)[np.cumsum(first) - 1], rooted=~first,
                pairs=pairs[pairs[:, 0] != pairs[:, 1]])


def reroot_measures(p: np.ndarray, z: np.ndarray, p_test: np.ndarray, z_test: np.ndarray, rs: dict) -> dict:
    """Section 8's measures from the re-rooted strings' outputs ``p``, ``z`` and the test set's."""
    rooted, canon, pairs = rs["rooted"], rs["canon_of"], rs["pairs"]
    dp = float(np.abs(p - p[canon])[rooted].mean())
    between_dp = float(np.abs(p_test[pairs[:, 0]] - p_test[pairs[:, 1]]).mean())
    centre = z_test.mean(0)
    return dict(dp=dp, dp_between=between_dp, rel_dp=dp / between_dp if between_dp > 0 else float("nan"),
                cos=float(tc.centred_cosine(z[rooted], z[canon][rooted], centre).mean()),
                raw=float(tc.centred_cosine(z[rooted], z[canon][rooted], np.zeros(z.shape[1])).mean()),
                between=float(tc.centred_cosine(z_test[pairs[:, 0]], z_test[pairs[:, 1]], centre).mean()))


@contextlib.contextmanager
def no_positions(model):
    model.positional = lambda batch, parts=None: torch.zeros(())
    try:
        yield model
    finally:
        del model.positional


def _auc(y: np.ndarray, p: np.ndarray) -> float:
    return float(roc_auc_score(y, p)) if 0 < y.mean() < 1 else float("nan")


def snapshot_measures(model, cfg: dict, d: dict, ev: dict) -> dict:
    """Everything a reading needs of one (int8 round-tripped) snapshot; see the docstring."""
    y = (d["prop_y"] if cfg["task"] == "prop" else d["alert_y"]).numpy()
    p_val, _ = probs(model, ev["val_items"], d["vocab"])
    p_te, z_te = probs(model, ev["test_items"], d["vocab"])
    out = dict(val_auc=_auc(y[d["prop_val"]], p_val), test_auc=_auc(y[d["prop_te"]], p_te))
    if isinstance(model, tc.SeqEncoder):
        with no_positions(model):
            out["val_auc_no_pos"] = _auc(y[d["prop_val"]], probs(model, ev["val_items"], d["vocab"])[0])
        out["uses_positions"] = tc.uses_positions(out["val_auc"], out["val_auc_no_pos"])
        out["pe_token_ratio"] = tc.pe_token_ratio(model, tc.collate(ev["val_items"][:256]))
        if cfg["task"] == "prop":
            p, z = probs(model, ev["reroot"]["items"], d["vocab"])
            out.update(reroot_measures(p, z, p_te, z_te, ev["reroot"]))
        else:
            hits, chance = [], []
            for m in ev["cand"]:
                with torch.enable_grad():
                    attr, _ = tc.integrated_gradients(model, d["prop_feats"][m][0], cfg["ig_steps"])
                h, c = tc.alignment_at_k(np.abs(attr), d["alert_sets"][m])
                hits.append(h)
                chance.append(c)
            out.update(alignment=float(np.mean(hits)), chance=float(np.mean(chance)))
    return {k: (round(v, 6) if isinstance(v, float) and math.isfinite(v) else v) for k, v in out.items()}, p_te


def stored_weights(tensors: dict) -> dict:
    """The weights a checkpoint saved with ``dtype=float16, quantize='int8'`` gives back (what make_wsd.py stores)."""
    return checkpoints.int8_roundtrip({k: v.to(torch.float16) if v.is_floating_point() else v
                                       for k, v in tensors.items()})


# ---- one job ---------------------------------------------------------------------------------------------------
def run_job(cfg: dict, wsd_root: Path | None = None) -> dict:
    """Train and measure one job; returns its part record (JSON-able)."""
    d = prepare(cfg)
    k = cfg["seeds"][0]
    t0, c0 = time.time(), time.process_time()
    rec = dict(job=cfg["job"], config=cfg, source=d["source"], prop_strings_sha256=d["prop_strings_sha256"])
    y_all = d["prop_y"].numpy()
    if cfg["family"] == "ecfp":
        res = tc.ecfp_baseline(d["prop_smiles"], y_all, d["prop_tr"], d["prop_te"], seed=k, radius=cfg["radius"],
                               n_bits=cfg["n_bits"], logreg_c=cfg["logreg_c"], rf_trees=cfg["rf_trees"])
        rec["models"] = {m: dict(train_auc=r["train_auc"], test_auc=r["test_auc"],
                                 test_prob=[round(float(x), 5) for x in r["test_prob"]]) for m, r in res.items()}
        rec["timing"] = dict(data=d["seconds"], wall=round(time.time() - t0, 1),
                             cpu=round(time.process_time() - c0, 1))
        return rec
    kind, task = cfg["kinds"][0], cfg["task"]
    y = d["prop_y"] if task == "prop" else d["alert_y"]
    ev = dict(val_items=[d["prop_feats"][m][0] for m in d["prop_val"]],
              test_items=[d["prop_feats"][m][0] for m in d["prop_te"]])
    if kind in tc.SEQ_KINDS and task == "prop":
        ev["reroot"] = reroot_set(d, cfg["n_reroot"])
    if task == "alert":
        ev["cand"] = [m for m in d["prop_te"]
                      if 0 < len(d["alert_sets"][m]) < len(d["prop_feats"][m][0].atom_keys)][:cfg["n_alert"]]
    snaps: dict = {}
    model, hist = tc.fit_model(kind, d["prop_feats"], d["prop_tr"], y, d["vocab"], steps=cfg["steps"], seed=k,
                               batch_size=cfg["batch_size"], lr=cfg["lr"], width=cfg["width"],
                               val_idx=d["prop_val"], eval_every=cfg["eval_every"], auc_idx=tc.fit_sample(d["prop_tr"]),
                               schedule="wsd", warmup=cfg["warmup"], decay_steps=cfg["decay_steps"],
                               augment=cfg["augment"], snapshot_every=cfg["snapshot_every"], snapshots=snaps,
                               progress=sys.stderr.isatty(), desc=cfg["job"])
    train_s = time.time() - t0
    cond = tc.recipe_conditions(hist.loss, hist.evals["val_loss"], hist.evals["fit_auc"], until=tc.recipe_until(cfg))
    probe = tc.make_model(kind, len(d["vocab"]), seed=k, width=cfg["width"])
    per_step = []
    for step, sd in sorted(snaps.items()):
        probe.load_state_dict(stored_weights(sd))
        m, p_te = snapshot_measures(probe.eval(), cfg, d, ev)
        per_step.append(dict(step=step, **m))
    block = cfg["eval_every"]
    rec.update(
        conditions=cond, snapshots=per_step, steps=cfg["steps"],
        test_prob=[round(float(x), 5) for x in p_te],
        curves=dict(loss=[round(float(np.mean(hist.loss[i:i + block])), 5) for i in range(0, len(hist.loss), block)],
                    # the gating curves exact (the conditions are recomputed from them), val_auc to 6 digits
                    **{c: [[int(s), float(v) if c != "val_auc" else round(float(v), 6)] for s, v in hist.evals[c]]
                       for c in ("val_loss", "fit_auc", "val_auc")}),
        timing=dict(data=d["seconds"], wall=round(time.time() - t0, 1), train=round(train_s, 1),
                    cpu=round(time.process_time() - c0, 1), per_step=round(train_s / cfg["steps"], 4)))
    if cfg["job"].startswith("C_") and not cfg["quick"]:
        rec["reproduces_stored"] = reproduces_stored(model.state_dict(), k, cfg, wsd_root)
    print(f"{cfg['job']} s{k}: {cfg['steps']} steps in {train_s:.0f} s; "
          + ", ".join(f"{c} {v['value']:.3f} {'met' if v['met'] else 'NOT met'}" for c, v in cond.items())
          + f"; final {per_step[-1]}", flush=True)
    return rec


def reproduces_stored(state: dict, k: int, cfg: dict, wsd_root: Path | None) -> dict:
    """C's check: the final weights (int8 round trip) against the stored ``wsd_s<k>_<family>`` checkpoint."""
    name = f"wsd_s{k}_{cfg['family']}"
    try:
        ck = checkpoints.load(SLUG, name, config=tc.recipe_config(name), root=wsd_root, check_sources=False)
    except checkpoints.CheckpointError as err:
        return dict(stored=name, identical=None, why=str(err)[:200])
    tag = f"prop-{cfg['kinds'][0]}-s{k}"
    mine = stored_weights(state)
    theirs = ck.state_dict(prefix=tag + ".")
    if set(mine) != set(theirs):
        return dict(stored=name, identical=False, why="different parameter names")
    diff = max(float((mine[n].float() - theirs[n].float()).abs().max()) for n in mine)
    return dict(stored=name, identical=diff == 0.0, max_abs_diff=diff)


# ---- reading ---------------------------------------------------------------------------------------------------
GATING = ("val_flat", "fits")


def qualifies(rec: dict) -> bool:
    """A trained job meets the gating conditions (round 8: ``val_flat`` and ``fits``)."""
    cond = rec.get("conditions")
    if not isinstance(cond, dict) or any(c not in cond or "met" not in cond[c] for c in GATING):
        raise ValueError(f"record of {rec.get('job')!r} lacks the gating conditions {GATING}")
    return all(bool(cond[c]["met"]) for c in GATING)


def record_problems(rec: dict) -> list[str]:
    """What is wrong with a job's part record: its gating conditions disagree with its stored curves, its config
    is not the registered one, or its measures are missing."""
    out = []
    job, cfg = rec.get("job"), rec.get("config", {})
    k = (cfg.get("seeds") or [None])[0]
    if job not in JOBS or not isinstance(k, int):
        return [f"unknown job {job!r} or seed"]
    want = job_config(job, k, quick=bool(cfg.get("quick")))
    diff = checkpoints.diff_config(want, cfg)
    if diff:
        out.append(f"config differs from the registered one in {diff}")
    if job.endswith("ecfp"):
        return out if "models" in rec else out + ["no models"]
    cur = rec.get("curves", {})
    try:
        again = tc.recipe_conditions(np.linspace(1, 0, cfg["steps"]).tolist(), cur["val_loss"], cur["fit_auc"],
                                     until=tc.recipe_until(cfg))
    except (KeyError, TypeError, ValueError) as err:
        return out + [f"curves unreadable: {err}"]
    for c in GATING:
        if rec["conditions"][c]["met"] != again[c]["met"] or not math.isclose(
                rec["conditions"][c]["value"], again[c]["value"], rel_tol=1e-9, abs_tol=1e-12):
            out.append(f"{c} does not follow from the stored curve")
    snaps = rec.get("snapshots") or []
    if not snaps or snaps[-1].get("step") != cfg.get("steps"):
        out.append("no snapshot at the final step")
    return out


def paired_bootstrap(y: np.ndarray, p_a: np.ndarray, p_b: np.ndarray, n: int = 500, seed: int = 0) -> list[float]:
    """90% interval of ROC-AUC(a) - ROC-AUC(b) over resampled test molecules (paired)."""
    y, p_a, p_b = (np.asarray(x, float) for x in (y, p_a, p_b))
    if not (len(y) == len(p_a) == len(p_b)) or len(y) < 4:
        raise ValueError("y, p_a, p_b must have the same length (>= 4)")
    rng = repro.rng(seed, 11)
    diffs = []
    for _ in range(n):
        i = rng.integers(0, len(y), len(y))
        if 0 < y[i].mean() < 1:
            diffs.append(roc_auc_score(y[i], p_a[i]) - roc_auc_score(y[i], p_b[i]))
    return [float(np.quantile(diffs, 0.05)), float(np.quantile(diffs, 0.95))]


def resolved(intervals: list, qualifying: list[bool]) -> str:
    """Rule 1/2: 'a ahead', 'b ahead' when the 90% interval excludes 0 with the same sign at >= RESOLVED_AT
    qualifying seeds, else 'no resolved difference'."""
    if len(intervals) != len(qualifying):
        raise ValueError("one interval per seed")
    lo = sum(q and iv[0] > 0 for iv, q in zip(intervals, qualifying))
    hi = sum(q and iv[1] < 0 for iv, q in zip(intervals, qualifying))
    if lo >= RESOLVED_AT and not hi:
        return "a ahead"
    if hi >= RESOLVED_AT and not lo:
        return "b ahead"
    return "no resolved difference"


def two_set_verdict(v204: str, v214: str) -> str:
    """Rule 3: the paper's two-set property comparison from the verdicts on CHEMBL204 and CHEMBL214."""
    ok = ("held", "mixed", "not held", "inconclusive")
    if v204 not in ok or v214 not in ok:
        raise ValueError(f"verdicts must be among {ok}, got {v204!r}, {v214!r}")
    if v204 == v214 == "held":
        return "held"
    if "not held" in (v204, v214) and "held" not in (v204, v214):
        return "not held" if "inconclusive" not in (v204, v214) else "inconclusive"
    if "inconclusive" in (v204, v214):
        return "inconclusive"
    return "mixed"


def read_round9(rec: dict, strings: dict | None = None) -> dict:
    """The registered readings of one seed's merged record: per job whether it qualifies, C's reproduction,
    and the strings check against D (rule 5: a mismatch refuses the record)."""
    k = rec["seed"]
    jobs = rec["jobs"]
    if strings is not None:
        want = strings["seeds"][str(k)]["prop_train"]
        for job, r in jobs.items():
            if not job.startswith("B_") and r["prop_strings_sha256"] != want:
                raise ValueError(f"{job} at seed {k} did not train on the stored models' strings")
    out = dict(seed=k, qualifies={j: qualifies(r) for j, r in jobs.items() if not j.endswith("ecfp")},
               missing=[j for j in JOBS if j not in jobs])
    out["reproduces_stored"] = {j: r["reproduces_stored"].get("identical") for j, r in jobs.items()
                                if "reproduces_stored" in r}
    return out


# ---- D ---------------------------------------------------------------------------------------------------------
def strings_record(cfg: dict) -> dict:
    """sha256 of each seed's training strings, as every stored model of that seed saw them."""
    out = {}
    for k in cfg["seeds"]:
        wcfg = tc.recipe_config(f"wsd_s{k}_prop_tree_cycle", quick=cfg["quick"], seed=k)
        t0 = time.time()
        d = tc.prepare(wcfg)
        n = len(d["prop_smiles"])
        out[str(k)] = dict(
            prop_train=strings_sha256(d["prop_feats"], d["prop_tr"]),
            synth_train=strings_sha256(d["synth_feats"], d["synth_tr"]),
            prop_canonical=strings_sha256([[f[0]] for f in d["prop_feats"]], range(n)),
            split=hashlib.sha256(json.dumps([d["prop_tr"].tolist(), d["prop_val"].tolist(),
                                             d["prop_te"].tolist()]).encode()).hexdigest(),
            n_train=len(d["prop_tr"]), n_strings=int(sum(len(d["prop_feats"][m]) for m in d["prop_tr"])),
            example=d["prop_feats"][int(d["prop_tr"][0])][1].smiles)
        print(f"seed {k}: {out[str(k)]['prop_train'][:16]}... ({time.time() - t0:.0f} s)", flush=True)
    return out


# ---- main ------------------------------------------------------------------------------------------------------
def _write(path: Path, rec: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(checkpoints._manifest_text(json.loads(json.dumps(rec, default=checkpoints._json_default))))
    return path


def _part_path(parts: Path, k: int, job: str) -> Path:
    return Path(parts) / f"round9_s{k}.{job}.json"


def build(cfg: dict, out: Path | None, args: argparse.Namespace) -> list[Path]:
    root = scripts.data_root(out) / SLUG
    base = dict(round=9, registered=REGISTERED, source=checkpoints.source_hash(SOURCES))
    if args.name == "strings":
        rec = dict(what="sha256 of every seed's training strings (D): each training molecule's canonical + "
                   "randomized strings in molecule order, one per line", config=cfg, **base)
        rec["seeds"] = strings_record(cfg)
        return [_write(root / "strings.json", rec)]
    k = cfg["seeds"][0]
    quick = cfg["quick"]
    parts = args.parts
    if not quick and not args.merge and args.part is None:
        print(f"round9_s{k}: not built (about 3 core-hours): run it part by part, --part P --parts DIR, then "
              "--merge --parts DIR (make_round9.py's docstring)", flush=True)
        return []
    if args.part is not None and not 1 <= args.part <= len(JOBS):
        raise SystemExit(f"--part must be in 1..{len(JOBS)}")
    if parts is None and not quick:
        raise SystemExit("--part / --merge need --parts DIR")
    if parts is None:  # tiny: the parts in a temporary folder, outside the records
        with tempfile.TemporaryDirectory(prefix="round9_parts_") as tmp:
            return _round9(cfg, root, base, Path(tmp), args)
    return _round9(cfg, root, base, Path(parts), args)


def _round9(cfg: dict, root: Path, base: dict, parts: Path, args: argparse.Namespace) -> list[Path]:
    k, quick = cfg["seeds"][0], cfg["quick"]
    todo = [] if args.merge else ([JOBS[args.part - 1]] if args.part else list(JOBS))
    for job in todo:
        jcfg = job_config(job, k, quick=quick)
        path = _part_path(parts, k, job)
        key = scripts.part_key(jcfg, seed=k)
        if path.exists() and json.loads(path.read_text()).get("key") == key:
            print(f"{job} s{k}: reused {path}", flush=True)
            continue
        _write(path, dict(run_job(jcfg, args.wsd_root), key=key))
    if args.part is not None and not quick:
        return [_part_path(parts, k, JOBS[args.part - 1])]
    jobs, missing, timing = {}, [], {}
    for job in JOBS:
        path = _part_path(parts, k, job)
        if not path.exists():
            missing.append(job)
            continue
        r = json.loads(path.read_text())
        if r.get("key") != scripts.part_key(job_config(job, k, quick=quick), seed=k):
            raise SystemExit(f"{path} was trained under another config: run its part again")
        r.pop("key")
        timing[job] = r.pop("timing")
        jobs[job] = r
    if missing and not args.partial:
        raise SystemExit(f"round9_s{k}: parts missing {missing} (or --partial)")
    rec = dict(what="round 9 of chapter 07 (A, B, C), records only; see make_round9.py", seed=k, config=cfg,
               jobs=jobs, missing=missing, wall_seconds=timing, **base)
    return [_write(root / f"round9_s{k}.json", rec)]


def main(argv: list[str] | None = None) -> list[Path]:
    def options(ap: argparse.ArgumentParser) -> None:
        ap.add_argument("--part", type=int, default=None, metavar="P", help=f"train job P (1..{len(JOBS)}) only")
        ap.add_argument("--parts", type=Path, default=None, metavar="DIR", help="folder of the parts")
        ap.add_argument("--merge", action="store_true", help="write round9_s<k>.json from the parts")
        ap.add_argument("--partial", action="store_true", help="--merge with parts missing (listed)")
        ap.add_argument("--wsd-root", type=Path, default=None, help="data root of the stored wsd models (C)")

    return scripts.script_main(build, config=round9_config, tiny=lambda name: round9_config(name, quick=True, seed=0),
                               names=list(NAMES), default_names=["strings", "round9_s0"], options=options,
                               doc=__doc__, argv=argv)


if __name__ == "__main__":
    main()
