"""Tests for helpers.transfer_entropy: estimators against analytic values, nulls, invariance, head hooks."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import transfer_entropy as te


@pytest.mark.parametrize("dx", [1, 3, 8])
def test_gaussian_te_matches_analytic(dx):
    b = np.linspace(0.3, 1.0, dx)
    X, Y, Yn = te.linear_gaussian_system(20000, b, sigma=1.0, seed=dx)
    assert te.gaussian_te(X, Y, Yn) == pytest.approx(te.linear_gaussian_te_truth(b, 1.0), abs=0.02)


def test_gaussian_mi_bivariate_closed_form():
    rng = np.random.default_rng(0)
    rho = 0.8
    x = rng.normal(size=50000)
    y = rho * x + np.sqrt(1 - rho**2) * rng.normal(size=50000)
    assert te.gaussian_cmi(x, y) == pytest.approx(-0.5 * np.log(1 - rho**2), abs=0.01)


def test_ksg_matches_analytic_low_dim():
    X, Y, Yn = te.linear_gaussian_system(3000, [0.8], seed=1)
    truth = te.linear_gaussian_te_truth([0.8], 1.0)
    assert te.ksg_cmi(Yn, X, Y, k=4) == pytest.approx(truth, abs=0.1)
    rng = np.random.default_rng(2)
    x = rng.normal(size=3000)
    y = 0.6 * x + 0.8 * rng.normal(size=3000)
    assert te.ksg_cmi(x, y, k=4) == pytest.approx(-0.5 * np.log(1 - 0.36), abs=0.05)


def test_ksg_sees_nonlinear_dependence_gaussian_misses():
    rng = np.random.default_rng(3)
    n = 3000
    X, Y = rng.normal(size=(n, 1)), rng.normal(size=(n, 1))
    Yn = 0.5 * Y + np.abs(X) + 0.3 * rng.normal(size=(n, 1))  # even in X: no linear trace
    assert te.gaussian_te(X, Y, Yn) < 0.02
    assert te.ksg_cmi(Yn, X, Y) > 0.3


def test_conditioning_matters():
    """Y' = Y exactly copies the past: X carries no *new* information even though X correlates with Y."""
    rng = np.random.default_rng(4)
    X = rng.normal(size=(5000, 1))
    Y = X + 0.5 * rng.normal(size=(5000, 1))
    Yn = Y + 0.1 * rng.normal(size=(5000, 1))
    assert te.gaussian_cmi(Yn, X) > 0.5
    assert te.gaussian_te(X, Y, Yn) < 0.01


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_gaussian_te_linear_invariance(seed):
    rng = np.random.default_rng(seed)
    X, Y, Yn = te.linear_gaussian_system(500, rng.normal(size=3), seed=seed)
    Mx = rng.normal(size=(3, 3)) + 3 * np.eye(3)
    # invertible affine maps of the source and of the target at each depth leave TE unchanged
    a = te.gaussian_te(X, Y, Yn)
    b = te.gaussian_te(X @ Mx + 1.0, 2.0 * Y - 3, -0.5 * Yn + 7)
    assert a == pytest.approx(b, abs=1e-8)


def test_data_processing():
    X, Y, Yn = te.linear_gaussian_system(50000, [0.7, 0.7], seed=5)
    noisy = X + np.random.default_rng(6).normal(size=X.shape)
    assert te.gaussian_te(noisy, Y, Yn) < te.gaussian_te(X, Y, Yn)


def test_permutation_null_is_calibrated_under_independence():
    inside = 0
    for s in range(20):
        X, Y, Yn = te.linear_gaussian_system(400, [0.0], seed=100 + s)
        _, _, pval = te.permutation_null(te.gaussian_cmi, Yn, X, Y, n_perm=40, seed=s)
        inside += pval > 0.05
    assert inside >= 16
    X, Y, Yn = te.linear_gaussian_system(400, [0.5], seed=7)
    assert te.permutation_null(te.gaussian_cmi, Yn, X, Y, 40, 0)[2] < 0.05


