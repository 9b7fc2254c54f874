"Decoding: the sampling filters and the repetition penalty and n-gram blocking against Hugging Face's logits processors, stop tokens, left-padded batches against one-by-one generation, beam search, and every bad input."
import dataclasses, math, re
import pytest, torch
import torch.nn.functional as F
from hypothesis import given, settings, strategies as st
from transformer_lit.model import POSITIONALS, DecoderOnlyLM, Transformer, TransformerConfig
from transformer_lit.checks import check_logits
from transformer_lit.decoding import (beam_search, filter_logits, gnmt_penalty, min_p_filter, sample_next, temperature_filter,
                                      top_k_filter, top_p_filter, repetition_penalty_filter, no_repeat_ngram_filter)
from transformer_lit.model import assert_greedy_agrees
from transformer_lit.decoding import lm_generate, seq2seq_generate, lm_beam_search, seq2seq_beam_search, new_cache, generation_defaults
from transformer_lit.decoding import KVCache
from transformer_lit.fast_decoding import fast_generate, new_static_cache

hf = pytest.importorskip("transformers.generation.logits_process")
F64 = torch.float64

# --- the filters against Hugging Face --------------------------------------------------------------------------------
def _same(ours, theirs):
    "Same kept set and the same probabilities."
    assert torch.equal(torch.isfinite(ours), torch.isfinite(theirs))
    torch.testing.assert_close(ours.softmax(-1), theirs.softmax(-1), atol=1e-6, rtol=1e-5)

logit_rows = st.integers(1, 4).flatmap(lambda B: st.integers(2, 40).flatmap(lambda V: st.lists(
    st.lists(st.one_of(st.sampled_from([-1.0, 0.0, 0.5, 2.0]), st.floats(-8, 8, width=32)), min_size=V, max_size=V),
    min_size=B, max_size=B)))                                      # small pools of repeated values give many ties

@settings(max_examples=150, deadline=None)
@given(rows=logit_rows, t=st.floats(0.05, 5.0), k=st.integers(1, 40), p=st.floats(0.01, 1.0), m=st.floats(0.0, 1.0))
def test_filters_equal_hugging_face(rows, t, k, p, m):
    z = torch.tensor(rows, dtype=torch.float32)
    ids = torch.zeros(z.shape[0], 1, dtype=torch.long)
    k = min(k, z.shape[-1])
    _same(temperature_filter(z, t), hf.TemperatureLogitsWarper(t)(ids, z.clone()))
    _same(top_k_filter(z, k), hf.TopKLogitsWarper(k)(ids, z.clone()))
    _same(top_p_filter(z, p), hf.TopPLogitsWarper(p)(ids, z.clone()))
    _same(min_p_filter(z, m), hf.MinPLogitsWarper(m)(ids, z.clone()))
    chain = hf.LogitsProcessorList([hf.TemperatureLogitsWarper(t), hf.TopKLogitsWarper(k), hf.TopPLogitsWarper(p),
                                    hf.MinPLogitsWarper(m)])
    _same(filter_logits(z, t, k, p, m), chain(ids, z.clone()))

def test_filters_on_random_logits_many_rows():
    g = torch.Generator().manual_seed(0)
    z = torch.randn(64, 1000, generator=g) * 3
    ids = torch.zeros(64, 1, dtype=torch.long)
    for p in (0.1, 0.5, 0.9, 0.999, 1.0): _same(top_p_filter(z, p), hf.TopPLogitsWarper(p)(ids, z.clone()))
    for m in (0.0, 0.05, 0.3, 0.9, 1.0): _same(min_p_filter(z, m), hf.MinPLogitsWarper(m)(ids, z.clone()))
    for k in (1, 5, 50, 1000): _same(top_k_filter(z, k), hf.TopKLogitsWarper(k)(ids, z.clone()))

def test_filter_meaning():
    z = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    fin = lambda x: torch.isfinite(x)[0].tolist()
    assert fin(top_p_filter(z, 0.5)) == [True, False, False, False]        # 0.5 alone reaches 0.5
    assert fin(top_p_filter(z, 0.8)) == [True, True, False, False]
    assert fin(top_p_filter(z, 0.81)) == [True, True, True, False]
    assert fin(min_p_filter(z, 0.3)) == [True, True, True, False]          # 0.15 >= 0.3·0.5, 0.05 < 0.15
    assert fin(min_p_filter(z, 0.0)) == [True] * 4
    assert fin(top_k_filter(torch.tensor([[1.0, 2.0, 2.0, 0.0]]), 1)) == [False, True, True, False]   # ties with the k-th stay

def test_sampling_draws_only_kept_tokens_and_is_seeded():
    z = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]])).expand(2000, -1)
    d = sample_next(z, top_p=0.8, generator=torch.Generator().manual_seed(0))
    assert set(d.tolist()) == {0, 1}
    torch.testing.assert_close((d == 0).double().mean().item(), 0.5 / 0.8, atol=0.03, rtol=0)
    d2 = sample_next(z, top_p=0.8, generator=torch.Generator().manual_seed(0))
    assert torch.equal(d, d2)
    assert set(sample_next(z, min_p=0.5, generator=torch.Generator().manual_seed(1)).tolist()) == {0, 1}

# --- bad input --------------------------------------------------------------------------------------------------------
Z = torch.zeros(2, 5)
@pytest.mark.parametrize("kw, msg", [
    (dict(top_p=0.0), "top_p=0.0 must be None or a number in (0, 1]"), (dict(top_p=1.5), "top_p=1.5 must be None or a number in (0, 1]"),
    (dict(top_p=float("nan")), "top_p=nan must be"), (dict(min_p=1.5), "min_p=1.5 must be None or a number in [0, 1]"),
    (dict(min_p=-0.1), "min_p=-0.1 must be"), (dict(top_k=0), "top_k=0 must be None or an int in [1, vocab_size=5]"),
    (dict(temperature=0.0), "temperature=0.0 must be a finite number > 0"),
    (dict(temperature=float("nan")), "temperature=nan must be a finite number > 0")])
def test_bad_sampling_arguments(kw, msg):
    with pytest.raises(ValueError, match=re.escape(msg)): sample_next(Z, **kw)

@pytest.mark.parametrize("kw, msg", [(dict(top_k=True), "top_k=True must be"), (dict(temperature=True), "temperature=True must be"),
                                     (dict(top_p="0.9"), "top_p='0.9' must be"), (dict(min_p="0.1"), "min_p='0.1' must be")])
def test_sampling_arguments_of_the_wrong_kind(kw, msg):
    "A bool or a string where a number goes is the wrong kind, a TypeError (the rule of the appendix)."
    with pytest.raises(TypeError, match=re.escape(msg)): sample_next(Z, **kw)

@pytest.mark.parametrize("greedy", [True, False])
@pytest.mark.parametrize("row, msg", [([math.nan, 0, 0, 0, 0], "logits row 1 contains NaN"), ([-math.inf] * 5, "logits row 1 is all -inf"),
                                      ([math.inf, 0, 0, 0, 0], "logits row 1 contains +inf")])
def test_bad_logits_never_reach_multinomial_or_argmax(row, msg, greedy):
    z = torch.stack([torch.zeros(5), torch.tensor(row)])
    with pytest.raises(ValueError, match=re.escape(msg)): sample_next(z, greedy=greedy)

def test_bad_logits_types():
    with pytest.raises(TypeError, match="logits must be a floating-point"): check_logits(torch.zeros(2, 3, dtype=torch.long))
    with pytest.raises(ValueError, match=re.escape("logits.shape=(3,) must be (B, V)")): check_logits(torch.zeros(3))

