"""The claims record: what a chapter asserts (checks) and what it measures against the paper (claims).

* A **check** is a property that must hold at any size. :meth:`ClaimsRecord.check` raises :class:`CheckFailed`
  when it does not, so the notebook (and the book build) fails.
* A **condition** is a precondition of an experiment, measured per seed like a claim (the model fits its training
  data, its validation curve is flat, a model-free baseline does not already solve the task, a timing's spread is
  below the effect): :meth:`ClaimsRecord.condition`. It never fails the build either.
* A **claim** is a finding of the paper measured at our scale. The chapter gives the measured number (or one number
  per seed), a comparison ``op`` and a ``target``, and the conditions its verdict rests on (``given=``); the record,
  never the caller, computes the verdict over the seeds where every given condition holds: **held** (at every such
  seed), **mixed** (at some), **not held** (at none), or **inconclusive** when no more than half of the seeds
  qualify ("could not be tested at our scale": the experiment was not ready, which says nothing about the paper; a
  verdict read at one seed of three would be one run, not a measurement over seeds). A claim that cannot be
  tested at all is recorded with :meth:`ClaimsRecord.untested` and a reason. A claim never fails the build.

``rec.save()`` writes ``<results dir>/<notebook>.json`` (the book runner sets ``HELPERS_RESULTS_DIR``) and displays
the tables and a short summary. The scoreboard page of the book is generated from these files and recomputes every
verdict with :func:`verdict_of` (through :func:`record_problems`). The JSON layout is ``SCHEMA`` 3, documented in
``book/how_to_run.md``.
"""

from __future__ import annotations

import html as _html
import json
import math
import numbers
import operator
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

__all__ = [
    "SCHEMA", "OPS", "VERDICTS", "CONDITION_VERDICTS", "CheckFailed", "Check", "Condition", "Claim", "ClaimsRecord",
    "results_dir", "verdict_of", "qualifying_seeds", "record_problems", "render_markdown", "render_html",
    "summary_text",
]

SCHEMA = 3
OPS = {
    "<=": operator.le,
    "<": operator.lt,
    ">=": operator.ge,
    ">": operator.gt,
    "==": operator.eq,
    "!=": operator.ne,
}
VERDICTS = ("held", "mixed", "not held", "inconclusive", "untested")
CONDITION_VERDICTS = ("met", "mixed", "not met")

_PACKAGES = (
    "numpy", "scipy", "torch", "scikit-learn", "networkx", "matplotlib", "rdkit", "pyscf", "ase", "scikit-image",
)


class CheckFailed(AssertionError):
    """A check of a chapter did not hold."""


@dataclass
class Check:
    id: str
    value: Any
    bound: Any
    op: str
    ok: bool
    note: str = ""


@dataclass
class Condition:
    """A precondition of the experiment as stored in the record (schema 3): ``measured <op> target`` per seed."""

    id: str
    statement: str
    measured: float | list[float]
    mean: float
    min: float
    max: float
    n: int
    op: str
    target: float
    unit: str = ""
    note: str = ""
    verdict: str = "met"
    holds_per_seed: list[bool] = field(default_factory=list)


@dataclass
class Claim:
    """One claim as stored in the record (schema 3). ``measured`` is a number or a per-seed list.

    ``given`` names the conditions the verdict rests on; ``inconclusive_seeds`` are the seeds (indices into
    ``measured``) where one of them failed, and ``failed_conditions`` says which (``{"0": ["fits"], ...}``).
    """

    id: str
    statement: str
    paper: Any
    measured: float | list[float] | None
    mean: float | None
    min: float | None
    max: float | None
    n: int
    op: str | None
    target: float | None
    unit: str = ""
    baseline: float | list[float] | None = None
    note: str = ""
    verdict: str = "untested"
    reason: str = ""
    holds_per_seed: list[bool] = field(default_factory=list)
    given: list[str] = field(default_factory=list)
    inconclusive_seeds: list[int] = field(default_factory=list)
    failed_conditions: dict[str, list[str]] = field(default_factory=dict)


