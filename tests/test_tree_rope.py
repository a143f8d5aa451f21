import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import nn as hnn
from helpers import tree_rope as tr

SETTINGS = settings(max_examples=40, deadline=None)


@SETTINGS
@given(st.integers(2, 20), st.integers(1, 4))
def test_digits_bijection(B, L):
    p = torch.arange(B**L)
    c = tr.digits(p, B, L)
    assert c.min() >= 0 and c.max() < B
    assert torch.equal(tr.from_digits(c, B), p)
    assert len(torch.unique(c, dim=0)) == B**L


def test_bad_arguments():
    with pytest.raises(ValueError, match="radix"):
        tr.digits(torch.arange(4), 1, 2)
    with pytest.raises(ValueError, match="levels"):
        tr.digits(torch.arange(4), 4, 0)
    with pytest.raises(ValueError, match=r"\[0, 64\)"):
        tr.digits(torch.tensor([64]), 4, 3)
    with pytest.raises(ValueError, match="lie in"):
        tr.TreeRotaryEmbedding(16, 4, 2).angles(torch.arange(17))
    with pytest.raises(TypeError):
        tr.digits(torch.tensor([1.5]), 4, 2)
    with pytest.raises(ValueError, match="groups"):
        tr.TreeRotaryEmbedding(16, 4, 2, groups=[3, 3])
    with pytest.raises(ValueError, match="rotary pair per level"):
        tr.TreeRotaryEmbedding(4, 4, 3)
    with pytest.raises(ValueError, match="target"):
        tr.opt_position_ids(np.random.default_rng(0), 2, 64, 16, 32)
    with pytest.raises(ValueError, match="radix"):
        tr.opt_position_ids(np.random.default_rng(0), 2, 64, 1, 128)
    with pytest.raises(ValueError, match="n_chunks"):
        tr.skip_position_ids(np.random.default_rng(0), 2, 8, 64, n_chunks=9)


def test_tpe_L1_equals_rope():
    rope = hnn.RotaryEmbedding(32)
    tpe = tr.TreeRotaryEmbedding(32, 4096, 1, bases=[10000.0])
    p = torch.arange(4096)
    q = torch.randn(1, 2, 4096, 32)
    assert (rope(q, q, p)[0] - tpe(q, q, p)[0]).abs().max() <= 1e-6


@SETTINGS
@given(st.integers(0, 4095))
def test_rotation_orthogonal(p):
    R = tr.rotation_matrix(tr.TreeRotaryEmbedding(32, 16, 3), p)
    assert torch.allclose(R.T @ R, torch.eye(32), atol=1e-6)
    x = torch.randn(32)
    assert torch.isclose((R @ x).norm(), x.norm(), rtol=1e-5)


def _score(rot, q, k, m, n):
    a = hnn.apply_rotary(q[None], rot.angles(torch.tensor([m])))
    b = hnn.apply_rotary(k[None], rot.angles(torch.tensor([n])))
    return (a * b).sum().item()


@SETTINGS
@given(st.integers(0, 10**6))
def test_relative_per_component(seed):
    B, L = 8, 3
    rot = tr.TreeRotaryEmbedding(24, B, L)
    g = np.random.default_rng(seed)
    q, k = torch.as_tensor(g.normal(size=24), dtype=torch.float32), torch.as_tensor(g.normal(size=24),
                                                                                    dtype=torch.float32)
    m, n = g.integers(0, B**L, 2)
    cm, cn = tr.digits(torch.tensor([int(m), int(n)]), B, L)
    s = torch.as_tensor([int(g.integers(-int(min(a, b)), B - int(max(a, b)))) for a, b in zip(cm, cn)])
    m2, n2 = int(tr.from_digits(cm + s, B)), int(tr.from_digits(cn + s, B))
    assert abs(_score(rot, q, k, int(m), int(n)) - _score(rot, q, k, m2, n2)) < 1e-4


def test_translation_invariance_and_carries():
    B, L = 8, 2
    rot = tr.TreeRotaryEmbedding(16, B, L)
    rope = hnn.RotaryEmbedding(16)
    q, k = torch.randn(16), torch.randn(16)
    assert abs(_score(rope, q, k, 3, 40) - _score(rope, q, k, 3 + 17, 40 + 17)) < 1e-4
    # a shift by B that crosses no carry of the upper digit keeps the score; one that does changes it
    assert abs(_score(rot, q, k, 1, 10) - _score(rot, q, k, 1 + 8, 10 + 8)) < 1e-5
    assert abs(_score(rot, q, k, 1, 6) - _score(rot, q, k, 1 + 3, 6 + 3)) > 1e-4  # 6+3 = 9 carries


@SETTINGS
@given(st.integers(0, 10**6), st.integers(2, 16), st.integers(8, 64), st.integers(1, 8))
def test_opt_ids(seed, B, n, chunks):
    g = np.random.default_rng(seed)
    target = n + 10 * B
    ids = tr.opt_position_ids(g, 5, n, B, target, min(chunks, n))
    assert ids.shape == (5, n)
    assert (np.diff(ids, axis=1) > 0).all() and ids.min() >= 0 and ids.max() < target
    assert ((ids - np.arange(n)) % B == 0).all()
    skips = tr.skip_position_ids(g, 5, n, target, min(chunks, n))
    assert (np.diff(skips, axis=1) > 0).all() and skips.max() < target


def test_opt_covers_more_tuples():
    g = np.random.default_rng(0)
    B, L, n = 16, 3, 64
    test = np.arange(1024)[None]
    plain = np.tile(np.arange(n), (64, 1))
    opt = tr.opt_position_ids(g, 64, n, B, 4096)
    assert tr.coverage(opt, test, B, L) > tr.coverage(plain, test, B, L)
    # sanity: a window covers itself
    assert tr.coverage(test, test, B, L) == 1.0


