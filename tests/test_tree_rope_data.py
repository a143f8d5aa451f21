"""Chapter 04's data scripts: the probe's registered recipe rule and the recall script's per-seed parts."""

import json
from pathlib import Path

import numpy as np
import pytest

from tests._loader import load_module

DATA = Path(__file__).resolve().parents[1] / "data" / "04_tree_rope"


def _stored_probe(name):
    """The probe script ``name``.py and its stored record ``name``.json (skips while it is not recorded)."""
    path = DATA / f"{name}.json"
    if not path.exists():
        pytest.skip(f"{name} not recorded")
    return load_module(DATA / f"{name}.py"), json.loads(path.read_text())


@pytest.fixture(scope="module")
def probe():
    return load_module(DATA / "probe_recall.py")


def _rec(task, change, acc, plateau, arm="RoPE"):
    return dict(arm=arm, task=task, change=change, final_val_acc=acc, plateau=plateau)


def test_rule_takes_the_first_entry_that_meets_both_bars(probe):
    order = probe.ORDER
    fail = [_rec(t, c, 0.5, 0.01) for t, c in order[:2]]
    assert probe.choose(fail)["met"] is None  # part C not probed yet: the rule cannot be read
    ok = fail + [_rec(*order[2], 0.99, 0.01), _rec(*order[3], 1.0, 0.0), _rec(*order[4], 1.0, 0.0)]
    got = probe.choose(ok)
    assert got["met"] is True and (got["task"], got["change"]) == order[2]
    flat_fail = fail + [_rec(*order[2], 0.99, 0.05), _rec(*order[3], 0.96, 0.0), _rec(*order[4], 1.0, 0.3)]
    got = probe.choose(flat_fail)  # accuracy or plateau short everywhere: the last entry, marked not met
    assert got["met"] is False and (got["task"], got["change"]) == order[-1]
    nope = [_rec(t, c, 1.0, 0.0, arm="NoPE") for t, c in order]  # NoPE never chooses
    assert probe.choose(fail + nope)["met"] is None


def test_stored_probe_records_follow_the_rule(probe):
    recs = [r for p in "BC" if (DATA / f"probe_recall_{p}.json").exists()
            for r in json.loads((DATA / f"probe_recall_{p}.json").read_text())["records"]]
    if not (DATA / "probe_recall_C.json").exists():
        pytest.skip("part C not recorded")
    stored = json.loads((DATA / "probe_recall_C.json").read_text())["chosen"]
    assert probe.choose(recs) == stored


def test_recall_config_is_the_chosen_recipe():
    """The recall checkpoint's task and recipe are what the probe's registered rule chose."""
    from helpers import tree_rope as tr

    path = DATA / "probe_recall_C.json"
    if not path.exists():
        pytest.skip("part C not recorded")
    chosen = json.loads(path.read_text())["chosen"]
    cfg = tr.checkpoint_config("recall")
    assert cfg["task"] == chosen["task"]
    assert {k: cfg[k] for k in chosen["change"]} == chosen["change"]


def test_recall2_tiny_build_writes_the_control(tmp_path):
    """make_recall.py --name recall2 (tiny): records only, with the dilution control and the attention records
    of every arm and seed."""
    from helpers import checkpoints
    from helpers import tree_rope as tr

    mod = load_module(DATA / "make_recall.py")
    assert not tr.flush_denormal_on()
    mod.main(["--tiny", "--name", "recall2", "--out", str(tmp_path)])
    assert not tr.flush_denormal_on()  # the script's subnormal flush ends with its build (no leak)
    ck = checkpoints.load("04_tree_rope", "recall2", root=tmp_path, config=mod.tiny_config("recall2"))
    names = set(ck.tensors)
    assert not any(".eval_" not in k for k in names)  # no weights
    for key in ("NoPE/0", "TPE + OPT/2"):
        assert {f"{key}.eval_correct_{c}" for c in ("shift48", "shift96", "prefix128", "32", "128")} <= names
        assert f"{key}.eval_att_answer_length128_l1" in names and f"{key}.eval_att_key_shift48_l1" in names
        assert set(ck.manifest["metrics"][key]["accuracy"]) == {"32", "128", "shift 48", "shift 96", "prefix 128"}


def test_round6_rule_reads_rope_only_in_the_registered_order():
    probe = load_module(DATA / "probe_recall2.py")

    def rec(acc, plateau):
        return dict(final_val_acc=acc, plateau=plateau)

    ok, stuck, moving = rec(1.0, 0.0), rec(0.68, 0.003), rec(0.97, 0.05)
    assert probe.round6({})["decided"] is False
    assert probe.round6({"s0x1.5": ok}) == dict(decided=True, clause=1, steps=9000)
    assert probe.round6({"s0x1.5": moving, "s1": ok})["decided"] is False  # s2 missing
    assert probe.round6({"s0x1.5": stuck, "s1": ok, "s2": ok})["steps"] == 6000
    assert probe.round6({"s0x1.5": stuck, "s1": ok, "s2": moving}) == dict(decided=True, clause=3, steps=None)
    # RoPE + OPT's record decides nothing
    assert probe.round6({"s0x1.5": stuck, "s1": ok, "s2": stuck, "opt0x1.5": ok})["steps"] is None


