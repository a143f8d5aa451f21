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
# 64× extrapolation (512 → 32K tokens) with perplexity 149.96 instead of RoPE's 4532.21 on a 1.2B model, at the
# same inference cost.
#
# | | the paper | this notebook |
# |---|---|---|
# | model | 1.2B transformer trained from scratch | 2-layer, d=128, 4-head byte-level transformer (`helpers.nn`) |
# | data | web-scale pretraining text | the CPython standard library's source, split by file (2 MB train, 200 KB held out) |
# | lengths | train 512, evaluate to 32K (64×) | train 64, evaluate to 1024 (16×) |
# | training | full pretraining | 300 AdamW steps per arm, 5 arms, same data and init |
# | hardware | GPUs | 2 shared CPU cores |
#
# :::{note}
# **What is reconstructed.** The paper's full text is not available; only its abstract is. The TPE design here (a
# **mixed-radix** position: L base-B digits, each driving its own group of rotary pairs with its own small base) and
# the OPT scheme (random per-chunk offsets restricted to **multiples of B**) are our reconstruction, built so that
# every statement of the abstract holds; section 1 says how. The paper's exact component design, bases and offset
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

# %% tags=["parameters"]
quick = False
seed = 0
d_model = 128
n_layer = 2
n_head = 4
train_len = 64
batch_size = 32
steps = 300
radix = 16  # B
levels = 3  # L, so positions go up to 16 ** 3 = 4096
n_chunks = 4  # OPT / skip chunks per training window
target_len = 4096  # offsets keep every training position below this
eval_windows = 16  # held-out windows per evaluation length
tail = 64  # the metric: loss on the last `tail` tokens of a window

# %% tags=["hide-input"]
import time

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from IPython.display import display

from helpers import claims, nn, plotting, repro, train
from helpers import tree_rope as tr

eval_lens = [64, 128, 256, 512, 1024]
if quick:
    d_model, n_layer, batch_size, steps, eval_windows = 64, 1, 16, 40, 4
    eval_lens = [64, 128, 256]

# small ops: one thread wastes nothing on a shared machine
env = repro.setup(seed, threads=1)
plotting.use_style()
rec = claims.ClaimsRecord(
    "04_tree_rope",
    dict(
        quick=quick,
        seed=seed,
        d_model=d_model,
        n_layer=n_layer,
        n_head=n_head,
        train_len=train_len,
        batch_size=batch_size,
        steps=steps,
        radix=radix,
        levels=levels,
        n_chunks=n_chunks,
        target_len=target_len,
        eval_windows=eval_windows,
        eval_lens=eval_lens,
    ),
)
print(env)

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
# **OPT.** Trained on contiguous windows of 64 tokens, the upper digits of TPE barely vary (Δ₂ is always 0), so the
# model never learns how levels interact. OPT gives each of `n_chunks` chunks of a training window a random,
# non-decreasing offset that is a **multiple of B**: the lowest digit stays contiguous (`p mod B = i mod B`), while
# the upper digits jump, up to the target length. The control arm applies the same chunked skips with *arbitrary*
# integer offsets to RoPE (PoSE-style), to test whether the offsets alone are enough.

# %%
B, L = radix, levels
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
rng = repro.rng(seed, 1)
qv, kv = torch.randn(head_dim), torch.randn(head_dim)


def score(rot, m, n):
    ang_q, ang_k = rot.angles(torch.tensor([m])), rot.angles(torch.tensor([n]))
    return (
        (nn.apply_rotary(qv[None], ang_q) * nn.apply_rotary(kv[None], ang_k))
        .sum()
        .item()
    )


