"""Tree+Cycle positional encoding for graphs given as SMILES strings (chapter 07_tree_cycle_pe).

A SMILES string is a depth-first walk over a molecular graph. The same molecule has many strings (one per root and
per choice of branch and ring-opening order), and a sequence Transformer with sinusoidal positions sees each one as
a different input. This module builds positions that depend on the *graph*, not on the walk:

* :func:`serialize` reads one SMILES string into tokens, the token -> atom alignment (bond symbols -> the atom they
  lead into, ring digits -> the atom carrying them, parentheses -> the branch-point atom), the spanning tree that
  the string writes (its explicit bonds) and RDKit's canonical atom ranks.
* :func:`tree_paths`: the tree positional encoding of Shiv & Quirk (2019), the stack of child-index one-hots from
  the root, with a **canonical root** (canonical rank 0) and **canonical sibling order**. It is a graph invariant for
  acyclic molecules; on rings it depends on which ring bond the string opened (Prop. 2 of the paper).
* :func:`canonical_cycle_basis` and :func:`cycle_features`: a canonical minimum cycle basis (greedy GF(2)
  selection from RDKit's symmetrized SSSR in canonical order) and per-atom ring features (ring count, sizes,
  aromaticity, fusion, position around each ring): the traversal-invariant anchor.
* :class:`TreeCyclePE`, :class:`SeqEncoder`: the encoding as a drop-in replacement for sinusoidal PE in an otherwise
  unchanged encoder built from :mod:`helpers.nn` blocks; baselines :class:`GIN` and :class:`GraphormerLite`.
* :func:`random_ring_system`: synthetic ring systems (fused, spiro, bridged, chains) for cycle counting.

The paper's canonicalization details are not public; the choices above are our reconstruction.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import networkx as nx
import numpy as np
import torch
import torch.nn.functional as F
from rdkit import Chem, RDLogger
from rdkit.Chem import FilterCatalog
from torch import Tensor, nn

from helpers import nn as hnn
from helpers import validate as V

__all__ = [
    "RING_SIZES", "N_CHILD", "DEPTH", "CYCLE_DIM", "parse_smiles", "rooted_smiles", "random_smiles",
    "tokenize", "cycle_rank", "Serialization", "serialize", "canonical_ranks", "tree_paths", "canonical_cycle_basis",
    "cycle_features", "atom_key", "Vocab", "Featurized", "featurize", "collate", "GraphBatch", "graph_batch",
    "TreeCyclePE", "SeqEncoder", "GIN", "GraphormerLite", "random_ring_system", "ring_count_targets",
    "alert_atoms", "sorted_rows", "multiset_diff",
]

RDLogger.DisableLog("rdApp.*")

RING_SIZES = (3, 4, 5, 6, 7, 8)  # size bins; the last one is "8 or more"
N_CHILD = 4  # n: maximum branching of the tree PE (child indices 0..3; larger indices are clipped)
DEPTH = 8  # k: depth levels kept by the tree PE (the most recent k steps of the root path)
N_SLOTS = 3  # R: rings per atom whose position is encoded
CYCLE_DIM = 1 + len(RING_SIZES) + 1 + 1 + 3 * N_SLOTS

_TOKEN_RE = re.compile(r"(\[[^\]]+]|Br|Cl|B|C|N|O|S|P|F|I|b|c|n|o|s|p|\*|%\d{2}|\d|\(|\)|\.|=|#|-|\+|\\|/|:|~)")
_ATOM_RE = re.compile(r"^(\[[^\]]+]|Br|Cl|B|C|N|O|S|P|F|I|b|c|n|o|s|p|\*)$")
_BONDS = {"-", "=", "#", ":", "/", "\\", "~"}
STRUCT_TOKENS = ("(", ")", ".", "-", "=", "#", ":", "/", "\\", "~", *[str(i) for i in range(10)],
                 *[f"%{i}" for i in range(10, 100)])


# --------------------------------------------------------------------------------------------------------------
# SMILES: parse, serialize, tokenize, align
# --------------------------------------------------------------------------------------------------------------
def parse_smiles(smiles: str) -> Chem.Mol:
    """Parse a SMILES string into an RDKit molecule without stereochemistry; raise ``ValueError`` if invalid."""
    V.instance("smiles", smiles, str)
    mol = Chem.MolFromSmiles(smiles) if smiles.strip() else None
    if mol is None:
        raise ValueError(f"smiles must be a valid SMILES string, got {smiles!r}")
    Chem.RemoveStereochemistry(mol)
    return mol


def _as_mol(mol: Chem.Mol | str) -> Chem.Mol:
    if isinstance(mol, str):
        try:
            return parse_smiles(mol)
        except ValueError as e:
            raise ValueError(f"mol: {e}") from None
    return _mol(mol)


def _mol(mol: object) -> Chem.Mol:
    if not isinstance(mol, Chem.Mol):
        raise TypeError(f"mol must be an RDKit Mol (or, where stated, a SMILES str), got {V.describe(mol)}")
    return mol


def rooted_smiles(mol: Chem.Mol | str, root: int) -> str:
    """The (non-canonical) SMILES of ``mol`` whose depth-first walk starts at atom ``root``."""
    mol = _as_mol(mol)
    root = V.index("root", root, mol.GetNumAtoms())
    return Chem.MolToSmiles(mol, rootedAtAtom=int(root), canonical=False, isomericSmiles=False)


def random_smiles(mol: Chem.Mol | str, n: int, seed: int) -> list[str]:
    """``n`` randomized SMILES of ``mol`` (random root and branch order; Bjerrum 2017), seeded."""
    mol = _as_mol(mol)
    n, seed = V.integer("n", n, min=1), V.integer("seed", seed, min=0, max=2**31 - 2)
    mol = Chem.Mol(mol)
    Chem.RemoveStereochemistry(mol)
    return list(Chem.MolToRandomSmilesVect(mol, n, randomSeed=int(seed) + 1))


def tokenize(smiles: str) -> list[str]:
    """Split a SMILES string into atom, bond, ring-closure, branch and dot tokens; raise on leftover characters."""
    V.instance("smiles", smiles, str)
    toks = _TOKEN_RE.findall(smiles)
    if "".join(toks) != smiles:
        raise ValueError(f"smiles must consist of SMILES tokens, cannot tokenize {smiles!r}")
    return toks


def atom_key(atom: Chem.Atom) -> str:
    """A traversal-invariant atom token: element, aromaticity, charge and hydrogen count (not the written string)."""
    V.instance("atom", atom, Chem.Atom)
    return f"{atom.GetSymbol()}{'~ar' if atom.GetIsAromatic() else ''}{atom.GetFormalCharge():+d}H{atom.GetTotalNumHs()}"


def cycle_rank(mol: Chem.Mol | str) -> int:
    """The number of independent rings, ``E - V + (connected components)``."""
    mol = _as_mol(mol)
    return mol.GetNumBonds() - mol.GetNumAtoms() + len(Chem.GetMolFrags(mol))


def canonical_ranks(mol: Chem.Mol) -> np.ndarray:
    """RDKit's canonical atom ranks with ties broken (rank 0 is the root of the canonical SMILES)."""
    _mol(mol)
    return np.asarray(list(Chem.CanonicalRankAtoms(mol, breakTies=True)), dtype=np.int64)


