"""Records of chapter 04_tree_rope's first byte-corpus arms (``arms``: d = 32, 2 heads, 8 rotary pairs split 3/3/2,
600 cosine steps, ~0.3 epoch; ten arms, the four claim arms x seeds 0-2, the others seed 0), written so that their
weights can leave data/ (#62, session 28). The perplexity claims read ``arms2`` (d = 64, 6000 WSD steps) since
session 28; what the chapter still shows of ``arms`` is here: the ablation and cross arms' evaluation, the
d = 32 claim arms' numbers for the "what changed" comparison, and the diagnostics that needed the weights.

What it writes, ``data/04_tree_rope/arms_records.json`` (records only, no weights), per arm-seed ``"ARM/SEED"``:

* ``metrics``: the manifest's (final held-out loss, drop over the last quarter, tail loss per length) plus
  ``plateau`` (``train.plateau`` of the held-out curve: the end of a cosine schedule, as the claims read it then);
* ``eval_tail``: the stored per-window tail losses (lengths x windows, the float16 values exactly), the evaluation
  every paired comparison of the chapter reads; ``eval_whole``: the whole-window loss per length (mean);
* ``window_use``: tail perplexity of bytes 24-31 of 512 held-out windows of the training length with the last
  4 / 8 / 16 / 32 keys visible, and ``tr.context_gain`` of it (the chapter's context condition);
* ``keys``: tail perplexity at the end of the longest windows with the last 4 ... 64 keys visible (16 windows);
  ``attention_last``: the last layer's attention by key distance 0..63 there; ``far_mass``: per layer, the
  attention of the last 32 queries on keys >= 32 back (2 windows of the longest length) -- the diagnostics of the
  chapter's section 4, as it computed them from the weights.

Plus the source checkpoint's config, seeds, wall seconds, seconds per run and the sha256 of its two files.

Run from the repository root while ``data/04_tree_rope/arms.safetensors`` + ``arms.json`` are present:
``.venv/bin/python data/04_tree_rope/make_arms_records.py`` (22 s on one thread). Once they are removed,
``make_arms.py`` rebuilds them first (29 min). ``--tiny``: trains make_arms.py's tiny arms into a temporary folder and
writes their records (seconds). Deterministic: the same weights give the same records.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from helpers import checkpoints, repro, scripts, train
from helpers import tree_rope as tr

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_arms  # noqa: E402

SLUG, NAME, SOURCE = "04_tree_rope", "arms_records", "arms"
HERE = Path(__file__).resolve()
SOURCES = [HERE, HERE.with_name("make_arms.py"), Path(tr.__file__).resolve(), Path(repro.__file__).resolve(),
           Path(train.__file__).resolve()]
KEYS, MAX_DIST, N_DIAG, N_FAR, N_IN = (4, 8, 16, 32, 64), 64, 16, 2, 512


def _r(x, nd: int = 6):
    return float(f"{float(x):.{nd}g}")


def measure(ckpt, cfg: dict, tiny: bool) -> dict:
    """Every arm-seed's records from a loaded ``arms`` checkpoint (see the module docstring)."""
    _, test_bytes = tr.stdlib_corpus(**cfg["corpus"])
    n, ev = cfg["train_len"], cfg["eval"]
    tail, longest = ev["tail"], max(ev["lengths"])
    windows = tr.shared_tail_windows(test_bytes, ev["lengths"], ev["windows"], repro.rng(0, ev["stream"]))
    w_in = tr.shared_tail_windows(test_bytes, [n], 16 if tiny else N_IN, repro.rng(0, 77))[n]
    w_k = windows[longest][:N_DIAG, -(tail + MAX_DIST + 1):]
    pos_k = torch.arange(longest - (w_k.shape[1] - 1), longest)
    w_far = windows[longest][:N_FAR, :-1]
    man, runs = ckpt.manifest, {}
    for arm, spec in cfg["arms"].items():
        for s in cfg["seeds"][:1] if arm in cfg["one_seed_arms"] else cfg["seeds"]:
            key = f"{arm}/{s}"
            model = ckpt.load_into(tr.make_model(spec, cfg), prefix=key + ".", ignore=["eval_"]).eval()
            use = {k: float(torch.exp(tr.tail_loss_with_keys(model, w_in, 8, k).mean())) for k in (4, 8, 16, n)}
            keys = {k: float(torch.exp(tr.tail_loss_with_keys(model, w_k, tail, keys=k, pos=pos_k).mean()))
                    for k in KEYS}
            att = tr.attention_by_distance(model, w_k[:, :-1], tail, MAX_DIST, pos=pos_k)[-1]
            far = tr.far_attention_mass(model, w_far, tail, n)
            metrics = dict(man["metrics"][key])
            metrics["plateau"] = _r(train.plateau(man["history"][f"{key}/val_loss"]))
            runs[key] = dict(
                metrics=metrics,
                eval_tail=ckpt.tensors[f"{key}.eval_tail"].float().tolist(),
                eval_whole=[_r(v) for v in ckpt.tensors[f"{key}.eval_whole"].float().mean(1).tolist()],
                window_use=dict(ppl={str(k): _r(v) for k, v in use.items()}, gain=_r(tr.context_gain(use, n))),
                keys={str(k): _r(v) for k, v in keys.items()},
                attention_last=[_r(v, 5) for v in att.tolist()],
                far_mass=[_r(v) for v in np.asarray(far).tolist()],
            )
            print(f"{key}: window use {runs[key]['window_use']['gain']}, far mass {runs[key]['far_mass']}", flush=True)
    return runs