# --- models -----------------------------------------------------------------------------------------------------------
def lm_of(kind, seed=0, **kw):
    torch.manual_seed(seed)
    cfg = TransformerConfig(vocab_size=50, d_model=32, n_heads=4, n_layers=2, d_ff=64, max_len=64, dropout=0.0, positional=kind, **kw)
    return DecoderOnlyLM(cfg).double().eval()

def left_pad(prompts, pad=0):
    T = max(map(len, prompts))
    idx = torch.tensor([[pad] * (T - len(p)) + p for p in prompts])
    return idx, torch.tensor([[False] * (T - len(p)) + [True] * len(p) for p in prompts])

PROMPTS = [[5, 7, 9, 11, 3, 4, 8], [2], [13, 14, 15, 16]]

@pytest.mark.parametrize("kind", POSITIONALS)
def test_left_padded_logits_equal_alone(kind):
    m = lm_of(kind)
    idx, keep = left_pad(PROMPTS)
    full = m(idx, attention_mask=keep)                                     # (B, T, V)
    for b, p in enumerate(PROMPTS):
        alone = m(torch.tensor([p]))[0]                                   # (len, V)
        torch.testing.assert_close(full[b, -len(p):], alone, atol=1e-10, rtol=0)
    # the same through the cache, 2 prompt tokens then one at a time
    cache = new_cache(m); out = [m(idx[:, :5], cache=cache, attention_mask=keep[:, :5])]
    for t in range(5, idx.shape[1]): out.append(m(idx[:, t:t + 1], cache=cache, attention_mask=keep[:, :t + 1]))
    torch.testing.assert_close(torch.cat(out, 1)[keep], full[keep], atol=1e-10, rtol=0)

@pytest.mark.parametrize("kind", POSITIONALS)
@pytest.mark.parametrize("use_cache", [True, False])
def test_left_padded_generation_equals_alone(kind, use_cache):
    m = lm_of(kind)
    idx, keep = left_pad(PROMPTS)
    out = lm_generate(m, idx, 10, greedy=True, attention_mask=keep, use_cache=use_cache)
    for b, p in enumerate(PROMPTS):
        # a left-padded batch against one prompt alone: different computations (other shapes, masked pads), float64
        # logits within 1e-10 (test_left_padded_logits_equal_alone), so the tokens agree wherever the top-2 gap is clear
        alone = fast_generate(m, torch.tensor([p]), 10, greedy=True)
        assert_greedy_agrees(m, alone, torch.cat([alone[:, :len(p)], out[b:b + 1, idx.shape[1]:]], 1), len(p), atol=1e-10)
    # seeded sampling: extra padding on the left changes nothing
    idx2, keep2 = torch.cat([torch.zeros(3, 3, dtype=torch.long), idx], 1), torch.cat([torch.zeros(3, 3, dtype=torch.bool), keep], 1)
    s1 = lm_generate(m, idx, 10, temperature=1.3, top_p=0.9, attention_mask=keep, generator=torch.Generator().manual_seed(4), use_cache=use_cache)
    s2 = lm_generate(m, idx2, 10, temperature=1.3, top_p=0.9, attention_mask=keep2, generator=torch.Generator().manual_seed(4), use_cache=use_cache)
    # float64 logits within 1e-10 of each other: a seeded draw differs only within that of a cumulative-probability
    # boundary (chance ~1e-9 over these draws, on any CPU), so the samples are compared exactly
    assert torch.equal(s1[:, idx.shape[1]:], s2[:, idx2.shape[1]:])

def test_unpadded_mask_changes_nothing():
    m = lm_of("rope")
    idx = torch.randint(0, 50, (2, 6))
    torch.testing.assert_close(m(idx, attention_mask=torch.ones(2, 6, dtype=torch.bool)), m(idx), atol=1e-12, rtol=0)
    s = [fast_generate(m, idx, 8, top_k=5, generator=torch.Generator().manual_seed(2), **kw) for kw in ({}, dict(attention_mask=torch.ones(2, 6, dtype=torch.long)))]
    assert torch.equal(s[0], s[1])    # float64 logits within 1e-12 (above): a draw that close to a boundary has chance ~1e-10

def test_stop_tokens_pad_and_end_early():
    m = lm_of("rope")
    idx, keep = left_pad(PROMPTS)
    free = fast_generate(m, idx, 12, greedy=True, attention_mask=keep)[:, idx.shape[1]:]
    eos = int(free[0, 2])                                                 # the token row 0 emits third
    out = fast_generate(m, idx, 12, greedy=True, attention_mask=keep, eos_ids=eos, pad_id=1)[:, idx.shape[1]:]
    for b in range(3):
        row, ref = out[b].tolist(), free[b].tolist()
        n = ref.index(eos) + 1 if eos in ref[:out.shape[1]] else out.shape[1]
        assert row[:n] == ref[:n] and all(t == 1 for t in row[n:])         # the stop is kept, then only pads
    stops = [int(free[b, 1]) for b in range(3)]
    stopped_all = fast_generate(m, idx, 12, greedy=True, attention_mask=keep, eos_ids=stops)
    first = [min(i for i, t in enumerate(free[b].tolist()) if t in stops) for b in range(3)]
    assert stopped_all.shape[1] == idx.shape[1] + max(first) + 1         # ends when the last row has stopped

@pytest.mark.parametrize("kw, msg", [
    (dict(eos_ids=50), "eos_ids=50 must be an int in [0, vocab_size=50)"), (dict(pad_id=-1), "pad_id=-1 must be None or an int"),
    (dict(eos_ids=[3, 99]), "eos_ids=99 must be an int in [0, vocab_size=50)"), (dict(eos_ids=[-1]), "eos_ids=-1 must be an int"),
    (dict(top_p=2.0), "top_p=2.0 must be"),
    (dict(attention_mask=torch.tensor([[True, False, True]])), "attention_mask must be left-padded"),
    (dict(attention_mask=torch.ones(1, 2, dtype=torch.bool)), "attention_mask must be a bool or 0/1 integer tensor of shape (1, 3)"),
    (dict(attention_mask=torch.full((1, 3), 2)), "attention_mask must hold only 0 and 1")])
def test_bad_generation_arguments(kw, msg):
    with pytest.raises(ValueError, match=re.escape(msg)): fast_generate(lm_of("rope"), torch.ones(1, 3, dtype=torch.long), 4, **kw)

# --- against repetition: the penalty and n-gram blocking ---------------------------------------------------------------
@settings(max_examples=200, deadline=None)
@given(B=st.integers(1, 4), V=st.integers(2, 12), T=st.integers(1, 24), theta=st.floats(0.05, 5.0), n=st.integers(1, 7),
       seed=st.integers(0, 2**16), dtype=st.sampled_from([torch.float32, F64]))
def test_repetition_filters_equal_hugging_face(B, V, T, theta, n, seed, dtype):
    "The same scores as transformers' processors, bit for bit: zeros, both signs, repeated ids, T below and above n."
    g = torch.Generator().manual_seed(seed)
    z = (torch.randn(B, V, generator=g) * 3).round(decimals=1).to(dtype)    # rounding to 0.1: zeros and ties occur
    ids = torch.randint(0, V, (B, T), generator=g)                          # a few tokens in many positions: repeats
    assert torch.equal(repetition_penalty_filter(z, ids, theta), hf.RepetitionPenaltyLogitsProcessor(theta)(ids, z.clone()))
    assert torch.equal(no_repeat_ngram_filter(z, ids, n), hf.NoRepeatNGramLogitsProcessor(n)(ids, z.clone()))

