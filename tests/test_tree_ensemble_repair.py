import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from sklearn.ensemble import GradientBoostingClassifier, RandomForestClassifier
from sklearn.linear_model import LogisticRegression

from helpers import tree_ensemble_repair as ter


def _data(seed, n=200, d=3, k=2):
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 6, size=(n, d)).astype(float)
    X[:, 0] = rng.integers(0, 2, n)  # a binary "protected" column
    score = X[:, 1] - X[:, 2] + 1.5 * X[:, 0] + rng.normal(0, 1.5, n)
    y = np.digitize(score, np.quantile(score, np.linspace(0, 1, k + 1)[1:-1]))
    return X, y


@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize("cls", [GradientBoostingClassifier, RandomForestClassifier])
def test_export_reproduces_sklearn(cls, k):
    X, y = _data(1, k=k)
    m = cls(n_estimators=7, max_depth=3, random_state=0).fit(X, y)
    ens = ter.from_sklearn(m)
    assert np.abs(ens.decision(X) - ter.reference_scores(m, X)).max() <= 1e-9
    assert (ens.predict(X) == m.predict(X)).all()


def test_to_sklearn_writes_leaf_values_back():
    X, y = _data(2, k=3)
    m = GradientBoostingClassifier(n_estimators=5, max_depth=2, random_state=0).fit(X, y)
    ens = ter.from_sklearn(m)
    v = ens.values + np.random.default_rng(0).normal(0, 0.3, ens.n_slots)
    m2 = ter.to_sklearn(m, ens, v)
    assert np.abs(m2.decision_function(X) - ens.decision(X, v)).max() <= 1e-9
    assert np.abs(m.decision_function(X) - ens.decision(X)).max() <= 1e-9  # the original is untouched


def test_bad_inputs():
    X, y = _data(3)
    with pytest.raises(TypeError, match="GradientBoostingClassifier"):
        ter.from_sklearn(LogisticRegression().fit(X, y))
    with pytest.raises(ValueError, match="not fitted"):
        ter.from_sklearn(GradientBoostingClassifier())
    m = GradientBoostingClassifier(n_estimators=3, max_depth=2).fit(X, y)
    ens = ter.from_sklearn(m)
    with pytest.raises(ValueError, match="shape"):
        ens.decision(X[:, :2])
    with pytest.raises(ValueError, match="shape"):
        ter.repair(ens, np.zeros((4, 5)))
    with pytest.raises(TypeError, match="TreeEnsemble"):
        ter.verify_fairness(m, 0)
    with pytest.raises(ValueError, match="protected"):
        ter.verify_fairness(ens, 7)
    m3 = GradientBoostingClassifier(n_estimators=3, max_depth=2).fit(*_data(3, k=3))
    with pytest.raises(ValueError, match="binary"):
        ter.verify_fairness(ter.from_sklearn(m3), 0)
    with pytest.raises(ValueError, match="multiclass"):
        ter.verify_box(ens, 0, [0] * 3, [5] * 3)
    with pytest.raises(ValueError, match="forest"):
        ter.to_sklearn(RandomForestClassifier(n_estimators=2).fit(X, y), ens, ens.values)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), trees=st.integers(1, 4), depth=st.integers(1, 3))
def test_fairness_verifier_matches_bruteforce(seed, trees, depth):
    X, y = _data(seed)
    m = GradientBoostingClassifier(n_estimators=trees, max_depth=depth, learning_rate=0.5, random_state=0).fit(X, y)
    ens = ter.from_sklearn(m)
    dom = (np.zeros(3), np.full(3, 5.0))
    integer = np.ones(3, bool)
    brute = ter.fairness_cells_bruteforce(ens, 0, domain=dom, integer=integer)
    res = ter.verify_fairness(ens, 0, domain=dom, integer=integer, max_count=500)
    assert len(res.counterexamples) == len(brute)  # one counterexample per bad cell, no more, no less
    assert res.verified == (len(brute) == 0)
    for p in res.counterexamples:  # sound: the real model disagrees on the pair
        assert m.predict(p.x[None])[0] != m.predict(p.x_prime[None])[0]
        assert np.array_equal(np.delete(p.x, 0), np.delete(p.x_prime, 0))
        assert np.all((p.x >= 0) & (p.x <= 5)) and np.array_equal(p.x, np.round(p.x))


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), action=st.integers(0, 2))
@example(seed=482, action=0)  # thresholds cut cells with no integer point, e.g. (1.125, 1.375]
def test_box_verifier_matches_bruteforce(seed, action):
    X, y = _data(seed, k=3)
    m = GradientBoostingClassifier(n_estimators=3, max_depth=2, random_state=0).fit(X, y)
    ens = ter.from_sklearn(m)
    lo, hi = np.zeros(3), np.array([1.0, 3.0, 5.0])
    res = ter.verify_box(ens, action, lo, hi, integer=np.ones(3, bool), max_count=500)
    assert len(res.counterexamples) == len(ter.box_bruteforce(ens, action, lo, hi, integer=np.ones(3, bool)))
    for x in res.counterexamples:
        assert m.predict(x[None])[0] == m.classes_[action]


