# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Tree+Cycle positions: one molecule, one encoding, whatever the SMILES
#
# A SMILES string is a depth-first walk over a molecule's graph. Start the walk at another atom, or open a ring at
# another bond, and you get another string for the same molecule; a sequence Transformer with sinusoidal
# positions sees each string as a different input and gives each a different embedding. Graph Transformers avoid
# this by reading the graph, but many pipelines only ever receive the string.
#
# The paper keeps the sequence model and changes only its positional encoding. Every structural token of a
# *graph-aware* serialization is aligned to an atom, and the atom's position is computed from the graph:
#
# * a **tree positional encoding** (the root path's child indices, Shiv & Quirk 2019) taken with a canonical root
#   and canonical sibling order. For acyclic molecules it is a graph invariant. For rings it is not: which ring
#   bond the string opens changes the spanning tree (the paper's Prop. 2);
# * a **cycle encoding** from a canonical cycle basis (ring count, sizes, aromaticity, fusion, position around
#   each ring): the same for every way of writing the molecule, an anchor on ring atoms.
#
# Their sum replaces the sinusoidal encoding; the Transformer itself is unchanged. The paper reports a cosine
# similarity of 0.977 ± 0.029 between embeddings of re-rooted SMILES, 2× lower cycle-counting error than GIN, <!-- paper -->
# better ROC-AUC than a parameter-matched Graphormer on BACE and BBBP, and +5 points of structural-alert alignment
# over a sinusoidal baseline. We measure each of these, with three seeds, and with baselines chosen to be hard to
# beat:
#
# * **re-rooting** is measured on whole strings (nothing is cut), at the level that matters to a user (how much
#   the predicted probability moves between rootings) and by a *centred* cosine next to the cosine between
#   *different* molecules, so that a collapsed embedding cannot look invariant;
# * the cycle encoding hands the model ring sizes, so the **cycle-counting** baseline is GIN *given the same ring
#   features* as node inputs, and a Transformer given the ring features alone;
# * **alert alignment** is a task of its own: the label is "contains the BRENK alert X", so the atoms that decide
#   the label are known, and integrated-gradients attributions are scored against them and against chance.
#
# | | paper | this notebook |
# |---|---|---|
# | sequence model | Transformer encoder (size not public) | 3 layers, d = 64, 4 heads, FF 128, [CLS] pooling (~110k parameters) |
# | ring-closure tokens | (not public) | one `<ring>` token type + a ring-id embedding (closure bonds numbered canonically), not the written digits |
# | positional encodings | sinusoidal, tree, tree+cycle | sinusoidal (table scaled to the token embeddings' size); tree+cycle through a LayerNorm whose gain starts at the same size; cycle-only; tree+cycle with the tree taken from a *canonical* spanning tree of the graph instead of the string's (implemented and checked; not trained in this run) |
# | baselines | GIN, parameter-matched Graphormer | GIN (5 layers) with and without the ring features as node inputs; Graphormer-lite (degree embeddings, shortest-path attention bias) with the same blocks, given the ring features; a sinusoidal Transformer trained on canonical strings only; ECFP4 fingerprints + logistic regression / random forest |
# | synthetic data | cycle counting, ring membership | our generator of fused, spiro, bridged and chain molecules; ring counts *by size* (width 32 models) |
# | property data | BACE, BBBP | MoleculeACE's thrombin set CHEMBL204 Ki, binarized at pKi ≥ 7 like BACE; BACE/BBBP are not available offline |
# | alerts | structural-alert alignment | a task "contains BRENK `imine_1`" on the same molecules; integrated gradients vs the matched atoms |
# | re-rooting | n = 24,960 pairs | every heavy atom as root for the held-out molecules we sample |
# | training | GPU, augmentation | property and alert models: the recipe registered before training (`data/07_tree_cycle_pe/make_wsd.py`, warmup-stable-decay, 10,000 steps of 32 for property, 1,500 for alert), one checkpoint per model family and seed; synthetic models: an earlier round's 500 steps (`make_models.py`); 5 randomized SMILES per training molecule drawn from each seed, validation curves along the way, 3 seeds; the default run loads the weights, quick mode trains tiny models live |
#
# :::{note}
# **What is reconstructed.** The full paper and its code are not public; everything beyond the abstract is our
# reconstruction from prior work. In particular: the token -> atom alignment (bond symbols -> the atom they lead
# into, ring-closure tokens -> the atom carrying them, parentheses -> the branch-point atom), the `<ring>` token
# with a canonical ring-id, the canonical root (RDKit's canonical rank 0) and sibling order (canonical rank), the
# tree depth (k = 8) and branching (n = 4), the cycle basis (greedy GF(2) choice from RDKit's symmetrized SSSR in
# canonical order) and the exact list of cycle features, the LayerNorm that puts the encoding at token scale, the
# canonical spanning tree of the `ctree_cycle` variant, the alert task, the attribution method and the
# alert-alignment metric. Stereochemistry is dropped. The property task uses a MoleculeACE ChEMBL set instead of
# BACE/BBBP, which cannot be loaded offline.
# :::

# %% [markdown]
# ## 1. Setup
#
# In Colab, the first code cell installs this book's `helpers` package with its chemistry extra (RDKit, PySCF,
# ASE); anywhere else it does nothing. The property task reads MoleculeACE's data if that package is installed
# (`pip install --no-deps moleculeace==3.0.0`); otherwise a smaller ChEMBL set shipped with RDKit stands in. <!-- paper -->

# %% tags=["hide-input"]
# Colab bootstrap: install this book's `helpers` package in Colab, and the MoleculeACE
# wheel for the benchmark CSVs it ships (--no-deps: only its files are read); do nothing
# elsewhere. The checkpoints are downloaded (verified by sha256) on first use.
import importlib.util
import subprocess
import sys

if "google.colab" in sys.modules and importlib.util.find_spec("helpers") is None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "neurips2026-executed-helpers[chem] @ "
            "git+https://github.com/neurips2026-executed/book@main",
        ],
        check=True,
    )
if "google.colab" in sys.modules and importlib.util.find_spec("MoleculeACE") is None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "MoleculeACE==3.0.0",
        ],
        check=True,
    )

# %% tags=["parameters"]
quick = False
seed = 0  # quick mode trains this one seed; the default run loads seeds 0, 1, 2
n_reroot = 30  # held-out molecules re-rooted at every heavy atom
n_check = 40  # molecules per invariance check
n_alert = 120  # held-out molecules with the alert whose attributions are scored
ig_steps = 96  # integration points of integrated gradients (round 5: 64 fail the
# completeness check; round 6: 128 -> 96 for time, the same top-k atoms, §9)

# %% tags=["hide-input"]
import copy
import json
import time

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F
from IPython.display import Markdown, display
from rdkit import Chem
from rdkit.Chem.Scaffolds import MurckoScaffold
from scipy.stats import rankdata
from sklearn.metrics import roc_auc_score
from tqdm.auto import tqdm

from helpers import checkpoints, claims, plotting, repro, scripts, train
from helpers import tree_cycle_pe as tc

if quick:
    n_reroot, n_check, n_alert, ig_steps = 4, 8, 12, 8

# models this small run faster on one intra-op thread
env = repro.setup(seed, threads=1)
plotting.use_style()
cfg = tc.checkpoint_config(quick=quick, seed=seed)
if not quick:  # models of seeds seed, seed + 1, seed + 2 (0: the committed config)
    cfg = scripts.with_seeds(cfg, scripts.model_seeds(seed))
seeds = cfg["seeds"]
n_synth = cfg["n_synth"]
rec = claims.ClaimsRecord(
    "07_tree_cycle_pe",
    dict(
        quick=quick,
        seed=seed,
        n_reroot=n_reroot,
        n_check=n_check,
        n_alert=n_alert,
        ig_steps=ig_steps,
        **{k: v for k, v in cfg.items() if not k.endswith("kinds")},
    ),
)
print(env)
print(cfg)

# %% [markdown]
# ## 2. A SMILES string as an aligned sequence
#
# RDKit numbers the atoms of a parsed SMILES in reading order, so atom tokens align to atoms directly. Every other
# token is aligned to an atom too: a bond symbol to the atom it leads into, a ring digit to the atom that carries
# it, a parenthesis to the atom the branch hangs from. The explicit bonds of the string (every bond except the
# ring closures) form the spanning tree that the walk wrote. Here is aspirin, written from two different roots.
#
# The ring-closure digits themselves are labels the writer picks (SMILES reuses `1` as soon as ring 1 is closed),
# so the model does not see them: every digit becomes one token type `<ring>`, and the two `<ring>` tokens of a
# closure bond share a **ring-id**, a small learned embedding. Ring-ids number the string's closure bonds by the
# canonical ranks of their two atoms, not in the order written.

# %%
aspirin = tc.parse_smiles("CC(=O)Oc1ccccc1C(=O)O")
for root in (0, 7):
    ser = tc.serialize(tc.rooted_smiles(aspirin, root))
    print(ser.smiles)
    print(
        "  token -> atom:",
        " ".join(f"{t}:{a}" for t, a in zip(ser.tokens, ser.token_atom)),
    )
    print(
        "  ring closures (non-tree bonds):",
        ser.closures,
        "  canonical ranks:",
        ser.ranks.tolist(),
    )
    print("  ring-ids:", tc.ring_ids(ser).tolist())


# %% [markdown]
# **Check `atom_alignment`.** For every serialization used below (randomized and re-rooted strings of synthetic
# and real molecules), every heavy atom appears exactly once among the atom tokens, every token is aligned to an
# atom, and parsing the string back gives the same canonical SMILES. We count violations.


# %%
def alignment_violations(smiles_list, canon):
    bad = 0
    for s in smiles_list:
        ser = tc.serialize(s)
        atoms = ser.token_atom[ser.is_atom]
        ok = (
            sorted(atoms.tolist()) == list(range(ser.n_atoms))
            and (ser.token_atom >= 0).all()
        )
        ok &= Chem.MolToSmiles(ser.mol, isomericSmiles=False) == canon
        bad += not ok
    return bad


# %% [markdown]
# ## 3. The tree positional encoding, with a canonical root
#
# For atom `v` with root path `r = a_0 -> a_1 -> ... -> a_d = v` in the string's spanning tree, let `b_l` be the
# index of `a_l` among the children of `a_(l-1)`. The tree encoding stacks one-hot vectors of these child
# indices, most recent first, truncated at depth `k`: `x(v) = [e_(b_d); e_(b_(d-1)); ...]`. Two choices make it a
# graph invariant when the graph is a tree: the **root** is the atom of canonical rank 0 (not the string's first
# atom), and **siblings are ordered by canonical rank** (not by order of appearance). The key lines, written out
# here and compared with the helper:


# %%
def tree_paths_by_hand(ser, n_child=tc.N_CHILD, depth=tc.DEPTH):
    adj = {v: set() for v in range(ser.n_atoms)}
    # the string's explicit bonds: its spanning tree
    for v, p in enumerate(ser.tree_parent):
        if p >= 0:
            adj[v].add(int(p))
            adj[int(p)].add(v)
    paths = {}
    # canonical root of each fragment: lowest canonical rank
    for root in np.argsort(ser.ranks):
        if root in paths:
            continue
        paths[root], stack = [], [root]
        while stack:
            u = stack.pop()
            # canonical order
            kids = sorted(
                (w for w in adj[u] if w not in paths), key=lambda w: ser.ranks[w]
            )
            for i, w in enumerate(kids):
                paths[w] = paths[u] + [min(i, n_child - 1)]
                stack.append(w)
    out = np.full((ser.n_atoms, depth), -1)
    for v, p in paths.items():
        out[v, : min(len(p), depth)] = p[::-1][:depth]  # most recent step first
    return out


ser = tc.serialize(tc.rooted_smiles(aspirin, 7))
assert (tree_paths_by_hand(ser) == tc.tree_paths(ser)).all()
print(tc.tree_paths(ser)[:5])

# %% [markdown]
# The model turns a path into a vector with a learnable depth decay: for each of `h` copies with decay
# `p_c in (0, 1)`, depth level `j` is scaled by `p_c^j`, and the copy by `sqrt((1 - p_c^2) d / 2)`; a linear map
# `W_t` brings it to the model width. The helper's `TreeCyclePE.tree_vector` does exactly this:

# %%
pe_demo = tc.TreeCyclePE(64)
paths = torch.from_numpy(tc.tree_paths(ser))
# (N, k, n)
onehot = F.one_hot(paths.clamp(min=0), tc.N_CHILD).float() * (paths >= 0)[..., None]
p = torch.sigmoid(pe_demo.raw_p)  # (h,) decays
# (h, k)
scale = p[:, None] ** torch.arange(tc.DEPTH) * torch.sqrt((1 - p**2) * 64 / 2)[:, None]
by_hand = (onehot[:, None] * scale[None, :, :, None]).flatten(1)  # (N, h * k * n)
print(
    "max |by hand - helper| =",
    (by_hand - pe_demo.tree_vector(paths)).abs().max().item(),
)

# %% [markdown]
# ## 4. The cycle encoding: a traversal-invariant anchor
#
# The cycle basis has `E - V + (components)` rings. We take RDKit's symmetrized SSSR (unique for a graph), sort
# its rings by size and by their atoms' canonical ranks, and keep rings greedily while they are independent over
# GF(2). Each ring is oriented canonically: it starts at its lowest-rank atom and walks toward the lower-ranked
# neighbour. Per atom we record how many basis rings contain it, their sizes (3..8+), whether one is aromatic, how
# many other rings are fused to its rings, and for up to three rings `sin/cos(2 pi p / |C|)` of its position `p`
# around the ring together with `|C| / 8`. All of these depend only on the graph. For decalin (two fused 6-rings):

# %%
decalin = tc.parse_smiles("C1CCC2CCCCC2C1")
basis = tc.canonical_cycle_basis(decalin)
print(
    "basis:", basis, " E - V + 1 =", decalin.GetNumBonds() - decalin.GetNumAtoms() + 1
)
np.set_printoptions(precision=2, suppress=True, linewidth=140)
print(tc.cycle_features(decalin)[:4])

# %% [markdown]
# ### Checks: what is invariant and what is not
#
# * `acyclic_tree_pe_invariant`: for acyclic molecules, randomized SMILES give *identical* multisets
#   {(atom, tree path)}; the value is the largest difference found.
# * `cycle_pe_invariant`: for every molecule, the cycle encoding is the same multiset for every rooting.
# * `tree_pe_not_invariant_on_rings`: a witness that the tree encoding does change across rootings of a ring
#   molecule (Prop. 2): the number of ring molecules where it changed.
# * `cycle_basis_size`: the basis has `E - V + components` rings, for every molecule (value: violations).
# * `canonical_tree_pe_invariant`: the paths in the *canonical* spanning tree of the graph (the `ctree_cycle`
#   variant of §5) are the same multiset for every rooting, ring molecules included.

# %%
synth_smiles = tc.synthetic_set(n_synth)
acyclic = [s for s in synth_smiles if tc.cycle_rank(s) == 0][:n_check]
acyclic += [
    "CC(C)CC(N)C(=O)O",
    "CCCCN(CC)C(=O)OCC",
    "OCC(O)CO",
    "CCCC(CCC)C(=O)O",
    "CC(C)(C)OC(=O)NCCN",
]
ringed = [s for s in synth_smiles if tc.cycle_rank(s) > 0][:n_check]
ringed += [
    "CC(=O)Oc1ccccc1C(=O)O",
    "Cn1cnc2c1c(=O)n(C)c(=O)n2C",
    "C1CC2CCC1CC2",
    "C12C3C4C1C5C2C3C45",
]


def variants(smi, n_random=8):
    mol = tc.parse_smiles(smi)
    return [
        tc.rooted_smiles(mol, r) for r in range(mol.GetNumAtoms())
    ] + tc.random_smiles(mol, n_random, seed)


