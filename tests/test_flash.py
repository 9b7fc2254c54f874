"""transformer_lit.flash: the tiled FlashAttention forward/backward against the math backend, masks,
gradcheck, hypothesis-drawn shapes, the "flash" backend in the registry, training, and bad input."""
import math
import pytest
import torch
from torch import nn
from hypothesis import given, strategies as st
from transformer_lit import attention
from transformer_lit.attention import attend, scaled_dot_product_attention, backend_info
from transformer_lit.flash import (flash_attention, flash_forward, flash_backward, flash_backend, flash_attention_io, attention_flops,
                                   standard_attention_io, online_softmax, softmax_stats, peak_memory, BACKEND_BLOCK)
from transformer_lit.multihead import MultiHeadAttention

TOL = {torch.float64: dict(atol=1e-10, rtol=1e-10), torch.float32: dict(atol=1e-5, rtol=1.3e-6)}

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny ops: one thread (tests/conftest.py)

def qkv(B, H, Lq, Lk, D, dtype, Dv=None, seed=0):
    g = torch.Generator().manual_seed(seed)
    mk = lambda L, d: torch.randn(B, H, L, d, generator=g, dtype=dtype).requires_grad_()
    return mk(Lq, D), mk(Lk, D), mk(Lk, D if Dv is None else Dv)

def check_equal(q, k, v, tol, block_q=64, block_k=64, **kw):
    "Forward and backward of flash_attention against the math backend."
    mask = kw.get("mask")
    out = flash_attention(q, k, v, block_q=block_q, block_k=block_k, **kw)
    ref = scaled_dot_product_attention(q, k, v, **kw)
    torch.testing.assert_close(out, ref, **tol)
    do = torch.randn_like(out)
    for g, gr in zip(torch.autograd.grad(out, (q, k, v), do), torch.autograd.grad(ref, (q, k, v), do)):
        torch.testing.assert_close(g, gr, **tol)

def bottom_right(Lq, Lk):
    "Causal mask aligned to the bottom-right corner: query i sees keys j <= i + Lk - Lq."
    return torch.ones(Lq, Lk, dtype=torch.bool).tril(diagonal=Lk - Lq)

# -- equality with the math backend over awkward sizes --------------------------------------------
SIZES = [(1, 1, 8), (7, 7, 40), (113, 113, 64), (1, 113, 128), (113, 7, 8), (7, 113, 64), (1023, 1023, 40), (113, 1023, 128)]
CASES = [(dtype, *size, causal) for dtype in (torch.float64, torch.float32) for size in SIZES
         for causal in ("none", "top-left", "bottom-right")
         if size[0] * size[1] < 200_000 or (dtype == torch.float32 and causal != "bottom-right")]  # large: float32 only

@pytest.mark.parametrize("dtype,Lq,Lk,D,causal", CASES)
def test_equals_math(dtype, Lq, Lk, D, causal):
    q, k, v = qkv(1, 2, Lq, Lk, D, dtype)
    kw = {"none": {}, "top-left": dict(is_causal=True), "bottom-right": dict(mask=bottom_right(Lq, Lk))}[causal]
    check_equal(q, k, v, TOL[dtype], **kw)

def test_large_float64():
    q, k, v = qkv(1, 1, 1023, 1023, 64, torch.float64, seed=3)
    check_equal(q, k, v, TOL[torch.float64], block_q=128, block_k=128, is_causal=True)

@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_masks_and_value_dim(dtype):
    q, k, v = qkv(2, 3, 37, 53, 16, dtype, Dv=24)
    g = torch.Generator().manual_seed(1)
    keep = torch.rand(2, 1, 37, 53, generator=g) > 0.5
    keep[0, 0, 5] = False; keep[1, 0, :, :17] = False                 # an empty row; whole masked tiles
    check_equal(q, k, v, TOL[dtype], block_q=16, block_k=16, mask=keep)
    bias = torch.randn(3, 37, 53, generator=g, dtype=dtype)           # float mask (e.g. a relative bias)
    check_equal(q, k, v, TOL[dtype], block_q=16, block_k=8, mask=bias)
    check_equal(q, k, v, TOL[dtype], block_q=16, block_k=8, scale=0.3)

