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