def results_dir() -> Path:
    """Where records are written: ``$HELPERS_RESULTS_DIR`` if set, else ``./_results`` (Colab, a local Jupyter)."""
    env = os.environ.get("HELPERS_RESULTS_DIR")
    return Path(env) if env else Path.cwd() / "_results"


# ----------------------------------------------------------------------------------------------------------------
# Numbers
# ----------------------------------------------------------------------------------------------------------------
def _scalar(x: Any) -> Any:
    """numpy / torch 0-d values to Python scalars; anything else unchanged."""
    if hasattr(x, "ndim") and hasattr(x, "item") and callable(x.item):
        if getattr(x, "ndim", 0) == 0:
            return x.item()
    elif hasattr(x, "item") and callable(x.item) and not isinstance(x, (list, tuple, str)):
        try:
            return x.item()
        except (TypeError, ValueError):
            return x
    return x


def _real(what: str, x: Any) -> float:
    """``x`` as a finite float, or a TypeError/ValueError that names ``what``."""
    x = _scalar(x)
    if isinstance(x, bool):
        raise TypeError(f"{what} must be a real number, got a bool ({x}); record a count, a fraction or a "
                        "difference instead, so that the verdict is computed from a number")
    if isinstance(x, str):
        raise TypeError(f"{what} must be a real number, got the string {x!r}; put a number here and the words "
                        "in note=")
    if not isinstance(x, numbers.Real):
        raise TypeError(f"{what} must be a real number, got {type(x).__name__}")
    x = float(x)
    if not math.isfinite(x):
        raise ValueError(f"{what} must be finite, got {x}")
    return x


def _values(what: str, x: Any) -> tuple[float | list[float], list[float]]:
    """A number or a 1-d sequence of numbers (one per seed): (as stored, as a list)."""
    if hasattr(x, "ndim") and hasattr(x, "tolist"):
        if x.ndim > 1:
            raise TypeError(f"{what} must be a number or a 1-d sequence (one value per seed), got an array "
                            f"with {x.ndim} dimensions")
        x = x.tolist()
    if isinstance(x, (list, tuple)):
        if len(x) == 0:
            raise ValueError(f"{what} is an empty sequence: give one value per seed")
        vals = [_real(f"{what}[{i}]", v) for i, v in enumerate(x)]
        return vals, vals
    if isinstance(x, Sequence) and not isinstance(x, str):
        return _values(what, list(x))
    v = _real(what, x)
    return v, [v]


def verdict_of(measured: float | Sequence[float], op: str, target: float,
               qualifies: Sequence[bool] | None = None) -> str:
    """``"held"`` if ``measured <op> target`` at every value, ``"mixed"`` at some, ``"not held"`` at none.

    ``qualifies`` (one bool per value) restricts the verdict to the seeds whose conditions hold; unless they are
    more than half of the values (2 of 3, 1 of 1) the verdict is ``"inconclusive"``. A scalar ``measured`` gives ``"held"`` or ``"not held"``. This is the only place
    a verdict is decided; the scoreboard calls it again on each stored record and refuses a record whose stored
    verdict differs.
    """
    if op not in OPS:
        raise ValueError(f"op must be one of {sorted(OPS)}, got {op!r}")
    _, vals = _values("measured", measured)
    t = _real("target", target)
    if qualifies is None:
        qualifies = [True] * len(vals)
    if isinstance(qualifies, (str, bytes)) or not isinstance(qualifies, Sequence):
        raise TypeError(f"qualifies must be a sequence of bools (one per value), got {type(qualifies).__name__}")
    if len(qualifies) != len(vals) or not all(isinstance(q, bool) for q in qualifies):
        raise ValueError(f"qualifies must hold {len(vals)} bools (one per value), got {list(qualifies)!r}")
    ok = [bool(OPS[op](v, t)) for v, q in zip(vals, qualifies) if q]
    if 2 * len(ok) <= len(vals):  # a verdict over seeds needs most of them: 1 of 3 is one run, not three
        return "inconclusive"
    if all(ok):
        return "held"
    return "mixed" if any(ok) else "not held"