def test_codes_match_brute_force():
    B, L = 4, 2
    pos = np.array([[0, 3, 5, 9]])
    codes = set(tr.digit_difference_codes(pos, B, L).tolist())
    c = [tr.digits(torch.tensor(int(p)), B, L).numpy() for p in pos[0]]
    brute = set()
    for i in range(4):
        for j in range(i + 1):
            d = c[i] - c[j] + (B - 1)
            brute.add(int(d[0] + d[1] * (2 * B - 1)))
    assert codes == brute


def test_corpus_split_is_disjoint_and_deterministic():
    a, b = tr.stdlib_corpus(50_000, 10_000)
    a2, b2 = tr.stdlib_corpus(50_000, 10_000)
    assert len(a) == 50_000 and len(b) == 10_000
    assert np.array_equal(a, a2) and np.array_equal(b, b2)
    assert not np.array_equal(a[:10_000], b)
    with pytest.raises(ValueError):
        tr.stdlib_corpus(0, 10)


def test_bases_validated():
    with pytest.raises(ValueError, match=r"bases\[1\]"):
        tr.TreeRotaryEmbedding(16, 4, 2, bases=[8.0, float("nan")])
    with pytest.raises(ValueError, match="bases must be L=2"):
        tr.TreeRotaryEmbedding(16, 4, 2, bases=[8.0])


def test_checkpoint_config_arms_build_and_train_one_step():
    cfg = tr.checkpoint_config("arms")
    assert cfg == tr.checkpoint_config("arms")  # a fresh, deterministic dict
    corpus = np.random.default_rng(0).integers(0, 256, 5000)
    small = dict(cfg, d_model=16, n_head=2, batch_size=2)
    for arm, spec in cfg["arms"].items():
        model = tr.make_model(spec, small)
        x, pos = tr.batch_fn(spec, corpus, small, 0)(0)
        assert x.shape == pos.shape == (2, cfg["train_len"] + 1)
        assert int(pos.max()) < cfg["target_len"], arm
        if spec["ids"] == "opt":
            assert ((pos - torch.arange(x.shape[1])) % spec["B"] == 0).all()
        if spec["enc"] == "tpe":
            assert spec["B"] ** spec["L"] >= max(cfg["eval"]["lengths"]) and spec["B"] ** spec["L"] >= cfg["target_len"]
        assert torch.isfinite(tr.lm_loss(model, (x, pos)))
    with pytest.raises(ValueError, match="name"):
        tr.checkpoint_config("other")
    with pytest.raises(ValueError, match="enc"):
        tr.make_model({"enc": "alibi", "ids": "plain"}, small)


def test_batches_shared_across_arms():
    cfg = tr.checkpoint_config()
    corpus = np.random.default_rng(1).integers(0, 256, 5000)
    arms = cfg["arms"]
    a = tr.batch_fn(arms["RoPE"], corpus, cfg, 3)(7)
    b = tr.batch_fn(arms["TPE + OPT"], corpus, cfg, 3)(7)
    assert torch.equal(a[0], b[0]) and not torch.equal(a[1], b[1])
    assert not torch.equal(a[0], tr.batch_fn(arms["RoPE"], corpus, cfg, 4)(7)[0])  # another seed, other windows


@SETTINGS
@given(st.integers(0, 10**6), st.lists(st.integers(1, 300), min_size=1, max_size=4, unique=True))
def test_shared_tail_windows(seed, lengths):
    corpus = np.random.default_rng(seed).integers(0, 256, 2000)
    w = tr.shared_tail_windows(corpus, lengths, 5, np.random.default_rng(seed))
    top = max(lengths)
    for n in lengths:
        assert w[n].shape == (5, n + 1)
        assert torch.equal(w[n][:, -min(n, 8) - 1:], w[top][:, -min(n, 8) - 1:])  # the same last tokens
    with pytest.raises(ValueError, match="corpus"):
        tr.shared_tail_windows(corpus[:50], [64], 2, np.random.default_rng(0))


@SETTINGS
@given(st.integers(0, 10**6), st.floats(-1, 1))
def test_paired_bootstrap_ratio(seed, shift):
    g = np.random.default_rng(seed)
    a = g.normal(2, 0.3, 64)
    r, lo, hi = tr.paired_bootstrap_ratio(a, a, rng=g)
    assert r == lo == hi == 1.0
    r, lo, hi = tr.paired_bootstrap_ratio(a + shift, a, rng=g)  # a constant shift: no spread in the pairs
    assert np.isclose(r, np.exp(shift)) and np.isclose(lo, r) and np.isclose(hi, r)
    b = a + g.normal(0, 0.5, 64)
    r, lo, hi = tr.paired_bootstrap_ratio(b, a, rng=g)
    assert lo <= r <= hi and lo < hi


def test_paired_bootstrap_bad_input():
    with pytest.raises(ValueError, match="paired"):
        tr.paired_bootstrap_ratio(np.ones(3), np.ones(4))
    with pytest.raises(ValueError, match="finite"):
        tr.paired_bootstrap_ratio(np.array([1.0, np.nan]), np.ones(2))
    with pytest.raises(ValueError, match="level"):
        tr.paired_bootstrap_ratio(np.ones(3), np.ones(3), level=1.0)


