"""Tests for transformer_lit.multihead: equality with nn.MultiheadAttention, gradients, cache and hooks, costs, errors."""
import math, re
import pytest
import torch
from torch import nn
from hypothesis import given, strategies as st
from transformer_lit.attention import scaled_dot_product_attention
from transformer_lit.multihead import CrossKVCache, KVCache, MultiHeadAttention, attention_cost, merge_heads, split_heads

f64 = torch.float64

def pair(E=16, H=4, dtype=f64, seed=0, **kw):
    torch.manual_seed(seed)
    ref = nn.MultiheadAttention(E, H, batch_first=True, dtype=dtype, **kw)
    with torch.no_grad():                          # torch initialises biases to 0: make them count
        for p in (ref.in_proj_bias, ref.out_proj.bias):
            if p is not None: p.normal_()
    return ref, MultiHeadAttention.from_torch(ref)

def rand(*shape, dtype=f64, seed=1):
    torch.manual_seed(seed); return torch.randn(*shape, dtype=dtype)

def close(a, b, tol=1e-10): torch.testing.assert_close(a, b, atol=tol, rtol=0)

# -- equality with torch
@pytest.mark.parametrize("backend", ["auto", "math", "sdpa"])
@pytest.mark.parametrize("bias", [True, False])
def test_self_attention_equals_torch(backend, bias):
    ref, ours = pair(bias=bias); ours.backend = backend
    x = rand(2, 6, 16)
    close(ours(x), ref(x, x, x, need_weights=False)[0])
    out, w = ours(x, need_weights=True) if backend != "sdpa" else (ours(x), None)
    o_ref, w_ref = ref(x, x, x, average_attn_weights=False)
    close(out, o_ref)
    if w is not None: close(w, w_ref)

@pytest.mark.parametrize("kind", ["bool", "float", "causal", "padding", "padding_and_causal"])
def test_masks_equal_torch(kind):
    ref, ours = pair()
    x = rand(2, 6, 16)
    keep = torch.rand(6, 6) > 0.4; keep[:, 0] = True
    causal = torch.ones(6, 6, dtype=torch.bool).tril()
    pad = torch.tensor([[True] * 6, [True] * 4 + [False] * 2])          # (B, Lk), True = real token
    if kind == "bool": got, exp = ours(x, mask=keep), ref(x, x, x, attn_mask=~keep)[0]
    elif kind == "float":
        fm = rand(6, 6, seed=3)
        got, exp = ours(x, mask=fm), ref(x, x, x, attn_mask=fm)[0]
    elif kind == "causal": got, exp = ours(x, is_causal=True), ref(x, x, x, attn_mask=~causal)[0]
    elif kind == "padding": got, exp = ours(x, mask=pad[:, None, None, :]), ref(x, x, x, key_padding_mask=~pad)[0]
    else: got, exp = ours(x, mask=pad[:, None, None, :] & causal), ref(x, x, x, attn_mask=~causal, key_padding_mask=~pad)[0]
    close(got, exp)

@pytest.mark.parametrize("kdim,vdim", [(None, None), (5, 3), (16, 7)])
@pytest.mark.parametrize("Lq,Lk", [(6, 9), (1, 1), (1, 9), (9, 2)])
def test_cross_attention_equals_torch(kdim, vdim, Lq, Lk):
    ref, ours = pair(kdim=kdim, vdim=vdim)
    x, k, v = rand(2, Lq, 16), rand(2, Lk, kdim or 16, seed=2), rand(2, Lk, vdim or 16, seed=3)
    close(ours(x, k, v), ref(x, k, v)[0])
    if kdim is None and vdim is None: close(ours(x, k), ref(x, k, k)[0])   # value defaults to key

def test_float32_against_float64_and_long_sequence():
    ref, _ = pair(E=32, H=4)
    ours32 = MultiHeadAttention.from_torch(ref).float()
    x = rand(1, 1023, 32)
    exp = ref(x, x, x, need_weights=False, attn_mask=~torch.ones(1023, 1023, dtype=torch.bool).tril())[0]
    torch.testing.assert_close(ours32(x.float(), is_causal=True).double(), exp, atol=1e-5, rtol=1.3e-6)