def qualifying_seeds(n: int, given: Sequence[str], conditions: Mapping[str, Sequence[bool]]
                     ) -> tuple[list[bool], dict[str, list[str]]]:
    """Which of a claim's ``n`` values rest on conditions that hold, and which conditions failed where.

    ``conditions`` maps a condition id to its per-seed outcomes. A condition measured once (one outcome) applies to
    every seed; a claim measured once (``n == 1``, e.g. pooled over seeds) qualifies only if each condition holds
    at every seed; otherwise the condition must have ``n`` outcomes, one per seed of the claim.
    """
    n = int(n)
    qual = [True] * n
    failed: dict[str, list[str]] = {}
    for cid in given:
        if cid not in conditions:
            raise ValueError(f"condition {cid!r} is not recorded (record conditions with rec.condition(...) before "
                             "the claims that name them)")
        outs = [bool(o) for o in conditions[cid]]
        if len(outs) == 1:
            outs = outs * n
        elif n == 1:
            outs = [all(outs)]
        elif len(outs) != n:
            raise ValueError(f"condition {cid!r} has {len(outs)} per-seed values but the claim has {n}: measure "
                             "both at the same seeds (or the condition once)")
        for i, o in enumerate(outs):
            if not o:
                qual[i] = False
                failed.setdefault(str(i), []).append(cid)
    return qual, failed


def _jsonable(x: Any) -> Any:
    """Turn numpy/torch scalars and arrays into plain JSON values (NaN and inf become strings)."""
    if hasattr(x, "tolist") and callable(x.tolist):
        x = x.tolist()
    elif hasattr(x, "item") and callable(x.item):
        x = x.item()
    if isinstance(x, float):
        return x if math.isfinite(x) else str(x)
    if isinstance(x, Mapping):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if x is None or isinstance(x, (bool, int, str)):
        return x
    return str(x)


def _versions() -> dict[str, str]:
    out = {}
    for name in _PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out


def _text(what: str, x: Any, *, required: bool) -> str:
    if not isinstance(x, str):
        raise TypeError(f"{what} must be a string, got {type(x).__name__}")
    if required and not x.strip():
        raise ValueError(f"{what} must be a non-empty string")
    return x


