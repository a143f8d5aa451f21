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
# | agent | LLM agents (discussed, not run) | a **noisy policy**: the gold action with each decision wrong with probability ε (its success has a closed form), a tabular REINFORCE policy, and a **learned agent**: a 2-layer transformer (≈0.1 M parameters) trained on 300 request → program pairs, tested on 300 held-out requests, and the same on 25–1000 paraphrased requests (at 1000: 30 training seeds), tested on 300 paraphrases in unseen sentence frames and wording, against SQL with free or grammar-constrained decoding; a smaller one trained by RL (4 samples per request, a KL anchor to its warm start) on 100 unlabelled requests with sparse or per-token credit |
# | domains | a lifecycle × domain analysis (SQL, planning, proofs, infrastructure, …) | SQLite queries (300 intents), Blocksworld with 5 blocks, learning to write one query |
# | evidence | argument and targeted case studies | measured success rates, invalid actions reaching execution, retries, learning curves |
# | hardware | none | 2 CPU cores, a few minutes (the stored checkpoints: `make data NB=05_dsl_harness`, about 90 minutes on one core) |
#
# :::{note}
# **What is ours, not the paper's.** The paper's text and case studies were not available to us; only its
# abstract is. Every case study here is **our construction** from the abstract's three mechanisms: the shop
# database, the query DSL and its verifier, the error model of the noisy policy (confusions inside the
# vocabulary, hallucinated names, slips, and destructive statements at rate ε/10), the Blocksworld comparison and
# the learning task. No large language model runs here: in cases 1–3 the "agents" are stand-ins whose error rate
# we set, so those numbers measure the *interfaces* under our error model. Case 4 replaces the stand-in by a small
# transformer trained on templated requests (our own), so its errors are a learner's, not ours; it is still far
# smaller than an LLM and its requests are far more regular than a user's (its paraphrased requests, also ours,
# vary the sentence frame and the wording, within a small closed vocabulary). Case 5's warm start (supervision on
# 200 intents), its credit rules, its anchor and its budget are our choices too.
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
# stream) whose programs never appear in training (held-out success = the
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
# The default run loads the trained weights (`data/05_dsl_harness/make_agents.py`, about 9 minutes on one core);
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
# ### Paraphrased requests: a sample-efficiency curve with power
#
# On case 4's templated requests the two agents read the same fixed phrasing, so the comparison above mostly
# measures how well each learns a one-to-one rewrite. Here the requests are **paraphrased**, and the held-out
# ones are phrased in ways the agents never saw:
#
# * **frames**: six sentence frames that order the parts of a request differently (`F [G] S, where W, O, L`,
#   `S : F [G], with W`, …); training requests use frames 0–3, held-out requests frames 4–5 only
#   (`paraphrase_request` lists them);
# * **wording**: every function, column, operator, order and limit has two or three synonyms (`mean` /
#   `average`, `over` / `more than`, …), all of which occur in training; every held-out request also opens with
#   a filler phrase (`kindly`, `could you`, `report`) whose words **never** occur in training. A model trained
#   from scratch has no meaning for a word it never saw (it enters as an embedding that training never
#   updated), so held-out wording can only be noise it has to ignore; synonyms it must map come from training.
#   One unseen word is not filler: frame 4 introduces its conditions with `whose`.
#
# The programs are case 4's (`paraphrase_split`: the held-out ones are programs 300–599 of its stream; training
# uses the first 300 and, for larger training sets, programs from 600 on; all are distinct), so only the phrasing
# changed. Per seed and interface one agent is trained on each training-set size of the config (the same
# architecture; AdamW on batches of 32, for 600 steps or 64 passes over the data, whichever is more: one rule,
# `para_steps`, for every size; 64 passes are what 600 steps give at 300 requests, where the agents fit; the
# sizes and their steps are printed below the examples), and scored on the
# held-out requests by three decoders, each with up to 3 repairs: <!-- paper -->
#
# * **DSL, verifier-constrained** (as above): the logits masked to the verifier's valid next tokens;
# * **SQL, free decoding** with SQLite-guided repair (as above);
# * **SQL, grammar-constrained**: the fair constrained baseline. The logits are masked to the tokens a **SQL
#   grammar** allows next (`sql_allowed_next`: the grammar of the queries the DSL compiles to, with the schema's
#   table and column names, as a grammar-constrained decoder in the style of Synchromesh enforces; it does not
#   know which column belongs to which table, nor types). Every query it writes parses; SQLite still rejects a
#   column that is not in scope, and repair handles that as before.
#
# **Reading rule**, fixed with the checkpoint's config (`read_level`) and `read_n_train` and committed with the
# data before the first curve was trained, and kept when the curve was extended: `learned_success_gain` is
# read at the smallest training-set size at which either agent's best decoder reaches a mean held-out success
# of 0.5, where a gain is still possible; **if no size reaches it, at the largest size**. <!-- paper -->
# That fallback is the rule's, not the issue's: the issue asked for the reading at an agent that answers at
# least half of the held-out requests, and the rule names no condition that would make the
# claim inconclusive below that level. The SQL baseline there is the better of its two decoders (mean over
# seeds). Per seed the gain comes with a **paired bootstrap interval** over the held-out requests; up to round 3
# the claim held at a seed only if the interval's lower end was above 0. How wide those intervals came out, and
# so which gain one seed can resolve, is in the reading below; since round 4 the claim is read over thirty
# training seeds at the size this rule picks (the seed-level reading after it).
#
# **Extension.** The first curve (sizes 25 to 300) did not reach the reading level (the reading below gives its
# best mean; the agents at those sizes are unchanged), so it was extended upward before any larger size was
# trained: the added sizes and the steps rule were written into the config and `make_paraphrase.py` first,
# with the reading rule, its level and every bar unchanged; the held-out requests and the agents at sizes 25
# to 300 are the same as before (the rule gives them 600 steps; `make_paraphrase.py --reuse` reads them from
# the stored outcomes, and a seed-0 rerun reproduced them exactly). The first design gave every size at least
# 20 passes and added 1000 and 3000; at seed 0 its agents missed the unchanged fit bar at 1000 (the known
# limits give the numbers), so before any other seed it was replaced by 64 passes, and 3000 (6000 steps per
# agent) was dropped for time.
#
# The training and scoring (one agent per size, interface and seed, counted below the examples; about 20
# minutes on one core) run in
# `data/05_dsl_harness/make_paraphrase.py`, which stores the per-request outcomes, not the weights; quick mode
# trains tiny agents live. Requests of one held-out program, before and after:

# %%
para_cfg = dsl.checkpoint_config("paraphrase")
if quick:
    para_cfg.update(n_trains=[20, 40], n_test=20, steps=40, d_model=32, n_layer=1,
                    n_head=2, repairs=1, n_fit=20)
    para_cfg["test_after"] = max(para_cfg["n_trains"])
n_pool = max(para_cfg["n_trains"])
para_intents = dsl.make_intents(
    agent_con, max(n_pool, para_cfg["test_after"]) + para_cfg["n_test"],
    seed=para_cfg["intent_seed"])
p_train, p_test = dsl.paraphrase_split(para_intents, n_pool, para_cfg["n_test"],
                                       para_cfg["test_after"], para_cfg["para_seed"])
para_steps = {n: dsl.para_steps(n, para_cfg["steps"], para_cfg["batch"],
                                para_cfg["min_epochs"]) for n in para_cfg["n_trains"]}
gold_test = para_intents[para_cfg["test_after"]:][:4]  # the programs of p_test[:4]
seen_words = {w for it in p_train for w in dsl.request_tokens(it.request)}
display(pd.DataFrame({
    "DSL program": [" ".join(it.program) for it in gold_test],
    "templated request (case 4)": [it.request for it in gold_test],
    "held-out paraphrase": [it.request for it in p_test[:4]],
}))
test_words = {w for it in p_test for w in dsl.request_tokens(it.request)}
unseen = sorted(test_words - seen_words)
print(f"{len(p_train)} training and {len(p_test)} held-out requests; words of held-out "
      f"requests never seen in training: {unseen}")
prefix = list(p_test[0].sql[:6])
print("SQL grammar after", " ".join(prefix), "→", dsl.sql_allowed_next(prefix)[:8])
print("training-set sizes and steps:",
      ", ".join(f"{n}: {k}" for n, k in para_steps.items()),
      f"({len(para_steps) * len(dsl.AGENT_INTERFACES) * len(para_cfg['seeds'])}"
      " agents: sizes x interfaces x seeds)")

# %%
PARA_DECODER = {"dsl_constrained": ("dsl", True), "sql_free": ("sql", False),
                "sql_grammar": ("sql", True)}