def test_fully_masked_rows_give_zeros_and_no_nan():
    q, k, v = qkv(1, 1, 10, 12, 8, torch.float64)
    keep = torch.ones(10, 12, dtype=torch.bool); keep[[2, 7]] = False
    out = flash_attention(q, k, v, mask=keep, block_q=4, block_k=4)
    assert out[..., [2, 7], :].abs().max().item() == 0.0
    grads = torch.autograd.grad(out.sum(), (q, k, v))
    assert not any(g.isnan().any() for g in grads)
    assert grads[0][..., [2, 7], :].abs().max().item() == 0.0

def test_lse_and_causal_tiles_skipped():
    q, k, v = qkv(1, 2, 50, 50, 8, torch.float64)
    o, lse = flash_forward(q.detach(), k.detach(), v.detach(), block_q=16, block_k=16)
    torch.testing.assert_close(lse, torch.logsumexp(q @ k.transpose(-2, -1) / math.sqrt(8), -1).detach(), **TOL[torch.float64])
    steps = []
    flash_forward(q.detach(), k.detach(), v.detach(), is_causal=True, block_q=16, block_k=16, on_step=lambda **s: steps.append((s["i0"], s["j0"])))
    assert steps == [(i, j) for i in range(0, 50, 16) for j in range(0, i + 16, 16) if j < 50]

@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_error_within_twice_pytorch(dtype):
    "fp16/bf16: error against an fp32 reference at most 2x that of torch's own same-dtype SDPA (the flash-attn rule)."
    q, k, v = (t.detach() for t in qkv(2, 2, 100, 100, 64, torch.float32))
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    ours = flash_attention(q.to(dtype), k.to(dtype), v.to(dtype), is_causal=True, block_q=32, block_k=32)
    theirs = torch.nn.functional.scaled_dot_product_attention(q.to(dtype), k.to(dtype), v.to(dtype), is_causal=True)
    assert ours.dtype == dtype
    assert (ours.float() - ref).abs().max() <= 2 * (theirs.float() - ref).abs().max() + 1e-6

def test_gradcheck():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 1, n, 3, generator=g, dtype=torch.float64, requires_grad=True) for n in (5, 6, 6))
    assert torch.autograd.gradcheck(lambda a, b, c: flash_attention(a, b, c, block_q=2, block_k=4), (q, k, v))
    assert torch.autograd.gradcheck(lambda a, b, c: flash_attention(a, b, c, is_causal=True, block_q=4, block_k=2), (q, k, v))
    keep = torch.rand(5, 6, generator=g) > 0.3
    assert torch.autograd.gradcheck(lambda a, b, c: flash_attention(a, b, c, mask=keep, block_q=2, block_k=5), (q, k, v))

@given(B=st.integers(1, 2), H=st.integers(1, 3), Lq=st.integers(1, 70), Lk=st.integers(1, 70),
       D=st.sampled_from([1, 3, 8, 16]), bq=st.integers(1, 40), bk=st.integers(1, 40), causal=st.booleans())
def test_property_any_shape_and_tiles(B, H, Lq, Lk, D, bq, bk, causal):
    q, k, v = qkv(B, H, Lq, Lk, D, torch.float64)
    check_equal(q, k, v, TOL[torch.float64], block_q=bq, block_k=bk, is_causal=causal)

@given(n=st.integers(1, 300), block=st.integers(1, 300), spread=st.floats(0.1, 50))
def test_property_online_softmax(n, block, spread):
    x = torch.randn(3, n, dtype=torch.float64, generator=torch.Generator().manual_seed(n)) * spread
    torch.testing.assert_close(online_softmax(x, block), torch.softmax(x, -1), atol=1e-12, rtol=1e-12)
    m, l = softmax_stats(x, block)
    torch.testing.assert_close(m, x.amax(-1), atol=0, rtol=0)        # a max rounds nothing: the max of block maxima is the same element

# -- the I/O counter and the memory measurement ----------------------------------------------------
def test_io_counts():
    assert standard_attention_io(100, 8) == dict(reads=3 * 800 + 2 * 100 ** 2, writes=2 * 100 ** 2 + 800)
    io = flash_attention_io(1000, 64, 64 * 4 * 50)                    # block_q = 50: 20 query tiles
    assert (io["block_q"], io["block_k"]) == (50, 50)
    assert io == dict(reads=1000 * 64 + 20 * 2 * 1000 * 64, writes=1000 * 65, block_q=50, block_k=50)
    causal = flash_attention_io(1000, 64, 64 * 4 * 50, is_causal=True)
    assert causal["reads"] == 1000 * 64 + sum(2 * min(1000, (i + 1) * 50) * 64 for i in range(20))
    for N in (4096, 16384):                                           # Theta(N^2 d^2 / M), constant -> 8
        assert 7.9 < flash_attention_io(N, 64, 25_000)["reads"] / (N * N * 64 * 64 / 25_000) < 8.2

