import math

import networkx as nx
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from helpers import transit_lm as T

CITY = T.make_city(0)
OD = T.sample_od(CITY, 40, 1)
LABELS = [T.route(CITY, o, d) for o, d in OD]


def test_city_structure():
    assert len(CITY.stations) > 10 and len(CITY.lines) == 7
    assert any(sum(s in stops for stops in CITY.lines.values()) > 1 for s in CITY.stations)  # transfer stations
    for s, nh in CITY.next_hop.items():
        assert s in nh
        for t in nh:
            assert s in CITY.next_hop[t]  # symmetric
    assert T.make_city(0).stations == CITY.stations and T.make_city(1).stations != CITY.stations
    with pytest.raises(ValueError):
        T.make_city(0, grid=2)


def test_labels_pass_own_metrics():
    for lab, (o, d) in zip(LABELS, OD, strict=True):
        assert lab is not None
        ev = T.evaluate(CITY, lab, lab, o, d)
        assert ev["r1"] and ev["r2"] and ev["exact"] and ev["overall"] and ev["access_ok"]
        assert ev["line_iou"] == ev["station_iou"] == 1.0


def test_engine_equals_brute_force_on_tiny_city():
    tiny = T.make_city(3, grid=3, spacing_km=1.5, n_metro=1, n_bus=1)
    for o, d in T.sample_od(tiny, 6, 2, min_km=1.0):
        for pref in (0, 2, 8):
            G = T.state_graph(tiny, o, d, pref)
            cost, _ = nx.single_source_dijkstra(G, "O", "D", weight="w")
            assert math.isclose(cost, T.brute_force_cost(G), rel_tol=1e-12, abs_tol=1e-12)


def test_preferences_respected():
    for o, d in OD[:15]:
        best = T.route(CITY, o, d)
        for pref in (2, 5, 8):
            r = T.route(CITY, o, d, pref)
            if r is not None:
                assert T.preference_ok(r, best, pref, CITY)


def test_broken_adjacency_fails_reachability():
    lab = dict(LABELS[0])
    far = [s for s in CITY.stations if s not in CITY.next_hop[lab["station_sequence"][0]]][0]
    lab["station_sequence"] = [lab["station_sequence"][0], far]
    assert not T.reachable(CITY, lab)


def test_malformed_records_fail_not_crash():
    o, d = OD[0]
    for bad in (None, {}, "route", {"line_sequence": []}, dict(LABELS[0], total_time="soon"),
                dict(LABELS[0], station_sequence=["nowhere"])):
        ev = T.evaluate(CITY, bad, LABELS[0], o, d)
        assert not ev["overall"]
    assert not T.evaluate(CITY, {}, LABELS[0], o, d)["r1"]
    with pytest.raises(ValueError):
        T.evaluate(CITY, LABELS[0], {}, o, d)


def test_parsers_and_haversine():
    assert T.parse_time("1小时7分钟") == 67 and T.parse_time("37分钟") == 37
    assert T.parse_distance("344米") == pytest.approx(0.344) and T.parse_distance("27.8公里") == 27.8
    assert T.parse_distance("") == 0.0
    for bad in ("3 miles", "km"):
        with pytest.raises(ValueError):
            T.parse_distance(bad)
    with pytest.raises(ValueError):
        T.parse_time("soon")
    with pytest.raises(TypeError):
        T.parse_time(5)
    # Beijing (39.9042, 116.4074) to Shanghai (31.2304, 121.4737): about 1067.3 km
    assert T.haversine((39.9042, 116.4074), (31.2304, 121.4737)) == pytest.approx(1067.3, abs=1.0)
    assert T.haversine((0, 0), (0, 1)) == pytest.approx(111.195, abs=1e-3)


def _with(lab, **kw):
    return dict(lab, **kw)


