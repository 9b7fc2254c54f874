"""Tests for transformer_lit.blocks: equality with torch's Transformer layers, the KV cache, causality, bad input."""
import inspect, json
import re
from pathlib import Path
import pytest
import torch
from hypothesis import given, settings, strategies as st
from torch import nn

from transformer_lit.blocks import (BLOCK_ACTIVATIONS, DecoderBlock, DecoderOnlyBlock, EncoderBlock,
                                    make_norm)
from transformer_lit.ffn import FeedForward, SwiGLU
from transformer_lit.masks import causal_mask, combine_masks, from_torch_masks, padding_mask
from transformer_lit.multihead import MultiHeadAttention
from transformer_lit.decoding import CrossKVCache, KVCache      # chapter 10's caches; the blocks take any cache of chapter 01's protocol
from transformer_lit.norm import LayerNorm, RMSNorm
from transformer_lit.positional import RotaryEmbedding, alibi_bias

F64, F32 = torch.float64, torch.float32
TOL = {F64: dict(atol=1e-10, rtol=0), F32: dict(atol=1e-5, rtol=1.3e-6)}
D, H, FF = 16, 4, 24


def torch_layers(norm_first, activation, dtype, bias=True, batch_first=True, dropout=0.1):
    kw = dict(dropout=dropout, activation=activation, norm_first=norm_first, batch_first=batch_first, dtype=dtype, bias=bias)
    return (nn.TransformerEncoderLayer(D, H, FF, **kw).eval(), nn.TransformerDecoderLayer(D, H, FF, **kw).eval())


def inputs(dtype, B=3, S=7, T=5):
    src, tgt = torch.randn(B, S, D, dtype=dtype), torch.randn(B, T, D, dtype=dtype)
    src_pad = ~padding_mask([S, S - 3, 1])      # torch: True = pad
    tgt_pad = ~padding_mask([T, 2, T - 1])
    return src, tgt, src_pad, tgt_pad


# ---------------------------------------------------------------- equality with torch
@pytest.mark.parametrize("dtype", [F64, F32])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_equals_torch(norm_first, activation, dtype):
    torch.manual_seed(0)
    t_enc, _ = torch_layers(norm_first, activation, dtype)
    ours = EncoderBlock.from_torch(t_enc)
    src, _, src_pad, _ = inputs(dtype)
    causal = torch.ones(7, 7, dtype=torch.bool).triu(1)
    for attn_mask, kpm in [(None, None), (None, src_pad), (causal, None), (causal, src_pad)]:
        ref = t_enc(src, src_mask=attn_mask, src_key_padding_mask=kpm)
        out = ours(src, mask=from_torch_masks(attn_mask, kpm))
        torch.testing.assert_close(out, ref, **TOL[dtype])
    torch.testing.assert_close(ours(src, is_causal=True), t_enc(src, src_mask=causal, is_causal=True), **TOL[dtype])


@pytest.mark.parametrize("dtype", [F64, F32])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_equals_torch(norm_first, activation, dtype):
    torch.manual_seed(1)
    _, t_dec = torch_layers(norm_first, activation, dtype)
    ours = DecoderBlock.from_torch(t_dec)
    _, tgt, src_pad, tgt_pad = inputs(dtype)
    memory = torch.randn(3, 7, D, dtype=dtype)
    causal = torch.ones(5, 5, dtype=torch.bool).triu(1)
    ref = t_dec(tgt, memory, tgt_mask=causal, tgt_key_padding_mask=tgt_pad, memory_key_padding_mask=src_pad)
    out = ours(tgt, memory, self_mask=from_torch_masks(causal, tgt_pad), memory_mask=from_torch_masks(key_padding_mask=src_pad))
    torch.testing.assert_close(out, ref, **TOL[dtype])
    # is_causal on ours against the explicit causal mask on theirs, with no padding
    ref = t_dec(tgt, memory, tgt_mask=causal, tgt_is_causal=True)
    torch.testing.assert_close(ours(tgt, memory, is_causal=True), ref, **TOL[dtype])
    # a float (additive) memory mask
    mem_bias = torch.randn(5, 7, dtype=dtype)
    torch.testing.assert_close(ours(tgt, memory, memory_mask=mem_bias), t_dec(tgt, memory, memory_mask=mem_bias), **TOL[dtype])