para_arms, n_trains = para_cfg["arms"], para_cfg["n_trains"]
para_out, para_fit, para_loss = {}, {}, {}  # per (arm | interface, n_train, seed)
if quick:  # tiny agents trained live: the pipeline runs, the numbers mean nothing
    para_seeds = agent_seeds
    for s in tqdm(para_seeds, desc="paraphrase agents"):
        for n in n_trains:
            models = {}
            for iface in dsl.AGENT_INTERFACES:
                with repro.seeded(s):
                    models[iface] = dsl.make_agent(
                        iface, para_cfg["d_model"], para_cfg["n_layer"],
                        para_cfg["n_head"], paraphrase=True)
                    para_loss[iface, n, s] = dsl.train_agent(
                        models[iface], p_train[:n], iface, para_steps[n],
                        para_cfg["batch"], para_cfg["lr"], seed=s)
                para_fit[iface, n, s] = dsl.greedy_success(
                    models[iface], agent_con, p_train[:n][: para_cfg["n_fit"]], iface)
            for arm in para_arms:
                iface, constrained = PARA_DECODER[arm]
                rs = [dsl.agent_answer(models[iface], agent_con, it, iface,
                                       constrained, para_cfg["repairs"])
                      for it in p_test]
                para_out[arm, n, s] = np.array(
                    [[r.success for r in rs],
                     [r.success and r.repairs == 0 for r in rs],
                     [r.executed_invalid for r in rs]], dtype=bool)
else:  # the default run: the measurements of make_paraphrase.py
    para_cfg = scripts.with_seeds(para_cfg, scripts.model_seeds(seed))
    para_seeds = para_cfg["seeds"]
    ck_p = checkpoints.load("05_dsl_harness", "paraphrase", config=para_cfg)
    for n in n_trains:
        for s in para_seeds:
            for arm in para_arms:
                para_out[arm, n, s] = ck_p.tensors[f"out/{arm}/{n}/{s}"].numpy() > 0
            for iface in dsl.AGENT_INTERFACES:
                para_fit[iface, n, s] = ck_p.manifest["metrics"][f"fit/{iface}/{n}/{s}"]
                hist = ck_p.manifest["history"]
                para_loss[iface, n, s] = hist[f"loss/{iface}/{n}/{s}"]

# %% [markdown]
# Held-out success per training-set size (mean over seeds; per seed in brackets), the share answered at the
# first attempt, and the share of answers that executed an invalid action:

# %%
ARM_NAME = {"dsl_constrained": "DSL, verifier-constrained",
            "sql_free": "SQL, free", "sql_grammar": "SQL, grammar-constrained"}
para_rows = []
for n in n_trains:
    for arm in para_arms:
        o = np.array([para_out[arm, n, s].mean(1) for s in para_seeds])
        para_rows.append({"n_train": n, "decoder": ARM_NAME[arm],
                          "success": o[:, 0].mean(),
                          "per seed": ", ".join(f"{x:.2f}" for x in o[:, 0]),
                          "first attempt": o[:, 1].mean(),
                          "executed invalid": o[:, 2].mean()})
para_tab = pd.DataFrame(para_rows).set_index(["n_train", "decoder"])
display(para_tab.round(3))

fig, ax = plt.subplots(figsize=(7, 3.4))
for c, arm in zip(plotting.PALETTE, para_arms):
    m = [para_tab.loc[(n, ARM_NAME[arm]), "success"] for n in n_trains]
    ax.plot(n_trains, m, "-o", color=c, label=ARM_NAME[arm])
    for n in n_trains:
        y = [para_out[arm, n, s][0].mean() for s in para_seeds]
        ax.plot([n] * len(para_seeds), y, ".", color=c, ms=4, alpha=0.6)
ax.axhline(para_cfg["read_level"], color="grey", lw=0.8, ls=":")
ax.set(xscale="log", xlabel="training requests (paraphrased)", ylim=(0, 1),
       ylabel=f"held-out success ({len(p_test)} requests)",
       title="Sample efficiency on paraphrased requests (line: mean; dots: seeds)")
ax.set_xticks(n_trains, [str(n) for n in n_trains])
ax.legend(loc="lower right")
plt.show()

# %% [markdown]
# The reading rule, the baseline it picks, and the paired comparison at that size (the conditions for the
# agents read there, fit and plateau, are recorded with the claims below):

# %%
para_mean = {n: [para_tab.loc[(n, ARM_NAME[a]), "success"] for a in para_arms]
             for n in n_trains}
n_read = dsl.read_n_train(para_mean, para_cfg["read_level"])
sql_arm = max(("sql_free", "sql_grammar"),
              key=lambda a: para_tab.loc[(n_read, ARM_NAME[a]), "success"])
hits = {(a, s): para_out[a, n_read, s][0].astype(float)  # per-request success
        for a in ("dsl_constrained", sql_arm) for s in para_seeds}
para_boot = {s: dsl.paired_bootstrap(hits["dsl_constrained", s], hits[sql_arm, s],
                                     seed=s) for s in para_seeds}
para_gain = np.array([b[0] for b in para_boot.values()])


def gain_at(n):
    """Per seed: DSL minus the SQL decoder that is better on the mean at size n."""
    best = max(("sql_free", "sql_grammar"),
               key=lambda a: para_tab.loc[(n, ARM_NAME[a]), "success"])
    return np.array([para_out["dsl_constrained", n, s][0].mean()
                     - para_out[best, n, s][0].mean() for s in para_seeds])


para_low = np.array([b[1] for b in para_boot.values()])
para_sql = np.array([para_out[sql_arm, n_read, s][0].mean() for s in para_seeds])
pooled = dsl.paired_bootstrap(
    np.concatenate([hits["dsl_constrained", s] for s in para_seeds]),
    np.concatenate([hits[sql_arm, s] for s in para_seeds]), seed=seed)
para_cond = pd.DataFrame({
    (n, s): {"fit DSL": para_fit["dsl", n, s], "fit SQL": para_fit["sql", n, s],
             "plateau (worse agent)": max(train.plateau(para_loss[i, n, s])
                                          for i in dsl.AGENT_INTERFACES)}
    for n in n_trains for s in para_seeds}).T.rename_axis(["n_train", "seed"])
display(para_cond.round(3).unstack("seed"))

# %% tags=["remove-input"]
p_inv = {a: [para_tab.loc[(n, ARM_NAME[a]), "executed invalid"] for n in n_trains]
       for a in para_arms}
suc = {a: [para_tab.loc[(n, ARM_NAME[a]), "success"] for n in n_trains]
       for a in para_arms}
# the held-out frames: 4 has a colon after the tables, 5 has none
frame_of = np.array([4 if " : " in it.request else 5 for it in p_test])
by_frame = {a: {f: np.mean([para_out[a, n_read, s][0][frame_of == f].mean()
                            for s in para_seeds]) for f in (4, 5)}
            for a in para_arms}
# answers the grammar mask made executable (free SQL executed an invalid query, the
# masked decoder of the same agent did not), all sizes and seeds, and how many are right
resc = [(para_out["sql_free", n, s][2] & ~para_out["sql_grammar", n, s][2],
         para_out["sql_grammar", n, s][0]) for n in n_trains for s in para_seeds]
n_resc, n_resc_ok = sum(int(r.sum()) for r, _ in resc), sum(int((r & ok).sum())
                                                          for r, ok in resc)
