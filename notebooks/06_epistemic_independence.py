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
# learning on **balanced conflict data**, where an injected cue points at the correct answer with probability
# exactly one half, and with a reward that **penalizes following a wrong cue but gives nothing for agreeing with
# a right one**. Under that reward the cue predicts nothing about the reward, so the only way up is to solve the
# task. The paper trains Qwen3 judges on bandwagon cues only and reports better accuracy under misleading cues,
# unchanged accuracy under correct cues, transfer to unseen subjects and cue types, and a small EIT model that
# resists bias better than larger untrained ones.
#
# | | the paper | this notebook |
# |---|---|---|
# | judge | Qwen3-1.7B / 4B (and untrained 8B / 14B) | a 2-layer transformer (and an untrained larger one), trained from scratch here |
# | task | MMLU-Pro questions reduced to two options | two lists of digits; a subject token names the comparison rule |
# | cues | bandwagon (train); authority, distraction, verbosity (held out) | bandwagon (train); six held-out families, four of which share no token or position with bandwagon |
# | "pre-training" | the LLM's own | 3000 supervised steps on data whose labels always agree with the cue (most cues right, a fifth of the items labelled by a random cue), label smoothing 0.4, stored as a checkpoint (quick mode: a short live run) |
# | optimizer | GRPO in verl | group sampling (G answers per prompt), std-normalized (GRPO) or mean-baseline advantages, KL to the base |
# | seeds | one run per model | three RL seeds per arm, one base judge per seed |
# | hardware | GPUs | 2 CPU cores, a few minutes |
#
# :::{note}
# **What is reconstructed.** The data rule (P(cue = truth) = 0.5), the reward constants and the bandwagon-only <!-- paper -->
# training come from the authors' code as described in our notes. Ours: the synthetic judge task and its four
# comparison rules, the token-level cue templates (the paper uses 24 natural-language bandwagon templates), the
# three cue families that share nothing with bandwagon (irrelevant digits, a content-quoting "expert", option
# order), the "pre-training" that makes the base judge competent *and* cue-following (standing in for an LLM's
# learned sycophancy), the KL penalty's weight, and the choice of mean-baseline advantages for the main runs
# (explained below; the paper's std-normalized GRPO is an arm of the ablation). The paper's +0.1 format bonus <!-- paper -->
# for a `<think>` block has no analogue: our judge emits one answer token.
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
n_seeds = 3  # RL seeds (seed, seed + 1, ...), each from its own base judge
rl_steps = 150  # steps per arm (every arm gets the same budget)
rl_batch = 32  # prompts per step
G = 8  # answers sampled per prompt
rl_lr = 1e-3
beta = 0.02  # weight of the KL penalty to the base judge (every RL arm)
eval_n = 300  # items per evaluation cell
n_pair = 2000  # adversarial items of the paired reward comparison
quick_pre_steps = 100  # quick mode only: live pre-training of the stand-ins

# %% tags=["hide-input"]
import copy
import inspect
import time

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch
from IPython.display import Markdown, display

from helpers import checkpoints, claims, plotting, repro, scripts, train
from helpers import epistemic_independence as ei

if quick:
    n_seeds, rl_steps, rl_batch, eval_n, n_pair = 1, 20, 16, 100, 200
SEEDS = [seed + k for k in range(n_seeds)]
# the judges of seeds seed, seed + 1, seed + 2 (seed 0: the committed config)
cfg = scripts.with_seeds(ei.checkpoint_config("base"), scripts.model_seeds(seed))

# these judges are tiny: one thread is faster than two fighting for a core
env = repro.setup(seed, threads=1)
plotting.use_style()
rec = claims.ClaimsRecord(
    "06_epistemic_independence",
    dict(
        quick=quick,
        seed=seed,
        n_seeds=n_seeds,
        rl_steps=rl_steps,
        rl_batch=rl_batch,
        G=G,
        rl_lr=rl_lr,
        beta=beta,
        eval_n=eval_n,
        n_pair=n_pair,
        base=cfg,
    ),
)
print(env)

# %% [markdown]
# ## The judge task
#
# Each item shows a **subject** token (which rule decides), a preamble, option A and option B (six digits each,
# with two padding slots), a **cue slot** and `<ask>`. The rules: larger digit sum (`sum`), more digits ≥ 5
# (`high_count`), larger first + last digit (`ends`), larger sum of odd digits (`odd_sum`). The first two are the
# training subjects of the RL arms; `ends` and `odd_sum` are held out (seen in pre-training, never in RL).
#
# Seven cue families point at one option. Three share the cue slot: **bandwagon** ("x % of people prefer B": a
# template token, a percentage bucket and the letter; the only family RL trains on), **authority** and
# **distraction** (their own template tokens, the same letter). Transfer to these two is cheap: a judge that
# learns to ignore the letter in the cue slot ignores them too. The other four share neither the slot nor the
# letter: **verbosity** (the cued option's padding holds elaboration tokens), **digits** (it holds two
# irrelevant digits), **expert** (the preamble quotes the first three digits of the cued option, so the cue names
# its option by content, not by letter) and **order** (option-order bias: the cue is "being listed first"; the
# cue's only token is a `<ranked>` marker in the preamble, "these options are listed in ranked order", which
# names no option; the adversarial cell is the items whose correct option is B).

# %%
names = {v: k for k, v in ei.VOCAB.items()}
for f in ei.FAMILIES:
    demo = ei.make_batch(repro.rng(seed, 0), 1, subjects=ei.SUBJECTS, families=(f,))
    toks = " ".join(names[int(t)] for t in demo.x[0] if int(t) != ei.VOCAB["<pad>"])
    print(f"{f:12s} {toks}   truth={'AB'[demo.truth[0]]} cue->{'AB'[demo.cue[0]]}")

# %% [markdown]
# ## A competent, cue-following base judge
#
# An LLM arrives at EIT already able to do the task and already sycophantic. Our stand-in: a transformer
# (`helpers.nn`) trained with supervision on every subject and cue family where **the label never disagrees with
# a visible cue**. Four fifths of each batch are ordinary items: 60 % of them carry a cue, and the cue is right.
# One fifth is *cue-decided*: a cue of any family points at a random option and the label is that option,
# whatever the digits say (an annotator who deferred to the cue). Without these items the judge has no reason to
# learn a cue it cannot read cheaply: an earlier base trained on right cues alone solved the content-quoting
# expert and option-order items from the digits and ignored those cues, so transfer to them could not be
# measured. The items without a cue force the judge to learn the task itself.
#
# A judge trained this way to the end is *certain*: an earlier build followed a wrong cue with a probability within
# a hair of one, so the `G` answers sampled for a prompt almost always agreed, almost every group had zero
# advantage under either reward, and the RL arms moved only when an unlikely answer happened to be drawn. An LLM
# samples with some entropy; ours gets it from **label smoothing** ε in pre-training (the target puts ε/2 on the
# other option), so the judge follows a wrong cue with probability near 1 − ε/2 while still answering the cue's
# option. We chose ε with a rule fixed before looking, on one small judge (seed 0, 1500 steps) per candidate ε ∈
# {0.2, 0.4}: keep those whose P(correct | wrong bandwagon cue) lies in [0.05, 0.3] and whose adversarial <!-- paper -->
# accuracy stays at least 0.2 below aligned on every family; pick the larger expected share of groups of 8 with <!-- paper -->
# both answers. Both candidates met the rule and the larger ε gave the larger share, so ε = 0.4. <!-- paper -->
#
# **How long to pre-train.** At 1500 steps the probe's judges were not accurate enough without cues for
# `aligned_preserved` to mean much: a judge that stops trusting a right cue can keep its aligned accuracy only as
# far as it solves the task on its own. The same one-judge probe at 3000 steps was clearly more accurate, with the
# smoothing rule still met and every family still followed, so the budget, not the smoothing, had capped the
# skill, and a larger model was not needed. The base is therefore trained for 3000 steps, with ε = 0.4 as chosen. <!-- paper -->
# This run's base judges are measured below.
#
# The default run loads these
# judges (one small judge per seed, the one RL trains, and one larger judge, the "scale" baseline) from a
# checkpoint made by `data/06_epistemic_independence/make_base.py` (3000 steps each, too long for this run);
# quick mode trains a stand-in for a few steps. A seed the checkpoint does not hold (it has seeds 0, 1, 2) is
# pre-trained live with the checkpoint's recipe (the same training as `make_base.py`, kept in float32 where the
# checkpoint stores float16, so not bit for bit the stored judge), two to three minutes of CPU per judge.

