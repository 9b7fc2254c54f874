"""Checkpoints: Hugging Face GPT-2, LLaMA, Mistral and Qwen2 against `transformers` (tiny random-init models, nothing downloaded)."""
import dataclasses, json, shutil
from pathlib import Path
import pytest
import torch
import transformers
from safetensors.torch import load_file, save_file
from transformers import AutoModelForCausalLM, GPT2Config, LlamaConfig, MistralConfig, Qwen2Config
from transformer_lit import checkpoints as ck
from transformer_lit.checkpoints import FAMILIES, config_from_hf, config_to_hf, from_pretrained, save_pretrained, weight_rules
from transformer_lit.model import DecoderOnlyLM, TransformerConfig, count_parameters
from transformer_lit.model import assert_greedy_agrees
from transformer_lit.decoding import lm_generate, seq2seq_generate, lm_beam_search, seq2seq_beam_search, new_cache
from transformer_lit.fast_decoding import fast_generate, new_static_cache

transformers.logging.set_verbosity_error()
transformers.utils.logging.disable_progress_bar()
pytestmark = pytest.mark.usefixtures("one_thread")
V = 97

def reference(family, dtype=torch.float32, tied=False, seed=0, **kw):
    "A random-init tiny transformers model of a family, in eval mode."
    torch.manual_seed(seed)
    if family == "gpt2":
        c = GPT2Config(vocab_size=V, n_positions=64, n_embd=32, n_layer=2, n_head=4, tie_word_embeddings=tied,
                       bos_token_id=None, eos_token_id=None, **kw)
    else:
        C = dict(llama=LlamaConfig, mistral=MistralConfig, qwen2=Qwen2Config)[family]
        args = dict(vocab_size=V, hidden_size=32, intermediate_size=56, num_hidden_layers=2, num_attention_heads=4,
                    num_key_value_heads=2, max_position_embeddings=64, rope_theta=500.0, tie_word_embeddings=tied,
                    bos_token_id=None, eos_token_id=None)
        c = C(**(args | kw))
    return AutoModelForCausalLM.from_config(c).to(dtype).eval()

def faithful_float64(ref):
    "transformers' LLaMA-style RMSNorm and RoPE tables run in float32 whatever the dtype: make them use the model's dtype."
    for m in ref.modules():
        name = type(m).__name__
        if name.endswith("RMSNorm"):
            m.forward = lambda x, m=m: m.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + m.variance_epsilon))
        if name.endswith("RotaryEmbedding"):
            def forward(x, position_ids, m=m):
                D, base = 2 * m.inv_freq.numel(), m.config.rope_parameters["rope_theta"]
                ang = position_ids[..., None].double() / base ** (torch.arange(0, D, 2, dtype=torch.float64) / D)  # (B, T, D/2)
                ang = torch.cat((ang, ang), -1)                                                               # (B, T, D)
                return ang.cos().to(x.dtype), ang.sin().to(x.dtype)
            m.forward = forward
    return ref

def ids(B=2, T=33, seed=1): return torch.randint(0, V, (B, T), generator=torch.Generator().manual_seed(seed))

def rel(a, b): return ((a - b).abs().max() / b.abs().max()).item()

TOL = {torch.float32: 1e-5, torch.float64: 1e-10}

def check_equal(ours, ref, dtype):
    "Logits equal to the tolerance, and 20 greedy tokens identical (ours with the KV cache)."
    x = ids()
    with torch.no_grad():
        if dtype == torch.float64: faithful_float64(ref)
        assert rel(ours(x), ref(x).logits) < TOL[dtype]
        prompt = x[:1, :6]
        test = lm_generate(ours, prompt, 20, greedy=True, use_cache=True)
        # two libraries' cached decoding: different computations whose logits agree within TOL of their scale (asserted
        # for the forward above); the tokens must agree wherever the top-2 gap exceeds twice that, and both be greedy
        assert_greedy_agrees(ours, test, ref.generate(prompt, max_new_tokens=20, do_sample=False), 6, rtol=TOL[dtype])

# ---------------------------------------------------------------- transformers -> ours
@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("tied", [True, False], ids=["tied", "untied"])
@pytest.mark.parametrize("shard", [None, "8KB"], ids=["single", "sharded"])
def test_from_pretrained_equals_transformers(tmp_path, family, dtype, tied, shard):
    ref = reference(family, dtype, tied)
    ref.save_pretrained(tmp_path, **({"max_shard_size": shard} if shard else {}))
    assert (tmp_path / "model.safetensors.index.json").exists() == bool(shard)
    ours = from_pretrained(tmp_path)
    assert not ours.training and {p.dtype for p in ours.parameters()} == {dtype}
    assert (ours.lm_head.weight is ours.tok.weight) == tied
    assert count_parameters(ours) == sum(p.numel() for p in ref.parameters())
    check_equal(ours, ref, dtype)

