"""Tests for round 7 of chapter 07 (helpers.tree_cycle_pe.fresh_*, make_fresh.py), registered before its
training: the new options leave the stored models' regime unchanged, fresh strings are new at every visit with the
same canonical share, snapshots are the weights at their steps, and the probe's reading follows its rule."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from _loader import load_module

from helpers import checkpoints
from helpers import tree_cycle_pe as tc

REPO = Path(__file__).resolve().parents[1]
SMILES = ["CC(=O)Oc1ccccc1C(=O)O", "C1CCC2CCCCC2C1", "CCOc1ccc(N)cc1", "OCC(O)CO", "c1ccc2ccccc2c1",
          "CC(C)Cc1ccc(cc1)C(C)C(=O)O"]


def _data():
    vocab = tc.vocab_for(SMILES)
    feats = tc.featurize_set(SMILES, vocab, n_aug=2)
    return vocab, feats, torch.tensor([1.0, 1.0, 0.0, 0.0, 1.0, 0.0]), np.arange(len(SMILES))


def test_sin_gain_starts_at_the_fixed_scale_and_adds_only_its_gain():
    vocab, feats, _, _ = _data()
    fixed = tc.make_model("sinusoidal", len(vocab), seed=3, width=16)
    gain = tc.make_model("sinusoidal", len(vocab), seed=3, width=16, sin_gain=True)
    a, b = fixed.state_dict(), gain.state_dict()
    assert set(b) - set(a) == {"sin_gain"} and all(torch.equal(a[k], b[k]) for k in a)
    assert fixed.sin_gain is None and torch.allclose(gain.sin_gain, torch.full((16,), tc.SIN_SCALE))
    batch = tc.collate([f[0] for f in feats])
    with torch.no_grad():
        assert torch.equal(fixed.positional(batch), gain.positional(batch))
        assert torch.equal(fixed(batch), gain(batch))
        gain.sin_gain.mul_(10)
        assert torch.allclose(gain.positional(batch), 10 * fixed.positional(batch))
    assert gain.sin_gain.requires_grad
    with pytest.raises(ValueError, match="sinusoidal"):
        tc.SeqEncoder(len(vocab), pe="tree_cycle", sin_gain=True)
    assert tc.make_model("tree_cycle", len(vocab), sin_gain=True).state_dict().keys() == \
        tc.make_model("tree_cycle", len(vocab)).state_dict().keys()  # ignored by the other kinds


def test_dropout_is_off_at_evaluation_and_keeps_the_state_dict():
    vocab, feats, _, _ = _data()
    items = [f[0] for f in feats]
    for kind in ("gin", "sinusoidal", "graphormer_cycle"):
        plain = tc.make_model(kind, len(vocab), seed=1, width=16)
        drop = tc.make_model(kind, len(vocab), seed=1, width=16, dropout=0.5)
        assert plain.state_dict().keys() == drop.state_dict().keys()
        b = tc.model_batch(plain, items, vocab)
        plain.eval()
        drop.eval()
        with torch.no_grad():
            assert torch.allclose(plain(b), drop(b))
            drop.train()
            torch.manual_seed(0)
            assert not torch.allclose(plain(b), drop(b))
    with pytest.raises(ValueError):
        tc.make_model("gin", len(vocab), dropout=1.0)


def _fit(data=None, **kw):
    vocab, feats, y, idx = data or _data()
    args = dict(steps=6, seed=0, batch_size=3, width=8, progress=False, schedule="wsd", warmup=1, decay_steps=2)
    args.update(kw)
    return tc.fit_model(args.pop("kind", "tree_cycle"), feats, idx, y, vocab, **args)


def test_fresh_strings_are_new_at_every_visit_with_the_same_canonical_share(monkeypatch):
    data = _data()
    feats = data[1]
    fixed = {f.smiles for fs in feats for f in fs}
    seen = []
    real = tc.refeaturize
    monkeypatch.setattr(tc, "refeaturize", lambda s, b, v=None: seen.append(s) or real(s, b, v))
    h1 = _fit(data, fresh=True, steps=16)[1]
    assert len(seen) > 16 and len(set(seen)) > 0.5 * len(seen)  # new strings, rarely the same twice
    assert len(set(seen) - fixed) > 0.8 * len(set(seen))
    assert all(tc.parse_smiles(s) is not None for s in seen)
    n_fresh = len(seen)
    h2 = _fit(data, fresh=True, steps=16)[1]
    assert h1.loss == h2.loss and seen[:n_fresh] == seen[n_fresh:]  # seeded: the same strings and weights
    # the canonical string is drawn exactly where the fixed recipe draws it: the same count of fresh visits as
    # the fixed recipe's randomized ones (j > 0)
    js = []
    for step in range(16):
        r = np.random.default_rng([0, 7, step])
        mols = r.choice(np.arange(len(SMILES)), size=3, replace=False)
        js += [int(r.integers(len(feats[m]))) for m in mols]
    assert n_fresh == sum(j > 0 for j in js)
    assert _fit(data, fresh=False, steps=16)[1].loss != h1.loss
    with pytest.raises(ValueError, match="augment"):
        _fit(fresh=True, augment=False)
    monkeypatch.setattr(tc, "refeaturize", real)
    g1, g2 = _fit(kind="gin", fresh=True)[1], _fit(kind="gin")[1]  # graphs read no string: nothing changes
    assert g1.loss == g2.loss


def test_refeaturize_equals_featurize_for_every_string_of_the_molecule():
    vocab = tc.vocab_for(SMILES + ["C1CC2CCC1CC2", "C1CC12CC2", "c1ccc2c(c1)[nH]c1ccccc12"])
    mols = SMILES + ["C1CC2CCC1CC2", "C1CC12CC2", "c1ccc2c(c1)[nH]c1ccccc12", "CC.O", "[NH4+].[Cl-]"]
    for smi in mols:
        base = tc.featurize(smi, vocab)
        n = tc.parse_smiles(smi).GetNumAtoms()
        for s in tc.random_smiles(smi, 6, seed=11) + [tc.rooted_smiles(smi, r) for r in range(min(3, n))]:
            a, b = tc.featurize(s, vocab), tc.refeaturize(s, base, vocab)
            for key in ("tokens", "token_ids", "token_atom", "is_atom", "atom_keys", "tree", "cycle", "edges",
                        "degree", "spd", "in_ring", "ranks", "ring_id", "ctree"):
                assert np.array_equal(np.asarray(getattr(a, key)), np.asarray(getattr(b, key))), (smi, s, key)
    with pytest.raises(ValueError, match="not a string of the molecule"):
        tc.refeaturize("CCN", tc.featurize("CCO", vocab), vocab)
    with pytest.raises(ValueError, match="not a string of the molecule"):
        tc.refeaturize("CCCO", tc.featurize("CCO", vocab), vocab)
    with pytest.raises(TypeError):
        tc.refeaturize("CCO", "CCO", vocab)


def test_defaults_leave_the_stored_regime_unchanged():
    a = _fit()[1]
    b = _fit(fresh=False, sin_gain=False, dropout=0.0, snapshot_every=0)[1]
    assert a.loss == b.loss


def test_snapshots_are_the_weights_at_their_steps():
    snaps = {}
    model, _ = _fit(steps=12, val_idx=None, eval_every=2, snapshot_every=4, snapshots=snaps)
    assert sorted(snaps) == [4, 8, 12]
    assert all(torch.equal(snaps[12][k], v) for k, v in model.state_dict().items())
    assert not all(torch.equal(snaps[4][k], v) for k, v in model.state_dict().items())
    short = {}
    _fit(steps=12, val_idx=None, eval_every=2, snapshot_every=8, snapshots=short)
    assert sorted(short) == [8, 12]
    for bad in (dict(snapshot_every=4, eval_every=3, snapshots={}), dict(snapshot_every=4, eval_every=2),
                dict(snapshot_every=4, eval_every=0, snapshots={})):
        with pytest.raises(ValueError, match="snapshot"):
            _fit(**bad)


def test_fresh_config_is_the_wsd_recipe_plus_the_registered_changes():
    for name in tc.FRESH_NAMES:
        cfg = tc.fresh_config(name)
        recipe, seed, family = name.split("_", 2)
        base = tc.recipe_config(f"wsd_{seed}_{family}")
        assert {k: cfg[k] for k in base if k not in ("recipe", "registered")} == \
            {k: v for k, v in base.items() if k not in ("recipe", "registered")}
        assert cfg["recipe"] == recipe and cfg["registered"] == tc.FRESH_REGISTERED == "2026-12-07"
        assert cfg["fresh"] == (family != "prop_sinusoidal_canon") and cfg["sin_gain"]
        assert (cfg["dropout"], cfg["weight_decay"]) == ((0.0, 0.01) if recipe == "fresh" else (0.1, 0.05))
        assert cfg["snapshot_every"] == (2000 if cfg["task"] == "prop" else 300)
        assert cfg["snapshot_every"] % cfg["eval_every"] == 0 and cfg["steps"] % cfg["snapshot_every"] == 0
        assert tc.checkpoint_config(name) == cfg
    assert "prop_gin" not in tc.FRESH_FAMILIES["fresh"] and "prop_gin" in tc.FRESH_FAMILIES["freshreg"]
    assert set(tc.FRESH_PROBE["fresh"]) == {"fresh_s0_prop_tree_cycle", "fresh_s0_prop_sinusoidal"}
    for names in tc.FRESH_PROBE.values():  # the probe's arms come first, in the order the script trains
        assert [n for n in tc.FRESH_NAMES if n in names] == list(names)
    for bad in ("fresh_s0_prop_gin", "fresh_s0_ecfp", "freshreg_s0_ecfp", "wsd_s0_prop_gin", "fresh_0_alert"):
        with pytest.raises(ValueError):
            tc.fresh_config(bad)
    q = tc.fresh_config("fresh_s0_alert", quick=True, seed=4)
    assert q["seeds"] == [4] and q["steps"] == 12 and q["snapshot_every"] == 8


def _c(flat=True, val_flat=True, fits=True):
    return {k: dict(value=0.0, op="<=", bar=tc.RECIPE_BARS[k], met=m)
            for k, m in (("flat", flat), ("val_flat", val_flat), ("fits", fits))}


def test_probe_reading_follows_the_registered_rule():
    r = tc.fresh_probe_reading({"prop_tree_cycle": _c(), "prop_sinusoidal": _c()})
    assert r["met"] and r["failing"] == {} and "seeds 0-2" in r["next"]
    r = tc.fresh_probe_reading({"prop_tree_cycle": _c(), "prop_sinusoidal": _c(flat=False)})
    assert not r["met"] and r["failing"] == {"prop_sinusoidal": ["flat"]} and "probe B" in r["next"]
    r = tc.fresh_probe_reading({"prop_gin": _c(fits=False, val_flat=False)}, "freshreg")
    assert r["failing"] == {"prop_gin": ["val_flat", "fits"]} and "no further" in r["next"]
    assert r["not_trained"] == ["prop_sinusoidal", "prop_tree_cycle"]  # stopped once decided
    r = tc.fresh_probe_reading({"prop_gin": _c(), "prop_sinusoidal": _c()}, "freshreg")
    assert r["met"] is None and r["not_trained"] == ["prop_tree_cycle"] and "undecided" in r["next"]
    r = tc.fresh_probe_reading({a: _c() for a in ("prop_gin", "prop_sinusoidal", "prop_tree_cycle")}, "freshreg")
    assert r["met"] and r["not_trained"] == []
    with pytest.raises(ValueError, match="not probed"):
        tc.fresh_probe_reading({"prop_gin": _c()}, "fresh")
    with pytest.raises(ValueError):
        tc.fresh_probe_reading({})
    with pytest.raises(ValueError, match="lacks"):
        tc.fresh_probe_reading({"prop_gin": {"flat": _c()["flat"]}}, "freshreg")
    with pytest.raises(ValueError):
        tc.fresh_probe_reading({"prop_gin": _c()}, "wsd")
    assert tc.uses_positions(0.90, 0.89) and not tc.uses_positions(0.90, 0.8901)
    assert not tc.uses_positions(0.90, 0.95)


def _script():
    return load_module(REPO / "data" / "07_tree_cycle_pe" / "make_fresh.py", "_make_fresh")


def test_make_fresh_writes_weights_outside_data_only_and_records_the_probe(tmp_path):
    mod = _script()
    with pytest.raises(SystemExit, match="outside data/"):
        mod.main(["--name", "fresh_s0_prop_cycle", "--timing", "10"])
    with pytest.raises(SystemExit, match="outside data/"):
        mod.main(["--name", "fresh_s0_prop_cycle", "--out", str(REPO / "data" / "x")])
    t = mod.timing_config(tc.fresh_config("fresh_s0_prop_tree_cycle"), 300)
    assert (t["steps"], t["warmup"], t["decay_steps"], t["snapshot_every"], t["timing"]) == (300, 30, 60, 100, 300)
    made = mod.main(["--tiny", "--out", str(tmp_path)])
    assert len(made) == 6  # the probe's three arms (B's), a checkpoint and a snapshot file each
    gin = checkpoints.load_manifest("07_tree_cycle_pe", "freshreg_s0_prop_gin", tmp_path)
    assert "val_auc_no_pos" not in next(iter(gin["metrics"].values()))["snapshots"][0]
    mod._FAILED.clear()
    stop = mod.main(["--tiny", "--stop-on-fail", "--out", str(tmp_path / "stop")])
    assert len(stop) == 2 and mod._FAILED == ["freshreg_s0_prop_gin"]  # a tiny model misses a condition
    mod._FAILED.clear()
    mod.main(["--tiny", "--name", "fresh_s0_prop_sinusoidal", "fresh_s0_prop_tree_cycle", "--out", str(tmp_path)])
    man = checkpoints.load_manifest("07_tree_cycle_pe", "fresh_s0_prop_sinusoidal", tmp_path)
    (tag, m), = man["metrics"].items()
    assert [s["step"] for s in m["snapshots"]] == [8, 12] and set(m["conditions"]) == set(tc.RECIPE_BARS)
    assert {"val_auc", "val_auc_no_pos", "uses_positions", "pe_token_ratio"} <= set(m["snapshots"][0])
    snap = tmp_path / "07_tree_cycle_pe" / "fresh_s0_prop_sinusoidal_snapshots.safetensors"
    assert man["extra"]["snapshots"]["sha256"] == checkpoints.sha256_file(snap)
    with pytest.raises(SystemExit, match="registered config"):
        mod.summary("fresh", tmp_path, tmp_path / "r.json")
    with pytest.raises(SystemExit, match="registered config"):  # the CLI reads the skeleton's --out
        mod.main(["--summary", "fresh", "--out", str(tmp_path)])
    with pytest.raises(SystemExit, match="--out"):
        mod.main(["--summary", "fresh"])
    path = mod.summary("fresh", tmp_path, tmp_path / "r.json",
                       config=lambda n: tc.fresh_config(n, quick=True, seed=0))
    rec = json.loads(path.read_text())
    assert set(rec["arms"]) == {"prop_tree_cycle", "prop_sinusoidal"}
    assert rec["reading"] == tc.fresh_probe_reading({a: v["conditions"] for a, v in rec["arms"].items()})
    quick = lambda n: tc.fresh_config(n, quick=True, seed=0)  # noqa: E731
    rec = json.loads(mod.summary("freshreg", tmp_path / "stop", tmp_path / "s.json", config=quick).read_text())
    assert set(rec["arms"]) == {"prop_gin"} and rec["reading"]["not_trained"] == ["prop_sinusoidal",
                                                                                  "prop_tree_cycle"]


# -- the committed probe record(s) ---------------------------------------------------------------------------------
@pytest.mark.parametrize("path", sorted((REPO / "data" / "07_tree_cycle_pe").glob("probe_fresh*.json")),
                         ids=lambda p: p.stem)
def test_committed_probe_record_is_read_as_registered(path):
    rec = json.loads(path.read_text())
    assert rec["recipe"] in tc.FRESH_RECIPES and path.stem == f"probe_{rec['recipe']}"
    assert set(rec["arms"]) | set(rec["reading"]["not_trained"]) == \
        {n.split("_", 2)[2] for n in tc.FRESH_PROBE[rec["recipe"]]}
    for name, cfg in rec["config"].items():
        assert not checkpoints.diff_config(tc.fresh_config(name), cfg)
    for arm in rec["arms"].values():
        for c, x in arm["conditions"].items():
            assert x["bar"] == tc.RECIPE_BARS[c]
            assert x["met"] == (x["value"] <= x["bar"] if x["op"] == "<=" else x["value"] >= x["bar"])
    assert rec["reading"] == tc.fresh_probe_reading({a: v["conditions"] for a, v in rec["arms"].items()},
                                                    rec["recipe"])


def test_sequence_reading_of_b_reads_the_sequence_arms_only():
    mod = _script()
    arm = lambda **kw: dict(conditions=_c(**kw))  # noqa: E731
    rec = dict(arms={"prop_gin": arm(flat=False)})
    assert mod.sequence_reading(rec)["met"] is None  # GIN's miss does not decide it
    rec["arms"]["prop_sinusoidal"] = arm()
    r = mod.sequence_reading(rec)
    assert r["met"] is None and r["not_trained"] == ["prop_tree_cycle"] and "prop_tree_cycle" in r["next"]
    rec["arms"]["prop_tree_cycle"] = arm()
    assert mod.sequence_reading(rec)["met"] is True
    rec["arms"]["prop_sinusoidal"] = arm(flat=False, fits=False)
    r = mod.sequence_reading(rec)
    assert r["met"] is False and r["failing"] == {"prop_sinusoidal": ["flat", "fits"]}
