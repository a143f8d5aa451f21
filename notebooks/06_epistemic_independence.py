# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Teaching a judge that bias cues carry no information
#
# Language models used as judges change their answer when the prompt says "most people think option B is
# better" or "an expert prefers A". Prompting and supervised fine-tuning against this change the surface
# behaviour, but they leave the reason in place: during training, the cue was often *right*, so following it
# paid. **Epistemic Independence Training (EIT)** changes the objective instead. It trains with reinforcement
# learning on **balanced conflict data**, where an injected cue points at the correct answer exactly as often
# as chance would (one half for the paper's two options), and with a reward that **penalizes following a wrong
# cue but gives nothing for agreeing with a right one**. Under that reward the cue predicts nothing about the reward, so the only way up is to solve the
# task. The paper trains Qwen3 judges on bandwagon cues only and reports better accuracy under misleading cues,
# unchanged accuracy under correct cues, transfer to unseen subjects and cue types, and a small EIT model that
# resists bias better than larger untrained ones.
#
# | | the paper | this notebook |
# |---|---|---|
# | judge | Qwen3-1.7B / 4B (and untrained 8B / 14B) | a 2-layer transformer, trained from scratch here (no larger judge) |
# | task | MMLU-Pro questions reduced to two options | three lists of digits; a subject token names the comparison rule; on half of the items the last digits are hidden, so the judge cannot be sure (two options for the derivation below) |
# | balanced conflict data | P(cue = truth) = 0.5: two options, the cue carries no information <!-- paper --> | P(cue = truth) = 1/3: three options, the same rule <!-- paper --> |
# | cues | bandwagon (train); authority, distraction, verbosity (held out) | bandwagon (train); six held-out families, three of which share no token or position with bandwagon |
# | "pre-training" | the LLM's own | 2000 supervised steps from an annotator who defers to the cue on close items, with label smoothing, stored as a checkpoint (quick mode: a short live run) |
# | optimizer | GRPO in verl | GRPO (G answers per prompt, std-normalized advantages), KL to the base with weight β = 1.0 (registered against forgetting), a quarter of each batch uncued items |
# | seeds | one run per model | ten RL seeds per arm on five base judges; a registered sweep of the KL weight and a registered forgetting fix, ten seeds each (stored as records) |
# | hardware | GPUs | 2 CPU cores, a few minutes |
#
# :::{note}
# **What is reconstructed.** The data rule (P(cue = truth) = 0.5 for two options, so the cue carries no <!-- paper -->
# information), the reward constants, the GRPO optimizer and the bandwagon-only training come from the authors'
# code as described in our notes. Ours: the synthetic judge task, its four comparison rules, its **three**
# options (the paper's judge compares two; the cue then points at the truth with probability 1/3, the same "no
# information" rule for three options) and its items with
# hidden digits (a stand-in for the questions an LLM judge cannot be sure of), the token-level
# cue templates (the paper uses 24 natural-language bandwagon templates), the three cue families that share
# nothing with bandwagon (irrelevant digits, a content-quoting "expert", option order), the "pre-training" that
# makes the base judge competent *and* partly cue-following (standing in for an LLM's learned sycophancy), the
# replay of uncued items during RL, the KL penalty's weight and the anchor of the forgetting fix. The paper's +0.1 format bonus for a `<think>` <!-- paper -->
# block has no analogue: our judge emits one answer token.
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

# %% tags=["parameters"]
quick = False
seed = 0
n_seeds = 10  # RL seeds seed, seed + 1, ...; seed s trains base judge (s - seed) mod 5
rl_steps = 200  # steps per arm (every arm gets the same budget)
rl_batch = 32  # prompts per step
n_replay = 8  # of which uncued items of the training subjects (replay)
G = 8  # answers sampled per prompt
rl_lr = 3e-4  # a third of the first attempt's (from its one-seed forgetting ablation)
beta = 1.0  # KL weight to the base judge, every RL arm: ei.BETA (was 0.02)
eval_n = 2000  # items per evaluation cell
quick_pre_steps = 100  # quick mode only: live pre-training of the stand-ins

# %% tags=["hide-input"]
import copy
import inspect
import json
import time

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch
from IPython.display import Markdown, display

from helpers import checkpoints, claims, plotting, repro, scripts, train
from helpers import epistemic_independence as ei

if quick:
    n_seeds, rl_steps, rl_batch, n_replay, eval_n = 2, 20, 16, 4, 200
SEEDS = [seed + k for k in range(n_seeds)]
# the base judges of seeds seed, ..., seed + 4 (seed 0: the committed checkpoint)
cfg = scripts.with_seeds(ei.checkpoint_config("base"),
                         scripts.model_seeds(seed, ei.N_BASE))
K, P_HID = cfg["n_options"], cfg["p_hidden"]
BASE_OF = {s: cfg["seeds"][(s - seed) % len(cfg["seeds"])] for s in SEEDS}
if quick:  # two small stand-ins, trained live
    BASE_OF = {s: cfg["seeds"][(s - seed) % 2] for s in SEEDS}

# these judges are tiny: one thread is faster than two fighting for a core
env = repro.setup(seed, threads=1)
plotting.use_style()
rec = claims.ClaimsRecord(
    "06_epistemic_independence",
    dict(quick=quick, seed=seed, n_seeds=n_seeds, rl_steps=rl_steps, rl_batch=rl_batch,
         n_replay=n_replay, G=G, rl_lr=rl_lr, beta=beta, eval_n=eval_n, base=cfg),
)
print(env)

# %% [markdown]
# ## The judge task
#
# Each item shows a **subject** token (which rule decides), a preamble, options A, B and C (six digits each,
# with two padding slots), a **cue slot** and `<ask>`. The rules: larger digit sum (`sum`), more digits ≥ 5
# (`high_count`), larger first + last digit (`ends`), larger sum of odd digits (`odd_sum`); the best option is
# unique. The first two are the training subjects of the RL arms; `ends` and `odd_sum` are held out (seen in
# pre-training, never in RL).
#
# Why three options: the paper's judge compares two, and with two answers a wrong answer under a misleading cue
# *is* the cue's answer. The EIT reward then is, within one prompt, an affine function of "correct", and GRPO's
# std-normalized advantages erase the difference from the plain accuracy reward (shown below). With three
# options a wrong answer is either the cue's option ("wrong via the cue", −0.5) or the other one ("wrong <!-- paper -->
# otherwise", 0), and the two rewards can train differently under the paper's own optimizer.
#
# Why some digits are hidden: three options are not enough. The two rewards give different GRPO advantages only
# to a group of answers that holds *both* wrong options under a misleading cue (or only wrong ones). In this
# chapter's first attempt every digit was shown: after a few RL steps a judge that resisted the cue was almost
# always right, its rare mistakes were the cue's, and the comparison had nothing to work on (its numbers are in
# the next cell). Here, on a share `p_hidden` of the items (pre-training, RL and evaluation alike), the last
# three digits of every option show as `?`. On such an item the judge cannot be sure, and its mistakes fall on
# either wrong option: the groups where the two rewards differ. The table below gives the expected reward of a
# judge that knows nothing but the cue, on the balanced data of three options (the cue on the truth one time in
# three): the accuracy reward pays every rule alike, the EIT reward pays avoiding the cue.
#
# :::{important}
# **The balanced data of three options.** The paper's rule is that the cue carries no information about the
# answer: with two options, P(cue = truth) = 0.5. With three options the same constant would make the cued <!-- paper -->
# option twice as likely as each other one, an *informative* cue (this chapter's previous attempt did that; its
# result is stated below). Here the balanced data put the cue on the truth with probability 1/3 <!-- paper -->
# (`ei.P_ALIGNED`), on each wrong option with 1/3 too: the cue is non-predictive of the answer, and under the
# accuracy reward following it, avoiding it and guessing all pay the same to a judge that knows nothing else.
# The EIT reward does not stay neutral: with 1/3 its penalty for the cue's wrong option and bonus for resisting <!-- paper -->
# make *avoiding* the cue pay (the table). That is the paper's reward on the paper's data rule; whether it helps
# or overshoots is what the runs measure. Hidden digits make uncertainty no judge can remove (the truth is not
# in the prompt), where an LLM judge's uncertainty is mostly its own lack of knowledge.
# :::
#
# Seven cue families point at one option. Three share the cue slot: **bandwagon** ("x % of people prefer B": a
# template token, a percentage bucket and the letter; the only family RL trains on), **authority** and
# **distraction** (their own template tokens, the same letter). Transfer to these two is cheap: a judge that
# learns to ignore the letter in the cue slot ignores them too. The other four share neither the slot nor the
# letter: **verbosity** (the cued option's padding holds elaboration tokens), **digits** (it holds two
# irrelevant digits), **expert** (the preamble quotes the first three digits of the cued option, so the cue names
# its option by content, not by letter) and **order** (option-order bias: the cue is "being listed first"; its
# only token is a `<ranked>` marker in the preamble, which names no option; the adversarial cell is the items
# whose correct option is not A). The last three are the *new* families of the transfer claim.

# %%
names = {v: k for k, v in ei.VOCAB.items()}
for f in ei.FAMILIES:
    demo = ei.make_batch(repro.rng(seed, 0), 1, subjects=ei.SUBJECTS, families=(f,),
                         n_options=K)
    toks = " ".join(names[int(t)] for t in demo.x[0] if int(t) != ei.VOCAB["<pad>"])
    print(f"{f:12s} {toks}   truth={'ABC'[demo.truth[0]]} cue->{'ABC'[demo.cue[0]]}")
demo = ei.make_batch(repro.rng(seed, 1), 1, n_options=K, p_hidden=1.0)
print("hidden digits:", " ".join(names[int(t)] for t in demo.x[0]
                                 if int(t) != ei.VOCAB["<pad>"]))
unsure = pd.DataFrame({
    r: {p: ei.uninformed_expected_reward(p, K, ei.P_ALIGNED, r)
        for p in ("follow", "other", "uniform")}
    for r in ("eit", "accuracy")}).rename_axis("a judge that knows only the cue")
display(unsure.round(4))

# %% tags=["remove-input"]
EARLIER = json.loads(
    checkpoints.fetch(ei.CHECKPOINT_SLUG, "earlier_attempt.json").read_text())
e_cmp, e_par = EARLIER["eit_vs_accuracy_reward"], EARLIER["params"]
SECOND = EARLIER["second_attempt"]
s_cmp = SECOND["eit_vs_accuracy_reward"]
THIRD = EARLIER["third_attempt"]  # this setting with the KL weight of the round before
t_cmp = THIRD["eit_vs_accuracy_reward"]
# exploratory, added at review of the round before (β = 0.2, every arm and seed); the
# registered sweep below repeats it
REVIEW_B = json.loads(
    checkpoints.fetch(ei.CHECKPOINT_SLUG, "review_beta_0.2.json").read_text())
# round 5's registered runs (make_sweep.py): the β sweep and the forgetting fix (records)
SWEEP = {b: json.loads(checkpoints.fetch(ei.CHECKPOINT_SLUG,
                                         f"beta_sweep_{b:g}.json").read_text())
         for b in ei.BETA_SWEEP}
ANCH = json.loads(checkpoints.fetch(ei.CHECKPOINT_SLUG, "anchor_fix.json").read_text())


def span_of(c):  # a claim's per-seed values, lowest to highest
    return f"{min(c['measured']):+.3f} to {max(c['measured']):+.3f}"


display(Markdown(
    f"**The first attempt** (every digit shown, {len(e_par['base']['seeds'])}"
    f" base judges, learning rate {e_par['rl_lr']:g}, "
    f"{e_par['rl_steps']} RL steps): EIT − accuracy reward under an adversarial "
    f"bandwagon cue {e_cmp['mean']:+.3f}, 95 % interval over the base judges "
    f"[{e_cmp['low']:+.3f}, {e_cmp['high']:+.3f}] ({e_cmp['verdict']}); on seed 0 only "
    f"{EARLIER['rewards_differ_seed0']:.3f} of the GRPO groups got different "
    "advantages from the two rewards. No-cue accuracy on held-out subjects fell by "
    f"{-max(EARLIER['no_forgetting_heldout']['measured']):.2f} to "
    f"{-min(EARLIER['no_forgetting_heldout']['measured']):.2f} "
    f"(`no_forgetting_heldout` {EARLIER['no_forgetting_heldout']['verdict']})."
    f"\n\n**The second attempt** (hidden digits as here, but P(cue = truth) = "
    f"{SECOND['p_aligned']:g} with three options, an informative cue, and base "
    "conditions read on the items shown in full): EIT − accuracy reward "
    f"{s_cmp['mean']:+.3f} [{s_cmp['low']:+.3f}, {s_cmp['high']:+.3f}] over its "
    f"base judges ({s_cmp['verdict']}); `aligned_preserved` EIT − base "
    f"{min(SECOND['aligned_preserved']['measured']):+.2f} to "
    f"{max(SECOND['aligned_preserved']['measured']):+.2f} "
    f"({SECOND['aligned_preserved']['verdict']}); `no_forgetting_heldout` "
    f"{min(SECOND['no_forgetting_heldout']['measured']):+.2f} to "
    f"{max(SECOND['no_forgetting_heldout']['measured']):+.2f} "
    f"({SECOND['no_forgetting_heldout']['verdict']})."
    f"\n\n**The round before this one** (this setting, KL weight β = "
    f"{THIRD['beta']:g}; its arms were replaced by this round's, trained with the "
    f"forgetting rule β = {ei.BETA:g}): EIT − accuracy reward {t_cmp['mean']:+.3f} "
    f"[{t_cmp['low']:+.3f}, {t_cmp['high']:+.3f}] ({t_cmp['verdict']}); "
    f"`no_forgetting_heldout` EIT − base {span_of(THIRD['no_forgetting_heldout'])} "
    f"({THIRD['no_forgetting_heldout']['verdict']}); `adv_accuracy_gain` "
    f"{span_of(THIRD['adv_accuracy_gain'])} ({THIRD['adv_accuracy_gain']['verdict']}); "
    f"`aligned_preserved` on all aligned items {span_of(THIRD['aligned_preserved'])} "
    f"({THIRD['aligned_preserved']['verdict']}, through conditions added at review)."))

