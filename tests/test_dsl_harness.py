"""Tests of helpers.dsl_harness: the query DSL's verifier, constrained decoding, counting, SQL, Blocksworld."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import dsl_harness as d


@pytest.fixture(scope="module")
def con():
    return d.make_database(0, n_customers=60, n_products=12, n_orders=400)


@pytest.fixture(scope="module")
def intents(con):
    return d.make_intents(con, 40, seed=1)


# -- the verifier --------------------------------------------------------------------------------------------
def test_gold_programs_verify_and_execute(con, intents):
    for it in intents:
        assert d.verify(it.program).ok
        status, rows = d.execute(con, d.compile_sql(it.program))
        assert status == "ok" and d.results_equal(rows, it.result)


@pytest.mark.parametrize("tokens, kind", [
    ("select sum orders.total", "missing_clause"),
    ("from orders", "missing_clause"),
    ("drop orders", "write_forbidden"),
    ("from order select count orders.year", "syntax"),  # 'order' is a keyword, not a table
    ("from sales select count orders.year", "unknown_table"),
    ("from orders select average orders.total", "unknown_function"),
    ("from orders select sum orders.amount", "unknown_column"),
    ("from orders select sum products.price", "column_not_in_scope"),
    ("from customers join products select count products.price", "bad_join"),
    ("from customers select sum customers.city", "type_mismatch"),
    ("from orders select count orders.year where orders.year = 'Paris'", "type_mismatch"),
    ("from customers select count customers.age where customers.city < 'Paris'", "bad_operator"),
    ("from customers select count customers.age where customers.age => 3", "bad_operator"),
    ("from customers select count customers.age where customers.city = 'Pariss'", "unknown_value"),
    ("from customers select val customers.age by customers.city", "aggregation_error"),
    ("from orders select sum orders.total limit 3 where orders.year = 2021", "syntax"),
    ("from orders select sum orders.total where orders.year = 2021 where orders.year = 2022 "
     "where orders.year = 2023", "syntax"),
])
def test_each_error_kind_is_named(tokens, kind):
    v = d.verify(tokens.split())
    assert not v.ok
    assert kind in {e.kind for e in v.errors}, v.errors
    assert all(e.kind in d.ERROR_KINDS and e.message for e in v.errors)


def test_valid_program_accepted():
    toks = "from orders join customers select sum orders.total where customers.city = 'Paris' by orders.year order desc limit 3"
    assert d.verify(toks.split()).ok
    sql = " ".join(d.compile_sql(toks.split()))
    assert "JOIN customers ON orders.customer_id = customers.id" in sql and sql.endswith("LIMIT 3")


def test_injected_errors_are_caught(intents):
    rng = np.random.default_rng(0)
    applied = {k: 0 for k in d.ERROR_KINDS}
    for it in intents:
        for kind in d.ERROR_KINDS:
            bad = d.inject_error(it.program, kind, rng)
            if bad is None:
                continue
            applied[kind] += 1
            assert kind in {e.kind for e in d.verify(bad).errors}, (kind, bad)
    assert all(applied.values()), applied


def test_bad_inputs():
    with pytest.raises(TypeError):
        d.verify("from orders select count orders.year")
    with pytest.raises(TypeError):
        d.verify(["from", 3])
    with pytest.raises(ValueError):
        d.allowed_next(["select"])
    with pytest.raises(ValueError):
        d.compile_sql(["from", "orders"])
    with pytest.raises(ValueError):
        d.count_programs(-1)
    with pytest.raises(ValueError):
        d.corrupt(["from"], 1.5, np.random.default_rng(0), "dsl")
    with pytest.raises(ValueError):
        d.corrupt(["from"], 0.1, np.random.default_rng(0), "python")
    with pytest.raises(ValueError):
        d.inject_error(["from"], "nonsense", np.random.default_rng(0))
    with pytest.raises(ValueError):
        d.make_database(n_orders=0)
    with pytest.raises(TypeError):
        d.execute("not a connection", "SELECT 1")
    with pytest.raises(TypeError, match="con"):
        d.reinforce_program(None, None, "magic", 10)
    with pytest.raises(ValueError):
        d.bw_blocks(0)


# -- hypothesis: random programs either verify and run, or are rejected with a named error -------------------
_TOKENS = list(d.DSL_VOCAB) + ["drop", "orders.amount", "=>", "sales", "average", "'Pariss'"]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.sampled_from(_TOKENS), min_size=0, max_size=14))
def test_random_token_strings(con, toks):
    v = d.verify(toks)
    if v.ok:
        assert d.execute(con, d.compile_sql(toks))[0] == "ok"
    else:
        assert v.errors and all(e.kind in d.ERROR_KINDS and 0 <= e.position <= len(toks) for e in v.errors)


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 10**6))
def test_constrained_random_walks_verify_and_execute(con, s):
    rng = np.random.default_rng(s)
    toks: list[str] = []
    while True:
        allowed = d.allowed_next(toks)
        tok = allowed[rng.integers(len(allowed))]
        if tok == d.END:
            break
        toks.append(tok)
    assert d.verify(toks).ok
    assert d.execute(con, d.compile_sql(toks))[0] == "ok"


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10**6), st.floats(0.0, 0.5))
def test_constrained_noisy_policy_only_valid(intents, s, eps):
    rng = np.random.default_rng(s)
    it = intents[s % len(intents)]
    prog, n_wrong = d.corrupt(it.program, eps, rng, "constrained")
    assert d.verify(prog).ok
    assert (n_wrong == 0) == (prog == list(it.program)) or n_wrong > 0


def test_allowed_next_matches_verifier_one_step():
    """A token is allowed after a valid prefix iff the extended prefix has no verifier error there."""
    prefix = "from orders join customers select sum".split()
    allowed = set(d.allowed_next(prefix))
    assert "orders.total" in allowed and "customers.city" not in allowed and "products.price" not in allowed
    assert d.allowed_next([]) == ("from",)


# -- counting well-formed programs --------------------------------------------------------------------------
def test_count_programs_matches_enumeration():
    counts = d.count_programs(7)
    brute = [0] * 8

    def walk(prefix):
        for tok in d.allowed_next(prefix):
            if tok == d.END:
                brute[len(prefix)] += 1
            elif len(prefix) < 7:
                walk([*prefix, tok])

    walk([])
    assert counts == brute
    # closed form for length 5 ("from T select F C"): per table, sum over functions of compatible columns
    closed = 0
    for t in d.TABLES:
        cols = [c for c in d.SCHEMA.values() if c.table == t]
        closed += sum(len(cols) if f in ("val", "count", "min", "max") else sum(c.numeric for c in cols)
                      for f in d.FUNCS)
    assert counts[5] == closed


def test_analytic_exact_match_rate(intents):
    """The noisy policy's exact-match probability is (1 - eps/10) (1 - eps)^L for the DSL interface."""
    it = intents[0]
    eps, n = 0.1, 4000
    rng = np.random.default_rng(3)
    hits = sum(d.corrupt(it.program, eps, rng, "dsl")[0] == list(it.program) for _ in range(n))
    p = (1 - eps / 10) * (1 - eps) ** len(it.program)
    assert abs(d.binomial_z(hits, [p] * n)) < 4
    hits_c = sum(d.corrupt(it.program, eps, rng, "constrained")[0] == list(it.program) for _ in range(n))
    pc = (1 - eps) ** d.free_decisions(it.program)
    assert abs(d.binomial_z(hits_c, [pc] * n)) < 4


