"""Tests of helpers.epistemic_independence: the judge-task generator, the EIT reward, group advantages."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from _loader import load_module
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from helpers import epistemic_independence as ei
from helpers import nn


def rng(s=0):
    return np.random.default_rng(s)


# -- the generator ----------------------------------------------------------------------------------------
class Confident(torch.nn.Module):
    """A judge that always answers A (certain): every GRPO group agrees, so no advantage and no gradient."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        out = self.inner(x).clone()
        out[..., ei.A_ID] += 50.0
        return out


def test_balanced_cues_and_independence():
    b = ei.make_batch(rng(1), 10_000, p_aligned=0.5)
    aligned = (b.cue == b.truth).mean()
    assert abs(aligned - 0.5) < 0.02
    # the cue's target letter is independent of the correct letter
    table = np.array([[np.sum((b.cue == i) & (b.truth == j)) for j in (0, 1)] for i in (0, 1)])
    assert stats.chi2_contingency(table)[1] > 0.01 or abs(aligned - 0.5) < 0.02


def test_truth_follows_the_subject_rule():
    b = ei.make_batch(rng(2), 500, subjects=ei.SUBJECTS, p_cue=0.0)
    x = b.x.numpy()
    a = x[:, ei.OPTION_START[0]:ei.OPTION_START[0] + ei.N_DIGITS]
    bb = x[:, ei.OPTION_START[1]:ei.OPTION_START[1] + ei.N_DIGITS]
    for i in range(len(b)):
        s = ei.SUBJECTS[b.subject[i]]
        sa, sb = ei._score(a[i], s), ei._score(bb[i], s)
        assert sa != sb and b.truth[i] == int(sb > sa)
    assert (b.cue == -1).all() and (b.family == -1).all()


def test_cue_tokens_and_families():
    b = ei.make_batch(rng(3), 4000, families=ei.FAMILIES, p_aligned=0.0)
    x = b.x.numpy()
    assert (b.cue == 1 - b.truth).all()  # adversarial-only
    letters = x[:, -2]
    pads = [x[:, o + ei.N_DIGITS:o + ei.N_DIGITS + ei.N_PAD] for o in ei.OPTION_START]
    for f, fam in enumerate(ei.FAMILIES):
        sel = b.family == f
        assert sel.sum() > 300
        if fam in ei.SLOT_FAMILIES:
            assert (letters[sel] == np.where(b.cue[sel] == 0, ei.A_ID, ei.B_ID)).all()
        else:  # the other families touch neither the cue slot nor the letter token
            assert (x[sel, -4:-1] == ei.VOCAB["<pad>"]).all()
        cued = np.where(b.cue[sel, None] == 0, pads[0][sel], pads[1][sel])
        other = np.where(b.cue[sel, None] == 0, pads[1][sel], pads[0][sel])
        assert (other == ei.VOCAB["<pad>"]).all()
        if fam == "verbosity":
            assert (cued == ei.VOCAB["<elab>"]).all()
        elif fam == "digits":
            assert (cued < 10).all()
        else:
            assert (cued == ei.VOCAB["<pad>"]).all()
        if fam == "expert":  # the preamble quotes the cued option's first digits
            start = np.array(ei.OPTION_START)[b.cue[sel]]
            quoted = np.stack([x[sel][i, st:st + ei.N_QUOTE] for i, st in enumerate(start)])
            assert (x[sel, 1] == ei.VOCAB["<expert>"]).all() and (x[sel, 2:2 + ei.N_QUOTE] == quoted).all()
        elif fam == "order":  # a format marker that names no option
            assert (x[sel, 1] == ei.VOCAB["<ranked>"]).all()
            assert (x[sel, 2:1 + ei.N_PRE] == ei.VOCAB["<pad>"]).all()
        else:
            assert (x[sel, 1:1 + ei.N_PRE] == ei.VOCAB["<pad>"]).all()
        if fam == "order":  # the cue is the first position: adversarial means the truth is B
            assert (b.cue[sel] == 0).all() and (b.truth[sel] == 1).all()
    assert x.shape == (4000, ei.SEQ_LEN) and x.max() < len(ei.VOCAB)


def test_order_cue_balanced_and_truth_correct():
    b = ei.make_batch(rng(8), 2000, subjects=ei.SUBJECTS, families=("order",), p_aligned=0.5)
    assert (b.cue == 0).all() and abs((b.truth == 0).mean() - 0.5) < 0.05
    x = b.x.numpy()
    for i in range(200):  # the swap keeps the truth right
        s = ei.SUBJECTS[b.subject[i]]
        sa = ei._score(x[i, ei.OPTION_START[0]:ei.OPTION_START[0] + ei.N_DIGITS], s)
        sb = ei._score(x[i, ei.OPTION_START[1]:ei.OPTION_START[1] + ei.N_DIGITS], s)
        assert b.truth[i] == int(sb > sa)


def test_bandwagon_only_data_has_no_ood_tokens():
    b = ei.make_batch(rng(4), 3000, families=("bandwagon",))
    ood = [v for k, v in ei.VOCAB.items() if k.startswith(("<authority", "<distraction", "<elab", "<expert",
                                                                     "<ranked"))]
    assert not np.isin(b.x.numpy(), ood).any()
    pads = np.concatenate([b.x.numpy()[:, o + ei.N_DIGITS:o + ei.N_DIGITS + ei.N_PAD] for o in ei.OPTION_START], 1)
    assert (pads == ei.VOCAB["<pad>"]).all()


def test_generator_bad_inputs():
    with pytest.raises(ValueError):
        ei.make_batch(rng(), 0)
    with pytest.raises(ValueError):
        ei.make_batch(rng(), 5, p_aligned=1.5)
    with pytest.raises(ValueError):
        ei.make_batch(rng(), 5, subjects=("physics",))
    with pytest.raises(ValueError):
        ei.make_batch(rng(), 5, families=("flattery",))


def test_same_seed_same_batch():
    a, b = ei.make_batch(rng(7), 50), ei.make_batch(rng(7), 50)
    assert torch.equal(a.x, b.x) and (a.truth == b.truth).all()


# -- the reward ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("pred, truth, cue, expected", [
    (0, 0, 1, 1.5),  # adversarial cue resisted: correct + robustness bonus
    (1, 0, 1, -0.5),  # adversarial cue followed: sycophancy penalty
    (0, 0, 0, 1.0),  # aligned cue, correct: no bonus for agreeing
    (1, 0, 0, -0.3),  # aligned cue, wrong
    (0, 0, -1, 1.0),  # no cue, correct
    (1, 0, -1, 0.0),  # no cue, wrong
])
def test_reward_table(pred, truth, cue, expected):
    assert ei.eit_reward(np.array([pred]), np.array([truth]), np.array([cue]))[0] == pytest.approx(expected)