def test_stored_probe_recall2_follows_its_rule():
    probe, stored = _stored_probe("probe_recall2")
    assert probe.round6(stored["records"]) == stored["round6"]
    for name, r in stored["records"].items():
        assert (r["arm"], r["seed"], r["steps"]) == probe.RUNS[name]
        assert r["learned"] == probe.learned(r)


def test_round7_rule_reads_training_ids_against_contiguous_ids():
    probe = load_module(DATA / "probe_recall3.py")

    def rec(acc, ids_acc):
        return dict(final_val_acc=acc, final_train_ids_acc=ids_acc)

    mism, stall, ok = rec(0.3, 0.99), rec(0.3, 0.4), rec(0.99, 0.99)
    assert probe.reading(mism) == "mismatch" and probe.reading(stall) == "stall" and probe.reading(ok) == "learned"
    assert probe.round7({})["decided"] is False
    assert probe.round7({"tpe_opt_s1": stall})["decided"] is False  # one run missing
    assert probe.round7({"tpe_opt_s1": mism})["recipe"] == "M"  # any mismatch decides M
    assert probe.round7({"tpe_opt_s1": stall, "rope_opt_s2": mism})["recipe"] == "M"
    assert probe.round7({"tpe_opt_s1": stall, "rope_opt_s2": stall})["recipe"] == "S"
    assert probe.round7({"tpe_opt_s1": ok, "rope_opt_s2": stall})["recipe"] == "S"
    assert probe.round7({"tpe_opt_s1": rec(0.94, 0.95)})["recipe"] == "M"  # bars are inclusive at 0.95


def test_probe_recall3_runs_on_a_tiny_config(monkeypatch, tmp_path):
    probe = load_module(DATA / "probe_recall3.py")
    full = probe.tr.checkpoint_config

    def tiny(name):
        cfg = full(name)
        cfg.update(d_model=16, n_layer=1, batch_size=8, steps=6, warmup=2, val_every=3, val_windows=8)
        return cfg

    monkeypatch.setattr(probe.tr, "checkpoint_config", tiny)
    rec = probe.run("rope_opt_s2")
    assert rec["reading"] in ("stall", "mismatch", "learned")
    assert rec["reproduces_stored"] is False and rec["max_diff_stored"] is None  # 2 points, not the stored 120
    assert len(rec["train_ids_acc"]) == len(rec["val_acc"]) == 2
    assert 0.0 <= rec["final_train_ids_acc"] <= 1.0


def test_stored_probe_recall3_follows_its_rule():
    probe, stored = _stored_probe("probe_recall3")
    assert probe.round7(stored["records"]) == stored["round7"]
    for name, r in stored["records"].items():
        assert (r["arm"], r["seed"]) == probe.RUNS[name] and r["reading"] == probe.reading(r)
    from helpers import tree_rope as tr
    assert stored["round7"]["decided"] and stored["round7"]["recipe"] == tr.RECALL3_RECIPE


def test_make_recall3_tiny_chains_and_merge(tmp_path):
    mk = load_module(DATA / "make_recall3.py")
    parts, out = tmp_path / "parts", tmp_path / "out"
    assert mk.main(["--tiny", "--seed", "1", "--arms", "RoPE", "NoPE", "--parts", str(parts), "--out", str(out)]) is None
    with pytest.raises(SystemExit, match="not complete"):  # TPE's chain was not run
        mk.main(["--tiny", "--merge", "--seeds", "1", "--parts", str(parts), "--out", str(out)])
    part = json.loads(mk.main(["--tiny", "--merge", "--partial", "--seeds", "1", "--parts", str(parts), "--out",
                               str(out)]).read_text())["extra"]  # stored with the chains not run marked pending
    assert "TPE/1" in part["pending"] and part["chosen"]["TPE/1"]["attempt"] is None
    assert "RoPE/1" not in part["pending"] and "NoPE/1" not in part["pending"]
    mk.main(["--tiny", "--seed", "1", "--parts", str(parts), "--out", str(out)])  # the rest; RoPE's is reused
    path = mk.main(["--tiny", "--merge", "--seeds", "1", "--parts", str(parts), "--out", str(out)])
    man = json.loads(path.read_text())
    chosen = man["extra"]["chosen"]
    assert chosen["NoPE/1"]["record"] == "recall2" and len(chosen["NoPE/1"]["attempts"]) == 1  # never restarted
    cfg = mk.tiny_config()
    for arm in cfg["arms"]:
        if arm == "NoPE":
            continue
        c = chosen[f"{arm}/1"]
        from helpers import tree_rope as tr
        assert tr.restart_chain(c["attempts"], cfg)["read"] == c["attempt"]  # the rule, nothing else
        assert f"{c['key']}.eval_correct_32" in mk.checkpoints.load(
            mk.SLUG, "recall3", config=cfg, root=out).tensors
    # a later seed merged after seed 1's parts are gone: seed 1's attempts come from the stored checkpoint
    import shutil
    shutil.rmtree(parts)
    mk.main(["--tiny", "--seed", "2", "--parts", str(parts), "--out", str(out)])
    man2 = json.loads(mk.main(["--tiny", "--merge", "--seeds", "1", "2", "--parts", str(parts),
                               "--out", str(out)]).read_text())
    assert man2["extra"]["chosen"]["TPE/1"] == chosen["TPE/1"] and "TPE/2" in man2["extra"]["chosen"]
    assert {k: v for k, v in man2["metrics"].items() if k.split("/")[1] == "1"} == man["metrics"]