@dataclass
class Serialization:
    """One SMILES string read as a sequence: tokens aligned to atoms, and the spanning tree the string writes.

    Atom ``i`` of ``mol`` is the ``i``-th atom token of the string (RDKit numbers atoms in reading order).
    """

    smiles: str
    mol: Chem.Mol
    tokens: list[str]
    token_atom: np.ndarray  # (T,) atom each token is aligned to
    is_atom: np.ndarray  # (T,) bool: the token is an atom
    tree_parent: np.ndarray  # (N,) parent of each atom in the string's spanning tree, -1 for a root
    closures: list[tuple[int, int]]  # ring-closure bonds (the non-tree edges)
    ranks: np.ndarray  # (N,) canonical ranks

    @property
    def n_atoms(self) -> int:
        return self.mol.GetNumAtoms()


def serialize(smiles: str) -> Serialization:
    """Read a SMILES string: tokens, token -> atom alignment, the written spanning tree, canonical ranks."""
    mol = parse_smiles(smiles)
    tokens = tokenize(smiles)
    T, N = len(tokens), mol.GetNumAtoms()
    token_atom = np.full(T, -1, dtype=np.int64)
    is_atom = np.zeros(T, dtype=bool)
    parent = np.full(N, -1, dtype=np.int64)
    closures: list[tuple[int, int]] = []
    opened: dict[str, int] = {}
    stack: list[int] = []
    prev: int | None = None
    pending: list[int] = []  # bond / dot tokens waiting for the atom they lead into
    n = 0
    for t, tok in enumerate(tokens):
        if _ATOM_RE.match(tok):
            if n >= N:
                raise ValueError(f"more atom tokens than atoms in {smiles!r}")
            is_atom[t], token_atom[t] = True, n
            parent[n] = -1 if prev is None else prev
            for p in pending:
                token_atom[p] = n
            pending, prev, n = [], n, n + 1
        elif tok in _BONDS or tok == ".":
            if tok == ".":
                prev = None
            pending.append(t)
        elif tok[0].isdigit() or tok[0] == "%":
            if prev is None:
                raise ValueError(f"ring closure before any atom in {smiles!r}")
            token_atom[t] = prev
            for p in pending:  # a bond symbol written before a ring digit belongs to the ring bond
                token_atom[p] = prev
            pending = []
            if tok in opened:
                closures.append((opened.pop(tok), prev))
            else:
                opened[tok] = prev
        elif tok == "(":
            stack.append(prev)
            token_atom[t] = prev
        elif tok == ")":
            prev = stack.pop()
            token_atom[t] = prev
    if n != N or pending or opened or (token_atom < 0).any():
        raise ValueError(f"cannot align tokens of {smiles!r} to its {N} atoms")
    return Serialization(smiles, mol, tokens, token_atom, is_atom, parent, closures, canonical_ranks(mol))


# --------------------------------------------------------------------------------------------------------------
# Tree PE: canonical root, canonical sibling order
# --------------------------------------------------------------------------------------------------------------
def tree_paths(ser: Serialization, n_child: int = N_CHILD, depth: int = DEPTH) -> np.ndarray:
    """Child-index paths of every atom in the string's spanning tree, re-rooted at the canonical root.

    Returns an int array (N, depth): entry ``j`` is the child index of the ``j``-th most recent step of the root
    path (siblings ordered by canonical rank, clipped to ``n_child - 1``), ``-1`` where the path is shorter.
    """
    if not isinstance(ser, Serialization):
        raise TypeError(f"ser must be a Serialization, got {type(ser).__name__}")
    n_child, depth = V.integer("n_child", n_child, min=1), V.integer("depth", depth, min=1)
    N, ranks = ser.n_atoms, ser.ranks
    adj: list[list[int]] = [[] for _ in range(N)]
    for v, p in enumerate(ser.tree_parent):
        if p >= 0:
            adj[v].append(int(p))
            adj[int(p)].append(v)
    paths: list[list[int] | None] = [None] * N
    for root in sorted(range(N), key=lambda a: ranks[a]):  # canonical root of each component: its lowest rank
        if paths[root] is not None:
            continue
        paths[root] = []
        stack = [root]
        while stack:
            u = stack.pop()
            kids = sorted((w for w in adj[u] if paths[w] is None), key=lambda a: ranks[a])
            for i, w in enumerate(kids):
                paths[w] = paths[u] + [min(i, n_child - 1)]
                stack.append(w)
    out = np.full((N, depth), -1, dtype=np.int64)
    for v, path in enumerate(paths):
        recent = path[::-1][:depth]
        out[v, : len(recent)] = recent
    return out


