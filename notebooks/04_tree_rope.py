# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Tree rotary positions: extrapolating by composing digits instead of stretching one index
#
# A language model trained on short windows and then read at much longer lengths meets position differences it
# never saw. With rotary encoding (RoPE) every rotary pair is driven by the **same global index p**, so the only
# way to show the model large positional variation is to show it large index differences, which is exactly the
# extrapolation we wanted to avoid. The paper proposes **Tree Rotary Positional Encoding (TPE)**: a position is
# written as a composition of components (a path in a tree), each component drives its own rotary pairs, and no
# component ever leaves its training range. An **Offset-based Positional Training (OPT)** scheme then exposes the
# model, at short training length, to the combinations of components that long contexts produce. The paper reports
# 64× extrapolation (512 → 32K tokens) with perplexity 149.96 instead of RoPE's 4532.21 on a 1.2B model, at the <!-- paper -->
# same inference cost.
#
# | | the paper | this notebook |
# |---|---|---|
# | model | 1.2B transformer trained from scratch | 2-layer, d=64, 2-head byte-level transformer (`helpers.nn`): 16 rotary pairs, split 6/5/5 over TPE's three digits |
# | data | web-scale pretraining text | the CPython standard library's source, split by file (2 MB train, 200 KB held out) |
# | lengths | train 512, evaluate to 32K (64×) | train 32, evaluate to 2048 (the same 64×) |
# | training | full pretraining | 6000 AdamW steps of 32 windows per arm (≈ 3 epochs), warmup-stable-decay (the last 1200 steps decay), by `data/04_tree_rope/make_arms2.py` (`arms2`); loaded here (int8 weights) |
# | seeds | one run | 3 training seeds for the four claims' arms; four OPT variants on the same recipe: seed 0, then seeds 1-2 of the three that qualified (records, `make_opt_variants.py`, section 4); NoPE, the cross arms and the ablations: one seed of the earlier, smaller arms (d = 32, 600 steps; kept as records, section 4) |
# | evaluation | PG-19-style perplexity | 64 held-out windows per length that end on the same 32 bytes; paired bootstrap intervals |
# | a task that needs long context | passkey retrieval is a standard long-context benchmark | passkey retrieval (one passkey among filler, the query at the end), trained at 32 and tested to 2048; 5 arms × 3 seeds, by `data/04_tree_rope/make_retrieval.py`; and **offset recall** (the token right after a key: needs the order of tokens; NoPE shows whether it needs a positional encoding), 6 arms with NoPE × 3 seeds, by `make_recall.py` (section 7); the two-key task at d = 64 (round 5) stopped at its probe seed; round 6's probe asked why, and round 6 trained it at 3 seeds; round 7 retrains the arm-seeds below the bars from new initialisations by a registered restart rule (`make_recall3.py`); rounds 8–10 probe the recipe; rounds 11–12 add an auxiliary previous-token loss (`make_recall5.py`, `make_recall6.py`, 18000 steps): round 12 is what the claims read (section 7, records only) |
# | hardware | GPUs | 2 shared CPU cores (one thread) |
#
# The arms are trained once by the book's own script (`data/04_tree_rope/make_arms2.py`, one job per arm-seed; the
# time it took is printed below) and stored with int8 weights; the default run loads and evaluates them, quick mode
# trains tiny ones live. At this size a model is far from the paper's: the numbers test the *mechanism* at the paper's
# extrapolation ratio, not its perplexities.
#
# :::{note}
# **What is reconstructed.** The paper's full text is not available; only its abstract is. The TPE design here (a
# **mixed-radix** position: L base-B digits, each driving its own group of rotary pairs with its own small base) and
# the OPT scheme (random per-chunk offsets restricted to **multiples of B**; on the retrieval task, chunks of 2B) are
# our reconstruction, built so that every statement of the abstract holds; section 1 says how. On the byte corpus
# the registered OPT turned out to make the upper digits uninformative, so four variants of it that keep them
# informative were trained afterwards and carry their own claims (section 4). The paper's exact component design, bases and offset
# distribution may differ. The numbers below test *this* reconstruction, at small scale.
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
# ## Parameters
#
# The default run **loads** the arms trained by `data/04_tree_rope/make_arms2.py` (the model sizes, steps and arms
# are `tr.checkpoint_config("arms2")`, the single source the script, this notebook and the tests read; loading
# refuses a checkpoint trained with anything else and names the command that rebuilds it). The checkpoint holds
# three training seeds (0, 1, 2) of the four claims' arms; `seed` here seeds the bootstrap and the live checks. The
# earlier, smaller arms (`make_arms.py`: d = 32, 600 cosine steps, with NoPE, the cross arms and the ablations) are
# read from their records (`arms_records.json`, `data/04_tree_rope/make_arms_records.py`). The
# retrieval arms of section 7 come the same way from `data/04_tree_rope/make_retrieval.py`
# (`tr.checkpoint_config("retrieval")`, the passkey) and `data/04_tree_rope/make_recall.py`
# (`tr.checkpoint_config("recall2")`, offset recall with two keys), `data/04_tree_rope/make_recall3.py`
# (`"recall3"`, round 7's restarts of the two-key arms) and `data/04_tree_rope/make_recall6.py` (`"recall6"`, round
# 12, the arms the claims read). The OPT variants of section 4 are records (`optvar.json`,
# `data/04_tree_rope/make_opt_variants.py`; default run only). Quick mode trains tiny models live instead.

# %% tags=["parameters"]
quick = False
seed = 0
n_boot = 2000  # paired bootstrap resamples of the evaluation windows
live_windows = 8  # windows re-evaluated live to check the stored evaluation

# %% tags=["hide-input"]
import copy
import json

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch
from IPython.display import Markdown, display

from helpers import checkpoints, claims, nn, plotting, repro, scripts, train
from helpers import tree_rope as tr

SLUG = "04_tree_rope"
# the models of seeds seed, seed + 1, seed + 2 (seed 0: the committed config)
cfg = scripts.with_seeds(tr.checkpoint_config("arms2"), scripts.model_seeds(seed))
if quick:  # tiny models trained live, one seed, the four claims' arms, evaluated to 16x
    cfg = copy.deepcopy(cfg)
    cfg.update(d_model=16, n_layer=1, n_head=2, steps=150, warmup=10, decay_steps=30,
               batch_size=16, seeds=[seed])
    cfg["eval"] = dict(cfg["eval"], lengths=[32, 128, 512])
lengths, tail = cfg["eval"]["lengths"], cfg["eval"]["tail"]
train_len, target_len, n_chunks = cfg["train_len"], cfg["target_len"], cfg["n_chunks"]
n_head, d_model = cfg["n_head"], cfg["d_model"]
B, L = cfg["arms"]["TPE + OPT"]["B"], cfg["arms"]["TPE + OPT"]["L"]
longest = max(lengths)

# small ops: one thread wastes nothing on a shared machine
env = repro.setup(seed, threads=1)
plotting.use_style()
rec = claims.ClaimsRecord(
    SLUG,
    dict(quick=quick, seed=seed, n_boot=n_boot, live_windows=live_windows, **cfg),
)
print(env)
print(f"train length {train_len}, evaluation to {longest} ({longest // train_len}×)")

# %% [markdown]
# ## 1. The method (as reconstructed)
#
# **TPE.** Write a position p in L digits of radix B, `c_l(p) = ⌊p / B^l⌋ mod B`, so p is a leaf of a B-ary tree of
# depth L and its digits are the path. Split the `d_head/2` rotary pairs into L groups; pair j of group l rotates by
# `c_l(p) · b_l^(−j/|G_l|)`, with a small base `b_l = 2B` because a digit only spans [0, B). The rotation is
# block-diagonal and orthogonal, so a query–key score is
#
# $$q_m^\top R(m)^\top R(n)\,k_n = \sum_{l} q_{m,l}^\top R_l\big(c_l(n) - c_l(m)\big)\,k_{n,l}.$$
#
# How this meets each statement of the abstract:
# * **"represents absolute positions through compositions of different components"**: the digits are a bijection
#   on `[0, B^L)` (check `digits_roundtrip`);
# * **"avoiding single-index extrapolation"**: every level's term depends only on its digit difference, which lies
#   in (−B, B) at *any* length; nothing is ever rotated by an angle it never saw (check `relative_per_component`);
# * **"combinatorial position coverage"**: `L·(2B−1)` digit-difference values per level compose into the
#   ~`(2B−1)^L` tuples a long context produces (measured in section 4);
# * **"comparable inference-time efficiency"**: TPE is only a different cos/sin table; with L=1, base 10000 it *is*
#   RoPE (check `tpe_equals_rope_L1`); we time both.
#
# **OPT.** Trained on contiguous windows of 32 tokens, the upper digits of TPE barely vary (Δ₁ ∈ {−1, 0, 1}, Δ₂ = 0), so the
# model never learns how levels interact. OPT gives each of `n_chunks` chunks of a training window a random,
# non-decreasing offset that is a **multiple of B**: the lowest digit stays contiguous (`p mod B = i mod B`), while
# the upper digits jump, up to the target length. The control arm applies the same chunked skips with *arbitrary*
# integer offsets to RoPE (PoSE-style), to test whether the offsets alone are enough.

# %%
head_dim = d_model // n_head
p = torch.arange(B**L)
c = tr.digits(p, B, L)  # the key line: p -> (c_0, ..., c_{L-1})
print(
    "digits of 1000 in radix",
    B,
    ":",
    tr.digits(torch.tensor(1000), B, L).tolist(),
    "(lowest first)",
)
rec.check(
    "digits_roundtrip",
    bool(torch.equal(tr.from_digits(c, B), p)) and len(torch.unique(c, dim=0)) == B**L,
    True,
    note=f"digits are a bijection on [0, {B**L})",
)

tpe = tr.TreeRotaryEmbedding(head_dim, B, L)
print("rotary pairs per level:", tpe.groups, " bases:", tpe.bases)
Rs = [tr.rotation_matrix(tpe, int(q)) for q in (0, 1, 17, 1000, 4095)]
orth = max((R.T @ R - torch.eye(head_dim)).abs().max().item() for R in Rs)
rec.check("rotation_orthogonal", orth, 1e-6, op="<=", note="max |R(p)^T R(p) - I|")

rope = nn.RotaryEmbedding(head_dim)
rope_as_tpe = tr.TreeRotaryEmbedding(head_dim, B=8192, L=1, bases=[10000.0])
pp = torch.arange(8192)
q = torch.randn(1, n_head, len(pp), head_dim)
d_l1 = (rope(q, q, pp)[0] - rope_as_tpe(q, q, pp)[0]).abs().max().item()
rec.check(
    "tpe_equals_rope_L1",
    d_l1,
    1e-6,
    op="<=",
    note="L=1, base 10000: TPE rotates exactly like RoPE",
)

# equal digit-difference tuples give equal scores, even for very different distances
qv, kv = torch.randn(head_dim), torch.randn(head_dim)


def score(m, n):
    ang_q, ang_k = tpe.angles(torch.tensor([m])), tpe.angles(torch.tensor([n]))
    rot_q, rot_k = nn.apply_rotary(qv[None], ang_q), nn.apply_rotary(kv[None], ang_k)
    return (rot_q * rot_k).sum().item()


worst = tr.same_difference_score_gap(score, B, L, repro.rng(seed, 1), n_pairs=200)
rec.check(
    "relative_per_component",
    worst,
    1e-5,
    op="<=",
    note="200 random pairs vs pairs with the same digit-difference tuple",
)

# %% [markdown]
# The OPT sampler (the key lines are in `helpers.tree_rope.opt_position_ids`): offsets in units of B, sorted so
# they never decrease, bounded so the last id stays below the target.

