"""Searching a tree for a hidden target with a predicted location, in O(k log eta) queries (k = pathwidth).

The query model: asking vertex ``v`` answers "found" (``None``) if ``v`` is the target, otherwise the neighbour of
``v`` on the path to the target. :class:`Oracle` answers in O(log deg) time (Euler-tour intervals) and counts.

* :func:`pathwidth` is the exact pathwidth of a tree (Ellis-Sudborough-Turner-style labels, bottom up, O(n k));
  :func:`pathwidth_bruteforce` is the vertex-separation subset DP it is tested against.
* :class:`Decomposition` removes a *spine* (a path whose removal leaves components of smaller pathwidth) from the
  tree, then from every remaining component, recursively: at most ``pw`` levels.
* :func:`search_with_prediction` queries the prediction, then by default starts in the prediction's own (deepest)
  component and escalates outward: on each level it gallops along the spine from where the prediction hangs
  (doubling, then binary search); an answer leaving the component sends it one level up, an answer into a part
  off the spine sends it down, top-down, into that part. ``start="top"`` is the top-down variant (every level
  from the whole tree's spine down); ``start="both"`` combines the two for both regimes (the prediction-first
  search alone for :func:`combined_head` queries, then the two take turns, sharing answers; within
  :func:`combined_bound`). :func:`centroid_search` (no prediction, O(log n)), :func:`walk_search`
  (eta + 1 queries), :func:`interleaved_search` (ours and centroid taking turns, sharing answers) and
  :func:`doubling_search_path` (the sorted-array case) are the baselines. Searches are generators of queries
  driven against the oracle, so that two can take turns.
* Large path-like trees: :func:`corridor_tree` (random-weight grid MST), :func:`image_strip_tree` (MST of a
  snaking pixel strip of a photograph); :func:`single_linkage_tree` (a dendrogram of up to ``10^5`` points) for
  contrast; :func:`measure_tree` runs every search on one of them (means and full-ring worst cases).
* :func:`minimax_queries` (brute force, small trees) and :func:`binary_minimax` (a DP over tree shapes) give the
  exact fewest worst-case queries of *any* algorithm: the lower bound is measured, not assumed.

The query model is standard; the search algorithm is our reconstruction from the paper's abstract and the
pathwidth characterisation of trees.
"""

from __future__ import annotations

import ast
import functools
import math
import os
from bisect import bisect_right
from collections import deque
from collections.abc import Generator, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from helpers import validate as V

__all__ = [
    "Tree", "Oracle", "pathwidth", "pathwidth_bruteforce", "spine", "Decomposition", "SearchResult",
    "search_with_prediction", "START_VARIANTS", "combined_head", "combined_bound",
    "combined_query_bound", "measure_tree", "interleaved_search", "centroid_search", "CentroidTree", "walk_search",
    "doubling_search_path", "query_bound", "query_bound_from_prediction", "minimax_queries", "binary_minimax", "spine_runs", "binary_height_at", "path_tree", "star_tree", "caterpillar_tree", "complete_tree", "random_tree",
    "ast_tree", "directory_tree", "exception_tree", "dendrogram_tree", "grid_mst_tree", "corridor_tree", "image_strip_tree",
    "single_linkage_tree", "diameter", "neighbor_joining_tree",
    "bfs_tree", "save_edges", "load_edges",
]


# ---------------------------------------------------------------------------------------------------------------
# Trees and the query oracle
# ---------------------------------------------------------------------------------------------------------------
class Tree:
    """An undirected tree on vertices ``0..n-1``, rooted at 0 for the oracle's Euler-tour intervals."""

    def __init__(self, n: int, edges: Iterable[tuple[int, int]], names: Sequence[str] | None = None):
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise ValueError(f"n must be a positive int, got {n!r}")
        n = int(n)
        if isinstance(edges, (str, bytes)) or not hasattr(edges, "__iter__"):
            raise TypeError(f"edges must be an iterable of (a, b) vertex pairs, got {V.describe(edges)}")
        edges = list(edges)
        for i, e in enumerate(edges):
            if isinstance(e, (str, bytes)) or not hasattr(e, "__len__") or len(e) != 2:
                raise TypeError(f"edges[{i}] must be an (a, b) pair of vertices, got {V.describe(e)}")
        edges = [(V.integer(f"edges[{i}][0]", a), V.integer(f"edges[{i}][1]", b)) for i, (a, b) in enumerate(edges)]
        if len(edges) != n - 1:
            raise ValueError(f"a tree on {n} vertices has {n - 1} edges, got {len(edges)}: not a tree")
        self.n = n
        self.adj: list[list[int]] = [[] for _ in range(n)]
        for a, b in edges:
            if not (0 <= a < n and 0 <= b < n) or a == b:
                raise ValueError(f"edge ({a}, {b}) is not between two distinct vertices of 0..{n - 1}")
            self.adj[a].append(b)
            self.adj[b].append(a)
        self.edges = edges
        if names is not None:
            names = V.sequence("names", names)
            if len(names) != n:
                raise ValueError(f"names must give one name per vertex ({n}), got {len(names)}")
        self.names = list(names) if names is not None else None
        # BFS from 0: parent, depth, order; connectivity check
        parent = [-1] * n
        depth = [0] * n
        order = [0]
        seen = [False] * n
        seen[0] = True
        for v in order:
            for u in self.adj[v]:
                if not seen[u]:
                    seen[u] = True
                    parent[u] = v
                    depth[u] = depth[v] + 1
                    order.append(u)
        if len(order) != n:
            raise ValueError("the graph is not connected (it has a cycle or a duplicate edge): not a tree")
        self.parent, self.depth, self.order = parent, depth, order
        self.children = [[u for u in self.adj[v] if u != parent[v]] for v in range(n)]
        # Euler tour (iterative DFS): tin/tout, children sorted by tin for the oracle's bisect
        tin, tout, t = [0] * n, [0] * n, 0
        stack = [(0, 0)]
        while stack:
            v, i = stack.pop()
            if i == 0:
                tin[v] = t
                t += 1
            if i < len(self.children[v]):
                stack.append((v, i + 1))
                stack.append((self.children[v][i], 0))
            else:
                tout[v] = t
        self.tin, self.tout = tin, tout
        self._child_tin = [[tin[c] for c in self.children[v]] for v in range(n)]

    @classmethod
    def from_networkx(cls, g) -> Tree:
        """From a networkx graph (any hashable nodes; names kept as strings)."""
        import networkx as nx

        V.instance("g", g, nx.Graph)
        if g.is_directed():
            g = g.to_undirected()
        nodes = list(g.nodes)
        idx = {u: i for i, u in enumerate(nodes)}
        return cls(len(nodes), [(idx[a], idx[b]) for a, b in g.edges], [str(u) for u in nodes])

    def check_vertex(self, v, name: str = "v") -> int:
        """``v`` as an int if it is a vertex (an int in ``0..n-1``), else ValueError naming ``name``."""
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 0 <= v < self.n:
            raise ValueError(f"{name} is an unknown vertex {V.describe(v)}: vertices are ints 0..{self.n - 1}")
        return int(v)

    def in_subtree(self, v: int, t: int) -> bool:
        """Whether ``t`` lies in the subtree of ``v`` (rooted at 0)."""
        v, t = self.check_vertex(v, "v"), self.check_vertex(t, "t")
        return self.tin[v] <= self.tin[t] < self.tout[v]

    def next_hop(self, v: int, t: int) -> int:
        """The neighbour of ``v`` on the path to ``t`` (``v != t``)."""
        v, t = self.check_vertex(v, "v"), self.check_vertex(t, "t")
        if v == t:
            raise ValueError(f"t must differ from v for a next hop, got v = t = {v}")
        return self._next_hop(v, t)

    def _next_hop(self, v: int, t: int) -> int:
        if self.tin[v] <= self.tin[t] < self.tout[v]:
            return self.children[v][bisect_right(self._child_tin[v], self.tin[t]) - 1]
        return self.parent[v]

    def distances(self, source: int) -> np.ndarray:
        """BFS distances from ``source`` to every vertex."""
        source = self.check_vertex(source, "source")
        if self.n < 2000:
            d = np.full(self.n, -1)
            d[source] = 0
            q = deque([source])
            while q:
                v = q.popleft()
                for u in self.adj[v]:
                    if d[u] < 0:
                        d[u] = d[v] + 1
                        q.append(u)
            return d
        from scipy.sparse.csgraph import breadth_first_order

        order, pred = breadth_first_order(self._csr(), source, directed=False)
        d = np.zeros(self.n, dtype=np.int64)
        for v in order[1:]:  # BFS order: a vertex's parent comes before it
            d[v] = d[pred[v]] + 1
        return d

    def _csr(self):
        """The adjacency as a scipy CSR matrix (built once, for fast BFS on large trees)."""
        if getattr(self, "_csr_cache", None) is None:
            from scipy.sparse import csr_matrix

            a = np.array(self.edges, dtype=np.int64).reshape(-1, 2)
            self._csr_cache = csr_matrix((np.ones(len(a)), (a[:, 0], a[:, 1])), shape=(self.n, self.n))
        return self._csr_cache

    def to_networkx(self):
        import networkx as nx

        g = nx.Graph()
        g.add_nodes_from(range(self.n))
        g.add_edges_from(self.edges)
        return g


