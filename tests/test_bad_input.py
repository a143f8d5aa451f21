"""Bad input at the door of public functions (issue 46): a clear ValueError/TypeError naming the argument, no hang.

Each module has a table of valid calls of its public functions (tiny sizes). For every argument of every call, the
exhaustive test replaces that one argument with bad values of the kinds that fit its valid value (None, a string,
bool for an int, a float for an int, negative, zero, NaN, inf, an empty array, a wrong ndim) and asserts a
ValueError/TypeError whose message names the argument, under a per-call time limit (SIGALRM) so a hang fails.
A hypothesis test then draws random bad numbers (random negative values, NaN/inf at random array positions).

``skip`` in a case lists kinds that are legitimately valid for an argument (with the reason next to it); ``more``
adds kinds (``"zero"``, ``"neg"`` for floats) or explicit bad values.
"""

from __future__ import annotations

import math
import signal
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import epistemic_independence as epi
from helpers import flow_vq as fvq
from helpers import nn as hnn
from helpers import space_time_operators as sto
from helpers import train
from helpers import transit_lm as tlm
from helpers import tree_search_predictions as tsp

LIMIT_S = 5  # a call that runs longer than this with one bad argument counts as a hang
# lazy imports that take seconds on a loaded machine happen here, outside the time limits
torch.optim.AdamW(torch.nn.Linear(1, 1).parameters()).step()
import sklearn.cluster  # noqa: E402, F401  (kmeans_codes)


class Hang(Exception):
    pass


@contextmanager
def time_limit(seconds: float = LIMIT_S):
    def handler(signum, frame):
        raise Hang(f"call still running after {seconds} s")

    old = signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@dataclass
class Case:
    """``fn(**kwargs())`` is a valid call; ``skip[arg]``: kinds valid for that argument; ``more[arg]``: extras."""

    name: str
    fn: Callable[..., Any]
    kwargs: Callable[[], dict[str, Any]]
    skip: dict[str, set[str]] = field(default_factory=dict)
    more: dict[str, list[Any]] = field(default_factory=dict)
    only: tuple[str, ...] | None = None  # arguments to vary (default: all)


def _kinds(v: Any) -> dict[str, Any]:
    """Bad values of the kinds that fit the valid value ``v``."""
    if isinstance(v, bool):
        return {"none": None, "str": "yes"}
    if isinstance(v, (int, np.integer)):
        return {"none": None, "str": "3", "bool": True, "float": 2.5, "nan": math.nan, "neg": -1}
    if isinstance(v, float):
        return {"none": None, "str": "1.0", "bool": True, "nan": math.nan, "inf": math.inf}
    if isinstance(v, str):
        return {"none": None, "int": 3, "unknown": "no-such-choice"}
    if isinstance(v, torch.Tensor):
        out: dict[str, Any] = {"none": None, "str": "x", "empty": v.reshape(-1)[:0], "ndim": v[None]}
        if v.dtype.is_floating_point and v.numel():
            w = v.clone(memory_format=torch.contiguous_format)
            w.view(-1)[0] = math.nan
            out["nan"] = w
        return out
    if isinstance(v, np.ndarray):
        out = {"none": None, "str": "x", "empty": v.reshape(-1)[:0], "ndim": v[None]}
        if v.dtype.kind == "f" and v.size:
            w = v.copy()
            w.flat[0] = np.nan
            out["nan"] = w
        return out
    if isinstance(v, (list, tuple)):
        return {"none": None, "str": "x"}
    return {"none": None, "str": "x"}


def _extra(kind: Any, v: Any) -> tuple[str, Any]:
    if isinstance(kind, str) and kind == "zero":
        return "zero", type(v)(0) if not isinstance(v, (torch.Tensor, np.ndarray)) else v * 0
    if isinstance(kind, str) and kind == "neg":
        return "neg", -abs(v) - 1 if not isinstance(v, (torch.Tensor, np.ndarray)) else -abs(v) - 1
    return f"value {kind!r}"[:40], kind


CASES: list[Case] = []


def case(name: str, fn: Callable[..., Any], kwargs: Callable[[], dict[str, Any]], **kw: Any) -> None:
    CASES.append(Case(name, fn, kwargs, **kw))


def bad_calls() -> list[tuple[Case, str, str, Any]]:
    out = []
    for c in CASES:
        for arg, v in c.kwargs().items():
            if c.only is not None and arg not in c.only:
                continue
            kinds = {k: b for k, b in _kinds(v).items() if k not in c.skip.get(arg, set())}
            for extra in c.more.get(arg, []):
                k, b = _extra(extra, v)
                kinds[k] = b
            out.extend((c, arg, k, b) for k, b in kinds.items())
    return out


def _call_bad(c: Case, arg: str, bad: Any) -> BaseException:
    kw = c.kwargs()
    kw[arg] = bad
    with time_limit():
        try:
            c.fn(**kw)
        except (ValueError, TypeError) as e:
            return e
    raise AssertionError(f"{c.name}: {arg}={bad!r:.60} was accepted")


# ---------------------------------------------------------------------------------------------------------- nn
def _tiny_cfg(**kw: Any) -> hnn.TransformerConfig:
    return hnn.TransformerConfig(**{**dict(vocab_size=7, n_layer=1, n_head=2, d_model=8, max_len=16), **kw})


_MODEL = hnn.Transformer(_tiny_cfg())
_CFG_KW = dict(vocab_size=7, n_layer=1, n_head=2, d_model=8, max_len=16, pos="rope", rope_base=100.0, d_ff=16,
               dropout=0.0, bias=True, tie_weights=True)

case("nn.causal_mask", hnn.causal_mask, lambda: dict(T=4), more={"T": ["zero"]})
case("nn.sinusoidal_table", hnn.sinusoidal_table, lambda: dict(pos=torch.arange(4), d_model=8, base=100.0),
     skip={"pos": {"empty", "ndim"}},  # pos is (..., T): any rank, and no positions gives an empty table
     more={"d_model": ["zero", 7], "base": ["neg", 1.0]})
case("nn.RotaryEmbedding", hnn.RotaryEmbedding, lambda: dict(head_dim=4, base=100.0),
     more={"head_dim": ["zero", 3], "base": ["neg", 1.0]})
case("nn.apply_rotary", hnn.apply_rotary, lambda: dict(x=torch.zeros(1, 1, 3, 4), angles=torch.zeros(3, 2)),
     only=("x", "angles"), skip={"x": {"empty", "nan", "ndim"}, "angles": {"empty", "nan", "ndim"}})
# (apply_rotary is a building block called inside every forward: NaN passes through like any tensor op)
case("nn.TransformerConfig", hnn.TransformerConfig, lambda: dict(_CFG_KW),
     skip={"d_ff": {"none"}}, more={"vocab_size": ["zero"], "n_head": [3], "pos": [], "dropout": [1.0, -0.1]})
case("nn.Attention", hnn.Attention, lambda: dict(d_model=8, n_head=2, dropout=0.0), more={"n_head": [3, "zero"]})
case("nn.MLP", hnn.MLP, lambda: dict(d_model=8, d_ff=16, dropout=0.0), more={"d_ff": ["zero"]})
case("nn.Block", hnn.Block, lambda: dict(cfg=_tiny_cfg()))
case("nn.Transformer", hnn.Transformer, lambda: dict(cfg=_tiny_cfg()))
case("nn.Transformer.forward", _MODEL.forward,
     lambda: dict(idx=torch.tensor([[1, 2, 3]]), mask=hnn.causal_mask(3), pos=torch.arange(3)),
     skip={"mask": {"none", "ndim"}, "pos": {"none", "ndim"}},  # None: the default causal mask / 0..T-1
     # (ndim: a batch axis in front, (B, T, T) masks and (B, T) positions, is valid)
     more={"idx": [torch.tensor([[1, 7]]), torch.tensor([[-1, 2]]), torch.tensor([[1.0, 2.0]])],
           "mask": [torch.zeros(3, 3, dtype=torch.bool), torch.ones(3, 3)]})
case("nn.Transformer.generate", _MODEL.generate,
     lambda: dict(idx=torch.tensor([[1, 2]]), n_new=2, greedy=False, temperature=1.0),
     skip={"n_new": set()}, more={"temperature": ["zero", "neg"], "idx": [torch.tensor([[9]])]})

# -------------------------------------------------------------------------------------------------------- train


def _lin() -> torch.nn.Module:
    return torch.nn.Linear(2, 1)


def _loss(model, batch):
    return (model(batch) ** 2).mean()


_FIT = dict(model=None, loss_fn=_loss, batches=[torch.ones(3, 2)], steps=2, lr=1e-2, weight_decay=0.0, warmup=1,
            schedule="cosine", grad_clip=1.0, seed=0, eval_fn=lambda m: {"a": 1.0}, eval_every=1, progress=False,
            desc="t")
case("train.fit", train.fit, lambda: {**_FIT, "model": _lin()}, only=tuple(k for k in _FIT if k != "desc"),
     skip={"grad_clip": {"none"}, "seed": {"none"}, "eval_fn": {"none"},  # None: no clipping / seeding / eval
           "batches": {"str"}},  # a string is an iterable of batches; the loss function decides
     more={"batches": [[], 3], "lr": ["zero", "neg"], "weight_decay": ["neg"], "grad_clip": ["zero", "neg"],
           "eval_fn": [3], "loss_fn": [3], "model": [3]})  # desc: any string is a valid label
case("train.fit(desc)", train.fit, lambda: {**_FIT, "model": _lin()}, only=("desc",), skip={"desc": {"unknown"}})
case("train.lr_at", train.lr_at, lambda: dict(step=1, steps=10, lr=0.1, warmup=2, schedule="cosine", min_ratio=0.1),
     more={"lr": ["neg"], "min_ratio": ["neg", 1.5]})
case("train.History.smoothed", train.History(loss=[1.0, 2.0]).smoothed, lambda: dict(window=2),
     more={"window": ["zero"]})


# --------------------------------------------------------------------------------------------------- transit_lm
_CITY = tlm.make_city(0, grid=4, n_metro=2, n_bus=1)
_O, _D = (tuple(float(v) for v in p) for p in tlm.sample_od(_CITY, 1, seed=0, min_km=1.0)[0])
_LAB = tlm.route(_CITY, _O, _D)
_TOK = tlm.Tokenizer(_CITY)
_PT = {"none", "str"}  # points are (lat, lon) tuples: their kinds are given explicitly
_BADPT = [(math.nan, 121.0), (31.0, math.inf), (91.0, 0.0), (31.0,), "x", None]

case("transit_lm.haversine", tlm.haversine, lambda: dict(a=_O, b=_D), more={"a": _BADPT, "b": _BADPT})
case("transit_lm.make_city", tlm.make_city, lambda: dict(seed=0, grid=3, spacing_km=1.0, n_metro=1, n_bus=1),
     more={"grid": [2], "spacing_km": ["zero", "neg", 1e308], "n_metro": ["zero"]})  # a city needs a metro line
case("transit_lm.City", tlm.City, lambda: dict(stations=dict(_CITY.stations), lines=dict(_CITY.lines),
                                                kind=dict(_CITY.kind), size_km=_CITY.size_km),
     more={"size_km": ["zero", "neg"], "kind": [{"M1": "tram"}], "lines": [{"M1": ["S000"]}],
           "stations": [{"S000": (math.nan, 0.0)}]})
case("transit_lm.nearest_station", tlm.nearest_station, lambda: dict(city=_CITY, p=_O), more={"p": _BADPT})
case("transit_lm.sample_od", tlm.sample_od, lambda: dict(city=_CITY, n=2, seed=0, min_km=1.0),
     more={"min_km": ["neg", 1000.0, 9.5]})  # 9.5 km: below the diagonal but (almost) never drawn: bounded loop
case("transit_lm.state_graph", tlm.state_graph, lambda: dict(city=_CITY, o=_O, d=_D, pref=0, penalty={"M1": 1.0}),
     skip={"penalty": {"none"}, "pref": {"neg"}},  # None: no penalty
     more={"o": _BADPT, "d": _BADPT, "pref": [3, False],
           "penalty": [{"M1": math.nan}, {"M1": -100.0}, {"M1": 1e308}, [1.0]]})  # negative: a hang (#58)
case("transit_lm.shortest_path", tlm.shortest_path,
     lambda: dict(city=_CITY, o=_O, d=_D, pref=0, penalty={"M1": 1.0}),
     skip={"penalty": {"none"}, "pref": {"neg"}},  # None: no penalty
     more={"o": _BADPT, "d": _BADPT, "pref": [3],
           "penalty": [{"M1": math.nan}, {"M1": -100.0}, {"B1": -0.5}, {"M1": 1e308}]})  # negative: a hang (#58)
case("transit_lm.route", tlm.route, lambda: dict(city=_CITY, o=_O, d=_D, pref=0), more={"o": _BADPT, "pref": [1]})
case("transit_lm.diverse_routes", tlm.diverse_routes, lambda: dict(city=_CITY, o=_O, d=_D, k=2, penalty=5.0),
     more={"k": [4], "penalty": ["neg"], "d": _BADPT})
case("transit_lm.format_distance", tlm.format_distance, lambda: dict(km=1.5), more={"km": ["neg"]})
case("transit_lm.format_time", tlm.format_time, lambda: dict(minutes=12.0), more={"minutes": ["neg"]})
case("transit_lm.parse_distance", tlm.parse_distance, lambda: dict(s="1.5公里"), more={"s": ["1.5 km", ""[:0] + "x"]})
case("transit_lm.parse_time", tlm.parse_time, lambda: dict(s="37分钟"), more={"s": [""]})
case("transit_lm.grounded", tlm.grounded, lambda: dict(city=_CITY, r=_LAB, o=_O, d=_D),
     only=("city", "o", "d"), more={"o": _BADPT})  # r: anything; a malformed record is simply not grounded
case("transit_lm.route_minutes", tlm.route_minutes, lambda: dict(city=_CITY, r=_LAB, o=_O, d=_D),
     only=("city", "o", "d"), more={"o": _BADPT, "d": _BADPT})  # r: anything; a malformed record gives None
case("transit_lm.evaluate", tlm.evaluate, lambda: dict(city=_CITY, pred=_LAB, label=_LAB, o=_O, d=_D),
     only=("city", "label", "o", "d"), more={"label": [{}], "d": _BADPT})  # pred: anything, by design
case("transit_lm.iou", tlm.iou, lambda: dict(a=[1, 2], b=[2]), more={"a": [3]})
case("transit_lm.preference_ok", tlm.preference_ok, lambda: dict(pred=_LAB, label=_LAB, pref=2, city=_CITY),
     only=("label", "pref", "city"), skip={"city": {"none"}},  # city None: guess the kind from the line name
     more={"pref": [3], "label": [{}]})
case("transit_lm.route_diversity", tlm.route_diversity, lambda: dict(routes=[_LAB, _LAB]),
     more={"routes": [[_LAB], [_LAB, {}]]})
case("transit_lm.Tokenizer", tlm.Tokenizer, lambda: dict(city=_CITY))
case("transit_lm.Tokenizer.prompt", _TOK.prompt, lambda: dict(o=_O, d=_D, pref=5), more={"o": _BADPT, "pref": [1]})
case("transit_lm.Tokenizer.encode_label", _TOK.encode_label, lambda: dict(r=_LAB), more={"r": [{}]})
case("transit_lm.Tokenizer.encode_line", _TOK.encode_line, lambda: dict(line="M1", reverse=True))
case("transit_lm.Tokenizer.decode_label", _TOK.decode_label, lambda: dict(ids=_TOK.encode_label(_LAB)[:-1]),
     more={"ids": [[1.5], [True]]})


# -------------------------------------------------------------------------------------- tree_search_predictions
_T5 = tsp.path_tree(5)
_DEC5, _CT5 = tsp.Decomposition(_T5), tsp.CentroidTree(_T5)
_VTX = [5, 2.0, np.float64(1.0)]  # out of range, and floats that look like vertices


def _bad_files() -> list[str]:
    import gzip
    import tempfile

    d = tempfile.mkdtemp()
    out = []
    for name, data in (("empty.txt", b""), ("bad.txt", b"3\n0 1\n1 x\n"), ("notgz.gz", b"3\n0 1\n1 2\n"),
                       ("cycle.txt", b"3\n0 1\n1 2\n2 0\n"), ("head.txt", b"three\n")):
        path = f"{d}/{name}"
        with open(path, "wb") as f:
            f.write(data)
        out.append(path)
    good = f"{d}/good.txt.gz"
    with gzip.open(good, "wt") as f:
        f.write("2\n0 1\n")
    return [good, *out, f"{d}/missing.txt", d]


_GOOD_EDGES, *_BAD_EDGE_FILES = _bad_files()
_DIR = _BAD_EDGE_FILES[-1]

case("tree_search_predictions.Tree", tsp.Tree, lambda: dict(n=3, edges=[(0, 1), (1, 2)], names=["a", "b", "c"]),
     skip={"names": {"none"}}, more={"n": ["zero"], "edges": [[(0, 1.5), (1, 2)], [(0,), (1, 2)], 3],
                                     "names": [["a"]]})
