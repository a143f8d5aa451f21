# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Tree Training: train on a tree of rollouts in one pass, with exactly the per-branch gradients
#
# When a model is trained on several continuations of the same prompt (agentic multi-turn rollouts, GRPO groups,
# beam-search distillation), the samples form a **tree**: they share prefixes. The usual pipeline linearizes every
# root-to-leaf branch and runs each one separately, so the shared prefix is recomputed once per branch. The paper
# shows that the branch-averaged loss equals a **per-token weighted loss** over the tree, so each token's
# log-probability only needs to be computed **once**; it lays the tree out by **DFS serialization**, adapts
# attention (a tree mask, depth positions, a label map) and SSM layers (state and conv-context routing) so that the
# log-probs are *exactly* those of separate branches, and adds **Redundancy-Free Tree Partitioning** for trees that
# do not fit in memory. It reports up to 6.2× end-to-end speedup on 64 GPUs, about 95% of the ideal <!-- paper -->
# `N_flat / N_tree`.
#
# This chapter implements all of it, checks the exactness to the last bit where it must be exact, and measures the
# speedup on a CPU against the ideal.
#
# | | the paper | this notebook |
# |---|---|---|
# | models | Qwen3-8B/32B dense, Qwen3-30B-A3B MoE, hybrid attention/SSM | a 4-layer, d=128 decoder with RoPE; a hybrid with a Mamba-style selective SSM every 2nd layer |
# | data | real agentic rollouts and synthetic trees, up to ~100k tokens | random trees (a 384-token prompt, 2 levels of branching, segments of 32–96 tokens) and groups of 8 rollouts sampled from a small LM trained for seconds on a toy language |
# | attention kernel | FlashAttention-3 with a node-level shared-prefix mask | PyTorch SDPA: per-node block attention (exact pairs only) and a dense tree mask |
# | hardware | 64 Hopper GPUs, Megatron-Core with sequence packing | 2 shared CPU cores; time measured as process CPU time of a 1-thread run; the width sweep (d = 128…1024) runs in `data/02_tree_training/make_sweep.py` and is loaded |
# | baseline | sequence packing | sequence packing (per-document attention blocks, SSM state reset), per-branch micro-batches and one padded batch, the fastest per round |
# | partitioning | trees beyond GPU memory | a tree of ~3× a 256-token budget; memory measured as the storages autograd holds and as the C heap in use |
# | seeds | | every sampled quantity (trees, timings, memory) over 3 seeds; timings as medians of interleaved repeats |
#
# :::{note}
# **What is reconstructed.** The loss identity, DFS serialization, tree mask, depth positions, label map, SSM state
# and conv-context routing, and the gateway mechanism of the partitioning follow the paper (via a detailed third-party
# write-up of its v5). **Reconstructed by us:** the *choice* of partitions (a greedy depth-first fill under the token
# budget; the paper's heuristic is not public), the small SSM (a Mamba-style selective scan, not the paper's
# models), the CPU node-block attention used in place of the paper's GPU kernel, and the memory measurement (CPU
# heap and the storages held by autograd's saved tensors, instead of GPU memory).
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
# `quick = True` runs every code path on tiny trees and a tiny model; the default runs the experiments above.

# %% tags=["parameters"]
quick = False
seed = 0
vocab = 64
d_model = 128
n_layer = 4
n_head = 4
root_len = 384  # prompt tokens of the speed trees
seg_len = (32, 96)  # tokens per rollout segment
# b children per node at each of 2 levels: K = b^2 leaves
branchings = [1, 2, 3, 4]
repeats = 5  # timed repeats per configuration (after one warm-up)
n_seeds = 3  # seeds seed, seed+1, seed+2 for everything sampled
n_exact_trees = 2  # random trees per seed
train_steps = 12
budget = 256  # token budget of a partition
sweep_repeats = 3  # interleaved rounds on the sampled trees and for partitioning
sampler_steps = 200  # AdamW steps of the small LM that samples the realistic trees
sample_k = 8  # rollouts per sampled group (GRPO-style)
sample_prompt = 128  # prompt tokens of a sampled group
sample_new = 192  # at most this many tokens per rollout (it stops at the end token)

# %% tags=["hide-input"]
import gc
import json
import time

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch
from IPython.display import Markdown, display
from torch.profiler import ProfilerActivity, profile
from tqdm.auto import tqdm

from helpers import checkpoints, claims, plotting, repro, train
from helpers import tree_training as tt

if quick:
    d_model, n_layer, root_len, seg_len, branchings = 32, 2, 48, (8, 16), [1, 2, 3]
    repeats, n_exact_trees, train_steps, budget = 2, 2, 5, 48
    n_seeds, sweep_repeats = 1, 2
    sampler_steps, sample_k, sample_prompt, sample_new = 30, 4, 24, 24
seeds = [seed + i for i in range(n_seeds)]

# this chapter's ops are small: one thread wastes nothing on a shared machine
env = repro.setup(seed, threads=1)
plotting.use_style()
rec = claims.ClaimsRecord(
    "02_tree_training",
    dict(
        quick=quick,
        seed=seed,
        vocab=vocab,
        d_model=d_model,
        n_layer=n_layer,
        n_head=n_head,
        root_len=root_len,
        seg_len=list(seg_len),
        branchings=branchings,
        repeats=repeats,
        n_seeds=n_seeds,
        n_exact_trees=n_exact_trees,
        sweep_repeats=sweep_repeats,
        sampler_steps=sampler_steps,
        sample_k=sample_k,
        sample_prompt=sample_prompt,
        sample_new=sample_new,
        train_steps=train_steps,
        budget=budget,
    ),
)
print(env)

# %% [markdown]
# ## 1. The method
#
# **The loss identity.** A tree has K branches (root-to-leaf paths) `P_k`. The per-branch average loss is
#
# $$L_{\text{avg}} = \frac1K \sum_k c_k \sum_{t\in P_k} \ell_t = \sum_{t\in\mathcal T} w_t\,\ell_t,\qquad
#   w_t = \frac1K \sum_{k:\,t\in P_k} c_k ,$$
#
# with `c_k = 1` for SFT, `c_k = 1/|P_k|` for a per-branch token mean, `c_k = A_k` (an advantage) for
# REINFORCE/GRPO. A token shared by g branches is computed once and weighted by g/K (times the coefficients), so
# the gradients are identical by linearity, *provided* every `ℓ_t` is exactly the log-prob the branch would give.
#
# **DFS serialization** lays the tree out in pre-order, each token once: `N_tree` tokens instead of
# `N_flat = Σ_k |P_k|`. Three things must then change for the log-probs to match:
#
# 1. **tree mask**: token i may attend j iff `j ≤ i` and node(j) is an ancestor-or-self of node(i). In pre-order
#    this is `j ≤ i < horizon[j]`, with `horizon[j]` the end of node(j)'s subtree: O(N) to store;
# 2. **depth positions**: a token's position is its index *along its branch*, so siblings reuse positions (RoPE
#    then sees exactly the branch's relative distances);
# 3. **the label map**: the sequence cannot be shifted by one. `pred(t) = t − 1` inside a node; a node's first
#    token is predicted from its *parent's* last token, which therefore serves one label per child.
#
# A small example: a root of 4 tokens with two children.

# %%
ex = tt.TrajectoryTree(
    [tt.Node([1, 2, 3, 4], None), tt.Node([5, 6], 0), tt.Node([7, 8, 9], 0)]
)
ex_ser = tt.serialize(ex)
print("tokens   ", ex_ser.tokens.tolist())
print("node     ", ex_ser.node.tolist())
print("positions", ex_ser.pos.tolist(), "  (the second child restarts at depth 4)")
print(
    "pred(t)  ",
    ex_ser.pred.tolist(),
    "  (both children's first tokens read position 3)",
)
print("horizon  ", ex_ser.horizon.tolist())
print(
    f"N_tree = {ex.n_tree}, N_flat = {ex.n_flat}, ideal speedup N_flat/N_tree = "
    f"{ex.ideal_speedup:.2f}"
)

# the O(N) tree mask, expanded: allowed(i, j) = (j <= i) & (i < horizon[j])
h = torch.as_tensor(ex_ser.horizon)
qi, kj = torch.arange(len(h))[:, None], torch.arange(len(h))[None, :]
ex_mask = (kj <= qi) & (qi < h[None, :])
# equals the brute-force definition
assert torch.equal(ex_mask, torch.as_tensor(tt.tree_mask_dense(ex, ex_ser)))
print(ex_mask.int().numpy())

# %% [markdown]
# **SSM layers** carry a recurrent state in *physical* order, which the mask cannot fix: in DFS order the token
# before a node's first token may be a sibling's last token. So (i) each node starts from its **parent's end
# state**, and (ii) the depthwise causal conv of width 4 takes its left context from the last 3 inputs **along the
# ancestor path** (possibly spanning several short ancestors). `helpers.tree_training.SelectiveSSM` does both; its
# `route_state` / `route_conv` flags switch each fix off for the ablation below.
#
# **One training step on a tree** (the function the benchmark times): one forward on the serialized tree, the label
# map, the weighted loss. The baseline runs each branch as its own causal sequence and averages.


# %%
def tree_step(model, opt, ser, attn, w):
    """One optimizer step of Tree Training: every token computed once."""
    opt.zero_grad(set_to_none=True)
    idx = torch.as_tensor(ser.tokens)[None]
    # depth positions; tree mask (dense or node blocks)
    logits, _ = model(idx, torch.as_tensor(ser.pos), attn)
    logp = logits[0].log_softmax(-1)
    # label map: logits[pred(t)] scores x_t
    lp = logp[torch.as_tensor(ser.pred).clamp(min=0), idx[0]]
    # w_t = (1/K) sum_{k ∋ t} c_k, zero on the prompt and the first token
    loss = -(w * lp).sum()
    loss.backward()
    opt.step()
    return loss.detach()


def linear_step(model, opt, paths, masks, K):
    """Baseline: each branch linearized, run on its own (causal, positions 0..L-1);
    losses averaged.
    """
    opt.zero_grad(set_to_none=True)
    total = 0.0
    for idx, m in zip(paths, masks):
        logits, _ = model(idx, torch.arange(idx.shape[1]))
        lp = logits[0, :-1].log_softmax(-1).gather(-1, idx[0, 1:, None])[:, 0]
        loss = -(m[1:] * lp).sum() / K
        loss.backward()  # gradient accumulation over the K micro-batches
        total += loss.detach()
    opt.step()
    return total


def padded_step(model, opt, X, M, K):
    """Baseline 2: the K branches as one right-padded batch (causal; pads weigh 0)."""
    opt.zero_grad(set_to_none=True)
    logits, _ = model(X, torch.arange(X.shape[1]))
    lp = logits[:, :-1].log_softmax(-1).gather(-1, X[:, 1:, None])[..., 0]
    loss = -(M[:, 1:] * lp).sum() / K
    loss.backward()
    opt.step()
    return loss.detach()


# %%
def packed_step(model, opt, pk):
    """Baseline 3 (the paper's): sequence packing, all K branches in one call with
    per-document causal attention (tt.packed_inputs, tt.packed_loss)."""
    opt.zero_grad(set_to_none=True)
    loss = tt.packed_loss(model, *pk)
    loss.backward()
    opt.step()
    return loss.detach()


def padded_inputs(paths, masks):
    L = max(p.shape[1] for p in paths)
    X, M = torch.zeros(len(paths), L, dtype=torch.long), torch.zeros(len(paths), L)
    for i, (p, mk) in enumerate(zip(paths, masks)):
        X[i, : p.shape[1]], M[i, : p.shape[1]] = p[0], mk
    return X, M


def branch_inputs(tree, ser):
    paths = [torch.tensor(p)[None] for p in tree.path_tokens()]
    masks = [
        torch.as_tensor(ser.loss_mask[ix], dtype=torch.float32)
        for ix in tt.path_token_index(tree, ser)
    ]
    return paths, masks


# %% [markdown]
# ## 2. Exactness: tree vs independent branches
#
# For each seed, on random trees of arbitrary shape (random parents, random segment lengths, part of the tokens masked out of the
# loss, a random advantage per branch), we compare per-token log-probs, the loss, every parameter gradient, and the
# parameters after one AdamW step, for the attention-only model and for the hybrid SSM model, in float64 and
# float32 (the model's initialization also follows the seed). The models use the usual initialization (weights with std `init_std`, as in GPT-2), the same model as in the
# speed and training sections.


