"""Epistemic Independence Training (EIT): make a bias cue non-predictive of reward, on a synthetic judge task.

The paper trains LLM judges with reinforcement learning on **balanced conflict data** (an injected cue points at
the correct option with probability exactly 0.5) and an **independence reward** that penalizes following a wrong
cue without rewarding agreement with a right one. Here the judge is a small transformer and the task is
synthetic, but the data rule, the reward constants and the group policy gradient are the paper's.

* The task (:func:`make_batch`): two options, each six digits; a *subject* token says which comparison rule
  decides the better option (sum of digits, count of digits >= 5, first + last digit, sum of odd digits). A cue
  from one of seven families points at one option. Bandwagon (the training family), authority and distraction are
  template tokens in one *cue slot* after the options, ending in the option's letter (:data:`SLOT_FAMILIES`).
  The others share neither that slot nor the letter token: verbosity (the cued option's padding holds
  elaboration tokens), digits (its padding holds irrelevant digits), expert (a preamble before the options
  quotes the cued option's first digits: it names the option by content) and order (option-order bias: the cue is
  "being listed first"; a ``<ranked>`` format marker in the preamble says the options come from a ranked listing,
  and it names no option).
* The reward (:func:`eit_reward`): correct +1.0; adversarial cue followed -0.5, resisted +0.5; aligned cue but a
  wrong answer -0.3; no bonus for agreeing with a correct cue. (The paper's +0.1 format bonus has no analogue:
  our policy emits one answer token.)
* The optimizer (:func:`grpo_loss`): G answers sampled per prompt, group advantages either std-normalized (GRPO)
  or mean-baseline, with an optional exact KL penalty to a frozen reference (the base judge).
* The base judge (:func:`pretrain`): supervised training on all subjects and cue families where the label
  agrees with every visible cue (mostly because the cue is right, on a fraction because the annotator deferred
  to a random cue: a sycophantic label), long enough to be competent without cues; ``data/06_epistemic_independence/make_base.py``
  stores it (:func:`checkpoint_config`).
"""

from __future__ import annotations

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
    "rl_batch", "batch_digest", "RL_STREAM", "unpaired_steps", "make_eval_sets", "evaluate_judge",
    "policy_gradient", "mixed_share", "relative_max_diff", "paired_bootstrap_diff",
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

# The token vocabulary, laid out in blocks.
_names = [str(d) for d in range(10)] + ["<sep>", "<ask>", "<pad>", "A", "B", "<nopct>", "<elab>", "<expert>",
           "<ranked>"]
_names += [f"<subj:{s}>" for s in SUBJECTS]
_names += [f"<pct:{k}>" for k in range(N_PCT)]
_names += [f"<{f}:{t}>" for f in SLOT_FAMILIES for t in range(N_TEMPLATES)]
VOCAB: dict[str, int] = {n: i for i, n in enumerate(_names)}
# subject, preamble, two options with their pads and separators, cue slot, ask
SEQ_LEN = 1 + N_PRE + 2 * (N_DIGITS + N_PAD + 1) + 3 + 1
OPTION_START = (1 + N_PRE, 1 + N_PRE + N_DIGITS + N_PAD + 1)  # first digit of option A, of option B
A_ID, B_ID = VOCAB["A"], VOCAB["B"]

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
    """Token ids ``x`` (n, SEQ_LEN); ``truth`` 0 = A, 1 = B; ``cue`` the option the cue points at (-1: no cue);
    ``family`` index into :data:`FAMILIES` (-1: no cue); ``subject`` index into :data:`SUBJECTS`."""

    x: torch.Tensor
    truth: np.ndarray
    cue: np.ndarray
    family: np.ndarray
    subject: np.ndarray

    def __post_init__(self) -> None:
        self.x = V.tensor("x", self.x, ndim=2, dtype="int", min=0, max=len(VOCAB), strict_max=True)
        if self.x.shape[1] != SEQ_LEN:
            raise ValueError(f"x must have shape (n, {SEQ_LEN}), got {tuple(self.x.shape)}")
        n = self.x.shape[0]
        for name, lo, hi in (("truth", 0, 1), ("cue", -1, 1), ("family", -1, len(FAMILIES) - 1),
                             ("subject", 0, len(SUBJECTS) - 1)):
            setattr(self, name, V.array(name, getattr(self, name), shape=(n,), dtype="int", min=lo, max=hi))

    def __len__(self) -> int:
        return len(self.truth)


