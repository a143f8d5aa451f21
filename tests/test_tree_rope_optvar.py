"""Chapter 04's OPT variants on the byte corpus (``data/04_tree_rope/make_opt_variants.py``, ``optvar``): registered in
session 28 before any of its training (#62)."""

import json
from pathlib import Path

import numpy as np
import pytest

from tests._loader import load_module

DATA = Path(__file__).resolve().parents[1] / "data" / "04_tree_rope"


def test_optvar_config_is_arms2_with_the_variants():
    mk = load_module(DATA / "make_opt_variants.py")
    from helpers import tree_rope as tr

    cfg, base = mk.config(), tr.checkpoint_config("arms2")
    assert {k: v for k, v in cfg.items() if k not in ("arms", "seeds", "diag", "alias_bar")} == \
        {k: v for k, v in base.items() if k not in ("arms", "seeds")}
    assert cfg["seeds"] == [0] and cfg["alias_bar"] == mk.ALIAS_BAR == 0.2 and list(cfg["arms"]) == list(mk.VARIANTS)
    for arm, spec in cfg["arms"].items():
        assert spec["enc"] == "tpe" and spec["ids"] == "opt", arm
        assert tr.make_model(spec, cfg).rotary.groups == tr.split_pairs(16, spec["L"])


def test_optvar_position_ids():
    mk = load_module(DATA / "make_opt_variants.py")
    cfg = mk.config()
    n, target, g = cfg["train_len"] + 1, cfg["target_len"], np.random.default_rng(0)
    i = np.arange(n)
    whole = mk.position_ids(cfg["arms"]["TPE + OPT, whole window"], g, 200, n, cfg)
    off = whole - i
    assert (off == off[:, :1]).all() and (off % 16 == 0).all() and whole.max() < target and off.max() > 0
    mix = mk.position_ids(cfg["arms"]["TPE + OPT, mix"], g, 400, n, cfg)
    plain = (mix == i).all(1)
    assert 0.35 < plain.mean() < 0.65 and (mix % 16 == i % 16).all()
    lev = mk.position_ids(cfg["arms"]["TPE + OPT, levels"], g, 400, n, cfg)
    assert (np.diff(lev, axis=1) > 0).all() and lev.max() < target and (lev % 16 == i % 16).all()
    at2 = (lev % 256 == i % 256).all(1) & ((lev - i) > 0).any(1)
    assert 0.3 < at2.mean() < 0.7  # about half the windows jump in multiples of 256 only
    b8 = mk.position_ids(cfg["arms"]["TPE + OPT, B=8 L=4, chunks of 2B"], g, 200, n, cfg)
    jumps = np.diff(b8, axis=1) > 1
    assert jumps.sum(1).max() <= 1 and (b8 % 8 == i % 8).all()  # two chunks: at most one jump
    with pytest.raises(ValueError):
        mk.level_opt_ids(g, 4, n, 16, target, 4, [0])


def test_optvar_batches_are_arms2s_windows():
    mk = load_module(DATA / "make_opt_variants.py")
    from helpers import tree_rope as tr

    cfg = mk.config()
    corpus = np.random.default_rng(1).integers(0, 256, 5000)
    spec = cfg["arms"]["TPE + OPT, whole window"]
    x, pos = mk.batch_fn(spec, corpus, cfg, 3)(7)
    x0, _ = tr.batch_fn(tr.checkpoint_config("arms2")["arms"]["TPE + OPT"], corpus, cfg, 3)(7)
    assert torch_equal(x, x0) and pos.shape == x.shape
    reg = tr.checkpoint_config("arms2")["arms"]["TPE + OPT"]  # no variant keys: exactly tr's batches
    xa, pa = mk.batch_fn(reg, corpus, cfg, 3)(7)
    xb, pb = tr.batch_fn(reg, corpus, cfg, 3)(7)
    assert torch_equal(xa, xb) and torch_equal(pa, pb)


def torch_equal(a, b):
    import torch

    return bool(torch.equal(a, b))


def test_optvar_reading_rule():
    mk = load_module(DATA / "make_opt_variants.py")
    cfg = mk.config()
    arms = list(cfg["arms"])

    def r(alias, plateau=0.01, ratio=0.9):
        return dict(alias=alias, plateau_stable=plateau, ngram_ratio=ratio)

    recs = {f"{arms[0]}/0": r(0.2), f"{arms[1]}/0": r(0.21), f"{arms[2]}/0": r(0.05, ratio=1.0),
            f"{arms[3]}/1": r(0.01)}
    got = mk.reading(recs, cfg)
    assert got[arms[0]] == dict(informative=True, conditions=True, qualifies=True)  # the bar is inclusive
    assert got[arms[1]]["informative"] is False and got[arms[1]]["qualifies"] is False
    assert got[arms[2]] == dict(informative=True, conditions=False, qualifies=False)  # beats_ngram asks < 1
    assert arms[3] not in got  # seed 0 not recorded: no reading


