"""Argument checks for the door of every public function: a clear error instead of a hang or a silent NaN.

Each checker takes the argument's ``name`` and its value, raises :class:`TypeError` (wrong kind of thing) or
:class:`ValueError` (right kind, wrong value) with a message that names the argument, the expected form and what
was given, and returns the validated (converted) value::

    n = validate.integer("n", n, min=1)                      # 3, np.int64(3) -> 3; 3.0, True, "3" -> TypeError
    dt = validate.number("dt", dt, min=0, strict_min=True)   # NaN, inf, -1 -> ValueError
    x = validate.array("x", x, ndim=2, dtype="float")        # a finite float array of two dimensions
    ids = validate.token_ids("idx", idx, vocab_size)          # an integer tensor/array with values in [0, V)

Range checks are written so that NaN fails them (``not (x >= lo)``, never ``x < lo``). A missing file raises
:class:`MissingFileError`, which is both a :class:`FileNotFoundError` and a :class:`ValueError`.
Checks belong at the door (once per call), not inside loops run millions of times.
"""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

__all__ = [
    "MissingFileError", "describe", "integer", "number", "positive", "nonnegative", "probability", "boolean",
    "array", "tensor", "index", "token_ids", "seed", "existing_file", "existing_dir", "one_of", "optional",
    "instance", "function", "sequence",
]

T = TypeVar("T")

SEED_MAX = 2**32  # the range numpy's legacy seeding and helpers.repro accept: [0, 2**32)


class MissingFileError(FileNotFoundError, ValueError):
    """A path argument that does not name an existing file or directory."""


def describe(x: Any, limit: int = 60) -> str:
    """A short description of ``x`` for an error message: a truncated repr and the type name."""
    if _is_tensor(x) or isinstance(x, np.ndarray):
        return f"{type(x).__name__} of shape {tuple(x.shape)} and dtype {x.dtype}"
    try:
        r = repr(x)
    except Exception:  # pragma: no cover - a broken __repr__
        r = "<unprintable>"
    if len(r) > limit:
        r = r[: limit - 3] + "..."
    return f"{r} ({type(x).__name__})"


def _range_text(min: Any, max: Any, strict_min: bool = False, strict_max: bool = False) -> str:
    parts = []
    if min is not None:
        parts.append(f"{'>' if strict_min else '>='} {min}")
    if max is not None:
        parts.append(f"{'<' if strict_max else '<='} {max}")
    return " and ".join(parts)


def _in_range(v: Any, min: Any, max: Any, strict_min: bool, strict_max: bool) -> bool:
    """True when ``v`` lies in the range; written so that NaN is never in range."""
    if min is not None and not (v > min if strict_min else v >= min):
        return False
    if max is not None and not (v < max if strict_max else v <= max):
        return False
    return True


def integer(name: str, x: Any, *, min: int | None = None, max: int | None = None) -> int:
    """An integer (Python or NumPy; not bool, not float, not a string) in ``[min, max]``; returns an ``int``."""
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (numbers.Integral, np.integer)):
        raise TypeError(f"{name} must be an integer, got {describe(x)}")
    v = int(x)
    if not _in_range(v, min, max, False, False):
        raise ValueError(f"{name} must be an integer {_range_text(min, max)}, got {v}")
    return v


def number(
    name: str, x: Any, *, min: float | None = None, max: float | None = None, finite: bool = True,
    strict_min: bool = False, strict_max: bool = False,
) -> float:
    """A real number (int, float or NumPy scalar; not bool, not a string) in range; returns a ``float``.

    NaN is always rejected; ``finite=False`` lets ``±inf`` through (still subject to ``min``/``max``).
    """
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (numbers.Real, np.integer, np.floating)):
        if _is_tensor(x) and x.numel() == 1 and not x.dtype.is_complex and x.dtype != _torch().bool:
            x = x.item()
        else:
            raise TypeError(f"{name} must be a real number, got {describe(x)}")
    v = float(x)
    if math.isnan(v) or (finite and math.isinf(v)) or not _in_range(v, min, max, strict_min, strict_max):
        rng = _range_text(min, max, strict_min, strict_max)
        raise ValueError(f"{name} must be a {'finite ' if finite else ''}number{' ' + rng if rng else ''}, got {v}")
    return v


