"""The numeric-argument rule of the appendix "Checking the inputs", walked over the whole public API.

The walk reads every public callable of every module's `__all__` (functions, constructors, public methods: the same
list `tests/test_bad_input.py` covers) and finds its numeric parameters: a parameter annotated `int` or `float` (alone
or with None), or whose default is an int or a float (not a bool). Each one is fed

- a string ('7') and True: a `TypeError` whose message names the argument and shows the value;
- NaN and infinity: a `ValueError` for a float argument (a `TypeError` for an int one: they are floats, the wrong kind);
- a numpy scalar of a valid value (np.float32 / np.int64): the same result as the Python number.

Base arguments (tensors, models, data) come from `BUILD`, one small factory per callable that returns
`(callable, {argument: value})`; a numeric parameter's valid value is the factory's, or else its default. A callable
the walk does not build is listed in `EXCLUDED` with the reason; a parameter that cannot be fed the rule in
`EXCLUDED_PARAMS`, with the reason. `test_every_numeric_callable_is_built_or_excluded` fails on a new public callable
with a numeric parameter that is in neither table (and `test_guard_notices_additions` checks that it does).
"""
import importlib, inspect, math, re, sys
from pathlib import Path

import numpy as np, pytest, torch

sys.path.insert(0, str(Path(__file__).parent))
from test_bad_input import MODULES, _methods                       # noqa: E402  the public API, as the bad-input suite reads it

M = {m: importlib.import_module(f"transformer_lit.{m}") for m in MODULES}


def _x(*shape, seed=0): return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))
def _ids(*shape, V=16): return torch.randint(0, V, shape, generator=torch.Generator().manual_seed(0))


def _lm(**kw):
    "A tiny DecoderOnlyLM: V=16, d_model 8, 2 heads, 1 layer, context 16."
    torch.manual_seed(0)
    return M["model"].DecoderOnlyLM(M["model"].TransformerConfig(**{**dict(vocab_size=16, d_model=8, n_heads=2, n_layers=1,
                                                                            d_ff=16, dropout=0.0, max_len=16), **kw})).eval()


def _s2s():
    torch.manual_seed(0)
    return M["model"].Transformer(M["model"].TransformerConfig(vocab_size=16, d_model=8, n_heads=2, n_layers=1, d_ff=16,
                                                               dropout=0.0, max_len=16)).eval()


def _lm_data():
    tr = M["train"]
    return tr.LMData(torch.arange(40) % 7, 8, tr.Vocab("abcdefg", specials=False))


def _s2s_data():
    tr = M["train"]
    return tr.Seq2SeqData(tr.reverse_pairs(6, 1, 4, 5, seed=0), tr.Vocab("abcde"))


Q = _x(1, 2, 4, 8)
G = lambda: torch.Generator().manual_seed(0)
L = _x(2, 6)
_GEN = dict(top_k=4, top_p=0.5, min_p=0.25, eos_ids=3, pad_id=0, generator=None)
_PENALTIES = dict(repetition_penalty=1.5, no_repeat_ngram_size=2)   # the decoder-only calls only

