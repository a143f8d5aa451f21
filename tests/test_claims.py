import json
import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from helpers.claims import (
    OPS,
    SCHEMA,
    CheckFailed,
    ClaimsRecord,
    qualifying_seeds,
    record_problems,
    render_html,
    render_markdown,
    summary_text,
    verdict_of,
)

finite = st.floats(allow_nan=False, allow_infinity=False, width=64, min_value=-1e12, max_value=1e12)


# -- checks ----------------------------------------------------------------------------------------------------
def test_check_passes_and_fails():
    rec = ClaimsRecord("nb", {"quick": True, "seed": 0})
    assert rec.check("small", 0.1, 1.0, op="<=")
    assert rec.check("flag", True)
    with pytest.raises(CheckFailed, match="big"):
        rec.check("big", 2.0, 1.0, op="<=")
    assert [c.ok for c in rec.checks] == [True, True, False]


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), np.float32("nan"), np.float64("-inf"),
                                 torch.tensor(float("nan")), np.array(float("nan"))])
def test_nan_or_inf_of_any_type_never_passes(bad):
    rec = ClaimsRecord("nb")
    with pytest.raises(CheckFailed):
        rec.check("nan", bad, 1.0, op="!=")
    with pytest.raises(CheckFailed):
        rec.check("nan_bound", 1.0, bad, op="!=")


@pytest.mark.parametrize("arr", [np.zeros(3), torch.zeros(2, 2), [1, 2]])
def test_check_refuses_arrays(arr):
    with pytest.raises(TypeError, match="single number"):
        ClaimsRecord("nb").check("arr", arr, 1.0, op="<")


@pytest.mark.parametrize("op,value,bound,ok", [("<", 1, 2, True), ("<", 2, 2, False), (">=", 2, 2, True),
                                               (">", 1, 2, False), ("==", 3, 3, True), ("!=", 3, 3, False)])
def test_ops(op, value, bound, ok):
    rec = ClaimsRecord("nb")
    if ok:
        assert rec.check("c", value, bound, op=op)
    else:
        with pytest.raises(CheckFailed):
            rec.check("c", value, bound, op=op)


def test_bad_record_inputs():
    rec = ClaimsRecord("nb")
    with pytest.raises(ValueError):
        rec.check("c", 1, 2, op="=<")
    rec.check("dup", 1, 1)
    with pytest.raises(ValueError, match="twice"):
        rec.check("dup", 1, 1)
    with pytest.raises(TypeError):
        ClaimsRecord("")
    with pytest.raises(TypeError):
        ClaimsRecord("nb", params=[1, 2])


# -- claims: the verdict is computed, never passed in ----------------------------------------------------------
def test_holds_is_not_an_argument_any_more():
    with pytest.raises(TypeError):
        ClaimsRecord("nb").claim("x", "s", paper=1, measured=1.0, op=">=", target=0.5, holds=True)


@given(st.lists(finite, min_size=1, max_size=6), finite, st.sampled_from(sorted(OPS)))
def test_verdict_is_held_at_all_mixed_at_some_not_at_none(values, target, op):
    ok = [OPS[op](v, target) for v in values]
    expected = "held" if all(ok) else ("mixed" if any(ok) else "not held")
    assert verdict_of(values, op, target) == expected
    rec = ClaimsRecord("nb")
    assert rec.claim("c", "s", paper="p", measured=values, op=op, target=target) == expected
    c = rec.claims[0]
    assert c.n == len(values) and c.min == min(values) and c.max == max(values)
    assert math.isclose(c.mean, sum(values) / len(values), rel_tol=1e-9, abs_tol=1e-9)
    assert c.holds_per_seed == ok


@given(finite, finite, st.sampled_from(sorted(OPS)))
def test_scalar_verdict_is_held_or_not(value, target, op):
    v = verdict_of(value, op, target)
    assert v == ("held" if OPS[op](value, target) else "not held")


def test_numpy_and_torch_scalars_are_numbers():
    rec = ClaimsRecord("nb")
    assert rec.claim("a", "s", paper=1, measured=np.float64(0.3), op=">", target=0.5) == "not held"
    assert rec.claim("b", "s", paper=1, measured=torch.tensor(0.7), op=">", target=np.float32(0.5)) == "held"
    assert rec.claim("c", "s", paper=1, measured=np.array([0.7, 0.2]), op=">", target=0.5) == "mixed"