# %%
ids = tr.opt_position_ids(repro.rng(seed, 2), 1000, train_len, B, target_len, n_chunks)
print("one OPT window:", ids[0][:: train_len // 16].tolist(), "...")
ok = bool(
    (np.diff(ids, axis=1) > 0).all()
    and ids.max() < target_len
    and (ids % B == np.arange(train_len) % B).all()
)
rec.check(
    "opt_ids_valid",
    ok,
    True,
    note="strictly increasing, < target, p mod B == i mod B (1000 windows)",
)

# %% [markdown]
# ## 2. Data and the arms
#
# Byte-level language modelling of Python source: the standard library of the running interpreter, every 10th file
# (sorted by path) held out. All arms share the model size, the initialization (per seed), the batches and the
# steps; they differ only in the positional encoding and the training position ids:
#
# | arm | encoding | training position ids | seeds |
# |---|---|---|---|
# | RoPE | RoPE, base 10000 | 0..31 | 3 |
# | RoPE + skips | RoPE, base 10000 | chunked skips, arbitrary offsets < 2048 (PoSE-style control) | 3 |
# | TPE | TPE, B=16, L=3 | 0..31 | 3 |
# | TPE + OPT | TPE, B=16, L=3 | OPT: chunk offsets multiples of 16, < 2048 | 3 |
# | *earlier, d = 32 arms (records):* NoPE | none | – | 1 |
# | RoPE + OPT offsets | RoPE | OPT's offsets (multiples of 16) on RoPE: cross arm | 1 |
# | TPE + skips | TPE, B=16, L=3 | arbitrary offsets (chunks *not* aligned with B): cross arm | 1 |
# | TPE + OPT, B=8 L=4 / B=64 L=2 | other radix and depth | OPT with that B | 1 |
# | TPE + OPT, bases 10000 | RoPE's base in every level | OPT | 1 |
#
# The first four rows are the claims' arms (`arms2`: d = 64, 6000 steps, three seeds each). The other rows were
# trained once, with the four claims' arms, in the chapter's first, smaller build (`arms`: d = 32, 8 rotary
# pairs, 600 cosine steps, about a third of an epoch); that build was superseded (section 3 says why), its weights
# left the repository, and what the chapter still reads of it (every arm's evaluation, the diagnostics that
# needed the weights) is kept as records. The cross arms and ablations were not rebuilt at d = 64. The training windows of a
# step are the same for every arm; only the position ids differ.

# %%
corpus = cfg["corpus"]
train_bytes, test_bytes = tr.stdlib_corpus(**corpus)
print(f"train {len(train_bytes):,} bytes, held out {len(test_bytes):,} bytes")
print(bytes(test_bytes[:160]).decode("utf-8", "replace"))
ev = cfg["eval"]
windows = tr.shared_tail_windows(
    test_bytes, lengths, ev["windows"], repro.rng(0, ev["stream"])
)
same_tail = all(
    torch.equal(windows[n][:, -tail - 1 :], windows[longest][:, -tail - 1 :])
    for n in lengths
)
rec.check(
    "identical_tail_tokens",
    same_tail,
    True,
    note=f"{ev['windows']} windows; the last {tail} scored tokens are the same at"
    " every length",
)


def seeds_of(arm):
    return cfg["seeds"][:1] if arm in cfg.get("one_seed_arms", []) else cfg["seeds"]


RUNS = [(arm, s) for arm in cfg["arms"] for s in seeds_of(arm)]

# %% [markdown]
# ## 3. The trained arms
#
# **Default run:** load the checkpoint, rebuild every arm's model and copy its weights in (stored as int8 with a
# scale per row). The script also evaluated every arm on the windows above (per-window losses at every length, the
# per-position loss at the longest length) and stored the results next to the weights; those stored numbers are what
# the comparisons read. It evaluated the full-precision model it had trained, so here we re-evaluate a few windows of
# every claims' arm live from the int8 weights and check that they agree at the training length (the analyses
# below that need the models, the scaled RoPE variants and the diagnostics, run on these int8 weights). **Quick
# mode:** train tiny models live with the same code.

# %%
models, hists, tails, wholes, curves = {}, {}, {}, {}, {}
if not quick:
    ckpt = checkpoints.load(SLUG, "arms2", config=cfg)
    man = ckpt.manifest
    for arm, s in RUNS:
        key = f"{arm}/{s}"
        models[(arm, s)] = ckpt.load_into(
            tr.make_model(cfg["arms"][arm], cfg),
            prefix=key + ".",
            ignore=["eval_"],  # the stored evaluation lives next to the weights
        )
        tails[(arm, s)] = ckpt.tensors[f"{key}.eval_tail"].float().numpy()
        wholes[(arm, s)] = ckpt.tensors[f"{key}.eval_whole"].float().numpy()
        curves[(arm, s)] = ckpt.tensors[f"{key}.eval_curve"].float().numpy()
    print(
        f"loaded {len(RUNS)} models from {SLUG}/arms2 "
        f"({man['weights']['bytes'] / 2**20:.2f} MB, int8 weights), trained in "
        f"{man['wall_seconds'] / 60:.0f} min of one-thread jobs"
    )
    gap = {}
    for arm in tr.CLAIM_ARMS:
        s = cfg["seeds"][0]
        for i, n in ((0, train_len), (-1, longest)):
            w = windows[n][:live_windows]
            live = tr.token_losses(models[(arm, s)], w)[:, -tail:].mean(1).numpy()
            stored = tails[(arm, s)][i, :live_windows]
            gap[(arm, n)] = abs(float(live.mean() - stored.mean()))
    print("int8 weights vs the stored evaluation, |Δ mean tail loss| at", longest, ":",
          ", ".join(f"{a} {gap[(a, longest)]:.4f}" for a in tr.CLAIM_ARMS))
    rec.check(
        "stored_eval_reproduces",
        max(gap[(a, train_len)] for a in tr.CLAIM_ARMS),
        0.02,
        op="<=",
        note=f"max |live − stored| mean tail loss (nats/byte), {live_windows} windows"
        f" of the training length, claims' arms, seed {cfg['seeds'][0]}: live from the"
        " int8 weights, stored from the full-precision model",
    )
else:
    for arm, s in RUNS:
        spec = cfg["arms"][arm]
        with repro.seeded(s):
            models[(arm, s)] = tr.make_model(spec, cfg)
            hists[(arm, s)] = train.fit(
                models[(arm, s)], tr.lm_loss, tr.batch_fn(spec, train_bytes, cfg, s),
                cfg["steps"], lr=cfg["lr"], warmup=cfg["warmup"],
                schedule=cfg["schedule"], decay_steps=cfg["decay_steps"], seed=s,
                desc=f"{arm} / seed {s}",
            )
        losses = {n: tr.token_losses(models[(arm, s)], w) for n, w in windows.items()}
        tails[(arm, s)] = np.stack(
            [losses[n][:, -tail:].mean(1).numpy() for n in lengths]
        )
        wholes[(arm, s)] = np.stack([losses[n].mean(1).numpy() for n in lengths])
        curves[(arm, s)] = losses[longest].mean(0).numpy()

# %% [markdown]
# **Were the arms trained enough to compare?** Two conditions, registered with the design (9740a68, before any of
# its training; `tr.ARMS2_CONDITIONS`), are read per arm-seed, and every claim names them for each arm it reads:
#
# * **plateau**: the held-out loss (every 100 steps, windows of the training length) improved by at most 5% of its
#   whole improvement over the last fifth of the **stable phase**, the steps before the learning rate decays.
#   (Read over the whole run, the decay's annealing would lower the last fifth of any curve, and a cosine schedule
#   makes a curve look flat because its learning rate has run down; in this chapter's first build, the plateau
#   passed for that reason.)
# * **beats_ngram**: at the training length the arm predicts the 32 shared tail bytes better than a byte 5-gram
#   counted on the same training bytes (`tr.ngram_token_losses`: 4 preceding bytes, Witten-Bell interpolation, no
#   positions): the ratio of the arm's tail perplexity to the n-gram's is below 1. An arm that fails it is beaten
#   *in distribution*, on the bytes it was trained to predict, by a lookup table of byte counts: it has not learned
#   what its data allow, and a perplexity ratio between it and another arm compares an under-fitted model, not two
#   positional encodings. A claim that reads such an arm is inconclusive at that seed.
#
# The curves (held-out loss, from the manifest in the default run; the grey line marks where the decay starts), and
# per arm-seed the two measures against their bars.

# %%
stable_end = cfg["steps"] - cfg["decay_steps"]
ng_order = tr.ARMS2_CONDITIONS["ngram_order"]
ng_tail = tr.ngram_token_losses(train_bytes, windows[train_len], ng_order)
ng_tail = ng_tail[:, -tail:].mean(1).numpy()  # per-window tail loss at train_len


def val_curve(arm, s):  # the manifest's held-out curve; quick: the live training loss
    return hists[(arm, s)].loss if quick else man["history"][f"{arm}/{s}/val_loss"]


fit_rows = []
for arm, s in RUNS:
    live = dict(plateau=train.plateau(val_curve(arm, s), until=stable_end),
                ngram_ratio=float(np.exp(tails[(arm, s)][0].mean() - ng_tail.mean())))
    stored = {} if quick else man["metrics"][f"{arm}/{s}"]
    fit_rows.append(dict(
        arm=arm, seed=s, final_val_loss=stored.get("final_val_loss", np.nan),
        # the registered values: make_arms2.py's (default), the live ones (quick)
        plateau=stored.get("plateau_stable", live["plateau"]),
        ngram_ratio=stored.get("ngram_ratio_at_train_len", live["ngram_ratio"]),
        live_plateau=live["plateau"], live_ngram_ratio=live["ngram_ratio"],
        minutes=np.nan if quick else man["extra"]["seconds_per_run"][f"{arm}/{s}"] / 60,
    ))
fit_tab = pd.DataFrame(fit_rows).set_index(["arm", "seed"])
fit_tab["plateau_met"] = fit_tab.plateau <= tr.ARMS2_CONDITIONS["plateau"][1]
fit_tab["beats_ngram"] = fit_tab.ngram_ratio < tr.ARMS2_CONDITIONS["beats_ngram"][1]
if not quick:  # the stored conditions are what this notebook computes from stored data
    stored_c = fit_tab[["plateau", "ngram_ratio"]].to_numpy()
    live_c = fit_tab[["live_plateau", "live_ngram_ratio"]].to_numpy()
    rec.check("arms2_conditions_reproduce", float(np.abs(stored_c - live_c).max()),
              2e-3, op="<=", note="max |stored − recomputed| plateau and n-gram ratio "
              "(the stored evaluation is float16)")

fig, ax = plt.subplots(1, 2, figsize=(10, 3.4), width_ratios=[1.5, 1])
for i, arm in enumerate(cfg["arms"]):
    for s in seeds_of(arm):
        c = val_curve(arm, s)
        xs, ys = (range(1, len(c) + 1), c) if quick else (c["step"], c["value"])
        ax[0].plot(xs, ys, color=plotting.PALETTE[i % len(plotting.PALETTE)], lw=1,
                   label=arm if s == cfg["seeds"][0] else None)
ax[0].axvline(stable_end, color="gray", ls=":", lw=1)
ax[0].set(xlabel="step", ylabel="held-out loss (nats/byte)" if not quick else
          "training loss (nats/byte)", ylim=(None, None if quick else 3.0),
          title="training (grey: the decay starts)")
ax[0].legend(fontsize=7)
lab = [f"{a}\n{s}" for a, s in fit_tab.index]
colors = [plotting.PALETTE[list(cfg["arms"]).index(a) % len(plotting.PALETTE)]
          for a, _ in fit_tab.index]
ax[1].bar(range(len(lab)), fit_tab.ngram_ratio, color=colors)
ax[1].axhline(1.0, color="k", lw=1)
ax[1].set_xticks(range(len(lab)), lab, fontsize=5, rotation=90)
ax[1].set(ylabel=f"tail ppl ÷ {ng_order}-gram's",
          title=f"at the training length {train_len}")
plt.tight_layout()
plt.show()
shown = fit_tab.drop(columns=["live_plateau", "live_ngram_ratio"]).round(4)
display(shown.style.set_caption(
    f"per arm-seed: plateau on the stable phase (steps ≤ {stable_end}; bar ≤ "
    f"{tr.ARMS2_CONDITIONS['plateau'][1]}) and tail perplexity ÷ the byte"
    f" {ng_order}-gram's at the training length (bar < 1)"))

# %% [markdown]
# What the table says (generated):

# %% tags=["remove-input"]
fails_ng = [f"{a} (seed {s}: {r:.4f})"
            for (a, s), r in fit_tab.ngram_ratio.items() if r >= 1]
fails_pl = [f"{a} (seed {s})" for (a, s), ok in fit_tab.plateau_met.items() if not ok]
display(Markdown(
    f"Largest plateau measure {fit_tab.plateau.max():.4f} "
    + ("(every arm-seed meets the bar). " if not fails_pl else
       f"(missed by {', '.join(fails_pl)}). ")
    + "Tail perplexity ÷ the n-gram's, mean over seeds: "
    + ", ".join(f"{a} {fit_tab.loc[a].ngram_ratio.mean():.3f}" for a in cfg["arms"]) + ". "
    + (f"The byte {ng_order}-gram beats {', '.join(fails_ng)} in distribution: every claim "
       "that reads those arm-seeds is inconclusive there (section 9)." if fails_ng else
       f"Every arm-seed beats the byte {ng_order}-gram in distribution.")
))

# %% [markdown]
# ## 4. Length extrapolation
#
# Every arm reads the held-out windows with contiguous positions 0…n−1. The primary metric is the loss on the
# **last 32 bytes of each window given the whole window**: the same 32 bytes at every length, so a change across
# lengths is the effect of the longer context alone, and every arm is scored on the same windows (paired). The
# whole-window perplexity is the secondary metric. Perplexities below are the mean over seeds.

# %%
rows = []
for (arm, s), t in tails.items():
    for i, n in enumerate(lengths):
        rows.append(
            dict(
                arm=arm,
                seed=s,
                length=n,
                tail_ppl=float(np.exp(t[i].mean())),
                ppl=float(np.exp(wholes[(arm, s)][i].mean())),
            )
        )
res = pd.DataFrame(rows)
order = list(cfg["arms"])
for col, cap in [
    ("tail_ppl", f"perplexity on the shared last {tail} bytes"),
    ("ppl", "whole-window perplexity"),
]:
    tab = res.groupby(["arm", "length"])[col].mean().unstack().loc[order]
    display(tab.round(2).style.set_caption(cap + " (mean over seeds)"))

# %%
fig, ax = plt.subplots(1, 2, figsize=(10, 3.4))
for arm in order:
    r = res[res.arm == arm].groupby("length").tail_ppl.mean()
    ls = "-" if arm in tr.CLAIM_ARMS else ":"
    ax[0].plot(r.index, r.values, marker="o", ls=ls, label=arm, ms=3)
ax[0].axvline(train_len, color="gray", ls=":", lw=1)
ax[0].set(
    xscale="log",
    yscale="log",
    xlabel="window length (bytes)",
    ylabel=f"perplexity on the last {tail} bytes",
    title="extrapolation (dotted: one seed)",
)
ax[0].legend(fontsize=6)


def smooth(y, k=15):
    return np.convolve(y, np.ones(k) / k, mode="valid")


for arm in tr.CLAIM_ARMS + ("NoPE",):
    if (arm, cfg["seeds"][0]) in curves:
        c = np.mean([curves[(arm, s)] for s in seeds_of(arm)], axis=0)
        ax[1].plot(smooth(c), label=arm, lw=1)
ax[1].axvline(train_len, color="gray", ls=":", lw=1)
ax[1].set(
    xscale="log",
    xlabel="position in the window",
    ylabel="loss (nats/byte)",
    title=f"per-position loss, windows of {longest}",
)
ax[1].legend(fontsize=7)
plt.tight_layout()
plt.show()

# %% [markdown]
# **A model-free baseline.** The byte 5-gram of section 3's `beats_ngram` condition, scored on the same tail bytes
# at the training length and at the longest. It uses no positions and no context beyond 4 bytes, so it cannot
# extrapolate badly, and an arm that had learned its training data should beat it at the training length.

# %%
ng_ppl = {train_len: float(np.exp(ng_tail.mean()))}  # section 3's n-gram, same windows
ng_loss = tr.ngram_token_losses(train_bytes, windows[longest], ng_order)
ng_ppl[longest] = float(torch.exp(ng_loss[:, -tail:].mean()))
arm_ppl = res.groupby(["length", "arm"]).tail_ppl.mean()
ng_tab = pd.DataFrame(
    [
        dict(
            length=n,
            ngram=ng_ppl[n],
            best_arm=arm_ppl.loc[n].idxmin(),
            best_arm_ppl=arm_ppl.loc[n].min(),
        )
        for n in ng_ppl
    ]
).set_index("length")
display(
    ng_tab.style.format(precision=2).set_caption(
        f"tail perplexity: order-{ng_order} byte n-gram vs the best arm "
        "(mean over seeds)"
    )
)

# %% [markdown]
# ### Paired bootstrap intervals
#
# Each comparison below is a perplexity ratio between two arms of the same seed on the same windows (the same
# tail bytes), with a 95% interval from resampling the windows (paired). A ratio whose interval contains 1 is
# no evidence of a difference.

# %%
g_boot = repro.rng(seed, 40)


def ratio(a, b, n):
    i = lengths.index(n)
    out = [
        tr.paired_bootstrap_ratio(tails[(a, s)][i], tails[(b, s)][i], n_boot, g_boot)
        for s in cfg["seeds"]
        if (a, s) in tails and (b, s) in tails
    ]
    return np.array(out)  # (seeds, 3): ratio, low, high


COMPARE = {
    "extrapolation_ppl_ratio": ("RoPE", "TPE + OPT", longest),
    "in_distribution_parity": ("TPE + OPT", "RoPE", train_len),
    "tpe_without_opt": ("TPE", "TPE + OPT", longest),
    "beats_skip_control": ("RoPE + skips", "TPE + OPT", longest),
}
ratios = {k: ratio(*v) for k, v in COMPARE.items()}
display(
    pd.DataFrame(
        [
            dict(
                comparison=f"{a} ÷ {b} at {n}",
                seed=s,
                ratio=r[0],
                low=r[1],
                high=r[2],
            )
            for k, (a, b, n) in COMPARE.items()
            for s, r in zip(cfg["seeds"], ratios[k])
        ]
    ).round(3)
)

# %% [markdown]
# ### The practitioner's baseline: RoPE scaled at inference
#
# A RoPE model is rarely run past its training length as it is: practitioners rescale its rotary frequencies at
# inference, without training. Three standard ways, implemented in `tr.ScaledRotaryEmbedding` (scale s = the
# evaluation length ÷ the training length, so at the training length every one is plain RoPE):
# **position interpolation** (PI, Chen et al. 2023) divides every angle by s, so every position of the long window
# falls inside the training range; **NTK-aware scaling** raises the base to base · s^(d/(d−2)), which keeps the
# fastest pair and interpolates the slowest by s; **YaRN** (Peng et al. 2023) interpolates only the pairs that
# turn fewer than α = 1 times in the training window, keeps those that turn more than β = 32 times, ramps in
# between, and sharpens attention by (1 + ln(s) / 10)² (queries and keys each × (1 + ln(s) / 10)).
#
# How they enter the claims was registered before any of these numbers was computed (session 27): a new claim,
# `beats_scaled_rope`, compares TPE + OPT at the longest length with the **best per seed** of RoPE, RoPE + PI,
# RoPE + NTK and RoPE + YaRN (lowest tail perplexity at that length; the same stored RoPE weights, nothing
# retrained), as the lower end of the 95% paired interval of best ÷ TPE + OPT, target > 1, with the conditions of
# `extrapolation_ppl_ratio`. That claim (RoPE as trained, the paper's comparison) is kept unchanged beside it.
#
# **A fourth candidate, added after the results were seen (session 29, disclosed).** The diagnosis below found that
# RoPE with attention limited to its last 32 keys (a sliding window at inference, the same stored weights) beats
# every arm at the longest length. It is the stronger baseline, so it joins the best-of set that feeds
# `beats_scaled_rope` and the variants' `beats_scaled_rope_<variant>`: every tail byte sees exactly its last 32 keys,
# at its true position, on all evaluation windows of every seed (at the training length it is plain RoPE). This
# makes the claims harder to hold, never easier; their ids, ops, targets and conditions are unchanged.

# %%
SCALINGS = {"RoPE + PI": "pi", "RoPE + NTK": "ntk", "RoPE + YaRN": "yarn"}
for name, method in SCALINGS.items():
    for s in seeds_of("RoPE"):
        tails[(name, s)] = np.stack(
            [tails[("RoPE", s)][0]]  # the training length: scale 1 is plain RoPE
            + [
                tr.token_losses(
                    tr.with_rope_scaling(
                        models[("RoPE", s)], method, n / train_len, train_len
                    ),
                    windows[n],
                )[:, -tail:]
                .mean(1)
                .numpy()
                for n in lengths[1:]
            ]
        )
WINDOWED = "RoPE + 32-key window"  # a sliding window at inference (added in session 29)
for s in seeds_of("RoPE"):
    rows_w = [tails[("RoPE", s)][0]]  # the training length: every key is in the window
    for n in lengths[1:]:
        w_n = windows[n][:, -(tail + train_len + 1) :]  # the tail and its 32 keys
        pos_n = torch.arange(n - (w_n.shape[1] - 1), n)  # their true positions
        m_r = models[("RoPE", s)]
        lw = tr.tail_loss_with_keys(m_r, w_n, tail, train_len, pos=pos_n)
        rows_w.append(lw.detach().numpy())
    tails[(WINDOWED, s)] = np.stack(rows_w)
BEST_OF = ["RoPE", *SCALINGS, WINDOWED]  # the candidates of beats_scaled_rope
scal_arms = [*BEST_OF, "RoPE + skips", "TPE + OPT"]
scal_ppl = pd.DataFrame(
    {
        a: [
            np.mean([np.exp(tails[(a, s)][i].mean()) for s in seeds_of("RoPE")])
            for i in range(len(lengths))
        ]
        for a in scal_arms
    },
    index=pd.Index(lengths, name="length"),
)
best_scaled = {  # per seed: the best of RoPE, scalings and window at the longest
    s: min(BEST_OF, key=lambda a: tails[(a, s)][-1].mean())
    for s in cfg["seeds"]
}
g_scal = repro.rng(seed, 94)  # its own stream: the other intervals keep theirs
ratios_scaled = np.array(
    [
        tr.paired_bootstrap_ratio(
            tails[(best_scaled[s], s)][-1], tails[("TPE + OPT", s)][-1], n_boot, g_scal
        )
        for s in cfg["seeds"]
    ]
)
display(
    scal_ppl.style.format(precision=2).set_caption("tail perplexity (mean over seeds)")
)

# %% [markdown]
# The same numbers as a figure (dashed: the scaled variants and the sliding window of the stored RoPE models; the
# grey line is the training length).

# %%
fig, ax = plt.subplots(figsize=(6.4, 3.2))
for i, a in enumerate(scal_arms):
    ax.plot(
        lengths,
        scal_ppl[a],
        marker="o",
        label=a,
        color=plotting.PALETTE[i % len(plotting.PALETTE)],
        ls="--" if a in (*SCALINGS, WINDOWED) else "-",
    )
ax.axvline(train_len, color="grey", lw=0.8)
ax.set(
    xscale="log",
    yscale="log",
    xlabel="evaluation length (bytes)",
    ylabel="tail perplexity",
    title="RoPE scaled at inference vs TPE + OPT",
)
ax.legend(fontsize=7, ncol=2)
plt.show()

# %% [markdown]
# What the table says, generated: the best RoPE baseline at each length (plain, scaled or windowed), and where
# TPE + OPT stands against it. The claim `beats_scaled_rope` (section 9) reads the longest length with its interval
# and its conditions.

# %%
best_at = scal_ppl[BEST_OF].idxmin(axis=1)
sp, past = scal_ppl, lengths[1:]
best_long = sp.loc[longest, best_at[longest]]
skips_best = (
    sp.loc[past, "RoPE + skips"]
    < sp.loc[past, [*SCALINGS, "RoPE", "TPE + OPT"]].min(axis=1)
).all()
display(
    Markdown(
        " ".join(
            f"At {n}: the best RoPE baseline is {best_at[n]} "
            f"({sp.loc[n, best_at[n]]:.2f}, plain RoPE {sp.loc[n, 'RoPE']:.2f}); "
            f"TPE + OPT {sp.loc[n, 'TPE + OPT']:.2f}, "
            f"RoPE + skips {sp.loc[n, 'RoPE + skips']:.2f}."
            for n in past
        )
        + " The best RoPE baseline at inference "
        + (
            "narrows RoPE's gap to TPE + OPT but does not close it at the longest"
            " length;"
            if best_long > sp.loc[longest, "TPE + OPT"]
            else f"beats TPE + OPT at the longest length ({best_long:.2f} against"
            f" {sp.loc[longest, 'TPE + OPT']:.2f});"
        )
        + " RoPE trained with PoSE-style skips stays "
        + (
            "below every inference-time scaling, plain RoPE and TPE + OPT at every"
            " length past the training one"
            if skips_best
            else "below them at some lengths only"
        )
        + f"; RoPE with its last {train_len} keys only reads "
        + f"{sp.loc[longest, WINDOWED]:.2f} at {longest}, "
        + (
            "below RoPE + skips."
            if sp.loc[longest, WINDOWED] < sp.loc[longest, "RoPE + skips"]
            else "not below RoPE + skips."
        )
    )
)

# %% [markdown]
# ### What changed from the chapter's first, smaller arms
#
# The perplexity claims first read the `arms` build: d = 32, 8 rotary pairs (TPE 3/3/2), 600 cosine steps, about
# a third of an epoch. Its plateau condition read the end of a cosine schedule, where the learning rate has run
# down, and the byte 5-gram scored better than its arms in distribution (the last column below), so the build was
# replaced by `arms2` (wider, ten times the steps, the conditions of section 3), registered before any of its
# training. The weights of the first build left the
# repository to make room; its evaluation is kept as records (`arms_records.json`, written from the stored
# checkpoint by `data/04_tree_rope/make_arms_records.py`). The same paired comparisons on both builds (mean ratio
# over the three seeds; low/high: the widest 95% interval over them), and per arm the numbers that moved:

# %%
recs1 = json.loads(checkpoints.fetch(SLUG, "arms_records.json").read_text())
cfg1, runs1 = recs1["config"], recs1["runs"]
tails1 = {(k.rsplit("/", 1)[0], int(k.rsplit("/", 1)[1])): np.asarray(r["eval_tail"])
          for k, r in runs1.items()}
len1 = cfg1["eval"]["lengths"]
rows_d = []
for a, b, n in COMPARE.values():
    for build, tl, lens, seeds_b in (("d = 32, 600 steps", tails1, len1, cfg1["seeds"]),
                                     ("arms2", tails, lengths, cfg["seeds"])):
        i = lens.index(n)
        r = np.array([
            tr.paired_bootstrap_ratio(tl[(a, s)][i], tl[(b, s)][i], n_boot, g_boot)
            for s in seeds_b])
        rows_d.append(dict(comparison=f"{a} ÷ {b} at {n}", build=build,
                           ratio=r[:, 0].mean(), low=r[:, 1].min(), high=r[:, 2].max()))
changed = pd.DataFrame(rows_d).set_index(["comparison", "build"])
display(changed.round(3))
arm_rows = []
for arm in tr.CLAIM_ARMS:
    one = [runs1[f"{arm}/{s}"] for s in cfg1["seeds"]]
    arm_rows.append(dict(
        arm=arm,
        ppl32_d32=np.mean([np.exp(np.mean(r["eval_tail"][0])) for r in one]),
        ppl32_arms2=np.mean([np.exp(tails[(arm, s)][0].mean()) for s in cfg["seeds"]]),
        ppl_longest_d32=np.mean([np.exp(np.mean(r["eval_tail"][len1.index(longest)]))
                                 for r in one]),
        ppl_longest_arms2=np.mean([np.exp(tails[(arm, s)][-1].mean())
                                   for s in cfg["seeds"]]),
        window_use_d32=np.mean([r["window_use"]["gain"] for r in one]),
        # the same windows as arms2's in the default run (same corpus, same evaluation)
        ngram_ratio_d32=np.mean([np.exp(np.mean(r["eval_tail"][0]) - ng_tail.mean())
                                 for r in one]) if not quick else np.nan))
arm_changed = pd.DataFrame(arm_rows).set_index("arm")
display(arm_changed.round(3).style.set_caption(
    f"tail perplexity at {train_len} and {longest} (mean over seeds); the d = 32 arms'"
    " window use (ppl with all 32 keys ÷ best with 4, 8 or 16; < 1: reads its window)"
    f" and tail ppl ÷ the byte {ng_order}-gram's at {train_len} (default run)"))

# %% [markdown]
# ### Cross arms and ablations (one seed, the d = 32 build)
#
# The arms trained once, read from the first build's records against that build's TPE + OPT (seed 0): does RoPE
# gain from OPT's offsets, does TPE need offsets aligned with B, and how much do the radix, the depth and the
# per-level bases matter? They were not rebuilt at d = 64, so they compare under-trained models (the d = 32 claim
# arms all lost to the byte 5-gram in distribution).

# %%
s1 = cfg1["seeds"][0]
abl = []
for arm in cfg1["arms"]:
    if arm == "TPE + OPT" or (arm, s1) not in tails1:
        continue
    r, lo, hi = tr.paired_bootstrap_ratio(
        tails1[(arm, s1)][-1], tails1[("TPE + OPT", s1)][-1], n_boot, g_boot
    )
    abl.append(
        dict(
            arm=arm,
            tail_ppl_at_train_len=float(np.exp(tails1[(arm, s1)][0].mean())),
            tail_ppl_longest=float(np.exp(tails1[(arm, s1)][-1].mean())),
            ratio_to_TPE_OPT=r,
            low=lo,
            high=hi,
        )
    )
display(pd.DataFrame(abl).round(3).style.set_caption(
    f"d = 32 build, seed {s1}: tail perplexity at {len1[0]} and {len1[-1]}, and the"
    f" ratio to TPE + OPT at {len1[-1]} (95% paired interval)"))

# %% [markdown]
# ### Diagnosis: is it the far context or the unseen positions?
#
# When an arm degrades at long lengths, there are two explanations: its encoding of *near* keys at large absolute
# positions is off-distribution, or it attends to *far* keys it should ignore. To tell them apart we re-score the
# tail of the longest windows with attention **limited to the last 32 keys** (the training length): the near keys
# keep their true, large positions, the far ones are hidden. Both encodings are relative (RoPE exactly; TPE per
# digit, and the digit differences inside this band are the same as in a band at small positions), so this masked
# number is what the arm would score on the same bytes at small positions: if it is far below the full-context
# number, the damage came from the far keys. It need not equal the training-length number: there, the tail bytes
# see 1 to 32 keys (a window starting at position 0); under the mask every tail byte sees exactly 32.

# %%
s0 = cfg["seeds"][0]
n_diag = 8 if quick else 16
w = windows[longest][:n_diag]
diag = []
for arm in tr.CLAIM_ARMS:
    local = tr.tail_loss_with_keys(models[(arm, s0)], w, tail, keys=train_len)
    diag.append(
        dict(
            arm=arm,
            at_train_len=float(np.exp(tails[(arm, s0)][0][:n_diag].mean())),
            full_context=float(np.exp(tails[(arm, s0)][-1][:n_diag].mean())),
            last_32_keys_only=float(torch.exp(local.mean())),
        )
    )
diag = pd.DataFrame(diag).set_index("arm")
display(
    diag.round(3).style.set_caption(
        f"tail perplexity at {longest}, seed {s0}, {n_diag} windows"
    )
)

# %% [markdown]
# **How many keys does each arm use, and which ones hurt?** The same tail bytes, at their true positions at the end
# of the longest windows, now with every query limited to its last k keys, k from 4 to 64 (mean over the arm's
# seeds). An arm that reads its context well gets better or stays level as k grows; a rise means that the extra
# keys mislead it.

# %%
ks = [4, 8, 16, 32, 64]
w_k = windows[longest][:n_diag, -(tail + 64 + 1) :]  # the last 96 inputs and the tail
pos_k = torch.arange(longest - (w_k.shape[1] - 1), longest)  # their true positions
k_rows = []
for arm in tr.CLAIM_ARMS:
    for s in seeds_of(arm):
        for k in ks:
            lk = tr.tail_loss_with_keys(models[(arm, s)], w_k, tail, keys=k, pos=pos_k)
            k_rows.append(
                dict(arm=arm, seed=s, keys=k, ppl=float(torch.exp(lk.mean())))
            )
k_tab = pd.DataFrame(k_rows).groupby(["arm", "keys"], sort=False).ppl.mean().unstack()
display(
    k_tab.round(2).style.set_caption(
        f"tail perplexity with the last k keys visible (positions {longest - 96}–"
        f"{longest - 1}, {n_diag} windows, mean over seeds)"
    )
)

# %% [markdown]
# **Which keys does the last layer look at?** The attention weight on the key d positions back, d = 0…63, for the
# same queries (full causal context inside these 96 bytes, true positions, mean over heads, windows and seeds).
# Vertical lines mark multiples of B = 16.

# %%
prof = {
    arm: np.mean(
        [
            tr.attention_by_distance(
                models[(arm, s)], w_k[:, :-1], tail, 64, pos=pos_k
            )[-1]
            for s in seeds_of(arm)
        ],
        axis=0,
    )
    for arm in tr.CLAIM_ARMS
}
fig, ax = plt.subplots(figsize=(7.5, 3.2))
for arm, pr in prof.items():
    ax.plot(np.arange(64), pr, marker=".", ms=3, lw=1, label=arm)
for j in range(B, 64, B):
    ax.axvline(j, color="gray", ls=":", lw=1)
ax.set(
    xlabel="key distance d (positions back)",
    ylabel="attention weight",
    yscale="log",
    title=f"last layer, tail queries at positions {longest - tail}–{longest - 1}",
)
ax.legend(fontsize=7)
plt.show()
alias = pd.DataFrame(
    {
        arm: {
            "d = 1": pr[1],
            f"d = {B + 1}": pr[B + 1],
            f"d = {2 * B + 1}": pr[2 * B + 1],
            "median over d": float(np.median(pr)),
        }
        for arm, pr in prof.items()
    }
).T
display(alias.round(4).style.set_caption("last-layer attention at selected distances"))

# %% [markdown]
# Reading the two tables (the generated summary in section 10 gives the numbers): if TPE + OPT's perplexity rises
# once keys 16 or more back become visible, and its attention has secondary peaks one period B after its main
# peak, then the arm reads distance from the lowest digit alone. That is what OPT as reconstructed teaches: the
# offsets are multiples of B, so in training the upper digits of a key jump at random and say nothing about how
# far back it is in the text, while the lowest digit always does. The lowest digit repeats every B positions, so
# at test time a key B + 1 back looks like a key 1 back. The offsets reach every upper-digit combination (the
# coverage in section 5), but they also make those digits uninformative.

# %% [markdown]
# The mask tells *whether* the far keys do the damage; the next measurement shows *how much attention* each arm gives
# them. For the last 32 queries of the longest windows we sum the attention weight on keys at least 32 positions
# back (full causal context), per layer, averaged over heads, windows and the arm's seeds. Attention spread evenly
# over all keys would put almost all of it there; an arm that learned to ignore the far keys puts little.

# %%
n_far = 2
w_far = windows[longest][:n_far, :-1]
uniform = float(
    np.mean([(t + 1 - train_len) / (t + 1) for t in range(longest - tail, longest)])
)
far_rows = []
for arm in tr.CLAIM_ARMS:
    for s in seeds_of(arm):
        mass = tr.far_attention_mass(models[(arm, s)], w_far, tail, train_len)
        far_rows.append(
            dict(arm=arm, seed=s, **{f"layer {i + 1}": v for i, v in enumerate(mass)})
        )
far_tab = pd.DataFrame(far_rows).groupby("arm", sort=False).mean().drop(columns="seed")
far_tab["tail ppl at longest"] = [
    float(np.mean([np.exp(tails[(a, s)][-1].mean()) for s in seeds_of(a)]))
    for a in far_tab.index
]
nope1 = runs1.get(f"NoPE/{s1}")  # NoPE exists only in the d = 32 build (records)
if nope1 is not None and len(nope1["far_mass"]) == far_tab.shape[1] - 1:
    nope_tail = np.mean(nope1["eval_tail"][len1.index(longest)])
    far_tab.loc[f"NoPE (d = 32 build, seed {s1})"] = [
        *nope1["far_mass"], float(np.exp(nope_tail))]
display(
    far_tab.round(3).style.set_caption(
        f"attention mass on keys ≥ {train_len} back, last {tail} queries, windows of"
        f" {longest} (uniform attention: {uniform:.3f})"
    )
)

# %% [markdown]
# ### Diagnosis: where does TPE + OPT lose at the training length?
#
# TPE + OPT changes two things against RoPE: the encoding (the rotary pairs split over the L digits, so the lowest
# digit drives only about a third of them) and the training position ids (chunks with jumps between them, so a
# key's position says little about how far back it is in the text beyond its own chunk). The paired ratios below,
# at the training length, separate the two costs, and do the same for the skips on RoPE. (What a lowest digit
# spanning the whole training window changes, B = 64, is in the d = 32 ablation table above.)

# %%
ID_COST = {
    "TPE ÷ RoPE (the encoding)": ("TPE", "RoPE"),
    "TPE + OPT ÷ TPE (the offsets, on TPE)": ("TPE + OPT", "TPE"),
    "RoPE + skips ÷ RoPE (the skips, on RoPE)": ("RoPE + skips", "RoPE"),
}
id_cost = {
    k: ratio(a, b, train_len) for k, (a, b) in ID_COST.items() if (a, s0) in tails
}
display(
    pd.DataFrame(
        [
            dict(
                comparison=k,
                seeds=len(r),
                ratio=r[:, 0].mean(),
                low=r[:, 1].min(),
                high=r[:, 2].max(),
            )
            for k, r in id_cost.items()
        ]
    )
    .round(3)
    .style.set_caption(
        f"tail perplexity ratios at the training length {train_len} (mean ratio;"
        " low/high: the widest 95% paired interval over the seeds)"
    )
)

# %% [markdown]
# ### OPT variants that keep the upper digits informative
#
# **Why they exist.** The OPT registered for the byte corpus (and kept in `arms2`) cuts each 32-byte training
# window into 4 chunks of 8 bytes and shifts each chunk by its own random multiple of B = 16. A chunk is shorter
# than B, so inside a chunk the upper digits `c_1, c_2` do not change at all, and between chunks they jump by a
# random amount: in training, the upper-digit difference between a query and a key says nothing about how far
# apart they are in the text. Only the lowest digit does, and it is periodic in B, so at test time a key B + 1 back
# carries the same lowest-digit rotation as a key 1 back. The diagnosis above reads exactly that aliasing. The
# offsets do reach every combination of digits (section 5), but they teach the model to ignore the upper ones.
#
# Four variants of the training position ids keep the upper digits informative (issue #62; registered in 05a7f67
# before any of their training, `data/04_tree_rope/make_opt_variants.py`, on `arms2`'s recipe, seeds and windows):
#
# * **whole window**: one offset per window, a multiple of B: every digit difference inside the window is that of
#   contiguous text, at a random absolute position;
# * **mix**: the registered 4-chunk OPT on half of the windows, plain ids 0…32 on the other half;
# * **levels**: 4 chunks whose offsets are multiples of B^l, l ∈ {1, 2} drawn per window (at l = 2 only the top
#   digit jumps);
# * **B = 8, L = 4, chunks of 2B**: radix 8, four digits (pairs 4/4/4/4), 2 chunks of 16 bytes, the retrieval
#   task's scheme: inside a chunk every digit above the lowest changes as in contiguous text.
#
# Each stores, per seed, `arms2`'s two fit conditions (stable-phase plateau, tail perplexity ÷ the byte 5-gram's),
# the per-window tail losses on the same evaluation windows as `arms2`, and the aliasing reading: last-layer
# attention at distance B + 1 over distance 1 (the variant's own B) at the end of 16 windows of 2048. **The
# registered reading** at seed 0: a variant *qualifies* when its alias is at most a fifth (between the first build's
# TPE + OPT and its other arms) and both fit conditions are met; only qualifying variants train seeds 1 and 2.
#
# **History, disclosed.** The claims on the qualifying variants (`tr.OPTVAR_CLAIMS`: `arms2`'s four perplexity
# claims with the same op, target and interval end, the variant in TPE + OPT's place) were registered in 4d610bb
# *after* seed 0's conditions and aliasing were seen, and before seeds 1 and 2 trained and before any variant's
# perplexity ratio was read. The seeds 1-2 trained in session 28; the first merge kept seed 0 only (a bug in the
# script's `--merge`), and they were merged from the same stored parts in session 29, before this section read
# any ratio. The next cell loads the records (default run only: quick mode has no variants, and records none of
# their claims) and computes the registered comparisons with `tr.optvar_claim_inputs`, the same paired bootstrap
# on the same windows as `arms2`'s claims, on its own random stream.

# %%
ov, ov_arms, ov_short = None, [], {}
if not quick:
    optvar = json.loads(checkpoints.fetch(SLUG, "optvar.json").read_text())
    keep = ("arms", "seeds", "diag", "alias_bar")  # the variants' own keys

    def recipe(c):
        return json.dumps({k: v for k, v in c.items() if k not in keep}, sort_keys=True)

    rec.check("optvar_recipe_is_arms2", recipe(optvar["config"]) == recipe(cfg), True,
              note="the variants' stored config is arms2's but for arms, seeds, diag,"
              " alias_bar: same recipe, evaluation windows and lengths")
    ov = tr.optvar_claim_inputs(  # the registered comparisons, their own stream
        optvar, tails, lengths, train_len, seeds=cfg["seeds"], n_boot=n_boot,
        rng=repro.rng(seed, 96), best_scaled=best_scaled)
    ov_arms = tr.optvar_qualifying(optvar)  # the registered reading, re-checked
    ov_short = {a: tr.OPTVAR_SHORT[a] for a in optvar["config"]["arms"]}
    rows = []
    for a, spec in optvar["config"]["arms"].items():
        r0 = optvar["records"][f"{a}/0"]
        rows.append(dict(
            variant=a, B=spec["B"], L=spec["L"], alias=r0["alias"],
            plateau=r0["plateau_stable"], ngram_ratio=r0["ngram_ratio"],
            window_use=r0["window_use"], **optvar["reading"][a],
            seeds=sum(k.startswith(a + "/") for k in optvar["records"])))
    ov_tab = pd.DataFrame(rows).set_index("variant")
    C_ = tr.ARMS2_CONDITIONS["plateau"][1], tr.ARMS2_CONDITIONS["beats_ngram"][1]
    display(ov_tab.round(4).style.set_caption(
        "seed-0 reading (alias: attention at d = B + 1 ÷ d = 1, bar ≤ "
        f"{optvar['config']['alias_bar']}; plateau ≤ {C_[0]}, ngram ratio < {C_[1]});"
        " seeds: how many are stored"))
    vt = dict(ov["tails"])  # the variants' tails; one that did not qualify: seed 0
    vt.update({(a, 0): np.asarray(optvar["records"][f"{a}/0"]["eval_tail"])
               for a in ov_short if a not in ov_arms})

    def mean_ppl(src, a):  # tail perplexity per length, mean over the stored seeds
        return [np.mean([np.exp(t[i].mean()) for (b, _), t in src.items() if b == a])
                for i in range(len(lengths))]

    ov_ppl = pd.DataFrame(
        {**{a: mean_ppl(tails, a) for a in ("RoPE", "RoPE + skips", "TPE + OPT")},
         **{a: mean_ppl(vt, a) for a in ov_short}},
        index=pd.Index(lengths, name="length"))
    display(ov_ppl.T.round(2).style.set_caption(
        "tail perplexity, mean over the stored seeds (a variant that did not qualify:"
        " seed 0 only)"))
else:
    print("quick mode: the OPT variants are stored records of the full-size recipe;"
          " not read here")

# %% [markdown]
# The same records as a figure. Left: RoPE's tail perplexity ÷ each arm's at every length (the per-seed ratio on
# the same windows, mean over the arm's seeds; dotted: the variant that did not qualify, seed 0 only), with
# `arms2`'s TPE + OPT and RoPE + skips beside the variants; the dashed line is the bar of
# `extrapolation_ppl_ratio`, 2 at the longest length. Right: the aliasing reading per variant and seed against
# its bar, with `arms2`'s arms as the diagnosis above read them (mean over seeds).

# %%
if ov is not None:
    def rope_over(a):  # RoPE tail ppl / a's per length: per seed, mean over a's seeds
        src = vt if a in ov_short else tails
        return np.mean([np.exp(tails[("RoPE", s)].mean(1) - t.mean(1))
                        for (b, s), t in src.items() if b == a], axis=0)

    fig, ax = plt.subplots(1, 2, figsize=(10, 3.6), width_ratios=[1.2, 1])
    for j, a in enumerate(["TPE + OPT", "RoPE + skips", *ov_short]):
        ax[0].plot(lengths, rope_over(a), marker="o", ms=3, label=a,
                   color=plotting.PALETTE[j % len(plotting.PALETTE)],
                   ls=":" if a in ov_short and a not in ov_arms else "-")
    ax[0].axhline(1, color="k", lw=0.8)
    bar_x = tr.OPTVAR_CLAIMS["extrapolation_ppl_ratio"][-1]  # the claim's target
    ax[0].axhline(bar_x, color="grey", ls="--", lw=0.8)
    ax[0].set(xscale="log", yscale="log", xlabel="evaluation length (bytes)",
              ylabel="RoPE tail ppl ÷ the arm's", title="extrapolation against RoPE")
    ax[0].set_yticks([0.5, 1, 2, 4, 8], ["0.5", "1", "2", "4", "8"])
    ax[0].minorticks_off()
    ax[0].legend(fontsize=6)
    bars = [(f"{a} (arms2)", alias.loc[a, f"d = {B + 1}"] / alias.loc[a, "d = 1"],
             "grey") for a in alias.index]  # the diagnosis above, mean over seeds
    for j, a in enumerate(ov_short):
        bars += [(f"{ov_short[a]}, seed {s}", optvar["records"][f"{a}/{s}"]["alias"],
                  plotting.PALETTE[(j + 2) % len(plotting.PALETTE)])
                 for s in cfg["seeds"] if f"{a}/{s}" in optvar["records"]]
    ax[1].barh(range(len(bars)), [b[1] for b in bars], color=[b[2] for b in bars])
    ax[1].set_yticks(range(len(bars)), [b[0] for b in bars], fontsize=6)
    ax[1].axvline(optvar["config"]["alias_bar"], color="k", ls="--", lw=0.8)
    ax[1].invert_yaxis()
    ax[1].set(xscale="log", xlabel="attention at d = B + 1 ÷ at d = 1",
              title="aliasing, last layer, end of 2048-byte windows")
    plt.tight_layout()
    plt.show()

# %% [markdown]
# What the records say (generated; the claims and their conditions are read in section 9):

# %% tags=["remove-input"]
if ov is None:
    display(Markdown("Quick mode: the OPT variants are not read (they exist only as stored "
                     "records of the full-size recipe); their claims are not recorded."))
else:
    C_ = tr.ARMS2_CONDITIONS["plateau"][1], tr.ARMS2_CONDITIONS["beats_ngram"][1]
    why_not = {a: [f"alias {r.alias:.2f} > {optvar['config']['alias_bar']}"] * (not r.informative)
               + [f"fit conditions not met: plateau {r.plateau:.4f}, bar ≤ {C_[0]}; tail ppl ÷ the"
                  f" n-gram's {r.ngram_ratio:.3f}, bar < {C_[1]}"]
               * (not r.conditions) for a, r in ov_tab.iterrows()}
    at_l, at_t = lengths.index(longest), lengths.index(train_len)
    display(Markdown(
        "Qualified at seed 0 by the registered reading: "
        + (", ".join(f"{a} (alias {ov_tab.alias[a]:.3f}, plateau {ov_tab.plateau[a]:.4f},"
                     f" n-gram ratio {ov_tab.ngram_ratio[a]:.3f})" for a in ov_arms) or "none")
        + "; not qualified: "
        + ("; ".join(f"{a} ({', '.join(w)})" for a, w in why_not.items() if w) or "none")
        + f". For comparison, `arms2`'s TPE + OPT reads alias "
        f"{alias.loc['TPE + OPT', f'd = {B + 1}'] / alias.loc['TPE + OPT', 'd = 1']:.2f} in"
        f" the diagnosis above. RoPE ÷ arm at {longest} (mean over the arm's seeds): "
        + ", ".join(f"{a} {rope_over(a)[at_l]:.2f}" for a in ["TPE + OPT", *ov_short])
        + f"; at the training length {train_len}: "
        + ", ".join(f"{a} {rope_over(a)[at_t]:.3f}" for a in ["TPE + OPT", *ov_short])
        + " (above 1: the arm predicts better than RoPE)."
        + (f" Tail perplexity at {longest}: RoPE + skips "
           f"{ov_ppl.loc[longest, 'RoPE + skips']:.2f}, the best qualifying variant "
           f"{ov_ppl.loc[longest, ov_arms].idxmin()} {ov_ppl.loc[longest, ov_arms].min():.2f}."
           if ov_arms else "")
    ))

# %% [markdown]
# ## 5. Combinatorial coverage
#
# Which digit-difference tuples `(Δ_0, …, Δ_{L−1})` between a query and a key does a test window of the longest
# length contain, and what fraction of them did each arm's training windows contain? For the RoPE arms the
# "tuple" is the single distance (radix 8192, one level). NoPE has no positions to cover.

# %%
g = repro.rng(seed, 30)
test_pos = np.arange(longest)[None]
n_cov = 64 if quick else 512
cov = {}
for arm, spec in tr.checkpoint_config("arms")["arms"].items():  # both builds' arms
    if spec["enc"] == "none" or "," in arm:
        continue
    tp = tr.train_position_ids(spec, g, n_cov, train_len, target_len, n_chunks)
    bb, ll = (spec["B"], spec["L"]) if spec["enc"] == "tpe" else (8192, 1)
    cov[arm] = tr.coverage(tp, test_pos, bb, ll)
print(
    pd.Series(cov, name=f"fraction of test tuples (length {longest}) seen in training")
    .round(3)
    .to_string()
)
fig, ax = plt.subplots(figsize=(6.4, 3))
ax.bar(list(cov), list(cov.values()), color=plotting.PALETTE[1 : len(cov) + 1])
ax.set(
    ylabel="fraction covered", ylim=(0, 1.05), title="test-time tuples seen in training"
)
ax.tick_params(axis="x", labelrotation=20, labelsize=7)
plt.show()

# %% [markdown]
# ## 6. Inference cost
#
# Time per token of a forward pass over one window of the longest length, RoPE vs TPE (same model size), with
# `repro.benchmark`: both sides timed in the same run in interleaved rounds after a warm-up, process CPU time. The
# measure is the **median of the per-round ratio** TPE ÷ RoPE (paired: load that slows a round slows both of its
# calls), with a 95% bootstrap interval over the rounds (`tr.paired_timing_ratio`); the claim's condition is that
# this interval is narrower than the band the claim allows. This measure replaced the ratio of the two sides'
# medians, with each side's single-round spread as the condition, in session 27, after three runs of the old
# measure had been seen (held, held, inconclusive: the ratio of medians moved with the load, the per-round ratio
# hardly; the numbers are in the commit that registered the change): disclosed. It was changed for what it measures (the old condition read each side's load noise, which
# the pairing cancels), not for a verdict.
#
# TPE and RoPE differ only in the cos/sin table (a digit lookup instead of one multiplication per pair); the FLOPs
# of the forward pass are the same. So the claim below checks that *this implementation* adds no overhead more
# than it tests the paper: it would fail only if computing the digits cost a visible share of the forward pass.

# %%
x_one = windows[longest][:1, :-1]


def forward(model):
    def run():
        with torch.no_grad():
            model(x_one)

    return run


timings = repro.benchmark(
    {"RoPE": forward(models[("RoPE", s0)]), "TPE": forward(models[("TPE + OPT", s0)])},
    repeats=5 if quick else 21,
    warmup=1,
)
t_rope, t_tpe = (timings.median(k) / longest for k in ("RoPE", "TPE"))
cost = tr.paired_timing_ratio(
    timings.cpu["TPE"], timings.cpu["RoPE"], rng=repro.rng(seed, 95)
)
cost_ratio = cost["ratio"]
print(
    f"per token (CPU time, medians): RoPE {t_rope * 1e6:.1f} µs, "
    f"TPE {t_tpe * 1e6:.1f} µs; per-round TPE ÷ RoPE: median {cost_ratio:.3f} "
    f"[{cost['low']:.3f}, {cost['high']:.3f}] over {len(timings.cpu['TPE'])} rounds "
    f"(interval width ÷ median {cost['width']:.3f}); "
    f"ratio of medians {timings.ratio('TPE', 'RoPE'):.3f}"
)

# %% [markdown]
# ## 7. Retrieval at 64×: a passkey (content) and offset recall (position)
#
# The byte-level corpus above cannot show what the paper shows: no arm there uses more than a few bytes of
# context, so its longest-length test measures how much unseen positions *distract* a model, not whether a long
# context *helps* it. This section trains the arms on tasks that can only be solved by reading far back, trained
# at length 32 and tested at 2048 (64×). It took twelve rounds, each registered before its training; the
# round-by-round record follows this overview and can be skipped: section 9 reads round 12.
#
# **The rounds at a glance.** One row per retrieval round: the task, what changed,
# and, from each stored record (generated), how many arm-seeds of the arms other than NoPE met both registered bars
# (held-out accuracy at length 32 and a flat held-out loss, round 5's bars), NoPE's accuracy at length 32 (the control:
# a task that needs positions should defeat it), and TPE + OPT's accuracy at 2048 per seed (chance 1/16).

# %% tags=["hide-input"]
def fetch_json(name):
    return json.loads(checkpoints.fetch(SLUG, f"{name}.json").read_text())


man12 = fetch_json("recall6")
man11 = man12["extra"][
    "recall5"
]  # recall5's record, kept in recall6's manifest (no room for both)
man6, man7 = fetch_json("recall2"), fetch_json("recall3")
BARS = tr.checkpoint_config("recall6")[
    "restarts"
]  # the bars every round kept: acc 0.95, plateau 0.02


def glance(metrics, seeds=None):
    """Bars met (arms but NoPE), NoPE at 32, TPE + OPT at 2048 of a record."""
    ks = [k for k in metrics if seeds is None or int(k.split("/")[1]) in seeds]
    arm_ks = [k for k in ks if not k.startswith("NoPE")]
    met = sum(
        metrics[k]["final_val_acc"] >= BARS["acc"]
        and metrics[k]["plateau"] <= BARS["plateau"]
        for k in arm_ks
    )
    acc = {k: metrics[k]["accuracy"] for k in ks}
    return {
        "both bars met": f"{met} of {len(arm_ks)}",
        "NoPE at 32": ", ".join(
            f"{acc[k]['32']:.2f}" for k in ks if k.startswith("NoPE")
        )
        or "–",
        "TPE + OPT at 2048": ", ".join(
            f"{acc[k]['2048']:.2f}" for k in ks if k.startswith("TPE + OPT/")
        )
        or "–",
    }


# %% tags=["hide-input"]
read7 = {
    k: (man7 if c["record"] == "recall3" else man6)["metrics"][c["key"]]
    for k, c in man7["extra"]["chosen"].items()
    if c["attempt"] is not None
}
probe_reading = {
    8: fetch_json("probe_recall4")["round8"]["qualifies"],
    9: fetch_json("probe_carry")["round9"]["reading"],
    10: fetch_json("probe_recall5")["round10"]["qualifies"],
}
ROUNDS = [  # round, task, change, stats
    (
        3,
        "passkey",
        "5 arms × 3 seeds, d = 32",
        glance(fetch_json("retrieval")["metrics"]),
    ),
    (
        4,
        "offset recall, 1 key",
        "6 arms with NoPE; NoPE solved it (record removed)",
        {},
    ),
    (
        5,
        "offset recall, 2 keys",
        "d = 64, 6000 steps; seed 0 (its rule stopped)",
        glance(man6["metrics"], [0]),
    ),
    (6, "2 keys", "seeds 1, 2 of round 5's recipe", glance(man6["metrics"], [1, 2])),
    (7, "2 keys", "restarts from new inits (the attempts read)", glance(read7)),
    (8, "probe", f"4 heads / weight decay: qualifies {probe_reading[8]}", {}),
    (9, "probe", f"the carry step: {probe_reading[9]}", {}),
    (10, "probe", f"aux. previous-token loss: qualifies {probe_reading[10]}", {}),
    (11, "2 keys", "+ aux. previous-token loss, 6000 steps", glance(man11["metrics"])),
    (
        12,
        "2 keys",
        "+ aux. loss, 18000 steps (the claims' round)",
        glance(man12["metrics"]),
    ),
]
glance_tab = pd.DataFrame(
    [dict(round=r, task=t, change=c, **g) for r, t, c, g in ROUNDS]
)
display(
    glance_tab.set_index("round")
    .fillna("–")
    .style.set_caption(
        "the retrieval rounds (generated from the stored records; "
        "probes: their rule's reading)"
    )
)

# %% [markdown]
# **Across rounds, with and without the auxiliary loss** (exploratory: read after the numbers, no verdict, and
# confounded: the rounds without the auxiliary loss trained 6000 steps, round 12 18000). Every stored arm-seed of
# the two-key task, none picked by its result at 2048: accuracy at 32 and whether it met both bars, at 2048, and
# behind the 2048-token prefix (its key within the last 32 positions: length without distance); and where the
# query looks, from the stored attention (mean over heads and 32 windows): on the key in layer 1 and on the answer
# (the token after the key) in layer 2, at 32 and at 2048.

# %% tags=["hide-input"]
ckx = {
    name: checkpoints.load(
        SLUG, name, config=scripts.with_seeds(tr.checkpoint_config(name), m_["seed"])
    )
    for name, m_ in (("recall2", man6), ("recall3", man7), ("recall6", man12))
}
ATT = (("key", "train", 1), ("answer", "train", 2), ("answer", "far", 2))
ATT_COLS = ["key l1 at 32", "answer l2 at 32", "answer l2 at 2048"]


def att_of(name, key):
    """The query's mean attention (ATT) of a stored arm-seed (recall5: its summary)."""
    if name == "recall5":
        return [man11["windows"][key][f"{w}_{c}_l{i}"] for w, c, i in ATT]
    cond = {"train": "length32", "far": "length2048"}
    return [
        float(ckx[name].tensors[f"{key}.eval_att_{w}_{cond[c]}_l{i}"].float().mean())
        for w, c, i in ATT
    ]


# %% tags=["hide-input"]
x_rows = []
for name, m_, aux, steps in (
    ("recall2", man6, False, 6000),
    ("recall3", man7, False, 6000),
    ("recall5", man11, True, 6000),
    ("recall6", man12, True, 18000),
):
    for key, mt in m_["metrics"].items():
        arm_, s_, *att_ = key.split("/")
        rnd = {"recall2": 5 if s_ == "0" else 6, "recall3": 7, "recall5": 11}.get(
            name, 12
        )
        x_rows.append(
            dict(
                round=rnd,
                aux=aux,
                steps=steps,
                arm=arm_,
                seed=int(s_),
                attempt=int(att_[0][1:]) if att_ else 0,
                acc_32=mt["accuracy"]["32"],
                plateau=mt["plateau"],
                bars=mt["final_val_acc"] >= BARS["acc"]
                and mt["plateau"] <= BARS["plateau"],
                acc_2048=mt["accuracy"]["2048"],
                prefix_2048=mt["accuracy"]["prefix 2048"],
                **dict(zip(ATT_COLS, att_of(name, key))),
            )
        )
xr = pd.DataFrame(x_rows)
display(
    xr.set_index(["round", "arm", "seed", "attempt"])
    .style.format(precision=3)
    .set_caption(
        "every stored two-key arm-seed (exploratory): accuracy, bars, "
        "attention of the query"
    )
)
xg = (
    xr[xr.bars & (xr.arm != "NoPE")]
    .groupby(["aux", "arm"])[["acc_32", "acc_2048", "prefix_2048"] + ATT_COLS]
    .mean()
)
xg.insert(0, "n", xr[xr.bars & (xr.arm != "NoPE")].groupby(["aux", "arm"]).size())
display(
    xg.style.format(precision=3).set_caption(
        "mean over the arm-seeds that met both bars, by auxiliary loss and arm "
        "(exploratory)"
    )
)

# %% tags=["remove-input"]
JUMP = ("RoPE + skips", "RoPE + OPT offsets", "TPE + OPT")  # arms whose training ids jump
lrn = xr[xr.bars & (xr.arm != "NoPE")]


def mean_of(df, col):
    return f"{df[col].mean():.2f} (n = {len(df)})" if len(df) else "– (n = 0)"


def nope_at(rnd):
    return ", ".join(f"{v:.2f}" for v in xr[(xr.arm == "NoPE") & xr["round"].isin(rnd)].acc_32)


x12 = xr[(xr["round"] == 12) & (xr.arm == "TPE + OPT")].set_index("seed")
glance_md = [
    "**What the rounds show** (generated; exploratory where it compares rounds).",
    "- **NoPE solves the task in-window once training is strong enough.** NoPE at 32: "
    f"{nope_at([5, 6])} (rounds 5–6, no auxiliary loss, 6000 steps), {nope_at([11])} "
    f"(round 11, auxiliary loss, 6000), {nope_at([12])} (round 12, auxiliary loss, 18000). "
    "A causal mask lets a model infer order (Haviv et al. 2022; Kazemnejad et al. 2023), "
    "and the auxiliary loss trains every arm, NoPE included, on exactly the one-step-back "
    "lookup the task asks for. So the registered condition `needs_position` (RoPE ≥ 30 "
    "points above NoPE at 32) fails in round 12, and the retrieval claims are inconclusive "
    "by the registered rules (section 9).",
    "- **Offsets and the tree** (arm-seeds that met both bars, accuracy at 2048). Without "
    "the auxiliary loss: arms whose training ids jump "
    f"{mean_of(lrn[~lrn.aux & lrn.arm.isin(JUMP)], 'acc_2048')} against plain ids "
    f"{mean_of(lrn[~lrn.aux & ~lrn.arm.isin(JUMP)], 'acc_2048')}; TPE + OPT "
    f"{mean_of(lrn[~lrn.aux & (lrn.arm == 'TPE + OPT')], 'acc_2048')} against RoPE + OPT "
    f"offsets {mean_of(lrn[~lrn.aux & (lrn.arm == 'RoPE + OPT offsets')], 'acc_2048')}. "
    f"With it: TPE + OPT {mean_of(lrn[lrn.aux & (lrn.arm == 'TPE + OPT')], 'acc_2048')} "
    "against RoPE + OPT offsets "
    f"{mean_of(lrn[lrn.aux & (lrn.arm == 'RoPE + OPT offsets')], 'acc_2048')} (one TPE + "
    "OPT seed carries that mean, next bullet). Every arm-seed with plain training ids, "
    "whatever its bars, answers at most "
    f"{xr[~xr.arm.isin(JUMP) & (xr.arm != 'NoPE')].acc_2048.max():.2f} at 2048.",
    "- **The auxiliary loss changed the circuit.** Query's attention on the key in layer 1 "
    f"at 32: {mean_of(lrn[~lrn.aux], 'key l1 at 32')} without it, "
    f"{mean_of(lrn[lrn.aux], 'key l1 at 32')} with it; on the answer in layer 2 at 2048: "
    f"{mean_of(lrn[~lrn.aux], 'answer l2 at 2048')} without, "
    f"{mean_of(lrn[lrn.aux], 'answer l2 at 2048')} with. With it, arm-seeds that met the "
    f"bars answer {mean_of(lrn[lrn.aux], 'acc_2048')} at 2048 on average; the exception "
    "is TPE + OPT in round 12, seed by seed "
    + ", ".join(f"{v:.2f}" for v in x12.acc_2048)
    + f" (seeds {', '.join(map(str, x12.index))}): the circuit extrapolates at "
    f"{int((x12.acc_2048 > 0.5).sum())} seed(s) of {len(x12)}, and not at the others.",
]
display(Markdown("\n".join(glance_md)))

# %% [markdown]
# ### The passkey (round 3)
#
# Every window is random filler tokens with one **pair token** (a passkey: one of 16 values) at a uniformly random
# place, and ends with a query token; the model must answer with the passkey's value. The passkey is anywhere in
# the window, so at 64× the training length most answers lie hundreds or thousands of positions back, and chance
# is one in 16. The generator is `tr.retrieval_task` (tested: shapes, ranges, that the answer is the stored one).
#
# **What it tests, precisely.** The passkey is the only non-filler token before the query, so a model finds it by
# its *content*; no position has to be located, counted or compared. What the test measures is whether an
# encoding leaves that content match intact at (query, key) position differences the arm never saw in training:
# a rotation it never saw can scramble the score of the one key that matters. So any arm whose training ids reach
# distances as large as the test's can pass, whatever its encoding; the comparisons that isolate the
# tree encoding are TPE + OPT against RoPE with the same offsets, and TPE + OPT against TPE alone. It is not the
# paper's perplexity test, and it does not test whether a model combines many far facts.
#
# **Which OPT.** On the byte corpus OPT used chunks of 8 bytes with offsets in multiples of B = 16, so the true
# previous byte often sat at a random upper-digit distance and the upper digits carried no distance information
# (the aliasing of section 4). Here OPT uses **two chunks of 16 positions = 2B** with B = 8, L = 4 (8⁴ = 4096 ≥
# 2048): inside a chunk, nearby keys have the upper digits of contiguous text, so those digits stay informative,
# while the one jump between the chunks still shows the model large upper-digit differences. We chose this variant
# *before* training, for that reason (`tr.checkpoint_config("retrieval")`'s docstring); the old variant (eight
# chunks of 4 = B/2) is trained once as a diagnostic. RoPE + OPT offsets gets the same position ids on RoPE, RoPE
# + skips the PoSE-style arbitrary skips.
#
# **Round 4:** the claims below are now read on the offset-recall task at the end of this section, which needs
# positions; the passkey arms stay as the content-only contrast. Their conditions and bars were:
#
# **Conditions and bars, fixed before any number of these arms was read** (they are in the config, and in the
# manifest the script wrote; a first, harder task is in the known limits): every claims' arm answers
# at least 95% of the held-out queries at the training length (`retrieval_in_window`), and each arm's held-out
# loss is flat (its last fifth of evaluations improved by at most 2% of its whole improvement, `train.plateau`).
# `retrieval_at_64x`: TPE + OPT's accuracy at 64× minus RoPE's is at least 30 points. `needs_both_parts`: the
# smaller of TPE + OPT's accuracy minus TPE's and minus RoPE + OPT offsets' is above 10 points: both the tree
# encoding and the offsets must matter. All at three training seeds; the default run loads the arms trained by
# `data/04_tree_rope/make_retrieval.py` (the first seed's weights, every seed's per-query results) and re-checks a
# part of the stored evaluation live; quick mode trains tiny arms live.

# %%
cfg_r = scripts.with_seeds(tr.checkpoint_config("retrieval"), scripts.model_seeds(seed))
if quick:  # tiny arms trained live, one seed, evaluated to 16x
    cfg_r = copy.deepcopy(cfg_r)
    cfg_r.update(steps=120, warmup=20, val_every=40, val_windows=64)
    cfg_r.update(seeds=[seed], weight_seeds=[seed], one_seed_arms=[])
    cfg_r["arms"] = {a: cfg_r["arms"][a] for a in tr.RETRIEVAL_ARMS}
    cfg_r["eval"] = dict(cfg_r["eval"], lengths=[32, 512], windows=32)
r_len, r_far = cfg_r["eval"]["lengths"], max(cfg_r["eval"]["lengths"])
r_val, r_tests = tr.retrieval_windows(cfg_r)
r_runs = [
    (a, s)
    for a in cfg_r["arms"]
    for s in (cfg_r["seeds"][:1] if a in cfg_r["one_seed_arms"] else cfg_r["seeds"])
]
t = r_tests[r_far]
print(f"{len(t['tokens'])} held-out windows per length {r_len}; at {r_far} the passkey "
      f"is {int((t['query_pos'][0] - t['key_pos']).median())} positions back (median)")
print("one training window:", r_val["tokens"][0].tolist())

# %% [markdown]
# Loading (default) or training (quick) the arms. In the default run the live re-check evaluates the stored
# weights of every arm on 32 windows of the longest length and counts the answers that differ from the stored
# ones (a check: it must be zero).

# %%
def retrieval_arms(cfg_x, name):
    """(models, hits, curves, manifest) of retrieval checkpoint `name`; quick: live."""
    val_x, tests_x = tr.retrieval_windows(cfg_x)
    one = cfg_x["one_seed_arms"]
    runs = [(a, s) for a in cfg_x["arms"]
            for s in cfg_x["seeds"][: 1 if a in one else None]]
    models, hit, curve, man_x = {}, {}, {}, None
    if not quick:
        ck = checkpoints.load(SLUG, name, config=cfg_x)
        man_x = ck.manifest
    for arm, s in runs:
        key, spec = f"{arm}/{s}", cfg_x["arms"][arm]
        if quick:
            m, h = tr.fit_retrieval_arm(spec, cfg_x, s, val_x, desc=f"{arm} / seed {s}")
            models[(arm, s)] = m
            curve[(arm, s)] = {c: dict(step=[p[0] for p in h.evals[c]],
                                       value=[p[1] for p in h.evals[c]])
                               for c in ("val_loss", "val_acc")}
            hit[(arm, s)] = {n: tr.retrieval_scores(m, task)[0][:, 0].numpy()
                             for n, task in tests_x.items()}
            continue
        hit[(arm, s)] = {n: ck.tensors[f"{key}.eval_correct_{n}"].bool().numpy()
                         for n in tests_x}
        curve[(arm, s)] = {c: man_x["history"][f"{key}/{c}"]
                           for c in ("val_loss", "val_acc")}
        if s in cfg_x["weight_seeds"]:
            models[(arm, s)] = ck.load_into(tr.make_model(spec, cfg_x),
                                            prefix=key + ".", ignore=["eval_"])
    return models, hit, curve, man_x


def recall_setup(cfg_x, name):
    """Print an offset-recall config's task and one training window; return its lengths,
    longest length, evaluation windows and retrieval_arms(cfg_x, name)."""
    val_x, tests_x = tr.retrieval_windows(cfg_x)
    print(f"task {cfg_x['task']}, d = {cfg_x['d_model']}, {cfg_x['steps']} steps")
    print("one training window:", val_x["tokens"][0].tolist())
    lens = cfg_x["eval"]["lengths"]
    return lens, max(lens), tests_x, retrieval_arms(cfg_x, name)


def recheck(cid, models, hit, task, n):
    """Check: the stored models answer 32 windows of length n as stored."""
    t32 = dict(task, tokens=task["tokens"][:32], key_pos=task["key_pos"][:32])
    differ = sum(int((tr.retrieval_scores(m, t32)[0][:, 0].numpy()
                      != hit[k][n][:32]).sum()) for k, m in models.items())
    rec.check(cid, differ, 0, op="<=", note=f"answers that differ live vs stored, "
              f"32 windows × {n}, {len(models)} stored models")
    return differ


r_models, r_hit, r_curve, man_r = retrieval_arms(cfg_r, "retrieval")
if not quick:
    differ = recheck("retrieval_eval_reproduces", r_models, r_hit, t, r_far)
    print(f"trained in {man_r['wall_seconds'] / 60:.1f} min on "
          f"{man_r['machine']['torch_threads']} thread; live re-check: {differ} "
          "answers differ")

# %% [markdown]
# The held-out curves at the training length (every arm and seed), and how flat each is at the end.

# %%
def show_curves(cfg_x, curve, what):
    """Held-out loss and accuracy curves of every arm and seed; the plateau table."""
    fig, ax = plt.subplots(1, 2, figsize=(10, 3.2))
    for i, arm in enumerate(cfg_x["arms"]):
        for s in cfg_x["seeds"]:
            for j, c in enumerate(("val_loss", "val_acc")):
                if (arm, s) in curve:
                    cv = curve[(arm, s)][c]
                    ax[j].plot(cv["step"], cv["value"], lw=1,
                               color=plotting.PALETTE[i % 8],
                               label=arm if s == cfg_x["seeds"][0] else None)
    ax[0].set(yscale="log", xlabel="step", ylabel="held-out loss",
              title=f"{what}: loss")
    ax[1].set(xlabel="step", ylabel="held-out accuracy", title=f"{what}: accuracy")
    ax[0].legend(fontsize=6)
    plt.tight_layout()
    plt.show()
    plat = {k: train.plateau(c["val_loss"]) for k, c in curve.items()}
    display(pd.Series(plat).unstack().round(4).style.set_caption(
        f"{what}: plateau measure of the held-out loss (≤ 0.02: flat), arm × seed"))
    return plat


r_plateau = show_curves(cfg_r, r_curve, "passkey")

# %% [markdown]
# **Accuracy by length.** The fraction of held-out queries answered correctly at each window length, per seed;
# chance is 1/16.

# %%
def show_accuracy(cfg_x, hit, main_arms, what):
    """Accuracy table (arm × seed × length), accuracy by length and by distance."""
    lens, far = cfg_x["eval"]["lengths"], max(cfg_x["eval"]["lengths"])
    acc = pd.DataFrame([dict(arm=a, seed=s, length=n, acc=float(h[n].mean()))
                        for (a, s), h in hit.items() for n in lens])
    tab = acc.pivot_table(index=["arm", "seed"], columns="length", values="acc")
    display(tab.loc[list(cfg_x["arms"])].round(3).style.set_caption(
        f"{what} accuracy (held-out windows), arm × seed"))
    fig, ax = plt.subplots(1, 2, figsize=(10, 3.4))
    for arm in cfg_x["arms"]:
        r = acc[acc.arm == arm].groupby("length").acc.mean()
        ax[0].plot(r.index, r.values, marker="o", ms=3,
                   ls="-" if arm in main_arms else ":", label=arm)
    ax[0].axvline(cfg_x["train_len"], color="gray", ls=":", lw=1)
    ax[0].axhline(1 / cfg_x["task"]["n_values"], color="gray", lw=0.5)
    ax[0].set(xscale="log", xlabel="window length", ylabel="accuracy (mean over seeds)",
              ylim=(0, 1.05), title=f"{what} vs length (dotted: one seed)")
    ax[0].legend(fontsize=6)
    tk = tr.retrieval_windows(cfg_x)[1][far]
    dist = (tk["query_pos"][0] - tk["key_pos"][:, 0]).numpy()
    for arm in main_arms:
        hits = np.concatenate([hit[(arm, s)][far] for s in cfg_x["seeds"]])
        rows = tr.accuracy_by_distance(hits, np.tile(dist, len(cfg_x["seeds"])),
                                       [1, 32, 128, 512, far + 1])
        ax[1].plot([f"{lo}–{hi - 1}" for lo, hi, _, _ in rows],
                   [a for _, _, a, _ in rows], marker="o", ms=3, label=arm)
    ax[1].set(xlabel="key distance (positions back)", ylabel="accuracy",
              title=f"windows of {far}, pooled seeds", ylim=(0, 1.05))
    plt.tight_layout()
    plt.show()


show_accuracy(cfg_r, r_hit, tr.RETRIEVAL_ARMS, "passkey")

# %% [markdown]
# **Where does the query look?** For the first seed's models: the attention weight that the query puts on the
# passkey token, per layer (mean over heads and 16 windows of each length). Uniform attention would give 1/(n+1);
# a model that retrieves puts most of it on the passkey.
#
# The aliasing diagnosis of section 4 (attention by key distance) reads how a language model locates the bytes just
# before a query. The passkey task trains only the query's answer, whose passkey is found by its content, so that
# diagnosis says nothing here. What the OPT variant changes is visible in the position ids themselves: the share of
# training (query, key) pairs up to 2B apart whose position difference equals their distance in the text (for the
# others the upper digits of a nearby key are random). Whether it matters for retrieval is the comparison of TPE +
# OPT with the diagnostic arm (one seed) in the table above.

# %%
s_r = cfg_r["seeds"][0]
att_rows = []
for (arm, _s), m in r_models.items():
    for n in r_len[-2:]:
        tk = r_tests[n]
        sub = dict(tk, tokens=tk["tokens"][:16], key_pos=tk["key_pos"][:16])
        a_n = tr.attention_on_answer(m, sub).mean(0)
        layers = {f"layer {i + 1}": v for i, v in enumerate(a_n)}
        att_rows.append(dict(arm=arm, length=n, **layers))
display(pd.DataFrame(att_rows).set_index(["arm", "length"]).round(3).style.set_caption(
    f"attention of the query on the passkey token (seed {s_r})"))
g_f = repro.rng(seed, 50)
n_ids = cfg_r["train_len"] + 1
faith = {
    f"{name} (B = {b_}, {k_} chunks)": tr.faithful_fraction(
        tr.opt_position_ids(g_f, 512, n_ids, b_, cfg_r["target_len"], k_), 2 * b_)
    for name, b_, k_ in [("retrieval OPT", 8, cfg_r["n_chunks"]),
                         ("old OPT, diagnostic arm", 8, 8),
                         ("byte-corpus OPT", B, n_chunks)]
}
display(pd.Series(faith, name="faithful share").round(3).to_frame().style.set_caption(
    "share of training (query, key) pairs up to 2B apart whose position difference "
    "is their text distance"))

# %% [markdown]
# ### Offset recall: a task meant to need positions
#
# The passkey is found by its content, so the task cannot separate encodings that differ in how they represent
# *position*: any arm whose training ids reach far enough passes it. The **offset-recall** task asks for a
# position. Every token of the window is an ordinary value token (one of 16) except the key token(s) at random
# places; the query at the end names a key, and the answer is **the token right after that key**. It is a value
# token like all the others, so nothing in its content marks it: a model must find the key by content, anywhere
# in the window, *and* take one positional step from it (`tr.offset_recall_task`; a unit test shuffles each
# window and shows that the answer changes: the task needs the *order* of the tokens). The step is local, but it happens at every absolute position of a
# long window. RoPE's step is the same rotation everywhere (translation invariance). TPE's step from p to p + 1
# changes several digits at once where p + 1 is a multiple of B or B²: at training length 32 with B = 8 a carry
# into the third digit (63 → 64) never occurs, so TPE without OPT meets digit-difference tuples it never saw at
# long lengths, and OPT's offsets (multiples of B) are what shows it those carries. **NoPE** (no positional
# encoding) is the control. A causal model can infer order without any positional encoding (its causal mask
# tells each token how many come before it; Kazemnejad et al. 2023), so needing the order is not needing a
# positional *encoding*: where NoPE answers about as well as the others, the task does not need one and the
# comparison says nothing about encodings (`needs_position` below).
#
# **The probes, registered before they ran** (`data/04_tree_rope/probe_recall.py`, seed 0, in-window accuracy
# only). Part A asks why the associative-recall attempt of round 3 (`tr.retrieval_task`'s defaults: four pair
# tokens, two queries) did not learn in-window (round 3 reported about half its queries; part A's probe of the
# same recipe measured far less, table below, so that report is not reproduced): more steps, or a wider model? Part B tried the two-key offset-recall task at growing recipes; part C, registered after B's two cheaper
# recipes had failed, the same task with one key. The rule takes the first recipe, in order of cost, whose RoPE
# probe answers at least 97% of the held-out queries with a flat loss.
#
# Read with care (added at review): the rule was amended after B's two d = 32 RoPE results (and NoPE's at 1500
# steps) had been read, before B's d = 64 run and part C finished (commit times against the probe logs); the
# amended rule does not look at NoPE, and on the one-key task it chose NoPE also answers every in-window query
# (table). `probe_recall_B.json` keeps a `chosen` field from the first rule (part B alone, written by the process
# that had started before the amendment): it is superseded by part C's, printed below.

# %% tags=["hide-input"]
probes = {
    part: json.loads(checkpoints.fetch(SLUG, f"probe_recall_{part}.json").read_text())
    for part in "ABC"
}
probe_tab = pd.DataFrame([
    dict(part=part,
         task=r["task"].get("kind", "passkey") + f", {r['task']['n_pairs']} key(s)",
         arm=r["arm"], d_model=r["change"]["d_model"], steps=r["change"]["steps"],
         acc=r["final_val_acc"], plateau=r["plateau"], seconds=r["seconds"])
    for part, pr in probes.items() for r in pr["records"]
])
display(probe_tab.round(4).style.set_caption(
    "seed-0 probes: held-out accuracy at the training length, plateau of the loss"))
chosen = probes["C"]["chosen"]
print("the rule chooses:", chosen)

# %% [markdown]
# **Round 4** trained this one-key task (`tr.checkpoint_config("recall")`: six arms with NoPE × 3 seeds, d = 32,
# 1500 steps; the bars and conditions the later rounds kept: every arm but NoPE answers ≥ 95% in-window, a flat
# held-out loss, RoPE ≥ 30 points above NoPE in-window). NoPE answered it too (probe C's NoPE row above), so it
# does not need a positional encoding and round 5 moved to two keys. Its checkpoint (`recall`, with seed 0's
# weights) was removed from `data/` in round 12 to make room for round 12's records; `make_recall.py` rebuilds it.

# %% [markdown]
# ### Round 5: two keys at d = 64, stopped at its probe seed
#
# The one-key task above does not need a positional encoding (NoPE answers it). Round 4's probe B had RoPE far
# above NoPE in-window on the **two-key** task at d = 64 (table above), so round 5 registered that task
# as the claims' task before training any of its arms (`tr.checkpoint_config("recall2")`, commit 82637a1):
# the six arms at d = 64, 6000 cosine steps, the same bars and conditions. **Registered rule:** seed 0 first as
# a probe, only its conditions read; seeds 1 and 2 then run whatever those show, *unless RoPE answers fewer than
# 95% of the in-window queries at seed 0* (the task not learned at that recipe: the round stops, nothing else is
# read). The record below is that seed (`data/04_tree_rope/recall2.json`, records only). It also holds each
# arm's accuracy at longer lengths and the dilution control; the round stopped, so the chapter does not read
# them: no design may be chosen on them, and round 6 (below) reads them only with its other two seeds.

# %% tags=["hide-input"]
man5 = json.loads(checkpoints.fetch(SLUG, "recall2.json").read_text())
cfg5, bars5 = man5["config"], man5["config"]["claims"]
arms5 = list(cfg5["arms"])
cond5 = pd.DataFrame(
    [
        dict(
            arm=a,
            seed=int(s),
            in_window=m["accuracy"][str(cfg5["train_len"])],
            plateau=m["plateau"],
        )
        for k, m in man5["metrics"].items()
        for a, s in [k.rsplit("/", 1)]
        if int(s) == man5["seed"][0]  # round 5 is its probe seed (round 6 adds 1, 2)
    ]
).set_index(["arm", "seed"])
cond5["meets in_window"] = [
    a == "NoPE" or v >= bars5["in_window"]["target"]
    for (a, _), v in cond5["in_window"].items()
]
cond5["flat"] = cond5["plateau"] <= bars5["plateau"]["target"]
s5 = man5["seed"][0]
need5 = cond5.loc[("RoPE", s5), "in_window"] - cond5.loc[("NoPE", s5), "in_window"]
rope5 = cond5.loc[("RoPE", s5), "in_window"]
display(
    cond5.round(4).style.set_caption(
        f"round 5, seed {s5}: the conditions only (in-window accuracy ≥ "
        f"{bars5['in_window']['target']} every arm but NoPE; "
        f"plateau ≤ {bars5['plateau']['target']})"
    )
)
stopped5 = rope5 < bars5["in_window"]["target"]
print(
    f"needs_position (RoPE - NoPE in-window): {need5:.3f} "
    f"(bar {bars5['needs_position']['target']})"
)
print(
    f"RoPE in-window {rope5:.3f}: "
    + (
        "below the bar -> round 5 stopped there by its rule "
        "(seeds 1-2 not run in round 5)"
        if stopped5
        else "meets the bar"
    )
)


# %% [markdown]
# **How each curve ended.** For every arm, the held-out accuracy curve at the training length (the validation
# windows, scored every 50 steps during training): the first step at the bar, the last jump (the last rise of
# at least ten points within 500 steps), the accuracy at mid-schedule and at the end, and the plateau measure
# of the held-out loss, which classifies the ending.


# %% tags=["hide-input"]
def curve5(arm, what="val_acc"):
    c = man5["history"][f"{arm}/{s5}/{what}"]
    return np.asarray(c["step"]), np.asarray(c["value"])


def describe_curve(step, acc, loss, bar):
    """How a held-out curve ended: first step at the bar, its last jump (the last rise
    of >= 0.1 within 500 steps), the middle and the end."""
    hit = step[acc >= bar]
    w = max(1, int(round(500 / (step[1] - step[0]))))
    ups = np.flatnonzero(acc[w:] - acc[:-w] >= 0.1)
    j = int(ups[-1]) if len(ups) else None
    plat = train.plateau(loss)
    state = (
        "learned and flat"
        if acc[-1] >= bar and plat <= 0.02
        else "stalled below the bar, its loss flat"
        if plat <= 0.02
        else "still improving"
    )
    return dict(
        first_at_bar=int(hit[0]) if len(hit) else None,
        last_jump=None
        if j is None
        else f"{acc[j]:.2f} → {acc[j + w]:.2f} by step {int(step[j + w])}",
        at_half=float(acc[len(acc) // 2 - 1]),
        end=float(acc[-1]),
        plateau=plat,
        state=state,
    )


diag5 = pd.DataFrame(
    {
        a: describe_curve(
            *curve5(a), curve5(a, "val_loss")[1], bars5["in_window"]["target"]
        )
        for a in arms5
    }
).T
display(
    diag5.style.set_caption(
        f"round 5, seed {s5}: how each held-out curve (training "
        "length) got where it ended"
    )
)

# %% [markdown]
# **Diagnosis, before redesigning.** The curves below are the held-out (training-length) accuracy of round 5's
# seed against steps. The table above classifies each ending by the plateau measure of the held-out loss: a
# curve that ends below the bar with a flat loss has *stalled* (more of the same schedule's tail would not move
# it), one still falling needs more steps. A stall that ends in a sudden jump elsewhere (the staircase of the
# arms that learned) points at an optimisation plateau whose escape depends on the draw (initialisation, data
# order) or on how long the learning rate stays high. Round 6's probe (`data/04_tree_rope/probe_recall2.py`,
# registered before it ran, commit 2be497f) separates the two with RoPE alone: seeds 1 and 2 at the same recipe
# (the draw?) and seed 0 at 9000 steps (the schedule?), recording the in-window curve only; RoPE + OPT
# offsets, round 5's arm that was still improving, at 9000 steps is recorded beside (it decides nothing).
# Its **rule for round 6**, fixed with it: (1) if RoPE learns at seed 0 at 9000 steps (round 5's bars: accuracy and a
# flat loss), round 6
# is recall2 at 9000 steps; (2) else, if it learns at both seeds 1 and 2 at 6000, recall2 unchanged (seed 0's
# stall a draw); (3) otherwise no round-6 training. In (1) and (2) every seed runs (no seed-0 stop); a seed's
# failing conditions make the claims naming them inconclusive there. The rule looks at RoPE only: not at NoPE,
# not at any longer length.

# %% tags=["hide-input"]
p6 = json.loads(checkpoints.fetch(SLUG, "probe_recall2.json").read_text())
runs6 = p6["records"]
fig, ax = plt.subplots(1, 2, figsize=(10, 3.2))
for i, a in enumerate(arms5):
    ax[0].plot(*curve5(a), lw=1, color=plotting.PALETTE[i % 8], label=a)
ax[0].axhline(bars5["in_window"]["target"], color="k", lw=0.6, ls=":")
ax[0].set(
    xlabel="step",
    ylabel="held-out accuracy",
    title=f"round 5, seed {s5} ({cfg5['steps']} steps)",
)
ax[0].legend(fontsize=6)
ax[1].plot(
    *curve5("RoPE"),
    lw=1,
    color="k",
    label=f"RoPE, seed {s5}, {cfg5['steps']} (round 5)",
)
for i, r in enumerate(runs6.values()):
    st, v = np.asarray(r["val_acc"]).T
    ax[1].plot(
        st,
        v,
        lw=1,
        color=plotting.PALETTE[(i + 1) % 8],
        ls="--" if r["arm"] != "RoPE" else "-",
        label=f"{r['arm']}, seed {r['seed']}, {r['steps']}",
    )
ax[1].axhline(bars5["in_window"]["target"], color="k", lw=0.6, ls=":")
ax[1].set(xlabel="step", ylabel="held-out accuracy", title="round 6's probe")
ax[1].legend(fontsize=6)
plt.tight_layout()
plt.show()
tab6 = pd.DataFrame(
    {
        n: dict(
            arm=r["arm"],
            seed=r["seed"],
            steps=r["steps"],
            acc=r["final_val_acc"],
            plateau=r["plateau"],
            learned=r["learned"],
            minutes=r["seconds"] / 60,
        )
        for n, r in runs6.items()
    }
).T
display(
    tab6.style.format(precision=3).set_caption(
        "round 6's probe: held-out accuracy at the training length at the end, "
        "plateau of the loss"
    )
)
missing6 = [n for n in ("s0x1.5", "s1", "s2", "opt0x1.5") if n not in runs6]
print("round 6's rule reads:", p6["round6"], "| not run:", missing6 or "none")


# %% tags=["remove-input"]
def said(r):
    st, v = np.asarray(r["val_acc"]).T
    d = describe_curve(
        st, v, np.asarray(r["val_loss"])[:, 1], bars5["in_window"]["target"]
    )
    at_bar = "never" if d["first_at_bar"] is None else f"step {d['first_at_bar']}"
    return (
        f"at the bar: {at_bar}; last jump {d['last_jump']}, ending at "
        f"{r['final_val_acc']:.2f} (plateau {r['plateau']:.3f}: "
        + ("learned" if r["learned"] else "not learned")
        + ")"
    )


r5 = diag5.loc["RoPE"]
lines6 = [
    f"- **Round 5, seed {s5}.** RoPE ended at {r5['end']:.2f} in-window, "
    f"{r5['state']} (plateau {r5['plateau']:.3f}); its last jump (a rise of at "
    f"least ten points within 500 steps): {r5['last_jump']}; at mid-schedule "
    f"{r5['at_half']:.2f}. Arms that reached the bar: "
    + (
        ", ".join(
            f"{a} at step {d['first_at_bar']}"
            for a, d in diag5.iterrows()
            if d["first_at_bar"] is not None
        )
        or "none"
    )
    + ". Still improving at the end: "
    + (
        ", ".join(a for a, d in diag5.iterrows() if d["state"] == "still improving")
        or "none"
    )
    + "."
]
seeds_ok = [runs6[n] for n in ("s1", "s2") if n in runs6]
if seeds_ok:
    lines6.append(
        "- **The draw** (RoPE, same recipe, other seeds): "
        + "; ".join(f"seed {r['seed']} {said(r)}" for r in seeds_ok)
        + f". Learned at {sum(r['learned'] for r in seeds_ok)} of {len(seeds_ok)}."
    )
if "s0x1.5" in runs6:
    lines6.append(
        f"- **The schedule** (RoPE, seed {s5}, {runs6['s0x1.5']['steps']} steps): "
        + said(runs6["s0x1.5"])
        + "."
    )
if "opt0x1.5" in runs6:
    r_ = runs6["opt0x1.5"]
    lines6.append(
        f"- **RoPE + OPT offsets** at {r_['steps']} steps (recorded, decides nothing): "
        + said(r_)
        + f"; at {cfg5['steps']} steps it ended at "
        f"{diag5.loc['RoPE + OPT offsets', 'end']:.2f} (plateau "
        f"{diag5.loc['RoPE + OPT offsets', 'plateau']:.3f})."
    )
d6 = p6["round6"]
sec_seed = {}
for k, v in man5["extra"]["seconds_per_run"].items():
    sec_seed[int(k.rsplit("/", 1)[1])] = sec_seed.get(int(k.rsplit("/", 1)[1]), 0) + v
if seeds_ok and "s0x1.5" in runs6:
    n_ok, x15 = sum(r["learned"] for r in seeds_ok), runs6["s0x1.5"]["learned"]
    lines6.append(
        "- **What the evidence shows.** "
        + (
            f"The draw: at the same recipe RoPE learned at {n_ok} of {len(seeds_ok)} other "
            f"seeds, while at seed {s5} a longer schedule "
            + (
                "also learned."
                if x15
                else "stalled again below the bar. Seed "
                f"{s5}'s stall is a property of its initialisation and data order (an "
                "optimisation plateau it did not leave), not of the schedule's length."
            )
            if n_ok
            else "Not the draw (no other seed learned); "
            + ("the longer schedule did." if x15 else "nor the schedule's length.")
        )
    )
lines6.append(
    "- **Round 6 by the registered rule:** "
    + (
        "not decided yet (a run it needs is missing: "
        + ", ".join(n for n in missing6 if n != "opt0x1.5")
        + ")."
        if not d6["decided"]
        else {
            1: "clause 1, the recall2 config at 9000 steps for every arm and seed "
            "(not taken).",
            2: "clause 2, recall2 unchanged (seed 0's stall read as a draw): its seeds "
            "1 and 2 trained by `make_recall.py` (records below), seed 0 is round 5's "
            "stored seed, no seed-0 stop; "
            + ", ".join(f"seed {s_} {v / 60:.0f}" for s_, v in sec_seed.items())
            + " CPU minutes of training per seed (the record's seconds).",
            3: "clause 3: RoPE does not learn the two-key task reliably at d = 64 "
            "within 9000 cosine "
            "steps; no round-6 training, the recipe is the next question.",
        }[d6["clause"]]
    )
)
display(Markdown("\n".join(lines6)))


# %% [markdown]
# ### Round 6: the two-key task at three seeds
#
# Round 6 is round 5's `recall2` checkpoint unchanged (two keys, d = 64, the six arms with NoPE, 6000 cosine
# steps, the same bars and conditions), now at seeds 0, 1 and 2 with no seed-0 stop: clause 2 of the probe's
# rule above, written into `tr.checkpoint_config("recall2")`'s docstring before any round-6 training (commit
# affc024). Seed 0 is round 5's stored seed; seeds 1 and 2 were trained by `data/04_tree_rope/make_recall.py`
# (one job per seed) and merged into `data/04_tree_rope/recall2.json` (commit 0770d79). **Registered
# conditions, per seed:** every arm but NoPE answers at least 95% of the in-window queries
# (`retrieval_in_window`), each compared arm's held-out loss is flat (`plateau_ret_*`, round 5's bar), and
# RoPE answers at least 30 points more often than NoPE in-window (`needs_position`). At a seed where one fails,
# the claims that name it are inconclusive there. The claims of issue #62 (section 9) read this checkpoint until
# round 12 (below) replaced it; round 4's one-key round above is the earlier round it was. Records only: each seed's per-window
# results, no weights, so the default run cannot re-check them live; quick mode trains tiny arms live.

# %% tags=["hide-input"]
cfg_k = scripts.with_seeds(tr.checkpoint_config("recall2"), scripts.model_seeds(seed))
if quick:  # tiny arms trained live, one seed, evaluated to 16x
    cfg_k = copy.deepcopy(cfg_k)
    cfg_k.update(d_model=32, steps=60, warmup=10, val_every=20, val_windows=32)
    cfg_k.update(seeds=[seed], weight_seeds=[seed])
    cfg_k["eval"] = dict(cfg_k["eval"], lengths=[32, 512], windows=32)
    cfg_k["eval"]["control"] = dict(cfg_k["eval"]["control"], prefix_len=512,
                                    attention_windows=8)
k_len, k_far, k_tests, (k_models, k_hit, k_curve, man_k) = recall_setup(
    cfg_k, "recall2"
)
if not quick:
    sec = man_k["extra"]["seconds_per_run"]
    print(f"trained in {sum(sec.values()) / 60:.0f} CPU min on "
          f"{man_k['machine']['torch_threads']} thread ("
          + ", ".join(f"{k} {v:.0f} s" for k, v in sec.items() if k.endswith("/0"))
          + ")")
k_plateau = show_curves(cfg_k, k_curve, "two-key offset recall")
show_accuracy(cfg_k, k_hit, tr.RECALL_ARMS, "two-key offset recall")

# %% [markdown]
# **Is it the distance, the length, or unseen positions?** (the dilution control, registered with this
# checkpoint; a diagnostic, no claim; default-run lengths below, quick mode scales them down). Round 4's attention
# table above shows where the one-key query looked at 2048. The held-out windows of the training length are
# scored again in three ways: with their position ids **shifted**
# by 1008 (the window then crosses 1024 = 2·8³, where every TPE digit turns over) and by 2016 (the last
# positions of a 2048 window, no carry); and **behind a prefix** of 2016 random value tokens (a window of 2048
# whose keys all lie in its last 32 positions: length without distance). The 2048 windows themselves add the
# distance. RoPE and NoPE cannot change under a shift (their scores depend on relative positions only; a unit
# test checks it), so for them the shifted columns are checks; TPE changes only where a window crosses a carry.
# Per seed: an arm-seed that did not learn the task in-window says nothing about longer lengths, so section 10
# reads the control only where the in-window accuracy meets the registered bar.

# %% tags=["hide-input"]
ctl = cfg_k["eval"]["control"]
k_conds = list(tr.dilution_tasks(cfg_k))  # "shift 1008", "shift 2016", "prefix 2048"
COLS = [f"length {cfg_k['train_len']}"] + k_conds + [f"length {k_far}"]
if quick:  # live: the same scoring as make_recall.py's control()
    ck_k, k_ctl, k_attn = None, {}, {}
    for (arm, s), m in k_models.items():
        for c, (task, pos) in tr.dilution_tasks(cfg_k).items():
            k_ctl[(arm, s, c)] = tr.retrieval_scores(m, task, pos=pos)[0][:, 0].numpy()
            k_attn[(arm, s, c)] = tr.query_attention(
                m, task, pos=pos, n_windows=ctl["attention_windows"])[:, -1, 1]
        for n in (cfg_k["train_len"], k_far):
            k_attn[(arm, s, f"length {n}")] = tr.query_attention(
                m, k_tests[n], n_windows=ctl["attention_windows"])[:, -1, 1]
else:
    ck_k = checkpoints.load(SLUG, "recall2", config=cfg_k)
    last = f"l{cfg_k['n_layer']}"
    k_ctl = {(a, s, c): ck_k.tensors[
        f"{a}/{s}.eval_correct_{c.replace(' ', '')}"].numpy()
        for a, s in k_hit for c in k_conds}
    k_attn = {(a, s, c): ck_k.tensors[
        f"{a}/{s}.eval_att_answer_{c.replace(' ', '')}_{last}"].float().numpy()
        for a, s in k_hit for c in COLS}
for a, s in k_hit:  # the plain lengths come from the stored per-window results
    for n in (cfg_k["train_len"], k_far):
        k_ctl[(a, s, f"length {n}")] = k_hit[(a, s)][n]
rel = [(a, s) for a, s in k_hit if cfg_k["arms"][a]["enc"] in ("rope", "none")]
shift_differ = sum(int((k_ctl[(a, s, c)] != k_hit[(a, s)][cfg_k["train_len"]]).sum())
                   for a, s in rel for c in k_conds if c.startswith("shift"))
rec.check("recall2_shift_invariance", shift_differ, 0, op="<=",
          note=f"answers of RoPE-family and NoPE arm-seeds ({len(rel)}) that a shift "
          "of the position ids changes (relative positions only)")
ctl_acc = pd.DataFrame([dict(arm=a, seed=s, cond=c, acc=float(v.mean()))
                        for (a, s, c), v in k_ctl.items()])
ctl_tab = ctl_acc.pivot_table(index=["arm", "seed"], columns="cond", values="acc")
ctl_tab = ctl_tab.loc[list(cfg_k["arms"]), COLS]
display(ctl_tab.round(3).style.set_caption(
    "dilution control, per seed: accuracy of the same short windows in-window, "
    "shifted, behind a prefix, and the long windows"))
att_tab = pd.DataFrame([dict(arm=a, seed=s, cond=c, att=float(v.mean()))
                        for (a, s, c), v in k_attn.items()]).pivot_table(
    index=["arm", "seed"], columns="cond", values="att")
att_tab = att_tab.loc[list(cfg_k["arms"]), COLS]
display(att_tab.round(3).style.set_caption(
    "last-layer attention of the query on the answer token, per seed (mean over "
    f"heads and the first {ctl['attention_windows']} windows)"))

# %% [markdown]
# ### Round 7: why arms missed the bar, and restarts
#
# Round 6 left both retrieval claims inconclusive at every seed: at each seed some arm answered fewer than 95% of
# the in-window queries, the weakest an OPT arm every time. **Diagnosis from the stored curves** (table below,
# generated): an arm that learns the task jumps to it at widely spread steps; others end on a flat curve below
# the bar or are still climbing when the learning rate runs out. Arms whose training ids jump (RoPE + skips,
# RoPE + OPT offsets, TPE + OPT) met the bars far less often than RoPE and TPE, and they never train on the
# contiguous ids 0..31 they are scored on in-window. So two explanations: a **stall** (they do not learn the task
# on their own training ids either) or a **mismatch** (they learn it on their jumping ids and do not carry it to
# contiguous ids). **Round 7's probe** (`data/04_tree_rope/probe_recall3.py`, registered with its rule in commit
# d233956 before it ran) retrained the two OPT arm-seeds that ended flat far below the bar, exactly as
# `make_recall.py` had, and scored them in-window twice: on contiguous ids and on the arm's own training ids. Its
# rule: any mismatch → a plain-id mix for the jumping-id arms plus restarts; otherwise restarts only. **The
# restart rule** (registered in commit 1fd048e, before any round-7 training; `tr.restart_chain`): every arm but
# NoPE that answers fewer than 95% of the held-out queries at the end, or whose loss is not flat (round 5's
# plateau bar), is trained again
# from a new initialisation (the same batches and ids), at most twice; the claims read the first attempt that
# meets both bars, else the last. An arm's round-6 run is its first attempt. Seed 1 first (its TPE + OPT was the
# weakest arm-seed of round 6, and it had the most arms below the bars); seeds 0 and 2 only if every arm but NoPE
# meets both bars at seed 1.

# %% tags=["hide-input"]
man6 = json.loads(checkpoints.fetch(SLUG, "recall2.json").read_text())
cfg7 = tr.checkpoint_config("recall3")
jumping = [a for a, sp in cfg7["arms"].items() if sp["ids"] != "plain"]


def curve6(a, s_, c):
    return (np.asarray(man6["history"][f"{a}/{s_}/{c}"][k]) for k in ("step", "value"))


d6 = pd.DataFrame(
    {
        (a, int(s_)): describe_curve(
            *curve6(a, s_, "val_acc"),
            list(curve6(a, s_, "val_loss"))[1],
            cfg7["restarts"]["acc"],
        )
        for a, s_ in (k.split("/") for k in man6["metrics"])
        if a != "NoPE"
    }
).T
display(
    d6[["first_at_bar", "last_jump", "end", "plateau", "state"]]
    .style.format(precision=3)
    .set_caption("round 6 (recall2): how each arm-seed's held-out curve ended")
)
ok6 = d6.state == "learned and flat"
n_jump = ok6.loc[[i for i in d6.index if i[0] in jumping]]
n_plain = ok6.loc[[i for i in d6.index if i[0] not in jumping]]
print(
    f"learned and flat: jumping-id arms {n_jump.sum()} of {len(n_jump)}, "
    f"plain-id arms {n_plain.sum()} of {len(n_plain)}"
)

# %% [markdown]
# **The probe's two runs**: round 6's held-out curve (grey) and the rerun's, scored on contiguous ids (solid) and
# on the arm's own training ids (dashed); the table gives the final accuracies, the reading by the rule, and the
# first step where the rerun's curve leaves round 6's (one torch thread each time, same code and seed).

# %% tags=["hide-input"]
p7 = json.loads(checkpoints.fetch(SLUG, "probe_recall3.json").read_text())
fig, ax = plt.subplots(1, len(p7["records"]), figsize=(10, 3.2))
for a_, r in zip(ax, p7["records"].values()):
    old = man6["history"][f"{r['arm']}/{r['seed']}/val_acc"]
    a_.plot(old["step"], old["value"], color="0.6", lw=1, label="round 6's run")
    for c, ls, lab in (
        ("val_acc", "-", "rerun: contiguous ids"),
        ("train_ids_acc", "--", "rerun: its training ids"),
    ):
        a_.plot(*np.asarray(r[c]).T, ls=ls, lw=1, label=lab)
    a_.axhline(cfg7["restarts"]["acc"], color="k", lw=0.6, ls=":")
    a_.set(
        xlabel="step",
        ylabel="held-out accuracy (length 32)",
        title=f"{r['arm']}, seed {r['seed']}: {r['reading']}",
    )
    a_.legend(fontsize=6)
plt.tight_layout()
plt.show()


def apart(r):  # the first step where the rerun's held-out curve leaves round 6's
    old = man6["history"][f"{r['arm']}/{r['seed']}/val_acc"]["value"]
    return next((st for (st, v), w in zip(r["val_acc"], old) if v != w), None)


tab7 = pd.DataFrame(
    [
        dict(
            arm=r["arm"],
            seed=r["seed"],
            contiguous=r["final_val_acc"],
            training_ids=r["final_train_ids_acc"],
            plateau=r["plateau"],
            reading=r["reading"],
            round6_end=man6["metrics"][f"{r['arm']}/{r['seed']}"]["final_val_acc"],
            apart_from_step=apart(r),
        )
        for r in p7["records"].values()
    ]
)
display(tab7.style.format(precision=3).set_caption("round 7's probe"))
print("round 7's rule reads:", p7["round7"])

# %% [markdown]
# **Round 7's runs** (`data/04_tree_rope/make_recall3.py`, one job per arm-seed chain, records only; each attempt
# is evaluated as round 6's arms were). Per arm-seed: each attempt's final held-out accuracy (plateau), the
# attempt the rule reads and whether it meets both bars, and its accuracy at the training length and at 2048 on
# the evaluation windows; a chain not run yet is marked pending. NoPE is round 6's run. Quick mode skips this.

# %% tags=["hide-input"]
def read_attempt(c):
    """Per-window correctness by length and plateau of the attempt chosen in ``c``."""
    tens, hist = src7[c["record"]]
    return (
        {n: tens[f"{c['key']}.eval_correct_{n}"].bool().numpy() for n in k_len},
        train.plateau(hist[f"{c['key']}/val_loss"]),
    )


def attempts_row(k, c):
    h = read_attempt(c)[0] if c["attempt"] is not None else {}
    tried = " → ".join(
        f"{t['final_val_acc']:.2f} ({t['plateau']:.3f})" for t in c["attempts"]
    )
    return dict(
        arm=k.rsplit("/", 1)[0],
        seed=int(k.rsplit("/", 1)[1]),
        read=c["attempt"],
        meets_bars=c["attempt"] is not None and tr.meets_bars(c, cfg7),
        attempts=tried + (" … (pending)" if k in pend7 else ""),
        **{
            f"acc {n}": h[n].mean() if h else np.nan
            for n in (cfg_k["train_len"], k_far)
        },
    )


if not quick:
    man7 = json.loads(checkpoints.fetch(SLUG, "recall3.json").read_text())
    cfg7_s = scripts.with_seeds(cfg7, man7["seed"])
    ck7 = checkpoints.load(SLUG, "recall3", config=cfg7_s)
    src7 = {
        "recall2": (ck_k.tensors, man_k["history"]),
        "recall3": (ck7.tensors, man7["history"]),
    }
    chosen7, pend7 = man7["extra"]["chosen"], man7["extra"]["pending"]
    rows7 = [attempts_row(k, c) for k, c in chosen7.items()]
    display(
        pd.DataFrame(rows7)
        .set_index(["arm", "seed"])
        .style.format(precision=3)
        .set_caption(
            "round 7: attempts per arm-seed (held-out accuracy (plateau)), "
            f"the one read, its accuracy at {cfg_k['train_len']} and {k_far}"
        )
    )

# %% [markdown]
# **Round 7's reading** (what the claims read until round 12; the carry table of rounds 8–9 reads it): round 7's
# chosen attempts at the seeds whose every chain is complete; where none is, round 6's runs (quick mode: the live
# tiny arms).

# %% tags=["hide-input"]
cfg_q, q_hit, q_plateau, q_round = cfg_k, k_hit, k_plateau, "round 6"
if quick:
    q_round = "quick mode's tiny arms"
else:
    done7 = [s_ for s_ in man7["seed"] if not any(k.endswith(f"/{s_}") for k in pend7)]
    if done7:
        cfg_q, q_round, q_hit, q_plateau = dict(cfg_k, seeds=done7), "round 7", {}, {}
        for a, s_ in [(a, s_) for a in cfg_k["arms"] for s_ in done7]:
            q_hit[(a, s_)], q_plateau[(a, s_)] = read_attempt(chosen7[f"{a}/{s_}"])
print(f"round 7's reading: {q_round}, seeds {cfg_q['seeds']}")


# %% tags=["remove-input"]
if not quick:
    tries7 = [
        t for k, c in chosen7.items() if not k.startswith("NoPE") for t in c["attempts"]
    ]
    ps7 = cfg7["probe_seed"]
    below7 = sorted(
        {
            r["arm"]
            for r in rows7
            if r["arm"] != "NoPE" and r["seed"] == ps7 and r["read"] is not None
            and not r["meets_bars"]
        }
    )
    sec7 = man7["extra"]["seconds_per_run"]
    display(
        Markdown(
            "**Round 7 by its rule.** "
            f"{sum(tr.meets_bars(t, cfg7) for t in tries7)} of {len(tries7)} attempts "
            "(the first of each arm-seed is round 6's run) met both bars. "
            + (
                f"At seed {ps7}, {', '.join(below7)} stayed below them after "
                f"{cfg7['restarts']['max']} restarts, so by the registered rule "
                "seeds 0 and 2 are not trained in round 7."
                if below7
                else ""
            )
            + (f" Chains not run yet: {', '.join(pend7)}." if pend7 else "")
            + f" Round 7's reading: {q_round}, seeds "
            + ", ".join(map(str, cfg_q["seeds"]))
            + f". {len(sec7)} attempts trained in round 7, "
            f"{sum(sec7.values()) / 60:.0f} CPU minutes on one thread."
        )
    )

# %% [markdown]
# ### Rounds 8 and 9: two ways a TPE arm misses the bar
#
# Round 7's arms that missed the in-window bar failed in two ways. **(a) No onset**: some arm-seeds stay at chance
# until the cosine schedule has run down, and whether one starts looks like a draw per initialisation. **(b) The
# carry gap**: TPE arms that *do* learn stop short of the bar, missing only the windows whose answer sits one
# place after a key at p mod 8 = 7, where the step to the answer crosses a carry of the lowest digit.
#
# **Round 8** (registered in commit a1c0ce5 with its rule, before its runs; `data/04_tree_rope/probe_recall4.py`)
# tried two recipe changes against (a), 4 heads of 16 (`H4`) and AdamW weight decay (`WD`), on round 7's two worst
# attempts (TPE and TPE + OPT, seed 1, the init that stayed at chance), each cut at step 1500 of the 6000-step
# schedule. A change qualified when it lifted both runs by at least 30 points over round 7's curve at step 1500; with
# none qualifying, round 8's checkpoint is not trained. The table gives each run and the rule's reading.
#
# **Round 9** asks whether (b) belongs to the encoding or to training (`data/04_tree_rope/probe_carry.py`,
# registered in commit 8d2d97a with its rule and both possible designs before its training). The answer token is
# reached through a *previous-token* head: the answer's position attends to the key one place back. Under TPE a
# score is a sum of per-level terms, and the step back is the digit tuple (+1, 0, 0, 0) everywhere except across a
# carry, where it is (−7, +1, 0, 0). One head must rank both tuples above every other key's. **Construction (no
# training):** a linear program finds the best margin by which a position-only score q·R(m − n)k can put the key one
# place back above all others, at unit query-key norm. It is run over the training window's queries, over queries
# anywhere below 2048, and over OPT's training windows, each with and without the carry queries. A margin k times
# smaller needs k times larger query-key weights for the same sharpness of attention. **A tiny trained check:**
# the same model and arms on a dense previous-token copy task (predict token i − 1 at every position, 1000 steps,
# three seeds), scored at the carry positions and elsewhere. **Rule:** an arm is *structural* when it learns the
# task everywhere but the carries (99% elsewhere, under 90% at carries) at two or more seeds while the RoPE arm
# with the same training ids gets the carries (99%); it is *trainable* when it also gets the carries at two or
# more seeds. TPE + OPT's reading picks round 9's design. If structural (branch S), the retrieval claims name
# `retrieval_learned` (the in-window bar of 95%, read on the windows whose key is not at p mod 8 = 7) instead of
# `retrieval_in_window`, with the carry windows reported beside. This redesign was written after rounds 6–8's
# numbers had been seen, and it is disclosed as such. If trainable (branch T), nothing in the claims changes.

# %% tags=["hide-input"]
def probe_state(r, learned=0.99, carry=0.90):  # probe_carry.state: the registered rule
    if r["no_carry"] < learned:
        return "not learned"
    return "carry gap" if r["carry"] < carry else "learned"


p8 = json.loads(checkpoints.fetch(SLUG, "probe_recall4.json").read_text())
display(
    pd.DataFrame(
        [dict(change=r["change"], arm=r["arm"], round7_at_1500=r["baseline"],
              at_1500=r["acc_at_probe"], lift=r["acc_at_probe"] - r["baseline"],
              carry_windows=r["carry"], other_windows=r["no_carry"])
         for r in p8["records"].values()]
    ).style.format(precision=3).set_caption(
        "round 8's probe: held-out accuracy at step 1500 (seed 1, init 2001)")
)
print("round 8's rule reads:", p8["round8"])
p9 = json.loads(checkpoints.fetch(SLUG, "probe_carry.json").read_text())
mg = pd.DataFrame(p9["margins"]).T
mg["TPE ÷ RoPE"] = mg["TPE"] / mg["RoPE"]
display(mg.style.format(precision=3).set_caption(
    "best previous-token margin at unit query-key norm (linear program, no training)"))
t9 = pd.DataFrame(
    [dict(arm=r["arm"], seed=r["seed"], carry=r["carry"], other=r["no_carry"],
          state=probe_state(r), own_ids_carry=r.get("own_ids_carry", np.nan),
          own_ids_other=r.get("own_ids_no_carry", np.nan))
     for r in p9["records"].values()]
).set_index(["arm", "seed"])
display(t9.style.format(precision=3).set_caption(
    f"previous-token task, {p9['config']['steps']} steps: accuracy at carry "
    "positions and elsewhere (contiguous ids; own training ids beside)"))
round9 = p9["round9"]
print("round 9's rule reads:", round9)

# %% [markdown]
# **The carry gap in the runs the claims read.** Each arm-seed's in-window accuracy (length 32) on the held-out
# windows whose key sits at p mod 8 = 7 (the answer across a carry) and on the others. Branch S's condition reads
# the second column.

# %% tags=["hide-input"]
B9 = cfg_k["arms"]["TPE"]["B"]
kp9 = k_tests[cfg_k["train_len"]]["key_pos"][:, 0].numpy()
carry9 = kp9 % B9 == B9 - 1
split9 = pd.DataFrame(
    [dict(arm=a, seed=s_, carry_windows=float(h[cfg_k["train_len"]][carry9].mean()),
          other_windows=float(h[cfg_k["train_len"]][~carry9].mean()),
          all_windows=float(h[cfg_k["train_len"]].mean()))
     for (a, s_), h in q_hit.items() if a != "NoPE"]
).set_index(["arm", "seed"])
display(split9.style.format(precision=3).set_caption(
    f"{q_round}: in-window accuracy on the {int(carry9.sum())} carry windows and the "
    f"{int((~carry9).sum())} others"))

# %% tags=["remove-input"]
w9 = p9["margins"]["window 0..31"]
o9 = p9["margins"]["OPT windows"]
w9n = p9["margins"]["window 0..31, no carry"]
o9n = p9["margins"]["OPT windows, no carry"]
gap9 = split9[(split9.other_windows >= 0.99) & (split9.carry_windows < 0.9)]
q_round9 = q_round  # the runs the carry table read (round 7's reading)
first9 = next(iter(p9["records"].values()))["curve"]["acc_carry"][0][0]
early9 = {}
for r in p9["records"].values():
    early9.setdefault(r["arm"], []).append(
        (r["curve"]["acc_carry"][0][1], r["curve"]["acc_no_carry"][0][1]))
got9 = split9[(split9.other_windows >= 0.99) & (split9.carry_windows >= 0.9)]
display(Markdown(
    f"**Round 8.** Qualified: {p8['round8']['qualifies']}; lift over round 7's "
    "curve at step 1500: "
    + "; ".join(f"{r['change']} {r['arm']} {r['acc_at_probe'] - r['baseline']:+.3f}"
                for r in p8["records"].values())
    + (f" (change picked: {p8['round8']['change']}). " if p8["round8"]["change"]
       else ": no change lifts both runs, so neither makes the onset reliable on this "
       "evidence and recall4 is not trained. ")
    + "**Round 9, construction.** One TPE head *can* rank the key one place back "
    "first at every query, carries included, but with a margin of "
    f"{w9['TPE']:.3f} against {w9n['TPE']:.3f} without the carry queries and "
    f"{w9['RoPE']:.3f} for RoPE (training window); on OPT's training windows "
    f"{o9['TPE']:.3f} (without carries {o9n['TPE']:.3f}) against {o9['RoPE']:.3f} "
    f"for RoPE with the same offsets, {o9['RoPE'] / o9['TPE']:.1f}× "
    "smaller: the carry is representable at a cost in the scale of the weights, not "
    "impossible. **Trained.** The tiny previous-token task reads "
    + ", ".join(f"{a} {v}" for a, v in round9["reading"].items())
    + (f" (branch {round9['branch']})." if round9["reading"] else f" ({round9}).")
    + f" At its first evaluation (step {first9}) carry / other positions: "
    + "; ".join(f"{a} " + ", ".join(f"{c:.2f}/{o:.2f}" for c, o in v)
                for a, v in early9.items())
    + " (seeds in order): the TPE arms learn the carry step later, where the margin "
    "is smaller."
    + " **The claims' runs** "
    f"({q_round}): learned but for the carries at "
    + (", ".join(f"{a} seed {s_}" for a, s_ in gap9.index) or "no arm-seed")
    + "; learned including the carries at "
    + (", ".join(f"{a} seed {s_}" for a, s_ in got9.index) or "no arm-seed") + "."
))

# %% [markdown]
# ### Rounds 10 and 11: an auxiliary previous-token loss
#
# **Round 10's probe** (`data/04_tree_rope/probe_recall5.py`, registered in commit 31ae38d with its rule, before its
# runs). Round 9 found the carry step trainable when it is trained densely, so round 10 tries one change aimed at
# both failure modes: recall2's recipe plus an auxiliary previous-token loss on the same windows (the query
# positions left out), at a weight fixed before the runs. It runs on round 8's two runs, with round 8's rule: the
# change qualifies when both runs beat round 7's curve at step 1500 by at least 30 points. If it qualifies, the
# next round trains every arm with it (a checkpoint registered before training); the claims above do not read it.

# %% tags=["hide-input"]
p10 = json.loads(checkpoints.fetch(SLUG, "probe_recall5.json").read_text())
display(
    pd.DataFrame(
        [dict(arm=r["arm"], round7_at_1500=r["baseline"], at_1500=r["acc_at_probe"],
              lift=r["acc_at_probe"] - r["baseline"], carry_windows=r["carry"],
              other_windows=r["no_carry"])
         for r in p10["records"].values()]
    ).style.format(precision=3).set_caption(
        f"round 10's probe: auxiliary previous-token loss (weight "
        f"{next(iter(p10['records'].values()))['aux_weight']}), step 1500, seed 1, "
        "init 2001")
)
print("round 10's rule reads:", p10["round10"])

# %% [markdown]
# **Round 11** (`recall5`, `data/04_tree_rope/make_recall5.py`, registered in commit 1123aa4 before any of its
# training, as round 10's rule prescribed): every arm trained with round 10's auxiliary previous-token loss, at
# recall2's recipe otherwise, one attempt per arm-seed (the one read). Seed 1 first: seeds 0 and 2 are trained only
# if the four claim arms meet both bars at seed 1 (final held-out accuracy and plateau, recall2's bars). The claims
# above do not read it yet; the table shows each stored arm-seed against the bars, and (default mode) its in-window
# accuracy on the carry windows and the others, as above.

# %% tags=["hide-input"]
cfg11 = tr.checkpoint_config(
    "recall5"
)  # man11: recall5's record, kept in recall6's manifest
bars11 = cfg11["restarts"]
hit11 = (
    {}
    if quick
    else {
        k: np.array([c == "1" for c in w["correct_train"]])
        for k, w in man11["windows"].items()
    }
)
t11 = pd.DataFrame(
    [
        dict(
            arm=k.split("/")[0],
            seed=int(k.split("/")[1]),
            final_acc=c["final_val_acc"],
            plateau=c["plateau"],
            meets_bars=c["meets_bars"],
            carry_windows=float(hit11[k][carry9].mean()) if k in hit11 else np.nan,
            other_windows=float(hit11[k][~carry9].mean()) if k in hit11 else np.nan,
        )
        for k, c in man11["extra"]["chosen"].items()
    ]
).set_index(["arm", "seed"])
display(
    t11.style.format(precision=3).set_caption(
        f"round 11 (recall5): bars accuracy >= {bars11['acc']}, plateau <= "
        f"{bars11['plateau']}; stored seeds {man11['seed']} (recall5's record, sha256 "
        f"{man11['files']['recall5.json'][:12]}…)"
    )
)

# %% tags=["hide-input"]
s11 = t11.xs(1, level="seed")
miss11 = {
    a: [
        b
        for b, ok in (
            ("accuracy", s11.loc[a, "final_acc"] >= bars11["acc"]),
            ("plateau", s11.loc[a, "plateau"] <= bars11["plateau"]),
        )
        if not ok
    ]
    if a in s11.index
    else ["not trained"]
    for a in cfg11["in_window_arms"]
}
pass11 = not any(miss11.values())
display(
    Markdown(
        "**Round 11, seed 1, read by its registered rule.** "
        + (
            "The four claim arms meet both bars, so seeds 0 and 2 are trained next."
            if pass11
            else "Missing: "
            + "; ".join(f"{a} ({', '.join(m)})" for a, m in miss11.items() if m)
            + ". The four claim arms do not all meet both bars, so seeds 0 and 2 "
            "are not "
            "trained; round 12 lengthens the schedule."
        )
    )
)

# %% [markdown]
# ### Round 12: the auxiliary loss at 18000 steps, the round the claims read
#
# **Registered** (`data/04_tree_rope/make_recall6.py`, commit 41517a7, before any of its training): round 11's
# recipe with a 3× longer cosine schedule (18000 steps, chosen by a registered rule from round 11's curves), one
# attempt per arm-seed, the same bars; seed 1 first, seeds 0 and 2 only if the four claim arms meet both bars there.
# **Amended after seed 1's numbers, before seeds 0 and 2 were trained** (commit a6ce875, disclosed): at seed 1
# RoPE and RoPE + OPT offsets missed the plateau bar, so by the rule seeds 0 and 2 would not train; they trained
# anyway because two claims can be decided without those arms, by a bound that holds whatever they would reach
# (`tr.bound_gates`): `retrieval_at_64x`'s difference is at most TPE + OPT's own accuracy at 2048, and
# `needs_both_parts`' minimum is at most TPE + OPT − TPE. Where that bound misses the target at every seed the
# verdict names only the converged arms' plateau conditions; a bound never makes a claim hold. The claims read this
# checkpoint (`recall6`, records only; RoPE + skips is not one of its arms, so the best-other baseline is the best
# of RoPE + OPT offsets and TPE). Quick mode skips the stored records here and the claims read its tiny live arms.

# %%
cfg12 = scripts.with_seeds(tr.checkpoint_config("recall6"), man12["seed"])
if not quick:
    _, _, tests12, (_, hit12, curve12, _) = recall_setup(cfg12, "recall6")
    plateau12 = show_curves(cfg12, curve12, "round 12")
    show_accuracy(cfg12, hit12, cfg12["in_window_arms"], "round 12")
    print(
        f"trained in "
        f"{sum(man12['extra']['seconds_per_run'].values()) / 3600:.1f} CPU hours "
        "on one thread"
    )
t12 = pd.DataFrame(
    [
        dict(
            arm=k.split("/")[0],
            seed=int(k.split("/")[1]),
            acc_32=m_["accuracy"]["32"],
            plateau=m_["plateau"],
            meets_bars=man12["extra"]["chosen"][k]["meets_bars"],
            acc_2048=m_["accuracy"]["2048"],
            prefix_2048=m_["accuracy"]["prefix 2048"],
        )
        for k, m_ in man12["metrics"].items()
    ]
).set_index(["arm", "seed"])
display(
    t12.style.format(precision=3).set_caption(
        "round 12 (recall6), every arm-seed: the bars, accuracy at 2048 and "
        "behind the prefix"
    )
)

# %% [markdown]
# **Why TPE + OPT extrapolates at one seed** (exploratory, generated from the stored attention; no verdict). Per
# arm-seed of round 12, the query's attention (mean over heads and 32 windows) on the key and on the answer, per
# layer, at length 32 and at 2048. The question is what differs in TPE + OPT's circuit at the seed where it still
# answers at 2048.

# %%
A12 = [
    (w, c, i)
    for c in ("length32", "length2048")
    for w in ("key", "answer")
    for i in (1, 2)
]
a12 = pd.DataFrame(
    {
        k: {
            f"{w} l{i} @{c[6:]}": float(
                ckx["recall6"].tensors[f"{k}.eval_att_{w}_{c}_l{i}"].float().mean()
            )
            for w, c, i in A12
        }
        for k in man12["metrics"]
    }
).T
a12.index = pd.MultiIndex.from_tuples(
    [(k.split("/")[0], int(k.split("/")[1])) for k in a12.index], names=["arm", "seed"]
)
a12["acc @2048"] = t12["acc_2048"]
display(
    a12.style.format(precision=3).set_caption(
        "round 12: attention of the query on the key and on the answer (layer, length)"
    )
)

# %% tags=["remove-input"]
to12 = a12.loc["TPE + OPT"]
hi12 = to12["acc @2048"].idxmax()
lo12 = [s_ for s_ in to12.index if s_ != hi12]


def vs12(col):
    lo = ", ".join(f"{to12.loc[s_, col]:.2f}" for s_ in lo12)
    return f"{to12.loc[hi12, col]:.2f} vs {lo}"


other12 = a12.drop("TPE + OPT", level=0).groupby(level=0)["answer l2 @2048"].max()
display(Markdown(
    f"**TPE + OPT, seed {hi12} vs seeds {', '.join(map(str, lo12))}** (exploratory): "
    f"accuracy at 2048 {vs12('acc @2048')}; layer 1 on the key at 32 {vs12('key l1 @32')}, "
    f"at 2048 {vs12('key l1 @2048')}; layer 2 on the answer at 32 "
    f"{vs12('answer l2 @32')}, at 2048 {vs12('answer l2 @2048')}. Where layer 2 still "
    "finds the answer at 2048, the circuit carried over to the long windows. Seed "
    f"{hi12}'s layer-1 attention on the key is as low as in the rounds without the "
    f"auxiliary loss (mean {lrn[~lrn.aux]['key l1 at 32'].mean():.2f} at 32 over their "
    "arm-seeds that met the bars; their arms with jumping ids kept layer 2 on the "
    "answer at 2048: "
    f"{lrn[~lrn.aux & lrn.arm.isin(JUMP)]['answer l2 at 2048'].mean():.2f}): seed "
    f"{hi12} formed the circuit those rounds formed (consistent with an induction-style "
    "lookup: the answer token carries its key, and the query matches it in layer 2), "
    "while its other seeds, like the other arm-seeds trained with the auxiliary loss, "
    "look at the key in layer 1 and lose the answer at 2048. The other arm-seeds' "
    "layer-2 attention on the answer at 2048: "
    + ", ".join(f"{a} {v:.2f}" for a, v in other12.items())
    + " (the largest over seeds)."
))

# %% [markdown]
# **What the claims read:** round 12's arm-seeds (quick mode: its live tiny arms).

# %%
if not quick:
    cfg_q, q_hit, q_plateau, q_round = cfg12, hit12, plateau12, "round 12"
print(f"the retrieval claims read {q_round}, seeds {cfg_q['seeds']}")

# %% [markdown]
# ## 8. Interaction
#
# The slider moves over the arms and shows that arm's loss at every position of the longest windows (mean over
# its seeds and the windows, smoothed), against RoPE and TPE + OPT: where a curve rises past position 32, that arm
# is hurt by positions it never saw.


# %%
def draw(fig, arm):
    ax = fig.add_subplot(111)
    for ref, col in (("RoPE", "0.6"), ("TPE + OPT", "0.3")):
        c = np.mean([curves[(ref, s)] for s in seeds_of(ref)], axis=0)
        ax.plot(smooth(c), color=col, lw=1, ls="--", label=ref)
    c = np.mean([curves[(arm, s)] for s in seeds_of(arm)], axis=0)
    ax.plot(smooth(c), color=plotting.PALETTE[0], lw=1.5, label=arm)
    ax.axvline(train_len, color="gray", ls=":", lw=1)
    ax.set(xscale="log", xlabel="position in the window", ylabel="loss (nats/byte)")
    ax.set_ylim(0.5, 6)
    ax.legend(fontsize=7)


plotting.static_slider(order, draw, figsize=(6.4, 3.4), label="arm")

# %% [markdown]
# Which rotary pairs does each digit drive? Below, `cos` of each pair's angle over positions 0…1023 (rows: rotary
# pairs, grouped by level). RoPE's pairs all follow one index at different speeds; TPE's groups each cycle through
# only B values of their own digit. Live controls (Jupyter/Colab) let you change B and L.


# %%
def show_pairs(B_=B, L_=L):
    rot = tr.TreeRotaryEmbedding(head_dim, B_, L_) if B_**L_ >= 1024 else None
    fig, ax = plt.subplots(1, 2, figsize=(10, 3))
    pos_ = torch.arange(1024)
    ax[0].imshow(
        torch.cos(rope.angles(pos_)).T,
        aspect="auto",
        cmap="RdBu",
        interpolation="nearest",
    )
    ax[0].set(title="RoPE", xlabel="position", ylabel="rotary pair")
    if rot is None:
        ax[1].set_title(f"B^L = {B_**L_} < 1024: positions do not fit")
    else:
        ax[1].imshow(
            torch.cos(rot.angles(pos_)).T,
            aspect="auto",
            cmap="RdBu",
            interpolation="nearest",
        )
        edges = np.cumsum(rot.groups)[:-1] - 0.5
        for e in edges:
            ax[1].axhline(e, color="k", lw=1)
        ax[1].set(title=f"TPE, B={B_}, L={L_}: groups {rot.groups}", xlabel="position")
    for a in ax:
        a.grid(False)
    plt.show()


show_pairs()
plotting.live_controls(show_pairs, B_=(2, 64), L_=(1, 6))

# %% [markdown]
# ## 9. The claims record
#
# How to read it. Each ratio claim is measured per training seed as the **conservative end of its 95% paired
# bootstrap interval** (the lower end for "at least", the upper end for "at most"), so a claim holds at a seed only
# when the whole interval clears the bar; a ratio whose interval straddles parity is *not held*. The point
# estimates and intervals are in the notes.
#
# **Conditions**, fixed before the ratios are read, say whether a seed's models are in the regime a claim needs.
# Every ratio claim needs both arms it compares trained to a plateau **on the stable phase** and beating the byte
# 5-gram in distribution (section 3's `plateau` and `beats_ngram`, registered with `arms2` in 9740a68 before any of
# its training; quick mode reads the training loss). The claims at the longest length also need both arms to
# **read their whole training window**: at training positions, where every arm is in distribution, the
# perplexity of the last 8 bytes of held-out windows
# of the training length is lower with all 32 keys visible than with only the last 4, 8 or 16 (the k sweep of
# section 4 reads keys at the longest length, where TPE without OPT also meets digit differences it never saw).
# An arm that uses no context beyond a few bytes cannot show what long context does, only how much unseen
# positions distract it. The timing claim needs the 95% bootstrap interval of its paired per-round ratio to be
# narrower than the 25% band it allows. A claim is *inconclusive* unless its conditions hold at most of its seeds
# (2 of 3; the book's rule since 53671bd, applied to every chapter alike): one qualifying seed of three is one run,
# not a measurement over seeds, whatever it shows. Every
# perplexity claim on `arms2` reads TPE + OPT, so where TPE + OPT fails `beats_ngram` (section 3) the claim is
# inconclusive at that seed whatever its ratio: the registered outcome of a reconstruction that a byte 5-gram beats
# in distribution, not a verdict on the paper's encoding. The same four claims on the OPT variants of section 4
# (default run) put each qualifying variant in TPE + OPT's place, with its own conditions; a table below sets the
# two side by side.

# %%
KEY = {"RoPE": "rope", "RoPE + skips": "rope_skips"}
KEY.update({"TPE": "tpe", "TPE + OPT": "tpe_opt"})
# window use is measured where every arm is in distribution: at training positions
# (0..31), the last 8 bytes of 512 held-out windows of the training length, with the
# last k keys visible (k = 32: the whole window)
w_in = tr.shared_tail_windows(test_bytes, [train_len], 512, repro.rng(0, 77))[train_len]


def window_use(arm, s):
    ppl = {
        k: float(torch.exp(tr.tail_loss_with_keys(models[(arm, s)], w_in, 8, k).mean()))
        for k in (4, 8, 16, train_len)
    }
    return tr.context_gain(ppl, train_len)


cond = {}
C2 = tr.ARMS2_CONDITIONS  # registered with arms2 (9740a68), read in section 3
for arm, key in KEY.items():
    cond[f"plateau_{key}"] = rec.condition(
        f"plateau_{key}",
        [round(float(fit_tab.loc[(arm, s), "plateau"]), 5) for s in cfg["seeds"]],
        *C2["plateau"],
        statement=f"{arm} is trained to a plateau on the stable phase"
        f" (steps ≤ {stable_end})",
        unit="improvement over the stable phase's last fifth / whole improvement",
    )
    cond[f"beats_ngram_{key}"] = rec.condition(
        f"beats_ngram_{key}",
        [round(float(fit_tab.loc[(arm, s), "ngram_ratio"]), 5) for s in cfg["seeds"]],
        *C2["beats_ngram"],
        statement=f"{arm} predicts the tail bytes at the training length better than a"
        f" byte {ng_order}-gram counted on its training bytes",
        unit=f"tail ppl / the {ng_order}-gram's, windows of {train_len}",
    )
    cond[f"context_{key}"] = rec.condition(
        f"context_{key}",
        [window_use(arm, s) for s in cfg["seeds"]],
        "<",
        1.0,
        statement=f"{arm} reads its whole {train_len}-byte training window",
        unit="ppl of bytes 24-31 with all keys / best with 4, 8 or 16",
    )
cond["timing_resolved"] = rec.condition(  # the paired measure, registered in session 27
    "timing_resolved",
    round(cost["width"], 4),
    "<",
    0.25,
    statement="the 95% bootstrap interval of the per-round TPE ÷ RoPE ratio is narrower"
    " than the band the cost claim allows",
    unit="(high − low) / median of the per-round ratio",
)


# %% tags=["hide-input"]
# formatting of the claims' notes
def fmt_r(k):
    return "; ".join(
        f"seed {s}: {r:.3f} [{lo:.3f}, {hi:.3f}]"
        for s, (r, lo, hi) in zip(cfg["seeds"], ratios[k])
    )


def ppl_of(arm, n):
    i = lengths.index(n)
    return [round(float(np.exp(tails[(arm, s)][i].mean())), 3) for s in cfg["seeds"]]


x = longest // train_len
win_ppl = float(scal_ppl.loc[longest, WINDOWED])  # RoPE, last 32 keys (section 4)
arm_best = min(  # arms2's arms and the qualifying variants, mean over seeds
    [arm_ppl.loc[longest].min(), *(ov_ppl.loc[longest, ov_arms] if ov_arms else [])]
)
distract = (
    f" At this scale the ratio at {longest} measures robustness to distraction by"
    " unseen positions, not use of long context: "
    + (f"the byte {ng_order}-gram ({ng_ppl[longest]:.2f}) and RoPE with only its last"
       f" {train_len} keys ({win_ppl:.2f}) beat every arm there (best {arm_best:.2f})."
       if max(ng_ppl[longest], win_ppl) < arm_best else
       f"the byte {ng_order}-gram reads {ng_ppl[longest]:.2f} and RoPE with only its"
       f" last {train_len} keys {win_ppl:.2f} there, against the best arm's"
       f" {arm_best:.2f}.")
)
a_tpe = alias.loc["TPE + OPT"]
why_opt = (
    f"diagnosis (section 4): TPE + OPT's last layer attends to the key {B + 1} back "
    f"{a_tpe[f'd = {B + 1}'] / a_tpe['d = 1']:.2f}× as much as to the key 1 back, "
    f"and its tail perplexity with 32 keys visible is {k_tab.loc['TPE + OPT', 32]:.2f}"
    f" against {k_tab.loc['TPE + OPT', 8]:.2f} with 8"
)
enc_cost, opt_cost = (id_cost[k][:, 0].mean() for k in list(ID_COST)[:2])
parts = (
    f"; at the training length TPE ÷ RoPE = {enc_cost:.3f}, "
    f"TPE + OPT ÷ TPE = {opt_cost:.3f} (seed means)"
)


# %%
at_long, at_train = f"at {longest} bytes", f"at the training length ({train_len})"
RATIO_CLAIMS = [  # id, statement, paper, interval end (1 low, 2 high), op, target, note
    ("extrapolation_ppl_ratio", f"At {x}× the training length ({longest} bytes), "
     "RoPE's tail perplexity is at least twice TPE + OPT's",
     "4532.21 / 149.96 ≈ 30× at 64× (512 → 32K, 1.2B model)",
     1, ">=", 2.0, why_opt + "." + distract),
    ("in_distribution_parity", f"{at_train}, TPE + OPT is within 5% of RoPE",
     "(implicit: TPE does not cost in-distribution quality)", 2, "<=", 1.05,
     why_opt + parts),
    ("beats_skip_control", f"TPE + OPT beats RoPE trained with PoSE-style skips "
     f"{at_long}", "single-index offsets are not enough (the abstract's diagnosis)",
     1, ">", 1.0, why_opt + "." + distract),
]
verdict = {}
for cid, statement, paper, end, op, target, note in RATIO_CLAIMS:
    a, b, n = COMPARE[cid]
    if quick and cid == "in_distribution_parity":  # parity of barely trained models
        verdict[cid] = rec.untested(
            cid, statement, paper=paper,
            reason=f"quick mode: {cfg['steps']}-step models far from trained; their "
            "perplexities are near each other because none has learned much "
            "(smoke only)")
        continue
    given = [f"{c}_{KEY[arm]}" for arm in (a, b) for c in ("plateau", "beats_ngram")]
    if n == longest:  # an extrapolation claim needs arms that read their window
        given += [f"context_{KEY[a]}", f"context_{KEY[b]}"]
    bound = "lower" if end == 1 else "upper"
    verdict[cid] = rec.claim(
        cid, f"{statement} ({bound} end of the 95% paired interval)", paper=paper,
        measured=[round(float(r[end]), 4) for r in ratios[cid]], op=op, target=target,
        unit=f"{a} ppl / {b} ppl ({bound} 95% bound)",
        baseline=ppl_of(a if a != "TPE + OPT" else b, n),
        note=f"ratio [95% interval] per seed: {fmt_r(cid)}; baseline: the other arm's"
        f" ppl; TPE + OPT ppl {ppl_of('TPE + OPT', n)}. {note}",
        given=tuple(given),
    )
verdict["inference_cost"] = rec.claim(
    "inference_cost",
    "TPE costs about the same per token as RoPE at inference (within 25%)",
    paper="comparable inference-time efficiency",
    measured=round(abs(cost_ratio - 1), 3),
    op="<=",
    target=0.25,
    unit="|TPE / RoPE CPU time per token − 1|",
    baseline=round(t_rope * 1e6, 2),
    note=f"TPE ÷ RoPE = {cost_ratio:.3f} [{cost['low']:.3f}, {cost['high']:.3f}]"
    f" (median of the per-round ratio over {len(timings.cpu['TPE'])} interleaved"
    " rounds, CPU time; 95% bootstrap interval); baseline = RoPE µs per token at"
    f" {longest}. Nearly holds by construction: TPE only swaps the cos/sin table (same"
    " FLOPs), so this checks the implementation's overhead more than the paper",
    given=("timing_resolved",),
)

# %% [markdown]
# The claim against RoPE scaled at inference (section 4), registered before its numbers were computed: the best
# per seed of RoPE and its three scalings at the longest length, with the conditions of `extrapolation_ppl_ratio`
# (the scalings rescale the stored RoPE weights, so RoPE's conditions are theirs). Since session 29 the best-of set
# also holds RoPE with only its last 32 keys visible (section 4), added after the results were seen (disclosed):
# it makes the claim harder, its id, op, target and conditions are unchanged.

# %%
verdict["beats_scaled_rope"] = rec.claim(  # registered in session 27 before its numbers
    "beats_scaled_rope",
    f"At {x}× the training length, TPE + OPT beats the best inference-time scaling of"
    " RoPE (best per seed of RoPE, RoPE + PI, RoPE + NTK, RoPE + YaRN and, since"
    f" session 29, RoPE with its last {train_len} keys only; lower end of the 95%"
    " paired interval)",
    paper="not in the abstract: the practitioner's baseline for length extrapolation",
    measured=[round(float(r[1]), 4) for r in ratios_scaled],
    op=">",
    target=1.0,
    unit="best scaled RoPE ppl / TPE + OPT ppl (lower 95% bound)",
    baseline=[
        round(float(np.exp(tails[(best_scaled[s], s)][-1].mean())), 3)
        for s in cfg["seeds"]
    ],
    note="best per seed: "
    + ", ".join(f"seed {s}: {best_scaled[s]}" for s in cfg["seeds"])
    + "; ratio [95% interval] per seed: "
    + "; ".join(f"{r:.3f} [{lo:.3f}, {hi:.3f}]" for r, lo, hi in ratios_scaled)
    + f". Disclosed: {WINDOWED} (a sliding window at inference) joined the best-of"
    " set in session 29, after the results were seen; it makes the claim harder."
    + distract,
    given=("plateau_rope", "beats_ngram_rope", "plateau_tpe_opt", "beats_ngram_tpe_opt",
           "context_rope", "context_tpe_opt"),
)

# %% [markdown]
# **The claims on the OPT variants** (registered in 4d610bb after seed 0's reading, before seeds 1-2 and before any
# ratio; section 4), default run only. For each variant that qualified at seed 0, `arms2`'s four perplexity claims
# with the variant in TPE + OPT's place: same op, target, interval end, seeds and windows, ids
# `<claim>_<variant>`. Each names the plateau and n-gram conditions of both arms it reads and, at the longest
# length, both arms' window use; the variant's own conditions come from its records (its window use reads 64
# held-out windows of the training length, where `arms2`'s reads 512 live), RoPE's and RoPE + skips' are the
# ones recorded above.

# %%
OV_TEXT = {cid: (st, paper) for cid, st, paper, *_ in RATIO_CLAIMS}
OV_TEXT["beats_scaled_rope"] = (
    f"At {x}× the training length, TPE + OPT beats the best inference-time scaling of"
    " RoPE (best per seed of RoPE, RoPE + PI, RoPE + NTK, RoPE + YaRN and, since"
    f" session 29, RoPE with its last {train_len} keys only)",
    "not in the abstract: the practitioner's baseline for length extrapolation")
OV_COND = {  # statement and unit per condition kind, as arms2's
    "plateau": (f"is trained to a plateau on the stable phase (steps ≤ {stable_end})",
                "improvement over the stable phase's last fifth / whole improvement"),
    "beats_ngram": (f"predicts the tail bytes at the training length better than a"
                    f" byte {ng_order}-gram counted on its training bytes",
                    f"tail ppl / the {ng_order}-gram's, windows of {train_len}"),
    "context": (f"reads its whole {train_len}-byte training window",
                "ppl of bytes 24-31 with all keys / best with 4, 8 or 16 (64 windows)"),
}
short_arm = {v: a for a, v in ov_short.items()}
for cid, c in (ov or {}).get("conditions", {}).items():
    kind, short = cid.split("_opt_")[0], "opt_" + cid.split("_opt_")[1]
    st, unit = OV_COND[kind]
    cond[cid] = rec.condition(cid, [round(v, 5) for v in c["values"]], c["op"],
                              c["target"], statement=f"{short_arm[short]} {st}",
                              unit=unit)
for cid, c in (ov or {}).get("claims", {}).items():
    st, paper = OV_TEXT[c["base"]]
    bound = "lower" if c["end"] == 1 else "upper"
    ratios[cid] = c["ratios"]  # for fmt_r, as arms2's
    best = ("; best per seed: " + ", ".join(f"seed {s}: {best_scaled[s]}"
                                           for s in cfg["seeds"])
            if c["a"] == "best scaled RoPE" else "")
    verdict[cid] = rec.claim(
        cid, f"{st.replace('TPE + OPT', c['variant'])} ({bound} end of the 95% paired"
        " interval; an OPT variant, registered in 4d610bb)", paper=paper,
        measured=[round(v, 4) for v in c["measured"]], op=c["op"], target=c["target"],
        unit=f"{c['a']} ppl / {c['b']} ppl ({bound} 95% bound)",
        baseline=[round(v, 3) for v in c["baseline"]],
        note=f"ratio [95% interval] per seed: {fmt_r(cid)}{best}; baseline: the other"
        f" arm's ppl; arms2's TPE + OPT in the same comparison: `{c['base']}`"
        + (f". Disclosed: {WINDOWED} joined the best-of set in session 29, after the"
           " results were seen" if c["a"] == "best scaled RoPE" else "")
        + (f".{distract}" if c["length"] == longest else ""),
        given=c["given"])

# %% [markdown]
# The four perplexity claims side by side: `arms2`'s TPE + OPT (the registered reconstruction) and each qualifying
# OPT variant in its place. Per cell: the verdict, then per seed the measured interval end, with the conditions
# that failed where a seed is inconclusive (generated from the record).

# %% tags=["hide-input"]
by_id = {c.id: c for c in rec.claims}


def claim_cell(cid):
    c = by_id.get(cid)
    if c is None or c.measured is None:
        return "untested" if c is not None else "—"
    return f"**{c.verdict}**: " + "; ".join(
        f"s{s_} {v:.3f}" + (f" ({', '.join(c.failed_conditions[str(i)])} failed)"
                            if i in c.inconclusive_seeds else "")
        for i, (s_, v) in enumerate(zip(cfg["seeds"], c.measured)))


PPL_CLAIMS = list(tr.OPTVAR_CLAIMS)
side = pd.DataFrame(
    {"TPE + OPT (arms2)": [claim_cell(k) for k in PPL_CLAIMS],
     **{a: [claim_cell(f"{k}_{ov_short[a]}") for k in PPL_CLAIMS] for a in ov_arms}},
    index=pd.Index(PPL_CLAIMS, name="claim"))
display(Markdown(side.to_markdown()))
if ov is not None:
    v_ids = list(ov["claims"])
    n_held = {v: sum(verdict[k] == "held" for k in v_ids if k.endswith("_" + v))
              for v in (ov_short[a] for a in ov_arms)}
    display(Markdown(
        f"{len(ov_short)} OPT variants were trained at seed 0, {len(ov_arms)} qualified"
        " by the registered reading and trained seeds 1-2; of their"
        f" {len(v_ids)} claims,"
        f" {sum(n_held.values())} held ("
        + ", ".join(f"{v} {n}" for v, n in n_held.items()) + "), the others: "
        + ", ".join(f"{n} {v}" for v, n in pd.Series(
            [verdict[k] for k in v_ids if verdict[k] != "held"], dtype=object
        ).value_counts().items()) + ". `extrapolation_ppl_ratio_<variant>` and"
        " `beats_scaled_rope_<variant>` are one measurement, not two: both read the"
        f" variant's same tail losses at {longest}, and plain RoPE, the first one's"
        " numerator, is one of the candidates of the second one's best-of numerator. A"
        " verdict needs the conditions to hold at most seeds (2 of 3); where they hold"
        " at fewer the claim is inconclusive, whatever the ratio at the seed that"
        " qualifies."))

# %% [markdown]
# The retrieval claims read the **two-key offset-recall** arms of round 12 (`recall6`, section 7; quick mode: its
# tiny live arms), with the bars and conditions registered for the task (round 5's `recall2` config, unchanged) and
# round 12's amendment (commit a6ce875, registered after seed 1's numbers and before seeds 0 and 2, disclosed):
# each claim names `needs_position`, the in-window condition (`retrieval_in_window`: the four claim arms answer
# ≥ 95% at length 32) and the plateau conditions `tr.bound_gates` picks. Where a bound that needs only the
# converged arms (TPE + OPT's own accuracy at 64× for `retrieval_at_64x`; TPE + OPT − TPE for `needs_both_parts`)
# misses the target at every seed, the unconverged baseline's plateau condition is left out; otherwise every arm's
# is named. The bound is printed beside each verdict (notes and section 10). `needs_position` is not amended: it
# is measured in-window, at length 32, where NoPE can infer order from the causal mask; changing it now would be
# a third rule change made after seeing the numbers. The baseline recorded with `retrieval_at_64x` is RoPE's
# accuracy at the longest length (per seed), what its difference subtracts; its note gives the stronger of RoPE +
# OPT offsets and TPE and TPE + OPT's margin over it. They read plain accuracies over the 128 held-out
# windows of each seed, without an interval: one window moves an accuracy by 1/128. `retrieval_at_64x` compares
# with plain RoPE, as the paper does; whether the tree encoding adds anything to the offsets is
# `needs_both_parts`. The passkey arms (content only) are the contrast, in the notes and in section 10.

# %%
cl_r, seeds_r = cfg_q["claims"], cfg_q["seeds"]
RKEY = {"RoPE": "rope", "RoPE + OPT offsets": "rope_opt", "TPE": "tpe",
        "TPE + OPT": "tpe_opt"}
assert list(RKEY) == tr.checkpoint_config("recall6")["in_window_arms"]  # round 12's
n_in = cfg_k["train_len"]


def acc_at(arm, n, hit=q_hit, seeds_x=seeds_r):
    return np.array([float(hit[(arm, s)][n].mean()) for s in seeds_x])


def ret_condition(cid, values, rule, statement, unit):
    cond[cid] = rec.condition(cid, [round(float(v), 5) for v in values],
                              cl_r[rule]["op"], cl_r[rule]["target"],
                              statement=statement, unit=unit)


for arm, key in RKEY.items():
    ret_condition(f"plateau_ret_{key}", [q_plateau[(arm, s)] for s in seeds_r],
                  "plateau",
                  f"two-key offset recall: {arm}'s held-out loss is flat at the end",
                  "improvement over the last fifth / whole improvement")
in_win = np.min([acc_at(a, n_in) for a in RKEY], axis=0)
ret_condition("retrieval_in_window", in_win, "in_window",
              "every two-key offset-recall arm but NoPE answers in-window",
              f"min accuracy over the {len(RKEY)} arms at length {n_in}")
nope_in = acc_at("NoPE", n_in)
ret_condition("needs_position", acc_at("RoPE", n_in) - nope_in, "needs_position",
              "the task needs a positional encoding: RoPE answers far more often than "
              "NoPE (order from the causal mask alone), measured in-window at "
              "length 32",
              f"RoPE accuracy − NoPE accuracy at length {n_in}")
IN_WINDOW = "retrieval_in_window"
if round9["branch"] == "S":  # round 9's redesign (8d2d97a), after rounds 6-8's numbers
    IN_WINDOW = "retrieval_learned"
    ret_condition(
        IN_WINDOW, np.min([[q_hit[(a, s_)][n_in][~carry9].mean() for s_ in seeds_r]
                           for a in RKEY], axis=0), "in_window",
        "every two-key offset-recall arm but NoPE has learned the task: it answers "
        "in-window on the windows whose answer does not cross a carry of TPE's lowest "
        "digit (round 9; written after rounds 6-8's numbers were seen)",
        f"min accuracy over the {len(RKEY)} arms at length {n_in}, windows with the "
        "key not at p mod 8 = 7")
GIVEN = (IN_WINDOW, "needs_position")
pk_far = {a: acc_at(a, r_far, r_hit, cfg_r["seeds"]) for a in RKEY}  # passkey contrast

# %%
far_acc = {a: acc_at(a, k_far) for a in RKEY}
x_r = k_far // cfg_k["train_len"]
OTHERS = ("RoPE + OPT offsets", "TPE")  # round 12 has no RoPE + skips (a6ce875)
best_other = np.max([far_acc[a] for a in OTHERS], 0)
# round 12's amendment (a6ce875): a bound that needs only the converged arms
bound = {"retrieval_at_64x": far_acc["TPE + OPT"],  # >= the difference
         "needs_both_parts": far_acc["TPE + OPT"] - far_acc["TPE"]}  # >= the min
gates = {c: tr.bound_gates(c, list(b), cl_r[c]["target"]) for c, b in bound.items()}


def per_seed(v, f="{:.3f}"):
    return ", ".join(f.format(x) for x in v)


def bound_note(c):
    return (f"; bound (needs only the converged arms; {cl_r[c]['op']} "
            f"{cl_r[c]['target']} needed at some seed): {per_seed(bound[c])}; "
            f"plateau conditions named: {', '.join(gates[c])}")


verdict["retrieval_at_64x"] = rec.claim(
    "retrieval_at_64x",
    f"At {x_r}× the training length ({k_far}) TPE + OPT answers the offset-recall "
    "query at least 30 points more often than plain RoPE (the paper's baseline; "
    "RoPE with the same offsets is compared in needs_both_parts)",
    paper="64× extrapolation, 512 → 32K (perplexity; no public retrieval numbers)",
    measured=[round(float(v), 4) for v in far_acc["TPE + OPT"] - far_acc["RoPE"]],
    op=cl_r["retrieval_at_64x"]["op"], target=cl_r["retrieval_at_64x"]["target"],
    unit="accuracy difference",
    baseline=[round(float(v), 4) for v in far_acc["RoPE"]],
    note="accuracy per seed: " + "; ".join(f"{a} {per_seed(far_acc[a])}" for a in RKEY)
    + f"; NoPE {per_seed(acc_at('NoPE', k_far))}; baseline: RoPE's accuracy per seed"
    " (what the measured difference subtracts); the stronger of RoPE + OPT offsets and"
    f" TPE per seed is {per_seed(best_other)}, TPE + OPT minus it: "
    + per_seed(far_acc["TPE + OPT"] - best_other, "{:+.3f}")
    + "; passkey (content only) TPE + OPT minus RoPE: "
    + per_seed(pk_far["TPE + OPT"] - pk_far["RoPE"], "{:+.3f}")
    + bound_note("retrieval_at_64x"),
    given=GIVEN + gates["retrieval_at_64x"])
gap_tpe = far_acc["TPE + OPT"] - far_acc["TPE"]
gap_rope_opt = far_acc["TPE + OPT"] - far_acc["RoPE + OPT offsets"]
verdict["needs_both_parts"] = rec.claim(
    "needs_both_parts",
    f"At {k_far}, TPE + OPT beats both TPE alone and RoPE with OPT's offsets by more "
    "than 10 points of offset-recall accuracy",
    paper="OPT improves learning interactions across TPE components",
    measured=[round(float(v), 4) for v in np.minimum(gap_tpe, gap_rope_opt)],
    op=cl_r["needs_both_parts"]["op"], target=cl_r["needs_both_parts"]["target"],
    unit="min accuracy difference",
    baseline=[round(float(v), 4)
              for v in np.maximum(far_acc["TPE"], far_acc["RoPE + OPT offsets"])],
    note=f"TPE + OPT − TPE: {per_seed(gap_tpe)}; TPE + OPT − RoPE + OPT offsets: "
    f"{per_seed(gap_rope_opt)}; passkey (content only) TPE + OPT − RoPE + OPT "
    "offsets: "
    + per_seed(pk_far["TPE + OPT"] - pk_far["RoPE + OPT offsets"], "{:+.3f}")
    + bound_note("needs_both_parts"),
    given=GIVEN + gates["needs_both_parts"])

# %% [markdown]
# ### Known limits

# %% tags=["remove-input"]
ctx = [c for c in rec.conditions if c.id.startswith("context_")]
n_ctx_all = sum(len(c.holds_per_seed) for c in ctx)
n_ctx = sum(c.holds_per_seed.count(True) for c in ctx)
best_k = {a: int(k_tab.loc[a].idxmin()) for a in k_tab.index}
a1, a2, a3 = probes["A"]["records"]  # d32/1500, d32/4500 (steps?), d64/1500 (capacity?)
gain_steps = a2["final_val_acc"] - a1["final_val_acc"]
gain_width = a3["final_val_acc"] - a1["final_val_acc"]
ar_why = [w for w, hit_ in (
    (f"steps (the shorter curve still improves, plateau {a1['plateau']:.3f} > 0.02; "
     f"3× the steps: {gain_steps:+.2f})", a1["plateau"] > 0.02),
    (f"capacity (d = 64: {gain_width:+.2f} at the same steps)", gain_width > 0.1),
) if hit_]
ar_reading = " and ".join(ar_why) or "neither steps nor capacity (task or recipe)"
PLAT = tuple(f"plateau_{k}" for k in KEY.values())  # the byte corpus's arms (arms2)
limits = [
    "* **Convergence.** The largest plateau measure over the claims' arms and seeds "
    f"is {max(c.max for c in rec.conditions if c.id.startswith(PLAT)):.4f}, read on the"
    f" stable phase (the rule asks ≤ {C2['plateau'][1]}). The arms are d = {d_model},"
    f" {head_dim // 2}-rotary-pair models after {cfg['steps']} steps of a warmup-stable-"
    f"decay schedule; tail perplexity ÷ the byte {ng_order}-gram's at the training length"
    " ranges over "
    + ", ".join(f"{a} {fit_tab.loc[a].ngram_ratio.min():.3f}–"
                f"{fit_tab.loc[a].ngram_ratio.max():.3f}" for a in cfg["arms"])
    + (". An arm-seed at or above 1 has not learned what a table of byte counts knows;"
       " the claims that read it are inconclusive there, however its ratio to another"
       " arm comes out." if (fit_tab.ngram_ratio >= 1).any() else
       ": every arm-seed beats the count model in distribution.")
    + " The chapter's first build (d = 32, 600 cosine steps): "
    + ", ".join(f"{a} {v:.3f}" for a, v in arm_changed.ngram_ratio_d32.items())
    + " (mean over seeds); section 4 compares the two builds.",
    f"* **Context use.** {n_ctx} of {n_ctx_all} arm-seeds read their whole "
    f"{train_len}-byte window at training positions (perplexity with all keys ÷ best "
    "with fewer, per seed: "
    + "; ".join(f"{c.id[8:]} " + ", ".join(f"{v:.3f}" for v in c.measured) for c in ctx)
    + "); at the longest length the best number of visible keys (mean over seeds) is "
    + ", ".join(f"{a} {k}" for a, k in best_k.items())
    + ". "
    + (
        "Where an arm does not, the test at the longest length shows how much unseen"
        " positions *hurt* it, not whether the long context *helps*, which is what the"
        " paper's model shows; its claims are inconclusive there."
        if n_ctx < n_ctx_all
        else "Every arm uses its window, so the longest-length test reads "
        "extrapolation."
    ),
    "* **Two reconstructions of OPT.** On the byte corpus, offsets that are multiples"
    " of"
    f" B on chunks of {train_len // n_chunks} bytes (B = {B}) make the upper digits"
    " uninformative in training; the attention diagnosis of section 4 shows whether the"
    " model then reads distance from the lowest digit alone. The rebuild (arms2) kept"
    " this scheme, as registered; "
    + (f"{len(ov_short)} OPT variants that keep the upper digits informative trained on its"
       f" recipe (section 4): {', '.join(ov_arms) or 'none'} qualified at seed 0 by the"
       " registered reading and carry the registered claims (section 9's side-by-side"
       " table: " + ", ".join(f"{n_} {v_}" for v_, n_ in pd.Series(
           [verdict[k] for k in ov["claims"]], dtype=object).value_counts().items())
       + "); the claims were registered after seed 0's reading was seen (disclosed)."
       if ov is not None else "OPT variants that keep the upper digits informative are"
       " read in the default run only (section 4).")
    + " The retrieval arms of section 7 use chunks of 2B instead (chosen"
    " before training), with the old scheme as a one-seed diagnostic arm.",
    "* **What the passkey task tests.** One passkey among filler, found by its"
    " content: it tests whether an encoding lets content-based attention work at"
    " distances never seen in training. It needs no positional information, so it"
    " cannot separate encodings that represent position differently; the claims read"
    " the offset-recall task instead, whose NoPE arm shows whether it needs a positional encoding"
    f" (`needs_position` {cond['needs_position']}). The retrieval arms are "
    + "-, ".join(str(d_) for d_ in sorted({cfg_r["d_model"], cfg_k["d_model"]}))
    + f"-wide, {cfg_k['n_layer']}-layer models.",
    "* **The associative-recall attempt of round 3** (four pair tokens, two queries)"
    " did not learn in-window (its numbers were not kept). Round 4's seed-0 probe"
    " (part A, the passkey arms' recipe; chance 1/8): "
    + "; ".join(f"d = {r['change']['d_model']}, {r['change']['steps']} steps: "
                f"{r['final_val_acc']:.2f} (plateau {r['plateau']:.3f})"
                for r in probes["A"]["records"])
    + f". By the registered reading: {ar_reading}. The two-key offset-recall task"
    " reached "
    + ", ".join(f"{r['final_val_acc']:.2f}" for r in probes["B"]["records"]
                if r["arm"] == "RoPE" and r["change"]["d_model"] == 32)
    + " with RoPE at d = 32 (part B), and"
    " the recipe was chosen among the probes by the registered rule: "
    + f"{chosen['task']['n_pairs']} key(s), d = {chosen['change']['d_model']}, "
    + f"{chosen['change']['steps']} steps (bars met at the probe: {chosen['met']}).",
    f"* **Rounds 5 to 7.** Round 5 (two keys, d = {cfg5['d_model']}, {cfg5['steps']} steps)"
    f" stopped at its probe seed: RoPE {rope5:.2f} in-window"
    + (" < " if stopped5 else " ≥ ") + f"{bars5['in_window']['target']} (needs_position "
    f"{need5:.2f}); its claims were not computed and its seeds 1-2 were not trained in"
    f" round 5. One seed of its six arms took {sec_seed[s5] / 60:.0f} CPU minutes."
    " Round 6 (recall2 unchanged, seeds "
    + ", ".join(str(s_) for s_ in sorted(sec_seed)) + ", no seed-0 stop; section 7)"
    " and round 7 (the restart rule) are shown in section 7 as earlier readings; the"
    f" retrieval claims read {q_round}, at seeds {', '.join(map(str, seeds_r))}."
    " Round 4's one-key checkpoint is"
    " an earlier round: its claims were read in round 4 and are not read here.",
]
spread = max(timings.spread("RoPE"), timings.spread("TPE"))  # the old condition's value
limits.append(
    "* **Timing condition** (changed in session 27, disclosed). Until then"
    " `timing_resolved` read the spread of single rounds of each side (IQR ÷ median;"
    f" {spread:.3f} in this run against its bar 0.25) and the claim the ratio of the two"
    " medians, so a busy neighbour on the shared machine could make `inference_cost`"
    " inconclusive while the ratio stayed far inside its band. It now reads the width"
    " of the 95% bootstrap interval of the paired per-round ratio"
    f" ({cost['width']:.3f} ÷ median here) and the claim that ratio's median"
    f" ({cost_ratio:.3f}; ratio of medians {timings.ratio('TPE', 'RoPE'):.3f})."
)
if not quick:
    limits.append(
        f"* The stored checkpoint took {man['wall_seconds'] / 60:.0f} minutes of one-thread"
        f" jobs to build ({len(RUNS)} arm-seeds)."
    )
display(Markdown("\n".join(limits)))

# %% [markdown]
# ## 10. What the numbers say
#
# Generated from the measurements above (no number here is typed by hand).


# %% tags=["remove-input"]
def mean_ratio(k):
    return float(np.mean(ratios[k][:, 0]))


lines = [
    (
        f"- **Byte corpus.** {n_ctx} of {n_ctx_all} arm-seeds read their whole "
        f"{train_len}-byte window, so the ratios at {longest} below measure how much "
        "unseen positions *distract* each arm, not extrapolation, and the claims that "
        "read them are inconclusive (section 9)."
        if n_ctx < n_ctx_all
        else f"- **Byte corpus.** Every arm reads its {train_len}-byte window."
    ),
    f"- A byte {ng_order}-gram (no positions, {ng_order - 1} bytes of context) scores a"
    f" tail perplexity of {ng_ppl[train_len]:.2f} at the training length and"
    f" {ng_ppl[longest]:.2f} at {longest}, against the best arm's"
    f" {ng_tab.loc[train_len, 'best_arm_ppl']:.2f} ({ng_tab.loc[train_len, 'best_arm']})"
    f" and {ng_tab.loc[longest, 'best_arm_ppl']:.2f}"
    f" ({ng_tab.loc[longest, 'best_arm']}). Per arm-seed, tail ppl ÷ the n-gram's at"
    f" {train_len} (`beats_ngram` asks < 1): "
    + "; ".join(f"{a} " + ", ".join(f"{v:.3f}" for v in fit_tab.loc[a].ngram_ratio)
                for a in cfg["arms"])
    + (f". Failing it ({', '.join(fails_ng)}) means a table of byte counts predicts"
       " the in-distribution bytes better than the arm; every claim that reads such an"
       " arm-seed is inconclusive there." if fails_ng else
       ": every arm-seed beats the n-gram in distribution."),
    f"- At {x}× the training length RoPE's tail perplexity is "
    f"{mean_ratio('extrapolation_ppl_ratio'):.2f}× TPE + OPT's (mean over seeds; the "
    "paper reports about 30× for a 1.2B model at 64×).",
    f"- TPE without OPT is {mean_ratio('tpe_without_opt'):.2f}× worse than TPE + OPT:"
    f" without the offsets the tree encoding does not shield it at {longest} (TPE "
    f"{np.mean(ppl_of('TPE', longest)):.1f}, "
    f"RoPE {np.mean(ppl_of('RoPE', longest)):.1f}).",
    f"- RoPE + skips ÷ TPE + OPT = {mean_ratio('beats_skip_control'):.2f}: "
    + (
        "the single-index control with PoSE-style skips is less hurt by unseen "
        "positions than the reconstructed TPE + OPT (every seed's 95% interval below 1)."
        if (ratios["beats_skip_control"][:, 2] < 1).all()
        else "TPE + OPT beats the skip control (every seed's 95% interval above 1)."
        if (ratios["beats_skip_control"][:, 1] > 1).all()
        else "no clear difference (an interval reaches parity)."
    ),
    f"- RoPE scaled at inference (section 4), tail perplexity at {longest} (mean over"
    " seeds): "
    + ", ".join(f"{a} {scal_ppl.loc[longest, a]:.2f}" for a in BEST_OF)
    + f" against TPE + OPT's {scal_ppl.loc[longest, 'TPE + OPT']:.2f};"
    + " the best per seed "
    + ", ".join(f"{best_scaled[s_]} (seed {s_})" for s_ in cfg["seeds"])
    + f"; best ÷ TPE + OPT {ratios_scaled[:, 0].mean():.2f} (`beats_scaled_rope`; the"
    f" window of {train_len} keys joined its best-of set in session 29, after the results"
    " were seen, disclosed).",
    f"- **What the ratios at {longest} measure.**" + distract + " A ratio that holds there"
    " says an arm is hurt less by positions it never saw, not that it uses the long"
    " context.",
    "- At the training length TPE + OPT costs "
    f"{mean_ratio('in_distribution_parity'):.2f}× RoPE's perplexity"
    + (" (quick mode: barely trained models; not read as a claim)." if quick else "."),
]


def failed_union(cid):  # the conditions that failed at some seed of a claim
    c = by_id[cid]
    return sorted({g for i in c.inconclusive_seeds for g in c.failed_conditions[str(i)]})


def verdict_why(cid):
    fu = failed_union(cid)
    return f"{verdict[cid]}" + (f" (failed: {', '.join(fu)})" if fu else "")


if ov is not None:
    lines.append(
        f"- **OPT variants** (section 4, registered claims in section 9): {', '.join(ov_arms)}"
        " qualified at seed 0. Per claim, `arms2`'s TPE + OPT, then each variant: "
        + "; ".join(f"`{k}` TPE + OPT {verdict_why(k)}, "
                    + ", ".join(f"{ov_short[a]} {verdict_why(f'{k}_{ov_short[a]}')}"
                                for a in ov_arms) for k in tr.OPTVAR_CLAIMS)
        + f". RoPE ÷ arm at {longest} (mean over seeds): TPE + OPT "
        f"{rope_over('TPE + OPT')[at_l]:.2f}, "
        + ", ".join(f"{ov_short[a]} {rope_over(a)[at_l]:.2f}" for a in ov_arms) + "."
    )
    thin = [(k, [cfg["seeds"][i] for i in range(len(by_id[k].measured))
                 if i not in by_id[k].inconclusive_seeds])
            for k in ov["claims"] if verdict[k] in ("held", "mixed")]
    rs_ok = next(c for c in rec.conditions if c.id == "context_rope_skips").holds_per_seed
    rs_fail = [s_ for s_, ok_ in zip(cfg["seeds"], rs_ok) if not ok_]
    lines.append(
        "- What the variant verdicts rest on: "
        + ("; ".join(f"`{k}` {verdict[k]}, read at seed(s) {', '.join(map(str, q))}"
                     for k, q in thin) or "no variant claim holds at any seed")
        + " (a seed left out fails the variant's window use, read on 64 windows of the "
        "training length where `arms2`'s reads 512 live: per seed "
        + "; ".join(f"{ov_short[a]} " + ", ".join(
            f"{v:.3f}" for v in ov["conditions"][f"context_{ov_short[a]}"]["values"])
            for a in ov_arms)
        + f", bar < 1). `beats_skip_control` reads RoPE + skips, which fails its own window"
        f" use at seed(s) {', '.join(map(str, rs_fail)) or 'none'}; descriptively, its"
        " lower 95% end per seed is "
        + "; ".join(f"{ov_short[a]} " + ", ".join(
            f"{v:.3f}" for v in ov["claims"][f"beats_skip_control_{ov_short[a]}"]["measured"])
            for a in ov_arms)
        + ". At the training length the upper 95% end of variant ÷ RoPE is "
        + "; ".join(f"{ov_short[a]} " + ", ".join(
            f"{v:.3f}" for v in ov["claims"][f"in_distribution_parity_{ov_short[a]}"]["measured"])
            for a in ov_arms)
        + f" (bar ≤ {tr.OPTVAR_CLAIMS['in_distribution_parity'][-1]})."
        + "".join(
            f" RoPE ÷ {a} is only {rope_over(a)[at_l]:.2f} at {longest} (the claim asks"
            f" {tr.OPTVAR_CLAIMS['extrapolation_ppl_ratio'][-1]:g}): its training windows show only the digit differences of at"
            f" most {train_len} contiguous bytes, never the large upper-digit differences of"
            " long contexts (a fact of the design; this run does not test whether it is the"
            " cause)."
            for a in ov_arms if rope_over(a)[at_l] < tr.OPTVAR_CLAIMS["extrapolation_ppl_ratio"][-1]
            and optvar["config"]["arms"][a].get("n_chunks") == 1)
    )
else:
    lines.append("- OPT variants: not read in quick mode (stored records of the full-size"
                 " recipe only).")
ch = changed.ratio
lines.append(
    "- The same comparisons on the chapter's first build (d = 32, 600 cosine steps) →"
    " arms2 (mean ratio over seeds): "
    + "; ".join(f"{c}: {ch[(c, 'd = 32, 600 steps')]:.2f} → {ch[(c, 'arms2')]:.2f}"
                for c in dict.fromkeys(ch.index.get_level_values(0)))
    + ". Tail perplexity at the training length, d = 32 → arms2: "
    + ", ".join(f"{a} {r.ppl32_d32:.2f} → {r.ppl32_arms2:.2f}"
                for a, r in arm_changed.iterrows())
    + "."
)
if nope1 is not None:
    t1 = {a: float(np.exp(np.mean(runs1[f"{a}/{s1}"]["eval_tail"][len1.index(longest)])))
          for a in ("NoPE", "TPE + OPT", "RoPE + skips")}
    lines.append(
        f"- In the d = 32 build (seed {s1}), NoPE scored {t1['NoPE']:.1f} at {longest}"
        f" against TPE + OPT's {t1['TPE + OPT']:.1f} and RoPE + skips'"
        f" {t1['RoPE + skips']:.1f}: "
        + ("the reconstructed TPE + OPT was hurt more at this length than a model with no"
           " positional encoding at all (NoPE was not rebuilt at d = 64)."
           if t1["NoPE"] < t1["TPE + OPT"]
           else "TPE + OPT did better than no positional encoding (NoPE was not rebuilt).")
    )
lines.append(
    "- At the training length (mean ratio, and whether every seed's 95% interval "
    "lies above 1): "
    + "; ".join(
        f"{k} {r[:, 0].mean():.3f} "
        + ("(a cost)" if (r[:, 1] > 1).all() else "(no clear cost)")
        for k, r in id_cost.items()
    )
    + "."
)
lines.append(
    "- Tail perplexity with the last 8 / 32 / 64 keys visible (best k): "
    + "; ".join(
        f"{a} {k_tab.loc[a, 8]:.2f} / {k_tab.loc[a, 32]:.2f} / {k_tab.loc[a, 64]:.2f}"
        f" (k = {k_tab.loc[a].idxmin()})"
        for a in k_tab.index
    )
    + ". Arms whose perplexity at 32 keys is more than 5% above their best: "
    + (
        ", ".join(
            a for a in k_tab.index if k_tab.loc[a, 32] > 1.05 * k_tab.loc[a].min()
        )
        or "none"
    )
    + " (misled by keys inside the training length)."
)
lines.append(
    f"- Last-layer attention at d = {B + 1} ÷ d = 1 (one period B further back): "
    + ", ".join(
        f"{a} {alias.loc[a, f'd = {B + 1}'] / alias.loc[a, 'd = 1']:.2f}"
        for a in alias.index
    )
    + "."
)
ft = far_tab
least_far = ft.iloc[:, cfg["n_layer"] - 1].idxmin()
best_tail = ft["tail ppl at longest"].idxmin()
lines.append(
    f"- Attention of the last {tail} queries on keys ≥ {train_len} back (last layer, "
    f"uniform would be {uniform:.2f}): "
    + ", ".join(f"{a} {ft.loc[a].iloc[cfg['n_layer'] - 1]:.2f}" for a in ft.index)
    + f". The arm with the least attention on far keys ({least_far}) is "
    + ("also" if least_far == best_tail else "not")
    + f" the one with the lowest tail perplexity at {longest} ({best_tail})."
)
d = diag
lines.append(
    "- With attention limited to the last 32 keys, the tail perplexity at "
    f"{longest} is "
    + ", ".join(
        f"{a} {d.loc[a, 'last_32_keys_only']:.2f} (full context "
        f"{d.loc[a, 'full_context']:.2f}, at the training length "
        f"{d.loc[a, 'at_train_len']:.2f})"
        for a in d.index
    )
    + ": where the masked number is far below the full-context one, the damage "
    "comes from attending to far keys, not from the near keys' large positions."
)
pk_mean = {a: float(np.mean(v)) for a, v in pk_far.items()}
lines.append(
    f"- Passkey retrieval (content only) at {r_far}, mean accuracy over seeds: "
    + ", ".join(f"{a} {v:.2f}" for a, v in pk_mean.items())
    + " (round 3's arms)."
)
acc_mean = {a: float(np.mean(far_acc[a])) for a in RKEY}
nope_far = float(np.mean(acc_at("NoPE", k_far)))
lines.append(
    f"- Two-key offset recall ({q_round}, the claims' task, seeds "
    f"{', '.join(str(s_) for s_ in seeds_r)}) at {k_far} ({x_r}× the "
    "training length; chance "
    f"{1 / cfg_k['task']['n_values']:.3f}), mean accuracy over seeds: "
    + ", ".join(f"{a} {v:.2f}" for a, v in acc_mean.items())
    + f", NoPE {nope_far:.2f}; at the training length the weakest arm but NoPE, per "
    "seed: "
    + ", ".join(
        f"seed {s_} {min(RKEY, key=lambda a: acc_at(a, cfg_k['train_len'])[i])} "
        f"{in_win[i]:.2f}" for i, s_ in enumerate(seeds_r))
    + f" (`retrieval_in_window` {cond['retrieval_in_window']}); NoPE "
    f"{nope_in.mean():.2f} (`needs_position` {cond['needs_position']})."
)
lines.append(
    f"- Round 9 ({q_round9}): the carry gap, learned everywhere but the windows whose "
    "answer crosses a lowest-digit carry, at "
    + (", ".join(f"{a} seed {s_}" for a, s_ in gap9.index) or "no arm-seed")
    + "; the tiny probe reads TPE + OPT "
    + round9["reading"].get("TPE + OPT", "undecided")
    + (f", so the claims read `{IN_WINDOW}` {cond[IN_WINDOW]} (in-window bar on the "
       "windows without a carry; a change made after seeing rounds 6-8's numbers)."
       if IN_WINDOW != "retrieval_in_window" else
       ", so the in-window gate is unchanged.")
)
lines.append(
    "- Round 10's probe (auxiliary previous-token loss, step 1500, round 8's runs): "
    + "; ".join(f"{r['arm']} {r['acc_at_probe']:.2f} ({r['acc_at_probe'] - r['baseline']:+.2f} "
                f"over round 7; carry windows {r['carry']:.2f})"
                for r in p10["records"].values())
    + (": it qualifies by round 8's rule, so the next round trains every arm with it."
       if p10["round10"]["qualifies"] else ": it does not qualify.")
)
lines.append(
    "- Two-key offset recall by length (mean over seeds, "
    + " / ".join(str(n) for n in k_len) + "): "
    + "; ".join(f"{a} " + " / ".join(f"{acc_at(a, n).mean():.2f}" for n in k_len)
                for a in ("NoPE",) + tuple(RKEY))
    + (f". Already at {k_len[1]} every arm is below the weakest in-window score."
       if max(acc_at(a, k_len[1]).mean() for a in RKEY) < in_win.min() else ".")
)
if not quick:
    r7 = [r for r in rows7 if r["arm"] != "NoPE" and r["read"] is not None]
    lines.append(
        f"- Round 7's restart rule (seed(s) {', '.join(map(str, man7['seed']))}): "
        f"{sum(r['meets_bars'] for r in r7)} of {len(r7)} arm-seeds but NoPE meet both "
        f"bars after it ({len(sec7)} attempts trained); below them: "
        + (
            "; ".join(
                f"{r['arm']} seed {r['seed']} ({r['attempts']})"
                for r in r7
                if not r["meets_bars"]
            )
            or "none"
        )
        + ". Round 7's probe: "
        + "; ".join(
            f"{r['arm']} seed {r['seed']} {r['final_val_acc']:.2f} on contiguous ids, "
            f"{r['final_train_ids_acc']:.2f} on its training ids ({r['reading']})"
            for r in p7["records"].values()
        )
        + "."
    )
held_c = {c.id: c.holds_per_seed for c in rec.conditions}
for cid in ("retrieval_at_64x", "needs_both_parts"):
    cl_ = next(c for c in rec.claims if c.id == cid)
    meas = cl_.measured if isinstance(cl_.measured, list) else [cl_.measured]
    lines.append(
        f"- `{cid}` per seed ({cl_.op} {cl_.target}): "
        + "; ".join(
            f"seed {s_} {v:+.3f} "
            + (
                "inconclusive (fails: "
                + ", ".join(g for g in cl_.given if not held_c[g][i]) + ")"
                if i in cl_.inconclusive_seeds
                else ("holds" if cl_.holds_per_seed[i] else "does not hold")
            )
            for i, (s_, v) in enumerate(zip(seeds_r, meas))
        )
        + f" → {cl_.verdict}. The bound that needs only the converged arms ("
        + ("TPE + OPT's own accuracy at 64×" if cid == "retrieval_at_64x"
           else "TPE + OPT − TPE")
        + f", {cl_.op} {cl_.target} needed): "
        + ", ".join(f"{v:.3f}" for v in bound[cid])
        + (" — below the target at every seed: the claim cannot hold at this recipe, "
           "whatever the conditions." if all(v < cl_.target for v in bound[cid])
           else " — it reaches the target at some seed, so the conditions decide.")
    )
if not cond["needs_position"].startswith("met"):
    lines.append(
        f"- `needs_position` is measured in-window, at length {cfg_k['train_len']}: NoPE "
        f"answers {', '.join(f'{v:.2f}' for v in nope_in)} of the two-key queries there "
        f"(per seed), and {nope_far:.2f} at {k_far} (mean over seeds). A causal mask lets "
        "a model infer order without a positional encoding (Haviv et al. 2022; Kazemnejad "
        "et al. 2023), and the training recipe caused it here: NoPE at 32 was "
        f"{nope_at([5, 6])} without the auxiliary loss (6000 steps), {nope_at([11])} with "
        f"it (6000 steps), {nope_at([12])} with it at 18000 steps. Where RoPE's lead is "
        "below the registered bar the retrieval claims are inconclusive; the condition is "
        "not amended (a third change after seeing the numbers)."
    )
in_c, pre_c = COLS[0], [c for c in k_conds if c.startswith("prefix")][0]
far_c, sh_c = COLS[-1], [c for c in k_conds if c.startswith("shift")]
bar_in = cl_r["in_window"]["target"]  # the registered in-window bar
ok = ctl_tab[ctl_tab[in_c] >= bar_in]  # arm-seeds that learned the task in-window
lines.append(
    "- Dilution control, a round-6 reading (recall2's runs"
    + (f", not the {q_round} arms the claims read; stale for them" if q_round != "round 6"
       else "") + "), read only where an arm-seed answers "
    f"≥ {bar_in} in-window "
    f"({len(ok)} of {len(ctl_tab)}; mean over those seeds, {in_c} / "
    + " / ".join(k_conds) + f" / {far_c}): "
    + "; ".join(f"{a} (seed {', '.join(str(s_) for s_ in g.index.get_level_values(1))}) "
                + " / ".join(f"{g[c].mean():.2f}" for c in COLS)
                for a, g in ok.groupby(level=0, sort=False))
    + ". Query's last-layer attention on the answer token there, "
    f"{in_c} / {pre_c} / {far_c}: "
    + "; ".join(f"{a} " + " / ".join(f"{att_tab.loc[g.index, c].mean():.2f}"
                                     for c in (in_c, pre_c, far_c))
                for a, g in ok.groupby(level=0, sort=False))
    + ". A loss under the prefix is the context's length (keys still within the "
    f"last {cfg_k['train_len']} positions), a further loss at {far_c} the distance, "
    "a loss under a shift unseen absolute positions (for TPE: digits across a carry)."
    if len(ok) else "- Dilution control: no arm-seed answers in-window; not read."
)
best_name = max(("RoPE",) + OTHERS, key=acc_mean.get)
lines.append(
    f"- The strongest arm other than TPE + OPT at {k_far} is {best_name} "
    f"({acc_mean[best_name]:.2f}); TPE + OPT minus it: "
    f"{acc_mean['TPE + OPT'] - acc_mean[best_name]:+.2f} (mean over seeds). "
    + f"Every arm answers at most {max(acc_mean.values()):.2f} there (chance "
    f"{1 / cfg_k['task']['n_values']:.3f}; one window moves a seed's accuracy by "
    f"{1 / len(k_tests[k_far]['tokens']):.3f})."
)
off_tpe = acc_mean["TPE + OPT"] - acc_mean["TPE"]
off_rope = acc_mean["RoPE + OPT offsets"] - acc_mean["RoPE"]
enc_opt = acc_mean["TPE + OPT"] - acc_mean["RoPE + OPT offsets"]
pk_enc = pk_mean["TPE + OPT"] - pk_mean["RoPE + OPT offsets"]
lines.append(
    f"- What does the work at {k_far} on offset recall (mean over seeds): OPT's "
    f"offsets add {off_tpe:+.2f} on TPE and {off_rope:+.2f} on RoPE; with the same "
    f"offsets, the tree encoding adds {enc_opt:+.2f} over RoPE (per seed: "
    + ", ".join(f"{v:+.2f}" for v in far_acc["TPE + OPT"] - far_acc["RoPE + OPT offsets"])
    + ", median "
    + f"{np.median(far_acc['TPE + OPT'] - far_acc['RoPE + OPT offsets']):+.2f}"
    + f"; passkey: {pk_enc:+.2f}). Descriptive: these include seeds where the registered"
    " conditions fail; the claim's reading is per seed, above."
)
if ("TPE + OPT, chunks of B/2", s_r) in r_hit:
    lines.append(
        f"- The old OPT (chunks of B/2, seed {s_r}) retrieves "
        f"{r_hit[('TPE + OPT, chunks of B/2', s_r)][r_far].mean():.2f} at {r_far} "
        "against "
        f"{r_hit[('TPE + OPT', s_r)][r_far].mean():.2f} for chunks of 2B (same seed)."
    )
lines.append(
    "- Verdicts: "
    + ", ".join(f"`{k}` {v}" for k, v in verdict.items())
    + "; conditions: "
    + ", ".join(f"`{k}` {v}" for k, v in cond.items())
    + "."
)
display(Markdown("\n".join(lines)))

# %%
rec.save()