# ----------------------------------------------------------------------------------------------------------------
# The record
# ----------------------------------------------------------------------------------------------------------------
class ClaimsRecord:
    """Collects a chapter's checks and claims; ``save()`` writes the JSON record and shows the tables.

    >>> rec = ClaimsRecord("00_reading_guide", {"quick": True, "seed": 0})
    >>> rec.check("loss_finite", 0.3, 1e9, op="<")
    True
    >>> rec.claim("acc", "The model learns the task", paper=">= 0.95", measured=[0.97, 0.99, 0.93],
    ...           op=">=", target=0.95)
    'mixed'
    """

    def __init__(self, notebook: str, params: Mapping[str, Any] | None = None) -> None:
        if not isinstance(notebook, str) or not notebook:
            raise TypeError("notebook must be a non-empty string, the chapter's slug")
        if params is not None and not isinstance(params, Mapping):
            raise TypeError(f"params must be a mapping of parameter names to values, got {type(params).__name__}")
        params = dict(params or {})
        self.notebook = notebook
        self.params = {k: _jsonable(v) for k, v in params.items()}
        self.quick = bool(params.get("quick", False))
        self.checks: list[Check] = []
        self.conditions: list[Condition] = []
        self.claims: list[Claim] = []
        self._t0 = time.perf_counter()

    # -- checks ------------------------------------------------------------------------------------------------
    def check(self, id: str, value: Any, bound: Any = True, op: str = "==", note: str = "") -> bool:
        """Record ``value <op> bound`` and raise :class:`CheckFailed` if it is false.

        ``rec.check("exact", max_abs_diff, 1e-10, op="<=")``; a boolean property is ``rec.check("valid", flag)``.
        NaN or inf (of any numeric type) never passes; an array is refused (reduce it to one number first).
        """
        self._new_id(id, self.checks)
        if op not in OPS:
            raise ValueError(f"check {id!r}: op must be one of {sorted(OPS)}, got {op!r}")
        _text(f"check {id!r}: note", note, required=False)
        value, bound = _scalar(value), _scalar(bound)
        for what, x in (("value", value), ("bound", bound)):
            if hasattr(x, "ndim") or isinstance(x, (list, tuple, dict, set)):
                raise TypeError(f"check {id!r}: {what} must be a single number or bool, got {type(x).__name__} "
                                "(reduce an array with max(), all(), ... first)")
        try:
            ok = bool(OPS[op](value, bound))
        except TypeError as e:
            raise TypeError(f"check {id!r}: cannot compare {value!r} {op} {bound!r}") from e
        if any(isinstance(x, numbers.Real) and not math.isfinite(float(x)) for x in (value, bound)):
            ok = False
        self.checks.append(Check(id=id, value=_jsonable(value), bound=_jsonable(bound), op=op, ok=ok, note=note))
        if not ok:
            raise CheckFailed(f"check {id!r} failed: {value!r} {op} {bound!r} is false. {note}".strip())
        return ok

    # -- conditions --------------------------------------------------------------------------------------------
    def condition(self, id: str, measured: Any, op: str, target: Any, *, statement: str = "", unit: str = "",
                  note: str = "") -> str:
        """Record a precondition of the experiment, ``measured <op> target`` per seed; returns met / mixed / not met.

        ``rec.condition("fits_train", train_acc_per_seed, ">=", 0.95, statement="the model fits its training
        data")``. A claim that names it (``given=("fits_train",)``) is inconclusive at the seeds where it fails.
        Fix the rule before reading the claim's numbers; a condition never fails the build.
        """
        self._new_id(id, self.conditions)
        statement = _text(f"condition {id!r}: statement", statement, required=False) or id
        unit = _text(f"condition {id!r}: unit", unit, required=False)
        note = _text(f"condition {id!r}: note", note, required=False)
        if op not in OPS:
            raise ValueError(f"condition {id!r}: op must be one of {sorted(OPS)}, got {op!r}")
        stored, vals = _values(f"condition {id!r}: measured", measured)
        t = _real(f"condition {id!r}: target", target)
        per_seed = [bool(OPS[op](v, t)) for v in vals]
        verdict = "met" if all(per_seed) else ("mixed" if any(per_seed) else "not met")
        self.conditions.append(Condition(
            id=id, statement=statement, measured=stored, mean=sum(vals) / len(vals), min=min(vals), max=max(vals),
            n=len(vals), op=op, target=t, unit=unit, note=note, verdict=verdict, holds_per_seed=per_seed))
        return verdict

    # -- claims ------------------------------------------------------------------------------------------------
    def claim(
        self,
        id: str,
        statement: str,
        *,
        paper: Any,
        measured: Any,
        op: str,
        target: Any,
        unit: str = "",
        baseline: Any = None,
        note: str = "",
        given: Sequence[str] = (),
    ) -> str:
        """Record one of the paper's findings and return the verdict the record computed.

        ``measured`` is a number, or a 1-d sequence with one number per seed; ``op`` and ``target`` state the
        comparison that decides the verdict (``target`` is the paper's number or our stated bar). A comparison with
        a baseline is recorded as a number (a ratio or a difference) in ``measured``, with the baseline's own value
        (or per-seed values) in ``baseline``. ``paper`` is free text for the paper's wording or number.
        ``given`` names recorded conditions the verdict rests on: seeds where one fails are left out of the verdict,
        and unless more than half of the seeds are left it is ``"inconclusive"``.
        """
        self._new_id(id, self.claims)
        statement = _text(f"claim {id!r}: statement", statement, required=True)
        unit = _text(f"claim {id!r}: unit", unit, required=False)
        note = _text(f"claim {id!r}: note", note, required=False)
        if op not in OPS:
            raise ValueError(f"claim {id!r}: op must be one of {sorted(OPS)}, got {op!r}")
        stored, vals = _values(f"claim {id!r}: measured", measured)
        t = _real(f"claim {id!r}: target", target)
        base = None if baseline is None else _values(f"claim {id!r}: baseline", baseline)[0]
        given = self._given(id, given)
        per_seed = [bool(OPS[op](v, t)) for v in vals]
        qual, failed = qualifying_seeds(len(vals), given, {c.id: c.holds_per_seed for c in self.conditions})
        verdict = verdict_of(vals if isinstance(stored, list) else stored, op, t, qual)
        self.claims.append(Claim(
            id=id, statement=statement, paper=_jsonable(paper), measured=stored,
            mean=sum(vals) / len(vals), min=min(vals), max=max(vals), n=len(vals), op=op, target=t, unit=unit,
            baseline=base, note=note, verdict=verdict, holds_per_seed=per_seed, given=given,
            inconclusive_seeds=[i for i, q in enumerate(qual) if not q], failed_conditions=failed,
        ))
        return verdict

    def _given(self, id: str, given: Any) -> list[str]:
        if isinstance(given, str):
            given = (given,)
        if not isinstance(given, (list, tuple)) or not all(isinstance(g, str) for g in given):
            raise TypeError(f"claim {id!r}: given must be a tuple of condition ids (strings), got {given!r}")
        known = {c.id for c in self.conditions}
        missing = [g for g in given if g not in known]
        if missing:
            raise ValueError(f"claim {id!r}: given names conditions that are not recorded: {missing}; record them "
                             f"with rec.condition(...) first (recorded: {sorted(known)})")
        if len(set(given)) != len(given):
            raise ValueError(f"claim {id!r}: given names a condition twice: {list(given)}")
        return list(given)

    def untested(self, id: str, statement: str, *, paper: Any, reason: str) -> str:
        """Record a claim that cannot be tested at our scale; ``reason`` says why (required)."""
        self._new_id(id, self.claims)
        statement = _text(f"claim {id!r}: statement", statement, required=True)
        reason = _text(f"claim {id!r}: reason", reason, required=True)
        self.claims.append(Claim(id=id, statement=statement, paper=_jsonable(paper), measured=None, mean=None,
                                 min=None, max=None, n=0, op=None, target=None, verdict="untested", reason=reason))
        return "untested"

    def _new_id(self, id: str, items: list) -> None:
        if not isinstance(id, str) or not id:
            raise TypeError("id must be a non-empty string")
        if any(it.id == id for it in items):
            raise ValueError(f"id {id!r} is recorded twice")

    # -- output ------------------------------------------------------------------------------------------------
    @property
    def seconds(self) -> float:
        return time.perf_counter() - self._t0

    def counts(self) -> dict[str, int]:
        """How many claims have each verdict (held, mixed, not held, inconclusive, untested)."""
        return {v: sum(1 for c in self.claims if c.verdict == v) for v in VERDICTS}

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "notebook": self.notebook,
            "params": self.params,
            "quick": self.quick,
            "seconds": round(self.seconds, 2),
            "packages": _versions(),
            "checks": [asdict(c) for c in self.checks],
            "conditions": [asdict(c) for c in self.conditions],
            "claims": [asdict(c) for c in self.claims],
        }

    def save(self, directory: str | os.PathLike | None = None, display: bool = True) -> Path:
        """Write ``<directory>/<notebook>.json`` and, in a notebook, show the tables and the summary."""
        d = Path(directory) if directory is not None else results_dir()
        d.mkdir(parents=True, exist_ok=True)
        path = d / f"{self.notebook}.json"
        path.write_text(json.dumps(self.to_dict(), indent=2))
        if display:
            try:
                from IPython.display import HTML
                from IPython.display import display as show

                show(HTML(self.to_html()))
            except ImportError:  # pragma: no cover
                print(self.to_markdown())
        return path

    def to_html(self) -> str:
        return render_html(self.to_dict())

    def to_markdown(self) -> str:
        return render_markdown(self.to_dict())