@pytest.mark.parametrize("family", FAMILIES)
def test_float64_transformers_as_shipped_is_float32_level(tmp_path, family):
    "Without the faithful patch the RoPE families agree only to float32 level; GPT-2 to float64 level."
    ref = reference(family, torch.float64)
    ref.save_pretrained(tmp_path)
    x = ids()
    with torch.no_grad(): d = rel(from_pretrained(tmp_path)(x), ref(x).logits)
    if family == "gpt2": assert d < 1e-12
    else: assert 1e-10 < d < 1e-5

def test_llama_with_biases_and_mha(tmp_path):
    "LLaMA's attention_bias + mlp_bias (biases everywhere), one key/value head per query head."
    ref = reference("llama", torch.float64, attention_bias=True, mlp_bias=True, num_key_value_heads=4)
    ref.save_pretrained(tmp_path)
    ours = from_pretrained(tmp_path)
    assert ours.config.bias and ours.config.n_kv_heads == 4
    check_equal(ours, ref, torch.float64)

def test_multi_query_and_sliding_window_that_changes_nothing(tmp_path):
    ref = reference("mistral", torch.float32, num_key_value_heads=1, sliding_window=64)   # window = max_len: no effect
    ref.save_pretrained(tmp_path)
    check_equal(from_pretrained(tmp_path), ref, torch.float32)

def test_mistral_window_caps_the_length(tmp_path):
    """Mistral-7B-v0.1's layout: sliding_window (16 here, 4096 there) < max_position_embeddings (64; 32768). Up to the window
    every key is inside it, so the loader caps max_len at the window: exact there, longer inputs refused."""
    ref = reference("mistral", sliding_window=16)
    ref.save_pretrained(tmp_path)
    ours = from_pretrained(tmp_path)
    assert ours.config.max_len == 16
    x = ids(T=16)
    with torch.no_grad():
        assert rel(ours(x), ref(x).logits) < TOL[torch.float32]
        with pytest.raises(ValueError, match=r"must be <= max_len=16"): ours(ids(T=17))
        full = DecoderOnlyLM(dataclasses.replace(ours.config, max_len=64)).eval()
        full.load_state_dict(ours.state_dict())
        y = ids(T=40)                                                # past the window the window matters: the cap is needed
        assert rel(full(y), ref(y).logits) > 100 * TOL[torch.float32]

def test_pytorch_model_bin(tmp_path):
    "pytorch_model.bin (torch.save of the state dict, which keeps lm_head.weight although tied)."
    ref = reference("gpt2", tied=True)
    ref.config.save_pretrained(tmp_path)
    torch.save(ref.state_dict(), tmp_path / "pytorch_model.bin")
    check_equal(from_pretrained(tmp_path), ref, torch.float32)

def test_gpt2_hub_layout(tmp_path):
    "The original GPT-2 files: no 'transformer.' prefix, and the causal-mask buffers attn.bias / attn.masked_bias."
    ref = reference("gpt2", tied=True)
    ref.config.save_pretrained(tmp_path)
    sd = {k.removeprefix("transformer."): v.contiguous() for k, v in ref.state_dict().items() if k != "lm_head.weight"}
    for i in range(2):
        sd[f"h.{i}.attn.bias"] = torch.tril(torch.ones(1, 1, 64, 64))
        sd[f"h.{i}.attn.masked_bias"] = torch.tensor(-1e4)
    save_file(sd, tmp_path / "model.safetensors")
    check_equal(from_pretrained(tmp_path), ref, torch.float32)

def test_dtype_and_device(tmp_path):
    reference("llama", torch.float32).save_pretrained(tmp_path)
    m = from_pretrained(tmp_path, dtype=torch.bfloat16, device="cpu")
    assert {p.dtype for p in m.parameters()} == {torch.bfloat16} and {p.device.type for p in m.parameters()} == {"cpu"}
    assert {p.dtype for p in from_pretrained(tmp_path, dtype=torch.float64).parameters()} == {torch.float64}
    with pytest.raises(TypeError, match="dtype=torch.int32 must be None or one of"):
        from_pretrained(tmp_path, dtype=torch.int32)

