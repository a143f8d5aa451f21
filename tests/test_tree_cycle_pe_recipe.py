"""Tests for the registered retraining recipe of chapter 07 (helpers.tree_cycle_pe.recipe_*, make_wsd.py): each
registered condition fails on a broken or still-improving curve and passes on a flat one."""

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from _loader import load_module

from helpers import checkpoints, train
from helpers import tree_cycle_pe as tc

REPO = Path(__file__).resolve().parents[1]
STEPS, DECAY, EVERY = 10_000, 2000, 100
UNTIL = STEPS - DECAY


def _loss(falling: bool, seed: int = 0) -> np.ndarray:
    """A per-step training loss: a fast drop, then a stable phase (flat, or still falling linearly), then the
    decay phase's annealing drop."""
    t = np.arange(1, STEPS + 1)
    base = 0.3 + 0.4 * np.exp(-t / 500)
    if falling:
        base -= 0.15 * np.clip((t - 2000) / 6000, 0, None)
    base -= 0.08 * np.clip((t - UNTIL) / DECAY, 0, 1)  # the decay
    return base + np.random.default_rng(seed).normal(0, 0.05, STEPS)


def _evals(values: np.ndarray) -> list[tuple[int, float]]:
    return [(int(s), float(v)) for s, v in zip(range(EVERY, STEPS + 1, EVERY), values)]


def _val(shape: str, seed: int = 1) -> list[tuple[int, float]]:
    s = np.arange(EVERY, STEPS + 1, EVERY)
    v = 0.45 + 0.25 * np.exp(-s / 700)
    if shape == "falling":
        v = v - 0.15 * np.clip((s - 2000) / 6000, 0, None)
    elif shape == "rising":  # over-fitting: the minimum early, then up
        v = v + 0.08 * np.clip((s - 2500) / 5500, 0, None)
    v = v - 0.03 * np.clip((s - UNTIL) / DECAY, 0, 1)
    return _evals(v + np.random.default_rng(seed).normal(0, 0.02, len(s)))  # sparse and noisy


def _auc(end: float, seed: int = 2) -> list[tuple[int, float]]:
    s = np.arange(EVERY, STEPS + 1, EVERY)
    v = end - (end - 0.75) * np.exp(-s / 800)
    return _evals(np.clip(v + np.random.default_rng(seed).normal(0, 0.005, len(s)), 0, 1))


def _cond(loss="flat", val="flat", auc=0.97):
    return tc.recipe_conditions(_loss(loss == "falling"), _val(val), _auc(auc), until=UNTIL)


def test_recipe_conditions_pass_on_flat_converged_curves():
    c = _cond()
    assert set(c) == {"flat", "val_flat", "fits"}
    assert all(x["met"] for x in c.values()), c
    assert (c["flat"]["op"], c["flat"]["bar"], c["val_flat"]["bar"], c["fits"]["op"], c["fits"]["bar"]) == (
        "<=", 0.05, 0.02, ">=", 0.95)


def test_flat_fails_on_a_loss_still_falling_in_the_stable_phase():
    c = _cond(loss="falling")
    assert not c["flat"]["met"] and c["flat"]["value"] > 0.05


def test_flat_is_read_on_the_stable_phase_not_the_decay():
    loss = _loss(falling=False)
    assert tc.recipe_conditions(loss, _val("flat"), _auc(0.97), until=UNTIL)["flat"]["met"]
    assert train.plateau(loss, 0.2) > 0.05  # read over the whole run, the decay's drop alone fails it


def test_val_flat_fails_on_a_still_falling_validation_loss_and_passes_on_noise_or_overfitting():
    assert not _cond(val="falling")["val_flat"]["met"]
    assert _cond(val="rising")["val_flat"]["met"]  # over-fitting: more steps would not help
    for seed in range(10):  # noise between the two windows is not read as improvement (noise=2)
        c = tc.recipe_conditions(_loss(False), _val("flat", seed=seed + 10), _auc(0.97), until=UNTIL)
        assert c["val_flat"]["met"], (seed, c["val_flat"])


