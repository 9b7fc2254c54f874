"""The numeric-argument rule of the appendix "Checking the inputs", applied to every numeric argument in the table below.

The rule: the wrong kind of argument (a string, a bool) is a `TypeError` naming the argument; the wrong value (NaN, an
infinity where it is not a documented value) is a `ValueError`; a numpy scalar of a valid value is a number and gives
the result the Python number gives.

The table is curated; `tests/test_numeric_walk.py` walks every `__all__` with the same five values and a looser check of
the message (it must name the argument and show the value). This table pins the message's start, `name=value must be`,
for the public callables' numeric (float or int, not bool) arguments that go through the validators
rewritten onto the shared primitives (`check_dropout`, `_check_eps`, `_check_temperature`, `_check_base`,
`_check_multiplier`, `check_sampling`, all one call of `_check_real` or `check_int`), plus the configs' own `_check_real`
arguments, each called with small valid base arguments. For an int argument NaN and inf are floats, so the wrong kind.
"""
import math, re
import numpy as np, pytest, torch
from transformer_lit import attention, norm, ffn, positional, model, decoding, scaling, train, multihead, blocks, bench

def _x(*shape): return torch.randn(*shape, generator=torch.Generator().manual_seed(0))

Q = _x(1, 2, 4, 8)
L = _x(2, 6)
S = _x(2, 4)

# name in the message, callable of the value, a valid value (exactly representable in float32), whether inf is a documented value
CASES = [
    ("dropout_p", lambda v: attention.scaled_dot_product_attention(Q, Q, Q, dropout_p=v), 0.0, False),
    ("dropout", lambda v: multihead.MultiHeadAttention(8, 2, dropout=v).dropout, 0.25, False),
    ("eps", lambda v: norm.RMSNorm(4, eps=v)(S), 0.25, False),
    ("eps", lambda v: norm.LayerNorm(4, eps=v)(S), 0.25, False),
    ("eps", lambda v: norm.rms_norm(S, eps=v), 0.25, False),
    ("eps", lambda v: norm.layer_norm(S, eps=v), 0.25, False),
    ("eps", lambda v: norm.Residual(torch.nn.Identity(), 4, eps=v)(S), 0.25, False),
    ("dropout", lambda v: norm.Residual(torch.nn.Identity(), 4, dropout=v).eval()(S), 0.25, False),
    ("dropout", lambda v: ffn.FeedForward(4, 8, dropout=v).eval().dropout.p, 0.25, False),
    ("dropout", lambda v: ffn.SwiGLU(4, 8, dropout=v).eval().dropout.p, 0.25, False),
    ("ffn_dim_multiplier", lambda v: ffn.swiglu_hidden_dim(64, 16, v), 1.5, False),
    ("base", lambda v: positional.sinusoidal_frequencies(8, base=v), 16.0, False),
    ("base", lambda v: positional.sinusoidal_encoding(5, 8, base=v), 16.0, False),
    ("base", lambda v: positional.RotaryEmbedding(8, base=v)(_x(1, 2, 5, 8)), 16.0, False),
    ("dropout", lambda v: blocks.EncoderBlock(8, 2, 16, dropout=v).eval()(_x(1, 3, 8)), 0.25, False),
    ("layer_norm_eps", lambda v: blocks.EncoderBlock(8, 2, 16, layer_norm_eps=v).eval()(_x(1, 3, 8)), 0.25, False),
    ("dropout", lambda v: model.TransformerConfig(vocab_size=10, dropout=v).dropout, 0.25, False),
    ("layer_norm_eps", lambda v: model.TransformerConfig(vocab_size=10, layer_norm_eps=v).layer_norm_eps, 0.25, False),
    ("rope_base", lambda v: model.TransformerConfig(vocab_size=10, positional="rope", rope_base=v).rope_base, 16.0, False),
    ("temperature", lambda v: decoding.sample_next(L, temperature=v, generator=torch.Generator().manual_seed(0)), 0.5, False),
    ("top_p", lambda v: decoding.sample_next(L, top_p=v, generator=torch.Generator().manual_seed(0)), 0.5, False),
    ("min_p", lambda v: decoding.sample_next(L, min_p=v, generator=torch.Generator().manual_seed(0)), 0.5, False),
    ("temperature", lambda v: decoding.filter_logits(L, temperature=v), 0.5, False),
    ("temperature", lambda v: scaling.saturation_metrics(S, temperature=v)["entropy"], 0.5, False),
    ("lr_factor", lambda v: train.TrainConfig(lr_factor=v).lr_factor, 0.5, False),
    ("eps", lambda v: train.TrainConfig(eps=v).eps, 0.25, False),
    ("clip", lambda v: train.TrainConfig(clip=v).clip, 0.5, False),
    # a time.time() value: 0.5 is long past, so the sweep times nothing and every row says so
    ("deadline", lambda v: bench.bench_attention([8], backends=["sdpa"], heads=1, head_dim=8, progress=False, deadline=v), 0.5, False),
    # integer arguments: a float (NaN and inf included) is the wrong kind, a TypeError
    ("top_k", lambda v: decoding.sample_next(L, top_k=v, generator=torch.Generator().manual_seed(0)), 2, False),
    ("top_k", lambda v: decoding.filter_logits(L, top_k=v), 2, False),
    ("multiple_of", lambda v: ffn.swiglu_hidden_dim(64, v), 16, False),
    ("max_cached", lambda v: positional.RotaryEmbedding(8, max_cached=v)(_x(1, 2, 5, 8)), 8, False),
]
IDS = [f"{i:02d}-{c[0]}" for i, c in enumerate(CASES)]

def _same(a, b):
    if isinstance(a, torch.Tensor): return torch.equal(a, b)
    if isinstance(a, dict): return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, torch.nn.Module): return type(a) is type(b)
    return a == b

def _run(fn, v):
    torch.manual_seed(0)                                   # modules draw their init from the global generator
    return fn(v)

@pytest.mark.parametrize("name, fn, good, inf_ok", CASES, ids=IDS)
def test_numeric_rule(name, fn, good, inf_ok):
    _run(fn, good)                                                          # the base arguments are valid
    for bad in ("0.5", True, False):                                        # the wrong kind: a TypeError naming the argument
        with pytest.raises(TypeError, match="^" + re.escape(f"{name}={bad!r} must be")): _run(fn, bad)
    np_good = np.int64(good) if isinstance(good, int) else np.float32(good)
    assert float(np_good) == good                                           # the table's values are exact in float32
    assert _same(_run(fn, good), _run(fn, np_good))                        # a numpy scalar is a number: the same result
    non_finite = TypeError if isinstance(good, int) else ValueError         # NaN and inf are floats: the wrong kind for an int
    with pytest.raises(non_finite, match="^" + re.escape(f"{name}=nan must be")): _run(fn, math.nan)
    if not inf_ok:
        with pytest.raises(non_finite, match="^" + re.escape(f"{name}=inf must be")): _run(fn, math.inf)