def test_peak_memory_measures_quadratic_vs_linear():
    q, k, v = (torch.randn(1, 1, 2048, 64) for _ in range(3))
    _, m_math = peak_memory(scaled_dot_product_attention, q, k, v)
    _, m_flash = peak_memory(flash_attention, q, k, v, block_q=BACKEND_BLOCK, block_k=BACKEND_BLOCK)
    if math.isnan(m_math): pytest.skip("peak CPU memory is not measurable here (needs Linux /proc/self/clear_refs)")
    assert m_math >= 2048 * 2048 * 4                                  # at least the score matrix
    assert m_flash < m_math / 10

# -- the backend and the registry -------------------------------------------------------------------
def test_backend_registered_and_used_by_attend():
    assert "flash" in attention.attention_backends and backend_info["flash"].fn is flash_backend
    q, k, v = (t.detach() for t in qkv(2, 2, 40, 40, 16, torch.float32))
    res = attend(q, k, v, is_causal=True, backend="flash")
    assert res.backend == "flash"
    torch.testing.assert_close(res.out, scaled_dot_product_attention(q, k, v, is_causal=True), **TOL[torch.float32])

def test_auto_falls_back_when_flash_cannot(monkeypatch):
    monkeypatch.delitem(backend_info, "sdpa")                         # leave flash the highest priority
    for name in [n for n in backend_info if n not in ("math", "flash")]: monkeypatch.delitem(backend_info, name)
    q, k, v = (t.detach() for t in qkv(1, 2, 16, 16, 8, torch.float32))
    assert attend(q, k, v).backend == "flash"
    assert attend(q, k, v, dropout_p=0.5).backend == "math"
    bias = torch.zeros(16, 16, requires_grad=True)
    assert attend(q, k, v, mask=bias).backend == "math"

def test_bad_input_messages():
    q = torch.randn(1, 2, 4, 8)
    with pytest.raises(ValueError, match=r"^block_q=0 must be a positive int$"): flash_attention(q, q, q, block_q=0)
    with pytest.raises(ValueError, match=r"^block_k=-3 must be a positive int$"): flash_attention(q, q, q, block_k=-3)
    with pytest.raises(TypeError, match=r"^block_k=2.0 must be a positive int$"): flash_attention(q, q, q, block_k=2.0)
    with pytest.raises(TypeError, match=r"^block_q=True must be a positive int$"): flash_attention(q, q, q, block_q=True)
    with pytest.raises(ValueError, match=r"^q\.shape\[-1\]=8 must equal k\.shape\[-1\]=6 \(the key dim d_k\)$"):
        flash_attention(q, torch.randn(1, 2, 4, 6), q)
    with pytest.raises(ValueError, match=r"^k\.shape\[-2\]=4 must equal v\.shape\[-2\]=5 \(one value per key\)$"):
        flash_attention(q, q, torch.randn(1, 2, 5, 8))
    with pytest.raises(TypeError, match=r"^mask\.dtype=torch\.int64 must be torch\.bool"):
        flash_attention(q, q, q, mask=torch.ones(4, 4, dtype=torch.int64))
    with pytest.raises(ValueError, match=r"^mask\.shape=\(3, 4\) must be broadcastable to \(\.\.\., Lq, Lk\)=\(1, 2, 4, 4\)$"):
        flash_attention(q, q, q, mask=torch.ones(3, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"^mask\.requires_grad=True: flash_attention gives the mask no gradient"):
        flash_attention(q, q, q, mask=torch.zeros(4, 4, requires_grad=True))
    with pytest.raises(ValueError, match=r"^is_causal=True together with an explicit mask is ambiguous"):
        flash_attention(q, q, q, is_causal=True, mask=torch.ones(4, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"^dropout_p=0\.1 must be 0: the flash backend has no dropout"):
        flash_backend(q, q, q, dropout_p=0.1)
    with pytest.raises(ValueError, match=r"^backend='flash' does not support these inputs"):
        attend(q, q, q, dropout_p=0.1, backend="flash")

# -- MultiHeadAttention with backend="flash" learns what backend="math" learns -----------------------
class Reverser(nn.Module):
    "Token + learned position embeddings, one residual multi-head attention layer, a linear read-out."
    def __init__(self, backend, vocab=10, T=8, d=32, H=2):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(T, d)
        self.attn = MultiHeadAttention(d, H, backend=backend)
        self.out = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, vocab))
    def forward(self, x):                                           # x: (B, T) token ids
        h = self.tok(x) + self.pos.weight[: x.shape[1]]               # (B, T, d)
        return self.out(h + self.attn(h))                             # (B, T, vocab)

