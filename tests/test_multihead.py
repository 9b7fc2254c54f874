"""Tests for transformer_lit.multihead: equality with nn.MultiheadAttention, gradients, cache and hooks, costs, errors."""
import math, re
import pytest
import torch
from torch import nn
from hypothesis import given, strategies as st
from transformer_lit.attention import causal_mask, scaled_dot_product_attention
from numerics import assert_within, linear_difference_bound
from transformer_lit.multihead import MultiHeadAttention, attention_cost, merge_heads, split_heads
from transformer_lit.decoding import CrossKVCache, KVCache                 # chapter 10's caches: the module's cache protocol
from transformer_lit.fast_decoding import StaticKVCache

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

class ConcatCache:
    "The cache protocol in its plainest form, written here: any object with start, append and key_mask will do."
    def __init__(self): self.k = self.v = None; self.start = 0
    def append(self, k, v):
        self.k, self.v = (k, v) if self.k is None else (torch.cat([self.k, k], -2), torch.cat([self.v, v], -2))
        self.start = self.k.shape[-2]
        return self.k, self.v
    def key_mask(self, q_len, is_causal): return None

class MemoryCache:
    "A memory's cache in its plainest form: memory_kv is None until the first call stores the keys and values."
    start, memory_kv = 0, None
    def append(self, k, v):
        if self.memory_kv is None: self.memory_kv = (k, v)
        return self.memory_kv
    def key_mask(self, q_len, is_causal): return None

@pytest.mark.parametrize("use_rotary", [False, True])
def test_any_cache_with_the_protocol_gives_what_chapter_10s_caches_give(use_rotary):
    "A minimal cache of the protocol (not a class of chapter 10) gives the outputs of KVCache and CrossKVCache."
    rot = (lambda x, pos: x * (1 + pos.to(x.dtype))[:, None] / 3) if use_rotary else None
    torch.manual_seed(0)
    m = MultiHeadAttention(16, 4, rotary=rot).double().eval()
    x, mem = rand(2, 7, 16), rand(2, 5, 16)
    runs = []
    for make in (KVCache, ConcatCache):
        c = make()
        runs.append(torch.cat([m(x[:, :3], is_causal=True, cache=c), m(x[:, 3:5], is_causal=True, cache=c)] +
                              [m(x[:, t:t + 1], cache=c) for t in range(5, 7)], 1))
    # KVCache returns views into a longer buffer, ConcatCache contiguous tensors: the same operations on other strides,
    # which an attention kernel may sum in another order (float64: ~1e-16 of these O(1) values; 1e-12 is a wide margin)
    close(runs[0], runs[1], 1e-12)
    close(runs[0], m(x, is_causal=True), 1e-12)
    runs = []
    for make in (CrossKVCache, MemoryCache):
        c = make()
        runs.append(torch.cat([m(x[:, :2], mem, cache=c),                  # a memory's cache does not count queries: positions given
                               m(x[:, 2:], torch.full_like(mem, float("nan")), cache=c, positions=torch.arange(2, 7))], 1))
    assert torch.equal(runs[0], runs[1])                                  # both hold the projected memory as it came: one path
    close(runs[0], m(x, mem), 1e-12)

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
    with E(TypeError, "cache must be None or an object with start, append and key_mask (chapter 10's KVCache or CrossKVCache, chapter 11's StaticKVCache), got dict"): m(x, cache={})
    with E(ValueError, "a CrossKVCache holds a memory's keys and values: pass key (the memory), or use a KVCache for self-attention"):
        m(x, cache=CrossKVCache())
    mc = CrossKVCache(); m(x, torch.randn(2, 5, 8), cache=mc)
    with E(ValueError, "key.shape[:2]=(2, 3) must equal the CrossKVCache's (batch, keys)=(2, 5): it holds the keys and values of one memory"):
        m(x, torch.randn(2, 3, 8), cache=mc)
    with E(ValueError, "positions.shape=(3,) must be (Lq,) or (B, Lq) with Lq=4"): m(x, positions=torch.arange(3))
    with E(TypeError, "positions must be a torch.Tensor, got list"): m(x, positions=[0, 1, 2, 3])
    with E(TypeError, "positions.dtype=torch.float32 must be an integer dtype"): m(x, positions=torch.arange(4.0))
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


# ---------------------------------------------------------------- grouped-query attention: n_kv_heads = G key/value heads
from transformer_lit.attention import attend, repeat_kv
from transformer_lit.multihead import check_kv_heads, kv_cache_bytes