def make_batch(rng: np.random.Generator, n: int, *, subjects: Sequence[str] = TRAIN_SUBJECTS,
               families: Sequence[str] = ("bandwagon",), p_cue: float = 1.0, p_aligned: float = 0.5) -> Batch:
    """``n`` judge items. Each carries a cue with probability ``p_cue`` (family uniform over ``families``), and a
    cue points at the correct option with probability ``p_aligned``: 0.5 is the paper's balanced conflict data,
    0.0 adversarial-only, 0.75 the cue-agreeing data of our "pre-training"."""
    V.instance("rng", rng, np.random.Generator)
    n = V.integer("n", n, min=1)
    p_cue, p_aligned = V.probability("p_cue", p_cue), V.probability("p_aligned", p_aligned)
    subjects = V.sequence("subjects", subjects, min_len=1, of=lambda k, v: V.one_of(k, v, SUBJECTS))
    families = V.sequence("families", families, min_len=1 if p_cue > 0 else 0,
                          of=lambda k, v: V.one_of(k, v, FAMILIES))
    subj = rng.integers(len(subjects), size=n)
    a = rng.integers(0, 10, size=(n, N_DIGITS))
    b = rng.integers(0, 10, size=(n, N_DIGITS))
    sa = np.array([_score(a[i], subjects[subj[i]]) for i in range(n)])
    sb = np.array([_score(b[i], subjects[subj[i]]) for i in range(n)])
    for _ in range(10_000):  # ties removed: redraw option B (a tie has probability < 1/2 per draw)
        if not (tie := sa == sb).any():
            break
        b[tie] = rng.integers(0, 10, size=(int(tie.sum()), N_DIGITS))
        sb[tie] = [_score(b[i], subjects[subj[i]]) for i in np.nonzero(tie)[0]]
    else:  # pragma: no cover - (1/2)**10_000
        raise RuntimeError("make_batch: option B still ties with option A after 10000 redraws")
    truth = (sb > sa).astype(int)
    has_cue = rng.random(n) < p_cue
    fam = np.where(has_cue, rng.integers(max(len(families), 1), size=n), -1)
    aligned = rng.random(n) < p_aligned
    fam_global = np.array([FAMILIES.index(families[f]) if f >= 0 else -1 for f in fam], dtype=np.int64)
    # option-order cue: it always points at the first option, A; swap the options where the truth disagrees
    swap = (fam_global == FAMILIES.index("order")) & (truth != np.where(aligned, 0, 1))
    a[swap], b[swap] = b[swap].copy(), a[swap].copy()
    truth = np.where(swap, 1 - truth, truth)
    cue = np.where(has_cue, np.where(aligned, truth, 1 - truth), -1)
    x = np.full((n, SEQ_LEN), VOCAB["<pad>"], dtype=np.int64)
    subj_global = np.array([SUBJECTS.index(s) for s in subjects])[subj]
    x[:, 0] = [VOCAB[f"<subj:{SUBJECTS[k]}>"] for k in subj_global]
    expert = fam_global == FAMILIES.index("expert")
    x[expert, 1] = VOCAB["<expert>"]  # "an expert points out the option whose digits start d1 d2 d3"
    x[expert, 2:2 + N_QUOTE] = np.where(cue[expert, None] == 0, a[expert, :N_QUOTE], b[expert, :N_QUOTE])
    x[fam_global == FAMILIES.index("order"), 1] = VOCAB["<ranked>"]  # "listed in ranked order": A first
    o = 1 + N_PRE
    for opt, digits in ((0, a), (1, b)):
        x[:, o:o + N_DIGITS] = digits
        o += N_DIGITS
        cued = cue == opt
        x[cued & (fam_global == FAMILIES.index("verbosity")), o:o + N_PAD] = VOCAB["<elab>"]
        noisy = cued & (fam_global == FAMILIES.index("digits"))
        x[noisy, o:o + N_PAD] = rng.integers(0, 10, size=(int(noisy.sum()), N_PAD))
        o += N_PAD
        x[:, o] = VOCAB["<sep>"]
        o += 1
    for i in np.nonzero(fam_global >= 0)[0]:
        f = FAMILIES[fam_global[i]]
        if f not in SLOT_FAMILIES:
            continue
        t = rng.integers(N_TEMPLATES)
        x[i, o] = VOCAB[f"<{f}:{t}>"]
        x[i, o + 1] = VOCAB[f"<pct:{rng.integers(N_PCT)}>"] if f == "bandwagon" else VOCAB["<nopct>"]
        x[i, o + 2] = A_ID if cue[i] == 0 else B_ID
    x[:, -1] = VOCAB["<ask>"]
    return Batch(torch.from_numpy(x), truth, cue, fam_global, subj_global)


