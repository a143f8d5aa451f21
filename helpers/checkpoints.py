"""Checkpoints: weights trained once by a chapter's own script, stored as safetensors plus a JSON manifest.

Training that does not fit a chapter's 5-minute default run happens in ``data/<slug>/make_<name>.py``, which calls
:func:`save`; the notebook calls :func:`load` with the config it expects and evaluates what it gets::

    ckpt = checkpoints.load("04_tree_rope", "arms", config=tr.checkpoint_config())
    ckpt.load_into(model, prefix="RoPE/0.")       # strict: every key must match
    checkpoints.plot_history(ckpt.manifest)       # the training curve the notebook did not run

* ``data/<slug>/<name>.safetensors`` holds the tensors (no pickle: loading a checkpoint cannot run code).
* ``data/<slug>/<name>.json`` is the manifest: slug, name, config, seed, steps, wall seconds and machine, final
  metrics, the training curves (each at most :data:`MAX_POINTS` points), the weights' sha256, and the sha256 of the
  source files that produced them (the chapter's module and the script).

:func:`load` never trains. It raises :class:`CheckpointError` (a ``ValueError``) when a file is missing, the
manifest belongs to another checkpoint, the weights' hash differs (truncated or edited file) or the config differs
(:class:`ConfigMismatch`, naming the differing keys); every message ends with the command that rebuilds the
checkpoint. A changed source file only warns (:class:`StaleCheckpointWarning`): the weights may be stale.
:func:`require_seeds` gives a default run asked for seeds the checkpoint does not store (``SEED=n``) a clear error.
:func:`restamp` records the current source hashes after a change that provably leaves the weights as they are
(an evaluation-only edit), with the reason and the old hashes, instead of a retrain.
``save(..., quantize="int8")`` stores large weight matrices as int8 with one float32 scale per row (about half the
size of float16; :func:`load` returns them dequantized to float32); :func:`compress` converts a committed
checkpoint in place, recording the old hash and the largest change of any weight.

Where the files are (:func:`data_dir`): ``$HELPERS_DATA`` when set; else the checkout's ``data/``; else (an
installed package, as in Colab) a user cache (``$HELPERS_CACHE``, default pooch's ``~/.cache/neurips2026-executed``)
into which :func:`fetch` downloads a chapter's files on first use with `pooch <https://www.fatiando.org/pooch>`_,
from the repository's raw-file URL recorded in the package's registry (``helpers/data_registry.txt``: every data
file a chapter reads, with its sha256; written by ``data/make_registry.py``). A download whose sha256 differs from
the registry's is deleted and raises :class:`CheckpointError` naming the file and the expected hash; the next call
fetches it again. :func:`load` and :func:`load_manifest` fetch what they read; other files are read through
``checkpoints.fetch(slug, filename)``.

Convention for the test that keeps committed checkpoints in step with their chapter: a manifest names the chapter's
module (``module``), and that module exposes ``checkpoint_config(name) -> dict``, the config the chapter's default
parameters ask for; the script trains with exactly that config and the notebook loads with it.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import platform
import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from helpers import validate as V

__all__ = [
    "MAX_POINTS", "FORMAT", "Checkpoint", "CheckpointError", "ConfigMismatch", "StaleCheckpointWarning",
    "data_dir", "paths", "rebuild_command", "normalize", "diff_config", "sha256_file", "source_hash",
    "subsample", "save", "load_manifest", "load", "require_seeds", "restamp", "compress", "plot_history",
    "QUANTIZE_MIN_NUMEL", "REGISTRY", "CACHE_ENV", "URL_ENV", "in_checkout", "cache_dir", "read_registry",
    "data_url", "fetch", "int8_roundtrip",
]

MAX_POINTS = 500  # a curve in a manifest has at most this many points
FORMAT = 1  # manifest format version
REPO = Path(__file__).resolve().parents[1]
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
QUANTIZE_MIN_NUMEL = 4096  # int8 storage applies to floating tensors of >= 2 dims and at least this many values
_SCALE = ".__int8_row_scale__"  # suffix of the per-row scale stored next to an int8 tensor
_SCHEME = "int8 per-row absmax (weight = q * scale[row]; rows = dim 0)"
REGISTRY = Path(__file__).resolve().with_name("data_registry.txt")  # ships in the package (package-data)
CACHE_ENV = "HELPERS_CACHE"  # where downloaded data files are kept outside a checkout
URL_ENV = "HELPERS_DATA_URL"  # overrides the registry's base URL (a mirror, or a local server in the tests)
CACHE_NAME = "neurips2026-executed"  # pooch.os_cache(CACHE_NAME): ~/.cache/neurips2026-executed on Linux


class CheckpointError(ValueError):
    """A checkpoint that cannot be used: missing, corrupted, from another chapter or for another config."""


class ConfigMismatch(CheckpointError):
    """The manifest's config differs from the config the caller asked for."""


class StaleCheckpointWarning(UserWarning):
    """The source files that produced a checkpoint have changed since: its weights may be stale."""