def test_token_losses_match_mean_loss():
    torch.manual_seed(0)
    spec = tr.checkpoint_config()["arms"]["TPE"]
    model = tr.make_model(spec, dict(tr.checkpoint_config(), d_model=16, n_head=2))
    w = torch.randint(0, 256, (3, 41))
    tl = tr.token_losses(model, w, chunk=2)
    assert tl.shape == (3, 40)
    full = torch.nn.functional.cross_entropy(model(w[:, :-1]).reshape(-1, 256), w[:, 1:].reshape(-1))
    assert torch.isclose(tl.mean(), full, atol=1e-5)


def test_far_attention_mass():
    torch.manual_seed(0)
    spec = tr.checkpoint_config()["arms"]["RoPE"]
    model = tr.make_model(spec, dict(tr.checkpoint_config(), d_model=16, n_head=2))
    w = torch.randint(0, 256, (2, 40))
    with torch.no_grad():  # zero queries and keys: uniform attention over the causal keys
        for blk in model.blocks:
            blk.attn.qkv.weight[:32] = 0
            blk.attn.qkv.bias[:32] = 0
    m = tr.far_attention_mass(model, w, n_queries=4, min_dist=8)
    # query t (0-based) has t + 1 keys, of which t + 1 - 8 lie at least 8 back
    expect = np.mean([(t + 1 - 8) / (t + 1) for t in range(36, 40)])
    assert m.shape == (model.cfg.n_layer,) and np.allclose(m, expect, atol=1e-6)
    assert np.allclose(tr.far_attention_mass(model, w, n_queries=4, min_dist=100), 0)
    with pytest.raises(ValueError, match="n_queries"):
        tr.far_attention_mass(model, w, n_queries=41, min_dist=8)
    with pytest.raises(ValueError, match="min_dist"):
        tr.far_attention_mass(model, w, n_queries=4, min_dist=0)


def _uniform_model():
    torch.manual_seed(0)
    model = tr.make_model(tr.checkpoint_config()["arms"]["RoPE"], dict(tr.checkpoint_config(), d_model=16, n_head=2))
    with torch.no_grad():  # zero queries and keys: uniform attention over the visible keys
        for blk in model.blocks:
            blk.attn.qkv.weight[:32] = 0
            blk.attn.qkv.bias[:32] = 0
    return model


def test_attention_by_distance():
    model = _uniform_model()
    w = torch.randint(0, 256, (2, 20))
    prof = tr.attention_by_distance(model, w, n_queries=2, max_dist=6)
    assert prof.shape == (2, 6)
    assert np.allclose(prof, np.mean([1 / 19, 1 / 20]), atol=1e-6)  # queries 18, 19 see 19, 20 keys
    with pytest.raises(ValueError, match="max_dist"):
        tr.attention_by_distance(model, w, n_queries=2, max_dist=20)  # query 18 has no key 19 back
    with pytest.raises(TypeError):
        tr.attention_by_distance(model, w.float(), n_queries=2, max_dist=6)


def test_tail_loss_with_keys():
    model = _uniform_model()
    torch.manual_seed(1)
    for blk in model.blocks:  # back to ordinary attention
        torch.nn.init.normal_(blk.attn.qkv.weight, std=0.2)
    w = torch.randint(0, 256, (3, 30))
    full = tr.token_losses(model, w)[:, -5:].mean(1)
    assert torch.allclose(tr.tail_loss_with_keys(model, w, tail=5, keys=1000), full, atol=1e-5)
    one = tr.tail_loss_with_keys(model, w, tail=5, keys=1)
    assert not torch.allclose(one, full, atol=1e-3)
    with pytest.raises(ValueError, match="keys"):
        tr.tail_loss_with_keys(model, w, tail=5, keys=0)
    with pytest.raises(ValueError, match="tail"):
        tr.tail_loss_with_keys(model, w, tail=40, keys=4)


def test_same_difference_score_gap():
    B, L = 4, 3
    tpe = tr.TreeRotaryEmbedding(8, B, L)
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(8, generator=g), torch.randn(8, generator=g)

    def tpe_score(m, n):
        am, an = tpe.angles(torch.tensor([m])), tpe.angles(torch.tensor([n]))
        return float((hnn.apply_rotary(q[None], am) * hnn.apply_rotary(k[None], an)).sum())

    assert tr.same_difference_score_gap(tpe_score, B, L, np.random.default_rng(0), 100) <= 1e-5
    # a score that depends on absolute positions is caught
    assert tr.same_difference_score_gap(lambda m, n: m * n, B, L, np.random.default_rng(0), 100) > 1
    with pytest.raises(TypeError):
        tr.same_difference_score_gap(3, B, L, np.random.default_rng(0))


def test_context_gain():
    assert tr.context_gain({4: 3.0, 8: 2.5, 16: 2.4, 32: 2.0, 64: 2.1}, 32) == pytest.approx(2.0 / 2.4)
    # best context shorter than the window: the gain is above 1
    assert tr.context_gain({4: 3.0, 8: 2.0, 16: 2.2, 32: 2.3}, 32) == pytest.approx(2.3 / 2.0)
    with pytest.raises(ValueError):
        tr.context_gain({32: 2.0}, 32)
    with pytest.raises(ValueError):
        tr.context_gain({8: 2.0, 16: 1.0}, 32)
    with pytest.raises(ValueError):
        tr.context_gain({8: float("nan"), 32: 1.0}, 32)


# ---- the retrieval task -----------------------------------------------------------------------------------------

