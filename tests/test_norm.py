"""Tests for transformer_lit.norm: LayerNorm/RMSNorm against torch, gradcheck, dtypes, bad input,
the pre-/post-norm `Residual` wrapper (against torch's encoder layer) and the Xiong et al. (2020) claim."""
import math
import pytest
import torch
import torch.nn as nn
from hypothesis import given, strategies as st

from transformer_lit.multihead import MultiHeadAttention
from transformer_lit.norm import (LayerNorm, RMSNorm, Residual, TinyEncoder, ffn_grad_norms, layer_norm, rms_norm)

TOL = {torch.float64: dict(atol=1e-10, rtol=1e-10), torch.float32: dict(atol=1e-5, rtol=1.3e-6)}


def _pair(kind, d, eps, dtype, bias=True, seed=0):
    "Our norm and torch's with the same random affine parameters."
    torch.manual_seed(seed)
    if kind == "layer": ref, ours = nn.LayerNorm(d, eps=eps, bias=bias, dtype=dtype), LayerNorm(d, eps=eps, bias=bias)
    else: ref, ours = nn.RMSNorm(d, eps=eps, dtype=dtype), RMSNorm(d, eps=eps)
    with torch.no_grad():
        for p in ref.parameters(): p.normal_()
    ours = ours.to(dtype)
    ours.load_state_dict(ref.state_dict())
    return ours, ref


# -- equality with torch, forward and backward

@given(kind=st.sampled_from(["layer", "rms"]), dtype=st.sampled_from([torch.float64, torch.float32]),
       lead=st.lists(st.integers(1, 5), min_size=0, max_size=3), d=st.sampled_from([1, 2, 7, 16, 40, 113]),
       eps=st.sampled_from([1e-6, 1e-5, 1e-3, 0.5]), bias=st.booleans(), scale=st.sampled_from([1e-3, 1.0, 1e3]))
def test_equal_to_torch(kind, dtype, lead, d, eps, bias, scale):
    ours, ref = _pair(kind, d, eps, dtype, bias)
    x = (scale * torch.randn(*lead, d, dtype=dtype) + 0.5).requires_grad_()
    g = torch.randn(*lead, d, dtype=dtype)
    a, b = ours(x), ref(x)
    assert a.dtype == dtype and a.shape == x.shape
    torch.testing.assert_close(a, b, **TOL[dtype])
    ga = torch.autograd.grad(a, [x, *ours.parameters()], g)
    gb = torch.autograd.grad(b, [x, *ref.parameters()], g)
    assert len(ga) == len(gb)
    # the gradient's natural scale is |g|·|γ|/√(σ² + ε): rounding errors of either side are relative to it
    xd = x.detach().double()
    stat = xd.var(-1, unbiased=False) if kind == "layer" else xd.pow(2).mean(-1)
    scale = (g.abs().max() * ref.weight.abs().max()).item() / math.sqrt(stat.min().item() + eps)
    for u, v in zip(ga, gb):
        bound = max(1.0, v.abs().max().item(), scale)
        torch.testing.assert_close(u, v, atol=TOL[dtype]["atol"] * bound, rtol=TOL[dtype]["rtol"])


def test_float32_against_float64_reference():
    "float32 output within atol 1e-5 / rtol 1.3e-6 of the float64 computation (DESIGN tolerances)."
    torch.manual_seed(1)
    x = torch.randn(4, 33, 64, dtype=torch.float64)
    for f in (layer_norm, rms_norm):
        torch.testing.assert_close(f(x.float()), f(x).float(), atol=1e-5, rtol=1.3e-6)


def test_state_dict_names_match_torch():
    assert set(LayerNorm(8).state_dict()) == set(nn.LayerNorm(8).state_dict()) == {"weight", "bias"}
    assert set(LayerNorm(8, bias=False).state_dict()) == set(nn.LayerNorm(8, bias=False).state_dict()) == {"weight"}
    assert set(RMSNorm(8).state_dict()) == set(nn.RMSNorm(8).state_dict()) == {"weight"}


def test_defaults():
    assert LayerNorm(8).eps == 1e-5 == nn.LayerNorm(8).eps
    assert RMSNorm(8).eps == 1e-6
    torch.testing.assert_close(LayerNorm(8).weight, torch.ones(8)); torch.testing.assert_close(LayerNorm(8).bias, torch.zeros(8))