class Oracle:
    """The hidden target behind the query model: ``query(v)`` returns ``None`` when ``v`` is the target, else the
    neighbour of ``v`` towards it. Every call is counted; anything that is not a vertex is refused."""

    def __init__(self, tree: Tree, target: int):
        if not isinstance(tree, Tree):
            raise TypeError(f"tree must be a Tree, got {type(tree).__name__}")
        self.tree = tree
        self._target = tree.check_vertex(target, "target")
        self.queries = 0
        self.log: list[int] = []  # the queried vertices, in order

    def query(self, v: int) -> int | None:
        v = self.tree.check_vertex(v)
        self.queries += 1
        self.log.append(v)
        return None if v == self._target else self.tree._next_hop(v, self._target)


@dataclass
class SearchResult:
    found: int
    queries: int


def query_bound(k: int, eta: int) -> int:
    """The proven shape of our bound: ``1 + k * (2 ceil(log2(eta + 1)) + 3)``."""
    k, eta = V.integer("k", k, min=0), V.integer("eta", eta, min=0)
    return 1 + k * (2 * math.ceil(math.log2(eta + 1)) + 3)


def query_bound_from_prediction(k: int, eta: int) -> int:
    """Our bound for the search that starts at the prediction: at most ``2k + 1`` spine searches (up from the
    prediction's level, then down to the target's), each within ``2 ceil(log2(eta + 1)) + 3`` queries, plus at most
    ``k`` queries at entry vertices: ``1 + (2k + 1)(2 ceil(log2(eta + 1)) + 3) + k``; 1 when ``eta = 0``."""
    k, eta = V.integer("k", k, min=0), V.integer("eta", eta, min=0)
    if eta == 0:
        return 1
    return 1 + (2 * k + 1) * (2 * math.ceil(math.log2(eta + 1)) + 3) + k


# ---------------------------------------------------------------------------------------------------------------
# Pathwidth
# ---------------------------------------------------------------------------------------------------------------
def _combine(v: int, cl: list[list[tuple[int, int | None]]]) -> list[tuple[int, int | None]]:
    """Label of the subtree rooted at ``v`` from its children's labels. A label is ``[(value, critical), ...]``:
    the first value is the subtree's pathwidth; a critical vertex ``w`` has two children of that pathwidth, and
    the rest of the label describes the subtree with ``T_w`` removed."""
    if not cl:
        return [(0, None)]
    k = max(lab[0][0] for lab in cl)
    if k == 0:
        return [(1, None)]
    top = [lab for lab in cl if lab[0][0] == k]
    if len(top) >= 3:
        return [(k + 1, None)]
    if len(top) == 2:
        if top[0][0][1] is not None or top[1][0][1] is not None:
            return [(k + 1, None)]
        return [(k, v)]
    lab = top[0]
    if lab[0][1] is None:
        return [(k, None)]
    w = lab[0][1]
    others = [m for m in cl if m is not lab]
    tail = lab[1:]
    U = _combine(v, others + ([tail] if tail else []))
    return [(k + 1, None)] if U[0][0] >= k else [(k, w)] + U


def _labels(adj: list[list[int]], root: int, inside: set[int] | None = None) -> tuple[dict, dict, list[int]]:
    """Labels of every rooted subtree of the component of ``root`` (restricted to ``inside``)."""
    parent = {root: -1}
    order = [root]
    for v in order:
        for u in adj[v]:
            if u != parent[v] and (inside is None or u in inside):
                parent[u] = v
                order.append(u)
    kids: dict[int, list[int]] = {v: [] for v in order}
    for v in order[1:]:
        kids[parent[v]].append(v)
    lab: dict[int, list] = {}
    for v in reversed(order):
        lab[v] = _combine(v, [lab[c] for c in kids[v]])
    return lab, kids, order


def pathwidth(tree: Tree) -> int:
    """Exact pathwidth of a tree (a single vertex has pathwidth 0, a path with an edge 1)."""
    if not isinstance(tree, Tree):
        raise TypeError(f"tree must be a Tree, got {type(tree).__name__}")
    return _labels(tree.adj, 0)[0][0][0][0]


def pathwidth_bruteforce(tree: Tree) -> int:
    """Vertex separation number by a DP over vertex subsets (equal to pathwidth; n <= 16)."""
    V.instance("tree", tree, Tree)
    n = tree.n
    if n > 16:
        raise ValueError(f"tree must have n <= 16 vertices (pathwidth_bruteforce enumerates subsets), got {n}")
    nb = [sum(1 << u for u in tree.adj[v]) for v in range(n)]
    full = (1 << n) - 1
    best = [math.inf] * (1 << n)
    best[0] = 0
    for S in range(1, 1 << n):
        # vertices of S with a neighbour outside S
        boundary = sum(1 for v in range(n) if S >> v & 1 and nb[v] & (full ^ S))
        m = min(best[S ^ (1 << v)] for v in range(n) if S >> v & 1)
        best[S] = max(m, boundary)
    return int(best[full])


def spine(adj: list[list[int]], root: int, inside: set[int] | None = None) -> tuple[list[int], int]:
    """A path ``P`` of the component of ``root`` whose removal leaves components of smaller pathwidth, and the
    component's pathwidth ``k``."""
    adj = V.sequence("adj", adj, min_len=1)
    root = V.index("root", root, len(adj))
    if inside is not None and root not in inside:
        raise ValueError(f"inside must contain root {root}")
    _check_tree_component(adj, root, inside)
    return _spine(adj, root, inside)


def _check_tree_component(adj: list, root: int, inside: set[int] | None) -> None:
    """The component of ``root`` (restricted to ``inside``) is a tree: integer neighbours in range, symmetric, no
    cycle (a cycle would make the labelling walk forever)."""
    n = len(adj)
    parent = {root: -1}
    order = [root]
    for v in order:
        nb = adj[v]
        if isinstance(nb, (str, bytes)) or not isinstance(nb, (Sequence, np.ndarray)):
            raise TypeError(f"adj[{v}] must be a list of neighbours, got {V.describe(nb)}")
        for u in nb:
            u = V.index(f"adj[{v}] entry", u, n)
            if inside is not None and u not in inside:
                continue
            if u == parent[v]:
                continue
            if u in parent:
                raise ValueError(f"adj must be a tree (a forest), but the component of root {root} has a cycle "
                                 f"through the edge {v}-{u}")
            if isinstance(adj[u], (Sequence, np.ndarray)) and v not in list(adj[u]):
                raise ValueError(f"adj must be symmetric: {u} is a neighbour of {v} but not the other way round")
            parent[u] = v
            order.append(u)


def _spine(adj: list[list[int]], root: int, inside: set[int] | None = None) -> tuple[list[int], int]:
    lab, kids, _ = _labels(adj, root, inside)
    k, crit = lab[root][0]

    def chain(u: int) -> list[int]:
        out = [u]
        while True:
            nxt = [c for c in kids[out[-1]] if lab[c][0][0] == k]
            if not nxt:
                return out
            out.append(nxt[0])

    if crit is None:
        if k == 0:
            return [root], 0
        return chain(root), k
    c1, c2 = [c for c in kids[crit] if lab[c][0][0] == k][:2]
    return chain(c1)[::-1] + [crit] + chain(c2), k


