"""One skeleton for every data script (``data/<slug>/make_<name>.py``), and the seed convention it shares with
the chapters.

A data script trains what does not fit a chapter's 5-minute default run and writes it with
:mod:`helpers.checkpoints`. It says only what is its own (the default and tiny configs, the function that builds
one checkpoint) and hands the rest to :func:`script_main`::

    def build(cfg, out, args):            # one checkpoint: cfg, the data root (None: helpers.checkpoints.data_dir())
        ...
        return checkpoints.save(SLUG, args.name, tensors, config=cfg, ..., sources=SOURCES, root=out)

    if __name__ == "__main__":
        scripts.script_main(build, config=mod.checkpoint_config, tiny=tiny, names=["models"], doc=__doc__)

Every script then takes the same flags:

* ``--tiny``: the tiny config (seconds), into a temporary folder that is removed afterwards (unless ``--out``);
* ``--out DIR``: the data root to write ``<slug>/<name>.*`` into (default ``$HELPERS_DATA`` or the repository's
  ``data/``), in tiny mode too;
* ``--seeds S [S ...]``: train the models of these seeds instead of the config's (:func:`with_seeds`);
* ``--name NAME [NAME ...]``: which of the script's checkpoints to build (default: ``default_names``);

plus its own (``options``). The skeleton limits torch and BLAS to one thread (the same seed on the same machine
writes byte-identical weights) and does nothing random itself: at default flags the script trains exactly what it
trained before, in the same order.

**Seeds.** A chapter's ``seed`` parameter means the models of seeds ``seed, seed + 1, seed + 2``
(:func:`model_seeds`). A chapter asks its checkpoint for them with ``with_seeds(checkpoint_config(name), seeds)``;
at ``seed = 0`` that is the committed config itself. Any other seed needs the checkpoint built at those seeds::

    make data NB=12_transformer_dfs SEEDS="7 8 9" DATA=/tmp/seeds7     # --seeds 7 8 9 --out /tmp/seeds7
    HELPERS_DATA=/tmp/seeds7 make notebook NB=12_transformer_dfs SEED=7
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from helpers import validate as V

__all__ = ["N_SEEDS", "model_seeds", "with_seeds", "script_main", "data_root", "part_key", "seed_part"]

N_SEEDS = 3  # a default run measures every trained model at three seeds


def model_seeds(seed: int, n: int = N_SEEDS) -> list[int]:
    """The seeds of the models a chapter run at ``seed`` uses: ``[seed, seed + 1, ..., seed + n - 1]``."""
    seed = V.seed("seed", seed)
    n = V.integer("n", n, min=1)
    return [seed + i for i in range(n)]


def with_seeds(cfg: Mapping[str, Any], seeds: Sequence[int]) -> dict[str, Any]:
    """A copy of a checkpoint config whose models are those of ``seeds``.

    ``cfg["seeds"]`` becomes ``seeds``. Keys that pick some of those models follow them by position: every other
    list whose key ends in ``_seeds`` (e.g. ``large_seeds=[0]``: the first seed's models) and an integer
    ``stored_seed``; a position past the end of ``seeds`` is dropped. Data seeds (``split_seed``, ``db_seed``, ...)
    are left alone: the task stays the same. With ``seeds`` equal to ``cfg["seeds"]`` the copy equals ``cfg``.
    """
    V.instance("cfg", cfg, Mapping)
    seeds = V.sequence("seeds", seeds, of=lambda n, x: V.seed(n, x), min_len=1)
    seeds = [int(s) for s in seeds]
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be distinct, got {seeds}")
    old = cfg.get("seeds")
    if not isinstance(old, Sequence) or isinstance(old, str) or not old:
        raise ValueError(f"the config has no list 'seeds' of model seeds (got {old!r}), so it takes no other seeds")
    position = {int(s): i for i, s in enumerate(old)}
    out = copy.deepcopy(dict(cfg))

    def follow(key: str, s: Any) -> int | None:
        if isinstance(s, bool) or not isinstance(s, int) or s not in position:
            raise ValueError(f"config key {key!r}: {s!r} is not one of the config's seeds {list(old)}, so it "
                             "cannot follow them to new seeds")
        i = position[s]
        return seeds[i] if i < len(seeds) else None

    for key, value in cfg.items():
        if key == "seeds":
            out[key] = list(seeds)
        elif key.endswith("_seeds") and isinstance(value, Sequence) and not isinstance(value, str):
            out[key] = [t for t in (follow(key, s) for s in value) if t is not None]
        elif key == "stored_seed":
            t = follow(key, value)
            out[key] = t if t is not None else seeds[0]
    return out


def _first_paragraph(doc: str | None) -> str | None:
    return doc.strip().split("\n\n")[0] if doc else None


def script_main(
    build: Callable[[dict, Path | None, argparse.Namespace], Any],
    *,
    config: Callable[[str], Mapping[str, Any]],
    tiny: Callable[[str], Mapping[str, Any]],
    names: Sequence[str],
    default_names: Sequence[str] | None = None,
    doc: str | None = None,
    options: Callable[[argparse.ArgumentParser], None] | None = None,
    argv: Sequence[str] | None = None,
    threads: int = 1,
) -> list[Any]:
    """The ``main()`` of a data script; returns what ``build`` returned, one item per checkpoint built.

    ``config(name)`` and ``tiny(name)`` give checkpoint ``name``'s default and tiny configs (each call's result is
    deep-copied before use); ``build(cfg, out, args)`` builds one checkpoint with config ``cfg`` under data root
    ``out`` (``None``: :func:`helpers.checkpoints.data_dir`) and returns what it wrote (a path or a list of
    paths); ``args`` holds the parsed flags, with ``args.name`` the checkpoint being built and ``args.tiny``.
    ``names`` are the script's checkpoints, ``default_names`` those built without ``--name`` (default: all).
    ``options(parser)`` adds the script's own flags; ``doc`` (the script's ``__doc__``) gives the help text;
    ``threads`` is the torch and BLAS thread count (one: byte-identical weights for the same seed).
    """
    if not callable(build) or not callable(config) or not callable(tiny):
        raise TypeError("build, config and tiny must be callables")
    names = V.sequence("names", names, of=lambda n, x: V.instance(n, x, str), min_len=1)
    names = list(names)
    defaults = list(names if default_names is None else default_names)
    unknown = [n for n in defaults if n not in names]
    if unknown or not defaults:
        raise ValueError(f"default_names must be a non-empty subset of names {names}, got {defaults}")
    V.optional(V.instance, "doc", doc, str)
    threads = V.integer("threads", threads, min=1)

    ap = argparse.ArgumentParser(description=_first_paragraph(doc),
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tiny", action="store_true",
                    help="a tiny config for a few steps (seconds), into a temporary folder unless --out")
    ap.add_argument("--out", type=Path, default=None,
                    help="data root to write <slug>/<name>.* into (default: $HELPERS_DATA or the repository's data/)")
    ap.add_argument("--seeds", type=int, nargs="+", default=None, metavar="SEED",
                    help="train the models of these seeds instead of the config's (e.g. --seeds 7 8 9)")
    ap.add_argument("--name", dest="names", nargs="+", choices=names, default=None, metavar="NAME",
                    help=f"which checkpoint(s) to build, of {', '.join(names)} (default: {', '.join(defaults)})")
    if options is not None:
        options(ap)
    args = ap.parse_args(list(argv) if argv is not None else None)
    chosen = [n for n in names if n in (args.names or defaults)]  # in the script's order

    from helpers import repro

    repro.set_threads(threads)
    made: list[Any] = []
    with contextlib.ExitStack() as stack:
        out = args.out
        if args.tiny and out is None:
            out = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="helpers_tiny_")))
        for name in chosen:
            cfg = copy.deepcopy(dict(tiny(name) if args.tiny else config(name)))
            if args.seeds is not None:
                # a checkpoint of k model seeds takes the first k given (a one-seed probe at --seeds 7 8 9 is
                # seed 7, as a chapter at SEED=7 asks for it: model_seeds(7, n=1))
                cfg = with_seeds(cfg, args.seeds[:len(cfg.get("seeds") or args.seeds)])
            args.name = name
            result = build(cfg, out, args)
            for item in result if isinstance(result, list) else [result]:
                print("wrote", item, flush=True)
                made.append(item)
    return made


def data_root(out: str | Path | None) -> Path:
    """The data root a script writes ``<slug>/...`` under: ``out``, else :func:`helpers.checkpoints.data_dir`
    (``$HELPERS_DATA`` or the repository's ``data/``), for scripts that write plain files rather than checkpoints."""
    if out is not None:
        return Path(V.instance("out", out, (str, Path)))
    from helpers.checkpoints import data_dir

    return data_dir()


def part_key(cfg: Mapping[str, Any], **extra: Any) -> str:
    """The key a seed's stored part is kept under: the config without its ``seeds`` (each part is one seed) plus
    ``extra``, as sorted JSON, so a part trained under other settings is never reused."""
    import json

    V.instance("cfg", cfg, Mapping)
    return json.dumps({**{k: v for k, v in cfg.items() if k != "seeds"}, **extra}, sort_keys=True)


def seed_part(parts: str | Path | None, seed: int, key: str,
              compute: Callable[[], dict[str, Any]]) -> tuple[dict[str, Any], bool]:
    """One seed's results, so that each seed of a data script can be its own job and the checkpoint is merged at
    the end (``--seeds S --parts DIR --out /tmp/x``, then ``--parts DIR``).

    Reads ``parts/seed{seed}.pt`` when it was stored under the same ``key`` (:func:`part_key`), else calls
    ``compute()`` and stores its dict there (nothing is stored when ``parts`` is None). Returns the results and
    whether they were reused."""
    import torch

    seed = V.seed("seed", seed)
    V.instance("key", key, str)
    if not callable(compute):
        raise TypeError(f"compute must be a callable returning a dict, got {type(compute).__name__}")
    part = None if parts is None else Path(V.instance("parts", parts, (str, Path))) / f"seed{seed}.pt"
    if part is not None and part.exists():
        res = torch.load(part)
        if not isinstance(res, dict):
            raise ValueError(f"{part} holds {type(res).__name__}, expected a seed's results dict")
        if res.get("key") == key:
            print(f"seed {seed}: reused {part}", flush=True)
            return {k: v for k, v in res.items() if k != "key"}, True
    res = compute()
    if not isinstance(res, dict):
        raise TypeError(f"compute() must return a dict, got {type(res).__name__}")
    if part is not None:
        part.parent.mkdir(parents=True, exist_ok=True)
        torch.save({**res, "key": key}, part)
    return res, False
