"""The claims record: what a chapter asserts (checks) and what it measures against the paper (claims).

* A **check** is a property that must hold at any size. :meth:`ClaimsRecord.check` raises :class:`CheckFailed`
  when it does not, so the notebook (and the book build) fails.
* A **claim** is a finding of the paper: the paper's number, our measured number and whether it held at our
  scale. A claim that does not hold is recorded as such; it never fails the build.

``rec.save()`` writes ``<results dir>/<notebook>.json`` (the book runner sets ``HELPERS_RESULTS_DIR``) and displays
the table. The scoreboard page of the book is generated from these files.
"""

from __future__ import annotations

import json
import math
import operator
import os
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

__all__ = ["CheckFailed", "Check", "Claim", "ClaimsRecord", "results_dir", "OPS"]

OPS = {
    "<=": operator.le,
    "<": operator.lt,
    ">=": operator.ge,
    ">": operator.gt,
    "==": operator.eq,
    "!=": operator.ne,
}

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
class Claim:
    id: str
    statement: str
    paper: Any
    measured: Any
    unit: str
    holds: bool | None
    note: str = ""


def results_dir() -> Path:
    """Where records are written: ``$HELPERS_RESULTS_DIR`` if set, else ``./_results`` (Colab, a local Jupyter)."""
    env = os.environ.get("HELPERS_RESULTS_DIR")
    return Path(env) if env else Path.cwd() / "_results"


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


class ClaimsRecord:
    """Collects a chapter's checks and claims; ``save()`` writes the JSON record and shows the table.

    >>> rec = ClaimsRecord("00_reading_guide", {"quick": True, "seed": 0})
    >>> rec.check("loss_finite", 0.3, 1e9, op="<")
    True
    """

    def __init__(self, notebook: str, params: Mapping[str, Any] | None = None) -> None:
        if not isinstance(notebook, str) or not notebook:
            raise TypeError("notebook must be a non-empty string, the chapter's slug")
        params = dict(params or {})
        self.notebook = notebook
        self.params = {k: _jsonable(v) for k, v in params.items()}
        self.quick = bool(params.get("quick", False))
        self.checks: list[Check] = []
        self.claims: list[Claim] = []
        self._t0 = time.perf_counter()

    # -- checks ------------------------------------------------------------------------------------------------
    def check(self, id: str, value: Any, bound: Any = True, op: str = "==", note: str = "") -> bool:
        """Record ``value <op> bound`` and raise :class:`CheckFailed` if it is false.

        ``rec.check("exact", max_abs_diff, 1e-10, op="<=")``; a boolean property is ``rec.check("valid", flag)``.
        """
        self._new_id(id, self.checks)
        if op not in OPS:
            raise ValueError(f"op must be one of {sorted(OPS)}, got {op!r}")
        v, b = _jsonable(value), _jsonable(bound)
        try:
            ok = bool(OPS[op](value, bound))
        except TypeError as e:
            raise TypeError(f"check {id!r}: cannot compare {value!r} {op} {bound!r}") from e
        if isinstance(value, float) and math.isnan(value):
            ok = False
        self.checks.append(Check(id=id, value=v, bound=b, op=op, ok=ok, note=note))
        if not ok:
            raise CheckFailed(f"check {id!r} failed: {value!r} {op} {bound!r} is false. {note}".strip())
        return ok

    # -- claims ------------------------------------------------------------------------------------------------
    def claim(
        self,
        id: str,
        statement: str,
        *,
        paper: Any,
        measured: Any,
        unit: str = "",
        holds: bool | None,
        note: str = "",
    ) -> bool | None:
        """Record one of the paper's findings next to our measurement.

        ``holds`` must be computed from ``measured`` (never typed in); ``None`` means "not testable at our scale",
        and ``note`` should then say why.
        """
        self._new_id(id, self.claims)
        if not isinstance(statement, str) or not statement:
            raise TypeError("statement must be a non-empty string")
        if holds is not None and not isinstance(holds, bool):
            if hasattr(holds, "item"):
                holds = bool(holds.item())
            else:
                raise TypeError(f"holds must be a bool or None, got {type(holds).__name__}")
        self.claims.append(
            Claim(id=id, statement=statement, paper=_jsonable(paper), measured=_jsonable(measured),
                  unit=unit, holds=holds, note=note)
        )
        return holds

    def _new_id(self, id: str, items: list) -> None:
        if not isinstance(id, str) or not id:
            raise TypeError("id must be a non-empty string")
        if any(it.id == id for it in items):
            raise ValueError(f"id {id!r} is recorded twice")

    # -- output ------------------------------------------------------------------------------------------------
    @property
    def seconds(self) -> float:
        return time.perf_counter() - self._t0

    def to_dict(self) -> dict[str, Any]:
        return {
            "notebook": self.notebook,
            "params": self.params,
            "quick": self.quick,
            "seconds": round(self.seconds, 2),
            "packages": _versions(),
            "checks": [asdict(c) for c in self.checks],
            "claims": [asdict(c) for c in self.claims],
        }

    def save(self, directory: str | os.PathLike | None = None, display: bool = True) -> Path:
        """Write ``<directory>/<notebook>.json`` and, in a notebook, show the checks and claims tables."""
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


