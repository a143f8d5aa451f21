"""Tests of helpers.dsl_harness's paraphrased requests, SQL grammar mask, paired bootstrap and reading rule."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from _loader import load_module

from helpers import dsl_harness as d

SCRIPT = Path(__file__).resolve().parents[1] / "data" / "05_dsl_harness" / "make_paraphrase.py"


@pytest.fixture(scope="module")
def con():
    return d.make_database(0, n_customers=60, n_products=12, n_orders=400)


@pytest.fixture(scope="module")
def intents(con):
    return d.make_intents(con, 60, seed=1)


# -- the SQL grammar -------------------------------------------------------------------------------------------
def test_gold_sql_is_grammatical_and_every_prefix_allows_its_next_token(intents):
    for it in intents:
        assert d.sql_grammatical(it.sql)
        for i, tok in enumerate(it.sql):
            assert tok in d.sql_allowed_next(it.sql[:i])
        assert d.END in d.sql_allowed_next(it.sql)


@pytest.mark.parametrize("sql", [
    "SELECT FROM orders",
    "SELECT orders.total orders",
    "SELECT SUM orders.total FROM orders",
    "SELECT orders.total FROM orders WHERE",
    "SELECT orders.total FROM orders WHERE orders.year 2021",
    "SELECT orders.total FROM orders LIMIT 3 WHERE orders.year = 2021",
    "SELECT orders.total FROM orders JOIN customers WHERE orders.year = 2021",
    "SELECT orders.total FROM orders GROUP orders.year",
    "DROP TABLE orders",
    "SELECT , orders.total FROM orders",
    "SELECT orders.total , orders.year , orders.id FROM orders",
])
def test_malformed_sql_is_rejected(sql):
    assert not d.sql_grammatical(sql.split())


def test_sql_allowed_next_rejects_a_non_prefix_and_bad_input():
    with pytest.raises(ValueError, match="not grammatical"):
        d.sql_allowed_next(["SELECT", "FROM"])
    with pytest.raises(TypeError):
        d.sql_allowed_next("SELECT")
    assert d.sql_allowed_next([]) == ("SELECT",)


def test_random_walks_under_the_grammar_parse_in_sqlite(con):
    # soundness: whatever the mask lets through is syntactically valid SQL (SQLite may still reject a name
    # that is not in scope, but never with a syntax error or an incomplete input)
    rng = np.random.default_rng(0)
    for _ in range(300):
        out: list[str] = []
        while True:
            allowed = d.sql_allowed_next(out)
            if d.END in allowed and (rng.random() < 0.3 or len(allowed) == 1):
                break
            out.append(str(rng.choice([t for t in allowed if t != d.END])))
        assert d.sql_grammatical(out)
        status, msg = d.execute(con, out)
        assert status != "harmful"
        if status == "error":
            assert "syntax error" not in msg and "incomplete input" not in msg, (out, msg)


def test_grammar_constrained_decoding_emits_grammatical_sql(intents):
    torch.manual_seed(0)
    m = d.make_agent("sql", d_model=16, n_layer=1, n_head=2)  # untrained: any mistake is the mask's
    for it in intents[:5]:
        out = d.decode(m, it, "sql", constrained=True)
        assert d.sql_grammatical(out) or len(out) == 48


# -- paraphrased requests --------------------------------------------------------------------------------------
def test_paraphrases_are_deterministic_tokenizable_and_keep_the_intent(intents):
    tr = d.paraphrase_intents(intents, "train", seed=3)
    assert [it.request for it in tr] == [it.request for it in d.paraphrase_intents(intents, "train", seed=3)]
    assert [it.request for it in tr] != [it.request for it in d.paraphrase_intents(intents, "train", seed=4)]
    vocab = set(d.agent_vocab("dsl", paraphrase=True))
    for a, b in zip(intents, tr):
        assert a.program == b.program and a.sql == b.sql and a.result == b.result
        words = d.request_tokens(b.request)
        assert set(words) <= vocab
        p = d.parse(a.program)
        assert p.table in words and (p.join is None or p.join in words)
        for _c, _op, v in p.where:
            assert v.strip("'") in words
        if p.limit:
            assert p.limit in words


def test_test_split_uses_held_out_frames_and_unseen_words(intents):
    tr = d.paraphrase_intents(intents, "train")
    te = d.paraphrase_intents(intents, "test")
    seen = {w for it in tr for w in d.request_tokens(it.request)}
    for it in te:
        assert set(d.request_tokens(it.request)) - seen  # every test request has a word never trained on
    assert not {it.request for it in tr} & {it.request for it in te}
    assert not set(d.PARA_TEMPLATES["train"]) & set(d.PARA_TEMPLATES["test"])
    # the held-out frames are structurally new: frame 4 opens with the tables, then a colon
    rng = np.random.default_rng(0)
    text = d.paraphrase_request(intents[0].program, 4, rng)
    assert text.split()[0] in ("from", "in") and ":" in text


def test_paraphrase_rejects_malformed_input(intents):
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="verified program"):
        d.paraphrase_request(["from", "orders", "select"], 0, rng)
    with pytest.raises(ValueError):
        d.paraphrase_request(intents[0].program, 6, rng)
    with pytest.raises(ValueError, match="filler"):
        d.paraphrase_request(intents[0].program, 0, rng, filler="hey there")
    with pytest.raises(TypeError):
        d.paraphrase_request(intents[0].program, 0, 3)
    with pytest.raises(ValueError):
        d.paraphrase_intents(intents, "validation")
    with pytest.raises(ValueError):
        d.paraphrase_intents([], "train")


def test_paraphrase_agents_share_indices_with_templated_ones():
    for iface in d.AGENT_INTERFACES:
        small, big = d.agent_vocab(iface), d.agent_vocab(iface, paraphrase=True)
        assert big[:len(small)] == small and set(big[len(small):]).isdisjoint(small)
        index = {t: i for i, t in enumerate(big)}  # encode's index: the last occurrence of a token
        pad = index[d.PAD]
        outputs = d.DSL_VOCAB if iface == "dsl" else d.sql_vocab()
        assert all(index[t] < pad for t in outputs)  # no output token is masked as a paraphrase word
        assert d.make_agent(iface, 16, 1, 2, paraphrase=True).cfg.vocab_size == len(big)


# -- statistics and the reading rule ---------------------------------------------------------------------------
def test_paired_bootstrap():
    a = np.r_[np.ones(60), np.zeros(240)]
    b = np.zeros(300)
    m, lo, hi = d.paired_bootstrap(a, b, seed=0)
    assert m == pytest.approx(0.2) and 0.14 < lo < 0.2 < hi < 0.26
    m, lo, hi = d.paired_bootstrap(a, a)
    assert m == lo == hi == 0.0
    assert d.paired_bootstrap(a, b, seed=1) != d.paired_bootstrap(a, b, seed=2)
    with pytest.raises(ValueError, match="paired"):
        d.paired_bootstrap(a, b[:10])
    with pytest.raises(ValueError):
        d.paired_bootstrap(a, b, level=1.5)


def test_read_n_train():
    curve = {25: [0.2, 0.3], 50: [0.45, 0.52], 100: [0.7, 0.6], 300: [0.9, 0.9]}
    assert d.read_n_train(curve, 0.5) == 50
    assert d.read_n_train(curve, 0.95) == 300  # none reaches it: the largest
    assert d.read_n_train(curve, 0.1) == 25
    with pytest.raises(ValueError):
        d.read_n_train({}, 0.5)
    with pytest.raises(ValueError):
        d.read_n_train({25: [1.2]}, 0.5)
    with pytest.raises(ValueError):
        d.read_n_train(curve, 2.0)


def test_para_steps():
    assert d.para_steps(300, 600, 32, 20) == 600  # small sizes keep the fixed steps
    assert d.para_steps(960, 600, 32, 20) == 600
    assert d.para_steps(1000, 600, 32, 20) == 625  # at least 20 passes over the data
    assert d.para_steps(3000, 600, 32, 20) == 1875
    assert d.para_steps(3000, 600, 32, 0) == 600
    with pytest.raises(ValueError):
        d.para_steps(0, 600, 32, 20)
    with pytest.raises(ValueError):
        d.para_steps(100, 600, 32, -1)
    with pytest.raises(TypeError):
        d.para_steps(100.5, 600, 32, 20)


def test_paraphrase_split_keeps_test_and_prefix_and_is_disjoint(intents):
    tr, te = d.paraphrase_split(intents, 10, 20, test_after=15, seed=0)
    assert [it.program for it in te] == [it.program for it in intents[15:35]]
    assert [it.program for it in tr] == [it.program for it in intents[:10]]
    tr2, te2 = d.paraphrase_split(intents, 30, 20, test_after=15, seed=0)
    assert [it.request for it in te2] == [it.request for it in te]  # held-out requests unchanged
    assert [it.request for it in tr2[:10]] == [it.request for it in tr]  # training prefix unchanged
    assert [it.program for it in tr2[15:]] == [it.program for it in intents[35:50]]
    assert not {it.program for it in tr2} & {it.program for it in te2}
    with pytest.raises(ValueError, match="at least"):
        d.paraphrase_split(intents, 50, 20, test_after=15)
    with pytest.raises(ValueError):
        d.paraphrase_split(intents, 0, 20, test_after=15)
    with pytest.raises(TypeError):
        d.paraphrase_split(intents, 10, 20, test_after="15")


def test_make_paraphrase_tiny(tmp_path):
    mod = load_module(SCRIPT, "make_paraphrase")
    out = mod.main(["--tiny", "--out", str(tmp_path)])
    assert out and (tmp_path / "05_dsl_harness" / "paraphrase.json").exists()


def test_make_paraphrase_reuses_only_sizes_stored_under_the_same_settings():
    mod = load_module(SCRIPT, "make_paraphrase")
    cfg = d.checkpoint_config("paraphrase")
    sizes, ck = mod.stored_sizes(cfg)
    assert {25, 50, 100, 300} <= set(sizes) and ck is not None
    assert mod.stored_sizes({**cfg, "lr": 1e-3}) == ([], None)  # another setting: nothing reused
    assert mod.stored_sizes({**cfg, "test_after": 400}) == ([], None)  # other held-out programs
    sizes, _ = mod.stored_sizes({**cfg, "min_epochs": 1000})  # more steps at every size: retrain all
    assert sizes == []



# -- the seed-level interval (round 4) ---------------------------------------------------------------------------
def test_seed_interval_is_the_t_interval_and_fails_on_a_spread_that_straddles_zero():
    m, lo, hi = d.seed_interval([0.1, 0.2, 0.3])
    assert m == pytest.approx(0.2) and hi - m == pytest.approx(m - lo)
    assert m - lo == pytest.approx(4.302653 * 0.1 / np.sqrt(3), rel=1e-5)  # t(0.975, 2) * sd / sqrt(n)
    assert d.seed_interval([0.1, 0.2, 0.3, 0.2, 0.15, 0.25])[1] > 0  # a consistent gain is resolved
    # the 3-seed gains of round 3: a spread that straddles 0 gives an interval that does too
    _, lo, hi = d.seed_interval([0.070, -0.210, 0.040])
    assert lo < 0 < hi
    # a wider level gives a wider interval
    assert d.seed_interval([0.1, 0.2, 0.3], level=0.99)[1] < d.seed_interval([0.1, 0.2, 0.3])[1]


@pytest.mark.parametrize("bad", [[0.1], [0.1, float("nan")], [[0.1, 0.2]]])
def test_seed_interval_rejects_bad_input(bad):
    with pytest.raises((ValueError, TypeError)):
        d.seed_interval(bad)


def test_crossed_bootstrap_counts_seeds_and_requests():
    rng = np.random.default_rng(0)
    # a seed effect only: every request of a seed has the same difference; the crossed interval ~ the t one
    per_seed = np.array([0.1, 0.2, 0.3, 0.2, 0.15, 0.25, 0.05, 0.3])
    m, lo, hi = d.crossed_bootstrap(np.repeat(per_seed[:, None], 50, 1), seed=0)
    assert m == pytest.approx(per_seed.mean()) and 0 < lo < m < hi
    # a request effect only (the seeds agree): seed_interval is 0 wide, the crossed interval is not
    per_req = rng.choice([-1.0, 0.0, 1.0], size=100, p=[0.3, 0.4, 0.3])
    table = np.tile(per_req, (10, 1))
    _, slo, shi = d.seed_interval(table.mean(1))
    _, clo, chi = d.crossed_bootstrap(table, seed=0)
    assert slo == pytest.approx(shi) and chi - clo > 0.1 and clo < table.mean() < chi
    # a gain that straddles 0 over requests is not resolved
    assert d.crossed_bootstrap(table - table.mean(), seed=1)[1] < 0 < d.crossed_bootstrap(table - table.mean())[2]


@pytest.mark.parametrize("bad", [[0.1, 0.2], [[0.1, 0.2]], [[0.1, float("nan")], [0.2, 0.3]]])
def test_crossed_bootstrap_rejects_bad_input(bad):
    with pytest.raises((ValueError, TypeError)):
        d.crossed_bootstrap(bad)


def test_seed_extension_and_swap_share_the_paraphrase_requests():
    base, ext, swap = (d.checkpoint_config(n) for n in ("paraphrase", "paraphrase_seeds", "paraphrase_swap"))
    assert ext["n_trains"] == swap["n_trains"] == [1000] and 1000 in base["n_trains"]
    assert not set(ext["seeds"]) & set(base["seeds"]) and len(base["seeds"] + ext["seeds"]) >= 10
    same = ("db_seed", "intent_seed", "para_seed", "n_test", "test_after", "steps", "min_epochs", "batch", "lr",
            "d_model", "n_layer", "n_head", "repairs", "n_fit")
    assert all(ext[k] == base[k] == swap[k] for k in same)
