# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Space-time factorization: operators that run in parallel over time and transfer across graphs
#
# Neural operators such as the FNO predict a whole time window at once on regular grids. On irregular graphs
# (river networks, meshes, road networks) the usual surrogates are message-passing models that step through time
# and are tied to the graph they were trained on. The paper argues that both problems go away when the model is
# **factorized**: learned *temporal* operators that act on each node separately (the same weights at every node),
# and a *spatial mixer* whose only graph dependence is a fixed operator built from the topology (a Chebyshev
# polynomial of a graph operator with shared coefficients, or Physics-Attention over nodes). Then the whole window
# is predicted in one pass (time-parallel), and one set of weights runs on any graph, so a model trained on one
# basin can be applied zero-shot to another, provided three *information leaks* are closed: graph-dependent weights,
# graph-specific features, and graph-correlated training distributions.
#
# Why should this work? Linear flood routing is *exactly* of this form: in the frequency domain each river reach is
# a local filter and the network only couples reaches through topology. We build the model's spatial mixer on that
# solution: a learned, graph-free transfer function per reach, combined by an exact upstream sweep over the tree,
# so a reach sees its whole upstream basin however deep it is, and every part of it is causal: the discharge at
# hour `t` never depends on inflow after `t`. We train on four basins with mixed branching,
# test on held-out events, on a basin with other branching statistics and on a 5x larger one (and, apart, on a
# basin far deeper than any training basin), open each leak in turn to see whether transfer breaks, compare with recurrent
# message passing, time a training step as the window grows, and measure cross-geometry transfer against locally
# trained oracles on a geometry-dependent PDE. Routing a given lateral inflow turned out to be solved by the
# simulator's own routing family without any learning, so the zero-shot and 5x claims are read on a harder
# version of the river task (round 5): the models get the **rainfall**, and each reach's hillslope turns it into
# runoff through a soil store whose capacity no model fully knows. Round 6 added the practitioner's baseline for
# rainfall, a calibrated conceptual (HBV-type) model applied zero-shot, and it solves the rainfall version too:
# on both river benchmarks a model-free baseline fitted on the training basins already transfers, so the river
# transfer claims are **untested here, not refuted** (section 9 reads them; section 10 says what would test them).
#
# | | paper | this notebook |
# |---|---|---|
# | river graphs | Yangtze (train), Mississippi (zero-shot), 5x larger graphs | random binary river trees: four training basins of 80 reaches with mixed branching, a 160-reach basin with other branching statistics (zero-shot), a 400-reach bushy basin (5x), a 160-reach basin far deeper than any training basin (depth extrapolation, reported apart) |
# | simulator | flood-wave routing | variable-parameter (nonlinear) Muskingum, travel time falling with discharge; from round 5 the transfer claims are read on **rainfall**: a soil bucket per reach (capacity partly hidden from every model), fast and slow stores, then the same routing |
# | model | ~27K-parameter factorized model | ~6K parameters: 3 blocks of learned causal local filters + exact upstream sweep, non-negative output |
# | baseline | recurrent message passing | GRU (hidden 32) aggregating upstream messages at every step (3 seeds); linear Muskingum with the true `K` and with `K` calibrated by one factor on the training basins (no network); on rainfall: a linear runoff stage + Muskingum (the simulator's routing values on its grid), a linear unit hydrograph and a generic HBV-type conceptual model calibrated with many starts (round 6), all fitted on the training basins (zero-shot), the claims' baseline the best by validation; the conceptual model re-calibrated on each unseen basin (gauged, in-sample) as an upper reference only |
# | training | long runs on GPUs | 500 steps per river model (24 events per training basin; 1000 on rainfall, two training runs per seed), validation curve recorded; 1800 steps per cross-geometry model (those short of their plateau retrained in round 4 on a warmup-stable-decay schedule, same steps); all trained ahead by `data/16_space_time_operators/make_models.py` |
# | cross-geometry | Navier-Stokes, 15 training geometries, Chebyshev and Physics-Attention mixers | **stand-in:** advection-diffusion in a potential flow on 10x10 grids with obstacles, 1 or 15 training geometries at equal steps and equal data, both mixer families, an oracle per test geometry with as many events as the pooled model |
# | traffic | cross-city forecasting | not reproduced (no offline data) |
# | hardware | GPU | 2 CPU cores, one torch thread |
#
# :::{note}
# **What is reconstructed.** The full paper and code are not available. The model (learned per-reach transfer
# functions of the Muskingum form, truncated to the window so they stay causal, combined by an exact upstream
# sweep, pointwise residual updates with a running event state), the area-weighted upstream operator, the capped
# area feature, the input features, the synthetic basins and events, the graph-aware input of the attention mixer,
# the three leak ablations as we implement them and the advection-diffusion stand-in for Navier-Stokes are our
# reconstruction from the abstract and prior work (FNO, ChebNet, Muskingum routing). The frequency-domain
# solution of linear routing is standard linear-systems algebra, verified here against the sequential simulator.
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
# The default run loads the models trained ahead of time for seeds 0, 1 and 2 (the checkpoint's config must match
# the one asked here) and re-simulates every seed's basins, events and geometries; quick mode trains tiny models
# live for one seed.

# %% tags=["parameters"]
quick = False
seed = 0

# %% tags=["hide-input"]
import json
import time

import matplotlib.pyplot as plt
import numpy as np
import torch
from IPython.display import Markdown, display

from helpers import checkpoints, claims, plotting, repro, train
from helpers import space_time_operators as st

SLUG = "16_space_time_operators"
cfg = st.checkpoint_config("models")
if quick:
    cfg["seeds"], cfg["baseline_seeds"], cfg["geometry_seeds"] = [seed], [seed], [seed]
    cfg["geometry_leak_seeds"], cfg["geometry_matched_seeds"] = [seed], [seed]
    # the same share of the common steps as by default
    cfg["leak_steps"] = {k: v * 24 // cfg["geometry"]["steps"]
                         for k, v in cfg["leak_steps"].items()}
    cfg["river"].update(n=30, T=32, n_events=8, n_test=3, steps=40, val_every=10)
    cfg["geometry"].update(n_train=3, n_test=1, counts=[1, 3], steps=24, val_every=6,
                           T=12)
seeds = cfg["seeds"]
geo_seeds = cfg["geometry_seeds"]  # the seeds whose cross-geometry models are trained
leak_seeds = cfg["geometry_leak_seeds"]  # ... and whose cross-geometry leak models are
dm_seeds = cfg["geometry_matched_seeds"]  # ... and whose data-matched controls are
rc, gc = cfg["river"], cfg["geometry"]
# round 4: models that failed their convergence condition, retrained on the registered
# warmup-stable-decay recipe (checkpoint "retrained"); (seed, model) -> steps
cfg_r = st.checkpoint_config("retrained") if not quick else None
retrained = {} if quick else {
    (s, k): n for s, models in zip(cfg_r["seeds"], cfg_r["retrain"]) for k, n in models}
# seed 1's leak models (round 4)
leak_seeds = sorted(set(leak_seeds) | {s for s in geo_seeds if all(
    (s, f"leak_{k}") in retrained for k in gc["leaks"])})
bench_T = [64, 256, 1024] if not quick else [32, 128]

env = repro.setup(seed, threads=1)
plotting.use_style()
rec = claims.ClaimsRecord(SLUG, dict(quick=quick, seed=seed, **cfg, retrained=cfg_r))
print(env)

# %% [markdown]
# ## 1. River basins and flood routing
#
# A basin is a tree of reaches grown upstream from the outlet (node 0), at most two tributaries per junction. A
# new reach attaches to a random free junction, or with probability `bias` to the newest reach (long main
# stems). The four training basins use `bias` 0, 0.3, 0.5 and 0.9 (mixed branching statistics, from bushy to <!-- paper -->
# one long main stem); the zero-shot basin has twice as many reaches and `bias` 0.6, a branching statistic no <!-- paper -->
# training basin has; the 5x basin is bushy and five times larger. We chose these biases before looking at any
# test score, so that the deepest training basin is at least as deep as the zero-shot basin for every seed (the
# table below shows the depths): the zero-shot claim is then about a new geometry, not a longer path. Depth
# extrapolation is measured apart, on a `deep` basin of 160 reaches with `bias` 0.95, far deeper <!-- paper -->
# than any training basin. Every reach has a travel time `K_i ~ U(1, 4)` h. Lateral inflow events (storms shaped like
# Hann windows, random footprints) come from **one distribution for all basins** (leak 3 closed), and each
# training basin keeps some events aside: the "train" score is on those held-out events.
#
# Muskingum routes a flood wave through a reach: `O(t) = C0 I(t) + C1 I(t-1) + C2 O(t-1)` with `C0 + C1 + C2 = 1`,
# where the inflow `I` is the lateral inflow plus the outflow of the upstream reaches. The nonlinear variant lets
# the travel time fall with discharge, `K(Q) = K0 (Q/Q_ref)^-0.4`, as kinematic-wave celerity does; that is the <!-- paper -->
# simulator the models learn.

# %%
t0 = time.process_time()
data = {s: st.river_data_from_config(s, rc) for s in seeds}
print(f"simulated {len(seeds)} seed(s) in {time.process_time() - t0:.1f} s CPU")
basins = data[seeds[0]]
for name, d in basins.items():
    g = st.RiverGraph(d["parents"])
    print(f"{name:9s} N={g.n:4d}  depth={g.depth:3d} hops  "
          f"max upstream area={int(g.area.max()):4d}")

# %% [markdown]
# ### The time-parallel solution of linear routing
#
# Each reach is a causal filter, `H_i(w) = (C0 + C1 e^{-iw}) / (1 - C2 e^{-iw})`, and the inflow couples reaches
# through the upstream adjacency `A_up`. In the frequency domain, every frequency is an independent sparse solve:
#
# `Q(w) = (I - diag H(w) A_up)^{-1} diag H(w) q(w)`.
#
# A **local, graph-free temporal operator** (`H_i` depends only on the reach's own `K_i`) and a **spatial
# coupling that depends only on the topology**. We check it against the sequential simulator (with zero-padding
# in time), and check mass balance.

# %%
tr0 = basins["train0"]
p_tr, K_tr, q_tr = tr0["parents"], tr0["K"], tr0["q"][:4]
seq = st.route_sequential(p_tr, K_tr, q_tr)
spec = st.route_spectral(p_tr, K_tr, q_tr)
spectral_err = float(np.abs(seq - spec).max() / np.abs(seq).max())
print(f"max |spectral - sequential| / max |Q| = {spectral_err:.2e}")

long = np.concatenate([q_tr, np.zeros((4, p_tr.size, 40 * rc["T"]))], axis=-1)
mass = {}
for nonlinear in (False, True):
    out = st.route_sequential(p_tr, K_tr, long, nonlinear=nonlinear)
    mass[nonlinear] = abs(out[:, 0].sum() - long.sum()) / long.sum()
    print(f"{'nonlinear' if nonlinear else 'linear':9s}: lateral inflow "
          f"{long.sum():.3f}, outlet outflow {out[:, 0].sum():.3f}")
c = st.muskingum_coeffs(K_tr)
print("max |C0 + C1 + C2 - 1| =", np.abs(sum(c) - 1).max())

# %% [markdown]
# ## 2. A spatial mixer with unbounded reach
#
# A Chebyshev polynomial of order `k` of a graph operator mixes nodes at most `k` hops apart; four blocks of
# order four see 16 hops upstream. The zero-shot basin above is deeper than that, so part of its outlet's
# drainage area would lie out of reach. The exact solution shows what to build instead. In specific discharge
# `y = O / a` (discharge per unit of upstream area `a`), linear routing reads
#
# `y = (I - diag(H) P)^-1 diag(H) (q / a)`, with `P = diag(a)^-1 A_up diag(a)`,
#
# and on a tree the inverse is **one sweep from the headwaters to the outlet**, level by level:
# `y_i = H_i (s_i + sum_{j upstream of i} P_ij y_j)`. That costs `O(N)` work in `depth` sequential steps and has
# no reach limit. `P_ij = a_j / a_i` depends on the topology only, and its row sums are below 1, so `y` stays
# bounded on basins of any size.
#
# The model keeps this structure and learns the rest, and it is **causal**. Each block takes `C` source channels
# `s = W_s h` and routes them through the tree with a learned **local filter** per reach and channel, of the
# Muskingum form `H_theta = rho (1-c)(alpha + (1-alpha) e^{-iw}) / (1 - c e^{-iw})`, with `c, alpha, rho` from an
# MLP of the reach's own static features (no graph-dependent parameter). Two details make the result exact and
# causal on any basin. The filter is applied through its first `T` taps (its impulse response over the window:
# the only part that can act on a window that starts from rest), and at each level of the sweep the reach's
# output is cut back to the window before it flows on: each product of FFTs is then a linear, not a circular,
# convolution, so no future inflow wraps around into the past, however slow the reaches and deep the basin, and
# the FFT length (any `>= 2T`) changes nothing. After the sweep, a pointwise update `h <- h + MLP([h, y, r])`
# reads the routed flows `y` and a **running state** `r_t` (the mean of `h` over hours `0..t`: the flood so far,
# which lets the update act as a flow-dependent correction without reading the future). The head is a softplus:
# predicted discharge is never negative. The reach's features are `K/4` and a **capped** area feature
# `min(log a, log 64) / log 64`, which stays in `[0, 1]` on every basin (a raw `log a` would leave the training
# range on larger basins). First, the sweep with the true Muskingum filters reproduces the exact solution:

# %%
g_tr = st.RiverGraph(p_tr)
a_tr = g_tr.area.double()
M = 8 * q_tr.shape[-1]
c0, c1, c2 = (torch.tensor(v) for v in st.muskingum_coeffs(K_tr))
z = torch.exp(-2j * torch.pi * torch.arange(M // 2 + 1, dtype=torch.float64) / M)
H = (c0[:, None] + c1[:, None] * z) / (1 - c2[:, None] * z)  # (N, F), per reach
S = torch.fft.rfft(torch.tensor(q_tr).permute(1, 0, 2) / a_tr[:, None, None], n=M)
Y = st.upstream_sweep(g_tr, H[:, None], S)  # exact (I - diag(H) P)^-1 diag(H) S
O_sweep = torch.fft.irfft(Y, n=M)[..., : q_tr.shape[-1]] * a_tr[:, None, None]
spec8 = st.route_spectral(p_tr, K_tr, q_tr, pad_factor=8)  # same frequencies
sweep_err = float(np.abs(O_sweep.permute(1, 0, 2).numpy() - spec8).max()
                  / np.abs(spec8).max())
seq_err = np.abs(O_sweep.permute(1, 0, 2).numpy() - seq).max()
print(f"sweep with Muskingum filters vs sparse solves: {sweep_err:.1e}; vs the "
      f"sequential simulator: {seq_err:.1e}")

# %% [markdown]
# The causal sweep (from `helpers`): each level adds its children's weighted outputs to its own sources in the
# time domain, convolves with its taps by one FFT product and cuts the result to the window. Here is one block of
# the learned model spelled out, on random weights:

# %%
model0 = st.RoutingOperator(2, 2, **rc["model"])
blk = 0
x0, static0, g0 = st.river_inputs(p_tr, K_tr, q_tr[:2])
with torch.no_grad():
    h = model0.lift(torch.cat([x0, static0[:, None, None].expand(
        *x0.shape[:3], -1)], -1))
    T_ = h.shape[2]
    taps = model0.filters[blk].taps(static0, T_)  # (N, T, C): graph-free, causal
    taps_hat = torch.fft.rfft(taps, n=2 * T_, dim=1)[:, None]
    y = st.causal_sweep(g0, taps_hat, model0.src[blk](h), 2 * T_)  # exact, causal
    running = torch.cumsum(h, 2) / torch.arange(1, T_ + 1)[:, None]  # flood so far
    h = h + model0.mix[blk](torch.cat([h, y, model0.state[blk](running)], -1))
print("one block:", tuple(h.shape), "| parameters:", st.count_params(model0))

# %% [markdown]
# ## 3. Training protocol and the three leaks
#
# Each model trains on the training events of the four basins in turn (4 events per step, loss: squared error of
# specific discharge weighted by `a / mean(a)`, so trunk reaches count as they do in discharge; the weight is in
# the loss only). Besides the model with every leak closed, three models each open one leak:
#
# * **per-node embeddings** (`embed`): a learned vector per node id joins the reach features. Every reach of
#   every training basin has its own id (train0 has ids 0-79, train1 80-159, ...), so the model can memorise
#   corrections reach by reach; on another basin each reach gets a random id (drawn once per basin), the vector
#   of an unrelated training reach;
# * **graph-normalised area** (`area`): upstream area divided by the basin's own maximum, `a / max(a)`, replaces
#   the capped feature (the paper's own example of a graph-specific feature): it is 1 at every outlet, so a reach
#   draining 80 cells reads 1 on a training basin but 0.2 on the 5x basin; <!-- paper -->
# * **graph-correlated forcing** (`shift`): each training basin's storms are scaled by its own factor, 0.3, 0.77, <!-- paper -->
#   1.23 and 1.7 in the order of their branching bias (mean 1, the test basins' scale), so storm size and <!-- paper -->
#   basin shape go together in training, and each basin sees only part of the range of storms.
#
# The baseline is the recurrent message-passing GRU, trained on the same batches with the same loss, for every
# seed. The default run loads all of these from the checkpoint (trained ahead, stored as int8); quick mode trains
# tiny ones here. Every router records its loss on the training basins' held-out events every 50 steps (the
# validation curve), to see whether its training has reached a plateau. The learned gain `rho` of each reach's
# filter may reach 1.02 (a lossless reach, `rho = 1`, is inside its range; gains start at 1). <!-- paper -->

# %%
routers, recurrent, river_hist = {}, {}, {}
if quick:
    for s in seeds:
        for leak in st.LEAKS:
            m, h = st.train_router(data[s], leak, rc["steps"], s, rc["n_events"],
                                   val_every=rc["val_every"], **rc["model"])
            routers[s, leak], river_hist[f"s{s}.router.{leak}"] = m, h.loss
            river_hist[f"s{s}.router.{leak}.val"] = h.evals["val"]
        m, h = st.train_recurrent(data[s], rc["steps"], s, rc["n_events"],
                                  hidden=cfg["baseline_hidden"])
        recurrent[s], river_hist[f"s{s}.recurrent"] = m, h.loss
    ckpt = None
else:
    ckpt = checkpoints.load(SLUG, "models", config=cfg)
    ckpt_r = checkpoints.load(SLUG, "retrained", config=cfg_r)
    print(f"checkpoint trained in {ckpt.manifest['wall_seconds']} s wall; "
          "retrained models "
          f"(round 4) in {ckpt_r.manifest['wall_seconds']} s")
    embed = rc["n"] * len(rc["biases"])  # one id per training reach
    for s in seeds:
        for leak in st.LEAKS:
            m = st.RoutingOperator(2, 2, embed_nodes=embed if leak == "embed" else 0,
                                   **rc["model"])
            routers[s, leak] = ckpt.load_into(m, f"s{s}.router.{leak}.").eval()
        if s in cfg["baseline_seeds"]:
            m = st.RecurrentMP(4, hidden=cfg["baseline_hidden"])
            recurrent[s] = ckpt.load_into(m, f"s{s}.recurrent.").eval()
    # a baseline seed missing from the checkpoint is trained here, same settings
    t0 = time.process_time()
    for s in seeds:
        if s not in recurrent:
            m, h = st.train_recurrent(data[s], rc["steps"], s, rc["n_events"],
                                      hidden=cfg["baseline_hidden"])
            recurrent[s], river_hist[f"s{s}.recurrent"] = m.eval(), h.loss
    print(f"baseline for seeds {sorted(recurrent)} "
          f"({time.process_time() - t0:.0f} s CPU to train the missing ones)")

# %%
names = list(basins)
unseen = ["zero-shot", "5x"]
r2 = {}  # (seed, model, basin) -> R² on held-out events
preds = {}
for s in seeds:
    for name in names:
        d = data[s][name]
        truth = d["O"][-d["n_test"]:] if d["train"] else d["O"]
        for leak in st.LEAKS:
            pr = st.predict_router(routers[s, leak], d, leak)
            r2[s, leak, name] = st.r2_score(pr, truth)
            preds[s, leak, name] = pr
        if s in recurrent:
            pr = st.predict_recurrent(recurrent[s], d)
            r2[s, "recurrent", name] = st.r2_score(pr, truth)
            preds[s, "recurrent", name] = pr
rows = [("factorized", "none")] + [(f"leak: {k}", k) for k in st.LEAKS[1:]]
rows += [("recurrent MP", "recurrent")]
print(f"{'model':16s}" + "".join(f"{n:>11s}" for n in names))
for label, key in rows:
    have = [s for s in seeds if (s, key, names[0]) in r2]
    print(f"{label:16s}" + "".join(
        f"{np.mean([r2[s, key, n] for s in have]):11.3f}" for n in names))
print("(mean over seeds", seeds, "for each row)")
for s in seeds:
    print(f"seed {s}: zero-shot R² factorized {r2[s, 'none', 'zero-shot']:.3f}, "
          f"recurrent {r2[s, 'recurrent', 'zero-shot']:.3f}")

# %% [markdown]
# ### Outlet R² and the no-learning reference
#
# The R² above pools every reach and hour, and small headwater reaches are easy. Two more numbers: the R² at the
# **outlet** alone (the hydrograph a forecaster wants), and **linear Muskingum with the true travel times** `K`
# (no training at all: the simulator without its nonlinearity). Linear routing is the simplest reference that
# needs no data; a learned model is worth its training only if it beats it. A hydrologist would also calibrate
# it: **calibrated linear Muskingum** multiplies every `K` by one factor, chosen on the training basins' training
# events from a short grid (one parameter, fitted, then applied unchanged to the unseen basins). A hydrologist
# would also try variable-parameter routing, the simulator's own family; it was added at review, after the
# claims' baselines were fixed, and is measured apart (exploratory, next cell), not in the claims. We also read off
# the learned gains
# `rho` of the first block on the deep basin: a gain below 1 loses water at every reach, and the loss compounds
# along the main stem.

# %%
outlet_r2 = {}  # (seed, model, basin) -> R² of the outlet hydrographs alone
k_grid = [1.0, 1.1, 1.2, 1.35, 1.5]  # K multipliers tried by the calibrated reference
k_fit = {}
for s in seeds:
    fit = [np.mean([st.r2_score(st.route_sequential(d["parents"], m * d["K"],
                                                    d["q"][:rc["n_events"]]),
                                d["O"][:rc["n_events"]])
                    for d in data[s].values() if d["train"]]) for m in k_grid]
    k_fit[s] = k_grid[int(np.argmax(fit))]  # chosen on training events only
    for name in names:
        d = data[s][name]
        truth = d["O"][-d["n_test"]:] if d["train"] else d["O"]
        q = d["q"][-d["n_test"]:] if d["train"] else d["q"]
        pr = st.route_sequential(d["parents"], d["K"], q)  # linear, true K
        r2[s, "linear", name], preds[s, "linear", name] = st.r2_score(pr, truth), pr
        pr = st.route_sequential(d["parents"], k_fit[s] * d["K"], q)
        r2[s, "linear_cal", name] = st.r2_score(pr, truth)
        preds[s, "linear_cal", name] = pr
        for key in ("none", "recurrent", "linear", "linear_cal"):
            if (s, key, name) in preds:
                outlet_r2[s, key, name] = st.r2_score(preds[s, key, name][:, 0],
                                                      truth[:, 0])
print(f"{'R² pooled / outlet':22s}" + "".join(f"{n:>17s}" for n in names))
for label, key in (("factorized", "none"), ("recurrent MP", "recurrent"),
                   ("linear Muskingum, K", "linear"),
                   ("linear, K calibrated", "linear_cal")):
    have = [s for s in seeds if (s, key, names[0]) in r2]
    print(f"{label:22s}" + "".join(
        f"{np.mean([r2[s, key, n] for s in have]):9.3f}/"
        f"{np.mean([outlet_r2[s, key, n] for s in have]):7.3f}" for n in names))
print("calibrated K multiplier per seed:", [k_fit[s] for s in seeds])

# %%
# added at review (exploratory; not a baseline of the claims, which were fixed before):
# variable-parameter Muskingum, the simulator's own family (K falls with discharge),
# with K's factor and Q_ref fitted on the training basins' training events, from a
# grid that leaves out the simulator's own Q_ref (0.3) and K factor (1.0)
vpm_grid = [(qr, km) for qr in (0.1, 0.2, 0.5, 1.0) for km in (0.8, 1.2)]
vpm_fit, vpm_out = {}, {}  # seed -> (Q_ref, K factor); (seed, basin) -> outlet R²
for s in seeds:
    fit = [np.mean([st.r2_score(st.route_sequential(
        d["parents"], km * d["K"], d["q"][:rc["n_events"]], nonlinear=True, q_ref=qr),
        d["O"][:rc["n_events"]]) for d in data[s].values() if d["train"]])
        for qr, km in vpm_grid]
    vpm_fit[s] = vpm_grid[int(np.argmax(fit))]
    for name in unseen:
        d = data[s][name]
        pr = st.route_sequential(d["parents"], vpm_fit[s][1] * d["K"], d["q"],
                                 nonlinear=True, q_ref=vpm_fit[s][0])
        vpm_out[s, name] = st.r2_score(pr[:, 0], d["O"][:, 0])
for s in seeds:
    print(f"seed {s}: variable-parameter Muskingum, (Q_ref, K factor) = {vpm_fit[s]}: "
          "outlet R² " + ", ".join(f"{n} {vpm_out[s, n]:.3f} (factorized "
                                   f"{outlet_r2[s, 'none', n]:.3f})" for n in unseen))


# %%
def block_gains(model, d, blk=0):
    """Learned gains rho (N, B, C) of block `blk` on the held-out events of basin d."""
    got = {}

    def keep_first(mod, inp, out):  # returns None: the output is left as it is
        got.setdefault("z", out.detach())

    hook = model.filters[blk].net.register_forward_hook(keep_first)
    st.predict_router(model, d)
    hook.remove()
    C = got["z"].shape[-1] // 3
    return st.RHO_MAX * torch.sigmoid(got["z"][..., 2 * C:])


for s in seeds:
    rho = block_gains(routers[s, "none"], data[s]["deep"])
    print(f"seed {s}: block-0 gains on the deep basin: median {rho.median():.3f}, "
          f"{100 * (rho >= 0.99).float().mean():.0f}% of reach-channels >= 0.99, "
          f"{100 * (rho > 1).float().mean():.0f}% above 1")


def clamp_gains(mod, inp, out):
    """Forward hook: every gain rho = RHO_MAX * sigmoid(z) capped at exactly 1."""
    C = out.shape[-1] // 3
    z_one = float(np.log(1.0 / (st.RHO_MAX - 1.0)))  # sigmoid(z_one) * RHO_MAX = 1
    return torch.cat([out[..., :2 * C], out[..., 2 * C:].clamp(max=z_one)], -1)


# an evaluation-only ablation: the same weights with no reach allowed to gain water
clamp_r2, clamp_peak = {}, {}
for s in seeds:
    dd, m = data[s]["deep"], routers[s, "none"]
    hooks = [f.net.register_forward_hook(clamp_gains) for f in m.filters]
    pr = st.predict_router(m, dd)
    for hk in hooks:
        hk.remove()
    clamp_r2[s] = st.r2_score(pr, dd["O"])
    top = dd["O"][:, 0].max(1).mean()
    clamp_peak[s] = float(pr[:, 0].max(1).mean() / top)
    free_peak = preds[s, "none", "deep"][:, 0].max(1).mean() / top
    print(f"seed {s}: deep basin R² {r2[s, 'none', 'deep']:.3f} (outlet peak ratio "
          f"{free_peak:.2f}); gains clamped to 1: R² {clamp_r2[s]:.3f} "
          f"(peak ratio {clamp_peak[s]:.2f})")

# %% [markdown]
# ### Depth, training length and the validation curve
#
# Last time the zero-shot basin was deeper than every training basin on two seeds and the model was trained for
# 200 steps, and both explained its failures. Here we measure, per seed, the depths (deepest training basin,
# zero-shot basin, deep basin), where in the zero-shot basin the error sits (trunk reaches with upstream area at
# least 64, beyond the cap of the area feature, versus the rest), how far the predicted outlet peak is from the
# true one, and whether training has converged: the validation loss (training basins' held-out events) over the
# last quarter of training, relative to its final value (near 0: the curve is flat).

# %%
def val_curve(key):
    """(steps, values) of a validation curve, from the checkpoint or from this run."""
    if key in river_hist:
        st_, v = zip(*river_hist[key])
        return np.array(st_), np.array(v)
    h = ckpt.manifest["history"][key]
    return np.array(h["step"]), np.array(h["value"])


trunk_cap = 64 if not quick else 16  # the area feature saturates at 64
diag = {}
for s in seeds:
    zs_s = data[s]["zero-shot"]
    a_s = st.upstream_area(zs_s["parents"])
    trunk = a_s >= trunk_cap
    depth_train = max(st.RiverGraph(d["parents"]).depth
                      for d in data[s].values() if d["train"])
    row = dict(depth_train=depth_train, depth_zs=st.RiverGraph(zs_s["parents"]).depth,
               depth_deep=st.RiverGraph(data[s]["deep"]["parents"]).depth)
    for key in ("none", "recurrent"):
        pr = preds[s, key, "zero-shot"]
        row[key, "trunk"] = st.r2_score(pr[:, trunk], zs_s["O"][:, trunk])
        row[key, "rest"] = st.r2_score(pr[:, ~trunk], zs_s["O"][:, ~trunk])
        row[key, "peak"] = float(pr[:, 0].max(1).mean() / zs_s["O"][:, 0].max(1).mean())
    row["train_heldout"] = float(np.mean([r2[s, "none", n] for n in names
                                          if n.startswith("train")]))
    vs, vv = val_curve(f"s{s}.router.none.val")
    q3 = vv[np.searchsorted(vs, 0.75 * vs[-1])]
    row["val_drop"] = float((q3 - vv[-1]) / vv[-1])
    diag[s] = row
print("seed  depth train/zero-shot/deep | factorized R² trunk / rest, outlet peak "
      "ratio | recurrent R² trunk / rest, peak | held-out R² train "
      "| last-quarter val drop")
for s, r in diag.items():
    print(f"{s:4d}  {r['depth_train']:5d} / {r['depth_zs']:3d} / "
          f"{r['depth_deep']:3d}  | "
          f"{r['none', 'trunk']:6.2f} / {r['none', 'rest']:5.2f}, "
          f"{r['none', 'peak']:5.2f}"
          f"{'':17s}| {r['recurrent', 'trunk']:6.2f} / {r['recurrent', 'rest']:5.2f}, "
          f"{r['recurrent', 'peak']:5.2f} | {r['train_heldout']:.3f}"
          f"             | {100 * r['val_drop']:5.1f}%")

fig, ax = plt.subplots(figsize=(5, 3.2))
for s in seeds:
    for leak, ls in (("none", "-"), ("embed", ":")):
        vs, vv = val_curve(f"s{s}.router.{leak}.val")
        ax.plot(vs, vv, ls, color=f"C{s}", label=f"seed {s}, "
                + ("no leak" if leak == "none" else "leak: embed"))
ax.set(yscale="log", xlabel="training step",
       ylabel="validation loss (held-out events)")
ax.legend(fontsize=7)
plt.show()

# %% tags=["remove-input"]
def rng_(v, f=".2f"):
    """'a' or 'a to b' (smallest to largest) of a few per-seed numbers, for the text."""
    v = [int(x) if f == "d" else float(x) for x in v]
    lo, hi = format(min(v), f), format(max(v), f)
    return lo if lo == hi else f"{lo} to {hi}"


def seeds_of(key, basin, outlet=False):
    return [(outlet_r2 if outlet else r2)[s, key, basin] for s in seeds]


_lst = lambda v: ", ".join(f"{x:.2f}" for x in v)
_deep = {k: seeds_of(k, "deep") for k in ("none", "recurrent", "linear", "linear_cal")}
_lab = {"none": "factorized", "recurrent": "recurrent MP", "linear": "linear Muskingum",
        "linear_cal": "calibrated linear Muskingum"}
_best_deep = max(_deep, key=lambda k: np.mean(_deep[k]))
_peak = [float(preds[s, "none", "deep"][:, 0].max(1).mean() / data[s]["deep"]["O"][:, 0].max(1).mean())
         for s in seeds]
_best_zs = [max(r2[s, k, "zero-shot"] for k in ("recurrent", "linear", "linear_cal")) for s in seeds]
display(Markdown(
    f"**Reading (this run).** The deepest training basin has {rng_([r['depth_train'] for r in diag.values()], 'd')}"
    f" hops (per seed), the zero-shot basin {rng_([r['depth_zs'] for r in diag.values()], 'd')}. After {rc['steps']} "
    f"steps the zero-shot R² of the factorized model is {rng_(seeds_of('none', 'zero-shot'))} over the seeds, "
    f"against {rng_(seeds_of('recurrent', 'zero-shot'))} for the recurrent baseline and "
    f"{np.mean(seeds_of('linear', 'zero-shot')):.2f} (mean) for linear Muskingum with the true `K`; at the outlet "
    f"alone {np.mean(seeds_of('none', 'zero-shot', True)):.2f} against "
    f"{np.mean(seeds_of('recurrent', 'zero-shot', True)):.2f} and {np.mean(seeds_of('linear', 'zero-shot', True)):.2f}"
    f" (means). Calibrated linear Muskingum (`K` ×{rng_([k_fit[s] for s in seeds])}, fitted on the training "
    f"basins) reaches {rng_(seeds_of('linear_cal', 'zero-shot'))} pooled and "
    f"{rng_(seeds_of('linear_cal', 'zero-shot', True))} at the outlet on the zero-shot basin, and "
    f"{rng_(seeds_of('linear_cal', '5x'))} on the 5x basin (factorized {rng_(seeds_of('none', '5x'))}). The "
    "factorized model's margin over the strongest baseline on the zero-shot basin is "
    + _lst([a - b for a, b in zip(seeds_of("none", "zero-shot"), _best_zs)])
    + f" (pooled R², per seed). Its zero-shot outlet peak is {rng_([r['none', 'peak'] for r in diag.values()])} "
    f"times the true one. The validation loss fell {rng_([100 * r['val_drop'] for r in diag.values()], '.1f')}% "
    "over the last quarter of training (the condition `router_converged` reads the same curve). Depth "
    f"extrapolation: on the `deep` basin ({rng_([r['depth_deep'] for r in diag.values()], 'd')} hops) the "
    f"factorized R² is {_lst(_deep['none'])}, the recurrent baseline {_lst(_deep['recurrent'])}, linear Muskingum "
    f"{_lst(_deep['linear'])} and calibrated linear Muskingum {_lst(_deep['linear_cal'])}: the best by mean is "
    f"**{_lab[_best_deep]}**, and no model predicts the deep basin's outlet well: outlet R² per seed "
    + "; ".join(f"{_lab[k]} {_lst(seeds_of(k, 'deep', True))}" for k in _deep)
    + f" (the best single value is {max(max(seeds_of(k, 'deep', True)) for k in _deep):.2f}). "
    f"The factorized outlet peak there is {rng_(_peak)} times the true one"
    + (" (it under-predicts the flood)" if max(_peak) < 1 else
       " (it over-predicts the flood)" if min(_peak) > 1 else "")
    + f"; clamping every gain to 1 at evaluation (same weights) gives R² {_lst(clamp_r2.values())} and peak "
    f"ratios {rng_(clamp_peak.values())}. "
    + ("The clamp barely moves the peaks, so the filters' gains (at most 1.02) do not explain the "
       "misfit on the deep basin; which part of the network does is not isolated here."
       if max(abs(a - b) for a, b in zip(clamp_peak.values(), _peak)) < 0.15 else
       "The clamp moves the peaks, so the filters' gains are part of the misfit on the deep basin.")
))

# %% [markdown]
# ### Why the deep basin fails: water still in transit
#
# A cheap diagnostic of the deep-basin failure. For every reach we add up the travel times `K` of the reaches
# between it and the outlet (linear Muskingum delays a wave's centre by `K` per reach; `helpers`:
# `travel_time_to_outlet`), and read off the median over the reaches and the share of reaches whose water can
# reach the outlet within the window. We also measure, from the simulator alone, the share of the window's
# lateral inflow that leaves through the outlet within the window, and the outlet peaks of every model relative
# to the truth, the two linear references included: they have the true travel times but not the speed-up of
# large floods (`K` falls with discharge in the simulator).

# %%
transit = {}  # (seed, basin) -> median travel time, share within T, outlet volume share
for s in seeds:
    for name in names:
        d = data[s][name]
        tt = st.travel_time_to_outlet(d["parents"], d["K"])
        transit[s, name] = (float(np.median(tt)), float((tt <= rc["T"]).mean()),
                            float(d["O"][:, 0].sum() / d["q"].sum()))
deep_peak = {(s, k): float(preds[s, k, "deep"][:, 0].max(1).mean()
                           / data[s]["deep"]["O"][:, 0].max(1).mean())
             for s in seeds for k in ("none", "recurrent", "linear", "linear_cal")
             if (s, k, "deep") in preds}
print(f"window T = {rc['T']} h; per basin: median travel time to the outlet (h), "
      "share of reaches within T, share of the inflow out of the outlet within T")
for s in seeds:
    print(f"seed {s}: " + "; ".join(f"{n} {v[0]:.0f} h, {v[1]:.2f}, {v[2]:.2f}"
                                    for (s_, n), v in transit.items() if s_ == s))
    print("        deep outlet peak / true peak: " + ", ".join(
        f"{k} {v:.2f}" for (s_, k), v in deep_peak.items() if s_ == s))

# %% tags=["remove-input"]
_tr = [n for n in names if n.startswith("train")]
display(Markdown(
    f"**Reading (this run).** With a {rc['T']}-hour window, the median reach of the deep basin is "
    f"{rng_([transit[s, 'deep'][0] for s in seeds], '.0f')} hours from its outlet (range over seeds), against "
    f"{rng_([transit[s, n][0] for s in seeds for n in _tr], '.0f')} on the training basins and "
    f"{rng_([transit[s, 'zero-shot'][0] for s in seeds], '.0f')} on the zero-shot basin; "
    f"{rng_([transit[s, 'deep'][1] for s in seeds])} of its reaches can reach the outlet within the window "
    f"(training basins {rng_([transit[s, n][1] for s in seeds for n in _tr])}), and "
    f"{rng_([transit[s, 'deep'][2] for s in seeds])} of the window's inflow leaves through its outlet in the "
    f"window (training basins {rng_([transit[s, n][2] for s in seeds for n in _tr])}). The deep basin's outlet "
    "hydrograph is the rising front of a flood that is mostly still upstream, "
    + ("further into that regime than any training basin of the same seed. "
       if all(transit[s, "deep"][2] < min(transit[s, n][2] for n in _tr) for s in seeds) else
       "a regime the deepest training basins show in part. ")
    + "Outlet peak over the true one, per seed: "
    + "; ".join(f"{_lab[k]} " + _lst([deep_peak[s, k] for s in seeds if (s, k) in deep_peak])
                for k in ("none", "recurrent", "linear", "linear_cal"))
    + ". "
    + ("The linear references, with the true travel times but no speed-up of large floods, also miss the "
       "peak: the front that reaches the outlet in the window is set by how much faster the simulator's "
       "large floods travel, which a routing with fixed travel times (like the router's time-invariant "
       "filters) cannot represent, and which the training basins, whose water mostly leaves within the "
       "window, do not teach."
       if max(deep_peak[s, "linear"] for s in seeds) < 0.9 else
       "Linear Muskingum with the true, fixed travel times overshoots the outlet peak at every seed while "
       "the router undershoots it: on this basin a routing with fixed travel times errs the other way, so "
       "the router's undershoot comes from what it learned on basins whose water mostly leaves within the "
       "window, not from fixed travel times as such (which part of the router is not isolated here)."
       if min(deep_peak[s, "linear"] for s in seeds) > 1.1 and max(_peak) < 0.9 else
       "Linear Muskingum with the true travel times reaches at least 0.9 of the true peak at some seed, so "
       "fixed travel times alone do not explain the router's miss there.")
))

# %% [markdown]
# ### What each leak does, measured
#
# A leak can only break transfer if the model uses the leaked input and the input means something else on the
# unseen basins. We test both for each leak, on the **training basins' held-out events** (where the leaked input
# means exactly what it meant in training) and on the unseen basins:
#
# * `embed`: shuffle the rows of the embedding table. If the vectors carry reach-specific corrections, the
#   training basins' score drops.
# * `area`: shuffle the leaked area column across the reaches of each basin. If the model reads it, the score
#   drops. We also print the range it takes: a reach draining 64 or more cells reads `a / max(a)` in a different
#   range on each basin.
# * `shift`: no input to shuffle (the storms are the input). We score the model on each training basin's
#   held-out events, which come from the common distribution, next to the scale of the storms it was trained on
#   for that basin.
#
# Keep in mind one more route to area: the second dynamic input, `q / (a Q0)`, divides the lateral inflow by the
# reach's own upstream area, so a model can recover `a` from it on any basin, leak or not.

# %%
def predict_static(model, d, leak, fn, chunk=4):
    """predict_router with the static features passed through fn first."""
    q = d["q"][-d["n_test"]:] if d["train"] else d["q"]
    x, static, g = st.river_inputs(d["parents"], d["K"], q, leak)
    static, ids = fn(static.clone()), st._ids(d, model)
    with torch.no_grad():
        ys = [model(x[:, i:i + chunk], static, g, ids)
              for i in range(0, x.shape[1], chunk)]
    out = torch.cat(ys, 1)[..., 0] * g.area[:, None, None] * st.Q0
    return out.permute(1, 0, 2).double().numpy()


def truth_of(d):
    return d["O"][-d["n_test"]:] if d["train"] else d["O"]


held = [n for n in names if n.startswith("train")]
emb_gap, area_use, area_range, shift_rows = {}, {}, {}, {}
for s in seeds:
    m = routers[s, "embed"]
    w0 = m.embed.weight.detach().clone()
    perm_rows = torch.as_tensor(np.random.default_rng(s).permutation(w0.shape[0]))
    with torch.no_grad():
        m.embed.weight.copy_(w0[perm_rows])
        shuf = {n: st.r2_score(st.predict_router(m, data[s][n], "embed"),
                               truth_of(data[s][n])) for n in held + unseen}
        m.embed.weight.copy_(w0)
    emb_gap[s] = float(np.mean([r2[s, "embed", n] - shuf[n] for n in held]))
    arng = np.random.default_rng(100 + s)

    def shuffle_area(static, arng=arng):
        static[:, 1] = static[torch.as_tensor(arng.permutation(static.shape[0])), 1]
        return static

    area_use[s] = {n: r2[s, "area", n] - st.r2_score(
        predict_static(routers[s, "area"], data[s][n], "area", shuffle_area),
        truth_of(data[s][n])) for n in held + unseen}
    area_range[s] = {}
    for n in held + unseen:
        a_n = st.upstream_area(data[s][n]["parents"])
        trunk_n = a_n >= 64 if not quick else a_n >= trunk_cap
        area_range[s][n] = (a_n / a_n.max())[trunk_n].min()
    shift_rows[s] = [(data[s][n]["shift_scale"], r2[s, "shift", n], r2[s, "none", n])
                     for n in held]
    print(f"seed {s}: embed: held-out R² on training basins lost when rows are "
          f"shuffled {emb_gap[s]:.3f} (unseen: "
          + ", ".join(f"{n} {r2[s, 'embed', n] - shuf[n]:.3f}" for n in unseen) + ")")
    print("        area: R² lost when the leaked column is shuffled: "
          + ", ".join(f"{n} {v:.3f}" for n, v in area_use[s].items()))
    print("        area: smallest a/max(a) of a trunk reach: "
          + ", ".join(f"{n} {v:.2f}" for n, v in area_range[s].items()))
    print("        shift: training scale -> held-out R² (shift model / no leak): "
          + ", ".join(f"{sc:.2f} -> {a:.3f} / {b:.3f}" for sc, a, b in shift_rows[s]))

# %% tags=["remove-input"]
_drops = {leak: [np.mean([r2[s, "none", n] - r2[s, leak, n] for n in unseen]) for s in seeds]
          for leak in st.LEAKS[1:]}
_all = [v for d in _drops.values() for v in d]
_sc = shift_rows[seeds[0]][0][0]
display(Markdown(
    f"**Reading (this run).** Opening one leak lowers the mean R² on the unseen basins by {min(_all):+.3f} to "
    f"{max(_all):+.3f} (per leak and seed). "
    f"Shuffling the embedding rows costs {rng_(emb_gap.values(), '.3f')} of held-out R² on the training basins. "
    "The area leak is real in its input: the smallest a/max(a) of a trunk reach is "
    f"{rng_([area_range[s][n] for s in seeds for n in held])} on the training basins and "
    f"{rng_([area_range[s]['5x'] for s in seeds])} on the 5x basin; shuffling the leaked column costs "
    f"{rng_([area_use[s][n] for s in seeds for n in held])} of R² on training basins and at most "
    f"{max(area_use[s][n] for s in seeds for n in unseen):.2f} on unseen ones. With storms scaled per basin, "
    f"the shift model's held-out R² on the training basin whose storms it saw at ×{_sc:.2f} is "
    + _lst([r[0][1] for r in shift_rows.values()]) + " (no-leak model "
    + _lst([r[0][2] for r in shift_rows.values()]) + "). "
    + "A leak the model barely reads cannot break transfer, and the dynamic input `q / (a Q0)` carries the area "
    "on every basin anyway (`leaks_break_transfer_river` asks for a drop above 0.2 for every leak)."
))

# %% [markdown]
# ### The area leak where it can bite (round 5)
#
# The routers above see each reach's upstream area twice outside the leak (the dynamic input `q / (a Q0)` and
# the capped area feature), so the graph-normalised area of the `area` leak tells them little they do not
# already know. Round 5 (registered in `st.checkpoint_config("noarea")` before training) trains the same routers
# **without those inputs** (`area_input=False`: the second dynamic channel is `q / Q0` too, the area column is
# zero), once with every leak closed and once with the area leak open, where `a / max(a)` is the only area a
# model is given besides the area ratios inside the sweep. If a graph-specific feature breaks transfer, it
# should here: the registered claim `area_leak_bites_noarea` asks for an R² drop above the bar of
# `leaks_break_transfer_river`, averaged over the two unseen basins, given that the closed no-area router is
# trained to its plateau and fits its basins (the conditions of the stored routers).

# %%
cfg_na = st.checkpoint_config("noarea")
noarea = {}  # (seed, leak) -> router without its area-carrying inputs
if quick:
    for s in seeds:
        for leak in cfg_na["leaks"]:
            m, h = st.train_router(data[s], leak, rc["steps"], s, rc["n_events"],
                                   val_every=rc["val_every"], area_input=False,
                                   **rc["model"])
            noarea[s, leak] = m.eval()
            river_hist[f"s{s}.noarea.{leak}.val"] = h.evals["val"]
else:
    ck_na = checkpoints.load(SLUG, "noarea", config=cfg_na)
    for s in seeds:
        for leak in cfg_na["leaks"]:
            m = st.RoutingOperator(2, 2, **rc["model"])
            noarea[s, leak] = ck_na.load_into(m, f"s{s}.noarea.{leak}.").eval()
            _h = ck_na.manifest["history"][f"s{s}.noarea.{leak}.val"]
            river_hist[f"s{s}.noarea.{leak}.val"] = list(
                zip(_h["step"], _h["value"], strict=True))
na_r2 = {}  # (seed, leak, basin) -> R² on held-out events
for s in seeds:
    for leak in cfg_na["leaks"]:
        for name in names:
            d = data[s][name]
            truth = d["O"][-d["n_test"]:] if d["train"] else d["O"]
            pr = st.predict_router(noarea[s, leak], d, leak, area_input=False)
            na_r2[s, leak, name] = st.r2_score(pr, truth)
held_na = [n for n in names if data[seeds[0]][n]["train"]]
na_fit = {s: np.mean([na_r2[s, "none", n] for n in held_na]) for s in seeds}
na_plateau = {s: train.plateau(val_curve(f"s{s}.noarea.none.val")[1]) for s in seeds}
na_drop = {s: np.mean([na_r2[s, "none", n] - na_r2[s, "area", n] for n in unseen])
           for s in seeds}
for s in seeds:
    print(f"seed {s}: no area input, leaks closed: held-out R² {na_fit[s]:.3f}, "
          f"plateau {na_plateau[s]:.3f}; unseen R² closed / area leak: " + ", ".join(
              f"{n} {na_r2[s, 'none', n]:.3f} / {na_r2[s, 'area', n]:.3f}"
              for n in unseen)
          + f"; drop {na_drop[s]:+.3f} (with the area inputs: "
          + ", ".join(f"{n} {r2[s, 'none', n]:.3f}" for n in unseen) + ")")

# %% tags=["remove-input"]
display(Markdown(
    "**Reading (this run).** Without its area-carrying inputs the closed router still fits its "
    "basins (held-out R² " + _lst(na_fit.values()) + ") and transfers (zero-shot "
    + _lst([na_r2[s, "none", "zero-shot"] for s in seeds]) + ", 5x "
    + _lst([na_r2[s, "none", "5x"] for s in seeds]) + "; with them "
    + _lst([r2[s, "none", "zero-shot"] for s in seeds]) + " and "
    + _lst([r2[s, "none", "5x"] for s in seeds]) + "). Opening the area leak changes the "
    "unseen-basin R² by " + ", ".join(f"{-v:+.3f}" for v in na_drop.values())
    + " (mean of the two basins, per seed): "
    + ("the leaked `a / max(a)` is not what these models rely on either. What we did not "
       "remove is the topology's area ratios inside the sweep (`P`), which give every reach "
       "its share of the upstream flow; whether they are what makes the area input "
       "dispensable was not measured."
       if max(na_drop.values()) < cfg_na["bar"] else
       "at some seed the leak costs more than the bar (per seed above).")
))

# %% [markdown]
# ### Round 5: rainfall, a task that routing alone does not solve
#
# The review of round 4 showed that the benchmark above does not need a learned model: variable-parameter
# Muskingum, the simulator's own family, with two parameters fitted on the training basins, routes the given
# lateral inflow to the outlet almost exactly (section 9). A river model earns its training where the forcing
# is **rainfall** and the basin turns it into runoff in ways no routing scheme knows. So in round 5 (registered
# in `st.rainfall_config()` and committed before any of its models was trained) each reach gets a hillslope:
# a soil bucket that swallows rain until it is full (saturation excess), a nonlinear fast reservoir and a slow
# groundwater store (`st.rainfall_runoff`). Each reach's soil capacity grows with the square of its `K`: slow
# reaches (large `K`, gentle slopes) hold deep soils, fast ones thin soils, so the model's input `K` tells part
# of it; the rest (a random lognormal factor drawn per basin) is **unknown to every model and baseline**. The models are
# given the rainfall where they were given the lateral inflow, nothing else changes: the same basins' shapes and
# sizes, the same causal router and recurrent baseline, trained for 1000 steps.
#
# **Model-free baselines**, fitted on the training basins' training events only:
# * **runoff + routing** (`st.runoff_routing_fit`): the Muskingum family after a linear runoff stage: inflow
#   `b + c * linear_reservoir(rain, k)` with `(b, c)` by least squares for each residence time `k`, then routed
#   by variable-parameter Muskingum with `(Q_ref, K factor)` from a grid that **includes the simulator's own
#   routing values**: the routing can be exact, only the runoff is guessed linearly (round 6: each `k` is scored
#   with every routing of the grid, and the grid of `k` grows while its best is at the edge, `k_edge` below);
# * **unit hydrograph** (`st.unit_hydrograph_fit`): outlet discharge per reach as a linear filter of the basin's
#   mean rainfall, 64 lags, by ridge least squares: the linear ARX model with no autoregressive terms.
#   Persistence, the usual forecasting baseline, needs observed discharge, which no model here is given.
#
# The claims' baseline is, per seed, the best of these two and the recurrent baseline by outlet R² on the
# validation events (the training basins' held-out events). Conditions, registered with the data:
# `rainfall_converged` (the router's validation curve flat, the book's plateau bar), `rainfall_fits` (its
# validation outlet R² at the book's fit bar) and `needs_the_model` (one minus the best model-free baseline's
# validation outlet R², the room a learned model has to show anything, at least five points of R²); the bars
# are printed below from the config.

# %%
cfg_rain = st.checkpoint_config("rainfall")
if quick:
    cfg_rain["seeds"] = [seed]
    cfg_rain["data"].update(n=30, T=32, n_events=8, n_test=3)
    cfg_rain.update(steps=60, val_every=10)
n_ev = cfg_rain["data"]["n_events"]
rain = {s: st.rainfall_data_from_config(s, cfg_rain) for s in seeds}
rain_models, rain_val = {}, {}  # (seed, "router" / "recurrent") -> model; val curves
if quick:
    for s in seeds:
        m, h = st.train_router(rain[s], "none", cfg_rain["steps"], s, n_ev,
                               val_every=cfg_rain["val_every"], **cfg_rain["model"])
        rain_models[s, "router"], rain_val[s] = m.eval(), np.array(h.evals["val"])[:, 1]
        m, _ = st.train_recurrent(rain[s], cfg_rain["steps"], s, n_ev,
                                  hidden=cfg_rain["baseline_hidden"])
        rain_models[s, "recurrent"] = m.eval()
else:
    ck_rain = checkpoints.load(SLUG, "rainfall", config=cfg_rain)
    for s in seeds:
        m = st.RoutingOperator(2, 2, **cfg_rain["model"])
        rain_models[s, "router"] = ck_rain.load_into(m, f"s{s}.router.").eval()
        m = st.RecurrentMP(4, hidden=cfg_rain["baseline_hidden"])
        rain_models[s, "recurrent"] = ck_rain.load_into(m, f"s{s}.recurrent.").eval()
        _h = ck_rain.manifest["history"][f"s{s}.router.val"]
        rain_val[s] = np.asarray(_h["value"])
    print(f"rainfall checkpoint trained in {ck_rain.manifest['wall_seconds']:.0f} s")
print("registered conditions:", cfg_rain["conditions"])

# %% [markdown]
# Every model and baseline is scored by the R² of the outlet hydrographs: on the training basins' held-out
# events (validation), on the zero-shot basin and on the 5x basin. The key lines: fit each baseline on the
# training events, predict, pick the claims' baseline by validation.

# %%
RAIN_FREE = ("runoff_routing", "unit_hydrograph")  # model-free baselines
RAIN_BASES = RAIN_FREE + ("recurrent",)
rr_fit, uh_fit, rain_out = {}, {}, {}  # rain_out: (seed, model, basin) -> outlet R²
for s in seeds:
    D = rain[s]
    rr_fit[s] = st.runoff_routing_fit(D, n_ev)  # training events only
    uh_fit[s] = st.unit_hydrograph_fit(D, n_ev)
    for name, d in D.items():
        r = d["q"][-d["n_test"]:] if d["train"] else d["q"]
        truth = (d["O"][-d["n_test"]:] if d["train"] else d["O"])[:, 0]
        out = {"factorized": st.predict_router(rain_models[s, "router"], d)[:, 0],
               "recurrent": st.predict_recurrent(rain_models[s, "recurrent"], d)[:, 0],
               "runoff_routing": st.runoff_routing_predict(rr_fit[s], d, r)[:, 0],
               "unit_hydrograph": st.unit_hydrograph_predict(uh_fit[s], d, r)}
        for k, v in out.items():
            rain_out[s, k, name] = st.r2_score(v, truth)
train_names = [n for n in rain[seeds[0]] if n.startswith("train")]
rain_v = {(s, k): np.mean([rain_out[s, k, n] for n in train_names])
          for s in seeds for k in ("factorized",) + RAIN_BASES}  # validation
best_free = {s: max(RAIN_FREE, key=lambda k: rain_v[s, k]) for s in seeds}
best_base = {s: max(RAIN_BASES, key=lambda k: rain_v[s, k]) for s in seeds}
print(f"{'outlet R²':18s}{'validation':>11s}{'zero-shot':>11s}{'5x':>11s}")
for k in ("factorized",) + RAIN_BASES:
    for s in seeds:
        print(f"{k:15s} s{s}{rain_v[s, k]:11.3f}" + "".join(
            f"{rain_out[s, k, n]:11.3f}" for n in unseen))
for s in seeds:
    print(f"seed {s}: best model-free by validation {best_free[s]}, claims' baseline "
          f"{best_base[s]}; runoff + routing fit", {k: round(v, 3) for k, v in
                                                     rr_fit[s].items()})

# %% [markdown]
# The outlet hydrographs of the first events on the zero-shot basin (seed of this run), and how firmly each
# margin stands: the share of resamples of the basin's events (with replacement) in which the factorized model
# still beats the claims' baseline (exploratory, not part of the registered reading).

# %%
s0 = seeds[0]
d0 = rain[s0]["zero-shot"]
fig, ax = plt.subplots(1, 3, figsize=(13, 3.2), sharey=False)
for e in range(3):
    ax[e].plot(d0["O"][e, 0], "k", label="truth (rainfall, hillslopes, routing)")
    ax[e].plot(st.predict_router(rain_models[s0, "router"], d0)[e, 0],
               label="factorized")
    ax[e].plot(st.predict_recurrent(rain_models[s0, "recurrent"], d0)[e, 0], "--",
               label="recurrent MP")
    ax[e].plot(st.runoff_routing_predict(rr_fit[s0], d0, d0["q"])[e, 0], ":",
               label="runoff + routing")
    ax[e].set(title=f"zero-shot outlet, event {e}", xlabel="hour")
ax[0].set_ylabel("discharge")
ax[0].legend(fontsize=7)
plt.tight_layout()
plt.show()


def rain_support(s, basin, n_boot=2000):
    """Share of event resamples where the factorized outlet R² beats the baseline."""
    d = rain[s][basin]
    truth = d["O"][:, 0]
    f = st.predict_router(rain_models[s, "router"], d)[:, 0]
    b = best_base[s]
    if b == "recurrent":
        p = st.predict_recurrent(rain_models[s, "recurrent"], d)[:, 0]
    elif b == "runoff_routing":
        p = st.runoff_routing_predict(rr_fit[s], d, d["q"])[:, 0]
    else:
        p = st.unit_hydrograph_predict(uh_fit[s], d, d["q"])
    rng = np.random.default_rng([s, 1616])
    ix = rng.integers(0, truth.shape[0], (n_boot, truth.shape[0]))
    return float(np.mean([st.r2_score(f[i], truth[i]) > st.r2_score(p[i], truth[i])
                          for i in ix]))


rain_sup = {(s, n): rain_support(s, n) for s in seeds for n in unseen}
print("event bootstrap, share of resamples the factorized model wins:",
      {k: round(v, 2) for k, v in rain_sup.items()})

# %% [markdown]
# A hydrologist who knew the simulator's runoff equations would calibrate them. That is not a model-free
# baseline (it is the simulator with one unknown), so it is measured apart, as a reference for what a perfect
# structure buys: the simulator's own hillslope with **one** soil capacity for every reach, fitted on the
# training events from a grid, and the simulator's own routing (registered with the benchmark, exploratory).

# %%
cap_grid = [0.5, 1.0, 2.0, 3.0, 4.0, 6.0]
cap_fit = {}
for s in seeds:
    def cap_pred(d, r, c):
        lat = st.rainfall_runoff(r, np.full(d["K"].size, c), **st.RUNOFF)
        return st.route_sequential(d["parents"], d["K"], lat, nonlinear=True)[:, 0]
    tr = [rain[s][n] for n in train_names]
    fit = [np.mean([st.r2_score(cap_pred(d, d["q"][:n_ev], c), d["O"][:n_ev, 0])
                    for d in tr]) for c in cap_grid]
    cap_fit[s] = cap_grid[int(np.argmax(fit))]
    for name, d in rain[s].items():
        r = d["q"][-d["n_test"]:] if d["train"] else d["q"]
        truth = (d["O"][-d["n_test"]:] if d["train"] else d["O"])[:, 0]
        rain_out[s, "structure", name] = st.r2_score(cap_pred(d, r, cap_fit[s]), truth)
    rain_v[s, "structure"] = np.mean([rain_out[s, "structure", n] for n in train_names])
    print(f"seed {s}: one capacity {cap_fit[s]}: outlet R² validation "
          f"{rain_v[s, 'structure']:.3f}, " + ", ".join(
              f"{n} {rain_out[s, 'structure', n]:.3f}" for n in unseen))

# %% tags=["remove-input"]
_gap = [rain_out[s, "factorized", n] - rain_out[s, best_base[s], n]
        for s in seeds for n in unseen]
_struct_wins = all(rain_out[s, "structure", n] > rain_out[s, "factorized", n]
                   for s in seeds for n in unseen)
display(Markdown(
    "**Reading (this run), round 5's baselines** (round 6 adds a calibrated conceptual model and a "
    "second training run below; the claims read those). The best model-free baseline by validation is, "
    "per seed, "
    + ", ".join(f"{best_free[s].replace('_', ' ')} (validation outlet R² "
                f"{rain_v[s, best_free[s]]:.2f})" for s in seeds)
    + ": it leaves a learned model a room of "
    + _lst([1 - rain_v[s, best_free[s]] for s in seeds]) + ". The factorized router "
    "reaches " + _lst([rain_v[s, "factorized"] for s in seeds]) + " on validation and "
    + "; ".join(f"{n} " + _lst([rain_out[s, "factorized", n] for s in seeds])
                for n in unseen)
    + " on the unseen basins; the recurrent baseline "
    + _lst([rain_v[s, "recurrent"] for s in seeds]) + " on validation. The margin over "
    f"the claims' baseline runs from {min(_gap):+.2f} to {max(_gap):+.2f} (per seed and "
    "unseen basin; event-bootstrap share of resamples in which the factorized model "
    "wins: " + "; ".join(f"{n} " + _lst([rain_sup[s, n] for s in seeds]) for n in unseen)
    + "); over the best model-free baseline alone (chosen by validation, "
    "exploratory) it is " + "; ".join(
        f"{n} " + ", ".join(
            f"{rain_out[s, 'factorized', n] - rain_out[s, best_free[s], n]:+.2f}"
            for s in seeds) for n in unseen)
    + ". The simulator's own hillslope with one capacity for every reach "
    "reaches " + "; ".join(f"{n} " + _lst([rain_out[s, "structure", n] for s in seeds])
                          for n in unseen)
    + (": above the factorized model everywhere. A hydrologist who knew the runoff "
       "equations would need one calibrated number for this outlet; the learned model's "
       "edge, where it has one, is over baselines that do not know them."
       if _struct_wins else
       ": not above the factorized model everywhere (per seed and basin above).")
))

# %% [markdown]
# **Round 6: a calibrated conceptual model, zero-shot and gauged.** The structure reference above knows the
# simulator's equations; a practitioner does not, but would not stop at a linear runoff stage either: the
# standard tool for rainfall to discharge is a calibrated conceptual model (HBV, GR4J and their kin). We fit one
# whose equations are **not** the simulator's (`st.hbv_runoff`: HBV's soil box, where each hour's rain
# recharges the response stores in the share `(SM / FC)^beta`, an upper zone with a threshold outflow and
# percolation, a linear lower zone; field capacity `fc (K / 2.5)^g`, regionalised by the reach's `K`, which
# every model is given), its eleven numbers and its two routing numbers calibrated with many starts
# (`st.hbv_calibrate`: differential evolution over the parameter box, then Nelder-Mead from its best point).
# One disclosure (added at review): the *form* of that regionalisation, a power of `K`, is the form of the
# simulator's own capacity rule (section 3's rainfall data: capacity `smax (K / 2.5)^gamma` times the hidden
# lognormal factor), so the conceptual model is handed the rule's shape, though not its exponent, which it
# calibrates (printed below next to the simulator's). The learned models see `K` too and may learn any
# function of it.
# At review in round 5 a cheaper calibration (Nelder-Mead from the best of 40 random points, 8 events) stalled
# at two of three seeds; this one was registered (`st.round6_config`) and committed before it ran, and runs
# ahead of the notebook (`data/16_space_time_operators/make_round6.py`, records `conceptual_s<seed>.json`).
# Two settings, kept apart:
# * **zero-shot** (a claims' baseline): calibrated on the training basins' training events, then applied
#   unchanged to their held-out events and to the unseen basins, like every learned model;
# * **gauged** (an upper reference, never a baseline): re-calibrated on each unseen basin's **own** events,
#   starting from the zero-shot numbers; it is scored on the same events it was calibrated on (in-sample), so it
#   says how far a conceptual model of this form can go on that basin, not what it would predict.
#
# From round 6 the claims' baseline is, per seed, the best by validation of the three zero-shot model-free
# baselines (this conceptual model included) and the recurrent baseline, and `needs_the_model` is read on the best
# of the three model-free ones (section 9). Quick mode calibrates with a tiny budget live.

# %%
def load_round6(kind, seeds):
    """Round 6's records (``make_round6.py``), refusing one made with another config."""
    out = {}
    for s in seeds:
        got = json.loads(checkpoints.fetch(SLUG, f"{kind}_s{s}.json").read_text())
        want = checkpoints.normalize({k: cfg6[k] for k in ("data", kind, "reading")})
        if got["config"] != want or got["seed"] != s:
            raise ValueError(f"{kind}_s{s}.json was made with another config")
        out[s] = got["record"]
    return out


cfg6 = st.round6_config()
if quick:
    cfg6["seeds"] = [seed]
    cfg6["data"] = dict(cfg_rain["data"])
    cfg6["conceptual"] = dict(cfg6["conceptual"], popsize=1, maxiter=2, polish_iter=20,
                              gauged=dict(cfg6["conceptual"]["gauged"], polish_iter=10))
    cfg6["rerun"] = dict(cfg6["rerun"], steps=cfg_rain["steps"],
                         val_every=cfg_rain["val_every"])
    concept = {s: st.conceptual_record(s, cfg6) for s in seeds}
else:
    concept = load_round6("conceptual", seeds)
gauged = {}  # (seed, basin) -> in-sample outlet R² of the gauged re-calibration
for s in seeds:
    zs6 = concept[s]["zero_shot"]
    for name, v in zs6["outlet_r2"].items():
        rain_out[s, "conceptual", name] = v
    rain_v[s, "conceptual"] = zs6["validation"]
    for n in unseen:
        gauged[s, n] = concept[s]["gauged"][n]["outlet_r2"]
    print(f"seed {s}: zero-shot HBV-type (training outlet R² {zs6['train_score']:.3f}, "
          f"{zs6['evals']} evaluations): validation {rain_v[s, 'conceptual']:.3f}, "
          + ", ".join(f"{n} {rain_out[s, 'conceptual', n]:.3f}" for n in unseen)
          + " | gauged (in-sample) "
          + ", ".join(f"{n} {gauged[s, n]:.3f}" for n in unseen)
          + f" | factorized {rain_v[s, 'factorized']:.3f}, " + ", ".join(
              f"{n} {rain_out[s, 'factorized', n]:.3f}" for n in unseen))

# %% tags=["remove-input"]
_hbv_wins = [(s, n) for s in seeds for n in unseen
             if rain_out[s, "conceptual", n] > rain_out[s, "factorized", n]]
_hbv_stuck = [s for s in seeds if concept[s]["zero_shot"]["train_score"] < 0.9]
_box = dict(zip(st.HBV_NAMES + st.HBV_ROUTE_NAMES, zip(st.HBV_LOW + st.HBV_ROUTE_LOW,
                                                        st.HBV_HIGH + st.HBV_ROUTE_HIGH)))
_edge = {s: [k for k, (lo, hi) in _box.items()
             for v in [concept[s]["zero_shot"]["params"][k]]
             if min(v - lo, hi - v) < 0.05 * (hi - lo)] for s in seeds}
_l3 = lambda v: ", ".join(f"{x:.3f}" for x in v)  # noqa: E731  (R² near 1: three decimals)
_gap6 = [concept[s]["gauged"][n]["outlet_r2"] - rain_out[s, "conceptual", n] for s in seeds for n in unseen]
display(Markdown(
    "**Reading (this run).** Calibrated on the training basins, the HBV-type model fits its training "
    "events at outlet R² " + _l3([concept[s]["zero_shot"]["train_score"] for s in seeds])
    + (f" (below the book's fit bar at seed(s) {', '.join(map(str, _hbv_stuck))})"
       if _hbv_stuck else "")
    + " and reaches " + _l3([rain_v[s, "conceptual"] for s in seeds])
    + " on validation (room left to a learned model " + _l3([1 - rain_v[s, "conceptual"] for s in seeds])
    + "), " + "; ".join(f"{n} " + _l3([rain_out[s, "conceptual", n] for s in seeds]) for n in unseen)
    + " zero-shot on the unseen basins: above the factorized model at "
    f"{len(_hbv_wins)} of {len(seeds) * len(unseen)} (seed, basin) pairs. Re-calibrated on each unseen "
    "basin's own events (gauged, scored in-sample, so an upper bound) it reaches "
    + "; ".join(f"{n} " + _l3([gauged[s, n] for s in seeds]) for n in unseen)
    + f": the zero-shot model is within {max(_gap6):.3f} of its own in-sample re-calibration on every unseen basin, "
    "so regionalising by `K` loses almost nothing at the outlet, where the reaches' hidden capacity factors "
    "average out over many reaches. Its calibrated exponent of `K` in the field capacity is "
    + _lst([concept[s]["zero_shot"]["params"]["g"] for s in seeds])
    + f" (per seed; the simulator's capacity rule has {cfg_rain['data']['gamma']:g}): it is handed the "
    "rule's form, not its value. Zero-shot parameters within 5% of their box's edge, per seed: "
    + "; ".join(f"seed {s} " + (", ".join(_edge[s]) or "none") for s in seeds)
    + " (the box is the calibration's search space; a wider one was not tried)."
))

# %% [markdown]
# **Round 6: run-to-run noise.** Round 5 trained one router and one recurrent baseline per seed, so a margin of a
# few points of R² could be the draw of the initial weights and batches. Round 6 trains both a second time per
# seed (the same data and recipe, training seed `seed + 100`; registered before it ran; records
# `rerun_s<seed>.json`, no weights). The claims' baseline is chosen per run by validation among the three zero-shot
# model-free baselines and that run's recurrent model; each claim reads the mean of the two runs' margins, and
# the condition `runs_agree_*` asks that the two margins have the same sign (their difference smaller than
# their sum: `st.runs_agree < 1`).

# %%
if quick:
    rerun = {s: st.rerun_record(s, cfg6) for s in seeds}
else:
    rerun = load_round6("rerun", seeds)
FREE6 = ("runoff_routing", "unit_hydrograph", "conceptual")  # zero-shot model-free
runs = {}  # (seed, run) -> {model: {basin: outlet R²}, "validation": {model: R²}}
for s in seeds:
    free = {k: {n: rain_out[s, k, n] for n in rain[s]} for k in FREE6}
    fv = {k: rain_v[s, k] for k in FREE6}
    runs[s, 1] = dict(free,
                      factorized={n: rain_out[s, "factorized", n] for n in rain[s]},
                      recurrent={n: rain_out[s, "recurrent", n] for n in rain[s]},
                      validation=dict(fv, factorized=rain_v[s, "factorized"],
                                      recurrent=rain_v[s, "recurrent"]))
    run2 = rerun[s]
    runs[s, 2] = dict(free, factorized=run2["factorized"]["outlet_r2"],
                      recurrent=run2["recurrent"]["outlet_r2"],
                      validation=dict(fv, factorized=run2["factorized"]["validation"],
                                      recurrent=run2["recurrent"]["validation"]))
best6 = {(s, j): max(FREE6 + ("recurrent",), key=lambda k: runs[s, j]["validation"][k])
         for s in seeds for j in (1, 2)}  # the claims' baseline per seed and run
margin6 = {(s, j, n): runs[s, j]["factorized"][n] - runs[s, j][best6[s, j]][n]
           for s in seeds for j in (1, 2) for n in unseen}
best_free6 = {s: max(FREE6, key=lambda k: rain_v[s, k]) for s in seeds}
rerun_plateau = {s: train.plateau([v for _, v in rerun[s]["val_curve"]]) for s in seeds}
print(f"{'':8s}{'run':>4s}{'baseline':>17s}{'val fact.':>10s}{'val base':>9s}"
      + "".join(f"{'margin ' + n:>16s}" for n in unseen))
for s in seeds:
    for j in (1, 2):
        v = runs[s, j]["validation"]
        print(f"seed {s:<3d}{j:4d}{best6[s, j]:>17s}{v['factorized']:10.3f}"
              f"{v[best6[s, j]]:9.3f}"
              + "".join(f"{margin6[s, j, n]:+16.3f}" for n in unseen))

# %% tags=["remove-input"]
display(Markdown(
    "**Reading (this run).** The claims' baseline chosen by validation is, per seed (run 1 / run 2), "
    + "; ".join(f"seed {s}: {best6[s, 1].replace('_', ' ')} / {best6[s, 2].replace('_', ' ')}"
                for s in seeds)
    + ". The factorized model's outlet margin over it is, per seed (run 1 / run 2), "
    + "; ".join(f"{n} " + ", ".join(f"{margin6[s, 1, n]:+.3f} / {margin6[s, 2, n]:+.3f}" for s in seeds)
                for n in unseen)
    + ". Between the two training runs the factorized model's validation outlet R² moves by "
    + _lst([abs(runs[s, 1]["validation"]["factorized"] - runs[s, 2]["validation"]["factorized"])
            for s in seeds])
    + " and its zero-shot outlet R² by "
    + _lst([abs(runs[s, 1]["factorized"]["zero-shot"] - runs[s, 2]["factorized"]["zero-shot"])
            for s in seeds]) + " (per seed). The best zero-shot model-free baseline ("
    + ", ".join(best_free6[s].replace("_", " ") for s in seeds) + ") leaves a learned model "
    "a validation room of " + _lst([1 - rain_v[s, best_free6[s]] for s in seeds])
    + ", against the registered bar of "
    f"{cfg6['reading']['conditions']['needs_the_model'][2]} (`needs_the_model`)"
    + (": the task does not need a learned model at any seed, so both transfer claims are "
       "inconclusive whatever their margins (section 9)"
       + ("; the zero-shot conceptual model transfers to both unseen basins better than either "
          "learned model in both runs at every seed." if all(
              runs[s, j]["conceptual"][n] > max(runs[s, j]["factorized"][n],
                                                runs[s, j]["recurrent"][n])
              for s in seeds for j in (1, 2) for n in unseen) else ".")
       if all(1 - rain_v[s, best_free6[s]] < 0.05 for s in seeds) else ".")
))

# %% [markdown]
# ## 4. Checks
#
# Mass balance of the simulator; the spectral solution equals the sequential one; the sweep with Muskingum
# filters equals the exact solution; one state dict runs on basins of every size with no parameter shape
# depending on `N`; permuting the nodes of a basin permutes the outputs; the Chebyshev recursion (used by the
# cross-geometry model) equals the dense polynomial.

# %%
rec.check("mass_balance", max(mass.values()), 1e-3, op="<=",
          note="linear and nonlinear routing, long horizon")
rec.check("spectral_equals_sequential", spectral_err, 1e-10, op="<=")
rec.check("sweep_equals_exact", sweep_err, 1e-10, op="<=",
          note="upstream sweep with the true Muskingum H vs the sparse solves")

sep = routers[seeds[0], "none"]
shapes = {k: tuple(v.shape) for k, v in sep.state_dict().items()}
clone = st.RoutingOperator(2, 2, **rc["model"])
clone.load_state_dict(sep.state_dict())
ran = []
with torch.no_grad():
    for d in basins.values():
        xx, ss, gg = st.river_inputs(d["parents"], d["K"], d["q"][:1])
        ran.append(clone(xx, ss, gg).shape[:3] == xx.shape[:3])
same = all(ran) and shapes == {k: tuple(v.shape) for k, v in clone.state_dict().items()}
rec.check("graph_independent_params", same, True,
          note=f"one state dict on N = {[d['parents'].size for d in basins.values()]}, "
          "every hour of the window from one pass")

# permuting the nodes: relabel a basin so that parents still precede children
pa = tr0["parents"]
perm = np.concatenate([[0], np.setdiff1d(np.arange(pa.size), [0])[
    np.random.default_rng(seed).permutation(pa.size - 1)]])
inv = np.argsort(perm)
p_perm = np.where(pa[perm] >= 0, inv[np.maximum(pa[perm], 0)], -1)
with torch.no_grad():
    xa, sa, ga = st.river_inputs(pa, tr0["K"], tr0["q"][:2])
    xb, sb, gb = st.river_inputs(p_perm, tr0["K"][perm], tr0["q"][:2][:, perm])
    eq_err = (sep(xb, sb, gb) - sep(xa, sa, ga)[perm]).abs().max().item()
rec.check("permutation_equivariance", eq_err, 1e-5, op="<=")

Pd = st.area_weighted_operator(p_tr).toarray()
xd = torch.randn(p_tr.size, 3, dtype=torch.float64)
recursion = st.chebyshev_apply(torch.tensor(Pd), xd, 4)
cheb_err = max(
    float(np.abs(recursion[k].numpy() - st.chebyshev_dense(Pd, k) @ xd.numpy()).max())
    for k in range(5))
rec.check("chebyshev_recursion", cheb_err, 1e-10, op="<=")

# %%
# causality: inflow added only from hour t_cut on changes no earlier discharge (every
# seed's router, leaks closed, on the zero-shot and the deep basin); the FFT length
# changes nothing; no predicted discharge is negative (every model, basin and seed)
t_cut = 3 * rc["T"] // 4
viol, pad_gap = [], []
for s in seeds:
    m = routers[s, "none"]
    wide = st.RoutingOperator(2, 2, pad=8, **rc["model"])
    wide.load_state_dict(m.state_dict())
    for name in ("zero-shot", "deep"):
        d = data[s][name]
        xc, sc, grc = st.river_inputs(d["parents"], d["K"], d["q"][:2])
        run = lambda xx, m=m, sc=sc, grc=grc: m(xx, sc, grc)  # noqa: E731
        viol.append(st.causality_violation(run, xc, t_cut))
        with torch.no_grad():
            y2, y8 = m(xc, sc, grc), wide(xc, sc, grc)
        pad_gap.append(float((y2 - y8).abs().max() / y2.abs().max()))
rec.check("causal", max(viol), 1e-5, op="<=",
          note=f"max |change of discharge before hour {t_cut}| / max |discharge| when "
          f"inflow is added from hour {t_cut} on")
rec.check("padding_safe", max(pad_gap), 1e-5, op="<=",
          note="FFT length 2T vs 8T, same weights")
neg = max(st.negative_share(preds[s, k, n]) for s in seeds for k in st.LEAKS
          for n in names)
rec.check("non_negative", neg, 0.0, op="<=",
          note="share of negative predicted discharges, every router, basin and seed")

# %% [markdown]
# ## 5. Figures: hydrographs on unseen basins, R² with each leak open

# %%
s0 = seeds[0]
fig, ax = plt.subplots(1, 3, figsize=(13, 3.4))
zs = data[s0]["zero-shot"]
a_zs = st.upstream_area(zs["parents"])
mid = int(np.argsort(np.abs(a_zs - a_zs.max() / 4))[0])
for k, (node, title) in enumerate([(0, "zero-shot outlet"),
                                   (mid, f"zero-shot reach {mid}")]):
    ax[k].plot(zs["O"][0, node], "k", label="truth (nonlinear Muskingum)")
    ax[k].plot(preds[s0, "none", "zero-shot"][0, node], "--", label="factorized")
    if (s0, "recurrent", "zero-shot") in preds:
        ax[k].plot(preds[s0, "recurrent", "zero-shot"][0, node], ":",
                   label="recurrent MP")
    ax[k].set(xlabel="hour", ylabel="discharge", title=title)
ax[0].legend(fontsize=8)
xs = np.arange(len(names))
for j, leak in enumerate(st.LEAKS):
    vals = [np.mean([max(r2[s, leak, n], -0.5) for s in seeds]) for n in names]
    ax[2].bar(xs + (j - 1.5) * 0.2, vals, 0.2, label="no leak" if leak == "none"
              else f"leak: {leak}")
ax[2].set(xticks=xs, xticklabels=names, ylabel="R² (mean over seeds, floor -0.5)",
          ylim=(-0.5, 1.05))
ax[2].tick_params(axis="x", labelsize=7)
ax[2].legend(fontsize=7)
plt.show()

if ckpt is not None:
    checkpoints.plot_history(ckpt.manifest, [f"s{s0}.router.{k}" for k in st.LEAKS]
                             + [f"s{s0}.recurrent"], logy=True,
                             title=f"training loss (seed {s0})")
    plt.show()

# %% [markdown]
# ## 6. Training step time vs window length: where could the factorization win?
#
# One training step (forward, backward, AdamW) of the factorized model and of the recurrent baseline on the same
# training basin and batch (2 events), for growing windows `T`. The recurrent model needs `T` sequential steps;
# the factorized one needs `depth` sequential sweep levels per block whatever `T` is, each an FFT product over
# the whole window. Both run in this process on one thread, interleaved: one warm-up step each, then the median
# of repeated steps. At the longest window we repeat the comparison for every seed (new weights and storms each
# time) to see the spread, and split the factorized forward pass into its parts: the causal sweep (the filters'
# taps and the per-level FFTs) and the pointwise layers (lift, sources, running state, mixing MLPs, head).

# %%
def bench_pair(Tb, s, repeats):
    """Timings of one training step (forward, backward, AdamW) of each model at window
    Tb, seed s: both sides timed in one run, interleaved (repro.benchmark), CPU time
    beside wall."""
    qb = st.lateral_inflow(p_tr.size, Tb, 2, np.random.default_rng([s, Tb]))
    xb, sb, gb = st.river_inputs(p_tr, K_tr, qb)
    xr = st.recurrent_inputs(xb, sb)
    Pb = st.to_torch_sparse(st.area_weighted_operator(p_tr))
    yb = torch.zeros(*xb.shape[:3], 1)
    torch.manual_seed(s)
    fm = st.RoutingOperator(2, 2, **rc["model"])
    rm = st.RecurrentMP(4, hidden=cfg["baseline_hidden"])

    def step(model, x, run):
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

        def one():
            loss = ((run(model, x) - yb) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        return one

    return repro.benchmark({"factorized": step(fm, xb, lambda m, x: m(x, sb, gb)),
                            "recurrent": step(rm, xr, lambda m, x: m(x, Pb))},
                           repeats=repeats, warmup=1)


repeats = 5 if not quick else 2
bench = {}
for Tb in bench_T:
    bench[Tb] = bench_pair(Tb, seed, repeats)
    tb = bench[Tb]
    print(f"T={Tb:5d}: CPU s per step factorized {tb.median('factorized'):.3f} "
          f"(spread {tb.spread('factorized'):.2f}), "
          f"recurrent {tb.median('recurrent'):.3f} "
          f"(spread {tb.spread('recurrent'):.2f}) "
          f"-> {tb.ratio('recurrent', 'factorized'):.2f}x "
          f"(wall {tb.ratio('recurrent', 'factorized', clock='wall'):.2f}x)")
Tmax = bench_T[-1]
bench_seeds = {s: bench[Tmax] if s == seed else bench_pair(Tmax, s, repeats)
               for s in seeds}
speedups = [bench_seeds[s].ratio("recurrent", "factorized") for s in seeds]
bench_spread = [max(bench_seeds[s].spread(k) for k in ("factorized", "recurrent"))
                for s in seeds]
print(f"T={Tmax}, per seed: " + ", ".join(f"{v:.2f}x" for v in speedups)
      + " | largest spread per seed: " + ", ".join(f"{v:.2f}" for v in bench_spread))


# %%
def forward_parts(model, x, static, g, repeats):
    """Median seconds of the parts of one forward pass (autograd on, as in training)."""
    N, B, T, _ = x.shape
    M = model.pad * T
    parts = {"sweep + filters": [], "pointwise layers": []}
    hours = torch.arange(1, T + 1, dtype=x.dtype)[:, None]
    for _ in range(repeats + 1):
        tt = dict.fromkeys(parts, 0.0)
        t0 = time.perf_counter()
        h = model.lift(torch.cat([x, static[:, None, None].expand(N, B, T, -1)], -1))
        tt["pointwise layers"] += time.perf_counter() - t0
        layers = (model.src, model.state, model.filters, model.mix)
        for src, state, filt, mix in zip(*layers, strict=True):
            t0 = time.perf_counter()
            sv = src(h)
            t1 = time.perf_counter()
            taps_hat = torch.fft.rfft(filt.taps(static, T), n=M, dim=1)[:, None]
            yv = st.causal_sweep(g, taps_hat, sv, M)  # FFTs per level inside
            t2 = time.perf_counter()
            h = h + mix(torch.cat([h, yv, state(torch.cumsum(h, 2) / hours)], -1))
            t3 = time.perf_counter()
            tt["pointwise layers"] += (t1 - t0) + (t3 - t2)
            tt["sweep + filters"] += t2 - t1
        t0 = time.perf_counter()
        model.head(h)
        tt["pointwise layers"] += time.perf_counter() - t0
        for k in parts:
            parts[k].append(tt[k])
    return {k: float(np.median(v[1:])) for k, v in parts.items()}


qb = st.lateral_inflow(p_tr.size, Tmax, 2, np.random.default_rng([seed, Tmax]))
xb, sb, gb = st.river_inputs(p_tr, K_tr, qb)
torch.manual_seed(seed)
parts = forward_parts(st.RoutingOperator(2, 2, **rc["model"]), xb, sb, gb, repeats)
total = sum(parts.values())
print(f"factorized forward pass at T={Tmax} ({total:.3f} s): " + ", ".join(
    f"{k} {v:.3f} s ({100 * v / total:.0f}%)" for k, v in parts.items()))

# %%
fig, ax = plt.subplots(figsize=(5, 3.2))
ax.plot(bench_T, [bench[t].median("factorized") for t in bench_T], "o-",
        label="factorized (sweep)")
ax.plot(bench_T, [bench[t].median("recurrent") for t in bench_T], "s-",
        label="recurrent MP")
ax.set(xscale="log", yscale="log", xlabel="window T (hours)",
       ylabel="CPU s per training step (median)")
ax.legend()
plt.show()

# %% tags=["remove-input"]
_r = {t: bench[t].ratio("recurrent", "factorized") for t in bench_T}
_share = {k: 100 * v / total for k, v in parts.items()}
_top = max(_share, key=_share.get)
display(Markdown(
    f"**Reading (this run).** Medians of CPU time per training step, both models timed in one interleaved run: "
    f"at T = {bench_T[0]} the recurrent step costs {_r[bench_T[0]]:.2f}× the factorized one, at "
    f"T = {Tmax} {min(speedups):.2f}–{max(speedups):.2f}× over the seeds "
    + ("(the factorized step is faster at every seed)" if min(speedups) > 1 else
       "(the factorized step is slower at every seed)" if max(speedups) < 1 else
       "(the factorized step is faster at some seeds only)")
    + f", against the paper's 28× on a GPU. The largest spread (IQR ÷ median) of a side is "
    f"{max(bench_spread):.2f}, so the ratios are "
    + ("larger than the timing noise." if min(abs(v - 1) for v in speedups) > max(bench_spread)
       else "not clearly larger than the timing noise at every seed.")
    + f" The largest part of the forward pass is {_top} ({_share[_top]:.0f}%; "
    + ", ".join(f"{k} {v:.0f}%" for k, v in _share.items())
    + "): on one CPU thread the sweep's sequential levels are a Python loop over depth, two FFTs per level."
))

# %% [markdown]
# ## 7. Cross-geometry transfer (a stand-in for the paper's Navier-Stokes)
#
# A geometry-dependent PDE: a tracer released by sources is carried by a **potential flow** through a 10x10
# channel with random rectangular obstacles (inlet on the left, outlet on the right) and diffuses and decays.
# For each geometry the flow comes from one sparse Laplace solve, and the dynamics are integrated implicitly with
# one sparse factorisation. The flow squeezes through gaps and stalls behind obstacles, so the same sources give
# different fields on different geometries.
#
# The model is the factorized operator (per-node spectral convolution in time, the paper's FNO-1D block, which
# unlike the river router is not causal: measured below) with one of two spatial mixers:
# a **Chebyshev** polynomial of two fixed operators of each geometry (the Laplacian rescaled by the bound shared by
# all 4-neighbour grids, and the upwind inflow operator of its potential flow, divided by one fixed speed), or
# **Physics-Attention** over the cells with a graph-aware input (each cell's features together with their
# aggregates under the same two operators, then soft slices, attention between slice tokens, read-back). Inputs
# are the sources and the cell degree. **Every model trains for the same number of optimizer steps**, whatever
# it trains on (printed below; a leak model may train longer, printed in section 7's last part): the Chebyshev model
# on G = 1 and on G = 15 geometries, the attention model on 15, and a **locally trained oracle** per test
# geometry (the Chebyshev model trained on that geometry's own training events); the G = 1 model and the
# oracles are also trained with as many events as the G = 15 model (the data-matched controls, below). Each keeps the last of its six events
# per geometry for validation, records its validation curve, and ends with the weights that scored best there
# (early stopping); the held-out test events never choose anything. The convergence conditions read the
# validation curves (the book's plateau rule), fixed before the errors are read; one more condition, that the
# oracle is a ceiling, was added at review (below).

# %%
GEO_KEYS = [f"G{G}" for G in gc["counts"]] + ["attention"]
LEAK_KEYS = [f"leak_{k}" for k in gc["leaks"]]  # trained for the seeds in leak_seeds
geo_err, oracle_err, geo_curves, geo_models, geo_test = {}, {}, {}, {}, {}
geo_in = {}  # (seed, key) -> error on the training geometries' own held-out events
# (seed, key) -> the curve with its steps (the retrained models' reading needs them)
geo_steps = {}
geo_all = {}  # seed -> its geometries (training, then test)
t0 = time.process_time()
for s in geo_seeds:
    geos = st.geometry_data(s, gc["n_train"] + gc["n_test"], T=gc["T"])
    train_g, test_g = geos[: gc["n_train"]], geos[gc["n_train"]:]
    geo_test[s], geo_all[s] = test_g, geos
    oracles = [f"oracle{k}" for k in range(gc["n_test"])]
    for key in GEO_KEYS + oracles + (LEAK_KEYS if s in leak_seeds else []):
        leak = key[5:] if key.startswith("leak_") else "none"
        on = st.geometry_leak(geos, gc["n_train"], leak, s)
        m = st.geometry_model(gc["order"], s,
                              mixer="attention" if key == "attention" else "cheb",
                              c_in=3 if leak == "feature" else 2,
                              embed_nodes=100 * gc["n_train"] if leak == "embed" else 0)
        train_on = (on[gc["n_train"] + int(key[6:]):][:1] if key.startswith("oracle")
                    else on[:int(key[1:])] if key[0] == "G" else on[: gc["n_train"]])
        if quick:
            h = st.train_geometry(m, train_on, 1, s,
                                  steps=cfg["leak_steps"].get(leak, gc["steps"]),
                                  val_events=gc["val_events"],
                                  val_every=gc["val_every"])
            geo_curves[s, key] = [v for _, v in h.evals["val"]]
        else:  # a model retrained in round 4 replaces the stored one (section 7)
            ck = ckpt_r if (s, key) in retrained else ckpt
            ck.load_into(m, f"s{s}.geo.{key}.")
            hist_ = ck.manifest["history"][f"s{s}.geo.{key}.val"]
            geo_curves[s, key], geo_steps[s, key] = hist_["value"], hist_
        test_on = train_on if key.startswith("oracle") else on[gc["n_train"]:]
        geo_err[s, key] = st.geometry_error(m.eval(), test_on)
        geo_models[s, key] = m
        if key.startswith("leak_") or key == f"G{gc['counts'][-1]}":
            geo_in[s, key] = st.geometry_error(m, on[: gc["n_train"]])
    oracle_err[s] = float(np.mean([geo_err[s, k] for k in oracles]))
    print(f"seed {s}: " + ", ".join(f"{k} {geo_err[s, k]:.3f}" for k in GEO_KEYS)
          + f" | oracle {oracle_err[s]:.3f}" + "".join(
              f" | {k} {geo_err[s, k]:.3f}" for k in LEAK_KEYS if (s, k) in geo_err))
print(f"{gc['steps']} optimizer steps per model; {time.process_time() - t0:.1f} s CPU")
Gmax, G1 = f"G{gc['counts'][-1]}", f"G{gc['counts'][0]}"


# %%
def read_plateau(s, key):
    """The registered convergence reading: the plain plateau for the stored (cosine)
    models; for a model retrained in round 4 (WSD), the stable phase with noise = 2."""
    if (s, key) in retrained:
        return st.stable_plateau(geo_steps[s, key], retrained[s, key])
    return train.plateau(geo_curves[s, key])


geo_plateau = {(s, k): read_plateau(s, k) for (s, k) in geo_curves}

# the stand-in's time block is the paper's FNO-1D (a few Fourier modes of a window
# padded to 2T), not the river's causal filters: measure how much sources added from
# hour t_geo on change the predicted field before it (first test geometry per seed)
t_geo = 3 * gc["T"] // 4
geo_viol = {}
for s in geo_seeds:
    gt = geo_test[s][0]
    for key in (Gmax, "attention"):
        fn = lambda xx, m=geo_models[s, key], gt=gt: m(xx, gt["ops"])  # noqa: E731
        x_test = gt["x"][:, gt["n_events"]:]
        geo_viol[s, key] = st.causality_violation(fn, x_test, t_geo)
print(f"change of the field before hour {t_geo} / max |field|, sources added from "
      f"hour {t_geo} on: "
      + ", ".join(f"seed {s} {k} {v:.2f}" for (s, k), v in geo_viol.items()))

# %% [markdown]
# **Data-matched controls.** The G = 1 control and the oracles above train on the 5 training events of one
# geometry; the G = 15 model sees 15 geometries' worth, 75 events, so "more geometries" and "more data" are
# confounded, and an oracle with 5 events is no ceiling (measured below). The controls that compare like with
# like were designed before they were trained (the data script's docstring): the same Chebyshev model,
# trained for the same steps on **15 copies of one geometry** (`helpers`: `geometry_matched`), each copy
# holding 5 fresh training events drawn from the same sources and simulated on that geometry, one copy per
# step. It gets what the G = 15 model gets, 5 events per step and 75 in all, with the same validation event
# (early stopping) and the same test events as the 5-event model. The G = 1 control uses the first training
# geometry, each oracle its test geometry. The 75 events differ from the G = 15 model's only in where they
# fall: 75 source patterns on one geometry against 5 on each of 15. The abstract does not say whether its
# one-geometry model had fewer events than the pooled one; we show both G = 1 controls (5 events, equal per
# geometry; 75 events, equal in all) and the claim uses the stricter, data-matched one. Early stopping reads one
# validation event for these models, 15 for the G = 15 model. The default run reads their validation curves
# and errors from the checkpoint (measurements; their weights are not stored, so they are not recomputed
# here); quick mode trains them here.

# %%
DM = ["dm_G1"] + [f"dm_oracle{k}" for k in range(gc["n_test"])]
n_copies = gc["counts"][-1]  # copies of one geometry: the G = 15 model's events
dm_own = {}  # (seed, model) -> error on its own geometry's test events
oracle_dm = {}  # seed -> mean over the data-matched oracles
t0 = time.process_time()
for s in dm_seeds:
    for key in DM:
        g = geo_all[s][0] if key == "dm_G1" else geo_test[s][int(key[9:])]
        if quick:
            m = st.geometry_model(gc["order"], s)
            h = st.train_geometry(m, st.geometry_matched(g, n_copies, gc["val_events"]),
                                  1, s, steps=gc["steps"], val_events=gc["val_events"],
                                  val_every=gc["val_every"])
            geo_curves[s, key] = [v for _, v in h.evals["val"]]
            dm_own[s, key] = st.geometry_error(m.eval(), [g])
            if key == "dm_G1":
                geo_err[s, key] = st.geometry_error(m, geo_test[s])
        else:
            ck = ckpt_r if (s, key) in retrained else ckpt
            hist_ = ck.manifest["history"][f"s{s}.geo.{key}.val"]
            geo_curves[s, key], geo_steps[s, key] = hist_["value"], hist_
            dm_own[s, key] = ck.manifest["metrics"][f"s{s}.geo.{key}.own_err"]
            if key == "dm_G1":
                geo_err[s, key] = ck.manifest["metrics"][f"s{s}.geo.{key}.test_err"]
        geo_plateau[s, key] = read_plateau(s, key)
    oracle_dm[s] = float(np.mean([dm_own[s, k] for k in DM[1:]]))
    print(f"seed {s}: G1 with {n_copies}x the events {geo_err[s, 'dm_G1']:.3f} "
          f"(5 events {geo_err[s, G1]:.3f}, {Gmax} {geo_err[s, Gmax]:.3f}) | "
          "oracle with "
          f"{n_copies}x the events {oracle_dm[s]:.3f} (5 events {oracle_err[s]:.3f})")
print(f"{time.process_time() - t0:.1f} s CPU")
# the claims' references: the data-matched oracle and control
ratio = [geo_err[s, Gmax] / oracle_dm[s] for s in geo_seeds]
ratio_attn = [geo_err[s, "attention"] / oracle_dm[s] for s in geo_seeds]
ratio5 = [geo_err[s, Gmax] / oracle_err[s] for s in geo_seeds]  # the 5-event oracle

# %% [markdown]
# **Models retrained in round 4.** The last round left some of these models short of their plateau by the
# book's rule (the G = 15 model at seed 1, the data-matched G = 1 controls at seeds 1 and 2, the first
# data-matched oracle at seed 2, leak models; seed 1 had no leak models). Their recipe had a cosine learning-rate
# decay, and a decay lowers a validation curve by annealing alone, so the last fifth of such a curve reads as
# "still improving" however long the model trained. Before training anything we registered (the data script's
# docstring and `checkpoint_config("retrained")`, committed first) which models to retrain, with which recipe and
# which reading: the same data, model, learning rate, warm-up, validation event and early stopping, on a
# **warmup-stable-decay** schedule (constant learning rate, then a decay over the last quarter of the steps), for
# the same steps as before (1800; the `embed` leak model 5400 as before), and the condition read on the **stable
# phase** with **noise = 2** (`helpers`: `stable_plateau`; an improvement counts only beyond two standard errors
# of the curve's own step noise), against the same bar. A retrained model replaces the stored one everywhere
# below; every other model keeps its plain reading. The table shows both, and the stored model's test error next
# to the retrained one's (the stored weights are still in the checkpoint). The models compared by one claim keep
# equal steps; at a seed where only one of them was retrained they differ in schedule (stated in the table).

# %%
def retrained_row(s, key, n):
    """One row of the round-4 table: the stored model (if any) and its retrained one."""
    old = ckpt.manifest["history"].get(f"s{s}.geo.{key}.val")
    old_p = f"{train.plateau(old['value']):.3f}" if old else "–"  # its own reading
    if key.startswith("dm_"):
        what = "test_err" if key == "dm_G1" else "own_err"
        err_old = ckpt.manifest["metrics"].get(f"s{s}.geo.{key}.{what}")
        err_new = geo_err[s, key] if key == "dm_G1" else dm_own[s, key]
    else:
        err_old, err_new = None, geo_err[s, key]
        if old:
            leak = key[5:] if key.startswith("leak_") else "none"
            m = st.geometry_model(
                gc["order"], s, c_in=3 if leak == "feature" else 2,
                embed_nodes=100 * gc["n_train"] if leak == "embed" else 0)
            ckpt.load_into(m, f"s{s}.geo.{key}.")
            on = st.geometry_leak(geo_all[s], gc["n_train"], leak, s)[gc["n_train"]:]
            err_old = st.geometry_error(m.eval(), on)
    steps_old = (cfg["leak_steps"].get(key[5:], gc["steps"]) if key.startswith("leak_")
                 else gc["steps"])
    # the stable phase read without the noise allowance (not the condition)
    c = geo_steps[s, key]
    end = n - st.wsd_decay_steps(n)
    raw = train.plateau([v for t, v in zip(c["step"], c["value"]) if t <= end])
    raw_plateau[s, key] = raw
    stored = f"{steps_old} cosine" if old else "not trained"
    return (f"| {s} | {key} | {stored} | {old_p} | "
            f"{n} WSD (decay {st.wsd_decay_steps(n)}) | {geo_plateau[s, key]:.3f} | "
            f"{raw:.3f} | "
            f"{f'{err_old:.3f}' if err_old is not None else '–'} | {err_new:.3f} |")


# %%
raw_plateau = {}
if retrained:
    _rows = [retrained_row(s, k, n) for (s, k), n in sorted(retrained.items())]
    _by_noise = [f"seed {s} {k}" for (s, k) in retrained
                 if geo_plateau[s, k] <= 0.05 < raw_plateau[s, k]]
    display(Markdown(
        "| seed | model | stored: steps | its plateau (plain) | retrained: steps | "
        "its plateau "
        "(stable phase, noise 2) | stable phase, noise 0 | error, stored | error, "
        "retrained |\n"
        "|---|---|---|---|---|---|---|---|---|\n"
        + "\n".join(_rows)
        + "\n\nError: on the test geometries (oracles: on their own geometry's test "
          "events; leak "
        "models: with the leak open). Bar of every condition: plateau at most 0.05. "
        "The column "
        "'noise 0' reads the same stable phase without the noise allowance; it is "
        "shown so the reader "
        "sees how much of a 'flat' verdict is the noise allowance (registered: noise "
        "2), and is no "
        f"condition. Retrained models that meet their condition: "
        f"{sum(geo_plateau[k] <= 0.05 for k in retrained)} of {len(retrained)}; of "
        "these, flat only "
        "within the noise allowance (stable phase still falling by more than 0.05 "
        "without it): "
        + (", ".join(_by_noise) or "none") + "."))
    fig, axs = plt.subplots(1, len(geo_seeds), figsize=(14, 3.2), sharey=True)
    for ax_, s in zip(axs, geo_seeds):
        for (s_, key), n in sorted(retrained.items()):
            if s_ == s:
                c = geo_steps[s, key]
                ax_.plot(c["step"], c["value"], label=key)
                ax_.axvline(n - st.wsd_decay_steps(n), color="0.6", lw=0.6, ls=":")
        ax_.set(yscale="log", xlabel="optimizer step",
                title=f"seed {s}: retrained (dotted: end of the stable phase)")
        ax_.title.set_fontsize(8)
        ax_.legend(fontsize=6)
    axs[0].set_ylabel("validation relative L2")
    plt.show()

# %%
fig, ax = plt.subplots(1, 3, figsize=(14, 3.8))
_n5 = geo_all[geo_seeds[0]][0]["n_events"] - gc["val_events"]  # events of one geometry
_nm = n_copies * _n5  # the data-matched controls' events
bars = [G1, "dm_G1", Gmax, "attention"]
xs = np.arange(len(bars) + 2)
for i, s in enumerate(geo_seeds):
    ax[0].bar(xs + (i - 1) * 0.25, [geo_err[s, k] for k in bars]
              + [oracle_err[s], oracle_dm[s]], 0.25, label=f"seed {s}")
ax[0].set(xticks=xs, xticklabels=[
    f"Cheb. {G1}\n{_n5} ev.", f"Cheb. {G1}\n{_nm} ev.", f"Cheb. {Gmax}",
    f"attention\n{Gmax}", f"oracle\n{_n5} ev.", f"oracle\n{_nm} ev."],
    ylabel="test-geometry held-out rel. L2")
ax[0].tick_params(axis="x", labelsize=7)
ax[0].legend(fontsize=7)
CURVES = ((1, Gmax, "-"), (1, "attention", "--"),
          (2, "dm_G1", "-"), (2, "dm_oracle0", ":"))
for s in geo_seeds:  # the curves the convergence conditions read
    for j, key, ls in CURVES:
        v = geo_curves[s, key]
        ax[j].plot(np.linspace(0, 1, len(v)) * gc["steps"], v, ls, color=f"C{s}",
                   label=f"seed {s}, {key}")
for j, title in ((1, f"pooled models ({Gmax})"),
                 (2, f"data-matched, {_nm} events (oracle0: 1st test geometry)")):
    ax[j].set(yscale="log", xlabel="optimizer step", ylabel="validation relative L2")
    ax[j].set_title(title, fontsize=8)
    ax[j].legend(fontsize=6, ncol=2)
ax[2].sharey(ax[1])
plt.tight_layout()
plt.show()

# %% [markdown]
# Is the oracle a ceiling, and does the task need the graph? Two measurements (both added at review, on the same
# weights). An oracle is only a fair reference if it is at least as good on its own geometry as the pooled model
# is on geometries *it* trained on. So we score the G = 15 model (and both G = 1 controls) on the held-out
# events of their own training geometries, next to the oracles (5 events, and as many as the pooled model) on
# theirs. Then we relabel each test geometry's
# fixed operators by a random permutation (`helpers`: `scramble_operators`, the same operators on cells that no
# longer match the sources): if the error stays put, the model ignores the geometry and the transfer test is empty.

# %%
own = {}  # (seed, model) -> error on its own training geometries' held-out events
scrambled = {}  # (seed, model) -> test error with the operators relabelled
for s in geo_seeds:
    own[s, Gmax] = geo_in[s, Gmax]
    own[s, G1] = st.geometry_error(geo_models[s, G1], geo_all[s][: int(G1[1:])])
    own[s, "dm_G1"] = dm_own[s, "dm_G1"]
    for key in (Gmax, "attention"):
        with torch.no_grad():
            scrambled[s, key] = st.geometry_error(
                geo_models[s, key], [st.scramble_operators(g, s) for g in geo_test[s]])
ceiling = [oracle_dm[s] / own[s, Gmax] for s in geo_seeds]  # <= 1: a ceiling
ceiling5 = [oracle_err[s] / own[s, Gmax] for s in geo_seeds]  # the 5-event oracle
transfer_gap = [geo_err[s, Gmax] / own[s, Gmax] for s in geo_seeds]  # same model
for s, c_, t_ in zip(geo_seeds, ceiling, transfer_gap, strict=True):
    print(f"seed {s}: error on own training geometries: {Gmax} {own[s, Gmax]:.3f}, "
          f"{G1} {own[s, G1]:.3f}, {G1} x{n_copies} events {own[s, 'dm_G1']:.3f} | "
          f"oracles on theirs: 5 events {oracle_err[s]:.3f}, x{n_copies} events "
          f"{oracle_dm[s]:.3f} (x{c_:.2f} the {Gmax} model's) | "
          f"{Gmax} test / own {t_:.2f} | "
          f"operators scrambled: {Gmax} {scrambled[s, Gmax]:.3f}, "
          f"attention {scrambled[s, 'attention']:.3f}")

# %%
# added at review (exploratory): how much one-geometry transfer depends on the geometry
# drawn. The G = 1 control is one draw per seed; each 5-event oracle is a one-geometry
# model too (same model and steps), so it is scored on the other test geometries
g1_spread = {}  # seed -> test errors of the 5-event one-geometry models
for s in geo_seeds:
    g1_spread[s] = [geo_err[s, G1]] + [
        st.geometry_error(geo_models[s, f"oracle{k}"],
                          [g for j, g in enumerate(geo_test[s]) if j != k])
        for k in range(gc["n_test"]) if gc["n_test"] > 1]
    print(f"seed {s}: one-geometry models (5 events) on other geometries: "
          + ", ".join(f"{v:.3f}" for v in g1_spread[s])
          + f" (first: the {G1} control) | {Gmax} {geo_err[s, Gmax]:.3f}")

# %% tags=["remove-input"]
_orc = [max(geo_plateau[s, f"dm_oracle{k}"] for k in range(gc["n_test"])) for s in geo_seeds]
_orc5 = [max(geo_plateau[s, f"oracle{k}"] for k in range(gc["n_test"])) for s in geo_seeds]
_ovf = [max((geo_curves[s, f"oracle{k}"][-1] - min(geo_curves[s, f"oracle{k}"]))
            / min(geo_curves[s, f"oracle{k}"]) for k in range(gc["n_test"])) for s in geo_seeds]
_n_fit = geo_all[geo_seeds[0]][0]["n_events"] - gc["val_events"]
_acc = [geo_err[s, Gmax] / geo_err[s, "dm_G1"] for s in geo_seeds]
_acc5 = [geo_err[s, Gmax] / geo_err[s, G1] for s in geo_seeds]
_nf = lambda v, bar=0.05: sum(x > bar for x in v)  # noqa: E731  (seeds failing a bar)
display(Markdown(
    f"**Reading (this run).** Every model here trains for {gc['steps']} steps. Against the data-matched "
    f"oracle ({n_copies * _n_fit} events of the test geometry), the Chebyshev model trained on {Gmax[1:]} "
    f"geometries is at {_lst(ratio)} times its held-out error, the attention model at {_lst(ratio_attn)} (per "
    f"seed); against the 5-event oracle the Chebyshev ratio was {_lst(ratio5)}. Trained on one geometry, the "
    f"Chebyshev model errs {_lst([geo_err[s, 'dm_G1'] for s in geo_seeds])} on the test geometries with "
    f"{n_copies * _n_fit} events and {_lst([geo_err[s, G1] for s in geo_seeds])} with {_n_fit}, against "
    f"{_lst([geo_err[s, Gmax] for s in geo_seeds])} with {Gmax[1:]} geometries: at equal steps and equal "
    f"data, {Gmax[1:]} geometries give {_lst(_acc)} times the one-geometry error ({_lst(_acc5)} against the "
    f"5-event control). The validation curves' plateau values (share of the drop still made in the last "
    f"fifth, a retrained model's on its stable phase with noise 2; the conditions ask for at most 0.05): "
    f"G = {Gmax[1:]} "
    f"{_lst([geo_plateau[s, Gmax] for s in geo_seeds])}, attention "
    f"{_lst([geo_plateau[s, 'attention'] for s in geo_seeds])}, data-matched G = 1 "
    f"{_lst([geo_plateau[s, 'dm_G1'] for s in geo_seeds])}, data-matched oracles (worst per seed) "
    f"{_lst(_orc)} (5-event oracles {_lst(_orc5)}): the conditions fail at {_nf(_orc)} of {len(_orc)} seeds "
    f"for the oracles, {_nf([geo_plateau[s, Gmax] for s in geo_seeds])} for the G = {Gmax[1:]} model, "
    f"{_nf([st.two_sided(geo_plateau[s, 'dm_G1']) for s in geo_seeds])} for the data-matched "
    "control, read two-sided since round 6 (a curve rising at its end, a negative value, fails too) "
    "(section 9 reads the verdicts). "
    f"Is the oracle a ceiling? With {_n_fit} events it was not: its validation error ends {_lst(_ovf)} "
    "(worst oracle per seed, relative) above its best, and on its own geometry it errs "
    f"{_lst(ceiling5)} times as much as the {Gmax[1:]}-geometry model does on geometries it trained on "
    f"({_lst([own[s, Gmax] for s in geo_seeds])}). With {n_copies * _n_fit} events it errs "
    f"{_lst([oracle_dm[s] for s in geo_seeds])} (per seed), that is {_lst(ceiling)} times "
    "as much: the condition "
    f"`oracle_is_ceiling` (at most 1) fails at {_nf(ceiling, 1.0)} of {len(ceiling)} seeds"
    + (", and where it fails, `within_oracle` and `attention_mixer_transfer` leave the seed out. "
       if _nf(ceiling, 1.0) else ". ")
    + "**This model is not causal in time**, unlike the river router: its time block keeps a few Fourier "
    f"modes of the window, so sources added from hour {t_geo} on change the predicted field before hour "
    f"{t_geo} by {rng_([geo_viol[s, Gmax] for s in geo_seeds])} (Chebyshev) and "
    f"{rng_([geo_viol[s, 'attention'] for s in geo_seeds])} (attention) of its largest value. Every model "
    "in this comparison has the same time block and sees the whole window of sources, so the ratios "
    "compare like with like; they test transfer of a whole-window surrogate, not of a causal forecaster. "
    f"The same {Gmax[1:]}-geometry model on new geometries against geometries it trained on: "
    f"{_lst(transfer_gap)} (error ratio per seed; below 1, the test geometries scored better), "
    + ("so at this scale transfer to a new geometry costs the pooled model nothing measurable. "
       if max(transfer_gap) <= 1.1 else
       f"so transfer to a new geometry costs the pooled model up to {max(transfer_gap) - 1:.0%} of error. ")
    + ("It does read the geometry: " if min(scrambled[s, Gmax] / geo_err[s, Gmax] for s in geo_seeds) > 1.5
       else "It reads the geometry little: ")
    + "with each test geometry's operators relabelled at random its error goes from "
    + ", ".join(f"{geo_err[s, Gmax]:.3f}" for s in geo_seeds) + " to "
    + ", ".join(f"{scrambled[s, Gmax]:.3f}" for s in geo_seeds) + " per seed (attention "
    + ", ".join(f"{geo_err[s, 'attention']:.3f}" for s in geo_seeds) + " to "
    + ", ".join(f"{scrambled[s, 'attention']:.3f}" for s in geo_seeds) + ")."
))

# %% [markdown]
# ### Leaks where they can bite: the cross-geometry model
#
# On the river the leaked inputs were barely read (section 3). The cross-geometry model has more to gain from a
# leak: its geometries differ in every cell, and nothing like the river's area input tells it where it is. We
# open each leak in turn on the Chebyshev model trained on the same 15 geometries for the same steps (`helpers`:
# `geometry_leak`):
#
# * **per-node embeddings** (`embed`): each cell of each training geometry has its own id and learned vector
#   (geometry `k`'s cells `100k + i`); a cell of a test geometry gets a random id of the table;
# * **graph-specific feature** (`feature`): a third input, the cell's index divided by its geometry's number of
#   cells (a graph-normalised node id);
# * **graph-correlated training distribution** (`shift`): the training geometries' sources, and so their fields
#   (the PDE is linear), are scaled from 0.3 to 1.7 in their order; the test geometries stay at scale 1. <!-- paper -->
#
# We compare each leak model's held-out error with the closed model's on the test geometries (the transfer) and
# on the training geometries' own held-out events (where the leaked input means what it meant in training), and
# shuffle the embedding rows to see whether the `embed` model reads its vectors at all. The leak models are
# trained for the seeds printed below, with the same early stopping as every other model and the same steps,
# except a leak named in the configuration's `leak_steps`, trained longer to reach its plateau by the same rule
# (the steps are printed below).

# %%
leak_ratio = {(s, k): geo_err[s, k] / geo_err[s, Gmax] for s in leak_seeds
              for k in LEAK_KEYS}  # transfer error, leak open / leaks closed
leak_ratio_in = {(s, k): geo_in[s, k] / geo_in[s, Gmax] for s in leak_seeds
                 for k in LEAK_KEYS}  # the same on the training geometries
geo_emb_gap = {}
for s in leak_seeds:
    if "leak_embed" not in LEAK_KEYS:
        break
    m = geo_models[s, "leak_embed"]
    w0 = m.embed.weight.detach().clone()
    perm_rows = torch.as_tensor(np.random.default_rng(s).permutation(w0.shape[0]))
    on = st.geometry_leak(geo_all[s], gc["n_train"], "embed", s)[: gc["n_train"]]
    with torch.no_grad():
        m.embed.weight.copy_(w0[perm_rows])
        geo_emb_gap[s] = st.geometry_error(m, on) / geo_in[s, "leak_embed"]
        m.embed.weight.copy_(w0)
print("leak seeds:", leak_seeds or "none (no leak model in this build)", "| steps:",
      "; ".join(f"seed {s} " + ", ".join(
          f"{k[5:]} {retrained.get((s, k), cfg['leak_steps'].get(k[5:], gc['steps']))}"
          + (" (WSD, round 4)" if (s, k) in retrained else "") for k in LEAK_KEYS)
          for s in leak_seeds))
for s in leak_seeds:
    print(f"seed {s}: error / closed error, test geometries: "
          + ", ".join(f"{k[5:]} {leak_ratio[s, k]:.2f}" for k in LEAK_KEYS)
          + " | training geometries: "
          + ", ".join(f"{k[5:]} {leak_ratio_in[s, k]:.2f}" for k in LEAK_KEYS)
          + (f" | embed rows shuffled: training-geometry error x{geo_emb_gap[s]:.2f}"
             if s in geo_emb_gap else ""))

fig, ax = plt.subplots(figsize=(6, 3.2)) if leak_seeds else (None, None)
xs = np.arange(len(LEAK_KEYS))
for i, s in enumerate(leak_seeds):
    ax.bar(xs + (i - (len(leak_seeds) - 1) / 2) * 0.25,
           [leak_ratio[s, k] for k in LEAK_KEYS], 0.25, label=f"seed {s}")
if leak_seeds:
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set(xticks=xs, xticklabels=[k[5:] for k in LEAK_KEYS],
           ylabel=f"test error / closed {Gmax} error")
    ax.legend(fontsize=7)
    plt.show()

# %% tags=["remove-input"]
_lk = {k: [leak_ratio[s, k] for s in leak_seeds] for k in LEAK_KEYS}
_lk_in = {k: [leak_ratio_in[s, k] for s in leak_seeds] for k in LEAK_KEYS}
display(Markdown(
    "**Reading (this run).** No cross-geometry leak model is in this build (the checkpoint's "
    "`geometry_leak_seeds` is empty), so `leaks_break_transfer` is recorded as untested." if not leak_seeds else
    f"**Reading (this run; seeds {', '.join(map(str, leak_seeds))}).** With one leak open, the held-out error "
    "on the test geometries is, as a multiple of the closed model's: "
    + "; ".join(f"`{k[5:]}` {_lst(v)}" for k, v in _lk.items())
    + ". On the training geometries' own held-out events: "
    + "; ".join(f"`{k[5:]}` {_lst(v)}" for k, v in _lk_in.items())
    + (". Shuffling the embedding rows multiplies the `embed` model's error on the training geometries by "
       + _lst(geo_emb_gap.values()) if geo_emb_gap else "")
    + ". A leak that helps on the training geometries and hurts on new ones is one the model learned to "
    "rely on; `leaks_break_transfer` (section 9) asks every leak to raise the transfer error by more than "
    "the bar stated there. "
    + (f"The leak models' error on the training geometries also lies at "
       f"{rng_([x for vals in _lk_in.values() for x in vals])} times the closed model's (one training run each): "
       "a ratio on new geometries inside that spread is not a leak breaking transfer. Leaks whose "
       "test-geometry ratio exceeds every training-geometry ratio at every seed: "
       + (", ".join(f"`{k[5:]}`" for k in LEAK_KEYS
                    if min(_lk[k]) > max(x for vals in _lk_in.values() for x in vals)) or "none")
       + ". Validation plateaus (condition `leak_models_converged`, at most 0.05), per seed: "
       + "; ".join(f"`{k[5:]}` " + ", ".join(f"{geo_plateau[s, k]:.3f}" for s in leak_seeds)
                   for k in LEAK_KEYS)
       + f"; closed {Gmax} " + ", ".join(f"{geo_plateau[s, Gmax]:.3f}" for s in leak_seeds)
       + "." if leak_seeds else "")
))

# %% [markdown]
# ## 8. Interaction
#
# The slider moves along the reaches of the zero-shot basin, from the outlet towards a headwater (nodes sorted by
# upstream area), showing the hydrograph of the first held-out event (seed 0): truth, factorized model, and the
# model with the graph-normalised area leak open. The frames were computed when the notebook ran.

# %%
order_nodes = np.argsort(-a_zs)
picks = order_nodes[np.linspace(0, a_zs.size - 1, 8).astype(int)]


def draw(fig, node):
    ax = fig.add_subplot(111)
    ax.plot(zs["O"][0, node], "k", label="truth")
    ax.plot(preds[s0, "none", "zero-shot"][0, node], "--", label="factorized")
    ax.plot(preds[s0, "area", "zero-shot"][0, node], ":", label="leak: a / max(a)")
    ax.set(xlabel="hour", ylabel="discharge",
           title=f"reach {node}, upstream area {int(a_zs[node])}")
    ax.legend(fontsize=8)


plotting.static_slider(list(picks), draw, figsize=(6, 3.4), label="reach", fmt="{}")

# %% [markdown]
# Live controls (Jupyter or Colab): any basin, model, event and reach (seed 0).


# %%
def show(basin: str = "zero-shot", model: str = "none", event: int = 0, reach: int = 0):
    d = data[s0][basin]
    truth = d["O"][-d["n_test"]:] if d["train"] else d["O"]
    reach = min(max(reach, 0), truth.shape[1] - 1)
    event = min(max(event, 0), truth.shape[0] - 1)
    fig, ax = plt.subplots(figsize=(6, 3))
    ax.plot(truth[event, reach], "k", label="truth")
    ax.plot(preds[s0, model, basin][event, reach], "--", label=model)
    ax.set(xlabel="hour", ylabel="discharge", title=f"{basin}, reach {reach}")
    ax.legend(fontsize=8)
    plt.show()


plotting.live_controls(show, basin=names, model=[*st.LEAKS, "recurrent"],
                       event=(0, rc["n_test"] - 1), reach=(0, 5 * rc["n"] - 1))

# %% [markdown]
# ## 9. The claims record
#
# Per-seed numbers throughout. The transfer claims are **margins over the strongest baseline**, at the outlet
# (the hydrograph a forecaster wants), read on the rainfall benchmark of round 5 (section 3): the factorized
# model's outlet R² minus that of the baseline with the best validation outlet R² among the linear runoff +
# Muskingum routing, the linear unit hydrograph, the zero-shot calibrated conceptual model (round 6) and
# recurrent message passing, per seed and training run, averaged over the two runs (round 6). The routing-only
# benchmark's margins (rounds 1-4) are kept in the claims' notes. The leak claims ask that
# **each** leak break transfer: on the cross-geometry model (`leaks_break_transfer`, where a leak has most to
# gain) its number per seed is the smallest of the three ratios of test error with the leak open to the closed
# model's, and the bar (more than a fifth worse) was set before the leak models were trained; on the river
# (`leaks_break_transfer_river`) it is the smallest of the three R² drops, each averaged over the two unseen
# basins.
#
# **Conditions.** The river claims rest on the router being trained to its plateau (validation curve flat, the
# book-wide `train.plateau` rule) and fitting its own basins (R² on their held-out events above the bar the
# condition states; on rainfall, both training runs); the transfer claims also on the task needing the model
# (`needs_the_model`: the best zero-shot model-free baseline, the calibrated conceptual model of round 6
# included, leaves room) and on the two training runs agreeing on the margin's sign (`runs_agree_*`, round 6,
# registered before the second runs); the cross-geometry
# claims on the models involved being converged (their validation curves
# flat by the same rule: the G = 15 model, the data-matched G = 1 control, the attention model, every
# data-matched oracle, every leak model), and the two oracle claims also on the oracle being a ceiling
# (`oracle_is_ceiling`: the oracle on its own geometry at least as good as the G = 15 model on geometries it
# trained on; added at review, after the run showed the 5-event oracles are data-limited, section 7; the
# data-matched controls followed), and the accumulation claim also on its margin exceeding how much the geometry
# drawn for the G = 1 control moves a one-geometry model's error (`accumulation_beyond_draw`, added at review of
# round 6: it can only leave a seed out). A model retrained in round 4 (section 7) is read by the reading registered
# with its recipe (its stable phase, noise = 2), a stored model by the plain rule, the same bar for both; the
# speed claim on each side's timing spread being below
# the measured effect. At a seed where a condition fails the claim is left out; with none left it is
# *inconclusive*.

# %% tags=["hide-input"]
# baselines and the notes the claims carry (numbers beside each verdict, for the reader)
BASES = ("recurrent", "linear", "linear_cal")


def margin_support(s, basin, n_boot=2000):
    """Share of resamples of the basin's events (with replacement) in which the
    factorized outlet R² still beats the best baseline's (best chosen per resample)."""
    d = data[s][basin]
    out = truth_of(d)[:, 0]
    rng = np.random.default_rng([s, 16])
    wins = 0
    for _ in range(n_boot):
        ix = rng.integers(0, out.shape[0], out.shape[0])
        f = st.r2_score(preds[s, "none", basin][ix, 0], out[ix])
        wins += f > max(st.r2_score(preds[s, k, basin][ix, 0], out[ix]) for k in BASES)
    return wins / n_boot


support = {(s, b): margin_support(s, b) for s in seeds for b in unseen}
rec_loss = [np.asarray(river_hist[f"s{s}.recurrent"]) if f"s{s}.recurrent" in river_hist
            else ckpt.manifest["history"][f"s{s}.recurrent"]["value"] for s in seeds]
rec_plateau = [train.plateau(v) for v in rec_loss]  # the baseline's own training curve


def ref_note(basin):
    """Baseline text: recurrent MP, linear Muskingum (true / calibrated K), per seed."""
    lab = {"recurrent": "recurrent MP", "linear": "linear Muskingum with the true K",
           "linear_cal": "linear Muskingum with K x one factor fitted on the training "
           "basins (" + ", ".join(f"x{k_fit[s]}" for s in seeds) + ")"}
    return ("Outlet R² per seed: factorized "
            + ", ".join(f"{outlet_r2[s, 'none', basin]:.3f}" for s in seeds) + "; "
            + "; ".join(lab[k] + " " + ", ".join(f"{outlet_r2[s, k, basin]:.3f}"
                                                 for s in seeds) for k in BASES)
            + ". Pooled R² (all reaches): factorized "
            + ", ".join(f"{r2[s, 'none', basin]:.3f}" for s in seeds) + ", recurrent "
            + ", ".join(f"{r2[s, 'recurrent', basin]:.3f}" for s in seeds)
            + ". Event bootstrap ("
            + f"{data[seeds[0]][basin]['q'].shape[0]} events): share "
            "of resamples in which the factorized outlet R² beats the best baseline, "
            "per seed "
            + ", ".join(f"{support[s, basin]:.2f}" for s in seeds)
            + ". Recurrent MP training-loss plateau (last fifth) per seed "
            + ", ".join(f"{v:.3f}" for v in rec_plateau) + ". ")


notes = {}  # the numbers each claim carries beside its verdict


def rain_note(basin):
    """Rainfall benchmark numbers of a transfer claim, per seed."""
    lab = {"runoff_routing": "runoff + routing", "unit_hydrograph": "unit hydrograph",
           "recurrent": "recurrent MP", "conceptual": "calibrated HBV-type, zero-shot",
           "structure": "the simulator's hillslope with one capacity (exploratory, "
           "not a baseline)"}
    return ("Rainfall benchmark (rounds 5-6). Outlet R² per seed, run 1: factorized "
            + ", ".join(f"{rain_out[s, 'factorized', basin]:.3f}" for s in seeds) + "; "
            + "; ".join(lab[k] + " " + ", ".join(f"{rain_out[s, k, basin]:.3f}"
                                                 for s in seeds)
                        for k in RAIN_BASES + ("conceptual", "structure"))
            + "; run 2: factorized " + ", ".join(
                f"{runs[s, 2]['factorized'][basin]:.3f}" for s in seeds)
            + ", recurrent MP " + ", ".join(
                f"{runs[s, 2]['recurrent'][basin]:.3f}" for s in seeds)
            + ". Gauged HBV-type (re-calibrated on this basin's own events, in-sample; "
            "an upper reference, not a baseline) " + ", ".join(
                f"{gauged[s, basin]:.3f}" for s in seeds)
            + ". Claims' baseline by validation per seed (run 1 / run 2): "
            + ", ".join(f"{lab[best6[s, 1]]} / {lab[best6[s, 2]]}" for s in seeds)
            + "; margins per run: " + ", ".join(
                f"{margin6[s, 1, basin]:+.3f} / {margin6[s, 2, basin]:+.3f}"
                for s in seeds) + ". ")


routing_only = {}  # the routing-only benchmark's old claim text, kept as a note
routing_only["zero_shot_margin"] = (
    ref_note("zero-shot")
    + f"Four training basins of {rc['n']} reaches, branching bias "
    f"{rc['biases']} -> a {2 * rc['n']}-reach basin with bias {rc['zero_shot_bias']} "
    f"(no deeper than the deepest training basin); nonlinear Muskingum; {rc['steps']} "
    "steps; causal router. Per seed (zero-shot depth / deepest training basin): "
    + "; ".join(f"seed {s} {r['depth_zs']} / {r['depth_train']}"
                for s, r in diag.items())
    + ". Depth extrapolation, reported apart (deep basin, depth "
    + ", ".join(str(r["depth_deep"]) for r in diag.values())
    + "): factorized R² " + ", ".join(f"{r2[s, 'none', 'deep']:.3f}" for s in seeds)
    + ", recurrent " + ", ".join(f"{r2[s, 'recurrent', 'deep']:.3f}" for s in seeds)
    + ", calibrated linear "
    + ", ".join(f"{r2[s, 'linear_cal', 'deep']:.3f}" for s in seeds)
    + "."
)
routing_only["scales_5x_margin"] = (f"A bushy basin of {5 * rc['n']} reaches. "
                                    + ref_note("5x"))
for _cid, _b in (("zero_shot_margin", "zero-shot"), ("scales_5x_margin", "5x")):
    _m = [outlet_r2[s, "none", _b] - max(outlet_r2[s, k, _b] for k in BASES)
          for s in seeds]
    notes[_cid] = (
        rain_note(_b) + "Routing-only benchmark (rounds 1-4, given the lateral "
        "inflow; not this claim's reading, a simulator-family baseline solves it): "
        "margin over the best of recurrent MP and linear Muskingum "
        + ", ".join(f"{v:+.3f}" for v in _m) + ". " + routing_only[_cid])
notes["within_oracle"] = (
    "Advection-diffusion in a potential flow on masked grids (stand-in for "
    f"Navier-Stokes); Chebyshev mixer, G={Gmax[1:]}, {gc['steps']} steps; oracle: the "
    "same model trained for the same steps on each test geometry's own events, as many "
    f"as the G={Gmax[1:]} model's ({n_copies * _n_fit}; data-matched). Errors per "
    "seed: "
    f"G={Gmax[1:]} " + ", ".join(f"{geo_err[s, Gmax]:.3f}" for s in geo_seeds)
    + ", oracle " + ", ".join(f"{oracle_dm[s]:.3f}" for s in geo_seeds)
    + f"; with the {_n_fit}-event oracle the ratio is " + _lst(ratio5)
    + ". The time block (FNO-1D) is not causal: sources added from hour "
    f"{t_geo} on change the earlier field by "
    + ", ".join(f"{geo_viol[s, Gmax]:.2f}" for s in geo_seeds)
    + " of its largest value (per seed); every model compared shares it. "
    f"G={Gmax[1:]} error on its own training geometries' held-out events "
    + ", ".join(f"{own[s, Gmax]:.3f}" for s in geo_seeds)
    + " (data-matched oracle / that: " + _lst(ceiling) + f"; {_n_fit}-event oracle / "
    "that: " + _lst(ceiling5) + "; G=" + Gmax[1:] + " test / that: "
    + _lst(transfer_gap) + "). Test error with the operators relabelled at random: "
    + ", ".join(f"{scrambled[s, Gmax]:.3f}" for s in geo_seeds) + "."
)
notes["attention_mixer_transfer"] = (
    "Physics-Attention mixer with a graph-aware input (cell features with their "
    f"aggregates under the two fixed operators), G={Gmax[1:]}, {gc['steps']} steps, "
    "the same data-matched oracles. Errors per seed: attention "
    + ", ".join(f"{geo_err[s, 'attention']:.3f}" for s in geo_seeds)
    + "; Chebyshev ratio for comparison " + ", ".join(f"{v:.2f}" for v in ratio) + "."
)
notes["geometry_accumulation"] = (
    f"Equal optimizer steps ({gc['steps']}) and equal data: G={G1[1:]} is the "
    f"first training geometry with {n_copies * _n_fit} events ({n_copies} copies of "
    f"{_n_fit}, one per step), G={Gmax[1:]} has {_n_fit} events on each of "
    f"{Gmax[1:]} geometries. Errors per seed: G={G1[1:]} "
    + ", ".join(f"{geo_err[s, 'dm_G1']:.3f}" for s in geo_seeds)
    + f", G={Gmax[1:]} " + ", ".join(f"{geo_err[s, Gmax]:.3f}" for s in geo_seeds)
    + f"; the G={G1[1:]} model with {_n_fit} events "
    + ", ".join(f"{geo_err[s, G1]:.3f}" for s in geo_seeds)
    + " (ratio " + _lst(_acc5) + "). Error of the data-matched G=" + G1[1:]
    + " model on its own geometry's held-out events "
    + ", ".join(f"{own[s, 'dm_G1']:.3f}" for s in geo_seeds)
    + ". Spread (max / min) of "
    "the 5-event one-geometry models' test errors per seed, read by the review-time "
    "condition accumulation_beyond_draw: "
    + ", ".join(f"{max(v) / min(v):.2f}" for v in g1_spread.values()) + "."
)
notes["leaks_break_transfer_river"] = (
    "River model, R² with leaks closed minus R² with one leak open, mean over the "
    "zero-shot and 5x basins; per leak and seed: "
    + "; ".join(f"{k} " + ", ".join(f"{v:.3f}" for v in _drops[k]) for k in _drops)
    + ". Diagnosis, per seed: held-out R² lost on the training basins when the "
    "embedding rows are shuffled " + ", ".join(f"{v:.3f}" for v in emb_gap.values())
    + ". The dynamic input q / (a Q0) carries the area on every basin, leak or not."
)
notes["leaks_break_transfer"] = (
    f"Cross-geometry Chebyshev model, G={Gmax[1:]}, {gc['steps']} steps, seeds "
    f"{leak_seeds}; test-geometry error with one leak open / with leaks closed, per "
    "leak and seed: " + "; ".join(f"{k[5:]} " + _lst(_lk[k]) for k in LEAK_KEYS)
    + ". The same ratio on the training geometries' held-out events: "
    + "; ".join(f"{k[5:]} " + _lst(_lk_in[k]) for k in LEAK_KEYS)
    + ". Closed model's test error "
    + ", ".join(f"{geo_err[s, Gmax]:.3f}" for s in leak_seeds) + "."
)
notes["train_speedup_vs_recurrent"] = (
    "Median CPU time of a training step, one thread, same basin and batch, "
    f"both models timed in one interleaved run ({repeats} rounds), per seed (new "
    f"weights and storms) at T={Tmax}; wall-time ratio per seed "
    + ", ".join(f"{bench_seeds[s].ratio('recurrent', 'factorized', clock='wall'):.2f}x"
                for s in seeds)
    + f"; seed {seed} per T: "
    + ", ".join(f"T={t} {bench[t].ratio('recurrent', 'factorized'):.2f}x"
                for t in bench_T)
    + f". Factorized forward pass at T={Tmax}: "
    + ", ".join(f"{k} {100 * v / total:.0f}%" for k, v in parts.items())
    + ". The paper's ratio is on a GPU."
)

# %%
# Conditions, fixed before reading the claims (the book-wide rules): the router's
# validation curve is flat at the end (train.plateau <= 0.05) and it fits its own
# basins (held-out events of the training basins, R² >= 0.9); each cross-geometry
# model's validation curve is flat (plateau <= 0.05; for the oracles, the worst of
# the test geometries); each timing's spread is below its effect.
rec.condition("router_converged",
              [train.plateau(val_curve(f"s{s}.router.none.val")[1]) for s in seeds],
              "<=", 0.05, unit="plateau (last fifth) of the validation loss",
              statement="the factorized router's validation loss is flat at the end of "
              "training")
rec.condition("router_fits", [diag[s]["train_heldout"] for s in seeds], ">=", 0.9,
              unit="R², training basins' held-out events",
              statement="the factorized router fits the basins it was trained on")
for cid, key, what in (
        ("geometry_converged", Gmax, f"the G={Gmax[1:]} Chebyshev model"),
        ("attention_converged", "attention", "the attention model")):
    rec.condition(cid, [geo_plateau[s, key] for s in geo_seeds], "<=", 0.05,
                  unit="plateau (last fifth) of the validation error",
                  statement=f"{what} is trained to its plateau")
# round 6 (registered): the control is read two-sided, so a validation curve that rises
# at its end fails too (the one-sided rule passed a plateau of -0.39)
rec.condition("control_converged", [st.two_sided(geo_plateau[s, "dm_G1"])
                                    for s in geo_seeds], "<=", 0.05,
              unit="|plateau| (last fifth) of the validation error (two-sided)",
              statement=f"the data-matched G={G1[1:]} control is trained to its "
              "plateau, its curve neither falling nor rising at the end")

# %%
# added at review of round 6 (it can only make the claim inconclusive at a
# seed): the G = 1 control is one geometry drawn per seed, and the geometry
# drawn moves a one-geometry model's test error (section 7: the 5-event
# one-geometry models on geometries they did not train on, a proxy, since the
# data-matched controls' weights are not stored); the accumulation ratio counts
# only where the G = 15 model's advantage is larger than that spread
_draw = {s: max(g1_spread[s]) / min(g1_spread[s]) for s in geo_seeds}
rec.condition(
    "accumulation_beyond_draw",
    [a * _draw[s] for a, s in zip(_acc, geo_seeds, strict=True)], "<", 1.0,
    unit="error ratio G15 / G1 x spread (max / min) of the one-geometry models' "
    "test errors",
    statement="the G=15 model beats the G=1 control by more than the geometry "
    "drawn moves a one-geometry model's error (added at review)")
rec.condition("oracle_converged", _orc, "<=", 0.05,
              unit="plateau of the validation error, worst data-matched oracle",
              statement="every locally trained (data-matched) oracle is trained to its "
              "plateau")
# added at review: an oracle is a reference only if it is at least as good on its own
# geometry as the pooled model is on geometries it trained on (held-out events both)
rec.condition("oracle_is_ceiling", ceiling, "<=", 1.0,
              unit=f"data-matched oracle error / {Gmax} error on its own training "
              "geometries",
              statement="the locally trained oracle is at least as good as the "
              f"{Gmax} model on geometries that model trained on (added at review)")
if leak_seeds:
    rec.condition(
        "leak_models_converged",
        [max(geo_plateau[s, k] for k in [Gmax, *LEAK_KEYS]) for s in leak_seeds],
        "<=", 0.05, unit="plateau of the validation error, worst of the closed and "
        "the leak models", statement=f"the closed {Gmax} model and every "
        "cross-geometry leak model are trained to their plateau")
SPEEDUP_BAR = 5.0  # the claim's bar (the paper reports 28x)
rec.condition("timing_above_noise",
              [sp / max(abs(v - SPEEDUP_BAR), 1e-12)
               for v, sp in zip(speedups, bench_spread)],
              "<", 1.0, unit="largest spread (IQR/median) ÷ |ratio − bar|",
              statement="each side's timing spread is smaller than the speedup's "
              "distance from the claim's bar")
RIVER = ("router_converged", "router_fits")

# %%
# round 5 (registered in st.rainfall_config before training): the rainfall benchmark;
# round 6 (registered in st.round6_config before its runs): both training runs, the
# zero-shot conceptual model among the baselines, the runs' agreement
rec.condition("rainfall_converged",
              [max(train.plateau(rain_val[s]), rerun_plateau[s]) for s in seeds],
              "<=", 0.05, unit="plateau (last fifth) of the validation loss, worse of "
              "the two training runs",
              statement="the rainfall router's validation loss is flat at the end of "
              "training (both runs)")
rec.condition("rainfall_fits",
              [min(runs[s, j]["validation"]["factorized"] for j in (1, 2))
               for s in seeds],
              ">=", 0.9, unit="outlet R², training basins' held-out events, worse run",
              statement="the rainfall router fits the basins it was trained on "
              "(both runs)")
rec.condition("needs_the_model", [1 - rain_v[s, best_free6[s]] for s in seeds],
              ">=", 0.05,
              unit="1 − best zero-shot model-free outlet R² (validation; conceptual "
              "included)",
              statement="the best zero-shot model-free baseline leaves room for a "
              "learned model")
RAIN = ("rainfall_converged", "rainfall_fits", "needs_the_model")
for basin, cid in (("zero-shot", "runs_agree_zero_shot"), ("5x", "runs_agree_5x")):
    rec.condition(cid, [st.runs_agree(margin6[s, 1, basin], margin6[s, 2, basin])
                        for s in seeds], "<", 1.0,
                  unit=f"|m1 − m2| / |m1 + m2|, outlet margins of the two runs "
                  f"({basin})",
                  statement="the two training runs agree on the margin's sign")

# %%
# the two transfer claims as margins over the strongest baseline (best by validation,
# per run), at the outlet of the rainfall benchmark, mean over the two training runs
for basin, cid, paper, agree in (
        ("zero-shot", "zero_shot_margin", "R² = 0.998 zero-shot",
         "runs_agree_zero_shot"),
        ("5x", "scales_5x_margin", "5x larger graphs", "runs_agree_5x")):
    rec.claim(
        cid, f"Given rainfall, at the outlet of the {basin} basin the factorized model "
        "beats the strongest zero-shot baseline (chosen by validation)",
        paper=paper,
        measured=[np.mean([margin6[s, j, basin] for j in (1, 2)]) for s in seeds],
        op=">", target=0.0,
        unit="outlet R², factorized − best baseline, mean of two training runs",
        baseline=[np.mean([runs[s, j][best6[s, j]][basin] for j in (1, 2)])
                  for s in seeds],
        note=notes[cid], given=RAIN + (agree,),
    )
rec.claim(
    "within_oracle",
    f"Trained on {Gmax[1:]} geometries, the cross-geometry model is within ~10% of an "
    "oracle trained on the test geometry (as many events as the pooled model)",
    paper="within ~10% relative L2 of a locally trained oracle",
    measured=ratio, op="<=", target=1.1, unit="error / oracle error",
    baseline=[oracle_dm[s] for s in geo_seeds], note=notes["within_oracle"],
    given=("geometry_converged", "oracle_converged", "oracle_is_ceiling"),
)
rec.claim(
    "attention_mixer_transfer",
    f"The attention mixer, trained on {Gmax[1:]} geometries, is also within ~10% of "
    "the oracle",
    paper="SepTransolver within ~10% relative L2 of a locally trained oracle",
    measured=ratio_attn, op="<=", target=1.1, unit="error / oracle error",
    baseline=ratio, note=notes["attention_mixer_transfer"],
    given=("attention_converged", "oracle_converged", "oracle_is_ceiling"),
)
rec.claim(
    "geometry_accumulation",
    "At equal optimizer steps and equal data, cross-geometry error falls as the number "
    "of training geometries grows",
    paper="error decreases with training geometries",
    measured=_acc, op="<", target=1.0,
    unit=f"error({Gmax}) / error({G1}), same steps, same number of events",
    baseline=[geo_err[s, "dm_G1"] for s in geo_seeds],
    note=notes["geometry_accumulation"],
    given=("geometry_converged", "control_converged", "accumulation_beyond_draw"),
)

# %%
# the leak claims: the cross-geometry model (the bar was fixed before its leak models
# were trained) and the river
LEAK_BAR = 1.2  # a leak "breaks" transfer: test error up by more than a fifth
_leak_stmt = "Opening any one of the three leaks breaks cross-geometry transfer"
if not leak_seeds:
    rec.untested("leaks_break_transfer", _leak_stmt,
                 paper="transfer needs the three leaks controlled",
                 reason="the cross-geometry leak models were not trained in this build "
                 "(geometry_leak_seeds is empty: build time)")
else:
    rec.claim(
        "leaks_break_transfer", _leak_stmt,
        paper="transfer needs the three leaks controlled",
        measured=[min(leak_ratio[s, k] for k in LEAK_KEYS) for s in leak_seeds],
        op=">", target=LEAK_BAR,
        unit="test error, leak open / leaks closed (smallest over the three leaks)",
        baseline=[geo_err[s, Gmax] for s in leak_seeds],
        note=notes["leaks_break_transfer"], given=("leak_models_converged",),
    )
rec.claim(
    "leaks_break_transfer_river",
    "Opening any one of the three leaks breaks zero-shot transfer on the river",
    paper="transfer needs the three leaks controlled",
    measured=[min(_drops[k][i] for k in _drops) for i in range(len(seeds))],
    op=">", target=0.2, unit="R² drop (smallest over the three leaks)",
    note=notes["leaks_break_transfer_river"], given=RIVER,
)
rec.condition("noarea_converged", [na_plateau[s] for s in seeds], "<=", 0.05,
              unit="plateau (last fifth) of the validation loss",
              statement="the router without area inputs is trained to its plateau")
rec.condition("noarea_fits", [na_fit[s] for s in seeds], ">=", 0.9,
              unit="R², training basins' held-out events",
              statement="the router without area inputs fits its training basins")
rec.claim(
    "area_leak_bites_noarea",
    "Without its area-carrying inputs, the river model's transfer breaks when the "
    "graph-normalised area is leaked",
    paper="transfer needs the three leaks controlled",
    measured=[na_drop[s] for s in seeds], op=">", target=cfg_na["bar"],
    unit="R² drop, mean over the zero-shot and 5x basins",
    baseline=[np.mean([na_r2[s, "none", n] for n in unseen]) for s in seeds],
    note="R² per seed, closed / area leak: " + "; ".join(
        f"seed {s} " + ", ".join(f"{n} {na_r2[s, 'none', n]:.3f} / "
                                 f"{na_r2[s, 'area', n]:.3f}" for n in unseen)
        for s in seeds) + ". Registered in round 5 before these models were trained.",
    given=("noarea_converged", "noarea_fits"),
)
rec.claim(
    "train_speedup_vs_recurrent",
    "The factorized model trains faster than recurrent message passing",
    paper="28x",
    measured=speedups, op=">=", target=SPEEDUP_BAR,
    unit=f"x (recurrent / factorized CPU time per training step, T={bench_T[-1]})",
    note=notes["train_speedup_vs_recurrent"],
    given=("timing_above_noise",),
)
rec.save()

# %% tags=["remove-input"]
_few = [c for c in rec.claims if c.inconclusive_seeds and c.verdict != "inconclusive"]
_txt = []
for c in _few:
    q = [i for i in range(c.n) if i not in c.inconclusive_seeds]
    lab = (leak_seeds if c.id == "leaks_break_transfer" else
           geo_seeds if c.n == len(geo_seeds) else seeds)
    _txt.append(
        f"`{c.id}` is **{c.verdict}** on {len(q)} of {c.n} seeds only (seed "
        + ", ".join(str(lab[i]) for i in q) + ": " + ", ".join(f"{c.measured[i]:.2f}" for i in q)
        + "); it leaves out " + " and ".join(
            f"seed {lab[int(i)]} ({', '.join(v)} failed; measured {c.measured[int(i)]:.2f})"
            for i, v in c.failed_conditions.items())
        + ". A verdict from so few qualifying seeds is a lead, not a result.")
_inc = [c.id for c in rec.claims if c.verdict == "inconclusive"]
display(Markdown(
    "**Reading the verdicts (this run).** "
    + " ".join(_txt)
    + (f" Inconclusive (no qualifying seed): {', '.join(f'`{i}`' for i in _inc)}." if _inc else "")
    + (" **The river transfer claims are untested here, not refuted:** a model-free baseline fitted on "
       "the training basins (per seed: " + ", ".join(best_free6[s].replace("_", " ") for s in seeds)
       + ") leaves a learned model a validation room of "
       + _l3([1 - rain_v[s, best_free6[s]] for s in seeds]) + " against the registered bar of "
       f"{cfg6['reading']['conditions']['needs_the_model'][2]} (`needs_the_model`), so this benchmark "
       "cannot show whether a "
       "learned operator transfers better. What it does show: the factorized router's mean margin over "
       "that baseline is negative at every seed (zero-shot "
       + ", ".join(f"{np.mean([margin6[s, j, 'zero-shot'] for j in (1, 2)]):+.3f}" for s in seeds)
       + "; 5x " + ", ".join(f"{np.mean([margin6[s, j, '5x'] for j in (1, 2)]):+.3f}" for s in seeds)
       + "), and its zero-shot outlet R² ("
       + "; ".join(f"run {j} " + _l3([runs[s, j]["factorized"]["zero-shot"] for s in seeds])
                   for j in (1, 2))
       + (") stays below the paper's 0.998 and below the zero-shot conceptual model's at every seed: at "
          "this scale the learned router does not reach a calibrated conceptual model on a task that does "
          "not need it."
          if all(runs[s, j]["factorized"]["zero-shot"] < min(0.998, runs[s, j]["conceptual"]["zero-shot"])
                 for s in seeds for j in (1, 2)) else
          "; per seed and run against the conceptual model's above).")
       if {"zero_shot_margin", "scales_5x_margin"} <= set(_inc)
       and all(1 - rain_v[s, best_free6[s]] < 0.05 for s in seeds) else "")
    + " On the routing-only benchmark (rounds 1-4, no longer the reading of `zero_shot_margin` and "
    "`scales_5x_margin`) an event bootstrap of the outlet margin (share of resamples "
    "of the basin's events in which the factorized model still wins) gives "
    + "; ".join(f"{b} " + ", ".join(f"{support[s, b]:.2f}" for s in seeds) for b in unseen)
    + " per seed, and the pooled-R² margin on the zero-shot basin is "
    + _lst([a - b for a, b in zip(seeds_of("none", "zero-shot"), _best_zs)]) + ". "
    + "Added at review (exploratory, not a baseline of the claims): variable-parameter Muskingum, the "
    "simulator's own family, with two parameters fitted on the training basins from a grid that leaves out the "
    "simulator's own values, reaches outlet R² "
    + "; ".join(f"{b} " + _lst([vpm_out[s, b] for s in seeds]) for b in unseen) + " (factorized "
    + "; ".join(f"{b} " + _lst(seeds_of("none", b, True)) for b in unseen) + "). "
    + ("It beats the factorized model at every seed on both unseen basins: the routing-only margins were "
       "over references without the flow-dependent travel time, and on that task a calibrated routing of "
       "the right form already solves the transfer; this is why round 5 reads the transfer claims on "
       "rainfall."
       if all(vpm_out[s, b] > outlet_r2[s, "none", b] for s in seeds for b in unseen) else
       "It does not beat the factorized model everywhere (per seed and basin above).")
))


# %% [markdown]
# ## 10. Known limits

# %% tags=["remove-input"]
_nparam = sum(p.numel() for p in routers[seeds[0], "none"].parameters())
_rising = 100 * np.mean([np.argmax(rain[s][n]["O"][:, 0], 1) >= cfg_rain["data"]["T"] - 3
                         for s in seeds for n in unseen])  # outlet still rising at the end
_long_cost = sum(  # projected CPU seconds of retraining the rainfall models at a longer window
    ck_rain.manifest["metrics"][f"s{s}.{m}.seconds"] * bench[bench_T[1]].median(k)
    / bench[bench_T[0]].median(k)
    for s in seeds for m, k in (("router", "factorized"), ("recurrent", "recurrent"))
) if not quick else float("nan")
_unflat = {s: [k for k in [Gmax, "attention", *DM, *(LEAK_KEYS if s in leak_seeds else [])]
               if (st.two_sided(geo_plateau[s, k]) if k == "dm_G1" else geo_plateau[s, k])
               > 0.05] for s in geo_seeds}  # the book's plateau bar (control: two-sided)
display(Markdown(
    f"* **Scale.** Basins of {rc['n']}-{5 * rc['n']} reaches, a {_nparam:,}-parameter model, {rc['steps']} "
    f"training steps (the validation loss fell {rng_([100 * r['val_drop'] for r in diag.values()], '.1f')}% "
    f"over the last quarter), {rc['n_events']} training events per basin; the paper trains a 27K-parameter "
    "model on real river networks.\n"
    "* **The rainfall benchmark (rounds 5-6).** In "
    + f"{_rising:.0f}"
    + "% of the unseen basins' events the outlet discharge is still rising in the window's last three "
    "hours (section 3's figure): the outlet R² scores "
    + ("the rising limb, and most flood peaks fall after the window. " if _rising > 50 else
       "whole hydrographs in most events. ")
    + "Its transfer claims are read against zero-shot baselines that do not know the simulator's runoff "
    "equations (a linear runoff stage before Muskingum routing, a linear unit hydrograph, a generic HBV-type "
    "model calibrated with many starts) and the recurrent baseline; the simulator's own hillslope with one "
    "calibrated capacity reaches outlet R² " + "; ".join(
        f"{n} " + _lst([rain_out[s, "structure", n] for s in seeds]) for n in unseen)
    + " and the HBV-type model re-calibrated on each unseen basin (gauged, in-sample) "
    + "; ".join(f"{n} " + _l3([gauged[s, n] for s in seeds]) for n in unseen)
    + " (factorized: " + "; ".join(
        f"{n} " + _lst([rain_out[s, "factorized", n] for s in seeds]) for n in unseen)
    + "). The benchmark does not need a learned model: the zero-shot HBV-type model reaches validation "
    "outlet R² " + _l3([rain_v[s, "conceptual"] for s in seeds]) + ", where the router reaches "
    + "; ".join(f"run {j} " + _l3([runs[s, j]["validation"]["factorized"] for s in seeds])
                for j in (1, 2))
    + " on the same held-out events of its own training basins: the router's fit bar (0.9) is well below "
    "what a 13-number conceptual model attains there, so the router is under-fit relative to the task, "
    "not only out-transferred. Each reach's capacity is partly hidden from every model (its random "
    "lognormal factor), which caps what any of them can reach at a headwater reach; at the outlet those "
    "factors average out (the gauged re-calibration gains at most "
    f"{max(_gap6):.3f}). Two training runs per seed of "
    f"{cfg_rain['steps']} steps: enough to see the sign of a margin's noise, not its size.\n"
    "* **What would test the river transfer claims (the next round's design, not run here).** A benchmark "
    "on which the best zero-shot model-free baseline leaves room on the training basins' own held-out "
    "events. Scoring the outlet of basins whose reaches are drawn from one distribution averages every "
    "reach-level difference away (above: the gauged re-calibration gains almost nothing), so a new runoff "
    "process alone does not create room. Basins that differ in their **mix of reaches** could: each "
    "training basin with its own range of `K` (and the unseen basins with mixes no training basin has, "
    "inside the training basins' joint range), and a hillslope whose capacity depends on `K` in a way no "
    "power of `K` fits (deep soils at middle `K`, thin at both ends). One regionalised parameter set then "
    "cannot fit every training basin, while a model that learns each reach's response from its `K` can "
    "(a design to register, then check baseline-first with `needs_the_model` at every seed before any "
    "model is trained on it).\n"
    "* **A longer window (the next round's design, not run).** Retraining the rainfall models on a window "
    f"of {bench_T[1]} hours, so that most events' peaks reach the outlet inside it, would "
    "take " + (f"about {_long_cost / 60:.0f}" if np.isfinite(_long_cost) else "(quick mode: not projected)")
    + " CPU minutes for the three seeds' router and recurrent baseline (one run each): round 5's training "
    "time per model times section 6's measured step-time ratio between "
    f"T = {bench_T[1]} and T = {bench_T[0]}, per model.\n"
    "* **Causal, but time-invariant filters.** Each reach's filter depends on its static features only: a "
    "flood's size changes the routing only through the pointwise updates that read the routed flows and the "
    "running state, not through the filters' travel times, as variable-parameter routing would.\n"
    "* **Depth extrapolation is not transfer.** We chose training basins as deep as the zero-shot basin. On the "
    f"deep basin ({rng_([r['depth_deep'] / r['depth_train'] for r in diag.values()], '.1f')} times deeper than "
    f"any training basin) the factorized R² is {_lst(_deep['none'])} and its outlet peaks {rng_(_peak)} times "
    f"the true ones, while calibrated linear Muskingum gets {_lst(_deep['linear_cal'])}; at its outlet the "
    f"best R² of any of these models at any seed is {max(max(seeds_of(k, 'deep', True)) for k in _deep):.2f}. "
    f"Its median reach is {rng_([transit[s, 'deep'][0] for s in seeds], '.0f')} hours from the outlet, and "
    f"{rng_([transit[s, 'deep'][2] for s in seeds])} of a window's inflow leaves its outlet within the "
    f"{rc['T']}-hour window: the outlet sees only the front of each flood (section 3's transit diagnostic). "
    "A window longer than the deep basin's travel time was not tried.\n"
    "* **Leaks.** One run per leak and seed. On the river the leaked inputs are open but barely read "
    "(section 3), and the dynamic input `q / (a Q0)` carries the area whatever the leak; a river model without "
    "that area-carrying input, where the area leak could bite, is trained in round 5 (one run per seed; "
    "`area_leak_bites_noarea`, drop " + _lst(na_drop.values()) + "). On the cross-geometry "
    + (f"model the leak variants are trained for seed(s) {', '.join(map(str, leak_seeds))} (section 7)"
       + (f"; not for seed(s) {', '.join(str(s) for s in geo_seeds if s not in leak_seeds)} (the data "
          "budget; chosen before the leak results were read"
          + (", because there the closed model fails `geometry_converged`, which makes the claim "
             "inconclusive at that seed anyway; what would test it there: the closed model trained "
             "longer, until its validation curve is flat, then its three leak models)"
             if all(geo_plateau[s, Gmax] > 0.05 for s in geo_seeds if s not in leak_seeds) else ")")
          if set(geo_seeds) - set(leak_seeds) else "") + ".\n"
       if leak_seeds else "model the leak variants (`geometry_leak`) were not trained in this build "
       "(time), so `leaks_break_transfer` is untested.\n")
    + f"* **Cross-geometry.** {gc['n_test']} test geometries per seed, {gc['steps']} steps per model, one oracle "
    f"per test geometry; the accumulation claim compares G = {G1[1:]} with G = {Gmax[1:]} only (no "
    "intermediate counts), at equal steps and equal data (the G = 1 model sees "
    f"{n_copies * _n_fit} events of one geometry). The oracles the claims use have as many events as the "
    "pooled model"
    + (f"; even so they are not a ceiling at {sum(v > 1 for v in ceiling)} of {len(ceiling)} seeds "
       "(`oracle_is_ceiling`), so there the paper's ~10% comparison is not tested. " if max(ceiling) > 1
       else f" and are a ceiling at every seed ({_lst(ceiling)}). ")
    + "Models whose validation curve is not flat by the plateau rule (more than 0.05; the data-matched "
    "control read two-sided, so a curve rising at its end counts too), which the claims leave "
    "out at that seed: "
    + ("; ".join(f"seed {s} " + ", ".join(f"{k} {geo_plateau[s, k]:.3f}" for k in _unflat[s])
                 for s in geo_seeds if _unflat[s]) or "none")
    + ". Round 4 retrained the models that failed in the round before and trained seed 1's leak models "
    f"(section 7's table: {len(retrained)} models, warmup-stable-decay, read on the stable phase)"
    + ("; what would close the remaining gap: those models trained longer on the same recipe until "
       "their stable phase passes the rule, then the claims re-read" if any(_unflat.values()) else
       "; no model is left short of its plateau by its registered reading")
    + (f"; {len(_by_noise)} of them ({', '.join(_by_noise)}) are flat only within the registered noise "
       "allowance: read without it, their stable phase still falls by more than the bar, so their claims "
       "rest on a curve whose remaining trend is within its step noise; a longer stable phase would say "
       "whether it is" if retrained and _by_noise else "")
    + ". One training run per model and seed, so the run-to-run spread of the ratios is not measured, and a "
    f"verdict resting on one qualifying seed is a lead. The G = {G1[1:]} control is the first training "
    "geometry of each seed, one draw: its test error with "
    f"{n_copies * _n_fit} events runs from {min(geo_err[s, 'dm_G1'] for s in geo_seeds):.2f} to "
    f"{max(geo_err[s, 'dm_G1'] for s in geo_seeds):.2f} over the seeds (G = {Gmax[1:]}: "
    f"{rng_([geo_err[s, Gmax] for s in geo_seeds])}), so several one-geometry controls per seed would say how "
    "much of the accumulation ratio is the choice of geometry. Added at review (exploratory): the 5-event "
    "one-geometry models (the G = 1 control and each 5-event oracle on the other test geometries) err "
    + "; ".join(f"seed {s} {rng_(g1_spread[s])}" for s in geo_seeds)
    + f" on geometries they did not train on, so the geometry drawn moves a one-geometry model's error by up "
    f"to {max(max(v) / min(v) for v in g1_spread.values()):.1f}× within a seed; the data-matched controls' "
    "weights are not stored, so their own spread is not measured. "
    + "The attention mixer's graph-aware input is our reconstruction. "
    "Its time block (FNO-1D, as in the paper's SepFNO) is not causal (section 7), unlike the river router.\n"
    f"* **Speed.** CPU time on one thread: the recurrent step costs "
    f"{bench[bench_T[0]].ratio('recurrent', 'factorized'):.2f}× the factorized one at T = {bench_T[0]} and "
    f"{rng_(speedups)}× at T = {Tmax} over the seeds; the sweep's level loop is a Python loop. The paper's 28× "
    "is on a GPU, which we do not have.\n"
    "* **Traffic.** The third domain (cross-city traffic) is not reproduced: no offline data."
))
