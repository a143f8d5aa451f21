import importlib
import importlib.util
import json
import subprocess
import sys
import warnings
from fractions import Fraction
from pathlib import Path

import matplotlib
import numpy as np

matplotlib.use("Agg")
import pytest
import torch
import yaml
from _loader import config_by_rule, load_module
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import checkpoints as ck
from helpers import nn as hnn

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "data"
SETTINGS = settings(max_examples=30, deadline=None)

scalars = st.one_of(st.integers(-10**6, 10**6), st.floats(allow_nan=False, allow_infinity=False, width=32),
                    st.booleans(), st.text(max_size=5), st.none())
json_values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                            st.dictionaries(st.text(min_size=1, max_size=4), inner,
                                                                            max_size=3)), max_leaves=8)
configs = st.dictionaries(st.text(alphabet="abcdefgh_", min_size=1, max_size=6), json_values, max_size=5)


def _model(seed=0):
    torch.manual_seed(seed)
    return hnn.Transformer(hnn.TransformerConfig(vocab_size=16, n_layer=1, n_head=2, d_model=8, max_len=32))


def _save(tmp_path, config=None, **kw):
    args = dict(config=config or {"d": 8, "arms": ["a", "b"]}, metrics={"loss": 1.25}, history={"a": [3.0, 2.0, 1.0]},
                seed=0, steps=3, root=tmp_path)
    args.update(kw)
    return ck.save("99_test", "m", _model(), **args)


def test_round_trip_module(tmp_path):
    m = _model(1)
    mp = ck.save("99_test", "m", m, config={"d": 8}, metrics={"loss": 1.0}, history=None, root=tmp_path)
    man = json.loads(mp.read_text())
    assert man["slug"] == "99_test" and man["weights"]["sha256"] == ck.sha256_file(tmp_path / "99_test" / "m.safetensors")
    got = ck.load("99_test", "m", config={"d": 8}, root=tmp_path).load_into(_model(2))
    x = torch.randint(0, 16, (2, 5))
    assert torch.equal(got(x), m(x))


def test_mapping_of_modules_prefixes_and_fp16(tmp_path):
    ms = {"RoPE/0": _model(0), "TPE/0": _model(1)}
    ck.save("99_test", "m", ms, config={}, metrics={}, root=tmp_path, dtype=torch.float16)
    c = ck.load("99_test", "m", config={}, root=tmp_path)
    assert all(t.dtype == torch.float16 for t in c.tensors.values() if t.is_floating_point())
    m = c.load_into(_model(5), prefix="TPE/0.")
    assert torch.allclose(m.tok.weight, ms["TPE/0"].tok.weight, atol=1e-3)
    ms2 = {"A.w": _model(0).state_dict()["tok.weight"], "A.eval_x": torch.ones(3)}
    ck.save("99_test", "n", {**{f"A.{k}": v for k, v in _model(0).state_dict().items()}, "A.eval_x": ms2["A.eval_x"]},
            config={}, metrics={}, root=tmp_path)
    c2 = ck.load("99_test", "n", config={}, root=tmp_path)
    with pytest.raises(RuntimeError, match="eval_x"):
        c2.load_into(_model(3), prefix="A.")
    assert torch.equal(c2.load_into(_model(3), prefix="A.", ignore=["eval_"]).tok.weight, _model(0).tok.weight)
    with pytest.raises(KeyError, match="prefixes present"):
        c.state_dict("NoPE/0.")


def test_weights_byte_identical(tmp_path):
    _save(tmp_path / "a")
    _save(tmp_path / "b")
    a, b = (ck.sha256_file(tmp_path / d / "99_test" / "m.safetensors") for d in "ab")
    assert a == b


def test_weights_file_mode_follows_the_umask(tmp_path):
    import os

    old = os.umask(0o022)
    try:
        _save(tmp_path)
        w = tmp_path / "99_test" / "m.safetensors"
        assert w.stat().st_mode & 0o777 == 0o644  # safetensors alone writes 0o600
        os.umask(0o077)
        ck.compress("99_test", "m", "over the chapter's size budget", quantize="float16", root=tmp_path)
        assert w.stat().st_mode & 0o777 == 0o600
        assert not list(w.parent.glob("*.tmp"))
    finally:
        os.umask(old)


@SETTINGS
@given(configs)
def test_manifest_config_round_trip(cfg):
    # what is stored is the JSON form, and the JSON form compares equal to the original config
    assert ck.diff_config(cfg, ck.normalize(cfg)) == []
    assert ck.normalize(ck.normalize(cfg)) == ck.normalize(cfg)


def _canon(x):
    """A value up to what a config comparison ignores: 0 and 0.0 are the same number, True is not 1."""
    if isinstance(x, bool) or x is None or isinstance(x, str):
        return (type(x).__name__, x)
    if isinstance(x, (int, float)):
        return ("num", Fraction(x))
    if isinstance(x, list):
        return ("list", tuple(_canon(v) for v in x))
    return ("dict", {k: _canon(v) for k, v in x.items()})