def positive(name: str, x: Any) -> float:
    """A finite number > 0; returns a ``float``."""
    return number(name, x, min=0, strict_min=True)


def nonnegative(name: str, x: Any) -> float:
    """A finite number >= 0; returns a ``float``."""
    return number(name, x, min=0)


def probability(name: str, x: Any) -> float:
    """A number in ``[0, 1]``; returns a ``float``."""
    return number(name, x, min=0, max=1)


def boolean(name: str, x: Any) -> bool:
    """A ``bool`` (or NumPy bool); an int or a string is refused so that ``"False"`` cannot mean True."""
    if not isinstance(x, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool, got {describe(x)}")
    return bool(x)


def _torch() -> Any:
    import torch

    return torch


def _is_tensor(x: Any) -> bool:
    mod = type(x).__module__
    if not mod.startswith("torch"):
        return False
    return isinstance(x, _torch().Tensor)


def _check_shape(name: str, shape: tuple[int, ...], ndim: int | Sequence[int] | None,
                 want: Sequence[int | None] | None, what: str) -> None:
    if ndim is not None:
        ok = (len(shape) in ndim) if isinstance(ndim, Sequence) else len(shape) == ndim
        if not ok:
            raise ValueError(f"{name} must have ndim {ndim}, got {what} of shape {shape}")
    if want is not None:
        if len(shape) != len(want) or any(w is not None and w != -1 and s != w for s, w in zip(shape, want)):
            pattern = "(" + ", ".join("*" if w is None or w == -1 else str(w) for w in want) + ")"
            raise ValueError(f"{name} must have shape {pattern}, got {what} of shape {shape}")


def _value_range(name: str, lo: Any, hi: Any, min: Any, max: Any, strict_min: bool, strict_max: bool) -> None:
    if not (_in_range(lo, min, max, strict_min, strict_max) and _in_range(hi, min, max, strict_min, strict_max)):
        raise ValueError(
            f"{name} must have values {_range_text(min, max, strict_min, strict_max)}, got values in [{lo}, {hi}]"
        )


def array(
    name: str, x: Any, *, ndim: int | Sequence[int] | None = None, shape: Sequence[int | None] | None = None,
    dtype: str | np.dtype | type | None = None, finite: bool = True, nonempty: bool = False,
    min: float | None = None, max: float | None = None, strict_min: bool = False, strict_max: bool = False,
) -> np.ndarray:
    """A NumPy array (anything ``np.asarray`` takes, except None, strings and ragged/object data).

    ``ndim``: an int or a collection of allowed ranks. ``shape``: a tuple with ``None`` (or -1) for any size.
    ``dtype``: ``"float"`` (any real numeric, not bool; integers are converted to float64, float32 stays),
    ``"int"`` (an integer dtype, not bool), ``"bool"``, ``"numeric"`` (int or float, not bool), or a NumPy
    dtype to convert to. ``finite``: reject NaN/inf. ``nonempty``: reject size 0. ``min``/``max``: value range.
    """
    if x is None or isinstance(x, (str, bytes)):
        raise TypeError(f"{name} must be an array, got {describe(x)}")
    if _is_tensor(x):
        x = x.detach().cpu().numpy()
    try:
        a = np.asarray(x)
    except (ValueError, TypeError) as e:
        raise TypeError(f"{name} must be an array (not ragged), got {describe(x)}: {e}") from None
    if a.dtype == object or a.dtype.kind in "USV":
        raise TypeError(f"{name} must be a numeric array, got {describe(x)} with dtype {a.dtype}")
    if dtype is not None:
        kind = a.dtype.kind
        if dtype == "float":
            if kind not in "iuf":
                raise TypeError(f"{name} must be a real (float) array, got dtype {a.dtype}")
            if kind != "f":
                a = a.astype(np.float64)
        elif dtype == "int":
            if kind not in "iu":
                raise TypeError(f"{name} must be an integer array, got dtype {a.dtype}")
        elif dtype == "bool":
            if kind != "b":
                raise TypeError(f"{name} must be a boolean array, got dtype {a.dtype}")
        elif dtype == "numeric":
            if kind not in "iuf":
                raise TypeError(f"{name} must be a numeric (int or float) array, got dtype {a.dtype}")
        else:
            want = np.dtype(dtype)
            if want.kind in "iu" and kind not in "iu":
                raise TypeError(f"{name} must be an integer array, got dtype {a.dtype}")
            if want.kind in "f" and kind not in "biuf":
                raise TypeError(f"{name} must be a real array, got dtype {a.dtype}")
            a = a.astype(want, copy=False)
    _check_shape(name, a.shape, ndim, shape, "an array")
    if nonempty and a.size == 0:
        raise ValueError(f"{name} must not be empty, got an array of shape {a.shape}")
    if finite and a.dtype.kind in "fc" and a.size and not np.isfinite(a).all():
        raise ValueError(f"{name} must be finite, got {int((~np.isfinite(a)).sum())} NaN/inf entries")
    if (min is not None or max is not None) and a.size:
        if a.dtype.kind in "fc" and np.isnan(a).any():
            raise ValueError(f"{name} must not contain NaN")
        _value_range(name, a.min(), a.max(), min, max, strict_min, strict_max)
    return a


def tensor(
    name: str, x: Any, *, ndim: int | Sequence[int] | None = None, shape: Sequence[int | None] | None = None,
    dtype: Any = None, finite: bool = True, nonempty: bool = False,
    min: float | None = None, max: float | None = None, strict_min: bool = False, strict_max: bool = False,
) -> Any:
    """A ``torch.Tensor`` (no conversion from other types; TypeError otherwise), checked like :func:`array`.

    ``dtype``: ``"float"`` (a floating dtype), ``"int"`` (an integer dtype, not bool), ``"bool"``, ``"numeric"``,
    or a ``torch.dtype`` it must have exactly.
    """
    torch = _torch()
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {describe(x)}")
    if dtype is not None:
        fl, cx, bo = x.dtype.is_floating_point, x.dtype.is_complex, x.dtype == torch.bool
        ok = {
            "float": fl, "int": not (fl or cx or bo), "bool": bo, "numeric": not (cx or bo),
        }.get(dtype) if isinstance(dtype, str) else x.dtype == dtype
        if ok is None:
            raise ValueError(f"unknown dtype spec {dtype!r} for {name}")
        if not ok:
            raise TypeError(f"{name} must have dtype {dtype}, got {x.dtype}")
    _check_shape(name, tuple(x.shape), ndim, shape, "a tensor")
    if nonempty and x.numel() == 0:
        raise ValueError(f"{name} must not be empty, got a tensor of shape {tuple(x.shape)}")
    if finite and (x.dtype.is_floating_point or x.dtype.is_complex) and x.numel():
        if not bool(torch.isfinite(x).all()):
            raise ValueError(f"{name} must be finite, got {int((~torch.isfinite(x)).sum())} NaN/inf entries")
    if (min is not None or max is not None) and x.numel():
        if x.dtype.is_floating_point and bool(torch.isnan(x).any()):
            raise ValueError(f"{name} must not contain NaN")
        _value_range(name, x.min().item(), x.max().item(), min, max, strict_min, strict_max)
    return x


def index(name: str, x: Any, n: int) -> int:
    """An integer index in ``[0, n)``; returns an ``int``."""
    v = integer(name, x)
    if not 0 <= v < n:
        raise ValueError(f"{name} must be an index in [0, {n}), got {v}")
    return v


def token_ids(name: str, ids: Any, vocab_size: int) -> Any:
    """Integer token ids in ``[0, vocab_size)``: a tensor stays a tensor; anything else becomes a NumPy array."""
    vocab_size = integer("vocab_size", vocab_size, min=1)
    if _is_tensor(ids):
        return tensor(name, ids, dtype="int", min=0, max=vocab_size, strict_max=True)
    return array(name, ids, dtype="int", min=0, max=vocab_size, strict_max=True)


def seed(name: str, x: Any) -> int:
    """A seed: an integer in ``[0, 2**32)`` (what NumPy's legacy seeding and :mod:`helpers.repro` accept)."""
    return integer(name, x, min=0, max=SEED_MAX - 1)


def _path(name: str, path: Any) -> Path:
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{name} must be a path (str or os.PathLike), got {describe(path)}")
    if isinstance(path, str) and not path:
        raise ValueError(f"{name} must be a non-empty path, got ''")
    return Path(path)


def existing_file(name: str, path: Any) -> Path:
    """A path to an existing regular file; returns a :class:`~pathlib.Path` (MissingFileError otherwise)."""
    p = _path(name, path)
    if not p.is_file():
        what = "a directory" if p.is_dir() else "nothing"
        raise MissingFileError(f"{name} must name an existing file, got {str(p)!r}, which is {what}")
    return p


def existing_dir(name: str, path: Any) -> Path:
    """A path to an existing directory; returns a :class:`~pathlib.Path` (MissingFileError otherwise)."""
    p = _path(name, path)
    if not p.is_dir():
        what = "a file" if p.exists() else "nothing"
        raise MissingFileError(f"{name} must name an existing directory, got {str(p)!r}, which is {what}")
    return p


def one_of(name: str, x: Any, choices: Collection[Any]) -> Any:
    """``x`` if it is one of ``choices`` (compared with ``==``; a bool never matches an int choice)."""
    try:
        ok = any(x == c and type(x) is not bool or x is c for c in choices)
    except Exception:
        ok = False
    if not ok:
        raise ValueError(f"{name} must be one of {list(choices)!r}, got {describe(x)}")
    return x


def optional(check: Callable[..., T], name: str, x: Any, *args: Any, **kwargs: Any) -> T | None:
    """``None`` if ``x`` is None, else ``check(name, x, *args, **kwargs)``."""
    return None if x is None else check(name, x, *args, **kwargs)


def instance(name: str, x: Any, types: type | tuple[type, ...]) -> Any:
    """``x`` if ``isinstance(x, types)``, else TypeError."""
    if not isinstance(x, types):
        names = " or ".join(t.__name__ for t in (types if isinstance(types, tuple) else (types,)))
        raise TypeError(f"{name} must be a {names}, got {describe(x)}")
    return x


def function(name: str, x: Any) -> Any:
    """``x`` if it is callable, else TypeError."""
    if not callable(x):
        raise TypeError(f"{name} must be callable, got {describe(x)}")
    return x


def sequence(name: str, x: Any, *, min_len: int = 0, of: Callable[[str, Any], Any] | None = None) -> list:
    """A list/tuple (not a string) of at least ``min_len`` items, each checked with ``of(f"{name}[i]", item)``."""
    if isinstance(x, (str, bytes)) or not isinstance(x, (Sequence, np.ndarray)) and not _is_tensor(x):
        raise TypeError(f"{name} must be a sequence (list or tuple), got {describe(x)}")
    items = list(x)
    if len(items) < min_len:
        raise ValueError(f"{name} must have at least {min_len} items, got {len(items)}")
    if of is not None:
        items = [of(f"{name}[{i}]", v) for i, v in enumerate(items)]
    return items