# ---------------------------------------------------------------------------------------------------------------
# The spine decomposition and the search with a prediction
# ---------------------------------------------------------------------------------------------------------------
@dataclass
class _Component:
    spine: list[int]
    pos: dict[int, int]  # spine vertex -> index
    attach: dict[int, int]  # every vertex of the component -> index of the spine vertex it hangs from
    k: int
    level: int
    children: dict[int, int] = field(default_factory=dict)  # off-spine vertex adjacent to spine -> child comp
    parent: int = -1  # the component this one hangs from (-1 for the whole tree)
    entry: int = -1  # the vertex of this component adjacent to the parent's spine (its only way out)
    exit_vertex: int = -1  # the parent's spine vertex that ``entry`` is adjacent to


class Decomposition:
    """The hierarchical spine decomposition of a tree, computed once: ``comps[c]`` holds a component's spine and
    every member's attachment index; ``comp_of[v]`` lists the components containing ``v``, from the whole tree
    down to the one whose spine contains ``v``."""

    def __init__(self, tree: Tree):
        if not isinstance(tree, Tree):
            raise TypeError(f"tree must be a Tree, got {type(tree).__name__}")
        self.tree = tree
        self.comps: list[_Component] = []
        self.comp_of: list[list[int]] = [[] for _ in range(tree.n)]
        adj = tree.adj
        todo = [(0, None, 0, -1, -1)]  # (a vertex, member set or None for all, level, parent comp, entry vertex)
        while todo:
            root, members, level, parent, entry = todo.pop()
            P, k = _spine(adj, root, members)  # the Tree was validated when it was built
            cid = len(self.comps)
            comp = _Component(P, {v: i for i, v in enumerate(P)}, {}, k, level)
            self.comps.append(comp)
            if parent >= 0:
                self.comps[parent].children[entry] = cid
                pc = self.comps[parent]
                comp.parent, comp.entry, comp.exit_vertex = parent, entry, pc.spine[pc.attach[entry]]
            on = set(P)
            for i, v in enumerate(P):
                comp.attach[v] = i
                self.comp_of[v].append(cid)
            for i, v in enumerate(P):
                for u in adj[v]:
                    if u in on or (members is not None and u not in members) or u in comp.attach:
                        continue
                    sub = [u]
                    comp.attach[u] = i
                    for x in sub:
                        self.comp_of[x].append(cid)
                        for y in adj[x]:
                            if y not in on and y not in comp.attach and (members is None or y in members):
                                comp.attach[y] = i
                                sub.append(y)
                    todo.append((u, set(sub), level + 1, cid, u))
        self.levels = 1 + max(c.level for c in self.comps)

    def members(self, cid: int) -> list[int]:
        """Vertices of component ``cid``."""
        return list(self.comps[cid].attach)

    def components_off_spine(self, cid: int) -> list[list[int]]:
        """Vertex lists of the components of ``comps[cid]`` minus its spine."""
        return [self.members(child) for child in self.comps[cid].children.values()]


def _spine_steps(P: list[int], j: int) -> Generator[int, int, tuple[int, int]]:
    """Doubling search along the spine ``P`` from index ``j``, as a generator: it yields the vertices to ask and is
    sent the answers (never "found": the driver stops there). Returns ``(i, u)`` when the answer at ``P[i]`` points
    off the spine, to the neighbour ``u``."""
    m = len(P)
    lo, hi = -1, m  # the index where the answers leave the spine lies strictly between lo and hi

    def kind(i: int, a: int) -> str:
        if i > 0 and a == P[i - 1]:
            return "left"
        if i + 1 < m and a == P[i + 1]:
            return "right"
        return "off"

    i = j
    a = yield P[i]
    r = kind(i, a)
    if r != "off":  # gallop from j: j+-1, j+-2, j+-4, ... while the answers point away from j
        d, step = (1 if r == "right" else -1), 1
        while r == ("right" if d > 0 else "left"):
            lo, hi = (i, hi) if d > 0 else (lo, i)
            i = min(j + step, hi - 1) if d > 0 else max(j - step, lo + 1)
            a = yield P[i]
            r = kind(i, a)
            step *= 2
    while r != "off":  # binary search inside the bracket (lo, hi)
        lo, hi = (i, hi) if r == "right" else (lo, i)
        if hi - lo <= 1:
            raise RuntimeError("inconsistent answers from the oracle")  # pragma: no cover
        i = (lo + hi) // 2
        a = yield P[i]
        r = kind(i, a)
    return i, a


def _descend_steps(dec: Decomposition, p: int, cid: int) -> Generator[int, int, None]:
    """Top-down from component ``cid``, which contains the target and ``p`` (a vertex within eta of it): search the
    spine from where ``p`` hangs, step into the component the answer points to, repeat."""
    while True:
        comp = dec.comps[cid]
        _, u = yield from _spine_steps(comp.spine, comp.attach[p])
        cid = comp.children[u]  # the target lies in the component of (component - spine) containing u
        if p not in dec.comps[cid].attach:
            p = u  # the path from p to the target enters that component through u: d(u, t) < d(p, t)


def _top_down_steps(dec: Decomposition, p: int) -> Generator[int, int, None]:
    """The top-down variant: ask ``p``, then search every level from the whole tree's spine down."""
    yield p
    yield from _descend_steps(dec, p, 0)


def _informed_top_steps(dec: Decomposition, p: int) -> Generator[int, int, None]:
    """The top-down variant that reads the prediction's own answer: on a level where the prediction hangs off the
    spine and its answer points away from the spine, the target lies in the prediction's part of the component
    (the answer's side of the tree meets the component only there), so the search steps down without a query."""
    a = yield p
    tree, p0, cid = dec.tree, p, 0
    while True:
        comp = dec.comps[cid]
        if p == p0 and p not in comp.pos and a != tree._next_hop(p, comp.spine[comp.attach[p]]):
            chain = dec.comp_of[p]
            cid = chain[chain.index(cid) + 1]
            continue
        _, u = yield from _spine_steps(comp.spine, comp.attach[p])
        cid = comp.children[u]
        if p not in dec.comps[cid].attach:
            p = u


def _from_prediction_steps(dec: Decomposition, p: int) -> Generator[int, int, None]:
    """Start in the prediction's own component (the one whose spine holds ``p``) and escalate outward.

    On a level, gallop along the spine from where ``p`` hangs. The component's ways out are the entry edges of
    itself and of the enclosing components whose entry vertex lies in it. An answer that leaves through one of them
    sends the search up to the component that edge enters. An answer into a part off the spine that holds no way
    out puts the target there: descend top-down from it. A part that holds ways out is settled by asking their
    entry vertices (each at most once in the whole search).
    """
    yield p
    chain = dec.comp_of[p]  # the components holding p, from the whole tree down to the one whose spine holds p
    lvl = len(chain) - 1
    while True:
        comp = dec.comps[chain[lvl]]
        exits = [(a.entry, a.exit_vertex, lv) for lv in range(1, lvl + 1)
                 if (a := dec.comps[chain[lv]]).entry in comp.attach]
        i, u = yield from _spine_steps(comp.spine, comp.attach[p])
        up = -1
        if u not in comp.attach:  # left the component through the entry edge (P[i], u) of some level
            up = next(lv for x, y, lv in exits if x == comp.spine[i] and y == u) - 1
        else:
            child = comp.children[u]
            if lvl + 1 < len(chain) and child == chain[lvl + 1]:  # known not to hold the target: it is outside
                up = lvl - 1
            else:
                for x, y, lv in exits:
                    if child in dec.comp_of[x] and (yield x) == y:  # the target lies beyond this way out
                        up = lv - 1
                        break
                if up < 0:
                    yield from _descend_steps(dec, u, child)
        if up < 0:
            raise RuntimeError("inconsistent answers from the oracle")  # pragma: no cover
        lvl = up


