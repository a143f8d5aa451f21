import json

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import tree_training as tt

SETTINGS = settings(max_examples=25, deadline=None)


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """The ops here are tiny: one thread avoids spin-waiting on a shared machine."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def make_tree(seed, n_nodes=7, max_seg=5, vocab=17, mask_prob=0.2, coefs=False):
    return tt.random_tree_by_parents(np.random.default_rng(seed), n_nodes, max_seg, vocab, mask_prob, coefs)


def model(ssm_every=0, dtype=torch.float64, vocab=17):
    torch.manual_seed(0)
    cfg = tt.TreeLMConfig(vocab_size=vocab, n_layer=2 if not ssm_every else 4, n_head=2, d_model=16,
                          ssm_every=ssm_every, d_state=4, init_std=0.3)
    return tt.TreeLM(cfg).to(dtype)


def grads(m):
    return [p.grad.detach().clone() for p in m.parameters()]


# -- the tree type ----------------------------------------------------------------------------------------------
def test_validation_errors_name_the_node():
    with pytest.raises(ValueError, match="node 1: empty"):
        tt.TrajectoryTree([tt.Node([1], None), tt.Node([], 0)])
    with pytest.raises(ValueError, match="node 1: bad parent"):
        tt.TrajectoryTree([tt.Node([1], None), tt.Node([2], 5)])
    with pytest.raises(ValueError, match="exactly one root"):
        tt.TrajectoryTree([tt.Node([1], None), tt.Node([2], None)])
    with pytest.raises(ValueError, match="cycle"):
        tt.TrajectoryTree([tt.Node([1], None), tt.Node([2], 2), tt.Node([3], 1)])
    with pytest.raises(ValueError, match="node 0: loss_mask"):
        tt.TrajectoryTree([tt.Node([1, 2], None, [True])])
    with pytest.raises(ValueError, match="leaves only"):
        tt.TrajectoryTree([tt.Node([1], None, coef=2.0), tt.Node([2], 0)])
    with pytest.raises(TypeError):
        tt.TrajectoryTree([[1, 2]])
    with pytest.raises(TypeError):
        tt.serialize("not a tree")
    with pytest.raises(ValueError, match="mode"):
        tree = make_tree(0)
        tt.token_weights(tree, tt.serialize(tree), "max")


def test_counts_on_a_known_tree():
    # root of 4 tokens, two children of 2 and 3 tokens: N_tree = 9, N_flat = 6 + 7 = 13
    tree = tt.TrajectoryTree([tt.Node([1, 2, 3, 4], None), tt.Node([5, 6], 0), tt.Node([7, 8, 9], 0)])
    assert tree.n_tree == 9 and tree.n_flat == 13
    assert tree.ideal_speedup == pytest.approx(13 / 9)
    ser = tt.serialize(tree)
    assert ser.pos.tolist() == [0, 1, 2, 3, 4, 5, 4, 5, 6]
    assert ser.pred.tolist() == [-1, 0, 1, 2, 3, 4, 3, 6, 7]  # both children's first tokens read position 3


@SETTINGS
@given(st.integers(0, 10**6), st.integers(1, 9))
def test_serialization_and_mask_against_brute_force(seed, n_nodes):
    tree = make_tree(seed, n_nodes)
    ser = tt.serialize(tree)
    assert len(ser) == tree.n_tree and sorted(ser.order) == list(range(len(tree)))
    g = tree.n_leaves_below()
    assert tree.n_flat == sum(gi * len(nd.tokens) for gi, nd in zip(g, tree.nodes))
    assert 0 <= tree.overlap_ratio < 1
    dense = tt.tree_mask_dense(tree, ser)
    assert np.array_equal(tt.tree_mask_horizon(ser.horizon).numpy(), dense)
    assert not np.triu(dense, 1).any()
    # node-block layout covers exactly the allowed pairs
    nb = tt.node_blocks(tree, ser)
    rebuilt = np.zeros_like(dense)
    for s, e, ks, m in zip(nb.start, nb.end, nb.keys, nb.masks):
        for qi in range(s, e):
            rebuilt[qi, ks.numpy()[m[qi - s].numpy()]] = True
    assert np.array_equal(rebuilt, dense)


@SETTINGS
@given(st.integers(0, 10**6), st.integers(1, 9))
def test_positions_and_labels_match_each_path(seed, n_nodes):
    tree = make_tree(seed, n_nodes)
    ser = tt.serialize(tree)
    for ix, toks in zip(tt.path_token_index(tree, ser), tree.path_tokens()):
        assert ser.pos[ix].tolist() == list(range(len(ix)))
        assert ser.tokens[ix].tolist() == toks
        # (pred(t), t) pairs along the path are the (i-1, i) pairs of the linearized path
        assert ser.pred[ix[1:]].tolist() == ix[:-1].tolist()
        assert ser.pred[ix[0]] == -1


@SETTINGS
@given(st.integers(0, 10**6), st.integers(1, 9), st.sampled_from(["sum", "mean"]))
def test_weights_identity(seed, n_nodes, mode):
    tree = make_tree(seed, n_nodes, coefs=True)
    ser = tt.serialize(tree)
    w = tt.token_weights(tree, ser, mode)
    assert np.all(w[~ser.loss_mask] == 0)
    total = 0.0
    for p, ix in zip(tree.paths(), tt.path_token_index(tree, ser)):
        c, n = tree.nodes[p[-1]].coef, ser.loss_mask[ix].sum()
        total += c * (n if mode == "sum" else (n / max(1, n)))
    assert w.sum() == pytest.approx(total / len(tree.paths()))
    # SFT with a summed loss: w_t = g_t / K
    for leaf in tree.leaves():
        tree.nodes[leaf].coef = None
    w = tt.token_weights(tree, ser)
    g, K = np.array(tree.n_leaves_below()), len(tree.leaves())
    assert np.allclose(w, np.where(ser.loss_mask, g[ser.node] / K, 0))


# -- exactness of the one-pass tree forward/backward ------------------------------------------------------------
@pytest.mark.parametrize("ssm_every", [0, 2])
@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_tree_equals_branches_fp64(ssm_every, mode):
    m = model(ssm_every)
    for seed in range(2):
        tree = make_tree(seed, 8, coefs=True)
        ser = tt.serialize(tree)
        lp = tt.tree_logprobs(m, tree, ser)
        for ix, lpk in zip(tt.path_token_index(tree, ser), tt.path_logprobs(m, tree)):
            assert torch.allclose(lp[ix], lpk, atol=1e-10, rtol=0)
        m.zero_grad()
        a = tt.tree_loss(m, tree, tt.token_weights(tree, ser, mode), ser)
        a.backward()
        ga = grads(m)
        m.zero_grad()
        b = tt.branch_avg_loss(m, tree, mode)
        b.backward()
        assert a.item() == pytest.approx(b.item(), rel=1e-10, abs=1e-12)
        for x, y in zip(ga, grads(m)):
            assert torch.allclose(x, y, rtol=1e-8, atol=1e-12)


def test_node_block_attention_equals_dense_mask():
    m = model()
    tree = make_tree(3, 8)
    ser = tt.serialize(tree)
    a = tt.tree_logprobs(m, tree, ser)
    b = tt.tree_logprobs(m, tree, ser, mask=tt.node_blocks(tree, ser))
    assert torch.allclose(a, b, atol=1e-12)


@pytest.mark.parametrize("ssm_every", [0, 2])
def test_sibling_isolation_bit_identical(ssm_every):
    m = model(ssm_every)
    tree = tt.TrajectoryTree([tt.Node([1, 2, 3], None), tt.Node([4, 5], 0), tt.Node([6, 7, 8], 0)])
    other = tt.TrajectoryTree([tt.Node([1, 2, 3], None), tt.Node([4, 5], 0), tt.Node([9, 10, 11], 0)])
    a = tt.tree_logits(m, tree)
    b = tt.tree_logits(m, other)
    assert torch.equal(a[:5], b[:5])  # the root and the first branch cannot see the second
    assert not torch.allclose(a[5:], b[5:])
    # an ancestor change reaches every descendant
    anc = tt.TrajectoryTree([tt.Node([1, 2, 0], None), tt.Node([4, 5], 0), tt.Node([6, 7, 8], 0)])
    c = tt.tree_logits(m, anc)
    assert not torch.isclose(a[3:], c[3:]).all(-1).any()


@pytest.mark.parametrize("ssm_every", [0, 2])
def test_each_fix_is_necessary(ssm_every):
    m = model(ssm_every)
    tree = tt.random_tree(np.random.default_rng(1), 6, [2, 2], (3, 5), 17)
    ser = tt.serialize(tree)
    ix = tt.path_token_index(tree, ser)
    ref = tt.path_logprobs(m, tree)

    def err(lp):
        return max((lp[i] - r).abs().max().item() for i, r in zip(ix, ref))

    assert err(tt.tree_logprobs(m, tree, ser)) < 1e-10
    N = len(ser)
    assert err(tt.tree_logprobs(m, tree, ser, mask=torch.ones(N, N, dtype=torch.bool).tril())) > 1e-3
    assert err(tt.tree_logprobs(m, tree, ser, pos=torch.arange(N))) > 1e-3
    assert err(tt.tree_logprobs(m, tree, ser, pred=np.arange(N) - 1)) > 1e-3
    if ssm_every:
        assert err(tt.tree_logprobs(m, tree, ser, route_state=False)) > 1e-4
        assert err(tt.tree_logprobs(m, tree, ser, route_conv=False)) > 1e-4


@pytest.mark.parametrize("ssm_every", [0, 2])
def test_ppo_clip_tree_equals_branches(ssm_every):
    """One shared ratio per token, the min inside the sum over branches: equal loss and gradients."""
    m = model(ssm_every)
    tree = make_tree(4, 8)
    for i, leaf in enumerate(tree.leaves()):  # advantages of both signs share prefixes
        tree.nodes[leaf].coef = [1.0, -0.5][i % 2]
    ser = tt.serialize(tree)
    with torch.no_grad():
        lp0 = tt.tree_logprobs(m, tree, ser).numpy()
    old = np.minimum(lp0 + np.random.default_rng(0).normal(0, 0.3, len(lp0)), 0)  # ratios far from 1
    m.zero_grad()
    a = tt.tree_ppo_loss(m, tree, old, 0.2, ser)
    a.backward()
    ga = grads(m)
    m.zero_grad()
    b = tt.branch_ppo_loss(m, tree, old, 0.2)
    b.backward()
    assert a.item() == pytest.approx(b.item(), rel=1e-10)
    for x, y in zip(ga, grads(m)):
        assert torch.allclose(x, y, rtol=1e-8, atol=1e-12)
    # a fixed per-token weight (advantages summed before the min) is not PPO-clip once clipping is active
    with torch.no_grad():
        r = torch.exp(tt.tree_logprobs(m, tree, ser) - torch.as_tensor(old))
        w = torch.as_tensor(tt.token_weights(tree, ser)) * len(tree.leaves())
        folded = -torch.minimum(r * w, r.clamp(0.8, 1.2) * w)[torch.as_tensor(ser.loss_mask)].sum()
    assert abs(folded.item() / len(tree.leaves()) - b.item()) > 1e-6


# -- partitioning -----------------------------------------------------------------------------------------------
@SETTINGS
@given(st.integers(0, 10**6), st.integers(1, 12), st.integers(1, 12))
def test_partitions_are_connected_and_cover(seed, n_nodes, budget):
    tree = tt.split_long_nodes(make_tree(seed, n_nodes, max_seg=6), budget)
    parts = tt.partition_tree(tree, budget)
    seen = [n for P in parts for n in P.nodes]
    assert sorted(seen) == list(range(len(tree)))
    assert tt.partition_tokens(tree, parts) == tree.n_tree
    owner = {n: P.id for P in parts for n in P.nodes}
    for P in parts:
        assert sum(len(tree.nodes[n].tokens) for n in P.nodes) <= budget
        for n in P.nodes[1:]:  # connected: every non-root node's parent is in the same partition
            assert owner[int(tree.nodes[n].parent)] == P.id
        if P.parent is not None:  # the partition graph is a tree: the root's parent is in the parent partition
            assert owner[int(tree.nodes[P.root].parent)] == P.parent
    if len(parts) > 1:
        assert tt.naive_partition_tokens(tree, parts) > tree.n_tree


def test_split_long_nodes_keeps_branches():
    tree = make_tree(5, 6, max_seg=9, coefs=True)
    s = tt.split_long_nodes(tree, 2)
    assert s.path_tokens() == tree.path_tokens()
    assert max(len(n.tokens) for n in s.nodes) <= 2
    with pytest.raises(ValueError, match="longer than the budget"):
        tt.partition_tree(tree, 2) if max(len(n.tokens) for n in tree.nodes) > 2 else (_ for _ in ()).throw(
            ValueError("longer than the budget"))
    with pytest.raises(ValueError, match="budget"):
        tt.partition_tree(tree, 0)


def partition_case(ssm_every, dtype=torch.float64):
    m = model(ssm_every, dtype)
    tree = tt.split_long_nodes(make_tree(11, 10, max_seg=6, coefs=True), 6)
    ser = tt.serialize(tree)
    return m, tree, ser, tt.token_weights(tree, ser), tt.partition_tree(tree, 8)


def full_tree_grads(m, tree, w, ser):
    m.zero_grad()
    with tt.count_tokens(m) as c, tt.track_memory(m) as mem:
        loss = tt.tree_loss(m, tree, w, ser)
        loss.backward()
    return loss.item(), grads(m), c.tokens, mem


@pytest.mark.parametrize("ssm_every", [0, 2])
def test_partitioned_backward_equals_full_tree(ssm_every):
    m, tree, ser, w, parts = partition_case(ssm_every)
    assert len(parts) >= 2
    loss, g_full, full_tokens, full_mem = full_tree_grads(m, tree, w, ser)
    assert full_tokens == tree.n_tree
    m.zero_grad()
    with tt.count_tokens(m) as c:
        st_ = tt.partitioned_backward(m, tree, parts, w, ser)
    assert st_["loss"] == pytest.approx(loss, rel=1e-10)
    for x, y in zip(grads(m), g_full):
        assert torch.allclose(x, y, rtol=1e-8, atol=1e-12)
    # the tokens the model actually embedded, counted by a hook outside the method
    assert c.tokens == tree.n_tree and c.calls == len(parts)
    # the naive partitioning (ancestors re-prepended) gives the same gradients with more tokens
    m.zero_grad()
    with tt.count_tokens(m) as cn:
        sn = tt.naive_partitioned_backward(m, tree, parts, w, ser)
    assert sn["loss"] == pytest.approx(loss, rel=1e-10)
    for x, y in zip(grads(m), g_full):
        assert torch.allclose(x, y, rtol=1e-8, atol=1e-12)
    assert cn.tokens == tt.naive_partition_tokens(tree, parts) > tree.n_tree


def test_token_counter_sees_recomputation():
    """The hook counts what the model processes: running the tree twice, or per branch, shows up."""
    m, tree, ser, w, _ = partition_case(0)
    with tt.count_tokens(m) as c:
        tt.tree_logits(m, tree, ser)
        tt.tree_logits(m, tree, ser)
    assert c.tokens == 2 * tree.n_tree
    with tt.count_tokens(m) as c:
        tt.path_logprobs(m, tree)
    assert c.tokens == tree.n_flat


def partition_memory(m, tree, parts, w, ser, fn=tt.partitioned_backward):
    """Peak live saved bytes of a partitioned step and each partition's own saved bytes, measured outside."""
    m.zero_grad()
    own, before = {}, {}
    with tt.track_memory(m) as mem:

        def on_event(what, pid):
            if what == "forward":
                before[pid] = mem.saved_live
            elif what == "forward_done":
                own[pid] = mem.saved_live - before[pid]

        fn(m, tree, parts, w, ser, on_event=on_event)
    return mem, tt.chain_bound(parts, own), own