def test_batch_one_and_non_contiguous_and_seq_first_module():
    torch.manual_seed(0)
    ref = nn.MultiheadAttention(16, 4, dtype=f64)                       # batch_first=False
    ours = MultiHeadAttention.from_torch(ref)
    xs = rand(6, 1, 16)                                                  # (T, B, E) for torch
    x = xs.transpose(0, 1)                                               # (B, T, E), non-contiguous
    assert not x.is_contiguous() or x.shape[0] == 1
    close(ours(x), ref(xs, xs, xs)[0].transpose(0, 1))
    xb = rand(7, 3, 16).transpose(0, 1)                                  # (3, 7, 16) non-contiguous
    assert not xb.is_contiguous()
    close(ours(xb), ref(xb.transpose(0, 1), xb.transpose(0, 1), xb.transpose(0, 1))[0].transpose(0, 1))

def test_parameter_gradients_equal_torch():
    ref, ours = pair()
    x = rand(2, 5, 16)
    ref(x, x, x, need_weights=False)[0].square().sum().backward()
    ours(x).square().sum().backward()
    close(ours.in_proj.weight.grad, ref.in_proj_weight.grad)
    close(ours.in_proj.bias.grad, ref.in_proj_bias.grad)
    close(ours.out_proj.weight.grad, ref.out_proj.weight.grad)

@pytest.mark.parametrize("backend", ["math", "sdpa"])
def test_gradcheck(backend):
    torch.manual_seed(0)
    m = MultiHeadAttention(8, 2, kdim=3, backend=backend).double()
    x, k, v = rand(1, 3, 8).requires_grad_(), rand(1, 4, 3, seed=2).requires_grad_(), rand(1, 4, 8, seed=3).requires_grad_()
    keep = torch.tensor([[True, False, True, True], [False] * 4, [True] * 4])   # row 1 fully masked
    assert torch.autograd.gradcheck(lambda a, b, c: m(a, b, c, mask=keep), (x, k, v))

@st.composite
def configs(draw):
    H = draw(st.integers(1, 4)); D = draw(st.integers(1, 4)); B = draw(st.integers(1, 2))
    Lq, Lk = draw(st.integers(1, 7)), draw(st.integers(1, 7))
    return H, D, B, Lq, Lk, draw(st.booleans()), draw(st.integers(0, 2**16))

@given(configs())
def test_property_equals_torch(cfg):
    H, D, B, Lq, Lk, bias, seed = cfg
    ref, ours = pair(E=H * D, H=H, seed=seed, bias=bias)
    g = torch.Generator().manual_seed(seed)
    x, mem = torch.randn(B, Lq, H * D, generator=g, dtype=f64), torch.randn(B, Lk, H * D, generator=g, dtype=f64)
    keep = torch.rand(Lq, Lk, generator=g) > 0.5; keep[:, 0] = True
    out, w = ours(x, mem, mask=keep, need_weights=True)
    o_ref, w_ref = ref(x, mem, mem, attn_mask=~keep, average_attn_weights=False)
    close(out, o_ref); close(w, w_ref)
    close(w.sum(-1), torch.ones(B, H, Lq, dtype=f64), 1e-12)

@given(st.integers(1, 3), st.integers(1, 6), st.integers(1, 4), st.integers(1, 5))
def test_property_split_merge(B, T, H, D):
    x = torch.randn(B, T, H * D)
    s = split_heads(x, H)
    assert s.shape == (B, H, T, D)
    for h in range(H): assert torch.equal(s[:, h], x[..., h * D:(h + 1) * D])
    assert torch.equal(merge_heads(s), x)

# -- costs
@given(st.sampled_from([(64, [1, 2, 4, 8, 16]), (96, [1, 2, 3, 4, 6, 12])]), st.integers(1, 2048), st.integers(1, 2048))
def test_property_cost_independent_of_heads(spec, Lq, Lk):
    E, heads = spec
    costs = [attention_cost(E, H, Lq, Lk) for H in heads]
    for key in ("params", "proj_flops", "score_flops", "mix_flops"): assert len({c[key] for c in costs}) == 1
    assert [c["softmax_elements"] for c in costs] == [H * Lq * Lk for H in heads]
    assert costs[0]["score_flops"] == 2 * Lq * Lk * E