# --------------------------------------------------------------------------------------------------------------
# Cycle PE: canonical cycle basis and per-atom ring features
# --------------------------------------------------------------------------------------------------------------
def _ordered_ring(ring: Sequence[int], ranks: np.ndarray) -> tuple[int, ...]:
    """The ring's atoms starting at its lowest-rank atom, walking toward the lower-ranked of its two neighbours."""
    ring = list(ring)
    i = min(range(len(ring)), key=lambda j: ranks[ring[j]])
    ring = ring[i:] + ring[:i]
    if len(ring) > 2 and ranks[ring[-1]] < ranks[ring[1]]:
        ring = [ring[0]] + ring[1:][::-1]
    return tuple(ring)


def _ranks(ranks: object, mol: Chem.Mol) -> np.ndarray:
    """A permutation of 0..N-1 (canonical ranks of mol's atoms)."""
    N = mol.GetNumAtoms()
    r = V.array("ranks", ranks, shape=(N,), dtype="int")
    if not np.array_equal(np.sort(r), np.arange(N)):
        raise ValueError(f"ranks must be a permutation of 0..{N - 1} (see canonical_ranks)")
    return r


def canonical_cycle_basis(mol: Chem.Mol, ranks: np.ndarray | None = None) -> list[tuple[int, ...]]:
    """A canonical minimum cycle basis: E - V + (components) rings, each as an ordered atom tuple.

    Candidates are RDKit's symmetrized SSSR (unique for a graph, a superset of one SSSR); they are sorted by
    (size, sorted canonical ranks) and kept greedily while independent over GF(2) (as bond sets). Ties between
    symmetric rings (e.g. bicyclo[2.2.2]octane) are broken by canonical rank, so the result is canonical up to
    the molecule's automorphisms.
    """
    _mol(mol)
    ranks = canonical_ranks(mol) if ranks is None else _ranks(ranks, mol)
    m = cycle_rank(mol)
    cands = [_ordered_ring(list(r), ranks) for r in Chem.GetSymmSSSR(mol)]
    cands.sort(key=lambda r: (len(r), sorted(int(ranks[a]) for a in r)))
    pivots: dict[int, int] = {}  # GF(2) elimination over bond bitmasks: highest bit -> reduced vector
    basis: list[tuple[int, ...]] = []
    for ring in cands:
        vec = 0
        for a, b in zip(ring, ring[1:] + ring[:1]):
            bond = mol.GetBondBetweenAtoms(int(a), int(b))
            if bond is None:
                raise ValueError("RDKit ring is not an ordered cycle")
            vec ^= 1 << bond.GetIdx()
        while vec:
            top = vec.bit_length() - 1
            if top not in pivots:
                pivots[top] = vec
                basis.append(ring)
                break
            vec ^= pivots[top]
        if len(basis) == m:
            break
    if len(basis) != m:
        raise ValueError(f"could not complete a cycle basis: {len(basis)} of {m} rings")
    return basis


def cycle_features(mol: Chem.Mol, ranks: np.ndarray | None = None,
                   basis: list[tuple[int, ...]] | None = None) -> np.ndarray:
    """Per-atom ring features (N, CYCLE_DIM), every one a graph invariant.

    Columns: number of basis rings containing the atom; multi-hot ring sizes 3..8+; in an aromatic ring;
    fusion (other rings sharing a bond with the atom's rings); then for up to 3 rings containing the atom, in
    canonical order, ``sin, cos`` of ``2 pi p / |C|`` (``p`` = position along the canonically oriented ring) and
    ``|C| / 8``.
    """
    _mol(mol)
    ranks = canonical_ranks(mol) if ranks is None else _ranks(ranks, mol)
    N = mol.GetNumAtoms()
    if basis is None:
        basis = canonical_cycle_basis(mol, ranks)
    else:
        basis = V.sequence("basis", basis, of=lambda k, r: tuple(V.sequence(
            k, r, min_len=3, of=lambda k2, a: V.index(k2, a, N))))
    N = mol.GetNumAtoms()
    out = np.zeros((N, CYCLE_DIM), dtype=np.float64)
    bonds = [{frozenset(e) for e in zip(r, r[1:] + r[:1])} for r in basis]
    aromatic = [all(mol.GetAtomWithIdx(int(a)).GetIsAromatic() for a in r) for r in basis]
    n_fused = [sum(1 for j in range(len(basis)) if j != i and bonds[i] & bonds[j]) for i in range(len(basis))]
    slot = np.zeros(N, dtype=np.int64)
    for i, ring in enumerate(basis):
        size_bin = min(len(ring), RING_SIZES[-1]) - RING_SIZES[0]
        for p, a in enumerate(ring):
            out[a, 0] += 1
            out[a, 1 + size_bin] = 1.0
            out[a, 7] = max(out[a, 7], float(aromatic[i]))
            out[a, 8] = max(out[a, 8], float(n_fused[i]))
            if slot[a] < N_SLOTS:
                ang = 2 * math.pi * p / len(ring)
                c = 9 + 3 * slot[a]
                out[a, c: c + 3] = (math.sin(ang), math.cos(ang), len(ring) / 8)
                slot[a] += 1
    return out


# --------------------------------------------------------------------------------------------------------------
# Invariance helpers
# --------------------------------------------------------------------------------------------------------------
def sorted_rows(keys: Sequence[str], feats: np.ndarray, decimals: int = 9) -> list[tuple]:
    """The multiset {(atom key, feature row)} as a sorted list, for comparing serializations of one molecule."""
    keys = V.sequence("keys", keys, of=lambda k, x: V.instance(k, x, str))
    feats = V.array("feats", feats, ndim=2, dtype="float")
    if len(feats) != len(keys):
        raise ValueError(f"feats must have one row per key ({len(keys)}), got shape {feats.shape}")
    decimals = V.integer("decimals", decimals, min=0)
    feats = np.round(feats.astype(np.float64), decimals) + 0.0  # +0.0 folds -0.0 into 0.0
    return sorted((k, tuple(row.tolist())) for k, row in zip(keys, feats))