# ----------------------------------------------------------------------------------------------------------------
# Checking a stored record (the scoreboard and the renderers)
# ----------------------------------------------------------------------------------------------------------------
def _problem_list(rec: Any) -> list[str]:
    if not isinstance(rec, Mapping):
        return [f"a claims record must be a mapping (the JSON object of a record), got {type(rec).__name__}"]
    problems = []
    for key in ("checks", "conditions", "claims"):
        items = rec.get(key, [])
        if not isinstance(items, list) or not all(isinstance(c, Mapping) for c in items):
            problems.append(f"record {key!r} must be a list of objects, got {items!r:.80}")
    return problems


def record_problems(rec: Any) -> list[str]:
    """Why a stored claims record cannot be shown: not schema 3, malformed, or a verdict its numbers do not give.

    Every condition's outcome and every claim's verdict is recomputed from the stored numbers (``measured``, ``op``,
    ``target``, the conditions named in ``given``); a record that disagrees is refused.
    """
    problems = _problem_list(rec)
    if problems:
        return problems
    if rec.get("schema") != SCHEMA:
        return [f"claims record schema {rec.get('schema')!r}, expected {SCHEMA} (re-run the chapter: records are "
                "written by helpers.claims.ClaimsRecord)"]
    outcomes: dict[str, list[bool]] = {}
    for c in rec.get("conditions", []):
        cid = c.get("id")
        try:
            _, vals = _values("measured", c["measured"])
            t = _real("target", c["target"])
            per = [bool(OPS[c["op"]](v, t)) for v in vals]
        except (KeyError, TypeError, ValueError) as e:
            problems.append(f"condition {cid!r}: cannot recompute it ({e})")
            continue
        again = "met" if all(per) else ("mixed" if any(per) else "not met")
        if c.get("verdict") != again:
            problems.append(f"condition {cid!r}: stored {c.get('verdict')!r} but its numbers give {again!r}")
        outcomes[str(cid)] = per
    for c in rec.get("claims", []):
        v = c.get("verdict")
        if v not in VERDICTS:
            problems.append(f"claim {c.get('id')!r}: unknown verdict {v!r}")
        elif v == "untested":
            if not c.get("reason"):
                problems.append(f"claim {c.get('id')!r}: untested without a reason")
        else:
            try:
                _, vals = _values("measured", c["measured"])
                qual, _ = qualifying_seeds(len(vals), list(c.get("given", [])), outcomes)
                again = verdict_of(c["measured"], c["op"], c["target"], qual)
            except (KeyError, TypeError, ValueError) as e:
                problems.append(f"claim {c.get('id')!r}: cannot recompute its verdict ({e})")
                continue
            if again != v:
                problems.append(f"claim {c.get('id')!r}: stored verdict {v!r} but measured {c['measured']!r} "
                                f"{c['op']} {c['target']!r} (given {c.get('given', [])}) gives {again!r}")
    return problems