def test_pca_reduce():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 2)) @ rng.normal(size=(2, 10))
    Z = te.pca_reduce(X, 2)
    assert Z.shape == (200, 2)
    assert np.allclose((Z**2).sum(), ((X - X.mean(0)) ** 2).sum())


def small_vlm(seed=0):
    torch.manual_seed(seed)
    return te.TinyVLM(n_patches=16, patch_dim=4, n_questions=3, n_answers=14, d_model=32, n_layer=2, n_head=4)


def test_head_mask_identity_and_effect():
    m = small_vlm().eval()
    x, q = torch.rand(5, 16, 4), torch.tensor([0, 1, 2, 0, 1])
    with torch.no_grad():
        ref = m(x, q)
        with te.head_mask(m, np.ones((2, 4))):
            same = m(x, q)
        with te.head_mask(m, np.array([[1, 1, 1, 1], [0, 1, 1, 1]])):
            pruned = m(x, q)
    assert torch.equal(ref, same)
    assert not torch.allclose(ref, pruned)
    assert not m.blocks[1].attn.proj._forward_pre_hooks
    calls = []
    m.blocks[0].attn.proj.register_forward_pre_hook(lambda *a: calls.append(1))
    with torch.no_grad(), te.head_mask(m, np.ones((2, 4))):
        assert m.blocks[0].attn.proj._forward_pre_hooks and len(m.blocks[0].attn.proj._forward_pre_hooks) == 2
        m(x, q)
    assert calls == [1]


def test_head_writes_sum_to_attention_output():
    m = small_vlm().eval()
    x, q = torch.rand(3, 16, 4), torch.tensor([0, 1, 2])
    store, outs = [], []
    h = m.blocks[0].attn.register_forward_hook(lambda mod, i, o: outs.append(o.detach()))
    with torch.no_grad(), te.head_writes(m, store):
        m(x, q)
    h.remove()
    assert len(store) == 2 and store[0].shape == (3, 18, 4, 32)
    torch.testing.assert_close(store[0].sum(2) + m.blocks[0].attn.proj.bias, outs[0], atol=1e-5, rtol=1e-5)


def test_digits_patches():
    img = np.arange(64).reshape(1, 8, 8)
    p = te.digits_patches(img)
    assert p.shape == (1, 16, 4)
    assert np.allclose(p[0, 0] * 16, [0, 1, 8, 9])


def test_bad_input():
    with pytest.raises(ValueError, match="same number of trials"):
        te.gaussian_cmi(np.zeros((10, 1)), np.zeros((9, 1)))
    with pytest.raises(ValueError, match="NaN"):
        te.gaussian_cmi(np.full((10, 1), np.nan), np.zeros((10, 1)))
    with pytest.raises(TypeError):
        te.gaussian_cmi([1, 2, 3], np.zeros(3))
    with pytest.raises(ValueError, match="k must"):
        te.ksg_cmi(np.zeros((5, 1)), np.zeros((5, 1)), k=5)
    with pytest.raises(ValueError, match="singular"):
        te.gaussian_cmi(np.ones((10, 1)), np.random.default_rng(0).normal(size=(10, 1)))
    with pytest.raises(ValueError, match="mask must have shape"):
        with te.head_mask(small_vlm(), np.ones((3, 4))):
            pass
    with pytest.raises(ValueError, match="sigma"):
        te.linear_gaussian_te_truth([1.0], 0.0)
    with pytest.raises(ValueError, match="patches"):
        small_vlm()(torch.rand(2, 15, 4), torch.tensor([0, 1]))


def test_pca_drops_constant_and_attention_recorded():
    assert te.pca_reduce(np.ones((20, 3)), 2).shape == (20, 0)
    rng = np.random.default_rng(0)
    X, Y = rng.normal(size=(300, 1)), rng.normal(size=(300, 1))
    assert te.gaussian_cmi(X, Y, te.pca_reduce(np.ones((300, 2)), 2)) == pytest.approx(te.gaussian_cmi(X, Y))
    m = small_vlm().eval()
    att = []
    with torch.no_grad():
        m(torch.rand(2, 16, 4), torch.tensor([0, 1]), attn=att)
    assert len(att) == 2 and att[0].shape == (2, 4, 18, 18)
    torch.testing.assert_close(att[0].sum(-1), torch.ones(2, 4, 18))


