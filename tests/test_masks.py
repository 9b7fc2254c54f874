"""Tests for transformer_lit.masks: causal and padding masks, their combination, and what they guarantee."""
import math
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, strategies as st
from torch import nn
from torch.nn.attention.bias import causal_lower_right, causal_upper_left

from transformer_lit.attention import scaled_dot_product_attention
from transformer_lit.masks import (causal_mask, combine_masks, from_torch_masks, mask_to_str, padding_mask,
                                   to_additive)
from transformer_lit.multihead import MultiHeadAttention

B = torch.tensor  # shorthand for the hand-written matrices below


def bools(rows): return B(rows).bool()


# ---------------------------------------------------------------- causal_mask against hand-written matrices
@pytest.mark.parametrize("q_len,k_len,align,expected", [
    (1, None, "top-left", [[1]]),
    (3, None, "top-left", [[1, 0, 0], [1, 1, 0], [1, 1, 1]]),
    (3, None, "bottom-right", [[1, 0, 0], [1, 1, 0], [1, 1, 1]]),
    (2, 4, "top-left", [[1, 0, 0, 0], [1, 1, 0, 0]]),
    (2, 4, "bottom-right", [[1, 1, 1, 0], [1, 1, 1, 1]]),
    (4, 2, "top-left", [[1, 0], [1, 1], [1, 1], [1, 1]]),
    (4, 2, "bottom-right", [[0, 0], [0, 0], [1, 0], [1, 1]]),
    (1, 5, "bottom-right", [[1, 1, 1, 1, 1]]),
    (1, 5, "top-left", [[1, 0, 0, 0, 0]]),
])
def test_causal_mask_hand_written(q_len, k_len, align, expected):
    m = causal_mask(q_len, k_len, align)
    assert m.dtype == torch.bool
    assert torch.equal(m, bools(expected))


def test_causal_mask_empty_and_device():
    assert causal_mask(0).shape == (0, 0)
    assert causal_mask(2, 0).shape == (2, 0)
    assert causal_mask(3, device="cpu").device.type == "cpu"


@given(st.integers(0, 40), st.integers(0, 40))
def test_causal_mask_equals_tril(q_len, k_len):
    ones = torch.ones(q_len, k_len, dtype=torch.bool)
    assert torch.equal(causal_mask(q_len, k_len), ones.tril())
    assert torch.equal(causal_mask(q_len, k_len, "bottom-right"), ones.tril(k_len - q_len))


@given(st.integers(1, 24), st.integers(1, 24))
def test_causal_mask_equals_torch_causal_bias(q_len, k_len):
    assert torch.equal(causal_mask(q_len, k_len), causal_upper_left(q_len, k_len)._materialize())
    if q_len <= k_len:  # torch warns (NaN rows) for lower-right with Lq > Lk
        assert torch.equal(causal_mask(q_len, k_len, "bottom-right"), causal_lower_right(q_len, k_len)._materialize())


@given(st.integers(1, 12), st.integers(0, 12))
def test_bottom_right_is_the_tail_of_the_square_mask(q_len, extra):
    k_len = q_len + extra
    assert torch.equal(causal_mask(q_len, k_len, "bottom-right"), causal_mask(k_len)[extra:])


@pytest.mark.parametrize("q_len,k_len", [(1, 1), (3, 5), (7, 7), (5, 3), (1, 9)])
def test_top_left_is_torch_is_causal(q_len, k_len):
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 3, n, 8, dtype=torch.float64) for n in (q_len, k_len, k_len))
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    ours = scaled_dot_product_attention(q, k, v, mask=causal_mask(q_len, k_len))
    rows = causal_mask(q_len, k_len).any(-1)  # torch gives NaN on rows with no key (Lq > Lk never has one here)
    torch.testing.assert_close(ours[..., rows, :], ref[..., rows, :], atol=1e-10, rtol=0)