def spine_runs(dec: Decomposition, a: int, b: int) -> list[int]:
    """Lengths (in edges) of the maximal stretches of the ``a``-``b`` path that run along one spine, in path order.
    The other edges of the path step from one component's spine to another's. A galloping spine search can only save
    queries over walking on a long stretch: on stretches of one or two edges it costs what walking costs."""
    V.instance("dec", dec, Decomposition)
    t = dec.tree
    a, b = t.check_vertex(a, "a"), t.check_vertex(b, "b")
    path = [a]
    while path[-1] != b:
        path.append(t._next_hop(path[-1], b))
    home = [dec.comp_of[v][-1] for v in path]  # the component whose spine holds v
    out, cur = [], 0
    for x, y in zip(home, home[1:]):
        if x == y:
            cur += 1
        else:
            if cur:
                out.append(cur)
            cur = 0
    if cur:
        out.append(cur)
    return out


def _centroid_steps(ctree: CentroidTree) -> Generator[int, int, None]:
    c = ctree.root
    while True:
        a = yield c
        c = ctree.child[(c, a)]


def _drive(oracle: Oracle, *searches: Generator[int, int, None], head: int = 0) -> SearchResult:
    """Run searches (generators of queries) against the oracle, taking turns query by query, until one finds the
    target. Answers are shared: a vertex already asked (by any of them) is answered again for free. The first
    ``head`` paid queries are the first search's alone; then the turns go round, the second search first."""
    start = oracle.queries
    cache: dict[int, int | None] = {}
    wants = [next(g) for g in searches]
    turn = 0
    while True:
        g, v = searches[turn], wants[turn]
        while v in cache:
            v = g.send(cache[v])
        a = cache[v] = oracle.query(v)
        if a is None:
            return SearchResult(v, oracle.queries - start)
        wants[turn] = g.send(a)
        if oracle.queries - start >= head:
            turn = (turn + 1) % len(searches)


def combined_head(k: int) -> int:
    """Queries the combined search (``start="both"``) leaves to the prediction-first search alone before the
    top-down search joins in: ``2k + 2`` for a tree of pathwidth ``k``, about one query up and one down per level
    of the decomposition plus the prediction and the target, so a close prediction costs what it costs alone."""
    k = V.integer("k", k, min=0)
    return 2 * k + 2


def combined_query_bound(k: int, eta: int) -> int:
    """A bound for the combined search from ``k`` and ``eta`` alone: :func:`combined_bound` with the proven bounds
    of its two halves, ``min(max(h, 2 B_first - h), h + 2 B_top - 1)`` with ``h`` = :func:`combined_head`,
    ``B_first`` = :func:`query_bound_from_prediction` and ``B_top`` = :func:`query_bound`; 1 when ``eta = 0``."""
    k, eta = V.integer("k", k, min=0), V.integer("eta", eta, min=0)
    if eta == 0:
        return 1
    h = combined_head(k)
    return min(max(h, 2 * query_bound_from_prediction(k, eta) - h), h + 2 * query_bound(k, eta) - 1)


def combined_bound(first: int, top: int, head: int) -> int:
    """The most queries the combined search can need, given what the prediction-first search (``first``) and the
    top-down search (``top``) need alone: ``first`` if it is within the ``head``; otherwise the turns go round
    (top-down first, shared answers), so ``min(2 first - head, head + 2 top - 1)``."""
    first, top = V.integer("first", first, min=1), V.integer("top", top, min=1)
    head = V.integer("head", head, min=0)
    if first <= head:
        return first
    return min(2 * first - head, head + 2 * top - 1)


def search_with_prediction(tree: Tree, dec: Decomposition, oracle: Oracle, prediction: int,
                           start: str = "prediction") -> SearchResult:
    """Find the oracle's target from a predicted vertex at distance ``eta`` from it.

    ``start="prediction"`` (default) begins in the prediction's own component and escalates outward, within
    :func:`query_bound_from_prediction` queries; ``start="top"`` is the top-down variant (from the whole tree's
    spine down), within :func:`query_bound`; ``start="both"`` is the combined search for both regimes: the
    prediction-first search alone for :func:`combined_head` queries, then the two take turns, sharing answers,
    within :func:`combined_bound` of their own counts; ``start="informed"`` is the top-down variant that reads
    the prediction's answer and skips every level where it points away from the spine (within
    :func:`query_bound`). All ask the prediction first: ``eta = 0`` costs one query."""
    V.instance("tree", tree, Tree)
    V.instance("dec", dec, Decomposition)
    V.instance("oracle", oracle, Oracle)
    p = tree.check_vertex(prediction, "prediction")
    V.one_of("start", start, START_VARIANTS)
    if dec.tree is not tree or oracle.tree is not tree:
        raise ValueError("dec and oracle must be built on this tree")
    if start == "both":
        head = combined_head(dec.comps[0].k)
        return _drive(oracle, _from_prediction_steps(dec, p), _top_down_steps(dec, p), head=head)
    steps = {"prediction": _from_prediction_steps, "top": _top_down_steps,
             "informed": _informed_top_steps}[start](dec, p)
    return _drive(oracle, steps)


START_VARIANTS = ("prediction", "top", "both", "informed")


def worst_case(tree: Tree, dec: Decomposition, prediction: int, eta: int, rng: np.random.Generator,
               ring_cap: int | None, start: str = "prediction", dist: np.ndarray | None = None) -> int | None:
    """The most queries :func:`search_with_prediction` needs over every target at distance exactly ``eta`` from
    ``prediction`` (a sample of ``ring_cap`` of them, drawn with ``rng``, when the ring is larger; the full ring
    when ``ring_cap`` is None); None when no vertex lies at that distance. ``dist``: the distances from the
    prediction, if already computed."""
    eta = V.integer("eta", eta, min=0)
    if ring_cap is not None:
        ring_cap = V.integer("ring_cap", ring_cap, min=1)
    if dist is None:
        dist = tree.distances(prediction)
    elif np.shape(dist) != (tree.n,):
        raise ValueError(f"dist must hold one distance per vertex ({tree.n}), got shape {np.shape(dist)}")
    ring = np.flatnonzero(np.asarray(dist) == eta)
    if len(ring) == 0:
        return None
    if ring_cap is not None and len(ring) > ring_cap:
        ring = rng.choice(ring, ring_cap, replace=False)
    return max(search_with_prediction(tree, dec, Oracle(tree, int(v)), prediction, start=start).queries
               for v in ring)


SWEEP_METHODS = ("ours", "prediction-first", "top-down", "informed", "centroid", "walk", "interleaved", "ball")


def query_sweep(tree: Tree, dec: Decomposition, ctree: CentroidTree, etas: Sequence[int], n_targets: int,
                rng: np.random.Generator) -> dict[int, dict[str, float]]:
    """Mean queries of every search in :data:`SWEEP_METHODS` at each prediction error ``eta`` ("ours" is the
    combined search, ``start="both"``): ``n_targets`` uniformly random targets, and for each target and ``eta``
    a prediction drawn uniformly at distance exactly ``eta`` (an ``eta`` too far for a target is skipped for it;
    an ``eta`` with no target is left out). Every search must find its target (an AssertionError otherwise)."""
    n_targets = V.integer("n_targets", n_targets, min=1)
    etas = [V.integer("eta", eta, min=0) for eta in etas]
    q: dict[int, dict[str, list[int]]] = {eta: {m: [] for m in SWEEP_METHODS} for eta in etas}
    for target in rng.integers(0, tree.n, n_targets):
        target = int(target)
        dist = tree.distances(target)
        for eta in etas:
            ring = np.flatnonzero(dist == eta)
            if len(ring) == 0:
                continue
            p = int(ring[rng.integers(len(ring))])
            runs = {"ours": search_with_prediction(tree, dec, Oracle(tree, target), p, start="both"),
                    "prediction-first": search_with_prediction(tree, dec, Oracle(tree, target), p),
                    "top-down": search_with_prediction(tree, dec, Oracle(tree, target), p, start="top"),
                    "informed": search_with_prediction(tree, dec, Oracle(tree, target), p, start="informed"),
                    "centroid": centroid_search(tree, ctree, Oracle(tree, target)),
                    "walk": walk_search(tree, Oracle(tree, target), p),
                    "interleaved": interleaved_search(tree, dec, ctree, Oracle(tree, target), p),
                    "ball": ball_search(tree, Oracle(tree, target), p)}
            for m, r in runs.items():
                assert r.found == target, f"{m} did not find the target"
                q[eta][m].append(r.queries)
    return {eta: {m: float(np.mean(v)) for m, v in d.items()} for eta, d in q.items() if d["ours"]}


