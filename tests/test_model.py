"""Tests for transformer_lit.model: config, embeddings, tying, parameter counts, TransformerStack vs nn.Transformer,
Transformer and DecoderOnlyLM, sampling, and cached == uncached generation."""
import dataclasses, math, re
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from hypothesis import given, strategies as st
from torch.autograd import gradcheck
from torch.func import functional_call

from transformer_lit.masks import padding_mask
from transformer_lit.model import (POSITIONALS, DecoderOnlyLM, Positions, TokenEmbedding, Transformer,
                                   TransformerConfig, TransformerStack, count_parameters, lm_loss, parameter_breakdown, unembed)
from transformer_lit.checks import check_targets, check_tokens
from transformer_lit.decoding import DecoderCache, sample_next
from transformer_lit.fast_decoding import StaticCache
from transformer_lit.positional import sinusoidal_encoding
from transformer_lit.model import assert_greedy_agrees
from transformer_lit.decoding import lm_generate, seq2seq_generate, lm_beam_search, seq2seq_beam_search, new_cache
from transformer_lit.fast_decoding import fast_generate, new_static_cache

F64 = torch.float64

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny ops: one thread (tests/conftest.py)
TINY = TransformerConfig(vocab_size=40, d_model=16, n_heads=4, n_layers=2, d_ff=32, max_len=32, dropout=0.0)

def tiny(**kw): return dataclasses.replace(TINY, **kw)

def meta(cls, **kw):
    with torch.device("meta"): return cls(TransformerConfig(**kw))

def lm64(seed=0, **kw):
    torch.manual_seed(seed)
    return DecoderOnlyLM(tiny(**kw)).double().eval()

def s2s64(seed=0, **kw):
    torch.manual_seed(seed)
    return Transformer(tiny(**kw)).double().eval()

# ---------------------------------------------------------------- parameter counts (exact, on the meta device)
VASWANI = dict(vocab_size=37000, norm_first=False, final_norm=False)
GPT2 = dict(vocab_size=50257, d_model=768, n_heads=12, n_layers=12, d_ff=3072, max_len=1024, positional="learned",
            activation="gelu_tanh", scale_embeddings=False)
LLAMA7B = dict(vocab_size=32000, d_model=4096, n_heads=32, n_layers=32, d_ff=11008, max_len=2048, positional="rope",
               norm="rms", activation="swiglu", bias=False, scale_embeddings=False)

def test_transformer_base_and_big_counts():
    assert count_parameters(meta(Transformer, **VASWANI)) == 63_082_496
    assert count_parameters(meta(Transformer, d_model=1024, n_heads=16, d_ff=4096, **VASWANI)) == 214_245_376

def test_nn_transformer_default_count():
    with torch.device("meta"): assert count_parameters(nn.Transformer()) == 44_140_544
    assert count_parameters(meta(TransformerStack, vocab_size=1, norm_first=False)) == 44_140_544

def test_gpt2_small_and_medium_counts():
    assert count_parameters(meta(DecoderOnlyLM, **GPT2)) == 124_439_808
    medium = dict(GPT2, d_model=1024, n_heads=16, n_layers=24, d_ff=4096)
    assert count_parameters(meta(DecoderOnlyLM, **medium)) == 354_823_168

def test_llama7b_shape_tied_and_untied():
    untied = count_parameters(meta(DecoderOnlyLM, tie_embeddings=False, **LLAMA7B))
    tied = count_parameters(meta(DecoderOnlyLM, tie_embeddings=True, **LLAMA7B))
    assert untied == 6_738_415_616
    assert untied - tied == 32000 * 4096 == 131_072_000

def test_count_parameters_counts_tied_tensor_once_and_skips_frozen():
    m = DecoderOnlyLM(TINY)
    assert m.lm_head.weight is m.tok.weight
    naive = sum(p.numel() for _, p in m.named_parameters(remove_duplicate=False))
    assert naive - count_parameters(m) == 40 * 16
    m.tok.weight.requires_grad_(False)
    assert count_parameters(m) == sum(p.numel() for n, p in m.named_parameters() if n != "tok.weight")

def test_seq2seq_shared_vocab_ties_three_uses():
    t = Transformer(TINY)
    assert t.src_embed is t.tgt_embed and t.lm_head.weight is t.tgt_embed.weight
    untied = Transformer(tiny(tie_embeddings=False))
    assert untied.src_embed is not untied.tgt_embed
    assert count_parameters(untied) - count_parameters(t) == 2 * 40 * 16
    sep = Transformer(tiny(src_vocab_size=7))
    assert sep.src_embed.weight.shape == (7, 16) and sep.lm_head.weight is sep.tgt_embed.weight

@pytest.mark.parametrize("cls", [DecoderOnlyLM, Transformer])
@pytest.mark.parametrize("kw", [dict(VASWANI), dict(GPT2), dict(LLAMA7B, n_layers=2), dict(VASWANI, tie_embeddings=False, src_vocab_size=99)])
def test_parameter_breakdown_sums_to_count(cls, kw):
    m = meta(cls, **kw)
    parts = parameter_breakdown(m)
    assert sum(parts.values()) == count_parameters(m)
    d, V = kw.get("d_model", 512), kw["vocab_size"]
    assert parts["unembedding"] == (0 if kw.get("tie_embeddings", True) else V * d)
    assert parts["positions"] == (kw["max_len"] * d if kw.get("positional") == "learned" else 0)

def test_meta_build_for_every_positional():
    for kind in POSITIONALS:
        for cls in (DecoderOnlyLM, Transformer):
            assert count_parameters(meta(cls, vocab_size=100, d_model=64, n_heads=4, positional=kind)) > 0

# ---------------------------------------------------------------- embeddings and positions
def test_token_embedding_scaling_and_init():
    torch.manual_seed(0)
    e = TokenEmbedding(3000, 256)
    ids = torch.randint(0, 3000, (2, 5))
    torch.testing.assert_close(e(ids), e.weight[ids] * 16.0, rtol=0, atol=0)   # a gather, then x √256 = x 16: exact
    assert abs(e.weight.std().item() - 256 ** -0.5) < 2e-3
    e2 = TokenEmbedding(3000, 256, scale=False)
    torch.testing.assert_close(e2(ids), e2.weight[ids], rtol=0, atol=0)
    assert abs(e2.weight.std().item() - 0.02) < 1e-3

def test_sinusoidal_and_learned_positions_added_with_offset():
    lm = lm64()
    ids = torch.randint(0, 40, (1, 6))
    x = lm.tok(ids)
    torch.testing.assert_close(lm.pos(x, offset=3), x + sinusoidal_encoding(9, 16, dtype=F64)[3:], rtol=0, atol=1e-15)
    lml = lm64(positional="learned")
    torch.testing.assert_close(lml.pos(x, offset=2), x + lml.pos.absolute.weight[2:8], rtol=0, atol=0)

def test_positions_hold_the_right_pieces():
    assert Positions(tiny(positional="rope")).rotary is not None
    assert Positions(tiny()).rotary is None and len(Positions(tiny()).state_dict()) == 0
    b = Positions(tiny(positional="alibi")).bias(2, 5, torch.zeros(1, dtype=F64))
    assert b.shape == (1, 4, 2, 5) and b.dtype == F64
    assert Positions(tiny(positional="none")).bias(2, 5, torch.zeros(1)) is None

def test_rope_is_shared_by_all_blocks_and_has_no_parameters():
    lm = DecoderOnlyLM(tiny(positional="rope"))
    assert all(b.self_attn.sublayer.rotary is lm.pos.rotary for b in lm.blocks)
    assert count_parameters(lm) == count_parameters(DecoderOnlyLM(tiny(positional="none")))

# ---------------------------------------------------------------- TransformerStack vs nn.Transformer
def _torch_pair(dtype, norm_first, activation, n_enc=2, n_dec=3, batch_first=True, seed=0):
    torch.manual_seed(seed)
    ref = nn.Transformer(d_model=32, nhead=4, num_encoder_layers=n_enc, num_decoder_layers=n_dec, dim_feedforward=48,
                         dropout=0.0, activation=activation, batch_first=batch_first, norm_first=norm_first).to(dtype).eval()
    return ref, TransformerStack.from_torch(ref)

@pytest.mark.parametrize("dtype,tol", [(F64, 1e-10), (torch.float32, 1e-5)])
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_stack_equals_nn_transformer(dtype, tol, norm_first, activation):
    ref, ours = _torch_pair(dtype, norm_first, activation)
    torch.manual_seed(1)
    src, tgt = torch.randn(3, 7, 32, dtype=dtype), torch.randn(3, 5, 32, dtype=dtype)
    lengths = [7, 3, 5]
    pad = ~padding_mask(lengths, 7)
    keep = padding_mask(lengths, 7)[:, None, None, :]
    with torch.no_grad():
        expected = ref(src, tgt, tgt_mask=nn.Transformer.generate_square_subsequent_mask(5, dtype=dtype), tgt_is_causal=True,
                       src_key_padding_mask=pad, memory_key_padding_mask=pad)
        got = ours(src, tgt, src_mask=keep, memory_mask=keep)
        torch.testing.assert_close(got, expected, rtol=0 if dtype == F64 else 1.3e-6, atol=tol)
        mem_ref = ref.encoder(src, src_key_padding_mask=pad)
        mem = ours.encode(src, keep)
        real = padding_mask(lengths, 7)
        torch.testing.assert_close(mem[real], mem_ref[real], rtol=0 if dtype == F64 else 1.3e-6, atol=tol)
    assert count_parameters(ours) == count_parameters(ref)