def build(cfg: dict, out: Path | None, args: argparse.Namespace) -> Path:
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="arms_tiny_") as tmp:
        src_root = None
        if args.tiny:  # make_arms.py's tiny arms, trained into a folder of their own
            make_arms.main(["--tiny", "--out", tmp])
            src_root = Path(tmp)
        ckpt = checkpoints.load(SLUG, SOURCE, config=cfg, root=src_root, check_sources=False)
        w_path, m_path = checkpoints.paths(SLUG, SOURCE, src_root)
        runs = measure(ckpt, cfg, args.tiny)
        man = ckpt.manifest
        source_files = {"weights": man["weights"], "weights_sha256_on_disk": checkpoints.sha256_file(w_path)}
        if not args.tiny:  # a tiny manifest records its own clock: left out so that two tiny runs write the same
            source_files["manifest_sha256"] = checkpoints.sha256_file(m_path)
            source_files["seconds_per_run"] = man["extra"]["seconds_per_run"]
            source_files.update(machine=man["machine"], command=man.get("command"), wall_seconds=man["wall_seconds"])
        rec = dict(
            slug=SLUG, name=NAME, tiny=bool(args.tiny),
            about="records of the d = 32 byte-corpus arms (arms.safetensors + arms.json), kept when their "
                  "weights left data/; see make_arms_records.py",
            source_checkpoint=dict(name=SOURCE, steps=man["steps"], seed=man["seed"], source=man.get("source"),
                                   **source_files),
            config=cfg, wall_seconds=round(time.time() - t0, 1), runs=runs, source=checkpoints.source_hash(SOURCES),
        )
    root = Path(out) if out is not None else checkpoints.data_dir()
    path = root / SLUG / f"{NAME}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(checkpoints._manifest_text(rec))
    print(f"wrote {path} ({path.stat().st_size / 2**10:.0f} kB) in {time.time() - t0:.0f} s", flush=True)
    return path


def main(argv: list[str] | None = None) -> list:
    return scripts.script_main(build, config=lambda name: tr.checkpoint_config(SOURCE),
                               tiny=lambda name: make_arms.tiny_config(SOURCE), names=[NAME], doc=__doc__,
                               argv=argv)


if __name__ == "__main__":
    main()
