"""Round 9's carry probe of chapter 04_tree_rope (``probe_carry.json``, records only, no weights). Registered
(committed) with its rule and round 9's two possible designs before any of its training runs.

**Question.** The TPE arms that learn the two-key recall task end near 0.91 because they miss the windows whose
answer sits one place after a key at p mod 8 = 7 (``key -> answer`` crosses a carry of the lowest digit), while
the RoPE arms have no such gap (recall2 / recall3 per-window records). Is that a property of the encoding or of
training? The answer token is read through a previous-token head (the answer position attends to the key one
place back); at a carry, TPE's digit-difference tuple of that step is ``(-7, +1, 0, 0)`` instead of
``(+1, 0, 0, 0)`` (``(-7, -7, +1, 0)`` across a carry of the second digit, ...), and since a TPE score is a sum of
per-level terms, ``f = g_0(d_0) + g_1(d_1) + ...``, one head must put both tuples above every other key's tuple.

**Part 1, construction (no training, :func:`margins`).** The best margin, at unit query-key norm (sum over rotary
pairs of ``|q_j||k_j|`` <= 1, the complex coefficient of each pair free), by which a position-only bilinear score
``q . R(m - n) k`` can put the key one place back above every other causal key, as a linear program; for
recall2's RoPE (16 pairs, base 10000) and TPE (B = 8, L = 4, 4 pairs per level, bases 16), over the queries of the
training window (ids 0..31), over every query below 2048 (a window anywhere), over OPT's training windows (the
chunk's first query, whose previous token sits across the jump, left out: no head can single out an arbitrary
jump), each with and without the carry queries. Descriptive: the margin says whether the step is representable
and at what scale of the weights (a margin k times smaller needs k times larger query-key norms for the same
attention sharpness).

**Part 2, a tiny trained check (:func:`run`).** A previous-token copy task with dense supervision: 32 random
tokens of ``N_VALUES`` = 16, the target at every position i >= 1 is token i - 1. Recall2's model (d = 64, 2 layers,
2 heads, vocabulary 16) and arms ``ARMS`` (their encodings and training ids: OPT in 2 chunks of 16, multiples of
8, ids below 2048), batch 64, AdamW lr 2e-3, warmup 100, ``STEPS`` = 1000 cosine steps, one torch thread. Scored
on 512 held-out windows with contiguous ids 0..31: accuracy at the carry positions (i = 8, 16, 24: the previous
token at p mod 8 = 7) and at the other positions; for the OPT arms also on their own training ids (carry
positions by id, the jump position left out).

**Rule** (:func:`round9`, fixed now). Per arm-seed: *learned* when the accuracy at non-carry positions is >=
``LEARNED`` = 0.99; *carry gap* when learned and the carry accuracy is < ``CARRY`` = 0.90. Seed 0 first (the
probe): if RoPE is not learned at seed 0 the task is not learned at this recipe and the probe stops (no reading);
else seeds 1 and 2 with the same config. Per arm over the three seeds: **structural** when it shows the carry gap
at >= 2 seeds and at each of them the RoPE arm with the same ids (RoPE for TPE, RoPE + OPT offsets for TPE + OPT)
is learned with carry accuracy >= 0.99; **trainable** when it is learned with carry accuracy >= ``CARRY`` at >= 2
seeds; else **unclear**.

**Round 9's design, decided by TPE + OPT's reading** (the claims' arm; both branches fixed now, before any run):

* ``structural`` -> branch **S**: the carry cost is reported as a finding about TPE, and the retrieval claims'
  in-window gate is redesigned (a change made after seeing round 6-8's numbers, disclosed as such): the claims
  name ``retrieval_learned`` instead of ``retrieval_in_window``: every retrieval arm (the five the current
  condition reads) answers >= 0.95 (the same bar) of the in-window held-out windows whose key is **not** at
  p mod 8 = 7 (:func:`no_carry_accuracy`), at each seed; ``retrieval_in_window`` stays in the record beside it
  (the name of no claim), and each arm's accuracy on the carry windows is shown beside. The runs read, the
  plateau and ``needs_position`` conditions and the claims' bars are unchanged.
* ``trainable`` -> branch **T**: nothing in the claims changes; the carry stall is a training outcome, and the
  next round is a recipe change (not run in round 9).
* ``unclear`` or not decided -> no change; round 9 reports the probe.
"""

from __future__ import annotations

import argparse
import copy
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from scipy.optimize import linprog

from helpers import checkpoints, repro, train
from helpers import nn as hnn
from helpers import tree_rope as tr

