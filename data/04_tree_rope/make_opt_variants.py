"""OPT variants on the byte corpus, each with the aliasing diagnosis (``optvar``; registered in session 28 BEFORE any
of its training, #62: the issue's item "OPT variants that keep the upper digits informative ... the aliasing
diagnosis on each"). Seed 0 of the four variants trained in session 28 (after this registration); the claims on the
qualifying variants were registered after seed 0's reading (below).

**Why.** The byte-corpus OPT (4 chunks of 8 bytes, each shifted by a multiple of B = 16) keeps the lowest digit
contiguous but makes the upper digits jump at random inside a training window, so they carry no distance
information: in the chapter's first build (d = 32) TPE + OPT's last layer attended to the key B + 1 back 0.68x as
much as to the key 1 back (the other arms 0.01-0.05), the lowest digit read alone. arms2 kept that scheme, as
registered. A variant that keeps the upper digits informative should not alias.

**Design (fixed now).** arms2's recipe unchanged (``tr.checkpoint_config("arms2")``: d = 64, 2 heads, 16 rotary
pairs, 6000 warmup-stable-decay steps, lr 3e-3, batch 32, the same training windows per step and seed, the same
evaluation windows and lengths 32 / 128 / 512 / 2048), TPE with B = 16, L = 3 (pairs 6/5/5) unless stated, for
four variants of the training position ids (:data:`VARIANTS`):

* ``TPE + OPT, whole window``: one offset per window (a multiple of B, the window's largest id < 2048): inside
  the window every digit difference is that of contiguous text, at a random absolute position, so carries of every
  level are seen and every digit stays informative about distance;
* ``TPE + OPT, mix``: the registered OPT (4 chunks) on half of the windows, plain ids 0..32 on the others
  (``plain_frac`` 0.5, drawn per window);
* ``TPE + OPT, levels``: 4 chunks whose offsets are multiples of B^l, with l drawn per window from {1, 2}
  (:func:`level_opt_ids`): at l = 2 the two lower digits stay contiguous and only the top digit jumps;
* ``TPE + OPT, B=8 L=4, chunks of 2B``: radix 8, four levels (pairs 4/4/4/4), 2 chunks of 16 = 2B (the retrieval
  task's scheme): inside a chunk the digits above the lowest change as in contiguous text.

Baselines are arms2's stored arms (RoPE, RoPE + skips, TPE, TPE + OPT, same seeds): nothing of them is retrained.

**Measured per arm-seed** (records only, no weights): the held-out curve; arms2's conditions (``plateau``: stable
phase, ``make_arms2.plateau_of`` <= 0.05; ``beats_ngram``: tail ppl / byte 5-gram's at 32 < 1); per-window tail
losses at every length; and the aliasing diagnosis at the end of 16 windows of 2048 (true positions): last-layer
attention by key distance 0..63 (``tr.attention_by_distance``), ``alias`` = attention at d = B + 1 over d = 1 (the
variant's B), the tail perplexity with the last 4 / 8 / 16 / 32 / 64 keys visible, and window use at training
positions (``tr.context_gain``, the chapter's context condition).

**Reading (fixed now)**, :func:`reading`, per variant at seed 0: ``informative`` when ``alias <= 0.2`` (a fifth:
between the first build's TPE + OPT, 0.68, and its other arms, <= 0.05); ``conditions`` when plateau and
beats_ngram are met; ``qualifies`` when both. **Seeds**: seed 0 for all four variants first; seeds 1 and 2 only
for variants that qualify at seed 0. Whatever the reading, no perplexity claim changes: a claim on the variants
would be registered on its own, after seed 0's reading and before seeds 1-2 train.

**Claims on the qualifying variants (registered in session 28 after seed 0's conditions and alias were seen, before
any seed 1-2 training and before any variant's perplexity ratio was read: disclosed).** For each variant that
qualifies at seed 0 by :func:`reading` (as stored in the merged record; ``tr.optvar_qualifying`` re-applies the rule
and refuses a reading that disagrees), arms2's perplexity claims with the same op, target and interval end, the
variant in TPE + OPT's place (``tr.OPTVAR_CLAIMS``, ids ``<claim>_<short>``, shorts ``tr.OPTVAR_SHORT``: opt_whole,
opt_mix, opt_levels, opt_b8), over seeds 0, 1, 2: ``extrapolation_ppl_ratio_<short>`` (RoPE / variant at 2048,
lower 95% end >= 2), ``in_distribution_parity_<short>`` (variant / RoPE at 32, upper end <= 1.05),
``beats_skip_control_<short>`` (RoPE + skips / variant at 2048, lower end > 1) and ``beats_scaled_rope_<short>``
(best per seed of RoPE and its three inference-time scalings / variant at 2048, lower end > 1). Each names the
plateau and beats_ngram conditions of both arms it reads, per seed, and at 2048 both arms' context condition
(the variant's ``plateau_/beats_ngram_/context_<short>`` from its records: plateau_stable, ngram_ratio, window_use
(64 held-out windows of 32 here; arms2's context reads 512 live), arms2's bars, context < 1); a seed whose
conditions fail is inconclusive there, as for arms2's claims. A variant that does not qualify gets no claim.
Seed-0 readings when this was registered: mix and B=8 L=4 chunks of 2B qualify, levels does not (alias 0.33),
whole window was still training (its claims exist only if the stored reading says it qualifies).

**How the notebook reads them (next session's wiring)**, default run only (quick mode has no variants: untested
there): load ``optvar.json`` (``checkpoints`` data dir); after section 4 has built ``tails`` (arms2 + the scaled
RoPE variants) and ``best_scaled``, call ``tr.optvar_claim_inputs(optvar, tails, lengths, train_len,
seeds=cfg["seeds"], n_boot=n_boot, rng=repro.rng(seed, 96), best_scaled=best_scaled)`` (its own bootstrap stream:
the arms2 intervals keep theirs); record each returned condition with ``rec.condition(id, values, op, target)``
beside arms2's (the RoPE / RoPE + skips conditions are arms2's, already recorded) and each claim with
``rec.claim(id, ..., measured=c["measured"], op=c["op"], target=c["target"], baseline=c["baseline"],
given=c["given"])``, notes with ``c["ratios"]`` as ``fmt_r`` prints arms2's. The merged record must hold every seed
of each qualifying variant (else ``optvar_claim_inputs`` raises naming the pending arm-seed): merge with
``--merge --seeds 0 1 2 --partial`` (non-qualifying variants' seeds 1-2 are never trained and stay pending).

**Jobs** (one per arm-seed, each its own resumable part; one torch thread, through the heavy-job gate):
``.venv/bin/python data/04_tree_rope/make_opt_variants.py --seeds 0 --arms "TPE + OPT, whole window" --parts
/work/keep/optvar_parts`` (likewise the three others), then ``--merge --seeds 0 --parts /work/keep/optvar_parts``
writes ``data/04_tree_rope/optvar.json`` (``--partial`` marks missing arm-seeds pending) with the reading.
Expected wall per job: ~3.5 min (arms2's measured 2.9-3.3 min per arm-seed on one thread of this machine, plus
~20 s of diagnostics; a loaded machine up to 2x), seed 0 ~15 min for the four; seeds 1-2 of qualifying variants
~7 min per variant. Storage ~25 kB per arm-seed.

``--merge`` reads every seed given with ``--seeds`` (fixed in session 29: it read the config's seed 0 alone, so
485dbe2's ``optvar.json`` held seed 0 only although the seeds 1-2 parts had trained; re-merged from the same parts,
nothing retrained).

``--tiny`` alone trains a tiny config of every variant into a temporary folder, then merges it (seconds).
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
from pathlib import Path

import numpy as np
import torch

from helpers import checkpoints, repro, scripts, train
from helpers import tree_rope as tr

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_arms2  # noqa: E402

SLUG, NAME = "04_tree_rope", "optvar"
HERE = Path(__file__).resolve()
SOURCES = [HERE, HERE.with_name("make_arms2.py"), Path(tr.__file__).resolve(), Path(repro.__file__).resolve(),
           Path(train.__file__).resolve()]
ALIAS_BAR = 0.2  # informative: attention at d = B + 1 over d = 1 at most this
KEYS = (4, 8, 16, 32, 64)
_TPE = dict(enc="tpe", ids="opt", B=16, L=3, bases=None)
VARIANTS = {
    "TPE + OPT, whole window": dict(_TPE, n_chunks=1),
    "TPE + OPT, mix": dict(_TPE, plain_frac=0.5),
    "TPE + OPT, levels": dict(_TPE, levels=[1, 2]),
    "TPE + OPT, B=8 L=4, chunks of 2B": dict(enc="tpe", ids="opt", B=8, L=4, bases=None, n_chunks=2),
}


def config() -> dict:
    """optvar's config: arms2's recipe with the four variants, seed 0 (the design in the docstring)."""
    cfg = copy.deepcopy(tr.checkpoint_config("arms2"))
    cfg.update(arms=copy.deepcopy(VARIANTS), seeds=[0], diag=dict(windows=16, max_dist=64), alias_bar=ALIAS_BAR)
    return cfg


def tiny_config() -> dict:
    cfg = config()
    small = make_arms2.tiny_config()
    for k in ("d_model", "n_layer", "n_head", "batch_size", "steps", "warmup", "decay_steps", "val_every",
              "val_windows", "target_len", "corpus", "eval"):
        cfg[k] = copy.deepcopy(small[k])
    cfg["diag"] = dict(windows=4, max_dist=64)
    return cfg


def level_opt_ids(rng: np.random.Generator, batch: int, n: int, B: int, target: int, n_chunks: int,
                  levels) -> np.ndarray:
    """OPT ids whose chunk offsets are multiples of ``B**l``, with the level ``l`` drawn per window from ``levels``:
    non-decreasing offsets, the largest id below ``target``; ``p mod B**l == i mod B**l`` in a window of level l."""
    levels = [int(v) for v in levels]
    if not levels or min(levels) < 1:
        raise ValueError(f"levels must be integers >= 1, got {levels}")
    lv = rng.choice(levels, size=batch)
    chunk = np.minimum(np.arange(n) * n_chunks // n, n_chunks - 1)
    out = np.empty((batch, n), dtype=np.int64)
    for level in sorted(set(levels)):
        rows = np.flatnonzero(lv == level)
        unit = B**level
        budget = (target - n) // unit
        if budget < 0:
            raise ValueError(f"a window of {n} does not fit below target {target}")
        off = np.sort(rng.integers(0, budget + 1, size=(len(rows), n_chunks)), axis=1) * unit
        out[rows] = np.arange(n) + off[:, chunk]
    return out


def position_ids(spec: dict, rng: np.random.Generator, batch: int, n: int, cfg: dict) -> np.ndarray:
    """A variant's training position ids ``(batch, n)``."""
    chunks = spec.get("n_chunks", cfg["n_chunks"])
    if spec.get("levels"):
        return level_opt_ids(rng, batch, n, spec["B"], cfg["target_len"], chunks, spec["levels"])
    return tr.train_position_ids(spec, rng, batch, n, cfg["target_len"], chunks)


