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