def E(exc, msg): return pytest.raises(exc, match="^" + re.escape(msg))

def gqa_pair(E_=16, H=4, G=2, bias=True, qkv_bias=None, dtype=f64, seed=0, **kw):
    "A GQA module and the MHA module (G = H) that computes the same: its W_K, W_V rows are each kv head's rows repeated."
    torch.manual_seed(seed)
    g = MultiHeadAttention(E_, H, bias=bias, qkv_bias=qkv_bias, n_kv_heads=G, **kw).to(dtype)
    m = MultiHeadAttention(E_, H, bias=bias, qkv_bias=qkv_bias, **kw).to(dtype)
    D, n = E_ // H, H // G
    with torch.no_grad():
        for p in g.parameters(): p.normal_(0, 0.3)
        if g.fused: Wq, Wk, Wv = g.in_proj.weight.split(g.qkv_widths)
        else: Wq, Wk, Wv = g.q_proj.weight, g.k_proj.weight, g.v_proj.weight
        rep = lambda W: W.view(G, D, -1).repeat_interleave(n, 0).reshape(H * D, -1)   # kv head g -> query heads g·n .. g·n + n-1
        W = (Wq, rep(Wk), rep(Wv))
        if g.fused: m.in_proj.weight.copy_(torch.cat(W))
        else:
            for lin, w in zip((m.q_proj, m.k_proj, m.v_proj), W): lin.weight.copy_(w)
        bq = g.in_proj.bias if g.fused else (g.q_proj.bias)
        if bq is not None:
            if g.fused: b = g.in_proj.bias.split(g.qkv_widths)
            else: b = (g.q_proj.bias, g.k_proj.bias, g.v_proj.bias)
            B = (b[0], b[1].view(G, D).repeat_interleave(n, 0).reshape(-1), b[2].view(G, D).repeat_interleave(n, 0).reshape(-1))
            if m.fused: m.in_proj.bias.copy_(torch.cat(B))
            else:
                for lin, bb in zip((m.q_proj, m.k_proj, m.v_proj), B): lin.bias.copy_(bb)
        m.out_proj.load_state_dict(g.out_proj.state_dict())
    return g, m

def test_gqa_none_is_todays_module_bit_for_bit():
    for kw in (dict(), dict(bias=False), dict(kdim=6, vdim=5)):
        torch.manual_seed(0); a = MultiHeadAttention(16, 4, **kw)
        torch.manual_seed(0); b = MultiHeadAttention(16, 4, n_kv_heads=4, qkv_bias=kw.get("bias", True), **kw)
        assert a.n_kv_heads == b.n_kv_heads == 4 and a.d_head == 4
        sa, sb = a.state_dict(), b.state_dict()
        assert list(sa) == list(sb) and all(torch.equal(sa[k], sb[k]) for k in sa)
        x = torch.randn(2, 7, 16)
        if "kdim" in kw:
            assert list(sa) == [f"{p}_proj.{w}" for p in "qkv" for w in ("weight", "bias")] + ["out_proj.weight", "out_proj.bias"]
            mem_k, mem_v = torch.randn(2, 5, 6), torch.randn(2, 5, 5)
            assert torch.equal(a(x, mem_k, mem_v), b(x, mem_k, mem_v)); continue
        assert list(sa) == (["in_proj.weight", "in_proj.bias", "out_proj.weight", "out_proj.bias"] if kw.get("bias", True)
                            else ["in_proj.weight", "out_proj.weight"])
        assert a.in_proj.weight.shape == (48, 16)
        # today's fused projection, written out: view (B, T, 3, H, D), permute, unbind; the same bits come out
        B, T = x.shape[:2]
        q, k, v = a.in_proj(x).view(B, T, 3, 4, 4).permute(2, 0, 3, 1, 4).unbind(0)
        legacy = a.out_proj(merge_heads(attend(q, k, v, is_causal=True).out))
        assert torch.equal(a(x, is_causal=True), legacy) and torch.equal(b(x, is_causal=True), legacy)
        assert torch.equal(a(x, need_weights=True)[1], b(x, need_weights=True)[1])

def test_gqa_from_torch_is_unchanged():
    ref, ours = pair()
    assert ours.n_kv_heads == ours.n_heads == 4 and ours.in_proj.weight.shape == (48, 16)
    x = rand(2, 6, 16)
    close(ours(x), ref(x, x, x, need_weights=False)[0])