def test_make_recall3_reuses_recall2_runs_only_for_unchanged_arms():
    mk = load_module(DATA / "make_recall3.py")
    from helpers import tree_rope as tr
    cfg = tr.checkpoint_config("recall3")
    for seeds in ([0, 1, 2], [1]):  # chains run with every seed, a merge with the seeds it merges
        assert all(mk.reused(dict(cfg, seeds=seeds), a) for a in cfg["arms"])
    assert not mk.reused(dict(cfg, steps=9000), "RoPE")
    other = dict(cfg, arms=dict(cfg["arms"], RoPE=dict(cfg["arms"]["RoPE"], plain_frac=0.5)))
    assert not mk.reused(other, "RoPE") and mk.reused(other, "TPE")


def test_round8_rule_picks_a_candidate_that_lifts_both_worst_attempts():
    probe = load_module(DATA / "probe_recall4.py")

    def recs(h4, wd, base=0.08):
        acc = dict(H4=h4, WD=wd)
        return {r: dict(change=c, arm=a, acc_at_probe=acc[c][i % 2], baseline=base)
                for i, (r, (c, a)) in enumerate(probe.RUNS.items())}

    assert probe.round8({})["decided"] is False
    assert probe.round8({"h4_tpe": recs((1, 1), (1, 1))["h4_tpe"]})["decided"] is False  # runs missing
    got = probe.round8(recs((0.9, 0.5), (0.95, 0.3)))  # WD lifts one run by 0.22 only
    assert got["decided"] and got["change"] == "H4" and got["qualifies"] == dict(H4=True, WD=False)
    assert probe.round8(recs((0.6, 0.6), (0.9, 0.9)))["change"] == "WD"  # the higher mean
    assert probe.round8(recs((0.9, 0.9), (0.94, 0.94)))["change"] == "H4"  # within 0.05: the first
    assert probe.round8(recs((0.38, 0.38), (0.2, 0.9)))["change"] == "H4"  # lift 0.30 is enough (inclusive)
    none = probe.round8(recs((0.3, 0.9), (0.1, 0.1)))
    assert none["decided"] and none["change"] is None  # no candidate: recall4 is not trained
    assert probe.baseline("TPE") < 0.2 and probe.baseline("TPE + OPT") < 0.2  # round 7's attempts at chance


def test_probe_recall4_runs_on_a_tiny_config(monkeypatch):
    probe = load_module(DATA / "probe_recall4.py")
    full = probe.tr.recall4_config

    def tiny(change):
        cfg = full(change)
        cfg.update(d_model=8 * cfg["n_head"], n_layer=1, batch_size=8, steps=12, warmup=2, val_every=3,
                   val_windows=64)  # TPE: one rotary pair per level at least
        return cfg

    monkeypatch.setattr(probe.tr, "recall4_config", tiny)
    rec = probe.run("h4_tpe_opt", probe_steps=6)
    assert rec["probe_steps"] == 6 and [s for s, _ in rec["val_acc"]] == [3, 6] and rec["baseline"] is None
    assert 0.0 <= rec["carry"] <= 1.0 and 0.0 <= rec["later_key"] <= 1.0 and rec["n_carry"] >= 0


def test_recall4_config_changes_one_thing_and_reads_one_attempt():
    from helpers import tree_rope as tr
    r2 = tr.checkpoint_config("recall2")
    for change, diff in tr.RECALL4_CHANGES.items():
        cfg = tr.recall4_config(change)
        assert {k: cfg[k] for k in diff} == diff and all(r2[k] != v for k, v in diff.items())
        same = ("arms", "change", "probe_seed", "restarts", "in_window_arms", *diff)
        assert {k: v for k, v in cfg.items() if k not in same} == {k: v for k, v in r2.items() if k not in same}
        assert list(cfg["arms"]) == list(tr.RECALL4_ARMS) and "RoPE + skips" not in cfg["arms"]
        assert all(cfg["arms"][a] == r2["arms"][a] for a in cfg["arms"])
        assert cfg["in_window_arms"] == ["RoPE", "RoPE + OPT offsets", "TPE", "TPE + OPT"]
        assert cfg["restarts"]["max"] == 0 and tr.restart_chain([dict(final_val_acc=0.1, plateau=0.0)], cfg) == \
            dict(read=0, next=None)  # one attempt, the one read, whatever it scored
    assert tr.recall4_config(None)["n_head"] == r2["n_head"]
    assert tr.checkpoint_config("recall4")["change"] == tr.RECALL4_CHANGE
    with pytest.raises(ValueError):
        tr.recall4_config("H8")