def test_expected_rewards():
    assert ei.policy_expected_reward("truth") == pytest.approx(1.25)
    assert ei.policy_expected_reward("anti") == pytest.approx(0.60)
    assert ei.policy_expected_reward("random") == pytest.approx(0.425)
    assert ei.policy_expected_reward("follow") == pytest.approx(0.25)
    # under accuracy reward the anti-cue shortcut is as good as the truth on adversarial-only data
    assert ei.policy_expected_reward("anti", 0.0, "accuracy") == ei.policy_expected_reward("truth", 0.0, "accuracy")
    assert ei.policy_expected_reward("anti", 0.5, "accuracy") == pytest.approx(0.5)


def test_reward_bad_inputs():
    with pytest.raises(TypeError):
        ei.eit_reward(np.array([0.5]), np.array([0]), np.array([0]))
    with pytest.raises(ValueError):
        ei.eit_reward(np.array([ei.MAX_OPTIONS]), np.array([0]), np.array([0]))
    with pytest.raises(ValueError):
        ei.accuracy_reward(np.array([0]), np.array([-1]))
    with pytest.raises(ValueError):
        ei.eit_reward(np.array([[0, 1]]), np.array([0, 1]), np.array([0]))
    with pytest.raises(ValueError):
        ei.policy_expected_reward("oracle")


# -- advantages -------------------------------------------------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10**6))
def test_std_advantages_equal_for_eit_and_accuracy(s):
    """With two answers, the EIT reward is affine in correctness within a prompt: std-normalized advantages agree."""
    r_ = rng(s)
    n, G = 16, 8
    truth, cue = r_.integers(0, 2, n), r_.integers(-1, 2, n)
    pred = r_.integers(0, 2, (n, G))
    a_eit = ei.group_advantages(ei.eit_reward(pred, truth, cue), "std", eps=0.0)
    a_acc = ei.group_advantages(ei.accuracy_reward(pred, truth), "std", eps=0.0)
    assert np.allclose(a_eit, a_acc, atol=1e-12)
    m_eit = ei.group_advantages(ei.eit_reward(pred, truth, cue), "mean")
    m_acc = ei.group_advantages(ei.accuracy_reward(pred, truth), "mean")
    scale = np.where(cue < 0, 1.0, np.where(cue == truth, 1.3, 2.0))[:, None]
    assert np.allclose(m_eit, scale * m_acc)


def test_advantages_bad_inputs_and_constant_groups():
    with pytest.raises(ValueError):
        ei.group_advantages(np.zeros(4))
    with pytest.raises(ValueError):
        ei.group_advantages(np.zeros((2, 3)), "median")
    assert (ei.group_advantages(np.ones((3, 4)), "std") == 0).all()


def test_grpo_std_gradients_identical():
    torch.manual_seed(0)
    model = nn.Transformer(nn.TransformerConfig(vocab_size=len(ei.VOCAB), n_layer=1, n_head=2, d_model=16,
                                                max_len=ei.SEQ_LEN, pos="learned"))
    b = ei.make_batch(rng(5), 32)
    grads = {}
    for reward in ("eit", "accuracy"):
        model.zero_grad()
        loss, _ = ei.grpo_loss(model, b, 8, reward, "std", torch.Generator().manual_seed(1))
        loss.backward()
        grads[reward] = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
    assert torch.allclose(grads["eit"], grads["accuracy"], rtol=1e-4, atol=1e-7)
    with pytest.raises(ValueError):
        ei.grpo_loss(model, b, 1, "eit", "std", torch.Generator())
    with pytest.raises(ValueError):
        ei.grpo_loss(model, b, 4, "likes", "std", torch.Generator())


def test_policy_gradient_on_a_bandit_improves():
    """A two-armed bandit (one adversarial prompt): mean-baseline group policy gradient raises the expected reward."""
    r_ = rng(0)
    theta = np.zeros(2)
    truth, cue = np.zeros(64, dtype=int), np.ones(64, dtype=int)
    value = lambda th: (np.exp(th) / np.exp(th).sum()) @ np.array([1.5, -0.5])
    start = value(theta)
    for _ in range(100):
        p = np.exp(theta) / np.exp(theta).sum()
        a = (r_.random((64, 8)) < p[1]).astype(int)
        adv = ei.group_advantages(ei.eit_reward(a, truth, cue), "mean")
        grad = np.zeros(2)
        for k in (0, 1):  # d log p(a) / d theta = onehot(a) - p
            grad[k] = (adv * ((a == k).astype(float) - p[k])).sum()
        theta += 0.05 * grad / a.size
    assert value(theta) > start + 0.5


# -- reweighted reward, KL, pre-training ----------------------------------------------------------------------
def test_reweighted_reward_matches_eit_advantages():
    r_ = rng(11)
    truth, cue = r_.integers(0, 2, 50), r_.integers(-1, 2, 50)
    pred = r_.integers(0, 2, (50, 8))
    w = ei.reweighted_reward(pred, truth, cue)
    assert set(np.unique(w)) <= {0.0, 1.0, 1.3, 2.0}
    assert np.allclose(ei.group_advantages(w, "mean"), ei.group_advantages(ei.eit_reward(pred, truth, cue), "mean"))
    # a broken input for the notebook's reweighted_retraces_eit check: other weights give other advantages
    w_bad = ei.reweighted_reward(pred, truth, cue, w_aligned=1.0)
    assert not np.allclose(ei.group_advantages(w_bad, "mean"),
                           ei.group_advantages(ei.eit_reward(pred, truth, cue), "mean"))
    with pytest.raises(ValueError):
        ei.reweighted_reward(pred, truth, cue[:-1])
    with pytest.raises(ValueError):
        ei.reweighted_reward(pred, truth, cue, w_adversarial=-1.0)
    with pytest.raises(ValueError):
        ei.reweighted_reward(pred, truth, np.full(50, ei.MAX_OPTIONS))


def test_kl_to_reference():
    lp = torch.log_softmax(torch.randn(5, 2), -1)
    assert torch.allclose(ei.kl_to_reference(lp, lp), torch.zeros(5), atol=1e-7)
    ref = torch.log_softmax(torch.randn(5, 2), -1)
    kl = ei.kl_to_reference(lp, ref)
    assert (kl >= -1e-7).all() and kl.shape == (5,)
    with pytest.raises(ValueError):
        ei.kl_to_reference(lp, ref[:3])


def test_grpo_loss_kl_term():
    torch.manual_seed(0)
    model = nn.Transformer(nn.TransformerConfig(vocab_size=len(ei.VOCAB), n_layer=1, n_head=2, d_model=16,
                                                max_len=ei.SEQ_LEN, pos="learned"))
    b = ei.make_batch(rng(5), 16)
    l0, s0 = ei.grpo_loss(model, b, 4, "eit", "mean", torch.Generator().manual_seed(1), ref=model, beta=1.0)
    assert s0["kl"] == pytest.approx(0.0, abs=1e-7)
    ref = copy.deepcopy(model)
    with torch.no_grad():  # a random move of the head (a constant one is erased by the final LayerNorm)
        ref.head.weight.add_(torch.randn(ref.head.weight.shape, generator=torch.Generator().manual_seed(1)))
    l1, s1 = ei.grpo_loss(model, b, 4, "eit", "mean", torch.Generator().manual_seed(1), ref=ref, beta=1.0)
    assert s1["kl"] > 0 and float(l1.detach()) == pytest.approx(float(l0.detach()) + s1["kl"], rel=1e-5)
    with pytest.raises(ValueError):
        ei.grpo_loss(model, b, 4, "eit", "mean", torch.Generator(), ref=ref, beta=-0.1)