@pytest.mark.parametrize("G", [1, 2, 4, 8])
@pytest.mark.parametrize("bias,qkv_bias", [(True, None), (False, None), (False, True), (True, False)])
def test_gqa_projection_shapes_and_parameter_count(G, bias, qkv_bias):
    E_, H, D = 32, 8, 4
    m = MultiHeadAttention(E_, H, bias=bias, qkv_bias=qkv_bias, n_kv_heads=G)
    has_qkv_bias = bias if qkv_bias is None else qkv_bias
    assert (m.n_heads, m.n_kv_heads, m.d_head) == (8, G, 4)
    assert m.in_proj.weight.shape == ((H + 2 * G) * D, E_) and m.out_proj.weight.shape == (E_, H * D)
    assert (m.in_proj.bias is not None) == has_qkv_bias and (m.out_proj.bias is not None) == bias
    n = sum(p.numel() for p in m.parameters())
    assert n == attention_cost(E_, H, 1, bias=bias, n_kv_heads=G, qkv_bias=qkv_bias)["params"]
    assert n == 2 * E_ * E_ + 2 * E_ * G * D + (E_ + 2 * G * D) * has_qkv_bias + E_ * bias
    c = MultiHeadAttention(E_, H, n_kv_heads=G, kdim=6, vdim=5, qkv_bias=qkv_bias, bias=bias)
    assert c.q_proj.weight.shape == (32, 32) and c.k_proj.weight.shape == (G * D, 6) and c.v_proj.weight.shape == (G * D, 5)
    q, k, v = c.project_qkv(torch.randn(2, 3, 32), torch.randn(2, 9, 6), torch.randn(2, 9, 5))
    assert q.shape == (2, 8, 3, 4) and k.shape == v.shape == (2, G, 9, 4)

@pytest.mark.parametrize("backend", ["math", "sdpa", "auto"])
@pytest.mark.parametrize("G", [1, 2, 4])
@pytest.mark.parametrize("L", [1, 7, 113])
@pytest.mark.parametrize("kind", ["none", "causal", "bool", "float"])
def test_gqa_module_equals_mha_with_repeated_kv_heads(backend, G, L, kind):
    g, m = gqa_pair(H=4, G=G, backend=backend)
    x = rand(2, L, 16, seed=L)
    keep = torch.rand(2, 4, L, L) > 0.5; keep[..., 0] = True
    kw = {"none": {}, "causal": dict(is_causal=True), "bool": dict(mask=keep), "float": dict(mask=rand(1, 4, L, L, seed=9))}[kind]
    xg, xm = x.clone().requires_grad_(), x.clone().requires_grad_()
    out_g, out_m = g(xg, **kw), m(xm, **kw)
    close(out_g, out_m)
    do = rand(*out_g.shape, seed=5)
    out_g.backward(do); out_m.backward(do)
    close(xg.grad, xm.grad)
    D, n = 4, 4 // G                                           # a shared kv head's weight gradient is the sum over its copies
    Wq_g, Wk_g, Wv_g = g.in_proj.weight.grad.split(g.qkv_widths)
    Wq_m, Wk_m, Wv_m = m.in_proj.weight.grad.split(m.qkv_widths)
    close(Wq_g, Wq_m)
    for a, b in ((Wk_g, Wk_m), (Wv_g, Wv_m)): close(a, b.view(G, n, D, 16).sum(1).reshape(G * D, 16))

def test_gqa_module_cross_attention_kdim_vdim_equals_repeated():
    g, m = gqa_pair(H=4, G=2, kdim=6, vdim=5)
    x, k, v = rand(2, 3, 16), rand(2, 9, 6, seed=2), rand(2, 9, 5, seed=3)
    close(g(x, k, v), m(x, k, v))
    g2, m2 = gqa_pair(H=4, G=1)                                 # fused weights, cross-attention slices
    mem = rand(2, 9, 16, seed=4)
    close(g2(x, mem), m2(x, mem))

def test_mqa_is_one_shared_head():
    g, m = gqa_pair(H=4, G=1)
    x = rand(2, 5, 16)
    q, k, v = g.project_qkv(x)
    assert q.shape == (2, 4, 5, 4) and k.shape == v.shape == (2, 1, 5, 4)
    out_heads = scaled_dot_product_attention(q, k.expand(2, 4, 5, 4), v.expand(2, 4, 5, 4))   # every query head reads head 0
    close(g(x), g.out_proj(merge_heads(out_heads)))
    close(g(x), m(x))