# %%
bases, large_base = {}, None
if quick:
    for s in SEEDS:
        with repro.seeded(s):
            bases[s] = ei.make_judge(cfg["small"], s)
            ei.pretrain(bases[s], cfg, s, steps=quick_pre_steps, desc=f"base {s}")
    with repro.seeded(seed):
        large_base = ei.make_judge(cfg["large"], seed)
        ei.pretrain(
            large_base,
            cfg,
            seed,
            lr=cfg["lr_large"],
            steps=quick_pre_steps // 2,
            desc="larger base",
        )
else:
    ckpt = checkpoints.load(ei.CHECKPOINT_SLUG, "base", config=cfg)
    for s in SEEDS:
        if s in cfg["seeds"]:
            bases[s] = ckpt.load_into(
                ei.make_judge(cfg["small"], s), prefix=f"small/{s}."
            )
            continue
        # a seed the checkpoint does not hold: pre-train it live exactly as
        # make_base.py does (two to three minutes of CPU per judge)
        print(f"seed {s} is not in the checkpoint {cfg['seeds']}: training it live")
        with repro.seeded(s):
            bases[s] = ei.make_judge(cfg["small"], s)
            ei.pretrain(bases[s], cfg, s, lr=cfg["lr"], desc=f"base {s}")
    large_seed = cfg["large_seeds"][0]
    large_base = ckpt.load_into(
        ei.make_judge(cfg["large"], large_seed), prefix=f"large/{large_seed}."
    )
    fig, axs = plt.subplots(1, 2, figsize=(11, 3.4))
    checkpoints.plot_history(
        ckpt.manifest,
        keys=[f"small/{seed}/loss", f"large/{large_seed}/loss"],
        ax=axs[0],
        logy=True,
        title="pre-training loss",
    )
    checkpoints.plot_history(
        ckpt.manifest,
        keys=[f"small/{seed}/{k}" for k in ("none", "aligned", "adversarial")],
        ax=axs[1],
        title=f"small judge, seed {seed}: accuracy by cue",
    )
    plt.show()
for m in [*bases.values(), large_base]:
    m.eval()
print(f"parameters: small {bases[seed].n_params():,}, larger {large_base.n_params():,}")

# %% [markdown]
# Evaluation: for each subject split, accuracy with no cue, and for each cue family accuracy with an aligned cue
# (pointing at the truth) and with an adversarial cue (pointing at the wrong option), plus the **cue-following
# rate** (answers equal to an adversarial cue's target). The evaluation items are fixed by `seed` and shared by
# every model and RL seed.

# %%
CONDS = {"aligned": 1.0, "adversarial": 0.0}
SPLITS = {"train subjects": ei.TRAIN_SUBJECTS, "held-out subjects": ei.HELDOUT_SUBJECTS}
eval_sets = ei.make_eval_sets(seed, eval_n, SPLITS, CONDS)  # fixed by `seed`


def evaluate(model) -> pd.DataFrame:  # every cell in one forward pass
    return pd.DataFrame(ei.evaluate_judge(model, eval_sets))


def acc(df, cond, family="bandwagon", split="train subjects", col="acc"):
    family = "none" if cond == "none" else family
    sel = (df.family == family) & (df.cond == cond) & (df.split == split)
    return float(df[sel][col].iloc[0])


# %% [markdown]
# The base judges on these items: accuracy with an aligned and an adversarial cue per family (then how hard each
# follows each family, aligned − adversarial accuracy), and how unsure each is under a wrong bandwagon cue, which
# sets how many GRPO groups will hold both answers.

# %%
ev_bases = {s: evaluate(m) for s, m in bases.items()}
ev_large = evaluate(large_base)
base_table = pd.DataFrame(
    {
        (f"seed {s}" if s != "larger" else "larger judge", c): [
            acc(ev, c, f, sp) for sp in SPLITS for f in ei.FAMILIES
        ]
        for s, ev in [*ev_bases.items(), ("larger", ev_large)]
        for c in ("aligned", "adversarial")
    },
    index=pd.MultiIndex.from_tuples([(sp, f) for sp in SPLITS for f in ei.FAMILIES]),
)
display(base_table.round(3))
# how hard each base judge follows each family: aligned − adversarial accuracy
base_gaps = pd.DataFrame(
    {
        name: [acc(ev, "aligned", f) - acc(ev, "adversarial", f) for f in ei.FAMILIES]
        for name, ev in [*((f"seed {s}", ev_bases[s]) for s in SEEDS),
                         ("larger judge", ev_large)]
    },
    index=list(ei.FAMILIES),
)
print("aligned − adversarial accuracy of the base judges (train subjects):")
display(base_gaps.round(3))
base_none = [acc(ev_bases[s], "none") for s in SEEDS]
gaps = [acc(ev_bases[s], "aligned") - acc(ev_bases[s], "adversarial") for s in SEEDS]
print("no-cue accuracy of the base judges (train subjects):", np.round(base_none, 3))

# %%
with torch.no_grad():  # how unsure each base is under a wrong bandwagon cue
    b_adv = eval_sets[("train subjects", "bandwagon", "adversarial")]
    p_right = {
        s: torch.softmax(ei.answer_logits(bases[s], b_adv.x), -1)[
            torch.arange(len(b_adv)), torch.as_tensor(b_adv.truth)
        ].numpy()
        for s in SEEDS
    }
for s, p in p_right.items():
    both = np.mean(1 - p**G - (1 - p) ** G)
    print(
        f"seed {s}: mean P(correct | wrong bandwagon cue) {p.mean():.3f}; expected "
        f"share of groups of {G} with both answers {both:.3f}"
    )
rec.check(
    "base_follows_cues",
    round(min(gaps), 4),
    0.2,
    op=">=",
    note="base judges, worst seed: bandwagon accuracy with an aligned cue minus with "
    "an "
    "adversarial cue",
)
if not quick:
    rec.check(
        "base_competent",
        round(min(base_none), 4),
        0.9,
        op=">=",
        note="base judges, worst seed: no-cue accuracy on the training subjects",
    )

# %% [markdown]
# ## Balanced conflict data and the independence reward
#
# The training data of EIT: bandwagon cues only, each pointing at the truth with probability exactly 0.5. The <!-- paper -->
# reward (`ei.eit_reward`, the paper's constants): +1.0 for a correct answer; with an adversarial cue, −0.5 for <!-- paper -->
# following it and +0.5 for resisting it; with an aligned cue, −0.3 for a wrong answer and **no bonus** for <!-- paper -->
# agreeing. The key lines:

# %%
src = inspect.getsource(ei.eit_reward)
print(src[src.index("    correct = pred == truth") :])

# %%
bal = ei.make_batch(repro.rng(seed, 3), 10_000, families=("bandwagon",), p_aligned=0.5)
p_aligned_emp = float((bal.cue == bal.truth).mean())
rec.check(
    "balanced_cues",
    round(abs(p_aligned_emp - 0.5), 4),
    0.02,
    op="<=",
    note=f"|P(cue = truth) - 0.5| on 10k balanced samples (P = {p_aligned_emp:.4f})",
)

table = [
    (0, 0, 1, 1.5),
    (1, 0, 1, -0.5),
    (0, 0, 0, 1.0),
    (1, 0, 0, -0.3),
    (0, 0, -1, 1.0),
    (1, 0, -1, 0.0),
]
got = ei.eit_reward(*(np.array([t[i] for t in table]) for i in range(3)))
cases = [
    "adversarial, resisted",
    "adversarial, followed",
    "aligned, right",
    "aligned, wrong",
    "no cue, right",
    "no cue, wrong",
]
print(pd.DataFrame(dict(case=cases, reward=got)).to_string(index=False))
rec.check(
    "reward_table",
    float(np.abs(got - np.array([t[3] for t in table])).max()),
    0.0,
    op="<=",
)