def batch_fn(spec: dict, corpus: np.ndarray, cfg: dict, seed: int):
    """``tr.batch_fn`` with the variant's ids: the same training windows per step and seed (stream 10), the ids
    from stream 11."""
    data = torch.as_tensor(np.asarray(corpus).astype(np.int64))
    n, bs = cfg["train_len"], cfg["batch_size"]
    idx = torch.arange(n + 1)

    def get(step: int):
        g = np.random.default_rng([seed, 10, step])
        starts = torch.as_tensor(g.integers(0, len(data) - n - 1, bs))
        pos = position_ids(spec, np.random.default_rng([seed, 11, step]), bs, n + 1, cfg)
        return data[starts[:, None] + idx], torch.as_tensor(pos)

    return get


def diagnose(model, windows: dict, cfg: dict, spec: dict, test_bytes: np.ndarray) -> dict:
    """The aliasing diagnosis at the end of the longest windows, and window use at training positions."""
    ev, n = cfg["eval"], cfg["train_len"]
    tail, longest, md = ev["tail"], max(ev["lengths"]), cfg["diag"]["max_dist"]
    w_k = windows[longest][: cfg["diag"]["windows"], -(tail + md + 1):]
    pos_k = torch.arange(longest - (w_k.shape[1] - 1), longest)
    att = tr.attention_by_distance(model, w_k[:, :-1], tail, md, pos=pos_k)[-1]
    keys = {str(k): float(torch.exp(tr.tail_loss_with_keys(model, w_k, tail, keys=k, pos=pos_k).mean()))
            for k in KEYS}
    w_in = tr.shared_tail_windows(test_bytes, [n], 4 * cfg["diag"]["windows"], repro.rng(0, 77))[n]
    use = {k: float(torch.exp(tr.tail_loss_with_keys(model, w_in, 8, k).mean())) for k in (4, 8, 16, n)}
    B = spec["B"]
    return dict(attention_last=[float(v) for v in att], alias=float(att[B + 1] / att[1]), keys=keys,
                window_use=tr.context_gain(use, n))