@dataclass
class Checkpoint:
    """What :func:`load` returns: the tensors (as stored) and the manifest."""

    tensors: dict[str, torch.Tensor]
    manifest: dict[str, Any]

    def state_dict(self, prefix: str = "") -> dict[str, torch.Tensor]:
        """The tensors whose key starts with ``prefix``, with the prefix removed."""
        V.instance("prefix", prefix, str)
        out = {k[len(prefix):]: v for k, v in self.tensors.items() if k.startswith(prefix)}
        if not out:
            raise KeyError(f"no tensor key starts with {prefix!r}; prefixes present: {sorted(_prefixes(self.tensors))}")
        return out

    def load_into(self, model: nn.Module, prefix: str = "", *, ignore: Sequence[str] = ()) -> nn.Module:
        """Copy the tensors under ``prefix`` into ``model`` (strict; cast to the model's dtype); returns the model.
        Keys (after the prefix) that start with one of ``ignore`` are left out (e.g. stored evaluation results)."""
        V.instance("model", model, nn.Module)
        ignore = V.sequence("ignore", ignore, of=lambda n, x: V.instance(n, x, str))
        sd = {k: v for k, v in self.state_dict(prefix).items() if not any(k.startswith(i) for i in ignore)}
        model.load_state_dict(sd, strict=True)
        return model


def _prefixes(tensors: Mapping[str, Any]) -> set[str]:
    return {k.split(".", 1)[0] + "." for k in tensors if "." in k}


def _check_names(slug: Any, name: Any) -> tuple[str, str]:
    for what, x in (("slug", slug), ("name", name)):
        V.instance(what, x, str)
        if not _NAME.match(x):
            raise ValueError(f"{what} must be a file-name-safe string (letters, digits, _ . -), got {x!r}")
    return slug, name


def in_checkout() -> bool:
    """Whether this package runs from a checkout of the repository (its ``data/`` beside ``helpers/``)."""
    return (REPO / "data").is_dir() and (REPO / "pyproject.toml").is_file()


def cache_dir() -> Path:
    """Where downloaded data files are kept: ``$HELPERS_CACHE`` if set, else pooch's user cache folder."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env)
    import pooch

    return Path(pooch.os_cache(CACHE_NAME))


def _remote() -> bool:
    return not os.environ.get("HELPERS_DATA") and not in_checkout()


def data_dir() -> Path:
    """The folder that holds ``<slug>/`` data folders: ``$HELPERS_DATA`` if set, else the checkout's ``data/``,
    else (an installed package, e.g. in Colab) the download cache :func:`cache_dir` that :func:`fetch` fills."""
    env = os.environ.get("HELPERS_DATA")
    if env:
        return Path(env)
    return REPO / "data" if in_checkout() else cache_dir()


def read_registry(path: str | os.PathLike | None = None) -> tuple[str, dict[str, str]]:
    """``(base_url, {"<slug>/<file>": sha256})`` from a registry file (default :data:`REGISTRY`).

    The format is pooch's (``name hash`` per line, ``#`` comments), with the base URL in a ``# base_url: ...``
    comment line."""
    p = REGISTRY if path is None else V._path("path", path)
    if not p.is_file():
        raise CheckpointError(f"the data registry {p} is missing (regenerate it with: "
                              f".venv/bin/python data/make_registry.py)")
    base, files = None, {}
    for i, line in enumerate(p.read_text().splitlines(), 1):
        line = line.strip()
        if line.startswith("# base_url:"):
            base = line.split(":", 1)[1].strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) != 2 or not re.fullmatch(r"[0-9a-f]{64}", parts[1]):
            raise CheckpointError(f"{p}, line {i}: expected '<slug>/<file> <sha256>', got {line!r}")
        files[parts[0]] = parts[1]
    if not base:
        raise CheckpointError(f"{p} has no '# base_url: ...' line")
    return base, files


def data_url() -> str:
    """The URL that ``<slug>/<file>`` is appended to: ``$HELPERS_DATA_URL`` if set, else the registry's base URL
    (the raw-file URL of ``data/`` on the branch the Colab bootstrap installs from, see ``_config.yml``)."""
    url = os.environ.get(URL_ENV) or read_registry()[0]
    return url if url.endswith("/") else url + "/"


def _download(key: str) -> Path:
    """Download ``<slug>/<file>`` into :func:`cache_dir` (once; pooch checks the sha256 of what it keeps)."""
    import pooch

    _, files = read_registry()
    if key not in files:
        raise CheckpointError(
            f"{key} is not among the data files this version of the package knows (registry {REGISTRY}, "
            f"{len(files)} files); install the package from the same commit as the data")
    url = data_url() + key
    fetcher = pooch.create(path=cache_dir(), base_url=data_url(), registry={key: f"sha256:{files[key]}"},
                           retry_if_failed=2)
    try:
        return Path(fetcher.fetch(key))
    except ValueError as e:  # pooch: the hash of the download differs from the registry's
        raise CheckpointError(
            f"the download of {key} from {url} is corrupt or truncated: its sha256 is not the expected "
            f"{files[key]}. Nothing was kept; the next call fetches it again. ({e})") from None
    except Exception as e:  # no network, HTTP 404, ...
        raise CheckpointError(f"cannot download {key} from {url}: {type(e).__name__}: {e}") from None


def fetch(slug: str, filename: str | None = None) -> Path:
    """The local path of data file ``filename`` of chapter ``slug`` (or, without ``filename``, of its folder).

    In a checkout (or with ``$HELPERS_DATA``) this is just the path under :func:`data_dir`, whether or not the file
    exists. Outside a checkout (Colab) the file (or every registered file of the chapter) is downloaded first into
    :func:`cache_dir`, verified against the registry's sha256 (:class:`CheckpointError` if it does not match)."""
    slug, _ = _check_names(slug, "x")
    if filename is not None:
        V.instance("filename", filename, str)
        if not _NAME.match(filename):
            raise ValueError(f"filename must be a file name in the chapter's folder (letters, digits, _ . -), "
                             f"got {filename!r}")
    if not _remote():
        folder = data_dir() / slug
        return folder if filename is None else folder / filename
    if filename is not None:
        return _download(f"{slug}/{filename}")
    for key in sorted(k for k in read_registry()[1] if k.startswith(slug + "/")):
        _download(key)
    return cache_dir() / slug