def test_fits_fails_on_an_underfit_or_broken_model():
    assert not _cond(auc=0.92)["fits"]["met"]
    stuck = np.full(STEPS, math.log(2)) + np.random.default_rng(0).normal(0, 0.01, STEPS)  # learns nothing
    c = tc.recipe_conditions(stuck, _val("flat"), _auc(0.5), until=UNTIL)
    assert not c["fits"]["met"]
    nan_auc = [(s, float("nan")) for s, _ in _auc(0.97)]  # one class only: reads 0.5
    assert tc.recipe_conditions(stuck, _val("flat"), nan_auc, until=UNTIL)["fits"]["value"] == 0.5


def test_a_diverged_curve_meets_nothing():
    loss = _loss(False)
    loss[5000] = float("inf")
    val = _val("flat")
    val[-1] = (val[-1][0], float("nan"))
    c = tc.recipe_conditions(loss, val, _auc(0.97), until=UNTIL)
    assert not c["flat"]["met"] and not c["val_flat"]["met"] and math.isnan(c["flat"]["value"])


def test_conditions_read_a_manifest_curve_as_the_run_history(tmp_path):
    hist = train.History(loss=_loss(False).tolist(), evals={"val_loss": _val("flat"), "fit_auc": _auc(0.97)})
    live = tc.recipe_conditions(hist.loss, hist.evals["val_loss"], hist.evals["fit_auc"], until=UNTIL)
    checkpoints.save("99_recipe", "m", {"w": torch.zeros(2)}, config={}, metrics={}, history={"a": hist},
                     root=tmp_path)
    h = checkpoints.load_manifest("99_recipe", "m", tmp_path)["history"]
    stored = tc.recipe_conditions(h["a/loss"], h["a/val_loss"], h["a/fit_auc"], until=UNTIL)
    assert {k: v["met"] for k, v in stored.items()} == {k: v["met"] for k, v in live.items()}
    assert stored["val_flat"]["value"] == pytest.approx(live["val_flat"]["value"])
    assert stored["flat"]["value"] == pytest.approx(live["flat"]["value"], abs=0.01)


def test_recipe_conditions_bad_input():
    with pytest.raises(TypeError):
        tc.recipe_conditions("loss", _val("flat"), _auc(0.97), until=UNTIL)
    with pytest.raises(ValueError):
        tc.recipe_conditions(_loss(False), [(1, 0.5, 3)], _auc(0.97), until=UNTIL)
    with pytest.raises(ValueError):
        tc.recipe_conditions(_loss(False), _val("flat"), _auc(0.97), until=1)
    with pytest.raises(ValueError):
        tc.strongest_baseline({})


def test_strongest_baseline_reads_the_validation_tail():
    assert tc.strongest_baseline({"sinusoidal": _auc(0.80), "sinusoidal_canon": _auc(0.85)}) == "sinusoidal_canon"
    assert tc.strongest_baseline({"b": [0.8, 0.8], "a": [0.8, 0.8]}) == "a"  # a tie goes to the first name


def test_recipe_config_names_and_regime():
    assert len(tc.RECIPE_NAMES) == 3 * len(tc.RECIPE_FAMILIES)
    for name in tc.RECIPE_NAMES:
        cfg = tc.checkpoint_config(name)
        seed = int(name[5:].split("_")[0])
        old = tc.checkpoint_config(f"models_s{seed}")
        assert cfg == tc.recipe_config(name) and cfg["seeds"] == [seed] and cfg["registered"] == "2026-12-06"
        assert all(cfg[k] == old[k] for k in ("dataset", "n_prop", "n_aug", "val_frac", "batch_size", "alert"))
    p = tc.recipe_config("wsd_s1_prop_tree_cycle")
    assert (p["steps"], p["warmup"], p["decay_steps"], p["lr"], tc.recipe_until(p)) == (10_000, 1000, 2000, 2e-3,
                                                                                        8000)
    assert p["kinds"] == ["tree_cycle"] and p["augment"]
    canon = tc.recipe_config("wsd_s0_prop_sinusoidal_canon")
    assert canon["kinds"] == ["sinusoidal"] and not canon["augment"]
    a = tc.recipe_config("wsd_s2_alert")
    assert (a["steps"], tc.recipe_until(a), a["kinds"]) == (1500, 1200, ["sinusoidal", "tree_cycle", "cycle"])
    assert tc.recipe_config("wsd_s0_ecfp", quick=True, seed=4)["seeds"] == [4]
    for bad in ("wsd_s0_prop_rope", "wsd_prop_cycle", "wsd_s0_"):
        with pytest.raises(ValueError):
            tc.checkpoint_config(bad)
    with pytest.raises(ValueError):
        tc.recipe_until(tc.recipe_config("wsd_s0_ecfp"))


