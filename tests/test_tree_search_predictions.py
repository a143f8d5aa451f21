import math

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import tree_search_predictions as ts


def _sub(tree, members):
    idx = {v: i for i, v in enumerate(members)}
    inside = set(members)
    return ts.Tree(len(members), [(idx[a], idx[b]) for a in members for b in tree.adj[a] if b in inside and a < b])


@settings(max_examples=50, deadline=None)
@given(n=st.integers(1, 12), seed=st.integers(0, 10**6))
def test_pathwidth_equals_bruteforce(n, seed):
    t = ts.random_tree(n, seed)
    assert ts.pathwidth(t) == ts.pathwidth_bruteforce(t)


def test_pathwidth_closed_forms():
    assert ts.pathwidth(ts.Tree(1, [])) == 0
    assert ts.pathwidth(ts.path_tree(10)) == 1
    assert ts.pathwidth(ts.star_tree(10)) == 1
    assert ts.pathwidth(ts.caterpillar_tree(6, 3)) == 1
    spider = ts.Tree(7, [(0, 1), (1, 2), (0, 3), (3, 4), (0, 5), (5, 6)])  # three legs of length 2
    assert ts.pathwidth(spider) == 2
    for h in range(1, 9):
        assert ts.pathwidth(ts.complete_tree(2, h)) == math.ceil(h / 2)
    for h in range(1, 6):
        assert ts.pathwidth(ts.complete_tree(3, h)) == h


@settings(max_examples=30, deadline=None)
@given(n=st.integers(2, 60), seed=st.integers(0, 10**6))
def test_spine_is_a_path_and_lowers_pathwidth(n, seed):
    t = ts.random_tree(n, seed)
    dec = ts.Decomposition(t)
    assert dec.levels <= ts.pathwidth(t) + 1
    for cid, comp in enumerate(dec.comps):
        P = comp.spine
        assert all(P[i + 1] in t.adj[P[i]] for i in range(len(P) - 1)) and len(set(P)) == len(P)
        assert comp.k == ts.pathwidth(_sub(t, dec.members(cid)))
        for mem in dec.components_off_spine(cid):
            assert ts.pathwidth(_sub(t, mem)) < comp.k


@settings(max_examples=50, deadline=None)
@given(n=st.integers(1, 80), seed=st.integers(0, 10**6), data=st.data())
def test_search_finds_target_within_bound(n, seed, data):
    t = ts.random_tree(n, seed)
    dec, ct, k = ts.Decomposition(t), ts.CentroidTree(t), ts.pathwidth(t)
    target = data.draw(st.integers(0, n - 1))
    pred = data.draw(st.integers(0, n - 1))
    eta = int(t.distances(pred)[target])
    top = ts.search_with_prediction(t, dec, ts.Oracle(t, target), pred, start="top")
    assert top.found == target
    assert top.queries <= ts.query_bound(k, eta)
    o = ts.Oracle(t, target)
    r = ts.search_with_prediction(t, dec, o, pred)
    assert r.found == target and o.queries == r.queries == len(set(o.log))  # never asks a vertex twice
    assert r.queries <= ts.query_bound_from_prediction(k, eta)
    if eta == 0:
        assert r.queries == top.queries == 1
    c = ts.centroid_search(t, ct, ts.Oracle(t, target))
    assert c.found == target and c.queries <= int(math.log2(n)) + 1
    w = ts.walk_search(t, ts.Oracle(t, target), pred)
    assert w.found == target and w.queries == eta + 1
    i = ts.interleaved_search(t, dec, ct, ts.Oracle(t, target), pred)
    assert i.found == target and i.queries <= 2 * min(r.queries, c.queries)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(2, 14), seed=st.integers(0, 10**6), data=st.data())
def test_no_search_beats_the_exact_minimax(n, seed, data):
    # the worst case over every target at distance eta from the prediction is at least the minimax optimum
    t = ts.random_tree(n, seed)
    dec, ct = ts.Decomposition(t), ts.CentroidTree(t)
    pred = data.draw(st.integers(0, n - 1))
    dist = t.distances(pred)
    eta = data.draw(st.integers(0, int(dist.max())))
    ring = [int(v) for v in np.flatnonzero(dist == eta)]
    opt = ts.minimax_queries(t, ring)
    assert 1 <= opt <= len(ring) and opt <= eta + 1  # walking from the prediction is one algorithm
    for start in ("prediction", "top"):
        worst = max(ts.search_with_prediction(t, dec, ts.Oracle(t, v), pred, start=start).queries for v in ring)
        assert worst >= opt
    assert max(ts.centroid_search(t, ct, ts.Oracle(t, v)).queries for v in ring) >= opt