def paths(slug: str, name: str, root: str | os.PathLike | None = None) -> tuple[Path, Path]:
    """``(weights, manifest)`` paths of checkpoint ``name`` of chapter ``slug`` under ``root`` (default :func:`data_dir`)."""
    slug, name = _check_names(slug, name)
    folder = V._path("root", root) if root is not None else data_dir()
    base = folder / slug / name
    return base.with_suffix(".safetensors"), base.with_suffix(".json")


def rebuild_command(slug: str, name: str) -> str:
    """The command that rebuilds a checkpoint (all of a chapter's checkpoints)."""
    slug, name = _check_names(slug, name)
    script = f"data/{slug}/make_{name}.py"
    if not (REPO / script).is_file():  # one script may write several checkpoints: name the ones there are
        found = sorted((REPO / "data" / slug).glob("make_*.py"))
        if found:
            script = " or ".join(f"data/{slug}/{f.name}" for f in found)
    return f"make data NB={slug}   (or: .venv/bin/python {script})"


def _manifest_text(manifest: Mapping[str, Any]) -> str:
    """The manifest (or record) as JSON with one top-level key per line and each value compact.

    A diff shows which key changed, and data/ stays within its budget (indented JSON is about 10% larger)."""
    if not isinstance(manifest, Mapping):
        return json.dumps(manifest, separators=(",", ":"), allow_nan=False) + "\n"
    rows = [json.dumps(str(k)) + ":" + json.dumps(v, separators=(",", ":"), allow_nan=False)
            for k, v in manifest.items()]
    return "{\n" + ",\n".join(rows) + "\n}\n"


def normalize(x: Any) -> Any:
    """A JSON round trip of ``x`` (tuples become lists, NumPy scalars Python numbers); raises on what JSON cannot hold."""
    try:
        return json.loads(json.dumps(x, default=_json_default, allow_nan=False))
    except (TypeError, ValueError) as e:
        raise TypeError(f"config/metrics must be JSON-serializable (finite numbers), got {V.describe(x)}: {e}") from None


def _json_default(x: Any) -> Any:
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, torch.Tensor):
        return x.tolist()
    if isinstance(x, Path):
        return str(x)
    raise TypeError(f"{type(x).__name__} is not JSON-serializable")


def diff_config(expected: Mapping[str, Any], actual: Mapping[str, Any]) -> list[str]:
    """The keys (dotted for nested mappings) whose values differ between two configs, or that one lacks."""
    V.instance("expected", expected, Mapping)
    V.instance("actual", actual, Mapping)
    return _diff(normalize(dict(expected)), normalize(dict(actual)), "")


def _diff(a: Any, b: Any, path: str) -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            p = f"{path}.{k}" if path else str(k)
            if k not in a or k not in b:
                out.append(p)
            else:
                out.extend(_diff(a[k], b[k], p))
        return out
    if isinstance(a, list) and isinstance(b, list):  # element by element, so [True] and [1] differ
        same = len(a) == len(b) and not any(_diff(x, y, path) for x, y in zip(a, b))
        return [] if same else [path or "<root>"]
    return [] if (a == b and type(a) is type(b)) or (_num(a) and _num(b) and a == b) else [path or "<root>"]