half = np.array([(hi - lo) / 2 for _, lo, hi in para_boot.values()])
best_read = max(para_mean[n_read])
first_sizes = [n for n in n_trains if n <= 300]  # the first curve's sizes
first_best = max(max(para_mean[n]) for n in first_sizes)
display(Markdown(
    (f"**Extended curve.** Up to {first_sizes[-1]} training requests (the first curve) the "
     f"best decoder's mean held-out success is {first_best:.3f}; at "
     + ", ".join(f"{n} it is {max(para_mean[n]):.3f}" for n in n_trains if n > first_sizes[-1])
     + ". " if n_trains[-1] > first_sizes[-1] else "")
    + f"**Reading.** The rule reads the comparison at **{n_read} training requests**"
    + (f" (the first size where a decoder's mean held-out success reaches "
       f"{para_cfg['read_level']:.1f})"
       if best_read >= para_cfg["read_level"]
       else f" (no size reaches {para_cfg['read_level']:.1f}, so the rule's fallback, "
       f"the largest; the best decoder there answers {best_read:.0%} of the held-out "
       "requests, so both agents fail on most of them and the comparison is read below "
       "the level the issue asked for)")
    + f"; the SQL baseline there is {ARM_NAME[sql_arm]} decoding. "
    "DSL minus SQL, "
    "per seed, with the paired 95 % bootstrap interval over the held-out requests: "
    + ", ".join(f"{g:+.3f} [{lo:+.3f}, {hi:+.3f}]" for g, lo, hi in para_boot.values())
    + f"; pooled over the seeds {pooled[0]:+.3f} [{pooled[1]:+.3f}, {pooled[2]:+.3f}]. "
    + f"The per-seed intervals' half-widths are {', '.join(f'{h:.3f}' for h in half)}"
    + (": a per-seed gain of 0.05 would not be resolved; " if half.min() > 0.05
       else ": a per-seed gain of 0.05 would be resolved; " if half.max() <= 0.05
       else ": a per-seed gain of 0.05 would be resolved at some seeds only; ")
    + f"the pooled one's is {(pooled[2] - pooled[1]) / 2:.3f}. "
    + (f"The per-seed gains differ in sign; across seeds (same requests, another "
       f"initialisation and batch order) held-out success at {n_read} spans "
       + ", ".join(f"{np.ptp(s_):.3f} ({ARM_NAME[a]})" for a, s_ in (
           (a, [para_out[a, n_read, q][0].mean() for q in para_seeds])
           for a in ("dsl_constrained", sql_arm)))
       + f", against a pooled gain of {pooled[0]:+.3f}. The pooled interval resamples "
       "requests only, not training seeds: with three seeds whose gains differ in sign, "
       "they do not resolve seed-to-seed variation (the seed-level reading below "
       "counts it). "
       if (para_gain > 0).any() and (para_gain < 0).any() else "")
    + (f"At {n_trains[-1]} training requests (same baseline rule) it is "
       + ", ".join(f"{g:+.3f}" for g in gain_at(n_trains[-1])) + " per seed. "
       if n_read != n_trains[-1] else "")
    + "The grammar mask lowers the share of SQL answers that execute an invalid "
    "query from " + ", ".join(f"{free:.3f}" for free in p_inv["sql_free"])
    + " to " + ", ".join(f"{g:.3f}" for g in p_inv["sql_grammar"])
    + f" (n_train {', '.join(map(str, n_trains))}; the DSL's verifier: "
    + ", ".join(f"{x:.3f}" for x in p_inv["dsl_constrained"]) + "), yet its success "
    "moves by at most "
    + f"{max(abs(a - b) for a, b in zip(suc['sql_grammar'], suc['sql_free'])):.3f}: "
    f"of the {n_resc} answers (all sizes and seeds) that free decoding executed "
    "invalid "
    f"and the mask made executable, {n_resc_ok} "
    + ("is" if n_resc_ok == 1 else "are")
    + (" right, so here a query the grammar forces into shape is rarely the right "
       "one. " if n_resc and n_resc_ok <= 0.1 * n_resc else " right. ")
    + "By held-out frame "
    f"(at {n_read}, mean over seeds), success of the DSL agent is "
    + ", ".join(f"{v:.3f} (frame {k})" for k, v in by_frame["dsl_constrained"].items())
    + " and of the SQL baseline "
    + ", ".join(f"{v:.3f} (frame {k})" for k, v in by_frame[sql_arm].items())
    + (" (frame 4 introduces its conditions with *whose*, a word no training request "
       "holds)" if "whose" in unseen else "")
    + ". For comparison, case 4's agents on templated requests (300 training "
    "requests, 1000 steps) reach "
    f"{agent_res['DSL, constrained decoding'].success_K.mean():.3f} (DSL, constrained) "
    f"and {agent_res['SQL, free decoding'].success_K.mean():.3f} (SQL, free)."))

# %% [markdown]
# ### Seed-level reading: thirty training seeds at 1000 requests
#
# At three seeds the gain above changes sign, and the per-request intervals cannot say whether that is the
# interfaces or the luck of training: they resample the held-out requests of one trained pair of agents, not
# the training. Round 4 therefore **registered, before its runs**, a reading over seeds: more seeds trained
# and scored at 1000 training requests exactly as seeds 0–2 (same requests, steps, decoders and repairs;
# `paraphrase_seeds` in `make_paraphrase.py`). Per seed $d_s$ = DSL success − SQL success on the 300 held-out
# requests, the SQL baseline being the decoder with the higher mean over the seeds; `learned_success_gain`'s
# measured number is the **lower end of the two-sided 95 % Student-t interval of $d_s$ over the seeds**
# (`seed_interval`), held only if it is above 0; the fit and plateau conditions must hold at every seed. The
# count was first fixed at ten (seeds 3–9, on a guessed cost of about 8 minutes per seed); seed 3 then measured
# it, about 100 s on one core, and before seeds 10–29 ran the count was raised to thirty, sized to our compute
# share (decided on the cost alone; seed 3's own numbers had been printed and seen by then, seeds 4–9 were
# running, unread). The first-registered ten-seed interval and the first three seeds' per-request reading are
# kept beside it. The t-interval treats the seeds as independent draws of training on **one** set of training and
# held-out requests; a review-time reading that also resamples the held-out requests follows (outside the
# verdict). <!-- paper -->

# %%
n_seed = n_read if quick else dsl.checkpoint_config("paraphrase_seeds")["n_trains"][0]
seeds_all = list(para_seeds)
if not quick:  # seeds 3-29 (for SEED=s: s+3 .. s+29) from make_paraphrase.py
    ext_cfg = dsl.checkpoint_config("paraphrase_seeds")
    n_all = len(para_seeds) + len(ext_cfg["seeds"])
    ext_seeds = scripts.model_seeds(seed, n_all)[len(para_seeds):]
    ext_cfg = scripts.with_seeds(ext_cfg, ext_seeds)
    ck_x = checkpoints.load("05_dsl_harness", "paraphrase_seeds", config=ext_cfg)
    for s in ext_cfg["seeds"]:
        for arm in para_arms:
            out_x = ck_x.tensors[f"out/{arm}/{n_seed}/{s}"]
            para_out[arm, n_seed, s] = out_x.numpy() > 0
        for iface in dsl.AGENT_INTERFACES:
            fit_x = ck_x.manifest["metrics"][f"fit/{iface}/{n_seed}/{s}"]
            para_fit[iface, n_seed, s] = fit_x
            para_loss[iface, n_seed, s] = ck_x.manifest["history"][
                f"loss/{iface}/{n_seed}/{s}"]
    seeds_all += ext_cfg["seeds"]
succ_all = {a: np.array([para_out[a, n_seed, s][0].mean() for s in seeds_all])
          for a in para_arms}
sql_all = max(("sql_free", "sql_grammar"), key=lambda a: succ_all[a].mean())
d_all = succ_all["dsl_constrained"] - succ_all[sql_all]  # the per-seed gains
iv_all = dsl.seed_interval(d_all)  # (mean, low, high) over seeds
# the first-registered ten seeds (same baseline rule over those ten)
sql_10 = max(("sql_free", "sql_grammar"), key=lambda a: succ_all[a][:10].mean())
iv_10 = dsl.seed_interval(succ_all["dsl_constrained"][:10] - succ_all[sql_10][:10])
seed_tab = pd.DataFrame({ARM_NAME[a]: succ_all[a] for a in para_arms}, index=seeds_all)
seed_tab["gain (DSL − SQL baseline)"] = d_all
display(seed_tab.rename_axis(f"seed (n_train {n_seed})").describe().loc[
    ["mean", "std", "min", "max"]].round(3))

fig, ax = plt.subplots(figsize=(6.5, 2.6))
ax.plot(d_all, np.random.default_rng(0).uniform(-0.3, 0.3, len(d_all)), "o",
        color=plotting.PALETTE[0], alpha=0.6, label="one training seed (jittered)")
ax.errorbar([iv_all[0]], [0.5], xerr=[[iv_all[0] - iv_all[1]], [iv_all[2] - iv_all[0]]],
            fmt="s", color="k", capsize=4, label="mean, 95 % t-interval over seeds")
ax.axvline(0, color="grey", lw=0.8, ls=":")
ax.set(yticks=[], ylim=(-0.6, 1.1), xlabel="held-out success, DSL − SQL baseline",
       title=f"Gain per training seed at n_train {n_seed}")
ax.legend(loc="upper left", fontsize=8, frameon=False)
plt.show()

# %% [markdown]
# **Why SQL did so well at seed 1.** The requests, programs and held-out set do not depend on the seed; the
# seed sets two things of an agent: its initialisation (the global seed when it is built) and its batch order
# (`train_agent`'s generator). Greedy decoding is deterministic. A registered experiment (`paraphrase_swap`)
# trains the SQL agent at 1000 requests with the initialisation of seed 0 and the batch order of seed 1, and the
# reverse; with seeds 0 and 1 themselves that is a 2 × 2 table. Its reading, fixed with it: a factor explains
# seed 1's excess (its SQL success minus the mean of seeds 0 and 2) when its main effect is at least half that
# excess and the other factor's is below half. The thirty seeds say where seed 1's agent falls among SQL agents.

# %%
sw = {}  # (init seed, batch-order seed) -> held-out success of the SQL baseline decoder
for i in (0, 1):  # the diagonal: seeds 0 and 1 themselves
    sw[i, i] = float(succ_all[sql_all][i])
if not quick:
    sw_cfg = scripts.with_seeds(dsl.checkpoint_config("paraphrase_swap"),
                                para_seeds[:2])
    ck_sw = checkpoints.load("05_dsl_harness", "paraphrase_swap", config=sw_cfg)
    a, b = sw_cfg["seeds"]
    for i, o in ((a, b), (b, a)):
        key = f"out/{sql_all}/{n_seed}/i{i}o{o}"
        sw[i - a, o - a] = float(ck_sw.tensors[key].numpy()[0].mean())
    sw_fit = [ck_sw.manifest["metrics"][f"fit/sql/{n_seed}/i{i}o{o}"]
              for i, o in ((a, b), (b, a))]
    # per-request agreement: same initialisation (other order) vs other initialisation
    hit = {(i - a, o - a): ck_sw.tensors[f"out/{sql_all}/{n_seed}/i{i}o{o}"].numpy()[0]
           for i, o in ((a, b), (b, a))}
    hit.update({(i, i): para_out[sql_all, n_seed, para_seeds[i]][0] for i in (0, 1)})
    agree_same = [float((hit[i, i] == hit[i, 1 - i]).mean()) for i in (0, 1)]
    agree_other = float((hit[0, 0] == hit[1, 1]).mean())
    sw_tab = pd.DataFrame([[sw[i, o] for o in (0, 1)] for i in (0, 1)],
                          index=["init of seed 0", "init of seed 1"],
                          columns=["batch order of seed 0", "batch order of seed 1"])
    display(sw_tab.round(3))