# %% [markdown]
# What the reward makes attractive: the exact expected reward of four fixed policies. On balanced data, truth
# beats every cue-based rule under EIT; under plain accuracy, following and opposing the cue tie at 0.5. On <!-- paper -->
# *adversarial-only* data, plain accuracy pays "always contradict the cue" exactly as much as the truth: that is
# the shortcut the balance removes.

# %%
POLICIES = ("truth", "anti", "random", "follow")
expected = pd.DataFrame(
    {
        "EIT, balanced": {
            p: ei.policy_expected_reward(p, 0.5, "eit") for p in POLICIES
        },
        "accuracy, balanced": {
            p: ei.policy_expected_reward(p, 0.5, "accuracy") for p in POLICIES
        },
        "accuracy, adversarial-only": {
            p: ei.policy_expected_reward(p, 0.0, "accuracy") for p in POLICIES
        },
    }
)
display(expected)
paper_expected = {"truth": 1.25, "anti": 0.60, "random": 0.425, "follow": 0.25}
rec.check(
    "expected_rewards",
    max(abs(expected["EIT, balanced"][p] - v) for p, v in paper_expected.items()),
    1e-12,
    op="<=",
    note="truth 1.25, anti-cue 0.60, random 0.425, cue-following 0.25",
)

# %% [markdown]
# ## Group policy gradient: what the reward can and cannot change
#
# For each prompt the judge samples `G` answers; each gets a reward; the group's advantages weight the log
# probabilities (`ei.grpo_loss`), and every RL arm adds `beta` times the exact KL divergence from the frozen base
# judge (two answers, so the KL is a two-term sum), the usual guard against forgetting what RL does not train.
#
# With only two possible answers, the EIT reward is, within one prompt, an affine function of "correct": slope
# 1 + 0.5 + 0.5 = 2.0 under an adversarial cue, 1.3 under an aligned one, 1.0 without a cue. Two consequences, <!-- paper -->
# both checked on a fixed batch below:
#
# * **GRPO's std-normalized advantages remove the slope**: the EIT reward and plain accuracy give *identical*
#   gradients. With the paper's optimizer, EIT can only differ from the accuracy reward through the data.
# * **Mean-baseline advantages** `r − mean(r)` (as in Dr. GRPO) keep the slope but drop the intercept: EIT is
#   then *exactly* an accuracy reward reweighted 2.0 on adversarial and 1.3 on aligned items <!-- paper -->
#   (`ei.reweighted_reward`). Whatever EIT adds over accuracy on balanced data, it adds as a per-item step size.
#
# The main runs use mean-baseline advantages; the std-normalized arm is in the ablation.
#
# The probe must have something to compare. The competent base judge answers almost deterministically, so its
# `G` sampled answers agree within nearly every group, every advantage is zero and both gradients vanish: equal
# by construction. The probe is therefore a freshly initialized judge, whose answers are close to coin flips, and
# a third check asks that the two rewards' mean-baseline gradients differ (and are not zero).


# %%
with repro.seeded(seed):
    probe = ei.make_judge(cfg["small"], seed)  # untrained: uncertain answers
fixed = ei.make_batch(
    repro.rng(seed, 4), rl_batch, families=("bandwagon",), p_aligned=0.5
)
print(
    "prompts with mixed answers: base judge "
    f"{ei.mixed_share(bases[seed], fixed, G, seed):.2f}, "
    f"probe {ei.mixed_share(probe, fixed, G, seed):.2f}"
)
g = {  # one policy-gradient step's gradient, same samples for every reward
    (r, m): ei.policy_gradient(probe, fixed, G, r, m, seed)
    for r in ("eit", "accuracy", "reweighted")
    for m in ("std", "mean")
}
rel_diff = ei.relative_max_diff
std_diff = rel_diff(g["eit", "std"], g["accuracy", "std"])
mean_diff = rel_diff(g["eit", "mean"], g["accuracy", "mean"])
rew_diff = rel_diff(g["eit", "mean"], g["reweighted", "mean"])
print(
    "relative max gradient difference: EIT vs accuracy, std-normalized "
    f"{std_diff:.2e}; "
    f"EIT vs accuracy, mean-baseline {mean_diff:.2f}; EIT vs reweighted accuracy, "
    f"mean-baseline {rew_diff:.2e}"
)
rec.check(
    "grpo_std_equivalence",
    std_diff,
    1e-4,
    op="<=",
    note="std-normalized advantages; with the mean baseline the difference is "
    f"{mean_diff:.2f}",
)
rec.check(
    "eit_is_reweighted_accuracy",
    rew_diff,
    1e-5,
    op="<=",
    note="mean-baseline advantages: EIT vs accuracy reweighted 2.0 (adversarial) / 1.3 "
    "(aligned)",
)
rec.check(
    "gradient_probe_informative",
    round(mean_diff, 4),
    0.05,
    op=">=",
    note="EIT vs accuracy, mean-baseline advantages: relative max gradient difference "
    "(zero if every group agrees, which would make the two checks above vacuous)",
)

# %% [markdown]
# ## The arms, one budget, three seeds
#
# Every arm starts from its seed's base judge and gets `rl_steps` steps of `rl_batch` prompts (RL arms: `G`
# sampled answers per prompt and the KL penalty), with the same optimizer and learning rate, through
# `helpers.train.fit`. The training data of every arm uses bandwagon cues and the training subjects only.
# The arms use **common random numbers**: a training batch is keyed by the seed and the step, not by the arm
# (`ei.rl_batch`), and every arm of a seed samples its answers from a generator with the same seed. The
# balanced arms therefore see identical batches (a check compares their fingerprints step by step), the
# adversarial-only arm and SFT the same items with the cue turned against the truth, and a difference between
# two arms at one seed is their reward's or optimizer's, not a second data stream's noise.
#
# 1. **SFT-debias** (the paper's SFT baseline): supervised training on adversarial bandwagon items with their
#    correct labels;
# 2. **RL acc, adversarial-only**: accuracy reward, every cue wrong;
# 3. **RL acc, balanced**: accuracy reward on balanced conflict data, the arm that isolates the data from the
#    reward;
# 4. **EIT**: balanced conflict data and the EIT reward, mean-baseline advantages;
# 5. **EIT, GRPO-std**: the same with the paper's std-normalized advantages (identical to accuracy reward with
#    std-normalized advantages, by the check above).
#
# The fourth arm of the ablation, accuracy explicitly reweighted 2.0 / 1.3, has EIT's advantages to the last bit <!-- paper -->
# (the check above), so with the same batches and sampler it should retrace arm 4's run exactly; it is run for
# every seed after the sweeps below and checked weight by weight (`reweighted_retraces_eit`).

# %%
ARMS = {
    "SFT-debias": ("sft", 0.0, None),
    "RL acc, adversarial-only": ("accuracy", 0.0, "mean"),
    "RL acc, balanced": ("accuracy", 0.5, "mean"),
    "EIT": ("eit", 0.5, "mean"),
    "EIT, GRPO-std": ("eit", 0.5, "std"),
}
models, logs, seen_tokens, digests = {}, {}, [], {}


def sampler(s):
    # one answer-sampler seed per RL seed, the same for every arm (common random
    # numbers)
    return torch.Generator().manual_seed(1000 * s + 1)


t_rl = time.time()
for s in SEEDS:
    models["base", s], models["larger base", s] = bases[s], large_base
    for arm, (reward, p_al, mode) in ARMS.items():
        model = copy.deepcopy(bases[s]).train()
        gen = sampler(s)
        stats_log, digests[arm, s] = [], []

        def batches(step, p_al=p_al, s=s, arm=arm):
            # keyed by (seed, step) only: every arm of a seed draws the same items
            b = ei.rl_batch(s, step, rl_batch, p_aligned=p_al)
            digests[arm, s].append(ei.batch_digest(b))
            if arm == "EIT":
                seen_tokens.append(b.x)
            return b

        if reward == "sft":
            loss_fn = ei.sft_loss
        else:

            def loss_fn(
                m, b, reward=reward, mode=mode, gen=gen, ref=bases[s], log=stats_log
            ):
                loss, st = ei.grpo_loss(m, b, G, reward, mode, gen, ref=ref, beta=beta)
                log.append(st)
                return loss

        with repro.seeded(s):
            train.fit(
                model,
                loss_fn,
                batches,
                rl_steps,
                lr=rl_lr,
                schedule="constant",
                seed=s,
                desc=f"{arm} (seed {s})",
            )
        models[arm, s], logs[arm, s] = model.eval(), pd.DataFrame(stats_log)
