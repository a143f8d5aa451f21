"""Import a file that is not in a package (a data script, the book's build script) as a module, for the tests.

Data scripts do their work under ``if __name__ == "__main__"`` only, so importing one runs nothing.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def load_module(path: str | Path, name: str | None = None, register: bool = False) -> ModuleType:
    """The module in ``path`` under ``name`` (default: ``_script_<folder>_<stem>``); ``register`` puts it in
    ``sys.modules`` (dataclasses and pickling look their module up there)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no script at {path}")
    name = name or f"_script_{path.parent.name}_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    if register:
        sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def run_papermill(src: str | Path, out: str | Path, params: dict | None = None, env: dict | None = None,
                  cwd: str | Path | None = None, cell_timeout: int = 300, timeout: int = 900) -> None:
    """Execute notebook ``src`` into ``out`` with papermill in its own process, with a cell timeout, as
    book/build.py runs notebooks. Run in-process inside a pytest-xdist worker, nbclient once waited forever on an
    idle kernel (make test, 2026-12-07); a child process with a timeout cannot hang the suite."""
    import json
    import os
    import subprocess

    cmd = [sys.executable, "-m", "papermill", str(src), str(out), "-k", "python3",
           "--execution-timeout", str(cell_timeout), "--no-progress-bar"]
    if params:
        cmd += ["-y", json.dumps(params)]
    if cwd is not None:
        cmd += ["--cwd", str(cwd)]
    done = subprocess.run(cmd, env=dict(os.environ, **(env or {})), capture_output=True, text=True,
                          timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]


def config_by_rule(cfg, manifest) -> dict:
    """The config a chapter loads a checkpoint with: ``cfg``, or, when a registered rule stopped before every
    default seed, ``cfg`` on the manifest's seeds.

    A manifest says a rule ran fewer seeds by recording the reason in ``extra.seeds_by_rule`` (a non-empty
    string); its ``config["seeds"]`` must then be a proper subset of ``cfg["seeds"]``. Without that reason the
    config is returned unchanged, so a manifest with fewer seeds still fails the config comparison.
    """
    import copy
    from collections.abc import Mapping, Sequence

    from helpers import scripts

    if not isinstance(cfg, Mapping) or not isinstance(manifest, Mapping):
        raise TypeError(f"cfg and manifest must be mappings, got {type(cfg).__name__}, {type(manifest).__name__}")
    extra = manifest.get("extra") or {}
    if not isinstance(extra, Mapping):
        raise TypeError(f"manifest['extra'] must be a mapping, got {type(extra).__name__}")
    reason = extra.get("seeds_by_rule")
    if reason is None:
        return copy.deepcopy(dict(cfg))
    if not isinstance(reason, str) or not reason.strip():
        raise ValueError(f"extra.seeds_by_rule must name the rule and why it stopped (a non-empty string), got "
                         f"{reason!r}")
    seeds = (manifest.get("config") or {}).get("seeds")
    want = cfg.get("seeds")
    if not isinstance(seeds, Sequence) or isinstance(seeds, str) or not seeds:
        raise ValueError(f"a manifest with extra.seeds_by_rule needs config['seeds'], got {seeds!r}")
    if not isinstance(want, Sequence) or isinstance(want, str) or not set(seeds) < set(want):
        raise ValueError(f"extra.seeds_by_rule: the manifest's seeds {list(seeds)} must be a proper subset of the "
                         f"chapter's default seeds {want!r}")
    return scripts.with_seeds(cfg, seeds)