def test_memory_tracker_follows_real_storage():
    m, tree, ser, w, _ = partition_case(2)
    with tt.track_memory(m) as mem:
        a = tt.tree_loss(m, tree, w, ser)
        one = mem.saved_live
        b = tt.tree_loss(m, tree, w, ser)  # a second graph alive at the same time
        assert mem.saved_live == pytest.approx(2 * one, rel=0.01)
        a.backward()  # autograd frees a's saved tensors
        assert mem.saved_live == pytest.approx(one, rel=0.01)
        b.backward(retain_graph=True)  # ... but not b's while b's graph is retained
        assert mem.saved_live == pytest.approx(one, rel=0.01)
        del b
        assert mem.saved_live == 0
    assert mem.saved_peak == pytest.approx(2 * one, rel=0.01)
    assert mem.heap_peak is None or mem.heap_peak >= one


@pytest.mark.parametrize("ssm_every", [0, 2])
def test_partition_peak_memory_within_chain(ssm_every):
    m, tree, ser, w, parts = partition_case(ssm_every)
    full = full_tree_grads(m, tree, w, ser)[3]
    mem, bound, _ = partition_memory(m, tree, parts, w, ser)
    assert mem.saved_live == 0
    assert mem.saved_peak <= bound * 1.01
    assert mem.saved_peak < full.saved_peak