@pytest.mark.parametrize("E,H,bias", [(512, 8, True), (768, 12, True), (64, 4, False)])
def test_cost_params_match_modules(E, H, bias):
    n = attention_cost(E, H, 1, bias=bias)["params"]
    assert n == sum(p.numel() for p in MultiHeadAttention(E, H, bias=bias).parameters())
    assert n == sum(p.numel() for p in nn.MultiheadAttention(E, H, bias=bias).parameters())

def test_cost_counts_flops_of_a_real_call():
    from torch.utils.flop_counter import FlopCounterMode
    m = MultiHeadAttention(32, 4, bias=False, backend="math")
    x = torch.randn(1, 10, 32)
    with FlopCounterMode(display=False) as fc: m(x)
    c = attention_cost(32, 4, 10)
    assert fc.get_total_flops() == c["proj_flops"] + c["score_flops"] + c["mix_flops"]

# -- cache, rotary and bias hooks
@pytest.mark.parametrize("use_rotary", [False, True])
def test_cached_decoding_equals_full(use_rotary):
    rot = (lambda x, pos: x * (1 + pos.to(x.dtype))[:, None] / 3) if use_rotary else None
    torch.manual_seed(0)
    m = MultiHeadAttention(16, 4, rotary=rot).double().eval()
    x = rand(2, 7, 16)
    full = m(x, is_causal=True)
    cache = KVCache()
    steps = [m(x[:, :3], is_causal=True, cache=cache)] + [m(x[:, t:t + 1], cache=cache) for t in range(3, 7)]
    close(torch.cat(steps, 1), full, 1e-12)
    assert len(cache) == 7 and cache.k.shape == (2, 4, 7, 4)

@pytest.mark.parametrize("kdim", [None, 6])
@pytest.mark.parametrize("rotary", [False, True])
def test_cross_cache_projects_the_memory_once(kdim, rotary):
    "A CrossKVCache is filled by the first call; later calls equal uncached ones without reading the memory or its projections."
    torch.manual_seed(0)
    rot = (lambda x, pos: x * (1 + pos.to(x.dtype))[:, None] / 4) if rotary else None
    m = MultiHeadAttention(16, 4, kdim=kdim, vdim=kdim, rotary=rot).double().eval()
    x, mem = rand(2, 5, 16), rand(2, 7, kdim or 16)
    full = m(x, mem)
    cache = CrossKVCache()
    first = m(x[:, :2], mem, cache=cache)
    assert len(cache) == 7 and cache.k.shape == cache.v.shape == (2, 4, 7, 4)
    calls = []
    hooks = [] if m.fused else [p.register_forward_hook(lambda *a: calls.append(1)) for p in (m.k_proj, m.v_proj)]
    rest = m(x[:, 2:], torch.full_like(mem, float("nan")), cache=cache,     # NaN memory: any read would show
             positions=torch.arange(2, 5))                                    # a cross cache does not count queries
    for h in hooks: h.remove()
    close(torch.cat([first, rest], 1), full, 1e-12)
    assert calls == [] and len(cache) == 7

def test_rotary_gets_positions_and_module_is_registered():
    seen = []
    class Rot(nn.Module):
        def forward(self, x, positions): seen.append(positions.tolist()); return x
    m = MultiHeadAttention(8, 2, rotary=Rot())
    assert "rotary" in dict(m.named_children())
    cache = KVCache(); m(torch.randn(1, 3, 8), cache=cache); m(torch.randn(1, 1, 8), cache=cache)
    assert seen == [[0, 1, 2], [0, 1, 2], [3], [3]]
    seen.clear(); m(torch.randn(1, 2, 8), positions=torch.tensor([5, 9]))
    assert seen == [[5, 9], [5, 9]]

def test_project_qkv_shapes_and_fused_equals_sliced():
    torch.manual_seed(0)
    m = MultiHeadAttention(12, 3).double()
    x = rand(2, 5, 12)
    q, k, v = m.project_qkv(x)
    assert q.shape == k.shape == v.shape == (2, 3, 5, 4)
    q2, k2, v2 = m.project_qkv(x, x.clone(), x.clone())          # the sliced path
    close(q, q2, 1e-14); close(k, k2, 1e-14); close(v, v2, 1e-14)