case("tree_search_predictions.Tree.from_networkx", tsp.Tree.from_networkx, lambda: dict(g=_T5.to_networkx()))
case("tree_search_predictions.Tree.next_hop", _T5.next_hop, lambda: dict(v=0, t=3), more={"v": _VTX, "t": _VTX + [0]})
case("tree_search_predictions.Tree.distances", _T5.distances, lambda: dict(source=1), more={"source": _VTX})
case("tree_search_predictions.Oracle", tsp.Oracle, lambda: dict(tree=_T5, target=3), more={"target": _VTX})
case("tree_search_predictions.Oracle.query", tsp.Oracle(_T5, 2).query, lambda: dict(v=1), more={"v": _VTX})
case("tree_search_predictions.query_bound", tsp.query_bound, lambda: dict(k=2, eta=3))
case("tree_search_predictions.pathwidth", tsp.pathwidth, lambda: dict(tree=_T5))
case("tree_search_predictions.pathwidth_bruteforce", tsp.pathwidth_bruteforce, lambda: dict(tree=_T5),
     more={"tree": [tsp.path_tree(17)]})
case("tree_search_predictions.spine", tsp.spine, lambda: dict(adj=_T5.adj, root=0),
     more={"root": [5], "adj": [[], [[1, 2], [0, 2], [0, 1]], [[1], [2], [0]], [[0]], [[1], [0, 2]], [[1.0], [0]],
                                [[1], "x"]]})  # a 3-cycle was a hang (#58); a directed cycle, a self-loop
case("tree_search_predictions.Decomposition", tsp.Decomposition, lambda: dict(tree=_T5))
case("tree_search_predictions.CentroidTree", tsp.CentroidTree, lambda: dict(tree=_T5))
case("tree_search_predictions.search_with_prediction", tsp.search_with_prediction,
     lambda: dict(tree=_T5, dec=_DEC5, oracle=tsp.Oracle(_T5, 4), prediction=1),
     more={"prediction": _VTX, "dec": [tsp.Decomposition(tsp.path_tree(5))]})
case("tree_search_predictions.centroid_search", tsp.centroid_search,
     lambda: dict(tree=_T5, ctree=_CT5, oracle=tsp.Oracle(_T5, 4)), more={"ctree": [tsp.CentroidTree(tsp.path_tree(5))]})
case("tree_search_predictions.walk_search", tsp.walk_search,
     lambda: dict(tree=_T5, oracle=tsp.Oracle(_T5, 4), prediction=1), more={"prediction": _VTX})
case("tree_search_predictions.doubling_search_path", tsp.doubling_search_path,
     lambda: dict(n=20, target=3, prediction=4), more={"n": ["zero"], "target": [20, 2.5], "prediction": [4.0, 20]})
case("tree_search_predictions.path_tree", tsp.path_tree, lambda: dict(n=3), more={"n": ["zero"]})
case("tree_search_predictions.star_tree", tsp.star_tree, lambda: dict(n=3), more={"n": ["zero"]})
case("tree_search_predictions.caterpillar_tree", tsp.caterpillar_tree, lambda: dict(spine_len=3, legs=1),
     more={"spine_len": ["zero"]})
case("tree_search_predictions.complete_tree", tsp.complete_tree, lambda: dict(arity=2, height=2),
     more={"arity": ["zero"], "height": [40]})
case("tree_search_predictions.random_tree", tsp.random_tree, lambda: dict(n=6, seed=1), more={"n": ["zero"]})
case("tree_search_predictions.ast_tree", tsp.ast_tree, lambda: dict(source="x = 1\n"), skip={"source": {"unknown"}},
     more={"source": ["def (:"]})  # "no-such-choice" is a valid Python expression
case("tree_search_predictions.directory_tree", tsp.directory_tree, lambda: dict(root=_DIR, skip=("x",)),
     skip={"root": {"unknown"}, "skip": {"str"}},  # handled below; a str is a sequence of 1-char names
     more={"root": ["/no/such/dir", __file__], "skip": [(3,)]})
case("tree_search_predictions.load_edges", tsp.load_edges, lambda: dict(path=_GOOD_EDGES),
     skip={"path": {"unknown"}}, more={"path": _BAD_EDGE_FILES})
case("tree_search_predictions.save_edges", tsp.save_edges, lambda: dict(tree=_T5, path=_GOOD_EDGES + ".out"),
     skip={"path": {"unknown", "str"}})  # any file name is valid


def test_load_edges_names_file_and_line() -> None:
    bad = next(p for p in _BAD_EDGE_FILES if p.endswith("bad.txt"))
    with pytest.raises(ValueError, match=r"bad\.txt': line 3 must be an edge 'a b'"):
        tsp.load_edges(bad)
    with pytest.raises(ValueError, match=r"notgz\.gz': cannot be read as gzip"):
        tsp.load_edges(next(p for p in _BAD_EDGE_FILES if p.endswith("notgz.gz")))


# ------------------------------------------------------------------------------------------------------ flow_vq
_VF = fvq.VelocityField(2, hidden=4, depth=1, t_freqs=1)
_Z = torch.randn(6, 2, generator=torch.Generator().manual_seed(0))
_C = fvq.prior_codes([2, 2])
_NOSTR = {"unknown"}

case("flow_vq.check_levels", fvq.check_levels, lambda: dict(levels=[2, 3]), more={"levels": [[], [1], [2.0]]})
case("flow_vq.split_levels", fvq.split_levels, lambda: dict(K=6, d=2), more={"K": [7], "d": ["zero"]})
case("flow_vq.gaussian_bin_edges", fvq.gaussian_bin_edges, lambda: dict(m=3), more={"m": [1]})
case("flow_vq.prior_codes", fvq.prior_codes, lambda: dict(levels=[2, 2]))
case("flow_vq.source_cells", fvq.source_cells, lambda: dict(z0=_Z, levels=[2, 2]), skip={"z0": {"empty"}})
case("flow_vq.VelocityField", fvq.VelocityField, lambda: dict(d=2, hidden=4, depth=1, t_freqs=1),
     more={"d": ["zero"]})
case("flow_vq.VelocityField.forward", _VF.forward, lambda: dict(z=_Z, t=0.5), skip={"z": {"empty", "nan"}},
     more={"z": [torch.zeros(3, 5)]})  # (NaN z flows through like any network input)
case("flow_vq.flow_matching_loss", fvq.flow_matching_loss, lambda: dict(v=_VF, z1=_Z), more={"v": [3]})
case("flow_vq.integrate", fvq.integrate, lambda: dict(v=_VF, z=_Z, t0=0.0, t1=1.0, steps=2, method="euler"),
     skip={"z": {"empty", "ndim"}}, more={"steps": ["zero"]})  # (ndim/empty: the velocity field decides)
case("flow_vq.nearest", fvq.nearest, lambda: dict(z=_Z, codes=_C, chunk=4),
     skip={"z": {"empty"}}, more={"chunk": ["zero"], "codes": [torch.zeros(4, 3)]})
case("flow_vq.distortion", fvq.distortion, lambda: dict(z=_Z, codes=_C))
case("flow_vq.lloyd", fvq.lloyd, lambda: dict(samples=_Z, codes=_C, iters=1))
case("flow_vq.transport_codes", fvq.transport_codes,
     lambda: dict(v=_VF, levels=[2, 2], n_samples=8, steps=1, method="euler", lloyd_steps=0),
     more={"n_samples": [3], "steps": ["zero"]})
case("flow_vq.quantize_ste", fvq.quantize_ste, lambda: dict(z=_Z, codes=_C), skip={"z": {"empty"}})
case("flow_vq.usage", fvq.usage, lambda: dict(idx=torch.tensor([0, 1, 1]), K=2),
     skip={"idx": {"ndim"}},  # any shape is flattened
     more={"K": ["zero"], "idx": [torch.tensor([0, 2]), torch.tensor([0.0])]})
case("flow_vq.equal_mass_test", fvq.equal_mass_test, lambda: dict(idx=torch.tensor([0, 1, 1]), K=2),
     skip={"idx": {"ndim"}}, more={"idx": [torch.tensor([-1])]})
case("flow_vq.FlowQuantizer", fvq.FlowQuantizer,
     lambda: dict(levels=[2, 2], hidden=4, depth=1, refresh_every=2, n_samples=8, ode_steps=1, lloyd_steps=0,
                  beta=0.25, lam_fm=1.0, seed=0),
     skip={"n_samples": {"none"}}, more={"n_samples": [3], "beta": ["neg"], "refresh_every": ["zero"]})
case("flow_vq.VectorQuantizer", fvq.VectorQuantizer, lambda: dict(K=4, d=2, beta=0.25, init_scale=1.0),
     more={"K": ["zero"], "init_scale": ["zero"]})
case("flow_vq.EMAVectorQuantizer", fvq.EMAVectorQuantizer,
     lambda: dict(K=4, d=2, beta=0.25, decay=0.9, patience=5, init_scale=1.0, seed=0), more={"decay": [1.0]})
case("flow_vq.FSQ", fvq.FSQ, lambda: dict(levels=[2, 3], eps=1e-3), more={"eps": ["zero"]})
case("flow_vq.FSQ.forward", fvq.FSQ([2, 2]).forward, lambda: dict(z=_Z), skip={"z": {"empty"}})
case("flow_vq.GaussianGridQuantizer.forward", fvq.GaussianGridQuantizer([2, 2]).forward, lambda: dict(z=_Z),
     skip={"z": {"empty"}})
case("flow_vq.kmeans_codes", fvq.kmeans_codes, lambda: dict(x=_Z.numpy(), K=2, seed=0, max_iter=5),
     more={"K": [7, "zero"]})
case("flow_vq.Tokenizer", fvq.Tokenizer,
     lambda: dict(n_pixels=4, n_tokens=2, d=2, quantizer=fvq.FSQ([2, 2]), hidden=4), more={"quantizer": [3]})
case("flow_vq.toy_latents", fvq.toy_latents, lambda: dict(name="moons", n=10, seed=0), more={"n": [1]})
case("flow_vq.lorenz_states", fvq.lorenz_states, lambda: dict(n=5, dt=0.01, seed=0, burn_in=0.5),
     more={"dt": ["zero", "neg", 1e308, 1e6], "burn_in": ["neg", 1e300]})  # dt=1e308 was a hang (#58)
_TOKS = torch.tensor([[0, 1], [2, 3], [3, 0]])
_TP = fvq.TokenPrior(4, 2, dim=2, hidden=4)
case("flow_vq.RankCells", fvq.RankCells, lambda: dict(ref=_Z, levels=[2, 2]), more={"ref": [_Z[:3]]})
case("flow_vq.mmd_rbf", fvq.mmd_rbf, lambda: dict(x=_Z, y=_Z + 1, scales=(0.5, 1.0)),
     more={"y": [torch.zeros(4, 3)], "scales": [(0.0,)]})
case("flow_vq.distortion_at_entropy", fvq.distortion_at_entropy,
     lambda: dict(entropies=[1.0, 2.0], distortions=[1.0, 0.5], h=1.5), more={"distortions": [[1.0, 0.0]]})
case("flow_vq.TokenPrior", fvq.TokenPrior, lambda: dict(K=4, n_tokens=2, dim=2, hidden=4), more={"K": [1]})
case("flow_vq.TokenPrior.forward", _TP.forward, lambda: dict(tokens=_TOKS), more={"tokens": [_TOKS + 4]})
case("flow_vq.prior_bits", fvq.prior_bits, lambda: dict(prior=_TP, tokens=_TOKS), more={"prior": [3]})
case("flow_vq.fit_prior", fvq.fit_prior,
     lambda: dict(train_tokens=_TOKS, val_tokens=_TOKS, K=4, steps=2, seed=0, lr=1e-2, weight_decay=0.0,
                  eval_every=1, dim=2, hidden=4),
     more={"val_tokens": [_TOKS[:, :1]], "steps": ["zero"], "lr": ["zero"], "weight_decay": ["neg"]})
case("flow_vq.grid_neighbour", fvq.grid_neighbour,
     lambda: dict(idx=torch.tensor([0, 3]), levels=[2, 2], generator=torch.Generator()),
     skip={"idx": {"empty", "ndim"}, "generator": {"none"}},  # any shape is flattened; None: the global RNG
     more={"idx": [torch.tensor([4])]})
case("flow_vq.topology_ratio", fvq.topology_ratio,
     lambda: dict(decoder=torch.nn.Linear(4, 3), tokens=_TOKS, codebook=_C, levels=[2, 2],
                  generator=torch.Generator()),
     skip={"generator": {"none"}}, more={"decoder": [3], "tokens": [_TOKS + 4], "codebook": [_C[:3]]})
case("flow_vq.make_quantizer", fvq.make_quantizer,
     lambda: dict(method="Flow-VQ", K=4, d=2, seed=0, refresh_every=2), more={"K": [7]})
case("flow_vq.train_flow", fvq.train_flow, lambda: dict(x=_Z, steps=2, seed=0, hidden=4, batch=4, lr=1e-3),
     more={"steps": ["zero"], "batch": ["zero"]})
case("flow_vq.train_tokenizer", fvq.train_tokenizer,
     lambda: dict(method="FSQ", X=torch.rand(6, 4), K=4, steps=2, seed=0, n_tokens=2, d=2, hidden=4),
     more={"steps": ["zero"]}, only=("method", "X", "K", "steps", "seed", "n_tokens", "hidden"))
case("flow_vq.checkpoint_config", fvq.checkpoint_config, lambda: dict(name="models"))


# ------------------------------------------------------------------------------------------- space_time_operators
_PAR = np.array([-1, 0, 0, 1, 1])
_Q = np.abs(np.random.default_rng(0).normal(size=(5, 8)))
_RNG = lambda: np.random.default_rng(0)  # noqa: E731
_MASK = np.ones((4, 4), dtype=bool)
_LG = sto.grid_laplacian_operator(_MASK)[0]
_BADPAR = [np.array([0, 0]), np.array([-1, 5]), np.array([1.0, -1.0]), np.array([-1, -1])]

case("space_time_operators.random_river_tree", sto.random_river_tree,
     lambda: dict(n=5, rng=_RNG(), recent_bias=0.5), more={"n": ["zero"], "recent_bias": ["neg", 1.5], "rng": [3]})
case("space_time_operators.validate_tree", sto.validate_tree, lambda: dict(parents=_PAR), more={"parents": _BADPAR})
case("space_time_operators.tree_from_edges", sto.tree_from_edges, lambda: dict(edges=[(1, 0), (2, 0)], n=3),
     more={"edges": [[(1, 0.5)], [(1, 0), (1, 2)], [(1,)]], "n": ["zero"]})
case("space_time_operators.upstream_area", sto.upstream_area, lambda: dict(parents=_PAR), more={"parents": _BADPAR})
case("space_time_operators.muskingum_coeffs", sto.muskingum_coeffs, lambda: dict(K=np.array([1.0, 2.0]), X=0.1, dt=1.0),
     skip={"K": {"ndim"}}, more={"K": [np.array([0.0]), -1.0, np.array([1e308])], "X": [0.5, "neg"],
                                       "dt": ["zero", 1e308]})
case("space_time_operators.lateral_inflow", sto.lateral_inflow,
     lambda: dict(n=3, T=8, n_events=1, rng=_RNG(), base=0.05), more={"T": [1], "base": ["neg"]})
case("space_time_operators.route_sequential", sto.route_sequential,
     lambda: dict(parents=_PAR, K=np.full(5, 1.5), q=_Q, X=0.1, dt=1.0, nonlinear=True, q_ref=0.3, K_range=(0.6, 5.0)),
     skip={"q": {"ndim"}},  # q is (..., N, T): leading batch axes are valid
     more={"K": [np.zeros(5), np.ones(3)], "q": [_Q[:3]], "K_range": [(0.6,), (5.0, 0.6), (math.nan, 1.0)],
           "q_ref": ["zero"], "dt": ["zero"]})
case("space_time_operators.route_spectral", sto.route_spectral,
     lambda: dict(parents=_PAR, K=1.5, q=_Q, X=0.1, dt=1.0, pad_factor=4),
     skip={"q": {"ndim"}, "pad_factor": {"none"}}, more={"pad_factor": ["zero"], "K": ["neg"]})
case("space_time_operators.chebyshev_apply", sto.chebyshev_apply,
     lambda: dict(op=torch.eye(3), x=torch.ones(3, 2), order=2), skip={"x": {"empty", "ndim", "nan"}})
case("space_time_operators.chebyshev_dense", sto.chebyshev_dense, lambda: dict(op=np.eye(3) / 2, k=2),
     more={"op": [np.ones((2, 3)), np.full((3, 3), 1e200)]})
case("space_time_operators.SepOperator", sto.SepOperator,
     lambda: dict(c_in=2, c_out=1, width=4, blocks=1, modes=2, order=1, mixer="cheb", slices=2),
     more={"width": ["zero"]})
case("space_time_operators.SepOperator.forward", sto.SepOperator(2, width=4, blocks=1, modes=2, order=1).forward,
     lambda: dict(x=torch.ones(3, 1, 4, 2), op=torch.eye(3)), only=("x",), skip={"x": {"empty"}})
case("space_time_operators.r2_score", sto.r2_score, lambda: dict(pred=np.array([1.0, 2.0]), truth=np.array([1.0, 3.0])),
     skip={"pred": {"ndim"}, "truth": {"ndim"}},
     more={"truth": [np.ones(2), np.ones(3), np.array([1.0, 1e308])], "pred": [np.array([1.0, -1e308])]})
case("space_time_operators.masked_grid", sto.masked_grid, lambda: dict(size=6, rng=_RNG(), n_obstacles=1),
     more={"size": [3]})
case("space_time_operators.grid_laplacian_operator", sto.grid_laplacian_operator, lambda: dict(mask=_MASK),
     more={"mask": [np.zeros((3, 3), bool), np.ones((3, 3))]})