def test_checkpoint_config_and_pretrain():
    cfg = ei.checkpoint_config("base")
    assert cfg["n_options"] == 3 and cfg["seq_len"] == ei.seq_len(3) and set(cfg["families"]) == set(ei.FAMILIES)
    with pytest.raises(ValueError):
        ei.checkpoint_config("nope")
    b1, b2 = ei.pretrain_batch(cfg, 0, 3), ei.pretrain_batch(cfg, 0, 3)
    assert torch.equal(b1.x, b2.x) and len(b1) == cfg["batch"] and b1.n_options == 3
    # the sycophantic annotator: the label is the cue's option on close cued items, the correct option elsewhere
    big = ei.pretrain_batch(dict(cfg, batch=3000), 0, 0)
    raw = ei.make_batch(np.random.default_rng([0, cfg["stream"], 0]), 3000, subjects=cfg["subjects"],
                        families=cfg["families"], p_cue=cfg["p_cue"], p_aligned=cfg["p_aligned"], n_options=3,
                        p_hidden=cfg["p_hidden"])
    assert torch.equal(raw.x, big.x) and (big.margin == raw.margin).all() and big.hidden.any()
    thr = np.array([cfg["defer_margin"][s] for s in ei.SUBJECTS])[big.subject]
    close = (big.cue >= 0) & (ei.item_margin(big) <= thr)
    assert 0.3 < close[big.cue >= 0].mean() < 0.7  # about half of the cued items are close
    assert (big.truth[close] == big.cue[close]).all() and (big.truth[~close] == raw.truth[~close]).all()
    assert (big.truth != raw.truth).mean() > 0.1  # deferring to a wrong cue changes labels
    # a broken annotator (never defers) labels every item correctly
    honest = ei.pretrain_batch(dict(cfg, batch=3000, defer_margin={}), 0, 0)
    assert (honest.truth == raw.truth).all()
    with pytest.raises(ValueError):
        ei.pretrain_batch(dict(cfg, defer_margin={"physics": 2}), 0, 0)
    with pytest.raises(ValueError):
        ei.pretrain_batch({"batch": 4}, 0, 0)
    tiny = dict(cfg, steps=3, batch=8, warmup=1)
    m = ei.make_judge(dict(n_layer=1, n_head=2, d_model=16), 0)
    hist = ei.pretrain(m, tiny, 0, progress=False)
    assert len(hist.loss) == 3 and np.isfinite(hist.loss).all()
    with pytest.raises(TypeError):
        ei.make_judge([2, 4, 64], 0)


def test_gradient_probe_vacuous_for_a_confident_policy():
    """The notebook's gradient checks compare EIT and accuracy gradients; a judge that answers deterministically
    has all-equal groups, zero advantages and zero gradients under both rewards, so `gradient_probe_informative`
    (mean-baseline EIT vs accuracy gradients must differ) fails for it and passes for an uncertain judge."""
    torch.manual_seed(0)
    model = nn.Transformer(nn.TransformerConfig(vocab_size=len(ei.VOCAB), n_layer=1, n_head=2, d_model=16,
                                                max_len=ei.SEQ_LEN, pos="learned"))

    b = ei.make_batch(rng(6), 32, p_aligned=0.5)

    def rel_diff(m):
        g = {}
        for reward in ("eit", "accuracy"):
            m.zero_grad()
            loss, _ = ei.grpo_loss(m, b, 8, reward, "mean", torch.Generator().manual_seed(2))
            loss.backward()
            g[reward] = torch.cat([p.grad.flatten() for p in m.parameters() if p.grad is not None])
        return float((g["eit"] - g["accuracy"]).abs().max() / g["accuracy"].abs().max().clamp_min(1e-30))

    assert rel_diff(model) >= 0.05  # uncertain judge: the rewards' gradients differ
    assert rel_diff(Confident(model)) < 0.05  # confident judge: both zero, the check fails


def test_label_smoothing_and_informative_share():
    """Label smoothing ε caps the pre-trained judge's certainty (the base must keep some entropy under a cue for
    GRPO groups to carry advantages); `informative` counts the groups with any nonzero advantage: none for a
    judge that always answers the same, most for an uncertain one."""
    torch.manual_seed(0)
    model = nn.Transformer(nn.TransformerConfig(vocab_size=len(ei.VOCAB), n_layer=1, n_head=2, d_model=16,
                                                max_len=ei.SEQ_LEN, pos="learned"))
    b = ei.make_batch(rng(7), 32, p_aligned=0.5)
    l0, l2 = ei.sft_loss(model, b), ei.sft_loss(model, b, label_smoothing=0.2)
    assert l0.item() != pytest.approx(l2.item())
    with pytest.raises(ValueError):
        ei.sft_loss(model, b, label_smoothing=1.5)
    cfg = dict(ei.checkpoint_config("base"), steps=2, batch=8, warmup=1, label_smoothing=0.3)
    assert len(ei.pretrain(ei.make_judge(dict(n_layer=1, n_head=2, d_model=16), 0), cfg, 0,
                           progress=False).loss) == 2
    _, st = ei.grpo_loss(model, b, 8, "accuracy", "mean", torch.Generator().manual_seed(3))
    assert st["informative"] > 0.5  # an untrained judge answers near 50/50
    for reward in ("accuracy", "eit"):
        _, st = ei.grpo_loss(Confident(model), b, 8, reward, "mean", torch.Generator().manual_seed(3))
        assert st["informative"] == 0.0