def _valid(rec: Any, where: str) -> Mapping[str, Any]:
    problems = record_problems(rec)
    if problems:
        raise ValueError(f"{where}: not a valid claims record: " + "; ".join(problems[:5]))
    return rec


# ----------------------------------------------------------------------------------------------------------------
# Rendering (the chapter's table, the scoreboard)
# ----------------------------------------------------------------------------------------------------------------
def _fmt(x: Any) -> str:
    if isinstance(x, float):
        return f"{x:.4g}"
    if isinstance(x, list) and len(x) > 6:
        return "[" + ", ".join(_fmt(v) for v in x[:6]) + ", …]"
    if isinstance(x, list):
        return "[" + ", ".join(_fmt(v) for v in x) + "]"
    return str(x)


_BADGE = {"held": "✅ held", "mixed": "🟨 mixed", "not held": "❌ not held", "inconclusive": "⚪ inconclusive",
          "untested": "— untested"}
_COND_BADGE = {"met": "✅ met", "mixed": "🟨 mixed", "not met": "❌ not met"}


def _measured(c: Mapping[str, Any]) -> str:
    """``0.93`` for one value; ``0.95 (0.91–0.99, n=3)`` for per-seed values."""
    if c.get("verdict") == "untested" or c.get("measured") is None:
        return "—"
    unit = f" {c['unit']}" if c.get("unit") else ""
    if isinstance(c["measured"], list):
        return f"{_fmt(c['mean'])} ({_fmt(c['min'])}–{_fmt(c['max'])}, n={c['n']}){unit}"
    return f"{_fmt(c['measured'])}{unit}"