def test_repetition_filters_meaning():
    z = torch.tensor([[2.0, -1.0, 0.0, -3.0, 1.0]])
    assert repetition_penalty_filter(z, torch.tensor([[0, 1, 1, 2]]), 2.0).tolist() == [[1.0, -2.0, 0.0, -3.0, 1.0]]
    banned = lambda ids, n: torch.isinf(no_repeat_ngram_filter(z, torch.tensor([ids]), n))[0].nonzero().flatten().tolist()
    assert banned([3, 1, 4, 3, 1], 3) == [4]                                # "3 1 4" occurred: 4 may not follow "3 1"
    assert banned([3, 1, 4, 3, 1], 2) == [4]                                # "1 4" occurred: 4 may not follow "1"
    assert banned([3, 1, 4, 3, 1], 1) == [1, 3, 4]                          # n = 1: every token used
    assert banned([3, 1], 3) == []                                          # no complete 3-gram yet
    keep = torch.tensor([[False, False, True, True, True]])                 # padding: in no n-gram, counts as no token
    assert torch.isinf(no_repeat_ngram_filter(z, torch.tensor([[0, 2, 0, 2, 0]]), 2, keep))[0].tolist() == [False, False, True, False, False]
    assert repetition_penalty_filter(z, torch.tensor([[0, 2, 3, 3, 3]]), 2.0, keep)[0, 0].item() == 2.0   # token 0 only in the padding

def _hf_greedy(m, idx, n_new, procs, log_probs=False):
    "Greedy decoding written as transformers runs it: the processors on the last logits (on log-softmax in its beam search)."
    seq = idx
    for _ in range(n_new):
        z = m(seq)[:, -1]
        z = procs(seq, F.log_softmax(z, -1) if log_probs else z)
        seq = torch.cat([seq, z.argmax(-1, keepdim=True)], 1)
    return seq

def _procs(repetition_penalty=None, no_repeat_ngram_size=None):
    "transformers' processors in the order its generate builds them: the penalty, then n-gram blocking."
    return hf.LogitsProcessorList(([] if repetition_penalty is None else [hf.RepetitionPenaltyLogitsProcessor(repetition_penalty)]) +
                                  ([] if no_repeat_ngram_size is None else [hf.NoRepeatNGramLogitsProcessor(no_repeat_ngram_size)]))

AGAINST = [dict(repetition_penalty=1.3), dict(repetition_penalty=0.7), dict(no_repeat_ngram_size=1), dict(no_repeat_ngram_size=2),
           dict(repetition_penalty=1.5, no_repeat_ngram_size=3)]

@pytest.mark.parametrize("kw", AGAINST)
@pytest.mark.parametrize("use_cache", [True, False])
def test_generate_against_repeats_equals_hugging_face_processors(kw, use_cache):
    "lm_generate applies the processors to every token of the row, the prompt's included, before choosing."
    m = lm_of("rope")
    idx = torch.tensor([[5, 7, 5, 7, 9], [1, 2, 3, 1, 2]])
    # float64: the cached and the uncached logits agree within 1e-12, far below any top-2 gap of these few steps
    assert torch.equal(lm_generate(m, idx, 12, greedy=True, use_cache=use_cache, **kw), _hf_greedy(m, idx, 12, _procs(**kw)))
    if kw.get("no_repeat_ngram_size") == 1:                                 # every token at most once in the whole row
        assert all(len(set(r)) == len(r) for r in lm_generate(m, idx, 12, greedy=True, **kw)[:, 4:].tolist())

@pytest.mark.parametrize("kw", AGAINST)
def test_beam_1_against_repeats_is_greedy_on_log_probabilities(kw):
    "lm_beam_search applies the processors to the log-probabilities, as transformers' beam search does; K = 1 is then greedy on them."
    m = lm_of("rope")
    idx = torch.tensor([[5, 7, 5, 7, 9], [1, 2, 3, 1, 2]])
    assert torch.equal(lm_beam_search(m, idx, 12, beam_size=1, length_penalty=0.0, **kw)[0], _hf_greedy(m, idx, 12, _procs(**kw), log_probs=True))

@pytest.mark.parametrize("n", [1, 2, 3])
def test_beam_with_no_repeat_ngrams_repeats_none(n):
    m = lm_of("rope", seed=1)
    idx = torch.tensor([[5, 7, 5, 9], [1, 2, 3, 4]])                       # row 0 repeats a token in the prompt
    out = lm_beam_search(m, idx, 14, beam_size=4, no_repeat_ngram_size=n)[0].tolist()
    for row in out:
        for i in range(idx.shape[1], len(row)):                            # no new token completes an n-gram seen before
            assert tuple(row[i - n + 1:i + 1]) not in {tuple(row[j:j + n]) for j in range(i - n + 1)}

@pytest.mark.parametrize("kw", [dict(no_repeat_ngram_size=1), dict(repetition_penalty=1.5, no_repeat_ngram_size=2)])
@pytest.mark.parametrize("use_cache", [True, False])
def test_against_repeats_left_padded_equals_alone(kw, use_cache):
    "The padding is no token: a left-padded batch gives each prompt's tokens alone, also when the pad id is a likely token."
    m = lm_of("rope")
    pad = int(lm_generate(m, torch.tensor([PROMPTS[1]]), 1, greedy=True, **kw)[0, -1])   # the token prompt [2] picks first
    idx, keep = left_pad(PROMPTS, pad=pad)
    out = lm_generate(m, idx, 10, greedy=True, attention_mask=keep, use_cache=use_cache, **kw)
    beams = lm_beam_search(m, idx, 6, beam_size=3, attention_mask=keep, **kw)[0]
    for b, p in enumerate(PROMPTS):
        # float64 logits of the padded and the lone row within 1e-10 (test_left_padded_logits_equal_alone): equal tokens
        assert torch.equal(out[b, idx.shape[1]:], lm_generate(m, torch.tensor([p]), 10, greedy=True, **kw)[0, len(p):])
        assert torch.equal(beams[b, idx.shape[1]:], lm_beam_search(m, torch.tensor([p]), 6, beam_size=3, **kw)[0][0, len(p):])

@pytest.mark.parametrize("call, exc, msg", [
    (lambda m, x: lm_generate(m, x, 3, repetition_penalty=0.0), ValueError, "repetition_penalty=0.0 must be None or a finite number > 0"),
    (lambda m, x: lm_generate(m, x, 3, repetition_penalty=float("inf")), ValueError, "repetition_penalty=inf must be"),
    (lambda m, x: lm_generate(m, x, 3, no_repeat_ngram_size=0), ValueError, "no_repeat_ngram_size=0"),
    (lambda m, x: lm_beam_search(m, x, 3, no_repeat_ngram_size=1.5), TypeError, "no_repeat_ngram_size=1.5"),
    (lambda m, x: lm_beam_search(m, x, 3, repetition_penalty=-1), ValueError, "repetition_penalty=-1 must be"),
    (lambda m, x: repetition_penalty_filter(torch.zeros(2, 50), x, 1.2), ValueError, "ids.shape[0]=1 must equal logits.shape[0]=2"),
    (lambda m, x: no_repeat_ngram_filter(torch.zeros(1, 50), x, 2, torch.ones(1, 4, dtype=torch.bool)), ValueError, "attention_mask must be"),
    (lambda m, x: no_repeat_ngram_filter(torch.zeros(1, 5), x, 2), ValueError, "ids holds ids from"),
    (lambda m, x: repetition_penalty_filter(torch.full((1, 50), math.nan), x, 1.2), ValueError, "logits row 0 contains NaN")])
def test_bad_repetition_arguments(call, exc, msg):
    with pytest.raises(exc, match=re.escape(msg)): call(lm_of("rope"), torch.tensor([[1, 2, 9]]))

