"""Tests for transformer_lit.attention: equality with torch, gradients, properties, the backend registry, errors."""
import math, re, subprocess, sys
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, strategies as st
from transformer_lit import attention as A
from transformer_lit.attention import (attend, attention_backends, backend_info, choose_backend, lazy_backends,
                                       register_backend, scaled_dot_product_attention, torch_sdpa, unregister_backend)

BACKENDS = ["math", "sdpa"]
f64 = torch.float64

def rand(*shape, dtype=f64, seed=None):
    if seed is not None: torch.manual_seed(seed)
    return torch.randn(*shape, dtype=dtype)

def qkv(B=2, H=3, Lq=5, Lk=7, D=8, Dv=None, dtype=f64, seed=0):
    torch.manual_seed(seed)
    return (torch.randn(B, H, Lq, D, dtype=dtype), torch.randn(B, H, Lk, D, dtype=dtype),
            torch.randn(B, H, Lk, Dv or D, dtype=dtype))

def masks(B, H, Lq, Lk, dtype=f64):
    "Named (our kwargs, torch kwargs) pairs; every row keeps key 0 so torch has no fully masked row."
    g = torch.Generator().manual_seed(1)
    keep = torch.rand(Lq, Lk, generator=g) > 0.5; keep[:, 0] = True
    pad = torch.ones(B, 1, 1, Lk, dtype=torch.bool); pad[0, ..., Lk // 2 + 1:] = False
    flt = torch.randn(H, Lq, Lk, generator=g, dtype=dtype)
    return {"none": ({}, {}), "bool": (dict(mask=keep), dict(attn_mask=keep)),
            "bool_broadcast_padding": (dict(mask=pad), dict(attn_mask=pad)),
            "float": (dict(mask=flt), dict(attn_mask=flt)),
            "float_with_inf": (dict(mask=flt.masked_fill(~keep, -math.inf)), dict(attn_mask=flt.masked_fill(~keep, -math.inf))),
            "causal": (dict(is_causal=True), dict(is_causal=True)),
            "scale": (dict(scale=0.37), dict(scale=0.37))}

MASK_NAMES = list(masks(2, 3, 5, 7))

# -- equality with F.scaled_dot_product_attention
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", MASK_NAMES)
@pytest.mark.parametrize("Lq,Lk", [(5, 7), (1, 1), (113, 7)])
def test_equals_torch_float64(backend, name, Lq, Lk):
    q, k, v = qkv(Lq=Lq, Lk=Lk, Dv=4)
    ours_kw, torch_kw = masks(2, 3, Lq, Lk)[name]
    out = attention_backends[backend](q, k, v, **ours_kw)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, **torch_kw), atol=1e-10, rtol=0)

@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["none", "bool", "float", "causal"])
@pytest.mark.parametrize("D", [8, 40, 64, 128])
def test_float32_against_float64(backend, name, D):
    q, k, v = qkv(Lq=7, Lk=113, D=D)
    ours_kw, torch_kw = masks(2, 3, 7, 113)[name]
    ref = F.scaled_dot_product_attention(q, k, v, **torch_kw)
    ours_kw = {a: (b.float() if isinstance(b, torch.Tensor) and b.is_floating_point() else b) for a, b in ours_kw.items()}
    out = attention_backends[backend](q.float(), k.float(), v.float(), **ours_kw)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out.double(), ref, atol=1e-5, rtol=1.3e-6)

@pytest.mark.parametrize("backend", BACKENDS)
def test_length_1023_causal(backend):
    q, k, v = qkv(B=1, H=1, Lq=1023, Lk=1023, D=16)
    torch.testing.assert_close(attention_backends[backend](q, k, v, is_causal=True),
                               F.scaled_dot_product_attention(q, k, v, is_causal=True), atol=1e-10, rtol=0)

@pytest.mark.parametrize("backend", BACKENDS)
def test_non_contiguous_and_leading_dims(backend):
    x = rand(3, 7, 2, 4, 8, seed=2)                           # (B, Lk, X, H, D) made non-contiguous below
    q, k, v = x.permute(0, 2, 3, 1, 4)[..., :5, :], x.permute(0, 2, 3, 1, 4), x.flip(1).permute(0, 2, 3, 1, 4)
    assert not q.is_contiguous() and not k.is_contiguous()
    ref = F.scaled_dot_product_attention(q.contiguous(), k.contiguous(), v.contiguous())
    torch.testing.assert_close(attention_backends[backend](q, k, v), ref, atol=1e-10, rtol=0)
    q2 = rand(6, 3, seed=3)                                    # no batch dims at all
    torch.testing.assert_close(attention_backends[backend](q2, q2, q2), F.scaled_dot_product_attention(q2, q2, q2), atol=1e-10, rtol=0)

# -- fully masked rows: zeros, finite gradients
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", ["bool", "float"])
def test_fully_masked_rows_are_zero(backend, kind):
    q, k, v = (t.requires_grad_() for t in qkv(Lq=4, Lk=6))
    keep = torch.ones(4, 6, dtype=torch.bool); keep[2] = False
    mask = keep if kind == "bool" else torch.zeros(4, 6, dtype=f64).masked_fill(~keep, -math.inf)
    out = attention_backends[backend](q, k, v, mask=mask)
    assert torch.equal(out[..., 2, :], torch.zeros_like(out[..., 2, :]))
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
    torch.testing.assert_close(out[..., [0, 1, 3], :], ref[..., [0, 1, 3], :], atol=1e-10, rtol=0)
    out.sum().backward()
    for t in (q, k, v): assert torch.isfinite(t.grad).all()
    assert torch.equal(q.grad[..., 2, :], torch.zeros_like(q.grad[..., 2, :]))

@pytest.mark.parametrize("backend", BACKENDS)
def test_no_keys_gives_zeros(backend):
    q, k, v = (t.requires_grad_() for t in qkv(Lq=3, Lk=0, Dv=4))
    out = attention_backends[backend](q, k, v)
    assert out.shape == (2, 3, 3, 4) and torch.equal(out, torch.zeros_like(out))
    out.sum().backward()
    assert torch.equal(q.grad, torch.zeros_like(q))