def test_stack_from_torch_seq_first_and_unequal_depths():
    ref, ours = _torch_pair(F64, False, "relu", n_enc=1, n_dec=2, batch_first=False)
    assert (len(ours.encoder), len(ours.decoder)) == (1, 2)
    src, tgt = torch.randn(6, 2, 32, dtype=F64), torch.randn(4, 2, 32, dtype=F64)   # torch: (T, B, E)
    with torch.no_grad():
        expected = ref(src, tgt, tgt_mask=nn.Transformer.generate_square_subsequent_mask(4, dtype=F64))
        got = ours(src.transpose(0, 1), tgt.transpose(0, 1))
    torch.testing.assert_close(got, expected.transpose(0, 1), rtol=0, atol=1e-10)

def test_stack_without_causal_matches_torch_without_mask():
    ref, ours = _torch_pair(F64, True, "gelu")
    src, tgt = torch.randn(2, 5, 32, dtype=F64), torch.randn(2, 4, 32, dtype=F64)
    with torch.no_grad():
        torch.testing.assert_close(ours(src, tgt, tgt_is_causal=False), ref(src, tgt), rtol=0, atol=1e-10)

def test_stack_from_torch_keeps_training_mode_and_rejects_other_modules():
    ref = nn.Transformer(d_model=16, nhead=2, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=8, batch_first=True)
    assert TransformerStack.from_torch(ref).training
    with pytest.raises(TypeError, match=re.escape("m must be an nn.Transformer, got Linear")):
        TransformerStack.from_torch(nn.Linear(2, 2))

# ---------------------------------------------------------------- forward passes
def test_lm_shapes_probabilities_and_loss():
    lm = lm64()
    idx = torch.randint(0, 40, (3, 9))
    logits = lm(idx)
    assert logits.shape == (3, 9, 40) and logits.dtype == F64
    torch.testing.assert_close(logits.softmax(-1).sum(-1), torch.ones(3, 9, dtype=F64))
    tgt = torch.randint(0, 40, (3, 9)); tgt[0, 4:] = -100
    out, loss = lm(idx, targets=tgt)
    torch.testing.assert_close(out, logits, rtol=0, atol=0)
    keep = tgt != -100
    expected = -(logits.log_softmax(-1).gather(-1, tgt.clamp_min(0)[..., None]).squeeze(-1))[keep].mean()
    torch.testing.assert_close(loss, expected, rtol=0, atol=1e-12)

def test_lm_loss_upcasts_and_checks_targets():
    logits = torch.randn(2, 3, 5).half()
    assert lm_loss(logits, torch.zeros(2, 3, dtype=torch.long)).dtype == torch.float32
    with pytest.raises(ValueError, match=re.escape("targets.shape=(2, 4) must equal (B, T)=(2, 3)")):
        lm_loss(logits, torch.zeros(2, 4, dtype=torch.long))

@pytest.mark.parametrize("kind", POSITIONALS)
def test_lm_is_causal(kind):
    lm = lm64(positional=kind)
    idx = torch.randint(0, 40, (2, 10))
    a = lm(idx)
    idx2 = idx.clone(); idx2[:, 6:] = (idx2[:, 6:] + 1) % 40
    b = lm(idx2)
    # the same ops on the same shapes, and a masked key's weight is exactly 0 (exp(-inf)): positions < 6 see the same numbers
    torch.testing.assert_close(a[:, :6], b[:, :6], rtol=0, atol=0)
    assert not torch.allclose(a[:, 6:], b[:, 6:])

@pytest.mark.parametrize("kind", POSITIONALS)
def test_order_reaches_the_last_token(kind):
    lm = lm64(positional=kind, n_layers=1)
    a, b = lm(torch.tensor([[1, 2, 3, 4]]))[:, -1], lm(torch.tensor([[3, 2, 1, 4]]))[:, -1]
    if kind == "none":      # one causal layer without positions: the last token sees an unordered set
        torch.testing.assert_close(a, b, rtol=0, atol=1e-12)
    else:
        assert not torch.allclose(a, b)

def test_without_positions_causality_still_leaks_order_after_two_layers():
    lm = lm64(positional="none", n_layers=2)
    a, b = lm(torch.tensor([[1, 2, 3, 4]]))[:, -1], lm(torch.tensor([[3, 2, 1, 4]]))[:, -1]
    assert not torch.allclose(a, b)     # earlier tokens saw different prefixes in layer 1

def test_seq2seq_padding_is_never_read():
    t = s2s64()
    src = torch.randint(1, 40, (2, 6)); tgt = torch.randint(1, 40, (2, 4))
    keep = padding_mask([3, 6], 6)
    out = t(src, tgt, src_keep=keep)
    junk = src.clone(); junk[0, 3:] = torch.tensor([5, 6, 7])
    torch.testing.assert_close(t(junk, tgt, src_keep=keep), out, rtol=0, atol=1e-12)
    # pad_id builds the same masks from the ids
    tp = s2s64(pad_id=0)
    src0 = src.clone(); src0[0, 3:] = 0
    torch.testing.assert_close(tp(src0, tgt), out, rtol=0, atol=1e-12)

def test_seq2seq_target_padding_leaves_real_positions_alone():
    t = s2s64(pad_id=0)
    src = torch.randint(1, 40, (1, 5))
    tgt = torch.tensor([[1, 7, 8, 0, 0]])
    full = t(src, tgt)
    torch.testing.assert_close(full[:, :3], t(src, tgt[:, :3]), rtol=0, atol=1e-12)

def test_seq2seq_loss_and_decoder_causality():
    t = s2s64()
    src, tgt = torch.randint(0, 40, (2, 5)), torch.randint(0, 40, (2, 6))
    logits, loss = t(src, tgt, targets=tgt.roll(-1, 1))
    torch.testing.assert_close(loss, F.cross_entropy(logits.flatten(0, 1), tgt.roll(-1, 1).flatten()), rtol=0, atol=1e-12)
    tgt2 = tgt.clone(); tgt2[:, 4:] = (tgt2[:, 4:] + 3) % 40
    torch.testing.assert_close(t(src, tgt2)[:, :4], logits[:, :4], rtol=0, atol=0)   # exact, as in test_lm_is_causal

def test_tying_adds_both_gradients():
    torch.manual_seed(0)
    tied = DecoderOnlyLM(TINY).double()
    untied = DecoderOnlyLM(tiny(tie_embeddings=False, logit_scale=TINY.output_scale)).double()   # the same output scale
    untied.load_state_dict({**tied.state_dict(), "lm_head.weight": tied.tok.weight.detach().clone()})
    ids = torch.randint(0, 40, (2, 7))
    for m in (tied, untied): m(ids[:, :-1], targets=ids[:, 1:])[1].backward()
    torch.testing.assert_close(tied.tok.weight.grad, untied.tok.weight.grad + untied.lm_head.weight.grad, rtol=0, atol=1e-12)

@pytest.mark.parametrize("kind", ["rope", "alibi", "learned"])
def test_gradcheck_lm_wrt_embedding(kind):
    lm = lm64(positional=kind, n_layers=1, d_model=8, n_heads=2, d_ff=8, vocab_size=6)
    ids = torch.tensor([[0, 3, 5, 1]])
    w = lm.tok.weight.detach().clone().requires_grad_(True)
    f = lambda w: functional_call(lm, {"tok.weight": w}, (ids[:, :-1],), {"targets": ids[:, 1:]})[1]
    assert gradcheck(f, (w,), eps=1e-6, atol=1e-8)

def test_gradcheck_seq2seq_wrt_embedding():
    t = s2s64(n_layers=1, d_model=8, n_heads=2, d_ff=8, vocab_size=6)
    src, tgt = torch.tensor([[1, 2, 3]]), torch.tensor([[0, 4, 5]])
    w = t.tgt_embed.weight.detach().clone().requires_grad_(True)
    tied = {"tgt_embed.weight": w, "src_embed.weight": w, "lm_head.weight": w}     # one matrix, three names
    f = lambda w: functional_call(t, {k: w for k in tied}, (src, tgt), {"targets": tgt.roll(-1, 1)})[1]
    assert gradcheck(f, (w,), eps=1e-6, atol=1e-8)

def test_gradcheck_stack_wrt_inputs():
    ref, ours = _torch_pair(F64, True, "gelu", n_enc=1, n_dec=1)
    src = torch.randn(1, 2, 32, dtype=F64, requires_grad=True)
    tgt = torch.randn(1, 1, 32, dtype=F64, requires_grad=True)
    keep = torch.tensor([[True, False]])[:, None, None, :]
    assert gradcheck(lambda s, t: ours(s, t, src_mask=keep, memory_mask=keep), (src, tgt), eps=1e-6, atol=1e-8)

# ---------------------------------------------------------------- KV cache: cached == uncached
CACHE_CONFIGS = [dict(positional=k) for k in POSITIONALS] + [
    dict(positional="rope", norm_first=False), dict(positional="alibi", norm="rms", activation="swiglu", bias=False, d_ff=None),
    dict(positional="learned", activation="gelu_tanh", scale_embeddings=False)]

@pytest.mark.parametrize("kw", CACHE_CONFIGS, ids=lambda kw: "-".join(f"{v}" for v in kw.values()))
def test_cached_logits_equal_full_forward(kw):
    lm = lm64(**kw)
    idx = torch.randint(0, 40, (2, 12))
    full = lm(idx)
    cache = new_cache(lm)
    parts = [lm(idx[:, :5], cache=cache)] + [lm(idx[:, t:t + 1], cache=cache) for t in range(5, 12)]
    assert len(cache) == 12
    torch.testing.assert_close(torch.cat(parts, 1), full, rtol=0, atol=1e-10)

