"""The tables of tests/test_bad_input.py: bad inputs with the exception and the words its message must hold,
legal edge cases that must work, and the exemptions (with a reason each) from the coverage rule.

A row is (id, target, call, exc, words):
- target names the callable and the parameter the row attacks: "module.function:param",
  "module.Class:param" (the constructor) or "module.Class.method:param";
- call runs the bad input; it must raise `exc` (a type or a tuple of types);
- every word must occur in str(error); a word given as a tuple passes when any one of its spellings occurs
  (e.g. ("x.dim()=3", "x.shape=(2, 3, 4)"): both name the argument and the offending rank).
Words always hold the argument's name and the offending value (or its dtype or shape), so a vague message fails.
"""
from __future__ import annotations
import functools, math
from collections import namedtuple
from pathlib import Path

import torch
from torch import nn

from transformer_lit import (checks, attention, scaling, norm, ffn, positional, masks, multihead, blocks, model, decoding, train,
                             checkpoints, flash, flash_triton, bench, viz, at_scale, fast_decoding)  # gpu_check imported by its rows
from transformer_lit.decoding import lm_generate, seq2seq_generate, lm_beam_search, seq2seq_beam_search, new_cache
from transformer_lit.fast_decoding import fast_generate, new_static_cache

Row = namedtuple("Row", "id target call exc words")
Legal = namedtuple("Legal", "id target call check")
TV = (TypeError, ValueError)      # for kinds where either is a fair answer (a string where a number is expected)
def NAMED(n):
    "The argument's name as a message may spell it: 'x must ...', 'x=...', 'x has ...', 'x is ...'."
    return (f"{n} must", f"{n}=", f"{n} has", f"{n} is", f"{n}.dtype=", f"{n}.shape=")
INF, NAN = float("inf"), float("nan")

ROWS: list = []
LEGAL: list = []

def R(id, target, exc, words, call): ROWS.append(Row(id, target, call, exc, tuple(words)))
def L(id, target, call, check): LEGAL.append(Legal(id, target, call, check))

# -- tiny inputs (seeded, built on demand) -------------------------------------------------------------------------
def T(*shape, dtype=torch.float32):
    "A seeded standard-normal tensor of `shape` cast to `dtype`."
    return torch.randn(*shape, generator=torch.Generator().manual_seed(0), dtype=torch.float64).to(dtype)

def QKV(B=1, H=2, L=3, D=4, G=None, Lk=None, dtype=torch.float32):
    "q (B, H, L, D), k and v (B, G, Lk, D)."
    G, Lk = G or H, Lk or L
    return T(B, H, L, D, dtype=dtype), T(B, G, Lk, D, dtype=dtype), T(B, G, Lk, D, dtype=dtype)

def with_inf(shape=(3, 3), value=INF):
    "A float mask of zeros with one entry set to `value` (+inf or NaN)."
    m = torch.zeros(shape); m[..., 0, 1] = value; return m

V = 11                                # vocabulary of the tiny models
def ids(B=1, Tn=3, dtype=torch.long, high=V): return torch.randint(0, high, (B, Tn), generator=torch.Generator().manual_seed(1)).to(dtype)

def cfg(**kw):
    "A tiny TransformerConfig; keyword arguments override the defaults."
    base = dict(vocab_size=V, d_model=8, n_heads=2, n_layers=1, d_ff=16, dropout=0.0, max_len=16)
    return model.TransformerConfig(**(base | kw))

@functools.cache
def mha(): torch.manual_seed(0); return multihead.MultiHeadAttention(8, 2).eval()
@functools.cache
def mha_sdpa(): torch.manual_seed(0); return multihead.MultiHeadAttention(8, 2, backend="sdpa").eval()
@functools.cache
def lm(**kw): torch.manual_seed(0); return model.DecoderOnlyLM(cfg(**kw)).eval()
@functools.cache
def s2s(): torch.manual_seed(0); return model.Transformer(cfg()).eval()
@functools.cache
def stack(): torch.manual_seed(0); return model.TransformerStack(cfg(positional="none")).eval()
@functools.cache
def enc(): torch.manual_seed(0); return blocks.EncoderBlock(8, 2, 16).eval()
@functools.cache
def dec(): torch.manual_seed(0); return blocks.DecoderBlock(8, 2, 16).eval()
@functools.cache
def dob(): torch.manual_seed(0); return blocks.DecoderOnlyBlock(8, 2, 16).eval()
@functools.cache
def rope(): return positional.RotaryEmbedding(4, max_cached=64)
@functools.cache
def explorer(): return scaling.ScalingExplorer(n_keys=4, n_queries=8, max_d_k=16)

def X(B=1, Tn=3, d=8, dtype=torch.float32): return T(B, Tn, d, dtype=dtype)

def filled_cache():
    "A DecoderCache of the tiny LM after a prompt of 3 tokens."
    c = new_cache(lm()); lm()(ids(), cache=c); return c

def register_then_remove(**kw):
    "register_backend(**kw), and remove whatever it registered even when it raised, so later rows see a clean registry."
    name = kw.setdefault("name", "_bad_input_test")
    try: attention.register_backend(**kw)
    finally:
        attention.backend_info.pop(name, None)
        if dict.__contains__(attention.attention_backends, name): dict.__delitem__(attention.attention_backends, name)

# =====================================================================================================================
# attention
# =====================================================================================================================
A = "attention."
C = "checks."                                                   # the validators (appendix_checks), imported by attention

R("checks.check_qkv.q.str", C + "check_qkv:q", TypeError, [NAMED("q"), "str"],
  lambda: checks.check_qkv("q", *QKV()[1:]))
R("checks.check_qkv.k.int64", C + "check_qkv:k", TypeError, ["k.dtype=torch.int64", "floating"],
  lambda: checks.check_qkv(QKV()[0], QKV()[1].long(), QKV()[2]))
R("checks.check_qkv.v.rank1", C + "check_qkv:v", ValueError, ["v.dim()=1"],
  lambda: checks.check_qkv(*QKV()[:2], T(4)))
R("checks.check_qkv.q.float64_vs_float32", C + "check_qkv:q", TypeError, ["q.dtype=torch.float64", "k.dtype=torch.float32"],
  lambda: checks.check_qkv(QKV()[0].double(), *QKV()[1:]))
R("checks.check_qkv.k.heads_not_dividing", C + "check_qkv:k", ValueError, ["k.shape[-3]=3", "q.shape[-3]=4"],
  lambda: checks.check_qkv(*QKV(H=4, G=3)))
R("checks.check_qkv.v.len_mismatch", C + "check_qkv:v", ValueError, ["k.shape[-2]=3", "v.shape[-2]=5"],
  lambda: checks.check_qkv(*QKV()[:2], T(1, 2, 5, 4)))

R("checks.check_mask.mask.str", C + "check_mask:mask", TypeError, [NAMED("mask"), "str"],
  lambda: checks.check_mask("m", (1, 2, 3, 3)))
R("checks.check_mask.mask.int64", C + "check_mask:mask", TypeError, ["mask.dtype=torch.int64"],
  lambda: checks.check_mask(torch.ones(3, 3, dtype=torch.long), (1, 2, 3, 3)))
R("checks.check_mask.mask.shape", C + "check_mask:mask", ValueError, ["mask.shape=(3, 5)", "(1, 2, 3, 3)"],
  lambda: checks.check_mask(torch.ones(3, 5, dtype=torch.bool), (1, 2, 3, 3)))
R("checks.check_mask.scores_shape.shape", C + "check_mask:scores_shape", ValueError, ["mask.shape=(3, 5)", "(1, 2, 3, 3)"],
  lambda: checks.check_mask(torch.ones(3, 5, dtype=torch.bool), (1, 2, 3, 3)))
R("checks.check_mask.is_causal.with_mask", C + "check_mask:is_causal", ValueError, ["is_causal=True", "mask"],
  lambda: checks.check_mask(torch.ones(3, 3, dtype=torch.bool), (1, 2, 3, 3), is_causal=True))
R("checks.check_mask.name.used", C + "check_mask:name", ValueError, ["attn_bias.shape=(3, 5)"],
  lambda: checks.check_mask(torch.ones(3, 5), (1, 2, 3, 3), name="attn_bias"))
R("checks.check_mask.mask.plus_inf", C + "check_mask:mask", ValueError, ["mask", "+inf"],
  lambda: checks.check_mask(with_inf(), (1, 2, 3, 3)))

for bad, exc, word in (("x", TypeError, "scale='x'"), (True, TypeError, "scale=True"),
                       (NAN, ValueError, "scale=nan"), (INF, ValueError, "scale=inf"), (-INF, ValueError, "scale=-inf")):
    R(f"checks.check_scale.scale.{bad}", C + "check_scale:scale", exc,
      [word] + (["finite"] if exc is ValueError else []), lambda bad=bad: checks.check_scale(bad))

for bad, word in ((1.0, "dropout_p=1.0"), (-0.1, "dropout_p=-0.1"), ("x", "dropout_p='x'"), (True, "dropout_p=True"),
                  (NAN, "dropout_p=nan")):
    R(f"checks.check_dropout.dropout_p.{bad}", C + "check_dropout:dropout_p", TV, [word],
      lambda bad=bad: checks.check_dropout(bad))
R("checks.check_dropout.name.used", C + "check_dropout:name", TV, ["dropout=2"], lambda: checks.check_dropout(2, "dropout"))

CI = C + "check_int:"
R("checks.check_int.value.bool", CI + "value", TypeError, ["n=True"], lambda: checks.check_int("n", True))
R("checks.check_int.value.str", CI + "value", TypeError, ["n='3'"], lambda: checks.check_int("n", "3"))
R("checks.check_int.value.float", CI + "value", TypeError, ["n=2.0"], lambda: checks.check_int("n", 2.0))
R("checks.check_int.value.nan", CI + "value", TypeError, ["n=nan"], lambda: checks.check_int("n", NAN))
R("checks.check_int.value.zero", CI + "value", ValueError, ["n=0", "positive"], lambda: checks.check_int("n", 0))
R("checks.check_int.name.used", CI + "name", ValueError, ["width=-2"], lambda: checks.check_int("width", -2))
R("checks.check_int.minimum.below", CI + "minimum", ValueError, ["n=-1", ">= 0"], lambda: checks.check_int("n", -1, minimum=0))
R("checks.check_int.maximum.above", CI + "maximum", ValueError, ["n=5", "[1, 4]"], lambda: checks.check_int("n", 5, maximum=4))
R("checks.check_int.even.odd", CI + "even", ValueError, ["n=3", "even"], lambda: checks.check_int("n", 3, even=True))
R("checks.check_int.allow_none.none_refused", CI + "allow_none", TypeError, ["n=None"], lambda: checks.check_int("n", None))
R("checks.check_int.rule.used", CI + "rule", ValueError, ["top_k=0", "None or an int in [1, vocab_size=4]"],
  lambda: checks.check_int("top_k", 0, 1, 4, allow_none=True, rule="None or an int in [1, vocab_size=4]"))

CV = C + "check_values:"
R("checks.check_values.ok.false", CV + "ok", ValueError, ["bad value in x"],
  lambda: checks.check_values(torch.tensor([True, False]), "bad value in x"))
R("checks.check_values.message.lambda", CV + "message", ValueError, ["formatted 42"],
  lambda: checks.check_values(torch.tensor(False), lambda: f"formatted {42}"))
R("checks.check_values.exc.typeerror", CV + "exc", TypeError, ["wrong kind"],
  lambda: checks.check_values(torch.tensor(False), "wrong kind", TypeError))
R("checks.check_values.ok.not_a_tensor", CV + "ok", TypeError, ["ok", "bool"],
  lambda: checks.check_values(False, "m"))

R("attention.repeat_kv.x.str", A + "repeat_kv:x", TypeError, [NAMED("x"), "str"], lambda: attention.repeat_kv("x", 2))
R("attention.repeat_kv.x.rank2", A + "repeat_kv:x", ValueError, ["x.dim()=2"], lambda: attention.repeat_kv(T(3, 4), 2))
R("attention.repeat_kv.n_rep.zero", A + "repeat_kv:n_rep", ValueError, ["n_rep=0"], lambda: attention.repeat_kv(T(1, 2, 3, 4), 0))
R("attention.repeat_kv.n_rep.bool", A + "repeat_kv:n_rep", TypeError, ["n_rep=True"], lambda: attention.repeat_kv(T(1, 2, 3, 4), True))

CM = A + "causal_mask:"
R("attention.causal_mask.q_len.negative", CM + "q_len", ValueError, ["q_len=-1"], lambda: attention.causal_mask(-1))
R("attention.causal_mask.q_len.bool", CM + "q_len", TypeError, ["q_len=True"], lambda: attention.causal_mask(True))
R("attention.causal_mask.q_len.float", CM + "q_len", TypeError, ["q_len=2.0"], lambda: attention.causal_mask(2.0))
R("attention.causal_mask.k_len.negative", CM + "k_len", ValueError, ["k_len=-1"], lambda: attention.causal_mask(2, -1))
R("attention.causal_mask.align.unknown", CM + "align", ValueError, ["align='left'"], lambda: attention.causal_mask(2, align="left"))

# the attention entry points share their argument kinds
def _attn_rows(prefix, fn, has_mask=True, has_dropout=True):
    P = prefix + ":"
    name = prefix.split(".", 1)[1]
    R(f"{prefix}.q.str", P + "q", TypeError, [NAMED("q"), "str"], lambda: fn("q", *QKV()[1:]))
    R(f"{prefix}.q.int64", P + "q", TypeError, ["q.dtype=torch.int64", "floating"], lambda: fn(QKV()[0].long(), *QKV()[1:]))
    R(f"{prefix}.k.bool", P + "k", TypeError, ["k.dtype=torch.bool", "floating"], lambda: fn(QKV()[0], QKV()[1].bool(), QKV()[2]))
    R(f"{prefix}.v.uint8", P + "v", TypeError, ["v.dtype=torch.uint8", "floating"], lambda: fn(*QKV()[:2], QKV()[2].to(torch.uint8)))
    R(f"{prefix}.k.float64_vs_float32", P + "k", TypeError, ["k.dtype=torch.float64"], lambda: fn(QKV()[0], QKV()[1].double(), QKV()[2]))
    R(f"{prefix}.k.head_dim_mismatch", P + "k", ValueError, ["q.shape[-1]=4", "k.shape[-1]=5"],
      lambda: fn(QKV()[0], T(1, 2, 3, 5), T(1, 2, 3, 5)))
    R(f"{prefix}.v.rank1", P + "v", ValueError, ["v.dim()=1"], lambda: fn(*QKV()[:2], T(4)))
    R(f"{prefix}.q.head_dim_0", P + "q", ValueError, [("q.shape[-1]=0", "D=0") if "triton" in prefix else "q.shape[-1]=0"], lambda: fn(*QKV(D=0)))
    R(f"{prefix}.scale.nan", P + "scale", ValueError, ["scale=nan", "finite"], lambda: fn(*QKV(), scale=NAN))
    R(f"{prefix}.scale.inf", P + "scale", ValueError, ["scale=inf", "finite"], lambda: fn(*QKV(), scale=INF))
    R(f"{prefix}.scale.str", P + "scale", TypeError, ["scale='x'"], lambda: fn(*QKV(), scale="x"))
    if has_dropout:
        R(f"{prefix}.dropout_p.1.5", P + "dropout_p", ValueError, ["dropout_p=1.5"], lambda: fn(*QKV(), dropout_p=1.5))
        R(f"{prefix}.dropout_p.str", P + "dropout_p", TV, [("dropout_p='x'", "dropout_p=x")], lambda: fn(*QKV(), dropout_p="x"))
    if has_mask:
        R(f"{prefix}.mask.plus_inf", P + "mask", ValueError, ["mask", "+inf"], lambda: fn(*QKV(), mask=with_inf()))
        R(f"{prefix}.mask.nan", P + "mask", ValueError, ["mask", "NaN"], lambda: fn(*QKV(), mask=with_inf(value=NAN)))
        R(f"{prefix}.mask.int64", P + "mask", TypeError, ["mask.dtype=torch.int64"], lambda: fn(*QKV(), mask=torch.ones(3, 3, dtype=torch.long)))
        R(f"{prefix}.mask.shape", P + "mask", ValueError, ["mask.shape=(3, 5)"], lambda: fn(*QKV(), mask=torch.ones(3, 5, dtype=torch.bool)))
        R(f"{prefix}.mask.str", P + "mask", TypeError, [NAMED("mask"), "str"], lambda: fn(*QKV(), mask="causal"))
    if has_mask:
        R(f"{prefix}.is_causal.with_mask", P + "is_causal", ValueError, ["is_causal=True"],
          lambda: fn(*QKV(), mask=torch.ones(3, 3, dtype=torch.bool), is_causal=True))

_attn_rows("attention.attention_core", attention.attention_core, has_dropout=False)
_attn_rows("attention.scaled_dot_product_attention", attention.scaled_dot_product_attention)
_attn_rows("attention.torch_sdpa", attention.torch_sdpa)
_attn_rows("attention.attend", attention.attend)
R("attention.attend.need_weights.with_sdpa", A + "attend:need_weights", ValueError, ["backend='sdpa'", "need_weights"],
  lambda: attention.attend(*QKV(), need_weights=True, backend="sdpa"))
R("attention.attend.backend.unknown", A + "attend:backend", ValueError, ["backend='nope'"], lambda: attention.attend(*QKV(), backend="nope"))

RB = A + "register_backend:"
R("attention.register_backend.name.empty", RB + "name", ValueError, ["name=''"],
  lambda: register_then_remove(name="", fn=attention.scaled_dot_product_attention))
R("attention.register_backend.name.auto", RB + "name", ValueError, ["name='auto'"],
  lambda: register_then_remove(name="auto", fn=attention.scaled_dot_product_attention))
R("attention.register_backend.fn.int", RB + "fn", TypeError, ["fn=3", "callable"], lambda: register_then_remove(fn=3))
R("attention.register_backend.supports.int", RB + "supports", TypeError, ["supports=3", "callable"],
  lambda: register_then_remove(fn=attention.scaled_dot_product_attention, supports=3))
R("attention.register_backend.priority.str", RB + "priority", TypeError, ["priority='high'"],
  lambda: register_then_remove(fn=attention.scaled_dot_product_attention, priority="high"))
R("attention.register_backend.prefer.int", RB + "prefer", TypeError, ["prefer=3", "callable"],
  lambda: register_then_remove(fn=attention.scaled_dot_product_attention, prefer=3))
R("attention.unregister_backend.name.unknown", A + "unregister_backend:name", ValueError, ["name='nope'"],
  lambda: attention.unregister_backend("nope"))
R("attention.check_backend.backend.unknown", A + "check_backend:backend", ValueError, ["backend='nope'"],
  lambda: attention.check_backend("nope"))
R("attention.check_backend.backend.int", A + "check_backend:backend", ValueError, ["backend=3"], lambda: attention.check_backend(3))
R("attention.choose_backend.backend.unknown", A + "choose_backend:backend", ValueError, ["backend='nope'"],
  lambda: attention.choose_backend(*QKV(), backend="nope"))
R("attention.choose_backend.need_weights.with_flash", A + "choose_backend:need_weights", ValueError, ["backend='flash'", "need_weights"],
  lambda: attention.choose_backend(*QKV(), need_weights=True, backend="flash"))
R("attention.choose_backend.dropout_p.flash", A + "choose_backend:dropout_p", ValueError, ["backend='flash'", "dropout_p=0.5"],
  lambda: attention.choose_backend(*QKV(), dropout_p=0.5, backend="flash"))

R("checks.check_bool.value.int", C + "check_bool:value", TypeError, ["flag=1", "bool"], lambda: checks.check_bool("flag", 1))
R("checks.check_bool.name.used", C + "check_bool:name", TypeError, ["is_causal='yes'"], lambda: checks.check_bool("is_causal", "yes"))
R("checks.check_scale.dtype.overflows_float16", C + "check_scale:dtype", ValueError, ["scale=1000000.0", "torch.float16"],
  lambda: checks.check_scale(1e6, torch.float16))
R("checks.check_scale.dtype.str", C + "check_scale:dtype", TypeError, ["dtype='float16'"], lambda: checks.check_scale(1.0, "float16"))

# =====================================================================================================================
# scaling
# =====================================================================================================================
S = "scaling."
R("scaling.dot_product_variance.d_k.zero", S + "dot_product_variance:d_k", ValueError, ["d_k=0"], lambda: scaling.dot_product_variance(0))
R("scaling.dot_product_variance.d_k.bool", S + "dot_product_variance:d_k", TypeError, ["d_k=True"], lambda: scaling.dot_product_variance(True))
R("scaling.dot_product_variance.n_samples.one", S + "dot_product_variance:n_samples", ValueError, ["n_samples=1"],
  lambda: scaling.dot_product_variance(4, 1))
R("scaling.dot_product_variance.seed.str", S + "dot_product_variance:seed", TypeError, ["seed='x'"],
  lambda: scaling.dot_product_variance(4, 8, seed="x"))
R("scaling.dot_product_variance_se.d_k.zero", S + "dot_product_variance_se:d_k", ValueError, ["d_k=0"],
  lambda: scaling.dot_product_variance_se(0))
R("scaling.dot_product_variance_se.n_samples.zero", S + "dot_product_variance_se:n_samples", ValueError, ["n_samples=0"],
  lambda: scaling.dot_product_variance_se(4, 0))
for fname in ("softmax_entropy", "softmax_jacobian", "softmax_jacobian_norm"):
    f = getattr(scaling, fname)
    R(f"scaling.{fname}.p.list", f"scaling.{fname}:p", TypeError, [NAMED("p"), "list"], lambda f=f: f([0.5, 0.5]))
R("scaling.saturation_metrics.scores.list", S + "saturation_metrics:scores", TypeError, [NAMED("scores"), "list"],
  lambda: scaling.saturation_metrics([1.0, 2.0]))
for bad, word in ((0, "temperature=0"), (NAN, "temperature=nan"), (INF, "temperature=inf"), ("1", "temperature='1'")):
    R(f"scaling.saturation_metrics.temperature.{bad}", S + "saturation_metrics:temperature", TV, [word],
      lambda bad=bad: scaling.saturation_metrics(T(2, 4), bad))
R("scaling.ScalingExplorer.n_keys.one", S + "ScalingExplorer:n_keys", ValueError, ["n_keys=1"], lambda: scaling.ScalingExplorer(n_keys=1))
R("scaling.ScalingExplorer.n_queries.zero", S + "ScalingExplorer:n_queries", ValueError, ["n_queries=0"],
  lambda: scaling.ScalingExplorer(n_queries=0))
R("scaling.ScalingExplorer.max_d_k.bool", S + "ScalingExplorer:max_d_k", TypeError, ["max_d_k=True"],
  lambda: scaling.ScalingExplorer(max_d_k=True))
R("scaling.ScalingExplorer.draws.seed.negative", S + "ScalingExplorer.draws:seed", ValueError, ["seed=-1"], lambda: explorer().draws(-1))
R("scaling.ScalingExplorer.scores.d_k.above_max", S + "ScalingExplorer.scores:d_k", ValueError, ["d_k=32", "max_d_k=16"],
  lambda: explorer().scores(32))
R("scaling.ScalingExplorer.scores.temperature.negative", S + "ScalingExplorer.scores:temperature", ValueError, ["temperature=-1"],
  lambda: explorer().scores(4, temperature=-1))
R("scaling.ScalingExplorer.scores.seed.str", S + "ScalingExplorer.scores:seed", TypeError, ["seed='x'"],
  lambda: explorer().scores(4, seed="x"))
R("scaling.ScalingExplorer.__call__.d_k.zero", S + "ScalingExplorer.__call__:d_k", ValueError, ["d_k=0"], lambda: explorer()(0))
R("scaling.ScalingExplorer.__call__.temperature.nan", S + "ScalingExplorer.__call__:temperature", ValueError, ["temperature=nan"],
  lambda: explorer()(4, temperature=NAN))
R("scaling.ScalingExplorer.__call__.seed.negative", S + "ScalingExplorer.__call__:seed", ValueError, ["seed=-1"],
  lambda: explorer()(4, seed=-1))
R("scaling.ScalingExplorer.curve.d_ks.zero", S + "ScalingExplorer.curve:d_ks", ValueError, ["d_ks[1]=0"], lambda: explorer().curve([4, 0]))
R("scaling.ScalingExplorer.curve.d_ks.int", S + "ScalingExplorer.curve:d_ks", TypeError, ["d_ks=4"], lambda: explorer().curve(4))
R("scaling.ScalingExplorer.curve.temperature.zero", S + "ScalingExplorer.curve:temperature", ValueError, ["temperature=0"],
  lambda: explorer().curve([4], temperature=0))
R("scaling.ScalingExplorer.curve.seed.negative", S + "ScalingExplorer.curve:seed", ValueError, ["seed=-1"],
  lambda: explorer().curve([4], seed=-1))

# =====================================================================================================================
# norm
# =====================================================================================================================
N = "norm."
for fname, extra in (("layer_norm", True), ("rms_norm", False)):
    f = getattr(norm, fname)
    P = f"norm.{fname}:"
    R(f"norm.{fname}.x.str", P + "x", TypeError, [NAMED("x"), "str"], lambda f=f: f("x"))
    R(f"norm.{fname}.x.int64", P + "x", TypeError, ["x.dtype=torch.int64", "floating"], lambda f=f: f(X().long()))
    R(f"norm.{fname}.x.bool", P + "x", TypeError, ["x.dtype=torch.bool", "floating"], lambda f=f: f(X().bool()))
    R(f"norm.{fname}.weight.shape", P + "weight", ValueError, ["weight.shape=(7,)", "(8,)"], lambda f=f: f(X(), torch.ones(7)))
    R(f"norm.{fname}.weight.list", P + "weight", TypeError, ["weight", "list"], lambda f=f: f(X(), [1.0] * 8))
    R(f"norm.{fname}.eps.zero", P + "eps", ValueError, ["eps=0"], lambda f=f: f(X(), eps=0))
    R(f"norm.{fname}.eps.nan", P + "eps", ValueError, ["eps=nan"], lambda f=f: f(X(), eps=NAN))
    R(f"norm.{fname}.eps.str", P + "eps", TV, ["eps='x'"], lambda f=f: f(X(), eps="x"))
R("norm.layer_norm.bias.shape", N + "layer_norm:bias", ValueError, ["bias.shape=(7,)", "(8,)"],
  lambda: norm.layer_norm(X(), torch.ones(8), torch.zeros(7)))
for cname in ("LayerNorm", "RMSNorm"):
    C = getattr(norm, cname)
    R(f"norm.{cname}.d.zero", f"norm.{cname}:d", ValueError, ["d=0"], lambda C=C: C(0))
    R(f"norm.{cname}.d.bool", f"norm.{cname}:d", TypeError, ["d=True"], lambda C=C: C(True))
    R(f"norm.{cname}.eps.negative", f"norm.{cname}:eps", ValueError, ["eps=-1"], lambda C=C: C(8, eps=-1))
    R(f"norm.{cname}.eps.inf", f"norm.{cname}:eps", ValueError, ["eps=inf"], lambda C=C: C(8, eps=INF))
    P = f"norm.{cname}.forward:x"
    R(f"norm.{cname}.forward.x.str", P, TypeError, [NAMED("x"), "str"], lambda C=C: C(8)("x"))
    R(f"norm.{cname}.forward.x.int64", P, TypeError, ["x.dtype=torch.int64", "floating"], lambda C=C: C(8)(X().long()))
    R(f"norm.{cname}.forward.x.width", P, ValueError, ["x.shape[-1]=5", "d=8"], lambda C=C: C(8)(X(d=5)))
    R(f"norm.{cname}.forward.x.scalar", P, ValueError, ["x.shape[-1]=None"], lambda C=C: C(8)(torch.tensor(1.0)))
RS = "norm.Residual:"
R("norm.Residual.sublayer.int", RS + "sublayer", TypeError, ["sublayer must be callable", "int"], lambda: norm.Residual(3, 8))
R("norm.Residual.d_model.zero", RS + "d_model", ValueError, ["d_model=0"], lambda: norm.Residual(nn.Identity(), 0))
R("norm.Residual.norm_first.str", RS + "norm_first", TypeError, ["norm_first='yes'"], lambda: norm.Residual(nn.Identity(), 8, "yes"))
R("norm.Residual.norm.unknown", RS + "norm", ValueError, ["norm='batch'"], lambda: norm.Residual(nn.Identity(), 8, norm="batch"))
R("norm.Residual.dropout.one", RS + "dropout", ValueError, ["dropout=1"], lambda: norm.Residual(nn.Identity(), 8, dropout=1))
R("norm.Residual.eps.with_module", RS + "eps", ValueError, ["eps=0.1", "module"],
  lambda: norm.Residual(nn.Identity(), 8, norm=norm.LayerNorm(8), eps=0.1))
R("norm.Residual.eps.negative", RS + "eps", ValueError, ["eps=-1"], lambda: norm.Residual(nn.Identity(), 8, eps=-1))
R("norm.Residual.forward.x.str", "norm.Residual.forward:x", TypeError, [NAMED("x"), "str"],
  lambda: norm.Residual(nn.Identity(), 8)("x"))
R("norm.Residual.forward.x.width", "norm.Residual.forward:x", ValueError, ["x.shape[-1]=5"],
  lambda: norm.Residual(nn.Identity(), 8)(X(d=5)))

# =====================================================================================================================
# ffn
# =====================================================================================================================
F_ = "ffn."
R("ffn.get_activation.name.unknown", F_ + "get_activation:name", ValueError, ["activation='tanh'"], lambda: ffn.get_activation("tanh"))
R("ffn.get_activation.name.int", F_ + "get_activation:name", TypeError, ["activation", "int"], lambda: ffn.get_activation(3))
for cname in ("FeedForward", "SwiGLU"):
    C = getattr(ffn, cname)
    P = f"ffn.{cname}:"
    R(f"ffn.{cname}.d_model.zero", P + "d_model", ValueError, ["d_model=0"], lambda C=C: C(0, 16))
    R(f"ffn.{cname}.d_model.bool", P + "d_model", TypeError, ["d_model=True"], lambda C=C: C(True, 16))
    R(f"ffn.{cname}.d_ff.negative", P + "d_ff", ValueError, ["d_ff=-1"], lambda C=C: C(8, -1))
    R(f"ffn.{cname}.d_ff.float", P + "d_ff", TypeError, ["d_ff=16.0"], lambda C=C: C(8, 16.0))
    R(f"ffn.{cname}.dropout.nan", P + "dropout", ValueError, ["dropout=nan"], lambda C=C: C(8, 16, dropout=NAN))
    R(f"ffn.{cname}.dropout.one", P + "dropout", ValueError, ["dropout=1.0"], lambda C=C: C(8, 16, dropout=1.0))
    for meth in ("forward", "hidden"):
        P = f"ffn.{cname}.{meth}:x"
        call = lambda x, C=C, meth=meth: getattr(C(8, 16), meth)(x)
        R(f"ffn.{cname}.{meth}.x.str", P, TypeError, [NAMED("x"), "str"], lambda call=call: call("x"))
        R(f"ffn.{cname}.{meth}.x.width", P, ValueError, ["x.shape[-1]=5", "d_model=8"], lambda call=call: call(X(d=5)))
        R(f"ffn.{cname}.{meth}.x.int64", P, TypeError, ["x.dtype=torch.int64", "floating"], lambda call=call: call(X().long()))
        R(f"ffn.{cname}.{meth}.x.bool", P, TypeError, ["x.dtype=torch.bool", "floating"], lambda call=call: call(X().bool()))
        R(f"ffn.{cname}.{meth}.x.float64", P, TypeError, ["x.dtype=torch.float64", "torch.float32"], lambda call=call: call(X().double()))
