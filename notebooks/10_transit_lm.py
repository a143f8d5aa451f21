# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # TransitLM: planning transit routes with a language model and no map
#
# A journey planner normally needs a map: a station graph, timetables and a routing engine. TransitLM (Guo et al.,
# NeurIPS 2026) asks whether a language model can learn the whole job from route records alone. The authors turn
# 13 million Amap route-planning records from four Chinese cities into text and train Qwen3-4B in two stages:
# **continual pre-training (CPT)** on route text, then **supervised fine-tuning (SFT)** from an origin/destination
# request (GPS coordinates plus a query) to a route record (lines, stations, distance, time, fare, access modes).
# The model never sees the map; it has to ground raw coordinates to stations and chain stations into connected
# lines by itself. The paper scores routes with an evaluation *funnel*: is the route physically connected
# (reachability), do its first and last stations lie near the origin and destination (grounding), is it the
# planner's route (line and station IoU, exact match), and are its distance, time and fare estimates right.
# It reports 97.0% reachability and 71.0% exact match for the fine-tuned model. <!-- paper -->
#
# Whether a model *plans* or *remembers* only shows when the test asks for trips it has not seen. So this chapter
# builds a city where routing is hard (most trips need two to four lines), holds out whole regions of the
# origin/destination space, and puts a map-free **nearest-record lookup** next to the model: on trips like the
# training ones a lookup can copy a neighbour's route; on the held-out trips it cannot.
#
# | | paper | this notebook |
# |---|---|---|
# | data | 13.9M records, 4 real cities, 120,845 stations, 13,666 lines | a seeded synthetic "planned" city: 105 stations, 4 metro and 18 bus lines, 6,000 SFT and 3,000 CPT records (`models_wsd2`: 48,000 SFT) |
# | labels | Amap's production planner | our Dijkstra on a (station, line) state graph under the paper's expert score |
# | test | held-out requests | in-distribution requests, and requests whose (origin zone, destination zone) pair never occurs in training |
# | model | Qwen3-4B, CPT then SFT | a 4-layer, d = 128 decoder-only transformer (`helpers.nn`, ~0.8M parameters) per arm and seed, from a checkpoint |
# | tasks | optimal route, 4 preferences, 3 diverse routes | the optimal route and the 4 preferences, trained jointly; three sampled routes for route diversity |
# | metrics | the paper's funnel | the same funnel and thresholds, re-implemented from the description; R1 needs at least two stations |
# | hardware | GPUs | training: `data/10_transit_lm/make_models.py` (previous recipe) or `make_wsd.py` / `make_wsd2.py` (registered recipes) on shared CPUs; this notebook evaluates, in about 1 to 2 minutes |
#
# :::{note}
# **What is reconstructed.** The paper's corpus, tokenizer and exact prompt text are not available offline. The
# city, its speeds, headways, fares and access rules (walk up to 1 km, cycle up to 2 km), the spatial split, the CPT
# corpus (line itineraries, station coordinates, routes with their endpoints), the tokenizer (station, line, field
# and digit tokens; coordinates as 100 m grid offsets) and the way we sample several routes are ours. The
# evaluation funnel and its thresholds (3/5 km grounding by access mode, 10% or 0.5 km / 5 min / 1 CNY estimate <!-- paper -->
# tolerances, route diversity) follow the paper's description; we wrote them from that description.
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
# The default run loads the trained models (two arms × three seeds) and evaluates them: those of the newest recipe
# registered before training whose files are there (`data/10_transit_lm/models_wsd2.*`, then `models_wsd.*`, issue
# #68), else those of the previous recipe (`models.*`); section 3 says which ones this run read. `quick = True`
# trains a tiny model
# of each arm live, on a small corpus, for one seed.

# %% tags=["parameters"]
quick = False
seed = 0
n_test = 300  # in-distribution test requests
n_heldout = 1000  # held-out test requests
n_div = 40  # requests for which the model samples three routes (route diversity)
temperature = 0.7  # sampling temperature for the three routes
wsd_config = None  # tests only: the config of a make_wsd(2).py --tiny checkpoint

# %% tags=["hide-input"]
import json
import warnings

import matplotlib.pyplot as plt
import numpy as np
import torch
from IPython.display import Markdown, display

from helpers import checkpoints, claims, plotting, repro, scripts, train
from helpers import transit_lm as T
from helpers import transit_lm_wsd as W

# which models: "live" (quick), "models_wsd2" or "models_wsd" (registered recipes,
# if in data/), "models"
source = W.recipe(quick)
wsd = source in (W.NAME, W.NAME2)
base = W.checkpoint_config(source if wsd else W.OLD)
if wsd and wsd_config:  # tests: a tiny checkpoint under HELPERS_DATA
    base = wsd_config
# the models of the stored seeds (three)
seeds = scripts.model_seeds(seed, len(base["seeds"]))
# the checkpoint of these seeds (seed 0: the committed config)
cfg = scripts.with_seeds(base, seeds)
if quick:
    n_test, n_heldout, n_div = 40, 40, 8
    seeds = [seed]
    cfg.update(
        n_sft=600,
        n_cpt_routes=300,
        n_pref=200,
        cpt_repeat=2,
        d_model=32,
        n_layer=2,
        n_head=2,
        batch=16,
        cpt_steps=40,
        sft_steps=80,
        sft_tail=20,
    )

env = repro.setup(seed, threads=1)
plotting.use_style()
rec = claims.ClaimsRecord(
    "10_transit_lm",
    dict(
        quick=quick,
        seed=seed,
        n_test=n_test,
        n_heldout=n_heldout,
        n_div=n_div,
        temperature=temperature,
        recipe=source,
        **cfg,
    ),
)
print(env)

# %% [markdown]
# ## 1. A planned city and a routing engine that writes TransitLM records
#
# The city lies on a jittered 12 × 12 lattice (1.2 km spacing) in a latitude/longitude frame around 31.2°N, <!-- paper -->
# 121.45°E. Four metro lines run seven stops along rows and columns; eighteen bus lines are short L-shapes (four to <!-- paper -->
# eight lattice steps). Lines that cross share a station, a transfer station. Because every line covers only a
# part of the city and the access legs are short, a trip across town needs several lines. The paper's **next-hop
# table** lists, for every station, itself and its neighbours along any line; the reachability metric is defined on
# it.
#
# The engine searches a **(station, line) state graph**: `O → (in, s)` by walking (≤ 1 km) or cycling (≤ 2 km),
# `(in, s) → (on, s, L)` boards line L (half a headway of waiting, one more line, the boarding fare),
# `(on, a, L) → (on, b, L)` rides to the next stop, `(on, s, L) → (in, s)` alights for a 4-minute transfer, and
# `(on, s, L) → D` leaves by walking or cycling. Each edge costs the paper's **expert score**
# S = T_sec/300 + N_lines + #cycling legs + fare, so Dijkstra finds the expert-optimal route. The request-free part
# of the graph is built once per city; each request only adds its access and egress edges.

# %%
data = T.make_data(cfg, n_test, n_heldout)
city, tok = data.city, data.tok
n_lines = np.array([len(lab["line_sequence"]) for *_, lab in data.sft])
print(
    f"{len(city.stations)} stations, {len(city.lines)} lines "
    f"({sum(k == 'metro' for k in city.kind.values())} metro); "
    f"{city.size_km:.1f} km across"
)
print(
    f"SFT routes: mean {n_lines.mean():.2f} lines, {np.mean(n_lines >= 2):.0%} need a "
    "transfer, "
    f"{np.mean(n_lines >= 3):.0%} two or more"
)
o, d, example = data.test_id[0]
score, path, _ = T.shortest_path(city, o, d)
print(f"best score {score:.2f}; state path: {path}")
example

# %% [markdown]
# The record above is in the paper's label format: `line_sequence`, `station_sequence` with a `【换乘】` (transfer)
# marker between legs, totals as strings with units, and the access (`start_…`) and egress (`end_…`) mode and
# distance.
#
# **The funnel, on the engine's own labels.** Every engine label must be connected (R1), grounded (R2) and an exact
# match of itself with every estimate inside tolerance, and must survive the tokenizer's round trip; our fast
# Dijkstra must agree with `networkx` on the full state graph, and with brute force over every simple path on a tiny
# city. These are checks: they fail if the engine, the metric or the tokenizer is wrong.

# %%
import networkx as nx

all_recs = data.sft + data.cpt + data.test_id + data.test_heldout
own = [T.evaluate(city, lab, lab, o, d) for o, d, lab in all_recs]
rec.check(
    "labels_pass_own_metrics",
    float(np.mean([e["r1"] and e["r2"] and e["exact"] and e["overall"] for e in own])),
    1.0,
)
rec.check(
    "tokenizer_roundtrip",
    float(
        np.mean(
            [tok.decode_label(tok.encode_label(lab)) == lab for *_, lab in all_recs]
        )
    ),
    1.0,
)


# %%
gaps = []
for o, d, _ in data.test_heldout[:10]:
    for p in T.PREFS:
        fast = T.shortest_path(city, o, d, p)
        try:
            ref = nx.single_source_dijkstra(
                T.state_graph(city, o, d, p), "O", "D", weight="w"
            )[0]
        except (nx.NodeNotFound, nx.NetworkXNoPath):
            ref = None
        gaps.append(0.0 if fast is None and ref is None else abs(fast[0] - ref))
rec.check("fast_engine_equals_networkx", float(max(gaps)), 1e-9, op="<=")
tiny = T.make_city(seed + 7, grid=3, spacing_km=1.5, n_metro=1, n_bus=1)
gaps = []
for o, d in T.sample_od(tiny, 6, seed, min_km=2 * T.BIKE_MAX + 0.1):
    for p in (0, 2, 8):
        Gt = T.state_graph(tiny, o, d, p)
        gaps.append(abs(T.shortest_path(tiny, o, d, p)[0] - T.brute_force_cost(Gt)))
rec.check("engine_optimal", float(max(gaps)), 1e-9, op="<=")


