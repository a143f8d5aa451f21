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