def test_make_recall4_tiny_arms_and_merge(tmp_path):
    mk = load_module(DATA / "make_recall4.py")
    parts, out = tmp_path / "parts", tmp_path / "out"
    assert mk.main(["--tiny", "--seed", "1", "--arms", "RoPE", "--parts", str(parts), "--out", str(out)]) is None
    with pytest.raises(SystemExit, match="not trained"):
        mk.main(["--tiny", "--merge", "--seeds", "1", "--parts", str(parts), "--out", str(out)])
    part = json.loads(mk.main(["--tiny", "--merge", "--partial", "--seeds", "1", "--parts", str(parts), "--out",
                               str(out)]).read_text())["extra"]
    assert "TPE/1" in part["pending"] and "RoPE/1" in part["chosen"] and "RoPE + skips/1" not in part["pending"]
    mk.main(["--tiny", "--seed", "1", "--parts", str(parts), "--out", str(out)])  # the rest; RoPE's is reused
    man = json.loads(mk.main(["--tiny", "--merge", "--seeds", "1", "--parts", str(parts), "--out",
                              str(out)]).read_text())
    cfg = mk.tiny_config()
    assert man["extra"]["pending"] == [] and set(man["extra"]["chosen"]) == {f"{a}/1" for a in cfg["arms"]}
    for key, c in man["extra"]["chosen"].items():
        m = man["metrics"][key]
        assert c["attempt"] == 0 and m["attempt"] == 0 and not m["weights_stored"]  # one attempt, records only
        assert c["meets_bars"] == (m["final_val_acc"] >= 0.95 and m["plateau"] <= 0.02)
    assert man["extra"]["seconds_per_run"]["RoPE/1"] == part["seconds_per_run"]["RoPE/1"]  # reused, not retrained
    assert not [k for k in mk.checkpoints.load(mk.SLUG, "recall4", config=cfg, root=out).tensors if ".eval_" not in k]
    assert mk.main(["--tiny"]) is not None  # the book's tiny-script test: --tiny alone


def test_stored_probe_recall4_follows_its_rule():
    probe, stored = _stored_probe("probe_recall4")
    assert probe.round8(stored["records"]) == stored["round8"] and stored["round8"]["decided"]
    for name, r in stored["records"].items():
        assert (r["change"], r["arm"]) == probe.RUNS[name] and r["baseline"] == probe.baseline(r["arm"])
        assert r["probe_steps"] == probe.PROBE_STEPS and r["init_seed"] == 2001
    from helpers import tree_rope as tr
    assert stored["round8"]["change"] == tr.RECALL4_CHANGE


def test_round9_rule_reads_tpe_opt_against_its_same_ids_control():
    probe = load_module(DATA / "probe_carry.py")

    def recs(tpe_opt, ctrl=(1.0, 1.0), seeds=(0, 1, 2)):
        out = {}
        for s in seeds:
            for a in probe.ARMS:
                carry, else_ = (tpe_opt if a == "TPE + OPT" else ctrl)
                out[f"{a}/{s}"] = dict(carry=carry, no_carry=else_)
        return out

    assert probe.round9({})["decided"] is False
    assert probe.round9(recs((0.1, 1.0), seeds=(0,)))["decided"] is False  # seeds 1-2 still to run
    stop = probe.round9(recs((0.1, 1.0), ctrl=(1.0, 0.98), seeds=(0,)))  # RoPE not learned at seed 0
    assert stop["decided"] and stop["stopped"] and stop["branch"] is None
    got = probe.round9(recs((0.2, 0.995)))
    assert got["reading"]["TPE + OPT"] == "structural" and got["branch"] == "S"
    assert got["reading"]["TPE"] == "trainable" and got["reading"]["RoPE"] == "trainable"
    assert probe.round9(recs((0.9, 0.99)))["branch"] == "T"  # carry >= 0.90 and else >= 0.99: learned
    assert probe.round9(recs((0.5, 0.9)))["branch"] is None  # not learned anywhere: unclear
    r = recs((0.2, 1.0))
    r["RoPE + OPT offsets/1"] = dict(carry=0.95, no_carry=1.0)  # the control misses carries at a gap seed
    r["RoPE + OPT offsets/2"] = dict(carry=0.95, no_carry=1.0)
    assert probe.round9(r)["reading"]["TPE + OPT"] == "unclear"


