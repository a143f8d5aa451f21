"""Exploratory diagnosis (issue #69, round 4): where does the filled-conditioning propagator lose to flow warp +
biharmonic inpaint on its *own training clips'* disoccluded pixels, and is that target learnable from the inputs?

Measured on the stored ``propagators_filled`` (width 16, 3 seeds) exactly as the chapter's
``filled_fits_training_clips`` condition rebuilds clips (first 6 training clips, 3 uniform keyframes, 8 Euler
steps, sampler seed ``1000 * seed``), and written to ``diagnose_fit.json``. Nothing here is a claim; it informs
the design of ``propagators_onestep`` (``make_propagators_onestep.py``), registered after it.

* **regions:** disoccluded pixels (no anchor showed them, true motion) split into those in an estimated hole (no
  warp trusted; filled conditioning = inpainting there) and those the estimated flow wrongly trusts; hole pixels
  by distance to the nearest trusted pixel and by the size of their connected hole (``< 30`` px or larger);
* **sampler:** the disoccluded PSNR of the network's clean-frame estimate at each of the 8 Euler steps, of the
  final sample, and of the mean of 4 samples (variance share of a sample's error);
* **oracles:** which share of the disoccluded pixels any anchor (not only the two nearest) or any other source
  frame shows (true motion), i.e. how much of the target is in the clip at all; on the rest only a prior helps;
* **training-like draws:** the clean-frame prediction at fixed noise levels τ on estimated holes against
  inpainting, keyframes drawn as in training.

Run: ``.venv/bin/python data/11_anchor_video_edit/diagnose_fit.py`` (seconds on one core). ``--build DIR NAME``
diagnoses a one-seed float32 build of checkpoint NAME in DIR instead (its seed only), into ``--out``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch
from scipy.ndimage import distance_transform_edt, label

from helpers import anchor_video_edit as A
from helpers import checkpoints, repro

SLUG = "11_anchor_video_edit"
HERE = Path(__file__).resolve()
N_CLIPS, STEPS, K = 6, 8, 4


def sampler(model, anchors, motion, seed, fill=True):
    """A.propagate with the clean-frame estimate of every step kept."""
    T = motion.T
    cond = A.anchor_condition(anchors, motion, fill_holes=fill)
    keys = sorted(anchors)
    An = torch.stack([anchors.get(t, torch.zeros(3, *motion.bwd.shape[-2:])) for t in range(T)])
    eps = torch.randn(An.shape, generator=torch.Generator().manual_seed(seed))
    rest = [t for t in range(T) if t not in anchors]
    x, est = eps.clone(), []
    with torch.no_grad():
        for i in range(STEPS):
            tau = i / STEPS
            x[keys] = (1 - tau) * eps[keys] + tau * An[keys]
            x1 = model(A._inputs(x, cond, motion, torch.full((T,), tau), rest))
            full = An.clone()
            full[rest] = x1.clamp(0, 1)
            est.append(full)
            x[rest] = x[rest] + (x1 - x[rest]) / (1 - tau) / STEPS
    x[keys] = An[keys]
    return x.clamp(0, 1), est


def oracle_cover(clip, keys, frames):
    """(T, H, W): pixels that some frame in ``frames`` shows (true motion)."""
    T = clip.frames.shape[0]
    out = torch.zeros(T, *clip.frames.shape[-2:], dtype=torch.bool)
    for t in range(T):
        for k in frames:
            if k != t:
                out[t] |= A._warp_chain(clip.frames[k], clip, k, t)[1]
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", nargs=2, metavar=("DIR", "NAME"))
    ap.add_argument("--out", default=str(HERE.with_name("diagnose_fit.json")))
    args = ap.parse_args()
    repro.set_threads(1)
    t0 = time.time()
    cfg = A.checkpoint_config("propagators_filled")
    ck = checkpoints.load(SLUG, "propagators_filled", config=cfg)
    if args.build:
        from safetensors.torch import load_file

        man = json.loads(checkpoints.paths(SLUG, args.build[1], args.build[0])[1].read_text())
        cfg = dict(cfg, width=man["config"]["width"], seeds=man["config"]["seeds"],
                   gate=man["config"].get("gate", False))
        ck.tensors = load_file(str(checkpoints.paths(SLUG, args.build[1], args.build[0])[0]))
    clips, mots = A.training_clips(dict(cfg, n_train_clips=N_CLIPS))
    T = cfg["T"]
    keys = A.uniform_keyframes(T, 3)
    rest = torch.tensor([t not in keys for t in range(T)])[:, None, None]
    acc: dict = {}

    def add(seed, name, region, v, ref, m):
        if m.any():
            a = acc.setdefault(seed, {}).setdefault(region, {}).setdefault(name, [0.0, 0])
            a[0] += (v - ref).pow(2).mean(1)[m].sum().item()
            a[1] += int(m.sum())

    tau_rows: dict = {}
    for s in cfg["seeds"]:
        model = A.Propagator(cfg["width"], gate=cfg.get("gate", False))
        model.load_state_dict({k.split(".", 1)[1]: v for k, v in ck.tensors.items() if k.startswith(f"{s}.")})
        model.eval()
        for c, mo in zip(clips, mots):
            an = {k: c.frames[k] for k in keys}
            dis = ~A.visibility(c, keys) & rest
            cond = A.anchor_condition(an, mo)
            hole = (cond[:, 6:8].sum(1) == 0) & rest[:, :, :]
            inp = A.flow_warp_propagate(an, mo, inpaint=True)
            xs = []
            for j in range(K):
                x, est = sampler(model, an, mo, 1000 * s + j)
                xs.append(x)
                if j == 0:
                    sample0, est0 = x, est
            mean = torch.stack(xs).mean(0)
            d = torch.tensor(np.stack([distance_transform_edt(h) for h in hole.numpy()]))
            size = torch.zeros_like(d)
            for t in range(T):
                lab, n = label(hole[t].numpy())
                for i in range(1, n + 1):
                    size[t][torch.tensor(lab == i)] = float((lab == i).sum())
            any_anchor = oracle_cover(c, keys, keys) & dis
            any_frame = oracle_cover(c, keys, range(T)) & dis
            regions = {"dis": dis, "dis_hole": dis & hole, "dis_trusted": dis & ~hole,
                       "hole_d1": dis & (d == 1), "hole_d2": dis & (d > 1) & (d <= 2),
                       "hole_d3-4": dis & (d > 2) & (d <= 4), "hole_d5+": dis & (d > 4),
                       "hole_small<30px": dis & hole & (size < 30), "hole_large>=30px": dis & hole & (size >= 30),
                       "dis_shown_by_any_anchor": any_anchor, "dis_shown_by_any_frame": any_frame}
            for region, m in regions.items():
                add(s, "inpaint", region, inp, c.frames, m)
                add(s, "sample", region, sample0, c.frames, m)
                add(s, f"mean{K}", region, mean, c.frames, m)
                for i, e in enumerate(est0):
                    add(s, f"est_step{i}", region, e, c.frames, m)
            # training-like draws: clean-frame prediction at fixed tau on estimated holes
            rng = np.random.default_rng(s)
            g = torch.Generator().manual_seed(s)
            for _ in range(2):
                m_ = int(rng.integers(1, 5))
                ks = A.uniform_keyframes(T, m_) if rng.random() < 0.5 else sorted(
                    int(k) for k in rng.choice(T, m_, replace=False))
                a2 = {k: c.frames[k] for k in ks}
                cf = A.anchor_condition(a2, mo, fill_holes=True)
                r_ = [t for t in range(T) if t not in ks]
                h2 = cf[r_, 6:8].sum(1) == 0
                base = A._base(cf[r_])
                for tau in (0.0, 0.25, 0.5, 0.75, 0.9):
                    xn = (1 - tau) * torch.randn(c.frames.shape, generator=g) + tau * c.frames
                    with torch.no_grad():
                        p = model(A._inputs(xn, cf, mo, torch.full((T,), tau), r_))
                    row = tau_rows.setdefault(f"{s}/{tau}", [0.0, 0.0, 0])
                    row[0] += (p - c.frames[r_]).pow(2).mean(1)[h2].sum().item()
                    row[1] += (base - c.frames[r_]).pow(2).mean(1)[h2].sum().item()
                    row[2] += int(h2.sum())
        print(f"seed {s} done ({time.time() - t0:.0f} s)", flush=True)

    out: dict = {"what": __doc__.split("\n\n")[0], "n_clips": N_CLIPS, "keys": keys, "per_seed": {},
                 "model": f"{args.build[1]} (one-seed build)" if args.build else "propagators_filled (stored)"}
    for s, regs in acc.items():
        res = {}
        for region, meth in regs.items():
            n = meth["inpaint"][1]
            db = {k: 10 * np.log10(v[1] / max(v[0], 1e-12)) for k, v in meth.items()}
            res[region] = {"n": n, "inpaint_db": round(db["inpaint"], 3),
                           **{f"{k}_minus_inpaint_db": round(v - db["inpaint"], 3) for k, v in db.items()
                              if k != "inpaint"}}
        out["per_seed"][s] = res
    out["tau_hole_mse"] = {k: {"model": v[0] / v[2], "inpaint": v[1] / v[2], "n": v[2]} for k, v in tau_rows.items()}
    out["wall_seconds"] = round(time.time() - t0, 1)
    path = Path(args.out)
    path.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