@pytest.mark.parametrize("f", [layer_norm, rms_norm])
def test_gradcheck(f):
    torch.manual_seed(0)
    x = torch.randn(3, 5, 6, dtype=torch.float64, requires_grad=True)
    w = torch.randn(6, dtype=torch.float64, requires_grad=True)
    if f is layer_norm:
        b = torch.randn(6, dtype=torch.float64, requires_grad=True)
        assert torch.autograd.gradcheck(lambda x, w, b: f(x, w, b, eps=1e-3), (x, w, b))
        assert torch.autograd.gradgradcheck(lambda x, w, b: f(x, w, b, eps=1e-3), (x, w, b))
    else:
        assert torch.autograd.gradcheck(lambda x, w: f(x, w, eps=1e-3), (x, w))
        assert torch.autograd.gradgradcheck(lambda x, w: f(x, w, eps=1e-3), (x, w))


# -- statistics and properties

@given(d=st.integers(2, 64), a=st.floats(0.1, 100), b=st.floats(-100, 100))
def test_layer_norm_properties(d, a, b):
    x = torch.randn(3, d, dtype=torch.float64)
    y = layer_norm(x, eps=1e-12)
    torch.testing.assert_close(y.mean(-1), torch.zeros(3, dtype=torch.float64), atol=1e-10, rtol=0)
    torch.testing.assert_close(y.var(-1, unbiased=False), torch.ones(3, dtype=torch.float64), atol=1e-8, rtol=0)
    torch.testing.assert_close(layer_norm(a * x + b, eps=1e-12), y, atol=1e-7, rtol=0)   # shift/scale invariance
    torch.testing.assert_close(layer_norm(-x, eps=1e-12), -y, atol=1e-12, rtol=0)


def test_biased_variance_and_eps_inside_sqrt():
    x = torch.tensor([1.0, 2.0, 3.0, 6.0], dtype=torch.float64)   # mean 3, biased variance 3.5
    expected = (x - 3.0) / math.sqrt(3.5 + 0.25)
    torch.testing.assert_close(layer_norm(x, eps=0.25), expected, atol=1e-15, rtol=0)
    torch.testing.assert_close(rms_norm(x, eps=0.25), x / math.sqrt((1 + 4 + 9 + 36) / 4 + 0.25), atol=1e-15, rtol=0)


def test_constant_input_gives_zeros_not_nan():
    x = torch.full((2, 8), 5.0, requires_grad=True)
    y = LayerNorm(8)(x)
    assert torch.equal(y, torch.zeros(2, 8))
    (g,) = torch.autograd.grad(y.sum(), x)
    assert torch.isfinite(g).all()
    assert torch.equal(RMSNorm(8)(torch.zeros(2, 8)), torch.zeros(2, 8))


@pytest.mark.parametrize("eps", [1e-5, 1e-3])
def test_constant_token_gradient_is_the_centring_over_sqrt_eps(eps):
    # at an exactly constant token the Jacobian of LayerNorm is (I - 11^T/d)/sqrt(eps): finite, equal to torch's
    torch.manual_seed(0)
    x = torch.full((3, 8), 2.0, dtype=torch.float64, requires_grad=True)
    u = torch.randn(3, 8, dtype=torch.float64)
    (ours,) = torch.autograd.grad((u * layer_norm(x, eps=eps)).sum(), x)
    (ref,) = torch.autograd.grad((u * nn.functional.layer_norm(x, (8,), eps=eps)).sum(), x)
    torch.testing.assert_close(ours, ref, **TOL[torch.float64])
    torch.testing.assert_close(ours, (u - u.mean(-1, keepdim=True)) / math.sqrt(eps), **TOL[torch.float64])


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("kind", ["layer", "rms"])
def test_half_inputs_use_float32_statistics(kind, dtype):
    torch.manual_seed(0)
    x = (300 * torch.randn(4, 7, 64)).to(dtype)   # squares overflow float16 (max 65504) unless upcast
    m = (LayerNorm if kind == "layer" else RMSNorm)(64)
    with torch.no_grad(): m.weight.normal_()
    ref = m(x.float())                            # float32 computation on the same (rounded) input
    m16 = m.to(dtype)
    y = m16(x)
    assert y.dtype == dtype and torch.isfinite(y).all()
    torch.testing.assert_close(y.float(), ref, atol=2e-2 if dtype == torch.bfloat16 else 5e-3, rtol=1e-2)