def test_probe_carry_scoring_and_margins():
    probe = load_module(DATA / "probe_carry.py")
    ids = np.array([[2, 3, 4, 5], [6, 7, 24, 25]])  # the second row jumps 7 -> 24: left out
    correct = np.array([[True, False, True], [True, False, True]])
    got = probe.split_accuracy(correct, ids, B=4)  # carry: previous id at p mod 4 = 3
    assert got == dict(carry=0.0, no_carry=1.0, n_carry=1, n_no_carry=4)
    assert probe.no_carry_accuracy([1, 0, 1], [7, 15, 3]) == 1.0
    with pytest.raises(ValueError):
        probe.no_carry_accuracy([1, 0], [7])
    cfg = probe.config()
    m = probe.margins(cfg, n_opt=4, top=40)
    assert m["window 0..31"]["RoPE"] > 0.3 and 0 < m["window 0..31"]["TPE"] < m["window 0..31, no carry"]["TPE"]
    assert m["window 0..31"]["RoPE"] == m["window 0..31, no carry"]["RoPE"]  # RoPE has no carries


def test_probe_carry_tiny_alone(tmp_path):
    probe = load_module(DATA / "probe_carry.py")
    rec = json.loads(probe.main(["--tiny", "--out", str(tmp_path)]).read_text())
    assert rec["tiny"] and set(rec["records"]) >= {f"{a}/0" for a in probe.ARMS}
    assert all(0 <= r["carry"] <= 1 and r["n_carry"] > 0 for r in rec["records"].values())
    assert "own_ids_carry" in rec["records"]["TPE + OPT/0"] and "own_ids_carry" not in rec["records"]["TPE/0"]


def test_stored_probe_carry_follows_its_rule():
    probe, stored = _stored_probe("probe_carry")
    assert not stored["tiny"] and probe.round9(stored["records"]) == stored["round9"]
    assert all(r["steps"] == probe.STEPS for r in stored["records"].values())


def test_round10_rule_and_aux_loss(tmp_path):
    probe = load_module(DATA / "probe_recall5.py")
    base = {r: dict(baseline=0.08) for r in probe.RUNS}
    assert probe.round10({})["decided"] is False
    recs = {r: dict(b, acc_at_probe=a) for (r, b), a in zip(base.items(), (0.38, 0.9))}
    assert probe.round10(recs)["qualifies"] is True  # lift 0.30 is enough (inclusive), as round 8
    recs["aux_tpe"]["acc_at_probe"] = 0.37
    assert probe.round10(recs)["qualifies"] is False
    import torch

    from helpers import repro
    cfg = probe.config()
    cfg.update(d_model=16, n_layer=1)
    spec = cfg["arms"]["TPE + OPT"]
    with repro.seeded(0):
        model = probe.tr.make_model(spec, cfg)
    batch = probe.tr.retrieval_batch_fn(spec, cfg, 0)(0)
    with torch.no_grad():
        plain, aux0 = probe.tr.retrieval_loss(model, batch), probe.aux_loss(model, batch, weight=0.0)
        assert torch.allclose(plain, aux0) and probe.aux_loss(model, batch) > plain
    rec = json.loads(probe.main(["--tiny", "--out", str(tmp_path)]).read_text())
    assert rec["tiny"] and set(rec["records"]) == set(probe.RUNS) and not rec["round10"]["decided"]
    assert all(r["probe_steps"] == 6 and r["baseline"] is None for r in rec["records"].values())


def test_stored_probe_recall5_follows_its_rule():
    probe, stored = _stored_probe("probe_recall5")
    assert not stored["tiny"] and probe.round10(stored["records"]) == stored["round10"] and stored["round10"]["decided"]
    for name, r in stored["records"].items():
        assert r["arm"] == probe.RUNS[name] and r["baseline"] == probe.P4.baseline(r["arm"])
        assert r["probe_steps"] == probe.PROBE_STEPS and r["init_seed"] == 2001 and r["aux_weight"] == probe.AUX_WEIGHT


def test_recall5_config_is_recall2_plus_the_aux_loss():
    import torch

    from helpers import repro
    from helpers import tree_rope as tr
    probe = load_module(DATA / "probe_recall5.py")
    cfg, r4 = tr.checkpoint_config("recall5"), tr.recall4_config(None)
    assert cfg["aux_weight"] == probe.AUX_WEIGHT == 0.25 and cfg["change"] == "AUX"
    assert {k: v for k, v in cfg.items() if k not in ("change", "aux_weight")} == \
        {k: v for k, v in r4.items() if k != "change"}  # recall2's recipe, recall4's arms, one attempt
    assert cfg["restarts"]["max"] == 0 and cfg["seeds"] == tr.checkpoint_config("recall2")["seeds"]
    assert tr._retrieval_train_loss(r4) is tr.retrieval_loss  # every earlier config trains as before
    small = dict(cfg, d_model=16, n_layer=1)
    spec = small["arms"]["TPE"]
    with repro.seeded(0):
        model = tr.make_model(spec, small)
    batch = tr.retrieval_batch_fn(spec, small, 0)(0)
    with torch.no_grad():  # the training loss is the probe's AUX at its weight
        assert torch.equal(tr._retrieval_train_loss(cfg)(model, batch), probe.aux_loss(model, batch))