HERE = Path(__file__).resolve()
OUT = HERE.parent / "probe_carry.json"
ARMS = ("RoPE", "TPE", "RoPE + OPT offsets", "TPE + OPT")
SAME_IDS = {"TPE": "RoPE", "TPE + OPT": "RoPE + OPT offsets"}  # the control of each TPE arm
N_VALUES, N_EVAL, STEPS, SEEDS, PROBE_SEED = 16, 512, 1000, (0, 1, 2), 0
LEARNED, CARRY, CONTROL = 0.99, 0.90, 0.99
MARGIN_LEN = 2048  # queries of the "anywhere" set and OPT's target length
N_OPT_WINDOWS = 300


def config() -> dict:
    """Recall2's config with the probe's task and recipe (vocabulary ``N_VALUES``, ``STEPS``)."""
    cfg = copy.deepcopy(tr.checkpoint_config("recall2"))
    cfg.update(vocab_size=N_VALUES, steps=STEPS, val_every=100)
    cfg["arms"] = {a: cfg["arms"][a] for a in ARMS}
    return cfg


def tiny_config() -> dict:
    cfg = config()
    cfg.update(d_model=8 * cfg["n_head"] * 2, n_layer=1, batch_size=8, steps=12, warmup=2, val_every=6)
    return cfg


# ---- part 1: the best margin of a position-only previous-token score -------------------------------------------

def prev_token_margin(ang: np.ndarray, queries: list, n_poly: int = 16) -> float:
    """Largest ``t`` such that a score ``f(n, m) = sum_j Re(z_j exp(i (ang[m, j] - ang[n, j])))`` with
    ``sum_j |z_j| <= 1`` puts the key one place back above every other key by ``t`` at every query.

    ``ang``: (positions, pairs) rotary angles by position id; ``queries``: ``(ids of the window's tokens up to and
    including the query, ...)`` as 1-d int arrays, the query last and its target the one before it. ``|z_j|`` is
    bounded through a regular ``n_poly``-gon (the margin is within ``1/cos(pi/n_poly)`` of the disc's)."""
    P = ang.shape[1]
    rows = []
    for ids in queries:
        n, tgt, others = ids[-1], ids[-2], np.delete(ids, -2)
        dt, dm = ang[tgt] - ang[n], ang[others] - ang[n]
        rows.append(np.concatenate([np.cos(dt) - np.cos(dm), np.sin(dm) - np.sin(dt)], 1))
    G = np.unique(np.round(np.concatenate(rows), 9), axis=0)
    nv = 3 * P + 1  # Re z, Im z, r = |z| bound, t
    a1 = np.zeros((len(G), nv))
    a1[:, :2 * P], a1[:, -1] = -G, 1.0
    phi = np.arange(n_poly) * 2 * np.pi / n_poly
    a2 = np.zeros((P * n_poly, nv))
    for j in range(P):
        r = slice(j * n_poly, (j + 1) * n_poly)
        a2[r, j], a2[r, P + j], a2[r, 2 * P + j] = np.cos(phi), np.sin(phi), -1.0
    a3 = np.zeros((1, nv))
    a3[0, 2 * P: 3 * P] = 1.0
    A = np.concatenate([a1, a2, a3])
    b = np.zeros(len(A))
    b[-1] = 1.0
    c = np.zeros(nv)
    c[-1] = -1.0
    res = linprog(c, A_ub=A, b_ub=b, bounds=[(None, None)] * (2 * P) + [(0, None)] * P + [(None, None)],
                  method="highs")
    if res.status != 0:
        raise RuntimeError(f"linear program failed: {res.message}")
    return float(res.x[-1])


def query_sets(cfg: dict, n_opt: int = N_OPT_WINDOWS, top: int = MARGIN_LEN) -> dict:
    """``{name: list of id arrays}`` (see :func:`prev_token_margin`); ``... no carry``: the queries whose target
    is at p mod B = B - 1 left out."""
    B, n = cfg["arms"]["TPE"]["B"], cfg["train_len"]
    win = [np.arange(q + 1) for q in range(1, n)]
    anywhere = [np.arange(max(0, q - n + 1), q + 1) for q in range(1, top)]
    opt = tr.opt_position_ids(np.random.default_rng([0, 40]), n_opt, n + 1, B, cfg["target_len"], cfg["n_chunks"])
    opt_q = [w[: q + 1] for w in opt for q in range(1, n) if w[q] - w[q - 1] == 1]
    out = {}
    for name, qs in (("window 0..31", win), (f"anywhere below {top}", anywhere), ("OPT windows", opt_q)):
        out[name] = qs
        out[f"{name}, no carry"] = [q for q in qs if q[-2] % B != B - 1]
    return out


def margins(cfg: dict, n_opt: int = N_OPT_WINDOWS, top: int = MARGIN_LEN) -> dict:
    """``{set: {"RoPE": margin, "TPE": margin}}`` for recall2's encodings (head_dim of its config)."""
    hd = cfg["d_model"] // cfg["n_head"]
    spec = cfg["arms"]["TPE"]
    enc = {"RoPE": hnn.RotaryEmbedding(hd), "TPE": tr.TreeRotaryEmbedding(hd, spec["B"], spec["L"], spec["bases"])}
    ang = {k: e.angles(torch.arange(cfg["target_len"])).double().numpy() for k, e in enc.items()}
    return {s: {k: round(prev_token_margin(a, qs), 5) for k, a in ang.items()}
            for s, qs in query_sets(cfg, n_opt, top).items()}