def measure_tree(tree: Tree, etas: Sequence[int], n_targets: int, n_preds: int, rng: np.random.Generator
                 ) -> dict:
    """Everything the chapter measures on one large tree: ``n``, pathwidth ``pw``, ``diam`` (diameter), ``sweep``
    (:func:`query_sweep`: mean queries of every method at each ``eta``) and ``worst[start][eta]`` for every start
    in :data:`START_VARIANTS` and ``"ball"`` (:func:`ball_search`): the worst case over the **full** ring of
    targets at distance ``eta`` from each of
    ``n_preds`` random predictions (:func:`worst_case`), averaged over the predictions (NaN where a prediction has
    no vertex that far; ``n_preds = 0`` skips the worst cases)."""
    V.instance("tree", tree, Tree)
    n_preds = V.integer("n_preds", n_preds, min=0)
    dec, ctree = Decomposition(tree), CentroidTree(tree)
    sweep = query_sweep(tree, dec, ctree, etas, n_targets, rng)
    worst: dict[str, dict[int, list[float]]] = {start: {} for start in (*START_VARIANTS, "ball")}
    for p in rng.integers(0, tree.n, n_preds):
        dist = tree.distances(int(p))
        for start in START_VARIANTS:
            for eta in etas:
                w = worst_case(tree, dec, int(p), eta, rng, None, start, dist=dist)
                worst[start].setdefault(int(eta), []).append(np.nan if w is None else float(w))
        for eta in etas:  # the structure-free ball search, over the same full rings
            ring = np.flatnonzero(dist == eta)
            w = max((ball_search(tree, Oracle(tree, int(v)), int(p)).queries for v in ring), default=None)
            worst["ball"].setdefault(int(eta), []).append(np.nan if w is None else float(w))
    return dict(n=tree.n, pw=dec.comps[0].k, diam=diameter(tree), sweep=sweep,
                worst={st: {q: float(np.mean(v)) for q, v in d.items()} for st, d in worst.items()})


def best_baseline_gain(sweep: dict[int, dict[str, float]]) -> tuple[float, int]:
    """``(max over eta of min(walk, centroid) / ours, the eta where it is reached)`` for a :func:`query_sweep`
    result: how much fewer queries the search with a prediction needs than the better of the two baselines at
    the prediction error where it gains most (> 1: it beats both there)."""
    if not sweep:
        raise ValueError("sweep is empty")
    gains = {eta: min(v["walk"], v["centroid"]) / v["ours"] for eta, v in sweep.items()}
    eta = max(gains, key=gains.get)
    return float(gains[eta]), int(eta)


def fit_shape(etas: Sequence[float], queries: Sequence[float]) -> tuple[float, float]:
    """Squared errors ``(log fit, linear fit)`` of least-squares lines ``a + b log2(eta+1)`` and ``a + b eta``
    through the points: the smaller names the shape of a query curve."""
    e, y = np.asarray(etas, dtype=float), np.asarray(queries, dtype=float)
    if e.ndim != 1 or e.shape != y.shape or len(e) < 3:
        raise ValueError(f"etas and queries must be 1-d of equal length >= 3, got {e.shape} and {y.shape}")
    if np.any(e < 0) or not (np.all(np.isfinite(e)) and np.all(np.isfinite(y))):
        raise ValueError("etas must be finite and >= 0, queries finite")
    out = []
    for x in (np.log2(e + 1), e):
        c = np.polyfit(x, y, 1)
        out.append(float(np.sum((np.polyval(c, x) - y) ** 2)))
    return out[0], out[1]


def interleaved_search(tree: Tree, dec: Decomposition, ctree: CentroidTree, oracle: Oracle,
                       prediction: int) -> SearchResult:
    """The robust strategy: alternate queries of :func:`search_with_prediction` and :func:`centroid_search`,
    sharing answers, until either finds the target: at most ``2 min(ours, centroid)`` queries."""
    V.instance("tree", tree, Tree)
    V.instance("dec", dec, Decomposition)
    V.instance("ctree", ctree, CentroidTree)
    V.instance("oracle", oracle, Oracle)
    p = tree.check_vertex(prediction, "prediction")
    if dec.tree is not tree or ctree.tree is not tree or oracle.tree is not tree:
        raise ValueError("dec, ctree and oracle must be built on this tree")
    return _drive(oracle, _from_prediction_steps(dec, p), _centroid_steps(ctree))


