"""Tests for helpers.tree_cycle_pe: alignment, invariance of the encodings, cycle basis, baselines, bad input."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from rdkit import Chem

from helpers import tree_cycle_pe as tc

RING_MOLS = ["CC(=O)Oc1ccccc1C(=O)O", "C1CCC2CCCCC2C1", "C1CCC(C1)C1CCCC1", "C1CC2CCC1CC2",
             "Cn1cnc2c1c(=O)n(C)c(=O)n2C", "C12C3C4C1C5C2C3C45", "C1CCC2(CC1)CCCC2", "c1ccc2ccccc2c1"]
ACYCLIC_MOLS = ["CC(C)CC(N)C(=O)O", "CCCCN(CC)C(=O)OCC", "OCC(O)CO", "CC(C)(C)OC(=O)NCCN", "C"]


def variants(smi: str, n_random: int = 6) -> list[str]:
    mol = tc.parse_smiles(smi)
    return [tc.rooted_smiles(mol, r) for r in range(mol.GetNumAtoms())] + tc.random_smiles(mol, n_random, 0)


def spread(smi: str, what: str) -> float:
    rows = []
    for s in variants(smi):
        f = tc.featurize(s)
        rows.append(tc.sorted_rows(f.atom_keys, getattr(f, what)))
    return max(tc.multiset_diff(rows[0], r) for r in rows)


# -- parsing and alignment ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", ["C1CC", "not a smiles", "", "C(C", "c1cccc1X"])
def test_invalid_smiles_raises_value_error(bad):
    with pytest.raises(ValueError, match="SMILES"):
        tc.parse_smiles(bad)
    with pytest.raises(ValueError):
        tc.featurize(bad)


def test_bad_types_and_arguments():
    with pytest.raises(TypeError):
        tc.parse_smiles(3)
    with pytest.raises(ValueError):
        tc.rooted_smiles("CCO", 5)
    with pytest.raises(ValueError):
        tc.random_smiles("CCO", 0, 0)
    with pytest.raises(TypeError):
        tc.tree_paths("CCO")
    with pytest.raises(ValueError):
        tc.SeqEncoder(10, pe="rope")
    with pytest.raises(ValueError):
        tc.collate([])
    with pytest.raises(ValueError):
        tc.random_ring_system(np.random.default_rng(0), kind="cage")


def test_alignment_of_aspirin_by_hand():
    ser = tc.serialize("CC(=O)Oc1ccccc1C(=O)O")
    pairs = list(zip(ser.tokens, ser.token_atom.tolist()))
    assert pairs[:6] == [("C", 0), ("C", 1), ("(", 1), ("=", 2), ("O", 2), (")", 1)]
    assert pairs[7:9] == [("c", 4), ("1", 4)]  # the ring digit belongs to the atom carrying it
    assert ser.closures == [(4, 9)]
    assert ser.tree_parent.tolist() == [-1, 0, 1, 1, 3, 4, 5, 6, 7, 8, 9, 10, 10]


@pytest.mark.parametrize("smi", RING_MOLS + ACYCLIC_MOLS + ["CC.O", "C[NH3+].[Cl-]", "C=1CCCCC1", "C%10CC%10"])
def test_each_atom_once_and_tree_plus_closures_is_the_graph(smi):
    for s in variants(smi, 3):
        ser = tc.serialize(s)
        assert sorted(ser.token_atom[ser.is_atom].tolist()) == list(range(ser.n_atoms))
        assert (ser.token_atom >= 0).all()
        tree = {frozenset((v, int(p))) for v, p in enumerate(ser.tree_parent) if p >= 0}
        bonds = {frozenset((b.GetBeginAtomIdx(), b.GetEndAtomIdx())) for b in ser.mol.GetBonds()}
        assert tree | {frozenset(c) for c in ser.closures} == bonds
        assert len(tree) + len(ser.closures) == len(bonds)
        assert Chem.MolToSmiles(ser.mol) == Chem.MolToSmiles(tc.parse_smiles(smi))


# -- the encodings -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("smi", ACYCLIC_MOLS)
def test_tree_pe_invariant_on_acyclic(smi):
    assert spread(smi, "tree") == 0.0


@pytest.mark.parametrize("smi", RING_MOLS + ACYCLIC_MOLS)
def test_cycle_pe_invariant_for_every_rooting(smi):
    assert spread(smi, "cycle") == 0.0


def test_tree_pe_not_invariant_on_a_ring():
    assert spread("Cc1ccccc1", "tree") > 0  # which ring bond is opened changes the spanning tree


@pytest.mark.parametrize("smi", RING_MOLS + ACYCLIC_MOLS)
def test_canonical_tree_pe_invariant_for_every_rooting(smi):
    assert spread(smi, "ctree") == 0.0  # the canonical spanning tree does not depend on the string


def test_canonical_tree_is_a_spanning_tree_and_equals_tree_on_acyclic():
    f = tc.featurize("CC(C)CC(N)C(=O)O")
    assert (f.ctree == f.tree).all()  # on a tree, the string's tree is the graph: both encodings agree
    g = tc.featurize("C1CCC2CCCCC2C1")
    assert ((g.ctree >= 0).sum(1) == 0).sum() == 1  # exactly one root
    with pytest.raises(TypeError):
        tc.canonical_tree_paths("C1CC1")
    with pytest.raises(ValueError):
        tc.canonical_tree_paths(tc.parse_smiles("C1CC1"), np.array([0, 0, 1]))


def test_tree_paths_of_a_chain():
    # propane written from an end: canonical root is a terminal carbon (rank 0); path lengths 0, 1, 2
    f = tc.featurize("CCC")
    depths = sorted((row >= 0).sum() for row in f.tree)
    assert depths == [0, 1, 2]


@pytest.mark.parametrize("smi,sizes", [
    ("C1CCC2CCCCC2C1", [6, 6]), ("C1CCC(C1)C1CCCC1", [5, 5]), ("C1CC2CCC1CC2", [6, 6]),
    ("C12C3C4C1C5C2C3C45", [4, 4, 4, 4, 4]), ("CCO", []), ("C1CC1.C1CCCCCCCC1", [3, 9]),
])
def test_cycle_basis_size_and_sizes(smi, sizes):
    mol = tc.parse_smiles(smi)
    basis = tc.canonical_cycle_basis(mol)
    assert len(basis) == mol.GetNumBonds() - mol.GetNumAtoms() + len(Chem.GetMolFrags(mol))
    assert sorted(len(r) for r in basis) == sizes


def test_ring_count_targets_and_features():
    np.testing.assert_array_equal(tc.ring_count_targets("C1CCC2CCCCC2C1"), [0, 0, 0, 2, 0, 0])
    np.testing.assert_array_equal(tc.ring_count_targets("C1CC1.C1CCCCCCCC1"), [1, 0, 0, 0, 0, 1])
    f = tc.cycle_features(tc.parse_smiles("c1ccc2ccccc2c1"))
    assert f[:, 0].max() == 2 and f[:, 0].min() == 1  # fusion atoms are in two rings
    assert (f[:, 7] == 1).all()  # every atom in an aromatic ring
    assert np.allclose(f[:, 9] ** 2 + f[:, 10] ** 2, 1.0)  # sin^2 + cos^2 of the first ring position


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10**6), st.sampled_from(["fused", "spiro", "bridged", "chain", "mixed"]))
def test_property_random_ring_systems(s, kind):
    smi = tc.random_ring_system(np.random.default_rng(s), kind)
    mol = tc.parse_smiles(smi)
    assert len(tc.canonical_cycle_basis(mol)) == tc.cycle_rank(mol)
    assert (kind == "chain") == (tc.cycle_rank(mol) == 0)
    rows = []
    for v in tc.random_smiles(mol, 4, s):
        f = tc.featurize(v)
        rows.append((tc.sorted_rows(f.atom_keys, f.cycle), tc.sorted_rows(f.atom_keys, f.tree)))
    assert max(tc.multiset_diff(rows[0][0], r[0]) for r in rows) == 0.0
    if kind == "chain":
        assert max(tc.multiset_diff(rows[0][1], r[1]) for r in rows) == 0.0


# -- models --------------------------------------------------------------------------------------------------------
def _vocab():
    keys = {tc.atom_key(a) for s in RING_MOLS + ACYCLIC_MOLS for a in tc.parse_smiles(s).GetAtoms()}
    return tc.Vocab(keys)


@pytest.mark.parametrize("smi,parts", [("C1CCC2CCCCC2C1", ("cycle",)), ("CC(=O)Oc1ccccc1C(=O)O", ("cycle",)),
                                       ("CC(C)CC(N)C(=O)O", ("tree", "cycle"))])
def test_exact_invariance_atoms_only(smi, parts):
    vocab = _vocab()
    torch.manual_seed(0)
    model = tc.SeqEncoder(len(vocab), pe="tree_cycle").eval()
    items = [tc.featurize(s, vocab) for s in variants(smi)]
    with torch.no_grad():
        z = model.encode(tc.collate(items, atoms_only=True), parts)[:, 0]
        full = model.encode(tc.collate(items), parts)[:, 0]
    assert (z - z[:1]).abs().max().item() <= 1e-5
    assert (full - full[:1]).abs().max().item() > 1e-5  # structural tokens break exactness


def test_sinusoidal_is_not_invariant():
    vocab = _vocab()
    torch.manual_seed(0)
    model = tc.SeqEncoder(len(vocab), pe="sinusoidal").eval()
    items = [tc.featurize(s, vocab) for s in variants("CC(C)CC(N)C(=O)O")]
    with torch.no_grad():
        z = model.encode(tc.collate(items, atoms_only=True))[:, 0]
    assert (z - z[:1]).abs().max().item() > 1e-4


def _pe_token_ratio(model, batch, table=None):
    """Mean norm of the positional term over the mean norm of the token embeddings, real tokens only."""
    if table is None:
        return tc.pe_token_ratio(model, batch)
    with torch.no_grad():
        tok = model.tok(batch["ids"])
    real = batch["pad"] & (batch["atom"] >= 0)
    return (table.norm(dim=-1)[real].mean() / tok.norm(dim=-1)[real].mean()).item()


@pytest.mark.parametrize("width", [32, 64, 128])
def test_positional_term_does_not_swamp_token_embeddings(width):
    vocab = _vocab()
    items = [tc.featurize(s, vocab) for s in RING_MOLS + ACYCLIC_MOLS]
    batch = tc.collate(items)
    torch.manual_seed(0)
    sin = tc.SeqEncoder(len(vocab), pe="sinusoidal", d_model=width)
    assert _pe_token_ratio(sin, batch) <= 3.0
    # the unscaled table (what the first checkpoint used) fails the same bound by far
    raw = tc.hnn.sinusoidal_table(batch["pos"], width) * batch["pad"][..., None]
    assert _pe_token_ratio(sin, batch, raw) > 10 * 3.0
    ratios = {"sinusoidal": _pe_token_ratio(sin, batch)}
    for kind in ("tree", "cycle", "tree_cycle", "ctree_cycle"):
        torch.manual_seed(0)
        ratios[kind] = _pe_token_ratio(tc.SeqEncoder(len(vocab), pe=kind, d_model=width), batch)
    assert tc.pe_scale_matched(ratios), ratios  # every encoding starts at token scale


def test_pe_scale_matched_fails_on_a_mis_scaled_encoding():
    vocab = _vocab()
    batch = tc.collate([tc.featurize(s, vocab) for s in RING_MOLS + ACYCLIC_MOLS])
    torch.manual_seed(0)
    model = tc.SeqEncoder(len(vocab), pe="tree_cycle")
    ok = tc.pe_token_ratio(model, batch)
    model.pe.norm = None  # the unnormalised term (what the round-2 checkpoint used)
    raw = tc.pe_token_ratio(model, batch)
    assert tc.pe_scale_matched({"tree_cycle": ok}) and raw > 3.0
    assert not tc.pe_scale_matched({"tree_cycle": raw})
    with torch.no_grad():  # a gain far below token scale: positions negligible, fails too
        model.pe.norm = torch.nn.LayerNorm(64)
        model.pe.norm.weight.fill_(1e-4)
    assert not tc.pe_scale_matched([tc.pe_token_ratio(model, batch)])
    with pytest.raises(ValueError):
        tc.pe_scale_matched([])
    with pytest.raises(ValueError):
        tc.pe_scale_matched([1.0], bound=0.5)
    with pytest.raises(TypeError):
        tc.pe_token_ratio(tc.GIN(len(vocab)), batch)


def test_val_split_and_checkpoint_names():
    tr, val = tc.val_split(np.arange(10, 30), 0.2)
    assert len(val) == 4 and not set(tr) & set(val) and set(tr) | set(val) == set(range(10, 30))
    assert (tc.val_split(np.arange(10, 30), 0.2)[1] == val).all()  # seeded: the same split every time
    with pytest.raises(ValueError):
        tc.val_split(np.arange(5), 1.0)
    assert tc.checkpoint_config("models_s2")["seeds"] == [2]
    with pytest.raises(ValueError):
        tc.checkpoint_config("models")


def test_fit_sample_jobs_of_and_task_regime():
    idx = np.arange(100, 2000)
    a = tc.fit_sample(idx)
    assert len(a) == 600 == len(set(a)) and np.isin(a, idx).all()
    assert (tc.fit_sample(idx) == a).all() and len(tc.fit_sample(np.arange(5))) == 5
    for bad in (np.array([], dtype=int), np.zeros((2, 2), dtype=int)):
        with pytest.raises(ValueError):
            tc.fit_sample(bad)
    cfg = tc.checkpoint_config("models_s1")
    assert len(tc.jobs_of(cfg)) == sum(len(cfg[f"{t}_kinds"]) for t in tc.TASKS)
    assert {t for t, _, _ in tc.jobs_of(cfg, tasks=["prop"])} == {"prop"}
    assert [k for _, k, _ in tc.jobs_of(cfg, tasks=["prop"], kinds=["gin", "sinusoidal"])] == [
        k for k in cfg["prop_kinds"] if k in ("gin", "sinusoidal")]
    with pytest.raises(ValueError):
        tc.jobs_of(cfg, tasks=["nope"])
    with pytest.raises(ValueError):  # the synthetic task trains no Graphormer
        tc.jobs_of(cfg, tasks=["synth"], kinds=["graphormer"])
    prop = tc.task_regime(cfg, "prop")
    assert (prop["steps"], prop["lr"], prop["eval_every"]) == (cfg["steps_prop"], cfg["lr_prop"],
                                                              cfg["eval_every_prop"])
    assert tc.task_regime(cfg, "alert")["lr"] == cfg["lr"] and tc.task_regime(cfg, "synth")["width"] == 32
    with pytest.raises(ValueError):
        tc.task_regime(cfg, "nope")


def test_make_models_parts_merge_into_the_whole_checkpoint(tmp_path):
    """A prop-only part merged with the other tasks carried from a full run is byte-identical to the full run."""
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    script = repo / "data" / "07_tree_cycle_pe" / "make_models.py"

    def run(*args):
        return subprocess.run([sys.executable, str(script), "--tiny", "--name", "models_s0", *args], cwd=repo,
                              capture_output=True, text=True, timeout=300)

    full, part, merged = tmp_path / "full", tmp_path / "part", tmp_path / "merged"
    assert run("--out", str(full)).returncode == 0
    assert run("--tasks", "prop", "--out", str(part)).returncode == 0
    r = run("--merge", str(part), "--carry-from", str(full), "--out", str(merged))
    assert r.returncode == 0, r.stderr[-2000:]
    sha = [(d / "07_tree_cycle_pe" / "models_s0.safetensors").read_bytes() for d in (full, merged)]
    assert sha[0] == sha[1]
    r = run("--merge", str(part), "--carry-from", str(tmp_path / "none"), "--out", str(merged))
    assert r.returncode != 0  # synth and alert models in no part and nowhere to carry them from


def test_gin_cannot_separate_1wl_pair_but_cycle_pe_can():
    vocab = _vocab()
    pair = [tc.featurize("C1CCC2CCCCC2C1", vocab), tc.featurize("C1CCC(C1)C1CCCC1", vocab)]
    torch.manual_seed(0)
    gin = tc.GIN(len(vocab)).eval()
    seq = tc.SeqEncoder(len(vocab), pe="tree_cycle").eval()
    with torch.no_grad():
        g = gin.embed(tc.graph_batch(pair, vocab))[0]
        z = seq.encode(tc.collate(pair, atoms_only=True), ("cycle",))[:, 0]
    assert (g[0] - g[1]).abs().max().item() <= 1e-5
    assert (z[0] - z[1]).abs().max().item() > 1e-3


def test_models_shapes_and_graphormer_bias():
    vocab = _vocab()
    items = [tc.featurize(s, vocab) for s in RING_MOLS[:3]]
    seq = tc.SeqEncoder(len(vocab), n_out=6, n_node=1)
    out, node = seq(tc.collate(items))
    assert out.shape == (3, 6) and node.shape[-1] == 1
    g = tc.graph_batch(items, vocab)
    gf = tc.GraphormerLite(len(vocab), n_out=2)
    assert gf(g).shape == (3, 2) and torch.isfinite(gf(g)).all()
    assert tc.GIN(len(vocab), n_out=2)(g).shape == (3, 2)
    assert g.dense_spd[0, 1, 1] == 1 and g.dense_spd[0, 0, 1] == 0  # self distance 0 -> bucket 1; [CLS] -> 0
    gc = tc.make_model("graphormer_cycle", len(vocab), n_out=2).eval()
    assert g.dense_cycle.shape == (3, g.dense_ids.shape[1], tc.CYCLE_DIM)
    assert (g.dense_cycle[:, 0] == 0).all()  # [CLS] has no ring features
    with torch.no_grad():
        before = gc(g)
        g.dense_cycle = g.dense_cycle + 1.0
        assert (gc(g) - before).abs().max().item() > 1e-4  # the ring features reach the output
        g.dense_cycle = None
    with pytest.raises(ValueError):
        gc(g)


def test_alert_atoms():
    assert tc.alert_atoms("O=[N+]([O-])c1ccccc1")  # nitro aromatic is a BRENK alert
    assert tc.alert_atoms("CCO") == set()


# -- ring tokens, metrics, attributions, training ------------------------------------------------------------------
def test_ring_digits_become_one_token_with_canonical_ring_ids():
    vocab = _vocab()
    a, b = tc.featurize("C1CC1C2CC2", vocab), tc.featurize("C2CC2C1CC1", vocab)  # same string, digits swapped
    assert (a.token_ids == b.token_ids).all() and (a.ring_id == b.ring_id).all()
    ring = vocab.id(tc.RING_TOKEN)
    assert ((a.token_ids == ring) == (a.ring_id > 0)).all()
    assert sorted(a.ring_id[a.ring_id > 0].tolist()) == [1, 1, 2, 2]  # the two tokens of one closure share an id
    f = tc.featurize("C1CC2CC1CC2", vocab)  # interleaved closures: each digit still pairs correctly
    ser = tc.serialize("C1CC2CC1CC2")
    for c in range(len(ser.closures)):
        assert len(set(f.ring_id[ser.token_closure == c].tolist())) == 1
    assert tc.collate([f])["ring"].max().item() == f.ring_id.max()
    assert all(t not in vocab.stoi for t in "123456789")


def test_dropped_atoms_flags_truncation():
    vocab = _vocab()
    items = [tc.featurize(s, vocab) for s in RING_MOLS]
    assert tc.dropped_atoms(tc.collate(items), items) == 0
    assert tc.dropped_atoms(tc.collate(items, max_len=8), items) > 0  # cut strings lose atoms: the check fails
    with pytest.raises(ValueError):
        tc.dropped_atoms(tc.collate(items[:1]), items)


def test_centred_cosine():
    rng = np.random.default_rng(0)
    a, b, c = rng.normal(size=(5, 4)), rng.normal(size=(5, 4)), rng.normal(size=4)
    cos = tc.centred_cosine(a, b, c)
    assert np.allclose(tc.centred_cosine(a + 3, b + 3, c + 3), cos)  # a shared offset does not matter
    assert np.allclose(tc.centred_cosine(a, a, c), 1.0)
    offset = np.full(4, 100.0)  # a big shared offset makes the raw cosine ~1 for unrelated vectors
    assert tc.centred_cosine(a + offset, b + offset, np.zeros(4)).min() > 0.99
    assert abs(tc.centred_cosine(a + offset, b + offset, offset).mean()) < 0.9
    with pytest.raises(ValueError):
        tc.centred_cosine(a, b[:3], c)


def test_alignment_at_k_and_alert_match():
    hit, chance = tc.alignment_at_k(np.array([0.1, 5.0, 3.0, 0.2]), {1, 2})
    assert hit == 1.0 and chance == 0.5
    assert tc.alignment_at_k(np.array([5.0, 0.1, 0.2, 3.0]), {1, 2})[0] == 0.0
    with pytest.raises(ValueError):
        tc.alignment_at_k(np.ones(3), set())
    atoms = tc.alert_match("O=[N+]([O-])c1ccccc1", "nitro_group")
    assert atoms and atoms <= {0, 1, 2, 3}
    assert tc.alert_match("CCO", "nitro_group") == set()
    with pytest.raises(ValueError):
        tc.alert_match("CCO", "not an alert")


def test_integrated_gradients_completeness():
    vocab = _vocab()
    torch.manual_seed(0)
    model = tc.SeqEncoder(len(vocab), pe="tree_cycle", d_model=16, n_layer=1, n_head=2, d_ff=16).eval()
    with torch.no_grad():
        model.tok.weight.mul_(50)
        model.head.weight.mul_(1000)  # a large logit change between the input and the baseline
    feat = tc.featurize("CC(=O)Oc1ccccc1C(=O)O", vocab)
    attr, gap = tc.integrated_gradients(model, feat, steps=16)
    assert attr.shape == (len(feat.atom_keys),) and abs(gap) <= 0.05
    # gradient x input (one point at the input) is not complete: the ig_completeness check would fail
    b = tc.collate([feat])
    emb = model.tok(b["ids"]).detach()
    keep = torch.zeros_like(emb)
    keep[:, 0] = emb[:, 0]
    x = emb.clone().requires_grad_(True)
    out = model.head(model.encode(b, inputs_embeds=x)[:, 0])[0, 0]
    (g,) = torch.autograd.grad(out, x)
    with torch.no_grad():
        base = model.head(model.encode(b, inputs_embeds=keep)[:, 0])[0, 0]
    gxi = ((emb - keep) * g).sum()
    assert abs(float(gxi - (out - base))) > 0.05


def _ig_reference(model, feat, steps):
    """integrated_gradients as it was before the review of round 5: the string collated ``steps`` times, the
    logit through the whole encoder."""
    b = tc.collate([feat] * steps)
    emb = model.tok(b["ids"]).detach()
    keep = torch.zeros_like(emb)
    keep[:, 0] = emb[:, 0]
    emb = emb - keep
    alpha = ((torch.arange(steps, dtype=torch.float32) + 0.5) / steps)[:, None, None]
    x = (keep + alpha * emb).requires_grad_(True)
    out = model.head(model.encode(b, inputs_embeds=x)[:, 0])[:, 0]
    (grad,) = torch.autograd.grad(out.sum(), x)
    tok_attr = (emb[0] * grad.mean(0)).sum(-1)[1:]
    per_atom = torch.zeros(len(feat.atom_keys)).index_add_(0, b["atom"][0][1:], tok_attr)
    with torch.no_grad():
        one = tc.collate([feat])
        full = model.head(model.encode(one, inputs_embeds=keep[:1] + emb[:1])[:, 0])[0, 0]
        base = model.head(model.encode(one, inputs_embeds=keep[:1])[:, 0])[0, 0]
    return per_atom.detach().numpy(), float(tok_attr.sum() - (full - base))


@pytest.mark.parametrize("pe,n_layer", [("tree_cycle", 3), ("sinusoidal", 3), ("cycle", 1)])
def test_cls_logit_and_integrated_gradients_match_the_full_encoder(pe, n_layer):
    vocab = _vocab()
    torch.manual_seed(1)
    model = tc.SeqEncoder(len(vocab), pe=pe, d_model=16, n_layer=n_layer, n_head=2, d_ff=32).eval()
    items = [tc.featurize(s, vocab) for s in ("CC(=O)Oc1ccccc1C(=O)O", "C1CCC2CCCCC2C1", "CCO")]
    b = tc.collate(items)  # padded: the masked path
    x = model.tok(b["ids"]).detach() * 1.7
    with torch.no_grad():
        full = model.head(model.encode(b, inputs_embeds=x)[:, 0])[:, 0]
        fast = tc._cls_logit(model, b, x)
        # a broken shortcut (the last block's MLP left out) is told apart
        blk = model.blocks[-1]
        saved = blk.mlp.forward
        blk.mlp.forward = lambda h: torch.zeros_like(h)
        broken = tc._cls_logit(model, b, x)
        blk.mlp.forward = saved
    torch.testing.assert_close(fast, full, rtol=1e-5, atol=1e-6)
    assert (broken - full).abs().max() > 1e-4  # far outside the tolerance above
    for feat in items:
        attr, gap = tc.integrated_gradients(model, feat, steps=8)
        ref_attr, ref_gap = _ig_reference(model, feat, 8)
        np.testing.assert_allclose(attr, ref_attr, rtol=1e-4, atol=1e-6)
        assert abs(gap - ref_gap) <= 1e-5


def test_gin_with_ring_features_separates_the_1wl_pair():
    vocab = _vocab()
    pair = [tc.featurize("C1CCC2CCCCC2C1", vocab), tc.featurize("C1CCC(C1)C1CCCC1", vocab)]
    gin = tc.make_model("gin_cycle", len(vocab)).eval()
    with torch.no_grad():
        g = gin.embed(tc.graph_batch(pair, vocab))[0]
    assert (g[0] - g[1]).abs().max().item() > 1e-3


def test_fit_model_is_deterministic_and_predicts_every_rooting():
    vocab = _vocab()
    feats = tc.featurize_set(RING_MOLS + ACYCLIC_MOLS, vocab, n_aug=2)
    y = torch.tensor([float(tc.cycle_rank(s) > 1) for s in RING_MOLS + ACYCLIC_MOLS])
    idx = np.arange(len(feats))
    runs = [tc.fit_model("tree_cycle", feats, idx, y, vocab, steps=3, seed=1, batch_size=4, width=16,
                         progress=False)[0] for _ in range(2)]
    for p, q in zip(runs[0].parameters(), runs[1].parameters()):
        assert torch.equal(p, q)
    out, _ = tc.predict(runs[0], [f[0] for f in feats], vocab)
    assert out.shape == (len(feats), 1)
    _, hist = tc.fit_model("cycle", feats, idx[:-3], y, vocab, steps=4, seed=0, batch_size=4, width=16,
                           progress=False, val_idx=idx[-3:], eval_every=2)
    assert [s for s, _ in hist.evals["val_loss"]] == [2, 4]
    _, hist2 = tc.fit_model("cycle", feats, idx[:-3], y, vocab, steps=4, seed=0, batch_size=4, width=16,
                            progress=False, val_idx=idx[-3:], eval_every=2, auc_idx=idx[:6])
    assert [s for s, _ in hist2.evals["fit_auc"]] == [2, 4] and "val_auc" in hist2.evals
    assert all(np.isnan(v) or 0 <= v <= 1 for _, v in hist2.evals["fit_auc"])
    assert hist2.loss == hist.loss  # reading the AUC along training changes no weight
    for bad in (dict(auc_idx=idx[-3:]), dict(auc_idx=idx[:6], val_idx=None), dict(auc_idx=idx[:0])):
        kw = dict(val_idx=idx[-3:], eval_every=2) | bad
        with pytest.raises(ValueError):  # training molecules only, with a validation set, non-empty
            tc.fit_model("cycle", feats, idx[:-3], y, vocab, steps=2, seed=0, batch_size=4, width=16,
                         progress=False, **kw)
    with pytest.raises(ValueError):  # validation molecules must not be trained on
        tc.fit_model("cycle", feats, idx, y, vocab, steps=2, seed=0, batch_size=4, width=16, progress=False,
                     val_idx=idx[-3:], eval_every=1)
    gin = tc.fit_model("gin_cycle", feats, idx, y, vocab, steps=2, seed=0, batch_size=4, width=8,
                       progress=False)[0]
    rooted = [tc.featurize(tc.rooted_smiles(RING_MOLS[0], r), vocab) for r in range(5)]
    p = tc.predict(gin, rooted, vocab)[0]
    assert (p - p[:1]).abs().max().item() <= 1e-5  # a graph model reads the same graph from any string


def test_roc_auc_scores_a_model_on_labelled_molecules():
    vocab = _vocab()
    items = [tc.featurize(s, vocab) for s in RING_MOLS + ACYCLIC_MOLS]
    y = np.array([1.0] * len(RING_MOLS) + [0.0] * len(ACYCLIC_MOLS))
    model = tc.make_model("gin_cycle", len(vocab)).eval()
    out, _ = tc.predict(model, items, vocab)
    order = np.argsort(out[:, 0].numpy())
    perfect = np.zeros(len(items))
    perfect[order[len(order) // 2:]] = 1.0  # labels that the model's ranking separates perfectly
    assert tc.roc_auc(model, items, perfect, vocab) == pytest.approx(1.0)
    assert tc.roc_auc(model, items, 1.0 - perfect, vocab) == pytest.approx(0.0)
    assert np.isnan(tc.roc_auc(model, items, np.ones(len(items)), vocab))
    with pytest.raises(ValueError):
        tc.roc_auc(model, items, y[:-1], vocab)
    with pytest.raises(ValueError):
        tc.roc_auc(model, items, y * 2, vocab)
