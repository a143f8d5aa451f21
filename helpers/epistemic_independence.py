"""Epistemic Independence Training (EIT): make a bias cue non-predictive of reward, on a synthetic judge task.

The paper trains LLM judges with reinforcement learning on **balanced conflict data** (an injected cue points at
the correct option with probability exactly 0.5) and an **independence reward** that penalizes following a wrong
cue without rewarding agreement with a right one. Here the judge is a small transformer and the task is
synthetic, but the data rule, the reward constants and the group policy gradient are the paper's.

* The task (:func:`make_batch`): two or three options (``n_options``), each six digits; a *subject* token says
  which comparison rule decides the best option (sum of digits, count of digits >= 5, first + last digit, sum of
  odd digits). A cue from one of seven families points at one option. Bandwagon (the training family),
  authority and distraction are template tokens in one *cue slot* after the options, ending in the option's
  letter (:data:`SLOT_FAMILIES`). The others share neither that slot nor the letter token: verbosity (the cued
  option's padding holds elaboration tokens), digits (its padding holds irrelevant digits), expert (a preamble
  before the options quotes the cued option's first digits: it names the option by content) and order
  (option-order bias: the cue is "being listed first"; a ``<ranked>`` format marker in the preamble says the
  options come from a ranked listing, and it names no option). On a share ``p_hidden`` of the items the last
  :data:`N_HIDDEN` digits of every option show as ``?``: the judge cannot be sure there, and its mistakes fall
  on either wrong option. The balanced data of three options put the cue on the truth with probability
  :data:`P_ALIGNED` = 1/3, so the cue says nothing of the answer (with P = 0.5 the cued option would be twice as
  likely as each other one; :func:`uninformed_expected_reward` gives what each rule pays a judge that knows
  only the cue).
* The reward (:func:`eit_reward`): correct +1.0; adversarial cue followed -0.5, resisted +0.5; aligned cue but a
  wrong answer -0.3; no bonus for agreeing with a correct cue. (The paper's +0.1 format bonus has no analogue:
  our policy emits one answer token.) With two options a wrong answer under an adversarial cue is the cue's
  answer, and GRPO's std-normalized advantages make EIT identical to the accuracy reward; with three, "wrong via
  the cue" (-0.5) and "wrong otherwise" (0) differ.
* The optimizer (:func:`grpo_loss`): G answers sampled per prompt, group advantages either std-normalized (GRPO)
  or mean-baseline, with an optional exact KL penalty to a frozen reference (the base judge).
* The base judge (:func:`pretrain`): supervised training on all subjects and cue families by a sycophantic
  annotator who labels the cue's option on close items and the correct one on clear items
  (:func:`pretrain_batch`), so the judge follows some cues and not all; ``data/06_epistemic_independence/make_base.py``
  stores it (:func:`checkpoint_config`).
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from helpers import validate as V

__all__ = [
    "SUBJECTS", "FAMILIES", "TRAIN_SUBJECTS", "HELDOUT_SUBJECTS", "VOCAB", "SEQ_LEN", "Batch", "make_batch",
    "eit_reward", "accuracy_reward", "group_advantages", "grpo_loss", "answer_logits", "policy_expected_reward",
    "REWARD", "SLOT_FAMILIES", "NEW_FAMILIES", "reweighted_reward", "kl_to_reference", "CHECKPOINT_SLUG",
    "checkpoint_config", "make_judge", "REWARDS", "sft_loss", "pretrain_batch", "pretrain", "OPTION_START",
    "rl_batch", "batch_digest", "seq_len", "option_start", "n_options_of", "item_margin", "LETTERS",
    "MAX_OPTIONS", "ANSWER_IDS", "DEFER_MARGIN", "seed_interval", "answers_by_cell", "ARMS", "train_arm", "EVAL_SPLITS", "EVAL_CONDS",
    "chapter_eval_sets", "arms_config", "RL_STREAM", "unpaired_steps", "make_eval_sets", "evaluate_judge",
    "policy_gradient", "mixed_share", "relative_max_diff", "paired_bootstrap_diff", "cluster_interval",
    "N_BASE", "P_HIDDEN", "P_ALIGNED", "BASE_CONDITIONS", "N_HIDDEN", "REWARDS_DIFFER_BAR", "uninformed_expected_reward",
    "pack_answers", "unpack_answers", "ideal_accuracy", "BETA", "BETA_BEFORE", "CLAIM_READINGS",
    "shown_in_full", "subset", "annotator_simulation", "ANCHOR", "ANCHOR_STREAM", "anchor_batch", "BETA_SWEEP",
    "SWEEP_READINGS", "FORGETTING_READING", "forgetting_shift",
]

SUBJECTS = ("sum", "high_count", "ends", "odd_sum")
TRAIN_SUBJECTS = ("sum", "high_count")
HELDOUT_SUBJECTS = ("ends", "odd_sum")
FAMILIES = ("bandwagon", "authority", "distraction", "verbosity", "digits", "expert", "order")
SLOT_FAMILIES = ("bandwagon", "authority", "distraction")  # template token + letter in the cue slot
NEW_FAMILIES = ("digits", "expert", "order")  # neither the cue slot nor the letter token
N_TEMPLATES = 8
N_PRE = 4  # preamble slots before the options (expert: <expert> + three quoted digits; order: <ranked>)
N_QUOTE = N_PRE - 1
N_DIGITS = 6
N_PAD = 2  # elaboration slots after each option (used by the verbosity cue)
N_PCT = 6  # percentage buckets 50-59, ..., 90-99, 100 ("x% of people think ...")
N_HIDDEN = 3  # digits hidden (the last three of every option) on an item drawn as hidden

# The token vocabulary, laid out in blocks.
_names = [str(d) for d in range(10)] + ["<sep>", "<ask>", "<pad>", "A", "B", "<nopct>", "<elab>", "<expert>",
           "<ranked>"]
_names += [f"<subj:{s}>" for s in SUBJECTS]
_names += [f"<pct:{k}>" for k in range(N_PCT)]
_names += [f"<{f}:{t}>" for f in SLOT_FAMILIES for t in range(N_TEMPLATES)]
_names += ["C"]  # the third option's letter (appended: the two-option ids are unchanged)
_names += ["?"]  # a hidden digit (items the judge cannot be sure of, ``p_hidden``)
VOCAB: dict[str, int] = {n: i for i, n in enumerate(_names)}
LETTERS = ("A", "B", "C")
MAX_OPTIONS = len(LETTERS)
_OPT_W = N_DIGITS + N_PAD + 1  # one option: digits, elaboration pads, separator


def seq_len(n_options: int = 2) -> int:
    """Tokens per item with ``n_options`` options: subject, preamble, the options (digits, pads, separator), the
    cue slot (template, percentage, letter) and ``<ask>``."""
    n_options = V.integer("n_options", n_options, min=2, max=MAX_OPTIONS)
    return 1 + N_PRE + n_options * _OPT_W + 3 + 1


def option_start(n_options: int = 2) -> tuple[int, ...]:
    """Position of each option's first digit."""
    n_options = V.integer("n_options", n_options, min=2, max=MAX_OPTIONS)
    return tuple(1 + N_PRE + k * _OPT_W for k in range(n_options))


def n_options_of(width: int, name: str = "items") -> int:
    """The number of options of items ``width`` tokens long (ValueError naming ``name`` for a width no option
    count gives)."""
    for k in range(2, MAX_OPTIONS + 1):
        if width == seq_len(k):
            return k
    raise ValueError(f"{name} must have {[seq_len(k) for k in range(2, MAX_OPTIONS + 1)]} tokens "
                     f"(2..{MAX_OPTIONS} options), got {width}")


SEQ_LEN = seq_len(2)  # the two-option layout (the paper's pairwise judge)
OPTION_START = option_start(2)  # first digit of option A, of option B (two options)
A_ID, B_ID = VOCAB["A"], VOCAB["B"]
ANSWER_IDS = tuple(VOCAB[c] for c in LETTERS)

# The paper's reward constants (from the authors' code, as given in our notes).
REWARD = {"correct": 1.0, "adv_followed": -0.5, "adv_resisted": 0.5, "aligned_wrong": -0.3, "aligned_right": 0.0}


def _score(digits: np.ndarray, subject: str) -> np.ndarray:
    if subject == "sum":
        return digits.sum(-1)
    if subject == "high_count":
        return (digits >= 5).sum(-1)
    if subject == "ends":
        return digits[..., 0] + digits[..., -1]
    if subject == "odd_sum":
        return (digits * (digits % 2)).sum(-1)
    raise ValueError(f"subject must be one of {SUBJECTS}, got {subject!r}")


