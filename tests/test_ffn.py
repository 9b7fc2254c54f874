"""Tests for transformer_lit.ffn: FeedForward, SwiGLU, swiglu_hidden_dim, ffn_param_count, make_ffn."""
import copy, math, re
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from hypothesis import given, strategies as st
from torch.autograd import gradcheck

from transformer_lit.ffn import (ACTIVATIONS, FeedForward, SwiGLU, ffn_param_count, get_activation, make_ffn,
                                 swiglu_hidden_dim)
from transformer_lit.multihead import attention_cost

F64 = torch.float64
count = lambda m: sum(p.numel() for p in m.parameters() if p.requires_grad)

def torch_ffn_path(layer, x):
    "The feed-forward path of nn.TransformerEncoderLayer (without its residual dropout2)."
    return layer.linear2(layer.dropout(layer.activation(layer.linear1(x))))

def ours_from_torch_layer(layer, activation):
    ffn = FeedForward(layer.linear1.in_features, layer.linear1.out_features, activation=activation)
    ffn = ffn.to(layer.linear1.weight.dtype)
    with torch.no_grad():
        ffn.w1.weight.copy_(layer.linear1.weight); ffn.w1.bias.copy_(layer.linear1.bias)
        ffn.w2.weight.copy_(layer.linear2.weight); ffn.w2.bias.copy_(layer.linear2.bias)
    return ffn

# ---------------------------------------------------------------- activations
def test_activation_table_matches_formulas():
    z = torch.linspace(-6, 6, 1001, dtype=F64)
    torch.testing.assert_close(ACTIVATIONS["relu"](z), z.clamp_min(0), rtol=0, atol=0)   # max(z, 0) rounds nothing
    torch.testing.assert_close(ACTIVATIONS["gelu"](z), 0.5 * z * (1 + torch.erf(z / math.sqrt(2))), rtol=0, atol=1e-15)
    tanh_form = 0.5 * z * (1 + torch.tanh(math.sqrt(2 / math.pi) * (z + 0.044715 * z**3)))
    torch.testing.assert_close(ACTIVATIONS["gelu_tanh"](z), tanh_form, rtol=0, atol=1e-14)
    torch.testing.assert_close(ACTIVATIONS["silu"](z), z * torch.sigmoid(z), rtol=0, atol=1e-15)
    assert set(ACTIVATIONS) == {"relu", "gelu", "gelu_tanh", "silu"}

def test_gelu_tanh_is_close_but_not_equal_to_gelu():
    z = torch.linspace(-4, 4, 8001, dtype=F64)
    gap = (ACTIVATIONS["gelu"](z) - ACTIVATIONS["gelu_tanh"](z)).abs().max().item()
    assert 1e-4 < gap < 1e-3

@pytest.mark.parametrize("bad", ["tanh", "swiglu", "ReLU", ""])
def test_unknown_activation_names_the_choices(bad):
    msg = f"activation={bad!r} must be one of 'relu', 'gelu', 'gelu_tanh', 'silu'"
    with pytest.raises(ValueError, match=re.escape(msg)): get_activation(bad)
    with pytest.raises(ValueError, match=re.escape(msg)): FeedForward(8, 16, activation=bad)

def test_activation_must_be_a_string():
    with pytest.raises(TypeError, match=re.escape("activation must be a str, got function")):
        FeedForward(8, 16, activation=F.relu)

# ---------------------------------------------------------------- FeedForward
@pytest.mark.parametrize("act", ["relu", "gelu"])
def test_equals_torch_encoder_layer_ffn_float64(act):
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(24, 4, dim_feedforward=40, activation=act, batch_first=True,
                                       dtype=F64).eval()
    ffn = ours_from_torch_layer(layer, act)
    x = torch.randn(3, 7, 24, dtype=F64)
    torch.testing.assert_close(ffn(x), torch_ffn_path(layer, x), rtol=0, atol=1e-10)

@pytest.mark.parametrize("act", ["relu", "gelu"])
def test_float32_against_float64_reference(act):
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(32, 4, dim_feedforward=128, activation=act, batch_first=True,
                                       dtype=F64).eval()
    x = torch.randn(2, 113, 32, dtype=F64)
    ref = torch_ffn_path(layer, x)
    ffn32 = ours_from_torch_layer(layer, act).float()
    torch.testing.assert_close(ffn32(x.float()).double(), ref, atol=1e-5, rtol=1.3e-6)