@pytest.fixture(scope="module")
def minilm():
    return te.load_minilm()


def test_wordpiece_tokenizer():
    vocab = {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "un", "##aff", "##able", "!", "cafe"])}
    tok = te.WordPiece(vocab)
    assert tok.tokenize("Unaffable! Café") == ["un", "##aff", "##able", "!", "cafe"]
    assert tok.tokenize("xyz") == ["[UNK]"]
    ids, att = tok(["unaffable", "cafe cafe cafe"], max_len=4)
    assert ids.tolist() == [[2, 4, 5, 6, 3][:3] + [3], [2, 8, 8, 3]] and att.tolist() == [[1] * 4, [1] * 4]
    ids, att = tok(["cafe", "cafe cafe"])
    assert ids.tolist() == [[2, 8, 3, 0], [2, 8, 8, 3]] and att[0].tolist() == [1, 1, 1, 0]
    with pytest.raises(TypeError, match="list of strings"):
        tok("cafe")
    with pytest.raises(ValueError, match="special token"):
        te.WordPiece({"a": 0})


def test_minilm_loads_and_embeds(minilm):
    model, tok = minilm
    ids, att = tok(["A man is eating food.", "A man is eating a piece of bread.", "The girl is carrying a baby."])
    with torch.no_grad():
        e = model(ids, att)
        rec = {}
        e2 = model(ids, att, head_mask=np.ones((6, 12)), record=rec)
    assert e.shape == (3, 384)
    torch.testing.assert_close(e.norm(dim=-1), torch.ones(3))
    assert torch.equal(e, e2)
    sims = (e @ e.T).numpy()
    assert sims[0, 1] == pytest.approx(0.755, abs=0.01)  # the value sentence-transformers gives for this pair
    assert sims[0, 1] > sims[0, 2] + 0.5
    assert len(rec["hidden"]) == 7 and rec["writes"][0].shape == (3, ids.shape[1], 12, 384)
    # the per-head writes add up to the attention output before its bias and residual
    lay = model.encoder.layer[0]
    pre = lay.attention.output.LayerNorm
    resid = rec["hidden"][0]
    total = rec["writes"][0].sum(2) + lay.attention.output.dense.bias + resid
    after = pre(total)
    lay_out = lay.output.LayerNorm(lay.output.dense(torch.nn.functional.gelu(lay.intermediate.dense(after))) + after)
    torch.testing.assert_close(lay_out, rec["hidden"][1], atol=1e-4, rtol=1e-4)
    mask = np.ones((6, 12))
    mask[0, :6] = 0
    with torch.no_grad():
        assert not torch.allclose(model(ids, att, head_mask=mask), e)
    with pytest.raises(ValueError, match="head_mask must be"):
        model(ids, att, head_mask=np.ones((5, 12)))
    with pytest.raises(ValueError, match="att"):
        model(ids, att[:, :-1])


def test_minilm_random_control_differs(minilm):
    model, tok = minilm
    rnd, _ = te.load_minilm(random_init_seed=0)
    ids, att = tok(["A man is eating food."])
    with torch.no_grad():
        assert not torch.allclose(model(ids, att), rnd(ids, att))
    assert float(rnd.encoder.layer[0].attention.self.query.weight.detach().std()) == pytest.approx(0.02, rel=0.05)


def test_stdlib_sentences():
    s = te.stdlib_sentences(["json", "textwrap"], max_per_module=3)
    assert 1 <= len(s) <= 6 and {m for m, _ in s} <= {"json", "textwrap"}
    assert all(5 <= len(x.split()) <= 30 for _, x in s)
    with pytest.raises(TypeError, match="modules"):
        te.stdlib_sentences("json")