def test_generate_square_subsequent_mask_is_the_additive_form():
    for n in (1, 2, 7):
        assert torch.equal(to_additive(causal_mask(n)), nn.Transformer.generate_square_subsequent_mask(n))


@pytest.mark.parametrize("call,exc,msg", [
    (lambda: causal_mask(-1), ValueError, "q_len=-1 must be an int >= 0"),
    (lambda: causal_mask(3, -2), ValueError, "k_len=-2 must be an int >= 0"),
    (lambda: causal_mask(2.0), TypeError, "q_len=2.0 must be an int >= 0"),
    (lambda: causal_mask(True), TypeError, "q_len=True must be an int >= 0"),
    (lambda: causal_mask(3, "4"), TypeError, "k_len='4' must be an int >= 0"),
    (lambda: causal_mask(3, align="left"), ValueError, "align='left' must be one of ('top-left', 'bottom-right')"),
    (lambda: causal_mask(3, align="bottom-left"), ValueError, "align='bottom-left' must be one of"),
])
def test_causal_mask_bad_input(call, exc, msg):
    with pytest.raises(exc, match=msg.replace("(", r"\(").replace(")", r"\)")):
        call()


# ---------------------------------------------------------------- padding_mask
def test_padding_mask_hand_written():
    assert torch.equal(padding_mask([3, 1, 0], 4), bools([[1, 1, 1, 0], [1, 0, 0, 0], [0, 0, 0, 0]]))
    assert torch.equal(padding_mask(torch.tensor([2, 4])), bools([[1, 1, 0, 0], [1, 1, 1, 1]]))
    assert torch.equal(padding_mask(torch.tensor([2, 3], dtype=torch.int32), 3), bools([[1, 1, 0], [1, 1, 1]]))
    assert padding_mask([], 3).shape == (0, 3)
    assert padding_mask([]).shape == (0, 0)


@given(st.lists(st.integers(0, 20), min_size=1, max_size=6), st.integers(0, 5))
def test_padding_mask_counts(lengths, extra):
    m = padding_mask(lengths, max(lengths) + extra)
    assert m.shape == (len(lengths), max(lengths) + extra)
    assert m.sum(-1).tolist() == lengths
    assert torch.equal(m, m.cummin(-1).values)  # True then False: right padding


@pytest.mark.parametrize("call,exc,msg", [
    (lambda: padding_mask([3, -1]), ValueError, r"lengths=\[3, -1\] must be >= 0"),
    (lambda: padding_mask([3, 6], max_len=5), ValueError, r"lengths=\[3, 6\] must be <= max_len=5"),
    (lambda: padding_mask(torch.tensor([[1, 2]])), ValueError, r"lengths.shape=\(1, 2\) must be 1-D \(B,\)"),
    (lambda: padding_mask([2.5, 1.0]), TypeError, "lengths.dtype=torch.float32 must be an integer dtype"),
    (lambda: padding_mask(torch.tensor([True])), TypeError, "lengths.dtype=torch.bool must be an integer dtype"),
    (lambda: padding_mask([1, 2], max_len=-1), ValueError, "max_len=-1 must be an int >= 0"),
    (lambda: padding_mask([1, 2], max_len=3.0), TypeError, "max_len=3.0 must be an int >= 0"),
    (lambda: padding_mask(5), TypeError, "lengths must be a 1-D integer tensor or a list of ints, got int"),
])
def test_padding_mask_bad_input(call, exc, msg):
    with pytest.raises(exc, match=msg):
        call()


# ---------------------------------------------------------------- to_additive, combine_masks, mask_to_str
def test_to_additive():
    m = bools([[1, 0], [1, 1]])
    for dtype in (torch.float16, torch.float32, torch.float64):
        a = to_additive(m, dtype)
        assert a.dtype == dtype
        assert torch.equal(a, B([[0.0, float("-inf")], [0.0, 0.0]], dtype=dtype))
    f = torch.randn(2, 2)
    assert to_additive(f) is f
    with pytest.raises(TypeError, match="mask.dtype=torch.int64 must be torch.bool or floating point"):
        to_additive(B([[1, 0]]))