def test_checks_before_reading_any_tensor(tmp_path, monkeypatch):
    "A bad tensor in the last shard is found before any tensor is read: nothing half-loaded."
    reference("llama", tied=False).save_pretrained(tmp_path, max_shard_size="8KB")
    last = sorted(tmp_path.glob("model-*.safetensors"))[-1]
    sd = load_file(last); k = next(iter(sd)); sd[k] = torch.zeros(3)
    save_file(sd, last, metadata={"format": "pt"})
    reads = []
    real = ck._Reader.get
    monkeypatch.setattr(ck._Reader, "get", lambda self, key: reads.append(key) or real(self, key))
    with pytest.raises(ValueError, match=f"{last.name}: tensor '{k}' has shape \\(3,\\)"):
        from_pretrained(tmp_path)
    assert reads == []

# ---------------------------------------------------------------- ours -> transformers
def our_model(kind, dtype=torch.float32, tied=True, seed=0, **kw):
    torch.manual_seed(seed)
    base = dict(vocab_size=V, d_model=32, n_heads=4, n_layers=2, d_ff=64, dropout=0.0, max_len=64, scale_embeddings=False,
                tie_embeddings=tied)
    if kind == "gpt2": c = TransformerConfig(positional="learned", activation=kw.pop("activation", "gelu_tanh"), **base, **kw)
    else:
        extra = dict(llama=dict(bias=False), qwen2=dict(bias=False, qkv_bias=True), llama_bias=dict(bias=True))[kind]
        c = TransformerConfig(positional="rope", norm="rms", activation="swiglu", n_kv_heads=2, rope_base=300.0,
                              layer_norm_eps=1e-5, **base, **extra, **kw)
    m = DecoderOnlyLM(c).to(dtype).eval()
    with torch.no_grad():                                    # norms start at 1/0: make them random so a mix-up shows
        for n, p in m.named_parameters():
            if "norm" in n: p.add_(torch.randn_like(p) * 0.1)
    return m

@pytest.mark.parametrize("kind,arch", [("gpt2", "GPT2LMHeadModel"), ("llama", "LlamaForCausalLM"),
                                       ("qwen2", "Qwen2ForCausalLM"), ("llama_bias", "LlamaForCausalLM")])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("tied", [True, False], ids=["tied", "untied"])
@pytest.mark.parametrize("shard", [None, 6000], ids=["single", "sharded"])
def test_save_pretrained_loads_in_transformers(tmp_path, kind, arch, dtype, tied, shard):
    ours = our_model(kind, dtype, tied)
    save_pretrained(ours, tmp_path, max_shard_size=shard)
    assert (tmp_path / "model.safetensors.index.json").exists() == bool(shard)
    ref = AutoModelForCausalLM.from_pretrained(tmp_path, dtype=dtype).eval()
    assert type(ref).__name__ == arch and ref.config.tie_word_embeddings == tied
    check_equal(ours, ref, dtype)
    back = from_pretrained(tmp_path)                         # and ours reads it back bit for bit
    assert all(torch.equal(a, b) for a, b in zip(back.state_dict().values(), ours.state_dict().values()))

@pytest.mark.parametrize("act", ["relu", "gelu", "gelu_tanh", "silu"])
def test_gpt2_activations(tmp_path, act):
    ours = our_model("gpt2", torch.float64, activation=act)
    save_pretrained(ours, tmp_path)
    check_equal(ours, AutoModelForCausalLM.from_pretrained(tmp_path, dtype=torch.float64).eval(), torch.float64)

def test_trained_char_lm_round_trip(tmp_path):
    "A model trained with chapter 12's loop, saved, loaded by transformers: same logits and greedy text."
    from transformer_lit.train import TrainConfig, char_lm_data, make_model, train
    text = "def f(x):\n    return x + 1\n" * 40
    data, _ = char_lm_data(text, block_size=32)
    model = make_model(data, d_model=32, n_heads=4, n_layers=2)
    before = model.tok.weight.detach().clone()
    train(model, data, TrainConfig(steps=5, batch_size=8, warmup=2, eval_every=5, progress=False))
    assert not torch.equal(before, model.tok.weight)
    save_pretrained(model.eval(), tmp_path)
    ref = AutoModelForCausalLM.from_pretrained(tmp_path, dtype=torch.float32).eval()
    x = data.batch(torch.tensor([0, 5]))["idx"]
    with torch.no_grad():
        assert rel(model(x), ref(x).logits) < 1e-5
        p = x[:1, :4]
        assert_greedy_agrees(model, fast_generate(model, p, 20, greedy=True), ref.generate(p, max_new_tokens=20, do_sample=False), 4, rtol=1e-5)

