"""helpers.scripts: the one skeleton of every data script (flags, threads, tiny folder, seeds, out), the seed
convention, and that every data/<slug>/make_*.py uses the skeleton."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from helpers import checkpoints as ck
from helpers import scripts

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "data"


def test_model_seeds():
    assert scripts.model_seeds(0) == [0, 1, 2]
    assert scripts.model_seeds(7) == [7, 8, 9]
    assert scripts.model_seeds(4, n=1) == [4]
    with pytest.raises(ValueError):
        scripts.model_seeds(-1)
    with pytest.raises(ValueError):
        scripts.model_seeds(0, n=0)
    with pytest.raises(TypeError):
        scripts.model_seeds("0")


def test_with_seeds_follows_the_model_seeds():
    cfg = dict(d=8, seeds=[0, 1, 2], large_seeds=[0], oracle_seeds=[], baseline_seeds=[0, 2], stored_seed=1,
               split_seed=42, db_seed=0, nested=dict(seeds=[0]))
    out = scripts.with_seeds(cfg, [7, 8, 9])
    assert out == dict(d=8, seeds=[7, 8, 9], large_seeds=[7], oracle_seeds=[], baseline_seeds=[7, 9],
                       stored_seed=8, split_seed=42, db_seed=0, nested=dict(seeds=[0]))
    assert cfg["seeds"] == [0, 1, 2] and out["nested"] is not cfg["nested"]  # a copy; data seeds untouched
    assert scripts.with_seeds(cfg, [0, 1, 2]) == cfg  # the committed seeds: the committed config
    assert list(scripts.with_seeds(cfg, [5])) == list(cfg)  # key order kept (the manifest's JSON)
    short = scripts.with_seeds(cfg, [5])
    assert short["seeds"] == [5] and short["baseline_seeds"] == [5] and short["stored_seed"] == 5


def test_with_seeds_refuses():
    with pytest.raises(ValueError, match="no list 'seeds'"):
        scripts.with_seeds({"trees": ["a"]}, [1])
    with pytest.raises(ValueError, match="distinct"):
        scripts.with_seeds({"seeds": [0, 1]}, [3, 3])
    with pytest.raises(ValueError, match="at least 1"):
        scripts.with_seeds({"seeds": [0]}, [])
    with pytest.raises(ValueError, match="'large_seeds'.*not one of"):
        scripts.with_seeds({"seeds": [0, 1], "large_seeds": [5]}, [3, 4])
    with pytest.raises(TypeError):
        scripts.with_seeds([("seeds", [0])], [1])
    with pytest.raises(ValueError):
        scripts.with_seeds({"seeds": [0]}, [-1])


def _recorder(calls):
    def build(cfg, out, args):
        calls.append((args.name, cfg, out, out is not None and out.exists(), torch.get_num_threads()))
        return [out / f"{args.name}.json"] if out is not None else f"{args.name} in data_dir()"
    return build


CONFIG = {"a": dict(seeds=[0, 1, 2], steps=100, large_seeds=[0]), "b": dict(seeds=[0, 1, 2], steps=50)}
TINY = {"a": dict(seeds=[0], steps=2, large_seeds=[0]), "b": dict(seeds=[0], steps=1)}


def _main(argv, calls, **kw):
    kw = dict(dict(config=lambda n: CONFIG[n], tiny=lambda n: TINY[n], names=["a", "b"], doc="Make a and b.\n\nMore."),
              **kw)
    return scripts.script_main(_recorder(calls), argv=argv, **kw)


def test_script_main_default_flags(capsys):
    threads = torch.get_num_threads()
    calls = []
    try:
        made = _main([], calls)
        assert [c[0] for c in calls] == ["a", "b"]
        assert calls[0][1] == CONFIG["a"] and calls[0][1] is not CONFIG["a"]  # a copy: build may change it
        assert calls[0][2] is None  # no --out: checkpoints.save writes under data_dir()
        assert calls[0][4] == 1  # one torch thread
        assert made == ["a in data_dir()", "b in data_dir()"]
        assert "wrote a in data_dir()" in capsys.readouterr().out
    finally:
        torch.set_num_threads(threads)


def test_script_main_tiny_uses_a_temporary_folder():
    calls = []
    made = _main(["--tiny"], calls, default_names=["a"])
    assert [c[0] for c in calls] == ["a"]
    name, cfg, out, existed, _ = calls[0]
    assert cfg == TINY["a"] and existed
    assert not out.exists()  # removed afterwards
    assert made == [out / "a.json"]


def test_script_main_out_seeds_name(tmp_path):
    calls = []
    _main(["--tiny", "--out", str(tmp_path), "--seeds", "7", "--name", "b", "a"], calls)
    assert [c[0] for c in calls] == ["a", "b"]  # the script's order, whatever the flag's
    assert all(c[2] == tmp_path for c in calls)  # --out holds in tiny mode too
    assert calls[0][1] == dict(seeds=[7], steps=2, large_seeds=[7])
    calls.clear()
    _main(["--seeds", "7", "8", "9", "--out", str(tmp_path)], calls)
    assert calls[0][1] == dict(seeds=[7, 8, 9], steps=100, large_seeds=[7])
    calls.clear()  # a one-seed checkpoint (a probe) built at --seeds 7 8 9 holds seed 7, as SEED=7 asks for it
    _main(["--tiny", "--seeds", "7", "8", "9", "--out", str(tmp_path)], calls)
    assert calls[0][1] == dict(seeds=[7], steps=2, large_seeds=[7]) and calls[1][1]["seeds"] == [7]


def test_script_main_options_and_errors(capsys):
    calls = []

    def options(ap):
        ap.add_argument("--workers", type=int, default=2)

    def build(cfg, out, args):
        calls.append(args.workers)
        return "x"

    scripts.script_main(build, config=lambda n: CONFIG[n], tiny=lambda n: TINY[n], names=["a"], options=options,
                        argv=["--workers", "3"])
    assert calls == [3]
    with pytest.raises(SystemExit):
        _main(["--name", "c"], [])
    with pytest.raises(SystemExit):
        _main(["--seeds"], [])
    with pytest.raises(SystemExit):
        _main(["--help"], [])
    assert "Make a and b." in capsys.readouterr().out
    with pytest.raises(ValueError, match="default_names"):
        _main([], [], default_names=["c"])
    with pytest.raises(ValueError, match="no list 'seeds'"):
        _main(["--seeds", "3"], [], config=lambda n: {"x": 1})
    with pytest.raises(TypeError):
        scripts.script_main("build", config=dict, tiny=dict, names=["a"], argv=[])


def test_data_root(tmp_path, monkeypatch):
    assert scripts.data_root(tmp_path) == tmp_path
    monkeypatch.setenv("HELPERS_DATA", str(tmp_path / "d"))
    assert scripts.data_root(None) == tmp_path / "d"


# ---- every data script uses the skeleton -----------------------------------------------------------------------

def _data_scripts():
    return sorted(DATA.glob("*/make_*.py"))


@pytest.mark.parametrize("script", _data_scripts(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_data_script_uses_the_skeleton(script):
    """A data script calls scripts.script_main, or is a thin wrapper that runs a sibling script that does."""
    tree = ast.parse(script.read_text())
    calls = {n.func.attr if isinstance(n.func, ast.Attribute) else getattr(n.func, "id", None)
             for n in ast.walk(tree) if isinstance(n, ast.Call)}
    if "script_main" in calls:
        own = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "attr", None) == "add_argument"
               and n.args and isinstance(n.args[0], ast.Constant) and n.args[0].value in ("--tiny", "--out", "--seeds")]
        assert not own, f"{script} defines a flag of the skeleton itself"
        return
    siblings = [p for p in script.parent.glob("make_*.py") if p != script and p.stem in script.read_text()]
    assert siblings, f"{script} neither calls scripts.script_main nor runs a sibling script that does"
    assert all("script_main" in p.read_text() for p in siblings)


def test_a_script_at_other_seeds_is_loadable_at_those_seeds(tmp_path):
    """--tiny --seeds 7 --out DIR: the manifest stores seed 7, and a chapter asking with_seeds(config, [7]) loads
    it from DIR (HELPERS_DATA=DIR in a notebook run)."""
    script = DATA / "12_transformer_dfs" / "make_width_limited.py"
    r = subprocess.run([sys.executable, str(script), "--tiny", "--seeds", "7", "--out", str(tmp_path)], cwd=REPO,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    man = json.loads((tmp_path / "12_transformer_dfs" / "width_limited.json").read_text())
    assert man["config"]["seeds"] == [7] and man["seed"] == [7]
    sys.path.insert(0, str(script.parent))
    try:
        import make_width_limited as m
    finally:
        sys.path.remove(str(script.parent))
    want = scripts.with_seeds(m.tiny(), [7])
    loaded = ck.load("12_transformer_dfs", "width_limited", config=want, root=tmp_path)
    assert ck.require_seeds(loaded, [7]) == [7]
    with pytest.raises(ck.ConfigMismatch, match="seeds"):
        ck.load("12_transformer_dfs", "width_limited", config=m.tiny(), root=tmp_path)


def test_seed_part_stores_reuses_and_refuses(tmp_path):
    calls = []

    def compute():
        calls.append(1)
        return {"x": torch.arange(3), "wall": 1.0}

    key = scripts.part_key({"steps": 5, "seeds": [0, 1]})
    assert key == scripts.part_key({"seeds": [2], "steps": 5})  # one part per seed: seeds are not in the key
    assert key != scripts.part_key({"steps": 5}, skip=[25])
    res, reused = scripts.seed_part(tmp_path, 1, key, compute)
    assert not reused and (tmp_path / "seed1.pt").exists() and len(calls) == 1
    again, reused = scripts.seed_part(tmp_path, 1, key, compute)
    assert reused and len(calls) == 1 and "key" not in again
    assert torch.equal(again["x"], res["x"])
    _, reused = scripts.seed_part(tmp_path, 1, scripts.part_key({"steps": 6}), compute)
    assert not reused and len(calls) == 2  # other settings: trained again, the part replaced
    _, reused = scripts.seed_part(None, 1, key, compute)  # no parts folder: always computed, nothing stored
    assert not reused and len(calls) == 3
    with pytest.raises(TypeError, match="callable"):
        scripts.seed_part(tmp_path, 0, key, {"x": 1})
    with pytest.raises(TypeError, match="dict"):
        scripts.seed_part(tmp_path, 0, key, lambda: [1, 2])
    torch.save([1, 2], tmp_path / "seed3.pt")
    with pytest.raises(ValueError, match="seed3.pt"):
        scripts.seed_part(tmp_path, 3, key, compute)
    with pytest.raises(ValueError):
        scripts.seed_part(tmp_path, -1, key, compute)
    with pytest.raises(TypeError):
        scripts.part_key([1, 2])
