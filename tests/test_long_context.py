"""Tests for transformer_lit.long_context: the RoPE scaling types registered into chapter 05's rope_inv_freq.

Equality of every type with Hugging Face's ROPE_INIT_FUNCTIONS is tested through rope_inv_freq in test_positional.py."""
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from transformer_lit.positional import RotaryEmbedding, check_rope_scaling, rope_inv_freq, rope_scaling_types, sinusoidal_frequencies

ROOT = Path(__file__).resolve().parent.parent
f64 = torch.float64


def fresh(code):
    "Run code in a fresh interpreter at the repository root; return its last printed line parsed as JSON."
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_positional_never_imports_long_context_and_says_what_registers_the_types():
    "Chapter 05 never imports chapter 06: a scaled type before chapter 06 is imported is a clear ValueError; chapter 09's model imports it."
    code = ("import sys, json\n"
            "from transformer_lit.positional import RotaryEmbedding\n"
            "seen = ['transformer_lit.long_context' in sys.modules]\n"
            "RotaryEmbedding(16); RotaryEmbedding(16, scaling={'rope_type': 'default'})\n"
            "try: RotaryEmbedding(16, scaling={'rope_type': 'linear', 'factor': 2.0}); seen.append('no error')\n"
            "except ValueError as e: seen.append('transformer_lit.long_context' in str(e) and \"rope_type='linear'\" in str(e))\n"
            "seen.append('transformer_lit.long_context' in sys.modules)\n"
            "import transformer_lit.long_context\n"
            "RotaryEmbedding(16, scaling={'rope_type': 'linear', 'factor': 2.0})\n"
            "print(json.dumps(seen))")
    assert fresh(code) == [False, True, False]
    assert fresh("import sys, json, transformer_lit.model\nprint(json.dumps('transformer_lit.long_context' in sys.modules))") is True


def test_the_registry_holds_the_four_types():
    import transformer_lit.long_context  # noqa: F401  (fills the registry)
    assert sorted(rope_scaling_types) == ['dynamic', 'linear', 'llama3', 'yarn']


def test_an_unregistered_type_is_refused_by_the_check_not_the_registry():
    with pytest.raises(ValueError, match="rope_type='longrope' is not supported"):
        RotaryEmbedding(16, scaling={'rope_type': 'longrope', 'factor': 2.0})