def test_save_replaces_old_weights(tmp_path):
    save_pretrained(our_model("gpt2"), tmp_path, max_shard_size=6000)
    save_pretrained(our_model("gpt2", seed=1), tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json", "model.safetensors"]

# ---------------------------------------------------------------- bad input
@pytest.fixture
def gpt2_dir(tmp_path):
    reference("gpt2", tied=True).save_pretrained(tmp_path / "ck")
    return tmp_path / "ck"

def rewrite(d, fn):
    f = d / "model.safetensors"; save_file(fn(load_file(f)), f, metadata={"format": "pt"})

def edit_config(d, **kw):
    c = json.loads((d / "config.json").read_text()); c.update(kw); (d / "config.json").write_text(json.dumps(c))

def test_missing_files(tmp_path, gpt2_dir):
    with pytest.raises(FileNotFoundError, match="is not a directory"): from_pretrained(tmp_path / "nowhere")
    (gpt2_dir / "model.safetensors").rename(tmp_path / "moved.safetensors")
    with pytest.raises(FileNotFoundError, match="no weights in .*expected model.safetensors"): from_pretrained(gpt2_dir)
    (gpt2_dir / "config.json").unlink()
    with pytest.raises(FileNotFoundError, match="config.json not found"): from_pretrained(gpt2_dir)

def test_missing_shard(tmp_path):
    reference("gpt2").save_pretrained(tmp_path, max_shard_size="8KB")
    shard = sorted(tmp_path.glob("model-*.safetensors"))[1]; shard.unlink()
    with pytest.raises(FileNotFoundError, match=f"{shard.name} not found \\(listed in .*model.safetensors.index.json\\)"):
        from_pretrained(tmp_path)

def test_missing_tensor(gpt2_dir):
    rewrite(gpt2_dir, lambda sd: {k: v for k, v in sd.items() if k != "transformer.h.1.ln_2.bias"})
    with pytest.raises(ValueError, match="tensor 'transformer.h.1.ln_2.bias' missing from .*model.safetensors"):
        from_pretrained(gpt2_dir)

def test_missing_untied_head(tmp_path):
    reference("llama", tied=False).save_pretrained(tmp_path)
    rewrite(tmp_path, lambda sd: {k: v for k, v in sd.items() if k != "lm_head.weight"})
    with pytest.raises(ValueError, match="tensor 'lm_head.weight' missing"): from_pretrained(tmp_path)

def test_extra_tensor(gpt2_dir):
    rewrite(gpt2_dir, lambda sd: sd | {"transformer.h.2.attn.c_attn.weight": torch.zeros(32, 96)})
    with pytest.raises(ValueError, match="model.safetensors: tensor 'transformer.h.2.attn.c_attn.weight' has no place in a gpt2 model"):
        from_pretrained(gpt2_dir)

def test_wrong_shape(gpt2_dir):
    rewrite(gpt2_dir, lambda sd: sd | {"transformer.h.0.attn.c_attn.weight": torch.zeros(96, 32)})   # not transposed
    with pytest.raises(ValueError, match=r"tensor 'transformer.h.0.attn.c_attn.weight' has shape \(96, 32\); the config.json needs \(32, 96\)"):
        from_pretrained(gpt2_dir)

def test_integer_tensor(gpt2_dir):
    rewrite(gpt2_dir, lambda sd: sd | {"transformer.ln_f.bias": torch.zeros(32, dtype=torch.int32)})
    with pytest.raises(ValueError, match="tensor 'transformer.ln_f.bias' has dtype I32; weights must be floating point"):
        from_pretrained(gpt2_dir)

def test_tensor_twice(tmp_path):
    reference("gpt2").save_pretrained(tmp_path, max_shard_size="8KB")
    a, b = sorted(tmp_path.glob("model-*.safetensors"))[:2]
    sa, sb = load_file(a), load_file(b)
    k = next(iter(sa)); save_file(sb | {k: sa[k]}, b, metadata={"format": "pt"})
    with pytest.raises(ValueError, match=f"tensor '{k}' is stored twice"): from_pretrained(tmp_path)

def test_tied_head_that_differs(gpt2_dir):
    rewrite(gpt2_dir, lambda sd: sd | {"lm_head.weight": torch.zeros_like(sd["transformer.wte.weight"])})
    with pytest.raises(ValueError, match="'lm_head.weight' differs from the token embedding although tie_word_embeddings=true"):
        from_pretrained(gpt2_dir)

def test_truncated_and_not_safetensors(gpt2_dir):
    f = gpt2_dir / "model.safetensors"
    good = f.read_bytes()
    for bad in (good[:-64], good[:5], b"this is not a safetensors file at all", b""):
        f.write_bytes(bad)
        with pytest.raises(ValueError, match="model.safetensors is not a readable safetensors file"): from_pretrained(gpt2_dir)

def test_bad_bin_and_bad_json(tmp_path, gpt2_dir):
    (gpt2_dir / "model.safetensors").unlink()
    (gpt2_dir / "pytorch_model.bin").write_bytes(b"not a pickle")
    with pytest.raises(ValueError, match="pytorch_model.bin is not a readable PyTorch"): from_pretrained(gpt2_dir)
    (gpt2_dir / "config.json").write_text("{not json")
    with pytest.raises(ValueError, match="config.json is not valid JSON"): from_pretrained(gpt2_dir)
    (gpt2_dir / "config.json").write_text("{}")
    (gpt2_dir / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {}}))
    with pytest.raises(ValueError, match="config.json names no supported architecture"): from_pretrained(gpt2_dir)