def test_verifier_on_hand_made_ensemble():
    # one stump on the protected feature: every x is a counterexample, and only the protected split matters
    X = np.array([[0, 0.0], [1, 0.0], [0, 1.0], [1, 1.0]] * 10)
    y = X[:, 0].astype(int)
    m = GradientBoostingClassifier(n_estimators=1, max_depth=1, learning_rate=1.0).fit(X, y)
    ens = ter.from_sklearn(m)
    res = ter.verify_fairness(ens, 0, max_count=5)
    assert len(res.counterexamples) == 1 and not res.verified  # no other predicates: a single cell
    # no split on the protected attribute: verified fair
    m = GradientBoostingClassifier(n_estimators=2, max_depth=1).fit(X, X[:, 1].astype(int))
    assert ter.verify_fairness(ter.from_sklearn(m), 0).verified


def _repair_setup(seed=0, trees=6):
    X, y = _data(seed, n=300)
    m = GradientBoostingClassifier(n_estimators=trees, max_depth=3, learning_rate=0.3, random_state=0).fit(X, y)
    ens = ter.from_sklearn(m)
    dom = (np.zeros(3), np.full(3, 5.0))
    pairs = ter.verify_fairness(ens, 0, domain=dom, integer=np.ones(3, bool), max_count=6).counterexamples
    return X, y, m, ens, pairs


@pytest.mark.parametrize("relax", [False, True])
@pytest.mark.parametrize("labels", [False, True])
def test_repair_fixes_every_counterexample(relax, labels):
    X, y, m, ens, pairs = _repair_setup()
    assert pairs, "the setup must produce counterexamples"
    res = ter.repair(ens, X[:80], y[:80] if labels else None, pairs=pairs, delta=1.0, relax=relax)
    assert res.ok
    assert ter.check_repair(ens, res) <= 1e-6
    m2 = ter.to_sklearn(m, ens, res.values)
    assert ter.fixed_fraction(ens, res.values, pairs, predict=m2.predict) == 1.0
    assert np.abs(res.values - ens.values).max() <= 1.0 + 1e-9


def test_repair_without_counterexamples_does_no_harm():
    X, y, m, ens, _ = _repair_setup()
    res = ter.repair(ens, X[:80], None, delta=1.0, mu=1e-3)
    assert res.ok and np.abs(res.values - ens.values).max() <= 1e-7
    margin_ok = np.abs(ens.decision(X[:80])) >= 1e-3
    assert res.kept[margin_ok].all()


def test_repair_infeasible_trust_region():
    X, y, m, ens, pairs = _repair_setup()
    F = ens.decision(np.array([p.x for p in pairs] + [p.x_prime for p in pairs]))
    delta = 1e-3 * float(np.min(np.abs(F)))  # far too small to move any pair's score across zero
    res = ter.repair(ens, X[:20], None, pairs=pairs, delta=delta)
    assert not res.ok and res.status == 2