@SETTINGS
@given(configs, st.text(alphabet="abcdefgh_", min_size=1, max_size=6), json_values)
def test_diff_config_names_changed_key(cfg, key, value):
    changed = dict(cfg)
    changed[key] = value
    diff = ck.diff_config(cfg, changed)
    same = key in cfg and _canon(ck.normalize(cfg[key])) == _canon(ck.normalize(value))
    if same:
        assert not any(d == key or d.startswith(key + ".") for d in diff)
    else:
        assert any(d == key or d.startswith(key + ".") for d in diff)


def test_diff_config_nested_and_types():
    assert ck.diff_config({"a": {"b": 1, "c": 2}}, {"a": {"b": 1, "c": 3}}) == ["a.c"]
    assert ck.diff_config({"a": 1}, {"a": 1.0}) == []  # 1 == 1.0 for numbers
    assert ck.diff_config({"a": True}, {"a": 1}) == ["a"]  # but a bool is not a number
    assert ck.diff_config({"a": (1, 2)}, {"a": [1, 2]}) == []
    assert ck.diff_config({"a": 1}, {"b": 1}) == ["a", "b"]


def test_config_mismatch_names_keys_and_command(tmp_path):
    _save(tmp_path, config={"d": 8, "steps": 100})
    with pytest.raises(ck.ConfigMismatch, match=r"steps.*asked 200, stored 100.*make data NB=99_test"):
        ck.load("99_test", "m", config={"d": 8, "steps": 200}, root=tmp_path)
    with pytest.raises(ck.ConfigMismatch, match="differing keys: extra"):
        ck.load("99_test", "m", config={"d": 8, "steps": 100, "extra": 1}, root=tmp_path)