def test_math_weights_rows_sum_to_one_or_zero():
    q, k, v = qkv(Lq=4, Lk=6)
    keep = torch.rand(4, 6) > 0.5; keep[1] = False; keep[0] = True
    _, w = scaled_dot_product_attention(q, k, v, mask=keep, return_weights=True)
    torch.testing.assert_close(w.sum(-1), keep.any(-1).to(f64).expand(2, 3, 4), atol=1e-12, rtol=0)
    assert torch.equal(w.masked_select(~keep.expand_as(w)), torch.zeros((~keep.expand_as(w)).sum(), dtype=f64))

# -- gradients
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["none", "bool", "float_with_inf", "causal"])
def test_gradcheck(backend, name):
    q, k, v = (t.requires_grad_() for t in qkv(B=1, H=2, Lq=3, Lk=4, D=3, Dv=2))
    kw = masks(1, 2, 3, 4)[name][0]
    assert torch.autograd.gradcheck(lambda a, b, c: attention_backends[backend](a, b, c, **kw), (q, k, v))

@pytest.mark.parametrize("backend", BACKENDS)
def test_gradcheck_float_mask_is_differentiable(backend):
    q, k, v = qkv(B=1, H=1, Lq=3, Lk=4, D=3)
    bias = torch.randn(3, 4, dtype=f64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda b: attention_backends[backend](q, k, v, mask=b), (bias,))

# -- precision
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("backend", BACKENDS)
def test_low_precision_within_2x_torch(dtype, backend):
    q, k, v = qkv(B=2, H=2, Lq=64, Lk=64, D=32, dtype=torch.float32, seed=4)
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    low = [t.to(dtype) for t in (q, k, v)]
    out = attention_backends[backend](*low, is_causal=True)
    assert out.dtype == dtype
    err = (out.float() - ref).abs().max().item()
    err_torch = (F.scaled_dot_product_attention(*low, is_causal=True).float() - ref).abs().max().item()
    assert err <= 2 * err_torch + 1e-6, (err, err_torch)

def test_math_softmax_in_float32_for_half():
    q = torch.full((1, 2, 4), 200.0, dtype=torch.float16); k = q.clone(); v = torch.randn(1, 2, 4).half()
    assert torch.isinf(q @ k.transpose(-2, -1)).all()              # the scores 160000 overflow float16 ...
    out, w = scaled_dot_product_attention(q, k, v, return_weights=True)
    # exact arithmetic: each score 4·200² = 160000 and its scale 1/2 are exact in float32, and two equal scores give 1/2
    assert w.dtype == torch.float16 and torch.equal(w, torch.full_like(w, 0.5))   # ... but not our float32 scores
    torch.testing.assert_close(out, v.float().mean(1, keepdim=True).expand(1, 2, 4).half(), atol=1e-3, rtol=0)

# -- dropout
def test_dropout_matches_dropout_of_weights():
    q, k, v = qkv()
    _, w = scaled_dot_product_attention(q, k, v, return_weights=True)
    torch.manual_seed(5); out, wd = scaled_dot_product_attention(q, k, v, dropout_p=0.3, return_weights=True)
    torch.manual_seed(5); expect = F.dropout(w, 0.3, training=True)
    torch.testing.assert_close(wd, expect, atol=1e-12, rtol=0)
    torch.testing.assert_close(out, expect @ v, atol=1e-12, rtol=0)

# -- hypothesis properties
@st.composite
def problems(draw):
    B, H = draw(st.integers(1, 2)), draw(st.integers(1, 3))
    Lq, Lk, D, Dv = (draw(st.integers(1, 9)) for _ in range(4))
    seed = draw(st.integers(0, 2**16))
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(B, H, L, d, generator=g, dtype=f64) for L, d in ((Lq, D), (Lk, D), (Lk, Dv)))
    mask = torch.rand(B, 1, Lq, Lk, generator=g) > draw(st.sampled_from([0.0, 0.3, 0.7, 1.0]))
    return q, k, v, mask

@given(problems())
def test_property_rows_sum_to_one_or_zero(p):
    q, k, v, mask = p
    _, w = scaled_dot_product_attention(q, k, v, mask=mask, return_weights=True)
    torch.testing.assert_close(w.sum(-1), mask.any(-1).to(f64).expand(w.shape[:-1]), atol=1e-12, rtol=0)
    assert (w >= 0).all() and not w.isnan().any()

@given(problems(), st.randoms(use_true_random=False))
def test_property_permuting_keys_and_values(p, rnd):
    q, k, v, mask = p
    perm = list(range(k.shape[-2])); rnd.shuffle(perm); perm = torch.tensor(perm)
    for backend in BACKENDS:
        out = attention_backends[backend](q, k, v, mask=mask)
        out_p = attention_backends[backend](q, k[..., perm, :], v[..., perm, :], mask=mask[..., perm])
        torch.testing.assert_close(out_p, out, atol=1e-10, rtol=0)

@given(problems())
def test_property_backends_agree(p):
    q, k, v, mask = p
    torch.testing.assert_close(torch_sdpa(q, k, v, mask=mask), scaled_dot_product_attention(q, k, v, mask=mask), atol=1e-10, rtol=0)

# -- the registry and attend
def test_attend_reports_backend():
    q, k, v = qkv()
    res = attend(q, k, v)
    assert res.backend == "sdpa" and res.weights is None
    out, w, name = attend(q, k, v, need_weights=True)
    assert name == "math" and w.shape == (2, 3, 5, 7)
    torch.testing.assert_close(out, res.out, atol=1e-10, rtol=0)
    assert choose_backend(q, k, v) == "sdpa" and choose_backend(q, k, v, need_weights=True) == "math"
    assert attend(q, k, v, backend="math").backend == "math"