# %%
# Metric edge cases: tolerance edges, unit parsing, R1 on one station
# (the same cases are unit tests).
o, d, lab = all_recs[0]
base = dict(lab, total_distance="50.0公里", total_time="1小时40分钟", total_fare="20")
small = dict(lab, total_distance="2.0公里", total_time="10分钟", total_fare="2")
ev = lambda pred, ref: T.evaluate(city, pred, ref, o, d)  # noqa: E731
cases = [
    T.parse_time("1小时7分钟") == 67,
    T.parse_distance("344米") == 0.344,
    T.parse_distance("27.8公里") == 27.8,
    ev(dict(base, total_distance="55.0公里"), base)["distance_ok"],  # +10%: passes
    not ev(dict(base, total_distance="55.1公里"), base)[
        "distance_ok"
    ],  # +10.2%, > 0.5 km
    ev(dict(base, total_time="1小时50分钟"), base)["time_ok"],
    not ev(dict(base, total_time="1小时51分钟"), base)["time_ok"],
    ev(dict(base, total_fare="22"), base)["fare_ok"],
    not ev(dict(base, total_fare="23"), base)["fare_ok"],
    ev(dict(small, total_distance="2.5公里"), small)[
        "distance_ok"
    ],  # +25% but within 0.5 km
    not ev(dict(small, total_distance="2.6公里"), small)["distance_ok"],
    not ev({"station_sequence": "garbage"}, base)["r1"],
    not ev(dict(lab, station_sequence=lab["station_sequence"][:1]), lab)[
        "r1"
    ],  # one station
    not ev(None, base)["exact"],
]
rec.check("metric_edge_cases", int(sum(cases)), len(cases))

# %% [markdown]
# ## 2. A split where lookup fails
#
# We cut the city into 3 × 3 zones and hold out four pairs of distant zones, in both directions: no SFT or CPT
# record starts in one of these zones and ends in the other. The **in-distribution** test set draws new requests
# from the training zone pairs; the **held-out** test set draws them from the held-out pairs. Every station and
# every line still occurs in training, and so does every zone as an origin and as a destination: the held-out
# requests ask the model to combine pieces it has seen into a trip it has not.
#
# The baseline is the one a practitioner with only the records would try first: **nearest record**, which answers
# with the label of the training record whose origin and destination are closest to the query's. It searches
# every route record the CPT+SFT model read (SFT optimal-route and preference records and the CPT routes with
# their endpoints, 10,886 in all), so it remembers at least as much as the model was shown.
#
# Copying one record cannot compose a trip; the **spliced records** baseline can. Among the 20 records that start
# nearest the origin and the 20 that end nearest the destination it takes the pair that shares a station (closest
# endpoints first) and rides the first record to that station and the second one from it (`T.splice_lookup`). It
# is map-free too: it reads only the records' endpoints and station names. Above every map-free baseline sits an
# **upper reference**: the map a reader of the CPT corpus could rebuild from its texts (every line's itinerary and
# every station at its 100 m grid coordinates, `T.city_from_texts`), searched by our own engine with Dijkstra. It
# knows the cost model, which the model has to infer from the records, so it bounds what the corpus can teach; it
# falls short of the engine only where rounding a station to 100 m changes which station is best to walk or cycle
# to.

# %%
zone_of = lambda p: T.zone(city, p, cfg["zones"])  # noqa: E731
# every route record the CPT+SFT model read: SFT optimal-route and preference
# records and the CPT routes with their endpoints (the lookup's memory)
seen = data.sft + [(o, d, lab) for o, d, _, lab in data.pref] + data.cpt
print(f"the nearest-record lookup searches {len(seen):,} route records")
print("held-out (origin zone, destination zone) pairs:", sorted(data.heldout))
splits = {"in-distribution": data.test_id, "held-out": data.test_heldout}
for name, recs in splits.items():
    nl = np.mean([len(lab["line_sequence"]) for *_, lab in recs])
    print(f"{name:16s} {len(recs)} requests, mean {nl:.2f} lines per route")
train_pairs = {
    (zone_of(o), zone_of(d))
    for o, d, *_ in data.sft + data.cpt + data.pref + data.test_pref
}
# no SFT, CPT or preference record (nor a preference test request) joins a held-out
# zone pair (line and station texts carry no requests); every held-out request does
# (also a unit test)
rec.check("split_disjoint", len(train_pairs & data.heldout), 0)
rec.check(
    "heldout_in_heldout_pairs",
    float(
        np.mean(
            [(zone_of(o), zone_of(d)) in data.heldout for o, d, _ in data.test_heldout]
        )
    ),
    1.0,
)


def draw_city(ax, zones=False):
    for line, stops in city.lines.items():
        xy = np.array([city.to_xy(city.stations[s]) for s in stops])
        metro = city.kind[line] == "metro"
        ax.plot(
            *xy.T,
            lw=2.5 if metro else 1,
            alpha=0.7 if metro else 0.4,
            color=None if metro else "grey",
        )
    xy = np.array([city.to_xy(p) for p in city.stations.values()])
    ax.scatter(*xy.T, s=8, c="k", zorder=3)
    if zones:
        for k in range(1, cfg["zones"]):
            for f in (ax.axvline, ax.axhline):
                f(k * city.size_km / cfg["zones"], color="tab:red", lw=0.6, ls=":")
    ax.set(xlabel="km east", ylabel="km north", aspect="equal")


fig, ax = plt.subplots(1, 2, figsize=(11, 5))
for a, (name, recs) in zip(ax, splits.items(), strict=True):
    draw_city(a, zones=True)
    for o, d, _ in recs[:60]:
        a.annotate(
            "",
            city.to_xy(d),
            city.to_xy(o),
            arrowprops=dict(arrowstyle="->", lw=0.6, alpha=0.6),
        )
    a.set_title(f"{name} requests (60 of {len(recs)}); metro lines in colour")
plt.show()

# %% [markdown]
# ## 3. The language model and its two training stages
#
# A record becomes tokens: the prompt `<bos> <req0> <O> xxx yyy <D> xxx yyy <sep>` carries the coordinates as
# 100 m grid offsets (three digits per axis: nothing about stations), and the label is written field by field
# (`<start_mode> 步行 <start_dist> 6 3 5 米 <lines> B4 M2 <stations> S028 S027 【换乘】 …`).
#
# - **CPT** (next-token loss on every token) reads route text: every line's itinerary in both directions, every
#   station with its coordinates (`<at> xxx yyy S037`, and the station first), and 3,000 routes with their
#   endpoints (prompt and label as one text) from the training zone pairs. The coordinates are what can teach a
#   model to ground raw GPS to stations.
# - **SFT** (loss on the label tokens only) maps prompt → record: 6,000 optimal-route requests (`<req0>`) and
#   1,886 preference requests (`<req2>`, `<req5>`, `<req7>`, `<req8>`, section 7), shuffled together.
#
# The ablation follows the paper: the **SFT-only** arm runs `sft_steps` of SFT; the **CPT+SFT** arm runs
# `cpt_steps` of CPT first and then the same SFT steps on the same batches. Two recipes exist: the previous one
# (`models`, the recipe the fit probe below chose) holds the SFT learning rate constant and decays it along a cosine
# over the last `sft_tail` steps; the one registered before its models trained (`models_wsd`, `T.train_wsd`) runs
# four times the SFT steps under warmup-stable-decay and logs the loss on the route-deciding tokens and the exact
# match on training records as it trains; the next one (`models_wsd2`, registered after a data probe) runs the same
# schedule with a longer stable phase on eight times the SFT and preference records. The text under the training
# curves says which recipe this run read and
# what its schedule was. The key lines of the loss and the masks:

# %%
tensors = T.corpora(data, cfg)
x, y = tensors["sft"]
i0 = 0
print("SFT input :", " ".join(tok.itos[t] for t in x[i0][:24].tolist()), "…")
print(
    "SFT target:",
    " ".join(tok.itos[t] if t >= 0 else "·" for t in y[i0][:24].tolist()),
    "…",
)
print(
    f"{len(x)} SFT sequences, {len(tensors['cpt'][0])} CPT texts, vocabulary {len(tok)}"
)
# loss = cross_entropy(model(x).flatten(0, 1), y.flatten(), ignore_index=-100):
# "·" = -100 is not scored

# %%
models, curves = {}, {}
ckpt = None
if not quick and set(seeds) <= set(cfg["seeds"]):
    ckpt = checkpoints.load("10_transit_lm", source, config=cfg)
    for s in seeds:
        for arm in ("sft", "cpt"):
            m = T.make_model(cfg, len(tok))
            models[arm, s] = ckpt.load_into(m, prefix=f"{arm}/{s}.").float().eval()
    for key, c in ckpt.manifest["history"].items():
        curves[key] = (np.array(c["step"]), np.array(c["value"]))
    print(
        f"loaded {len(models)} models, trained in {ckpt.manifest['wall_seconds']:.0f} s"
    )
else:  # quick mode (or seeds outside the checkpoint): train live
    for s in seeds:
        for arm in ("sft", "cpt"):
            with repro.seeded(s):
                models[arm, s], hists = T.train_lm(
                    cfg, tensors, len(tok), s, arm == "cpt"
                )
            for stage, h in hists.items():
                curves[f"{arm}/{s}/{stage}"] = (
                    np.arange(len(h.loss)),
                    np.array(h.loss),
                )
print(f"{models['cpt', seeds[0]].n_params():,} parameters per model")

fig, ax = plt.subplots(figsize=(7, 3.4))
for s in seeds:
    for arm, color in (("sft", "tab:blue"), ("cpt", "tab:orange")):
        off = 0
        if arm == "cpt":
            st, v = curves[f"cpt/{s}/cpt"]
            ax.plot(
                st,
                v,
                color="grey",
                lw=0.8,
                label="CPT stage" if s == seeds[0] else None,
            )
            off = cfg["cpt_steps"]
        st, v = curves[f"{arm}/{s}/sft"]
        label = (
            {"sft": "SFT only", "cpt": "CPT+SFT: SFT stage"}[arm]
            if s == seeds[0]
            else None
        )
        ax.plot(st + off, v, color=color, lw=0.8, label=label)
ax.set(xlabel="step", ylabel="loss", yscale="log", title="training curves, all seeds")
ax.legend(fontsize=8)
plt.show()

# %% tags=["remove-input"]
registered_on = W.REGISTERED2 if source == W.NAME2 else T.REGISTERED
if wsd:
    schedule = (
        f"the recipe registered on {registered_on} before any of its models trained: "
        f"{cfg['sft_steps']:,} SFT steps under warmup-stable-decay ({cfg['sft_warmup']:,}"
        f" warm-up steps, the rate constant to step {T.stable_end(cfg):,}, a cosine "
        f"decay over the last {cfg['sft_decay']:,})"
    )
elif not quick:
    schedule = (
        f"the previous recipe: {cfg['sft_steps']:,} SFT steps at a constant rate with a "
        f"cosine tail over the last {cfg['sft_tail']:,}; the registered recipes' "
        "checkpoints (`models_wsd2`, `models_wsd`) are not in `data/` yet"
    )
else:
    schedule = (
        f"quick mode: tiny models trained live here ({cfg['sft_steps']} SFT steps), "
        "not a stored recipe"
    )
