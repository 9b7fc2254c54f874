"""Tests for transformer_lit.flash_triton: the Triton FlashAttention-2 kernels against chapter 00's math backend.

On a CPU the kernels run in the Triton interpreter (TRITON_INTERPRET=1, set by the module before it imports
triton), so the sizes are small. On a CUDA machine the same tests compile the kernels.
"""
import math, os, subprocess, sys
from pathlib import Path
import pytest
import torch
from hypothesis import given, settings, strategies as st

import transformer_lit.flash_triton as ft
from transformer_lit.attention import attend, attention_backends, scaled_dot_product_attention

ROOT = Path(__file__).resolve().parent.parent
DEV = "cuda" if torch.cuda.is_available() else "cpu"
needs_triton = pytest.mark.skipif(not ft.triton_status(DEV)[0], reason=f"triton backend unavailable: {ft.triton_status(DEV)[1]}")


def qkv(nq, nk, d, dtype=torch.float32, b=1, h=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(b, h, n, d, generator=g).to(DEV, dtype) for n in (nq, nk, nk)]


def assert_rows_ok(rows):
    bad = [r for r in rows if not r["ok"]]
    assert not bad, bad
    assert len(rows) == 4 and {r["name"] for r in rows} == {"out", "dq", "dk", "dv"}


# -- forward and backward against the math backend ---------------------------------------------------

@needs_triton
@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.parametrize("n", [1, 17, 64, 100])
def test_fp32_forward_backward_lengths(n, is_causal):
    "float32: output and gradients within 1e-4 (relative) of the float64 math backend; lengths not multiples of the tile."
    assert_rows_ok(ft.compare_with_reference(*qkv(n, n, 32, h=1), is_causal=is_causal))


@needs_triton
@pytest.mark.parametrize("nq,nk,is_causal", [(17, 100, True), (100, 17, True), (64, 40, False), (40, 64, True)])
def test_fp32_different_query_and_key_lengths(nq, nk, is_causal):
    "Lq != Lk, causal top-left aligned like torch (query i sees keys j <= i)."
    assert_rows_ok(ft.compare_with_reference(*qkv(nq, nk, 16, h=1), is_causal=is_causal))


@needs_triton
@pytest.mark.parametrize("d", [8, 40, 64, 128])
def test_fp32_head_dims(d):
    "Head dims that are not powers of two are padded to BLOCK_D inside the kernel and still exact."
    assert_rows_ok(ft.compare_with_reference(*qkv(33, 33, d, h=1), is_causal=True))


@needs_triton
@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.parametrize("n", [1, 17, 64, 100])
def test_fp16_two_times_rule(n, is_causal):
    "float16: each error at most 2x that of PyTorch's float16 computation, both against float32 (flash-attn's rule)."
    assert_rows_ok(ft.compare_with_reference(*qkv(n, n, 64, torch.float16, h=1), is_causal=is_causal))


@needs_triton
@pytest.mark.skipif(DEV != "cuda", reason="the interpreter's bfloat16 tl.dot is wrong: bfloat16 is tested on CUDA only")
@pytest.mark.parametrize("is_causal", [False, True])
def test_bf16_two_times_rule_cuda(is_causal):
    assert_rows_ok(ft.compare_with_reference(*qkv(1023, 1023, 128, torch.bfloat16), is_causal=is_causal))


@needs_triton
def test_two_times_rule_can_fail(monkeypatch):
    "The comparison is not vacuous: an output off by 1% breaks the 2x rule."
    real = ft.triton_flash_attention
    monkeypatch.setattr(ft, "triton_flash_attention", lambda *a, **k: real(*a, **k) * 1.01)
    rows = ft.compare_with_reference(*qkv(17, 17, 16, torch.float16, h=1), is_causal=True)
    assert [r["name"] for r in rows if not r["ok"]] == ["out", "dq", "dk", "dv"]


@needs_triton
def test_lse2_is_base2_logsumexp():
    q, k, v = qkv(50, 70, 24)
    o, lse2 = ft.triton_flash_forward(q, k, v, is_causal=True)
    s = (q.double() @ k.double().transpose(-2, -1)) / math.sqrt(24)
    s = s.masked_fill(~torch.ones(50, 70, dtype=torch.bool, device=DEV).tril(), float("-inf"))
    assert lse2.dtype == torch.float32 and lse2.shape == (1, 2, 50)
    torch.testing.assert_close(lse2.double() * math.log(2), s.logsumexp(-1), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(o.double(), scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=True),
                               rtol=1e-5, atol=1e-5)