# %%
def make_model(ssm_every, dtype, init_std=0.02, d=d_model, layers=n_layer, s=seed):
    torch.manual_seed(s)
    cfg = tt.TreeLMConfig(
        vocab_size=vocab,
        n_layer=layers,
        n_head=n_head,
        d_model=d,
        ssm_every=ssm_every,
        init_std=init_std,
    )
    return tt.TreeLM(cfg).to(dtype)


# %%
def compare(model, tree, mode="sum"):
    """Max |Δ| of log-probs, relative loss/grad/AdamW-step differences, tree vs
    branch-by-branch.
    """
    ser = tt.serialize(tree)
    lp = tt.tree_logprobs(model, tree, ser)
    d_lp = max(
        (lp[ix] - lpk).abs().max().item()
        for ix, lpk in zip(
            tt.path_token_index(tree, ser), tt.path_logprobs(model, tree)
        )
    )
    out = {}
    for name, fn in [
        (
            "tree",
            lambda m: tt.tree_loss(m, tree, tt.token_weights(tree, ser, mode), ser),
        ),
        ("branches", lambda m: tt.branch_avg_loss(m, tree, mode)),
    ]:
        m = make_model(
            model.cfg.ssm_every,
            next(model.parameters()).dtype,
            d=model.cfg.d_model,
            layers=model.cfg.n_layer,
        )
        m.load_state_dict(model.state_dict())
        opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
        loss = fn(m)
        loss.backward()
        grads = [p.grad.clone() for p in m.parameters()]
        opt.step()
        out[name] = (loss.item(), grads, [p.detach().clone() for p in m.parameters()])
    (la, ga, pa), (lb, gb, pb) = out["tree"], out["branches"]
    g_rel = max(
        ((a - b).norm() / b.norm().clamp_min(1e-30)).item() for a, b in zip(ga, gb)
    )
    # in units of the learning rate
    step = max((a - b).abs().max().item() for a, b in zip(pa, pb)) / 1e-3
    return dict(
        max_dlogprob=d_lp,
        loss_rel=abs(la - lb) / abs(lb),
        grad_rel=g_rel,
        adamw_step_diff_lr=step,
    )


# %%
exact_trees = {}
for s in seeds:
    g = repro.rng(s, 1)
    exact_trees[s] = [
        tt.random_tree_by_parents(
            g, 10, 12 if quick else 24, vocab, mask_prob=0.2, coefs=True
        )
        for _ in range(n_exact_trees)
    ]
rows = []
bar = tqdm(total=4 * len(seeds) * n_exact_trees, desc="exactness")
for dtype in (torch.float64, torch.float32):
    for ssm_every, arch in [(0, "attention"), (2, "hybrid SSM")]:
        for s in seeds:
            model = make_model(ssm_every, dtype, s=s)
            for i, tree in enumerate(exact_trees[s]):
                rows.append(
                    dict(
                        dtype=str(dtype)[6:],
                        arch=arch,
                        seed=s,
                        tree=i,
                        N_tree=tree.n_tree,
                        K=len(tree.leaves()),
                        **compare(model, tree, mode="mean" if i % 2 else "sum"),
                    )
                )
                bar.update()
bar.close()
exact = pd.DataFrame(rows)
summary = exact.groupby(["dtype", "arch"])[
    ["max_dlogprob", "loss_rel", "grad_rel", "adamw_step_diff_lr"]
].max()
display(summary.style.format("{:.1e}"))
# %% [markdown]
# Float64 agrees to rounding. Float32 does not agree bit for bit: the tree and the branches sum the same numbers
# in a different order (longer SDPA rows, different batch shapes). The AdamW column is the largest parameter
# difference after one step, in units of the learning rate, and in float32 it is **not** small:

# %%
f32, f64 = exact[exact.dtype == "float32"], exact[exact.dtype == "float64"]
print(
    f"float64: max |Δ log p| {f64.max_dlogprob.max():.1e}, max relative gradient "
    f"difference {f64.grad_rel.max():.1e}, AdamW step "
    f"{f64.adamw_step_diff_lr.max():.1e} lr"
)
print(
    f"float32: max |Δ log p| {f32.max_dlogprob.max():.1e}, max relative gradient "
    f"difference {f32.grad_rel.max():.1e}, AdamW step "
    f"{f32.adamw_step_diff_lr.max():.2f} lr"
)

# %% [markdown]
# **Why one float32 AdamW step can differ by about a learning rate.** Adam's first step (bias-corrected, so
# `m̂ = g`, `v̂ = g²`) moves each weight by `lr · g / (|g| + ε)` (plus the weight decay, the same on both sides).
# For `|g| ≫ ε = 1e-8` that is ±lr whatever |g| is; for `|g|` near ε it swings from −lr to +lr as g crosses zero.
# A gradient entry whose true value is no larger than its float32 rounding error (relative ~1e-7 of the tensor's
# larger entries) can take steps of different size or sign in the tree and in the branches: Adam turns a rounding
# difference into a step difference of order lr. Below, for the float32 comparison with the largest step
# difference: the step difference against |g|, and the same difference predicted from the two gradients by the
# formula (every entry that differs by more than a tenth of lr, and a random sample of the others).


# %%
def adamw_step(model, loss_fn, lr=1e-3):
    """The gradient and the parameter change of one AdamW step, flattened."""
    m = make_model(model.cfg.ssm_every, torch.float32)
    m.load_state_dict(model.state_dict())
    opt = torch.optim.AdamW(m.parameters(), lr=lr)
    before = torch.cat([p.detach().flatten() for p in m.parameters()])
    loss_fn(m).backward()
    g = torch.cat([p.grad.flatten() for p in m.parameters()])
    opt.step()
    return g, torch.cat([p.detach().flatten() for p in m.parameters()]) - before


# %%
# the float32 comparison with the largest step difference in the table above
worst = f32.loc[f32.adamw_step_diff_lr.idxmax()]
print(
    f"largest float32 step difference: {worst.adamw_step_diff_lr:.2f} lr "
    f"({worst.arch}, seed {worst.seed}, tree {worst.tree})"
)
lr_demo, eps = 1e-3, 1e-8
mode = "mean" if worst.tree % 2 else "sum"
m32 = make_model(
    0 if worst.arch == "attention" else 2, torch.float32, s=int(worst.seed)
)
tree = exact_trees[int(worst.seed)][int(worst.tree)]
ser = tt.serialize(tree)
w0 = tt.token_weights(tree, ser, mode)
g_t, d_t = adamw_step(m32, lambda m: tt.tree_loss(m, tree, w0, ser))
g_b, d_b = adamw_step(m32, lambda m: tt.branch_avg_loss(m, tree, mode))
diff = (d_t - d_b).abs() / lr_demo
pred = (g_t / (g_t.abs() + eps) - g_b / (g_b.abs() + eps)).abs()
big = diff > 0.1
g_big = f"{g_b.abs()[big].max():.1e}" if big.any() else "—"
print(
    f"{int(big.sum())} of {len(diff)} entries differ by more than 0.1 lr (max "
    f"{diff.max():.2f} lr); their |g| is at most {g_big} (ε = {eps:.0e}); "
    f"{int((torch.sign(g_t) != torch.sign(g_b))[big].sum())} of them flip sign"
)
print(
    "entries with |g| > 1e-6: max step difference "
    f"{diff[g_b.abs() > 1e-6].max():.1e} lr"
)
print(
    "formula lr·g/(|g|+ε) vs torch's AdamW: max |predicted − measured| "
    f"{(pred - diff).abs().max():.1e} lr"
)

# %% tags=["hide-input"]
fig, ax = plt.subplots(figsize=(6, 3.4))
# every entry that differs by more than 0.1 lr, and a random sample of the others
shown = big.numpy() | (repro.rng(seed, 5).random(len(diff)) < 20_000 / len(diff))
x = g_b.abs().clamp_min(1e-14).numpy()[shown]
ax.scatter(
    x,
    diff.clamp_min(1e-9).numpy()[shown],
    s=4,
    alpha=0.4,
    label="measured (torch AdamW)",
)
ax.scatter(x, pred.clamp_min(1e-9).numpy()[shown], s=1, color="k", label="formula")
ax.axvline(eps, color="gray", ls=":", label="ε")
ax.set(
    xscale="log",
    yscale="log",
    xlabel="|gradient entry| (branches, float32)",
    ylabel="|Δ step| tree vs branches (lr)",
    title="Adam's first step amplifies rounding where |g| ≲ ε",
)
ax.legend(fontsize=8)
plt.tight_layout()
plt.show()

# %%
rec.check(
    "adam_step_explained",
    float((pred - diff).abs().max()),
    1e-2,
    op="<=",
    note="fp32 AdamW step difference (in lr) equals lr·(g/(|g|+ε)) evaluated on "
    "the two gradients",
)

# %%
rec.check(
    "logprob_equal_attention",
    float(f32[f32.arch == "attention"].max_dlogprob.max()),
    1e-5,
    op="<=",
    note="fp32, max |Δ log p| over all tokens of all trees",
)
rec.check(
    "logprob_equal_ssm",
    float(f32[f32.arch == "hybrid SSM"].max_dlogprob.max()),
    1e-5,
    op="<=",
    note="fp32, hybrid attention/SSM model",
)
rec.check(
    "grad_equal",
    float(f32.grad_rel.max()),
    1e-4,
    op="<=",
    note="fp32 max relative gradient difference",
)
assert f64.grad_rel.max() <= 1e-8 and f64.max_dlogprob.max() <= 1e-10, (
    "float64 must agree to rounding"
)

# %% [markdown]
# **Sibling isolation.** Changing every token of one sibling subtree must leave the other branch's logits
# *bit-identical* (float64, `torch.equal`), for the hybrid model too: masked keys get probability exactly 0, and
# the SSM state never flows between siblings.

# %%
# sharp weights: order and positions matter strongly
hyb = make_model(2, torch.float64, init_std=0.2)
sharp32 = make_model(2, torch.float32, init_std=0.2)
print(
    "sharp model (std 0.2), max |Δ log p| tree vs branches:",
    {
        str(next(m_.parameters()).dtype)[
            6:
        ]: f"{compare(m_, exact_trees[seed][0])['max_dlogprob']:.1e}"
        for m_ in (hyb, sharp32)
    },
)
iso_tree = tt.random_tree(repro.rng(seed, 2), 12, [2, 2], (4, 8), vocab)
changed = tt.TrajectoryTree(
    [tt.Node(list(nd.tokens), nd.parent, nd.loss_mask) for nd in iso_tree.nodes]
)
# the second child of the root and its whole subtree
victim = iso_tree.children[iso_tree.root][1]
for n in range(len(changed)):
    if victim in changed.ancestors(n):
        changed.nodes[n].tokens = [(t + 7) % vocab for t in changed.nodes[n].tokens]
s1, s2 = tt.serialize(iso_tree), tt.serialize(changed)
with torch.no_grad():
    a, b = tt.tree_logits(hyb, iso_tree, s1), tt.tree_logits(hyb, changed, s2)
keep = np.array([victim not in iso_tree.ancestors(int(n)) for n in s1.node])
print(
    f"untouched tokens: {keep.sum()}, changed tokens: {(~keep).sum()}; "
    f"max |Δ| on the changed branch: {(a[~keep] - b[~keep]).abs().max():.2f}"
)
rec.check(
    "sibling_isolation",
    bool(torch.equal(a[keep], b[keep])),
    True,
    note="other branch's logits bit-identical (float64, hybrid model)",
)

# %% [markdown]
# ## 3. What breaks: each fix is necessary
#
# Dropping any one of the five fixes gives errors many orders of magnitude above rounding (float64, the sharp
# hybrid model, the first exactness tree).

# %%
tree = exact_trees[seed][0]
ser = tt.serialize(tree)
ref = tt.path_logprobs(hyb, tree)
idx_k = tt.path_token_index(tree, ser)
N = len(ser)


def err(**kw):
    with torch.no_grad():
        lp = tt.tree_logprobs(hyb, tree, ser, **kw)
    return max((lp[ix] - r).abs().max().item() for ix, r in zip(idx_k, ref))