# --- beam search ------------------------------------------------------------------------------------------------------
def s2s_of(seed=0, kind="sinusoidal"):
    torch.manual_seed(seed)
    cfg = TransformerConfig(vocab_size=30, d_model=32, n_heads=4, n_layers=2, d_ff=64, max_len=32, dropout=0.0, positional=kind)
    return Transformer(cfg).double().eval()

def lm_seq_log_prob(m, prompt, gen, eos=None):
    "Σ log p of the generated tokens up to and including the first eos, by one teacher-forced forward pass."
    gen = gen.tolist()
    if eos is not None and eos in gen: gen = gen[:gen.index(eos) + 1]
    full = torch.tensor([prompt + gen])
    lp = F.log_softmax(m(full[:, :-1]).double(), -1)[0, len(prompt) - 1:]
    return lp.gather(-1, torch.tensor(gen)[:, None]).sum().item()

@pytest.mark.parametrize("kind", POSITIONALS)
def test_beam_size_1_is_greedy_lm(kind):
    m = lm_of(kind)
    idx = torch.randint(0, 50, (3, 4), generator=torch.Generator().manual_seed(1))
    greedy = fast_generate(m, idx, 9, greedy=True, eos_ids=7)
    beam, logp, score = lm_beam_search(m, idx, 9, 1, eos_ids=7)
    # beam search of width 1 ranks log_softmax(logits), generate the logits, from the same cached forward: subtracting one
    # constant per row keeps the order (rounding is monotone), so the choices are the same computation's argmax
    assert torch.equal(beam, greedy)
    for b in range(3): assert math.isclose(logp[b].item(), lm_seq_log_prob(m, idx[b].tolist(), greedy[b, 4:], 7), abs_tol=1e-9)

def test_beam_size_1_is_greedy_seq2seq():
    t = s2s_of()
    src = torch.randint(3, 30, (4, 6), generator=torch.Generator().manual_seed(2))
    keep = torch.ones(4, 6, dtype=torch.bool); keep[1, 4:] = False
    assert torch.equal(seq2seq_beam_search(t, src, 10, 1, 1, eos_ids=2, src_keep=keep)[0], seq2seq_generate(t, src, 10, 1, greedy=True, eos_ids=2, src_keep=keep))

def brute_force(logp_fn, V, L, eos, alpha):
    "Best (score, log-prob) over every sequence of up to L tokens that ends at eos or at length L."
    best = (-math.inf, None)
    def go(seq, raw):
        nonlocal best
        if seq and (seq[-1] == eos or len(seq) == L):
            best = max(best, (raw / gnmt_penalty(len(seq), alpha), raw)); return
        lp = logp_fn(seq)
        for v in range(V): go(seq + [v], raw + lp[v])
    go([], 0.0)
    return best

@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), alpha=st.sampled_from([0.0, 0.6, 1.0]), L=st.integers(1, 4))
def test_exhaustive_beam_is_exact_and_beats_greedy(seed, alpha, L):
    "With K >= V^(L-1) nothing is pruned: beam search finds the best sequence, at least as good as greedy."
    V, eos = 3, 0
    table = torch.randn(40, V, generator=torch.Generator().manual_seed(seed), dtype=F64) * 2
    lp_of = lambda seq: F.log_softmax(table[hash(tuple(seq)) % 40], -1).tolist()
    def step(tokens, parents, hist={}):
        if parents is None: hist["s"] = [[] for _ in range(tokens.shape[0])]
        else: hist["s"] = [hist["s"][p] + [int(t)] for p, t in zip(parents.tolist(), tokens[:, 0].tolist())]
        return torch.tensor([lp_of(s) for s in hist["s"]], dtype=F64)
    K = V ** max(L - 1, 0)
    out, logp, score = beam_search(step, torch.zeros(1, 0, dtype=torch.long), L, K, alpha, eos_ids=eos, early_stopping=False)
    best_score, best_raw = brute_force(lp_of, V, L, eos, alpha)
    assert math.isclose(score.item(), best_score, abs_tol=1e-9) and math.isclose(logp.item(), best_raw, abs_tol=1e-9)
    g, raw = [], 0.0                                                          # greedy under the same model
    while len(g) < L and (not g or g[-1] != eos):
        lp = lp_of(g); v = max(range(V), key=lambda i: lp[i]); g.append(v); raw += lp[v]
    assert score.item() >= raw / gnmt_penalty(len(g), alpha) - 1e-9

def test_beam_can_lose_to_greedy():
    "A common explanation says beam search always finds a sequence at least as likely as greedy's; pruning can lose it."
    lp = {(): [0.5, 0.45, 0.05], (0,): [1 / 3] * 3, (1,): [0.05, 0.475, 0.475]}
    def probs(seq):
        if seq in lp: return lp[seq]
        return [1.0, 0.0, 0.0] if seq[0] == 0 else [1 / 3] * 3             # greedy's branch is certain afterwards
    def step(tokens, parents, hist={}):
        if parents is None: hist["s"] = [() for _ in range(tokens.shape[0])]
        else: hist["s"] = [hist["s"][p] + (int(t),) for p, t in zip(parents.tolist(), tokens[:, 0].tolist())]
        return torch.tensor([probs(s) for s in hist["s"]], dtype=F64).log()
    _, logp, _ = beam_search(step, torch.zeros(1, 0, dtype=torch.long), 3, 2, 0.0)
    greedy = math.log(0.5 * (1 / 3) * 1.0)
    assert logp.item() < greedy                                            # 0.45·0.475·1/3 < 0.5·1/3·1

@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 1000), K=st.integers(2, 5))
def test_beam_on_tiny_random_models(seed, K):
    "Beam search returns the best of the hypotheses it scored; with beam 1 its log-probability is the teacher-forced one."
    m = lm_of("rope", seed)
    idx = torch.randint(0, 50, (2, 3), generator=torch.Generator().manual_seed(seed))
    out, logp, score = lm_beam_search(m, idx, 5, K, length_penalty=0.0, eos_ids=3)
    for b in range(2): assert math.isclose(logp[b].item(), lm_seq_log_prob(m, idx[b].tolist(), out[b, 3:], 3), abs_tol=1e-9)
    torch.testing.assert_close(score, logp)                                 # α = 0: the score is the log-probability

@pytest.mark.parametrize("kw, exc, msg", [   # a bool is the wrong kind (TypeError), 0 the wrong value (ValueError)
    (dict(beam_size=0), ValueError, "beam_size=0 must be an int >= 1"), (dict(beam_size=True), TypeError, "beam_size=True must be an int >= 1"),
    (dict(length_penalty=float("nan")), ValueError, "length_penalty=nan must be a finite number"),
    (dict(eos_ids=99), ValueError, "eos_ids=99 must be an int")])
def test_bad_beam_arguments(kw, exc, msg):
    with pytest.raises(exc, match=re.escape(msg)): lm_beam_search(lm_of("rope"), torch.ones(1, 3, dtype=torch.long), 4, **kw)
    with pytest.raises(exc, match=re.escape(msg)): seq2seq_beam_search(s2s_of(), torch.ones(1, 3, dtype=torch.long), 4, 1, **kw)