def test_register_supports_priority_and_unregister():
    q, k, v = qkv()
    calls = []
    def toy(q, k, v, mask=None, is_causal=False, scale=None, dropout_p=0.0):
        calls.append(1); return scaled_dot_product_attention(q, k, v, mask, is_causal, scale, dropout_p)
    register_backend("toy", toy, supports=lambda q, k, v, mask, is_causal, dropout_p: mask is None, priority=1000)
    try:
        assert attend(q, k, v).backend == "toy" and calls == [1]
        assert attend(q, k, v, is_causal=True).backend == "toy"
        keep = torch.ones(5, 7, dtype=torch.bool)
        assert attend(q, k, v, mask=keep).backend == "sdpa"          # falls back when unsupported
        with pytest.raises(ValueError, match=re.escape("backend='toy' does not support these inputs")):
            attend(q, k, v, mask=keep, backend="toy")
    finally: unregister_backend("toy")
    assert "toy" not in attention_backends and attend(q, k, v).backend == "sdpa"

def test_lazy_backend_is_imported_on_first_use(tmp_path, monkeypatch):
    (tmp_path / "lazy_toy_backend.py").write_text(
        "from transformer_lit.attention import register_backend, scaled_dot_product_attention\n"
        "register_backend('lazytoy', scaled_dot_product_attention, priority=-1)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(lazy_backends, "lazytoy", "lazy_toy_backend")
    q, k, v = qkv()
    try:
        assert "lazytoy" not in backend_info
        assert attend(q, k, v, backend="lazytoy").backend == "lazytoy"
        assert "lazytoy" in backend_info
    finally:
        if "lazytoy" in backend_info: unregister_backend("lazytoy")
        sys.modules.pop("lazy_toy_backend", None)

def test_missing_lazy_module_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(lazy_backends, "nothere", "transformer_lit_no_such_module")
    q, k, v = qkv()
    with pytest.raises(ValueError, match=re.escape("backend='nothere' is not available: 'nothere': its module transformer_lit_no_such_module is not installed")):
        attend(q, k, v, backend="nothere")

def test_import_is_light():
    code = "import sys, transformer_lit.attention; bad = [m for m in ('triton', 'matplotlib', 'transformer_lit.flash') if m in sys.modules]; assert not bad, bad"
    subprocess.run([sys.executable, "-c", code], check=True)

# -- bad inputs, each with its message
def E(exc, msg): return pytest.raises(exc, match="^" + re.escape(msg))

def test_bad_inputs():
    q, k, v = qkv()
    sdpa = scaled_dot_product_attention
    with E(TypeError, "q must be a torch.Tensor, got list"): sdpa([1.0], k, v)
    with E(TypeError, "k.dtype=torch.int64 must be a floating dtype"): sdpa(q, k.long(), v)
    with E(ValueError, "v.dim()=1 must be at least 2: (..., L, D)"): sdpa(q, k, v[0, 0, 0])
    with E(TypeError, "q.dtype=torch.float64, k.dtype=torch.float32, v.dtype=torch.float64 must be equal"): sdpa(q, k.float(), v)
    with E(ValueError, "q.shape=(2, 3, 5, 8), k.shape=(1, 3, 7, 8), v.shape=(1, 3, 7, 8) must agree in all dims before the last three (heads, L, D)"):
        sdpa(q, k[:1], v[:1])
    with E(ValueError, "q.shape=(2, 3, 5, 8), k.shape=(3, 7, 8), v.shape=(3, 7, 8) must agree in all dims before the last three"):
        sdpa(q, k[0], v[0])
    with E(ValueError, "q.shape[-1]=8 must equal k.shape[-1]=6 (the key dim d_k)"): sdpa(q, k[..., :6], v)
    with E(ValueError, "k.shape[-2]=7 must equal v.shape[-2]=6 (one value per key)"): sdpa(q, k, v[..., :6, :])
    with E(TypeError, "mask.dtype=torch.int64 must be torch.bool (True = may attend) or floating (added to the scores)"):
        sdpa(q, k, v, mask=torch.ones(5, 7, dtype=torch.long))
    with E(TypeError, "mask must be a torch.Tensor or None, got list"): sdpa(q, k, v, mask=[[True]])
    with E(ValueError, "mask.shape=(7, 5) must be broadcastable to (..., Lq, Lk)=(2, 3, 5, 7)"):
        sdpa(q, k, v, mask=torch.ones(7, 5, dtype=torch.bool))
    with E(ValueError, "mask.shape=(4, 3, 5, 7) must be broadcastable to (..., Lq, Lk)=(2, 3, 5, 7)"):
        sdpa(q, k, v, mask=torch.ones(4, 3, 5, 7, dtype=torch.bool))
    with E(ValueError, "is_causal=True together with an explicit mask is ambiguous"):
        sdpa(q, k, v, mask=torch.ones(5, 7, dtype=torch.bool), is_causal=True)
    for s in ("0.5", torch.tensor(0.5), True):
        for fn in (sdpa, torch_sdpa):
            with E(TypeError, f"scale={s!r} must be a number or None"): fn(q, k, v, scale=s)
    for p in (-0.1, 1.0, 1.5, "0.1"):
        with E(TypeError if isinstance(p, str) else ValueError, f"dropout_p={p!r} must be a number in [0, 1)"): sdpa(q, k, v, dropout_p=p)
    with E(ValueError, "backend='fast' must be one of ['auto', 'flash', 'math', 'sdpa', 'triton']"): attend(q, k, v, backend="fast")
    with E(ValueError, "backend='sdpa' cannot return weights: need_weights=True needs backend='math' or 'auto'"):
        attend(q, k, v, need_weights=True, backend="sdpa")
    for fn in (torch_sdpa, lambda *a, **kw: attend(*a, **kw)):
        with E(ValueError, "q.shape[-1]=8 must equal k.shape[-1]=6"): fn(q, k[..., :6], v)
        with E(ValueError, "is_causal=True together with an explicit mask is ambiguous"):
            fn(q, k, v, mask=torch.ones(5, 7, dtype=torch.bool), is_causal=True)
    with E(ValueError, "name='auto' must be a non-empty string other than 'auto'"): register_backend("auto", sdpa)
    with E(TypeError, "fn=3 must be callable"): register_backend("x", 3)
    with E(ValueError, "name='nope' is not a registered backend"): unregister_backend("nope")


# ---------------------------------------------------------------- check_int, the integer check of every chapter
def test_check_int_rules_and_messages():
    import numpy as np
    from transformer_lit.attention import check_int
    assert check_int("n", 3) == 3 and type(check_int("n", np.int64(3))) is int
    assert check_int("n", 0, minimum=0) == 0 and check_int("n", None, allow_none=True) is None
    assert check_int("n", 26, 1, 26) == 26 and check_int("d", 8, even=True) == 8
    cases = [(dict(value=True), TypeError, "n=True must be a positive int"),
             (dict(value=2.0), TypeError, "n=2.0 must be a positive int"),
             (dict(value="4"), TypeError, "n='4' must be a positive int"),
             (dict(value=None), TypeError, "n=None must be a positive int"),
             (dict(value=0), ValueError, "n=0 must be a positive int"),
             (dict(value=-1, minimum=0), ValueError, "n=-1 must be an int >= 0"),
             (dict(value=27, minimum=1, maximum=26), ValueError, "n=27 must be an int in [1, 26]"),
             (dict(value=7, even=True), ValueError, "n=7 must be a positive even int"),
             (dict(value=0, allow_none=True), ValueError, "n=0 must be a positive int or None"),
             (dict(value=1.5, allow_none=True), TypeError, "n=1.5 must be a positive int or None")]
    for kw, err, msg in cases:
        with pytest.raises(err, match=f"^{re.escape(msg)}$"): check_int("n", **kw)


def test_prefer_takes_a_backend_before_the_priority_order():
    "A low-priority backend with a `prefer` predicate is chosen by 'auto' exactly where the predicate says so."
    q = torch.randn(2, 3, 5, 8)
    A.register_backend("slow_but_preferred", A.scaled_dot_product_attention, priority=-5,
                       prefer=lambda q, k, v, mask, is_causal, dropout_p: is_causal)
    try:
        assert choose_backend(q, q, q, is_causal=True) == "slow_but_preferred"
        assert choose_backend(q, q, q) == "sdpa"
        assert choose_backend(q, q, q, is_causal=True, need_weights=True) == "math"   # weights still force math
    finally: A.unregister_backend("slow_but_preferred")
    assert choose_backend(q, q, q, is_causal=True) == "sdpa"
    A.register_backend("unsupported", A.scaled_dot_product_attention, supports=lambda *a: False, prefer=lambda *a: True)
    try: assert choose_backend(q, q, q) == "sdpa"                 # preferred but unsupported: never taken
    finally: A.unregister_backend("unsupported")
    with pytest.raises(TypeError, match=r"^prefer=1 must be callable or None$"):
        A.register_backend("bad", A.scaled_dot_product_attention, prefer=1)
    assert "bad" not in A.backend_info


# ---------------------------------------------------------------- grouped-query attention: G key/value heads for H query heads
from transformer_lit.attention import check_qkv, kv_groups, repeat_kv

def gqa_inputs(B=2, H=8, G=2, Lq=5, Lk=7, D=8, Dv=None, dtype=f64, seed=0, grad=False):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, H, Lq, D, generator=g, dtype=f64)
    k, v = torch.randn(B, G, Lk, D, generator=g, dtype=f64), torch.randn(B, G, Lk, Dv or D, generator=g, dtype=f64)
    return [t.to(dtype).requires_grad_(grad) for t in (q, k, v)]