@pytest.mark.parametrize("G", [1, 2, 4])
def test_gqa_cached_decoding_equals_full_and_cache_holds_g_heads(G):
    g, m = gqa_pair(H=4, G=G)
    g.eval()
    x = rand(3, 6, 16)
    full = g(x, is_causal=True)
    cache = KVCache()
    assert cache.nbytes() == 0
    steps = torch.cat([g(x[:, t:t + 1], cache=cache) for t in range(6)], 1)
    close(steps, full, 1e-12)
    assert cache.k.shape == cache.v.shape == (3, G, 6, 4)
    assert cache.nbytes() == 2 * 3 * G * 6 * 4 * 8                  # float64: 8 bytes
    mcache = KVCache(); [m(x[:, t:t + 1], cache=mcache) for t in range(6)]
    assert mcache.nbytes() == cache.nbytes() * (4 // G)             # the repeated module caches H/G times more
    assert cache.nbytes() == kv_cache_bytes(G, 4, 6, batch=3, dtype=f64)
    with E(ValueError, f"k.shape=(3, 5, 1, 4), v.shape=(3, 5, 1, 4) must match the cached (3, {G}, 6, 4), (3, {G}, 6, 4) in all dims but -2"):
        cache.append(torch.zeros(3, 5, 1, 4, dtype=f64), torch.zeros(3, 5, 1, 4, dtype=f64))
    mem = rand(3, 5, 16, seed=7)
    xc = CrossKVCache()
    first = g(x[:, :1], mem, cache=xc)
    assert xc.k.shape == (3, G, 5, 4) and xc.nbytes() == 2 * 3 * G * 5 * 4 * 8
    close(g(x[:, 1:3], torch.zeros_like(mem), cache=xc), g(x[:, 1:3], mem))

def test_gqa_rotary_and_cached_chunks():
    from transformer_lit.positional import RotaryEmbedding
    g, _ = gqa_pair(H=4, G=2, rotary=RotaryEmbedding(4))
    x = rand(2, 7, 16)
    full = g(x, is_causal=True)
    cache = KVCache()
    close(torch.cat([g(x[:, :3], cache=cache, is_causal=True), g(x[:, 3:], cache=cache, is_causal=True)], 1), full, 1e-12)

def test_gqa_float32_against_float64_and_gradcheck():
    g, _ = gqa_pair(H=4, G=2)
    x = rand(2, 113, 16)
    ref = g(x, is_causal=True)
    g32 = MultiHeadAttention(16, 4, n_kv_heads=2); g32.load_state_dict({k: v.float() for k, v in g.state_dict().items()})
    torch.testing.assert_close(g32(x.float(), is_causal=True).double(), ref, atol=1e-5, rtol=1.3e-6)
    small, _ = gqa_pair(E_=8, H=4, G=2, backend="math")
    xs = rand(1, 3, 8).requires_grad_()
    assert torch.autograd.gradcheck(lambda t: small(t, is_causal=True), (xs,))
    params = [p for p in small.parameters()]
    assert torch.autograd.gradcheck(lambda *ps: torch.func.functional_call(small, dict(zip([n for n, _ in small.named_parameters()], ps)), (xs.detach(),)),
                                    tuple(p.detach().clone().requires_grad_() for p in params))

def _copy_hf(hf, ours):
    with torch.no_grad():
        ours.in_proj.weight.copy_(torch.cat([hf.q_proj.weight, hf.k_proj.weight, hf.v_proj.weight]))
        if ours.in_proj.bias is not None: ours.in_proj.bias.copy_(torch.cat([hf.q_proj.bias, hf.k_proj.bias, hf.v_proj.bias]))
        ours.out_proj.weight.copy_(hf.o_proj.weight)
        if ours.out_proj.bias is not None: ours.out_proj.bias.copy_(hf.o_proj.bias)

@pytest.mark.parametrize("family,G,bias", [("llama", 2, False), ("llama", 1, False), ("llama", 2, True), ("qwen2", 2, None)])
def test_gqa_equals_hugging_face_attention(family, G, bias):
    "transformers' LlamaAttention / Qwen2Attention with num_key_value_heads < num_attention_heads, random init, weights copied."
    pytest.importorskip("transformers")
    from transformer_lit.positional import RotaryEmbedding
    E_, H, D, T = 64, 8, 8, 7
    if family == "llama":
        from transformers import LlamaConfig
        from transformers.models.llama.modeling_llama import LlamaAttention as Attn
        cfg = LlamaConfig(hidden_size=E_, num_attention_heads=H, num_key_value_heads=G, intermediate_size=128,
                          vocab_size=10, attention_bias=bias)
        ours_kw = dict(bias=bias)
    else:                                                       # Qwen2: q/k/v biases, no o_proj bias
        from transformers import Qwen2Config
        from transformers.models.qwen2.modeling_qwen2 import Qwen2Attention as Attn
        cfg = Qwen2Config(hidden_size=E_, num_attention_heads=H, num_key_value_heads=G, intermediate_size=128, vocab_size=10)
        ours_kw = dict(bias=False, qkv_bias=True)
    cfg._attn_implementation = "sdpa"                           # float64 throughout (eager takes its softmax in float32)
    torch.manual_seed(0)
    hf = Attn(cfg, layer_idx=0).double().eval()
    with torch.no_grad():
        for p in hf.parameters(): p.normal_(0, 0.2)            # biases too (HF initialises them to zero)
    rope = RotaryEmbedding(D, base=10000.0, interleaved=False)  # LLaMA's half-split pairing (i, i + D/2)
    ours = MultiHeadAttention(E_, H, n_kv_heads=G, rotary=rope, **ours_kw).double().eval()
    _copy_hf(hf, ours)
    assert sum(p.numel() for p in ours.parameters()) == sum(p.numel() for p in hf.parameters())
    x = rand(2, T, E_)
    cos, sin = (t[:T].expand(2, T, D) for t in rope.tables(T, f64))        # our float64 tables for both
    causal = torch.zeros(T, T, dtype=f64).masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), -math.inf)[None, None]
    out_hf, _ = hf(x, position_embeddings=(cos, sin), attention_mask=causal)
    for backend in ("math", "sdpa"):
        ours.backend = backend
        close(ours(x, is_causal=True), out_hf)
        close(hf(x, position_embeddings=(cos, sin), attention_mask=None)[0], out_hf)   # HF: no mask means causal
        close(ours(x), hf(x, position_embeddings=(cos, sin), attention_mask=torch.zeros(1, 1, T, T, dtype=f64))[0])
    ours.backend = "auto"
    cfg._attn_implementation = "eager"                          # HF's eager path returns the weights (softmax in float32)
    out_eager, w_hf = hf(x, position_embeddings=(cos, sin), attention_mask=causal)
    out, w = ours(x, is_causal=True, need_weights=True)
    torch.testing.assert_close(w, w_hf, atol=1e-6, rtol=0); torch.testing.assert_close(out, out_eager, atol=1e-5, rtol=0)
    cfg._attn_implementation = "sdpa"
    # HF's own rotary tables (computed in float32) agree to float32 precision
    from importlib import import_module
    mod = import_module(Attn.__module__)
    rot_cls = [getattr(mod, n) for n in dir(mod) if n.endswith("RotaryEmbedding")][0]
    hf_cos, hf_sin = rot_cls(cfg)(x, torch.arange(T)[None].expand(2, T))
    out_hf2, _ = hf(x, position_embeddings=(hf_cos.double(), hf_sin.double()), attention_mask=causal)
    torch.testing.assert_close(ours(x, is_causal=True), out_hf2, atol=1e-6, rtol=0)
    cache = KVCache()                                            # cached decoding equals HF's full causal pass
    close(torch.cat([ours(x[:, t:t + 1], cache=cache) for t in range(T)], 1), out_hf)
    assert cache.k.shape == (2, G, T, D)