worst = 0.0
for _ in range(200):
    m, n = sorted(rng.integers(0, B**L, 2).tolist())
    cm, cn = tr.digits(torch.tensor([m, n]), B, L)
    # shift every digit of both by s, staying in [0, B): same differences
    lo = torch.minimum(cm, cn)
    top = B - 1 - torch.maximum(cm, cn)
    s = torch.as_tensor(
        [int(rng.integers(-int(lo_), int(t_) + 1)) for lo_, t_ in zip(lo, top)]
    )
    m2, n2 = int(tr.from_digits(cm + s, B)), int(tr.from_digits(cn + s, B))
    worst = max(worst, abs(score(tpe, m, n) - score(tpe, m2, n2)))
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
# ## 2. Data and the five arms
#
# Byte-level language modelling of Python source: the standard library of the running interpreter, every 10th file
# (sorted by path) held out. All arms share the model, the initialization, the batches and the steps; they differ
# only in the positional encoding and the training position ids:
#
# | arm | encoding | training position ids |
# |---|---|---|
# | NoPE | none | – |
# | RoPE | RoPE, base 10000 | 0..63 |
# | RoPE + skips | RoPE, base 10000 | chunked skips, arbitrary offsets < 4096 (control) |
# | TPE | TPE, B=16, L=3 | 0..63 |
# | TPE + OPT | TPE, B=16, L=3 | OPT: chunk offsets multiples of 16, < 4096 |

# %%
train_bytes, test_bytes = tr.stdlib_corpus()
print(f"train {len(train_bytes):,} bytes, held out {len(test_bytes):,} bytes")
print(bytes(test_bytes[:160]).decode("utf-8", "replace"))

ARMS = {
    "NoPE": ("none", "plain"),
    "RoPE": ("rope", "plain"),
    "RoPE + skips": ("rope", "skips"),
    "TPE": ("tpe", "plain"),
    "TPE + OPT": ("tpe", "opt"),
}
train_t = torch.as_tensor(train_bytes.astype(np.int64))


def position_ids(kind, g, n):
    if kind == "opt":
        return tr.opt_position_ids(g, batch_size, n, B, target_len, n_chunks)
    if kind == "skips":
        return tr.skip_position_ids(g, batch_size, n, target_len, n_chunks)
    return np.tile(np.arange(n), (batch_size, 1))


def batches(kind):
    def get(step):
        g = repro.rng(seed, 10, step)  # the same windows for every arm
        starts = g.integers(0, len(train_t) - train_len - 1, batch_size)
        x = torch.stack([train_t[s : s + train_len + 1] for s in starts])
        pos = torch.as_tensor(
            position_ids(kind, repro.rng(seed, 11, step), train_len + 1)
        )
        return x, pos

    return get


def loss_fn(model, batch):
    x, pos = batch
    logits = model(x[:, :-1], pos=pos[:, :-1])
    return F.cross_entropy(logits.reshape(-1, 256), x[:, 1:].reshape(-1))


def make_model(enc):
    torch.manual_seed(seed)
    cfg = nn.TransformerConfig(
        vocab_size=256,
        n_layer=n_layer,
        n_head=n_head,
        d_model=d_model,
        max_len=target_len,
        pos="none" if enc == "none" else "rope",
    )
    rot = tr.TreeRotaryEmbedding(cfg.head_dim, B, L) if enc == "tpe" else None
    return nn.Transformer(cfg, rotary=rot)


models, hists = {}, {}


def train_arm(arm):
    enc, kind = ARMS[arm]
    models[arm] = make_model(enc)
    hists[arm] = train.fit(
        models[arm],
        loss_fn,
        batches(kind),
        steps,
        lr=1e-3,
        warmup=steps // 10,
        seed=seed,
        desc=arm,
    )


# %% [markdown]
# One cell per arm (each trains for `steps` steps on the same batches).

# %%
train_arm("NoPE")

# %%
train_arm("RoPE")

# %%
train_arm("RoPE + skips")

# %%
train_arm("TPE")

# %%
train_arm("TPE + OPT")

# %%
fig, ax = plt.subplots(figsize=(6.4, 3.2))
for arm, h in hists.items():
    ax.plot(h.smoothed(25), label=arm)
ax.set(
    xlabel="step",
    ylabel="training loss (nats/byte)",
    title=f"training at length {train_len}",
)
ax.legend(fontsize=8)
plt.show()

# %% [markdown]
# ## 3. Length extrapolation
#
# Each arm reads held-out windows of 64 … 1024 bytes with contiguous positions 0…L−1. The primary metric is the
# loss on the **last 64 bytes of each window given the whole window** (it isolates whether a longer context helps or
# hurts); the whole-window perplexity is the secondary one. We also keep the per-position loss for the slider.