def test_fit_model_wsd_schedule_and_canonical_strings():
    vocab = tc.vocab_for(["CC(=O)Oc1ccccc1C(=O)O", "C1CCC2CCCCC2C1", "CCO", "OCC(O)CO", "c1ccc2ccccc2c1"])
    smiles = ["CC(=O)Oc1ccccc1C(=O)O", "C1CCC2CCCCC2C1", "CCO", "OCC(O)CO", "c1ccc2ccccc2c1"]
    feats = tc.featurize_set(smiles, vocab, n_aug=2)
    y = torch.tensor([1.0, 1.0, 0.0, 0.0, 1.0])
    idx = np.arange(len(feats))
    _, h = tc.fit_model("cycle", feats, idx, y, vocab, steps=10, seed=0, batch_size=2, width=8, progress=False,
                        schedule="wsd", warmup=2, decay_steps=3)
    assert h.lr[2:7] == [h.lr[2]] * 5 and h.lr[-1] < h.lr[2]  # warm-up, stable, decay
    default = tc.fit_model("cycle", feats, idx, y, vocab, steps=10, seed=0, batch_size=2, width=8,
                           progress=False)[1]
    explicit = tc.fit_model("cycle", feats, idx, y, vocab, steps=10, seed=0, batch_size=2, width=8,
                            progress=False, schedule="cosine", warmup=1)[1]
    assert default.loss == explicit.loss  # the stored models' regime is unchanged by the new arguments
    canon_only = [[f[0]] for f in feats]  # augment=False reads the canonical string whatever else is stored
    a = tc.fit_model("sinusoidal", feats, idx, y, vocab, steps=4, seed=0, batch_size=2, width=8,
                     progress=False, augment=False)[1]
    b = tc.fit_model("sinusoidal", canon_only, idx, y, vocab, steps=4, seed=0, batch_size=2, width=8,
                     progress=False)[1]
    assert a.loss == b.loss


def test_ecfp_baseline():
    smiles = ["CC(=O)Oc1ccccc1C(=O)O", "C1CCC2CCCCC2C1", "CCO", "OCC(O)CO", "c1ccc2ccccc2c1", "CCN", "c1ccccc1O",
              "CCCC"]
    x = tc.ecfp4(smiles, n_bits=128)
    assert x.shape == (8, 128) and x.dtype == np.uint8 and set(np.unique(x)) <= {0, 1}
    y = np.array([1, 0, 0, 0, 1, 0, 1, 0], dtype=float)
    res = tc.ecfp_baseline(smiles, y, np.arange(6), np.array([6, 7]), seed=0, n_bits=128, rf_trees=5)
    assert set(res) == {"logreg", "rf"} and res["rf"]["test_prob"].shape == (2,)
    assert all(0.5 < r["train_auc"] <= 1 and 0 <= r["test_auc"] <= 1 for r in res.values())
    for bad in (dict(train_idx=np.arange(6), test_idx=np.array([5, 7])), dict(train_idx=np.array([2, 3]),
                                                                              test_idx=np.array([6])),
                dict(train_idx=np.arange(6), test_idx=np.array([9]))):
        with pytest.raises(ValueError):
            tc.ecfp_baseline(smiles, y, seed=0, n_bits=128, rf_trees=5, **bad)
    with pytest.raises(ValueError):
        tc.ecfp_baseline(smiles, y[:-1], np.arange(6), np.array([6, 7]), seed=0)
    with pytest.raises(TypeError):
        tc.ecfp4("CCO")


