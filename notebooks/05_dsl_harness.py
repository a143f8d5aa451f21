# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # A language and its checker as the agent's action space
#
# An agent that works with a rule-based system (a database, a planner, a proof checker) rarely fails because it
# misunderstands the request; it fails at the *boundary*, when it has to turn the request into an action that
# the system accepts. The paper is a position paper: it argues that the interface itself, a **domain-specific
# language (DSL) together with its verifier and harness**, should be designed and evaluated as a research
# variable, because it sets what the agent can do, how it fails and what it can learn from. It names three
# mechanisms:
#
# 1. **compression**: a high-level language needs fewer decisions from intent to action, and far fewer of its
#    strings are well-formed;
# 2. **pruning**: a verifier (grammar, schema, types, preconditions) rejects invalid actions *before* they run,
#    or a constrained decoder never emits them;
# 3. **a checkable signal**: the verifier's structured errors tell the agent what to fix, and give a learner
#    feedback that is denser than "it worked / it did not".
#
# The paper has no experiments with numbers, so this chapter turns the three mechanisms into **case studies of
# our own** and measures them: data queries over a real SQLite database (free SQL vs a small typed query DSL with
# a verifier vs the DSL with constrained decoding), Blocksworld planning (raw moves vs precondition masking),
# a learner trained with a sparse success reward vs the verifier's feedback, a trained transformer that
# writes DSL or SQL for held-out requests, and a request-conditioned policy trained by reinforcement with
# per-token credit from the verifier's error position.
#
# | | the paper | this notebook |
# |---|---|---|
# | agent | LLM agents (discussed, not run) | a **noisy policy**: the gold action with each decision wrong with probability ε (its success has a closed form), a tabular REINFORCE policy, and a **learned agent**: a 2-layer transformer (≈0.1 M parameters) trained on 300 request → program pairs, tested on 300 held-out requests; a smaller one trained by REINFORCE on 100 unlabelled requests with four kinds of credit |
# | domains | a lifecycle × domain analysis (SQL, planning, proofs, infrastructure, …) | SQLite queries (300 intents), Blocksworld with 5 blocks, learning to write one query |
# | evidence | argument and targeted case studies | measured success rates, invalid actions reaching execution, retries, learning curves |
# | hardware | none | 2 CPU cores, a few minutes |
#
# :::{note}
# **What is ours, not the paper's.** The paper's text and case studies were not available to us; only its
# abstract is. Every case study here is **our construction** from the abstract's three mechanisms: the shop
# database, the query DSL and its verifier, the error model of the noisy policy (confusions inside the
# vocabulary, hallucinated names, slips, and destructive statements at rate ε/10), the Blocksworld comparison and
# the learning task. No large language model runs here: in cases 1–3 the "agents" are stand-ins whose error rate
# we set, so those numbers measure the *interfaces* under our error model. Case 4 replaces the stand-in by a small
# transformer trained on templated requests (our own), so its errors are a learner's, not ours; it is still far
# smaller than an LLM and its requests are far more regular than a user's. Case 5's warm start (supervision on
# 200 intents), its credit rules and its budget are our choices too (size and budget after a diagnosis).
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
# `quick = True` runs every code path on tiny sizes; the default is the experiment reported below.

# %% tags=["parameters"]
quick = False
seed = 0
n_intents = 300  # requests with gold programs (case 1)
samples_per_intent = 12  # noisy-agent episodes per intent, interface and error rate
eps_grid = (0.02, 0.05, 0.1, 0.2)  # per-decision error rates
retries = 3  # verifier-guided retries (K)
bw_n = 5  # Blocksworld blocks (case 2)
bw_episodes = 300  # noisy-planner episodes per error rate and interface
bw_bfs_pairs = 30  # start/goal pairs for the BFS comparison
rl_intents = 5  # programs learned in case 3
rl_steps = 1000  # REINFORCE steps per run
rl_batch = 16
rl_lr = 20.0
agent_repairs = 3  # verifier-guided repairs of the learned agent (case 4)
agent_heldout = 300  # held-out requests for the learned agents (case 4)

# %% tags=["hide-input"]
import inspect
import json
import math
import time

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from IPython.display import Markdown, display
from scipy import stats
from tqdm.auto import tqdm

from helpers import checkpoints, claims, plotting, repro, scripts, train
from helpers import dsl_harness as dsl

if quick:
    n_intents, samples_per_intent, retries = 40, 3, 3
    bw_n, bw_episodes, bw_bfs_pairs = 4, 30, 5
    rl_intents, rl_steps, rl_batch = 1, 60, 8
    agent_repairs = 1

env = repro.setup(seed)
plotting.use_style()
rec = claims.ClaimsRecord(
    "05_dsl_harness",
    dict(
        quick=quick,
        seed=seed,
        n_intents=n_intents,
        samples_per_intent=samples_per_intent,
        eps_grid=list(eps_grid),
        retries=retries,
        bw_n=bw_n,
        bw_episodes=bw_episodes,
        bw_bfs_pairs=bw_bfs_pairs,
        rl_intents=rl_intents,
        rl_steps=rl_steps,
        rl_batch=rl_batch,
        rl_lr=rl_lr,
        agent_repairs=agent_repairs,
    ),
)
print(env)

# %% [markdown]
# ## Case 1: data queries through three interfaces
#
# ### The database and the language
#
# A shop database made by our code (seeded): customers (city, segment, age), products (category, price, rating)
# and orders (quantity, total, year), linked by foreign keys. It is opened **read-only** (`PRAGMA query_only`):
# that is our sandbox, so a destructive statement that reaches the database is *counted* but does no harm.
#
# The query DSL has one fixed shape,
#
# `from T [join T2] select F C [where C op V]{0,2} [by G] [order asc|desc] [limit N]`,
#
# where `F` is `val` (plain column) or an aggregate. It is compiled to SQL; the join's `ON` clause comes from the
# schema's foreign keys. The free-SQL interface must instead write every keyword, parenthesis and join key.

# %%
con = dsl.make_database(seed)
for t in dsl.TABLES:
    n_rows = con.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
    cols = [c.name + ":" + c.type for c in dsl.SCHEMA.values() if c.table == t]
    print(f"{t:10s} {n_rows:5d} rows   DSL columns: {', '.join(cols)}")

example = (
    "from orders join customers select sum orders.total where orders.year >= 2022 by "
    "customers.city order desc limit 3"
)
print("\nDSL :", example)
print("SQL :", " ".join(dsl.compile_sql(example.split())))
print("rows:", dsl.execute(con, dsl.compile_sql(example.split()))[1])

# %% [markdown]
# ### The verifier reads left to right
#
# The verifier is a small state machine over the tokens. Each token either moves it to the next phase or produces
# an error with a **kind**, a **position** and a message saying what was expected. The checks are the schema's
# (tables, columns, which table a column belongs to, which tables can be joined), the types' (`sum`/`avg` need a
# number; `<` needs a number; a value must match its column's type and, for a text column, its closed domain),
# the grammar's (clause order, at most two `where`), and one policy check: the language is read-only. These are
# the key lines of the column and value checks:

# %%
print(inspect.getsource(dsl._col_checks))
src = inspect.getsource(dsl._step)
print(
    src[
        src.index('    if phase == "where_val":') : src.index(
            '    if phase == "by_col":'
        )
    ]
)

# %%
for bad in [
    "from orders select sum orders.amount",
    "from orders select sum products.price",
    "from customers join products select count customers.age",
    "from customers select avg customers.city",
    "from customers select count customers.age where customers.city = 'Pariss'",
    "from customers select val customers.age by customers.city",
    "drop orders",
]:
    v = dsl.verify(bad.split())
    print(f"{bad}\n   -> {v.errors[0]}")

# %% [markdown]
# Because every rule is checked at the token that introduces it, the same machine gives **constrained
# decoding**: after a valid prefix, the allowed next tokens are exactly those that produce no error. Every valid
# prefix can be completed, so a decoder that only picks allowed tokens can only emit verified programs.

# %%
for prefix in [
    "",
    "from customers",
    "from customers select avg",
    "from customers select count customers.age where customers.city",
]:
    nxt = dsl.allowed_next(prefix.split())
    print(
        f"{prefix!r:75s} -> {len(nxt):2d} allowed: "
        f"{' '.join(nxt[:9])}{' …' if len(nxt) > 9 else ''}"
    )

# %% [markdown]
# ### Gold programs
#
# The intents are random verifier-valid programs drawn from a shaped distribution (sensible values and group-by
# columns), kept when their result is non-empty and has at most 30 rows; each comes with a templated English
# request. The gold SQL is the compiled DSL.

# %%
intents = dsl.make_intents(con, n_intents, seed=seed)
gold_ok = sum(
    dsl.verify(it.program).ok
    and dsl.results_equal(dsl.execute(con, dsl.compile_sql(it.program))[1], it.result)
    for it in intents
)
rec.check(
    "gold_programs_verify",
    gold_ok,
    len(intents),
    note="every gold program verifies and executes",
)
L_dsl = np.array([len(it.program) for it in intents])
L_sql = np.array([len(it.sql) for it in intents])
L_free = np.array([dsl.free_decisions(it.program) for it in intents])
print(
    pd.DataFrame(
        [{"request": it.request, "DSL": " ".join(it.program)} for it in intents[:5]]
    ).to_string()
)
print(
    f"\ndecisions per intent (mean): free SQL {L_sql.mean():.1f} tokens, DSL "
    f"{L_dsl.mean():.1f} tokens, "
    f"DSL with constrained decoding {L_free.mean():.1f} real choices (END included)"
)

# %% [markdown]
# ### Compression: how many actions of a given length are there?
#
# The free-SQL interface can emit any string over its token vocabulary (keywords, punctuation, identifiers,
# operators, literals); nothing is checked before the database sees it. The DSL's *well-formed* programs are
# those its verifier accepts; we count them exactly with a dynamic programme over the verifier's states
# (`count_programs`; a unit test checks it against brute-force enumeration and a closed form).

# %%
counts = dsl.count_programs(dsl.MAX_PROGRAM_LEN)
V_sql, V_dsl = len(dsl.sql_vocab()), len(dsl.DSL_VOCAB)
lengths = np.arange(1, dsl.MAX_PROGRAM_LEN + 1)
log_raw = np.array(
    [math.log10(sum(V_sql**k for k in range(1, n + 1))) for n in lengths]
)
log_dsl_strings = np.array(
    [math.log10(sum(V_dsl**k for k in range(1, n + 1))) for n in lengths]
)
cum_valid = np.cumsum(counts)[1:]
log_valid = np.log10(np.maximum(cum_valid, 1))
n_ref = int(np.median(L_dsl))
log_ratio = log_raw[n_ref - 1] - log_valid[n_ref - 1]
print(f"vocabularies: free SQL {V_sql} tokens, DSL {V_dsl} tokens")
print(
    f"up to {n_ref} tokens (the median gold DSL length): "
    f"{10 ** log_raw[n_ref - 1]:.2e} SQL token strings, "
    f"{cum_valid[n_ref - 1]:,} well-formed DSL programs; ratio 10^{log_ratio:.1f}"
)

fig, ax = plt.subplots(figsize=(6.4, 3.4))
ax.plot(lengths, log_raw, label=f"free SQL: any string of its {V_sql} tokens")
ax.plot(
    lengths, log_dsl_strings, ls="--", label=f"DSL tokens, unchecked ({V_dsl} tokens)"
)
ax.plot(
    lengths,
    np.where(cum_valid > 0, log_valid, np.nan),
    marker="o",
    ms=3,
    label="DSL programs the verifier accepts",
)
ax.axvline(n_ref, color="grey", lw=0.8)
ax.set(
    xlabel="length (tokens)",
    ylabel="log10 # actions up to this length",
    title="Action space size",
)
ax.legend()
plt.show()