def multiset_diff(a: list[tuple], b: list[tuple]) -> float:
    """Largest absolute difference between two sorted multisets of (key, row); ``inf`` if keys differ."""
    V.instance("a", a, list)
    V.instance("b", b, list)
    for name, m in (("a", a), ("b", b)):
        if not all(isinstance(x, tuple) and len(x) == 2 for x in m):
            raise TypeError(f"{name} must be a list of (key, row) pairs (see sorted_rows)")
    if len(a) != len(b) or any(x[0] != y[0] for x, y in zip(a, b)):
        return math.inf
    if not a:
        return 0.0
    return float(np.max(np.abs(np.array([x[1] for x in a]) - np.array([y[1] for y in b]))))


# --------------------------------------------------------------------------------------------------------------
# Featurization and batching
# --------------------------------------------------------------------------------------------------------------
class Vocab:
    """Token ids: 0 = padding, 1 = [CLS], 2 = unknown, then structural tokens, then atom keys."""

    PAD, CLS, UNK = 0, 1, 2

    def __init__(self, atom_keys: Sequence[str]) -> None:
        if isinstance(atom_keys, str):
            raise TypeError("atom_keys must be a sequence of atom keys, not one str")
        atom_keys = V.sequence("atom_keys", list(atom_keys) if isinstance(atom_keys, (set, frozenset)) else atom_keys,
                               of=lambda k, x: V.instance(k, x, str))
        self.itos = ["<pad>", "<cls>", "<unk>", *STRUCT_TOKENS, *sorted(set(atom_keys))]
        self.stoi = {s: i for i, s in enumerate(self.itos)}

    def __len__(self) -> int:
        return len(self.itos)

    def id(self, s: str) -> int:
        """The id of token ``s`` (UNK for an unknown token)."""
        V.instance("s", s, str)
        return self.stoi.get(s, self.UNK)


@dataclass
class Featurized:
    """Everything the models need about one SMILES string."""

    smiles: str
    tokens: list[str]
    token_ids: np.ndarray  # (T,) ids with atom tokens replaced by their invariant atom key
    token_atom: np.ndarray
    is_atom: np.ndarray
    atom_keys: list[str]
    tree: np.ndarray  # (N, DEPTH) child-index paths
    cycle: np.ndarray  # (N, CYCLE_DIM)
    edges: np.ndarray  # (2, 2E) directed bond list
    degree: np.ndarray  # (N,)
    spd: np.ndarray  # (N, N) shortest-path distances (-1 if disconnected)
    in_ring: np.ndarray  # (N,) bool
    ranks: np.ndarray
    extra: dict = field(default_factory=dict)


def featurize(smiles: str, vocab: Vocab | None = None) -> Featurized:
    """Serialize, align and encode one SMILES string (tree paths, cycle features, graph for the baselines)."""
    V.optional(V.instance, "vocab", vocab, Vocab)
    ser = serialize(smiles)
    mol = ser.mol
    keys = [atom_key(a) for a in mol.GetAtoms()]
    ids = np.array([
        (vocab.id(keys[ser.token_atom[t]]) if ser.is_atom[t] else vocab.id(tok)) if vocab else 0
        for t, tok in enumerate(ser.tokens)
    ], dtype=np.int64)
    e = np.array([(b.GetBeginAtomIdx(), b.GetEndAtomIdx()) for b in mol.GetBonds()], dtype=np.int64).reshape(-1, 2)
    edges = np.concatenate([e, e[:, ::-1]]).T if len(e) else np.zeros((2, 0), dtype=np.int64)
    spd = Chem.GetDistanceMatrix(mol).astype(np.int64) if mol.GetNumAtoms() > 1 else np.zeros((1, 1), np.int64)
    spd[spd > 10**6] = -1
    return Featurized(
        smiles=smiles, tokens=ser.tokens, token_ids=ids, token_atom=ser.token_atom, is_atom=ser.is_atom,
        atom_keys=keys, tree=tree_paths(ser), cycle=cycle_features(mol, ser.ranks), edges=edges,
        degree=np.array([a.GetDegree() for a in mol.GetAtoms()], dtype=np.int64), spd=spd,
        in_ring=np.array([a.IsInRing() for a in mol.GetAtoms()]), ranks=ser.ranks,
    )


def collate(items: Sequence[Featurized], atoms_only: bool = False, max_len: int | None = None) -> dict[str, Tensor]:
    """Pad a list of featurized strings into a batch for :class:`SeqEncoder` ([CLS] first).

    ``atoms_only`` keeps only atom tokens (drops parentheses, ring digits, bond symbols). Tokens past ``max_len``
    are cut (their atoms keep no token). Returns ``ids``, ``pad`` (True = real token), ``pos`` (string position),
    ``tree`` (B, T, DEPTH), ``cycle`` (B, T, CYCLE_DIM), ``atom`` (aligned atom, -1 for [CLS]/padding) and
    ``is_atom``.
    """
    items = V.sequence("items", items, min_len=1, of=lambda k, x: V.instance(k, x, Featurized))
    atoms_only = V.boolean("atoms_only", atoms_only)
    max_len = V.optional(V.integer, "max_len", max_len, min=2)
    sel = [np.flatnonzero(f.is_atom) if atoms_only else np.arange(len(f.tokens)) for f in items]
    if max_len is not None:
        sel = [s[: max_len - 1] for s in sel]
    T = 1 + max(len(s) for s in sel)
    B = len(items)
    ids = torch.zeros(B, T, dtype=torch.long)
    pos = torch.zeros(B, T, dtype=torch.long)
    atom = torch.full((B, T), -1, dtype=torch.long)
    is_atom = torch.zeros(B, T, dtype=torch.bool)
    tree = torch.full((B, T, DEPTH), -1, dtype=torch.long)
    cyc = torch.zeros(B, T, CYCLE_DIM, dtype=torch.float32)
    ids[:, 0] = Vocab.CLS
    for b, (f, s) in enumerate(zip(items, sel)):
        n = len(s)
        a = f.token_atom[s]
        ids[b, 1: n + 1] = torch.from_numpy(f.token_ids[s])
        pos[b, 1: n + 1] = torch.from_numpy(s + 1)
        atom[b, 1: n + 1] = torch.from_numpy(a)
        is_atom[b, 1: n + 1] = torch.from_numpy(f.is_atom[s])
        tree[b, 1: n + 1] = torch.from_numpy(f.tree[a])
        cyc[b, 1: n + 1] = torch.from_numpy(f.cycle[a]).float()
    return {"ids": ids, "pad": ids != Vocab.PAD, "pos": pos, "tree": tree, "cycle": cyc, "atom": atom,
            "is_atom": is_atom}