@pytest.mark.parametrize("family,change,match", [
    ("gpt2", dict(architectures=["BertForMaskedLM"]), r"architectures=\['BertForMaskedLM'\] is not supported"),
    ("gpt2", dict(architectures=["GPT2LMHeadModel", "LlamaForCausalLM"]), "is not supported"),
    ("gpt2", dict(activation_function="gelu_fast"), "activation_function='gelu_fast' is not supported"),
    ("gpt2", dict(scale_attn_by_inverse_layer_idx=True), "scale_attn_by_inverse_layer_idx=True is not supported"),
    ("gpt2", dict(add_cross_attention=True), "add_cross_attention=True is not supported"),
    ("llama", dict(hidden_act="gelu"), "hidden_act='gelu' is not supported: only 'silu'"),
    ("llama", dict(head_dim=16), "head_dim=16 is not supported: only hidden_size // num_attention_heads = 8"),
    ("llama", dict(rope_scaling={"rope_type": "longrope", "factor": 2.0}), r"rope_scaling=.* is not supported: scaling rope_type='longrope'"),
    ("llama", dict(rope_parameters={"rope_type": "llama3", "rope_theta": 500.0, "factor": 8.0}),
     r"rope_parameters=.* is not supported: scaling with rope_type='llama3' needs the keys \['low_freq_factor', 'high_freq_factor'\]"),
    ("llama", dict(rope_parameters={"rope_type": "linear", "rope_theta": 500.0, "factor": float("nan")}),
     r"rope_parameters=.* is not supported: .*factor"),
    ("llama", dict(attention_bias=True, mlp_bias=False), "attention_bias=True is not supported: it must equal mlp_bias=False"),
    ("llama", dict(num_key_value_heads=3), "num_key_value_heads=3 is not supported: must divide num_attention_heads=4"),
    ("qwen2", dict(use_sliding_window=True, sliding_window=16, layer_types=["sliding_attention"] * 2), "sliding_window=16 is not supported"),
])
def test_unsupported_config(tmp_path, family, change, match):
    reference(family).save_pretrained(tmp_path)
    edit_config(tmp_path, **change)
    with pytest.raises(ValueError, match=match): from_pretrained(tmp_path)

def test_qwen2_window_off_is_fine(tmp_path):
    ref = reference("qwen2", use_sliding_window=False, sliding_window=16)       # the window is configured but off
    ref.save_pretrained(tmp_path)
    check_equal(from_pretrained(tmp_path), ref, torch.float32)

def test_save_refuses_what_no_family_reproduces(tmp_path):
    base = dict(vocab_size=V, d_model=32, n_heads=4, n_layers=2, d_ff=64)
    for kw, match in ((dict(), "scale_embeddings=True cannot be saved as gpt2"),
                      (dict(scale_embeddings=False), "positional='sinusoidal' cannot be saved as gpt2"),
                      (dict(scale_embeddings=False, positional="learned", norm_first=False), "norm_first=False cannot be saved"),
                      (dict(scale_embeddings=False, positional="learned", bias=False), "bias=False cannot be saved as gpt2"),
                      (dict(scale_embeddings=False, positional="alibi", norm="rms", activation="swiglu"), "positional='alibi' cannot be saved as llama"),
                      (dict(scale_embeddings=False, positional="rope", norm="rms", activation="gelu"), "activation='gelu' cannot be saved as llama"),
                      (dict(scale_embeddings=False, positional="rope", norm="rms", activation="swiglu", qkv_bias=False),
                       "bias=True with qkv_bias=False has no Hugging Face family")):
        with pytest.raises(ValueError, match=match): save_pretrained(DecoderOnlyLM(TransformerConfig(**base, **kw)), tmp_path)
    assert not (tmp_path / "config.json").exists()
    with pytest.raises(TypeError, match="model must be a DecoderOnlyLM"): save_pretrained(torch.nn.Linear(2, 2), tmp_path)
    m = our_model("gpt2"); m.norm.weight.data = m.norm.weight.data.double()
    with pytest.raises(ValueError, match="the parameters have dtypes"): save_pretrained(m, tmp_path)
    for bad in (0, -5, "10 parsecs", 1.5, True):
        with pytest.raises(ValueError, match="max_shard_size=.* must be None, a positive int"): save_pretrained(our_model("gpt2"), tmp_path, max_shard_size=bad)

