"""torch.compile takes the models whole (fullgraph=True): forward with and without targets, training and evaluation,
every positional kind, every RoPE scaling type and grouped-query attention, gradients included; a decoding step over a `StaticCache` compiles
once; and the forward pass never reads a tensor's value on the host (no device-to-host synchronisation on a GPU)."""
import dataclasses, re
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from transformer_lit.model import DecoderOnlyLM, Transformer, TransformerConfig
from transformer_lit.fast_decoding import StaticCache            # chapter 11
from transformer_lit.model import assert_greedy_agrees, POSITIONALS
from transformer_lit.positional import rope_scaling_types
import transformer_lit.long_context  # noqa: F401  (registers the scaling types)
from transformer_lit.checks import _SCALING_KEYS
from transformer_lit.decoding import lm_generate, seq2seq_generate, lm_beam_search, seq2seq_beam_search, new_cache
from transformer_lit.fast_decoding import fast_generate, new_static_cache

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny ops: one thread (tests/conftest.py)
KINDS = ("sinusoidal", "learned", "rope", "alibi")
CFG = TransformerConfig(vocab_size=40, d_model=16, n_heads=4, n_layers=2, d_ff=32, max_len=24, dropout=0.1, n_kv_heads=2)

def cfg(**kw): return dataclasses.replace(CFG, **kw)

def ids(*shape, seed=0, high=40): return torch.randint(0, high, shape, generator=torch.Generator().manual_seed(seed))

def counting_backend(inner="eager"):
    "A backend that records every graph dynamo hands it, then runs it with `inner`; (backend, list of graphs)."
    graphs = []
    def backend(gm, example_inputs):
        graphs.append(gm)
        if inner == "eager": return gm.forward
        from torch._dynamo.backends.debugging import aot_eager
        return aot_eager(gm, example_inputs)
    return backend, graphs

@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset(); yield; torch._dynamo.reset()

def grads(model): return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}

def run_both(model, compiled, args, kwargs, train):
    "Eager and compiled outputs (and parameter gradients when a loss comes back) from the same seed."
    model.train(train)
    results = []
    for fn in (model, compiled):
        model.zero_grad(set_to_none=True)
        torch.manual_seed(1)                                               # the same dropout masks in both
        out = fn(*args, **kwargs)
        if isinstance(out, tuple): out[1].backward()
        results.append((out, grads(model)))
    return results

def assert_same(a, b, tol=1e-12):
    (out_e, g_e), (out_c, g_c) = a, b
    for x, y in zip(out_e if isinstance(out_e, tuple) else (out_e,), out_c if isinstance(out_c, tuple) else (out_c,)):
        torch.testing.assert_close(y, x, rtol=0, atol=tol)
    assert g_e.keys() == g_c.keys()
    for n in g_e: torch.testing.assert_close(g_c[n], g_e[n], rtol=0, atol=tol, msg=n)

# ---------------------------------------------------------------- whole-model graphs
@pytest.mark.parametrize("kind", ["rope", "alibi"])               # the two kinds that broke most (the fullgraph tests cover all)
def test_no_graph_breaks(kind):
    torch.manual_seed(0)
    lm, s2s = DecoderOnlyLM(cfg(positional=kind)), Transformer(cfg(positional=kind, pad_id=0))
    x = ids(2, 7, seed=1)
    for explained in (torch._dynamo.explain(lm)(x, x), torch._dynamo.explain(s2s)(x, x, targets=x),
                      torch._dynamo.explain(lm)(x, attention_mask=torch.ones(2, 7, dtype=torch.long))):
        assert explained.graph_break_count == 0, [b.reason for b in explained.break_reasons]
        assert explained.graph_count == 1

# every RoPE scaling type the package has, with its original length below the 12 tokens the tests run (dynamic NTK
# rescales only past it); a type added later without an entry here fails test_every_scaling_type_is_listed
L0 = 8
SCALINGS = {"linear": dict(factor=2.0), "dynamic": dict(factor=2.0, original_max_position_embeddings=L0),
            "yarn": dict(factor=2.0, original_max_position_embeddings=L0),
            "llama3": dict(factor=2.0, original_max_position_embeddings=L0, low_freq_factor=1.0, high_freq_factor=4.0)}
EVERY_KIND = [(kind, None) for kind in POSITIONALS] + [("rope", dict(rope_type=t, **kw)) for t, kw in SCALINGS.items()]

def test_every_scaling_type_is_listed():
    assert set(SCALINGS) == set(rope_scaling_types) == set(_SCALING_KEYS) - {"default"}
    assert {k for k, _ in EVERY_KIND} == set(POSITIONALS)