@pytest.mark.parametrize("measured,err,match", [
    ("0.819 vs 0.798", TypeError, "string"),
    (True, TypeError, "bool"),
    (np.bool_(True), TypeError, "bool"),
    (float("nan"), ValueError, "finite"),
    (np.float64("inf"), ValueError, "finite"),
    (torch.tensor(float("nan")), ValueError, "finite"),
    ([1.0, float("nan")], ValueError, "finite"),
    ([], ValueError, "empty"),
    (np.zeros((2, 2)), TypeError, "dimensions"),
    (None, TypeError, "real number"),
    ({"a": 1}, TypeError, "real number"),
])
def test_rejected_measurements_name_the_claim(measured, err, match):
    with pytest.raises(err, match=match) as e:
        ClaimsRecord("nb").claim("my_claim", "s", paper=1, measured=measured, op=">=", target=0.5)
    assert "my_claim" in str(e.value)


@pytest.mark.parametrize("kw,err", [
    (dict(op="=>"), ValueError), (dict(target="0.5"), TypeError), (dict(target=float("nan")), ValueError),
    (dict(baseline="strong"), TypeError), (dict(baseline=[0.1, float("inf")]), ValueError),
    (dict(statement=""), ValueError), (dict(note=3), TypeError),
])
def test_rejected_claim_arguments(kw, err):
    args = dict(statement="s", paper=1, measured=1.0, op=">=", target=0.5) | kw
    with pytest.raises(err, match="c1"):
        ClaimsRecord("nb").claim("c1", **args)


def test_untested_needs_a_reason():
    rec = ClaimsRecord("nb")
    with pytest.raises(ValueError, match="reason"):
        rec.untested("u", "needs a GPU cluster", paper="yes", reason=" ")
    assert rec.untested("u", "needs a GPU cluster", paper="yes", reason="8 GPUs for a week") == "untested"
    assert rec.claims[0].verdict == "untested" and rec.claims[0].measured is None


def test_save_writes_schema_3(tmp_path):
    rec = ClaimsRecord("02_tree_training", {"quick": False, "seed": 4, "n": np.int64(3)})
    rec.check("exact", np.float64(1e-12), 1e-9, op="<=")
    rec.claim("speedup", "Tree training is faster", paper="6.2x", measured=[np.float32(2.5), 7.0, 6.5],
              op=">=", target=6.2, unit="x", baseline=[1.0, 1.0, 1.0], note="small model")
    rec.untested("cluster", "Needs a GPU cluster", paper="yes", reason="no GPU here")
    path = rec.save(tmp_path, display=False)
    data = json.loads(path.read_text())
    assert path.name == "02_tree_training.json"
    assert data["schema"] == SCHEMA == 3
    assert set(data) == {"schema", "notebook", "params", "quick", "seconds", "packages", "checks", "conditions",
                         "claims"}
    assert data["params"] == {"quick": False, "seed": 4, "n": 3} and data["quick"] is False
    assert data["checks"][0] == {"id": "exact", "value": 1e-12, "bound": 1e-9, "op": "<=", "ok": True, "note": ""}
    c = data["claims"][0]
    assert {"id", "statement", "paper", "measured", "mean", "min", "max", "n", "op", "target", "unit", "baseline",
            "note", "verdict"} <= set(c)
    assert (c["verdict"], c["n"], c["op"], c["target"], c["baseline"]) == ("mixed", 3, ">=", 6.2, [1, 1, 1])
    assert data["claims"][1]["verdict"] == "untested" and data["claims"][1]["reason"] == "no GPU here"
    for c in data["claims"][:1]:  # the stored verdict is what verdict_of recomputes
        assert verdict_of(c["measured"], c["op"], c["target"]) == c["verdict"]
    assert "numpy" in data["packages"] and data["seconds"] >= 0


def test_results_dir_from_env(tmp_path, monkeypatch):
    monkeypatch.setenv("HELPERS_RESULTS_DIR", str(tmp_path / "r"))
    path = ClaimsRecord("nb").save(display=False)
    assert path == tmp_path / "r" / "nb.json" and path.exists()