def test_gqa_constructor_errors():
    for G, err, msg in [(3, ValueError, "n_kv_heads=3 must divide n_heads=8: each key/value head is shared by n_heads / n_kv_heads query heads (so 1 <= n_kv_heads <= n_heads)"),
                        (16, ValueError, "n_kv_heads=16 must divide n_heads=8: each key/value head is shared by n_heads / n_kv_heads query heads (so 1 <= n_kv_heads <= n_heads)"),
                        (0, ValueError, "n_kv_heads=0 must be a positive int or None"),
                        (-2, ValueError, "n_kv_heads=-2 must be a positive int or None"),
                        (True, TypeError, "n_kv_heads=True must be a positive int or None"),
                        (2.0, TypeError, "n_kv_heads=2.0 must be a positive int or None"),
                        ("2", TypeError, "n_kv_heads='2' must be a positive int or None")]:
        with E(err, msg): MultiHeadAttention(32, 8, n_kv_heads=G)
        with E(err, msg): attention_cost(32, 8, 4, n_kv_heads=G)
        with E(err, msg): check_kv_heads(8, G)
    with E(TypeError, "qkv_bias=1 must be a bool or None"): MultiHeadAttention(32, 8, qkv_bias=1)
    assert check_kv_heads(8, None) == 8 and check_kv_heads(8, 8) == 8 and check_kv_heads(8, 1) == 1