RL_STREAM = 5  # the random stream of the RL arms' training batches


def rl_batch(seed: int, step: int, n: int, p_aligned: float = 0.5) -> Batch:
    """RL training batch ``step`` of seed ``seed``: ``n`` bandwagon items of the training subjects with
    P(cue = truth) = ``p_aligned``. The batch is keyed by ``(seed, RL_STREAM, step)`` and *not* by the arm: every
    arm of a seed draws the same digits, subjects and cue draws (common random numbers), so two arms with the same
    ``p_aligned`` see identical batches and differ only in their reward and optimizer (an arm with another
    ``p_aligned`` sees the same items with the cue's direction thresholded differently)."""
    seed, step = V.seed("seed", seed), V.integer("step", step, min=0)
    return make_batch(np.random.default_rng([seed, RL_STREAM, step]), V.integer("n", n, min=1),
                      families=("bandwagon",), p_aligned=p_aligned)


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
    """The EIT reward R_acc + R_ind for answers ``pred`` (0 = A, 1 = B), correct options ``truth`` and cue targets
    ``cue`` (-1 = no cue); arrays of one shape (``pred`` may have an extra trailing group axis)."""
    pred, truth, cue = _as_int_array("pred", pred), _as_int_array("truth", truth), _as_int_array("cue", cue)
    if truth.shape != cue.shape:
        raise ValueError(f"truth and cue must have the same shape, got {truth.shape} and {cue.shape}")
    if pred.shape != truth.shape:
        if pred.shape[:-1] != truth.shape:
            raise ValueError(f"pred must have the shape of truth, {truth.shape}, or that + (G,), got {pred.shape}")
        truth, cue = truth[..., None], cue[..., None]
    for name, a, lo in (("pred", pred, 0), ("truth", truth, 0), ("cue", cue, -1)):
        if a.size and (a.min() < lo or a.max() > 1):
            raise ValueError(f"{name} must take values in {{{lo}..1}}")
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
        if a.size and (a.min() < 0 or a.max() > 1):
            raise ValueError(f"{name} must take values in {{0..1}}")
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
    """The policy's logits over the two answers (A, B) at the final ``<ask>`` position: shape (n, 2)."""
    V.function("model", model)
    V.tensor("x", x, ndim=2, dtype="int")
    return model(x)[:, -1, [A_ID, B_ID]]


REWARDS = ("eit", "accuracy", "reweighted")


def grpo_loss(model: torch.nn.Module, batch: Batch, G: int, reward: str, mode: str,
              generator: torch.Generator, ref: torch.nn.Module | None = None,
              beta: float = 0.0) -> tuple[torch.Tensor, dict[str, float]]:
    """One group policy-gradient loss: sample ``G`` answers per prompt, score them (``"eit"``, ``"accuracy"`` or
    ``"reweighted"``), turn rewards into group advantages (``mode``) and return ``-mean(A * log pi(answer))``
    plus ``beta`` times the exact KL to the frozen reference policy ``ref`` (if given), and statistics
    (``informative``: the share of groups with any nonzero advantage, the only ones that move the policy)."""
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
    return loss, {"reward": float(r.mean()), "accuracy": float((a == batch.truth[:, None]).mean()),
                  "follow": follow, "kl": float(kl.detach()),
                  "informative": float((adv.abs() > 0).any(1).float().mean())}  # groups with a signal