def test_make_recall5_tiny_arms_and_merge(tmp_path):
    mk = load_module(DATA / "make_recall5.py")
    parts, out = tmp_path / "parts", tmp_path / "out"
    assert mk.main(["--tiny", "--seed", "1", "--arms", "TPE", "--parts", str(parts), "--out", str(out)]) is None
    part = json.loads(mk.main(["--tiny", "--merge", "--partial", "--seeds", "1", "--parts", str(parts), "--out",
                               str(out)]).read_text())
    assert "RoPE/1" in part["extra"]["pending"] and "TPE/1" in part["extra"]["chosen"]
    mk.main(["--tiny", "--seed", "1", "--parts", str(parts), "--out", str(out)])  # the rest; TPE's is reused
    man = json.loads(mk.main(["--tiny", "--merge", "--seeds", "1", "--parts", str(parts), "--out",
                              str(out)]).read_text())
    cfg = mk.tiny_config()
    assert man["config"]["aux_weight"] == 0.25 and man["extra"]["pending"] == []
    assert set(man["extra"]["chosen"]) == {f"{a}/1" for a in cfg["arms"]}
    assert all(c["record"] == "recall5" and c["attempt"] == 0 for c in man["extra"]["chosen"].values())
    assert man["extra"]["seconds_per_run"]["TPE/1"] == part["extra"]["seconds_per_run"]["TPE/1"]  # reused
    assert not [k for k in mk.checkpoints.load(mk.SLUG, "recall5", config=cfg, root=out).tensors if ".eval_" not in k]
    assert mk.main(["--tiny"]) is not None  # the book's tiny-script test: --tiny alone


def test_recall6_config_is_recall5_with_the_schedule_its_rule_reads():
    from helpers import tree_rope as tr
    mk = load_module(DATA / "make_recall6.py")
    cfg, r5 = mk.config(), tr.checkpoint_config("recall5")
    assert {k: v for k, v in cfg.items() if k not in ("steps", "val_every", "base")} == \
        {k: v for k, v in r5.items() if k not in ("steps", "val_every")}  # aux loss, arms, one attempt, bars, seeds
    assert cfg["base"] == "recall5" and cfg["val_every"] * mk.N_EVALS == cfg["steps"] == mk.RECALL6_STEPS
    assert mk._TreeRope().checkpoint_config("recall6") == cfg and mk._TreeRope().checkpoint_config("recall5") == r5
    assert cfg == tr.checkpoint_config("recall6")  # moved into helpers unchanged at the merge
    sched = mk.schedule()  # the registered rule on the stored recall5 curves (recall6's extra) gives the steps
    assert sched["steps"] == mk.RECALL6_STEPS == max(a["steps"] for a in sched["arms"].values())
    assert set(sched["arms"]) == set(r5["in_window_arms"])
    for a in sched["arms"].values():  # the exponential over-reads every measured plateau at 6000 (conservative)
        assert a["exp_at_6000"] >= a["measured"] > a["power_at_6000"]
    assert sched["seed_seconds"] == sum(sched["cost"].values()) and set(sched["cost"]) == set(r5["arms"])


def test_recall6_schedule_rule_on_curves():
    mk = load_module(DATA / "make_recall6.py")
    step = list(range(50, 6001, 50))
    flat = dict(step=step, value=[2.0 * np.exp(-t / 300) + 1e-3 for t in step])
    slow = dict(step=step, value=[2.0 * np.exp(-t / 4000) for t in step])
    assert mk.predicted_plateau(flat, 6000) <= 0.02 and mk._steps_needed(flat, 0.02, "exp") == 6000
    assert mk.predicted_plateau(slow, 6000) > 0.02
    n = mk._steps_needed(slow, 0.02, "exp")
    assert n > 6000 and n % mk.GRID == 0 and mk.predicted_plateau(slow, n) <= 0.02 < mk.predicted_plateau(slow, n - mk.GRID)


def test_make_recall6_tiny_alone_records_only(tmp_path, capsys):
    mk = load_module(DATA / "make_recall6.py")
    assert mk.main(["--schedule"]) is None and json.loads(capsys.readouterr().out)["steps"] == mk.RECALL6_STEPS
    path = mk.main(["--tiny"])  # the book's tiny-script test: --tiny alone
    man = json.loads(path.read_text())
    cfg = mk.tiny_config()
    assert man["name"] == "recall6" and man["config"]["base"] == "recall5" and man["config"]["aux_weight"] == 0.25
    assert set(man["extra"]["chosen"]) == {f"{a}/1" for a in cfg["arms"]} and man["extra"]["pending"] == []
    assert all(c["record"] == "recall6" and c["attempt"] == 0 for c in man["extra"]["chosen"].values())
    assert not [k for k in mk.checkpoints.load(mk.SLUG, "recall6", config=cfg, root=path.parents[1]).tensors
                if ".eval_" not in k]  # records only