def test_safety_repair_on_gridworld():
    w = ter.make_gridworld(5, 4, seed=1)
    S = w.states()
    live = np.array([not w.terminal(int(r), int(c)) for r, c in S])
    St = S[live]
    safe = [w.safe_actions(int(r), int(c)) for r, c in St]
    expert = w.expert()
    assert all(expert[int(r), int(c)] in s for (r, c), s in zip(St, safe))  # the expert is safe
    rng = np.random.default_rng(0)
    ys = rng.integers(0, 4, len(St) * 3)  # a random policy: plenty of unsafe states
    m = GradientBoostingClassifier(n_estimators=4, max_depth=3, random_state=0).fit(np.repeat(St, 3, 0), ys)
    ens = ter.from_sklearn(m)
    ce = ter.safety_counterexamples(ens, St, safe)
    assert ce and all(ens.predict_index(c.x[None])[0] not in c.safe for c in ce)
    res = ter.repair(ens, St, None, unsafe=ce, delta=2.0)
    assert res.ok and ter.check_repair(ens, res) <= 1e-6
    assert ter.fixed_fraction(ens, res.values, unsafe=ce, predict=ter.to_sklearn(m, ens, res.values).predict) == 1
    with pytest.raises(ValueError, match="safe action"):
        ter.repair(ens, St, None, unsafe=[ter.SafeState(St[0], ())])


def test_gridworld_rollout():
    w = ter.GridWorld(3, np.zeros((3, 3), bool), goal=(2, 2), start=(0, 0))
    pol = w.expert()
    ret, path = w.rollout(pol)
    assert path[-1] == (2, 2) and len(path) == 5 and ret == pytest.approx(w.gamma**3)
    assert w.rollout(np.zeros((3, 3), int))[0] == 0.0  # walks into the wall for ever
    with pytest.raises(ValueError):
        ter.make_gridworld(2)


def test_flip_rate():
    X = np.array([[0, 1.0], [1, 2.0]])
    assert ter.flip_rate(lambda Z: Z[:, 0] > 0, X, 0) == 1.0
    assert ter.flip_rate(lambda Z: Z[:, 1] > 1.5, X, 0) == 0.0


def _bruteforce_repair_optimum(ens, X_keep, target, pairs, delta, mu, eps):
    """min -sum c + mu |v - v0|_1 by enumerating every (c, z) and solving the LP in v for each."""
    import itertools

    from scipy.optimize import linprog

    v0, S = ens.values, ens.n_slots
    R = ens.design(X_keep)[0].toarray()
    Rp = ens.design(np.array([p.x for p in pairs] + [p.x_prime for p in pairs]))[0].toarray() if pairs else None
    b = ens.base[0]
    best = np.inf
    for c in itertools.product([0, 1], repeat=len(X_keep)):
        for z in itertools.product([0, 1], repeat=len(pairs)):
            rows, rhs = [], []  # rows @ v <= rhs (v part only; w handled below)
            for i in np.flatnonzero(c):
                sgn = 2 * target[i] - 1
                rows.append(-sgn * R[i])
                rhs.append(sgn * b - eps)
            for j, zj in enumerate(z):
                sgn = 2 * zj - 1
                for r in (Rp[j], Rp[len(pairs) + j]):
                    rows.append(-sgn * r)
                    rhs.append(sgn * b - eps)
            # variables [v, w]: w >= v - v0, w >= v0 - v
            A = [np.concatenate([r, np.zeros(S)]) for r in rows]
            A += [np.concatenate([e, -e]) for e in np.eye(S)]
            A += [np.concatenate([-e, -e]) for e in np.eye(S)]
            ub = rhs + list(v0) + list(-v0)
            res = linprog(np.concatenate([np.zeros(S), np.full(S, mu)]), A_ub=np.array(A), b_ub=np.array(ub),
                          bounds=[(a - delta, a + delta) for a in v0] + [(0, None)] * S, method="highs")
            if res.status == 0:
                best = min(best, -sum(c) + res.fun)
    return best


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 10_000), labels=st.booleans(), n_pairs=st.integers(0, 2))
def test_repair_milp_is_optimal_against_bruteforce(seed, labels, n_pairs):
    X, y = _data(seed, n=120)
    m = GradientBoostingClassifier(n_estimators=2, max_depth=2, learning_rate=0.5, random_state=0).fit(X, y)
    ens = ter.from_sklearn(m)
    rng = np.random.default_rng(seed)
    X_keep = X[rng.choice(len(X), 7, replace=False)]
    y_keep = None
    target = ens.predict_index(X_keep)
    if labels:
        y_keep = rng.integers(0, 2, len(X_keep))
        target = y_keep
    cells = ter.fairness_cells_bruteforce(ens, 0, domain=(np.zeros(3), np.full(3, 5.0)), integer=np.ones(3, bool))
    pool = [ter.FairPair(x, np.where(np.arange(3) == 0, 1.0, x)) for x in cells]
    pool += [ter.FairPair(np.where(np.arange(3) == 0, 0.0, x), np.where(np.arange(3) == 0, 1.0, x)) for x in X[:5]]
    pairs = pool[:n_pairs]
    delta, mu, eps = 0.3, 1e-2, 1e-3
    res = ter.repair(ens, X_keep, y_keep, pairs=pairs, delta=delta, mu=mu, eps=eps, mip_rel_gap=0.0)
    best = _bruteforce_repair_optimum(ens, X_keep, target, pairs, delta, mu, eps)
    if not np.isfinite(best):
        assert not res.ok
        return
    assert res.ok and res.status == 0
    assert res.objective == pytest.approx(best, abs=1e-6)
    assert ter.check_repair(ens, res) <= 1e-6