# key -> factory: () -> (callable, base keyword arguments). Every numeric parameter without a usable default gets a value here.
BUILD = {
    # the checks appendix
    "checks.check_int": lambda: (M["checks"].check_int, dict(name="n", value=3)),
    "checks.check_kv_heads": lambda: (M["checks"].check_kv_heads, dict(n_heads=8, n_kv_heads=2)),
    "checks.check_rope_scaling": lambda: (M["checks"].check_rope_scaling, dict(scaling={"rope_type": "linear", "factor": 2.0})),
    "checks.check_tokens": lambda: (M["checks"].check_tokens, dict(idx=_ids(2, 3), vocab_size=16)),
    "checks.check_targets": lambda: (M["checks"].check_targets, dict(targets=_ids(2, 3), shape=(2, 3), vocab_size=16)),
    "checks.check_sampling": lambda: (M["checks"].check_sampling, dict(top_k=2, top_p=0.5, min_p=0.25, vocab_size=16)),
    "checks.stop_setup": lambda: (M["checks"].stop_setup, dict(vocab_size=16, eos_id=2, pad_id=0, default_pad=1)),
    "checks.check_flash_inputs": lambda: (M["checks"].check_flash_inputs, dict(q=Q, k=Q, v=Q, scale=0.5)),
    # chapter 00
    "attention.attention_core": lambda: (M["attention"].attention_core, dict(q=Q, k=Q, v=Q, scale=0.5)),
    "attention.causal_mask": lambda: (M["attention"].causal_mask, dict(q_len=3, k_len=5)),
    "attention.repeat_kv": lambda: (M["attention"].repeat_kv, dict(x=Q, n_rep=2)),
    "attention.scaled_dot_product_attention": lambda: (M["attention"].scaled_dot_product_attention, dict(q=Q, k=Q, v=Q, scale=0.5)),
    "attention.torch_sdpa": lambda: (M["attention"].torch_sdpa, dict(q=Q, k=Q, v=Q, scale=0.5)),
    "attention.choose_backend": lambda: (M["attention"].choose_backend, dict(q=Q, k=Q, v=Q)),
    "attention.attend": lambda: (M["attention"].attend, dict(q=Q, k=Q, v=Q, scale=0.5)),
    # chapter 02
    "scaling.dot_product_variance": lambda: (M["scaling"].dot_product_variance, dict(d_k=4, n_samples=64)),
    "scaling.dot_product_variance_se": lambda: (M["scaling"].dot_product_variance_se, dict(d_k=4, n_samples=64)),
    "scaling.saturation_metrics": lambda: (M["scaling"].saturation_metrics, dict(scores=_x(2, 4))),
    "scaling.ScalingExplorer": lambda: (M["scaling"].ScalingExplorer, dict(n_keys=4, n_queries=8, max_d_k=16)),
    "scaling.ScalingExplorer.draws": lambda: (M["scaling"].ScalingExplorer(4, 8, 16).draws, {}),
    "scaling.ScalingExplorer.scores": lambda: (M["scaling"].ScalingExplorer(4, 8, 16).scores, dict(d_k=4)),
    "scaling.ScalingExplorer.__call__": lambda: (M["scaling"].ScalingExplorer(4, 8, 16).__call__, dict(d_k=4)),
    "scaling.ScalingExplorer.curve": lambda: (M["scaling"].ScalingExplorer(4, 8, 16).curve, dict(d_ks=[2, 4])),
    # chapters 03, 04
    "norm.layer_norm": lambda: (M["norm"].layer_norm, dict(x=_x(2, 4))),
    "norm.rms_norm": lambda: (M["norm"].rms_norm, dict(x=_x(2, 4))),
    "norm.LayerNorm": lambda: (M["norm"].LayerNorm, dict(d=4)),
    "norm.RMSNorm": lambda: (M["norm"].RMSNorm, dict(d=4)),
    "norm.Residual": lambda: (M["norm"].Residual, dict(sublayer=torch.nn.Identity(), d_model=4, eps=0.25)),
    "ffn.FeedForward": lambda: (M["ffn"].FeedForward, dict(d_model=4, d_ff=8)),
    "ffn.swiglu_hidden_dim": lambda: (M["ffn"].swiglu_hidden_dim, dict(d_model=64, multiple_of=16, ffn_dim_multiplier=1.5)),
    "ffn.SwiGLU": lambda: (M["ffn"].SwiGLU, dict(d_model=4, d_ff=8, multiple_of=4)),
    "ffn.ffn_param_count": lambda: (M["ffn"].ffn_param_count, dict(d_model=4, d_ff=8)),
    "ffn.make_ffn": lambda: (M["ffn"].make_ffn, dict(d_model=4, d_ff=8)),
    # chapters 05, 06
    "positional.sinusoidal_frequencies": lambda: (M["positional"].sinusoidal_frequencies, dict(d=8, base=16.0)),
    "positional.sinusoidal_encoding": lambda: (M["positional"].sinusoidal_encoding, dict(n_positions=5, d_model=8, base=16.0)),
    "positional.sinusoidal_at": lambda: (M["positional"].sinusoidal_at, dict(positions=torch.arange(3), d_model=8, base=16.0)),
    "positional.rotation_matrix": lambda: (M["positional"].rotation_matrix, dict(m=2.0, d=4, base=16.0)),
    "positional.SinusoidalPositionalEmbedding": lambda: (M["positional"].SinusoidalPositionalEmbedding, dict(d_model=8, base=16.0)),
    "positional.SinusoidalPositionalEmbedding.forward": lambda: (M["positional"].SinusoidalPositionalEmbedding(8).forward,
                                                                 dict(x=_x(1, 3, 8), offset=2)),
    "positional.LearnedPositionalEmbedding": lambda: (M["positional"].LearnedPositionalEmbedding, dict(max_len=8, d_model=4, init_std=0.5)),
    "positional.LearnedPositionalEmbedding.forward": lambda: (_learned().forward, dict(x=_x(1, 3, 4), offset=2)),
    "positional.rope_inv_freq": lambda: (M["positional"].rope_inv_freq, dict(head_dim=8, base=16.0, seq_len=4)),
    "positional.RotaryEmbedding": lambda: (M["positional"].RotaryEmbedding, dict(head_dim=8, base=16.0, max_cached=8)),
    "positional.RotaryEmbedding.rows": lambda: (M["positional"].RotaryEmbedding(8).rows, dict(positions=torch.arange(3), seq_len=4)),
    "positional.RotaryEmbedding.tables": lambda: (M["positional"].RotaryEmbedding(8).tables, dict(length=4)),
    "positional.RotaryEmbedding.forward": lambda: (M["positional"].RotaryEmbedding(8).forward, dict(x=_x(1, 2, 5, 8), offset=2)),
    "positional.alibi_slopes": lambda: (M["positional"].alibi_slopes, dict(n_heads=4)),
    "positional.alibi_bias": lambda: (M["positional"].alibi_bias, dict(n_heads=4, q_len=3, k_len=5)),
    "positional.alibi_bias_at": lambda: (M["positional"].alibi_bias_at, dict(n_heads=4, q_positions=torch.arange(3), k_len=5)),
    "long_context.with_rope_scaling": lambda: (M["long_context"].with_rope_scaling, dict(model=_lm(positional="rope"), scaling=None, max_len=32)),
    "long_context.loss_by_position": lambda: (M["long_context"].loss_by_position, dict(model=_lm(), ids=_ids(40), T=4, batch_size=2)),
    # chapters 07, 01, 08
    "masks.padding_mask": lambda: (M["masks"].padding_mask, dict(lengths=[1, 3], max_len=4)),
    "masks.from_torch_masks": lambda: (M["masks"].from_torch_masks, dict(attn_mask=torch.zeros(4, 3, 3, dtype=torch.bool), n_heads=2)),
    "multihead.split_heads": lambda: (M["multihead"].split_heads, dict(x=_x(1, 3, 8), n_heads=2)),
    "multihead.MultiHeadAttention": lambda: (M["multihead"].MultiHeadAttention, dict(d_model=8, n_heads=2, kdim=4, vdim=4, n_kv_heads=1)),
    "multihead.attention_cost": lambda: (M["multihead"].attention_cost, dict(d_model=8, n_heads=2, q_len=3, k_len=5, n_kv_heads=1)),
    "multihead.kv_cache_bytes": lambda: (M["multihead"].kv_cache_bytes, dict(n_kv_heads=2, d_head=4, seq_len=8)),
    "blocks.make_norm": lambda: (M["blocks"].make_norm, dict(norm="layer", d_model=4, eps=0.25)),
    **{f"blocks.{b}": (lambda b=b: (getattr(M["blocks"], b), dict(d_model=8, n_heads=2, d_ff=16, layer_norm_eps=0.25, n_kv_heads=1)))
       for b in ("EncoderBlock", "DecoderBlock", "DecoderOnlyBlock")},
    # chapter 09
    "model.TransformerConfig": lambda: (M["model"].TransformerConfig, dict(vocab_size=16, d_model=8, n_heads=2, n_layers=1, d_ff=16,
                                        max_len=16, n_kv_heads=1, n_encoder_layers=1, n_decoder_layers=1, src_vocab_size=12,
                                        layer_norm_eps=0.25, logit_scale=0.5, pad_id=0)),
    "model.TokenEmbedding": lambda: (M["model"].TokenEmbedding, dict(vocab_size=16, d_model=4)),
    "model.Positions.check_length": lambda: (_lm().pos.check_length, dict(T=3, past=2)),
    "model.Positions.forward": lambda: (_lm(positional="sinusoidal").pos.forward, dict(x=_x(1, 3, 8), offset=2)),
    "model.Positions.bias": lambda: (_lm(positional="alibi").pos.bias, dict(q_len=3, k_len=5, x=_x(1, 3, 8))),
    "model.Positions.bias_at": lambda: (_lm(positional="alibi").pos.bias_at, dict(q_positions=torch.arange(3), k_len=5, x=_x(1, 3, 8))),
    "model.DecoderOnlyLM.generate": lambda: (_lm().generate, dict(idx=_ids(1, 3), max_new_tokens=2, top_k=4, generator=G())),
    "model.Transformer.generate": lambda: (_s2s().generate, dict(src=_ids(1, 3), max_new_tokens=2, bos_id=1, top_k=4, generator=G())),
    "model.unembed": lambda: (M["model"].unembed, dict(lm_head=_lm().lm_head, h=_x(1, 2, 8), scale=0.5)),
    "model.assert_greedy_agrees": lambda: (M["model"].assert_greedy_agrees, _greedy_pair()),
    # chapters 10, 11
    "decoding.DecoderCache": lambda: (M["decoding"].DecoderCache, dict(n_layers=2)),
    "decoding.temperature_filter": lambda: (M["decoding"].temperature_filter, dict(logits=L, temperature=0.5)),
    "decoding.top_k_filter": lambda: (M["decoding"].top_k_filter, dict(logits=L, k=2)),
    "decoding.top_p_filter": lambda: (M["decoding"].top_p_filter, dict(logits=L, p=0.5)),
    "decoding.min_p_filter": lambda: (M["decoding"].min_p_filter, dict(logits=L, min_p=0.25)),
    "decoding.filter_logits": lambda: (M["decoding"].filter_logits, dict(logits=L, top_k=4, top_p=0.5, min_p=0.25)),
    "decoding.sample_next": lambda: (M["decoding"].sample_next, dict(logits=L, top_k=4, top_p=0.5, min_p=0.25, generator=G())),
    "decoding.repetition_penalty_filter": lambda: (M["decoding"].repetition_penalty_filter, dict(logits=L, ids=_ids(2, 3, V=6), penalty=1.5)),
    "decoding.no_repeat_ngram_filter": lambda: (M["decoding"].no_repeat_ngram_filter, dict(logits=L, ids=_ids(2, 4, V=6), n=2)),
    "decoding.lm_generate": lambda: (M["decoding"].lm_generate, dict(model=_lm(), idx=_ids(1, 3), max_new_tokens=2, **_GEN, **_PENALTIES)),
    "decoding.seq2seq_generate": lambda: (M["decoding"].seq2seq_generate, dict(model=_s2s(), src=_ids(1, 3), max_new_tokens=2, bos_id=1,
                                                                              **_GEN)),
    "decoding.gnmt_penalty": lambda: (M["decoding"].gnmt_penalty, dict(length=5)),
    "decoding.beam_search": lambda: (M["decoding"].beam_search, dict(step=_beam_step, prefix=_ids(1, 2), max_new_tokens=2, beam_size=2)),
    "decoding.lm_beam_search": lambda: (M["decoding"].lm_beam_search, dict(model=_lm(), idx=_ids(1, 3), max_new_tokens=2, beam_size=2, pad_id=0,
                                                                           repetition_penalty=1.5, no_repeat_ngram_size=2)),
    "decoding.seq2seq_beam_search": lambda: (M["decoding"].seq2seq_beam_search, dict(model=_s2s(), src=_ids(1, 3), max_new_tokens=2, bos_id=1,
                                                                                    beam_size=2, pad_id=0)),
    "fast_decoding.StaticKVCache": lambda: (M["fast_decoding"].StaticKVCache, dict(batch=1, n_kv_heads=2, max_len=8, head_dim=4)),
    "fast_decoding.StaticKVCache.key_mask": lambda: (M["fast_decoding"].StaticKVCache(1, 2, 8, 4).key_mask, dict(q_len=1, is_causal=True)),
    "fast_decoding.StaticCache": lambda: (M["fast_decoding"].StaticCache, dict(n_layers=1, batch=1, n_kv_heads=2, max_len=8, head_dim=4)),
    "fast_decoding.StaticCache.rewind": lambda: (M["fast_decoding"].StaticCache(1, 1, 2, 8, 4).rewind, {}),
    "fast_decoding.new_static_cache": lambda: (M["fast_decoding"].new_static_cache, dict(model=_lm(), max_len=8, batch=1)),
    "fast_decoding.fast_generate": lambda: (M["fast_decoding"].fast_generate, dict(model=_lm(), idx=_ids(1, 3), max_new_tokens=2, **_GEN,
                                                                                  **_PENALTIES)),
    # chapter 12
    "train.reverse_pairs": lambda: (M["train"].reverse_pairs, dict(n=3, min_len=1, max_len=4, n_symbols=5)),
    "train.number_to_words": lambda: (M["train"].number_to_words, dict(n=42)),
    "train.split_numbers": lambda: (M["train"].split_numbers, dict(n_train=4, n_test=2, max_number=99)),
    "train.numbers_by_digits": lambda: (M["train"].numbers_by_digits, dict(per_digits=2)),
    "train.LMData": lambda: (M["train"].LMData, dict(ids=torch.arange(40) % 7, block_size=8, vocab=M["train"].Vocab("abcdefg", specials=False))),
    "train.char_lm_data": lambda: (M["train"].char_lm_data, dict(text="abcdefgh" * 8, block_size=4, val_fraction=0.25)),
    "train.noam_lr": lambda: (M["train"].noam_lr, dict(step=3, d_model=16, warmup=4, factor=0.5)),
    "train.TrainConfig": lambda: (M["train"].TrainConfig, {}),
    "train.batch_loss": lambda: (M["train"].batch_loss, dict(model=_lm(vocab_size=7, max_len=8), batch=_lm_data().batch(torch.arange(2)),
                                                             label_smoothing=0.25)),
    "train.evaluate_loss": lambda: (M["train"].evaluate_loss, dict(model=_lm(vocab_size=7, max_len=8), data=_lm_data(), batch_size=2, max_items=4)),
    "train.batch_indices": lambda: (M["train"].batch_indices, dict(n=10, batch_size=4, step=3, world_size=2, rank=1)),
    "train.step_seed": lambda: (M["train"].step_seed, dict(seed=1, step=3, rank=1, micro=1)),
    "train.make_model": lambda: (M["train"].make_model, dict(data=_lm_data(), d_model=8, n_heads=2, n_layers=1)),
    "train.match_flags": lambda: (M["train"].match_flags, dict(model=_s2s_small(), data=_s2s_data(), batch_size=2, max_items=4)),
    "train.exact_match": lambda: (M["train"].exact_match, dict(model=_s2s_small(), data=_s2s_data(), batch_size=2, max_items=4)),
    "train.cross_attention_weights": lambda: (M["train"].cross_attention_weights, dict(model=_s2s_small(), batch=_s2s_data().batch(torch.arange(2)))),
    "train.make_task": lambda: (M["train"].make_task, dict(task="reverse", n_train=4, n_val=2, n_test=2)),
    # chapters 15, 16
    "flash.softmax_stats": lambda: (M["flash"].softmax_stats, dict(x=_x(2, 8), block=4)),
    "flash.online_softmax": lambda: (M["flash"].online_softmax, dict(x=_x(2, 8), block=4)),
    "flash.flash_forward": lambda: (M["flash"].flash_forward, dict(q=Q, k=Q, v=Q, scale=0.5, block_q=2, block_k=2)),
    "flash.flash_backward": lambda: (M["flash"].flash_backward, _flash_grads()),
    "flash.flash_attention": lambda: (M["flash"].flash_attention, dict(q=Q, k=Q, v=Q, scale=0.5, block_q=2, block_k=2)),
    "flash.flash_backend": lambda: (M["flash"].flash_backend, dict(q=Q, k=Q, v=Q, scale=0.5)),
    "flash.standard_attention_io": lambda: (M["flash"].standard_attention_io, dict(n_q=8, d=4, n_k=6)),
    "flash.attention_flops": lambda: (M["flash"].attention_flops, dict(batch=1, heads=2, n_q=8, n_k=8, head_dim=4)),
    "flash.flash_attention_io": lambda: (M["flash"].flash_attention_io, dict(n_q=8, d=4, M=64, n_k=6)),
    "flash_triton.tile_phases": lambda: (M["flash_triton"].tile_phases, dict(n_q=8, n_k=8, block_m=4, block_n=4)),
    "flash_triton.block_config": lambda: (M["flash_triton"].block_config, dict(kind="fwd", head_dim=16, dtype=torch.float32, interpret=True)),
    # apparatus
    "exercises.rounding_allowance": lambda: (M["exercises"].rounding_allowance, dict(dtype=torch.float32, scale=2.0)),
    "exercises.expect_equal": lambda: (M["exercises"].expect_equal, dict(what="n", got=3, expected=3)),
    "exercises.expect_close": lambda: (M["exercises"].expect_close, dict(what="x", got=0.5, expected=0.5, tol=0.25)),
}