@pytest.mark.parametrize("kind,scaling", EVERY_KIND, ids=[k if s is None else f"rope-{s['rope_type']}" for k, s in EVERY_KIND])
def test_every_kind_compiles_without_graph_breaks(kind, scaling):
    "Every positional kind and every scaling type, past the original length: forward (training, left-padded, evaluation), the encoder-decoder model, a static cache's prompt and step; one graph each, and fullgraph's output equals eager's."
    torch.manual_seed(0)
    c = cfg(positional=kind, rope_scaling=scaling)
    lm, s2s = DecoderOnlyLM(c).double(), Transformer(dataclasses.replace(c, pad_id=0)).double()
    x, y = ids(2, 12, seed=1), ids(2, 12, seed=2)                      # 12 positions > L0 = 8
    keep = torch.ones(2, 12, dtype=torch.bool); keep[1, :3] = False    # left padding
    explained = [torch._dynamo.explain(lm)(x, y), torch._dynamo.explain(lm)(x, attention_mask=keep),
                 torch._dynamo.explain(s2s)(x, x, targets=x)]
    lm.eval()
    cache = new_static_cache(lm, max_len=16, batch=2)
    explained += [torch._dynamo.explain(lm)(x[:, :10], cache=cache), torch._dynamo.explain(lm)(x[:, 10:11], cache=cache)]
    for e in explained:
        assert e.graph_break_count == 0, [b.reason for b in e.break_reasons]
        assert e.graph_count == 1
    torch._dynamo.reset()
    cm = torch.compile(lm, fullgraph=True, backend="eager")
    assert_same(*run_both(lm, cm, (x, y), {}, True))                   # logits, loss and every gradient
    assert_same(*run_both(lm, cm, (x,), dict(attention_mask=keep), False))

# backend="eager" runs dynamo's capture (what fullgraph is about) and is fast; "aot_eager" also traces the backward
# through AOTAutograd, so it runs where gradients are compared in a compiled backward
CASES = [(kind, train, "eager") for kind in KINDS for train in (True, False)] + [("rope", True, "aot_eager"), ("alibi", True, "aot_eager")]

@pytest.mark.parametrize("kind,train,backend", CASES)
def test_lm_fullgraph_equals_eager(kind, train, backend):
    torch.manual_seed(0)
    m = DecoderOnlyLM(cfg(positional=kind)).double()
    cm = torch.compile(m, fullgraph=True, backend=backend)
    x, y = ids(2, 9, seed=1), ids(2, 9, seed=2)
    assert_same(*run_both(m, cm, (x, y), {}, train))                   # logits, loss and every gradient
    assert_same(*run_both(m, cm, (x,), {}, train))                     # logits only
    keep = torch.ones(2, 9, dtype=torch.bool); keep[1, :3] = False     # left padding
    assert_same(*run_both(m, cm, (x, y), dict(attention_mask=keep), train))

@pytest.mark.parametrize("kind,train,backend", CASES)
def test_transformer_fullgraph_equals_eager(kind, train, backend):
    torch.manual_seed(0)
    t = Transformer(cfg(positional=kind, pad_id=0)).double()           # pad_id: padding masks in both stacks
    ct = torch.compile(t, fullgraph=True, backend=backend)
    src, tgt, y = ids(2, 8, seed=1), ids(2, 6, seed=2), ids(2, 6, seed=3)
    src[1, 5:] = 0                                                     # row 1 is padded
    assert_same(*run_both(t, ct, (src, tgt), dict(targets=y), train))
    assert_same(*run_both(t, ct, (src, tgt), {}, train))

def test_metadata_checks_still_raise_under_compile():
    m = DecoderOnlyLM(cfg())
    x = ids(2, 5)
    with pytest.raises(TypeError, match=re.escape("idx.dtype=torch.float32 must be torch.int64 or torch.int32")):
        torch.compile(m, backend="eager")(x.float())                   # dynamo runs the check at trace time: the same error
    with pytest.raises(Exception, match=re.escape("targets.dtype=torch.bool must be torch.int64 or torch.int32")):
        torch.compile(m, fullgraph=True, backend="eager")(x, x.bool())  # fullgraph: wrapped by dynamo, with our message

# ---------------------------------------------------------------- a decoding step that compiles once
@pytest.mark.parametrize("kind", KINDS)
def test_static_step_compiles_once(kind):
    torch.manual_seed(0)
    m = DecoderOnlyLM(cfg(positional=kind)).double().eval()
    backend, graphs = counting_backend()
    cm = torch.compile(m, fullgraph=True, backend=backend)
    x = ids(2, 12, seed=1)
    full = m(x)
    eager_cache, compiled_cache = new_static_cache(m, max_len=16, batch=2), new_static_cache(m, max_len=16, batch=2)
    with torch.no_grad():
        outs = [(m(x[:, :4], cache=eager_cache), cm(x[:, :4], cache=compiled_cache))]           # the prompt
        outs += [(m(x[:, t:t + 1], cache=eager_cache), cm(x[:, t:t + 1], cache=compiled_cache)) for t in range(4, 12)]
    assert len(graphs) == 2                                            # one for the prompt, one for all eight steps
    for e, c in outs: torch.testing.assert_close(c, e, rtol=0, atol=1e-12)       # compiled step == eager step
    torch.testing.assert_close(torch.cat([c for _, c in outs], 1), full, rtol=0, atol=1e-12)  # == the full forward
    assert int(compiled_cache.pos) == 12 and compiled_cache.n_real.tolist() == [12, 12]