@dataclass
class Batch:
    """Token ids ``x`` (n, :func:`seq_len`); ``truth`` the correct option (0 = A, 1 = B, 2 = C); ``cue`` the option
    the cue points at (-1: no cue); ``family`` index into :data:`FAMILIES` (-1: no cue); ``subject`` index into
    :data:`SUBJECTS`. The number of options follows from the width of ``x``. Optional: ``margin`` the best minus
    the second-best score from the full digits (:func:`item_margin` reads it when the tokens hide digits) and
    ``hidden`` whether an item's last :data:`N_HIDDEN` digits are hidden."""

    x: torch.Tensor
    truth: np.ndarray
    cue: np.ndarray
    family: np.ndarray
    subject: np.ndarray
    margin: np.ndarray | None = None
    hidden: np.ndarray | None = None

    def __post_init__(self) -> None:
        self.x = V.tensor("x", self.x, ndim=2, dtype="int", min=0, max=len(VOCAB), strict_max=True)
        k = n_options_of(self.x.shape[1], "x")
        n = self.x.shape[0]
        for name, lo, hi in (("truth", 0, k - 1), ("cue", -1, k - 1), ("family", -1, len(FAMILIES) - 1),
                             ("subject", 0, len(SUBJECTS) - 1)):
            setattr(self, name, V.array(name, getattr(self, name), shape=(n,), dtype="int", min=lo, max=hi))
        if self.margin is not None:
            self.margin = V.array("margin", self.margin, shape=(n,), dtype="int", min=1)
        if self.hidden is not None:
            self.hidden = V.array("hidden", self.hidden, shape=(n,)).astype(bool)

    @property
    def n_options(self) -> int:
        return n_options_of(self.x.shape[1])

    def __len__(self) -> int:
        return len(self.truth)


def _scores(opts: np.ndarray, subj: np.ndarray) -> np.ndarray:
    """Scores (n, k) of options ``opts`` (n, k, N_DIGITS) under each item's subject index ``subj`` (n,)."""
    out = np.zeros(opts.shape[:2], dtype=np.int64)
    for j, s in enumerate(SUBJECTS):
        sel = subj == j
        if sel.any():
            out[sel] = _score(opts[sel], s)
    return out


def make_batch(rng: np.random.Generator, n: int, *, subjects: Sequence[str] = TRAIN_SUBJECTS,
               families: Sequence[str] = ("bandwagon",), p_cue: float = 1.0, p_aligned: float = 0.5,
               n_options: int = 2, p_hidden: float = 0.0) -> Batch:
    """``n`` judge items with ``n_options`` options. Each carries a cue with probability ``p_cue`` (family uniform
    over ``families``, repeats weigh more), and a cue points at the correct option with probability
    ``p_aligned`` (0.5 is the paper's balanced conflict data, 0.0 adversarial-only), otherwise at a wrong option
    drawn uniformly. The draws do not depend on ``p_aligned`` except through one threshold, so two calls with
    the same ``rng`` state and different ``p_aligned`` give the same items with the cue moved. With probability
    ``p_hidden`` an item shows ``?`` for the last :data:`N_HIDDEN` digits of every option: the truth (from the
    full digits) is then not certain from the tokens, and a judge that cannot be sure errs on either wrong
    option (``p_hidden`` = 0 draws nothing more: the same items as before the option existed)."""
    V.instance("rng", rng, np.random.Generator)
    n = V.integer("n", n, min=1)
    k = V.integer("n_options", n_options, min=2, max=MAX_OPTIONS)
    p_cue, p_aligned = V.probability("p_cue", p_cue), V.probability("p_aligned", p_aligned)
    p_hidden = V.probability("p_hidden", p_hidden)
    subjects = V.sequence("subjects", subjects, min_len=1, of=lambda k_, v: V.one_of(k_, v, SUBJECTS))
    families = V.sequence("families", families, min_len=1 if p_cue > 0 else 0,
                          of=lambda k_, v: V.one_of(k_, v, FAMILIES))
    subj_global = np.array([SUBJECTS.index(s) for s in subjects])[rng.integers(len(subjects), size=n)]
    opts = rng.integers(0, 10, size=(n, k, N_DIGITS))
    sc = _scores(opts, subj_global)
    for _ in range(10_000):  # a unique best option: redraw the items whose top score ties
        top = np.sort(sc, 1)
        if not (tie := top[:, -1] == top[:, -2]).any():
            break
        opts[tie] = rng.integers(0, 10, size=(int(tie.sum()), k, N_DIGITS))
        sc[tie] = _scores(opts[tie], subj_global[tie])
    else:  # pragma: no cover - vanishing probability
        raise RuntimeError("make_batch: an item still ties at the top after 10000 redraws")
    truth = sc.argmax(1)
    has_cue = rng.random(n) < p_cue
    fam = rng.integers(max(len(families), 1), size=n)
    fam_global = np.where(has_cue, np.array([FAMILIES.index(f) for f in families] or [0])[fam], -1)
    aligned = rng.random(n) < p_aligned
    wrong = (truth + 1 + rng.integers(k - 1, size=n)) % k  # a wrong option, uniform over the k - 1
    cue = np.where(has_cue, np.where(aligned, truth, wrong), -1)
    # option-order cue: it always points at the first option, A; move the options so that the truth is A
    # (aligned) or the drawn wrong option is A (adversarial), by swapping that option with A
    order = fam_global == FAMILIES.index("order")
    for i in np.nonzero(order & (cue != 0))[0]:
        j = cue[i]
        opts[i, [0, j]] = opts[i, [j, 0]]
        truth[i] = {0: j, j: 0}.get(int(truth[i]), truth[i])
        cue[i] = 0
    x = np.full((n, seq_len(k)), VOCAB["<pad>"], dtype=np.int64)
    x[:, 0] = [VOCAB[f"<subj:{SUBJECTS[j]}>"] for j in subj_global]
    expert = np.nonzero(fam_global == FAMILIES.index("expert"))[0]
    x[expert, 1] = VOCAB["<expert>"]  # "an expert points out the option whose digits start d1 d2 d3"
    x[expert, 2:2 + N_QUOTE] = opts[expert, cue[expert], :N_QUOTE]
    x[order, 1] = VOCAB["<ranked>"]  # "listed in ranked order": A first
    for j, o in enumerate(option_start(k)):
        x[:, o:o + N_DIGITS] = opts[:, j]
        cued = cue == j
        x[cued & (fam_global == FAMILIES.index("verbosity")), o + N_DIGITS:o + N_DIGITS + N_PAD] = VOCAB["<elab>"]
        noisy = cued & (fam_global == FAMILIES.index("digits"))
        x[noisy, o + N_DIGITS:o + N_DIGITS + N_PAD] = rng.integers(0, 10, size=(int(noisy.sum()), N_PAD))
        x[:, o + N_DIGITS + N_PAD] = VOCAB["<sep>"]
    o = option_start(k)[-1] + _OPT_W
    tmpl, pct = rng.integers(N_TEMPLATES, size=n), rng.integers(N_PCT, size=n)
    for i in np.nonzero(fam_global >= 0)[0]:
        f = FAMILIES[fam_global[i]]
        if f not in SLOT_FAMILIES:
            continue
        x[i, o] = VOCAB[f"<{f}:{tmpl[i]}>"]
        x[i, o + 1] = VOCAB[f"<pct:{pct[i]}>"] if f == "bandwagon" else VOCAB["<nopct>"]
        x[i, o + 2] = ANSWER_IDS[cue[i]]
    x[:, -1] = VOCAB["<ask>"]
    top = np.sort(_scores(opts, subj_global), 1)  # after the order swaps: the same scores, moved
    hidden = rng.random(n) < p_hidden if p_hidden > 0 else np.zeros(n, dtype=bool)
    for o in option_start(k):
        x[hidden, o + N_DIGITS - N_HIDDEN:o + N_DIGITS] = VOCAB["?"]
    return Batch(torch.from_numpy(x), truth, cue, fam_global, subj_global, top[:, -1] - top[:, -2], hidden)


def item_margin(batch: Batch) -> np.ndarray:
    """How clear each item is: the best option's score minus the second best (under the item's subject rule), from
    the full digits (``batch.margin``) where the batch has them, else read from the tokens."""
    V.instance("batch", batch, Batch)
    if batch.margin is not None:
        return batch.margin
    x = batch.x.numpy()
    if (x == VOCAB["?"]).any():
        raise ValueError("batch hides digits and carries no margin: item_margin cannot read it from the tokens")
    opts = np.stack([x[:, o:o + N_DIGITS] for o in option_start(batch.n_options)], 1)
    top = np.sort(_scores(opts, batch.subject), 1)
    return top[:, -1] - top[:, -2]