display(
    Markdown(f"""
**This run read `{source}`** ({len(data.sft):,} SFT and {len(data.pref):,} preference
records): {schedule}. The CPT+SFT arm ran {cfg["cpt_steps"]} CPT steps first; seeds
{", ".join(map(str, seeds))}.
""")
)

# %% [markdown]
# **Does the model fit its own records?** A model that does not reproduce the routes it was trained on cannot
# show whether it composes new ones, so the claims about the planner's routes rest on the condition
# `<arm>_fits_training_records`: exact match on its own SFT training records at least `FITS` (section 9; 150
# records for `models`, the first 300 for the registered recipes, as registered).
# The models of the previous recipe (1,000 SFT steps under a cosine schedule) fell far short of it. Before choosing
# a new recipe we asked where their loss sits (`data/10_transit_lm/probe_fit.py diagnose`: the
# stored SFT-only model of seed 0, its teacher-forced loss on 400 SFT training records split by record part, and
# which part its greedy routes get wrong), then probed recipes from a list fixed before probing, choosing by the
# training fit and the plateau only, never by a held-out number. The measurements are in `probe_fit.json`.

# %%
# book-wide plateau rule; the model reproduces its own records (as registered)
FLAT, FITS = T.FLAT_BAR, T.FIT_BAR
arm_names = {"sft": "SFT only", "cpt": "CPT+SFT"}
probe = json.loads(checkpoints.fetch("10_transit_lm", "probe_fit.json").read_text())
diag = probe["diagnosis"]
print(f"{'record part':18s}{'loss/token':>11s}{'share':>8s}{'tokens':>8s}")
for part, v in diag["parts"].items():
    print(f"{part:18s}{v['per_token']:11.3f}{v['share']:8.3f}{v['tokens']:8.2f}")
wrong = {k.split("/")[1]: v for k, v in diag.items() if k.startswith("wrong/")}
print("greedy routes on 150 training records, share wrong:")
print(", ".join(f"{k} {v:.2f}" for k, v in wrong.items()))

fig, ax = plt.subplots(figsize=(7, 3.2))
for name, pr in probe["probes"].items():
    st, v = zip(*pr["evals"]["train_exact"], strict=True)
    ax.plot(st, v, "k--", marker=".", lw=1, label=f"probe {name} (seed 0, SFT only)")
for s in seeds:
    for arm, color in (("sft", "tab:blue"), ("cpt", "tab:orange")):
        if f"{arm}/{s}/train_exact" in curves:
            st, v = curves[f"{arm}/{s}/train_exact"]
            lab = f"stored: {arm_names[arm]}" if s == seeds[0] else None
            ax.plot(st, v, color=color, lw=0.8, alpha=0.8, label=lab)
ax.axhline(FITS, color="tab:red", ls=":", lw=1, label="condition's bar")
n_logged = cfg.get("n_fit", 40 if quick else 150)  # records the jobs logged
ax.set(xlabel="SFT step", ylabel="exact match", ylim=(0, 1),
       title=f"exact match on {n_logged} SFT training records in training")  # fmt: skip
ax.legend(fontsize=7)
plt.show()

# %% tags=["remove-input"]
pt = diag["parts"]
numeric = ("start_dist", "dist", "time", "fare", "end_dist")
decide = ("start_mode", "first_line", "later_lines", "first_station", "last_station",
          "end_mode")  # fmt: skip
chosen = probe["probes"][probe["decision"]["chosen"]]
ex_curve = dict(chosen["evals"]["train_exact"])
flat_end = chosen["recipe"]["sft_steps"] - chosen["recipe"]["tail"]
stored_fit = ", ".join(
    f"{arm_names[a]} seed {s} {curves[f'{a}/{s}/train_exact'][1][-1]:.2f}"
    for a in ("cpt", "sft") for s in seeds if f"{a}/{s}/train_exact" in curves
) or "(quick mode: no stored models)"  # fmt: skip
ca = diag["cell_agreement"]
display(
    Markdown(f"""
**Diagnosis.** The loss of a training record sits mostly in its numbers: the access,
egress and total distances, the time and the fare hold
{sum(pt[k]["share"] for k in numeric):.0%} of it. Much of that no model can remove: the
prompt gives each endpoint to 100 m, so the last digits of a distance in metres are
noise.
Exact match does not read them. The tokens that decide the route cost
{sum(pt[k]["per_token"] * pt[k]["tokens"] for k in decide):.2f} nats per record (access
mode {pt["start_mode"]["per_token"]:.2f}, first line
{pt["first_line"]["per_token"]:.2f},
first station {pt["first_station"]["per_token"]:.2f}, last station
{pt["last_station"]["per_token"]:.2f}, egress mode {pt["end_mode"]["per_token"]:.2f}),
while a station inside a leg, once its line is chosen, costs
{pt["inner_stations"]["per_token"]:.3f}: the model rides a line it has chosen, it does
not
yet choose well. Decoded greedily, the old seed-0 model is exact on
{1 - wrong["exact"]:.2f} of its training records; it gets the first station wrong on
{wrong["first_station"]:.2f} of them, the last on
{wrong["last_station"]:.2f}, the lines on {wrong["lines"]:.2f} and the access mode on
{wrong["start_mode"]:.2f}. One limit is in the task itself: a record's prompt is its
100 m
cells, and on {ca["mean"]:.2f} of the points of those cells the engine plans the
record's
route ({ca["all"]:.2f} of the records have it over the whole cells,
{ca["majority"]:.2f} over most of them). A model that computes routes from the prompt
rather than recalling the record can pass the bar, but no model reaches 1 on new
requests.

**Probe and recipe.** Under the probe `{probe["decision"]["chosen"]}` (seed 0, SFT only:
{chosen["recipe"]["sft_steps"]:,} SFT steps, the same rate held constant, then a cosine
tail over the last {chosen["recipe"]["tail"]:,}) exact match on the 150 training
records rose to {ex_curve[1000]:.2f} at step 1,000, {ex_curve[flat_end]:.2f} when the
constant phase ended (step {flat_end:,}) and {ex_curve[max(ex_curve)]:.2f} after the
tail,
{"below" if ex_curve[max(ex_curve)] < FITS else "at or above"} the bar of {FITS}; its loss had not levelled (plateau
{chosen["plateau"]:.3f} against the rule's {FLAT}). It was taken without further probes:
{probe["decision"]["why"]}. The models this run read (`{source}`) end at {stored_fit}
(float weights, as logged during training; section 4 re-measures them on the stored int8
weights).
""")
)

# %% [markdown]
# **The registered recipe's own curves.** The jobs of `models_wsd` and `models_wsd2` logged, for every model, the
# loss on the
# route-deciding tokens (access and egress mode, lines, first and last station: `T.route_loss` of
# `T.part_losses`) of the first 300 SFT training records every 250 SFT steps, and the greedy exact match on the
# same records every 1,000. The flat condition reads the first curve up to the end of the stable phase only
# (`T.route_flat`: `train.plateau(frac=0.2, until=stable end, noise=2)`; the decay lowers a loss by annealing
# alone); the fit condition re-measures the exact match on the stored int8 weights (section 4). The previous
# recipe's models logged neither curve.

# %%
if wsd:
    fig, ax = plt.subplots(1, 2, figsize=(11, 3.4))
    for s in seeds:
        for arm, color in (("sft", "tab:blue"), ("cpt", "tab:orange")):
            logged = W.curves(ckpt.manifest, arm, s)  # raises if a curve is missing
            lab = arm_names[arm] if s == seeds[0] else None
            for a, key in zip(ax, W.CURVES, strict=True):
                st, v = logged[key]["step"], logged[key]["value"]
                a.plot(st, v, color=color, lw=0.8, marker=".", ms=3, label=lab)
    for a in ax:
        a.axvline(T.stable_end(cfg), color="grey", ls="--", lw=0.8)
    ax[1].axhline(FITS, color="tab:red", ls=":", lw=1, label="fit condition's bar")
    ax[0].set(xlabel="SFT step", ylabel="nats per record", yscale="log",
              title="route-token loss (dashed: end of the stable phase)")  # fmt: skip
    ax[1].set(xlabel="SFT step", ylabel="exact match", ylim=(0, 1),
              title=f"exact match on {cfg['n_fit']} SFT training records")  # fmt: skip
    ax[0].legend(fontsize=7)
    ax[1].legend(fontsize=7)
    plt.show()
else:
    print(f"this run read {source}: no route-token loss curve")

# %% [markdown]
# ## 4. Decoding and the funnel, on both splits
#
# Each test prompt is decoded greedily with a key/value cache (the prompt is read once; each step feeds only the
# newest token), and the tokens are parsed back into a record. A malformed output (fields missing, a station where
# a line belongs…) fails every metric. R1 now needs at least two stations: a one-station "route" would pass the
# next-hop test trivially.

# %%
# the map of the CPT corpus: its line and station texts (the inputs the model read)
rebuilt = T.city_from_texts(tok, tensors["cpt"][0].tolist())
print(
    f"rebuilt map: {len(rebuilt.stations)} stations, {len(rebuilt.lines)} lines; "
    f"next-hop table equal to the city's: {rebuilt.next_hop == city.next_hop}"
)

# %%
ods = {name: [(o, d) for o, d, _ in recs] for name, recs in splits.items()}
preds = {}
for (arm, s), m in models.items():
    for name in splits:
        preds[arm, s, name] = T.decode(m, tok, ods[name])
for name in splits:
    preds["lookup", None, name] = T.lookup(city, seen, ods[name])
    # compositional and map-free: two records spliced at a shared station
    preds["splice", None, name] = T.splice_lookup(city, seen, ods[name])
    # upper reference: the map the CPT texts spell out, searched by our engine
    preds["rebuilt", None, name] = [T.route(rebuilt, o, d) for o, d in ods[name]]
    preds["engine", None, name] = [lab for *_, lab in splits[name]]

funnel, ground, ground_end, hits = {}, {}, {}, {}
for key, pr in preds.items():
    recs = splits[key[2]]
    evs = [
        T.evaluate(city, p, lab, o, d) for p, (o, d, lab) in zip(pr, recs, strict=True)
    ]
    hits[key] = np.array([e["exact"] for e in evs], float)
    funnel[key] = {k: float(np.mean([e[k] for e in evs])) for k in evs[0]}
    funnel[key]["parsed"] = float(np.mean([p is not None for p in pr]))
    g = [
        T.first_station(city, p, o, lab)
        for p, (o, d, lab) in zip(pr, recs, strict=True)
    ]
    ground[key] = {k: np.array([x[k] for x in g]) for k in g[0]}
    g = [
        T.last_station(city, p, d, lab) for p, (o, d, lab) in zip(pr, recs, strict=True)
    ]
    ground_end[key] = {k: np.array([x[k] for x in g]) for k in g[0]}