# Bound on |logits of one float32 path - logits of another| relative to max|logits|, for these 1-2 layer, d_model <= 64
# models: each of the ~9 matmuls in a row is within gamma_(d+1) ~ 4e-6 of exact relative to |x||W| (Higham), the norms
# rescale, so the paths differ by a few 1e-6 of the logits' scale; 1e-5 is the margin tests/test_checkpoints.py uses too.
FP32_LOGITS = 1e-5

def _forward(m, mask, prompt_len=5):
    "Full forward over generated ids, with the prompt's padding mask extended over the new tokens."
    if mask is None: return m
    return lambda ids: m(ids, attention_mask=torch.cat([mask, mask.new_ones(mask.shape[0], ids.shape[1] - prompt_len)], 1))

def test_generate_with_a_compiled_step():
    torch.manual_seed(0)
    m = DecoderOnlyLM(cfg(positional="rope")).eval()
    backend, graphs = counting_backend()
    step = torch.compile(m, fullgraph=True, backend=backend)
    prompt = ids(2, 5, seed=1)
    keep = torch.tensor([[True] * 5, [False, False, True, True, True]])
    for mask in (None, keep):
        # a static cache through a compiled step against the growing cache: different computations in float32, whose
        # logits differ by rounding; the tokens must agree wherever the top-2 gap exceeds twice the bound (FP32_LOGITS)
        ref = fast_generate(m, prompt, 8, greedy=True, attention_mask=mask)
        assert_greedy_agrees(_forward(m, mask), ref, lm_generate(m, prompt, 8, greedy=True, attention_mask=mask, cache=new_static_cache(m, 13, 2), step=step),
                           5, rtol=FP32_LOGITS)
    assert len(graphs) == 3                                            # a prompt without, one with a padding mask, one step