@pytest.mark.parametrize("norm_first", [False, True])
def test_gradients_equal_torch(norm_first):
    torch.manual_seed(2)
    t_enc, t_dec = torch_layers(norm_first, "gelu", F64)
    o_enc, o_dec = EncoderBlock.from_torch(t_enc), DecoderBlock.from_torch(t_dec)
    src, tgt, src_pad, tgt_pad = inputs(F64)
    causal = torch.ones(5, 5, dtype=torch.bool).triu(1)
    grads = []
    for enc, dec, conv in [(t_enc, t_dec, False), (o_enc, o_dec, True)]:
        s, t = src.clone().requires_grad_(), tgt.clone().requires_grad_()
        if conv:
            mem = enc(s, mask=from_torch_masks(key_padding_mask=src_pad))
            out = dec(t, mem, self_mask=from_torch_masks(causal, tgt_pad), memory_mask=from_torch_masks(key_padding_mask=src_pad))
        else:
            mem = enc(s, src_key_padding_mask=src_pad)
            out = dec(t, mem, tgt_mask=causal, tgt_key_padding_mask=tgt_pad, memory_key_padding_mask=src_pad)
        out.pow(2).sum().backward()
        grads.append((s.grad, t.grad, [p.grad for p in dec.parameters()]))
    torch.testing.assert_close(grads[0][0], grads[1][0], atol=1e-10, rtol=0)
    torch.testing.assert_close(grads[0][1], grads[1][1], atol=1e-10, rtol=0)
    # parameter gradients: compare by total norm (the parameter layouts differ)
    n = lambda gs: torch.sqrt(sum(g.pow(2).sum() for g in gs))
    torch.testing.assert_close(n(grads[0][2]), n(grads[1][2]), atol=1e-9, rtol=0)


def test_torch_fast_path_float32():
    "Under no_grad in eval mode torch may take its fused encoder fast path; ours must still agree."
    torch.manual_seed(3)
    t_enc, _ = torch_layers(False, "relu", F32)
    ours = EncoderBlock.from_torch(t_enc)
    src = torch.randn(2, 6, D)
    with torch.no_grad():
        torch.testing.assert_close(ours(src), t_enc(src), **TOL[F32])


def test_bias_false_and_gelu_tanh_and_not_batch_first():
    torch.manual_seed(4)
    t_enc = nn.TransformerEncoderLayer(D, H, FF, dropout=0.0, activation=nn.GELU(approximate="tanh"), bias=False,
                                       dtype=F64, batch_first=False).eval()
    ours = EncoderBlock.from_torch(t_enc)
    assert ours.ffn.sublayer.activation == "gelu_tanh"
    assert ours.self_attn.norm.bias is None and ours.ffn.sublayer.w1.bias is None
    x = torch.randn(2, 5, D, dtype=F64)                         # ours: (B, T, d)
    ref = t_enc(x.transpose(0, 1)).transpose(0, 1)             # theirs: (T, B, d)
    torch.testing.assert_close(ours(x), ref, atol=1e-10, rtol=0)
    _, t_dec = torch_layers(True, "relu", F64, bias=False, batch_first=False)
    od = DecoderBlock.from_torch(t_dec)
    tgt, mem = torch.randn(2, 4, D, dtype=F64), torch.randn(2, 6, D, dtype=F64)
    ref = t_dec(tgt.transpose(0, 1), mem.transpose(0, 1)).transpose(0, 1)
    torch.testing.assert_close(od(tgt, mem), ref, atol=1e-10, rtol=0)


def test_from_torch_copies_settings():
    t_enc = nn.TransformerEncoderLayer(D, H, FF, dropout=0.25, layer_norm_eps=1e-3, batch_first=True)
    ours = EncoderBlock.from_torch(t_enc)
    assert ours.training and ours.norm_first is False and ours.self_attn.norm.eps == 1e-3
    assert ours.self_attn.sublayer.dropout == 0.25 and ours.ffn.sublayer.dropout.p == 0.25 and ours.ffn.drop.p == 0.25
    assert ours.self_attn.drop.p == 0.25
    assert not EncoderBlock.from_torch(t_enc.eval()).training
    # a GPT block is an encoder layer called causally
    gpt = DecoderOnlyBlock.from_torch(t_enc.eval())
    assert type(gpt) is DecoderOnlyBlock
    x = torch.randn(2, 5, D)
    torch.testing.assert_close(gpt(x, is_causal=True), t_enc(x, src_mask=torch.ones(5, 5).bool().triu(1)), **TOL[F32])


@settings(max_examples=12)
@given(st.integers(1, 3), st.integers(1, 9), st.integers(1, 9), st.sampled_from([1, 2, 4, 8]),
       st.booleans(), st.sampled_from(["relu", "gelu"]))