def test_combine_masks_bool_and_float():
    c = causal_mask(3)
    pad = padding_mask([3, 2])[:, None, None, :]  # (B, 1, 1, Lk)
    both = combine_masks(c, pad)
    assert both.shape == (2, 1, 3, 3) and both.dtype == torch.bool
    assert torch.equal(both[1, 0], bools([[1, 0, 0], [1, 1, 0], [1, 1, 0]]))
    assert torch.equal(both[0, 0], c)
    assert combine_masks(None, c, None) is c
    assert combine_masks() is None and combine_masks(None) is None
    bias = torch.tensor([[0.0, -1.0, -2.0]] * 3, dtype=torch.float64)
    mixed = combine_masks(c, bias)
    assert mixed.dtype == torch.float64
    inf = float("-inf")
    assert torch.equal(mixed, B([[0.0, inf, inf], [0.0, -1.0, inf], [0.0, -1.0, -2.0]], dtype=torch.float64))
    assert torch.equal(combine_masks(bias, bias), 2 * bias)        # x + x = 2x exactly in floating point


def test_combine_masks_bad_input():
    with pytest.raises(ValueError, match=r"masks of shapes \[\(3, 3\), \(4, 4\)\] must broadcast together"):
        combine_masks(causal_mask(3), causal_mask(4))
    with pytest.raises(TypeError, match="mask.dtype=torch.int64 must be torch.bool or floating point"):
        combine_masks(causal_mask(2), B([[1, 0], [1, 1]]))
    with pytest.raises(TypeError, match="mask must be a torch.Tensor or None, got list"):
        combine_masks(causal_mask(2), [[True, False], [True, True]])
    with pytest.raises(TypeError, match="mask must be a torch.Tensor, got list"):
        to_additive([[True]])
    with pytest.raises(TypeError, match="attn_mask must be a torch.Tensor or None, got list"):
        from_torch_masks([[True]])


def test_mask_to_str():
    assert mask_to_str(causal_mask(2, 3, "bottom-right")) == "■■·\n■■■"
    with pytest.raises(ValueError, match=r"^mask.shape=\(1, 2, 2\) must be 2-D \(Lq, Lk\)$"):
        mask_to_str(causal_mask(2)[None])
    with pytest.raises(TypeError, match=r"^mask.dtype=torch.float32 must be torch.bool \(True = may attend\)$"):
        mask_to_str(to_additive(causal_mask(2)))
    with pytest.raises(TypeError, match="^mask must be a torch.Tensor, got str$"):
        mask_to_str("x")