def test_rows_with_identical_leaves_are_merged():
    X, y = _data(4, n=200)
    m = GradientBoostingClassifier(n_estimators=2, max_depth=2, random_state=0).fit(X, y)
    ens = ter.from_sklearn(m)
    X_keep = np.repeat(X[:10], 5, axis=0)  # every row five times
    res = ter.repair(ens, X_keep, None)
    assert res.n_keep_vars <= 10 and len(res.kept) == len(X_keep)
    assert res.kept.sum() == len(X_keep)  # no counterexample: every point keeps its prediction
    assert res.objective == pytest.approx(-len(X_keep), abs=1e-9)


def test_bias_labels_and_data_counterexamples():
    X, y = _data(5, n=400)
    y2 = ter.bias_labels(X, y, 0, 0.0, 1.0, np.random.default_rng(0))
    assert np.all(y2[(X[:, 0] == 0)] == 0) and np.array_equal(y2[X[:, 0] == 1], y[X[:, 0] == 1])
    assert np.array_equal(ter.bias_labels(X, y, 0, 0.0, 0.0, np.random.default_rng(0)), y)
    m = GradientBoostingClassifier(n_estimators=5, max_depth=2, random_state=0).fit(X, y2)
    ens = ter.from_sklearn(m)
    pairs = ter.data_counterexamples(ens, X, 0)
    assert len(pairs) == round(ter.flip_rate(m.predict, X, 0) * len(X))
    for p in pairs:
        assert m.predict(p.x[None])[0] != m.predict(p.x_prime[None])[0]
    with pytest.raises(ValueError, match="rate"):
        ter.bias_labels(X, y, 0, 0.0, float("nan"), np.random.default_rng(0))


def test_evaluate_policy_matches_rollouts():
    world = ter.make_gridworld(6, 5, seed=1)
    rng = np.random.default_rng(0)
    for policy in [world.expert(), rng.integers(0, 4, (6, 6))]:
        value, reach = ter.evaluate_policy(world, policy)
        ces = {p[0]: o for p, o in ter.reach_avoid_counterexamples(world, policy)}
        for r in range(6):
            for c in range(6):
                if world.terminal(r, c):
                    continue
                ret, path = world.rollout(policy, (r, c))
                assert value[r, c] == pytest.approx(ret, abs=1e-9)  # loops return 0 in both
                assert reach[r, c] == (path[-1] == world.goal)
                assert ((r, c) in ces) == (path[-1] != world.goal)
    assert ter.evaluate_policy(world, world.expert())[1][world.start] == 1


def test_group_scores_splits_accuracy_by_group_and_counts_flips():
    X = np.array([[0.0, 1.0], [0.0, 2.0], [1.0, 1.0], [1.0, 2.0]])
    y = np.array([1, 0, 1, 1])

    def predict(X_):  # says 1 for men (column 0 == 1) or feature 1 == 1: the women's row 2.0 flips
        return ((X_[:, 0] == 1) | (X_[:, 1] == 1)).astype(int)

    s = ter.group_scores(predict, X, y, protected=0)
    assert s["acc"] == 1.0 and s["acc_women"] == 1.0 and s["acc_men"] == 1.0
    assert s["flip"] == pytest.approx(0.5)  # rows with feature 1 == 2 flip with the protected attribute
    s = ter.group_scores(predict, X, np.array([0, 0, 1, 1]), protected=0)
    assert s["acc_women"] == 0.5 and s["acc_men"] == 1.0 and s["acc"] == 0.75
    with pytest.raises(ValueError, match="one label per row"):
        ter.group_scores(predict, X, y[:2], protected=0)