def test_agent_episode_dsl_never_executes_invalid(con, intents):
    rng = np.random.default_rng(0)
    for it in intents[:20]:
        for _ in range(5):
            ep = d.agent_episode(con, it, "dsl", 0.3, rng, retries=2)
            assert ep.invalid_executed == 0 and ep.harmful == 0
            ep = d.agent_episode(con, it, "constrained", 0.3, rng)
            assert ep.caught == 0 and ep.invalid_executed == 0
    eps0 = d.agent_episode(con, intents[0], "sql", 0.0, rng)
    assert eps0.exact and eps0.success_at == 0


def test_execute_counts_writes_without_doing_them(con):
    status, _ = d.execute(con, "DROP TABLE orders")
    assert status == "harmful"
    assert d.execute(con, "SELECT COUNT(*) FROM orders")[0] == "ok"
    assert d.execute(con, "SELEC 1")[0] == "error"


def test_reinforce_filter_learns_and_sparse_is_flat(con, intents):
    it = min(intents, key=lambda i: len(i.program))
    r = d.reinforce_program(con, it, "verifier_filter", 80, 8, lr=20.0, seed=0)
    assert r["valid"].min() == 1.0  # the filter only samples valid programs
    s = d.reinforce_program(con, it, "sparse", 5, 4, seed=0)
    assert s["success"].shape == (5,)
    assert d.steps_to_level([0, 0, 1, 1, 1], 1.0, window=2) == 4
    assert d.steps_to_level([0, 0, 0], 0.5) is None