def spread(smi, what):
    rows = []
    for s in variants(smi):
        f = tc.featurize(s)
        rows.append(tc.sorted_rows(f.atom_keys, getattr(f, what)))
    return max(tc.multiset_diff(rows[0], r) for r in rows)


tree_spread_acyclic = max(spread(s, "tree") for s in acyclic)
cycle_spread = max(spread(s, "cycle") for s in acyclic + ringed)
tree_changed_rings = sum(spread(s, "tree") > 0 for s in ringed)
ctree_spread = max(spread(s, "ctree") for s in acyclic + ringed)
basis_bad = 0
for s in synth_smiles + ringed:
    mol = tc.parse_smiles(s)
    basis_bad += len(
        tc.canonical_cycle_basis(mol)
    ) != mol.GetNumBonds() - mol.GetNumAtoms() + len(Chem.GetMolFrags(mol))
align_bad = sum(
    alignment_violations(
        variants(s), Chem.MolToSmiles(tc.parse_smiles(s), isomericSmiles=False)
    )
    for s in acyclic + ringed
)
print(
    f"acyclic: max tree-PE difference {tree_spread_acyclic}; cycle-PE difference "
    f"{cycle_spread}; "
    f"tree PE changed on {tree_changed_rings}/{len(ringed)} ring molecules"
)
rec.check("acyclic_tree_pe_invariant", tree_spread_acyclic, 0.0, "<=")
rec.check("cycle_pe_invariant", cycle_spread, 0.0, "<=")
rec.check("tree_pe_not_invariant_on_rings", tree_changed_rings, 0, ">")
rec.check("cycle_basis_size", basis_bad, 0, "==")
rec.check("canonical_tree_pe_invariant", ctree_spread, 0.0, "<=")
rec.check("atom_alignment", align_bad, 0, "==")

# %% [markdown]
# ### The encodings of one ring molecule under three SMILES
#
# Rows are atoms in canonical order, so identical rows mean identical positions. The tree part (left) changes with
# the string: the ring is opened at a different bond. The cycle part (right) does not.

# %%
heat_mol = tc.parse_smiles("Cc1ccc2c(c1)CCC(O)C2")
heat_smiles = [Chem.MolToSmiles(heat_mol, isomericSmiles=False)] + [
    tc.rooted_smiles(heat_mol, r) for r in (6, 11)
]


def encoding_rows(smi):
    f = tc.featurize(smi)
    order = np.argsort(f.ranks)
    tree = (
        pe_demo.tree_vector(torch.from_numpy(f.tree))
        .detach()
        .numpy()[order][:, : tc.DEPTH * tc.N_CHILD]
    )
    return tree, f.cycle[order]


fig, axes = plt.subplots(
    3, 2, figsize=(9, 7.5), gridspec_kw=dict(width_ratios=[tc.DEPTH * tc.N_CHILD, 18])
)
for i, smi in enumerate(heat_smiles):
    tree, cyc = encoding_rows(smi)
    axes[i, 0].imshow(tree, aspect="auto", cmap="viridis")
    axes[i, 1].imshow(cyc, aspect="auto", cmap="coolwarm", vmin=-1, vmax=2)
    axes[i, 0].set(
        ylabel=f"{smi}\natom (canonical)",
        xlabel="tree one-hots (depth x child), first copy",
    )
    axes[i, 1].set(xlabel="cycle features")
    for a in axes[i]:
        a.grid(False)
fig.tight_layout()
plt.show()

# %% [markdown]
# ## 5. Models: one Transformer, several positional encodings, three graph baselines
#
# `SeqEncoder` is a bidirectional encoder built from the book's `helpers.nn.Block`; only its positional term
# changes (`pe="sinusoidal"`, `"cycle"`, `"tree_cycle"`, `"ctree_cycle"`). Every token gets the encoding of the
# atom it is aligned to, plus its ring-id embedding (zero-id for tokens that are not ring closures).
#
# Two variants separate the paper's construction from our choice of tree. **Cycle-only** drops the tree part.
# **Canonical-tree + cycle** (`ctree_cycle`) keeps it but reads the child-index paths from a spanning tree of the
# *graph* grown from the canonical root with children in canonical order, not from the tree the string happened
# to write; it is then invariant on ring molecules too (check `canonical_tree_pe_invariant` below), at the price
# of no longer being "what the serialization says". This run trains the cycle-only variant; the canonical-tree
# variant is implemented and checked but not trained here: at the property task's longer regime (below) its three
# seeds did not fit the machine's budget, and a model trained at a shorter regime would not be comparable. The
# sinusoidal table is
# multiplied by `tc.SIN_SCALE` = 0.028, so that its entries start at the size of the token embeddings (std 0.02): <!-- paper -->
# added raw, the table outweighs the tokens many times over (the ratio is printed below) and the baseline barely
# learns which atom is which (the
# job Vaswani et al.'s `× sqrt(d)` on unit-scale embeddings does; check `pe_token_scale` below). The tree+cycle
# term is put at the same scale: `W_t tree(v) + W_c cycle(v)` passes through a LayerNorm whose (learned) gain
# starts at the token embeddings' std, `tc.PE_GAIN`. Unnormalised, it started several times larger than the
# tokens, and its string-dependent tree part dominated what the model read (check `pe_scale_matched`). The
# baselines read the graph:
#
# * **GIN** (`h <- MLP((1 + eps) h + sum of neighbours)`, sum pooling over every layer);
# * **GIN + ring features**: the same network whose node input also receives a linear map of the atom's cycle
#   features. The cycle encoding carries ring sizes, so "tree+cycle beats GIN" alone would only say that
#   features beat no features; this is the fair comparison;
# * **Graphormer-lite + ring features**: the same blocks over atoms, with degree embeddings, a learned
#   shortest-path attention bias and the same linear map of the cycle features added to each atom's input: the
#   fair parameter-matched comparison for property prediction. (Graphormer-lite without the ring features, the
#   paper's own baseline, is implemented, `kind="graphormer"`, but not trained in this run.)
#
# Training (`tc.fit_model`, the book's `train.fit`, AdamW) draws, for a sequence model, one of each training
# molecule's strings per visit: its canonical string or one of 5 randomized SMILES. Graph models read the graph.
# The loss is mean squared error on the six ring counts plus binary cross-entropy on every atom's ring
# membership (synthetic task), or binary cross-entropy on the label (property and alert tasks). A tenth of the
# training molecules is held out as a validation set (the same for every seed); each model's loss on it, and
# for the property and alert models their ROC-AUC on it and on a fixed sample of 600 training molecules, is
# recorded along training. Each seed draws its own randomized strings.
#
# The property and alert models are those of the **registered recipe** (`data/07_tree_cycle_pe/make_wsd.py`,
# registered on 2026-12-06 before any of them was trained; one checkpoint per family and seed,
# `wsd_s<k>_<family>`): warmup-stable-decay schedules, 10,000 steps of 32 molecules for the property models
# (warm-up 1,000, constant learning rate 2e-3, cosine decay over the last 2,000) and 1,500 steps for the alert
# models (constant 1e-3, decay over the last 300). Two baselines come with it: a sinusoidal model trained on
# canonical strings only (`sinusoidal_canon`, no augmentation) and the fingerprint baseline a practitioner would
# try first, ECFP4 (radius 2, 2,048 bits) with logistic regression and with a random forest (500 trees), fit
# on the same training molecules. The synthetic ring-count models are the earlier round's (`make_models.py`,
# 500 steps, cosine), stored in `models_s<k>`. The default run loads the weights (int8); quick mode trains a
# tiny version of every model live and fits a small fingerprint baseline.

# %% tags=["hide-input"]
# Loading: synthetic models from models_s<k>, property / alert models and the ECFP4
# baseline from the registered recipe's wsd_s<k>_<family> (quick: trained live).
SLUG = "07_tree_cycle_pe"
PROP_KINDS = ["sinusoidal", "sinusoidal_canon", "tree_cycle", "cycle",
              "graphormer_cycle", "gin"]  # fmt: skip
ALERT_KINDS = ["sinusoidal", "tree_cycle", "cycle"]
stored, wsd, missing = None, {}, {}
if not quick:  # one checkpoint per model seed (synthetic) and per family x seed
    stored = {}
    for s in seeds:
        try:
            stored[s] = checkpoints.load(
                SLUG, f"models_s{s}", config=scripts.with_seeds(cfg, [s])
            )
        except checkpoints.CheckpointError as err:
            missing[s, "models"] = err
        for fam in tc.RECIPE_FAMILIES:
            name = f"wsd_s{s}_{fam}"
            try:
                wsd[s, fam] = checkpoints.load(
                    SLUG, name, config=tc.recipe_config(name)
                )
            except checkpoints.CheckpointError as err:
                missing[s, fam] = err
    for (s, what), err in missing.items():
        print(f"seed {s} {what} left out: {str(err)[:120]}")
    if stored:
        seeds = sorted(stored)
        cfg = scripts.with_seeds(cfg, seeds)
    else:  # none built: train tiny models live
        print("Training the quick configuration live; claims are left untested.")
        stored = None
        cfg = tc.checkpoint_config(quick=True, seed=seed)
        seeds = cfg["seeds"]
# the property and alert claims read the seeds whose recipe is complete
rseeds = [
    s for s in seeds
    if stored is None or all((s, f) in wsd for f in tc.RECIPE_FAMILIES)
]  # fmt: skip
if stored is None:  # quick mode: the old tiny config has no canonical-only model
    PROP_KINDS = [k for k in PROP_KINDS if k != "sinusoidal_canon"]


def family_of(task, kind):
    return "alert" if task == "alert" else f"prop_{kind}"


def tag_of(task, kind, s):  # as make_wsd.py names them
    return tc.tag_of(task, kind, s)


print(f"synthetic models: seeds {seeds}; property / alert models: seeds {rseeds}")

# %%
t_prep = time.process_time()
data = tc.prepare(cfg, augment=stored is None)
vocab = data["vocab"]
prop_smiles, prop_y = data["prop_smiles"], data["prop_y"].numpy()
prop_tr, prop_te = data["prop_tr"], data["prop_te"]
synth_te = data["synth_te"]
print(
    f"vocabulary {len(vocab)} tokens; property data: {data['source']}, "
    f"{len(prop_smiles)} molecules, {prop_y.mean():.2f} active, "
    f"{len(prop_te)} test; data ready in {time.process_time() - t_prep:.1f} s CPU"
)
for kind in ("sinusoidal", "tree_cycle", "graphormer", "graphormer_cycle", "gin"):
    n_par = sum(p.numel() for p in tc.make_model(kind, len(vocab)).parameters())
    print(f"{kind:>11}: {n_par:,} parameters")

# %%
if stored is None:
    states, hists, _ = tc.train_all(cfg, data)
models = {}
jobs = [("synth", k, s) for s in seeds for k in cfg["synth_kinds"]]
jobs += [(t, k, s) for s in rseeds for t, kinds in (("prop", PROP_KINDS),
         ("alert", ALERT_KINDS)) for k in kinds]  # fmt: skip
for task, kind, s in jobs:
    tag = tag_of(task, kind, s)
    model = tc.build_model(cfg, vocab, task, kind.removesuffix("_canon"), s)
    if stored is None:
        model.load_state_dict(states[tag])
    elif task == "synth":
        stored[s].load_into(model, prefix=tag + ".")
    else:
        wsd[s, family_of(task, kind)].load_into(model, prefix=tag + ".")
    models[task, kind, s] = model.float().eval()
print(f"{len(models)} models ready")
r = tc.task_regime(cfg, "synth")
print(f"synth: {r['steps']} steps of {r['batch_size']}, learning rate {r['lr']:g}")
if stored is not None:  # the record's steps_prop / steps_alert are the quick config's
    rec.params["recipe"] = {}  # the claims read these models: their recipe is recorded
    for fam in ("prop_tree_cycle", "alert"):
        r = wsd[rseeds[0], fam].manifest["config"]
        rec.params["recipe"][fam.split("_")[0]] = {
            k: r[k] for k in ("steps", "batch_size", "warmup", "lr", "decay_steps")
        }
        print(
            f"{fam}: {r['steps']} steps of {r['batch_size']}, warm-up {r['warmup']}, "
            f"learning rate {r['lr']:g}, decay over the last {r['decay_steps']}, "
            f"evaluated every {r['eval_every']} steps"
        )

# %% [markdown]
# **Checks `pe_token_scale` and `pe_scale_matched`.** At initialisation, no positional term may swamp the token
# embeddings, and none may be negligible next to them. We take the mean norm of each encoding's positional term
# over that of the token embeddings, on real tokens of held-out molecules (`tc.pe_token_ratio`): the sinusoidal
# ratio must be at most 3 (the unscaled table, printed for comparison, fails it by far), and every sequence model's
# ratio must lie
# between 1/3 and 3 (`tc.pe_scale_matched`; the unnormalised tree+cycle term, shown for comparison, fails it).
# After training the gains are free; the trained ratios of the first seed's property models are shown beside.

# %%
probe = tc.collate([data["prop_feats"][m][0] for m in prop_te[:64]])
seq_prop = [k for k in PROP_KINDS if k in tc.SEQ_KINDS]
pe_ratio, trained_ratio = {}, {}
for kind in seq_prop:
    fresh = tc.make_model(kind, len(vocab), width=cfg["width"])
    pe_ratio[kind] = tc.pe_token_ratio(fresh, probe)
    if kind == "sinusoidal":
        fresh_sin = fresh
    trained_ratio[kind] = tc.pe_token_ratio(models["prop", kind, rseeds[0]], probe)
unnormed = tc.make_model("tree_cycle", len(vocab), width=cfg["width"])
unnormed.pe.norm = None  # the round-2 encoding: no LayerNorm
raw_ratio = tc.pe_token_ratio(unnormed, probe)
for kind in seq_prop:
    print(
        f"{kind:>11}: |PE| / |token| fresh {pe_ratio[kind]:.2f}, "
        f"trained (seed {rseeds[0]}) {trained_ratio[kind]:.2f}"
    )
real = probe["pad"] & (probe["atom"] >= 0)
with torch.no_grad():  # the sinusoidal table without tc.SIN_SCALE
    raw_sin = float(
        tc.hnn.sinusoidal_table(probe["pos"], cfg["width"]).norm(dim=-1)[real].mean()
        / fresh_sin.tok(probe["ids"]).norm(dim=-1)[real].mean()
    )
print(f"unnormalised tree+cycle term, fresh: {raw_ratio:.2f}")
print(f"unscaled sinusoidal table, fresh: {raw_sin:.1f}")
rec.check(
    "pe_token_scale",
    pe_ratio["sinusoidal"],
    3.0,
    "<=",
    note=f"fresh model, width {cfg['width']}; the unscaled table {raw_sin:.1f}",
)
rec.check(
    "pe_scale_matched",
    tc.pe_scale_matched(pe_ratio),
    True,
    note="fresh models, |PE| / |token| in [1/3, 3]: "
    + ", ".join(f"{k} {v:.2f}" for k, v in pe_ratio.items())
    + f"; the unnormalised tree+cycle term {raw_ratio:.2f} would fail",
)

# %% [markdown]
# The training curves of the first seed: training loss per step (smoothed, solid) and the loss on the validation
# molecules (dashed, every few steps).


# %%
def curve(task, kind, s, what="loss"):
    """A stored (or, in quick mode, live) curve: (steps, values)."""
    tag = tag_of(task, kind, s)
    if stored is not None:
        src = stored[s] if task == "synth" else wsd[s, family_of(task, kind)]
        c = src.manifest["history"][f"{tag}/{what}"]
        return np.array(c["step"]), np.array(c["value"])
    h = hists[tag]
    if what == "loss":
        return np.arange(1, len(h.loss) + 1), np.array(h.loss)
    pts = np.array(h.evals[what])
    return pts[:, 0], pts[:, 1]


