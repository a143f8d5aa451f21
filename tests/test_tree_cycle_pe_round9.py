"""Tests for round 9 of chapter 07 (data/07_tree_cycle_pe/make_round9.py), registered before any of its training:
the jobs are the wsd recipe's, the scaffold split keeps scaffolds apart, the measures and reading rules do what the
docstring registers, and a broken input or record makes them fail."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from _loader import load_module

from helpers import checkpoints
from helpers import tree_cycle_pe as tc

REPO = Path(__file__).resolve().parents[1]
m9 = load_module(REPO / "data" / "07_tree_cycle_pe" / "make_round9.py")
SMILES = ["c1ccccc1CC", "c1ccccc1CO", "c1ccccc1CN", "C1CCCCC1C", "C1CCCCC1O", "c1ccncc1C", "CCO", "CCCN",
          "O=C1CCCN1C", "c1ccc2ccccc2c1"]


def _base(job):
    """The stored wsd family a job's config starts from."""
    arm, family = job.split("_", 1)
    return family if arm == "C" else {"prop": "prop_tree_cycle", "alert": "alert", "ecfp": "ecfp"}[family.split("_")[0]]


def test_jobs_are_the_registered_wsd_recipe():
    for k in range(3):
        for job in m9.JOBS:
            cfg = m9.job_config(job, k)
            arm, family = job.split("_", 1)
            base = tc.recipe_config(f"wsd_s{k}_{_base(job)}")
            changed = {key for key in base if cfg[key] != base[key]}
            added = set(cfg) - set(base)
            assert added <= {"snapshot_every", "round", "job", "quick", "n_reroot", "n_alert", "ig_steps", "split",
                             "test_frac"}, job
            allowed = {"family", "kinds"} | ({"dataset", "n_prop"} if arm == "B" else set())
            if arm == "C":
                allowed = set()  # C trains exactly the stored model
            assert changed <= allowed | {"registered"}, (job, changed)
            assert cfg["seeds"] == [k] and cfg["registered"] == m9.REGISTERED
            if family != "ecfp":
                assert cfg["snapshot_every"] == (2000 if cfg["task"] == "prop" else 300)
                assert cfg["steps"] == (10_000 if cfg["task"] == "prop" else 1500)
            if arm == "B":
                assert cfg["dataset"] == "CHEMBL214_Ki" and cfg["split"] == "murcko_scaffold"
    assert m9.job_config("A_prop_ctree_cycle", 0)["kinds"] == ["ctree_cycle"]
    with pytest.raises(ValueError):
        m9.job_config("A_prop_tree", 0)
    with pytest.raises(ValueError):
        m9.round9_config("round9_s3")


def test_scaffold_split_keeps_every_scaffold_on_one_side():
    from rdkit.Chem.Scaffolds import MurckoScaffold

    tr, te = m9.scaffold_split(SMILES, 0.2)
    assert len(set(tr) | set(te)) == len(SMILES) and not set(tr) & set(te)
    scaf = [MurckoScaffold.MurckoScaffoldSmiles(mol=tc.parse_smiles(s), includeChirality=False) for s in SMILES]
    assert not {scaf[i] for i in tr} & {scaf[i] for i in te}
    assert len(tr) <= 0.8 * len(SMILES) and len(te) >= 1
    assert scaf[tr[0]] == "c1ccccc1"  # the largest group goes to training first
    a, b = m9.scaffold_split(list(SMILES), 0.2)
    assert np.array_equal(a, tr) and np.array_equal(b, te)  # deterministic
    with pytest.raises(TypeError):
        m9.scaffold_split(["CCO"], 0.2)
    with pytest.raises(ValueError):
        m9.scaffold_split(SMILES, 1.0)
    with pytest.raises(ValueError, match="empty"):
        m9.scaffold_split(["c1ccccc1C", "c1ccccc1O"], 0.2)  # one scaffold: the test side would be empty


def test_strings_hash_follows_every_string_and_its_order():
    vocab = tc.vocab_for(SMILES)
    feats = tc.featurize_set(SMILES, vocab, n_aug=2, seed=0)
    h = m9.strings_sha256(feats, [0, 1, 2])
    assert h == m9.strings_sha256(feats, np.array([0, 1, 2]))
    assert h != m9.strings_sha256(feats, [1, 0, 2])
    other = tc.featurize_set(SMILES, vocab, n_aug=2, seed=1)  # another seed's randomized strings
    assert h != m9.strings_sha256(other, [0, 1, 2])