def test_augment_with_pairs_labels_pairs_from_their_training_row_else_the_scores():
    rng = np.random.default_rng(0)
    X = np.c_[rng.integers(0, 2, 200), rng.normal(size=200)]
    y = (X[:, 1] > 0).astype(int)
    model = GradientBoostingClassifier(n_estimators=5, max_depth=2, random_state=0).fit(X, y)
    ens = ter.from_sklearn(model)
    seen = ter.FairPair(np.array([0.0, X[3, 1]]), np.array([1.0, X[3, 1]]))  # same features as row 3
    far = ter.FairPair(np.array([0.0, 5.0]), np.array([1.0, 5.0]))  # no training row: the scores lean to 1
    Xa, ya = ter.augment_with_pairs(ens, X, 1 - y, [seen, far], protected=0)
    assert Xa.shape == (204, 2) and ya.dtype.kind == "i"
    assert list(ya[-4:]) == [1 - y[3], 1 - y[3], 1, 1]
    Xa, ya = ter.augment_with_pairs(ens, X, y, [], protected=0)
    assert np.array_equal(Xa, X) and np.array_equal(ya, y)


def _predicate_pattern(ens, X, skip):
    return [tuple(bool(x[f] <= t) for f, th in ens.thresholds().items() if f not in skip for t in th) for x in X]


@pytest.mark.parametrize("seed", [0, 1])
def test_support_verifier_matches_bruteforce_inside_the_boxes(seed):
    X, y = _data(seed, n=150)
    m = GradientBoostingClassifier(n_estimators=4, max_depth=3, learning_rate=0.5, random_state=0).fit(X, y)
    ens = ter.from_sklearn(m)
    dom = (np.zeros(3), np.full(3, 5.0))
    support = ter.support_boxes(X[:4], [0, 1, 1])
    res = ter.verify_fairness(ens, 0, domain=dom, integer=np.ones(3, bool), support=support, max_count=1000)
    grid = np.array([(0, a, b) for a in range(6) for b in range(6)], float)
    L, U = support
    L, U = L.copy(), U.copy()
    L[:, 0], U[:, 0] = -np.inf, np.inf
    grid = grid[ter.in_support(grid, (L, U))]
    X1 = grid.copy()
    X1[:, 0] = 1
    F0, F1 = ens.decision(grid), ens.decision(X1)
    bad = ((F0 >= 1e-4) & (F1 <= -1e-4)) | ((F1 >= 1e-4) & (F0 <= -1e-4))
    cells = set(_predicate_pattern(ens, grid[bad], {0}))
    assert len(res.counterexamples) == len(cells)
    found = np.array([p.x for p in res.counterexamples]).reshape(-1, 3)
    assert ter.in_support(found, (L, U)).all()
    assert set(_predicate_pattern(ens, found, {0})) == cells
    assert all(m.predict(p.x[None])[0] != m.predict(p.x_prime[None])[0] for p in res.counterexamples)
    whole = ter.verify_fairness(ens, 0, domain=dom, integer=np.ones(3, bool), max_count=1000)
    assert len(whole.counterexamples) >= len(res.counterexamples)


def test_support_bad_inputs():
    X, y = _data(3)
    ens = ter.from_sklearn(GradientBoostingClassifier(n_estimators=3, max_depth=2).fit(X, y))
    with pytest.raises(ValueError, match="radius"):
        ter.support_boxes(X, [-1, 0, 0])
    with pytest.raises(ValueError, match="radius"):
        ter.support_boxes(X, [1, 1])
    with pytest.raises(TypeError, match="support"):
        ter.verify_fairness(ens, 0, support=X)
    with pytest.raises(ValueError, match="columns"):
        ter.verify_fairness(ens, 0, support=(X[:, :2], X[:, :2]))
    with pytest.raises(ValueError, match="L <= U"):
        ter.verify_fairness(ens, 0, support=(X + 1, X))
    with pytest.raises(TypeError, match="support"):
        ter.in_support(X, "boxes")


def test_lp_with_the_milps_classes_is_feasible():
    X, y, m, ens, pairs = _repair_setup()
    mil = ter.repair(ens, X[:80], None, pairs=pairs, delta=1.0)
    lp = ter.repair(ens, X[:80], None, pairs=pairs, delta=1.0, relax=True, pair_class=mil.pair_class)
    assert lp.ok and ter.check_repair(ens, lp) <= 1e-6
    assert (lp.pair_class == mil.pair_class).all()
    assert ter.fixed_fraction(ens, lp.values, pairs) == 1.0
    with pytest.raises(ValueError, match="relax"):
        ter.repair(ens, X[:80], None, pairs=pairs, pair_class=mil.pair_class)
    with pytest.raises(ValueError, match="pair_class"):
        ter.repair(ens, X[:80], None, pairs=pairs, relax=True, pair_class=mil.pair_class[:-1])