def test_minimax_closed_forms():
    # every vertex a candidate on a path: binary search, ceil(log2(n + 1))
    for n in (1, 2, 3, 6, 7, 8, 15, 20):
        assert ts.minimax_queries(ts.path_tree(n), range(n)) == math.ceil(math.log2(n + 1))
    # a star with every leaf a candidate: one query per leaf but the last, which the centre's answer names
    assert ts.minimax_queries(ts.star_tree(6), range(1, 6)) == 2
    assert ts.minimax_queries(ts.star_tree(6), [3]) == 1


def test_binary_minimax_equals_brute_force():
    # the shape DP against the brute-force recursion on complete binary trees small enough for it
    for h in range(0, 4):
        t = ts.complete_tree(2, h)
        for eta in range(0, h + 1):
            ring = [v for v in range(t.n) if t.depth[v] == eta]
            assert ts.binary_minimax(eta) == ts.minimax_queries(t, ring)
    # monotone, and at least the counting bound ceil(eta / 2)
    vals = [ts.binary_minimax(eta) for eta in range(0, 6)]
    assert all(a <= b for a, b in zip(vals, vals[1:]))
    assert all(v >= math.ceil(eta / 2) for eta, v in enumerate(vals))


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 300), data=st.data())
def test_doubling_on_a_path_matches_the_array_case(n, data):
    target = data.draw(st.integers(0, n - 1))
    pred = data.draw(st.integers(0, n - 1))
    arr = ts.doubling_search_path(n, target, pred)
    assert arr.found == target
    assert arr.queries <= 2 * math.ceil(math.log2(abs(target - pred) + 1)) + 2
    t = ts.path_tree(n)
    tree = ts.search_with_prediction(t, ts.Decomposition(t), ts.Oracle(t, target), pred)
    assert tree.found == target and tree.queries <= ts.query_bound(1, abs(target - pred))


def test_oracle_answers_a_closer_neighbour():
    t = ts.random_tree(50, 3)
    for target in range(0, 50, 7):
        d = t.distances(target)
        o = ts.Oracle(t, target)
        for v in range(50):
            a = o.query(v)
            if v == target:
                assert a is None
            else:
                assert a in t.adj[v] and d[a] == d[v] - 1
        assert o.queries == 50


def test_lower_bound_on_complete_binary_trees():
    # with the prediction at the root, the 2**eta vertices at depth eta need >= eta/2 queries in the worst case
    t = ts.complete_tree(2, 7)
    dec = ts.Decomposition(t)
    depth = np.array(t.depth)
    for eta in range(1, 8):
        worst = max(ts.search_with_prediction(t, dec, ts.Oracle(t, int(v)), 0).queries
                    for v in np.flatnonzero(depth == eta))
        assert worst >= math.ceil(eta / 2)


def test_bad_input():
    with pytest.raises(ValueError, match="not a tree"):
        ts.Tree(3, [(0, 1), (1, 2), (2, 0)])
    with pytest.raises(ValueError, match="not connected"):
        ts.Tree(4, [(0, 1), (0, 1), (2, 3)])
    with pytest.raises(ValueError, match="distinct"):
        ts.Tree(2, [(0, 0)])
    t = ts.path_tree(5)
    with pytest.raises(ValueError, match="unknown vertex"):
        ts.Oracle(t, 9)
    o = ts.Oracle(t, 2)
    with pytest.raises(ValueError, match="unknown vertex"):
        o.query(-1)
    with pytest.raises(ValueError, match="unknown vertex"):
        ts.search_with_prediction(t, ts.Decomposition(t), o, 5)
    with pytest.raises(TypeError):
        ts.pathwidth(nx.path_graph(3))
    with pytest.raises(ValueError):
        ts.pathwidth_bruteforce(ts.path_tree(20))
    with pytest.raises(ValueError):
        ts.search_with_prediction(t, ts.Decomposition(ts.path_tree(5)), o, 0)