# %% [markdown]
# ## A competent, partly cue-following base judge
#
# An LLM arrives at EIT already able to do the task and already sycophantic, but not on every item. Our
# stand-in: a transformer (`helpers.nn`) trained with supervision on every subject and cue family by a
# **sycophantic annotator**. A share of the items carries a cue (on the truth one time in three, as chance
# would); on a *close* item, where the best option beats the second by at most a small margin per subject, the
# annotator labels the cue's option; on a clear item, the correct one. So the base learns to follow cues from
# the annotator's deference, not from the cue being right. The margins (`ei.DEFER_MARGIN`) were fixed before
# any training from the score distributions and an ideal judge of the annotator's labels (its adversarial
# accuracy over all items inside the band the condition below asks for). A judge that learns this annotator
# follows a misleading cue on close items and resists it on clear ones, with room to improve and something to
# lose (the paper's LLMs follow some misleading cues, not all).
#
# **Label smoothing** ε in pre-training (`label_smoothing` in the config, printed under "Limits" below) keeps
# the judge unsure: a fully trained judge answers
# deterministically, its `G` sampled answers agree, and every GRPO group has zero advantage. The default run
# loads five such judges from a checkpoint made by `data/06_epistemic_independence/make_base.py` (2000 steps
# each, too long for this run); ten RL seeds share them (seed s trains base judge s mod 5), so a seed-to-seed
# spread contains both the RL noise and, across five judges, the base's. On the items with hidden digits the
# annotator still sees every digit; the judge does not, and there it leans on the cue more (the annotator's
# deference makes the cue's option its likeliest label where it cannot tell). The conditions on the base are
# registered in the checkpoint's config (`ei.BASE_CONDITIONS`) before any training: adversarial accuracy read
# over **all** items, competence on the items shown in full (on the others the truth is not in the prompt).
# Quick mode trains two stand-ins for
# a few steps. A base seed the checkpoint does not hold is pre-trained live with the checkpoint's recipe (kept
# in float32 where the checkpoint stores float16), a few minutes of CPU per judge.

# %%
bases = {}
base_seeds = sorted(set(BASE_OF.values()))
if quick:
    for b in base_seeds:
        with repro.seeded(b):
            bases[b] = ei.make_judge(cfg["small"], b)
            ei.pretrain(bases[b], cfg, b, steps=quick_pre_steps, desc=f"base {b}")
else:
    ckpt = checkpoints.load(ei.CHECKPOINT_SLUG, "base", config=cfg)
    for b in base_seeds:
        if b in ckpt.manifest["config"]["seeds"]:
            judge = ei.make_judge(cfg["small"], b)
            bases[b] = ckpt.load_into(judge, prefix=f"small/{b}.")
            continue
        print(f"base seed {b} is not in the checkpoint: training it live")
        with repro.seeded(b):
            bases[b] = ei.make_judge(cfg["small"], b)
            ei.pretrain(bases[b], cfg, b, lr=cfg["lr"], desc=f"base {b}")
    fig, axs = plt.subplots(1, 2, figsize=(11, 3.4))
    checkpoints.plot_history(
        ckpt.manifest, keys=[f"small/{b}/loss" for b in base_seeds], ax=axs[0],
        logy=True, title="pre-training loss",
    )
    checkpoints.plot_history(
        ckpt.manifest,
        keys=[f"small/{seed}/{k}" for k in ("none", "aligned", "adversarial")],
        ax=axs[1], title=f"base judge {seed}: accuracy by cue (bandwagon)",
    )
    plt.show()
for m in bases.values():
    m.eval()
print(f"parameters per judge: {bases[base_seeds[0]].n_params():,}")

# %% [markdown]
# Evaluation: for the training subjects, accuracy with no cue, and for each cue family accuracy with an aligned
# cue (pointing at the truth) and with an adversarial cue (pointing at a wrong option), plus the
# **cue-following rate** (answers equal to an adversarial cue's target); for the held-out subjects, no cue and
# bandwagon. Every cell has `eval_n` items, fixed by `seed` and shared by every judge, so two judges' accuracies
# on a cell are a paired comparison.

# %%
CONDS = {"aligned": 1.0, "adversarial": 0.0}
SPLITS = {"train subjects": ei.TRAIN_SUBJECTS, "held-out subjects": ei.HELDOUT_SUBJECTS}
TR, HO = SPLITS
assert SPLITS == ei.EVAL_SPLITS and CONDS == ei.EVAL_CONDS
eval_sets = ei.chapter_eval_sets(seed, eval_n, K, P_HID)  # held-out: no cue, bandwagon


def evaluate(model):  # every cell in one forward pass: the answers and a table
    ans = ei.answers_by_cell(model, eval_sets)
    return ans, pd.DataFrame(ei.evaluate_judge(model, eval_sets, answers=ans))


def acc(df, cond, family="bandwagon", split=TR, col="acc"):
    family = "none" if cond == "none" else family
    sel = (df.family == family) & (df.cond == cond) & (df.split == split)
    return float(df[sel][col].iloc[0])


# %% [markdown]
# The base judges on these items: accuracy with an aligned and an adversarial cue per family, how hard each
# follows each family (aligned − adversarial accuracy), its accuracy on the items shown in full, and how often
# a group of `G` of its answers under a wrong bandwagon cue would hold *both* wrong options (the groups where
# the EIT and the accuracy reward give different advantages).

# %%
base_scores = {b: evaluate(m) for b, m in bases.items()}
ev_bases = {b: ev for b, (_, ev) in base_scores.items()}
base_table = pd.DataFrame(
    {(f"base {b}", c): [acc(ev, c, f) for f in ei.FAMILIES]
     for b, ev in ev_bases.items() for c in CONDS},
    index=list(ei.FAMILIES),
)
display(base_table.round(3))
ADV, NONE = (TR, "bandwagon", "adversarial"), (TR, "none", "none")


def shown_acc(ans, cell):  # accuracy on the cell's items with every digit shown
    b = eval_sets[cell]
    return float((ans[cell] == b.truth)[~b.hidden].mean())


base_none = [shown_acc(base_scores[b][0], NONE) for b in base_seeds]
base_adv0 = [shown_acc(base_scores[b][0], ADV) for b in base_seeds]  # shown in full
base_adv_all = [acc(ev_bases[b], "adversarial") for b in base_seeds]  # all items
gaps = [acc(ev_bases[b], "aligned") - acc(ev_bases[b], "adversarial")
        for b in base_seeds]
print("all items: adversarial bandwagon accuracy", np.round(base_adv_all, 3),
      "| items shown in full: no-cue accuracy", np.round(base_none, 3),
      "adversarial bandwagon accuracy", np.round(base_adv0, 3))
with torch.no_grad():  # how often G answers under a wrong cue hold both wrong options
    b_adv = eval_sets[ADV]
    idx, other = torch.arange(len(b_adv)), torch.as_tensor(3 - b_adv.truth - b_adv.cue)
    mixed = {}
    for b, m in bases.items():
        p = torch.softmax(ei.answer_logits(m, b_adv.x), -1)
        pc, po = p[idx, torch.as_tensor(b_adv.cue)], p[idx, other]
        both = 1 - (1 - pc) ** G - (1 - po) ** G + (1 - pc - po) ** G
        mixed[b] = float(both.mean())
if not quick:  # quick mode's stand-ins are trained too briefly to have learned the cue
    rec.check("base_follows_cues", round(min(gaps), 4), 0.2, op=">=",
              note="base judges, worst: bandwagon accuracy with an aligned cue minus "
              "with an adversarial cue")
# conditions registered in the config before the base was trained (ei.BASE_CONDITIONS),
# recorded per RL seed (the value of the seed's base judge)
BC = cfg["conditions"]
band = BC["base_partly_follows"]["band"]
(lo_b, hi_b), MID_B = band, float(np.mean(band))
by_base = {b: (a, n) for b, a, n in zip(base_seeds, base_adv_all, base_none)}
cond = {
    "base_partly_follows": rec.condition(
        "base_partly_follows",
        [round(abs(by_base[BASE_OF[s]][0] - MID_B), 4) for s in SEEDS], "<=",
        round((hi_b - lo_b) / 2, 4),
        statement="the seed's base judge follows some misleading bandwagon cues and "
        f"not all (adversarial accuracy in [{lo_b:g}, {hi_b:g}], all items)",
        unit=f"|adversarial bandwagon accuracy − {MID_B:g}| of the seed's "
        "base judge, all items"),
    "base_competent": rec.condition(
        "base_competent", [by_base[BASE_OF[s]][1] for s in SEEDS], ">=",
        BC["base_competent"]["min"] if not quick else 0.0,
        statement="the seed's base judge solves the task without a cue where it "
        "sees every digit",
        unit="no-cue accuracy of the seed's base judge, training subjects, items "
        "shown in full"),
}

# %% [markdown]
# Where the annotator's margins come from: `ei.annotator_simulation` draws uncued items of each subject (the
# share that is *close*, per subject and per subject split) and adversarial bandwagon items of the training
# subjects, half with hidden digits, and scores the *ideal judge of the annotator's labels* there (on an item
# shown in full it answers the annotator's label; on one with hidden digits, the label most frequent over
# completions of the hidden digits). A base judge that learned the annotator perfectly would score that. The
# registered margins put it inside the band of `base_partly_follows`; the margins before them did not (a check
# asserts the first; the table shows both).

# %%
MARGINS = {"registered (ei.DEFER_MARGIN)": ei.DEFER_MARGIN,
           "earlier (5/1/3/6)": dict(sum=5, high_count=1, ends=3, odd_sum=6)}
SIM_N = dict(n=500, n_draws=200) if quick else dict(n=2000, n_draws=1000)
sims = {k: ei.annotator_simulation(m, **SIM_N) for k, m in MARGINS.items()
        if not quick or k.startswith("registered")}
display(pd.DataFrame({
    k: {**{f"close share, {s}": v for s, v in r["close"].items()},
        **{f"close share, {sp}": v for sp, v in r["close_split"].items()},
        "ideal judge of the labels: adversarial accuracy": r["ideal_adversarial"]}
    for k, r in sims.items()}).round(3))
sim_reg = sims["registered (ei.DEFER_MARGIN)"]["ideal_adversarial"]
rec.check("defer_margins_in_band", round(abs(sim_reg - MID_B), 4),
          round((hi_b - lo_b) / 2, 4), op="<=",
          note=f"ideal judge of the annotator's labels with ei.DEFER_MARGIN: "
          "adversarial "
          f"bandwagon accuracy {sim_reg:.3f}, band [{lo_b:g}, {hi_b:g}] "
          "(|value − band middle| ≤ half-width)")

# %% [markdown]
# ## Balanced conflict data and the independence reward
#
# The training data of EIT: bandwagon cues only, each pointing at the truth with probability exactly 1/3, at
# each wrong option with 1/3 too (the paper's 0.5 for two options). The <!-- paper -->
# reward (`ei.eit_reward`, the paper's constants): +1.0 for a correct answer; with an adversarial cue, −0.5 for <!-- paper -->
# following it and +0.5 for resisting it; with an aligned cue, −0.3 for a wrong answer and **no bonus** for <!-- paper -->
# agreeing. The key lines:

# %%
src = inspect.getsource(ei.eit_reward)
print(src[src.index("    correct = pred == truth") :])

# %%
bal = ei.make_batch(repro.rng(seed, 3), 10_000, p_aligned=ei.P_ALIGNED, n_options=K)
# P(cue = truth), P(cue = each wrong option)
p_on = [float((bal.cue == (bal.truth + j) % K).mean()) for j in range(K)]
rec.check("balanced_cues", round(max(abs(p - 1 / K) for p in p_on), 4), 0.02, op="<=",
          note=f"|P(cue = option) - 1/{K}| on 10k balanced samples, worst of the truth "
          "and the wrong options (P = " + ", ".join(f"{p:.4f}" for p in p_on) + ")")
table = [  # pred, truth, cue, paper's reward
    (0, 0, 1, 1.5), (1, 0, 1, -0.5), (2, 0, 1, 0.0), (0, 0, 0, 1.0), (1, 0, 0, -0.3),
    (0, 0, -1, 1.0), (1, 0, -1, 0.0),
]
got = ei.eit_reward(*(np.array([t[i] for t in table]) for i in range(3)))
cases = ["adversarial, resisted", "adversarial, followed", "adversarial, other wrong",
         "aligned, right", "aligned, wrong", "no cue, right", "no cue, wrong"]