# %% tags=["remove-input"]
exc = succ_all[sql_all][1] - succ_all[sql_all][[0, 2]].mean()  # seed 1's excess
rank1 = int((succ_all[sql_all] > succ_all[sql_all][1]).sum()) + 1
others = np.delete(succ_all[sql_all], 1)
agree1 = float((para_out["sql_free", n_seed, para_seeds[1]][0]
                == para_out["sql_grammar", n_seed, para_seeds[1]][0]).mean())
low3 = para_low if n_read == n_seed else None
txt = (f"**Seed-level reading.** Over {len(seeds_all)} seeds at {n_seed} training "
       f"requests the SQL baseline is {ARM_NAME[sql_all]} decoding "
       f"({len(seeds_all)}-seed mean "
       f"{succ_all[sql_all].mean():.3f}; DSL {succ_all['dsl_constrained'].mean():.3f}). "
       "The gain per seed is " + ", ".join(f"{x:+.3f}" for x in d_all)
       + f" ({int((d_all > 0).sum())} of {len(d_all)} positive); mean {iv_all[0]:+.3f}, "
       f"95 % t-interval over seeds [{iv_all[1]:+.3f}, {iv_all[2]:+.3f}] (over the "
       f"first-registered ten, SQL baseline {ARM_NAME[sql_10]}: {iv_10[0]:+.3f} "
       f"[{iv_10[1]:+.3f}, {iv_10[2]:+.3f}]), so the claim is "
       + ("**held** (the interval excludes 0 from below)" if iv_all[1] > 0 else
          "**not held** (the interval " + ("lies below 0: SQL is ahead" if iv_all[2] < 0
                                          else "includes 0: no resolvable gain either way")
          + ")")
       + (". The first-registered ten-seed reading gives the same verdict"
          if (iv_10[1] > 0) == (iv_all[1] > 0) else
          ". The first-registered ten-seed reading would give the other verdict")
       + f". The seeds' spread (sd of the gain {d_all.std(ddof=1):.3f}) is "
       f"{d_all.std(ddof=1) / max(np.mean(half), 1e-9):.1f} times the 95 % per-request "
       "half-width of one seed, so a verdict from one or three seeds' requests "
       "mostly measures which agents training happened to produce. ")
# added at review (round 4): the t-interval holds the 300 held-out requests fixed; resampling
# seeds and requests together also counts their draw (kept out of the verdict)
D_all = np.array([para_out["dsl_constrained", n_seed, s][0].astype(float)
                  - para_out[sql_all, n_seed, s][0] for s in seeds_all])
iv_x = dsl.crossed_bootstrap(D_all, seed=seed)
txt += ("*Added at review:* the t-interval holds the held-out requests fixed (one draw of "
        f"{D_all.shape[1]}, shared by every seed); resampling seeds and requests together "
        f"gives [{iv_x[1]:+.3f}, {iv_x[2]:+.3f}]"
        + (", so the sign of the gap does not rest on this draw of held-out requests; "
           if iv_x[2] < 0 or iv_x[1] > 0 else
           ", which includes 0: the sign of the gap rests on this draw of held-out "
           "requests; ")
        + "the training requests and the paraphrases are one draw too, which no interval "
        "here resamples. This reading is not part of the verdict. ")
if low3 is not None:
    txt += ("The first three seeds under the 3-seed contract (lower ends of the "
            "per-request intervals): " + ", ".join(f"{x:+.3f}" for x in low3)
            + f", {int((low3 > 0).sum())} of 3 above 0. ")
sd1 = others.std(ddof=1)
z1 = (succ_all[sql_all][1] - others.mean()) / sd1 if sd1 > 0 else 0.0
txt += (f"**Seed 1's SQL agent** ({succ_all[sql_all][1]:.3f}) ranks {rank1} of "
        f"{len(seeds_all)} SQL agents (1 = best; the others: mean {others.mean():.3f}, "
        f"sd {sd1:.3f}"
        + ("" if sd1 == 0 else f", so it lies {z1:.1f} sd above their mean"
           + (": within their spread, not an outlier" if abs(z1) < 2 else ": an outlier"))
        + "); its two SQL decoders agree on "
        f"{agree1:.1%} of the requests, so the decoder is not what differs. ")
if not quick:
    eff_i = (sw[1, 0] + sw[1, 1] - sw[0, 0] - sw[0, 1]) / 2
    eff_o = (sw[0, 1] + sw[1, 1] - sw[0, 0] - sw[1, 0]) / 2
    who = [n for n, e, f in (("the initialisation", eff_i, eff_o),
                             ("the batch order", eff_o, eff_i))
           if e >= exc / 2 and abs(f) < exc / 2]
    txt += (f"Crossing seeds 0 and 1 (init, order): (0, 1) {sw[0, 1]:.3f}, (1, 0) "
            f"{sw[1, 0]:.3f}, beside (0, 0) {sw[0, 0]:.3f} and (1, 1) {sw[1, 1]:.3f} "
            f"(the swapped agents fit their training requests: "
            + ", ".join(f"{x:.2f}" for x in sw_fit) + "). Main effect of the "
            f"initialisation {eff_i:+.3f}, of the batch order {eff_o:+.3f}, against "
            f"seed 1's excess {exc:+.3f}: by the registered rule "
            + (f"{who[0]} explains it." if who else "neither factor alone explains it "
               "(each seed's agent comes from both, jointly).")
            + " Which requests an agent gets right moves with both: agents with the "
            "same initialisation and another batch order agree on "
            + " and ".join(f"{x:.0%}" for x in agree_same) + " of the requests "
            f"(seeds 0 and 1 themselves on {agree_other:.0%})."
            + " The data split cannot differ: requests and programs are built "
            "before, and independently of, the seed.")
else:
    txt += "Quick mode does not run the crossed agents (the stored runs hold them)."
display(Markdown(txt))

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
# ### Case 1 again, with the learned agents' own errors
#
# Case 1's noisy agent erred at one hand-set rate on every token, SQL boilerplate included, and its free-SQL
# retries rewrote the whole query. Here the error rates come from the trained agents: by teacher forcing on the
# held-out requests we count, per token class, how often an agent's most likely next token is wrong after a
# correct prefix (`token_error_profile`), and rerun case 1's episodes with those rates on the held-out requests:
#
# * **free SQL** with the SQL agent's profile, with **token-level repair** (when SQLite's message names a token,
#   `near "X"`, `no such column: X`, only that token is redrawn, otherwise the query is written again) or by
#   rewriting the whole query; the baseline is whichever of the two succeeds more often (mean over seeds);
# * **DSL + verifier** with the DSL agent's profile and the verifier's structured repair;
#
# both with `retries` retries and no destructive statements (the learned agents never wrote one),
# `samples_per_intent` episodes per held-out request and seed. This is still the noisy policy of case 1 (errors
# independent across tokens): its error *rates* are the learners', but its error *kinds* are case 1's, where
# half of the wrong tokens are hallucinations or slips outside the vocabulary (`'Pariss'`, `orders.amount`,
# `SELCT`). The verifier catches a hallucinated value or column; SQLite accepts a wrong string literal silently.
# A trained agent with a closed output vocabulary cannot write any of them, so every arm also runs with
# in-vocabulary confusions only (`oov_share = 0`), the kind of error the case-4 agents make; the claim keeps case
# 1's mix, and this second run says how much of its gain comes from that mix.

# %%
profiles = {(i, s): dsl.token_error_profile(agents[i, s], a_test, i)
            for i in dsl.AGENT_INTERFACES for s in agent_seeds}
rates = {k: {c: e / n for c, (e, n) in p.items()} for k, p in profiles.items()}
mean_rate = {k: sum(e for e, _ in p.values()) / sum(n for _, n in p.values())
             for k, p in profiles.items()}
prof_tab = pd.DataFrame(rates).T.rename_axis(["agent", "seed"])
prof_tab["all tokens"] = pd.Series(mean_rate)
display(prof_tab.round(4).rename_axis("per-token error rate, teacher forcing", axis=1))