def train_reverse(backend, steps=100, T=8, vocab=10):
    torch.manual_seed(0)
    model = Reverser(backend, vocab, T)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(steps):
        x = torch.randint(0, vocab, (64, T), generator=g)
        loss = nn.functional.cross_entropy(model(x).flatten(0, 1), x.flip(1).flatten())
        opt.zero_grad(); loss.backward(); opt.step(); losses.append(loss.item())
    x = torch.randint(0, vocab, (512, T), generator=g)
    with torch.no_grad(): acc = (model(x).argmax(-1) == x.flip(1)).float().mean().item()
    return acc, losses

def test_multihead_flash_trains_reverse_task_like_math():
    # the reverse task of chapter 12 on a one-layer attention model, small enough for a test of a few seconds
    acc_flash, loss_flash = train_reverse("flash")
    acc_math, loss_math = train_reverse("math")
    assert acc_flash >= 0.99 and acc_flash == acc_math
    assert loss_flash[-1] < 0.05 * loss_flash[0]
    torch.testing.assert_close(torch.tensor(loss_flash), torch.tensor(loss_math), atol=1e-3, rtol=1e-3)


# -- grouped-query attention: k, v with G heads, each shared by H/G query heads --------------------
from transformer_lit.attention import repeat_kv, choose_backend
from transformer_lit.flash import flash_supports