@needs_triton
def test_scale_argument():
    q, k, v = qkv(20, 20, 16)
    torch.testing.assert_close(ft.triton_flash_attention(q, k, v, scale=0.3).double(),
                               scaled_dot_product_attention(q.double(), k.double(), v.double(), scale=0.3), rtol=1e-5, atol=1e-5)


@needs_triton
def test_three_dim_inputs_and_strided_views():
    "3-D (B, T, D) inputs; (B, H, T, D) views of a (B, T, H, D) tensor are used with their strides, grads included."
    g = torch.Generator().manual_seed(1)
    x = [torch.randn(2, 19, 3, 16, generator=g).to(DEV).requires_grad_() for _ in range(3)]   # (B, T, H, D)
    views = [t.transpose(1, 2) for t in x]                                                       # (B, H, T, D), not contiguous
    assert not views[0].is_contiguous() and ft._kernel_ready(views[0]) is views[0]
    out = ft.triton_flash_attention(*views, is_causal=True)
    out.backward(torch.ones_like(out))                       # an expanded (stride 0) gradient reaches the kernels
    grads = [t.grad.clone() for t in x]
    for t in x: t.grad = None
    ref = scaled_dot_product_attention(*[t.double() for t in views], is_causal=True)
    ref.backward(torch.ones_like(ref))
    torch.testing.assert_close(out.double(), ref, rtol=1e-5, atol=1e-5)
    for a, t in zip(grads, x): torch.testing.assert_close(a.double(), t.grad.double(), rtol=1e-4, atol=1e-5)
    q3, k3, v3 = (t[:, :, 0].detach() for t in x)                                               # (B, T, D)
    torch.testing.assert_close(ft.triton_flash_attention(q3, k3, v3).double(),
                               scaled_dot_product_attention(q3.double(), k3.double(), v3.double()), rtol=1e-5, atol=1e-5)


@needs_triton
def test_empty_lengths():
    "No queries: an empty output; no keys: zeros (our rule for a row with nothing to attend to)."
    q, k, v = qkv(5, 0, 16)
    out = ft.triton_flash_attention(q, k, v)
    assert out.shape == (1, 2, 5, 16) and bool((out == 0).all())
    q, k, v = qkv(0, 5, 16)
    assert ft.triton_flash_attention(q, k, v).shape == (1, 2, 0, 16)


@needs_triton
@settings(max_examples=8)
@given(b=st.integers(1, 2), h=st.integers(1, 2), nq=st.integers(1, 70), nk=st.integers(1, 70),
       d=st.sampled_from([8, 16, 24, 32]), is_causal=st.booleans(), seed=st.integers(0, 2**16))
def test_forward_property_small_shapes(b, h, nq, nk, d, is_causal, seed):
    q, k, v = qkv(nq, nk, d, b=b, h=h, seed=seed)
    out = ft.triton_flash_attention(q, k, v, is_causal=is_causal)
    ref = scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=is_causal)
    assert out.shape == (b, h, nq, d) and torch.isfinite(out).all()
    assert (out.double() - ref).abs().max().item() <= 1e-4 * max(1.0, ref.abs().max().item())


# -- the tile schedule ------------------------------------------------------------------------------

@settings(max_examples=25)
@given(nq=st.integers(1, 300), nk=st.integers(1, 300), bm=st.sampled_from([16, 32, 64, 128]),
       bn=st.sampled_from([16, 32, 64]), is_causal=st.booleans())
def test_tile_phases_match_the_mask(nq, nk, bm, bn, is_causal):
    "Unmasked tiles need no mask, skipped tiles are fully masked, every allowed (i, j) is in a visited tile."
    ph = ft.tile_phases(nq, nk, bm, bn, is_causal)
    assert ph.shape == (math.ceil(nq / bm), math.ceil(nk / bn))
    for a in range(ph.shape[0]):
        for c in range(ph.shape[1]):
            i = torch.arange(a * bm, a * bm + bm)[:, None]; j = torch.arange(c * bn, c * bn + bn)[None, :]
            inside = (j < nk) & ((j <= i) if is_causal else torch.ones_like(j, dtype=torch.bool))
            rows = i < nq
            if ph[a, c] == 1: assert bool(((j < nk) & ((j <= i) | (not is_causal))).all())
            if ph[a, c] == 0: assert not bool((inside & rows).any())