@SETTINGS
@given(st.integers(0, 10**6), st.integers(8, 200), st.integers(1, 3), st.integers(1, 3))
def test_retrieval_task_structure(seed, length, n_pairs, n_queries):
    n_queries = min(n_queries, n_pairs)
    task = dict(n_pairs=n_pairs, n_queries=n_queries, n_filler=5, n_keys=4, n_values=3)
    t = tr.retrieval_task(np.random.default_rng(seed), 6, length, **task)
    x, qp, kp = t["tokens"], t["query_pos"], t["key_pos"]
    assert x.shape == (6, length + 1) and qp.shape == (n_queries,) and kp.shape == (6, n_queries)
    assert int(x.min()) >= 0 and int(x.max()) < tr.retrieval_vocab(task)
    assert int(qp[-1]) + 1 == length  # the last answer is the last token
    pair = (x >= 5) & (x < 5 + 4 * 3)
    assert (pair.sum(1) == n_pairs).all()  # exactly n_pairs pair tokens, all before the queries
    assert not pair[:, int(qp[0]):].any() and (kp < qp[0]).all()
    for w in range(6):
        for i in range(n_queries):
            p = int(x[w, kp[w, i]]) - 5  # key * n_values + value of the stored pair
            assert int(x[w, qp[i]]) == 5 + 12 + p // 3  # the query asks for that key
            assert int(x[w, qp[i] + 1]) == 5 + 12 + 4 + p % 3  # and the answer is its value
    keys = (x[:, : int(qp[0])] - 5) // 3
    assert all(len(set(keys[w][pair[w, : int(qp[0])]].tolist())) == n_pairs for w in range(6))  # distinct keys


def test_retrieval_task_bad_input():
    g = np.random.default_rng(0)
    with pytest.raises(ValueError, match="too short"):
        tr.retrieval_task(g, 2, 4, n_pairs=3, n_queries=2)
    with pytest.raises(ValueError, match="n_queries"):
        tr.retrieval_task(g, 2, 32, n_pairs=1, n_queries=2)
    with pytest.raises(ValueError, match="n_keys"):
        tr.retrieval_task(g, 2, 32, n_pairs=3, n_keys=2)
    with pytest.raises(TypeError):
        tr.retrieval_task(0, 2, 32)
    with pytest.raises(ValueError, match="n_values"):
        tr.retrieval_vocab(dict(n_filler=2, n_keys=1, n_values=1))


def test_retrieval_config_batches_and_scores():
    cfg = tr.checkpoint_config("retrieval")
    assert cfg == tr.checkpoint_config("retrieval")
    small = dict(cfg, batch_size=3)
    x0 = None
    for spec in cfg["arms"].values():
        if spec["enc"] == "tpe":
            assert spec["B"] ** spec["L"] >= max(cfg["eval"]["lengths"])
        x, pos, qp = tr.retrieval_batch_fn(spec, small, 0)(5)
        assert x.shape == pos.shape == (3, cfg["train_len"] + 1) and int(pos.max()) < cfg["target_len"]
        if spec["ids"] == "opt":  # chunks of at least 2B (the chapter's choice) unless the arm says otherwise
            assert ((pos - torch.arange(x.shape[1])) % spec["B"] == 0).all()
            n_chunks = spec.get("n_chunks", cfg["n_chunks"])
            assert (cfg["train_len"] + 1) // n_chunks >= (2 * spec["B"] if "n_chunks" not in spec else 1)
        x0 = x if x0 is None else x0
        assert torch.equal(x, x0)  # the same windows for every arm
        model = tr.make_model(spec, small)
        assert torch.isfinite(tr.retrieval_loss(model, (x, pos, qp)))
    hit, loss = tr.retrieval_scores(model, tr.retrieval_task(np.random.default_rng(0), 5, 40, **cfg["task"]), 2)
    assert hit.shape == loss.shape == (5, 1) and hit.dtype == torch.bool and (loss > 0).all()
    val, tests = tr.retrieval_windows(cfg)
    assert sorted(tests) == cfg["eval"]["lengths"] and val["tokens"].shape == (cfg["val_windows"], 33)
    assert torch.equal(tr.retrieval_windows(cfg)[1][2048]["tokens"], tests[2048]["tokens"])
    with pytest.raises(ValueError):
        tr.retrieval_batch_fn({"enc": "tpe", "ids": "plain", "B": 1, "L": 2}, cfg, 0)


def test_accuracy_by_distance():
    rows = tr.accuracy_by_distance([1, 0, 1, 1], [1, 5, 6, 30], [0, 4, 8, 16, 64])
    assert rows[0] == (0, 4, 1.0, 1) and rows[1] == (4, 8, 0.5, 2) and rows[3] == (16, 64, 1.0, 1)
    assert rows[2][3] == 0 and np.isnan(rows[2][2])
    with pytest.raises(ValueError, match="same number"):
        tr.accuracy_by_distance([1, 0], [1], [0, 4])
    with pytest.raises(ValueError, match="increasing"):
        tr.accuracy_by_distance([1], [1], [4, 4])
    with pytest.raises(ValueError):
        tr.accuracy_by_distance([1], [-1], [0, 4])


def test_attention_on_answer():
    cfg = tr.checkpoint_config("retrieval")
    torch.manual_seed(0)
    model = tr.make_model(cfg["arms"]["TPE + OPT"], cfg)
    task = tr.retrieval_task(np.random.default_rng(1), 3, 40, **cfg["task"])
    att = tr.attention_on_answer(model, task)
    assert att.shape == (3, cfg["n_layer"]) and ((att > 0) & (att < 1)).all()
    # an untrained model attends about uniformly: near 1 / (number of visible keys)
    assert np.allclose(att, 1 / (int(task["query_pos"][0]) + 1), rtol=0.5)
    with pytest.raises(TypeError):
        tr.attention_on_answer(torch.nn.Linear(2, 2), task)