# --- beam against greedy on chapter 12's translation task -------------------------------------------------------------
def test_beam_beats_greedy_on_translation():
    "Chapter 12's number translation, trained briefly: beam 4 (exact stopping) has at least greedy's log-probability per example."
    from transformer_lit.train import BOS, EOS, TrainConfig, make_model, make_task, train
    tr, va = make_task("translate", n_train=4000, n_val=200)
    model = make_model(tr, d_model=64, n_heads=4, n_layers=2)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)                                               # ~30 s alone; oversubscribed threads are far slower
    try: train(model, tr, TrainConfig(steps=700, batch_size=64, warmup=200, lr_factor=2.0, eval_every=10_000, progress=False))
    finally: torch.set_num_threads(threads)
    model.eval()
    b = va.batch(torch.arange(len(va)))
    L, kw = va.max_tgt + 1, dict(eos_ids=EOS, src_keep=b["src_keep"])
    greedy = seq2seq_generate(model, b["src"], L, BOS, greedy=True, **kw)
    g_out, g_logp, _ = seq2seq_beam_search(model, b["src"], L, BOS, 1, length_penalty=0.0, **kw)
    assert torch.equal(g_out[:, :greedy.shape[1]], greedy)
    exact, early = (seq2seq_beam_search(model, b["src"], L, BOS, 4, length_penalty=0.0, early_stopping=e, **kw) for e in (False, True))
    beam06 = seq2seq_beam_search(model, b["src"], L, BOS, 4, length_penalty=0.6, early_stopping=False, **kw)
    cut = lambda row: row[1:row.index(EOS)] if EOS in row else row[1:]
    em = lambda out: sum(cut(r) == va.tgt[i] for i, r in enumerate(out.tolist())) / len(va)
    print(f"\nexact match: greedy {em(greedy):.3f}, beam 4 {em(exact[0]):.3f} (early stopping {em(early[0]):.3f}, α = 0.6 {em(beam06[0]):.3f})"
          f"\nmean log-prob: greedy {g_logp.mean():.4f}, beam 4 {exact[1].mean():.4f} (early stopping {early[1].mean():.4f})"
          f"\nbeam 4 above greedy on {int((exact[1] > g_logp + 1e-9).sum())} of {len(va)}; early stopping below greedy on "
          f"{int((early[1] < g_logp - 1e-9).sum())}")
    assert (exact[1] >= g_logp - 1e-9).all()
    assert (exact[2] >= early[2] - 1e-9).all()                              # searching on never ends worse

@pytest.mark.parametrize("kind", ["rope", "learned", "alibi"])
def test_left_padded_beam_search_equals_alone(kind):
    m = lm_of(kind)
    idx, keep = left_pad(PROMPTS)
    out, logp, score = lm_beam_search(m, idx, 6, 3, eos_ids=4, attention_mask=keep)
    for b, p in enumerate(PROMPTS):
        o1, l1, s1 = lm_beam_search(m, torch.tensor([p]), 6, 3, eos_ids=4)
        n = o1.shape[1] - len(p)
        # padded batch against alone (float64, scores within 1e-9 below): a different computation; the beams agree unless two
        # hypotheses' log-probabilities tie within ~1e-10, which the seeded prompts keep far from (the scores are asserted equal)
        assert torch.equal(out[b, idx.shape[1]:idx.shape[1] + n], o1[0, len(p):])
        assert math.isclose(logp[b].item(), l1.item(), abs_tol=1e-9) and math.isclose(score[b].item(), s1.item(), abs_tol=1e-9)

def test_seq2seq_sampling_with_filters_cached_equals_uncached():
    t = s2s_of(kind="rope")
    src = torch.randint(3, 30, (3, 5), generator=torch.Generator().manual_seed(0))
    runs = [seq2seq_generate(t, src, 8, 1, temperature=0.9, top_k=10, top_p=0.9, min_p=0.05, eos_ids=2, generator=torch.Generator().manual_seed(1),
                       use_cache=c) for c in (True, False)]
    assert torch.equal(runs[0], runs[1])     # float64: a seeded draw within ~1e-10 of a boundary has chance ~1e-9

def test_early_stopping_false_never_worse():
    "Without early stopping the search runs until no live hypothesis can win, so its score is at least the early-stopped one's."
    t = s2s_of(3)
    src = torch.randint(3, 30, (6, 5), generator=torch.Generator().manual_seed(3))
    a = seq2seq_beam_search(t, src, 12, 1, 3, length_penalty=1.0, eos_ids=2)[2]
    b = seq2seq_beam_search(t, src, 12, 1, 3, length_penalty=1.0, eos_ids=2, early_stopping=False)[2]
    assert (b >= a - 1e-12).all()
    assert math.isclose(gnmt_penalty(4, 0.6), (9 / 6) ** 0.6) and gnmt_penalty(1, 0.0) == 1.0

# --- bad input to the single-step filters, the length penalty, beam_search and a decoding step -----------------------
@pytest.mark.parametrize("f,arg", [(temperature_filter, 1.0), (top_k_filter, 2), (top_p_filter, 0.5), (min_p_filter, 0.1)])
def test_each_filter_checks_its_logits(f, arg):
    with pytest.raises(TypeError, match=re.escape("logits must be a floating-point torch.Tensor (B, V), got str")): f("z", arg)
    with pytest.raises(ValueError, match=re.escape("logits row 1 contains NaN; every score must be a number or -inf")):
        f(torch.tensor([[0.0, 1.0], [math.nan, 0.0]]), arg)
    with pytest.raises(ValueError, match=re.escape("logits row 0 is all -inf")): f(torch.full((1, 3), -math.inf), arg)

@pytest.mark.parametrize("args,exc,msg", [
    ((-1,), ValueError, "length=-1 must be an int >= 0"), (("3",), TypeError, "length='3' must be an int >= 0"),
    ((torch.tensor([3, -2]),), ValueError, "length holds -2; every length must be >= 0"),
    ((torch.tensor([True]),), TypeError, "length.dtype=torch.bool must be an integer or floating dtype"),
    ((3, math.nan), ValueError, "alpha=nan must be a finite number (GNMT's α; 0 for none)"),
    ((3, "0.6"), TypeError, "alpha='0.6' must be a finite number")])
def test_gnmt_penalty_rejects(args, exc, msg):
    with pytest.raises(exc, match=re.escape(msg)): gnmt_penalty(*args)
    assert torch.allclose(gnmt_penalty(torch.tensor([1, 4])), torch.tensor([1.0, 1.5 ** 0.6]))   # a tensor of lengths works

_uniform = lambda tokens, parents: torch.log_softmax(torch.zeros(tokens.shape[0], 5, dtype=F64), -1)   # V = 5

@pytest.mark.parametrize("step,prefix,kw,exc,msg", [
    (3, torch.tensor([[1]]), {}, TypeError, "step=3 must be callable: step(tokens, parents) -> log-probabilities (N, V)"),
    (_uniform, "p", {}, TypeError, "prefix must be a torch.Tensor of token ids (B, T0), got str"),
    (_uniform, torch.tensor([[1.0]]), {}, TypeError, "prefix.dtype=torch.float32 must be torch.int64 or torch.int32"),
    (_uniform, torch.tensor([1]), {}, ValueError, "prefix.dim()=1 must be 2: (B, T0)"),
    (_uniform, torch.tensor([[7]]), {}, ValueError, "prefix holds ids from 7 to 7; every id must be in [0, vocab_size=5)"),
    (_uniform, torch.tensor([[1]]), dict(eos_ids=5), ValueError, "eos_ids=5 must be an int in [0, vocab_size=5)"),
    (_uniform, torch.tensor([[1]]), dict(pad_id=-1), ValueError, "pad_id=-1 must be an int >= 0"),
    (_uniform, torch.tensor([[1]]), dict(pad_id=5), ValueError, "pad_id=5 must be an int in [0, vocab_size=5)"),
    (lambda t, p: _uniform(t[:1], p), torch.tensor([[1]]), {}, ValueError,
     "step log-probabilities.shape=(1, 5) must be (N, V) with N = B·beam_size = 2")])
def test_beam_search_rejects(step, prefix, kw, exc, msg):
    with pytest.raises(exc, match=re.escape(msg)): beam_search(step, prefix, 2, 2, **kw)