def mean_over_seeds(arm, name, metric):
    return [funnel[arm, s, name][metric] for s in seeds]


cols = ["parsed", "r1", "r2", "line_iou", "station_iou", "exact", "overall"]
names = {
    "cpt": "CPT+SFT",
    "sft": "SFT only",
    "lookup": "nearest record",
    "splice": "spliced records",
    "rebuilt": "rebuilt map",
    "engine": "engine (labels)",
}
for name in splits:
    print(f"--- {name} (models: mean over seeds {seeds})")
    print(f"{'':16s}" + "".join(f"{c:>12s}" for c in cols))
    for arm in ("cpt", "sft", "lookup", "splice", "rebuilt", "engine"):
        keys = (
            [(arm, s, name) for s in seeds]
            if arm in ("cpt", "sft")
            else [(arm, None, name)]
        )
        print(
            f"{names[arm]:16s}"
            + "".join(f"{np.mean([funnel[k][c] for k in keys]):12.3f}" for c in cols)
        )

# %%
fig, ax = plt.subplots(1, 2, figsize=(12, 3.8), sharey=True)
stages = ["r1", "r2", "exact", "overall"]
labels = ["R1 reachable", "R2 grounded", "R3 exact", "R4 estimates"]
for a, name in zip(ax, splits, strict=True):
    for j, arm in enumerate(("cpt", "sft", "lookup")):
        keys = (
            [(arm, s, name) for s in seeds] if arm != "lookup" else [(arm, None, name)]
        )
        vals = np.array([[funnel[k][st] for st in stages] for k in keys])
        a.bar(
            np.arange(4) + 0.27 * (j - 1),
            vals.mean(0),
            0.27,
            label=names[arm],
            yerr=vals.std(0) if len(keys) > 1 else None,
            capsize=2,
        )
    a.set_xticks(range(4), labels)
    a.set(ylim=(0, 1.05), title=f"the evaluation funnel: {name}")
ax[0].set(ylabel="share of test requests")
ax[0].legend(fontsize=8)
plt.show()

# %% [markdown]
# **Where do the routes break?** A diagnosis of the funnel: exact match and reachability by the number of lines the
# engine's route needs, on both splits. If the model fails only on long held-out trips, it chains lines it has
# seen but cannot compose new trips; if it also fails on short in-distribution trips, it is under-trained.

# %%
fig, ax = plt.subplots(1, 2, figsize=(11, 3.4), sharey=True)
for a, metric in zip(ax, ("exact", "r1"), strict=True):
    for name, ls in (("in-distribution", "-"), ("held-out", "--")):
        recs = splits[name]
        nl = np.array([min(len(lab["line_sequence"]), 5) for *_, lab in recs])
        for arm, color in (
            ("cpt", "tab:orange"),
            ("sft", "tab:blue"),
            ("lookup", "tab:green"),
        ):
            keys = (
                [(arm, s, name) for s in seeds]
                if arm != "lookup"
                else [(arm, None, name)]
            )
            hit = np.mean(
                [
                    [
                        T.evaluate(city, p, lab, o, d)[metric]
                        for p, (o, d, lab) in zip(preds[k], recs, strict=True)
                    ]
                    for k in keys
                ],
                axis=0,
            )
            xs = [k for k in range(1, 6) if (nl == k).sum() >= 5]
            a.plot(
                xs,
                [hit[nl == k].mean() for k in xs],
                ls,
                color=color,
                marker="o",
                ms=3,
                label=f"{names[arm]}, {name}",
            )
    a.set_xticks(range(1, 6))
    a.set(
        xlabel="lines in the engine's route (5 = five or more)",
        title=metric,
        ylim=(-0.02, 1.02),
    )
ax[0].set(ylabel="share of requests")
ax[1].legend(fontsize=7)
plt.show()

# %% [markdown]
# **Where along the trip does a route break?** For every generated route we walk along the trip and name its first
# failure (`T.first_break`): a **malformed** record; a first station beyond the R2 threshold of the origin
# (**start**), or a stated access distance that fails R2's plausibility rule for it (**start km**); two
# consecutive stations of a leg that are not neighbours (a **jump**, an R1 break); neighbours that are not along
# the leg's own line (**off line**); a leg that does not begin where the previous one ended (**transfer**); a last
# station beyond the threshold of the destination (**end**) or an implausible stated egress distance (**end km**);
# or **none**: R1 and R2 both pass, though the route need not be the planner's. Reading the legs in order gives a
# per-leg
# **hazard**: of the routes that reached leg k intact, the share that breaks inside it or at the transfer after it.
# If breaks pile up at the ends, grounding is the weak part; if they pile up in later legs, composition is.

# %%
breaks = {
    key: [T.first_break(city, p, o, d) for p, (o, d, _) in zip(pr, splits[key[2]])]
    for key, pr in preds.items()
}  # fmt: skip
short = {"malformed": "malf.", "off_line": "off line", "start_km": "start km",
         "end_km": "end km"}  # fmt: skip
break_arms = ("cpt", "sft", "lookup", "splice", "rebuilt")


def keys_of(arm, name):
    if arm in ("cpt", "sft"):
        return [(arm, s, name) for s in seeds]
    return [(arm, None, name)]


def break_share(arm, name, where):
    hit = [[b["where"] == where for b in breaks[k]] for k in keys_of(arm, name)]
    return float(np.mean(hit))


def hazard(arm, name, leg):
    """Per-leg hazard pooled over seeds; NaN if fewer than 10 routes reached the leg."""
    n = np.sum([T.leg_hazard(breaks[k], [len(p["line_sequence"]) if p else 0
                                         for p in preds[k]], leg)
                for k in keys_of(arm, name)], axis=0)  # fmt: skip
    return n[1] / n[0] if n[0] >= 10 else float("nan")


for name in splits:
    print(f"--- {name}: share of routes by first break")
    print(f"{'':16s}" + "".join(f"{short.get(w, w):>10s}" for w in T.BREAKS))
    for arm in break_arms:
        row = "".join(f"{break_share(arm, name, w):10.3f}" for w in T.BREAKS)
        print(f"{names[arm]:16s}" + row)
    for a in ("cpt", "sft"):
        hz = " ".join(f"{hazard(a, name, k):.2f}" for k in range(4))
        print(f"{names[a]} per-leg hazard, legs 1-4: {hz}")

fig, ax = plt.subplots(figsize=(8, 3.2))
colors = plt.cm.tab10(np.arange(len(T.BREAKS)))
for i, arm in enumerate(break_arms):
    left = 0.0
    for w, c in zip(T.BREAKS, colors, strict=True):
        v = break_share(arm, "held-out", w)
        ax.barh(i, v, left=left, color=c, label=short.get(w, w) if i == 0 else None)
        left += v
ax.set_yticks(range(len(break_arms)), [names[a] for a in break_arms])
ax.set(xlabel="share of held-out requests", title="first break along the trip")
ax.legend(fontsize=7, ncol=4, loc="lower center", bbox_to_anchor=(0.5, 1.12))
plt.show()

# %% tags=["remove-input"]
ends = {w: break_share("cpt", "held-out", w) for w in T.BREAKS}
inside = ends["jump"] + ends["off_line"]
r2_why = (
    "the stated access distances, not the stations"
    if ends["start_km"] + ends["end_km"] > ends["start"] + ends["end"]
    else "stations too far from the endpoints"
)
display(
    Markdown(f"""
On the held-out requests the CPT+SFT routes (mean over seeds) break first at the start
in {ends["start"]:.3f} of the requests (first station too far) and
{ends["start_km"]:.3f} (stated access distance implausible), inside a leg (jump or off
its line) in {inside:.3f}, at a transfer in {ends["transfer"]:.3f}, at the end in
{ends["end"]:.3f} (last station too far) and {ends["end_km"]:.3f} (stated egress
distance implausible); {ends["malformed"]:.3f} are malformed and {ends["none"]:.3f}
pass R1 and R2. What fails R2 is chiefly {r2_why}. The per-leg hazard of CPT+SFT for legs 1 to 4 is
{", ".join(f"{hazard('cpt', 'held-out', k):.2f}" for k in range(4))} (NaN: fewer than
10 routes reached that leg).
""")
)

# %% [markdown]
# **Why would short held-out routes score differently from short in-distribution ones?** In the by-length figure,
# held-out routes of two or fewer lines can reach a different exact match than in-distribution ones. One guess is
# that a short trip between distant zones must ride a metro line, which is easier to get right than one of eighteen
# overlapping bus lines. The table below splits the requests by number of lines and by whether the engine's route
# is metro-only; the text after it reads what this run shows.


# %%
def route_kind(lab):
    metro = all(city.kind[x] == "metro" for x in lab["line_sequence"])
    return "metro only" if metro else "with bus"


strata = {}  # (split, lines, kind) -> (n, CPT+SFT, SFT only, lookup, trip km)
print(
    f"{'split':16s}{'lines':>6s}{'kind':>12s}{'n':>5s}{'CPT+SFT':>9s}{'SFT':>7s}"
    f"{'lookup':>8s}{'trip km':>9s}"
)
for name, recs in splits.items():
    nl = np.array([min(len(lab["line_sequence"]), 3) for *_, lab in recs])
    kd = np.array([route_kind(lab) for *_, lab in recs])
    km_od = np.array([T.haversine(o, d) for o, d, _ in recs])
    ex = {a: np.mean([hits[a, s, name] for s in seeds], 0) for a in ("cpt", "sft")}
    ex["lookup"] = hits["lookup", None, name]
    for k in (1, 2, 3):
        for kind in ("metro only", "with bus"):
            sel = (nl == k) & (kd == kind)
            if sel.sum() == 0:
                continue
            row = [int(sel.sum())] + [float(ex[a][sel].mean()) for a in ex]
            strata[name, k, kind] = (*row, float(km_od[sel].mean()))
            print(
                f"{name:16s}{k if k < 3 else '3+':>6}{kind:>12s}{row[0]:5d}"
                + "".join(f"{v:9.3f}" for v in row[1:])
                + f"{km_od[sel].mean():9.1f}"
            )


def short_stats(name):
    """Share of metro-only routes among <= 2-line routes, and CPT+SFT exact
    match on them by kind (NaN where a stratum is empty)."""
    keys = [k for k in strata if k[0] == name and k[1] <= 2]
    n = {
        kind: sum(strata[k][0] for k in keys if k[2] == kind)
        for kind in ("metro only", "with bus")
    }
    ex = {
        kind: (sum(strata[k][0] * strata[k][1] for k in keys if k[2] == kind) / n[kind])
        if n[kind]
        else float("nan")
        for kind in n
    }
    return n["metro only"] / max(1, sum(n.values())), ex