R("ffn.FeedForward.activation.unknown", F_ + "FeedForward:activation", ValueError, ["activation='tanh'"],
  lambda: ffn.FeedForward(8, 16, "tanh"))
R("ffn.SwiGLU.multiple_of.zero", F_ + "SwiGLU:multiple_of", ValueError, ["multiple_of=0"], lambda: ffn.SwiGLU(8, None, multiple_of=0))
R("ffn.swiglu_hidden_dim.d_model.zero", F_ + "swiglu_hidden_dim:d_model", ValueError, ["d_model=0"], lambda: ffn.swiglu_hidden_dim(0))
R("ffn.swiglu_hidden_dim.multiple_of.bool", F_ + "swiglu_hidden_dim:multiple_of", TypeError, ["multiple_of=True"],
  lambda: ffn.swiglu_hidden_dim(8, True))
for bad, word in ((0, "ffn_dim_multiplier=0"), (NAN, "ffn_dim_multiplier=nan"), (INF, "ffn_dim_multiplier=inf"),
                  ("2", "ffn_dim_multiplier='2'")):
    R(f"ffn.swiglu_hidden_dim.ffn_dim_multiplier.{bad}", F_ + "swiglu_hidden_dim:ffn_dim_multiplier", TV, [word],
      lambda bad=bad: ffn.swiglu_hidden_dim(8, 4, bad))
R("ffn.ffn_param_count.d_model.zero", F_ + "ffn_param_count:d_model", ValueError, ["d_model=0"], lambda: ffn.ffn_param_count(0, 4))
R("ffn.ffn_param_count.d_ff.str", F_ + "ffn_param_count:d_ff", TypeError, ["d_ff='4'"], lambda: ffn.ffn_param_count(8, "4"))
R("ffn.make_ffn.d_ff.none_relu", F_ + "make_ffn:d_ff", ValueError, ["d_ff=None", "activation='relu'"], lambda: ffn.make_ffn(8, None))
R("ffn.make_ffn.d_model.zero", F_ + "make_ffn:d_model", ValueError, ["d_model=0"], lambda: ffn.make_ffn(0, 4))
R("ffn.make_ffn.activation.unknown", F_ + "make_ffn:activation", ValueError, ["activation='tanh'"], lambda: ffn.make_ffn(8, 4, "tanh"))
R("ffn.make_ffn.dropout.two", F_ + "make_ffn:dropout", ValueError, ["dropout=2"], lambda: ffn.make_ffn(8, 4, dropout=2))

# =====================================================================================================================
# positional
# =====================================================================================================================
PO = "positional."
R("positional.sinusoidal_frequencies.d.odd", PO + "sinusoidal_frequencies:d", ValueError, ["d=3", "even"],
  lambda: positional.sinusoidal_frequencies(3))
R("positional.sinusoidal_frequencies.d.zero", PO + "sinusoidal_frequencies:d", ValueError, ["d=0"], lambda: positional.sinusoidal_frequencies(0))
for bad, word in ((1, "base=1"), (NAN, "base=nan"), (INF, "base=inf"), ("1e4", "base='1e4'")):
    R(f"positional.sinusoidal_frequencies.base.{bad}", PO + "sinusoidal_frequencies:base", TV, [word],
      lambda bad=bad: positional.sinusoidal_frequencies(4, bad))
R("positional.sinusoidal_encoding.n_positions.negative", PO + "sinusoidal_encoding:n_positions", ValueError, ["n_positions=-1"],
  lambda: positional.sinusoidal_encoding(-1, 4))
R("positional.sinusoidal_encoding.d_model.odd", PO + "sinusoidal_encoding:d_model", ValueError, ["d_model=7", "even"],
  lambda: positional.sinusoidal_encoding(4, 7))
R("positional.sinusoidal_encoding.base.half", PO + "sinusoidal_encoding:base", ValueError, ["base=0.5"],
  lambda: positional.sinusoidal_encoding(4, 4, 0.5))
R("positional.sinusoidal_encoding.dtype.int64", PO + "sinusoidal_encoding:dtype", TypeError, ["dtype=torch.int64", "floating"],
  lambda: positional.sinusoidal_encoding(4, 4, dtype=torch.int64))
R("positional.rotation_matrix.m.nan", PO + "rotation_matrix:m", ValueError, ["m=nan", "finite"], lambda: positional.rotation_matrix(NAN, 4))
R("positional.rotation_matrix.m.str", PO + "rotation_matrix:m", TypeError, ["m='1'"], lambda: positional.rotation_matrix("1", 4))
R("positional.rotation_matrix.d.odd", PO + "rotation_matrix:d", ValueError, ["d=3"], lambda: positional.rotation_matrix(1.0, 3))
R("positional.rotation_matrix.base.one", PO + "rotation_matrix:base", ValueError, ["base=1"], lambda: positional.rotation_matrix(1.0, 4, 1))
for cname, make in (("SinusoidalPositionalEmbedding", lambda: positional.SinusoidalPositionalEmbedding(8)),
                    ("LearnedPositionalEmbedding", lambda: positional.LearnedPositionalEmbedding(4, 8))):
    P = f"positional.{cname}.forward:"
    R(f"positional.{cname}.forward.x.str", P + "x", TypeError, [NAMED("x"), "str"], lambda make=make: make()("x"))
    R(f"positional.{cname}.forward.x.int64", P + "x", TypeError, ["x", "torch.int64"], lambda make=make: make()(X().long()))
    R(f"positional.{cname}.forward.x.shape", P + "x", ValueError, ["x.shape=(1, 3, 5)"], lambda make=make: make()(X(d=5)))
    R(f"positional.{cname}.forward.offset.negative", P + "offset", ValueError, ["offset=-1"], lambda make=make: make()(X(), -1))
R("positional.LearnedPositionalEmbedding.forward.offset.past_max_len", PO + "LearnedPositionalEmbedding.forward:offset", ValueError,
  ["max_len=4", "5"], lambda: positional.LearnedPositionalEmbedding(4, 8)(X(), 3))
R("positional.SinusoidalPositionalEmbedding.d_model.odd", PO + "SinusoidalPositionalEmbedding:d_model", ValueError, ["d_model=7"],
  lambda: positional.SinusoidalPositionalEmbedding(7))
R("positional.SinusoidalPositionalEmbedding.base.zero", PO + "SinusoidalPositionalEmbedding:base", ValueError, ["base=0"],
  lambda: positional.SinusoidalPositionalEmbedding(8, 0))
R("positional.LearnedPositionalEmbedding.max_len.zero", PO + "LearnedPositionalEmbedding:max_len", ValueError, ["max_len=0"],
  lambda: positional.LearnedPositionalEmbedding(0, 8))
R("positional.LearnedPositionalEmbedding.d_model.bool", PO + "LearnedPositionalEmbedding:d_model", TypeError, ["d_model=True"],
  lambda: positional.LearnedPositionalEmbedding(4, True))
R("positional.LearnedPositionalEmbedding.init_std.nan", PO + "LearnedPositionalEmbedding:init_std", ValueError, ["init_std=nan"],
  lambda: positional.LearnedPositionalEmbedding(4, 8, NAN))
R("positional.LearnedPositionalEmbedding.init_std.str", PO + "LearnedPositionalEmbedding:init_std", TypeError, ["init_std='0.02'"],
  lambda: positional.LearnedPositionalEmbedding(4, 8, "0.02"))
for fname in ("rotate_half", "rotate_interleaved"):
    f = getattr(positional, fname)
    R(f"positional.{fname}.x.str", f"positional.{fname}:x", TypeError, [NAMED("x"), "str"], lambda f=f: f("x"))
    R(f"positional.{fname}.x.odd", f"positional.{fname}:x", ValueError, ["x.shape[-1]=3", "even"], lambda f=f: f(T(2, 3)))
AR = PO + "apply_rotary:"
R("positional.apply_rotary.x.str", AR + "x", TypeError, [NAMED("x"), "str"], lambda: positional.apply_rotary("x", T(3, 4), T(3, 4)))
R("positional.apply_rotary.cos.shape", AR + "cos", ValueError, ["cos.shape=(3, 6)"], lambda: positional.apply_rotary(T(1, 2, 3, 4), T(3, 6), T(3, 4)))
R("positional.apply_rotary.sin.shape", AR + "sin", ValueError, ["sin.shape=(5, 4)"], lambda: positional.apply_rotary(T(1, 2, 3, 4), T(3, 4), T(5, 4)))
R("positional.apply_rotary.interleaved.odd_dim", AR + "interleaved", ValueError, ["x.shape[-1]=3"],
  lambda: positional.apply_rotary(T(1, 2, 3, 3), T(3, 3), T(3, 3), interleaved=True))

RS_ = "checks.check_rope_scaling:"                  # the validator lives in checks (appendix); positional re-exports it
lin = lambda **kw: {"rope_type": "linear", "factor": 2.0} | kw
yarn = lambda **kw: {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8} | kw
llama3 = lambda **kw: {"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 8,
                       "low_freq_factor": 1.0, "high_freq_factor": 4.0} | kw
SCALING_ROWS = [
    ("str", TypeError, ["scaling='linear'"], "linear"),
    ("list", TypeError, ["scaling=[2.0]"], [2.0]),
    ("rope_type.unknown", ValueError, ["rope_type='weird'"], {"rope_type": "weird"}),
    ("rope_type.type_disagree", ValueError, ["rope_type='linear'", "type='yarn'"], lin(type="yarn")),
    ("factor.missing", ValueError, ["rope_type='linear'", "factor"], {"rope_type": "linear"}),
    ("factor.nan", ValueError, ["scaling['factor']=nan"], lin(factor=NAN)),
    ("factor.inf", ValueError, ["scaling['factor']=inf"], lin(factor=INF)),
    ("factor.str", TypeError, ["scaling['factor']='2'"], lin(factor="2")),
    ("factor.bool", TypeError, ["scaling['factor']=True"], lin(factor=True)),
    ("factor.below_one", ValueError, ["scaling['factor']=0.5", ">= 1"], lin(factor=0.5)),
    ("key.unknown", ValueError, ["'foo'", "rope_type='linear'"], lin(foo=1)),
    ("original_max_position_embeddings.zero", ValueError, ["original_max_position_embeddings", "=0"],
     {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 0}),
    ("original_max_position_embeddings.float", TypeError, ["original_max_position_embeddings", "=8.5"],
     {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 8.5}),
    ("partial_rotary_factor.half", ValueError, ["partial_rotary_factor", "0.5"], lin(partial_rotary_factor=0.5)),
    ("llama3.high_below_low", ValueError, ["high_freq_factor", "1.0"], llama3(high_freq_factor=1.0)),
    ("llama3.low_nan", ValueError, ["low_freq_factor", "nan"], llama3(low_freq_factor=NAN)),
    ("yarn.beta_fast_below_slow", ValueError, ["beta_fast", "beta_slow"], yarn(beta_fast=1.0, beta_slow=2.0)),
    ("yarn.beta_slow_inf", ValueError, ["beta_slow", "inf"], yarn(beta_slow=INF)),
    ("yarn.attention_factor_negative", ValueError, ["attention_factor", "-1"], yarn(attention_factor=-1.0)),
    ("yarn.mscale_nan", ValueError, ["mscale", "nan"], yarn(mscale=NAN)),
    ("yarn.truncate_str", TypeError, ["scaling['truncate']='yes'"], yarn(truncate="yes")),
]
for sid, exc, words, bad in SCALING_ROWS:
    R(f"checks.check_rope_scaling.scaling.{sid}", RS_ + "scaling", exc, words, lambda bad=bad: checks.check_rope_scaling(bad))
R("checks.check_rope_scaling.base.rope_theta_differs", RS_ + "base", ValueError, ["scaling['rope_theta']=500.0", "base=10000.0"],
  lambda: checks.check_rope_scaling(lin(rope_theta=500.0), 10000.0))
RI = PO + "rope_inv_freq:"
R("positional.rope_inv_freq.head_dim.odd", RI + "head_dim", ValueError, ["head_dim=5"], lambda: positional.rope_inv_freq(5))
R("positional.rope_inv_freq.base.nan", RI + "base", ValueError, ["base=nan"], lambda: positional.rope_inv_freq(4, NAN))
R("positional.rope_inv_freq.scaling.factor_nan", RI + "scaling", ValueError, ["scaling['factor']=nan"],
  lambda: positional.rope_inv_freq(4, scaling=lin(factor=NAN)))
