"""Chapter 10_transit_lm: reading the checkpoint of the recipe registered on 2026-12-06 (``models_wsd``, issue #68).

Kept apart from :mod:`helpers.transit_lm` on purpose: that module's source hash is stamped into the ``models_wsd``
checkpoint its training jobs write, so it must not change while they run. This module only reads what they write:

* :func:`recipe`: which checkpoint a default run reads (``models_wsd`` when its files are there, else ``models``);
* :func:`curves`: a model's two logged curves (route-token loss by SFT step, training-record exact match), with a
  clear error when the manifest lacks one;
* :func:`conditions`: the two registered conditions of one model, read exactly as
  :func:`helpers.transit_lm.wsd_conditions` defines them, and cross-checked against the reading the data script
  stored (``metrics["route_flat/<arm>/<seed>"]``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from typing import Any

from helpers import checkpoints
from helpers import transit_lm as T
from helpers import validate as V

SLUG = "10_transit_lm"
NAME = "models_wsd"  # the registered recipe's checkpoint
OLD = "models"  # the previous recipe's checkpoint
ARMS = ("cpt", "sft")
CURVES = ("route_loss", "train_exact")


def available(root: str | os.PathLike | None = None) -> bool:
    """Whether ``models_wsd`` can be read: its manifest and weights lie under the data root (``root``, else
    :func:`helpers.checkpoints.data_dir`), or, outside a checkout (Colab), the registry lists both (they are
    fetched by hash on first use)."""
    if root is not None:
        root = V.existing_dir("root", root)
    w, m = checkpoints.paths(SLUG, NAME, root)
    if w.is_file() and m.is_file():
        return True
    if root is None and not os.environ.get("HELPERS_DATA") and not checkpoints.in_checkout():
        listed = checkpoints.read_registry()[1]
        return f"{SLUG}/{w.name}" in listed and f"{SLUG}/{m.name}" in listed
    return False


def recipe(quick: bool, root: str | os.PathLike | None = None) -> str:
    """The models a run reads: ``"live"`` in quick mode (tiny models trained in the notebook), else ``models_wsd``
    when :func:`available`, else ``models`` (the previous recipe)."""
    if V.boolean("quick", quick):
        return "live"
    return NAME if available(root) else OLD


def _curve(hist: Mapping, key: str, have: list[str]) -> dict[str, list]:
    if key not in hist:
        raise ValueError(f"the {NAME} manifest has no curve {key!r} (make_wsd.py logs it for every arm and seed); "
                         f"its curves: {have[:12]}")
    c = V.instance(f"history[{key!r}]", hist[key], Mapping)
    if "step" not in c or "value" not in c:
        raise ValueError(f"history[{key!r}] must hold 'step' and 'value' lists, got keys {sorted(c)}")
    steps = V.sequence(f"history[{key!r}]['step']", c["step"], min_len=1,
                       of=lambda n, x: V.integer(n, x, min=0))
    vals = V.sequence(f"history[{key!r}]['value']", c["value"], of=lambda n, x: V.number(n, x))
    if len(vals) != len(steps):
        raise ValueError(f"history[{key!r}] has {len(steps)} steps but {len(vals)} values")
    if any(b <= a for a, b in zip(steps, steps[1:])):
        raise ValueError(f"history[{key!r}]['step'] must increase")
    return {"step": steps, "value": vals}


def _manifest(manifest: Any) -> Mapping:
    V.instance("manifest", manifest, Mapping)
    if manifest.get("name") != NAME:
        raise ValueError(f"manifest must be the {SLUG}/{NAME} checkpoint's, got name {manifest.get('name')!r}")
    if not isinstance(manifest.get("history"), Mapping):
        raise ValueError("manifest has no 'history' of curves")
    return manifest


def curves(manifest: Any, arm: str, seed: int) -> dict[str, dict[str, list]]:
    """The model's logged curves ``{"route_loss": {step, value}, "train_exact": {step, value}}`` (by SFT step) from
    a ``models_wsd`` manifest. Raises ValueError naming a missing or malformed curve."""
    hist = _manifest(manifest)["history"]
    V.one_of("arm", arm, ARMS)
    seed = V.seed("seed", seed)
    have = sorted(hist)
    return {name: _curve(hist, f"{arm}/{seed}/{name}", have) for name in CURVES}


def conditions(manifest: Any, arm: str, seed: int, exact: Any, cfg: dict,
               rtol: float = 1e-9) -> dict[str, tuple[float, str, float, bool]]:
    """The registered conditions of one model (:func:`helpers.transit_lm.wsd_conditions`): the flat one read on the
    manifest's route-token loss curve under ``cfg`` (the checkpoint's config), the fit one on ``exact`` (the exact
    match on the first ``N_FIT_RECORDS`` SFT training records, greedy on the stored weights). The flat reading must
    equal the one the data script stored in ``metrics["route_flat/<arm>/<seed>"]`` (else the stored curve is not
    the curve it read: ValueError)."""
    V.instance("cfg", cfg, dict)
    out = T.wsd_conditions(curves(manifest, arm, seed)["route_loss"], exact, cfg)
    stored = (manifest.get("metrics") or {}).get(f"route_flat/{arm}/{seed}")
    if stored is not None and not math.isclose(out["route_flat"][0], float(stored), rel_tol=rtol, abs_tol=rtol):
        raise ValueError(f"the route-loss curve of {arm}/{seed} reads route_flat {out['route_flat'][0]!r}, the data "
                         f"script stored {stored!r}: the manifest's curve is not the one it read")
    return out


__all__ = ["ARMS", "CURVES", "NAME", "OLD", "SLUG", "available", "conditions", "curves", "recipe"]