print(f"RL arms: {time.time() - t_rl:.0f} s")

# %% [markdown]
# Two checks on what the arms saw: the balanced arms of a seed trained on identical batches step by step (and the
# adversarial-only ones on identical items), and EIT's training data holds no token of another cue family or of a
# held-out subject.

# %%
ood_ids = [
    v
    for n, v in ei.VOCAB.items()
    if n.startswith(("<authority", "<distraction", "<elab", "<expert", "<ranked"))
]
heldout_ids = [ei.VOCAB[f"<subj:{x}>"] for x in ei.HELDOUT_SUBJECTS]
seen = torch.cat(seen_tokens)
n_ood = int(torch.isin(seen, torch.tensor(ood_ids + heldout_ids)).sum())
pad_digits = int(
    (seen[:, ei.OPTION_START[0] + ei.N_DIGITS] < 10).sum()
    + (seen[:, ei.OPTION_START[1] + ei.N_DIGITS] < 10).sum()
)
# common random numbers: the balanced arms of a seed must have trained on identical
# batches, step by step (same digest), so their differences are the reward's
BALANCED = [a for a, (_, p_al, _) in ARMS.items() if p_al == 0.5]
ADV_ONLY = [a for a, (_, p_al, _) in ARMS.items() if p_al == 0.0]  # SFT, RL adv-only
n_unpaired = sum(
    ei.unpaired_steps({a: digests[a, s] for a in group}, rl_steps)
    for s in SEEDS
    for group in (BALANCED, ADV_ONLY)
)
# the shared sampler: at step 0 every balanced arm is its seed's base, so the same
# generator seed must draw the same answers (same sampled accuracy and follow rate)
n_unshared = sum(
    len({(logs[a, s]["accuracy"][0], logs[a, s]["follow"][0]) for a in BALANCED}) > 1
    for s in SEEDS
)
rec.check(
    "common_batches",
    n_unpaired + n_unshared,
    0,
    note=f"(seed, step) pairs at which the balanced arms ({', '.join(BALANCED)}), "
    f"or the adversarial-only ones ({', '.join(ADV_ONLY)}), "
    "trained on different batches, plus seeds whose balanced arms drew different "
    "answers at step 0 (they share one answer-sampler seed per seed)",
)
rec.check(
    "ood_families_unseen",
    n_ood + pad_digits,
    0,
    note="tokens of other cue families (incl. digits in padding) or held-out subjects "
    "in "
    "EIT's training data",
)

# %% [markdown]
# ## Results
#
# Accuracy per arm, cue family and condition, averaged over the seeds (training subjects, then held-out
# subjects); bandwagon is in-domain, every other family was never seen by the RL arms. The larger untrained
# judge is shown too.

# %%
ARM_ORDER = ["base", "larger base", *ARMS]
shared = {
    "base": ev_bases,
    "larger base": dict.fromkeys(SEEDS, ev_large),
}  # already evaluated
evals = {
    (arm, s): shared[arm][s] if arm in shared else evaluate(m)
    for (arm, s), m in models.items()
}


def mean_acc(arm, cond, family="bandwagon", split="train subjects"):
    return float(np.mean([acc(evals[arm, s], cond, family, split) for s in SEEDS]))


rows = [(sp, "none", "none") for sp in SPLITS]
rows += [(sp, f, c) for sp in SPLITS for f in ei.FAMILIES for c in CONDS]
summary = pd.DataFrame(
    {arm: [mean_acc(arm, c, f, sp) for sp, f, c in rows] for arm in ARM_ORDER},
    index=pd.MultiIndex.from_tuples(rows, names=["split", "family", "cond"]),
)
display(summary.round(3))


def draw_arm_bars(fig, split):
    axs = fig.subplots(1, 2, sharey=True)
    width = 0.8 / len(ARM_ORDER)
    fams = ["none", *ei.FAMILIES]
    for ax, cond in zip(axs, ("adversarial", "aligned")):
        for j, (arm, c) in enumerate(zip(ARM_ORDER, plotting.PALETTE)):
            vals = [
                mean_acc(arm, "none" if f == "none" else cond, f, split) for f in fams
            ]
            ax.bar(np.arange(len(fams)) + j * width, vals, width, color=c, label=arm)
        ax.set_xticks(np.arange(len(fams)) + 0.4 - width / 2, fams, rotation=30)
        ax.set(title=f"{cond} cue ({split})", ylim=(0, 1))
    axs[0].set_ylabel(f"accuracy (mean of {len(SEEDS)} seeds)")
    axs[1].legend(fontsize=7, loc="lower right")


fig = plt.figure(figsize=(12, 3.8))
draw_arm_bars(fig, "train subjects")
plt.show()

# %% [markdown]
# Cue-following while training: the share of sampled answers that agree with a wrong bandwagon cue, per RL
# arm (mean over seeds, smoothed). The adversarial-only arm sees a wrong cue on every item; the balanced arms on
# half of them.