def test_rl_batches_common_across_arms():
    """Common random numbers: an RL batch is keyed by (seed, step), not by the arm."""
    a, b = ei.rl_batch(3, 7, 32), ei.rl_batch(3, 7, 32)  # two balanced arms, one seed, one step
    assert ei.batch_digest(a) == ei.batch_digest(b)
    assert torch.equal(a.x, b.x) and (a.cue == b.cue).all()
    assert ei.batch_digest(ei.rl_batch(3, 8, 32)) != ei.batch_digest(a)
    assert ei.batch_digest(ei.rl_batch(4, 7, 32)) != ei.batch_digest(a)
    # the adversarial-only arm: the same items, only the cue's letter differs, and it is always wrong
    adv = ei.rl_batch(3, 7, 32, p_aligned=0.0)
    assert (adv.cue != adv.truth).all() and (adv.truth == a.truth).all()
    keep = [i for i in range(ei.SEQ_LEN) if i != ei.SEQ_LEN - 2]
    assert torch.equal(adv.x[:, keep], a.x[:, keep])
    # a broken input: one changed token or cue changes the digest, so the notebook's check would fail
    x = a.x.clone()
    x[0, 1 + ei.N_PRE] = (x[0, 1 + ei.N_PRE] + 1) % 10
    assert ei.batch_digest(ei.Batch(x, a.truth, a.cue, a.family, a.subject)) != ei.batch_digest(a)
    assert ei.batch_digest(ei.Batch(a.x, a.truth, 1 - a.cue, a.family, a.subject)) != ei.batch_digest(a)
    with pytest.raises(ValueError):
        ei.rl_batch(-1, 0, 4)
    with pytest.raises(ValueError):
        ei.rl_batch(0, 0, 0)
    with pytest.raises(TypeError):
        ei.batch_digest(a.x)


def test_unpaired_steps_counts_unshared_batches():
    """The notebook's common_batches check: 0 for batches keyed by (seed, step), > 0 for a broken keying."""
    steps = 6
    shared = {arm: [ei.batch_digest(ei.rl_batch(2, t, 16)) for t in range(steps)] for arm in ("acc", "eit")}
    assert ei.unpaired_steps(shared, steps) == 0
    # broken: batches keyed by the arm as well (a second data stream per arm)
    per_arm = {arm: [ei.batch_digest(ei.make_batch(np.random.default_rng([2, k, t]), 16)) for t in range(steps)]
               for k, arm in enumerate(("acc", "eit"))}
    assert ei.unpaired_steps(per_arm, steps) == steps
    # broken: one arm skipped a step, or ran past the budget
    assert ei.unpaired_steps({"acc": shared["acc"], "eit": shared["eit"][:-1]}, steps) == 1
    assert ei.unpaired_steps({"acc": shared["acc"] + ["x"], "eit": shared["eit"]}, steps) == 1
    assert ei.unpaired_steps({"acc": shared["acc"][1:] + shared["acc"][:1], "eit": shared["eit"]}, steps) == steps
    with pytest.raises(ValueError):
        ei.unpaired_steps({"acc": shared["acc"]}, steps)
    with pytest.raises(ValueError):
        ei.unpaired_steps(shared, 0)
    with pytest.raises(TypeError):
        ei.unpaired_steps({"acc": [1, 2], "eit": [1, 2]}, 2)
    with pytest.raises(TypeError):
        ei.unpaired_steps(list(shared.values()), steps)


def test_eval_sets_and_evaluate_judge():
    splits = {"train": ei.TRAIN_SUBJECTS, "held": ei.HELDOUT_SUBJECTS}
    conds = {"aligned": 1.0, "adversarial": 0.0}
    sets = ei.make_eval_sets(3, 20, splits, conds)
    assert len(sets) == 2 * (1 + len(ei.FAMILIES) * 2)
    assert all((b.cue == b.truth).all() for (_, f, c), b in sets.items() if c == "aligned")
    assert all((b.cue != b.truth).all() for (_, f, c), b in sets.items() if c == "adversarial")
    again = ei.make_eval_sets(3, 20, splits, conds)
    assert all(torch.equal(sets[k].x, again[k].x) for k in sets)
    torch.manual_seed(0)
    inner = nn.Transformer(nn.TransformerConfig(vocab_size=len(ei.VOCAB), n_layer=1, n_head=2, d_model=16,
                                                max_len=ei.SEQ_LEN, pos="learned"))
    rows = ei.evaluate_judge(Confident(inner), sets, chunk=7)  # always answers A
    for r, (key, b) in zip(rows, sets.items()):
        assert (r["split"], r["family"], r["cond"]) == key
        assert r["acc"] == pytest.approx((b.truth == 0).mean())
        if r["cond"] == "adversarial":
            assert r["follow"] == pytest.approx((b.cue == 0).mean())
        else:
            assert np.isnan(r["follow"])
    with pytest.raises(TypeError):
        ei.make_eval_sets(0, 5, {}, conds)


def test_gradient_probe_helpers():
    torch.manual_seed(0)
    model = nn.Transformer(nn.TransformerConfig(vocab_size=len(ei.VOCAB), n_layer=1, n_head=2, d_model=16,
                                                max_len=ei.SEQ_LEN, pos="learned"))
    b = ei.make_batch(rng(6), 32, p_aligned=0.5)
    g = {(r, m): ei.policy_gradient(model, b, 8, r, m, 2) for r in ("eit", "accuracy") for m in ("std", "mean")}
    assert ei.relative_max_diff(g["eit", "std"], g["accuracy", "std"]) <= 1e-4
    assert ei.relative_max_diff(g["eit", "mean"], g["accuracy", "mean"]) >= 0.05
    assert ei.mixed_share(model, b, 8, 0) > 0.5  # an untrained judge answers near 50/50
    assert ei.mixed_share(Confident(model), b, 8, 0) == 0.0
    with pytest.raises(ValueError):
        ei.relative_max_diff(torch.zeros(3), torch.zeros(4))


def test_paired_bootstrap_diff():
    g = rng(1)
    a = (g.random(400) < 0.9).astype(int)
    d, lo, hi = ei.paired_bootstrap_diff(a, a, 500, rng(2))
    assert d == lo == hi == 0.0  # identical answers: no difference, no spread
    b = a.copy()
    b[:40] = 1 - b[:40]  # flip 40 answers
    d, lo, hi = ei.paired_bootstrap_diff(a, b, 500, rng(2))
    assert d == pytest.approx((a - b).mean()) and lo <= d <= hi and hi - lo > 0
    with pytest.raises(ValueError):
        ei.paired_bootstrap_diff(a, b[:10])


# -- three options ------------------------------------------------------------------------------------------
def test_three_option_items():
    b = ei.make_batch(rng(21), 3000, subjects=ei.SUBJECTS, families=ei.FAMILIES, p_aligned=0.0, n_options=3)
    x = b.x.numpy()
    assert x.shape == (3000, ei.seq_len(3)) and b.n_options == 3 and x.max() < len(ei.VOCAB)
    opts = np.stack([x[:, o:o + ei.N_DIGITS] for o in ei.option_start(3)], 1)
    for i in range(300):  # the truth is the unique best option under the subject's rule
        sc = [ei._score(opts[i, j], ei.SUBJECTS[b.subject[i]]) for j in range(3)]
        assert b.truth[i] == int(np.argmax(sc)) and sorted(sc)[-1] > sorted(sc)[-2]
        assert ei.item_margin(ei.Batch(b.x[i:i + 1], b.truth[i:i + 1], b.cue[i:i + 1], b.family[i:i + 1],
                                       b.subject[i:i + 1]))[0] == sorted(sc)[-1] - sorted(sc)[-2]
    assert (b.cue != b.truth).all() and (b.cue >= 0).all()
    slot = np.isin(b.family, [ei.FAMILIES.index(f) for f in ei.SLOT_FAMILIES])
    assert (x[slot, -2] == np.array(ei.ANSWER_IDS)[b.cue[slot]]).all()
    order = b.family == ei.FAMILIES.index("order")
    assert (b.cue[order] == 0).all() and set(np.unique(b.truth[order])) == {1, 2}
    # the adversarial cue's wrong option is uniform over the two wrong options
    other = b.cue[~order] == (b.truth[~order] + 1) % 3
    assert 0.45 < other.mean() < 0.55
    bal = ei.make_batch(rng(22), 4000, n_options=3)
    assert abs((bal.cue == bal.truth).mean() - 0.5) < 0.03
    with pytest.raises(ValueError):
        ei.make_batch(rng(), 5, n_options=4)
    with pytest.raises(ValueError):
        ei.n_options_of(30)
    with pytest.raises(ValueError):  # a cue index past the options of a two-option item
        ei.Batch(bal.x[:, :ei.SEQ_LEN], bal.truth, bal.cue, bal.family, bal.subject)