print(pd.DataFrame(dict(case=cases, reward=got)).to_string(index=False))
rec.check("reward_table", float(np.abs(got - np.array([t[3] for t in table])).max()),
          0.0, op="<=")

# %% [markdown]
# What the reward makes attractive, for the paper's two-option judge: the exact expected reward of four fixed
# policies. On balanced data, truth beats every cue-based rule under EIT; under plain accuracy, following and
# opposing the cue tie at 0.5. On *adversarial-only* data, plain accuracy pays "always contradict the cue" <!-- paper -->
# exactly as much as the truth: that is the shortcut the balance removes.

# %%
POLICIES = ("truth", "anti", "random", "follow")
expected = pd.DataFrame({
    "EIT, balanced": {p: ei.policy_expected_reward(p, 0.5, "eit") for p in POLICIES},
    "accuracy, balanced": {
        p: ei.policy_expected_reward(p, 0.5, "accuracy") for p in POLICIES},
    "accuracy, adversarial-only": {
        p: ei.policy_expected_reward(p, 0.0, "accuracy") for p in POLICIES},
})
display(expected)
paper_expected = {"truth": 1.25, "anti": 0.60, "random": 0.425, "follow": 0.25}
rec.check(
    "expected_rewards",
    max(abs(expected["EIT, balanced"][p] - v) for p, v in paper_expected.items()),
    1e-12, op="<=", note="truth 1.25, anti-cue 0.60, random 0.425, cue-following 0.25",
)

# %% [markdown]
# ## Group policy gradient: what the reward can and cannot change
#
# For each prompt the judge samples `G` answers; each gets a reward; the group's advantages weight the log
# probabilities (`ei.grpo_loss`), and every RL arm adds `beta` times the exact KL divergence from the frozen base
# judge, the usual guard against forgetting what RL does not train.
#
# **Two options (the paper's judge).** The EIT reward is then, within one prompt, an affine function of
# "correct": slope 1 + 0.5 + 0.5 = 2.0 under an adversarial cue, 1.3 under an aligned one, 1.0 without a cue. <!-- paper -->
# GRPO's std-normalized advantages remove the slope, so the EIT reward and plain accuracy give *identical*
# gradients: with the paper's optimizer and a pairwise judge, EIT can differ from the accuracy reward only
# through the data. Mean-baseline advantages `r − mean(r)` (as in Dr. GRPO) keep the slope: EIT is then exactly
# an accuracy reward reweighted 2.0 on adversarial and 1.3 on aligned items (`ei.reweighted_reward`). <!-- paper -->
#
# **Three options (this chapter's judge).** A group under an adversarial cue can hold the truth (1.5), the cue's <!-- paper -->
# option (−0.5) and the other wrong option (0): three reward levels where accuracy has two, and no affine map <!-- paper -->
# between them. The std-normalized gradients differ.
#
# All four statements are checked on one batch with a freshly initialized judge, whose answers are close to
# uniform (a confident judge's groups agree, every advantage is zero and any two gradients are equal by
# construction; `gradient_probe_informative` guards against that). With three options only the groups holding
# both wrong options (or only wrong ones) under a wrong cue get different advantages (their share in the probe's
# batch is printed), and no size of the difference is predicted. So `std_differs_three_options` asks only
# "not an identity", with the bar the identity checks use: in float32 a gradient summed over the batch's `n · G`
# sampled answers carries a rounding error of at most about `n · G` machine epsilons relative to its size, below
# the identities' tolerance `ID_TOL`, so a relative difference above `ID_TOL` is not rounding. (In earlier
# versions this bar was set, and then lowered, after its value had been seen; it is now this derivation.)

# %%
with repro.seeded(seed):
    probe = ei.make_judge(cfg["small"], seed)  # untrained: uncertain answers
fixed = {k: ei.make_batch(repro.rng(seed, 4), rl_batch, n_options=k, p_aligned=1 / k)
         for k in (2, K)}  # balanced: the cue on the truth as chance would
g = {  # one policy-gradient step's gradient, same samples for every reward
    (k, r, m): ei.policy_gradient(probe, fixed[k], G, r, m, seed)
    for k in (2, K) for r in ("eit", "accuracy", "reweighted") for m in ("std", "mean")
}
rel = ei.relative_max_diff
d2_std = rel(g[2, "eit", "std"], g[2, "accuracy", "std"])
d2_mean = rel(g[2, "eit", "mean"], g[2, "accuracy", "mean"])
d2_rw = rel(g[2, "eit", "mean"], g[2, "reweighted", "mean"])
d3_std = rel(g[K, "eit", "std"], g[K, "accuracy", "std"])
print("relative max gradient difference, EIT vs accuracy: two options, "
      f"std {d2_std:.1e}, "
      f"mean {d2_mean:.2f}; {K} options, std {d3_std:.2f}. Two options, EIT vs "
      f"reweighted accuracy, mean {d2_rw:.1e}")
ID_TOL = 1e-4  # the identities' tolerance: above float32 rounding over n·G terms
ROUND = rl_batch * G * float(np.finfo(np.float32).eps)  # that rounding's bound
assert ROUND < ID_TOL, (ROUND, ID_TOL)
rec.check("eit_equals_accuracy_two_options", d2_std, ID_TOL, op="<=",
          note="two options, std-normalized advantages: EIT vs accuracy gradient")
rec.check("eit_is_reweighted_accuracy", d2_rw, 1e-5, op="<=",
          note="two options, mean baseline: EIT vs accuracy reweighted 2.0 / 1.3")
rec.check("gradient_probe_informative", round(d2_mean, 4), 0.05, op=">=",
          note="two options, mean baseline: EIT vs accuracy gradients differ (zero if "
          "every group agrees, which would make the checks above vacuous)")
probe_differ = ei.grpo_loss(probe, fixed[K], G, "eit", "std",
                            torch.Generator().manual_seed(seed))[1]["rewards_differ"]
print(f"{K} options: share of the probe's groups whose two advantages differ "
      f"{probe_differ:.3f}")
rec.check("std_differs_three_options", round(d3_std, 6), ID_TOL, op=">",
          note=f"{K} options, std-normalized advantages: EIT vs accuracy gradient, "
          f"relative difference above the identities' tolerance {ID_TOL:g} (float32 "
          f"rounding over {rl_batch} x {G} answers is at most {ROUND:.1e}); "
          f"{probe_differ:.3f} of the probe's groups differ")

# %% [markdown]
# ## The arms, one budget, ten seeds
#
# Every arm starts from its seed's base judge and gets `rl_steps` steps of `rl_batch` prompts with the same
# optimizer and learning rate (`helpers.train.fit`). Every RL arm uses GRPO as the paper does (`G` sampled
# answers per prompt, std-normalized advantages) and the KL penalty (`beta = 1.0`, the forgetting rule
# registered before these arms were trained). The training data use bandwagon cues on
# the training subjects only, and the last `n_replay` prompts of each batch are uncued items of the same
# subjects (replay of the task itself, so that RL does not only ever see cued items). The arms use **common
# random numbers**: a training batch is keyed by the seed and the step, not by the arm (`ei.rl_batch`), and
# every arm of a seed samples its answers from a generator with the same seed, so a difference between two arms
# at one seed is their reward's, not a second data stream's noise.
#
# 1. **SFT-debias** (the paper's SFT baseline): supervised training on the same items with every cue
#    adversarial and the correct labels;
# 2. **RL acc, adversarial-only**: accuracy reward, every cue wrong;
# 3. **RL acc, balanced**: accuracy reward on balanced conflict data, the strongest baseline: it isolates the
#    data from the reward;
# 4. **EIT**: balanced conflict data and the EIT reward.

# %%
ARMS = ei.ARMS  # arm: (reward, P(cue = truth) in the training data)
src = inspect.getsource(ei.train_arm)  # the key lines of one arm's training
print(src[src.index("    def batches") : src.index("    with repro.seeded")])
LIVE = SEEDS if quick else [seed]  # trained here (the others: make_rl_arms.py)
KW = dict(steps=rl_steps, batch=rl_batch, n_replay=n_replay, G=G, lr=rl_lr, beta=beta,
          n_options=K, p_hidden=P_HID)
models, logs, seen_tokens, digests = {}, {}, [], {}
t_rl = time.time()
for s in LIVE:
    for arm in ARMS:
        models[arm, s], log, digests[arm, s], toks = ei.train_arm(
            bases[BASE_OF[s]], arm, s, keep_tokens=arm == "EIT", **KW)
        logs[arm, s] = pd.DataFrame(log)
        seen_tokens += toks
print(f"{len(ARMS)} arms x {len(LIVE)} seed(s) here: {time.time() - t_rl:.0f} s")

# %% [markdown]
# The default run trains seed `seed`'s arms here and reads the other seeds' from the checkpoint `arms`, made by
# `data/06_epistemic_independence/make_rl_arms.py` with the same function (`ei.train_arm`) from the same base
# judges: the answers of every arm on every evaluation item and the training curves (the models themselves are
# not stored). A check asks that the arms trained here give the stored answers for their seed.

# %%
ARM_ORDER = ["base", *ARMS]
answers, evals = {}, {}
for s in LIVE:
    for arm in ARMS:
        answers[arm, s], evals[arm, s] = evaluate(models[arm, s])
stored_unpaired = stored_ood = 0
if not quick:
    acfg = dict(ei.arms_config(SEEDS), eval_n=eval_n,
                **{k: v for k, v in KW.items() if k != "n_options"})
    assert acfg["base_seeds"] == cfg["seeds"]
    T = checkpoints.load(ei.CHECKPOINT_SLUG, "arms", config=acfg).tensors
    cells = list(eval_sets)
    for i, arm in enumerate(ARMS):
        for s in SEEDS:
            ans = {c: ei.unpack_answers(T[f"ans/{i}/{s}/{j}"].numpy(), eval_n)
                   for j, c in enumerate(cells)}
            if s in LIVE:  # trained here: the stored answers must be this run's
                same = np.mean([(ans[c] == answers[arm, s][c]).mean() for c in cells])
                rec.check(f"stored_arm_reproduces_{i}", round(float(same), 4), 0.99,
                          op=">=", note=f"{arm}, seed {s}: share of stored answers "
                          "equal to this run's")
                continue
            answers[arm, s] = ans
            evals[arm, s] = pd.DataFrame(
                ei.evaluate_judge(None, eval_sets, answers=ans))
            curves = {st: T[f"curve/{i}/{s}/{st}"].numpy()
                      for st in ("accuracy", "follow", "informative", "rewards_differ")
                      if f"curve/{i}/{s}/{st}" in T}
            logs[arm, s] = pd.DataFrame(curves).replace(-1.0, np.nan)
    meta = checkpoints.load(ei.CHECKPOINT_SLUG, "arms", config=acfg).manifest["metrics"]
    stored_unpaired, stored_ood = meta["unpaired_steps"], meta["ood_tokens_in_eit_data"]
for s in SEEDS:
    models["base", s] = bases[BASE_OF[s]]
    answers["base", s], evals["base", s] = base_scores[BASE_OF[s]]

# %% [markdown]
# Two checks on what the arms saw: the arms of a seed trained on identical batches step by step (the balanced
# pair on identical items and cues, the adversarial-only pair likewise), and EIT's training data holds no token
# of another cue family or of a held-out subject.

# %%
ood_ids = [v for n, v in ei.VOCAB.items()
           if n.startswith(("<authority", "<distraction", "<elab", "<expert",
                            "<ranked"))]
heldout_ids = [ei.VOCAB[f"<subj:{x}>"] for x in ei.HELDOUT_SUBJECTS]
seen = torch.cat(seen_tokens)
n_ood = int(torch.isin(seen, torch.tensor(ood_ids + heldout_ids)).sum())
pads = [seen[:, o + ei.N_DIGITS : o + ei.N_DIGITS + ei.N_PAD]
        for o in ei.option_start(K)]
pad_digits = int(sum((p < 10).sum() for p in pads))
PAIRS_OF = {p: [a for a, v in ARMS.items() if v[1] == p]
            for p in (ei.P_ALIGNED, 0.0)}  # arms with one data rule
n_unpaired = stored_unpaired + sum(  # the stored seeds' count is make_rl_arms.py's
    ei.unpaired_steps({a: digests[a, s] for a in group}, rl_steps)
    for s in LIVE for group in PAIRS_OF.values())
rl_arms = [a for a, v in ARMS.items() if v[0] != "sft"]
# the shared sampler: at step 0 the balanced arms are one judge: the same answers
n_unshared = sum(
    len({(logs[a, s]["accuracy"][0], logs[a, s]["follow"][0])
         for a in PAIRS_OF[ei.P_ALIGNED]}) > 1
    for s in LIVE)
rec.check("common_batches", n_unpaired + n_unshared, 0,
          note="(seed, step) pairs at which arms with the same data rule trained on "
          "different batches, plus seeds whose balanced arms drew different answers at "
          "step 0")
rec.check("ood_families_unseen", n_ood + pad_digits + stored_ood, 0,
          note="tokens of other cue families (incl. digits in padding) or held-out "
          "subjects in EIT's training data")

# %% [markdown]
# ## Results
#
# Accuracy per arm, cue family and condition on the training subjects, averaged over the seeds (bandwagon is
# in-domain, every other family was never seen by the RL arms), and on the held-out subjects.