R("positional.rope_inv_freq.seq_len.zero", RI + "seq_len", ValueError, ["seq_len=0"],
  lambda: positional.rope_inv_freq(4, scaling={"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 8}, seq_len=0))
RE = PO + "RotaryEmbedding:"
R("positional.RotaryEmbedding.head_dim.odd", RE + "head_dim", ValueError, ["head_dim=3"], lambda: positional.RotaryEmbedding(3))
R("positional.RotaryEmbedding.head_dim.zero", RE + "head_dim", ValueError, ["head_dim=0"], lambda: positional.RotaryEmbedding(0))
R("positional.RotaryEmbedding.base.inf", RE + "base", ValueError, ["base=inf"], lambda: positional.RotaryEmbedding(4, INF))
R("positional.RotaryEmbedding.scaling.unknown", RE + "scaling", ValueError, ["rope_type='weird'"],
  lambda: positional.RotaryEmbedding(4, scaling={"rope_type": "weird"}))
R("positional.RotaryEmbedding.max_cached.zero", RE + "max_cached", ValueError, ["max_cached=0"],
  lambda: positional.RotaryEmbedding(4, max_cached=0))
R("positional.RotaryEmbedding.rows.positions.str", PO + "RotaryEmbedding.rows:positions", TypeError, ["positions", "str"],
  lambda: rope().rows("0 1 2"))
R("positional.RotaryEmbedding.rows.positions.float", PO + "RotaryEmbedding.rows:positions", TypeError, ["positions", "torch.float32"],
  lambda: rope().rows(torch.tensor([0.5, 1.0])))
R("positional.RotaryEmbedding.tables.length.zero", PO + "RotaryEmbedding.tables:length", ValueError, ["length=0"], lambda: rope().tables(0))
R("positional.RotaryEmbedding.tables.length.bool", PO + "RotaryEmbedding.tables:length", TypeError, ["length=True"], lambda: rope().tables(True))
RF = PO + "RotaryEmbedding.forward:"
R("positional.RotaryEmbedding.forward.x.str", RF + "x", TypeError, [NAMED("x"), "str"], lambda: rope()("x"))
R("positional.RotaryEmbedding.forward.x.int64", RF + "x", TypeError, ["x", "torch.int64"], lambda: rope()(T(1, 2, 3, 4).long()))
R("positional.RotaryEmbedding.forward.x.head_dim", RF + "x", ValueError, ["x.shape=(1, 2, 3, 6)", "head_dim=4"], lambda: rope()(T(1, 2, 3, 6)))
R("positional.RotaryEmbedding.forward.positions.float", RF + "positions", TypeError, ["positions.dtype=torch.float32"],
  lambda: rope()(T(1, 2, 3, 4), torch.tensor([0.0, 1.0, 2.0])))
R("positional.RotaryEmbedding.forward.positions.length", RF + "positions", ValueError, ["positions", "T=3", "(2,)"],
  lambda: rope()(T(1, 2, 3, 4), torch.tensor([0, 1])))
R("positional.RotaryEmbedding.forward.positions.negative", RF + "positions", ValueError, ["positions", "-1"],
  lambda: rope()(T(1, 2, 3, 4), torch.tensor([0, -1, 2])))
R("positional.RotaryEmbedding.forward.offset.negative", RF + "offset", ValueError, ["offset=-1"], lambda: rope()(T(1, 2, 3, 4), offset=-1))
R("positional.alibi_slopes.n_heads.zero", PO + "alibi_slopes:n_heads", ValueError, ["n_heads=0"], lambda: positional.alibi_slopes(0))
R("positional.alibi_slopes.n_heads.bool", PO + "alibi_slopes:n_heads", TypeError, ["n_heads=True"], lambda: positional.alibi_slopes(True))
AB = PO + "alibi_bias:"
R("positional.alibi_bias.n_heads.zero", AB + "n_heads", ValueError, ["n_heads=0"], lambda: positional.alibi_bias(0, 3))
R("positional.alibi_bias.q_len.zero", AB + "q_len", ValueError, ["q_len=0"], lambda: positional.alibi_bias(2, 0))
R("positional.alibi_bias.k_len.negative", AB + "k_len", ValueError, ["k_len=-1"], lambda: positional.alibi_bias(2, 3, -1))
R("positional.alibi_bias.dtype.int64", AB + "dtype", TypeError, ["dtype=torch.int64", "floating"],
  lambda: positional.alibi_bias(2, 3, dtype=torch.int64))

SA = PO + "sinusoidal_at:"
R("positional.sinusoidal_at.positions.list", SA + "positions", TypeError, [NAMED("positions"), "list"], lambda: positional.sinusoidal_at([0, 1], 8))
R("positional.sinusoidal_at.positions.float", SA + "positions", TypeError, ["positions.dtype=torch.float32"],
  lambda: positional.sinusoidal_at(torch.tensor([0.5]), 8))
R("positional.sinusoidal_at.positions.negative", SA + "positions", ValueError, ["positions", ">= 0"],
  lambda: positional.sinusoidal_at(torch.tensor([-1, 0]), 8))
R("positional.sinusoidal_at.d_model.odd", SA + "d_model", ValueError, ["d_model=7"], lambda: positional.sinusoidal_at(torch.arange(3), 7))
R("positional.sinusoidal_at.base.zero", SA + "base", ValueError, ["base=0"], lambda: positional.sinusoidal_at(torch.arange(3), 8, 0))
R("positional.sinusoidal_at.base.nan", SA + "base", ValueError, ["base=nan"], lambda: positional.sinusoidal_at(torch.arange(3), 8, NAN))
R("positional.sinusoidal_at.dtype.int64", SA + "dtype", TypeError, ["dtype=torch.int64", "floating"],
  lambda: positional.sinusoidal_at(torch.arange(3), 8, dtype=torch.int64))
R("positional.sinusoidal_at.dtype.str", SA + "dtype", TypeError, ["dtype='float32'"], lambda: positional.sinusoidal_at(torch.arange(3), 8, dtype="float32"))
ABA = PO + "alibi_bias_at:"
R("positional.alibi_bias_at.n_heads.zero", ABA + "n_heads", ValueError, ["n_heads=0"], lambda: positional.alibi_bias_at(0, torch.arange(3), 3))
R("positional.alibi_bias_at.q_positions.list", ABA + "q_positions", TypeError, [NAMED("q_positions"), "list"], lambda: positional.alibi_bias_at(2, [0], 3))
R("positional.alibi_bias_at.q_positions.float", ABA + "q_positions", TypeError, ["q_positions.dtype=torch.float32"],
  lambda: positional.alibi_bias_at(2, torch.tensor([0.5]), 3))
R("positional.alibi_bias_at.q_positions.negative", ABA + "q_positions", ValueError, ["q_positions", ">= 0"],
  lambda: positional.alibi_bias_at(2, torch.tensor([-1]), 3))
R("positional.alibi_bias_at.k_len.zero", ABA + "k_len", ValueError, ["k_len=0"], lambda: positional.alibi_bias_at(2, torch.arange(3), 0))
R("positional.alibi_bias_at.dtype.int64", ABA + "dtype", TypeError, ["dtype=torch.int64", "floating"],
  lambda: positional.alibi_bias_at(2, torch.arange(3), 3, dtype=torch.int64))
for cname, make in (("SinusoidalPositionalEmbedding", lambda: positional.SinusoidalPositionalEmbedding(8)),
                    ("LearnedPositionalEmbedding", lambda: positional.LearnedPositionalEmbedding(4, 8))):
    PF = f"{PO}{cname}.forward:positions"
    R(f"positional.{cname}.forward.positions.list", PF, TypeError, [NAMED("positions"), "list"], lambda make=make: make()(X(), positions=[0, 1, 2]))
    R(f"positional.{cname}.forward.positions.float", PF, TypeError, ["positions.dtype=torch.float32"],
      lambda make=make: make()(X(), positions=torch.tensor([0.0, 1.0, 2.0])))
    R(f"positional.{cname}.forward.positions.shape", PF, ValueError, ["positions.shape=(5,)", "T=3"], lambda make=make: make()(X(), positions=torch.arange(5)))
    R(f"positional.{cname}.forward.positions.negative", PF, ValueError, ["positions", ">= 0"],
      lambda make=make: make()(X(), positions=torch.tensor([-1, 0, 1])))
R("positional.LearnedPositionalEmbedding.forward.positions.past_max_len", PO + "LearnedPositionalEmbedding.forward:positions", ValueError,
  ["positions", "max_len=4"], lambda: positional.LearnedPositionalEmbedding(4, 8)(X(), positions=torch.tensor([0, 1, 4])))

# =====================================================================================================================
# long_context
# =====================================================================================================================
from transformer_lit import long_context
LC, WRS, LBP = "long_context.", "long_context.with_rope_scaling:", "long_context.loss_by_position:"
def rope_lm(): return lm(positional="rope")
R("long_context.with_rope_scaling.model.linear", WRS + "model", TypeError, [NAMED("model"), "Linear"],
  lambda: long_context.with_rope_scaling(nn.Linear(2, 2), None, 32))
R("long_context.with_rope_scaling.model.sinusoidal", WRS + "model", ValueError, ["model.config.positional='sinusoidal'", "'rope'"],
  lambda: long_context.with_rope_scaling(lm(), None, 32))
R("long_context.with_rope_scaling.scaling.unknown", WRS + "scaling", ValueError, ["rope_type='ntk'", "not supported"],
  lambda: long_context.with_rope_scaling(rope_lm(), {"rope_type": "ntk", "factor": 2.0}, 32))
R("long_context.with_rope_scaling.max_len.zero", WRS + "max_len", ValueError, ["max_len=0"], lambda: long_context.with_rope_scaling(rope_lm(), None, 0))
R("long_context.with_rope_scaling.max_len.float", WRS + "max_len", TypeError, ["max_len=32.0"], lambda: long_context.with_rope_scaling(rope_lm(), None, 32.0))
R("long_context.loss_by_position.ids.list", LBP + "ids", TypeError, [NAMED("ids"), "list"], lambda: long_context.loss_by_position(rope_lm(), [1, 2, 3], 2))
R("long_context.loss_by_position.ids.float", LBP + "ids", TypeError, ["ids.dtype=torch.float32"],
  lambda: long_context.loss_by_position(rope_lm(), torch.zeros(9), 2))
R("long_context.loss_by_position.ids.2d", LBP + "ids", ValueError, ["ids.dim()=2"], lambda: long_context.loss_by_position(rope_lm(), ids(2, 5), 2))
R("long_context.loss_by_position.ids.short", LBP + "ids", ValueError, ["ids has 3 tokens", "T + 1 = 4"],
  lambda: long_context.loss_by_position(rope_lm(), ids(1, 3)[0], 3))
R("long_context.loss_by_position.T.zero", LBP + "T", ValueError, ["T=0"], lambda: long_context.loss_by_position(rope_lm(), ids(1, 9)[0], 0))
R("long_context.loss_by_position.batch_size.zero", LBP + "batch_size", ValueError, ["batch_size=0"],
  lambda: long_context.loss_by_position(rope_lm(), ids(1, 9)[0], 2, batch_size=0))

# =====================================================================================================================
# masks
# =====================================================================================================================
MK = "masks."
R("masks.mask_to_str.mask.str", MK + "mask_to_str:mask", TypeError, ["mask", "str"], lambda: masks.mask_to_str("x"))
R("masks.mask_to_str.mask.float", MK + "mask_to_str:mask", TV, ["mask", "torch.float32"], lambda: masks.mask_to_str(torch.zeros(2, 2)))
R("masks.mask_to_str.mask.rank3", MK + "mask_to_str:mask", ValueError, ["mask", "(1, 2, 2)"],
  lambda: masks.mask_to_str(torch.ones(1, 2, 2, dtype=torch.bool)))
R("masks.to_additive.mask.str", MK + "to_additive:mask", TypeError, [NAMED("mask"), "str"], lambda: masks.to_additive("x"))
R("masks.to_additive.mask.int64", MK + "to_additive:mask", TypeError, ["mask", "torch.int64"], lambda: masks.to_additive(torch.ones(2, 2, dtype=torch.long)))
R("masks.to_additive.dtype.int64", MK + "to_additive:dtype", TypeError, ["dtype=torch.int64", "floating"],
  lambda: masks.to_additive(torch.ones(2, 2, dtype=torch.bool), torch.int64))
PM = MK + "padding_mask:"
R("masks.padding_mask.lengths.str", PM + "lengths", TypeError, ["lengths", "str"], lambda: masks.padding_mask("3"))
R("masks.padding_mask.lengths.float", PM + "lengths", TypeError, ["lengths", "torch.float32"], lambda: masks.padding_mask(torch.tensor([1.0, 2.0])))
R("masks.padding_mask.lengths.float_list", PM + "lengths", TypeError, ["lengths", "float"], lambda: masks.padding_mask([1.5, 2]))
R("masks.padding_mask.lengths.bool", PM + "lengths", TypeError, ["lengths", "torch.bool"], lambda: masks.padding_mask(torch.tensor([True])))
R("masks.padding_mask.lengths.rank2", PM + "lengths", ValueError, ["lengths", "(1, 2)"], lambda: masks.padding_mask(torch.tensor([[1, 2]])))
R("masks.padding_mask.lengths.str_item", PM + "lengths", TypeError, ["lengths[1]='3'", "int"], lambda: masks.padding_mask([1, "3"]))
R("masks.padding_mask.lengths.bool_item", PM + "lengths", TypeError, ["lengths[0]=True", "int"], lambda: masks.padding_mask([True, 2]))
R("masks.padding_mask.lengths.negative", PM + "lengths", ValueError, ["lengths=[-1, 2]", ">= 0"], lambda: masks.padding_mask([-1, 2]))
R("masks.padding_mask.max_len.too_small", PM + "max_len", ValueError, ["lengths=[1, 3]", "max_len=2"], lambda: masks.padding_mask([1, 3], 2))
R("masks.padding_mask.max_len.negative", PM + "max_len", ValueError, ["max_len=-1"], lambda: masks.padding_mask([0], -1))
R("masks.padding_mask.max_len.bool", PM + "max_len", TypeError, ["max_len=True"], lambda: masks.padding_mask([1], True))
R("masks.combine_masks.masks.str", MK + "combine_masks:masks", TypeError, ["mask", "str"],
  lambda: masks.combine_masks(torch.ones(2, 2, dtype=torch.bool), "x"))
R("masks.combine_masks.masks.int64", MK + "combine_masks:masks", TypeError, ["mask", "torch.int64"],
  lambda: masks.combine_masks(torch.ones(2, 2, dtype=torch.long)))
R("masks.combine_masks.masks.shapes", MK + "combine_masks:masks", ValueError, ["(2, 3)", "(4, 5)"],
  lambda: masks.combine_masks(torch.ones(2, 3, dtype=torch.bool), torch.ones(4, 5, dtype=torch.bool)))
FT = MK + "from_torch_masks:"
R("masks.from_torch_masks.attn_mask.str", FT + "attn_mask", TypeError, ["attn_mask", "str"], lambda: masks.from_torch_masks("x"))
R("masks.from_torch_masks.attn_mask.rank1", FT + "attn_mask", ValueError, ["attn_mask.shape=(3,)"],
  lambda: masks.from_torch_masks(torch.zeros(3, dtype=torch.bool)))
R("masks.from_torch_masks.attn_mask.int64", FT + "attn_mask", TypeError, ["attn_mask", "torch.int64"],
  lambda: masks.from_torch_masks(torch.zeros(3, 3, dtype=torch.long)))
R("masks.from_torch_masks.n_heads.missing", FT + "n_heads", ValueError, ["attn_mask.shape=(4, 3, 3)", "n_heads"],
  lambda: masks.from_torch_masks(torch.zeros(4, 3, 3, dtype=torch.bool)))
R("masks.from_torch_masks.n_heads.not_dividing", FT + "n_heads", ValueError, ["n_heads=3", "attn_mask.shape[0]=4"],
  lambda: masks.from_torch_masks(torch.zeros(4, 3, 3, dtype=torch.bool), n_heads=3))
R("masks.from_torch_masks.n_heads.zero", FT + "n_heads", ValueError, ["n_heads=0"],
  lambda: masks.from_torch_masks(torch.zeros(4, 3, 3, dtype=torch.bool), n_heads=0))
R("masks.from_torch_masks.key_padding_mask.rank3", FT + "key_padding_mask", ValueError, ["key_padding_mask.shape=(1, 1, 3)"],
  lambda: masks.from_torch_masks(key_padding_mask=torch.zeros(1, 1, 3, dtype=torch.bool)))
R("masks.from_torch_masks.key_padding_mask.str", FT + "key_padding_mask", TypeError, ["key_padding_mask", "str"],
  lambda: masks.from_torch_masks(key_padding_mask="x"))

# =====================================================================================================================
# multihead
# =====================================================================================================================
MH = "multihead."
R("multihead.split_heads.x.str", MH + "split_heads:x", TypeError, [NAMED("x"), "str"], lambda: multihead.split_heads("x", 2))
R("multihead.split_heads.x.rank2", MH + "split_heads:x", ValueError, [("x.dim()=2", "x.shape=(3, 8)")], lambda: multihead.split_heads(T(3, 8), 2))
R("multihead.split_heads.n_heads.zero", MH + "split_heads:n_heads", ValueError, ["n_heads=0"], lambda: multihead.split_heads(X(), 0))
R("multihead.split_heads.n_heads.not_dividing", MH + "split_heads:n_heads", ValueError, ["x.shape[-1]=8", "n_heads=3"],
  lambda: multihead.split_heads(X(), 3))
R("multihead.merge_heads.x.rank3", MH + "merge_heads:x", ValueError, [("x.dim()=3", "x.shape=(2, 3, 4)")], lambda: multihead.merge_heads(T(2, 3, 4)))
R("multihead.merge_heads.x.str", MH + "merge_heads:x", TypeError, [NAMED("x"), "str"], lambda: multihead.merge_heads("x"))
R("checks.check_kv_heads.n_kv_heads.not_dividing", "checks.check_kv_heads:n_kv_heads", ValueError, ["n_kv_heads=3", "n_heads=4"],
  lambda: checks.check_kv_heads(4, 3))
R("checks.check_kv_heads.n_heads.not_divided", "checks.check_kv_heads:n_heads", ValueError, ["n_kv_heads=2", "n_heads=3"],
  lambda: checks.check_kv_heads(3, 2))
R("checks.check_kv_heads.n_kv_heads.zero", "checks.check_kv_heads:n_kv_heads", ValueError, ["n_kv_heads=0"], lambda: checks.check_kv_heads(4, 0))
R("checks.check_kv_heads.n_kv_heads.bool", "checks.check_kv_heads:n_kv_heads", TypeError, ["n_kv_heads=True"], lambda: checks.check_kv_heads(4, True))
AC = MH + "attention_cost:"
R("multihead.attention_cost.d_model.zero", AC + "d_model", ValueError, ["d_model=0"], lambda: multihead.attention_cost(0, 2, 3))
R("multihead.attention_cost.n_heads.not_dividing", AC + "n_heads", ValueError, ["d_model=8", "n_heads=3"], lambda: multihead.attention_cost(8, 3, 3))
R("multihead.attention_cost.q_len.zero", AC + "q_len", ValueError, ["q_len=0"], lambda: multihead.attention_cost(8, 2, 0))
R("multihead.attention_cost.k_len.negative", AC + "k_len", ValueError, ["k_len=-1"], lambda: multihead.attention_cost(8, 2, 3, -1))
R("multihead.attention_cost.n_kv_heads.not_dividing", AC + "n_kv_heads", ValueError, ["n_kv_heads=3"],
  lambda: multihead.attention_cost(8, 2, 3, n_kv_heads=3))
KB = MH + "kv_cache_bytes:"
for p, i in (("n_kv_heads", 0), ("d_head", 1), ("seq_len", 2), ("n_layers", 3), ("batch", 4)):
    args = [2, 4, 8, 1, 1]; args[i] = -1
    R(f"multihead.kv_cache_bytes.{p}.negative", KB + p, ValueError, [f"{p}=-1"], lambda args=args: multihead.kv_cache_bytes(*args))
R("multihead.kv_cache_bytes.dtype.str", KB + "dtype", TypeError, ["dtype='bf16'"], lambda: multihead.kv_cache_bytes(2, 4, 8, dtype="bf16"))
KA = "decoding.KVCache.append:"                                       # chapter 10's cache
R("decoding.KVCache.append.k.str", KA + "k", TypeError, ["k", "str"], lambda: decoding.KVCache().append("k", T(1, 2, 3, 4)))
R("decoding.KVCache.append.v.str", KA + "v", TypeError, ["v", "str"], lambda: decoding.KVCache().append(T(1, 2, 3, 4), "v"))
def _append_twice(k2, v2):
    c = decoding.KVCache(); c.append(T(1, 2, 3, 4), T(1, 2, 3, 4)); return c.append(k2, v2)
R("decoding.KVCache.append.k.heads_changed", KA + "k", ValueError, ["k.shape=(1, 3, 1, 4)", "(1, 2, 3, 4)"],
  lambda: _append_twice(T(1, 3, 1, 4), T(1, 3, 1, 4)))
R("decoding.KVCache.append.v.width_changed", KA + "v", ValueError, ["v.shape=(1, 2, 1, 5)"],
  lambda: _append_twice(T(1, 2, 1, 4), T(1, 2, 1, 5)))
R("decoding.KVCache.append.k.rank2", KA + "k", ValueError, [("k.dim()=2", "k.shape=(3, 4)")], lambda: decoding.KVCache().append(T(3, 4), T(3, 4)))

MC = MH + "MultiHeadAttention:"
R("multihead.MultiHeadAttention.d_model.zero", MC + "d_model", ValueError, ["d_model=0"], lambda: multihead.MultiHeadAttention(0, 1))
R("multihead.MultiHeadAttention.d_model.bool", MC + "d_model", TypeError, ["d_model=True"], lambda: multihead.MultiHeadAttention(True, 1))
R("multihead.MultiHeadAttention.n_heads.zero", MC + "n_heads", ValueError, ["n_heads=0"], lambda: multihead.MultiHeadAttention(8, 0))
R("multihead.MultiHeadAttention.n_heads.not_dividing", MC + "n_heads", ValueError, ["d_model=8", "n_heads=3"], lambda: multihead.MultiHeadAttention(8, 3))
R("multihead.MultiHeadAttention.dropout.one", MC + "dropout", ValueError, ["dropout=1"], lambda: multihead.MultiHeadAttention(8, 2, dropout=1))
R("multihead.MultiHeadAttention.kdim.zero", MC + "kdim", ValueError, ["kdim=0"], lambda: multihead.MultiHeadAttention(8, 2, kdim=0))
R("multihead.MultiHeadAttention.vdim.float", MC + "vdim", TypeError, ["vdim=4.0"], lambda: multihead.MultiHeadAttention(8, 2, vdim=4.0))
R("multihead.MultiHeadAttention.backend.unknown", MC + "backend", ValueError, ["backend='nope'"], lambda: multihead.MultiHeadAttention(8, 2, backend="nope"))
R("multihead.MultiHeadAttention.rotary.int", MC + "rotary", TypeError, ["rotary=3", "callable"], lambda: multihead.MultiHeadAttention(8, 2, rotary=3))
R("multihead.MultiHeadAttention.n_kv_heads.not_dividing", MC + "n_kv_heads", ValueError, ["n_kv_heads=3", "n_heads=2"],
  lambda: multihead.MultiHeadAttention(8, 2, n_kv_heads=3))
R("multihead.MultiHeadAttention.qkv_bias.str", MC + "qkv_bias", TypeError, ["qkv_bias='yes'"], lambda: multihead.MultiHeadAttention(8, 2, qkv_bias="yes"))
for meth in ("project_qkv", "project_q"):
    P = f"multihead.MultiHeadAttention.{meth}:query"
    R(f"multihead.MultiHeadAttention.{meth}.query.str", P, TypeError, [NAMED("query"), "str"], lambda meth=meth: getattr(mha(), meth)("x"))
    R(f"multihead.MultiHeadAttention.{meth}.query.width", P, ValueError, ["query.shape[-1]=5", "d_model=8"], lambda meth=meth: getattr(mha(), meth)(X(d=5)))
R("multihead.MultiHeadAttention.project_qkv.key.str", "multihead.MultiHeadAttention.project_qkv:key", TypeError, [NAMED("key"), "str"],
  lambda: mha().project_qkv(X(), "k"))
R("multihead.MultiHeadAttention.project_qkv.value.width", "multihead.MultiHeadAttention.project_qkv:value", ValueError, ["value.shape[-1]=5"],
  lambda: mha().project_qkv(X(), X(), X(d=5)))
MF = MH + "MultiHeadAttention.forward:"
R("multihead.MultiHeadAttention.forward.query.str", MF + "query", TypeError, [NAMED("query"), "str"], lambda: mha()("x"))
R("multihead.MultiHeadAttention.forward.query.int64", MF + "query", TypeError, ["query.dtype=torch.int64", "floating"], lambda: mha()(X().long()))
R("multihead.MultiHeadAttention.forward.query.bool", MF + "query", TypeError, ["query.dtype=torch.bool", "floating"], lambda: mha()(X().bool()))
R("multihead.MultiHeadAttention.forward.query.float64", MF + "query", TypeError, ["query.dtype=torch.float64", "torch.float32"],
  lambda: mha()(X().double()))
R("multihead.MultiHeadAttention.forward.query.rank2", MF + "query", ValueError, ["query.dim()=2"], lambda: mha()(T(3, 8)))
R("multihead.MultiHeadAttention.forward.query.width", MF + "query", ValueError, ["query.shape[-1]=5", "d_model=8"], lambda: mha()(X(d=5)))
R("multihead.MultiHeadAttention.forward.key.dtype", MF + "key", TypeError, ["key.dtype=torch.float64", "query.dtype=torch.float32"],
  lambda: mha()(X(), X().double()))
R("multihead.MultiHeadAttention.forward.key.batch", MF + "key", ValueError, ["key.shape[0]=2", "query.shape[0]=1"], lambda: mha()(X(), X(B=2)))
R("multihead.MultiHeadAttention.forward.value.length", MF + "value", ValueError, ["key.shape[1]=3", "value.shape[1]=4"],
  lambda: mha()(X(), X(), X(Tn=4)))
R("multihead.MultiHeadAttention.forward.value.str", MF + "value", TypeError, [NAMED("value"), "str"], lambda: mha()(X(), X(), "v"))
R("multihead.MultiHeadAttention.forward.mask.plus_inf", MF + "mask", ValueError, ["mask", "+inf"], lambda: mha()(X(), mask=with_inf()))
R("multihead.MultiHeadAttention.forward.mask.rank3", MF + "mask", ValueError, ["mask.dim()=3"], lambda: mha()(X(), mask=torch.ones(1, 3, 3, dtype=torch.bool)))
R("multihead.MultiHeadAttention.forward.mask.shape", MF + "mask", ValueError, ["mask.shape=(2, 2)"], lambda: mha()(X(), mask=torch.ones(2, 2, dtype=torch.bool)))
R("multihead.MultiHeadAttention.forward.mask.int64", MF + "mask", TypeError, ["mask.dtype=torch.int64"], lambda: mha()(X(), mask=torch.ones(3, 3, dtype=torch.long)))
R("multihead.MultiHeadAttention.forward.is_causal.with_mask", MF + "is_causal", ValueError, ["is_causal=True"],
  lambda: mha()(X(), mask=torch.ones(3, 3, dtype=torch.bool), is_causal=True))
R("multihead.MultiHeadAttention.forward.need_weights.sdpa", MF + "need_weights", ValueError, ["backend='sdpa'", "need_weights"],
  lambda: mha_sdpa()(X(), need_weights=True))
R("multihead.MultiHeadAttention.forward.attn_bias.bool", MF + "attn_bias", TypeError, ["attn_bias", "torch.bool"],
  lambda: mha()(X(), attn_bias=torch.ones(3, 3, dtype=torch.bool)))
R("multihead.MultiHeadAttention.forward.attn_bias.plus_inf", MF + "attn_bias", ValueError, ["attn_bias", "+inf"],
  lambda: mha()(X(), attn_bias=with_inf()))
R("multihead.MultiHeadAttention.forward.attn_bias.shape", MF + "attn_bias", ValueError, ["attn_bias.shape=(3, 5)"],
  lambda: mha()(X(), attn_bias=torch.zeros(3, 5)))
R("multihead.MultiHeadAttention.forward.positions.float", MF + "positions", TV, ["positions", "torch.float32"],
  lambda: mha()(X(), positions=torch.tensor([0.0, 1.0, 2.0])))
R("multihead.MultiHeadAttention.forward.positions.length", MF + "positions", ValueError, ["positions", "(2,)"],
  lambda: mha()(X(), positions=torch.tensor([0, 1])))
R("multihead.MultiHeadAttention.forward.cache.str", MF + "cache", TypeError, [NAMED("cache"), "str"], lambda: mha()(X(), cache="c"))
R("multihead.MultiHeadAttention.from_torch.m.str", MH + "MultiHeadAttention.from_torch:m", TypeError, ["MultiheadAttention", "str"],
  lambda: multihead.MultiHeadAttention.from_torch("m"))

SK = "fast_decoding.StaticKVCache"
for i, (p, bad, exc, word) in enumerate((("batch", -1, ValueError, "batch=-1"), ("n_kv_heads", 0, ValueError, "n_kv_heads=0"),
                                        ("max_len", 0, ValueError, "max_len=0"), ("head_dim", 0, ValueError, "head_dim=0"),
                                        ("dtype", torch.int64, TypeError, "dtype=torch.int64"), ("dtype", "float32", TypeError, "dtype='float32'"))):
    args = [1, 2, 4, 4, torch.float32]; args[min(i, 4)] = bad
    R(f"fast_decoding.StaticKVCache.{p}.{bad}", f"{SK}:{p}", exc, [word], lambda args=args: fast_decoding.StaticKVCache(*args))
@functools.cache
def _skv_new(): return fast_decoding.StaticKVCache(1, 2, 4, 4)
def skv(): c = _skv_new(); c.pos.zero_(); return c                # one cache, emptied for each row
R("fast_decoding.StaticKVCache.append.k.str", SK + ".append:k", TypeError, [NAMED("k"), "str"], lambda: skv().append("k", T(1, 2, 1, 4)))
R("fast_decoding.StaticKVCache.append.k.heads", SK + ".append:k", ValueError, ["k.shape=(1, 3, 1, 4)", "(1, 2, 4, 4)"],
  lambda: skv().append(T(1, 3, 1, 4), T(1, 3, 1, 4)))
R("fast_decoding.StaticKVCache.append.v.len", SK + ".append:v", ValueError, ["v.shape=(1, 2, 2, 4)"], lambda: skv().append(T(1, 2, 1, 4), T(1, 2, 2, 4)))
R("fast_decoding.StaticKVCache.append.k.overflow", SK + ".append:k", ValueError, ["k.shape[-2]=5", "max_len=4"], lambda: skv().append(T(1, 2, 5, 4), T(1, 2, 5, 4)))
R("fast_decoding.StaticKVCache.append.v.float64", SK + ".append:v", TypeError, ["v.dtype=torch.float64", "torch.float32"],
  lambda: skv().append(T(1, 2, 1, 4, dtype=torch.float64), T(1, 2, 1, 4, dtype=torch.float64)))
R("fast_decoding.StaticKVCache.reorder.rows.list", SK + ".reorder:rows", TypeError, [NAMED("rows"), "list"], lambda: skv().reorder([0]))
R("fast_decoding.StaticKVCache.reorder.rows.float", SK + ".reorder:rows", TypeError, ["rows.dtype=torch.float32"], lambda: skv().reorder(torch.tensor([0.0])))
R("fast_decoding.StaticKVCache.reorder.rows.shape", SK + ".reorder:rows", ValueError, ["rows.shape=(2,)", "(B,)=(1,)"], lambda: skv().reorder(torch.tensor([0, 0])))
R("fast_decoding.StaticKVCache.reorder.rows.out_of_range", SK + ".reorder:rows", ValueError, ["rows=[3]", "B=1"], lambda: skv().reorder(torch.tensor([3])))

# =====================================================================================================================
# blocks
# =====================================================================================================================
BL = "blocks."
R("blocks.make_norm.norm.unknown", BL + "make_norm:norm", ValueError, ["norm='batch'"], lambda: blocks.make_norm("batch", 8))
R("blocks.make_norm.d_model.zero", BL + "make_norm:d_model", ValueError, ["d_model=0"], lambda: blocks.make_norm("layer", 0))
R("blocks.make_norm.eps.negative", BL + "make_norm:eps", ValueError, ["eps=-1"], lambda: blocks.make_norm("rms", 8, -1))
for cname in ("EncoderBlock", "DecoderBlock", "DecoderOnlyBlock"):
    C = getattr(blocks, cname)
    P = f"blocks.{cname}:"
    for p, bad, exc, word in (("d_model", 0, ValueError, "d_model=0"), ("n_heads", 3, ValueError, "n_heads=3"),
                              ("d_ff", 0, ValueError, "d_ff=0"), ("dropout", 1.5, ValueError, "dropout=1.5"),
                              ("activation", "tanh", ValueError, "activation='tanh'"), ("norm_first", "yes", TypeError, "norm_first='yes'"),
                              ("norm", "batch", ValueError, "norm='batch'"), ("layer_norm_eps", 0, ValueError, "layer_norm_eps=0"),
                              ("rotary", 3, TypeError, "rotary=3"), ("n_kv_heads", 3, ValueError, "n_kv_heads=3"),
                              ("qkv_bias", "yes", TypeError, "qkv_bias='yes'"), ("backend", "nope", ValueError, "backend='nope'")):
        kw = dict(d_model=8, n_heads=2) | {p: bad}
        R(f"blocks.{cname}.{p}.{bad}", P + p, exc, [word], lambda C=C, kw=kw: C(**kw))
for cname, make in (("EncoderBlock", enc), ("DecoderOnlyBlock", dob)):
    P = f"blocks.{cname}.forward:"
    R(f"blocks.{cname}.forward.x.str", P + "x", TypeError, [NAMED("x"), "str"], lambda make=make: make()("x"))
    R(f"blocks.{cname}.forward.x.int64", P + "x", TypeError, ["x.dtype=torch.int64", "floating"], lambda make=make: make()(X().long()))
    R(f"blocks.{cname}.forward.x.float64", P + "x", TypeError, ["x.dtype=torch.float64", "torch.float32"], lambda make=make: make()(X().double()))
    R(f"blocks.{cname}.forward.x.shape", P + "x", ValueError, ["x.shape=(1, 3, 5)", "d_model=8"], lambda make=make: make()(X(d=5)))
    R(f"blocks.{cname}.forward.mask.plus_inf", P + "mask", ValueError, ["mask", "+inf"], lambda make=make: make()(X(), mask=with_inf()))
    R(f"blocks.{cname}.forward.mask.shape", P + "mask", ValueError, ["mask.shape=(2, 2)"], lambda make=make: make()(X(), mask=torch.ones(2, 2, dtype=torch.bool)))
    R(f"blocks.{cname}.forward.is_causal.with_mask", P + "is_causal", ValueError, ["is_causal=True"],
      lambda make=make: make()(X(), mask=torch.ones(3, 3, dtype=torch.bool), is_causal=True))
    R(f"blocks.{cname}.forward.attn_bias.bool", P + "attn_bias", TypeError, ["attn_bias", "torch.bool"],
      lambda make=make: make()(X(), attn_bias=torch.ones(3, 3, dtype=torch.bool)))
    R(f"blocks.{cname}.forward.positions.length", P + "positions", ValueError, ["positions", "(2,)"],
      lambda make=make: make()(X(), positions=torch.tensor([0, 1])))
R("blocks.DecoderOnlyBlock.forward.cache.str", BL + "DecoderOnlyBlock.forward:cache", TypeError, [NAMED("cache"), "str"], lambda: dob()(X(), cache="c"))
DF = BL + "DecoderBlock.forward:"
R("blocks.DecoderBlock.forward.x.str", DF + "x", TypeError, [NAMED("x"), "str"], lambda: dec()("x", X()))
R("blocks.DecoderBlock.forward.x.int64", DF + "x", TypeError, ["x.dtype=torch.int64", "floating"], lambda: dec()(X().long(), X()))
R("blocks.DecoderBlock.forward.x.float64", DF + "x", TypeError, ["x.dtype=torch.float64", "torch.float32"], lambda: dec()(X().double(), X().double()))
R("blocks.DecoderBlock.forward.memory.str", DF + "memory", TypeError, [NAMED("memory"), "str"], lambda: dec()(X(), "m"))
R("blocks.DecoderBlock.forward.memory.float64", DF + "memory", TypeError, ["memory.dtype=torch.float64"], lambda: dec()(X(), X().double()))
R("blocks.DecoderBlock.forward.memory.batch", DF + "memory", ValueError, ["memory.shape[0]=2", "x.shape[0]=1"], lambda: dec()(X(), X(B=2)))
R("blocks.DecoderBlock.forward.self_mask.shape", DF + "self_mask", ValueError, ["mask.shape=(2, 2)"],
  lambda: dec()(X(), X(), self_mask=torch.ones(2, 2, dtype=torch.bool)))
R("blocks.DecoderBlock.forward.memory_mask.plus_inf", DF + "memory_mask", ValueError, ["mask", "+inf"], lambda: dec()(X(), X(), memory_mask=with_inf()))
R("blocks.DecoderBlock.forward.is_causal.with_mask", DF + "is_causal", ValueError, ["is_causal=True"],
  lambda: dec()(X(), X(), self_mask=torch.ones(3, 3, dtype=torch.bool), is_causal=True))
R("blocks.DecoderBlock.forward.attn_bias.bool", DF + "attn_bias", TypeError, ["attn_bias", "torch.bool"],
  lambda: dec()(X(), X(), attn_bias=torch.ones(3, 3, dtype=torch.bool)))
R("blocks.DecoderBlock.forward.positions.length", DF + "positions", ValueError, ["positions", "(2,)"],
  lambda: dec()(X(), X(), positions=torch.tensor([0, 1])))
R("blocks.DecoderBlock.forward.cache.str", DF + "cache", TypeError, [NAMED("cache"), "str"], lambda: dec()(X(), X(), cache="c"))
R("blocks.DecoderBlock.forward.memory_cache.str", DF + "memory_cache", TypeError, ["memory_cache", "str"], lambda: dec()(X(), X(), memory_cache="c"))
for cname, layer in (("EncoderBlock", lambda: nn.TransformerEncoderLayer(8, 2, 16, activation=torch.tanh, batch_first=True)),
                     ("DecoderBlock", lambda: nn.TransformerDecoderLayer(8, 2, 16, activation=torch.tanh, batch_first=True)),
                     ("DecoderOnlyBlock", lambda: nn.TransformerEncoderLayer(8, 2, 16, activation=torch.tanh, batch_first=True))):
    C = getattr(blocks, cname)
    P = f"blocks.{cname}.from_torch:layer"
    R(f"blocks.{cname}.from_torch.layer.str", P, TypeError, [NAMED("layer"), "str"], lambda C=C: C.from_torch("layer"))
    R(f"blocks.{cname}.from_torch.layer.tanh", P, ValueError, ["layer.activation", "tanh"], lambda C=C, layer=layer: C.from_torch(layer()))

# =====================================================================================================================
# model
# =====================================================================================================================
MO = "model."
TC = MO + "TransformerConfig:"
CONFIG_ROWS = [  # (field, bad value, exception, words); every field of TransformerConfig
    ("vocab_size", 0, ValueError, ["vocab_size=0"]), ("vocab_size", True, TypeError, ["vocab_size=True"]),
    ("vocab_size", "11", TypeError, ["vocab_size='11'"]),
    ("d_model", 0, ValueError, ["d_model=0"]), ("d_model", 9, ValueError, ["d_model=9", "n_heads=2"]),
    ("d_model", 8.0, TypeError, ["d_model=8.0"]),
    ("n_heads", 0, ValueError, ["n_heads=0"]), ("n_heads", 3, ValueError, ["d_model=8", "n_heads=3"]),
    ("n_layers", 0, ValueError, ["n_layers=0"]), ("n_layers", NAN, TypeError, ["n_layers=nan"]),
    ("d_ff", 0, ValueError, ["d_ff=0"]), ("d_ff", "16", TypeError, ["d_ff='16'"]),
    ("dropout", 1.0, ValueError, ["dropout=1.0"]), ("dropout", NAN, ValueError, ["dropout=nan"]), ("dropout", "0.1", TV, ["dropout='0.1'"]),
    ("max_len", 0, ValueError, ["max_len=0"]), ("max_len", True, TypeError, ["max_len=True"]),
    ("positional", "absolute", ValueError, ["positional='absolute'"]),
    ("norm_first", "yes", TypeError, ["norm_first='yes'"]),
    ("activation", "tanh", ValueError, ["activation='tanh'"]),
    ("tie_embeddings", 1, TypeError, ["tie_embeddings=1"]),
    ("bias", "no", TypeError, ["bias='no'"]),
    ("n_kv_heads", 3, ValueError, ["n_kv_heads=3"]), ("n_kv_heads", 0, ValueError, ["n_kv_heads=0"]),
    ("qkv_bias", 1, TypeError, ["qkv_bias=1"]),
    ("n_encoder_layers", 0, ValueError, ["n_encoder_layers=0"]), ("n_decoder_layers", -1, ValueError, ["n_decoder_layers=-1"]),
    ("src_vocab_size", 0, ValueError, ["src_vocab_size=0"]),
    ("norm", "batch", ValueError, ["norm='batch'"]),
    ("layer_norm_eps", 0, ValueError, ["layer_norm_eps=0"]), ("layer_norm_eps", NAN, ValueError, ["layer_norm_eps=nan"]),
    ("layer_norm_eps", "1e-5", TV, ["layer_norm_eps='1e-5'"]),
    ("final_norm", None, TypeError, ["final_norm=None"]),
    ("scale_embeddings", "yes", TypeError, ["scale_embeddings='yes'"]),
    ("logit_scale", 0, ValueError, ["logit_scale=0"]), ("logit_scale", NAN, ValueError, ["logit_scale=nan"]),
    ("logit_scale", INF, ValueError, ["logit_scale=inf"]),
    ("pad_id", 11, ValueError, ["pad_id=11", "vocab_size"]), ("pad_id", -1, ValueError, ["pad_id=-1"]),
    ("pad_id", True, TV, ["pad_id=True"]),
    ("rope_base", 1, ValueError, ["rope_base=1"]), ("rope_base", NAN, ValueError, ["rope_base=nan"]),
    ("rope_base", INF, ValueError, ["rope_base=inf"]),
    ("rope_scaling", {"rope_type": "linear", "factor": NAN}, ValueError, ["scaling['factor']=nan"]),
    ("rope_scaling", "linear", TypeError, ["scaling='linear'"]),
    ("backend", "nope", ValueError, ["backend='nope'"]),
]
for field, bad, exc, words in CONFIG_ROWS:
    extra = {"positional": "rope"} if field == "rope_scaling" else {}
    R(f"model.TransformerConfig.{field}.{bad!r}", TC + field, exc, words, lambda field=field, bad=bad, extra=extra: cfg(**extra, **{field: bad}))
R("model.TransformerConfig.rope_scaling.without_rope", TC + "rope_scaling", ValueError, ["rope_scaling=", "positional='sinusoidal'"],
  lambda: cfg(rope_scaling={"rope_type": "linear", "factor": 2.0}))
R("model.TransformerConfig.d_model.odd_sinusoidal", TC + "d_model", ValueError, ["d_model=7", "sinusoidal"],
  lambda: cfg(d_model=7, n_heads=1))
R("model.TransformerConfig.n_heads.odd_rope_head_dim", TC + "n_heads", ValueError, ["head_dim", "=3", "rope"],
  lambda: cfg(d_model=6, n_heads=2, positional="rope"))
R("model.count_parameters.module.str", MO + "count_parameters:module", TypeError, ["module", "str"], lambda: model.count_parameters("m"))
CT = "checks.check_tokens:"
R("checks.check_tokens.idx.str", CT + "idx", TypeError, [NAMED("idx"), "str"], lambda: checks.check_tokens("1 2", V))
R("checks.check_tokens.idx.float", CT + "idx", TypeError, ["idx.dtype=torch.float32"], lambda: checks.check_tokens(ids().float(), V))
R("checks.check_tokens.idx.bool", CT + "idx", TypeError, ["idx.dtype=torch.bool"], lambda: checks.check_tokens(ids().bool(), V))
R("checks.check_tokens.idx.uint8", CT + "idx", TypeError, ["idx.dtype=torch.uint8"], lambda: checks.check_tokens(ids(dtype=torch.uint8), V))
R("checks.check_tokens.idx.rank1", CT + "idx", ValueError, ["idx.dim()=1"], lambda: checks.check_tokens(torch.tensor([1, 2]), V))
R("checks.check_tokens.idx.empty_T", CT + "idx", ValueError, ["idx.shape[1]=0"], lambda: checks.check_tokens(torch.zeros(1, 0, dtype=torch.long), V))
R("checks.check_tokens.idx.too_large", CT + "idx", ValueError, ["idx", "vocab_size=11"], lambda: checks.check_tokens(torch.tensor([[1, 11]]), V))
R("checks.check_tokens.idx.negative", CT + "idx", ValueError, ["idx", "-1", "vocab_size"], lambda: checks.check_tokens(torch.tensor([[-1, 2]]), V))
R("checks.check_tokens.vocab_size.named", CT + "vocab_size", ValueError, ["vocab_size=3"], lambda: checks.check_tokens(torch.tensor([[1, 5]]), 3))
R("checks.check_tokens.name.used", CT + "name", ValueError, ["src", "vocab_size=11"], lambda: checks.check_tokens(torch.tensor([[11]]), V, "src"))
TE = MO + "TokenEmbedding:"
R("model.TokenEmbedding.vocab_size.zero", TE + "vocab_size", ValueError, ["vocab_size=0"], lambda: model.TokenEmbedding(0, 8))
R("model.TokenEmbedding.d_model.bool", TE + "d_model", TypeError, ["d_model=True"], lambda: model.TokenEmbedding(V, True))
R("model.TokenEmbedding.forward.idx.uint8", MO + "TokenEmbedding.forward:idx", TypeError, ["idx.dtype=torch.uint8"],
  lambda: model.TokenEmbedding(V, 8)(ids(dtype=torch.uint8)))
R("model.TokenEmbedding.forward.idx.too_large", MO + "TokenEmbedding.forward:idx", ValueError, ["idx", "vocab_size=11"],
  lambda: model.TokenEmbedding(V, 8)(torch.tensor([[11]])))
PS = MO + "Positions"
R("model.Positions.config.str", PS + ":config", TypeError, [NAMED("config"), "TransformerConfig", "str"], lambda: model.Positions("c"))
R("model.Positions.check_length.T.too_long", PS + ".check_length:T", ValueError, ["idx.shape[1]=17", "max_len=16"],
  lambda: model.Positions(cfg()).check_length(17))
R("model.Positions.check_length.past.too_long", PS + ".check_length:past", ValueError, ["idx.shape[1]=7", "10 cached", "max_len=16"],
  lambda: model.Positions(cfg()).check_length(7, 10))
R("model.Positions.check_length.name.used", PS + ".check_length:name", ValueError, ["src.shape[1]=17"],
  lambda: model.Positions(cfg()).check_length(17, name="src"))
R("model.Positions.forward.x.str", PS + ".forward:x", TypeError, [NAMED("x"), "str"], lambda: model.Positions(cfg())("x"))
R("model.Positions.forward.offset.negative", PS + ".forward:offset", ValueError, ["offset=-1"], lambda: model.Positions(cfg())(X(), -1))
R("model.Positions.forward.positions.float", PS + ".forward:positions", TypeError, ["positions", "torch.float32"],
  lambda: model.Positions(cfg())(X(), positions=torch.tensor([[0.0, 1.0, 2.0]])))
R("model.Positions.bias.q_len.zero", PS + ".bias:q_len", ValueError, ["q_len=0"], lambda: model.Positions(cfg(positional="alibi")).bias(0, 3, X()))
R("model.Positions.bias.k_len.negative", PS + ".bias:k_len", ValueError, ["k_len=-1"], lambda: model.Positions(cfg(positional="alibi")).bias(3, -1, X()))
R("model.Positions.bias.x.str", PS + ".bias:x", TypeError, ["x", "str"], lambda: model.Positions(cfg(positional="alibi")).bias(3, 3, "x"))
R("decoding.DecoderCache.n_layers.zero", "decoding.DecoderCache:n_layers", ValueError, ["n_layers=0"], lambda: decoding.DecoderCache(0))
R("decoding.DecoderCache.reorder.rows.float", "decoding.DecoderCache.reorder:rows", TypeError, ["rows", "torch.float32"],
  lambda: filled_cache().reorder(torch.tensor([0.0])))
R("decoding.DecoderCache.reorder.rows.out_of_range", "decoding.DecoderCache.reorder:rows", ValueError, ["rows", "5"],
  lambda: filled_cache().reorder(torch.tensor([5])))
CA = "checks.check_attention_mask:"
R("checks.check_attention_mask.attention_mask.str", CA + "attention_mask", TV, ["attention_mask", "str"],
  lambda: checks.check_attention_mask("1 1 1", (1, 3)))
R("checks.check_attention_mask.attention_mask.float", CA + "attention_mask", TypeError, ["attention_mask", "torch.float32"],
  lambda: checks.check_attention_mask(torch.ones(1, 3), (1, 3)))
R("checks.check_attention_mask.attention_mask.shape", CA + "attention_mask", ValueError, ["attention_mask", "(1, 4)", "(1, 3)"],
  lambda: checks.check_attention_mask(torch.ones(1, 4, dtype=torch.bool), (1, 3)))
R("checks.check_attention_mask.shape.differs", CA + "shape", ValueError, ["attention_mask", "(1, 4)", "(1, 3)"],
  lambda: checks.check_attention_mask(torch.ones(1, 3, dtype=torch.bool), (1, 4)))
R("checks.check_attention_mask.attention_mask.values", CA + "attention_mask", ValueError, ["attention_mask", "7", "0 and 1"],
  lambda: checks.check_attention_mask(torch.tensor([[1, 7, 1]]), (1, 3)))

def _target_rows(prefix, P, run):
    "Rows for the `targets` argument of a loss: run(targets) calls the model with the tiny inputs."
    R(f"{prefix}.targets.too_large", P + "targets", ValueError, ["targets", "vocab_size"], lambda: run(torch.tensor([[1, 11, 2]])))
    R(f"{prefix}.targets.negative", P + "targets", ValueError, ["targets", "-100", "-5"], lambda: run(torch.tensor([[1, -5, 2]])))
    R(f"{prefix}.targets.bool", P + "targets", TypeError, ["targets.dtype=torch.bool"], lambda: run(torch.tensor([[True, False, True]])))
    R(f"{prefix}.targets.float", P + "targets", TypeError, ["targets.dtype=torch.float32"], lambda: run(torch.tensor([[1.0, 2.0, 3.0]])))
    R(f"{prefix}.targets.all_ignored", P + "targets", ValueError, ["targets", "-100", "every"], lambda: run(torch.full((1, 3), -100)))
    R(f"{prefix}.targets.shape", P + "targets", ValueError, ["targets", "(1, 2)", "(1, 3)"], lambda: run(torch.tensor([[1, 2]])))
    R(f"{prefix}.targets.str", P + "targets", TV, ["targets", "str"], lambda: run("1 2 3"))

_target_rows("model.lm_loss", MO + "lm_loss:", lambda t: model.lm_loss(T(1, 3, V), t))
R("model.lm_loss.logits.str", MO + "lm_loss:logits", TypeError, ["logits", "str"], lambda: model.lm_loss("z", torch.tensor([[1, 2, 3]])))
R("model.lm_loss.logits.rank2", MO + "lm_loss:logits", ValueError, [("logits.dim()=2", "logits.shape=(3, 11)")], lambda: model.lm_loss(T(3, V), torch.tensor([1, 2, 3])))
R("model.unembed.lm_head.str", MO + "unembed:lm_head", TypeError, ["lm_head", "str"], lambda: model.unembed("U", X()))
R("model.unembed.h.width", MO + "unembed:h", ValueError, ["h.shape[-1]=5", "8"], lambda: model.unembed(nn.Linear(8, V, bias=False), X(d=5)))
R("model.unembed.scale.nan", MO + "unembed:scale", ValueError, ["scale=nan"], lambda: model.unembed(nn.Linear(8, V, bias=False), X(), NAN))

LM = MO + "DecoderOnlyLM"
R("model.DecoderOnlyLM.config.str", LM + ":config", TypeError, [NAMED("config"), "TransformerConfig", "str"], lambda: model.DecoderOnlyLM("c"))
LF = LM + ".forward:"
R("model.DecoderOnlyLM.forward.idx.uint8", LF + "idx", TypeError, ["idx.dtype=torch.uint8"], lambda: lm()(ids(dtype=torch.uint8)))
R("model.DecoderOnlyLM.forward.idx.float", LF + "idx", TypeError, ["idx.dtype=torch.float32"], lambda: lm()(ids().float()))
R("model.DecoderOnlyLM.forward.idx.str", LF + "idx", TypeError, [NAMED("idx"), "str"], lambda: lm()("1 2 3"))
R("model.DecoderOnlyLM.forward.idx.too_large", LF + "idx", ValueError, ["idx", "vocab_size=11"], lambda: lm()(torch.tensor([[1, 11]])))
R("model.DecoderOnlyLM.forward.idx.negative", LF + "idx", ValueError, ["idx", "-3"], lambda: lm()(torch.tensor([[1, -3]])))
R("model.DecoderOnlyLM.forward.idx.too_long", LF + "idx", ValueError, ["idx.shape[1]=17", "max_len=16"], lambda: lm()(ids(Tn=17)))
R("model.DecoderOnlyLM.forward.idx.rank3", LF + "idx", ValueError, ["idx.dim()=3"], lambda: lm()(ids()[None]))
_target_rows("model.DecoderOnlyLM.forward", LF, lambda t: lm()(ids(), t))
R("model.DecoderOnlyLM.forward.cache.str", LF + "cache", TypeError, [NAMED("cache"), "DecoderCache", "str"], lambda: lm()(ids(), cache="c"))
R("model.DecoderOnlyLM.forward.cache.layers", LF + "cache", ValueError, ["cache has 2 layers", "(1)"], lambda: lm()(ids(), cache=decoding.DecoderCache(2)))
R("model.DecoderOnlyLM.forward.cache.past_too_long", LF + "cache", ValueError, ["idx.shape[1]=14", "3 cached", "max_len=16"],
  lambda: lm()(ids(Tn=14), cache=filled_cache()))
R("model.DecoderOnlyLM.forward.attention_mask.float", LF + "attention_mask", TypeError, ["attention_mask", "torch.float32"],
  lambda: lm()(ids(), attention_mask=torch.ones(1, 3)))
R("model.DecoderOnlyLM.forward.attention_mask.shape", LF + "attention_mask", ValueError, ["attention_mask", "(1, 2)", "(1, 3)"],
  lambda: lm()(ids(), attention_mask=torch.ones(1, 2, dtype=torch.bool)))
R("model.DecoderOnlyLM.forward.attention_mask.values", LF + "attention_mask", ValueError, ["attention_mask", "7"],
  lambda: lm()(ids(), attention_mask=torch.tensor([[1, 7, 1]])))

def _decoding_rows(prefix, P, run, has_attention_mask):
    "Rows shared by DecoderOnlyLM.generate and Transformer.generate; run(**kw) calls generate with the tiny inputs."
    for p, bad, exc, words in (
        ("max_new_tokens", -1, ValueError, ["max_new_tokens=-1"]), ("max_new_tokens", True, TypeError, ["max_new_tokens=True"]),
        ("max_new_tokens", 40, ValueError, ["max_new_tokens=40", "max_len=16"]),
        ("temperature", 0, ValueError, ["temperature=0"]), ("temperature", NAN, ValueError, ["temperature=nan"]),
        ("temperature", INF, ValueError, ["temperature=inf"]),
        ("top_k", 0, ValueError, ["top_k=0"]), ("top_k", 12, ValueError, ["top_k=12", "vocab_size=11"]),
        ("top_k", 2.0, TV, ["top_k=2.0"]),
        ("top_p", 0, ValueError, ["top_p=0"]), ("top_p", 1.5, ValueError, ["top_p=1.5"]), ("top_p", NAN, ValueError, ["top_p=nan"]),
        ("min_p", 1.5, ValueError, ["min_p=1.5"]), ("min_p", -0.1, ValueError, ["min_p=-0.1"]),
        ("eos_ids", 11, ValueError, ["eos_ids=11", "vocab_size=11"]), ("eos_ids", -1, ValueError, ["eos_ids=-1"]),
        ("eos_ids", "3", TypeError, ["eos_ids='3'", "list of token ids"]), ("eos_ids", [2, 11], ValueError, ["eos_ids=11"]),
        ("eos_ids", [True], TypeError, ["eos_ids=True"]),
        ("streamer", 3, TypeError, ["streamer=3", "callable"]), ("return_scores", 1, TypeError, ["return_scores=1"]),
        ("pad_id", -1, ValueError, ["pad_id=-1"]), ("generator", "g", TypeError, ["generator", "str"]),
    ):
        R(f"{prefix}.{p}.{bad!r}", P + p, exc, words, lambda p=p, bad=bad: run(**{p: bad}))
    if has_attention_mask:
        R(f"{prefix}.attention_mask.right_padded", P + "attention_mask", ValueError, ["attention_mask", "left-padded"],
          lambda: run(attention_mask=torch.tensor([[True, True, False]])))
        R(f"{prefix}.attention_mask.shape", P + "attention_mask", ValueError, ["attention_mask", "(1, 2)", "(1, 3)"],
          lambda: run(attention_mask=torch.ones(1, 2, dtype=torch.bool)))

def _lm_gen(**kw):
    kw = dict(max_new_tokens=2) | kw
    return fast_generate(lm(), ids(), kw.pop("max_new_tokens"), **kw)
_decoding_rows("decoding.lm_generate", "decoding.lm_generate:", _lm_gen, True)
R("model.DecoderOnlyLM.generate.idx.uint8", "decoding.lm_generate:idx", TypeError, ["idx.dtype=torch.uint8"], lambda: fast_generate(lm(), ids(dtype=torch.uint8), 2))
R("model.DecoderOnlyLM.generate.idx.too_large", "decoding.lm_generate:idx", ValueError, ["idx", "vocab_size=11"], lambda: fast_generate(lm(), torch.tensor([[11]]), 2))

def _beam_rows(prefix, P, run, has_attention_mask):
    for p, bad, exc, words in (
        ("max_new_tokens", -1, ValueError, ["max_new_tokens=-1"]), ("max_new_tokens", 40, ValueError, ["max_new_tokens=40", "max_len=16"]),
        ("beam_size", 0, ValueError, ["beam_size=0"]), ("beam_size", True, TV, ["beam_size=True"]),
        ("length_penalty", NAN, ValueError, ["length_penalty=nan"]), ("length_penalty", "0.6", TV, ["length_penalty='0.6'"]),
        ("eos_ids", 11, ValueError, ["eos_ids=11"]), ("eos_ids", [2, 11], ValueError, ["eos_ids=11"]),
        ("eos_ids", torch.tensor([2]), TypeError, ["eos_ids=tensor([2])", "list of token ids"]), ("pad_id", 11, ValueError, ["pad_id=11"]),
        ("early_stopping", "yes", TypeError, ["early_stopping='yes'"]),
    ):
        R(f"{prefix}.{p}.{bad!r}", P + p, exc, words, lambda p=p, bad=bad: run(**{p: bad}))
    if has_attention_mask:
        R(f"{prefix}.attention_mask.right_padded", P + "attention_mask", ValueError, ["attention_mask", "left-padded"],
          lambda: run(attention_mask=torch.tensor([[True, True, False]])))

def _lm_beam(**kw):
    kw = dict(max_new_tokens=2, beam_size=2) | kw
    return lm_beam_search(lm(), ids(), kw.pop("max_new_tokens"), kw.pop("beam_size"), **kw)
_beam_rows("decoding.lm_beam_search", "decoding.lm_beam_search:", _lm_beam, True)
R("model.DecoderOnlyLM.beam_search.idx.float", "decoding.lm_beam_search:idx", TypeError, ["idx.dtype=torch.float32"],
  lambda: lm_beam_search(lm(), ids().float(), 2, 2))

TS = MO + "TransformerStack"
R("model.TransformerStack.config.str", TS + ":config", TypeError, [NAMED("config"), "TransformerConfig", "str"], lambda: model.TransformerStack("c"))
R("model.TransformerStack.rotary.int", TS + ":rotary", TypeError, ["rotary=3", "callable"], lambda: model.TransformerStack(cfg(), rotary=3))
R("model.TransformerStack.encode.src.str", TS + ".encode:src", TypeError, ["src", "str"], lambda: stack().encode("s"))
R("model.TransformerStack.encode.src.float64", TS + ".encode:src", TypeError, ["src.dtype=torch.float64", "torch.float32"], lambda: stack().encode(X().double()))
R("model.TransformerStack.encode.src_mask.plus_inf", TS + ".encode:src_mask", ValueError, ["mask", "+inf"], lambda: stack().encode(X(), with_inf()))
R("model.TransformerStack.encode.attn_bias.bool", TS + ".encode:attn_bias", TypeError, ["attn_bias", "torch.bool"],
  lambda: stack().encode(X(), attn_bias=torch.ones(3, 3, dtype=torch.bool)))
R("model.TransformerStack.decode.tgt.str", TS + ".decode:tgt", TypeError, ["tgt", "str"], lambda: stack().decode("t", X()))
R("model.TransformerStack.decode.memory.str", TS + ".decode:memory", TypeError, ["memory", "str"], lambda: stack().decode(X(), "m"))
R("model.TransformerStack.decode.tgt_mask.with_causal", TS + ".decode:tgt_mask", ValueError, ["tgt_mask", "tgt_is_causal=True"],
  lambda: stack().decode(X(), X(), tgt_mask=torch.ones(3, 3, dtype=torch.bool)))
R("model.TransformerStack.decode.tgt_is_causal.with_mask", TS + ".decode:tgt_is_causal", ValueError, ["tgt_is_causal=True"],
  lambda: stack().decode(X(), X(), tgt_mask=torch.ones(3, 3, dtype=torch.bool)))
R("model.TransformerStack.decode.memory_mask.plus_inf", TS + ".decode:memory_mask", ValueError, ["mask", "+inf"],
  lambda: stack().decode(X(), X(), memory_mask=with_inf()))
R("model.TransformerStack.decode.attn_bias.bool", TS + ".decode:attn_bias", TypeError, ["attn_bias", "torch.bool"],
  lambda: stack().decode(X(), X(), attn_bias=torch.ones(3, 3, dtype=torch.bool)))
R("model.TransformerStack.decode.cache.str", TS + ".decode:cache", TypeError, ["cache", "DecoderCache", "str"], lambda: stack().decode(X(), X(), cache="c"))
R("model.TransformerStack.forward.src.str", TS + ".forward:src", TypeError, ["src", "str"], lambda: stack()("s", X()))
R("model.TransformerStack.forward.tgt.width", TS + ".forward:tgt", ValueError, ["tgt", "(1, 3, 5)"], lambda: stack()(X(), X(d=5)))
R("model.TransformerStack.forward.src_mask.shape", TS + ".forward:src_mask", ValueError, ["mask.shape=(2, 2)"],
  lambda: stack()(X(), X(), src_mask=torch.ones(2, 2, dtype=torch.bool)))
R("model.TransformerStack.forward.tgt_mask.plus_inf", TS + ".forward:tgt_mask", ValueError, ["mask", "+inf"],
  lambda: stack()(X(), X(), tgt_mask=with_inf(), tgt_is_causal=False))
R("model.TransformerStack.forward.memory_mask.int64", TS + ".forward:memory_mask", TypeError, ["mask.dtype=torch.int64"],
  lambda: stack()(X(), X(), memory_mask=torch.ones(3, 3, dtype=torch.long)))
R("model.TransformerStack.forward.tgt_is_causal.with_mask", TS + ".forward:tgt_is_causal", ValueError, ["tgt_is_causal=True"],
  lambda: stack()(X(), X(), tgt_mask=torch.ones(3, 3, dtype=torch.bool)))
R("model.TransformerStack.from_torch.m.str", TS + ".from_torch:m", TypeError, [NAMED("m"), "Transformer", "str"], lambda: model.TransformerStack.from_torch("m"))

TR = MO + "Transformer"
R("model.Transformer.config.str", TR + ":config", TypeError, [NAMED("config"), "TransformerConfig", "str"], lambda: model.Transformer("c"))
R("model.Transformer.encode.src.uint8", TR + ".encode:src", TypeError, ["src.dtype=torch.uint8"], lambda: s2s().encode(ids(dtype=torch.uint8)))
R("model.Transformer.encode.src.too_large", TR + ".encode:src", ValueError, ["src", "vocab_size=11"], lambda: s2s().encode(torch.tensor([[11]])))
R("model.Transformer.encode.src_keep.int64", TR + ".encode:src_keep", TypeError, ["src_keep", "torch.int64"],
  lambda: s2s().encode(ids(), torch.ones(1, 3, dtype=torch.long)))
R("model.Transformer.encode.src_keep.shape", TR + ".encode:src_keep", ValueError, ["src_keep", "(1, 2)", "(1, 3)"],
  lambda: s2s().encode(ids(), torch.ones(1, 2, dtype=torch.bool)))
def _mem(): return s2s().encode(ids())
R("model.Transformer.decode.tgt.too_large", TR + ".decode:tgt", ValueError, ["tgt", "vocab_size=11"], lambda: s2s().decode(torch.tensor([[11]]), *_mem()))
R("model.Transformer.decode.tgt.float", TR + ".decode:tgt", TypeError, ["tgt.dtype=torch.float32"], lambda: s2s().decode(ids().float(), *_mem()))
R("model.Transformer.decode.memory.str", TR + ".decode:memory", TypeError, ["memory", "str"], lambda: s2s().decode(ids(), "m", None))
R("model.Transformer.decode.memory_mask.plus_inf", TR + ".decode:memory_mask", ValueError, ["mask", "+inf"],
  lambda: s2s().decode(ids(), _mem()[0], with_inf((1, 1, 1, 3))))
R("model.Transformer.decode.tgt_keep.with_cache", TR + ".decode:tgt_keep", ValueError, ["tgt_keep", "cache"],
  lambda: s2s().decode(ids(), *_mem(), tgt_keep=torch.ones(1, 3, dtype=torch.bool), cache=new_cache(s2s())))
R("model.Transformer.decode.cache.str", TR + ".decode:cache", TypeError, [NAMED("cache"), "DecoderCache", "str"], lambda: s2s().decode(ids(), *_mem(), cache="c"))
R("model.Transformer.forward.src.uint8", TR + ".forward:src", TypeError, ["src.dtype=torch.uint8"], lambda: s2s()(ids(dtype=torch.uint8), ids()))
R("model.Transformer.forward.tgt.negative", TR + ".forward:tgt", ValueError, ["tgt", "-2"], lambda: s2s()(ids(), torch.tensor([[1, -2]])))
R("model.Transformer.forward.src_keep.shape", TR + ".forward:src_keep", ValueError, ["src_keep", "(1, 2)"], lambda: s2s()(ids(), ids(), torch.ones(1, 2, dtype=torch.bool)))
R("model.Transformer.forward.tgt_keep.int64", TR + ".forward:tgt_keep", TypeError, ["tgt_keep", "torch.int64"],
  lambda: s2s()(ids(), ids(), tgt_keep=torch.ones(1, 3, dtype=torch.long)))
_target_rows("model.Transformer.forward", TR + ".forward:", lambda t: s2s()(ids(), ids(), targets=t))

def _s2s_gen(**kw):
    kw = dict(max_new_tokens=2, bos_id=1) | kw
    return seq2seq_generate(s2s(), ids(), kw.pop("max_new_tokens"), kw.pop("bos_id"), **kw)
_decoding_rows("decoding.seq2seq_generate", "decoding.seq2seq_generate:", _s2s_gen, False)
R("model.Transformer.generate.bos_id.too_large", "decoding.seq2seq_generate:bos_id", ValueError, ["bos_id=11"], lambda: _s2s_gen(bos_id=11))
R("model.Transformer.generate.bos_id.none", "decoding.seq2seq_generate:bos_id", TypeError, ["bos_id=None"], lambda: _s2s_gen(bos_id=None))
R("model.Transformer.generate.src.uint8", "decoding.seq2seq_generate:src", TypeError, ["src.dtype=torch.uint8"], lambda: seq2seq_generate(s2s(), ids(dtype=torch.uint8), 2, 1))
R("model.Transformer.generate.src_keep.shape", "decoding.seq2seq_generate:src_keep", ValueError, ["src_keep", "(1, 2)"],
  lambda: _s2s_gen(src_keep=torch.ones(1, 2, dtype=torch.bool)))
def _s2s_beam(**kw):
    kw = dict(max_new_tokens=2, bos_id=1, beam_size=2) | kw
    return seq2seq_beam_search(s2s(), ids(), kw.pop("max_new_tokens"), kw.pop("bos_id"), kw.pop("beam_size"), **kw)
_beam_rows("decoding.seq2seq_beam_search", "decoding.seq2seq_beam_search:", _s2s_beam, False)
R("model.Transformer.beam_search.bos_id.too_large", "decoding.seq2seq_beam_search:bos_id", ValueError, ["bos_id=11"], lambda: _s2s_beam(bos_id=11))
R("model.Transformer.beam_search.src.float", "decoding.seq2seq_beam_search:src", TypeError, ["src.dtype=torch.float32"], lambda: seq2seq_beam_search(s2s(), ids().float(), 2, 1, 2))
R("model.Transformer.beam_search.src_keep.shape", "decoding.seq2seq_beam_search:src_keep", ValueError, ["src_keep", "(1, 2)"],
  lambda: _s2s_beam(src_keep=torch.ones(1, 2, dtype=torch.bool)))
R("model.parameter_breakdown.model.str", MO + "parameter_breakdown:model", TypeError, ["model", "str"], lambda: model.parameter_breakdown("m"))
CL = "checks.check_logits:"
R("checks.check_logits.logits.str", CL + "logits", TypeError, [NAMED("logits"), "str"], lambda: checks.check_logits("z"))
R("checks.check_logits.logits.int64", CL + "logits", TypeError, ["logits", "torch.int64"], lambda: checks.check_logits(torch.ones(1, 3, dtype=torch.long)))
R("checks.check_logits.logits.rank1", CL + "logits", ValueError, ["logits.shape=(3,)"], lambda: checks.check_logits(T(3)))
R("checks.check_logits.logits.nan", CL + "logits", ValueError, ["logits row 1", "NaN"], lambda: checks.check_logits(torch.tensor([[0.0, 1.0], [NAN, 0.0]])))
R("checks.check_logits.logits.plus_inf", CL + "logits", ValueError, ["logits row 0", "+inf"], lambda: checks.check_logits(torch.tensor([[INF, 1.0]])))
R("checks.check_logits.logits.all_neg_inf", CL + "logits", ValueError, ["logits row 0", "-inf"], lambda: checks.check_logits(torch.full((1, 3), -INF)))
R("checks.check_logits.name.used", CL + "name", ValueError, ["scores row 0"], lambda: checks.check_logits(torch.full((1, 3), NAN), "scores"))
CS = "checks.check_sampling:"
R("checks.check_sampling.temperature.zero", CS + "temperature", ValueError, ["temperature=0"], lambda: checks.check_sampling(0))
R("checks.check_sampling.temperature.str", CS + "temperature", TV, ["temperature='1'"], lambda: checks.check_sampling("1"))
R("checks.check_sampling.top_k.bool", CS + "top_k", TV, ["top_k=True"], lambda: checks.check_sampling(top_k=True))
R("checks.check_sampling.top_p.inf", CS + "top_p", ValueError, ["top_p=inf"], lambda: checks.check_sampling(top_p=INF))
R("checks.check_sampling.min_p.nan", CS + "min_p", ValueError, ["min_p=nan"], lambda: checks.check_sampling(min_p=NAN))
R("checks.check_sampling.vocab_size.top_k_above", CS + "vocab_size", ValueError, ["top_k=6", "vocab_size=5"], lambda: checks.check_sampling(top_k=6, vocab_size=5))
for fname, p, bad, word in (("temperature_filter", "temperature", 0, "temperature=0"), ("top_k_filter", "k", 0, "k=0"),
                            ("top_p_filter", "p", 0, "p=0"), ("min_p_filter", "min_p", 1.5, "min_p=1.5")):
    f = getattr(decoding, fname)
    R(f"decoding.{fname}.{p}.{bad}", f"decoding.{fname}:{p}", ValueError, [word], lambda f=f, bad=bad: f(T(1, 5), bad))
    ok = {"temperature_filter": 1.0, "top_k_filter": 2, "top_p_filter": 0.5, "min_p_filter": 0.1}[fname]
    R(f"decoding.{fname}.logits.str", f"decoding.{fname}:logits", TypeError, ["logits", "str"], lambda f=f, ok=ok: f("z", ok))
    R(f"decoding.{fname}.logits.nan", f"decoding.{fname}:logits", ValueError, ["logits row 0", "NaN"], lambda f=f, ok=ok: f(torch.full((1, 5), NAN), ok))
R("decoding.top_k_filter.k.above_vocab", "decoding.top_k_filter:k", ValueError, ["k=6", "vocab_size=5"], lambda: decoding.top_k_filter(T(1, 5), 6))
# -- chapter 10's repetition penalty and n-gram blocking: the two filters, and the arguments that switch them on
for fname, p, bad, word in (("repetition_penalty_filter", "penalty", 0.0, "penalty=0.0"), ("no_repeat_ngram_filter", "n", 0, "n=0")):
    f, ok, P_ = getattr(decoding, fname), {"penalty": 1.2, "n": 2}[p], f"decoding.{fname}:"
    R(f"decoding.{fname}.{p}.{bad}", P_ + p, ValueError, [word], lambda f=f, bad=bad: f(T(1, 5), ids(high=5), bad))
    R(f"decoding.{fname}.logits.nan", P_ + "logits", ValueError, ["logits row 0", "NaN"], lambda f=f, ok=ok: f(torch.full((1, 5), NAN), ids(high=5), ok))
    R(f"decoding.{fname}.ids.batch", P_ + "ids", ValueError, ["ids.shape[0]=2", "logits.shape[0]=1"], lambda f=f, ok=ok: f(T(1, 5), ids(B=2, high=5), ok))
    R(f"decoding.{fname}.ids.too_large", P_ + "ids", ValueError, ["ids", "vocab_size=5"], lambda f=f, ok=ok: f(T(1, 5), torch.tensor([[5]]), ok))
    R(f"decoding.{fname}.attention_mask.shape", P_ + "attention_mask", ValueError, ["attention_mask", "(1, 3)", "(1, 2)"],
      lambda f=f, ok=ok: f(T(1, 5), ids(high=5), ok, torch.ones(1, 2, dtype=torch.bool)))
for G_, run in (("decoding.lm_generate:", lambda **kw: lm_generate(lm(), ids(), 2, **kw)),
                ("decoding.lm_beam_search:", lambda **kw: lm_beam_search(lm(), ids(), 2, **kw))):
    R(f"{G_[:-1]}.repetition_penalty.zero", G_ + "repetition_penalty", ValueError, ["repetition_penalty=0"], lambda run=run: run(repetition_penalty=0))
    R(f"{G_[:-1]}.repetition_penalty.nan", G_ + "repetition_penalty", ValueError, ["repetition_penalty=nan"], lambda run=run: run(repetition_penalty=NAN))
    R(f"{G_[:-1]}.no_repeat_ngram_size.zero", G_ + "no_repeat_ngram_size", ValueError, ["no_repeat_ngram_size=0"], lambda run=run: run(no_repeat_ngram_size=0))
    R(f"{G_[:-1]}.no_repeat_ngram_size.float", G_ + "no_repeat_ngram_size", TypeError, ["no_repeat_ngram_size=2.0"], lambda run=run: run(no_repeat_ngram_size=2.0))

FL = "decoding.filter_logits:"
R("decoding.filter_logits.logits.nan", FL + "logits", ValueError, ["logits row 0", "NaN"], lambda: decoding.filter_logits(torch.full((1, 4), NAN)))
for p, bad, word in (("temperature", -1, "temperature=-1"), ("top_k", 0, "top_k=0"), ("top_p", 2, "top_p=2"), ("min_p", -1, "min_p=-1")):
    R(f"decoding.filter_logits.{p}.{bad}", FL + p, ValueError, [word], lambda p=p, bad=bad: decoding.filter_logits(T(1, 5), **{p: bad}))
SN = "decoding.sample_next:"
R("decoding.sample_next.logits.all_neg_inf", SN + "logits", ValueError, ["logits row 0", "-inf"], lambda: decoding.sample_next(torch.full((1, 4), -INF)))
R("decoding.sample_next.logits.nan", SN + "logits", ValueError, ["logits row 0", "NaN"], lambda: decoding.sample_next(torch.full((1, 4), NAN)))
R("decoding.sample_next.greedy.nan", SN + "greedy", ValueError, ["logits row 0", "NaN"], lambda: decoding.sample_next(torch.tensor([[NAN, 1.0]]), greedy=True))
R("decoding.sample_next.logits.str", SN + "logits", TypeError, [NAMED("logits"), "str"], lambda: decoding.sample_next("z"))
for p, bad, word in (("temperature", NAN, "temperature=nan"), ("top_k", 9, "top_k=9"), ("top_p", 0, "top_p=0"), ("min_p", 1.5, "min_p=1.5")):
    R(f"decoding.sample_next.{p}.{bad}", SN + p, ValueError, [word], lambda p=p, bad=bad: decoding.sample_next(T(1, 5), **{p: bad}))
R("decoding.sample_next.generator.str", SN + "generator", TypeError, ["generator", "str"], lambda: decoding.sample_next(T(1, 5), generator="g"))
SS = "checks.stop_setup:"
R("checks.stop_setup.eos_id.too_large", SS + "eos_id", ValueError, ["eos_id=11", "vocab_size=11"], lambda: checks.stop_setup(V, eos_id=11))
R("checks.stop_setup.vocab_size.named", SS + "vocab_size", ValueError, ["eos_id=5", "vocab_size=5"], lambda: checks.stop_setup(5, eos_id=5))
R("checks.stop_setup.stop_ids.int", SS + "stop_ids", TypeError, ["stop_ids=3"], lambda: checks.stop_setup(V, stop_ids=3))
R("checks.stop_setup.stop_ids.bool_entry", SS + "stop_ids", TypeError, ["stop_ids[0]=True"], lambda: checks.stop_setup(V, stop_ids=[True]))
R("checks.stop_setup.pad_id.str", SS + "pad_id", TypeError, ["pad_id='0'"], lambda: checks.stop_setup(V, pad_id="0"))
LP = "checks.left_padding_mask:"
R("checks.left_padding_mask.attention_mask.right_padded", LP + "attention_mask", ValueError, ["attention_mask", "left-padded"],
  lambda: checks.left_padding_mask(torch.tensor([[1, 1, 0]]), (1, 3)))
R("checks.left_padding_mask.attention_mask.float", LP + "attention_mask", TypeError, ["attention_mask", "torch.float32"],
  lambda: checks.left_padding_mask(torch.ones(1, 3), (1, 3)))
R("checks.left_padding_mask.shape.differs", LP + "shape", ValueError, ["attention_mask", "(1, 3)", "(2, 3)"],
  lambda: checks.left_padding_mask(torch.ones(1, 3, dtype=torch.bool), (2, 3)))
R("decoding.gnmt_penalty.length.negative", "decoding.gnmt_penalty:length", ValueError, ["length=-1"], lambda: decoding.gnmt_penalty(-1))
R("decoding.gnmt_penalty.length.str", "decoding.gnmt_penalty:length", TypeError, ["length='3'"], lambda: decoding.gnmt_penalty("3"))
R("decoding.gnmt_penalty.alpha.nan", "decoding.gnmt_penalty:alpha", ValueError, ["alpha=nan"], lambda: decoding.gnmt_penalty(3, NAN))
CB = "checks.check_beam:"
R("checks.check_beam.beam_size.zero", CB + "beam_size", ValueError, ["beam_size=0"], lambda: checks.check_beam(0, 0.6, True))
R("checks.check_beam.alpha.inf", CB + "alpha", ValueError, ["length_penalty=inf"], lambda: checks.check_beam(2, INF, True))
R("checks.check_beam.early_stopping.int", CB + "early_stopping", TypeError, ["early_stopping=1"], lambda: checks.check_beam(2, 0.6, 1))
BS = "decoding.beam_search:"
_step = lambda tokens, parents: torch.log_softmax(T(tokens.shape[0], 5), -1)
R("decoding.beam_search.step.int", BS + "step", TypeError, ["step", "callable"], lambda: decoding.beam_search(3, ids(high=5), 2, 2))
R("decoding.beam_search.step.nan", BS + "step", ValueError, ["step log-probabilities", "NaN"],
  lambda: decoding.beam_search(lambda t, p: torch.full((t.shape[0], 5), NAN), ids(high=5), 2, 2))
R("decoding.beam_search.prefix.str", BS + "prefix", TypeError, ["prefix", "str"], lambda: decoding.beam_search(_step, "p", 2, 2))
R("decoding.beam_search.prefix.float", BS + "prefix", TypeError, ["prefix.dtype=torch.float32"], lambda: decoding.beam_search(_step, ids(high=5).float(), 2, 2))
R("decoding.beam_search.max_new_tokens.negative", BS + "max_new_tokens", ValueError, ["max_new_tokens=-1"], lambda: decoding.beam_search(_step, ids(high=5), -1))
R("decoding.beam_search.beam_size.zero", BS + "beam_size", ValueError, ["beam_size=0"], lambda: decoding.beam_search(_step, ids(high=5), 2, 0))
R("decoding.beam_search.length_penalty.nan", BS + "length_penalty", ValueError, ["length_penalty=nan"], lambda: decoding.beam_search(_step, ids(high=5), 2, 2, NAN))
R("decoding.beam_search.eos_ids.too_large", BS + "eos_ids", ValueError, ["eos_ids=5", "vocab_size=5"], lambda: decoding.beam_search(_step, ids(high=5), 2, 2, eos_ids=5))
R("decoding.beam_search.eos_ids.negative", BS + "eos_ids", ValueError, ["eos_ids=-1"], lambda: decoding.beam_search(_step, ids(high=5), 2, 2, eos_ids=[1, -1]))
R("decoding.beam_search.eos_ids.str", BS + "eos_ids", TypeError, ["eos_ids='1'"], lambda: decoding.beam_search(_step, ids(high=5), 2, 2, eos_ids="1"))
R("decoding.beam_search.pad_id.negative", BS + "pad_id", ValueError, ["pad_id=-1"], lambda: decoding.beam_search(_step, ids(high=5), 2, 2, pad_id=-1))
R("decoding.beam_search.early_stopping.str", BS + "early_stopping", TypeError, ["early_stopping='no'"],
  lambda: decoding.beam_search(_step, ids(high=5), 2, 2, early_stopping="no"))

SCc = "fast_decoding.StaticCache"                                  # chapter 11 (was decoding.StaticCache)
for i, (p, bad, exc, word) in enumerate((("n_layers", 0, ValueError, "n_layers=0"), ("batch", -1, ValueError, "batch=-1"),
                                        ("n_kv_heads", 0, ValueError, "n_kv_heads=0"), ("max_len", 0, ValueError, "max_len=0"),
                                        ("head_dim", 0, ValueError, "head_dim=0"), ("dtype", torch.int64, TypeError, "dtype=torch.int64"))):
    args = [1, 1, 2, 4, 4, torch.float32]; args[i] = bad
    R(f"decoding.StaticCache.{p}.{bad}", f"{SCc}:{p}", exc, [word], lambda args=args: fast_decoding.StaticCache(*args))
@functools.cache
def static_cache(): return fast_decoding.StaticCache(1, 1, 2, 4, 4)
for bad, exc, word in ((-1, ValueError, "length=-1"), (5, ValueError, "length=5"), ("0", TypeError, "length='0'")):
    R(f"decoding.StaticCache.rewind.length.{bad}", SCc + ".rewind:length", exc, [word, "[0, 4]"], lambda bad=bad: static_cache().rewind(bad))
R("decoding.StaticCache.reorder.rows.list", SCc + ".reorder:rows", TypeError, [NAMED("rows"), "list"], lambda: static_cache().reorder([0]))
R("decoding.StaticCache.reorder.rows.float", SCc + ".reorder:rows", TypeError, ["rows.dtype=torch.float32"], lambda: static_cache().reorder(torch.tensor([0.0])))
R("decoding.StaticCache.reorder.rows.out_of_range", SCc + ".reorder:rows", ValueError, ["rows", "batch"], lambda: static_cache().reorder(torch.tensor([3])))
CTg = "checks.check_targets:"
Z3 = lambda: torch.zeros(1, 3, dtype=torch.long)
R("checks.check_targets.targets.str", CTg + "targets", TypeError, [NAMED("targets"), "str"], lambda: checks.check_targets("t", (1, 3), V))
R("checks.check_targets.targets.bool", CTg + "targets", TypeError, ["targets.dtype=torch.bool"], lambda: checks.check_targets(Z3().bool(), (1, 3), V))
R("checks.check_targets.targets.vocab", CTg + "targets", ValueError, ["targets", "vocab_size=11"], lambda: checks.check_targets(torch.tensor([[0, 1, V]]), (1, 3), V))
R("checks.check_targets.targets.negative", CTg + "targets", ValueError, ["targets", "-100", "-2"], lambda: checks.check_targets(torch.tensor([[0, 1, -2]]), (1, 3), V))
R("checks.check_targets.targets.all_ignored", CTg + "targets", ValueError, ["targets", "-100", "every"], lambda: checks.check_targets(torch.full((1, 3), -100), (1, 3), V))
R("checks.check_targets.shape.mismatch", CTg + "shape", ValueError, ["targets.shape=(1, 3)", "(1, 4)"], lambda: checks.check_targets(Z3(), (1, 4), V))
R("checks.check_targets.vocab_size.zero", CTg + "vocab_size", ValueError, ["vocab_size=0"], lambda: checks.check_targets(Z3(), (1, 3), 0))
R("checks.check_targets.name.used", CTg + "name", ValueError, ["labels", "vocab_size=11"], lambda: checks.check_targets(torch.tensor([[0, 1, V]]), (1, 3), V, name="labels"))
BAt = PS + ".bias_at:"
alibi_pos = lambda: model.Positions(cfg(positional="alibi"))
R("model.Positions.bias_at.q_positions.float", BAt + "q_positions", TypeError, ["q_positions.dtype=torch.float32"],
  lambda: alibi_pos().bias_at(torch.tensor([0.5]), 3, X()))
R("model.Positions.bias_at.q_positions.negative", BAt + "q_positions", ValueError, ["q_positions", ">= 0"],
  lambda: alibi_pos().bias_at(torch.tensor([-1]), 3, X()))
R("model.Positions.bias_at.k_len.zero", BAt + "k_len", ValueError, ["k_len=0"], lambda: alibi_pos().bias_at(torch.arange(3), 0, X()))
R("model.Positions.bias_at.x.str", BAt + "x", TypeError, [NAMED("x"), "str"], lambda: alibi_pos().bias_at(torch.arange(3), 3, "x"))
R("model.Positions.bias_at.x.int64", BAt + "x", TypeError, ["x.dtype=torch.int64", "floating"],
  lambda: alibi_pos().bias_at(torch.arange(3), 3, torch.zeros(1, 3, 8, dtype=torch.long)))
R("checks.check_attention_mask.what.used", CA + "what", ValueError, ["(1, 3)", "(B, T)", "(1, 4)"],
  lambda: checks.check_attention_mask(torch.ones(1, 4, dtype=torch.bool), (1, 3), what="(B, T)"))
R("fast_decoding.fast_generate.static_cache.int", "fast_decoding.fast_generate:static_cache", TypeError, ["static_cache=1", "bool"],
  lambda: fast_generate(lm(), ids(), 2, static_cache=1))
for cname, make, gen in (("DecoderOnlyLM", lm, lambda m, **kw: lm_generate(m, ids(), 2, **kw)), ("Transformer", s2s, lambda m, **kw: seq2seq_generate(m, ids(), 2, 1, **kw))):
    G_ = "decoding.lm_generate:" if cname == "DecoderOnlyLM" else "decoding.seq2seq_generate:"
    R(f"decoding.{cname}.generate.cache.int", G_ + "cache", TypeError, ["cache must be None", "int"], lambda make=make, gen=gen: gen(make(), cache=1))
    R(f"decoding.{cname}.generate.cache.without_use_cache", G_ + "cache", ValueError, ["cache needs use_cache=True"],
      lambda make=make, gen=gen: gen(make(), cache=new_cache(make()), use_cache=False))
    R(f"model.{cname}.generate.step.int", G_ + "step", TypeError, ["step=3", "callable"], lambda make=make, gen=gen: gen(make(), step=3))
    NC = "fast_decoding.new_static_cache:"
    R(f"model.{cname}.new_cache.max_len.zero", NC + "max_len", ValueError, ["max_len=0"], lambda make=make: new_static_cache(make(), 0, 1))
    R(f"model.{cname}.new_cache.batch.none", NC + "batch", TypeError, ["batch=None"], lambda make=make: new_static_cache(make(), 4, None))
    R(f"model.{cname}.new_cache.batch.negative", NC + "batch", ValueError, ["batch=-1"], lambda make=make: new_static_cache(make(), 4, -1))
    R(f"model.{cname}.new_cache.max_len.none", NC + "max_len", TypeError, ["max_len=None"], lambda make=make: new_static_cache(make(), None, 2))
    R(f"model.{cname}.new_cache.dtype.int64", NC + "dtype", TypeError, ["dtype=torch.int64"], lambda make=make: new_static_cache(make(), 4, 1, torch.int64))

R("model.DecoderOnlyLM.generate.compile_step.int", "fast_decoding.fast_generate:compile_step", TypeError, ["compile_step=1", "bool"],
  lambda: fast_generate(lm(), ids(), 2, compile_step=1))
R("model.DecoderOnlyLM.generate.compile_step.without_static", "fast_decoding.fast_generate:compile_step", ValueError, ["compile_step=True", "static_cache=True"],
  lambda: fast_generate(lm(), ids(), 2, compile_step=True))
R("model.DecoderOnlyLM.generate.compile_step.training", "fast_decoding.fast_generate:compile_step", ValueError, ["compile_step=True", "training=True"],
  lambda: fast_generate(lm().train(), ids(), 2, static_cache=True, compile_step=True))
# =====================================================================================================================
# train
# =====================================================================================================================
TN = "train."
R("train.Vocab.tokens.empty", TN + "Vocab:tokens", ValueError, ["tokens is empty"], lambda: train.Vocab([], specials=False))
R("train.Vocab.tokens.int", TN + "Vocab:tokens", TypeError, ["tokens", "int"], lambda: train.Vocab(5))
R("train.Vocab.specials.str", TN + "Vocab:specials", TypeError, ["specials='no'"], lambda: train.Vocab(["a"], specials="no"))
R("train.Vocab.encode.tokens.unknown", TN + "Vocab.encode:tokens", ValueError, ["token 'z'", "not in the vocabulary"], lambda: train.Vocab(["a"]).encode(["a", "z"]))
R("train.Vocab.decode.ids.out_of_range", TN + "Vocab.decode:ids", ValueError, ["ids", "9"], lambda: train.Vocab(["a"]).decode([3, 9]))
R("train.Vocab.decode.ids.negative", TN + "Vocab.decode:ids", ValueError, ["ids", "-1"], lambda: train.Vocab(["a"], specials=False).decode([0, -1]))
R("train.Vocab.decode.sep.int", TN + "Vocab.decode:sep", TypeError, ["sep=0"], lambda: train.Vocab(["a"]).decode([3], sep=0))
RP = TN + "reverse_pairs:"
R("train.reverse_pairs.n.zero", RP + "n", ValueError, ["n=0"], lambda: train.reverse_pairs(0))
R("train.reverse_pairs.min_len.zero", RP + "min_len", ValueError, ["min_len=0"], lambda: train.reverse_pairs(2, 0))
R("train.reverse_pairs.max_len.below_min", RP + "max_len", ValueError, ["max_len=2", ">= 3"], lambda: train.reverse_pairs(2, 3, 2))
R("train.reverse_pairs.n_symbols.27", RP + "n_symbols", ValueError, ["n_symbols=27", "[1, 26]"], lambda: train.reverse_pairs(2, n_symbols=27))
R("train.reverse_pairs.seed.str", RP + "seed", TypeError, ["seed='0'"], lambda: train.reverse_pairs(2, seed="0"))
R("train.reverse_pairs.copy.str", RP + "copy", TypeError, ["copy='yes'"], lambda: train.reverse_pairs(2, copy="yes"))
R("train.number_to_words.n.too_large", TN + "number_to_words:n", ValueError, ["n=1000000"], lambda: train.number_to_words(1_000_000))
R("train.number_to_words.n.float", TN + "number_to_words:n", TypeError, ["n=3.5"], lambda: train.number_to_words(3.5))
R("train.word_tokens.text.int", TN + "word_tokens:text", TypeError, ["text", "int"], lambda: train.word_tokens(42))
SN_ = TN + "split_numbers:"
R("train.split_numbers.n_train.zero", SN_ + "n_train", ValueError, ["n_train=0"], lambda: train.split_numbers(0, 1))
R("train.split_numbers.n_test.bool", SN_ + "n_test", TypeError, ["n_test=True"], lambda: train.split_numbers(1, True))
R("train.split_numbers.max_number.too_small", SN_ + "max_number", ValueError, ["max_number + 1 = 3"], lambda: train.split_numbers(2, 2, 2))
R("train.split_numbers.seed.str", SN_ + "seed", TypeError, ["seed='0'"], lambda: train.split_numbers(2, 2, 10, "0"))
R("train.translate_pairs.direction.unknown", TN + "translate_pairs:direction", ValueError, ["direction='both'"], lambda: train.translate_pairs([1], "both"))
R("train.translate_pairs.numbers.negative", TN + "translate_pairs:numbers", ValueError, ["n=-1"], lambda: train.translate_pairs([-1]))
R("train.translate_pairs.numbers.int", TN + "translate_pairs:numbers", TypeError, ["numbers", "int"], lambda: train.translate_pairs(5))
ND = TN + "numbers_by_digits:"
R("train.numbers_by_digits.per_digits.zero", ND + "per_digits", ValueError, ["per_digits=0"], lambda: train.numbers_by_digits(0))
R("train.numbers_by_digits.exclude.int", ND + "exclude", TypeError, ["exclude", "int"], lambda: train.numbers_by_digits(1, 5))
R("train.numbers_by_digits.seed.str", ND + "seed", TypeError, ["seed='0'"], lambda: train.numbers_by_digits(1, seed="0"))
SD = TN + "Seq2SeqData"
R("train.Seq2SeqData.pairs.empty", SD + ":pairs", ValueError, ["pairs is empty"], lambda: train.Seq2SeqData([]))
R("train.Seq2SeqData.pairs.empty_source", SD + ":pairs", ValueError, ["empty source"], lambda: train.Seq2SeqData([([], ["a"])]))
R("train.Seq2SeqData.vocab.missing_token", SD + ":vocab", ValueError, ["token 'b'"], lambda: train.Seq2SeqData([(["a"], ["b"])], train.Vocab(["a"])))
R("train.Seq2SeqData.vocab.str", SD + ":vocab", TypeError, ["vocab", "str"], lambda: train.Seq2SeqData([(["a"], ["b"])], "ab"))
R("train.Seq2SeqData.batch.idx.out_of_range", SD + ".batch:idx", ValueError, ["idx", "5"], lambda: train.Seq2SeqData([(["a"], ["b"])]).batch([5]))
LD = TN + "LMData"
_lmids = lambda n=10: torch.arange(n) % 3
R("train.LMData.ids.too_short", LD + ":ids", ValueError, ["ids has 4 tokens", "block_size + 1 = 5"], lambda: train.LMData(_lmids(4), 4, train.Vocab("abc", specials=False)))
R("train.LMData.ids.list", LD + ":ids", TypeError, ["ids", "list"], lambda: train.LMData([0, 1, 2, 0, 1, 2], 2, train.Vocab("abc", specials=False)))
R("train.LMData.ids.float", LD + ":ids", TypeError, ["ids", "torch.float32"], lambda: train.LMData(_lmids().float(), 2, train.Vocab("abc", specials=False)))
R("train.LMData.block_size.zero", LD + ":block_size", ValueError, ["block_size=0"], lambda: train.LMData(_lmids(), 0, train.Vocab("abc", specials=False)))
R("train.LMData.vocab.too_small", LD + ":vocab", ValueError, ["vocab", "2"], lambda: train.LMData(_lmids(), 2, train.Vocab("ab", specials=False)))
R("train.LMData.batch.idx.out_of_range", LD + ".batch:idx", ValueError, ["idx", "9"],
  lambda: train.LMData(_lmids(), 2, train.Vocab("abc", specials=False)).batch(torch.tensor([9])))
R("train.stdlib_corpus.modules.unknown", TN + "stdlib_corpus:modules", ValueError, ["'no_such_module'"], lambda: train.stdlib_corpus(["no_such_module"]))
R("train.stdlib_corpus.modules.builtin", TN + "stdlib_corpus:modules", ValueError, ["module 'sys'", "no Python source"], lambda: train.stdlib_corpus(["sys"]))
CD = TN + "char_lm_data:"
R("train.char_lm_data.text.empty", CD + "text", ValueError, ["text is empty"], lambda: train.char_lm_data(""))
R("train.char_lm_data.text.bytes", CD + "text", TypeError, ["text", "bytes"], lambda: train.char_lm_data(b"abc"))
R("train.char_lm_data.block_size.zero", CD + "block_size", ValueError, ["block_size=0"], lambda: train.char_lm_data("abcdefgh" * 4, 0))
R("train.char_lm_data.val_fraction.one", CD + "val_fraction", ValueError, ["val_fraction=1"], lambda: train.char_lm_data("abc", 1, 1))
R("train.char_lm_data.val_fraction.nan", CD + "val_fraction", ValueError, ["val_fraction=nan"], lambda: train.char_lm_data("abc", 1, NAN))
NL = TN + "noam_lr:"
R("train.noam_lr.step.zero", NL + "step", ValueError, ["step=0"], lambda: train.noam_lr(0, 8, 4))
R("train.noam_lr.d_model.zero", NL + "d_model", ValueError, ["d_model=0"], lambda: train.noam_lr(1, 0, 4))
R("train.noam_lr.warmup.float", NL + "warmup", TypeError, ["warmup=4.0"], lambda: train.noam_lr(1, 8, 4.0))
R("train.noam_lr.factor.nan", NL + "factor", ValueError, ["factor=nan"], lambda: train.noam_lr(1, 8, 4, NAN))
TRC = TN + "TrainConfig:"
TRAIN_CONFIG_ROWS = [  # every field of TrainConfig
    ("steps", 0, ValueError, ["steps=0"]), ("steps", 1.5, TypeError, ["steps=1.5"]),
    ("batch_size", 0, ValueError, ["batch_size=0"]), ("batch_size", True, TypeError, ["batch_size=True"]),
    ("warmup", -1, ValueError, ["warmup=-1"]),
    ("lr_factor", 0, ValueError, ["lr_factor=0"]), ("lr_factor", NAN, ValueError, ["lr_factor=nan"]), ("lr_factor", "1", TypeError, ["lr_factor='1'"]),
    ("betas", (0.9,), TypeError, ["betas=(0.9,)"]), ("betas", (0.9, 1.0), ValueError, ["betas[1]=1.0"]),
    ("betas", "0.9", TypeError, ["betas='0.9'"]), ("betas", (0.9, NAN), ValueError, ["betas[1]=nan"]),
    ("eps", 0, ValueError, ["eps=0"]), ("eps", INF, ValueError, ["eps=inf"]),
    ("weight_decay", -0.1, ValueError, ["weight_decay=-0.1"]), ("weight_decay", NAN, ValueError, ["weight_decay=nan"]),
    ("label_smoothing", 1.0, ValueError, ["label_smoothing=1.0"]), ("label_smoothing", "0", TypeError, ["label_smoothing='0'"]),
    ("clip", "1", TypeError, ["clip='1'"]), ("clip", 0, ValueError, ["clip=0"]), ("clip", INF, ValueError, ["clip=inf"]),
    ("eval_every", 0, ValueError, ["eval_every=0"]), ("eval_items", -1, ValueError, ["eval_items=-1"]),
    ("seed", -1, ValueError, ["seed=-1"]), ("seed", "0", TypeError, ["seed='0'"]),
    ("device", 0, TypeError, ["device=0"]), ("device", "gpu", ValueError, ["device='gpu'"]),
    ("progress", 1, TypeError, ["progress=1"]),
    ("precision", "fp8", ValueError, ["precision='fp8'"]), ("precision", "fp16", ValueError, ["precision='fp16'", "device='cpu'"]),
    ("grad_accum", 0, ValueError, ["grad_accum=0"]), ("grad_accum", 3, ValueError, ["batch_size=64", "grad_accum=3"]),
    ("checkpointing", "yes", TypeError, ["checkpointing='yes'"]),
    ("parallel", "tp", ValueError, ["parallel='tp'"]),
]
for field, bad, exc, words in TRAIN_CONFIG_ROWS:
    R(f"train.TrainConfig.{field}.{bad!r}", TRC + field, exc, words, lambda field=field, bad=bad: train.TrainConfig(**{field: bad}))

@functools.cache
def lm_data():
    "A tiny character-LM data set and a model for it (vocabulary 3, block 4)."
    return train.LMData(_lmids(40), 4, train.Vocab("abc", specials=False))
@functools.cache
def tiny_lm():
    torch.manual_seed(0)
    return model.DecoderOnlyLM(cfg(vocab_size=3, max_len=4, positional="learned")).eval()
@functools.cache
def s2s_data(): return train.Seq2SeqData(train.reverse_pairs(8, 1, 3, 3), train.Vocab("abc"))
@functools.cache
def tiny_s2s():
    torch.manual_seed(0)
    return model.Transformer(cfg(vocab_size=6, max_len=8)).eval()
def lm_batch(): return lm_data().batch(torch.tensor([0, 1]))

R("train.model_logits.model.str", TN + "model_logits:model", TypeError, ["model", "str"], lambda: train.model_logits("m", lm_batch()))
R("train.model_logits.batch.missing_key", TN + "model_logits:batch", ValueError, ["batch", "'idx'"], lambda: train.model_logits(tiny_lm(), {"x": 1}))
R("train.model_logits.batch.list", TN + "model_logits:batch", TypeError, ["batch", "list"], lambda: train.model_logits(tiny_lm(), [1, 2]))
BLs = TN + "batch_loss:"
R("train.batch_loss.model.str", BLs + "model", TypeError, ["model", "str"], lambda: train.batch_loss("m", lm_batch()))
R("train.batch_loss.batch.targets_too_large", BLs + "batch", ValueError, ["targets", "vocab_size"],
  lambda: train.batch_loss(tiny_lm(), lm_batch() | {"targets": torch.full((2, 4), 7)}))
R("train.batch_loss.batch.targets_negative", BLs + "batch", ValueError, ["targets", "-100", "-3"],
  lambda: train.batch_loss(tiny_lm(), lm_batch() | {"targets": torch.full((2, 4), -3)}))
R("train.batch_loss.batch.targets_all_ignored", BLs + "batch", ValueError, ["targets", "-100", "every"],
  lambda: train.batch_loss(tiny_lm(), lm_batch() | {"targets": torch.full((2, 4), -100)}))
R("train.batch_loss.label_smoothing.one", BLs + "label_smoothing", ValueError, ["label_smoothing=1.5"],
  lambda: train.batch_loss(tiny_lm(), lm_batch(), 1.5))
R("train.batch_loss.label_smoothing.nan", BLs + "label_smoothing", ValueError, ["label_smoothing=nan"],
  lambda: train.batch_loss(tiny_lm(), lm_batch(), NAN))
R("train.autocast.cfg.str", TN + "autocast:cfg", TypeError, [NAMED("cfg"), "TrainConfig", "str"], lambda: train.autocast("bf16"))
R("train.model_blocks.model.str", TN + "model_blocks:model", TypeError, ["model", "str"], lambda: train.model_blocks("m"))
R("train.set_checkpointing.enabled.int", TN + "set_checkpointing:enabled", TypeError, ["enabled=1"], lambda: train.set_checkpointing(tiny_lm(), 1))
R("train.set_checkpointing.model.str", TN + "set_checkpointing:model", TypeError, ["model", "str"], lambda: train.set_checkpointing("m"))
MOp = TN + "make_optimizer:"
R("train.make_optimizer.model.str", MOp + "model", TypeError, ["model", "str"], lambda: train.make_optimizer("m", train.TrainConfig(), 8))
R("train.make_optimizer.cfg.dict", MOp + "cfg", TypeError, [NAMED("cfg"), "TrainConfig", "dict"], lambda: train.make_optimizer(tiny_lm(), {}, 8))
R("train.make_optimizer.d_model.zero", MOp + "d_model", ValueError, ["d_model=0"], lambda: train.make_optimizer(tiny_lm(), train.TrainConfig(), 0))
EL = TN + "evaluate_loss:"
R("train.evaluate_loss.model.str", EL + "model", TypeError, ["model", "str"], lambda: train.evaluate_loss("m", lm_data()))
R("train.evaluate_loss.data.list", EL + "data", TypeError, ["data", "list"], lambda: train.evaluate_loss(tiny_lm(), [1, 2]))
R("train.evaluate_loss.batch_size.zero", EL + "batch_size", ValueError, ["batch_size=0"], lambda: train.evaluate_loss(tiny_lm(), lm_data(), 0))
R("train.evaluate_loss.max_items.zero", EL + "max_items", ValueError, ["max_items=0"], lambda: train.evaluate_loss(tiny_lm(), lm_data(), 4, 0))
GT = TN + "greedy_translate:"
R("train.greedy_translate.model.lm", GT + "model", TypeError, [NAMED("model"), "Transformer", "DecoderOnlyLM"],
  lambda: train.greedy_translate(tiny_lm(), s2s_data(), [0]))
R("train.greedy_translate.data.lm", GT + "data", TypeError, [NAMED("data"), "Seq2SeqData", "LMData"], lambda: train.greedy_translate(tiny_s2s(), lm_data(), [0]))
R("train.greedy_translate.idx.out_of_range", GT + "idx", ValueError, ["idx", "99"], lambda: train.greedy_translate(tiny_s2s(), s2s_data(), [99]))
for fname in ("match_flags", "exact_match"):
    f = getattr(train, fname)
    P = f"train.{fname}:"
    R(f"train.{fname}.model.lm", P + "model", TypeError, [NAMED("model"), "Transformer", "DecoderOnlyLM"], lambda f=f: f(tiny_lm(), s2s_data()))
    R(f"train.{fname}.data.lm", P + "data", TypeError, [NAMED("data"), "Seq2SeqData", "LMData"], lambda f=f: f(tiny_s2s(), lm_data()))
    R(f"train.{fname}.batch_size.zero", P + "batch_size", ValueError, ["batch_size=0"], lambda f=f: f(tiny_s2s(), s2s_data(), 0))
    R(f"train.{fname}.max_items.zero", P + "max_items", ValueError, ["max_items=0"], lambda f=f: f(tiny_s2s(), s2s_data(), 4, 0))

# checkpoints written into a temporary directory (set by the test module before the rows run)
TMP: list = []          # TMP[0] is the directory
def tmp(name): return Path(TMP[0]) / name
def ckpt(name="good.pt", **kw):
    "A save_checkpoint file of tiny_lm (with an optimizer unless told otherwise)."
    m = tiny_lm()
    opt = kw.pop("optimizer", torch.optim.SGD(m.parameters(), lr=0.1))
    train.save_checkpoint(tmp(name), m, opt, **kw); return tmp(name)
def write(name, data): tmp(name).write_bytes(data); return tmp(name)
def truncated():
    p = ckpt("full.pt"); return write("truncated.pt", p.read_bytes()[: p.stat().st_size // 2])
def bare():
    torch.save(tiny_lm().state_dict(), tmp("bare.pt")); return tmp("bare.pt")

LC = TN + "load_checkpoint:"
R("train.load_checkpoint.path.missing", LC + "path", FileNotFoundError, ["checkpoint", "missing.pt", "does not exist"],
  lambda: train.load_checkpoint(tmp("missing.pt"), tiny_lm()))
R("train.load_checkpoint.path.empty", LC + "path", ValueError, ["empty.pt", "empty (0 bytes)"], lambda: train.load_checkpoint(write("empty.pt", b""), tiny_lm()))
R("train.load_checkpoint.path.random_bytes", LC + "path", ValueError, ["random.pt", "cannot be read"],
  lambda: train.load_checkpoint(write("random.pt", bytes(range(256)) * 4), tiny_lm()))
R("train.load_checkpoint.path.truncated", LC + "path", ValueError, ["truncated.pt", "cannot be read"], lambda: train.load_checkpoint(truncated(), tiny_lm()))
R("train.load_checkpoint.path.bare_state_dict", LC + "path", ValueError, ["bare.pt", "no 'model' entry", "bare state_dict"],
  lambda: train.load_checkpoint(bare(), tiny_lm()))
R("train.load_checkpoint.model.other_config", LC + "model", ValueError, ["good.pt", "another model configuration", "max_len=4"],
  lambda: train.load_checkpoint(ckpt(), model.DecoderOnlyLM(cfg(vocab_size=3, max_len=5, positional="learned"))))
R("train.load_checkpoint.model.str", LC + "model", TypeError, ["model", "str"], lambda: train.load_checkpoint(ckpt(), "m"))
R("train.load_checkpoint.optimizer.missing_entry", LC + "optimizer", ValueError, ["no_opt.pt", "no 'optimizer' entry"],
  lambda: train.load_checkpoint(ckpt("no_opt.pt", optimizer=None), tiny_lm(), torch.optim.SGD(tiny_lm().parameters(), lr=0.1)))
R("train.load_checkpoint.scheduler.missing_entry", LC + "scheduler", ValueError, ["good.pt", "no 'scheduler' entry"],
  lambda: train.load_checkpoint(ckpt(), tiny_lm(), None, torch.optim.lr_scheduler.LambdaLR(torch.optim.SGD(tiny_lm().parameters(), lr=0.1), lambda i: 1.0)))
R("train.load_checkpoint.device.unknown", LC + "device", TV, ["device='gpu'"], lambda: train.load_checkpoint(ckpt(), tiny_lm(), device="gpu"))
R("train.load_checkpoint.scaler.missing_entry", LC + "scaler", ValueError, ["good.pt", "no 'scaler' entry"],
  lambda: train.load_checkpoint(ckpt(), tiny_lm(), None, None, "cpu", torch.amp.GradScaler("cpu")))
R("train.load_checkpoint.scaler.float", LC + "scaler", TypeError, ["scaler", "GradScaler", "float"], lambda: train.load_checkpoint(ckpt(), tiny_lm(), scaler=65536.0))
SC = TN + "save_checkpoint:"
R("train.save_checkpoint.scaler.dict", SC + "scaler", TypeError, ["scaler", "GradScaler", "dict"], lambda: train.save_checkpoint(tmp("s.pt"), tiny_lm(), scaler={}))
R("train.save_checkpoint.model.str", SC + "model", TypeError, ["model", "str"], lambda: train.save_checkpoint(tmp("s.pt"), "m"))
R("train.save_checkpoint.optimizer.str", SC + "optimizer", TypeError, ["optimizer", "str"], lambda: train.save_checkpoint(tmp("s.pt"), tiny_lm(), "adam"))
R("train.save_checkpoint.scheduler.str", SC + "scheduler", TypeError, ["scheduler", "str"], lambda: train.save_checkpoint(tmp("s.pt"), tiny_lm(), None, "lr"))
R("train.save_checkpoint.step.negative", SC + "step", ValueError, ["step=-1"], lambda: train.save_checkpoint(tmp("s.pt"), tiny_lm(), step=-1))
BI = TN + "batch_indices:"
R("train.batch_indices.n.zero", BI + "n", ValueError, ["batch_size=1", "(0)"], lambda: train.batch_indices(0, 1, 0))
R("train.batch_indices.batch_size.above_n", BI + "batch_size", ValueError, ["batch_size=5", "(4)"], lambda: train.batch_indices(4, 5, 0))
R("train.batch_indices.step.str", BI + "step", TypeError, ["step='1'"], lambda: train.batch_indices(4, 2, "1"))
R("train.batch_indices.seed.str", BI + "seed", TypeError, ["seed='0'"], lambda: train.batch_indices(4, 2, 0, "0"))
R("train.batch_indices.rank.out_of_range", BI + "rank", ValueError, ["rank=2", "world_size=2"], lambda: train.batch_indices(4, 2, 0, 0, 2, 2))
R("train.batch_indices.world_size.not_dividing", BI + "world_size", ValueError, ["batch_size=3", "world_size=2"], lambda: train.batch_indices(4, 3, 0, 0, 0, 2))
R("train.parallel_mode.parallel.unknown", TN + "parallel_mode:parallel", ValueError, ["parallel='tp'"], lambda: train.parallel_mode("tp"))
R("train.parallel_mode.parallel.ddp_without_group", TN + "parallel_mode:parallel", ValueError, ["parallel='ddp'", "process group"], lambda: train.parallel_mode("ddp"))
R("train.shard.model.str", TN + "shard:model", TypeError, ["model", "str"], lambda: train.shard("m"))
R("train.state_bytes.model.str", TN + "state_bytes:model", TypeError, ["model", "str"], lambda: train.state_bytes("m"))
R("train.state_bytes.optimizer.str", TN + "state_bytes:optimizer", TypeError, ["optimizer", "str"], lambda: train.state_bytes(tiny_lm(), "adam"))
TRN = TN + "train:"
_quick = lambda **kw: train.TrainConfig(steps=1, batch_size=2, warmup=1, eval_every=1, eval_items=2, progress=False, **kw)
R("train.train.cfg.dict", TRN + "cfg", TypeError, [NAMED("cfg"), "TrainConfig", "dict"], lambda: train.train(tiny_lm(), lm_data(), {}))
R("train.train.model.str", TRN + "model", TypeError, ["model", "str"], lambda: train.train("m", lm_data(), _quick()))
R("train.train.data.list", TRN + "data", TypeError, ["data", "list"], lambda: train.train(tiny_lm(), [1, 2, 3], _quick()))
R("train.train.data.too_small", TRN + "data", ValueError, ["batch_size=64", "number of examples"],
  lambda: train.train(tiny_lm(), lm_data(), train.TrainConfig(steps=1, progress=False)))
R("train.train.val.list", TRN + "val", TypeError, ["val", "list"], lambda: train.train(tiny_lm(), lm_data(), _quick(), val=[1]))
R("train.train.checkpoint.random_bytes", TRN + "checkpoint", ValueError, ["random2.pt", "cannot be read"],
  lambda: train.train(tiny_lm(), lm_data(), _quick(), checkpoint=write("random2.pt", b"\x00garbage" * 9), resume=True))
TPL = TN + "train_plain:"
R("train.train_plain.cfg.dict", TPL + "cfg", TypeError, [NAMED("cfg"), "TrainConfig", "dict"], lambda: train.train_plain(tiny_lm(), lm_data(), {}))
R("train.train_plain.model.str", TPL + "model", TypeError, ["model", "str"], lambda: train.train_plain("m", lm_data(), _quick()))
R("train.train_plain.data.list", TPL + "data", TypeError, ["data", "list"], lambda: train.train_plain(tiny_lm(), [1, 2, 3], _quick()))
R("train.train.on_eval.int", TRN + "on_eval", TypeError, ["on_eval=3", "callable"], lambda: train.train(tiny_lm(), lm_data(), _quick(), on_eval=3))
def s2s_batch(): return s2s_data().batch([0, 1])
CW = TN + "cross_attention_weights:"
R("train.cross_attention_weights.model.lm", CW + "model", TypeError, [NAMED("model"), "Transformer", "DecoderOnlyLM"],
  lambda: train.cross_attention_weights(tiny_lm(), s2s_batch()))
R("train.cross_attention_weights.batch.lm", CW + "batch", ValueError, ["batch", "'src'"], lambda: train.cross_attention_weights(tiny_s2s(), lm_batch()))
R("train.cross_attention_weights.layer.out_of_range", CW + "layer", ValueError, ["layer=5"], lambda: train.cross_attention_weights(tiny_s2s(), s2s_batch(), 5))
MT = TN + "make_task:"
R("train.make_task.task.unknown", MT + "task", ValueError, ["task='sort'"], lambda: train.make_task("sort"))
R("train.make_task.n_test.charlm", MT + "n_test", ValueError, ["n_test=2", "charlm"], lambda: train.make_task("charlm", n_test=2))
R("train.make_task.n_test.negative", MT + "n_test", ValueError, ["n_test=-1"], lambda: train.make_task("reverse", n_train=2, n_val=2, n_test=-1))
R("train.make_task.seed.str", MT + "seed", TypeError, ["seed='0'"], lambda: train.make_task("reverse", "0", 2, 2))
R("train.make_task.n_train.zero", MT + "n_train", ValueError, ["n_train=0"], lambda: train.make_task("reverse", 0, 0, 2))
R("train.make_task.n_val.zero", MT + "n_val", ValueError, ["n_val=0"], lambda: train.make_task("reverse", 0, 2, 0))
R("train.make_task.block_size.zero", MT + "block_size", ValueError, ["block_size=0"], lambda: train.make_task("charlm", block_size=0))
MM = TN + "make_model:"
R("train.make_model.data.list", MM + "data", TypeError, ["data", "list"], lambda: train.make_model([1, 2]))
R("train.make_model.d_model.zero", MM + "d_model", ValueError, ["d_model=0"], lambda: train.make_model(lm_data(), 0))
R("train.make_model.n_heads.not_dividing", MM + "n_heads", ValueError, ["d_model=8", "n_heads=3"], lambda: train.make_model(lm_data(), 8, 3))
R("train.make_model.n_layers.zero", MM + "n_layers", ValueError, ["n_layers=0"], lambda: train.make_model(lm_data(), 8, 2, 0))
R("train.make_model.dropout.one", MM + "dropout", ValueError, ["dropout=1"], lambda: train.make_model(lm_data(), 8, 2, 1, 1))
R("train.make_model.seed.str", MM + "seed", TypeError, ["seed='x'"], lambda: train.make_model(lm_data(), 8, 2, 1, 0.0, "x"))

# =====================================================================================================================
# checkpoints (Hugging Face directories made in the temporary directory)
# =====================================================================================================================
CK = "checkpoints."
LLAMA = dict(architectures=["LlamaForCausalLM"], vocab_size=11, hidden_size=8, num_attention_heads=2, num_key_value_heads=1,
             num_hidden_layers=1, intermediate_size=16, max_position_embeddings=16, hidden_act="silu", rms_norm_eps=1e-6,
             rope_theta=10000.0, tie_word_embeddings=False)
R("checkpoints.hf_family.hf.str", CK + "hf_family:hf", TypeError, ["hf", "str"], lambda: checkpoints.hf_family("llama"))
R("checkpoints.hf_family.hf.no_architectures", CK + "hf_family:hf", ValueError, ["architectures"], lambda: checkpoints.hf_family({}))
R("checkpoints.hf_family.hf.unsupported", CK + "hf_family:hf", ValueError, ["architectures=['BertModel']"], lambda: checkpoints.hf_family({"architectures": ["BertModel"]}))
CF = CK + "config_from_hf:hf"
for key, bad, words in (("hidden_act", "gelu", ["hidden_act='gelu'"]), ("hidden_size", 9, ["hidden_size=9", "num_attention_heads=2"]),
                        ("num_key_value_heads", 3, ["num_key_value_heads=3"]), ("head_dim", 3, ["head_dim=3"]),
                        ("vocab_size", 0, ["vocab_size=0"]), ("num_hidden_layers", "1", ["num_hidden_layers='1'"]),
                        ("rms_norm_eps", "x", ["rms_norm_eps='x'"]), ("max_position_embeddings", -1, ["max_position_embeddings=-1"]),
                        ("rope_scaling", {"rope_type": "linear", "factor": NAN}, ["factor", "nan"])):
    R(f"checkpoints.config_from_hf.hf.{key}", CF, TV, words, lambda key=key, bad=bad: checkpoints.config_from_hf(LLAMA | {key: bad}))
R("checkpoints.config_from_hf.hf.list", CF, TypeError, ["hf", "list"], lambda: checkpoints.config_from_hf([1]))
R("checkpoints.weight_rules.family.unknown", CK + "weight_rules:family", ValueError, ["family='bert'"], lambda: checkpoints.weight_rules("bert", cfg()))
R("checkpoints.weight_rules.config.str", CK + "weight_rules:config", TypeError, [NAMED("config"), "TransformerConfig", "str"], lambda: checkpoints.weight_rules("llama", "c"))
R("checkpoints.mapping_table.family.unknown", CK + "mapping_table:family", ValueError, ["family='bert'"], lambda: checkpoints.mapping_table("bert"))
R("checkpoints.mapping_table.config.str", CK + "mapping_table:config", TypeError, [NAMED("config"), "TransformerConfig", "str"], lambda: checkpoints.mapping_table("llama", "c"))
def hf_dir(name, config=None, weights=None):
    "A directory with a config.json (a dict, or raw text) and optional weight files {name: bytes}."
    import json
    d = tmp(name); d.mkdir(exist_ok=True)
    if config is not None: (d / "config.json").write_text(config if isinstance(config, str) else json.dumps(config))
    for f, b in (weights or {}).items(): (d / f).write_bytes(b)
    return d
R("checkpoints.weight_files.path.no_weights", CK + "weight_files:path", FileNotFoundError, ["no weights in", "noweights"],
  lambda: checkpoints.weight_files(hf_dir("noweights", LLAMA)))
R("checkpoints.weight_files.path.str", CK + "weight_files:path", FileNotFoundError, ["no weights in", "noweights2"],
  lambda: checkpoints.weight_files(str(hf_dir("noweights2", LLAMA))))
R("checkpoints.weight_files.path.index_without_map", CK + "weight_files:path", ValueError, ["model.safetensors.index.json", "weight_map"],
  lambda: checkpoints.weight_files(hf_dir("badindex", LLAMA, {"model.safetensors.index.json": b"{}"})))
FP = CK + "from_pretrained:"
R("checkpoints.from_pretrained.path.missing", FP + "path", FileNotFoundError, ["nodir", "not a directory"], lambda: checkpoints.from_pretrained(tmp("nodir")))
R("checkpoints.from_pretrained.path.bad_json", FP + "path", ValueError, ["config.json", "not valid JSON"], lambda: checkpoints.from_pretrained(hf_dir("badjson", "{not json")))
R("checkpoints.from_pretrained.path.no_config", FP + "path", FileNotFoundError, ["config.json"], lambda: checkpoints.from_pretrained(hf_dir("noconfig")))
R("checkpoints.from_pretrained.path.random_safetensors", FP + "path", ValueError, ["model.safetensors", "not a readable"],
  lambda: checkpoints.from_pretrained(hf_dir("randomst", LLAMA, {"model.safetensors": bytes(range(200))})))
R("checkpoints.from_pretrained.path.empty_safetensors", FP + "path", ValueError, ["model.safetensors", "not a readable"],
  lambda: checkpoints.from_pretrained(hf_dir("emptyst", LLAMA, {"model.safetensors": b""})))
R("checkpoints.from_pretrained.dtype.str", FP + "dtype", TypeError, ["dtype='float16'"], lambda: checkpoints.from_pretrained(hf_dir("dt", LLAMA), dtype="float16"))
R("checkpoints.from_pretrained.dtype.int", FP + "dtype", TypeError, ["dtype=torch.int64"], lambda: checkpoints.from_pretrained(hf_dir("dt2", LLAMA), dtype=torch.int64))
CTH = CK + "config_to_hf:"
R("checkpoints.config_to_hf.config.str", CTH + "config", TypeError, [NAMED("config"), "TransformerConfig", "str"], lambda: checkpoints.config_to_hf("c"))
LLAMA_CFG = dict(norm="rms", activation="swiglu", d_ff=None, bias=False, scale_embeddings=False)
R("checkpoints.config_to_hf.config.sinusoidal", CTH + "config", ValueError, ["positional='sinusoidal'"], lambda: checkpoints.config_to_hf(cfg(**LLAMA_CFG)))
R("checkpoints.config_to_hf.dtype.int", CTH + "dtype", TypeError, ["dtype=torch.int64"],
  lambda: checkpoints.config_to_hf(cfg(positional="rope", norm="rms", activation="swiglu", d_ff=None, bias=False, scale_embeddings=False), torch.int64))
SPd = CK + "save_pretrained:"
@functools.cache
def llama_lm():
    torch.manual_seed(0)
    return model.DecoderOnlyLM(cfg(positional="rope", norm="rms", activation="swiglu", d_ff=None, bias=False, scale_embeddings=False))
R("checkpoints.save_pretrained.model.str", SPd + "model", TypeError, [NAMED("model"), "DecoderOnlyLM", "str"], lambda: checkpoints.save_pretrained("m", tmp("sp")))
TK = "checkpoints.Tokenizer"
def tok(): return checkpoints.Tokenizer({"a": 0, "b": 1, "ab": 2, " ": 3}, r" ?[ab]+|\s+", [("a", "b")])
R("checkpoints.Tokenizer.vocab.list", TK + ":vocab", TypeError, ["vocab must be a dict", "list"], lambda: checkpoints.Tokenizer(["a"], "."))
R("checkpoints.Tokenizer.vocab.gap", TK + ":vocab", ValueError, ["vocab's ids", "0 .. 1"], lambda: checkpoints.Tokenizer({"a": 0, "b": 2}, "."))
R("checkpoints.Tokenizer.pattern.int", TK + ":pattern", TypeError, ["pattern=3", "str"], lambda: checkpoints.Tokenizer({"a": 0}, 3))
R("checkpoints.Tokenizer.merges.unknown", TK + ":merges", ValueError, ["merges holds ('a', 'c')", "join is in vocab"],
  lambda: checkpoints.Tokenizer({"a": 0, "c": 1}, ".", [("a", "c")]))
R("checkpoints.Tokenizer.encode.text.int", TK + ".encode:text", TypeError, ["text=3", "str"], lambda: tok().encode(3))
R("checkpoints.Tokenizer.encode.text.unknown", TK + ".encode:text", ValueError, ["text holds 'c'", "vocabulary of 4 tokens"], lambda: tok().encode("abc"))
R("checkpoints.Tokenizer.pieces.text.bytes", TK + ".pieces:text", TypeError, ["text=b'ab'", "str"], lambda: tok().pieces(b"ab"))
R("checkpoints.Tokenizer.decode.ids.unknown", TK + ".decode:ids", ValueError, ["ids holds 7", "0 .. 3"], lambda: tok().decode([0, 7]))
R("checkpoints.Tokenizer.decode.ids.float", TK + ".decode:ids", ValueError, ["ids holds 1.0"], lambda: tok().decode([1.0]))
R("checkpoints.Tokenizer.from_file.path.int", TK + ".from_file:path", TypeError, ["path=3", "Path"], lambda: checkpoints.Tokenizer.from_file(3))
R("checkpoints.Tokenizer.from_file.path.missing", TK + ".from_file:path", FileNotFoundError, ["nothing.json", "not found"],
  lambda: checkpoints.Tokenizer.from_file(tmp("nothing.json")))
R("checkpoints.save_pretrained.model.sinusoidal", SPd + "model", ValueError, ["positional='sinusoidal'"], lambda: checkpoints.save_pretrained(model.DecoderOnlyLM(cfg(**LLAMA_CFG)), tmp("sp0")))
R("checkpoints.save_pretrained.max_shard_size.str", SPd + "max_shard_size", ValueError, ["max_shard_size='lots'"],
  lambda: checkpoints.save_pretrained(llama_lm(), tmp("sp1"), "lots"))
R("checkpoints.save_pretrained.max_shard_size.zero", SPd + "max_shard_size", ValueError, ["max_shard_size=0"],
  lambda: checkpoints.save_pretrained(llama_lm(), tmp("sp2"), 0))
R("checkpoints.save_pretrained.path.file", SPd + "path", (FileExistsError, NotADirectoryError, ValueError), ["afile"],
  lambda: checkpoints.save_pretrained(llama_lm(), write("afile", b"x")))

# =====================================================================================================================
# flash
# =====================================================================================================================
FA = "flash."
for fname in ("standard_attention_io", "flash_attention_io"):
    f = getattr(flash, fname)
    base = (8, 4) if fname == "standard_attention_io" else (8, 4, 64)
    names = ("n_q", "d") if fname == "standard_attention_io" else ("n_q", "d", "M")
    for i, p in enumerate(names):
        args = list(base); args[i] = -1
        R(f"flash.{fname}.{p}.bad", f"flash.{fname}:{p}", ValueError, [f"{p}={args[i]}"], lambda f=f, args=args: f(*args))
    R(f"flash.{fname}.n_k.negative", f"flash.{fname}:n_k", ValueError, ["n_k=-1"], lambda f=f, base=base: f(*base, n_k=-1))
AF = FA + "attention_flops:"
R("flash.attention_flops.mode.unknown", AF + "mode", ValueError, ["mode='both'"], lambda: flash.attention_flops(1, 1, 4, 4, 8, mode="both"))
for i, p in enumerate(("batch", "heads", "n_q", "n_k", "head_dim")):
    args = [1, 1, 4, 4, 8]; args[i] = -1
    R(f"flash.attention_flops.{p}.negative", AF + p, ValueError, [f"{p}=-1"], lambda args=args: flash.attention_flops(*args))
for fname in ("softmax_stats", "online_softmax"):
    f = getattr(flash, fname)
    R(f"flash.{fname}.block.zero", f"flash.{fname}:block", ValueError, ["block=0"], lambda f=f: f(T(2, 8), 0))
    R(f"flash.{fname}.x.str", f"flash.{fname}:x", TypeError, [NAMED("x"), "str"], lambda f=f: f("x"))
    R(f"flash.{fname}.x.int64", f"flash.{fname}:x", TypeError, ["x.dtype=torch.int64"], lambda f=f: f(T(2, 8).long()))
CFI = "checks.check_flash_inputs:"   # lives in the checks appendix; flash re-exports it
R("checks.check_flash_inputs.q.str", CFI + "q", TypeError, [NAMED("q"), "str"], lambda: flash.check_flash_inputs("q", *QKV()[1:]))
R("checks.check_flash_inputs.k.int64", CFI + "k", TypeError, ["k.dtype=torch.int64"], lambda: flash.check_flash_inputs(QKV()[0], QKV()[1].long(), QKV()[2]))
R("checks.check_flash_inputs.v.len", CFI + "v", ValueError, ["v.shape[-2]=5"], lambda: flash.check_flash_inputs(*QKV()[:2], T(1, 2, 5, 4)))
R("checks.check_flash_inputs.mask.requires_grad", CFI + "mask", ValueError, ["mask.requires_grad=True"],
  lambda: flash.check_flash_inputs(*QKV(), torch.zeros(3, 3, requires_grad=True)))
R("checks.check_flash_inputs.mask.plus_inf", CFI + "mask", ValueError, ["mask", "+inf"], lambda: flash.check_flash_inputs(*QKV(), with_inf()))
R("checks.check_flash_inputs.is_causal.with_mask", CFI + "is_causal", ValueError, ["is_causal=True"],
  lambda: flash.check_flash_inputs(*QKV(), torch.ones(3, 3, dtype=torch.bool), True))
R("checks.check_flash_inputs.block_q.zero", CFI + "block_q", ValueError, ["block_q=0"], lambda: flash.check_flash_inputs(*QKV(), block_q=0))
R("checks.check_flash_inputs.block_k.bool", CFI + "block_k", TypeError, ["block_k=True"], lambda: flash.check_flash_inputs(*QKV(), block_k=True))

_attn_rows("flash.flash_attention", flash.flash_attention, has_dropout=False)
FAA = FA + "flash_attention:"
R("flash.flash_attention.block_q.zero", FAA + "block_q", ValueError, ["block_q=0"], lambda: flash.flash_attention(*QKV(), block_q=0))
R("flash.flash_attention.block_k.float", FAA + "block_k", TypeError, ["block_k=2.0"], lambda: flash.flash_attention(*QKV(), block_k=2.0))
_attn_rows("flash.flash_backend", flash.flash_backend)
R("flash.flash_backend.dropout_p.half", FA + "flash_backend:dropout_p", ValueError, ["dropout_p=0.5", "must be 0"], lambda: flash.flash_backend(*QKV(), dropout_p=0.5))
PMm = FA + "peak_memory:"
R("flash.peak_memory.fn.int", PMm + "fn", TypeError, ["fn", "callable"], lambda: flash.peak_memory(3))

R("checks.check_flash_inputs.scale.nan", CFI + "scale", ValueError, ["scale=nan", "finite"], lambda: flash.check_flash_inputs(*QKV(), scale=NAN))
R("checks.check_flash_inputs.scale.beyond_float32", CFI + "scale", ValueError, ["scale=1e+39", "torch.float32"],
  lambda: flash.check_flash_inputs(*QKV(dtype=torch.float16), scale=1e39))

# =====================================================================================================================
# flash_triton (the checks that run before any kernel: CPU interpreter, tiny shapes)
# =====================================================================================================================
FT_ = "flash_triton."
CTI = FT_ + "check_triton_inputs:"
R("flash_triton.check_triton_inputs.q.str", CTI + "q", TypeError, [NAMED("q"), "str"], lambda: flash_triton.check_triton_inputs("q", *QKV()[1:]))
R("flash_triton.check_triton_inputs.q.rank2", CTI + "q", ValueError, ["q.dim()=2"], lambda: flash_triton.check_triton_inputs(T(3, 4), T(3, 4), T(3, 4)))
R("flash_triton.check_triton_inputs.q.float64", CTI + "q", TypeError, ["q.dtype=torch.float64"], lambda: flash_triton.check_triton_inputs(*QKV(dtype=torch.float64)))
R("flash_triton.check_triton_inputs.k.int64", CTI + "k", TypeError, ["k.dtype=torch.int64"], lambda: flash_triton.check_triton_inputs(QKV()[0], QKV()[1].long(), QKV()[2]))
R("flash_triton.check_triton_inputs.v.head_dim", CTI + "v", ValueError, ["v.shape[-1]=5", "q.shape[-1]=4"],
  lambda: flash_triton.check_triton_inputs(*QKV()[:2], T(1, 2, 3, 5)))
R("flash_triton.check_triton_inputs.q.head_dim_0", CTI + "q", ValueError, [("q.shape[-1]=0", "D=0")], lambda: flash_triton.check_triton_inputs(*QKV(D=0)))
R("flash_triton.check_triton_inputs.q.head_dim_too_large", CTI + "q", ValueError, ["D=300", str(flash_triton.MAX_HEAD_DIM)],
  lambda: flash_triton.check_triton_inputs(*QKV(D=300)))
R("flash_triton.check_triton_inputs.scale.nan", CTI + "scale", ValueError, ["scale=nan", "finite"], lambda: flash_triton.check_triton_inputs(*QKV(), NAN))
R("flash_triton.check_triton_inputs.scale.str", CTI + "scale", TypeError, ["scale='x'"], lambda: flash_triton.check_triton_inputs(*QKV(), "x"))
_attn_rows("flash_triton.triton_flash_attention", flash_triton.triton_flash_attention, has_mask=False, has_dropout=False)
TBk = FT_ + "triton_backend:"
_attn_rows("flash_triton.triton_backend", flash_triton.triton_backend, has_mask=False)
R("flash_triton.triton_backend.mask.bool", TBk + "mask", ValueError, ["mask", "triton", "is_causal"],
  lambda: flash_triton.triton_backend(*QKV(), mask=torch.ones(3, 3, dtype=torch.bool)))
R("flash_triton.triton_backend.dropout_p.half", TBk + "dropout_p", ValueError, ["dropout_p=0.5", "must be 0"], lambda: flash_triton.triton_backend(*QKV(), dropout_p=0.5))
BC = FT_ + "block_config:"
R("flash_triton.block_config.kind.unknown", BC + "kind", ValueError, ["kind='mid'"], lambda: flash_triton.block_config("mid", 64, torch.float16))
R("flash_triton.block_config.head_dim.zero", BC + "head_dim", ValueError, ["head_dim=0"], lambda: flash_triton.block_config("fwd", 0, torch.float16))
R("flash_triton.block_config.dtype.str", BC + "dtype", TypeError, ["dtype='fp16'"], lambda: flash_triton.block_config("fwd", 64, "fp16"))
R("flash_triton.block_config.gpu.int", BC + "gpu", TypeError, ["gpu=3", "GPU's name"],
  lambda: flash_triton.block_config("fwd", 64, torch.float16, interpret=False, gpu=3))
ST = FT_ + "saved_tuning:"
R("flash_triton.saved_tuning.gpu.empty", ST + "gpu", TypeError, ["gpu=''", "non-empty str"], lambda: flash_triton.saved_tuning(""))
R("flash_triton.saved_tuning.path.int", ST + "path", TypeError, ["path=3", "a path"], lambda: flash_triton.saved_tuning("G", 3))
TP = FT_ + "tile_phases:"
for i, p in enumerate(("n_q", "n_k", "block_m", "block_n")):
    args = [8, 8, 4, 4]; args[i] = -1 if i < 2 else 0
    R(f"flash_triton.tile_phases.{p}.{args[i]}", TP + p, ValueError, [f"{p}={args[i]}"], lambda args=args: flash_triton.tile_phases(*args))

R("flash_triton.check_triton_inputs.scale.inf", CTI + "scale", ValueError, ["scale=inf", "finite"], lambda: flash_triton.check_triton_inputs(*QKV(), INF))
R("flash_triton.check_triton_inputs.scale.beyond_float32", CTI + "scale", ValueError, ["scale=1e+39", "torch.float32"],
  lambda: flash_triton.check_triton_inputs(*QKV(), 1e39))

# =====================================================================================================================
# gpu_check (only the entry checks run: every row fails before a kernel is compiled or timed)
# =====================================================================================================================
GC = "gpu_check."
def _gc():
    from transformer_lit import gpu_check; return gpu_check
CK = GC + "compile_kernel:"
for p, args, kw, exc, words in (("kind", ("mid", torch.float16, 64), {}, ValueError, ["kind='mid'", "'fwd'"]),
                                ("dtype", ("fwd", "fp16", 64), {}, TypeError, ["dtype='fp16'"]),
                                ("dtype", ("fwd", torch.float64, 64), {}, TypeError, ["dtype=torch.float64"]),
                                ("head_dim", ("fwd", torch.float16, 0), {}, ValueError, ["head_dim=0"]),
                                ("head_dim", ("fwd", torch.float16, 300), {}, ValueError, ["head_dim=300", "128"]),
                                ("config", ("fwd", torch.float16, 64), dict(config={"BLOCK_M": 64}), ValueError, ["config=", "BLOCK_N"]),
                                ("config", ("fwd", torch.float16, 64), dict(config=dict(BLOCK_M=0, BLOCK_N=64, num_warps=4, num_stages=3)),
                                 ValueError, ["config['BLOCK_M']=0"]),
                                ("arch", ("fwd", torch.float16, 64), dict(arch=0), ValueError, ["arch=0"])):
    R(f"gpu_check.compile_kernel.{p}.{args[1] if p == 'dtype' else (kw or args)!s:.40}", CK + p, exc, words,
      lambda args=args, kw=kw: _gc().compile_kernel(*args, **kw))
R("gpu_check.compile_report.cases.str", GC + "compile_report:cases", TypeError, ["cases='x'"], lambda: _gc().compile_report("x"))
R("gpu_check.compile_report.cases.short_tuple", GC + "compile_report:cases", ValueError, ["cases contains", "('fwd',)"], lambda: _gc().compile_report([("fwd",)]))
R("gpu_check.compile_report.cases.bad_head_dim", GC + "compile_report:cases", ValueError, ["head_dim=300"],
  lambda: _gc().compile_report([("fwd", torch.float16, 300, False, None)]))
R("gpu_check.compile_report.arch.zero", GC + "compile_report:arch", ValueError, ["arch=0"], lambda: _gc().compile_report([("fwd", torch.float16, 64, False, None)], arch=0))
BK = GC + "benchmark_kernels:"
for p, bad, exc, words in (("dtype", torch.float64, TypeError, ["dtype=torch.float64"]), ("head_dims", (), ValueError, ["head_dims=()"]),
                           ("head_dims", (0,), ValueError, ["head_dims[0]=0"]), ("lengths", (), ValueError, ["lengths=()"]),
                           ("lengths", (64, 0), ValueError, ["lengths[1]=0"]), ("causals", True, ValueError, ["causals=True"]),
                           ("modes", ("bwd",), ValueError, ["modes=('bwd',)", "'fwd+bwd'"]), ("tokens", 0, ValueError, ["tokens=0"]),
                           ("width", 0, ValueError, ["width=0"]), ("n_rep", 3, ValueError, ["n_rep=3", "width // D"]),
                           ("deadline", NAN, ValueError, ["deadline=nan"]), ("log", 3, TypeError, ["log=3", "callable"])):
    R(f"gpu_check.benchmark_kernels.{p}.{bad!r}", BK + p, exc, words, lambda p=p, bad=bad: _gc().benchmark_kernels("cpu", **{p: bad}))
TU = GC + "tune:"
for p, bad, exc, words in (("dtype", "bf16", TypeError, ["dtype='bf16'"]), ("head_dims", (256,), ValueError, ["head_dims[0]=256"]),
                           ("causals", (), ValueError, ["causals=()"]), ("n", 0, ValueError, ["n=0"]),
                           ("deadline", "soon", TypeError, ["deadline='soon'"]), ("log", None, TypeError, ["log=None", "callable"])):
    R(f"gpu_check.tune.{p}.{bad!r}", TU + p, exc, words, lambda p=p, bad=bad: _gc().tune("cpu", **{p: bad}))
for p, bad, exc, words in (("tokens", 0, ValueError, ["tokens=0"]), ("width", -1, ValueError, ["width=-1"]),
                           ("fwd_candidates", [], ValueError, ["fwd_candidates=[]", "BLOCK_M"]),
                           ("fwd_candidates", [{"BLOCK_M": 64}], ValueError, ["fwd_candidates=[{'BLOCK_M': 64}]", "num_stages"]),
                           ("bwd_candidates", [dict(BLOCK_M=64, BLOCK_N=64, num_warps=4, num_stages=3)], ValueError, ["bwd_candidates=", "BLOCK_M1"])):
    R(f"gpu_check.tune.{p}.{bad!r:.30}", TU + p, exc, words, lambda p=p, bad=bad: _gc().tune("cpu", **{p: bad}))
SV = GC + "save_tuning:"
for p, args, exc, words in (("path", (3, "G", {}, {}), TypeError, ["path=3"]), ("gpu", ("f.json", "", {}, {}), TypeError, ["gpu=''"]),
                            ("tiles", ("f.json", "G", [], {}), TypeError, ["tiles=[]", "dict"]),
                            ("preferred", ("f.json", "G", {}, None), TypeError, ["preferred=None", "dict"]),
                            ("info", ("f.json", "G", {}, {}, "x"), TypeError, ["info='x'"]),
                            ("base", ("f.json", "G", {}, {}, None, 3), TypeError, ["base=3"])):
    R(f"gpu_check.save_tuning.{p}", SV + p, exc, words, lambda args=args: _gc().save_tuning(*args))
FM = GC + "forward_memory:"
R("gpu_check.forward_memory.device.cpu", FM + "device", ValueError, ["device='cpu'", "CUDA"], lambda: _gc().forward_memory("cpu"))
for p, bad, exc, words in (("dtype", torch.float64, TypeError, ["dtype=torch.float64"]), ("n", 0, ValueError, ["n=0"]),
                           ("d", 256, ValueError, ["d=256"]), ("heads", 0, ValueError, ["heads=0"])):     # checked before the device
    R(f"gpu_check.forward_memory.{p}.{bad!r}", FM + p, exc, words, lambda p=p, bad=bad: _gc().forward_memory("cpu", **{p: bad}))
RC = GC + "run_check:"
for p, bad, exc, words in (("budget_s", 0, ValueError, ["budget_s=0"]), ("budget_s", INF, ValueError, ["budget_s=inf"]),
                           ("budget_s", "300", TypeError, ["budget_s='300'"]), ("out_dir", 3, TypeError, ["out_dir=3"]),
                           ("phase_s", 30, TypeError, ["phase_s=30", "dict"]), ("phase_s", {"warmup": 3}, ValueError, ["'warmup'", "correctness"]),
                           ("phase_s", {"timing": -1}, ValueError, ["phase_s['timing']=-1", ">= 0"]),
                           ("log", 3, TypeError, ["log=3", "callable"])):
    R(f"gpu_check.run_check.{p}.{bad!r}", RC + p, exc, words, lambda p=p, bad=bad: _gc().run_check(dry_run=True, **{p: bad}))

# =====================================================================================================================
# bench (tiny sizes: a row whose check is missing would otherwise run a benchmark)
# =====================================================================================================================
BE = "bench."
TM = BE + "time_ms:"
R("bench.time_ms.fn.int", TM + "fn", TypeError, ["fn", "callable"], lambda: bench.time_ms(3))
R("bench.time_ms.repeats.zero", TM + "repeats", ValueError, ["repeats=0"], lambda: bench.time_ms(lambda: None, repeats=0))
R("bench.time_ms.warmup.negative", TM + "warmup", ValueError, ["warmup=-1"], lambda: bench.time_ms(lambda: None, repeats=1, warmup=-1))
MB = BE + "math_bytes:"
for i, p in enumerate(("batch", "heads", "n_q", "n_k")):
    args = [1, 1, 4, 4]; args[i] = -1
    R(f"bench.math_bytes.{p}.negative", MB + p, ValueError, [f"{p}=-1"], lambda args=args: bench.math_bytes(*args))
R("bench.math_bytes.dtype.str", MB + "dtype", TypeError, ["dtype='fp32'"], lambda: bench.math_bytes(1, 1, 4, 4, "fp32"))
BA = BE + "bench_attention:"
_ba = lambda **kw: bench.bench_attention(**(dict(seq_lens=(8,), backends=["math"], batch=1, heads=1, head_dim=4, repeats=1, warmup=0, progress=False) | kw))
for p, bad, exc, words in (("seq_lens", (), ValueError, [("seq_lens=()", "seq_lens=[]")]), ("seq_lens", (0,), ValueError, [("seq_lens=(0,)", "seq_lens=[0]")]),
                           ("backends", ["nope"], ValueError, ["'nope'"]), ("batch", -1, ValueError, ["batch=-1"]),
                           ("heads", 0, ValueError, ["heads=0"]), ("head_dim", 0, ValueError, ["head_dim=0"]),
                           ("dtype", "fp32", TypeError, ["dtype='fp32'"]), ("repeats", 0, ValueError, ["repeats=0"]),
                           ("warmup", -1, ValueError, ["warmup=-1"]), ("interpreter_max_len", 0, ValueError, ["interpreter_max_len=0"])):
    R(f"bench.bench_attention.{p}.{bad!r}", BA + p, exc, words, lambda p=p, bad=bad: _ba(**{p: bad}))
BM = BE + "bench_mha:"
_bm = lambda **kw: bench.bench_mha(**(dict(batch=1, seq_len=4, d_model=8, n_heads=2, repeats=1, warmup=0) | kw))
for p, bad, exc, words in (("batch", -1, ValueError, ["batch=-1"]), ("seq_len", 0, ValueError, ["seq_len=0"]),
                           ("d_model", 0, ValueError, ["d_model=0"]), ("n_heads", 3, ValueError, ["d_model=8", "n_heads=3"]),
                           ("dtype", "fp32", TypeError, ["dtype='fp32'"]), ("repeats", 0, ValueError, ["repeats=0"]),
                           ("warmup", -1, ValueError, ["warmup=-1"])):
    R(f"bench.bench_mha.{p}.{bad!r}", BM + p, exc, words, lambda p=p, bad=bad: _bm(**{p: bad}))
R("bench.repeated_kv_layer.layer.str", BE + "repeated_kv_layer:layer", TypeError, [NAMED("layer"), "MultiHeadAttention", "str"], lambda: bench.repeated_kv_layer("l"))
R("bench.repeated_kv_layer.layer.not_fused", BE + "repeated_kv_layer:layer", TypeError, [NAMED("layer"), "MultiHeadAttention", "fused"],
  lambda: bench.repeated_kv_layer(multihead.MultiHeadAttention(8, 2, kdim=4)))
BG = BE + "bench_gqa:"
_bg = lambda **kw: bench.bench_gqa(**(dict(batch=1, context=4, d_model=8, n_heads=2, kv_heads=(1,), backends=("math",), repeats=1, warmup=0) | kw))
for p, bad, exc, words in (("kv_heads", (3,), ValueError, ["kv_heads", "3", "n_heads=2"]), ("backends", ("nope",), ValueError, ["'nope'"]),
                           ("batch", -1, ValueError, ["batch=-1"]), ("context", 0, ValueError, ["context=0"]),
                           ("d_model", 9, ValueError, ["d_model=9", "n_heads=2"]), ("n_heads", 0, ValueError, ["n_heads=0"]),
                           ("dtype", "fp32", TypeError, ["dtype='fp32'"]), ("repeats", 0, ValueError, ["repeats=0"]),
                           ("warmup", -1, ValueError, ["warmup=-1"])):
    R(f"bench.bench_gqa.{p}.{bad!r}", BG + p, exc, words, lambda p=p, bad=bad: _bg(**{p: bad}))

R("bench.time_ms.grads.int", TM + "grads", TypeError, ["grads=3", "tensors"], lambda: bench.time_ms(lambda: None, grads=3))
R("bench.time_ms.grads.not_tensors", TM + "grads", TypeError, ["grads=[1]", "tensors"], lambda: bench.time_ms(lambda: None, grads=[1]))
for p, bad, exc, words in (("kv_heads", 2, ValueError, ["kv_heads=2", "heads=1"]), ("kv_heads", 0, ValueError, ["kv_heads=0"]),
                           ("tokens", 0, ValueError, ["tokens=0"]), ("reference", "nope", ValueError, ["reference='nope'"]),
                           ("deadline", NAN, ValueError, ["deadline=nan"]), ("deadline", "soon", TypeError, ["deadline='soon'"]),
                           ("log", 3, TypeError, ["log=3", "callable"])):
    R(f"bench.bench_attention.{p}.{bad!r}", BA + p, exc, words, lambda p=p, bad=bad: _ba(**{p: bad}))
LI = BE + "lm_inputs:"
for p, args, exc, words in (("config", ("c", 1, 3), TypeError, [NAMED("config"), "TransformerConfig", "str"]),
                            ("batch", (None, -1, 3), ValueError, ["batch=-1"]), ("seq_len", (None, 1, 0), ValueError, ["seq_len=0"]),
                            ("seed", (None, 1, 3, "cpu", -1), ValueError, ["seed=-1"])):
    R(f"bench.lm_inputs.{p}.bad", LI + p, exc, words, lambda args=args: bench.lm_inputs(*[cfg() if a is None else a for a in args]))
BCo = BE + "bench_compile:"
_bc = lambda **kw: bench.bench_compile(**(dict(config=cfg(), batch=1, seq_len=4, workloads=("forward",), repeats=1, warmup=0, backend="eager") | kw))
for p, bad, exc, words in (("config", "c", TypeError, [NAMED("config"), "TransformerConfig", "str"]), ("batch", 0, ValueError, ["batch=0"]),
                           ("seq_len", 1, ValueError, ["seq_len=1"]), ("seq_len", 17, ValueError, ["seq_len=17", "max_len=16"]),
                           ("workloads", ("fwd",), ValueError, ["workloads=('fwd',)", "'forward'"]), ("workloads", (), ValueError, ["workloads=()"]),
                           ("workloads", "forward", TypeError, ["workloads='forward'"]), ("repeats", 0, ValueError, ["repeats=0"]),
                           ("warmup", -1, ValueError, ["warmup=-1"]), ("backend", "nope", ValueError, ["backend='nope'", "inductor"]),
                           ("seed", -1, ValueError, ["seed=-1"])):
    R(f"bench.bench_compile.{p}.{bad!r}", BCo + p, exc, words, lambda p=p, bad=bad: _bc(**{p: bad}))
BP = BE + "bench_peer:"
_peer_cfg = lambda: bench._peer_config(vocab_size=32, d_model=16, n_layers=1, n_heads=2, max_len=16)   # a GPT-2-shaped config
_bp = lambda **kw: bench.bench_peer(**(dict(config=_peer_cfg(), batch=1, seq_len=4, prompt_len=2, new_tokens=2, workloads=("prefill",),
                                             repeats=1, warmup=0) | kw))
for p, bad, exc, words in (("config", "c", TypeError, [NAMED("config"), "TransformerConfig", "str"]), ("batch", 0, ValueError, ["batch=0"]),
                           ("seq_len", 0, ValueError, ["seq_len=0"]), ("seq_len", 17, ValueError, ["seq_len=17", "max_len=16"]),
                           ("prompt_len", 0, ValueError, ["prompt_len=0"]), ("new_tokens", 0, ValueError, ["new_tokens=0"]),
                           ("prompt_len", 15, ValueError, ["prompt_len=15", "new_tokens=2", "max_len=16"]),
                           ("workloads", ("decode",), ValueError, ["workloads=('decode',)", "'generate'"]), ("workloads", (), ValueError, ["workloads=()"]),
                           ("workloads", "train", TypeError, ["workloads='train'"]), ("repeats", 0, ValueError, ["repeats=0"]),
                           ("warmup", -1, ValueError, ["warmup=-1"]), ("seed", -1, ValueError, ["seed=-1"])):
    R(f"bench.bench_peer.{p}.{bad!r}", BP + p, exc, words, lambda p=p, bad=bad: _bp(**{p: bad}))
R("bench.bench_peer.config.not_gpt2", BP + "config", ValueError, ["cannot be saved as gpt2"], lambda: _bp(config=cfg()))
DS = BE + "decode_step:"
def _ds(cache=None, context=2):
    m = lm(); c = new_static_cache(m, max_len=4, batch=1) if cache is None else cache
    return bench.decode_step(m, c, context, ids(1, 1))
R("bench.decode_step.cache.growing", DS + "cache", TypeError, ["cache must be a StaticCache", "DecoderCache"],
  lambda: _ds(decoding.DecoderCache(2)))
R("bench.decode_step.cache.str", DS + "cache", TypeError, ["cache must be a StaticCache", "str"], lambda: _ds("c"))
R("bench.decode_step.context.too_long", DS + "context", ValueError, ["context=4", "[0, 3]"], lambda: _ds(context=4))
R("bench.decode_step.context.negative", DS + "context", ValueError, ["context=-1"], lambda: _ds(context=-1))
R("bench.decode_step.context.float", DS + "context", TypeError, ["context=1.0"], lambda: _ds(context=1.0))

# =====================================================================================================================
# viz and widgets (only the arguments the course itself interprets; the rest are matplotlib's)
# =====================================================================================================================
VZ = "viz."
def _closing(fn):
    "Run fn and close every figure it opened (rows must not leak figures)."
    import matplotlib.pyplot as plt
    try: return fn()
    finally: plt.close("all")
R("viz.attention_heatmap.weights.rank3", VZ + "attention_heatmap:weights", ValueError, ["weights.ndim=3"],
  lambda: _closing(lambda: viz.attention_heatmap(torch.zeros(1, 2, 2))))
R("viz.attention_heatmap.q_labels.length", VZ + "attention_heatmap:q_labels", ValueError, ["len(q_labels)=1", "2"],
  lambda: _closing(lambda: viz.attention_heatmap(torch.zeros(2, 3), q_labels=["a"])))
R("viz.attention_heatmap.k_labels.length", VZ + "attention_heatmap:k_labels", ValueError, ["len(k_labels)=2", "3"],
  lambda: _closing(lambda: viz.attention_heatmap(torch.zeros(2, 3), k_labels=["a", "b"])))
R("viz.heatmap_grid.maps.empty", VZ + "heatmap_grid:maps", ValueError, ["maps is empty"], lambda: _closing(lambda: viz.heatmap_grid([])))
R("viz.heatmap_grid.titles.length", VZ + "heatmap_grid:titles", ValueError, ["len(titles)=1", "2"],
  lambda: _closing(lambda: viz.heatmap_grid(torch.zeros(2, 2, 2), titles=["a"])))
R("viz.heatmap_grid.q_labels.length", VZ + "heatmap_grid:q_labels", ValueError, ["len(q_labels)=1"],
  lambda: _closing(lambda: viz.heatmap_grid(torch.zeros(2, 2, 2), q_labels=["a"])))
R("viz.heatmap_grid.k_labels.length", VZ + "heatmap_grid:k_labels", ValueError, ["len(k_labels)=3"],
  lambda: _closing(lambda: viz.heatmap_grid(torch.zeros(2, 2, 2), k_labels=["a", "b", "c"])))
R("viz.heatmap_grid.ncols.negative", VZ + "heatmap_grid:ncols", ValueError, ["ncols=-1"], lambda: _closing(lambda: viz.heatmap_grid(torch.zeros(2, 2, 2), ncols=-1)))
def _png():
    "A real 1x1 PNG (FramePlayer decodes every frame)."
    import io
    from PIL import Image
    buf = io.BytesIO(); Image.new("RGB", (1, 1)).save(buf, format="PNG"); return buf.getvalue()
PNG = _png()
FPc = VZ + "FramePlayer:"
R("viz.FramePlayer.controls.empty", FPc + "controls", ValueError, ["controls={}"], lambda: viz.FramePlayer({}, lambda: PNG))
R("viz.FramePlayer.controls.empty_values", FPc + "controls", ValueError, ["controls['a'] is empty"], lambda: viz.FramePlayer({"a": []}, lambda a: PNG))
R("viz.FramePlayer.render.int", FPc + "render", TypeError, ["render", "callable"], lambda: viz.FramePlayer({"a": [1]}, 3))
R("viz.FramePlayer.render.returns_int", FPc + "render", TypeError, ["render returned int"], lambda: viz.FramePlayer({"a": [1]}, lambda a: 3))
R("viz.FramePlayer.value.unknown_name", FPc + "value", ValueError, ["'b'", "not a control"], lambda: viz.FramePlayer({"a": [1]}, lambda a: PNG, value={"b": 1}))
R("viz.FramePlayer.value.unknown_value", FPc + "value", ValueError, ["value['a']=9"], lambda: viz.FramePlayer({"a": [1]}, lambda a: PNG, value={"a": 9}))
R("viz.FramePlayer.caption.int", FPc + "caption", TypeError, ["caption", "callable"], lambda: viz.FramePlayer({"a": [1]}, lambda a: PNG, caption=3))
R("viz.FramePlayer.labels.unknown", FPc + "labels", ValueError, ["labels", "'b'"], lambda: viz.FramePlayer({"a": [1]}, lambda a: PNG, labels={"b": "B"}))
@functools.cache
def player(): return viz.FramePlayer({"a": [1, 2]}, lambda a: PNG)
for meth in ("index", "frame"):
    P = f"viz.FramePlayer.{meth}:setting"
    R(f"viz.FramePlayer.{meth}.setting.missing", P, ValueError, ["setting names []", "['a']"], lambda meth=meth: getattr(player(), meth)())
    R(f"viz.FramePlayer.{meth}.setting.unknown_value", P, ValueError, ["a=9"], lambda meth=meth: getattr(player(), meth)(a=9))

@functools.cache
def _tiny_mha():
    from transformer_lit.multihead import MultiHeadAttention
    return MultiHeadAttention(8, 2)
DM, MG = VZ + "draw_module:", VZ + "module_graph:"
for key in (DM, MG):
    fn = key[len(VZ):-1]
    R(f"viz.{fn}.module.str", key + "module", TypeError, ["module must be a torch.nn.Module", "str"],
      lambda fn=fn: _closing(lambda: getattr(viz, fn)("m", torch.zeros(1, 2, 8))))
    R(f"viz.{fn}.depth.zero", key + "depth", ValueError, ["depth=0"], lambda fn=fn: _closing(lambda: getattr(viz, fn)(_tiny_mha(), torch.zeros(1, 2, 8), depth=0)))
    R(f"viz.{fn}.lanes.list", key + "lanes", TypeError, ["lanes=[0]", "dict"], lambda fn=fn: _closing(lambda: getattr(viz, fn)(_tiny_mha(), torch.zeros(1, 2, 8), lanes=[0])))
    R(f"viz.{fn}.hide.str", key + "hide", TypeError, ["hide='Dropout'"], lambda fn=fn: _closing(lambda: getattr(viz, fn)(_tiny_mha(), torch.zeros(1, 2, 8), hide="Dropout")))
    R(f"viz.{fn}.example_args.wrong_width", key + "example_args", RuntimeError, ["could not trace MultiHeadAttention"],
      lambda fn=fn: _closing(lambda: getattr(viz, fn)(_tiny_mha(), torch.zeros(1, 2, 4))))
    R(f"viz.{fn}.example_kwargs.unknown", key + "example_kwargs", RuntimeError, ["could not trace MultiHeadAttention"],
      lambda fn=fn: _closing(lambda: getattr(viz, fn)(_tiny_mha(), torch.zeros(1, 2, 8), nope=1)))
R("viz.draw_module.show_shapes.int", DM + "show_shapes", TypeError, ["show_shapes=1", "bool"], lambda: _closing(lambda: viz.draw_module(_tiny_mha(), torch.zeros(1, 2, 8), show_shapes=1)))
R("viz.draw_module.title.int", DM + "title", TypeError, ["title=3", "str"], lambda: _closing(lambda: viz.draw_module(_tiny_mha(), torch.zeros(1, 2, 8), title=3)))
R("viz.draw_module.ax.str", DM + "ax", TypeError, ["ax must be matplotlib Axes", "str"], lambda: _closing(lambda: viz.draw_module(_tiny_mha(), torch.zeros(1, 2, 8), ax="a")))
AE = VZ + "AttentionExplorer:"
def _ae(**kw):
    "A one-text AttentionExplorer (one layer, one head, two tokens) with `kw` replacing its arguments."
    return viz.AttentionExplorer(**({"tokens": [["a", "b"]], "maps": [torch.tensor([[[[1.0, 0.0], [0.5, 0.5]]]])]} | kw))
R("viz.AttentionExplorer.tokens.str", AE + "tokens", TypeError, ["tokens='ab'", "list of token strings per text"], lambda: _ae(tokens="ab"))
R("viz.AttentionExplorer.maps.count", AE + "maps", ValueError, ["len(maps)=0", "len(tokens)=1"], lambda: _ae(maps=[]))
R("viz.AttentionExplorer.maps.negative", AE + "maps", ValueError, ["maps[0]", "[0, 1]", "[-1, 0]"], lambda: _ae(maps=[torch.eye(2)[None, None] - 1]))
R("viz.AttentionExplorer.caption.str", AE + "caption", TypeError, ["caption='c'", "callable"], lambda: _ae(caption="c"))
R("viz.AttentionExplorer.value.head", AE + "value", ValueError, ["value[2]=1", "[0, 0]"], lambda: _ae(value=(0, 0, 1)))
R("viz.AttentionExplorer.scale.zero", AE + "scale", ValueError, ["scale=0", "positive int"], lambda: _ae(scale=0))
R("viz.AttentionExplorer.cell.small", AE + "cell", ValueError, ["cell=2", ">= 4"], lambda: _ae(cell=2))
R("viz.AttentionExplorer.cmap.unknown", AE + "cmap", ValueError, ["cmap='nope'", "colour map"], lambda: _ae(cmap="nope"))
for i, arg in enumerate(("text", "layer", "head")):
    R(f"viz.AttentionExplorer.weights.{arg}.beyond", VZ + f"AttentionExplorer.weights:{arg}", ValueError, [f"{arg}=1", "[0, 0]"],
      lambda i=i: _ae().weights(*[1 if k == i else 0 for k in range(3)]))
R("viz.trace_graph.module.wrong_width", VZ + "trace_graph:module", RuntimeError, ["could not trace MultiHeadAttention"],
  lambda: viz.trace_graph(_tiny_mha(), torch.zeros(1, 2, 4)))

WG = "widgets."
def _widgets():
    from transformer_lit import widgets; return widgets
R("widgets.jacobian_curves.temperature.zero", WG + "jacobian_curves:temperature", ValueError, ["temperature=0"],
  lambda: _widgets().jacobian_curves(explorer(), 0, d_ks=(2,)))
R("widgets.jacobian_curves.seed.negative", WG + "jacobian_curves:seed", ValueError, ["seed=-1"], lambda: _widgets().jacobian_curves(explorer(), 1.0, -1, d_ks=(2,)))
R("widgets.jacobian_curves.d_ks.zero", WG + "jacobian_curves:d_ks", ValueError, ["d_k=0"], lambda: _widgets().jacobian_curves(explorer(), d_ks=(0,)))
R("widgets.jacobian_curves.explorer.str", WG + "jacobian_curves:explorer", TypeError, [NAMED("explorer"), "ScalingExplorer", "str"],
  lambda: _widgets().jacobian_curves("e", d_ks=(2,)))
R("widgets.explorer_player.d_ks.above_max", WG + "explorer_player:d_ks", ValueError, ["d_k=32", "max_d_k=16"],
  lambda: _closing(lambda: _widgets().explorer_player(explorer(), d_ks=(32,), scaled=(True,), temperatures=(1.0,))))
R("widgets.explorer_player.temperatures.zero", WG + "explorer_player:temperatures", ValueError, ["temperature=0"],
  lambda: _closing(lambda: _widgets().explorer_player(explorer(), d_ks=(2,), scaled=(True,), temperatures=(0,))))
R("widgets.explorer_player.seed.negative", WG + "explorer_player:seed", ValueError, ["seed=-1"],
  lambda: _closing(lambda: _widgets().explorer_player(explorer(), d_ks=(2,), scaled=(True,), temperatures=(1.0,), seed=-1)))
R("widgets.explorer_player.value.unknown", WG + "explorer_player:value", ValueError, ["value['d_k']=3"],
  lambda: _closing(lambda: _widgets().explorer_player(explorer(), d_ks=(2,), scaled=(True,), temperatures=(1.0,), value={"d_k": 3})))
R("widgets.explorer_player.explorer.str", WG + "explorer_player:explorer", TypeError, [NAMED("explorer"), "ScalingExplorer", "str"],
  lambda: _closing(lambda: _widgets().explorer_player("e", d_ks=(2,), scaled=(True,), temperatures=(1.0,))))
R("widgets.explorer_figure.explorer.str", WG + "explorer_figure:explorer", TypeError, [NAMED("explorer"), "ScalingExplorer", "str"],
  lambda: _closing(lambda: _widgets().explorer_figure("e")))
R("widgets.readout_html.view.str", WG + "readout_html:view", TypeError, [NAMED("view"), "ExplorerView", "str"], lambda: _widgets().readout_html("v"))


# -- chapter 13 (at_scale): the memory demo's sizes, the command line's sample lines, the launcher's world size
AS = "at_scale."
def _as_task():
    tr, va = train.make_task("reverse", 0, 8, n_val=2, block_size=16)
    torch.manual_seed(0)
    return train.make_model(tr, 16, 2, 1, 0.0, 0).eval(), va
for _p in ("n_layers", "d_model", "block_size", "batch_size", "vocab"):
    R(f"at_scale.step_memory.{_p}.zero", AS + f"step_memory:{_p}", ValueError, [f"{_p}=0", "positive int"],
      lambda _p=_p: at_scale.step_memory(**{_p: 0}))
R("at_scale.step_memory.n_heads.float", AS + "step_memory:n_heads", TypeError, ["n_heads=2.5", "positive int"],
  lambda: at_scale.step_memory(n_heads=2.5))
R("at_scale.step_memory.checkpointing.str", AS + "step_memory:checkpointing", TypeError, ["checkpointing='yes'", "bool"],
  lambda: at_scale.step_memory(checkpointing="yes"))
R("at_scale.sample_predictions.model.str", AS + "sample_predictions:model", TypeError, ["model must be a torch.nn.Module", "str"],
  lambda: at_scale.sample_predictions("m", None))
R("at_scale.sample_predictions.data.str", AS + "sample_predictions:data", TypeError, ["data must be a Seq2SeqData or an LMData", "str"],
  lambda: at_scale.sample_predictions(_as_task()[0], "x"))
R("at_scale.sample_predictions.n.zero", AS + "sample_predictions:n", ValueError, ["n=0", "positive int"],
  lambda: at_scale.sample_predictions(*_as_task(), n=0))
R("at_scale.launch.world_size.zero", AS + "launch:world_size", ValueError, ["world_size=0", "positive int"],
  lambda: at_scale.launch(print, 0))

# =====================================================================================================================
# exemptions (filled below)
# =====================================================================================================================
# Whole callables with nothing a user passes, or whose arguments are validated by the entry point that calls them.
NO_ARGS = "takes no arguments (besides self)"
REPR = "nn.Module repr hook called by print(); no arguments"
RECORD = "a NamedTuple/dataclass record the library builds and returns; its fields are not user input"
HARNESS = ("a step of the GPU check (python -m transformer_lit.gpu_check): its arguments are the check's own "
           "devices, case lists and result rows, not user input")
ROWS_OUT = "formats or summarises result rows that a benchmark returned (not user input)"
KEY_MASK = ("the cache protocol's mask, called by MultiHeadAttention right after append with the Lq of the queries "
            "it has checked and its is_causal flag (not user input)")
EXEMPT_CALLABLES: dict = {
    "attention.kv_groups": "shape arithmetic on q, k that check_qkv has already validated: every caller checks first",
    "attention.BackendInfo": RECORD, "attention.Attended": RECORD, "scaling.ExplorerView": RECORD,
    "attention.backend_names": NO_ARGS, "bench.cpu_name": NO_ARGS,
    "norm.LayerNorm.extra_repr": REPR, "norm.RMSNorm.extra_repr": REPR, "norm.Residual.extra_repr": REPR,
    "ffn.FeedForward.extra_repr": REPR, "positional.RotaryEmbedding.extra_repr": REPR, "model.TokenEmbedding.extra_repr": REPR,
    "decoding.KVCache": NO_ARGS, "decoding.KVCache.nbytes": NO_ARGS, "decoding.CrossKVCache": NO_ARGS,
    "decoding.CrossKVCache.nbytes": NO_ARGS, "decoding.DecoderCache.nbytes": NO_ARGS,
    "fast_decoding.StaticKVCache.nbytes": NO_ARGS, "fast_decoding.StaticCache.nbytes": NO_ARGS,
    "decoding.KVCache.key_mask": KEY_MASK, "fast_decoding.StaticKVCache.key_mask": KEY_MASK, "decoding.CrossKVCache.key_mask": KEY_MASK,
    "decoding.CrossKVCache.append": ("the cache protocol's store, called by MultiHeadAttention with the memory's keys and values it has "
                                     "just projected from a checked key (not user input)"),
    "train.translate_vocab": NO_ARGS, "train.Seq2SeqData.eval_indices": NO_ARGS, "train.LMData.eval_indices": NO_ARGS,
    "train.world": NO_ARGS,
    "train.step_seed": "hashes its four arguments as text: any values give a valid seed (nothing to reject)", "flash_triton.interpreter_loop_error": NO_ARGS, "flash_triton.interpreting": NO_ARGS,
    "gpu_check.versions": NO_ARGS, "viz.FramePlayer.html": NO_ARGS, "viz.AttentionExplorer.html": NO_ARGS,
    "viz.GraphNode": RECORD, "viz.ModuleGraph": RECORD,
    "viz.ModuleGraph.node": "looks up a node by id in a graph that module_graph built; an unknown id raises KeyError listing the ids",
    "viz.ModuleGraph.by_label": "filters the nodes of a graph module_graph built by label; any value matches or not", "widgets.ExplorerUI.view": NO_ARGS,
    "at_scale.peak_live_bytes": "calls fn() under the profiler: any callable (a non-callable fails when called, naming it)",
    "at_scale.train_job": "a job run by launch(): its spec dict is written by the chapter and tests/train_workers.py",
    "at_scale.main": "command line: argparse validates argv and exits with a usage message",
    "exercises.expect_close": "an exercise check's assertion: it raises AssertionError by design, naming what it expected; called by the course's check cells",
    "exercises.check_exercise": "runs a chapter's check cell on the learner's function: any error the check raises is the message the learner should see",
    "exercises.expect_equal": "an exercise check's assertion: it raises ExerciseFailed by design, naming what it expected",
    "exercises.as_answer": "reads a learner's answer for a check: anything it cannot read is an ExerciseFailed naming what was expected",
    "exercises.rounding_allowance": "a check's tolerance from the answer's dtype, called by expect_close with the dtype as_answer read",
    "model.assert_greedy_agrees": "a test of two decoding paths (chapter 09): it raises AssertionError by design, naming the step and the gap",
    "exercises.exercise_passes": "the hidden tests' call of a check on a reference solution: any error the check raises is its verdict",
    "exercises.exercise_fails": "the hidden tests' call of a check on a wrong answer: it raises AssertionError by design when the check accepts it",
    "exercises.ExerciseFailed": "an exception class: its message is the check's verdict, any text",
    "bench.parse_args": "command line: argparse validates argv and exits with a usage message",
    "bench.main": "command line: argparse validates argv and exits with a usage message",
    "checkpoints.hf_shapes": "one step of from_pretrained over rules that weight_rules built from a checked config; not user input",
    "checkpoints.to_ours": "one step of from_pretrained over rules that weight_rules built from a checked config; not user input",
    "checkpoints.to_hf": "one step of save_pretrained over rules that weight_rules built from a checked config; not user input",
    "flash.flash_forward": "the raw tiled kernel behind flash_attention, documented to take inputs checked and expanded by check_flash_inputs (rows on flash_attention)",
    "flash.flash_backward": "the raw tiled backward behind flash_attention; its inputs are what flash_forward returned",
    "flash.FlashAttentionFunction": "autograd.Function plumbing; flash_attention validates before FlashAttentionFunction.apply",
    "flash.FlashAttentionFunction.forward": "autograd.Function plumbing called by apply after flash_attention validated",
    "flash.FlashAttentionFunction.backward": "autograd.Function plumbing called by autograd",
    "flash.flash_supports": "a registry predicate returning a bool for choose_backend; attend validates the inputs (rows on attend)",
    "flash_triton.triton_flash_forward": "the raw Triton launch behind triton_flash_attention, which runs check_triton_inputs first (rows there)",
    "flash_triton.triton_flash_backward": "the raw Triton backward launch; its inputs are what the forward saved",
    "flash_triton.TritonFlashAttentionFunction": "autograd.Function plumbing; triton_flash_attention validates first",
    "flash_triton.TritonFlashAttentionFunction.forward": "autograd.Function plumbing",
    "flash_triton.TritonFlashAttentionFunction.backward": "autograd.Function plumbing",
    "flash_triton.triton_supports": "a registry predicate returning a bool; attend validates the inputs",
    "flash_triton.triton_prefer": "a registry predicate returning a bool; attend validates the inputs",
    "flash_triton.triton_status": "reports (ok, reason) for a device: it is the check, returning a reason instead of raising",
    "flash_triton.reference_attention": "the test oracle (upcast math attention) that the kernels are compared with; it runs on trusted inputs",
    "flash_triton.compare_with_reference": "the test oracle's comparison (errors against reference_attention with a bound); the kernels it calls validate q, k, v",
    **{f"gpu_check.{n}": HARNESS for n in ("correctness_cases", "check_correctness", "sdpa_default_kernel")},
    **{f"gpu_check.{n}": ROWS_OUT for n in ("triton_wins", "goals", "report_text", "compile_table")},
    "gpu_check.PhaseTimeout": "an exception class the check's own alarm raises inside a phase; it takes no user input",
    "gpu_check.check_backends": "names the backends the check times on a device; its one argument is a device string that torch checks",
    "gpu_check.main": "command line: argparse validates argv and exits with a usage message",
    "gpu_check.hopper_cases": "its one argument is a flag (also list the tuning candidates)",
    "bench.attention_columns": ROWS_OUT, "bench.torch_compile_table": ROWS_OUT,
    "bench.peer_table": "formats the result rows that bench_peer returned (not user input)",
    "bench.ratio_reading": "names what the range of a measured ratio supports; its two numbers come from a benchmark's rows (not user input)",
    "bench.bench_backends": "lists the backends available on a device; its one argument is a device string that torch checks",
    "bench.available_bytes": "reads free memory of a device; its one argument is a device string that torch checks",
    "bench.markdown_table": "formats the result rows that bench_attention returned (not user input)",
    "bench.mha_table": "formats the result rows that bench_mha returned (not user input)",
    "bench.gqa_table": "formats the result rows that bench_gqa returned (not user input)",
    "bench.plot_bench": "plots the result rows of bench_attention; title and path go to matplotlib",
    "viz.to_numpy": "converts anything array-like as numpy.asarray does (its errors are numpy's); no rule of its own",
    "widgets.ExplorerPlot": "drawing helper built by explorer_figure on matplotlib axes it created itself",
    "widgets.ExplorerPlot.show": "redraws ExplorerPlot with an ExplorerView and curves that ScalingExplorer computed",
    "widgets.ExplorerUI": "ipywidgets UI: sliders limit every value to the explorer's grid (d_k snaps to the nearest step); its numbers go through ScalingExplorer (rows there)",
    "widgets.ExplorerUI.update": "ipywidgets observer callback (change is the widget event)",
}

# Single parameters, each with its reason.
FLAG = "a bool flag: any truthy value means True, as in torch and Python"
DEVICE = "a device, handed to torch, which raises its own error naming the device string"
DTYPE_T = "a dtype handed to torch's .to(), which raises its own TypeError for a non-dtype"
PASS = "passed through unchanged to the wrapped callable, which validates it"
MPL = "passed to matplotlib, which validates its own arguments"
EXEMPT_PARAMS: dict = {
    ("long_context.loss_by_position", "model"): "any language model (ids (B, T) -> logits (B, T, V)); it is called at once and its own checks name a bad input",
    ("at_scale.sample_predictions", "device"): DEVICE,
    ("at_scale.sample_predictions", "seed"): "seeds a torch.Generator for LM sampling (any int; unused for seq2seq data)",
    ("at_scale.launch", "fn"): "must be importable by name in the spawned processes; tested with real processes in tests/test_train.py",
    ("at_scale.launch", "args"): "passed as they are to fn on every rank",
    ("at_scale.launch", "backend"): "torch.distributed's backend name; init_process_group names an unknown one",
    ("at_scale.launch", "timeout"): "seconds to wait; a TimeoutError names the ranks still running",
    ("bench.decode_step", "model"): "any callable model; it is called at once with idx and cache (rows on DecoderOnlyLM.forward)",
    ("bench.decode_step", "idx"): "passed to the model, whose token check names it (rows on DecoderOnlyLM.forward)",
    ("attention.causal_mask", "device"): DEVICE,
    ("attention.scaled_dot_product_attention", "return_weights"): FLAG,
    **{("attention.choose_backend", p): "a pure dispatch function: the chosen backend validates q, k, v, mask, is_causal (rows on attend)"
       for p in ("q", "k", "v", "mask", "is_causal")},
    ("scaling.dot_product_variance", "scaled"): FLAG, ("scaling.ScalingExplorer.scores", "scaled"): FLAG,
    ("scaling.ScalingExplorer.__call__", "scaled"): FLAG, ("scaling.ScalingExplorer.curve", "scaled"): FLAG,
    ("norm.LayerNorm", "bias"): FLAG, ("ffn.FeedForward", "bias"): FLAG, ("ffn.SwiGLU", "bias"): FLAG,
    ("ffn.ffn_param_count", "gated"): FLAG, ("ffn.ffn_param_count", "bias"): FLAG, ("ffn.make_ffn", "bias"): FLAG,
    ("norm.Residual.forward", "args"): PASS, ("norm.Residual.forward", "kwargs"): PASS,
    ("positional.sinusoidal_encoding", "device"): DEVICE, ("positional.RotaryEmbedding", "interleaved"): FLAG,
    ("positional.RotaryEmbedding.rows", "dtype"): DTYPE_T, ("positional.RotaryEmbedding.rows", "device"): DEVICE,
    ("positional.RotaryEmbedding.rows", "seq_len"): "selects the dynamic-scaling frequencies; rope_inv_freq checks it (row positional.rope_inv_freq.seq_len.zero)",
    ("positional.RotaryEmbedding.tables", "dtype"): DTYPE_T, ("positional.RotaryEmbedding.tables", "device"): DEVICE,
    ("positional.alibi_slopes", "dtype"): DTYPE_T, ("positional.alibi_slopes", "device"): DEVICE,
    ("positional.alibi_bias", "causal"): FLAG, ("positional.alibi_bias", "device"): DEVICE,
    ("multihead.attention_cost", "bias"): FLAG, ("multihead.attention_cost", "qkv_bias"): FLAG + " (None follows bias)",
    ("multihead.MultiHeadAttention", "bias"): FLAG, ("blocks.make_norm", "bias"): FLAG,
    ("blocks.EncoderBlock", "bias"): FLAG, ("blocks.DecoderBlock", "bias"): FLAG, ("blocks.DecoderOnlyBlock", "bias"): FLAG,
    ("model.TokenEmbedding", "scale"): FLAG,
    ("decoding.lm_generate", "greedy"): FLAG, ("decoding.lm_generate", "use_cache"): FLAG,
    ("decoding.seq2seq_generate", "greedy"): FLAG, ("decoding.seq2seq_generate", "use_cache"): FLAG,
    ("train.evaluate_loss", "device"): DEVICE, ("train.greedy_translate", "device"): DEVICE,
    ("train.match_flags", "device"): DEVICE, ("train.exact_match", "device"): DEVICE,
    ("train.save_checkpoint", "path"): "a filesystem path: the OS error (IsADirectoryError, PermissionError) names it",
    ("checkpoints.from_pretrained", "device"): DEVICE,
    ("flash.peak_memory", "args"): PASS, ("flash.peak_memory", "kwargs"): PASS, ("flash.peak_memory", "device"): DEVICE,
    ("flash_triton.block_config", "is_causal"): FLAG, ("flash_triton.block_config", "interpret"): FLAG + " (None asks the environment)",
    ("flash_triton.triton_flash_attention", "is_causal"): FLAG, ("flash_triton.tile_phases", "is_causal"): FLAG,
    ("flash_triton.triton_backend", "is_causal"): FLAG,
    ("bench.time_ms", "device"): DEVICE, ("bench.math_bytes", "backward"): FLAG,
    ("bench.bench_attention", "device"): DEVICE, ("bench.bench_attention", "causal"): FLAG,
    ("bench.bench_attention", "backward"): FLAG, ("bench.bench_attention", "progress"): FLAG,
    ("bench.bench_mha", "device"): DEVICE, ("bench.lm_inputs", "device"): DEVICE,
    ("bench.bench_peer", "device"): DEVICE,    ("bench.bench_compile", "device"): DEVICE, ("bench.bench_compile", "fullgraph"): FLAG, ("bench.bench_compile", "cold"): FLAG,
    ("fast_decoding.StaticKVCache", "device"): DEVICE, ("fast_decoding.StaticCache", "device"): DEVICE,
    ("fast_decoding.new_static_cache", "device"): DEVICE,
    ("gpu_check.tune", "device"): DEVICE, ("gpu_check.benchmark_kernels", "device"): DEVICE,
    ("gpu_check.compile_kernel", "is_causal"): FLAG, ("gpu_check.run_check", "dry_run"): FLAG, ("gpu_check.run_check", "tune_tiles"): FLAG, ("bench.bench_mha", "causal"): FLAG, ("bench.bench_gqa", "device"): DEVICE,
    **{("viz.attention_heatmap", p): MPL for p in ("ax", "title", "annotate", "vmin", "vmax", "cmap", "colorbar")},
    **{("viz.heatmap_grid", p): MPL for p in ("size", "suptitle", "shared_scale", "annotate", "cmap")},
    ("viz.trace_graph", "args"): PASS, ("viz.trace_graph", "kwargs"): PASS,
    ("viz.FramePlayer", "width"): "a CSS width written into the HTML as given", ("viz.FramePlayer", "dpi"): MPL,
    ("viz.FramePlayer", "colors"): "the PNG palette size, handed to Pillow's quantize, which validates it",
    ("widgets.explorer_figure", "dpi"): MPL, ("widgets.explorer_player", "dpi"): MPL,
    ("flash.flash_attention_io", "is_causal"): FLAG, ("flash.attention_flops", "is_causal"): FLAG,
    ("train.train", "resume"): FLAG + " (resume only if the checkpoint file exists, as documented)",
    ("train.save_checkpoint", "history"): "a free-form record (lists of numbers) saved as given and returned by load_checkpoint",
    ("checks.stop_setup", "default_pad"): "the caller's own fallback pad id (a model's config.pad_id or 0), not user input",
    ("widgets.explorer_player", "scaled"): "the grid of the scaled checkbox: a tuple of bools, each a flag",
}

# =====================================================================================================================
# legal edge cases that must work (an empty batch returns an empty result of the right shape, like torch)
# =====================================================================================================================
def shape_is(*shape):
    def check(out):
        out = out[0] if isinstance(out, tuple) else out
        assert tuple(out.shape) == shape, f"shape {tuple(out.shape)}, expected {shape}"
        assert not out.is_floating_point() or bool(torch.isfinite(out).all()), "non-finite values"
    return check

for fname, fn in (("scaled_dot_product_attention", attention.scaled_dot_product_attention), ("torch_sdpa", attention.torch_sdpa),
                  ("flash_attention", flash.flash_attention)):
    mod = "flash" if fname == "flash_attention" else "attention"
    L(f"{mod}.{fname}.B0", f"{mod}.{fname}", lambda fn=fn: fn(*QKV(B=0)), shape_is(0, 2, 3, 4))
    L(f"{mod}.{fname}.Lq1", f"{mod}.{fname}", lambda fn=fn: fn(T(1, 2, 1, 4), *QKV(L=5)[1:]), shape_is(1, 2, 1, 4))
    L(f"{mod}.{fname}.Lk1", f"{mod}.{fname}", lambda fn=fn: fn(QKV()[0], *QKV(L=1)[1:]), shape_is(1, 2, 3, 4))
    L(f"{mod}.{fname}.gqa_G1", f"{mod}.{fname}", lambda fn=fn: fn(*QKV(H=4, G=1)), shape_is(1, 4, 3, 4))
    L(f"{mod}.{fname}.float64", f"{mod}.{fname}", lambda fn=fn: fn(*QKV(dtype=torch.float64)), shape_is(1, 2, 3, 4))
L("attention.attend.B0", "attention.attend", lambda: attention.attend(*QKV(B=0)).out, shape_is(0, 2, 3, 4))
L("attention.scaled_dot_product_attention.B0_causal_weights", "attention.scaled_dot_product_attention",
  lambda: attention.scaled_dot_product_attention(*QKV(B=0), is_causal=True, return_weights=True)[1], shape_is(0, 2, 3, 3))
L("attention.causal_mask.empty", "attention.causal_mask", lambda: attention.causal_mask(0, 0), shape_is(0, 0))
L("norm.LayerNorm.B0", "norm.LayerNorm", lambda: norm.LayerNorm(8)(X(B=0)), shape_is(0, 3, 8))
L("norm.RMSNorm.B0", "norm.RMSNorm", lambda: norm.RMSNorm(8)(X(B=0)), shape_is(0, 3, 8))
L("norm.layer_norm.float64", "norm.layer_norm", lambda: norm.layer_norm(X(dtype=torch.float64), torch.ones(8, dtype=torch.float64)), shape_is(1, 3, 8))
L("ffn.FeedForward.B0", "ffn.FeedForward", lambda: ffn.FeedForward(8, 16)(X(B=0)), shape_is(0, 3, 8))
L("ffn.SwiGLU.B0", "ffn.SwiGLU", lambda: ffn.SwiGLU(8, 16)(X(B=0)), shape_is(0, 3, 8))
L("ffn.FeedForward.float64", "ffn.FeedForward", lambda: ffn.FeedForward(8, 16).double()(X(dtype=torch.float64)), shape_is(1, 3, 8))
L("multihead.MultiHeadAttention.B0", "multihead.MultiHeadAttention", lambda: mha()(X(B=0)), shape_is(0, 3, 8))
L("multihead.MultiHeadAttention.B0_sdpa", "multihead.MultiHeadAttention", lambda: mha_sdpa()(X(B=0), is_causal=True), shape_is(0, 3, 8))
L("multihead.MultiHeadAttention.Lq1_Lk1", "multihead.MultiHeadAttention", lambda: mha()(X(Tn=1), X(Tn=1)), shape_is(1, 1, 8))
L("multihead.MultiHeadAttention.gqa_G1", "multihead.MultiHeadAttention",
  lambda: multihead.MultiHeadAttention(8, 4, n_kv_heads=1)(X(), is_causal=True), shape_is(1, 3, 8))
L("multihead.MultiHeadAttention.float64", "multihead.MultiHeadAttention",
  lambda: multihead.MultiHeadAttention(8, 2).double()(X(dtype=torch.float64)), shape_is(1, 3, 8))
L("multihead.MultiHeadAttention.need_weights_B0", "multihead.MultiHeadAttention",
  lambda: mha()(X(B=0), need_weights=True)[1], shape_is(0, 2, 3, 3))
L("positional.RotaryEmbedding.far_position_bounded_cache", "positional.RotaryEmbedding",
  lambda: (lambda r: (r(T(1, 2, 3, 4), torch.tensor([0, 2 ** 20, 2 ** 20 + 1])),
                      [n for (n, *_), _ in r._cache.items()] and max(n for (n, *_) in r._cache) <= 64 or None)[0])(
      positional.RotaryEmbedding(4, max_cached=64)), shape_is(1, 2, 3, 4))
L("positional.RotaryEmbedding.B0", "positional.RotaryEmbedding", lambda: rope()(T(0, 2, 3, 4)), shape_is(0, 2, 3, 4))
L("masks.padding_mask.B0", "masks.padding_mask", lambda: masks.padding_mask([], 3), shape_is(0, 3))
L("masks.padding_mask.empty", "masks.padding_mask", lambda: masks.padding_mask([]), shape_is(0, 0))
for cname, make, extra in (("EncoderBlock", enc, ()), ("DecoderOnlyBlock", dob, ()), ("DecoderBlock", dec, (X(B=0),))):
    L(f"blocks.{cname}.B0", f"blocks.{cname}", lambda make=make, extra=extra: make()(X(B=0), *extra), shape_is(0, 3, 8))
    L(f"blocks.{cname}.T1", f"blocks.{cname}", lambda make=make, extra=extra: make()(X(Tn=1), *[X(Tn=1) for _ in extra]), shape_is(1, 1, 8))
L("blocks.DecoderOnlyBlock.float64", "blocks.DecoderOnlyBlock",
  lambda: blocks.DecoderOnlyBlock(8, 2, 16).double()(X(dtype=torch.float64), is_causal=True), shape_is(1, 3, 8))
L("checks.check_tokens.B0", "checks.check_tokens", lambda: checks.check_tokens(torch.zeros(0, 3, dtype=torch.long), V) or torch.zeros(0, 3), shape_is(0, 3))
L("checks.check_tokens.int32", "checks.check_tokens", lambda: checks.check_tokens(ids(dtype=torch.int32), V) or torch.zeros(1, 3), shape_is(1, 3))
L("model.DecoderOnlyLM.B0", "model.DecoderOnlyLM", lambda: lm()(torch.zeros(0, 3, dtype=torch.long)), shape_is(0, 3, V))
L("model.DecoderOnlyLM.T1", "model.DecoderOnlyLM", lambda: lm()(ids(Tn=1)), shape_is(1, 1, V))
L("model.DecoderOnlyLM.some_ignored_targets", "model.DecoderOnlyLM", lambda: lm()(ids(), torch.tensor([[1, -100, 2]]))[1], shape_is())
L("model.DecoderOnlyLM.float64", "model.DecoderOnlyLM", lambda: model.DecoderOnlyLM(cfg(positional="rope")).double()(ids()), shape_is(1, 3, V))
L("model.DecoderOnlyLM.gqa_G1", "model.DecoderOnlyLM", lambda: model.DecoderOnlyLM(cfg(n_kv_heads=1)).eval()(ids()), shape_is(1, 3, V))
L("model.DecoderOnlyLM.generate_B0", "model.DecoderOnlyLM.generate", lambda: fast_generate(lm(), torch.zeros(0, 2, dtype=torch.long), 2), shape_is(0, 4))
L("model.DecoderOnlyLM.generate_zero_new", "model.DecoderOnlyLM.generate", lambda: fast_generate(lm(), ids(), 0), shape_is(1, 3))
L("model.DecoderOnlyLM.generate_static_B0", "model.DecoderOnlyLM.generate",
  lambda: fast_generate(lm(), torch.zeros(0, 2, dtype=torch.long), 2, static_cache=True), shape_is(0, 4))
L("model.DecoderOnlyLM.generate_static", "model.DecoderOnlyLM.generate", lambda: fast_generate(lm(), ids(), 2, static_cache=True), shape_is(1, 5))
L("fast_decoding.StaticKVCache.B0", "fast_decoding.StaticKVCache",
  lambda: fast_decoding.StaticKVCache(0, 2, 4, 4).append(T(0, 2, 1, 4), T(0, 2, 1, 4))[0], shape_is(0, 2, 4, 4))
L("positional.sinusoidal_at.no_positions", "positional.sinusoidal_at", lambda: positional.sinusoidal_at(torch.arange(0), 8), shape_is(0, 8))
L("bench.lm_inputs.B0", "bench.lm_inputs", lambda: bench.lm_inputs(cfg(), 0, 3)[0], shape_is(0, 3))
L("model.Transformer.B0", "model.Transformer", lambda: s2s()(torch.zeros(0, 3, dtype=torch.long), torch.zeros(0, 2, dtype=torch.long)), shape_is(0, 2, V))
L("model.Transformer.T1", "model.Transformer", lambda: s2s()(ids(Tn=1), ids(Tn=1)), shape_is(1, 1, V))
L("decoding.sample_next.B0", "decoding.sample_next", lambda: decoding.sample_next(torch.zeros(0, 5)), shape_is(0))
L("decoding.sample_next.greedy_B0", "decoding.sample_next", lambda: decoding.sample_next(torch.zeros(0, 5), greedy=True), shape_is(0))
L("decoding.sample_next.one_finite", "decoding.sample_next", lambda: decoding.sample_next(torch.tensor([[-INF, 0.0, -INF]])), shape_is(1))
L("model.lm_loss.some_ignored", "model.lm_loss", lambda: model.lm_loss(T(1, 3, V), torch.tensor([[1, -100, 2]])), shape_is())
L("model.lm_loss.float64", "model.lm_loss", lambda: model.lm_loss(T(1, 3, V, dtype=torch.float64), torch.tensor([[1, 2, 3]])), shape_is())

# -- decoding from a model whose logits are NaN (a diverged model): a clear error, never token 0 or a multinomial crash
def nan_model(cls):
    "A tiny model of class `cls` whose token embedding is NaN, so every logit is NaN."
    torch.manual_seed(0)
    m = cls(cfg()).eval()
    with torch.no_grad(): m.lm_head.weight.fill_(NAN)
    return m
R("model.DecoderOnlyLM.generate.greedy.nan_logits", "decoding.lm_generate:greedy", ValueError, ["logits row 0", "NaN"],
  lambda: fast_generate(nan_model(model.DecoderOnlyLM), ids(), 2, greedy=True))
R("model.DecoderOnlyLM.generate.temperature.nan_logits", "decoding.lm_generate:temperature", ValueError, ["logits row 0", "NaN"],
  lambda: fast_generate(nan_model(model.DecoderOnlyLM), ids(), 2, temperature=0.7))
R("model.DecoderOnlyLM.beam_search.idx.nan_logits", "decoding.lm_beam_search:idx", ValueError, ["row 0", "NaN"],
  lambda: lm_beam_search(nan_model(model.DecoderOnlyLM), ids(), 2, 2))
R("model.Transformer.generate.greedy.nan_logits", "decoding.seq2seq_generate:greedy", ValueError, ["logits row 0", "NaN"],
  lambda: seq2seq_generate(nan_model(model.Transformer), ids(), 2, 1, greedy=True))
R("model.Transformer.beam_search.src.nan_logits", "decoding.seq2seq_beam_search:src", ValueError, ["row 0", "NaN"],
  lambda: seq2seq_beam_search(nan_model(model.Transformer), ids(), 2, 1, 2))

# -- the models' own plain loops (chapter 09): every argument checked where it enters
for cname, make, first in (("DecoderOnlyLM", lm, "idx"), ("Transformer", s2s, "src")):
    extra = () if cname == "DecoderOnlyLM" else (1,)                        # the encoder-decoder model's bos_id
    K = f"{MO}{cname}.generate:"
    g = lambda *a, make=make, extra=extra, **kw: make().generate(*(a[:2] + extra + a[2:]), **kw)
    R(f"model.{cname}.generate.{first}.float", K + first, TypeError, [f"{first}.dtype=torch.float32"], lambda g=g: g(ids().float(), 2))
    R(f"model.{cname}.generate.max_new_tokens.negative", K + "max_new_tokens", ValueError, ["max_new_tokens=-1"], lambda g=g: g(ids(), -1))
    R(f"model.{cname}.generate.greedy.int", K + "greedy", TypeError, ["greedy=1", "bool"], lambda g=g: g(ids(), 2, greedy=1))
    R(f"model.{cname}.generate.temperature.zero", K + "temperature", ValueError, ["temperature=0"], lambda g=g: g(ids(), 2, temperature=0.0))
    R(f"model.{cname}.generate.top_k.too_large", K + "top_k", ValueError, ["top_k=12"], lambda g=g: g(ids(), 2, top_k=12))
    R(f"model.{cname}.generate.generator.str", K + "generator", TypeError, ["generator", "str"], lambda g=g: g(ids(), 2, generator="g"))
R("model.Transformer.generate.bos_id.too_large_plain", f"{MO}Transformer.generate:bos_id", ValueError, ["bos_id=11"],
  lambda: s2s().generate(ids(), 2, 11))
R("model.Transformer.generate.src_keep.shape_plain", f"{MO}Transformer.generate:src_keep", ValueError, ["src_keep", "(1, 2)"],
  lambda: s2s().generate(ids(), 2, 1, src_keep=torch.ones(1, 2, dtype=torch.bool)))
R("model.DecoderOnlyLM.generate.too_long", f"{MO}DecoderOnlyLM.generate:max_new_tokens", ValueError, ["max_new_tokens=40", "max_len"],
  lambda: lm().generate(ids(), 40))
R("decoding.new_cache.model.str", "decoding.new_cache:model", TypeError, [NAMED("model"), "str"], lambda: decoding.new_cache("m"))
R("fast_decoding.new_static_cache.model.str", "fast_decoding.new_static_cache:model", TypeError, [NAMED("model"), "str"],
  lambda: new_static_cache("m", 4, 1))
R("fast_decoding.new_static_cache.device.int", "fast_decoding.new_static_cache:device", TypeError, ["device"],
  lambda: new_static_cache(lm(), 4, 1, device=3.5))
GD = "decoding.generation_defaults:"
R("decoding.generation_defaults.path.int", GD + "path", TypeError, [NAMED("path"), "int"], lambda: decoding.generation_defaults(3))
R("decoding.generation_defaults.path.empty", GD + "path", FileNotFoundError, ["neither generation_config.json nor config.json", "nothing-here"],
  lambda: decoding.generation_defaults(tmp("nothing-here")))
# -- chapter 11's fast_generate: its own checks, then chapter 10's lm_generate checks the rest (the same rows, through it)
FG = "fast_decoding.fast_generate:"
R("fast_decoding.fast_generate.model.str", FG + "model", TypeError, [NAMED("model"), "DecoderOnlyLM", "str"], lambda: fast_generate("m", ids(), 2))
R("fast_decoding.fast_generate.idx.float", FG + "idx", TypeError, ["idx.dtype=torch.float32"], lambda: fast_generate(lm(), ids().float(), 2))
R("fast_decoding.fast_generate.max_new_tokens.negative", FG + "max_new_tokens", ValueError, ["max_new_tokens=-1"], lambda: fast_generate(lm(), ids(), -1))
for p_, v_, exc_, words_ in (("greedy", 1, TypeError, ["greedy=1"]), ("temperature", 0.0, ValueError, ["temperature=0"]),
                             ("top_k", 12, ValueError, ["top_k=12"]), ("top_p", 1.5, ValueError, ["top_p=1.5"]),
                             ("min_p", -0.5, ValueError, ["min_p=-0.5"]), ("generator", "g", TypeError, ["generator", "str"]),
                             ("attention_mask", torch.ones(1, 2, dtype=torch.bool), ValueError, ["attention_mask"]),
                             ("eos_ids", [2, 11], ValueError, ["eos_ids=11"]), ("pad_id", 11, ValueError, ["pad_id=11"]),
                             ("repetition_penalty", 0.0, ValueError, ["repetition_penalty=0"]), ("no_repeat_ngram_size", 0, ValueError, ["no_repeat_ngram_size=0"]),
                             ("streamer", "s", TypeError, ["streamer='s'", "callable"]), ("return_scores", "yes", TypeError, ["return_scores='yes'"])):
    R(f"fast_decoding.fast_generate.{p_}.bad", FG + p_, exc_, words_, lambda p_=p_, v_=v_: fast_generate(lm(), ids(), 2, **{p_: v_}))
for fname, cls in (("lm_generate", "DecoderOnlyLM"), ("seq2seq_generate", "Transformer"), ("lm_beam_search", "DecoderOnlyLM"),
                   ("seq2seq_beam_search", "Transformer")):
    R(f"decoding.{fname}.model.str", f"decoding.{fname}:model", TypeError, [NAMED("model"), cls, "str"],
      lambda fname=fname: getattr(decoding, fname)("m", ids(), 2, 1))