def test_faithful_fraction():
    plain = np.tile(np.arange(33), (4, 1))
    assert tr.faithful_fraction(plain, 16) == 1.0
    g = np.random.default_rng(0)
    two = tr.opt_position_ids(g, 256, 33, 8, 2048, 2)
    eight = tr.opt_position_ids(g, 256, 33, 8, 2048, 8)
    assert 0 < tr.faithful_fraction(eight, 16) < tr.faithful_fraction(two, 16) < 1
    with pytest.raises(ValueError):
        tr.faithful_fraction(plain, 33)
    with pytest.raises(TypeError):
        tr.faithful_fraction(plain.astype(float), 4)


# ---- the offset-recall task ---------------------------------------------------------------------------------------

@SETTINGS
@given(st.integers(0, 10**6), st.integers(14, 200), st.integers(1, 3), st.integers(1, 3), st.integers(1, 3))
def test_offset_recall_task_structure(seed, length, n_pairs, n_queries, gap):
    n_queries = min(n_queries, n_pairs)
    task = dict(kind="offset", n_pairs=n_pairs, n_queries=n_queries, n_values=5, n_keys=4, gap=gap)
    t = tr.make_task(np.random.default_rng(seed), 6, length, task)
    x, qp, kp = t["tokens"], t["query_pos"], t["key_pos"]
    assert x.shape == (6, length + 1) and qp.shape == (n_queries,) and kp.shape == (6, n_queries)
    assert int(x.min()) >= 0 and int(x.max()) < tr.retrieval_vocab(task) == 5 + 2 * 4
    assert int(qp[-1]) + 1 == length
    key = (x >= 5) & (x < 9)
    assert (key.sum(1) == n_pairs).all() and not key[:, int(qp[0]):].any()
    for w in range(6):
        ks = x[w][key[w]].tolist()
        assert len(set(ks)) == n_pairs  # distinct keys
        for i in range(n_queries):
            k = int(kp[w, i])
            assert int(x[w, k]) in ks and int(x[w, qp[i]]) == int(x[w, k]) + 4  # asks for the key at kp
            assert int(x[w, qp[i] + 1]) == int(x[w, k + gap]) < 5  # answer: the value token gap after it


@pytest.mark.parametrize("n_pairs", [1, 2])  # 1: the recall checkpoint's task; 2: probe part B's
def test_offset_recall_needs_position(n_pairs):
    """The answer is not a function of the window's content alone: shuffling the tokens before the queries keeps
    every token (the same bag) but changes the answer in most windows. This shows the task needs the tokens'
    order, not that it needs a positional encoding (a causal model without one can infer order: the recall
    checkpoint's NoPE arm, condition ``needs_position``)."""
    g = np.random.default_rng(0)
    t = tr.offset_recall_task(g, 400, 32, n_pairs=n_pairs, n_queries=1, n_values=16, n_keys=8, gap=1)
    x, qp = t["tokens"].numpy(), int(t["query_pos"][0])
    changed = 0
    for w in range(len(x)):
        prefix = g.permutation(x[w, :qp])
        k = int(np.flatnonzero(prefix == x[w, qp] - 8)[0])
        changed += int(prefix[k + 1] != x[w, qp + 1]) if k + 1 < qp else 1
    assert changed / len(x) > 0.8
    # whereas a passkey's answer is its pair token's content: shuffling cannot change it
    p = tr.retrieval_task(g, 50, 32, n_pairs=1, n_queries=1, n_filler=16, n_keys=1, n_values=16)
    assert (p["tokens"][:, -1] - 33 == p["tokens"].gather(1, p["key_pos"])[:, 0] - 16).all()


def test_offset_recall_bad_input():
    g = np.random.default_rng(0)
    with pytest.raises(ValueError, match="too short"):
        tr.offset_recall_task(g, 2, 6, n_pairs=2, n_queries=1, gap=3)
    with pytest.raises(ValueError, match="n_keys"):
        tr.offset_recall_task(g, 2, 32, n_pairs=3, n_keys=2)
    with pytest.raises(ValueError, match="gap"):
        tr.offset_recall_task(g, 2, 32, gap=0)
    with pytest.raises(ValueError, match="kind"):
        tr.make_task(g, 2, 32, dict(kind="copy"))
    with pytest.raises(TypeError):
        tr.make_task(g, 2, 32, [1])


def test_recall_config():
    cfg = tr.checkpoint_config("recall")
    assert list(cfg["arms"]) == list(tr.RECALL_ARMS) and cfg["arms"]["NoPE"]["enc"] == "none"
    assert cfg["vocab_size"] == tr.retrieval_vocab(cfg["task"]) and cfg["task"]["kind"] == "offset"
    assert {"in_window", "plateau", "retrieval_at_64x", "needs_both_parts", "needs_position"} <= set(cfg["claims"])
    val, tests = tr.retrieval_windows(cfg)
    t = tests[2048]
    assert (t["tokens"][:, -1] == t["tokens"].gather(1, t["key_pos"] + 1)[:, 0]).all()
    small = dict(cfg, batch_size=3, steps=2, val_every=1, d_model=16)
    model, hist = tr.fit_retrieval_arm(cfg["arms"]["TPE + OPT"], small, 0, val, desc="t")
    assert set(hist.evals) == {"val_loss", "val_acc"} and len(hist.evals["val_acc"]) >= 2
    hit, loss = tr.retrieval_scores(model, t, chunk=64)
    assert hit.shape == (len(t["tokens"]), 1) and torch.isfinite(loss).all()


# ---- round 5: two-key offset recall at d = 64 and the dilution control -----------------------------------------

