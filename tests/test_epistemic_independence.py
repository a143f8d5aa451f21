"""Tests of helpers.epistemic_independence: the judge-task generator, the EIT reward, group advantages."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from helpers import epistemic_independence as ei
from helpers import nn


def rng(s=0):
    return np.random.default_rng(s)


# -- the generator ----------------------------------------------------------------------------------------
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
    a, bb = x[:, 1:1 + ei.N_DIGITS], x[:, 1 + ei.N_DIGITS + ei.N_PAD + 1:][:, :ei.N_DIGITS]
    for i in range(len(b)):
        s = ei.SUBJECTS[b.subject[i]]
        sa, sb = ei._score(a[i], s), ei._score(bb[i], s)
        assert sa != sb and b.truth[i] == int(sb > sa)
    assert (b.cue == -1).all() and (b.family == -1).all()


def test_cue_tokens_and_families():
    b = ei.make_batch(rng(3), 2000, families=ei.FAMILIES, p_aligned=0.0)
    x = b.x.numpy()
    assert (b.cue == 1 - b.truth).all()  # adversarial-only
    letters = x[:, -2]
    for f in range(4):
        sel = b.family == f
        if ei.FAMILIES[f] == "verbosity":
            assert (letters[sel] == ei.VOCAB["<pad>"]).all()
            assert (x[sel] == ei.VOCAB["<elab>"]).sum(1).min() == ei.N_PAD
        else:
            assert (letters[sel] == np.where(b.cue[sel] == 0, ei.A_ID, ei.B_ID)).all()
    assert x.shape == (2000, ei.SEQ_LEN) and x.max() < len(ei.VOCAB)


def test_bandwagon_only_data_has_no_ood_tokens():
    b = ei.make_batch(rng(4), 3000, families=("bandwagon",))
    ood = [v for k, v in ei.VOCAB.items() if k.startswith(("<authority", "<distraction", "<elab"))]
    assert not np.isin(b.x.numpy(), ood).any()


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
        ei.eit_reward(np.array([2]), np.array([0]), np.array([0]))
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