def test_partition_peak_check_fails_when_graphs_leak(monkeypatch):
    """A schedule that keeps every partition's graph alive breaks the chain bound: the check can fail."""
    m, tree, ser, w, parts = partition_case(2)
    mem_ok, _, _ = partition_memory(m, tree, parts, w, ser)
    kept = []
    m.register_forward_hook(lambda mod, args, out: kept.append(out))
    orig = torch.autograd.backward
    monkeypatch.setattr(torch.autograd, "backward", lambda *a, **k: orig(*a, retain_graph=True, **k))
    mem, bound, _ = partition_memory(m, tree, parts, w, ser)
    assert mem.saved_peak > bound * 1.01 and mem.saved_peak > mem_ok.saved_peak
    assert mem.saved_live > 0


def test_naive_partitioning_peak_is_one_partition_at_a_time():
    m, tree, ser, w, parts = partition_case(0)
    mem, bound, own = partition_memory(m, tree, parts, w, ser, tt.naive_partitioned_backward)
    assert mem.saved_live == 0 and mem.saved_peak > 0
    assert mem.saved_peak <= max(own.values()) * 1.01 < bound


def test_gateway_accumulation_in_fp32_is_bf16_exact():
    """Relayed bf16 gradients summed in fp32 round once: equal to the exact sum rounded to bf16; in bf16 not."""
    g = torch.Generator().manual_seed(0)
    parts = [torch.randn(4096, generator=g).to(torch.bfloat16) for _ in range(8)]
    like = torch.zeros(4096, dtype=torch.bfloat16)
    exact = torch.stack([p.double() for p in parts]).sum(0).to(torch.bfloat16)
    assert torch.equal(tt.accumulate_gateway_grads(parts, like), exact)
    in_bf16 = tt.accumulate_gateway_grads(parts, like, acc_dtype=torch.bfloat16)
    assert not torch.equal(in_bf16, exact)