short_id, short_ho = short_stats("in-distribution"), short_stats("held-out")
short_note = (
    "Short (<= 2-line) routes: metro-only share in-distribution "
    f"{short_id[0]:.2f}, held-out {short_ho[0]:.2f}; CPT+SFT exact match on "
    f"metro-only short routes {short_id[1]['metro only']:.3f} (in-distribution) vs "
    f"{short_ho[1]['metro only']:.3f} (held-out), on short routes with a bus "
    f"{short_id[1]['with bus']:.3f} vs {short_ho[1]['with bus']:.3f}."
)
print(short_note)

# %% tags=["remove-input"]
n_short = {
    n: sum(v[0] for k, v in strata.items() if k[0] == n and k[1] <= 2) for n in splits
}
n_one = {
    n: sum(v[0] for k, v in strata.items() if k[0] == n and k[1] == 1) for n in splits
}
se_short = np.sqrt(0.2 * 0.8 / max(1, n_short["held-out"]))
display(
    Markdown(f"""
In this run the held-out split has {n_one["held-out"]} one-line routes and a metro-only
share of
{short_ho[0]:.2f} among its {n_short["held-out"]} short routes (in-distribution
{short_id[0]:.2f} of
{n_short["in-distribution"]}, with {n_one["in-distribution"]} one-line routes).
CPT+SFT's exact match on short
routes with a bus is {short_id[1]["with bus"]:.3f} in distribution and
{short_ho[1]["with bus"]:.3f} held out; the
binomial standard error of a share near 0.2 over {n_short["held-out"]} requests is about
{se_short:.2f}, so a gap
smaller than that is noise, and a difference between the splits' short groups can come
from their composition
(how many one-line and metro-only trips each holds) rather than from held-out trips
being easier.
""")
)

# %% [markdown]
# **Under-trained or unable to compose?** The direct test: decode requests the models were trained on. If exact
# match on SFT training records is as low as on the test splits, the models have not even fitted their data, and
# the held-out numbers say nothing about composition yet. To tell grounding from routing on these records we also
# count how often the generated route starts at the engine's first station and ends at its last one.

# %%
# the registered fit condition reads the first cfg["n_fit"] (300) records; the
# previous recipe's reading, 150
n_fit = 40 if quick else cfg.get("n_fit", 150)
if wsd and wsd_config is None:
    assert n_fit == T.N_FIT_RECORDS, "the registered fit condition reads 300 records"
fit_recs = data.sft[:n_fit]
train_exact, train_ends = {}, {}


def end_stations(r):
    seq = [x for x in r["station_sequence"] if x != T.TRANSFER] if r else []
    return (seq[0], seq[-1]) if seq else (None, None)


for arm in ("cpt", "sft"):
    for s in seeds:
        pr = T.decode(models[arm, s], tok, [(o, d) for o, d, _ in fit_recs])
        train_exact[arm, s] = float(
            np.mean(
                [
                    T.evaluate(city, p, lab, o, d)["exact"]
                    for p, (o, d, lab) in zip(pr, fit_recs, strict=True)
                ]
            )
        )
        same = [
            [a == b for a, b in zip(end_stations(p), end_stations(lab), strict=True)]
            for p, (*_, lab) in zip(pr, fit_recs, strict=True)
        ]
        train_ends[arm, s] = np.mean(same, 0)  # (first station, last station)
for arm in ("cpt", "sft"):
    print(
        f"{names[arm]:10s} on {n_fit} SFT training records, per seed: exact match",
        ", ".join(f"{train_exact[arm, s]:.3f}" for s in seeds),
        "| engine's first station",
        ", ".join(f"{train_ends[arm, s][0]:.3f}" for s in seeds),
        "| engine's last station",
        ", ".join(f"{train_ends[arm, s][1]:.3f}" for s in seeds),
    )

# %% [markdown]
# ## 5. Grounding: does the first station lie near the origin?
#
# The model is never told where stations are. For each request we take the **first station the model generated**
# and ask whether it lies within the R2 threshold of the origin (3 km on foot, 5 km by bike, by the record's own
# access mode), and how far it is from the **engine's** first station. Two baselines bracket this: a **random
# station** (what a model that learned nothing about coordinates would give) and the **nearest station** (what a
# map lookup gives).

# %%
rng = repro.rng(seed, 5)
station_ids = list(city.stations)
for name, recs in splits.items():
    rand_ok, rand_eng, near_eng = [], [], []
    for o, _d, lab in recs:
        r = station_ids[rng.integers(len(station_ids))]
        fake = dict(lab, station_sequence=[r, r])
        gr = T.first_station(city, fake, o, lab)
        rand_ok.append(gr["ok"])
        rand_eng.append(gr["to_engine"])
        s_near = T.nearest_station(city, o)[0]
        near_eng.append(
            T.first_station(city, dict(lab, station_sequence=[s_near]), o, lab)[
                "to_engine"
            ]
        )
    ground["random", None, name] = {
        "ok": np.array(rand_ok),
        "to_engine": np.array(rand_eng),
    }
    ground["nearest", None, name] = {
        "ok": np.ones(len(recs)),
        "to_engine": np.array(near_eng),
    }
    print(f"--- {name}")
    for key in [("cpt", s, name) for s in seeds] + [
        (k, None, name) for k in ("lookup", "random", "nearest", "engine")
    ]:
        g = ground[key]
        print(
            f"{str(key[0]) + ('' if key[1] is None else f' seed {key[1]}'):16s} within "
            "R2 threshold "
            f"{np.mean(g['ok']):.3f}   median km to the engine's first station "
            f"{np.nanmedian(g['to_engine']):.2f}"
        )

fig, ax = plt.subplots(figsize=(6, 5.2))
draw_city(ax, zones=True)
recs = splits["held-out"]
oxy = np.array([city.to_xy(o) for o, *_ in recs])
km = ground["cpt", seeds[0], "held-out"]["to_engine"]
sc = ax.scatter(
    *oxy.T, c=np.nan_to_num(km, nan=8.0), cmap="viridis", vmin=0, vmax=6, s=14, zorder=4
)
plt.colorbar(sc, label="km from the generated to the engine's first station")
ax.set_title(f"held-out origins (CPT+SFT, seed {seeds[0]})")
plt.show()

# %% [markdown]
# ## 6. Expert score and route diversity of the model
#
# The paper's expert score S = T_sec/300 + N_lines + #cycling legs + fare, read from each record's own fields, tells
# whether the model's routes are as good as the planner's by the planner's own yardstick; we report it for the
# reachable generated routes next to the engine's score on the same requests. For task 3 we sample three routes
# per request at temperature `temperature` and compute the route diversity RD (mean 1 − IoU of the line sets,
# access modes included) over the well-formed ones, next to the engine's three penalised re-plans.
# A negative score gap does not mean a better route: the score is read from the record's own stated time, fare
# and lines, and a route that stops short of the destination (R2 failing at the end) looks cheaper.

# %%
for name, recs in splits.items():
    for arm in ("cpt", "sft"):
        gap, n_ok = [], 0
        for s in seeds:
            for p, (*_, lab) in zip(preds[arm, s, name], recs, strict=True):
                if p is not None and T.reachable(city, p):
                    n_ok += 1
                    try:
                        gap.append(T.expert_score(p) - T.expert_score(lab))
                    except ValueError:
                        pass
        print(
            f"{name:16s} {names[arm]:9s}: expert score S of reachable routes minus the "
            "engine's: "
            f"mean {np.mean(gap) if gap else np.nan:+.2f} (median "
            f"{np.median(gap) if gap else np.nan:+.2f}, "
            f"{len(gap)} routes)"
        )

gen = torch.Generator().manual_seed(seed)
div_ods = ods["in-distribution"][:n_div]
samples = [
    T.decode(
        models["cpt", seeds[0]], tok, div_ods, temperature=temperature, generator=gen
    )
    for _ in range(3)
]
rd_model = []
for trio in zip(*samples, strict=True):
    ok = [r for r in trio if r is not None]
    if len(ok) >= 2:
        rd_model.append(T.route_diversity(ok))
rd_engine = [
    T.route_diversity(list(T.diverse_routes(city, o, d).values())) for o, d in div_ods
]
rd_text = (
    f"{np.mean(rd_model):.2f} over {len(rd_model)} requests"
    if rd_model
    else "none (no two well-formed samples)"
)
print(
    f"route diversity RD: model (3 samples, T={temperature}) {rd_text}; "
    f"engine (3 penalised re-plans) {np.mean(rd_engine):.2f}"
)

# %% [markdown]
# ## 7. Preferences: fewer transfers, no subway, subway first, fastest
#
# The paper's request types 2, 5, 7 and 8 ask for a route under a preference. The engine plans them with a changed
# score (type 2 adds 10 per line, type 7 adds 10 per bus boarding, type 8 scores minutes only) or a changed graph
# (type 5 drops the metro lines), and the request type is the `<reqK>` token of the prompt. The SFT set mixes the
# optimal-route records with 1,886 preference requests (2,000 drawn, types in turn, training zone pairs; the 114 type-5
# requests that no bus route serves are dropped). On new preference requests from the training zone pairs we
# count a route as **compliant** when it honours the preference against the engine's label (`preference_ok`: no
# more transfers than the label, no metro, some metro, at most 1.1 × the label's time) **and** is connected (R1) <!-- paper -->
# and grounded at both ends (R2): a route that does not reach the destination does not honour a preference.
#
# Two rules keep the measure from being gamed. A route of one station fails R1, and a route that stops short
# fails R2, so an empty or truncated answer cannot pass "fewer transfers" or "no subway". And "fastest" (type 8)
# is judged on the time the engine's own time model gives the generated route (`T.route_minutes`: access at the
# stated mode, half a headway per boarding, transfers, rides), not only on the time the record states, so a
# model cannot pass it by writing a small number. One loophole is the paper's: R2 accepts a first station up to
# 3 km away (the engine walks at most 1 km), so a route can need fewer lines than the engine's label and pass
# type 2.
#
# Baselines: the engine's own labels (what a perfect model scores; below 1 because for some requests no metro
# line is near enough for type 7, so the engine's best "subway first" route is still a bus route); three
# map-free lookups: the **nearest record of the same request type**, the nearest optimal-route record (SFT or
# CPT), and the **preference-filtered record**, an engine-free heuristic per type (the nearest of all 10,886 route
# records whose route has no metro line for type 5, some metro line for type 7; the nearest optimal-route or same-type record
# for types 2 and 8); and the same CPT+SFT model prompted for the optimal route (`<req0>`), which shows whether
# the model reads the request token at all. The claim's baseline is the best of the three lookups.

