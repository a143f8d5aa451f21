import math

import networkx as nx
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from helpers import transit_lm as T

CITY = T.make_city(0)
OD = T.sample_od(CITY, 40, 1, min_km=2 * T.BIKE_MAX + 0.1)  # one station cannot serve both ends
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
    (o, d), = T.sample_od(city, 1, od_seed, min_km=2 * T.BIKE_MAX + 0.1)  # too far for one station to serve both
    lab = T.route(city, o, d)
    assert lab is not None
    assert T.reachable(city, lab) and T.grounded(city, lab, o, d)
    assert tok.decode_label(tok.encode_label(lab)) == lab


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.integers(3, 7), st.integers(1, 3), st.integers(0, 4))
@example(398, 5, 2, 2)
def test_property_city_network_connected(seed, grid, n_metro, n_bus):
    city = T.make_city(seed, grid=grid, n_metro=n_metro, n_bus=n_bus)
    g = nx.Graph()
    g.add_nodes_from(city.stations)
    for stops in city.lines.values():
        nx.add_path(g, stops)
    assert nx.is_connected(g)


PLAN = T.planned_city()
TINY_CFG = dict(T.checkpoint_config(), n_sft=30, n_cpt_routes=10, n_pref=0, cpt_repeat=1, d_model=16, n_layer=2, n_head=2,
                batch=4, cpt_steps=2, sft_steps=2, sft_tail=0)


def test_planned_city_needs_transfers():
    assert 90 <= len(PLAN.stations) <= 130 and len(PLAN.lines) == 22
    labs = [T.route(PLAN, o, d) for o, d in T.sample_od(PLAN, 60, 3, min_km=5.0)]
    assert sum(len(lab["line_sequence"]) >= 2 for lab in labs) > 0.6 * len(labs)
    with pytest.raises(ValueError):
        T.make_city(0, grid=5, bus_span=(5, 2))
    with pytest.raises(TypeError):
        T.make_city(0, bus_span=4)


def test_shortest_path_equals_networkx():
    for o, d in T.sample_od(PLAN, 8, 4, min_km=5.0):
        for pref in T.PREFS:
            G = T.state_graph(PLAN, o, d, pref)
            try:
                want = nx.single_source_dijkstra(G, "O", "D", weight="w")[0]
            except (nx.NodeNotFound, nx.NetworkXNoPath):
                want = None
            got = T.shortest_path(PLAN, o, d, pref)
            assert (want is None) == (got is None)
            if got is not None:
                assert math.isclose(got[0], want, rel_tol=1e-12)
                assert math.isclose(T.route_cost(G, got[1]), want, rel_tol=1e-12)


def test_reachability_needs_two_stations():
    lab = LABELS[0]
    assert T.reachable(CITY, lab)
    assert not T.reachable(CITY, dict(lab, station_sequence=lab["station_sequence"][:1]))