def test_partitioned_backward_runs_in_bf16():
    m, tree, ser, w, parts = partition_case(0, torch.bfloat16)
    m.zero_grad()
    tt.tree_loss(m, tree, w, ser).backward()
    g_full = grads(m)
    m.zero_grad()
    tt.partitioned_backward(m, tree, parts, w, ser)
    rel = max(((a - b).float().norm() / b.float().norm().clamp_min(1e-30)).item() for a, b in zip(grads(m), g_full))
    assert rel < 0.05



def bf16_fanout_case():
    """A root of 8 tokens with 4 children of 6: under a budget of 14 the root partition keeps one child and the
    other 3 are child partitions, so each root key/value receives 3 relayed gradients (plus its own)."""
    g = np.random.default_rng(3)
    nodes = [tt.Node(g.integers(0, 17, 8).tolist(), None)]
    nodes += [tt.Node(g.integers(0, 17, 6).tolist(), 0, coef=c) for c in (1.0, -0.5, 0.75, 2.0)]
    tree = tt.TrajectoryTree(nodes)
    ser = tt.serialize(tree)
    parts = tt.partition_tree(tree, 14)
    assert len(parts) == 4 and parts[0].children == [1, 2, 3]
    return model(0, torch.bfloat16), tree, ser, tt.token_weights(tree, ser), parts


