"""Chapter 10's data probe (``data/10_transit_lm/probe_data.py``, issue #68), registered before it trains: the
variant's config (models_wsd with n_sft and n_pref x 8), the disjointness of its training and test requests, the
four logged curves on a tiny config through both stages and the merge, the registered reading rule on synthetic
curves (each condition able to fail), and a merge that refuses missing or foreign parts."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from _loader import load_module

from helpers import transit_lm as T

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "data" / "10_transit_lm" / "probe_data.py"


@pytest.fixture(scope="module")
def P():
    return load_module(SCRIPT)


def test_config_is_models_wsd_with_eight_times_the_sft_and_preference_records(P):
    base, cfg = T.checkpoint_config("models_wsd"), P.config()
    assert (cfg.pop("n_sft"), cfg.pop("n_pref")) == (8 * base.pop("n_sft"), 8 * base.pop("n_pref")) == (48000, 16000)
    assert cfg.pop("n_eval") == 300 and cfg.pop("seeds") == [0]
    base.pop("seeds")
    assert cfg == base  # model, batch, steps, schedule, evaluation cadence unchanged
    tiny, tbase = P.config(tiny=True), P.M.tiny("models_wsd")
    assert (tiny["n_sft"], tiny["n_pref"]) == (8 * tbase["n_sft"], 8 * tbase["n_pref"])
    assert P.PROBE_DESIGN["date"] == "2026-12-07" and P.PROBE_DESIGN["arm"] == "sft"


def test_training_and_test_requests_are_disjoint(P):
    cfg = P.config(tiny=True)
    data = P.probe_data(cfg)
    assert len(data.test_id) and len(data.test_heldout)
    assert set(P.overlap(data, cfg).values()) == {0}
    base = T.make_data(P.M.tiny("models_wsd"))  # the same seeded streams: models_wsd's records come first
    assert data.sft[:len(base.sft)] == base.sft and data.pref[:len(base.pref)] == base.pref
    assert len(data.sft) > 4 * len(base.sft) and data.cpt == base.cpt
    leaked = dataclasses.replace(data, sft=data.sft + data.test_heldout[:1] + data.test_id[:2])
    got = P.overlap(leaked, cfg)
    assert got["test_id_in_training"] == 2 and got["test_heldout_in_training"] == 1
    assert got["training_in_heldout_pairs"] == 1


def _steps(end=16000, every=250):
    return list(range(every, end + 1, every))


def test_reading_rule_adopts_only_when_both_conditions_hold(P):
    cfg = P.config()
    s = np.array(_steps(), float)
    flat = {"step": _steps(), "value": list(1 + 2 * np.exp(-s / 500))}
    falling = {"step": _steps(), "value": list(3 - s / 8000)}
    rising = {"step": _steps(), "value": list(1 + ((s - 3000) / 8000) ** 2)}  # overfitting after step 3000
    f_flat, f_fall, f_rise = (T.route_flat(c, cfg) for c in (flat, falling, rising))
    assert f_flat <= T.FLAT_BAR < f_fall and f_rise <= 0
    assert P.reading(0.9, f_flat)["adopt"] and P.reading(0.8, f_rise)["adopt"]
    r = P.reading(0.7, f_flat)
    assert not r["adopt"] and set(r["short_by"]) == {"fits_records"}
    assert r["short_by"]["fits_records"] == pytest.approx(0.1)
    r = P.reading(0.95, f_fall)
    assert not r["adopt"] and r["short_by"]["heldout_route_flat"] == pytest.approx(f_fall - T.FLAT_BAR)
    assert set(P.reading(0.5, f_fall)["short_by"]) == {"fits_records", "heldout_route_flat"}
    with pytest.raises(ValueError):
        P.reading(1.5, f_flat)


def test_tiny_stages_log_the_four_curves_and_merge_refuses_missing_parts(P, tmp_path, capsys):
    parts, out = tmp_path / "p", tmp_path / "out"
    with pytest.raises(SystemExit, match="stage 1's part"):
        P.main(["--tiny", "--merge", "--parts", str(parts), "--out", str(out)])
    P.main(["--tiny", "--stage", "1", "--parts", str(parts)])
    with pytest.raises(SystemExit, match="stage 2's part"):
        P.main(["--tiny", "--merge", "--parts", str(parts), "--out", str(out)])
    P.main(["--tiny", "--stage", "2", "--parts", str(parts)])
    assert "reused" in capsys.readouterr().out  # stage 2 resumed stage 1's stored part
    rec = json.loads(P.main(["--tiny", "--merge", "--parts", str(parts), "--out", str(out)]).read_text())
    cfg = rec["config"]
    every = list(range(cfg["eval_every"], cfg["sft_steps"] + 1, cfg["eval_every"]))
    for k in P.LOSS_SETS:
        assert rec["curves"][k]["step"] == every
    for k in P.EXACT_SETS:
        assert rec["curves"][k]["step"] == [4, 8]
    assert rec["route_flat_heldout"] == T.route_flat(rec["curves"]["route_loss_heldout"], cfg)
    assert rec["reading"]["adopt"] == P.reading(rec["finals"]["train_exact"], rec["route_flat_heldout"])["adopt"]
    assert set(rec["overlap"].values()) == {0}
    assert set(rec["baselines"]) == {f"{b}_{s}" for b in ("lookup", "splice") for s in ("heldout", "id")}
    assert rec["counts"]["test_heldout"] == len(P.probe_data(cfg).test_heldout)
    assert rec["design"] == json.loads(json.dumps(P.PROBE_DESIGN))
    stage2 = parts / "sft" / "stage2" / "seed0.pt"
    torch.save({"key": "another config"}, stage2)
    with pytest.raises(SystemExit, match="another config"):
        P.main(["--tiny", "--merge", "--parts", str(parts), "--out", str(out)])
    with pytest.raises(SystemExit, match="--parts"):
        P.main(["--stage", "1"])


def test_tiny_alone_runs_into_a_temporary_folder(P):
    assert P.main(["--tiny"]) is None