def test_steps_to_level_counts_full_windows_only():
    # a lucky first batch must not "reach" the level: only full windows count
    assert d.steps_to_level([1.0] * 5 + [0.0] * 30, 0.5) is None
    assert d.steps_to_level([1.0] * 12 + [0.0] * 30, 0.5) == 20
    assert d.steps_to_level([0.0] * 10 + [1.0] * 30, 0.5, window=20) == 20
    assert d.steps_to_level([1.0, 0.0, 1.0], 0.5) == 3  # shorter than the window: one window


# -- Blocksworld ------------------------------------------------------------------------------------------
def test_blocksworld_state_counts_and_actions():
    assert [len(d.bw_states(n)) for n in (1, 2, 3, 4)] == [1, 3, 13, 73]  # OEIS A000262
    assert len(d.bw_raw_actions(4)) == 16


def test_bw_check_preconditions():
    s = frozenset({("A", "B"), ("C",)})
    assert d.bw_check(s, ("A", "C")) == "A is not clear"
    assert d.bw_check(s, ("C", "A")) == "A is not clear"
    assert d.bw_check(s, ("B", "table")) is None
    assert d.bw_check(s, ("C", "table")) == "C is already on the table"
    assert d.bw_check(s, ("B", "A")) == "A is not clear"  # B sits on A already
    assert d.bw_apply(s, ("B", "C")) == frozenset({("A",), ("C", "B")})
    with pytest.raises(ValueError):
        d.bw_apply(s, ("A", "C"))


def test_masked_bfs_same_optimal_length():
    states = d.bw_states(3)
    for start, goal in itertools.islice(itertools.product(states, states), 0, 169, 7):
        plan_raw, exp_raw, inv_raw = d.bw_bfs(start, goal, masked=False)
        plan_m, exp_m, inv_m = d.bw_bfs(start, goal, masked=True)
        assert len(plan_raw) == len(plan_m) == d.bw_distances(goal)[start]
        assert inv_m == 0 and (inv_raw > 0 or start == goal)
        s = start
        for a in plan_m:
            s = d.bw_apply(s, a)
        assert s == goal


def test_bw_episode_masked_never_executes_invalid():
    states = d.bw_states(4)
    goal = states[0]
    dist = d.bw_distances(goal)
    rng = np.random.default_rng(0)
    for start in states[:20]:
        ok, inv, _ = d.bw_episode(start, goal, dist, 0.3, True, rng)
        assert inv == 0
        ok, _, _ = d.bw_episode(start, goal, dist, 0.0, False, rng)
        assert ok


# ---------------------------------------------------------------- case 4: the learned agent
@pytest.fixture(scope="module")
def small_world():
    con = d.make_database(0)
    return con, d.make_intents(con, 12, seed=0)


def test_disabled_checks_switch_off_one_group():
    toks = "from orders select sum customers.city".split()
    assert not d.verify(toks).ok
    assert {e.kind for e in d.verify(toks, ("type_mismatch",)).errors} == {"column_not_in_scope"}
    assert d.verify(toks, d.COVERAGE_GROUPS["type"] + d.COVERAGE_GROUPS["scope"]).ok
    with pytest.raises(ValueError, match="non-fatal"):
        d.verify(toks, ("syntax",))
    with pytest.raises(TypeError):
        d.verify(toks, "type_mismatch")
    bad_join = "from customers join products select count products.price".split()
    assert d.compile_sql(bad_join, d.COVERAGE_GROUPS["scope"])[7:] == ["JOIN", "products"]