def test_real_tree_builders(tmp_path):
    a = ts.ast_tree("def f(x):\n    return x + 1\n")
    assert a.names[0] == "Module" and "Load" not in a.names
    e = ts.exception_tree()
    assert e.names[0] == "BaseException" and "ValueError" in e.names
    p = str(tmp_path / "t.txt.gz")
    ts.save_edges(a, p)
    b = ts.load_edges(p)
    assert b.n == a.n and b.edges == a.edges
    g = ts.Tree.from_networkx(nx.balanced_tree(2, 3))
    assert ts.pathwidth(g) == 2
    # low-degree builders
    X = np.random.default_rng(0).normal(size=(30, 4))
    d = ts.dendrogram_tree(X)
    assert d.n == 59 and max(len(a) for a in d.adj) <= 3 and sum(len(a) == 1 for a in d.adj) == 30
    D = np.linalg.norm(X[:, None] - X[None], axis=-1)
    nj = ts.neighbor_joining_tree(D)
    degs = sorted(len(a) for a in nj.adj)
    assert nj.n == 58 and degs.count(1) == 30 and degs.count(3) == 28
    gm = ts.grid_mst_tree(6, 7, seed=1)
    assert gm.n == 42 and max(len(a) for a in gm.adj) <= 4
    assert ts.grid_mst_tree(6, 7, seed=1).edges == gm.edges
    b = ts.bfs_tree(nx.karate_club_graph())
    assert b.n == 34 and max(len(a) for a in b.adj) == 17
    with pytest.raises(ValueError):
        ts.neighbor_joining_tree(D[:2, :2])
    with pytest.raises(ValueError):
        ts.bfs_tree(nx.empty_graph(3))


def test_search_from_prediction_is_cheap_near_the_prediction():
    # eta = 1: ask the prediction, whose answer is the target itself, then at most a few more
    for t in (ts.random_tree(300, 5), ts.complete_tree(2, 8), ts.complete_tree(3, 4), ts.caterpillar_tree(40, 3)):
        dec = ts.Decomposition(t)
        worst = 0
        for p in range(0, t.n, 7):
            for target in t.adj[p]:
                worst = max(worst, ts.search_with_prediction(t, dec, ts.Oracle(t, target), p).queries)
        assert 2 <= worst <= 4


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 60), seed=st.integers(0, 10**6), data=st.data())
def test_spine_runs_partition_the_path(n, seed, data):
    t = ts.random_tree(n, seed)
    dec = ts.Decomposition(t)
    a, b = data.draw(st.integers(0, n - 1)), data.draw(st.integers(0, n - 1))
    runs = ts.spine_runs(dec, a, b)
    assert all(r >= 1 for r in runs) and sum(runs) <= int(t.distances(a)[b])


def test_spine_runs_known_shapes():
    p = ts.path_tree(30)
    assert ts.spine_runs(ts.Decomposition(p), 3, 20) == [17]  # a path is one spine: one stretch
    assert ts.spine_runs(ts.Decomposition(p), 7, 7) == []
    star = ts.star_tree(6)  # the spine is the centre alone: leaf to leaf never runs along a spine
    assert ts.spine_runs(ts.Decomposition(star), 1, 2) == []
    cat = ts.caterpillar_tree(8, 2)  # body 0..7 is the spine; leg 8 hangs from 0, leg 20 from 6
    assert ts.spine_runs(ts.Decomposition(cat), 8, 20) == [6]


def test_binary_height_at():
    for h in range(0, 6):
        assert ts.binary_height_at(ts.complete_tree(2, h), 0) == h
    assert ts.binary_height_at(ts.path_tree(10), 0) == 0
    assert ts.binary_height_at(ts.path_tree(10), 5) == 1  # two neighbours, neither branching further
    assert ts.binary_height_at(ts.star_tree(5), 0) == 1
    t = ts.complete_tree(2, 4)
    leaf = max(range(t.n), key=lambda v: t.depth[v])
    assert ts.binary_height_at(t, leaf) == 0  # a leaf has one neighbour
    with pytest.raises(ValueError):
        ts.binary_height_at(t, t.n)