def train_arm_seed(cfg: dict, arm: str, s: int) -> dict:
    t0 = time.time()
    train_bytes, val, windows = make_arms2._data(cfg)
    test_bytes = tr.stdlib_corpus(**cfg["corpus"])[1]
    spec, ev, key = cfg["arms"][arm], cfg["eval"], f"{arm}/{s}"
    with repro.seeded(s):
        model = tr.make_model(spec, cfg)
        hist = train.fit(model, tr.lm_loss, batch_fn(spec, train_bytes, cfg, s), cfg["steps"], lr=cfg["lr"],
                         warmup=cfg["warmup"], weight_decay=cfg["weight_decay"], schedule=cfg["schedule"],
                         decay_steps=cfg["decay_steps"], seed=s,
                         eval_fn=lambda m: {"val_loss": float(tr.token_losses(m, val, chunk=64).mean())},
                         eval_every=cfg["val_every"], desc=key)
    model.eval()
    tails = [tr.token_losses(model, w)[:, -ev["tail"]:].mean(1) for w in windows.values()]
    ng = tr.ngram_token_losses(train_bytes, windows[cfg["train_len"]], make_arms2.NGRAM_ORDER)
    pts = hist.evals["val_loss"]
    curve = {"step": [st for st, _ in pts], "value": [v for _, v in pts]}
    rec = dict(plateau_stable=make_arms2.plateau_of(curve, cfg),
               ngram_ratio=make_arms2.ngram_ratio(tails[0].numpy(), ng[:, -ev["tail"]:].mean(1).numpy()),
               eval_tail=[[round(float(v), 5) for v in t] for t in tails], val_loss=curve,
               **diagnose(model, windows, cfg, spec, test_bytes), seconds=round(time.time() - t0, 1))
    print(f"{key}: plateau {rec['plateau_stable']:.4f}, ngram ratio {rec['ngram_ratio']:.3f}, alias "
          f"{rec['alias']:.3f} ({rec['seconds']} s)", flush=True)
    return {"records": {key: rec}}