# %%
pref_recs = data.test_pref
pref_ods = [(o, d) for o, d, _, _ in pref_recs]
pref_types = np.array([q for _, _, q, _ in pref_recs])


def fast_enough(p, o, d, q, lab):
    """Type 8 only: the route's own time (the engine's time model) <= 1.1 x label's."""
    if q != 8:
        return True
    m = T.route_minutes(city, p, o, d)
    return m is not None and m <= 1.1 * T.parse_time(lab["total_time"])


def comply(pr, own_time=True, recs=None):
    """Per request: preference honoured, route connected (R1) and grounded (R2)."""
    return np.array(
        [
            T.preference_ok(p, lab, q, city)
            and T.reachable(city, p)
            and T.grounded(city, p, o, d)
            and (not own_time or fast_enough(p, o, d, q, lab))
            for p, (o, d, q, lab) in zip(pr, recs or pref_recs, strict=True)
        ],
        float,
    )


# the time model reproduces every engine label's stated time (rounded to minutes)
time_gap = max(
    abs(T.route_minutes(city, lab, o, d) - T.parse_time(lab["total_time"]))
    for o, d, *_, lab in data.pref + pref_recs + data.sft
)
rec.check("route_minutes_matches_labels", time_gap, 0.5 + 1e-9, op="<=")


# %%
comp, stated_only = {}, {}
for s in seeds:
    for arm in ("cpt", "sft"):
        pr = T.decode(models[arm, s], tok, pref_ods, prefs=pref_types.tolist())
        comp[arm, s] = comply(pr)
        stated_only[arm, s] = comply(pr, own_time=False)
    comp["req0", s] = comply(T.decode(models["cpt", s], tok, pref_ods))
look = [None] * len(pref_recs)
for q in (2, 5, 7, 8):
    idx = np.flatnonzero(pref_types == q)
    train_q = [(o, d, lab) for o, d, p, lab in data.pref if p == q]
    for i, r in zip(
        idx, T.lookup(city, train_q, [pref_ods[i] for i in idx]), strict=True
    ):
        look[i] = r
comp["lookup", None] = comply(look)
comp["lookup_opt", None] = comply(T.lookup(city, data.sft + data.cpt, pref_ods))
# preference-filtered record: an engine-free heuristic per request type


def has_metro(lab):
    return any(city.kind[x] == "metro" for x in lab["line_sequence"])


def filtered_lookup(recs):
    """Per request type: the nearest route record with no metro line (5), with one
    (7), or among optimal-route and same-type records (2, 8)."""
    types = np.array([q for _, _, q, _ in recs])
    out = [None] * len(recs)
    for q in (2, 5, 7, 8):
        idx = np.flatnonzero(types == q)
        if q in (5, 7):
            train_q = [r for r in seen if has_metro(r[2]) == (q == 7)]
        else:
            train_q = data.sft + data.cpt
            train_q += [(o, d, lab) for o, d, p, lab in data.pref if p == q]
        qs = [recs[i][:2] for i in idx]
        for i, r in zip(idx, T.lookup(city, train_q, qs) if qs else [], strict=True):
            out[i] = r
    return out


comp["lookup_filt", None] = comply(filtered_lookup(pref_recs))
comp["engine", None] = comply([lab for *_, lab in pref_recs])


# %%
pref_names = {
    "cpt": "CPT+SFT",
    "sft": "SFT only",
    "req0": "CPT+SFT, <req0>",
    "lookup": "same-type record",
    "lookup_opt": "optimal record",
    "lookup_filt": "filtered record",
    "engine": "engine (labels)",
}
print(f"{len(pref_recs)} preference requests; compliance by request type")
print(
    f"{'':18s}" + "".join(f"{'type ' + str(q):>9s}" for q in (2, 5, 7, 8)) + "      all"
)
for a, nm in pref_names.items():
    keys = [(a, s) for s in seeds] if a in ("cpt", "sft", "req0") else [(a, None)]
    v = np.mean([comp[k] for k in keys], 0)
    print(
        f"{nm:18s}"
        + "".join(f"{v[pref_types == q].mean():9.3f}" for q in (2, 5, 7, 8))
        + f"{v.mean():9.3f}"
    )

# %% tags=["remove-input"]
by_type = {
    a: {
        q: np.mean([comp[a, s][pref_types == q].mean() for s in seeds])
        for q in (2, 5, 7, 8)
    }
    for a in ("cpt", "req0")
}
best_lk = max(
    ("lookup", "lookup_opt", "lookup_filt"), key=lambda k: comp[k, None].mean()
)
lk_by = {q: comp[best_lk, None][pref_types == q].mean() for q in (2, 5, 7, 8)}
ahead = [q for q in (2, 5, 7, 8) if by_type["cpt"][q] > lk_by[q]]
n_beat = sum(comp["cpt", s].mean() > comp[best_lk, None].mean() for s in seeds)
display(
    Markdown(f"""
In this run the CPT+SFT model complies in
{", ".join(f"{comp['cpt', s].mean():.2f}" for s in seeds)} of the
requests per seed, against the engine's {comp["engine", None].mean():.2f} and the
strongest map-free baseline, the
{pref_names[best_lk]} ({comp[best_lk, None].mean():.2f}); it beats that baseline for
{n_beat} seed(s) of
{len(seeds)}. By type, the model is ahead of it on
{", ".join(f"type {q}" for q in ahead) if ahead else "no type"}.
Prompted for the optimal route (`<req0>`) instead of `<req5>`, the model avoids the
metro in
{by_type["req0"][5]:.2f} of the type-5 requests, against {by_type["cpt"][5]:.2f} with
the request token (overall
{", ".join(f"{comp['cpt', s].mean() - comp['req0', s].mean():+.2f}" for s in seeds)} per
seed): this says
whether the model reads the request token.
""")
)

# %% [markdown]
# **Where is the lookup strong?** The preference requests above come from the training zone pairs, where the
# records are dense and the nearest-record lookup beats the models even on the optimal route (section 4). The
# diagnosis repeats the comparison on preference requests from the **held-out** zone pairs (new requests, drawn
# like the held-out test set): if the model's edge over the filtered record grows there, a tie in-distribution
# says the lookup's memory is dense, not that the model ignores the preference (the measured numbers are printed
# below and in the claim's note).

# %%
n_pref_ho = 40 if quick else 160
pref_ho = [
    (o, d, q, lab)
    for i, (o, d) in enumerate(
        T.sample_od(
            city,
            n_pref_ho,
            cfg["data_seed"] * 1000 + 7,
            cfg["min_km"],
            data.heldout,
            False,
            cfg["zones"],
        )
    )
    if (lab := T.route(city, o, d, (q := T.PREFS[1 + i % 4]))) is not None
]
ho_types = [q for _, _, q, _ in pref_ho]
comp_ho = {
    s: comply(
        T.decode(models["cpt", s], tok, [r[:2] for r in pref_ho], prefs=ho_types),
        recs=pref_ho,
    ).mean()
    for s in seeds
}
filt_ho = float(comply(filtered_lookup(pref_ho), recs=pref_ho).mean())
pref_ho_note = (
    f"Diagnosis (measured): on {len(pref_ho)} preference requests from the held-out "
    "zone pairs CPT+SFT complies in "
    + ", ".join(f"{comp_ho[s]:.3f}" for s in seeds)
    + f" per seed, the filtered record in {filt_ho:.3f} (model minus lookup "
    + ", ".join(f"{comp_ho[s] - filt_ho:+.3f}" for s in seeds)
    + ")."
)
print(pref_ho_note)

# %% [markdown]
# ## 8. Browse routes
#
# The slider steps through held-out requests (precomputed, works in the static page): the engine's route in black,
# the CPT+SFT model's in red, the nearest record's in green; origin ○ and destination ×.


# %%
def draw_route(ax, r, style):
    if r is None:
        return
    seq = [s for s in r["station_sequence"] if s in city.stations]
    if seq:
        ax.plot(
            *np.array([city.to_xy(city.stations[s]) for s in seq]).T,
            style,
            lw=2,
            ms=4,
            zorder=5,
        )


def show(ax, o, d, lab, pred, look=None):
    draw_city(ax)
    draw_route(ax, lab, "k-o")
    if look is not None:
        draw_route(ax, look, "g:^")
    draw_route(ax, pred, "r--s")
    ax.scatter(
        *city.to_xy(o), marker="o", s=80, facecolors="none", edgecolors="b", zorder=6
    )
    ax.scatter(*city.to_xy(d), marker="x", s=80, c="b", zorder=6)
    ok = T.evaluate(city, pred, lab, o, d)
    ax.set_title(
        f"engine {' '.join(lab['line_sequence'])} | model "
        f"{' '.join(pred['line_sequence']) if pred else 'malformed'} | R1 {ok['r1']} "
        f"exact {ok['exact']}",
        fontsize=8,
    )


def draw(fig, i):
    o, d, lab = splits["held-out"][i]
    show(
        fig.add_subplot(111),
        o,
        d,
        lab,
        preds["cpt", seeds[0], "held-out"][i],
        preds["lookup", None, "held-out"][i],
    )


plotting.static_slider(
    range(min(10, len(splits["held-out"]))),
    draw,
    figsize=(5.5, 5),
    label="held-out request",
)

# %% [markdown]
# Live, in Jupyter or Colab: place the origin and destination (km from the south-west corner) and compare.


# %%
def live(ox=2.0, oy=2.0, dx=12.0, dy=12.0):
    o, d = city.from_xy(ox, oy), city.from_xy(dx, dy)
    lab = T.route(city, o, d)
    if lab is None:
        print("no route within cycling range")
        return
    pred = T.decode(models["cpt", seeds[0]], tok, [(o, d)])[0]
    fig, ax = plt.subplots(figsize=(5.5, 5))
    show(ax, o, d, lab, pred, T.lookup(city, seen, [(o, d)])[0])
    plt.show()


plotting.live_controls(
    live,
    ox=(0.0, city.size_km, 0.2),
    oy=(0.0, city.size_km, 0.2),
    dx=(0.0, city.size_km, 0.2),
    dy=(0.0, city.size_km, 0.2),
)