def test_gelu_tanh_and_silu_against_hand_written_formula():
    torch.manual_seed(0)
    x = torch.randn(2, 5, 12, dtype=F64)
    for act, f in [("gelu_tanh", lambda h: F.gelu(h, approximate="tanh")), ("silu", lambda h: h * torch.sigmoid(h))]:
        ffn = FeedForward(12, 20, activation=act).double()
        expected = f(x @ ffn.w1.weight.T + ffn.w1.bias) @ ffn.w2.weight.T + ffn.w2.bias
        torch.testing.assert_close(ffn(x), expected, rtol=0, atol=1e-12)

def test_layer_names_and_shapes_map_onto_torch():
    ffn = FeedForward(16, 48)
    assert [n for n, _ in ffn.named_parameters()] == ["w1.weight", "w1.bias", "w2.weight", "w2.bias"]
    layer = nn.TransformerEncoderLayer(16, 2, dim_feedforward=48)
    assert ffn.w1.weight.shape == layer.linear1.weight.shape == (48, 16)
    assert ffn.w2.weight.shape == layer.linear2.weight.shape == (16, 48)
    assert [n for n, _ in FeedForward(16, 48, bias=False).named_parameters()] == ["w1.weight", "w2.weight"]

@given(lead=st.lists(st.integers(1, 4), min_size=0, max_size=3), d_model=st.integers(1, 12),
       d_ff=st.integers(1, 24), act=st.sampled_from(sorted(ACTIVATIONS)))
def test_shapes_for_any_leading_dims(lead, d_model, d_ff, act):
    torch.manual_seed(0)
    ffn = FeedForward(d_model, d_ff, activation=act)
    x = torch.randn(*lead, d_model)
    assert ffn(x).shape == x.shape
    assert ffn.hidden(x).shape == (*lead, d_ff)

# ---------------------------------------------------------------- position-wise
@given(B=st.integers(1, 3), T=st.integers(1, 9), d_model=st.integers(1, 10), d_ff=st.integers(1, 20),
       act=st.sampled_from(sorted(ACTIVATIONS) + ["swiglu"]), seed=st.integers(0, 2**16))
def test_position_wise_and_permutation_equivariant(B, T, d_model, d_ff, act, seed):
    torch.manual_seed(seed)
    ffn = make_ffn(d_model, d_ff, act).double()
    X = torch.randn(B, T, d_model, dtype=F64)
    Y = ffn(X)
    per_token = torch.stack([ffn(X[:, t]) for t in range(T)], dim=1)          # (B, T, d_model)
    torch.testing.assert_close(Y, per_token, rtol=0, atol=1e-12)
    perm = torch.randperm(T)
    torch.testing.assert_close(ffn(X[:, perm]), Y[:, perm], rtol=0, atol=1e-12)

def test_changing_one_token_changes_only_its_output():
    torch.manual_seed(0)
    ffn = FeedForward(8, 32, activation="gelu").double()
    X = torch.randn(2, 6, 8, dtype=F64)
    X2 = X.clone(); X2[:, 3] += 1.0
    diff = (ffn(X2) - ffn(X)).abs().amax(dim=(0, 2))                           # (T,)
    assert diff[3] > 0 and torch.all(diff[torch.arange(6) != 3] == 0)

# ---------------------------------------------------------------- SwiGLU
def test_swiglu_equals_llama_formula():
    torch.manual_seed(0)
    sw = SwiGLU(20, 36).double()
    x = torch.randn(2, 7, 20, dtype=F64)
    w1, w2, w3 = sw.w1.weight, sw.w2.weight, sw.w3.weight
    expected = (F.silu(x @ w1.T) * (x @ w3.T)) @ w2.T                           # w2 is the output projection
    torch.testing.assert_close(sw(x), expected, rtol=0, atol=1e-12)
    assert [n for n, _ in sw.named_parameters()] == ["w1.weight", "w2.weight", "w3.weight"]
    assert w1.shape == w3.shape == (36, 20) and w2.shape == (20, 36)

