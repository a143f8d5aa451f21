"""Tests of chapter 13's mod-add data script (data/13_algorithmic_cores/make_modadd.py) and the per-checkpoint
class-mean reading it records (round 9 of issue #71)."""

from pathlib import Path

import numpy as np
import pytest
import torch
from _loader import load_module

from helpers import algorithmic_cores as ac
from helpers import repro

SCRIPT = Path(__file__).resolve().parents[1] / "data" / "13_algorithmic_cores" / "make_modadd.py"


@pytest.fixture(scope="module")
def mk():
    return load_module(SCRIPT, "_make_modadd_13")


def test_same_config_none_only_for_keys_whose_default_is_none(mk):
    cfg = ac.checkpoint_config("modadd_eps")
    assert mk.same_config(cfg, dict(cfg))
    # late_decay's default is None: set to None or absent is the same run
    assert mk.same_config({k: v for k, v in cfg.items() if k != "late_decay"}, cfg)
    # eps, decay and named_analysis have defaults that are not None: None is another config (the old rule
    # dropped every None and called these the same)
    for key in ("eps", "decay", "named_analysis"):
        absent = {k: v for k, v in cfg.items() if k != key}
        assert not mk.same_config(absent, {**absent, key: None}), key
    assert not mk.same_config(cfg, {**cfg, "eps": 1e-8})


def test_modadd_class_means_rows_are_answer_means():
    p = 7
    tr, te = (torch.tensor(a) for a in ac.modadd_split(p, 0.5, seed=0))
    with repro.seeded(0):
        model = ac.modadd_model(p, 16, 2)
    means = ac.modadd_class_means(model, te, p)
    assert means.shape == (p, 16) and means.dtype == np.float32
    ref, _ = ac.modadd_class_states(model, te, p, 2, samples=8)
    np.testing.assert_allclose(means, ref, rtol=1e-6, atol=1e-6)
    with pytest.raises(ValueError, match="every class"):
        ac.modadd_class_means(model, te[te[:, 2] != 0], p)
    with pytest.raises(ValueError, match="3 columns"):
        ac.modadd_class_means(model, te[:, :2], p)
    with pytest.raises(TypeError):
        ac.modadd_class_means("model", te, p)


def test_tiny_run_records_d_eff_at_every_checkpoint(mk):
    cfg = {**mk.tiny("modadd_eps"), "named_analysis": False}
    assert cfg["d_eff_trajectory"] is True
    r = mk.run_seed((cfg, 0))
    rows = r["trajectory"]
    assert rows and all("d_eff" in t and "n_share" in t for t in rows)
    assert all(1 <= t["d_eff"] <= cfg["p"] - 1 and 1 <= t["n_share"] <= cfg["p"] - 1 for t in rows)