def _fmt(x: Any) -> str:
    if isinstance(x, float):
        return f"{x:.4g}"
    if isinstance(x, list) and len(x) > 6:
        return "[" + ", ".join(_fmt(v) for v in x[:6]) + ", …]"
    return str(x)


def _held(h: bool | None) -> str:
    return {True: "✅ held", False: "❌ did not hold", None: "— not testable"}[h]


def render_markdown(rec: Mapping[str, Any]) -> str:
    """The record as Markdown tables (used by the scoreboard generator)."""
    lines = []
    if rec.get("claims"):
        lines += ["| claim | paper | measured here | held? |", "|---|---|---|---|"]
        for c in rec["claims"]:
            unit = f" {c['unit']}" if c.get("unit") else ""
            note = f" <br><small>{c['note']}</small>" if c.get("note") else ""
            lines.append(
                f"| **{c['id']}**: {c['statement']}{note} | {_fmt(c['paper'])} | {_fmt(c['measured'])}{unit} "
                f"| {_held(c['holds'])} |"
            )
    if rec.get("checks"):
        n_ok = sum(1 for c in rec["checks"] if c["ok"])
        lines += ["", f"Checks: {n_ok}/{len(rec['checks'])} passed."]
    return "\n".join(lines)


def render_html(rec: Mapping[str, Any]) -> str:
    """The record as two HTML tables, as shown at the end of each chapter."""
    import html

    e = lambda x: html.escape(_fmt(x))  # noqa: E731
    mode = " (quick mode: tiny sizes, not results)" if rec.get("quick") else ""
    out = [f"<div class='claims-record'><h4>Claims{mode}</h4>",
           "<table><thead><tr><th>id</th><th>statement</th><th>paper</th><th>measured here</th>"
           "<th>held?</th></tr></thead><tbody>"]
    for c in rec.get("claims", []):
        unit = f" {html.escape(c['unit'])}" if c.get("unit") else ""
        note = f"<br><small>{html.escape(c['note'])}</small>" if c.get("note") else ""
        out.append(f"<tr><td><code>{html.escape(c['id'])}</code></td><td>{html.escape(c['statement'])}{note}</td>"
                   f"<td>{e(c['paper'])}</td><td>{e(c['measured'])}{unit}</td><td>{_held(c['holds'])}</td></tr>")
    out.append("</tbody></table><h4>Checks</h4><table><thead><tr><th>id</th><th>value</th><th>op</th>"
               "<th>bound</th><th>ok</th></tr></thead><tbody>")
    for c in rec.get("checks", []):
        out.append(f"<tr><td><code>{html.escape(c['id'])}</code></td><td>{e(c['value'])}</td>"
                   f"<td>{html.escape(c['op'])}</td><td>{e(c['bound'])}</td><td>{'✅' if c['ok'] else '❌'}</td></tr>")
    out.append(f"</tbody></table><p>Run time: {rec.get('seconds', 0):.1f} s.</p></div>")
    return "".join(out)