def test_encode_pooled_keeps_order_and_matches_embedding(minilm):
    model, tok = minilm
    texts = ["A short one.", "A much longer sentence with quite a few more words in it.", "Mid length here ok."]
    out = te.encode_pooled(model, tok, texts, batch=2)
    with torch.no_grad():
        direct = torch.cat([model(*tok([t])) for t in texts])
    torch.testing.assert_close(out["emb"], direct, atol=1e-5, rtol=1e-5)
    assert len(out["hidden"]) == 7 and out["writes"][0].shape == (3, 12, 384)
    assert out["attn_special"][0].shape == (3, 12) and float(out["attn_special"][0].max()) <= 1 + 1e-6


def test_embedding_saliency_matches_finite_difference(minilm):
    model, tok = minilm
    ids, att = tok(["The quick brown fox jumps over the lazy dog."])
    sal = te.embedding_saliency(model, ids, att, n_probe=64, seed=0)
    assert sal.shape == (6, 12) and np.all(sal >= 0)
    m = torch.ones(1, 6, 12)
    m[0, 2, 3] = 1 - 1e-3
    with torch.no_grad():
        fd = float((model(ids, att, head_mask=m) - model(ids, att)).norm() / 1e-3)
    assert sal[2, 3] == pytest.approx(fd, rel=0.3)


def test_head_te_unique_discounts_redundant_heads():
    rng = np.random.default_rng(0)
    n = 3000
    Y = rng.normal(size=(n, 2))
    s = rng.normal(size=(n, 2))
    quiet = lambda: 0.05 * rng.normal(size=(n, 2))
    writes = np.stack([s, s + 0.01 * rng.normal(size=(n, 2)), quiet(), quiet()], 1)
    Yn = Y + writes[:, 0] + 0.5 * rng.normal(size=(n, 2))
    plain = te.head_te(Y, Yn, writes, k=2)
    uniq = te.head_te(Y, Yn, writes, k=2, unique=True)
    assert plain[0] > 0.5 and plain[1] > 0.5 and plain[3] < 0.01  # both copies look important alone
    assert uniq[0] < 0.2 * plain[0] and uniq[1] < 0.2 * plain[1]  # neither adds anything beyond the other
    with pytest.raises(ValueError, match="same number of trials"):
        te.head_te(Y[:10], Yn, writes)


def test_prune_curve_and_auc():
    calls = []
    curve = te.prune_curve(lambda keep: calls.append(keep.copy()) or keep.sum(), [2, 0, 1, 3], 4, [0, 1, 3])
    assert curve.tolist() == [4, 3, 1] and calls[1].tolist() == [1, 1, 0, 1]
    assert te.curve_auc([0, 0.5, 1], [1, 1, 1]) == pytest.approx(1.0)
    assert te.curve_auc([0, 1], [1, 0]) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="permutation"):
        te.prune_curve(lambda k: 0.0, [0, 0, 1, 2], 4, [1])
    with pytest.raises(ValueError, match="increasing"):
        te.curve_auc([0, 0], [1, 1])
    with pytest.raises(TypeError, match="callable"):
        te.prune_curve(None, [0], 1, [0])


def test_keep_patches_hides_tokens():
    m = small_vlm().eval()
    x, q = torch.rand(3, 16, 4), torch.tensor([0, 1, 2])
    keep = torch.ones(16, dtype=torch.bool)
    keep[:5] = False
    x2 = x.clone()
    x2[:, :5] = torch.rand(3, 5, 4)  # what a dropped patch shows must not matter
    with torch.no_grad():
        torch.testing.assert_close(m(x, q, keep_patches=keep), m(x2, q, keep_patches=keep))
        assert torch.equal(m(x, q, keep_patches=torch.ones(16, dtype=torch.bool)), m(x, q))
        assert not torch.allclose(m(x, q), m(x2, q))
    with pytest.raises(ValueError, match="keep_patches"):
        m(x, q, keep_patches=torch.ones(15, dtype=torch.bool))