def test_reroot_measures():
    rs = dict(rooted=np.array([False, True, True, False, True]), canon_of=np.array([0, 0, 0, 3, 3]),
              pairs=np.array([[0, 1], [1, 2], [0, 2]]))
    rng = np.random.default_rng(0)
    z_test, p_test = rng.normal(size=(3, 4)), np.array([0.1, 0.5, 0.9])
    z = np.repeat(rng.normal(size=(2, 4)), [3, 2], axis=0)
    p = np.array([0.3, 0.3, 0.3, 0.7, 0.7])
    r = m9.reroot_measures(p, z, p_test, z_test, rs)  # an invariant model
    assert r["dp"] == 0 and r["rel_dp"] == 0 and r["cos"] == pytest.approx(1.0)
    assert r["dp_between"] == pytest.approx(np.mean([0.4, 0.4, 0.8]))
    p2 = p + np.array([0, 0.1, 0.3, 0, 0.2])
    assert m9.reroot_measures(p2, z, p_test, z_test, rs)["rel_dp"] == pytest.approx(0.2 / r["dp_between"])
    z2 = z.copy()
    z2[1] = -z2[1] + 2 * z_test.mean(0)  # opposite about the centre
    assert m9.reroot_measures(p, z2, p_test, z_test, rs)["cos"] < 0.7


def _record(tmp_ok=True):
    cfg = m9.job_config("C_prop_tree_cycle", 0, quick=True)
    steps, every = cfg["steps"], cfg["eval_every"]
    val = [[s, 0.6 - 0.01 * i] for i, s in enumerate(range(every, steps + 1, every))]
    fit = [[s, 0.97] for s in range(every, steps + 1, every)]
    cond = tc.recipe_conditions(np.linspace(1, 0, steps).tolist(), val, fit, until=tc.recipe_until(cfg))
    return dict(job="C_prop_tree_cycle", config=cfg, conditions=cond, curves=dict(val_loss=val, fit_auc=fit),
                snapshots=[dict(step=every * 2), dict(step=steps)], prop_strings_sha256="ab")


def test_record_problems_and_qualifies_catch_a_broken_record():
    rec = _record()
    assert m9.record_problems(rec) == []
    assert m9.qualifies(rec) == (rec["conditions"]["val_flat"]["met"] and rec["conditions"]["fits"]["met"])
    broken = json.loads(json.dumps(rec))
    broken["conditions"]["fits"]["met"] = not broken["conditions"]["fits"]["met"]
    assert any("fits" in p for p in m9.record_problems(broken))
    broken = json.loads(json.dumps(rec))
    broken["curves"]["val_loss"][1][1] = 0.1  # the curve changed, the stored condition did not
    assert any("val_flat" in p for p in m9.record_problems(broken))
    broken = json.loads(json.dumps(rec))
    broken["config"]["steps"] = 99
    assert any("config" in p for p in m9.record_problems(broken))
    broken = json.loads(json.dumps(rec))
    broken["snapshots"] = broken["snapshots"][:1]
    assert any("final step" in p for p in m9.record_problems(broken))
    del broken["conditions"]["val_flat"]
    with pytest.raises(ValueError, match="gating"):
        m9.qualifies(broken)


def test_resolution_and_two_set_rules():
    ahead, behind, zero = [0.01, 0.05], [-0.05, -0.01], [-0.02, 0.02]
    assert m9.resolved([ahead, ahead, zero], [True] * 3) == "a ahead"
    assert m9.resolved([ahead, zero, zero], [True] * 3) == "no resolved difference"
    assert m9.resolved([ahead, ahead, zero], [True, False, True]) == "no resolved difference"  # gated out
    assert m9.resolved([behind, behind, behind], [True] * 3) == "b ahead"
    assert m9.resolved([ahead, ahead, behind], [True] * 3) == "no resolved difference"  # signs disagree
    with pytest.raises(ValueError):
        m9.resolved([ahead], [True, True])
    v = m9.two_set_verdict
    assert v("held", "held") == "held"
    assert v("not held", "not held") == "not held" and v("not held", "mixed") == "not held"
    assert v("held", "not held") == "mixed" and v("held", "mixed") == "mixed"
    assert v("inconclusive", "held") == "inconclusive" and v("not held", "inconclusive") == "inconclusive"
    with pytest.raises(ValueError):
        v("held", "untested")


