"""Reusable, tested code behind the book *NeurIPS 2026, Executed*.

The shared core (``repro``, ``claims``, ``nn``, ``train``, ``plotting``) is small and stable; every paper chapter
has one module named after its slug (``helpers.tree_training`` for ``02_tree_training``, and so on). A paper module
imports the core and never another paper's module.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