def _learned():
    torch.manual_seed(0)
    return M["positional"].LearnedPositionalEmbedding(8, 4)


def _s2s_small():
    torch.manual_seed(0)
    return M["train"].make_model(_s2s_data(), d_model=8, n_heads=2, n_layers=1)


def _greedy_pair():
    lm = _lm()
    a = M["decoding"].lm_generate(lm, _ids(1, 3), 2, greedy=True)
    return dict(forward=lm, a=a, b=a.clone(), prompt_len=3, atol=0.0, rtol=0.0)


def _beam_step(ids, *_):
    "A fixed next-token table: log-probabilities (N, 16) that depend only on the last id."
    return (torch.nn.functional.one_hot(ids[:, -1] % 16, 16).float() * 2.0).log_softmax(-1)


def _flash_grads():
    o, lse = M["flash"].flash_forward(Q, Q, Q, block_q=2, block_k=2)
    return dict(do=torch.ones_like(o), q=Q, k=Q, v=Q, o=o, lse=lse, scale=None, block_q=2, block_k=2)


# Callables with a numeric parameter that the walk does not call, and why.
EXCLUDED = {
    "attention.BackendInfo": "a record filled in by `register_backend`, which checks `priority` (a plain dataclass, no checks of its own)",
    "attention.register_backend": "registers a backend in the process-wide registry: a call with a valid priority would leave one behind",
    "scaling.ExplorerView": "a record of a computed explorer setting (a plain dataclass built by `ScalingExplorer.__call__`, which checks its inputs)",
    "gpu_check.check_correctness": "the GPU check: compares kernels on a CUDA GPU",
    "viz.GraphNode": "a record of one box of a module diagram (a plain dataclass filled in by `module_graph`)",
    "train.save_checkpoint": "writes files; `step` is checked by the bad-input suite (row save_checkpoint-step)",
    "train.make_optimizer": "needs a training config and builds an optimizer and scheduler; `d_model` is fed by the bad-input suite",
    "checkpoints.save_pretrained": "writes a checkpoint to disk; `max_shard_size` takes a string such as '10MB' as well as an int",
    "flash_triton.triton_flash_attention": "needs a CUDA GPU and Triton (the interpreter is minutes per call)",
    "flash_triton.triton_backend": "needs a CUDA GPU and Triton (the interpreter is minutes per call)",
    # measurement and figures: seconds to minutes per call, GPUs, subprocesses or a browser
    **dict.fromkeys([f"gpu_check.{n}" for n in ("tune", "forward_memory", "benchmark_kernels", "run_check", "compile_kernel",
                                                 "compile_report")],
                    "the GPU check: needs a CUDA GPU (or runs a compiler) for every call"),
    **dict.fromkeys([f"bench.{n}" for n in ("time_ms", "bench_attention", "bench_mha", "bench_gqa", "bench_compile", "bench_peer",
                                             "decode_step", "lm_inputs", "ratio_reading")],
                    "a benchmark or its apparatus: timed loops (seconds per call), owned by chapter 17's own checks"),
    **dict.fromkeys(["at_scale.step_memory", "at_scale.launch", "at_scale.sample_predictions"],
                    "chapter 13: launches worker processes or trains and measures a model (seconds to minutes per call)"),
    **dict.fromkeys(["viz.attention_heatmap", "viz.heatmap_grid", "viz.FramePlayer", "viz.AttentionExplorer",
                     "viz.AttentionExplorer.weights", "viz.module_graph", "viz.draw_module"],
                    "figures: draws with matplotlib or loads the shipped checkpoint; covered row by row by the bad-input suite"),
    **dict.fromkeys(["widgets.jacobian_curves", "widgets.ExplorerPlot", "widgets.explorer_figure", "widgets.ExplorerUI",
                     "widgets.explorer_player"],
                    "widgets: build ipywidgets and matplotlib figures; covered row by row by the bad-input suite"),
}