@pytest.mark.parametrize("kw", CACHE_CONFIGS, ids=lambda kw: "-".join(f"{v}" for v in kw.values()))
def test_cached_generation_equals_uncached(kw):
    lm = lm64(**kw)
    prompt = torch.randint(0, 40, (2, 3))
    # cached and uncached decoding are different computations (one-token steps against full forwards): their float64
    # logits agree within 1e-10 (test_cached_logits_equal_full_forward), so the greedy tokens agree wherever the top-2 gap is clear
    assert_greedy_agrees(lm, fast_generate(lm, prompt, 12, greedy=True), lm_generate(lm, prompt, 12, greedy=True, use_cache=False), 3, atol=1e-10)
    runs = [lm_generate(lm, prompt, 12, temperature=1.5, top_k=10, generator=torch.Generator().manual_seed(5), use_cache=c)
            for c in (True, False)]
    # seeded sampling draws the same uniforms on both paths; a token could differ only if a draw fell within ~1e-10 of a
    # boundary of the cumulative probabilities (chance ~1e-9 over these 24 draws, on any CPU): exact comparison is safe
    assert torch.equal(runs[0], runs[1])

LMS = {k: lm64(positional=k) for k in ("rope", "alibi", "sinusoidal")}

@given(prompt_len=st.integers(1, 6), chunks=st.lists(st.integers(1, 4), min_size=1, max_size=4),
       kind=st.sampled_from(["rope", "alibi", "sinusoidal"]))
def test_cache_any_chunking(prompt_len, chunks, kind):
    lm = LMS[kind]
    total = prompt_len + sum(chunks)
    idx = torch.randint(0, 40, (1, total), generator=torch.Generator().manual_seed(total))
    cache, outs, t = new_cache(lm), [], 0
    for n in [prompt_len, *chunks]:
        outs.append(lm(idx[:, t:t + n], cache=cache)); t += n
    torch.testing.assert_close(torch.cat(outs, 1), lm(idx), rtol=0, atol=1e-10)

@pytest.mark.parametrize("kind", ["sinusoidal", "rope", "alibi", "learned"])
def test_seq2seq_cached_equals_uncached(kind):
    t = s2s64(positional=kind)
    src = torch.randint(0, 40, (2, 5))
    keep = padding_mask([5, 3], 5)
    assert_greedy_agrees(lambda ids: t(src, ids, src_keep=keep), seq2seq_generate(t, src, 10, bos_id=1, greedy=True, src_keep=keep),
                       seq2seq_generate(t, src, 10, bos_id=1, greedy=True, src_keep=keep, use_cache=False), 1, atol=1e-10)
    out = seq2seq_generate(t, src, 10, bos_id=1, greedy=True)
    memory, mm = t.encode(src)
    cache = new_cache(t)
    stepped = torch.cat([t.decode(out[:, i:i + 1], memory if i == 0 else torch.full_like(memory, float("nan")), mm, cache=cache)
                         for i in range(out.shape[1])], 1)                  # after step 0 the memory is read from the cache
    torch.testing.assert_close(stepped, t.decode(out, memory, mm), rtol=0, atol=1e-10)
    assert all(len(c) == 5 for c in cache.cross)

def test_greedy_generation_follows_argmax():
    lm = lm64()
    prompt = torch.randint(0, 40, (2, 4))
    out = fast_generate(lm, prompt, 5, greedy=True)
    assert out.shape == (2, 9) and torch.equal(out[:, :4], prompt)
    # generate's cached steps against full forwards (different computations, float64 logits within 1e-10): each token is
    # the argmax of the full forward's logits up to a tie within that bound
    for t in range(4, 9):
        lg = lm(out[:, :t])[:, -1]
        assert (lg.gather(-1, out[:, t:t + 1])[:, 0] >= lg.amax(-1) - 1e-10).all()
    assert torch.equal(fast_generate(lm, prompt, 0), prompt)

def test_cache_size_and_bytes():
    lm = lm64()
    c = new_cache(lm)
    assert isinstance(c, DecoderCache) and len(c) == 0 and c.nbytes() == 0
    lm(torch.randint(0, 40, (3, 5)), cache=c)
    assert len(c) == 5 and c.nbytes() == 2 * 2 * 3 * 4 * 5 * 4 * 8     # 2·layers·B·H·T·D·8 bytes (float64)
    t = s2s64()
    c = new_cache(t)
    memory, mm = t.encode(torch.randint(0, 40, (3, 6)))
    t.decode(torch.ones(3, 2, dtype=torch.long), memory, mm, cache=c)
    assert len(c) == 2 and c.nbytes() == 2 * 2 * 3 * 4 * (2 + 6) * 4 * 8  # self-attention T=2 plus the memory's S=6

# ---------------------------------------------------------------- sampling
def test_sample_next_greedy_topk_and_seed():
    logits = torch.tensor([[0.0, 3.0, 1.0, 2.0], [5.0, 0.0, 0.0, 0.0]])
    assert torch.equal(sample_next(logits, greedy=True), torch.tensor([1, 0]))
    assert torch.equal(sample_next(logits, top_k=1, generator=torch.Generator().manual_seed(0)), torch.tensor([1, 0]))
    g = torch.Generator().manual_seed(0)
    draws = torch.stack([sample_next(logits, top_k=2, generator=g) for _ in range(300)])
    assert set(draws[:, 0].tolist()) == {1, 3} and set(draws[:, 1].tolist()) <= {0, 1, 2, 3}
    a = sample_next(logits.repeat(20, 1), generator=torch.Generator().manual_seed(9))
    b = sample_next(logits.repeat(20, 1), generator=torch.Generator().manual_seed(9))
    assert torch.equal(a, b)

def test_sample_next_matches_tempered_distribution():
    logits = torch.tensor([[1.0, 0.0, -1.0]])
    n = 20000
    draws = sample_next(logits.expand(n, -1), temperature=0.5, generator=torch.Generator().manual_seed(0))
    freq = torch.bincount(draws, minlength=3).double() / n
    expected = (logits[0].double() / 0.5).softmax(-1)
    assert (freq - expected).abs().max() < 4 * math.sqrt(0.25 / n)     # 4 standard errors at worst

def test_sample_next_keeps_ties_with_kth():
    logits = torch.tensor([[2.0, 1.0, 1.0, 0.0]])
    draws = sample_next(logits.expand(3000, -1), top_k=2, generator=torch.Generator().manual_seed(1))
    assert set(draws.tolist()) == {0, 1, 2}

@pytest.mark.parametrize("kw,msg", [
    (dict(temperature=0), "temperature=0 must be a finite number > 0 (use greedy=True for the argmax)"),
    (dict(temperature=-1.0), "temperature=-1.0 must be a finite number > 0"),
    (dict(temperature=float("inf")), "temperature=inf must be a finite number > 0"),
    (dict(top_k=0), "top_k=0 must be None or an int in [1, vocab_size=4]"),
    (dict(top_k=5), "top_k=5 must be None or an int in [1, vocab_size=4]")])
def test_sample_next_bad_arguments(kw, msg):
    with pytest.raises(ValueError, match=re.escape(msg)): sample_next(torch.zeros(1, 4), **kw)

def test_sample_next_top_k_float_is_the_wrong_kind():
    with pytest.raises(TypeError, match=re.escape("top_k=2.0 must be None or an int in [1, vocab_size=4]")): sample_next(torch.zeros(1, 4), top_k=2.0)

# ---------------------------------------------------------------- bad input
@pytest.mark.parametrize("kw,msg", [
    (dict(vocab_size=0), "vocab_size=0 must be a positive int"),
    (dict(vocab_size=10, d_model=10, n_heads=3), "d_model=10 must be divisible by n_heads=3"),
    (dict(vocab_size=10, d_ff=0), "d_ff=0 must be a positive int or None"),
    (dict(vocab_size=10, dropout=1.0), "dropout=1.0 must be a number in [0, 1)"),
    (dict(vocab_size=10, positional="relative"), "positional='relative' must be one of ('sinusoidal', 'learned', 'rope', 'alibi', 'none')"),
    (dict(vocab_size=10, activation="tanh"), "activation='tanh' must be one of"),
    (dict(vocab_size=10, norm="batch"), "norm='batch' must be one of ('layer', 'rms')"),
    (dict(vocab_size=10, d_model=6, n_heads=2, positional="rope"), "head_dim=d_model//n_heads=3 must be even for positional='rope'"),
    (dict(vocab_size=10, d_model=9, n_heads=3), "d_model=9 must be even for positional='sinusoidal'"),
    (dict(vocab_size=10, pad_id=10), "pad_id=10 must be None or an int in [0, vocab_size) of both vocabularies"),
    (dict(vocab_size=10, max_len=0), "max_len=0 must be a positive int")])
def test_config_rejects_bad_values(kw, msg):
    with pytest.raises(ValueError, match=re.escape(msg)): TransformerConfig(**kw)

def test_config_rejects_non_int_sizes():
    with pytest.raises(TypeError, match=re.escape("n_layers=True must be a positive int")): TransformerConfig(vocab_size=10, n_layers=True)
    with pytest.raises(TypeError, match=re.escape("d_ff=2.5 must be a positive int or None")): TransformerConfig(vocab_size=10, d_ff=2.5)

@pytest.mark.parametrize("name", ["norm_first", "tie_embeddings", "bias", "final_norm", "scale_embeddings"])
def test_config_rejects_non_bool_switches(name):
    with pytest.raises(TypeError, match=re.escape(f"{name}=1 must be a bool")): TransformerConfig(vocab_size=10, **{name: 1})

def test_config_rejects_bad_rope_base():
    with pytest.raises(ValueError, match=re.escape("rope_base=1.0 must be a finite number > 1")):
        TransformerConfig(vocab_size=10, positional="rope", rope_base=1.0)