# %%
def per_seed(arm, cond, family="bandwagon", split=TR):
    return [acc(evals[arm, s], cond, family, split) for s in SEEDS]


def mean_acc(arm, cond, family="bandwagon", split=TR):
    return float(np.mean(per_seed(arm, cond, family, split)))


rows = [(TR, "none", "none")] + [(TR, f, c) for f in ei.FAMILIES for c in CONDS]
rows += [(HO, "none", "none")] + [(HO, "bandwagon", c) for c in CONDS]
summary = pd.DataFrame(
    {arm: [mean_acc(arm, c, f, sp) for sp, f, c in rows] for arm in ARM_ORDER},
    index=pd.MultiIndex.from_tuples(rows, names=["split", "family", "cond"]),
)
display(summary.round(3))


def draw_arm_bars(fig, cond):
    ax = fig.subplots()
    width = 0.8 / len(ARM_ORDER)
    fams = ["none", *ei.FAMILIES]
    for j, (arm, c) in enumerate(zip(ARM_ORDER, plotting.PALETTE)):
        vals = [mean_acc(arm, "none" if f == "none" else cond, f) for f in fams]
        ax.bar(np.arange(len(fams)) + j * width, vals, width, color=c, label=arm)
    ax.set_xticks(np.arange(len(fams)) + 0.4 - width / 2, fams, rotation=30)
    ax.set(title=f"{cond} cue (training subjects)", ylim=(0, 1),
           ylabel=f"accuracy (mean of {len(SEEDS)} seeds)")
    ax.legend(fontsize=7, loc="lower right")


# %% [markdown]
# The slider switches between an adversarial and an aligned cue.

# %%
plotting.static_slider(list(CONDS)[::-1], draw_arm_bars, figsize=(9, 3.6),
                       label="cue", fmt="{}")

# %% [markdown]
# Cue-following while training: the share of sampled answers that pick a wrong bandwagon cue's option, per RL
# arm (mean over seeds, smoothed). The adversarial-only arm sees a wrong cue on every cued item; the balanced
# arms on two in three of them.