# ---------------------------------------------------------------- from_torch_masks
def test_from_torch_masks_hand_written():
    blocked = bools([[0, 1, 1], [0, 0, 1], [0, 0, 0]])           # torch: True = blocked
    pad = bools([[0, 0, 0], [0, 0, 1]])                           # torch: True = pad
    m = from_torch_masks(blocked, pad)
    assert m.shape == (2, 1, 3, 3) and m.dtype == torch.bool
    assert torch.equal(m[0, 0], causal_mask(3))
    assert torch.equal(m[1, 0], bools([[1, 0, 0], [1, 1, 0], [1, 1, 0]]))
    assert from_torch_masks() is None
    assert torch.equal(from_torch_masks(key_padding_mask=pad), ~pad[:, None, None, :])
    f = torch.randn(3, 3)
    assert from_torch_masks(f) is f                               # float masks keep their meaning
    fk = torch.tensor([[0.0, -1.0, float("-inf")]])
    assert torch.equal(from_torch_masks(key_padding_mask=fk), fk[:, None, None, :])
    three = torch.stack([blocked, ~blocked, blocked, blocked])    # (B*H, Lq, Lk), B=2, H=2
    m3 = from_torch_masks(three, n_heads=2)
    assert m3.shape == (2, 2, 3, 3) and torch.equal(m3[0, 1], blocked) and torch.equal(m3[1, 0], ~blocked)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_from_torch_masks_matches_nn_multihead_attention(dtype):
    torch.manual_seed(4)
    theirs = nn.MultiheadAttention(8, 2, batch_first=True, dtype=dtype).eval()
    ours = MultiHeadAttention.from_torch(theirs)
    x = torch.randn(2, 5, 8, dtype=dtype)
    attn_mask = torch.ones(5, 5, dtype=torch.bool).triu(1)
    kpm = ~padding_mask([5, 3])
    ref, _ = theirs(x, x, x, attn_mask=attn_mask, key_padding_mask=kpm)
    tol = dict(atol=1e-10, rtol=0) if dtype == torch.float64 else dict(atol=1e-5, rtol=1.3e-6)
    torch.testing.assert_close(ours(x, mask=from_torch_masks(attn_mask, kpm)), ref, **tol)
    per_head = torch.rand(4, 5, 5) > 0.3
    per_head[..., 0] = False                                      # key 0 always allowed: no empty rows
    ref, _ = theirs(x, x, x, attn_mask=per_head)
    torch.testing.assert_close(ours(x, mask=from_torch_masks(per_head, n_heads=2)), ref, **tol)


@pytest.mark.parametrize("call,msg", [
    (lambda: from_torch_masks(torch.zeros(4, 3, 3, dtype=torch.bool)), r"attn_mask.shape=\(4, 3, 3\) is 3-D \(B\*H, Lq, Lk\): pass n_heads"),
    (lambda: from_torch_masks(torch.zeros(3, dtype=torch.bool)), r"attn_mask.shape=\(3,\) must be \(Lq, Lk\) or \(B\*H, Lq, Lk\)"),
    (lambda: from_torch_masks(torch.zeros(4, 3, 3, dtype=torch.bool), n_heads=3), r"n_heads=3 must be a positive int dividing attn_mask.shape\[0\]=4 \(B\*H\)"),
    (lambda: from_torch_masks(key_padding_mask=torch.zeros(3, dtype=torch.bool)), r"key_padding_mask.shape=\(3,\) must be \(B, Lk\)"),
])
def test_from_torch_masks_bad_input(call, msg):
    with pytest.raises(ValueError, match=msg):
        call()


# ---------------------------------------------------------------- what the masks guarantee
class TinyCausalStack(nn.Module):
    "Two attention + MLP layers with residuals; `mask` or `is_causal` is passed to every attention."
    def __init__(self, d=8, h=2, n=2):
        super().__init__()
        self.attn = nn.ModuleList(MultiHeadAttention(d, h) for _ in range(n))
        self.mlp = nn.ModuleList(nn.Sequential(nn.Linear(d, 16), nn.GELU(), nn.Linear(16, d)) for _ in range(n))

    def forward(self, x, **kw):
        for a, m in zip(self.attn, self.mlp):
            x = x + a(x, **kw)
            x = x + m(x)
        return x


@pytest.mark.parametrize("how", ["mask", "is_causal"])
def test_no_leakage_by_gradients(how):
    torch.manual_seed(0)
    T = 7
    stack = TinyCausalStack().double()
    x = torch.randn(2, T, 8, dtype=torch.float64)
    kw = dict(mask=causal_mask(T)) if how == "mask" else dict(is_causal=True)
    x.requires_grad_(True)
    out = stack(x, **kw)
    r = torch.randn_like(out)  # a random direction: r . d out_t / d x_s is 0 for all r iff the block is 0
    rows = []
    for t in range(T):
        (g,) = torch.autograd.grad((out[:, t] * r[:, t]).sum(), x, retain_graph=True)  # (B, T, d)
        rows.append(g.abs().amax(dim=(0, 2)))  # (T,)
    J = torch.stack(rows)  # (T, T): [t, s] = max |r . d out_t / d x_s|
    assert torch.all(J.triu(1) == 0)
    assert torch.all(J[causal_mask(T)] > 0)