# -- bad input

@pytest.mark.parametrize("cls", [LayerNorm, RMSNorm])
def test_bad_constructor_arguments(cls):
    for eps in (0.0, -1e-5, float("nan"), float("inf")):
        with pytest.raises(ValueError, match=rf"^eps={eps!r} must be a finite number > 0$"): cls(8, eps=eps)
    with pytest.raises(TypeError, match=r"^eps=True must be a finite number > 0$"): cls(8, eps=True)      # a bool is not a number
    with pytest.raises(TypeError, match=r"^eps='1e-5' must be a finite number > 0$"): cls(8, eps="1e-5")  # the wrong kind: TypeError
    for d in (0, -3):
        with pytest.raises(ValueError, match=rf"^d={d!r} must be a positive int$"): cls(d)
    for d in (2.0, True, None):
        with pytest.raises(TypeError, match=rf"^d={d!r} must be a positive int$"): cls(d)


@pytest.mark.parametrize("cls", [LayerNorm, RMSNorm])
def test_bad_forward_input(cls):
    m = cls(16)
    with pytest.raises(ValueError, match=r"^x.shape\[-1\]=8 must equal the normalized size d=16$"): m(torch.randn(2, 3, 8))
    with pytest.raises(ValueError, match=r"^x.shape\[-1\]=None must equal the normalized size d=16$"): m(torch.tensor(1.0))
    with pytest.raises(TypeError, match=r"^x.dtype=torch.int64 must be a floating dtype$"): m(torch.ones(2, 16, dtype=torch.long))
    with pytest.raises(TypeError, match=r"^x must be a torch.Tensor, got list$"): m([0.0] * 16)


@pytest.mark.parametrize("f", [layer_norm, rms_norm])
def test_functional_eps_checked(f):
    with pytest.raises(ValueError, match=r"^eps=0 must be a finite number > 0$"): f(torch.randn(3, 4), eps=0)


# -- the Residual wrapper

class Scale(nn.Module):
    "A sublayer with an extra argument, to check that arguments are passed on."
    def forward(self, x, factor, shift=0.0): return factor * x + shift


def test_residual_formulas_and_argument_passing():
    torch.manual_seed(0)
    x = torch.randn(2, 5, 8, dtype=torch.float64)
    pre = Residual(Scale(), 8, norm_first=True).double()
    post = Residual(Scale(), 8, norm_first=False).double()
    torch.testing.assert_close(pre(x, 3.0, shift=1.0), x + 3.0 * layer_norm(x) + 1.0, atol=1e-12, rtol=0)
    torch.testing.assert_close(post(x, 3.0, shift=1.0), layer_norm(4.0 * x + 1.0), atol=1e-12, rtol=0)
    assert pre.norm_first and not post.norm_first


def test_residual_norm_choices():
    f = nn.Linear(8, 8)
    assert isinstance(Residual(f, 8).norm, LayerNorm) and Residual(f, 8).norm.eps == 1e-5
    assert isinstance(Residual(f, 8, norm="rms").norm, RMSNorm) and Residual(f, 8, norm="rms").norm.eps == 1e-6
    assert Residual(f, 8, eps=1e-3).norm.eps == 1e-3 and Residual(f, 8, norm="rms", eps=1e-4).norm.eps == 1e-4
    given_norm = nn.LayerNorm(8)
    assert Residual(f, 8, norm=given_norm).norm is given_norm
    assert Residual(f, 8).sublayer is f