def reweighted_reward(pred, truth, cue, w_adversarial: float = 2.0, w_aligned: float = 1.3) -> np.ndarray:
    """Accuracy reward scaled by the cue condition: ``w_adversarial`` (cue wrong), ``w_aligned`` (cue right), 1 (no
    cue). With the default weights its within-prompt differences equal the EIT reward's (same mean-baseline
    advantages): EIT is a reweighted accuracy reward."""
    w_adversarial, w_aligned = V.nonnegative("w_adversarial", w_adversarial), V.nonnegative("w_aligned", w_aligned)
    pred, truth, cue = _as_int_array("pred", pred), _as_int_array("truth", truth), _as_int_array("cue", cue)
    if truth.shape != cue.shape:
        raise ValueError(f"truth and cue must have the same shape, got {truth.shape} and {cue.shape}")
    if cue.size and (cue.min() < -1 or cue.max() > 1):
        raise ValueError("cue must take values in {-1..1}")
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


def checkpoint_config(name: str = "base") -> dict:
    """The config of checkpoint ``base``: a small judge (the one EIT trains) and a larger one, per seed, trained
    on every subject and cue family. A fraction ``p_cue_decides`` of each batch is *cue-decided*: a cue of any
    family points at a random option and the label is the cue (a sycophantic annotator; the family drawn from
    ``decided_families``, where the content-quoting expert cue, the slowest to learn, has weight 3); of the
    rest, ``p_cue`` carry a cue that is always right (``p_aligned`` = 1). The label never disagrees with a visible cue, so the
    judge learns to follow every family, and the uncued and right-cued items teach it the task. Label smoothing
    ``label_smoothing`` = 0.4 keeps it unsure: it follows a wrong cue with probability near 0.8, not 1, so
    groups of sampled answers disagree and GRPO has advantages to work with (picked by a one-judge probe for the
    larger share of informative groups). ``steps`` = 3000: a one-judge probe at 1500 steps reached no-cue
    accuracy 0.93 (all subjects), at 3000 steps 0.98 with the same smoothing criterion still met. One larger
    judge (seed ``large_seeds``) is the untrained-scale baseline."""
    if name != "base":
        raise ValueError(f"name must be 'base', got {name!r}")
    return dict(seeds=[0, 1, 2], small=dict(n_layer=2, n_head=4, d_model=64),
                large=dict(n_layer=3, n_head=4, d_model=64), large_seeds=[0], steps=3000, batch=128, lr=3e-3,
                lr_large=2e-3, warmup=100, p_cue=0.6, p_aligned=1.0, p_cue_decides=0.2, label_smoothing=0.4,
                decided_families=[*FAMILIES, "expert", "expert"], stream=1, families=list(FAMILIES),
                subjects=list(SUBJECTS), seq_len=SEQ_LEN, vocab=len(VOCAB))


def make_judge(arch: dict, seed: int) -> torch.nn.Module:
    """A judge transformer (learned positions) of architecture ``arch`` (n_layer, n_head, d_model), seeded."""
    from helpers import nn as hnn

    V.instance("arch", arch, dict)
    seed = V.seed("seed", seed)
    torch.manual_seed(seed)
    return hnn.Transformer(hnn.TransformerConfig(vocab_size=len(VOCAB), max_len=SEQ_LEN, pos="learned", **arch))


def sft_loss(model: torch.nn.Module, b: Batch, label_smoothing: float = 0.0) -> torch.Tensor:
    """Cross-entropy of the answer at ``<ask>`` against the labelled option; ``label_smoothing`` ε puts ε/2
    of the target on the other option (the base's pre-training: a judge never more sure than 1 − ε/2)."""
    V.instance("b", b, Batch)
    eps = V.probability("label_smoothing", label_smoothing)
    return F.cross_entropy(answer_logits(model, b.x), torch.as_tensor(b.truth), label_smoothing=eps)