def test_request_tokens_and_encode(small_world):
    con, its = small_world
    for it in its:
        assert all(t in d.agent_vocab("dsl") for t in d.request_tokens(it.request))
    with pytest.raises(ValueError, match="vocabulary"):
        d.request_tokens("drop the table")
    with pytest.raises(TypeError):
        d.request_tokens(3)
    ids, at = d.encode(its[:3], "sql")
    assert ids.shape[0] == 3 and at.sum() == sum(len(it.sql) + 1 for it in its[:3])
    with pytest.raises(ValueError):
        d.encode(its[:3], "python")
    with pytest.raises(ValueError):
        d.encode([], "dsl")


def test_agent_learns_and_constrained_decoding_verifies(small_world):
    con, its = small_world
    torch.manual_seed(0)
    m = d.make_agent("dsl", d_model=32, n_layer=1, n_head=2)
    losses = d.train_agent(m, its, "dsl", steps=150, batch=12, lr=1e-2)
    assert losses[-1] < 0.2 * losses[0]
    for it in its[:4]:
        out = d.decode(m, it, "dsl", constrained=True)
        assert d.verify(out).ok
        r = d.agent_answer(m, con, it, "dsl", constrained=True, repairs=2)
        assert r.success == d.results_equal(d.execute(con, d.compile_sql(r.output))[1], it.result)
    b = d.bits_per_intent(m, its, "dsl")
    assert b.shape == (len(its),) and (b >= 0).all()
    fit = d.greedy_success(m, con, its, "dsl")
    assert fit == np.mean([d.agent_answer(m, con, it, "dsl").success for it in its])
    untrained = d.make_agent("dsl", d_model=32, n_layer=1, n_head=2)
    assert d.greedy_success(untrained, con, its, "dsl") < fit
    with pytest.raises(ValueError):
        d.greedy_success(m, con, [], "dsl")
    with pytest.raises(ValueError, match="SQL grammar"):  # a DSL prefix is no SQL prefix
        d.decode(m, its[0], "sql", constrained=True, prefix=["from"])
    with pytest.raises(ValueError):
        d.agent_answer(m, con, its[0], "dsl", repairs=-1)
    with pytest.raises(ValueError):
        d.train_agent(m, its, "dsl", steps=0)


def test_sqlite_error_position():
    sql = "SELECT COUNT ( orders.totl ) FROM orders".split()
    assert d.sqlite_error_position(sql, "no such column: orders.totl") == 3
    assert d.sqlite_error_position(["SELCT", "1"], 'near "SELCT": syntax error') == 0
    assert d.sqlite_error_position(sql, "incomplete input") == len(sql)
    assert d.sqlite_error_position(sql, "something else") is None
    with pytest.raises(TypeError):
        d.sqlite_error_position(sql, 3)


# ---------------------------------------------------------------- case 5: structured credit
def test_token_advantages_per_arm():
    good = "from orders select count orders.year".split()
    bad = "from orders select sum orders.amount".split()  # unknown column at token 4
    R = [1.0, 0.0]
    sp = d.token_advantages([good, bad], R, "sparse")
    assert [len(a) for a in sp] == [len(good) + 1, len(bad) + 1]
    assert np.allclose(sp[0], 0.5) and np.allclose(sp[1], -0.5)
    assert all(np.allclose(a, b) for a, b in zip(sp, d.token_advantages([good, bad], R, "filter")))
    tc = d.token_advantages([good, bad], R, "token_credit", penalty=2.0)
    assert np.allclose(tc[0], 0.5)  # a verified program is scored as in sparse
    assert d.verify(bad).errors[0].position == 4
    assert tc[1][4] == -2.0 and np.count_nonzero(tc[1]) == 1  # only the named token
    pr = d.token_advantages([good, bad], R, "prefix_reward")
    r0, r1 = 1 + 0.5 * (len(good) + 1) / (len(good) + 1), 0.5 * 4 / (len(bad) + 1)
    assert np.allclose(pr[0], r0 - (r0 + r1) / 2) and np.allclose(pr[1], r1 - (r0 + r1) / 2)
    # a truncated sample (no END sampled) whose error is at END: the last sampled token takes the blame
    cut = "from orders select".split()
    tc = d.token_advantages([cut, good], [0.0, 1.0], "token_credit", ended=[False, True])
    assert len(tc[0]) == len(cut) and tc[0][-1] == -1.0
    with pytest.raises(ValueError, match="one entry per program"):
        d.token_advantages([good], [1.0, 0.0], "sparse")
    with pytest.raises(ValueError):
        d.token_advantages([good], [1.0], "dense")
    with pytest.raises(ValueError):
        d.token_advantages([good], [1.0], "token_credit", penalty=-1.0)
    with pytest.raises(ValueError, match="ended"):
        d.token_advantages([good], [1.0], "sparse", ended=[True, True])