def test_shard_sizes():
    assert ck._shard_bytes("5MB") == 5 * 10**6 and ck._shard_bytes("2GiB") == 2 * 2**30 and ck._shard_bytes(123) == 123
    assert ck._shard_bytes(None) is None

def test_config_round_trip():
    "config_to_hf then config_from_hf gives the config back (dropout and eps included)."
    for kind in ("gpt2", "llama", "qwen2", "llama_bias"):
        c = our_model(kind).config
        fam, back = config_from_hf(config_to_hf(c))
        keep = lambda x: {k: v for k, v in dataclasses.asdict(x).items() if k not in ("backend", "layer_norm_eps", "qkv_bias", "n_kv_heads")}
        assert keep(back) == keep(c), (kind, keep(back), keep(c))
        assert (back.n_kv_heads or back.n_heads) == (c.n_kv_heads or c.n_heads)

def test_defaults_are_transformers_defaults():
    "A field missing from config.json means what the transformers config class assumes."
    classes = dict(gpt2=GPT2Config, llama=LlamaConfig, mistral=MistralConfig, qwen2=Qwen2Config)
    for fam, C in classes.items():
        c = C()
        for k, v in ck._DEFAULTS[fam].items():
            if k.startswith("rope_") or k == "layer_types": continue        # 5.x keeps these in rope_parameters / derives them
            if k == "num_key_value_heads" and v is None: v = c.num_attention_heads
            if k == "head_dim" and v is None: v = c.hidden_size // c.num_attention_heads
            if fam == "qwen2" and k == "sliding_window": continue          # 5.x stores None unless use_sliding_window
            assert getattr(c, k) == v, (fam, k, getattr(c, k), v)
        if fam != "gpt2": assert c.rope_parameters["rope_theta"] == ck._DEFAULTS[fam]["rope_theta"]

def test_qwen2_layer_types_rule(tmp_path):
    "Sliding layers only from max_window_layers on, and only with use_sliding_window (transformers' rule)."
    reference("qwen2").save_pretrained(tmp_path)
    edit_config(tmp_path, use_sliding_window=True, sliding_window=16, max_window_layers=2, layer_types=None)
    from_pretrained(tmp_path)                                                    # 2 layers, both below max_window_layers
    edit_config(tmp_path, max_window_layers=1)
    with pytest.raises(ValueError, match="sliding_window=16 is not supported"): from_pretrained(tmp_path)
    edit_config(tmp_path, use_sliding_window=False, layer_types=["sliding_attention"] * 2)
    from_pretrained(tmp_path)                                                    # window off: no layer slides

def test_rope_scaling_default_is_accepted(tmp_path):
    ref = reference("llama")
    ref.save_pretrained(tmp_path)
    edit_config(tmp_path, rope_scaling={"rope_type": "default", "rope_theta": 500.0})
    check_equal(from_pretrained(tmp_path), ref, torch.float32)

def test_bfloat16_checkpoint(tmp_path):
    "A bfloat16 checkpoint loads in bfloat16 by default, and as exact float32 upcasts on request."
    ref = reference("qwen2", torch.bfloat16)
    ref.save_pretrained(tmp_path, max_shard_size="8KB")
    ours = from_pretrained(tmp_path)
    assert {p.dtype for p in ours.parameters()} == {torch.bfloat16}
    up = from_pretrained(tmp_path, dtype=torch.float32)
    q = ref.model.layers[1].self_attn
    expect = torch.cat([q.q_proj.weight, q.k_proj.weight, q.v_proj.weight]).float()
    assert torch.equal(up.blocks[1].self_attn.sublayer.in_proj.weight, expect)
    assert torch.equal(up.tok.weight, ref.model.embed_tokens.weight.float())
    x = ids()
    with torch.no_grad():                                    # same weights, bfloat16 arithmetic on both sides
        assert rel(ours(x).float(), ref(x).logits.float()) < 0.02   # measured about 5e-3

