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
# | cues | bandwagon (train); authority, distraction, verbosity (held out) | the same four families, as template tokens or padding |
# | "pre-training" | the LLM's own | supervised training on data where cues agree with the truth 85 % of the time |
# | optimizer | GRPO in verl | group sampling (G answers per prompt) with std-normalized or mean-baseline advantages |
# | hardware | GPUs | 2 CPU cores, a few minutes |
#
# :::{note}
# **What is reconstructed.** The data rule (P(cue = truth) = 0.5), the reward constants and the bandwagon-only
# training come from the authors' code as described in our notes. Ours: the synthetic judge task and its four
# comparison rules, the token-level cue templates (the paper uses 24 natural-language bandwagon templates), the
# "pre-training" that makes the base model cue-following (standing in for an LLM's learned sycophancy), and the
# choice of mean-baseline advantages for the main runs (explained below). The paper's +0.1 format bonus for a
# `<think>` block has no analogue: our judge emits one answer token.
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
pre_steps = 200  # supervised "pre-training" steps of the base judges
pre_batch = 128
p_cue_pre = 0.7  # share of pre-training items with a cue ...
p_aligned_pre = 0.85  # ... and how often that cue is right
rl_steps = 300  # steps per arm (every arm gets the same budget)
rl_batch = 64  # prompts per step
G = 8  # answers sampled per prompt
rl_lr = 1e-3
small_layers, small_d = 2, 64  # the judge that EIT trains
large_layers, large_d = 4, 128  # the larger judge, never trained by RL
eval_n = 1000  # items per evaluation cell

# %% tags=["hide-input"]
import copy

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from IPython.display import Markdown, display

from helpers import claims, nn, plotting, repro, train
from helpers import epistemic_independence as ei

if quick:
    pre_steps, rl_steps, rl_batch, eval_n = 40, 20, 16, 100
    large_layers, large_d = 2, 96
small = dict(n_layer=small_layers, n_head=4, d_model=small_d)
large = dict(n_layer=large_layers, n_head=4, d_model=large_d)

# these judges are tiny: one thread is faster than two fighting for a core
env = repro.setup(seed, threads=1)
plotting.use_style()
rec = claims.ClaimsRecord(
    "06_epistemic_independence",
    dict(
        quick=quick,
        seed=seed,
        pre_steps=pre_steps,
        pre_batch=pre_batch,
        p_cue_pre=p_cue_pre,
        p_aligned_pre=p_aligned_pre,
        rl_steps=rl_steps,
        rl_batch=rl_batch,
        G=G,
        rl_lr=rl_lr,
        small=small,
        large=large,
        eval_n=eval_n,
    ),
)
print(env)

# %% [markdown]
# ## The judge task
#
# Each item shows a **subject** token (which rule decides), option A and option B (six digits each, with two
# padding slots), an optional **cue**, and `<ask>`. The rules: larger digit sum (`sum`), more digits ≥ 5
# (`high_count`), larger first + last digit (`ends`), larger sum of odd digits (`odd_sum`). The first two are the
# training subjects of the RL arms; `ends` and `odd_sum` are held out (seen in pre-training, never in EIT). Cue
# families: **bandwagon** ("x % of people prefer B": a template token, a percentage bucket and the letter),
# **authority** and **distraction** (their own template tokens and the letter), and **verbosity** (the cued
# option's padding is filled with elaboration tokens; no letter at all).

# %%
names = {v: k for k, v in ei.VOCAB.items()}
demo = ei.make_batch(repro.rng(seed, 0), 4, subjects=ei.SUBJECTS, families=ei.FAMILIES)
for i in range(len(demo)):
    toks = " ".join(names[int(t)] for t in demo.x[i])
    print(
        f"{toks}\n   truth={'AB'[demo.truth[i]]} cue->{'AB'[demo.cue[i]]} "
        f"({ei.FAMILIES[demo.family[i]]})"
    )

# %% [markdown]
# ## A cue-following base judge
#
# An LLM arrives at EIT already sycophantic. Our stand-in: train a transformer (`helpers.nn`) on all subjects
# and all cue families, where 70 % of items carry a cue that is right 85 % of the time, for a short budget. The
# cue is an easy, mostly right feature, so the judge learns to lean on it. We train a small judge (the one EIT
# will train) and a larger one (the "scale" baseline) on the same data.


# %%
def pretrain_batches(step: int) -> ei.Batch:
    return ei.make_batch(
        repro.rng(seed, 1, step),
        pre_batch,
        subjects=ei.SUBJECTS,
        families=ei.FAMILIES,
        p_cue=p_cue_pre,
        p_aligned=p_aligned_pre,
    )


