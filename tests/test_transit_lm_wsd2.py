"""Chapter 10's next recipe, ``models_wsd2`` (issue #68), registered before any of its models trained: its config,
the run cut into parts that give the one-process run (weights, losses, learning rates), the first-job rule on
synthetic curves (each condition able to fail), the data script's refusals, and the notebook's ``models_wsd2``
path end to end on a ``make_wsd2.py --tiny`` checkpoint through ``HELPERS_DATA``."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from _loader import load_module

from helpers import checkpoints, train
from helpers import transit_lm as T
from helpers import transit_lm_wsd as W

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "data" / "10_transit_lm" / "make_wsd2.py"


@pytest.fixture(scope="module")
def S():
    return load_module(SCRIPT)


@pytest.fixture(scope="module")
def tiny(S, tmp_path_factory):
    """A data root holding a tiny models_wsd2 and wsd2_first.json (make_wsd2.py --tiny --out) and probe_fit.json."""
    root = tmp_path_factory.mktemp("wsd2_root")
    S.main(["--tiny", "--out", str(root)])
    (root / "10_transit_lm" / "probe_fit.json").write_bytes((ROOT / "data" / "10_transit_lm" / "probe_fit.json")
                                                             .read_bytes())
    return root, json.loads((root / "10_transit_lm" / "models_wsd2.json").read_text())


def test_config_is_models_wsd_on_the_probes_data_with_a_longer_stable_phase():
    base, cfg = T.checkpoint_config("models_wsd"), W.checkpoint_config("models_wsd2")
    assert (cfg.pop("n_sft"), cfg.pop("n_pref")) == (8 * base.pop("n_sft"), 8 * base.pop("n_pref")) == (48000, 16000)
    assert (cfg.pop("sft_steps"), cfg.pop("part_steps"), cfg.pop("n_eval")) == (35000, 5000, 300)
    assert base.pop("sft_steps") == 16000 and "split_at" not in cfg and base.pop("split_at") == 8000
    assert cfg == base  # model, batch, rate, warm-up, the 5,000-step decay, cadence, seeds: models_wsd's
    full = W.checkpoint_config("models_wsd2")
    assert T.stable_end(full) == 30000 and W.part_bounds(full) == [(a, a + 5000) for a in range(0, 35000, 5000)]
    assert W.REGISTERED2 == "2026-12-07" and W.FIRST_JOB == ("sft", 0)
    for name in ("models", "models_wsd"):
        assert W.checkpoint_config(name) == T.checkpoint_config(name)
    with pytest.raises(ValueError):
        W.checkpoint_config("models_wsd3")


def test_part_bounds_and_configs_refuse_what_the_parts_cannot_run():
    cfg = W.checkpoint_config("models_wsd2")
    for bad in (dict(part_steps=3000), dict(part_steps=4000, sft_decay=5000), dict(part_steps=5000, eval_every=300),
                dict(sft_warmup=6000)):
        with pytest.raises(ValueError):
            W.part_bounds({**cfg, **bad})
    assert W.part_config(cfg, 1)["split_at"] == 5000
    mid = W.part_config(cfg, 3)
    assert (mid["split_at"], mid["sft_steps"], mid["sft_decay"]) == (10000, 15000, 1)
    assert (W.part_config(cfg, 7)["split_at"], W.part_config(cfg, 7)["sft_steps"]) == (30000, 35000)
    for bad in (0, 8):
        with pytest.raises(ValueError):
            W.part_config(cfg, bad)


def _tiny_data(S):
    cfg = S.tiny("models_wsd2")
    data = T.make_data(cfg)
    return cfg, T.corpora(data, cfg), len(data.tok)


@pytest.mark.parametrize("cpt", [False, True])
def test_parts_give_the_one_process_run(S, cpt):
    cfg, tensors, vocab = _tiny_data(S)
    n = len(W.part_bounds(cfg))
    assert n == 3  # a first, a middle and a last part

    def log(model, step):
        return {"step": step}

    one = T.train_wsd({**cfg, "split_at": cfg["part_steps"]}, tensors, vocab, 0, cpt, eval_fn=log)
    res = None
    for k in range(1, n + 1):
        res = W.train_part(cfg, tensors, vocab, 0, cpt, k, res, eval_fn=log)
        assert res["part"] == k
    assert all(torch.equal(one["state"][k], v) for k, v in res["state"].items())
    assert res["hist"]["sft"]["loss"] == one["hist"]["sft"]["loss"]
    assert res["hist"]["sft"]["evals"] == one["hist"]["sft"]["evals"]
    want = [train.lr_at(i, cfg["sft_steps"], cfg["lr"], cfg["sft_warmup"], "wsd", decay_steps=cfg["sft_decay"])
            for i in range(cfg["sft_steps"])]
    assert res["hist"]["sft"]["lr"] == pytest.approx(want, rel=1e-12)
    assert ("cpt" in res["hist"]) == cpt


def test_train_part_refuses_a_broken_chain(S):
    cfg, tensors, vocab = _tiny_data(S)
    one = W.train_part(cfg, tensors, vocab, 0, False, 1)
    with pytest.raises(ValueError, match="part 1"):
        W.train_part(cfg, tensors, vocab, 0, False, 1, one)
    with pytest.raises(ValueError, match="previous part"):
        W.train_part(cfg, tensors, vocab, 0, False, 2)
    with pytest.raises(ValueError, match="part 2's result"):
        W.train_part(cfg, tensors, vocab, 0, False, 3, one)


def _curve(values, every=250, end=35000):
    return {"step": list(range(every, end + 1, every)), "value": list(values)}


def test_first_job_rule_goes_only_when_all_three_hold():
    cfg = W.checkpoint_config("models_wsd2")
    s = np.arange(250, 35001, 250, dtype=float)
    flat, falling = _curve(1 + 2 * np.exp(-s / 500)), _curve(3 - s / 35000)
    rising = _curve(1 + 2 * np.exp(-s / 500) + s / 50000)  # over-fitting held-out loss: reads <= 0, meets it
    r = W.first_job_reading(0.85, flat, rising, cfg)
    assert r["go"] and not r["short_by"] and r["conditions"]["heldout_route_flat"][0] <= 0
    assert set(r["conditions"]) == {"fits_training_records", "route_flat", "heldout_route_flat"}
    r = W.first_job_reading(0.72, flat, flat, cfg)
    assert not r["go"] and r["short_by"] == {"fits_training_records": pytest.approx(0.08)}
    assert set(W.first_job_reading(0.9, falling, flat, cfg)["short_by"]) == {"route_flat"}
    assert set(W.first_job_reading(0.9, flat, falling, cfg)["short_by"]) == {"heldout_route_flat"}
    assert W.first_job_reading(0.8, flat, flat, cfg)["go"]  # the bar itself meets it
    with pytest.raises(ValueError):
        W.first_job_reading(1.2, flat, flat, cfg)


def test_stored_weights_are_what_the_checkpoint_gives_back(S, tmp_path):
    cfg, _, vocab = _tiny_data(S)
    cfg = dict(cfg, d_model=64)  # matrices large enough for int8 storage
    torch.manual_seed(0)
    state = T.make_model(cfg, vocab).state_dict()
    path = checkpoints.save("10_transit_lm", "models_wsd2", {f"sft/0.{k}": v for k, v in state.items()},
                            config=cfg, metrics={}, dtype=torch.float16, quantize="int8", root=tmp_path)
    assert json.loads(path.read_text())["weights"]["quantized"]["tensors"] > 0
    back = checkpoints.load("10_transit_lm", "models_wsd2", config=cfg, root=tmp_path)
    got = W.stored_weights(state)
    m1, m2 = T.make_model(cfg, vocab), T.make_model(cfg, vocab)
    m1.load_state_dict(got)
    back.load_into(m2, prefix="sft/0.")
    assert all(torch.equal(a, b) for a, b in zip(m1.state_dict().values(), m2.state_dict().values(), strict=True))


def test_tiny_script_writes_the_checkpoint_and_the_rules_record(tiny, S):
    root, m = tiny
    assert m["module"] == "helpers.transit_lm_wsd" and m["config"] == S.tiny("models_wsd2")
    assert m["extra"]["registered"] == W.REGISTERED2 and set(m["extra"]["first_job"]) == {"go", "conditions",
                                                                                         "short_by"}
    for arm in W.ARMS:
        c = W.curves(m, arm, 0)
        assert c["route_loss"]["step"] == list(range(2, 13, 2)) and c["train_exact"]["step"] == [4, 8, 12]
        assert f"{arm}/0/route_loss_heldout" in m["history"] and f"{arm}/0/sft" in m["history"]
    first = json.loads((root / "10_transit_lm" / "wsd2_first.json").read_text())
    assert first["job"] == list(W.FIRST_JOB) and not first["reading"]["go"]  # a tiny model fits nothing
    assert first["reading"] == m["extra"]["first_job"]


def test_script_refuses_jobs_out_of_order(S, tmp_path):
    p = str(tmp_path / "parts")
    with pytest.raises(SystemExit, match="first-job rule"):
        S.main(["--seeds", "1", "--arms", "sft", "--part", "1", "--parts", p])
    with pytest.raises(SystemExit, match="first-job rule"):
        S.main(["--seeds", "0", "--arms", "cpt", "--part", "1", "--parts", p])
    with pytest.raises(SystemExit, match="part 1"):
        S.main(["--seeds", "0", "--arms", "sft", "--part", "2", "--parts", p])
    with pytest.raises(SystemExit, match="not said go"):
        S.main(["--parts", p])
    (tmp_path / "parts").mkdir(exist_ok=True)
    (tmp_path / "parts" / "first_job.json").write_text(json.dumps({"reading": {"go": False}}))
    with pytest.raises(SystemExit, match="not said go"):
        S.main(["--parts", p])
    with pytest.raises(SystemExit, match="first-job rule"):
        S.main(["--seeds", "2", "--arms", "cpt", "--part", "1", "--parts", p])
    with pytest.raises(SystemExit, match="--parts"):
        S.main([])


def test_recipe_prefers_models_wsd2_and_a_broken_manifest_fails_clearly(tiny, tmp_path):
    root, m = tiny
    assert W.recipe(False, root) == "models_wsd2" and W.available(root, "models_wsd2")
    assert not W.available(root, "models_wsd")
    d = tmp_path / "10_transit_lm"
    d.mkdir()
    for ext in (".json", ".safetensors"):
        (d / f"models_wsd{ext}").write_text("")
    assert W.recipe(False, tmp_path) == "models_wsd"
    for ext in (".json", ".safetensors"):
        (d / f"models_wsd2{ext}").write_bytes((root / "10_transit_lm" / f"models_wsd2{ext}").read_bytes())
    assert W.recipe(False, tmp_path) == "models_wsd2"
    broken = copy.deepcopy(m)
    del broken["history"]["sft/0/train_exact"]
    with pytest.raises(ValueError, match="no curve 'sft/0/train_exact'"):
        W.curves(broken, "sft", 0)
    edited = copy.deepcopy(m)
    edited["metrics"]["route_flat/cpt/0"] += 0.01
    with pytest.raises(ValueError, match="not the one it read"):
        W.conditions(edited, "cpt", 0, 0.9, m["config"])


def test_notebook_reads_models_wsd2_end_to_end(tiny, tmp_path):
    """The notebook's models_wsd2 path (loading, curves, the conditions and gates registered for models_wsd) on
    the tiny checkpoint, through papermill as the book runs it, with HELPERS_DATA pointing at the tiny root."""
    from _loader import run_papermill

    root, m = tiny
    env = dict(HELPERS_DATA=str(root), HELPERS_RESULTS_DIR=str(tmp_path), HELPERS_THREADS="1")
    params = dict(quick=False, n_test=20, n_heldout=20, n_div=4, wsd_config=m["config"])
    run_papermill(ROOT / "notebooks" / "10_transit_lm.ipynb", tmp_path / "out.ipynb", params=params, env=env,
                  cwd=ROOT / "notebooks")
    r = json.loads((tmp_path / "10_transit_lm.json").read_text())
    assert r["params"]["recipe"] == "models_wsd2"
    cond = {c["id"]: c for c in r["conditions"]}
    assert set(cond) == {f"{a}_{k}" for a in W.ARMS for k in ("route_flat", "fits_training_records")}
    for arm in W.ARMS:
        assert cond[f"{arm}_route_flat"]["measured"] == pytest.approx([m["metrics"][f"route_flat/{arm}/0"]])
    claims = {c["id"]: c for c in r["claims"]}
    assert len(claims) == 10 and all(tuple(c["given"]) == T.wsd_gates(cid) for cid, c in claims.items())
    assert all(claims[cid]["verdict"] == "inconclusive" for cid in T.FIT_GATED)
    assert "This run read `models_wsd2`" in (tmp_path / "out.ipynb").read_text()


def test_lookup_in_chunks_is_the_nearest_record(S):
    """T.lookup computes its distance table 64 requests at a time (x8 records): the same nearest record."""
    cfg = S.tiny("models_wsd2")
    data = T.make_data(cfg, 70, 70)
    ods = [(o, d) for o, d, _ in data.test_id + data.test_heldout]
    assert len(ods) > 128
    xy = np.array([[*data.city.to_xy(o), *data.city.to_xy(d)] for o, d, _ in data.sft])
    want = [data.sft[int(((xy - [*data.city.to_xy(o), *data.city.to_xy(d)]) ** 2).sum(1).argmin())][-1]
            for o, d in ods]
    assert T.lookup(data.city, data.sft, ods) == want