def test_partitioned_bf16_gateway_accumulation_rounds_once():
    """bf16 model: relaying the children's gateway gradients into an fp32 accumulator gives bit for bit the
    gradients of an exact (fp64) accumulator rounded once; accumulating in bf16 rounds after every child and
    does not."""
    m, tree, ser, w, parts = bf16_fanout_case()
    out = {}
    for acc in (torch.float64, torch.float32, torch.bfloat16):
        m.zero_grad()
        tt.partitioned_backward(m, tree, parts, w, ser, acc_dtype=acc)
        out[acc] = grads(m)
    assert all(torch.equal(a, b) for a, b in zip(out[torch.float32], out[torch.float64]))
    assert not all(torch.equal(a, b) for a, b in zip(out[torch.bfloat16], out[torch.float64]))
    m.zero_grad()
    tt.partitioned_backward(m, tree, parts, w, ser)  # the default accumulates in fp32
    assert all(torch.equal(a, b) for a, b in zip(grads(m), out[torch.float32]))


# -- realistic trees: a toy language, a sampler, prefix trees -----------------------------------------------------
def test_prefix_tree_keeps_every_completion_as_a_branch():
    prompt = [9, 9, 9]
    comps = [[1, 2, 3, 4], [1, 2, 5], [1, 2, 3, 4], [1, 2], [7], [1, 2, 3, 4, 6]]
    tree = tt.prefix_tree(prompt, comps, coefs=[0.5, 1.0, -1.0, 2.0, 3.0, -2.0])
    assert len(tree.leaves()) == len(comps)
    assert sorted(tree.path_tokens()) == sorted(prompt + c for c in comps)
    # each completion's coefficient sits on the leaf of its own branch
    by_path = sorted((tuple(t), tree.nodes[p[-1]].coef) for t, p in zip(tree.path_tokens(), tree.paths()))
    assert by_path == sorted((tuple(prompt + c), k) for c, k in zip(comps, [0.5, 1.0, -1.0, 2.0, 3.0, -2.0]))
    # shared prefixes are stored once: the trie holds fewer tokens than the flat rollouts
    assert tree.n_tree < tree.n_flat and tree.nodes[tree.root].loss_mask == [False] * 3
    ser = tt.serialize(tree)
    assert ser.loss_mask.sum() == tree.n_tree - len(prompt)
    one = tt.prefix_tree(prompt, [[4, 5]])
    assert one.n_tree == 5 and len(one) == 2
    with pytest.raises(ValueError, match="coefs"):
        tt.prefix_tree(prompt, comps, coefs=[1.0])
    with pytest.raises(ValueError, match="completions"):
        tt.prefix_tree(prompt, [[1], []])


@SETTINGS
@given(st.integers(0, 10**6), st.integers(1, 8))
def test_prefix_tree_random_groups(seed, k):
    g = np.random.default_rng(seed)
    base = g.integers(0, 3, 6).tolist()
    comps = [base[: int(g.integers(0, 6))] + g.integers(0, 3, int(g.integers(1, 4))).tolist() for _ in range(k)]
    tree = tt.prefix_tree([5], comps)
    assert len(tree.leaves()) == k
    assert sorted(tree.path_tokens()) == sorted([5] + c for c in comps)


def test_word_language_and_stream():
    lang = tt.word_language(np.random.default_rng(0), 20, n_words=6, word_len=(2, 3), n_next=2, p_end=0.1)
    a, ha = lang.stream(np.random.default_rng(1), 500)
    b, hb = lang.stream(np.random.default_rng(1), 500)
    assert np.array_equal(a, b) and np.array_equal(ha, hb) and len(a) == len(ha) == 500
    assert a.min() >= 0 and a.max() < 20 and (a == lang.eos).any()
    assert (ha >= 0).all() and 0 < ha.mean() < np.log(20)
    doc = lang.document(np.random.default_rng(2), 1000)
    assert doc[-1] == lang.eos and lang.eos not in doc[:-1]


def tiny_sampler():
    torch.manual_seed(0)
    return tt.TreeLM(tt.TreeLMConfig(vocab_size=17, n_layer=2, n_head=2, d_model=16, init_std=0.3)).double()