# ---- part 2: a tiny previous-token task ---------------------------------------------------------------------------

def prev_batch_fn(spec: dict, cfg: dict, seed: int):
    """``step -> (tokens (bs, n), ids (bs, n))``: random tokens (stream 30), the arm's training ids (stream 31)."""
    n, bs = cfg["train_len"], cfg["batch_size"]

    def get(step: int):
        x = np.random.default_rng([seed, 30, step]).integers(0, cfg["vocab_size"], size=(bs, n))
        pos = tr.train_position_ids(spec, np.random.default_rng([seed, 31, step]), bs, n + 1, cfg["target_len"],
                                    spec.get("n_chunks", cfg["n_chunks"]))[:, :n]
        return torch.as_tensor(x), torch.as_tensor(pos)

    return get


def prev_loss(model: torch.nn.Module, batch) -> torch.Tensor:
    """Cross-entropy of predicting token i - 1 at every position i >= 1."""
    x, pos = batch
    logits = model(x, pos=pos)
    return torch.nn.functional.cross_entropy(logits[:, 1:].reshape(-1, logits.shape[-1]), x[:, :-1].reshape(-1))


@torch.no_grad()
def prev_correct(model: torch.nn.Module, x: torch.Tensor, pos: torch.Tensor | None = None) -> np.ndarray:
    """``(windows, n - 1)`` bool: the argmax at position i >= 1 is token i - 1."""
    was = model.training
    model.eval()
    out = (model(x, pos=pos)[:, 1:].argmax(-1) == x[:, :-1]).numpy()
    model.train(was)
    return out


def split_accuracy(correct: np.ndarray, ids: np.ndarray, B: int) -> dict:
    """Accuracy at the positions whose previous token's id is at p mod B = B - 1 (carry) and at the others;
    positions whose id does not follow the previous one by 1 (OPT's jump) are left out of both."""
    ids = np.asarray(ids)
    prev, cur = ids[..., :-1], ids[..., 1:]
    step1 = np.broadcast_to(cur - prev == 1, correct.shape)
    carry = np.broadcast_to(prev % B == B - 1, correct.shape)
    return dict(carry=float(correct[step1 & carry].mean()), no_carry=float(correct[step1 & ~carry].mean()),
                n_carry=int((step1 & carry).sum()), n_no_carry=int((step1 & ~carry).sum()))


def eval_sets(cfg: dict, n_windows: int = N_EVAL) -> dict:
    """The held-out tokens (stream 32) with contiguous ids, and each OPT arm's own ids (stream 33)."""
    n = cfg["train_len"]
    x = torch.as_tensor(np.random.default_rng([0, 32]).integers(0, cfg["vocab_size"], size=(n_windows, n)))
    own = {a: torch.as_tensor(tr.train_position_ids(s, np.random.default_rng([0, 33]), n_windows, n + 1,
                                                    cfg["target_len"], s.get("n_chunks", cfg["n_chunks"]))[:, :n])
           for a, s in cfg["arms"].items() if s["ids"] != "plain"}
    return dict(x=x, own=own)


def run(arm: str, seed: int, cfg: dict | None = None) -> dict:
    """Train ``arm`` at ``seed`` on the previous-token task and score it (see the module's docstring)."""
    cfg = cfg or config()
    spec, B, n = cfg["arms"][arm], cfg["arms"]["TPE"]["B"], cfg["train_len"]
    ev = eval_sets(cfg)
    plain = np.arange(n)

    def metrics(model):
        sp = split_accuracy(prev_correct(model, ev["x"][:128]), plain, B)
        return {"acc_carry": sp["carry"], "acc_no_carry": sp["no_carry"]}

    t0 = time.time()
    with repro.seeded(seed):
        model = tr.make_model(spec, cfg)
        hist = train.fit(model, prev_loss, prev_batch_fn(spec, cfg, seed), cfg["steps"], lr=cfg["lr"],
                         warmup=cfg["warmup"], weight_decay=cfg["weight_decay"], seed=seed, eval_fn=metrics,
                         eval_every=cfg["val_every"], desc=f"{arm}/{seed}")
    secs = time.time() - t0
    rec = dict(arm=arm, seed=seed, steps=cfg["steps"], seconds=round(secs, 1),
               **split_accuracy(prev_correct(model, ev["x"]), plain, B))
    if arm in ev["own"]:
        pos = ev["own"][arm]
        own = split_accuracy(prev_correct(model, ev["x"], pos), pos.numpy(), B)
        rec.update(own_ids_carry=own["carry"], own_ids_no_carry=own["no_carry"])
    rec["curve"] = {k: [[int(s), round(float(v), 4)] for s, v in hist.evals[k]] for k in ("acc_carry", "acc_no_carry")}
    rec["loss_end"] = round(float(np.mean(hist.loss[-50:])), 5)
    print(f"{arm}/{seed}: carry {rec['carry']:.3f} / else {rec['no_carry']:.3f}"
          + (f"; own ids {rec['own_ids_carry']:.3f} / {rec['own_ids_no_carry']:.3f}" if arm in ev["own"] else "")
          + f" ({rec['seconds']} s)", flush=True)
    return rec