breaks = pd.DataFrame(
    [
        ("all fixes (Tree Training)", err()),
        (
            "causal mask instead of the tree mask",
            err(mask=torch.ones(N, N, dtype=torch.bool).tril()),
        ),
        ("DFS index instead of depth positions", err(pos=torch.arange(N))),
        ("shift-by-one labels instead of pred(t)", err(pred=np.arange(N) - 1)),
        ("no SSM state routing", err(route_state=False)),
        ("no conv-context routing", err(route_conv=False)),
    ],
    columns=["variant", "max |Δ log p| vs branches"],
).set_index("variant")
display(breaks.style.format("{:.2e}"))
assert (breaks.iloc[1:].values > 1e-4).all(), "every ablation must break exactness"

# %% [markdown]
# ## 4. Speed: one pass over the tree vs linearized branches
#
# For trees with K = b² leaves (a prompt, then b children per node at each of two levels; sizes in the parameters
# cell), we time one full training step (forward, backward, AdamW) of the attention model: the linearized baseline
# (each branch a causal micro-batch, gradients accumulated; no padding work), and the tree with two attention
# layouts. On the largest tree of each seed (the one the claims use) two more baselines run: all K branches as
# **one right-padded batch**, and the paper's baseline, **sequence packing** (all K branches concatenated into one
# call of N_flat tokens, attention in per-document causal blocks so no pair crosses documents, positions and SSM
# state restarting at every document: `tt.packed_inputs`, `tt.packed_loss`). There the baseline of each round is
# the fastest of the three, and packing alone has its own claims (§9):
#
# * **node blocks**: each node's queries attend to its ancestor path's keys plus its own (causal); exactly the
#   needed query-key pairs, like the paper's node-level kernel;
# * **dense mask**: one SDPA over the whole serialized tree with the N×N boolean tree mask, which also computes
#   every masked-out pair.
#
# **How it is timed.** The machine is shared and loaded, so all sides of a configuration are timed in **one run,
# interleaved** (`repro.benchmark`): one warm-up call each, then `repeats` rounds in which every side runs once,
# in a rotating order, so a burst of load from other jobs hits all sides alike. Each call is timed by the process
# CPU time of a 1-thread run (wall time is shown too). The speedup is the **median over rounds of the per-round
# ratio** and the error bars its interquartile range. The claims are judged on the **conservative end** of that
# range, the lower quartile of the per-round ratios: a speedup holds only if three rounds in four reach it.


# %%
def speed_tree(s, b):
    return tt.random_tree(repro.rng(s, 10 + b), root_len, [b, b], seg_len, vocab)


# %%
def bench(s, b, model, n_rep, dense=True, padded=False, tree=None):
    """Time linearized vs tree steps on the tree of seed s with b×b leaves (or on
    `tree`); with `padded`, the baseline of a round is the fastest of micro-batches,
    one padded batch and sequence packing."""
    tree = speed_tree(s, b) if tree is None else tree
    ser = tt.serialize(tree)
    w = torch.as_tensor(tt.token_weights(tree, ser), dtype=torch.float32)
    paths, masks = branch_inputs(tree, ser)
    K = len(paths)
    blocks, dense_mask = tt.node_blocks(tree, ser), tt.tree_mask_horizon(ser.horizon)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    fns = {
        "linear": lambda: linear_step(model, opt, paths, masks, K),
        "blocks": lambda: tree_step(model, opt, ser, blocks, w),
    }
    if dense:
        fns["dense"] = lambda: tree_step(model, opt, ser, dense_mask, w)
    if padded:
        X, M = padded_inputs(paths, masks)
        fns["padded"] = lambda: padded_step(model, opt, X, M, K)
        pk = tt.packed_inputs(paths, masks, K)
        fns["packed"] = lambda: packed_step(model, opt, pk)
    T = repro.benchmark(fns, n_rep, warmup=1)  # interleaved rounds, CPU time and wall
    row = timing_row(s, b, tree, ser, T, padded)
    ctx = (tree, ser, w, paths, masks, K, blocks, dense_mask, opt)
    return row, ctx


# %%
BASES = ["linear", "padded", "packed"]
NAMES = dict(
    linear="micro-batches", padded="one padded batch", packed="sequence packing"
)


def flop_ratio(df, d, layers):
    """A FLOP model of the speedup (tt.flop_speedup): per token the linear layers
    (12 d² per layer) and the head (d · vocab); per query-key pair 2 d per layer (q·k
    and the weighted sum of v). Forward and backward scale alike."""
    cols = [df.N_flat, df.N_tree, df.pairs_flat, df.pairs_tree]
    return pd.Series(
        [tt.flop_speedup(*v, d, layers, vocab) for v in zip(*cols)], index=df.index
    )


# %% [markdown]
# The row of one benchmark: the sizes of the tree, per side the median CPU seconds, and the per-round ratios
# (median and quartiles) of the tree against the baseline of each round.


# %%
def timing_row(s, b, tree, ser, T, padded):
    t = {"cpu": T.cpu, "wall": T.wall}
    base = {k: t[k]["linear"] for k in t}
    if padded:  # the fastest baseline, round by round
        base = {k: np.minimum.reduce([t[k][bn] for bn in BASES]) for k in t}
    pf, pt, pd_ = tt.attention_pairs(tree, ser)
    row = dict(seed=s, b=b, K=len(tree.leaves()), N_tree=tree.n_tree)
    row |= dict(N_flat=tree.n_flat, POR=tree.overlap_ratio, ideal=tree.ideal_speedup)
    row |= dict(pairs_flat=pf, pairs_tree=pt, pairs_dense=pd_)
    row["t_padded"] = row["t_packed"] = np.nan
    for side in T.cpu:
        row[f"t_{side}"] = T.median(side)
        if side not in BASES:
            r = tt.round_ratio(base["cpu"], t["cpu"][side])
            row[f"speedup_{side}"], row[f"{side}_q25"], row[f"{side}_q75"] = r
    row["t_base"] = float(np.median(base["cpu"]))
    # the timing noise of each side (IQR / median of its CPU times), for the conditions
    row["spread_base"] = tt.rel_spread(base["cpu"])
    row["spread_blocks"] = T.spread("blocks")
    row["speedup_wall"] = tt.round_ratio(base["wall"], t["wall"]["blocks"])[0]
    row["of_ideal"] = row["speedup_blocks"] / row["ideal"]
    row["of_ideal_q25"] = row["blocks_q25"] / row["ideal"]  # the conservative end
    for bn in BASES if padded else ():  # the tree against each baseline alone
        row[f"x_{bn}"] = tt.round_ratio(t["cpu"][bn], t["cpu"]["blocks"])[0]
    for k in ("vs_packed", "vs_packed_q25", "vs_packed_q75", "spread_packed"):
        row[k] = np.nan
    if padded:  # the tree against sequence packing, round by round
        r = tt.round_ratio(t["cpu"]["packed"], t["cpu"]["blocks"])
        row["vs_packed"], row["vs_packed_q25"], row["vs_packed_q75"] = r
        row["spread_packed"] = T.spread("packed")
    return row


# %%
speed_model = make_model(0, torch.float32)
speed_rows = []
for b in tqdm(branchings, desc="speed"):
    # the claim tree (largest b) gets `repeats` rounds, the smaller trees 3
    n_rep = repeats if b == max(branchings) else min(repeats, 3)
    row, ctx = bench(seed, b, speed_model, n_rep, padded=b == max(branchings))
    speed_rows.append(row)
# the largest tree's inputs, profiled below
tree, ser, w, paths, masks, K, blocks, dense, opt = ctx
speed = pd.DataFrame(speed_rows)
speed["flop_model"] = flop_ratio(speed, d_model, n_layer)
display(
    speed[
        [
            "K",
            "N_tree",
            "N_flat",
            "POR",
            "ideal",
            "flop_model",
            "t_linear",
            "t_padded",
            "t_blocks",
            "t_dense",
            "speedup_blocks",
            "blocks_q25",
            "blocks_q75",
            "speedup_dense",
            "speedup_wall",
            "of_ideal",
        ]
    ].round(3)
)


# %%
fig, ax = plt.subplots(1, 2, figsize=(10, 3.6))
ax[0].plot(speed.POR, speed.ideal, "k--", marker="o", label="ideal  N_flat / N_tree")
ax[0].plot(
    speed.POR,
    speed.flop_model,
    ":",
    color="gray",
    marker="s",
    label="FLOP model (tokens + attention pairs)",
)
for side, mk, lab in [("blocks", "o", "node blocks"), ("dense", "^", "dense mask")]:
    ax[0].errorbar(
        speed.POR,
        speed[f"speedup_{side}"],
        yerr=[
            speed[f"speedup_{side}"] - speed[f"{side}_q25"],
            speed[f"{side}_q75"] - speed[f"speedup_{side}"],
        ],
        marker=mk,
        capsize=3,
        label=f"measured: tree, {lab} (median, IQR)",
    )
for _, r in speed.iterrows():
    ax[0].annotate(
        f"K={int(r.K)}",
        (r.POR, r.ideal),
        textcoords="offset points",
        xytext=(-10, 6),
        fontsize=8,
    )
ax[0].set(
    xlabel="overlap ratio  POR = 1 − N_tree/N_flat",
    ylabel="speedup over linearized branches",
    title=f"one training step, CPU time (seed {seed})",
)
ax[0].legend(fontsize=8)
x = np.arange(len(speed))
for j, (col, lab) in enumerate(
    [
        ("pairs_flat", "linearized"),
        ("pairs_tree", "tree (node blocks)"),
        ("pairs_dense", "tree (dense mask)"),
    ]
):
    ax[1].bar(x + (j - 1) * 0.27, speed[col] / 1e6, 0.27, label=lab)
ax[1].set(
    xticks=x,
    xticklabels=[f"K={k}" for k in speed.K],
    ylabel="query-key pairs (millions)",
    title="attention work per layer",
)
ax[1].legend(fontsize=8)
plt.tight_layout()
plt.show()

# %% [markdown]
# **Where the time goes.** The ideal `N_flat/N_tree` counts tokens, i.e. it assumes every token costs the same.
# Attention does not: a branch of length L costs ~L²/2 pairs, and the tree removes fewer *pairs* than tokens
# (right panel: the shared prompt's pairs are saved, but each leaf token still attends to its whole ancestor
# path). At our width the attention pairs are a sizeable part of the work, so the FLOP model (grey) sits below the
# token ratio, and the measurement follows the FLOP model, not the token ratio. On the paper's 8B–32B models the
# per-token matrix products dominate (d ≥ 4096), which is why they get close to the token ratio. The dense mask
# wastes the masked-out pairs (N_tree² of them), and falls further behind at large K.
#
# The measurement against the FLOP model is printed under the profile. Where it falls short, the profile of one
# step on the largest tree (below, shares of self CPU time) shows why: with node blocks, a large share goes to
# "other" ops, chiefly gathering each node's ancestor keys and values (`k[:, :, ancestors]`) and scattering their gradients back, plus one small SDPA call
# per node and layer. A fused GPU kernel such as the paper's reads the ancestors' K/V in place; our CPU version
# pays for a copy.


# %%
def profile_step(fn, *args):
    """Self CPU time of one step, grouped: matrix products, attention kernels,
    optimizer, the rest. (The steps are warm: the benchmark above ran them.)
    """
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn(*args)
    ops = pd.DataFrame(
        [(e.key, e.self_cpu_time_total / 1e3) for e in prof.key_averages()],
        columns=["op", "ms"],
    )
    groups = {
        "attention (SDPA)": "scaled_dot_product|flash_attention",
        "matrix products": r"addmm|aten::mm|bmm|linear",
        "optimizer": "Optimizer|adam|_foreach",
    }
    out = {
        g: ops[ops.op.str.contains(p, case=False)].ms.sum() for g, p in groups.items()
    }
    out["other (elementwise, indexing, ...)"] = ops.ms.sum() - sum(out.values())
    return pd.Series(out)


prof_tab = pd.DataFrame(
    {
        "linearized": profile_step(linear_step, speed_model, opt, paths, masks, K),
        "tree, node blocks": profile_step(tree_step, speed_model, opt, ser, blocks, w),
        "tree, dense mask": profile_step(tree_step, speed_model, opt, ser, dense, w),
    }
)
display((prof_tab / prof_tab.sum()).round(3).style.format("{:.1%}"))
print(f"ms per step (profiled, K={K}):", prof_tab.sum().round(1).to_dict())
print(
    "measured (node blocks) ÷ FLOP model, by K:",
    dict(zip(speed.K, (speed.speedup_blocks / speed.flop_model).round(2))),
)

