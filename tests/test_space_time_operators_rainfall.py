"""Round 5: the rainfall-runoff benchmark (hillslope stage, data, the model-free baselines); the data script's
parts-assemble test is in test_space_time_operators_data.py."""

import numpy as np
import pytest
import torch

from helpers import space_time_operators as st


def _rain(B=3, N=5, T=40, seed=0):
    return st.lateral_inflow(N, T, B, np.random.default_rng(seed), base=0.0)


def test_runoff_no_rain_is_base_flow_and_capacity_swallows_storms():
    r = _rain()
    dry = st.rainfall_runoff(np.zeros_like(r), np.full(5, 3.0), **st.RUNOFF)
    assert np.allclose(dry[..., 0], st.RUNOFF["base"], atol=1e-3)  # + the first hour of drainage
    quick = dict(st.RUNOFF, drain=0.0)  # no drainage: what comes out is saturation excess
    small = st.rainfall_runoff(r, np.full(5, 0.5), **quick)
    big = st.rainfall_runoff(r, np.full(5, 50.0), **quick)
    # a deep soil swallows the storms; a thin one passes most of them
    assert (big - st.RUNOFF["base"]).sum() < 0.2 * (small - st.RUNOFF["base"]).sum()
    # never more water out than rain in plus base flow plus what the soil held at the start
    out = (small - st.RUNOFF["base"]).sum((1, 2))
    assert np.all(out <= r.sum((1, 2)) + st.RUNOFF["s0"] * 0.5 * 5 + 1e-9)


def test_runoff_is_nonlinear_in_rain():
    r = _rain()
    a = st.rainfall_runoff(r, np.full(5, 2.0), **st.RUNOFF) - st.RUNOFF["base"]
    b = st.rainfall_runoff(2 * r, np.full(5, 2.0), **st.RUNOFF) - st.RUNOFF["base"]
    assert b.sum() > 2.5 * a.sum()  # doubling the rain more than doubles the quick flow


def test_runoff_rejects_bad_input():
    with pytest.raises(ValueError, match="smax"):
        st.rainfall_runoff(_rain(), np.full(4, 1.0))
    with pytest.raises(ValueError):
        st.rainfall_runoff(-_rain() - 1, np.full(5, 1.0))
    with pytest.raises(ValueError):
        st.rainfall_runoff(_rain(), np.zeros(5))


def test_rainfall_data_capacity_follows_K_and_is_hidden():
    d = st.rainfall_data(0, n=12, T=16, n_events=4, n_test=2)
    assert set(d) == {"train0", "train1", "train2", "train3", "zero-shot", "5x"}
    tr = d["train0"]
    assert tr["q"].shape == (6, 12, 16) and tr["O"].shape == tr["q"].shape and tr["q"].min() >= 0
    z = np.log(tr["smax"] / (3.0 * (tr["K"] / 2.5) ** 2)) / 0.5  # the hidden part is a standard normal draw
    assert np.abs(z).max() < 5 and z.std() > 0.3
    x, static, _ = st.river_inputs(tr["parents"], tr["K"], tr["q"])  # the model's inputs: no capacity
    assert static.shape == (12, 2) and x.shape[-1] == 2
    assert d["zero-shot"]["parents"].size == 24 and d["5x"]["parents"].size == 60


def test_linear_reservoir():
    r = np.zeros((2, 200))
    r[:, 3] = 1.0
    assert np.allclose(st.linear_reservoir(r, 0), r)
    y = st.linear_reservoir(r, 5.0)
    assert abs(y.sum(-1)[0] - 1) < 1e-9 and y[0, 3] == pytest.approx(1 / 6)
    assert np.isclose((np.arange(200) * y[0]).sum() - 3, 5.0)  # mean delay k
    with pytest.raises(ValueError):
        st.linear_reservoir(r, -1)


def _linear_world(b=0.05, c=0.5, k=3.0):
    rng = np.random.default_rng(1)
    out = {}
    for i in range(2):
        p = st.random_river_tree(15, rng, 0.3)
        K = rng.uniform(1, 4, 15)
        r = st.lateral_inflow(15, 32, 6, rng, base=0.0)
        flow = st.route_sequential(p, K, b + c * st.linear_reservoir(r, k))
        out[f"train{i}"] = dict(parents=p, K=K, q=r, O=flow, train=True, n_test=2)
    return out