def test_renderers_show_every_claim_seed_range_target_and_summary():
    rec = ClaimsRecord("nb", {"quick": True})
    rec.check("c", 1, 1)
    rec.claim("a<b", "x < y", paper=1, measured=[0.2, 0.4, 0.9], op="<", target=0.5, baseline=[1, 2, 3])
    rec.claim("b", "y", paper=1, measured=0.0, op=">", target=1, note="too small a model")
    rec.untested("u", "z", paper=1, reason="needs a cluster")
    d = rec.to_dict()
    md, html = render_markdown(d), render_html(d)
    assert "mixed" in md and "not held" in md and "untested" in md and "Checks: 1/1" in md
    assert "n=3" in md and "< 0.5" in md and "0.2–0.9" in md and "2 (n=3)" in md
    assert "quick mode" in html and "a&lt;b" in html and "What held" in html
    s = summary_text(d)
    assert "0 held, 1 mixed, 1 did not hold, 0 were inconclusive" in s and "1 could not be tested" in s
    assert "too small a model" in s and "needs a cluster" in s


# -- conditions: a claim whose experiment was not ready is inconclusive, not "not held" -------------------------
def _rec_with(fit_per_seed, measured=(0.1, 0.2, 0.3)):
    rec = ClaimsRecord("nb")
    rec.condition("fits", list(fit_per_seed), ">=", 0.95, statement="the model fits its training data")
    v = rec.claim("gain", "the method beats the baseline", paper="+5%", measured=list(measured), op=">=",
                  target=0.5, given=("fits",))
    return rec, v


def test_claim_goes_from_not_held_to_inconclusive_and_back():
    # every seed fits: the claim's own numbers decide (not held)
    rec, v = _rec_with([0.99, 0.99, 0.99])
    assert v == "not held" and rec.claims[0].inconclusive_seeds == []
    # no seed fits: nothing about the paper can be said
    rec, v = _rec_with([0.5, 0.6, 0.7])
    assert v == "inconclusive" and rec.claims[0].inconclusive_seeds == [0, 1, 2]
    assert rec.claims[0].failed_conditions == {"0": ["fits"], "1": ["fits"], "2": ["fits"]}
    assert rec.conditions[0].verdict == "not met"
    # the boundary itself: 0.95 >= 0.95 meets the condition
    rec, v = _rec_with([0.95, 0.9499, 0.95], measured=(0.6, 0.9, 0.1))
    assert v == "mixed" and rec.claims[0].inconclusive_seeds == [1]
    # the seed that fails the condition is the only one where the claim held: not held over the others
    rec, v = _rec_with([0.99, 0.5, 0.99], measured=(0.1, 0.9, 0.1))
    assert v == "not held" and rec.conditions[0].verdict == "mixed"
    # and held over the qualifying seeds
    rec, v = _rec_with([0.99, 0.5, 0.99], measured=(0.6, 0.1, 0.7))
    assert v == "held"
    # one qualifying seed of three gives no verdict, even where it held there
    rec, v = _rec_with([0.5, 0.5, 0.99], measured=(0.1, 0.1, 0.7))
    assert v == "inconclusive" and rec.claims[0].inconclusive_seeds == [0, 1]


def test_verdict_of_with_qualifying_seeds():
    assert verdict_of([1, 2, 3], ">", 0, [True, True, True]) == "held"
    assert verdict_of([1, 2, 3], ">", 0, [False, False, False]) == "inconclusive"
    assert verdict_of([1, -2, 3], ">", 0, [True, True, False]) == "mixed"
    assert verdict_of([1, -2, 3], ">", 0, [False, True, True]) == "mixed"
    assert verdict_of([-1, -2, 3], ">", 0, [True, True, False]) == "not held"
    # a verdict needs most seeds: one qualifying seed of three is one run, whatever it gives
    assert verdict_of([1, -2, 3], ">", 0, [False, True, False]) == "inconclusive"
    assert verdict_of([1, 2, 3], ">", 0, [False, False, True]) == "inconclusive"
    assert verdict_of([1, 2], ">", 0, [True, False]) == "inconclusive"
    assert verdict_of([1, 2, 3, 4, 5], ">", 0, [True, True, True, False, False]) == "held"
    assert verdict_of([1, 2, 3, 4], ">", 0, [True, True, False, False]) == "inconclusive"
    assert verdict_of(1.0, ">", 0, [True]) == "held"
    assert verdict_of(1.0, ">", 0, [False]) == "inconclusive"
    with pytest.raises(ValueError, match="bools"):
        verdict_of([1, 2], ">", 0, [True])
    with pytest.raises(ValueError, match="bools"):
        verdict_of([1, 2], ">", 0, [1, 0])
    with pytest.raises(TypeError, match="sequence"):
        verdict_of([1, 2], ">", 0, "yes")