def test_make_opt_variants_tiny_alone(tmp_path):
    mk = load_module(DATA / "make_opt_variants.py")
    (path,) = mk.main(["--tiny", "--out", str(tmp_path)])
    rec = json.loads(path.read_text())
    assert rec["name"] == "optvar" and rec["tiny"] and rec["pending"] == [] and "weights" not in rec
    assert set(rec["records"]) == {f"{a}/0" for a in mk.VARIANTS} and set(rec["reading"]) == set(mk.VARIANTS)
    for r in rec["records"].values():
        assert len(r["attention_last"]) == 64 and {"alias", "keys", "window_use", "ngram_ratio"} <= set(r)


def _optvar_record(mk, seeds=(0, 1, 2), n_win=12, lengths=4):
    """A synthetic merged optvar record: mix and B=8 qualify at seed 0, levels misses the alias bar, whole window
    misses the plateau; the reading is make_opt_variants.reading's."""
    cfg = mk.config()
    g = np.random.default_rng(5)
    seed0 = {"TPE + OPT, whole window": (0.1, 0.09, 0.95), "TPE + OPT, mix": (0.12, 0.02, 0.96),
             "TPE + OPT, levels": (0.33, 0.01, 1.03), "TPE + OPT, B=8 L=4, chunks of 2B": (0.06, 0.01, 0.94)}
    recs = {}
    for arm, (alias, plat, ng) in seed0.items():
        for s in seeds:
            recs[f"{arm}/{s}"] = dict(alias=alias, plateau_stable=plat, ngram_ratio=ng, window_use=0.97,
                                      eval_tail=(1.5 + 0.1 * g.standard_normal((lengths, n_win))).tolist())
    return dict(name="optvar", config=cfg, records=recs, pending=[], reading=mk.reading(recs, cfg))


def _arms2_tails(seeds=(0, 1, 2), n_win=12, lengths=4):
    g = np.random.default_rng(6)
    return {(a, s): 1.6 + 0.1 * g.standard_normal((lengths, n_win))
            for a in ("RoPE", "RoPE + skips", "TPE", "TPE + OPT", "RoPE + PI") for s in seeds}


def test_optvar_claims_only_for_qualifying_variants():
    mk = load_module(DATA / "make_opt_variants.py")
    from helpers import tree_rope as tr

    rec, tails, lengths = _optvar_record(mk), _arms2_tails(), [32, 128, 512, 2048]
    assert tr.optvar_qualifying(rec) == ["TPE + OPT, mix", "TPE + OPT, B=8 L=4, chunks of 2B"]
    best = {0: "RoPE", 1: "RoPE + PI", 2: "RoPE"}
    out = tr.optvar_claim_inputs(rec, tails, lengths, 32, n_boot=200, rng=np.random.default_rng(1), best_scaled=best)
    assert set(out["claims"]) == {f"{c}_{k}" for c in tr.OPTVAR_CLAIMS for k in ("opt_mix", "opt_b8")}
    assert set(out["conditions"]) == {f"{c}_{k}" for c in ("plateau", "beats_ngram", "context")
                                      for k in ("opt_mix", "opt_b8")}
    assert out["conditions"]["plateau_opt_mix"] == dict(values=[0.02] * 3, op="<=", target=0.05)
    ex = out["claims"]["extrapolation_ppl_ratio_opt_mix"]
    assert (ex["a"], ex["b"], ex["length"], ex["end"], ex["op"], ex["target"]) == \
        ("RoPE", "TPE + OPT, mix", 2048, 1, ">=", 2.0)
    assert ex["given"] == ("plateau_rope", "beats_ngram_rope", "plateau_opt_mix", "beats_ngram_opt_mix",
                           "context_rope", "context_opt_mix")
    vt = np.asarray(rec["records"]["TPE + OPT, mix/1"]["eval_tail"])
    assert ex["ratios"][1, 0] == pytest.approx(np.exp(tails[("RoPE", 1)][3].mean() - vt[3].mean()))
    assert ex["measured"] == [float(r[1]) for r in ex["ratios"]] and (ex["ratios"][:, 1] <= ex["ratios"][:, 0]).all()
    par = out["claims"]["in_distribution_parity_opt_b8"]
    assert (par["a"], par["b"], par["length"], par["end"], par["op"], par["target"]) == \
        ("TPE + OPT, B=8 L=4, chunks of 2B", "RoPE", 32, 2, "<=", 1.05)
    assert par["given"] == ("plateau_opt_b8", "beats_ngram_opt_b8", "plateau_rope", "beats_ngram_rope")
    assert par["baseline"] == pytest.approx([np.exp(tails[("RoPE", s)][0].mean()) for s in (0, 1, 2)])
    sk = out["claims"]["beats_skip_control_opt_mix"]
    assert sk["given"][:2] == ("plateau_rope_skips", "beats_ngram_rope_skips") and sk["given"][4] == "context_rope_skips"
    sc = out["claims"]["beats_scaled_rope_opt_mix"]
    assert sc["ratios"][1, 0] == pytest.approx(
        np.exp(tails[("RoPE + PI", 1)][3].mean() - np.asarray(rec["records"]["TPE + OPT, mix/1"]["eval_tail"])[3].mean()))
    no_scaled = tr.optvar_claim_inputs(rec, tails, lengths, 32, n_boot=50)
    assert not any(k.startswith("beats_scaled_rope") for k in no_scaled["claims"])
    # the arms2 claims' registered op / target / end are what the variants' claims reuse
    assert {c: v[3:] for c, v in tr.OPTVAR_CLAIMS.items()} == {
        "extrapolation_ppl_ratio": (1, ">=", 2.0), "in_distribution_parity": (2, "<=", 1.05),
        "beats_skip_control": (1, ">", 1.0), "beats_scaled_rope": (1, ">", 1.0)}