def _rule(c: Mapping[str, Any]) -> str:
    return "—" if c.get("op") is None else f"{c['op']} {_fmt(c['target'])}"


def _baseline(c: Mapping[str, Any]) -> str:
    b = c.get("baseline")
    if b is None:
        return "—"
    if isinstance(b, list):
        return f"{_fmt(sum(b) / len(b))} (n={len(b)})" if len(b) > 1 else _fmt(b[0])
    return _fmt(b)


def _failed(c: Mapping[str, Any]) -> str:
    """``given fits (failed at seeds 0, 2: fits)`` for a claim that rests on conditions, else ``""``."""
    given = c.get("given") or []
    if not given:
        return ""
    bad = c.get("failed_conditions") or {}
    if not bad:
        return f"given {', '.join(given)} (met at every seed)"
    where = "; ".join(f"seed {i}: {', '.join(ids)}" for i, ids in sorted(bad.items(), key=lambda kv: int(kv[0])))
    return f"given {', '.join(given)} (failed at {where})"


def _why(c: Mapping[str, Any]) -> str:
    parts = [c.get("reason") or c.get("note") or "", _failed(c)]
    return " — ".join(p for p in parts if p)


def summary_text(rec: Mapping[str, Any]) -> str:
    """One paragraph, generated from the record: what held, what was mixed, not held or inconclusive, and why."""
    rec = _valid(rec, "summary_text")
    claims = rec.get("claims", [])
    if not claims:
        return "This chapter records no claims."
    by = {v: [c for c in claims if c.get("verdict") == v] for v in VERDICTS}
    parts = [f"Of {len(claims)} claim(s), {len(by['held'])} held, {len(by['mixed'])} mixed, "
             f"{len(by['not held'])} did not hold, {len(by['inconclusive'])} were inconclusive (a condition of the "
             f"experiment failed at every seed) and {len(by['untested'])} could not be tested at our scale."]
    if by["held"]:
        parts.append("Held: " + "; ".join(f"{c['id']} ({_measured(c)} {_rule(c)})" for c in by["held"]) + ".")
    for v, word in (("mixed", "Mixed across seeds"), ("not held", "Not held"), ("inconclusive", "Inconclusive"),
                    ("untested", "Untested")):
        for c in by[v]:
            why = _why(c)
            detail = "" if v == "untested" else f" ({_measured(c)}, needed {_rule(c)})"
            parts.append(f"{word}: {c['id']}{detail}" + (f" — {why}" if why else "") + ".")
    unmet = [c for c in rec.get("conditions", []) if c.get("verdict") != "met"]
    if unmet:
        parts.append("Conditions not met at every seed: " + "; ".join(
            f"{c['id']} ({_measured(c)}, needed {_rule(c)})" for c in unmet) + ".")
    if rec.get("quick"):
        parts.append("This run was in quick mode: tiny sizes, a smoke test, not results.")
    return " ".join(parts)