def test_worst_case_is_the_max_over_the_ring_and_none_off_the_tree():
    t = ts.path_tree(40)
    dec = ts.Decomposition(t)
    rng = np.random.default_rng(0)
    # on a path, both vertices at distance eta from the middle are searched; the worst is the max of the two
    each = [ts.search_with_prediction(t, dec, ts.Oracle(t, v), 20).queries for v in (12, 28)]
    assert ts.worst_case(t, dec, 20, 8, rng, ring_cap=10) == max(each)
    assert ts.worst_case(t, dec, 20, 25, rng, ring_cap=10) is None  # no vertex that far
    assert ts.worst_case(t, dec, 20, 0, rng, ring_cap=10) == 1
    star = ts.star_tree(30)
    w = ts.worst_case(star, ts.Decomposition(star), 0, 1, rng, ring_cap=3)  # a sample of 3 leaves
    assert w is not None and w >= 1
    with pytest.raises(ValueError, match="ring_cap"):
        ts.worst_case(t, dec, 20, 3, rng, ring_cap=0)


def test_fit_shape_names_log_and_linear_curves():
    e = np.array([1, 2, 4, 8, 16, 32, 64], float)
    log_sse, lin_sse = ts.fit_shape(e, 3 + 2 * np.log2(e + 1))
    assert log_sse < 1e-12 < lin_sse
    log_sse, lin_sse = ts.fit_shape(e, 1 + e)
    assert lin_sse < 1e-12 < log_sse
    with pytest.raises(ValueError, match="equal length"):
        ts.fit_shape([1, 2], [1, 2])


def test_query_sweep_on_a_path_walk_costs_eta_plus_one_and_gain_picks_the_best_eta():
    t = ts.path_tree(300)
    dec, ct = ts.Decomposition(t), ts.CentroidTree(t)
    sw = ts.query_sweep(t, dec, ct, [1, 4, 64, 1000], 20, np.random.default_rng(0))
    assert set(sw) == {1, 4, 64}  # no two vertices of a 300-path are 1000 apart
    for eta, v in sw.items():
        assert v["walk"] == eta + 1
        assert set(v) == set(ts.SWEEP_METHODS)
    assert sw[64]["ours"] < sw[64]["walk"]  # doubling search beats walking far from the target
    gain, eta = ts.best_baseline_gain(sw)
    assert gain == pytest.approx(max(min(v["walk"], v["centroid"]) / v["ours"] for v in sw.values()))
    assert eta in sw
    made_up = {1: dict(ours=2.0, walk=2.0, centroid=9.0), 8: dict(ours=5.0, walk=9.0, centroid=7.0)}
    assert ts.best_baseline_gain(made_up) == (pytest.approx(1.4), 8)
    with pytest.raises(ValueError, match="empty"):
        ts.best_baseline_gain({})


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 80), seed=st.integers(0, 10**6), data=st.data())
def test_combined_search_is_within_its_bound(n, seed, data):
    t = ts.random_tree(n, seed)
    dec, k = ts.Decomposition(t), ts.pathwidth(t)
    target, pred = data.draw(st.integers(0, n - 1)), data.draw(st.integers(0, n - 1))
    eta = int(t.distances(pred)[target])
    first = ts.search_with_prediction(t, dec, ts.Oracle(t, target), pred).queries
    top = ts.search_with_prediction(t, dec, ts.Oracle(t, target), pred, start="top").queries
    o = ts.Oracle(t, target)
    r = ts.search_with_prediction(t, dec, o, pred, start="both")
    assert r.found == target and r.queries == o.queries == len(set(o.log))  # shared answers: no repeats
    head = ts.combined_head(k)
    assert r.queries <= ts.combined_bound(first, top, head) <= ts.combined_query_bound(k, eta)
    if first <= head:
        assert r.queries == first  # a close prediction costs what the prediction-first search costs
    if eta == 0:
        assert r.queries == 1
    inf = ts.search_with_prediction(t, dec, ts.Oracle(t, target), pred, start="informed")
    assert inf.found == target and inf.queries <= min(top, ts.query_bound(k, eta))  # it only skips queries


def test_informed_top_down_skips_levels_below_the_spine():
    # a caterpillar's body is the spine; a prediction on a leg whose answer points further away needs no spine
    # query: on a spider with long legs, a target beyond the prediction on the same leg is found by walking down
    spider = ts.Tree(13, [(0, 1), (1, 2), (2, 3), (3, 4), (0, 5), (5, 6), (6, 7), (7, 8), (0, 9), (9, 10), (10, 11),
                          (11, 12)])
    dec = ts.Decomposition(spider)
    for p, target in [(2, 4), (10, 12), (1, 3)]:
        top = ts.search_with_prediction(spider, dec, ts.Oracle(spider, target), p, start="top").queries
        inf = ts.search_with_prediction(spider, dec, ts.Oracle(spider, target), p, start="informed").queries
        assert inf <= top