def test_beam_search_empty_prefix_still_works():
    out, lp, _ = beam_search(_uniform, torch.zeros(1, 0, dtype=torch.long), 2, 2, length_penalty=0.0)
    assert out.shape == (1, 2) and math.isclose(lp.item(), 2 * math.log(1 / 5))

def test_generate_checks_what_its_step_returns():
    torch.manual_seed(0)
    c = TransformerConfig(vocab_size=11, d_model=8, n_heads=2, n_layers=1, d_ff=16, dropout=0.0, max_len=16)
    lm, t, ids = DecoderOnlyLM(c).eval(), Transformer(c).eval(), torch.tensor([[1, 2, 3]])
    with pytest.raises(TypeError, match=re.escape("step must return floating logits (B, T, V) like the model, got str")):
        lm_generate(lm, ids, 2, step=lambda *a, **kw: "z")
    with pytest.raises(ValueError, match=re.escape("step returned logits of shape (1, 1, 3); they must be (B, T, V) with B=1, V=vocab_size=11")):
        lm_generate(lm, ids, 2, greedy=True, step=lambda *a, **kw: torch.zeros(1, 1, 3))
    with pytest.raises(ValueError, match=re.escape("step returned logits of shape (2, 1, 11)")):
        seq2seq_generate(t, ids, 2, 1, greedy=True, step=lambda *a, **kw: torch.zeros(2, 1, 11))


def test_min_p_one_keeps_the_top_token_and_its_ties():
    "min_p = 1 is legal (transformers accepts [0, 1]): only the most likely token survives, with any exact ties."
    z = torch.tensor([[2.0, 1.0, 2.0, -1.0], [0.5, 3.0, 0.0, 0.0]])
    kept = torch.isfinite(min_p_filter(z, 1.0))
    assert kept.tolist() == [[True, False, True, False], [False, True, False, False]]
    _same(min_p_filter(z, 1.0), hf.MinPLogitsWarper(1.0)(torch.zeros(2, 1, dtype=torch.long), z.clone()))
    assert sample_next(z[1:], min_p=1.0, generator=torch.Generator().manual_seed(0)).item() == 1


# ---------------------------------------------------------------- the fast decoding step of lm_generate (chapter 11)
@pytest.mark.parametrize("kw", [dict(positional="learned", activation="gelu_tanh", scale_embeddings=False),
                                dict(positional="sinusoidal"), dict(positional="none", final_norm=False),
                                dict(positional="rope", norm="rms", activation="swiglu", n_kv_heads=2, bias=False),
                                dict(positional="rope", n_kv_heads=1, tie_embeddings=False, rope_scaling={"rope_type": "linear", "factor": 2.0})])
def test_fast_decode_step_equals_forward(kw):
    "`_decode_step` gives forward's logits (float64) step after step, and generate gives the same tokens as forward per token."
    from transformer_lit.fast_decoding import _decode_step, _fast_path_ok             # chapter 11
    torch.manual_seed(0)
    m = DecoderOnlyLM(TransformerConfig(vocab_size=50, d_model=32, n_heads=4, n_layers=2, d_ff=64, max_len=64, dropout=0.0, **kw)).double().eval()
    prompt = torch.randint(0, 50, (3, 5))
    assert _fast_path_ok(m, prompt)
    fast, ref = new_cache(m), new_cache(m)
    m(prompt, cache=fast); m(prompt, cache=ref)
    for tok in torch.randint(0, 50, (25, 3, 1)):                       # past the first buffer's 16 slots
        torch.testing.assert_close(_decode_step(m, tok, fast), m(tok, cache=ref), rtol=0, atol=1e-12)
    # the fast step, forward per token and no cache are different computations; logits within 1e-12 (asserted above)
    greedy = fast_generate(m, prompt, 30, greedy=True)
    assert_greedy_agrees(m, greedy, lm_generate(m, prompt, 30, greedy=True, step=m), 5, atol=1e-10)
    assert_greedy_agrees(m, greedy, lm_generate(m, prompt, 30, greedy=True, use_cache=False), 5, atol=1e-10)
    g = lambda: torch.Generator().manual_seed(5)      # seeded sampling: a draw within 1e-10 of a boundary has chance ~1e-8
    assert torch.equal(fast_generate(m, prompt, 30, temperature=0.8, top_k=10, generator=g()),
                       lm_generate(m, prompt, 30, temperature=0.8, top_k=10, generator=g(), step=m))

@pytest.mark.parametrize("kw", [dict(positional="learned", activation="gelu_tanh", scale_embeddings=False),
                                dict(positional="sinusoidal"), dict(positional="none", final_norm=False),
                                dict(positional="rope", norm="rms", activation="swiglu", n_kv_heads=2, bias=False),
                                dict(positional="rope", n_kv_heads=1, rope_scaling={"rope_type": "dynamic", "factor": 2.0,
                                                                                    "original_max_position_embeddings": 8})])
def test_fast_decode_step_over_a_static_cache_equals_forward(kw):
    "With a StaticCache (left-padded rows too) `_decode_step` gives forward's logits (float64), keeps the same record of real tokens, and generate the same tokens."
    from transformer_lit.fast_decoding import _decode_step, _fast_path_ok
    torch.manual_seed(0)
    m = DecoderOnlyLM(TransformerConfig(vocab_size=50, d_model=32, n_heads=4, n_layers=2, d_ff=64, max_len=64, dropout=0.0, **kw)).double().eval()
    prompt = torch.randint(0, 50, (3, 5))
    padded = torch.tensor([[0, 0, 1, 1, 1], [1] * 5, [0, 1, 1, 1, 1]])   # rows 0 and 2 left-padded
    for mask in (None, padded):
        fast, ref = new_static_cache(m, max_len=30, batch=3), new_static_cache(m, max_len=30, batch=3)
        assert _fast_path_ok(m, prompt, fast)
        m(prompt, cache=fast, attention_mask=mask); m(prompt, cache=ref, attention_mask=mask)
        for tok in torch.randint(0, 50, (25, 3, 1)):                       # up to the last slot
            torch.testing.assert_close(_decode_step(m, tok, fast), m(tok, cache=ref), rtol=0, atol=1e-12)
        assert int(fast.pos) == int(ref.pos) == 30 and torch.equal(fast.keep, ref.keep) and torch.equal(fast.n_real, ref.n_real)
        fwd = m if mask is None else (lambda ids: m(ids, attention_mask=torch.cat([mask, mask.new_ones(3, ids.shape[1] - 5)], 1)))
        assert_greedy_agrees(fwd, fast_generate(m, prompt, 20, greedy=True, static_cache=True, attention_mask=mask),
                           lm_generate(m, prompt, 20, greedy=True, attention_mask=mask, cache=new_static_cache(m, 25, 3), step=m), 5, atol=1e-10)
    assert_greedy_agrees(m, fast_generate(m, prompt, 20, greedy=True, static_cache=True), fast_generate(m, prompt, 20, greedy=True), 5, atol=1e-10)

