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


@pytest.mark.parametrize("ssm_every", [0, 2])
def test_partitioned_backward_equals_full_tree(ssm_every):
    m = model(ssm_every)
    tree = tt.split_long_nodes(make_tree(11, 10, max_seg=6, coefs=True), 6)
    ser = tt.serialize(tree)
    w = tt.token_weights(tree, ser)
    parts = tt.partition_tree(tree, 8)
    assert len(parts) >= 2
    m.zero_grad()
    st_ = tt.partitioned_backward(m, tree, parts, w, ser)
    gp = grads(m)
    m.zero_grad()
    with tt.saved_bytes(m) as full:
        loss = tt.tree_loss(m, tree, w, ser)
    loss.backward()
    assert st_["loss"] == pytest.approx(loss.item(), rel=1e-10)
    for x, y in zip(gp, grads(m)):
        assert torch.allclose(x, y, rtol=1e-8, atol=1e-12)
    assert st_["tokens"] == tree.n_tree
    assert st_["peak_live"] <= st_["chain_bound"] * 1.01
    assert st_["peak_live"] < full.bytes


def test_partitioned_backward_rejects_bad_cover():
    m = model()
    tree = make_tree(2, 5)
    ser = tt.serialize(tree)
    with pytest.raises(ValueError, match="cover"):
        tt.partitioned_backward(m, tree, [tt.Partition(0, [tree.root], None)], tt.token_weights(tree, ser), ser)


def test_config_validation():
    with pytest.raises(ValueError):
        tt.TreeLMConfig(d_model=30, n_head=4)
    with pytest.raises(ValueError):
        tt.TreeLMConfig(ssm_every=-1)
    with pytest.raises(TypeError):
        tt.tree_logits(torch.nn.Linear(2, 2), make_tree(0))