@pytest.mark.parametrize("f", [2.0, 8.0, 32.0])
def test_yarn_factor_multiplies_q_and_k_so_logits_scale_by_its_square(f):
    torch.manual_seed(0)
    yarn = RotaryEmbedding(16, scaling={'rope_type': 'yarn', 'factor': f, 'original_max_position_embeddings': 16})
    same = RotaryEmbedding(16); same.inv_freq = yarn.inv_freq
    q, k = torch.randn(2, 1, 2, 24, 16, dtype=f64)
    af = yarn.attention_factor
    assert af == pytest.approx(0.1 * math.log(f) + 1, rel=1e-12)
    torch.testing.assert_close(yarn(q) @ yarn(k).transpose(-2, -1), af ** 2 * (same(q) @ same(k).transpose(-2, -1)), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("f", [2.0, 4.0, 8.0])
def test_yarn_at_head_dim_16_and_length_16_keeps_pair_0_and_interpolates_the_rest(f):
    inv, _ = rope_inv_freq(16, 10000.0, {'rope_type': 'yarn', 'factor': f, 'original_max_position_embeddings': 16})
    plain = sinusoidal_frequencies(16)
    assert inv[0] == plain[0]
    torch.testing.assert_close(inv[1:], plain[1:] / f, rtol=1e-15, atol=0)


def test_dynamic_dict_as_config_json_holds_it_needs_the_length_merged_in():
    from transformers import LlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    rope_scaling, max_pos = {'type': 'dynamic', 'factor': 2.0}, 64
    with pytest.raises(ValueError, match=r"needs the keys \['original_max_position_embeddings'\]"):
        RotaryEmbedding(16, scaling=rope_scaling)
    merged = rope_scaling | {'original_max_position_embeddings': max_pos}
    cfg = LlamaConfig(hidden_size=32, num_attention_heads=2, head_dim=16, max_position_embeddings=max_pos, vocab_size=10,
                      num_hidden_layers=1, intermediate_size=8, rope_parameters={'rope_theta': 10000.0, 'rope_type': 'dynamic', 'factor': 2.0})
    for seq_len in (None, 64, 96, 1000):
        inv_hf, _ = ROPE_INIT_FUNCTIONS['dynamic'](cfg, 'cpu', seq_len=seq_len)
        torch.testing.assert_close(rope_inv_freq(16, 10000.0, merged, seq_len=seq_len)[0], inv_hf.double(), rtol=2e-6, atol=0)
    assert check_rope_scaling(merged)['original_max_position_embeddings'] == max_pos


EPS64 = torch.finfo(f64).eps


@pytest.mark.parametrize("D", [4, 6, 16, 64, 128])
@pytest.mark.parametrize("f", [2.0, 3.7])
def test_dynamic_from_a_length_tensor_is_the_int_path(D, f):
    "The 0-d tensor length (what a model passes, so that torch.compile never reads it) gives the int length's frequencies."
    sc = {'rope_type': 'dynamic', 'factor': f, 'original_max_position_embeddings': 24}
    for n in (1, 23, 24, 25, 48, 240, 10_000):
        a, af_a = rope_inv_freq(D, 10000.0, sc, seq_len=n)
        b, af_b = rope_inv_freq(D, 10000.0, sc, seq_len=torch.tensor(n))
        assert b.dtype == f64 and b.shape == (D // 2,) and af_a == af_b == 1.0
        if n <= 24: assert torch.equal(a, b)                                   # up to L both are the table at L
        # past L: Python's pow and torch's may round base' differently by an ulp (torch squares for D = 4); that ulp times
        # |exponent| < 1 plus the final pow's own rounding: a few ulps, bounded here by 8
        else: torch.testing.assert_close(b, a, rtol=8 * EPS64, atol=0)


def test_dynamic_length_tensor_matches_transformers_and_is_checked():
    from transformers import LlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    cfg = LlamaConfig(hidden_size=32, num_attention_heads=2, head_dim=16, max_position_embeddings=64, vocab_size=10,
                      num_hidden_layers=1, intermediate_size=8, rope_parameters={'rope_theta': 10000.0, 'rope_type': 'dynamic', 'factor': 2.0})
    sc = {'rope_type': 'dynamic', 'factor': 2.0, 'original_max_position_embeddings': 64}
    for n in (64, 96, 1000):                                                   # transformers passes a tensor too (float32 there)
        inv_hf, _ = ROPE_INIT_FUNCTIONS['dynamic'](cfg, 'cpu', seq_len=torch.tensor(n))
        torch.testing.assert_close(rope_inv_freq(16, 10000.0, sc, seq_len=torch.tensor(n))[0], inv_hf.double(), rtol=2e-6, atol=0)
    with pytest.raises(ValueError, match=re.escape("seq_len.shape=(2,) must be ()")):
        rope_inv_freq(16, 10000.0, sc, seq_len=torch.tensor([64, 96]))
    with pytest.raises(TypeError, match=re.escape("seq_len.dtype=torch.float32 must be an integer dtype")):
        rope_inv_freq(16, 10000.0, sc, seq_len=torch.tensor(96.0))


def test_rotary_reads_no_length_on_the_host_and_rotates_as_before():
    "RotaryEmbedding with dynamic scaling: forward from positions equals the rows at the int length (max + 1), and no value is read."
    torch.manual_seed(0)
    rot = RotaryEmbedding(16, scaling={'rope_type': 'dynamic', 'factor': 2.0, 'original_max_position_embeddings': 16})
    x = torch.randn(2, 3, 40, 16, dtype=f64)
    for pos in (torch.arange(40), torch.arange(40) + 7, torch.arange(40).flip(0) // 4):
        n = int(pos.max()) + 1
        cos, sin = rot.rows(pos, f64, seq_len=n)                               # the int path
        # the frequencies agree within 8 ulps (above): angles within 8 eps x the largest angle n (pair 0 turns once per position),
        # so cos and sin within that, each multiplying |x|; plus the products' own rounding
        tol = 2 * float(x.abs().max()) * (8 * EPS64 * n + 4 * EPS64)
        torch.testing.assert_close(rot(x, pos), x * cos + torch.cat((-x[..., 8:], x[..., :8]), -1) * sin, rtol=0, atol=tol)
    with torch.device('meta'):
        out = rot(torch.zeros(2, 3, 40, 16), torch.arange(40))                 # a meta tensor has no value to read
    assert out.device.type == 'meta'


@pytest.mark.parametrize("f,D", [(4.0, 16), (8.0, 64), (2.0, 128)])
def test_llama3_is_metas_apply_scaling(f, D):
    "Meta's reference rule, written out per frequency as in llama-models' apply_scaling, with L = 8192, low 1, high 4."
    L, lo, hi = 8192, 1.0, 4.0
    inv = sinusoidal_frequencies(D, 500000.0)
    ref = []
    for fr in inv.tolist():
        w = 2 * math.pi / fr
        if w < L / hi: ref.append(fr)
        elif w > L / lo: ref.append(fr / f)
        else:
            s = (L / w - lo) / (hi - lo)
            ref.append((1 - s) * fr / f + s * fr)
    sc = {'rope_type': 'llama3', 'factor': f, 'original_max_position_embeddings': L, 'low_freq_factor': lo, 'high_freq_factor': hi}
    torch.testing.assert_close(rope_inv_freq(D, 500000.0, sc)[0], torch.tensor(ref, dtype=f64), rtol=1e-15, atol=0)


@pytest.mark.parametrize("sc", [{'rope_type': 'linear', 'factor': 2.0},
                                {'rope_type': 'dynamic', 'factor': 2.0, 'original_max_position_embeddings': 16},
                                {'rope_type': 'yarn', 'factor': 4.0, 'original_max_position_embeddings': 16},
                                {'rope_type': 'llama3', 'factor': 8.0, 'original_max_position_embeddings': 16,
                                 'low_freq_factor': 1.0, 'high_freq_factor': 4.0}])
def test_frequencies_are_real_cpu_tensors_under_a_meta_device_context(sc):
    "Checkpoint loaders build models under torch.device('meta'); the frequency tables must still be computed."
    expected = rope_inv_freq(16, 10000.0, sc, seq_len=40)
    with torch.device('meta'):
        got = rope_inv_freq(16, 10000.0, sc, seq_len=40)
    assert got[0].device.type == 'cpu'
    torch.testing.assert_close(got[0], expected[0], rtol=0, atol=0)
    assert got[1] == expected[1]


@pytest.mark.parametrize("key", ["rope_type", "type"])
@pytest.mark.parametrize("kind,extra", [("dynamic", {}), ("yarn", {}), ("llama3", {"low_freq_factor": 1.0, "high_freq_factor": 4.0})])
def test_both_spellings_with_and_without_the_training_length(key, kind, extra):
    "A dict as config.json writes it: the length is refused when absent (naming the key), and both spellings agree when present."
    bare = {key: kind, "factor": 4.0, **extra}
    with pytest.raises(ValueError, match=r"needs the keys \['original_max_position_embeddings'\]"):
        RotaryEmbedding(16, scaling=bare)
    full = bare | {"original_max_position_embeddings": 32}
    other = {("type" if key == "rope_type" else "rope_type"): kind, **{k: v for k, v in full.items() if k != key}}
    torch.manual_seed(0)
    x = torch.randn(1, 2, 80, 16, dtype=f64)                                    # past the 32 positions
    # both spellings normalise to one scaling dict, so the same tables and the same rotation: the same computation
    torch.testing.assert_close(RotaryEmbedding(16, scaling=full)(x), RotaryEmbedding(16, scaling=other)(x), rtol=0, atol=0)
    assert not torch.allclose(RotaryEmbedding(16, scaling=full)(x), RotaryEmbedding(16)(x))


# -- running a trained model longer than trained: with_rope_scaling and loss_by_position ----------------------------------
def tiny_rope_lm(**kw):
    from transformer_lit.model import TransformerConfig, DecoderOnlyLM
    torch.manual_seed(0)
    c = dict(vocab_size=13, d_model=16, n_heads=2, n_layers=2, d_ff=32, dropout=0.0, max_len=8, positional="rope") | kw
    return DecoderOnlyLM(TransformerConfig(**c)).eval()


def test_loss_by_position_is_the_per_position_cross_entropy_and_averages_to_evaluate_loss():
    from torch.nn import functional as F
    from transformer_lit.long_context import loss_by_position
    from transformer_lit.train import LMData, Vocab, evaluate_loss
    m = tiny_rope_lm().double()
    ids = torch.randint(0, 13, (61,), generator=torch.Generator().manual_seed(1))
    curve = loss_by_position(m, ids, 8, batch_size=3)                          # 7 windows of 8, in batches of 3, 3, 1
    assert curve.shape == (8,) and curve.dtype == f64
    x, y = ids[:56].view(7, 8), ids[1:57].view(7, 8)
    with torch.no_grad():
        want = torch.stack([F.cross_entropy(m(x[i:i + 1])[0], y[i], reduction='none') for i in range(7)]).mean(0)
    torch.testing.assert_close(curve, want, rtol=1e-12, atol=1e-12)
    data = LMData(ids, 8, Vocab([chr(97 + i) for i in range(13)], specials=False))   # the same non-overlapping windows
    assert curve.mean().item() == pytest.approx(evaluate_loss(m, data, 4, 100), rel=1e-12)
    m.train(); loss_by_position(m, ids, 8); assert m.training                 # the mode is restored


def test_with_rope_scaling_copies_the_weights_and_changes_only_the_positions():
    from transformer_lit.long_context import with_rope_scaling
    m = tiny_rope_lm()
    idx = torch.randint(0, 13, (2, 24), generator=torch.Generator().manual_seed(2))
    plain = with_rope_scaling(m, None, 24)
    assert plain.config.max_len == 24 and m.config.max_len == 8 and plain.config.rope_scaling is None
    with torch.no_grad():
        # the same model within its length: the same weights and angles, but RoPE tables of 24 and 8 positions, whose
        # elementwise cos/sin may take vector or scalar code by an element's place (an ulp apart): 1e-5 of the logits' scale
        base = m(idx[:, :8])
        torch.testing.assert_close(plain(idx[:, :8]), base, rtol=0, atol=1e-5 * base.abs().max().item())
        pi = with_rope_scaling(m, {'rope_type': 'linear', 'factor': 3.0}, 24)
        assert not torch.allclose(pi(idx), plain(idx))
        pi.lm_head.weight.add_(1.0)                                            # a copy: the original is untouched
    assert not torch.equal(pi.lm_head.weight, m.lm_head.weight)


RUNS_DIR = ROOT / "nbs" / "models" / "long-context" / "sotu-llama"


def finetune_script():
    "nbs/models/finetune_long.py as a module (its settings; importing it runs nothing)."
    import importlib.util
    spec = importlib.util.spec_from_file_location("finetune_long", ROOT / "nbs" / "models" / "finetune_long.py")
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
    return m


def test_written_twice_copies_the_passage_and_copy_losses_reads_each_copy():
    "The fine-tuning script's passage written twice (chapter 06 shows the same two functions and checks the script's numbers)."
    fl = finetune_script()
    ids = torch.arange(100)
    x = fl.written_twice(ids, 24, at=12, length=5, first=2)                   # 4 windows of 25 tokens
    assert x.shape == (4, 25) and torch.equal(x[:, 12:17], x[:, 2:7]) and torch.equal(x[:, 2:7], torch.arange(4)[:, None] * 24 + torch.arange(2, 7))
    assert torch.equal(x[:, :12], ids[:96].view(4, 24)[:, :12])               # the rest is the window's own text
    assert torch.equal(fl.written_twice(ids, 24, 12, 5, 2, windows=[3, 1]), x[[3, 1]])
    for at in (5, 21):                                                         # the copies would overlap; the second would not fit
        with pytest.raises(ValueError, match=f"the copies at 2 and {at} \\(length 5\\) must not overlap and fit in T \\+ 1 = 25"):
            fl.written_twice(ids, 24, at=at, length=5, first=2)
    with pytest.raises(ValueError, match=re.escape("windows=[4] must be window indices in 0 .. 3")):
        fl.written_twice(ids, 24, 12, 5, 2, windows=[4])
    m = tiny_rope_lm(vocab_size=100, max_len=24).double()
    got = fl.copy_losses(m, x, at=12, length=5, first=2, batch_size=3)
    from torch.nn import functional as F
    with torch.no_grad(): nll = F.cross_entropy(m(x[:, :-1]).transpose(1, 2), x[:, 1:], reduction="none")   # (4, 24)
    torch.testing.assert_close(got, torch.stack([nll[:, 2:6].mean(1), nll[:, 12:16].mean(1)], 1).double(), rtol=1e-12, atol=1e-12)


def test_the_no_finetune_file_records_the_scripts_command_and_settings():
    "nbs/models/long-context/sotu-llama/no-finetune.json: written by the script's --no-finetune with its dicts and constants."
    fl = finetune_script()
    r = json.loads((RUNS_DIR / "no-finetune.json").read_text())
    assert r["command"] == "python nbs/models/finetune_long.py --no-finetune"
    assert (r["trained_length"], r["eval_length"]) == (fl.L, fl.T) == (256, 1024)
    assert (r["passage_length"], r["passage_first"], r["passage_at"]) == (fl.PASSAGE, fl.FIRST, list(fl.ATS))
    assert {k: v["rope_scaling"] for k, v in r["runs"].items()} == fl.VARIANTS
    for v in r["runs"].values():
        n = len(v["window_bins"])
        assert n == 53 and all(len(row) == fl.T // fl.BIN for row in v["window_bins"]) and len(v["curve"]) == fl.T
        assert v["passage_windows"] == fl.spread(n, fl.REP_WINDOWS)
        assert all(len(v["passage"][str(at)]) == fl.REP_WINDOWS for at in fl.ATS)
        torch.testing.assert_close(torch.tensor(v["window_bins"]).mean(0), torch.tensor(v["curve"]).view(-1, fl.BIN).mean(1), rtol=0, atol=1e-5)


def test_the_fine_tune_files_record_the_scripts_command_and_settings():
    "One file per run and seed: the command that reproduces it, the script's dicts, lengths, schedule and data mix."
    fl = finetune_script()
    files = sorted(RUNS_DIR.glob("*-seed*.json"))
    assert files, "no fine-tune results: run nbs/models/finetune_long.py"
    seen = {}
    for p in files:
        r = json.loads(p.read_text())
        assert p.name == f"{r['run']}-seed{r['seed']}.json" and r["run"] in fl.RUNS
        assert r["command"] == f"python nbs/models/finetune_long.py --runs {r['run']} --steps {r['steps']} --seeds {r['seed']}"
        assert r["rope_scaling"] == fl.VARIANTS.get(r["run"])                  # more256: plain RoPE
        assert r["block"] == (fl.L if r["run"] == "more256" else fl.T_TUNE) and r["block"] * r["batch_size"] == fl.TOKENS_PER_STEP
        assert (r["warmup"], r["lr_factor"], r["mix"]) == (fl.WARMUP, fl.LR_FACTOR, fl.MIX)
        assert (r["eval_length"], r["passage_at"]) == (fl.T, list(fl.ATS)) and len(r["train_loss"]) == len(r["lr"]) == r["steps"]
        assert r["windows"] == fl.spread(53, fl.TUNED_WINDOWS) and r["passage_windows"] == fl.spread(53, fl.REP_WINDOWS)[::2]
        assert len(r["window_bins"]) == fl.TUNED_WINDOWS and all(len(v) == fl.TUNED_REP for v in r["passage"].values())
        seen.setdefault(r["run"], set()).add((r["seed"], r["steps"]))
    steps = {s for v in seen.values() for _, s in v}
    assert len(steps) == 1                                                     # every run the same number of steps
    assert seen == {k: {(s, next(iter(steps))) for s in (0, 1, 2)} for k in fl.RUNS}   # 3 seeds of every run


def test_the_no_finetune_file_is_what_the_shipped_model_computes():
    "The first window of plain RoPE and of YaRN at 1,024 tokens, recomputed from the shipped weights (a second each)."
    from transformer_lit.checkpoints import from_pretrained
    from transformer_lit.long_context import with_rope_scaling, loss_by_position
    fl = finetune_script()
    r, ids = json.loads((RUNS_DIR / "no-finetune.json").read_text()), fl.heldout_ids()
    lm = from_pretrained(fl.MODEL)
    for k in ("rope", "yarn"):
        live = loss_by_position(with_rope_scaling(lm, fl.VARIANTS[k], fl.T), ids[:fl.T + 1], fl.T)
        # float32 logits differ between CPUs by ~1e-6 of their size; a mean over 32 positions moves far less than 1e-3
        torch.testing.assert_close(live.view(-1, fl.BIN).mean(1), torch.tensor(r["runs"][k]["window_bins"][0], dtype=f64), rtol=0, atol=1e-3)


def test_the_fine_tune_data_never_copies_across_more_than_192_tokens():
    "Chapter 06 says so of RepeatData (the training script's mix, used by the fine-tune at 512 tokens): stretches of at most 128 tokens, gaps of at most 64."
    from transformer_lit.train import Vocab
    fl = finetune_script(); m = fl.recipe()
    ids = torch.arange(60_000) % 2048 + 0                                       # no token repeats within 2,048 positions
    data = m.RepeatData(ids, fl.T_TUNE, Vocab([str(i) for i in range(2048)], specials=False), frac=1.0)   # every window holds a copy
    x = data.batch(torch.arange(0, 50_000, 97))["idx"]                           # (516, 512)
    same = (x[:, :, None] == x[:, None, :]).triu(1)                             # (B, T, T): j > i holds the token at i
    dist = same.nonzero()[:, 2] - same.nonzero()[:, 1]
    assert same.any(-1).any(-1).all() and dist.max() <= 192 and dist.max() >= 150   # the bound holds and is nearly reached