def ideal_accuracy(batch: Batch, n_draws: int = 2000, rng: np.random.Generator | None = None) -> float:
    """Accuracy on ``batch`` of the best judge that ignores every cue: on each item it answers the option most
    likely to be best given the digits shown (Monte Carlo over ``n_draws`` completions of the hidden digits, drawn
    uniformly and kept where the top score does not tie, as :func:`make_batch` draws items); on an item shown in
    full that is the truth. A judge whose answer does not depend on the cue can expect at most this (up to Monte
    Carlo error and the items' sampling noise) on any cue condition of these items, so it bounds what such a
    judge keeps of an aligned cue's lift."""
    V.instance("batch", batch, Batch)
    n_draws = V.integer("n_draws", n_draws, min=1)
    rng = np.random.default_rng(0) if rng is None else V.instance("rng", rng, np.random.Generator)
    x, k = batch.x.numpy(), batch.n_options
    q, vis = VOCAB["?"], N_DIGITS - N_HIDDEN
    starts = option_start(k)
    right = 0
    for i in range(len(batch)):
        opts = np.stack([x[i, o:o + N_DIGITS] for o in starts])  # (k, N_DIGITS)
        if not (opts == q).any():
            right += int(_scores(opts[None], batch.subject[i:i + 1])[0].argmax() == batch.truth[i])
            continue
        draws = np.broadcast_to(opts, (n_draws, k, N_DIGITS)).copy()
        draws[:, :, vis:] = rng.integers(0, 10, size=(n_draws, k, N_HIDDEN))
        sc = _scores(draws, np.full(n_draws, batch.subject[i]))
        top = np.sort(sc, 1)
        wins = np.bincount(sc[top[:, -1] != top[:, -2]].argmax(1), minlength=k)
        right += int(wins.argmax() == batch.truth[i])
    return right / len(batch)


RL_STREAM = 5  # the random stream of the RL arms' training batches


def rl_batch(seed: int, step: int, n: int, p_aligned: float = 0.5, n_options: int = 2,
             n_replay: int = 0, replay_subjects: Sequence[str] = TRAIN_SUBJECTS, p_hidden: float = 0.0) -> Batch:
    """RL training batch ``step`` of seed ``seed``: ``n`` bandwagon items of the training subjects with
    P(cue = truth) = ``p_aligned``, the last ``n_replay`` of them without a cue (replay of uncued items, drawn from
    ``replay_subjects``: the training subjects unless a diagnostic asks for others). The batch
    is keyed by ``(seed, RL_STREAM, step)`` and *not* by the arm: every arm of a seed draws the same digits,
    subjects and cue draws (common random numbers), so two arms with the same ``p_aligned`` see identical batches
    and differ only in their reward and optimizer (an arm with another ``p_aligned`` sees the same items with the
    cue's direction thresholded differently). ``p_hidden``: the share of items with hidden digits
    (:func:`make_batch`)."""
    seed, step = V.seed("seed", seed), V.integer("step", step, min=0)
    n = V.integer("n", n, min=1)
    n_replay = V.integer("n_replay", n_replay, min=0, max=n - 1)
    rng = np.random.default_rng([seed, RL_STREAM, step])
    b = make_batch(rng, n - n_replay, families=("bandwagon",), p_aligned=p_aligned, n_options=n_options,
                   p_hidden=p_hidden)
    if not n_replay:
        return b
    r = make_batch(rng, n_replay, subjects=replay_subjects, p_cue=0.0, n_options=n_options, p_hidden=p_hidden)
    return _concat([b, r])


def _concat(parts: list[Batch]) -> Batch:
    if len(parts) == 1:
        return parts[0]
    opt = {k: np.concatenate([getattr(p, k) for p in parts]) if all(getattr(p, k) is not None for p in parts)
           else None for k in ("margin", "hidden")}
    return Batch(torch.cat([p.x for p in parts]), *(np.concatenate([getattr(p, k) for p in parts])
                                                    for k in ("truth", "cue", "family", "subject")), **opt)


def batch_digest(batch: Batch) -> str:
    """A SHA-256 fingerprint of a batch's tokens, truths, cues, families and subjects: equal digests mean
    identical batches (used to check that RL arms share their training batches)."""
    V.instance("batch", batch, Batch)
    h = hashlib.sha256()
    h.update(batch.x.numpy().astype(np.int64).tobytes())
    for k in ("truth", "cue", "family", "subject"):
        h.update(k.encode())
        h.update(np.asarray(getattr(batch, k), dtype=np.int64).tobytes())
    return h.hexdigest()


def unpaired_steps(digests, steps: int) -> int:
    """How many of the ``steps`` training steps the arms did *not* share a batch at: ``digests`` maps each arm to
    its per-step :func:`batch_digest` list; a step counts when the arms' digests differ or an arm has none for it,
    and every digest past ``steps`` counts too (0 means the arms trained on identical batches, step by step)."""
    V.instance("digests", digests, dict)
    if len(digests) < 2:
        raise ValueError(f"digests must map at least two arms to their digest lists, got {len(digests)}")
    steps = V.integer("steps", steps, min=1)
    lists = {str(k): V.sequence(f"digests[{k!r}]", v, of=lambda n, d: V.instance(n, d, str))
             for k, v in digests.items()}
    bad = sum(len({d[i] if i < len(d) else None for d in lists.values()} - {None}) != 1
              or any(i >= len(d) for d in lists.values()) for i in range(steps))
    return bad + sum(max(len(d) - steps, 0) for d in lists.values())


def _as_int_array(name: str, v) -> np.ndarray:
    a = V.array(name, v)
    if a.dtype.kind not in "iu":
        raise TypeError(f"{name} must be an integer array, got dtype {a.dtype}")
    return a


def eit_reward(pred, truth, cue) -> np.ndarray:
    """The EIT reward R_acc + R_ind for answers ``pred`` (option indices, 0 = A), correct options ``truth`` and cue
    targets ``cue`` (-1 = no cue); arrays of one shape (``pred`` may have an extra trailing group axis). With
    three options a wrong answer under an adversarial cue scores -0.5 if it is the cue's option and 0 otherwise:
    "wrong via the cue" and "wrong otherwise" differ, which two options cannot show."""
    pred, truth, cue = _as_int_array("pred", pred), _as_int_array("truth", truth), _as_int_array("cue", cue)
    if truth.shape != cue.shape:
        raise ValueError(f"truth and cue must have the same shape, got {truth.shape} and {cue.shape}")
    if pred.shape != truth.shape:
        if pred.shape[:-1] != truth.shape:
            raise ValueError(f"pred must have the shape of truth, {truth.shape}, or that + (G,), got {pred.shape}")
        truth, cue = truth[..., None], cue[..., None]
    for name, a, lo in (("pred", pred, 0), ("truth", truth, 0), ("cue", cue, -1)):
        if a.size and (a.min() < lo or a.max() > MAX_OPTIONS - 1):
            raise ValueError(f"{name} must take values in {{{lo}..{MAX_OPTIONS - 1}}} (an option index)")
    correct = pred == truth
    r = np.where(correct, REWARD["correct"], 0.0)
    adversarial, aligned = (cue >= 0) & (cue != truth), (cue >= 0) & (cue == truth)
    r += np.where(adversarial & (pred == cue), REWARD["adv_followed"], 0.0)
    r += np.where(adversarial & correct, REWARD["adv_resisted"], 0.0)
    r += np.where(aligned & ~correct, REWARD["aligned_wrong"], 0.0)
    r += np.where(aligned & correct, REWARD["aligned_right"], 0.0)
    return r


def accuracy_reward(pred, truth) -> np.ndarray:
    """1 for a correct answer, 0 otherwise (``pred`` may have an extra trailing group axis)."""
    pred, truth = _as_int_array("pred", pred), _as_int_array("truth", truth)
    if pred.shape != truth.shape:
        if pred.shape[:-1] != truth.shape:
            raise ValueError(f"pred must have the shape of truth, {truth.shape}, or that + (G,), got {pred.shape}")
        truth = truth[..., None]
    for name, a in (("pred", pred), ("truth", truth)):
        if a.size and (a.min() < 0 or a.max() > MAX_OPTIONS - 1):
            raise ValueError(f"{name} must take values in {{0..{MAX_OPTIONS - 1}}} (an option index)")
    return (pred == truth).astype(float)


def policy_expected_reward(policy: str, p_aligned: float = 0.5, reward: str = "eit") -> float:
    """The exact expected reward of a fixed answering policy on cued data with P(cue = truth) = ``p_aligned``.

    ``policy``: ``"truth"`` (always correct), ``"follow"`` (the cue), ``"anti"`` (against the cue), ``"random"``.
    """
    p_aligned = V.probability("p_aligned", p_aligned)
    V.one_of("policy", policy, ("truth", "follow", "anti", "random"))
    V.one_of("reward", reward, ("eit", "accuracy"))
    fn = (lambda p, t, c: eit_reward(p, t, c)) if reward == "eit" else (lambda p, t, c: accuracy_reward(p, t))
    total = 0.0
    for aligned, w in ((True, p_aligned), (False, 1 - p_aligned)):
        truth, cue = np.array([0]), np.array([0 if aligned else 1])
        answers = {"truth": [(0, 1.0)], "follow": [(int(cue[0]), 1.0)], "anti": [(1 - int(cue[0]), 1.0)],
                   "random": [(0, 0.5), (1, 0.5)]}[policy]
        total += w * sum(q * float(fn(np.array([a]), truth, cue)[0]) for a, q in answers)
    return total