def test_block_config():
    assert ft.block_config("fwd", 64, torch.float16, interpret=True) == dict(BLOCK_M=32, BLOCK_N=32, num_warps=4, num_stages=1)
    assert ft.block_config("fwd", 128, torch.bfloat16, interpret=False)["num_warps"] == 8
    cfg = dict(BLOCK_M=64, BLOCK_N=64, num_warps=4, num_stages=2)
    ft.TUNED_CONFIGS[("fwd", 64, torch.bfloat16, True)] = cfg
    try: assert ft.block_config("fwd", 64, torch.bfloat16, True, interpret=False) == cfg
    finally: del ft.TUNED_CONFIGS[("fwd", 64, torch.bfloat16, True)]
    with pytest.raises(ValueError, match=r"^kind='both' must be 'fwd' or 'bwd'$"): ft.block_config("both", 64, torch.float16)


def test_block_config_takes_the_tiles_saved_for_its_gpu(tmp_path, monkeypatch):
    "A tuning file written by hand in the documented form: its tiles for one GPU name, that GPU only, and TUNED_CONFIGS first."
    monkeypatch.setattr(ft, "_SAVED", {}); monkeypatch.setattr(ft, "TUNED_CONFIGS", {})
    tile = dict(BLOCK_M=64, BLOCK_N=128, num_warps=8, num_stages=2)
    f = tmp_path / "gpu_tuning.json"
    f.write_text('{"NVIDIA H100 80GB HBM3": {"torch": "2.11", "tiles": [{"kind": "fwd", "D": 64, "dtype": "bfloat16", "causal": false, '
                 '"config": {"BLOCK_M": 64, "BLOCK_N": 128, "num_warps": 8, "num_stages": 2}}], '
                 '"preferred": [{"D": 64, "dtype": "bfloat16", "causal": false, "speedup": 1.04}]}}')
    monkeypatch.setattr(ft, "TUNING_FILE", f)
    default = ft.block_config("fwd", 64, torch.bfloat16, interpret=False)
    assert default == dict(BLOCK_M=128, BLOCK_N=64, num_warps=4, num_stages=3)                 # no GPU named: the defaults
    assert ft.block_config("fwd", 64, torch.bfloat16, interpret=False, gpu="NVIDIA H100 80GB HBM3") == tile
    assert ft.block_config("fwd", 64, torch.bfloat16, interpret=False, gpu="NVIDIA H200") == default
    assert ft.block_config("fwd", 64, torch.bfloat16, True, interpret=False, gpu="NVIDIA H100 80GB HBM3") == default  # causal: not saved
    assert ft.saved_tuning("NVIDIA H100 80GB HBM3")["preferred"] == {(64, "bfloat16", False): 1.04}
    f.write_text("{}")                                                    # read once per process: the cache answers
    assert ft.block_config("fwd", 64, torch.bfloat16, interpret=False, gpu="NVIDIA H100 80GB HBM3") == tile
    ft.TUNED_CONFIGS[("fwd", 64, torch.bfloat16, False)] = default       # tuned in this process: wins
    assert ft.block_config("fwd", 64, torch.bfloat16, interpret=False, gpu="NVIDIA H100 80GB HBM3") == default


def test_the_package_ships_a_tuning_file_with_no_measurement_yet():
    "No GPU has run the check: the file exists (so it is packaged) and holds no entry; every GPU gets the defaults."
    import json
    assert ft.TUNING_FILE.parent == Path(ft.__file__).parent and json.loads(ft.TUNING_FILE.read_text()) == {}
    assert "include transformer_lit/gpu_tuning.json" in (ROOT / "MANIFEST.in").read_text().splitlines()


@needs_triton
def test_compare_with_reference_with_explicit_tiles():
    "The tiles passed are the tiles run: the interpreter's own give the same errors bit for bit, other tiles stay in bounds."
    q, k, v = qkv(37, 37, 16, h=4)
    k, v = k[:, :1], v[:, :1]                                              # one key/value head: the dK/dV sum over the group
    same = ft.compare_with_reference(q, k, v, is_causal=True, config=dict(fwd=ft.block_config("fwd", 16, torch.float32),
                                                                          bwd=ft.block_config("bwd", 16, torch.float32)))
    assert [r["err"] for r in same] == [r["err"] for r in ft.compare_with_reference(q, k, v, is_causal=True)]
    other = ft.compare_with_reference(q, k, v, is_causal=True, config=dict(fwd=dict(BLOCK_M=64, BLOCK_N=16, num_warps=4, num_stages=1)))
    assert_rows_ok(other)
    with pytest.raises(ValueError, match=r"^config=\{'dq': 1\} must be None or a dict with the keys 'fwd' and/or 'bwd'"):
        ft.compare_with_reference(q, k, v, config={"dq": 1})


# -- the backend registry ---------------------------------------------------------------------------