# %%
fig, ax = plt.subplots(figsize=(6.4, 3.4))
w = max(1, rl_steps // 20)
for arm in rl_arms:
    curve = np.mean([logs[arm, s]["follow"].to_numpy() for s in SEEDS], axis=0)
    ax.plot(np.convolve(curve, np.ones(w) / w, mode="valid"), label=arm)
ax.set(xlabel="RL step", ylabel="P(answer = cue | cue is wrong)",
       title="cue-following during training")
ax.legend()
plt.show()
informative = pd.Series(
    {arm: float(np.mean([logs[arm, s]["informative"].mean() for s in SEEDS]))
     for arm in rl_arms}, name="share of groups with an advantage")
display(informative.round(3).to_frame())
# where can the two rewards train differently at all? groups whose GRPO
# advantages differ between EIT and accuracy on the same samples (mean of the
# seeds: first and last tenth of training, and the mean over all steps)
tenth = max(1, rl_steps // 10)
differ = pd.DataFrame({
    arm: {k: float(np.mean([logs[arm, s]["rewards_differ"].to_numpy()[sl].mean()
                            for s in SEEDS]))
          for k, sl in (("first tenth", slice(None, tenth)),
                        ("last tenth", slice(-tenth, None)),
                        ("all steps", slice(None)))}
    for arm in ("RL acc, balanced", "EIT")}).T
display(differ.round(3).rename_axis("groups where the rewards differ"))

# %% [markdown]
# Live: evaluate every judge of seed `seed` on fresh items of a family, condition and subject of your choice.


# %%
@torch.no_grad()
def live(family="digits", condition="adversarial", subject="ends", n=500):
    pc, pa = (0.0, 1.0) if condition == "none" else (1.0, CONDS[condition])
    b = ei.make_batch(np.random.default_rng(n), n, subjects=(subject,),
                      families=(family,), p_cue=pc, p_aligned=pa, n_options=K,
                      p_hidden=P_HID)
    for arm in ARM_ORDER:
        pred = ei.answer_logits(models[arm, seed], b.x).argmax(-1).numpy()
        print(f"{arm:26s} accuracy {(pred == b.truth).mean():.3f}")


plotting.live_controls(live, family=list(ei.FAMILIES), condition=["none", *CONDS],
                       subject=list(ei.SUBJECTS), n=(100, 2000, 100))

# %% [markdown]
# ## The reward comparison
#
# The paper's central point is that the *reward*, not only the data, makes the cue non-predictive of reward. On
# the balanced data the cue is right one time in three, so the accuracy reward is neutral about it where the
# judge cannot tell, and the EIT reward pays avoiding it (above). The decisive comparison is EIT against the
# accuracy reward on the same balanced data, paired seed by seed (same batches, same sampler seed, same
# evaluation items). Per seed:
# the difference on `eval_n` adversarial bandwagon items with a 95 % paired-bootstrap interval over the items;
# over the seeds: the seeds are **not** ten independent repeats of the whole design, since the ten RL seeds
# share five base judges (seed s trains base judge s mod 5) and a base judge's quirks move all its seeds
# together. The interval the claims use is therefore over the **base judges**: the mean of the five base
# judges' seed-mean differences with a 95 % Student-t interval on four degrees of freedom
# (`ei.cluster_interval`). The interval that treats the ten seeds as independent (`ei.seed_interval`, narrower,
# too optimistic for this design) is shown next to it. The same for aligned and uncued items, for held-out
# subjects, for the new cue families (their three adversarial cells pooled), and for the adversarial items
# split into those with hidden digits and those shown in full. That split is **exploratory**: no record fixes
# it before the RL runs, it is not a claim, and a subset where the effect is expected is read after the
# pooled verdict, not instead of it. Under an adversarial cue, a wrong answer is
# either the cue's option or the other one: the table says which share of the wrong answers followed the cue,
# and how often each judge answers with the wrong cue's option on the items with hidden digits.

# %%
NEW = [(TR, f, "adversarial") for f in ei.NEW_FAMILIES]
CELLS = {
    "adversarial": [(TR, "bandwagon", "adversarial")],
    "aligned": [(TR, "bandwagon", "aligned")],
    "no cue": [(TR, "none", "none")],
    "held-out adversarial": [(HO, "bandwagon", "adversarial")],
    "held-out no cue": [(HO, "none", "none")],
    "new families adversarial": NEW,
    "adversarial, hidden digits": [ADV],
    "adversarial, shown in full": [ADV],
}
KEEP = {"adversarial, hidden digits": True, "adversarial, shown in full": False}


def right(arm, s, cells, hidden=None):  # per-item correctness over the pooled cells
    keep = {c: slice(None) if hidden is None else eval_sets[c].hidden == hidden
            for c in cells}
    return np.concatenate([(answers[arm, s][c] == eval_sets[c].truth)[keep[c]]
                           for c in cells])


def compare(a, b, cells, hidden=None):
    """Per-seed paired differences a − b (with item-bootstrap intervals), their mean
    with a t-interval over the base judges (the clusters), and one over the seeds."""
    per = [ei.paired_bootstrap_diff(right(a, s, cells, hidden),
                                    right(b, s, cells, hidden), 1000,
                                    repro.rng(seed, 50, s)) for s in SEEDS]
    d = [x for x, _, _ in per]
    return per, ei.cluster_interval(d, [BASE_OF[s] for s in SEEDS]), ei.seed_interval(d)


cmp = {name: compare("EIT", "RL acc, balanced", cells, KEEP.get(name))
       for name, cells in CELLS.items()}


def cue_share(arm, s, cell=(TR, "bandwagon", "adversarial")):
    wrong = answers[arm, s][cell] != eval_sets[cell].truth
    on_cue = answers[arm, s][cell] == eval_sets[cell].cue
    return float(on_cue[wrong].mean()) if wrong.any() else 0.0


def follow_hidden(arm, s, cell=ADV):  # answers = the wrong cue, hidden-digit items
    b = eval_sets[cell]
    return float((answers[arm, s][cell] == b.cue)[b.hidden].mean())


# %% [markdown]
# Per seed, the paired differences and where the judges' mistakes go; then the intervals.

# %%

paired = pd.DataFrame(
    {f"EIT − acc: {n}": [per[i][0] for i in range(len(SEEDS))]
     for n, (per, *_) in cmp.items()}
    | {f"wrong answers on the cue, {a}": [cue_share(a, s) for s in SEEDS]
       for a in ("base", "RL acc, balanced", "EIT")}
    | {f"follows the cue, hidden digits, {a}": [follow_hidden(a, s) for s in SEEDS]
       for a in ("base", "RL acc, balanced", "EIT")},
    index=pd.Index(SEEDS, name="RL seed"),
)
paired.insert(0, "base judge", [BASE_OF[s] for s in SEEDS])
display(paired.round(3))
intervals = pd.DataFrame(
    {n: dict(zip(("mean", "low (bases)", "high (bases)"), iv))
     | dict(zip(("_", "low (seeds independent)", "high (seeds independent)"), ivs))
     for n, (_, iv, ivs) in cmp.items()}).T.drop(columns="_")
display(intervals.round(3))

# %% [markdown]
# ## The reward comparison across β: a registered sweep
#
# The comparison above held in the round before only after the KL weight went from `β = 0.02` to `β = 1.0`, a
# change made for forgetting, and an exploratory review run at `β = 0.2` did not hold it. So this round runs
# the comparison as **its own study**, registered in code (`ei.BETA_SWEEP`, `ei.SWEEP_READINGS`) and committed
# before any of its runs: the three RL arms (SFT-debias has no KL term) for all ten RL seeds at each
# `β` in `ei.BETA_SWEEP = (0.02, 0.2, 1.0)`, everything else unchanged, with the claim's reading (EIT − accuracy reward on the
# adversarial bandwagon items, interval over the base judges; held at a `β` when its low end is above zero and
# `rewards_differ` is met at every seed). `data/06_epistemic_independence/make_sweep.py` stores what it read
# (`beta_sweep_<β>.json`, records, not models). The headline stays the claim at the registered `β = 1.0`; the
# sweep sits beside it. At `β = 1.0` the sweep repeats the stored arms, and a check asks that it gave the same
# answer on every evaluation item.

# %%
def ck(cell):  # a cell's key in the records
    return " | ".join(cell)


def rec_diff(r, a, b, cell):  # per seed, arm a − arm b (or the seed's base judge)
    out = []  # rounded to 4 decimals as diff() below (accuracies are k / eval_n)
    for s, v in r["arms"][a].items():
        y = (r["base_acc"][str(v["base"])] if b == "base" else r["arms"][b][s]["acc"])
        out.append(round(v["acc"][ck(cell)] - y[ck(cell)], 4))
    return out


def rec_iv(r, d):  # mean and interval over the base judges
    return ei.cluster_interval(d, [v["base"] for v in r["arms"]["EIT"].values()])


def iv_str(iv):
    return f"{iv[0]:+.3f} [{iv[1]:+.3f}, {iv[2]:+.3f}]"


def sweep_iv(r):  # the claim's reading in a sweep record
    e = r["eit_vs_accuracy_reward"]
    return e["mean"], e["low"], e["high"]


HO_NONE, HO_ADV = (HO, "none", "none"), (HO, "bandwagon", "adversarial")
sweep_rows = {}
for b, r in SWEEP.items():
    e = r["eit_vs_accuracy_reward"]
    rd_b = [v["rewards_differ"] for v in r["arms"]["EIT"].values()]
    fg = rec_diff(r, "EIT", "base", HO_NONE)
    sweep_rows[f"β = {b:g}"] = {
        "EIT − acc, adversarial (the claim's reading)": iv_str(sweep_iv(r)),
        "held at this β": e["held"],
        "rewards_differ (EIT, lowest seed)": f"{min(rd_b):.3f}",
        "EIT − acc, aligned": iv_str(rec_iv(r, rec_diff(r, "EIT", "RL acc, balanced",
                                                        (TR, "bandwagon", "aligned")))),
        "EIT − acc, held-out adversarial": iv_str(rec_iv(r, rec_diff(
            r, "EIT", "RL acc, balanced", HO_ADV))),
        "EIT − base, adversarial (mean)":
            f"{np.mean(rec_diff(r, 'EIT', 'base', ADV)):+.3f}",
        "held-out no cue, EIT − base (mean)": f"{np.mean(fg):+.3f}",
        "seeds at −0.02": f"{sum(x >= -0.02 for x in fg)} of {len(fg)}",
    }
sweep_table = pd.DataFrame(sweep_rows)
display(sweep_table)
N_SWEEP_HELD = sum(r["eit_vs_accuracy_reward"]["held"] for r in SWEEP.values())
rec.check("sweep_repeats_stored_arms", SWEEP[ei.BETA]["stored_answers_mismatched"], 0,
          note=f"answers of the β = {ei.BETA:g} sweep run that differ from the stored "
          "arms' (every arm, seed and evaluation item)")
rec.check("sweep_is_the_registered_recipe", sum(
    {k: v for k, v in r["config"].items() if k not in ("beta", "arms")}
    != {k: v for k, v in checkpoints.normalize(ei.arms_config(r["seeds"])).items()
        if k not in ("beta", "arms")} for r in SWEEP.values()), 0,
          note="sweep runs whose config differs from ei.arms_config in more than β")

# %% [markdown]
# The sweep in one figure: the claim's reading (left) and held-out no-cue accuracy against the base (right),
# mean and 95 % interval over the base judges, per `β`.

# %%
fig, axes = plt.subplots(1, 2, figsize=(9, 3.2))
xs = np.arange(len(SWEEP))
for ax, (title, pick) in zip(axes, [
        ("EIT − accuracy reward, adversarial", lambda r: sweep_iv(r)),
        ("held-out no cue, EIT − base", lambda r: rec_iv(r, rec_diff(r, "EIT", "base",
                                                                      HO_NONE)))]):
    ivs = np.array([pick(r) for r in SWEEP.values()])
    ax.errorbar(xs, ivs[:, 0], yerr=[ivs[:, 0] - ivs[:, 1], ivs[:, 2] - ivs[:, 0]],
                fmt="o", capsize=4)
    ax.axhline(0, color="grey", lw=0.8)
    ax.set(xticks=xs, xticklabels=[f"β = {b:g}" for b in SWEEP], title=title)
axes[1].axhline(-0.02, color="grey", ls="--", lw=0.8)  # no_forgetting_heldout's bar
plt.show()

# %% [markdown]
# ## Where the held-out skill goes: a one-seed diagnostic
#
# In the first attempt the RL arms lost no-cue accuracy on the held-out subjects, and a one-seed ablation
# pointed at the step size, so every arm runs at a third of that learning rate. In the round before this one
# (KL weight `beta = 0.02`) the arms still lost held-out accuracy at every seed, and the same diagnostic at seed 0 found a
# KL weight fifty times larger about halved the loss. That is the **forgetting rule** of this round, registered
# in code (`ei.BETA = 1.0`, every RL arm, every seed) and committed before the arms were retrained with it; the
# round before's claims are kept (`earlier_attempt.json`) and read below. The diagnostic, rerun on this round's
# setting: seed `seed`'s EIT arm retrained with one change (same batches and sampler otherwise): the round
# before's KL weight; the replay items drawn from all four subjects instead of the two training subjects (this
# breaks "held out" for this one run, which is why it is a diagnostic and not an arm); the first attempt's larger
# learning rate. And one measurement of the base: the items it gets right and EIT gets wrong, are they the ones
# it barely gets right (its two likeliest answers nearly tied, `TIE` below)? One seed: differences of a few
# points are RL noise.

# %%
DIAG = {
    "as trained": {},
    f"β = {ei.BETA_BEFORE:g} (the round before)": dict(beta=ei.BETA_BEFORE),
    "replay from all subjects": dict(replay_subjects=ei.SUBJECTS),
    f"the earlier learning rate ({EARLIER['params']['rl_lr']:g})": dict(
        lr=EARLIER['params']['rl_lr']),
}
b0 = ev_bases[BASE_OF[seed]]
diag = {}
for name, change in DIAG.items():
    m = (models["EIT", seed] if not change else
         ei.train_arm(bases[BASE_OF[seed]], "EIT", seed, **(KW | change))[0])
    ev = evaluate(m)[1]
    diag[name] = {
        "held-out, no cue": acc(ev, "none", split=HO) - acc(b0, "none", split=HO),
        "training subjects, no cue": acc(ev, "none") - acc(b0, "none"),
        "adversarial bandwagon": acc(ev, "adversarial") - acc(b0, "adversarial"),
        "aligned bandwagon": acc(ev, "aligned") - acc(b0, "aligned"),
    }
diag = pd.DataFrame(diag).T
display(diag.round(3).rename_axis(f"seed {seed}, EIT − base"))
ho_set = eval_sets[(HO, "none", "none")]
with torch.no_grad():
    pb = torch.softmax(ei.answer_logits(bases[BASE_OF[seed]], ho_set.x), -1)
top2 = pb.topk(2, -1).values
TIE = 0.1  # "nearly tied": the top two answer probabilities within TIE
near_tie = ((top2[:, 0] - top2[:, 1]) < TIE).numpy()
was_right = answers["base", seed][(HO, "none", "none")] == ho_set.truth
now_wrong = answers["EIT", seed][(HO, "none", "none")] != ho_set.truth
lost = was_right & now_wrong
tie_lost = float(near_tie[lost].mean()) if lost.any() else float("nan")
tie_all = float(near_tie.mean())
print(f"held-out no-cue items the base gets right and EIT gets wrong: {lost.sum()}; "
      f"near a tie in the base: {tie_lost:.2f} of them, {tie_all:.2f} of all items")

# %% [markdown]
# ## Forgetting across the seeds: a registered measurement and a registered fix
#
# The one-seed measurement above suggests the held-out items EIT loses are mostly ones the base barely got
# right. This round measures that on every seed, arm and `β` of the sweep, with the reading registered before
# the runs (`ei.FORGETTING_READING`, `ei.forgetting_shift`): on the held-out no-cue items, the items the base
# gets right and the arm wrong (**lost**) and the reverse (**gained**); an item is *near a tie* when the base's
# two likeliest answers are within `tie = 0.1` in probability; the lost items **cluster near ties** at a seed when
# their near-tie share is at least twice that of all items. If they do, the "forgetting" is mostly small moves
# that tip items the base was unsure of, and the mean change of p(truth) away from the ties says whether
# anything else moved.
#
# And one **fix**, registered with the measurement and before either ran (`ei.ANCHOR`): the two balanced arms
# at `β = 1.0` with an anchor, ten times the KL to the base judge on sixteen extra uncued prompts per step from
# the *training* subjects (the held-out subjects stay unseen, prompts and labels). The reason to expect it to
# help: it holds the judge's answers where no cue is shown, which resisting a cue does not need.
# `no_forgetting_heldout_anchor` reads it with `no_forgetting_heldout`'s bar, and the table says what it costs
# the reward comparison. Ten seeds, `anchor_fix.json`.

# %%
FG = ei.FORGETTING_READING
fg_rows = {}
runs = [(f"β = {b:g}", r) for b, r in SWEEP.items()] + [("β = 1, anchor", ANCH)]
for name, r in runs:
    for a, per in r["arms"].items():
        f = pd.DataFrame([v["forgetting"] for v in per.values()])
        fg_rows[name, a] = {
            "held-out no cue − base": f["net"].mean(), "lost": f["lost"].mean(),
            "gained": f["gained"].mean(), "near tie: lost": f["near_tie_lost"].mean(),
            "near tie: gained": f["near_tie_gained"].mean(),
            "near tie: all": f["near_tie_all"].mean(),
            "seeds lost cluster": int(f["clusters"].sum()),
            "Δp(truth) near tie": f["shift_near_tie"].mean(),
            "Δp(truth) away": f["shift_away"].mean()}
fg_table = pd.DataFrame(fg_rows).T
fg_table.index.names = ["run", "arm"]
display(fg_table.round(3).rename_axis(
    index=["run", f"arm (mean of {len(ANCH['seeds'])} seeds)"]))
anch_e = ANCH["eit_vs_accuracy_reward"]
anch_fg = rec_diff(ANCH, "EIT", "base", HO_NONE)
anch_acc_fg = rec_diff(ANCH, "RL acc, balanced", "base", HO_NONE)
anch_adv = rec_diff(ANCH, "EIT", "base", ADV)
anch_base_ho = [ANCH["base_acc"][str(v["base"])][ck(HO_NONE)]
                for v in ANCH["arms"]["EIT"].values()]
# review: the same differences unrounded (the rounding in rec_diff was added after seed
# 2's value had been seen; an item count of 40 of 2000 reads -0.020000000000000018)
anch_fg_raw = [v["acc"][ck(HO_NONE)] - ANCH["base_acc"][str(v["base"])][ck(HO_NONE)]
               for v in ANCH["arms"]["EIT"].values()]
anch_on_bar = [s for s, x in zip(ANCH["seeds"], anch_fg) if x == -0.02]
# review: the anchor run is the registered recipe (ei.arms_config + ei.ANCHOR)
rec.check("anchor_is_the_registered_recipe", int(
    ANCH["config"] != checkpoints.normalize(
        ei.arms_config(ANCH["seeds"]) | {"arms": list(ei.ANCHOR["arms"])}
        | {k: ei.ANCHOR[k] for k in ("beta", "n_anchor", "beta_anchor",
                                     "anchor_subjects")})), 0,
          note="anchor_fix.json's config against ei.arms_config with ei.ANCHOR's "
          "arms, β and anchor (added at review)")
FGB = fg_table.loc[(f"β = {ei.BETA:g}", "EIT")]  # the registered β's EIT runs
# the anchor against the same seeds without it (same batches, sampler and base)
anch_gain = rec_iv(ANCH, [x - y for x, y in zip(
    anch_fg, rec_diff(SWEEP[ei.BETA], "EIT", "base", HO_NONE))])
anch_iv = (anch_e["mean"], anch_e["low"], anch_e["high"])
anch_vs_acc = rec_iv(ANCH, rec_diff(ANCH, "EIT", "RL acc, balanced", HO_NONE))
print(f"anchor: EIT − accuracy reward, adversarial {iv_str(anch_iv)}; EIT − base, "
      f"adversarial mean {np.mean(anch_adv):+.3f}; held-out no cue, EIT − base "
      f"{np.mean(anch_fg):+.3f} (against the same seeds without the anchor "
      f"{iv_str(anch_gain)}), accuracy arm − base {np.mean(anch_acc_fg):+.3f}")


# %% [markdown]
# ## The claims record
#
# Numbers are accuracies on the fixed evaluation items (training subjects unless said otherwise). Arm against
# arm, a claim's number is the **lower end of the 95 % interval over the base judges** of the paired
# difference (the seeds' differences averaged per base judge, then a t-interval over the five judges):
# it holds only if the interval excludes zero. Arm against base, it is one difference per seed.
#
# **Conditions**, fixed before the claims' numbers are read: every RL arm is trained to a plateau (its sampled
# training accuracy, mean over seeds, improved by at most 5 % of its whole improvement over the last fifth of
# the run); each seed's paired difference is resolved (its standard error over the items below the bar stated
# with the condition); the two rewards can train differently at all (`rewards_differ`: the share of EIT's GRPO
# groups in which the EIT and the accuracy advantages differ reaches the bar set in the data script's config
# before any RL run of this setting, above the first attempt's share; a condition on the *room* the rewards
# have to differ, not on the design's power, which the interval's width says); the base judges follow
# some misleading cues and not all (over all items) and solve the task without a cue (on the items shown in
# full), recorded above with the bars registered in the base's config before it was trained.
#
# The two aligned-cue claims (`aligned_preserved`, `shortcut_of_adversarial_only`) read the aligned bandwagon
# items **shown in full**, a reading registered in code (`ei.CLAIM_READINGS`) before this round's arms were
# trained. On the items with hidden digits the truth is not in the prompt: a judge whose answer does not depend
# on the cue scores there at most what the best cue-ignoring judge scores (`ei.ideal_accuracy`: the likeliest
# best option given the digits shown), and the base's aligned accuracy includes what following a right cue
# adds. In the round before, the claims read all items; a review, **after those runs had been read**, added
# the conditions below on all items and found them failed (the ceiling sat a tenth or more below the base at every seed), so both
# claims were inconclusive. Now the conditions read the same quantity on the items shown in full, where the
# ceiling is every item: `aligned_attainable` (the base exceeds the ceiling by at most `aligned_preserved`'s
# tolerance) and `shortcut_distinguishable` (by less than the shortcut claim's bar; else every judge that
# ignores the cue "loses aligned accuracy", shortcut or not). The all-items numbers are still shown in the text.
# On these items the ceiling is 1 (`ei.ideal_accuracy` of an item shown in full is the truth), and no accuracy
# exceeds 1, so **both conditions are met by how the items were chosen: they cannot fail** and record only
# that the ceiling does not bind there (a note added at review). What can fail is the claims themselves: EIT
# (or the adversarial-only arm) against the base on the same items.


# %%
def plateau_of(arm):  # the seed-mean sampled-accuracy curve, one value
    curve = np.mean([logs[arm, s]["accuracy"].to_numpy() for s in SEEDS], axis=0)
    return train.plateau(curve, higher_is_better=True)


for k, a in {"plateau_eit": "EIT", "plateau_acc_balanced": "RL acc, balanced",
             "plateau_adv_only": "RL acc, adversarial-only"}.items():
    cond[k] = rec.condition(k, plateau_of(a), "<=", 0.05,
                            statement=f"the {a} arm is trained to a plateau",
                            unit="sampled-accuracy gain over the last fifth / whole "
                            "gain, mean curve of the seeds")
cond["plateau_eit_anchor"] = rec.condition(  # the fix's EIT runs, from their record
    "plateau_eit_anchor", train.plateau(np.array(ANCH["curves"]["EIT"]),
                                        higher_is_better=True), "<=", 0.05,
    statement="the anchored EIT arm (the forgetting fix) is trained to a plateau",
    unit="sampled-accuracy gain over the last fifth / whole gain, mean curve of the "
    "seeds (anchor_fix.json)")
se_pair = []
for s in SEEDS:
    d = right("EIT", s, CELLS["adversarial"]).astype(float)
    d -= right("RL acc, balanced", s, CELLS["adversarial"])
    se_pair.append(float(d.std(ddof=1) / np.sqrt(len(d))))
cond["resolves_pair"] = rec.condition(
    "resolves_pair", se_pair, "<", 0.015,
    statement="each seed's paired EIT − accuracy difference is resolved",
    unit=f"standard error of the paired difference ({eval_n} adversarial items)")
RD_BAR = ei.arms_config(SEEDS)["rewards_differ_bar"]  # fixed before any RL run
cond["rewards_differ"] = rec.condition(
    "rewards_differ",
    [round(float(logs["EIT", s]["rewards_differ"].mean()), 4) for s in SEEDS], ">=",
    RD_BAR, statement="the EIT and the accuracy reward can train differently: their "
    "GRPO advantages differ in a share of EIT's groups",
    unit="share of GRPO groups whose EIT and accuracy advantages differ, mean over "
    "the EIT run's steps (bar set in ei.arms_config before any RL run)")
# The aligned-cue claims' conditions, registered before this round's runs
# (ei.CLAIM_READINGS): on the aligned items shown in full, where the truth is in the
# prompt, how much of the base's aligned accuracy the best cue-ignoring judge reaches.
AL_CELL = (TR, "bandwagon", "aligned")
AL_ITEMS = ei.subset(eval_sets[AL_CELL], ei.shown_in_full(eval_sets[AL_CELL]))
IDEAL_SHOWN = ei.ideal_accuracy(AL_ITEMS, rng=repro.rng(seed, 61))
RD_AL = ei.CLAIM_READINGS["aligned_preserved"]
RD_SC = ei.CLAIM_READINGS["shortcut_of_adversarial_only"]
assert RD_AL["cell"] == RD_SC["cell"] == AL_CELL
lift_shown = [round(shown_acc(answers["base", s], AL_CELL) - IDEAL_SHOWN, 4)
              for s in SEEDS]
UNIT = ("base aligned bandwagon accuracy − the best cue-ignoring judge's "
        "(ei.ideal_accuracy), aligned items shown in full")
cond["aligned_attainable"] = rec.condition(
    "aligned_attainable", lift_shown, "<=", RD_AL["attainable"], unit=UNIT,
    statement="a judge that ignores the cue can keep the seed's base aligned accuracy "
    "on the items shown in full (within aligned_preserved's tolerance); met by "
    "construction there: the ceiling is 1 (noted at review)")
cond["shortcut_distinguishable"] = rec.condition(
    "shortcut_distinguishable", lift_shown, "<", RD_SC["distinguishable"], unit=UNIT,
    statement="a judge that merely ignores the cue does not already lose the aligned "
    "accuracy shortcut_of_adversarial_only asks for (items shown in full); met by "
    "construction there: the ceiling is 1 (noted at review)")
# the round before's reading (all items) and its conditions added at review: text only
IDEAL_AL = ei.ideal_accuracy(eval_sets[AL_CELL], rng=repro.rng(seed, 60))
lift_left = [round(acc(ev_bases[BASE_OF[s]], "aligned") - IDEAL_AL, 4) for s in SEEDS]


# %% tags=["hide-input"]
def fmt(xs, f="+.3f"):
    return "/".join(f"{x:{f}}" for x in xs)


def diff(a, b):
    return [round(x - y, 4) for x, y in zip(a, b)]


def iv_txt(name, k=1):  # k = 1: over the base judges; 2: the seeds as independent
    m, lo, hi = cmp[name][k]
    return f"{m:+.3f} [{lo:+.3f}, {hi:+.3f}]"


def new_adv(arm):  # adversarial accuracy over the three new families, per seed
    return [float(right(arm, s, NEW).mean()) for s in SEEDS]


base_adv, base_al = per_seed("base", "adversarial"), per_seed("base", "aligned")
eit_adv, eit_al = per_seed("EIT", "adversarial"), per_seed("EIT", "aligned")
acc_adv = per_seed("RL acc, balanced", "adversarial")
adv_al = per_seed("RL acc, adversarial-only", "aligned")
# the registered reading of the aligned-cue claims: items shown in full
# (ei.CLAIM_READINGS)
base_al_s, eit_al_s, adv_al_s = ([shown_acc(answers[a, s], AL_CELL) for s in SEEDS]
                                 for a in ("base", "EIT", "RL acc, adversarial-only"))
ho_none = {a: per_seed(a, "none", split=HO) for a in ARM_ORDER}
ho_adv_base = per_seed("base", "adversarial", split=HO)
NOTES = {
    "eit_vs_accuracy_reward": "per seed, EIT − accuracy reward (95 % item-bootstrap "
    "intervals): " + "; ".join(f"{d:+.3f} [{lo:+.3f}, {hi:+.3f}]"
                                for d, lo, hi in cmp["adversarial"][0])
    + f"; mean {iv_txt('adversarial')} over the base judges, "
    f"{iv_txt('adversarial', 2)} with the seeds as independent. EIT "
    f"{fmt(eit_adv, '.3f')}, accuracy "
    f"reward {fmt(acc_adv, '.3f')}. Aligned: {iv_txt('aligned')}; no cue: "
    f"{iv_txt('no cue')}. KL weight β = {beta:g} (the forgetting rule); the round "
    f"before, β = {THIRD['beta']:g}, otherwise the same setting: {t_cmp['mean']:+.3f} "
    f"[{t_cmp['low']:+.3f}, {t_cmp['high']:+.3f}] ({t_cmp['verdict']}). The registered "
    "β sweep (make_sweep.py, ten seeds per β): "
    + "; ".join(f"β = {b:g} {iv_str(sweep_iv(r))}"
                for b, r in SWEEP.items())
    + f": held at {N_SWEEP_HELD} of {len(SWEEP)} β values. Base, adversarial "
    f"{fmt(base_adv, '.3f')}; EIT − base {fmt(diff(eit_adv, base_adv))} (the paper's "
    "+13.2 % is against the untrained model; here the accuracy reward gains "
    f"{np.mean(diff(acc_adv, base_adv)):+.3f} on average, so the gain over the base is "
    "mostly RL on balanced data, not this claim); SFT-debias "
    f"{fmt(per_seed('SFT-debias', 'adversarial'), '.3f')} (aligned "
    f"{fmt(per_seed('SFT-debias', 'aligned'), '.3f')})",
    "aligned_preserved": "aligned, items shown in full: base "
    f"{fmt(base_al_s, '.3f')} → EIT {fmt(eit_al_s, '.3f')} (best cue-ignoring judge "
    f"{IDEAL_SHOWN:.3f}); all items (the round before's reading): "
    f"{fmt(base_al, '.3f')} → {fmt(eit_al, '.3f')} (ceiling {IDEAL_AL:.3f}); no cue "
    f"{fmt(per_seed('base', 'none'), '.3f')} → {fmt(per_seed('EIT', 'none'), '.3f')}",
    "ood_transfer_new_families": "per seed, EIT − accuracy reward over the "
    "adversarial cells of digits, expert and order: "
    + fmt([d for d, _, _ in cmp["new families adversarial"][0]])
    + f"; mean {iv_txt('new families adversarial')} over the base judges, "
    f"{iv_txt('new families adversarial', 2)} with the seeds as independent"
    + f"; EIT − base {fmt(diff(new_adv('EIT'), new_adv('base')))}; accuracy "
    "reward − base "
    f"{fmt(diff(new_adv('RL acc, balanced'), new_adv('base')))}",
    "no_forgetting_heldout": "no cue, held-out subjects: base "
    f"{fmt(ho_none['base'], '.3f')}"
    f" → EIT {fmt(ho_none['EIT'], '.3f')}; accuracy-reward arm − base "
    f"{fmt(diff(ho_none['RL acc, balanced'], ho_none['base']))}",
    "ood_subject_transfer": "adversarial bandwagon, held-out subjects, per seed EIT "
    "− "
    "accuracy reward: " + fmt([d for d, _, _ in cmp["held-out adversarial"][0]])
    + f"; mean {iv_txt('held-out adversarial')} over the base judges. Against the "
    "base (the round before's reading, which both arms meet): EIT "
    f"{fmt(diff(per_seed('EIT', 'adversarial', split=HO), ho_adv_base))}"
    ". Recast as EIT − accuracy at round 5, after the round before's text had shown "
    "this interval, so its verdict is not a pre-registered result; and it reads the "
    "same trained arms as eit_vs_accuracy_reward on other items, not independent "
    "evidence of the reward's effect (noted at review)",
    "no_forgetting_heldout_anchor": "held-out no cue, anchored EIT − base per seed "
    f"{fmt(anch_fg)}; anchored accuracy arm − base {fmt(anch_acc_fg)}; the anchored "
    "arms' EIT − accuracy on adversarial bandwagon "
    f"{iv_str(anch_iv)} over the base judges; "
    f"anchored EIT − base, adversarial {fmt(anch_adv)}. Registered (ei.ANCHOR) "
    "before its run. Per-seed differences rounded to 4 decimals, a rounding added "
    "after a value of exactly −0.02 in items (read −0.020000000000000018 in floating "
    "point) had been seen; unrounded "
    f"{sum(x >= -0.02 for x in anch_fg_raw)} of {len(anch_fg_raw)} seeds meet the bar "
    "(noted at review)",
    "shortcut_of_adversarial_only": "aligned, items shown in full: adversarial-only "
    f"arm {fmt(adv_al_s, '.3f')}, EIT {fmt(eit_al_s, '.3f')}; all items: adversarial-"
    f"only arm − base {fmt(diff(adv_al, base_al))}, EIT − adversarial-only arm "
    f"{fmt(diff(eit_al, adv_al))} (the same effect read against EIT: it was the claim "
    "balanced_beats_adversarial_only until round 5, which counted it twice)",
}


def record(rows):
    for cid, statement, paper, measured, op, target, unit, baseline, given in rows:
        rec.claim(cid, statement, paper=paper, measured=measured, op=op, target=target,
                  unit=unit, baseline=baseline, note=NOTES.get(cid, ""), given=given)


# %%
RL2 = ("plateau_eit", "plateau_acc_balanced", "base_partly_follows")
E = ("plateau_eit", "base_partly_follows")
record([  # id, statement, paper, measured, op, target, unit, baseline, given
    ("eit_vs_accuracy_reward", "On the same balanced data, the EIT reward beats the "
     "plain accuracy reward under adversarial cues (both under GRPO)",
     "the reward, not only the data, makes the cue non-predictive",
     round(cmp["adversarial"][1][1], 4), ">", 0.0,
     "adversarial bandwagon accuracy, EIT − accuracy reward: lower end of the 95 % "
     "interval over the base judges", acc_adv,
     (*RL2, "resolves_pair", "rewards_differ")),
    ("ood_transfer_new_families", "Trained on bandwagon only, EIT resists cue families "
     "that share no token or position with it better than the accuracy reward does",
     "generalizes to unseen bias types (+39.1 % on distraction reported)",
     round(cmp["new families adversarial"][1][1], 4), ">", 0.0,
     "adversarial accuracy over digits, expert, order, EIT − accuracy reward: "
     "lower end of the 95 % interval over the base judges", new_adv("RL acc, balanced"),
     (*RL2, "rewards_differ")),
    ("aligned_preserved", "EIT keeps accuracy when the cue is right", "preserved",
     diff(eit_al_s, base_al_s), RD_AL["op"], RD_AL["target"],
     "accuracy, EIT − base (aligned cue, items shown in full)", base_al_s,
     (*E, "base_competent", "aligned_attainable")),
    ("no_forgetting_heldout", "EIT does not lose no-cue accuracy on subjects it was "
     "not trained on", "generalizes to held-out MMLU-Pro subjects",
     diff(ho_none["EIT"], ho_none["base"]), ">=", -0.02,
     "no-cue accuracy, EIT − base, held-out subjects", ho_none["base"],
     (*E, "base_competent")),
    ("no_forgetting_heldout_anchor", "With the registered anchor (KL to the base on "
     "uncued training-subject prompts), EIT does not lose no-cue accuracy on held-out "
     "subjects", "generalizes to held-out MMLU-Pro subjects", anch_fg, ">=", -0.02,
     "no-cue accuracy, anchored EIT − base, held-out subjects (anchor_fix.json)",
     anch_base_ho, ("plateau_eit_anchor",)),
    ("ood_subject_transfer", "On held-out subjects, the EIT reward beats the accuracy "
     "reward under adversarial cues (same balanced data)",
     "generalizes to held-out MMLU-Pro subjects",
     round(cmp["held-out adversarial"][1][1], 4), ">", 0.0,
     "adversarial bandwagon accuracy on held-out subjects, EIT − accuracy reward: "
     "lower end of the 95 % interval over the base judges",
     per_seed("RL acc, balanced", "adversarial", split=HO), (*RL2, "rewards_differ")),
    ("shortcut_of_adversarial_only", "RL on adversarial-only cues learns to contradict "
     "the cue and loses aligned-cue accuracy", "the motivation for balanced data",
     diff(adv_al_s, base_al_s), RD_SC["op"], RD_SC["target"],
     "aligned accuracy, adversarial-only arm − base, items shown in full", base_al_s,
     ("plateau_adv_only", "shortcut_distinguishable")),
])
rec.save()

# %% [markdown]
# :::{note}
# **The paper's scale comparison is a note here, not a claim.** The paper reports that EIT-trained Qwen3-4B
# resists bias better than untrained Qwen3-8B and 14B. This chapter does not test it: a larger judge pre-trained
# by our annotator follows cues exactly as it was taught, so the comparison would measure our pre-training data,
# not how bias resistance scales with model size (an earlier version of this chapter "held" it by that
# construction).
# :::
#
# ## What the runs say, and what they cannot
#
# Generated from this run's record and tables (no number here is typed by hand); read it with the claims above
# and the per-seed tables.

# %% tags=["remove-input"]
VERD = {c.id: c.verdict for c in rec.claims}
CONDV = {c.id: c.verdict for c in rec.conditions}
mean = np.mean


def span(xs, f=".2f"):
    lo, hi = f"{min(xs):{f}}", f"{max(xs):{f}}"
    return lo if lo == hi else f"{lo}–{hi}"


def says(cid, xs):
    return f"`{cid}` is {xs} ({VERD[cid]})"


def forget_reading(d, tol):  # what the one-seed diagnostic says, in words
    base_d, out = d.iloc[0], []
    for name, v in d.iloc[1:].items():
        verdict = ("reduces the loss" if v > base_d + tol else
                   "makes it worse" if v < base_d - tol else "leaves it as it is")
        out.append(f"{name} {verdict}")
    kl_note = (" (the KL penalty is measured on the training batch, whose items all "
               "come from the training subjects)" if "β" in out[0] and
               "as it is" in out[0] else "")
    return (f"Against the seed-to-seed spread of the trained arm (SD {tol:.3f} over "
            f"{len(SEEDS)} seeds): " + "; ".join(out) + kl_note + ".")


def diag_tradeoff():  # the diagnostic variants on the aligned and adversarial cells
    return "; ".join(
        f"{k}: aligned {r['aligned bandwagon']:+.3f}, adversarial "
        f"{r['adversarial bandwagon']:+.3f}" for k, r in diag.iterrows())


m_adv, lo_adv, hi_adv = cmp["adversarial"][1]
n_pos = sum(lo > 0 for _, lo, _ in cmp["adversarial"][0])
n_neg = sum(hi < 0 for _, _, hi in cmp["adversarial"][0])
TRIO = ("base", "RL acc, balanced", "EIT")
share = {a: mean(paired[f"wrong answers on the cue, {a}"]) for a in TRIO}
fol = {a: mean(paired[f"follows the cue, hidden digits, {a}"]) for a in TRIO}
sh_m, sh_lo, sh_hi = ei.cluster_interval(  # EIT − accuracy reward, paired by seed
    paired["wrong answers on the cue, EIT"]
    - paired["wrong answers on the cue, RL acc, balanced"], paired["base judge"])
rd = next(c for c in rec.conditions if c.id == "rewards_differ")
d_adv = pd.Series([x[0] for x in cmp["adversarial"][0]], index=SEEDS)
by_judge = d_adv.groupby([BASE_OF[s] for s in SEEDS])
within_sd = float(np.sqrt((d_adv - by_judge.transform("mean")).pow(2).sum()
                          / (len(SEEDS) - by_judge.ngroups)))  # pooled, within a judge
between_sd = float(by_judge.mean().std(ddof=1))
# EIT − accuracy on the balanced mix of the training data: aligned / 3 + adversarial · 2/3
net_m, net_lo, net_hi = ei.cluster_interval(
    [(x[0] + 2 * y[0]) / 3 for x, y in zip(cmp["aligned"][0], cmp["adversarial"][0])],
    [BASE_OF[s] for s in SEEDS])
n_b = len(set(BASE_OF.values()))


def mix_acc(arm, s, fams):  # balanced mix: aligned / 3 + adversarial · 2/3, per family
    return float(np.mean([(acc(evals[arm, s], "aligned", f)
                           + 2 * acc(evals[arm, s], "adversarial", f)) / 3
                          for f in fams]))


sft_mix_new, sft_mix_bw = (ei.cluster_interval(
    [mix_acc("SFT-debias", s, fams) - mix_acc("EIT", s, fams) for s in SEEDS],
    [BASE_OF[s] for s in SEEDS]) for fams in (ei.NEW_FAMILIES, ("bandwagon",)))
anti_sig, eit_sig = ([acc(evals[a, s], "aligned") - acc(evals[a, s], "none")
                      for s in SEEDS] for a in ("RL acc, adversarial-only", "EIT"))


PRIOR = (EARLIER["eit_vs_accuracy_reward"], s_cmp, t_cmp)  # earlier settings' records
n_cmp_held = (sum(c["verdict"] == "held" for c in PRIOR)
              + (VERD["eit_vs_accuracy_reward"] == "held"))


def at_bar(cid):  # seeds whose value meets a claim's bar (as its verdict reads them)
    c = next(c for c in rec.claims if c.id == cid)
    return f"{sum(c.holds_per_seed)} of {len(c.holds_per_seed)}"


def excl(name):  # does the interval over the base judges exclude zero, and how
    _, lo, hi = cmp[name][1]
    return "above zero" if lo > 0 else "below zero" if hi < 0 else "includes zero"


fg_eit = {b: fg_table.loc[(f"β = {b:g}", "EIT"), "held-out no cue − base"]
          for b in SWEEP}
review_per_seed = REVIEW_B["eit_vs_accuracy_reward"]["per_seed"]
REV_GAP = max(abs(x - y) for x, y in zip(
    SWEEP[REVIEW_B["beta"]]["eit_vs_accuracy_reward"]["per_seed"], review_per_seed))


txt = [
    f"The base judges ({len(bases)}): adversarial bandwagon accuracy over all items "
    f"{fmt(base_adv_all, '.3f')} (band [{lo_b:g}, {hi_b:g}], registered before "
    "training: "
    f"`base_partly_follows` {CONDV['base_partly_follows']}); on the items shown in "
    f"full, no-cue accuracy {fmt(base_none, '.3f')} (`base_competent` "
    f"{CONDV['base_competent']}) and adversarial accuracy {fmt(base_adv0, '.3f')}; "
    "on the items with hidden digits they answer with a "
    f"wrong bandwagon cue's option {fol['base']:.2f} of the time (mean of seeds). "
    f"Expected share of GRPO groups of {G} holding both wrong options under a wrong "
    f"cue: {fmt(mixed.values(), '.2f')}. In this run ({len(SEEDS)} RL seeds, {eval_n} "
    "items per cell, learning rate "
    f"{rl_lr:g}, {rl_steps} steps):",
    "",
    "* **Could the two rewards train differently?** The share of EIT's GRPO groups in "
    "which the EIT and the accuracy advantages differ, mean over each run: "
    f"{fmt(rd.measured if isinstance(rd.measured, list) else [rd.measured], '.3f')} "
    f"(bar {RD_BAR:g}, set before any RL run: `rewards_differ` {rd.verdict}); "
    f"{differ.loc['EIT', 'first tenth']:.3f} of the groups over the first tenth of "
    f"training, {differ.loc['EIT', 'last tenth']:.3f} over the last (the first "
    f"attempt: {EARLIER['rewards_differ_seed0']:.3f} on its seed 0; the second: "
    f"{span(SECOND['rewards_differ']['measured'], '.3f')})"
    + (". Most of that room comes early: as both rewards teach the judge to resist "
       "the cue, also where it cannot see every digit, the groups that hold both "
       "wrong options thin out, and by the end the two arms train nearly alike."
       if differ.loc["EIT", "last tenth"] < RD_BAR else ".")
    + " The condition says the rewards had room to differ, not that the design could "
    "see a difference if one arose: that is the interval's width, "
    f"±{(hi_adv - lo_adv) / 2:.3f} over the base judges.",
    "* **The EIT reward against the accuracy reward, same balanced data, GRPO.** "
    f"Adversarial bandwagon accuracy, EIT − accuracy reward, mean {m_adv:+.3f}, 95 % "
    f"interval over the {n_b} base judges [{lo_adv:+.3f}, {hi_adv:+.3f}]: "
    + says("eit_vs_accuracy_reward", f"{lo_adv:+.3f}")
    + f". With the {len(SEEDS)} seeds taken as independent (they are not: they share "
    f"the base judges): {iv_txt('adversarial', 2)}. {n_pos} of {len(SEEDS)} seeds' own "
    f"item intervals lie above zero and {n_neg} below"
    + (": not held here means not resolved, an effect anywhere from "
       f"{lo_adv:+.3f} to {hi_adv:+.3f} fits the runs" if lo_adv <= 0 < hi_adv else "")
    + ". Split by what the judge sees (exploratory, not fixed before the runs and "
    "not a claim): "
    f"items with hidden digits {iv_txt('adversarial, hidden digits')} "
    f"({excl('adversarial, hidden digits')}), items shown in full "
    f"{iv_txt('adversarial, shown in full')} ({excl('adversarial, shown in full')}). "
    "On the items with hidden digits, where a cue right one time in three leaves the "
    "accuracy reward neutral and the EIT reward pays avoiding it, the judges answer "
    "with the wrong cue's "
    f"option: base {fol['base']:.2f}, accuracy reward {fol['RL acc, balanced']:.2f}, "
    f"EIT {fol['EIT']:.2f}. Of all wrong answers under an adversarial cue, the share "
    f"on the cue's option: base {share['base']:.2f}, accuracy reward "
    f"{share['RL acc, balanced']:.2f}, EIT {share['EIT']:.2f} (EIT − accuracy "
    f"{sh_m:+.3f} [{sh_lo:+.3f}, {sh_hi:+.3f}] over the base judges). The price: "
    f"aligned {iv_txt('aligned')}, no cue {iv_txt('no cue')}, held-out adversarial "
    f"{iv_txt('held-out adversarial')}; on the balanced mix itself (one cue in three "
    f"right) {net_m:+.3f} [{net_lo:+.3f}, {net_hi:+.3f}], "
    + ("a net gain on the mix" if net_lo > 0 else "a net loss on the mix"
       if net_hi < 0 else "no net difference resolved on the mix")
    + ". The first attempt, where the two rewards "
    f"could hardly differ: {EARLIER['eit_vs_accuracy_reward']['mean']:+.3f} "
    f"[{EARLIER['eit_vs_accuracy_reward']['low']:+.3f}, "
    f"{EARLIER['eit_vs_accuracy_reward']['high']:+.3f}] "
    f"({EARLIER['eit_vs_accuracy_reward']['verdict']}); the second, with an "
    f"informative cue: {s_cmp['mean']:+.3f} [{s_cmp['low']:+.3f}, "
    f"{s_cmp['high']:+.3f}] ({s_cmp['verdict']}); the round before, on this setting "
    f"with β = {THIRD['beta']:g}: {t_cmp['mean']:+.3f} [{t_cmp['low']:+.3f}, "
    f"{t_cmp['high']:+.3f}] ({t_cmp['verdict']}). This round differs from that one "
    f"only in β, the forgetting rule (β = {beta:g}), chosen for forgetting and not for "
    "this comparison; its EIT runs' share of groups where the two rewards differ was "
    f"{span(THIRD['rewards_differ']['measured'], '.3f')}, this round's "
    f"{span(rd.measured if isinstance(rd.measured, list) else [rd.measured], '.3f')}. "
    f"Of the {len(PRIOR) + 1} settings this comparison has been run in, it holds in "
    f"{n_cmp_held}. **The registered β sweep** (this round, ten seeds per β, every RL "
    "arm, registered before its runs): "
    + "; ".join(f"β = {b:g} {iv_str(sweep_iv(r))}"
                f" ({'held' if r['eit_vs_accuracy_reward']['held'] else 'not held'})"
                for b, r in SWEEP.items())
    + f": held at {N_SWEEP_HELD} of {len(SWEEP)} β values"
    + (", at every one" if N_SWEEP_HELD == len(SWEEP) else
       f", only at the registered β = {ei.BETA:g}: the headline is a result at that KL "
       "weight and not a property of the reward at any weight"
       if N_SWEEP_HELD == 1 and SWEEP[ei.BETA]["eit_vs_accuracy_reward"]["held"]
       else "")
    + f". The β = {ei.BETA:g} run repeats the stored arms "
    + ("item for item" if SWEEP[ei.BETA]["stored_answers_mismatched"] == 0
       else f"except on {SWEEP[ei.BETA]['stored_answers_mismatched']} answers")
    + f"; the β = {REVIEW_B['beta']:g} run repeats the round before's exploratory "
    "review run (`review_beta_0.2.json`, same recipe): "
    + ("the same per-seed differences" if REV_GAP == 0 else
       f"per-seed differences within {REV_GAP:.4f} of it")
    + ". Why a stronger KL penalty changes the comparison is not tested here. "
    "With two options the comparison is void by construction "
    "(`eit_equals_accuracy_two_options`).",
    "* **Against the base.** Under an adversarial bandwagon cue EIT gains "
    f"{fmt(diff(eit_adv, base_adv))} over the base (mean "
    f"{mean(diff(eit_adv, base_adv)):+.3f}); the accuracy reward on the same balanced "
    f"data gains {mean(diff(acc_adv, base_adv)):+.3f}: that gain is RL on balanced "
    "data, "
    "which both arms share, so it is reported, not claimed (it was `adv_accuracy_gain` "
    "until round 5); the part due to EIT's reward is `eit_vs_accuracy_reward` above"
    + "; " + says("aligned_preserved", fmt(diff(eit_al_s, base_al_s)))
    + " on the aligned items shown in full (the reading registered before this "
    f"round's runs; {at_bar('aligned_preserved')} seeds at the bar "
    f"{RD_AL['target']:+g}; `aligned_attainable` {CONDV['aligned_attainable']}: the "
    f"best cue-ignoring judge scores {IDEAL_SHOWN:.3f} there, the base judges "
    f"{span(base_al_s, '.3f')}"
    + (", so this condition and `shortcut_distinguishable` are met by construction "
       "on these items and cannot fail" if IDEAL_SHOWN == 1.0 else "")
    + f"). On all aligned items (the round before's reading, "
    f"exploratory now) EIT − base is {fmt(diff(eit_al, base_al))}"
    + f". The base's aligned accuracy ({mean(base_al):.3f}) is its no-cue accuracy "
    f"({mean_acc('base', 'none'):.3f}) plus what following a right cue adds; EIT keeps "
    f"{mean(eit_al) - mean_acc('EIT', 'none'):+.3f} of that lift (the base "
    f"{mean(base_al) - mean_acc('base', 'none'):+.3f}), and its no-cue accuracy on the "
    f"training subjects moves {mean_acc('EIT', 'none') - mean_acc('base', 'none'):+.3f}"
    " (the accuracy reward's "
    f"{mean_acc('RL acc, balanced', 'none') - mean_acc('base', 'none'):+.3f}): "
    + ("most of the aligned loss is the cue's lift given back, which a judge for "
       "which the cue is non-predictive of reward gives back by design, not lost "
       "task skill"
       if abs(mean_acc('EIT', 'none') - mean_acc('base', 'none'))
       < abs(mean(eit_al) - mean_acc('EIT', 'none')
             - mean(base_al) + mean_acc('base', 'none'))
       else "most of the aligned loss is lost task skill")
    + f". On all items a judge that ignores the cue can expect at most {IDEAL_AL:.3f} "
    f"(`ei.ideal_accuracy`: the truth is not in the prompt where digits are hidden), "
    f"{mean(base_al) - IDEAL_AL:+.3f} below the base: "
    + ("no such judge could keep the base's accuracy on all items, which is why the "
       "review's conditions (added after the round before's runs had been read) made "
       "the all-items reading inconclusive" if min(lift_left) > 0.02
       else "within reach of a judge that ignores the cue")
    + f" (the one-seed diagnostic, EIT − base at seed {seed}: {diag_tradeoff()})"
    + "; on held-out subjects under an adversarial cue, EIT − accuracy reward "
    f"{iv_txt('held-out adversarial')} over the base judges: `ood_subject_transfer` "
    f"is {cmp['held-out adversarial'][1][1]:+.3f} ({VERD['ood_subject_transfer']}; "
    "recast at round 5 from EIT − base, which both arms meet, after the round "
    "before's text had shown this interval, so read its verdict as exploratory; it "
    "reads the same trained arms as `eit_vs_accuracy_reward`, on other items; in the "
    "sweep "
    + ", ".join(f"β = {b:g} {sweep_table.loc['EIT − acc, held-out adversarial', f'β = {b:g}']}"
                for b in SWEEP if b != ei.BETA)
    + ", so it depends on β as the headline does)"
    + ". The paper's SFT baseline: adversarial "
    f"{mean_acc('SFT-debias', 'adversarial'):.2f}, aligned "
    f"{mean_acc('SFT-debias', 'aligned'):.2f}, no cue "
    f"{mean_acc('SFT-debias', 'none'):.2f} "
    "(mean of seeds); RL on adversarial-only cues: aligned, items shown in full, "
    + says("shortcut_of_adversarial_only", fmt(diff(adv_al_s, base_al_s)))
    + f" against the base, given `shortcut_distinguishable` "
    f"{CONDV['shortcut_distinguishable']} (EIT, which does not contradict the cue: "
    f"{mean(diff(eit_al_s, base_al_s)):+.3f} on the same items). The shortcut's own "
    "signature, aligned accuracy below "
    "the judge's no-cue accuracy (a judge that contradicts the cue does worse when the "
    f"cue is right than with no cue): adversarial-only arm {span(anti_sig, '+.3f')} "
    f"over the seeds ({sum(x < -0.05 for x in anti_sig)} of {len(SEEDS)} below "
    f"−0.05), EIT {span(eit_sig, '+.3f')}.",
    f"* **Forgetting on held-out subjects** (learning rate {rl_lr:g}, a third of the "
    f"first attempt's; {n_replay} of the {rl_batch} prompts of each RL batch uncued "
    f"items; β = {beta:g}, the forgetting rule registered before this round's runs): "
    + says("no_forgetting_heldout", fmt(diff(ho_none["EIT"], ho_none["base"])))
    + f", {at_bar('no_forgetting_heldout')} seeds at the bar −0.02, mean "
    f"{mean(diff(ho_none['EIT'], ho_none['base'])):+.3f}"
    + "; the accuracy-reward arm "
    + fmt(diff(ho_none["RL acc, balanced"], ho_none["base"]))
    + f" (the first attempt: {-max(EARLIER['no_forgetting_heldout']['measured']):.2f}"
    f" to {-min(EARLIER['no_forgetting_heldout']['measured']):.2f} lost; the round "
    f"before, β = {THIRD['beta']:g}: {span_of(THIRD['no_forgetting_heldout'])}, "
    f"{THIRD['no_forgetting_heldout']['verdict']}). "
    + f"The one-seed diagnostic (seed {seed}, EIT, held-out no-cue accuracy − base): "
    + ", ".join(f"{k} {v:+.3f}" for k, v in diag["held-out, no cue"].items()) + ". "
    + forget_reading(diag["held-out, no cue"],
                     float(np.std(diff(ho_none["EIT"], ho_none["base"]), ddof=1)))
    + f" Of the held-out items the base gets right and EIT loses, {tie_lost:.2f} were "
    f"near a tie in the base (top-two probabilities within {TIE:g}), against "
    f"{tie_all:.2f} of all items (seed {seed}). **Across the sweep** (the registered "
    "measurement, ten seeds per run): held-out no-cue EIT − base, mean "
    + ", ".join(f"β = {b:g} {fg_eit[b]:+.3f}" for b in SWEEP)
    + f"; at β = {ei.BETA:g} EIT loses {FGB['lost']:.0f} and gains {FGB['gained']:.0f}"
    f" of {eval_n} items (mean of seeds), {FGB['near tie: lost']:.2f} of the lost and "
    f"{FGB['near tie: gained']:.2f} of the gained near a base tie against "
    f"{FGB['near tie: all']:.2f} of all items: the lost items cluster near ties at "
    f"{FGB['seeds lost cluster']:.0f} of {len(ANCH['seeds'])} seeds (the registered "
    "reading: twice the share of all items); "
    f"{1 - FGB['near tie: lost']:.2f} of the lost items were not near a tie. The "
    "probability EIT gives the truth, minus the base's, is "
    f"{FGB['Δp(truth) near tie']:+.3f} near ties and "
    f"{FGB['Δp(truth) away']:+.3f} away from them (mean). The reading written before "
    "the records were read (at least 8 of 10 seeds clustered and |Δp(truth) away| "
    "< 0.02; restored at review, after a rewording written once the records had been "
    "read): "
    + ("most of the loss is items the base barely had right tipping over, with little "
       "movement elsewhere. " if FGB["seeds lost cluster"] >= 8
       and abs(FGB["Δp(truth) away"]) < 0.02 else
       "the loss is not only near-tie items tipping over. ")
    + ("Away from the ties the judge gives the truth more probability on average, so "
       "the loss is not a general drift away from the truth either, but "
       f"{1 - FGB['near tie: lost']:.2f} of the lost items were ones the base "
       "answered with a margin. " if FGB["Δp(truth) away"] > 0 else
       "The judge also moves away from the truth where the base was sure. ")
    + "**The registered fix** (the anchor, `ei.ANCHOR`): "
    + says("no_forgetting_heldout_anchor", fmt(anch_fg))
    + f", {at_bar('no_forgetting_heldout_anchor')} seeds at the bar ("
    + (f"seed{'s' * (len(anch_on_bar) > 1)} {', '.join(map(str, anch_on_bar))} "
       "exactly on it: −0.02 exactly in items, which floating point had read just "
       "below; the rounding of these records' per-seed differences to 4 decimals, as "
       "diff() rounds every other one here, was added after that value had been seen; "
       f"unrounded, {sum(x >= -0.02 for x in anch_fg_raw)} of {len(anch_fg_raw)} meet "
       f"the bar, a verdict of "
       f"{claims.verdict_of(anch_fg_raw, '>=', -0.02)}" if anch_on_bar else
       "none exactly on it")
    + f"), mean {np.mean(anch_fg):+.3f}; against the same seeds without the anchor, "
    f"{iv_str(anch_gain)} over the base judges"
    + (" (the anchor helps)" if anch_gain[1] > 0 else " (the anchor hurts)"
       if anch_gain[2] < 0 else " (no change resolved)")
    + f"; the anchored accuracy arm {np.mean(anch_acc_fg):+.3f}, anchored EIT − "
    f"anchored accuracy arm {iv_str(anch_vs_acc)} over the base judges"
    + (": what the anchor does for held-out accuracy it does for both arms, so the "
       "fix, and the forgetting it reduces, is not specific to EIT"
       if anch_vs_acc[1] <= 0 <= anch_vs_acc[2] else "")
    + ". What it costs: "
    f"anchored EIT − accuracy reward, adversarial, "
    f"{iv_str(anch_iv)} "
    f"({'held' if anch_e['held'] else 'not held'} as the claim would read it), EIT − "
    f"base, adversarial, {np.mean(anch_adv):+.3f} (without the anchor "
    f"{mean(diff(eit_adv, base_adv)):+.3f}).",
    "* **Transfer to the new families** (digits, expert, order), EIT − accuracy "
    "reward: "
    f"{iv_txt('new families adversarial')} (`ood_transfer_new_families` "
    f"{VERD['ood_transfer_new_families']}; the first attempt "
    f"{EARLIER['ood_transfer_new_families']['mean']:+.3f}, the second "
    f"{SECOND['ood_transfer_new_families']['mean']:+.3f}); against the base, EIT "
    f"{mean(diff(new_adv('EIT'), new_adv('base'))):+.3f} and the accuracy reward "
    f"{mean(diff(new_adv('RL acc, balanced'), new_adv('base'))):+.3f} (mean of seeds). "
    "EIT adversarial accuracy per family, mean of seeds: "
    + ", ".join(f"{f} {mean_acc('EIT', 'adversarial', f):.2f} (base "
                f"{mean_acc('base', 'adversarial', f):.2f})" for f in ei.FAMILIES[1:])
    + " (authority and distraction share the bandwagon cue's slot and letter). "
    "The paper's SFT baseline on the same new families (exploratory, added at review, "
    "no registered reading): adversarial "
    f"{mean([mean_acc('SFT-debias', 'adversarial', f) for f in ei.NEW_FAMILIES]):.3f}, "
    "aligned "
    f"{mean([mean_acc('SFT-debias', 'aligned', f) for f in ei.NEW_FAMILIES]):.3f} "
    "(EIT "
    f"{mean([mean_acc('EIT', 'adversarial', f) for f in ei.NEW_FAMILIES]):.3f}, "
    f"{mean([mean_acc('EIT', 'aligned', f) for f in ei.NEW_FAMILIES]):.3f}); on their "
    "balanced mix (one cue in three right, where the cue carries no information), "
    f"SFT-debias − EIT {iv_str(sft_mix_new)} over the base judges, and on the "
    f"bandwagon mix {iv_str(sft_mix_bw)}"
    + (": on the families neither saw in training the SFT baseline does better than "
       "EIT here, unlike the paper's finding that SFT does not generalize"
       if sft_mix_new[1] > 0 else
       ": EIT does better than the SFT baseline on the families neither saw"
       if sft_mix_new[2] < 0 else
       ": no difference resolved on the families neither saw")
    + ".",
    "",
    f"Limits: {len(bases)} base judges for {len(SEEDS)} RL seeds (the arm-vs-arm "
    f"intervals run over the base judges, on {len(bases) - 1} degrees of freedom; "
    f"`eit_vs_accuracy_reward`'s half-width ±{(hi_adv - lo_adv) / 2:.3f}: the RL "
    "seeds of one base judge differ from their judge's mean by "
    f"{within_sd:.3f} (SD), the judges' means spread by {between_sd:.3f}, "
    + ("no more than that RL noise predicts for a mean of "
       f"{len(SEEDS) // n_b} seeds, so more RL seeds per judge would narrow it as "
       "well as more judges" if between_sd <= within_sd / np.sqrt(len(SEEDS) // n_b)
       else "more than that RL noise predicts, so the judges differ and more judges "
       "would narrow it most")
    + "); "
    f"{rl_steps} RL steps; a synthetic task whose cues are single tokens and whose "
    "uncertainty is made by hiding digits; the base's sycophancy and uncertainty are "
    "set by its pre-training (an annotator rule and label smoothing "
    f"{cfg['label_smoothing']}), a stand-in for an LLM's, not a measurement of it; no "
    "judge larger than the one trained (see the note on the paper's scale comparison).",
]
display(Markdown("\n".join(txt)))