def test_residual_bad_arguments():
    f = nn.Linear(8, 8)
    with pytest.raises(ValueError, match=r"^norm='batch' must be 'layer', 'rms' or an nn.Module$"): Residual(f, 8, norm="batch")
    with pytest.raises(ValueError, match=r"^norm=None must be 'layer', 'rms' or an nn.Module$"): Residual(f, 8, norm=None)
    with pytest.raises(ValueError, match=r"^eps=1e-05 applies only when norm is 'layer' or 'rms', not a module$"):
        Residual(f, 8, norm=nn.LayerNorm(8), eps=1e-5)
    with pytest.raises(TypeError, match=r"^norm_first=1 must be a bool$"): Residual(f, 8, norm_first=1)
    with pytest.raises(ValueError, match=r"^d_model=0 must be a positive int$"): Residual(f, 0)
    with pytest.raises(ValueError, match=r"^dropout=1.0 must be a number in \[0, 1\)$"): Residual(f, 8, dropout=1.0)
    with pytest.raises(ValueError, match=r"^dropout=-0.1 must be a number in \[0, 1\)$"): Residual(f, 8, dropout=-0.1)
    with pytest.raises(TypeError, match=r"^sublayer must be callable \(an nn.Module\), got int$"): Residual(3, 8)
    with pytest.raises(ValueError, match=r"^eps=0.0 must be a finite number > 0$"): Residual(f, 8, eps=0.0)


def test_residual_dropout_only_in_training():
    torch.manual_seed(0)
    r = Residual(nn.Linear(8, 8), 8, dropout=0.5)
    x = torch.randn(4, 6, 8)
    r.eval()
    torch.testing.assert_close(r(x), x + r.sublayer(r.norm(x)))
    r.train()
    with torch.no_grad(): y = r(x) - x                      # dropped entries are exactly 0, kept ones doubled
    full = 2 * r.sublayer(r.norm(x)).detach()
    kept = y != 0
    assert 0 < kept.float().mean() < 1
    torch.testing.assert_close(y[kept], full[kept])


def _zero_out_block(norm_first, d=16):
    attn = MultiHeadAttention(d, 4)
    ffn = nn.Sequential(nn.Linear(d, 4 * d), nn.ReLU(), nn.Linear(4 * d, d))
    for lin in (attn.out_proj, ffn[2]): nn.init.zeros_(lin.weight); nn.init.zeros_(lin.bias)
    return nn.Sequential(Residual(attn, d, norm_first), Residual(ffn, d, norm_first))


def test_identity_at_initialisation():
    torch.manual_seed(0)
    x = 3 + 2 * torch.randn(2, 6, 16)
    with torch.no_grad():
        assert torch.equal(_zero_out_block(True)(x), x)                       # pre-norm: exactly the identity
        y = _zero_out_block(False)(x)                                         # post-norm: LN(LN(x)), not x
    torch.testing.assert_close(y, layer_norm(layer_norm(x)), atol=1e-6, rtol=0)
    assert (y - x).abs().max() > 1.0


@pytest.mark.parametrize("norm_first", [True, False])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_residual_pair_equals_torch_encoder_layer(norm_first, dtype):
    "Two `Residual`s (attention, FFN) with torch's weights equal `nn.TransformerEncoderLayer`, both placements."
    torch.manual_seed(0)
    d, ff = 32, 64
    ref = nn.TransformerEncoderLayer(d, 4, ff, dropout=0.0, batch_first=True, norm_first=norm_first, dtype=dtype).eval()
    with torch.no_grad():
        for n in (ref.norm1, ref.norm2): n.weight.normal_(); n.bias.normal_()
    attn = MultiHeadAttention.from_torch(ref.self_attn)
    ffn = nn.Sequential(ref.linear1, nn.ReLU(), ref.linear2)
    norms = [LayerNorm(d, eps=ref.norm1.eps).to(dtype), LayerNorm(d, eps=ref.norm2.eps).to(dtype)]
    norms[0].load_state_dict(ref.norm1.state_dict()); norms[1].load_state_dict(ref.norm2.state_dict())
    first = Residual(attn, d, norm_first, norm=norms[0])
    second = Residual(ffn, d, norm_first, norm=norms[1])
    x = torch.randn(3, 7, d, dtype=dtype)
    keep = torch.rand(3, 7) > 0.3; keep[:, 0] = True
    mask = keep[:, None, None, :]                                               # (B, 1, 1, Lk), True = may attend
    with torch.no_grad():
        ours = second(first(x, mask=mask))
        theirs = ref(x, src_key_padding_mask=~keep)                             # torch: True = padding
    torch.testing.assert_close(ours, theirs, **TOL[dtype] if dtype == torch.float64 else dict(atol=1e-5, rtol=1e-5))