# %% [markdown]
# **Testing the explanation: a width sweep.** If the gap to the ideal comes from attention pairs (and per-node
# overhead) that do not shrink with the tree, then making the per-token matrix products heavier should close it:
# the fraction of the ideal should rise with `d_model`, as the FLOP model predicts. Widths where the matrix
# products dominate cost minutes per configuration on two CPU cores, so this sweep runs in a script,
# `data/02_tree_training/make_sweep.py` (`tt.width_sweep`), and the notebook loads its table (quick mode runs a
# tiny sweep live). For each seed's claim tree (K = 16 leaves) and each depth (1 and 2 attention layers) and width
# (d = 128 … 1024), it times one training step of three sides in interleaved rounds after a warm-up, process CPU
# time per call: micro-batches, sequence packing and the tree (node blocks). The baseline of each round is the
# faster of the two linearized layouts; the fraction of the ideal is the median per-round ratio ÷ N_flat/N_tree.
# The claim fits, per seed, a line to that fraction against log₂ d for the 2-layer model (its slope: the change
# per doubling of the width).

# %%
if quick:  # a tiny sweep live, on the quick claim trees
    sweep_cfg = dict(
        tt.checkpoint_config("sweep"),
        seeds=seeds,
        d_models=[32, 64],
        layers=[1, 2],
        root_len=root_len,
        branching=[max(branchings)] * 2,
        seg_len=list(seg_len),
        repeats=2,
    )
    sweep_rows, sweep_rounds = tt.width_sweep(sweep_cfg)
else:  # the script's table, made at the seeds of this run
    sweep_file = checkpoints.fetch("02_tree_training", "sweep.json")
    made = json.loads(sweep_file.read_text())
    sweep_cfg = tt.checkpoint_config("sweep")
    other = {
        k for k in sweep_cfg if k != "seeds" and made["config"].get(k) != sweep_cfg[k]
    }
    missing = [s for s in seeds if s not in made["config"]["seeds"]]
    if other or missing:
        raise ValueError(
            f"{sweep_file} was measured with another config ({sorted(other)}) or "
            f"lacks seeds {missing}; rerun: .venv/bin/python "
            "data/02_tree_training/make_sweep.py"
            + (f" --seeds {' '.join(map(str, seeds))}" if missing else "")
        )
    sweep_rows = [r for r in made["rows"] if r["seed"] in seeds]
    sweep_rounds = made["rounds"]
    print(
        f"loaded the sweep: {len(sweep_rows)} configurations, measured in "
        f"{made['wall_seconds']:.0f} s on {made['machine']['cores']} cores"
    )
sweep = pd.DataFrame(sweep_rows)


# %% [markdown]
# From the stored per-round CPU seconds, each configuration's ratios are recomputed round by round, as in the
# benchmarks above.


# %%
def sweep_ratios(r):
    """Per-round ratios of one sweep configuration (CPU time): the tree against the
    faster linearized layout, against each alone, and wall time."""
    key = f"seed{int(r.seed)}_L{int(r.layers)}_d{int(r.d_model)}"
    t = np.asarray(sweep_rounds[key], dtype=float)
    # sides: linear, packed, blocks; clocks: cpu, wall
    lin, pk, tree_ = t[0], t[1], t[2]
    med, q25, q75 = tt.round_ratio(np.minimum(lin[0], pk[0]), tree_[0])
    return pd.Series(
        dict(
            speedup=med,
            q25=q25,
            q75=q75,
            vs_linear=tt.round_ratio(lin[0], tree_[0])[0],
            vs_packed=tt.round_ratio(pk[0], tree_[0])[0],
            speedup_wall=tt.round_ratio(np.minimum(lin[1], pk[1]), tree_[1])[0],
        )
    )


sweep = pd.concat([sweep, sweep.apply(sweep_ratios, axis=1)], axis=1)
sweep["of_ideal"] = sweep.speedup / sweep.ideal
sweep["flop_of_ideal"] = sweep.flop_model / sweep.ideal
claim_layers = max(sweep.layers)  # the trend claim: the deeper model
trend = sweep[sweep.layers == claim_layers]
# slope of the fraction of the ideal per doubling of d, one per seed
slopes = {
    s: float(np.polyfit(np.log2(g.d_model), g.of_ideal, 1)[0])
    for s, g in trend.groupby("seed")
}
cols = ["seed", "layers", "d_model", "ideal", "t_linear", "t_packed", "t_blocks"]
cols += ["speedup", "q25", "q75", "speedup_wall", "of_ideal", "flop_of_ideal"]
display(sweep[cols].round(3))
print(
    "slope of fraction-of-ideal per doubling of d "
    f"({claim_layers} layers), by seed:",
    {int(s): round(v, 3) for s, v in slopes.items()},
)

# %% tags=["hide-input"]
fig, ax = plt.subplots(1, 2, figsize=(11, 3.6), sharey=True)
for a, (L, gl) in zip(ax, sweep.groupby("layers")):
    for j, (s, g) in enumerate(gl.groupby("seed")):
        a.errorbar(
            g.d_model,
            g.of_ideal,
            yerr=[(g.speedup - g.q25) / g.ideal, (g.q75 - g.speedup) / g.ideal],
            marker="o",
            capsize=3,
            color=plotting.PALETTE[j],
            label=f"measured, seed {s}",
        )
    f = gl.groupby("d_model").flop_of_ideal.mean()
    a.plot(f.index, f.values, "k:", marker="s", label="FLOP model (mean over seeds)")
    a.axhline(1, color="gray", lw=0.8)
    a.set(
        xscale="log",
        xticks=sorted(gl.d_model.unique()),
        xticklabels=sorted(gl.d_model.unique()),
        xlabel=f"d_model ({L} layer{'s' if L > 1 else ''})",
        title=f"claim trees (K={int(gl.K.iloc[0])}): fraction of the ideal",
    )
ax[0].set_ylabel("speedup ÷ ideal N_flat/N_tree")
ax[0].legend(fontsize=8)
plt.tight_layout()
plt.show()

# %% tags=["remove-input"]
n_up = sum(v > 0 for v in slopes.values())
by_d = trend.groupby("d_model")[["of_ideal", "flop_of_ideal"]].mean()
meas_flop = by_d.of_ideal / by_d.flop_of_ideal
pk_lin = (sweep.t_packed / sweep.t_linear).groupby(sweep.d_model).mean()
display(
    Markdown(
        f"**Reading the sweep.** For the {claim_layers}-layer model the FLOP model "
        f"predicts {by_d.flop_of_ideal.iloc[0]:.2f} → "
        f"{by_d.flop_of_ideal.iloc[-1]:.2f} "
        f"of the ideal from d = {by_d.index[0]} to {by_d.index[-1]}; the measurement, "
        f"mean over seeds, goes {by_d.of_ideal.iloc[0]:.2f} → "
        f"{by_d.of_ideal.iloc[-1]:.2f}, and its slope over log₂ d is positive at "
        f"{n_up} of {len(slopes)} seeds (claim `speedup_vs_ideal_trend`, with the "
        "condition `sweep_resolves_trend` on its noise). Measured ÷ FLOP model is "
        f"{meas_flop.iloc[0]:.2f} at the smallest width and {meas_flop.iloc[-1]:.2f} "
        "at the largest: "
        + (
            "the measurement tracks the FLOP count within 10% at every width, so the "
            "gap at small widths is the attention pairs the tree does not remove. "
            if (meas_flop - 1).abs().max() <= 0.1
            else "where it is far from 1, costs the FLOP count leaves out (per-node "
            "gathers of ancestor keys, per-op dispatch, memory traffic) weigh "
            "differently on the two sides. "
        )
        + "Packing ÷ micro-batches (CPU time, mean over seeds and depths) is "
        + ", ".join(f"{v:.2f} at d = {d}" for d, v in pk_lin.items())
        + (
            ": on this CPU one packed call of all N_flat tokens is not cheaper than "
            "K short calls (same FLOPs, larger tensors), so the micro-batches are the "
            "stronger baseline here."
            if (pk_lin > 1).all()
            else ": packing is the faster layout where this is below 1, and the "
            "baseline of each round is whichever was faster."
        )
    )
)

# %% [markdown]
# **Over seeds.** The speed claims use the largest tree of the branching sweep (§4's 4-layer model) for each
# seed: a different random tree and initialization per seed, timed the same way against all three baselines.

# %%
big = pd.DataFrame(
    [speed_rows[-1]]
    + [
        bench(
            s, max(branchings), make_model(0, torch.float32, s=s), repeats, False, True
        )[0]
        for s in tqdm(seeds[1:], desc="seeds")
    ]
)
display(
    big[
        [
            "seed",
            "K",
            "N_tree",
            "N_flat",
            "ideal",
            "t_linear",
            "t_padded",
            "t_packed",
            "t_blocks",
            "speedup_blocks",
            "blocks_q25",
            "blocks_q75",
            "speedup_wall",
            "of_ideal",
            "of_ideal_q25",
        ]
    ].round(3)
)
print(
    "padded batch ÷ micro-batches (CPU time), by seed:",
    (big.t_padded / big.t_linear).round(2).tolist(),
    "; packing ÷ micro-batches:",
    (big.t_packed / big.t_linear).round(2).tolist(),
)
print(
    "tree speedup over packing (median, lower quartile), by seed:",
    list(zip(big.vs_packed.round(2), big.vs_packed_q25.round(2))),
    "; of the ideal:",
    (big.vs_packed / big.ideal).round(2).tolist(),
)

# %%
# packing computes the same loss as the branches, in one call (float32, the claim tree)
with torch.no_grad():
    pk_loss = tt.packed_loss(speed_model, *tt.packed_inputs(paths, masks, K))
    br_loss = sum(
        -(
            m[1:]
            * speed_model(p, torch.arange(p.shape[1]))[0][0, :-1]
            .log_softmax(-1)
            .gather(-1, p[0, 1:, None])[:, 0]
        ).sum()
        / K
        for p, m in zip(paths, masks)
    )
rec.check(
    "packed_equals_branches",
    float(abs(pk_loss - br_loss) / abs(br_loss)),
    1e-5,
    op="<=",
    note="relative gap of the packed loss to the per-branch average loss, float32, "
    "claim tree",
)

# %% [markdown]
# For a hybrid model, packing must also restart every SSM layer's state and conv context at each document
# boundary (`tt.packed_loss` gives each document its own segment with no parent). On the hybrid float64 model and
# an exactness tree, packed against per-branch, with the reset and without it:

# %%
pk_tree = tt.TrajectoryTree(  # an exactness tree, SFT weights (no advantages)
    [tt.Node(list(n.tokens), n.parent, n.loss_mask) for n in exact_trees[seed][0].nodes]
)
pk_m = make_model(2, torch.float64, init_std=0.2)
pk_paths, pk_masks = branch_inputs(pk_tree, tt.serialize(pk_tree))
pk_masks = [m_.double() for m_ in pk_masks]
pk_in = tt.packed_inputs(pk_paths, pk_masks)
with torch.no_grad():
    ref_loss = tt.branch_avg_loss(pk_m, pk_tree).item()
    gaps = {
        reset: abs(tt.packed_loss(pk_m, *pk_in, reset_state=reset).item() - ref_loss)
        / abs(ref_loss)
        for reset in (True, False)
    }
print(
    f"relative loss gap, packed vs branches: state reset {gaps[True]:.1e}, "
    f"state running on across documents {gaps[False]:.1e}"
)
rec.check(
    "packed_resets_ssm_state",
    gaps[True],
    1e-12,
    op="<=",
    note="float64 hybrid model, packed loss with the SSM state reset per document vs "
    f"the per-branch average; without the reset the gap is {gaps[False]:.1e}",
)