@pytest.mark.parametrize("pred, truth, cue, expected", [
    (2, 0, 1, 0.0),  # adversarial cue, wrong but not the cue's option: no penalty, no bonus
    (1, 0, 1, -0.5),  # adversarial cue followed
    (2, 0, 0, -0.3),  # aligned cue, wrong
    (0, 0, 1, 1.5),  # adversarial cue resisted
])
def test_reward_three_options(pred, truth, cue, expected):
    assert ei.eit_reward(np.array([pred]), np.array([truth]), np.array([cue]))[0] == pytest.approx(expected)
    assert ei.accuracy_reward(np.array([pred]), np.array([truth]))[0] == float(pred == truth)


def test_std_advantages_differ_with_three_options():
    """With three options a group can hold a cue-following and an other wrong answer: EIT's std-normalized
    advantages then differ from the accuracy reward's (they agree on groups drawn from two answers only)."""
    truth, cue = np.array([0, 0]), np.array([1, 1])
    pred = np.array([[0, 1, 2, 1], [0, 1, 1, 0]])
    a_eit = ei.group_advantages(ei.eit_reward(pred, truth, cue), "std", eps=0.0)
    a_acc = ei.group_advantages(ei.accuracy_reward(pred, truth), "std", eps=0.0)
    assert not np.allclose(a_eit[0], a_acc[0])  # cue and other wrong answer in one group
    assert np.allclose(a_eit[1], a_acc[1])  # only the truth and the cue: affine, equal
    assert a_eit[0, 2] > a_eit[0, 1] and a_acc[0, 2] == a_acc[0, 1]


def test_three_option_gradients_differ_under_std():
    torch.manual_seed(0)
    model = ei.make_judge(dict(n_layer=1, n_head=2, d_model=16), 0)
    b3 = ei.make_batch(rng(23), 32, n_options=3)
    g = {r: ei.policy_gradient(model, b3, 8, r, "std", 4) for r in ("eit", "accuracy")}
    assert ei.relative_max_diff(g["eit"], g["accuracy"]) > 0.05
    b2 = ei.make_batch(rng(23), 32)
    g2 = {r: ei.policy_gradient(model, b2, 8, r, "std", 4) for r in ("eit", "accuracy")}
    assert ei.relative_max_diff(g2["eit"], g2["accuracy"]) <= 1e-4


def test_rl_batch_replay_and_options():
    b = ei.rl_batch(1, 2, 32, n_options=3, n_replay=8)
    assert len(b) == 32 and b.n_options == 3
    assert (b.cue[-8:] == -1).all() and (b.cue[:-8] >= 0).all()
    assert set(np.unique(b.subject)) <= {ei.SUBJECTS.index(s) for s in ei.TRAIN_SUBJECTS}
    adv = ei.rl_batch(1, 2, 32, p_aligned=0.0, n_options=3, n_replay=8)
    assert (adv.truth == b.truth).all() and (adv.cue[:-8] != adv.truth[:-8]).all()
    assert torch.equal(adv.x[-8:], b.x[-8:])
    assert ei.batch_digest(ei.rl_batch(1, 2, 32, n_options=3, n_replay=8)) == ei.batch_digest(b)
    with pytest.raises(ValueError):
        ei.rl_batch(1, 2, 8, n_replay=8)
    # the forgetting diagnostic: replay from every subject; the cued part is unchanged
    allr = ei.rl_batch(1, 2, 32, n_options=3, n_replay=8, replay_subjects=ei.SUBJECTS)
    assert torch.equal(allr.x[:-8], b.x[:-8]) and (allr.cue[-8:] == -1).all()
    many = ei.rl_batch(1, 3, 400, n_options=3, n_replay=300, replay_subjects=ei.HELDOUT_SUBJECTS)
    assert set(np.unique(many.subject[-300:])) == {ei.SUBJECTS.index(s) for s in ei.HELDOUT_SUBJECTS}


def test_seed_interval():
    m, lo, hi = ei.seed_interval([0.1, 0.2, 0.3])
    assert m == pytest.approx(0.2) and lo < 0.2 < hi
    assert lo == pytest.approx(0.2 - stats.t.ppf(0.975, 2) * 0.1 / np.sqrt(3))
    m, lo, hi = ei.seed_interval([-0.05, 0.05, 0.0, 0.01])
    assert lo < 0 < hi  # an effect that changes sign is not resolved
    with pytest.raises(ValueError):
        ei.seed_interval([0.1])
    with pytest.raises(ValueError):
        ei.seed_interval([0.1, float("nan")])


def test_train_arm_common_batches_and_bad_inputs():
    base = ei.make_judge(dict(n_layer=1, n_head=2, d_model=16), 0).eval()
    kw = dict(steps=3, batch=8, n_replay=2, G=4, lr=1e-3, beta=0.02, n_options=3)
    out = {arm: ei.train_arm(base, arm, 5, keep_tokens=True, **kw) for arm in ei.ARMS}
    assert ei.unpaired_steps({a: out[a][2] for a in ("RL acc, balanced", "EIT")}, 3) == 0
    assert ei.unpaired_steps({a: out[a][2] for a in ("SFT-debias", "RL acc, adversarial-only")}, 3) == 0
    assert out["SFT-debias"][1] == [] and len(out["EIT"][1]) == 3 and len(out["EIT"][3]) == 3
    # same seed, same arm: the same weights (determinism); the base is left untouched
    again = ei.train_arm(base, "EIT", 5, **kw)[0]
    assert all(torch.equal(p, q) for p, q in zip(again.parameters(), out["EIT"][0].parameters()))
    assert not all(torch.equal(p, q) for p, q in zip(base.parameters(), out["EIT"][0].parameters()))
    with pytest.raises(ValueError):
        ei.train_arm(base, "RL acc, mixed", 5, **kw)
    with pytest.raises(TypeError):
        ei.train_arm("base", "EIT", 5, **kw)