def test_optvar_claims_refuse_broken_input():
    mk = load_module(DATA / "make_opt_variants.py")
    from helpers import tree_rope as tr

    tails, lengths = _arms2_tails(), [32, 128, 512, 2048]
    rec = _optvar_record(mk)
    rec["reading"]["TPE + OPT, levels"]["qualifies"] = True  # a hand-edited reading
    with pytest.raises(ValueError, match="seed-0 numbers"):
        tr.optvar_qualifying(rec)
    rec = _optvar_record(mk)
    del rec["records"]["TPE + OPT, mix/2"]  # a qualifying variant's seed still pending
    with pytest.raises(ValueError, match="mix/2"):
        tr.optvar_claim_inputs(rec, tails, lengths, 32, n_boot=10)
    rec = _optvar_record(mk, seeds=(0,))  # seed 0 only: non-qualifying variants need nothing more, others do
    with pytest.raises(ValueError, match="pending"):
        tr.optvar_claim_inputs(rec, tails, lengths, 32, n_boot=10)
    with pytest.raises(ValueError, match="differ in shape"):
        tr.optvar_claim_inputs(_optvar_record(mk, n_win=7), tails, lengths, 32, n_boot=10)
    with pytest.raises(ValueError, match="lack"):
        tr.optvar_claim_inputs(_optvar_record(mk), {k: v for k, v in tails.items() if k[1] != 2}, lengths, 32)
    with pytest.raises(ValueError, match="train_len"):
        tr.optvar_claim_inputs(_optvar_record(mk), tails, lengths, 64)
    with pytest.raises(ValueError, match="optvar"):
        tr.optvar_qualifying(dict(_optvar_record(mk), name="arms2"))
    with pytest.raises(ValueError, match="not a registered variant"):
        r = _optvar_record(mk)
        r["reading"]["TPE + OPT"] = dict(qualifies=False)
        tr.optvar_qualifying(r)


def test_optvar_no_variant_qualifies_gives_no_claim():
    mk = load_module(DATA / "make_opt_variants.py")
    from helpers import tree_rope as tr

    rec = _optvar_record(mk)
    for arm in rec["config"]["arms"]:
        for s in (0, 1, 2):
            rec["records"][f"{arm}/{s}"]["alias"] = 0.5
    rec["reading"] = mk.reading(rec["records"], rec["config"])
    out = tr.optvar_claim_inputs(rec, _arms2_tails(), [32, 128, 512, 2048], 32, n_boot=10)
    assert out["claims"] == {} and out["conditions"] == {} and out["tails"] == {}


def test_optvar_merge_reads_every_seed_given(tmp_path):
    """``--merge --seeds 0 1 2 --partial`` merges the parts of every seed given (it read seed 0 alone before
    session 29), pending the missing ones; no training (the parts are written here)."""
    mk = load_module(DATA / "make_opt_variants.py")
    from helpers import scripts

    cfg, parts = mk.config(), tmp_path / "parts"
    arms = list(cfg["arms"])
    for i, arm in enumerate(arms):
        for s in ((0, 1, 2) if i != 2 else (0,)):  # the third variant: seed 0 only
            path = parts / arm.replace(" ", "_").replace("+", "p").replace(",", "").replace("=", "")
            rec = dict(alias=0.05 + 0.3 * (i == 2), plateau_stable=0.01, ngram_ratio=0.9, seconds=1.0,
                       eval_tail=[[1.0 + s]])
            scripts.seed_part(path, s, scripts.part_key(cfg, arm=arm), lambda r=rec, a=arm, s=s: {
                "records": {f"{a}/{s}": r}})
    (path,) = mk.main(["--merge", "--seeds", "0", "1", "2", "--partial", "--parts", str(parts),
                       "--out", str(tmp_path)])
    rec = json.loads(path.read_text())
    assert rec["config"]["seeds"] == [0, 1, 2] and rec["pending"] == [f"{arms[2]}/1", f"{arms[2]}/2"]
    assert set(rec["records"]) == {f"{a}/{s}" for i, a in enumerate(arms) for s in ((0, 1, 2) if i != 2 else (0,))}
    assert rec["records"][f"{arms[0]}/2"]["eval_tail"] == [[3.0]] and "seconds" not in rec["records"][f"{arms[0]}/2"]
    assert [a for a, r in rec["reading"].items() if r["qualifies"]] == [arms[0], arms[1], arms[3]]
    (one,) = mk.main(["--merge", "--partial", "--parts", str(parts), "--out", str(tmp_path / "one")])
    assert set(json.loads(one.read_text())["records"]) == {f"{a}/0" for a in arms}  # no --seeds: the config's