# -- the Xiong et al. (2020) reproduction

def test_tiny_encoder_shapes_and_errors():
    torch.manual_seed(0)
    m = TinyEncoder(11, 2, norm_first=True, d_model=16, n_heads=2, d_ff=32, max_len=9)
    assert m(torch.randint(11, (3, 9))).shape == (3, 9, 11)
    assert isinstance(m.final_norm, LayerNorm) and isinstance(TinyEncoder(11, 2, False).final_norm, nn.Identity)
    with pytest.raises(ValueError, match=r"^tokens.shape\[-1\]=10 must be <= max_len=9$"): m(torch.randint(11, (3, 10)))
    with pytest.raises(ValueError, match=r"^n_layers=0 must be a positive int$"): TinyEncoder(11, 0, True)


def test_ffn_grad_norms_match_autograd_and_leave_no_grad():
    torch.manual_seed(0)
    m = TinyEncoder(13, 3, norm_first=False, d_model=16, n_heads=2, d_ff=32)
    tokens, targets = torch.randint(13, (2, 5)), torch.randint(13, (2, 5))
    g = ffn_grad_norms(m, tokens, targets)
    assert g.shape == (3,) and all(p.grad is None for p in m.parameters())
    nn.functional.cross_entropy(m(tokens).flatten(0, 1), targets.flatten()).backward()
    torch.testing.assert_close(g, torch.stack([w.grad.norm() for w in m.ffn_out_weights()]))


def _profile(n_layers, norm_first, seeds=(0, 1), n_batches=2, vocab=32):
    total = torch.zeros(n_layers)
    for seed in seeds:
        torch.manual_seed(seed)
        m = TinyEncoder(vocab, n_layers, norm_first, d_model=32, n_heads=4, d_ff=64)
        for _ in range(n_batches):
            total += ffn_grad_norms(m, torch.randint(vocab, (8, 12)), torch.randint(vocab, (8, 12)))
    return total / (len(seeds) * n_batches)


@pytest.mark.parametrize("n_layers", [6, 12])
def test_xiong_post_ln_ratio_exceeds_pre_ln(n_layers):
    "At initialisation the last/first-layer gradient ratio of W2 is larger for Post-LN than for Pre-LN."
    post, pre = _profile(n_layers, False), _profile(n_layers, True)
    assert post[-1] / post[0] > pre[-1] / pre[0]
    assert post[-1] > pre[-1]


def test_testbed_is_not_public_api():
    "TinyEncoder and ffn_grad_norms are chapter 03's testbed: importable, but not among norm's public names."
    from transformer_lit import norm
    assert {"LayerNorm", "RMSNorm", "Residual"} <= set(norm.__all__)
    assert not {"TinyEncoder", "ffn_grad_norms"} & set(norm.__all__)
    assert callable(norm.TinyEncoder) and callable(norm.ffn_grad_norms)


# -- dtypes, devices, parameter shapes, empty inputs, compiling
import re
def E(exc, msg): return pytest.raises(exc, match="^" + re.escape(msg) + "$")

@pytest.mark.parametrize("cls", [LayerNorm, RMSNorm])
def test_module_refuses_other_dtypes_and_devices(cls):
    m = cls(8)
    x = torch.randn(2, 3, 8)
    for dt in (torch.int64, torch.bool, torch.int32):
        with E(TypeError, f"x.dtype={dt} must be a floating dtype"): m(x.to(dt))
    for dt in (torch.float64, torch.float16, torch.bfloat16):
        with E(TypeError, f"x.dtype={dt} must equal the module's parameter dtype torch.float32"): m(x.to(dt))
    with E(ValueError, "x.device=meta must equal the module's parameter device cpu"): m(x.to("meta"))
    torch.testing.assert_close(m.double()(x.double()), m(x.double()))          # converted, it takes float64
    with torch.autocast("cpu", dtype=torch.bfloat16):                          # autocast mixes dtypes on purpose
        assert cls(8)(x.bfloat16()).dtype == torch.bfloat16