def test_corrupted_missing_and_foreign(tmp_path):
    cfg = {"d": 8, "arms": ["a", "b"]}
    _save(tmp_path, config=cfg)
    w = tmp_path / "99_test" / "m.safetensors"
    data = w.read_bytes()
    w.write_bytes(data[: len(data) // 2])  # truncated
    with pytest.raises(ck.CheckpointError, match="truncated, edited"):
        ck.load("99_test", "m", config=cfg, root=tmp_path)
    edited = bytearray(data)
    edited[-3] ^= 1
    w.write_bytes(bytes(edited))  # one bit flipped inside a tensor
    with pytest.raises(ck.CheckpointError, match="do not match their manifest"):
        ck.load("99_test", "m", config=cfg, root=tmp_path)
    w.unlink()
    with pytest.raises(ck.CheckpointError, match="missing.*make data NB=99_test"):
        ck.load("99_test", "m", config=cfg, root=tmp_path)
    with pytest.raises(ck.CheckpointError, match="manifest .* is missing"):
        ck.load("99_test", "other", config=cfg, root=tmp_path)
    # a manifest copied from another checkpoint
    (tmp_path / "98_other").mkdir()
    (tmp_path / "98_other" / "m.json").write_text((tmp_path / "99_test" / "m.json").read_text())
    with pytest.raises(ck.CheckpointError, match="is the manifest of '99_test'/'m'"):
        ck.load("98_other", "m", config=cfg, root=tmp_path)
    (tmp_path / "98_other" / "m.json").write_text("{not json")
    with pytest.raises(ck.CheckpointError, match="not valid JSON"):
        ck.load("98_other", "m", config=cfg, root=tmp_path)
    assert issubclass(ck.CheckpointError, ValueError)


def test_stale_source_warns(tmp_path):
    src = tmp_path / "module.py"
    src.write_text("x = 1\n")
    _save(tmp_path, sources=[src])
    ck.load("99_test", "m", config={"d": 8, "arms": ["a", "b"]}, root=tmp_path)  # no warning
    src.write_text("x = 2\n")
    with pytest.warns(ck.StaleCheckpointWarning, match="may be stale"):
        ck.load("99_test", "m", config={"d": 8, "arms": ["a", "b"]}, root=tmp_path)


def test_history_subsampled_and_plotted(tmp_path):
    from helpers.train import History

    h = History(loss=[float(i) for i in range(2000)], evals={"val": [(i * 10, 1.0 / (i + 1)) for i in range(700)]})
    _save(tmp_path, history={"arm": h, "plain": list(range(10))})
    man = ck.load_manifest("99_test", "m", root=tmp_path)
    assert set(man["history"]) == {"arm/loss", "arm/val", "plain"}
    c = man["history"]["arm/loss"]
    assert len(c["step"]) == ck.MAX_POINTS and c["step"][-1] == 2000
    assert abs(c["value"][0] - 1.5) < 1e-9  # mean of the first bin (steps 0..3)
    assert c["min"][0] == 0.0 and c["max"][0] == 3.0  # the bin's range is kept beside its mean
    assert len(man["history"]["arm/val"]["step"]) <= ck.MAX_POINTS
    assert man["history"]["plain"]["value"] == list(range(10))
    ax = ck.plot_history(man, keys=["arm/"])
    assert len(ax.lines) == 2
    with pytest.raises(ValueError, match="match no curve"):
        ck.plot_history(man, keys=["nothing"])


def test_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="file-name-safe"):
        ck.paths("../x", "m")
    with pytest.raises(TypeError, match="slug"):
        ck.paths(4, "m")
    with pytest.raises(TypeError, match="JSON-serializable"):
        ck.save("99_test", "m", _model(), config={"f": object()}, metrics={}, root=tmp_path)
    with pytest.raises(TypeError, match="JSON-serializable"):
        ck.save("99_test", "m", _model(), config={}, metrics={"x": float("nan")}, root=tmp_path)
    with pytest.raises(TypeError, match="model_or_tensors"):
        ck.save("99_test", "m", [1, 2], config={}, metrics={}, root=tmp_path)
    with pytest.raises(ValueError, match="NaN or inf"):
        ck.save("99_test", "m", {"w": torch.tensor([float("nan")])}, config={}, metrics={}, root=tmp_path)
    with pytest.raises(ValueError, match="floating dtype"):
        ck.save("99_test", "m", _model(), config={}, metrics={}, root=tmp_path, dtype=torch.int8)
    with pytest.raises(ValueError, match="steps"):
        ck.save("99_test", "m", _model(), config={}, metrics={}, root=tmp_path, steps=-1)
    with pytest.raises(FileNotFoundError, match="source file"):
        ck.save("99_test", "m", _model(), config={}, metrics={}, root=tmp_path, sources=[tmp_path / "nope.py"])
    with pytest.raises(ValueError, match="no training curves"):
        ck.plot_history({"history": {}})


# ---- the book's own checkpoint scripts and committed checkpoints ----------------------------------------------

def _checkpoint_scripts():
    return sorted(p for p in DATA.glob("*/make_*.py") if "helpers.checkpoints" in p.read_text()
                  or "import checkpoints" in p.read_text())


def _manifests():
    out = []
    for p in sorted(DATA.glob("*/*.json")):
        try:
            m = json.loads(p.read_text())
        except json.JSONDecodeError:
            continue
        if isinstance(m, dict) and m.get("format") == ck.FORMAT and "weights" in m:
            out.append(p)
    return out


@pytest.mark.parametrize("script", _checkpoint_scripts(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_script_tiny_runs_and_is_deterministic(script, tmp_path):
    assert "--tiny" in script.read_text(), f"{script} must accept --tiny (a run of seconds into a temporary folder)"
    shas = []
    for run in ("a", "b"):
        out = tmp_path / run
        # the timeout guards against a hang, it is not a speed budget: 07's --tiny (three quick seeds) takes ~100 s
        # of one idle core, and a busy machine doubles that
        r = subprocess.run([sys.executable, str(script), "--tiny", "--out", str(out)], cwd=REPO,
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr[-2000:]
        weights = sorted(out.rglob("*.safetensors"))
        if weights:
            shas.append({w.relative_to(out).as_posix(): ck.sha256_file(w) for w in weights})
        else:  # a records-only script (measurements, no weights): its records, less the run's clock and machine
            records = sorted(out.rglob("*.json"))
            assert records, f"{script} --tiny wrote neither .safetensors nor .json records under {out}"
            shas.append({r.relative_to(out).as_posix(): _record_content(r) for r in records})
    assert shas[0] == shas[1], "the same script and seed must write byte-identical weights (or equal records)"


def _record_content(path):
    """A records-only script's JSON output without the fields that differ between identical runs."""
    rec = json.loads(path.read_text())
    if isinstance(rec, dict):
        for k in ("wall_seconds", "machine", "date"):
            rec.pop(k, None)
    return rec


@pytest.mark.parametrize("manifest", _manifests(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_committed_manifest_matches_chapter_defaults(manifest):
    m = json.loads(manifest.read_text())
    slug, name = manifest.parent.name, manifest.stem
    assert (m["slug"], m["name"]) == (slug, name), f"{manifest} names {m['slug']}/{m['name']}"
    assert m.get("module"), f"{manifest} does not name its chapter module"
    mod = importlib.import_module(m["module"])
    want = mod.checkpoint_config(name)
    # a registered rule that stopped before every default seed records why (extra.seeds_by_rule): its seeds' config
    diff = ck.diff_config(config_by_rule(want, m), m["config"])
    assert not diff, (f"{slug}/{name}: the chapter's default config differs from the committed checkpoint's in "
                      f"{diff}; rebuild with: {ck.rebuild_command(slug, name)}")
    w = manifest.with_name(m["weights"]["file"])
    assert w.is_file() and ck.sha256_file(w) == m["weights"]["sha256"], f"{w} does not match {manifest}"


def test_data_sizes():
    per_chapter = {}
    for f in DATA.rglob("*"):
        if f.is_file():
            chapter = f.relative_to(DATA).parts[0]
            per_chapter[chapter] = per_chapter.get(chapter, 0) + f.stat().st_size
    big = {k: v for k, v in per_chapter.items() if v > 8 * 2**20}
    assert not big, f"chapters over 8 MB in data/: {big}"
    assert sum(per_chapter.values()) <= 50 * 2**20, "data/ is over its 50 MiB budget"


def test_require_seeds(tmp_path):
    _save(tmp_path, config={"d": 8, "seeds": [0, 1, 2]})
    c = ck.load("99_test", "m", config={"d": 8, "seeds": [0, 1, 2]}, root=tmp_path)
    assert ck.require_seeds(c, [2, 0]) == [2, 0]
    assert ck.require_seeds(c.manifest, (1,)) == [1]
    with pytest.raises(ck.CheckpointError, match=r"seeds \[0, 1, 2\].*\[5, 6\].*QUICK=1"):
        ck.require_seeds(c, [1, 5, 6])
    with pytest.raises(ck.CheckpointError, match="no list 'nope'"):
        ck.require_seeds(c, [0], key="nope")
    with pytest.raises(ValueError, match="at least 1"):
        ck.require_seeds(c, [])
    with pytest.raises(TypeError):
        ck.require_seeds(c, 0)
    with pytest.raises(TypeError):
        ck.require_seeds([0, 1], [0])


def test_restamp_adds_sources(tmp_path):
    src, more = tmp_path / "src.py", tmp_path / "more.py"
    src.write_text("x = 1\n")
    more.write_text("z = 0\n")
    mp = _save(tmp_path, sources=[src])
    with pytest.raises(TypeError, match="add_sources"):
        ck.restamp("99_test", "m", "the module the script imports is listed", root=tmp_path, add_sources="more.py")
    ck.restamp("99_test", "m", "the module the script imports is listed", root=tmp_path, add_sources=[more])
    man = json.loads(mp.read_text())
    assert len(man["source"]["files"]) == 2 and len(man["extra"]["restamped"]["old_source"]["files"]) == 1
    with pytest.raises(ValueError, match="unchanged"):  # adding a file already listed changes nothing
        ck.restamp("99_test", "m", "the module the script imports is listed", root=tmp_path, add_sources=[more])


def test_restamp(tmp_path):
    src = tmp_path / "src.py"
    src.write_text("x = 1\n")
    mp = _save(tmp_path, sources=[src])
    weights = json.loads(mp.read_text())["weights"]
    with pytest.raises(ValueError, match="unchanged"):
        ck.restamp("99_test", "m", "an evaluation-only edit, nothing trained", root=tmp_path)
    src.write_text("x = 1\ny = 2  # evaluation only\n")
    with pytest.warns(ck.StaleCheckpointWarning):
        ck.load("99_test", "m", config={"d": 8, "arms": ["a", "b"]}, root=tmp_path)
    with pytest.raises(ValueError, match="20 characters"):
        ck.restamp("99_test", "m", "ok", root=tmp_path)
    with pytest.raises(TypeError):
        ck.restamp("99_test", "m", None, root=tmp_path)
    ck.restamp("99_test", "m", "y is only read by the evaluation", root=tmp_path, date="2026-12-04")
    man = json.loads(mp.read_text())
    assert man["weights"] == weights
    assert man["extra"]["restamped"]["date"] == "2026-12-04"
    assert man["extra"]["restamped"]["old_source"]["hash"] != man["source"]["hash"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ck.load("99_test", "m", config={"d": 8, "arms": ["a", "b"]}, root=tmp_path)
    src.write_text("x = 1\ny = 3\n")
    ck.restamp("99_test", "m", "a second evaluation-only edit here", root=tmp_path)
    assert "restamped_2" in json.loads(mp.read_text())["extra"]
    # a corrupt weights file cannot be vouched for
    w = tmp_path / "99_test" / "m.safetensors"
    w.write_bytes(w.read_bytes()[:-4])
    src.write_text("x = 2\n")
    with pytest.raises(ck.CheckpointError, match="do not match"):
        ck.restamp("99_test", "m", "the weights are fine, trust me", root=tmp_path)
    src.unlink()
    with pytest.raises(ck.CheckpointError):
        ck.restamp("99_test", "m", "a source file was deleted here", root=tmp_path)


def _big_tensors(seed=0):
    g = torch.Generator().manual_seed(seed)
    return {"w": torch.randn(64, 128, generator=g), "conv": torch.randn(32, 4, 4, 8, generator=g),
            "zero": torch.zeros(64, 64), "ln": torch.randn(64, generator=g), "small": torch.randn(4, 4, generator=g)}


def test_int8_round_trip(tmp_path):
    ts = _big_tensors()
    mp = ck.save("99_test", "q", ts, config={"d": 1}, metrics={}, root=tmp_path, quantize="int8")
    man = json.loads(mp.read_text())
    assert man["weights"]["quantized"]["tensors"] == 3  # w, conv, zero; ln (1-D) and small stay float
    got = ck.load("99_test", "q", config={"d": 1}, root=tmp_path).tensors
    assert set(got) == set(ts)
    for k in ("ln", "small"):
        assert torch.equal(got[k], ts[k])
    assert torch.equal(got["zero"], ts["zero"])
    for k in ("w", "conv"):
        rows = ts[k].reshape(ts[k].shape[0], -1)
        bound = rows.abs().amax(dim=1, keepdim=True) / 254 + 1e-7  # half a quantization step per row
        assert got[k].dtype == torch.float32 and got[k].shape == ts[k].shape
        assert bool(((got[k] - ts[k]).reshape(rows.shape).abs() <= bound).all())
    assert man["weights"]["quantized"]["max_abs_error"] > 0
    size16 = ck.save("99_test", "h", ts, config={"d": 1}, metrics={}, root=tmp_path, dtype=torch.float16)
    assert man["weights"]["bytes"] < 0.6 * json.loads(size16.read_text())["weights"]["bytes"]
    with pytest.raises(ValueError, match="quantize"):
        ck.save("99_test", "q", ts, config={"d": 1}, metrics={}, root=tmp_path, quantize="int4")


def test_int8_roundtrip_is_what_load_returns(tmp_path):
    ts = _big_tensors(1)
    ck.save("99_test", "q", ts, config={"d": 1}, metrics={}, root=tmp_path, quantize="int8")
    got = ck.load("99_test", "q", config={"d": 1}, root=tmp_path).tensors
    rt = ck.int8_roundtrip(ts)
    assert set(rt) == set(ts)
    for k in ts:
        assert torch.equal(rt[k], got[k]), k
    assert not torch.equal(rt["w"], ts["w"])  # the large matrix did go through int8
    with pytest.raises(TypeError, match="mapping"):
        ck.int8_roundtrip([ts["w"]])
    with pytest.raises(TypeError, match="torch.Tensor"):
        ck.int8_roundtrip({"w": ts["w"].numpy()})
    with pytest.raises(ValueError, match="reserved"):
        ck.int8_roundtrip({"w" + ck._SCALE: ts["w"]})


def test_int8_corrupt_scale(tmp_path):
    from safetensors.torch import load_file, save_file

    ck.save("99_test", "q", _big_tensors(), config={"d": 1}, metrics={}, root=tmp_path, quantize="int8")
    w = tmp_path / "99_test" / "q.safetensors"
    ts = load_file(str(w))
    ts["w"] = ts["w"].float()  # the scale no longer belongs to an int8 tensor
    save_file(ts, str(w), metadata={"checkpoint": "99_test/q"})
    mp = tmp_path / "99_test" / "q.json"
    man = json.loads(mp.read_text())
    man["weights"]["sha256"] = ck.sha256_file(w)
    mp.write_text(json.dumps(man))
    with pytest.raises(ck.CheckpointError, match="corrupt"):
        ck.load("99_test", "q", config={"d": 1}, root=tmp_path)


def test_compress(tmp_path):
    ts = _big_tensors(1)
    mp = ck.save("99_test", "c", ts, config={"d": 1}, metrics={"m": 1.0}, history={"a": [2.0, 1.0]},
                 root=tmp_path, dtype=torch.float16)
    before = json.loads(mp.read_text())
    with pytest.raises(ValueError, match="20 characters"):
        ck.compress("99_test", "c", "too big", root=tmp_path)
    ck.compress("99_test", "c", "over the chapter's size budget", root=tmp_path, date="2026-12-04")
    after = json.loads(mp.read_text())
    assert after["weights"]["bytes"] < before["weights"]["bytes"]
    assert after["extra"]["compressed"]["old_weights"]["sha256"] == before["weights"]["sha256"]
    assert after["history"] == before["history"] and after["config"] == before["config"]
    got = ck.load("99_test", "c", config={"d": 1}, root=tmp_path).tensors
    assert float((got["w"] - ts["w"].half().float()).abs().max()) <= after["extra"]["compressed"]["max_abs_change"]
    with pytest.raises(ValueError, match="already quantized"):
        ck.compress("99_test", "c", "over the chapter's size budget", root=tmp_path)
    w = tmp_path / "99_test" / "c.safetensors"
    w.write_bytes(w.read_bytes()[:-4])
    with pytest.raises(ck.CheckpointError, match="do not match"):
        ck.compress("99_test", "c", "over the chapter's size budget", root=tmp_path)


def test_compress_float16(tmp_path):
    ts = {"w": torch.randn(64, 80, generator=torch.Generator().manual_seed(0)), "n": torch.arange(5),
          "b": torch.randn(80, dtype=torch.float64)}
    mp = ck.save("99_test", "h", ts, config={"d": 1}, metrics={"m": 1.0}, root=tmp_path)
    before = json.loads(mp.read_text())
    with pytest.raises(ValueError, match="'int8' or 'float16'"):
        ck.compress("99_test", "h", "over the chapter's size budget", quantize="bfloat16", root=tmp_path)
    ck.compress("99_test", "h", "over the chapter's size budget", quantize="float16", root=tmp_path)
    after = json.loads(mp.read_text())
    assert after["weights"]["bytes"] < before["weights"]["bytes"]
    assert after["weights"]["dtypes"] == ["float16", "int64"] and "quantized" not in after["weights"]
    c = after["extra"]["compressed"]
    assert c["tensors"] == 2 and c["scheme"].startswith("float16")
    got = ck.load("99_test", "h", config={"d": 1}, root=tmp_path).tensors
    assert torch.equal(got["n"], ts["n"])  # integers untouched
    change = max(float((got[k].double() - ts[k].double()).abs().max()) for k in ("w", "b"))
    assert 0 < change == pytest.approx(c["max_abs_change"])
    assert change <= 2**-11 * max(float(ts[k].abs().max()) for k in ("w", "b"))
    with pytest.raises(ValueError, match="no tensor to convert"):  # already float16: nothing left
        ck.compress("99_test", "h", "over the chapter's size budget", quantize="float16", root=tmp_path)
    big = ck.save("99_test", "o", {"w": torch.full((4, 4), 1e6)}, config={"d": 1}, metrics={}, root=tmp_path)
    with pytest.raises(ValueError, match="float16's range"):
        ck.compress("99_test", "o", "over the chapter's size budget", quantize="float16", root=tmp_path)
    assert json.loads(big.read_text())["weights"]["dtypes"] == ["float32"]  # refused: unchanged


# ---- data outside a checkout: the registry and the download (issue 56) -----------------------------------------

def _make_registry():
    return load_module(DATA / "make_registry.py", "make_registry")


def test_registry_matches_the_data_files_and_config():
    mr = _make_registry()
    want = mr.text()
    assert ck.REGISTRY.read_text() == want, (
        f"{ck.REGISTRY.relative_to(REPO)} is out of date with data/ or _config.yml: "
        ".venv/bin/python data/make_registry.py")
    base, files = ck.read_registry()
    cfg = yaml.safe_load((REPO / "_config.yml").read_text())["repository"]
    owner_repo = cfg["url"].removeprefix("https://github.com/").rstrip("/")
    assert base == f"https://raw.githubusercontent.com/{owner_repo}/{cfg['branch']}/data/"
    # every checkpoint of every chapter is in it, with the hash its manifest records
    for m in _manifests():
        man = json.loads(m.read_text())
        slug = m.parent.name
        assert files[f"{slug}/{m.name}"] == ck.sha256_file(m)
        assert files[f"{slug}/{man['weights']['file']}"] == man["weights"]["sha256"]
    # and the other files chapters read; never a script
    for key in ["01_tree_ensemble_repair/scale.json", "03_tree_search_predictions/grid_mst.txt.gz",
                "05_dsl_harness/credit_sweep.json", "17_sail_scf/pbe_sto-3g.json"]:
        assert key in files
    assert not [k for k in files if k.endswith((".py", ".md"))]
    # the registry ships in the package
    assert "data_registry.txt" in (REPO / "pyproject.toml").read_text()
    # the README's Colab section tells what each chapter downloads
    assert mr.sizes_table() in (REPO / "README.md").read_text(), (
        "README.md's download sizes are out of date: paste `.venv/bin/python data/make_registry.py --sizes`")


def test_registry_generator_refuses_weights_that_do_not_match_their_manifest(tmp_path):
    mr = _make_registry()
    ck.save("01_x", "m", _model(), config={}, metrics={}, root=tmp_path)
    (tmp_path / "01_x" / "make_m.py").write_text("")
    (tmp_path / "01_x" / "r.json").write_text("[1, 2]")
    assert set(mr.entries(tmp_path)) == {"01_x/m.json", "01_x/m.safetensors", "01_x/r.json"}
    w = tmp_path / "01_x" / "m.safetensors"
    w.write_bytes(w.read_bytes()[:-3])
    with pytest.raises(SystemExit, match="does not match its manifest"):
        mr.entries(tmp_path)


@pytest.fixture
def served(tmp_path, monkeypatch):
    """A data folder served over HTTP on 127.0.0.1 (the raw-file URL's stand-in), a registry of it, and this
    package made to behave as if installed outside a checkout (no data/ beside it; a fresh cache)."""
    import functools
    import http.server
    import threading

    data = tmp_path / "served"
    ck.save("99_test", "m", _model(3), config={"d": 8}, metrics={}, root=data)
    (data / "99_test" / "extra.json").write_text('{"answer": 42}\n')
    mr = _make_registry()

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *a):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(data)))
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{srv.server_address[1]}/"
    registry = tmp_path / "data_registry.txt"
    entries = mr.entries(data)
    registry.write_text(f"# base_url: {url}\n" + "".join(f"{k} {v}\n" for k, v in sorted(entries.items())))
    monkeypatch.setattr(ck, "REGISTRY", registry)
    monkeypatch.setattr(ck, "REPO", tmp_path / "site-packages")  # no data/ beside the package
    monkeypatch.delenv("HELPERS_DATA", raising=False)
    monkeypatch.delenv(ck.URL_ENV, raising=False)
    monkeypatch.setenv(ck.CACHE_ENV, str(tmp_path / "cache"))
    yield data, tmp_path / "cache"
    srv.shutdown()
    srv.server_close()


def test_data_dir_checkout_env_and_cache(tmp_path, monkeypatch):
    monkeypatch.delenv("HELPERS_DATA", raising=False)
    assert ck.in_checkout() and ck.data_dir() == REPO / "data"
    assert ck.fetch("04_tree_rope", "arms2.json") == REPO / "data" / "04_tree_rope" / "arms2.json"  # no download
    monkeypatch.setenv("HELPERS_DATA", str(tmp_path))
    assert ck.data_dir() == tmp_path and ck.fetch("04_tree_rope") == tmp_path / "04_tree_rope"
    monkeypatch.delenv("HELPERS_DATA")
    monkeypatch.setattr(ck, "REPO", tmp_path / "site-packages")  # an installed package: no data/ beside it
    monkeypatch.delenv(ck.CACHE_ENV, raising=False)
    import pooch

    assert not ck.in_checkout() and ck.data_dir() == Path(pooch.os_cache("neurips2026-executed"))
    monkeypatch.setenv(ck.CACHE_ENV, str(tmp_path / "c"))
    assert ck.data_dir() == tmp_path / "c"


def test_fetch_and_load_outside_a_checkout(served):
    data, cache = served
    assert ck.data_dir() == cache
    c = ck.load("99_test", "m", config={"d": 8})  # downloads manifest and weights, verifies, loads
    x = torch.randint(0, 16, (2, 5))
    assert torch.equal(c.load_into(_model(0))(x), _model(3)(x))
    assert (cache / "99_test" / "m.safetensors").is_file() and (cache / "99_test" / "m.json").is_file()
    assert json.loads(ck.fetch("99_test", "extra.json").read_text()) == {"answer": 42}
    # a second call does not download again: the server's copy can go
    (data / "99_test" / "m.safetensors").unlink()
    assert ck.load("99_test", "m", config={"d": 8}).manifest["name"] == "m"
    assert ck.fetch("99_test") == cache / "99_test"
    with pytest.raises(ck.CheckpointError, match="not among the data files"):
        ck.fetch("99_test", "nope.json")
    with pytest.raises(ck.CheckpointError, match="not among the data files"):
        ck.load("99_test", "other", config={})


def test_corrupt_download_is_refused_named_and_fetched_again(served):
    data, cache = served
    good = (data / "99_test" / "m.safetensors").read_bytes()
    expected = ck.read_registry()[1]["99_test/m.safetensors"]
    (data / "99_test" / "m.safetensors").write_bytes(good[:-10])  # a truncated transfer
    with pytest.raises(ck.CheckpointError, match="corrupt or truncated") as e:
        ck.load("99_test", "m", config={"d": 8})
    assert "99_test/m.safetensors" in str(e.value) and expected in str(e.value)
    assert not (cache / "99_test" / "m.safetensors").exists(), "an unverified file was kept"
    (data / "99_test" / "m.safetensors").write_bytes(good)
    assert ck.load("99_test", "m", config={"d": 8}).manifest["name"] == "m"  # the next try fetches it again
    # a cached file damaged later is replaced by a verified download, never loaded
    (cache / "99_test" / "m.safetensors").write_bytes(good[:-1] + b"\0")
    ck.load("99_test", "m", config={"d": 8})
    assert (cache / "99_test" / "m.safetensors").read_bytes() == good


def test_download_errors_are_clear(served, monkeypatch):
    data, _ = served
    (data / "99_test" / "extra.json").unlink()
    with pytest.raises(ck.CheckpointError, match="cannot download 99_test/extra.json"):
        ck.fetch("99_test", "extra.json")
    monkeypatch.setattr(ck, "REGISTRY", data / "missing.txt")
    with pytest.raises(ck.CheckpointError, match="registry .* is missing"):
        ck.fetch("99_test", "extra.json")


def test_root_must_be_a_path(tmp_path):  # issue 58: root=int reached pathlib
    calls = [lambda: ck.paths("99_test", "m", 3), lambda: ck.load_manifest("99_test", "m", 3),
             lambda: ck.load("99_test", "m", config={}, root=3),
             lambda: ck.save("99_test", "m", _model(), config={}, metrics={}, root=3),
             lambda: ck.restamp("99_test", "m", "a sentence of at least twenty characters", root=3),
             lambda: ck.compress("99_test", "m", "a sentence of at least twenty characters", root=3)]
    for call in calls:
        with pytest.raises(TypeError, match="root must be a path"):
            call()
    with pytest.raises(TypeError, match="filename"):
        ck.fetch("99_test", 3)
    with pytest.raises(ValueError, match="filename"):
        ck.fetch("99_test", "../x")


def test_manifest_text_is_the_same_json_one_key_per_line():
    m = {"a": [1, 2.5, -3e-05], "b": {"c": [[1, 2], [3, 4]], "d": ["x", "y"]}, "e": [], "f": [{"g": [7]}]}
    text = ck._manifest_text(m)
    assert json.loads(text) == m
    assert text.splitlines()[1] == '"a":[1,2.5,-3e-05],' and '"f":[{"g":[7]}]' in text
    assert len(text.splitlines()) == len(m) + 2 and text.endswith("\n")
    assert json.loads(ck._manifest_text([1, {"a": 2}])) == [1, {"a": 2}]
    with pytest.raises(ValueError):
        ck._manifest_text({"a": float("nan")})


def test_subsample_keeps_a_spike_the_mean_smooths():
    v = np.ones(10_000)
    v[5_003] = 50.0  # one-step collapse
    c = ck.subsample(v, max_points=100)
    assert max(c["value"]) < 1.5  # the bin mean hides it ...
    assert max(c["max"]) == 50.0 and min(c["min"]) == 1.0  # ... the bin's range does not
    assert len(c["min"]) == len(c["max"]) == len(c["step"]) == 100
    short = ck.subsample([1.0, 2.0])
    assert set(short) == {"step", "value"}  # an unbinned curve is kept as it is


def test_save_accepts_a_subsampled_curve_and_keeps_its_band(tmp_path):
    v = np.linspace(2.0, 1.0, 5_000)
    v[2_501] = 40.0
    c = ck.subsample(v, max_points=50)
    curves = ck._curves({"loss/0": c})
    assert curves["loss/0"]["step"] == c["step"] and curves["loss/0"]["value"] == c["value"]
    assert max(curves["loss/0"]["max"]) == 40.0 and curves["loss/0"]["min"] == c["min"]
    with pytest.raises(ValueError, match="one entry per step"):
        ck._curves({"loss/0": {**c, "max": c["max"][:-1]}})
    with pytest.raises((ValueError, TypeError)):
        ck._curves({"loss/0": {**c, "extra": c["max"]}})


def test_restamp_record(tmp_path):
    src, more = tmp_path / "make_probe.py", tmp_path / "module.py"
    src.write_text("x = 1\n")
    more.write_text("z = 0\n")
    rec = tmp_path / "probe.json"
    rec.write_text(json.dumps({"what": "a probe", "acc": 0.5, "source": ck.source_hash([src])}))
    with pytest.raises(ValueError, match="unchanged"):
        ck.restamp_record(rec, "an evaluation-only edit, nothing re-run")
    with pytest.raises(ValueError, match="20 characters"):
        ck.restamp_record(rec, "ok")
    with pytest.raises(TypeError, match="add_sources"):
        ck.restamp_record(rec, "the module the script imports is listed", add_sources="module.py")
    old_files = json.loads(rec.read_text())["source"]["files"]
    ck.restamp_record(rec, "the module the script imports is listed", add_sources=[more], date="2026-12-06")
    r = json.loads(rec.read_text())
    assert r["acc"] == 0.5 and len(r["source"]["files"]) == 2
    assert r["source_restamped"] == {"date": "2026-12-06", "why": "the module the script imports is listed",
                                     "run_with": old_files}
    assert r["source"] == ck.source_hash([src, more])
    src.write_text("x = 1  # a comment\n")
    ck.restamp_record(rec, "a comment only, nothing measured changed")
    assert "source_restamped_2" in json.loads(rec.read_text())
    # broken inputs: no source, not JSON, a missing source file, no file at all
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps({"acc": 1.0}))
    with pytest.raises(ck.CheckpointError, match="no 'source'"):
        ck.restamp_record(bare, "records without a source list")
    bare.write_text("{not json")
    with pytest.raises(ck.CheckpointError, match="not valid JSON"):
        ck.restamp_record(bare, "a corrupt record cannot be vouched for")
    more.unlink()
    with pytest.raises(ck.CheckpointError, match="missing"):
        ck.restamp_record(rec, "a source file was deleted here")
    with pytest.raises(Exception, match="existing file"):
        ck.restamp_record(tmp_path / "none.json", "there is no such record")


def test_config_by_rule_applies_only_a_recorded_rule():
    cfg = dict(d=8, seeds=[0, 1, 2], stored_seed=0)
    ran = dict(d=8, seeds=[1], stored_seed=1)
    reason = {"seeds_by_rule": "round 7's rule stopped after its probe seed 1"}
    assert config_by_rule(cfg, {"config": ran, "extra": reason}) == ran
    # no reason recorded: the chapter's config, so a silent subset still differs from the manifest in 'seeds'
    assert config_by_rule(cfg, {"config": ran}) == cfg
    assert ck.diff_config(config_by_rule(cfg, {"config": ran, "extra": {}}), ran) != []
    # a reason does not excuse any other difference
    other = dict(ran, d=16)
    assert ck.diff_config(config_by_rule(cfg, {"config": other, "extra": reason}), other) == ["d"]
    for bad in ({"seeds_by_rule": ""}, {"seeds_by_rule": True}):
        with pytest.raises(ValueError, match="non-empty string"):
            config_by_rule(cfg, {"config": ran, "extra": bad})
    for seeds in ([0, 1, 2], [5], []):  # not a proper subset of the default seeds
        with pytest.raises(ValueError):
            config_by_rule(cfg, {"config": dict(ran, seeds=seeds), "extra": reason})
    with pytest.raises(TypeError):
        config_by_rule(cfg, {"config": ran, "extra": ["seeds_by_rule"]})
    with pytest.raises(TypeError):
        config_by_rule(cfg, [("config", ran)])