def test_recall2_config():
    """Round 5's config: probe part B's two-key task at d = 64, the recall config's arms, bars and conditions."""
    cfg, old = tr.checkpoint_config("recall2"), tr.checkpoint_config("recall")
    assert cfg["task"] == tr.RECALL2_TASK and cfg["task"]["n_pairs"] == 2 and cfg["d_model"] == 64
    assert cfg["steps"] == tr.RECALL2_RECIPE["steps"] and cfg["weight_seeds"] == []
    assert list(cfg["arms"]) == list(tr.RECALL_ARMS) and cfg["claims"] == old["claims"]
    assert cfg["vocab_size"] == tr.retrieval_vocab(cfg["task"])
    ctl, top = cfg["eval"]["control"], max(cfg["eval"]["lengths"])
    assert max(ctl["shifts"]) + cfg["train_len"] <= top and ctl["prefix_len"] == top


def test_prefixed_task_keeps_the_answer():
    g = np.random.default_rng(0)
    t = tr.offset_recall_task(g, 20, 32, n_pairs=2)
    p = tr.prefixed_task(t, 100, np.random.default_rng(1), 16)
    assert p["tokens"].shape == (20, 101) and torch.equal(p["tokens"][:, -33:], t["tokens"])
    assert (p["tokens"][:, :68] < 16).all()  # value tokens only: no key in the prefix
    assert torch.equal(p["key_pos"], t["key_pos"] + 68) and torch.equal(p["query_pos"], t["query_pos"] + 68)
    qp = int(p["query_pos"][0])
    assert torch.equal(p["tokens"][:, qp + 1], p["tokens"].gather(1, p["key_pos"] + 1)[:, 0])
    with pytest.raises(ValueError):
        tr.prefixed_task(t, 10, np.random.default_rng(1), 16)  # shorter than the windows
    with pytest.raises(TypeError):
        tr.prefixed_task(t, 100, 1, 16)


def _tiny_recall2():
    cfg = tr.checkpoint_config("recall2")
    cfg.update(d_model=16, n_layer=1, target_len=256, val_windows=8)
    cfg["eval"] = dict(cfg["eval"], lengths=[32, 128], windows=6,
                       control=dict(shifts=[48, 96], prefix_len=128, attention_windows=2))
    return cfg


@pytest.mark.parametrize("arm, shift, same", [("RoPE", 48, True), ("RoPE", 96, True), ("NoPE", 48, True),
                                               ("TPE", 96, True), ("TPE", 48, False)])
def test_dilution_control_shifts(arm, shift, same):
    """What the shift conditions can show: RoPE (and NoPE) attend the same at any shift (relative positions only);
    TPE (B = 8) too where the window 96..127 crosses no carry of its upper digits, not where 48..79 crosses
    64 = 8**2."""
    cfg = _tiny_recall2()
    conds = tr.dilution_tasks(cfg)
    assert set(conds) == {"shift 48", "shift 96", "prefix 128"}
    base = tr.retrieval_windows(cfg)[1][32]
    assert conds["prefix 128"][0]["tokens"].shape == (6, 129) and conds["shift 48"][1][0] == 48
    torch.manual_seed(0)
    m = tr.make_model(cfg["arms"][arm], cfg).eval()
    with torch.no_grad():
        _, a = m(base["tokens"][:, :-1], record=True)
        _, b = m(base["tokens"][:, :-1], pos=conds[f"shift {shift}"][1], record=True)
    diff = max(float((x - y).abs().max()) for x, y in zip(a["attn"], b["attn"]))
    assert (diff < 1e-5) is same, diff


def test_dilution_control_bad_config():
    cfg = _tiny_recall2()
    bad = dict(cfg, eval={k: v for k, v in cfg["eval"].items() if k != "control"})
    with pytest.raises(ValueError, match="control"):
        tr.dilution_tasks(bad)
    bad = dict(cfg, eval=dict(cfg["eval"], control=dict(shifts=[250], prefix_len=128)))
    with pytest.raises(ValueError, match="shift"):
        tr.dilution_tasks(bad)  # ids past the model's table


def test_query_attention():
    cfg = _tiny_recall2()
    t = tr.retrieval_windows(cfg)[1][128]
    torch.manual_seed(0)
    m = tr.make_model(cfg["arms"]["RoPE"], cfg)
    a = tr.query_attention(m, t, gap=1, n_windows=3)
    assert a.shape == (3, 1, 2) and (a >= 0).all() and (a.sum(-1) <= 1 + 1e-6).all()
    with pytest.raises(ValueError):
        tr.query_attention(m, t, n_windows=100)
    with pytest.raises(TypeError):
        tr.query_attention("model", t)


def test_flush_denormal_restores_the_state_it_found():
    assert not tr.flush_denormal_on()
    with tr.flush_denormal(True):
        assert tr.flush_denormal_on()
        with tr.flush_denormal(False):
            assert not tr.flush_denormal_on()
        assert tr.flush_denormal_on()  # the inner block restored the outer one's state
    assert not tr.flush_denormal_on()
    with pytest.raises(RuntimeError), tr.flush_denormal(True):
        raise RuntimeError("boom")
    assert not tr.flush_denormal_on()  # restored on an error too
    with pytest.raises(TypeError):
        with tr.flush_denormal(1):
            pass


# ---- round 7: the plain mix of the jumping-id arms and the restart rule ---------------------------------------