# %% [markdown]
# ## 9. The claims record
#
# Every claim is measured on the **held-out** split, per seed, with the CPT+SFT model, and every bar is one the
# engine's own labels pass (checked below): a perfect model could hold each claim. A model that guesses stations
# fails them; the nearest record, though, clears two bars by construction: its routes are real routes and its first
# station lies near the origin (the R2 share). Those two claims say the model is no worse than copying;
# `exact_match`, `beats_lookup_heldout` and `grounding_sharp` are the ones copying cannot pass.
# `preference_compliance` is measured on preference requests from the training zone pairs (section 7). Reachability
# and exact match are the paper's headline numbers for Qwen3-4B on real cities; ours come from a small model on one
# synthetic city, so the comparison is of the shape of the result, not its size.
#
# **Conditions**, fixed before the claims' numbers were read; which set applies depends on the models the run
# read (section 3). A model that does not reproduce the routes it was trained on cannot show whether it composes
# new ones; its held-out exact match measures our compute, not the method.
#
# - The registered recipes (`models_wsd`; conditions and gates registered with the recipe, before any of its
#   models trained: `T.route_flat`, `T.fits_records`, `T.wsd_gates`; `models_wsd2` reads the same, unchanged):
#   `<arm>_route_flat`, the route-token loss is
#   flat over the last fifth of the stable phase (`<= FLAT`), and `<arm>_fits_training_records`, exact match on
#   the first 300 SFT training records, greedy on the stored weights, at least `FITS`. `exact_match`,
#   `beats_lookup_heldout`, `beats_splice_baseline`, `grounding_destination` and `full_r2` rest on both of the
#   CPT+SFT model's, `cpt_helps` on both arms', every other claim on the CPT+SFT model's flat condition.
# - The previous recipe (`models`) and quick mode: `<arm>_sft_flat`, the SFT loss is flat at the end
#   (`train.plateau(loss) <= FLAT`, the book-wide rule over the whole curve), and `<arm>_fits_training_records` on
#   150 records; `exact_match`, `beats_lookup_heldout`, `beats_splice_baseline` and `cpt_helps` also rest on the
#   fit condition.

# %%
for arm in ("cpt", "sft"):
    if wsd:  # the registered readings, per seed (helpers.transit_lm_wsd.conditions)
        got = [
            W.conditions(ckpt.manifest, arm, s, train_exact[arm, s], cfg) for s in seeds
        ]
        rec.condition(
            f"{arm}_route_flat",
            [g["route_flat"][0] for g in got],
            "<=",
            T.FLAT_BAR,
            unit="plateau of the route-token loss (stable phase)",
            statement=f"the {names[arm]} model's route-token loss is flat",
        )
        rec.condition(
            f"{arm}_fits_training_records",
            [g["fits_training_records"][0] for g in got],
            ">=",
            T.FIT_BAR,
            unit=f"exact match on the first {n_fit} SFT training records",
            statement=f"the {names[arm]} model reproduces its own training records",
        )
        continue
    rec.condition(
        f"{arm}_sft_flat",
        [train.plateau(curves[f"{arm}/{s}/sft"][1]) for s in seeds],
        "<=",
        FLAT,
        unit="loss drop in the last fifth / whole drop",
        statement=f"the {names[arm]} model's SFT loss is flat at the end of training",
    )
    rec.condition(
        f"{arm}_fits_training_records",
        [train_exact[arm, s] for s in seeds],
        ">=",
        FITS,
        unit=f"exact match on {n_fit} SFT training records",
        statement=f"the {names[arm]} model reproduces its own training records",
    )
TRAINED, FITS_CPT = ("cpt_sft_flat",), ("cpt_sft_flat", "cpt_fits_training_records")
BOTH = FITS_CPT + ("sft_sft_flat", "sft_fits_training_records")
OLD_GATES = {"exact_match": FITS_CPT, "beats_lookup_heldout": FITS_CPT,
             "beats_splice_baseline": FITS_CPT, "cpt_helps": BOTH}  # fmt: skip


def gates(cid):
    """The conditions a claim rests on: as registered for models_wsd, else as before."""
    return T.wsd_gates(cid) if wsd else OLD_GATES.get(cid, TRAINED)


print(f"this run read {source}; conditions:", ", ".join(c.id for c in rec.conditions))

# %% tags=["hide-input"]
# The numbers every claim needs, the perfect-model checks, and the notes printed
# beside the verdicts.
held = "held-out"
lk = funnel["lookup", None, held]
eng = funnel["engine", None, held]
ex_cpt, ex_sft = (
    mean_over_seeds("cpt", held, "exact"),
    mean_over_seeds("sft", held, "exact"),
)
g_eng = float(np.mean(ground["engine", None, held]["ok"]))
g_model = [float(np.mean(ground["cpt", s, held]["ok"])) for s in seeds]
g_rand = float(np.mean(ground["random", None, held]["ok"]))
g_lk = float(np.mean(ground["lookup", None, held]["ok"]))


def km_to_engine(key, where=ground):
    """Median km from the generated to the engine's first station (last, with
    ground_end); a record without a station counts as the city's diagonal (as wrong
    as possible)."""
    v = where[key]["to_engine"]
    return float(np.median(np.where(np.isnan(v), np.sqrt(2) * city.size_km, v)))


to_eng = [km_to_engine(("cpt", s, held)) for s in seeds]
to_eng_lk = km_to_engine(("lookup", None, held))
to_end = [km_to_engine(("cpt", s, held), ground_end) for s in seeds]
to_end_lk = km_to_engine(("lookup", None, held), ground_end)
sp = funnel["splice", None, held]
rb_ref = funnel["rebuilt", None, held]
# a perfect model (the engine's labels) passes every bar; the split defeats the lookup
rec.check("perfect_model_exact", eng["exact"], 0.5, op=">=")
rec.check("perfect_model_reachability", eng["r1"], 0.9, op=">=")
rec.check("perfect_model_grounding", g_eng, 1.0)  # so the grounding bar is 0.9
rec.check("perfect_model_beats_lookup", eng["exact"] - lk["exact"], 0.0, op=">")
rec.check("lookup_fails_heldout", lk["exact"], 0.5, op="<")


def exact_by_length(name, short):
    """CPT+SFT exact match (mean over seeds) on requests whose engine route has
    <= 2 lines (short) or >= 3."""
    sel = np.array(
        [(len(lab["line_sequence"]) <= 2) == short for *_, lab in splits[name]]
    )
    return (
        float(np.mean([hits["cpt", s, name][sel].mean() for s in seeds]))
        if sel.any()
        else float("nan")
    )


def f3(xs, fmt=".3f"):
    return ", ".join(f"{v:{fmt}}" for v in xs)


train_cpt = [train_exact["cpt", s] for s in seeds]
diag_note = (
    f"Diagnosis: CPT+SFT exact match on in-distribution routes of <= 2 lines "
    f"{exact_by_length('in-distribution', True):.3f}, of >= 3 lines "
    f"{exact_by_length('in-distribution', False):.3f}; "
    f"held-out <= 2 lines {exact_by_length(held, True):.3f}, >= 3 lines "
    f"{exact_by_length(held, False):.3f}. "
    f"{short_note} On {n_fit} of its own SFT training records CPT+SFT scores "
    f"{f3(train_cpt)} (SFT only "
    f"{f3([train_exact['sft', s] for s in seeds])}); its route starts at the engine's "
    f"first station in {f3([train_ends['cpt', s][0] for s in seeds])} of them and ends "
    f"at its last in {f3([train_ends['cpt', s][1] for s in seeds])}."
)
id_note = (
    "In-distribution: CPT+SFT "
    f"{np.mean(mean_over_seeds('cpt', 'in-distribution', 'exact')):.3f}, SFT only "
    f"{np.mean(mean_over_seeds('sft', 'in-distribution', 'exact')):.3f}, lookup "
    f"{funnel['lookup', None, 'in-distribution']['exact']:.3f}."
)
# cpt_helps diagnosis: the paired standard error of each seed's gap (same requests)
cpt_gap = [a - b for a, b in zip(ex_cpt, ex_sft, strict=True)]
cpt_se = [
    float(np.std(hits["cpt", s, held] - hits["sft", s, held], ddof=1))
    / np.sqrt(len(splits[held]))
    for s in seeds
]
cpt_noise = all(abs(g) < 2 * e for g, e in zip(cpt_gap, cpt_se, strict=True))
cpt_id = [
    a - b
    for a, b in zip(
        mean_over_seeds("cpt", "in-distribution", "exact"),
        mean_over_seeds("sft", "in-distribution", "exact"),
        strict=True,
    )
]
cpt_fit = [train_exact["cpt", s] - train_exact["sft", s] for s in seeds]
r1_gap = [
    a - b
    for a, b in zip(
        mean_over_seeds("cpt", held, "r1"),
        mean_over_seeds("sft", held, "r1"),
        strict=True,
    )
]
pref_base = {k[0]: float(comp[k].mean()) for k in comp if k[1] is None}
lookups = ("lookup", "lookup_opt", "lookup_filt")
best_pref = max(lookups, key=pref_base.get)
t8 = pref_types == 8
n_stated = [
    int(stated_only["cpt", s][t8].sum() - comp["cpt", s][t8].sum()) for s in seeds
]
rand_km = np.nanmedian(ground["random", None, held]["to_engine"])
TEXT = {
    "exact_match": (
        "After CPT+SFT the model reproduces the planner's route exactly (station IoU "
        "1, modes) on held-out trips",
        0.710,
        f"Target 0.5 is our bar (paper 0.710). SFT only {np.mean(ex_sft):.3f}; nearest "
        "record "
        f"{lk['exact']:.3f}; map rebuilt from the CPT texts + Dijkstra (upper "
        f"reference) {rb_ref['exact']:.3f}. {id_note} {diag_note}",
    ),
    "beats_splice_baseline": (
        "The model plans held-out trips better than splicing two training records at a "
        "shared station (a "
        "compositional map-free baseline)",
        "the model composes trips from what it learned",
        f"Spliced records: exact match held-out {sp['exact']:.3f}, in-distribution "
        f"{funnel['splice', None, 'in-distribution']['exact']:.3f}; reachability "
        f"held-out {sp['r1']:.3f}, R2 "
        f"{sp['r2']:.3f}. Nearest record {lk['exact']:.3f}. Upper reference, the map "
        f"rebuilt from the CPT texts + Dijkstra: {rb_ref['exact']:.3f} held-out.",
    ),
    "grounding_destination": (
        "The model's last station lies closer to the planner's last station than the "
        "nearest record's does",
        "implicitly grounds GPS to appropriate stations",
        "Median km, generated to engine's last station: nearest record "
        f"{to_end_lk:.2f}, spliced records "
        f"{km_to_engine(('splice', None, held), ground_end):.2f}. Share of last "
        "stations within the R2 threshold: "
        f"CPT+SFT {f3([np.mean(ground_end['cpt', s, held]['ok']) for s in seeds])}, "
        "nearest record "
        f"{np.mean(ground_end['lookup', None, held]['ok']):.3f}.",
    ),
    "beats_lookup_heldout": (
        "The model plans held-out trips better than copying the nearest training "
        "record",
        "the model generalises beyond its records",
        f"Nearest-record exact match: held-out {lk['exact']:.3f}, in-distribution "
        f"{funnel['lookup', None, 'in-distribution']['exact']:.3f}.",
    ),
    "cpt_helps": (
        "Continual pre-training on route text (with coordinates) before the same SFT "
        "raises exact match",
        "CPT+SFT > SFT only",
        "Equal SFT steps and batches; CPT added on top, as in the paper. A perfect "
        "model in both arms would score 0 "
        "here: the claim is about the gap, not the level. R1 difference per seed: "
        f"{f3(r1_gap, '+.3f')}. Paired "
        f"standard error of each held-out gap {f3(cpt_se)}"
        + (" (every gap within two standard errors of 0)" if cpt_noise else "")
        + f"; gap in-distribution {f3(cpt_id, '+.3f')}; on {n_fit} SFT training "
        f"records {f3(cpt_fit, '+.3f')}.",
    ),
    "grounding": (
        "The model grounds raw origin coordinates to a first station within the "
        "paper's R2 threshold, without a map",
        "implicitly grounds GPS to appropriate stations",
        f"Target = engine's share ({g_eng:.2f}) − 0.1 (the issue's bar). The nearest "
        f"record scores {g_lk:.3f}, random "
        f"station {g_rand:.3f}, nearest station 1.0 (a map lookup). Median km from the "
        "generated to the engine's "
        "first station: "
        + f3([np.nanmedian(ground["cpt", s, held]["to_engine"]) for s in seeds], ".2f")
        + " (random "
        f"{rand_km:.2f}, nearest record {to_eng_lk:.2f}).",
    ),
    "full_r2": (
        "The model's held-out routes are grounded at both ends (R2: the first station "
        "near the origin and the last "
        "near the destination, by access mode)",
        "implicitly grounds GPS to appropriate stations",
        f"Target = engine's share ({eng['r2']:.2f}) − 0.1, the bar of `grounding`. SFT "
        "only "
        f"{np.mean(mean_over_seeds('sft', held, 'r2')):.3f}; nearest record "
        f"{lk['r2']:.3f} (a copied neighbour's "
        "route starts and ends near a neighbour's endpoints). CPT+SFT's first breaks "
        "(section 4): a stated access or egress distance implausible in "
        f"{ends['start_km'] + ends['end_km']:.3f}, a first or last station too far in "
        f"{ends['start'] + ends['end']:.3f}.",
    ),
    "grounding_sharp": (
        "The model's first station lies closer to the planner's first station than the "
        "nearest record's does",
        "implicitly grounds GPS to appropriate stations",
        "The R2-threshold share (grounding) is cleared by the nearest record, so this "
        "is the reading that separates "
        "a model that grounds coordinates from one that copies a neighbour. A perfect "
        "model scores 0 km; random "
        f"station {rand_km:.2f} km.",
    ),
    "reachability": (
        "After CPT+SFT the model's held-out routes are connected in the station "
        "network (R1, at least two stations)",
        0.970,
        "Target 0.9 is our bar (paper 0.970). SFT only "
        f"{np.mean(mean_over_seeds('sft', held, 'r1')):.3f}. "
        f"The nearest record is always reachable ({lk['r1']:.2f}): it copies a real "
        "route, just the wrong one.",
    ),
    "preference_compliance": (
        "The model follows request-type preferences (fewer transfers, no subway, "
        "subway first, fastest) better than "
        "copying the nearest record",
        "matches task-specific models on task 2",
        f"Strongest map-free baseline (best of three lookups): {pref_names[best_pref]} "
        f"({pref_base[best_pref]:.3f}); "
        + ", ".join(
            f"{pref_names[k]} {pref_base[k]:.3f}" for k in lookups if k != best_pref
        )
        + f"; engine's own labels {pref_base['engine']:.3f}. SFT only "
        f"{f3([comp['sft', s].mean() for s in seeds])}; "
        "the same CPT+SFT model prompted with <req0> "
        f"{f3([comp['req0', s].mean() for s in seeds])}. Type-8 routes "
        "that pass on their stated time but not on their own: "
        f"{', '.join(map(str, n_stated))} of {int(t8.sum())}. "
        f"{len(pref_recs)} requests, in-distribution zone pairs. {pref_ho_note}",
    ),
}