class CentroidTree:
    """Centroid decomposition, precomputed once: ``child[(c, u)]`` is the centroid of the component of
    ``C - c`` that contains the neighbour ``u`` of centroid ``c``."""

    def __init__(self, tree: Tree):
        if not isinstance(tree, Tree):
            raise TypeError(f"tree must be a Tree, got {type(tree).__name__}")
        self.tree = tree
        self.child: dict[tuple[int, int], int] = {}
        removed = [False] * tree.n
        adj = tree.adj
        self.root = -1
        stack = [(0, -1, -1)]  # (a vertex of the component, parent centroid, neighbour of parent centroid)
        while stack:
            start, pc, pu = stack.pop()
            # the component's vertices, BFS order with parents
            order, par = [start], {start: -1}
            for v in order:
                for u in adj[v]:
                    if not removed[u] and u != par[v]:
                        par[u] = v
                        order.append(u)
            size = {v: 1 for v in order}
            for v in reversed(order[1:]):
                size[par[v]] += size[v]
            total = len(order)
            c = start
            while True:  # walk towards the heavy child until no part exceeds total / 2
                heavy = [u for u in adj[c] if not removed[u] and u != par[c] and size[u] > total // 2]
                if not heavy:
                    break
                c = heavy[0]
            if pc < 0:
                self.root = c
            else:
                self.child[(pc, pu)] = c
            removed[c] = True
            for u in adj[c]:
                if not removed[u]:
                    stack.append((u, c, u))


def centroid_search(tree: Tree, ctree: CentroidTree, oracle: Oracle) -> SearchResult:
    """The classical search without prediction: query the centroid of the remaining component (<= log2 n + 1)."""
    V.instance("tree", tree, Tree)
    V.instance("ctree", ctree, CentroidTree)
    V.instance("oracle", oracle, Oracle)
    if ctree.tree is not tree or oracle.tree is not tree:
        raise ValueError("ctree and oracle must be built on this tree")
    return _drive(oracle, _centroid_steps(ctree))


def walk_search(tree: Tree, oracle: Oracle, prediction: int) -> SearchResult:
    """Walk from the prediction along the answers: ``eta + 1`` queries."""
    V.instance("tree", tree, Tree)
    V.instance("oracle", oracle, Oracle)
    if oracle.tree is not tree:
        raise ValueError("oracle must be built on this tree")
    v = tree.check_vertex(prediction, "prediction")
    start = oracle.queries
    while (a := oracle.query(v)) is not None:
        v = a
    return SearchResult(v, oracle.queries - start)


def _tin_arrays(tree: Tree) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``tin``, ``tout`` and ``parent`` of the tree as numpy arrays (built once per tree)."""
    if getattr(tree, "_tin_cache", None) is None:
        tree._tin_cache = (np.asarray(tree.tin), np.asarray(tree.tout), np.asarray(tree.parent))
    return tree._tin_cache


def _side_mask(arrs: tuple[np.ndarray, np.ndarray, np.ndarray], S: np.ndarray, c: int, a: int) -> np.ndarray:
    """Which vertices of ``S`` lie in the component of ``T - c`` that holds the neighbour ``a`` of ``c``."""
    tin, tout, parent = arrs
    t = tin[S]
    if a == parent[c]:  # the target is outside c's subtree
        return ~((tin[c] <= t) & (t < tout[c]))
    return (tin[a] <= t) & (t < tout[a])


def _subtree_centroid(arrs: tuple[np.ndarray, np.ndarray, np.ndarray], S: np.ndarray) -> int:
    """A centroid of the connected vertex set ``S``: the deepest vertex whose part of ``S`` below it (rooted at 0)
    holds more than half of ``S`` (every component left by removing it has at most ``|S|/2`` vertices; of two
    centroids, the upper one)."""
    tin, tout, _ = arrs
    order = np.sort(tin[S])
    size = np.searchsorted(order, tout[S]) - np.searchsorted(order, tin[S])
    heavy = np.flatnonzero(2 * size > len(S))
    return int(S[heavy[np.argmin(size[heavy])]])


def ball_search(tree: Tree, oracle: Oracle, prediction: int) -> SearchResult:
    """A prediction-aware search that knows nothing of pathwidth: ask the prediction ``p``; then, for ``r = 1, 2,
    4, ...``, run centroid search on the vertices within distance ``r`` of ``p`` that every answer so far allows
    (a connected set), until it finds the target or the set is empty (the target is farther), and double ``r``.
    Each phase costs about ``log2`` of the ball's size, so a close prediction is cheap and a far one costs about
    ``log2(eta)`` phases of up to ``log2 |ball|`` queries each."""
    V.instance("tree", tree, Tree)
    V.instance("oracle", oracle, Oracle)
    if oracle.tree is not tree:
        raise ValueError("oracle must be built on this tree")
    p = tree.check_vertex(prediction, "prediction")
    arrs = _tin_arrays(tree)
    start = oracle.queries
    a = oracle.query(p)
    if a is None:
        return SearchResult(p, oracle.queries - start)
    answers = [(p, a)]
    ball, frontier, seen, reached, r = [p], [p], {p}, 0, 1
    while True:
        while reached < r and frontier:  # grow the ball layer by layer to radius r
            nxt = [u for v in frontier for u in tree.adj[v] if u not in seen and not seen.add(u)]
            ball.extend(nxt)
            frontier, reached = nxt, reached + 1
        S = np.asarray(ball)
        for c, a in answers:
            S = S[_side_mask(arrs, S, c, a)]
        if len(S) == 0 and not frontier:
            raise AssertionError("the whole tree was searched without finding the target")
        while len(S):
            c = _subtree_centroid(arrs, S)
            a = oracle.query(c)
            if a is None:
                return SearchResult(c, oracle.queries - start)
            answers.append((c, a))
            S = S[_side_mask(arrs, S, c, a)]
        r *= 2


def doubling_search_path(n: int, target: int, prediction: int) -> SearchResult:
    """Doubling binary search in a sorted array of length ``n`` (a path): query the prediction, gallop with steps
    1, 2, 4, ... in the direction of the target, then binary-search the bracket."""
    n = V.integer("n", n, min=1)
    target, prediction = V.index("target", target, n), V.index("prediction", prediction, n)
    q = 0

    def cmp(i: int) -> int:
        nonlocal q
        q += 1
        return (target > i) - (target < i)

    s = cmp(prediction)
    if s == 0:
        return SearchResult(prediction, q)
    lo, hi = (prediction, n) if s > 0 else (-1, prediction)
    step = 1
    while True:
        i = prediction + s * step
        if not lo < i < hi:
            break
        c = cmp(i)
        if c == 0:
            return SearchResult(i, q)
        if c == s:
            lo, hi = (i, hi) if s > 0 else (lo, i)
            step *= 2
        else:
            lo, hi = (lo, i) if s > 0 else (i, hi)
            break
    while True:
        i = (lo + hi) // 2
        c = cmp(i)
        if c == 0:
            return SearchResult(i, q)
        lo, hi = (i, hi) if c > 0 else (lo, i)


# ---------------------------------------------------------------------------------------------------------------
# Exact minimax: the fewest queries any algorithm needs in the worst case
# ---------------------------------------------------------------------------------------------------------------
def minimax_queries(tree: Tree, candidates: Iterable[int]) -> int:
    """The exact minimax number of queries to find a target known to lie in ``candidates``, over every adaptive
    algorithm (the last query is the one answered "found"). A brute-force recursion over candidate sets, memoised;
    for small trees (``n <= 24``)."""
    V.instance("tree", tree, Tree)
    cand = sorted({tree.check_vertex(v, "candidates[...]") for v in candidates})
    if not cand:
        raise ValueError("candidates must name at least one vertex, got none")
    if tree.n > 24:
        raise ValueError(f"tree must have n <= 24 vertices for the brute-force minimax, got {tree.n}")
    n = tree.n
    # side[v][u] = bitmask of vertices in the component of T - v containing the neighbour u
    side = []
    for v in range(n):
        parts = {}
        for u in tree.adj[v]:
            mask, stack, seen = 0, [u], {v, u}
            while stack:
                x = stack.pop()
                mask |= 1 << x
                for y in tree.adj[x]:
                    if y not in seen:
                        seen.add(y)
                        stack.append(y)
            parts[u] = mask
        side.append(list(parts.values()))
    memo: dict[int, int] = {}

    def f(S: int) -> int:
        if S & (S - 1) == 0:
            return 1  # one candidate left: ask it
        if S in memo:
            return memo[S]
        best = math.inf
        for v in range(n):
            worst = 0
            split = False
            for mask in side[v]:
                sub = S & mask
                if sub == S:
                    break  # the answer could be "all of them are that way": no progress from v
                if sub:
                    split = True
                    worst = max(worst, f(sub))
                    if worst + 1 >= best:
                        break
            else:
                if split or S >> v & 1:
                    best = min(best, 1 + worst)
        memo[S] = best
        return best

    return int(f(sum(1 << v for v in cand)))


def binary_minimax(eta: int) -> int:
    """The exact minimax number of queries on a complete binary tree with the prediction at the root and the target
    anywhere at depth ``eta`` (every such vertex is at distance ``eta``): a lower bound for every algorithm, ours
    included, on every complete binary tree of height ``>= eta``.

    Only the Steiner tree of the remaining candidates matters, and a vertex with one child there is never better
    to ask than its nearest descendant with two (or a candidate), so a state is an unordered full binary tree shape
    (``()`` a candidate leaf, ``(a, b)`` a branching): asking a leaf answers found / the rest; asking a branching
    answers its left part / its right part / the rest."""
    eta = V.integer("eta", eta, min=0, max=7)

    def node(a, b):
        return (a, b) if a <= b else (b, a)

    def without(s, path):  # the shape with the subtree at ``path`` (a tuple of 0/1 steps) removed, compressed
        if len(path) == 1:
            return s[1 - path[0]]
        kids = list(s)
        kids[path[0]] = without(s[path[0]], path[1:])
        return node(*kids)

    def nodes(s, path=()):
        yield path, s
        if s:
            yield from nodes(s[0], path + (0,))
            yield from nodes(s[1], path + (1,))

    @functools.cache
    def height(s) -> int:
        return 0 if s == () else 1 + max(height(s[0]), height(s[1]))

    @functools.cache
    def f(s) -> int:
        if s == ():
            return 1
        lower = max(f(s[0]), f(s[1]))  # fewer candidates are never harder
        best = height(s) + 1  # asking down from the top always works
        for path, sub in nodes(s):
            if best <= lower:
                break
            parts = [sub[0], sub[1]] if sub else []
            if path:
                parts.append(without(s, path))
            worst = 0
            for part in sorted(parts, key=height, reverse=True):
                worst = max(worst, f(part))
                if 1 + worst >= best:
                    break
            best = min(best, 1 + worst)
        return best

    full = ()
    for _ in range(eta):
        full = (full, full)
    return int(f(full))


def binary_height_at(tree: Tree, p: int) -> int:
    """The height of the largest complete binary tree that the tree contains rooted at ``p`` (edges pointing away
    from ``p``). For every ``eta`` up to it, the targets at depth ``eta`` of that subtree are at distance ``eta``
    from ``p``, so by :func:`binary_minimax` every algorithm needs ``eta + 1`` queries on one of them."""
    V.instance("tree", tree, Tree)
    p = tree.check_vertex(p, "p")
    par, order = {p: -1}, [p]
    for v in order:
        for u in tree.adj[v]:
            if u != par[v]:
                par[u] = v
                order.append(u)
    h: dict[int, int] = {}
    for v in reversed(order):
        hs = sorted((h[u] for u in tree.adj[v] if u != par[v]), reverse=True)
        h[v] = 1 + hs[1] if len(hs) >= 2 else 0
    return h[p]


# ---------------------------------------------------------------------------------------------------------------
# Tree families and real trees
# ---------------------------------------------------------------------------------------------------------------
def path_tree(n: int) -> Tree:
    """The path 0 - 1 - ... - n-1."""
    n = V.integer("n", n, min=1)
    return Tree(n, [(i, i + 1) for i in range(n - 1)])


def star_tree(n: int) -> Tree:
    """Vertex 0 joined to each of 1..n-1."""
    n = V.integer("n", n, min=1)
    return Tree(n, [(0, i) for i in range(1, n)])


def caterpillar_tree(spine_len: int, legs: int) -> Tree:
    """A path of ``spine_len`` vertices, each with ``legs`` pendant leaves (pathwidth 1)."""
    spine_len, legs = V.integer("spine_len", spine_len, min=1), V.integer("legs", legs, min=0)
    edges = [(i, i + 1) for i in range(spine_len - 1)]
    n = spine_len
    for i in range(spine_len):
        for _ in range(legs):
            edges.append((i, n))
            n += 1
    return Tree(n, edges)


def complete_tree(arity: int, height: int) -> Tree:
    """Complete ``arity``-ary tree of the given height (height 0 = one vertex); vertex 0 is the root."""
    arity, height = V.integer("arity", arity, min=1), V.integer("height", height, min=0)
    if (arity ** (height + 1) if arity > 1 else height + 1) > 10**8:
        raise ValueError(f"arity={arity}, height={height} gives more than 1e8 vertices; lower height")
    edges, frontier, n = [], [0], 1
    for _ in range(height):
        nxt = []
        for v in frontier:
            for _ in range(arity):
                edges.append((v, n))
                nxt.append(n)
                n += 1
        frontier = nxt
    return Tree(n, edges)


def random_tree(n: int, seed: int = 0) -> Tree:
    """A uniformly random labelled tree (random Pruefer sequence)."""
    import networkx as nx

    n, seed = V.integer("n", n, min=1), V.seed("seed", seed)
    if n < 2:
        return Tree(1, [])
    rng = np.random.default_rng(seed)
    return Tree(n, nx.from_prufer_sequence(rng.integers(0, n, n - 2).tolist()).edges)


def ast_tree(source: str) -> Tree:
    """The abstract syntax tree of Python ``source``; vertices numbered by a counter (``id()`` would merge the
    shared ``Load``/``Store`` singletons into a DAG), ``expr_context`` nodes skipped."""
    V.instance("source", source, str)
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        raise ValueError(f"source must be valid Python, got a syntax error at line {e.lineno}: {e.msg}") from None
    edges, names = [], []
    stack = [(tree, -1)]
    while stack:
        node, par = stack.pop()
        v = len(names)
        names.append(type(node).__name__)
        if par >= 0:
            edges.append((par, v))
        for ch in reversed(list(ast.iter_child_nodes(node))):
            if not isinstance(ch, ast.expr_context):
                stack.append((ch, v))
    return Tree(len(names), edges, names)


def directory_tree(root: str, skip: Sequence[str] = ("__pycache__", "test", "tests", "site-packages", "idlelib")
                   ) -> Tree:
    """Directories and files under ``root`` (sorted, symlinks not followed, names in ``skip`` left out)."""
    V.existing_dir("root", root)
    root = os.fspath(root)
    skip = V.sequence("skip", skip, of=lambda name, x: V.instance(name, x, str))
    names, edges = [root], []
    stack = [(root, 0)]
    while stack:
        path, v = stack.pop()
        try:
            entries = sorted(os.scandir(path), key=lambda e: e.name)
        except OSError:
            continue
        for e in entries:
            if e.name in skip or e.is_symlink():
                continue
            u = len(names)
            names.append(os.path.relpath(e.path, root))
            edges.append((v, u))
            if e.is_dir(follow_symlinks=False):
                stack.append((e.path, u))
    return Tree(len(names), edges, names)


def exception_tree() -> Tree:
    """The built-in exception hierarchy (``BaseException`` and its subclasses among the builtins), as a tree by
    first parent."""
    import builtins

    classes = list({c for c in vars(builtins).values() if isinstance(c, type) and issubclass(c, BaseException)})
    names = {c: c.__name__ for c in classes}
    order = sorted(classes, key=lambda c: (len(c.__mro__), c.__name__))
    idx = {c: i for i, c in enumerate(order)}
    edges = []
    for c in order[1:]:
        parent = next(b for b in c.__mro__[1:] if b in idx)
        edges.append((idx[parent], idx[c]))
    return Tree(len(order), edges, [names[c] for c in order])


def dendrogram_tree(X: np.ndarray, method: str = "ward") -> Tree:
    """The hierarchical-clustering dendrogram of the rows of ``X`` (scipy ``linkage``): ``2m - 1`` vertices for
    ``m`` rows, leaves ``0..m-1``, merge ``i`` is vertex ``m + i``; every internal vertex has two children."""
    from scipy.cluster.hierarchy import linkage

    X = V.array("X", X, ndim=2)
    if X.shape[0] < 2:
        raise ValueError(f"X must have at least 2 rows to cluster, got {X.shape[0]}")
    V.one_of("method", method, ("ward", "average", "complete", "single"))
    Z = linkage(X, method=method)
    m = X.shape[0]
    edges = [(m + i, int(c)) for i, row in enumerate(Z) for c in row[:2]]
    return Tree(2 * m - 1, edges)


def grid_mst_tree(rows: int, cols: int, seed: int = 0) -> Tree:
    """A road-like tree: the minimum spanning tree of a ``rows x cols`` grid graph with i.i.d. uniform edge
    weights (maximum degree 4)."""
    import networkx as nx

    rows, cols = V.integer("rows", rows, min=1), V.integer("cols", cols, min=1)
    seed = V.seed("seed", seed)
    g = nx.grid_2d_graph(rows, cols)
    rng = np.random.default_rng(seed)
    for (a, b), w in zip(g.edges, rng.random(g.number_of_edges())):
        g.edges[a, b]["weight"] = float(w)
    mst = nx.minimum_spanning_tree(g)
    idx = {(r, c): r * cols + c for r in range(rows) for c in range(cols)}
    return Tree(rows * cols, [(idx[a], idx[b]) for a, b in mst.edges])


def _grid_mst(weights_right: np.ndarray, weights_down: np.ndarray) -> Tree:
    """The minimum spanning tree of a ``rows x cols`` grid graph (vertex ``r * cols + c``) with the given weights of
    the edges to the right (``rows x (cols - 1)``) and down (``(rows - 1) x cols``); ties broken by edge order."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import minimum_spanning_tree

    rows, cols = weights_down.shape[0] + 1, weights_right.shape[1] + 1
    ids = np.arange(rows * cols).reshape(rows, cols)
    a = np.r_[ids[:, :-1].ravel(), ids[:-1, :].ravel()]
    b = np.r_[ids[:, 1:].ravel(), ids[1:, :].ravel()]
    w = np.r_[weights_right.ravel(), weights_down.ravel()].astype(float)
    scale = max(1.0, float(np.abs(w).max()))
    # shifted above 0 (scipy drops zero entries) and made distinct by a tie-break far below any weight difference
    w = 1.0 + (w - w.min()) / scale + np.arange(len(w)) * (1e-9 / max(1, len(w)))
    mst = minimum_spanning_tree(coo_matrix((w, (a, b)), shape=(rows * cols, rows * cols))).tocoo()
    return Tree(rows * cols, sorted(zip(mst.row.tolist(), mst.col.tolist())))


def corridor_tree(rows: int, cols: int, seed: int = 0) -> Tree:
    """A long road-like tree: the minimum spanning tree of a ``rows x cols`` grid with i.i.d. uniform edge weights
    (pathwidth at most ``rows``). The same tree family as :func:`grid_mst_tree`, built with scipy (fast for
    ``10^5`` vertices); vertex ``r * cols + c``."""
    rows, cols = V.integer("rows", rows, min=1), V.integer("cols", cols, min=2)
    rng = np.random.default_rng(V.seed("seed", seed))
    if rows == 1:
        return path_tree(cols)
    return _grid_mst(rng.random((rows, cols - 1)), rng.random((rows - 1, cols)))


def image_strip_tree(image: np.ndarray, band: int, length: int, offset: int = 0) -> Tree:
    """A road-like tree from a photograph: the pixels of a strip ``band`` rows high that snakes through the image
    (left to right along rows ``0..band-1``, back along the next ``band`` rows, ...), ``length`` of its columns
    from column ``offset`` on, as a ``band x length`` grid graph whose edge weights are the colour differences of
    the two pixels; the tree is its minimum spanning tree (the graph-based segmentation of Felzenszwalb &
    Huttenlocher cuts exactly this tree). Pathwidth at most ``band``; vertex ``r * length + c``."""
    img = V.array("image", image)
    if img.ndim == 2:
        img = img[:, :, None]
    if img.ndim != 3 or not np.all(np.isfinite(img)):
        raise ValueError(f"image must be a finite H x W (x channels) array, got shape {np.shape(image)}")
    H, W, _ = img.shape
    band = V.integer("band", band, min=2, max=H)
    length, offset = V.integer("length", length, min=2), V.integer("offset", offset, min=0)
    total = (H // band) * W
    if offset + length > total:
        raise ValueError(f"offset + length must be at most the strip's {total} columns (band {band} of a "
                         f"{H} x {W} image), got {offset} + {length}")
    img = img.astype(float)
    cols = []
    for j in range(offset, offset + length):
        b, c = divmod(j, W)
        c = c if b % 2 == 0 else W - 1 - c
        cols.append(img[b * band:(b + 1) * band, c])
    strip = np.stack(cols, axis=1)  # band x length x channels
    right = np.linalg.norm(strip[:, 1:] - strip[:, :-1], axis=2)
    down = np.linalg.norm(strip[1:] - strip[:-1], axis=2)
    return _grid_mst(right, down)


def single_linkage_tree(X: np.ndarray, n_neighbors: int = 10) -> Tree:
    """The single-linkage dendrogram of the rows of ``X`` (``2m - 1`` vertices, leaves ``0..m-1``), from the minimum
    spanning tree of the ``n_neighbors``-nearest-neighbour graph (exact single linkage whenever that graph holds a
    Euclidean MST, as it does for points in general position and enough neighbours). Scales to ``10^5`` points,
    where scipy's ``linkage`` needs the full distance matrix. Raises ValueError if the graph is disconnected."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components, minimum_spanning_tree
    from sklearn.neighbors import NearestNeighbors

    X = V.array("X", X, ndim=2)
    m = X.shape[0]
    n_neighbors = V.integer("n_neighbors", n_neighbors, min=1)
    if m < 2 or not np.all(np.isfinite(X)):
        raise ValueError(f"X must hold at least 2 finite rows, got shape {X.shape}")
    k = min(n_neighbors, m - 1)
    d, idx = NearestNeighbors(n_neighbors=k + 1).fit(X).kneighbors(X)
    rows = np.repeat(np.arange(m), k)
    g = coo_matrix((d[:, 1:].ravel() + 1e-12, (rows, idx[:, 1:].ravel())), shape=(m, m)).tocsr()
    if connected_components(g, directed=False)[0] > 1:
        raise ValueError(f"the {k}-nearest-neighbour graph of X is disconnected: raise n_neighbors")
    mst = minimum_spanning_tree(g).tocoo()
    parent, node, edges, nxt = list(range(m)), list(range(m)), [], m

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for e in np.lexsort((mst.col, mst.row, mst.data)):  # merges by increasing distance
        a, b = find(int(mst.row[e])), find(int(mst.col[e]))
        edges += [(nxt, node[a]), (nxt, node[b])]
        parent[b], node[a] = a, nxt
        nxt += 1
    return Tree(nxt, edges)


def diameter(tree: Tree) -> int:
    """The number of edges on a longest path (two breadth-first searches)."""
    V.instance("tree", tree, Tree)
    far = int(np.argmax(tree.distances(0)))
    return int(tree.distances(far).max())


def neighbor_joining_tree(D: np.ndarray) -> Tree:
    """A phylogeny-shaped tree: neighbour joining (Saitou & Nei 1987) on a symmetric distance matrix of ``m >= 3``
    taxa; leaves ``0..m-1``, ``m - 2`` internal vertices of degree 3 (``2m - 2`` vertices)."""
    D = V.array("D", D, ndim=2)
    m = D.shape[0]
    if m < 3 or D.shape[1] != m:
        raise ValueError(f"D must be a square distance matrix of at least 3 taxa, got shape {D.shape}")
    if not np.allclose(D, D.T) or not np.all(np.isfinite(D)):
        raise ValueError("D must be symmetric and finite")
    D = D.astype(float).copy()
    active = list(range(m))  # tree vertex of each row of D
    edges, nxt = [], m
    while len(active) > 3:
        r = len(active)
        S = D.sum(1)
        Q = (r - 2) * D - S[:, None] - S[None, :]
        np.fill_diagonal(Q, np.inf)
        i, j = np.unravel_index(int(np.argmin(Q)), Q.shape)
        u = nxt
        nxt += 1
        edges += [(u, active[i]), (u, active[j])]
        du = 0.5 * (D[i] + D[j] - D[i, j])
        keep = [x for x in range(r) if x not in (i, j)]
        D = np.vstack([np.hstack([D[np.ix_(keep, keep)], du[keep, None]]), np.append(du[keep], 0.0)])
        active = [active[x] for x in keep] + [u]
    u = nxt
    edges += [(u, a) for a in active]
    return Tree(nxt + 1, edges)


def bfs_tree(g, root=None) -> Tree:
    """The breadth-first-search tree of a connected networkx graph from ``root`` (default: a vertex of largest
    degree); names kept as strings."""
    import networkx as nx

    V.instance("g", g, nx.Graph)
    if g.number_of_nodes() == 0 or not nx.is_connected(g.to_undirected()):
        raise ValueError("g must be a non-empty connected graph")
    if root is None:
        root = max(g.degree, key=lambda x: x[1])[0]
    elif root not in g:
        raise ValueError(f"root must be a node of g, got {V.describe(root)}")
    t = nx.bfs_tree(g.to_undirected(), root).to_undirected()
    return Tree.from_networkx(t)


def save_edges(tree: Tree, path: str) -> None:
    """Write ``n`` then one ``a b`` edge per line (gzip if the name ends in .gz)."""
    import gzip

    V.instance("tree", tree, Tree)
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or os.PathLike, got {V.describe(path)}")
    path = os.fspath(path)
    text = f"{tree.n}\n" + "".join(f"{a} {b}\n" for a, b in tree.edges)
    if path.endswith(".gz"):  # mtime 0: the same tree gives the same bytes
        with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as f:
            f.write(text.encode())
    else:
        with open(path, "w") as f:
            f.write(text)


def load_edges(path: str) -> Tree:
    """Read a tree written by :func:`save_edges`: ``n`` on the first line, then one ``a b`` edge per line.

    A missing, empty, malformed or (for ``.gz``) non-gzip file raises ValueError naming the file and the line."""
    import gzip

    path = os.fspath(V.existing_file("path", path))
    opener = gzip.open if path.endswith(".gz") else open
    form = "a vertex count n on line 1, then one 'a b' edge per line"
    edges = []
    try:
        with opener(path, "rt") as f:
            first = f.readline()
            if not first.strip():
                raise ValueError(f"path {path!r}: line 1 is empty; expected {form}")
            try:
                n = int(first)
            except ValueError:
                raise ValueError(f"path {path!r}: line 1 must be the vertex count n, got {first.strip()[:40]!r}") from None
            for lineno, line in enumerate(f, start=2):
                if not line.strip():
                    continue
                parts = line.split()
                try:
                    if len(parts) != 2:
                        raise ValueError
                    edges.append((int(parts[0]), int(parts[1])))
                except ValueError:
                    raise ValueError(f"path {path!r}: line {lineno} must be an edge 'a b' of two ints, "
                                     f"got {line.strip()[:40]!r}") from None
    except (OSError, EOFError, UnicodeDecodeError) as e:
        raise ValueError(f"path {path!r}: cannot be read as {'gzip ' if path.endswith('.gz') else ''}text ({e}); "
                         f"expected {form}") from None
    try:
        return Tree(n, edges)
    except (ValueError, TypeError) as e:
        raise ValueError(f"path {path!r}: not a tree: {e}") from None
