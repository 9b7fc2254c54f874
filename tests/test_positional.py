"""Tests for transformer_lit.positional: sinusoidal, learned, RoPE and ALiBi, against independent formulas."""
import math

import pytest
import torch
from hypothesis import given, strategies as st

from transformer_lit.positional import (LearnedPositionalEmbedding, RotaryEmbedding, SinusoidalPositionalEmbedding,
                                        alibi_bias, alibi_bias_at, alibi_slopes, apply_rotary, check_rope_scaling, rope_inv_freq,
                                        rotate_half, rotate_interleaved,
                                        rotation_matrix, sinusoidal_at, sinusoidal_encoding, sinusoidal_frequencies)
from transformer_lit.multihead import MultiHeadAttention, merge_heads
from transformer_lit.decoding import KVCache                     # chapter 10: cached decoding through the hooks

f64 = torch.float64
even_dims = st.integers(1, 32).map(lambda n: 2 * n)


# ---------------------------------------------------------------- sinusoidal
def pe_loop(n, d, base=10000.0):
    "The formula of Vaswani et al. (2017), one entry at a time with the math module."
    return torch.tensor([[math.sin(p / base ** (2 * (c // 2) / d)) if c % 2 == 0 else math.cos(p / base ** (2 * (c // 2) / d))
                          for c in range(d)] for p in range(n)], dtype=f64)


@pytest.mark.parametrize("n,d,base", [(1, 2, 10000.0), (7, 8, 10000.0), (50, 64, 10000.0), (13, 6, 100.0)])
def test_sinusoidal_matches_formula(n, d, base):
    torch.testing.assert_close(sinusoidal_encoding(n, d, base, dtype=f64), pe_loop(n, d, base), atol=1e-12, rtol=0)


def test_sinusoidal_dtype_device_and_empty():
    pe = sinusoidal_encoding(5, 4, dtype=torch.bfloat16)
    assert pe.dtype == torch.bfloat16 and pe.shape == (5, 4) and pe.device.type == 'cpu'
    assert sinusoidal_encoding(0, 4).shape == (0, 4)
    torch.testing.assert_close(sinusoidal_encoding(300, 16), pe_loop(300, 16).float(), atol=1e-5, rtol=0)


def test_wavelengths_run_from_2pi_upwards():
    d = 512
    lam = 2 * math.pi / sinusoidal_frequencies(d)
    assert lam.shape == (d // 2,) and lam.dtype == f64
    assert lam[0].item() == pytest.approx(2 * math.pi, abs=1e-12)              # i = 0: the highest frequency
    assert lam[-1].item() == pytest.approx(2 * math.pi * 10000 ** ((d - 2) / d), rel=1e-12)
    assert (lam.diff() > 0).all() and lam[-1] < 10000 * 2 * math.pi
    torch.testing.assert_close(lam[1:] / lam[:-1], torch.full((d // 2 - 1,), 10000 ** (2 / d), dtype=f64))


@given(d=even_dims, pos=st.integers(0, 5000), k=st.integers(-3000, 3000))
def test_shift_is_a_rotation_independent_of_pos(d, pos, k):
    k = max(k, -pos)                                                            # keep pos + k >= 0
    table = sinusoidal_encoding(pos + max(k, 0) + 1, d, dtype=f64)
    torch.testing.assert_close(rotation_matrix(-k, d) @ table[pos], table[pos + k], atol=1e-9, rtol=0)


@given(d=even_dims, k=st.integers(0, 200), p1=st.integers(0, 2000), p2=st.integers(0, 2000))
def test_pe_dot_product_depends_only_on_offset(d, k, p1, p2):
    t = sinusoidal_encoding(max(p1, p2) + k + 1, d, dtype=f64)
    expected = torch.cos(k * sinusoidal_frequencies(d)).sum()
    torch.testing.assert_close(t[p1] @ t[p1 + k], expected, atol=1e-9, rtol=0)
    torch.testing.assert_close(t[p2] @ t[p2 + k], expected, atol=1e-9, rtol=0)


@given(d=even_dims, a=st.floats(-100, 100), b=st.floats(-100, 100))
def test_rotation_matrix_group_law(d, a, b):
    Ra, Rb = rotation_matrix(a, d), rotation_matrix(b, d)
    torch.testing.assert_close(Ra @ Rb, rotation_matrix(a + b, d), atol=1e-10, rtol=0)
    torch.testing.assert_close(Ra.T @ Ra, torch.eye(d, dtype=f64), atol=1e-12, rtol=0)


@pytest.mark.parametrize("call,exc,msg", [
    (lambda: sinusoidal_encoding(4, 7), ValueError, "d_model=7 must be a positive even int"),
    (lambda: sinusoidal_encoding(4, 0), ValueError, "d_model=0 must be a positive even int"),
    (lambda: sinusoidal_encoding(-1, 4), ValueError, "n_positions=-1 must be an int >= 0"),
    (lambda: sinusoidal_encoding(4.0, 4), TypeError, "n_positions=4.0 must be an int >= 0"),
    (lambda: sinusoidal_encoding(4, True), TypeError, "d_model=True must be a positive even int"),
    (lambda: sinusoidal_encoding(4, 4, base=1.0), ValueError, "base=1.0 must be a finite number > 1"),
    (lambda: sinusoidal_frequencies(5), ValueError, "d=5 must be a positive even int"),
    (lambda: SinusoidalPositionalEmbedding(9), ValueError, "d_model=9 must be a positive even int"),
    (lambda: SinusoidalPositionalEmbedding(8)(torch.zeros(2, 3, 6)), ValueError, "x.shape=(2, 3, 6) must be (B, T, 8)"),
    (lambda: SinusoidalPositionalEmbedding(8)(torch.zeros(3, 8)), ValueError, "x.shape=(3, 8) must be (B, T, 8)"),
    (lambda: SinusoidalPositionalEmbedding(8)(torch.zeros(1, 3, 8, dtype=torch.long)), TypeError,
     "x.dtype=torch.int64 must be a floating dtype"),
    (lambda: SinusoidalPositionalEmbedding(8)(torch.zeros(1, 3, 8), offset=-1), ValueError, "offset=-1 must be an int >= 0"),
])
def test_sinusoidal_bad_inputs(call, exc, msg):
    with pytest.raises(exc, match=msg.replace('(', r'\(').replace(')', r'\)')):
        call()


def test_sinusoidal_module_adds_table_with_offset():
    x = torch.randn(2, 6, 8, dtype=f64)
    m = SinusoidalPositionalEmbedding(8)
    torch.testing.assert_close(m(x), x + pe_loop(6, 8))
    torch.testing.assert_close(m(x[:, 2:], offset=2), (x + pe_loop(6, 8))[:, 2:])
    assert list(m.parameters()) == []


# ---------------------------------------------------------------- learned
def test_learned_table_rows_offset_and_gradients():
    torch.manual_seed(0)
    m = LearnedPositionalEmbedding(10, 4)
    assert m.weight.shape == (10, 4) and m.weight.std() < 0.1
    x = torch.randn(3, 4, 4)
    torch.testing.assert_close(m(x, offset=6), x + m.weight[6:10])
    m(x, offset=6).sum().backward()
    assert (m.weight.grad[:6] == 0).all() and (m.weight.grad[6:] == 3).all()


@pytest.mark.parametrize("call,exc,msg", [
    (lambda m: m(torch.zeros(1, 11, 4)), ValueError,
     "positions up to 10 need a table longer than max_len=10: a learned table has no rows past its length"),
    (lambda m: m(torch.zeros(1, 2, 4), offset=9), ValueError, "positions up to 10 need a table longer than max_len=10"),
    (lambda m: m(torch.zeros(1, 2, 5)), ValueError, r"x.shape=\(1, 2, 5\) must be \(B, T, 4\)"),
    (lambda m: LearnedPositionalEmbedding(0, 4), ValueError, "max_len=0 must be a positive int"),
])
def test_learned_bad_inputs(call, exc, msg):
    m = LearnedPositionalEmbedding(10, 4)
    with pytest.raises(exc, match=msg):
        call(m)


# ---------------------------------------------------------------- RoPE
def rope_complex(x, positions, base=10000.0, interleaved=False):
    "Independent reference: pairs as complex numbers times e^{i m theta} (RoFormer, eq. 12 / Meta's LLaMA code)."
    D = x.shape[-1]
    theta = base ** (-torch.arange(0, D, 2, dtype=f64) / D)                     # (D/2,)
    rot = torch.polar(torch.ones(len(positions), D // 2, dtype=f64), positions.to(f64)[:, None] * theta)  # (T, D/2)
    if interleaved:
        z = torch.view_as_complex(x.to(f64).reshape(*x.shape[:-1], D // 2, 2).contiguous()) * rot
        return torch.view_as_real(z).flatten(-2).to(x.dtype)
    z = torch.complex(x[..., :D // 2].to(f64), x[..., D // 2:].to(f64)) * rot
    return torch.cat([z.real, z.imag], -1).to(x.dtype)


@given(D=even_dims, T=st.integers(1, 20), offset=st.integers(0, 5000), interleaved=st.booleans(),
       base=st.sampled_from([10000.0, 500000.0, 10.0]))
def test_rope_matches_complex_reference(D, T, offset, interleaved, base):
    torch.manual_seed(D + T)
    x = torch.randn(2, 3, T, D, dtype=f64)
    out = RotaryEmbedding(D, base, interleaved)(x, offset=offset)
    torch.testing.assert_close(out, rope_complex(x, torch.arange(offset, offset + T), base, interleaved), atol=1e-10, rtol=0)


@given(D=even_dims, m=st.integers(0, 3000))
def test_rope_interleaved_is_the_rotation_matrix(D, m):
    x = torch.randn(D, dtype=f64)
    out = RotaryEmbedding(D, interleaved=True)(x[None], positions=torch.tensor([m]))    # x[None]: (T=1, D)
    torch.testing.assert_close(out[0], rotation_matrix(m, D) @ x, atol=1e-10, rtol=0)


@given(D=even_dims, T=st.integers(1, 12))
def test_rope_pairings_equal_up_to_permutation(D, T):
    x = torch.randn(1, 2, T, D, dtype=f64)
    perm = torch.stack([torch.arange(D // 2), torch.arange(D // 2) + D // 2], -1).flatten()
    half, inter = RotaryEmbedding(D), RotaryEmbedding(D, interleaved=True)
    torch.testing.assert_close(inter(x[..., perm]), half(x)[..., perm], atol=1e-12, rtol=0)


@given(D=even_dims, m=st.integers(0, 4000), n=st.integers(0, 4000), s=st.integers(0, 4000), interleaved=st.booleans())
def test_rope_scores_depend_only_on_distance(D, m, n, s, interleaved):
    torch.manual_seed(m)
    q, k = torch.randn(2, 1, 1, 1, D, dtype=f64)
    rope = RotaryEmbedding(D, interleaved=interleaved)
    def score(a, b): return (rope(q, offset=a) * rope(k, offset=b)).sum()
    torch.testing.assert_close(score(m, n), score(m + s, n + s), atol=1e-9, rtol=1e-9)


def test_rope_preserves_norm_and_position_zero_is_identity():
    x = torch.randn(2, 4, 9, 16, dtype=f64)
    for inter in (False, True):
        out = RotaryEmbedding(16, interleaved=inter)(x)
        torch.testing.assert_close(out.norm(dim=-1), x.norm(dim=-1))
        torch.testing.assert_close(out[:, :, 0], x[:, :, 0])


def test_rotate_helpers():
    x = torch.arange(6.)
    assert rotate_half(x).tolist() == [-3., -4., -5., 0., 1., 2.]
    assert rotate_interleaved(x).tolist() == [-1., 0., -3., 2., -5., 4.]
    for rot in (rotate_half, rotate_interleaved):                               # rot is a quarter turn: rot(rot(x)) = -x
        torch.testing.assert_close(rot(rot(x)), -x)
    torch.testing.assert_close(apply_rotary(x, torch.ones(6), torch.zeros(6)), x)


def test_rope_positions_per_batch_row_and_beyond_table():
    torch.manual_seed(0)
    rope = RotaryEmbedding(8)
    x = torch.randn(2, 3, 4, 8, dtype=f64)
    pos = torch.tensor([[0, 1, 2, 3], [5, 6, 7, 900]])                          # 900 is past any table built so far
    out = rope(x, positions=pos)
    for b in range(2): torch.testing.assert_close(out[b], rope_complex(x[b], pos[b]), atol=1e-10, rtol=0)
    torch.testing.assert_close(rope(x[0], positions=pos[1]), rope_complex(x[0], pos[1]), atol=1e-10, rtol=0)  # 3-D input
    far = rope(x, offset=100_000)                                              # past the cached tables: computed exactly
    torch.testing.assert_close(far, rope_complex(x, torch.arange(100_000, 100_004)), atol=1e-9, rtol=0)


def test_rope_cache_keyed_on_length_dtype_device():
    rope = RotaryEmbedding(8)
    x = torch.randn(1, 1, 10, 8)
    rope(x); rope(x[:, :, :3], offset=50)                                        # both fit in the first (64-row) table
    assert list(rope._cache) == [(64, torch.float32, torch.device('cpu'))]
    cos, sin = rope.tables(10, torch.float32, 'cpu')
    assert cos.shape == (64, 8) and cos is rope._cache[(64, torch.float32, torch.device('cpu'))][0]
    rope(x.double()); rope(x, offset=200)
    assert sorted((n, str(dt)) for n, dt, _ in rope._cache) == [(64, 'torch.float64'), (256, 'torch.float32')]
    assert rope.state_dict() == {}                                               # the cache is a memo, not state
    rope(x.half()); rope(x.bfloat16())
    assert {dt for _, dt, _ in rope._cache} == {torch.float16, torch.bfloat16, torch.float32, torch.float64}


@pytest.mark.parametrize("dtype,atol", [(torch.float32, 1e-5), (torch.float16, 4e-3), (torch.bfloat16, 3e-2)])
def test_rope_low_precision_close_to_float64(dtype, atol):
    torch.manual_seed(0)
    x = torch.randn(2, 2, 113, 40, dtype=f64)
    ref = RotaryEmbedding(40)(x, offset=1000)
    out = RotaryEmbedding(40)(x.to(dtype), offset=1000)
    assert out.dtype == dtype
    torch.testing.assert_close(out.to(f64), ref, atol=atol, rtol=0)


def test_rope_gradcheck_float64():
    torch.manual_seed(0)
    for inter in (False, True):
        rope = RotaryEmbedding(8, interleaved=inter)
        x = torch.randn(2, 2, 5, 8, dtype=f64, requires_grad=True)
        assert torch.autograd.gradcheck(lambda t: rope(t, offset=7), (x,))


def test_rope_offset_decoding_equals_full():
    torch.manual_seed(0)
    rope = RotaryEmbedding(16)
    x = torch.randn(1, 2, 37, 16, dtype=f64)
    steps = torch.cat([rope(x[:, :, t:t + 1], offset=t) for t in range(37)], dim=2)
    torch.testing.assert_close(steps, rope(x))
    torch.testing.assert_close(rope(x[:, :, 30:], offset=30), rope(x)[:, :, 30:])


@pytest.mark.parametrize("call,exc,msg", [
    (lambda: RotaryEmbedding(7), ValueError, "head_dim=7 must be a positive even int"),
    (lambda: RotaryEmbedding(0), ValueError, "head_dim=0 must be a positive even int"),
    (lambda: RotaryEmbedding(8.0), TypeError, "head_dim=8.0 must be a positive even int"),
    (lambda: RotaryEmbedding(8, base=0.5), ValueError, "base=0.5 must be a finite number > 1"),
    (lambda: RotaryEmbedding(8, base=float("inf")), ValueError, "base=inf must be a finite number > 1"),
    (lambda: RotaryEmbedding(8)(torch.zeros(1, 1, 3, 6)), ValueError, r"x.shape=\(1, 1, 3, 6\) must end in \(T, head_dim=8\)"),
    (lambda: RotaryEmbedding(8)(torch.zeros(8)), ValueError, r"x.shape=\(8,\) must end in \(T, head_dim=8\)"),
    (lambda: RotaryEmbedding(8)(torch.zeros(1, 3, 8, dtype=torch.int64)), TypeError, "x.dtype=torch.int64 must be a floating dtype"),
    (lambda: RotaryEmbedding(8)(torch.zeros(1, 3, 8), offset=-2), ValueError, "offset=-2 must be an int >= 0"),
    (lambda: RotaryEmbedding(8)(torch.zeros(1, 3, 8), positions=torch.arange(4)), ValueError,
     r"positions.shape=\(4,\) must be \(T,\) or \(B, T\) with T=3"),
    (lambda: RotaryEmbedding(8)(torch.zeros(1, 3, 8), positions=torch.zeros(3)), TypeError, "positions.dtype=torch.float32 must be an integer dtype"),
    (lambda: RotaryEmbedding(8)(torch.zeros(1, 3, 8), positions=torch.tensor([0, -1, 2])), ValueError, "positions must be >= 0"),
])
def test_rope_bad_inputs(call, exc, msg):
    with pytest.raises(exc, match=msg):
        call()


def test_rope_inside_multihead_attention():
    torch.manual_seed(0)
    mha = MultiHeadAttention(32, 4, rotary=RotaryEmbedding(8)).eval().double()
    x = torch.randn(2, 11, 32, dtype=f64)
    full = mha(x, is_causal=True)
    torch.testing.assert_close(mha(x, is_causal=True, positions=torch.arange(300, 311)), full)   # only distances matter
    cache = KVCache()
    steps = torch.cat([mha(x[:, :4], cache=cache, is_causal=True)] +
                      [mha(x[:, t:t + 1], cache=cache) for t in range(4, 11)], dim=1)
    torch.testing.assert_close(steps, full)
    q, k, v = mha.project_qkv(x)                                                # (B, H, T, D) before rotation
    pos = torch.arange(11)
    qr, kr = rope_complex(q, pos), rope_complex(k, pos)
    w = (qr @ kr.transpose(-2, -1) / math.sqrt(8)).masked_fill(~torch.ones(11, 11, dtype=torch.bool).tril(), -math.inf)
    torch.testing.assert_close(mha.out_proj(merge_heads(w.softmax(-1) @ v)), full)


# ---------------------------------------------------------------- ALiBi
def slopes_reference(n):
    "Port of get_slopes from Press et al.'s reference code (ofirpress/attention_with_linear_biases)."
    def power_of_2(n):
        start = 2 ** (-2 ** -(math.log2(n) - 3))
        return [start * start ** i for i in range(n)]
    if math.log2(n).is_integer(): return power_of_2(n)
    closest = 2 ** math.floor(math.log2(n))
    return power_of_2(closest) + slopes_reference(2 * closest)[0::2][:n - closest]


def test_alibi_slopes_paper_values():
    assert alibi_slopes(8, f64).tolist() == [1 / 2, 1 / 4, 1 / 8, 1 / 16, 1 / 32, 1 / 64, 1 / 128, 1 / 256]
    expected12 = [2.0 ** -e for e in (1, 2, 3, 4, 5, 6, 7, 8, 0.5, 1.5, 2.5, 3.5)]
    torch.testing.assert_close(alibi_slopes(12, f64), torch.tensor(expected12, dtype=f64), atol=1e-15, rtol=0)
    torch.testing.assert_close(alibi_slopes(16, f64), 2.0 ** -(torch.arange(1, 17, dtype=f64) / 2))
    assert alibi_slopes(4).dtype == torch.float32 and alibi_slopes(4, torch.float16).dtype == torch.float16


@pytest.mark.parametrize("n", list(range(1, 65)) + [96, 100, 128])
def test_alibi_slopes_match_reference_code(n):
    torch.testing.assert_close(alibi_slopes(n, f64), torch.tensor(slopes_reference(n), dtype=f64), atol=1e-14, rtol=0)


@given(H=st.integers(1, 12), Lq=st.integers(1, 9), extra=st.integers(0, 9), causal=st.booleans())
def test_alibi_bias_entries(H, Lq, extra, causal):
    Lk = Lq + extra
    b = alibi_bias(H, Lq, Lk, causal=causal, dtype=f64)
    assert b.shape == (H, Lq, Lk) and b.dtype == f64
    m = slopes_reference(H)
    for h in range(H):
        for i in range(Lq):
            qi = i + Lk - Lq                                                    # queries aligned to the end of the keys
            for j in range(Lk):
                if causal and j > qi: assert b[h, i, j] == -math.inf
                else: assert b[h, i, j].item() == pytest.approx(-m[h] * abs(qi - j), abs=1e-14)


def test_alibi_decoding_rows_and_symmetry():
    full = alibi_bias(6, 10, causal=True)
    for t in range(10): torch.testing.assert_close(alibi_bias(6, 1, t + 1, causal=True)[:, 0], full[:, t, :t + 1])
    torch.testing.assert_close(alibi_bias(6, 10), alibi_bias(6, 10).transpose(1, 2))
    allowed = ~torch.isinf(full)
    assert torch.equal(allowed, torch.ones(10, 10, dtype=torch.bool).tril().expand(6, 10, 10))


@pytest.mark.parametrize("call,exc,msg", [
    (lambda: alibi_slopes(0), ValueError, "n_heads=0 must be a positive int"),
    (lambda: alibi_slopes(2.0), TypeError, "n_heads=2.0 must be a positive int"),
    (lambda: alibi_bias(4, 0), ValueError, "q_len=0 must be a positive int"),
    (lambda: alibi_bias(4, 3, -1), ValueError, "k_len=-1 must be a positive int"),
    (lambda: alibi_bias(-4, 3), ValueError, "n_heads=-4 must be a positive int"),
])
def test_alibi_bad_inputs(call, exc, msg):
    with pytest.raises(exc, match=msg):
        call()


def test_alibi_inside_multihead_attention_with_cache():
    torch.manual_seed(0)
    mha = MultiHeadAttention(24, 3).eval().double()
    x = torch.randn(2, 9, 24, dtype=f64)
    full = mha(x, attn_bias=alibi_bias(3, 9, dtype=f64)[None], is_causal=True)
    q, k, v = mha.project_qkv(x)                                                # (B, H, T, D)
    s = q @ k.transpose(-2, -1) / math.sqrt(8) + alibi_bias(3, 9, causal=True, dtype=f64)
    torch.testing.assert_close(mha.out_proj(merge_heads(s.softmax(-1) @ v)), full)
    cache = KVCache()
    steps = [mha(x[:, t:t + 1], cache=cache, attn_bias=alibi_bias(3, 1, t + 1, dtype=f64)[None]) for t in range(9)]
    torch.testing.assert_close(torch.cat(steps, 1), full)


# ---------------------------------------------------------------- the cos/sin cache is bounded
def test_rope_cache_bounded_far_positions_computed_exactly():
    rope = RotaryEmbedding(8, max_cached=128)
    x = torch.randn(2, 3, 4, 8, dtype=f64)
    rope(x)                                                                      # one 64-row table
    far = rope(x, offset=2 ** 20)                                                # would have been a 2**21-row table
    torch.testing.assert_close(far, rope_complex(x, torch.arange(2 ** 20, 2 ** 20 + 4)), atol=1e-8, rtol=0)
    pos = torch.tensor([[0, 1, 2, 3], [7, 500, 2 ** 20, 3 * 2 ** 30]])            # a mix of cached and far positions
    out = rope(x, positions=pos)
    for b in range(2): torch.testing.assert_close(out[b], rope_complex(x[b], pos[b]), atol=1e-6, rtol=0)
    rope(x, offset=100)                                                          # 104 rows: a 128-row table, the cap
    assert sorted(n for n, _, _ in rope._cache) == [128]
    assert all(n <= rope.max_cached for n, _, _ in rope._cache)
    cos, _ = rope.tables(1000)                                                   # past the cap: exactly 1000 rows, not kept
    assert cos.shape == (1000, 8) and sorted(n for n, _, _ in rope._cache) == [128]


# ---------------------------------------------------------------- rope scaling against Hugging Face
transformers = pytest.importorskip("transformers")
from transformers import LlamaConfig                                            # noqa: E402
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS               # noqa: E402
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding       # noqa: E402

L0 = 64                                                                          # the "original" training length


def hf_config(D, base, scaling, max_pos):
    "A tiny LlamaConfig whose rope_parameters carry the scaling dict (transformers 5.x)."
    rp = {'rope_theta': base, **(scaling or {'rope_type': 'default'})}
    return LlamaConfig(hidden_size=2 * D, num_attention_heads=2, head_dim=D, max_position_embeddings=max_pos,
                       rope_parameters=rp, vocab_size=10, num_hidden_layers=1, intermediate_size=8)


def scalings(factor):
    "One dict of each supported type, as it appears in a Hugging Face config (yarn with and without mscale)."
    return [{'rope_type': 'linear', 'factor': factor},
            {'type': 'dynamic', 'factor': factor, 'original_max_position_embeddings': L0},
            {'rope_type': 'yarn', 'factor': factor, 'original_max_position_embeddings': L0},
            {'rope_type': 'yarn', 'factor': factor, 'original_max_position_embeddings': L0, 'beta_fast': 16, 'beta_slow': 2,
             'mscale': 1.0, 'mscale_all_dim': 0.5, 'truncate': False},
            {'rope_type': 'yarn', 'factor': factor, 'original_max_position_embeddings': L0, 'attention_factor': 0.9},
            {'rope_type': 'llama3', 'factor': factor, 'original_max_position_embeddings': L0,
             'low_freq_factor': 1.0, 'high_freq_factor': 4.0},
            {'rope_type': 'llama3', 'factor': factor, 'original_max_position_embeddings': L0,
             'low_freq_factor': 2.0, 'high_freq_factor': 8.0}]


def hf_max_pos(sc):
    "Hugging Face's dynamic type reads the original length from max_position_embeddings; the others from the dict."
    return L0 if (sc.get('rope_type') or sc.get('type')) == 'dynamic' else 4 * L0


CASES = [(D, base, f, sc) for D in (8, 16, 64, 128) for base in (10000.0, 500000.0) for f in (1.0, 2.0, 4.0, 8.0, 32.0)
         for sc in scalings(f)]


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("D,base,factor,sc", CASES, ids=[f"D{c[0]}-b{int(c[1])}-f{c[2]}-{i}" for i, c in enumerate(CASES)])
@pytest.mark.parametrize("seq_len", [None, 3 * L0])
def test_rope_inv_freq_matches_hugging_face(D, base, factor, sc, seq_len):
    t = sc.get('rope_type') or sc.get('type')
    inv_hf, af_hf = ROPE_INIT_FUNCTIONS[t](hf_config(D, base, dict(sc), hf_max_pos(sc)), 'cpu', seq_len=seq_len)
    inv, af = rope_inv_freq(D, base, sc, seq_len=seq_len)
    assert inv.dtype == f64 and inv.shape == (D // 2,)
    torch.testing.assert_close(inv, inv_hf.double(), rtol=2e-6, atol=0)       # Hugging Face computes in float32
    assert af == pytest.approx(af_hf, rel=1e-12)


def test_rope_inv_freq_without_scaling_is_the_plain_frequencies():
    inv, af = rope_inv_freq(16, 10000.0)
    torch.testing.assert_close(inv, sinusoidal_frequencies(16)); assert af == 1.0
    inv2, _ = rope_inv_freq(16, 10000.0, {'rope_type': 'default', 'rope_theta': 10000.0})
    torch.testing.assert_close(inv2, inv)
    inv3, _ = rope_inv_freq(16, 10000.0, {'type': 'dynamic', 'factor': 4.0, 'original_max_position_embeddings': 64}, seq_len=64)
    torch.testing.assert_close(inv3, inv)                                       # dynamic changes nothing up to the original length


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("D", [16, 64])
@pytest.mark.parametrize("sc", scalings(4.0), ids=lambda s: s.get('rope_type') or s.get('type'))
@pytest.mark.parametrize("interleaved", [False])
def test_scaled_rotary_equals_hugging_face_llama_rotary(D, sc, interleaved):
    "Rotating q with our cos/sin equals rotating it with LlamaRotaryEmbedding's, at positions past the original length."
    torch.manual_seed(0)
    hf = LlamaRotaryEmbedding(hf_config(D, 10000.0, dict(sc), hf_max_pos(sc)))
    ours = RotaryEmbedding(D, scaling=sc)
    T = 6 * L0                                                                   # positions 0 .. 383, well past L0 = 64
    pos = torch.arange(T)[None]                                                  # (1, T)
    cos, sin = hf(torch.zeros(1, T, D), pos)                                     # (1, T, D) each, attention factor included
    q = torch.randn(1, 2, T, D)                                                  # (B, H, T, D)
    ref = q * cos[:, None] + rotate_half(q) * sin[:, None]
    torch.testing.assert_close(ours(q, positions=pos[0]), ref, atol=5e-4, rtol=0)   # HF: float32 angles up to 383 rad, |q| up to ~4
    torch.testing.assert_close(ours(q), ref, atol=5e-4, rtol=0)                # offset path, same result
    steps = torch.cat([ours(q[:, :, t:t + 1], offset=t) for t in range(L0 - 2, L0 + 2)], 2)  # decoding across L0
    if (sc.get('rope_type') or sc.get('type')) != 'dynamic':                    # dynamic depends on the length in use
        torch.testing.assert_close(steps, ref[:, :, L0 - 2:L0 + 2], atol=5e-4, rtol=0)


def test_rope_scaling_reaches_attention_factor_and_modules():
    sc = {'rope_type': 'yarn', 'factor': 8.0, 'original_max_position_embeddings': 32}
    rope = RotaryEmbedding(16, scaling=sc)
    assert rope.attention_factor == pytest.approx(0.1 * math.log(8) + 1)
    x = torch.randn(1, 1, 5, 16, dtype=f64)
    assert torch.linalg.vector_norm(rope(x), dim=-1).div(torch.linalg.vector_norm(x, dim=-1)).sub(rope.attention_factor).abs().max() < 1e-12
    assert 'yarn' in repr(rope)
    lin = RotaryEmbedding(16, scaling={'rope_type': 'linear', 'factor': 4.0})
    torch.testing.assert_close(lin(x, positions=torch.arange(0, 20, 4)), RotaryEmbedding(16)(x, positions=torch.arange(5)))  # m -> m/4


GOOD = {'rope_type': 'llama3', 'factor': 8.0, 'original_max_position_embeddings': 64, 'low_freq_factor': 1.0, 'high_freq_factor': 4.0}


@pytest.mark.parametrize("scaling,exc,msg", [
    ({'rope_type': 'linear', 'factor': 0.0}, ValueError, r"scaling\['factor'\]=0.0 must be a finite number >= 1"),
    ({'rope_type': 'linear', 'factor': -2}, ValueError, r"scaling\['factor'\]=-2 must be a finite number >= 1"),
    ({'rope_type': 'linear', 'factor': 0.5}, ValueError, r"scaling\['factor'\]=0.5 must be a finite number >= 1"),
    ({'rope_type': 'linear', 'factor': float('nan')}, ValueError, r"scaling\['factor'\]=nan must be a finite number >= 1"),
    ({'rope_type': 'linear', 'factor': float('inf')}, ValueError, r"scaling\['factor'\]=inf must be a finite number"),
    ({'rope_type': 'linear', 'factor': '2'}, TypeError, r"scaling\['factor'\]='2' must be a finite number >= 1"),
    ({'rope_type': 'linear', 'factor': True}, TypeError, r"scaling\['factor'\]=True must be a finite number"),
    ({'rope_type': 'linear'}, ValueError, r"rope_type='linear' needs the keys \['factor'\]"),
    ({'rope_type': 'ntk', 'factor': 2.0}, ValueError, r"scaling rope_type='ntk' is not supported: use one of \['default', 'dynamic', 'linear', 'llama3', 'yarn'\]"),
    ({'rope_type': 'longrope', 'factor': 2.0}, ValueError, "rope_type='longrope' is not supported"),
    ({'factor': 2.0}, ValueError, "rope_type=None is not supported"),
    ({'rope_type': 'linear', 'type': 'yarn', 'factor': 2.0}, ValueError, "rope_type='linear' and type='yarn': they must agree"),
    ({'rope_type': 'linear', 'factor': 2.0, 'beta_fast': 3}, ValueError,
     r"scaling keys \['beta_fast'\] are not used by rope_type='linear'"),
    ({**GOOD, 'fator': 2.0}, ValueError, r"scaling keys \['fator'\] are not used by rope_type='llama3'"),
    ({'rope_type': 'dynamic', 'factor': 2.0}, ValueError, r"needs the keys \['original_max_position_embeddings'\]"),
    ({'rope_type': 'dynamic', 'factor': 2.0, 'original_max_position_embeddings': 0}, ValueError,
     r"scaling\['original_max_position_embeddings'\]=0 must be"),
    ({'rope_type': 'dynamic', 'factor': 2.0, 'original_max_position_embeddings': 64.0}, TypeError,
     r"scaling\['original_max_position_embeddings'\]=64.0 must be"),
    ({**GOOD, 'high_freq_factor': 1.0}, ValueError, r"scaling\['high_freq_factor'\]=1.0 must be a finite number > low_freq_factor=1.0"),
    ({**GOOD, 'low_freq_factor': 0}, ValueError, r"scaling\['low_freq_factor'\]=0 must be a finite number > 0"),
    ({'rope_type': 'yarn', 'factor': 4.0, 'original_max_position_embeddings': 64, 'beta_fast': 1, 'beta_slow': 2}, ValueError,
     "beta_fast=1.0 must be > beta_slow=2.0"),
    ({'rope_type': 'yarn', 'factor': 4.0, 'original_max_position_embeddings': 64, 'attention_factor': -1.0}, ValueError,
     r"scaling\['attention_factor'\]=-1.0 must be a finite number > 0"),
    ({'rope_type': 'yarn', 'factor': 4.0, 'original_max_position_embeddings': 64, 'mscale': float('nan')}, ValueError,
     r"scaling\['mscale'\]=nan must be a finite number >= 0"),
    ({'rope_type': 'yarn', 'factor': 4.0, 'original_max_position_embeddings': 64, 'truncate': 1}, TypeError,
     r"scaling\['truncate'\]=1 must be a bool"),
    ({'rope_type': 'linear', 'factor': 2.0, 'rope_theta': 500000.0}, ValueError, r"scaling\['rope_theta'\]=500000.0 must equal base=10000.0"),
    ({'rope_type': 'linear', 'factor': 2.0, 'partial_rotary_factor': 0.5}, ValueError,
     r"scaling\['partial_rotary_factor'\]=0.5 is not supported"),
    ('linear', TypeError, "scaling='linear' must be None or a dict"),
])
def test_rope_scaling_bad_inputs(scaling, exc, msg):
    for call in (lambda: RotaryEmbedding(16, scaling=scaling), lambda: rope_inv_freq(16, 10000.0, scaling),
                 lambda: check_rope_scaling(scaling)):
        with pytest.raises(exc, match=msg):
            call()


def test_rope_scaling_other_bad_inputs():
    dyn = {'rope_type': 'dynamic', 'factor': 2.0, 'original_max_position_embeddings': 64}
    with pytest.raises(ValueError, match="seq_len=0 must be"): rope_inv_freq(16, 10000.0, dyn, seq_len=0)
    with pytest.raises(ValueError, match="max_cached=0 must be"): RotaryEmbedding(16, max_cached=0)
    with pytest.raises(ValueError, match="head_dim=7 must be"): rope_inv_freq(7)
    with pytest.raises(TypeError, match="positions.dtype=torch.bool must be an integer dtype"):
        RotaryEmbedding(16)(torch.zeros(1, 3, 16), positions=torch.ones(3, dtype=torch.bool))
    assert check_rope_scaling(None) is None
    assert check_rope_scaling({'type': 'yarn', 'factor': 4, 'original_max_position_embeddings': 64}) == {
        'rope_type': 'yarn', 'factor': 4.0, 'original_max_position_embeddings': 64, 'beta_fast': 32.0, 'beta_slow': 1.0,
        'attention_factor': None, 'mscale': None, 'mscale_all_dim': None, 'truncate': True}

# -- positions held in tensors: computed from the values, never read on the host
def test_sinusoidal_at_equals_the_table():
    pos = torch.tensor([[0, 5, 2], [7, 7, 1]])
    # the same float64 angles (one correctly rounded product each), but sin/cos over tensors of other sizes: ATen runs an
    # elementwise op in vector code (SLEEF, within 1 ulp) and the tail in scalar code, and where an element falls depends on
    # the size and the CPU's vector width. One float64 ulp can move the float32 rounding by one float32 ulp, <= 2^-23 for |v| <= 1.
    one_ulp = 2.0 ** -23
    torch.testing.assert_close(sinusoidal_at(pos, 16), sinusoidal_encoding(8, 16)[pos], rtol=0, atol=one_ulp)
    x = torch.randn(2, 3, 16)
    torch.testing.assert_close(SinusoidalPositionalEmbedding(16)(x, positions=pos), x + sinusoidal_encoding(8, 16)[pos],
                               rtol=2.0 ** -24, atol=one_ulp)          # plus the sum's own rounding, half an ulp of it
    lpe = LearnedPositionalEmbedding(8, 16)
    torch.testing.assert_close(lpe(x, positions=pos), x + lpe.weight[pos], rtol=0, atol=0)   # a gather and one add: the same computation
    with pytest.raises(ValueError, match="positions up to 8 need a table longer than max_len=8"):
        lpe(x, positions=torch.tensor([0, 1, 8]))
    with pytest.raises(ValueError, match=r"positions.shape=\(2,\) must be \(T,\) or \(B, T\) with T=3"):
        lpe(x, positions=torch.tensor([0, 1]))
    with pytest.raises(TypeError, match="positions.dtype=torch.float32 must be an integer dtype"):
        SinusoidalPositionalEmbedding(16)(x, positions=torch.zeros(3))

def test_alibi_bias_at_equals_alibi_bias():
    for q_len, k_len in ((1, 7), (3, 7), (7, 7)):
        pos = torch.arange(k_len - q_len, k_len)                              # the last q_len positions
        # both: one correctly rounded float64 product -m_h·|i - j| per entry (|i - j| an exact integer), then the same cast
        torch.testing.assert_close(alibi_bias_at(4, pos, k_len), alibi_bias(4, q_len, k_len), rtol=0, atol=0)

def test_rope_positions_need_no_table_and_no_host_read():
    rope = RotaryEmbedding(8)
    x = torch.randn(1, 2, 3, 8, dtype=torch.float64)
    far = torch.tensor([2 ** 20, 5, 2 ** 20 + 1])
    out = rope(x, positions=far)
    assert rope._cache == {}                                                  # nothing cached for explicit positions
    ang = far.double()[:, None] * sinusoidal_frequencies(8)
    cos, sin = torch.cat((ang, ang), -1).cos(), torch.cat((ang, ang), -1).sin()
    torch.testing.assert_close(out, apply_rotary(x, cos, sin), rtol=0, atol=1e-12)
    meta = rope(torch.zeros(1, 2, 3, 8, device="meta"), positions=torch.zeros(3, dtype=torch.long, device="meta"))
    assert meta.device.type == "meta"                                         # a host read of a meta tensor would raise

def test_alibi_bias_at_checks_its_positions():
    with pytest.raises(TypeError, match="q_positions.dtype=torch.float32 must be an integer dtype"): alibi_bias_at(4, torch.zeros(3), 5)
    with pytest.raises(ValueError, match=r"q_positions.dim\(\)=2 must be 1"): alibi_bias_at(4, torch.zeros(1, 3, dtype=torch.long), 5)


# ---------------------------------------------------------------- bad input at entry (exact messages)
import re                                                                                                           # noqa: E402

def _E(exc, msg): return pytest.raises(exc, match="^" + re.escape(msg) + "$")

@pytest.mark.parametrize("rot", [rotate_half, rotate_interleaved])
def test_rotations_need_pairs(rot):
    with _E(TypeError, "x must be a torch.Tensor, got str"): rot("x")
    with _E(ValueError, "x.shape[-1]=3 must be even: the dims rotate in pairs"): rot(torch.randn(2, 3))
    with _E(ValueError, "x.shape[-1]=None must be even: the dims rotate in pairs"): rot(torch.tensor(1.0))

def test_apply_rotary_checks_its_inputs():
    x, c = torch.randn(1, 2, 3, 4), torch.randn(3, 4)
    with _E(TypeError, "x must be a torch.Tensor, got str"): apply_rotary("x", c, c)
    with _E(ValueError, "cos.shape=(3, 6) must broadcast to x.shape=(1, 2, 3, 4)"): apply_rotary(x, torch.randn(3, 6), c)
    with _E(ValueError, "sin.shape=(2, 1, 3, 4) must broadcast to x.shape=(1, 2, 3, 4)"): apply_rotary(x, c, torch.randn(2, 1, 3, 4))
    with _E(TypeError, "sin must be a torch.Tensor, got float"): apply_rotary(x, c, 0.5)
    with _E(ValueError, "x.shape[-1]=3 must be even: the dims rotate in pairs"):
        apply_rotary(torch.randn(1, 2, 3, 3), torch.randn(3, 3), torch.randn(3, 3), interleaved=True)
    with _E(TypeError, "interleaved=1 must be a bool (True or False)"): apply_rotary(x, c, c, interleaved=1)

@pytest.mark.parametrize("call, exc, msg", [
    (lambda: rotation_matrix(math.nan, 4), ValueError, "m=nan must be a finite number"),
    (lambda: rotation_matrix("1", 4), TypeError, "m='1' must be a number"),
    (lambda: LearnedPositionalEmbedding(4, 8, math.nan), ValueError, "init_std=nan must be a finite number"),
    (lambda: LearnedPositionalEmbedding(4, 8, "0.02"), TypeError, "init_std='0.02' must be a number"),
    (lambda: LearnedPositionalEmbedding(4, 8, -1.0), ValueError, "init_std=-1.0 must be >= 0 (a standard deviation)"),
    (lambda: sinusoidal_encoding(4, 4, dtype=torch.int64), TypeError, "dtype=torch.int64 must be a floating torch.dtype, e.g. torch.float32"),
    (lambda: sinusoidal_at(torch.arange(3), 4, dtype=torch.bool), TypeError, "dtype=torch.bool must be a floating torch.dtype, e.g. torch.float32"),
    (lambda: sinusoidal_at(torch.arange(3.0), 4), TypeError, "positions.dtype=torch.float32 must be an integer dtype"),
    (lambda: sinusoidal_at([0, 1], 4), TypeError, "positions must be a torch.Tensor, got list"),
    (lambda: sinusoidal_at(torch.arange(3), 5), ValueError, "d_model=5 must be a positive even int"),
    (lambda: alibi_bias(2, 3, dtype=torch.int64), TypeError, "dtype=torch.int64 must be a floating torch.dtype, e.g. torch.float32"),
    (lambda: alibi_bias(2, 3, causal=1), TypeError, "causal=1 must be a bool (True or False)"),
    (lambda: alibi_slopes(2, dtype="float"), TypeError, "dtype='float' must be a floating torch.dtype, e.g. torch.float32"),
    (lambda: alibi_bias_at(2, torch.tensor([0.0]), 3), TypeError, "q_positions.dtype=torch.float32 must be an integer dtype"),
    (lambda: alibi_bias_at(2, [0], 3), TypeError, "q_positions must be a torch.Tensor, got list"),
    (lambda: alibi_bias_at(2, torch.tensor([[0]]), 3), ValueError, "q_positions.dim()=2 must be 1: (Lq,)"),
    (lambda: alibi_bias_at(2, torch.tensor([0]), 0), ValueError, "k_len=0 must be a positive int"),
    (lambda: alibi_bias_at(0, torch.tensor([0]), 3), ValueError, "n_heads=0 must be a positive int"),
    (lambda: alibi_bias_at(2, torch.tensor([0]), 3, dtype=torch.int32), TypeError, "dtype=torch.int32 must be a floating torch.dtype, e.g. torch.float32"),
    (lambda: RotaryEmbedding(4).rows("0 1 2"), TypeError, "positions must be a torch.Tensor, got str"),
    (lambda: RotaryEmbedding(4).rows(torch.tensor([0.5])), TypeError, "positions.dtype=torch.float32 must be an integer dtype"),
    (lambda: RotaryEmbedding(4).rows(torch.arange(2), dtype=torch.int64), TypeError, "dtype=torch.int64 must be a floating torch.dtype, e.g. torch.float32"),
    (lambda: RotaryEmbedding(4).tables(4, dtype=torch.int64), TypeError, "dtype=torch.int64 must be a floating torch.dtype, e.g. torch.float32"),
    (lambda: RotaryEmbedding(4)(torch.randn(1, 2, 3, 4), torch.tensor([0.0, 1.0, 2.0])), TypeError, "positions.dtype=torch.float32 must be an integer dtype"),
])
def test_positional_bad_input(call, exc, msg):
    with _E(exc, msg): call()

def test_rotation_matrix_takes_any_real_position():
    "2, 2.0 and np.float32(0.5) are the float64 positions 2.0 and 0.5 exactly: the same computation."
    torch.testing.assert_close(rotation_matrix(2, 4), rotation_matrix(2.0, 4), rtol=0, atol=0)
    import numpy as np
    torch.testing.assert_close(rotation_matrix(np.float32(0.5), 4), rotation_matrix(0.5, 4), rtol=0, atol=0)