# %% [markdown]
# ### The noisy agent
#
# With no language model available offline, the agent is a **noisy policy**: it knows the gold action and makes
# each decision wrong with probability ε. A wrong decision is, half the time, a confusion inside the vocabulary
# (another column, operator or value, which may well be valid and silently wrong), otherwise a hallucinated name
# or a slip (`orders.amount`, `'Pariss'`, `SELCT`, `=>`). With probability ε/10 the whole action is destructive
# (`DROP TABLE orders`; in the DSL, a `drop` it cannot express). The three interfaces:
#
# * **free SQL**: the text goes straight to the database; an error comes back as SQLite's message and the agent
#   writes the whole query again; a write that reaches the database ends the episode;
# * **DSL + verifier**: the verifier runs first, invalid programs never execute, and the structured error names
#   the token to fix, so the agent redraws only that token;
# * **DSL + constrained decoding**: wrong decisions are drawn only among the verifier-valid alternatives.
#
# The exact-match probability has a closed form: `(1 − ε/10)(1 − ε)^L` for free SQL and the DSL (L tokens), and
# `(1 − ε)^{L_free}` with constrained decoding, where `L_free` counts the decisions that had an alternative. Here
# is one episode of the DSL agent, step by step (these are the key lines of `agent_episode`):

# %%
rng = repro.rng(seed, 99)
it = intents[3]
prog, n_wrong = dsl.corrupt(it.program, 0.25, rng, "dsl")
print("request :", it.request)
print("gold    :", " ".join(it.program))
for attempt in range(retries + 1):
    verdict = dsl.verify(prog)
    print(
        f"attempt {attempt}:",
        " ".join(prog),
        "->",
        "verified" if verdict.ok else f"rejected: {verdict.errors[0]}",
    )
    if verdict.ok:
        status, rows = dsl.execute(con, dsl.compile_sql(prog))
        print(
            "   executed:",
            status,
            "| correct result:",
            dsl.results_equal(rows, it.result),
        )
        break
    for e in verdict.errors:  # structured feedback: redraw only the flagged token
        i = min(e.position, len(it.program) - 1)
        prog[i] = dsl.corrupt([it.program[i]], 0.25, rng, "dsl", destructive_rate=0.0)[
            0
        ][0]

# %% [markdown]
# ### The sweep
#
# Every intent, interface and error rate, `samples_per_intent` episodes each, with up to `retries` retries. We
# record the attempt at which the result first became correct, whether the first action was exactly the gold
# one, invalid actions that reached execution, invalid actions the verifier caught, and destructive statements
# that reached the database.

# %%
INTERFACES = {
    "sql": "free SQL",
    "dsl": "DSL + verifier",
    "constrained": "DSL + constrained decoding",
}
cache: dict = {}
rows = []
t0 = time.process_time()
for iface in INTERFACES:
    for e_i, eps in enumerate(eps_grid):
        rng = repro.rng(seed, 1, e_i, list(INTERFACES).index(iface))
        for j, it in enumerate(
            tqdm(intents, desc=f"{iface} eps={eps}", leave=False, mininterval=2)
        ):
            for _ in range(samples_per_intent):
                ep = dsl.agent_episode(
                    con, it, iface, eps, rng, retries=retries, cache=cache
                )
                rows.append(
                    dict(
                        iface=iface,
                        eps=eps,
                        intent=j,
                        exact=ep.exact,
                        success_at=ep.success_at,
                        invalid_executed=ep.invalid_executed,
                        caught=ep.caught,
                        harmful=ep.harmful,
                        verified_failed=ep.verified_failed,
                    )
                )
sweep = pd.DataFrame(rows)
print(f"{len(sweep):,} episodes in {time.process_time() - t0:.0f} s CPU")

# %% [markdown]
# ### Checks on the sweep
#
# * No program that passed the verifier failed at execution (the verifier is sound for this executor).
# * Every injected error class is flagged with its own kind on every gold program where it applies.
# * Constrained decoding only emitted verifier-valid programs (nothing was ever caught in that interface).
# * The simulated exact-match rate agrees with the closed form: for each interface and ε, the z-score of the
#   count against independent Bernoulli trials with the per-intent analytic probabilities stays inside the 99 %
#   interval with a Bonferroni correction over the cells.

# %%
rec.check(
    "verified_programs_execute",
    int(sweep["verified_failed"].sum()),
    0,
    note="verified programs that failed when executed, all interfaces and error rates",
)

inj_rng = repro.rng(seed, 2)
inj = {k: [0, 0] for k in dsl.ERROR_KINDS}
for it in intents:
    for kind in dsl.ERROR_KINDS:
        bad = dsl.inject_error(it.program, kind, inj_rng)
        if bad is not None:
            inj[kind][0] += 1
            inj[kind][1] += kind in {e.kind for e in dsl.verify(bad).errors}
print(pd.DataFrame(inj, index=["injected", "flagged"]).T.to_string())
rec.check(
    "injected_errors_caught",
    min(f / n for n, f in inj.values()),
    1.0,
    note=f"{len(inj)} error classes, each flagged with its own kind on every program "
    "it applies to",
)

# %%
n_constrained_invalid = int(sweep.loc[sweep.iface == "constrained", "caught"].sum())
analytic = {
    "sql": lambda e: (1 - e / 10) * (1 - e) ** L_sql,
    "dsl": lambda e: (1 - e / 10) * (1 - e) ** L_dsl,
    "constrained": lambda e: (1 - e) ** L_free,
}
n_cells = len(INTERFACES) * len(eps_grid)
z_crit = stats.norm.ppf(1 - 0.01 / (2 * n_cells))
table = []
for iface in INTERFACES:
    for eps in eps_grid:
        s = sweep[(sweep.iface == iface) & (sweep.eps == eps)]
        p = analytic[iface](eps)[s["intent"].to_numpy()]
        table.append(
            dict(
                interface=INTERFACES[iface],
                eps=eps,
                simulated=s["exact"].mean(),
                analytic=p.mean(),
                z=dsl.binomial_z(int(s["exact"].sum()), p),
                success_K0=(s["success_at"] == 0).mean(),
                success_K=s["success_at"].notna().mean(),
                invalid_executed=s["invalid_executed"].sum(),
                caught=s["caught"].sum(),
                harmful=s["harmful"].sum(),
            )
        )
res = pd.DataFrame(table)
display(res.round(3))
rec.check(
    "simulation_matches_analytic",
    float(res["z"].abs().max()),
    float(z_crit),
    op="<=",
    note=f"max |z| over {n_cells} cells vs the Bonferroni 99% bound",
)

# %% [markdown]
# ### Success vs per-decision error
#
# Left: exact-match rate of the first action, simulated (dots) against the closed form (lines). Right: the task
# success (correct result) with no retry and with `retries` verifier-guided retries.

# %%
fig, ax = plt.subplots(1, 2, figsize=(11.5, 3.6), layout="constrained")
eps_fine = np.linspace(0, max(eps_grid), 60)
for c, iface in zip(plotting.PALETTE, INTERFACES):
    r = res[res.interface == INTERFACES[iface]]
    ax[0].plot(
        eps_fine,
        [analytic[iface](e).mean() for e in eps_fine],
        color=c,
        label=INTERFACES[iface],
    )
    ax[0].plot(r["eps"], r["simulated"], "o", color=c)
    ax[1].plot(
        r["eps"], r["success_K0"], "o-", color=c, label=f"{INTERFACES[iface]}, no retry"
    )
    ax[1].plot(
        r["eps"],
        r["success_K"],
        "s--",
        color=c,
        label=f"{INTERFACES[iface]}, {retries} retries",
    )