def test_combined_bound_closed_forms_and_bad_input():
    assert ts.combined_head(0) == 2 and ts.combined_head(3) == 8
    assert ts.combined_bound(5, 40, 8) == 5  # within the head
    assert ts.combined_bound(30, 10, 8) == 8 + 2 * 10 - 1  # top-down is much cheaper
    assert ts.combined_bound(10, 40, 8) == 2 * 10 - 8  # prediction-first finishes soon after the head
    assert ts.combined_query_bound(3, 0) == 1
    assert ts.combined_query_bound(2, 64) <= 2 * ts.combined_head(2) + 2 * ts.query_bound(2, 64)
    with pytest.raises(ValueError):
        ts.combined_bound(0, 3, 2)
    with pytest.raises(TypeError):
        ts.combined_head(1.5)
    with pytest.raises(ValueError, match="start"):
        t = ts.path_tree(5)
        ts.search_with_prediction(t, ts.Decomposition(t), ts.Oracle(t, 1), 0, start="middle")


def test_large_tree_builders():
    t = ts.corridor_tree(3, 400, seed=1)
    assert t.n == 1200 and ts.pathwidth(t) <= 3 and max(len(a) for a in t.adj) <= 4
    assert ts.corridor_tree(3, 400, seed=1).edges == t.edges  # deterministic
    assert ts.corridor_tree(1, 7).n == 7 and ts.diameter(ts.corridor_tree(1, 7)) == 6
    img = np.random.default_rng(0).integers(0, 255, (9, 50, 3))
    s = ts.image_strip_tree(img, 2, 120, offset=30)
    assert s.n == 240 and ts.pathwidth(s) <= 2
    flat = ts.image_strip_tree(np.zeros((4, 10)), 2, 12)  # all ties: still a spanning tree
    assert flat.n == 24
    with pytest.raises(ValueError, match="offset"):
        ts.image_strip_tree(img, 3, 140, offset=20)  # the strip has 3 * 50 columns
    with pytest.raises(ValueError):
        ts.image_strip_tree(img, 1, 10)
    with pytest.raises(TypeError):
        ts.corridor_tree(2.0, 10)
    assert ts.diameter(ts.path_tree(30)) == 29 and ts.diameter(ts.star_tree(6)) == 2


def test_single_linkage_tree_matches_scipy():
    from scipy.cluster.hierarchy import linkage

    X = np.random.default_rng(3).random((60, 2))
    t = ts.single_linkage_tree(X, n_neighbors=59)  # the full graph: exact single linkage
    ref = ts.dendrogram_tree(X, "single")
    assert t.n == ref.n == 119 and max(len(a) for a in t.adj) <= 3
    # the same clusters: every merge joins the same sets of leaves
    def clusters(tree, m):
        out = set()
        for v in range(m, tree.n):
            seen, stack = set(), [v]
            while stack:
                x = stack.pop()
                seen.add(x)
                stack += [c for c in tree.adj[x] if c < x and c not in seen] if x >= m else []
            out.add(frozenset(x for x in seen if x < m))
        return out
    assert clusters(t, 60) == clusters(ref, 60)
    assert len(linkage(X, "single")) == 59
    with pytest.raises(ValueError, match="disconnected"):
        ts.single_linkage_tree(np.r_[np.zeros((5, 2)), np.ones((5, 2)) * 100] + np.arange(10)[:, None] * 1e-3, 2)
    with pytest.raises(ValueError):
        ts.single_linkage_tree(np.zeros((1, 2)))


