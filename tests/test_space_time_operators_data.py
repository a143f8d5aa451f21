"""data/16_space_time_operators/make_models.py: the work split into parts (river, geometry, geoleaks, matched,
geolong per seed)
and assembled writes exactly the tensors of one uninterrupted run, and re-assembling from the same parts changes no
stored tensor (so retraining one part leaves the others bit-identical)."""

import importlib.util
import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

REPO = Path(__file__).resolve().parents[1]


def _script():
    spec = importlib.util.spec_from_file_location(
        "make_models_16", REPO / "data" / "16_space_time_operators" / "make_models.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_parts_assemble_to_the_same_tensors(tmp_path):
    mm = _script()
    cfg = mm.tiny("models")
    assert mm.part_seeds(cfg, "geoleaks") == [0] and cfg["geometry"]["leaks"]
    whole = mm.make_models(cfg, tmp_path / "whole")
    parts = tmp_path / "parts"
    for part in mm.JOBS:
        mm.make_models(cfg, None, part, parts)
    a = mm.make_models(cfg, tmp_path / "a", "assemble", parts)
    b = mm.make_models(cfg, tmp_path / "b", "assemble", parts)
    ta, tb, tw = (load_file(p.with_suffix(".safetensors")) for p in (a, b, whole))
    assert any(".geo.leak_" in k for k in ta) and any(".router." in k for k in ta)
    assert ta.keys() == tb.keys() == tw.keys()
    for k in ta:
        assert ta[k].equal(tb[k]) and ta[k].equal(tw[k]), k
    # the data-matched controls are stored as measurements; the embed leak model is geolong's (its steps)
    man = json.loads(a.with_suffix(".json").read_text())
    assert {"s0.geo.dm_G1.test_err", "s0.geo.dm_oracle0.own_err"} <= man["metrics"].keys()
    assert "s0.geo.dm_G1.val" in man["history"] and not any(".dm_" in k for k in ta)
    assert man["metrics"]["s0.geo.leak_embed.steps"] == cfg["leak_steps"]["embed"]
    long = torch.load(parts / "geolong_s0.pt", weights_only=False)["result"][0]["s0.geo.leak_embed"]
    assert all(ta[f"s0.geo.leak_embed.{k}"].shape == v.shape for k, v in long.items())


def test_assemble_rejects_a_part_of_another_config(tmp_path):
    mm = _script()
    cfg = mm.tiny("models")
    parts = tmp_path / "parts"
    for part in ("river", "geometry", "geoleaks"):
        mm.make_models(cfg, None, part, parts)
    other = mm.tiny("models")
    other["geometry"]["steps"] += 1
    with pytest.raises(ValueError, match="another geometry config"):
        mm.make_models(other, tmp_path / "x", "assemble", parts)


def test_retrained_parts_assemble_to_one_run_and_record_the_registered_reading(tmp_path):
    mm = _script()
    cfg = mm.tiny("retrained")
    whole = mm.make_retrained(cfg, tmp_path / "whole")
    parts = tmp_path / "parts"
    for key, _ in mm.retrain_list(cfg, 0):  # one job per model, as on the build machine
        mm.make_retrained(cfg, None, "retrain", parts, only=[f"0:{key}"])
    a = mm.make_retrained(cfg, tmp_path / "a", "assemble", parts)
    ta, tw = (load_file(p.with_suffix(".safetensors")) for p in (a, whole))
    assert ta.keys() == tw.keys() and all(ta[k].equal(tw[k]) for k in ta)
    man = json.loads(a.with_suffix(".json").read_text())
    assert not any(".dm_" in k for k in ta) and any(".geo.leak_embed." in k for k in ta)
    for key, steps in mm.retrain_list(cfg, 0):
        curve = man["history"][f"s0.geo.{key}.val"]
        assert man["metrics"][f"s0.geo.{key}.steps"] == steps and curve["step"][-1] == steps
        assert man["metrics"][f"s0.geo.{key}.stable_plateau"] == pytest.approx(
            mm.st.stable_plateau(curve, steps))
    assert {"s0.geo.dm_G1.test_err", "s0.geo.dm_oracle0.own_err"} <= man["metrics"].keys()
    # a part trained under another recipe, or for other steps, is refused
    other = mm.tiny("retrained")
    other["recipe"]["lr"] = 1e-3
    with pytest.raises(ValueError, match="another recipe config"):
        mm.make_retrained(other, tmp_path / "x", "assemble", parts)
    other = mm.tiny("retrained")
    other["retrain"][0][0][1] += 2
    with pytest.raises(ValueError, match="steps"):
        mm.make_retrained(other, tmp_path / "y", "assemble", parts)


@pytest.mark.parametrize("name", ["rainfall", "noarea"])
def test_per_seed_parts_assemble_to_the_same_tensors(tmp_path, name):
    mm = _script()
    cfg = mm.tiny(name)
    make = dict(rainfall=mm.make_rainfall, noarea=mm.make_noarea)[name]
    whole = make(cfg, tmp_path / "whole")
    make(cfg, None, name, tmp_path / "parts")
    a = make(cfg, tmp_path / "a", "assemble", tmp_path / "parts")
    ta, tw = (load_file(p.with_suffix(".safetensors")) for p in (a, whole))
    assert ta.keys() == tw.keys() and all(ta[k].equal(tw[k]) for k in ta)
    kinds = {k.split(".")[1] for k in ta} | {k.split(".")[2] for k in ta}
    assert ({"router", "recurrent"} if name == "rainfall" else {"none", "area"}) <= kinds
    other = mm.tiny(name)
    other["seeds"] = [0]
    other["leaks" if name == "noarea" else "steps"] = ["none"] if name == "noarea" else 3
    with pytest.raises(ValueError, match="another config"):
        make(other, tmp_path / "x", "assemble", tmp_path / "parts")