def test_config_defaults_and_ffn_width():
    c = TransformerConfig(vocab_size=10)
    assert (c.d_model, c.n_heads, c.n_layers, c.d_ff, c.dropout, c.max_len, c.positional, c.norm_first, c.activation,
            c.tie_embeddings, c.bias) == (512, 8, 6, 2048, 0.1, 512, "sinusoidal", True, "relu", True, True)
    assert TransformerConfig(vocab_size=10, d_model=64, n_heads=4, d_ff=None).d_ff == 256
    assert TransformerConfig(vocab_size=10, d_model=64, n_heads=4, d_ff=None, activation="swiglu").d_ff is None
    assert TransformerConfig(vocab_size=10, n_layers=4, n_decoder_layers=2).encoder_layers == 4

@pytest.mark.parametrize("model", ["lm", "s2s"])
def test_bad_token_ids(model):
    m = lm64() if model == "lm" else s2s64()
    call = (lambda ids: m(ids)) if model == "lm" else (lambda ids: m(ids, torch.zeros(1, 2, dtype=torch.long)))
    name = "idx" if model == "lm" else "src"
    with pytest.raises(ValueError, match=re.escape(f"{name} holds ids from 3 to 40; every id must be in [0, vocab_size=40)")):
        call(torch.tensor([[3, 40]]))
    with pytest.raises(ValueError, match=re.escape(f"{name} holds ids from -1 to 5; every id must be in [0, vocab_size=40)")):
        call(torch.tensor([[-1, 5]]))
    with pytest.raises(TypeError, match=re.escape(f"{name}.dtype=torch.float32 must be torch.int64 or torch.int32 (token ids)")):
        call(torch.tensor([[1.0, 2.0]]))
    with pytest.raises(TypeError, match=re.escape(f"{name}.dtype=torch.bool must be torch.int64 or torch.int32")):
        call(torch.tensor([[True, False]]))
    with pytest.raises(TypeError, match=re.escape(f"{name} must be a torch.Tensor of token ids, got list")):
        call([[1, 2]])
    with pytest.raises(ValueError, match=re.escape(f"{name}.dim()=1 must be 2: (B, T)")):
        call(torch.tensor([1, 2]))
    with pytest.raises(ValueError, match=re.escape(f"{name}.shape[1]=0 must be >= 1")):
        call(torch.zeros(1, 0, dtype=torch.long))

def test_bad_target_ids_in_seq2seq():
    t = s2s64()
    with pytest.raises(ValueError, match=re.escape("tgt holds ids from 0 to 41; every id must be in [0, vocab_size=40)")):
        t(torch.zeros(1, 3, dtype=torch.long), torch.tensor([[0, 41]]))
    sep = Transformer(tiny(src_vocab_size=7))
    with pytest.raises(ValueError, match=re.escape("src holds ids from 0 to 7; every id must be in [0, vocab_size=7)")):
        sep(torch.tensor([[0, 7]]), torch.zeros(1, 2, dtype=torch.long))

def test_too_long_inputs():
    lm, t = lm64(), s2s64()
    with pytest.raises(ValueError, match=re.escape("idx.shape[1]=33 must be <= max_len=32 (positions 0..max_len-1)")):
        lm(torch.zeros(1, 33, dtype=torch.long))
    c = new_cache(lm); lm(torch.zeros(1, 30, dtype=torch.long), cache=c)
    with pytest.raises(ValueError, match=re.escape("idx.shape[1]=3 after 30 cached tokens must be <= max_len=32")):
        lm(torch.zeros(1, 3, dtype=torch.long), cache=c)
    with pytest.raises(ValueError, match=re.escape("idx.shape[1]=30 plus max_new_tokens=3 must be <= max_len=32")):
        fast_generate(lm, torch.zeros(1, 30, dtype=torch.long), 3)
    with pytest.raises(ValueError, match=re.escape("src.shape[1]=40 must be <= max_len=32")):
        t(torch.zeros(1, 40, dtype=torch.long), torch.zeros(1, 2, dtype=torch.long))
    with pytest.raises(ValueError, match=re.escape("tgt.shape[1]=33 must be <= max_len=32")):
        t(torch.zeros(1, 2, dtype=torch.long), torch.zeros(1, 33, dtype=torch.long))
    with pytest.raises(ValueError, match=re.escape("1 (BOS) plus max_new_tokens=32 must be <= max_len=32")):
        seq2seq_generate(t, torch.zeros(1, 2, dtype=torch.long), 32, bos_id=0)

def test_learned_positions_also_refuse_long_inputs():
    lm = lm64(positional="learned")
    with pytest.raises(ValueError, match=re.escape("idx.shape[1]=33 must be <= max_len=32")):
        lm(torch.zeros(1, 33, dtype=torch.long))

def test_bad_caches_and_generation_arguments():
    lm, t = lm64(), s2s64()
    with pytest.raises(TypeError, match=re.escape("cache must be a DecoderCache, a StaticCache or None, got list")):
        lm(torch.zeros(1, 2, dtype=torch.long), cache=[])
    with pytest.raises(ValueError, match=re.escape("cache has 3 layers; it must have one per decoder block (2)")):
        lm(torch.zeros(1, 2, dtype=torch.long), cache=DecoderCache(3))
    with pytest.raises(ValueError, match=re.escape("max_new_tokens=-1 must be an int >= 0")):
        fast_generate(lm, torch.zeros(1, 2, dtype=torch.long), -1)
    with pytest.raises(ValueError, match=re.escape("bos_id=40 must be an int in [0, vocab_size=40)")):
        seq2seq_generate(t, torch.zeros(1, 2, dtype=torch.long), 3, bos_id=40)
    with pytest.raises(ValueError, match=re.escape("src_keep.shape=(1, 3) must equal src.shape=(1, 2) (True on real tokens)")):
        t(torch.zeros(1, 2, dtype=torch.long), torch.zeros(1, 2, dtype=torch.long), src_keep=torch.ones(1, 3, dtype=torch.bool))
    memory, mm = t.encode(torch.zeros(1, 2, dtype=torch.long))
    with pytest.raises(ValueError, match=re.escape("tgt_keep must be None when a cache is used")):
        t.decode(torch.zeros(1, 1, dtype=torch.long), memory, mm, tgt_keep=torch.ones(1, 1, dtype=torch.bool), cache=new_cache(t))
    with pytest.raises(TypeError, match=re.escape("config must be a TransformerConfig, got dict")):
        DecoderOnlyLM(dict(vocab_size=10))
    with pytest.raises(ValueError, match=re.escape("n_layers=0 must be a positive int")):
        DecoderCache(0)

def test_check_tokens_passes_good_ids():
    check_tokens(torch.tensor([[0, 39]]), 40)
    check_tokens(torch.tensor([[0, 39]], dtype=torch.int32), 40)


@pytest.mark.parametrize("kind", ["lm", "seq2seq"])
def test_config_backend_reaches_every_attention(kind):
    "TransformerConfig(backend=...) runs every block on that backend: 'flash' equals 'math' in float64, with gradients."
    from transformer_lit.model import Transformer
    from transformer_lit.multihead import MultiHeadAttention
    torch.manual_seed(0)
    ids = torch.randint(0, 11, (2, 9))
    outs = []
    for backend in ("math", "flash"):
        torch.manual_seed(0)
        cfg = TransformerConfig(11, d_model=16, n_heads=2, n_layers=2, d_ff=32, dropout=0.0, max_len=16, backend=backend)
        m = (DecoderOnlyLM(cfg) if kind == "lm" else Transformer(cfg)).double()
        attns = [mod for mod in m.modules() if isinstance(mod, MultiHeadAttention)]
        assert len(attns) == (2 if kind == "lm" else 6) and all(a.backend == backend for a in attns)
        y = m(ids) if kind == "lm" else m(ids, ids)
        y.square().sum().backward()
        outs.append((y, [p.grad for p in m.parameters()]))
    torch.testing.assert_close(outs[0][0], outs[1][0], atol=1e-10, rtol=0)
    for g0, g1 in zip(outs[0][1], outs[1][1]): torch.testing.assert_close(g0, g1, atol=1e-10, rtol=0)
    with pytest.raises(ValueError, match=r"backend='fastest' must be one of \['auto', 'flash', 'math', 'sdpa', 'triton'\]"):
        TransformerConfig(11, d_model=16, n_heads=2, backend="fastest")


# ---------------------------------------------------------------- grouped-query attention in the models
@pytest.mark.parametrize("kw,exc,msg", [
    (dict(n_kv_heads=3), ValueError, "n_kv_heads=3 must divide n_heads=8"),
    (dict(n_kv_heads=16), ValueError, "n_kv_heads=16 must be an int in [1, 8] or None"),
    (dict(n_kv_heads=0), ValueError, "n_kv_heads=0 must be an int in [1, 8] or None"),
    (dict(n_kv_heads=-1), ValueError, "n_kv_heads=-1 must be an int in [1, 8] or None"),
    (dict(n_kv_heads=True), TypeError, "n_kv_heads=True must be an int in [1, 8] or None"),
    (dict(n_kv_heads=2.0), TypeError, "n_kv_heads=2.0 must be an int"),
    (dict(qkv_bias=1), TypeError, "qkv_bias=1 must be a bool or None"),
    (dict(logit_scale=0), ValueError, "logit_scale=0 must be None or a finite number > 0"),
    (dict(logit_scale=float("inf")), ValueError, "logit_scale=inf must be None or a finite number > 0"),
    (dict(logit_scale=True), TypeError, "logit_scale=True must be None or a finite number > 0"),
    (dict(layer_norm_eps=0), ValueError, "layer_norm_eps=0 must be None or a finite number > 0"),
    (dict(layer_norm_eps=float("nan")), ValueError, "layer_norm_eps=nan must be None or a finite number > 0"),
    (dict(layer_norm_eps="1e-5"), TypeError, "layer_norm_eps='1e-5' must be None or a finite number > 0"),
    (dict(rope_base="1e4"), TypeError, "rope_base='1e4' must be a finite number > 1")])
