"""The registered retraining recipe of chapter 09 (issue #67, round 4): its configs, the resumable parts (which
reproduce one uninterrupted run bit for bit), the data script end to end, and the registered conditions, each of
which must fail on a broken or still-falling run and pass on a flat, fitted one."""

from __future__ import annotations

import copy
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from helpers import checkpoints as ck
from helpers import repro, train
from helpers import transolver_gmsfem as tg

SCRIPT = Path(__file__).resolve().parents[1] / "data" / "09_transolver_gmsfem" / "make_wsd.py"


def _script():
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import make_wsd
    finally:
        sys.path.remove(str(SCRIPT.parent))
    return make_wsd


# ---- the recipe ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", tg.WSD_NAMES)
def test_wsd_config_is_one_recipe_for_every_seed_and_parts_lie_in_the_stable_phase(name):
    cfg = tg.wsd_config(name)
    seed = int(name[-1])
    assert cfg["seeds"] == [seed] and cfg["schedule"] == "wsd"
    other = tg.wsd_config(name[:-1] + str((seed + 1) % 3))
    assert {k: v for k, v in cfg.items() if k != "seeds"} == {k: v for k, v in other.items() if k != "seeds"}
    plan = tg.wsd_parts(cfg)
    assert len(plan) == cfg["parts"] and plan[0][0] == 0 and plan[-1][1] == cfg["steps"]
    assert all(a < b for a, b in plan) and all(b == c for (_, b), (c, _) in zip(plan, plan[1:]))
    assert all(cfg["warmup"] <= a <= tg.wsd_stable_end(cfg) for a, _ in plan[1:])
    assert tg.wsd_stable_end(cfg) == cfg["steps"] - cfg["decay_steps"]
    assert tg.checkpoint_config(name) == cfg  # what tests/test_checkpoints.py compares a committed manifest with
    if name.startswith("basis"):
        assert cfg["fields"] == 300 and cfg["steps"] == 36_000
        base = tg.checkpoint_config("basis")
        assert all(cfg[k] == base[k] for k in ("dim", "layers", "heads", "slices", "batch", "lr", "n_bf"))
    else:
        assert cfg["steps"] * cfg["batch"] / cfg["pairs"] > 60  # 67 passes (the stored FNOs: 9.6)