case("space_time_operators.diffuse", sto.diffuse,
     lambda: dict(L=_LG, u0=np.zeros((1, 16)), s=np.ones((1, 16, 3)), kappa=0.2, decay=0.02, substeps=2),
     more={"kappa": [1.0, "neg"], "substeps": ["zero"], "u0": [np.zeros((1, 5)), np.full((1, 16), 1e308)],
           "decay": [1e308, 4.0]})  # a huge decay made the explicit step blow up to inf (#58)

_RD = sto.river_data(0, n=4, T=8, n_events=2, n_test=1, biases=(0.0,))
_ROUTER = sto.RoutingOperator(2, 2, width=4, channels=2, blocks=1)
_RMP = sto.RecurrentMP(4, hidden=4)
_NO_Q = {k: v for k, v in _RD["zero-shot"].items() if k != "q"}  # a bare KeyError 'q' before (#58)
_NO_O = {**_RD, "train0": {k: v for k, v in _RD["train0"].items() if k != "O"}}
case("space_time_operators.predict_router", sto.predict_router,
     lambda: dict(model=_ROUTER, d=_RD["zero-shot"], leak="none", chunk=4),
     more={"d": [_NO_Q, {}], "model": [_RMP], "chunk": ["zero"]})
case("space_time_operators.predict_recurrent", sto.predict_recurrent,
     lambda: dict(model=_RMP, d=_RD["train0"], chunk=4), more={"d": [_NO_Q, {"train": True}], "chunk": ["zero"]})
case("space_time_operators.train_recurrent", sto.train_recurrent,
     lambda: dict(data=_RD, steps=1, seed=0, n_events=2, batch=1, lr=1e-3, hidden=4), only=("data",),
     more={"data": [_NO_O, {"train0": 3}, {"train0": {}}]})
case("space_time_operators.train_router", sto.train_router,
     lambda: dict(data=_RD, leak="shift", steps=1, seed=0, n_events=2, batch=1, width=4, channels=2, blocks=1),
     only=("data",), more={"data": [_NO_O, {"train0": {k: v for k, v in _RD["train0"].items() if k != "q_shift"}}]})


def test_route_sequential_refuses_a_nan_inflow() -> None:
    q = _Q.copy()
    q[2, 3] = np.nan
    with pytest.raises(ValueError, match="^q must be finite"):
        sto.route_sequential(_PAR, 1.5, q)


# -------------------------------------------------------------------------------- epistemic_independence, sail_scf
case("epistemic_independence.group_advantages", epi.group_advantages,
     lambda: dict(rewards=np.array([[1.0, 0.0], [0.5, 0.5]]), mode="std", eps=1e-6),
     more={"rewards": [np.array([[1.0, np.nan]]), np.ones((2, 1))], "eps": ["neg"]})
case("epistemic_independence.eit_reward", epi.eit_reward,
     lambda: dict(pred=np.array([0, 1]), truth=np.array([0, 0]), cue=np.array([-1, 1])),
     skip={k: {"empty"} for k in ("pred", "truth", "cue")},  # empty batches score to an empty array
     more={"pred": [np.array([0, epi.MAX_OPTIONS]), np.array([0.0, 1.0])], "cue": [np.array([-2, 0])]})
case("epistemic_independence.policy_expected_reward", epi.policy_expected_reward,
     lambda: dict(policy="follow", p_aligned=0.5, reward="eit"), more={"p_aligned": [1.5, "neg"]})
case("epistemic_independence.accuracy_reward", epi.accuracy_reward,
     lambda: dict(pred=np.array([[0, 1], [1, 1]]), truth=np.array([0, 1])), skip={"pred": {"ndim"}},
     more={"pred": [np.array([0, 1, 1]), np.array([[0, 2]])], "truth": [np.array([0, 3])]})
_EPI_B = epi.make_batch(np.random.default_rng(0), 3, families=("bandwagon", "verbosity"))
_EPI_M = hnn.Transformer(_tiny_cfg(vocab_size=len(epi.VOCAB), max_len=epi.SEQ_LEN))
case("epistemic_independence.make_batch", epi.make_batch,
     lambda: dict(rng=np.random.default_rng(0), n=3, subjects=["sum"], families=["authority"], p_cue=0.5,
                  p_aligned=0.5),
     more={"rng": [0], "n": ["zero"], "subjects": [[], ["nope"]], "families": [[], ["nope"]],
           "p_cue": [1.5, "neg"], "p_aligned": [-0.1]})
case("epistemic_independence.Batch", epi.Batch,
     lambda: dict(x=_EPI_B.x, truth=_EPI_B.truth, cue=_EPI_B.cue, family=_EPI_B.family, subject=_EPI_B.subject),
     more={"x": [_EPI_B.x[:, :4], _EPI_B.x + 100], "truth": [np.array([0, 1]), np.array([0, 1, 2])],
           "cue": [np.array([-2, 0, 0])], "family": [np.array([0, 9, 0])]})
case("epistemic_independence.answer_logits", epi.answer_logits, lambda: dict(model=_EPI_M, x=_EPI_B.x),
     more={"x": [_EPI_B.x.float()]})
case("epistemic_independence.rl_batch", epi.rl_batch, lambda: dict(seed=0, step=0, n=4, p_aligned=0.5),
     more={"p_aligned": [1.5]})
case("epistemic_independence.batch_digest", epi.batch_digest, lambda: dict(batch=_EPI_B), more={"batch": [3]})
case("epistemic_independence.unpaired_steps", epi.unpaired_steps,
     lambda: dict(digests={"a": ["x", "y"], "b": ["x", "y"]}, steps=2),
     more={"digests": [{"a": ["x"]}, {"a": [1], "b": [1]}]})
case("epistemic_independence.grpo_loss", epi.grpo_loss,
     lambda: dict(model=_EPI_M, batch=_EPI_B, G=2, reward="eit", mode="std",
                  generator=torch.Generator().manual_seed(0)),
     skip={"generator": {"none"}}, more={"G": [1], "batch": [3]})  # generator None: torch's global RNG


def _sail_cases() -> None:
    try:
        from helpers import sail_scf as scf
    except ImportError:  # pragma: no cover - pyscf is an optional extra
        return
    h2 = dict(symbols=["H", "H"], coords=np.array([[0.0, 0.0, 0.0], [0.0, 0.0, 0.74]]), basis="sto-3g")
    case("sail_scf.build_molecule", scf.build_molecule, lambda: {k: (v.copy() if isinstance(v, np.ndarray) else v)
                                                               for k, v in h2.items()},
         skip={"basis": {"unknown"}},  # pyscf decides which basis names exist
         more={"coords": [np.zeros((2, 3)), np.array([[0.0, 0, 0], [0, 0, 1e-3]]), np.zeros((3, 3))],
               "symbols": [["H"], ["H", "Xx"], []]})
    from pyscf import scf as pscf

    mol = scf.build_molecule(**h2)
    ints = scf.integrals(mol)
    P = scf.density_from_hamiltonian(ints.H, ints)
    F = scf.fock(P, ints)
    x = scf.inputs(mol)
    model = scf.GuessModel(head="hamiltonian", hidden=4)
    ints_kw = dict(S=ints.S, H=ints.H, eri=ints.eri, X=ints.X, n_occ=ints.n_occ, e_nuc=ints.e_nuc)
    sq = {"P": [torch.zeros(3, 3, dtype=torch.float64), torch.zeros(2, 2, dtype=torch.int64)]}
    case("sail_scf.g2_molecules", scf.g2_molecules, lambda: dict(max_heavy=0, min_atoms=2),
         skip={"max_heavy": {"neg"}}, more={"max_heavy": [-1], "min_atoms": ["zero"]})
    case("sail_scf.rdkit_molecule", scf.rdkit_molecule, lambda: dict(smiles="O", seed=0, basis="sto-3g"),
         skip={"basis": {"unknown"}}, more={"smiles": ["C1CC", "", "[Na+].[Cl-]"]})
    case("sail_scf.rotate", scf.rotate, lambda: dict(mol=mol, R=np.eye(3)),
         more={"R": [np.ones((3, 3)), -np.eye(3), np.eye(2)], "mol": [3]})
    case("sail_scf.Integrals", scf.Integrals, lambda: dict(ints_kw), skip={"eri": {"empty"}},  # empty: no ERIs
         more={"n_occ": [2, "zero"], "H": [torch.zeros(3, 3, dtype=torch.float64)]})
    case("sail_scf.integrals", scf.integrals, lambda: dict(mol=mol, eri=True), more={"eri": [1]})
    case("sail_scf.occupied_projector", scf.occupied_projector,
         lambda: dict(A=torch.diag(torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)), n_occ=1),
         more={"n_occ": [3, "zero"], "A": [torch.zeros(2, 3, dtype=torch.float64)]})
    case("sail_scf.density_from_hamiltonian", scf.density_from_hamiltonian, lambda: dict(H=ints.H, ints=ints),
         more={"H": sq["P"]})
    case("sail_scf.fock", scf.fock, lambda: dict(P=P, ints=ints), more=sq)
    case("sail_scf.energy", scf.energy, lambda: dict(P=P, F=F, ints=ints), more={**sq, "F": sq["P"]})
    case("sail_scf.orbital_gradient", scf.orbital_gradient, lambda: dict(F=F, P=P, ints=ints), more=sq)
    case("sail_scf.scf_unrolled", scf.scf_unrolled, lambda: dict(P0=P, ints=ints, n_cycles=2, diis=2, tol=1e-8),
         skip={"tol": {"none"}},  # None: run all cycles
         more={"n_cycles": ["zero"], "diis": ["zero"], "tol": ["zero", "neg"], "P0": sq["P"],
               "ints": [scf.integrals(mol, eri=False)]})
    case("sail_scf.GuessModel", scf.GuessModel, lambda: dict(head="hamiltonian", hidden=4),
         more={"hidden": ["zero"], "head": ["overlap"]})
    case("sail_scf.GuessModel.forward", model.forward, lambda: dict(x=x))
    case("sail_scf.GuessModel.correction", model.correction, lambda: dict(x=x))
    case("sail_scf.inputs", scf.inputs, lambda: dict(mol=mol, eri=True, head="density"),
         skip={"head": {"none"}},  # None: both priors
         more={"head": ["overlap"], "mol": [3]})
    case("sail_scf.features", scf.features, lambda: dict(mol=mol))
    case("sail_scf.pyscf_guess", scf.pyscf_guess, lambda: dict(mol=mol, kind="minao"))
    case("sail_scf.run_pyscf", scf.run_pyscf, lambda: dict(mf=pscf.RHF(mol), dm0=P.numpy(), max_cycle=3),
         skip={"dm0": {"none"}},  # None: PySCF's own guess
         more={"dm0": [np.zeros((3, 3))], "mf": [pscf.UHF(mol)]})
    case("sail_scf.dft_solver", scf.dft_solver, lambda: dict(mol=mol, xc="pbe", grid_level=1),
         more={"grid_level": [10], "mol": [3]})
    mol631 = scf.build_molecule(**{**h2, "basis": "6-31g"})
    case("sail_scf.project_density", scf.project_density, lambda: dict(dm=P.numpy(), mol_from=mol, mol_to=mol631),
         more={"dm": [np.zeros((3, 3))], "mol_from": [3],
               "mol_to": [scf.build_molecule(["H", "H"], np.array([[0.0, 0, 0], [0, 0, 0.9]]), "6-31g")]})


_sail_cases()


# -------------------------------------------------------------------------------------------- anchor_video_edit
from helpers import anchor_video_edit as ave  # noqa: E402

_IMG = np.random.default_rng(0).uniform(0, 1, (40, 40, 3)).astype(np.float32)
_CLIP = ave.make_clip(_IMG, T=3, size=8, seed=0)
_F0 = _CLIP.frames[0]
_MOT = ave.Motion(_CLIP.flow, -_CLIP.flow, _CLIP.valid, _CLIP.valid)
_ANCH = {0: _F0.clone(), 2: _CLIP.frames[2].clone()}
_EP = ave.EditParams("stripe_object", 0.3, 1.2, 4, 0.2, 0.5, 0.1, (0.2, 0.3, 0.4))
_PROP = ave.Propagator(width=4)
_BADANCH = [{}, {5: _F0}, {0: _F0[:, :4]}, {0.5: _F0}, {0: "x"}]
_CLIP_KW = lambda: dict(frames=_CLIP.frames, masks=_CLIP.masks, flow=_CLIP.flow, valid=_CLIP.valid,  # noqa: E731
                        centers=_CLIP.centers, info={})
_MOT_KW = lambda: dict(bwd=_MOT.bwd, fwd=_MOT.fwd, vb=_MOT.vb, vf=_MOT.vf)  # noqa: E731

case("anchor_video_edit.load_image", ave.load_image, lambda: dict(name="coffee"), only=("name",),
     skip={"name": set()})
case("anchor_video_edit.make_clip", ave.make_clip,
     lambda: dict(image=_IMG, T=3, size=8, seed=0, sprite_size=3, static=False),
     skip={"sprite_size": {"none"}, "image": {"ndim"}},  # None: 3 * size // 8; (ndim: a wrong shape, below)
     more={"T": [1], "size": [7], "sprite_size": ["zero", 9], "image": ["nope", np.zeros((40, 40)),
                                                                       np.zeros((40, 40, 4)), _IMG * 3,
                                                                       np.zeros((9, 9, 3))]})
case("anchor_video_edit.Clip", ave.Clip, _CLIP_KW,
     more={"frames": [_CLIP.frames[:1], _CLIP.frames[:, :2]], "masks": [_CLIP.masks.float(), _CLIP.masks[:2]],
           "flow": [_CLIP.flow[:, :1]], "valid": [_CLIP.valid[:1]], "centers": [_CLIP.centers[:2]],
           "info": [3]})
case("anchor_video_edit.warp", ave.warp, lambda: dict(img=_F0, flow=_CLIP.flow[0]),
     skip={"img": {"ndim"}, "flow": {"ndim"}},  # leading batch axes are valid (and broadcast for flow)
     more={"img": [_F0[:, :4]], "flow": [_CLIP.flow[0, :1], torch.zeros(5, 2, 8, 8)]})
case("anchor_video_edit.warp_chain", ave.warp_chain, lambda: dict(img=_F0, clip=_CLIP, src=0, dst=2),
     more={"src": [3], "dst": [-1, 3], "clip": [3]})
case("anchor_video_edit.psnr", ave.psnr, lambda: dict(a=_F0, b=_CLIP.frames[1], mask=_CLIP.masks[0] | True),
     skip={"a": {"ndim"}, "b": {"ndim"}, "mask": {"none", "ndim"}},  # any shape; None: no mask
     more={"b": [_F0[:2]], "mask": [torch.zeros(8, 8, dtype=torch.bool), torch.ones(3, 3, dtype=torch.bool),
                                     torch.ones(8, 8)]})
case("anchor_video_edit.warp_error", ave.warp_error, lambda: dict(video=_CLIP.frames, clip=_CLIP),
     more={"video": [_CLIP.frames[:2]]})
case("anchor_video_edit.Motion", ave.Motion, _MOT_KW,
     more={"bwd": [_MOT.bwd[:, :1]], "fwd": [_MOT.fwd[:1]], "vb": [_MOT.vb.float()], "vf": [_MOT.vf[:1]]})
case("anchor_video_edit.estimate_motion", ave.estimate_motion,
     lambda: dict(frames=_CLIP.frames, fast=True, tol=0.75), more={"frames": [_CLIP.frames[:1]]})
case("anchor_video_edit.chain_motion", ave.chain_motion, lambda: dict(motion=_MOT, src=0, dst=2),
     more={"src": [3], "dst": [-1], "motion": [_CLIP]})
case("anchor_video_edit.visibility", ave.visibility, lambda: dict(clip=_CLIP, keys=[0, 2]),
     more={"keys": [[], [3], 0]})
case("anchor_video_edit.ssim_outside", ave.ssim_outside,
     lambda: dict(video=_CLIP.frames, source=_CLIP.frames, outside=~_CLIP.masks),
     more={"outside": [torch.zeros(3, 8, 8, dtype=torch.bool)], "source": [_CLIP.frames[:2]]})
case("anchor_video_edit.uniform_keyframes", ave.uniform_keyframes, lambda: dict(T=5, m=2),
     more={"m": [6, "zero"], "T": ["zero"]})
case("anchor_video_edit.motion_keyframes", ave.motion_keyframes, lambda: dict(motion=_MOT, m=2),
     more={"m": [4, "zero"]})
case("anchor_video_edit.EditParams", ave.EditParams,
     lambda: dict(instruction="stripe_object", hue=0.3, gain=1.2, levels=4, freq=0.2, angle=0.5, phase=0.1,
                  color=(0.2, 0.3, 0.4)),
     more={"gain": ["neg"], "levels": ["zero"], "freq": ["neg"], "color": [(0.1, 0.2), (0.1, 0.2, 2.0)]})
case("anchor_video_edit.apply_edit", ave.apply_edit,
     lambda: dict(frame=_F0, mask=_CLIP.masks[0], center=_CLIP.centers[0], p=_EP),
     more={"frame": [_F0[:2]], "mask": [_CLIP.masks[0].float(), _CLIP.masks[0, :3]],
           "center": [_CLIP.centers[0, :1]]})
case("anchor_video_edit.edit_video", ave.edit_video,
     lambda: dict(frames=_CLIP.frames, masks=_CLIP.masks, centers=_CLIP.centers, p=_EP),
     more={"masks": [_CLIP.masks[:2]], "centers": [_CLIP.centers[:2]]})