ax[0].set(
    xlabel="per-decision error ε",
    ylabel="first action = gold",
    title="closed form (lines) vs simulation",
)
ax[1].set(xlabel="per-decision error ε", ylabel="correct result", title="task success")
ax[0].legend()
ax[1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
plt.show()

r_mid = res.set_index(["interface", "eps"])
e_mid = eps_grid[len(eps_grid) // 2]
display(
    Markdown(
        f"**Reading the figure.** At ε = {e_mid}, the first action is right for "
        + ", ".join(
            f"{name} {r_mid.loc[(name, e_mid), 'success_K0']:.0%}"
            for name in INTERFACES.values()
        )
        + f" of the episodes, and with {retries} retries for "
        + ", ".join(
            f"{name} {r_mid.loc[(name, e_mid), 'success_K']:.0%}"
            for name in INTERFACES.values()
        )
        + ". The DSL needs fewer decisions than SQL, so fewer of them go wrong, "
        "and the verifier turns wrong "
        "decisions into caught errors that a retry of one token can repair. "
        "Every error of constrained decoding is "
        "a valid but wrong program that no check notices, so retries cannot help it"
        + (
            " and it falls behind the verifier with retries."
            if r_mid.loc[(INTERFACES["constrained"], e_mid), "success_K"]
            < r_mid.loc[(INTERFACES["dsl"], e_mid), "success_K"]
            else "."
        )
    )
)

# %% [markdown]
# ### Where do invalid actions end up?
#
# For each interface: invalid actions attempted, the share caught before execution, and destructive statements
# that reached the database (all error rates together).

# %%
inv = (
    sweep.groupby("iface")[["invalid_executed", "caught", "harmful"]]
    .sum()
    .reindex(list(INTERFACES))
)
inv["attempted invalid"] = inv["invalid_executed"] + inv["caught"]
inv["share caught before execution"] = inv["caught"] / inv["attempted invalid"].replace(
    0, np.nan
)
inv.index = [INTERFACES[i] for i in inv.index]
display(inv)
share_caught_dsl = float(inv.loc["DSL + verifier", "share caught before execution"])
share_caught_sql = float(
    np.nan_to_num(inv.loc["free SQL", "share caught before execution"])
)

# %% [markdown]
# The slider below shows, for each error rate, where the episodes of each interface end: correct on the first
# try, correct after a retry, a wrong result that no check noticed (a valid but wrong action), an invalid action
# that reached the database, or rejected every time.


# %%
def outcomes(eps):
    out = {}
    for iface in INTERFACES:
        s = sweep[(sweep.iface == iface) & (sweep.eps == eps)]
        first = (s.success_at == 0).mean()
        later = (s.success_at > 0).mean()
        invalid_run = ((s.invalid_executed > 0) & s.success_at.isna()).mean()
        rejected = (
            (s.caught > 0)
            & (s.invalid_executed == 0)
            & s.success_at.isna()
            & (s.caught == retries + 1)
        ).mean()
        out[INTERFACES[iface]] = [
            first,
            later,
            1 - first - later - invalid_run - rejected,
            invalid_run,
            rejected,
        ]
    return out


OUTCOME_NAMES = [
    "correct, first try",
    "correct after retries",
    "wrong result, unnoticed",
    "invalid action executed",
    "rejected every time",
]


def draw_outcomes(fig, eps):
    ax = fig.add_subplot(111)
    o = outcomes(eps)
    left = np.zeros(len(o))
    for k, (name, c) in enumerate(zip(OUTCOME_NAMES, plotting.PALETTE)):
        vals = np.array([v[k] for v in o.values()])
        ax.barh(list(o), vals, left=left, color=c, label=name)
        left += vals
    ax.set(xlim=(0, 1), xlabel="share of episodes")
    ax.legend(fontsize=7, loc="lower right", ncol=2)


plotting.static_slider(eps_grid, draw_outcomes, figsize=(8, 3.2), label="ε", fmt="{}")

# %% [markdown]
# Live (Jupyter or Colab): type a DSL program; the verifier answers, and a verified program is compiled and run.


# %%
def try_program(
    program: str = (
        "from orders join products select avg orders.total by products.category "
        "order desc"
    ),
):
    v = dsl.verify(program.split())
    if not v.ok:
        for e in v.errors:
            print("rejected:", e)
        return
    sql = dsl.compile_sql(program.split())
    print("SQL:", " ".join(sql))
    print(dsl.execute(con, sql))


plotting.live_controls(
    try_program,
    program="from orders join products select avg orders.total by products.category "
    "order desc",
)

# %% [markdown]
# ## Case 2: planning with precondition masking
#
# Blocksworld with `bw_n` blocks. The raw action space is every `move(x, y)` (y a block or the table), `n²`
# actions; the plan verifier checks the preconditions (x clear, y clear, x not already there) and masks the
# actions that fail. Two measurements: breadth-first search with and without the mask (same optimal plan, the
# raw search sends invalid moves to the simulator), and a noisy planner that takes an optimal move with
# probability `1 − ε` and otherwise a random action from its action space. A raw invalid action reaches the
# simulator and ends the episode; a masked random action is a valid detour the planner can recover from.

# %%
states = dsl.bw_states(bw_n)
raw_actions = dsl.bw_raw_actions(bw_n)
graph = dsl.bw_graph(bw_n)  # the verifier-valid moves of every state
valid_per_state = np.array([len(graph[s]) for s in states])
print(
    f"{len(states)} states, raw branching {len(raw_actions)}, valid branching "
    f"mean {valid_per_state.mean():.2f} "
    f"(min {valid_per_state.min()}, max {valid_per_state.max()})"
)

rng = repro.rng(seed, 3)
bfs = []
for _ in range(bw_bfs_pairs):
    start, goal = (states[i] for i in rng.choice(len(states), 2, replace=False))
    plan_r, exp_r, inv_r = dsl.bw_bfs(start, goal, masked=False)
    plan_m, exp_m, inv_m = dsl.bw_bfs(start, goal, masked=True)
    bfs.append(
        dict(
            plan_raw=len(plan_r),
            plan_masked=len(plan_m),
            expanded=exp_r,
            invalid_raw=inv_r,
            invalid_masked=inv_m,
        )
    )
bfs = pd.DataFrame(bfs)
assert (bfs.plan_raw == bfs.plan_masked).all(), (
    "masking changed the optimal plan length"
)
print(bfs.describe().loc[["mean", "max"]].round(1).to_string())

bw_rows, dist_cache = [], {}
for e_i, eps in enumerate(eps_grid):
    for masked in (False, True):
        rng = repro.rng(seed, 4, e_i, int(masked))
        for _ in range(bw_episodes):
            start, goal = (states[i] for i in rng.choice(len(states), 2, replace=False))
            if goal not in dist_cache:
                dist_cache[goal] = dsl.bw_distances(goal, graph)
            ok, n_inv, _ = dsl.bw_episode(
                start, goal, dist_cache[goal], eps, masked, rng, graph=graph
            )
            bw_rows.append(dict(eps=eps, masked=masked, success=ok, invalid=n_inv))
bw = pd.DataFrame(bw_rows).groupby(["eps", "masked"]).mean().unstack()
display(bw.round(3))

fig, ax = plt.subplots(figsize=(6.4, 3.4))
ax.plot(
    eps_grid, bw["success"][False], "o-", label="raw moves (invalid move = failure)"
)
ax.plot(eps_grid, bw["success"][True], "s-", label="verifier-masked moves")
ax.set(
    xlabel="per-decision error ε",
    ylabel="goal reached",
    title=f"Blocksworld, {bw_n} blocks",
    ylim=(0, 1.02),
)
ax.legend()
plt.show()

# %% [markdown]
# ## Case 3: learning from sparse success vs from the verifier
#
# A learner that must *discover* a program from outcomes alone. The policy is tabular: one softmax over the DSL
# tokens (and END) per output position, trained with REINFORCE and the batch mean as baseline, to write the
# program for one request. This is a stand-in for an LLM fine-tuned by RL, small enough to run many times. Three
# arms with the same budget and learning rate:
#
# * **sparse**: reward 1 when the executed result is correct, else 0;
# * **verifier reward**: the same plus the verifier's dense feedback, `0.5 × (tokens before the first error) / <!-- paper -->
#   (L + 1)`;
# * **verifier filter**: the sparse reward, but tokens are sampled only among verifier-valid continuations.
#
# The learning rate (20) was picked from two values (5, 20) tried on the verifier-reward arm; the sparse arm
# cannot learn at any rate until it samples a success, since every advantage is zero before that. "Steps to
# 50 %" is the first step whose mean success over the last 20 steps reaches 0.5; only full windows count (the <!-- paper -->
# helper `steps_to_level` once averaged the first 1–19 steps too, and a lucky first batch then "reached" the
# level at step 1–19 by chance), so no run can reach it before step 20.

# %%
rl_targets = [it for it in intents if len(it.program) <= 7][:rl_intents]
curves = {arm: [] for arm in dsl.ARMS}
for k, it in enumerate(rl_targets):
    print("target:", " ".join(it.program))
    for arm in tqdm(dsl.ARMS, desc=f"intent {k}", leave=False):
        curves[arm].append(
            dsl.reinforce_program(
                con, it, arm, rl_steps, rl_batch, lr=rl_lr, seed=seed + k, cache=cache
            )
        )
level = 0.5
reach = {
    arm: [dsl.steps_to_level(c["success"], level) for c in curves[arm]]
    for arm in dsl.ARMS
}
print(
    pd.DataFrame(
        reach, index=[f"intent {k}" for k in range(len(rl_targets))]
    ).to_string()
)
n_filter_invalid = int(
    sum(((1 - c["valid"]) * rl_batch).sum() for c in curves["verifier_filter"])
)

# %%
fig, ax = plt.subplots(1, 2, figsize=(10, 3.4))
for c, arm in zip(plotting.PALETTE, dsl.ARMS):
    for j, cur in enumerate(curves[arm]):
        w = max(1, rl_steps // 50)
        steps_axis = np.arange(1, rl_steps + 1)
        ax[0].plot(
            steps_axis,
            cur["success"],
            color=c,
            alpha=0.6,
            lw=1,
            label=arm if j == 0 else None,
        )
        ax[1].plot(
            steps_axis[w - 1 :],
            np.convolve(cur["valid"], np.ones(w) / w, mode="valid"),
            color=c,
            alpha=0.8,
            label=arm if j == 0 else None,
        )
ax[0].axhline(level, color="grey", lw=0.8)
ax[0].set(
    xlabel="REINFORCE step (log scale)",
    ylabel="sampled success rate",
    title="correct result",
    xscale="log",
)
ax[1].set(
    xlabel="REINFORCE step", ylabel="sampled valid rate", title="program verifies"
)
ax[0].legend()
plt.show()

# %% tags=["remove-input"]
tail = max(1, rl_steps // 10)
final = {
    arm: (
        np.mean([c["success"][-tail:].mean() for c in curves[arm]]),
        np.mean([c["valid"][-tail:].mean() for c in curves[arm]]),
    )
    for arm in dsl.ARMS
}
sparse_hits = int(sum(c["success"].sum() * rl_batch for c in curves["sparse"]))
display(
    Markdown(
        f"**Reading the curves.** Over the last {tail} steps (mean over the "
        "programs), success / valid rates are: "
        + "; ".join(f"{arm} {v[0]:.2f} / {v[1]:.2f}" for arm, v in final.items())
        + f". The sparse learner sampled {sparse_hits} correct programs in total; "
        "without a success every advantage "
        "is zero and the policy does not move. The dense verifier reward rewards "
        "*validity*, which says nothing "
        "about which valid program is wanted; the filter confines sampling to "
        "valid programs, where the sparse "
        "reward can find the right one."
    )
)

# %%
rec.check(
    "constrained_decoding_valid",
    n_constrained_invalid + n_filter_invalid,
    0,
    note="invalid programs emitted under constrained decoding (case 1 sweep + case 3 "
    "filter arm)",
)

# %% [markdown]
# ## Case 4: a learned agent
#
# Cases 1–3 set the agent's errors by hand, so their gaps between interfaces follow from the error model we chose.
# Here the errors come from a **trained model**: a small decoder-only transformer (`helpers.nn`, 2 layers, width
# 64) reads the request's words and writes the action token by token. One model per interface and seed learns
# request → DSL program, another request → SQL, on the same **300 training intents**; we score them on
# `agent_heldout` **held-out intents** (the checkpoint's own held-out set first, then more drawn from the same
# stream, enough to resolve a gap of a few points) whose programs never appear in training (held-out success = the
# executed rows equal the gold rows). Nothing about the interfaces is built into the learner: both see the same requests and the same
# training budget (1000 AdamW steps of 32 examples); the SQL model has more tokens to write, the DSL model fewer.
#
# Four ways to answer, all greedy:
#
# * **free decoding**: the model's argmax token at every step;
# * **constrained decoding** (DSL only): the logits are masked to the verifier's valid next tokens
#   (`allowed_next`), so every emitted program verifies;
# * **verifier-guided repair** (up to `agent_repairs` times): the DSL verifier names the first error's
#   position; SQL is run and **SQLite's error message names the offending token** (`near "X"`, `no such column:
#   X`), which is as much position information as SQLite gives. Both repairs do the same thing with it: ban that
#   token at that position and let the model decode again from there.
#
# The default run loads the trained weights (`data/05_dsl_harness/make_agents.py`, a few minutes on one core);
# quick mode trains tiny models live, so its numbers say nothing.

# %%
agent_cfg = dsl.checkpoint_config("agents")
if quick:
    agent_cfg.update(n_train=60, n_test=8, steps=30, d_model=32, n_layer=1, n_head=2)
agent_con = dsl.make_database(agent_cfg["db_seed"])
n_heldout = agent_cfg["n_test"] if quick else max(agent_heldout, agent_cfg["n_test"])
agent_intents = dsl.make_intents(  # one stream: the checkpoint's intents come first
    agent_con, agent_cfg["n_train"] + n_heldout, seed=agent_cfg["intent_seed"]
)
a_train = agent_intents[: agent_cfg["n_train"]]
a_test = agent_intents[agent_cfg["n_train"] :]  # case 4: every held-out request
a_test5 = a_test[: agent_cfg["n_test"]]  # case 5: the checkpoint's own held-out set
assert not {it.program for it in a_train} & {it.program for it in a_test}
agent_seeds = agent_cfg["seeds"]
agents, agent_loss = {}, {}
if quick:  # tiny models trained live: the pipeline runs, the numbers mean nothing
    for iface in dsl.AGENT_INTERFACES:
        for s in agent_seeds:
            with repro.seeded(s):
                m = dsl.make_agent(
                    iface,
                    agent_cfg["d_model"],
                    agent_cfg["n_layer"],
                    agent_cfg["n_head"],
                )
                agent_loss[iface, s] = dsl.train_agent(
                    m,
                    a_train,
                    iface,
                    agent_cfg["steps"],
                    agent_cfg["batch"],
                    agent_cfg["lr"],
                    seed=s,
                )
            agents[iface, s] = m
else:  # the models of seeds seed, seed + 1, seed + 2 (seed 0: the committed config)
    agent_cfg = scripts.with_seeds(agent_cfg, scripts.model_seeds(seed))
    agent_seeds = agent_cfg["seeds"]
    ck = checkpoints.load("05_dsl_harness", "agents", config=agent_cfg)
    for iface in dsl.AGENT_INTERFACES:
        for s in agent_seeds:
            m = dsl.make_agent(
                iface, agent_cfg["d_model"], agent_cfg["n_layer"], agent_cfg["n_head"]
            )
            pre = f"{iface}/{s}."
            m.load_state_dict(
                {k[len(pre) :]: v for k, v in ck.tensors.items() if k.startswith(pre)}
            )
            m.eval()
            agents[iface, s] = m
    checkpoints.plot_history(ck.manifest, logy=True)
    plt.show()
print(
    f"{len(a_train)} training and {len(a_test)} held-out intents; "
    f"{agents['dsl', agent_seeds[0]].n_params():,} parameters (DSL model), "
    f"{agents['sql', agent_seeds[0]].n_params():,} (SQL model)"
)

# %% [markdown]
# The repair loop, as it runs for the DSL (the SQL branch differs only in where the position comes from):
#
# ```python
# v = dsl.verify(out)                                    # structured errors with token positions
# pos = min(e.position for e in v.errors)                # the first one
# banned.setdefault(pos, set()).add(out[pos])            # that token is not allowed there again
# out = dsl.decode(model, intent, "dsl", prefix=out[:pos], banned=banned)   # decode on from there
# ```
#
# Each answer runs once with `agent_repairs` repairs; its success *without* repair is read off the same run
# (correct at the first attempt).


# %%
answers = {}  # every answer, for the error analysis below


def run_arm(iface, constrained, disabled=()):
    """Per seed: held-out success without / with repair, executed-invalid share."""
    out = []
    for s in agent_seeds:
        res = [
            dsl.agent_answer(
                agents[iface, s],
                agent_con,
                it,
                iface,
                constrained,
                agent_repairs,
                disabled,
            )
            for it in a_test
        ]
        answers[iface, constrained, tuple(disabled), s] = res
        out.append(
            dict(
                seed=s,
                success_K0=np.mean([r.success and r.repairs == 0 for r in res]),
                success_K=np.mean([r.success for r in res]),
                executed_invalid=np.mean([r.executed_invalid for r in res]),
            )
        )
    return pd.DataFrame(out)


agent_arms = {
    "SQL, free decoding": ("sql", False),
    "DSL, free decoding": ("dsl", False),
    "DSL, constrained decoding": ("dsl", True),
}
agent_res = {
    name: run_arm(*arm) for name, arm in tqdm(agent_arms.items(), desc="learned agent")
}
agent_table = pd.DataFrame(
    {
        name: {
            "success, no repair": df.success_K0.mean(),
            f"success, ≤ {agent_repairs} repairs": df.success_K.mean(),
            "executed invalid": df.executed_invalid.mean(),
            "per-seed success (repair)": ", ".join(f"{x:.2f}" for x in df.success_K),
        }
        for name, df in agent_res.items()
    }
).T
display(agent_table)

# %%
fig, ax = plt.subplots(figsize=(8, 3.2))
xs = np.arange(len(agent_res))
for j, (col, lab) in enumerate(
    [("success_K0", "no repair"), ("success_K", "with repair")]
):
    means = [df[col].mean() for df in agent_res.values()]
    ax.bar(xs + (j - 0.5) * 0.38, means, 0.38, label=lab, alpha=0.8)
    for i, df in enumerate(agent_res.values()):
        ax.plot(np.full(len(df), i + (j - 0.5) * 0.38), df[col], "k.", ms=4)
ax.set_xticks(xs, list(agent_res))
ax.set_ylabel(f"held-out success ({len(a_test)} intents)")
ax.set_ylim(0, 1)
ax.legend(loc="lower right")
ax.set_title(
    "A learned agent behind each interface (bars: mean of 3 seeds; dots: seeds)"
)
plt.show()

# %% [markdown]
# ### Where the learned agents go wrong
#
# A diagnosis of the failures above: for every held-out answer that is still wrong after repair, the first token
# where it departs from the gold action, by the kind of decision that token is. Errors in columns, values and
# functions are failures to *understand* the request (no interface can catch a valid but unwanted choice);
# keywords, punctuation and join keys are failures of *form*, which only the SQL agent has to get right.

# %%
KIND = {
    "kw": "keyword / clause",
    "punct": "punctuation",
    "table": "table",
    "func": "function",
    "col": "column",
    "op": "operator",
    "text": "text value",
    "int": "number",
    "dir": "order direction",
}
SQL_FUNCS = ("COUNT", "SUM", "AVG", "MIN", "MAX")


def miss_kind(out, gold, iface):
    """The kind of the first gold token the output gets wrong."""
    for i, g in enumerate(gold):
        if i >= len(out) or out[i] != g:
            if iface == "dsl":
                return KIND[dsl._lex(g)]
            if g in SQL_FUNCS:
                return "function"
            if g.endswith(".id") or g.endswith("_id"):
                return "join key"
            return KIND[dsl._sql_class(g)]
    return "too long"


miss = []
for name, (iface, constrained) in agent_arms.items():
    for s in agent_seeds:
        for it, r in zip(a_test, answers[iface, constrained, (), s]):
            if not r.success:
                gold = list(it.program if iface == "dsl" else it.sql)
                miss.append(dict(arm=name, kind=miss_kind(r.output, gold, iface)))
miss = pd.DataFrame(miss, columns=["arm", "kind"])
miss_table = (
    pd.crosstab(miss.arm, miss.kind) / len(agent_seeds) if len(miss) else pd.DataFrame()
)
display(Markdown("Failures per seed, by the first wrong decision:"))
display(miss_table.round(1))

# %% tags=["remove-input"]
UNDERSTAND = ("operator", "number", "text value", "column", "function", "table")
FORM = ("keyword / clause", "punctuation", "join key", "order direction")
if len(miss):
    share_u = float(miss.kind.isin(UNDERSTAND).mean())
    sql_miss = miss[miss.arm == "SQL, free decoding"]
    sql_form = float(sql_miss.kind.isin(FORM).mean()) if len(sql_miss) else 0.0
    top = ", ".join(miss.kind.value_counts().index[:3])
    display(Markdown(
        f"**Reading the tables.** {share_u:.0%} of the learned agents' remaining "
        "failures start at a valid but unwanted operator, value, column, function or "
        f"table (the most common kinds overall: {top}): misreadings of the "
        "request, which no grammar, schema or type check can "
        "catch, and which both interfaces share. Form errors (keywords, punctuation, "
        f"join keys, order direction) start {sql_form:.0%} of the SQL agent's failures;"
        " that is the share the verifier and the constrained decoder can act on, and "
        "the claims below measure how much of it they recover, seed by seed."
    ))

# %% [markdown]
# ### Bits per intent
#
# Compression, measured on what a learner pays rather than on counting strings: the bits the trained model needs
# to write the gold action of a held-out intent, $-\sum_t \log_2 p(a_t \mid \text{request}, a_{<t})$, for the SQL
# the DSL compiles to (grammatical SQL of the same query family) and for the DSL program. The SQL is a
# deterministic function of the program, so a perfect model would pay the same bits for both; the ratio measures
# how much of the longer surface form a model trained on 300 examples has *not* learned to predict.

# %%
bits = {
    iface: np.array(
        [
            dsl.bits_per_intent(agents[iface, s], a_test, iface).mean()
            for s in agent_seeds
        ]
    )
    for iface in dsl.AGENT_INTERFACES
}
bits_ratio = bits["sql"] / bits["dsl"]
display(
    pd.DataFrame(
        {
            "DSL bits/intent": bits["dsl"],
            "SQL bits/intent": bits["sql"],
            "SQL ÷ DSL": bits_ratio,
        },
        index=pd.Index(agent_seeds, name="seed"),
    ).round(2)
)

# %% [markdown]
# ### Verifier coverage
#
# How much of the verifier matters? We switch off one group of its checks at a time (type: `sum` over text,
# text compared with `<`; domain: a value outside the column's values; scope: a column of a table not joined, a
# join without a foreign key) and rerun the DSL agent with constrained decoding and repair: the switched-off
# errors are no longer masked or repaired, and reach SQLite. First, what SQLite itself does with each of these
# errors injected into the held-out gold programs: the errors it *accepts* return wrong rows silently.

# %%
sem_rows = []
inj_rng4 = repro.rng(seed, 4)
all_off = tuple(k for g in dsl.COVERAGE_GROUPS.values() for k in g)
for group, kinds in dsl.COVERAGE_GROUPS.items():
    for kind in kinds:
        n = accepted = flagged = 0
        for it in a_test:
            bad = dsl.inject_error(list(it.program), kind, inj_rng4)
            if bad is None:
                continue
            n += 1
            flagged += not dsl.verify(bad).ok
            accepted += dsl.execute(agent_con, dsl.compile_sql(bad, all_off))[0] == "ok"
        sem_rows.append(
            dict(
                group=group,
                error=kind,
                injected=n,
                verifier_recall=flagged / max(n, 1),
                sqlite_recall=1 - accepted / max(n, 1),
            )
        )
sem = pd.DataFrame(sem_rows)
display(sem.round(2))

cov_res = {"full verifier": agent_res["DSL, constrained decoding"]}
for group, kinds in tqdm(dsl.COVERAGE_GROUPS.items(), desc="coverage"):
    cov_res[f"{group} checks off"] = run_arm("dsl", True, kinds)
cov_table = pd.DataFrame(
    {
        k: {
            "success (repair)": df.success_K.mean(),
            "executed invalid": df.executed_invalid.mean(),
            "per-seed success": ", ".join(f"{x:.2f}" for x in df.success_K),
        }
        for k, df in cov_res.items()
    }
).T
display(cov_table)

# %% [markdown]
# ## Case 5: structured credit for a request-conditioned policy
#
# Case 3 learned one program at a time with a tabular policy. Here the learner is the case-4 architecture (a
# smaller transformer, width 32), which reads the request and writes the program token by token, and the
# question is the paper's third mechanism: does the verifier's *structured* error, which names the token where
# a program went wrong, make reinforcement learning faster than a bare success signal?
#
# Setting (ours). A policy is first trained by supervision on only `n_sft` = 200 labelled intents (1000 steps),
# enough to write the DSL's shape but not reliably: sampled at temperature 1 on new requests, many of its
# programs are rejected by the verifier or wrong. It is then trained by REINFORCE on the **other 100 training
# requests**, with no gold program, only the outcome (the executed rows equal the requested rows). Four
# arms start from the same warm start, see the same requests in the same order, and have the same budget
# (`rl_steps` steps of 32 sampled programs, Adam, learning rate 1e-3):
#
# * **sparse**: every token of a program gets the advantage `R − mean(R)` (R = 1 for a correct result);
# * **prefix reward**: the same with `R + 0.5 × (valid prefix) / (length + 1)`, one number for the program (the <!-- paper -->
#   verifier's feedback as a dense reward, as in case 3);
# * **filter**: the sparse reward, but tokens are sampled only among verifier-valid continuations (constrained
#   decoding during training);
# * **per-token credit**: a verified program is scored as in sparse; in a rejected program **only the token at
#   the verifier's error position** gets credit, `−1`; the valid prefix before it is not blamed and the tokens
#   after it, which followed a broken prefix, get nothing.
#
# The measured quantity is the number of steps until the sampled success rate (mean over the last 20 full
# steps, 640 samples) reaches 50 %. The window must be full: with the warm start above, a run starts not far
# below the level, and a mean over its first one or two batches (64 samples) can cross 50 % by chance, so
# `steps_to_level` counts full windows only (as in case 3). A run that never gets
# there within the budget is **censored**: we count it as the full budget and say so. The warm start and the
# budget come from a diagnosis (below): a first build with 100 labelled intents and 300 steps censored every
# run, so we measured why before changing anything. The weights (float16) and learning curves come from
# `data/05_dsl_harness/make_credit.py` (30–40 minutes on one core); quick mode trains a tiny version live.
#
# The per-token advantages, as the learner uses them (`token_advantages`):

# %%
src = inspect.getsource(dsl.token_advantages)
print(src[src.index("    n_tok = ") :])

# %%
credit_cfg = dsl.checkpoint_config("credit")
if quick:
    credit_cfg.update(
        seeds=[0],
        n_sft=40,
        sft_steps=60,
        rl_steps=20,
        rl_batch=8,
        d_model=16,
        n_layer=1,
    )
for k in ("db_seed", "intent_seed", "n_train", "n_test"):
    credit_cfg[k] = agent_cfg[k]  # the same requests as case 4
credit_sft = a_train[: credit_cfg["n_sft"]]
credit_pool = a_train[credit_cfg["n_sft"] :]
credit_seeds = credit_cfg["seeds"]
credit_models, credit_curves = {}, {}


def credit_policy():
    return dsl.make_agent(
        "dsl", credit_cfg["d_model"], credit_cfg["n_layer"], credit_cfg["n_head"]
    )


# %%
if quick:  # tiny policies trained live: the pipeline runs, the numbers mean nothing
    credit_cache: dict = {}
    for s in credit_seeds:
        with repro.seeded(s):
            warm = credit_policy()
            dsl.train_agent(
                warm,
                credit_sft,
                "dsl",
                credit_cfg["sft_steps"],
                credit_cfg["sft_batch"],
                credit_cfg["sft_lr"],
                seed=s,
            )
        credit_models["warm", s] = warm
        for arm in dsl.CREDIT_ARMS:
            m = credit_policy()
            m.load_state_dict(warm.state_dict())
            credit_curves[arm, s] = dsl.reinforce_agent(
                m,
                agent_con,
                credit_pool,
                arm,
                credit_cfg["rl_steps"],
                credit_cfg["rl_batch"],
                credit_cfg["rl_lr"],
                seed=s,
                penalty=credit_cfg["penalty"],
                cache=credit_cache,
            )
            credit_models[arm, s] = m

# %%
if not quick:  # the default run: the policies and curves of make_credit.py
    credit_cfg = scripts.with_seeds(credit_cfg, scripts.model_seeds(seed))
    credit_seeds = credit_cfg["seeds"]
    ck5 = checkpoints.load("05_dsl_harness", "credit", config=credit_cfg)
    hist5 = ck5.manifest["history"]
    for s in credit_seeds:
        for arm in ("warm", *dsl.CREDIT_ARMS):
            m = credit_policy()
            pre = f"{arm}/{s}."
            m.load_state_dict(
                {
                    k[len(pre) :]: v.float()
                    for k, v in ck5.tensors.items()
                    if k.startswith(pre)
                }
            )
            m.eval()
            credit_models[arm, s] = m
            if arm != "warm":
                # a manifest keeps at most 500 points per curve: a point is the mean
                # of the steps since the previous one, so spread it back over them
                credit_curves[arm, s] = {
                    q: np.repeat(
                        hist5[f"{q}/{arm}/{s}"]["value"],
                        np.diff([0, *hist5[f"{q}/{arm}/{s}"]["step"]]),
                    )
                    for q in ("success", "valid")
                }

# %%
credit_budget = credit_cfg["rl_steps"]


def full_reach(curve, level=0.5, window=20):
    """First step whose mean over the last `window` steps reaches `level` (full
    windows only; None: never)."""
    return dsl.steps_to_level(curve, level, window)


credit_reach = {
    arm: [full_reach(credit_curves[arm, s]["success"]) for s in credit_seeds]
    for arm in dsl.CREDIT_ARMS
}
display(
    pd.DataFrame(
        {
            arm: ["censored" if r is None else r for r in credit_reach[arm]]
            for arm in dsl.CREDIT_ARMS
        },
        index=pd.Index(credit_seeds, name="seed"),
    ).T.rename_axis(f"steps to 50 % success (budget {credit_budget})")
)

# %%
fig, ax = plt.subplots(1, 2, figsize=(11, 3.4), layout="constrained")
w5 = min(20, credit_budget)
for c, arm in zip(plotting.PALETTE, dsl.CREDIT_ARMS):
    for j, s in enumerate(credit_seeds):
        for a_, q in zip(ax, ("success", "valid")):
            y = np.convolve(credit_curves[arm, s][q], np.ones(w5) / w5, mode="valid")
            a_.plot(
                np.arange(w5, credit_budget + 1),
                y,
                color=c,
                lw=1,
                alpha=0.8,
                label=arm.replace("_", " ") if j == 0 else None,
            )
ax[0].axhline(0.5, color="grey", lw=0.8)
ax[0].set(
    xlabel="REINFORCE step",
    ylabel="sampled success (running mean)",
    title="correct result",
)
ax[1].set(
    xlabel="REINFORCE step",
    ylabel="sampled valid rate (running mean)",
    title="program verifies",
)
ax[0].legend()
plt.show()

# %% [markdown]
# Held-out success of the trained policies (greedy, free decoding, no repair) on the checkpoint's own held-out
# requests (the first of case 4's), next to the warm start they all began from:

# %%
credit_answers = {
    (arm, s): [
        dsl.agent_answer(credit_models[arm, s], agent_con, it, "dsl") for it in a_test5
    ]
    for arm in ("warm", *dsl.CREDIT_ARMS)
    for s in credit_seeds
}
credit_test = {
    arm: [np.mean([r.success for r in credit_answers[arm, s]]) for s in credit_seeds]
    for arm in ("warm", *dsl.CREDIT_ARMS)
}
credit_final = {
    arm: [credit_curves[arm, s]["success"][-w5:].mean() for s in credit_seeds]
    for arm in dsl.CREDIT_ARMS
}
credit_valid = {
    arm: [credit_curves[arm, s]["valid"][-w5:].mean() for s in credit_seeds]
    for arm in dsl.CREDIT_ARMS
}
display(
    pd.DataFrame(
        {
            "sampled success, last 20 steps": {
                a: np.mean(v) for a, v in credit_final.items()
            },
            "sampled valid, last 20 steps": {
                a: np.mean(v) for a, v in credit_valid.items()
            },
            "held-out success (greedy)": {
                a: np.mean(v) for a, v in credit_test.items()
            },
        }
    ).round(3)
)

# %% tags=["remove-input"]
# Diagnosis: of the failed samples of the last 20 steps, the share that verified (valid
# but wrong), which no error position can point at.
fail_valid = {
    a: np.mean(
        [(v - f) / max(1 - f, 1e-9) for v, f in zip(credit_valid[a], credit_final[a])]
    )
    for a in dsl.CREDIT_ARMS
}
n_cens = {a: sum(r is None for r in credit_reach[a]) for a in dsl.CREDIT_ARMS}
tc, sp = "token_credit", "sparse"
display(
    Markdown(
        "**Reading the curves.** Runs that never reached 50 % within the "
        f"{credit_budget} steps: "
        + ", ".join(
            f"{a.replace('_', ' ')} {n_cens[a]}/{len(credit_seeds)}"
            for a in dsl.CREDIT_ARMS
        )
        + ". Over the last 20 steps the share of failed samples that *verified* "
        "(valid but wrong, where the verifier names no position) is "
        + ", ".join(
            f"{a.replace('_', ' ')} {fail_valid[a]:.0%}" for a in dsl.CREDIT_ARMS
        )
        + ". "
        + (
            "Per-token credit raises the valid rate faster than the sparse reward "
            f"({np.mean(credit_valid[tc]):.2f} vs {np.mean(credit_valid[sp]):.2f}) "
            "but not the success rate "
            f"({np.mean(credit_final[tc]):.2f} vs {np.mean(credit_final[sp]):.2f}): "
            "once programs verify, what is left is choosing the right columns and "
            "values, and the error position says nothing about that."
            if np.mean(credit_valid[tc]) > np.mean(credit_valid[sp])
            and np.mean(credit_final[tc]) <= np.mean(credit_final[sp])
            else "Per-token credit ends at a success rate of "
            f"{np.mean(credit_final[tc]):.2f} and a valid rate of "
            f"{np.mean(credit_valid[tc]):.2f}, the sparse reward at "
            f"{np.mean(credit_final[sp]):.2f} and {np.mean(credit_valid[sp]):.2f}."
        )
        + " Valid rate, first → last 100 steps, per seed: "
        + "; ".join(
            f"{a.replace('_', ' ')} "
            + ", ".join(
                f"{credit_curves[a, q]['valid'][:100].mean():.2f} → "
                f"{credit_curves[a, q]['valid'][-100:].mean():.2f}"
                for q in credit_seeds
            )
            for a in (sp, tc)
        )
        + ". The rule's arithmetic explains a slow valid rate: in a rejected program "
        "per-token credit puts −1 on one token, where the sparse reward puts "
        "−mean(R) on every token (about −mean(R) × length in all), while a valid but "
        "wrong program is still pushed down on every token in both; relative to the "
        "sparse reward it blames invalid programs less than valid wrong ones."
    )
)

# %%
rec.check(
    "credit_filter_samples_valid",
    float(min(credit_curves["filter", s]["valid"].min() for s in credit_seeds)),
    1.0,
    note="the filter arm's sampled valid rate at every step (constrained sampling)",
)

# %% [markdown]
# ### Diagnosis: censored runs, and why RL lowers held-out success
#
# The first build of this checkpoint (100 labelled intents, 300 steps) censored every run, and every arm
# ended *below* its warm start's held-out greedy success. Before changing anything we measured why, with
# `data/05_dsl_harness/sweep_credit.py`, whose grid was fixed before any of its outcomes were seen (it writes
# `credit_sweep.json`: numbers and curves, no weights; about 20 CPU minutes):
#
# * **A, the checkpoint's policies**, no training: greedy success on the supervised intents, on the RL requests
#   and on the held-out requests (free and constrained decoding), the bits a policy needs to write the gold
#   program of a held-out request, and its per-token entropy there; for the first build and the current one;
# * **B, a small sweep** (seed 0, 600 steps, the rest as the first build): the warm start's strength (100
#   or 200 labelled intents; the RL requests are the rest of the 300), the invalid-program penalty of
#   per-token credit (1 or 0.25), and a **gold-departure oracle**: a failed sample gets `−1` at the *first <!-- paper -->
#   token where it leaves the gold program*, valid or not, and nothing elsewhere. No learner has the gold
#   program; the oracle is an upper bound on what credit at one position can give, so if it does not reach
#   50 % no error position will. Every run also counts
#   the rewarded samples that are **not** the gold program (a correct result reached by another program).
#
# Next to them, from the held-out decodes above: how many different programs a policy writes for the 60
# different requests, and how many of its correct answers are the gold program.

# %%
sweep_path = checkpoints.fetch("05_dsl_harness", "credit_sweep.json")
sweep = json.loads(sweep_path.read_text())
A_COLS = [
    "greedy: supervised intents",
    "greedy: RL requests",
    "greedy: held-out",
    "greedy: held-out, constrained",
    "gold bits: held-out",
    "gold bits: RL requests",
    "entropy (nats/token)",
]


def build_table(evals):
    t = pd.DataFrame(
        {
            arm: pd.DataFrame([evals[f"{arm}/{q}"] for q in (0, 1, 2)]).mean()
            for arm in ("warm", *dsl.CREDIT_ARMS)
        }
    ).T
    t.columns = A_COLS
    return t


def build_name(c):
    return f"{c['n_sft']} labelled intents, {c['rl_steps']} steps"


builds = {}
if "checkpoint_first" in sweep:
    builds[build_name(sweep["checkpoint_first_config"])] = build_table(
        sweep["checkpoint_first"]
    )
cur_cfg = sweep.get("checkpoint_config", {"n_sft": 100, "rl_steps": 300})
sw_a = builds[build_name(cur_cfg)] = build_table(sweep["checkpoint"])

# %%
collapse = pd.DataFrame(
    {
        "distinct held-out programs (of 60)": {
            a: np.mean(
                [
                    len({" ".join(r.output) for r in credit_answers[a, q]})
                    for q in credit_seeds
                ]
            )
            for a in ("warm", *dsl.CREDIT_ARMS)
        },
        "correct answers that are the gold program": {
            a: np.sum(
                [
                    r.success and tuple(r.output) == it.program
                    for q in credit_seeds
                    for r, it in zip(credit_answers[a, q], a_test5)
                ]
            )
            / max(1, sum(r.success for q in credit_seeds for r in credit_answers[a, q]))
            for a in ("warm", *dsl.CREDIT_ARMS)
        },
    }
)
display(
    pd.concat(builds, names=["build", "policy"])
    .round(3)
    .T.rename_axis("A: checkpoint policies, mean of seeds 0–2")
)
display(collapse.round(3).rename_axis("held-out decodes above").T)

# %%
# Hack or equivalent program? A correct held-out answer that is not the gold program
# is run, with the gold SQL, on two more databases (seeds +1, +2: a small test suite).
# A program that only matches by accident fails there; an equivalent one does not.
suite_dbs = [dsl.make_database(agent_cfg["db_seed"] + k) for k in (1, 2)]
suite_gold = [[dsl.execute(db, it.sql)[1] for db in suite_dbs] for it in a_test5]


def passes_suite(out, gold_rows):
    sql = dsl.compile_sql(out)
    return all(
        dsl.results_equal(dsl.execute(db, sql)[1], g)
        for db, g in zip(suite_dbs, gold_rows)
    )


suite = {}
for a in ("warm", *dsl.CREDIT_ARMS):
    alt = [
        passes_suite(r.output, g)
        for q in credit_seeds
        for r, it, g in zip(credit_answers[a, q], a_test5, suite_gold)
        if r.success and tuple(r.output) != it.program
    ]
    suite[a] = (len(alt), sum(alt))
n_alt = sum(v[0] for k, v in suite.items() if k != "warm")
n_alt_ok = sum(v[1] for k, v in suite.items() if k != "warm")

# %%
# The same test on what the policies write while training: two programs per RL request
# sampled at temperature 1 (the filter arm among valid continuations, as it trained).
pool_gold = [[dsl.execute(db, it.sql)[1] for db in suite_dbs] for it in credit_pool]
samp = {}  # arm: (rewarded, rewarded but not gold, of those passing the suite)
for a in ("warm", *dsl.CREDIT_ARMS):
    n_r = n_ng = n_ok = 0
    for q in credit_seeds:
        outs = dsl.sample_programs(
            credit_models[a, q], credit_pool * 2, seed=q, constrained=a == "filter"
        )
        for o, it, g in zip(outs, credit_pool * 2, pool_gold * 2):
            if not dsl.verify(o).ok:
                continue
            rows = dsl.execute(agent_con, dsl.compile_sql(o))[1]
            if dsl.results_equal(rows, it.result):
                n_r += 1
                if tuple(o) != it.program:
                    n_ng += 1
                    n_ok += passes_suite(o, g)
    samp[a] = (n_r, n_ng, n_ok)
s_r, s_ng, s_ok = (sum(samp[a][i] for a in dsl.CREDIT_ARMS) for i in range(3))
display(
    pd.DataFrame(
        {
            "correct non-gold held-out answers (greedy)": {
                a: suite[a][0] for a in suite
            },
            "… that pass the 2-database suite": {a: suite[a][1] for a in suite},
            "rewarded RL-request samples": {a: samp[a][0] for a in samp},
            "… not the gold program": {a: samp[a][1] for a in samp},
            "… of those passing the suite": {a: samp[a][2] for a in samp},
        }
    ).T.rename_axis("test suite, all seeds")
)

# %%
# What the RL policies get wrong that the warm start got right: the first gold token
# they depart from, by kind (miss_kind of case 4).
lost = pd.DataFrame(
    [
        dict(arm=a, kind=miss_kind(r.output, list(it.program), "dsl"))
        for a in dsl.CREDIT_ARMS
        for q in credit_seeds
        for w, r, it in zip(credit_answers["warm", q], credit_answers[a, q], a_test5)
        if w.success and not r.success
    ],
    columns=["arm", "kind"],
)
lost_table = (
    pd.crosstab(lost.arm, lost.kind) / len(credit_seeds)
    if len(lost)
    else pd.DataFrame()
)
display(
    Markdown(
        "Held-out requests the warm start answered and the RL policy no longer does, "
        "per seed, by the first gold token the policy departs from:"
    )
)
display(lost_table.round(1))
understand = ("column", "text value", "number", "function", "operator", "table")
lost_understand = float(lost.kind.isin(understand).mean()) if len(lost) else 0.0
# How often a request-independent program is right: the RL requests' most common result.
pool_res = pd.Series([repr(it.result) for it in credit_pool]).value_counts()
top_res_share = pool_res.iloc[0] / len(credit_pool)
shared_res = pool_res[pool_res > 1].sum() / len(credit_pool)

# %%
sw_rows = {}
for ws, arm, pen in sweep["grid"]:
    runs = [sweep["runs"].get(f"{ws}/{arm}/{pen:g}/{q}") for q in sweep["seeds"]]
    runs = [r for r in runs if r is not None]
    if not runs:
        continue
    sw_rows[ws, arm, pen] = {
        "seeds": len(runs),
        "reach 50 % by 300": sum(
            full_reach(r["success"][:300]) is not None for r in runs
        ),
        "reach 50 % by 600": sum(full_reach(r["success"]) is not None for r in runs),
        "steps to 50 %": ", ".join(
            "censored"
            if full_reach(r["success"]) is None
            else str(full_reach(r["success"]))
            for r in runs
        ),
        "best running-mean success": np.mean(
            [np.convolve(r["success"], np.ones(20) / 20, "valid").max() for r in runs]
        ),
        "sampled success, last 20": np.mean(
            [np.mean(r["success"][-20:]) for r in runs]
        ),
        "rewarded samples not gold": np.mean(
            [r["spurious"] / r["rewarded"] for r in runs]
        ),
        "greedy: held-out": np.mean([r["greedy_test"] for r in runs]),
        "greedy: supervised": np.mean([r["greedy_sft"] for r in runs]),
        "warm start greedy: held-out": np.mean(
            [sweep["runs"][f"{ws}/warm/{q}"]["greedy_test"] for q in sweep["seeds"]]
        ),
    }
sw_b = pd.DataFrame(sw_rows).T.rename_axis(["warm start", "arm", "penalty"])
display(sw_b.round(3))

# %%
fig, ax = plt.subplots(1, 2, figsize=(11, 3.4), layout="constrained", sharey=True)
for a_, ws in zip(ax, ("w100", "w200")):
    for c, (arm, pen) in zip(
        plotting.PALETTE,
        [
            ("sparse", 1.0),
            ("token_credit", 1.0),
            ("token_credit", 0.25),
            ("oracle", 1.0),
        ],
    ):
        for j, q in enumerate(sweep["seeds"]):
            r = sweep["runs"].get(f"{ws}/{arm}/{pen:g}/{q}")
            if r is None:
                continue
            y = np.convolve(r["success"], np.ones(20) / 20, "valid")
            a_.plot(
                np.arange(20, len(r["success"]) + 1),
                y,
                color=c,
                lw=1,
                label=f"{arm.replace('_', ' ')} (penalty {pen:g})" if j == 0 else None,
            )
    a_.axhline(0.5, color="grey", lw=0.8)
    a_.axvline(300, color="grey", lw=0.8, ls=":")
    a_.set(
        xlabel="REINFORCE step",
        title=f"warm start on {ws[1:]} labelled intents",
    )
ax[0].set_ylabel("sampled success (running mean)")
ax[0].legend(fontsize=8)
plt.show()

# %% tags=["remove-input"]
rl_arms = list(dsl.CREDIT_ARMS)
cens_now = {a: [r is None for r in credit_reach[a]] for a in rl_arms}
spur = sw_b["rewarded samples not gold"]
a_rl, a_w = sw_a.loc[rl_arms], sw_a.loc["warm"]
n_prog = collapse["distinct held-out programs (of 60)"]
g_share = collapse["correct answers that are the gold program"]


def sweep_line(ws):
    t = sw_b.xs(ws, level="warm start")
    return "; ".join(
        f"{arm.replace('_', ' ')}{'' if pen == 1 else f' (penalty {pen:g})'} "
        f"{r['steps to 50 %']} (best {r['best running-mean success']:.2f})"
        for (arm, pen), r in t.iterrows()
    )


orc = (
    sw_b.xs("oracle", level="arm")
    if "oracle" in sw_b.index.get_level_values(1)
    else None
)
orc100 = None if orc is None or "w100" not in orc.index else orc.loc["w100"]
txt = (
    "**Diagnosis.** *Censoring.* Steps to 50 % in the sweep (seed "
    + ", ".join(map(str, sweep["seeds"]))
    + f", {sweep['steps']} steps; best running mean in brackets). Warm start on 100 "
    f"intents: {sweep_line('w100')}. On 200 intents: "
    + (sweep_line("w200") if "w200" in sw_b.index.get_level_values(0) else "not run")
    + ". "
)
if orc100 is not None and (orc100["reach 50 % by 600"] == 0).all():
    txt += (
        "With the first build's warm start even credit at the exact token where a "
        "sample leaves the gold program stays below the level in twice the budget, so "
        "no *error position* could reach it there: the censoring was a property of the "
        "setting, not of the credit rule or a few missing steps. "
    )
txt += (
    "The verifier's position is a much weaker signal than the oracle's because most "
    "failures verify (valid but wrong), and it names no token in them.\n\n"
    "*Why RL lowers held-out success* (table A, current build). (i) Greedy success on "
    f"the RL requests goes from {a_w['greedy: RL requests']:.2f} to "
    f"{a_rl['greedy: RL requests'].min():.2f}–{a_rl['greedy: RL requests'].max():.2f}, "
    f"on held-out requests from {a_w['greedy: held-out']:.2f} to "
    f"{a_rl['greedy: held-out'].min():.2f}–{a_rl['greedy: held-out'].max():.2f}, and "
    "the gold program's bits rise on both (RL requests "
    f"{a_w['gold bits: RL requests']:.0f} → {a_rl['gold bits: RL requests'].min():.0f}–"
    f"{a_rl['gold bits: RL requests'].max():.0f}, held-out "
    f"{a_w['gold bits: held-out']:.0f} → {a_rl['gold bits: held-out'].min():.0f}–"
    f"{a_rl['gold bits: held-out'].max():.0f}): "
    + (
        "the policy does not learn its own training requests' programs either, so "
        "this is not overfitting to them. "
        if a_rl["greedy: RL requests"].max() <= a_w["greedy: RL requests"] + 0.05
        else "part of the held-out loss is overfitting to the RL requests. "
    )
    + "(ii) Per-token entropy goes from "
    f"{a_w['entropy (nats/token)']:.2f} to {a_rl['entropy (nats/token)'].min():.2f}–"
    f"{a_rl['entropy (nats/token)'].max():.2f} nats"
    + (
        ": no entropy collapse. "
        if a_rl["entropy (nats/token)"].min() >= 0.5 * a_w["entropy (nats/token)"]
        else ": the policies sharpen, which greedy decoding does not need. "
    )
    + "(iii) *Loose check or hacked check?* "
    f"{spur.min():.0%}–{spur.max():.0%} of the rewarded samples in the sweep are not "
    f"the gold program, and only {g_share[rl_arms].min():.0%}–"
    f"{g_share[rl_arms].max():.0%} of the trained policies' correct held-out answers "
    f"are the gold program (warm start {g_share['warm']:.0%}). But run on two more "
    f"databases with the gold SQL, {n_alt_ok} of the {n_alt} correct non-gold answers "
    "of the RL policies give the gold rows there too"
    + (
        ": they are *equivalent* programs (e.g. an `order` the multiset comparison "
        "ignores, a `limit` above the row count, an order or limit on a one-row "
        "aggregate), not request-independent ones"
        if n_alt_ok + s_ok >= 0.9 * (n_alt + s_ng)
        else ": part of them match the gold rows by accident on this database"
    )
    + f". Sampled on the RL requests as in training, {s_ng} of the {s_r} rewarded "
    f"samples of the RL policies are not the gold program and {s_ok} of those pass "
    f"the suite too; a single result answers {top_res_share:.0%} of the RL requests. "
    "Of the held-out "
    "requests the RL policies lose against the warm start, "
    f"{lost_understand:.0%} depart from the gold program first at a table, function, "
    "column, operator or value, i.e. the policy reads the request less "
    f"(table above); they write {n_prog[rl_arms].min():.0f}–"
    f"{n_prog[rl_arms].max():.0f} different programs for 60 requests (warm start "
    f"{n_prog['warm']:.0f}), and what the supervision taught is overwritten (greedy "
    "success on the supervised intents "
    f"{a_w['greedy: supervised intents']:.2f} → "
    f"{a_rl['greedy: supervised intents'].min():.2f}–"
    f"{a_rl['greedy: supervised intents'].max():.2f}). "
    + (
        "So the loss is drift of an unanchored policy (no KL term, no supervised "
        "replay) trained on 100 requests, not exploitation of a hole in the check; "
        "the gold program's bits overstate it, since equivalent programs share its "
        "probability. "
        if n_alt_ok + s_ok >= 0.9 * (n_alt + s_ng)
        else "Both drift and accidental matches contribute. "
    )
    + "In the sweep the oracle, whose credit points at the gold program, drifts "
    "least. The "
    "filter arm's free greedy decoding suffers most because it was trained only on "
    "the masked distribution; constrained decoding gives it "
    f"{sw_a.loc['filter', 'greedy: held-out, constrained']:.2f}.\n\n"
    "*Decision.* We rebuilt the checkpoint in the sweep's setting where the **sparse "
    "baseline** reaches 50 % within the budget (200 labelled intents, 600 steps), "
    "chosen from the sparse run alone, before the other runs of that setting were "
    f"read; the checkpoint now uses {credit_cfg['n_sft']} intents and "
    f"{credit_cfg['rl_steps']} steps. With three seeds it still censors "
    f"{sum(map(sum, cens_now.values()))} of {len(credit_seeds) * len(cens_now)} runs "
    f"(sparse {sum(cens_now['sparse'])}/{len(credit_seeds)}, per-token credit "
    f"{sum(cens_now['token_credit'])}/{len(credit_seeds)}), so the sweep's single seed "
    "was "
    + ("not " if sum(cens_now["sparse"]) > 0 else "")
    + "representative of the sparse baseline. A KL anchor to the supervised policy "
    "(or supervised replay), and an order-sensitive outcome check, were not tested."
)
display(Markdown(txt))


# %% [markdown]
# ## Where the verifier acts: lifecycle × domain
#
# Our three case studies (measured above) and, for orientation, other domains the position covers (not measured
# here; the entries say what plays the verifier's role there).

# %% tags=["hide-input"]
caught_total = int(inv.loc["DSL + verifier", "caught"])
lifecycle = pd.DataFrame(
    {
        "SQL queries (case 1)": [
            "typed query DSL vs free SQL",
            "schema: tables, columns, foreign keys, value domains",
            f"verifier: caught {caught_total:,} invalid programs, "
            f"{share_caught_dsl:.0%} before execution",
            f"constrained decoding: {n_constrained_invalid} invalid emitted",
            "read-only connection (query_only)",
            "result compared with the gold result",
            "error kind + token position → redraw that token",
        ],
        "Blocksworld (case 2)": [
            "move(x, y) with preconditions",
            "block names, the table",
            "plan validator (preconditions)",
            f"action mask: {valid_per_state.mean():.1f} of {len(raw_actions)} "
            "moves valid on average",
            "simulator",
            "goal test",
            "masked detours are recoverable",
        ],
        "learning (case 3)": [
            "DSL tokens as the output vocabulary",
            "same schema",
            "verifier per sampled program",
            "filter arm samples only valid continuations",
            "sandboxed execution of verified programs",
            "sparse reward: correct result",
            "dense reward: tokens before the first error",
        ],
        "proofs (e.g. Lean)": [
            "tactic language",
            "library lemmas",
            "kernel type check",
            "tactic state",
            "—",
            "goal closed",
            "error messages, goals left",
        ],
        "infrastructure as code": [
            "Terraform/Kubernetes DSLs",
            "provider schemas",
            "plan + policy checks",
            "schema-driven editors",
            "dry run",
            "drift/compliance tests",
            "policy violations",
        ],
        "APIs / tools": [
            "JSON schema tool calls",
            "function signatures",
            "schema validation",
            "grammar-constrained JSON",
            "sandboxed call",
            "response checks",
            "validation errors",
        ],
    },
    index=[
        "design / selection",
        "grounding",
        "static verification",
        "constrained generation",
        "sandboxed execution",
        "outcome check",
        "feedback / learning",
    ],
)
display(lifecycle)

# %% [markdown]
# ## The claims record
#
# The paper's claims are qualitative; its "number" column says so. Our measurements:
#
# Two former claims are now **checks**, because they hold by construction: `action_space_compression` (any
# string over the SQL vocabulary vs verified DSL programs) and `invalid_actions_pruned` (the DSL path executes
# only verified programs). Claims from the hand-set error model (cases 1 and 3):
#
# * `success_gain_dsl`: DSL + verifier minus free-SQL task success at ε = 0.1 with `retries` retries. It follows <!-- paper -->
#   largely from our error model (every SQL token, boilerplate included, errs at the same rate), which is why
#   case 4 tests the same comparison with a learned agent;
# * `learning_signal_gain`: REINFORCE steps to a 50 % success rate, sparse ÷ verifier feedback, median over the
#   learned programs; a run that never reaches the level counts as the full budget, so the ratio is then a lower
#   bound. The issue names the verifier's feedback "as reward/filters"; the claim's number is the **filter** arm,
#   and the note gives the dense-reward arm, which behaves differently (see case 3);
# * `filter_reaches_level`: the share of learned programs whose filter arm reaches the level at all (a ratio of
#   a censored count is not a speedup, so both must hold).
#
# Claims from the learned agent (case 4; three seeds each, on the held-out intents):
#
# * `learned_success_gain`: success of the DSL agent with constrained decoding and verifier repair minus the SQL
#   agent with SQLite-guided repair (its strongest setting);
# * `constrained_decoding_gain`: DSL agent, constrained minus free decoding, **both with verifier repair**.
#   Without repair the difference cannot be negative: when free greedy decoding writes a valid program, every
#   token it chose was allowed, so constrained decoding writes the same program; it can only change answers
#   that were invalid, i.e. already wrong. The strongest baseline is free decoding that uses the same verifier
#   after the fact (reject, ban the named token, decode again); the no-repair gap is in the note;
# * `coverage_matters`: success drop of the full DSL harness when its type checks are switched off;
# * `bits_per_intent_ratio`: bits the trained model needs for the gold SQL ÷ for the gold DSL program;
# * `structured_credit_speedup`: case 5, steps to 50 % sampled success of a sparse reward ÷ of per-token credit
#   from the verifier's error position, per seed (censored runs count as the full budget; the note says which).
#   Where runs are censored, or the policies drift away from reading the request (RL without an anchor; the
#   `no_drift_*` conditions below), the number says little about per-token credit itself; the diagnosis above
#   shows why (with the first build's warm start even a gold-departure oracle stays below 50 %; most failures
#   verify, so the error position names nothing in them).

# %% [markdown]
# ### Conditions
#
# Each claim about a sampled or learned agent names the conditions that put it in the regime it speaks of, fixed
# before its numbers are read; a claim whose conditions fail at every seed is *inconclusive*, not "not held":
#
# * case 1 (`baseline_room`): the free-SQL baseline does not already succeed always at the reference error rate,
#   so a gain is possible;
# * case 3 (`task_needs_learning`, `sparse_gets_signal`): the policies do not already reach the level at their
#   first step, and on at least half of the programs (the median the ratio reads) the sparse learner samples a
#   correct program at least once, without which its advantages are all zero and the ratio holds by
#   construction;
# * case 4 (`agents_fit_*`, `agents_plateau`): each learned agent answers its own training requests (the first
#   60) correctly by greedy decoding at least 95 % of the time, and its training loss is flat at the end (the
#   book-wide plateau rule: the last fifth improved by at most 5 % of the whole improvement);
# * case 5 (`no_drift_*`): after RL, each policy the speed-up compares still answers its supervised requests
#   (the first 60) correctly at least 90 % of the time; a policy that has drifted away from reading the request
#   measures drift, not credit.

# %%
r01 = res.set_index(["interface", "eps"])
eps_ref = 0.1 if 0.1 in eps_grid else eps_grid[len(eps_grid) // 2]
hist4 = {  # the agents' training loss curves (default: from the manifest)
    k: agent_loss[k] if quick else ck.manifest["history"]["loss/{}/{}".format(*k)]
    for k in agents
}
fit_set, sft_set = a_train[:60], credit_sft[:60]
first = {a: np.mean([c["success"][0] for c in curves[a]]) for a in dsl.ARMS}
cond = {
    "baseline_room": (r01.loc[("free SQL", eps_ref), "success_K"], "<", 1.0,
                      "the free-SQL baseline leaves room for a gain", "success"),
    "task_needs_learning": (max(first.values()), "<", level,
                            "no case-3 policy reaches the level at its first step",
                            "first-step sampled success, best arm"),
    "sparse_gets_signal": (np.mean([c["success"].sum() > 0 for c in curves["sparse"]]),
                           ">=", 0.5, "the sparse learner samples a success on at "
                           "least half of the programs", "share of programs"),
    "agents_plateau": ([max(train.plateau(hist4[i, s]) for i in dsl.AGENT_INTERFACES)
                        for s in agent_seeds], "<=", 0.05,
                       "both agents' training loss is flat at the end",
                       "improvement over the last fifth / whole, worse agent"),
}
for iface in dsl.AGENT_INTERFACES:
    cond[f"agents_fit_{iface}"] = (
        [dsl.greedy_success(agents[iface, s], agent_con, fit_set, iface)
         for s in agent_seeds], ">=", 0.95,
        f"the {iface.upper()} agent fits its training requests", "greedy success")
for arm in ("sparse", "token_credit"):
    cond[f"no_drift_{arm}"] = (
        [dsl.greedy_success(credit_models[arm, s], agent_con, sft_set, "dsl")
         for s in credit_seeds], ">=", 0.9,
        f"after RL the {arm.replace('_', '-')} policy still reads its supervised "
        "requests", "greedy success, supervised requests")
cond_verdict = {
    k: rec.condition(k, m, op, t, statement=st, unit=u)
    for k, (m, op, t, st, u) in cond.items()
}
pd.Series(cond_verdict, name="condition")

# %%
# Both hold by construction (any string vs verified programs; the DSL path executes
# only verified programs), so they are checks, not claims; case 4 tests the mechanisms.
rec.check(
    "action_space_compression",
    float(log_ratio),
    0.0,
    op=">",
    note=f"log10(raw SQL-vocabulary strings ÷ DSL programs) up to {n_ref} tokens; "
    f"{L_sql.mean():.1f} SQL vs {L_dsl.mean():.1f} DSL tokens per intent",
)
rec.check(
    "invalid_actions_pruned",
    share_caught_dsl,
    1.0,
    note=f"share of the noisy DSL agent's invalid actions caught before execution "
    f"(free SQL: {share_caught_sql:.0%})",
)


# %% tags=["hide-input"]
# the claims' numbers and notes (the rules are in the table below)
def sk(iface, col, eps=None):
    return float(r01.loc[(iface, eps_ref if eps is None else eps), col])


gain = sk("DSL + verifier", "success_K") - sk("free SQL", "success_K")
gain0 = sk("DSL + verifier", "success_K0") - sk("free SQL", "success_K0")
steps_of = lambda arm: float(  # noqa: E731
    np.median([s if s is not None else rl_steps for s in reach[arm]])
)
censored = any(s is None for s in reach["sparse"])
ratio = steps_of("sparse") / steps_of("verifier_filter")
filter_reached = float(np.mean([s is not None for s in reach["verifier_filter"]]))
dsl_c, dsl_f = agent_res["DSL, constrained decoding"], agent_res["DSL, free decoding"]
sql_f = agent_res["SQL, free decoding"]
pair_w = pair_l = 0  # per intent and seed: DSL right & SQL wrong, and the reverse
for s in agent_seeds:
    for rd, rs in zip(answers["dsl", True, (), s], answers["sql", False, (), s]):
        pair_w += rd.success and not rs.success
        pair_l += rs.success and not rd.success
pair_p = stats.binomtest(pair_w, pair_w + pair_l).pvalue if pair_w + pair_l else 1.0
cov_full, cov_type = cov_res["full verifier"], cov_res["type checks off"]
credit_steps = {
    arm: np.array([credit_budget if r is None else r for r in credit_reach[arm]], float)
    for arm in dsl.CREDIT_ARMS
}
credit_auc = {
    a: np.mean([credit_curves[a, q]["success"].mean() for q in credit_seeds])
    for a in dsl.CREDIT_ARMS
}
speedup = credit_steps["sparse"] / credit_steps["token_credit"]
cens = {arm: [r is None for r in credit_reach[arm]] for arm in dsl.CREDIT_ARMS}
best_base = min(("prefix_reward", "filter"), key=lambda a: credit_steps[a].mean())
NOTES = {
    "success_gain_dsl": f"with {retries} verifier-guided retries; with no retry the "
    f"gain is {gain0:+.3f}. Constrained decoding: "
    f"{sk('DSL + constrained decoding', 'success_K'):.3f} (nothing to retry; its "
    "errors are all valid but wrong).",
    "learning_signal_gain": f"steps to {level:.0%} success: sparse {reach['sparse']}, "
    f"verifier filter {reach['verifier_filter']}, verifier as dense reward "
    f"{reach['verifier_reward']} (None: not within {rl_steps} steps). The dense "
    "validity reward teaches valid programs but not the right one. Steps count full "
    "20-step windows only, so 20 is the earliest possible step"
    + (" and every filter run reaches the level in its first window: its step count "
       "is an upper bound too" if all(r == 20 for r in reach["verifier_filter"])
       else "") + ".",
    "filter_reaches_level": "the other half of learning_signal_gain: an arm that "
    "never reaches the level has no step count, so its ratio is not a speedup.",
    "learned_success_gain": f"without repair: DSL constrained "
    f"{dsl_c.success_K0.mean():.3f}, DSL free {dsl_f.success_K0.mean():.3f}, SQL "
    f"{sql_f.success_K0.mean():.3f}; with repair: DSL free "
    f"{dsl_f.success_K.mean():.3f}, SQL {sql_f.success_K.mean():.3f}. Paired over "
    f"{len(a_test)} intents × {len(agent_seeds)} seeds: DSL right and SQL wrong "
    f"{pair_w}, the reverse {pair_l} (two-sided sign test p = {pair_p:.2f}).",
    "constrained_decoding_gain": "without repair (a gap that cannot be negative: "
    "constrained greedy decoding equals free decoding whenever the free program "
    "verifies): " + ", ".join(f"{x:+.3f}" for x in dsl_c.success_K0 - dsl_f.success_K0)
    + f"; constrained {dsl_c.success_K0.mean():.3f} vs free "
    f"{dsl_f.success_K0.mean():.3f}.",
    "coverage_matters": "domain checks off: drop "
    f"{(cov_full.success_K - cov_res['domain checks off'].success_K).mean():+.3f}, "
    "scope checks off: "
    f"{(cov_full.success_K - cov_res['scope checks off'].success_K).mean():+.3f}. "
    "SQLite rejects "
    f"{sem.loc[sem.error == 'type_mismatch', 'sqlite_recall'].iloc[0]:.0%} of "
    "injected type errors, the verifier 100 %. Room for the claim: with type checks "
    "off, the share of answers that executed a program the full verifier rejects is "
    + ", ".join(f"{x:.3f}" for x in cov_type.executed_invalid)
    + " per seed (full verifier: "
    + ", ".join(f"{x:.3f}" for x in cov_full.executed_invalid)
    + "); the drop cannot exceed how often the agent writes a type error.",
    "bits_per_intent_ratio": f"DSL {bits['dsl'].mean():.2f} bits, SQL "
    f"{bits['sql'].mean():.2f} bits per held-out intent (mean over seeds).",
    "structured_credit_speedup": "steps per seed (censored runs, which never reached "
    f"50 % within {credit_budget} steps, count as {credit_budget}): "
    + "; ".join(
        f"{arm} " + ", ".join("censored" if c else f"{int(x)}"
                              for x, c in zip(credit_steps[arm], cens[arm]))
        for arm in dsl.CREDIT_ARMS
    )
    + ". A censored sparse run makes the ratio a lower bound, a censored per-token "
    f"run an upper bound. Strongest other baseline: {best_base} (ratio {best_base} ÷ "
    f"per-token {np.mean(credit_steps[best_base] / credit_steps['token_credit']):.2f})"
    ". Mean sampled success over the whole budget (uncensored): "
    + ", ".join(f"{a} {credit_auc[a]:.3f}" for a in dsl.CREDIT_ARMS)
    + ". Held-out greedy success: "
    + ", ".join(f"{a} {np.mean(v):.3f}" for a, v in credit_test.items())
    + ". Diagnosis (sweep, seed " + ", ".join(map(str, sweep["seeds"]))
    + f", {sweep['steps']} steps), steps to 50 % with a warm start on 100 intents: "
    + sweep_line("w100") + "; on 200: "
    + (sweep_line("w200") if "w200" in sw_b.index.get_level_values(0) else "not run")
    + f"; {spur.min():.0%}–{spur.max():.0%} of rewarded samples are not the gold "
    f"program; {n_alt_ok} of the {n_alt} correct non-gold held-out answers of the "
    f"RL policies pass a two-database test suite ({s_ok} of {s_ng} non-gold rewarded "
    "samples on the RL requests); of the held-out requests RL loses against the warm "
    f"start, {lost_understand:.0%} depart from the gold program at a table, function, "
    "column, operator or value (the policy reads the request less).",
}


def record(rows):
    for cid, statement, paper, measured, op, target, unit, baseline, given in rows:
        rec.claim(cid, statement, paper=paper, measured=measured, op=op,
                  target=target, unit=unit, baseline=baseline, note=NOTES[cid],
                  given=given)


# %%
AGENTS4 = ("agents_fit_dsl", "agents_fit_sql", "agents_plateau")
DSL4 = ("agents_fit_dsl", "agents_plateau")
NO_NUMBER = "(no number)"
record([  # id, statement, paper, measured, op, target, unit, baseline, given
    ("success_gain_dsl", "DSL + verifier succeeds more often than free SQL at the "
     f"same error rate (ε = {eps_ref})", f"higher success {NO_NUMBER}", gain, ">", 0.0,
     "success difference (DSL + verifier − free SQL)", sk("free SQL", "success_K"),
     ("baseline_room",)),
    ("learning_signal_gain", "Verifier feedback makes learning faster than a sparse "
     "success reward", f"denser learning signal {NO_NUMBER}", ratio, ">", 1.0,
     "steps sparse ÷ steps with the verifier as filter"
     + (" (lower bound)" if censored else ""), steps_of("sparse"),
     ("task_needs_learning", "sparse_gets_signal")),
    ("filter_reaches_level", f"With the verifier as filter, every learned program "
     f"reaches {level:.0%} success within {rl_steps} steps",
     f"denser learning signal {NO_NUMBER}", filter_reached, ">=", 1.0,
     "share of programs that reach the level", None, ("task_needs_learning",)),
    ("learned_success_gain", "A learned agent answers held-out requests more often "
     "through the DSL (constrained decoding + verifier repair) than through SQL (with "
     "SQLite-guided repair)", f"higher success through a DSL + verifier {NO_NUMBER}",
     list(dsl_c.success_K - sql_f.success_K), ">", 0.0,
     f"held-out success difference ({len(a_test)} intents)", list(sql_f.success_K),
     AGENTS4),
    ("constrained_decoding_gain", "Constrained decoding raises the learned DSL "
     "agent's held-out success over free decoding with the same verifier's repair",
     f"a constrained decoder never emits invalid actions {NO_NUMBER}",
     list(dsl_c.success_K - dsl_f.success_K), ">", 0.0,
     f"held-out success difference (both with ≤ {agent_repairs} repairs)",
     list(dsl_f.success_K), DSL4),
    ("coverage_matters", "Switching off the verifier's type checks lowers the learned "
     "DSL agent's success", f"the harness's coverage shapes failure modes {NO_NUMBER}",
     list(cov_full.success_K - cov_type.success_K), ">", 0.0, "held-out success drop",
     list(cov_type.success_K), DSL4),
    ("bits_per_intent_ratio", "A trained model needs more bits to write the SQL of a "
     "held-out intent than its DSL program",
     f"the DSL compresses the intent-to-action path {NO_NUMBER}", list(bits_ratio),
     ">", 1.0, "bits per intent, SQL ÷ DSL", list(bits["dsl"]), AGENTS4),
    ("structured_credit_speedup", "Per-token credit from the verifier's error "
     "position trains a request-conditioned policy over twice as fast as a sparse "
     "reward (steps to 50 % sampled success)", f"denser learning signal {NO_NUMBER}",
     list(speedup), ">", 2.0, "steps to 50 % success, sparse ÷ per-token credit",
     list(credit_steps["sparse"]), ("no_drift_sparse", "no_drift_token_credit")),
])
rec.save()

# %% [markdown]
# ## Known limits
#
# * Cases 1–3 measure interfaces under **our** error model (every SQL token errs at the same rate; retries
#   rewrite the query), so their gains follow largely from that model; cases 4 and 5 replace it by learners,
#   which are small and read templated requests.
# * Case 5's outcome check compares rows as multisets, so it rewards programs that differ from the gold one in
#   clauses without effect on the rows (an `order` without a `limit`, a `limit` above the row count); the
#   diagnosis tests the policies' correct non-gold held-out answers on two more databases, and measures how far
#   RL moves held-out greedy success and whether the policy then reads the request less (`no_drift_*`); a KL
#   anchor to the supervised policy (or supervised replay) and an order-sensitive check were not tried (each
#   needs a rebuild of the credit checkpoint, about 20 minutes of one core).
# * The SQL agent of case 4 repairs from SQLite's messages but has no grammar-constrained SQL decoder (an
#   incremental SQL parser masking the logits, as practitioners use); `learned_success_gain` compares the DSL's
#   constraints with SQL repair, not with constrained SQL, and its note counts the intents behind each gap.
# * Case 5's per-token credit blames one token of a rejected program where the sparse reward blames all of
#   them, with the same baseline for both; a rule that keeps the sparse reward's total blame and only moves it
#   onto the error position, or a baseline per request, was not tried.
# * Case 5's warm start (200 labelled intents) and budget (600 steps) were chosen from the diagnosis sweep, in
#   which the sparse baseline reaches 50 %; the sweep itself has one seed (seed 1 was dropped for time). With
#   this warm start the curves start not far below the level, so "steps to 50 %" measures a small move and
#   is sensitive to noise; the first build (100 intents, 300 steps) censored every run.
# * The credit manifest's `steps_to_50` metrics were written when the helper still averaged partial windows (a
#   run could "reach" 50 % at step 1 or 2 by chance); the helper now counts full windows only, and the notebook
#   recomputes every step count from the stored curves.