@needs_triton
def test_registered_backend():
    q, k, v = qkv(17, 17, 16)
    out, w, used = attend(q, k, v, is_causal=True, backend="triton")
    assert used == "triton" and w is None
    torch.testing.assert_close(out, attention_backends["math"](q, k, v, is_causal=True), rtol=1e-5, atol=1e-5)
    assert attend(q, k, v).backend != "triton"                                  # "auto" never picks it
    assert ft.triton_supports(q, k, v, None, True, 0.0)
    assert not ft.triton_supports(q, k, v, torch.ones(17, 17, dtype=torch.bool), False, 0.0)
    assert not ft.triton_supports(q, k, v, None, False, 0.1)
    assert not ft.triton_supports(q.double(), k.double(), v.double(), None, False, 0.0)
    with pytest.raises(ValueError, match=r"^mask must be None for the triton backend \(it supports is_causal only\)"):
        ft.triton_backend(q, k, v, mask=torch.ones(17, 17, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"^dropout_p=0.1 must be 0: the triton backend has no dropout"):
        ft.triton_backend(q, k, v, dropout_p=0.1)


def test_auto_takes_triton_only_where_measured_faster_and_never_on_cpu(monkeypatch):
    q = torch.randn(1, 2, 8, 64)
    assert ft.TRITON_PREFERRED == {} and not ft.triton_prefer(q, q, q, None, False, 0.0)
    monkeypatch.setitem(ft.TRITON_PREFERRED, (64, "float32", False), 1.3)
    assert not ft.triton_prefer(q, q, q, None, False, 0.0)                 # CPU tensors: never, even when listed
    assert attend(q, q, q).backend != "triton"
    from transformer_lit.attention import backend_info
    assert backend_info["triton"].prefer is ft.triton_prefer and backend_info["triton"].priority == 40


# -- bad inputs, each with its message ----------------------------------------------------------------

@needs_triton
def test_bad_inputs():
    q, k, v = qkv(8, 8, 16)
    with pytest.raises(TypeError, match=r"^q.dtype=torch.float64 is not supported by the triton backend: use torch.float16, "
                                        r"torch.bfloat16 or torch.float32$"):
        ft.triton_flash_attention(q.double(), k.double(), v.double())
    with pytest.raises(ValueError, match=r"^head dim D=160 is not supported by the triton backend: it supports 1 <= D <= 128$"):
        ft.triton_flash_attention(*qkv(8, 8, 160))
    with pytest.raises(ValueError, match=r"^v.shape\[-1\]=8 must equal q.shape\[-1\]=16: the triton kernels use one head dim$"):
        ft.triton_flash_attention(q, k, v[..., :8])
    with pytest.raises(ValueError, match=r"^q.dim\(\)=5 must be 3 \(B, T, D\) or 4 \(B, H, T, D\) for the triton backend$"):
        ft.triton_flash_attention(q[None], k[None], v[None])
    with pytest.raises(ValueError, match=r"^q, k and v must be on one device, got q on .*, k on meta, v on "):
        ft.triton_flash_attention(q, k.to("meta"), v)
    with pytest.raises(TypeError, match=r"^scale='0.1' must be a number or None$"):
        ft.triton_flash_attention(q, k, v, scale="0.1")
    with pytest.raises(TypeError, match=r"^q.dtype=torch.float32, k.dtype=torch.float16, v.dtype=torch.float32 must be equal$"):
        ft.triton_flash_attention(q, k.half(), v)                              # chapter 00's check_qkv
    if ft.interpreting():
        with pytest.raises(TypeError, match=r"^q.dtype=torch.bfloat16 is not supported by the Triton interpreter .*"
                                            r"use torch.float16 or torch.float32 on a CPU, bfloat16 on CUDA$"):
            ft.triton_flash_attention(q.bfloat16(), k.bfloat16(), v.bfloat16())


def _run(code, **env):
    e = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=e, cwd=ROOT, timeout=120)


def test_imports_without_triton():
    "With triton missing the module imports, registers the backend and says why it is unavailable."
    r = _run("""
import sys; sys.modules['triton'] = None          # makes `import triton` raise ImportError
import torch, transformer_lit.flash_triton as ft
from transformer_lit.attention import attend
ok, why = ft.triton_status('cpu'); print(ok, why)
assert not ok and why.startswith('triton is not installed') and not ft.interpreting()
q = torch.randn(1, 1, 4, 8)
try: ft.triton_flash_attention(q, q, q)
except RuntimeError as e: print('raised:', e)
try: attend(q, q, q, backend='triton')
except ValueError as e: print('attend:', e)
print('auto:', attend(q, q, q).backend)
""")
    assert r.returncode == 0, r.stderr
    assert "raised: the triton backend is unavailable on cpu: triton is not installed" in r.stdout
    assert "attend: backend='triton' does not support these inputs" in r.stdout and "auto: sdpa" in r.stdout