def test_attn_bias_with_and_without_causal():
    ref, ours = pair()
    x = rand(2, 6, 16)
    bias = rand(1, 4, 6, 6, seed=5)
    causal = torch.ones(6, 6, dtype=torch.bool).tril()
    cf = torch.zeros(6, 6, dtype=f64).masked_fill(~causal, -math.inf)
    close(ours(x, attn_bias=bias), ours(x, mask=bias))
    close(ours(x, attn_bias=bias, is_causal=True), ours(x, mask=bias + cf))
    close(ours(x, attn_bias=bias, mask=causal), ours(x, mask=bias + cf))
    close(ours(x, attn_bias=bias, mask=cf), ours(x, mask=bias + cf))
    close(ours(x, attn_bias=bias[0, :, None].expand(4, 1, 6, 6).transpose(0, 1)), ours(x, mask=bias))

def test_dropout_train_and_eval():
    ref, ours = pair(dropout=0.5)
    x = rand(2, 5, 16)
    ours.eval(); ref.eval()
    close(ours(x), ref(x, x, x)[0])
    ours.train()
    torch.manual_seed(0); a = ours(x)
    torch.manual_seed(0); b = ours(x)
    torch.manual_seed(1); c = ours(x)
    close(a, b, 0); assert not torch.allclose(a, c)

def test_backends_agree_and_weights_need_math():
    _, ours = pair()
    x = rand(2, 5, 16)
    outs = []
    for b in ("auto", "math", "sdpa"):
        ours.backend = b; outs.append(ours(x, is_causal=True))
    close(outs[0], outs[1]); close(outs[0], outs[2])
    with pytest.raises(ValueError, match=re.escape("backend='sdpa' cannot return weights")): ours(x, need_weights=True)

# -- bad inputs
def E(exc, msg): return pytest.raises(exc, match="^" + re.escape(msg))

def test_constructor_errors():
    with E(ValueError, "d_model=10 must be divisible by n_heads=3"): MultiHeadAttention(10, 3)
    with E(ValueError, "d_model=0 must be a positive int"): MultiHeadAttention(0, 1)
    with E(TypeError, "n_heads=2.0 must be a positive int"): MultiHeadAttention(8, 2.0)
    with E(ValueError, "kdim=-1 must be a positive int or None"): MultiHeadAttention(8, 2, kdim=-1)
    for p in (-0.5, 1.0):
        with E(ValueError, f"dropout={p} must be a number in [0, 1)"): MultiHeadAttention(8, 2, dropout=p)
    with E(ValueError, "backend='fastest' must be one of ['auto', 'flash', 'math', 'sdpa', 'triton']"): MultiHeadAttention(8, 2, backend="fastest")
    with E(ValueError, "d_model=10 must be divisible by n_heads=4"): attention_cost(10, 4, 3)
    with E(ValueError, "n_heads=0 must be a positive int"): attention_cost(8, 0, 3)
    with E(ValueError, "k_len=0 must be a positive int"): attention_cost(8, 2, 3, 0)
    with E(ValueError, "x.shape[-1]=10 must be divisible by n_heads=3"): split_heads(torch.randn(2, 3, 10), 3)