def test_generate_cache_matches_full_forward():
    """The key/value-cached sampler draws from exactly the model's next-token distributions."""
    m = tiny_sampler()
    prefix = [3, 1, 4, 1, 5]
    comps, ents = tt.generate(m, prefix, 3, 12, torch.Generator().manual_seed(0), eos=2)
    again, _ = tt.generate(m, prefix, 3, 12, torch.Generator().manual_seed(0), eos=2)
    assert comps == again
    for c, e in zip(comps, ents):
        assert 1 <= len(c) <= 12 and (c[-1] == 2 or len(c) == 12) and 2 not in c[:-1]
        seq = torch.tensor([prefix + c])
        with torch.no_grad():
            logp = m(seq, torch.arange(seq.shape[1]))[0][0, len(prefix) - 1:-1].log_softmax(-1)
        assert np.allclose(-(logp.exp() * logp).sum(-1).numpy(), e, atol=1e-10)
    with pytest.raises(ValueError, match="attention-only"):
        tt.generate(model(2), prefix, 1, 3, torch.Generator())
    with pytest.raises(ValueError, match="prefix"):
        tt.generate(m, [99], 1, 3, torch.Generator())


@pytest.mark.parametrize("branch", ["fork", "group"])
def test_sample_tree(branch):
    m = tiny_sampler()
    prompt = [3, 1, 4, 1, 5, 9]
    tree, comps = tt.sample_tree(m, prompt, 6, 10, torch.Generator().manual_seed(1), branch, eos=2)
    assert len(comps) == len(tree.leaves()) == 6
    assert sorted(tree.path_tokens()) == sorted(prompt + c for c in comps)
    assert tree.n_flat > tree.n_tree
    lp = tt.tree_logprobs(m, tree)
    ser = tt.serialize(tree)
    for ix, ref in zip(tt.path_token_index(tree, ser), tt.path_logprobs(m, tree)):
        assert torch.allclose(lp[ix], ref, atol=1e-10)
    with pytest.raises(ValueError, match="branch"):
        tt.sample_tree(m, prompt, 2, 3, torch.Generator(), "beam")

def test_partitioned_backward_rejects_bad_cover():
    m = model()
    tree = make_tree(2, 5)
    ser = tt.serialize(tree)
    with pytest.raises(ValueError, match="cover"):
        tt.partitioned_backward(m, tree, [tt.Partition(0, [tree.root], None)], tt.token_weights(tree, ser), ser)


def test_interleaved_times():
    out = tt.interleaved_times({"a": lambda: sum(range(1000)), "b": lambda: None}, repeats=3)
    assert set(out) == {"cpu", "wall"} and out["wall"]["a"].shape == (3,) and (out["wall"]["a"] >= 0).all()
    with pytest.raises(ValueError, match="repeats"):
        tt.interleaved_times({"a": lambda: None}, repeats=0)
    with pytest.raises(TypeError, match="fns"):
        tt.interleaved_times({"a": 3}, repeats=1)


def test_bad_input():
    tree = make_tree(0)
    ser = tt.serialize(tree)
    rng = np.random.default_rng(0)
    m = model()
    cases = [
        (TypeError, "rng", lambda: tt.random_tree(0, 4, [2], (1, 2), 9)),
        (ValueError, "root_len", lambda: tt.random_tree(rng, 0, [2], (1, 2), 9)),
        (TypeError, "root_len", lambda: tt.random_tree(rng, 2.5, [2], (1, 2), 9)),
        (ValueError, "branching", lambda: tt.random_tree(rng, 4, [0], (1, 2), 9)),
        (ValueError, "seg_len", lambda: tt.random_tree(rng, 4, [2], (3, 2), 9)),
        (ValueError, "vocab", lambda: tt.random_tree(rng, 4, [2], (1, 2), 1)),
        (ValueError, "mask_prob", lambda: tt.random_tree_by_parents(rng, 3, 2, 9, mask_prob=float("nan"))),
        (TypeError, "coefs", lambda: tt.random_tree_by_parents(rng, 3, 2, 9, coefs=1)),
        (ValueError, "max_len", lambda: tt.split_long_nodes(tree, 0)),
        (ValueError, "horizon", lambda: tt.tree_mask_horizon(np.zeros(3, int))),
        (TypeError, "horizon", lambda: tt.tree_mask_horizon(np.ones(3))),
        (ValueError, "ser", lambda: tt.token_weights(tree, tt.serialize(make_tree(1, 3)))),
        (ValueError, "mode", lambda: tt.branch_avg_loss(m, tree, "max")),
        (ValueError, "vocabulary", lambda: tt.tree_logits(model(vocab=5), tree)),
        (ValueError, "weights", lambda: tt.tree_loss(m, tree, np.ones(3), ser)),
        (ValueError, "weights", lambda: tt.tree_loss(m, tree, np.full(len(ser), np.nan), ser)),
        (ValueError, "pos", lambda: tt.tree_logits(m, tree, ser, pos=torch.arange(len(ser) + 1))),
        (ValueError, "pred", lambda: tt.tree_logprobs(m, tree, ser, pred=np.arange(len(ser)) - 2)),
        (TypeError, "budget", lambda: tt.partition_tree(tree, 2.0)),
        (TypeError, r"parts\[0\]", lambda: tt.partition_tokens(tree, ["P"])),
        (ValueError, "own_bytes", lambda: tt.chain_bound([tt.Partition(0, [0], None)], {})),
        (ValueError, r"own_bytes\[0\]", lambda: tt.chain_bound([tt.Partition(0, [0], None)], {0: -5})),  # #58
        (TypeError, r"own_bytes\[0\]", lambda: tt.chain_bound([tt.Partition(0, [0], None)], {0: float("nan")})),
        (TypeError, "model", lambda: tt.count_tokens(torch.nn.Linear(2, 2))),
        (TypeError, "like", lambda: tt.accumulate_gateway_grads([], np.zeros(3))),
        (TypeError, "n_head", lambda: tt.TreeLMConfig(n_head=2.0)),
        (ValueError, "old_logprobs", lambda: tt.tree_ppo_loss(m, tree, np.zeros(3))),
        (ValueError, "clip_eps", lambda: tt.branch_ppo_loss(m, tree, np.zeros(len(ser)), 1.5)),
        (ValueError, "init_std", lambda: tt.TreeLMConfig(init_std=float("nan"))),
    ]
    for exc, word, fn in cases:
        with pytest.raises(exc, match=word):
            fn()