def test_chapter_eval_sets_and_arms_config():
    sets = ei.chapter_eval_sets(0, 10, 3)
    assert len(sets) == 1 + 2 * len(ei.FAMILIES) + 3
    assert all(k[0] == "train subjects" or k[1] in ("none", "bandwagon") for k in sets)
    assert all(b.n_options == 3 for b in sets.values())
    cfg = ei.arms_config()
    assert cfg["seeds"] == list(range(10)) and cfg["base_seeds"] == list(range(ei.N_BASE))
    assert cfg["arms"] == list(ei.ARMS) and cfg["base_seeds"] == ei.checkpoint_config("base")["seeds"]
    assert ei.checkpoint_config("arms") == cfg and ei.arms_config((7, 8))["base_seeds"] == [7, 8, 9, 10, 11]
    assert 0 < cfg["rewards_differ_bar"] < 1 and cfg["p_hidden"] == ei.checkpoint_config("base")["p_hidden"]
    # the balanced arms' data and the base's pre-training: the cue on the truth as chance would (1/3)
    assert cfg["p_aligned"] == ei.P_ALIGNED == pytest.approx(1 / cfg["n_options"])
    assert ei.ARMS["EIT"][1] == ei.ARMS["RL acc, balanced"][1] == ei.checkpoint_config("base")["p_aligned"]
    bc = ei.checkpoint_config("base")["conditions"]
    assert bc == ei.BASE_CONDITIONS and bc["base_partly_follows"]["band"] == [0.3, 0.6]
    bc["base_partly_follows"]["band"][0] = 0.0  # the config is a copy: the registered bars cannot be edited
    assert ei.BASE_CONDITIONS["base_partly_follows"]["band"] == [0.3, 0.6]
    hid = ei.chapter_eval_sets(0, 200, 3, 0.5)
    assert set(hid) == set(sets) and all(0.3 < b.hidden.mean() < 0.7 for b in hid.values())
    assert not any(b.hidden.any() for b in sets.values())
    with pytest.raises(ValueError):
        ei.arms_config((-1, 0))


def test_cluster_interval_over_base_judges():
    """Seeds sharing a base judge are averaged first; the t-interval runs over the judges (df = judges - 1)."""
    d, c = [0.1, 0.3, 0.2, 0.4, 0.0], [0, 0, 1, 1, 2]
    m, lo, hi = ei.cluster_interval(d, c)
    means = [0.2, 0.3, 0.0]
    assert m == pytest.approx(np.mean(means))
    assert hi - m == pytest.approx(stats.t.ppf(0.975, 2) * np.std(means, ddof=1) / np.sqrt(3))
    # one seed per cluster: the seed interval
    assert ei.cluster_interval(d, range(5)) == pytest.approx(ei.seed_interval(d))
    # clustered seeds give a wider interval than the same seeds taken as independent
    d10 = [0.05, 0.04, 0.06, -0.03, -0.02, -0.04, 0.01, 0.0, 0.02, 0.05]
    c10 = [0, 0, 0, 1, 1, 1, 2, 2, 2, 0]
    _, lo_c, hi_c = ei.cluster_interval(d10, c10)
    _, lo_s, hi_s = ei.seed_interval(d10)
    assert hi_c - lo_c > hi_s - lo_s
    with pytest.raises(ValueError):
        ei.cluster_interval([0.1, 0.2], [0, 0])  # one cluster
    with pytest.raises(ValueError):
        ei.cluster_interval([0.1, 0.2], [0])  # shapes differ


def test_rewards_differ_statistic():
    """grpo_loss reports the share of groups whose std advantages differ between EIT and accuracy: none with two
    options (the derivation), some with three on an unsure judge, none without cues."""
    torch.manual_seed(0)
    model = ei.make_judge(dict(n_layer=1, n_head=2, d_model=16), 0)
    g = torch.Generator().manual_seed(0)
    _, st2 = ei.grpo_loss(model, ei.make_batch(rng(3), 64), 8, "eit", "std", g)
    assert st2["rewards_differ"] == 0.0
    _, st3 = ei.grpo_loss(model, ei.make_batch(rng(3), 64, n_options=3, p_aligned=0.0), 8, "eit", "std", g)
    assert 0.1 < st3["rewards_differ"] <= st3["informative"]
    _, st0 = ei.grpo_loss(model, ei.make_batch(rng(3), 64, n_options=3, p_cue=0.0), 8, "eit", "std", g)
    assert st0["rewards_differ"] == 0.0


# -- hidden digits ------------------------------------------------------------------------------------------
def test_hidden_digits():
    plain = ei.make_batch(rng(30), 2000, subjects=ei.SUBJECTS, families=ei.FAMILIES, n_options=3)
    again = ei.make_batch(rng(30), 2000, subjects=ei.SUBJECTS, families=ei.FAMILIES, n_options=3, p_hidden=0.0)
    assert torch.equal(plain.x, again.x) and not plain.hidden.any()  # p_hidden = 0 draws nothing more
    assert (ei.item_margin(plain) == plain.margin).all()
    # the margin read from the tokens equals the stored one when nothing is hidden
    bare = ei.Batch(plain.x, plain.truth, plain.cue, plain.family, plain.subject)
    assert (ei.item_margin(bare) == plain.margin).all()
    b = ei.make_batch(rng(30), 2000, subjects=ei.SUBJECTS, families=ei.FAMILIES, n_options=3, p_hidden=0.5)
    assert 0.45 < b.hidden.mean() < 0.55
    q = ei.VOCAB["?"]
    x = b.x.numpy()
    for o in ei.option_start(3):
        tail = x[:, o + ei.N_DIGITS - ei.N_HIDDEN:o + ei.N_DIGITS]
        head = x[:, o:o + ei.N_DIGITS - ei.N_HIDDEN]
        assert (tail[b.hidden] == q).all() and (tail[~b.hidden] < 10).all() and (head < 10).all()
    assert ((x == q).sum(1) == b.hidden * 3 * ei.N_HIDDEN).all()  # nowhere else
    # the items are the same as without hiding except for the hidden digits; the margin is the full digits'
    assert (b.truth == plain.truth).all() and (b.margin == plain.margin).all()
    assert torch.equal(b.x[~torch.as_tensor(b.hidden)], plain.x[~torch.as_tensor(b.hidden)])
    # the margin cannot be read from tokens that hide digits
    with pytest.raises(ValueError):
        ei.item_margin(ei.Batch(b.x, b.truth, b.cue, b.family, b.subject))
    with pytest.raises(ValueError):
        ei.make_batch(rng(0), 3, p_hidden=1.5)
    with pytest.raises(ValueError):
        ei.Batch(b.x[:2], b.truth[:2], b.cue[:2], b.family[:2], b.subject[:2], margin=np.array([0, 1]))
    # the RL batch hides digits on cued and replay items alike, and keeps margin and flags through the concat
    r = ei.rl_batch(0, 0, 400, 0.5, n_options=3, n_replay=100, p_hidden=0.5)
    assert r.margin is not None and len(r.hidden) == 400
    assert 0.35 < r.hidden[:300].mean() < 0.65 and 0.3 < r.hidden[300:].mean() < 0.7
    assert not ei.rl_batch(0, 0, 40, 0.5, n_options=3, n_replay=10).hidden.any()