def sft_loss(model, b: ei.Batch) -> torch.Tensor:
    return F.cross_entropy(ei.answer_logits(model, b.x), torch.as_tensor(b.truth))


def make_judge(cfg: dict) -> nn.Transformer:
    torch.manual_seed(seed)
    return nn.Transformer(
        nn.TransformerConfig(
            vocab_size=len(ei.VOCAB), max_len=ei.SEQ_LEN, pos="learned", **cfg
        )
    )


base = make_judge(small)
train.fit(
    base,
    sft_loss,
    pretrain_batches,
    pre_steps,
    lr=3e-3,
    warmup=pre_steps // 10,
    seed=seed,
    desc="base",
)
large_base = make_judge(large)
train.fit(
    large_base,
    sft_loss,
    pretrain_batches,
    pre_steps,
    lr=2e-3,
    warmup=pre_steps // 10,
    seed=seed,
    desc="larger base",
)
print(f"parameters: small {base.n_params():,}, larger {large_base.n_params():,}")


# %% [markdown]
# Evaluation: for each cue family and subject split, accuracy with no cue, with an aligned cue (pointing at the
# truth) and with an adversarial cue (pointing at the wrong option), and the **cue-following rate** (answers equal
# to an adversarial cue's target). The evaluation items are fixed by the seed and shared by every model.

# %%
CONDS = {"none": (0.0, 1.0), "aligned": (1.0, 1.0), "adversarial": (1.0, 0.0)}
SPLITS = {"train subjects": ei.TRAIN_SUBJECTS, "held-out subjects": ei.HELDOUT_SUBJECTS}
eval_sets = {
    (split, fam, cond): ei.make_batch(
        repro.rng(seed, 2, k),
        eval_n,
        subjects=subj,
        families=(fam,),
        p_cue=pc,
        p_aligned=pa,
    )
    for k, (split, subj, fam, cond, pc, pa) in enumerate(
        (s, subj, f, c, *CONDS[c])
        for s, subj in SPLITS.items()
        for f in ei.FAMILIES
        for c in CONDS
    )
}


@torch.no_grad()
def evaluate(model) -> pd.DataFrame:
    rows = []
    for (split, fam, cond), b in eval_sets.items():
        pred = ei.answer_logits(model, b.x).argmax(-1).numpy()
        rows.append(
            dict(
                split=split,
                family=fam,
                cond=cond,
                acc=(pred == b.truth).mean(),
                follow=(pred == b.cue).mean() if cond == "adversarial" else np.nan,
            )
        )
    return pd.DataFrame(rows)


def acc(df, cond, family="bandwagon", split="train subjects", col="acc"):
    return float(
        df[(df.family == family) & (df.cond == cond) & (df.split == split)][col].iloc[0]
    )


ev_base, ev_large = evaluate(base), evaluate(large_base)
gap = acc(ev_base, "aligned") - acc(ev_base, "adversarial")
print(
    ev_base.pivot_table(index=["split", "family"], columns="cond", values="acc")
    .round(3)
    .to_string()
)
rec.check(
    "base_follows_cues",
    round(gap, 4),
    0.2,
    op=">=",
    note="base judge: bandwagon accuracy with an aligned cue minus with an "
    "adversarial cue",
)

# %% [markdown]
# ## Balanced conflict data and the independence reward
#
# The training data of EIT: bandwagon cues only, each pointing at the truth with probability exactly 0.5. The
# reward (`ei.eit_reward`, the paper's constants): +1.0 for a correct answer; with an adversarial cue, −0.5 for
# following it and +0.5 for resisting it; with an aligned cue, −0.3 for a wrong answer and **no bonus** for
# agreeing. The key lines:

# %%
import inspect

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
got = ei.eit_reward(
    np.array([t[0] for t in table]),
    np.array([t[1] for t in table]),
    np.array([t[2] for t in table]),
)
print(
    pd.DataFrame(
        dict(
            case=[
                "adversarial, resisted",
                "adversarial, followed",
                "aligned, right",
                "aligned, wrong",
                "no cue, right",
                "no cue, wrong",
            ],
            reward=got,
        )
    ).to_string(index=False)
)
rec.check(
    "reward_table",
    float(np.abs(got - np.array([t[3] for t in table])).max()),
    0.0,
    op="<=",
)