def test_digits_vqa_splits():
    d = te.digits_vqa(0)
    n = sum(len(d[k][0]) for k in d)
    assert n == 3 * 1797 and d["train"][0].shape[1:] == (16, 4)
    p, q, a = d["test"]
    assert set(q.tolist()) == {0, 1, 2} and a[q == 1].min() >= 10 and a[q == 2].min() >= 12
    assert not torch.equal(te.digits_vqa(1)["test"][2], a)


def test_checkpoint_config():
    cfg = te.checkpoint_config("vlms")
    assert cfg["seeds"] == [0, 1, 2] and cfg["steps"] == te.VLM_CONFIG["steps"]
    with pytest.raises(ValueError, match="unknown checkpoint"):
        te.checkpoint_config("other")


def test_mean_ablation_fill_and_contexts():
    """A pruned head filled with its own context is no change; the fill replaces exactly the pruned head."""
    m = small_vlm().eval()
    x, q = torch.rand(4, 16, 4), torch.tensor([0, 1, 2, 0])
    ctx = []
    with torch.no_grad(), te.head_contexts(m, ctx):
        ref = m(x, q)
    assert len(ctx) == 2 and ctx[0].shape == (4, 18, 4, 8)
    mask = np.array([[1, 0, 1, 1], [1, 1, 1, 0]])
    # a fill equal to the input's own context (one input) leaves the logits unchanged
    with torch.no_grad(), te.head_mask(m, mask, fill=torch.stack([c[0] for c in ctx])):
        same = m(x[:1], q[:1])
    torch.testing.assert_close(same, ref[:1], atol=1e-5, rtol=1e-5)
    with torch.no_grad():
        with te.head_mask(m, mask, fill=torch.stack([c.mean(0) for c in ctx])):
            mean_abl = m(x, q)
        with te.head_mask(m, mask):
            zero_abl = m(x, q)
    assert not torch.allclose(mean_abl, zero_abl) and not torch.allclose(mean_abl, ref)
    with pytest.raises(ValueError, match="fill must have shape"):
        with te.head_mask(m, mask, fill=np.zeros((2, 18, 3, 8))):
            pass
    with pytest.raises(TypeError, match="store"):
        with te.head_contexts(m, None):
            pass


def test_minilm_head_fill(minilm):
    model, tok = minilm
    ids, att = tok(["A man is eating food."])
    rec = {"pooled": True}
    with torch.no_grad():
        e = model(ids, att, record=rec)
        fill = torch.stack([c[0] for c in rec["contexts"]])  # this sentence's own token-averaged contexts
        mask = np.ones((6, 12))
        mask[2, 5] = 0
        zero = model(ids, att, head_mask=mask)
        mean = model(ids, att, head_mask=mask, head_fill=fill)
    assert fill.shape == (6, 12, 32)
    assert not torch.allclose(zero, e)
    # the head's context averaged over tokens is not the per-token context, but it is much closer than zero
    assert float((mean - e).norm()) < float((zero - e).norm())
    with pytest.raises(ValueError, match="head_fill must be"):
        model(ids, att, head_mask=mask, head_fill=torch.zeros(6, 12, 8))
    with pytest.raises(ValueError, match="needs a head_mask"):
        model(ids, att, head_fill=fill)


def test_pruning_room_in_units_of_the_random_spread():
    assert te.pruning_room(0.9, [0.7, 0.8]) == pytest.approx((0.9 - 0.75) / np.std([0.7, 0.8], ddof=1))
    assert te.pruning_room(0.75, [0.7, 0.8]) == pytest.approx(0.0)
    assert te.pruning_room(0.6, [0.7, 0.8, 0.75]) < 0  # the oracle below chance: no room at all
    assert te.pruning_room(0.8, [0.7, 0.7]) == np.inf and te.pruning_room(0.7, [0.7, 0.7]) == 0.0
    with pytest.raises(ValueError):
        te.pruning_room(0.8, [0.7])
    with pytest.raises((TypeError, ValueError)):
        te.pruning_room("0.8", [0.7, 0.8])