def test_runoff_routing_fit_recovers_a_linear_world():
    data = _linear_world()
    p = st.runoff_routing_fit(data, 4, k_grid=(0, 3, 10), route_grid=((0.3, 1.0),))
    assert p["k"] == 3 and p["q_ref"] == 0 and p["score"] > 0.999
    assert p["b"] == pytest.approx(0.05, abs=1e-6) and p["c"] == pytest.approx(0.5, abs=1e-6)
    d = data["train0"]
    pred = st.runoff_routing_predict(p, d, d["q"][4:])
    assert st.r2_score(pred[:, 0], d["O"][4:, 0]) > 0.999
    with pytest.raises(ValueError, match="training basin"):
        st.runoff_routing_fit({k: dict(v, train=False) for k, v in data.items()}, 4)
    with pytest.raises(ValueError, match="missing"):
        st.runoff_routing_predict({"b": 0.0}, d, d["q"])


def test_unit_hydrograph_fits_a_linear_outlet_and_not_a_threshold():
    data = _linear_world()
    w = st.unit_hydrograph_fit(data, 4)
    d = data["train1"]
    # one linear reservoir and a network: the outlet is close to linear in the basin-mean rain
    assert st.r2_score(st.unit_hydrograph_predict(w, d, d["q"][4:]), d["O"][4:, 0]) > 0.5
    rain = st.rainfall_data(0, n=12, T=32, n_events=6, n_test=2)
    w = st.unit_hydrograph_fit(rain, 6)
    assert w.shape == (33,)
    with pytest.raises(ValueError):
        st.unit_hydrograph_fit(rain, 0)


def test_river_inputs_without_area():
    rng = np.random.default_rng(3)
    p = st.random_river_tree(20, rng, 0.3)
    K, q = rng.uniform(1, 4, 20), st.lateral_inflow(20, 8, 2, rng)
    x, static, _ = st.river_inputs(p, K, q, area_input=False)
    assert torch.equal(x[..., 0], x[..., 1]) and not static[:, 1].any()
    x_on, static_on, _ = st.river_inputs(p, K, q)
    assert not torch.equal(x_on[..., 0], x_on[..., 1]) and static_on[:, 1].any()
    _, leaked, _ = st.river_inputs(p, K, q, "area", area_input=False)  # the leak is the only area
    a = st.upstream_area(p)
    assert np.allclose(leaked[:, 1].numpy(), a / a.max())


# --- added at review: the generic calibrated conceptual model (HBV-type) ---------------------------------------
def _hbv_params(**kw):
    p = {k: (lo + hi) / 2 for k, lo, hi in zip(st.HBV_NAMES, st.HBV_LOW, st.HBV_HIGH)}
    p.update(kw)
    return p


def test_hbv_conserves_water_and_is_causal():
    rng = np.random.default_rng(3)
    r = np.zeros((2, 4, 400))
    r[:, :, :20] = rng.gamma(0.5, 1.0, (2, 4, 20))
    K = np.array([1.0, 2.0, 3.0, 4.0])
    p = _hbv_params(sm0=1.0, lz0=0.7, base=0.1, k2=0.2)  # full soil: every drop is recharge
    out = st.hbv_runoff(r, K, p)
    assert out.min() >= 0.1 - 1e-12
    np.testing.assert_allclose((out - 0.1).sum(-1), r.sum(-1) + 0.7, rtol=1e-6)
    r2 = r.copy()
    r2[:, :, 10:] += 1.0  # rain from hour 10 on changes nothing before it
    np.testing.assert_array_equal(st.hbv_runoff(r2, K, p)[..., :10], out[..., :10])
    dry = st.hbv_runoff(0.01 * r, K, _hbv_params(sm0=0.0, lz0=0.0, base=0.0, beta=8.0))
    assert dry.sum() < 1e-3 * (0.01 * r).sum()  # a dry soil box with a steep beta swallows a small storm


def test_hbv_fit_recovers_its_own_world():
    rng = np.random.default_rng(0)
    parents = st.random_river_tree(12, rng, 0.3)
    K = rng.uniform(1, 4, 12)
    r = st.lateral_inflow(12, 30, 6, rng, base=0.0)
    truth = _hbv_params(q_ref=0.3, k_factor=1.0)
    out = st.hbv_predict(truth, dict(parents=parents, K=K), r)
    data = {"train0": dict(parents=parents, K=K, q=r, O=out, train=True, n_test=1)}
    fit = st.hbv_fit(data, 5, dict(q_ref=0.3, k_factor=1.0), maxiter=5)  # starts at the truth
    assert fit["score"] > 0.999
    bad = st.hbv_fit(data, 5, dict(q_ref=0.3, k_factor=3.0), maxiter=5)  # wrong routing: a worse fit
    assert bad["score"] < fit["score"]


def test_hbv_rejects_bad_input():
    r, K = _rain(), np.ones(5)
    with pytest.raises(ValueError):
        st.hbv_runoff(r, np.ones(4), _hbv_params())
    with pytest.raises(ValueError):
        st.hbv_runoff(r, K, _hbv_params(beta=50.0))  # outside the calibration box
    with pytest.raises((KeyError, ValueError)):
        st.hbv_runoff(r, K, {k: v for k, v in _hbv_params().items() if k != "fc"})
    with pytest.raises(ValueError):
        st.hbv_runoff(-r - 1, K, _hbv_params())