# %%
test_t = torch.as_tensor(test_bytes.astype(np.int64))


@torch.no_grad()
def evaluate(model, n):
    g = repro.rng(seed, 20, n)
    starts = g.integers(0, len(test_t) - n - 1, eval_windows)
    x = torch.stack([test_t[s : s + n + 1] for s in starts])
    # (windows, n)
    per_tok = torch.cat(
        [
            F.cross_entropy(
                model(x[i : i + 4, :-1]).transpose(1, 2),
                x[i : i + 4, 1:],
                reduction="none",
            )
            for i in range(0, eval_windows, 4)
        ]
    )
    return (
        per_tok[:, -tail:].mean().item(),
        per_tok.mean().item(),
        per_tok.mean(0).numpy(),
    )


rows, per_pos = [], {}
for arm, model in models.items():
    model.eval()
    for n in eval_lens:
        tail_loss, full_loss, curve = evaluate(model, n)
        rows.append(
            dict(
                arm=arm,
                length=n,
                tail_loss=tail_loss,
                ppl=float(np.exp(full_loss)),
                tail_ppl=float(np.exp(tail_loss)),
            )
        )
        per_pos[(arm, n)] = curve
res = pd.DataFrame(rows)
display(
    res.pivot(index="arm", columns="length", values="ppl")
    .round(2)
    .style.set_caption("whole-window perplexity")
)
display(
    res.pivot(index="arm", columns="length", values="tail_loss")
    .round(3)
    .style.set_caption(f"loss on the last {tail} bytes (nats/byte)")
)

# %% [markdown]
# ## 4. Combinatorial coverage
#
# Which digit-difference tuples `(Δ_0, …, Δ_{L−1})` between a query and a key does a 1024-byte test window contain,
# and what fraction of them did each arm's training windows contain? For the RoPE arms the "tuple" is the single
# distance (radix 8192, one level). NoPE has no positions to cover.