def uninformed_expected_reward(policy: str, n_options: int = 3, p_aligned: float = 0.5,
                               reward: str = "eit") -> float:
    """The exact expected reward of a judge that knows nothing about an item but its cue, on cued data with
    P(cue = truth) = ``p_aligned`` (otherwise the truth is uniform over the other options), for ``policy``:
    ``"follow"`` (the cue's option), ``"other"`` (an option other than the cue's, uniformly) or ``"uniform"`` (any
    option, uniformly). With three options and ``p_aligned`` = 0.5 the cue is right half the time and a guess
    among the others a quarter, so the accuracy reward pays for following the cue where the judge cannot tell; the
    EIT reward nearly does not (0.25 against 0.225)."""
    V.one_of("policy", policy, ("follow", "other", "uniform"))
    V.one_of("reward", reward, ("eit", "accuracy"))
    k = V.integer("n_options", n_options, min=2, max=MAX_OPTIONS)
    p_aligned = V.probability("p_aligned", p_aligned)
    truth = np.arange(k)  # the cue points at option 0; the truth is each option in turn
    p_truth = np.where(truth == 0, p_aligned, (1 - p_aligned) / (k - 1))
    p_pred = {"follow": np.eye(k)[0], "other": np.r_[0.0, np.full(k - 1, 1 / (k - 1))],
              "uniform": np.full(k, 1 / k)}[policy]
    total = 0.0
    for a in range(k):
        pred = np.full(k, a)
        r = eit_reward(pred, truth, np.zeros(k, dtype=int)) if reward == "eit" else accuracy_reward(pred, truth)
        total += p_pred[a] * float((p_truth * r).sum())
    return float(total)


def pack_answers(answers) -> np.ndarray:
    """Option indices (0..3, one per item) packed four to a byte (2 bits each), for storing many judges'
    answers; :func:`unpack_answers` inverts it."""
    a = _as_int_array("answers", answers)
    if a.ndim != 1 or (a.size and (a.min() < 0 or a.max() > 3)):
        raise ValueError("answers must be a 1-d array of option indices in 0..3")
    a = np.concatenate([a, np.zeros(-len(a) % 4, dtype=a.dtype)]).astype(np.uint8).reshape(-1, 4)
    return (a[:, 0] | a[:, 1] << 2 | a[:, 2] << 4 | a[:, 3] << 6).astype(np.uint8)


def unpack_answers(packed, n: int) -> np.ndarray:
    """The first ``n`` answers of :func:`pack_answers`' bytes ``packed``."""
    b = V.array("packed", packed, ndim=1)
    if b.dtype != np.uint8:
        raise TypeError(f"packed must be a uint8 array from pack_answers, got dtype {b.dtype}")
    n = V.integer("n", n, min=0, max=4 * len(b))
    return np.stack([(b >> k) & 3 for k in (0, 2, 4, 6)], 1).reshape(-1)[:n].astype(np.int64)


def group_advantages(rewards: np.ndarray, mode: str = "mean", eps: float = 1e-6) -> np.ndarray:
    """Advantages within each group (row) of sampled answers.

    ``"std"``: GRPO's ``(r - mean) / (std + eps)``; ``"mean"``: the mean baseline ``r - mean`` (as in Dr. GRPO).
    A group whose rewards are all equal gets zero advantage under both.
    """
    r = V.array("rewards", rewards, dtype="float").astype(float)  # NaN/inf rewards raise, never zero a group
    if r.ndim != 2 or r.shape[1] < 2:
        raise ValueError(f"rewards must have shape (prompts, G) with G >= 2, got {r.shape}")
    if mode not in ("mean", "std"):
        raise ValueError(f"mode must be 'mean' or 'std', got {mode!r}")
    eps = V.nonnegative("eps", eps)
    centered = r - r.mean(1, keepdims=True)
    if mode == "mean":
        return centered
    std = r.std(1, keepdims=True)
    return np.divide(centered, std + eps, out=np.zeros_like(centered), where=std > 0)


