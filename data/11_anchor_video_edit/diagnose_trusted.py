"""Exploratory diagnosis (issue #69, round 5), no training: is the stored ``propagators_filled``'s loss to flow
warp + inpaint on its own training clips specific to the disoccluded pixels the estimated flow wrongly trusts,
or does the generator add error wherever its base is already accurate? And would a border band that the warp
does not trust give a better model-free fill?

On the fit condition's clips (first 6 training clips, 3 uniform keyframes, 8 Euler steps, sampler seed
``1000 * seed``, filled conditioning), per seed of the stored variant, squared errors against the source frames
are pooled by region and written as dB against flow warp + inpaint (positive: better than it):

* **regions** (non-anchor frames): disoccluded (no anchor showed it, true motion) / visible; split by the
  estimated holes (no warp trusted): in a hole, 1 px outside one, 2 px outside, farther;
* **methods:** the stored variant's sample; its clean-frame estimate at each of the 8 Euler steps (the sample is
  the last one); biharmonic inpainting of the holes dilated by 1 and 2 px (a border band the warp does not
  trust; model-free, the same for every seed).

It informed ``propagators_gated`` (``make_propagators_onestep.py --name propagators_gated``), registered after
it. Run: ``.venv/bin/python data/11_anchor_video_edit/diagnose_trusted.py`` (about a minute on one core).
``--build DIR NAME`` diagnoses a one-seed float32 build of checkpoint NAME in DIR instead (its seed only), into
``--out``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from helpers import anchor_video_edit as A
from helpers import checkpoints, repro

SLUG = "11_anchor_video_edit"
HERE = Path(__file__).resolve()
N_CLIPS, STEPS = 6, 8


def _diagnose_fit():
    spec = importlib.util.spec_from_file_location("diagnose_fit", HERE.with_name("diagnose_fit.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def dilate(hole: torch.Tensor, r: int) -> torch.Tensor:
    return F.max_pool2d(hole[:, None].float(), 2 * r + 1, stride=1, padding=r)[:, 0] > 0


def band_inpaint(base: torch.Tensor, hole: torch.Tensor, keys: list[int]) -> torch.Tensor:
    """Biharmonic inpainting of each non-anchor frame's ``hole`` pixels from the others."""
    from skimage.restoration import inpaint_biharmonic

    out = base.clone()
    for t in range(len(out)):
        if t in keys or not hole[t].any() or hole[t].all():
            continue
        img = inpaint_biharmonic(base[t].permute(1, 2, 0).double().numpy(), hole[t].numpy(), channel_axis=-1)
        out[t] = torch.tensor(img, dtype=out.dtype).permute(2, 0, 1).clamp(0, 1)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(HERE.with_name("diagnose_trusted.json")))
    ap.add_argument("--build", nargs=2, metavar=("DIR", "NAME"))
    args = ap.parse_args()
    repro.set_threads(1)
    t0 = time.time()
    dg = _diagnose_fit()
    cfg = A.checkpoint_config("propagators_filled")
    ck = checkpoints.load(SLUG, "propagators_filled", config=cfg)
    clips, mots = A.training_clips(dict(cfg, n_train_clips=N_CLIPS))
    T = cfg["T"]
    keys = A.uniform_keyframes(T, 3)
    rest = torch.tensor([t not in keys for t in range(T)])[:, None, None]
    acc: dict = {}

    def add(key, region, name, v, ref, m):
        if m.any():
            a = acc.setdefault(key, {}).setdefault(region, {}).setdefault(name, [0.0, 0])
            a[0] += (v - ref).pow(2).mean(1)[m].sum().item()
            a[1] += int(m.sum())

    tensors, model_name = ck.tensors, "propagators_filled (stored)"
    if args.build:
        from safetensors.torch import load_file

        w_path, m_path = checkpoints.paths(SLUG, args.build[1], args.build[0])
        man = json.loads(m_path.read_text())
        cfg = dict(cfg, width=man["config"]["width"], seeds=man["config"]["seeds"],
                   gate=man["config"].get("gate", False))
        tensors, model_name = load_file(str(w_path)), f"{args.build[1]} (one-seed build)"
    models = {}
    for s in cfg["seeds"]:
        m = A.Propagator(cfg["width"], gate=cfg.get("gate", False))
        m.load_state_dict({k.split(".", 1)[1]: v.float() for k, v in tensors.items() if k.startswith(f"{s}.")})
        models[s] = m.eval()
    for c, mo in zip(clips, mots):
        an = {k: c.frames[k] for k in keys}
        dis = ~A.visibility(c, keys) & rest
        vis = ~dis & rest
        cond = A.anchor_condition(an, mo)
        hole = (cond[:, 6:8].sum(1) == 0) & rest
        out1 = dilate(hole, 1) & ~hole & rest
        out2 = dilate(hole, 2) & ~hole & rest & ~out1
        far = rest & ~dilate(hole, 2)
        regions = {}
        for nm, m in (("dis", dis), ("vis", vis)):
            regions.update({nm: m, f"{nm}_hole": m & hole, f"{nm}_out1": m & out1, f"{nm}_out2": m & out2,
                            f"{nm}_far": m & far})
        inp = A.flow_warp_propagate(an, mo, inpaint=True)
        base = A._base(cond)
        bands = {f"band{r}_inpaint": band_inpaint(base, dilate(hole, r) & rest, keys) for r in (1, 2)}
        samples = {s: dg.sampler(models[s], an, mo, 1000 * s, fill=True) for s in models}
        for region, m in regions.items():
            add("model_free", region, "inpaint", inp, c.frames, m)
            for nm, v in bands.items():
                add("model_free", region, nm, v, c.frames, m)
            for s, (x, est) in samples.items():
                add(str(s), region, "inpaint", inp, c.frames, m)
                add(str(s), region, "sample", x, c.frames, m)
                for i, e in enumerate(est):
                    add(str(s), region, f"est_step{i}", e, c.frames, m)
    res: dict = {}
    for key, regs in acc.items():
        res[key] = {}
        for region, meth in regs.items():
            db = {k: 10 * np.log10(v[1] / max(v[0], 1e-12)) for k, v in meth.items()}
            res[key][region] = {"n": meth["inpaint"][1], "inpaint_db": round(db["inpaint"], 3),
                                **{f"{k}_minus_inpaint_db": round(v - db["inpaint"], 3) for k, v in db.items()
                                   if k != "inpaint"}}
    out = {"what": __doc__.split("\n\n")[0], "model": model_name, "n_clips": N_CLIPS,
           "keys": keys, "steps": STEPS, "model_free": res.pop("model_free"), "per_seed": res,
           "wall_seconds": round(time.time() - t0, 1)}
    Path(args.out).write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