def gqa_masks(B, H, Lq, Lk, kind, dtype=f64):
    "Our kwargs for one mask kind; bool masks differ per query head and leave one row fully masked."
    g = torch.Generator().manual_seed(3)
    keep = torch.rand(B, H, Lq, Lk, generator=g) > 0.5; keep[..., 0] = True
    if Lq > 1: keep[0, H - 1, Lq // 2] = False                     # a fully masked row in the last query head
    if kind == "none": return {}
    if kind == "causal": return dict(is_causal=True)
    if kind == "bool": return dict(mask=keep)
    if kind == "bool_2d": return dict(mask=keep[0, 0])
    if kind == "bool_padding": return dict(mask=keep[:, :1, :1])   # (B, 1, 1, Lk)
    if kind == "float": return dict(mask=torch.randn(H, Lq, Lk, generator=g, dtype=f64).to(dtype))
    if kind == "float_inf": return dict(mask=torch.randn(1, H, Lq, Lk, generator=g, dtype=f64).masked_fill(~keep[:1], -math.inf).to(dtype))
    raise KeyError(kind)

GQA_MASKS = ["none", "causal", "bool", "bool_2d", "bool_padding", "float", "float_inf"]

def oracle(q, k, v, **kw):
    "The repeat_kv oracle: copy every key/value head to its query heads, then ordinary (H = G) attention."
    n = q.shape[-3] // k.shape[-3]
    return scaled_dot_product_attention(q, repeat_kv(k, n), repeat_kv(v, n), **kw)

def test_repeat_kv_maps_query_head_h_to_kv_head_h_div_n():
    x = torch.arange(3.).view(1, 3, 1, 1).expand(2, 3, 4, 5)       # head g filled with g
    r = repeat_kv(x, 4)
    assert r.shape == (2, 12, 4, 5)
    assert torch.equal(r[0, :, 0, 0], torch.tensor([h // 4 for h in range(12)], dtype=torch.float32))
    assert repeat_kv(x, 1) is x
    assert kv_groups(torch.randn(2, 12, 4, 5), x) == 4 and kv_groups(torch.randn(4, 5), torch.randn(4, 5)) == 1

@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("G", [1, 2, 8])
@pytest.mark.parametrize("kind", GQA_MASKS)
@pytest.mark.parametrize("L", [1, 7, 113])
def test_gqa_equals_repeat_kv_oracle_float64_forward_and_grad(backend, G, kind, L):
    q, k, v = gqa_inputs(G=G, Lq=L, Lk=L, Dv=4, grad=True)
    kw = gqa_masks(2, 8, L, L, kind)
    out = attention_backends[backend](q, k, v, **kw)
    qr, kr, vr = (t.detach().clone().requires_grad_() for t in (q, k, v))
    ref = oracle(qr, kr, vr, **kw)
    torch.testing.assert_close(out, ref, atol=1e-10, rtol=0)
    do = torch.randn_like(out)
    out.backward(do); ref.backward(do)
    for ours, theirs in ((q, qr), (k, kr), (v, vr)):                # dK, dV of a shared head: the sum over its query heads
        torch.testing.assert_close(ours.grad, theirs.grad, atol=1e-10, rtol=0)

@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("G", [1, 2, 8])
@pytest.mark.parametrize("kind", ["none", "causal", "bool", "float"])
@pytest.mark.parametrize("L", [1, 7, 113])
def test_gqa_float32_against_float64(backend, G, kind, L):
    q, k, v = gqa_inputs(G=G, Lq=L, Lk=L, grad=True)
    kw64 = gqa_masks(2, 8, L, L, kind)
    ref = oracle(q, k, v, **kw64)
    do = torch.randn_like(ref)
    ref_grads = torch.autograd.grad(ref, (q, k, v), do)
    q32, k32, v32 = (t.detach().float().requires_grad_() for t in (q, k, v))
    kw32 = {a: (b.float() if isinstance(b, torch.Tensor) and b.is_floating_point() else b) for a, b in kw64.items()}
    out = attention_backends[backend](q32, k32, v32, **kw32)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out.double(), ref, atol=1e-5, rtol=1.3e-6)
    for g32, g64 in zip(torch.autograd.grad(out, (q32, k32, v32), do.float()), ref_grads):
        torch.testing.assert_close(g32.double(), g64, atol=1e-5, rtol=1.3e-6)

@pytest.mark.parametrize("backend", BACKENDS)
def test_gqa_h_equals_g_is_todays_path_bit_for_bit(backend):
    q, k, v = gqa_inputs(G=8, Lq=7, Lk=7, dtype=torch.float32)
    for kw in ({}, dict(is_causal=True), gqa_masks(2, 8, 7, 7, "bool", torch.float32)):
        # G = H: the oracle's repeat_kv(k, 1) is k itself, so math runs the same call; sdpa the same torch call on copies
        assert torch.equal(attention_backends[backend](q, k, v, **kw), oracle(q, k, v, **kw) if backend == "math"
                           else torch_sdpa(q, k.clone(), v.clone(), **kw))
    assert kv_groups(q, k) == 1

@pytest.mark.parametrize("kind", ["none", "bool", "float_inf", "causal"])
@pytest.mark.parametrize("G", [1, 2])
def test_gqa_gradcheck_math(kind, G):
    q, k, v = gqa_inputs(B=1, H=4, G=G, Lq=3, Lk=4, D=3, Dv=2, grad=True)
    kw = gqa_masks(1, 4, 3, 4, kind)
    assert torch.autograd.gradcheck(lambda a, b, c: scaled_dot_product_attention(a, b, c, **kw), (q, k, v))

def test_gqa_fully_masked_rows_are_zero_with_finite_grads():
    for backend in BACKENDS:
        q, k, v = gqa_inputs(G=2, Lq=4, Lk=6, grad=True)
        keep = torch.ones(8, 4, 6, dtype=torch.bool); keep[5, 2] = False   # query 2 of head 5 attends to nothing
        out = attention_backends[backend](q, k, v, mask=keep)
        assert torch.equal(out[:, 5, 2], torch.zeros_like(out[:, 5, 2]))
        out.sum().backward()
        for t in (q, k, v): assert torch.isfinite(t.grad).all()
        assert torch.equal(q.grad[:, 5, 2], torch.zeros_like(q.grad[:, 5, 2]))

def test_gqa_weights_and_leading_dims():
    q, k, v = gqa_inputs(G=2, Lq=5, Lk=7)
    out, w = scaled_dot_product_attention(q, k, v, return_weights=True)
    _, w_ref = oracle(q, k, v, return_weights=True)
    assert w.shape == (2, 8, 5, 7)
    torch.testing.assert_close(w, w_ref, atol=1e-12, rtol=0)
    q5, k5 = torch.randn(2, 3, 6, 4, 8, dtype=f64), torch.randn(2, 3, 2, 9, 8, dtype=f64)   # (B, X, H, L, D), (B, X, G, L, D)
    for backend in BACKENDS:
        torch.testing.assert_close(attention_backends[backend](q5, k5, k5), oracle(q5, k5, k5), atol=1e-10, rtol=0)
    q3, k3 = q5[0, 0], k5[0, 0]                                     # no batch dim: (H, L, D), (G, L, D)
    torch.testing.assert_close(torch_sdpa(q3, k3, k3), oracle(q3, k3, k3), atol=1e-10, rtol=0)

def test_gqa_dropout_matches_dropout_of_weights():
    q, k, v = gqa_inputs(G=2)
    _, w = scaled_dot_product_attention(q, k, v, return_weights=True)
    torch.manual_seed(5); out, wd = scaled_dot_product_attention(q, k, v, dropout_p=0.3, return_weights=True)
    torch.manual_seed(5); expect = F.dropout(w, 0.3, training=True)
    torch.testing.assert_close(wd, expect, atol=1e-12, rtol=0)
    torch.testing.assert_close(out, expect @ repeat_kv(v, 4), atol=1e-12, rtol=0)
    assert torch_sdpa(q, k, v, dropout_p=0.5).shape == (2, 8, 5, 8)   # torch's GQA path accepts dropout

def test_gqa_math_does_not_copy_keys_or_values():
    from torch.utils._python_dispatch import TorchDispatchMode
    class Copies(TorchDispatchMode):
        def __init__(self): super().__init__(); self.n = 0
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if str(func.overloadpacket).split(".")[-1] in ("clone", "copy_", "repeat_interleave", "expand_copy"): self.n += out.numel()
            return out
    q, k, v = gqa_inputs(B=1, H=8, G=2, Lq=1, Lk=512, D=16, dtype=torch.float32)
    for backend in BACKENDS:
        with Copies() as c: attention_backends[backend](q, k, v)
        assert c.n < k.numel(), (backend, c.n)                      # never a copy of the keys

def test_gqa_supports_and_auto():
    q, k, v = gqa_inputs(G=2)
    for name in BACKENDS: assert backend_info[name].supports(q, k, v, None, False, 0.0)
    assert choose_backend(q, k, v) == "sdpa" and attend(q, k, v).backend == "sdpa"
    res = attend(q, k, v, need_weights=True)
    assert res.backend == "math" and res.weights.shape == (2, 8, 5, 7)
    torch.testing.assert_close(res.out, oracle(q, k, v), atol=1e-10, rtol=0)

def test_gqa_older_torch_falls_back_to_repeat_kv(monkeypatch):
    q, k, v = gqa_inputs(G=2)
    monkeypatch.setattr(A, "_SDPA_HAS_GQA", False)
    calls = []
    real = F.scaled_dot_product_attention
    def spy(*a, **kw): calls.append(kw.get("enable_gqa", False)); return real(*a, **kw)
    monkeypatch.setattr(A.F, "scaled_dot_product_attention", spy)
    torch.testing.assert_close(torch_sdpa(q, k, v, is_causal=True), oracle(q, k, v, is_causal=True), atol=1e-10, rtol=0)
    assert calls == [False]

def test_gqa_bad_head_counts():
    q = torch.randn(2, 8, 5, 4)
    for G in (3, 5, 16):
        kk = torch.randn(2, G, 7, 4)
        msg = f"k.shape[-3]={G} key/value heads must divide q.shape[-3]=8 query heads"
        for fn in (scaled_dot_product_attention, torch_sdpa, check_qkv, lambda *a: attend(*a)):
            with E(ValueError, msg): fn(q, kk, kk)
    with E(ValueError, "k.shape[-3]=2 must equal v.shape[-3]=4 (one value head per key head)"):
        scaled_dot_product_attention(q, torch.randn(2, 2, 7, 4), torch.randn(2, 4, 7, 4))
    with E(ValueError, "k.shape[-3]=0 key/value heads must divide q.shape[-3]=8 query heads"):
        torch_sdpa(q, torch.randn(2, 0, 7, 4), torch.randn(2, 0, 7, 4))
    with E(ValueError, "mask.shape=(2, 5, 7) must be broadcastable to (..., Lq, Lk)=(2, 8, 5, 7)"):
        scaled_dot_product_attention(q, torch.randn(2, 2, 7, 4), torch.randn(2, 2, 7, 4), mask=torch.ones(2, 5, 7, dtype=torch.bool))
    with E(TypeError, "x must be a torch.Tensor, got list"): repeat_kv([1.0], 2)
    with E(ValueError, "x.dim()=2 must be at least 3: (..., G, L, D)"): repeat_kv(torch.randn(3, 4), 2)
    for n, err in ((0, ValueError), (-2, ValueError), (True, TypeError), (2.0, TypeError)):
        with E(err, f"n_rep={n!r} must be a positive int"): repeat_kv(torch.randn(1, 2, 3, 4), n)

@given(problems(), st.sampled_from([1, 2, 3]))
def test_property_gqa_backends_agree_with_oracle(p, n):
    q, k, v, mask = p                                               # H = k's heads, then n query heads per kv head
    qn = q.repeat_interleave(n, -3) + 0.1 * torch.randn_like(q.repeat_interleave(n, -3))
    for backend in BACKENDS:
        torch.testing.assert_close(attention_backends[backend](qn, k, v, mask=mask), oracle(qn, k, v, mask=mask), atol=1e-10, rtol=0)


# ---------------------------------------------------------------- bad values that would give NaN, empty inputs, compiling
ALL_BACKENDS = ["math", "sdpa", "flash"]

@pytest.mark.parametrize("backend", ALL_BACKENDS)
@pytest.mark.parametrize("s", [math.nan, math.inf, -math.inf, 10 ** 400])
def test_non_finite_scale_is_refused(backend, s):
    q, k, v = qkv()
    with E(ValueError, f"scale={s!r} must be a finite number or None"): attend(q, k, v, scale=s, backend=backend)
    with E(ValueError, f"scale={s!r} must be a finite number or None"): A.check_scale(s)

@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_scale_beyond_the_score_dtype_is_refused(backend):
    q, k, v = qkv(dtype=torch.float32)
    with E(ValueError, "scale=1e+300 must be a finite number or None, and finite in torch.float32 (the dtype of the scores), "
                       "whose largest value is 3.403e+38"):
        attend(q, k, v, scale=1e300, backend=backend)
    attend(*qkv(), scale=1e300, backend="math")                     # float64 scores hold it (and give no NaN here)

@pytest.mark.parametrize("backend", ALL_BACKENDS)
@pytest.mark.parametrize("s", [0.0, -0.5, 3])
def test_finite_scales_stay_legal(backend, s):
    q, k, v = qkv()
    torch.testing.assert_close(attend(q, k, v, scale=s, backend=backend).out, F.scaled_dot_product_attention(q, k, v, scale=float(s)))

@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_float_mask_with_plus_inf_or_nan_is_refused(backend):
    q, k, v = qkv()
    m = torch.zeros(5, 7, dtype=f64); m[2, 3] = math.inf
    with E(ValueError, "mask contains +inf (1 of 35 entries, the first at index (2, 3)); a float mask may hold finite values and -inf only"):
        attend(q, k, v, mask=m, backend=backend)
    m[2, 3] = math.nan; m[4, 0] = math.nan
    with E(ValueError, "mask contains NaN (2 of 35 entries, the first at index (2, 3)); a float mask may hold finite values and -inf only"):
        attend(q, k, v, mask=m, backend=backend)
    m[4, 0] = math.inf
    with E(ValueError, "mask contains +inf and NaN (2 of 35 entries"): attend(q, k, v, mask=m, backend=backend)

def test_check_mask_names_the_argument_and_keeps_minus_inf_legal():
    m = torch.zeros(1, 3, 5, 7); m[0, 1, 4, 6] = math.inf
    with E(ValueError, "attn_bias contains +inf (1 of 105 entries, the first at index (0, 1, 4, 6)); "
                       "a float attn_bias may hold finite values and -inf only"):
        A.check_mask(m, (2, 3, 5, 7), name="attn_bias")
    m[0, 1, 4, 6] = -math.inf; m[0, 0] = -math.inf                 # -inf (a whole row too) and finite values are legal
    A.check_mask(m, (2, 3, 5, 7))
    A.check_mask(m.half(), (2, 3, 5, 7))

@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_minus_inf_float_mask_equals_bool_mask(backend):
    q, k, v = qkv()
    keep = torch.rand(5, 7, generator=torch.Generator().manual_seed(0)) > 0.5; keep[1] = False
    flt = torch.zeros(5, 7, dtype=f64).masked_fill(~keep, -math.inf)
    torch.testing.assert_close(attend(q, k, v, mask=flt, backend=backend).out, attend(q, k, v, mask=keep, backend="math").out)

@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_head_dim_zero_is_refused(backend):
    q, k, v = qkv(D=4)
    with E(ValueError, "q.shape[-1]=0 must be >= 1 (the head dim)"): attend(q[..., :0], k[..., :0], v, backend=backend)
    with E(ValueError, "q.shape[-1]=0 must be >= 1 (the head dim)"): A.check_qkv(q[..., :0], k[..., :0], v)

EMPTY = {"B=0": ((0, 4, 5, 8), (0, 2, 7, 8), (0, 2, 7, 6)), "H=0": ((2, 0, 5, 8), (2, 0, 7, 8), (2, 0, 7, 6)),
         "Lq=0": ((2, 4, 0, 8), (2, 2, 7, 8), (2, 2, 7, 6)), "Lk=0": ((2, 4, 5, 8), (2, 2, 0, 8), (2, 2, 0, 6)),
         "Dv=0": ((2, 4, 5, 8), (2, 2, 7, 8), (2, 2, 7, 0)), "2d Lq=0": ((0, 8), (7, 8), (7, 6))}

@pytest.mark.parametrize("backend", ALL_BACKENDS)
@pytest.mark.parametrize("case", list(EMPTY))
@pytest.mark.parametrize("causal", [False, True])
def test_empty_inputs_give_torch_shapes_values_and_gradients(backend, case, causal):
    shapes = EMPTY[case]
    torch.manual_seed(0)
    ours = [torch.randn(s, dtype=f64, requires_grad=True) for s in shapes]
    ref = [t.detach().clone().requires_grad_() for t in ours]
    out = attend(*ours, is_causal=causal, backend=backend).out
    gqa = dict(enable_gqa=True) if ref[0].dim() == 4 and ref[0].shape[1] != ref[1].shape[1] else {}
    expected = F.scaled_dot_product_attention(*ref, is_causal=causal, **gqa)
    assert out.shape == expected.shape
    torch.testing.assert_close(out, expected)                       # Lk = 0: zeros, like torch
    g = torch.randn(out.shape, dtype=f64)
    (out * g).sum().backward(); (expected * g).sum().backward()
    for a, b in zip(ours, ref):
        assert a.grad.shape == a.shape
        torch.testing.assert_close(a.grad, b.grad)

@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_empty_batch_with_masks(backend):
    q, k, v = qkv(B=0)
    for mask in (torch.ones(5, 7, dtype=torch.bool), torch.zeros(0, 1, 5, 7, dtype=f64), torch.zeros(5, 7, dtype=f64)):
        assert attend(q, k, v, mask=mask, backend=backend).out.shape == (0, 3, 5, 8)

def test_flags_must_be_bools():
    q, k, v = qkv()
    for bad in (1, "yes", None):
        with E(TypeError, f"is_causal={bad!r} must be a bool (True or False)"): scaled_dot_product_attention(q, k, v, is_causal=bad)
        with E(TypeError, f"return_weights={bad!r} must be a bool (True or False)"): scaled_dot_product_attention(q, k, v, return_weights=bad)
        for backend in ALL_BACKENDS:
            with E(TypeError, f"is_causal={bad!r} must be a bool (True or False)"): attend(q, k, v, is_causal=bad, backend=backend)

def test_inputs_on_different_devices_are_refused():
    q, k, v = qkv()
    with E(ValueError, "q, k and v must be on one device, got q on cpu, k on meta, v on cpu"): scaled_dot_product_attention(q, k.to("meta"), v)
    with E(ValueError, "q, k and v must be on one device, got q on cpu, k on cpu, v on meta"): torch_sdpa(q, k, v.to("meta"))

def test_kv_groups_checks_its_arguments():
    q, k, v = qkv()
    with E(TypeError, "q must be a torch.Tensor, got list"): A.kv_groups([1.0], k)

COMPILE_CASES = {"plain": {}, "causal": dict(is_causal=True), "scale": dict(scale=0.3),
                 "bool": dict(mask="bool"), "float": dict(mask="float"), "padding": dict(mask="padding")}

def _compile_kwargs(kw, Lq, Lk, B):
    kw = dict(kw)
    g = torch.Generator().manual_seed(0)
    if kw.get("mask") == "bool": kw["mask"] = torch.rand(Lq, Lk, generator=g) > 0.4
    elif kw.get("mask") == "float": kw["mask"] = torch.randn(Lq, Lk, generator=g).masked_fill(torch.rand(Lq, Lk, generator=g) > 0.6, -math.inf)
    elif kw.get("mask") == "padding":
        pad = torch.ones(B, 1, 1, Lk, dtype=torch.bool); pad[0, ..., 3:] = False; kw["mask"] = pad
    return kw

@pytest.mark.parametrize("G", [4, 2])                                # multi-head and grouped-query
@pytest.mark.parametrize("case", list(COMPILE_CASES))
def test_math_path_compiles_as_one_graph(case, G):
    torch._dynamo.reset()
    q, k, v = torch.randn(2, 4, 5, 8), torch.randn(2, G, 7, 8), torch.randn(2, G, 7, 8)
    kw = _compile_kwargs(COMPILE_CASES[case], 5, 7, 2)
    f = torch.compile(scaled_dot_product_attention, fullgraph=True, backend="eager")
    torch.testing.assert_close(f(q, k, v, **kw), scaled_dot_product_attention(q, k, v, **kw))
    a = torch.compile(lambda q, k, v: attend(q, k, v, backend="math", **kw).out, fullgraph=True, backend="aot_eager")
    torch.testing.assert_close(a(q, k, v), scaled_dot_product_attention(q, k, v, **kw))

def test_compiled_graph_carries_no_value_checks():
    "The +inf check reads the mask, so it runs in eager mode only; the compiled graph has no break for it (and no check)."
    torch._dynamo.reset()
    q, k, v = (torch.randn(1, 2, 4, 8) for _ in range(3))
    m = torch.zeros(4, 4); m[0, 0] = math.inf
    with E(ValueError, "mask contains +inf"): scaled_dot_product_attention(q, k, v, mask=m)
    explained = torch._dynamo.explain(scaled_dot_product_attention)(q, k, v, mask=m)
    assert explained.graph_break_count == 0 and explained.graph_count == 1


# ---------------------------------------------------------------- the registry and the helpers refuse bad arguments at entry
def _registered(**kw):
    "Register a backend 'tmp' with `kw`, removing it again whatever happens."
    try: A.register_backend("tmp", **({"fn": scaled_dot_product_attention} | kw))
    finally:
        if "tmp" in A.backend_info: A.unregister_backend("tmp")

@pytest.mark.parametrize("kw, exc, msg", [
    (dict(supports=3), TypeError, "supports=3 must be callable or None"),
    (dict(priority="high"), TypeError, "priority='high' must be an int"),
    (dict(priority=1.5), TypeError, "priority=1.5 must be an int"),
    (dict(priority=True), TypeError, "priority=True must be an int"),
    (dict(prefer=3), TypeError, "prefer=3 must be callable or None"),
])
def test_register_backend_refuses_and_registers_nothing(kw, exc, msg):
    with E(exc, msg): _registered(**kw)
    assert "tmp" not in A.backend_info and "tmp" not in dict(A.attention_backends)   # nothing half-registered

def test_register_backend_takes_any_int_priority():
    A.register_backend("tmp", scaled_dot_product_attention, priority=-5)
    try: assert A.backend_info["tmp"].priority == -5
    finally: A.unregister_backend("tmp")

@pytest.mark.parametrize("p", [math.nan, 1.0, -0.1, "x"])
def test_choose_backend_names_dropout_before_asking_a_backend(p):
    q = k = v = torch.randn(1, 2, 3, 4)
    for backend in ("auto", "math", "flash"):
        with E(TypeError if isinstance(p, str) else ValueError, f"dropout_p={p!r} must be a number in [0, 1)"): choose_backend(q, k, v, dropout_p=p, backend=backend)

def test_check_values_wants_a_bool_tensor():
    with E(TypeError, "ok must be a bool torch.Tensor, got bool"): A.check_values(False, "m")
    with E(TypeError, "ok.dtype=torch.int64 must be torch.bool"): A.check_values(torch.tensor([1, 0]), "m")
    A.check_values(torch.tensor([True]), "m")                          # passes

def test_check_int_without_a_lower_bound():
    assert A.check_int("n", -7, minimum=None) == -7
    with E(ValueError, "n=5 must be an int <= 4"): A.check_int("n", 5, minimum=None, maximum=4)
    with E(TypeError, "n='3' must be an int"): A.check_int("n", "3", minimum=None)

@pytest.mark.parametrize("bad, exc, msg", [(math.nan, ValueError, "scale=nan must be a finite number or None"),
                                           (10**400, ValueError, "must be a finite number or None"),
                                           ("x", TypeError, "scale='x' must be a number or None")])
def test_check_scale_messages(bad, exc, msg):
    with pytest.raises(exc, match=re.escape(msg)): A.check_scale(bad)


# -- the short form the chapter shows first equals the shipped function where it is defined
@pytest.mark.parametrize("name", MASK_NAMES)
@pytest.mark.parametrize("Lq,Lk", [(5, 7), (1, 1), (113, 7)])
@pytest.mark.parametrize("dtype", [f64, torch.float32])
def test_attention_core_equals_shipped(name, Lq, Lk, dtype):
    q, k, v = qkv(Lq=Lq, Lk=Lk, Dv=4, dtype=dtype)
    ours, _ = masks(2, 3, Lq, Lk, dtype=dtype)[name]
    eps = 1e-12 if dtype == f64 else 1e-5                          # the same formula; only the softmax's order of operations differs
    torch.testing.assert_close(A.attention_core(q, k, v, **ours), scaled_dot_product_attention(q, k, v, **ours), atol=eps, rtol=eps)


def test_attention_core_is_the_formula():
    q, k, v = qkv(Lq=4, Lk=6)
    keep = torch.rand(4, 6) > 0.3; keep[:, 0] = True
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    expected = torch.softmax(s.masked_fill(~keep, -math.inf), -1) @ v
    torch.testing.assert_close(A.attention_core(q, k, v, mask=keep), expected, atol=1e-12, rtol=0)
    causal = torch.ones(4, 6, dtype=torch.bool).tril()
    # is_causal builds this very tril mask inside attention_core and runs the same operations on it: bit-equal
    torch.testing.assert_close(A.attention_core(q, k, v, is_causal=True), A.attention_core(q, k, v, mask=causal), atol=0, rtol=0)