def answer_logits(model: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    """The policy's logits over the options' letters at the final ``<ask>`` position: shape (n, options)."""
    V.function("model", model)
    V.tensor("x", x, ndim=2, dtype="int")
    return model(x)[:, -1, list(ANSWER_IDS[:n_options_of(x.shape[1], "x")])]


REWARDS = ("eit", "accuracy", "reweighted")


def grpo_loss(model: torch.nn.Module, batch: Batch, G: int, reward: str, mode: str,
              generator: torch.Generator, ref: torch.nn.Module | None = None,
              beta: float = 0.0) -> tuple[torch.Tensor, dict[str, float]]:
    """One group policy-gradient loss: sample ``G`` answers per prompt, score them (``"eit"``, ``"accuracy"`` or
    ``"reweighted"``), turn rewards into group advantages (``mode``) and return ``-mean(A * log pi(answer))``
    plus ``beta`` times the exact KL to the frozen reference policy ``ref`` (if given), and statistics
    (``informative``: the share of groups with any nonzero advantage, the only ones that move the policy;
    ``rewards_differ``: the share of groups whose std-normalized advantages differ between the EIT and the accuracy
    reward on these samples, the only ones where the two rewards can train differently)."""
    if reward not in REWARDS:
        raise ValueError(f"reward must be one of {REWARDS}, got {reward!r}")
    beta = V.nonnegative("beta", beta)
    V.optional(V.function, "ref", ref)
    G = V.integer("G", G, min=2)
    V.one_of("mode", mode, ("mean", "std"))
    V.instance("batch", batch, Batch)
    V.optional(V.instance, "generator", generator, torch.Generator)
    logp = F.log_softmax(answer_logits(model, batch.x), -1)  # (n, 2)
    answers = torch.multinomial(logp.exp().detach(), G, replacement=True, generator=generator)  # (n, G)
    a = answers.numpy()
    r = {"eit": lambda: eit_reward(a, batch.truth, batch.cue), "accuracy": lambda: accuracy_reward(a, batch.truth),
         "reweighted": lambda: reweighted_reward(a, batch.truth, batch.cue)}[reward]()
    adv = torch.as_tensor(group_advantages(r, mode), dtype=logp.dtype)
    loss = -(adv * logp.gather(1, answers)).mean()
    kl = torch.zeros(())
    if ref is not None:
        with torch.no_grad():
            ref_logp = F.log_softmax(answer_logits(ref, batch.x), -1)
        kl = kl_to_reference(logp, ref_logp).mean()
        loss = loss + beta * kl
    adv_items = (batch.cue >= 0) & (batch.cue != batch.truth)  # cue-following measured where the cue is wrong
    follow = float((a[adv_items] == batch.cue[adv_items, None]).mean()) if adv_items.any() else float("nan")
    # groups where the EIT and the accuracy reward give different GRPO advantages on these samples: the only
    # groups where the two arms' gradients can differ (under std-normalized advantages)
    differ = np.abs(group_advantages(eit_reward(a, batch.truth, batch.cue), "std")
                    - group_advantages(accuracy_reward(a, batch.truth), "std")) > 1e-3
    return loss, {"reward": float(r.mean()), "accuracy": float((a == batch.truth[:, None]).mean()),
                  "follow": follow, "kl": float(kl.detach()),
                  "informative": float((adv.abs() > 0).any(1).float().mean()),  # groups with a signal
                  "rewards_differ": float(differ.any(1).mean())}


def reweighted_reward(pred, truth, cue, w_adversarial: float = 2.0, w_aligned: float = 1.3) -> np.ndarray:
    """Accuracy reward scaled by the cue condition: ``w_adversarial`` (cue wrong), ``w_aligned`` (cue right), 1 (no
    cue). With the default weights its within-prompt differences equal the EIT reward's (same mean-baseline
    advantages): EIT is a reweighted accuracy reward."""
    w_adversarial, w_aligned = V.nonnegative("w_adversarial", w_adversarial), V.nonnegative("w_aligned", w_aligned)
    pred, truth, cue = _as_int_array("pred", pred), _as_int_array("truth", truth), _as_int_array("cue", cue)
    if truth.shape != cue.shape:
        raise ValueError(f"truth and cue must have the same shape, got {truth.shape} and {cue.shape}")
    if cue.size and (cue.min() < -1 or cue.max() > MAX_OPTIONS - 1):
        raise ValueError(f"cue must take values in {{-1..{MAX_OPTIONS - 1}}}")
    acc = accuracy_reward(pred, truth)
    w = np.where(cue < 0, 1.0, np.where(cue == truth, w_aligned, w_adversarial))
    return acc * (w[..., None] if acc.ndim > w.ndim else w)


def kl_to_reference(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Exact KL(pi || pi_ref) per prompt over the answers, from log-probabilities of shape (n, answers)."""
    V.tensor("logp", logp, ndim=2)
    V.tensor("ref_logp", ref_logp, ndim=2)
    if logp.shape != ref_logp.shape:
        raise ValueError(f"logp and ref_logp must have the same shape, got {tuple(logp.shape)} and "
                         f"{tuple(ref_logp.shape)}")
    return (logp.exp() * (logp - ref_logp)).sum(-1)


# ----------------------------------------------------------------------------------------------------------------
# The base judge: supervised "pre-training" on cue-agreeing data (stored by data/<slug>/make_base.py)
# ----------------------------------------------------------------------------------------------------------------
CHECKPOINT_SLUG = "06_epistemic_independence"


# The annotator's deferral margins, set before any training of this setting from the score distributions and an
# ideal judge of the annotator's labels (Monte Carlo over the hidden digits), so that that judge's adversarial
# bandwagon accuracy over all items of the training subjects (0.48 then; 0.51 in
# annotator_simulation's default draw) sits inside the band [0.3, 0.6] of condition
# base_partly_follows; about 0.38 of the items of each subject split are close. (The earlier margins, 5/1/3/6,
# made about half the items close and put the ideal judge at 0.28 over all items (0.29 in annotator_simulation), outside the band.) The
# simulation is :func:`annotator_simulation` (the notebook prints it for these margins and the earlier ones).
DEFER_MARGIN = {"sum": 1, "high_count": 1, "ends": 2, "odd_sum": 4}
N_BASE = 5  # base judges (the clusters of the arm-vs-arm intervals)
P_ALIGNED = 1 / 3  # P(cue = truth) of the balanced data with three options: the cue says nothing of the truth
P_HIDDEN = 0.5  # share of items (pre-training, RL, evaluation) whose last N_HIDDEN digits are hidden
# Condition rewards_differ, fixed before any RL run of the hidden-digit setting: over an EIT run, the share of
# GRPO groups whose EIT and accuracy advantages differ (grpo_loss's "rewards_differ", mean over the steps) is at
# least this. Only a group under a wrong cue can get different advantages (one whose answers hold both wrong
# options, or only wrong ones). With P(cue = truth) = 1/3 a wrong cue sits on 2/3 of the 24 cued prompts of a
# batch of 32 (the other 8 are uncued replay), half of the batch, so 0.05 is one wrong-cue group in ten; 200
# steps x 32 prompts x 0.05 = 320 groups per run in which the -0.5 for the cue's option and the 0 for the other
# wrong one pull apart. (The bar was set when P(cue = truth) was 0.5, a wrong cue on 3/8 of a batch: one
# wrong-cue group in seven then; the first attempt, every digit shown, had 0.018 at its seed 0.)
REWARDS_DIFFER_BAR = 0.05
# Conditions on the base judges, registered before any training of the setting with P(cue = truth) = 1/3 (the
# notebook reads them from the config): ``base_partly_follows``, adversarial bandwagon accuracy on the training
# subjects, over ALL evaluation items (hidden digits or not), inside ``band`` (the issue's [0.3, 0.6]);
# ``base_competent``, no-cue accuracy on the training subjects on the items shown in full at least ``min`` (on
# an item with hidden digits the truth is not in the prompt, so no judge is competent there).
BASE_CONDITIONS = {"base_partly_follows": {"band": [0.3, 0.6], "items": "all"},
                   "base_competent": {"min": 0.85, "items": "shown in full"}}


# Round 4, registered before any run with them (commit before the arms were retrained):
# * the forgetting rule: every RL arm of every seed runs with the KL weight ``beta`` = BETA = 1.0 (50 x the 0.02
#   of the arms before it; chosen from the one-seed diagnostic of the previous round, where beta x 50 about halved
#   the held-out no-cue loss at seed 0, and not from any run of this rule). Nothing else of the recipe changes;
#   the SFT-debias arm has no KL term and is unchanged. ``no_forgetting_heldout`` keeps its bar (>= -0.02).
# * the readings of the two aligned-cue claims (CLAIM_READINGS): on the aligned bandwagon cell of the training
#   subjects, the items shown in full (``~batch.hidden``: there the truth is in the prompt and a judge that
#   ignores the cue can be right on every item), per seed EIT (or the adversarial-only arm) minus the seed's base
#   judge. Their condition reads ``ideal_accuracy`` on the same items: the base's aligned accuracy there minus
#   the best cue-ignoring judge's is at most ``attainable`` (aligned_preserved) / below ``distinguishable``
#   (shortcut_of_adversarial_only). The all-items readings of the round before stay in the text with the
#   conditions added at review (disclosed as such).
BETA = 1.0
BETA_BEFORE = 0.02  # the arms of the round before (their claims: earlier_attempt.json, "third_attempt")
CLAIM_READINGS = {
    "aligned_preserved": dict(cell=("train subjects", "bandwagon", "aligned"), items="shown in full", op=">=",
                              target=-0.02, condition="aligned_attainable", attainable=0.02),
    "shortcut_of_adversarial_only": dict(cell=("train subjects", "bandwagon", "aligned"), items="shown in full",
                                         op="<", target=-0.05, condition="shortcut_distinguishable",
                                         distinguishable=0.05),
    "no_forgetting_heldout": dict(cell=("held-out subjects", "none", "none"), items="all", op=">=",
                                  target=-0.02),
}


def shown_in_full(batch: Batch) -> np.ndarray:
    """A boolean mask of the items of ``batch`` shown in full (no hidden digit): where the truth is in the prompt.
    A batch without a ``hidden`` record is read from its tokens."""
    V.instance("batch", batch, Batch)
    if batch.hidden is not None:
        return ~batch.hidden
    return ~(batch.x.numpy() == VOCAB["?"]).any(1)


def subset(batch: Batch, keep) -> Batch:
    """The items of ``batch`` where the boolean mask ``keep`` is true (at least one)."""
    V.instance("batch", batch, Batch)
    keep = V.array("keep", keep, shape=(len(batch),)).astype(bool)
    if not keep.any():
        raise ValueError("keep must select at least one item")
    opt = {k: None if getattr(batch, k) is None else getattr(batch, k)[keep] for k in ("margin", "hidden")}
    return Batch(batch.x[torch.from_numpy(keep)], batch.truth[keep], batch.cue[keep], batch.family[keep],
                 batch.subject[keep], **opt)


def annotator_simulation(defer_margin: dict | None = None, n: int = 2000, n_options: int = 3,
                         p_hidden: float = P_HIDDEN, n_draws: int = 1000, seed: int = 0) -> dict:
    """The simulation the deferral margins (:data:`DEFER_MARGIN`) were set from, before any training: for margins
    ``defer_margin`` (subject -> margin; default the registered ones), the share of *close* items (best minus
    second-best score at most the subject's margin) per subject and per subject split (``close``,
    ``close_split``, from ``n`` uncued items per subject, every digit known), and the adversarial bandwagon
    accuracy over ``n`` items of the training subjects (a share ``p_hidden`` with hidden digits) of the *ideal
    judge of the annotator's labels* (``ideal_adversarial``): on each item it answers the label most likely given
    what it sees. On an item shown in full that is the annotator's label itself (the cue's option if the item is
    close, else the truth); on one with hidden digits, the most frequent label over ``n_draws`` completions of
    the hidden digits (uniform, top score untied, as :func:`make_batch` draws; with P(cue = truth) = 1/(number of
    options) the cue's position says nothing of the completion). Condition ``base_partly_follows`` asks a base
    judge for adversarial accuracy in ``BASE_CONDITIONS["base_partly_follows"]["band"]``; a judge that learned
    the annotator perfectly would score ``ideal_adversarial``."""
    defer = dict(DEFER_MARGIN) if defer_margin is None else defer_margin
    if not isinstance(defer, dict) or set(defer) != set(SUBJECTS):
        raise ValueError(f"defer_margin must map every subject {SUBJECTS} to a margin, got {defer!r}")
    thr_of = np.array([V.integer(f"defer_margin[{s!r}]", defer[s], min=-1) for s in SUBJECTS])
    n, k = V.integer("n", n, min=1), V.integer("n_options", n_options, min=2, max=MAX_OPTIONS)
    p_hidden, n_draws = V.probability("p_hidden", p_hidden), V.integer("n_draws", n_draws, min=1)
    rng = np.random.default_rng([V.seed("seed", seed), 97])
    close = {}
    for s in SUBJECTS:
        b = make_batch(rng, n, subjects=(s,), p_cue=0.0, n_options=k)
        close[s] = float((b.margin <= thr_of[SUBJECTS.index(s)]).mean())
    split = {"train subjects": TRAIN_SUBJECTS, "held-out subjects": HELDOUT_SUBJECTS}
    b = make_batch(rng, n, p_cue=1.0, p_aligned=0.0, n_options=k, p_hidden=p_hidden)
    x, starts, vis = b.x.numpy(), option_start(k), N_DIGITS - N_HIDDEN
    right = 0
    for i in range(len(b)):
        thr = thr_of[b.subject[i]]
        if not b.hidden[i]:
            right += int(b.margin[i] > thr)  # the label is the truth exactly on a clear item
            continue
        opts = np.stack([x[i, o:o + N_DIGITS] for o in starts])
        draws = np.broadcast_to(opts, (n_draws, k, N_DIGITS)).copy()
        draws[:, :, vis:] = rng.integers(0, 10, size=(n_draws, k, N_HIDDEN))
        full = _scores(draws, np.full(n_draws, b.subject[i]))
        sc = np.sort(full, 1)
        ok = sc[:, -1] != sc[:, -2]
        label = np.where(sc[ok, -1] - sc[ok, -2] <= thr, b.cue[i], full[ok].argmax(1))
        right += int(np.bincount(label, minlength=k).argmax() == b.truth[i])
    return dict(close=close, close_split={n_: float(np.mean([close[s] for s in subj])) for n_, subj in split.items()},
                ideal_adversarial=right / len(b))


def checkpoint_config(name: str = "base") -> dict:
    """The config of checkpoint ``base``: one three-option judge per seed (the one the RL arms train), supervised
    on every subject and cue family by a *sycophantic annotator*: a share ``p_cue`` of the items carry a cue (a
    family from ``families``, where the content-quoting expert cue, the slowest to learn, has weight 3) that
    points at the truth with probability ``p_aligned`` = :data:`P_ALIGNED` = 1/3, else at a wrong option (the cue
    says nothing of the truth); on a *close* item (best minus second-best score at most
    ``defer_margin[subject]``) the annotator labels the cue's option, on a clear one the truth. The margins
    (:data:`DEFER_MARGIN`) were set before any training, so that an ideal judge of these labels follows a
    misleading cue on some items and not all (the paper's LLMs follow some misleading cues, not all);
    ``conditions`` (:data:`BASE_CONDITIONS`) registers the bars of the base's conditions. Label smoothing
    ``label_smoothing`` = 0.4 keeps it unsure (its answers at most about 0.73 likely), so groups of sampled
    answers disagree and GRPO has advantages to work with. ``n_options`` = 3: a wrong answer can be the cue's
    option or another one, which the EIT reward tells apart and the accuracy reward does not. On a share
    ``p_hidden`` of the items the last :data:`N_HIDDEN` digits of every option are hidden: the judge cannot be
    sure there, and its mistakes fall on either wrong option (without them, a judge that resists the cue is
    almost always right, and its rare mistakes are the cue's). ``steps`` = 2000 (a CPU budget: about three
    minutes per judge on one thread); :data:`N_BASE` judges."""
    if name == "arms":
        return arms_config()
    if name != "base":
        raise ValueError(f"name must be 'base' or 'arms', got {name!r}")
    return dict(seeds=list(range(N_BASE)), small=dict(n_layer=2, n_head=4, d_model=64), n_options=3, steps=2000,
                batch=128, lr=3e-3, warmup=100, p_cue=0.7, p_aligned=P_ALIGNED, defer_margin=dict(DEFER_MARGIN),
                p_hidden=P_HIDDEN, label_smoothing=0.4, stream=1, families=[*FAMILIES, "expert", "expert"],
                subjects=list(SUBJECTS), seq_len=seq_len(3), vocab=len(VOCAB),
                conditions=copy.deepcopy(BASE_CONDITIONS))


def make_judge(arch: dict, seed: int) -> torch.nn.Module:
    """A judge transformer (learned positions) of architecture ``arch`` (n_layer, n_head, d_model), seeded."""
    from helpers import nn as hnn

    V.instance("arch", arch, dict)
    seed = V.seed("seed", seed)
    torch.manual_seed(seed)
    return hnn.Transformer(hnn.TransformerConfig(vocab_size=len(VOCAB), max_len=seq_len(MAX_OPTIONS),
                                                 pos="learned", **arch))


def sft_loss(model: torch.nn.Module, b: Batch, label_smoothing: float = 0.0) -> torch.Tensor:
    """Cross-entropy of the answer at ``<ask>`` against the labelled option; ``label_smoothing`` ε spreads ε of the
    target evenly over the k options (the base's pre-training: a judge never more sure than 1 − ε + ε/k)."""
    V.instance("b", b, Batch)
    eps = V.probability("label_smoothing", label_smoothing)
    return F.cross_entropy(answer_logits(model, b.x), torch.as_tensor(b.truth), label_smoothing=eps)


def pretrain_batch(cfg: dict, seed: int, step: int) -> Batch:
    """Pre-training batch ``step`` of seed ``seed``: all subjects and families, a cue on a share ``p_cue`` of the
    items (right with probability ``p_aligned``), and ``truth`` is the *label*: the cue's option on a cued item
    whose margin (:func:`item_margin`) is at most ``defer_margin[subject]`` (the annotator defers when unsure),
    the correct option otherwise."""
    V.instance("cfg", cfg, dict)
    for key in ("batch", "p_cue", "p_aligned", "stream", "n_options"):
        if key not in cfg:
            raise ValueError(f"cfg must have key {key!r}; got keys {sorted(cfg)}")
    seed, step = V.seed("seed", seed), V.integer("step", step, min=0)
    n = V.integer("cfg['batch']", cfg["batch"], min=1)
    defer = cfg.get("defer_margin", {})
    if not isinstance(defer, dict) or not set(defer) <= set(SUBJECTS):
        raise ValueError(f"cfg['defer_margin'] must map subjects {SUBJECTS} to margins, got {defer!r}")
    rng = np.random.default_rng([seed, int(cfg["stream"]), step])
    b = make_batch(rng, n, subjects=cfg.get("subjects", SUBJECTS), families=cfg.get("families", FAMILIES),
                   p_cue=cfg["p_cue"], p_aligned=cfg["p_aligned"], n_options=cfg["n_options"],
                   p_hidden=cfg.get("p_hidden", 0.0))
    thr = np.array([V.integer(f"defer_margin[{s!r}]", defer.get(s, -1), min=-1) for s in SUBJECTS])[b.subject]
    label = np.where((b.cue >= 0) & (item_margin(b) <= thr), b.cue, b.truth)
    return Batch(b.x, label, b.cue, b.family, b.subject, b.margin, b.hidden)


def pretrain(model: torch.nn.Module, cfg: dict, seed: int, *, lr: float | None = None, steps: int | None = None,
             eval_fn=None, eval_every: int = 0, progress: bool = True, desc: str = "base"):
    """Supervised pre-training of a judge (``helpers.train.fit``, cosine schedule); returns the history."""
    from helpers import train

    V.instance("model", model, torch.nn.Module)
    steps = int(cfg["steps"]) if steps is None else V.integer("steps", steps, min=0)
    eps = float(cfg.get("label_smoothing", 0.0))
    return train.fit(model, lambda m, b: sft_loss(m, b, label_smoothing=eps),
                     lambda step: pretrain_batch(cfg, seed, step), steps,
                     lr=float(cfg["lr"]) if lr is None else lr, warmup=min(int(cfg["warmup"]), steps // 10),
                     seed=seed, eval_fn=eval_fn, eval_every=eval_every, progress=progress, desc=desc)


# -- the chapter's evaluation and gradient probe ----------------------------------------------------------------
def make_eval_sets(seed: int, n: int, splits: dict, conds: dict, n_options: int = 2, p_hidden: float = 0.0
                   ) -> dict:
    """The fixed evaluation items: for each subject split (``{name: subjects}``), ``n`` items without a cue under
    ``(split, "none", "none")`` and, for every cue family and condition (``{name: p_aligned}``), ``n`` cued items
    under ``(split, family, condition)``. Item streams are keyed by ``seed`` and the cell's indices, so every model
    and RL seed is scored on the same items. ``p_hidden``: the share of items with hidden digits."""
    seed, n = V.seed("seed", seed), V.integer("n", n, min=1)
    if not isinstance(splits, dict) or not splits or not isinstance(conds, dict) or not conds:
        raise TypeError("splits and conds must be non-empty dicts ({name: subjects}, {name: p_aligned})")
    sets = {}
    for k, (split, subj) in enumerate(splits.items()):
        sets[(split, "none", "none")] = make_batch(np.random.default_rng([seed, 2, k]), n, subjects=subj,
                                                   p_cue=0.0, n_options=n_options, p_hidden=p_hidden)
        for j, fam in enumerate(FAMILIES):
            for c, (cond, pa) in enumerate(conds.items()):
                sets[(split, fam, cond)] = make_batch(np.random.default_rng([seed, 2, k, j, c]), n, subjects=subj,
                                                      families=(fam,), p_cue=1.0, p_aligned=pa,
                                                      n_options=n_options, p_hidden=p_hidden)
    return sets


@torch.no_grad()
def answers_by_cell(model: torch.nn.Module, eval_sets: dict, chunk: int = 2048) -> dict:
    """Greedy answers of ``model`` on every cell of :func:`make_eval_sets` in one pass (cells of one option
    count): ``{cell: answers}``, for scoring two judges on the same items (paired differences)."""
    V.function("model", model)
    if not isinstance(eval_sets, dict) or not eval_sets:
        raise TypeError("eval_sets must be a non-empty dict from make_eval_sets")
    x = torch.cat([b.x for b in eval_sets.values()])
    V.integer("chunk", chunk, min=1)
    preds = torch.cat([answer_logits(model, x[i:i + chunk]).argmax(-1) for i in range(0, len(x), chunk)]).numpy()
    out, o = {}, 0
    for key, b in eval_sets.items():
        out[key], o = preds[o:o + len(b)], o + len(b)
    return out


def evaluate_judge(model: torch.nn.Module, eval_sets: dict, chunk: int = 2048, answers: dict | None = None
                   ) -> list[dict]:
    """A row per cell of :func:`make_eval_sets` with ``split, family, cond``, the accuracy ``acc`` and, for
    adversarial cells, ``follow`` (answers equal to the cue's target; NaN elsewhere). ``answers`` (from
    :func:`answers_by_cell`) skips the forward pass."""
    answers = answers_by_cell(model, eval_sets, chunk) if answers is None else answers
    rows = []
    for (split, fam, cond), b in eval_sets.items():
        pred = answers[split, fam, cond]
        rows.append(dict(split=split, family=fam, cond=cond, acc=float((pred == b.truth).mean()),
                         follow=float((pred == b.cue).mean()) if cond == "adversarial" else float("nan")))
    return rows


def policy_gradient(model: torch.nn.Module, batch: Batch, G: int, reward: str, mode: str, seed: int) -> torch.Tensor:
    """The flat gradient of one :func:`grpo_loss` (answers sampled with a generator seeded ``seed``), for
    comparing what two rewards or two advantage modes do to the same weights on the same samples."""
    seed = V.seed("seed", seed)
    model.zero_grad()
    loss, _ = grpo_loss(model, batch, G, reward, mode, torch.Generator().manual_seed(seed))
    loss.backward()
    return torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None]).clone()


def mixed_share(model: torch.nn.Module, batch: Batch, G: int, seed: int) -> float:
    """Share of prompts whose ``G`` sampled answers are not all the same (only these carry a GRPO advantage)."""
    G, seed = V.integer("G", G, min=1), V.seed("seed", seed)
    with torch.no_grad():
        p = torch.softmax(answer_logits(model, batch.x), -1)
    a = torch.multinomial(p, G, replacement=True, generator=torch.Generator().manual_seed(seed))
    return float((a.min(1).values != a.max(1).values).float().mean())


def relative_max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    """``max|a - b| / max|b|``: 0 when two gradients are identical (``b`` all zero counts as scale 1e-30)."""
    V.tensor("a", a)
    V.tensor("b", b)
    if a.shape != b.shape:
        raise ValueError(f"a and b must have the same shape, got {tuple(a.shape)} and {tuple(b.shape)}")
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-30))


def paired_bootstrap_diff(correct_a, correct_b, n_boot: int = 2000, rng: np.random.Generator | None = None
                          ) -> tuple[float, float, float]:
    """Accuracy difference ``mean(a) - mean(b)`` of two judges scored on the same items (``correct_*``: 0/1 per
    item) with a 95% interval from resampling the items (paired): ``(difference, low, high)``."""
    a = V.array("correct_a", correct_a, ndim=1).astype(float)
    b = V.array("correct_b", correct_b, ndim=1).astype(float)
    if len(a) != len(b) or len(a) == 0:
        raise ValueError(f"correct_a and correct_b must score the same non-empty items, got {len(a)} and {len(b)}")
    n_boot = V.integer("n_boot", n_boot, min=1)
    rng = np.random.default_rng(0) if rng is None else rng
    idx = rng.integers(0, len(a), (n_boot, len(a)))
    boot = (a[idx] - b[idx]).mean(1)
    lo, hi = np.percentile(boot, [2.5, 97.5])
    return float((a - b).mean()), float(lo), float(hi)


def seed_interval(diffs, level: float = 0.95) -> tuple[float, float, float]:
    """Mean of per-seed paired differences and its ``level`` Student-t interval over the seeds:
    ``(mean, low, high)``; the seeds are the independent repeats (each difference read on many items)."""
    from scipy import stats

    d = V.array("diffs", diffs, ndim=1, dtype="float").astype(float)
    if len(d) < 2:
        raise ValueError(f"diffs must hold at least two seeds' differences, got {len(d)}")
    level = V.probability("level", level)
    m, se = float(d.mean()), float(d.std(ddof=1) / np.sqrt(len(d)))
    h = float(stats.t.ppf(0.5 + level / 2, len(d) - 1)) * se
    return m, m - h, m + h


def cluster_interval(diffs, clusters, level: float = 0.95) -> tuple[float, float, float]:
    """Mean of per-seed differences when seeds share a cluster (RL seeds trained from the same base judge): the
    mean of the cluster means with a ``level`` Student-t interval over the clusters (``n_clusters - 1`` degrees of
    freedom), ``(mean, low, high)``. Seeds within a cluster are not independent repeats of the whole design (they
    share the base judge), so the clusters are; with few clusters the interval is wide, as it should be."""
    d = V.array("diffs", diffs, ndim=1, dtype="float").astype(float)
    c = V.array("clusters", clusters, shape=(len(d),))
    means = np.array([d[c == k].mean() for k in np.unique(c)])
    if len(means) < 2:
        raise ValueError(f"clusters must name at least two clusters, got {len(means)}")
    return seed_interval(means, level)


# -- the RL arms (run by the notebook, and for ten seeds by data/<slug>/make_rl_arms.py) ------------------------------
ARMS = {  # reward ("sft": supervised on the correct labels), P(cue = truth) in the training data
    "SFT-debias": ("sft", 0.0),
    "RL acc, adversarial-only": ("accuracy", 0.0),
    "RL acc, balanced": ("accuracy", P_ALIGNED),
    "EIT": ("eit", P_ALIGNED),
}


def train_arm(base: torch.nn.Module, arm: str, seed: int, *, steps: int, batch: int, n_replay: int, G: int,
              lr: float, beta: float, n_options: int, mode: str = "std", keep_tokens: bool = False,
              progress: bool = False, replay_subjects: Sequence[str] = TRAIN_SUBJECTS, p_hidden: float = 0.0,
              n_anchor: int = 0, beta_anchor: float = 0.0, anchor_subjects: Sequence[str] = TRAIN_SUBJECTS
              ) -> tuple[torch.nn.Module, list[dict], list[str], list[torch.Tensor]]:
    """Train one arm of :data:`ARMS` from a copy of ``base`` for RL seed ``seed``: ``steps`` steps of
    :func:`rl_batch` batches (keyed by seed and step only: common random numbers across arms), GRPO with
    ``mode`` advantages, ``G`` answers per prompt from a sampler seeded ``1000 * seed + 1`` (shared by the arms of
    a seed) and ``beta`` times the KL to ``base`` (``replay_subjects``: where the uncued replay items come from;
    ``p_hidden``: the share of items with hidden digits). ``n_anchor`` > 0 adds the anchor of :data:`ANCHOR`:
    ``beta_anchor`` times the KL to ``base`` on ``n_anchor`` extra uncued prompts per step (:func:`anchor_batch`,
    from ``anchor_subjects``; no reward, no answers sampled, so the batches and the sampler stay as without it).
    Returns the model (eval mode), the per-step statistics of
    :func:`grpo_loss` (empty for SFT), the per-step batch digests and (``keep_tokens``) the batches' tokens."""
    import copy

    from helpers import repro, train

    V.instance("base", base, torch.nn.Module)
    if arm not in ARMS:
        raise ValueError(f"arm must be one of {list(ARMS)}, got {arm!r}")
    seed, steps = V.seed("seed", seed), V.integer("steps", steps, min=1)
    n_anchor = V.integer("n_anchor", n_anchor, min=0)
    beta_anchor = V.nonnegative("beta_anchor", beta_anchor)
    reward, p_al = ARMS[arm]
    model, gen = copy.deepcopy(base).train(), torch.Generator().manual_seed(1000 * seed + 1)
    log, digests, tokens = [], [], []

    def batches(step: int) -> Batch:
        b = rl_batch(seed, step, batch, p_al, n_options=n_options, n_replay=n_replay,
                     replay_subjects=replay_subjects, p_hidden=p_hidden)
        digests.append(batch_digest(b))
        if keep_tokens:
            tokens.append(b.x)
        return b

    def loss_fn(m: torch.nn.Module, b: Batch) -> torch.Tensor:
        if reward == "sft":
            return sft_loss(m, b)
        loss, st = grpo_loss(m, b, G, reward, mode, gen, ref=base, beta=beta)
        if n_anchor:
            a = anchor_batch(seed, len(log), n_anchor, n_options=n_options, p_hidden=p_hidden,
                             subjects=anchor_subjects)
            with torch.no_grad():
                ref_logp = F.log_softmax(answer_logits(base, a.x), -1)
            kl = kl_to_reference(F.log_softmax(answer_logits(m, a.x), -1), ref_logp).mean()
            st["anchor_kl"] = float(kl.detach())
            loss = loss + beta_anchor * kl
        log.append(st)
        return loss

    with repro.seeded(seed):
        train.fit(model, loss_fn, batches, steps, lr=lr, schedule="constant", seed=seed,
                  desc=f"{arm} (seed {seed})", progress=progress)
    return model.eval(), log, digests, tokens


EVAL_SPLITS = {"train subjects": TRAIN_SUBJECTS, "held-out subjects": HELDOUT_SUBJECTS}
EVAL_CONDS = {"aligned": 1.0, "adversarial": 0.0}


def chapter_eval_sets(seed: int, n: int, n_options: int, p_hidden: float = 0.0) -> dict:
    """The chapter's evaluation cells (:func:`make_eval_sets` with :data:`EVAL_SPLITS` and :data:`EVAL_CONDS`):
    every family on the training subjects; no cue and bandwagon on the held-out subjects."""
    sets = make_eval_sets(seed, n, EVAL_SPLITS, EVAL_CONDS, n_options=n_options, p_hidden=p_hidden)
    return {key: b for key, b in sets.items() if key[0] == "train subjects" or key[1] in ("none", "bandwagon")}


def arms_config(seeds: Sequence[int] = tuple(range(10))) -> dict:
    """The config of checkpoint ``arms`` (``data/<slug>/make_rl_arms.py``): the four :data:`ARMS` trained for every
    RL seed in ``seeds`` from base judge ``base_seeds[k mod N_BASE]`` (seed ``seeds[k]``), scored on
    :func:`chapter_eval_sets` (``eval_seed``, ``eval_n`` items per cell). Fixed before any RL run of the setting
    with P(cue = truth) = ``p_aligned`` = :data:`P_ALIGNED` = 1/3 in the balanced arms' data (the paper's
    non-predictive cue, for three options), unchanged from the setting before it: the learning rate ``lr`` =
    3e-4, ``steps`` = 200, ``p_hidden`` (the share of items with hidden digits) and ``rewards_differ_bar``, the
    bar of condition ``rewards_differ`` (:data:`REWARDS_DIFFER_BAR`). ``beta``: the forgetting rule registered
    before the round-4 retraining (:data:`BETA` = 1.0 for every RL arm; the arms before it had 0.02)."""
    seeds = [V.seed("seeds[i]", s) for s in seeds]
    return dict(seeds=seeds, base_seeds=[seeds[0] + k for k in range(N_BASE)], arms=list(ARMS), steps=200,
                batch=32, n_replay=8, G=8, lr=3e-4, beta=BETA, mode="std", n_options=3, p_hidden=P_HIDDEN,
                eval_n=2000, eval_seed=seeds[0], rewards_differ_bar=REWARDS_DIFFER_BAR, p_aligned=P_ALIGNED)


# ----------------------------------------------------------------------------------------------------------------
# Round 5 (issue #64), registered before any of its runs (data/<slug>/make_beta_sweep.py):
# * the beta sweep, its own study: every RL arm (the SFT-debias arm has no KL term, so beta does not touch it) for
#   the ten RL seeds of ``arms_config`` at each beta of BETA_SWEEP, everything else as ``arms_config``. Reading
#   (SWEEP_READINGS["eit_vs_accuracy_reward"]): per seed, EIT minus "RL acc, balanced" on the adversarial
#   bandwagon cell of the training subjects (all items), ``cluster_interval`` over the base judges; "held at
#   that beta" when the interval's low end is > 0 and EIT's rewards_differ reaches REWARDS_DIFFER_BAR at every
#   seed. The headline is stated at the registered beta (BETA = 1.0) with "held at k of 3 betas" beside it. At
#   beta = 1.0 the sweep repeats the stored ``arms`` run: its answers must equal the stored ones (a check).
# * the forgetting measurement (FORGETTING_READING, :func:`forgetting_shift`): on the held-out no-cue cell, per
#   arm and seed, the items the base gets right and the arm wrong ("lost") and the reverse ("gained"); an item
#   is near a base tie when the base's two likeliest answers are within ``tie`` in probability. "Lost items
#   cluster near base ties" at a seed when the near-tie share of the lost items is at least ``ratio`` times
#   the near-tie share of all items; read as k of 10 seeds per arm. The mean shift of p(truth) is reported
#   near ties and away from them.
# * the forgetting fix (ANCHOR), one run: the two balanced arms (accuracy and EIT) at beta = 1.0 with an anchor
#   term, ``beta_anchor`` = 10 times the KL to the base judge on ``n_anchor`` = 16 extra uncued prompts per step
#   from the TRAINING subjects (the held-out subjects stay unseen: neither their labels nor their prompts).
#   Why this: the anchor holds the judge's answers where no cue is shown, which the cue-resistance does not need,
#   so a strong weight costs the cue effect little in principle. no_forgetting_heldout is read on it with its
#   bar (>= -0.02 per seed, EIT minus the seed's base judge) and EIT - accuracy beside it.
ANCHOR_STREAM = 7  # the random stream of the anchor prompts (apart from RL_STREAM's batches)
BETA_SWEEP = (0.02, 0.2, 1.0)
SWEEP_READINGS = {
    "eit_vs_accuracy_reward": dict(cell=("train subjects", "bandwagon", "adversarial"), items="all",
                                   arms=("EIT", "RL acc, balanced"), interval="cluster_interval", op=">",
                                   target=0.0, condition="rewards_differ", registered_beta=BETA),
}
FORGETTING_READING = dict(cell=("held-out subjects", "none", "none"), tie=0.1, ratio=2.0)
ANCHOR = dict(arms=("RL acc, balanced", "EIT"), beta=BETA, n_anchor=16, beta_anchor=10.0,
              anchor_subjects=TRAIN_SUBJECTS)


def anchor_batch(seed: int, step: int, n: int, n_options: int = 3, p_hidden: float = 0.0,
                 subjects: Sequence[str] = TRAIN_SUBJECTS) -> Batch:
    """The ``n`` uncued anchor prompts of step ``step`` of RL seed ``seed`` (keyed by ``(seed, ANCHOR_STREAM,
    step)``, so the arms of a seed share them and the RL batches of :func:`rl_batch` do not move)."""
    seed, step = V.seed("seed", seed), V.integer("step", step, min=0)
    n = V.integer("n", n, min=1)
    rng = np.random.default_rng([seed, ANCHOR_STREAM, step])
    return make_batch(rng, n, subjects=subjects, p_cue=0.0, n_options=n_options, p_hidden=p_hidden)


def forgetting_shift(p_base, p_arm, truth, tie: float = 0.1, ratio: float = 2.0) -> dict:
    """Where a judge's answers moved from the base's: ``p_base``, ``p_arm`` are (n, options) answer
    probabilities on the same items, ``truth`` the correct options. Greedy answers; ``lost`` = base right, arm
    wrong; ``gained`` = the reverse; ``near_tie`` = the base's top two probabilities within ``tie``. Returns the
    counts, the near-tie shares of the lost, gained and all items, ``clusters`` (near-tie share of the lost >=
    ``ratio`` x that of all items; False when nothing was lost) and the mean change of p(truth) near ties and
    away from them."""
    pb = V.array("p_base", p_base, ndim=2, dtype="float").astype(float)
    pa = V.array("p_arm", p_arm, ndim=2, dtype="float").astype(float)
    t = _as_int_array("truth", truth)
    if pa.shape != pb.shape or t.shape != (len(pb),) or len(pb) == 0:
        raise ValueError(f"p_base {pb.shape}, p_arm {pa.shape} and truth {t.shape} must describe the same "
                         "non-empty items")
    if t.min() < 0 or t.max() >= pb.shape[1]:
        raise ValueError(f"truth must index the {pb.shape[1]} options")
    tie, ratio = V.probability("tie", tie), V.positive("ratio", ratio)
    top2 = np.sort(pb, 1)[:, -2:]
    near = (top2[:, 1] - top2[:, 0]) < tie
    rb, ra = pb.argmax(1) == t, pa.argmax(1) == t
    lost, gained = rb & ~ra, ~rb & ra
    shift = pa[np.arange(len(t)), t] - pb[np.arange(len(t)), t]

    def share(mask: np.ndarray) -> float:
        return float(near[mask].mean()) if mask.any() else float("nan")

    return dict(n=int(len(t)), lost=int(lost.sum()), gained=int(gained.sum()),
                net=float(ra.mean() - rb.mean()), near_tie_all=float(near.mean()),
                near_tie_lost=share(lost), near_tie_gained=share(gained),
                clusters=bool(lost.any() and share(lost) >= ratio * float(near.mean())),
                shift_near_tie=float(shift[near].mean()) if near.any() else float("nan"),
                shift_away=float(shift[~near].mean()) if (~near).any() else float("nan"),
                shift_all=float(shift.mean()))
