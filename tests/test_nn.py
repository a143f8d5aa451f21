import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.nn import (
    Attention,
    RotaryEmbedding,
    Transformer,
    TransformerConfig,
    apply_rotary,
    causal_mask,
    sinusoidal_table,
)


def model(pos="rope", **kw):
    torch.manual_seed(0)
    return Transformer(TransformerConfig(vocab_size=13, n_layer=2, n_head=2, d_model=16, max_len=32, pos=pos, **kw))


@pytest.mark.parametrize("pos", ["none", "learned", "sinusoidal", "rope"])
def test_causal_by_default(pos):
    m = model(pos)
    x = torch.randint(0, 13, (2, 10))
    y = x.clone()
    y[:, 6:] = (y[:, 6:] + 1) % 13
    with torch.no_grad():
        assert torch.allclose(m(x)[:, :6], m(y)[:, :6], atol=1e-6)
        assert not torch.allclose(m(x)[:, 6:], m(y)[:, 6:])


def test_arbitrary_mask_is_respected():
    """A block-diagonal mask makes two halves of a sequence independent of each other."""
    m = model()
    T = 8
    mask = causal_mask(T) & torch.block_diag(torch.ones(4, 4), torch.ones(4, 4)).bool()
    x = torch.randint(0, 13, (1, T))
    y = x.clone()
    y[0, :4] = (y[0, :4] + 3) % 13
    pos = torch.tensor([0, 1, 2, 3, 0, 1, 2, 3])
    with torch.no_grad():
        a, b = m(x, mask=mask, pos=pos), m(y, mask=mask, pos=pos)
        # the second half equals a fresh run of the second half alone
        alone = m(x[:, 4:])
    assert torch.allclose(a[:, 4:], b[:, 4:], atol=1e-6)
    assert torch.allclose(a[:, 4:], alone, atol=1e-5)


def test_record_matches_forward_and_shapes():
    m = model()
    x = torch.randint(0, 13, (3, 7))
    with torch.no_grad():
        plain = m(x)
        logits, rec = m(x, record=True)
    assert torch.allclose(plain, logits, atol=1e-5)
    assert len(rec["hidden"]) == 3 and rec["hidden"][0].shape == (3, 7, 16)
    assert rec["attn"][0].shape == (3, 2, 7, 7) and rec["heads"][1].shape == (3, 2, 7, 8)
    assert torch.allclose(rec["attn"][0].sum(-1), torch.ones(3, 2, 7), atol=1e-5)
    assert torch.all(rec["attn"][0].triu(1) == 0)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 50), st.integers(0, 50), st.integers(1, 4))
def test_rope_depends_only_on_relative_position(p, q, shift):
    """<R(p) q, R(q) k> = <R(p+s) q, R(q+s) k>: the score depends on p - q only."""
    torch.manual_seed(p * 100 + q)
    rot = RotaryEmbedding(8)
    a, b = torch.randn(1, 1, 1, 8), torch.randn(1, 1, 1, 8)

    def score(i, j):
        qa, _ = rot(a, a, torch.tensor([i]))
        _, kb = rot(b, b, torch.tensor([j]))
        return (qa * kb).sum()

    assert torch.allclose(score(p, q), score(p + shift, q + shift), atol=1e-4)


def test_rotation_preserves_norm_and_zero_angle_is_identity():
    x = torch.randn(2, 5, 8)
    ang = torch.rand(5, 4) * 10
    assert torch.allclose(apply_rotary(x, ang).norm(dim=-1), x.norm(dim=-1), atol=1e-5)
    assert torch.equal(apply_rotary(x, torch.zeros(5, 4)), x)


def test_sinusoidal_table_values():
    t = sinusoidal_table(torch.tensor([0, 1]), 4)
    assert torch.allclose(t[0], torch.tensor([0.0, 1.0, 0.0, 1.0]))
    assert torch.allclose(t[1, :2], torch.tensor([torch.sin(torch.tensor(1.0)), torch.cos(torch.tensor(1.0))]))


def test_bad_inputs():
    with pytest.raises(ValueError):
        TransformerConfig(vocab_size=10, d_model=10, n_head=3)
    with pytest.raises(ValueError):
        TransformerConfig(vocab_size=10, pos="alibi")
    with pytest.raises(ValueError):
        RotaryEmbedding(7)
    m = model()
    x = torch.randint(0, 13, (1, 4))
    with pytest.raises(ValueError):
        m(x.float().long()[0])
    with pytest.raises(TypeError):
        m(x, mask=torch.ones(4, 4))
    with pytest.raises(ValueError, match="at least one key"):
        m(x, mask=torch.zeros(4, 4, dtype=torch.bool))
    with pytest.raises(ValueError):
        m(x, pos=torch.arange(5))
    with pytest.raises(ValueError):
        model("learned")(x, pos=torch.tensor([0, 1, 2, 99]))
    with pytest.raises(ValueError):
        Attention(10, 3)


def test_generate_is_greedy_and_deterministic():
    m = model()
    x = torch.randint(0, 13, (2, 3))
    a, b = m.generate(x, 4), m.generate(x, 4)
    assert a.shape == (2, 7) and torch.equal(a, b) and torch.equal(a[:, :3], x)


def test_attention_accepts_a_float_bias_equal_to_the_boolean_mask():
    torch.manual_seed(0)
    att = Attention(16, 2)
    x = torch.randn(2, 5, 16)
    mask = causal_mask(5)
    bias = torch.zeros(5, 5).masked_fill(~mask, float("-inf"))
    with torch.no_grad():
        a = att(x, mask)
        b = att(x, bias)
        rec: dict = {}
        c = att(x, bias, record=rec)
    assert torch.allclose(a, b, atol=1e-6) and torch.allclose(a, c, atol=1e-5)