def test_decoder_equals_torch_any_shape(B, T, S, n_heads, norm_first, activation):
    torch.manual_seed(5)
    t_dec = nn.TransformerDecoderLayer(8, n_heads, 12, dropout=0.0, activation=activation, norm_first=norm_first,
                                       batch_first=True, dtype=F64).eval()
    ours = DecoderBlock.from_torch(t_dec)
    tgt, mem = torch.randn(B, T, 8, dtype=F64), torch.randn(B, S, 8, dtype=F64)
    causal = torch.ones(T, T, dtype=torch.bool).triu(1)
    torch.testing.assert_close(ours(tgt, mem, is_causal=True), t_dec(tgt, mem, tgt_mask=causal), atol=1e-10, rtol=0)


# ---------------------------------------------------------------- training mode, dropout
def test_dropout_active_only_in_training():
    torch.manual_seed(6)
    blk = DecoderOnlyBlock(D, H, FF, dropout=0.5)
    x = torch.randn(2, 5, D)
    assert not torch.allclose(blk(x, is_causal=True), blk(x, is_causal=True))
    blk.eval()
    torch.testing.assert_close(blk(x, is_causal=True), blk(x, is_causal=True), atol=0, rtol=0)   # one call twice: bit-equal


# ---------------------------------------------------------------- gradcheck
def test_gradcheck_blocks():
    torch.manual_seed(7)
    enc = EncoderBlock(8, 2, 12, activation="gelu").double()
    dec = DecoderBlock(8, 2, 12, norm_first=False, norm="rms").double()
    gpt = DecoderOnlyBlock(8, 2, 12, activation="swiglu", rotary=RotaryEmbedding(4)).double()
    x = torch.randn(1, 3, 8, dtype=F64, requires_grad=True)
    mem = torch.randn(1, 2, 8, dtype=F64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x: enc(x, mask=padding_mask([2], 3)[:, None, None, :]), (x,), fast_mode=True)
    assert torch.autograd.gradcheck(lambda x, m: dec(x, m, is_causal=True), (x, mem), fast_mode=True)
    assert torch.autograd.gradcheck(lambda x: gpt(x, is_causal=True), (x,), fast_mode=True)


# ---------------------------------------------------------------- causality
@pytest.mark.parametrize("kind", ["decoder", "decoder_only"])
def test_no_leakage_by_gradients(kind):
    torch.manual_seed(8)
    T = 6
    if kind == "decoder":
        blk = DecoderBlock(8, 2, 12).double()
        mem = torch.randn(2, 4, 8, dtype=F64)
        f = lambda x: blk(x, mem, is_causal=True)
    else:
        blk = DecoderOnlyBlock(8, 2, 12, rotary=RotaryEmbedding(4)).double()
        f = lambda x: blk(x, is_causal=True)
    x = torch.randn(2, T, 8, dtype=F64, requires_grad=True)
    out = f(x)
    r = torch.randn_like(out)
    for t in range(T):
        (g,) = torch.autograd.grad((out[:, t] * r[:, t]).sum(), x, retain_graph=True)
        norms = g.abs().amax(dim=(0, 2))                          # (T,)
        assert torch.all(norms[t + 1:] == 0) and torch.all(norms[:t + 1] > 0)


def test_cross_attention_reads_all_real_memory_and_no_pads():
    torch.manual_seed(9)
    blk = DecoderBlock(8, 2, 12).double()
    tgt = torch.randn(2, 3, 8, dtype=F64)
    mem = torch.randn(2, 5, 8, dtype=F64, requires_grad=True)
    pad = padding_mask([5, 2])[:, None, None, :]
    (g,) = torch.autograd.grad(blk(tgt, mem, is_causal=True, memory_mask=pad).pow(2).sum(), mem)
    per_pos = g.abs().amax(-1)                                    # (B, S)
    assert torch.all(per_pos[0] > 0) and torch.all(per_pos[1, :2] > 0) and torch.all(per_pos[1, 2:] == 0)


# ---------------------------------------------------------------- the KV cache
def run_chunks(blk, x, chunks, bias_fn=None, **kw):
    cache, outs, start = KVCache(), [], 0                         # the caller creates the cache: the blocks create none
    for n in chunks:
        extra = {} if bias_fn is None else dict(attn_bias=bias_fn(n, start + n))
        out = blk(x[:, start:start + n], is_causal=True, cache=cache, **extra, **kw)
        outs.append(out)
        start += n
    return torch.cat(outs, 1), cache


CONFIGS = {
    "post-norm relu": dict(norm_first=False),
    "llama-like": dict(activation="swiglu", norm="rms", bias=False, rotary="rope"),
    "rope interleaved gelu": dict(activation="gelu", rotary="rope-interleaved"),
    "alibi": dict(alibi=True),
}