case("anchor_video_edit.Editor", ave.Editor, lambda: dict(seed=0, quality=0.5, jitter=1.0),
     more={"quality": [1.5, "neg"], "jitter": [2.0]})
case("anchor_video_edit.Editor.draw", ave.Editor().draw,
     lambda: dict(instruction="restyle_background", canvas=_F0, cmask=_CLIP.masks[0]),
     more={"canvas": [_F0[:2]], "cmask": [_CLIP.masks[0, :3]]})
case("anchor_video_edit.Editor.degrade", ave.Editor(quality=0.5).degrade, lambda: dict(img=_F0),
     more={"img": [_F0[:2]]})
case("anchor_video_edit.Editor.edit", ave.Editor().edit,
     lambda: dict(frames=_CLIP.frames, masks=_CLIP.masks, centers=_CLIP.centers, instruction="stripe_object"),
     more={"masks": [_CLIP.masks[:2], _CLIP.masks.float()], "frames": [_CLIP.frames[:, :2]],
           "centers": [_CLIP.centers[:2]]})
case("anchor_video_edit.Propagator", ave.Propagator, lambda: dict(width=4), more={"width": ["zero", 6]})
case("anchor_video_edit.Propagator.forward", _PROP.forward, lambda: dict(x=torch.zeros(1, 23, 8, 8)),
     more={"x": [torch.zeros(1, 17, 8, 8), torch.zeros(1, 23, 6, 8)]})
case("anchor_video_edit.anchor_condition", ave.anchor_condition, lambda: dict(anchors=_ANCH, motion=_MOT, fill_holes=False),
     more={"anchors": _BADANCH, "motion": [_CLIP]})
case("anchor_video_edit.train_propagator", ave.train_propagator,
     lambda: dict(frames=[_CLIP.frames], motions=[_MOT], steps=1, width=4, seed=0, batch_clips=1, lr=1e-3,
                  hole_weight=1.0, progress=False, fill_holes=False),
     more={"frames": [[], [_CLIP.frames[:2]]], "motions": [[], [_CLIP]]})
case("anchor_video_edit.propagate", ave.propagate,
     lambda: dict(model=_PROP, anchors=_ANCH, motion=_MOT, steps=2, seed=0, fill_holes=False),
     more={"anchors": _BADANCH, "model": [torch.nn.Identity()]})
case("anchor_video_edit.flow_warp_propagate", ave.flow_warp_propagate,
     lambda: dict(anchors=_ANCH, motion=_MOT, fill=_CLIP.frames),
     skip={"fill": {"none"}},  # None: the anchors' average fills the holes
     more={"anchors": _BADANCH, "fill": [_CLIP.frames[:2]]})
case("anchor_video_edit.true_motion", ave.true_motion, lambda: dict(clip=_CLIP))
case("anchor_video_edit.checkpoint_config", ave.checkpoint_config, lambda: dict(name="propagators_filled"))
case("anchor_video_edit.training_clips", ave.training_clips,
     lambda: dict(cfg=dict(ave.checkpoint_config(), n_train_clips=1, T=3, size=8), fast=True))


# ------------------------------------------------------------------------------------------ tree_ensemble_repair
from sklearn.ensemble import GradientBoostingClassifier  # noqa: E402

from helpers import tree_ensemble_repair as ter  # noqa: E402

_XT = np.random.default_rng(0).integers(0, 3, (40, 2)).astype(float)
_GB2 = GradientBoostingClassifier(n_estimators=2, max_depth=2, random_state=0).fit(_XT, _XT[:, 0] > _XT[:, 1])
_GB3 = GradientBoostingClassifier(n_estimators=2, max_depth=2, random_state=0).fit(_XT, _XT.sum(1).astype(int) % 3)
_E2, _E3 = ter.from_sklearn(_GB2), ter.from_sklearn(_GB3)
_TR0 = _E2.trees[0]
_FP = ter.FairPair(np.array([0.0, 1.0]), np.array([1.0, 1.0]))
_SS = ter.SafeState(np.array([0.0, 1.0]), (0, 1))
_REP = ter.repair(_E2, _XT[:5], delta=1.0)
_GW = ter.make_gridworld(3, 1, seed=0)
_BADX = [np.zeros((2, 3)), np.zeros((2, 2, 2))]

case("tree_ensemble_repair.Tree", ter.Tree,
     lambda: dict(feature=_TR0.feature, threshold=_TR0.threshold, left=_TR0.left, right=_TR0.right,
                  leaves=_TR0.leaves),
     more={"left": [_TR0.left + 100], "leaves": [_TR0.leaves[:1]], "feature": [_TR0.feature.astype(float)]})
case("tree_ensemble_repair.Tree.leaves_under", _TR0.leaves_under, lambda: dict(node=0),
     more={"node": [len(_TR0.feature)]})
case("tree_ensemble_repair.TreeEnsemble", ter.TreeEnsemble,
     lambda: dict(trees=_E2.trees, n_features=2, base=_E2.base, values=_E2.values, slot_leaf=_E2.slot_leaf,
                  slot_out=_E2.slot_out, classes=_E2.classes, source="x"),
     skip={"values": {"empty"}, "source": {"unknown"}},  # (empty values: slot_leaf mismatches; any source label)
     more={"trees": [[], [3]], "n_features": [1, "zero"], "slot_leaf": [_E2.slot_leaf + 1000],
           "slot_out": [_E2.slot_out + 1], "classes": [_E2.classes[:1]]})
for _m in ("apply", "incidence", "design"):
    case(f"tree_ensemble_repair.TreeEnsemble.{_m}", getattr(_E2, _m), lambda: dict(X=_XT[:3]), more={"X": _BADX})
case("tree_ensemble_repair.TreeEnsemble.decision", _E2.decision, lambda: dict(X=_XT[:3], values=_E2.values),
     skip={"values": {"none"}, "X": {"ndim"}}, more={"X": _BADX, "values": [_E2.values[:2]]})
case("tree_ensemble_repair.TreeEnsemble.with_values", _E2.with_values, lambda: dict(values=_E2.values),
     more={"values": [_E2.values[:2]]})


def _nan_init_gb() -> Any:
    import copy

    m = copy.deepcopy(_GB2)
    m.init_.class_prior_ = np.array([math.nan, math.nan])  # the constant initial score becomes NaN
    return m


def _changed_ens(ens: Any, **fields: Any) -> Any:
    """A copy of a valid ensemble with a field changed after construction (a dataclass does not re-check)."""
    import copy

    e = copy.deepcopy(ens)
    for k, v in fields.items():
        setattr(e, k, v)
    return e


_BAD_E3 = [_changed_ens(_E3, base=np.full_like(_E3.base, math.nan)),  # a NaN base score was accepted (#58)
           _changed_ens(_E3, base=np.full_like(_E3.base, 1e308)), _changed_ens(_E3, values=_E3.values[:-1])]
case("tree_ensemble_repair.from_sklearn", ter.from_sklearn, lambda: dict(model=_GB2),
     more={"model": [GradientBoostingClassifier(), _nan_init_gb()]})
case("tree_ensemble_repair.reference_scores", ter.reference_scores, lambda: dict(model=_GB2, X=_XT[:3]),
     more={"X": [np.zeros((2, 3))]})
case("tree_ensemble_repair.to_sklearn", ter.to_sklearn, lambda: dict(model=_GB2, ens=_E2, values=_E2.values),
     more={"ens": [_E3], "values": [_E2.values[:1]]})
case("tree_ensemble_repair.FairPair", ter.FairPair, lambda: dict(x=np.zeros(2), x_prime=np.ones(2)),
     more={"x_prime": [np.ones(3)]})
case("tree_ensemble_repair.SafeState", ter.SafeState, lambda: dict(x=np.zeros(2), safe=(0, 1)),
     more={"safe": [(0.5,), (-1,)]})
case("tree_ensemble_repair.verify_fairness", ter.verify_fairness,
     lambda: dict(ens=_E2, protected=0, values=(0.0, 1.0), domain=(np.zeros(2), np.full(2, 2.0)),
                  integer=np.ones(2, bool), fill=np.zeros(2), max_count=2, eps=1e-4, most_violating=False,
                  time_limit=10.0),
     skip={"domain": {"none"}, "integer": {"none", "ndim"}, "fill": {"none"}},  # None: defaults
     more={"ens": [_E3], "protected": [2], "values": [(0.0,), (1.0, 1.0), (0.0, math.nan)],
           "domain": [(np.ones(2), np.zeros(2)), (np.zeros(3), np.ones(3)), (np.full(2, math.nan), np.ones(2))],
           "integer": [np.full(2, 0.5), np.ones(3, bool)], "max_count": ["zero"], "eps": ["zero", "neg"]})
case("tree_ensemble_repair.verify_box", ter.verify_box,
     lambda: dict(ens=_E3, action=0, lo=np.zeros(2), hi=np.full(2, 2.0), integer=None, max_count=2, eps=1e-4,
                  time_limit=10.0),
     skip={"integer": {"none"}, "lo": {"inf"}, "hi": {"inf"}},  # ±inf bounds: an unbounded feature
     more={"ens": [_E2], "action": [3], "lo": [np.full(2, 5.0)], "max_count": ["zero"]})
case("tree_ensemble_repair.fairness_cells_bruteforce", ter.fairness_cells_bruteforce,
     lambda: dict(ens=_E2, protected=0, values=(0.0, 1.0), domain=None, integer=None, eps=1e-4),
     skip={"domain": {"none"}, "integer": {"none"}}, more={"protected": [2], "ens": [_E3], "values": [(1.0, 1.0)]})
case("tree_ensemble_repair.box_bruteforce", ter.box_bruteforce,
     lambda: dict(ens=_E3, action=1, lo=np.zeros(2), hi=np.ones(2), integer=None, eps=1e-4),
     skip={"integer": {"none"}, "lo": {"inf"}, "hi": {"inf"}},  # ±inf bounds: an unbounded feature
     more={"action": [3], "ens": [_E2], "hi": [-np.ones(2)]})
case("tree_ensemble_repair.flip_rate", ter.flip_rate,
     lambda: dict(predict=_GB2.predict, X=_XT[:4], protected=0, values=(0.0, 1.0)),
     more={"predict": [3], "protected": [2]})
case("tree_ensemble_repair.safety_counterexamples", ter.safety_counterexamples,
     lambda: dict(ens=_E3, states=_XT[:2], safe=[(0,), (1, 2)], values=_E3.values),
     skip={"values": {"none"}}, more={"safe": [[(0,)], [(0,), ("a",)]], "states": [np.zeros((2, 3))],
                                     "ens": _BAD_E3})
case("tree_ensemble_repair.repair", ter.repair,
     lambda: dict(ens=_E2, X_keep=_XT[:5], y_keep=None, pairs=[_FP], unsafe=(), delta=1.0, mu=1e-3, eps=1e-3,
                  relax=True, time_limit=10.0, mip_rel_gap=1e-2, node_limit=100),
     skip={"y_keep": {"none"}, "node_limit": {"none"}},  # None: keep the model's own predictions / no node cap
     more={"y_keep": [np.array([0, 1]), np.array([5, 5, 5, 5, 5])], "pairs": [[3], [_FP, "x"]],
           "unsafe": [[_SS]], "delta": ["zero", "neg"], "eps": ["zero"], "mu": ["neg"], "node_limit": ["zero"],
           "X_keep": _BADX})
case("tree_ensemble_repair.check_repair", ter.check_repair, lambda: dict(ens=_E2, result=_REP),
     more={"ens": [_E3]})
case("tree_ensemble_repair.fixed_fraction", ter.fixed_fraction,
     lambda: dict(ens=_E2, values=_E2.values, pairs=[_FP], unsafe=(), predict=None),
     skip={"predict": {"none"}}, more={"values": [_E2.values[:1]], "pairs": [[3]], "predict": [3]})
case("tree_ensemble_repair.GridWorld", ter.GridWorld,
     lambda: dict(size=3, lava=np.zeros((3, 3), bool), goal=(2, 2), start=(0, 0), gamma=0.9),
     more={"size": [1], "lava": [np.zeros((2, 2), bool), np.zeros((3, 3))], "goal": [(3, 0), (0,)],
           "gamma": [1.0, "neg"]})
case("tree_ensemble_repair.GridWorld.expert", _GW.expert, lambda: dict(iters=5), more={"iters": ["zero"]})
case("tree_ensemble_repair.GridWorld.rollout", _GW.rollout,
     lambda: dict(policy=np.ones((3, 3), int), start=(0, 0)),
     skip={"start": {"none"}}, more={"policy": [np.full((3, 3), 4), np.ones((2, 2), int)], "start": [(5, 5)]})
case("tree_ensemble_repair.make_gridworld", ter.make_gridworld, lambda: dict(size=3, n_lava=1, seed=0),
     more={"size": [2], "n_lava": [8]})


# -------------------------------------------------------------------------------------------- transolver_gmsfem
import scipy.sparse as _sp  # noqa: E402

from helpers import transolver_gmsfem as tg  # noqa: E402

_MS = tg.structured_mesh(4)
_AS, _MM = tg.stiffness(_MS), tg.mass(_MS)
_FN = np.ones(_MS.n)
_US = tg.solve_fine(_MS, _FN)
_NB = tg.neighbourhoods(_MS, 2)
_NB0 = _NB[0]
_LAM, _PHI = tg.local_spectral(_NB0.A, _NB0.s, 2)
_RB = tg.multiscale_basis(_MS, _NB, [tg.local_spectral(nb.A, nb.s, 1)[1] for nb in _NB])
_TS = tg.Transolver(in_dim=5, out_dim=2, dim=8, layers=1, heads=2, slices=2)
_FT = torch.zeros(2, 3, 5)
_MK = torch.ones(2, 3, dtype=torch.bool)
_PH = torch.randn(2, 3, 2, generator=torch.Generator().manual_seed(0))
_SPBAD = [np.eye(3), _sp.eye(3).tocsr()]
_MESH_KW = lambda: dict(points=_MS.points, cells=_MS.cells, kind="q1", Ke=_MS.Ke, Me=_MS.Me,  # noqa: E731
                        kappa=_MS.kappa)

case("transolver_gmsfem.Mesh", tg.Mesh, _MESH_KW, skip={"kappa": {"none"}},  # None: kappa = 1
     more={"cells": [_MS.cells + 100, _MS.cells[:, :3]], "kind": ["p1"],
           "kappa": [-_MS.kappa, _MS.kappa[:2], np.full_like(_MS.kappa, 1e300)],
           "Ke": [_MS.Ke[:2]]})
case("transolver_gmsfem.Mesh.with_kappa", _MS.with_kappa, lambda: dict(pixels=np.ones((4, 4))),
     more={"pixels": [np.zeros((4, 4)), np.ones(4)]})
case("transolver_gmsfem.structured_mesh", tg.structured_mesh, lambda: dict(n=2), more={"n": ["zero"]})
case("transolver_gmsfem.jittered_mesh", tg.jittered_mesh, lambda: dict(n=3, jitter=0.2, seed=0),
     more={"n": [1], "jitter": [0.5, "neg"]})
case("transolver_gmsfem.kappa_field", tg.kappa_field,
     lambda: dict(seed=0, n_pix=16, contrast=10.0, geometry="curved"), more={"n_pix": [8], "contrast": [1.0, 1e308]})
case("transolver_gmsfem.forcing", tg.forcing, lambda: dict(points=_MS.points, kind="sources", seed=0),
     skip={"points": {"empty"}}, more={"points": [np.zeros((3, 3))]})


def _mutated_mesh(**fields: Any) -> Any:
    """A copy of the valid mesh with a field changed after construction (a dataclass does not re-check)."""
    import copy

    m = copy.deepcopy(_MS)
    for k, v in fields.items():
        setattr(m, k, v)
    return m


_KN = _MS.kappa.copy()
_KN[1] = math.nan
_PINF = _MS.points.copy()
_PINF[0, 0] = math.inf
_BAD_MESHES = [_mutated_mesh(kappa=_KN), _mutated_mesh(kappa=-_MS.kappa), _mutated_mesh(kappa=_MS.kappa[:2]),
               _mutated_mesh(kappa=np.full_like(_MS.kappa, 1e300)), _mutated_mesh(Ke=np.full_like(_MS.Ke, math.nan)),
               _mutated_mesh(points=_PINF)]  # NaN kappa was accepted silently (#58)
case("transolver_gmsfem.stiffness", tg.stiffness, lambda: dict(mesh=_MS), more={"mesh": _BAD_MESHES})
case("transolver_gmsfem.mass", tg.mass, lambda: dict(mesh=_MS), more={"mesh": _BAD_MESHES})
case("transolver_gmsfem.load", tg.load, lambda: dict(mesh=_MS, f_nodes=_FN),
     more={"f_nodes": [_FN[:3], np.full_like(_FN, math.inf)], "mesh": _BAD_MESHES})
case("transolver_gmsfem.solve_fine", tg.solve_fine, lambda: dict(mesh=_MS, f_nodes=_FN, A=_AS),
     skip={"A": {"none"}}, more={"A": _SPBAD})  # None: assemble the stiffness
case("transolver_gmsfem.rel_errors", tg.rel_errors, lambda: dict(A=_AS, M=_MM, u=_US, v=_US * 0.9),
     more={"A": _SPBAD, "M": _SPBAD, "u": [np.zeros(_MS.n)], "v": [_US[:3]]})
case("transolver_gmsfem.l2_error", tg.l2_error, lambda: dict(mesh=_MS, u_nodes=_US, exact=lambda x, y: 0 * x),
     more={"u_nodes": [_US[:3]], "exact": [3]})