def test_fast_decode_step_is_taken_only_where_it_is_exact(monkeypatch):
    "Training mode, ALiBi, post-norm, the math backend, hooks and padding with a growing cache take forward for every token; a static cache (padded too) takes the fast step."
    import transformer_lit.fast_decoding as fd                            # chapter 11: fast_generate takes the step from there
    calls = []
    real = fd._decode_step
    monkeypatch.setattr(fd, "_decode_step", lambda *a: calls.append(1) or real(*a))
    torch.manual_seed(0)
    base = dict(vocab_size=50, d_model=32, n_heads=4, n_layers=2, d_ff=64, max_len=64, dropout=0.0)
    prompt = torch.randint(0, 50, (2, 4))
    m = DecoderOnlyLM(TransformerConfig(**base)).eval()
    fast_generate(m, prompt, 6, greedy=True)
    assert len(calls) == 5                                              # the prompt through forward, then 5 fast steps
    for other in (dict(positional="alibi"), dict(norm_first=False), dict(backend="math")):
        calls.clear(); fast_generate(DecoderOnlyLM(TransformerConfig(**base, **other)).eval(), prompt, 6, greedy=True)
        assert not calls, other
    calls.clear(); m.train(); fast_generate(m, prompt, 6, greedy=True); m.eval(); assert not calls
    h = m.blocks[1].register_forward_hook(lambda *a: None)
    calls.clear(); fast_generate(m, prompt, 6, greedy=True); h.remove(); assert not calls
    calls.clear(); fast_generate(m, prompt, 6, greedy=True, attention_mask=torch.ones_like(prompt, dtype=torch.bool)); assert not calls
    calls.clear(); fast_generate(m, prompt, 6, greedy=True, static_cache=True); assert len(calls) == 5   # a static cache: the fast step
    calls.clear(); fast_generate(m, prompt, 6, greedy=True, static_cache=True, attention_mask=torch.ones_like(prompt)); assert len(calls) == 5


# ---------------------------------------------------------------- chapter 10 and chapter 11's module
# --- where "with or without the cache, the same logits" holds -----------------------------------------------------------
def _stepwise_logits(forward_full, forward_cached, seq, prompt_len):
    "(uncached, cached) logits (B, T, V): generate's loop without the cache (each prefix re-run, its last row) and with it."
    T = seq.shape[1]
    uncached = torch.stack([forward_full(seq[:, :t])[:, -1] for t in range(1, T + 1)], 1)
    return uncached, forward_cached(seq, prompt_len)

def test_dynamic_ntk_cached_logits_part_from_uncached_past_the_original_length_as_in_transformers(tmp_path):
    "RoPE scaled four ways, float64: cached == uncached to rounding, except dynamic NTK once a prefix passes L, where the course's model and transformers' LLaMA part the same way."
    from transformers import LlamaConfig, LlamaForCausalLM
    from transformer_lit.checkpoints import from_pretrained
    L0, T, P = 8, 16, 4
    seq = torch.randint(0, 50, (2, T), generator=torch.Generator().manual_seed(1))
    def ours_cached(m):
        def run(s, p):
            cache = new_cache(m)
            return torch.cat([m(s[:, :p], cache=cache)] + [m(s[:, t:t + 1], cache=cache) for t in range(p, s.shape[1])], 1)
        return run
    extra = {"linear": {}, "yarn": dict(original_max_position_embeddings=L0),
             "llama3": dict(original_max_position_embeddings=L0, low_freq_factor=1.0, high_freq_factor=4.0),
             "dynamic": dict(original_max_position_embeddings=L0)}
    with torch.no_grad():
        for kind, kw in extra.items():
            torch.manual_seed(0)
            m = DecoderOnlyLM(TransformerConfig(vocab_size=50, d_model=32, n_heads=4, n_layers=2, d_ff=64, max_len=32, dropout=0.0,
                                                positional="rope", rope_scaling=dict(rope_type=kind, factor=2.0, **kw))).double().eval()
            un, ca = _stepwise_logits(m, ours_cached(m), seq, P)
            gap = (un - ca).abs().amax((0, 2))                              # (T,): the largest difference at each step
            assert gap[:L0].max() < 1e-12, kind                              # prefixes of at most L tokens: float64 rounding
            if kind == "dynamic": assert gap[L0:].min() > 1e-6               # every longer prefix: the scale differs
            else: assert gap[L0:].max() < 1e-12, kind
        # transformers' LLaMA with dynamic NTK (its original length is max_position_embeddings); weights of std 0.5, so
        # that attention depends on positions enough for the gap to stand far above float32's rounding of the angles
        cfg = LlamaConfig(vocab_size=50, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                          num_key_value_heads=4, max_position_embeddings=L0, rms_norm_eps=1e-6, initializer_range=0.5,
                          rope_parameters={"rope_type": "dynamic", "factor": 2.0, "rope_theta": 10000.0})
        torch.manual_seed(0)
        llama = LlamaForCausalLM(cfg).double().eval()
        def hf_cached(s, p):
            out = llama(s[:, :p], use_cache=True); rows = [out.logits]
            for t in range(p, s.shape[1]):
                out = llama(s[:, t:t + 1], past_key_values=out.past_key_values, use_cache=True); rows.append(out.logits)
            return torch.cat(rows, 1)
        hf_un, hf_ca = _stepwise_logits(lambda s: llama(s).logits, hf_cached, seq, P)
        hf_gap = (hf_un - hf_ca).abs().amax((0, 2))
        assert hf_gap[:L0].max() < 1e-12 and hf_gap[L0:].min() > 1e-6
        llama.save_pretrained(tmp_path)                                       # the same weights in the course's model
        ours = from_pretrained(tmp_path, dtype=F64).eval()
        un, ca = _stepwise_logits(ours, ours_cached(ours), seq, P)
        # transformers computes the rotation angles in float32: angles up to 16 radians with relative error 2^-24, so cos
        # and sin within ~1e-6, which two layers may amplify a few times: logits within 1e-5 of their largest size
        tol = 1e-5 * hf_un.abs().max().item()
        torch.testing.assert_close(un, hf_un, rtol=0, atol=tol)              # uncached: the same numbers
        torch.testing.assert_close(ca, hf_ca, rtol=0, atol=tol)              # cached: the same (different) numbers
        assert hf_gap[L0:].min() > 10 * tol                                  # and the gap stands far above that bound

# --- against transformers' generate on tiny random LLaMA checkpoints: stops, scores, streaming, beam search -----------------
def _tiny_llama(path, generation=None, seed=0):
    "A random LlamaForCausalLM saved under `path` (with a generation_config.json when `generation` is a dict), and the course's copy."
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM
    from transformer_lit.checkpoints import from_pretrained
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, max_position_embeddings=64, rms_norm_eps=1e-6, initializer_range=0.2,
                      bos_token_id=None, eos_token_id=None, pad_token_id=None)
    LlamaForCausalLM(cfg).eval().save_pretrained(path)
    if generation is not None: GenerationConfig(**generation).save_pretrained(path)   # replaces the file save_pretrained wrote
    return LlamaForCausalLM.from_pretrained(path).eval(), from_pretrained(path).eval()

def _hf(ref, prompt, **kw):
    return ref.generate(prompt, attention_mask=torch.ones_like(prompt), output_scores=True, return_dict_in_generate=True, **kw)

def _bound(scores):
    "Float32 logits computed two ways (ours, transformers'): within 1e-5 of their largest size (the chapter 14 bound)."
    return 1e-5 * scores[torch.isfinite(scores)].abs().max().item()

PROMPT = torch.randint(0, 128, (3, 6), generator=torch.Generator().manual_seed(3))

def test_generation_defaults_stop_where_transformers_stops(tmp_path):
    "A generation_config.json with three stop ids (as LLaMA-3.x has): generation_defaults makes lm_generate stop, pad and score as transformers does."
    ref, ours = _tiny_llama(tmp_path / "free")
    with torch.no_grad():
        free = _hf(ref, PROMPT, max_new_tokens=12, do_sample=False, pad_token_id=0)
        hf_scores = torch.stack(free.scores, 1)                              # (3, 12, V): greedy, so the raw logits
        top2 = hf_scores.topk(2, -1).values
        assert (top2[..., 0] - top2[..., 1]).min() > 2 * _bound(hf_scores)    # no near tie: the tokens must be equal
        new = free.sequences[:, 6:]
        eos = [int(new[0, 2]), int(new[1, 5]), 127 if 127 not in new else 126]   # rows 0 and 1 stop at steps 3 and 6
        ref, ours = _tiny_llama(tmp_path / "eos", dict(eos_token_id=eos, pad_token_id=1, max_new_tokens=12, repetition_penalty=1.2))
        defaults = generation_defaults(tmp_path / "eos")
        assert defaults == dict(greedy=True, eos_ids=eos, pad_id=1, max_new_tokens=12, repetition_penalty=1.2)
        want = _hf(ref, PROMPT)                                               # transformers reads the same file
        got, scores = lm_generate(ours, PROMPT, return_scores=True, **defaults)
    assert got.shape[1] < 6 + 12 and (got[:, 6:] == 1).any()                # it stopped early, and pads follow a stop
    assert torch.equal(got, want.sequences)                                  # the same tokens, stops and pads
    hf_scores = torch.stack(want.scores, 1)
    torch.testing.assert_close(scores, hf_scores, rtol=0, atol=_bound(hf_scores))   # the penalised logits, step by step