# %% [markdown]
# ## 5. Trees sampled from a trained LM
#
# The random trees above have uniform token ids and a fixed layered shape. Rollout trees from a model look
# different: a group shares its prompt, each rollout stops at an end token (so lengths vary), and rollouts split
# where the model is uncertain, so forks sit at uneven depths and some nodes are a single token. To measure the
# method on such trees we train a small LM (the same `TreeLM`, attention only, d=64, 2 layers) for `sampler_steps`
# AdamW steps on a toy language (`tt.word_language`: 48 "words" of 2–5 tokens chained by a sparse word-level
# Markov chain with 3 possible successors per word; after any word the document ends with probability 3%). Inside
# a word the next token is determined, at a word boundary it is a real choice. Then, per seed, we sample a group of
# `sample_k` rollouts of a `sample_prompt`-token prompt in two ways:
#
# * **GRPO group**: independent samples; they share the prompt and whatever prefix they happen to agree on, and
#   `tt.prefix_tree` merges them into a tree (every rollout keeps its own leaf);
# * **forked rollouts** (tree-structured sampling, as in entropy-guided tree search for RL): one rollout, then
#   repeatedly a rollout is picked at random and forked at a position drawn with probability proportional to the
#   sampler's entropy there, and a new continuation is sampled from that point (`tt.sample_tree`).
#
# The sampler uses a key/value cache (its gateway input). Each seed has its own language, sampler initialization,
# prompt and samples. Each rollout gets a GRPO-style advantage (its reward, the fraction of even tokens, minus the
# group mean). On these trees we measure the same two things as above: exactness (float64, the trained sampler
# itself, tree vs branches, per-branch token-mean loss) and the speed of one training step of the §4 model
# (4 layers, d=128) with node blocks against the fastest of the three baselines (`sweep_repeats` interleaved
# rounds).
# The timed step, here as in §4, leaves out building the tree (merging the rollouts, serializing, the node-block
# layout); that cost is measured separately and printed as a share of one tree step.


# %%
def lm_loss(model, x):
    logits, _ = model(x[:, :-1], torch.arange(x.shape[1] - 1))
    return torch.nn.functional.cross_entropy(logits.flatten(0, 1), x[:, 1:].flatten())


def train_sampler(s):
    """A small LM trained on the toy language of seed s."""
    lang = tt.word_language(repro.rng(s, 60), vocab)
    win = sample_prompt + sample_new  # the longest context it will sample in
    corpus, _ = lang.stream(repro.rng(s, 61), 60 * win)
    lm = make_model(0, torch.float32, d=64, layers=2, s=s)

    def batch(step):
        i = repro.rng(s, 63, step).integers(0, len(corpus) - win - 1, 4)
        return torch.as_tensor(np.stack([corpus[j : j + win + 1] for j in i]))

    hist = train.fit(lm, lm_loss, batch, sampler_steps, lr=3e-3, seed=s, progress=False)
    test, ent = lang.stream(repro.rng(s, 62), 4 * (win + 1))
    with torch.no_grad():
        held = lm_loss(lm, torch.as_tensor(test).view(4, win + 1)).item()
    # a perfect model's cross-entropy on the same targets
    floor = float(ent.reshape(4, win + 1)[:, 1:].mean())
    info = dict(seed=s, loss_start=hist.loss[0], held_out=held, floor=floor)
    return lm, lang, dict(info, plateau=train.plateau(hist.loss))


def set_advantages(tree, n_prompt):
    r = np.array([np.mean(np.array(p[n_prompt:]) % 2 == 0) for p in tree.path_tokens()])
    for leaf, a in zip(tree.leaves(), r - r.mean()):
        tree.nodes[leaf].coef = float(a)


# %%
sampled_rows, sampled_trees, sampler_info = [], {}, []
for s in tqdm(seeds, desc="sampled trees"):
    lm, lang, info = train_sampler(s)
    sampler_info.append(info)
    prompt = lang.stream(repro.rng(s, 64), sample_prompt)[0].tolist()
    gen = torch.Generator().manual_seed(s)
    lm64 = make_model(0, torch.float64, d=64, layers=2)
    lm64.load_state_dict(lm.state_dict())
    for kind, name in [("fork", "forked rollouts"), ("group", "GRPO group")]:
        tree, comps = tt.sample_tree(
            lm, prompt, sample_k, sample_new, gen, kind, lang.eos
        )
        set_advantages(tree, len(prompt))
        sampled_trees[(s, name)] = tree
        # the tree's preparation, outside the timed step: merge, serialize, layout
        c0 = time.process_time()
        t_ = tt.prefix_tree(prompt, comps)
        tt.node_blocks(t_, tt.serialize(t_))
        prep = time.process_time() - c0
        ex = compare(lm64, tree, mode="mean")
        row = bench(
            s, 0, make_model(0, torch.float32, s=s), sweep_repeats, False, True, tree
        )[0]
        sampled_rows.append(
            dict(
                row,
                tree=name,
                nodes=len(tree),
                rollout_len=float(np.mean([len(c) for c in comps])),
                one_token_nodes=sum(len(nd.tokens) == 1 for nd in tree.nodes),
                max_dlogprob=ex["max_dlogprob"],
                grad_rel=ex["grad_rel"],
                prep_s=prep,
            )
        )

# %%
sampled = pd.DataFrame(sampled_rows)
display(pd.DataFrame(sampler_info).round(3))
display(
    sampled.assign(
        max_dlogprob=sampled.max_dlogprob.map("{:.1e}".format),
        grad_rel=sampled.grad_rel.map("{:.1e}".format),
    )[
        [
            "seed",
            "tree",
            "K",
            "nodes",
            "one_token_nodes",
            "rollout_len",
            "N_tree",
            "N_flat",
            "ideal",
            "t_linear",
            "t_padded",
            "t_packed",
            "t_blocks",
            "speedup_blocks",
            "blocks_q25",
            "blocks_q75",
            "of_ideal",
            "max_dlogprob",
            "grad_rel",
        ]
    ].round(3)
)
samp_flop = flop_ratio(sampled, d_model, n_layer) / sampled.ideal
print(
    "building the tree (prefix_tree, serialize, node_blocks) ÷ one tree step, max: "
    f"{(sampled.prep_s / sampled.t_blocks).max():.1%}"
)
print(
    "fraction of the ideal, sampled trees:",
    sampled.groupby("tree").of_ideal.apply(lambda v: v.round(2).tolist()).to_dict(),
    "; FLOP model:",
    samp_flop.groupby(sampled.tree).apply(lambda v: v.round(2).tolist()).to_dict(),
)
# the fraction of the ideal against each baseline alone (median per-round ratio)
by_base = pd.DataFrame(
    {b: sampled[f"x_{b}"] / sampled.ideal for b in BASES}
).assign(seed=sampled.seed, tree=sampled.tree)
display(by_base.round(2))


# %% tags=["remove-input"]
si = pd.DataFrame(sampler_info)
above = sampled.of_ideal > samp_flop


def span(v):
    return (
        f"{v.min():.2f}"
        if round(v.min(), 2) == round(v.max(), 2)
        else f"{v.min():.2f}–{v.max():.2f}"
    )


trained = bool((si.held_out < np.log(vocab)).all())
display(
    Markdown(
        "**Reading.** The sampler's held-out loss (first table) is "
        f"{span(si.held_out)}, against "
        f"{np.log(vocab):.2f} (log {vocab}) for an untrained, uniform model and the "
        "language's entropy floor of "
        f"{span(si.floor)}: it is "
        + (
            "a trained model, not a random one"
            if trained
            else "not better than uniform"
        )
        + f", and its training curve's plateau measure is {si.plateau.max():.3f} at "
        "most (condition "
        "`sampler_converged`). The printed fractions of "
        "the ideal on the sampled trees sit next to the FLOP model of §4. In this run "
        "the measurement is above the FLOP "
        f"model on {int(above[sampled.tree == 'GRPO group'].sum())} of {len(seeds)} "
        "GRPO groups and "
        f"{int(above[sampled.tree == 'forked rollouts'].sum())} of {len(seeds)} "
        "forked-rollout trees."
    )
)

# %% [markdown]
# **A fraction of the ideal at or above 1.** The token ratio `N_flat / N_tree` bounds the speedup only over a
# baseline whose cost is proportional to its tokens. Micro-batches also pay a fixed cost per call (K small
# forward and backward passes), and a padded batch computes its pads; sequence packing has neither (one call, no
# pads). So the fraction of the ideal against each baseline alone (the last table) says where an excess comes from.

# %% tags=["remove-input"]
grp_x = by_base[by_base.tree == "GRPO group"][BASES].mean()
WHY = dict(linear="the fixed cost of K separate calls", padded="the padding")
fork_x = by_base[by_base.tree == "forked rollouts"][BASES].mean()
over = [b for b in BASES if grp_x[b] >= 1]
display(
    Markdown(
        "On the GRPO groups (mean over seeds) the fraction of the ideal is "
        + ", ".join(f"{grp_x[b]:.2f} against {NAMES[b]}" for b in BASES)
        + "; on the forked rollouts "
        + ", ".join(f"{fork_x[b]:.2f}" for b in BASES)
        + " in the same order. "
        + (
            "No baseline gives a fraction at or above 1 in this run."
            if not over
            else (
                "The excess appears against "
                + " and ".join(NAMES[b] for b in over)
                + " but not against packing: it is "
                + " and ".join(WHY[b] for b in over)
                + ", which the token ratio does not count; against the paper's "
                "baseline the tree stays below the bound, as it should."
                if "packed" not in over
                else "Even against packing the fraction is at or above 1, so the "
                "excess is not only per-call overhead or padding: on this CPU, one "
                "packed call of all N_flat tokens costs more per token than the "
                "tree's call of N_tree tokens (larger tensors, the per-document "
                "attention blocks), which the token ratio does not model. We have not "
                "separated these costs further."
            )
        )
    )
)


# %%
def draw_tree(ax, tree, title=None):
    order = tree.dfs_order()
    leaves = tree.leaves()
    x = {}
    for n in reversed(order):
        kids = tree.children[n]
        x[n] = leaves.index(n) if not kids else np.mean([x[c] for c in kids])
    depth = {n: len(tree.ancestors(n)) - 1 for n in order}
    for n in order:
        p = tree.nodes[n].parent
        if p is not None:
            ax.plot([x[p], x[n]], [-depth[p], -depth[n]], color="gray", lw=1)
    ax.scatter(
        [x[n] for n in order],
        [-depth[n] for n in order],
        s=[min(300, 8 * len(tree.nodes[n].tokens)) for n in order],
        zorder=3,
    )
    ax.set(xticks=[], yticks=[], title=title or f"K = {len(leaves)} branches")
    ax.grid(False)


fig, ax = plt.subplots(
    1, 3, figsize=(12, 3.4), gridspec_kw=dict(width_ratios=[1, 1, 1.2])
)
for a, name in zip(ax[:2], ["forked rollouts", "GRPO group"]):
    t_ = sampled_trees[(seed, name)]
    draw_tree(a, t_, f"{name} (seed {seed}): ideal {t_.ideal_speedup:.2f}×")
fr = {"random, K=16": big.of_ideal.values}
for name, g in sampled.groupby("tree", sort=False):
    fr[f"sampled, {name}"] = g.of_ideal.values
for j, v in enumerate(fr.values()):
    ax[2].scatter(np.full(len(v), j), v, color=plotting.PALETTE[j], zorder=3)
    ax[2].plot([j - 0.2, j + 0.2], [v.mean()] * 2, color=plotting.PALETTE[j])
ax[2].axhline(0.8, color="gray", ls=":", label="claim threshold")
ax[2].set(
    xticks=range(len(fr)),
    xticklabels=list(fr),
    ylabel="speedup ÷ ideal",
    title="fraction of the ideal, by seed",
)
ax[2].tick_params(axis="x", labelsize=8)
ax[2].legend(fontsize=8)
plt.tight_layout()
plt.show()

# %% [markdown]
# ## 6. Training equivalence
#
# From the same initialization, `train_steps` AdamW steps (`helpers.train.fit`, the same clipping and schedule) with the tree
# loss and with the averaged per-branch loss. Each step sees a fresh tree (a prompt and 2×2 rollouts). SFT uses a
# summed loss over the rollout tokens; the RL variant gives each branch an advantage (its reward, the fraction of
# even tokens, minus the group mean, GRPO-style) and a per-branch token mean.


# %%
def step_tree_data(step, rl):
    g = repro.rng(seed, 100, step)
    tr = tt.random_tree(
        g, 32 if quick else 64, [2, 2], (8, 16) if quick else (16, 32), vocab
    )
    if rl:
        rewards = np.array([np.mean(np.array(p) % 2 == 0) for p in tr.path_tokens()])
        for leaf, r in zip(tr.leaves(), rewards - rewards.mean()):
            tr.nodes[leaf].coef = float(r)
    return tr