def test_swiglu_default_width_and_bias():
    assert SwiGLU(64).w1.out_features == swiglu_hidden_dim(64) == 256
    assert SwiGLU(64, multiple_of=32).w1.out_features == 192
    sw = SwiGLU(8, 12, bias=True)
    assert [n for n, _ in sw.named_parameters()] == ["w1.weight", "w1.bias", "w2.weight", "w2.bias",
                                                     "w3.weight", "w3.bias"]
    torch.manual_seed(0)
    x = torch.randn(3, 8)
    expected = sw.w2(F.silu(sw.w1(x)) * sw.w3(x))
    torch.testing.assert_close(sw(x), expected, rtol=0, atol=0)

# ---------------------------------------------------------------- gradcheck
@pytest.mark.parametrize("act", sorted(ACTIVATIONS))
def test_gradcheck_feedforward(act):
    torch.manual_seed(0)
    ffn = FeedForward(5, 7, activation=act).double()
    x = torch.randn(2, 3, 5, dtype=F64, requires_grad=True)
    # finite differences (eps 1e-6) are wrong at ReLU's kink: the seeded inputs stay well away from it
    assert (ffn.w1(x).abs() > 1e-4).all()
    params = [p for p in ffn.parameters()]
    def f(x, *ps):
        w1, b1, w2, b2 = ps
        return F.linear(ACTIVATIONS[act](F.linear(x, w1, b1)), w2, b2)
    torch.testing.assert_close(f(x, *params), ffn(x), rtol=0, atol=0)
    assert gradcheck(lambda x: ffn(x), (x,))
    assert gradcheck(f, (x, *[p.detach().clone().requires_grad_() for p in params]))

def test_gradcheck_swiglu():
    torch.manual_seed(0)
    sw = SwiGLU(5, 6, bias=True).double()
    x = torch.randn(2, 3, 5, dtype=F64, requires_grad=True)
    assert gradcheck(lambda x: sw(x), (x,))
    ps = [p.detach().clone().requires_grad_() for p in (sw.w1.weight, sw.w3.weight, sw.w2.weight)]
    assert gradcheck(lambda x, w1, w3, w2: (F.silu(x @ w1.T) * (x @ w3.T)) @ w2.T, (x, *ps))

# ---------------------------------------------------------------- dropout
def test_dropout_acts_on_hidden_units_in_training_only():
    torch.manual_seed(0)
    ffn = FeedForward(6, 400, activation="gelu", dropout=0.5, bias=False)
    x = torch.randn(1, 6)
    ffn.eval()
    torch.testing.assert_close(ffn(x), ffn.w2(ffn.hidden(x)), rtol=0, atol=0)
    ffn.train()
    torch.manual_seed(1)
    y = ffn(x)
    torch.manual_seed(1)
    mask = F.dropout(torch.ones(1, 400), 0.5, training=True)                    # the same draw
    torch.testing.assert_close(y, ffn.w2(ffn.hidden(x) * mask), rtol=1e-6, atol=1e-6)
    assert 0 < (mask == 0).sum() < 400
    no_drop = FeedForward(6, 40, dropout=0.0).train()
    torch.testing.assert_close(no_drop(x), no_drop.eval()(x), rtol=0, atol=0)   # p = 0 passes the hidden units through

# ---------------------------------------------------------------- swiglu_hidden_dim
@pytest.mark.parametrize("d, expected", [(4096, 11008), (5120, 13824), (6656, 17920), (8192, 22016)])
def test_swiglu_hidden_dim_llama_sizes(d, expected):
    assert swiglu_hidden_dim(d) == expected

def test_swiglu_hidden_dim_multiplier():
    assert swiglu_hidden_dim(8192, multiple_of=4096, ffn_dim_multiplier=1.3) == 28672   # Llama-2-70B setting
    assert swiglu_hidden_dim(4096, multiple_of=1024, ffn_dim_multiplier=1.3) == 14336

