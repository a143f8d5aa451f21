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
* :func:`recipe_config`, :func:`recipe_conditions`, :func:`strongest_baseline`, :func:`ecfp_baseline`: the
  retraining recipe registered before training (``data/07_tree_cycle_pe/make_wsd.py``), its conditions and
  bars, and the ECFP4 fingerprint baseline.

The paper's canonicalization details are not public; the choices above are our reconstruction.
"""

from __future__ import annotations

import math
import re
import time
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
    "alert_atoms", "sorted_rows", "multiset_diff", "RING_TOKEN", "N_RING_IDS", "ring_ids", "alert_match",
    "alignment_at_k", "centred_cosine", "SEQ_KINDS", "GRAPH_KINDS", "make_model", "is_graph_model", "model_batch",
    "task_loss", "fit_model", "predict", "pooled", "integrated_gradients", "synthetic_set", "property_set",
    "featurize_set", "vocab_for", "checkpoint_config", "prepare", "tag_of", "build_model", "train_all",
    "dropped_atoms", "jobs_of", "MODEL_NAMES", "canonical_tree_paths", "pe_token_ratio", "pe_scale_matched",
    "PE_GAIN", "val_split", "fit_sample", "roc_auc", "TASKS", "task_regime",
    "RECIPE_REGISTERED", "RECIPE_FAMILIES", "RECIPE_NAMES", "RECIPE_BARS", "recipe_config", "recipe_until",
    "recipe_conditions", "strongest_baseline", "ecfp4", "ecfp_baseline",
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
RING_TOKEN = "<ring>"  # every ring-closure digit is read as this one token type
N_RING_IDS = 8  # ring-id embedding slots: 0 = not a ring token, 1..8 = closure bond (canonical order, clipped)
STRUCT_TOKENS = ("(", ")", ".", "-", "=", "#", ":", "/", "\\", "~", RING_TOKEN)
# The sinusoidal table's entries have RMS 1/sqrt(2); scaled by this they have the RMS of the initial token
# embeddings (std 0.02, helpers.nn's init), so at the start neither term swamps the other (unscaled, the table's
# norm is ~35x the tokens'). The same role as Vaswani et al.'s x sqrt(d) on unit-scale embeddings.
SIN_SCALE = 0.02 * math.sqrt(2)
# The tree+cycle term gets the same treatment: W_t tree(v) + W_c cycle(v) goes through a LayerNorm whose gain
# starts at the token embeddings' std, so at initialisation its entries have RMS 0.02 (unnormalised, the term
# was ~7.6x the tokens' norm and its string-dependent tree part dominated). The gain is learned.
PE_GAIN = 0.02


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
    token_closure: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # (T,) closure index or -1

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
    opened: dict[str, tuple[int, int]] = {}  # digit -> (atom, token) of the open ring bond
    token_closure = np.full(T, -1, dtype=np.int64)
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
                a, t0 = opened.pop(tok)
                token_closure[t0] = token_closure[t] = len(closures)
                closures.append((a, prev))
            else:
                opened[tok] = (prev, t)
        elif tok == "(":
            stack.append(prev)
            token_atom[t] = prev
        elif tok == ")":
            prev = stack.pop()
            token_atom[t] = prev
    if n != N or pending or opened or (token_atom < 0).any():
        raise ValueError(f"cannot align tokens of {smiles!r} to its {N} atoms")
    return Serialization(smiles, mol, tokens, token_atom, is_atom, parent, closures, canonical_ranks(mol),
                         token_closure)


# --------------------------------------------------------------------------------------------------------------
# Tree PE: canonical root, canonical sibling order
# --------------------------------------------------------------------------------------------------------------
def _paths(adj: list[list[int]], ranks: np.ndarray, n_child: int, depth: int) -> np.ndarray:
    """Child-index paths (N, depth) of the spanning forest found from each component's lowest-rank atom."""
    N = len(adj)
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


def tree_paths(ser: Serialization, n_child: int = N_CHILD, depth: int = DEPTH) -> np.ndarray:
    """Child-index paths of every atom in the string's spanning tree, re-rooted at the canonical root.

    Returns an int array (N, depth): entry ``j`` is the child index of the ``j``-th most recent step of the root
    path (siblings ordered by canonical rank, clipped to ``n_child - 1``), ``-1`` where the path is shorter.
    """
    if not isinstance(ser, Serialization):
        raise TypeError(f"ser must be a Serialization, got {type(ser).__name__}")
    n_child, depth = V.integer("n_child", n_child, min=1), V.integer("depth", depth, min=1)
    adj: list[list[int]] = [[] for _ in range(ser.n_atoms)]
    for v, p in enumerate(ser.tree_parent):
        if p >= 0:
            adj[v].append(int(p))
            adj[int(p)].append(v)
    return _paths(adj, ser.ranks, n_child, depth)


def canonical_tree_paths(mol: Chem.Mol, ranks: np.ndarray | None = None, n_child: int = N_CHILD,
                         depth: int = DEPTH) -> np.ndarray:
    """Child-index paths (N, depth) in a *canonical* spanning tree of the whole graph, not the string's.

    The tree is grown over every bond from the canonical root, children taken in canonical-rank order (the
    first discovery of an atom fixes its parent). It depends on the graph and its canonical ranks only, so
    unlike :func:`tree_paths` it is the same for every SMILES of a ring molecule (up to automorphisms).
    """
    _mol(mol)
    ranks = canonical_ranks(mol) if ranks is None else _ranks(ranks, mol)
    n_child, depth = V.integer("n_child", n_child, min=1), V.integer("depth", depth, min=1)
    adj: list[list[int]] = [[] for _ in range(mol.GetNumAtoms())]
    for b in mol.GetBonds():
        i, j = b.GetBeginAtomIdx(), b.GetEndAtomIdx()
        adj[i].append(j)
        adj[j].append(i)
    return _paths(adj, ranks, n_child, depth)


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
    ring_id: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # (T,) 0, or 1..N_RING_IDS
    ctree: np.ndarray = field(default_factory=lambda: np.zeros((0, DEPTH), np.int64))  # (N, DEPTH) canonical tree
    extra: dict = field(default_factory=dict)


def featurize(smiles: str, vocab: Vocab | None = None) -> Featurized:
    """Serialize, align and encode one SMILES string (tree paths, cycle features, graph for the baselines)."""
    V.optional(V.instance, "vocab", vocab, Vocab)
    ser = serialize(smiles)
    mol = ser.mol
    keys = [atom_key(a) for a in mol.GetAtoms()]
    ids, edges = _token_ids(ser, keys, vocab), _edges(mol)
    spd = Chem.GetDistanceMatrix(mol).astype(np.int64) if mol.GetNumAtoms() > 1 else np.zeros((1, 1), np.int64)
    spd[spd > 10**6] = -1
    return Featurized(
        smiles=smiles, tokens=ser.tokens, token_ids=ids, token_atom=ser.token_atom, is_atom=ser.is_atom,
        atom_keys=keys, tree=tree_paths(ser), cycle=cycle_features(mol, ser.ranks), edges=edges,
        degree=np.array([a.GetDegree() for a in mol.GetAtoms()], dtype=np.int64), spd=spd,
        in_ring=np.array([a.IsInRing() for a in mol.GetAtoms()]), ranks=ser.ranks,
        ring_id=ring_ids(ser), ctree=canonical_tree_paths(mol, ser.ranks),
    )


def _token_ids(ser: Serialization, keys: list[str], vocab: Vocab | None) -> np.ndarray:
    ring = ser.token_closure >= 0
    return np.array([
        (vocab.id(keys[ser.token_atom[t]]) if ser.is_atom[t] else vocab.id(RING_TOKEN if ring[t] else tok))
        if vocab else 0
        for t, tok in enumerate(ser.tokens)
    ], dtype=np.int64)


def _edges(mol: Chem.Mol) -> np.ndarray:
    e = np.array([(b.GetBeginAtomIdx(), b.GetEndAtomIdx()) for b in mol.GetBonds()], dtype=np.int64).reshape(-1, 2)
    return np.concatenate([e, e[:, ::-1]]).T if len(e) else np.zeros((2, 0), dtype=np.int64)


def refeaturize(smiles: str, base: Featurized, vocab: Vocab | None = None) -> Featurized:
    """:func:`featurize` of another string of ``base``'s molecule, three times faster (round 7's fresh strings).

    The string's own parts (tokens, alignment, the tree it writes, ring ids) are computed; the graph invariants
    (ring features, canonical-tree paths, distances, degrees, ring membership) are taken from ``base`` atom for
    atom through the canonical ranks (the atom of rank ``r`` here is the atom of rank ``r`` there). Raises when
    the string is not ``base``'s molecule (atom keys or ranks disagree). Equal to ``featurize`` (tested).
    """
    V.instance("base", base, Featurized)
    V.optional(V.instance, "vocab", vocab, Vocab)
    ser = serialize(smiles)
    keys = [atom_key(a) for a in ser.mol.GetAtoms()]
    n = len(base.atom_keys)
    if len(keys) != n or sorted(ser.ranks.tolist()) != list(range(n)) or sorted(base.ranks.tolist()) != list(range(n)):
        raise ValueError(f"{smiles!r} is not a string of the molecule {base.smiles!r} (atoms or ranks differ)")
    at_rank = np.empty(n, dtype=np.int64)
    at_rank[base.ranks] = np.arange(n)
    perm = at_rank[ser.ranks]  # atom i of this string is atom perm[i] of base
    if [base.atom_keys[j] for j in perm] != keys:
        raise ValueError(f"{smiles!r} is not a string of the molecule {base.smiles!r} (atom keys differ)")
    return Featurized(
        smiles=smiles, tokens=ser.tokens, token_ids=_token_ids(ser, keys, vocab), token_atom=ser.token_atom,
        is_atom=ser.is_atom, atom_keys=keys, tree=tree_paths(ser), cycle=base.cycle[perm], edges=_edges(ser.mol),
        degree=base.degree[perm], spd=base.spd[np.ix_(perm, perm)], in_ring=base.in_ring[perm], ranks=ser.ranks,
        ring_id=ring_ids(ser), ctree=base.ctree[perm],
    )