prof_rows, prof_cache = [], {}
for oov in (0.5, 0.0):  # case 1's mix of error kinds; in-vocabulary confusions only
    for s in agent_seeds:
        for iface, repair in (("sql", False), ("sql", True), ("dsl", False)):
            key = (seed, 7, s, ("sql", "dsl").index(iface), int(repair))
            rng = repro.rng(*key) if oov == 0.5 else repro.rng(*key, 1)
            eps_ = [dsl.agent_episode(agent_con, it, iface, rates[iface, s], rng,
                                      retries=retries, cache=prof_cache,
                                      sql_repair=repair, oov_share=oov)
                    for it in a_test for _ in range(samples_per_intent)]
            prof_rows.append(dict(
                errors="case 1 mix" if oov else "in-vocabulary", seed=s,
                arm={"dsl": "DSL + verifier"}.get(iface, "free SQL, " + (
                    "token repair" if repair else "rewrite")),
                success_K0=np.mean([e.success_at == 0 for e in eps_]),
                success_K=np.mean([e.success_at is not None for e in eps_]),
                invalid_executed=np.mean([e.invalid_executed for e in eps_])))
prof_all = pd.DataFrame(prof_rows).set_index(["errors", "arm", "seed"])
display(prof_all.round(4).unstack("errors"))


def profile_gain(errors):
    """DSL + verifier minus the better SQL repair (chosen by the mean over seeds)."""
    r = prof_all.xs(errors)
    best = max(("free SQL, token repair", "free SQL, rewrite"),
               key=lambda a: r.xs(a)["success_K"].mean())
    base = r.xs(best)["success_K"].to_numpy()
    return r.xs("DSL + verifier")["success_K"].to_numpy() - base, base, best, r


prof_gain, prof_sql, sql_best, prof_res = profile_gain("case 1 mix")
prof_dsl = prof_res.xs("DSL + verifier")["success_K"].to_numpy()
prof_gain_iv, prof_sql_iv, sql_best_iv, _ = profile_gain("in-vocabulary")
n_ep = len(a_test) * samples_per_intent  # episodes per arm and seed
# a binomial 95 % interval of the per-seed gain
prof_ci = 1.96 * np.sqrt((prof_dsl * (1 - prof_dsl) + prof_sql * (1 - prof_sql)) / n_ep)

# %% tags=["remove-input"]
display(Markdown(
    "**Reading.** With case 1's error kinds, DSL + verifier minus the better SQL repair "
    f"({sql_best}) is " + ", ".join(f"{g:+.3f} ± {c:.3f}" for g, c in zip(prof_gain, prof_ci))
    + " per seed (95 % binomial interval of the difference"
    + (f"; at {int((np.abs(prof_gain) <= prof_ci).sum())} of {len(prof_gain)} seeds it "
       "covers 0" if (np.abs(prof_gain) <= prof_ci).any() else "") + "). With in-vocabulary "
    f"confusions only (better SQL repair: {sql_best_iv}) it is "
    + ", ".join(f"{g:+.3f}" for g in prof_gain_iv)
    + ": the part of the gain that does not come from hallucinated names and values."))

# %% [markdown]
# ## Case 5: structured credit for a request-conditioned policy
#
# Case 3 learned one program at a time with a tabular policy. Here the learner is the case-4 architecture (a
# smaller transformer, width 32), which reads the request and writes the program token by token, and the
# question is the paper's third mechanism: does the verifier's *structured* error, which names the token where
# a program went wrong, teach a policy more than a bare success signal?
#
# Setting (ours). A policy is first trained by supervision on `n_sft` = 200 labelled intents (1000 steps). It
# is then trained by reinforcement on the **other 100 training requests** with no gold program, only the
# outcome (the executed rows equal the requested rows). We measure what the practitioner cares about: its
# **greedy success on 300 held-out requests**, every 25 steps along the run.
#
# An earlier version of this case trained without an anchor at a learning rate of 1e-3 and one sample per <!-- paper -->
# request: every arm *lost* held-out success and forgot its supervised requests, so the comparison measured
# drift, not credit (numbers below, from its diagnosis). The experiment is now set up as RL fine-tuning is
# done in practice, fixed before any of its runs was read (except the anchor strength, see below):
#
# * **several samples per request with a per-request baseline** (RLOO): each step draws 8 requests and samples
#   4 programs for each; sample `i` gets the advantage `A_i = R_i − mean(R_j, j ≠ i)` over its own request's
#   other samples, so an easy request does not reward every program written for it;
# * **a KL anchor to the warm start**: the loss adds `β · KL(π ‖ π_warm)` (β = 0.2, exact over the output <!-- paper -->
#   vocabulary at every sampled position), and Adam runs at a learning rate of 1e-4, for 600 steps; <!-- paper -->
#   the anchor was first set to β = 0.05; with it one seed of three drifted below the `no_drift` bar, and a <!-- paper -->
#   one-seed probe at β = 0.2 kept both arms above it, so every arm and seed was rebuilt at β = 0.2 (the <!-- paper -->
#   bar unchanged; the switch was decided on the condition, whatever the claim read). The claim's numbers at
#   β = 0.05 had been read before the switch: their per-seed signs were the same as below (−, +, −, the third <!-- paper -->
#   seed then inconclusive by `no_drift`), so the switch did not turn the verdict;
# * two arms from the same warm start, with the same requests, samples and budget:
#   **sparse** (every token of program `i` gets `A_i`) and **per-token credit**, which is *blame-conserving*:
#   a program the verifier accepts is scored as in sparse; a rejected one keeps the same total blame
#   `A_i × (tokens)`, all of it put on **the token the verifier names**, none on the valid prefix before it
#   or on the tokens that followed a broken prefix. The two arms differ only in *where* a rejected program's
#   blame lands.
#
# The measured quantity is the **area under the held-out success curve** (trapezoid over the evaluations,
# divided by the budget: the mean held-out success over the run), which needs no censoring. Its condition,
# `no_drift`, is fixed in advance: at every evaluation, both arms still answer their supervised requests
# correctly at least 90 % of the time. The numbers come from `data/05_dsl_harness/make_credit.py` (about
# 3 minutes per seed on one core), which stores the curves and the per-request outcomes, not the weights;
# quick mode trains a tiny version live. The advantages, as the learner uses them (`group_advantages`):

# %%
src = inspect.getsource(dsl.group_advantages)
print(src[src.index("    G = R.reshape") :])

# %% [markdown]
# and the loss of one step (`group_reinforce`), with the anchor:

# %%
src = inspect.getsource(dsl.group_reinforce)
print(src[src.index("        lo, hi = ") : src.index("        opt.zero_grad()")])

# %%
credit_cfg = dsl.checkpoint_config("credit")
if quick:
    credit_cfg.update(seeds=[0], n_sft=40, sft_steps=60, rl_steps=12, n_requests=4,
                      k=2, eval_every=4, d_model=16, n_layer=1)
for k in ("db_seed", "intent_seed", "n_train"):
    credit_cfg[k] = agent_cfg[k]  # the same requests as case 4
credit_cfg["n_test"] = len(a_test)
credit_sft = a_train[: credit_cfg["n_sft"]]
credit_pool = a_train[credit_cfg["n_sft"] :]
credit_sets = {"heldout": a_test, "supervised": credit_sft, "rl": credit_pool}
credit_arms = credit_cfg["arms"]
credit_curves, credit_eval = {}, {}  # (arm, seed) -> curves / eval set -> outcomes
if quick:  # tiny policies trained live: the pipeline runs, the numbers mean nothing
    credit_seeds, credit_cache = credit_cfg["seeds"], {}
    for s in credit_seeds:
        with repro.seeded(s):
            warm = dsl.make_agent("dsl", credit_cfg["d_model"], credit_cfg["n_layer"],
                                  credit_cfg["n_head"])
            dsl.train_agent(warm, credit_sft, "dsl", credit_cfg["sft_steps"],
                            credit_cfg["sft_batch"], credit_cfg["sft_lr"], seed=s)
        for arm in credit_arms:
            m = dsl.make_agent("dsl", credit_cfg["d_model"], credit_cfg["n_layer"],
                               credit_cfg["n_head"])
            m.load_state_dict(warm.state_dict())
            cur = dsl.group_reinforce(
                m, warm, agent_con, credit_pool, arm, credit_cfg["rl_steps"],
                credit_cfg["n_requests"], credit_cfg["k"], credit_cfg["rl_lr"],
                credit_cfg["beta"], seed=s, eval_sets=credit_sets,
                eval_every=credit_cfg["eval_every"], cache=credit_cache)
            credit_curves[arm, s] = {q: cur[q] for q in ("success", "valid", "kl")}
            credit_eval[arm, s] = {n: cur[f"eval/{n}"] for n in credit_sets}
            credit_steps = cur["eval_steps"]
else:  # the default run: the measurements of make_credit.py
    credit_cfg = scripts.with_seeds(credit_cfg, scripts.model_seeds(seed))
    credit_seeds = credit_cfg["seeds"]
    ck5 = checkpoints.load("05_dsl_harness", "credit", config=credit_cfg)
    credit_steps = np.array(ck5.manifest["extra"]["eval_steps"])
    for arm in credit_arms:
        for s in credit_seeds:
            credit_curves[arm, s] = {q: ck5.tensors[f"curve/{q}/{arm}/{s}"].numpy()
                                     for q in ("success", "valid", "kl")}
            credit_eval[arm, s] = {n: ck5.tensors[f"eval/{n}/{arm}/{s}"].numpy() > 0
                                   for n in credit_sets}