def test_reinforce_agent_runs_filter_valid_and_deterministic(small_world):
    con, its = small_world
    runs = {}
    for arm in ("filter", "token_credit", "token_credit"):
        with torch.random.fork_rng():
            torch.manual_seed(0)
            m = d.make_agent("dsl", d_model=16, n_layer=1, n_head=2)
        cur = d.reinforce_agent(m, con, its, arm, steps=3, batch=4, lr=1e-3, seed=0, cache={})
        assert cur["success"].shape == cur["valid"].shape == (3,)
        runs.setdefault(arm, []).append(cur)
    assert (runs["filter"][0]["valid"] == 1.0).all()  # sampling among valid continuations only
    a, b = runs["token_credit"]
    assert np.array_equal(a["valid"], b["valid"]) and np.array_equal(a["success"], b["success"])
    with pytest.raises(ValueError, match="DSL agent"):
        d.reinforce_agent(d.make_agent("sql", 16, 1, 2), con, its, "sparse", steps=1, batch=2)
    with pytest.raises(ValueError):
        d.reinforce_agent(m, con, its, "dense", steps=1, batch=2)
    with pytest.raises(ValueError):
        d.reinforce_agent(m, con, [], "sparse", steps=1, batch=2)


def test_sample_programs_constrained_valid_deterministic_and_untrained(small_world):
    con, its = small_world
    with torch.random.fork_rng():
        torch.manual_seed(0)
        m = d.make_agent("dsl", d_model=16, n_layer=1, n_head=2)
    before = {k: v.clone() for k, v in m.state_dict().items()}
    outs = d.sample_programs(m, its, seed=1, constrained=True)
    assert len(outs) == len(its) and all(d.verify(o).ok for o in outs)
    assert outs == d.sample_programs(m, its, seed=1, constrained=True)
    free = d.sample_programs(m, its, seed=1)
    assert all(len(o) <= d.MAX_PROGRAM_LEN + 1 and set(o) <= set(d.DSL_VOCAB) for o in free)
    assert not all(d.verify(o).ok for o in free)  # an untrained policy, unconstrained: mostly invalid
    assert all(torch.equal(before[k], v) for k, v in m.state_dict().items())
    with pytest.raises(ValueError, match="DSL agent"):
        d.sample_programs(d.make_agent("sql", 16, 1, 2), its)
    with pytest.raises(ValueError):
        d.sample_programs(m, [])


def test_checkpoint_config_names():
    assert d.checkpoint_config("credit")["arms"] == list(d.GROUP_ARMS)
    with pytest.raises(ValueError):
        d.checkpoint_config("weights")


# ---------------------------------------------------------------- case 5, round 3: RLOO, KL anchor, held-out AUC
def test_group_advantages_leave_one_out_and_blame_conserving():
    good = "from orders select count orders.year".split()
    bad = "from orders select sum orders.amount".split()  # unknown column at token 4
    wrong = "from orders select count orders.total".split()  # verifies, wrong rows
    progs, R = [good, bad, wrong, good, good, bad], [1.0, 0.0, 0.0, 1.0, 1.0, 0.0]
    sp = d.group_advantages(progs, R, 3, "sparse")
    # group 1: R = (1, 0, 0): A = 1 - 0, 0 - 0.5, 0 - 0.5; group 2: (1, 1, 0): 0.5, 0.5, -1
    assert np.allclose([a[0] for a in sp], [1.0, -0.5, -0.5, 0.5, 0.5, -1.0])
    assert all(np.allclose(a, a[0]) for a in sp)
    tc = d.group_advantages(progs, R, 3, "token_credit")
    for a, b, p in zip(sp, tc, progs):
        assert len(a) == len(b) == len(p) + 1 and np.isclose(a.sum(), b.sum())  # same total blame
        if d.verify(p).ok:
            assert np.allclose(a, b)
        else:  # all of it on the token the verifier names
            assert np.count_nonzero(b) == 1 and b[4] == a.sum()
    # a group where every sample fails: no signal in either arm
    assert all(not a.any() for a in d.group_advantages([bad, wrong], [0.0, 0.0], 2, "token_credit"))
    with pytest.raises(ValueError, match="multiple of the group size"):
        d.group_advantages(progs[:5], R[:5], 3, "sparse")
    with pytest.raises(ValueError):
        d.group_advantages(progs, R, 1, "sparse")
    with pytest.raises(ValueError):
        d.group_advantages(progs, R, 3, "filter")
    with pytest.raises(ValueError, match="one entry per program"):
        d.group_advantages(progs, R[:4], 3, "sparse")