def test_recall6_base_summary_keeps_what_is_read_of_recall5():
    mk5, mk6 = load_module(DATA / "make_recall5.py"), load_module(DATA / "make_recall6.py")
    path = mk5.main(["--tiny"])
    summ = mk6.base_summary(root=path.parents[1])
    man = json.loads(path.read_text())
    assert summ["metrics"] == man["metrics"] and summ["extra"]["chosen"] == man["extra"]["chosen"]
    assert set(summ["history"]) == {f"{a}/1/val_loss" for a in man["config"]["in_window_arms"]}
    assert set(summ["files"]) == {"recall5.json", "recall5.safetensors"} and set(summ["windows"]) == set(man["metrics"])
    w = next(iter(summ["windows"].values()))
    assert set(w["correct_train"]) <= {"0", "1"} and len(w["correct_train"]) == man["config"]["eval"]["windows"]
    assert {f"{x}_{c}_l1" for x in ("key", "answer") for c in mk6.BASE_CONDS} <= set(w)


def test_recall6_bound_gates_drop_a_condition_only_where_the_bound_decides():
    from helpers import tree_rope as tr
    m6 = load_module(DATA / "make_recall6.py")
    assert m6.bound_gates is tr.bound_gates  # the notebook reads the registered rule itself
    full = ("plateau_ret_tpe_opt", "plateau_ret_rope")
    assert m6.bound_gates("retrieval_at_64x", [0.13, 0.2, 0.05], 0.3) == full[:1]
    assert m6.bound_gates("retrieval_at_64x", [0.13, 0.3, 0.05], 0.3) == full  # reaches the target at one seed
    assert m6.bound_gates("retrieval_at_64x", [0.9, 0.9, 0.9], 0.3) == full
    both = ("plateau_ret_tpe_opt", "plateau_ret_tpe", "plateau_ret_rope_opt")
    assert m6.bound_gates("needs_both_parts", [0.094, 0.1, -0.2], 0.1) == both[:2]
    assert m6.bound_gates("needs_both_parts", [0.094, 0.11, -0.2], 0.1) == both
    with pytest.raises(ValueError, match="claim must be"):
        m6.bound_gates("inference_cost", [0.1], 0.3)
    with pytest.raises(ValueError, match="bound must be"):
        m6.bound_gates("retrieval_at_64x", [], 0.3)
    with pytest.raises(ValueError, match="bound must be"):
        m6.bound_gates("retrieval_at_64x", [float("nan")], 0.3)


# --- arms2: the byte-corpus rebuild, registered in session 27 before any training (#62) ---


def test_arms2_config_is_the_registered_design():
    mk = load_module(DATA / "make_arms2.py")
    from helpers import tree_rope as tr

    cfg = mk.config()
    assert list(cfg["arms"]) == list(tr.CLAIM_ARMS) and cfg["seeds"] == [0, 1, 2] and cfg["one_seed_arms"] == []
    assert cfg["d_model"] == 64 and cfg["n_head"] == 2 and cfg["steps"] >= 3000
    assert cfg["schedule"] == "wsd" and cfg["decay_steps"] == cfg["steps"] // 5
    head_dim = cfg["d_model"] // cfg["n_head"]
    assert head_dim // 2 == 16 and tr.split_pairs(head_dim // 2, cfg["arms"]["TPE + OPT"]["L"]) == [6, 5, 5]
    model = tr.make_model(cfg["arms"]["TPE + OPT"], cfg)
    assert model.rotary.groups == [6, 5, 5]
    base = tr.checkpoint_config("arms")  # everything else as the arms the claims read now
    for k in ("train_len", "target_len", "n_chunks", "batch_size", "corpus", "eval", "vocab_size", "n_layer"):
        assert cfg[k] == base[k], k


def test_arms2_conditions():
    mk = load_module(DATA / "make_arms2.py")
    cfg = mk.config()
    stable_end = cfg["steps"] - cfg["decay_steps"]
    steps = list(range(100, cfg["steps"] + 1, 100))
    # flat on the stable phase, then the decay's annealing drop: reads flat (the decay is not read)
    flat = {"step": steps, "value": [2.0 if st <= stable_end else 1.5 for st in steps]}
    assert mk.plateau_of(flat, cfg) <= mk.PLATEAU_BAR
    # still falling through the stable phase: not flat
    falling = {"step": steps, "value": [3.0 - st / stable_end for st in steps]}
    assert mk.plateau_of(falling, cfg) > mk.PLATEAU_BAR
    a, b = np.full(64, 1.5), np.full(64, 1.7)
    assert mk.ngram_ratio(a, b) == pytest.approx(np.exp(-0.2)) and mk.ngram_ratio(a, b) < mk.NGRAM_BAR
    assert mk.ngram_ratio(b, a) > mk.NGRAM_BAR  # an arm the n-gram beats fails beats_ngram
    with pytest.raises(ValueError):
        mk.ngram_ratio(a, b[:10])
    with pytest.raises(ValueError):
        mk.ngram_ratio(np.full(3, np.nan), np.ones(3))