# (callable, parameter) pairs that are numeric by the walk's reading but cannot be fed the rule, and why.
_BOUNDS = "the rule's own bounds, given by the calling code, not by a user"
_LENGTHS = "also takes a tensor of lengths"
_BEAM_EOS = "an id or a list of ids, checked by the same `_stops` as lm_generate's eos_ids, which the walk feeds"
EXCLUDED_PARAMS = {
    ("checks.check_int", "minimum"): _BOUNDS,
    ("checks.check_int", "maximum"): _BOUNDS,
    ("positional.rope_inv_freq", "seq_len"): _LENGTHS + " (dynamic scaling, traced)",
    ("positional.RotaryEmbedding.rows", "seq_len"): _LENGTHS + " (dynamic scaling, traced)",
    ("decoding.gnmt_penalty", "length"): _LENGTHS + " (one per beam)",
    ("decoding.beam_search", "eos_ids"): _BEAM_EOS,
    ("decoding.lm_beam_search", "eos_ids"): _BEAM_EOS,
    ("decoding.seq2seq_beam_search", "eos_ids"): _BEAM_EOS,
    ("exercises.expect_equal", "expected"): "the course's own reference value, written in the exercise cell",
    ("train.cross_attention_weights", "layer"): "an index into the decoder's blocks: negative values count from the end",
}