def test_config_rejects_bad_gqa_and_scale(kw, exc, msg):
    with pytest.raises(exc, match=re.escape(msg)): TransformerConfig(vocab_size=10, **kw)

def test_config_documents_every_field():
    from transformer_lit.model import BLOCK_ACTIVATIONS, NORMS
    doc = TransformerConfig.__doc__
    for f in dataclasses.fields(TransformerConfig): assert re.search(rf"[- ,]{f.name}[:,]", doc), f.name
    for s in POSITIONALS + BLOCK_ACTIVATIONS + NORMS: assert f'"{s}"' in doc, s
    assert "*" not in doc

def blocks_of(model):
    return list(model.blocks) if isinstance(model, DecoderOnlyLM) else list(model.stack.encoder) + list(model.stack.decoder)

@pytest.mark.parametrize("G", [1, 2, 4])
@pytest.mark.parametrize("cls", [DecoderOnlyLM, Transformer])
def test_n_kv_heads_reaches_every_attention(cls, G):
    torch.manual_seed(0)
    m = cls(tiny(n_kv_heads=G, n_decoder_layers=3, qkv_bias=False))
    attns = [getattr(b, a).sublayer for b in blocks_of(m) for a in ("self_attn", "cross_attn") if hasattr(b, a)]
    assert len(attns) == (2 if cls is DecoderOnlyLM else 2 + 2 * 3) or cls is DecoderOnlyLM and len(attns) == 3
    assert all(a.n_kv_heads == G and a.n_heads == 4 for a in attns)
    assert all(a.in_proj.bias is None and a.out_proj.bias is not None for a in attns)   # qkv_bias=False, bias=True
    D, d = 4, 16
    per_attn = d * (4 + 2 * G) * D + 4 * D * d + d                      # weights plus out_proj's bias
    assert parameter_breakdown(m)["attention"] == len(attns) * per_attn

def test_stack_takes_n_kv_heads():
    st_ = TransformerStack(tiny(n_kv_heads=2))
    assert all(b.self_attn.sublayer.n_kv_heads == 2 for b in list(st_.encoder) + list(st_.decoder))
    assert all(b.cross_attn.sublayer.n_kv_heads == 2 for b in st_.decoder)

@pytest.mark.parametrize("G", [1, 2, 4])
@pytest.mark.parametrize("kind", ["rope", "alibi", "learned"])
def test_gqa_lm_cached_equals_full(kind, G):
    lm = lm64(positional=kind, n_kv_heads=G, norm="rms", activation="swiglu", bias=False)
    ids = torch.randint(0, 40, (2, 11))
    full = lm(ids)
    cache = new_cache(lm)
    steps = torch.cat([lm(ids[:, s:e], cache=cache) for s, e in ((0, 4), (4, 5), (5, 8), (8, 11))], 1)
    torch.testing.assert_close(steps, full, atol=1e-10, rtol=0)
    assert all(c.k.shape == (2, G, 11, 4) for c in cache.layers)
    assert cache.nbytes() == 2 * 2 * 2 * G * 11 * 4 * 8                        # 2 layers, K and V, B·G·T·D float64
    assert_greedy_agrees(lm, fast_generate(lm, ids[:, :3], 8, greedy=True), lm_generate(lm, ids[:, :3], 8, greedy=True, use_cache=False), 3, atol=1e-10)

@pytest.mark.parametrize("G", [1, 2, 4])
def test_gqa_seq2seq_cached_equals_full(G):
    m = s2s64(n_kv_heads=G, positional="rope")
    src, tgt = torch.randint(0, 40, (2, 6)), torch.randint(0, 40, (2, 7))
    memory, mask = m.encode(src)
    full = m.decode(tgt, memory, mask)
    cache = new_cache(m)
    steps = torch.cat([m.decode(tgt[:, s:e], memory, mask, cache=cache) for s, e in ((0, 3), (3, 4), (4, 7))], 1)
    torch.testing.assert_close(steps, full, atol=1e-10, rtol=0)
    assert cache.nbytes() == 2 * (2 * 2 * G * 7 * 4 * 8 + 2 * 2 * G * 6 * 4 * 8)  # self + cross caches, 2 layers
    sampled = [seq2seq_generate(m, src, 6, bos_id=1, temperature=1.2, generator=torch.Generator().manual_seed(3), use_cache=c) for c in (True, False)]
    assert torch.equal(*sampled)      # float64 logits within 1e-10: a draw within that of a boundary has chance ~1e-9

def test_decoder_cache_nbytes_is_g_over_h():
    sizes = {}
    for G in (1, 2, 4):
        lm = lm64(n_kv_heads=G); c = new_cache(lm); lm(torch.randint(0, 40, (3, 9)), cache=c); sizes[G] = c.nbytes()
    assert sizes[1] * 4 == sizes[2] * 2 == sizes[4]

@pytest.mark.parametrize("G", [1, 2, 4])
@pytest.mark.parametrize("cls", [DecoderOnlyLM, Transformer])
def test_gqa_model_trains(cls, G):
    torch.manual_seed(1)
    m = cls(tiny(n_kv_heads=G, positional="rope"))
    opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
    ids = (torch.randint(0, 40, (8, 1)) + torch.arange(12)) % 40          # a learnable rule: next = current + 1
    def loss():
        if cls is DecoderOnlyLM: return m(ids[:, :-1], targets=ids[:, 1:])[1]
        return m(ids, ids[:, :-1], targets=ids[:, 1:])[1]                # copy the source, shifted
    losses = []
    for _ in range(20):
        opt.zero_grad(); l = loss(); l.backward(); opt.step(); losses.append(l.item())
    assert losses[-1] < 0.7 * losses[0], losses

def test_gqa_parameter_count_formula_llama2_70b_shape():
    V, d, L, H, G, ff = 32000, 8192, 80, 64, 8, 28672
    m = meta(DecoderOnlyLM, vocab_size=V, d_model=d, n_heads=H, n_kv_heads=G, n_layers=L, d_ff=ff, max_len=4096,
             positional="rope", norm="rms", activation="swiglu", bias=False, tie_embeddings=False, scale_embeddings=False)
    D = d // H
    assert count_parameters(m) == 2 * V * d + L * (d * (H + 2 * G) * D + H * D * d + 3 * d * ff + 2 * d) + d
    assert count_parameters(m) == 68_976_648_192

# ---------------------------------------------------------------- the untrained model starts near ln V
INIT_CASES = [(cls, V, d, tie, scale, pos) for cls in ("lm", "s2s") for V, d in ((50, 64), (1000, 128), (8000, 512))
              for tie, scale in ((True, True), (False, True), (True, False), (False, False))
              for pos in ("sinusoidal", "learned", "rope")]

@pytest.mark.parametrize("cls,V,d,tie,scale,pos", INIT_CASES)
def test_initial_loss_near_ln_v(cls, V, d, tie, scale, pos):
    torch.manual_seed(0)
    c = TransformerConfig(vocab_size=V, d_model=d, n_heads=8, n_layers=2, dropout=0.0, positional=pos,
                          tie_embeddings=tie, scale_embeddings=scale)
    ids = torch.randint(0, V, (4, 33))
    with torch.no_grad():
        if cls == "lm": loss = DecoderOnlyLM(c).eval()(ids[:, :-1], targets=ids[:, 1:])[1]
        else: loss = Transformer(c).eval()(torch.randint(0, V, (4, 20)), ids[:, :-1], targets=ids[:, 1:])[1]
    assert abs(loss.item() / math.log(V) - 1) < 0.05, (loss.item(), math.log(V))

@pytest.mark.parametrize("cls", [DecoderOnlyLM, Transformer])
def test_default_config_starts_near_ln_v_and_unscaled_logits_did_not(cls):
    torch.manual_seed(0)
    V = 8000
    ids = torch.randint(0, V, (2, 33))
    def first_loss(vocab=V, **kw):
        m, x = cls(TransformerConfig(vocab_size=vocab, **kw)).eval(), ids % vocab
        with torch.no_grad():
            if cls is DecoderOnlyLM: return m(x[:, :-1], targets=x[:, 1:])[1].item()
            return m(x, x[:, :-1], targets=x[:, 1:])[1].item()
    assert abs(first_loss() / math.log(V) - 1) < 0.03                                  # the defaults: d_model 512, 6 layers
    unscaled = [first_loss(vocab, logit_scale=1.0) for vocab in (500, V)]               # without the d_model^-0.5: far above,
    assert abs(unscaled[0] / unscaled[1] - 1) < 0.05, unscaled                          # set by d_model (the current token's
    assert min(unscaled) > 0.6 * math.sqrt(512), unscaled                               # logit, ~0.8·√d), not by V

def test_output_scale_rule():
    assert TransformerConfig(vocab_size=10, d_model=64, n_heads=4).output_scale == 64 ** -0.5
    assert TransformerConfig(vocab_size=10, tie_embeddings=False).output_scale == 1.0
    assert TransformerConfig(vocab_size=10, scale_embeddings=False).output_scale == 1.0
    assert TransformerConfig(vocab_size=10, logit_scale=0.5).output_scale == 0.5
    lm = lm64()
    ids = torch.randint(0, 40, (1, 5))
    h = lm.norm(lm.blocks[1](lm.blocks[0](lm.pos(lm.tok(ids)), is_causal=True), is_causal=True))
    torch.testing.assert_close(lm(ids), h @ lm.tok.weight.T / 4, atol=1e-12, rtol=0)   # d_model = 16: h·Eᵀ/√16