# round 6 ---------------------------------------------------------------------------------------------------------
def test_two_sided_fails_a_rising_curve():
    from helpers import train

    flat = 1.0 + 0.001 * np.random.default_rng(0).standard_normal(50)
    falling = np.linspace(2.0, 1.0, 50)
    rising = np.concatenate([np.linspace(2.0, 1.0, 25), np.linspace(1.0, 1.6, 25)])  # overfits at the end
    assert train.plateau(rising) < -0.05  # the one-sided reading passes it ...
    assert st.two_sided(train.plateau(rising)) > 0.05  # ... the two-sided one does not
    assert st.two_sided(train.plateau(falling)) > 0.05
    assert st.two_sided(train.plateau(flat)) <= 0.05
    with pytest.raises((TypeError, ValueError)):
        st.two_sided("flat")


def test_runoff_routing_fit_leaves_no_grid_edge():
    rng = np.random.default_rng(3)
    parents = st.random_river_tree(10, rng, 0.3)
    K = rng.uniform(1, 4, 10)
    r = st.lateral_inflow(10, 40, 6, rng, base=0.0)
    lat = 0.05 + 0.5 * st.linear_reservoir(r, 250.0)  # slow: k = 250 lies beyond the old grid
    data = {"train0": dict(parents=parents, K=K, q=r, O=st.route_sequential(parents, K, lat), train=True,
                           n_test=1)}
    old = st.runoff_routing_fit(data, 5, k_grid=(0, 3, 10, 30), extend=False, joint=False)
    assert old["k"] == 30 and old["k_edge"] == 1.0
    new = st.runoff_routing_fit(data, 5, k_grid=(0, 3, 10, 30))
    assert new["k"] == 270 and new["k_edge"] == 0.0 and new["score"] >= old["score"]
    with pytest.raises(ValueError):
        st.runoff_routing_fit(data, 5, k_grid=())
    with pytest.raises(ValueError):
        st.runoff_routing_fit(data, 5, k_grid=(-1, 3))


def test_hbv_calibrate_finds_its_own_world_from_afar():
    rng = np.random.default_rng(0)
    parents = st.random_river_tree(8, rng, 0.3)
    K = rng.uniform(1, 4, 8)
    r = st.lateral_inflow(8, 24, 4, rng, base=0.0)
    truth = st._hbv_unit(np.full(13, 0.3))
    d = dict(parents=parents, K=K)
    out = st.hbv_predict(truth, d, r)[:, 0]
    got = st.hbv_calibrate([(d, r, out)], popsize=3, maxiter=8, polish_iter=150, seed=0)
    assert got["score"] > 0.98 and got["de_score"] is not None and got["evals"] > 100
    again = st.hbv_calibrate([(d, r, out)], polish_iter=5, start=truth)  # gauged: starts at the truth
    assert again["score"] > 0.9999 and again["de_score"] is None
    with pytest.raises(ValueError, match="at least one"):
        st.hbv_calibrate([])
    with pytest.raises(TypeError):
        st.hbv_calibrate([(d, r)])
    with pytest.raises(ValueError, match="do not match"):
        st.hbv_calibrate([(d, r, out[:, :-1])])


def test_round6_records_tiny():
    cfg = st.round6_config()
    cfg["data"] = dict(cfg["data"], n=6, T=10, n_events=2, n_test=1)
    cfg["conceptual"] = dict(cfg["conceptual"], popsize=1, maxiter=0, polish_iter=2,
                             gauged=dict(polish_iter=1))
    cfg["rerun"] = dict(cfg["rerun"], steps=2, val_every=1)
    c = st.conceptual_record(0, cfg)
    assert set(c["gauged"]) == {"zero-shot", "5x"} and "validation" in c["zero_shot"]
    r = st.rerun_record(0, cfg)
    assert r["train_seed"] == 100 and set(r["factorized"]["outlet_r2"]) == set(c["zero_shot"]["outlet_r2"])
    with pytest.raises(ValueError, match="missing"):
        st.conceptual_record(0, {"data": cfg["data"]})


def test_runs_agree_reads_the_sign():
    assert st.runs_agree(0.02, 0.01) < 1 and st.runs_agree(-0.02, -0.03) < 1
    assert st.runs_agree(0.02, -0.01) > 1 and st.runs_agree(0.01, -0.01) == float("inf")
    with pytest.raises((TypeError, ValueError)):
        st.runs_agree(None, 0.1)