# (callable, parameter) whose documented values include +inf or -inf (NaN is still refused).
INF_OK = {
    ("decoding.repetition_penalty_filter", "penalty"): "",
}


# (callable, parameter) pairs the walk finds broken, each with the change that fixes it: strict xfails, so a fix makes the
# test pass, the xfail then fails, and the entry must go. Empty: every argument the walk builds follows the rule.
KNOWN_BROKEN: dict = {}

# -- the walk ---------------------------------------------------------------------------------------------------------

def _kind(p):
    "'float', 'int' or None: how the walk reads a parameter (its annotation first, else the type of its default)."
    ann = p.annotation if isinstance(p.annotation, str) else getattr(p.annotation, "__name__", str(p.annotation))
    if p.annotation is not inspect.Parameter.empty:
        if re.search(r"\bfloat\b", ann): return "float"
        if re.search(r"\bint\b", ann): return "int"
    if type(p.default) is float: return "float"
    if type(p.default) is int: return "int"
    return None


def numeric_api(modules=MODULES):
    "{key: {parameter: kind}} for every public callable with a numeric parameter; keys as in tests/test_bad_input.py."
    out, seen = {}, set()
    for m in modules:
        mod = importlib.import_module(f"transformer_lit.{m}")
        for name in mod.__all__:
            obj = getattr(mod, name)
            if not callable(obj) or isinstance(obj, dict) or id(obj) in seen: continue
            seen.add(id(obj))
            items = [(f"{m}.{name}", obj)]
            if inspect.isclass(obj): items += [(f"{m}.{name}.{k}", v) for k, v in _methods(obj).items()]
            for key, fn in items:
                try: ps = inspect.signature(fn).parameters.values()
                except (TypeError, ValueError): continue
                nums = {p.name: _kind(p) for p in ps if p.name != "self" and _kind(p)
                        and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
                if nums: out[key] = nums
    return out


API = numeric_api()
PAIRS = [pytest.param(k, p, kind, id=f"{k}:{p}",
                      marks=[pytest.mark.xfail(strict=True, reason=KNOWN_BROKEN[k, p])] if (k, p) in KNOWN_BROKEN else [])
         for k, ps in API.items() if k in BUILD for p, kind in ps.items() if (k, p) not in EXCLUDED_PARAMS]


def _good(key, param):
    "The valid value of `param`: the factory's, else the default (None when there is none)."
    fn, kw = BUILD[key]()
    if param in kw: return kw[param]
    return inspect.signature(fn).parameters[param].default


def _call(key, param, value):
    torch.manual_seed(0)
    fn, kw = BUILD[key]()
    torch.manual_seed(0)                                               # modules draw their init from the global generator
    return fn(**{**kw, param: value})


def _same(a, b):
    if isinstance(a, torch.Tensor): return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, torch.nn.Module):
        sa, sb = a.state_dict(), b.state_dict()
        return type(a) is type(b) and sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)
    if isinstance(a, dict): return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)): return type(a) is type(b) and len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a): return math.isnan(b)
    if type(a).__module__.startswith("transformer_lit") and hasattr(a, "__dict__"):
        return type(a) is type(b) and _same(vars(a), vars(b))
    return type(a) is type(b) and a == b