# ---------------------------------------------------------------- documentation of chapters 08-09
ROOT = __import__("pathlib").Path(__file__).resolve().parent.parent

@pytest.mark.parametrize("module", ["blocks", "model"])
def test_docstrings_have_no_asterisk(module):
    import importlib, inspect
    mod = importlib.import_module(f"transformer_lit.{module}")
    for name, obj in vars(mod).items():
        if getattr(obj, "__module__", None) != mod.__name__: continue
        members = [v for v in vars(obj).values() if callable(v) or isinstance(v, property)] if inspect.isclass(obj) else []
        for o in [obj, *members]:
            doc = inspect.getdoc(o.fget if isinstance(o, property) else o) or ""
            assert "*" not in doc, (name, doc)

@pytest.mark.parametrize("nb", ["08_cross_attention.ipynb", "09_transformer.ipynb"])
def test_backticked_methods_link_to_documented_anchors(nb):
    "A backticked Class.member that nbdev links must be documented by a show_doc somewhere, or its anchor is missing."
    import json
    from nbdev.doclinks import NbdevLookup
    lookup, shown = NbdevLookup(), set()
    for p in (ROOT / "nbs").glob("*.ipynb"):
        for c in json.loads(p.read_text())["cells"]:
            if c["cell_type"] == "code": shown |= set(re.findall(r"show_doc\(([\w.]+)", "".join(c["source"])))
    names = set()
    for c in json.loads((ROOT / "nbs" / nb).read_text())["cells"]:
        text = "".join(c["source"])
        parts = [text] if c["cell_type"] == "markdown" else re.findall(r'"([^"\n]+)"', text)   # prose, or docstrings
        for part in parts: names |= set(re.findall(r"`([A-Za-z_][\w]*\.[\w.]+)`", part))
    documented = lambda n: n in shown or ".".join(n.split(".")[-2:]) in shown
    missing = [n for n in names if n[0].isupper() and lookup[n] and not documented(n)]   # Class.member links
    assert not missing, missing

# ---------------------------------------------------------------- RoPE scaling reaches the rotary embedding
def test_rope_scaling_reaches_every_block():
    s = {"rope_type": "linear", "factor": 4.0}
    m = DecoderOnlyLM(TransformerConfig(vocab_size=50, d_model=32, n_heads=4, n_layers=2, dropout=0.0, positional="rope", rope_scaling=s))
    from transformer_lit.multihead import MultiHeadAttention
    attns = [a for a in m.modules() if isinstance(a, MultiHeadAttention)]
    assert m.pos.rotary.scaling == s and len(attns) == 2 and all(a.rotary is m.pos.rotary for a in attns)
    plain = DecoderOnlyLM(TransformerConfig(vocab_size=50, d_model=32, n_heads=4, n_layers=2, dropout=0.0, positional="rope"))
    plain.load_state_dict(m.state_dict())
    x = torch.randint(0, 50, (2, 9), generator=torch.Generator().manual_seed(0))
    assert not torch.allclose(m(x), plain(x))                      # the scaled angles change the output

@pytest.mark.parametrize("kw, exc, words", [
    (dict(positional="sinusoidal", rope_scaling={"rope_type": "linear", "factor": 2.0}), ValueError, "needs positional='rope'"),
    (dict(positional="rope", rope_scaling={"rope_type": "linear", "factor": 0.5}), ValueError, "factor"),
    (dict(positional="rope", rope_scaling={"rope_type": "ntk-by-parts", "factor": 2.0}), ValueError, "is not supported"),
    (dict(positional="rope", rope_scaling=2.0), TypeError, "must be None or a dict"),
])
def test_rope_scaling_bad_config(kw, exc, words):
    with pytest.raises(exc, match=re.escape(words)): TransformerConfig(vocab_size=50, d_model=32, n_heads=4, **kw)

# ---------------------------------------------------------------- bad input: token ids, targets, empty batches
@pytest.mark.parametrize("dtype", [torch.uint8, torch.int16, torch.int8, torch.bool, torch.float16, torch.float64])
@pytest.mark.parametrize("model", ["lm", "s2s"])
def test_token_id_dtypes_are_checked(dtype, model):
    m = lm64() if model == "lm" else s2s64()
    ids = torch.tensor([[1, 0]]).to(dtype)
    name = "idx" if model == "lm" else "src"
    call = (lambda: m(ids)) if model == "lm" else (lambda: m(ids, torch.zeros(1, 2, dtype=torch.long)))
    with pytest.raises(TypeError, match=re.escape(f"{name}.dtype={dtype} must be torch.int64 or torch.int32")):
        call()
    if model == "s2s":
        with pytest.raises(TypeError, match=re.escape(f"tgt.dtype={dtype} must be torch.int64 or torch.int32")):
            m(torch.zeros(1, 2, dtype=torch.long), ids)

def test_int32_ids_equal_int64():
    m, t = lm64(), s2s64()
    ids = torch.tensor([[3, 1, 4, 1, 5]])
    # the ids only index the embedding rows (and the loss's targets): the same rows, then the same computation
    torch.testing.assert_close(m(ids.int()), m(ids), rtol=0, atol=0)
    torch.testing.assert_close(t(ids.int(), ids.int()), t(ids, ids), rtol=0, atol=0)
    torch.testing.assert_close(m(ids, ids.int())[1], m(ids, ids)[1], rtol=0, atol=0)

@pytest.mark.parametrize("kind", POSITIONALS)
def test_empty_batch_gives_empty_logits(kind):
    m, t = lm64(positional=kind), s2s64(positional=kind)
    empty = torch.zeros(0, 5, dtype=torch.long)
    assert m(empty).shape == (0, 5, 40)
    assert t(empty, torch.zeros(0, 3, dtype=torch.long)).shape == (0, 3, 40)
    assert m(empty, attention_mask=torch.ones(0, 5, dtype=torch.bool)).shape == (0, 5, 40)
    cache = new_static_cache(m, max_len=8, batch=0)
    assert m(empty, cache=cache).shape == (0, 5, 40)

BAD_TARGETS = [  # (targets for ids of shape (2, 3) and V = 40, exception, the message's words)
    (torch.zeros(2, 3, dtype=torch.bool), TypeError, "targets.dtype=torch.bool must be torch.int64 or torch.int32"),
    (torch.zeros(2, 3), TypeError, "targets.dtype=torch.float32 must be torch.int64 or torch.int32"),
    (torch.zeros(2, 3, dtype=torch.uint8), TypeError, "targets.dtype=torch.uint8 must be torch.int64 or torch.int32"),
    ([[0, 1, 2], [0, 1, 2]], TypeError, "targets must be a torch.Tensor of token ids, got list"),
    (torch.tensor([[0, 1, 40], [0, 1, 2]]), ValueError, "targets holds ids up to 40; every target must be < vocab_size=40"),
    (torch.tensor([[0, -5, 1], [0, 1, 2]]), ValueError, "targets holds -5; the only negative target allowed is -100"),
    (torch.tensor([[0, -1, 1], [-100, 1, 2]]), ValueError, "targets holds -1; the only negative target allowed is -100"),
    (torch.full((2, 3), -100), ValueError, "every entry of targets is -100 (ignored)"),
    (torch.zeros(2, 4, dtype=torch.long), ValueError, "targets.shape=(2, 4) must equal (B, T)=(2, 3)"),
    (torch.zeros(3, dtype=torch.long), ValueError, "targets.shape=(3,) must equal (B, T)=(2, 3)"),
]

@pytest.mark.parametrize("targets,exc,words", BAD_TARGETS)
def test_bad_targets(targets, exc, words):
    m, t = lm64(), s2s64()
    ids = torch.tensor([[1, 2, 3], [4, 5, 6]])
    with pytest.raises(exc, match=re.escape(words)): m(ids, targets)
    with pytest.raises(exc, match=re.escape(words)): t(ids, ids, targets=targets)
    if isinstance(targets, torch.Tensor) and targets.dim() == 2 and targets.shape[1] == 3:
        with pytest.raises(exc, match=re.escape(words)): lm_loss(torch.randn(2, 3, 40), targets)

def test_partly_ignored_targets_and_lm_loss_input():
    m = lm64()
    ids = torch.tensor([[1, 2, 3], [4, 5, 6]])
    tg = torch.tensor([[2, -100, 4], [-100, -100, 7]])
    logits, loss = m(ids, tg)
    keep = tg != -100
    ref = -logits.log_softmax(-1).gather(-1, tg.clamp_min(0)[..., None]).squeeze(-1)[keep].mean()
    torch.testing.assert_close(loss, ref, rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match=re.escape("every entry of targets is -100 (ignored), or it has none")):
        lm_loss(torch.randn(0, 3, 40), torch.zeros(0, 3, dtype=torch.long))     # nothing to average: torch gives NaN
    with pytest.raises(TypeError, match=re.escape("logits.dtype=torch.int64 must be a floating dtype")):
        lm_loss(torch.zeros(2, 3, 40, dtype=torch.long), tg)
    with pytest.raises(ValueError, match=re.escape("logits.dim()=2 must be 3: (B, T, V)")):
        lm_loss(torch.randn(2, 40), tg)

def test_bad_attention_masks():
    m = lm64()
    ids = torch.tensor([[1, 2, 3]])
    with pytest.raises(TypeError, match=re.escape("attention_mask.dtype=torch.float32 must be torch.bool or an integer dtype")):
        m(ids, attention_mask=torch.ones(1, 3))
    with pytest.raises(TypeError, match=re.escape("attention_mask must be a torch.Tensor (bool, or 0/1 integers), got list")):
        m(ids, attention_mask=[[1, 1, 1]])
    with pytest.raises(ValueError, match=re.escape("attention_mask must hold only 0 and 1")):
        m(ids, attention_mask=torch.tensor([[1, 2, 1]]))
    with pytest.raises(ValueError, match=re.escape("attention_mask holds 33 real tokens in a row; it must be <= max_len=32")):
        m(torch.zeros(1, 33, dtype=torch.long), attention_mask=torch.ones(1, 33, dtype=torch.long))
    torch.testing.assert_close(m(ids, attention_mask=torch.ones(1, 3, dtype=torch.uint8)), m(ids), rtol=0, atol=1e-12)