# %%
r1, r2 = mean_over_seeds("cpt", held, "r1"), mean_over_seeds("cpt", held, "r2")
pref_cpt = [float(comp["cpt", s].mean()) for s in seeds]
# fmt: off
CLAIMS = [  # id, measured (one per seed), op, target, unit, baseline
    ("exact_match", ex_cpt, ">=", 0.5, "share of held-out requests", lk["exact"]),
    ("beats_lookup_heldout", [e - lk["exact"] for e in ex_cpt], ">", 0.0,
     "exact match, CPT+SFT − nearest record (held-out)", lk["exact"]),
    ("beats_splice_baseline", [e - sp["exact"] for e in ex_cpt], ">", 0.0,
     "exact match, CPT+SFT − spliced records (held-out)", sp["exact"]),
    ("cpt_helps", cpt_gap, ">", 0.02,
     "exact match, CPT+SFT − SFT only (held-out, same seed)", ex_sft),
    ("grounding", g_model, ">=", g_eng - 0.1,
     "share of held-out first stations within the R2 threshold", g_lk),
    ("full_r2", r2, ">=", eng["r2"] - 0.1,
     "share of held-out requests grounded at both ends", lk["r2"]),
    ("grounding_sharp", to_eng, "<", to_eng_lk,
     "median km, generated to engine's first station (held-out)", to_eng_lk),
    ("grounding_destination", to_end, "<", to_end_lk,
     "median km, generated to engine's last station (held-out)", to_end_lk),
    ("reachability", r1, ">=", 0.9, "share of held-out requests", lk["r1"]),
    ("preference_compliance", pref_cpt, ">", pref_base[best_pref],
     "share of preference requests (types 2, 5, 7, 8; training zone pairs) answered "
     "with a compliant, connected, grounded route", pref_base[best_pref]),
]
# fmt: on
for cid, measured, op, target, unit, baseline in CLAIMS:
    statement, paper, note = TEXT[cid]
    rec.claim(cid, statement, paper=paper, measured=measured, op=op, target=target,
              unit=unit, baseline=baseline, note=note, given=gates(cid))  # fmt: skip
rec.save()
verdict = {c.id: c.verdict for c in rec.claims}
cond = {c.id: c for c in rec.conditions}

# %% [markdown]
# ## Known limits


# %% tags=["remove-input"]
def cond_line(cid):
    c = cond[cid]
    vals = f3(np.atleast_1d(c.measured))
    return f"`{cid}` {c.verdict} ({vals}; rule {c.op} {c.target:g})"


n_params = models["cpt", seeds[0]].n_params()
walls = [v for k, v in (ckpt.manifest["metrics"] if ckpt else {}).items()
         if k.startswith("wall_seconds/")]  # fmt: skip
job_wall = (
    f", {min(walls) / 60:.0f} to {max(walls) / 60:.0f} minutes per model on one CPU core"
    if walls
    else ""
)
seeds_text = (
    f"- **Seeds.** The models of {len(seeds)} seed(s), not the book's three, so every "
    f"claim reads {len(seeds)}.\n" if not quick and len(seeds) < 3 else ""
)
fits_all = all(train_exact[a, s] >= FITS for a in ("cpt", "sft") for s in seeds)
fit_text = (
    "Every model fits its records."
    if fits_all
    else "Where a model does not fit its own records, low exact match measures our "
    "compute, not the method's ability to compose trips, and the claims that rest on "
    "the fit are inconclusive there. A recipe that fits (more steps, or the probes of "
    "section 3's list that were not run) is what remains to be found."
)
test_ex = [
    np.mean(mean_over_seeds(a, n, "exact")) for a in ("cpt", "sft") for n in splits
]
flat_id = "route_flat" if wsd else "sft_flat"
budget = (
    f"runs {cfg['sft_steps']:,} SFT steps under warmup-stable-decay (decay over the "
    f"last {cfg['sft_decay']:,}; the CPT+SFT arm {cfg['cpt_steps']} CPT steps first)"
    f"{job_wall}: the recipe registered on {registered_on}, before its models trained"
    if wsd
    else f"runs {cfg['sft_steps']:,} SFT steps at a constant rate with a cosine tail "
    f"over the last {cfg.get('sft_tail', 0):,} (the CPT+SFT arm {cfg['cpt_steps']} "
    f"CPT steps first){job_wall}: the recipe of section 3's probe, the only one of "
    "its list that was run"
)
registered = (
    "- **Registered retraining.** This run read the registered recipe's models "
    f"(`{source}`, trained by `data/10_transit_lm/make_"
    f"{'wsd2' if source == W.NAME2 else 'wsd'}.py`), with the conditions and gates "
    "registered with `models_wsd`."
    if wsd
    else "- **Registered retraining.** Longer recipes and their conditions are "
    "registered in code before training (`data/10_transit_lm/make_wsd.py`; after the "
    f"data probe, `make_wsd2.py`: x{W.DATA_SCALE} records, "
    f"{W.checkpoint_config(W.NAME2)['sft_steps']:,} SFT steps, seed 0's SFT arm first "
    "and the rest only if it fits); their models are not in `data/` yet, and this run "
    "did not read them (it reads `models_wsd2.*` or `models_wsd.*` once there)."
)
display(
    Markdown(f"""
- **Training budget.** Each model {budget}. Exact match on the
  models' own SFT training records (section 4) is {f3(train_cpt)} for CPT+SFT and
  {f3([train_exact["sft", s] for s in seeds])} for SFT only, against {min(test_ex):.2f}
  to {max(test_ex):.2f} on
  the test splits (means over seeds). Conditions:
  {cond_line("cpt_fits_training_records")};
  {cond_line(f"cpt_{flat_id}")}; {cond_line("sft_fits_training_records")};
  {cond_line(f"sft_{flat_id}")}. {fit_text}
{seeds_text}- **Model size.** The checkpoint holds {len(models)} models ({n_params:,} parameters
  each: two arms × the seeds),
  stored in int8 (one float32 scale per weight row, dequantized on load); the numbers in
  this chapter are the int8
  weights'.
{registered}
- **Not built.** The Berlin topology from the `vbb-stations`/`vbb-lines` npm packages
  (the issue offered it as an
  alternative to the planned city; this chapter keeps the planned city); the paper's
  diverse-route task is only
  sampled from the optimal-route model, not trained.
""")
)