def test_plain_frac_mixes_plain_windows_into_jumping_ids():
    arm = dict(enc="rope", ids="opt", B=8)
    base = tr.train_position_ids(arm, np.random.default_rng(3), 400, 33, 2048, 2)
    again = tr.train_position_ids(dict(arm), np.random.default_rng(3), 400, 33, 2048, 2)
    assert np.array_equal(base, again)  # without plain_frac nothing more is drawn: recall2's ids unchanged
    mixed = tr.train_position_ids(dict(arm, plain_frac=0.5), np.random.default_rng(3), 400, 33, 2048, 2)
    plain = (mixed == np.arange(33)).all(1)
    assert 0.4 < plain.mean() < 0.6  # about half the windows plain
    assert np.array_equal(mixed[~plain], base[~plain])  # the others keep their jumping ids
    assert (mixed % 8 == np.arange(33) % 8).all()  # OPT's lowest digit stays contiguous either way
    assert (tr.train_position_ids(dict(arm, plain_frac=1.0), np.random.default_rng(0), 5, 33, 2048, 2)
            == np.arange(33)).all()
    skips = tr.train_position_ids(dict(enc="rope", ids="skips", plain_frac=0.0), np.random.default_rng(3), 50, 33,
                                  2048, 2)
    assert not (skips == np.arange(33)).all(1).any()
    with pytest.raises(ValueError, match="plain_frac"):
        tr.train_position_ids(dict(arm, plain_frac=1.5), np.random.default_rng(0), 5, 33, 2048, 2)


def test_recall3_config_and_restart_seeds():
    cfg, r2 = tr.checkpoint_config("recall3"), tr.checkpoint_config("recall2")
    assert cfg["recipe"] == tr.RECALL3_RECIPE and cfg["first_attempt_from"] == "recall2"
    assert {k: v for k, v in cfg.items() if k in r2 and k != "arms"} == {k: v for k, v in r2.items() if k != "arms"}
    for a, spec in cfg["arms"].items():
        jumping = r2["arms"][a]["ids"] != "plain"
        want = dict(r2["arms"][a], plain_frac=0.5) if jumping and cfg["recipe"] == "M" else r2["arms"][a]
        assert spec == want, a
    assert cfg["restarts"]["skip"] == ["NoPE"] and cfg["restarts"]["max"] == 2
    assert tr.restart_seed(cfg, 1, 0) is None and tr.restart_seed(cfg, 1, 2) == 2001
    with pytest.raises(ValueError):
        tr.restart_seed(cfg, 1, 3)


def test_restart_chain_reads_the_first_attempt_at_the_bars():
    cfg = tr.checkpoint_config("recall3")
    ok, low, moving = (dict(final_val_acc=a, plateau=p) for a, p in ((1.0, 0.0), (0.5, 0.0), (0.97, 0.2)))
    assert tr.meets_bars(ok, cfg) and not tr.meets_bars(low, cfg) and not tr.meets_bars(moving, cfg)
    assert tr.meets_bars(dict(final_val_acc=0.95, plateau=0.02), cfg)  # inclusive bars
    assert tr.restart_chain([], cfg) == dict(read=None, next=0)
    assert tr.restart_chain([ok], cfg) == dict(read=0, next=None)
    assert tr.restart_chain([low], cfg) == dict(read=None, next=1)
    assert tr.restart_chain([low, moving, ok], cfg) == dict(read=2, next=None)
    assert tr.restart_chain([low, moving, low], cfg) == dict(read=2, next=None)  # the cap: the last is read
    with pytest.raises(ValueError, match="later attempt"):
        tr.restart_chain([ok, low], cfg)  # no attempt after one that met the bars
    with pytest.raises(ValueError, match="at most"):
        tr.restart_chain([low] * 4, cfg)


def test_restart_changes_the_init_only():
    cfg = _tiny_recall2()
    cfg.update(steps=4, warmup=1, val_every=2, batch_size=4)
    val = tr.retrieval_windows(cfg)[0]
    arm = cfg["arms"]["RoPE"]
    m0, h0 = tr.fit_retrieval_arm(arm, cfg, 1, val)
    m0b, h0b = tr.fit_retrieval_arm(arm, cfg, 1, val)
    assert h0.evals == h0b.evals  # attempt 0 is the seed's run as before
    m1, h1 = tr.fit_retrieval_arm(arm, cfg, 1, val, init_seed=1001)
    _, h1b = tr.fit_retrieval_arm(arm, cfg, 1, val, init_seed=1001)
    assert h1.evals == h1b.evals  # a restart is reproducible
    assert any(not torch.equal(a, b) for a, b in zip(m0.state_dict().values(), m1.state_dict().values()))


def _ngram_reference(corpus, windows, order):
    """Witten-Bell byte n-gram by dictionaries (the slow, obvious version)."""
    from collections import defaultdict
    data = [int(v) for v in corpus]
    cnt = [defaultdict(lambda: defaultdict(int)) for _ in range(order)]
    for i in range(len(data)):
        for o in range(min(order, i + 1)):
            cnt[o][tuple(data[i - o: i])][data[i]] += 1
    out = []
    for row in windows.tolist():
        losses = []
        for j in range(1, len(row)):
            p = 1 / 256
            for o in range(min(order, j + 1)):
                d = cnt[o].get(tuple(row[j - o: j]))
                if d:
                    t, u = sum(d.values()), len(d)
                    p = t / (t + u) * d.get(row[j], 0) / t + u / (t + u) * p
            losses.append(-np.log(p))
        out.append(losses)
    return np.array(out)


@pytest.mark.parametrize("order", [1, 3, 5])
def test_ngram_token_losses_match_reference(order):
    g = np.random.default_rng(order)
    corpus = g.integers(0, 6, 2000)
    w = torch.as_tensor(g.integers(0, 8, (3, 12)))  # bytes 6, 7 never seen in the corpus
    got = tr.ngram_token_losses(corpus, w, order=order).numpy()
    assert got.shape == (3, 11)
    np.testing.assert_allclose(got, _ngram_reference(corpus, w, order), atol=1e-5)