def test_greedy_outcomes_match_agent_answer(small_world):
    con, its = small_world
    with torch.random.fork_rng():
        torch.manual_seed(0)
        m = d.make_agent("dsl", d_model=16, n_layer=1, n_head=2)
    d.train_agent(m, its, "dsl", steps=150, batch=12, lr=1e-2, seed=0)
    single = np.array([d.agent_answer(m, con, it, "dsl").success for it in its])
    assert single.any()
    assert np.array_equal(d.greedy_outcomes(m, con, its, cache={}), single)
    assert np.array_equal(d.greedy_outcomes(m, con, its, chunk=5), single)
    with pytest.raises(ValueError, match="DSL agent"):
        d.greedy_outcomes(d.make_agent("sql", 16, 1, 2), con, its)
    with pytest.raises(ValueError):
        d.greedy_outcomes(m, con, [])


def test_group_reinforce_anchor_eval_and_determinism(small_world):
    con, its = small_world
    with torch.random.fork_rng():
        torch.manual_seed(0)
        warm = d.make_agent("dsl", d_model=16, n_layer=1, n_head=2)
    d.train_agent(warm, its, "dsl", steps=60, batch=12, lr=1e-2, seed=0)
    runs = []
    for arm in ("token_credit", "token_credit", "sparse"):
        m = d.make_agent("dsl", 16, 1, 2)
        m.load_state_dict(warm.state_dict())
        cur = d.group_reinforce(m, warm, con, its, arm, steps=5, n_requests=2, k=3, lr=1e-3, beta=0.1,
                                seed=0, eval_sets={"a": its[:4]}, eval_every=2, cache={})
        runs.append((cur, m))
    cur = runs[0][0]
    assert cur["success"].shape == cur["kl"].shape == (5,)
    assert list(cur["eval_steps"]) == [0, 2, 4, 5] and cur["eval/a"].shape == (4, 4)
    assert cur["kl"][0] == 0 and (cur["kl"] >= -1e-6).all()  # the first step starts at the anchor
    a, b = runs[0][0], runs[1][0]
    assert all(np.array_equal(a[q], b[q]) for q in a)
    assert all(torch.equal(x, y) for x, y in zip(runs[0][1].parameters(), runs[1][1].parameters()))
    with pytest.raises(ValueError, match="DSL agent"):
        d.group_reinforce(d.make_agent("sql", 16, 1, 2), warm, con, its, "sparse", steps=1)
    with pytest.raises(ValueError):
        d.group_reinforce(m, warm, con, its, "filter", steps=1)
    with pytest.raises(ValueError):
        d.group_reinforce(m, warm, con, its, "sparse", steps=1, k=1)
    with pytest.raises(ValueError):
        d.group_reinforce(m, warm, con, its, "sparse", steps=1, beta=-1.0)