def test_forward_errors():
    m = MultiHeadAttention(8, 2)
    cm = MultiHeadAttention(8, 2, kdim=3, vdim=5)
    x = torch.randn(2, 4, 8)
    with E(TypeError, "query must be a torch.Tensor, got list"): m([1.0])
    with E(ValueError, "query.dim()=2 must be 3: (B, T, d_model)"): m(x[0])
    with E(ValueError, "query.shape[-1]=6 must equal d_model=8"): m(torch.randn(2, 4, 6))
    with E(ValueError, "key.shape[-1]=8 must equal kdim=3"): cm(x, x, torch.randn(2, 4, 5))
    with E(ValueError, "value.shape[-1]=3 must equal vdim=5"): cm(x, torch.randn(2, 4, 3), torch.randn(2, 4, 3))
    with E(ValueError, "key.shape[0]=3 must equal query.shape[0]=2 (batch)"): m(x, torch.randn(3, 4, 8))
    with E(ValueError, "key.shape[1]=4 must equal value.shape[1]=5 (one value per key)"): m(x, x, torch.randn(2, 5, 8))
    with E(TypeError, "key.dtype=torch.float64 must equal query.dtype=torch.float32"): m(x, x.double())
    with E(TypeError, "value.dtype=torch.float16 must equal query.dtype=torch.float32"): m(x, x, x.half())
    with E(ValueError, "value=None defaults to key, which needs kdim=3 to equal vdim=5: pass value"): cm(x, torch.randn(2, 4, 3))
    with E(TypeError, "cache must be a KVCache, a CrossKVCache or None, got dict"): m(x, cache={})
    with E(ValueError, "a CrossKVCache holds a memory's keys and values: pass key (the memory), or use a KVCache for self-attention"):
        m(x, cache=CrossKVCache())
    mc = CrossKVCache(); m(x, torch.randn(2, 5, 8), cache=mc)
    with E(ValueError, "key.shape[:2]=(2, 3) must equal the CrossKVCache's (batch, keys)=(2, 5): it holds the keys and values of one memory"):
        m(x, torch.randn(2, 3, 8), cache=mc)
    with E(ValueError, "positions must be a tensor of shape (Lq,) or (B, Lq) with Lq=4, got (3,)"): m(x, positions=torch.arange(3))
    with E(ValueError, "positions must be a tensor of shape (Lq,) or (B, Lq) with Lq=4, got list"): m(x, positions=[0, 1, 2, 3])
    cache = KVCache(); m(x, cache=cache)
    with E(ValueError, "k.shape=(1, 2, 4, 4), v.shape=(1, 2, 4, 4) must match the cached (2, 2, 4, 4), (2, 2, 4, 4) in all dims but -2"):
        m(x[:1], cache=cache)
    with E(ValueError, "mask.dim()=3 must be 2 (Lq, Lk) or 4 (B or 1, H or 1, Lq, Lk)"): m(x, mask=torch.ones(2, 4, 4, dtype=torch.bool))
    with E(ValueError, "mask.shape=(4, 3) must be broadcastable to (..., Lq, Lk)=(2, 2, 4, 4)"): m(x, mask=torch.ones(4, 3, dtype=torch.bool))
    with E(ValueError, "mask.shape=(3, 2, 4, 4) must be broadcastable"): m(x, mask=torch.ones(3, 2, 4, 4, dtype=torch.bool))
    with E(TypeError, "mask.dtype=torch.int32 must be torch.bool"): m(x, mask=torch.ones(4, 4, dtype=torch.int32))
    with E(ValueError, "is_causal=True together with an explicit mask is ambiguous"): m(x, mask=torch.ones(4, 4, dtype=torch.bool), is_causal=True)
    with E(TypeError, "attn_bias must be a floating tensor added to the scores, got torch.bool"): m(x, attn_bias=torch.ones(4, 4, dtype=torch.bool))
    with E(ValueError, "attn_bias.dim()=3 must be 2 (Lq, Lk) or 4"): m(x, attn_bias=torch.ones(2, 4, 4))
    with E(ValueError, "attn_bias.shape=(1, 3, 4, 4) must be broadcastable"): m(x, attn_bias=torch.ones(1, 3, 4, 4))

def test_from_torch_errors():
    with E(TypeError, "m must be an nn.MultiheadAttention, got Linear"): MultiHeadAttention.from_torch(nn.Linear(2, 2))
    with E(ValueError, "add_bias_kv=True, add_zero_attn=False: both must be False"):
        MultiHeadAttention.from_torch(nn.MultiheadAttention(8, 2, add_bias_kv=True))


@pytest.mark.parametrize("chunks", [(1, 1, 1, 1, 1), (2, 3), (4, 1), (1, 4)])
def test_cached_chunks_with_is_causal_equal_one_causal_pass(chunks):
    "With a non-empty cache, is_causal aligns bottom-right: query i at position len(cache)+i sees keys <= it."
    torch.manual_seed(0)
    m = MultiHeadAttention(16, 4).double().eval()
    x = torch.randn(2, sum(chunks), 16, dtype=torch.float64)
    bias = torch.randn(1, 4, sum(chunks), sum(chunks), dtype=torch.float64)
    for ab in (None, bias):
        full = m(x, is_causal=True, attn_bias=ab)
        cache, outs, t = KVCache(), [], 0
        for n in chunks:
            outs.append(m(x[:, t:t + n], is_causal=True, cache=cache,
                          attn_bias=None if ab is None else ab[..., t:t + n, :t + n]))
            t += n
        torch.testing.assert_close(torch.cat(outs, 1), full, atol=1e-12, rtol=0)