def test_parallel_pass_equals_stepwise():
    torch.manual_seed(1)
    stack = TinyCausalStack().double()
    x = torch.randn(3, 9, 8, dtype=torch.float64)
    parallel = stack(x, is_causal=True)
    stepwise = torch.cat([stack(x[:, :t + 1], is_causal=True)[:, -1:] for t in range(9)], dim=1)
    torch.testing.assert_close(parallel, stepwise, atol=1e-12, rtol=0)
    # and the mask is what makes it so
    assert (stack(x)[:, 0] - stack(x[:, :1])[:, 0]).abs().max() > 1e-3


@given(st.lists(st.integers(1, 4), min_size=1, max_size=5))
def test_chunked_cache_needs_bottom_right(chunks):
    torch.manual_seed(2)
    T = sum(chunks)
    q, k, v = (torch.randn(1, 2, T, 4, dtype=torch.float64) for _ in range(3))
    full = scaled_dot_product_attention(q, k, v, is_causal=True)
    outs, start = [], 0
    for n in chunks:
        end = start + n
        outs.append(scaled_dot_product_attention(q[..., start:end, :], k[..., :end, :], v[..., :end, :],
                                                 mask=causal_mask(n, end, "bottom-right")))
        start = end
    torch.testing.assert_close(torch.cat(outs, -2), full, atol=1e-12, rtol=0)


def test_fully_masked_rows_give_zeros_and_finite_gradients():
    torch.manual_seed(3)
    lengths = torch.tensor([5, 2])
    left = padding_mask(lengths, 5).flip(-1)  # (B, T) left padding
    mask = combine_masks(causal_mask(5), left[:, None, None, :])  # (B, 1, T, T)
    assert not mask[1, 0, :3].any()  # the three pads of sequence 1 see nothing
    q, k, v = (torch.randn(2, 2, 5, 4, dtype=torch.float64, requires_grad=True) for _ in range(3))
    out = scaled_dot_product_attention(q, k, v, mask=mask)
    assert torch.equal(out[1, :, :3], torch.zeros(2, 3, 4, dtype=torch.float64))
    out[left[:, None, :, None].expand_as(out)].sum().backward()
    for t in (q, k, v):
        assert torch.isfinite(t.grad).all()


# ---------------------------------------------------------------- bad input at entry (exact messages)
@pytest.mark.parametrize("call, exc, msg", [
    (lambda: to_additive(torch.ones(2, 2, dtype=torch.bool), torch.int64), TypeError,
     "dtype=torch.int64 must be a floating torch.dtype, e.g. torch.float32"),
    (lambda: to_additive(torch.zeros(2, 2), "float16"), TypeError, "dtype='float16' must be a floating torch.dtype, e.g. torch.float32"),
    (lambda: from_torch_masks(torch.zeros(3, 3, dtype=torch.long)), TypeError,
     "attn_mask.dtype=torch.int64 must be torch.bool (True = blocked, torch's convention) or floating point"),
    (lambda: from_torch_masks(key_padding_mask=torch.zeros(1, 3, dtype=torch.uint8)), TypeError,
     "key_padding_mask.dtype=torch.uint8 must be torch.bool (True = blocked, torch's convention) or floating point"),
    (lambda: padding_mask(torch.tensor([1.0])), TypeError, "lengths.dtype=torch.float32 must be an integer dtype"),
])
def test_masks_bad_input(call, exc, msg):
    import re
    with pytest.raises(exc, match="^" + re.escape(msg) + "$"): call()

def test_to_additive_keeps_float_masks_and_builds_in_the_dtype():
    m = torch.tensor([[0.0, -math.inf]])
    assert to_additive(m) is m
    assert to_additive(causal_mask(2), torch.float64).dtype == torch.float64