def test_distance_to_go_and_progress_actions():
    lava = np.zeros((4, 4), bool)
    lava[0, 1] = lava[1, 0] = True  # the corner (0, 0) is walled in
    w = ter.GridWorld(4, lava, goal=(3, 3), start=(2, 2))
    d = w.distance_to_go()
    assert d[3, 3] == 0 and d[2, 3] == 1 and d[1, 1] == 4 and np.isinf(d[0, 0]) and np.isinf(d[0, 1])
    assert w.progress_actions(0, 0, d) == ()
    assert set(w.progress_actions(2, 2, d)) == {1, 3}
    expert = w.expert()
    for r in range(4):
        for c in range(4):
            if not w.terminal(r, c) and np.isfinite(d[r, c]):
                assert expert[r, c] in w.progress_actions(r, c, d)


def test_loops_become_disjunctive_counterexamples_and_the_repair_breaks_them():
    w = ter.GridWorld(5, np.zeros((5, 5), bool), goal=(4, 4), start=(0, 0))
    pol = w.expert()
    pol[1, 1], pol[1, 2] = 3, 2  # right, left: a two-cell loop
    pol[3, 0], pol[2, 0] = 0, 1  # up, down: another
    groups, cycles = ter.loop_counterexamples(w, pol)
    assert sorted(map(sorted, cycles)) == [[(1, 1), (1, 2)], [(2, 0), (3, 0)]]
    assert len(groups) == 2
    for g in groups:  # every allowed action is progress and changes the cell's action
        for s in g.states:
            r, c = s.x.astype(int)
            assert s.safe and set(s.safe) <= set(w.progress_actions(r, c)) and pol[r, c] not in s.safe
    S = w.states()
    live = np.array([not w.terminal(int(r), int(c)) for r, c in S])
    St = S[live]
    ys = pol[St[:, 0].astype(int), St[:, 1].astype(int)]
    m = GradientBoostingClassifier(n_estimators=30, max_depth=4, random_state=0).fit(St, ys)
    ens = ter.from_sklearn(m)
    assert (m.predict(St) == ys).all()
    assert ter.fixed_fraction(ens, ens.values, any_of=groups) == 0.0
    for relax in (False, True):
        res = ter.repair(ens, St, None, any_of=groups, delta=2.0, relax=relax)
        assert res.ok and ter.check_repair(ens, res) <= 1e-6
        m2 = ter.to_sklearn(m, ens, res.values)
        assert ter.fixed_fraction(ens, res.values, any_of=groups, predict=m2.predict) == 1.0
        act = np.zeros((5, 5), int)
        act[St[:, 0].astype(int), St[:, 1].astype(int)] = m2.predict(St)
        left = {frozenset(c) for c in ter.loop_counterexamples(w, act)[1]}
        assert not left & {frozenset(c) for c in cycles}
    with pytest.raises(ValueError, match="at least one"):
        ter.AnyOf([ter.SafeState(St[0], ())])
    with pytest.raises(ValueError, match="states"):
        ter.AnyOf([])
    with pytest.raises(ValueError, match="multiclass"):
        X, y, _, bens, _ = _repair_setup()
        ter.repair(bens, X[:5], None, any_of=groups)


def test_node_limit_is_reproducible_and_not_a_time_limit_hit():
    X, y = _data(3, n=300)
    m = GradientBoostingClassifier(n_estimators=6, max_depth=3, random_state=0).fit(X, y)
    ens = ter.from_sklearn(m)
    Xf = X.copy()
    Xf[:, 0] = 1 - Xf[:, 0]
    pairs = [ter.FairPair(a, b) for a, b in zip(X[:60], Xf[:60])]
    runs = [ter.repair(ens, X[60:], y[60:], pairs=pairs, delta=2.0, node_limit=1, mip_rel_gap=0.0)
            for _ in range(2)]
    for res in runs:
        assert res.status in (0, 4) and not res.hit_time_limit  # 4: stopped by the node limit
        assert res.nodes <= 2
    assert np.array_equal(runs[0].values, runs[1].values)  # one thread, a node limit: the same incumbent
    assert ter.HIGHS_OPTIONS["threads"] == 1
    # the wall-clock guard is reported when it is what stopped the solve
    guard = ter.repair(ens, X[60:], y[60:], pairs=pairs, delta=2.0, time_limit=1e-6, mip_rel_gap=0.0)
    assert guard.status in (0, 1) and guard.hit_time_limit == (guard.status == 1)
    # a verifier search that runs out of its wall-clock budget records status 1
    ver = ter.verify_fairness(ens, 0, max_count=50, time_limit=1e-9)
    assert 1 in ver.statuses and not ver.verified