case("transolver_gmsfem.Neighbourhood", tg.Neighbourhood,
     lambda: dict(center=_NB0.center, nodes=_NB0.nodes, chi=_NB0.chi, A=_NB0.A, s=_NB0.s, neumann=True),
     more={"s": [-_NB0.s], "A": [_NB0.A[:2]], "nodes": [_NB0.nodes - 100], "center": [np.zeros(3)]})
case("transolver_gmsfem.coarse_hats", tg.coarse_hats, lambda: dict(points=_MS.points, n_coarse=2, boundary=False),
     skip={"points": {"empty"}}, more={"n_coarse": [1]})
case("transolver_gmsfem.neighbourhoods", tg.neighbourhoods, lambda: dict(mesh=_MS, n_coarse=2, boundary=True),
     more={"n_coarse": [1]})
case("transolver_gmsfem.local_spectral", tg.local_spectral, lambda: dict(A=_NB0.A, s=_NB0.s, n_bf=2),
     more={"n_bf": ["zero", 100], "s": [np.zeros(len(_NB0.s)), _NB0.s[:2]], "A": [np.ones((2, 3))]})
case("transolver_gmsfem.eigen_residual", tg.eigen_residual, lambda: dict(A=_NB0.A, s=_NB0.s, lam=_LAM, phi=_PHI),
     more={"lam": [_LAM[:1]], "phi": [_PHI[:2], np.zeros_like(_PHI)]})
case("transolver_gmsfem.multiscale_basis", tg.multiscale_basis,
     lambda: dict(mesh=_MS, nbhds=_NB, phis=[tg.local_spectral(nb.A, nb.s, 1)[1] for nb in _NB]),
     more={"phis": [[np.zeros((2, 1))] * len(_NB), []], "nbhds": [[3]], "mesh": _BAD_MESHES[:3]})
case("transolver_gmsfem.gmsfem_solve", tg.gmsfem_solve, lambda: dict(A=_AS, b=tg.load(_MS, _FN), R=_RB),
     more={"A": _SPBAD, "b": [np.ones(3)], "R": [_sp.eye(3).tocsr()]})
case("transolver_gmsfem.parabolic", tg.parabolic,
     lambda: dict(A=_AS, M=_MM, b=tg.load(_MS, _FN), u0=np.zeros(_MS.n), dt=0.1, steps=2, R=_RB, inner=None),
     skip={"R": {"none"}, "inner": {"none"}},  # R None with inner: the fine solve (below)
     more={"dt": ["zero", "neg"], "steps": ["zero"], "u0": [np.zeros(3)], "M": _SPBAD, "R": [np.eye(3)]})
case("transolver_gmsfem.parabolic(fine)", tg.parabolic,
     lambda: dict(A=_AS, M=_MM, b=tg.load(_MS, _FN), u0=np.zeros(_MS.n), dt=0.1, steps=2, R=None,
                  inner=~_MS.boundary), only=("inner",), more={"inner": [np.ones(3, bool)]})
case("transolver_gmsfem.coarse_q1_fem", tg.coarse_q1_fem, lambda: dict(n_coarse=2, n_fine=4, f=1.0),
     more={"n_coarse": [1], "n_fine": ["zero"]})
case("transolver_gmsfem.patch_features", tg.patch_features,
     lambda: dict(mesh=_MS, nb=_NB0, H=0.5, node_logk=np.zeros(_MS.n)),
     skip={"node_logk": {"none"}}, more={"H": ["zero", "neg"], "node_logk": [np.zeros(3)], "nb": [3]})
case("transolver_gmsfem.pad_patches", tg.pad_patches, lambda: dict(arrays=[np.ones((2, 5)), np.ones((3, 5))],
                                                                    n_max=4),
     skip={"n_max": {"none"}}, more={"arrays": [[], [np.ones((2, 5)), np.ones((2, 4))]], "n_max": [2]})
case("transolver_gmsfem.dihedral", tg.dihedral, lambda: dict(feats=_FT, g=torch.tensor([0, 5])),
     skip={"feats": {"ndim"}},  # any leading shape
     more={"g": [torch.tensor([0, 8]), torch.tensor([0.0, 1.0]), torch.tensor([0])]})
case("transolver_gmsfem.PhysicsAttention", tg.PhysicsAttention, lambda: dict(dim=8, heads=2, slices=2),
     more={"heads": [3, "zero"], "slices": ["zero"]})
case("transolver_gmsfem.Transolver", tg.Transolver,
     lambda: dict(in_dim=5, out_dim=2, dim=8, layers=1, heads=2, slices=2), more={"dim": ["zero"]})
case("transolver_gmsfem.Transolver.forward", _TS.forward, lambda: dict(feats=_FT, mask=_MK),
     skip={"mask": {"none"}, "feats": {"nan"}},  # None: no padding; NaN flows through like any network input
     more={"feats": [torch.zeros(2, 3, 4)], "mask": [_MK[:1], _MK.float()]})
case("transolver_gmsfem.sal_loss", tg.sal_loss,
     lambda: dict(phi_hat=_PH, phi=_PH.clone(), s=torch.ones(2, 3) / 3, mask=_MK, nested=True, eps=1e-6),
     skip={"mask": {"none"}, "phi_hat": {"nan"}},  # the model's output is not checked for NaN (hot path)
     more={"phi_hat": [_PH[:, :2]], "s": [-torch.ones(2, 3)], "eps": ["neg"]})
case("transolver_gmsfem.with_constant", tg.with_constant,
     lambda: dict(out=_PH, mask=_MK, neumann=torch.tensor([True, False])),
     skip={"out": {"nan"}}, more={"neumann": [torch.tensor([True])], "mask": [_MK.float()]})
case("transolver_gmsfem.predict_basis", tg.predict_basis,
     lambda: dict(model=_TS, feats=_FT, mask=_MK, neumann=torch.tensor([True, False]), batch=1),
     more={"batch": ["zero"], "model": [3], "neumann": [torch.tensor([1, 0])]})
case("transolver_gmsfem.s_orthonormalize", tg.s_orthonormalize, lambda: dict(phi=_PHI, s=_NB0.s),
     more={"s": [np.zeros(len(_NB0.s)), _NB0.s[:2]]})


# ---------------------------------------------------------------------------------------------------- dsl_harness
from helpers import dsl_harness as dsl  # noqa: E402

_CON = dsl.make_database(0, n_customers=20, n_products=5, n_orders=50)
_INT = dsl.make_intents(_CON, 1, seed=0)[0]
_PROG = list(_INT.program)
_BADTOK = [[1, 2], ["from", None], "from orders"]
_BW0 = frozenset({("A", "B")})
_BWG = frozenset({("B", "A")})
_BWD = dsl.bw_distances(_BWG)
_BADBW = [frozenset({("A", "A")}), frozenset({"AB"}), frozenset(), {("A", "B")}]

case("dsl_harness.make_database", dsl.make_database,
     lambda: dict(seed=0, n_customers=2, n_products=2, n_orders=2), more={"n_orders": ["zero"]})
case("dsl_harness.verify", dsl.verify, lambda: dict(tokens=_PROG), more={"tokens": _BADTOK})
case("dsl_harness.allowed_next", dsl.allowed_next, lambda: dict(prefix=_PROG[:2]),
     more={"prefix": _BADTOK + [["select"]]})
case("dsl_harness.free_decisions", dsl.free_decisions, lambda: dict(tokens=_PROG),
     more={"tokens": _BADTOK + [["from"]]})
case("dsl_harness.count_programs", dsl.count_programs, lambda: dict(max_len=3))
case("dsl_harness.parse", dsl.parse, lambda: dict(tokens=_PROG), more={"tokens": _BADTOK + [["from"]]})
case("dsl_harness.compile_sql", dsl.compile_sql, lambda: dict(tokens=_PROG), more={"tokens": _BADTOK})
case("dsl_harness.execute", dsl.execute, lambda: dict(con=_CON, sql="SELECT 1"),
     skip={"sql": {"unknown"}},  # SQL errors come back as ("error", message), by design
     more={"sql": [[1, 2]]})
case("dsl_harness.render_request", dsl.render_request, lambda: dict(tokens=_PROG), more={"tokens": _BADTOK})
case("dsl_harness.make_intents", dsl.make_intents, lambda: dict(con=_CON, n=1, seed=0, max_rows=30),
     more={"n": ["zero"], "max_rows": ["zero"]})
case("dsl_harness.corrupt", dsl.corrupt,
     lambda: dict(tokens=_PROG, eps=0.2, rng=np.random.default_rng(0), interface="dsl", destructive_rate=0.1),
     skip={"destructive_rate": {"none"}},  # None: eps / 10
     more={"eps": [1.5, "neg"], "destructive_rate": [2.0], "rng": [0], "tokens": _BADTOK})
case("dsl_harness.inject_error", dsl.inject_error,
     lambda: dict(tokens=_PROG, kind="syntax", rng=np.random.default_rng(0)),
     more={"tokens": _BADTOK + [["from"]], "rng": [0]})
case("dsl_harness.valid_prefix_length", dsl.valid_prefix_length, lambda: dict(tokens=_PROG),
     more={"tokens": _BADTOK})
case("dsl_harness.bw_blocks", dsl.bw_blocks, lambda: dict(n=3), more={"n": [9, "zero"]})
case("dsl_harness.bw_states", dsl.bw_states, lambda: dict(n=2), more={"n": [9]})
case("dsl_harness.bw_raw_actions", dsl.bw_raw_actions, lambda: dict(n=2))
case("dsl_harness.bw_check", dsl.bw_check, lambda: dict(state=_BW0, action=("B", "table")),
     more={"state": _BADBW, "action": [("B",), ("B", 3)]})
case("dsl_harness.bw_apply", dsl.bw_apply, lambda: dict(state=_BW0, action=("B", "table")),
     more={"state": _BADBW, "action": [("A", "table"), ("B",)]})
case("dsl_harness.bw_bfs", dsl.bw_bfs, lambda: dict(start=_BW0, goal=_BWG, masked=True),
     more={"start": _BADBW, "goal": _BADBW + [frozenset({("A",), ("C",)})]})
case("dsl_harness.bw_graph", dsl.bw_graph, lambda: dict(n=2), more={"n": [9]})
case("dsl_harness.bw_distances", dsl.bw_distances, lambda: dict(goal=_BWG, graph=dsl.bw_graph(2)),
     skip={"graph": {"none"}}, more={"goal": _BADBW, "graph": [{}]})
case("dsl_harness.bw_episode", dsl.bw_episode,
     lambda: dict(start=_BW0, goal=_BWG, dist=_BWD, eps=0.3, masked=False, rng=np.random.default_rng(0),
                  max_steps=5, graph=None),
     skip={"max_steps": {"none"}, "graph": {"none"}},  # None: 3 * distance + 2 n / bw_graph(n)
     more={"start": _BADBW, "dist": [{}], "eps": [1.5], "rng": [0], "graph": [{}]})
case("dsl_harness.binomial_z", dsl.binomial_z, lambda: dict(successes=1, probs=[0.5, 0.5]),
     more={"successes": [3], "probs": [[1.5, 0.5]]})
case("dsl_harness.agent_episode", dsl.agent_episode,
     lambda: dict(con=_CON, intent=_INT, interface="dsl", eps=0.2, rng=np.random.default_rng(0), retries=1,
                  cache={}),
     skip={"cache": {"none"}}, more={"eps": [1.5], "rng": [0], "intent": [3]})
case("dsl_harness.reinforce_program", dsl.reinforce_program,
     lambda: dict(con=_CON, intent=_INT, arm="sparse", steps=1, batch=2, lr=1.0, seed=0, cache={}),
     skip={"cache": {"none"}}, more={"steps": ["zero"], "batch": [1], "lr": ["zero", "neg"]})
case("dsl_harness.steps_to_level", dsl.steps_to_level, lambda: dict(curve=[0.1, 0.5, 0.9], level=0.5, window=2),
     skip={"curve": {"empty"}},  # an empty curve never reaches the level
     more={"window": ["zero"], "curve": [[[0.1]]]})


# --------------------------------------------------------------------------------------------------- tree_cycle_pe
from helpers import tree_cycle_pe as tcp  # noqa: E402

_MOL = tcp.parse_smiles("C1CC1O")
_SER = tcp.serialize("C1CC1O")
_FZ = [tcp.featurize("C1CC1O"), tcp.featurize("CCO")]
_VOC = tcp.Vocab([k for f in _FZ for k in f.atom_keys])
_FZV = [tcp.featurize(f.smiles, _VOC) for f in _FZ]
_CB = tcp.collate(_FZV)
_GB = tcp.graph_batch(_FZV, _VOC)
_SEQ = tcp.SeqEncoder(len(_VOC), pe="tree_cycle", d_model=8, n_layer=1, n_head=2, d_ff=8)
_GIN = tcp.GIN(len(_VOC), d=8, n_layer=1)
_GRL = tcp.GraphormerLite(len(_VOC), d_model=8, n_layer=1, n_head=2, d_ff=8)
_TPE = tcp.TreeCyclePE(8)
_SMI_BAD = ["C1CC", "", "C(("]
_BADBATCH = [{"ids": _CB["ids"]}, {**_CB, "ids": _CB["ids"] + 100}, {**_CB, "pad": _CB["pad"].long()}]

case("tree_cycle_pe.parse_smiles", tcp.parse_smiles, lambda: dict(smiles="CCO"), more={"smiles": _SMI_BAD})
case("tree_cycle_pe.rooted_smiles", tcp.rooted_smiles, lambda: dict(mol=_MOL, root=1),
     more={"root": [4], "mol": ["C1CC"]})
case("tree_cycle_pe.random_smiles", tcp.random_smiles, lambda: dict(mol="CCO", n=2, seed=0),
     more={"n": ["zero"], "mol": [_SMI_BAD[0]]})
case("tree_cycle_pe.tokenize", tcp.tokenize, lambda: dict(smiles="CCO"), skip={"smiles": {"unknown"}},
     more={"smiles": ["C?C"]})  # (tokenizing does not check chemistry)
case("tree_cycle_pe.atom_key", tcp.atom_key, lambda: dict(atom=_MOL.GetAtomWithIdx(0)))
case("tree_cycle_pe.cycle_rank", tcp.cycle_rank, lambda: dict(mol=_MOL), more={"mol": _SMI_BAD})
case("tree_cycle_pe.canonical_ranks", tcp.canonical_ranks, lambda: dict(mol=_MOL))
case("tree_cycle_pe.serialize", tcp.serialize, lambda: dict(smiles="CCO"), more={"smiles": _SMI_BAD})
case("tree_cycle_pe.tree_paths", tcp.tree_paths, lambda: dict(ser=_SER, n_child=4, depth=8),
     more={"n_child": ["zero"], "depth": ["zero"]})
case("tree_cycle_pe.canonical_cycle_basis", tcp.canonical_cycle_basis,
     lambda: dict(mol=_MOL, ranks=tcp.canonical_ranks(_MOL)),
     skip={"ranks": {"none"}}, more={"ranks": [np.zeros(4, int), np.arange(3), np.arange(4.0)]})
case("tree_cycle_pe.cycle_features", tcp.cycle_features,
     lambda: dict(mol=_MOL, ranks=None, basis=tcp.canonical_cycle_basis(_MOL)),
     skip={"basis": {"none"}, "ranks": {"none"}}, more={"basis": [[(0, 1, 9)], [(0, 1)], ["x"]]})
case("tree_cycle_pe.sorted_rows", tcp.sorted_rows,
     lambda: dict(keys=["a", "b"], feats=np.ones((2, 3)), decimals=3),
     more={"keys": [[1, 2]], "feats": [np.ones((3, 3))]})
case("tree_cycle_pe.multiset_diff", tcp.multiset_diff,
     lambda: dict(a=tcp.sorted_rows(["a"], np.ones((1, 2))), b=tcp.sorted_rows(["a"], np.zeros((1, 2)))),
     more={"a": [[1, 2]]})
case("tree_cycle_pe.Vocab", tcp.Vocab, lambda: dict(atom_keys=["C+0H3"]), more={"atom_keys": [[1]]})
case("tree_cycle_pe.Vocab.id", _VOC.id, lambda: dict(s="C+0H3"), skip={"s": {"unknown"}})  # unknown -> UNK
case("tree_cycle_pe.featurize", tcp.featurize, lambda: dict(smiles="CCO", vocab=_VOC),
     skip={"vocab": {"none"}}, more={"smiles": _SMI_BAD})
case("tree_cycle_pe.collate", tcp.collate, lambda: dict(items=_FZV, atoms_only=False, max_len=8),
     skip={"max_len": {"none"}}, more={"items": [[], [3]], "max_len": [1]})
case("tree_cycle_pe.graph_batch", tcp.graph_batch, lambda: dict(items=_FZV, vocab=_VOC), more={"items": [[]]})
case("tree_cycle_pe.TreeCyclePE", tcp.TreeCyclePE, lambda: dict(d_model=8, parts=("tree",), copies=2),
     more={"parts": [(), ("nope",)], "copies": ["zero"]})
case("tree_cycle_pe.TreeCyclePE.forward", _TPE.forward,
     lambda: dict(tree=_CB["tree"], cycle=_CB["cycle"], parts=("cycle",)),
     skip={"parts": {"none"}, "tree": {"ndim"}, "cycle": {"ndim", "empty"}},  # (any leading shape)
     more={"tree": [_CB["tree"] + 9, _CB["tree"].float()], "cycle": [_CB["cycle"][..., :3]]})