def reading(records: dict, cfg: dict) -> dict:
    """The registered reading of seed 0 per variant: ``{arm: {informative, conditions, qualifies}}`` (arms not
    yet recorded at seed 0 are left out)."""
    out = {}
    for arm in cfg["arms"]:
        r = records.get(f"{arm}/0")
        if r is None:
            continue
        informative = r["alias"] <= cfg["alias_bar"]
        cond = r["plateau_stable"] <= make_arms2.PLATEAU_BAR and r["ngram_ratio"] < make_arms2.NGRAM_BAR
        out[arm] = dict(informative=bool(informative), conditions=bool(cond), qualifies=bool(informative and cond))
    return out


def part(parts: Path, cfg: dict, arm: str, s: int, train_more: bool = True) -> dict | None:
    path = Path(parts) / arm.replace(" ", "_").replace("+", "p").replace(",", "").replace("=", "")
    if not train_more and not (path / f"seed{s}.pt").exists():
        return None
    res, _ = scripts.seed_part(path, s, scripts.part_key(cfg, arm=arm), lambda: train_arm_seed(cfg, arm, s))
    return res


def merge(cfg: dict, parts: Path, out: Path | None, partial: bool, tiny: bool) -> Path:
    records, pending, seconds = {}, [], {}
    for s in cfg["seeds"]:
        for arm in cfg["arms"]:
            res = part(parts, cfg, arm, s, train_more=False)
            if res is None:
                if not partial:
                    raise SystemExit(f"{arm}/{s}: not trained in {parts}; run it first")
                pending.append(f"{arm}/{s}")
                continue
            for key, r in res["records"].items():
                records[key] = {k: v for k, v in r.items() if k != "seconds"}
                seconds[key] = r["seconds"]
    rec = dict(slug=SLUG, name=NAME, tiny=tiny, config=cfg, records=records, pending=pending, wall_seconds=seconds,
               reading=reading(records, cfg), source=checkpoints.source_hash(SOURCES))
    root = Path(out) if out is not None else checkpoints.data_dir()
    path = root / SLUG / f"{NAME}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(checkpoints._manifest_text(rec))
    print(f"wrote {path} ({path.stat().st_size / 2**10:.0f} kB); reading {rec['reading']}", flush=True)
    return path