def meta_rule(dim, multiple_of, ffn_dim_multiplier=None):
    "Meta's reference code, transcribed: hidden_dim = 4*dim, then int(2*hidden_dim/3), then round up."
    hidden_dim = int(2 * (4 * dim) / 3)
    if ffn_dim_multiplier is not None: hidden_dim = int(ffn_dim_multiplier * hidden_dim)
    return multiple_of * ((hidden_dim + multiple_of - 1) // multiple_of)

@given(d=st.integers(1, 20000), m=st.sampled_from([1, 2, 8, 64, 256, 1024]))
def test_swiglu_hidden_dim_is_the_smallest_multiple_at_least_two_thirds_of_4d(d, m):
    h = swiglu_hidden_dim(d, m)
    assert h % m == 0 and h >= 8 * d // 3 > h - m
    assert h == meta_rule(d, m)

def test_llama_totals_match_paper_table2():
    "Touvron et al. 2023, Table 2: 6.7B, 13.0B, 32.5B, 65.2B (vocabulary 32000, untied embeddings)."
    for (d, L), paper in {(4096, 32): 6.7, (5120, 40): 13.0, (6656, 60): 32.5, (8192, 80): 65.2}.items():
        block = attention_cost(d, 1, 1, bias=False)["params"] + ffn_param_count(d, swiglu_hidden_dim(d), gated=True, bias=False) + 2 * d
        total = L * block + 2 * 32000 * d + d
        assert math.floor(total / 1e8) / 10 == paper
    assert 32 * (4 * 4096**2 + 3 * 4096 * 11008 + 2 * 4096) + 2 * 32000 * 4096 + 4096 == 6_738_415_616

# ---------------------------------------------------------------- parameter counts
@given(d=st.integers(1, 64), d_ff=st.integers(1, 96), bias=st.booleans())
def test_param_counts_against_modules(d, d_ff, bias):
    assert count(FeedForward(d, d_ff, bias=bias)) == ffn_param_count(d, d_ff, bias=bias)
    assert count(SwiGLU(d, d_ff, bias=bias)) == ffn_param_count(d, d_ff, gated=True, bias=bias)
    assert ffn_param_count(d, d_ff, bias=bias) == 2 * d * d_ff + (d_ff + d if bias else 0)
    assert ffn_param_count(d, d_ff, gated=True, bias=bias) == 3 * d * d_ff + (2 * d_ff + d if bias else 0)

@pytest.mark.parametrize("d, h, d_ff", [(16, 2, 64), (64, 8, 256), (512, 8, 2048), (40, 5, 100)])
def test_encoder_layer_is_attention_plus_ffn_plus_norms(d, h, d_ff):
    layer = nn.TransformerEncoderLayer(d, h, dim_feedforward=d_ff)
    assert count(layer) == attention_cost(d, h, 1)["params"] + ffn_param_count(d, d_ff) + 4 * d

@given(d=st.integers(1, 5000))
def test_ffn_is_two_thirds_of_block_weights_and_swiglu_is_one_and_a_half(d):
    ffn, att = ffn_param_count(d, 4 * d, bias=False), attention_cost(d, 1, 1, bias=False)["params"]
    assert 3 * ffn == 2 * (ffn + att)                                          # exactly 2/3, biases ignored
    assert 2 * ffn_param_count(d, 4 * d, gated=True, bias=False) == 3 * ffn    # exactly 1.5x at equal d_ff
    with_bias = ffn_param_count(d, 4 * d) / (ffn_param_count(d, 4 * d) + attention_cost(d, 1, 1)["params"] + 4 * d)
    assert with_bias < 2 / 3

@given(k=st.integers(1, 200))
def test_swiglu_at_two_thirds_rule_keeps_8d2_when_exact(k):
    d = 3 * k                                                                    # 8d/3 is an integer
    assert ffn_param_count(d, 8 * d // 3, gated=True, bias=False) == 8 * d * d == ffn_param_count(d, 4 * d, bias=False)

# ---------------------------------------------------------------- key-value memory view
@pytest.mark.parametrize("module", [FeedForward(8, 12, activation="gelu"), SwiGLU(8, 12, bias=True)])
def test_output_is_sum_of_coefficient_times_value(module):
    torch.manual_seed(0)
    module = module.double()
    x = torch.randn(5, 8, dtype=F64)
    m = module.hidden(x)                                                       # (N, d_ff)
    bias = module.w2.bias if module.w2.bias is not None else 0
    torch.testing.assert_close(module(x), m @ module.w2.weight.T + bias, rtol=0, atol=1e-12)

def test_editing_one_value_changes_output_by_coefficient_times_change():
    torch.manual_seed(0)
    ffn = FeedForward(8, 12, activation="relu").double()
    x = torch.randn(6, 8, dtype=F64)
    edited = copy.deepcopy(ffn)
    delta = torch.randn(8, dtype=F64)
    with torch.no_grad(): edited.w2.weight[:, 4] += delta
    m4 = ffn.hidden(x)[:, 4:5]                                                 # (N, 1)
    torch.testing.assert_close(edited(x) - ffn(x), m4 * delta, rtol=0, atol=1e-12)
    assert ((m4 == 0).squeeze(1) == ((edited(x) - ffn(x)).abs().amax(-1) == 0)).all()

# ---------------------------------------------------------------- make_ffn
def test_make_ffn_dispatch():
    f = make_ffn(16, 64, "gelu", dropout=0.1)
    assert type(f) is FeedForward and f.activation == "gelu" and f.dropout.p == 0.1
    s = make_ffn(16, None, "swiglu", bias=False)
    assert type(s) is SwiGLU and s.w1.out_features == swiglu_hidden_dim(16) and s.w1.bias is None
    assert make_ffn(16, 40, "swiglu").w1.out_features == 40

# ---------------------------------------------------------------- bad input
@pytest.mark.parametrize("kwargs, msg", [
    (dict(d_model=16, d_ff=0), "d_ff=0 must be a positive int"),
    (dict(d_model=16, d_ff=-3), "d_ff=-3 must be a positive int"),
    (dict(d_model=0, d_ff=8), "d_model=0 must be a positive int"),

    (dict(d_model=16, d_ff=8, dropout=1.5), "dropout=1.5 must be a number in [0, 1)"),
    (dict(d_model=16, d_ff=8, dropout=-0.1), "dropout=-0.1 must be a number in [0, 1)"),
])
def test_feedforward_bad_arguments(kwargs, msg):
    with pytest.raises(ValueError, match=re.escape(msg)): FeedForward(**kwargs)

@pytest.mark.parametrize("d_ff", [2.5, True, "8"])
def test_feedforward_non_int_width_is_a_type_error(d_ff):
    with pytest.raises(TypeError, match=f"^{re.escape(f'd_ff={d_ff!r} must be a positive int')}$"): FeedForward(16, d_ff)

@pytest.mark.parametrize("args, kwargs, msg", [
    ((16,), dict(d_ff=0), "d_ff=0 must be a positive int"),
    ((0,), {}, "d_model=0 must be a positive int"),
    ((16,), dict(multiple_of=0), "multiple_of=0 must be a positive int"),
    ((16,), dict(dropout=1.0), "dropout=1.0 must be a number in [0, 1)"),
])
def test_swiglu_bad_arguments(args, kwargs, msg):
    with pytest.raises(ValueError, match=re.escape(msg)): SwiGLU(*args, **kwargs)

def test_swiglu_hidden_dim_bad_arguments():
    with pytest.raises(ValueError, match=re.escape("d_model=-1 must be a positive int")): swiglu_hidden_dim(-1)
    with pytest.raises(ValueError, match=re.escape("multiple_of=0 must be a positive int")): swiglu_hidden_dim(64, 0)
    with pytest.raises(ValueError, match=re.escape("ffn_dim_multiplier=0 must be a positive number or None")):
        swiglu_hidden_dim(64, ffn_dim_multiplier=0)

def test_param_count_and_make_ffn_bad_arguments():
    with pytest.raises(ValueError, match=re.escape("d_ff=0 must be a positive int")): ffn_param_count(8, 0)
    with pytest.raises(ValueError, match=re.escape("d_ff=None is only allowed with activation='swiglu', got activation='relu'")):
        make_ffn(8, None, "relu")
    with pytest.raises(ValueError, match=re.escape("activation='tanh' must be one of")): make_ffn(8, 16, "tanh")

@pytest.mark.parametrize("module", [FeedForward(16, 32), SwiGLU(16, 32)])
def test_wrong_input_width(module):
    with pytest.raises(ValueError, match=re.escape("x.shape[-1]=8 must equal d_model=16")):
        module(torch.randn(2, 3, 8))
    with pytest.raises(TypeError, match=re.escape("x must be a torch.Tensor, got list")):
        module([0.0] * 16)
    with pytest.raises(ValueError, match=re.escape("x.shape[-1]=None must equal d_model=16")):
        module(torch.tensor(1.0))


# -- dtypes, devices, empty inputs, compiling
def E(exc, msg): return pytest.raises(exc, match="^" + re.escape(msg) + "$")

@pytest.mark.parametrize("make", [lambda: FeedForward(8, 16), lambda: SwiGLU(8, 16), lambda: make_ffn(8, 16, "gelu")])
def test_module_refuses_other_dtypes_and_devices(make):
    m = make()
    x = torch.randn(2, 3, 8)
    for dt in (torch.int64, torch.bool, torch.uint8):
        with E(TypeError, f"x.dtype={dt} must be a floating dtype"): m(x.to(dt))
        with E(TypeError, f"x.dtype={dt} must be a floating dtype"): m.hidden(x.to(dt))
    for dt in (torch.float64, torch.float16, torch.bfloat16):
        with E(TypeError, f"x.dtype={dt} must equal the module's parameter dtype torch.float32"): m(x.to(dt))
    with E(ValueError, "x.device=meta must equal the module's parameter device cpu"): m(x.to("meta"))
    torch.testing.assert_close(m.double()(x.double()), m(x.double()))
    m.float()
    with torch.autocast("cpu", dtype=torch.bfloat16):                          # autocast casts for the matmuls itself
        assert m(x).dtype == torch.bfloat16 and m(x.bfloat16()).dtype == torch.bfloat16

@pytest.mark.parametrize("make", [lambda: FeedForward(8, 16), lambda: SwiGLU(8, 16)])
def test_empty_batch_gives_linear_shapes_and_gradients(make):
    m = make()
    for shape in [(0, 8), (0, 5, 8), (2, 0, 8)]:
        x = torch.randn(shape, requires_grad=True)
        y = m(x)
        assert y.shape == nn.Linear(8, 8)(x).shape == shape
        y.sum().backward()
        assert x.grad.shape == shape
        torch.testing.assert_close(m.w1.weight.grad, torch.zeros_like(m.w1.weight))

def test_bool_and_float_arguments():
    for bad in (1, "yes", None):
        with E(TypeError, f"bias={bad!r} must be a bool (True or False)"): FeedForward(8, 16, bias=bad)
        with E(TypeError, f"bias={bad!r} must be a bool (True or False)"): SwiGLU(8, 16, bias=bad)
        with E(TypeError, f"gated={bad!r} must be a bool (True or False)"): ffn_param_count(8, 16, gated=bad)
    for bad in (math.nan, math.inf, -math.inf):
        with E(ValueError, f"ffn_dim_multiplier={bad!r} must be a positive number or None"): swiglu_hidden_dim(64, 16, bad)
    with E(ValueError, "dropout=nan must be a number in [0, 1)"): FeedForward(8, 16, dropout=math.nan)

@pytest.mark.parametrize("make", [lambda: FeedForward(16, 32, "gelu"), lambda: SwiGLU(16, 32)])
def test_ffn_compiles_as_one_graph(make):
    torch._dynamo.reset()
    m = make()
    x = torch.randn(2, 5, 16)
    c = torch.compile(m, fullgraph=True, backend="eager")
    torch.testing.assert_close(c(x), m(x))


# ---------------------------------------------------------------- the chapter's opening lines equal the modules
def feed_forward(x, W1, b1, W2, b2, f):  return f(x @ W1 + b1) @ W2 + b2          # the chapter's first code cell
def swiglu(x, W1, W3, W2):               return (F.silu(x @ W1) * (x @ W3)) @ W2

@pytest.mark.parametrize("act", sorted(ACTIVATIONS))
def test_feedforward_is_the_one_line_formula(act):
    torch.manual_seed(0)
    m = FeedForward(12, 20, activation=act).double()
    x = torch.randn(3, 4, 12, dtype=F64)
    torch.testing.assert_close(m(x), feed_forward(x, m.w1.weight.T, m.w1.bias, m.w2.weight.T, m.w2.bias, ACTIVATIONS[act]),
                               atol=1e-12, rtol=0)

@pytest.mark.parametrize("bias", [False, True])
def test_swiglu_is_the_one_line_formula(bias):
    torch.manual_seed(0)
    m = SwiGLU(12, 20, bias=bias).double()
    x = torch.randn(3, 4, 12, dtype=F64)
    if bias:   # with biases the line's x W + b in each projection
        ref = (F.silu(x @ m.w1.weight.T + m.w1.bias) * (x @ m.w3.weight.T + m.w3.bias)) @ m.w2.weight.T + m.w2.bias
    else: ref = swiglu(x, m.w1.weight.T, m.w3.weight.T, m.w2.weight.T)
    torch.testing.assert_close(m(x), ref, atol=1e-12, rtol=0)
    # the hidden units are F.silu(a) * b, one fused-friendly line: bit for bit
    assert torch.equal(m.hidden(x), F.silu(m.w1(x)) * m.w3(x))