def test_sharded_pytorch_bin(tmp_path):
    "pytorch_model.bin.index.json with two .bin shards, read one at a time."
    ref = reference("mistral", tied=False)
    ref.config.save_pretrained(tmp_path)
    sd = {k: v.contiguous() for k, v in ref.state_dict().items()}
    names = list(sd); half = len(names) // 2
    parts = {"pytorch_model-00001-of-00002.bin": names[:half], "pytorch_model-00002-of-00002.bin": names[half:]}
    for f, ns in parts.items(): torch.save({n: sd[n] for n in ns}, tmp_path / f)
    (tmp_path / "pytorch_model.bin.index.json").write_text(json.dumps({"weight_map": {n: f for f, ns in parts.items() for n in ns}}))
    check_equal(from_pretrained(tmp_path), ref, torch.float32)

# ---------------------------------------------------------------- RoPE scaling (chapter 06) through config.json
ROPE_SCALINGS = [dict(rope_type="linear", factor=2.0),
                 dict(rope_type="dynamic", factor=2.0),
                 dict(rope_type="yarn", factor=4.0, original_max_position_embeddings=16),
                 dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                      original_max_position_embeddings=16)]

@pytest.mark.parametrize("scaling", ROPE_SCALINGS, ids=lambda s: s["rope_type"])
def test_rope_scaling_loads_and_saves(tmp_path, scaling):
    "A LLaMA checkpoint with RoPE scaling: our logits equal transformers' past the original length, and the round trip keeps it."
    ref = reference("llama", rope_parameters=dict(scaling, rope_theta=500.0))
    ref.save_pretrained(tmp_path)
    ours = from_pretrained(tmp_path)
    assert ours.config.rope_scaling["rope_type"] == scaling["rope_type"]
    assert ours.pos.rotary.scaling == ours.config.rope_scaling
    x = ids(T=96 if scaling["rope_type"] == "dynamic" else 48)      # 48 > 16 (yarn, llama3); dynamic: 96 > max_position_embeddings
    with torch.no_grad():
        assert rel(ours(x), ref(x).logits) < 1e-5
        save_pretrained(ours, tmp_path / "back")
        back = AutoModelForCausalLM.from_pretrained(tmp_path / "back").eval()
        assert back.config.rope_parameters["rope_type"] == scaling["rope_type"]
        assert rel(back(x).logits, ref(x).logits) < 1e-5

def test_legacy_rope_scaling_type_key(tmp_path):
    "A 4.x config.json with rope_scaling={'type': 'linear', ...} beside a default rope_parameters is read as linear."
    hf = config_to_hf(TransformerConfig(V, 32, 4, 2, d_ff=56, positional="rope", norm="rms", activation="swiglu", bias=False,
                                        scale_embeddings=False, tie_embeddings=False, n_kv_heads=2, max_len=64))
    _, c = config_from_hf(hf | {"rope_scaling": {"type": "linear", "factor": 2.0}})
    assert c.rope_scaling == {"rope_type": "linear", "factor": 2.0}
    with pytest.raises(ValueError, match=r"rope_scaling=.*is not supported: .*factor"):
        config_from_hf(hf | {"rope_scaling": {"type": "linear", "factor": 0.5}})


@pytest.mark.parametrize("family,change,exc,match", [   # fields the table-driven suite (tests/bad_input_cases.py) does not try
    ("llama", dict(tie_word_embeddings="false"), TypeError, r"^tie_word_embeddings='false' must be a bool"),
    ("llama", dict(attention_bias=1), TypeError, r"^attention_bias=1 must be a bool"),
    ("llama", dict(num_key_value_heads=0), ValueError, r"^num_key_value_heads=0 must be a positive int or None"),
    ("llama", dict(intermediate_size=2.5), TypeError, r"^intermediate_size=2.5 must be a positive int"),
    ("llama", dict(attention_dropout=1.0), ValueError, r"^attention_dropout=1.0 must be a number in \[0, 1\)"),
    ("llama", dict(rope_parameters={"rope_type": "default", "rope_theta": "1e4"}), TypeError, r"^rope_theta='1e4' must be a finite number > 1"),
    ("gpt2", dict(n_embd="32"), TypeError, r"^n_embd='32' must be a positive int"),
    ("gpt2", dict(n_inner=0), ValueError, r"^n_inner=0 must be a positive int or None"),
    ("gpt2", dict(layer_norm_epsilon=0), ValueError, r"^layer_norm_epsilon=0 must be a finite number > 0"),
    ("gpt2", dict(resid_pdrop=float("nan")), ValueError, r"^resid_pdrop=nan must be a number in \[0, 1\)"),
])
def test_config_fields_are_checked_under_their_config_json_names(family, change, exc, match):
    hf = reference(family).config.to_dict()
    config_from_hf(hf)                                                        # as transformers writes it: accepted
    with pytest.raises(exc, match=match): config_from_hf(hf | change)