def options(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--arms", nargs="+", default=None, help="this job's variants (default: all four)")
    ap.add_argument("--parts", type=Path, default=None, help="folder of the arm-seed parts (one job per arm-seed)")
    ap.add_argument("--merge", action="store_true", help="merge the parts of --seeds into optvar.json")
    ap.add_argument("--partial", action="store_true", help="--merge: mark missing arm-seeds pending")


def build(cfg: dict, out: Path | None, args: argparse.Namespace) -> Path | None:
    unknown = sorted(set(args.arms or []) - set(cfg["arms"]))
    if unknown:
        raise SystemExit(f"unknown arms {unknown}; choose from {list(cfg['arms'])}")
    if args.tiny:  # every variant of the tiny config into temporary parts, then the merge
        parts = args.parts or Path(out) / "optvar_parts"
        for arm in cfg["arms"]:
            part(parts, cfg, arm, cfg["seeds"][0])
        return merge(cfg, parts, out, False, True)
    if args.parts is None:
        raise SystemExit("--parts is required (one job per arm-seed: --seeds S --arms A --parts DIR; then --merge)")
    if args.merge:  # every seed named on the command line (the config holds seed 0 only, which script_main's
        # --seeds handling would keep: a merge of --seeds 0 1 2 would read seed 0 alone, as 485dbe2's did)
        return merge(scripts.with_seeds(cfg, args.seeds or cfg["seeds"]), args.parts, out, args.partial, False)
    for s in cfg["seeds"]:
        for arm in args.arms or list(cfg["arms"]):
            part(args.parts, cfg, arm, s)
    return None


def main(argv: list[str] | None = None) -> list:
    return scripts.script_main(build, config=lambda name: config(), tiny=lambda name: tiny_config(),
                               names=[NAME], options=options, doc=__doc__, argv=argv)


if __name__ == "__main__":
    main()