def test_curve_auc():
    assert d.curve_auc([0, 1, 2], [0.0, 1.0, 1.0]) == pytest.approx(0.75)
    assert d.curve_auc([0, 10], [0.4, 0.4]) == pytest.approx(0.4)
    with pytest.raises(ValueError, match="increasing"):
        d.curve_auc([0, 0, 1], [0.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="same length"):
        d.curve_auc([0, 1], [0.0])


# ---------------------------------------------------------------- case 1 from a measured error profile
def test_corrupt_with_an_error_profile(intents):
    rng = np.random.default_rng(0)
    for it in intents[:10]:
        out, n = d.corrupt(it.program, {"col": 1.0}, rng, "dsl")
        assert len(out) == len(it.program)
        for a, b in zip(out, it.program):
            assert (a != b) == (d.token_class(b, "dsl") == "col")
        assert n == sum(d.token_class(b, "dsl") == "col" for b in it.program)
        assert d.corrupt(it.sql, {}, rng, "sql") == (list(it.sql), 0)  # no rate: no error, no DROP
    with pytest.raises(ValueError, match="eps"):
        d.corrupt(intents[0].program, {"col": 1.5}, rng, "dsl")
    with pytest.raises(TypeError):
        d.corrupt(intents[0].program, {3: 0.1}, rng, "dsl")


def test_sql_token_repair_beats_rewriting(con, intents):
    prof = {"kw": 0.3, "punct": 0.3}  # slips SQLite names in its message
    succ = {}
    for repair in (False, True):
        rng = np.random.default_rng(1)
        eps_ = [d.agent_episode(con, it, "sql", prof, rng, retries=3, sql_repair=repair)
                for it in intents for _ in range(5)]
        succ[repair] = np.mean([e.success_at is not None for e in eps_])
    assert succ[True] > succ[False]
    with pytest.raises(TypeError):
        d.agent_episode(con, intents[0], "sql", prof, np.random.default_rng(0), sql_repair="yes")


def test_token_error_profile_counts_every_gold_token(small_world):
    con, its = small_world
    with torch.random.fork_rng():
        torch.manual_seed(0)
        m = d.make_agent("sql", d_model=16, n_layer=1, n_head=2)
    before = d.token_error_profile(m, its, "sql")
    assert sum(n for _, n in before.values()) == sum(len(it.sql) for it in its)
    assert set(before) <= {"kw", "punct", "table", "col", "op", "text", "int"}
    d.train_agent(m, its, "sql", steps=150, batch=12, lr=1e-2, seed=0)
    after = d.token_error_profile(m, its, "sql")
    assert sum(e for e, _ in after.values()) < sum(e for e, _ in before.values())
    assert d.token_class("from", "dsl") == "kw" and d.token_class("SELECT", "sql") == "kw"
    with pytest.raises(ValueError, match="SQL agent"):
        d.token_error_profile(d.make_agent("dsl", 16, 1, 2), its, "sql")
    with pytest.raises(ValueError):
        d.token_class("", "sql")
    with pytest.raises(ValueError):
        d.token_class("from", "python")


def test_corrupt_oov_share_sets_the_error_kinds(con, intents):
    # oov_share=0: every wrong token is a confusion inside the vocabulary (what a closed-vocabulary model makes);
    # 1: every wrong token with a hallucination or slip available is outside it; the default is 0.5 and keeps
    # the random stream of the earlier half-and-half rule
    dsl_vocab, sql_vocab = set(d.DSL_VOCAB), set(d.sql_vocab())
    for oov, inside in ((0.0, True), (1.0, False)):
        rng = np.random.default_rng(0)
        for it in intents[:20]:
            for iface, gold, vocab in (("dsl", it.program, dsl_vocab), ("sql", it.sql, sql_vocab)):
                out, n = d.corrupt(list(gold), 0.5, rng, iface, destructive_rate=0.0, oov_share=oov)
                wrong = [t for t, g in zip(out, gold) if t != g]
                assert len(out) == len(gold) and len(wrong) <= n
                if inside:
                    assert all(t in vocab for t in wrong)
                else:  # every class of these programs has a hallucination or slip to draw
                    assert all(t not in vocab for t in wrong)
    a = d.corrupt(list(intents[0].sql), 0.3, np.random.default_rng(3), "sql")
    b = d.corrupt(list(intents[0].sql), 0.3, np.random.default_rng(3), "sql", oov_share=0.5)
    assert a == b
    with pytest.raises(ValueError):
        d.corrupt(list(intents[0].program), 0.1, np.random.default_rng(0), "dsl", oov_share=1.5)
    ep = d.agent_episode(con, intents[0], "sql", 0.3, np.random.default_rng(0), retries=2,
                         oov_share=0.0)
    assert ep.harmful == 0