# %%
curves = {}
final_diff = {}
for rl in (False, True):
    mode = "mean" if rl else "sum"
    for dtype in (torch.float32, torch.float64):
        params = []
        for kind in ("tree", "branches"):
            m = make_model(0, dtype, init_std=0.02)

            def loss_fn(model, tr, kind=kind, mode=mode):
                if kind == "branches":
                    return tt.branch_avg_loss(model, tr, mode)
                s = tt.serialize(tr)
                return tt.tree_loss(model, tr, tt.token_weights(tr, s, mode), s)

            hist = train.fit(
                m,
                loss_fn,
                lambda step, rl=rl: step_tree_data(step, rl),
                train_steps,
                lr=3e-3,
                seed=seed,
                progress=False,
            )
            curves[(rl, str(dtype)[6:], kind)] = hist.loss
            params.append([p.detach().clone() for p in m.parameters()])
        final_diff[(rl, str(dtype)[6:])] = max(
            (a - b).abs().max().item() for a, b in zip(*params)
        )
print(
    pd.Series(
        {f"{'RL' if k[0] else 'SFT'} {k[1]}": v for k, v in final_diff.items()},
        name="max |Δθ| after the run",
    ).to_string()
)

# %% tags=["hide-input"]
fig, ax = plt.subplots(1, 2, figsize=(10, 3.2))
for j, rl in enumerate((False, True)):
    ax[j].plot(
        curves[(rl, "float32", "branches")],
        lw=4,
        alpha=0.35,
        label="per-branch average (fp32)",
    )
    ax[j].plot(
        curves[(rl, "float32", "tree")], "--", marker=".", label="tree loss (fp32)"
    )
    ax[j].set(
        xlabel="step", ylabel="loss", title="RL, advantages per branch" if rl else "SFT"
    )
    ax[j].legend(fontsize=8)
plt.tight_layout()
plt.show()

# %% [markdown]
# **PPO-clip on a tree.** With a clipped objective the per-token loss is `−(1/K) Σ_{k∋t} min(r_t A_k,
# clip(r_t, 1±ε) A_k)` with one ratio `r_t = exp(lp_t − lp_t^old)` per token. The min sits inside the sum over
# branches, so once clipping is active it is no longer a fixed weight times `r_t` (folding the advantages into
# `w_t` first is wrong when branches through a token have advantages of both signs); it still needs only one
# log-prob per token. `tt.tree_ppo_loss` against `tt.branch_ppo_loss` (float64, old log-probs perturbed so that
# ratios leave the clip range, advantages of both signs):

# %%
ppo_tree = exact_trees[seed][0]
for i, leaf in enumerate(ppo_tree.leaves()):
    ppo_tree.nodes[leaf].coef = [1.0, -0.5, 0.25, -1.0][i % 4]
ppo_ser = tt.serialize(ppo_tree)
ppo_m = make_model(2, torch.float64)
with torch.no_grad():
    lp_now = tt.tree_logprobs(ppo_m, ppo_tree, ppo_ser).numpy()
old_lp = np.minimum(lp_now + repro.rng(seed, 4).normal(0, 0.3, len(lp_now)), 0)
ppo_out = {}
for name, fn in [
    ("tree", lambda m: tt.tree_ppo_loss(m, ppo_tree, old_lp, 0.2, ppo_ser)),
    ("branches", lambda m: tt.branch_ppo_loss(m, ppo_tree, old_lp, 0.2)),
]:
    ppo_m.zero_grad()
    loss = fn(ppo_m)
    loss.backward()
    ppo_out[name] = (loss.item(), [p.grad.clone() for p in ppo_m.parameters()])
with torch.no_grad():
    r = torch.exp(tt.tree_logprobs(ppo_m, ppo_tree, ppo_ser) - torch.as_tensor(old_lp))
    wk = torch.as_tensor(tt.token_weights(ppo_tree, ppo_ser)) * len(ppo_tree.leaves())
    folded = -torch.minimum(r * wk, r.clamp(0.8, 1.2) * wk)[
        torch.as_tensor(ppo_ser.loss_mask)
    ].sum().item() / len(ppo_tree.leaves())
ppo_grad_rel = max(
    ((a - b).norm() / b.norm().clamp_min(1e-30)).item()
    for a, b in zip(ppo_out["tree"][1], ppo_out["branches"][1])
)
clipped = float(((r < 0.8) | (r > 1.2)).double().mean())
print(
    f"PPO-clip loss: tree {ppo_out['tree'][0]:.12f}, branches "
    f"{ppo_out['branches'][0]:.12f}; max relative grad difference {ppo_grad_rel:.1e}; "
    f"{clipped:.0%} of ratios outside the clip range; advantages folded into w_t "
    f"first: {folded:.6f}"
)
rec.check(
    "ppo_clip_equal",
    ppo_grad_rel,
    1e-8,
    op="<=",
    note="float64 hybrid model, PPO-clip with one ratio per token, tree vs branches",
)

# %% [markdown]
# ## 7. Redundancy-Free Tree Partitioning
#
# When a tree does not fit in memory, it is cut **at node boundaries into connected subtrees** of at most
# `budget` tokens. A child partition does not recompute its ancestors: its parent hands it a **gateway**: per
# attention layer the (rotated) keys and values of all ancestor tokens of the cut node, per SSM layer the parent
# node's end state and conv context, and the depth offset of its positions. In the child these are fresh leaves
# (`g.detach().requires_grad_()`); after the child's backward their gradients are relayed to the parent's tensors
# (accumulated in fp32 or wider, rounded once) and the parent runs
# `torch.autograd.backward([loss_P, *sources], [1, *relayed])`.
# Partitions run depth-first (forward P → each child subtree, forward and backward → backward P), so only the graphs
# of **one chain** of partitions are alive at a time. Each partition owns the labels whose predicting position lies
# in it (so the first token of a cut node is scored in its parent's partition).
#
# A *naive* partitioning re-prepends every ancestor to each partition instead, recomputes them, and runs each
# partition's forward and backward on its own. We run it for real (`tt.naive_partitioned_backward`) next to the full
# tree and the redundancy-free schedule.
#
# **Measured from outside the method.** The schedule's own bookkeeping is not evidence, so:
#
# * **tokens**: a forward hook on the model's token embedding counts what the model actually processes
#   (`tt.count_tokens`);
# * **memory**, two ways (`tt.track_memory`): (i) the distinct storages kept alive by the tensors autograd saved
#   for backward: each is handed to autograd in a holder whose finalizer fires when autograd drops it, so a graph
#   that is never freed stays counted; (ii) the C heap in use (glibc's `mallinfo2`, which holds every torch CPU
#   tensor: activations, gateway copies, gradient accumulators, gradients), sampled at every save, every use in
#   backward and every partition boundary, minus the heap before the step. Transients inside a single op are not
#   sampled, on all sides alike.
#
# The test tree has about three times the budget (one per seed); we use the hybrid model (float64) so that the
# gateway carries SSM states and conv contexts too.

# %%
pm = make_model(2, torch.float64, d=32, layers=2)  # attention, then SSM
METHODS = {"full tree": None, "redundancy-free": tt.partitioned_backward}
METHODS["naive partition"] = tt.naive_partitioned_backward