case("tree_cycle_pe.SeqEncoder", tcp.SeqEncoder,
     lambda: dict(vocab_size=10, pe="tree", d_model=8, n_layer=1, n_head=2, d_ff=8, n_out=1, n_node=0),
     more={"n_head": [3], "vocab_size": ["zero"]})
case("tree_cycle_pe.SeqEncoder.forward", _SEQ.forward, lambda: dict(batch=_CB, parts=None),
     more={"batch": _BADBATCH}, only=("batch",))
case("tree_cycle_pe.GIN", tcp.GIN, lambda: dict(vocab_size=10, d=8, n_layer=1, n_out=1, n_node=0),
     more={"d": ["zero"]})
case("tree_cycle_pe.GIN.forward", _GIN.forward, lambda: dict(g=_GB))
case("tree_cycle_pe.GraphormerLite", tcp.GraphormerLite,
     lambda: dict(vocab_size=10, d_model=8, n_layer=1, n_head=2, d_ff=8, n_out=1, n_node=0),
     more={"n_head": [3]})
case("tree_cycle_pe.GraphormerLite.forward", _GRL.forward, lambda: dict(g=_GB))
case("tree_cycle_pe.random_ring_system", tcp.random_ring_system,
     lambda: dict(rng=np.random.default_rng(0), kind="fused", n_ops=1),
     skip={"kind": {"none"}, "n_ops": {"none"}}, more={"rng": [0], "n_ops": [100]})  # None: drawn at random
case("tree_cycle_pe.ring_count_targets", tcp.ring_count_targets, lambda: dict(mol="C1CC1"),
     more={"mol": _SMI_BAD})
case("tree_cycle_pe.alert_atoms", tcp.alert_atoms, lambda: dict(mol="CCO"), more={"mol": _SMI_BAD})
case("tree_cycle_pe.alert_match", tcp.alert_match, lambda: dict(mol="CCO", name="nitro_group"),
     skip={"name": {"unknown"}}, more={"mol": _SMI_BAD, "name": ["not an alert"]})
case("tree_cycle_pe.alignment_at_k", tcp.alignment_at_k,
     lambda: dict(scores=np.array([0.1, 2.0, 1.0]), atoms={1}), more={"atoms": [set(), {0, 1, 2}, {5}]})
case("tree_cycle_pe.centred_cosine", tcp.centred_cosine,
     lambda: dict(a=np.ones((2, 3)), b=np.zeros((2, 3)), centre=np.zeros(3)),
     more={"b": [np.zeros((3, 3))], "centre": [np.zeros(2)]})
case("tree_cycle_pe.dropped_atoms", tcp.dropped_atoms, lambda: dict(batch=_CB, items=_FZV),
     more={"items": [[], _FZV[:1]]})
case("tree_cycle_pe.make_model", tcp.make_model,
     lambda: dict(kind="gin_cycle", vocab_size=10, n_out=1, n_node=0, seed=0, width=8),
     more={"kind": ["rope"], "width": [2]})


# ------------------------------------------------------------------------------------------------- transformer_dfs
from helpers import transformer_dfs as tdfs  # noqa: E402

_E4 = np.array([[0, 1], [1, 2], [0, 3]])
_A4 = np.zeros((4, 4), bool)
_A4[_E4[:, 0], _E4[:, 1]] = True
_EMB4 = tdfs.one_hot_embeddings(4)
_TWO, _ONE = tdfs.TwoLayerDFS(_EMB4), tdfs.OneLayerDFS(_EMB4)
_SST = tdfs.structured_states(4, 6, (4, 6), 0.5, np.random.default_rng(0), "full")
_SB = tdfs.structured_batch(_SST)
_SDFS = tdfs.StructuredDFS(np.eye(6))
_SONE = tdfs.StructuredOneLayer(np.eye(6))
_POOL = tdfs.make_state_pool(2, 6, (4, 6), 0.5, np.random.default_rng(0), balanced=False)
_CODEC = tdfs.TokenCodec(6)
_BADE = [[(0, 9)], [(1, 1)], [(0, 1), (0, 1)], [(0, 1.5)], [(0, 1, 2)], "x"]
_BADTR = [[], [0, 9], [0.5], [None]]
_BADADJ = [np.ones((3, 4), bool), np.full((4, 4), 0.5), np.zeros((0, 0), bool)]

case("transformer_dfs.check_graph", tdfs.check_graph, lambda: dict(n=4, edges=_E4),
     skip={"edges": {"empty", "ndim"}},  # no edges is a graph; (ndim: wrong shapes below)
     more={"edges": _BADE + [np.zeros((2, 3), int)]})
case("transformer_dfs.random_digraph", tdfs.random_digraph,
     lambda: dict(n=4, rng=np.random.default_rng(0), p=0.5, out_degree=None),
     skip={"p": {"none"}, "out_degree": {"none"}}, more={"n": [1], "p": [1.5, "neg"], "rng": [0]})
case("transformer_dfs.random_digraph(out_degree)", tdfs.random_digraph,
     lambda: dict(n=4, rng=np.random.default_rng(0), p=None, out_degree=(1, 2)), only=("out_degree",),
     more={"out_degree": [(2, 1), (1, 5), (1,), (1.5, 2)]})
case("transformer_dfs.edge_list", tdfs.edge_list, lambda: dict(adj=_A4), skip={"adj": {"ndim"}},
     more={"adj": _BADADJ})
case("transformer_dfs.dfs_trace", tdfs.dfs_trace, lambda: dict(n=4, edges=_E4, s=0, t=3),
     skip={"edges": {"empty", "ndim"}, "t": {"none"}}, more={"s": [4], "t": [4], "edges": _BADE})
case("transformer_dfs.networkx_dfs_walk", tdfs.networkx_dfs_walk, lambda: dict(n=4, edges=_E4, s=0, t=3),
     skip={"edges": {"empty", "ndim"}, "t": {"none"}}, more={"s": [4], "t": [4]})
case("transformer_dfs.dfs_state", tdfs.dfs_state, lambda: dict(trace=[0, 1]), more={"trace": [[], [-1], [0.5]]})
case("transformer_dfs.next_step", tdfs.next_step, lambda: dict(adj=_A4, trace=[0, 1]),
     skip={"adj": {"ndim"}}, more={"adj": _BADADJ, "trace": _BADTR})
case("transformer_dfs.is_valid_step", tdfs.is_valid_step, lambda: dict(adj=_A4, trace=[0, 1], nxt=2),
     skip={"adj": {"ndim"}, "nxt": {"none", "neg"}},  # None = STOP, -1 = not a node: both are just invalid moves
     more={"adj": _BADADJ, "trace": _BADTR})
case("transformer_dfs.sample_states", tdfs.sample_states,
     lambda: dict(adj=_A4, rng=np.random.default_rng(0), n_states=2, kind="any"),
     skip={"adj": {"ndim"}}, more={"n_states": ["zero"], "rng": [0], "adj": _BADADJ})
case("transformer_dfs.lookahead_trace", tdfs.lookahead_trace, lambda: dict(adj=_A4, s=0, t=3, horizon=2),
     skip={"adj": {"ndim"}}, more={"s": [4], "adj": _BADADJ})
case("transformer_dfs.sign_embeddings", tdfs.sign_embeddings, lambda: dict(n=4, d=2, rng=np.random.default_rng(0)),
     more={"d": ["zero"], "rng": [0]})
case("transformer_dfs.one_hot_embeddings", tdfs.one_hot_embeddings, lambda: dict(n=4), more={"n": ["zero"]})
case("transformer_dfs.TwoLayerDFS", tdfs.TwoLayerDFS,
     lambda: dict(emb=_EMB4, beta1=100.0, c_prev=30.0, beta2=50.0, tau=80.0, lam=30.0),
     skip={"beta2": {"none"}, "tau": {"none"}},  # None: the construction's defaults
     more={"emb": [np.ones(4)], "beta1": ["zero", "neg"], "beta2": ["neg"], "tau": ["zero"]})
for _nm in ("forward", "step", "fast_logits", "fast_step", "embed"):
    case(f"transformer_dfs.TwoLayerDFS.{_nm}", getattr(_TWO, _nm), lambda: dict(edges=_E4, trace=[0, 1]),
         skip={"edges": {"empty", "ndim"}}, more={"edges": _BADE, "trace": _BADTR})
case("transformer_dfs.LookaheadDFS", tdfs.LookaheadDFS, lambda: dict(emb=_EMB4, horizon=2, beta1=100.0),
     more={"emb": [np.ones(4)], "horizon": [0, 3], "beta1": ["zero"]})
case("transformer_dfs.LookaheadDFS.forward", tdfs.LookaheadDFS(_EMB4).forward,
     lambda: dict(edges=_E4, trace=[0, 1], t=3), skip={"edges": {"empty", "ndim"}},
     more={"edges": _BADE, "trace": _BADTR, "t": [4]})
case("transformer_dfs.OneLayerDFS", tdfs.OneLayerDFS, lambda: dict(emb=_EMB4, gamma=4.0, beta=60.0),
     more={"gamma": ["neg"], "beta": ["zero"]})
for _nm in ("forward", "step"):
    case(f"transformer_dfs.OneLayerDFS.{_nm}", getattr(_ONE, _nm), lambda: dict(edges=_E4, trace=[0, 1]),
         skip={"edges": {"empty", "ndim"}}, more={"edges": _BADE, "trace": _BADTR})
case("transformer_dfs.rollout", tdfs.rollout, lambda: dict(model=_TWO, n=4, edges=_E4, s=0, t=3, max_steps=10),
     skip={"edges": {"empty", "ndim"}, "t": {"none"}, "max_steps": {"none"}},
     more={"model": [3], "s": [4], "t": [9], "max_steps": ["zero"]})
case("transformer_dfs.child_accuracy", tdfs.child_accuracy,
     lambda: dict(model=_TWO, adj=_A4, states=[[0], [0, 1]], fast=True),
     skip={"adj": {"ndim"}}, more={"states": [[], [[0, 9]]], "model": [3], "adj": _BADADJ})
case("transformer_dfs.width_needed", tdfs.width_needed, lambda: dict(dims=[2, 4], accs=[0.5, 0.99], target=0.95),
     more={"accs": [[0.5], [0.5, 1.5]], "dims": [[0, 4]], "target": [1.5]})
case("transformer_dfs.width_bisect", tdfs.width_bisect,
     lambda: dict(acc_at=lambda d: float(d >= 4), dims=[2, 4, 8], target=0.95),
     more={"dims": [[], [4, 2]], "acc_at": [3], "target": [2.0]})
case("transformer_dfs.fit_exponent", tdfs.fit_exponent, lambda: dict(ns=[4.0, 8.0, 16.0], ws=[2.0, 4.0, 8.0]),
     skip={"ns": {"empty"}, "ws": {"nan"}},  # (a nan width: the target was never reached; an empty fit is nan)
     more={"ns": [[0.0, 1.0, 2.0]], "ws": [[1.0, 2.0], [-1.0, 2.0, 3.0]]})
case("transformer_dfs.TokenCodec", tdfs.TokenCodec, lambda: dict(V=6), more={"V": [1]})
case("transformer_dfs.TokenCodec.encode", _CODEC.encode, lambda: dict(edges=_E4, trace=[0, 1]),
     skip={"edges": {"empty", "ndim"}}, more={"edges": _BADE, "trace": _BADTR})
case("transformer_dfs.make_state_pool", tdfs.make_state_pool,
     lambda: dict(n_graphs=1, V=6, n_range=(4, 6), p=0.5, rng=np.random.default_rng(0), balanced=True,
                  exclude=set()),
     skip={"exclude": {"none"}, "n_graphs": {"zero"}},
     more={"n_range": [(1, 3), (4, 9), (4,)], "p": [1.5], "rng": [0], "V": [1], "exclude": [[1]]})
case("transformer_dfs.collate", tdfs.collate, lambda: dict(items=_POOL[:2], codec=_CODEC),
     more={"items": [[], [{}], [3]], "codec": [3]})
case("transformer_dfs.structured_states", tdfs.structured_states,
     lambda: dict(n_states=2, V=6, n_range=(4, 6), p=0.5, rng=np.random.default_rng(0), data="full",
                  exclude=None),
     skip={"exclude": {"none"}}, more={"n_states": ["zero"], "p": ["zero"], "n_range": [(4, 9)], "rng": [0]})
case("transformer_dfs.structured_batch", tdfs.structured_batch, lambda: dict(items=_SST),
     more={"items": [[], [{}]]})
for _nm, _m in (("StructuredDFS", tdfs.StructuredDFS), ("StructuredOneLayer", tdfs.StructuredOneLayer)):
    case(f"transformer_dfs.{_nm}", _m, lambda: dict(emb=np.eye(6), tau=1.0, rho=10.0, init=0.0),
         more={"rho": ["zero", "neg"], "emb": [np.ones(6)]})
_BADSB = [{"src": _SB["src"]}, {**_SB, "dst": _SB["dst"] + 10}, {**_SB, "parent": _SB["parent"] - 5}]
case("transformer_dfs.StructuredDFS.forward", _SDFS.forward, lambda: dict(b=_SB, record=False),
     more={"b": _BADSB})
case("transformer_dfs.StructuredDFS.set_construction", _SDFS.set_construction, lambda: dict(beta=5.0))
case("transformer_dfs.StructuredOneLayer.forward", _SONE.forward, lambda: dict(b=_SB), more={"b": _BADSB})
case("transformer_dfs.matrix_cosine", tdfs.matrix_cosine, lambda: dict(W=np.eye(3), M=np.ones((3, 3))),
     skip={"M": {"none"}}, more={"M": [np.ones((2, 2))], "W": [np.ones(3)]})
case("transformer_dfs.move_accuracy", tdfs.move_accuracy,
     lambda: dict(logits=torch.zeros(len(_SST), 6), b=_SB),
     skip={"logits": {"nan"}}, more={"logits": [torch.zeros(2, 6)], "b": [{}]})
case("transformer_dfs.gradient_flow", tdfs.gradient_flow,
     lambda: dict(model=tdfs.StructuredDFS(np.eye(6)), batch=_SB, steps=1, lr=0.1, evals=None, eval_every=1,
                  progress=False, method="gd"),
     skip={"evals": {"none"}}, more={"lr": ["zero", "neg"], "eval_every": ["zero"], "evals": [3]})
case("transformer_dfs.checkpoint_config", tdfs.checkpoint_config, lambda: dict(name="width_limited"))
case("transformer_dfs.width_limited_data", tdfs.width_limited_data,
     lambda: dict(cfg={**tdfs.checkpoint_config(), "n_train": 2, "n_test": 2}, seed=0),
     more={"cfg": [{}]})
case("transformer_dfs.make_structured", tdfs.make_structured,
     lambda: dict(kind="two", emb=np.eye(6), cfg={"tau": 1.0}))


# ----------------------------------------------------------------------------------------------- algorithmic_cores
from helpers import algorithmic_cores as acx  # noqa: E402

_H = np.random.default_rng(0).normal(size=(20, 3))
_WH = np.random.default_rng(1).normal(size=(2, 3))
_COV, _OBS = acx.controllability_gramian(_H), acx.linear_observability(_WH)
_CORE = acx.balanced_core(_COV, _OBS, mean=_H.mean(0))
_Q2 = _CORE.basis[:, :2]
_TC = acx.cyclic_transition(4, 0.75)
_LIN = torch.nn.Linear(3, 3)
_BADMAT = [np.ones(3), np.zeros((0, 3)), np.array([["a"]])]

case("algorithmic_cores.controllability_gramian", acx.controllability_gramian, lambda: dict(H=_H),
     more={"H": _BADMAT + [_H[:1]]})
case("algorithmic_cores.linear_observability", acx.linear_observability, lambda: dict(W=_WH), more={"W": _BADMAT})
case("algorithmic_cores.observability_gramian", acx.observability_gramian,
     lambda: dict(tail=lambda h: h @ torch.ones(3, 2), H=_H, samples=4, seed=0),
     more={"tail": [3], "samples": ["zero"], "H": _BADMAT})
case("algorithmic_cores.Core", acx.Core, lambda: dict(basis=_CORE.basis, hsv=_CORE.hsv, rank=1, mean=np.zeros(3)),
     skip={"hsv": {"empty"}},  # (no singular values: a degenerate but consistent record)
     more={"rank": [4], "hsv": [-_CORE.hsv], "mean": [np.zeros(2)], "basis": [np.ones((2, 3))]})
case("algorithmic_cores.Core.with_rank", _CORE.with_rank, lambda: dict(r=1), more={"r": [4]})
case("algorithmic_cores.energy_rank", acx.energy_rank, lambda: dict(hsv=_CORE.hsv, threshold=0.9),
     more={"threshold": ["zero", 1.5], "hsv": [np.zeros(3), -np.ones(3)]})
case("algorithmic_cores.balanced_core", acx.balanced_core,
     lambda: dict(cov=_COV, obs=_OBS, threshold=0.99, eps=1e-8, mean=np.zeros(3)),
     skip={"mean": {"none"}}, more={"obs": [np.eye(2)], "threshold": ["zero"], "eps": ["zero"],
                                   "mean": [np.zeros(2)]})
case("algorithmic_cores.ace", acx.ace, lambda: dict(H=_H, tail=None, W=_WH, threshold=0.99, samples=4, seed=0),
     skip={"W": {"none"}, "tail": {"none"}},  # None: the other one of tail / W is used
     more={"W": [np.ones((2, 4))], "threshold": [1.5]})