def _num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def sha256_file(path: str | os.PathLike) -> str:
    """Hex sha256 of a file's bytes."""
    p = V.existing_file("path", path)
    h = hashlib.sha256()
    with open(p, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _rel(p: Path) -> str:
    p = p.resolve()
    try:
        return p.relative_to(REPO).as_posix()
    except ValueError:
        return str(p)


def source_hash(files: Sequence[str | os.PathLike]) -> dict[str, Any]:
    """``{"files": {path: sha256}, "hash": sha256 of them all}`` for the source files that produce a checkpoint."""
    files = V.sequence("sources", files)
    shas = {}
    for f in files:
        p = V.existing_file("source file", f)
        shas[_rel(p)] = sha256_file(p)
    total = hashlib.sha256("".join(f"{k}:{v}\n" for k, v in sorted(shas.items())).encode()).hexdigest()
    return {"files": shas, "hash": total}


def subsample(values: Sequence[float], max_points: int = MAX_POINTS) -> dict[str, list[float]]:
    """A per-step curve as at most ``max_points`` points ``{"step": [...], "value": [...]}``: the mean over equal
    bins of steps, at each bin's last step (a curve that already fits is kept as it is, steps ``1..n``). A binned
    curve also keeps each bin's ``"min"`` and ``"max"``, so a short spike (a loss collapse) the mean would smooth
    away stays visible in the manifest and in :func:`plot_history`."""
    max_points = V.integer("max_points", max_points, min=1)
    v = np.asarray(values, dtype=np.float64).ravel()
    n = len(v)
    if n <= max_points:
        return {"step": list(range(1, n + 1)), "value": [float(x) for x in v]}
    edges = np.linspace(0, n, max_points + 1).round().astype(int)
    bins = [v[a:b] for a, b in zip(edges[:-1], edges[1:])]
    return {"step": [int(e) for e in edges[1:]],
            "value": [float(b.mean()) for b in bins],
            "min": [float(b.min()) for b in bins],
            "max": [float(b.max()) for b in bins]}


def _curves(history: Any) -> dict[str, dict[str, list[float]]]:
    """Normalize ``history`` into named curves ``{name: {"step": [...], "value": [...]}}``."""
    if history is None:
        return {}
    if hasattr(history, "loss") and hasattr(history, "evals"):  # a helpers.train.History
        out = {"loss": subsample(history.loss)}
        for k, pts in history.evals.items():
            out[k] = _points(pts, f"history.evals[{k!r}]")
        return out
    V.instance("history", history, Mapping)
    out = {}
    for key, val in history.items():
        V.instance("history key", key, str)
        if hasattr(val, "loss") and hasattr(val, "evals"):
            for k, c in _curves(val).items():
                out[f"{key}/{k}"] = c
        elif isinstance(val, Mapping) and {"step", "value"} <= set(val) <= _CURVE_KEYS:
            out[key] = _curve(val, f"history[{key!r}]")
        else:
            seq = list(val)
            if seq and isinstance(seq[0], (tuple, list)):
                out[key] = _points(seq, f"history[{key!r}]")
            else:
                out[key] = subsample([V.number(f"history[{key!r}] value", x, finite=False) for x in seq])
    return out


_CURVE_KEYS = {"step", "value", "min", "max"}


def _curve(val: Mapping, what: str) -> dict[str, list[float]]:
    """A curve given as a mapping (what :func:`subsample` returns): ``step`` and ``value``, optionally a binned
    curve's ``min`` and ``max`` band, all of one length; kept whole (thinned to ``MAX_POINTS`` like pairs)."""
    cols = {k: list(val[k]) for k in ("step", "value", "min", "max") if k in val}
    n = len(cols["step"])
    for k, c in cols.items():
        if len(c) != n:
            raise ValueError(f"{what}[{k!r}] must have one entry per step ({n}), got {len(c)}")
    out = _points(list(zip(cols["step"], cols["value"])), what)
    if len(cols) > 2:
        idx = (np.linspace(0, n - 1, MAX_POINTS).round().astype(int) if n > MAX_POINTS
               else np.arange(n))
        for k in ("min", "max"):
            if k in cols:
                out[k] = [V.number(f"{what}[{k!r}]", cols[k][i], finite=False) for i in idx]
    return out


def _points(pts: Sequence[Sequence[float]], what: str) -> dict[str, list[float]]:
    pts = list(pts)
    for p in pts:
        if len(p) != 2:
            raise ValueError(f"{what} must hold (step, value) pairs, got {p!r}")
    if len(pts) > MAX_POINTS:
        idx = np.linspace(0, len(pts) - 1, MAX_POINTS).round().astype(int)
        pts = [pts[i] for i in idx]
    return {"step": [int(s) for s, _ in pts], "value": [float(v) for _, v in pts]}


def _tensors(obj: Any, dtype: torch.dtype | None) -> dict[str, torch.Tensor]:
    """A flat ``{key: contiguous CPU tensor}`` from a module, a mapping of tensors, or a mapping of modules."""
    if isinstance(obj, nn.Module):
        flat = dict(obj.state_dict())
    elif isinstance(obj, Mapping):
        if not obj:
            raise ValueError("model_or_tensors must hold at least one tensor, got an empty mapping")
        flat = {}
        for k, v in obj.items():
            V.instance("tensor key", k, str)
            if isinstance(v, nn.Module):
                flat.update({f"{k}.{kk}": vv for kk, vv in v.state_dict().items()})
            elif isinstance(v, torch.Tensor):
                flat[k] = v
            else:
                raise TypeError(f"model_or_tensors[{k!r}] must be a Tensor or a Module, got {V.describe(v)}")
    else:
        raise TypeError(f"model_or_tensors must be an nn.Module or a mapping of tensors/modules, got {V.describe(obj)}")
    out = {}
    for k in sorted(flat):
        t = flat[k].detach().cpu()
        if dtype is not None and t.is_floating_point():
            t = t.to(dtype)
        if t.is_floating_point() and not bool(torch.isfinite(t).all()):
            raise ValueError(f"tensor {k!r} holds NaN or inf (after the cast to {t.dtype}): refusing to save it")
        out[k] = t.clone().contiguous()  # clone: tied weights share memory, which safetensors refuses
    return out


def _quantize_int8(tensors: Mapping[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], int, float]:
    """Large floating matrices -> int8 + a float32 scale per row (dim 0); returns (tensors, count, max abs error)."""
    out: dict[str, torch.Tensor] = {}
    count, err = 0, 0.0
    for k, t in tensors.items():
        if k.endswith(_SCALE):
            raise ValueError(f"tensor key {k!r} ends with the reserved suffix {_SCALE!r}")
        if not (t.is_floating_point() and t.ndim >= 2 and t.numel() >= QUANTIZE_MIN_NUMEL):
            out[k] = t
            continue
        w = t.float().reshape(t.shape[0], -1)
        scale = w.abs().amax(dim=1) / 127.0
        scale = torch.where(scale > 0, scale, torch.ones_like(scale))
        q = torch.round(w / scale[:, None]).clamp_(-127, 127).to(torch.int8)
        err = max(err, float((q.float() * scale[:, None] - w).abs().max()))
        out[k] = q.reshape(t.shape).contiguous()
        out[k + _SCALE] = scale.contiguous()
        count += 1
    return out, count, err


def _dequantize(tensors: dict[str, torch.Tensor], where: str) -> dict[str, torch.Tensor]:
    """Undo :func:`_quantize_int8`: every int8 tensor with a stored row scale becomes float32."""
    scales = {k[: -len(_SCALE)]: v for k, v in tensors.items() if k.endswith(_SCALE)}
    out = {k: v for k, v in tensors.items() if not k.endswith(_SCALE)}
    for k, scale in scales.items():
        q = out.get(k)
        if q is None or q.dtype != torch.int8 or scale.ndim != 1 or scale.shape[0] != q.shape[0]:
            raise CheckpointError(f"{where}: the row scale of {k!r} has no matching int8 tensor "
                                  f"(got {None if q is None else (q.dtype, tuple(q.shape))}, scale "
                                  f"{tuple(scale.shape)}); the file is corrupt")
        out[k] = (q.float().reshape(q.shape[0], -1) * scale.float()[:, None]).reshape(q.shape)
    return out


def int8_roundtrip(tensors: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The tensors as a checkpoint saved with ``quantize="int8"`` gives them back (large floating matrices through
    int8 with a scale per row, as float32; the rest unchanged), so a data script can evaluate exactly the weights
    it stores."""
    if not isinstance(tensors, Mapping):
        raise TypeError(f"tensors must be a mapping of names to tensors, got {type(tensors).__name__}")
    for k, t in tensors.items():
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"tensor {k!r} is {type(t).__name__}, expected a torch.Tensor")
    q, _, _ = _quantize_int8(tensors)
    return _dequantize(q, "int8_roundtrip")


def _write_weights(tensors: Mapping[str, torch.Tensor], w_path: Path, label: str) -> None:
    """Write ``tensors`` to ``w_path`` atomically, readable like any other file the umask allows (safetensors
    creates its file with mode 600, which a shared checkout or a web server cannot read)."""
    from safetensors.torch import save_file

    tmp = w_path.with_suffix(".safetensors.tmp")
    # one metadata key only: safetensors writes a hash map, whose order of several keys varies from run to run
    save_file(dict(tensors), str(tmp), metadata={"checkpoint": label})
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)
    os.replace(tmp, w_path)


def _weights_record(w_path: Path, tensors: Mapping[str, torch.Tensor], quantized: dict | None) -> dict[str, Any]:
    """The manifest's ``weights`` entry for the file just written."""
    rec = {"file": w_path.name, "sha256": sha256_file(w_path), "bytes": w_path.stat().st_size,
           "tensors": len(tensors), "dtypes": sorted({str(t.dtype).removeprefix("torch.") for t in tensors.values()})}
    if quantized is not None:
        rec["quantized"] = quantized
    return rec


def save(
    slug: str,
    name: str,
    model_or_tensors: nn.Module | Mapping[str, Any],
    *,
    config: Mapping[str, Any],
    metrics: Mapping[str, Any],
    history: Any = None,
    seed: int | Sequence[int] | None = None,
    steps: int | None = None,
    wall_seconds: float | None = None,
    sources: Sequence[str | os.PathLike] = (),
    module: str | None = None,
    dtype: torch.dtype | None = None,
    extra: Mapping[str, Any] | None = None,
    root: str | os.PathLike | None = None,
    quantize: str | None = None,
) -> Path:
    """Write ``<root>/<slug>/<name>.safetensors`` and its manifest ``<name>.json``; returns the manifest's path.

    ``model_or_tensors``: a module (its ``state_dict``), a mapping ``key -> tensor``, or ``key -> module`` (keys
    become ``key.<param>``). ``config``, ``metrics`` and ``extra`` must be JSON-serializable. ``history``: a
    :class:`helpers.train.History`, or a mapping ``curve name -> per-step values | (step, value) pairs | History``;
    every curve is stored with at most :data:`MAX_POINTS` points. ``dtype`` (e.g. ``torch.float16``) casts floating
    tensors to save space. ``sources``: the files whose hash marks the checkpoint stale when they change (the
    chapter's module and the script). ``module``: the chapter module whose ``checkpoint_config(name)`` gives the
    config its default parameters ask for. ``quantize="int8"`` stores every floating tensor of >= 2 dims and at
    least :data:`QUANTIZE_MIN_NUMEL` values as int8 with a float32 scale per row (:func:`load` dequantizes them).
    The weights file is byte-identical for identical tensors.
    """

    w_path, m_path = paths(slug, name, root)
    V.instance("config", config, Mapping)
    V.instance("metrics", metrics, Mapping)
    if seed is not None:
        seed = [V.seed("seed", s) for s in seed] if isinstance(seed, Sequence) else V.seed("seed", seed)
    steps = V.optional(V.integer, "steps", steps, min=0)
    wall_seconds = V.optional(V.nonnegative, "wall_seconds", wall_seconds)
    V.optional(V.instance, "module", module, str)
    V.optional(V.instance, "dtype", dtype, torch.dtype)
    if dtype is not None and not dtype.is_floating_point:
        raise ValueError(f"dtype must be a floating dtype (e.g. torch.float16), got {dtype}")
    V.optional(V.instance, "extra", extra, Mapping)
    if quantize not in (None, "int8"):
        raise ValueError(f"quantize must be None or 'int8', got {quantize!r}")
    tensors = _tensors(model_or_tensors, dtype)
    quantized = None
    if quantize == "int8":
        tensors, count, err = _quantize_int8(tensors)
        quantized = {"scheme": _SCHEME, "tensors": count, "max_abs_error": err}
    manifest = {
        "format": FORMAT,
        "slug": slug,
        "name": name,
        "module": module,
        "command": rebuild_command(slug, name),
        "config": normalize(dict(config)),
        "seed": seed,
        "steps": steps,
        "wall_seconds": None if wall_seconds is None else round(wall_seconds, 1),
        "machine": {
            "cores": os.cpu_count(),
            "torch_threads": torch.get_num_threads(),
            "torch": torch.__version__,
            "python": platform.python_version(),
            "platform": platform.platform(terse=True),
        },
        "metrics": normalize(dict(metrics)),
        "history": _curves(history),
        "extra": normalize(dict(extra or {})),
        "source": source_hash(sources) if sources else {"files": {}, "hash": None},
    }
    w_path.parent.mkdir(parents=True, exist_ok=True)
    _write_weights(tensors, w_path, f"{slug}/{name}")
    manifest["weights"] = _weights_record(w_path, tensors, quantized)
    m_path.write_text(_manifest_text(manifest))
    return m_path


def load_manifest(slug: str, name: str, root: str | os.PathLike | None = None) -> dict[str, Any]:
    """Read and sanity-check a manifest (it must exist, parse, and name this slug and checkpoint)."""
    _, m_path = paths(slug, name, root)
    cmd = rebuild_command(slug, name)
    if root is None and _remote():
        m_path = _download(f"{slug}/{m_path.name}")
    if not m_path.is_file():
        raise CheckpointError(f"checkpoint manifest {m_path} is missing; rebuild it with: {cmd}")
    try:
        manifest = json.loads(m_path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CheckpointError(f"checkpoint manifest {m_path} is not valid JSON ({e}); rebuild it with: {cmd}") from None
    if not isinstance(manifest, dict) or "config" not in manifest or "weights" not in manifest:
        raise CheckpointError(f"{m_path} is not a checkpoint manifest (no config/weights); rebuild it with: {cmd}")
    if manifest.get("slug") != slug or manifest.get("name") != name:
        raise CheckpointError(
            f"{m_path} is the manifest of {manifest.get('slug')!r}/{manifest.get('name')!r}, not {slug!r}/{name!r}; "
            f"rebuild it with: {cmd}")
    return manifest


def load(
    slug: str, name: str, *, config: Mapping[str, Any], root: str | os.PathLike | None = None,
    check_sources: bool = True,
) -> Checkpoint:
    """Load a checkpoint written by :func:`save`, after checking it (never trains).

    Raises :class:`CheckpointError` when a file is missing, the manifest is another checkpoint's, or the weights'
    sha256 differs from the manifest's; :class:`ConfigMismatch` when ``config`` differs from the manifest's
    config, naming the differing keys. Warns (:class:`StaleCheckpointWarning`) when a source file changed since.
    """
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    w_path, m_path = paths(slug, name, root)
    V.instance("config", config, Mapping)
    V.boolean("check_sources", check_sources)
    cmd = rebuild_command(slug, name)
    manifest = load_manifest(slug, name, root)
    diff = diff_config(config, manifest["config"])
    if diff:
        want, have = normalize(dict(config)), manifest["config"]
        shown = "; ".join(f"{k}: asked {_get(want, k)!r}, stored {_get(have, k)!r}" for k in diff[:8])
        raise ConfigMismatch(
            f"checkpoint {slug}/{name} was trained with another config; differing keys: {', '.join(diff)} ({shown}). "
            f"Rebuild it with: {cmd}")
    if root is None and _remote():
        w_path = _download(f"{slug}/{w_path.name}")
    if not w_path.is_file():
        raise CheckpointError(f"checkpoint weights {w_path} are missing; rebuild them with: {cmd}")
    sha = sha256_file(w_path)
    if sha != manifest["weights"].get("sha256"):
        raise CheckpointError(
            f"checkpoint weights {w_path} do not match their manifest (sha256 {sha[:12]}… != "
            f"{str(manifest['weights'].get('sha256'))[:12]}…, {w_path.stat().st_size} bytes vs "
            f"{manifest['weights'].get('bytes')}): the file is truncated, edited or from another run; "
            f"rebuild it with: {cmd}")
    try:
        tensors = load_file(str(w_path))
    except SafetensorError as e:  # pragma: no cover - the hash check catches corruption first
        raise CheckpointError(f"cannot read {w_path}: {e}; rebuild it with: {cmd}") from None
    tensors = _dequantize(tensors, f"checkpoint {slug}/{name}")
    if check_sources:
        _check_sources(manifest, slug, name)
    return Checkpoint(tensors=tensors, manifest=manifest)


def require_seeds(ckpt: Checkpoint | Mapping[str, Any], seeds: Sequence[int], *, key: str = "seeds") -> list[int]:
    """Check that a checkpoint stores the models of every seed in ``seeds``; returns ``seeds`` as a list of ints.

    ``ckpt`` is a :class:`Checkpoint` or its manifest; the stored seeds are ``manifest["config"][key]``. A default
    run asked for seeds the checkpoint does not hold (``SEED=n`` outside them) gets a :class:`CheckpointError` that
    names the stored seeds and the two ways out, instead of a ``KeyError`` or a state-dict error deep in a cell.
    """
    manifest = ckpt.manifest if isinstance(ckpt, Checkpoint) else ckpt
    V.instance("ckpt", manifest, Mapping)
    V.instance("key", key, str)
    want = V.sequence("seeds", seeds, of=lambda n, x: V.integer(n, x), min_len=1)
    stored = manifest.get("config", {}).get(key) if isinstance(manifest.get("config"), Mapping) else None
    if not isinstance(stored, Sequence) or isinstance(stored, str):
        raise CheckpointError(f"the manifest's config has no list {key!r} of stored seeds; got {stored!r}")
    missing = [int(s) for s in want if int(s) not in {int(x) for x in stored}]
    if missing:
        slug, name = manifest.get("slug", "?"), manifest.get("name", "?")
        first = int(stored[0]) if stored else 0
        raise CheckpointError(
            f"checkpoint {slug}/{name} stores the models of seeds {list(stored)}; seed(s) {missing} are not in it. "
            f"The default run evaluates stored models: run it with SEED={first} (or omit SEED), or use QUICK=1, "
            f"which trains small models live for any seed.")
    return [int(s) for s in want]


def _verified(slug: str, name: str, why: Any, date: Any, root: str | os.PathLike | None, say: str,
              refuse: str) -> tuple[Path, Path, dict[str, Any]]:
    """Shared by :func:`restamp` and :func:`compress`: validate ``why``/``date``, load the manifest and check
    that the weights on disk are the ones it records."""
    V.instance("why", why, str)
    if len(why.strip()) < 20:
        raise ValueError(f"why must say in a sentence {say} (>= 20 characters), got {why!r}")
    V.optional(V.instance, "date", date, str)
    w_path, m_path = paths(slug, name, root)
    manifest = load_manifest(slug, name, root)
    if not w_path.is_file() or sha256_file(w_path) != manifest["weights"].get("sha256"):
        raise CheckpointError(f"checkpoint weights {w_path} are missing or do not match their manifest; "
                              f"{refuse}. Rebuild with: {rebuild_command(slug, name)}")
    return w_path, m_path, manifest


def _new_source_hash(files: list[str], old_hash: Any, add_sources: Any, what: str) -> dict[str, Any]:
    """Shared by :func:`restamp` and :func:`restamp_record`: ``files`` plus ``add_sources`` hashed anew; refuses
    a bad ``add_sources``, a missing file, or sources whose combined hash is still ``old_hash``."""
    if not isinstance(add_sources, (list, tuple)):
        raise TypeError(f"add_sources must be a list of file paths, got {type(add_sources).__name__}")
    files = list(files)
    for extra_file in add_sources:
        V.instance("add_sources[i]", extra_file, (str, os.PathLike))
        rel = _rel(Path(extra_file).resolve())
        if rel not in files:
            files.append(rel)
    resolved = [Path(f) if Path(f).is_absolute() else REPO / f for f in files]
    missing = [f for f, p in zip(files, resolved) if not p.is_file()]
    if missing:
        raise CheckpointError(f"source file(s) {missing} of {what} are missing; cannot restamp")
    new = source_hash(resolved)
    if new["hash"] == old_hash:
        raise ValueError(f"the sources of {what} are unchanged; nothing to restamp")
    return new


def _next_key(record: Mapping[str, Any], base: str) -> str:
    """``base``, else ``base_2``, ``base_3``, ...: the first key not yet in ``record`` (restamp history)."""
    key, n = base, 1
    while key in record:
        n += 1
        key = f"{base}_{n}"
    return key


def restamp(slug: str, name: str, why: str, *, root: str | os.PathLike | None = None,
            date: str | None = None, add_sources: Sequence[str | os.PathLike] = ()) -> Path:
    """Record the current hashes of a checkpoint's source files without retraining; returns the manifest's path.

    For an edit that leaves every trained tensor as it was (an evaluation helper added to the chapter's module, a
    comment): the manifest keeps its weights and gains ``extra.restamped`` (then ``restamped_2``, ...) with the
    date, the old source hashes and ``why``, the evidence that nothing trained changed (e.g. "git diff shows
    additions only", "a retrained model matches the stored one"). Refuses when the weights do not match their
    manifest, a source file is missing, or no source changed. ``add_sources`` adds files the training also read
    that the manifest did not list (e.g. a helpers module its script imports); the old list is kept in the record.
    """
    w_path, m_path, manifest = _verified(slug, name, why, date, root,
                                         "why the weights are still valid", "restamping cannot vouch for them")
    old = manifest.get("source") or {"files": {}, "hash": None}
    if not old.get("files") and not add_sources:
        raise CheckpointError(f"checkpoint {slug}/{name} records no source files; nothing to restamp")
    new = _new_source_hash(list(old.get("files", {})), old.get("hash"), add_sources, f"checkpoint {slug}/{name}")
    extra = manifest.setdefault("extra", {})
    extra[_next_key(extra, "restamped")] = {"date": date or datetime.date.today().isoformat(), "old_source": old,
                                            "why": why.strip()}
    manifest["source"] = new
    m_path.write_text(_manifest_text(manifest))
    return m_path


def restamp_record(path: str | os.PathLike, why: str, *, date: str | None = None,
                   add_sources: Sequence[str | os.PathLike] = ()) -> Path:
    """Record the current source hashes of a records-only JSON file (no weights) without re-running it.

    The companion of :func:`restamp` for a data script's measurements (a probe, a sweep): the file's ``source``
    (as :func:`source_hash` writes it) becomes the current hashes, and the file gains ``source_restamped`` (then
    ``source_restamped_2``, ...) with the date, ``why`` and ``run_with``, the file hashes it was produced with.
    Refuses a file that is not a JSON object with a ``source`` listing files, a missing source file, a ``why``
    under 20 characters, or sources that did not change. Returns the path.
    """
    path = V.existing_file("record", path)
    V.instance("why", why, str)
    if len(why.strip()) < 20:
        raise ValueError(f"why must say in at least 20 characters why the measurements still hold, got {why!r}")
    try:
        record = json.loads(path.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CheckpointError(f"record {path} is not valid JSON ({e}); cannot restamp") from None
    old = record.get("source") if isinstance(record, dict) else None
    if not isinstance(old, dict) or not isinstance(old.get("files"), dict) or not old["files"]:
        raise CheckpointError(f"record {path} has no 'source' with files (as source_hash writes it); "
                              f"nothing to restamp")
    new = _new_source_hash(list(old["files"]), old.get("hash"), add_sources, f"record {path}")
    record[_next_key(record, "source_restamped")] = {"date": date or datetime.date.today().isoformat(),
                                                     "why": why.strip(), "run_with": dict(old["files"])}
    record["source"] = new
    path.write_text(_manifest_text(record))
    return path


def _to_float16(tensors: Mapping[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], int, float]:
    """float32/float64 tensors -> float16; returns (tensors, count, max abs change)."""
    out: dict[str, torch.Tensor] = {}
    count, err = 0, 0.0
    for k, t in tensors.items():
        if t.dtype not in (torch.float32, torch.float64):
            out[k] = t
            continue
        h = t.to(torch.float16)
        if not torch.isfinite(h[torch.isfinite(t)]).all():
            raise ValueError(f"tensor {k!r} has values outside float16's range (|x| > 65504); keep it as it is")
        err = max(err, float((h.double() - t.double()).abs().max())) if t.numel() else err
        out[k] = h.contiguous()
        count += 1
    return out, count, err


def compress(slug: str, name: str, why: str, *, quantize: str = "int8", root: str | os.PathLike | None = None,
             date: str | None = None) -> Path:
    """Re-store a committed checkpoint's weights smaller without retraining; returns the manifest.

    ``quantize="int8"``: large floating matrices as int8 with a scale per row (see :func:`save`; about a quarter of
    float32); ``quantize="float16"``: every float32/float64 tensor cast to float16 (half the size, a relative
    change of at most 2^-11 per weight, far below int8's). For a checkpoint over the size budget: the manifest keeps
    config, curves and sources, and gains ``extra.compressed`` with the date, ``why``, the scheme, the old sha256
    and size, and the largest absolute change of any weight. A chapter must re-measure its numbers afterwards.
    Refuses weights that do not match their manifest, are already quantized, or have nothing to convert.
    """
    from safetensors.torch import load_file

    if quantize not in ("int8", "float16"):
        raise ValueError(f"quantize must be 'int8' or 'float16', got {quantize!r}")
    w_path, m_path, manifest = _verified(slug, name, why, date, root, "why the checkpoint is compressed",
                                         "they cannot be converted")
    if manifest["weights"].get("quantized"):
        raise ValueError(f"checkpoint {slug}/{name} is already quantized ({manifest['weights']['quantized']})")
    old = {"sha256": manifest["weights"]["sha256"], "bytes": manifest["weights"].get("bytes")}
    if quantize == "int8":
        tensors, count, err = _quantize_int8(load_file(str(w_path)))
        quantized: dict | None = {"scheme": _SCHEME, "tensors": count, "max_abs_error": err}
        scheme = _SCHEME
    else:
        tensors, count, err = _to_float16(load_file(str(w_path)))
        quantized, scheme = None, "float16 (every float32/float64 tensor cast)"
    if count == 0:
        raise ValueError(f"checkpoint {slug}/{name} has no tensor to convert to {quantize}")
    _write_weights(tensors, w_path, f"{slug}/{name}")
    manifest["weights"] = _weights_record(w_path, tensors, quantized)
    manifest.setdefault("extra", {})["compressed"] = {
        "date": date or datetime.date.today().isoformat(), "why": why.strip(), "scheme": scheme,
        "tensors": count, "old_weights": old, "max_abs_change": err}
    m_path.write_text(_manifest_text(manifest))
    return m_path


def _get(d: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        if not isinstance(d, dict) or part not in d:
            return "<missing>"
        d = d[part]
    return d


def _check_sources(manifest: Mapping[str, Any], slug: str, name: str) -> None:
    changed = []
    for rel, sha in manifest.get("source", {}).get("files", {}).items():
        p = Path(rel) if Path(rel).is_absolute() else REPO / rel
        if not p.is_file():
            continue  # e.g. an installed package without the scripts: nothing to compare
        if sha256_file(p) != sha:
            changed.append(rel)
    if changed:
        warnings.warn(
            f"checkpoint {slug}/{name} may be stale: {', '.join(changed)} changed since it was made; "
            f"rebuild it with: {rebuild_command(slug, name)}", StaleCheckpointWarning, stacklevel=3)


def plot_history(
    manifest: Mapping[str, Any], keys: Sequence[str] | None = None, ax: Any = None, *, logy: bool = False,
    title: str | None = None,
) -> Any:
    """Plot a manifest's training curves (all, or those named in ``keys``, or those matching a key as a prefix);
    returns the matplotlib axes."""
    import matplotlib.pyplot as plt

    V.instance("manifest", manifest, Mapping)
    hist = manifest.get("history")
    if not isinstance(hist, Mapping) or not hist:
        raise ValueError("manifest has no training curves (its 'history' is empty or missing)")
    if keys is None:
        chosen = list(hist)
    else:
        keys = V.sequence("keys", keys, min_len=1, of=lambda n, k: V.instance(n, k, str))
        chosen = [k for k in hist if any(k == q or k.startswith(q) for q in keys)]
        if not chosen:
            raise ValueError(f"keys {keys} match no curve; curves: {sorted(hist)[:12]}")
    if ax is None:
        _, ax = plt.subplots(figsize=(6.4, 3.4))
    for k in chosen:
        c = hist[k]
        y = np.asarray(c["value"], dtype=float)
        (line,) = ax.plot(c["step"], y, label=k, lw=1)
        if "min" in c and "max" in c:  # a binned curve: shade each bin's range (spikes stay visible)
            ax.fill_between(c["step"], c["min"], c["max"], color=line.get_color(), alpha=0.2, lw=0)
    if logy:
        ax.set_yscale("log")
    ax.set(xlabel="step", ylabel="value",
           title=title or f"{manifest.get('slug')}/{manifest.get('name')}: training curves")
    if len(chosen) <= 12:
        ax.legend(fontsize=7)
    return ax