@pytest.mark.parametrize("f", [layer_norm, rms_norm])
def test_functional_checks_x_weight_and_bias(f):
    x = torch.randn(2, 3, 8)
    with E(TypeError, "x must be a torch.Tensor, got list"): f([1.0] * 8)
    with E(TypeError, "x.dtype=torch.int64 must be a floating dtype"): f(x.long())
    with E(TypeError, "x.dtype=torch.bool must be a floating dtype"): f(x > 0)
    with E(ValueError, "x.dim()=0 must be at least 1: (..., d)"): f(torch.tensor(1.0))
    with E(ValueError, "x.shape[-1]=0 must be >= 1 (the normalized size d)"): f(torch.randn(2, 0))
    with E(ValueError, "weight.shape=(7,) must be (d,)=(8,), d = x.shape[-1]"): f(x, torch.ones(7))
    with E(ValueError, "weight.shape=(1, 8) must be (d,)=(8,), d = x.shape[-1]"): f(x, torch.ones(1, 8))
    with E(TypeError, "weight.dtype=torch.int64 must be a floating dtype"): f(x, torch.ones(8, dtype=torch.long))
    with E(TypeError, "weight must be a torch.Tensor or None, got list"): f(x, [1.0] * 8)
    with E(ValueError, "weight.device=meta must equal x.device=cpu"): f(x, torch.ones(8, device="meta"))
    for eps in (math.nan, math.inf, -1.0):
        with E(ValueError, f"eps={eps!r} must be a finite number > 0"): f(x, eps=eps)
    with E(TypeError, "eps=None must be a finite number > 0"): f(x, eps=None)           # None is not a number: the wrong kind

def test_layer_norm_bias_checked():
    x = torch.randn(2, 8)
    with E(ValueError, "bias.shape=(7,) must be (d,)=(8,), d = x.shape[-1]"): layer_norm(x, torch.ones(8), torch.zeros(7))
    with E(TypeError, "bias.dtype=torch.bool must be a floating dtype"): layer_norm(x, None, torch.zeros(8, dtype=torch.bool))
    with E(TypeError, "bias=1 must be a bool (True or False)"): LayerNorm(8, bias=1)

@pytest.mark.parametrize("kind", ["layer", "rms"])
def test_empty_batch_gives_torch_shapes_and_gradients(kind):
    ours = (LayerNorm if kind == "layer" else RMSNorm)(8)
    ref = nn.LayerNorm(8) if kind == "layer" else nn.RMSNorm(8, eps=1e-6)
    for shape in [(0, 8), (0, 5, 8), (3, 0, 8)]:
        x = torch.randn(shape, requires_grad=True)
        y, yr = ours(x), ref(x)
        assert y.shape == yr.shape == shape
        y.sum().backward()
        assert x.grad.shape == shape and ours.weight.grad.shape == (8,)
        torch.testing.assert_close(ours.weight.grad, torch.zeros(8))

def test_residual_passes_the_dtype_check_on():
    r = Residual(nn.Identity(), 8)
    with E(TypeError, "x.dtype=torch.float64 must equal the module's parameter dtype torch.float32"): r(torch.randn(2, 8, dtype=torch.float64))
    assert r(torch.randn(0, 3, 8)).shape == (0, 3, 8)

@pytest.mark.parametrize("cls", [LayerNorm, RMSNorm])
def test_norm_compiles_as_one_graph(cls):
    torch._dynamo.reset()
    m = cls(16)
    with torch.no_grad(): m.weight.normal_()
    x = torch.randn(2, 5, 16)
    c = torch.compile(m, fullgraph=True, backend="eager")
    torch.testing.assert_close(c(x), m(x))
    f = torch.compile(layer_norm if cls is LayerNorm else rms_norm, fullgraph=True, backend="aot_eager")
    torch.testing.assert_close(f(x, m.weight), (layer_norm if cls is LayerNorm else rms_norm)(x, m.weight))


# -- the modules run torch's fused kernels; the chapter's from-scratch functions compute the same numbers

U32 = 2.0 ** -24   # float32 unit roundoff