def test_config_validation():
    with pytest.raises(ValueError):
        tt.TreeLMConfig(d_model=30, n_head=4)
    with pytest.raises(ValueError):
        tt.TreeLMConfig(ssm_every=-1)
    with pytest.raises(TypeError):
        tt.tree_logits(torch.nn.Linear(2, 2), make_tree(0))


def test_round_ratio_median_and_quartiles_of_per_round_ratios():
    med, q25, q75 = tt.round_ratio([2.0, 4.0, 6.0, 100.0], [1.0, 1.0, 1.0, 1.0])
    assert med == pytest.approx(5.0) and q25 == pytest.approx(3.5) and q75 == pytest.approx(29.5)
    # per-round pairing, not a ratio of medians: a round where both sides were slow cancels
    assert tt.round_ratio([1.0, 10.0, 1.0], [0.5, 5.0, 0.5])[0] == pytest.approx(2.0)
    with pytest.raises(ValueError, match="equal length"):
        tt.round_ratio([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="den"):
        tt.round_ratio([1.0], [0.0])


def test_rel_spread_is_iqr_over_median():
    assert tt.rel_spread([1.0, 1.0, 1.0]) == 0.0
    assert tt.rel_spread([1.0, 2.0, 3.0, 4.0, 5.0]) == pytest.approx((4.0 - 2.0) / 3.0)
    with pytest.raises(ValueError, match="times"):
        tt.rel_spread([])


def test_packed_loss_equals_the_average_of_per_branch_losses():
    tree = make_tree(3, n_nodes=6)
    m = model()
    paths = [torch.tensor(p)[None] for p in tree.path_tokens()]
    masks = [torch.rand(p.shape[1]).round().double() for p in paths]
    K = len(paths)
    per_branch = 0.0
    for idx, mk in zip(paths, masks):
        logits, _ = m(idx, torch.arange(idx.shape[1]))
        lp = logits[0, :-1].log_softmax(-1).gather(-1, idx[0, 1:, None])[:, 0]
        per_branch = per_branch - (mk[1:] * lp).sum() / K
    X, pos, blocks, tgt, w = tt.packed_inputs(paths, masks)
    assert X.shape == (1, sum(p.shape[1] for p in paths)) and len(blocks.start) == K
    packed = tt.packed_loss(m, X, pos, blocks, tgt, w.double())
    assert torch.allclose(packed, per_branch, rtol=1e-12, atol=1e-12)
    # attention must stay inside a document: one attention block across all documents changes the loss
    joint = tt.NodeBlocks([0], [X.shape[1]], [torch.arange(X.shape[1])],
                          [torch.ones(X.shape[1], X.shape[1], dtype=torch.bool).tril()])
    assert not torch.allclose(tt.packed_loss(m, X, pos, joint, tgt, w.double()), per_branch)
    with pytest.raises(ValueError, match="equal length"):
        tt.packed_inputs(paths, masks[:1])


def test_packed_resets_the_ssm_state_at_document_boundaries():
    tree = make_tree(4, n_nodes=6)
    m = model(ssm_every=2)
    paths = [torch.tensor(p)[None] for p in tree.path_tokens()]
    masks = [torch.ones(p.shape[1], dtype=torch.float64) for p in paths]
    K = len(paths)
    m.zero_grad()
    ref = tt.branch_avg_loss(m, tree.__class__([tt.Node(list(n.tokens), n.parent) for n in tree.nodes]))
    ref.backward()
    g_ref = grads(m)
    m.zero_grad()
    X, pos, blocks, tgt, w = tt.packed_inputs(paths, masks, K)
    packed = tt.packed_loss(m, X, pos, blocks, tgt, w.double())
    packed.backward()
    assert torch.allclose(packed, ref, rtol=1e-12, atol=1e-12)
    assert all(torch.allclose(a, b, rtol=1e-9, atol=1e-12) for a, b in zip(grads(m), g_ref))
    # the state must not run on from one document into the next
    with torch.no_grad():
        leak = tt.packed_loss(m, X, pos, blocks, tgt, w.double(), reset_state=False)
    assert abs(leak.item() - ref.item()) > 1e-6
    with pytest.raises(ValueError, match="tile"):
        tt.packed_loss(m, X[:, :-1], pos[:-1], blocks, tgt[:-1], w[:-1].double())
    with pytest.raises(TypeError, match="blocks"):
        tt.packed_loss(m, X, pos, None, tgt, w.double())


@pytest.mark.parametrize("ssm_every", [0, 2])
def test_step_functions_compute_the_same_loss_and_gradients(ssm_every):
    tree = make_tree(5, n_nodes=6)
    m = model(ssm_every=ssm_every)
    opt = torch.optim.SGD(m.parameters(), lr=0.0)  # no step: every side sees the same parameters
    sides = ["linear", "padded", "packed", "blocks", "dense"]
    fns = tt.step_functions(m, tree, opt, sides)
    assert list(fns) == sides
    out = {}
    for k, f in fns.items():
        loss = f()
        out[k] = (loss, grads(m))
    ref_loss, ref_g = out["linear"]
    ser = tt.serialize(tree)
    m.zero_grad()
    direct = tt.tree_loss(m, tree, tt.token_weights(tree, ser), ser)
    assert torch.allclose(ref_loss, direct.detach(), rtol=1e-12)
    for k, (loss, g) in out.items():
        assert torch.allclose(loss, ref_loss, rtol=1e-10), k
        assert all(torch.allclose(a, b, rtol=1e-8, atol=1e-12) for a, b in zip(g, ref_g)), k
    with pytest.raises(ValueError, match="sides"):
        tt.step_functions(m, tree, opt, ["linear", "tree"])
    with pytest.raises(ValueError, match="distinct"):
        tt.step_functions(m, tree, opt, ["linear", "linear"])


def test_attention_pairs_and_flop_speedup():
    chain = tt.TrajectoryTree([tt.Node([1, 2, 3], None), tt.Node([4, 5], 0)])
    flat, tree_pairs, dense = tt.attention_pairs(chain)
    assert flat == tree_pairs == 15 and dense == 25  # one branch: nothing shared
    fork = tt.TrajectoryTree([tt.Node([1, 2, 3], None), tt.Node([4, 5], 0), tt.Node([6], 0)])
    assert tt.attention_pairs(fork) == (15 + 10, 6 + 4 + 5 + 4, 36)
    # no pairs: the token ratio; pairs saved less than tokens pull the prediction below it
    assert tt.flop_speedup(10, 5, 0, 0, 8, 2, 4) == pytest.approx(2.0)
    assert tt.flop_speedup(10, 5, 100, 80, 8, 2, 4) < 2.0
    # wider models: per-token work dominates, the prediction rises towards the token ratio
    assert tt.flop_speedup(10, 5, 100, 80, 64, 2, 4) > tt.flop_speedup(10, 5, 100, 80, 8, 2, 4)
    with pytest.raises(ValueError, match="n_tree"):
        tt.flop_speedup(10, 0, 0, 0, 8, 2, 4)
    with pytest.raises(ValueError, match="d_model"):
        tt.flop_speedup(10, 5, 0, 0, 0, 2, 4)


def test_width_sweep_rows_and_rounds():
    cfg = dict(tt.checkpoint_config("sweep"), seeds=[0], d_models=[8, 16], layers=[1], root_len=6,
               branching=[2, 2], seg_len=[2, 3], repeats=2, vocab=17)
    tree = tt.claim_tree(cfg, 0)
    assert len(tree.leaves()) == 4 and tree.n_tree < tree.n_flat
    seen = []
    rows, rounds = tt.width_sweep(cfg, progress=seen.append)
    assert [r["d_model"] for r in rows] == [8, 16] and seen == rows
    r = rows[0]
    assert r["N_tree"] == tree.n_tree and r["ideal"] == pytest.approx(tree.ideal_speedup)
    assert 1.0 < r["flop_model"] <= r["ideal"]
    assert all(r[f"t_{s}"] > 0 for s in ("linear", "packed", "blocks"))
    assert np.asarray(rounds["seed0_L1_d8"]).shape == (3, 2, 2)
    assert json.loads(json.dumps(rounds)) == rounds  # plain floats: the sweep is a JSON data file
    assert r["t_blocks"] == pytest.approx(np.median(rounds["seed0_L1_d8"][2][0]))
    with pytest.raises(ValueError, match="lacks"):
        tt.width_sweep({k: v for k, v in cfg.items() if k != "repeats"})
    with pytest.raises(ValueError, match="lacks"):
        tt.claim_tree({"root_len": 6}, 0)
    with pytest.raises(ValueError, match="name"):
        tt.checkpoint_config("weights")
