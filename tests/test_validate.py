import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import validate as V

FAST = settings(max_examples=60, deadline=None)


@FAST
@given(st.integers(-(10**12), 10**12))
def test_integer_accepts_ints_and_numpy_ints(x):
    assert V.integer("n", x) == x and type(V.integer("n", x)) is int
    assert V.integer("n", np.int64(x)) == x


@pytest.mark.parametrize("bad", [True, False, np.bool_(True), 3.0, 2.5, float("nan"), "3", None, [3], 1j])
def test_integer_rejects_non_integers(bad):
    with pytest.raises(TypeError, match=r"^n must be an integer, got"):
        V.integer("n", bad)


@FAST
@given(st.integers(-100, 100), st.integers(-100, 100), st.integers(-100, 100))
def test_integer_range(x, lo, hi):
    if lo <= x <= hi:
        assert V.integer("k", x, min=lo, max=hi) == x
    else:
        with pytest.raises(ValueError, match=r"^k must be an integer >= .* and <= .*, got"):
            V.integer("k", x, min=lo, max=hi)


@FAST
@given(st.floats(allow_nan=True, allow_infinity=True))
def test_number_rejects_nan_always_and_inf_when_finite(x):
    if math.isnan(x):
        for finite in (True, False):
            with pytest.raises(ValueError, match="^dt must be"):
                V.number("dt", x, finite=finite)
    elif math.isinf(x):
        with pytest.raises(ValueError, match="^dt must be a finite number"):
            V.number("dt", x)
        assert V.number("dt", x, finite=False) == x
    else:
        assert V.number("dt", x) == x


@FAST
@given(st.floats(allow_nan=True, allow_infinity=False), st.floats(-10, 10), st.booleans())
def test_number_min_strict_and_nan_never_in_range(x, lo, strict):
    ok = (x > lo if strict else x >= lo) and not math.isnan(x)
    if ok:
        assert V.number("x", x, min=lo, strict_min=strict) == x
    else:
        with pytest.raises(ValueError, match="^x must be"):
            V.number("x", x, min=lo, strict_min=strict)


@pytest.mark.parametrize("bad", [True, "1.0", None, 1j, [1.0], np.array([1.0, 2.0])])
def test_number_rejects_non_numbers(bad):
    with pytest.raises(TypeError, match="^lr must be a real number, got"):
        V.number("lr", bad)


def test_number_accepts_numpy_and_one_element_tensor():
    assert V.number("a", np.float32(0.5)) == 0.5
    assert V.number("a", torch.tensor(2.0)) == 2.0


def test_positive_probability_nonnegative():
    assert V.positive("a", 1) == 1.0
    for bad in (0, -1, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="^a must be"):
            V.positive("a", bad)
    assert V.nonnegative("a", 0) == 0.0
    with pytest.raises(ValueError):
        V.nonnegative("a", -1e-9)
    assert V.probability("p", 1) == 1.0 and V.probability("p", 0.0) == 0.0
    for bad in (-0.1, 1.1, float("nan")):
        with pytest.raises(ValueError, match="^p must be a finite number >= 0 and <= 1"):
            V.probability("p", bad)


def test_boolean():
    assert V.boolean("flag", np.bool_(False)) is False
    for bad in (0, 1, "False", None):
        with pytest.raises(TypeError, match="^flag must be a bool"):
            V.boolean("flag", bad)


def test_array_shapes_dtypes_and_finiteness():
    a = V.array("x", [[1, 2], [3, 4]], ndim=2, shape=(None, 2), dtype="float")
    assert a.dtype == np.float64 and a.shape == (2, 2)
    f32 = np.ones(3, np.float32)
    assert V.array("x", f32, dtype="float").dtype == np.float32  # no silent upcast of valid float input
    with pytest.raises(ValueError, match="^x must have ndim 1, got an array of shape"):
        V.array("x", np.ones((2, 2)), ndim=1)
    with pytest.raises(ValueError, match=r"^x must have shape \(\*, 3\)"):
        V.array("x", np.ones((2, 2)), shape=(None, 3))
    with pytest.raises(ValueError, match="^x must be finite"):
        V.array("x", [1.0, np.nan])
    assert np.isnan(V.array("x", [1.0, np.nan], finite=False)[1])
    with pytest.raises(TypeError, match="^x must be an integer array"):
        V.array("x", [1.0], dtype="int")
    with pytest.raises(TypeError, match="^x must be an array"):
        V.array("x", None)
    with pytest.raises(TypeError, match="^x must be a numeric array"):
        V.array("x", ["a", "b"])
    with pytest.raises(TypeError, match="not ragged"):
        V.array("x", [[1, 2], [3]])
    with pytest.raises(ValueError, match="^x must not be empty"):
        V.array("x", [], nonempty=True)
    with pytest.raises(ValueError, match="^x must have values >= 0"):
        V.array("x", [0, -1], min=0)
    assert V.array("x", torch.ones(2), ndim=(1, 2)).shape == (2,)