@dataclass
class GraphBatch:
    """A batch of molecular graphs for :class:`GIN` and :class:`GraphormerLite`."""

    x: Tensor  # (N_total,) atom-key ids
    edges: Tensor  # (2, E_total)
    graph: Tensor  # (N_total,) graph id of each node
    n_graphs: int
    dense_ids: Tensor  # (B, 1 + N_max) [CLS] + atom ids, padded
    dense_deg: Tensor  # (B, 1 + N_max)
    dense_spd: Tensor  # (B, 1 + N_max, 1 + N_max); 0 = [CLS] link, d + 1 = distance d, -1 = padding


def graph_batch(items: Sequence[Featurized], vocab: Vocab) -> GraphBatch:
    """Batch graphs: flat (with node offsets) for GIN, dense (padded, with distances) for Graphormer."""
    items = V.sequence("items", items, min_len=1, of=lambda k, x: V.instance(k, x, Featurized))
    V.instance("vocab", vocab, Vocab)
    xs, es, gs = [], [], []
    off = 0
    n_max = max(len(f.atom_keys) for f in items)
    B = len(items)
    d_ids = torch.zeros(B, 1 + n_max, dtype=torch.long)
    d_deg = torch.zeros(B, 1 + n_max, dtype=torch.long)
    d_spd = torch.full((B, 1 + n_max, 1 + n_max), -1, dtype=torch.long)
    for b, f in enumerate(items):
        n = len(f.atom_keys)
        ids = torch.tensor([vocab.id(k) for k in f.atom_keys], dtype=torch.long)
        xs.append(ids)
        es.append(torch.from_numpy(f.edges) + off)
        gs.append(torch.full((n,), b, dtype=torch.long))
        off += n
        d_ids[b, 0], d_ids[b, 1: n + 1] = Vocab.CLS, ids
        d_deg[b, 1: n + 1] = torch.from_numpy(np.minimum(f.degree, 5))
        d_spd[b, : n + 1, : n + 1] = 0
        spd = torch.from_numpy(np.minimum(f.spd, 9))
        d_spd[b, 1: n + 1, 1: n + 1] = torch.where(spd < 0, torch.full_like(spd, 10), spd) + 1
    return GraphBatch(torch.cat(xs), torch.cat(es, dim=1), torch.cat(gs), B, d_ids, d_deg, d_spd)


# --------------------------------------------------------------------------------------------------------------
# Models
# --------------------------------------------------------------------------------------------------------------
def _parts(parts: object) -> tuple[str, ...]:
    if isinstance(parts, str):
        raise TypeError(f"parts must be a sequence such as ('tree', 'cycle'), not the str {parts!r}")
    parts = tuple(V.sequence("parts", parts, min_len=1, of=lambda k, x: V.one_of(k, x, ("tree", "cycle"))))
    return parts


def _tree_cycle(tree: object, cycle: object) -> None:
    V.tensor("tree", tree, dtype="int", min=-1, max=N_CHILD - 1)
    if tree.dim() < 1 or tree.shape[-1] != DEPTH:
        raise ValueError(f"tree must have shape (..., {DEPTH}), got {tuple(tree.shape)}")
    V.tensor("cycle", cycle, shape=(*tree.shape[:-1], CYCLE_DIM), dtype="float")


class TreeCyclePE(nn.Module):
    """``PE(token) = W_t tree(v) + W_c cycle(v)`` for the atom ``v`` a token is aligned to (zero for [CLS]).

    ``tree(v)``: for each of ``h`` copies with a learnable decay ``p_c`` in (0, 1), the stacked child-index
    one-hots, level ``j`` scaled by ``p_c**j`` and the copy by ``sqrt((1 - p_c**2) * d_model / 2)`` (Shiv & Quirk).
    """

    def __init__(self, d_model: int, parts: Sequence[str] = ("tree", "cycle"), copies: int = 2) -> None:
        d_model, copies = V.integer("d_model", d_model, min=1), V.integer("copies", copies, min=1)
        parts = _parts(parts)
        super().__init__()
        self.parts, self.d_model = tuple(parts), d_model
        self.raw_p = nn.Parameter(torch.linspace(0.0, 2.0, copies))  # p = sigmoid(raw): decays 0.5 .. 0.88
        self.W_t = nn.Linear(copies * DEPTH * N_CHILD, d_model, bias=False)
        self.W_c = nn.Linear(CYCLE_DIM, d_model, bias=False)

    def tree_vector(self, tree: Tensor) -> Tensor:
        """(..., DEPTH) child-index paths -> (..., copies * DEPTH * N_CHILD) decayed one-hot stacks."""
        V.tensor("tree", tree, dtype="int", min=-1, max=N_CHILD - 1)
        if tree.dim() < 1 or tree.shape[-1] != DEPTH:
            raise ValueError(f"tree must have shape (..., {DEPTH}), got {tuple(tree.shape)}")
        onehot = F.one_hot(tree.clamp(min=0), N_CHILD).float() * (tree >= 0)[..., None]  # (..., k, n)
        p = torch.sigmoid(self.raw_p)  # (h,)
        j = torch.arange(DEPTH, dtype=torch.float32)
        scale = p[:, None] ** j * torch.sqrt((1 - p**2) * self.d_model / 2)[:, None]  # (h, k)
        x = onehot[..., None, :, :] * scale[..., None]  # (..., h, k, n)
        return x.flatten(-3)

    def forward(self, tree: Tensor, cycle: Tensor, parts: Sequence[str] | None = None) -> Tensor:
        """The positional encoding (..., d_model) of tokens with tree paths (..., DEPTH) and ring features."""
        _tree_cycle(tree, cycle)
        parts = self.parts if parts is None else _parts(parts)
        out = 0.0
        if "tree" in parts:
            out = out + self.W_t(self.tree_vector(tree))
        if "cycle" in parts:
            out = out + self.W_c(cycle)
        return out