case("algorithmic_cores.intervene_array", acx.intervene_array,
     lambda: dict(h=_H, Q=_Q2, mode="flip", mean=np.zeros(3)),
     skip={"mean": {"none"}, "h": {"ndim", "empty"}},  # h is (..., D); (no rows: nothing to change)
     more={"Q": [np.ones((4, 2)), np.ones((3, 4))], "h": [np.ones((2, 5))], "mean": [np.zeros(2)]})
case("algorithmic_cores.intervene", lambda **kw: acx.intervene(**kw).__enter__(),
     lambda: dict(module=_LIN, Q=_Q2, mode="keep", mean=None), skip={"mean": {"none"}},
     more={"module": [3], "Q": [np.ones((2, 3))], "mean": [np.zeros(2)]})
case("algorithmic_cores.refine_rank", acx.refine_rank,
     lambda: dict(core=_CORE, keep_acc=lambda Q: 1.0, remove_acc=lambda Q: 0.0, base=1.0, chance=0.5, tol=1e-3,
                  r_max=3),
     skip={"r_max": {"none"}}, more={"core": [3], "keep_acc": [3], "tol": ["neg"], "r_max": ["zero"]})
case("algorithmic_cores.fit_linear_dynamics", acx.fit_linear_dynamics, lambda: dict(z_now=_H, z_next=_H * 2),
     more={"z_next": [_H[:3]]})
case("algorithmic_cores.transition_spectrum", acx.transition_spectrum, lambda: dict(T=_TC),
     more={"T": [np.ones((2, 2)), np.ones((2, 3)) / 3]})
case("algorithmic_cores.markov_oracle_r2", acx.markov_oracle_r2, lambda: dict(T=_TC),
     more={"T": [np.ones((2, 2)), np.eye(1)]})
case("algorithmic_cores.shift_operator_eigs", acx.shift_operator_eigs,
     lambda: dict(reps=np.random.default_rng(0).normal(size=(5, 3)), tol=1e-3, k_max=3),
     skip={"k_max": {"none"}}, more={"reps": [np.ones((2, 3))], "tol": ["zero"], "k_max": ["zero"]})
case("algorithmic_cores.ring_fraction", acx.ring_fraction, lambda: dict(eigs=np.array([1.0, 0.5]), p=5),
     skip={"eigs": {"empty"}}, more={"p": [1]})
case("algorithmic_cores.mode_count", acx.mode_count, lambda: dict(eigs=np.array([1.0, 0.5]), p=5),
     skip={"eigs": {"empty"}}, more={"p": [1]})
case("algorithmic_cores.principal_angles_deg", acx.principal_angles_deg, lambda: dict(Q1=_Q2, Q2=_Q2),
     more={"Q2": [np.ones((4, 2))]})
case("algorithmic_cores.projector_overlap", acx.projector_overlap, lambda: dict(Q1=_Q2, Q2=_Q2),
     more={"Q2": [np.ones((4, 2)), np.ones((2, 3))]})
case("algorithmic_cores.cca", acx.cca, lambda: dict(X=_H, Y=_H[:, :2], reg=1e-9),
     more={"Y": [_H[:3]], "reg": ["neg"]})
case("algorithmic_cores.cyclic_transition", acx.cyclic_transition, lambda: dict(V=4, stay=0.5),
     more={"V": [1], "stay": [1.5, "neg"]})
_MODADD = acx.modadd_model(p=5, d=8, n_head=2)
_ROWS = torch.tensor([[a, b, (a + b) % 5] for a in range(5) for b in range(5)])
case("algorithmic_cores.modadd_loss", acx.modadd_loss, lambda: dict(model=_MODADD, rows=_ROWS),
     more={"model": [3], "rows": [_ROWS.float()]})
case("algorithmic_cores.isolation_gap", acx.isolation_gap,
     lambda: dict(train_acc=[1.0, 0.9], test_acc=[0.1, 0.2], restored=[True, True], gen_acc=0.95),
     more={"restored": [[1, 0], [True]], "train_acc": [[1.5, 0.9]], "test_acc": [[0.1]], "gen_acc": [1.5]})
case("algorithmic_cores.markov_sequences", acx.markov_sequences, lambda: dict(T=_TC, n=2, length=3, seed=0),
     more={"n": ["zero"], "length": [1], "T": [np.ones((2, 2))]})
case("algorithmic_cores.modadd_split", acx.modadd_split, lambda: dict(p=5, train_frac=0.5, seed=0),
     more={"p": [1], "train_frac": [1.0, "zero"]})
case("algorithmic_cores.grok_step", acx.grok_step, lambda: dict(steps=[1, 2], test_acc=[0.5, 1.0], threshold=0.9),
     more={"test_acc": [[0.5]], "steps": [[1.5, 2]]})
case("algorithmic_cores.memorise_generalise", acx.memorise_generalise,
     lambda: dict(steps=[1, 2], train_acc=[0.5, 1.0], test_acc=[0.2, 0.96], mem_acc=0.99, gen_acc=0.95),
     more={"mem_acc": [1.5, "neg"], "gen_acc": [1.5], "train_acc": [[0.5], [0.5, 1.5], [0.5, math.nan]],
           "test_acc": [[0.2, -0.1]], "steps": [[1.5, 2]]})  # mem_acc=1.5 was accepted (never memorised) (#58)
case("algorithmic_cores.choose_checkpoints", acx.choose_checkpoints,
     lambda: dict(log={"step": [10, 20], "train_acc": [1.0, 1.0], "test_acc": [0.1, 1.0]}, n_analysed=3,
                  mem_acc=0.99, gen_acc=0.95, eval_every=10),
     more={"log": [{"step": [10]}, {}], "mem_acc": [1.5], "gen_acc": [-0.5]})  # a bare KeyError before (#58)
case("algorithmic_cores.loglog_slope", acx.loglog_slope, lambda: dict(x=[1.0, 2.0, 4.0], y=[1.0, 2.0, 4.0]),
     more={"x": [[0.0, 1.0, 2.0], [1.0]], "y": [[1.0, 2.0]]})


# ------------------------------------------------------------------------------------------- explainability_vector
from helpers import explainability_vector as xv  # noqa: E402

_DOM = xv.make_domain("source", 3, 0)
_VIT = xv.TinyViT(d_model=8, depth=1, n_head=2, emb_dim=4, stem=4)
_PS = torch.randn(3, xv.N_PATCH, 2, generator=torch.Generator().manual_seed(0))
_SD0 = {"a": torch.zeros(2, 3), "b": torch.ones(4)}
_SD1 = {"a": torch.ones(2, 3), "b": torch.zeros(4)}
_MAPS = torch.randn(3, xv.N_PATCH, generator=torch.Generator().manual_seed(1))


def _prob(x: torch.Tensor) -> torch.Tensor:
    return x.mean((1, 2, 3))


case("explainability_vector.make_domain", xv.make_domain, lambda: dict(name="source", n=2, seed=0),
     more={"n": ["zero"], "name": ["shapes"]})
case("explainability_vector.Domain", xv.Domain,
     lambda: dict(name="d", images=_DOM.images, labels=_DOM.labels, mask=_DOM.mask, classes=_DOM.classes),
     skip={"name": {"unknown"}},  # any label
     more={"images": [_DOM.images[:, :2]], "labels": [_DOM.labels + 9, _DOM.labels[:1]], "mask": [_DOM.mask * 3],
           "classes": [[], [99]]})
case("explainability_vector.class_embeddings", xv.class_embeddings, lambda: dict(dim=4, seed=0),
     more={"dim": ["zero"]})
case("explainability_vector.TinyViT", xv.TinyViT,
     lambda: dict(d_model=8, depth=1, n_head=2, emb_dim=4, stem=4, scale=10.0),
     more={"n_head": [3], "scale": ["zero", "neg"], "stem": ["zero"]})
case("explainability_vector.TinyViT.forward", _VIT.forward, lambda: dict(x=_DOM.images, classes=_DOM.classes),
     more={"x": [_DOM.images[:, :, :8]], "classes": [[], [99], [0.5]]})
case("explainability_vector.TinyViT.tokens", _VIT.tokens, lambda: dict(x=_DOM.images),
     more={"x": [_DOM.images[:, :1]]})
case("explainability_vector.explanation_loss", xv.explanation_loss,
     lambda: dict(patch_scores=_PS, labels=torch.tensor([0, 1, 1]), mask=_DOM.mask),
     skip={"patch_scores": {"nan"}},  # the model's output is not scanned for NaN (a hot path)
     more={"labels": [torch.tensor([0, 1, 5]), torch.tensor([0, 1])], "mask": [_DOM.mask[:, :3]]})
case("explainability_vector.task_vector", xv.task_vector, lambda: dict(finetuned=_SD1, base=_SD0),
     more={"base": [{"a": torch.zeros(2, 3)}, {"a": torch.zeros(3, 2), "b": torch.ones(4)},
                    {"a": torch.full((2, 3), math.nan), "b": torch.ones(4)}, {"a": 1, "b": 2}]})
case("explainability_vector.add_vector", xv.add_vector, lambda: dict(base=_SD0, tau=_SD1, lam=0.5),
     more={"tau": [{"c": torch.zeros(1)}, {"a": torch.zeros(3)}]})
case("explainability_vector.flat", xv.flat, lambda: dict(tau=_SD1), more={"tau": [{}, {"a": "x"}]})
case("explainability_vector.patch_auroc", xv.patch_auroc, lambda: dict(maps=_MAPS, mask=_DOM.mask, thresh=0.25),
     more={"mask": [_DOM.mask[:2]]})
case("explainability_vector.pointing_game", xv.pointing_game,
     lambda: dict(maps=_MAPS, mask=_DOM.mask, thresh=0.25), more={"mask": [_DOM.mask[:, :3]]})
case("explainability_vector.true_prob", xv.true_prob,
     lambda: dict(model=_VIT, classes=_DOM.classes, labels=_DOM.labels),
     skip={"labels": {"empty"}},  # an empty batch: an empty probability vector
     more={"labels": [_DOM.labels + 99], "classes": [[], [99]]})
case("explainability_vector.gradient_map", xv.gradient_map,
     lambda: dict(model=_VIT, x=_DOM.images, classes=_DOM.classes, labels=_DOM.labels),
     more={"labels": [_DOM.labels[:1], _DOM.labels + 99], "x": [_DOM.images[:, :1]]})
case("explainability_vector.loo_predictions", xv.loo_predictions,
     lambda: dict(features=[1.0, 2.0, 3.0, 4.0], y=[1.0, 3.0, 2.0, 4.0]),
     more={"y": [[1.0, 2.0]], "features": [[1.0, 2.0]]})
case("explainability_vector.deletion_insertion", xv.deletion_insertion,
     lambda: dict(prob_fn=_prob, x=_DOM.images, maps=_MAPS, steps=2),
     more={"steps": ["zero"], "prob_fn": [3], "maps": [_MAPS[:2]]})
case("explainability_vector.kernel_shap", xv.kernel_shap,
     lambda: dict(prob_fn=_prob, x=_DOM.images, n_coalitions=6, seed=0),
     more={"n_coalitions": [3], "prob_fn": [3]})
case("explainability_vector.map_entropy", xv.map_entropy, lambda: dict(maps=_MAPS, temperature=0.1),
     more={"temperature": ["zero", "neg"]})
case("explainability_vector.linear_cka", xv.linear_cka, lambda: dict(X=_MAPS, Y=_MAPS[:, :3] * 2),
     more={"Y": [_MAPS[:2], torch.ones(3, 2)]})
case("explainability_vector.spearman_perm", xv.spearman_perm,
     lambda: dict(x=[1.0, 2.0, 3.0, 4.0], y=[1.0, 3.0, 2.0, 4.0], n_perm=10, seed=0),
     skip={"x": {"empty"}}, more={"y": [[1.0, 2.0]], "n_perm": ["zero"]})


# ------------------------------------------------------------------------------------------------ transfer_entropy
from helpers import transfer_entropy as te  # noqa: E402

_TX, _TY, _TYN = te.linear_gaussian_system(30, [0.5, 0.2], seed=0)
_VLM = te.TinyVLM(n_patches=4, patch_dim=3, n_questions=2, n_answers=3, d_model=8, n_layer=1, n_head=2)
_PATCHES = torch.zeros(2, 4, 3)
_QN = torch.tensor([0, 1])
_BADTR3 = [_TX[:5], np.full((30, 2), math.nan), np.zeros((30, 2, 2))]

case("transfer_entropy.gaussian_cmi", te.gaussian_cmi, lambda: dict(A=_TYN, B=_TX, C=_TY, ridge=1e-6),
     skip={"A": {"ndim"}, "B": {"ndim"}, "C": {"ndim", "none"}},  # 1-D = one dimension; C None: I(A; B)
     more={"ridge": ["neg"], "B": _BADTR3, "A": [_TYN[:2]]})
case("transfer_entropy.gaussian_te", te.gaussian_te,
     lambda: dict(source=_TX, target_now=_TY, target_next=_TYN, ridge=0.0),
     skip={"source": {"ndim"}, "target_now": {"ndim"}, "target_next": {"ndim"}},
     more={"source": _BADTR3, "ridge": ["neg"]})
case("transfer_entropy.ksg_cmi", te.ksg_cmi, lambda: dict(A=_TYN, B=_TX, C=_TY, k=3),
     skip={"A": {"ndim"}, "B": {"ndim"}, "C": {"ndim", "none"}}, more={"k": ["zero", 30], "B": _BADTR3})
case("transfer_entropy.permutation_null", te.permutation_null,
     lambda: dict(estimator=te.gaussian_cmi, A=_TYN, B=_TX, C=_TY, n_perm=3, seed=0),
     skip={"A": {"ndim"}, "B": {"ndim"}, "C": {"ndim", "none"}}, more={"estimator": [3], "n_perm": ["zero"]})
case("transfer_entropy.pca_reduce", te.pca_reduce, lambda: dict(X=_TX, k=1, fit_on=_TX, rtol=1e-6),
     skip={"X": {"ndim"}, "fit_on": {"ndim", "none"}}, more={"k": ["zero"], "rtol": ["neg"],
                                                           "fit_on": [np.ones((3, 5))]})
case("transfer_entropy.linear_gaussian_te_truth", te.linear_gaussian_te_truth, lambda: dict(b=[0.5, 0.2], sigma=1.0),
     more={"sigma": ["zero", "neg"], "b": [[[0.5]], [math.nan], []]})
case("transfer_entropy.linear_gaussian_system", te.linear_gaussian_system,
     lambda: dict(n=5, b=[0.5], a=0.5, sigma=1.0, seed=0), more={"n": [2], "sigma": ["neg"], "b": [[math.inf]]})
case("transfer_entropy.head_mask", lambda **kw: te.head_mask(**kw).__enter__(),
     lambda: dict(model=_VLM, mask=np.ones((1, 2))), more={"mask": [np.ones((2, 2))], "model": [torch.nn.Linear(2, 2)]})
case("transfer_entropy.head_writes", lambda **kw: te.head_writes(**kw).__enter__(),
     lambda: dict(model=_VLM, store=[]), more={"model": [torch.nn.Linear(2, 2)]})
case("transfer_entropy.digits_patches", te.digits_patches, lambda: dict(images=np.zeros((2, 8, 8)), patch=2),
     more={"patch": [3, "zero"], "images": [np.zeros((2, 7, 8))]})
case("transfer_entropy.TinyVLM", te.TinyVLM,
     lambda: dict(n_patches=4, patch_dim=3, n_questions=2, n_answers=3, d_model=8, n_layer=1, n_head=2),
     more={"n_head": [3], "n_answers": ["zero"]})
case("transfer_entropy.TinyVLM.forward", _VLM.forward,
     lambda: dict(patches=_PATCHES, question=_QN, record=False, attn=[]),
     skip={"attn": {"none"}, "question": {"ndim"}},  # (ndim: caught as a shape mismatch below)
     more={"patches": [torch.zeros(2, 5, 3)], "question": [torch.tensor([0, 2]), torch.tensor([0]),
                                                            torch.tensor([0.0, 1.0])], "attn": [3]})
case("transfer_entropy.TinyVLM.loss", _VLM.loss, lambda: dict(batch=(_PATCHES, _QN, torch.tensor([0, 2]))),
     more={"batch": [(_PATCHES, _QN), (_PATCHES, _QN, torch.tensor([0, 3])), (_PATCHES, _QN, torch.tensor([0]))]})


# ------------------------------------------------------------------------------------------------- icl_multiclass
from helpers import icl_multiclass as icl  # noqa: E402

_SIG = np.array([1.0, 0.5])
_PR = icl.sample_prompts(3, 6, 4, 3, _SIG, 2.0, np.random.default_rng(0))
_X, _Y, _XQ, _YQ, _MC = _PR["X"], _PR["Y"], _PR["xq"], _PR["yq"], _PR["M"]
_LT, _STF = icl.LinearICL(4), icl.SoftmaxICL(4, 3, d_model=8, n_layer=1, n_head=2)
_U42 = np.eye(4)[:, :2]
_HUGE2 = np.full((2, 2), 1e200)  # finite, but its square is inf
_PROMPT_MORE = {"X": [_X[:, :0], _X * 1e35, _X.double()], "Y": [_Y + 3, _Y - 1, _Y.float(), _Y[:, :2]],
                "xq": [_XQ[:, :2], _XQ.double(), _XQ * 1e35], "C": [1]}


def _rng0() -> np.random.Generator:
    return np.random.default_rng(0)


case("icl_multiclass.stable_rank", icl.stable_rank, lambda: dict(M=np.eye(3)),
     more={"M": [np.zeros((3, 3)), _HUGE2, np.ones(3)]})