# %%
fig, ax = plt.subplots(figsize=(6.4, 3.4))
w = max(1, rl_steps // 20)
for arm in ARMS:
    if (arm, seed) in logs and "follow" in logs[arm, seed]:
        curve = np.mean([logs[arm, s]["follow"].to_numpy() for s in SEEDS], axis=0)
        ax.plot(np.convolve(curve, np.ones(w) / w, mode="valid"), label=arm)
ax.set(
    xlabel="RL step",
    ylabel="P(answer = cue | cue is wrong)",
    title="cue-following during training",
)
ax.legend()
plt.show()

# %% [markdown]
# A diagnostic, not a claim: the share of GRPO groups with any nonzero advantage (a group whose `G` sampled
# answers all agree has none and moves nothing), per RL arm and seed, over the first ten steps and over the whole
# run. The base's label smoothing exists to keep this share away from zero at the start.

# %%
informative = pd.DataFrame(
    {
        (arm, when): [
            float(logs[arm, s]["informative"].to_numpy()[sl].mean()) for s in SEEDS
        ]
        for arm in ARMS
        if "informative" in logs[arm, seed]
        for when, sl in (("first 10 steps", slice(0, 10)), ("all steps", slice(None)))
    },
    index=pd.Index(SEEDS, name="seed"),
).T
display(informative.round(3))

# %% [markdown]
# The slider switches between the training subjects and the held-out subjects (the same figure as above).

# %%
plotting.static_slider(
    list(SPLITS), draw_arm_bars, figsize=(12, 3.8), label="subjects", fmt="{}"
)

# %% [markdown]
# Live: evaluate every judge of seed `seed` on fresh items of a family, condition and subject of your choice.


# %%
@torch.no_grad()
def live(family="digits", condition="adversarial", subject="ends", n=500):
    pc, pa = (0.0, 1.0) if condition == "none" else (1.0, CONDS[condition])
    b = ei.make_batch(
        np.random.default_rng(n),
        n,
        subjects=(subject,),
        families=(family,),
        p_cue=pc,
        p_aligned=pa,
    )
    for arm in ARM_ORDER:
        pred = ei.answer_logits(models[arm, seed], b.x).argmax(-1).numpy()
        print(f"{arm:26s} accuracy {(pred == b.truth).mean():.3f}")


plotting.live_controls(
    live,
    family=list(ei.FAMILIES),
    condition=["none", *CONDS],
    subject=list(ei.SUBJECTS),
    n=(100, 2000, 100),
)

# %% [markdown]
# ## The reward ablation
#
# The paper's central point is that the *reward* makes the cue non-predictive. On balanced data, though, the
# cue already predicts nothing about the accuracy reward (the table of expected rewards above). So the decisive
# comparison is EIT against the accuracy reward on the same balanced data, paired seed by seed (same batches,
# same sampler seed), on adversarial, aligned and no-cue items, and the paper's own optimizer
# (std-normalized), under which the two rewards coincide. The second table gives the paired differences.

# %%
ABL = ["RL acc, balanced", "EIT", "EIT, GRPO-std"]
ablation = pd.DataFrame(
    {
        (arm, cond): [acc(evals[arm, s], cond) for s in SEEDS]
        for arm in ["base", *ABL]
        for cond in ("none", "aligned", "adversarial")
    },
    index=[f"seed {s}" for s in SEEDS],
)
display(ablation.round(3))
# paired differences: same seed, same batches, same sampler seed
PAIRS = [
    ("EIT", "RL acc, balanced"),
    ("EIT, GRPO-std", "RL acc, balanced"),
    ("EIT", "EIT, GRPO-std"),
]
paired = pd.DataFrame(
    {
        (f"{a} − {b}", cond): [
            acc(evals[a, s], cond) - acc(evals[b, s], cond) for s in SEEDS
        ]
        for a, b in PAIRS
        for cond in ("none", "aligned", "adversarial")
    },
    index=[f"seed {s}" for s in SEEDS],
).T
paired["mean"] = paired.mean(axis=1)
display(paired.round(3))

# %% [markdown]
# Two diagnostics read from the same runs. Under mean-baseline advantages EIT *is* accuracy reweighted 2.0 / 1.3, <!-- paper -->
# so what it can change is speed: how soon the sampled answers stop following a wrong cue (first step where the
# smoothed cue-following rate drops under 0.2). And a judge that ignores the cue has aligned accuracy equal to <!-- paper -->
# its no-cue accuracy: the aligned − no-cue gap says how much each arm still leans on a right cue.


# %%
def first_below(curve, level=0.2):
    sm = np.convolve(curve, np.ones(w) / w, mode="valid")
    hit = np.nonzero(sm < level)[0]
    return int(hit[0]) + w if len(hit) else np.nan


speed = pd.DataFrame(
    {
        "steps until cue-following < 0.2": {
            arm: np.mean(
                [first_below(logs[arm, s]["follow"].to_numpy()) for s in SEEDS]
            )
            for arm in ["RL acc, adversarial-only", *ABL]
        },
        "aligned − no-cue accuracy": {
            arm: np.mean(
                [
                    acc(evals[arm, s], "aligned") - acc(evals[arm, s], "none")
                    for s in SEEDS
                ]
            )
            for arm in ["base", "RL acc, adversarial-only", *ABL]
        },
    }
)
display(speed.round(3))

# %% [markdown]
# Forgetting on the held-out subjects: is the KL penalty too weak? A sweep of its weight `beta` for EIT (seed
# `seed`, the same batches and samples as the main EIT run), with no-cue and adversarial accuracy on both
# subject splits.


# %%
def rl_run(s, reward, lr=rl_lr, beta_=beta, mode="mean", p_al=0.5):
    """A balanced RL run for seed s (the main arms' batches, sampler), own lr / beta."""
    m = copy.deepcopy(bases[s]).train()
    gen = sampler(s)

    def loss_fn(mm, b):
        return ei.grpo_loss(mm, b, G, reward, mode, gen, ref=bases[s], beta=beta_)[0]

    def batches(step):
        return ei.rl_batch(s, step, rl_batch, p_aligned=p_al)

    with repro.seeded(s):
        train.fit(
            m,
            loss_fn,
            batches,
            rl_steps,
            lr=lr,
            schedule="constant",
            seed=s,
            desc=f"{reward}, seed {s}, lr {lr:g}, beta {beta_:g}",
        )
    return m.eval()


betas = sorted({0.0, beta, 0.2, 1.0}) if not quick else [0.0, beta]
beta_rows = {}
for bk in betas:
    m_b = models["EIT", seed] if bk == beta else rl_run(seed, "eit", beta_=bk)
    ev_b = evaluate(m_b)
    beta_rows[bk] = {
        f"{c} ({sp.split()[0]})": acc(ev_b, c, split=sp)
        for sp in SPLITS
        for c in ("none", "adversarial")
    }
beta_sweep = pd.DataFrame(beta_rows).T.rename_axis("beta")
display(beta_sweep.round(3))

# %% [markdown]
# How to read the sweep: a weight that stops the held-out no-cue accuracy from falling without also stopping
# the adversarial accuracy from rising would make forgetting a matter of tuning; if the two move together, the
# KL penalty only trades one for the other at this budget.

# %% [markdown]
# Step size. With AdamW, a noisy policy gradient still moves every weight by about the learning rate per step,
# and the RL data only ever shows cued items of two subjects: a step size that is too large can wreck the task
# skill itself, on cued and uncued items alike. The same runs of the accuracy-reward and EIT arms (same batches,
# same sampler) at a third of the learning rate, every seed, say which of the failures below are a matter of
# step size and which are not.

# %%
lr_low = rl_lr / 3
lr_cols = {
    "no cue": ("none", "train subjects"),
    "aligned": ("aligned", "train subjects"),
    "adversarial": ("adversarial", "train subjects"),
    "no cue (held-out)": ("none", "held-out subjects"),
    "adversarial (held-out)": ("adversarial", "held-out subjects"),
}
lr_evals = {}
for arm, reward in (("RL acc, balanced", "accuracy"), ("EIT", "eit")):
    for s in SEEDS:
        lr_evals[arm, s, rl_lr] = evals[arm, s]
        lr_evals[arm, s, lr_low] = evaluate(rl_run(s, reward, lr=lr_low))
for s in SEEDS:
    lr_evals["base", s, 0.0] = evals["base", s]
lr_sweep = pd.DataFrame(
    {
        key: {col: acc(ev, c, split=sp) for col, (c, sp) in lr_cols.items()}
        for key, ev in lr_evals.items()
    }
).T.rename_axis(["arm", "seed", "lr"])
display(lr_sweep.sort_index().round(3))


def lr_per_seed(arm, col, lr):
    return [lr_sweep.loc[(arm, s, lr), col] for s in SEEDS]


# %% [markdown]
# The fourth arm of the reward ablation, run: the accuracy reward reweighted 2.0 (adversarial) / 1.3 (aligned), <!-- paper -->
# every seed, same batches and sampler as EIT. If EIT under the mean baseline is nothing but this reweighting,
# the two runs end with the same weights.

# %%
rw_models = {s: rl_run(s, "reweighted") for s in SEEDS}
rw_dev = max(
    float((p - q).abs().max())
    for s in SEEDS
    for p, q in zip(rw_models[s].parameters(), models["EIT", s].parameters())
)
rw_adv = [acc(evaluate(rw_models[s]), "adversarial") for s in SEEDS]
print(
    f"reweighted accuracy arm: adversarial {np.round(rw_adv, 3)}; max |weight "
    f"difference| to EIT {rw_dev:.1e}"
)
rec.check(
    "reweighted_retraces_eit",
    rw_dev,
    0.0,
    op="<=",
    note="max |weight difference| between the reweighted-accuracy arm (2.0 / 1.3) and "
    "EIT after the full run, every seed (same batches and sampler)",
)


# %% [markdown]
# ## The claims record
#
# Numbers are accuracies on the fixed evaluation items (training subjects unless said otherwise; the reward
# comparison on its own paired set, below), one per RL seed. "Bias resistance" for the scale comparison is the adversarial-cue accuracy averaged over every family.


# %%
def per_seed(arm, cond, family="bandwagon", split="train subjects"):
    return [acc(evals[arm, s], cond, family, split) for s in SEEDS]


def diff(a, b):
    return [round(x - y, 4) for x, y in zip(a, b)]


def fmt(xs):
    return "/".join(f"{x:.3f}" for x in xs)


eit_adv, acc_adv = (
    per_seed("EIT", "adversarial"),
    per_seed("RL acc, balanced", "adversarial"),
)
std_adv = per_seed("EIT, GRPO-std", "adversarial")


def inf_share(arm):  # share of groups with any nonzero advantage over the run
    return [float(logs[arm, s]["informative"].mean()) for s in SEEDS]


# %% [markdown]
# **Conditions**, fixed before the claims' numbers are read. Every claim about an RL arm needs that arm trained to
# a plateau: its sampled training accuracy is flat at the end (the book-wide rule: the last fifth of the run
# improved by at most 5 % of the whole improvement). The comparison of the two rewards also needs the evaluation
# to resolve the claim's bar: the standard error of the paired difference (two accuracies on the same items)
# below it; that comparison is read on its own set of `n_pair` adversarial bandwagon items, scored for both
# arms. The scale comparison needs a larger judge that is competent at the task (no-cue accuracy at the bar of
# `base_competent`).


# %%
def plateau_of(arm):  # sampled accuracy while training (higher is better)
    return [
        train.plateau(logs[arm, s]["accuracy"].to_numpy(), higher_is_better=True)
        for s in SEEDS
    ]


PLATEAU = {
    "plateau_eit": "EIT",
    "plateau_acc_balanced": "RL acc, balanced",
    "plateau_adv_only": "RL acc, adversarial-only",
}
cond = {
    k: rec.condition(
        k, plateau_of(a), "<=", 0.05, statement=f"the {a} arm is trained to a plateau",
        unit="sampled-accuracy gain over the last fifth / whole gain",
    )
    for k, a in PLATEAU.items()
}
# the reward comparison is read on its own paired set: n_pair adversarial bandwagon
# items (training subjects), the same items for both arms
big = ei.make_batch(
    repro.rng(seed, 51), n_pair, families=("bandwagon",), p_cue=1.0, p_aligned=0.0
)
with torch.no_grad():
    right = {
        (a, s): ei.answer_logits(models[a, s], big.x).argmax(-1).numpy() == big.truth
        for a in ("EIT", "RL acc, balanced")
        for s in SEEDS
    }
pair_ci = [  # EIT − accuracy reward, paired over the items, 95% interval
    ei.paired_bootstrap_diff(
        right["EIT", s], right["RL acc, balanced", s], 2000, repro.rng(seed, 50, s)
    )
    for s in SEEDS
]
acc_big = [float(right["RL acc, balanced", s].mean()) for s in SEEDS]
se_pair = [
    float(np.sqrt((p * (1 - p) + q * (1 - q)) / n_pair))
    for p, q in zip((float(right["EIT", s].mean()) for s in SEEDS), acc_big)
]
cond["resolves_bar"] = rec.condition(
    "resolves_bar", se_pair, "<", 0.02,
    statement="the evaluation resolves a reward difference of 0.02",
    unit=f"standard error of the paired difference ({n_pair} items)",
)
cond["larger_competent"] = rec.condition(
    "larger_competent", acc(ev_large, "none"), ">=", 0.9,
    statement="the larger judge is competent at the task",
    unit="no-cue accuracy, training subjects",
)


# %% tags=["hide-input"]
# the claims' numbers and notes (per seed; the rules are in the table below)
HO = "held-out subjects"
base_adv, base_al = per_seed("base", "adversarial"), per_seed("base", "aligned")
eit_al, eit_none = per_seed("EIT", "aligned"), per_seed("EIT", "none")
adv_al = per_seed("RL acc, adversarial-only", "aligned")
lo_diff = diff(
    lr_per_seed("EIT", "adversarial", lr_low),
    lr_per_seed("RL acc, balanced", "adversarial", lr_low),
)


def base_gap(s, f):
    # how much seed s's base judge follows family f: aligned − adversarial accuracy
    return acc(evals["base", s], "aligned", f) - acc(evals["base", s], "adversarial", f)


def adv_gain(arm, s, fams):
    return float(np.mean([acc(evals[arm, s], "adversarial", f)
                          - acc(evals["base", s], "adversarial", f) for f in fams]))


def cells(arm, fams, split="train subjects"):
    return ", ".join(
        f"{f} {mean_acc(arm, 'none', f, split):.2f}/"
        f"{mean_acc(arm, 'aligned', f, split):.2f}/"
        f"{mean_acc(arm, 'adversarial', f, split):.2f}"
        for f in fams
    )


# transfer is measurable only on a family the base follows (base_follows_cues' bar);
# the rule reads the base judges alone, before any RL arm
followed = {s: [f for f in ei.NEW_FAMILIES if base_gap(s, f) >= 0.2] for s in SEEDS}
new_gain = [adv_gain("EIT", s, followed[s]) for s in SEEDS if followed[s]]
ci_txt = "; ".join(
    f"seed {s} {d:+.3f} [{lo:+.3f}, {hi:+.3f}]"
    for s, (d, lo, hi) in zip(SEEDS, pair_ci)
)
resist_large = float(np.mean([acc(ev_large, "adversarial", f) for f in ei.FAMILIES]))
resist_eit = [
    float(np.mean([acc(evals["EIT", s], "adversarial", f) for f in ei.FAMILIES]))
    for s in SEEDS
]
NOTES = {
    "eit_vs_accuracy_reward": f"EIT {fmt(eit_adv)}, accuracy reward {fmt(acc_adv)}, "
    f"EIT with GRPO-std advantages {fmt(std_adv)}, reweighted accuracy 2.0 / 1.3 "
    f"{fmt(rw_adv)} (per seed); aligned EIT {fmt(eit_al)} vs accuracy "
    f"{fmt(per_seed('RL acc, balanced', 'aligned'))}. Informative-group share, EIT "
    f"{fmt(inf_share('EIT'))}, accuracy reward {fmt(inf_share('RL acc, balanced'))}. "
    "Paired (same batches and sampler seed): GRPO-std − accuracy reward, adversarial "
    f"{fmt(diff(std_adv, acc_adv))}. At a third of the learning rate, EIT − accuracy "
    f"reward: {fmt(lo_diff)}. The claim's number is read on its own {n_pair} paired "
    f"items (95% intervals): {ci_txt}; the table cell's difference is "
    f"{fmt(diff(eit_adv, acc_adv))}",
    "adv_accuracy_gain": f"base {fmt(base_adv)} → EIT {fmt(eit_adv)}; the other arms "
    f"trained on bandwagon cues: accuracy reward {fmt(acc_adv)}, SFT-debias "
    f"{fmt(per_seed('SFT-debias', 'adversarial'))} (aligned "
    f"{fmt(per_seed('SFT-debias', 'aligned'))}, no cue "
    f"{fmt(per_seed('SFT-debias', 'none'))})",
    "aligned_preserved": f"aligned {fmt(base_al)} → {fmt(eit_al)}; no cue "
    f"{fmt(per_seed('base', 'none'))} → {fmt(eit_none)}. The base's aligned accuracy "
    "comes from the cue; a judge that ignores the cue keeps it only as far as it "
    "solves the task as well as the cue does. EIT aligned − no-cue: "
    f"{fmt(diff(eit_al, eit_none))}. Aligned − base for the accuracy-reward arm "
    f"{fmt(diff(per_seed('RL acc, balanced', 'aligned'), base_al))} and the GRPO-std "
    f"arm {fmt(diff(per_seed('EIT, GRPO-std', 'aligned'), base_al))}. At a third of "
    "the learning rate, EIT − base (aligned): "
    + fmt(diff(lr_per_seed("EIT", "aligned", lr_low), base_al)),
    "ood_transfer_new_families": "new families the base follows (aligned − "
    "adversarial >= 0.2), per seed: "
    + "; ".join(f"seed {s} {', '.join(followed[s]) or 'none'}" for s in SEEDS)
    + ". Base gap per family (mean of seeds): "
    + ", ".join(
        f"{f} {np.mean([base_gap(s, f) for s in SEEDS]):+.2f}" for f in ei.NEW_FAMILIES
    )
    + ". Mean gain over all three new families, followed or not (a family the base "
    "does not follow can only show forgetting): "
    + fmt([adv_gain("EIT", s, ei.NEW_FAMILIES) for s in SEEDS])
    + ". Same gain for the accuracy-reward arm: "
    + fmt([adv_gain("RL acc, balanced", s, followed[s] or ["digits"]) for s in SEEDS])
    + ". no-cue/aligned/adversarial, mean of seeds — base: "
    + cells("base", ei.NEW_FAMILIES) + "; EIT: " + cells("EIT", ei.NEW_FAMILIES)
    + ". Verbosity (base → EIT adversarial): "
    f"{mean_acc('base', 'adversarial', 'verbosity'):.2f} → "
    f"{mean_acc('EIT', 'adversarial', 'verbosity'):.2f}; slot families authority, "
    "distraction: " + cells("EIT", ["authority", "distraction"]),
    "no_forgetting_heldout": f"no cue {fmt(per_seed('base', 'none', split=HO))} → "
    f"{fmt(per_seed('EIT', 'none', split=HO))}; aligned "
    f"{fmt(per_seed('base', 'aligned', split=HO))} → "
    f"{fmt(per_seed('EIT', 'aligned', split=HO))}; beta sweep (seed {seed}), "
    "held-out no-cue accuracy: "
    + ", ".join(f"beta {b_} {v:.3f}" for b_, v in beta_sweep["none (held-out)"].items())
    + "; at a third of the learning rate, EIT − base: "
    + fmt(diff(lr_per_seed("EIT", "no cue (held-out)", lr_low),
               per_seed("base", "none", split=HO)))
    + "; accuracy-reward arm − base (main learning rate): "
    + fmt(diff(per_seed("RL acc, balanced", "none", split=HO),
               per_seed("base", "none", split=HO))),
    "ood_subject_transfer": f"no-cue/aligned/adversarial — base: "
    f"{cells('base', ['bandwagon'], HO)}; EIT: {cells('EIT', ['bandwagon'], HO)}",
    "shortcut_of_adversarial_only": f"EIT aligned accuracy {fmt(eit_al)}",
    "beats_larger_model": f"small+EIT {fmt(resist_eit)}, larger base "
    f"{resist_large:.3f} ({large_base.n_params():,} vs {bases[seed].n_params():,} "
    "parameters)",
}


def record(rows):
    for cid, statement, paper, measured, op, target, unit, baseline, given in rows:
        rec.claim(cid, statement, paper=paper, measured=measured, op=op,
                  target=target, unit=unit, baseline=baseline,
                  note=NOTES.get(cid, ""), given=given)


# %%
E, HOs = ("plateau_eit",), dict(split=HO)
record([  # id, statement, paper, measured, op, target, unit, baseline, given
    ("eit_vs_accuracy_reward", "On the same balanced data, the EIT reward beats the "
     "plain accuracy reward under adversarial cues",
     "the reward, not only the data, makes the cue non-predictive",
     [round(d, 4) for d, _, _ in pair_ci], ">", 0.02,
     f"adversarial bandwagon accuracy, EIT − accuracy reward ({n_pair} paired items)",
     acc_big,
     ("plateau_eit", "plateau_acc_balanced", "resolves_bar")),
    ("adv_accuracy_gain", "EIT raises accuracy under adversarial bandwagon cues",
     "improves (Qwen3-1.7B/4B; +13.2 % reported)", diff(eit_adv, base_adv), ">=",
     0.1, "accuracy, EIT − base", base_adv, E),
    ("aligned_preserved", "EIT keeps accuracy when the cue is right", "preserved",
     diff(eit_al, base_al), ">=", -0.02, "accuracy, EIT − base (aligned cue)",
     base_al, E),
])
if len(new_gain) == len(SEEDS):
    record([(
        "ood_transfer_new_families", "Trained on bandwagon only, EIT resists cue "
        "families that share no token or position with it",
        "generalizes to unseen bias types (+39.1 % on distraction reported)",
        [round(x, 4) for x in new_gain], ">", 0.05,
        "mean adversarial accuracy gain (EIT − base) over the new families "
        "(digits, expert, order) that the seed's base judge follows",
        [float(np.mean([acc(evals["base", s], "adversarial", f) for f in followed[s]]))
         for s in SEEDS], E)])
else:
    rec.untested(
        "ood_transfer_new_families", "Trained on bandwagon only, EIT resists cue "
        "families that share no token or position with it",
        paper="generalizes to unseen bias types (+39.1 % on distraction reported)",
        reason="a base judge follows none of the new families, so there is no "
        "cue-following to remove: " + NOTES["ood_transfer_new_families"],
    )


# %%
record([
    ("no_forgetting_heldout", "EIT does not lose no-cue accuracy on subjects it was "
     "not trained on", "generalizes to held-out MMLU-Pro subjects",
     diff(per_seed("EIT", "none", **HOs), per_seed("base", "none", **HOs)), ">=",
     -0.03, "no-cue accuracy, EIT − base, held-out subjects",
     per_seed("base", "none", **HOs), E),
    ("ood_subject_transfer", "EIT's gain under adversarial cues carries over to "
     "held-out subjects", "generalizes to held-out MMLU-Pro subjects",
     diff(per_seed("EIT", "adversarial", **HOs),
          per_seed("base", "adversarial", **HOs)), ">", 0.05,
     "adversarial bandwagon accuracy gain, held-out subjects",
     per_seed("base", "adversarial", **HOs), E),
    ("shortcut_of_adversarial_only", "RL on adversarial-only cues learns to "
     "contradict the cue and loses aligned-cue accuracy",
     "the motivation for balanced data", diff(adv_al, base_al), "<", -0.05,
     "aligned accuracy, adversarial-only arm − base", base_al, ("plateau_adv_only",)),
    ("balanced_beats_adversarial_only", "Balanced EIT keeps more aligned-cue accuracy "
     "than RL on adversarial-only cues", "the motivation for balanced data",
     diff(eit_al, adv_al), ">", 0.0, "aligned accuracy, EIT − adversarial-only arm",
     adv_al, ("plateau_eit", "plateau_adv_only")),
    ("beats_larger_model", "The small judge with EIT resists bias better than a "
     "larger judge without it", "EIT Qwen3-4B beats untrained 8B and 14B",
     [round(r - resist_large, 4) for r in resist_eit], ">", 0.0,
     "adversarial accuracy (mean over families), small+EIT − larger base",
     resist_large, ("plateau_eit", "larger_competent")),
])
rec.save()

# %% [markdown]
# ## What the runs say, and what they cannot
#
# Generated from this run's record and tables (no number here is typed by hand); read it with the claims above
# and the per-seed tables.

# %% tags=["remove-input"]
VERD = {c.id: c.verdict for c in rec.claims}


def pm(xs):
    return " / ".join(f"{x:+.3f}" for x in xs)


def span(xs, f=".2f"):
    lo, hi = f"{min(xs):{f}}", f"{max(xs):{f}}"
    return lo if lo == hi else f"{lo}–{hi}"


def says(cid, xs):
    return f"`{cid}` is {pm(xs)} ({VERD[cid]})"


mean = np.mean
ho_none = per_seed("base", "none", split=HO)
gap_vals = base_gaps[[f"seed {s}" for s in SEEDS]].to_numpy()
p_wrong = [float(p_right[s].mean()) for s in SEEDS]
mixed = [float(mean(1 - p**G - (1 - p) ** G)) for p in p_right.values()]
inf_first = informative.xs("first 10 steps", level=1).to_numpy().ravel()
inf_all = informative.xs("all steps", level=1).to_numpy().ravel()
txt = [
    f"The base judges: no-cue accuracy {fmt(base_none)} on the training subjects "
    f"({fmt(ho_none)} on the held-out ones); aligned − adversarial accuracy per cue "
    f"family and seed {span(gap_vals.ravel())}"
    + (" (every family followed)" if gap_vals.min() >= 0.2 else "")
    + f". P(correct | wrong bandwagon cue) {fmt(p_wrong)}, so {fmt(mixed)} of the "
    f"groups of {G} are expected to hold both answers; measured while training, "
    f"{span(inf_first)} of the groups carry an advantage in the first ten steps and "
    f"{span(inf_all)} over the whole run. All arms of a seed train on the same "
    "batches with the same sampler seed (`common_batches`), so every difference "
    "below is paired. In this run ("
    + (f"seeds {SEEDS[0]}–{SEEDS[-1]}" if len(SEEDS) > 1 else f"seed {SEEDS[0]}")
    + "):",
    "",
]
ev_d = [round(d, 4) for d, _, _ in pair_ci]
lo_d = diff(
    lr_per_seed("EIT", "adversarial", lr_low),
    lr_per_seed("RL acc, balanced", "adversarial", lr_low),
)
txt.append(
    "* **The EIT reward against the accuracy reward, same balanced data.** "
    + says("eit_vs_accuracy_reward", ev_d)
    + f", mean {mean(ev_d):+.3f}, on {n_pair} adversarial items scored for both arms "
    f"(95% intervals: {ci_txt}); trained on identical batches. On the table's "
    f"{eval_n}-item cell: EIT {fmt(eit_adv)}, the accuracy reward {fmt(acc_adv)}; at "
    f"a third of the learning rate {pm(lo_d)}. "
    + (
        "The paired differences straddle zero. "
        if min(ev_d) < 0 < max(ev_d)
        else "The paired differences share one sign. "
    )
    + (
        f"{sum(lo > 0 or hi < 0 for _, lo, hi in pair_ci)} of {len(SEEDS)} seeds' "
        "intervals exclude zero. "
    )
    + "The accuracy reward reweighted 2.0 / 1.3 ends with EIT's weights (max "
    f"difference {rw_dev:.1e}, `reweighted_retraces_eit`): under the mean baseline "
    "the EIT reward *is* that reweighting, in a full run as on one batch."
)
sft = {c: per_seed("SFT-debias", c) for c in ("adversarial", "aligned", "none")}
txt.append(
    "* **Balanced-data RL and cue-following.** "
    + says("adv_accuracy_gain", diff(eit_adv, base_adv))
    + f" over a base at {fmt(base_adv)}; on held-out subjects "
    + says(
        "ood_subject_transfer",
        diff(per_seed("EIT", "adversarial", split=HO),
             per_seed("base", "adversarial", split=HO)),
    )
    + f". There the EIT judge is at {cells('EIT', ['bandwagon'], HO)} (no cue / "
    f"aligned / adversarial, mean of seeds), the base at "
    f"{cells('base', ['bandwagon'], HO)}. The paper's SFT baseline: adversarial "
    f"{fmt(sft['adversarial'])}, aligned {fmt(sft['aligned'])}, no cue "
    f"{fmt(sft['none'])}"
    + (
        ": it learns the opposite shortcut, contradicting the cue."
        if mean(sft["aligned"]) < mean(sft["none"]) - 0.2
        else "."
    )
)
gap_arm = {a: speed.loc[a, "aligned − no-cue accuracy"] for a in ABL}
txt.append(
    f"* **Aligned accuracy.** The base's no-cue accuracy is {fmt(base_none)}; a judge "
    "that ignores the cue can keep aligned accuracy only that high. "
    + says("aligned_preserved", diff(eit_al, base_al))
    + f" (bar −0.02). EIT's no-cue accuracy {fmt(base_none)} → {fmt(eit_none)}; "
    f"its aligned − no-cue gap {pm(diff(eit_al, eit_none))}. Aligned − base for "
    "the "
    "accuracy-reward arm "
    + pm(diff(per_seed("RL acc, balanced", "aligned"), base_al))
    + ", for GRPO-std "
    + pm(diff(per_seed("EIT, GRPO-std", "aligned"), base_al))
    + "; EIT at a third of the learning rate "
    + pm(diff(lr_per_seed("EIT", "aligned", lr_low), base_al))
    + ". Mean aligned − no-cue gap: "
    + ", ".join(f"{a} {v:+.3f}" for a, v in gap_arm.items())
    + ". Under the mean baseline EIT steps 2.0× on adversarial items and 1.3× on "
    "aligned ones, which pushes towards contradicting the cue; "
    + (
        "EIT's gap is negative and the lowest, as that reading predicts."
        if min(gap_arm, key=gap_arm.get) == "EIT" and gap_arm["EIT"] < 0
        else "here EIT's gap is not both negative and the lowest, so the runs do not "
        "single out that push."
    )
)
fg_eit = diff(per_seed("EIT", "none", split=HO), ho_none)
fg_acc = diff(per_seed("RL acc, balanced", "none", split=HO), ho_none)
txt.append(
    "* **Forgetting on held-out subjects.** "
    + says("no_forgetting_heldout", fg_eit)
    + f"; the accuracy-reward arm {pm(fg_acc)}. β sweep (seed {seed}): held-out "
    "no-cue accuracy "
    + ", ".join(f"{b:g}: {v:.2f}" for b, v in beta_sweep["none (held-out)"].items())
    + "; adversarial accuracy on the training subjects "
    + ", ".join(f"{b:g}: {v:.2f}" for b, v in beta_sweep["adversarial (train)"].items())
    + ". At a third of the learning rate EIT − base: "
    + pm(diff(lr_per_seed("EIT", "no cue (held-out)", lr_low), ho_none))
    + ". "
    + (
        "Both RL arms lose held-out skill, so the loss is not the EIT reward's: the "
        "RL data shows only cued items of two subjects."
        if mean(fg_eit) < -0.03 and mean(fg_acc) < -0.03
        else "The arms differ in how much held-out skill they keep."
    )
)
if VERD["ood_transfer_new_families"] != "untested":
    acc_gain = [adv_gain("RL acc, balanced", s, followed[s]) for s in SEEDS]
    txt.append(
        "* **Transfer to the new families.** "
        + says("ood_transfer_new_families", new_gain)
        + f"; the accuracy-reward arm gains {pm(acc_gain)} on the same families"
        + (
            ", as much or more: what transfers is \"stop trusting cues\", learnt "
            "from balanced data under either reward."
            if mean(acc_gain) >= mean(new_gain)
            else ", less than EIT."
        )
        + " EIT adversarial accuracy, mean of seeds: "
        + ", ".join(
            f"{f} {mean_acc('EIT', 'adversarial', f):.2f}"
            for f in (*ei.NEW_FAMILIES, "verbosity", "authority", "distraction")
        )
        + " (the last two share the bandwagon cue's slot and letter)."
    )
steps_02 = speed["steps until cue-following < 0.2"].drop("base", errors="ignore")
txt.append(
    "* **The paper's optimiser (GRPO-std).** Steps until sampled cue-following is "
    "under 0.2 (mean of seeds): "
    + ", ".join(f"{a} {v:.0f}" if v == v else f"{a} never" for a, v in steps_02.items())
    + f". Adversarial accuracy {fmt(std_adv)} (paired against the accuracy reward "
    f"{pm(diff(std_adv, acc_adv))}), aligned "
    f"{fmt(per_seed('EIT, GRPO-std', 'aligned'))}."
)
txt.append(
    "* "
    + says("beats_larger_model", [round(r - resist_large, 4) for r in resist_eit])
    + f"; the larger judge's adversarial accuracy (mean over families) is "
    f"{resist_large:.3f}"
    + (
        ": it follows every cue, so the claim holds almost by construction and shows "
        "that RL beats an untrained judge of any size here, not how bias resistance "
        "scales."
        if resist_large < 0.1
        else "."
    )
)
se90 = float(np.sqrt(0.9 * 0.1 / eval_n))
txt += [
    "",
    f"Limits: one base judge per seed and one larger judge; {rl_steps} RL steps; a "
    "synthetic task whose cues are single tokens; evaluation cells of "
    f"{eval_n} items (a standard error near {se90:.3f} at 90 % accuracy; the "
    f"paired-difference errors of the reward comparison are {fmt(se_pair)}, "
    f"`resolves_bar`). {len(SEEDS)} seed(s) are few: a paired difference within about "
    f"±{2 * max(se_pair):.2f} is not resolved. The base's uncertainty is set by hand "
    f"(label smoothing {cfg['label_smoothing']}, chosen by a one-judge probe for the "
    "informative-group share, not for any claim); a judge that follows a wrong cue "
    "most of the time is a stand-in for an LLM's sampling entropy, not a "
    "measurement of it. A small ε sweep run outside this notebook with the same "
    "code (bases at ε = 0.2) is not part of this record.",
]
display(Markdown("\n".join(txt)))