def _script():
    return load_module(REPO / "data" / "07_tree_cycle_pe" / "make_wsd.py", "_make_wsd")


def test_make_wsd_probe_never_writes_into_data_and_scales_the_schedule():
    mod = _script()
    with pytest.raises(SystemExit, match="outside data/"):
        mod.main(["--seed", "0", "--family", "prop_gin", "--probe-steps", "300"])
    p = mod.probe_config(tc.recipe_config("wsd_s0_prop_cycle"), 2500)
    assert (p["steps"], p["warmup"], p["decay_steps"], p["probe"]) == (2500, 250, 500, 2500)
    with pytest.raises(SystemExit):
        mod.main(["--seed", "1", "--name", "wsd_s0_ecfp"])


# -- the committed records the notebook reads (round 5) ------------------------------------------------------------
DATA07 = REPO / "data" / "07_tree_cycle_pe"
_OPS = {"<=": lambda v, b: v <= b, ">=": lambda v, b: v >= b}


def _record_problems(manifest: dict) -> list[str]:
    """What makes a stored recipe manifest unreadable by the notebook's verdict: a config other than
    ``recipe_config(name)``, a trained model without the three registered conditions, a bar or operator other
    than the registered one, or a ``met`` that disagrees with ``value <op> bar``."""
    name = manifest.get("name", "?")
    out = []
    if checkpoints.diff_config(tc.recipe_config(name), manifest.get("config", {})):
        out.append(f"{name}: config differs from recipe_config")
    if manifest["config"].get("family") == "ecfp":
        return out
    for tag, m in manifest.get("metrics", {}).items():
        conds = m.get("conditions", {})
        if set(conds) != set(tc.RECIPE_BARS):
            out.append(f"{name}/{tag}: conditions {sorted(conds)}")
            continue
        for c, x in conds.items():
            op = "<=" if c in ("flat", "val_flat") else ">="
            if x["op"] != op or x["bar"] != tc.RECIPE_BARS[c]:
                out.append(f"{name}/{tag}/{c}: rule {x['op']} {x['bar']}")
            elif x["met"] != bool(_OPS[op](x["value"], x["bar"])):
                out.append(f"{name}/{tag}/{c}: met {x['met']} disagrees with {x['value']}")
    return out


def _records() -> list[Path]:
    return sorted(DATA07.glob("wsd_s*_*.json"))


@pytest.mark.parametrize("path", _records(), ids=lambda p: p.stem)
def test_committed_recipe_records_are_read_as_registered(path):
    import json

    assert _record_problems(json.loads(path.read_text())) == []


def test_record_problems_catch_a_broken_record():
    import copy
    import json

    trained = [p for p in _records() if "ecfp" not in p.name]
    if not trained:
        pytest.skip("no trained recipe record committed")
    good = json.loads(trained[0].read_text())
    assert _record_problems(good) == []
    tag = next(iter(good["metrics"]))
    for broken in ("met", "bar", "missing", "config"):
        m = copy.deepcopy(good)
        conds = m["metrics"][tag]["conditions"]
        if broken == "met":
            conds["flat"]["met"] = not conds["flat"]["met"]
        elif broken == "bar":
            conds["fits"]["bar"] = 0.5
        elif broken == "missing":
            del conds["val_flat"]
        else:
            m["config"]["steps"] = 5000
        assert _record_problems(m), broken


def test_models_checkpoints_keep_only_the_synthetic_models():
    import json

    for k in range(3):
        m = json.loads((DATA07 / f"models_s{k}.json").read_text())
        assert all(c.startswith("synth-") for c in m["history"]), k
        assert all(t.startswith("synth-") for t in m["metrics"]), k
        assert "tensors_removed" in m["extra"]