def test_zones_and_heldout_split():
    held = T.heldout_pairs(3, 4, 0)
    assert len(held) == 8 and all((b, a) in held and a != b for a, b in held)
    assert all(max(abs(a % 3 - b % 3), abs(a // 3 - b // 3)) > 1 for a, b in held)
    ods = T.sample_od(PLAN, 20, 1, min_km=5.0, pairs=held)
    assert all((T.zone(PLAN, o), T.zone(PLAN, d)) in held for o, d in ods)
    ods = T.sample_od(PLAN, 20, 1, min_km=5.0, pairs=held, exclude=True)
    assert all((T.zone(PLAN, o), T.zone(PLAN, d)) not in held for o, d in ods)
    assert T.zone(PLAN, PLAN.from_xy(0.1, 0.1)) == 0 and T.zone(PLAN, PLAN.from_xy(15.0, 15.0)) == 8
    with pytest.raises(ValueError):
        T.heldout_pairs(3, 99, 0)
    with pytest.raises(TypeError):
        T.sample_od(PLAN, 2, 0, pairs=[(0, 8)])


def test_make_data_keeps_heldout_pairs_out_of_training():
    data = T.make_data(TINY_CFG, n_test=10)
    zp = lambda recs: {(T.zone(data.city, o), T.zone(data.city, d)) for o, d, _ in recs}  # noqa: E731
    assert not (zp(data.sft) | zp(data.cpt) | zp(data.test_id)) & data.heldout
    assert zp(data.test_heldout) <= data.heldout
    ten = T.corpora(data, TINY_CFG)
    x, y = ten["sft"]
    p_len = len(data.tok.prompt(*data.sft[0][:2]))
    assert (y[:, : p_len - 1] == -100).all() and (y[:, p_len - 1] != -100).all()
    assert ten["cpt"][0].shape[0] == 2 * len(data.city.lines) + 2 * len(data.city.stations) + len(data.cpt)
    with pytest.raises(ValueError, match="max_len"):
        T.corpora(data, dict(TINY_CFG, max_len=20))
    more = T.make_data(TINY_CFG, n_test=10, n_heldout=15)  # a larger held-out set extends the smaller one
    assert more.test_heldout[:10] == data.test_heldout and len(more.test_heldout) == 15
    assert more.test_id == data.test_id
    with pytest.raises(ValueError, match="n_heldout"):
        T.make_data(TINY_CFG, n_test=10, n_heldout=-1)


def test_kv_cache_generate_equals_full_forward():
    torch = pytest.importorskip("torch")
    tok = T.Tokenizer(CITY)
    torch.manual_seed(0)
    model = T.make_model(TINY_CFG, len(tok)).eval()
    x = torch.tensor([tok.prompt(o, d) for o, d in OD[:5]])
    assert torch.equal(T.generate(model, x, 12, 10**6), model.generate(x, 12)[:, x.shape[1]:])
    short = T.generate(model, x, 12, int(model.generate(x, 1)[0, -1]))  # row 0 stops at once ...
    assert short.shape[1] <= 12
    with pytest.raises(TypeError):
        T.generate("model", x, 3, 0)
    with pytest.raises(ValueError):
        T.generate(model, x, -1, 0)
    out = T.decode(model, tok, OD[:3])
    assert len(out) == 3 and all(r is None or isinstance(r, dict) for r in out)


def test_train_lm_runs_and_is_deterministic():
    data = T.make_data(TINY_CFG)
    ten = T.corpora(data, TINY_CFG)
    m1, h1 = T.train_lm(TINY_CFG, ten, len(data.tok), 0, True, progress=False)
    m2, _ = T.train_lm(TINY_CFG, ten, len(data.tok), 0, True, progress=False)
    assert set(h1) == {"cpt", "sft"} and len(h1["sft"].loss) == TINY_CFG["sft_steps"]
    assert all((a == b).all() for a, b in zip(m1.state_dict().values(), m2.state_dict().values(), strict=True))
    with pytest.raises(ValueError):
        T.checkpoint_config("other")


def test_first_station_expert_score_and_lookup():
    o, d = OD[0]
    lab = LABELS[0]
    g = T.first_station(CITY, lab, o, lab)
    assert g["ok"] == 1.0 and g["to_engine"] == 0.0 and g["km"] <= T.BIKE_MAX
    far = max(CITY.stations, key=lambda s: T.haversine(o, CITY.stations[s]))
    g = T.first_station(CITY, dict(lab, station_sequence=[far], start_transfer_mode=T.WALK), o, lab)
    assert g["ok"] == 0.0 and g["to_engine"] > 0
    assert math.isnan(T.first_station(CITY, None, o)["km"])
    s = T.expert_score(dict(lab, total_time="10分钟", total_fare="3", line_sequence=["M1", "B1"],
                            start_transfer_mode=T.BIKE, end_transfer_mode=T.WALK))
    assert s == pytest.approx(2 + 2 + 1 + 3)
    with pytest.raises(ValueError):
        T.expert_score({})
    train = [(o, d, lab) for (o, d), lab in zip(OD, LABELS, strict=True)]
    assert T.lookup(CITY, train, OD[:5]) == LABELS[:5]
    with pytest.raises(ValueError):
        T.lookup(CITY, [], OD[:1])


def test_encode_station():
    tok = T.Tokenizer(CITY)
    s = next(iter(CITY.stations))
    ids = tok.encode_station(s)
    assert tok.itos[ids[1]] == "<at>" and tok.itos[ids[-2]] == s and len(ids) == 10
    assert tok.itos[tok.encode_station(s, coords_first=False)[1]] == s
    with pytest.raises(ValueError):
        tok.encode_station("nowhere")


def test_preference_records_in_sft_and_decode_prefs():
    torch = pytest.importorskip("torch")
    cfg = dict(TINY_CFG, n_pref=24)
    data = T.make_data(cfg, n_test=8)
    assert data.pref and {r[2] for r in data.pref} <= {2, 5, 7, 8}
    zp = lambda recs: {(T.zone(data.city, r[0]), T.zone(data.city, r[1])) for r in recs}  # noqa: E731
    assert not zp(data.pref + data.test_pref) & data.heldout
    for o, d, q, lab in data.pref:  # each label is the engine's route under its own request type
        assert lab == T.route(data.city, o, d, q) and T.preference_ok(lab, lab, q, data.city) in (True, False)
    assert all(not any(data.city.kind[x] == "metro" for x in lab["line_sequence"])
               for *_, q, lab in data.pref if q == 5)
    ten = T.corpora(data, cfg)
    assert ten["sft"][0].shape[0] == len(data.sft) + len(data.pref)
    req = data.tok.stoi[f"<req{data.pref[0][2]}>"]
    assert int(ten["sft"][0][len(data.sft), 1]) == req  # the request token is in the prompt
    assert T.make_data(TINY_CFG).pref == []  # no n_pref: no preference records
    torch.manual_seed(0)
    model = T.make_model(cfg, len(data.tok)).eval()
    ods = [(o, d) for o, d, *_ in data.pref[:3]]
    assert len(T.decode(model, data.tok, ods, prefs=[2, 5, 7])) == 3
    with pytest.raises(ValueError, match="one request type per pair"):
        T.decode(model, data.tok, ods, prefs=[2, 5])
    with pytest.raises(ValueError):
        T.decode(model, data.tok, ods, prefs=[2, 5, 3])


def test_route_minutes_reproduces_engine_and_catches_understated_times():
    for (o, d), lab in zip(OD, LABELS, strict=True):
        if lab is None:
            continue
        for r in [lab] + [T.route(CITY, o, d, p) for p in (5, 8)]:
            if r is not None:  # the engine's stated time, rounded to whole minutes
                assert abs(T.route_minutes(CITY, r, o, d) - T.parse_time(r["total_time"])) <= 0.5 + 1e-9
        # a record that understates its time is still timed by its route
        fake = dict(lab, total_time="1分钟")
        assert T.route_minutes(CITY, fake, o, d) == T.route_minutes(CITY, lab, o, d) > 1
    lab, (o, d) = next((lab, od) for lab, od in zip(LABELS, OD, strict=True) if lab is not None)
    assert T.route_minutes(CITY, dict(lab, line_sequence=lab["line_sequence"] + ["M1"]), o, d) is None
    assert T.route_minutes(CITY, dict(lab, station_sequence=["nowhere"] * 2), o, d) is None
    assert T.route_minutes(CITY, None, o, d) is None
    with pytest.raises((TypeError, ValueError)):
        T.route_minutes(CITY, lab, "o", d)


def test_splice_rides_one_record_then_the_other_and_recovers_a_route_from_its_halves():
    lab = next(lab for lab in LABELS if len(lab["line_sequence"]) >= 2)
    seq = lab["station_sequence"]
    x = seq[seq.index(T.TRANSFER) - 1]  # the first transfer station
    spliced = T.splice(lab, lab, x)  # a route spliced with itself at one of its stations is itself
    assert spliced["station_sequence"] == seq and spliced["line_sequence"] == lab["line_sequence"]
    assert T.reachable(CITY, spliced)
    with pytest.raises(ValueError):
        T.splice(lab, lab, "nowhere")
    # the splice baseline, given the two halves of a route as separate records, reproduces the route's stations
    i = seq.index(T.TRANSFER)
    first_half = dict(lab, station_sequence=seq[:i], line_sequence=lab["line_sequence"][:1])
    second_half = dict(lab, station_sequence=seq[i + 1:], line_sequence=lab["line_sequence"][1:])
    o, d = OD[LABELS.index(lab)]
    mid = CITY.stations[x]
    train = [(o, mid, first_half), (mid, d, second_half)]
    out = T.splice_lookup(CITY, train, [(o, d)])[0]
    assert [s for s in out["station_sequence"] if s != T.TRANSFER] == [s for s in seq if s != T.TRANSFER]
    assert out["line_sequence"] == lab["line_sequence"]
    # a record paired with itself splices to itself
    lone = [(o, d, first_half)]
    assert T.splice_lookup(CITY, lone, [(o, d)])[0]["station_sequence"] == first_half["station_sequence"]


def test_last_station_grounds_the_destination():
    lab, d = LABELS[0], OD[0][1]
    g = T.last_station(CITY, lab, d, lab)
    assert g["ok"] == 1.0 and g["to_engine"] == 0.0 and g["km"] <= T.GROUND_MAX[lab["end_transfer_mode"]]
    assert math.isnan(T.last_station(CITY, None, d)["km"])


def test_first_break_finds_where_a_route_breaks():
    for lab, (o, d) in zip(LABELS, OD, strict=True):
        assert T.first_break(CITY, lab, o, d) == {"where": "none", "leg": -1}
    lab = next(lab for lab in LABELS if len(lab["line_sequence"]) >= 2)
    o, d = OD[LABELS.index(lab)]
    seq = lab["station_sequence"]
    assert T.first_break(CITY, None, o, d)["where"] == "malformed"
    assert T.first_break(CITY, dict(lab, line_sequence=lab["line_sequence"][:1]), o, d)["where"] == "malformed"
    far = max(CITY.stations, key=lambda s: T.haversine(o, CITY.stations[s]))
    assert T.first_break(CITY, dict(lab, station_sequence=[far] + seq[1:]), o, d)["where"] == "start"
    assert T.first_break(CITY, dict(lab, start_transfer_distance="40公里"), o, d)["where"] == "start_km"
    assert T.first_break(CITY, dict(lab, end_transfer_distance="40公里"), o, d)["where"] == "end_km"
    far_d = max(CITY.stations, key=lambda s: T.haversine(d, CITY.stations[s]))
    assert T.first_break(CITY, dict(lab, station_sequence=seq[:-1] + [far_d]), o, d)["where"] in ("end", "jump")
    # a jump inside the first leg: a station that is no neighbour of the one before it
    i = seq.index(T.TRANSFER)
    a = seq[i - 1]
    stranger = next(s for s in CITY.stations if s not in CITY.next_hop[seq[i - 2]] and s != a) if i >= 2 else None
    if stranger is not None:
        broken = dict(lab, station_sequence=seq[: i - 1] + [stranger] + seq[i:])
        assert T.first_break(CITY, broken, o, d) in ({"where": "jump", "leg": 0}, {"where": "start", "leg": -1})
    # a transfer break: the second leg starts at a station that is no neighbour of the first leg's end
    nxt = next(s for s in CITY.stations if s not in CITY.next_hop[a])
    broken = dict(lab, station_sequence=seq[: i + 1] + [nxt] + seq[i + 2:])
    assert T.first_break(CITY, broken, o, d) == {"where": "transfer", "leg": 0}
    # off line: two neighbours along some line, but not along the leg's own line
    for line, stops in CITY.lines.items():
        other = next((ln for ln in CITY.lines if ln != line), None)
        if other and not any({x, y} <= set(CITY.lines[other]) for x, y in zip(stops, stops[1:], strict=False)):
            rec = dict(lab, line_sequence=[other], station_sequence=stops[:2],
                       start_transfer_distance="0米", end_transfer_distance="0米")
            oo, dd = CITY.stations[stops[0]], CITY.stations[stops[1]]
            assert T.first_break(CITY, rec, oo, dd) == {"where": "off_line", "leg": 0}
            break
    else:
        pytest.fail("no line pair to test an off-line break on")
    with pytest.raises(TypeError):
        T.first_break(CITY, lab, "origin", d)


def test_city_from_texts_rebuilds_the_map_of_the_cpt_corpus():
    tok = T.Tokenizer(CITY)
    texts = [tok.encode_line(ln, rev) for ln in CITY.lines for rev in (False, True)]
    texts += [tok.encode_station(s, first) for s in CITY.stations for first in (True, False)]
    rb = T.city_from_texts(tok, texts + [tok.prompt(*OD[0])])  # a prompt is skipped
    assert rb.lines == CITY.lines and rb.next_hop == CITY.next_hop
    assert rb.kind == {ln: "metro" if ln.startswith("M") else "bus" for ln in CITY.lines}
    assert max(T.haversine(rb.stations[s], CITY.stations[s]) for s in CITY.stations) < 0.08  # 100 m grid
    o, d = OD[0]
    assert T.reachable(CITY, T.route(rb, o, d))
    with pytest.raises(ValueError, match="place every station"):
        T.city_from_texts(tok, texts[: 2 * len(CITY.lines)])
    with pytest.raises(ValueError, match="at least one line"):
        T.city_from_texts(tok, texts[2 * len(CITY.lines):])
    with pytest.raises(TypeError):
        T.city_from_texts("tok", texts)


def test_leg_hazard_counts_routes_reaching_and_breaking_in_a_leg():
    b = [{"where": "none", "leg": -1}, {"where": "jump", "leg": 0}, {"where": "transfer", "leg": 1},
         {"where": "start", "leg": -1}, {"where": "off_line", "leg": 2}, {"where": "end", "leg": -1},
         {"where": "start_km", "leg": -1}]
    n = [2, 3, 3, 3, 3, 1, 3]
    assert T.leg_hazard(b, n, 0) == (5, 1)  # all but the two start breaks; one jump in leg 0
    assert T.leg_hazard(b, n, 1) == (3, 1)  # the 1-leg route and the leg-0 jump drop out
    assert T.leg_hazard(b, n, 2) == (1, 1)
    assert T.leg_hazard(b, n, 3) == (0, 0)
    with pytest.raises(ValueError, match="one count per break"):
        T.leg_hazard(b, n[:-1], 0)
    with pytest.raises(TypeError, match="first_break"):
        T.leg_hazard([{"where": "nowhere"}], [1], 0)


def test_label_parts_names_every_token_and_rejects_broken_input():
    data = T.make_data(TINY_CFG)
    tok = data.tok
    lab = next(lab for *_, lab in data.sft if len(lab["line_sequence"]) >= 2)
    ids = tok.encode_label(lab)
    parts = T.label_parts(tok, ids)
    assert len(parts) == len(ids) and set(parts) <= set(T.PARTS)
    toks = [tok.itos[i] for i in ids]
    seq = lab["station_sequence"]
    at = toks.index("<stations>") + 1
    assert parts[at] == "first_station" and parts[at + len(seq) - 1] == "last_station"
    k = seq.index(T.TRANSFER)
    assert parts[at + k - 1] == parts[at + k] == parts[at + k + 1] == "transfer_stations"
    assert parts[toks.index("<lines>") + 1] == "first_line" and parts[toks.index("<lines>") + 2] == "later_lines"
    assert parts[toks.index("<time>") + 1] == "time" and parts[-1] == "fields"
    with pytest.raises(ValueError, match="field token"):
        T.label_parts(tok, ids[1:])
    with pytest.raises(TypeError):
        T.label_parts("tok", ids)


def test_part_losses_shares_sum_to_one_and_untrained_model_is_uniformish():
    torch = pytest.importorskip("torch")
    data = T.make_data(TINY_CFG)
    torch.manual_seed(0)
    model = T.make_model(TINY_CFG, len(data.tok)).eval()
    out = T.part_losses(model, data.tok, data.sft[:6], chunk=4)
    assert math.isclose(sum(v["share"] for v in out.values()), 1.0, rel_tol=1e-9)
    assert all(abs(v["per_token"] - math.log(len(data.tok))) < 1.5 for v in out.values())
    assert out["first_station"]["tokens"] == 1.0
    with pytest.raises(ValueError):
        T.part_losses(model, data.tok, [])


def test_train_lm_tail_constant_then_cosine_and_evals_by_step():
    data = T.make_data(TINY_CFG)
    ten = T.corpora(data, TINY_CFG)
    cfg = dict(TINY_CFG, sft_steps=6)
    calls = []

    def ev(model):
        calls.append(1)
        return {"x": float(len(calls))}

    _, h = T.train_lm(cfg, ten, len(data.tok), 0, False, progress=False, tail=3, eval_fn=ev, eval_every=2)
    lr = h["sft"].lr
    assert len(h["sft"].loss) == 6 and lr[1] == lr[2] == cfg["lr"] and lr[3] == cfg["lr"] and lr[5] < lr[4] < lr[3]
    assert [s for s, _ in h["sft"].evals["x"]] == [2, 3, 5, 6]
    m1, _ = T.train_lm(dict(cfg, sft_tail=3), ten, len(data.tok), 0, False, progress=False)
    m2, _ = T.train_lm(cfg, ten, len(data.tok), 0, False, progress=False, tail=3)
    assert all((a == b).all() for a, b in zip(m1.state_dict().values(), m2.state_dict().values(), strict=True))
    with pytest.raises(ValueError, match="tail"):
        T.train_lm(cfg, ten, len(data.tok), 0, False, progress=False, tail=6)


def test_cell_agreement_is_one_for_a_cell_with_one_route_and_checks_input():
    o, d = OD[0]
    lab = LABELS[0]
    agree = T.cell_agreement(CITY, [(o, d, lab)], n=5)
    assert agree.shape == (1,) and 0.0 <= agree[0] <= 1.0
    other = LABELS[next(i for i, r in enumerate(LABELS) if r["station_sequence"] != lab["station_sequence"])]
    assert T.cell_agreement(CITY, [(o, d, other)], n=5)[0] == 0.0  # another trip's route is never this one's
    with pytest.raises(ValueError):
        T.cell_agreement(CITY, [], n=5)
    with pytest.raises(ValueError):
        T.cell_agreement(CITY, [(o, d, lab)], n=0)


# ---- the retraining recipe and its conditions, registered on 2026-12-06 before training (issue #68) -----------
WSD = T.checkpoint_config("models_wsd")
EVAL_STEPS = list(range(WSD["eval_every"], WSD["sft_steps"] + 1, WSD["eval_every"]))


def _route_curve(level):
    return {"step": EVAL_STEPS, "value": [level(s) for s in EVAL_STEPS]}


def test_registered_recipe_is_the_issues():
    assert T.REGISTERED == "2026-12-06"
    assert (WSD["sft_steps"], WSD["sft_decay"], WSD["lr"], T.stable_end(WSD)) == (16000, 5000, 3e-3, 11000)
    assert WSD["n_fit"] == T.N_FIT_RECORDS == 300 and (T.FLAT_BAR, T.FIT_BAR) == (0.05, 0.8)
    assert set(T.ROUTE_PARTS) < set(T.PARTS)
    base = T.checkpoint_config("models")
    assert all(WSD[k] == base[k] for k in base if k not in ("sft_steps", "sft_tail"))  # same data and model


def test_route_flat_fails_while_falling_and_passes_on_a_flat_stable_phase():
    rng = np.random.default_rng(0)
    noise = {s: 0.01 * rng.standard_normal() for s in EVAL_STEPS}

    def flat(s):  # levelled off by step ~5000, then the decay anneals it lower
        return 1.0 + 6.0 * math.exp(-s / 800) + noise[s] - (0.4 * (s - 11000) / 5000 if s > 11000 else 0.0)

    def falling(s):  # still falling linearly at the end of the stable phase
        return 8.0 - 6.0 * min(s, 11000) / 11000 + noise[s]

    assert T.route_flat(_route_curve(flat), WSD) <= T.FLAT_BAR
    assert T.route_flat(_route_curve(falling), WSD) > T.FLAT_BAR
    # read to the end, the decay's annealing would read as "still improving": the registered reading stops at 11000
    from helpers import train
    assert train.plateau(_route_curve(flat), 0.2) > T.FLAT_BAR
    # (step, value) pairs read the same as a manifest curve
    pairs = list(zip(EVAL_STEPS, _route_curve(falling)["value"], strict=True))
    assert T.route_flat(pairs, WSD) == T.route_flat(_route_curve(falling), WSD)
    broken = _route_curve(flat)
    broken["value"][3] = float("nan")
    with pytest.raises(ValueError, match="finite"):
        T.route_flat(broken, WSD)
    with pytest.raises(ValueError, match="until"):  # a curve that has no point in the stable phase
        T.route_flat({"step": [15000, 16000], "value": [1.0, 0.9]}, WSD)
    with pytest.raises(ValueError):
        T.route_flat([(250, 1.0, 2.0)], WSD)
    with pytest.raises(ValueError):
        T.route_flat(_route_curve(flat), dict(WSD, sft_decay=16000))


def test_fit_condition_bar_and_input():
    assert T.fits_records(0.8) >= T.FIT_BAR > T.fits_records(0.79)
    per_record = [1] * 240 + [0] * 60
    assert T.fits_records(per_record) == 0.8 and T.fits_records(np.array(per_record, bool)) == 0.8
    with pytest.raises(ValueError, match="300"):
        T.fits_records([1] * 150)  # the previous round's 150 records are not the registered reading
    with pytest.raises(ValueError):
        T.fits_records([2] * 300)
    with pytest.raises(ValueError):
        T.fits_records(1.2)
    with pytest.raises(TypeError):
        T.fits_records("0.9")


def test_wsd_conditions_and_gates():
    good = _route_curve(lambda s: 1.0 + 6.0 * math.exp(-s / 800))
    bad = _route_curve(lambda s: 8.0 - 6.0 * min(s, 11000) / 11000)
    c = T.wsd_conditions(good, 0.85, WSD)
    assert c["route_flat"][1:3] == ("<=", 0.05) and c["route_flat"][3] and c["fits_training_records"][3]
    c = T.wsd_conditions(bad, 0.5, WSD)
    assert not c["route_flat"][3] and not c["fits_training_records"][3]
    for claim in ("exact_match", "full_r2", "grounding_destination", "beats_splice_baseline"):
        assert T.wsd_gates(claim) == ("cpt_route_flat", "cpt_fits_training_records")
    assert set(T.wsd_gates("cpt_helps")) == {"cpt_route_flat", "cpt_fits_training_records", "sft_route_flat",
                                             "sft_fits_training_records"}
    assert T.wsd_gates("reachability") == T.wsd_gates("grounding") == ("cpt_route_flat",)
    with pytest.raises(ValueError):
        T.wsd_gates("")
    with pytest.raises(TypeError):
        T.wsd_gates(3)


def test_route_loss_sums_the_route_deciding_parts():
    torch = pytest.importorskip("torch")
    data = T.make_data(TINY_CFG)
    torch.manual_seed(0)
    model = T.make_model(TINY_CFG, len(data.tok)).eval()
    parts = T.part_losses(model, data.tok, data.sft[:6], chunk=4)
    want = sum(parts[p]["per_token"] * parts[p]["tokens"] for p in T.ROUTE_PARTS)
    assert math.isclose(T.route_loss(parts), want) and want > 0
    with pytest.raises(ValueError, match="first_line"):
        T.route_loss({k: v for k, v in parts.items() if k != "first_line"})
    with pytest.raises(TypeError):
        T.route_loss([1, 2])


def test_wsd_stages_follow_one_wsd_schedule_and_give_the_one_process_weights():
    from helpers import train

    lrs = T.wsd_lrs(WSD)
    assert lrs == [train.lr_at(i, 16000, 3e-3, 400, "wsd", decay_steps=5000) for i in range(16000)]
    with pytest.raises(ValueError, match="stable"):
        T.wsd_lrs(dict(WSD, split_at=12000))
    cfg = dict(TINY_CFG, sft_steps=8, sft_decay=3, sft_warmup=2, split_at=4, eval_every=2)
    data = T.make_data(cfg)
    ten = T.corpora(data, cfg)
    seen = []

    def ev(model, step):
        seen.append(step)
        return {"x": float(step)}

    whole = T.train_wsd(cfg, ten, len(data.tok), 0, True)
    one = T.train_wsd(cfg, ten, len(data.tok), 0, True, stage=1, eval_fn=ev)
    two = T.train_wsd(cfg, ten, len(data.tok), 0, True, stage=2, resume=one, eval_fn=ev)
    assert all(torch_equal(whole["state"][k], two["state"][k]) for k in whole["state"])
    assert two["hist"]["sft"]["lr"] == whole["hist"]["sft"]["lr"] == T.wsd_lrs(cfg)
    assert two["hist"]["sft"]["loss"] == whole["hist"]["sft"]["loss"] and len(two["hist"]["cpt"]["loss"]) == 2
    assert seen == [2, 4, 6, 8] and [s for s, _ in two["hist"]["sft"]["evals"]["x"]] == [2, 4, 6, 8]
    with pytest.raises(ValueError, match="resume"):
        T.train_wsd(cfg, ten, len(data.tok), 0, True, stage=2)
    with pytest.raises(ValueError, match="multiples"):
        T.train_wsd(dict(cfg, eval_every=3), ten, len(data.tok), 0, True, stage=1)
    with pytest.raises(ValueError, match="stage"):
        T.train_wsd(cfg, ten, len(data.tok), 0, True, stage=3)


def torch_equal(a, b):
    return bool((a == b).all())


def test_make_wsd_script_runs_a_stage_job_and_assembles(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "data" / "10_transit_lm" / "make_wsd.py"
    run = [sys.executable, str(script), "--tiny", "--parts", str(tmp_path / "p")]
    r = subprocess.run(run + ["--seeds", "0", "--arms", "cpt", "--stage", "1", "--out", str(tmp_path)],
                       capture_output=True, text=True, cwd=script.parents[2])
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "p" / "cpt" / "stage1" / "seed0.pt").is_file() and not (tmp_path / "10_transit_lm").exists()
    r = subprocess.run(run + ["--out", str(tmp_path)], capture_output=True, text=True, cwd=script.parents[2])
    assert r.returncode == 0, r.stderr
    assert "reused" in r.stdout
    import json
    m = json.loads((tmp_path / "10_transit_lm" / "models_wsd.json").read_text())
    assert m["extra"]["registered"] == T.REGISTERED
    assert {"cpt/0/route_loss", "cpt/0/train_exact", "sft/0/route_loss", "cpt/0/cpt"} <= set(m["history"])
