"""No stale checkpoint on main: every committed manifest's source hashes match the tree, and every data script's
``SOURCES`` (the files whose hashes its manifests record) includes each ``helpers`` module the script imports.

``test_committed_manifest_sources_match_the_tree`` fails for a manifest whose recorded source files changed since
the checkpoint was made: rebuild it (``make data NB=<slug>``), or, for a change that provably leaves the weights
as they are, ``helpers.checkpoints.restamp`` it with the reason.

Which imports count: every ``helpers`` module the script imports itself (``from helpers import x``,
``import helpers.x``, ``from helpers.x import y``) — the chapter's module and the shared core it trains with
(``repro``, ``train``, ``nn``, ...) — except :mod:`helpers.checkpoints` and :mod:`helpers.scripts`, which store
and run (the weights file is verified by its own hash) and decide nothing that is trained.
"""

from __future__ import annotations

import ast
import hashlib
import json
from pathlib import Path

import pytest
from _loader import load_module

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "data"
HELPERS = REPO / "helpers"
NOT_SOURCES = {"checkpoints", "scripts"}  # storage and the script skeleton: nothing trained depends on them


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _manifests_with_sources() -> list[Path]:
    out = []
    for p in sorted(DATA.glob("*/*.json")):
        try:
            m = json.loads(p.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError):
            continue
        if isinstance(m, dict) and isinstance(m.get("source"), dict):
            out.append(p)
    return out


@pytest.mark.parametrize("manifest", _manifests_with_sources(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_committed_manifest_sources_match_the_tree(manifest):
    src = json.loads(manifest.read_text())["source"]
    files = src.get("files") or {}
    assert files, f"{manifest} records no source files"
    missing, changed = [], []
    for rel, sha in files.items():
        p = REPO / rel
        if not p.is_file():
            missing.append(rel)
        elif _sha256(p) != sha:
            changed.append(rel)
    slug, name = manifest.parent.name, manifest.stem
    assert not missing, f"{slug}/{name}: recorded source file(s) {missing} no longer exist"
    assert not changed, (
        f"{slug}/{name} is stale: {', '.join(changed)} changed since the checkpoint was made. Rebuild it "
        f"(make data NB={slug}) or, if the change leaves the weights as they are, restamp it: "
        f"helpers.checkpoints.restamp({slug!r}, {name!r}, why=...)")
    combined = hashlib.sha256("".join(f"{k}:{v}\n" for k, v in sorted(files.items())).encode()).hexdigest()
    assert src.get("hash") == combined, f"{manifest}: the combined source hash does not match its files"


def helpers_imports(path: Path) -> set[str]:
    """The ``helpers`` modules a Python file imports itself (top-level names: ``helpers.x.y`` counts as ``x``)."""
    mods: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for a in node.names:
                parts = a.name.split(".")
                if parts[0] == "helpers" and len(parts) > 1:
                    mods.add(parts[1])
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            parts = node.module.split(".")
            if parts[0] != "helpers":
                continue
            if len(parts) > 1:
                mods.add(parts[1])
            else:
                mods.update(a.name for a in node.names)
    return mods


def _module_file(name: str) -> Path:
    for p in (HELPERS / f"{name}.py", HELPERS / name / "__init__.py"):
        if p.is_file():
            return p.resolve()
    raise AssertionError(f"helpers.{name} has no file under helpers/")


def test_helpers_imports_reads_every_form(tmp_path):
    f = tmp_path / "s.py"
    f.write_text("import os\nimport helpers.repro\nfrom helpers import checkpoints, train as T\n"
                 "from helpers.nn import Transformer\nfrom . import x\nimport helpers\n")
    assert helpers_imports(f) == {"repro", "checkpoints", "train", "nn"}


def _scripts_importing_helpers() -> list[Path]:
    return [p for p in sorted(DATA.glob("*/make_*.py")) if helpers_imports(p) - NOT_SOURCES]


@pytest.mark.parametrize("script", _scripts_importing_helpers(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_script_sources_cover_its_helpers_imports(script):
    mod = load_module(script, f"_data_script_{script.parent.name}_{script.stem}")  # runs nothing: see _loader
    assert hasattr(mod, "SOURCES"), f"{script} defines no SOURCES (the files its manifests hash)"
    listed = {Path(s).resolve() for s in mod.SOURCES}
    assert script.resolve() in listed, f"{script}: SOURCES must include the script itself"
    need = {name: _module_file(name) for name in sorted(helpers_imports(script) - NOT_SOURCES)}
    left_out = [f"helpers/{p.relative_to(HELPERS).as_posix()}" for p in need.values() if p not in listed]
    assert not left_out, f"{script}: SOURCES leaves out {left_out}, which it imports"