# %% [markdown]
# Per seed: held-out greedy success at the start (the warm start, shared by both arms) and at the end, the
# area under the held-out curve, the lowest supervised-request success along the run (the `no_drift`
# condition), the sampled success and valid rate over the last 50 steps, and the KL to the warm start there:

# %%
def credit_row(arm, s):
    ev, cu = credit_eval[arm, s], credit_curves[arm, s]
    ho = ev["heldout"].mean(1)
    return {"held-out, start": ho[0], "held-out, end": ho[-1],
            "held-out AUC": dsl.curve_auc(credit_steps, ho),
            "RL requests, end": ev["rl"].mean(1)[-1],
            "supervised, lowest": ev["supervised"].mean(1).min(),
            "sampled success, last 50": cu["success"][-50:].mean(),
            "sampled valid, last 50": cu["valid"][-50:].mean(),
            "KL to warm start, last 50": cu["kl"][-50:].mean()}


credit_tab = pd.DataFrame({(arm, s): credit_row(arm, s) for arm in credit_arms
                           for s in credit_seeds}).T.rename_axis(["arm", "seed"])
credit_auc = {arm: np.array([credit_tab.loc[(arm, s), "held-out AUC"]
                             for s in credit_seeds]) for arm in credit_arms}
auc_gain = credit_auc["token_credit"] - credit_auc["sparse"]
display(credit_tab.round(3))

# %%
fig, ax = plt.subplots(1, 3, figsize=(13, 3.4), layout="constrained")
w5 = min(25, credit_cfg["rl_steps"])
for c, arm in zip(plotting.PALETTE, credit_arms):
    for j, s in enumerate(credit_seeds):
        lab = arm.replace("_", "-") if j == 0 else None
        ax[0].plot(credit_steps, credit_eval[arm, s]["heldout"].mean(1), color=c,
                   marker="o", ms=2, lw=1, label=lab)
        sup = credit_eval[arm, s]["supervised"].mean(1)
        ax[1].plot(credit_steps, sup, color=c, lw=1)
        y = np.convolve(credit_curves[arm, s]["success"], np.ones(w5) / w5, "valid")
        ax[2].plot(np.arange(w5, len(y) + w5), y, color=c, lw=1)
ax[1].axhline(0.9, color="grey", lw=0.8, ls=":")
ax[0].set(xlabel="RL step", ylabel="greedy success", title="held-out requests")
ax[1].set(xlabel="RL step", title="supervised requests (no_drift: ≥ 0.9)")
ax[2].set(xlabel="RL step", ylabel="sampled success (running mean)",
          title="RL requests, sampled")
ax[0].legend()
plt.show()

# %% tags=["remove-input"]
# Paired over held-out requests: per seed, the per-request mean over the run's
# evaluations (AUC per request), token credit minus sparse, with a 95 % interval.
kl_end = credit_tab["KL to warm start, last 50"].groupby(level="arm").mean()
per_req = {s: (credit_eval["token_credit", s]["heldout"].mean(0)
               - credit_eval["sparse", s]["heldout"].mean(0)) for s in credit_seeds}
pr_ci = {s: 1.96 * v.std(ddof=1) / np.sqrt(len(v)) for s, v in per_req.items()}


def paired(d):
    """Mean and 95 % half-width of per-request differences."""
    return d.mean(), 1.96 * d.std(ddof=1) / np.sqrt(len(d))


# the requests RL trains on: the same paired comparison (where the learning signal acts)
rl_pair = {s: paired(credit_eval["token_credit", s]["rl"].mean(0)
                     - credit_eval["sparse", s]["rl"].mean(0)) for s in credit_seeds}
# how far RL moves held-out success: the sparse arm's per-request AUC minus its warm start
ho_move = {s: paired(credit_eval["sparse", s]["heldout"].mean(0)
                     - credit_eval["sparse", s]["heldout"][0]) for s in credit_seeds}
rl_sign = ("below" if all(m + c < 0 for m, c in rl_pair.values()) else "above"
           if all(m - c > 0 for m, c in rl_pair.values()) else None)
moved = {arm: np.mean([credit_eval[arm, s]["heldout"].mean(1)[-1]
                       - credit_eval[arm, s]["heldout"].mean(1)[0]
                       for s in credit_seeds]) for arm in credit_arms}
def share_valid_failed(cu):
    v, f = cu["valid"][-50:].mean(), cu["success"][-50:].mean()
    return (v - f) / max(1e-9, 1 - f)


fail_valid = {arm: np.mean([share_valid_failed(credit_curves[arm, s])
                            for s in credit_seeds]) for arm in credit_arms}
display(Markdown(
    "**Reading.** Held-out greedy success moves by "
    + ", ".join(f"{moved[a]:+.3f} ({a.replace('_', '-')})" for a in credit_arms)
    + " from the warm start to the end of the run (mean over seeds); the KL to the "
    "warm start over the last 50 steps is "
    + ", ".join(f"{kl_end[a]:.2f} ({a.replace('_', '-')})" for a in credit_arms)
    + " nats per program. Area under the held-out curve, "
    "per-token minus sparse, per seed: "
    + ", ".join(f"{g:+.4f}" for g in auc_gain)
    + "; paired over the held-out requests, the per-seed 95 % intervals are "
    + ", ".join(f"{per_req[s].mean():+.4f} ± {pr_ci[s]:.4f}" for s in credit_seeds)
    + ". Of the failed samples of the last 50 steps, "
    + ", ".join(f"{fail_valid[a]:.0%} ({a.replace('_', '-')})" for a in credit_arms)
    + " verify (valid but wrong): in those the verifier names no token, and the "
    "two arms give the same advantages; per-token credit can only act on the rest."
    + " On the requests RL trains on, where the learning signal acts, the same paired "
    "per-request AUC difference (per-token − sparse) is "
    + ", ".join(f"{m:+.3f} ± {c:.3f}" for m, c in rl_pair.values())
    + (f": per-token credit is {rl_sign} sparse there at every seed, with intervals that "
       "exclude 0" if rl_sign else "") + ". The sparse arm's held-out AUC exceeds its warm "
    "start by " + ", ".join(f"{m:+.3f} ± {c:.3f}" for m, c in ho_move.values())
    + ": RL moves held-out success little, so the held-out claim can only resolve "
    "differences of about the paired intervals' width."))

# %% [markdown]
# ### The earlier, unanchored version (why the setting changed)
#
# The diagnosis of the earlier version (`credit_sweep.json`, from a script that has since been replaced; it
# evaluated that version's policies, trained by REINFORCE with one sample per request, lr 1e-3 and no anchor,
# on 60 held-out requests):

# %% tags=["remove-input"]
old_path = checkpoints.fetch("05_dsl_harness", "credit_sweep.json")
old_sweep = json.loads(old_path.read_text())
old_t = pd.DataFrame([dict(policy=k.split("/")[0], seed=k.split("/")[1], **v)
                      for k, v in old_sweep["checkpoint"].items()])
old_t = old_t.groupby("policy")[["greedy_sft", "greedy_test"]].mean()
old_rl = old_t.drop("warm")
display(Markdown(
    f"Warm start: held-out greedy success {old_t.loc['warm', 'greedy_test']:.2f}, "
    f"supervised {old_t.loc['warm', 'greedy_sft']:.2f}; after RL, across its four "
    f"arms, held-out {old_rl.greedy_test.min():.2f}–"
    f"{old_rl.greedy_test.max():.2f} and supervised {old_rl.greedy_sft.min():.2f}–"
    f"{old_rl.greedy_sft.max():.2f} (mean over three seeds). "
    + ("Every arm lost held-out success and forgot its supervised requests: it "
       "drifted away from reading the request, which the anchor, the smaller step and "
       "the `no_drift` condition now guard against."
       if (old_rl.max() < old_t.loc["warm"]).all() else "")))


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
# only verified programs). Case 1 at the learned agents' error rates:
#
# * `success_gain_dsl`: DSL + verifier minus free SQL with its better repair, task success with `retries`
#   retries, with each interface's per-token error rates measured on the case-4 agent of the same seed (one
#   value per seed). Its error *kinds* stay case 1's (half of the wrong tokens outside the vocabulary); the
#   note gives the gain with in-vocabulary confusions only and the per-seed binomial intervals. The hand-set
#   sweep's gain at one ε (every token errs at the same rate, SQL retries rewrite the query) is in its note, as
#   an illustration of the error model only.
#
# From case 3:
#
# * `filter_reaches_level`: the share of learned programs whose filter arm reaches the level at all within the
#   budget.
#
# `learning_signal_gain` (REINFORCE steps to a 50 % success rate, sparse ÷ verifier filter, median over the
# learned programs; a censored run counts as the full budget) is now a **check** that the filter is never
# slower: it is close to true by construction, since the sparse arm cannot move before it samples a success,
# which it rarely does in case 3's action space.
#
# Claims from the learned agent (case 4; three seeds each, thirty for `learned_success_gain`, on the held-out
# intents):
#
# * `learned_success_gain`: on **paraphrased** held-out requests, at the training-set size the reading rule picks,
#   success of the DSL agent with verifier-constrained decoding and repair minus the SQL agent's better decoder
#   (free or grammar-constrained, both with SQLite-guided repair); since round 4 the measured number is the
#   lower end of the 95 % t-interval over thirty training seeds at 1000 requests (registered before its runs), so
#   it holds only when that interval excludes 0 (the note gives the per-seed gains, the first three seeds'
#   per-request intervals, and the templated comparison of case 4);
# * `constrained_decoding_gain`: DSL agent, constrained minus free decoding, **both with verifier repair**.
#   Without repair the difference cannot be negative: when free greedy decoding writes a valid program, every
#   token it chose was allowed, so constrained decoding writes the same program; it can only change answers
#   that were invalid, i.e. already wrong. The strongest baseline is free decoding that uses the same verifier
#   after the fact (reject, ban the named token, decode again); the no-repair gap is in the note;
# * `coverage_matters`: success drop of the full DSL harness when its type checks are switched off;
# * `bits_per_intent_ratio`: bits the trained model needs for the gold SQL ÷ for the gold DSL program;
# * `structured_credit_auc_gain`: case 5, area under the held-out greedy success curve of RL with
#   blame-conserving per-token credit from the verifier's error position minus that of the sparse reward (same
#   warm start, per-request baseline, KL anchor, requests and samples), per seed; the note gives the paired
#   per-request intervals.