# ---------------------------------------------------------------- the static (preallocated) cache
@pytest.mark.parametrize("kind", POSITIONALS)
@pytest.mark.parametrize("G", [4, 2, 1])
def test_static_cache_equals_full_forward(kind, G):
    m = lm64(positional=kind, n_kv_heads=G)
    ids = torch.randint(0, 40, (3, 11), generator=torch.Generator().manual_seed(1))
    full = m(ids)
    cache = new_static_cache(m, max_len=16, batch=3)
    assert isinstance(cache, StaticCache) and cache.layers[0].k.shape == (3, G, 16, 4)
    assert cache.nbytes() == 2 * 2 * 3 * G * 16 * 4 * 8           # 2 layers, K and V, float64: filled or not
    chunks = [m(ids[:, :5], cache=cache)] + [m(ids[:, t:t + 1], cache=cache) for t in range(5, 9)] + [m(ids[:, 9:], cache=cache)]
    torch.testing.assert_close(torch.cat(chunks, 1), full, rtol=0, atol=1e-12)
    assert int(cache.pos) == 11 and cache.n_real.tolist() == [11, 11, 11]

@pytest.mark.parametrize("kind", POSITIONALS)
def test_static_cache_with_left_padding(kind):
    m = lm64(positional=kind, n_kv_heads=2)
    ids = torch.randint(0, 40, (2, 9), generator=torch.Generator().manual_seed(2))
    keep = torch.ones(2, 9, dtype=torch.bool); keep[1, :4] = False    # row 1: four pads, then five real tokens
    full = m(ids, attention_mask=keep)
    cache = new_static_cache(m, max_len=12, batch=2)
    out = torch.cat([m(ids[:, :6], cache=cache, attention_mask=keep[:, :6])] +
                    [m(ids[:, t:t + 1], cache=cache) for t in range(6, 9)], 1)
    torch.testing.assert_close(out[keep], full[keep], rtol=0, atol=1e-12)
    assert cache.n_real.tolist() == [9, 5] and cache.keep[:, :9].equal(keep)

@pytest.mark.parametrize("kind", POSITIONALS)
def test_generate_with_a_static_cache(kind):
    m = lm64(positional=kind)
    prompt = torch.randint(0, 40, (2, 4), generator=torch.Generator().manual_seed(3))
    # a static cache attends over its whole masked buffer, a growing one over the tokens so far: different computations
    # whose float64 logits agree within 1e-12 (test_static_cache_with_left_padding), so greedy tokens agree where the gap is clear
    ref = fast_generate(m, prompt, 7, greedy=True)
    assert_greedy_agrees(m, ref, fast_generate(m, prompt, 7, greedy=True, static_cache=True), 4, atol=1e-10)
    keep = torch.tensor([[True] * 4, [False, False, True, True]])
    ref = fast_generate(m, prompt, 5, greedy=True, attention_mask=keep)
    assert_greedy_agrees(lambda ids: m(ids, attention_mask=torch.cat([keep, keep.new_ones(2, ids.shape[1] - 4)], 1)),
                       ref, fast_generate(m, prompt, 5, greedy=True, attention_mask=keep, static_cache=True), 4, atol=1e-10)
    g1, g2 = torch.Generator().manual_seed(0), torch.Generator().manual_seed(0)
    # seeded sampling, float64: a draw within 1e-10 of a cumulative-probability boundary has chance ~1e-9
    assert fast_generate(m, prompt, 6, top_k=5, generator=g1, static_cache=True).equal(fast_generate(m, prompt, 6, top_k=5, generator=g2))
    calls = []
    def step(*a, **kw): calls.append(1); return m(*a, **kw)
    assert_greedy_agrees(m, fast_generate(m, prompt, 3, greedy=True), lm_generate(m, prompt, 3, greedy=True, cache=new_static_cache(m, prompt.shape[1] + 3, prompt.shape[0]), step=step), 4, atol=1e-10)
    assert len(calls) == 3

def test_static_cache_reorder():
    m = lm64()
    ids = torch.randint(0, 40, (3, 6), generator=torch.Generator().manual_seed(4))
    cache = new_static_cache(m, max_len=8, batch=3)
    m(ids[:, :5], cache=cache)
    rows = torch.tensor([2, 2, 0])
    cache.reorder(rows)
    torch.testing.assert_close(m(ids[rows, 5:], cache=cache), m(ids[rows])[:, 5:], rtol=0, atol=1e-12)

def test_bad_static_caches():
    m = lm64()
    ids = torch.zeros(2, 3, dtype=torch.long)
    with pytest.raises(ValueError, match=re.escape("idx.shape[0]=2 must equal the StaticCache's batch=3")):
        m(ids, cache=new_static_cache(m, max_len=8, batch=3))
    cache = new_static_cache(m, max_len=4, batch=2)
    m(ids, cache=cache)
    with pytest.raises(ValueError, match=re.escape("idx.shape[1]=3 after 3 cached tokens must be <= the StaticCache's max_len=4")):
        m(ids, cache=cache)
    with pytest.raises(TypeError, match=re.escape("the StaticCache's dtype torch.float32 must equal the model's parameter dtype torch.float64")):
        m(ids, cache=new_static_cache(m, max_len=8, batch=2, dtype=torch.float32))
    with pytest.raises(ValueError, match=re.escape("attention_mask must be a bool or 0/1 integer tensor of shape (2, 3) (B, new tokens)")):
        m(ids, cache=new_static_cache(m, max_len=8, batch=2), attention_mask=torch.ones(2, 5, dtype=torch.bool))
    with pytest.raises(TypeError, match=re.escape("max_len=None must be a positive int")): new_static_cache(m, None, 2)
    with pytest.raises(TypeError, match=re.escape("batch=None must be an int >= 0")): new_static_cache(m, 8, None)
    with pytest.raises(ValueError, match=re.escape("max_len=0 must be a positive int")): new_static_cache(m, max_len=0, batch=1)
    with pytest.raises(ValueError, match=re.escape("cache needs use_cache=True")):
        lm_generate(m, ids, 2, greedy=True, use_cache=False, cache=new_static_cache(m, 8, 2))
    with pytest.raises(TypeError, match=re.escape("step=3 must be callable")): lm_generate(m, ids, 2, greedy=True, step=3)
    long = lm64(max_len=4)
    c = new_static_cache(long, max_len=8, batch=1)
    long(torch.zeros(1, 3, dtype=torch.long), cache=c)
    with pytest.raises(ValueError, match=re.escape("idx.shape[1]=2 after 3 cached real tokens must be <= max_len=4")):
        long(torch.zeros(1, 2, dtype=torch.long), cache=c)

def test_static_cache_rewind():
    m = lm64(positional="rope")
    ids = torch.randint(0, 40, (2, 7), generator=torch.Generator().manual_seed(5))
    cache = new_static_cache(m, max_len=8, batch=2)
    m(ids[:, :5], cache=cache)
    first = m(ids[:, 5:6], cache=cache)
    cache.rewind(5)                                                   # forget the step: the prompt stays
    assert int(cache.pos) == 5 and cache.n_real.tolist() == [5, 5]
    torch.testing.assert_close(m(ids[:, 5:6], cache=cache), first, rtol=0, atol=0)   # the same step again
    cache.rewind()
    torch.testing.assert_close(m(ids, cache=cache), m(ids), rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match=re.escape("length=9 must be an int in [0, 8]")): cache.rewind(9)

@pytest.mark.parametrize("kind", POSITIONALS)
def test_seq2seq_static_cache_equals_full_decode(kind):
    t = s2s64(positional=kind, n_kv_heads=2, pad_id=0)
    src = torch.randint(1, 40, (2, 7), generator=torch.Generator().manual_seed(6)); src[1, 5:] = 0   # row 1 padded
    tgt = torch.randint(1, 40, (2, 6), generator=torch.Generator().manual_seed(7))
    memory, memory_mask = t.encode(src)
    full = t.decode(tgt, memory, memory_mask)
    cache = new_static_cache(t, max_len=8, batch=2)
    assert isinstance(cache, StaticCache)
    out = torch.cat([t.decode(tgt[:, :2], memory, memory_mask, cache=cache)] +
                    [t.decode(tgt[:, i:i + 1], memory, memory_mask, cache=cache) for i in range(2, 6)], 1)
    torch.testing.assert_close(out, full, rtol=0, atol=1e-12)
    assert_greedy_agrees(lambda ids: t(src, ids), seq2seq_generate(t, src, 5, bos_id=1, greedy=True),
                       seq2seq_generate(t, src, 5, bos_id=1, greedy=True, cache=new_static_cache(t, 6, src.shape[0])), 1, atol=1e-10)
    with pytest.raises(ValueError, match=re.escape("tgt.shape[0]=2 must equal the StaticCache's batch=3")):
        t.decode(tgt, memory, memory_mask, cache=new_static_cache(t, max_len=8, batch=3))
    with pytest.raises(ValueError, match=re.escape("tgt.shape[1]=6 after 6 cached tokens must be <= the StaticCache's max_len=8")):
        t.decode(tgt, memory, memory_mask, cache=cache)

# --- bad input: names, values and rules in the messages ------------------------------------------------------------------
def _tiny_cfg(**kw):
    return TransformerConfig(**(dict(vocab_size=11, d_model=8, n_heads=2, n_layers=1, d_ff=16, dropout=0.0, max_len=16) | kw))