def test_sampling_defaults_and_scores_equal_transformers(tmp_path):
    "A LLaMA-3.x-like sampling config (do_sample, temperature 0.6, top_p 0.9, no top_k): transformers adds top_k=50, and so does generation_defaults; the first step's scores agree."
    ref, ours = _tiny_llama(tmp_path, dict(do_sample=True, temperature=0.6, top_p=0.9, eos_token_id=[5, 6, 7], repetition_penalty=1.3))
    defaults = generation_defaults(tmp_path)
    assert defaults == dict(greedy=False, eos_ids=[5, 6, 7], temperature=0.6, top_k=50, top_p=0.9, min_p=None, repetition_penalty=1.3)
    with torch.no_grad():
        theirs = torch.stack(_hf(ref, PROMPT, max_new_tokens=1).scores, 1)   # step 1: the same prompt, no draw yet
        got, scores = lm_generate(ours, PROMPT, 1, generator=torch.Generator().manual_seed(0), return_scores=True, **defaults)
    assert torch.equal(torch.isfinite(scores), torch.isfinite(theirs))      # the same tokens kept by top-k, then top-p
    assert int(torch.isfinite(scores).sum(-1).max()) <= 50
    torch.testing.assert_close(scores[torch.isfinite(scores)], theirs[torch.isfinite(theirs)], rtol=0, atol=_bound(theirs))
    assert torch.isfinite(scores.gather(-1, got[:, 6:, None])).all()       # each drawn token was a kept one

def test_streamer_sees_what_transformers_streamer_sees(tmp_path):
    "transformers hands its streamer the prompt, then each new token; lm_generate's streamer gets the new tokens, the same ones."
    from transformers.generation.streamers import BaseStreamer
    class Collect(BaseStreamer):
        def __init__(self): self.puts, self.ended = [], False
        def put(self, value): self.puts.append(value.clone())
        def end(self): self.ended = True
    ref, ours = _tiny_llama(tmp_path)
    theirs, mine = Collect(), []
    with torch.no_grad():
        want = ref.generate(PROMPT[:1], attention_mask=torch.ones_like(PROMPT[:1]), max_new_tokens=8, do_sample=False, streamer=theirs)
        got = lm_generate(ours, PROMPT[:1], 8, greedy=True, streamer=mine.append)
    assert torch.equal(got, want) and theirs.ended
    assert torch.equal(theirs.puts[0], PROMPT[:1]) and torch.equal(torch.cat(theirs.puts[1:]), torch.cat(mine))   # (1,) per step

@pytest.mark.parametrize("early_stopping, hf_early", [(True, True), (False, "never")])
def test_beam_search_equals_transformers(tmp_path, early_stopping, hf_early):
    "α = 0 (raw log-probabilities, where GNMT's penalty and transformers' |Y|^α agree), two stop ids: the same trimmed tokens and scores."
    ref, ours = _tiny_llama(tmp_path)
    with torch.no_grad():
        free = ref.generate(PROMPT, attention_mask=torch.ones_like(PROMPT), max_new_tokens=10, num_beams=3, do_sample=False, pad_token_id=1)
        eos = [int(free[0, 8]), int(free[2, 10])]                             # tokens the beams reach early
        kw = dict(max_new_tokens=10, num_beams=3, do_sample=False, length_penalty=0.0, early_stopping=hf_early, eos_token_id=eos, pad_token_id=1)
        want = _hf(ref, PROMPT, **kw)
        got, logp, score = lm_beam_search(ours, PROMPT, 10, 3, length_penalty=0.0, eos_ids=eos, pad_id=1, early_stopping=early_stopping)
    assert got.shape[1] < 6 + 10                                             # trimmed: as long as the longest returned
    assert torch.equal(got, want.sequences)
    # transformers sums float32 log-probabilities: 10 terms of size <= ~10, each rounded to 2^-24 relative, plus the logits' bound
    torch.testing.assert_close(score.float(), want.sequences_scores, rtol=0, atol=10 * (10 * 2**-24 + _bound(torch.stack(want.scores))))
    assert torch.equal(logp, score)                                          # α = 0: the score is the log-probability

def test_generation_defaults_fall_back_to_config_json(tmp_path):
    "Without generation_config.json, transformers takes the generation settings from config.json; so does generation_defaults."
    from transformers import GenerationConfig, LlamaConfig
    LlamaConfig(vocab_size=128, eos_token_id=[3, 4], pad_token_id=0).save_pretrained(tmp_path)
    (tmp_path / "generation_config.json").unlink(missing_ok=True)
    want = GenerationConfig.from_model_config(LlamaConfig.from_pretrained(tmp_path))   # what generate uses for it
    assert generation_defaults(tmp_path) == dict(greedy=not want.do_sample, eos_ids=want.eos_token_id, pad_id=want.pad_token_id)
    assert generation_defaults(str(tmp_path))["eos_ids"] == [3, 4]

def test_generation_defaults_top_k_past_the_vocabulary_is_no_filter(tmp_path):
    "transformers clamps its default top_k=50 to a smaller vocabulary (every token kept); generation_defaults gives no top-k filter."
    import json
    (tmp_path / "config.json").write_text(json.dumps(dict(vocab_size=32)))
    (tmp_path / "generation_config.json").write_text(json.dumps(dict(do_sample=True)))
    assert generation_defaults(tmp_path) == dict(greedy=False, eos_ids=None, temperature=1.0, top_k=None, top_p=None, min_p=None)
    (tmp_path / "config.json").write_text(json.dumps(dict(vocab_size=64)))
    assert generation_defaults(tmp_path)["top_k"] == 50


# ---------------------------------------------------------------- the growing KVCache (moved with the cache from chapter 01)
def test_kv_cache_grows_amortised_and_equals_concatenation():
    "Appending writes into spare slots (few allocations); the keys and values are what torch.cat would give, after a reassignment too."
    torch.manual_seed(0)
    c, ref_k, ref_v, buffers = KVCache(), [], [], set()
    for t in (3, 1, 1, 7, 1, 20, 1, 1):
        k, v = torch.randn(2, 2, t, 4), torch.randn(2, 2, t, 5)
        out_k, out_v = c.append(k, v)
        ref_k.append(k); ref_v.append(v); buffers.add(c._k.data_ptr())
        assert torch.equal(out_k, torch.cat(ref_k, -2)) and torch.equal(out_v, torch.cat(ref_v, -2))
    assert len(c) == 35 and len(buffers) <= 3
    c.k, c.v = c.k[[1, 0]], c.v[[1, 0]]                          # beam search's reorder assigns new tensors
    kept = c.k.clone()
    k, v = torch.randn(2, 2, 1, 4), torch.randn(2, 2, 1, 5)
    c.append(k, v)
    assert torch.equal(c.k, torch.cat([kept, k], -2)) and len(c) == 36