def gqa(B, H, G, Lq, Lk, D, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    mk = lambda h, L: torch.randn(B, h, L, D, generator=g, dtype=dtype).requires_grad_()
    return mk(H, Lq), mk(G, Lk), mk(G, Lk)

def check_gqa(q, k, v, tol, block_q=16, block_k=16, **kw):
    "flash_attention on (B, G, Lk, D) keys/values against the math backend on the same inputs and on repeat_kv's copies."
    n_rep = q.shape[-3] // k.shape[-3]
    out = flash_attention(q, k, v, block_q=block_q, block_k=block_k, **kw)
    oracle = scaled_dot_product_attention(q, repeat_kv(k, n_rep), repeat_kv(v, n_rep), **kw)
    math_ = scaled_dot_product_attention(q, k, v, **kw)
    torch.testing.assert_close(out, oracle, **tol)
    torch.testing.assert_close(out, math_, **tol)
    do = torch.randn_like(out)
    got = torch.autograd.grad(out, (q, k, v), do)
    ref = torch.autograd.grad(oracle, (q, k, v), do)                 # dK, dV of a shared head: summed by autograd over its copies
    assert got[1].shape == k.shape and got[2].shape == v.shape
    for a, b in zip(got, ref): torch.testing.assert_close(a, b, **tol)

def head_mask(B, H, Lq, Lk, seed=1):
    "A bool mask that differs between the query heads of a group, with an empty row and a whole masked tile."
    keep = torch.rand(B, H, Lq, Lk, generator=torch.Generator().manual_seed(seed)) > 0.4
    keep[0, 1, Lq // 2] = False
    if Lk > 16: keep[:, 0, :, :16] = False
    return keep

GQA_CASES = [(dtype, G, L, variant) for dtype in (torch.float64, torch.float32) for G in (1, 2, 4) for L in (1, 7, 113)
             for variant in ("none", "causal", "mask")]

@pytest.mark.parametrize("dtype,G,L,variant", GQA_CASES)
def test_gqa_equals_math_and_repeat_kv(dtype, G, L, variant):
    q, k, v = gqa(2, 4, G, L, L, 8, dtype, seed=L * 10 + G)
    kw = {"none": {}, "causal": dict(is_causal=True), "mask": dict(mask=head_mask(2, 4, L, L))}[variant]
    check_gqa(q, k, v, TOL[dtype], **kw)

@pytest.mark.parametrize("Lq,Lk", [(7, 113), (113, 7)])
def test_gqa_different_lengths_float_mask_and_value_dim(Lq, Lk):
    q, k, v = gqa(1, 6, 2, Lq, Lk, 16, torch.float64)
    v = torch.randn(1, 2, Lk, 24, dtype=torch.float64, requires_grad=True)   # Dv != D
    check_gqa(q, k, v, TOL[torch.float64], is_causal=True)
    bias = torch.randn(6, Lq, Lk, dtype=torch.float64)                        # a float mask per query head
    check_gqa(q, k, v, TOL[torch.float64], block_q=5, block_k=9, mask=bias)

def test_gqa_gradcheck():
    g = torch.Generator().manual_seed(0)
    for G in (1, 2):
        q = torch.randn(1, 4, 5, 3, generator=g, dtype=torch.float64, requires_grad=True)
        k, v = (torch.randn(1, G, 6, 3, generator=g, dtype=torch.float64, requires_grad=True) for _ in range(2))
        assert torch.autograd.gradcheck(lambda a, b, c: flash_attention(a, b, c, block_q=2, block_k=4), (q, k, v))
        assert torch.autograd.gradcheck(lambda a, b, c: flash_attention(a, b, c, is_causal=True, block_q=4, block_k=2), (q, k, v))
        keep = torch.rand(1, 4, 5, 6, generator=g) > 0.3
        assert torch.autograd.gradcheck(lambda a, b, c: flash_attention(a, b, c, mask=keep, block_q=3, block_k=5), (q, k, v))

def test_gqa_shared_head_gradient_is_the_sum_over_its_query_heads():
    "dK, dV of a shared head = the sum, over the H/G query heads that read it, of the multi-head gradients of its copies."
    q, k, v = gqa(2, 8, 2, 70, 50, 16, torch.float64)
    kr, vr = (repeat_kv(t.detach(), 4).requires_grad_() for t in (k, v))       # (2, 8, 50, 16): independent copies
    for causal in (False, True):
        a = flash_attention(q, k, v, is_causal=causal, block_q=32, block_k=16)
        b = flash_attention(q, kr, vr, is_causal=causal, block_q=32, block_k=16)
        torch.testing.assert_close(a, b, **TOL[torch.float64])
        do = torch.randn_like(a)
        dq, dk, dv = torch.autograd.grad(a, (q, k, v), do)
        dq_r, dk_r, dv_r = torch.autograd.grad(b, (q, kr, vr), do)
        torch.testing.assert_close(dq, dq_r, **TOL[torch.float64])
        torch.testing.assert_close(dk, dk_r.unflatten(1, (2, 4)).sum(2), **TOL[torch.float64])  # (2, 2, 50, 16)
        torch.testing.assert_close(dv, dv_r.unflatten(1, (2, 4)).sum(2), **TOL[torch.float64])

def test_gqa_on_step_reports_per_query_head():
    q, k, v = (t.detach() for t in gqa(1, 4, 2, 10, 12, 8, torch.float64))
    steps = []
    o, lse = flash_forward(q, k, v, block_q=4, block_k=8, on_step=lambda **s: steps.append(s))
    assert o.shape == (1, 4, 10, 8) and lse.shape == (1, 4, 10)
    last = [s for s in steps if s["i0"] == 8][-1]
    assert last["m"].shape == (1, 4, 2) and last["o"].shape == (1, 4, 2, 8)
    torch.testing.assert_close(last["o"] / last["l"][..., None], o[..., 8:, :], **TOL[torch.float64])
    s = q @ repeat_kv(k, 2).transpose(-2, -1) / math.sqrt(8)
    torch.testing.assert_close(lse, s.logsumexp(-1), **TOL[torch.float64])

def test_gqa_memory_does_not_grow_with_repeated_kv():
    "One shared key/value head for 16 query heads: flash's peak extra memory stays below one copy of the repeated K and V."
    q = torch.randn(1, 16, 256, 64)
    k, v = torch.randn(1, 1, 16384, 64), torch.randn(1, 1, 16384, 64)
    _, extra = peak_memory(flash_attention, q, k, v, block_q=BACKEND_BLOCK, block_k=BACKEND_BLOCK)
    if math.isnan(extra): pytest.skip("peak CPU memory is not measurable here (needs Linux /proc/self/clear_refs)")
    repeated = 2 * 16 * 16384 * 64 * 4                                 # bytes of repeat_kv(k, 16) and repeat_kv(v, 16): 128 MiB
    assert extra < repeated / 8

def test_gqa_backend_supports_and_attend():
    q, k, v = (t.detach() for t in gqa(2, 4, 2, 20, 20, 8, torch.float32))
    assert flash_supports(q, k, v, None, True, 0.0)
    assert flash_supports(q, k, v, head_mask(2, 4, 20, 20), False, 0.0)
    res = attend(q, k, v, is_causal=True, backend="flash")
    assert res.backend == "flash"
    torch.testing.assert_close(res.out, scaled_dot_product_attention(q, k, v, is_causal=True), **TOL[torch.float32])
    assert choose_backend(q, k, v, dropout_p=0.1) != "flash"           # no dropout: "auto" goes elsewhere

def test_gqa_auto_falls_back_when_flash_cannot(monkeypatch):
    monkeypatch.delitem(backend_info, "sdpa")
    for name in [n for n in backend_info if n not in ("math", "flash")]: monkeypatch.delitem(backend_info, name)
    q, k, v = (t.detach() for t in gqa(1, 4, 1, 16, 16, 8, torch.float32))
    assert attend(q, k, v).backend == "flash"
    res = attend(q, k, v, dropout_p=0.5)
    assert res.backend == "math" and res.out.shape == q.shape
    bias = torch.zeros(16, 16, requires_grad=True)
    res = attend(q, k, v, mask=bias)
    assert res.backend == "math"
    torch.testing.assert_close(res.out, flash_attention(q, k, v), **TOL[torch.float32])

def test_gqa_bad_head_counts():
    q = torch.randn(1, 8, 4, 8)
    kv3 = torch.randn(1, 3, 4, 8)
    with pytest.raises(ValueError, match=r"^k\.shape\[-3\]=3 key/value heads must divide q\.shape\[-3\]=8 query heads"):
        flash_attention(q, kv3, kv3)
    with pytest.raises(ValueError, match=r"^k\.shape\[-3\]=3 key/value heads must divide q\.shape\[-3\]=8 query heads"):
        attend(q, kv3, kv3, backend="flash")
    with pytest.raises(ValueError, match=r"^k\.shape\[-3\]=16 key/value heads must divide q\.shape\[-3\]=8 query heads"):
        flash_attention(q, torch.randn(1, 16, 4, 8), torch.randn(1, 16, 4, 8))
    with pytest.raises(ValueError, match=r"^k\.shape\[-3\]=2 must equal v\.shape\[-3\]=4"):
        flash_attention(q, torch.randn(1, 2, 4, 8), torch.randn(1, 4, 4, 8))


# -- chapter 15's step player, as the site shows it (headless Chromium, no Jupyter server) -----------
def test_chapter_15_player_saved_in_the_notebook(tmp_path):
    "Moving the saved player's slider shows each step's frame and the caption of that step's tiles."
    import base64, json, re
    from pathlib import Path
    tb = pytest.importorskip("test_browser")                           # tests/test_browser.py: drive_player, require_browser
    tb.require_browser()
    nb = json.loads((Path(__file__).resolve().parent.parent / "nbs" / "15_flash_attention.ipynb").read_text())
    cell, = [c for c in nb["cells"] if c["cell_type"] == "code" and "player = FramePlayer(" in "".join(c["source"])]
    html_text = "".join(cell["outputs"][0]["data"]["text/html"])
    assert not re.search(r"""(src|href)=["']?(https?:|//)|fetch\(|XMLHttpRequest""", html_text)   # nothing is fetched
    data = json.loads(re.search(r'class="tlp-data">(.*?)</script>', html_text, re.S).group(1).replace('<\\/', '</'))
    steps = list(range(12))                                            # Lq=12, Lk=16 in 4x4 tiles: 3 query tiles x 4 key tiles
    assert len(set(data["order"])) == len(steps) == len(data["order"])
    for k, cap in enumerate(data["captions"]):                         # the tile of step k, from the loop order of flash_forward
        i0, j0 = 4 * (k // 4), 4 * (k % 4)
        assert cap == f"step {k}: query rows {i0}:{i0 + 4}, key tile {j0}:{j0 + 4}"
    expected = lambda step: base64.b64decode(data["frames"][data["order"][step]])
    assert tb.drive_player(html_text, {"step": steps}, expected, tmp_path, start={"step": 2}) == len(steps)


def test_multihead_gqa_flash_equals_math():
    "MultiHeadAttention(n_kv_heads=G, backend='flash') equals the same module on the math backend, forward and gradients."
    for G in (1, 2, 4):
        torch.manual_seed(G)
        m_flash = MultiHeadAttention(32, 4, n_kv_heads=G, backend="flash").double()
        m_math = MultiHeadAttention(32, 4, n_kv_heads=G, backend="math").double()
        m_math.load_state_dict(m_flash.state_dict())
        x = torch.randn(2, 19, 32, dtype=torch.float64, requires_grad=True)
        a, b = m_flash(x, is_causal=True), m_math(x, is_causal=True)
        torch.testing.assert_close(a, b, **TOL[torch.float64])
        ga = torch.autograd.grad(a.sum(), [x, *m_flash.parameters()])
        gb = torch.autograd.grad(b.sum(), [x, *m_math.parameters()])
        for u, w in zip(ga, gb): torch.testing.assert_close(u, w, **TOL[torch.float64])


# -- bad values that would give NaN, empty inputs, the counting functions' arguments
import re
def E(exc, msg): return pytest.raises(exc, match="^" + re.escape(msg))

@pytest.mark.parametrize("s", [math.nan, math.inf, -math.inf])
def test_non_finite_scale_refused_everywhere(s):
    q, k, v = qkv(1, 2, 5, 7, 8, torch.float64)
    o, lse = flash_forward(q.detach(), k.detach(), v.detach())
    for call in (lambda: flash_attention(q, k, v, scale=s), lambda: flash_forward(q, k, v, scale=s),
                 lambda: flash_backward(o, q, k, v, o, lse, scale=s), lambda: flash_backend(q, k, v, scale=s)):
        with E(ValueError, f"scale={s!r} must be a finite number or None"): call()
    with E(TypeError, "scale='0.5' must be a number or None"): flash_attention(q, k, v, scale="0.5")
    with E(ValueError, "scale=1e+39 must be a finite number or None, and finite in torch.float32"):
        flash_attention(q.float(), k.float(), v.float(), scale=1e39)

def test_plus_inf_or_nan_in_a_float_mask_refused():
    q, k, v = qkv(1, 2, 5, 7, 8, torch.float64)
    m = torch.zeros(5, 7, dtype=torch.float64); m[0, 6] = math.inf
    msg = "mask contains +inf (1 of 35 entries, the first at index (0, 6)); a float mask may hold finite values and -inf only"
    with E(ValueError, msg): flash_attention(q, k, v, mask=m)
    with E(ValueError, msg): flash_forward(q, k, v, mask=m)
    m[0, 6] = math.nan
    with E(ValueError, "mask contains NaN (1 of 35 entries, the first at index (0, 6))"): flash_attention(q, k, v, mask=m, block_q=2, block_k=2)

def test_head_dim_zero_refused():
    q, k, v = qkv(1, 2, 5, 7, 0, torch.float64, Dv=4)
    with E(ValueError, "q.shape[-1]=0 must be >= 1 (the head dim)"): flash_attention(q, k, v)
    with E(ValueError, "q.shape[-1]=0 must be >= 1 (the head dim)"): flash_forward(q, k, v)

@pytest.mark.parametrize("shape", [(0, 2, 5, 7), (1, 0, 5, 7), (1, 2, 0, 7), (1, 2, 5, 0)])   # B, H, Lq, Lk
@pytest.mark.parametrize("is_causal", [False, True])
def test_empty_inputs_equal_torch_forward_and_backward(shape, is_causal):
    B, H, Lq, Lk = shape
    q, k, v = qkv(B, H, Lq, Lk, 8, torch.float64)
    out = flash_attention(q, k, v, is_causal=is_causal, block_q=2, block_k=3)
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=is_causal)
    assert out.shape == ref.shape == (B, H, Lq, 8)
    torch.testing.assert_close(out, ref)                               # Lk = 0: zeros, as torch gives
    do = torch.randn_like(out)
    for g, gr, t in zip(torch.autograd.grad(out, (q, k, v), do, allow_unused=True),
                        torch.autograd.grad(ref, (q, k, v), do, allow_unused=True), (q, k, v)):
        assert g.shape == t.shape
        torch.testing.assert_close(g, torch.zeros_like(t) if gr is None else gr)

def test_flash_forward_and_backward_check_their_arguments():
    q, k, v = qkv(1, 2, 5, 7, 8, torch.float64)
    q, k, v = q.detach(), k.detach(), v.detach()
    o, lse = flash_forward(q, k, v)
    with E(TypeError, "on_step=3 must be callable or None"): flash_forward(q, k, v, on_step=3)
    with E(TypeError, "is_causal=1 must be a bool (True or False)"): flash_forward(q, k, v, is_causal=1)
    with E(ValueError, "do.shape=(1, 2, 5, 4) must be (1, 2, 5, 8) (what flash_forward returns for q, k, v)"):
        flash_backward(o[..., :4], q, k, v, o, lse)
    with E(ValueError, "lse.shape=(1, 2, 4) must be (1, 2, 5)"): flash_backward(o, q, k, v, o, lse[..., :4])
    with E(TypeError, "o must be a torch.Tensor, got NoneType"): flash_backward(o, q, k, v, None, lse)
    with E(TypeError, "lse.dtype=torch.int64 must be a floating dtype"): flash_backward(o, q, k, v, o, lse.long())
    with E(ValueError, "block_q=0 must be a positive int"): flash_backward(o, q, k, v, o, lse, block_q=0)
    dq, dk, dv = flash_backward(o, q, k, v, o, lse)
    assert dq.shape == q.shape and dk.shape == k.shape and dv.shape == v.shape

def test_online_softmax_arguments_and_fully_masked_rows():
    with E(TypeError, "x must be a torch.Tensor, got list"): softmax_stats([1.0, 2.0])
    with E(TypeError, "x.dtype=torch.int64 must be a floating dtype"): online_softmax(torch.ones(3, dtype=torch.long))
    with E(ValueError, "x.dim()=0 must be at least 1: (..., n)"): online_softmax(torch.tensor(1.0))
    with E(ValueError, "block=0 must be a positive int"): online_softmax(torch.ones(3), 0)
    with E(ValueError, "x contains NaN or +inf (2 of 3 entries): scores may hold finite values and -inf only"):
        online_softmax(torch.tensor([0.0, math.inf, math.nan]))
    x = torch.tensor([[-math.inf] * 5, [0.0, -math.inf, 1.0, 2.0, -math.inf]], dtype=torch.float64)
    m, l = softmax_stats(x, 2)
    assert m[0] == -math.inf and l[0] == 0                              # nothing seen: no NaN in the statistics
    p = online_softmax(x, 2)
    torch.testing.assert_close(p[0], torch.zeros(5, dtype=torch.float64))  # a row of -inf: zeros (torch.softmax gives NaN)
    torch.testing.assert_close(p[1], torch.softmax(x[1], -1), **TOL[torch.float64])
    assert online_softmax(torch.ones(0, 4)).shape == (0, 4) and online_softmax(torch.ones(3, 0)).shape == (3, 0)

def test_counting_functions_check_their_arguments():
    with E(ValueError, "n_q=-1 must be an int >= 0"): standard_attention_io(-1, 64)
    with E(ValueError, "d=0 must be a positive int"): standard_attention_io(16, 0)
    with E(TypeError, "n_k=2.5 must be an int >= 0"): standard_attention_io(16, 64, 2.5)
    with E(ValueError, "batch=-2 must be an int >= 0"): attention_flops(-2, 8, 16, 16, 64)
    with E(ValueError, "head_dim=0 must be a positive int"): attention_flops(1, 8, 16, 16, 0)
    with E(TypeError, "is_causal='yes' must be a bool (True or False)"): attention_flops(1, 8, 16, 16, 64, "yes")
    assert attention_flops(0, 8, 16, 16, 64) == 0 and standard_attention_io(0, 64, 0) == dict(reads=0, writes=0)
    with E(ValueError, "M=0 must be a positive int"): flash_attention_io(16, 64, 0)
    with E(TypeError, "n_q=16.0 must be an int >= 0"): flash_attention_io(16.0, 64, 1000)
    with E(TypeError, "is_causal=1 must be a bool (True or False)"): flash_attention_io(16, 64, 1000, is_causal=1)
    with E(TypeError, "fn=3 must be callable"): peak_memory(3)
    with E(ValueError, "device='gpu7' must be a torch.device or a name such as 'cpu' or 'cuda:0'"): peak_memory(lambda: 1, device="gpu7")