# %%
def partition_case(s):
    tr = tt.random_tree(
        repro.rng(s, 3),
        budget * 3 // 4,
        [2, 3],
        (budget * 3 // 16, budget * 3 // 8),
        vocab,
    )
    tr = tt.split_long_nodes(tr, budget)
    for i, leaf in enumerate(tr.leaves()):
        # an RL-style weighting, to be general
        tr.nodes[leaf].coef = [1.0, -0.5, 0.25, 2.0, -1.0, 0.5][i % 6]
    sr = tt.serialize(tr)
    return tr, sr, tt.token_weights(tr, sr), tt.partition_tree(tr, budget)


def run_method(name, tr, sr, wt, prt, on_event=None):
    fn = METHODS[name]
    if fn is None:
        loss = tt.tree_loss(pm, tr, wt, sr)
        loss.backward()
        return loss.item()
    return fn(pm, tr, prt, wt, sr, on_event=on_event)["loss"]


# %%
def measure(name, tr, sr, wt, prt):
    """One forward+backward, with tokens, memory and gradients measured outside."""
    pm.zero_grad(set_to_none=True)
    own, before = {}, {}
    with tt.count_tokens(pm) as c, tt.track_memory(pm) as mem:

        def on_event(what, pid):
            mem.mark()
            if what == "forward":
                before[pid] = mem.saved_live
            elif what == "forward_done":
                own[pid] = mem.saved_live - before[pid]

        loss = run_method(name, tr, sr, wt, prt, on_event)
    return dict(
        method=name,
        loss=loss,
        tokens=c.tokens,
        saved_peak=mem.saved_peak,
        saved_left=mem.saved_live,
        heap_peak=mem.heap_peak,
        chain_bound=tt.chain_bound(prt, own) if own else np.nan,
        grads=[p.grad.clone() for p in pm.parameters()],
    )


def rel_diff(ga, gb):
    return max(
        ((a - b).norm() / b.norm().clamp_min(1e-30)).item() for a, b in zip(ga, gb)
    )


# %%
# one unmeasured call of each schedule first: a process's first call may allocate
# buffers it keeps, which are not the step's; what each first call left on the heap
# (gradients freed, garbage collected before both readings) is measured here
first_kept = {}
for n in METHODS:
    gc.collect()
    h0 = tt.heap_in_use()
    run_method(n, *partition_case(seed))
    pm.zero_grad(set_to_none=True)
    gc.collect()
    h1 = tt.heap_in_use()
    first_kept[n] = np.nan if h0 is None or h1 is None else (h1 - h0) / 2**20
print(
    "heap kept after the first (unmeasured) call of each schedule, MiB:",
    {k: round(v, 2) for k, v in first_kept.items()},
)
mem_rows = []
for s in tqdm(seeds, desc="partitioning"):
    p_tree, p_ser, p_w, parts = partition_case(s)
    names = list(METHODS) if s == seed else ["full tree", "redundancy-free"]
    res = {n: measure(n, p_tree, p_ser, p_w, parts) for n in names}
    for r in res.values():
        mem_rows.append(
            dict(
                {k: v for k, v in r.items() if k != "grads"},
                seed=s,
                N_tree=p_tree.n_tree,
                N_flat=p_tree.n_flat,
                naive_formula=tt.naive_partition_tokens(p_tree, parts),
                n_parts=len(parts),
                loss_rel=abs(r["loss"] - res["full tree"]["loss"])
                / abs(res["full tree"]["loss"]),
                grad_rel=rel_diff(r["grads"], res["full tree"]["grads"]),
            )
        )
    if s == seed:  # keep the first seed's tree for the timing and the figure
        t_case = (p_tree, p_ser, p_w, parts)
mem_tab = pd.DataFrame(mem_rows)
p_tree, p_ser, p_w, parts = t_case
print(
    f"seed {seed}: N_tree = {p_tree.n_tree} "
    f"(≈ {p_tree.n_tree / budget:.1f}× the budget {budget}), "
    f"{len(parts)} partitions:",
    [sum(len(p_tree.nodes[n].tokens) for n in P.nodes) for P in parts],
)
# time the three schedules in one interleaved run (no measuring hooks attached)
pt = repro.benchmark(  # an illustration, no claim: two rounds, warmed up above
    {n: (lambda n=n: run_method(n, p_tree, p_ser, p_w, parts)) for n in METHODS},
    min(sweep_repeats, 2),
    warmup=0,
)
p_time = {n: pt.median(n) for n in METHODS}
mem_tab["cpu_s"] = [
    p_time[r.method] if r.seed == seed else np.nan for r in mem_tab.itertuples()
]

# %%
MiB = 2**20
show = mem_tab.assign(
    saved_peak_MiB=mem_tab.saved_peak / MiB,
    chain_bound_MiB=mem_tab.chain_bound / MiB,
    heap_peak_MiB=mem_tab.heap_peak.astype(float) / MiB,
)
display(
    show[
        [
            "seed",
            "method",
            "tokens",
            "N_tree",
            "cpu_s",
            "saved_peak_MiB",
            "chain_bound_MiB",
            "heap_peak_MiB",
            "grad_rel",
        ]
    ].style.format(precision=3, na_rep="")
)

# %% tags=["hide-input"]
first = mem_tab[mem_tab.seed == seed].set_index("method")
tokens = {
    "flat (branches)": p_tree.n_flat,
    "tree (one pass)": int(first.tokens["full tree"]),
    "naive partition": int(first.tokens["naive partition"]),
    "redundancy-free partition": int(first.tokens["redundancy-free"]),
}
fig, ax = plt.subplots(1, 3, figsize=(12, 3.6))
ax[0].bar(list(tokens), list(tokens.values()), color=plotting.PALETTE[:4])
ax[0].set(ylabel="tokens the model processed", title="tokens (counted by a hook)")
x = np.arange(len(first))
heap = first.heap_peak.astype(float) / MiB
ax[1].bar(x - 0.2, heap, 0.4, label="C heap in use (peak)")
ax[1].bar(x + 0.2, first.saved_peak / MiB, 0.4, label="storages saved for backward")
ax[1].set(
    xticks=x, xticklabels=first.index, ylabel="MiB", title="peak memory of one step"
)
ax[1].legend(fontsize=8)
ax[2].bar(first.index, [p_time[n] for n in first.index], color=plotting.PALETTE[4:7])
ax[2].set(ylabel="CPU s (median)", title="time of one forward+backward")
for a in ax:
    a.tick_params(axis="x", labelrotation=20)
plt.tight_layout()
plt.show()

# %%
rf = mem_tab[mem_tab.method == "redundancy-free"]
naive = mem_tab[mem_tab.method == "naive partition"]
full = mem_tab[mem_tab.method == "full tree"].set_index("seed")
rec.check(
    "partition_tokens",
    int((rf.tokens - rf.N_tree).abs().max()),
    0,
    op="==",
    note="tokens the model embedded (forward hook) during the redundancy-free step == "
    "N_tree, every seed",
)
rec.check(
    "naive_partition_tokens",
    bool(
        (naive.tokens == naive.naive_formula).all()
        and (naive.tokens > naive.N_tree).all()
    ),
    True,
    note="the naive partitioning really processes its formula's count, above N_tree",
)
rec.check(
    "partition_grad_equal",
    float(mem_tab.grad_rel.max()),
    1e-8,
    op="<=",
    note="float64 hybrid model, max relative parameter-gradient difference of both "
    "partitionings vs the unpartitioned tree",
)

# %%
rf_i = rf.set_index("seed")
peak_ok = bool(
    (rf_i.saved_peak <= 1.01 * rf_i.chain_bound).all()
    and (rf_i.saved_peak < full.saved_peak).all()
    and (mem_tab.saved_left == 0).all()
)
rec.check(
    "partition_peak_memory",
    peak_ok,
    True,
    note="storages held by saved tensors (finalizer-tracked): peak <= chain bound "
    "(sum along a chain of each partition's own, measured at its forward) and < full "
    "tree; nothing left alive after the step",
)
heap_known = rf_i.heap_peak.notna().all()
mem_ratio = (
    rf_i.heap_peak.astype(float) / full.heap_peak.astype(float)
    if heap_known
    else rf_i.saved_peak / full.saved_peak
)
print(
    "peak ratio redundancy-free ÷ full tree, by seed:",
    mem_ratio.round(3).to_dict(),
    "(C heap)" if heap_known else "(saved storages; no mallinfo2 here)",
)
print(
    "saved-storage peak ratio, by seed:",
    (rf_i.saved_peak / full.saved_peak).round(3).to_dict(),
)
nv = naive.iloc[0]
print(
    f"naive partitioning (seed {seed}): heap peak ÷ full tree "
    f"{float(nv.heap_peak) / float(full.heap_peak[seed]):.3f}, tokens ÷ N_tree "
    f"{nv.tokens / nv.N_tree:.2f}"
)

# %% [markdown]
# **Reading the two memory measures.** The saved-storage peak is what the paper's bound is about (the activations
# kept for backward), and the check above asserts it per seed. The C heap also holds every transient of the step
# (gradient buffers inside backward, the fp32 relay accumulators, gateway copies) but is only sampled at saves,
# uses and partition boundaries, and in a notebook kernel other threads allocate too; one sample per seed of it is
# noisier, which is why the memory claim is recorded per seed with its verdict as measured, not averaged away.

# %% tags=["remove-input"]
kept = pd.Series(first_kept).dropna()
nv_ratio = float(nv.heap_peak) / float(full.heap_peak[seed])
display(
    Markdown(
        (
            f"The naive partitioning is the cheaper one in memory in this run (seed "
            f"{seed}: heap peak ÷ full tree {nv_ratio:.2f} against "
            f"{float(mem_ratio[seed]):.2f} for the redundancy-free schedule): it holds "
            "one partition's graph at a time, ancestors included, where the "
            "redundancy-free schedule holds a chain of partitions plus the gateway "
            "copies and relay accumulators. "
            if nv_ratio < float(mem_ratio[seed])
            else f"In this run the redundancy-free schedule's peak (seed {seed}: "
            f"{float(mem_ratio[seed]):.2f} of the full tree's) is not above the naive "
            f"partitioning's ({nv_ratio:.2f}). "
        )
        + "What the naive partitioning pays is compute: it embeds and runs every "
        f"ancestor again ({nv.tokens / nv.N_tree:.2f}× the tokens). The paper's point "
        "is the combination: no recomputation at all, with the peak still bounded by "
        "one chain."
    )
)
display(
    Markdown(
        "**Known limits.** (i) The heap is process-wide: in a notebook kernel other "
        "threads allocate too, and transients inside a single op are not seen. It is "
        "sampled at every save and every use in backward. A schedule's first call in a "
        "process can keep buffers that later calls reuse; "
        + (
            "in this run the first call of each schedule left "
            + ", ".join(f"{v:.2f} MiB ({k})" for k, v in kept.items())
            + " on the heap after its gradients were freed, "
            if len(kept)
            else "this platform has no heap counter, "
        )
        + "and each schedule runs once, unmeasured, before the measurements, so that "
        "such buffers are not counted as a step's memory. "
        f"(ii) The width sweep stops at d = {sweep.d_model.max()} and "
        f"{sweep.layers.max()} layers; the paper's models (d ≥ 4096, dozens of layers) "
        "are in the regime the FLOP model puts closest to the token ratio, which this "
        "sweep approaches but does not reach. (iii) The sampled trees (§5) come from a "
        "toy language and a d = 64 LM; real LLM rollouts are longer, and where they "
        "branch depends on the task and the sampler."
    )
)

# %% [markdown]
# ## 8. Interaction: how the branching factor changes the tree
#
# The slider moves over the branching factor b (a small tree: an 8-token prompt and two levels of b children).
# Left: the tree; middle: its DFS tree mask (white = may attend); right: the tokens a linearized pipeline computes
# vs the tree. The frames were computed when the notebook ran, so the slider works in the static page.


# %%
def small_tree(b, depth=2):
    return tt.random_tree(repro.rng(seed, 50, b), 8, [b] * depth, (3, 6), vocab)


def draw_frame(fig, b):
    tree = small_tree(b)
    ser = tt.serialize(tree)
    a1, a2, a3 = fig.subplots(1, 3, gridspec_kw=dict(width_ratios=[1.2, 1, 0.8]))
    draw_tree(a1, tree)
    a2.imshow(
        tt.tree_mask_horizon(ser.horizon).numpy(), cmap="gray", interpolation="nearest"
    )
    a2.set(title=f"tree mask, N_tree = {tree.n_tree}", xticks=[], yticks=[])
    a2.grid(False)
    a3.bar(["flat", "tree"], [tree.n_flat, tree.n_tree], color=plotting.PALETTE[:2])
    a3.set(title=f"ideal speedup {tree.ideal_speedup:.2f}×", ylabel="tokens")


plotting.static_slider(
    [1, 2, 3, 4, 5], draw_frame, figsize=(10, 3.4), label="branching factor b"
)

# %% [markdown]
# Live controls (Jupyter / Colab): branching factor and depth.


# %%
def live(b=3, depth=2):
    fig = plt.figure(figsize=(10, 3.4))
    tree = tt.random_tree(repro.rng(seed, 50, b), 8, [b] * depth, (3, 6), vocab)
    ser = tt.serialize(tree)
    a1, a2 = fig.subplots(1, 2)
    draw_tree(a1, tree)
    a2.imshow(
        tt.tree_mask_horizon(ser.horizon).numpy(), cmap="gray", interpolation="nearest"
    )
    a2.set(
        title=f"N_flat = {tree.n_flat}, N_tree = {tree.n_tree}, ideal "
        f"{tree.ideal_speedup:.2f}×"
    )
    a2.grid(False)
    plt.show()


plotting.live_controls(live, b=(1, 5), depth=(1, 3))

# %% [markdown]
# ## 9. The claims record
#
# The speedup claims use the largest tree of the branching sweep for each seed, the node-block layout (the
# analogue of the paper's node-level kernel) and, round by round, the fastest of the three baselines
# (micro-batches, one padded batch, sequence packing). The paper's 6.2× is on 64 GPUs with real rollouts whose <!-- paper -->
# ideal was ~6.5×; the comparable quantity at our scale is the fraction of the ideal. The paper's own baseline, <!-- paper -->
# **sequence packing**, also has claims of its own (`speedup_vs_packed`, `fraction_of_ideal_vs_packed`). The
# sampled-tree claim measures the fraction again on the forked rollouts of §5. The trend claim tests our
# explanation of the gap (the width sweep of the script); the memory claim uses the measured C heap.
#
# **The conservative end.** Every speedup and fraction claim (all of them `>` or `>=`) is judged on the lower
# quartile of its per-round ratios, not the median, so a **held** verdict does not turn on a lucky round when other
# jobs load the machine; the medians and the wall time ratios are in each claim's note. For a `>=` claim the lower
# quartile is conservative only in that direction: it makes "not held" easier, so after the record the reading
# checks each "not held" seed at the upper quartile too. The trend claim is a slope over the medians of the sweep;
# its noise is handled by its condition, not by a quartile.
#
# **Conditions**, fixed from what each claim needs (the book-wide rules). A timing says something only if its
# noise is below the effect: for each seed, the spread (IQR ÷ median of the CPU times) of the tree side and of the
# baseline is smaller than the effect `|speedup − 1|` (`timing_resolved`, `timing_resolved_packed` against
# sequence packing, and `timing_resolved_sampled` on the forked rollouts), and for the fraction of the ideal
# smaller than its distance from the claim's bar (`ideal_resolved`; `ideal_resolved_packed` against packing).
# The trend over widths needs a noise smaller than the rise it is looking for: the median spread of the
# per-round ratios over the claim depth's widths is below the relative rise of the fraction of the ideal that the
# FLOP model predicts over the same widths (`sweep_resolves_trend`). The sampled trees come from a trained LM: its
# training loss is flat at the end (`train.plateau ≤ 0.05`, `sampler_converged`). Exactness and memory are not <!-- paper -->
# timings of a learned model and need no condition.

# %%
fork = sampled[sampled.tree == "forked rollouts"]
grp = sampled[sampled.tree == "GRPO group"]


def noise_over_effect(df):
    """Per row: the larger spread of the two sides ÷ the effect |speedup − 1|."""
    return (
        np.maximum(df.spread_base, df.spread_blocks) / (df.speedup_blocks - 1).abs()
    ).tolist()


def sweep_noise_over_rise(g):
    """One seed's sweep: median spread of the per-round ratios ÷ the FLOP model's
    relative rise."""
    spread = ((g.q75 - g.q25) / g.speedup).median()
    f = g.sort_values("d_model").flop_of_ideal.to_numpy()
    return float(spread / max(f[-1] / f[0] - 1, 1e-12))


# %%
rec.condition(
    "timing_resolved",
    noise_over_effect(big),
    "<",
    1.0,
    unit="max spread ÷ |speedup − 1|",
    statement="the timing noise of each side is below the speedup (claim tree)",
)
IDEAL_BAR = 0.8  # speedup_vs_ideal's bar: the measured speedup reaches 80% of the ideal
rec.condition(
    "ideal_resolved",
    (
        np.maximum(big.spread_base, big.spread_blocks)
        / (big.of_ideal / IDEAL_BAR - 1).abs()
    ).tolist(),
    "<",
    1.0,
    unit="max spread ÷ |fraction of ideal / bar − 1|",
    statement="the timing noise is smaller than the fraction of ideal's distance from "
    "the claim's bar",
)
rec.condition(
    "ideal_resolved_packed",
    (
        np.maximum(big.spread_packed, big.spread_blocks)
        / (big.vs_packed / big.ideal / IDEAL_BAR - 1).abs()
    ).tolist(),
    "<",
    1.0,
    unit="max spread ÷ |fraction of ideal / bar − 1|",
    statement="the timing noise of the tree and of packing is smaller than the "
    "fraction of ideal's distance from the claim's bar",
)
rec.condition(
    "timing_resolved_packed",
    (
        np.maximum(big.spread_packed, big.spread_blocks) / (big.vs_packed - 1).abs()
    ).tolist(),
    "<",
    1.0,
    unit="max spread ÷ |speedup over packing − 1|",
    statement="the timing noise of the tree and of packing is below their ratio (claim "
    "tree)",
)

# %%
rec.condition(
    "timing_resolved_sampled",
    noise_over_effect(fork),
    "<",
    1.0,
    unit="max spread ÷ |speedup − 1|",
    statement="the timing noise of each side is below the speedup (forked rollouts)",
)
rec.condition(
    "sweep_resolves_trend",
    [sweep_noise_over_rise(g) for _, g in trend.groupby("seed")],
    "<",
    1.0,
    unit="median ratio spread ÷ FLOP-model rise over the sweep",
    statement="the width sweep's timing noise is below the rise it tests for",
)
rec.condition(
    "sampler_converged",
    [i_["plateau"] for i_ in sampler_info],
    "<=",
    0.05,
    unit="train.plateau of the sampler LM's loss",
    statement="the sampler LM is trained to its plateau",
)
f64_by_seed = pd.concat(
    [
        f64.groupby("seed").max_dlogprob.max(),
        sampled.groupby("seed").max_dlogprob.max(),
    ],
    axis=1,
).max(axis=1)
naive_ratio = (
    naive.set_index("seed").heap_peak.astype(float) / full.heap_peak.astype(float)
).dropna()

# %% tags=["hide-input"]
# the notes: diagnostics written from the numbers (bookkeeping, not rules)
NOTES = {
    "speedup": f"K={int(big.K.iloc[0])}, ideal per seed {big.ideal.round(2).tolist()}; "
    f"median per seed {big.speedup_blocks.round(2).tolist()}, IQR "
    f"{list(zip(big.blocks_q25.round(2), big.blocks_q75.round(2)))}; wall-time ratios "
    f"{big.speedup_wall.round(2).tolist()}; baseline = the fastest of micro-batches, "
    "one padded batch and packing, round by round, CPU s per step",
    "speedup_vs_ideal": f"d={d_model}, {n_layer} layers; medians "
    f"{big.of_ideal.round(2).tolist()}; FLOP model predicts "
    f"{(flop_ratio(big, d_model, n_layer) / big.ideal).round(2).tolist()} of ideal; "
    "baseline = the ideal N_flat/N_tree per seed",
    "speedup_vs_packed": f"K={int(big.K.iloc[0])}; packing: all branches in one call, "
    "per-document causal attention blocks (no pair across documents), positions "
    "restarting per document (SSM state reset, check packed_resets_ssm_state). "
    f"Medians {big.vs_packed.round(2).tolist()}, IQR "
    f"{list(zip(big.vs_packed_q25.round(2), big.vs_packed_q75.round(2)))}; baseline = "
    "packing's CPU s per step",
    "fraction_of_ideal_vs_packed": f"ideal per seed {big.ideal.round(2).tolist()}; "
    f"medians {(big.vs_packed / big.ideal).round(2).tolist()}",
    "speedup_vs_ideal_trend": f"{claim_layers} layers, d in "
    f"{sorted(trend.d_model.unique().tolist())}, "
    f"{sweep_cfg['repeats']} interleaved rounds each (script make_sweep.py); "
    "fractions by seed and d: "
    + "; ".join(
        f"{s}: {g.of_ideal.round(2).tolist()}" for s, g in trend.groupby("seed")
    )
    + "; FLOP model "
    + str(trend.groupby("d_model").flop_of_ideal.mean().round(2).tolist()),
    "speedup_vs_ideal_sampled": f"K={sample_k} forked rollouts of a "
    f"{sample_prompt}-token prompt, sampled from a trained d=64 LM; median speedups "
    f"{fork.speedup_blocks.round(2).tolist()}, fractions "
    f"{fork.of_ideal.round(2).tolist()}; GRPO groups (independent samples): "
    f"ideal {grp.ideal.round(2).tolist()}, fraction {grp.of_ideal.round(2).tolist()}; "
    "baseline = the ideal per seed",
    "exact_equivalence": f"{n_exact_trees} random trees per seed (attention and hybrid "
    "SSM) and 2 sampled trees per seed (trained sampler), max over both; sampled alone "
    f"{sampled.max_dlogprob.max():.1e}; float32: "
    f"{f32.max_dlogprob.max():.1e} (rounding order); gradients fp64 rel "
    f"{f64.grad_rel.max():.1e}; "
    f"{train_steps}-step training fp64 max |Δθ| "
    f"{max(v for k, v in final_diff.items() if k[1] == 'float64'):.1e}",
    "partition_memory_ratio": "baseline = full-tree peak, MiB; tree ≈ "
    f"{p_tree.n_tree / budget:.1f}× the "
    f"budget; naive partitioning's ratio {naive_ratio.round(3).tolist()} at "
    f"{(naive.tokens / naive.N_tree).round(2).tolist()}× the tokens",
}

# %%
# id: (statement, paper, measured per seed, op, target, unit, baseline, conditions)
CLAIMS = {
    "speedup": (
        "Tree Training speeds up a training step over linearized branches",
        "up to 6.2× end to end (64 GPUs, ideal ≈ 6.5×)",
        big.blocks_q25.tolist(),
        ">",
        1.0,
        "× (CPU time per step, lower quartile of interleaved rounds)",
        big.t_base.round(4).tolist(),
        ("timing_resolved",),
    ),
    "speedup_vs_ideal": (
        "The measured speedup captures most of the ideal N_flat/N_tree",
        "≈ 0.95 of the bound (6.2× of ≈ 6.5×)",
        big.of_ideal_q25.tolist(),
        ">=",
        IDEAL_BAR,
        "fraction of ideal (lower quartile of the rounds)",
        big.ideal.round(3).tolist(),
        ("timing_resolved", "ideal_resolved"),
    ),
    "speedup_vs_packed": (
        "Tree Training is faster than the paper's baseline, sequence packing",
        "up to 6.2× end to end over packed sequences",
        big.vs_packed_q25.tolist(),
        ">",
        1.0,
        "× (CPU time per step vs packing, lower quartile of interleaved rounds)",
        big.t_packed.round(4).tolist(),
        ("timing_resolved_packed",),
    ),
}

# %%
CLAIMS |= {
    "fraction_of_ideal_vs_packed": (
        "Against sequence packing the speedup captures most of the ideal N_flat/N_tree",
        "≈ 0.95 of the bound",
        (big.vs_packed_q25 / big.ideal).tolist(),
        ">=",
        IDEAL_BAR,
        "fraction of ideal (vs packing, lower quartile of the rounds)",
        big.ideal.round(3).tolist(),
        ("timing_resolved_packed", "ideal_resolved_packed"),
    ),
    "speedup_vs_ideal_trend": (
        "The gap to the ideal closes as per-token matrix products dominate (wider "
        "model)",
        "≈ 0.95 of the bound on 8B–32B models (d ≥ 4096); the slope is our explanation "
        "of the gap, tested",
        [slopes[s] for s in seeds],
        ">",
        0.0,
        "Δ fraction of ideal per doubling of d_model",
        None,
        ("sweep_resolves_trend",),
    ),
}

# %%
CLAIMS |= {
    "speedup_vs_ideal_sampled": (
        "On rollout trees sampled from a trained LM the speedup also captures most of "
        "the ideal",
        "≈ 0.95 of the bound on real agentic rollouts",
        fork.of_ideal_q25.tolist(),
        ">=",
        IDEAL_BAR,
        "fraction of ideal (forked rollouts, lower quartile of the rounds)",
        fork.ideal.round(3).tolist(),
        ("timing_resolved_sampled", "sampler_converged"),
    ),
    "exact_equivalence": (
        "Tree log-probs, losses and gradients equal per-branch computation exactly",
        "exact",
        f64_by_seed.tolist(),
        "<=",
        1e-10,
        "max |Δ log p| (float64)",
        None,
        (),
    ),
    "partition_memory_ratio": (
        "Redundancy-free partitioning lowers the peak memory of a step below the full "
        "tree's",
        "peak memory bounded by a single root-to-leaf path of partitions",
        mem_ratio.tolist(),
        "<",
        1.0,
        "peak (partitioned) ÷ peak (full tree)"
        + (", C heap" if heap_known else ", saved storages"),
        (full.heap_peak.astype(float) / MiB).round(2).tolist(),
        (),
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
        given=given,
    )
rec.save()

# %% [markdown]
# **Reading the record at both ends of the rounds.** For each fraction-of-ideal claim, per seed: the lower
# quartile, median and upper quartile of the per-round fraction against the bar, and what the record made of it.
# A seed whose noise is larger than its distance from the bar is inconclusive (the conditions above); close to
# the bar, which seeds qualify can change from one run to the next on a shared machine, so a verdict is to be
# read together with the seeds it rests on and its margin.

# %% tags=["remove-input"]
verdicts = {c.id: c for c in rec.claims}
# claim id: per-seed speedups (lower quartile, median, upper quartile) and the ideal
ENDS = {
    "speedup_vs_ideal": (big.blocks_q25, big.speedup_blocks, big.blocks_q75, big.ideal),
    "fraction_of_ideal_vs_packed": (
        big.vs_packed_q25,
        big.vs_packed,
        big.vs_packed_q75,
        big.ideal,
    ),
    "speedup_vs_ideal_sampled": (
        fork.blocks_q25,
        fork.speedup_blocks,
        fork.blocks_q75,
        fork.ideal,
    ),
}
parts = []
for cid, (lo, mid, hi, ideal) in ENDS.items():
    c = verdicts[cid]
    fr = [
        np.asarray(v, dtype=float) / np.asarray(ideal, dtype=float)
        for v in (lo, mid, hi)
    ]
    per = ", ".join(
        f"seed {s}: {a:.3f} / {m:.3f} / {b:.3f}" for s, a, m, b in zip(seeds, *fr)
    )
    judged = [s for i, s in enumerate(seeds) if i not in c.inconclusive_seeds]
    text = f"`{cid}` ({c.verdict}; lower quartile / median / upper quartile {per})"
    if c.inconclusive_seeds:
        why = sorted({k for v in c.failed_conditions.values() for k in v})
        text += (
            f": judged at seed{'s' if len(judged) != 1 else ''} "
            f"{', '.join(map(str, judged)) or 'none'} only; seed"
            f"{'s' if len(c.inconclusive_seeds) > 1 else ''} "
            + ", ".join(str(seeds[i]) for i in c.inconclusive_seeds)
            + f" inconclusive (condition {', '.join(why)} not met)"
        )
        straddle = [
            seeds[i] for i in c.inconclusive_seeds if fr[0][i] < IDEAL_BAR <= fr[2][i]
        ]
        if straddle:
            text += (
                "; the quartiles straddle the bar at seed "
                + ", ".join(map(str, straddle))
            )
        text += (
            f", so the verdict rests on {len(judged)} of {len(seeds)} seeds"
            + (" and is weak evidence either way" if len(judged) <= 1 else "")
        )
    margin = [
        fr[0][i] / IDEAL_BAR - 1 for i in range(len(seeds)) if seeds[i] in judged
    ]
    if margin and c.verdict == "held":
        text += (
            "; the smallest margin of a judged seed's lower quartile over the bar is "
            f"{min(margin):.1%}"
        )
    nh = [
        i
        for i in range(len(seeds))
        if i not in c.inconclusive_seeds and fr[0][i] < IDEAL_BAR
    ]
    if nh:
        up = [i for i in nh if fr[2][i] >= IDEAL_BAR]
        text += (
            "; where it is not held, the upper quartile "
            + (
                "is below the bar too, so the verdict does not depend on the end read"
                if not up
                else "reaches the bar at seed "
                + ", ".join(str(seeds[i]) for i in up)
                + ", so there the verdict depends on the end read"
            )
        )
    parts.append(text)
display(Markdown("**Both ends.** " + ". ".join(parts) + "."))