def state(rec: dict) -> str:
    """``"learned"`` (carry accuracy >= CARRY too), ``"carry gap"`` or ``"not learned"``."""
    if rec["no_carry"] < LEARNED:
        return "not learned"
    return "carry gap" if rec["carry"] < CARRY else "learned"


def round9(records: dict) -> dict:
    """The registered rule on ``{"<arm>/<seed>": record}``: ``{"decided", "stopped", "reading": {arm: ...},
    "branch": "S" | "T" | None}``."""
    def get(a, s):
        return records.get(f"{a}/{s}")

    if any(get(a, PROBE_SEED) is None for a in ARMS):
        return dict(decided=False, stopped=False, reading={}, branch=None)
    if get("RoPE", PROBE_SEED)["no_carry"] < LEARNED:
        return dict(decided=True, stopped=True, reading={}, branch=None)
    if any(get(a, s) is None for a in ARMS for s in SEEDS):
        return dict(decided=False, stopped=False, reading={}, branch=None)
    reading = {}
    for a in ARMS:
        gap = [s for s in SEEDS if state(get(a, s)) == "carry gap"]
        ctrl = SAME_IDS.get(a)
        ok_ctrl = ctrl is not None and all(get(ctrl, s)["no_carry"] >= LEARNED and get(ctrl, s)["carry"] >= CONTROL
                                           for s in gap)
        if len(gap) >= 2 and ok_ctrl:
            reading[a] = "structural"
        elif sum(state(get(a, s)) == "learned" for s in SEEDS) >= 2:
            reading[a] = "trainable"
        else:
            reading[a] = "unclear"
    branch = {"structural": "S", "trainable": "T"}.get(reading["TPE + OPT"])
    return dict(decided=True, stopped=False, reading=reading, branch=branch)


def no_carry_accuracy(correct, key_pos, B: int = 8) -> float:
    """Branch S's in-window reading: accuracy over the windows whose key is not at p mod B = B - 1."""
    c, k = np.asarray(correct).astype(bool).ravel(), np.asarray(key_pos).ravel()
    if c.shape != k.shape:
        raise ValueError(f"correct and key_pos must match, got {c.shape} and {k.shape}")
    return float(c[k % B != B - 1].mean())


def main(argv: list[str] | None = None) -> Path:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tiny", action="store_true", help="a run of seconds (tiny model, few steps)")
    ap.add_argument("--out", type=Path, default=None, help="the folder of probe_carry.json (default: data/...; "
                    "with --tiny: a temporary one)")
    args = ap.parse_args(argv)
    out_dir = args.out or (Path(tempfile.mkdtemp(prefix="probe_carry_")) if args.tiny else OUT.parent)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / OUT.name
    repro.set_threads(1)
    cfg = tiny_config() if args.tiny else config()
    t0 = time.time()
    rec = dict(margins=margins(cfg, n_opt=10 if args.tiny else N_OPT_WINDOWS, top=64 if args.tiny else MARGIN_LEN))
    rec["margin_seconds"] = round(time.time() - t0, 1)
    print("margins:", json.dumps(rec["margins"]), flush=True)
    rec.update(config={k: cfg[k] for k in ("d_model", "n_layer", "n_head", "vocab_size", "train_len", "target_len",
                                            "n_chunks", "batch_size", "steps", "lr", "warmup", "weight_decay")},
               arms={a: cfg["arms"][a] for a in ARMS}, records={}, tiny=args.tiny)
    rec["source"] = checkpoints.source_hash([HERE, Path(tr.__file__).resolve(), Path(train.__file__).resolve()])
    for seeds in ([PROBE_SEED], [s for s in SEEDS if s != PROBE_SEED]):
        for s in seeds:
            for a in ARMS:
                rec["records"][f"{a}/{s}"] = run(a, s, cfg)
                rec["round9"] = round9(rec["records"])
                path.write_text(json.dumps(rec, indent=1) + "\n")
        if rec["round9"]["stopped"]:
            break
    print(f"wrote {path}; round 9: {rec['round9']}", flush=True)
    return path


if __name__ == "__main__":
    main()