@FAST
@given(st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=1, max_size=8))
def test_array_finite_property(xs):
    a = np.array(xs)
    if np.isfinite(a).all():
        np.testing.assert_array_equal(V.array("v", xs), a)
    else:
        with pytest.raises(ValueError, match="^v must be finite"):
            V.array("v", xs)


def test_tensor():
    t = torch.zeros(2, 3)
    assert V.tensor("t", t, ndim=2, dtype="float") is t
    with pytest.raises(TypeError, match="^t must be a torch.Tensor"):
        V.tensor("t", np.zeros(3))
    with pytest.raises(TypeError, match="^t must have dtype int"):
        V.tensor("t", t, dtype="int")
    with pytest.raises(ValueError, match="^t must be finite"):
        V.tensor("t", torch.tensor([0.0, float("inf")]))
    with pytest.raises(ValueError, match=r"^t must have shape \(2, \*\)"):
        V.tensor("t", t.T, shape=(2, None))
    with pytest.raises(TypeError, match="torch.int64"):
        V.tensor("t", t, dtype=torch.int64)


@FAST
@given(st.lists(st.integers(-3, 12), min_size=1, max_size=10), st.integers(1, 10), st.booleans())
def test_token_ids(ids, vocab, as_tensor):
    x = torch.tensor(ids) if as_tensor else ids
    if all(0 <= i < vocab for i in ids):
        out = V.token_ids("idx", x, vocab)
        assert out.tolist() == ids
        assert isinstance(out, torch.Tensor) == as_tensor
    else:
        with pytest.raises(ValueError, match=rf"^idx must have values >= 0 and < {vocab}"):
            V.token_ids("idx", x, vocab)


def test_token_ids_rejects_float():
    with pytest.raises(TypeError, match="^idx must have dtype int"):
        V.token_ids("idx", torch.tensor([0.0]), 3)


def test_index_seed():
    assert V.index("i", 2, 3) == 2
    for bad in (3, -1):
        with pytest.raises(ValueError, match=r"^i must be an index in \[0, 3\)"):
            V.index("i", bad, 3)
    assert V.seed("seed", 0) == 0 and V.seed("seed", 2**32 - 1) == 2**32 - 1
    for bad in (-1, 2**32):
        with pytest.raises(ValueError, match="^seed must be"):
            V.seed("seed", bad)
    with pytest.raises(TypeError):
        V.seed("seed", 1.0)


def test_files(tmp_path):
    f = tmp_path / "a.txt"
    f.write_text("x")
    assert V.existing_file("path", str(f)) == f
    assert V.existing_dir("root", tmp_path) == tmp_path
    with pytest.raises(V.MissingFileError, match="^path must name an existing file, got .*nothing"):
        V.existing_file("path", tmp_path / "missing")
    with pytest.raises(FileNotFoundError):  # MissingFileError is both
        V.existing_file("path", tmp_path)
    with pytest.raises(ValueError, match="which is a file"):
        V.existing_dir("root", f)
    with pytest.raises(TypeError, match="^path must be a path"):
        V.existing_file("path", None)
    with pytest.raises(ValueError, match="non-empty"):
        V.existing_file("path", "")


def test_one_of_optional_instance_function_sequence():
    assert V.one_of("mode", "a", ("a", "b")) == "a"
    with pytest.raises(ValueError, match=r"^mode must be one of \['a', 'b'\], got 'c'"):
        V.one_of("mode", "c", ("a", "b"))
    with pytest.raises(ValueError):
        V.one_of("k", True, (0, 1))
    with pytest.raises(ValueError):
        V.one_of("k", [1], ("a",))
    assert V.optional(V.integer, "n", None) is None
    assert V.optional(V.integer, "n", 3, min=1) == 3
    with pytest.raises(TypeError, match="^m must be a int"):
        V.instance("m", "x", int)
    with pytest.raises(TypeError, match="^f must be callable"):
        V.function("f", 3)
    assert V.sequence("xs", (1, 2), min_len=1, of=V.integer) == [1, 2]
    with pytest.raises(TypeError, match="^xs must be a sequence"):
        V.sequence("xs", "ab")
    with pytest.raises(ValueError, match="at least 1"):
        V.sequence("xs", [], min_len=1)
    with pytest.raises(TypeError, match=r"^xs\[1\] must be an integer"):
        V.sequence("xs", [1, 2.0], of=V.integer)


def test_describe_truncates():
    assert len(V.describe("x" * 500)) < 80
    assert "shape (2, 3)" in V.describe(np.zeros((2, 3)))