def _names(msg, name, value):
    "Whether the message names the argument and shows the value."
    return re.search(rf"(^|[^\w]){re.escape(name)}([^\w]|$)", msg) is not None and repr(value) in msg


@pytest.mark.parametrize("key, param, kind", PAIRS)
def test_numeric_walk(key, param, kind):
    good = _good(key, param)
    assert good is not None and good is not inspect.Parameter.empty, f"{key}:{param} has no valid value: add one to BUILD"
    ref = _call(key, param, good)                                      # the base arguments are valid
    wrong = ["7", True] + ([] if kind == "float" else [0.5, math.nan, math.inf])
    for bad in wrong:                                                  # the wrong kind: a TypeError naming the argument
        with pytest.raises(TypeError) as e: _call(key, param, bad)
        assert _names(str(e.value), param, bad), f"{key}({param}={bad!r}): {e.value}"
    if kind == "float":                                                # NaN and infinity: the wrong value
        for bad in [math.nan] + ([] if (key, param) in INF_OK else [math.inf]):
            with pytest.raises(ValueError) as e: _call(key, param, bad)
            assert _names(str(e.value), param, bad), f"{key}({param}={bad!r}): {e.value}"
    np_good = (np.float32(good) if float(np.float32(good)) == good else np.float64(good)) if kind == "float" or isinstance(good, float) \
        else np.int64(good)
    assert _same(ref, _call(key, param, np_good)), f"{key}({param}={np_good!r}) differs from {param}={good!r}"