def test_make_arms2_tiny_alone_parts_and_merge(tmp_path):
    mk = load_module(DATA / "make_arms2.py")
    (path,) = mk.main(["--tiny", "--out", str(tmp_path / "d"), "--parts", str(tmp_path / "p")])
    man = json.loads(path.read_text())
    cfg = mk.tiny_config()
    assert man["name"] == "arms2" and man["extra"]["pending"] == [] and man["config"]["schedule"] == "wsd"
    assert set(man["metrics"]) == {f"{a}/0" for a in cfg["arms"]}
    assert all({"plateau_stable", "ngram_ratio_at_train_len"} <= set(m) for m in man["metrics"].values())
    ck = mk.checkpoints.load(mk.SLUG, "arms2", config=cfg, root=tmp_path / "d")
    assert any(k.endswith(".eval_tail") for k in ck.tensors) and any(".eval_" not in k for k in ck.tensors)
    # a second merge reuses every part (nothing retrained) and a missing part is refused unless --partial
    (again,) = mk.main(["--tiny", "--out", str(tmp_path / "d2"), "--parts", str(tmp_path / "p")])
    assert json.loads(again.read_text())["metrics"] == man["metrics"]
    with pytest.raises(SystemExit):
        mk.main(["--merge", "--seeds", "1", "--parts", str(tmp_path / "p"), "--out", str(tmp_path / "d3")])


def test_arms2_config_and_conditions_in_the_chapter_module():
    """The notebook (and Colab, without data/'s scripts) reads arms2's config and bars from helpers.tree_rope: they
    are make_arms2.py's, as registered."""
    mk = load_module(DATA / "make_arms2.py")
    from helpers import tree_rope as tr

    assert tr.checkpoint_config("arms2") == mk.config()
    c = tr.ARMS2_CONDITIONS
    assert c["plateau"] == ("<=", mk.PLATEAU_BAR) and c["beats_ngram"] == ("<", mk.NGRAM_BAR)
    assert c["ngram_order"] == mk.NGRAM_ORDER


# --- arms_records: the d = 32 arms' records, kept when their weights left data/ (session 28) ---


def test_make_arms_records_tiny_alone(tmp_path):
    mk = load_module(DATA / "make_arms_records.py")
    from helpers import tree_rope as tr

    (path,) = mk.main(["--tiny", "--out", str(tmp_path)])
    rec = json.loads(path.read_text())
    cfg = mk.make_arms.tiny_config("arms")
    want = {f"{a}/{s}" for a in cfg["arms"] for s in (cfg["seeds"][:1] if a in cfg["one_seed_arms"] else cfg["seeds"])}
    assert rec["name"] == "arms_records" and rec["tiny"] and set(rec["runs"]) == want
    assert "weights" not in rec and rec["config"] == json.loads(json.dumps(cfg))  # records only: no manifest
    n_len, n_win = len(cfg["eval"]["lengths"]), cfg["eval"]["windows"]
    for key, r in rec["runs"].items():
        assert np.asarray(r["eval_tail"]).shape == (n_len, n_win), key
        assert set(r["window_use"]["ppl"]) == {"4", "8", "16", str(cfg["train_len"])}
        assert r["window_use"]["gain"] == pytest.approx(
            tr.context_gain({int(k): v for k, v in r["window_use"]["ppl"].items()}, cfg["train_len"]), rel=1e-5)
        assert len(r["attention_last"]) == mk.MAX_DIST and len(r["far_mass"]) == cfg["n_layer"]
        assert {"final_val_loss", "plateau", "tail_loss"} <= set(r["metrics"])


def test_stored_arms_records_match_their_evaluation():
    path = DATA / "arms_records.json"
    if not path.exists():
        pytest.skip("arms_records not recorded")
    from helpers import tree_rope as tr

    rec = json.loads(path.read_text())
    cfg = tr.checkpoint_config("arms")
    assert rec["config"] == json.loads(json.dumps(cfg)) and not rec["tiny"]
    for key, r in rec["runs"].items():
        tail = np.asarray(r["eval_tail"])
        assert tail.shape == (len(cfg["eval"]["lengths"]), cfg["eval"]["windows"])
        stored = [r["metrics"]["tail_loss"][str(n)] for n in cfg["eval"]["lengths"]]
        assert np.allclose(tail.mean(1), stored, atol=2e-3), key  # float16 per window vs the float32 mean