def test_tolerance_edges():
    o, d = OD[0]
    lab = _with(LABELS[0], total_distance="50.0公里", total_time="1小时40分钟", total_fare="20")
    assert T.evaluate(CITY, _with(lab, total_distance="55.0公里"), lab, o, d)["distance_ok"]
    assert not T.evaluate(CITY, _with(lab, total_distance="55.1公里"), lab, o, d)["distance_ok"]
    assert T.evaluate(CITY, _with(lab, total_time="1小时50分钟"), lab, o, d)["time_ok"]
    assert not T.evaluate(CITY, _with(lab, total_time="1小时51分钟"), lab, o, d)["time_ok"]
    assert T.evaluate(CITY, _with(lab, total_fare="22"), lab, o, d)["fare_ok"]
    assert not T.evaluate(CITY, _with(lab, total_fare="23"), lab, o, d)["fare_ok"]
    small = _with(LABELS[0], total_distance="2.0公里", total_time="10分钟", total_fare="2")
    ev = T.evaluate(CITY, _with(small, total_distance="2.5公里", total_time="15分钟", total_fare="3"), small, o, d)
    assert ev["distance_ok"] and ev["time_ok"] and ev["fare_ok"]  # absolute tolerances
    ev = T.evaluate(CITY, _with(small, total_distance="2.6公里", total_time="16分钟", total_fare="4"), small, o, d)
    assert not (ev["distance_ok"] or ev["time_ok"] or ev["fare_ok"])


def test_iou_and_diversity():
    assert T.iou([1, 2], [2, 3]) == pytest.approx(1 / 3) and T.iou([], []) == 1.0
    r = LABELS[0]
    assert T.route_diversity([r, r, r]) == 0.0
    a = _with(r, line_sequence=["M1"], start_transfer_mode="步行", end_transfer_mode="步行")
    b = _with(r, line_sequence=["B1"], start_transfer_mode="骑行", end_transfer_mode="骑行")
    assert T.route_diversity([a, b]) == 1.0
    with pytest.raises(ValueError):
        T.route_diversity([r])
    routes = T.diverse_routes(CITY, *OD[0])
    assert list(routes) == ["first", "second", "third"] and routes["first"] == LABELS[0]


def test_tokenizer_roundtrip_and_errors():
    tok = T.Tokenizer(CITY)
    for lab in LABELS:
        assert tok.decode_label(tok.encode_label(lab)) == lab
    p = tok.prompt(*OD[0])
    assert len(p) == 17 and p[0] == tok.stoi[tok.BOS]
    with pytest.raises(ValueError):
        tok.decode_label(tok.encode_label(LABELS[0])[3:])
    with pytest.raises(ValueError):
        tok.encode_label({})
    with pytest.raises(ValueError):
        tok.prompt(*OD[0], pref=3)
    with pytest.raises(TypeError):
        T.Tokenizer("city")


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000), st.integers(0, 10_000))
@example(398, 974)  # bus line B2 met no other line: an island that sample_od drew a destination next to
def test_property_engine_labels_valid(city_seed, od_seed):
    city = T.make_city(city_seed, grid=5, n_metro=2, n_bus=2)
    tok = T.Tokenizer(city)
    (o, d), = T.sample_od(city, 1, od_seed)
    lab = T.route(city, o, d)
    assert lab is not None
    assert T.reachable(city, lab) and T.grounded(city, lab, o, d)
    assert tok.decode_label(tok.encode_label(lab)) == lab


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.integers(3, 7), st.integers(0, 3), st.integers(0, 4))
@example(398, 5, 2, 2)
def test_property_city_network_connected(seed, grid, n_metro, n_bus):
    if n_metro + n_bus == 0:
        return
    city = T.make_city(seed, grid=grid, n_metro=n_metro, n_bus=n_bus)
    g = nx.Graph()
    g.add_nodes_from(city.stations)
    for stops in city.lines.values():
        nx.add_path(g, stops)
    assert nx.is_connected(g)