def test_every_numeric_callable_is_built_or_excluded():
    "The guard: a public callable with a numeric parameter is either built by the walk or excluded with a reason."
    missing = [k for k in API if k not in BUILD and k not in EXCLUDED]
    assert not missing, f"public callables with numeric parameters, neither in BUILD nor in EXCLUDED: {missing}"


def test_tables_are_current():
    "Every table entry names a public callable (and parameter) with numeric parameters, and every exclusion has a reason."
    stale = [k for k in (*BUILD, *EXCLUDED) if k not in API] + [f"{k}:{p}" for k, p in (*EXCLUDED_PARAMS, *INF_OK, *KNOWN_BROKEN) if p not in API.get(k, {})]
    assert not stale, f"table entries naming no public numeric parameter: {stale}"
    assert not set(BUILD) & set(EXCLUDED), f"both built and excluded: {set(BUILD) & set(EXCLUDED)}"
    assert all(isinstance(r, str) and r for r in (*EXCLUDED.values(), *EXCLUDED_PARAMS.values(), *KNOWN_BROKEN.values()))
    assert all(k in BUILD for k, _ in KNOWN_BROKEN), "a known-broken parameter must be of a built callable"


def test_guard_notices_additions(monkeypatch):
    "A new public function with a float parameter, in no table, is caught by the guard."
    mod = M["masks"]
    def brand_new(x, width: float = 2.0): return x
    monkeypatch.setattr(mod, "brand_new", brand_new, raising=False)
    monkeypatch.setattr(mod, "__all__", [*mod.__all__, "brand_new"])
    api = numeric_api()
    assert api["masks.brand_new"] == {"width": "float"}
    assert "masks.brand_new" not in BUILD and "masks.brand_new" not in EXCLUDED
