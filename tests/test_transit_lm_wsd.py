"""Chapter 10's reader of the registered recipe's checkpoint (``models_wsd``, issue #68): which checkpoint a run
reads, the logged curves and the registered conditions (a broken manifest fails clearly), and the notebook's
``models_wsd`` path end to end on a tiny checkpoint written by ``make_wsd.py --tiny``."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pytest
from _loader import load_module

from helpers import transit_lm as T
from helpers import transit_lm_wsd as W

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "data" / "10_transit_lm" / "make_wsd.py"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A data root holding a tiny models_wsd (make_wsd.py --tiny --out, seed 0, both arms) and probe_fit.json."""
    root = tmp_path_factory.mktemp("wsd_root")
    load_module(SCRIPT).main(["--tiny", "--out", str(root)])
    shutil.copy(ROOT / "data" / "10_transit_lm" / "probe_fit.json", root / "10_transit_lm")
    manifest = json.loads((root / "10_transit_lm" / "models_wsd.json").read_text())
    return root, manifest


def test_recipe_reads_models_wsd_only_when_its_files_are_there(tiny, tmp_path, monkeypatch):
    root, _ = tiny
    assert W.recipe(False, root) == "models_wsd" and W.recipe(True, root) == "live"
    (tmp_path / "10_transit_lm").mkdir()
    assert W.recipe(False, tmp_path) == "models"
    shutil.copy(root / "10_transit_lm" / "models_wsd.json", tmp_path / "10_transit_lm")
    assert not W.available(tmp_path)  # a manifest without its weights is not a checkpoint
    monkeypatch.setenv("HELPERS_DATA", str(root))
    assert W.recipe(False) == "models_wsd"
    monkeypatch.setenv("HELPERS_DATA", str(tmp_path))
    assert W.recipe(False) == "models"
    with pytest.raises(TypeError):
        W.recipe("no")
    with pytest.raises(ValueError):
        W.available(tmp_path / "missing")


def test_curves_and_conditions_read_the_registered_reading(tiny):
    _, m = tiny
    cfg = m["config"]
    for arm in W.ARMS:
        c = W.curves(m, arm, 0)
        assert c["route_loss"]["step"] == list(range(2, cfg["sft_steps"] + 1, cfg["eval_every"]))
        assert c["train_exact"]["step"] == [4, 8]
        got = W.conditions(m, arm, 0, 0.9, cfg)
        assert got == T.wsd_conditions(c["route_loss"], 0.9, cfg)
        assert got["route_flat"][0] == pytest.approx(m["metrics"][f"route_flat/{arm}/0"], rel=1e-12)
        assert got["fits_training_records"] == (0.9, ">=", T.FIT_BAR, True)
        assert not W.conditions(m, arm, 0, 0.5, cfg)["fits_training_records"][3]


def test_a_broken_manifest_fails_clearly(tiny):
    _, m = tiny
    cfg = m["config"]
    no_route = copy.deepcopy(m)
    del no_route["history"]["cpt/0/route_loss"]
    with pytest.raises(ValueError, match="no curve 'cpt/0/route_loss'"):
        W.curves(no_route, "cpt", 0)
    with pytest.raises(ValueError, match="route_loss"):
        W.conditions(no_route, "cpt", 0, 0.9, cfg)
    W.curves(no_route, "sft", 0)  # the other arm is whole
    no_exact = copy.deepcopy(m)
    del no_exact["history"]["sft/0/train_exact"]
    with pytest.raises(ValueError, match="train_exact"):
        W.curves(no_exact, "sft", 0)
    short = copy.deepcopy(m)
    short["history"]["cpt/0/route_loss"]["value"].pop()
    with pytest.raises(ValueError, match="values"):
        W.curves(short, "cpt", 0)
    unordered = copy.deepcopy(m)
    unordered["history"]["cpt/0/route_loss"]["step"].reverse()
    with pytest.raises(ValueError, match="increase"):
        W.curves(unordered, "cpt", 0)
    edited = copy.deepcopy(m)  # a stored reading its curve does not give: not the curve the script read
    edited["metrics"]["route_flat/cpt/0"] += 0.01
    with pytest.raises(ValueError, match="not the one it read"):
        W.conditions(edited, "cpt", 0, 0.9, cfg)
    with pytest.raises(ValueError, match="models_wsd"):
        W.curves(dict(m, name="models"), "cpt", 0)
    with pytest.raises(ValueError, match="history"):
        W.curves({k: v for k, v in m.items() if k != "history"}, "cpt", 0)
    with pytest.raises(ValueError):
        W.curves(m, "both", 0)
    with pytest.raises(ValueError, match="no curve 'cpt/1/route_loss'"):
        W.curves(m, "cpt", 1)  # a seed the checkpoint does not hold
    with pytest.raises(ValueError):
        W.conditions(m, "cpt", 0, 1.5, cfg)  # not a share
    with pytest.raises(TypeError):
        W.curves([m], "cpt", 0)


def test_notebook_reads_models_wsd_end_to_end(tiny, tmp_path):
    """The notebook's models_wsd path (loading, curves figure, registered conditions and gates) on the tiny
    checkpoint, through papermill as the book runs it, with HELPERS_DATA pointing at the tiny data root."""
    from _loader import run_papermill

    root, m = tiny
    env = dict(HELPERS_DATA=str(root), HELPERS_RESULTS_DIR=str(tmp_path), HELPERS_THREADS="1")
    params = dict(quick=False, n_test=20, n_heldout=20, n_div=4, wsd_config=m["config"])
    run_papermill(ROOT / "notebooks" / "10_transit_lm.ipynb", tmp_path / "out.ipynb", params=params, env=env,
                  cwd=ROOT / "notebooks")
    r = json.loads((tmp_path / "10_transit_lm.json").read_text())
    assert r["params"]["recipe"] == "models_wsd"
    cond = {c["id"]: c for c in r["conditions"]}
    assert set(cond) == {f"{a}_{k}" for a in W.ARMS for k in ("route_flat", "fits_training_records")}
    for arm in W.ARMS:
        assert cond[f"{arm}_route_flat"]["measured"] == pytest.approx([m["metrics"][f"route_flat/{arm}/0"]])
        assert cond[f"{arm}_route_flat"]["target"] == T.FLAT_BAR
        assert cond[f"{arm}_fits_training_records"]["target"] == T.FIT_BAR
    claims = {c["id"]: c for c in r["claims"]}
    assert len(claims) == 10
    for cid, c in claims.items():
        assert tuple(c["given"]) == T.wsd_gates(cid)
    # the tiny models reproduce none of their records: every fit-gated claim is inconclusive
    assert all(claims[cid]["verdict"] == "inconclusive" for cid in T.FIT_GATED)
    text = (tmp_path / "out.ipynb").read_text()
    assert "This run read `models_wsd`" in text and "registered recipe's models" in text