def test_kv_cache_arithmetic():
    assert kv_cache_bytes(8, 128, 4096, n_layers=80) == 2 * 80 * 8 * 128 * 4096 * 2       # bf16 default: 2 bytes
    assert kv_cache_bytes(64, 128, 1, n_layers=80, dtype=torch.float32) == 2 * 80 * 64 * 128 * 4
    c = attention_cost(8192, 64, 1, 4096, bias=False, n_kv_heads=8)
    assert c["params"] == 2 * 8192 ** 2 + 2 * 8192 * 1024 and c["kv_cache_elements"] == 2 * 4096 * 1024
    assert attention_cost(8192, 64, 1, 4096, bias=False)["params"] == 4 * 8192 ** 2
    with E(ValueError, "n_kv_heads=0 must be a positive int"): kv_cache_bytes(0, 128, 10)
    with E(TypeError, "dtype='bf16' must be a torch.dtype"): kv_cache_bytes(8, 128, 10, dtype="bf16")

# -- bad dtypes into the module, and the static (preallocated) cache
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.bool, torch.uint8])
def test_non_floating_inputs_are_refused(dtype):
    m = MultiHeadAttention(8, 2)
    x = torch.zeros(2, 3, 8)
    with pytest.raises(TypeError, match=re.escape(f"query.dtype={dtype} must be a floating dtype")): m(x.to(dtype))
    with pytest.raises(TypeError, match=re.escape(f"key.dtype={dtype} must be a floating dtype")): m(x, x.to(dtype))
    with pytest.raises(TypeError, match=re.escape(f"value.dtype={dtype} must be a floating dtype")): m(x, x, x.to(dtype))

def test_input_dtype_must_match_parameters_except_under_autocast():
    m = MultiHeadAttention(8, 2)
    x = torch.randn(2, 3, 8)
    with pytest.raises(TypeError, match=re.escape("query.dtype=torch.float64 must equal the module's parameter dtype torch.float32")):
        m(x.double())
    with pytest.raises(TypeError, match=re.escape("query.dtype=torch.float32 must equal the module's parameter dtype torch.float64")):
        MultiHeadAttention(8, 2).double()(x)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert m(x.bfloat16()).dtype == torch.bfloat16                 # autocast casts the inputs of the matmuls itself
    assert m(torch.zeros(0, 3, 8)).shape == (0, 3, 8)                  # an empty batch

@pytest.mark.parametrize("G", [4, 2, 1])
@pytest.mark.parametrize("causal", [True, False])
def test_static_kv_cache_equals_growing_cache(G, causal):
    torch.manual_seed(0)
    m = MultiHeadAttention(16, 4, n_kv_heads=G).double().eval()
    x = rand(2, 7, 16)
    grow, static = KVCache(), StaticKVCache(2, G, 10, 4, f64)
    for a, b in ((0, 3), (3, 4), (4, 7)):                               # a chunk of three, one token, a chunk of three
        close(m(x[:, a:b], cache=static, is_causal=causal), m(x[:, a:b], cache=grow, is_causal=causal), 1e-12)
    assert int(static.pos) == 7 and static.k.shape == (2, G, 10, 4) and static.nbytes() == 2 * 2 * G * 10 * 4 * 8
    close(static.k[:, :, :7], grow.k, 0); close(static.v[:, :, :7], grow.v, 0)   # copies of the same chunks' projections
    assert static.k[:, :, 7:].abs().max() == 0                          # unwritten slots stay zero and are never read

def test_static_kv_cache_with_a_mask_and_bad_input():
    torch.manual_seed(0)
    m = MultiHeadAttention(8, 2).double()
    x = rand(1, 4, 8)
    keep = torch.tensor([False, True, True, True, True, True])          # key slot 0 is blocked, slots 4-5 are unwritten
    static = StaticKVCache(1, 2, 6, 4, f64)
    ref = m(x, mask=causal_mask(4) & keep[:4])
    close(m(x, cache=static, mask=(causal_mask(4, 6)) & keep), ref, 1e-12)
    with pytest.raises(ValueError, match=re.escape("k.shape[-2]=4 new keys after 4 cached ones must fit max_len=6")):
        m(x, cache=static)
    with pytest.raises(TypeError, match=re.escape("k.dtype=torch.float32, v.dtype=torch.float32 must equal the cache's dtype torch.float64")):
        StaticKVCache(1, 2, 6, 4, f64).append(torch.zeros(1, 2, 1, 4), torch.zeros(1, 2, 1, 4))
    with pytest.raises(ValueError, match=re.escape("must match the buffers (1, 2, 6, 4) in all dims but -2")):
        StaticKVCache(1, 2, 6, 4).append(torch.zeros(2, 2, 1, 4), torch.zeros(2, 2, 1, 4))
    with pytest.raises(ValueError, match="max_len=0 must be a positive int"): StaticKVCache(1, 2, 0, 4)
    with pytest.raises(TypeError, match="dtype=torch.int64 must be a floating torch.dtype"): StaticKVCache(1, 2, 4, 4, torch.int64)