def test_stack_names_its_arguments():
    torch.manual_seed(0)
    st_, x = TransformerStack(_tiny_cfg(positional="none")).eval(), torch.randn(1, 3, 8)
    E = lambda exc, msg: pytest.raises(exc, match=re.escape(msg))
    with E(TypeError, "config must be a TransformerConfig, got str"): TransformerStack("c")
    with E(TypeError, "rotary=3 must be None or callable"): TransformerStack(_tiny_cfg(), rotary=3)
    with E(TypeError, "src must be a torch.Tensor, got str"): st_.encode("s")
    with E(TypeError, "src.dtype=torch.float64 must equal the module's parameter dtype torch.float32"): st_.encode(x.double())
    with E(TypeError, "tgt must be a torch.Tensor, got str"): st_.decode("t", x)
    with E(TypeError, "memory must be a torch.Tensor, got str"): st_.decode(x, "m")
    with E(ValueError, "tgt.shape=(1, 3, 5) must be (B, T, d_model=8)"): st_(x, torch.randn(1, 3, 5))
    with E(ValueError, "tgt_is_causal=True together with an explicit tgt_mask is ambiguous"):
        st_(x, x, tgt_mask=torch.ones(3, 3, dtype=torch.bool))
    with E(TypeError, "tgt_is_causal=1 must be a bool"): st_.decode(x, x, tgt_is_causal=1)
    with E(TypeError, "cache must be a DecoderCache, a StaticCache or None, got str"): st_.decode(x, x, cache="c")
    with E(ValueError, "cache has 3 layers; it must have one per decoder block (1)"): st_.decode(x, x, cache=DecoderCache(3))
    torch.testing.assert_close(st_(x, x, tgt_mask=torch.ones(3, 3, dtype=torch.bool), tgt_is_causal=False), st_(x, x, tgt_is_causal=False))

def test_keep_masks_name_dtype_and_shape():
    t, ids = s2s64(), torch.zeros(1, 3, dtype=torch.long)
    with pytest.raises(TypeError, match=re.escape("src_keep.dtype=torch.int64 must be torch.bool (True on real tokens)")):
        t.encode(ids, torch.ones(1, 3, dtype=torch.long))
    with pytest.raises(TypeError, match=re.escape("tgt_keep must be a bool torch.Tensor (True on real tokens), got list")):
        t(ids, ids, tgt_keep=[True])
    with pytest.raises(ValueError, match=re.escape("tgt_keep.shape=(1, 2) must equal tgt.shape=(1, 3)")):
        t(ids, ids, tgt_keep=torch.ones(1, 2, dtype=torch.bool))

def test_unembed_checks():
    head = nn.Linear(8, 11, bias=False)
    with pytest.raises(TypeError, match=re.escape("lm_head must be a torch.nn.Linear (the unembedding), got str")): unembed("U", torch.randn(1, 2, 8))
    with pytest.raises(ValueError, match=re.escape("h.shape[-1]=5 must equal lm_head.in_features=8 (d_model)")): unembed(head, torch.randn(1, 2, 5))
    with pytest.raises(TypeError, match=re.escape("h.dtype=torch.int64 must be a floating dtype")): unembed(head, torch.ones(1, 2, 8, dtype=torch.long))
    with pytest.raises(ValueError, match=re.escape("scale=nan must be a finite number or None")): unembed(head, torch.randn(1, 2, 8), math.nan)
    h = torch.randn(1, 2, 8)
    torch.testing.assert_close(unembed(head, h, None), head(h)); torch.testing.assert_close(unembed(head, h, 0.5), head(h * 0.5))

def test_module_arguments_and_positions_are_checked():
    from transformer_lit.model import parameter_breakdown
    with pytest.raises(TypeError, match=re.escape("module must be a torch.nn.Module, got str")): count_parameters("m")
    with pytest.raises(TypeError, match=re.escape("model must be a torch.nn.Module, got str")): parameter_breakdown("m")
    with pytest.raises(TypeError, match=re.escape("config must be a TransformerConfig, got str")): Positions("c")
    p = Positions(_tiny_cfg(positional="alibi"))
    msg = "x must be a floating torch.Tensor (the bias takes its dtype and device), got "
    with pytest.raises(TypeError, match=re.escape(msg + "str")): p.bias(3, 3, "x")
    with pytest.raises(TypeError, match=re.escape("x.dtype=torch.int64 must be a floating dtype (the bias takes x's dtype and device)")): p.bias_at(torch.tensor([0]), 3, torch.ones(1, dtype=torch.long))
    with pytest.raises(TypeError, match=re.escape("q_positions.dtype=torch.float32 must be an integer dtype")):
        p.bias_at(torch.tensor([0.0]), 3, torch.zeros(1))

def test_cache_reorder_and_static_cache_arguments():
    m, ids = lm64(), torch.zeros(2, 3, dtype=torch.long)
    E = lambda exc, msg: pytest.raises(exc, match=re.escape(msg))
    for cache in (new_cache(m), new_static_cache(m, max_len=8, batch=2)):
        m(ids, cache=cache)
        with E(TypeError, "rows.dtype=torch.float32 must be torch.int64 or torch.int32 (row indices)"): cache.reorder(torch.tensor([0.0, 1.0]))
        with E(TypeError, "rows must be a torch.Tensor of row indices, got list"): cache.reorder([0, 1])
        with E(ValueError, "rows.dim()=2 must be 1: (N,)"): cache.reorder(torch.tensor([[0, 1]]))
        with E(ValueError, "rows holds 5; every entry must be a row index in [0, 2) (the cache's batch)"): cache.reorder(torch.tensor([0, 5]))
        with E(ValueError, "rows holds -1; every entry must be a row index in [0, 2)"): cache.reorder(torch.tensor([-1, 0]))
    with E(ValueError, "rows.shape[0]=3 must equal the StaticCache's batch=2 (its buffers keep their shape)"): cache.reorder(torch.tensor([0, 1, 1]))
    with E(ValueError, "device='nope' must be None, a torch.device or a device string such as 'cpu' or 'cuda:0'"): StaticCache(1, 1, 2, 8, 4, device="nope")
    with E(TypeError, "device=3.5 must be None, a torch.device"): StaticCache(1, 1, 2, 8, 4, device=3.5)
    with E(ValueError, "attention_mask must hold only 0 and 1 (or False and True), got 7"):
        m(ids, attention_mask=torch.tensor([[1, 7, 1], [1, 1, 1]]))
    with E(TypeError, "vocab_size='11' must be a positive int"): check_targets(ids, (2, 3), "11")


def plain_generate(model, idx, n, greedy=True, temperature=1.0, generator=None):
    "Chapter 09's plain loop: re-run the whole sequence, pick from the last position's logits."
    for _ in range(n):
        z = model(idx)[:, -1]
        nxt = z.argmax(-1) if greedy else torch.multinomial((z / temperature).softmax(-1), 1, generator=generator).squeeze(-1)
        idx = torch.cat([idx, nxt[:, None]], 1)
    return idx

@pytest.mark.parametrize("kind", ["sinusoidal", "rope", "alibi"])
def test_plain_loop_equals_generate(kind):
    "The short loop chapter 09 shows and the shipped `generate` give the same tokens, greedy and seeded sampling."
    torch.manual_seed(0)
    m = DecoderOnlyLM(TransformerConfig(vocab_size=50, d_model=32, n_heads=4, n_layers=2, d_ff=64, max_len=32,
                                        positional=kind, dropout=0.0)).double().eval()
    prompt = torch.randint(0, 50, (3, 4))
    with torch.no_grad():
        greedy = plain_generate(m, prompt, 10)
        # the plain loop and generate(use_cache=False) run the same full forward on the same prefixes: the same computation
        assert torch.equal(greedy, lm_generate(m, prompt, 10, greedy=True, use_cache=False))
        assert_greedy_agrees(m, greedy, fast_generate(m, prompt, 10, greedy=True), 4, atol=1e-10)   # the cached path: a different one
        sampled = plain_generate(m, prompt, 10, False, 0.9, torch.Generator().manual_seed(5))
        assert torch.equal(sampled, lm_generate(m, prompt, 10, temperature=0.9, generator=torch.Generator().manual_seed(5), use_cache=False))


def test_assert_greedy_agrees_tells_a_near_tie_from_a_wrong_token():
    "Equal greedy runs pass; a token that is not the argmax fails; at a planted near tie the two may part; bad arguments are named."
    lm = lm64()
    prompt = torch.randint(0, 40, (2, 3), generator=torch.Generator().manual_seed(1))
    a = fast_generate(lm, prompt, 6, greedy=True)
    assert_greedy_agrees(lm, a, a.clone(), 3, atol=1e-10)
    wrong = a.clone(); wrong[0, 4] = (wrong[0, 4] + 1) % 40
    with pytest.raises(AssertionError, match=r"b\[0, 4\]=\d+ is .* below the best logit"):
        assert_greedy_agrees(lm, a, wrong, 3, atol=1e-10)
    # a forward whose two best logits tie exactly at every step: either token is greedy, so the runs may differ there
    def tied(ids):
        out = torch.full((*ids.shape, 40), -5.0, dtype=torch.float64); out[..., 0] = out[..., 1] = 1.0; return out
    x, y = prompt.new_zeros(2, 5), prompt.new_zeros(2, 5); y[:, 3:] = 1
    with pytest.raises(AssertionError, match="nothing was compared"):
        assert_greedy_agrees(tied, x, y, 3, atol=1e-10)              # every step a tie: the check is empty, and says so
    with pytest.raises(ValueError, match="prompt_len=0"):
        assert_greedy_agrees(lm, a, a, 0)