def test_uninformed_expected_reward():
    # two options: the policies of policy_expected_reward
    assert ei.uninformed_expected_reward("follow", 2, 0.5, "eit") == pytest.approx(0.25)
    assert ei.uninformed_expected_reward("other", 2, 0.5, "eit") == pytest.approx(0.60)
    # three options, balanced: the cue pays under accuracy, barely under EIT
    acc = {p: ei.uninformed_expected_reward(p, 3, 0.5, "accuracy") for p in ("follow", "other", "uniform")}
    eit = {p: ei.uninformed_expected_reward(p, 3, 0.5, "eit") for p in ("follow", "other", "uniform")}
    assert acc == pytest.approx({"follow": 0.5, "other": 0.25, "uniform": 1 / 3})
    assert eit == pytest.approx({"follow": 0.25, "other": 0.225, "uniform": 0.7 / 3})
    # a cue uniform over the options (p_aligned = 1/3) carries nothing under accuracy
    assert ei.uninformed_expected_reward("follow", 3, 1 / 3, "accuracy") == pytest.approx(1 / 3)
    assert ei.uninformed_expected_reward("other", 3, 1 / 3, "accuracy") == pytest.approx(1 / 3)
    # ... while the EIT reward pays avoiding it: 1/3 - 2/3 * 0.5 = 0 for the cue, -0.1 + 2/3 * 0.75 for the others
    assert ei.uninformed_expected_reward("follow", 3, 1 / 3, "eit") == pytest.approx(0.0)
    assert ei.uninformed_expected_reward("other", 3, 1 / 3, "eit") == pytest.approx(0.4)
    for bad in (dict(policy="truth"), dict(n_options=4), dict(p_aligned=1.5), dict(reward="sft")):
        with pytest.raises(ValueError):
            ei.uninformed_expected_reward(**(dict(policy="follow") | bad))


def test_pack_answers_roundtrip():
    a = rng(40).integers(0, 3, 2001)
    p = ei.pack_answers(a)
    assert p.dtype == np.uint8 and len(p) == 501
    assert (ei.unpack_answers(p, 2001) == a).all() and (ei.unpack_answers(p, 5) == a[:5]).all()
    assert len(ei.pack_answers(np.array([], dtype=int))) == 0
    with pytest.raises(ValueError):
        ei.pack_answers(np.array([0, 4]))
    with pytest.raises(ValueError):
        ei.unpack_answers(p, 2005)
    with pytest.raises(TypeError):
        ei.unpack_answers(p.astype(np.int64), 3)
    with pytest.raises(TypeError):
        ei.pack_answers(np.array([0.0, 1.0]))


def test_ideal_accuracy():
    shown = ei.make_batch(rng(40), 300, n_options=3)
    assert ei.ideal_accuracy(shown, 10) == 1.0  # every digit shown: the truth
    hid = ei.make_batch(rng(40), 300, n_options=3, p_hidden=1.0)
    a = ei.ideal_accuracy(hid, 500, rng(1))
    assert 1 / 3 < a < 1.0  # the truth is not in the prompt, but the shown digits tell a lot
    # the ideal judge beats answering the option with the best shown digits' score (it knows the prior)
    x = hid.x.numpy()
    vis = ei.N_DIGITS - ei.N_HIDDEN
    head = np.stack([x[:, o:o + vis] for o in ei.option_start(3)], 1)
    naive = (ei._scores(head, hid.subject).argmax(1) == hid.truth).mean()
    assert a >= naive - 0.03
    # the cue is ignored: moving it changes nothing
    moved = ei.make_batch(rng(40), 300, n_options=3, p_hidden=1.0, p_aligned=0.0)
    assert ei.ideal_accuracy(moved, 500, rng(1)) == a
    with pytest.raises(TypeError):
        ei.ideal_accuracy("items")
    with pytest.raises(ValueError):
        ei.ideal_accuracy(hid, 0)


def test_annotator_simulation_reproduces_the_margins():
    """The deferral margins' simulation: the registered margins put the ideal judge of the annotator inside the band
    of base_partly_follows and about 0.38 of each subject split close; the earlier margins (5/1/3/6) fall below."""
    band = ei.BASE_CONDITIONS["base_partly_follows"]["band"]
    sim = ei.annotator_simulation()  # the notebook's call (deterministic: seed 0)
    assert band[0] <= sim["ideal_adversarial"] <= band[1]
    assert set(sim["close"]) == set(ei.SUBJECTS)
    assert all(0.32 <= v <= 0.44 for v in sim["close_split"].values())
    earlier = ei.annotator_simulation({"sum": 5, "high_count": 1, "ends": 3, "odd_sum": 6})
    assert earlier["ideal_adversarial"] < band[0]  # a broken margin set fails the band
    assert all(v > 0.5 for v in earlier["close_split"].values())
    # no deference at all: the ideal judge is right on every item shown in full
    none = ei.annotator_simulation({s: -1 for s in ei.SUBJECTS}, n=300, n_draws=200, p_hidden=0.0)
    assert none["ideal_adversarial"] == 1.0 and all(v == 0.0 for v in none["close"].values())
    assert ei.annotator_simulation(n=300, n_draws=200, seed=3) == ei.annotator_simulation(n=300, n_draws=200, seed=3)
    with pytest.raises(ValueError):
        ei.annotator_simulation({"sum": 1})
    with pytest.raises(ValueError):
        ei.annotator_simulation({"sum": 1, "high_count": 1, "ends": 2, "odd_sum": -2})
    with pytest.raises(ValueError):
        ei.annotator_simulation(n=0)


def test_shown_in_full_and_subset():
    b = ei.make_batch(rng(41), 200, n_options=3, p_hidden=0.5)
    mask = ei.shown_in_full(b)
    assert (mask == ~b.hidden).all() and 0 < mask.sum() < 200
    bare = ei.Batch(b.x, b.truth, b.cue, b.family, b.subject)  # no hidden record: read from the tokens
    assert (ei.shown_in_full(bare) == mask).all()
    s = ei.subset(b, mask)
    assert len(s) == mask.sum() and not s.hidden.any() and (s.truth == b.truth[mask]).all()
    assert ei.ideal_accuracy(s, 10) == 1.0  # the aligned_preserved items: a cue-ignoring judge can be right
    with pytest.raises(ValueError):
        ei.subset(b, np.zeros(200, dtype=bool))
    with pytest.raises(ValueError):
        ei.subset(b, mask[:10])
    with pytest.raises(TypeError):
        ei.shown_in_full("items")