def test_cpu_without_interpreter_is_unavailable(monkeypatch):
    "Kernels compiled for CUDA (TRITON_INTERPRET unset when they were defined) cannot take CPU tensors; the reason says so."
    monkeypatch.setattr(ft, "interpreting", lambda: False)
    monkeypatch.setattr(ft, "TRITON_ERROR", None)
    ok, why = ft.triton_status("cpu")
    assert not ok and why == ("CPU tensors need the Triton interpreter: set TRITON_INTERPRET=1 before "
                              "transformer_lit.flash_triton is imported")
    q = torch.randn(1, 1, 4, 8)
    with pytest.raises(RuntimeError, match=r"^the triton backend is unavailable on cpu: CPU tensors need the Triton interpreter"):
        ft.triton_flash_attention(q, q, q)
    assert not ft.triton_supports(q, q, q, None, False, 0.0)
    assert ft.triton_status("meta") == (False, "device=meta is not supported: use cuda tensors, or cpu ones with TRITON_INTERPRET=1")



@pytest.mark.skipif(not ft.interpreting(), reason="the probe is about the Triton interpreter")
def test_interpreter_loop_probe():
    "The installed triton/NumPy pair runs a loop to a runtime bound (triton 3.6.0 with NumPy 2.4.6 does not)."
    assert ft.interpreter_loop_error() is None


@pytest.mark.skipif(not ft.interpreting(), reason="the probe is about the Triton interpreter")
def test_interpreter_loop_trap_is_reported(monkeypatch):
    "Where the probe fails, the backend is unavailable with the probe's error and the way out, not a crash in a kernel."
    import numpy
    monkeypatch.setattr(ft, "interpreter_loop_error", lambda: "InterpreterError: boom")
    ok, why = ft.triton_status("cpu")
    assert not ok and why == (f"the Triton {ft.triton.__version__} interpreter fails on a loop to a runtime bound with NumPy "
                              f"{numpy.__version__} (InterpreterError: boom); use triton 3.7 or newer, or NumPy older than 2.4")
    q = torch.randn(1, 1, 4, 8)
    with pytest.raises(RuntimeError, match=r"^the triton backend is unavailable on cpu: the Triton .* interpreter fails"):
        ft.triton_flash_attention(q, q, q)
    assert attend(q, q, q).backend != "triton" and not ft.triton_supports(q, q, q, None, False, 0.0)


# -- grouped-query attention: k, v with G heads (in the interpreter: few, small cases) -----------------

def gqa(nq, nk, d, G, dtype=torch.float32, b=2, h=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(b, heads, n, d, generator=g).to(DEV, dtype) for heads, n in ((h, nq), (G, nk), (G, nk))]


@needs_triton
@pytest.mark.parametrize("G,n,is_causal", [(1, 1, False), (2, 7, True), (2, 113, False), (1, 113, True), (4, 7, False)])
def test_gqa_fp32_against_the_math_backend(G, n, is_causal):
    "float32, H = 4 query heads and G key/value heads: output and dq, dk, dv within 1e-4 of float64 (the repeat_kv oracle)."
    rows = ft.compare_with_reference(*gqa(n, n, 16, G), is_causal=is_causal)
    assert_rows_ok(rows)
    assert {r["n_kv"] for r in rows} == {G}


@needs_triton
@pytest.mark.parametrize("G,nq,nk,is_causal", [(1, 7, 7, True), (2, 113, 40, True)])
def test_gqa_fp16_two_times_rule(G, nq, nk, is_causal):
    assert_rows_ok(ft.compare_with_reference(*gqa(nq, nk, 32, G, torch.float16), is_causal=is_causal))