def test_warm_start_and_freeze():
    X, y, m, ens, pairs = _repair_setup()
    inputs = np.array([p.x for p in pairs] + [p.x_prime for p in pairs])
    reached = ter.slots_reached(ens, inputs)
    assert reached.dtype == bool and reached.shape == ens.values.shape and 0 < reached.sum() < ens.n_slots
    # every input reaches exactly one leaf per tree, all of them marked
    assert np.all(reached[ens.design(inputs)[0].indices])
    warm = ter.trivial_fair_values(ens, pairs, X[:80], delta=2.0, freeze=~reached)
    assert warm is not None and np.array_equal(warm[~reached], ens.values[~reached])
    assert ter.fixed_fraction(ens, warm, pairs) == 1.0
    F = ens.decision(inputs, warm)
    assert np.all(np.abs(F) >= 1e-3)
    plain = ter.repair(ens, X[:80], None, pairs=pairs, delta=2.0)
    strong = ter.repair(ens, X[:80], None, pairs=pairs, delta=2.0, warm_start=warm, freeze=~reached)
    assert strong.ok and strong.warm_start_used and strong.n_frozen == int((~reached).sum())
    assert np.array_equal(strong.values[~reached], ens.values[~reached])
    assert ter.check_repair(ens, strong) <= 1e-6
    assert ter.fixed_fraction(ens, strong.values, pairs) == 1.0
    assert strong.kept.sum() <= plain.kept.sum()  # freezing restricts: never better than the full MILP
    # stopped at once (one node), the solve is still at least as good as its warm start
    kept_warm = int(np.sum((2 * ens.predict_index(X[:80]) - 1) * ens.decision(X[:80], warm) >= 1e-3))
    early = ter.repair(ens, X[:80], None, pairs=pairs, delta=2.0, warm_start=warm, node_limit=1,
                       mip_rel_gap=0.0)
    assert early.ok and early.kept.sum() >= kept_warm
    # a warm start that does not fix the pairs is not used, and the solve goes on without it
    cold = ter.repair(ens, X[:80], None, pairs=pairs, delta=2.0, warm_start=ens.values)
    assert cold.ok and not cold.warm_start_used
    # a trust region too small for the trivial repair: None
    assert ter.trivial_fair_values(ens, pairs, X[:80], delta=1e-9) is None
    with pytest.raises(ValueError, match="warm_start"):
        ter.repair(ens, X[:80], None, pairs=pairs, relax=True, warm_start=warm)
    with pytest.raises(ValueError, match="warm_start"):
        ter.repair(ens, X[:80], None, pairs=pairs, warm_start=warm[:-1])
    with pytest.raises(TypeError, match="freeze"):
        ter.repair(ens, X[:80], None, pairs=pairs, freeze=np.zeros(ens.n_slots))
    with pytest.raises(ValueError, match="binary"):
        Xm, ym = _data(1, k=3)
        mm = GradientBoostingClassifier(n_estimators=2, max_depth=2).fit(Xm, ym)
        ter.trivial_fair_values(ter.from_sklearn(mm), [], Xm[:5], delta=1.0)
    with pytest.raises(ValueError, match="delta"):
        ter.trivial_fair_values(ens, pairs, X[:80], delta=0.0)
    with pytest.raises(ValueError, match="X"):
        ter.slots_reached(ens, X[:, :2])