# %%
g = repro.rng(seed, 30)
test_pos = np.arange(max(eval_lens))[None]
n_cov = 64 if quick else 256
cov = {}
for arm, (enc, kind) in ARMS.items():
    if enc == "none":
        continue
    tp = np.concatenate(
        [position_ids(kind, g, train_len) for _ in range(n_cov // batch_size + 1)]
    )
    bb, ll = (B, L) if enc == "tpe" else (8192, 1)
    cov[arm] = tr.coverage(tp, test_pos, bb, ll)
print(
    pd.Series(
        cov, name=f"fraction of test tuples (length {max(eval_lens)}) seen in training"
    )
    .round(3)
    .to_string()
)

# %%
fig, ax = plt.subplots(1, 2, figsize=(10, 3.4))
for arm in ARMS:
    r = res[res.arm == arm]
    ax[0].plot(r.length, r.tail_loss, marker="o", label=arm)
ax[0].axvline(train_len, color="gray", ls=":", lw=1)
ax[0].set(
    xscale="log",
    xlabel="evaluation length (bytes)",
    ylabel=f"loss on the last {tail} bytes",
    title="extrapolation (train length dotted)",
)
ax[0].set_xticks(eval_lens, [str(n) for n in eval_lens])
ax[0].legend(fontsize=8)
ax[1].bar(list(cov), list(cov.values()), color=plotting.PALETTE[1:5])
ax[1].set(
    ylabel="fraction covered",
    ylim=(0, 1.05),
    title="test-time difference tuples seen in training",
)
ax[1].tick_params(axis="x", labelrotation=15)
plt.tight_layout()
plt.show()

# %% [markdown]
# ## 5. Inference cost
#
# Time per token of a forward pass over a 1024-byte window, RoPE vs TPE (same model size; warm-up, then the median
# of repeats, process CPU time).


# %%
def time_per_token(model, repeats=3 if quick else 7):
    n = max(eval_lens)
    x = test_t[:n][None]
    with torch.no_grad():
        model(x)
        ts = []
        for _ in range(repeats):
            t0 = time.process_time()
            model(x)
            ts.append(time.process_time() - t0)
    return float(np.median(ts)) / n


t_rope, t_tpe = time_per_token(models["RoPE"]), time_per_token(models["TPE + OPT"])
print(
    f"per token: RoPE {t_rope * 1e6:.1f} µs, TPE {t_tpe * 1e6:.1f} µs, ratio "
    f"{t_tpe / t_rope:.2f}"
)

# %% [markdown]
# ## 6. Interaction
#
# The slider moves over the evaluation length and shows each arm's loss at every position of the window (averaged
# over the held-out windows, smoothed): where a curve rises past position 64, that arm is hurt by positions it never
# saw.


# %%
def smooth(y, k=9):
    return np.convolve(y, np.ones(k) / k, mode="valid")


def draw(fig, n):
    ax = fig.add_subplot(111)
    for arm in ARMS:
        ax.plot(smooth(per_pos[(arm, n)]), label=arm, lw=1)
    ax.axvline(train_len, color="gray", ls=":", lw=1)
    ax.set(xlabel="position in the window", ylabel="loss (nats/byte)", ylim=(0.5, 5))
    ax.legend(fontsize=7)


plotting.static_slider(eval_lens, draw, figsize=(6.4, 3.4), label="evaluation length")

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
# ## 7. The claims record
#
# How to read it. These are small, briefly trained models (a few hundred steps), so the arms can differ at the
# training length by more than the 5% the parity claim allows, and part of every later difference is in-distribution
# quality rather than extrapolation. 16× is also a milder stretch than the paper's 64×, at which RoPE's perplexity
# exploded; a byte-level model reading Python needs mostly local context, so RoPE may degrade gently here. The
# checks show that the reconstructed encoding has the properties the abstract states; whether they buy
# extrapolation at this scale is what the claims measure, and a claim that fails is reported as such.

# %%
longest = max(eval_lens)
ppl = res.set_index(["arm", "length"]).ppl
ratio = ppl[("RoPE", longest)] / ppl[("TPE + OPT", longest)]
rec.claim(
    "extrapolation_ppl_ratio",
    f"At {longest // train_len}× the training length, TPE + OPT has far lower "
    "perplexity than RoPE (holds if the ratio is at least 2)",
    paper="4532.21 / 149.96 ≈ 30× at 64×",
    measured=round(float(ratio), 3),
    unit="RoPE ppl / TPE+OPT ppl",
    holds=bool(ratio >= 2.0),
    note=f"whole-window perplexity at {longest}: "
    + ", ".join(f"{a} {ppl[(a, longest)]:.2f}" for a in ARMS),
)
at_train = np.array([ppl[(a, train_len)] for a in ARMS])
spread = float(at_train.max() / at_train.min() - 1)
rec.claim(
    "in_distribution_parity",
    "All arms are within 5% perplexity at the training length",
    paper="(implicit: TPE does not cost in-distribution quality)",
    measured=round(spread, 4),
    unit="max/min ppl − 1 at length 64",
    holds=bool(spread <= 0.05),
    note=", ".join(f"{a} {v:.3f}" for a, v in zip(ARMS, at_train)),
)
both = ppl[("TPE + OPT", longest)] < min(
    ppl[("TPE", longest)], ppl[("RoPE + skips", longest)]
)
rec.claim(
    "needs_both_parts",
    "TPE + OPT beats TPE alone and RoPE + offsets at the longest length",
    paper="OPT improves TPE; single-index offsets are not enough",
    measured={
        a: round(float(ppl[(a, longest)]), 3)
        for a in ("TPE + OPT", "TPE", "RoPE + skips")
    },
    unit="ppl",
    holds=bool(both),
)
rec.claim(
    "inference_cost_ratio",
    "TPE costs about the same per token as RoPE at inference (holds within 25%)",
    paper="comparable",
    measured=round(t_tpe / t_rope, 3),
    unit="TPE / RoPE time per token",
    holds=bool(abs(t_tpe / t_rope - 1) <= 0.25),
    note="the cos/sin tables are recomputed every call in helpers.nn; TPE adds the "
    "digit split",
)
rec.save()