@needs_triton
def test_gqa_grads_equal_the_math_backend_and_sum_over_the_group():
    "Against chapter 00's grouped math backend directly; dK of a shared head is the sum of the group's multi-head dK."
    q, k, v = (x.requires_grad_() for x in gqa(40, 50, 16, 2, b=1, seed=3))
    out = ft.triton_flash_attention(q, k, v, is_causal=True)
    do = torch.randn_like(out)
    grads = torch.autograd.grad(out, (q, k, v), do)
    q64, k64, v64 = (x.detach().double().requires_grad_() for x in (q, k, v))
    ref = scaled_dot_product_attention(q64, k64, v64, is_causal=True)
    torch.testing.assert_close(out.double(), ref, rtol=1e-5, atol=1e-5)
    for a, b in zip(grads, torch.autograd.grad(ref, (q64, k64, v64), do.double())):
        torch.testing.assert_close(a.double(), b, rtol=1e-4, atol=1e-5)
    kr, vr = (ft.repeat_kv(x.detach(), 2).requires_grad_() for x in (k, v))
    out_r = ft.triton_flash_attention(q, kr, vr, is_causal=True)                # the multi-head kernels on copies
    # the grouped kernel reads k, v head h // (H/G) where the multi-head kernel reads its repeated copy: the same programs
    # (block sizes, loop order) on the same numbers, so the same computation, bit for bit
    torch.testing.assert_close(out, out_r, rtol=0, atol=0)
    _, dk_r, dv_r = torch.autograd.grad(out_r, (q, kr, vr), do)
    torch.testing.assert_close(grads[1], dk_r.unflatten(1, (2, 2)).sum(2), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(grads[2], dv_r.unflatten(1, (2, 2)).sum(2), rtol=1e-5, atol=1e-6)


@needs_triton
def test_gqa_three_dim_inputs_and_strided_views():
    "(H, T, D) inputs with G key/value heads; (B, G, T, D) views of (B, T, G, D) tensors keep their strides."
    q3, k3, v3 = (x[0] for x in gqa(19, 23, 16, 1))                              # (4, 19, 16), (1, 23, 16)
    torch.testing.assert_close(ft.triton_flash_attention(q3, k3, v3, is_causal=True).double(),
                               scaled_dot_product_attention(q3.double(), k3.double(), v3.double(), is_causal=True), rtol=1e-5, atol=1e-5)
    g = torch.Generator().manual_seed(2)
    kt, vt = (torch.randn(2, 23, 2, 16, generator=g).to(DEV).requires_grad_() for _ in range(2))  # (B, T, G, D)
    q = torch.randn(2, 4, 19, 16, generator=g).to(DEV).requires_grad_()
    k, v = kt.transpose(1, 2), vt.transpose(1, 2)                                 # (B, G, T, D), not contiguous
    assert ft._kernel_ready(k) is k
    out = ft.triton_flash_attention(q, k, v)
    out.sum().backward()
    ref = scaled_dot_product_attention(q.double(), k.double(), v.double())
    torch.testing.assert_close(out.double(), ref, rtol=1e-5, atol=1e-5)
    assert kt.grad.shape == kt.shape and torch.isfinite(kt.grad).all()


@needs_triton
def test_gqa_backend_supports_attend_and_bad_head_counts():
    q, k, v = gqa(17, 17, 16, 2, b=1)
    assert ft.triton_supports(q, k, v, None, True, 0.0)
    assert not ft.triton_supports(q, k, v, None, True, 0.1)                      # no dropout
    assert not ft.triton_supports(q, k[:, :0], v[:, :0], None, False, 0.0)       # 0 key/value heads do not divide 4
    out, _, used = attend(q, k, v, is_causal=True, backend="triton")
    assert used == "triton"
    torch.testing.assert_close(out, attention_backends["math"](q, k, v, is_causal=True), rtol=1e-5, atol=1e-5)
    assert attend(q, k, v, is_causal=True).backend != "triton"                   # "auto" never picks it here
    keep = torch.ones(17, 17, dtype=torch.bool, device=DEV)
    assert attend(q, k, v, mask=keep).backend != "triton"                        # a mask: "auto" falls back
    q8, k3 = torch.randn(1, 8, 4, 16, device=DEV), torch.randn(1, 3, 4, 16, device=DEV)
    with pytest.raises(ValueError, match=r"^k\.shape\[-3\]=3 key/value heads must divide q\.shape\[-3\]=8 query heads"):
        ft.triton_flash_attention(q8, k3, k3)
    with pytest.raises(ValueError, match=r"^k\.shape\[-3\]=3 key/value heads must divide q\.shape\[-3\]=8 query heads"):
        ft.triton_backend(q8, k3, k3)


def test_gqa_auto_prefers_triton_only_for_measured_multi_head_inputs(monkeypatch):
    "TRITON_PREFERRED comes from multi-head rows, so a grouped input is never preferred on its strength."
    monkeypatch.setattr(ft, "interpreting", lambda: False)
    monkeypatch.setitem(ft.TRITON_PREFERRED, (64, "bfloat16", True), 1.2)
    q, k = torch.empty(1, 8, 4, 64, dtype=torch.bfloat16, device="meta"), torch.empty(1, 2, 4, 64, dtype=torch.bfloat16, device="meta")
    class Cuda:                                                                   # a stand-in with q.is_cuda = True
        def __init__(self, t): self.t = t; self.is_cuda = True; self.shape = t.shape; self.dtype = t.dtype
    assert ft.triton_prefer(Cuda(q), Cuda(q), Cuda(q), None, True, 0.0)
    assert not ft.triton_prefer(Cuda(q), Cuda(k), Cuda(k), None, True, 0.0)


def test_backward_matmul_count():
    "BWD_MATMULS counts the tl.dot calls of the two backward passes: 4 (dK/dV) + 3 (dQ), against 5 in the FLOP convention."
    import inspect
    n = sum(inspect.getsource(getattr(f, "fn", f)).count("tl.dot(") for f in (ft._attn_bwd_dkdv_inner, ft._attn_bwd_dq_inner))
    assert n == ft.BWD_MATMULS == 7
    from transformer_lit.flash import attention_flops
    assert attention_flops(1, 1, 8, 8, 8, mode="bwd") / attention_flops(1, 1, 8, 8, 8) == 2.5


@needs_triton
def test_multihead_gqa_triton_equals_math():
    "MultiHeadAttention(n_kv_heads=2, backend='triton') in float32 equals the module on the math backend (float64)."
    from transformer_lit.multihead import MultiHeadAttention
    torch.manual_seed(0)
    m = MultiHeadAttention(32, 4, n_kv_heads=2, backend="triton").to(DEV)
    ref = MultiHeadAttention(32, 4, n_kv_heads=2, backend="math").to(DEV).double()
    ref.load_state_dict(m.state_dict())
    x = torch.randn(2, 23, 32, device=DEV, requires_grad=True)
    x64 = x.detach().double().requires_grad_()
    a, b = m(x, is_causal=True), ref(x64, is_causal=True)
    torch.testing.assert_close(a.double(), b, rtol=1e-5, atol=1e-5)
    a.sum().backward(); b.sum().backward()
    torch.testing.assert_close(x.grad.double(), x64.grad, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(m.in_proj.weight.grad.double(), ref.in_proj.weight.grad, rtol=1e-4, atol=1e-5)


# -- bad input at every entry point (the kinds of the bad-input probe) ---------------------------------

def _chapter00_refuses(fn):
    try: fn()
    except (TypeError, ValueError): return True
    except Exception: return False
    return False

# chapter 00's check_scale and check_qkv refuse a non-finite scale and a head dim of 0; the triton entry points call them
SCALE_CHECKED = _chapter00_refuses(lambda: ft.check_scale(float("nan")))
HEAD_DIM_CHECKED = _chapter00_refuses(lambda: ft.check_qkv(*(torch.empty(1, 1, 2, 0) for _ in range(3))))


@needs_triton
def test_empty_batch_is_an_empty_result_like_torch():
    for shape in ((0, 2, 8, 16), (2, 0, 8, 16)):
        q, k, v = (torch.randn(shape, device=DEV, requires_grad=True) for _ in range(3))
        out = ft.triton_flash_attention(q, k, v, is_causal=True)
        assert out.shape == torch.nn.functional.scaled_dot_product_attention(q, k, v).shape == shape
        out.sum().backward()
        assert q.grad.shape == shape
    q = torch.randn(0, 2, 8, 16, device=DEV)
    assert all(r["ok"] and r["err"] == 0.0 for r in ft.compare_with_reference(q, q, q))


@needs_triton
def test_head_dim_zero_is_refused_at_entry():
    z = torch.randn(1, 2, 8, 0, device=DEV)
    for fn in (ft.triton_flash_attention, ft.triton_flash_forward):
        with pytest.raises(ValueError, match=r"(q\.shape\[-1\]|head dim D)=0"): fn(z, z, z)
    with pytest.raises(ValueError, match=r"^head_dim=0 must be an int in \[1, 128\]$"): ft.block_config("fwd", 0, torch.float16)
    with pytest.raises(TypeError, match=r"^dtype=torch.float64 must be one of"): ft.block_config("fwd", 64, torch.float64)


@pytest.mark.skipif(not HEAD_DIM_CHECKED, reason="chapter 00's check_qkv does not refuse a head dim of 0 yet")
def test_reference_head_dim_zero_is_refused():
    z = torch.randn(1, 2, 8, 0)
    with pytest.raises(ValueError, match=r"q\.shape\[-1\]=0"): ft.reference_attention(z, z, z, upcast=False)


@needs_triton
@pytest.mark.skipif(not SCALE_CHECKED, reason="chapter 00's check_scale does not refuse non-finite scales yet")
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_scale_is_refused(bad):
    q, k, v = qkv(8, 8, 16)
    for fn in (ft.triton_flash_attention, ft.triton_flash_forward, ft.triton_backend, ft.reference_attention):
        with pytest.raises(ValueError, match=rf"^scale={bad!r} must be a finite number or None"): fn(q, k, v, scale=bad)


@needs_triton
def test_launchers_check_their_inputs():
    q, k, v = qkv(8, 8, 16)
    with pytest.raises(ValueError, match=r"^q.dim\(\)=3 must be 4 \(B, H, T, D\) for the kernel launchers$"):
        ft.triton_flash_forward(q[0], k[0], v[0])
    wide = torch.randn(1, 2, 8, 32, device=DEV)[..., ::2]                     # (B, H, T, D) with stride 2 in the head dim
    with pytest.raises(ValueError, match=r"^q.stride\(\)=\(512, 256, 32, 2\) must have a contiguous last dim"):
        ft.triton_flash_forward(wide, k, v)
    o, lse2 = ft.triton_flash_forward(q, k, v)
    with pytest.raises(TypeError, match=r"^q.dtype=torch.float64 is not supported by the triton backend"):
        ft.triton_flash_backward(o.double(), q.double(), k.double(), v.double(), o.double(), lse2)
    with pytest.raises(TypeError, match=r"^scale='x' must be a number or None$"): ft.triton_flash_backward(o, q, k, v, o, lse2, scale="x")


def test_tile_phases_bad_arguments():
    with pytest.raises(ValueError, match=r"^block_m=0 must be a positive int$"): ft.tile_phases(64, 64, 0, 32)
    with pytest.raises(ValueError, match=r"^n_k=-1 must be an int >= 0$"): ft.tile_phases(64, -1, 32, 32)
    with pytest.raises(TypeError, match=r"^block_n=16.0 must be a positive int$"): ft.tile_phases(64, 64, 32, 16.0)
    assert ft.tile_phases(0, 64, 32, 32).shape == (0,)


# -- the GPU tile sizes and the tuning candidates, run in the interpreter -------------------------------

def _gpu_configs():
    "Every tile configuration a GPU would launch: the defaults for fp32 and 16-bit inputs (D = 64 and 128), and the tuning candidates."
    from transformer_lit.gpu_check import BWD_CANDIDATES, FWD_CANDIDATES
    fwd = {str(c): c for c in [ft.block_config("fwd", d, dt, interpret=False) for d in (64, 128) for dt in (torch.float32, torch.float16)] + FWD_CANDIDATES}
    bwd = {str(c): c for c in [ft.block_config("bwd", d, dt, interpret=False) for d in (64, 128) for dt in (torch.float32, torch.float16)] + BWD_CANDIDATES}
    return list(fwd.values()), list(bwd.values())

@needs_triton
@pytest.mark.skipif(DEV != "cpu", reason="the interpreter run of the GPU tiles (on a GPU the other tests launch them)")
@pytest.mark.parametrize("G, nq, nk, is_causal", [(4, 37, 37, True), (2, 29, 131, False), (1, 131, 67, True)])
def test_gpu_tiles_and_tuning_candidates_in_the_interpreter(G, nq, nk, is_causal):
    "The tiles a GPU launches (never run on this machine otherwise): fp32, grouped-query, causal and not, odd lengths, against float64."
    fwd, bwd = _gpu_configs()
    assert len(fwd) >= 7 and len(bwd) >= 4                          # the defaults and every candidate, without repeats
    g = torch.Generator().manual_seed(G)
    q = torch.randn(1, 4, nq, 40, generator=g)                      # (B, H, Lq, D): D = 40 pads to 64 inside the kernels
    k, v = (torch.randn(1, G, nk, 40, generator=g) for _ in range(2))
    do = torch.randn_like(q)
    q64, k64, v64 = (t.double().requires_grad_() for t in (q, k, v))
    o64 = scaled_dot_product_attention(q64, k64, v64, is_causal=is_causal)
    grads64 = torch.autograd.grad(o64, (q64, k64, v64), do.double())
    err = lambda a, b: (a.double() - b).abs().max().item()
    # fp32 against float64: the math backend's own fp32 error sets the scale of the bound
    o32 = scaled_dot_product_attention(q, k, v, is_causal=is_causal)
    bound = 50 * max(err(o32, o64), 1e-7)
    for cfg in fwd:
        o, lse2 = ft._forward(q, k, v, is_causal, None, config=cfg)
        assert err(o, o64) <= bound, (cfg, err(o, o64), bound)
    o, lse2 = ft._forward(q, k, v, is_causal, None)
    for cfg in bwd:
        for got, want in zip(ft._backward(do, q, k, v, o, lse2, is_causal, None, config=cfg), grads64):
            assert err(got, want) <= 50 * max(1e-7, want.abs().max().item() * 1e-6), (cfg, err(got, want))