def test_qualifying_seeds_broadcast_and_pooled():
    # a condition measured once applies to every seed
    assert qualifying_seeds(3, ["c"], {"c": [False]}) == ([False] * 3, {"0": ["c"], "1": ["c"], "2": ["c"]})
    # a pooled claim (one number) qualifies only if the condition holds at every seed
    assert qualifying_seeds(1, ["c"], {"c": [True, False, True]})[0] == [False]
    assert qualifying_seeds(1, ["c"], {"c": [True, True]})[0] == [True]
    with pytest.raises(ValueError, match="same seeds"):
        qualifying_seeds(3, ["c"], {"c": [True, False]})
    with pytest.raises(ValueError, match="not recorded"):
        qualifying_seeds(3, ["d"], {"c": [True]})


def test_given_must_name_recorded_conditions():
    rec = ClaimsRecord("nb")
    with pytest.raises(ValueError, match="not recorded"):
        rec.claim("x", "s", paper=1, measured=1.0, op=">", target=0, given=("fits",))
    rec.condition("fits", 1.0, ">=", 0.9)
    with pytest.raises(TypeError, match="condition ids"):
        rec.claim("x", "s", paper=1, measured=1.0, op=">", target=0, given=(1,))
    with pytest.raises(ValueError, match="twice"):
        rec.claim("x", "s", paper=1, measured=1.0, op=">", target=0, given=("fits", "fits"))
    assert rec.claim("x", "s", paper=1, measured=1.0, op=">", target=0, given="fits") == "held"
    with pytest.raises(ValueError, match="same seeds"):
        rec.condition("two", [1.0, 1.0], ">=", 0.9)
        rec.claim("y", "s", paper=1, measured=[1.0, 2.0, 3.0], op=">", target=0, given=("two",))


@pytest.mark.parametrize("bad", [float("nan"), "high", [], [1.0, float("inf")]])
def test_condition_refuses_bad_numbers(bad):
    with pytest.raises((TypeError, ValueError)):
        ClaimsRecord("nb").condition("c", bad, ">=", 0.9)


def test_record_problems_recomputes_conditions_and_inconclusive():
    rec, _ = _rec_with([0.5, 0.6, 0.7])
    d = json.loads(json.dumps(rec.to_dict()))
    assert record_problems(d) == []
    # a claim stored as "not held" while its conditions failed everywhere is refused
    bad = json.loads(json.dumps(d))
    bad["claims"][0]["verdict"] = "not held"
    assert any("gives 'inconclusive'" in p for p in record_problems(bad))
    # a condition whose numbers were edited after the fact is refused, and so is the claim resting on it
    bad = json.loads(json.dumps(d))
    bad["conditions"][0]["measured"] = [0.99, 0.99, 0.99]
    probs = record_problems(bad)
    assert any("condition 'fits'" in p for p in probs) and any("claim 'gain'" in p for p in probs)
    # dropping a condition the claim names is refused
    bad = json.loads(json.dumps(d))
    bad["conditions"] = []
    assert any("not recorded" in p for p in record_problems(bad))
    old = dict(d, schema=2)
    assert "schema" in record_problems(old)[0]


@pytest.mark.parametrize("bad", [None, [], "record", {"schema": 3, "claims": "x"}, {"schema": 3, "claims": [1]},
                                 {"schema": 3, "claims": [{"id": "a", "verdict": "held"}]}])
def test_renderers_refuse_malformed_records(bad):
    for f in (render_markdown, render_html, summary_text):
        with pytest.raises(ValueError, match="not a valid claims record"):
            f(bad)


def test_renderers_show_conditions_and_inconclusive():
    rec, _ = _rec_with([0.5, 0.99, 0.7])
    rec.untested("u", "z", paper=1, reason="cluster")
    d = rec.to_dict()
    md, html, s = render_markdown(d), render_html(d), summary_text(d)
    assert "fits" in md and "not met" not in md and "mixed" in md  # the condition row, met at one seed
    assert "Conditions of the experiment" in html and "failed at seed 0: fits; seed 2: fits" in html
    assert "Conditions not met at every seed: fits" in s
    rec2, _ = _rec_with([0.1, 0.1, 0.1])
    assert "⚪ inconclusive" in render_markdown(rec2.to_dict())
    assert "1 were inconclusive" in summary_text(rec2.to_dict())