def test_path_and_dtype_arguments(tmp_path):
    with pytest.raises(TypeError, match=r"^path must be a str or os.PathLike \(a directory\), got int"): ck.weight_files(3)
    reference("llama").save_pretrained(tmp_path)
    assert ck.weight_files(str(tmp_path)) == ck.weight_files(tmp_path) == [tmp_path / "model.safetensors"]
    c = config_from_hf(json.loads((tmp_path / "config.json").read_text()))[1]
    with pytest.raises(TypeError, match=r"^dtype='float32' must be one of \[torch.float64"): config_to_hf(c, "float32")
    assert config_to_hf(c, torch.bfloat16)["dtype"] == "bfloat16"
    with pytest.raises(TypeError, match=r"^config must be a TransformerConfig or None, got dict"): ck.mapping_table("llama", {})
    with pytest.raises(TypeError, match=r"^hf must be a dict \(a parsed config.json\), got str"): config_from_hf(str(tmp_path / "config.json"))


# ---------------------------------------------------------------- RoPE scaling as real config.json files write it
SCALING_EXTRA = {"linear": dict(factor=2.0), "dynamic": dict(factor=2.0), "yarn": dict(factor=4.0),
                 "llama3": dict(factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0)}
SPELLINGS = [(kind, key, field, orig) for kind in SCALING_EXTRA for key in ("rope_type", "type")
             for field in ("rope_scaling", "rope_parameters") for orig in (None, 16) if not (kind == "linear" and orig)]

@pytest.mark.parametrize("kind,key,field,orig", SPELLINGS, ids=lambda v: str(v))
def test_rope_scaling_as_checkpoints_write_it(tmp_path, kind, key, field, orig):
    """Both key spellings (rope_type/type), the 4.x field (rope_scaling + rope_theta) and the 5.x one (rope_parameters),
    with and without original_max_position_embeddings (16, unlike max_position_embeddings=64): logits equal transformers'.
    Dynamic NTK takes its original length from max_position_embeddings, as transformers does, and runs past it."""
    reference("llama").save_pretrained(tmp_path)
    hf = json.loads((tmp_path / "config.json").read_text())
    s = {key: kind, **SCALING_EXTRA[kind]} | ({"original_max_position_embeddings": orig} if orig else {})
    if field == "rope_scaling":
        hf.pop("rope_parameters", None); hf.update(rope_theta=500.0, rope_scaling=s)
    else: hf["rope_parameters"] = dict(s, rope_theta=500.0)
    (tmp_path / "config.json").write_text(json.dumps(hf))
    ref = AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    ours = from_pretrained(tmp_path)
    assert ours.config.rope_scaling["rope_type"] == kind
    if kind == "dynamic": assert ours.config.rope_scaling["original_max_position_embeddings"] == 64 and ours.config.max_len == 128
    x = ids(T=96 if kind == "dynamic" else 48)                       # dynamic: longer than max_position_embeddings=64
    with torch.no_grad(): assert rel(ours(x), ref(x).logits) < TOL[torch.float32]


@pytest.mark.parametrize("family", FAMILIES)
def test_bfloat16_matches_within_the_bfloat16_error(tmp_path, family):
    """bfloat16, the dtype real checkpoints ship in. Truth: the same bfloat16 weights in float32 arithmetic. Ours must be
    no worse than twice transformers' own error (the flash-attn rule); then the two differ by about the sum of both."""
    import copy
    ref = reference(family, torch.bfloat16, tied=True)
    truth = copy.deepcopy(ref).float()
    ref.save_pretrained(tmp_path)
    ours = from_pretrained(tmp_path)
    assert {p.dtype for p in ours.parameters()} == {torch.bfloat16}
    x = ids()
    with torch.no_grad():
        t, a, b = truth(x).logits, ours(x).float(), ref(x).logits.float()
    e_ours, e_ref = rel(a, t), rel(b, t)
    assert 0 < e_ref and e_ours <= 2 * e_ref
    assert rel(a, b) <= 2 * (e_ours + e_ref)