def test_inductor_step_equals_eager():
    "The real compiler once (CPU inductor writes C++): a rope GQA model's cached step."
    torch.manual_seed(0)
    m = DecoderOnlyLM(cfg(positional="rope", n_layers=1)).eval()
    x = ids(2, 7, seed=1)
    cache_e, cache_c = new_static_cache(m, max_len=8, batch=2), new_static_cache(m, max_len=8, batch=2)
    step = torch.compile(m, fullgraph=True)                            # inductor
    with torch.no_grad():
        m(x[:, :5], cache=cache_e); m(x[:, :5], cache=cache_c)         # the prompt, eager in both
        for t in (5, 6):
            torch.testing.assert_close(step(x[:, t:t + 1], cache=cache_c), m(x[:, t:t + 1], cache=cache_e), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(cache_c.layers[0].k, cache_e.layers[0].k, rtol=1e-5, atol=1e-5)

def test_compile_step_gives_the_same_tokens_and_skips_guards_after_the_first_step(monkeypatch):
    "fast_generate(compile_step=True) runs chapter 11's step compiled by inductor (C++ wrapper): eager's tokens, padded too; guards skipped from the second step on."
    import transformer_lit.fast_decoding as dec
    torch.manual_seed(0)
    m = DecoderOnlyLM(cfg(positional="rope", n_layers=1, dropout=0.0)).eval()   # grouped-query heads (G = 2 of 4)
    prompt = ids(2, 5, seed=1)
    keep = torch.tensor([[True] * 5, [False, False, True, True, True]])
    skipped, real = [], dec._no_guards
    monkeypatch.setattr(dec, "_no_guards", lambda: skipped.append(1) or real())
    for mask in (None, keep):
        ref = fast_generate(m, prompt, 8, greedy=True, attention_mask=mask)   # inductor's C++ against eager: float32 rounding apart
        assert_greedy_agrees(_forward(m, mask), ref, fast_generate(m, prompt, 8, greedy=True, attention_mask=mask, static_cache=True, compile_step=True),
                           5, rtol=FP32_LOGITS)
    assert len(skipped) == 2 * 6                   # per call: step 0 is the prompt, step 1 checks every guard, steps 2..7 skip them

def _cached_forward(m, mask, prompt_len=5):
    "ids (B, T) -> logits (B, T, V) computed as cached decoding computes them: the prompt, then one token at a time through a growing cache."
    def forward(seq):
        cache, keep = new_cache(m), None if mask is None else torch.cat([mask, mask.new_ones(mask.shape[0], seq.shape[1] - prompt_len)], 1)
        kw = lambda t: {} if keep is None else dict(attention_mask=keep[:, :t])
        out = [m(seq[:, :prompt_len], cache=cache, **kw(prompt_len))]
        out += [m(seq[:, t:t + 1], cache=cache, **kw(t + 1)) for t in range(prompt_len, seq.shape[1])]
        return torch.cat(out, 1)                                       # (B, T, V)
    return forward

def test_compile_step_on_dynamic_ntk_gives_eager_tokens():
    "Dynamic NTK past the original length through fast_generate(compile_step=True): eager's tokens, padded too."
    torch.manual_seed(0)
    m = DecoderOnlyLM(cfg(positional="rope", n_layers=1, dropout=0.0, rope_scaling=dict(rope_type="dynamic", **SCALINGS["dynamic"]))).eval()
    prompt = ids(2, 5, seed=1)
    keep = torch.tensor([[True] * 5, [False, False, True, True, True]])
    for mask in (None, keep):
        # 5 + 12 positions > L0 = 8: the scale grows every step. A full forward over the result is another computation
        # (its keys all rotate at the final scale), so the reference logits are cached decoding's own, eager
        ref = fast_generate(m, prompt, 12, greedy=True, attention_mask=mask, static_cache=True)
        got = fast_generate(m, prompt, 12, greedy=True, attention_mask=mask, static_cache=True, compile_step=True)
        assert_greedy_agrees(_cached_forward(m, mask), ref, got, 5, rtol=FP32_LOGITS)
        assert_greedy_agrees(_cached_forward(m, mask), ref, fast_generate(m, prompt, 12, greedy=True, attention_mask=mask), 5, rtol=FP32_LOGITS)

# ---------------------------------------------------------------- no value is read on the host
class NoHostReads(TorchDispatchMode):
    "Fail on every op that copies a tensor's value to Python (`.item()`, `int(t)`, `bool(t)`, `if t:`)."
    READS = {torch.ops.aten._local_scalar_dense.default, torch.ops.aten.item.default, torch.ops.aten.is_nonzero.default}
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func in self.READS: raise AssertionError(f"{func} reads a tensor's value on the host")
        return func(*args, **(kwargs or {}))

def test_the_detector_catches_a_host_read():
    with pytest.raises(AssertionError, match="reads a tensor's value on the host"):
        with NoHostReads(): int(torch.zeros(2, device="meta").sum())

@pytest.mark.parametrize("kind,scaling", EVERY_KIND, ids=[k if s is None else f"rope-{s['rope_type']}" for k, s in EVERY_KIND])
def test_forward_reads_no_value_on_the_host(kind, scaling):
    "On the meta device `check_values` takes the path a GPU takes (an async assert); any host read fails the test."
    with torch.device("meta"):
        lm, s2s = DecoderOnlyLM(cfg(positional=kind, rope_scaling=scaling)), Transformer(cfg(positional=kind, rope_scaling=scaling, pad_id=0))
        x = torch.zeros(2, 6, dtype=torch.long)
        keep = torch.ones(2, 6, dtype=torch.long)
    with NoHostReads():
        lm.train(); s2s.train()
        lm(x, x)[1].backward()                                         # a training step's forward and backward
        lm(x, x, attention_mask=keep)[1].backward()
        s2s(x, x, targets=x)[1].backward()
        lm.eval()
        cache = new_static_cache(lm, max_len=8, batch=2)
        assert isinstance(cache, StaticCache)
        lm(x[:, :5], cache=cache, attention_mask=keep[:, :5])          # the prompt
        logits = lm(x[:, 5:], cache=cache)                             # one cached step
        grow = new_cache(lm)
        lm(x[:, :5], cache=grow); lm(x[:, 5:], cache=grow)             # the growing cache too
    assert logits.shape == (2, 1, 40) and logits.device.type == "meta"

def test_seq2seq_decode_step_compiles_once_after_the_first():
    torch.manual_seed(0)
    t = Transformer(cfg(positional="rope", pad_id=0)).double().eval()
    src, tgt = ids(2, 7, seed=1), ids(2, 6, seed=2)
    src[1, 5:] = 0
    backend, graphs = counting_backend()
    step = torch.compile(t.decode, fullgraph=True, backend=backend)
    with torch.no_grad():
        memory, memory_mask = t.encode(src)
        cache = new_static_cache(t, max_len=8, batch=2)
        out = torch.cat([step(tgt[:, i:i + 1], memory, memory_mask, cache=cache) for i in range(6)], 1)
        torch.testing.assert_close(out, t.decode(tgt, memory, memory_mask), rtol=0, atol=1e-12)
    assert len(graphs) == 2              # the first step fills the cross-attention caches; every later step reuses them