def ring_ids(ser: Serialization) -> np.ndarray:
    """Per token: 0, or the ring-id (1..N_RING_IDS) of the ring-closure bond a ``<ring>`` token opens or closes.

    The two tokens of one closure share an id. Ids number the string's closure bonds in canonical order (by the
    sorted canonical ranks of their two atoms), not by the digit written, which SMILES reuses freely.
    """
    if not isinstance(ser, Serialization):
        raise TypeError(f"ser must be a Serialization, got {type(ser).__name__}")
    keys = [tuple(sorted((int(ser.ranks[a]), int(ser.ranks[b])))) for a, b in ser.closures]
    order = {c: i for i, c in enumerate(sorted(range(len(keys)), key=lambda c: keys[c]))}
    out = np.zeros(len(ser.tokens), dtype=np.int64)
    for t, c in enumerate(ser.token_closure):
        if c >= 0:
            out[t] = 1 + min(order[int(c)], N_RING_IDS - 1)
    return out


def collate(items: Sequence[Featurized], atoms_only: bool = False, max_len: int | None = None) -> dict[str, Tensor]:
    """Pad a list of featurized strings into a batch for :class:`SeqEncoder` ([CLS] first).

    ``atoms_only`` keeps only atom tokens (drops parentheses, ring digits, bond symbols). Tokens past ``max_len``
    are cut (their atoms keep no token). Returns ``ids``, ``pad`` (True = real token), ``pos`` (string position),
    ``tree`` (B, T, DEPTH), ``cycle`` (B, T, CYCLE_DIM), ``atom`` (aligned atom, -1 for [CLS]/padding),
    ``ring`` (ring-id of ``<ring>`` tokens, 0 elsewhere), ``is_atom`` and ``ctree`` (canonical-tree paths).
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
    ring = torch.zeros(B, T, dtype=torch.long)
    tree = torch.full((B, T, DEPTH), -1, dtype=torch.long)
    ctree = torch.full((B, T, DEPTH), -1, dtype=torch.long)
    cyc = torch.zeros(B, T, CYCLE_DIM, dtype=torch.float32)
    ids[:, 0] = Vocab.CLS
    for b, (f, s) in enumerate(zip(items, sel)):
        n = len(s)
        a = f.token_atom[s]
        ids[b, 1: n + 1] = torch.from_numpy(f.token_ids[s])
        pos[b, 1: n + 1] = torch.from_numpy(s + 1)
        atom[b, 1: n + 1] = torch.from_numpy(a)
        is_atom[b, 1: n + 1] = torch.from_numpy(f.is_atom[s])
        if len(f.ring_id) == len(f.tokens):
            ring[b, 1: n + 1] = torch.from_numpy(f.ring_id[s])
        tree[b, 1: n + 1] = torch.from_numpy(f.tree[a])
        if len(f.ctree) == len(f.atom_keys):
            ctree[b, 1: n + 1] = torch.from_numpy(f.ctree[a])
        cyc[b, 1: n + 1] = torch.from_numpy(f.cycle[a]).float()
    return {"ids": ids, "pad": ids != Vocab.PAD, "pos": pos, "tree": tree, "cycle": cyc, "atom": atom,
            "is_atom": is_atom, "ring": ring, "ctree": ctree}


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
    cycle: Tensor | None = None  # (N_total, CYCLE_DIM) ring features of every node
    dense_cycle: Tensor | None = None  # (B, 1 + N_max, CYCLE_DIM) the same, padded ([CLS] row zero)


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
    d_cyc = torch.zeros(B, 1 + n_max, CYCLE_DIM)
    for b, f in enumerate(items):
        n = len(f.atom_keys)
        ids = torch.tensor([vocab.id(k) for k in f.atom_keys], dtype=torch.long)
        xs.append(ids)
        es.append(torch.from_numpy(f.edges) + off)
        gs.append(torch.full((n,), b, dtype=torch.long))
        off += n
        d_ids[b, 0], d_ids[b, 1: n + 1] = Vocab.CLS, ids
        d_cyc[b, 1: n + 1] = torch.from_numpy(f.cycle).float()
        d_deg[b, 1: n + 1] = torch.from_numpy(np.minimum(f.degree, 5))
        d_spd[b, : n + 1, : n + 1] = 0
        spd = torch.from_numpy(np.minimum(f.spd, 9))
        d_spd[b, 1: n + 1, 1: n + 1] = torch.where(spd < 0, torch.full_like(spd, 10), spd) + 1
    cyc = torch.from_numpy(np.concatenate([f.cycle for f in items])).float()
    return GraphBatch(torch.cat(xs), torch.cat(es, dim=1), torch.cat(gs), B, d_ids, d_deg, d_spd, cyc, d_cyc)


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
    """``PE(token) = LN(W_t tree(v) + W_c cycle(v))`` for the atom ``v`` a token is aligned to (zero for [CLS]).

    ``tree(v)``: for each of ``h`` copies with a learnable decay ``p_c`` in (0, 1), the stacked child-index
    one-hots, level ``j`` scaled by ``p_c**j`` and the copy by ``sqrt((1 - p_c**2) * d_model / 2)`` (Shiv & Quirk).
    ``LN`` is a LayerNorm whose gain starts at ``gain`` (:data:`PE_GAIN`, the token embeddings' std): the term
    starts at token scale, as the scaled sinusoidal table does; ``norm=False`` leaves it unnormalised.
    """

    def __init__(self, d_model: int, parts: Sequence[str] = ("tree", "cycle"), copies: int = 2,
                 norm: bool = True, gain: float = PE_GAIN) -> None:
        d_model, copies = V.integer("d_model", d_model, min=1), V.integer("copies", copies, min=1)
        parts = _parts(parts)
        norm, gain = V.boolean("norm", norm), V.positive("gain", gain)
        super().__init__()
        self.parts, self.d_model, self.gain = tuple(parts), d_model, gain
        self.raw_p = nn.Parameter(torch.linspace(0.0, 2.0, copies))  # p = sigmoid(raw): decays 0.5 .. 0.88
        self.W_t = nn.Linear(copies * DEPTH * N_CHILD, d_model, bias=False)
        self.W_c = nn.Linear(CYCLE_DIM, d_model, bias=False)
        self.norm = nn.LayerNorm(d_model) if norm else None
        self.reset_gain()

    def reset_gain(self) -> None:
        """Set the LayerNorm gain to ``gain`` and its bias to 0 (after any re-initialisation of the module)."""
        if self.norm is not None:
            with torch.no_grad():
                self.norm.weight.fill_(self.gain)
                self.norm.bias.zero_()

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
        out = torch.zeros((*tree.shape[:-1], self.d_model))
        if "tree" in parts:
            out = out + self.W_t(self.tree_vector(tree))
        if "cycle" in parts:
            out = out + self.W_c(cycle)
        return out if self.norm is None else self.norm(out)


class SeqEncoder(nn.Module):
    """A bidirectional sequence Transformer over SMILES tokens with a swappable positional encoding.

    ``pe`` is ``"sinusoidal"`` (string positions), ``"tree"``, ``"cycle"``, ``"tree_cycle"`` or ``"ctree_cycle"``
    (the tree part read from a canonical spanning tree of the graph, :func:`canonical_tree_paths`, instead of the
    tree the string wrote); everything else
    (embedding, :class:`helpers.nn.Block` stack, [CLS] pooling, heads) is the same. ``n_out`` graph-level outputs
    from [CLS], ``n_node`` per-token outputs.

    ``sin_gain`` (sinusoidal only; round 7's recipe): the table is multiplied by a learned per-dimension gain
    (parameter ``sin_gain``, starting at :data:`SIN_SCALE`) instead of the fixed :data:`SIN_SCALE`, as the
    tree+cycle term has its LayerNorm's learned per-dimension gain: the model can grow its positions when they
    help. ``dropout``: the blocks' dropout (``helpers.nn.TransformerConfig.dropout``). Both off by default (the
    stored models).
    """

    def __init__(self, vocab_size: int, pe: str = "tree_cycle", d_model: int = 64, n_layer: int = 3,
                 n_head: int = 4, d_ff: int = 128, n_out: int = 1, n_node: int = 0, sin_gain: bool = False,
                 dropout: float = 0.0) -> None:
        V.one_of("pe", pe, SEQ_KINDS)
        sin_gain = V.boolean("sin_gain", sin_gain)
        if sin_gain and pe != "sinusoidal":
            raise ValueError(f"sin_gain is a gain on the sinusoidal table; pe={pe!r} has none")
        for name, v in dict(vocab_size=vocab_size, d_model=d_model, n_layer=n_layer, n_head=n_head, d_ff=d_ff,
                            n_out=n_out).items():
            V.integer(name, v, min=1)
        n_node = V.integer("n_node", n_node, min=0)
        super().__init__()
        self.pe_kind, self.d_model = pe, d_model
        cfg = hnn.TransformerConfig(vocab_size=vocab_size, n_layer=n_layer, n_head=n_head, d_model=d_model,
                                    d_ff=d_ff, pos="none", dropout=dropout)
        self.tok = nn.Embedding(vocab_size, d_model)
        self.ring = nn.Embedding(N_RING_IDS + 1, d_model)  # which closure bond a <ring> token belongs to
        self.pe = None if pe == "sinusoidal" else TreeCyclePE(
            d_model, {"tree": ("tree",), "cycle": ("cycle",), "tree_cycle": ("tree", "cycle"),
                      "ctree_cycle": ("tree", "cycle")}[pe])
        self.canonical_tree = pe == "ctree_cycle"
        self.blocks = nn.ModuleList([hnn.Block(cfg) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, n_out)
        self.node_head = nn.Linear(d_model, n_node) if n_node else None
        self.apply(hnn.Transformer._init)
        if self.pe is not None:
            self.pe.reset_gain()
        # created after the initialisation, from no random draw: every other weight is that of sin_gain=False
        self.sin_gain = nn.Parameter(torch.full((d_model,), SIN_SCALE)) if sin_gain else None

    def _batch(self, batch: object) -> dict[str, Tensor]:
        """A batch from :func:`collate`: the keys, shapes and token ids the encoder reads."""
        V.instance("batch", batch, dict)
        missing = {"ids", "pad", "pos", "tree", "cycle", "atom", "ring", "ctree"} - set(batch)
        if missing:
            raise ValueError(f"batch must come from collate(); it lacks {sorted(missing)}")
        ids = V.token_ids("batch['ids']", batch["ids"], self.tok.num_embeddings)
        if not isinstance(ids, Tensor) or ids.dim() != 2:
            raise ValueError(f"batch['ids'] must be a (B, T) tensor, got {V.describe(batch['ids'])}")
        B, T = ids.shape
        V.tensor("batch['pad']", batch["pad"], shape=(B, T), dtype="bool")
        V.tensor("batch['pos']", batch["pos"], shape=(B, T), dtype="int", min=0)
        V.tensor("batch['atom']", batch["atom"], shape=(B, T), dtype="int", min=-1)
        V.tensor("batch['ring']", batch["ring"], shape=(B, T), dtype="int", min=0, max=N_RING_IDS)
        _tree_cycle(batch["tree"], batch["cycle"])
        for key in ("tree", "ctree"):
            if batch[key].shape != (B, T, DEPTH):
                raise ValueError(f"batch[{key!r}] must have shape ({B}, {T}, {DEPTH}), got {tuple(batch[key].shape)}")
        return batch

    def positional(self, batch: dict[str, Tensor], parts: Sequence[str] | None = None) -> Tensor:
        """The positional encoding of a batch (B, T, d_model); the sinusoidal table is scaled by ``SIN_SCALE``
        to the size of the initial token embeddings, or by the learned gain ``sin_gain`` when the model has one
        (the tree+cycle term by its LayerNorm gain)."""
        batch = self._batch(batch)
        if self.pe is None:
            table = hnn.sinusoidal_table(batch["pos"], self.d_model)
            gain = SIN_SCALE if self.sin_gain is None else self.sin_gain
            return gain * table * batch["pad"][..., None]
        tree = batch["ctree"] if self.canonical_tree else batch["tree"]
        return self.pe(tree, batch["cycle"], parts) * (batch["atom"] >= 0)[..., None]

    def encode(self, batch: dict[str, Tensor], parts: Sequence[str] | None = None,
               inputs_embeds: Tensor | None = None) -> Tensor:
        """Hidden states (B, T, d) after the final norm; ``inputs_embeds`` replaces the token embedding."""
        batch = self._batch(batch)
        if inputs_embeds is not None:
            V.tensor("inputs_embeds", inputs_embeds, shape=(*batch["ids"].shape, self.d_model), dtype="float",
                     finite=False)
        x = self.tok(batch["ids"]) if inputs_embeds is None else inputs_embeds
        x = x + self.ring(batch["ring"]) + self.positional(batch, parts)
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
    """Graph Isomorphism Network (Xu et al. 2019): ``h <- MLP((1 + eps) h + sum of neighbours)``, sum pooling.

    ``cycle=True`` adds a linear map of each atom's ring features (:func:`cycle_features`) to its input embedding.
    ``dropout``: applied to the node states after every layer while training (off by default, the stored models).
    """

    def __init__(self, vocab_size: int, d: int = 64, n_layer: int = 5, n_out: int = 1, n_node: int = 0,
                 cycle: bool = False, dropout: float = 0.0) -> None:
        for name, v in dict(vocab_size=vocab_size, d=d, n_layer=n_layer, n_out=n_out).items():
            V.integer(name, v, min=1)
        n_node = V.integer("n_node", n_node, min=0)
        cycle = V.boolean("cycle", cycle)
        self.dropout = V.number("dropout", dropout, min=0, max=1, strict_max=True)
        super().__init__()
        self.emb = nn.Embedding(vocab_size, d)
        # cycle=True: the ring features of the cycle encoding are node inputs too (a fair structural baseline)
        self.cyc = nn.Linear(CYCLE_DIM, d) if cycle else None
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
        if self.cyc is not None:
            if g.cycle is None or g.cycle.shape != (len(g.x), CYCLE_DIM):
                raise ValueError("g.cycle must hold (nodes, CYCLE_DIM) ring features (see graph_batch)")
            h = h + self.cyc(g.cycle)
        pooled = [torch.zeros(g.n_graphs, h.shape[1]).index_add_(0, g.graph, h)]
        src, dst = g.edges
        for eps, mlp in zip(self.eps, self.mlps):
            agg = torch.zeros_like(h).index_add_(0, dst, h[src])
            h = mlp((1 + eps) * h + agg)
            if self.dropout:
                h = F.dropout(h, self.dropout, self.training)
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
    :class:`SeqEncoder`. The bias is passed to the blocks as an additive float mask. ``cycle=True`` adds a linear
    map of each atom's ring features (:func:`cycle_features`) to its input, as ``GIN(cycle=True)`` does.
    """

    def __init__(self, vocab_size: int, d_model: int = 64, n_layer: int = 3, n_head: int = 4, d_ff: int = 128,
                 n_out: int = 1, n_node: int = 0, cycle: bool = False, dropout: float = 0.0) -> None:
        for name, v in dict(vocab_size=vocab_size, d_model=d_model, n_layer=n_layer, n_head=n_head, d_ff=d_ff,
                            n_out=n_out).items():
            V.integer(name, v, min=1)
        n_node = V.integer("n_node", n_node, min=0)
        super().__init__()
        cfg = hnn.TransformerConfig(vocab_size=vocab_size, n_layer=n_layer, n_head=n_head, d_model=d_model,
                                    d_ff=d_ff, pos="none", dropout=dropout)
        self.n_head = n_head
        self.tok = nn.Embedding(vocab_size, d_model)
        self.deg = nn.Embedding(6, d_model)
        self.spd_bias = nn.Embedding(12, n_head)  # 0: [CLS] link, 1..10: distance 0..9, 11: other component
        self.cyc = nn.Linear(CYCLE_DIM, d_model, bias=False) if V.boolean("cycle", cycle) else None
        self.blocks = nn.ModuleList([hnn.Block(cfg) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, n_out)
        self.node_head = nn.Linear(d_model, n_node) if n_node else None
        self.apply(hnn.Transformer._init)

    def forward(self, g: GraphBatch):
        """Graph-level outputs (B, n_out) (and per-atom outputs when ``n_node``)."""
        _graph_batch(g, self.tok.num_embeddings)
        x = self.tok(g.dense_ids) + self.deg(g.dense_deg)
        if self.cyc is not None:
            if g.dense_cycle is None or g.dense_cycle.shape != (*g.dense_ids.shape, CYCLE_DIM):
                raise ValueError("g.dense_cycle must hold (B, 1 + N_max, CYCLE_DIM) ring features (see graph_batch)")
            x = x + self.cyc(g.dense_cycle)
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


def pe_token_ratio(model: SeqEncoder, batch: dict[str, Tensor]) -> float:
    """Mean norm of the positional term over the mean norm of the token embeddings, on real atom-aligned tokens.

    About 1 means the two terms enter the encoder at the same scale; far above 1, positions swamp what the tokens
    say (an unscaled sinusoidal table is ~35x; an unnormalised tree+cycle term ~7.6x at width 64).
    """
    V.instance("model", model, SeqEncoder)
    batch = model._batch(batch)
    real = batch["pad"] & (batch["atom"] >= 0)
    if not real.any():
        raise ValueError("batch must hold at least one real token aligned to an atom")
    with torch.no_grad():
        pe = model.positional(batch).norm(dim=-1)[real].mean()
        tok = model.tok(batch["ids"]).norm(dim=-1)[real].mean()
    return float(pe / tok)


def pe_scale_matched(ratios: dict[str, float] | Sequence[float], bound: float = 3.0) -> bool:
    """Whether every ratio (:func:`pe_token_ratio`) lies in ``[1 / bound, bound]``: no positional term swamps the
    token embeddings, and none is negligible next to them."""
    bound = V.number("bound", bound, min=1, strict_min=True)
    vals = list(ratios.values()) if isinstance(ratios, dict) else ratios
    vals = V.sequence("ratios", vals, min_len=1, of=lambda k, x: V.positive(k, x))
    return all(1 / bound <= float(r) <= bound for r in vals)


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


# --------------------------------------------------------------------------------------------------------------
# Structural alerts as a task
# --------------------------------------------------------------------------------------------------------------
_NAMES: set[str] = set()


def alert_match(mol: Chem.Mol | str, name: str) -> set[int]:
    """Atoms matched by the BRENK/PAINS alert whose description is ``name`` (empty set: no match)."""
    mol = _as_mol(mol)
    V.instance("name", name, str)
    alert_atoms(mol)  # builds the catalog
    assert _CATALOG is not None
    if not _NAMES:
        _NAMES.update(_CATALOG.GetEntryWithIdx(i).GetDescription() for i in range(_CATALOG.GetNumEntries()))
    if name not in _NAMES:
        raise ValueError(f"name must be a BRENK or PAINS alert description such as 'nitro_group', got {name!r}")
    atoms: set[int] = set()
    for entry in _CATALOG.GetMatches(mol):
        if entry.GetDescription() == name:
            for fm in entry.GetFilterMatches(mol):
                atoms.update(int(a) for _, a in fm.atomPairs)
    return atoms


def alignment_at_k(scores: np.ndarray, atoms: set[int] | Sequence[int]) -> tuple[float, float]:
    """(share of the top-k scored atoms inside ``atoms``, chance share k / n), with ``k = len(atoms)``."""
    scores = V.array("scores", scores, ndim=1, dtype="float")
    if len(scores) < 2:
        raise ValueError(f"scores must hold one score per atom of a molecule with >= 2 atoms, got {len(scores)}")
    if isinstance(atoms, (str, bytes)) or not isinstance(atoms, (set, frozenset, list, tuple, np.ndarray)):
        raise TypeError(f"atoms must be a set or sequence of atom indices, got {V.describe(atoms)}")
    atoms = {V.index("atoms[i]", a, len(scores)) for a in atoms}
    if not atoms or len(atoms) >= len(scores):
        raise ValueError(f"atoms must be a non-empty proper subset of the {len(scores)} atoms, got {len(atoms)}")
    k = len(atoms)
    top = np.argsort(-scores, kind="stable")[:k]
    return float(np.isin(top, list(atoms)).mean()), k / len(scores)


# --------------------------------------------------------------------------------------------------------------
# Re-rooting metrics
# --------------------------------------------------------------------------------------------------------------
def centred_cosine(a: np.ndarray, b: np.ndarray, centre: np.ndarray) -> np.ndarray:
    """Row-wise cosine similarity of ``a - centre`` and ``b - centre`` (n, d), (n, d), (d,) -> (n,).

    Centring by the mean embedding of many molecules removes the offset every embedding shares (e.g. a biased
    LayerNorm); without it, two unrelated molecules can look similar.
    """
    a = V.array("a", a, ndim=2, dtype="float")
    b = V.array("b", b, shape=a.shape, dtype="float")
    centre = V.array("centre", centre, shape=(a.shape[1],), dtype="float")
    a, b = a - centre, b - centre
    den = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    return np.sum(a * b, axis=1) / np.maximum(den, 1e-12)


# --------------------------------------------------------------------------------------------------------------
# Models, batches, training, prediction, attributions (shared by the notebook and data/07_tree_cycle_pe)
# --------------------------------------------------------------------------------------------------------------
SEQ_KINDS = ("sinusoidal", "tree", "cycle", "tree_cycle", "ctree_cycle")
GRAPH_KINDS = ("graphormer", "graphormer_cycle", "gin", "gin_cycle")


def make_model(kind: str, vocab_size: int, n_out: int = 1, n_node: int = 0, seed: int = 0,
               width: int = 64, sin_gain: bool = False, dropout: float = 0.0) -> nn.Module:
    """A fresh model, initialised from ``seed``: a :class:`SeqEncoder` (``pe = kind``), :class:`GraphormerLite`,
    :class:`GIN`, or either with ring features (``graphormer_cycle``, ``gin_cycle``). Transformers: 3 layers, 4 heads, FF ``2 * width``.
    ``sin_gain`` (the sinusoidal kind only; ignored by the others) and ``dropout``: see :class:`SeqEncoder`."""
    V.one_of("kind", kind, SEQ_KINDS + GRAPH_KINDS)
    seed, width = V.integer("seed", seed, min=0), V.integer("width", width, min=4)
    sin_gain = V.boolean("sin_gain", sin_gain) and kind == "sinusoidal"
    torch.manual_seed(seed)
    if kind in ("gin", "gin_cycle"):
        return GIN(vocab_size, d=width, n_out=n_out, n_node=n_node, cycle=kind == "gin_cycle", dropout=dropout)
    if kind in ("graphormer", "graphormer_cycle"):
        return GraphormerLite(vocab_size, d_model=width, d_ff=2 * width, n_out=n_out, n_node=n_node,
                              cycle=kind == "graphormer_cycle", dropout=dropout)
    return SeqEncoder(vocab_size, pe=kind, d_model=width, d_ff=2 * width, n_out=n_out, n_node=n_node,
                      sin_gain=sin_gain, dropout=dropout)


def is_graph_model(model: object) -> bool:
    return isinstance(model, (GIN, GraphormerLite))


def model_batch(model: nn.Module, items: Sequence[Featurized], vocab: Vocab):
    """The batch ``model`` reads: whole strings (never truncated) for sequence models, graphs otherwise."""
    return graph_batch(items, vocab) if is_graph_model(model) else collate(items)


def _node_outputs(model: nn.Module, node: Tensor, batch, items: Sequence[Featurized]) -> list[Tensor]:
    """Per-atom node outputs (first channel) of each item, in atom order."""
    if isinstance(model, GIN):
        return [n[:, 0] for n in torch.split(node, [len(f.atom_keys) for f in items])]
    if isinstance(model, GraphormerLite):
        return [node[b, : len(f.atom_keys), 0] for b, f in enumerate(items)]
    out = []
    for j, f in enumerate(items):
        per_atom = torch.zeros(len(f.atom_keys))
        m = batch["is_atom"][j]
        per_atom[batch["atom"][j][m]] = node[j, m, 0]
        out.append(per_atom)
    return out


def task_loss(model: nn.Module, items: Sequence[Featurized], target: Tensor, vocab: Vocab) -> Tensor:
    """Graph-level loss (MSE for several outputs, BCE for one), plus BCE on ring membership when the model has
    a node head."""
    b = model_batch(model, items, vocab)
    out = model(b)
    if isinstance(out, tuple):
        out, node = out
        pred = torch.cat(_node_outputs(model, node, b, items))
        ring = torch.from_numpy(np.concatenate([f.in_ring for f in items])).float()
        node_loss = F.binary_cross_entropy_with_logits(pred, ring)
    else:
        node_loss = torch.zeros(())
    if out.shape[1] == 1:
        return F.binary_cross_entropy_with_logits(out[:, 0], target.float().reshape(-1)) + node_loss
    return F.mse_loss(out, target.float()) + node_loss


def fit_model(kind: str, feats: Sequence[Sequence[Featurized]], idx: np.ndarray, targets: Tensor, vocab: Vocab,
              *, steps: int, seed: int, n_node: int = 0, batch_size: int = 32, lr: float = 1e-3,
              width: int = 64, weight_decay: float = 0.01, progress: bool = True, desc: str = "",
              val_idx: np.ndarray | None = None, eval_every: int = 0, auc_idx: np.ndarray | None = None,
              schedule: str = "cosine", warmup: int | None = None, decay_steps: int = 0, augment: bool = True,
              fresh: bool = False, sin_gain: bool = False, dropout: float = 0.0, snapshot_every: int = 0,
              snapshots: dict | None = None):
    """Train one model; returns ``(model, history)``. Sequence models draw one of each molecule's strings
    (canonical + randomized) per visit (``augment=False``: the canonical string only); graph models read the
    graph. Same seed -> same weights. ``fresh`` (round 7): the same draws, but where a randomized string is drawn
    a new one is written for this visit (:func:`random_smiles` of the canonical string, seeded by the step's
    generator) instead of one of the fixed ones, so no training string is seen twice and the training loss
    cannot fall by memorising strings; the canonical string keeps its share (one in ``len(feats[m])``).
    ``sin_gain``/``dropout``: see :func:`make_model`. ``snapshot_every`` (a multiple of ``eval_every``): a copy
    of the weights every that many steps and at the end goes into ``snapshots`` (``{step: state dict}``). ``schedule``/``warmup``/``decay_steps`` go to :func:`helpers.train.fit`
    (default: cosine with a warm-up of a tenth of ``steps``, the regime of the ``models_s<k>`` checkpoints).
    ``val_idx``/``eval_every``: the task loss on those molecules' canonical strings every ``eval_every`` steps
    (``history.evals["val_loss"]``), for the validation-plateau condition. ``auc_idx`` (training molecules, a
    binary task, with ``val_idx``): at each evaluation also the ROC-AUC on them (``"fit_auc"``, the fit
    condition read along training) and on the validation molecules (``"val_auc"``); evaluating changes no
    weight."""
    V.one_of("kind", kind, SEQ_KINDS + GRAPH_KINDS)
    steps, seed = V.integer("steps", steps, min=1), V.integer("seed", seed, min=0)
    eval_every = V.integer("eval_every", eval_every, min=0)
    warmup = steps // 10 if warmup is None else V.integer("warmup", warmup, min=0)
    augment, fresh = V.boolean("augment", augment), V.boolean("fresh", fresh)
    snapshot_every = V.integer("snapshot_every", snapshot_every, min=0)
    if fresh and not augment:
        raise ValueError("fresh draws new randomized strings; it needs augment=True")
    if snapshot_every and (snapshots is None or not eval_every or snapshot_every % eval_every):
        raise ValueError("snapshot_every needs a dict snapshots and eval_every > 0 dividing it")
    V.optional(V.instance, "snapshots", snapshots, dict)
    idx = np.asarray(idx)
    targets = V.tensor("targets", targets, finite=True)
    if len(targets) != len(feats):
        raise ValueError(f"targets must have one row per molecule ({len(feats)}), got {len(targets)}")
    from helpers import train

    n_out = 1 if targets.dim() == 1 else targets.shape[1]
    model = make_model(kind, len(vocab), n_out=n_out, n_node=n_node, seed=seed, width=width, sin_gain=sin_gain,
                       dropout=dropout)
    graph = kind in GRAPH_KINDS
    done = [0]  # steps taken (the step of an evaluation)

    def get(step: int):
        done[0] = step + 1
        r = np.random.default_rng([seed, 7, step])
        mols = r.choice(idx, size=min(batch_size, len(idx)), replace=False)
        js = [0 if graph or not augment else int(r.integers(len(feats[m]))) for m in mols]
        if not fresh:
            return mols, [feats[m][j] for m, j in zip(mols, js)]
        string_seeds = r.integers(2**31 - 2, size=len(mols))  # drawn after js: the same js as fresh=False
        items = [feats[m][0] if j == 0 else refeaturize(random_smiles(feats[m][0].smiles, 1, int(q))[0],
                                                         feats[m][0], vocab)
                 for m, j, q in zip(mols, js, string_seeds)]
        return mols, items

    def loss(model: nn.Module, batch) -> Tensor:
        mols, items = batch
        return task_loss(model, items, targets[torch.as_tensor(mols)], vocab)

    eval_fn = None
    if auc_idx is not None:
        auc_idx = np.asarray(auc_idx)
        if auc_idx.ndim != 1 or not len(auc_idx) or not np.isin(auc_idx, idx).all():
            raise ValueError("auc_idx must be a non-empty 1-d array of training molecules (a subset of idx)")
        if targets.dim() != 1 or val_idx is None or not eval_every:
            raise ValueError("auc_idx needs a binary task (1-d targets), val_idx and eval_every > 0")
    if val_idx is not None and eval_every:
        val_idx = np.asarray(val_idx)
        if val_idx.ndim != 1 or not len(val_idx) or np.isin(val_idx, idx).any():
            raise ValueError("val_idx must be a non-empty 1-d index array disjoint from idx")
        val_items = [feats[m][0] for m in val_idx]
        val_y = targets[torch.as_tensor(val_idx)]
        auc_items = [] if auc_idx is None else [feats[m][0] for m in auc_idx]

        def eval_fn(model: nn.Module) -> dict[str, float]:
            out = {"val_loss": float(task_loss(model, val_items, val_y, vocab))}
            if auc_items:
                out["fit_auc"] = roc_auc(model, auc_items, targets[torch.as_tensor(auc_idx)].numpy(), vocab)
                out["val_auc"] = roc_auc(model, val_items, val_y.numpy(), vocab)
            return out

    if snapshot_every:
        inner = eval_fn

        def eval_fn(model: nn.Module) -> dict[str, float]:
            if done[0] % snapshot_every == 0 or done[0] == steps:
                snapshots[done[0]] = {k: v.detach().clone() for k, v in model.state_dict().items()}
            return inner(model) if inner is not None else {}

    hist = train.fit(model, loss, get, steps, lr=lr, warmup=warmup, seed=seed, weight_decay=weight_decay,
                     progress=progress, desc=desc or kind, eval_fn=eval_fn, eval_every=eval_every,
                     schedule=schedule, decay_steps=decay_steps)
    model.eval()
    return model, hist


@torch.no_grad()
def predict(model: nn.Module, items: Sequence[Featurized], vocab: Vocab, chunk: int = 128):
    """Graph-level outputs (n, n_out) and, for models with a node head, per-atom node outputs (list)."""
    V.instance("model", model, nn.Module)
    items = V.sequence("items", items, min_len=1, of=lambda k, x: V.instance(k, x, Featurized))
    outs, nodes = [], []
    for i in range(0, len(items), chunk):
        part = items[i: i + chunk]
        b = model_batch(model, part, vocab)
        o = model(b)
        if isinstance(o, tuple):
            o, node = o
            nodes += _node_outputs(model, node, b, part)
        outs.append(o)
    return torch.cat(outs), nodes


def roc_auc(model: nn.Module, items: Sequence[Featurized], y: Sequence[float], vocab: Vocab) -> float:
    """ROC-AUC of a binary model's logit on ``items`` against 0/1 labels ``y``; NaN when ``y`` has one class only.

    Scored on a model's own training molecules it says whether the model fits them (the chapter's fit condition).
    """
    from sklearn.metrics import roc_auc_score

    V.instance("model", model, nn.Module)
    items = V.sequence("items", items, min_len=1, of=lambda k, x: V.instance(k, x, Featurized))
    y = np.asarray(y, dtype=float).ravel()
    if len(y) != len(items) or not np.isin(y, (0.0, 1.0)).all():
        raise ValueError(f"y must hold one 0/1 label per item ({len(items)}), got {len(y)} values")
    if not 0 < y.mean() < 1:
        return float("nan")
    with torch.no_grad():
        out, _ = predict(model, items, vocab)
    return float(roc_auc_score(y, out[:, 0].float().numpy()))


@torch.no_grad()
def pooled(model: SeqEncoder, items: Sequence[Featurized], atoms_only: bool = False,
           parts: Sequence[str] | None = None) -> np.ndarray:
    """[CLS] embeddings (n, d) after the final norm, whole strings."""
    V.instance("model", model, SeqEncoder)
    return model.encode(collate(items, atoms_only=atoms_only), parts)[:, 0].numpy()


def _cls_logit(model: SeqEncoder, batch: dict[str, Tensor], x: Tensor) -> Tensor:
    """``model.head(model.encode(batch, inputs_embeds=x)[:, 0])[:, 0]`` (B,), the last block computed for the
    [CLS] row only (the head reads nothing else): the same numbers up to float rounding, a third less work for
    :func:`integrated_gradients` (review of round 5; the unit test compares it with :meth:`SeqEncoder.encode`).
    A batch without padding skips the all-True attention mask."""
    x = x + model.ring(batch["ring"]) + model.positional(batch)
    pad = batch["pad"]
    mask = None if bool(pad.all()) else (pad[:, None, :] & torch.ones_like(pad)[:, :, None])[:, None]
    for blk in model.blocks[:-1]:
        x = blk(x, mask)
    blk, att = model.blocks[-1], model.blocks[-1].attn
    h = blk.ln1(x)
    B, T, C = h.shape
    w, bias = att.qkv.weight, att.qkv.bias
    q = F.linear(h[:, :1], w[:C], None if bias is None else bias[:C])
    k, v = F.linear(h, w[C:], None if bias is None else bias[C:]).split(C, dim=-1)
    q = q.view(B, 1, att.n_head, att.head_dim).transpose(1, 2)
    k, v = (t.view(B, T, att.n_head, att.head_dim).transpose(1, 2) for t in (k, v))
    y = F.scaled_dot_product_attention(q, k, v, attn_mask=None if mask is None else mask[:, :, :1])
    x0 = x[:, :1] + att.proj(y.transpose(1, 2).reshape(B, 1, C))
    x0 = x0 + blk.mlp(blk.ln2(x0))
    return model.head(model.ln_f(x0)[:, 0])[:, 0]


def integrated_gradients(model: SeqEncoder, feat: Featurized, steps: int = 16) -> tuple[np.ndarray, float]:
    """Integrated gradients of the first output w.r.t. the token embeddings (baseline: zero embeddings for every
    token but [CLS]; positions and ring-ids kept), summed over the tokens aligned to each atom. Returns (per-atom attributions (N,), completeness gap
    ``sum(attr) - (f(x) - f(baseline))``). Midpoint rule with ``steps`` points, in one batch (one collated
    string repeated; the logit by :func:`_cls_logit`)."""
    V.instance("model", model, SeqEncoder)
    V.instance("feat", feat, Featurized)
    steps = V.integer("steps", steps, min=1)
    one = collate([feat])
    b = {key: v.expand(steps, *v.shape[1:]) for key, v in one.items()}
    emb = model.tok(one["ids"]).detach()
    keep = torch.zeros_like(emb)
    keep[:, 0] = emb[:, 0]  # the [CLS] embedding is not attributed: it stays on the whole path
    emb = emb - keep
    alpha = ((torch.arange(steps, dtype=torch.float32) + 0.5) / steps)[:, None, None]
    x = (keep + alpha * emb).requires_grad_(True)
    out = _cls_logit(model, b, x)
    (grad,) = torch.autograd.grad(out.sum(), x)
    tok_attr = (emb[0] * grad.mean(0)).sum(-1)[1:]  # (T - 1,) real tokens after [CLS]
    per_atom = torch.zeros(len(feat.atom_keys)).index_add_(0, one["atom"][0][1:], tok_attr)
    with torch.no_grad():
        full = model.head(model.encode(one, inputs_embeds=keep + emb)[:, 0])[0, 0]
        base = model.head(model.encode(one, inputs_embeds=keep)[:, 0])[0, 0]
    gap = float(tok_attr.sum() - (full - base))
    return per_atom.detach().numpy(), gap


# --------------------------------------------------------------------------------------------------------------
# Data sets (the same for the notebook and the checkpoint script)
# --------------------------------------------------------------------------------------------------------------
def synthetic_set(n: int, seed: int = 0) -> list[str]:
    """``n`` distinct synthetic ring systems (canonical SMILES), seeded."""
    from helpers import repro

    n, seed = V.integer("n", n, min=1), V.integer("seed", seed, min=0)
    rng = repro.rng(seed, 1)
    smiles = sorted({random_ring_system(rng) for _ in range(int(n * 1.2))})
    rng.shuffle(smiles)
    return smiles[:n]


def property_set(name: str, n: int, seed: int = 0) -> tuple[list[str], np.ndarray, np.ndarray, str]:
    """At most ``n`` molecules of :func:`load_bioactivity` (seeded subsample): smiles, labels, is_test, source."""
    from helpers import repro

    n, seed = V.integer("n", n, min=1), V.integer("seed", seed, min=0)
    smiles, y, test, source = load_bioactivity(name)
    sel = repro.rng(seed, 2).permutation(len(smiles))[:n]
    return [smiles[i] for i in sel], y[sel], test[sel], source


def vocab_for(*smiles_lists: Sequence[str]) -> Vocab:
    """The vocabulary of all atom keys in the given SMILES lists."""
    return Vocab({atom_key(a) for sl in smiles_lists for s in sl for a in parse_smiles(s).GetAtoms()})


def featurize_set(smiles: Sequence[str], vocab: Vocab, n_aug: int = 0, seed: int = 0,
                  only: Sequence[int] | None = None, progress: bool = False) -> list[list[Featurized]]:
    """Per molecule: its canonical string first, then ``n_aug`` randomized ones (seeded by molecule index).
    ``only``: augment just these molecules (the others get their canonical string alone)."""
    n_aug, seed = V.integer("n_aug", n_aug, min=0), V.integer("seed", seed, min=0)
    aug = set(range(len(smiles))) if only is None else {int(i) for i in only}
    out = []
    it = range(len(smiles))
    if progress:
        from tqdm.auto import tqdm

        it = tqdm(it, desc="featurize", mininterval=2)
    for i in it:
        s = smiles[i]
        strings = [s] + (random_smiles(s, n_aug, seed * 100_000 + i) if n_aug and i in aug else [])
        out.append([featurize(x, vocab) for x in strings])
    return out


MODEL_NAMES = ("models_s0", "models_s1", "models_s2")  # one checkpoint per model seed (one training job each)


def checkpoint_config(name: str = "models_s0", *, quick: bool = False, seed: int = 0) -> dict:
    """The training configuration of the chapter's stored checkpoint ``models_s<k>`` (the models of seed ``k``;
    ``quick``: a tiny one, seed ``seed``, trained live); ``wsd_s<k>_<family>``: :func:`recipe_config`. Each seed's randomized training strings are drawn from
    that seed (:func:`prepare`); the data split is the same for every seed."""
    V.instance("name", name, str)
    if name.startswith("wsd_"):  # the registered retraining recipe (make_wsd.py), one checkpoint per family x seed
        return recipe_config(name, quick=quick, seed=seed)
    if name.startswith(tuple(f"{r}_" for r in FRESH_RECIPES)):  # round 7's recipes (make_fresh.py)
        return fresh_config(name, quick=quick, seed=seed)
    m = re.fullmatch(r"models_s(\d+)", name)
    if m is None:
        raise ValueError(f"name must be a checkpoint name such as 'models_s0' (one per seed) or "
                         f"'wsd_s0_prop_cycle' (the registered recipe), got {name!r}")
    quick, seed = V.boolean("quick", quick), V.integer("seed", seed, min=0)
    # the property task has its own regime (steps, learning rate, evaluation interval; round 4): at 800 steps
    # and lr 1e-3 its sequence models stayed below the fit condition; the other tasks keep lr and eval_every
    cfg = dict(n_synth=1200, dataset="CHEMBL204_Ki", n_prop=2754, n_aug=5, val_frac=0.1, steps_synth=500,
               steps_prop=2500, lr_prop=2e-3, eval_every_prop=100, steps_alert=300, eval_every=40,
               batch_size=32, width_synth=32, width=64, lr=1e-3,
               alert="imine_1", seeds=[int(m.group(1))],
               synth_kinds=["sinusoidal", "cycle", "tree_cycle", "gin", "gin_cycle"],
               prop_kinds=["sinusoidal", "tree_cycle", "cycle", "graphormer_cycle", "gin"],
               alert_kinds=["sinusoidal", "tree_cycle", "cycle"], sin_scale=round(SIN_SCALE, 6), pe_gain=PE_GAIN)
    if quick:
        cfg.update(n_synth=120, n_prop=160, steps_synth=12, steps_prop=12, steps_alert=12, eval_every=4,
                   eval_every_prop=4, batch_size=16, width=32, seeds=[seed])
    return cfg


def val_split(idx: np.ndarray, frac: float, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Split training indices ``idx`` into (train, validation), the validation part a seeded ``frac`` of them."""
    idx = V.array("idx", idx, ndim=1, dtype="int")
    frac = V.probability("frac", frac)
    seed = V.integer("seed", seed, min=0)
    if not 0 < frac < 1 or len(idx) < 2:
        raise ValueError(f"frac must be in (0, 1) and idx hold >= 2 indices, got frac={frac}, {len(idx)} indices")
    from helpers import repro

    perm = repro.rng(seed, 9).permutation(len(idx))
    n_val = max(1, int(round(frac * len(idx))))
    return np.sort(idx[perm[n_val:]]), np.sort(idx[perm[:n_val]])


def fit_sample(idx: np.ndarray, n: int = 600) -> np.ndarray:
    """The training molecules a fit condition is scored on: a fixed seeded sample of at most ``n`` of ``idx``
    (the same for every model seed)."""
    idx = V.array("idx", idx, ndim=1, dtype="int")
    n = V.integer("n", n, min=1)
    if not len(idx):
        raise ValueError("idx must hold at least one training molecule")
    from helpers import repro

    return repro.rng(0, 7).choice(idx, size=min(n, len(idx)), replace=False)


def prepare(cfg: dict, augment: bool = True, progress: bool = False) -> dict:
    """Data for every task: SMILES, targets, splits (train / validation / test), vocabulary and featurized
    strings (training molecules with ``n_aug`` randomized strings each when ``augment``, drawn from the first
    model seed of ``cfg``; validation and test molecules with their canonical string)."""
    V.instance("cfg", cfg, dict)
    augment = V.boolean("augment", augment)
    n_aug = cfg["n_aug"] if augment else 0
    string_seed = int(cfg["seeds"][0])
    syn = synthetic_set(cfg["n_synth"])
    ps, py, ptest, source = property_set(cfg["dataset"], cfg["n_prop"])
    vocab = vocab_for(syn, ps)
    n_tr = int(0.8 * len(syn))
    syn_tr, syn_val = val_split(np.arange(n_tr), cfg["val_frac"])
    syn_te = np.arange(n_tr, len(syn))
    p_tr, p_val = val_split(np.flatnonzero(~ptest), cfg["val_frac"])
    p_te = np.flatnonzero(ptest)
    alert_sets = [alert_match(s, cfg["alert"]) for s in ps]
    return dict(
        synth_smiles=syn, synth_tr=syn_tr, synth_val=syn_val, synth_te=syn_te,
        synth_counts=torch.tensor(np.array([ring_count_targets(s) for s in syn]), dtype=torch.float32),
        synth_feats=featurize_set(syn, vocab, n_aug, seed=string_seed, only=syn_tr, progress=progress),
        prop_smiles=ps, prop_y=torch.tensor(py, dtype=torch.float32), prop_tr=p_tr, prop_val=p_val, prop_te=p_te,
        source=source, prop_feats=featurize_set(ps, vocab, n_aug, seed=string_seed, only=p_tr, progress=progress),
        alert_sets=alert_sets, alert_y=torch.tensor([float(bool(a)) for a in alert_sets]), vocab=vocab,
    )


TASKS = ("synth", "prop", "alert")


def jobs_of(cfg: dict, tasks: Sequence[str] | None = None,
            kinds: Sequence[str] | None = None) -> list[tuple[str, str, int]]:
    """Every (task, kind, seed) that :func:`train_all` trains for ``cfg`` (only ``tasks`` / ``kinds`` if given)."""
    V.instance("cfg", cfg, dict)
    tasks = TASKS if tasks is None else V.sequence(
        "tasks", tasks, min_len=1, of=lambda k, x: V.one_of(k, x, TASKS))
    kinds = None if kinds is None else V.sequence(
        "kinds", kinds, min_len=1, of=lambda k, x: V.one_of(k, x, SEQ_KINDS + GRAPH_KINDS))
    jobs = [(task, kind, s) for s in cfg["seeds"] for task in TASKS if task in tasks
            for kind in cfg[f"{task}_kinds"] if kinds is None or kind in kinds]
    if not jobs:
        raise ValueError(f"no model of cfg is in tasks {list(tasks)} and kinds {kinds}")
    return jobs


def task_regime(cfg: dict, task: str) -> dict:
    """The training regime of ``task`` under ``cfg``: steps, learning rate, evaluation interval, width (a task's
    own ``lr_<task>`` / ``eval_every_<task>`` when the config has one, else the shared ``lr`` / ``eval_every``)."""
    V.instance("cfg", cfg, dict)
    V.one_of("task", task, TASKS)
    return dict(steps=cfg[f"steps_{task}"], lr=cfg.get(f"lr_{task}", cfg["lr"]),
                eval_every=cfg.get(f"eval_every_{task}", cfg["eval_every"]),
                width=cfg["width_synth" if task == "synth" else "width"], batch_size=cfg["batch_size"])


def tag_of(task: str, kind: str, seed: int) -> str:
    """The checkpoint prefix of one trained model."""
    return f"{task}-{kind}-s{seed}"


def build_model(cfg: dict, vocab: Vocab, task: str, kind: str, seed: int) -> nn.Module:
    """An untrained model of the right shape for ``task`` (what :func:`train_all` trains)."""
    V.one_of("task", task, ("synth", "prop", "alert"))
    if task == "synth":
        return make_model(kind, len(vocab), n_out=len(RING_SIZES), n_node=1, seed=seed, width=cfg["width_synth"])
    return make_model(kind, len(vocab), n_out=1, seed=seed, width=cfg["width"])


_DATA: dict = {}


def _train_job(job: tuple[str, str, int]):
    task, kind, seed = job
    cfg, d = _DATA["cfg"], _DATA["data"]
    torch.set_num_threads(1)
    feats, idx, val, y = {"synth": (d["synth_feats"], d["synth_tr"], d["synth_val"], d["synth_counts"]),
                          "prop": (d["prop_feats"], d["prop_tr"], d["prop_val"], d["prop_y"]),
                          "alert": (d["prop_feats"], d["prop_tr"], d["prop_val"], d["alert_y"])}[task]
    t0 = time.process_time()
    # the training-sample ROC-AUC along training where the task has its own evaluation interval (prop)
    auc_idx = fit_sample(idx) if f"eval_every_{task}" in cfg else None
    model, hist = fit_model(kind, feats, idx, y, d["vocab"], seed=seed, n_node=1 if task == "synth" else 0,
                            progress=_DATA.get("progress", False), desc=tag_of(*job), val_idx=val,
                            auc_idx=auc_idx, **task_regime(cfg, task))
    return tag_of(*job), model.state_dict(), hist, time.process_time() - t0


def train_all(cfg: dict, data: dict, workers: int = 1, progress: bool = False, log=print,
              tasks: Sequence[str] | None = None, kinds: Sequence[str] | None = None) -> tuple[dict, dict, dict]:
    """Train every (task, kind, seed) of ``cfg`` (only ``tasks`` / ``kinds`` if given): returns ``(state dicts,
    histories, cpu seconds)`` by tag. ``workers > 1`` forks processes (one torch thread each); the weights do not
    depend on it, nor on which other models are trained alongside."""
    V.instance("cfg", cfg, dict)
    workers = V.integer("workers", workers, min=1)
    jobs = jobs_of(cfg, tasks, kinds)
    _DATA.update(cfg=cfg, data=data, progress=progress and workers == 1)
    states, hists, cpu = {}, {}, {}
    if workers == 1:
        results = map(_train_job, jobs)
    else:
        import multiprocessing as mp

        pool = mp.get_context("fork").Pool(workers)
        results = pool.imap_unordered(_train_job, jobs)
    for tag, sd, hist, sec in results:
        states[tag], hists[tag], cpu[tag] = sd, hist, sec
        log(f"{tag}: final loss {np.mean(hist.loss[-20:]):.4f}, {sec:.1f} s CPU")
    if workers > 1:
        pool.close()
        pool.join()
    return states, hists, cpu


def dropped_atoms(batch: dict[str, Tensor], items: Sequence[Featurized]) -> int:
    """How many atoms of ``items`` have no atom token in a :func:`collate` batch (0 unless strings were cut)."""
    V.instance("batch", batch, dict)
    items = V.sequence("items", items, min_len=1, of=lambda k, x: V.instance(k, x, Featurized))
    if "is_atom" not in batch or len(batch["is_atom"]) != len(items):
        raise ValueError("batch must be collate(items)")
    return int(sum(len(f.atom_keys) for f in items) - batch["is_atom"].sum().item())


# --------------------------------------------------------------------------------------------------------------
# The registered retraining recipe (data/07_tree_cycle_pe/make_wsd.py) and its conditions
# --------------------------------------------------------------------------------------------------------------
RECIPE_REGISTERED = "2026-12-06"  # recipe, readings and bars registered on this date, before any recipe training
# one checkpoint (one job) per family x seed; "_canon": trained on canonical strings only (no augmentation)
RECIPE_FAMILIES = ("prop_sinusoidal", "prop_sinusoidal_canon", "prop_tree_cycle", "prop_cycle",
                   "prop_graphormer_cycle", "prop_gin", "alert", "ecfp")
RECIPE_NAMES = tuple(f"wsd_s{s}_{f}" for s in range(3) for f in RECIPE_FAMILIES)
# the bars of recipe_conditions: flat <= 0.05, val_flat <= 0.02 (both "<=", the text and the code agree), fits >= 0.95
RECIPE_BARS = {"flat": 0.05, "val_flat": 0.02, "fits": 0.95}
_RECIPE_FRAC, _RECIPE_NOISE, _RECIPE_TAIL = 0.2, 2.0, 0.1
_ALERT_KINDS = ["sinusoidal", "tree_cycle", "cycle"]


def recipe_config(name: str, *, quick: bool = False, seed: int = 0) -> dict:
    """The config of the registered recipe's checkpoint ``wsd_s<k>_<family>`` (registered on 2026-12-06, before
    training; :data:`RECIPE_FAMILIES`). The data keys are those of ``models_s<k>`` (same molecules, splits and
    seed-``k`` randomized strings). Property models: warmup-stable-decay, 10,000 steps of 32 (warm-up 1,000,
    constant 2e-3, cosine decay over the last 2,000), evaluated every 100 steps; alert models: 1,500 steps
    (warm-up 150, constant 1e-3, decay 300), every 25; ``ecfp``: ECFP4 (radius 2, 2,048 bits) with logistic
    regression (C = 1) and a random forest (500 trees), no training curve. ``quick``: a tiny one, seed ``seed``."""
    V.instance("name", name, str)
    m = re.fullmatch(r"wsd_s(\d+)_([a-z_]+)", name)
    if m is None or m.group(2) not in RECIPE_FAMILIES:
        raise ValueError(f"name must be a recipe checkpoint wsd_s<seed>_<family> with family one of "
                         f"{RECIPE_FAMILIES}, got {name!r}")
    quick, seed = V.boolean("quick", quick), V.integer("seed", seed, min=0)
    k, family = int(m.group(1)), m.group(2)
    data_keys = ("dataset", "n_prop", "n_synth", "n_aug", "val_frac", "batch_size", "sin_scale", "pe_gain", "alert")
    base = checkpoint_config(f"models_s{k}")
    cfg = {key: base[key] for key in data_keys}
    cfg.update(seeds=[k], recipe="wsd", registered=RECIPE_REGISTERED, family=family)
    if family == "ecfp":
        cfg.update(task="prop", radius=2, n_bits=2048, logreg_c=1.0, rf_trees=500)
    elif family == "alert":
        cfg.update(task="alert", kinds=list(_ALERT_KINDS), augment=True, steps=1500, warmup=150, decay_steps=300,
                   lr=1e-3, eval_every=25, width=64)
    else:
        kind = family.removeprefix("prop_")
        cfg.update(task="prop", kinds=[kind.removesuffix("_canon")], augment=not kind.endswith("_canon"),
                   steps=10_000, warmup=1000, decay_steps=2000, lr=2e-3, eval_every=100, width=64)
    if quick:
        cfg.update(n_synth=120, n_prop=160, batch_size=16, seeds=[seed])
        if family == "ecfp":
            cfg.update(n_bits=256, rf_trees=20)
        else:
            cfg.update(steps=12, warmup=2, decay_steps=4, eval_every=4, width=32)
    return cfg


def recipe_until(cfg: dict) -> int:
    """The last step of a recipe model's stable phase, ``steps - decay_steps``: its curves are read up to here."""
    V.instance("cfg", cfg, dict)
    if "decay_steps" not in cfg or "steps" not in cfg:
        raise ValueError("cfg must be a trained family's recipe_config (with 'steps' and 'decay_steps')")
    return V.integer("steps", cfg["steps"], min=1) - V.integer("decay_steps", cfg["decay_steps"], min=0)


def _eval_curve(what: str, curve: object) -> object:
    """A curve as :func:`helpers.train.plateau` reads it; a list of ``(step, value)`` pairs (``History.evals``)
    becomes ``{"step": [...], "value": [...]}``."""
    if isinstance(curve, dict):
        return curve
    if hasattr(curve, "tolist"):
        curve = curve.tolist()
    if isinstance(curve, (list, tuple)) and curve and all(isinstance(p, (list, tuple)) for p in curve):
        if any(len(p) != 2 for p in curve):
            raise ValueError(f"{what}: a list of evaluations must hold (step, value) pairs")
        return {"step": [int(p[0]) for p in curve], "value": [float(p[1]) for p in curve]}
    if isinstance(curve, (list, tuple)):
        return list(curve)
    raise TypeError(f"{what} must be a curve (a list, an array, (step, value) pairs or a manifest curve), got "
                    f"{V.describe(curve)}")


def _values(curve: object) -> list:
    return list(curve["value"]) if isinstance(curve, dict) else list(curve)


def recipe_conditions(loss: object, val_loss: object, fit_auc: object, *, until: int) -> dict[str, dict]:
    """The conditions of one recipe model, registered on 2026-12-06 before any recipe model was trained.

    Each is ``{"value", "op", "bar", "met"}`` (bars :data:`RECIPE_BARS`):

    * ``flat``: ``plateau(loss, 0.2, until=until) <= 0.05``: on the stable phase (constant learning rate; the
      decay's drop is annealing, not learning) the last fifth improved the training loss by at most 5% of its
      whole improvement;
    * ``val_flat``: ``plateau(val_loss, 0.2, until=until, noise=2) <= 0.02``: the same on the validation loss,
      an improvement counted only beyond 2 standard errors of its step-to-step noise; a validation loss that
      rises (over-fitting) reads as flat: more steps would not help;
    * ``fits``: ``tail_mean(fit_auc, 0.1) >= 0.95``: the mean training-sample ROC-AUC over the last tenth of its
      evaluations (an undefined AUC, one class only, reads 0.5).

    Curves: lists (steps 1..n), arrays, ``(step, value)`` pairs (``History.evals``) or a manifest's curves;
    ``until``: :func:`recipe_until`. A loss curve with a non-finite value (diverged) meets nothing.
    """
    from helpers import train

    until = V.integer("until", until, min=2)
    loss, val_loss, fit_auc = (_eval_curve(w, c) for w, c in
                               (("loss", loss), ("val_loss", val_loss), ("fit_auc", fit_auc)))
    out = {}
    for key, curve, noise in (("flat", loss, 0.0), ("val_flat", val_loss, _RECIPE_NOISE)):
        vals = _values(curve)
        if any(not isinstance(v, (int, float)) or isinstance(v, bool) for v in vals):
            raise TypeError(f"{'loss' if key == 'flat' else 'val_loss'} must hold numbers")
        if all(math.isfinite(v) for v in vals):
            value = train.plateau(curve, _RECIPE_FRAC, until=until, noise=noise)
        else:
            value = float("nan")
        out[key] = dict(value=value, op="<=", bar=RECIPE_BARS[key], met=bool(value <= RECIPE_BARS[key]))
    aucs = [0.5 if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isnan(v) else v
            for v in _values(fit_auc)]
    value = train.tail_mean(aucs, _RECIPE_TAIL)
    out["fits"] = dict(value=value, op=">=", bar=RECIPE_BARS["fits"], met=bool(value >= RECIPE_BARS["fits"]))
    return out


def strongest_baseline(val_auc: dict) -> str:
    """Which of several baselines a relative claim compares against (registered on 2026-12-06, before training):
    the one with the highest mean validation ROC-AUC over the last tenth of its evaluations (never the test
    set), e.g. ``{"sinusoidal": curve, "sinusoidal_canon": curve}``; ties go to the first name in sorted order."""
    from helpers import train

    V.instance("val_auc", val_auc, dict)
    if not val_auc:
        raise ValueError("val_auc must name at least one baseline")
    score = {}
    for k in sorted(val_auc):
        V.instance("val_auc key", k, str)
        vals = [0.5 if isinstance(v, float) and math.isnan(v) else v for v in _values(_eval_curve(k, val_auc[k]))]
        score[k] = train.tail_mean(vals, _RECIPE_TAIL)
    return max(sorted(score), key=lambda k: score[k])


def ecfp4(smiles: Sequence[str], radius: int = 2, n_bits: int = 2048) -> np.ndarray:
    """Morgan/ECFP fingerprints (radius 2 = ECFP4) of ``smiles`` as a 0/1 ``uint8`` array (n, n_bits)."""
    from rdkit.Chem import rdFingerprintGenerator

    smiles = V.sequence("smiles", smiles, min_len=1, of=lambda k, x: V.instance(k, x, str))
    radius, n_bits = V.integer("radius", radius, min=1), V.integer("n_bits", n_bits, min=8)
    gen = rdFingerprintGenerator.GetMorganGenerator(radius=radius, fpSize=n_bits)
    return np.stack([gen.GetFingerprintAsNumPy(parse_smiles(s)).astype(np.uint8) for s in smiles])


def ecfp_baseline(smiles: Sequence[str], y: Sequence[float], train_idx: np.ndarray, test_idx: np.ndarray, *,
                  seed: int, radius: int = 2, n_bits: int = 2048, logreg_c: float = 1.0,
                  rf_trees: int = 500) -> dict[str, dict]:
    """The MoleculeACE-standard fingerprint baseline: ECFP4 with logistic regression (``C = logreg_c``) and a
    random forest (``rf_trees`` trees, seeded), fit on ``train_idx``. Returns per model ``train_prob``,
    ``test_prob`` (P(active)) and ``train_auc``, ``test_auc``."""
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score

    smiles = V.sequence("smiles", smiles, min_len=2, of=lambda k, x: V.instance(k, x, str))
    y = np.asarray(y, dtype=float).ravel()
    if len(y) != len(smiles) or not np.isin(y, (0.0, 1.0)).all():
        raise ValueError(f"y must hold one 0/1 label per molecule ({len(smiles)}), got {len(y)} values")
    tr = V.array("train_idx", train_idx, ndim=1, dtype="int")
    te = V.array("test_idx", test_idx, ndim=1, dtype="int")
    for what, ix in (("train_idx", tr), ("test_idx", te)):
        if not len(ix) or ix.min() < 0 or ix.max() >= len(smiles):
            raise ValueError(f"{what} must be non-empty indices into smiles (0..{len(smiles) - 1})")
    if np.isin(tr, te).any():
        raise ValueError("train_idx and test_idx must be disjoint")
    if len(set(y[tr])) < 2:
        raise ValueError("the training molecules must hold both classes")
    seed = V.integer("seed", seed, min=0)
    logreg_c = V.positive("logreg_c", logreg_c)
    rf_trees = V.integer("rf_trees", rf_trees, min=1)
    x = ecfp4(smiles, radius, n_bits)
    models = {"logreg": LogisticRegression(C=logreg_c, max_iter=5000),
              "rf": RandomForestClassifier(n_estimators=rf_trees, random_state=seed, n_jobs=1)}
    out = {}
    for name, model in models.items():
        model.fit(x[tr], y[tr])
        p_tr, p_te = model.predict_proba(x[tr])[:, 1], model.predict_proba(x[te])[:, 1]
        auc = lambda yy, p: float(roc_auc_score(yy, p)) if 0 < yy.mean() < 1 else float("nan")  # noqa: E731
        out[name] = dict(train_prob=p_tr, test_prob=p_te, train_auc=auc(y[tr], p_tr), test_auc=auc(y[te], p_te))
    return out


# --------------------------------------------------------------------------------------------------------------
# Round 7 (data/07_tree_cycle_pe/make_fresh.py): recipes A ("fresh") and B ("freshreg") and the probe's reading,
# registered on 2026-12-07 before any of their models was trained
# --------------------------------------------------------------------------------------------------------------
FRESH_REGISTERED = "2026-12-07"
# A: the wsd recipe + a fresh randomized string at every visit + a learned gain on the sinusoidal table;
# B: A + dropout 0.1 in every trained model + AdamW weight decay 0.05 (the wsd recipe: 0.0 and 0.01)
FRESH_RECIPES = {"fresh": dict(fresh=True, sin_gain=True, dropout=0.0, weight_decay=0.01),
                 "freshreg": dict(fresh=True, sin_gain=True, dropout=0.1, weight_decay=0.05)}
# A changes only what reads strings or the sinusoidal table (GIN, Graphormer-lite and ECFP keep their wsd
# checkpoints, which A would rebuild bit for bit); B changes every trained model
FRESH_FAMILIES = {"fresh": ("prop_sinusoidal", "prop_tree_cycle", "prop_cycle", "prop_sinusoidal_canon", "alert"),
                  "freshreg": ("prop_gin", "prop_sinusoidal", "prop_tree_cycle", "prop_cycle",
                               "prop_sinusoidal_canon", "prop_graphormer_cycle", "alert")}  # probe's order first
FRESH_NAMES = tuple(f"{r}_s{s}_{f}" for r in FRESH_RECIPES for s in range(3) for f in FRESH_FAMILIES[r])
# each recipe's probe, seed 0, in the order its arms are trained (one process; make_fresh.py); A's arms are those
# whose training A changes and that a verdict compares (GIN is unchanged by A); B's add GIN, which B changes
# and which fails flat at every seed under the wsd recipe, first because it is cheap (4 min)
FRESH_PROBE = {"fresh": ("fresh_s0_prop_sinusoidal", "fresh_s0_prop_tree_cycle"),
               "freshreg": ("freshreg_s0_prop_gin", "freshreg_s0_prop_sinusoidal", "freshreg_s0_prop_tree_cycle")}
POSITION_USE_BAR = 0.01  # a model uses its positions when removing them costs >= 0.01 validation ROC-AUC


def fresh_config(name: str, *, quick: bool = False, seed: int = 0) -> dict:
    """The config of round 7's checkpoint ``<recipe>_s<k>_<family>`` (registered on 2026-12-07, before training):
    :func:`recipe_config`'s ``wsd_s<k>_<family>`` (same data, schedule, steps, bars) plus :data:`FRESH_RECIPES`
    [recipe]: ``fresh`` (a new randomized string at every visit; not for the canonical-only family),
    ``sin_gain``, ``dropout``, ``weight_decay``, and ``snapshot_every`` (weights kept every 2,000 property / 300
    alert steps and at the end)."""
    V.instance("name", name, str)
    m = re.fullmatch(r"(fresh|freshreg)_s(\d+)_([a-z_]+)", name)
    if m is None or m.group(3) not in FRESH_FAMILIES[m.group(1)]:
        raise ValueError(f"name must be a round-7 checkpoint <recipe>_s<seed>_<family> (recipe fresh: families "
                         f"{FRESH_FAMILIES['fresh']}; freshreg: {FRESH_FAMILIES['freshreg']}), got {name!r}")
    recipe, k, family = m.group(1), int(m.group(2)), m.group(3)
    cfg = recipe_config(f"wsd_s{k}_{family}", quick=quick, seed=seed)
    cfg.update(FRESH_RECIPES[recipe], recipe=recipe, registered=FRESH_REGISTERED)
    cfg["fresh"] = cfg["fresh"] and cfg["augment"]
    cfg["snapshot_every"] = cfg["eval_every"] * 2 if quick else (2000 if cfg["task"] == "prop" else 300)
    return cfg


def fresh_probe_reading(conditions: dict, recipe: str = "fresh") -> dict:
    """Round 7's probe rule (registered on 2026-12-07, before the probe): ``conditions`` maps each probed arm
    (family of :data:`FRESH_PROBE` [recipe]) to its :func:`recipe_conditions` at seed 0. The recipe is met when
    every arm meets ``flat``, ``val_flat`` and ``fits`` (the registered bars, unchanged). Arms are trained in
    order and the probe stops once an arm fails (the rule is decided; the rest would cost slot time and change
    nothing). Returns ``{"met", "failing": {arm: [condition, ...]}, "not_trained", "next"}``: met -> train the
    recipe's families at seeds 0-2; A (``fresh``) not met -> probe B (``freshreg``); B not met -> no further
    retraining under these conditions (the claims stay inconclusive where a condition fails); ``met`` None
    (undecided) while arms are ``not_trained`` and every trained one meets the bars -> train the rest."""
    V.one_of("recipe", recipe, tuple(FRESH_RECIPES))
    V.instance("conditions", conditions, dict)
    arms = [n.split("_", 2)[2] for n in FRESH_PROBE[recipe]]
    unknown = set(conditions) - set(arms)
    if not conditions or unknown:
        raise ValueError(f"conditions must map some of {recipe}'s probed arms {arms} to their conditions"
                         + (f"; {sorted(unknown)} are not probed arms" if unknown else ""))
    failing = {}
    for arm, cond in sorted(conditions.items()):
        V.instance(f"conditions[{arm!r}]", cond, dict)
        missing = set(RECIPE_BARS) - set(cond)
        if missing:
            raise ValueError(f"conditions[{arm!r}] lacks {sorted(missing)} (recipe_conditions gives all three)")
        bad = [k for k in RECIPE_BARS if not cond[k]["met"]]
        if bad:
            failing[arm] = bad
    not_trained = [a for a in arms if a not in conditions]
    if not_trained and not failing:
        return dict(met=None, failing={}, not_trained=not_trained,
                    next=f"undecided: train the probe's remaining arm(s) {', '.join(not_trained)} at seed 0")
    met = not failing
    if met:
        nxt = f"train {recipe}'s families at seeds 0-2"
    elif recipe == "fresh":
        nxt = "probe B (freshreg: A + dropout 0.1 + weight decay 0.05) at seed 0"
    else:
        nxt = "no further retraining under these conditions"
    return dict(met=met, failing=failing, not_trained=not_trained, next=nxt)


def uses_positions(auc: float, auc_without: float) -> bool:
    """A model uses its positional encoding when removing it at test time costs at least
    :data:`POSITION_USE_BAR` validation ROC-AUC (registered on 2026-12-07; recorded, gates no claim)."""
    auc, auc_without = V.number("auc", auc), V.number("auc_without", auc_without)
    return bool(auc - auc_without >= POSITION_USE_BAR)