def test_paired_bootstrap():
    y = np.array([0, 1, 0, 1, 1, 0, 1, 0])
    p = np.linspace(0, 1, 8)
    assert m9.paired_bootstrap(y, p, p, n=50) == [0.0, 0.0]
    lo, hi = m9.paired_bootstrap(y, y * 0.9 + 0.05, 1 - p, n=200)
    assert hi > 0 and hi >= lo >= -1
    with pytest.raises(ValueError):
        m9.paired_bootstrap(y, p[:-1], p)


def test_reproduces_stored_compares_the_int8_weights(tmp_path):
    name = "wsd_s0_prop_tree_cycle"
    cfg = tc.recipe_config(name)
    model = tc.make_model("tree_cycle", 40, seed=0, width=cfg["width"])
    state = model.state_dict()
    checkpoints.save(m9.SLUG, name, {f"prop-tree_cycle-s0.{k}": v for k, v in state.items()}, config=cfg,
                     metrics={}, seed=[0], steps=1, dtype=torch.float16, quantize="int8", root=tmp_path,
                     module="helpers.tree_cycle_pe")
    jcfg = m9.job_config("C_prop_tree_cycle", 0)
    same = m9.reproduces_stored(state, 0, jcfg, tmp_path)
    assert same["identical"] is True and same["max_abs_diff"] == 0
    bumped = {k: v + 0.01 if v.is_floating_point() else v for k, v in state.items()}
    other = m9.reproduces_stored(bumped, 0, jcfg, tmp_path)
    assert other["identical"] is False and other["max_abs_diff"] > 0
    assert m9.reproduces_stored(state, 1, m9.job_config("C_prop_tree_cycle", 1), tmp_path)["identical"] is None


def test_tiny_end_to_end_parts_resume_and_the_strings_rule(tmp_path, capsys):
    out = tmp_path / "out"
    m9.main(["--tiny", "--out", str(out)])  # the default names: strings + round9_s0, every job
    rec = json.loads((out / m9.SLUG / "round9_s0.json").read_text())
    strings = json.loads((out / m9.SLUG / "strings.json").read_text())
    assert set(rec["jobs"]) == set(m9.JOBS) and rec["missing"] == []
    for job, r in rec["jobs"].items():
        assert m9.record_problems(r) == [], job
        assert "timing" not in r and job in rec["wall_seconds"]
    read = m9.read_round9(rec, strings)  # A and C trained on the stored models' strings (rule 5)
    assert read["missing"] == [] and set(read["qualifies"]) == set(m9.JOBS) - {"B_ecfp"}
    snaps = rec["jobs"]["C_prop_sinusoidal"]["snapshots"]
    assert [s["step"] for s in snaps] == [8, 12] and {"rel_dp", "cos", "uses_positions"} <= set(snaps[-1])
    assert "alignment" in rec["jobs"]["A_alert_ctree_cycle"]["snapshots"][-1]
    assert "rel_dp" not in rec["jobs"]["B_prop_gin"]["snapshots"][-1]
    assert len(rec["jobs"]["B_ecfp"]["models"]["rf"]["test_prob"]) == len(rec["jobs"]["B_prop_gin"]["test_prob"])
    bad = json.loads(json.dumps(strings))
    bad["seeds"]["0"]["prop_train"] = "0" * 64
    with pytest.raises(ValueError, match="strings"):
        m9.read_round9(rec, bad)
    # one part alone, merged partially; run again: reused, not retrained
    parts = tmp_path / "parts"
    args = ["--tiny", "--out", str(tmp_path / "p"), "--name", "round9_s0", "--part", "8", "--parts", str(parts),
            "--partial"]
    m9.main(args)
    part = json.loads((tmp_path / "p" / m9.SLUG / "round9_s0.json").read_text())
    assert list(part["jobs"]) == ["B_prop_gin"] and len(part["missing"]) == len(m9.JOBS) - 1
    assert part["jobs"]["B_prop_gin"] == rec["jobs"]["B_prop_gin"]  # the same job, the same record
    capsys.readouterr()
    m9.main(args)
    assert "reused" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="missing"):
        m9.main(args[:-1])
    with pytest.raises(SystemExit, match="part"):
        m9.main(["--tiny", "--out", str(tmp_path / "q"), "--name", "round9_s0", "--part", "11"])