@pytest.mark.parametrize("kind, bias", [("layer", True), ("layer", False), ("rms", False)])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("d", [1, 7, 64, 1023])
def test_fused_module_equals_from_scratch(kind, bias, dtype, d):
    "Module (F.layer_norm / F.rms_norm) == layer_norm / rms_norm, forward and backward."
    torch.manual_seed(d)
    m = (LayerNorm(d, bias=bias) if kind == "layer" else RMSNorm(d)).to(dtype)
    with torch.no_grad():
        for p in m.parameters(): p.normal_()
    x = (3 * torch.randn(5, 3, d, dtype=dtype) + 1).requires_grad_()
    g = torch.randn(5, 3, d, dtype=dtype)
    fused = m(x)
    scratch = layer_norm(x, m.weight, m.bias, m.eps) if kind == "layer" else rms_norm(x, m.weight, m.eps)
    # A length-d sum (the mean, the variance) is off by about d·u of its terms' magnitude, u the unit roundoff; the
    # error in μ is then multiplied by |γ|/√(σ² + ε) (up to 1/√ε for a token whose variance is 0, as for d = 1).
    # 8x that is the tolerance: derived from the computation, with a wide margin.
    u = 2.0 ** -53 if dtype == torch.float64 else U32
    xd = x.detach().double()
    stat = (xd.var(-1, unbiased=False) if kind == "layer" else xd.pow(2).mean(-1)).min().item() + m.eps
    amp = 1 + xd.abs().max().item() / math.sqrt(stat)                    # |x| / √(σ² + ε): the amplification of an error in μ
    tol = 8 * d * u * amp * max(1.0, scratch.abs().max().item(), m.weight.abs().max().item())
    torch.testing.assert_close(fused, scratch, atol=tol, rtol=0)
    gf = torch.autograd.grad(fused, [x, *m.parameters()], g)
    gs = torch.autograd.grad(scratch, [x, *m.parameters()], g)
    gscale = g.abs().max().item() * max(1.0, m.weight.abs().max().item()) / math.sqrt(stat)   # the gradient's natural scale
    for a, b in zip(gf, gs):
        gtol = 8 * d * u * amp * max(1.0, b.abs().max().item(), gscale)
        torch.testing.assert_close(a, b, atol=gtol, rtol=0)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("kind", ["layer", "rms"])
def test_fused_half_within_twice_the_from_scratch_error(kind, dtype):
    "Half inputs: the fused module's error against float32 is at most 2x that of the from-scratch function (float32 statistics)."
    torch.manual_seed(0)
    d = 64
    x = (300 * torch.randn(6, 5, d)).to(dtype)                 # squares overflow float16 unless the statistics are float32
    m = (LayerNorm(d) if kind == "layer" else RMSNorm(d))
    with torch.no_grad():
        for p in m.parameters(): p.normal_()
    f = (lambda x, m: layer_norm(x, m.weight, m.bias, m.eps)) if kind == "layer" else (lambda x, m: rms_norm(x, m.weight, m.eps))
    mh = m.to(dtype)
    ref = f(x.float(), _float_copy(mh))                       # float32 on the same rounded input and parameters
    fused, scratch = mh(x), f(x, mh)
    assert fused.dtype == scratch.dtype == dtype and torch.isfinite(fused).all()
    err_f, err_s = (fused.float() - ref).abs().max().item(), (scratch.float() - ref).abs().max().item()
    assert err_s > 0 and err_f <= 2 * err_s


def _float_copy(m):
    "A float32 copy of a norm module whose parameters were rounded to half (the same numbers, in float32)."
    import copy
    return copy.deepcopy(m).float()


@pytest.mark.parametrize("cls", [LayerNorm, RMSNorm])
def test_gradcheck_fused_module(cls):
    torch.manual_seed(0)
    m = cls(6, eps=1e-3).double()
    with torch.no_grad():
        for p in m.parameters(): p.normal_()
    x = torch.randn(3, 5, 6, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(m, (x,))
    assert torch.autograd.gradgradcheck(m, (x,))


def test_residual_is_the_placement_formulas():
    "Residual's forward is pre_norm / post_norm of the chapter's opening cell."
    pre_norm = lambda x, f, norm: x + f(norm(x))
    post_norm = lambda x, f, norm: norm(x + f(x))
    torch.manual_seed(0)
    f = nn.Linear(8, 8).double()
    x = torch.randn(2, 5, 8, dtype=torch.float64)
    for norm_first, place in ((True, pre_norm), (False, post_norm)):
        r = Residual(f, 8, norm_first).double()
        torch.testing.assert_close(r(x), place(x, f, r.norm), atol=0, rtol=0)   # the same modules in the same order: the same computation