def test_wsd_config_and_parts_reject_bad_input():
    with pytest.raises(ValueError, match="basis_wsd_s"):
        tg.wsd_config("basis_wsd")
    with pytest.raises(TypeError):
        tg.wsd_config(3)
    cfg = tg.wsd_config("basis_wsd_s0")
    with pytest.raises(ValueError, match="multiple"):
        tg.wsd_parts(dict(cfg, steps=cfg["steps"] + 1))
    with pytest.raises(ValueError, match="stable"):
        tg.wsd_parts(dict(cfg, decay_steps=cfg["steps"] // 2))  # the boundary at 2/3 falls in the decay
    with pytest.raises(ValueError, match="decay_steps"):
        tg.wsd_stable_end(dict(cfg, decay_steps=cfg["steps"]))


# ---- parts reproduce one run -----------------------------------------------------------------------------------
def _tiny_basis(parts):
    cfg = _script().tiny("basis_wsd_s0")
    cfg.update(parts=parts)
    mesh = tg.structured_mesh(cfg["n_fine"])
    fields = [tg.field_setup(tg.kappa_field(500 + i, n_pix=cfg["n_fine"]), mesh, cfg["n_coarse"]) for i in range(2)]
    data = tg.basis_dataset(fields, cfg["n_bf"], cfg["n_coarse"], cfg["rel_gap"])
    return cfg, data


def _run_parts(cfg, make, loss_fn, batches, evals):
    state = None
    for part in range(1, len(tg.wsd_parts(cfg)) + 1):
        with repro.seeded(0):
            model = make(cfg)
        if state is not None:
            model.load_state_dict(state["model"])
            state = copy.deepcopy(state)  # as if read back from disk
        state = tg.train_wsd_part(cfg, model, loss_fn, batches, part, state=state, eval_fn=evals, progress=False)
    return state


def test_parts_reproduce_one_uninterrupted_basis_run_bit_for_bit():
    cfg1, data = _tiny_basis(1)
    cfg2 = dict(cfg1, parts=2)
    batches = tg.basis_batches(cfg1, data, 0)
    loss = lambda m, b: tg.basis_loss(m, b, cfg1["energy_weight"])  # noqa: E731
    evals = lambda m: tg.basis_wsd_evals(m, data, data)  # noqa: E731
    one = _run_parts(cfg1, tg.make_basis_net, loss, batches, evals)
    two = _run_parts(cfg2, tg.make_basis_net, loss, batches, evals)
    assert one["loss"] == two["loss"] and one["lr"] == two["lr"] and one["evals"] == two["evals"]
    assert all(torch.equal(one["model"][k], two["model"][k]) for k in one["model"])
    want = [train.lr_at(i, cfg1["steps"], cfg1["lr"], cfg1["warmup"], "wsd", decay_steps=cfg1["decay_steps"])
            for i in range(cfg1["steps"])]
    assert two["lr"] == pytest.approx(want, rel=1e-12)
    assert [s for s, _ in two["evals"]["test_energy"]] == list(range(2, cfg1["steps"] + 1, 2))
    assert set(two["evals"]) == {"test_sal", "test_energy", "test_sal_cut", "train_energy"}


def test_basis_batches_are_train_basis_draws():
    cfg, data = _tiny_basis(1)
    cfg = dict(tg.checkpoint_config("basis"), **{k: cfg[k] for k in ("n_bf", "dim", "layers", "slices", "batch")},
               steps=3)
    model, hist = tg.train_basis(cfg, data, 0, progress=False)
    state = _run_parts(dict(cfg, steps=3, warmup=max(1, 3 // 10), decay_steps=1, parts=1, eval_every=3),
                       tg.make_basis_net,
                       lambda m, b: tg.basis_loss(m, b, cfg["energy_weight"]), tg.basis_batches(cfg, data, 0), None)
    # the recipe's last step decays where train_basis's cosine does too, so compare the first two steps' losses
    assert state["loss"][:2] == hist.loss[:2]


def test_parts_reproduce_one_uninterrupted_pure_run_bit_for_bit():
    cfg1 = dict(_script().tiny("pure_wsd_s0"), parts=1)
    X, Y = tg.grid_dataset(cfg1, cfg1["pairs"])
    batches = tg.pure_batches(cfg1, X, Y, 0)
    evals = lambda m: dict(test_rel_l2=float(tg.pure_rel_l2(m, X, Y).mean()))  # noqa: E731
    one = _run_parts(cfg1, tg.make_pure_net, tg.pure_loss, batches, evals)
    two = _run_parts(dict(cfg1, parts=2), tg.make_pure_net, tg.pure_loss, batches, evals)
    assert one["loss"] == two["loss"] and one["evals"] == two["evals"]
    assert all(torch.equal(one["model"][k], two["model"][k]) for k in one["model"])
    _, hist = tg.train_pure(dict(cfg1, steps=2), X, Y, 0, progress=False)
    assert hist.loss[0] == one["loss"][0]  # the same first batch, loss and initial weights as train_pure


def test_train_wsd_part_refuses_a_missing_or_wrong_state():
    cfg, data = _tiny_basis(2)
    loss = lambda m, b: tg.basis_loss(m, b)  # noqa: E731
    batches = tg.basis_batches(cfg, data, 0)
    with pytest.raises(ValueError, match="needs the state"):
        tg.train_wsd_part(cfg, tg.make_basis_net(cfg), loss, batches, 2, progress=False)
    st = tg.train_wsd_part(cfg, tg.make_basis_net(cfg), loss, batches, 1, progress=False)
    with pytest.raises(ValueError, match="from scratch"):
        tg.train_wsd_part(cfg, tg.make_basis_net(cfg), loss, batches, 1, state=st, progress=False)
    with pytest.raises(ValueError, match="ends at step"):
        tg.train_wsd_part(cfg, tg.make_basis_net(cfg), loss, batches, 2, state=dict(st, stop=1), progress=False)
    with pytest.raises(ValueError):
        tg.train_wsd_part(cfg, tg.make_basis_net(cfg), loss, batches, 3, state=st, progress=False)
    with pytest.raises(TypeError):
        tg.train_wsd_part(cfg, "net", loss, batches, 1, progress=False)


def test_script_parts_as_separate_jobs_write_the_one_job_checkpoint(tmp_path):
    m = _script()
    for part in (1, 2):
        made = m.main(["--tiny", "--name", "basis_wsd_s0", "--part", str(part), "--parts", str(tmp_path / "p"),
                       "--out", str(tmp_path / "a")])
        assert bool(made) == (part == 2)  # only the last part writes the checkpoint
    m.main(["--tiny", "--name", "basis_wsd_s0", "--out", str(tmp_path / "b")])
    a, b = (json.loads((tmp_path / d / tg.CHECKPOINT_SLUG / "basis_wsd_s0.json").read_text()) for d in "ab")
    assert a["weights"]["sha256"] == b["weights"]["sha256"]
    assert a["history"] == b["history"] and a["metrics"].keys() == b["metrics"].keys()
    assert {"train_energy_ratio_int8/0", "test_energy/0", "test_sal_cut/0", "stable_end"} <= set(a["metrics"])
    assert [p["part"] for p in a["extra"]["parts"]] == [1, 2]
    cond = tg.basis_wsd_conditions(a)
    assert set(cond) == {"basis_wsd_plateau", "basis_wsd_fits"}
    loaded = ck.load(tg.CHECKPOINT_SLUG, "basis_wsd_s0", config=m.tiny("basis_wsd_s0"), root=tmp_path / "a")
    assert loaded.manifest["steps"] == m.tiny("basis_wsd_s0")["steps"]
    with pytest.raises(SystemExit, match="part 1 first"):
        m.main(["--tiny", "--name", "pure_wsd_s0", "--part", "2", "--parts", str(tmp_path / "p"),
                "--out", str(tmp_path / "a")])
    with pytest.raises(SystemExit, match="--out"):
        m.main(["--name", "pure_wsd_s0", "--probe", "2"])  # refused before any data is made


# ---- the registered conditions ---------------------------------------------------------------------------------
STEPS, DECAY, EVERY = 36_000, 7_200, 450


def _curve(kind, seed=0):
    """A held-out loss curve of a 36 000-step WSD run, evaluated every 450 steps, with evaluation noise."""
    rng = np.random.default_rng(seed)
    st = np.arange(EVERY, STEPS + 1, EVERY)
    end = STEPS - DECAY
    if kind == "flat":  # fell early, flat over the stable phase's second half, then the decay's drop
        v = 0.1 + 0.9 * np.exp(-st / 3000.0)
    elif kind == "falling":  # still falling linearly at the end of the stable phase
        v = 1.0 - 0.8 * np.minimum(st, end) / end
    else:
        raise ValueError(kind)
    v = v - 0.08 * np.clip((st - end) / DECAY, 0, 1) + rng.normal(0, 0.003, len(st))
    return dict(step=st.tolist(), value=v.tolist())


def _basis_manifest(kind, ratio):
    cfg = dict(tg.wsd_config("basis_wsd_s0"))
    return dict(config=cfg, history={"test_energy/0": _curve(kind)}, metrics={"train_energy_ratio_int8/0": ratio})


@pytest.mark.parametrize("seed", range(3))
def test_plateau_condition_fails_on_a_still_falling_curve_and_passes_on_a_flat_one(seed):
    cfg = tg.wsd_config("basis_wsd_s0")
    flat, falling = _curve("flat", seed), _curve("falling", seed)
    assert tg.wsd_plateau(flat, cfg) <= tg.WSD_PLATEAU["bar"]
    assert tg.wsd_plateau(falling, cfg) > tg.WSD_PLATEAU["bar"]
    # the registered reading stops at the stable phase's end: the decay's drop alone would read as still improving
    assert train.plateau(flat, 0.2, noise=2) > tg.WSD_PLATEAU["bar"]


def test_basis_conditions_fail_on_a_broken_run_and_pass_on_a_fitted_flat_one():
    good = tg.basis_wsd_conditions(_basis_manifest("flat", 1.15))
    assert all(tg.condition_holds(*v) for v in good.values())
    assert good["basis_wsd_fits"][1:] == ("<=", tg.BASIS_FIT_BAR) == ("<=", 1.3)
    falling = tg.basis_wsd_conditions(_basis_manifest("falling", 1.15))
    assert not tg.condition_holds(*falling["basis_wsd_plateau"]) and tg.condition_holds(*falling["basis_wsd_fits"])
    underfit = tg.basis_wsd_conditions(_basis_manifest("flat", 3.1))  # the stored networks' ratio is ~3
    assert tg.condition_holds(*underfit["basis_wsd_plateau"]) and not tg.condition_holds(*underfit["basis_wsd_fits"])
    with pytest.raises(ValueError, match="test_energy/0"):
        tg.basis_wsd_conditions(dict(_basis_manifest("flat", 1.0), history={}))
    with pytest.raises(TypeError):
        tg.basis_wsd_conditions([])


def test_pure_conditions_read_the_registered_bar_change():
    cfg = tg.wsd_config("pure_wsd_s0")
    end, d = tg.wsd_stable_end(cfg), cfg["decay_steps"]
    st = np.arange(cfg["eval_every"], cfg["steps"] + 1, cfg["eval_every"])
    rng = np.random.default_rng(0)
    flat = 0.08 + 0.5 * np.exp(-st / 1500) - 0.01 * np.clip((st - end) / d, 0, 1) + rng.normal(0, 0.004, len(st))
    spiky = 0.6 - 0.5 * np.minimum(st, end) / end + rng.normal(0, 0.004, len(st))
    man = lambda v, tr: dict(config=cfg, history={"test_rel_l2": dict(step=st.tolist(), value=v.tolist())},  # noqa: E731
                             metrics={"train_rel_l2_int8": tr})
    good = tg.pure_wsd_conditions(man(flat, 0.07), net_in_l2=0.10)
    assert all(tg.condition_holds(*v) for v in good.values()) and good["pure_wsd_fits"][2] == 0.10
    bad = tg.pure_wsd_conditions(man(spiky, 0.39), net_in_l2=0.10)  # still falling; the stored FNOs fit 0.36-0.39
    assert not any(tg.condition_holds(*v) for v in bad.values())
    for wrong in (0.0, -1.0, math.nan):
        with pytest.raises(ValueError):
            tg.pure_wsd_conditions(man(flat, 0.07), net_in_l2=wrong)
    with pytest.raises(ValueError, match="op"):
        tg.condition_holds(1.0, "<", 2.0)


class _Oracle(nn.Module):
    """Answers the exact local eigenfunctions of the patches it was built for, whatever its input."""

    def __init__(self, phis, n_max):
        super().__init__()
        out = torch.zeros(len(phis), n_max, phis[0].shape[1], dtype=torch.float64)
        for i, p in enumerate(phis):
            out[i, :len(p)] = torch.from_numpy(p)
        self.out = out
        self.w = nn.Parameter(torch.zeros(1))

    def forward(self, feats, mask):
        return self.out[:, :feats.shape[1]].to(feats.dtype)


def test_training_field_energy_ratio_is_one_for_the_exact_basis_and_fails_the_bar_untrained():
    cfg = _script().tiny("basis_wsd_s0")
    mesh = tg.structured_mesh(cfg["n_fine"])
    fields = [tg.field_setup(tg.kappa_field(500, n_pix=cfg["n_fine"]), mesh, cfg["n_coarse"])]
    phis = [tg.local_spectral(b.A, b.s, cfg["n_bf"])[1] for b in fields[0]["nb"]]
    oracle = _Oracle(phis, max(len(p) for p in phis))
    got = tg.basis_energy_ratio(oracle, fields, cfg["n_bf"], cfg["n_coarse"])
    assert got["ratio"] == pytest.approx(1.0, abs=1e-4) and got["exact"] > 0
    with repro.seeded(0):
        untrained = tg.make_basis_net(cfg)
    assert tg.basis_energy_ratio(untrained, fields, cfg["n_bf"], cfg["n_coarse"])["ratio"] > tg.BASIS_FIT_BAR
    with pytest.raises(ValueError):
        tg.basis_energy_ratio(oracle, [], cfg["n_bf"], cfg["n_coarse"])
    with pytest.raises(ValueError):
        tg.basis_energy_ratio(oracle, fields, 0, cfg["n_coarse"])
