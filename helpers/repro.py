"""Reproducibility: one call seeds every generator, fixes the thread count and picks a device.

A chapter calls :func:`setup` right after its ``parameters`` cell; the same ``seed`` then gives the same numbers on
the same machine. The book runner sets ``HELPERS_THREADS`` so that notebooks executed in parallel share the cores
instead of fighting over them.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

__all__ = ["Setup", "setup", "seed_everything", "seeded", "set_threads", "pick_device", "rng", "Timings",
           "benchmark"]


def _check_seed(seed: int) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    if not 0 <= int(seed) < 2**32:
        raise ValueError(f"seed must be in [0, 2**32), got {seed}")
    return int(seed)


def seed_everything(seed: int) -> None:
    """Seed Python's ``random``, NumPy's legacy global generator and torch (CPU and CUDA)."""
    seed = _check_seed(seed)
    random.seed(seed)
    np.random.seed(seed)
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency, but keep the core importable without it
        return
    torch.manual_seed(seed)
    if torch.cuda.is_available():  # pragma: no cover - no GPU here
        torch.cuda.manual_seed_all(seed)


@contextmanager
def seeded(seed: int) -> Iterator[int]:
    """Build and train under one seed, whatever random numbers were drawn before.

    ``with repro.seeded(s): model = make_model(); hist = train.fit(model, ...)`` gives the same initial weights and
    the same training run for the same ``s``, even after unrelated cells consumed random numbers. The generators'
    previous states (Python, NumPy's global one, torch) are restored on exit, so the block does not shift the random
    numbers drawn after it.
    """
    seed = _check_seed(seed)
    import torch

    state = (random.getstate(), np.random.get_state(), torch.random.get_rng_state())
    seed_everything(seed)
    try:
        yield seed
    finally:
        random.setstate(state[0])
        np.random.set_state(state[1])
        torch.random.set_rng_state(state[2])


def set_threads(n: int | None = None) -> int:
    """Set torch's intra-op thread count and the BLAS thread count of NumPy/SciPy.

    ``n=None`` reads ``HELPERS_THREADS`` (set by the book runner) and falls back to the number of CPUs.
    Returns the number of threads in force.
    """
    if n is None:
        env = os.environ.get("HELPERS_THREADS")
        n = int(env) if env else (os.cpu_count() or 1)
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"n must be an int or None, got {type(n).__name__}")
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    try:
        import torch

        torch.set_num_threads(n)
    except ImportError:  # pragma: no cover
        pass
    try:  # NumPy/SciPy's BLAS too: small matrices run much faster on one thread than on oversubscribed ones
        from threadpoolctl import threadpool_limits

        threadpool_limits(n)
    except ImportError:  # pragma: no cover
        pass
    return n


def pick_device(prefer: str = "auto") -> str:
    """Return ``"cuda"`` when asked for (or ``"auto"``) and available, else ``"cpu"``."""
    if prefer not in ("auto", "cpu", "cuda"):
        raise ValueError(f"prefer must be 'auto', 'cpu' or 'cuda', got {prefer!r}")
    import torch

    if prefer in ("auto", "cuda") and torch.cuda.is_available():  # pragma: no cover - no GPU here
        return "cuda"
    if prefer == "cuda":
        raise ValueError("prefer='cuda' but no CUDA device is available")
    return "cpu"


def rng(seed: int, *streams: int) -> np.random.Generator:
    """An independent NumPy generator for ``seed`` and optional sub-stream ids (e.g. ``rng(seed, trial)``)."""
    seed = _check_seed(seed)
    for s in streams:
        _check_seed(s)
    return np.random.default_rng([seed, *streams])


@dataclass(frozen=True)
class Setup:
    seed: int
    threads: int
    device: str


def setup(seed: int, threads: int | None = None, device: str = "auto") -> Setup:
    """Seed everything, set threads and pick a device; returns what was chosen (shown in the notebook)."""
    seed_everything(seed)
    n = set_threads(threads)
    return Setup(seed=_check_seed(seed), threads=n, device=pick_device(device))


# ----------------------------------------------------------------------------------------------------------------
# Timing that holds under load: every side in one run, interleaved, medians, CPU time beside wall time
# ----------------------------------------------------------------------------------------------------------------
@dataclass
class Timings:
    """Per-round seconds of each timed function: ``cpu[name]`` (process CPU time) and ``wall[name]``."""

    cpu: dict[str, np.ndarray]
    wall: dict[str, np.ndarray]

    def median(self, name: str, clock: str = "cpu") -> float:
        """Median seconds of one call of ``name`` on ``clock`` (``"cpu"`` or ``"wall"``)."""
        return float(np.median(self._clock(clock)[self._name(name)]))

    def spread(self, name: str, clock: str = "cpu") -> float:
        """Relative spread of ``name``'s times: interquartile range over median (0 = perfectly steady)."""
        t = self._clock(clock)[self._name(name)]
        q1, q2, q3 = np.percentile(t, [25, 50, 75])
        return float((q3 - q1) / max(q2, 1e-12))

    def ratio(self, slow: str, fast: str, clock: str = "cpu") -> float:
        """``median(slow) / median(fast)``: a speedup of ``fast`` over ``slow`` when > 1."""
        return self.median(slow, clock) / max(self.median(fast, clock), 1e-12)

    def summary(self, clock: str = "cpu") -> dict[str, dict[str, float]]:
        """``{name: {"median": s, "spread": iqr/median, "wall_median": s}}`` for a record or a table."""
        return {k: {"median": self.median(k, clock), "spread": self.spread(k, clock),
                    "wall_median": self.median(k, "wall")} for k in self.cpu}

    def _clock(self, clock: str) -> dict[str, np.ndarray]:
        if clock not in ("cpu", "wall"):
            raise ValueError(f"clock must be 'cpu' or 'wall', got {clock!r}")
        return self.cpu if clock == "cpu" else self.wall

    def _name(self, name: str) -> str:
        if name not in self.cpu:
            raise ValueError(f"no timings for {name!r}; timed: {sorted(self.cpu)}")
        return name


def benchmark(fns: Mapping[str, Callable[[], object]], repeats: int = 7, warmup: int = 1) -> Timings:
    """Time several functions in one run, so that load hits every side alike: ``warmup`` untimed calls each, then
    ``repeats`` rounds in which every function runs once, the order rotating each round. CPU time
    (:func:`time.process_time`) is recorded next to wall time; compare medians, and state the spread
    (:meth:`Timings.spread`) as a condition of any timing claim (the effect must be larger than the noise).
    """
    if not isinstance(fns, Mapping) or not fns:
        raise TypeError(f"fns must be a non-empty mapping of names to functions, got {type(fns).__name__}")
    for k, f in fns.items():
        if not isinstance(k, str) or not callable(f):
            raise TypeError(f"fns must map names (str) to callables; {k!r} maps to {type(f).__name__}")
    if isinstance(repeats, bool) or not isinstance(repeats, (int, np.integer)) or repeats < 1:
        raise ValueError(f"repeats must be an integer >= 1, got {repeats!r}")
    if isinstance(warmup, bool) or not isinstance(warmup, (int, np.integer)) or warmup < 0:
        raise ValueError(f"warmup must be an integer >= 0, got {warmup!r}")
    names = list(fns)
    for _ in range(int(warmup)):
        for k in names:
            fns[k]()
    cpu = {k: np.zeros(int(repeats)) for k in names}
    wall = {k: np.zeros(int(repeats)) for k in names}
    for r in range(int(repeats)):
        for k in names[r % len(names):] + names[:r % len(names)]:
            c, w = time.process_time(), time.perf_counter()
            fns[k]()
            cpu[k][r] = time.process_time() - c
            wall[k][r] = time.perf_counter() - w
    return Timings(cpu=cpu, wall=wall)