# %% [markdown]
# ### Conditions
#
# Each claim about a sampled or learned agent names the conditions that put it in the regime it speaks of, fixed
# before its numbers are read; a claim whose conditions fail at every seed is *inconclusive*, not "not held":
#
# * case 1 (`baseline_room`): at the SQL agent's measured error rates, free SQL with its better repair does not
#   already succeed always, so a gain is possible;
# * case 3 (`task_needs_learning`, `sparse_gets_signal`): the policies do not already reach the level at their
#   first step (for `filter_reaches_level`); `sparse_gets_signal` (on at least half of the programs the sparse
#   learner samples a correct program at least once) is kept on record as the reason `learning_signal_gain` is
#   a check: where it fails, the sparse advantages are all zero and the ratio holds by construction;
# * case 4 (`agents_fit_*`, `agents_plateau`): each learned agent answers its own training requests (the first
#   60) correctly by greedy decoding at least 95 % of the time, and its training loss is flat at the end (the
#   book-wide plateau rule: the last fifth improved by at most 5 % of the whole improvement); the same two rules
#   for the paraphrase agents at 1000 training requests, at all thirty seeds of the seed-level reading
#   (`para_fit_*`, `para_plateau`; the claim is one number, so each must hold at every seed);
# * case 5 (`no_drift`): at every evaluation along the run, both RL policies still answer their supervised
#   requests correctly at least 90 % of the time (the lower of the two is recorded per seed); a policy that
#   has drifted away from reading the request measures drift, not credit.