def test_split_and_merge_heads_check_their_input():
    with pytest.raises(ValueError, match=re.escape("n_heads=0 must be a positive int")): split_heads(torch.zeros(2, 3, 8), 0)
    with pytest.raises(ValueError, match=re.escape("x.dim()=2 must be 3: (B, T, H·D)")): split_heads(torch.zeros(3, 8), 2)
    with pytest.raises(ValueError, match=re.escape("x.dim()=3 must be 4: (B, H, T, D)")): merge_heads(torch.zeros(2, 3, 8))
    with pytest.raises(TypeError, match=re.escape("x must be a torch.Tensor, got list")): merge_heads([1.0])


# ---------------------------------------------------------------- bad input at entry: caches, rotary, the projections
def _X(*shape, dtype=torch.float32): return torch.randn(*shape, generator=torch.Generator().manual_seed(0)).to(dtype)

@pytest.mark.parametrize("make", [KVCache, lambda: StaticKVCache(1, 2, 6, 4)], ids=["KVCache", "StaticKVCache"])
@pytest.mark.parametrize("k, v, exc, msg", [
    ("k", _X(1, 2, 3, 4), TypeError, "k must be a torch.Tensor, got str"),
    (_X(1, 2, 3, 4), "v", TypeError, "v must be a torch.Tensor, got str"),
    (_X(3, 4), _X(3, 4), ValueError, "k.dim()=2 must be 4: (B, G, t, D)"),
    (_X(1, 2, 3, 4), _X(2, 3, 4), ValueError, "v.dim()=3 must be 4: (B, G, t, D)"),
    (_X(1, 2, 3, 4).long(), _X(1, 2, 3, 4), TypeError, "k.dtype=torch.int64 must be a floating dtype"),
    (_X(1, 2, 3, 4), _X(1, 2, 2, 4), ValueError, "v.shape=(1, 2, 2, 4) must equal k.shape=(1, 2, 3, 4) in (B, G, t)"),
    (_X(1, 2, 3, 4), _X(1, 2, 3, 4).double(), TypeError, "v.dtype=torch.float64 must equal k.dtype=torch.float32"),
])
def test_cache_append_checks_on_the_first_call(make, k, v, exc, msg):
    c = make()
    with pytest.raises(exc, match="^" + re.escape(msg) + "$"): c.append(k, v)

def test_kv_cache_refuses_a_new_dtype():
    c = KVCache(); c.append(_X(1, 2, 3, 4), _X(1, 2, 3, 4))
    with pytest.raises(TypeError, match=re.escape("k.dtype=torch.float64 must equal the cached keys' dtype torch.float32")):
        c.append(_X(1, 2, 1, 4).double(), _X(1, 2, 1, 4).double())

def test_static_cache_checks_dtype_and_reorder_rows():
    with pytest.raises(TypeError, match=re.escape("dtype=torch.int64 must be a floating torch.dtype, e.g. torch.float32")):
        StaticKVCache(1, 2, 6, 4, dtype=torch.int64)
    c = StaticKVCache(3, 2, 6, 4); c.append(_X(3, 2, 2, 4), _X(3, 2, 2, 4))
    k0 = c.k.clone()
    for rows, exc, msg in ((torch.tensor([0.0, 1.0, 2.0]), TypeError, "rows.dtype=torch.float32 must be an integer dtype"),
                           ([0, 1, 2], TypeError, "rows must be a torch.Tensor, got list"),
                           (torch.tensor([0, 1]), ValueError, "rows.shape=(2,) must be (B,)=(3,)"),
                           (torch.tensor([0, 3, 1]), ValueError, "rows=[0, 3, 1] must lie in [0, B=3)"),
                           (torch.tensor([0, -1, 1]), ValueError, "rows=[0, -1, 1] must lie in [0, B=3)")):
        with pytest.raises(exc, match="^" + re.escape(msg) + "$"): c.reorder(rows)
    torch.testing.assert_close(c.k, k0, rtol=0, atol=0)                  # a refused reorder changes nothing
    c.reorder(torch.tensor([2, 2, 0], dtype=torch.int32))
    torch.testing.assert_close(c.k, k0[[2, 2, 0]], rtol=0, atol=0)