def _md_cell(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def render_markdown(rec: Mapping[str, Any]) -> str:
    """The record as Markdown tables (used by the scoreboard generator)."""
    rec = _valid(rec, "render_markdown")
    lines = []
    if rec.get("claims"):
        lines += ["| claim | paper | measured here | rule | baseline | verdict |", "|---|---|---|---|---|---|"]
        for c in rec["claims"]:
            why = _why(c)
            note = f" <br><small>{_md_cell(why)}</small>" if why else ""
            lines.append(
                f"| **{_md_cell(c['id'])}**: {_md_cell(c['statement'])}{note} | {_md_cell(_fmt(c['paper']))} "
                f"| {_md_cell(_measured(c))} | {_md_cell(_rule(c))} | {_md_cell(_baseline(c))} "
                f"| {_BADGE[c['verdict']]} |"
            )
    if rec.get("conditions"):
        lines += ["", "| condition | measured here | rule | outcome |", "|---|---|---|---|"]
        for c in rec["conditions"]:
            lines.append(f"| **{_md_cell(c['id'])}**: {_md_cell(c.get('statement', ''))} "
                         f"| {_md_cell(_measured(c))} | {_md_cell(_rule(c))} | {_COND_BADGE[c['verdict']]} |")
    if rec.get("checks"):
        n_ok = sum(1 for c in rec["checks"] if c.get("ok"))
        lines += ["", f"Checks: {n_ok}/{len(rec['checks'])} passed."]
    return "\n".join(lines)


def render_html(rec: Mapping[str, Any]) -> str:
    """The record as HTML tables and a summary paragraph, as shown at the end of each chapter."""
    rec = _valid(rec, "render_html")
    e = lambda x: _html.escape(_fmt(x))  # noqa: E731
    h = _html.escape
    mode = " (quick mode: tiny sizes, not results)" if rec.get("quick") else ""
    out = [f"<div class='claims-record'><h4>Claims{mode}</h4>",
           "<table><thead><tr><th>id</th><th>statement</th><th>paper</th><th>measured here</th><th>rule</th>"
           "<th>baseline</th><th>verdict</th></tr></thead><tbody>"]
    for c in rec.get("claims", []):
        why = _why(c)
        note = f"<br><small>{h(why)}</small>" if why else ""
        out.append(f"<tr><td><code>{h(c['id'])}</code></td><td>{h(c['statement'])}{note}</td>"
                   f"<td>{e(c['paper'])}</td><td>{h(_measured(c))}</td><td>{h(_rule(c))}</td>"
                   f"<td>{h(_baseline(c))}</td><td>{_BADGE[c['verdict']]}</td></tr>")
    out.append("</tbody></table>")
    if rec.get("conditions"):
        out.append("<h4>Conditions of the experiment</h4><table><thead><tr><th>id</th><th>statement</th>"
                   "<th>measured here</th><th>rule</th><th>outcome</th></tr></thead><tbody>")
        for c in rec["conditions"]:
            note = f"<br><small>{h(c['note'])}</small>" if c.get("note") else ""
            out.append(f"<tr><td><code>{h(c['id'])}</code></td><td>{h(c.get('statement', ''))}{note}</td>"
                       f"<td>{h(_measured(c))}</td><td>{h(_rule(c))}</td><td>{_COND_BADGE[c['verdict']]}</td></tr>")
        out.append("</tbody></table>")
    out.append("<h4>Checks</h4><table><thead><tr><th>id</th><th>value</th><th>op</th>"
               "<th>bound</th><th>ok</th></tr></thead><tbody>")
    for c in rec.get("checks", []):
        out.append(f"<tr><td><code>{h(str(c.get('id')))}</code></td><td>{e(c.get('value'))}</td>"
                   f"<td>{h(str(c.get('op')))}</td><td>{e(c.get('bound'))}</td>"
                   f"<td>{'✅' if c.get('ok') else '❌'}</td></tr>")
    seconds = rec.get("seconds", 0)
    seconds = seconds if isinstance(seconds, (int, float)) and not isinstance(seconds, bool) else 0
    out.append(f"</tbody></table><h4>What held, what did not, and why</h4><p>{h(summary_text(rec))}</p>"
               f"<p>Run time: {seconds:.1f} s.</p></div>")
    return "".join(out)