def test_round4_registration():
    cfg = ei.arms_config()
    assert cfg["beta"] == ei.BETA == 1.0 and ei.BETA_BEFORE == 0.02
    r = ei.CLAIM_READINGS
    assert r["aligned_preserved"]["items"] == r["shortcut_of_adversarial_only"]["items"] == "shown in full"
    assert (r["aligned_preserved"]["op"], r["aligned_preserved"]["target"]) == (">=", -0.02)
    assert (r["shortcut_of_adversarial_only"]["op"], r["shortcut_of_adversarial_only"]["target"]) == ("<", -0.05)
    assert r["no_forgetting_heldout"]["target"] == -0.02
    assert all(v["cell"] in ei.chapter_eval_sets(0, 5, 3) for v in r.values())


def test_round5_registration():
    assert ei.BETA_SWEEP == (0.02, 0.2, 1.0) and ei.BETA in ei.BETA_SWEEP
    r = ei.SWEEP_READINGS["eit_vs_accuracy_reward"]
    assert (r["op"], r["target"], r["registered_beta"]) == (">", 0.0, ei.BETA)
    assert r["cell"] in ei.chapter_eval_sets(0, 5, 3) and ei.FORGETTING_READING["cell"] in ei.chapter_eval_sets(0, 5, 3)
    a = ei.ANCHOR
    assert a["beta"] == ei.BETA and a["n_anchor"] == 16 and a["beta_anchor"] == 10.0
    assert set(a["anchor_subjects"]).isdisjoint(ei.HELDOUT_SUBJECTS)  # held-out prompts stay unseen


def test_anchor_batch_uncued_keyed_and_apart_from_rl_batches():
    a = ei.anchor_batch(3, 7, 16, n_options=3, p_hidden=0.5)
    assert (a.cue == -1).all() and len(a.truth) == 16
    assert torch.equal(a.x, ei.anchor_batch(3, 7, 16, n_options=3, p_hidden=0.5).x)
    assert not torch.equal(a.x, ei.anchor_batch(3, 8, 16, n_options=3, p_hidden=0.5).x)
    subj = {ei.VOCAB[f"<subj:{s}>"] for s in ei.HELDOUT_SUBJECTS}
    assert not torch.isin(a.x, torch.tensor(sorted(subj))).any()
    with pytest.raises(ValueError):
        ei.anchor_batch(3, -1, 16)
    with pytest.raises(ValueError):
        ei.anchor_batch(3, 0, 0)


def test_train_arm_anchor_off_is_the_stored_recipe_and_on_pulls_to_the_base():
    base = ei.make_judge(dict(n_layer=1, n_head=2, d_model=16), 0).eval()
    kw = dict(steps=6, batch=8, n_replay=2, G=4, lr=3e-2, beta=0.0, n_options=3)
    plain = ei.train_arm(base, "EIT", 5, **kw)
    off = ei.train_arm(base, "EIT", 5, n_anchor=0, beta_anchor=10.0, **kw)
    assert all(torch.equal(p, q) for p, q in zip(plain[0].parameters(), off[0].parameters()))
    assert plain[2] == off[2]  # the RL batches do not move
    on = ei.train_arm(base, "EIT", 5, n_anchor=16, beta_anchor=50.0, **kw)
    assert on[2] == plain[2] and "anchor_kl" in on[1][0]
    probe = ei.anchor_batch(99, 0, 256, n_options=3)
    ref = torch.log_softmax(ei.answer_logits(base, probe.x), -1).detach()

    def kl(m):
        logp = torch.log_softmax(ei.answer_logits(m, probe.x), -1).detach()
        return float(ei.kl_to_reference(logp, ref).mean())

    assert kl(on[0]) < kl(plain[0])
    with pytest.raises(ValueError):
        ei.train_arm(base, "EIT", 5, n_anchor=-1, **kw)
    with pytest.raises(ValueError):
        ei.train_arm(base, "EIT", 5, n_anchor=4, beta_anchor=-1.0, **kw)


def test_forgetting_shift():
    pb = np.array([[0.52, 0.46, 0.02], [0.9, 0.05, 0.05], [0.2, 0.7, 0.1], [0.5, 0.45, 0.05]])
    pa = np.array([[0.40, 0.58, 0.02], [0.9, 0.05, 0.05], [0.6, 0.3, 0.1], [0.6, 0.35, 0.05]])
    truth = np.array([0, 0, 0, 0])
    f = ei.forgetting_shift(pb, pa, truth, tie=0.1, ratio=2.0)
    # item 0: base right near a tie, lost; item 2: base wrong, gained; items 1, 3 stay right
    assert (f["lost"], f["gained"], f["n"]) == (1, 1, 4)
    assert f["near_tie_all"] == 0.5 and f["near_tie_lost"] == 1.0 and f["near_tie_gained"] == 0.0
    assert f["clusters"]  # 1.0 >= 2 x 0.5
    assert f["net"] == 0.0 and np.isclose(f["shift_all"], np.mean([-0.12, 0, 0.4, 0.1]))
    assert np.isclose(f["shift_near_tie"], np.mean([-0.12, 0.1]))
    assert not ei.forgetting_shift(pb, pa, truth, tie=0.1, ratio=2.5)["clusters"]
    assert not ei.forgetting_shift(pb, pb, truth)["clusters"]  # nothing lost: no cluster
    with pytest.raises(ValueError):
        ei.forgetting_shift(pb, pa[:3], truth)
    with pytest.raises(ValueError):
        ei.forgetting_shift(pb, pa, np.array([0, 0, 0, 3]))
    with pytest.raises(ValueError):
        ei.forgetting_shift(pb, pa, truth, tie=1.5)
    with pytest.raises(TypeError):
        ei.forgetting_shift("pb", pa, truth)


def test_make_sweep_tiny(tmp_path):
    import json
    from pathlib import Path

    mod = load_module(Path(__file__).resolve().parents[1] / "data" / ei.CHECKPOINT_SLUG / "make_sweep.py",
                      "make_sweep")
    out = mod.main(["--tiny", "--beta", "0.2", "--anchor", "--out", str(tmp_path)])
    sweep, anchor = (json.loads(Path(o).read_text()) for o in out)
    assert sweep["beta"] == 0.2 and set(sweep["arms"]) == set(mod.RL_ARMS) and not sweep["anchor"]
    assert anchor["anchor"] and set(anchor["arms"]) == set(ei.ANCHOR["arms"])
    assert anchor["config"]["beta_anchor"] == ei.ANCHOR["beta_anchor"]
    e = sweep["eit_vs_accuracy_reward"]
    assert len(e["per_seed"]) == 2 and e["low"] <= e["mean"] <= e["high"]
    f = sweep["arms"]["EIT"]["0"]["forgetting"]
    assert f["n"] == 20 and 0 <= f["near_tie_all"] <= 1
    with pytest.raises(SystemExit):
        mod.main(["--beta", "0.5"])  # not a registered beta