case("icl_multiclass.power_spectrum", icl.power_spectrum, lambda: dict(r=3, alpha=1.0),
     more={"r": ["zero"], "alpha": ["neg", 1e308 * 10]})
case("icl_multiclass.alpha_for_stable_rank", icl.alpha_for_stable_rank, lambda: dict(srank=2.0, r=4),
     more={"srank": [0.5, 5.5, "neg"], "r": ["zero"]})
case("icl_multiclass.random_orthonormal", icl.random_orthonormal,
     lambda: dict(n=4, k=2, rng=_rng0(), orth_to_ones=False), more={"k": ["zero", 5], "n": ["zero"], "rng": [3, 0]})
case("icl_multiclass.class_centers", icl.class_centers,
     lambda: dict(d=4, C=3, sigma=_SIG, R2=2.0, rng=_rng0(), U=None),
     skip={"U": {"none"}},  # None: a fresh U
     more={"R2": [1e308, "zero", "neg"], "sigma": [np.array([1.0, -1.0]), np.array([1e308]), np.ones(3)],
           "U": [np.ones((3, 2)), np.full((4, 2), math.nan)], "C": [1], "d": ["zero"], "rng": [0]})
case("icl_multiclass.label_priors", icl.label_priors, lambda: dict(C=3, majority=0.5),
     skip={"majority": {"none"}},  # None: uniform priors
     more={"majority": [0.1, 1.0], "C": [1]})
case("icl_multiclass.prompt_labels", icl.prompt_labels, lambda: dict(N=6, pi=np.full(3, 1 / 3), rng=_rng0()),
     more={"pi": [np.array([0.5, 0.6]), np.array([1.5, -0.5])], "rng": [0]})
case("icl_multiclass.class_centers_batch", icl.class_centers_batch,
     lambda: dict(B=2, d=4, C=3, sigma=_SIG, R2=2.0, rng=_rng0(), U=None),
     skip={"U": {"none"}}, more={"R2": [1e308], "B": ["zero"], "sigma": [np.ones(3)], "U": [np.ones((4, 3))]})
case("icl_multiclass.sample_prompts", icl.sample_prompts,
     lambda: dict(B=2, N=6, d=4, C=3, sigma=_SIG, R2=2.0, rng=_rng0(), pi=None, query_pi=None, U=None, task=None),
     skip={"pi": {"none"}, "query_pi": {"none"}, "U": {"none"}, "task": {"none"}},  # None: defaults
     more={"pi": [np.array([0.5, 0.5]), np.array([0.5, 0.6, -0.1])], "query_pi": [np.array([0.5, 0.6, 0.0])],
           "task": [np.ones((3, 3)), np.full((4, 3), math.nan), np.full((4, 3), 1e308)], "R2": [1e308],
           "N": ["zero"], "C": [1], "rng": [0]})
case("icl_multiclass.lsa_forward", icl.lsa_forward,
     lambda: dict(X=_X, Y=_Y, xq=_XQ, W_kq=torch.zeros(7, 7), W_pv=torch.zeros(7, 7), C=3),
     more={**_PROMPT_MORE, "W_kq": [torch.zeros(6, 6), torch.zeros(7, 7, dtype=torch.float64)],
           "W_pv": [torch.zeros(7, 6), torch.full((7, 7), 1e35)]})
case("icl_multiclass.reduced_scores", icl.reduced_scores, lambda: dict(X=_X, Y=_Y, xq=_XQ, W=torch.eye(4), C=3),
     more={**_PROMPT_MORE, "W": [torch.eye(3), torch.eye(4, dtype=torch.float64), np.eye(4)]})
case("icl_multiclass.LinearICL", icl.LinearICL, lambda: dict(d=4), more={"d": ["zero"]})
case("icl_multiclass.LinearICL.forward", _LT.forward, lambda: dict(X=_X, Y=_Y, xq=_XQ, C=3),
     more={**_PROMPT_MORE, "X": [*_PROMPT_MORE["X"], torch.zeros(3, 6, 5)]})
case("icl_multiclass.SoftmaxICL", icl.SoftmaxICL, lambda: dict(d=4, C=3, d_model=8, n_layer=1, n_head=2),
     more={"n_head": [3, "zero"], "C": [1], "d": ["zero"], "d_model": ["zero"], "n_layer": ["zero"]})
case("icl_multiclass.SoftmaxICL.forward", _STF.forward, lambda: dict(X=_X, Y=_Y, xq=_XQ, C=None),
     skip={"C": {"none"}},  # None: the model's own C
     more={**_PROMPT_MORE, "X": [*_PROMPT_MORE["X"], torch.zeros(3, 6, 5)], "C": [2, 4]})
case("icl_multiclass.lda_scores", icl.lda_scores, lambda: dict(X=_X, Y=_Y, xq=_XQ, C=3, pi=None),
     skip={"pi": {"none"}},  # None: the context's own label shares
     more={**_PROMPT_MORE, "pi": [np.array([0.5, 0.5]), np.array([0.0, 0.5, 0.5]), np.full(3, 0.2),
                                  np.full(3, math.nan)]})
case("icl_multiclass.accuracy_by_class", icl.accuracy_by_class, lambda: dict(scores=_X[:, 0, :3], yq=_YQ, C=3),
     skip={"scores": {"inf"}},  # ±inf is a legal score (a class ruled out); NaN is not
     more={"scores": [_X[:, 0, :2], _X[:, 0, :3].numpy()], "yq": [_YQ + 3, _YQ.float(), _YQ[:2]], "C": ["zero"]})
case("icl_multiclass.bayes_scores", icl.bayes_scores, lambda: dict(M=_MC, xq=_XQ, pi=None),
     skip={"pi": {"none"}},  # None: uniform
     more={"pi": [np.array([0.5, 0.5]), np.array([1.0, 0.0, 0.0])], "xq": [_XQ[:, :2], _XQ * 1e35],
           "M": [_MC * 1e35, _MC[:, :, :0]]})
case("icl_multiclass.subspace_oracle_scores", icl.subspace_oracle_scores,
     lambda: dict(X=_X, Y=_Y, xq=_XQ, C=3, U=_U42, pi=None),
     skip={"pi": {"none"}}, more={**_PROMPT_MORE, "U": [np.ones((3, 2)), np.full((4, 2), 1e308)],
                                 "pi": [np.array([0.5, 0.5])]})
case("icl_multiclass.matrix_cosine", icl.matrix_cosine, lambda: dict(A=np.eye(2), B=np.ones((2, 2))),
     more={"A": [_HUGE2, np.zeros((2, 2))], "B": [_HUGE2, np.ones((3, 2))]})
case("icl_multiclass.subspace_alignment", icl.subspace_alignment, lambda: dict(W=np.eye(4), U=_U42),
     more={"W": [np.eye(3), np.full((4, 4), 1e200)], "U": [np.ones((3, 2)), np.full((4, 2), 1e200)]})
case("icl_multiclass.pca_subspace", icl.pca_subspace, lambda: dict(features=np.eye(4), k=2),
     more={"k": ["zero", 5], "features": [np.full((3, 2), 1e200)]})
case("icl_multiclass.offsubspace_residue", icl.offsubspace_residue,
     lambda: dict(W=np.arange(16.0).reshape(4, 4), U=_U42),
     more={"W": [np.eye(3), np.full((4, 4), 1e200), np.zeros((4, 4))], "U": [np.eye(4), np.full((4, 2), 1e200)]})
case("icl_multiclass.examples_to_reach", icl.examples_to_reach,
     lambda: dict(grid=[1.0, 2.0, 4.0], accs=[0.2, 0.5, 0.9], target=0.6),
     more={"grid": [[1.0, 1.0, 2.0], [0.0, 1.0, 2.0]], "accs": [[0.2, 0.5]]})
case("icl_multiclass.bootstrap_examples", icl.bootstrap_examples,
     lambda: dict(correct={"lt": [np.array([0.0, 1.0]), np.array([1.0, 1.0])]},
                  reference=[np.array([1.0, 1.0]), np.array([1.0, 1.0])], grid=[1.0, 2.0], rng=_rng0(), frac=0.9,
                  n_boot=3),
     more={"correct": [{}, {"lt": [np.array([0.0, 1.0])]}, {"lt": [np.array([0.0, 2.0]), np.array([1.0, 1.0])]}],
           "reference": [3, [np.array([1.0, 1.0])], [np.array([1.0]), np.array([1.0])]], "grid": [[2.0, 1.0], [0.0, 1.0]],
           "frac": [1.5, "neg"], "n_boot": ["zero"], "rng": [0]})
case("icl_multiclass.predicted_margins", icl.predicted_margins, lambda: dict(M=np.eye(3), pi=np.full(3, 1 / 3)),
     more={"M": [_HUGE2, np.ones(3)], "pi": [np.full(2, 0.5), np.array([-1.0, 1.0, 1.0])]})
_STREAM_KW = dict(seed=0, stream=1, B=2, N=6, d=4, C=3, sigma=_SIG, R2=2.0, U=None)
case("icl_multiclass.task_stream", icl.task_stream, lambda: dict(_STREAM_KW),
     skip={"U": {"none"}},  # None: a fresh U per task
     more={"R2": [1e308, "zero"], "sigma": [np.ones(3), np.array([1.0, 0.0])], "U": [np.ones((4, 3))],
           "C": [1], "N": ["zero"], "B": ["zero"]})
case("icl_multiclass.task_stream.batch", icl.task_stream(**_STREAM_KW), lambda: dict(step=0))
case("icl_multiclass.icl_loss", icl.icl_loss, lambda: dict(model=_LT, b=dict(_PR)),
     more={"b": [{"X": _X}, {}, 3, {**_PR, "yq": _YQ + 3}], "model": [3]})
case("icl_multiclass.train_icl", icl.train_icl,
     lambda: dict(model=icl.LinearICL(4), batches=icl.task_stream(**_STREAM_KW), steps=1, optimizer="sgd", lr=0.1,
                  seed=0, warmup=0, desc="t", progress=False),
     only=("model", "batches", "steps", "optimizer", "lr", "seed"),
     skip={"seed": {"none"}},  # as in train.fit: None = no seeding
     more={"model": [3], "batches": [3, [_PR]], "lr": ["zero", "neg", 1e308]})
case("icl_multiclass.checkpoint_config", icl.checkpoint_config, lambda: dict(name="shared_lt"))
_FEATS = np.concatenate([np.zeros((3, 2)), np.ones((3, 2))]) + np.arange(6)[:, None] * 0.1
case("icl_multiclass.dataset_prompts", icl.dataset_prompts,
     lambda: dict(features=_FEATS, labels=np.repeat([0, 1], 3), B=2, per_label=1, rng=_rng0(), d=None),
     skip={"d": {"none"}},  # None: the features' own dimension
     more={"features": [np.full((6, 2), 1e200), _FEATS[:, :0]], "labels": [np.repeat([0, 1], 2), np.zeros(6)],
           "per_label": ["zero", 3], "d": [1], "rng": [0]})


# ------------------------------------------------------------------------------------------------------ plotting
from helpers import plotting  # noqa: E402


def _draw_nothing(fig: Any, v: Any) -> None:
    pass


def _live_fn(alpha: float = 0.5, name: str = "a") -> None:
    pass


case("plotting.static_slider", plotting.static_slider,
     lambda: dict(values=[1, 2], draw=_draw_nothing, figsize=(2.0, 1.5), label="k", fmt="{}"),
     skip={"label": {"unknown"}, "fmt": {"unknown"}},  # any label; a format without a field is a constant title
     more={"values": [[], [1.0, math.nan], [math.inf], range(plotting.MAX_FRAMES + 1), {"a": 1}, 3],
           "draw": [3], "figsize": [(2.0,), (0.0, 1.0), (math.nan, 1.0), (1e308, 1.0), (2.0, "x"), 2.0],
           "fmt": ["{x}", "{", "{1}", "{:q}"]})
case("plotting.live_controls", plotting.live_controls, lambda: dict(fn=_live_fn, alpha=(0.0, 1.0, 0.1), name=["a"]),
     skip={"alpha": {"str"}, "name": {"str"}},  # a string is a valid abbreviation (a text box)
     more={"fn": [3], "alpha": [(1.0, 0.0), (0.0, math.nan), (0.0, 1.0, 0.0), (0.0, 1.0, -0.1), (0.0,),
                                (0.0, "x"), (0.0, 1e308 * 10), math.inf, math.nan, object()],
           "name": [[], {}]})
case("plotting.has_front_end", plotting.has_front_end, lambda: dict())


# -------------------------------------------------------------------------------------------------------- tests
_BAD = bad_calls()


@pytest.mark.parametrize("c", CASES, ids=[c.name for c in CASES])
def test_valid_call_runs(c: Case) -> None:
    with time_limit(60):  # generous: a valid call is not a hang test
        c.fn(**c.kwargs())


_BY_ARG: dict[tuple[str, str], list[tuple[Case, str, str, Any]]] = {}
for _b in _BAD:
    _BY_ARG.setdefault((_b[0].name, _b[1]), []).append(_b)


@pytest.mark.parametrize("key", list(_BY_ARG), ids=[f"{n}-{a}" for n, a in _BY_ARG])
def test_bad_argument_is_named(key: tuple[str, str]) -> None:
    """Every bad kind for one argument (one test item per argument keeps the file fast)."""
    problems = []
    for c, arg, kind, bad in _BY_ARG[key]:
        try:
            e = _call_bad(c, arg, bad)
        except (AssertionError, Hang) as err:
            problems.append(f"{kind}: {err}")
            continue
        except Exception as err:  # an unclear error type
            problems.append(f"{kind}: {type(err).__name__}: {err}")
            continue
        if arg not in str(e):
            problems.append(f"{kind}: message does not name {arg!r}: {e!r}")
    assert not problems, f"{key[0]}({key[1]}=...):\n" + "\n".join(problems)


def _numeric_args() -> list[tuple[Case, str]]:
    out = []
    for c in CASES:
        for arg, v in c.kwargs().items():
            if c.only is not None and arg not in c.only:
                continue
            if isinstance(v, float) or isinstance(v, (np.ndarray, torch.Tensor)) and v.dtype in (
                np.float64, np.float32, torch.float32, torch.float64
            ) and "nan" not in c.skip.get(arg, set()):
                out.append((c, arg))
    return out


_NUMERIC = _numeric_args()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_random_nan_or_inf_is_named(data: st.DataObject) -> None:
    """NaN or ±inf at a random place of a float argument (scalar or array) is refused with the argument's name."""
    c, arg = data.draw(st.sampled_from(_NUMERIC))
    if "nan" in c.skip.get(arg, set()):
        return
    v = c.kwargs()[arg]
    bad_val = data.draw(st.sampled_from([math.nan, math.inf, -math.inf]))
    if not math.isnan(bad_val) and "inf" in c.skip.get(arg, set()):
        return  # ±inf is a legal value of this argument
    if isinstance(v, float):
        bad: Any = bad_val
    else:
        bad = v.copy() if isinstance(v, np.ndarray) else v.clone(memory_format=torch.contiguous_format)
        if bad.size == 0 if isinstance(bad, np.ndarray) else bad.numel() == 0:
            return
        n = bad.size if isinstance(bad, np.ndarray) else bad.numel()
        i = data.draw(st.integers(0, n - 1))
        bad.reshape(-1)[i] = bad_val
    e = _call_bad(c, arg, bad)
    assert arg in str(e)


def _finite_output(out: Any) -> bool:
    if isinstance(out, torch.Tensor):
        return bool(torch.isfinite(out).all()) if out.dtype.is_floating_point else True
    if isinstance(out, np.ndarray):
        return bool(np.isfinite(out).all()) if out.dtype.kind == "f" else True
    if isinstance(out, float):
        return math.isfinite(out)
    if isinstance(out, dict):
        return all(_finite_output(v) for v in out.values())
    return True


_NAN_BY_DESIGN = {"icl_multiclass.examples_to_reach",  # nan: the target is never reached
                  "icl_multiclass.accuracy_by_class"}  # nan: a class never queried
_HUGE_CASES = [(c, a) for c, a in _NUMERIC if c.name.startswith("icl_multiclass.") and c.name not in _NAN_BY_DESIGN]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_random_huge_value_is_named_or_harmless(data: st.DataObject) -> None:
    """#58: a huge finite value (1e31 to 1e308, either sign) at a random place of a float argument of
    icl_multiclass is refused with the argument's name, or the result is still finite: never a silent NaN/inf."""
    c, arg = data.draw(st.sampled_from(_HUGE_CASES))
    kw = c.kwargs()
    v = kw[arg]
    big = data.draw(st.sampled_from([1.0, -1.0])) * 10.0 ** data.draw(st.floats(31, 308))
    if isinstance(v, float):
        kw[arg] = big
    else:
        bad = v.copy() if isinstance(v, np.ndarray) else v.clone(memory_format=torch.contiguous_format)
        n = bad.size if isinstance(bad, np.ndarray) else bad.numel()
        if n == 0 or (isinstance(bad, torch.Tensor) and bad.dtype == torch.float32 and abs(big) > 3e38):
            big = math.copysign(3e38, big)  # the largest float32
        bad.reshape(-1)[data.draw(st.integers(0, n - 1))] = big
        kw[arg] = bad
    with time_limit():
        try:
            out = c.fn(**kw)
        except (ValueError, TypeError) as e:
            assert arg in str(e), f"{c.name}({arg}=huge): {e}"
            return
    assert _finite_output(out), f"{c.name}({arg}={big:g} somewhere) returned NaN/inf silently"