def pretrain_batch(cfg: dict, seed: int, step: int) -> Batch:
    """Pre-training batch ``step`` of seed ``seed``: all subjects and families, cues right ``p_aligned`` of the
    time, and the last ``round(batch * p_cue_decides)`` items cue-decided (a cue at a random option; ``truth`` is
    then the *label*, the cue, whatever the digits say)."""
    V.instance("cfg", cfg, dict)
    for key in ("batch", "p_cue", "p_aligned", "stream"):
        if key not in cfg:
            raise ValueError(f"cfg must have key {key!r}; got keys {sorted(cfg)}")
    seed, step = V.seed("seed", seed), V.integer("step", step, min=0)
    n = V.integer("cfg['batch']", cfg["batch"], min=1)
    n_dec = int(round(n * V.probability("cfg['p_cue_decides']", cfg.get("p_cue_decides", 0.0))))
    rng = np.random.default_rng([seed, int(cfg["stream"]), step])
    kw = dict(subjects=cfg.get("subjects", SUBJECTS), families=cfg.get("families", FAMILIES))
    parts = [make_batch(rng, n - n_dec, p_cue=cfg["p_cue"], p_aligned=cfg["p_aligned"], **kw)] if n > n_dec else []
    if n_dec:
        d = make_batch(rng, n_dec, p_cue=1.0, p_aligned=0.5, subjects=kw["subjects"],
                       families=cfg.get("decided_families", kw["families"]))
        parts.append(Batch(d.x, d.cue.copy(), d.cue, d.family, d.subject))  # the label is the cue
    return parts[0] if len(parts) == 1 else Batch(
        torch.cat([p.x for p in parts]), *(np.concatenate([getattr(p, k) for p in parts])
                                           for k in ("truth", "cue", "family", "subject")))


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
def make_eval_sets(seed: int, n: int, splits: dict, conds: dict) -> dict:
    """The fixed evaluation items: for each subject split (``{name: subjects}``), ``n`` items without a cue under
    ``(split, "none", "none")`` and, for every cue family and condition (``{name: p_aligned}``), ``n`` cued items
    under ``(split, family, condition)``. Item streams are keyed by ``seed`` and the cell's indices, so every model
    and RL seed is scored on the same items."""
    seed, n = V.seed("seed", seed), V.integer("n", n, min=1)
    if not isinstance(splits, dict) or not splits or not isinstance(conds, dict) or not conds:
        raise TypeError("splits and conds must be non-empty dicts ({name: subjects}, {name: p_aligned})")
    sets = {}
    for k, (split, subj) in enumerate(splits.items()):
        sets[(split, "none", "none")] = make_batch(np.random.default_rng([seed, 2, k]), n, subjects=subj,
                                                   p_cue=0.0)
        for j, fam in enumerate(FAMILIES):
            for c, (cond, pa) in enumerate(conds.items()):
                sets[(split, fam, cond)] = make_batch(np.random.default_rng([seed, 2, k, j, c]), n, subjects=subj,
                                                      families=(fam,), p_cue=1.0, p_aligned=pa)
    return sets


@torch.no_grad()
def evaluate_judge(model: torch.nn.Module, eval_sets: dict, chunk: int = 2048) -> list[dict]:
    """Greedy answers of ``model`` on every cell of :func:`make_eval_sets` in one pass: a row per cell with
    ``split, family, cond``, the accuracy ``acc`` and, for adversarial cells, ``follow`` (answers equal to the
    cue's target; NaN elsewhere)."""
    V.function("model", model)
    if not isinstance(eval_sets, dict) or not eval_sets:
        raise TypeError("eval_sets must be a non-empty dict from make_eval_sets")
    x = torch.cat([b.x for b in eval_sets.values()])
    preds = torch.cat([answer_logits(model, x[i:i + chunk]).argmax(-1) for i in range(0, len(x), chunk)]).numpy()
    rows, o = [], 0
    for (split, fam, cond), b in eval_sets.items():
        pred, o = preds[o:o + len(b)], o + len(b)
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