def test_ngram_token_losses_is_a_distribution():
    g = np.random.default_rng(0)
    corpus = g.integers(0, 256, 5000)
    w = torch.stack([torch.tensor([int(corpus[10]), int(corpus[11]), b]) for b in range(256)])
    p = np.exp(-tr.ngram_token_losses(corpus, w, order=3).numpy()[:, -1])
    assert np.isclose(p.sum(), 1.0, atol=1e-5) and (p > 0).all()


def test_ngram_token_losses_bad_input():
    w = torch.zeros((2, 5), dtype=torch.int64)
    with pytest.raises(ValueError, match="order"):
        tr.ngram_token_losses(np.zeros(10, dtype=int), w, order=0)
    with pytest.raises(ValueError, match="bytes"):
        tr.ngram_token_losses(np.zeros(10, dtype=int), w + 300)
    with pytest.raises(ValueError, match="corpus"):
        tr.ngram_token_losses(np.array([1, 300]), w)


# --- session 27: the paired timing measure and inference-time RoPE scaling (#62) ---


def test_paired_timing_ratio_reads_the_per_round_ratio():
    rng = np.random.default_rng(0)
    load = rng.uniform(1.0, 3.0, 21)  # heavy load moves both sides of a round alike
    out = tr.paired_timing_ratio(1.02 * load, load)
    assert out["ratio"] == pytest.approx(1.02)
    assert out["low"] <= out["ratio"] <= out["high"]
    assert out["width"] < 0.01  # the load cancels in the paired ratio
    # the unpaired spread of each side is large under this load: the old condition would fail
    assert (np.subtract(*np.percentile(load, [75, 25]))) / np.median(load) > 0.25


def test_paired_timing_ratio_broken_input_fails_the_condition():
    rng = np.random.default_rng(1)
    den = np.ones(21)
    num = rng.choice([0.2, 5.0], 21)  # a broken timer: rounds unrelated to the work
    assert tr.paired_timing_ratio(num, den)["width"] > 0.25  # timing_resolved (< 0.25) fails
    with pytest.raises(ValueError):
        tr.paired_timing_ratio(np.ones(5), np.ones(4))
    with pytest.raises(ValueError):
        tr.paired_timing_ratio(np.ones(2), np.ones(2))
    with pytest.raises(ValueError):
        tr.paired_timing_ratio(np.array([1.0, 0.0, 1.0]), np.ones(3))


@pytest.mark.parametrize("method", tr.ROPE_SCALINGS)
def test_rope_scaling_at_scale_one_is_rope(method):
    pos = torch.arange(100)
    rope = hnn.RotaryEmbedding(16).angles(pos)
    s = tr.ScaledRotaryEmbedding(16, method, 1.0, 32)
    assert torch.allclose(s.angles(pos), rope)
    assert s.mscale == 1.0


def test_position_interpolation_maps_into_the_training_window():
    s = tr.ScaledRotaryEmbedding(16, "pi", 8.0, 32)
    rope = hnn.RotaryEmbedding(16)
    assert torch.allclose(s.angles(torch.arange(0, 256, 8)), rope.angles(torch.arange(32)), atol=1e-5)


def test_ntk_keeps_the_highest_frequency_and_interpolates_the_lowest():
    s, rope = tr.ScaledRotaryEmbedding(16, "ntk", 64.0, 32), hnn.RotaryEmbedding(16)
    assert float(s.inv_freq[0]) == pytest.approx(float(rope.inv_freq[0]))
    assert float(s.inv_freq[-1]) == pytest.approx(float(rope.inv_freq[-1]) / 64.0, rel=1e-4)


def test_yarn_ramp_and_temperature():
    s, rope = tr.ScaledRotaryEmbedding(16, "yarn", 64.0, 32), hnn.RotaryEmbedding(16)
    r = 32 * rope.inv_freq.double() / (2 * np.pi)
    slow = r < 1  # fewer than one turn in the training window: interpolated like PI
    assert torch.allclose(s.inv_freq[slow].double(), rope.inv_freq[slow].double() / 64, rtol=1e-5)
    fast = tr.ScaledRotaryEmbedding(16, "yarn", 64.0, 32 * 100)  # every pair turns > 32 times: kept
    assert torch.allclose(fast.inv_freq[:2], rope.inv_freq[:2])
    assert s.mscale == pytest.approx(0.1 * np.log(64) + 1)
    q = torch.randn(1, 1, 5, 16)
    q2, _ = s(q, q, torch.arange(5))
    assert torch.allclose(q2.norm(dim=-1), q.norm(dim=-1) * s.mscale, rtol=1e-5)


def test_with_rope_scaling_copies_and_refuses_non_rope():
    cfg = hnn.TransformerConfig(vocab_size=11, n_layer=1, n_head=2, d_model=16, max_len=64)
    torch.manual_seed(0)
    m = hnn.Transformer(cfg)
    x = torch.randint(0, 11, (2, 20))
    same = tr.with_rope_scaling(m, "yarn", 1.0, 32)
    assert torch.allclose(same(x), m(x))
    pi = tr.with_rope_scaling(m, "pi", 2.0, 32)
    assert type(m.rotary) is hnn.RotaryEmbedding and not torch.allclose(pi(x), m(x))
    with pytest.raises(ValueError):
        tr.with_rope_scaling(pi, "pi", 2.0, 32)
    with pytest.raises(ValueError):
        tr.with_rope_scaling(hnn.Transformer(cfg, rotary=tr.TreeRotaryEmbedding(8, 4, 2)), "pi", 2.0, 32)
    with pytest.raises(ValueError):
        tr.ScaledRotaryEmbedding(16, "bogus", 2.0, 32)
