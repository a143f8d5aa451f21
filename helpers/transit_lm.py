"""TransitLM at laptop scale: a synthetic city, a routing engine writing TransitLM-format records, the paper's
evaluation funnel, and a tokenizer for a small decoder-only language model.

The record format and the funnel (reachability, grounding, IoU/exact, estimate tolerances, preference compliance,
route diversity) follow the paper's description; the city, its costs and the tokenizer are ours.
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass, field
from typing import Any

import networkx as nx
import numpy as np

from helpers import validate as V

__all__ = [
    "TRANSFER", "City", "make_city", "haversine", "route", "diverse_routes", "route_cost", "brute_force_cost",
    "state_graph", "parse_distance", "parse_time", "format_distance", "format_time", "reachable", "grounded",
    "iou", "evaluate", "preference_ok", "route_diversity", "Tokenizer", "sample_od", "nearest_station",
]

TRANSFER = "【换乘】"
WALK, BIKE = "步行", "骑行"
CENTRE = (31.20, 121.45)
KM_PER_DEG_LAT = 111.0
SPEED = {"metro": 35.0, "bus": 18.0}  # km/h
HEADWAY = {"metro": 4.0, "bus": 8.0}  # min; expected wait = headway / 2
BASE_FARE = {"metro": 2.0, "bus": 2.0}
KM_FARE = {"metro": 0.2, "bus": 0.0}  # additive per-km fare keeps the score additive (exact Dijkstra)
DWELL, TRANSFER_MIN = 0.5, 4.0  # min
WALK_KMH, BIKE_KMH, DETOUR = 5.0, 12.0, 1.3
WALK_MAX, BIKE_MAX = 1.2, 3.0  # km of straight-line access distance per mode
GROUND_MAX = {WALK: 3.0, "": 3.0, BIKE: 5.0}  # the paper's grounding thresholds (km)
PREFS = (0, 2, 5, 7, 8)  # 0 optimal, 2 fewer transfers, 5 no subway, 7 subway first, 8 fastest


def _point(name: str, p: Any) -> tuple[float, float]:
    """A (lat, lon) pair of finite degrees, lat in [-90, 90], lon in [-180, 180]."""
    if isinstance(p, (str, bytes)) or not isinstance(p, (tuple, list, np.ndarray)) or len(p) != 2:
        raise TypeError(f"{name} must be a (lat, lon) pair of numbers, got {V.describe(p)}")
    return (V.number(f"{name} latitude", p[0], min=-90, max=90), V.number(f"{name} longitude", p[1], min=-180, max=180))


def _city(city: Any) -> City:
    return V.instance("city", city, City)


def _pref(pref: Any) -> int:
    return V.one_of("pref", V.integer("pref", pref), PREFS)


def haversine(a: tuple[float, float], b: tuple[float, float]) -> float:
    """Great-circle distance in km between (lat, lon) points."""
    a, b = _point("a", a), _point("b", b)
    (la1, lo1), (la2, lo2) = (tuple(map(math.radians, p)) for p in (a, b))
    h = math.sin((la2 - la1) / 2) ** 2 + math.cos(la1) * math.cos(la2) * math.sin((lo2 - lo1) / 2) ** 2
    return 2 * 6371.0088 * math.asin(math.sqrt(min(1.0, h)))


@dataclass
class City:
    """Stations (id -> (lat, lon)), lines (name -> stop ids), line kinds, and the paper's next-hop table."""

    stations: dict[str, tuple[float, float]]
    lines: dict[str, list[str]]
    kind: dict[str, str]
    size_km: float
    next_hop: dict[str, set[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("stations", "lines", "kind", "next_hop"):
            V.instance(name, getattr(self, name), dict)
        self.size_km = V.positive("size_km", self.size_km)
        for sid, p in self.stations.items():
            _point(f"stations[{sid!r}]", p)
        for name, k in self.kind.items():
            V.one_of(f"kind[{name!r}]", k, tuple(SPEED))
        for name, stops in self.lines.items():
            if name not in self.kind:
                raise ValueError(f"kind must give the kind of every line, line {name!r} has none")
            if len(stops) < 2 or any(s not in self.stations for s in stops):
                raise ValueError(f"lines[{name!r}] must list >= 2 known stations, got {stops!r}")
        if not self.next_hop:
            self.next_hop = {s: {s} for s in self.stations}
            for stops in self.lines.values():
                for a, b in itertools.pairwise(stops):
                    self.next_hop[a].add(b)
                    self.next_hop[b].add(a)

    def to_xy(self, p: tuple[float, float]) -> tuple[float, float]:
        """(lat, lon) -> km east/north of the city's south-west corner."""
        lat0, lon0 = self.origin
        return ((p[1] - lon0) * KM_PER_DEG_LAT * math.cos(math.radians(CENTRE[0])), (p[0] - lat0) * KM_PER_DEG_LAT)

    def from_xy(self, x: float, y: float) -> tuple[float, float]:
        lat0, lon0 = self.origin
        return (lat0 + y / KM_PER_DEG_LAT, lon0 + x / (KM_PER_DEG_LAT * math.cos(math.radians(CENTRE[0]))))

    @property
    def origin(self) -> tuple[float, float]:
        half = self.size_km / 2
        return (CENTRE[0] - half / KM_PER_DEG_LAT,
                CENTRE[1] - half / (KM_PER_DEG_LAT * math.cos(math.radians(CENTRE[0]))))


def _bus_path(rng: np.random.Generator, grid: int) -> list[tuple[int, int]]:
    """An L-shaped bus line between two random nodes at least ``grid // 2`` apart (Manhattan)."""
    x0, y0 = (int(v) for v in rng.integers(0, grid, 2))
    x1, y1 = (int(v) for v in rng.integers(0, grid, 2))
    while abs(x1 - x0) + abs(y1 - y0) < grid // 2:
        x1, y1 = (int(v) for v in rng.integers(0, grid, 2))
    sx, sy = (1 if x1 >= x0 else -1), (1 if y1 >= y0 else -1)
    horiz = [(x, y0) for x in range(x0, x1 + sx, sx)]
    vert = [(x1, y) for y in range(y0 + sy, y1 + sy, sy)] if y1 != y0 else []
    return horiz + vert


def _stray_lines(paths: list[list[tuple[int, int]]]) -> list[int]:
    """Indices of the lines that share no station, directly or through other lines, with line 0."""
    reached, seen, grew = {0}, set(paths[0]), True
    while grew:
        grew = False
        for i, p in enumerate(paths):
            if i not in reached and not seen.isdisjoint(p):
                reached.add(i)
                seen.update(p)
                grew = True
    return [i for i in range(len(paths)) if i not in reached]


def make_city(seed: int, grid: int = 7, spacing_km: float = 1.6, n_metro: int = 3, n_bus: int = 4) -> City:
    """A seeded city on a ``grid`` x ``grid`` lattice: metro lines are straight rows/columns, bus lines L-shapes;
    lines crossing at a node share that station (a transfer station). The network is connected: a bus line that
    meets no other line is redrawn, so every station can reach every other one."""
    seed = V.seed("seed", seed)
    grid = V.integer("grid", grid, min=3)
    n_metro, n_bus = V.integer("n_metro", n_metro, min=0), V.integer("n_bus", n_bus, min=0)
    spacing_km = V.positive("spacing_km", spacing_km)
    if n_metro + n_bus < 1:
        raise ValueError(f"need at least one line: n_metro + n_bus must be >= 1, got {n_metro} + {n_bus}")
    rng = np.random.default_rng(seed)
    paths: list[tuple[str, list[tuple[int, int]]]] = []
    rows = rng.permutation(np.arange(1, grid - 1))
    cols = rng.permutation(np.arange(1, grid - 1))
    for k in range(n_metro):
        if k % 2 == 0:
            r = int(rows[(k // 2) % len(rows)])
            paths.append(("metro", [(c, r) for c in range(grid)]))
        else:
            c = int(cols[(k // 2) % len(cols)])
            paths.append(("metro", [(c, r) for r in range(grid)]))
    paths.extend(("bus", _bus_path(rng, grid)) for _ in range(n_bus))
    # a bus line that crosses no other line would be an island no route can leave (issue: sample_od drew a pair
    # that route() could not connect); redraw the lines outside the first line's component, with a bound
    for _ in range(1000):
        stray = _stray_lines([p for _, p in paths])
        if not stray:
            break
        for i in stray:
            paths[i] = ("bus", _bus_path(rng, grid))
    else:  # pragma: no cover - a metro line exists or the bus lines meet long before this
        raise ValueError(f"make_city could not connect {n_bus} bus line(s) to the network on a {grid}x{grid} grid")
    nodes = sorted({n for _, p in paths for n in p}, key=lambda n: (n[1], n[0]))
    ids = {n: f"S{i:03d}" for i, n in enumerate(nodes)}
    city = City({}, {}, {}, size_km=(grid - 1) * spacing_km + 2.0)
    jitter = rng.uniform(-0.15, 0.15, size=(len(nodes), 2)) * spacing_km
    for (n, sid), (jx, jy) in zip(ids.items(), jitter, strict=True):
        city.stations[sid] = city.from_xy(1.0 + n[0] * spacing_km + jx, 1.0 + n[1] * spacing_km + jy)
    m = b = 0
    for kind, p in paths:
        stops = [ids[n] for n in p]
        if kind == "metro":
            m += 1
            name = f"M{m}"
        else:
            b += 1
            name = f"B{b}"
        city.lines[name], city.kind[name] = stops, kind
    return City(city.stations, city.lines, city.kind, city.size_km)


def nearest_station(city: City, p: tuple[float, float]) -> tuple[str, float]:
    """The station nearest to ``p`` and its distance (km)."""
    _city(city)
    p = _point("p", p)
    return min(((s, haversine(p, q)) for s, q in city.stations.items()), key=lambda t: t[1])


def sample_od(city: City, n: int, seed: int, min_km: float = 3.0) -> list[tuple[tuple[float, float], ...]]:
    """``n`` origin/destination pairs, uniform in the city, each within cycling range of a station.

    Rejection sampling with a bound: ValueError if ``1000 * n + 10000`` draws do not give ``n`` pairs (``min_km``
    too large for the city)."""
    _city(city)
    n, seed = V.integer("n", n, min=0), V.seed("seed", seed)
    min_km = V.nonnegative("min_km", min_km)
    diag = math.sqrt(2) * city.size_km
    if n and min_km > diag:
        raise ValueError(f"min_km must be at most the city's diagonal ({diag:.1f} km), got {min_km}")
    rng = np.random.default_rng(seed)
    out: list[tuple[tuple[float, float], ...]] = []
    tries = 1000 * n + 10000
    while len(out) < n:
        tries -= 1
        if tries < 0:
            raise ValueError(f"sample_od found only {len(out)} of n={n} pairs at least min_km={min_km} km apart "
                             f"near stations after {1000 * n + 10000} draws; lower min_km")
        o, d = (city.from_xy(*rng.uniform(0, city.size_km, 2)) for _ in range(2))
        if haversine(o, d) >= min_km and nearest_station(city, o)[1] <= BIKE_MAX \
                and nearest_station(city, d)[1] <= BIKE_MAX:
            out.append((o, d))
    return out


# --------------------------------------------------------------------------------------------- the engine
def _access(d: float) -> tuple[str, float] | None:
    """Access mode and minutes for a straight-line distance, or None if out of range."""
    if d <= WALK_MAX:
        return WALK, d * DETOUR / WALK_KMH * 60
    if d <= BIKE_MAX:
        return BIKE, d * DETOUR / BIKE_KMH * 60
    return None


def _ride(city: City, a: str, b: str, line: str) -> tuple[float, float]:
    km = haversine(city.stations[a], city.stations[b])
    return km, km / SPEED[city.kind[line]] * 60 + DWELL


def state_graph(city: City, o: tuple[float, float], d: tuple[float, float], pref: int = 0,
                penalty: dict[str, float] | None = None) -> nx.DiGraph:
    """The (station, line) state graph from origin "O" to destination "D"; edge attribute ``w`` is the score
    (expert score T_sec/300 + lines + cycling legs + fare, re-weighted by the preference), plus minutes,
    kilometres, fare and boardings for the label."""
    _city(city)
    o, d, pref = _point("o", o), _point("d", d), _pref(pref)
    if penalty is not None:
        V.instance("penalty", penalty, dict)
        penalty = {k: V.number(f"penalty[{k!r}]", v) for k, v in penalty.items()}
    penalty = penalty or {}
    G = nx.DiGraph()

    def w(minutes: float, lines: int, bikes: int, fare: float, kind: str | None = None) -> float:
        if pref == 8:
            return minutes
        s = minutes * 60 / 300 + lines + bikes + fare
        if pref == 2:
            s += 10 * lines
        if pref == 7 and kind == "bus":
            s += 10
        return s

    for s, p in city.stations.items():  # access: origin -> station, by walking or cycling
        km = haversine(p, o)
        acc = _access(km)
        if acc is not None:
            mode, mins = acc
            G.add_edge("O", ("in", s), w=w(mins, 0, mode == BIKE, 0), t=mins, km=km, fare=0.0, mode=mode)
    for line, stops in city.lines.items():
        kind = city.kind[line]
        if pref == 5 and kind == "metro":
            continue
        for s in stops:
            mins = HEADWAY[kind] / 2
            G.add_edge(("in", s), ("on", s, line), t=mins, km=0.0, fare=BASE_FARE[kind],
                       w=w(mins, 1, 0, BASE_FARE[kind], kind) + penalty.get(line, 0.0))
            G.add_edge(("on", s, line), ("in", s), t=TRANSFER_MIN, km=0.0, fare=0.0, w=w(TRANSFER_MIN, 0, 0, 0))
            acc = _access(haversine(city.stations[s], d))
            if acc is not None:
                mode, am = acc
                G.add_edge(("on", s, line), "D", t=am, km=haversine(city.stations[s], d), fare=0.0, mode=mode,
                           w=w(am, 0, mode == BIKE, 0))
        for seq in (stops, stops[::-1]):
            for a, b in itertools.pairwise(seq):
                km, mins = _ride(city, a, b, line)
                G.add_edge(("on", a, line), ("on", b, line), t=mins, km=km, fare=KM_FARE[kind] * km,
                           w=w(mins, 0, 0, KM_FARE[kind] * km))
    return G


def route_cost(G: nx.DiGraph, path: list) -> float:
    """Sum of edge scores along a state path."""
    V.instance("G", G, nx.DiGraph)
    path = V.sequence("path", path)
    missing = [(u, v) for u, v in itertools.pairwise(path) if not G.has_edge(u, v)]
    if missing:
        raise ValueError(f"path must follow edges of G, but {missing[0]} is not an edge")
    return float(sum(G.edges[u, v]["w"] for u, v in itertools.pairwise(path)))


def brute_force_cost(G: nx.DiGraph) -> float:
    """Minimum score over every simple O->D path (exponential: tiny cities only)."""
    V.instance("G", G, nx.DiGraph)
    return min((route_cost(G, p) for p in nx.all_simple_paths(G, "O", "D")), default=math.inf)


def format_distance(km: float) -> str:
    """Paper style: "344米" under 1 km, else "27.8公里"."""
    km = V.nonnegative("km", km)
    return f"{round(km * 1000)}米" if km < 1 else f"{km:.1f}公里"


def format_time(minutes: float) -> str:
    """Paper style: "1小时7分钟" or "37分钟"."""
    minutes = V.nonnegative("minutes", minutes)
    m = max(1, round(minutes))
    return f"{m // 60}小时{m % 60}分钟" if m >= 60 else f"{m}分钟"


def parse_distance(s: str) -> float:
    """"344米" -> 0.344, "27.8公里" -> 27.8 (km); "" -> 0."""
    if not isinstance(s, str):
        raise TypeError(f"s (a distance) must be a str, got {type(s).__name__}")
    if s == "":
        return 0.0
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(米|公里)", s.strip())
    if not m:
        raise ValueError(f"s must be a distance like '344米' or '27.8公里', got {s!r}")
    return float(m[1]) / (1000 if m[2] == "米" else 1)


def parse_time(s: str) -> float:
    """"1小时7分钟" -> 67, "37分钟" -> 37 (minutes)."""
    if not isinstance(s, str):
        raise TypeError(f"s (a time) must be a str, got {type(s).__name__}")
    m = re.fullmatch(r"(?:(\d+)小时)?(?:(\d+)分钟)?", s.strip())
    if not m or not s.strip():
        raise ValueError(f"s must be a time like '1小时7分钟' or '37分钟', got {s!r}")
    return 60 * float(m[1] or 0) + float(m[2] or 0)


def _label(city: City, G: nx.DiGraph, path: list) -> dict[str, Any]:
    legs: list[tuple[str, list[str]]] = []
    for prev, node in itertools.pairwise(path[:-1]):
        if node[0] != "on":
            continue
        if prev[0] == "in":  # boarding starts a new leg
            legs.append((node[2], [node[1]]))
        else:  # riding on
            legs[-1][1].append(node[1])
    edges = [G.edges[u, v] for u, v in itertools.pairwise(path)]
    stations: list[str] = []
    for i, (_, stops) in enumerate(legs):
        stations += ([TRANSFER] if i else []) + stops
    first, last = edges[0], edges[-1]
    return {
        "line_sequence": [name for name, _ in legs],
        "station_sequence": stations,
        "total_distance": format_distance(sum(e["km"] for e in edges)),
        "total_time": format_time(sum(e["t"] for e in edges)),
        "total_fare": f"{sum(e['fare'] for e in edges):.0f}",
        "start_transfer_mode": first["mode"],
        "end_transfer_mode": last["mode"],
        "start_transfer_distance": format_distance(first["km"]),
        "end_transfer_distance": format_distance(last["km"]),
    }


def _dijkstra(G: nx.DiGraph) -> tuple[float, list]:
    return nx.single_source_dijkstra(G, "O", "D", weight="w")


def route(city: City, o: tuple[float, float], d: tuple[float, float], pref: int = 0) -> dict[str, Any] | None:
    """The engine's best route as a TransitLM label (None if unreachable); ``pref`` is the paper's req_type."""
    G = state_graph(city, o, d, pref)
    try:
        _, path = _dijkstra(G)
    except (nx.NetworkXNoPath, nx.NodeNotFound):
        return None
    return _label(city, G, path)


def diverse_routes(city: City, o: tuple[float, float], d: tuple[float, float], k: int = 3,
                   penalty: float = 5.0) -> dict[str, dict[str, Any]]:
    """Task 3: ``k`` routes, each re-planned with a score penalty on every line used so far."""
    _city(city)
    o, d = _point("o", o), _point("d", d)
    k, penalty = V.integer("k", k, min=0, max=3), V.nonnegative("penalty", penalty)
    used: dict[str, float] = {}
    out: dict[str, dict[str, Any]] = {}
    for name in ("first", "second", "third")[:k]:
        G = state_graph(city, o, d, 0, used)
        try:
            _, path = _dijkstra(G)
        except (nx.NetworkXNoPath, nx.NodeNotFound):
            break
        lab = _label(city, G, path)
        out[name] = lab
        for line in lab["line_sequence"]:
            used[line] = used.get(line, 0.0) + penalty
    return out


# --------------------------------------------------------------------------------------------- the funnel
_KEYS = ("line_sequence", "station_sequence", "total_distance", "total_time", "total_fare", "start_transfer_mode",
         "end_transfer_mode", "start_transfer_distance", "end_transfer_distance")


def _well_formed(r: Any) -> bool:
    return isinstance(r, dict) and all(k in r for k in _KEYS) and isinstance(r["station_sequence"], list) \
        and isinstance(r["line_sequence"], list) and len(r["station_sequence"]) > 0


def reachable(city: City, r: Any) -> bool:
    """R1: after removing transfer markers, every next station is in the previous one's next-hop set."""
    _city(city)
    if not _well_formed(r):
        return False
    seq = [s for s in r["station_sequence"] if s != TRANSFER]
    if not seq or any(s not in city.stations for s in seq):
        return False
    return all(b in city.next_hop[a] for a, b in itertools.pairwise(seq))


def _plausible(stated: str, geo: float) -> bool:
    try:
        dist = parse_distance(stated)
    except (ValueError, TypeError):
        return False
    return dist <= 0 or geo - 0.5 <= dist <= 3 * geo + 0.5


def grounded(city: City, r: Any, o: tuple[float, float], d: tuple[float, float]) -> bool:
    """R2: first/last station within the access mode's threshold of origin/destination, stated distances plausible."""
    _city(city)
    o, d = _point("o", o), _point("d", d)
    if not _well_formed(r):
        return False
    seq = [s for s in r["station_sequence"] if s != TRANSFER]
    if not seq or seq[0] not in city.stations or seq[-1] not in city.stations:
        return False
    for s, p, mode_key, dist_key in ((seq[0], o, "start_transfer_mode", "start_transfer_distance"),
                                     (seq[-1], d, "end_transfer_mode", "end_transfer_distance")):
        geo = haversine(city.stations[s], p)
        if geo > GROUND_MAX.get(r[mode_key], 10.0) or not _plausible(r[dist_key], geo):
            return False
    return True


def iou(a: Any, b: Any) -> float:
    """|A ∩ B| / |A ∪ B| of two collections as sets (1 for two empty sets)."""
    for name, x in (("a", a), ("b", b)):
        if isinstance(x, (str, bytes)) or not hasattr(x, "__iter__"):
            raise TypeError(f"{name} must be a collection (list, tuple or set), got {V.describe(x)}")
    A, B = set(a), set(b)
    return 1.0 if not A | B else len(A & B) / len(A | B)


def _close(p: float, t: float, rel: float, tol: float) -> bool:
    return abs(p - t) <= tol or (t != 0 and abs(p - t) / abs(t) <= rel + 1e-12)


def evaluate(city: City, pred: Any, label: dict, o: tuple[float, float], d: tuple[float, float]) -> dict[str, Any]:
    """The funnel for one prediction: r1, r2, line/station IoU, exact, and R4 estimates (on exact routes only).
    A malformed prediction (not a dict, missing fields, unparsable numbers) fails every metric; it never raises."""
    _city(city)
    o, d = _point("o", o), _point("d", d)
    if not _well_formed(label):
        raise ValueError(f"label must be a well-formed TransitLM record (a dict with keys {_KEYS}), "
                         f"got {V.describe(label)}")
    out = dict(r1=False, r2=False, line_iou=0.0, station_iou=0.0, exact=False, distance_ok=False, time_ok=False,
               fare_ok=False, overall=False, access_ok=False)
    if not _well_formed(pred):
        return out
    strip = lambda r: [s for s in r["station_sequence"] if s != TRANSFER]  # noqa: E731
    out["r1"] = reachable(city, pred)
    out["r2"] = grounded(city, pred, o, d)
    out["line_iou"] = iou(pred["line_sequence"], label["line_sequence"])
    out["station_iou"] = iou(strip(pred), strip(label))
    out["exact"] = out["station_iou"] == 1.0 and pred["start_transfer_mode"] == label["start_transfer_mode"] \
        and pred["end_transfer_mode"] == label["end_transfer_mode"]
    if out["exact"]:
        try:
            out["distance_ok"] = _close(parse_distance(pred["total_distance"]), parse_distance(label["total_distance"]),
                                        0.10, 0.5)
            out["time_ok"] = _close(parse_time(pred["total_time"]), parse_time(label["total_time"]), 0.10, 5.0)
            out["fare_ok"] = _close(float(pred["total_fare"]), float(label["total_fare"]), 0.10, 1.0)
            out["access_ok"] = all(
                abs(parse_distance(pred[k]) - parse_distance(label[k])) <= 0.5
                for k in ("start_transfer_distance", "end_transfer_distance"))
        except (ValueError, TypeError):
            pass
        out["overall"] = out["distance_ok"] and out["time_ok"] and out["fare_ok"]
    return out


def _is_metro(line: str, city: City | None) -> bool:
    if city is not None and line in city.kind:
        return city.kind[line] == "metro"
    return "地铁" in line or "号线" in line or line.startswith("M")


def preference_ok(pred: Any, label: dict, pref: int, city: City | None = None) -> bool:
    """R5: type 2 no more transfers than the label; 5 no subway; 7 some subway; 8 time <= 1.1 x label's."""
    pref = _pref(pref)
    V.optional(V.instance, "city", city, City)
    if not _well_formed(label):
        raise ValueError(f"label must be a well-formed TransitLM record, got {V.describe(label)}")
    if not _well_formed(pred):
        return False
    lines = pred["line_sequence"]
    if pref == 0:
        return True
    if pref == 2:
        return len(lines) - 1 <= len(label["line_sequence"]) - 1
    if pref == 5:
        return not any(_is_metro(x, city) for x in lines)
    if pref == 7:
        return any(_is_metro(x, city) for x in lines)
    try:
        return parse_time(pred["total_time"]) <= 1.1 * parse_time(label["total_time"])
    except (ValueError, TypeError):
        return False


def route_diversity(routes: list[dict]) -> float:
    """B3 RD: mean over route pairs of 1 - IoU of line sets, access modes included as "接驳:<mode>" items."""
    routes = V.sequence("routes", routes)
    if len(routes) < 2:
        raise ValueError(f"routes must hold at least two routes for a diversity, got {len(routes)}")
    if not all(_well_formed(r) for r in routes):
        raise ValueError("routes must all be well-formed TransitLM records")
    items = [set(r["line_sequence"]) | {f"接驳:{r['start_transfer_mode']}", f"接驳:{r['end_transfer_mode']}"}
             for r in routes]
    return float(np.mean([1 - iou(a, b) for a, b in itertools.combinations(items, 2)]))


# --------------------------------------------------------------------------------------------- the tokenizer
_FIELDS = ["<start_mode>", "<start_dist>", "<lines>", "<stations>", "<dist>", "<time>", "<fare>", "<end_mode>",
           "<end_dist>"]
_FIELD_KEYS = ["start_transfer_mode", "start_transfer_distance", "line_sequence", "station_sequence",
               "total_distance", "total_time", "total_fare", "end_transfer_mode", "end_transfer_distance"]
_UNITS = ["米", "公里", "小时", "分钟"]
_NUM = re.compile(r"\d|\.|米|公里|小时|分钟")


class Tokenizer:
    """Special, field, station, line, mode, unit and digit tokens. Numbers are written digit by digit; coordinates
    are 100 m grid offsets from the city's south-west corner, three digits per axis."""

    PAD, BOS, EOS, SEP = "<pad>", "<bos>", "<eos>", "<sep>"

    def __init__(self, city: City) -> None:
        _city(city)
        self.city = city
        vocab = [self.PAD, self.BOS, self.EOS, self.SEP, "<O>", "<D>", "<line>"] + [f"<req{p}>" for p in PREFS]
        vocab += _FIELDS + [TRANSFER, WALK, BIKE] + _UNITS + list("0123456789.")
        vocab += sorted(city.stations) + sorted(city.lines)
        self.itos = vocab
        self.stoi = {t: i for i, t in enumerate(vocab)}
        self.pad_id, self.eos_id = self.stoi[self.PAD], self.stoi[self.EOS]

    def __len__(self) -> int:
        return len(self.itos)

    def _num(self, s: str) -> list[str]:
        toks = _NUM.findall(s)
        if "".join(toks) != s:
            raise ValueError(f"cannot tokenize number field {s!r}")
        return toks

    def _coord(self, p: tuple[float, float]) -> list[str]:
        x, y = self.city.to_xy(p)
        gx, gy = (min(999, max(0, round(v * 10))) for v in (x, y))
        return list(f"{gx:03d}") + list(f"{gy:03d}")

    def prompt(self, o: tuple[float, float], d: tuple[float, float], pref: int = 0) -> list[int]:
        """<bos> <reqK> <O> xxx yyy <D> xxx yyy <sep>."""
        o, d, pref = _point("o", o), _point("d", d), _pref(pref)
        toks = [self.BOS, f"<req{pref}>", "<O>", *self._coord(o), "<D>", *self._coord(d), self.SEP]
        return [self.stoi[t] for t in toks]

    def encode_label(self, r: dict) -> list[int]:
        """A TransitLM record -> token ids, ending in <eos>."""
        if not _well_formed(r):
            raise ValueError(f"r must be a well-formed TransitLM record, got {V.describe(r)}")
        toks: list[str] = []
        for f, k in zip(_FIELDS, _FIELD_KEYS, strict=True):
            toks.append(f)
            v = r[k]
            if k in ("line_sequence", "station_sequence"):
                toks += list(v)
            elif k.endswith("mode"):
                toks += [v] if v else []
            else:
                toks += self._num(str(v))
        toks.append(self.EOS)
        try:
            return [self.stoi[t] for t in toks]
        except KeyError as e:
            raise ValueError(f"unknown token {e.args[0]!r}") from None

    def encode_line(self, line: str, reverse: bool = False) -> list[int]:
        """CPT itinerary text: <bos> <line> NAME s1 s2 ... <eos>."""
        V.instance("line", line, str)
        V.boolean("reverse", reverse)
        if line not in self.city.lines:
            raise ValueError(f"line must be one of the city's lines {sorted(self.city.lines)}, got {line!r}")
        stops = self.city.lines[line][::-1] if reverse else self.city.lines[line]
        return [self.stoi[t] for t in [self.BOS, "<line>", line, *stops, self.EOS]]

    def decode_label(self, ids: list[int]) -> dict[str, Any]:
        """Token ids (from the first field token; stops at <eos>) -> record; ValueError if malformed."""
        ids = V.sequence("ids", ids, of=V.integer)
        toks = [self.itos[i] if 0 <= i < len(self.itos) else "?" for i in ids]
        if self.EOS in toks:
            toks = toks[:toks.index(self.EOS)]
        pos = [toks.index(f) if f in toks else -1 for f in _FIELDS]
        if any(p < 0 for p in pos) or pos != sorted(pos):
            raise ValueError("fields missing or out of order")
        r: dict[str, Any] = {}
        for i, k in enumerate(_FIELD_KEYS):
            seg = toks[pos[i] + 1: pos[i + 1] if i + 1 < len(pos) else len(toks)]
            if k == "line_sequence":
                if any(t not in self.city.lines for t in seg):
                    raise ValueError("non-line token in line_sequence")
                r[k] = seg
            elif k == "station_sequence":
                if any(t not in self.city.stations and t != TRANSFER for t in seg):
                    raise ValueError("non-station token in station_sequence")
                r[k] = seg
            elif k.endswith("mode"):
                if len(seg) > 1 or any(t not in (WALK, BIKE) for t in seg):
                    raise ValueError(f"bad {k}")
                r[k] = seg[0] if seg else ""
            else:
                if any(not _NUM.fullmatch(t) for t in seg):
                    raise ValueError(f"bad number in {k}")
                r[k] = "".join(seg)
        return r

