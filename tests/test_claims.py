import json
import math

import numpy as np
import pytest

from helpers.claims import CheckFailed, ClaimsRecord, render_html, render_markdown


def test_check_passes_and_fails():
    rec = ClaimsRecord("nb", {"quick": True, "seed": 0})
    assert rec.check("small", 0.1, 1.0, op="<=")
    assert rec.check("flag", True)
    with pytest.raises(CheckFailed, match="big"):
        rec.check("big", 2.0, 1.0, op="<=")
    assert [c.ok for c in rec.checks] == [True, True, False]


def test_nan_never_passes():
    rec = ClaimsRecord("nb")
    with pytest.raises(CheckFailed):
        rec.check("nan", float("nan"), 1.0, op="!=")


@pytest.mark.parametrize("op,value,bound,ok", [("<", 1, 2, True), ("<", 2, 2, False), (">=", 2, 2, True),
                                               (">", 1, 2, False), ("==", 3, 3, True), ("!=", 3, 3, False)])
def test_ops(op, value, bound, ok):
    rec = ClaimsRecord("nb")
    if ok:
        assert rec.check("c", value, bound, op=op)
    else:
        with pytest.raises(CheckFailed):
            rec.check("c", value, bound, op=op)


def test_bad_inputs():
    rec = ClaimsRecord("nb")
    with pytest.raises(ValueError):
        rec.check("c", 1, 2, op="=<")
    rec.check("dup", 1, 1)
    with pytest.raises(ValueError, match="twice"):
        rec.check("dup", 1, 1)
    with pytest.raises(TypeError):
        rec.claim("x", "s", paper=1, measured=1, holds="yes")
    with pytest.raises(TypeError):
        ClaimsRecord("")


def test_save_writes_the_documented_json(tmp_path):
    rec = ClaimsRecord("02_tree_training", {"quick": False, "seed": 4, "n": np.int64(3)})
    rec.check("exact", np.float64(1e-12), 1e-9, op="<=")
    rec.claim("speedup", "Tree training is faster", paper=6.2, measured=np.float32(2.5), unit="x",
              holds=np.bool_(False), note="small model")
    rec.claim("untestable", "Needs a GPU cluster", paper="yes", measured=float("inf"), holds=None)
    path = rec.save(tmp_path, display=False)
    data = json.loads(path.read_text())
    assert path.name == "02_tree_training.json"
    assert set(data) == {"notebook", "params", "quick", "seconds", "packages", "checks", "claims"}
    assert data["params"] == {"quick": False, "seed": 4, "n": 3} and data["quick"] is False
    assert data["checks"][0] == {"id": "exact", "value": 1e-12, "bound": 1e-9, "op": "<=", "ok": True, "note": ""}
    c = data["claims"][0]
    assert (c["id"], c["paper"], c["unit"], c["holds"]) == ("speedup", 6.2, "x", False)
    assert math.isclose(c["measured"], 2.5)
    assert data["claims"][1]["measured"] == "inf" and data["claims"][1]["holds"] is None
    assert "numpy" in data["packages"] and data["seconds"] >= 0


def test_results_dir_from_env(tmp_path, monkeypatch):
    monkeypatch.setenv("HELPERS_RESULTS_DIR", str(tmp_path / "r"))
    path = ClaimsRecord("nb").save(display=False)
    assert path == tmp_path / "r" / "nb.json" and path.exists()


def test_renderers_show_every_claim_and_mark_quick():
    rec = ClaimsRecord("nb", {"quick": True})
    rec.check("c", 1, 1)
    rec.claim("a<b", "x < y", paper=1, measured=2, holds=True)
    rec.claim("b", "y", paper=1, measured=0, holds=False)
    d = rec.to_dict()
    md, html = render_markdown(d), render_html(d)
    assert "held" in md and "did not hold" in md and "Checks: 1/1" in md
    assert "quick mode" in html and "a&lt;b" in html