# %% [markdown]
# What the reward makes attractive: the exact expected reward of four fixed policies. On balanced data, truth
# beats every cue-based rule under EIT; under plain accuracy, following and opposing the cue tie at 0.5. On
# *adversarial-only* data, plain accuracy pays "always contradict the cue" exactly as much as the truth: that is
# the shortcut the balance removes.

# %%
expected = pd.DataFrame(
    {
        "EIT, balanced": {
            p: ei.policy_expected_reward(p, 0.5, "eit")
            for p in ("truth", "anti", "random", "follow")
        },
        "accuracy, balanced": {
            p: ei.policy_expected_reward(p, 0.5, "accuracy")
            for p in ("truth", "anti", "random", "follow")
        },
        "accuracy, adversarial-only": {
            p: ei.policy_expected_reward(p, 0.0, "accuracy")
            for p in ("truth", "anti", "random", "follow")
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
# ## Group policy gradient, and why the advantages are mean-baseline
#
# For each prompt the judge samples `G` answers; each gets a reward; the group's advantages weight the log
# probabilities (`ei.grpo_loss`). GRPO normalizes advantages by the group's standard deviation. With only two
# possible answers, the EIT reward is, within one prompt, an affine function of "correct" with a positive slope
# (1 + 0.5 + 0.5 = 2.0 under an adversarial cue, 1.3 under an aligned one, 1.0 without a cue), and standardizing
# removes exactly that slope: **the EIT reward and plain accuracy give identical gradients**. We check it on a
# fixed batch. With mean-baseline advantages `r − mean(r)` (as in Dr. GRPO) the slopes survive: EIT weighs
# adversarial items 2.0 / 1.3 as much as aligned ones. The main runs use mean-baseline advantages, otherwise the
# EIT arm would just be the accuracy arm.


# %%
def grads(model, b, reward, mode):
    model.zero_grad()
    loss, _ = ei.grpo_loss(
        model, b, G, reward, mode, torch.Generator().manual_seed(seed)
    )
    loss.backward()
    return torch.cat(
        [p.grad.flatten() for p in model.parameters() if p.grad is not None]
    ).clone()


probe = copy.deepcopy(base)
fixed = ei.make_batch(
    repro.rng(seed, 4), rl_batch, families=("bandwagon",), p_aligned=0.5
)
g_eit, g_acc = grads(probe, fixed, "eit", "std"), grads(probe, fixed, "accuracy", "std")
std_diff = float((g_eit - g_acc).abs().max() / g_acc.abs().max())
m_eit, m_acc = (
    grads(probe, fixed, "eit", "mean"),
    grads(probe, fixed, "accuracy", "mean"),
)
mean_diff = float((m_eit - m_acc).abs().max() / m_acc.abs().max())
print(
    "relative max gradient difference, EIT vs accuracy: std-normalized "
    f"{std_diff:.2e}, mean-baseline {mean_diff:.2f}"
)
rec.check(
    "grpo_std_equivalence",
    std_diff,
    1e-4,
    op="<=",
    note="std-normalized advantages; with the mean baseline the difference is "
    f"{mean_diff:.2f}",
)

# %% [markdown]
# ## The arms, one budget
#
# Every arm starts from the same base judge and gets `rl_steps` steps of `rl_batch` prompts (RL arms: `G`
# sampled answers per prompt), with the same optimizer and learning rate, through `helpers.train.fit`:
#
# 1. **base**: no further training;
# 2. **SFT-debias** (the paper's SFT baseline): supervised training on adversarial bandwagon items with their
#    correct labels;
# 3. **RL, accuracy, adversarial-only**: accuracy reward, every cue wrong;
# 4. **RL, accuracy, balanced**: accuracy reward on balanced conflict data;
# 5. **EIT**: balanced conflict data and the EIT reward.
#
# All training data for arms 2–5 uses bandwagon cues and the training subjects only.

# %%
ARMS = {
    "SFT-debias": ("sft", 0.0),
    "RL acc, adversarial-only": ("accuracy", 0.0),
    "RL acc, balanced": ("accuracy", 0.5),
    "EIT": ("eit", 0.5),
}
models, logs, seen_tokens = {"base": base}, {}, {}

for k, (arm, (reward, p_al)) in enumerate(ARMS.items()):
    model = copy.deepcopy(base)
    gen = torch.Generator().manual_seed(seed + k)
    stats_log = []
    batch_tokens = []

    def batches(step, p_al=p_al, k=k, batch_tokens=batch_tokens):
        b = ei.make_batch(
            repro.rng(seed, 5, k, step),
            rl_batch,
            families=("bandwagon",),
            p_aligned=p_al,
        )
        batch_tokens.append(b.x)
        return b

    if reward == "sft":
        loss_fn = sft_loss
    else:

        def loss_fn(m, b, reward=reward, gen=gen, stats_log=stats_log):
            loss, s = ei.grpo_loss(m, b, G, reward, "mean", gen)
            stats_log.append(s)
            return loss

    train.fit(
        model,
        loss_fn,
        batches,
        rl_steps,
        lr=rl_lr,
        schedule="constant",
        seed=seed + k,
        desc=arm,
    )
    models[arm], logs[arm], seen_tokens[arm] = (
        model,
        pd.DataFrame(stats_log),
        torch.cat(batch_tokens),
    )

ood_ids = [
    v
    for n, v in ei.VOCAB.items()
    if n.startswith(("<authority", "<distraction", "<elab"))
]
heldout_ids = [ei.VOCAB[f"<subj:{s}>"] for s in ei.HELDOUT_SUBJECTS]
n_ood = int(torch.isin(seen_tokens["EIT"], torch.tensor(ood_ids + heldout_ids)).sum())
rec.check(
    "ood_families_unseen",
    n_ood,
    0,
    note="tokens of authority, distraction, verbosity cues or held-out subjects in "
    "EIT's training data",
)

# %% [markdown]
# ## Results
#
# Accuracy under an adversarial and an aligned cue, per arm and cue family (training subjects); bandwagon is
# in-domain, the others were never seen by the trained arms. The larger untrained judge is shown too.

# %%
models["larger base"] = large_base
evals = {arm: evaluate(m) for arm, m in models.items()}
summary = pd.concat([ev.assign(arm=arm) for arm, ev in evals.items()])
display(
    summary.pivot_table(
        index=["split", "family", "cond"], columns="arm", values="acc", sort=False
    )
    .reindex(columns=list(models))
    .round(3)
)

ARM_ORDER = list(models)


def draw_arm_bars(fig, split):
    axs = fig.subplots(1, 2, sharey=True)
    width = 0.8 / len(ARM_ORDER)
    for ax, cond in zip(axs, ("adversarial", "aligned")):
        for j, (arm, c) in enumerate(zip(ARM_ORDER, plotting.PALETTE)):
            vals = [acc(evals[arm], cond, f, split) for f in ei.FAMILIES]
            ax.bar(np.arange(4) + j * width, vals, width, color=c, label=arm)
        ax.set_xticks(np.arange(4) + 0.4 - width / 2, ei.FAMILIES)
        ax.set(title=f"{cond} cue", ylim=(0, 1))
    axs[0].set_ylabel("accuracy")
    axs[1].legend(fontsize=7, loc="lower right")


fig = plt.figure(figsize=(11, 3.6))
draw_arm_bars(fig, "train subjects")
plt.show()

fig, ax = plt.subplots(figsize=(6.4, 3.4))
for arm in ARMS:
    if arm in logs and "follow" in logs[arm]:
        w = max(1, rl_steps // 20)
        ax.plot(
            np.convolve(logs[arm]["follow"], np.ones(w) / w, mode="valid"), label=arm
        )
ax.set(
    xlabel="RL step",
    ylabel="P(answer = cue | cue is wrong)",
    title="cue-following during training",
)
ax.legend()
plt.show()

# %% [markdown]
# The slider switches between the training subjects and the held-out subjects (the same figure as above).

# %%
plotting.static_slider(
    list(SPLITS), draw_arm_bars, figsize=(11, 3.6), label="subjects", fmt="{}"
)

# %% [markdown]
# Live: evaluate every judge on fresh items of a family, condition and subject of your choice.


# %%
@torch.no_grad()
def live(family="authority", condition="adversarial", subject="ends", n=500):
    pc, pa = CONDS[condition]
    b = ei.make_batch(
        np.random.default_rng(n),
        n,
        subjects=(subject,),
        families=(family,),
        p_cue=pc,
        p_aligned=pa,
    )
    for arm, m in models.items():
        pred = ei.answer_logits(m, b.x).argmax(-1).numpy()
        print(f"{arm:26s} accuracy {(pred == b.truth).mean():.3f}")


plotting.live_controls(
    live,
    family=list(ei.FAMILIES),
    condition=list(CONDS),
    subject=list(ei.SUBJECTS),
    n=(100, 2000, 100),
)

# %% [markdown]
# ## The claims record
#
# Numbers are accuracies on the fixed evaluation items (training subjects unless said otherwise). "Bias
# resistance" for the scale comparison is the adversarial-cue accuracy averaged over the four families.

# %%
ev_eit, ev_b = evals["EIT"], evals["base"]
adv_gain = acc(ev_eit, "adversarial") - acc(ev_b, "adversarial")
rec.claim(
    "adv_accuracy_gain",
    "EIT raises accuracy under adversarial bandwagon cues",
    paper="improves (Qwen3-1.7B/4B)",
    measured=adv_gain,
    op=">",
    target=0.0,
    unit="accuracy, EIT − base",
    baseline=acc(ev_b, "adversarial"),
    note=f"base {acc(ev_b, 'adversarial'):.3f} → EIT {acc(ev_eit, 'adversarial'):.3f}",
)
al_change = acc(ev_eit, "aligned") - acc(ev_b, "aligned")
rec.claim(
    "aligned_preserved",
    "EIT keeps accuracy when the cue is right",
    paper="preserved",
    measured=al_change,
    op=">=",
    target=-0.05,
    unit="accuracy, EIT − base (aligned cue)",
    baseline=acc(ev_b, "aligned"),
    note=f"aligned {acc(ev_b, 'aligned'):.3f} → {acc(ev_eit, 'aligned'):.3f}; no cue "
    f"{acc(ev_b, 'none'):.3f} → "
    f"{acc(ev_eit, 'none'):.3f}. The base's aligned accuracy is inflated by "
    "following the cue; a judge "
    "that ignores the cue can only keep it if it solves the task as well as the "
    "cue does.",
)
ood = ["authority", "distraction", "verbosity"]
ood_gains = {
    f: acc(ev_eit, "adversarial", f) - acc(ev_b, "adversarial", f) for f in ood
}
ood_gain = float(np.mean(list(ood_gains.values())))
rec.claim(
    "ood_bias_transfer",
    "Trained on bandwagon only, EIT resists unseen cue families",
    paper="generalizes to authority, distraction, verbosity",
    measured=ood_gain,
    op=">",
    target=0.0,
    unit="mean adversarial accuracy gain over unseen families",
    baseline=float(np.mean([acc(ev_b, "adversarial", f) for f in ood])),
    note=", ".join(f"{f} {g:+.3f}" for f, g in ood_gains.items()),
)
subj_gain = acc(ev_eit, "adversarial", split="held-out subjects") - acc(
    ev_b, "adversarial", split="held-out subjects"
)
rec.claim(
    "ood_subject_transfer",
    "EIT's gain carries over to held-out subjects",
    paper="generalizes to held-out MMLU-Pro subjects",
    measured=subj_gain,
    op=">",
    target=0.0,
    unit="adversarial bandwagon accuracy gain, held-out subjects",
    baseline=acc(ev_b, "adversarial", split="held-out subjects"),
)
ev_adv = evals["RL acc, adversarial-only"]
al_drop = acc(ev_adv, "aligned") - acc(ev_b, "aligned")
rec.claim(
    "shortcut_of_adversarial_only",
    "RL on adversarial-only cues learns to contradict the cue and loses "
    "aligned-cue accuracy",
    paper="the motivation for balanced data",
    measured=al_drop,
    op="<",
    target=-0.05,
    unit="aligned accuracy, adversarial-only arm − base",
    baseline=acc(ev_b, "aligned"),
    note=f"EIT aligned accuracy {acc(ev_eit, 'aligned'):.3f}",
)
rec.claim(
    "balanced_beats_adversarial_only",
    "Balanced EIT keeps more aligned-cue accuracy than RL on adversarial-only cues",
    paper="the motivation for balanced data",
    measured=acc(ev_eit, "aligned") - acc(ev_adv, "aligned"),
    op=">",
    target=0.0,
    unit="aligned accuracy, EIT − adversarial-only arm",
    baseline=acc(ev_adv, "aligned"),
)
resist = {
    arm: float(np.mean([acc(evals[arm], "adversarial", f) for f in ei.FAMILIES]))
    for arm in evals
}
rec.claim(
    "beats_larger_model",
    "The small judge with EIT resists bias better than a larger judge without it",
    paper="EIT Qwen3-4B beats untrained 8B and 14B",
    measured=resist["EIT"] - resist["larger base"],
    op=">",
    target=0.0,
    unit="adversarial accuracy (mean over families), small+EIT − larger base",
    baseline=resist["larger base"],
    note=f"small+EIT {resist['EIT']:.3f}, larger base {resist['larger base']:.3f} "
    f"({large_base.n_params():,} vs {base.n_params():,} parameters)",
)
rec.save()