# %%
r01 = res.set_index(["interface", "eps"])
eps_ref = 0.1 if 0.1 in eps_grid else eps_grid[len(eps_grid) // 2]
hist4 = {  # the agents' training loss curves (default: from the manifest)
    k: agent_loss[k] if quick else ck.manifest["history"]["loss/{}/{}".format(*k)]
    for k in agents
}
fit_set = a_train[:60]
first = {a: np.mean([c["success"][0] for c in curves[a]]) for a in dsl.ARMS}
cond = {
    "baseline_room": (list(prof_sql), "<", 1.0,
                      "the free-SQL baseline leaves room for a gain",
                      "success at the SQL agent's error rates, better repair"),
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
for iface in dsl.AGENT_INTERFACES:  # the paraphrase agents of the seed-level reading
    cond[f"para_fit_{iface}"] = (
        [para_fit[iface, n_seed, s] for s in seeds_all], ">=", 0.95,
        f"the {iface.upper()} agent trained on {n_seed} paraphrased requests fits them "
        f"(all {len(seeds_all)} seeds)", "greedy success on its training requests")
cond["para_plateau"] = (
    [max(train.plateau(para_loss[i, n_seed, s]) for i in dsl.AGENT_INTERFACES)
     for s in seeds_all], "<=", 0.05,
    f"both paraphrase agents' training loss is flat at the end (n_train = {n_seed}, "
    f"all {len(seeds_all)} seeds)",
    "improvement over the last fifth / whole, worse agent")
cond["no_drift"] = (
    [min(credit_eval[a, s]["supervised"].mean(1).min() for a in credit_arms)
     for s in credit_seeds], ">=", 0.9,
    "along RL both policies still read their supervised requests",
    "lowest greedy success on the supervised requests, both arms, every evaluation")
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
NOTES = {
    "success_gain_dsl": f"with {retries} retries, per seed; DSL + verifier "
    + ", ".join(f"{x:.4f}" for x in prof_dsl) + ", free SQL with token repair "
    + ", ".join(f"{x:.4f}" for x in prof_res.xs("free SQL, token repair")["success_K"])
    + ", free SQL rewriting the query "
    + ", ".join(f"{x:.4f}" for x in prof_res.xs("free SQL, rewrite")["success_K"])
    + f" (baseline: {sql_best})"
    + ". Per-token error rate (all tokens, mean over seeds): DSL agent "
    f"{np.mean([mean_rate['dsl', q] for q in agent_seeds]):.4f}, SQL agent "
    f"{np.mean([mean_rate['sql', q] for q in agent_seeds]):.4f}. Hand-set sweep "
    f"(illustration, ε = {eps_ref}, same rate on every token, SQL retries rewrite): "
    f"gain {gain:+.3f} with {retries} retries, {gain0:+.3f} without. 95 % binomial "
    "intervals of the per-seed gain: ± " + ", ".join(f"{c:.3f}" for c in prof_ci)
    + ". Error kinds are case 1's (half of the wrong tokens outside the vocabulary, "
    "which a closed-vocabulary agent cannot write); with in-vocabulary confusions only "
    "the gain is " + ", ".join(f"{g:+.3f}" for g in prof_gain_iv)
    + f" (baseline: {sql_best_iv}).",
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
    "learned_success_gain": "seed-level (registered in round 4): gain per seed "
    + ", ".join(f"{x:+.3f}" for x in d_all) + f", mean {iv_all[0]:+.3f} "
    f"[{iv_all[1]:+.3f}, {iv_all[2]:+.3f}] over {len(seeds_all)} seeds; SQL "
    "baseline "
    f"{ARM_NAME[sql_all]}. First-registered ten seeds: {iv_10[0]:+.3f} "
    f"[{iv_10[1]:+.3f}, {iv_10[2]:+.3f}] (the count was raised to thirty after "
    "seed 3's numbers had been seen, on cost). Added at review, not in the verdict: "
    f"seeds and held-out requests resampled together [{iv_x[1]:+.3f}, "
    f"{iv_x[2]:+.3f}]. The 3-seed reading: "
    f"read at n_train = {n_read} (rule: smallest size where "
    f"a decoder's mean held-out success reaches {para_cfg['read_level']}, else the "
    "largest" + ("" if best_read >= para_cfg["read_level"] else
                 f"; no size reached it, best mean there {best_read:.3f}, so it is "
                 "read below the level the issue asked for, by the rule's fallback")
    + f"); SQL baseline: {ARM_NAME[sql_arm]}. Per seed, gain [95 % paired bootstrap]: "
    + ", ".join(f"{g:+.3f} [{lo:+.3f}, {hi:+.3f}]" for g, lo, hi in para_boot.values())
    + f"; pooled {pooled[0]:+.3f} [{pooled[1]:+.3f}, {pooled[2]:+.3f}]. Held-out "
    "success there: " + "; ".join(
        f"{ARM_NAME[a]} " + ", ".join(f"{para_out[a, n_read, q][0].mean():.3f}"
                                      for q in para_seeds) for a in para_arms)
    + (f". At n_train = {n_trains[-1]}: gain " + ", ".join(
        f"{g:+.3f}" for g in gain_at(n_trains[-1])) if n_read != n_trains[-1] else "")
    + ". On case 4's templated requests (300 training requests, free SQL with "
    f"repair): gain {(dsl_c.success_K - sql_f.success_K).mean():+.3f}; DSL right and "
    f"SQL wrong {pair_w}, the reverse {pair_l} over {len(a_test)} intents × "
    f"{len(agent_seeds)} seeds (sign test p = {pair_p:.2f}).",
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
    + "); the drop cannot exceed how often the agent writes a type error, and it is "
    "below 0 only if a program the type checks reject returns the gold rows, so the "
    "claim fails only by a zero drop. In requests per seed: " + ", ".join(
        f"{round(x * len(a_test))}" for x in cov_full.success_K - cov_type.success_K)
    + f" of {len(a_test)}.",
    "bits_per_intent_ratio": f"DSL {bits['dsl'].mean():.2f} bits, SQL "
    f"{bits['sql'].mean():.2f} bits per held-out intent (mean over seeds).",
    "structured_credit_auc_gain": "AUC of held-out greedy success per seed: "
    + "; ".join(f"{a.replace('_', '-')} " + ", ".join(f"{x:.3f}" for x in credit_auc[a])
                for a in credit_arms)
    + ". Paired over the held-out requests (per-request mean over the evaluations), "
    "per seed: " + ", ".join(f"{per_req[q].mean():+.4f} ± {pr_ci[q]:.4f}"
                             for q in credit_seeds)
    + f" (95 %). Held-out success, warm start → end: sparse {moved['sparse']:+.3f}, "
    f"per-token {moved['token_credit']:+.3f} (mean over seeds). On the requests RL "
    "trains on, paired per-request AUC, per-token − sparse: "
    + ", ".join(f"{m:+.3f} ± {c:.3f}" for m, c in rl_pair.values()) + " (95 %).",
}


def record(rows):
    for cid, statement, paper, measured, op, target, unit, baseline, given in rows:
        rec.claim(cid, statement, paper=paper, measured=measured, op=op,
                  target=target, unit=unit, baseline=baseline, note=NOTES[cid],
                  given=given)


# %%
# close to true by construction (the sparse arm rarely samples a success, and
# without one it cannot move), so a check: the filter is never slower than sparse
rec.check(
    "learning_signal_gain",
    ratio,
    1.0,
    op=">=",
    note="steps to the level, sparse ÷ verifier filter"
    + (" (a lower bound: sparse censored)" if censored else "")
    + ". " + NOTES["learning_signal_gain"],
)
AGENTS4 = ("agents_fit_dsl", "agents_fit_sql", "agents_plateau")
DSL4 = ("agents_fit_dsl", "agents_plateau")
NO_NUMBER = "(no number)"
record([  # id, statement, paper, measured, op, target, unit, baseline, given
    ("success_gain_dsl", "At the learned agents' own per-token error rates (with case "
     "1's error kinds), DSL + verifier succeeds more often than free SQL with its "
     "better repair",
     f"higher success {NO_NUMBER}", list(prof_gain), ">", 0.0,
     "success difference (DSL + verifier − free SQL)", list(prof_sql),
     ("baseline_room", *AGENTS4)),
    ("filter_reaches_level", f"With the verifier as filter, every learned program "
     f"reaches {level:.0%} success within {rl_steps} steps",
     f"denser learning signal {NO_NUMBER}", filter_reached, ">=", 1.0,
     "share of programs that reach the level", None, ("task_needs_learning",)),
    ("learned_success_gain", "On paraphrased held-out requests (unseen frames and "
     "wording), a learned agent answers more often through the DSL (verifier-"
     "constrained decoding + repair) than through SQL (its better decoder, free or "
     f"grammar-constrained, with SQLite-guided repair), at {n_seed} training requests; "
     "held where the 95 % interval over training seeds excludes 0",
     f"higher success through a DSL + verifier {NO_NUMBER}", iv_all[1], ">", 0.0,
     f"lower end of the two-sided 95 % t-interval over {len(seeds_all)} seeds of the "
     f"held-out success gain ({len(p_test)} requests, n_train = {n_seed})",
     list(succ_all[sql_all]),
     ("para_fit_dsl", "para_fit_sql", "para_plateau")),
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
    ("structured_credit_auc_gain", "Blame-conserving per-token credit from the "
     "verifier's error position raises a request-conditioned policy's held-out "
     "success over the run more than a sparse reward (anchored RL with a per-request "
     "baseline)", f"denser learning signal {NO_NUMBER}", list(auc_gain), ">", 0.0,
     "area under the held-out greedy success curve, per-token − sparse",
     list(credit_auc["sparse"]), ("no_drift",)),
])
rec.save()

# %% [markdown]
# ## Known limits
#
# * Cases 1–3 measure interfaces under **our** error model (every SQL token errs at the same rate; retries
#   rewrite the query), so their gains follow largely from that model. `success_gain_dsl` takes its per-token
#   rates from the case-4 agents (teacher forcing) and repairs SQL token by token, but keeps case 1's
#   assumption that errors are independent across tokens and case 1's error kinds (half hallucinations, which
#   the verifier catches and SQLite often accepts); its in-vocabulary run shows how much of the gain rests on
#   them. Cases 4 and 5 replace the model by learners, which are small and read templated requests.
# * Paraphrases are ours and small: six frames, two or three synonyms per word, three filler phrases. Held-out
#   wording can only be noise to an agent trained from scratch (it has never seen the words), so "held-out
#   wording" here means unseen filler words plus unseen combinations of seen synonyms and frames; an LLM would
#   bring the meaning of new words with it. The sample-efficiency curve uses one steps rule at every size
#   (600 steps or 64 passes over the data, whichever is more), and its agents are scored by stored per-request
#   outcomes, not reloaded weights.
# * Case 5's claim is about held-out requests; the case's reading also says how far RL moves them from the warm
#   start and compares the arms on the requests RL trains on, with paired intervals. Those two measurements
#   were added at review, after the claim's numbers were read, and are kept out of its verdict.
# * Case 5's outcome check compares rows as multisets, so it rewards programs that differ from the gold one in
#   clauses without effect on the rows (an `order` without a `limit`, a `limit` above the row count); both arms
#   see the same check, so it does not favour either.
# * Case 5 has one warm start size (200 labelled intents), one anchor strength (β = 0.2, raised from 0.05 <!-- paper -->
#   after one seed drifted, see case 5), one learning rate and one budget (600 steps); the anchor keeps the policies near their warm start
#   by design, so the claim compares two bounded moves. Supervised replay instead of the anchor was not tried.
# * The seed-level reading of `learned_success_gain` varies the training (initialisation, batch order) over thirty
#   seeds with one fixed set of training and held-out requests, so its interval speaks for this data split and
#   these paraphrases; a new draw of requests would add its own spread. The review-time crossed bootstrap
#   (seeds and held-out requests resampled) counts the held-out draw only; the training draw is not resampled.
# * The grammar-constrained SQL decoder knows the SQL grammar and the schema's names, not scopes or types (a
#   decoder that did would be a verifier for SQL, the DSL's verifier in another syntax); the templated
#   comparison of case 4 has no grammar-constrained arm. A practitioner's strongest constrained SQL decoder
#   (PICARD-style incremental parsing with scope checks) was not built; it would only make the SQL baseline
#   stronger.

# %% tags=["remove-input"]
ext = (f" The first curve (sizes up to {first_sizes[-1]}) reached at most {first_best:.3f}; "
       f"it was extended to {n_trains[-1]} with the rule and the bars unchanged."
       if n_trains[-1] > first_sizes[-1] else "")
level_txt = f"{para_cfg['read_level']:.1f}"
if best_read >= para_cfg["read_level"]:
    lim = (f"`learned_success_gain` is read at {n_read} training requests, the first "
           f"size where a decoder's mean held-out success reaches {level_txt} (best "
           f"there {best_read:.3f}).{ext} There the agents still fail on "
           f"{1 - best_read:.0%} or more of the held-out requests, and the claim "
           "compares agents at that one size; the curve shows how the gain moves "
           "with size.")
else:
    lim = (f"`learned_success_gain` is read by the rule's fallback: no training-set "
           f"size, up to {n_trains[-1]}, brings a decoder's mean held-out success to "
           f"{level_txt} (best {best_read:.3f} at {n_read}).{ext} Both agents fail on "
           "most held-out requests, mostly because they do not carry what they "
           "learned to the two unseen sentence frames, so the claim compares agents "
           "outside the regime the issue meant (an agent that mostly works). The "
           "rule names no condition for this case, so its verdict is recorded as "
           "measured; read it as \"no resolvable gain for agents that mostly fail "
           "on unseen frames\". More steps per size or pretrained word embeddings "
           "were not tried.")
probe = json.loads(
    checkpoints.fetch("05_dsl_harness", "probe_paraphrase.json").read_text())
pm = probe["metrics"]
probe_txt = (
    "* The curve's first extension (every size at least 20 passes over the data, sizes "
    "1000 and 3000) was probed at seed 0 only and replaced before any other seed: at "
    f"1000 ({probe['steps']['1000']} steps) its agents missed the fit bar (greedy success "
    f"on their training requests: DSL {pm['fit/dsl/1000/0']:.2f}, SQL "
    f"{pm['fit/sql/1000/0']:.2f}; held-out success "
    + ", ".join(f"{ARM_NAME[a]} {pm[f'success/{a}/1000/0']:.3f}"
                for a in para_arms)
    + f"). At 3000 ({probe['steps']['3000']} steps) both fit, "
    "and held-out success was "
    + ", ".join(f"{ARM_NAME[a]} {pm[f'success/{a}/3000/0']:.3f}" for a in para_arms)
    + "; that size (6000 steps per agent under the replacing rule) was dropped for "
    "time, so the gap at 3000 is one seed's exploratory number, not a claim.")
display(Markdown(
    "* " + lim + " Whether one seed's held-out requests resolve the issue's target "
    "gain of 0.05 is read off the run (the reading gives the intervals' "
    "half-widths, per seed and pooled), not assumed.\n" + probe_txt))
