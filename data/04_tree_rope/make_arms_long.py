"""The convergence probe of chapter 04_tree_rope: the claims' arms (seed 0) trained 2.5x longer than in
``make_arms.py``, evaluated the same way; writes ``data/04_tree_rope/arms_long.safetensors`` + ``arms_long.json``.
Run from the repository root: ``.venv/bin/python data/04_tree_rope/make_arms_long.py`` (``--tiny``: seconds)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_arms  # noqa: E402

if __name__ == "__main__":
    make_arms.main([*sys.argv[1:], "--name", "arms_long"])