class SeqEncoder(nn.Module):
    """A bidirectional sequence Transformer over SMILES tokens with a swappable positional encoding.

    ``pe`` is ``"sinusoidal"`` (string positions), ``"tree"``, ``"cycle"`` or ``"tree_cycle"``; everything else
    (embedding, :class:`helpers.nn.Block` stack, [CLS] pooling, heads) is the same. ``n_out`` graph-level outputs
    from [CLS], ``n_node`` per-token outputs.
    """

    def __init__(self, vocab_size: int, pe: str = "tree_cycle", d_model: int = 64, n_layer: int = 3,
                 n_head: int = 4, d_ff: int = 128, n_out: int = 1, n_node: int = 0) -> None:
        V.one_of("pe", pe, ("sinusoidal", "tree", "cycle", "tree_cycle"))
        for name, v in dict(vocab_size=vocab_size, d_model=d_model, n_layer=n_layer, n_head=n_head, d_ff=d_ff,
                            n_out=n_out).items():
            V.integer(name, v, min=1)
        n_node = V.integer("n_node", n_node, min=0)
        super().__init__()
        self.pe_kind, self.d_model = pe, d_model
        cfg = hnn.TransformerConfig(vocab_size=vocab_size, n_layer=n_layer, n_head=n_head, d_model=d_model,
                                    d_ff=d_ff, pos="none")
        self.tok = nn.Embedding(vocab_size, d_model)
        self.pe = None if pe == "sinusoidal" else TreeCyclePE(
            d_model, {"tree": ("tree",), "cycle": ("cycle",), "tree_cycle": ("tree", "cycle")}[pe])
        self.blocks = nn.ModuleList([hnn.Block(cfg) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, n_out)
        self.node_head = nn.Linear(d_model, n_node) if n_node else None
        self.apply(hnn.Transformer._init)

    def _batch(self, batch: object) -> dict[str, Tensor]:
        """A batch from :func:`collate`: the keys, shapes and token ids the encoder reads."""
        V.instance("batch", batch, dict)
        missing = {"ids", "pad", "pos", "tree", "cycle", "atom"} - set(batch)
        if missing:
            raise ValueError(f"batch must come from collate(); it lacks {sorted(missing)}")
        ids = V.token_ids("batch['ids']", batch["ids"], self.tok.num_embeddings)
        if not isinstance(ids, Tensor) or ids.dim() != 2:
            raise ValueError(f"batch['ids'] must be a (B, T) tensor, got {V.describe(batch['ids'])}")
        B, T = ids.shape
        V.tensor("batch['pad']", batch["pad"], shape=(B, T), dtype="bool")
        V.tensor("batch['pos']", batch["pos"], shape=(B, T), dtype="int", min=0)
        V.tensor("batch['atom']", batch["atom"], shape=(B, T), dtype="int", min=-1)
        _tree_cycle(batch["tree"], batch["cycle"])
        if batch["tree"].shape[:2] != (B, T):
            raise ValueError(f"batch['tree'] must have shape ({B}, {T}, {DEPTH}), got {tuple(batch['tree'].shape)}")
        return batch

    def positional(self, batch: dict[str, Tensor], parts: Sequence[str] | None = None) -> Tensor:
        """The positional encoding of a batch (B, T, d_model)."""
        batch = self._batch(batch)
        if self.pe is None:
            return hnn.sinusoidal_table(batch["pos"], self.d_model) * batch["pad"][..., None]
        return self.pe(batch["tree"], batch["cycle"], parts) * (batch["atom"] >= 0)[..., None]

    def encode(self, batch: dict[str, Tensor], parts: Sequence[str] | None = None,
               inputs_embeds: Tensor | None = None) -> Tensor:
        """Hidden states (B, T, d) after the final norm; ``inputs_embeds`` replaces the token embedding."""
        batch = self._batch(batch)
        if inputs_embeds is not None:
            V.tensor("inputs_embeds", inputs_embeds, shape=(*batch["ids"].shape, self.d_model), dtype="float",
                     finite=False)
        x = self.tok(batch["ids"]) if inputs_embeds is None else inputs_embeds
        x = x + self.positional(batch, parts)
        pad = batch["pad"]
        mask = (pad[:, None, :] & torch.ones_like(pad)[:, :, None])[:, None]  # (B, 1, T, T): attend to real keys
        for blk in self.blocks:
            x = blk(x, mask)
        return self.ln_f(x)

    def forward(self, batch: dict[str, Tensor], parts: Sequence[str] | None = None):
        h = self.encode(batch, parts)
        out = self.head(h[:, 0])
        if self.node_head is None:
            return out
        return out, self.node_head(h)


def _graph_batch(g: object, vocab_size: int) -> GraphBatch:
    V.instance("g", g, GraphBatch)
    V.token_ids("g.x", g.x, vocab_size)
    V.token_ids("g.dense_ids", g.dense_ids, vocab_size)
    return g


class GIN(nn.Module):
    """Graph Isomorphism Network (Xu et al. 2019): ``h <- MLP((1 + eps) h + sum of neighbours)``, sum pooling."""

    def __init__(self, vocab_size: int, d: int = 64, n_layer: int = 5, n_out: int = 1, n_node: int = 0) -> None:
        for name, v in dict(vocab_size=vocab_size, d=d, n_layer=n_layer, n_out=n_out).items():
            V.integer(name, v, min=1)
        n_node = V.integer("n_node", n_node, min=0)
        super().__init__()
        self.emb = nn.Embedding(vocab_size, d)
        self.eps = nn.Parameter(torch.zeros(n_layer))
        self.mlps = nn.ModuleList([
            nn.Sequential(nn.Linear(d, d), nn.BatchNorm1d(d), nn.ReLU(), nn.Linear(d, d), nn.ReLU())
            for _ in range(n_layer)
        ])
        self.head = nn.Sequential(nn.Linear(d * (n_layer + 1), d), nn.ReLU(), nn.Linear(d, n_out))
        self.node_head = nn.Linear(d, n_node) if n_node else None

    def embed(self, g: GraphBatch) -> tuple[Tensor, Tensor]:
        """(graph embeddings (B, d * (L + 1)) from summed nodes of every layer, final node states)."""
        _graph_batch(g, self.emb.num_embeddings)
        h = self.emb(g.x)
        pooled = [torch.zeros(g.n_graphs, h.shape[1]).index_add_(0, g.graph, h)]
        src, dst = g.edges
        for eps, mlp in zip(self.eps, self.mlps):
            agg = torch.zeros_like(h).index_add_(0, dst, h[src])
            h = mlp((1 + eps) * h + agg)
            pooled.append(torch.zeros(g.n_graphs, h.shape[1]).index_add_(0, g.graph, h))
        return torch.cat(pooled, dim=1), h

    def forward(self, g: GraphBatch):
        z, h = self.embed(g)
        out = self.head(z)
        if self.node_head is None:
            return out
        return out, self.node_head(h)


class GraphormerLite(nn.Module):
    """A graph-native Transformer over atoms (Ying et al. 2021): degree (centrality) embeddings and a learned
    shortest-path-distance attention bias per head, with the same :class:`helpers.nn.Block` stack as
    :class:`SeqEncoder`. The bias is passed to the blocks as an additive float mask.
    """

    def __init__(self, vocab_size: int, d_model: int = 64, n_layer: int = 3, n_head: int = 4, d_ff: int = 128,
                 n_out: int = 1, n_node: int = 0) -> None:
        for name, v in dict(vocab_size=vocab_size, d_model=d_model, n_layer=n_layer, n_head=n_head, d_ff=d_ff,
                            n_out=n_out).items():
            V.integer(name, v, min=1)
        n_node = V.integer("n_node", n_node, min=0)
        super().__init__()
        cfg = hnn.TransformerConfig(vocab_size=vocab_size, n_layer=n_layer, n_head=n_head, d_model=d_model,
                                    d_ff=d_ff, pos="none")
        self.n_head = n_head
        self.tok = nn.Embedding(vocab_size, d_model)
        self.deg = nn.Embedding(6, d_model)
        self.spd_bias = nn.Embedding(12, n_head)  # 0: [CLS] link, 1..10: distance 0..9, 11: other component
        self.blocks = nn.ModuleList([hnn.Block(cfg) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, n_out)
        self.node_head = nn.Linear(d_model, n_node) if n_node else None
        self.apply(hnn.Transformer._init)

    def forward(self, g: GraphBatch):
        """Graph-level outputs (B, n_out) (and per-atom outputs when ``n_node``)."""
        _graph_batch(g, self.tok.num_embeddings)
        x = self.tok(g.dense_ids) + self.deg(g.dense_deg)
        spd = g.dense_spd
        bias = self.spd_bias(spd.clamp(min=0)).permute(0, 3, 1, 2)  # (B, H, T, T)
        bias = bias.masked_fill((spd < 0)[:, None], float("-inf"))
        for blk in self.blocks:
            x = blk(x, bias)
        h = self.ln_f(x)
        out = self.head(h[:, 0])
        if self.node_head is None:
            return out
        return out, self.node_head(h[:, 1:])


# --------------------------------------------------------------------------------------------------------------
# Data: synthetic ring systems, targets, structural alerts
# --------------------------------------------------------------------------------------------------------------
def random_ring_system(rng: np.random.Generator, kind: str | None = None, n_ops: int | None = None) -> str:
    """A random saturated molecule built from rings of size 3..8: ``kind`` in fused / spiro / bridged / chain
    (acyclic) / mixed. Some carbons become N or O. Returns its canonical SMILES."""
    kinds = ("fused", "spiro", "bridged", "chain", "mixed")
    V.instance("rng", rng, np.random.Generator)
    V.optional(V.one_of, "kind", kind, kinds)
    n_ops = V.optional(V.integer, "n_ops", n_ops, min=0, max=50)
    if kind is None:
        kind = kinds[int(rng.integers(len(kinds)))]
    n_ops = int(rng.integers(1, 4)) if n_ops is None else n_ops
    rw = Chem.RWMol()
    rings: list[list[int]] = []

    def add(n: int) -> list[int]:
        return [rw.AddAtom(Chem.Atom(6)) for _ in range(n)]

    def link(path: list[int]) -> None:
        for a, b in zip(path, path[1:]):
            rw.AddBond(int(a), int(b), Chem.BondType.SINGLE)

    def deg(a: int) -> int:
        return rw.GetAtomWithIdx(int(a)).GetDegree()

    def size() -> int:
        return int(rng.integers(3, 9))

    if kind == "chain":
        atoms = add(1)
        for _ in range(int(rng.integers(3, 14))):
            free = [a for a in atoms if deg(a) < 4]
            a = free[int(rng.integers(len(free)))]
            (b,) = add(1)
            link([a, b])
            atoms.append(b)
    else:
        first = add(size())
        link(first + first[:1])
        rings.append(first)
        for _ in range(n_ops):
            op = kind if kind != "mixed" else ("fused", "spiro", "bridged", "chain")[int(rng.integers(4))]
            ring = rings[int(rng.integers(len(rings)))]
            if op == "fused":
                i = int(rng.integers(len(ring)))
                a, b = ring[i], ring[(i + 1) % len(ring)]
                if deg(a) > 3 or deg(b) > 3:
                    continue
                new = add(size() - 2)
                link([a, *new, b])
                rings.append([a, *new, b])
            elif op == "spiro":
                free = [a for a in ring if deg(a) <= 2]
                if not free:
                    continue
                a = free[int(rng.integers(len(free)))]
                new = add(size() - 1)
                link([a, *new, a])
                rings.append([a, *new])
            elif op == "bridged":
                if len(ring) < 4:
                    continue
                i = int(rng.integers(len(ring)))
                j = (i + int(rng.integers(2, len(ring) - 1))) % len(ring)
                a, b = ring[i], ring[j]
                if deg(a) > 3 or deg(b) > 3:
                    continue
                new = add(int(rng.integers(1, 4)))
                link([a, *new, b])
                rings.append([a, *new, b])
            else:  # a chain, sometimes ending in a new ring
                free = [a for a in range(rw.GetNumAtoms()) if deg(a) < 4]
                a = free[int(rng.integers(len(free)))]
                new = add(int(rng.integers(1, 4)))
                link([a, *new])
                if rng.random() < 0.5:
                    r = add(size())
                    link([new[-1], r[0]])
                    link(r + r[:1])
                    rings.append(r)
    for a in rw.GetAtoms():
        if a.GetDegree() <= 2 and rng.random() < 0.12:
            a.SetAtomicNum(int(rng.choice([7, 8])))
    mol = rw.GetMol()
    Chem.SanitizeMol(mol)
    return Chem.MolToSmiles(mol)


def ring_count_targets(mol: Chem.Mol | str) -> np.ndarray:
    """Number of rings of each size 3, 4, 5, 6, 7, 8+ in the canonical cycle basis."""
    mol = _as_mol(mol)
    out = np.zeros(len(RING_SIZES), dtype=np.float64)
    for ring in canonical_cycle_basis(mol):
        out[min(len(ring), RING_SIZES[-1]) - RING_SIZES[0]] += 1
    return out


_CATALOG: FilterCatalog.FilterCatalog | None = None


def alert_atoms(mol: Chem.Mol | str) -> set[int]:
    """Atoms matched by any of RDKit's built-in BRENK or PAINS (A, B, C) structural alerts."""
    global _CATALOG
    mol = _as_mol(mol)
    if _CATALOG is None:
        params = FilterCatalog.FilterCatalogParams()
        for cat in ("BRENK", "PAINS_A", "PAINS_B", "PAINS_C"):
            params.AddCatalog(getattr(FilterCatalog.FilterCatalogParams.FilterCatalogs, cat))
        _CATALOG = FilterCatalog.FilterCatalog(params)
    atoms: set[int] = set()
    for entry in _CATALOG.GetMatches(mol):
        for fm in entry.GetFilterMatches(mol):
            atoms.update(int(a) for _, a in fm.atomPairs)
    return atoms


def graph_of(mol: Chem.Mol) -> nx.Graph:
    """The molecular graph as a networkx graph (atoms labelled by their invariant key)."""
    _mol(mol)
    g = nx.Graph()
    g.add_nodes_from((a.GetIdx(), {"key": atom_key(a)}) for a in mol.GetAtoms())
    g.add_edges_from((b.GetBeginAtomIdx(), b.GetEndAtomIdx()) for b in mol.GetBonds())
    return g


# --------------------------------------------------------------------------------------------------------------
# Real bioactivity data shipped inside installed packages (no download at run time)
# --------------------------------------------------------------------------------------------------------------
def load_bioactivity(name: str = "CHEMBL204_Ki", threshold: float = 7.0) -> tuple[list[str], np.ndarray, np.ndarray, str]:
    """A ChEMBL bioactivity set binarized at ``p(activity) >= threshold`` (7 = 100 nM, the BACE-style cut).

    Reads MoleculeACE's CSV (``pip install --no-deps moleculeace``) with its own train/test split. If MoleculeACE
    is not installed, falls back to the ChEMBL set CHEMBL2321810 that ships in RDKit's ``Contrib/FreeWilson`` (a
    seeded 80/20 split). Returns ``(smiles, labels, is_test, source)``.
    """
    import csv
    import importlib.util
    from pathlib import Path

    V.instance("name", name, str)
    threshold = V.number("threshold", threshold)
    spec = importlib.util.find_spec("MoleculeACE")
    if spec is not None and spec.submodule_search_locations:
        path = Path(spec.submodule_search_locations[0]) / "Data" / "benchmark_data" / f"{name}.csv"
        if not path.exists():
            raise ValueError(f"MoleculeACE has no data set {name!r}")
        with open(path) as fh:
            rows = list(csv.DictReader(fh))
        smiles = [r["smiles"] for r in rows]
        p_act = np.array([9.0 - math.log10(float(r["exp_mean [nM]"])) for r in rows])
        is_test = np.array([r["split"] == "test" for r in rows])
        source = f"MoleculeACE {name}"
    else:
        from rdkit import RDConfig

        base = Path(RDConfig.RDContribDir) / "FreeWilson" / "data"
        names = {}
        for line in (base / "CHEMBL2321810.smi").read_text().split("\n"):
            if line.strip():
                smi, ident = line.split()
                names[ident] = smi
        with open(base / "CHEMBL2321810_act.csv") as fh:
            rows = [r for r in csv.DictReader(fh) if r["Name"] in names]
        smiles = [names[r["Name"]] for r in rows]
        p_act = np.array([float(r["Act"]) for r in rows])
        is_test = np.random.default_rng(0).random(len(rows)) < 0.2
        source = "RDKit Contrib CHEMBL2321810 (MoleculeACE not installed)"
    keep = []
    for i, s in enumerate(smiles):
        try:
            mol = parse_smiles(s)
        except ValueError:
            continue
        frags = Chem.GetMolFrags(mol, asMols=True)
        smiles[i] = Chem.MolToSmiles(max(frags, key=lambda m: m.GetNumAtoms()), isomericSmiles=False)
        keep.append(i)
    keep = np.array(keep)
    return [smiles[i] for i in keep], (p_act[keep] >= threshold).astype(np.float64), is_test[keep], source