KINDS = {"synth": cfg["synth_kinds"], "prop": PROP_KINDS, "alert": ALERT_KINDS}
fig, ax = plt.subplots(1, 3, figsize=(12, 3.2))
for i, task in enumerate(("synth", "prop", "alert")):
    s0 = seeds[0] if task == "synth" else rseeds[0]
    for j, kind in enumerate(KINDS[task]):
        x, y = curve(task, kind, s0)
        k = max(1, len(y) // 40)
        ax[i].plot(x[k - 1 :], np.convolve(y, np.ones(k) / k, "valid"), label=kind,
                   color=plotting.PALETTE[j % len(plotting.PALETTE)])  # fmt: skip
        ax[i].plot(*curve(task, kind, s0, "val_loss"), ls="--",
                   color=plotting.PALETTE[j % len(plotting.PALETTE)])  # fmt: skip
    ax[i].set(title=task, xlabel="step", ylabel="loss", yscale="log")
    ax[i].legend(fontsize=7)
fig.tight_layout()
plt.show()

# %% [markdown]
# ## 6. Synthetic rings: counting by size, and membership
#
# Targets: the number of basis rings of each size 3..8+ (a 6-vector; the *total* is `E - V + 1`, which a
# sum-pooled GIN gets trivially, so only the split by size is informative) and, per atom, whether it lies on a
# ring. Test molecules are read from their canonical string.

# %%
synth_items = [data["synth_feats"][m][0] for m in synth_te]
counts_te = data["synth_counts"][synth_te]
ring_truth = np.concatenate([f.in_ring for f in synth_items])
synth_res = {k: {"mae": [], "acc": []} for k in cfg["synth_kinds"]}
for kind in cfg["synth_kinds"]:
    for s in seeds:
        out, nodes = tc.predict(models["synth", kind, s], synth_items, vocab)
        synth_res[kind]["mae"].append((out - counts_te).abs().mean().item())
        pred = torch.cat(nodes).numpy() > 0
        synth_res[kind]["acc"].append(float((pred == ring_truth).mean()))
    r = synth_res[kind]
    print(
        f"{kind:>11}: ring-count MAE {np.mean(r['mae']):.4f} "
        f"({', '.join(f'{v:.4f}' for v in r['mae'])}); ring membership "
        f"{np.mean(r['acc']):.4f}"
    )

# %% [markdown]
# **Where the counting error sits, and how much the ring features alone explain.** The paper's "2× lower error
# than GIN" compares against a GIN *without* ring features. Two measurements place our numbers: the error per
# size bin for each model, and an oracle that sees nothing but the ring features — a least-squares fit from the
# sum over atoms of the cycle features (plus the atom count and a constant) to the six counts, fitted on the
# training molecules. Any model that sum-pools these features can represent that fit, so it bounds what "having
# the features" buys before any message passing or attention.

# %%
synth_tr_items = [data["synth_feats"][m][0] for m in data["synth_tr"]]


def pooled_cycle(items):
    return np.array([np.r_[f.cycle.sum(0), len(f.atom_keys), 1.0] for f in items])


coef = np.linalg.lstsq(
    pooled_cycle(synth_tr_items),
    data["synth_counts"][data["synth_tr"]].numpy(),
    rcond=None,
)[0]
oracle_mae = float(np.abs(pooled_cycle(synth_items) @ coef - counts_te.numpy()).mean())
per_bin = {}
for kind in cfg["synth_kinds"]:
    errs = [
        (tc.predict(models["synth", kind, s], synth_items, vocab)[0] - counts_te)
        .abs()
        .mean(0)
        .numpy()
        for s in seeds
    ]
    per_bin[kind] = np.mean(errs, axis=0)
print("MAE per ring-size bin " + " ".join(f"{z:>6}" for z in tc.RING_SIZES))
for kind, e in per_bin.items():
    print(f"{kind:>20} " + " ".join(f"{v:6.3f}" for v in e))
print(f"linear oracle on summed ring features: MAE {oracle_mae:.4f}")

# %% [markdown]
# **Does each feature-reading model read its features as well as a linear fit does?** The same oracle gives a
# fit bar for the synthetic task with no free parameter: a model that receives the ring features (cycle-only,
# tree+cycle, GIN + ring features) should count the rings of its *training* molecules at least as well as the
# least-squares fit on their sum does. A model that stays above that bar has not learned what its own inputs
# allow, and a comparison with it measures its training, not its architecture. This condition
# (`synth_<kind>_fits`, §11) was added at review, after the numbers of this run had been read: the synthetic
# task had no fit condition, unlike the property and alert tasks.

# %%
counts_tr = data["synth_counts"][data["synth_tr"]]
oracle_train_mae = float(
    np.abs(pooled_cycle(synth_tr_items) @ coef - counts_tr.numpy()).mean()
)
synth_train_mae = {
    k: [
        (tc.predict(models["synth", k, s], synth_tr_items, vocab)[0] - counts_tr)
        .abs()
        .mean()
        .item()
        for s in seeds
    ]
    for k in ("cycle", "tree_cycle", "gin_cycle")
    if k in cfg["synth_kinds"]
}
print(f"training molecules: linear oracle MAE {oracle_train_mae:.4f}")
for kind, v in synth_train_mae.items():
    print(f"{kind:>11}: training MAE " + ", ".join(f"{x:.4f}" for x in v))

# %% [markdown]
# **Check `gin_wl_limit`.** Decalin (two 6-rings) and bicyclopentyl (two 5-rings) have the same atoms and degree
# sequence, and 1-WL colour refinement cannot tell them apart; neither can plain GIN, whatever its weights. The
# cycle encoding differs (ring sizes), so the tree+cycle Transformer separates them.

# %%
pair = [tc.featurize("C1CCC2CCCCC2C1", vocab), tc.featurize("C1CCC(C1)C1CCCC1", vocab)]
with torch.no_grad():
    g_emb = models["synth", "gin", seeds[0]].embed(tc.graph_batch(pair, vocab))[0]
    gin_gap = (g_emb[0] - g_emb[1]).abs().max().item()
    t_emb = tc.pooled(models["synth", "tree_cycle", seeds[0]], pair)
    tc_gap = float(np.abs(t_emb[0] - t_emb[1]).max())
print(f"GIN embedding gap {gin_gap:.2e}; tree+cycle embedding gap {tc_gap:.3f}")
rec.check(
    "gin_wl_limit",
    bool(gin_gap <= 1e-5 and tc_gap >= 1e-3),
    True,
    note=f"GIN gap {gin_gap:.2e} (<= 1e-5), tree+cycle gap {tc_gap:.3g} (>= 1e-3)",
)

# %% [markdown]
# ## 7. Property prediction on real molecules
#
# Thrombin inhibitors from ChEMBL (MoleculeACE's CHEMBL204 Ki set with its own split), active when pKi ≥ 7
# (100 nM), the BACE-style threshold. Six learned models, three seeds each, all trained by the registered
# recipe: the Transformer with sinusoidal (augmented, and canonical strings only), tree+cycle and cycle-only
# encodings, Graphormer-lite given the ring features, and GIN; beside them ECFP4 fingerprints with logistic
# regression and with a random forest. Test molecules are read from their canonical string, whole.
#
# MoleculeACE's split is not a scaffold split: it clusters molecules by fingerprint and splits each cluster,
# so test molecules have close relatives in training (the cell below counts shared Murcko scaffolds). It does
# hold out whole molecules: after stereochemistry is dropped, no test molecule equals a training one. Each
# property model's test predictions (and [CLS] embeddings) are computed once here, in batches of strings sorted
# by length (less padding, the same numbers: asserted), and §8 reuses them.

# %%
torch.set_grad_enabled(False)  # evaluation only from here (integrated gradients: §9)
scaffold = [MurckoScaffold.MurckoScaffoldSmiles(x) for x in prop_smiles]
train_smiles, train_scaffolds = (
    {prop_smiles[m] for m in prop_tr},
    {scaffold[m] for m in prop_tr},
)
print(
    f"test molecules equal to a training molecule: "
    f"{sum(prop_smiles[m] in train_smiles for m in prop_te)}; sharing a Murcko "
    f"scaffold with one: "
    f"{np.mean([scaffold[m] in train_scaffolds for m in prop_te]):.0%}"
)
prop_items = [data["prop_feats"][m][0] for m in prop_te]


def pooled_sorted(model, items, atoms_only=False, parts=None, chunk=128):
    """tc.pooled in batches of `chunk` strings sorted by length (less padding; the
    same embeddings up to float rounding, padded keys are masked), in input order."""
    order = np.argsort([len(f.tokens) for f in items], kind="stable")
    z = np.concatenate([
        tc.pooled(model, [items[j] for j in order[i : i + chunk]], atoms_only, parts)
        for i in range(0, len(items), chunk)
    ])  # fmt: skip
    out = np.empty_like(z)
    out[order] = z
    return out


# sorting changes the padding only: the same embeddings as one batch
_m = models["prop", "tree_cycle", rseeds[0]]
assert np.allclose(pooled_sorted(_m, prop_items[:64], chunk=16),
                   tc.pooled(_m, prop_items[:64]), atol=1e-4)  # fmt: skip
prop_auc, test_out = {k: [] for k in PROP_KINDS}, {}
for kind in PROP_KINDS:
    for s in rseeds:  # P(active) and [CLS] embeddings, kept for §8 (computed once)
        model = models["prop", kind, s]
        if isinstance(model, tc.SeqEncoder):  # length-sorted batches of 128
            z = pooled_sorted(model, prop_items)
            p = torch.sigmoid(model.head(torch.from_numpy(z))[:, 0]).numpy()
        else:
            z, p = None, torch.sigmoid(tc.predict(model, prop_items, vocab)[0][:, 0])
        test_out[kind, s] = (np.asarray(p), z)
        prop_auc[kind].append(roc_auc_score(prop_y[prop_te], test_out[kind, s][0]))
    print(
        f"{kind:>16}: test ROC-AUC {np.mean(prop_auc[kind]):.3f} "
        f"({', '.join(f'{v:.3f}' for v in prop_auc[kind])})"
    )

# %% [markdown]
# **The fingerprint baseline.** ECFP4 bits with a linear or a tree-ensemble classifier is the first thing a
# medicinal chemist's data scientist tries on a ChEMBL activity set, and on MoleculeACE's sets it is hard to
# beat. The default run reads each seed's fitted baseline from its record (the test molecules' predicted
# probabilities, whose ROC-AUC is recomputed here); quick mode fits a small one live.

# %%
ecfp_auc, ecfp_train, ecfp_prob = {"ecfp_logreg": [], "ecfp_rf": []}, {}, {}
for s in rseeds:
    if stored is None:  # quick: 256 bits, 20 trees, fit live
        res = tc.ecfp_baseline(prop_smiles, prop_y, prop_tr, prop_te, seed=s,
                               n_bits=256, rf_trees=20)  # fmt: skip
        got = {m: (r["test_prob"], r["train_auc"]) for m, r in res.items()}
    else:
        ck = wsd[s, "ecfp"]
        assert np.array_equal(ck.tensors["test_idx"].numpy(), prop_te)
        got = {
            m: (ck.tensors[f"{m}.test_prob"].numpy(),
                ck.manifest["metrics"][f"ecfp-{m}-s{s}"]["train_auc"])
            for m in ("logreg", "rf")
        }  # fmt: skip
    for m, (prob, tr_auc) in got.items():
        ecfp_auc[f"ecfp_{m}"].append(roc_auc_score(prop_y[prop_te], prob))
        ecfp_train.setdefault(f"ecfp_{m}", []).append(tr_auc)
        ecfp_prob.setdefault(f"ecfp_{m}", []).append(prob)  # for §11's bootstrap
for k, v in ecfp_auc.items():
    print(
        f"{k:>16}: test ROC-AUC {np.mean(v):.3f} ({', '.join(f'{x:.3f}' for x in v)})"
        f"; training {np.mean(ecfp_train[k]):.3f}"
    )

# %% [markdown]
# **Fit or generalisation?** To tell whether a model that loses on the test set fits the training molecules worse
# (under-trained) or fits them as well and generalises worse, each learned model recorded its ROC-AUC on a fixed
# sample of 600 of its training molecules (canonical strings) along training; the last value is compared here
# with the test ROC-AUC. The recipe's fit condition (§11) asks for a mean of at least `FITS` over the last tenth
# of those evaluations.

# %%
FITS = tc.RECIPE_BARS["fits"]  # fit condition (§11, registered with the recipe)
print(f"fit condition: training ROC-AUC >= {FITS}")
fit_idx = tc.fit_sample(prop_tr)  # the fixed sample of 600 training molecules
fit_items = [data["prop_feats"][m][0] for m in fit_idx]


def final_fit(task, kind, s):
    """Training-sample ROC-AUC at the end of training (quick alert: computed here)."""
    if stored is not None:
        tag = tag_of(task, kind, s)
        return wsd[s, family_of(task, kind)].manifest["metrics"][tag]["final_fit_auc"]
    if task == "prop":
        return float(curve(task, kind, s, "fit_auc")[1][-1])
    y = data["alert_y"][fit_idx]
    return tc.roc_auc(models[task, kind, s], fit_items, y, vocab)


train_auc = {k: [final_fit("prop", k, s) for s in rseeds] for k in PROP_KINDS}
for kind in PROP_KINDS:
    print(
        f"{kind:>16}: ROC-AUC on {len(fit_idx)} training molecules "
        f"{np.nanmean(train_auc[kind]):.3f}, test {np.mean(prop_auc[kind]):.3f}, gap "
        f"{np.nanmean(train_auc[kind]) - np.mean(prop_auc[kind]):+.3f}"
    )

# %% [markdown]
# **ROC-AUC against steps.** The recorded curves of every property model and seed: ROC-AUC on the training
# sample (solid) and on the validation molecules (dashed); the dotted line is the fit condition and the grey band
# the learning-rate decay (the last 2,000 steps). The recipe stored no intermediate weights, so invariance
# (§8) is measured on the final models only.

# %%
fig, ax = plt.subplots(1, len(rseeds), figsize=(4.3 * len(rseeds), 3.3), squeeze=False)
for i, s in enumerate(rseeds):
    for j, kind in enumerate(PROP_KINDS):
        c = plotting.PALETTE[j % len(plotting.PALETTE)]
        ax[0, i].plot(*curve("prop", kind, s, "fit_auc"), color=c, label=kind, lw=1)
        ax[0, i].plot(*curve("prop", kind, s, "val_auc"), color=c, ls="--", lw=1)
    if stored is not None:
        r = wsd[s, "prop_tree_cycle"].manifest["config"]
        ax[0, i].axvspan(r["steps"] - r["decay_steps"], r["steps"], color="0.9")
    ax[0, i].axhline(FITS, color="k", ls=":", lw=1)
    ax[0, i].set(title=f"seed {s}", xlabel="step", ylabel="ROC-AUC", ylim=(0.5, 1.0))
ax[0, 0].legend(fontsize=7)
fig.tight_layout()
plt.show()

# %% [markdown]
# ## 8. Re-rooting: one molecule, many strings
#
# For held-out molecules we write the SMILES rooted at every heavy atom, whole (no string is cut: the batch is as
# long as its longest string, check `no_truncation`), and ask two questions of every property model:
#
# * **prediction-level invariance**: the mean of `|p(rooted string) - p(canonical string)|`, the change in
#   predicted probability of activity. Graph models read the same graph whatever the string, so theirs is zero
#   up to rounding. A model that predicts nearly the same probability for every molecule would also look
#   invariant, so next to it we report the mean `|p_i - p_j|` between two *different* held-out molecules, and
#   the claim divides the first by the second for each model: how much a rooting moves the prediction, in units
#   of how much a different molecule moves it. This normalisation is fixed by what the metric must mean (a
#   constant predictor gets 0/0, not a perfect score), not chosen from the results; the raw ratio is in the note;
# * **centred cosine**: the cosine between the [CLS] embeddings of a rooted and the canonical string after
#   subtracting the mean embedding of all held-out molecules. An offset shared by every embedding (the final
#   LayerNorm's bias, or a collapsed model) makes the raw cosine high for *any* two molecules; centring removes it.
#   Next to it we report the **between-molecule baseline**: the same centred cosine between the canonical strings
#   of two *different* held-out molecules.
#
# **The sinusoidal comparator (changed in round 6, after the reviewer had seen round 5's numbers).** Round 5's
# claim compared tree+cycle with the sinusoidal model that had the higher validation ROC-AUC (augmented or
# canonical-only). At seed 2 that rule picked the canonical-only model, which never saw a rooted string in
# training and is naturally the more sensitive to re-rooting: a comparison that flatters tree+cycle. An
# invariance reading compares models trained the same way, so `rerooting_invariance` now reads the sinusoidal
# model trained with the same random-rooting augmentation as tree+cycle (`prop_sinusoidal`) at every seed; the
# canonical-only model and the validation-AUC pick are shown beside it, never the comparator. This change was
# committed before the run that records it, but after round 5's per-seed values had been seen.
#
# Structural tokens (parentheses, `<ring>`) change in number and position from string to string, so even an
# invariant encoding gives only *almost* invariant embeddings. Feeding only the atom tokens removes them: then an
# invariant encoding in a permutation-equivariant encoder must give the same embedding to rounding error (check
# `exact_invariance_atoms_only`, computed in float64 so that float32 rounding, which the trained models' larger
# activations amplify, is not mistaken for a difference; the tree part is invariant only on acyclic molecules, so
# ring molecules use the cycle part alone there).

# %%
reroot_idx = repro.rng(0, 5).choice(
    prop_te, size=min(n_reroot, len(prop_te)), replace=False
)
reroot_items, owner = [], []
for m in reroot_idx:
    mol = tc.parse_smiles(prop_smiles[m])
    strings = [prop_smiles[m]] + [
        tc.rooted_smiles(mol, r) for r in range(mol.GetNumAtoms())
    ]
    reroot_items += [tc.featurize(x, vocab) for x in strings]
    owner += [m] * len(strings)
owner = np.array(owner)
first = np.r_[True, owner[1:] != owner[:-1]]  # the canonical string of each molecule
canon_of = np.flatnonzero(first)[np.cumsum(first) - 1]
rooted = ~first
print(
    f"{len(reroot_idx)} molecules, {rooted.sum()} rooted strings, "
    f"{max(len(f.tokens) for f in reroot_items)} tokens at most"
)
rec.check(
    "no_truncation",
    tc.dropped_atoms(tc.collate(reroot_items), reroot_items),
    0,
    "==",
    note="atoms without a token when the re-rooted strings are batched",
)

# %%
seq_kinds = [k for k in PROP_KINDS if k.removesuffix("_canon") in tc.SEQ_KINDS]
inv = {
    k: {"dp": [], "dp_between": [], "cos": [], "raw": [], "between": []}
    for k in PROP_KINDS
}
dp_all, cos_all = {}, {}
pairs = repro.rng(0, 6).integers(0, len(prop_items), size=(2000, 2))
pairs = pairs[pairs[:, 0] != pairs[:, 1]]
for kind in tqdm(PROP_KINDS, desc="re-rooting"):
    for s in rseeds:
        model = models["prop", kind, s]
        p_test, z_test = test_out[kind, s]  # the test set's, from §6
        if kind in seq_kinds:  # one encoder pass: [CLS] embedding, then the head
            z = pooled_sorted(model, reroot_items)  # length-sorted batches
            p = torch.sigmoid(model.head(torch.from_numpy(z))[:, 0]).numpy()
        else:
            p = torch.sigmoid(tc.predict(model, reroot_items, vocab)[0][:, 0])
            p = p.numpy()
        dp = np.abs(p - p[canon_of])[rooted]
        inv[kind]["dp"].append(float(dp.mean()))
        dp_between = np.abs(p_test[pairs[:, 0]] - p_test[pairs[:, 1]])
        inv[kind]["dp_between"].append(float(dp_between.mean()))
        if s == rseeds[0]:
            dp_all[kind] = dp
        if kind not in seq_kinds:
            continue
        centre = z_test.mean(0)
        cos = tc.centred_cosine(z[rooted], z[canon_of][rooted], centre)
        raw = tc.centred_cosine(z[rooted], z[canon_of][rooted], np.zeros(z.shape[1]))
        between = tc.centred_cosine(z_test[pairs[:, 0]], z_test[pairs[:, 1]], centre)
        inv[kind]["cos"].append(float(cos.mean()))
        inv[kind]["raw"].append(float(raw.mean()))
        inv[kind]["between"].append(float(between.mean()))
        if s == rseeds[0]:
            cos_all[kind] = (cos, between)
for kind, r in inv.items():
    line = (
        f"{kind:>16}: mean |Δp| {np.mean(r['dp']):.4f} across rootings, "
        f"{np.mean(r['dp_between']):.3f} between molecules"
    )
    if r["cos"]:
        line += (
            f"; centred cosine {np.mean(r['cos']):.3f} (raw {np.mean(r['raw']):.3f}),"
            f" between molecules {np.mean(r['between']):.3f}"
        )
    print(line)

# %%
exact_gap = 0.0
for s in rseeds:  # in float64: float32 rounding is not invariance
    model = copy.deepcopy(models["prop", "tree_cycle", s]).double()
    for m in reroot_idx:
        items = [f for f, o in zip(reroot_items, owner) if o == m]
        acyclic_mol = tc.cycle_rank(prop_smiles[m]) == 0
        parts = ("tree", "cycle") if acyclic_mol else ("cycle",)
        b = tc.collate(items, atoms_only=True)
        b["cycle"] = b["cycle"].double()
        with torch.no_grad():
            z = model.encode(b, parts)[:, 0].numpy()
        exact_gap = max(exact_gap, float(np.abs(z - z[:1]).max()))
print(f"atoms only, invariant encoding: largest embedding difference {exact_gap:.2e}")
rec.check("exact_invariance_atoms_only", exact_gap, 1e-5, "<=")

# %% [markdown]
# **Where the remaining re-rooting variation comes from (ablation).** Two things in the tree+cycle model still
# depend on the string: the tree part (on ring molecules, which ring bond is opened changes the spanning tree) and
# the structural tokens (parentheses, bonds, `<ring>`: their number and the atoms they attach to change). We
# remove each at test time from the trained models — the tree part (`parts=("cycle",)`), or the structural tokens
# (atoms only) — and measure the same two quantities, each against its own between-molecule baseline under the
# same ablation. The models were not trained this way, so these are diagnostics, not better models.


# %%
def probs_and_emb(model, items, atoms_only=False, parts=None):
    z = pooled_sorted(model, items, atoms_only, parts)  # length-sorted batches
    return torch.sigmoid(model.head(torch.from_numpy(z))[:, 0]).numpy(), z


ablations = {
    "as trained": dict(),
    "tree part removed": dict(parts=("cycle",)),
    "structural tokens removed": dict(atoms_only=True),
}
abl = {a: {"rel_dp": [], "cos": [], "between": []} for a in ablations}
# "as trained" is the re-rooting cell's measurement: read from it, not recomputed
abl["as trained"] = dict(
    rel_dp=list(np.array(inv["tree_cycle"]["dp"]) / inv["tree_cycle"]["dp_between"]),
    cos=inv["tree_cycle"]["cos"],
    between=inv["tree_cycle"]["between"],
)
for s in rseeds:
    model = models["prop", "tree_cycle", s]
    for a, kw in list(ablations.items())[1:]:
        p, z = probs_and_emb(model, reroot_items, **kw)
        p_test, z_test = probs_and_emb(model, prop_items, **kw)
        spread = np.abs(p_test[pairs[:, 0]] - p_test[pairs[:, 1]]).mean()
        abl[a]["rel_dp"].append(float(np.abs(p - p[canon_of])[rooted].mean() / spread))
        centre = z_test.mean(0)
        abl[a]["cos"].append(
            float(tc.centred_cosine(z[rooted], z[canon_of][rooted], centre).mean())
        )
        abl[a]["between"].append(
            float(
                tc.centred_cosine(
                    z_test[pairs[:, 0]], z_test[pairs[:, 1]], centre
                ).mean()
            )
        )
for a, r in abl.items():
    print(
        f"tree+cycle, {a:>26}: relative |Δp| {np.mean(r['rel_dp']):.3f}; centred "
        f"cosine {np.mean(r['cos']):.3f} "
        f"(between molecules {np.mean(r['between']):.3f})"
    )

# %% [markdown]
# **Does each sequence model read its positions at all? (added at review, round 7; no verdict reads it.)** The
# sinusoidal table is fixed at `tc.SIN_SCALE` while the token embeddings grow in training (the trained
# `|PE| / |token|` ratios of §5), whereas the tree+cycle term has a learned gain. A model that has learned to
# ignore its positions is invariant to re-rooting for that reason alone. So we remove the positional term at
# test time from the augmented sinusoidal and the tree+cycle property models and measure the test ROC-AUC and
# the mean change in predicted probability, next to each model's re-rooting |Δp| of the cell above.

# %%
no_pos = {}
for kind in ("sinusoidal", "tree_cycle"):
    for s in rseeds:
        blind = copy.deepcopy(models["prop", kind, s])
        blind.positional = lambda batch, parts=None: 0.0  # positions removed
        p0, _ = probs_and_emb(blind, prop_items)
        p_test = test_out[kind, s][0]
        no_pos.setdefault(kind, []).append(
            (roc_auc_score(prop_y[prop_te], p0), float(np.abs(p0 - p_test).mean()))
        )
    a0, d0 = np.mean(no_pos[kind], axis=0)
    print(
        f"{kind:>11}: test ROC-AUC {np.mean(prop_auc[kind]):.3f} as trained, {a0:.3f} "
        f"without positions; mean |Δp| from removing them {d0:.3f} (re-rooting "
        f"|Δp| {np.mean(inv[kind]['dp']):.3f})"
    )

# %%
fig, ax = plt.subplots(1, 3, figsize=(13, 3.4))
bins = np.linspace(0, max(max(d.max() for d in dp_all.values()), 1e-3), 40)
for kind, d in dp_all.items():
    ax[0].hist(d, bins=bins, alpha=0.55, label=f"{kind} ({d.mean():.3f})")
ax[0].set(xlabel="|p(rooted) - p(canonical)|", ylabel="strings", yscale="log")
ax[0].set_title(f"prediction change, seed {rseeds[0]}")
ax[0].legend(fontsize=7)
bins = np.linspace(-1, 1, 50)
for i, (kind, (cos, between)) in enumerate(cos_all.items()):
    ax[1].hist(cos, bins=bins, alpha=0.55, color=plotting.PALETTE[i], label=kind)
    ax[1].hist(
        between,
        bins=bins,
        histtype="step",
        color=plotting.PALETTE[i],
        ls="--",
        label=f"{kind}, different molecules",
    )
ax[1].axvline(0.977, color="k", ls=":", label="paper 0.977 (uncentred, not comparable)")
ax[1].set(xlabel="centred cosine", ylabel="pairs", title="same molecule vs different")
ax[1].legend(fontsize=7)
all_auc = {**prop_auc, **ecfp_auc}
names = list(all_auc)
ax[2].bar(
    names,
    [np.mean(all_auc[k]) for k in names],
    yerr=[np.std(all_auc[k]) for k in names],
    color=[plotting.PALETTE[i % len(plotting.PALETTE)] for i in range(len(names))],
)
ax[2].tick_params(axis="x", rotation=35)
ax[2].set(
    ylabel=f"test ROC-AUC ({len(rseeds)} seeds)",
    ylim=(0.5, 1),
    title=f"{cfg['dataset']}",
)
fig.tight_layout()
plt.show()

fig, ax = plt.subplots(1, 2, figsize=(10, 3.2))
names = list(synth_res)
for i, what in enumerate(("mae", "acc")):
    ax[i].bar(
        names,
        [np.mean(synth_res[k][what]) for k in names],
        yerr=[np.std(synth_res[k][what]) for k in names],
        color=plotting.PALETTE[: len(names)],
    )
    ax[i].tick_params(axis="x", rotation=20)
ax[0].set(ylabel="MAE per size bin", title="ring counts by size (test)")
ax[1].set(ylabel="accuracy", ylim=(0.5, 1.0), title="ring membership (test atoms)")
fig.tight_layout()
plt.show()


# %% [markdown]
# ## 9. Attributions vs a known structural alert
#
# The alert task's label is "the molecule contains RDKit's BRENK alert `imine_1`" (a C=N double bond outside a
# ring; in these thrombin inhibitors mostly the amidine and guanidine groups that bind the S1 pocket). Its matched
# atoms are the ground-truth fragment. For held-out molecules that contain the alert, we attribute the model's
# logit to its tokens by **integrated gradients** (from an all-zero token embedding to the real one, positions
# kept, midpoint rule), sum each atom's tokens, and take the `k` atoms with the largest |attribution|
# (`k` = number of alert atoms). Alignment is the share of them inside the alert; chance is `k / n`. The check
# `ig_completeness` confirms the attributions add up to the logit difference they explain. **Round 6 cut the
# integration points from 128 to 96** to fit the run's time budget (committed before the run that reads it). A
# sensitivity check outside the notebook, on the first 40 scored molecules and all 9 alert models (3 encodings
# × 3 seeds), found the same top-k atoms with 96 and 128 points for every one of the 360 molecule-model pairs,
# the completeness gaps larger but far inside the check's bar. Over all the scored molecules, the first run with
# 96 points reproduced eight of round 5's nine per-seed alignments exactly; the ninth (sinusoidal, seed 0) moved
# slightly up (some molecule's top-k atoms changed). Fewer *molecules* was measured too and not taken: halving them moved single
# seeds' alignments by more than the seed-to-seed spread. Chance is a low bar
# for an alert made of a carbon and a nitrogen, so two model-free priors are scored the same way (added at
# review; no model, no free parameter, ties broken at random): nitrogen atoms first, and nitrogens outside
# rings first.

# %%
alert_auc = {k: [] for k in ALERT_KINDS}
for kind in ALERT_KINDS:
    for s in rseeds:
        out, _ = tc.predict(models["alert", kind, s], prop_items, vocab)
        y_te = data["alert_y"][prop_te].numpy()
        alert_auc[kind].append(
            roc_auc_score(y_te, out[:, 0].numpy()) if 0 < y_te.mean() < 1 else np.nan
        )
alert_train_auc = {  # the same training sample as in §7 (recorded at the end)
    k: [final_fit("alert", k, s) for s in rseeds] for k in ALERT_KINDS
}
cand = [
    m
    for m in prop_te
    if 0 < len(data["alert_sets"][m]) < len(data["prop_feats"][m][0].atom_keys)
][:n_alert]
align = {k: [] for k in ALERT_KINDS}
chance, gaps, ig_example, hits_of = [], [], {}, {}
for kind in ALERT_KINDS:
    for s in rseeds:
        hits, ch = [], []
        for m in cand:
            feat = data["prop_feats"][m][0]
            with torch.enable_grad():
                attr, gap = tc.integrated_gradients(
                    models["alert", kind, s], feat, ig_steps
                )
            h, c = tc.alignment_at_k(np.abs(attr), data["alert_sets"][m])
            hits.append(h)
            ch.append(c)
            gaps.append(abs(gap))
            if s == rseeds[0] and m == cand[0]:
                ig_example[kind] = attr
        align[kind].append(float(np.mean(hits)))
        hits_of[kind, s] = np.array(hits)
    chance = ch
chance_mean = float(np.mean(chance))
for kind in align:
    print(
        f"{kind:>11}: alert AUC {np.nanmean(alert_auc[kind]):.3f} (training "
        f"{np.nanmean(alert_train_auc[kind]):.3f}); top-k atoms inside "
        f"the alert {np.mean(align[kind]):.3f} "
        f"({', '.join(f'{v:.3f}' for v in align[kind])}); chance {chance_mean:.3f}"
    )
print(f"{len(cand)} held-out molecules with the alert")
rec.check(
    "ig_completeness",
    float(np.median(gaps)),
    0.05,
    "<=",
    note="median |sum of attributions - (f(x) - f(baseline))|, logits",
)

# %%
# added at review (round 5): model-free element priors scored the same way, no model
# and no free parameter (ties broken at random, fixed stream): all nitrogen atoms
# first, and nitrogens outside rings first
prior_rng = repro.rng(0, 9)
prior_align = {"nitrogen first": [], "non-ring nitrogen first": []}
for m in cand:
    mol_m = tc.parse_smiles(prop_smiles[m])
    is_n = np.array([a.GetAtomicNum() == 7 for a in mol_m.GetAtoms()])
    in_ring = np.array([a.IsInRing() for a in mol_m.GetAtoms()])
    for name, first in (
        ("nitrogen first", is_n),
        ("non-ring nitrogen first", is_n & ~in_ring),
    ):
        tie = 0.5 * prior_rng.random(len(is_n))
        h, _ = tc.alignment_at_k(first + tie, data["alert_sets"][m])
        prior_align[name].append(h)
prior_align = {k: float(np.mean(v)) for k, v in prior_align.items()}
print(
    "model-free priors (added at review): "
    + ", ".join(f"{k} {v:.3f}" for k, v in prior_align.items())
)


# %% [markdown]
# **How precise is a per-seed gain?** The tree+cycle − sinusoidal alignment gain of one seed is a mean over
# the scored molecules; resampling those molecules (bootstrap, 2000 draws) gives its 90% interval, to set
# against the 0.05 the paper's claim needs. <!-- paper -->

# %%
boot = repro.rng(0, 8).integers(0, len(cand), size=(2000, len(cand)))
for s in rseeds:
    diff = hits_of["tree_cycle", s] - hits_of["sinusoidal", s]
    lo, hi = np.percentile(diff[boot].mean(1), [5, 95])
    print(
        f"seed {s}: gain {diff.mean():+.3f}, "
        f"90% bootstrap interval [{lo:+.3f}, {hi:+.3f}]"
    )

# %%
m0 = cand[0]
mol0 = tc.parse_smiles(prop_smiles[m0])
fig, ax = plt.subplots(1, len(ig_example), figsize=(11, 3))
for a, (kind, attr) in zip(np.atleast_1d(ax), ig_example.items()):
    col = [
        "tab:red" if i in data["alert_sets"][m0] else "tab:gray"
        for i in range(len(attr))
    ]
    a.bar(range(len(attr)), np.abs(attr), color=col)
    a.set(title=f"{kind}: |IG| per atom (red: alert atoms)", xlabel="atom index")
fig.tight_layout()
plt.show()
print(prop_smiles[m0])

# %% [markdown]
# ## 10. Interaction
#
# The slider walks through the roots of one held-out molecule (precomputed, works in the static page): the string
# written from that root, its tree encoding (changes) and cycle encoding (does not), and each sequence model's
# predicted probability of activity for that string, next to the canonical string's (dashed).

# %%
ring_mols = [m for m in reroot_idx if tc.cycle_rank(prop_smiles[m]) > 0]
slider_m = min(ring_mols or list(reroot_idx), key=lambda m: len(prop_smiles[m]))
sl_items = [f for f, o in zip(reroot_items, owner) if o == slider_m]
sl_p = {
    k: torch.sigmoid(
        tc.predict(models["prop", k, rseeds[0]], sl_items, vocab)[0][:, 0]
    ).numpy()
    for k in seq_kinds
}
slider_roots = list(range(min(len(sl_items) - 1, 24)))


def draw_root(fig, r):
    tree, cyc = encoding_rows(sl_items[r + 1].smiles)
    ax = fig.subplots(1, 3, gridspec_kw=dict(width_ratios=[2, 1, 1.2]))
    ax[0].imshow(tree, aspect="auto", cmap="viridis")
    ax[0].set(title="tree encoding", xlabel="depth x child", ylabel="atom (canonical)")
    ax[1].imshow(cyc, aspect="auto", cmap="coolwarm", vmin=-1, vmax=2)
    ax[1].set(title="cycle encoding", xlabel="feature")
    for i, k in enumerate(sl_p):
        ax[2].bar(i, sl_p[k][r + 1], color=plotting.PALETTE[i])
        ax[2].hlines(sl_p[k][0], i - 0.4, i + 0.4, colors="k", linestyles="--")
    ax[2].set_xticks(range(len(sl_p)), list(sl_p), rotation=20)
    ax[2].set(ylim=(0, 1), title="P(active): rooted vs canonical (--)")
    for a in ax[:2]:
        a.grid(False)
    fig.text(0.01, 0.01, sl_items[r + 1].smiles, fontsize=8, family="monospace")


plotting.static_slider(slider_roots, draw_root, figsize=(10, 3.8), label="root atom")


# %% [markdown]
# Live (Jupyter or Colab): type any SMILES and a root atom; see the string, and each model's predicted activity
# for the canonical and the rooted string.


# %%
def explore(smiles="CC(=O)Oc1ccccc1C(=O)O", root=0):
    try:
        mol = tc.parse_smiles(smiles)
    except ValueError as e:
        print(e)
        return
    root = min(root, mol.GetNumAtoms() - 1)
    strings = [Chem.MolToSmiles(mol, isomericSmiles=False), tc.rooted_smiles(mol, root)]
    items = [tc.featurize(s, vocab) for s in strings]
    print("rooted string:", strings[1])
    for kind in PROP_KINDS:
        p = torch.sigmoid(tc.predict(models["prop", kind, rseeds[0]], items, vocab)[0])
        print(f"{kind:>16}: P(active) canonical {p[0, 0]:.3f}, rooted {p[1, 0]:.3f}")


plotting.live_controls(explore, smiles="CC(=O)Oc1ccccc1C(=O)O", root=(0, 30))

# %% [markdown]
# ## 11. The claims record
#
# Every claim here is about trained models, so each names the **conditions** that put the models it compares in
# the regime the paper speaks of. The issue that specifies this chapter's claims names two: the fit (training
# ROC-AUC, reported as training minus test) and a validation plateau. The property and alert models carry the
# recipe's conditions, registered with it (`tc.recipe_conditions`, computed by `make_wsd.py` on each model's
# whole curves and stored in its manifest; read on the stable phase, before the learning-rate decay: the first
# 8,000 of 10,000 steps for the property models, 1,200 of 1,500 for the alert models):
#
# * `<task>_<kind>_val_flat`, `plateau(val_loss, 0.2, until, noise=2) <= 0.02`: the last fifth of the stable
#   phase improved the validation loss by at most 2% of its whole improvement, counting an improvement only
#   beyond 2 standard errors of its step-to-step noise (a validation loss that rises, over-fitting, reads as
#   flat: more steps would not help; the table below shows how far each model is past its best);
# * `<task>_<kind>_fits`, `tail_mean(fit_auc, 0.1) >= 0.95`: the mean training-sample ROC-AUC over the last
#   tenth of its evaluations. A model whose training AUC equals its test AUC has not learned what the data
#   allow, and a comparison between two such models measures the training budget, not the encoding. The note
#   gives training minus test;
# * `<task>_<kind>_flat`, `plateau(loss, 0.2, until) <= 0.05`: the same on the training loss. **Reported
#   beside each claim; since round 8 it gates nothing** (below).
#
# The synthetic models keep the earlier round's book-wide rules (`synth_<kind>_flat`,
# `train.plateau(loss) <= 0.05`, reported like the recipe's `flat`; `synth_<kind>_val_flat`,
# `train.plateau(val_loss) < 0.02`) and the fit bar of §6 (`synth_<kind>_fits`, added at review).
# `prop_sinusoidal_strongest_<c>` are the conditions of whichever sinusoidal model the strongest-baseline rule
# picks at each seed (below); since round 6 no claim names them (the re-rooting comparator is fixed, §8).
#
# A comparison names the conditions of both models it compares. At a seed where one fails, the claim is
# inconclusive there; unless most seeds are left (2 of 3) its verdict is **inconclusive**, not "not held".
#
# :::{important}
# **Round 8: which conditions gate, changed after the numbers were seen (disclosed).** From round 5 to
# round 7 every verdict was read with all three conditions, `flat` included, as registered with the recipe
# (`make_wsd.py`). Under that rule `flat` failed for most property models at most seeds while `val_flat` and
# `fits` were met (the tables below give every value), so almost every learned verdict was inconclusive. Since
# round 8 the verdicts are gated by the two conditions that the chapter's specification (its issue in this
# book's tracker) names, `val_flat` and `fits`; `flat` is still computed, recorded (its note says "reported, not gating
# since round 8") and shown beside each claim. Why: the specification asks for the fit condition and a
# validation plateau, not a training-loss plateau (our registration was stricter), and round 7 measured why
# `flat` is out of reach here: the models memorise their training molecules (their loss on fresh strings of
# training molecules is nearly that on the strings they saw, §12), and a recipe with dropout and stronger
# weight decay still left GIN's training loss falling at constant learning rate while its validation loss was
# flat and its fit above the bar (§12, the probe's table). The change was decided after
# every earlier round's numbers had been seen, including the claims read without `flat` (then labelled
# exploratory). The bars, models, seeds, claims and their targets are unchanged; the table after the claims
# shows each verdict under the round 5-7 rule beside the new one.
# :::
#
# **How round 5 read the registered recipe (decided before any claim was read from its records).** Round 5
# kept all three conditions for the verdict and showed, labelled exploratory, the reading without `flat`
# that round 8 now takes as the verdict (above); it was committed after we had seen the recipe's
# conditions (`flat` fails for most models while `val_flat` and `fits` are met) and the seed-0/1 test ROC-AUCs
# (the ECFP4 + random forest baseline above the sequence models, GIN near it; the commit message gives the
# numbers seen).
# Two more readings fixed at the same time: relative claims against "the sinusoidal model" take, per seed,
# the sinusoidal model (augmented or canonical-only) with the higher validation ROC-AUC (`tc.strongest_baseline`,
# registered with the recipe; the only such claim, `rerooting_invariance`, reads the augmented sinusoidal model
# since round 6 instead, a change made after the reviewer saw the numbers, §8); and a claim
# `property_auc_vs_strongest` compares tree+cycle with the best, at each seed, of the baselines a practitioner
# would use on this task, GIN, ECFP4 + logistic regression and ECFP4 + random forest (the maximum of their test
# ROC-AUCs: the direction that makes the claim harder to hold), each recorded with its own number.


# %%
# round 8 (disclosed above): the verdict is gated by the issue's conditions; `flat`
# is recorded and reported beside each claim; the round 5-7 rule is shown beside it
RECORDED_CONDITIONS = ("flat", "val_flat", "fits")  # every one recorded per model
GATING_CONDITIONS = ("val_flat", "fits")  # since round 8, the verdict
ROUND5_CONDITIONS = ("flat", "val_flat", "fits")  # rounds 5-7, shown beside it
NOT_GATING = "reported, not gating since round 8 (§11)"
PRACTITIONER_BASELINES = ("gin", "ecfp_logreg", "ecfp_rf")  # property_auc_vs_strongest
# the synthetic models (models_s<k>): the earlier round's book-wide rules
FLAT, VAL_FLAT = 0.05, 0.02
for kind in cfg["synth_kinds"]:
    for c, what, op, bar in (("flat", "loss", "<=", FLAT),
                             ("val_flat", "val_loss", "<", VAL_FLAT)):  # fmt: skip
        rec.condition(
            f"synth_{kind}_{c}",
            [train.plateau(curve("synth", kind, s, what)[1]) for s in seeds],
            op, bar, unit=f"{what} drop in the last fifth / whole drop",
            statement=f"the {kind} synthetic model's {what} is flat at the end",
            note=NOT_GATING if c not in GATING_CONDITIONS else "",
        )  # fmt: skip


def recipe_cond(task, kind, s):
    """The registered recipe conditions of one model (stored; quick: computed live)."""
    if stored is not None:
        tag = tag_of(task, kind, s)
        return wsd[s, family_of(task, kind)].manifest["metrics"][tag]["conditions"]
    h = hists[tag_of(task, kind, s)]
    fit = h.evals.get("fit_auc") or [final_fit(task, kind, s)]
    return tc.recipe_conditions(h.loss, h.evals["val_loss"], fit, until=len(h.loss))


# the strongest sinusoidal baseline per seed, by validation ROC-AUC (registered rule)
sin_best = [
    tc.strongest_baseline(
        {k: curve("prop", k, s, "val_auc")[1].tolist() for k in PROP_KINDS
         if k.startswith("sinusoidal")}
    )
    for s in rseeds
]  # fmt: skip
print("strongest sinusoidal (validation ROC-AUC):", dict(zip(rseeds, sin_best)))

# %%
COND_UNIT = {
    "flat": "training-loss drop, last fifth of the stable phase / whole drop",
    "val_flat": "validation-loss drop beyond 2 s.e., last fifth / whole drop",
    "fits": "training-sample ROC-AUC, mean of the last tenth",
}
prop_pick = {k: [k] * len(rseeds) for k in PROP_KINDS}
prop_pick["sinusoidal_strongest"] = sin_best
alert_pick = {k: [k] * len(rseeds) for k in ALERT_KINDS}
for task, picks in (("prop", prop_pick), ("alert", alert_pick)):
    for name, chosen in picks.items():
        cs = [recipe_cond(task, k, s) for k, s in zip(chosen, rseeds)]
        aucs = (prop_auc if task == "prop" else alert_auc).get(name)
        note = f"per seed: {', '.join(chosen)}; " if name not in picks[name] else ""
        for c in RECORDED_CONDITIONS:
            fit_note = (f"test ROC-AUC {', '.join(f'{x:.3f}' for x in aucs)}; training "
                        "− test " + ", ".join(f"{x[c]['value'] - t:+.3f}"
                                              for x, t in zip(cs, aucs))
                        if c == "fits" and aucs else "")  # fmt: skip
            gate_note = NOT_GATING if c not in GATING_CONDITIONS else ""
            rec.condition(
                f"{task}_{name}_{c}", [x[c]["value"] for x in cs], cs[0][c]["op"],
                cs[0][c]["bar"], unit=COND_UNIT[c],
                note="; ".join(x for x in (note + fit_note, gate_note) if x),
                statement=f"registered recipe condition `{c}`, {name} {task} model",
            )  # fmt: skip
            # the record's reading agrees with the stored, registered one
            assert rec.conditions[-1].holds_per_seed == [x[c]["met"] for x in cs]


# %%
for kind, v in synth_train_mae.items():  # added at review (§6): no free parameter
    rec.condition(
        f"synth_{kind}_fits",
        v,
        "<=",
        oracle_train_mae,
        unit="ring-count MAE on training molecules",
        statement=f"the {kind} model counts the rings of its training molecules at "
        "least as well as a linear fit on the summed ring features",
        note=f"linear fit {oracle_train_mae:.4f}; added at review after the run's "
        "numbers were read (the synthetic task had no fit condition)",
    )


def given(task, *kinds, gating=GATING_CONDITIONS):  # the conditions of every model
    return tuple(  # a claim compares (round 8: `val_flat` and `fits`, §11)
        f"{task}_{k}_{c}"
        for k in kinds
        for c in gating
        if f"{task}_{k}_{c}" in {x.id for x in rec.conditions}
    )


def reported_flat(cond):  # the `flat` beside a claim's gating conditions (no gate)
    ids = [g.removesuffix("_val_flat") + "_flat" for g in cond
           if g.endswith("_val_flat")]  # fmt: skip
    by_id = {x.id: x for x in rec.conditions}
    return "; ".join(
        f"`{i}` " + ", ".join(f"{v:.3f}" for v in np.atleast_1d(by_id[i].measured))
        + f" ({sum(by_id[i].holds_per_seed)}/{by_id[i].n} seeds {by_id[i].op} "
        f"{by_id[i].target:g})"
        for i in ids if i in by_id
    )


# %% tags=["hide-input"]
# What each claim says, the paper's words, and the numbers printed beside its
# verdict (notes).
def untested_claim(id, statement, *, paper, **_):
    reason = (
        "data/07_tree_cycle_pe/models_s*.* is missing (build it with `make data "
        "NB=07_tree_cycle_pe`); this "
        "run trained the quick configuration live"
    )
    rec.untested(id, statement, paper=paper, reason=reason)


auc = {k: np.array(v) for k, v in prop_auc.items()}
rel = {k: np.array(inv[k]["dp"]) / np.array(inv[k]["dp_between"]) for k in seq_kinds}
a_tc, a_sin = np.array(align["tree_cycle"]), np.array(align["sinusoidal"])
mae = {k: np.array(v["mae"]) for k, v in synth_res.items()}
c_tc = np.array(inv["tree_cycle"]["cos"])
f3 = lambda xs: ", ".join(f"{v:.3f}" for v in xs)  # noqa: E731
# the sinusoidal model the registered rule picks at each seed
rel_sin = np.array([rel[k][i] for i, k in enumerate(sin_best)])
# the practitioner's baselines, each with its own number; the best at each seed
base_auc = {"gin": auc["gin"], **{k: np.array(v) for k, v in ecfp_auc.items()}}
best_base = np.max([base_auc[k] for k in PRACTITIONER_BASELINES], axis=0)
best_name = [max(PRACTITIONER_BASELINES, key=lambda k: base_auc[k][i])
             for i in range(len(rseeds))]  # fmt: skip
UNIT = {
    "rerooting_invariance": "ratio of relative |Δp|, tree+cycle / sinusoidal trained "
    "with the same random-rooting augmentation (same seed)",
    "rerooting_cosine_centred": "centred cosine",
    "cycle_count_vs_gin_with_features": "MAE ratio, GIN + ring features / tree+cycle",
    "alert_alignment_gain": "top-k share inside the alert − chance",
    "alert_alignment_vs_sinusoidal": "top-k share inside the alert, tree+cycle − "
    "sinusoidal (same seed)",
    "property_auc_vs_graphormer": "ROC-AUC, tree+cycle − Graphormer + ring features",
    "property_auc_vs_gin": "ROC-AUC, tree+cycle − GIN",
    "property_auc_vs_strongest": "ROC-AUC, tree+cycle − best of GIN, ECFP4 + LR, "
    "ECFP4 + RF (same seed)",
    "cycle_only_vs_tree_cycle": "ROC-AUC, tree+cycle − cycle-only",
}
TEXT = {
    "rerooting_invariance": (
        "Predictions move less across re-rootings with tree+cycle positions than with "
        "sinusoidal positions (mean "
        "|Δp| across rootings ÷ mean |Δp| between different molecules, tree+cycle ÷ "
        "sinusoidal)",
        "0.977 ± 0.029 cosine across re-rootings (n = 24,960)",
        f"relative |Δp| tree+cycle {f3(rel['tree_cycle'])}; sinusoidal trained with "
        f"the same random-rooting augmentation (the comparator since round 6) "
        f"{f3(rel['sinusoidal'])}"
        + (f"; beside it, canonical-only {f3(rel['sinusoidal_canon'])}" if
           "sinusoidal_canon" in rel else "")
        + f"; round 5's validation-AUC pick ({', '.join(sin_best)}) {f3(rel_sin)}. "
        "Raw mean |Δp| "
        f"tree+cycle {f3(inv['tree_cycle']['dp'])}; sinusoidal "
        f"{f3(inv['sinusoidal']['dp'])}. Ablation of the "
        "tree+cycle model: tree part removed "
        f"{np.mean(abl['tree part removed']['rel_dp']):.3f}, structural tokens "
        f"removed {np.mean(abl['structural tokens removed']['rel_dp']):.3f}. "
        "Graphormer "
        f"{np.mean(inv['graphormer_cycle']['dp']):.1e}, GIN "
        f"{np.mean(inv['gin']['dp']):.1e} "
        "(graph models read the "
        f"graph). {int(rooted.sum())} rooted strings of {len(reroot_idx)} held-out "
        "molecules, whole strings.",
    ),
    "rerooting_cosine_centred": (
        "Tree+cycle embeddings of re-rooted SMILES stay close to the canonical "
        "string's (centred cosine)",
        "0.977 ± 0.029 (n = 24,960)",
        f"baseline: centred cosine between different held-out molecules (tree+cycle "
        f"{np.mean(inv['tree_cycle']['between']):.3f}, sinusoidal "
        f"{np.mean(inv['sinusoidal']['between']):.3f}); "
        f"sinusoidal same-molecule {f3(inv['sinusoidal']['cos'])}; uncentred "
        "tree+cycle "
        f"{np.mean(inv['tree_cycle']['raw']):.3f}. Ablation: tree part removed "
        f"{np.mean(abl['tree part removed']['cos']):.3f}, structural tokens removed "
        f"{np.mean(abl['structural tokens removed']['cos']):.3f} (centred).",
    ),
    "cycle_count_vs_gin_with_features": (
        "Tree+cycle Transformer counts rings by size with lower error than GIN given "
        "the same ring features",
        "2x lower error than GIN",
        "MAE "
        + ", ".join(f"{k} {v.mean():.4f}" for k, v in mae.items())
        + f" ({len(seeds)} seed(s)). Against "
        "plain GIN (the paper's comparison) the ratio is "
        f"{f3(mae['gin'] / mae['tree_cycle'])}; a linear fit on "
        f"the summed ring features alone reaches MAE {oracle_mae:.4f}.",
    ),
    "alert_alignment_gain": (
        "Tree+cycle integrated-gradients attributions for 'contains alert imine_1' "
        "fall on the alert's atoms more "
        "often than chance",
        "(no such number: the paper's +5 points are over a sinusoidal baseline, "
        "alert_alignment_vs_sinusoidal; this reads the same tree+cycle alignment "
        "against chance)",
        f"baseline: chance {chance_mean:.3f}; top-k inside the alert: tree+cycle "
        f"{f3(a_tc)}; sinusoidal "
        f"{f3(a_sin)}; {len(cand)} held-out molecules; alert-task test AUC tree+cycle "
        f"{np.nanmean(alert_auc['tree_cycle']):.3f}, sinusoidal "
        f"{np.nanmean(alert_auc['sinusoidal']):.3f}.",
    ),
    "alert_alignment_vs_sinusoidal": (
        "Tree+cycle integrated-gradients attributions fall on the alert's atoms more "
        "often than those of the "
        "sinusoidal model trained the same way (the paper's comparison)",
        "+5 points over a sinusoidal baseline",
        f"sinusoidal {f3(a_sin)}; tree+cycle {f3(a_tc)}; chance {chance_mean:.3f}. "
        "Where the alert-task AUCs "
        "differ, a gain mixes encoding and fit.",
    ),
    "property_auc_vs_graphormer": (
        "Tree+cycle beats a parameter-matched Graphormer given the same ring "
        "features on property prediction",
        "better on BACE and BBBP",
        f"{data['source']} (BACE/BBBP are not available offline); tree+cycle "
        f"{f3(auc['tree_cycle'])}; Graphormer-lite + ring features "
        f"{f3(auc['graphormer_cycle'])} (without them, the paper's baseline, not "
        f"trained in this run); GIN {auc['gin'].mean():.3f}, "
        f"sinusoidal {auc['sinusoidal'].mean():.3f}; the registered recipe's "
        "10,000 steps (quick: a few).",
    ),
    "cycle_only_vs_tree_cycle": (
        "The tree part adds to the cycle part: tree+cycle predicts activity better "
        "than cycle-only positions",
        "tree+cycle is the proposed encoding; tree alone is insufficient on rings "
        "(no ablation number in the abstract)",
        f"tree+cycle − cycle-only {f3(auc['tree_cycle'] - auc['cycle'])}; the other "
        f"way round, cycle-only − tree+cycle {f3(auc['cycle'] - auc['tree_cycle'])}. "
        "Alert task "
        "(test ROC-AUC) tree+cycle "
        f"{f3(alert_auc['tree_cycle'])}, cycle-only {f3(alert_auc['cycle'])}.",
    ),
    "property_auc_vs_gin": (
        "Tree+cycle matches or beats GIN, the strongest graph baseline here, on "
        "property prediction",
        "(the paper compares with Graphormer; GIN is our strongest baseline)",
        f"GIN {f3(auc['gin'])}; tree+cycle {f3(auc['tree_cycle'])}; same steps and "
        "split. ROC-AUC on "
        f"{len(fit_idx)} training molecules: GIN {np.nanmean(train_auc['gin']):.3f}, "
        "tree+cycle "
        f"{np.nanmean(train_auc['tree_cycle']):.3f}.",
    ),
    "property_auc_vs_strongest": (
        "Tree+cycle matches or beats the strongest baseline a practitioner would use "
        "here (GIN, ECFP4 + logistic regression, ECFP4 + random forest)",
        "(not in the paper: a practitioner's baseline on our property set)",
        f"best baseline per seed: {', '.join(best_name)} {f3(best_base)}; GIN "
        f"{f3(auc['gin'])}, ECFP4 + LR {f3(ecfp_auc['ecfp_logreg'])}, ECFP4 + RF "
        f"{f3(ecfp_auc['ecfp_rf'])}; tree+cycle {f3(auc['tree_cycle'])}. The maximum "
        "is taken on the test set, the direction that makes the claim harder to hold.",
    ),
}

# %%
claim = rec.claim if (quick or stored is not None) else untested_claim
# fmt: off
CLAIMS = [  # id, measured (one per seed), op, target, baseline, conditions
    ("rerooting_invariance", rel["tree_cycle"] / rel["sinusoidal"], "<", 0.5,
     rel["sinusoidal"], given("prop", "tree_cycle", "sinusoidal")),  # round 6
    ("rerooting_cosine_centred", c_tc, ">=", 0.9,
     inv["tree_cycle"]["between"], given("prop", "tree_cycle")),
    ("cycle_count_vs_gin_with_features", mae["gin_cycle"] / mae["tree_cycle"], ">=",
     2.0, mae["gin_cycle"], given("synth", "tree_cycle", "gin_cycle")),
    ("alert_alignment_gain", a_tc - chance_mean, ">", 0.05,
     [chance_mean], given("alert", "tree_cycle")),
    ("alert_alignment_vs_sinusoidal", a_tc - a_sin, ">", 0.05,
     a_sin, given("alert", "tree_cycle", "sinusoidal")),
    ("property_auc_vs_graphormer", auc["tree_cycle"] - auc["graphormer_cycle"], ">",
     0.0, auc["graphormer_cycle"], given("prop", "tree_cycle", "graphormer_cycle")),
    ("property_auc_vs_gin", auc["tree_cycle"] - auc["gin"], ">=", 0.0,
     auc["gin"], given("prop", "tree_cycle", "gin")),
    ("cycle_only_vs_tree_cycle", auc["tree_cycle"] - auc["cycle"], ">", 0.0,
     auc["cycle"], given("prop", "tree_cycle", "cycle")),
    ("property_auc_vs_strongest", auc["tree_cycle"] - best_base, ">=", 0.0,
     best_base, given("prop", "tree_cycle", "gin")),
]
# fmt: on
for cid, measured, op, target, baseline, cond in CLAIMS:
    statement, paper, note = TEXT[cid]
    claim(cid, statement, paper=paper, measured=np.asarray(measured, float).tolist(),
          op=op, target=target, unit=UNIT[cid], baseline=float(np.mean(baseline)),
          note=note + (f" Training-loss plateau, {NOT_GATING}: {reported_flat(cond)}."
                       if reported_flat(cond) else ""), given=cond)  # fmt: skip

# %% [markdown]
# **The verdicts under round 8's gating, and under the round 5-7 rule (§11).** The middle column is the verdict
# (gated by `val_flat` and `fits`, as saved in the record below); the next one reads the same claims with the
# rule of rounds 5-7, which also required the training-loss plateau `flat`; the last column shows each compared
# model's `flat` per seed (✓ met, ✗ not), reported and gating nothing.

# %%
holds = {c.id: c.holds_per_seed for c in rec.conditions}
rows, previous = [], {}
for c in rec.claims:
    if not c.holds_per_seed:
        continue
    old_rule = list(c.given) + [f for f in (g.removesuffix("_val_flat") + "_flat"
                                            for g in c.given if g.endswith("_val_flat"))
                                if f in holds]  # fmt: skip
    qual, _ = claims.qualifying_seeds(c.n, old_rule, holds)
    previous[c.id] = claims.verdict_of(c.measured, c.op, c.target, qual)
    on = seeds if c.id.startswith("cycle_count") else rseeds  # synthetic: models_s
    new_rule = [i not in c.inconclusive_seeds for i in range(c.n)]
    seeds_in = [", ".join(str(on[i]) for i, ok in enumerate(q) if ok) or "no seed"
                for q in (new_rule, qual)]  # fmt: skip
    flat = "; ".join(f"{f.split('_', 1)[1].removesuffix('_flat')} "
                     + "".join("✓" if h else "✗" for h in holds[f])
                     for f in old_rule if f not in c.given)  # fmt: skip
    rows.append(f"| `{c.id}` | {c.verdict} ({seeds_in[0]}) | "
                f"{previous[c.id]} ({seeds_in[1]}) | {flat} |")  # fmt: skip
display(Markdown(
    "| claim | verdict: `val_flat` + `fits` (qualifying seeds) | round 5-7 rule: + "
    "`flat` (qualifying seeds) | `flat` per seed (reported) |\n|---|---|---|---|\n"
    + "\n".join(rows)
))  # fmt: skip

# %% [markdown]
# **Training minus test, and are the models read past their best?** The specification asks for each learned
# model's training minus test ROC-AUC. And since a validation loss that rises (over-fitting) reads as
# `val_flat` met, the table also gives each model's validation ROC-AUC at its best evaluation (the step in
# brackets) and at the end, and its validation loss at its lowest and at the end: a model whose validation
# curve has fallen from its peak is read past its best. Per model, the seeds are separated by " / ".
# The claims read the stored final models, as registered; the recipe kept no intermediate weights, so a claim
# cannot be re-measured at the peak.


# %%
def val_curve(task, kind, s, what):  # (steps, values) or None where not recorded
    try:
        x, y = curve(task, kind, s, what)
        return (x, y) if len(y) else None
    except KeyError:
        return None


def slash(xs, fmt="{:.3f}"):
    return " / ".join(fmt.format(x) if x is not None else "n/a" for x in xs)


fit_rows, val_end = [], {}
for task, kinds, tr, te in (
    ("prop", PROP_KINDS, train_auc, prop_auc),
    ("alert", ALERT_KINDS, alert_train_auc, alert_auc),
):
    for k in kinds:
        peak, fin, vl = [], [], []
        for s in rseeds:
            va = val_curve(task, k, s, "val_auc")
            vloss = val_curve(task, k, s, "val_loss")
            i = None if va is None else int(np.argmax(va[1]))
            peak.append(None if va is None else f"{va[1][i]:.3f} ({int(va[0][i])})")
            fin.append(None if va is None else float(va[1][-1]))
            val_end[task, k, s] = None if va is None else (float(va[1][i]), fin[-1])
            j = None if vloss is None else int(np.argmin(vloss[1]))
            vl.append(None if vloss is None else
                      f"{vloss[1][j]:.3f} ({int(vloss[0][j])}) → {vloss[1][-1]:.3f}")
        fit_rows.append(
            f"| {task} {k} | {slash(tr[k])} | {slash(te[k])} | "
            f"{slash([a - b for a, b in zip(tr[k], te[k])], '{:+.3f}')} | "
            f"{slash(peak, '{}')} | {slash(fin)} | {slash(vl, '{}')} |"
        )
display(Markdown(
    "| model | training ROC-AUC (end) | test ROC-AUC | training − test | validation "
    "ROC-AUC at its peak (step) | validation ROC-AUC at the end | validation loss, "
    "lowest (step) → end |\n|---|---|---|---|---|---|---|\n" + "\n".join(fit_rows)
))  # fmt: skip

# %% [markdown]
# **Would a comparison read at the peak say otherwise?** For the property claims between two learned models,
# the same difference on validation ROC-AUC, with each model at the end and at its own peak (the best of its
# evaluations, a choice that favours the noisier curve); descriptive only: the verdicts read the test set on
# the stored final models.

# %%
flip_lines = []
for cid, other in (
    ("property_auc_vs_graphormer", "graphormer_cycle"),
    ("property_auc_vs_gin", "gin"),
    ("cycle_only_vs_tree_cycle", "cycle"),
):
    c = next(x for x in rec.claims if x.id == cid)
    ends = [(val_end.get(("prop", "tree_cycle", s)), val_end.get(("prop", other, s)))
            for s in rseeds]  # fmt: skip
    if not c.holds_per_seed or any(a is None or b is None for a, b in ends):
        continue
    cm = np.atleast_1d(c.measured).tolist()
    d_end = [a[1] - b[1] for a, b in ends]
    d_peak = [a[0] - b[0] for a, b in ends]
    sides = {k: [claims.OPS[c.op](x, c.target) for x in v]  # which side of the target
             for k, v in (("end", d_end), ("peak", d_peak), ("test", cm))}  # fmt: skip
    ok = [f"tree+cycle ahead at {sum(sides[k])} of {len(rseeds)}"
          for k in ("end", "peak")]  # fmt: skip
    flips = [s for i, s in enumerate(rseeds) if sides["end"][i] != sides["peak"][i]]
    vs_test = [s for i, s in enumerate(rseeds) if sides["end"][i] != sides["test"][i]]
    flip_lines.append(
        f"* `{cid}`, tree+cycle − {other}: validation at the end {f3(d_end)} "
        f"({ok[0]}), at each model's peak {f3(d_peak)} ({ok[1]}); test {f3(cm)}. "
        + (f"**Peak and end disagree at seed(s) {', '.join(map(str, flips))}.** "
           if flips else "Peak and end agree at every seed. ")
        + (f"Validation and test disagree at seed(s) {', '.join(map(str, vs_test))}."
           if vs_test else "Validation and test agree at every seed.")
    )
tc_rise = [val_end[("prop", "tree_cycle", s)] for s in rseeds
           if val_end.get(("prop", "tree_cycle", s))]  # fmt: skip
if tc_rise:
    flip_lines.append(
        "* `property_auc_vs_strongest`: the ECFP4 baselines have no training curve; "
        "tree+cycle's validation ROC-AUC at its peak is above its end by "
        f"{f3([a - b for a, b in tc_rise])}, its test deficit to the best baseline is "
        f"{f3(auc['tree_cycle'] - best_base)}."
    )
drop = {  # peak minus end validation ROC-AUC
    (t, k): [val_end[t, k, s][0] - val_end[t, k, s][1] for s in rseeds
             if val_end.get((t, k, s))]
    for t, k in (("prop", "sinusoidal"), ("alert", "tree_cycle"),
                 ("alert", "sinusoidal"))
}  # fmt: skip
flip_lines.append(
    "* The re-rooting and alert claims are measured on the final weights only. Peak "
    "minus end validation ROC-AUC of the models they read: "
    + "; ".join(f"{t} {k} {f3(v)}" for (t, k), v in drop.items() if v)
    + f"; prop tree_cycle {f3([a - b for a, b in tc_rise])}."
)
display(Markdown("\n".join(flip_lines)))

# %% [markdown]
# **Is a property margin larger than the test set's own noise? (added at the ninth review; descriptive, no
# verdict reads it.)** The three seeds give the run-to-run spread; the test molecules are one sample too.
# For each property claim and seed, the difference in test ROC-AUC is recomputed on 500 resamples (quick: 100)
# of the test molecules (paired: both models scored on the same resample, fixed stream). The table gives the measured
# difference, its 90% interval, and the share of resamples on the side of the target where the claim holds.

# %%
y_te = prop_y[prop_te]
n_boot = 100 if quick else 500  # resamples of the test molecules
boot_te = repro.rng(0, 10).integers(0, len(prop_te), size=(n_boot, len(prop_te)))
boot_te = boot_te[[0 < y_te[b].mean() < 1 for b in boot_te]]
te_prob = {(k, s): test_out[k, s][0] for k in PROP_KINDS for s in rseeds}
te_prob |= {(k, s): v[i] for k, v in ecfp_prob.items() for i, s in enumerate(rseeds)}
_boot_auc = {}


def boot_auc(k, s):  # test ROC-AUC of one model-seed on every resample (cached):
    if (k, s) not in _boot_auc:  # the rank form of ROC-AUC, all resamples at once
        r = rankdata(np.asarray(te_prob[k, s])[boot_te], axis=1)
        y = y_te[boot_te] > 0.5
        n1 = y.sum(1)
        _boot_auc[k, s] = ((r * y).sum(1) - n1 * (n1 + 1) / 2) / (n1 * (len(y_te) - n1))
        b0 = boot_te[0]  # the same number as sklearn's, ties included
        sk = roc_auc_score(y_te[b0], te_prob[k, s][b0])
        assert np.isclose(_boot_auc[k, s][0], sk)
    return _boot_auc[k, s]


boot_rows, boot_ci = [], {}
for cid, other in (("property_auc_vs_graphormer", "graphormer_cycle"),
                   ("property_auc_vs_gin", "gin"),
                   ("cycle_only_vs_tree_cycle", "cycle"),
                   ("property_auc_vs_strongest", None)):  # fmt: skip
    c = next(x for x in rec.claims if x.id == cid)
    if not c.holds_per_seed:
        continue
    for i, s in enumerate(rseeds):
        o = other or best_name[i]  # the strongest: the best baseline at this seed
        d = boot_auc("tree_cycle", s) - boot_auc(o, s)
        lo, hi = np.percentile(d, [5, 95])
        side = np.mean(claims.OPS[c.op](d, c.target))
        boot_ci[cid, s] = (float(lo), float(hi))
        boot_rows.append(f"| `{cid}` | {s} | {o} | {np.atleast_1d(c.measured)[i]:+.3f} "
                         f"| [{lo:+.3f}, {hi:+.3f}] | {side:.2f} |")  # fmt: skip
display(Markdown(
    f"| claim | seed | tree+cycle − | test difference | 90% interval ({len(boot_te)} "
    "resamples) | share where the claim holds |\n|---|---|---|---|---|---|\n"
    + "\n".join(boot_rows)
))  # fmt: skip

# %%
rec.save()
verdict = {c.id: c.verdict for c in rec.claims}
cond_ok = {c.id: c.verdict for c in rec.conditions}


# %% [markdown]
# ## 12. Known limits of this run


# %% tags=["remove-input"]
def mean(xs):
    return float(np.nanmean(xs))


def qual_text(cid):  # which seeds qualify, and what each gave
    c = next(c for c in rec.claims if c.id == cid)
    if not c.holds_per_seed:
        return "untested"
    on = seeds if cid.startswith("cycle_count") else rseeds
    ok = [i for i in range(len(on)) if i not in c.inconclusive_seeds]
    if not ok:
        return "no seed qualifies"
    if 2 * len(ok) <= len(on):
        return f"{len(ok)} of {len(on)} seed(s) qualify ({', '.join(str(on[i]) for i in ok)}): too few for a verdict"
    held = [on[i] for i in ok if c.holds_per_seed[i]]
    return (
        f"{len(ok)} of {len(on)} seed(s) qualify ("
        + ", ".join(str(on[i]) for i in ok)
        + f"), held at {len(held)} of them"
    )


def cond_text(*ids):
    bad = [i for i in ids if cond_ok.get(i) != "met"]
    return (
        "every condition is met"
        if not bad
        else "not met: " + ", ".join(f"`{i}` ({cond_ok[i]})" for i in bad)
    )


n_more_aug = int(np.sum(rel["tree_cycle"] > rel["sinusoidal"]))  # seeds (review)
sin_np, tc_np = (np.mean(no_pos[k], axis=0) for k in ("sinusoidal", "tree_cycle"))
abl_cut = mean(abl["as trained"]["rel_dp"]) / max(
    mean(abl["tree part removed"]["rel_dp"]), 1e-12
)
gin_wins = int(np.sum(auc["gin"] > auc["tree_cycle"]))
cond_by_id = {c.id: c for c in rec.conditions}


def seeds_met(cid):  # "k of n" seeds at which a condition holds
    c = cond_by_id[cid]
    return f"{sum(c.holds_per_seed)}/{len(c.holds_per_seed)}"


def met_list(task, kinds, c):
    return ", ".join(f"{k} {seeds_met(f'{task}_{k}_{c}')}" for k in kinds)


def end_losses(task, kind):  # training (last 20 steps) and validation loss at the end
    if stored is None:
        h = hists[tag_of(task, kind, rseeds[0])]
        return float(np.mean(h.loss[-20:])), h.evals["val_loss"][-1][1]
    m = [wsd[s, family_of(task, kind)].manifest["metrics"][tag_of(task, kind, s)]
         for s in rseeds]  # fmt: skip
    return mean([x["final_loss"] for x in m]), mean([x["final_val_loss"] for x in m])


gone = sorted({f"seed {s} {w}" for (s, w) in missing})
left_out = (
    f"* **Missing records.** {', '.join(gone)} not found (not trained in time): the "
    f"property and alert claims read seed(s) {', '.join(map(str, rseeds))} only, the "
    f"synthetic ones seed(s) {', '.join(map(str, seeds))}.\n"
    if missing and stored is not None
    else ""
)
try:  # round 9's D: sha256 of each seed's training strings (records only)
    d_rec = json.loads(checkpoints.fetch(SLUG, "strings.json").read_text())["seeds"]
except (OSError, KeyError, ValueError, checkpoints.CheckpointError):
    d_rec = None
strings_text = (
    "Round 9's D hashes them (`strings.json`: per seed, sha256 of the strings the "
    f"current code draws, {d_rec['0']['n_strings']:,} property training strings at "
    f"seed 0, hash `{d_rec['0']['prop_train'][:12]}…`), but nothing yet checks that a "
    "stored model saw them (another RDKit version may draw others); round 9's "
    "retraining will."
    if d_rec and "0" in d_rec
    else "Nothing checks that a stored model saw the strings a rebuild would draw "
    "(another RDKit version may draw others)."
)
changed = [c for c, v in previous.items() if v != verdict[c]]
gap = {k: mean(train_auc[k]) - mean(prop_auc[k]) for k in PROP_KINDS}
cyc_zero = sum(lo <= 0 <= hi for (c, _), (lo, hi) in boot_ci.items()
               if c == "cycle_only_vs_tree_cycle")  # fmt: skip
cyc_ends = [(val_end.get(("prop", "tree_cycle", s)), val_end.get(("prop", "cycle", s)))
            for s in rseeds]  # fmt: skip
cyc_val = (None if any(a is None or b is None for a, b in cyc_ends)  # end vs end
           else sum(a[1] > b[1] for a, b in cyc_ends))  # fmt: skip
best_mae = min(mean(v) for v in mae.values())
auc_range = max(float(np.ptp(auc[k])) for k in seq_kinds)
losses = {k: end_losses("prop", k) for k in PROP_KINDS}
n_fail = {  # model-seeds failing each recipe condition (property and alert models)
    c: sum(x.n - sum(x.holds_per_seed) for x in rec.conditions
           if x.id.split("_")[0] in ("prop", "alert") and x.id.endswith(f"_{c}")
           and "strongest" not in x.id and (c != "flat" or not x.id.endswith("val_flat")))
    for c in RECORDED_CONDITIONS
}  # fmt: skip
display(
    Markdown(f"""
* **Are the models trained to their regime?** The property and alert models are the
  registered recipe's (§5). Training-sample ROC-AUC at the end: {
        ", ".join(f"{k} {mean(train_auc[k]):.3f}" for k in PROP_KINDS)}; training
  minus test: {", ".join(f"{k} {v:+.3f}" for k, v in gap.items())}. Seeds at which each
  property model meets the registered conditions: `fits` {
        met_list("prop", PROP_KINDS, "fits")}; `val_flat` {
        met_list("prop", PROP_KINDS, "val_flat")}; `flat` {
        met_list("prop", PROP_KINDS, "flat")}. Alert models: `fits` {
        met_list("alert", ALERT_KINDS, "fits")}; `val_flat` {
        met_list("alert", ALERT_KINDS, "val_flat")}; `flat` {
        met_list("alert", ALERT_KINDS, "flat")}. {
        "The training-loss plateau is what fails most often: at constant learning "
        "rate, drawing at every visit one of the same six strings per molecule (the "
        "canonical one and 5 randomized SMILES fixed per seed, §5), the models keep "
        "lowering "
        "their training loss"
        if n_fail["flat"] > max(n_fail["val_flat"], n_fail["fits"])
        else "Training loss"} (at the end {
        ", ".join(f"{k} {a:.3f}" for k, (a, b) in losses.items())}){
        " while the validation loss stays flat or rises"
        if n_fail["flat"] > max(n_fail["val_flat"], n_fail["fits"])
        else "; validation loss"} (at the end {
        ", ".join(f"{k} {b:.3f}" for k, (a, b) in losses.items())}){
        ": they memorise the training molecules"
        if all(a < b for a, b in losses.values())
        else ""}. **Since round 8 `flat` gates nothing** (a change decided after
  the numbers were seen, disclosed in §11): the verdicts are gated by `val_flat` and
  `fits`, the two conditions the chapter's specification names. Against the round 5-7
  rule, which also required `flat`, this changes {
        ", ".join(f"`{c}` ({previous[c]} -> {verdict[c]})" for c in changed)
        or "no verdict"}. `val_flat` is met by a validation curve that rises, so §11
  shows how far each model ended past its validation peak. The synthetic models are the
  earlier
  round's ({cfg["steps_synth"]} steps at learning rate {cfg["lr"]:g}): {
        cond_text(*given("synth", "tree_cycle", "gin_cycle"))}.
* **Every positional term starts at token scale.** The sinusoidal table is scaled, and
  the tree+cycle term passes through a LayerNorm whose gain starts at the token
  embeddings' size: fresh ratios {
        ", ".join(f"{k} {v:.2f}" for k, v in pe_ratio.items())
    } (the unnormalised term would be {raw_ratio:.1f}×); after training, seed
  {rseeds[0]}: {", ".join(f"{k} {v:.2f}" for k, v in trained_ratio.items())}.
* **Re-rooting.** Relative to each model's spread between molecules, tree+cycle
  predictions move {"*more*" if n_more_aug else "less"} across rootings than those of
  the sinusoidal model trained with the same random-rooting augmentation at {
        n_more_aug if n_more_aug else len(rseeds) - n_more_aug} of {len(rseeds)} seed(s)
  (tree+cycle {f3(rel["tree_cycle"])} vs {f3(rel["sinusoidal"])}; the comparator since
  round 6, chosen after the reviewer saw round 5's numbers, §8; `rerooting_invariance` {
        verdict["rerooting_invariance"]}, {qual_text("rerooting_invariance")}){
        ". The canonical-only sinusoidal model, never trained on rooted strings, "
        + ("moves more" if mean(rel["sinusoidal_canon"]) > mean(rel["sinusoidal"])
           else "does not move more")
        + f": {f3(rel['sinusoidal_canon'])}; round 5's validation-AUC rule picked it at "
        f"{sin_best.count('sinusoidal_canon')} of {len(rseeds)} seed(s)"
        if "sinusoidal_canon" in rel else ""}. Removing the positional term at test
  time (§8, added at review in round 7) moves the sinusoidal model's test ROC-AUC from {
        mean(prop_auc["sinusoidal"]):.3f} to {sin_np[0]:.3f} (mean |Δp| {sin_np[1]:.3f},
  against its re-rooting |Δp| {mean(inv["sinusoidal"]["dp"]):.3f}) and tree+cycle's from {
        mean(prop_auc["tree_cycle"]):.3f} to {tc_np[0]:.3f} (|Δp| {tc_np[1]:.3f}){
        ": the sinusoidal model reads almost nothing from its positions, so its "
        "invariance is largely that of a model that ignores token order (its table is "
        "fixed in size while the tree+cycle term's gain is learned; a sinusoidal "
        "comparator with a learned gain would be the stronger, symmetric baseline)"
        if abs(mean(prop_auc["sinusoidal"]) - sin_np[0]) < 0.01 else ""}. The centred
  cosine is {mean(c_tc):.3f} (`rerooting_cosine_centred` {
        verdict["rerooting_cosine_centred"]
    }), {"below" if mean(c_tc) < mean(inv["sinusoidal"]["cos"]) else "above"} the
  sinusoidal model's {mean(inv["sinusoidal"]["cos"]):.3f}{
        ": by this measure tree+cycle is not more invariant than the baseline it replaces"
        if mean(c_tc) < mean(inv["sinusoidal"]["cos"])
        else ""
    }. The ablation in §8 locates
  the string dependence: removing the tree part at test time gives a centred cosine of
  {mean(abl["tree part removed"]["cos"]):.3f} and divides the relative |Δp| by {
        abl_cut:.1f}; removing the
  structural tokens gives {
        mean(
            abl["structural tokens removed"]["cos"]
        ):.3f}. On ring molecules the tree encoding
  depends on which ring bond the string opens (the paper's Prop. 2, check
  `tree_pe_not_invariant_on_rings`). Trained with invariant positions (cycle-only, by
  construction; only the structural tokens still depend on the string), the relative
  |Δp| is {mean(rel["cycle"]):.3f} (centred cosine {mean(inv["cycle"]["cos"]):.3f}).
* **Counting rings.** Tree+cycle's error is {
        mean(mae["gin"] / mae["tree_cycle"]):.1f}× lower than plain GIN's
  (the paper's comparison) and {
        f3(mae["gin_cycle"] / mae["tree_cycle"])}× lower than GIN given the same
  ring features, seed by seed (`cycle_count_vs_gin_with_features` {
        verdict["cycle_count_vs_gin_with_features"]
    }, {qual_text("cycle_count_vs_gin_with_features")}). The ring features
  carry most of the answer: the cycle-only Transformer's MAE is {mean(mae["cycle"]):.4f}
  against tree+cycle's {f3(mae["tree_cycle"])}, and a linear fit on the summed ring
  features alone reaches {oracle_mae:.4f} on the test molecules ({
        "below" if oracle_mae < best_mae else "above"} the best trained model's {
        best_mae:.4f}; tree+cycle is below it at {
        int(np.sum(mae["tree_cycle"] < oracle_mae))} of {len(seeds)} seed(s)). On training
  molecules that fit reaches {oracle_train_mae:.4f}; GIN + ring features stays at {
        f3(synth_train_mae.get("gin_cycle", [np.nan]))}, tree+cycle at {
        f3(synth_train_mae.get("tree_cycle", [np.nan]))} (`synth_<kind>_fits`): a GIN
  that does not match a linear read-out of its own inputs is a weak baseline, and a
  ratio against it says little about the encoding.
* **Property prediction.** GIN beats tree+cycle on {gin_wins} of {len(rseeds)} seed(s)
  (`property_auc_vs_gin` {verdict["property_auc_vs_gin"]}, {
        qual_text("property_auc_vs_gin")}; `property_auc_vs_graphormer` {
        verdict["property_auc_vs_graphormer"]}, {
        qual_text("property_auc_vs_graphormer")}: Graphormer-lite is given the ring
  features, as the tree+cycle model is; tree+cycle − it {
        f3(auc["tree_cycle"] - auc["graphormer_cycle"])}). Test
  ROC-AUC by model: {
        ", ".join(f"{k} {mean(v):.3f}" for k, v in prop_auc.items())
    }; the tree part's contribution on top of the cycle part is
  {mean(auc["tree_cycle"] - auc["cycle"]):+.3f}
  (`cycle_only_vs_tree_cycle` {verdict["cycle_only_vs_tree_cycle"]}, {
        qual_text("cycle_only_vs_tree_cycle")}), {
        "within"
        if abs(mean(auc["tree_cycle"] - auc["cycle"])) <= auc_range
        else "beyond"
    } one model's seed-to-seed range of test ROC-AUC (up to {
        auc_range:.3f} among the sequence models){
        f"; on resampled test molecules its 90% interval contains zero at {cyc_zero}"
        f" of {len(rseeds)} seed(s), and validation ROC-AUC at the end puts tree+cycle"
        f" ahead at {cyc_val} (§11)"
        + (": read it as no resolved contribution of the tree part, either way"
           if cyc_zero and cyc_val else "")
        if cyc_val is not None else ""}. The
  fingerprint baseline, ECFP4 +
  logistic regression {mean(ecfp_auc["ecfp_logreg"]):.3f} and + random forest {
        mean(ecfp_auc["ecfp_rf"]):.3f}, is the best of a practitioner's baselines at {
        sum(n.startswith("ecfp") for n in best_name)} of {len(rseeds)} seed(s);
  tree+cycle − the best of them {f3(auc["tree_cycle"] - best_base)}
  (`property_auc_vs_strongest` {verdict["property_auc_vs_strongest"]}, {
        qual_text("property_auc_vs_strongest")}).
* **Alert alignment.** Top attributions fall on the alert {
        mean(a_tc - chance_mean):+.3f} above chance for
  tree+cycle (`alert_alignment_gain` {verdict["alert_alignment_gain"]}) and {
        mean(a_tc - a_sin):+.3f} above the
  sinusoidal model (`alert_alignment_vs_sinusoidal` {
        verdict["alert_alignment_vs_sinusoidal"]
    }, {qual_text("alert_alignment_vs_sinusoidal")}). Both read one measurement, the
  tree+cycle alignment {f3(a_tc)}, against two baselines; only the second is the
  paper's comparison. The cycle-only model's alignment is {
        f3(align["cycle"]) if "cycle" in align else "n/a"}{
        ", at or above tree+cycle's on average: the gain over sinusoidal comes with the "
        "cycle part, not the tree part"
        if "cycle" in align and mean(align["cycle"]) >= mean(a_tc) else ""}. `imine_1` is
  a C=N outside a ring and the cycle encoding gives every atom its ring membership, so
  the encoding hands the model part of the alert's definition, which the sinusoidal
  model has to learn from the tokens (added at review in round 7). The bootstrap in
  §9 shows how uncertain one seed's gain is with {len(cand)} scored molecules. Against
  chance alone the bar is low: model-free element priors, scored the same way (added at
  review), reach {", ".join(f"{v:.3f} ({k})" for k, v in prior_align.items())}; the
  sinusoidal model's {mean(a_sin):.3f} is {
        "at or below" if mean(a_sin) <= max(prior_align.values()) else "above"} the better of
  them, tree+cycle's {mean(a_tc):.3f} {
        "above" if mean(a_tc) > max(prior_align.values()) else "at or below"} it{
        "; the seeds disagree in sign, so no direction is read from them"
        if len(set(np.sign(a_tc - a_sin))) > 1
        else ""
    }.
{left_out}* Integrated gradients use {ig_steps} integration points (round 6: 128 -> 96, the same
  top-k atoms in a sensitivity check, §9; median completeness gap {
        np.median(gaps):.3f} logits;
  check `ig_completeness` is on the median).
* **Invariance against steps is not measured.** The recipe stored each model's
  curves (loss, training-sample and validation ROC-AUC, §7) but no intermediate
  weights, so re-rooting invariance (§8) is read on the final models only. Round 9
  (`data/07_tree_cycle_pe/make_round9.py`, registered before any of its training, not
  yet run) trains the stored tree+cycle and sinusoidal property models again with weight
  snapshots and checks that the final weights equal the stored ones.
* **Two more of the specification's build items are not delivered (ninth review).**
  The canonical-spanning-tree variant (`ctree_cycle`) is implemented and checked
  (`canonical_tree_pe_invariant`) but not trained, so whether an *invariant* tree part
  adds to the cycle part is not measured (the round-9 training recipe, `make_round9.py`, registers its training). The
  randomized training strings are not stored in the checkpoints: a rebuild redraws them
  from the seed with RDKit. {strings_text}
* Each seed changes the initial weights, the batch order and the randomized training
  strings; the train / validation / test split is the same for every seed. The property
  split is MoleculeACE's (cluster-stratified), not a scaffold split. **The second
  MoleculeACE set with a scaffold split that the issue asks for is not built**: every
  property verdict rests on CHEMBL204 alone (round 9 registers it: CHEMBL214 Ki, which
  ships in the same MoleculeACE package, with a Murcko-scaffold split). Nothing was
  tuned on the test molecules.
""")
)

# %% [markdown]
# ### Round 7: probing the next recipe (records only; no verdict above reads them)
#
# Until round 8, most verdicts were inconclusive because the training-loss plateau `flat` failed (since
# round 8 it is reported and gates nothing, §11). Round 7
# registered two recipes before training any of their models
# (`data/07_tree_cycle_pe/make_fresh.py`): **A** writes a fresh randomized SMILES at every
# visit instead of drawing one of five fixed ones, and multiplies the sinusoidal table by
# a learned per-dimension gain (the tree+cycle term already has its LayerNorm's learned
# gain), so the comparator can use its positions; **B** adds dropout and a stronger weight
# decay (values in the script), aimed at memorising the molecules themselves. Which of the two to probe was
# decided by an evaluation of the stored models (no training,
# `make_string_diagnosis.py`): their loss on training molecules through the strings they
# trained on, through fresh strings they never saw, and on validation molecules. Then one
# seed of B was trained, arm by arm (GIN first), stopping at the first arm that misses a
# condition. After GIN missed one, an information run of B's sinusoidal arm was
# registered (before it trained, disclosed: each claim is gated per model, so the sequence
# models' fit does not depend on GIN's; it cannot change B's reading).

# %% tags=["remove-input"]
def read_record(fname):  # a records-only JSON of this chapter, or None when absent
    try:
        path = checkpoints.fetch("07_tree_cycle_pe", fname)
        return json.loads(path.read_text()) if path.exists() else None
    except (OSError, checkpoints.CheckpointError):
        return None


diag, probe = read_record("string_diagnosis.json"), read_record("probe_freshreg.json")
lines = []
if diag is not None:
    dm = diag["models"]
    lines.append(
        "| model (seed 0) | training molecules: canonical | seen randomized | "
        "fresh randomized | validation |\n|---|---|---|---|---|\n"
        + "\n".join(f"| {k.removeprefix('prop_')} | {v['canonical']:.3f} | "
                    f"{v['seen_random']:.3f} | {v['fresh_random']:.3f} | "
                    f"{v['val_canonical']:.3f} |" for k, v in dm.items())
    )  # fmt: skip
    aug = {k: v for k, v in dm.items() if not k.endswith("_canon")}
    d_str = {k: v["fresh_random"] - v["seen_random"] for k, v in aug.items()}
    d_mol = {k: v["val_canonical"] - v["fresh_random"] for k, v in aug.items()}
    lines.append(
        "Mean binary cross-entropy of the stored augmented models: fresh minus seen "
        "strings " + ", ".join(f"{k.removeprefix('prop_')} {v:+.3f}" for k, v in d_str.items())
        + "; validation minus fresh " + ", ".join(
            f"{k.removeprefix('prop_')} {v:+.3f}" for k, v in d_mol.items()) + ". "
        + ("Most of what the models learned about their training set survives a string "
           "they never saw: they memorise molecules, not strings, so fresh strings "
           "alone (A) cannot stop the training loss from falling; the probe is B."
           if all(d_mol[k] > 2 * max(d_str[k], 0) for k in aug) else
           "String memorisation is a large part of the training/validation gap.")
    )  # fmt: skip
if probe is not None:
    rd, arms = probe["reading"], probe["arms"]
    rows = []
    for a, v in arms.items():
        c, w = v["conditions"], v["wsd_beside"]["conditions"]
        rows.append(f"| {a.removeprefix('prop_')} | " + " | ".join(
            f"{c[k]['value']:.3f} {'✓' if c[k]['met'] else '✗'} (wsd {w[k]['value']:.3f})"
            for k in ("flat", "val_flat", "fits")) + f" | {v['final']['final_val_auc']:.3f} |")
    lines.append(
        "| arm (recipe B, seed 0) | `flat` <= 0.05 | `val_flat` <= 0.02 | `fits` >= 0.95 "
        "| validation ROC-AUC |\n|---|---|---|---|---|\n" + "\n".join(rows)
    )  # fmt: skip
    pos = {a: v["snapshots"] for a, v in arms.items() if "val_auc_no_pos" in v["snapshots"][-1]}
    said = {True: "met", False: "not met", None: "undecided"}[rd["met"]]
    lines.append(
        f"Probe reading (registered rule): {said}"
        + (": " + "; ".join(f"{a.removeprefix('prop_')} misses {', '.join(f'`{x}`' for x in b)}"
                            for a, b in rd["failing"].items()) if rd["failing"] else "")
        + (f"; not trained: {', '.join(a.removeprefix('prop_') for a in rd['not_trained'])}"
           if rd["not_trained"] else "") + f". Next: {rd['next']}. "
        + " ".join(
            f"{a.removeprefix('prop_')}: removing its positions costs "
            + ", ".join(f"{s['val_auc'] - s['val_auc_no_pos']:+.3f}" for s in sn)
            + " validation ROC-AUC at steps " + ", ".join(str(s["step"]) for s in sn)
            + f" (|PE|/|token| {sn[-1]['pe_token_ratio']:.2f} at the end: it "
            + ("uses" if sn[-1]["uses_positions"] else "does not use") + " its positions)."
            for a, sn in pos.items())
        + (" Sequence arms of B (the information run's reading, `sequence_reading` in "
           "`make_fresh.py`): " + "; ".join(
               f"{a.removeprefix('prop_')} "
               + ("meets every condition" if all(x["met"] for x in arms[a]["conditions"].values())
                  else "misses " + ", ".join(f"`{k}`" for k, x in arms[a]["conditions"].items()
                                             if not x["met"]))
               for a in ("prop_sinusoidal", "prop_tree_cycle") if a in arms) + "."
           if any(a in arms for a in ("prop_sinusoidal", "prop_tree_cycle"))
           else " The information run of B's sinusoidal arm is not in this record.")
        + " One seed: a probe, read by its rule only, never as a claim."
    )  # fmt: skip
display(Markdown("\n\n".join(lines) if lines else "No round-7 record in this data folder."))