def test_sample_near_and_paired_difference():
    rng = np.random.default_rng(0)
    X = np.array([[0.0, 10.0, 5.0], [3.0, 20.0, 5.0]])
    lo, hi = np.array([0.0, 0.0, 0.0]), np.array([3.0, 25.0, 9.0])
    Z = ter.sample_near(X, [0, 2, 1.5], lo, hi, 5000, rng, integer=np.array([True, True, False]))
    assert Z.shape == (5000, 3) and np.all(Z >= lo) and np.all(Z <= hi)
    assert set(np.unique(Z[:, 0])) == {0.0, 3.0}  # radius 0: the code stays put
    assert np.all(Z[:, 1] == np.round(Z[:, 1]))  # integer feature: whole steps
    near = np.abs(Z[:, 1][:, None] - X[:, 1][None]).min(axis=1)
    assert near.max() <= 2 and set(np.unique(near)) == {0, 1, 2}
    assert np.abs(Z[:, 2] - 5.0).max() <= 1.5 and len(np.unique(Z[:, 2])) > 100
    again = ter.sample_near(X, [0, 2, 1.5], lo, hi, 5000, np.random.default_rng(0), integer=[True, True, False])
    assert np.array_equal(Z, again)
    # paired interval: the mean difference and a normal interval around it
    a = np.array([1, 0, 1, 1, 0, 1, 0, 0], bool)
    b = np.array([0, 0, 1, 0, 0, 0, 0, 0], bool)
    m, lo_, hi_ = ter.paired_difference(a, b)
    d = a.astype(float) - b
    se = d.std(ddof=1) / np.sqrt(len(d))
    assert m == d.mean() and np.isclose(lo_, m - 1.96 * se) and np.isclose(hi_, m + 1.96 * se)
    assert ter.paired_difference(a, a) == (0.0, 0.0, 0.0)
    with pytest.raises(ValueError, match="pair"):
        ter.paired_difference(a, b[:-1])
    with pytest.raises(ValueError, match="at least 2"):
        ter.paired_difference([1.0], [0.0])
    with pytest.raises(TypeError, match="numeric"):
        ter.paired_difference(np.array(["a", "b"], object), b[:2])
    # the draws' origins: the same points, each near the row it came from
    Z2, origin = ter.sample_near(X, [0, 2, 1.5], lo, hi, 5000, np.random.default_rng(0),
                                 integer=[True, True, False], return_index=True)
    assert np.array_equal(Z2, Z) and origin.shape == (5000,) and set(np.unique(origin)) == {0, 1}
    assert np.all(Z2[:, 0] == X[origin, 0]) and np.all(np.abs(Z2[:, 2] - X[origin, 2]) <= 1.5)
    with pytest.raises(TypeError, match="return_index"):
        ter.sample_near(X, 1.0, lo, hi, 10, rng, return_index=1)
    # clustered interval: one observation per group equals the independent one; whole groups that agree
    # (perfectly correlated copies) widen it by sqrt(copies) against the naive interval
    groups = np.arange(len(a))
    m1, lo1, hi1 = ter.paired_difference(a, b, groups=groups)
    n = len(d)
    se_c = np.sqrt(n / (n - 1) * np.sum((d - d.mean()) ** 2)) / n
    assert m1 == m and np.isclose(hi1 - m1, 1.96 * se_c) and np.isclose(se_c, se)  # sd with ddof=1
    k = 50
    aa, bb, gg = np.repeat(a, k), np.repeat(b, k), np.repeat(groups, k)
    _, lo_n, _ = ter.paired_difference(aa, bb)
    mc, lo_c, _ = ter.paired_difference(aa, bb, groups=gg)
    assert np.isclose(mc, m) and np.isclose(mc - lo_c, m - lo1)  # copies add no information
    assert (mc - lo_n) < (mc - lo_c) / 5  # the naive interval is ~sqrt(50) times too narrow
    with pytest.raises(ValueError, match="groups must hold"):
        ter.paired_difference(a, b, groups=groups[:-1])
    with pytest.raises(ValueError, match="2 distinct groups"):
        ter.paired_difference(a, b, groups=np.zeros(len(a)))
    with pytest.raises(ValueError, match="radius"):
        ter.sample_near(X, -1.0, lo, hi, 10, rng)
    with pytest.raises(ValueError, match="lo must be"):
        ter.sample_near(X, 1.0, hi, lo, 10, rng)
    with pytest.raises(TypeError, match="rng"):
        ter.sample_near(X, 1.0, lo, hi, 10, 0)
    with pytest.raises(ValueError, match="n"):
        ter.sample_near(X, 1.0, lo, hi, 0, rng)