def test_fast_distances_equal_bfs_and_measure_tree():
    t = ts.corridor_tree(2, 1500, seed=0)  # n = 3000: the scipy path
    d = t.distances(17)
    ref = np.full(t.n, -1)
    ref[17], order = 0, [17]
    for v in order:
        for u in t.adj[v]:
            if ref[u] < 0:
                ref[u] = ref[v] + 1
                order.append(u)
    assert np.array_equal(d, ref)
    small = ts.corridor_tree(2, 60, seed=0)
    m = ts.measure_tree(small, [1, 4, 16], 5, 2, np.random.default_rng(0))
    assert m["n"] == 120 and m["pw"] == ts.pathwidth(small) and m["diam"] == ts.diameter(small)
    assert set(m["worst"]) == {*ts.START_VARIANTS, "ball"} and set(m["sweep"][4]) == set(ts.SWEEP_METHODS)
    assert all(m["worst"][s][1] >= 2 for s in (*ts.START_VARIANTS, "ball"))
    dec = ts.Decomposition(small)
    full = ts.worst_case(small, dec, 5, 4, np.random.default_rng(0), None, "both")
    ring = np.flatnonzero(small.distances(5) == 4)
    assert full == max(ts.search_with_prediction(small, dec, ts.Oracle(small, int(v)), 5, start="both").queries
                       for v in ring)
    with pytest.raises(ValueError, match="dist"):
        ts.worst_case(small, dec, 5, 4, np.random.default_rng(0), None, dist=np.zeros(3))
    with pytest.raises(ValueError, match="n_preds"):
        ts.measure_tree(small, [1], 1, -1, np.random.default_rng(0))


def _ball_search_reference(t, target, p):
    """Ball search by brute force: explicit candidate sets, components found by BFS,
    the centroid as the vertex whose largest remaining component is smallest (ties:
    the smaller Euler-tour time, i.e. the upper of two adjacent centroids)."""
    def comps_without(S, c):
        left, out = set(S) - {c}, []
        while left:
            comp, stack = set(), [left.pop()]
            while stack:
                v = stack.pop()
                comp.add(v)
                for u in t.adj[v]:
                    if u in left:
                        left.discard(u)
                        stack.append(u)
            out.append(comp)
        return out

    def allowed(x, c, a):  # x in the component of T - c that holds a
        return any(x in comp and a in comp for comp in comps_without(range(t.n), c))

    dist_p = t.distances(p)
    queries, answers, r = 1, [], 1
    if p == target:
        return queries
    answers.append((p, t.next_hop(p, target)))
    while True:
        S = {x for x in range(t.n) if dist_p[x] <= r
             and all(allowed(x, c, a) for c, a in answers)}
        while S:
            c = min(S, key=lambda v: (max((len(k) for k in comps_without(S, v)),
                                          default=0), t.tin[v]))
            queries += 1
            if c == target:
                return queries
            a = t.next_hop(c, target)
            answers.append((c, a))
            S = {x for x in S if allowed(x, c, a)}
        r *= 2


@settings(max_examples=25, deadline=None)
@given(st.integers(2, 18), st.integers(0, 10_000), st.data())
def test_ball_search_matches_brute_force(n, seed, data):
    t = ts.random_tree(n, seed=seed)
    target = data.draw(st.integers(0, n - 1))
    p = data.draw(st.integers(0, n - 1))
    r = ts.ball_search(t, ts.Oracle(t, target), p)
    assert r.found == target
    assert r.queries == _ball_search_reference(t, target, p)


def test_ball_search_finds_every_target_and_is_cheap_near_the_prediction():
    for t in (ts.corridor_tree(3, 400, seed=1), ts.complete_tree(3, 5), ts.star_tree(30),
              ts.path_tree(300)):
        for target in range(0, t.n, max(1, t.n // 40)):
            for p in (0, t.n - 1, target):
                oracle = ts.Oracle(t, target)
                r = ts.ball_search(t, oracle, p)
                assert r.found == target and r.queries == oracle.queries
        assert ts.ball_search(t, ts.Oracle(t, 5), 5).queries == 1
    t = ts.path_tree(1000)  # eta = 1: the prediction, then its neighbour
    assert ts.ball_search(t, ts.Oracle(t, 501), 500).queries == 2
    assert ts.query_sweep(t, ts.Decomposition(t), ts.CentroidTree(t), [3], 2,
                          np.random.default_rng(0))[3]["ball"] >= 2


def test_ball_search_bad_input():
    t, other = ts.path_tree(10), ts.path_tree(10)
    with pytest.raises(ValueError, match="prediction"):
        ts.ball_search(t, ts.Oracle(t, 3), 10)
    with pytest.raises(ValueError, match="prediction"):
        ts.ball_search(t, ts.Oracle(t, 3), "0")
    with pytest.raises(ValueError, match="oracle"):
        ts.ball_search(t, ts.Oracle(other, 3), 0)
    with pytest.raises(TypeError):
        ts.ball_search(t, "oracle", 0)