def build(config, cls=DecoderOnlyBlock):
    cfg = dict(config)
    alibi = cfg.pop("alibi", False)
    rot = cfg.pop("rotary", None)
    rotary = None if rot is None else RotaryEmbedding(D // H, interleaved=rot.endswith("interleaved"))
    blk = cls(D, H, FF, rotary=rotary, **cfg).double().eval()
    bias_fn = (lambda q, k: alibi_bias(H, q, k, dtype=F64)[None]) if alibi else None
    return blk, bias_fn


def check_cached_decoding(name, chunks):
    torch.manual_seed(10)
    blk, bias_fn = build(CONFIGS[name])
    T = sum(chunks)
    x = torch.randn(2, T, D, dtype=F64)
    full = blk(x, is_causal=True, **({} if bias_fn is None else dict(attn_bias=bias_fn(T, T))))
    out, cache = run_chunks(blk, x, chunks, bias_fn)
    assert isinstance(cache, KVCache) and len(cache) == T and cache.k.shape == (2, H, T, D // H)
    torch.testing.assert_close(out, full, atol=1e-10, rtol=0)


@pytest.mark.parametrize("name", list(CONFIGS))
@pytest.mark.parametrize("chunks", [[1, 1, 1], [4, 2, 1, 1], [5]])
def test_cached_decoding_equals_full(name, chunks):
    check_cached_decoding(name, chunks)


@settings(max_examples=10)
@given(name=st.sampled_from(list(CONFIGS)), chunks=st.lists(st.integers(1, 4), min_size=1, max_size=4))
def test_cached_decoding_equals_full_any_chunks(name, chunks):
    check_cached_decoding(name, chunks)


@pytest.mark.parametrize("name", ["post-norm relu", "llama-like"])
def test_decoder_block_cached_decoding_equals_full(name):
    torch.manual_seed(11)
    blk, _ = build(CONFIGS[name], DecoderBlock)
    x, mem = torch.randn(2, 7, D, dtype=F64), torch.randn(2, 4, D, dtype=F64)
    mem_mask = padding_mask([4, 3])[:, None, None, :]
    full = blk(x, mem, is_causal=True, memory_mask=mem_mask)
    out, cache = run_chunks(blk, x, [3, 1, 2, 1], memory=mem, memory_mask=mem_mask)
    assert len(cache) == 7
    torch.testing.assert_close(out, full, atol=1e-10, rtol=0)
    mc = CrossKVCache()                                   # and with the memory's keys/values cached as well
    out2, _ = run_chunks(blk, x, [3, 1, 2, 1], memory=mem, memory_mask=mem_mask, memory_cache=mc)
    torch.testing.assert_close(out2, full, atol=1e-10, rtol=0)
    assert len(mc) == 4 and blk(x[:, :2], torch.full_like(mem, float("nan")), memory_mask=mem_mask, memory_cache=mc).isfinite().all()


def test_cache_with_explicit_mask_and_padding():
    "A left-padded batch: an explicit mask over cache + new keys (causal AND padding) gives the uncached result."
    torch.manual_seed(12)
    blk, _ = build(CONFIGS["post-norm relu"])
    x = torch.randn(2, 6, D, dtype=F64)
    keep = padding_mask([6, 4]).flip(-1)                          # (B, T), pads first
    full_mask = combine_masks(causal_mask(6), keep[:, None, None, :])
    full = blk(x, mask=full_mask)
    cache, outs = KVCache(), []
    for start, end in [(0, 3), (3, 5), (5, 6)]:
        m = combine_masks(causal_mask(end - start, end, "bottom-right"), keep[:, None, None, :end])
        outs.append(blk(x[:, start:end], mask=m, cache=cache))    # appends in place, returns out
    assert len(cache) == 6
    torch.testing.assert_close(torch.cat(outs, 1), full, atol=1e-10, rtol=0)


def test_causal_with_cache_is_bottom_right():
    "A chunk after a cache sees the whole past: equal to one causal pass; a mask with is_causal is refused."
    torch.manual_seed(0)
    blk = DecoderOnlyBlock(D, H, FF).double().eval()
    x = torch.randn(2, 6, D, dtype=torch.float64)
    full = blk(x, is_causal=True)
    c = KVCache()
    out1 = blk(x[:, :2], is_causal=True, cache=c)
    out2 = blk(x[:, 2:], is_causal=True, cache=c)
    torch.testing.assert_close(torch.cat([out1, out2], 1), full, atol=1e-10, rtol=0)
    with pytest.raises(ValueError, match="is_causal=True together with an explicit mask is ambiguous"):
        blk(x[:, :1], mask=torch.ones(1, 7, dtype=torch.bool), is_causal=True, cache=c)


def test_cache_is_explicit_and_blocks_return_only_the_output():
    "The caller's cache is filled in place and the block returns the output alone; without a cache nothing is kept."
    blk = DecoderOnlyBlock(D, H, FF).eval()
    x = torch.randn(1, 3, D)
    cache = KVCache()
    out = blk(x, is_causal=True, cache=cache)
    assert isinstance(out, torch.Tensor) and len(cache) == 3
    assert "use_cache" not in inspect.signature(DecoderOnlyBlock.forward).parameters
    assert "use_cache" not in inspect.signature(DecoderBlock.forward).parameters
    out2 = blk(x, is_causal=True)                               # no cache: nothing kept anywhere
    # the same operations, but the cached keys and values are a view into the cache's longer buffer (other strides), which
    # an attention kernel may block differently: float32 sums of D = 16 terms reordered differ by at most ~16·2^-24 of
    # the largest term (~1e-6 for these O(1) values); 1e-5 is a wide margin on any CPU
    torch.testing.assert_close(out, out2, atol=1e-5, rtol=0)
    assert len(cache) == 3
    with pytest.raises(ValueError, match="is_causal=True together with an explicit mask is ambiguous"):
        blk(x[:, :1], mask=torch.ones(1, 4, dtype=torch.bool), is_causal=True, cache=cache)


# ---------------------------------------------------------------- construction and bad input
def test_construction_choices():
    assert isinstance(EncoderBlock(D, H, FF, activation="swiglu").ffn.sublayer, SwiGLU)
    assert isinstance(EncoderBlock(D, H, activation="gelu").ffn.sublayer, FeedForward)
    assert EncoderBlock(D, H).ffn.sublayer.w1.out_features == 4 * D
    assert isinstance(DecoderBlock(D, H, FF, norm="rms").cross_attn.norm, RMSNorm)
    assert isinstance(DecoderBlock(D, H, FF).ffn.norm, LayerNorm)
    assert make_norm("rms", D, 1e-5).eps == 1e-5 and make_norm("layer", D).eps == 1e-5 and make_norm("rms", D).eps == 1e-6
    assert make_norm("layer", D, bias=False).bias is None
    blk = DecoderBlock(D, H, FF, rotary=RotaryEmbedding(4))
    assert blk.self_attn.sublayer.rotary is not None and blk.cross_attn.sublayer.rotary is None
    assert set(BLOCK_ACTIVATIONS) >= {"relu", "gelu", "swiglu"}


@pytest.mark.parametrize("call,exc,msg", [
    (lambda: EncoderBlock(D, H, FF, activation="tanh"), ValueError,
     r"activation='tanh' must be one of \('swiglu', 'relu', 'gelu', 'gelu_tanh', 'silu'\)"),
    (lambda: DecoderBlock(D, H, FF, norm="batch"), ValueError, "norm='batch' must be one of"),
    (lambda: DecoderOnlyBlock(D, H, FF, norm_first=1), TypeError, "norm_first=1 must be a bool"),
    (lambda: EncoderBlock(10, 3, FF), ValueError, "d_model=10 must be divisible by n_heads=3"),
    (lambda: EncoderBlock(D, H, FF, dropout=1.0), ValueError, r"dropout=1.0 must be a number in \[0, 1\)"),
    (lambda: EncoderBlock(D, H, FF, layer_norm_eps=0.0), ValueError, "eps=0.0 must be a finite number > 0"),
    (lambda: EncoderBlock(D, H, 0), ValueError, "d_ff=0 must be a positive int"),
    (lambda: EncoderBlock.from_torch(nn.TransformerDecoderLayer(D, H, FF)), TypeError,
     "layer must be an nn.TransformerEncoderLayer, got TransformerDecoderLayer"),
    (lambda: DecoderBlock.from_torch(nn.Linear(2, 2)), TypeError, "layer must be an nn.TransformerDecoderLayer, got Linear"),
    (lambda: EncoderBlock.from_torch(nn.TransformerEncoderLayer(D, H, FF, activation=torch.tanh)), ValueError,
     "must be relu or gelu"),
])
def test_bad_construction(call, exc, msg):
    with pytest.raises(exc, match=msg):
        call()


def test_bad_forward_input():
    dec = DecoderBlock(D, H, FF)
    x = torch.randn(2, 3, D)
    with pytest.raises(TypeError, match="memory must be a torch.Tensor, got NoneType"):
        dec(x, None)
    with pytest.raises(ValueError, match=r"memory.shape=\(2, 4, 8\) must be \(B, T, d_model=16\)"):
        dec(x, torch.randn(2, 4, 8))
    with pytest.raises(ValueError, match=r"memory.shape\[0\]=1 must equal x.shape\[0\]=2 \(batch\)"):
        dec(x, torch.randn(1, 4, D))
    gpt = DecoderOnlyBlock(D, H, FF)
    with pytest.raises(ValueError, match=r"x.shape=\(2, 3, 8\) must be \(B, T, d_model=16\)"):
        gpt(torch.randn(2, 3, 8), is_causal=True, cache=KVCache())
    with pytest.raises(ValueError, match=r"x.shape=\(3, 16\) must be \(B, T, d_model=16\)"):
        EncoderBlock(D, H, FF)(torch.randn(3, D))
    with pytest.raises(TypeError, match="x must be a torch.Tensor, got list"):
        DecoderBlock(D, H, FF)([1.0], x)
    with pytest.raises(TypeError, match=re.escape("cache must be None or an object with start, append and key_mask (chapter 10's KVCache or CrossKVCache, chapter 11's StaticKVCache), got dict")):
        gpt(x, cache={})
    with pytest.raises(ValueError, match=r"mask.shape=\(4, 4\) must be broadcastable to \(\.\.\., Lq, Lk\)=\(2, 4, 3, 3\)"):
        EncoderBlock(D, H, FF)(x, mask=causal_mask(4))


# ---------------------------------------------------------------- grouped-query attention in the blocks
def repeated_kv_state(gqa_block, n_rep):
    "The state dict of an MHA block equal to `gqa_block`: every K/V head of each fused in_proj repeated n_rep times."
    sd = {}
    for name, t in gqa_block.state_dict().items():
        if name.endswith("in_proj.weight") or name.endswith("in_proj.bias"):
            d_head = gqa_block.d_model // gqa_block.n_heads
            q, kv = t[:gqa_block.d_model], t[gqa_block.d_model:]
            k, v = kv.chunk(2, 0)                                               # (G·D, ...) each
            rep = lambda w: w.reshape(-1, d_head, *w.shape[1:]).repeat_interleave(n_rep, 0).reshape(-1, *w.shape[1:])
            t = torch.cat([q, rep(k), rep(v)], 0)                               # (3·H·D, ...)
        sd[name] = t
    return sd


@pytest.mark.parametrize("cls", [EncoderBlock, DecoderOnlyBlock, DecoderBlock])
@pytest.mark.parametrize("G", [1, 2])
@pytest.mark.parametrize("qkv_bias", [None, True])
def test_gqa_block_equals_mha_with_repeated_kv(cls, G, qkv_bias):
    torch.manual_seed(20)
    kw = dict(activation="swiglu", norm="rms", bias=False) if qkv_bias else {}
    gqa = cls(D, H, FF, n_kv_heads=G, qkv_bias=qkv_bias, **kw).double().eval()
    mha = cls(D, H, FF, qkv_bias=qkv_bias, **kw).double().eval()
    mha.load_state_dict(repeated_kv_state(gqa, H // G))
    assert gqa.n_kv_heads == G and mha.n_kv_heads == H
    x, mem = torch.randn(2, 6, D, dtype=F64), torch.randn(2, 5, D, dtype=F64)
    args = (x, mem) if cls is DecoderBlock else (x,)
    torch.testing.assert_close(gqa(*args, is_causal=True), mha(*args, is_causal=True), atol=1e-12, rtol=0)
    n_bias = 2 if qkv_bias or kw.get("bias", True) else 0
    attn = gqa.self_attn.sublayer
    assert sum(p.numel() for p in attn.parameters()) == D * (H + 2 * G) * (D // H) + H * (D // H) * D + \
        (H + 2 * G) * (D // H) * (qkv_bias or kw.get("bias", True)) + D * kw.get("bias", True)


@pytest.mark.parametrize("G", [1, 2, H])
@pytest.mark.parametrize("name", ["llama-like", "alibi", "post-norm relu"])
def test_gqa_cached_decoding_equals_full(name, G):
    torch.manual_seed(21)
    blk, bias_fn = build({**CONFIGS[name], "n_kv_heads": G})
    x = torch.randn(2, 8, D, dtype=F64)
    full = blk(x, is_causal=True, **({} if bias_fn is None else dict(attn_bias=bias_fn(8, 8))))
    out, cache = run_chunks(blk, x, [3, 1, 4], bias_fn)
    assert cache.k.shape == cache.v.shape == (2, G, 8, D // H)                 # (B, G, T, D)
    assert cache.nbytes() == 2 * 2 * G * 8 * (D // H) * 8
    torch.testing.assert_close(out, full, atol=1e-10, rtol=0)


@pytest.mark.parametrize("G", [1, 2, H])
def test_gqa_decoder_block_caches_hold_g_heads(G):
    torch.manual_seed(22)
    blk = DecoderBlock(D, H, FF, n_kv_heads=G).double().eval()
    x, mem = torch.randn(2, 7, D, dtype=F64), torch.randn(2, 4, D, dtype=F64)
    full = blk(x, mem, is_causal=True)
    mc = CrossKVCache()
    out, cache = run_chunks(blk, x, [3, 1, 3], memory=mem, memory_cache=mc)
    torch.testing.assert_close(out, full, atol=1e-10, rtol=0)
    assert cache.k.shape == (2, G, 7, D // H) and mc.k.shape == (2, G, 4, D // H)


@pytest.mark.parametrize("cls", [EncoderBlock, DecoderBlock, DecoderOnlyBlock])
@pytest.mark.parametrize("kw,exc,msg", [
    (dict(n_kv_heads=3), ValueError, "n_kv_heads=3 must divide n_heads=4"),
    (dict(n_kv_heads=8), ValueError, "n_kv_heads=8 must divide n_heads=4"),
    (dict(n_kv_heads=0), ValueError, "n_kv_heads=0 must be a positive int"),
    (dict(n_kv_heads=-2), ValueError, "n_kv_heads=-2 must be a positive int"),
    (dict(n_kv_heads=True), TypeError, "n_kv_heads=True must be a positive int"),
])
def test_gqa_bad_n_kv_heads(cls, kw, exc, msg):
    with pytest.raises(exc, match=re.escape(msg)): cls(D, H, FF, **kw)

@pytest.mark.parametrize("dtype", [torch.int64, torch.bool])
def test_blocks_refuse_non_floating_and_mismatched_dtypes(dtype):
    x = torch.randn(2, 3, D)
    enc, gpt, dec = EncoderBlock(D, H, FF), DecoderOnlyBlock(D, H, FF), DecoderBlock(D, H, FF)
    for call in (lambda: enc(x.to(dtype)), lambda: gpt(x.to(dtype)), lambda: dec(x.to(dtype), x)):
        with pytest.raises(TypeError, match=re.escape(f"x.dtype={dtype} must be a floating dtype")): call()
    with pytest.raises(TypeError, match=re.escape(f"memory.dtype={dtype} must be a floating dtype")): dec(x, x.to(dtype))
    for call in (lambda: enc(x.double()), lambda: gpt(x.double()), lambda: dec(x.double(), x.double())):
        with pytest.raises(TypeError, match=re.escape("x.dtype=torch.float64 must equal the module's parameter dtype torch.float32")): call()
    with pytest.raises(TypeError, match=re.escape("memory.dtype=torch.float64 must equal the module's parameter dtype torch.float32")):
        dec(x, x.double())
    for blk in (enc, gpt): assert blk(torch.zeros(0, 3, D)).shape == (0, 3, D)
    assert dec(torch.zeros(0, 3, D), torch.zeros(0, 5, D)).shape == (0, 3, D)


# ---------------------------------------------------------------- bad input named by the block's own arguments
def test_make_norm_names_its_arguments():
    with pytest.raises(ValueError, match=re.escape("d_model=0 must be a positive int")): make_norm("layer", 0)
    with pytest.raises(TypeError, match=re.escape("d_model=8.0 must be a positive int")): make_norm("rms", 8.0)
    with pytest.raises(ValueError, match=re.escape("norm='batch' must be one of ('layer', 'rms')")): make_norm("batch", 0)
    assert isinstance(make_norm("rms", 8), RMSNorm) and isinstance(make_norm("layer", 8, 1e-3), LayerNorm)

@pytest.mark.parametrize("cls", [EncoderBlock, DecoderBlock, DecoderOnlyBlock])
def test_blocks_name_layer_norm_eps_and_rotary(cls):
    for eps in (0, -1e-5, float("nan"), "1e-5"):
        with pytest.raises(TypeError if isinstance(eps, str) else ValueError, match="^" + re.escape(f"layer_norm_eps={eps!r} must be a finite number > 0")):
            cls(8, 2, layer_norm_eps=eps)
    with pytest.raises(TypeError, match=re.escape("rotary=3 must be callable")): cls(8, 2, rotary=3)

def test_decoder_block_names_memory_cache():
    torch.manual_seed(0)
    blk = DecoderBlock(8, 2, 16).eval()
    x = torch.randn(1, 3, 8)
    with pytest.raises(TypeError, match="^" + re.escape("memory_cache must be None or an object with start, append and key_mask (chapter 10's KVCache or CrossKVCache, chapter 11's StaticKVCache), got str")):
        blk(x, x, memory_cache="c")
    with pytest.raises(TypeError, match="^" + re.escape("memory_cache must be None or a cache of the memory's keys and values, with memory_kv (chapter 10's CrossKVCache), got KVCache")):
        blk(x, x, memory_cache=KVCache())
    mc = CrossKVCache(); blk(x, x, memory_cache=mc); assert len(mc) == 3


# ---------------------------------------------------------------- the first forms of chapter 08 equal the shipped blocks
def _chapter_08_first_forms():
    "The first forms chapter 08 shows (its cell `b08tiny1`), run from the notebook's own text: no copy to drift."
    nb = json.loads((Path(__file__).resolve().parent.parent / "nbs" / "08_cross_attention.ipynb").read_text(encoding="utf-8"))
    src = "".join(next(c["source"] for c in nb["cells"] if c.get("id") == "b08tiny1"))
    ns = dict(nn=nn, LayerNorm=LayerNorm, MultiHeadAttention=MultiHeadAttention, FeedForward=FeedForward)
    exec(compile(src, "08_cross_attention.ipynb#b08tiny1", "exec"), ns)
    return ns["TinyEncoderBlock"], ns["TinyDecoderOnlyBlock"], ns["TinyDecoderBlock"]

TinyEncoderBlock, TinyDecoderOnlyBlock, TinyDecoderBlock = _chapter_08_first_forms()


def tiny_state(block):
    "The state dict of a shipped block under the names of its first form (ln_1, attn, ln_2, cross, ln_3, mlp)."
    parts = ["self_attn", "cross_attn", "ffn"] if isinstance(block, DecoderBlock) else ["self_attn", "ffn"]
    short = {"self_attn": "attn", "cross_attn": "cross", "ffn": "mlp"}
    out = {}
    for key, value in block.state_dict().items():
        part, kind, rest = key.split(".", 2)
        out[f"ln_{parts.index(part) + 1}.{rest}" if kind == "norm" else f"{short[part]}.{rest}"] = value
    return out


@pytest.mark.parametrize("norm_first", [True, False])
@pytest.mark.parametrize("B,T,S,d,h,ff", [(1, 1, 1, 8, 2, 16), (2, 7, 5, 16, 4, 24), (3, 13, 9, 24, 3, 40)])
def test_first_forms_equal_shipped_blocks(norm_first, B, T, S, d, h, ff):
    torch.manual_seed(0)
    x, memory = torch.randn(B, T, d, dtype=F64), torch.randn(B, S, d, dtype=F64)
    mem_mask = padding_mask([S] + [max(1, S - 2 - i) for i in range(B - 1)], S)[:, None, None, :]
    src_mask = padding_mask([T] + [max(1, T - 3)] * (B - 1), T)[:, None, None, :]
    cases = [(EncoderBlock, TinyEncoderBlock, (x,), dict(mask=src_mask), dict(mask=src_mask)),
             (DecoderOnlyBlock, TinyDecoderOnlyBlock, (x,), dict(is_causal=True), {}),
             (DecoderBlock, TinyDecoderBlock, (x, memory), dict(is_causal=True, memory_mask=mem_mask), dict(memory_mask=mem_mask))]
    for Shipped, Tiny, args, kw, tiny_kw in cases:
        shipped, tiny = Shipped(d, h, ff, norm_first=norm_first).double(), Tiny(d, h, ff, norm_first).double()
        tiny.load_state_dict(tiny_state(shipped))            # strict: every parameter has its place
        torch.testing.assert_close(tiny(*args, **tiny_kw), shipped(*args, **kw), **TOL[F64])


def test_first_forms_differ_when_the_norm_moves():
    "The equality above is not vacuous: the first form with the other norm placement gives other numbers."
    torch.manual_seed(0)
    x = torch.randn(2, 5, D, dtype=F64)
    shipped = EncoderBlock(D, H, FF, norm_first=True).double()
    tiny = TinyEncoderBlock(D, H, FF, norm_first=False).double()
    tiny.load_state_dict(tiny_state(shipped))
    assert (tiny(x) - shipped(x)).abs().max() > 1e-3