def test_rotary_must_be_callable():
    with pytest.raises(TypeError, match=re.escape("rotary=3 must be callable, rotary(x, positions) -> x (e.g. a RotaryEmbedding), or None")):
        MultiHeadAttention(8, 2, rotary=3)

def test_projections_check_their_inputs():
    torch.manual_seed(0)
    m, c = MultiHeadAttention(8, 2), MultiHeadAttention(8, 2, kdim=3, vdim=5)
    x = _X(1, 3, 8)
    for call, exc, msg in ((lambda: m.project_qkv("x"), TypeError, "query must be a torch.Tensor, got str"),
                           (lambda: m.project_q("x"), TypeError, "query must be a torch.Tensor, got str"),
                           (lambda: m.project_qkv(_X(1, 3, 5)), ValueError, "query.shape[-1]=5 must equal d_model=8"),
                           (lambda: m.project_q(_X(1, 3, 5)), ValueError, "query.shape[-1]=5 must equal d_model=8"),
                           (lambda: m.project_q(x.double()), TypeError, "query.dtype=torch.float64 must equal the module's parameter dtype torch.float32"),
                           (lambda: m.project_qkv(x, "k"), TypeError, "key must be a torch.Tensor, got str"),
                           (lambda: m.project_qkv(x, x, _X(1, 3, 5)), ValueError, "value.shape[-1]=5 must equal vdim=8"),
                           (lambda: c.project_qkv(x, _X(1, 4, 3)), ValueError, "value=None defaults to key, which needs kdim=3 to equal vdim=5: pass value")):
        with pytest.raises(exc, match="^" + re.escape(msg) + "$"): call()
    q, k, v = m.project_qkv(x)                                           # legal calls still work
    # project_q is a (d -> d) matmul with the first d rows of the fused weight; project_qkv's q is a slice of the
    # (d -> 3d) matmul. The same dot products, but BLAS may block and order the length-d sums differently per output
    # width (on Intel Xeon they differ by ~6e-8 here): each is within gamma_(d+1)·(|x||W_q|ᵀ + |b_q|) of the exact
    # value (Higham's dot-product bound, any summation order), so they are within twice that of each other.
    n = m.qkv_widths[0]
    bound = linear_difference_bound(x, m.in_proj.weight[:n], m.in_proj.bias[:n])          # (1, 3, d), element-wise
    assert_within(m.project_q(x), q, split_heads(bound, m.n_heads), "project_q(x) against project_qkv(x)[0]")

def test_static_cache_names_a_bad_device():
    for bad, exc in (("xyz", ValueError), (3.5, TypeError)):
        with pytest.raises(exc, match="^" + re.escape(f"device={bad!r} must be None, a torch.device or a device string such as 'cpu' or 'cuda:0'") + "$"):
            StaticKVCache(1, 2, 6, 4, device=bad)
    assert StaticKVCache(1, 2, 6, 4, device="cpu").k.device == torch.device("cpu")


# -- the short form the chapter shows first equals the shipped module ---------------------------------------------------
class _TinyMHA(nn.Module):
    "Chapter 01's `TinyMHA`, word for word: project, split, attend, merge, project."
    def __init__(self, d_model, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.in_proj = nn.Linear(d_model, 3 * d_model)
        self.out_proj = nn.Linear(d_model, d_model)
    def forward(self, x, is_causal=False):
        q, k, v = self.in_proj(x).chunk(3, dim=-1)
        q, k, v = (split_heads(t, self.n_heads) for t in (q, k, v))
        out = scaled_dot_product_attention(q, k, v, is_causal=is_causal)
        return self.out_proj(merge_heads(out))


@pytest.mark.parametrize("E,H,L", [(16, 4, 7), (24, 3, 1), (32, 8, 113)])
@pytest.mark.parametrize("is_causal", [False, True])
def test_tiny_form_equals_shipped_module(E, H, L, is_causal):
    torch.manual_seed(0)
    shipped = MultiHeadAttention(E, H).double().eval()
    tiny = _TinyMHA(E, H).double()
    tiny.load_state_dict(shipped.state_dict())                       # the same parameter names
    x = torch.randn(2, L, E, dtype=torch.float64)
    torch.testing.assert_close(tiny(x, is_causal=is_causal), shipped(x, is_causal=is_causal), rtol=0, atol=1e-12)
