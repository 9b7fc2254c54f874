"""transformer_lit.bench: the sweep, its table and plots, the layer benchmark, and the command line."""
import json, math, os, subprocess, sys
from pathlib import Path
import pytest
import torch
from transformer_lit import bench
from transformer_lit.bench import (bench_attention, bench_backends, bench_mha, markdown_table, mha_table, main,
                                   parse_args, time_ms, math_bytes)
from transformer_lit.flash import attention_flops

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny ops: one thread (tests/conftest.py)

def test_time_ms_is_a_median():
    calls = iter([0.0, 0.03, 0.0, 0.001])                             # warm-up, then three timed sleeps
    import time
    ms = time_ms(lambda: time.sleep(next(calls)), repeats=3, warmup=1)
    assert 0.0 <= ms < 25                                             # the median (0 or 1 ms), not the 30 ms outlier

def test_backends_on_cpu():
    found = bench_backends("cpu")
    assert {"math", "sdpa", "flash", "triton", "sdpa-flash", "sdpa-efficient", "sdpa-cudnn"} <= set(found)
    for name in ("math", "sdpa", "flash"): assert found[name][0] is not None and found[name][1] is None
    for name in ("sdpa-flash", "sdpa-efficient", "sdpa-cudnn"):
        assert found[name] == (None, "PyTorch's fused SDPA kernels are forced one at a time on CUDA only")
    fn, why = found["triton"]
    assert (fn is None) == (why is not None)                         # runs, or skipped with a reason

def test_sweep_rows_and_ratios():
    rows = bench_attention([16, 40], backends=["flash", "math", "sdpa"], heads=2, head_dim=8, repeats=2, progress=False)
    assert [(r["backend"], r["N"]) for r in rows] == [(b, n) for n in (16, 40) for b in ("sdpa", "flash", "math")]
    by = {(r["backend"], r["N"]): r for r in rows}
    for (name, N), r in by.items():
        assert r["note"] == "" and r["ms"] > 0 and r["peak_mib"] >= 0
        assert r["vs_sdpa"] == pytest.approx(r["ms"] / by[("sdpa", N)]["ms"])
        assert r["tflops"] == pytest.approx(attention_flops(1, 2, N, N, 8) / (r["ms"] * 1e-3) / 1e12)

def test_backward_and_causal_flops():
    rows = bench_attention([24], backends=["sdpa", "flash"], heads=1, head_dim=8, causal=True, backward=True, repeats=1, progress=False)
    for r in rows:
        assert r["tflops"] == pytest.approx(3.5 * 0.5 * 4 * 24 * 24 * 8 / (r["ms"] * 1e-3) / 1e12)

def test_skips_and_errors_are_recorded(monkeypatch):
    monkeypatch.setattr(bench, "available_bytes", lambda device="cpu": 1000)   # pretend memory is tiny
    rows = bench_attention([16], backends=["sdpa", "math", "sdpa-efficient"], heads=1, head_dim=8, repeats=1, progress=False)
    by = {r["backend"]: r for r in rows}
    assert by["math"]["note"].startswith("skipped: needs ~0.0 GiB, over half of the 0.0 GiB available")
    assert math.isnan(by["math"]["ms"]) and by["sdpa-efficient"]["note"].startswith("skipped: PyTorch's fused")
    def broken(q, k, v, **kw): raise RuntimeError("out of memory")
    found = bench_backends("cpu"); found["math"] = (broken, None)
    monkeypatch.setattr(bench, "bench_backends", lambda device: found)
    monkeypatch.setattr(bench, "available_bytes", lambda device="cpu": 2 ** 50)
    rows = bench_attention([16], backends=["math", "sdpa"], heads=1, head_dim=8, repeats=1, progress=False)
    assert rows[1]["backend"] == "math" and rows[1]["note"] == "error: RuntimeError: out of memory"
    assert rows[0]["note"] == "" and rows[0]["ms"] > 0

def test_bad_arguments():
    with pytest.raises(ValueError, match=r"^backends contains 'fast'; the names are \["):
        bench_attention([16], backends=["fast"], progress=False)
    with pytest.raises(ValueError, match=r"^seq_lens=\[16, 0\] must be a non-empty list of positive ints$"):
        bench_attention([16, 0], backends=["sdpa"], progress=False)
    with pytest.raises(SystemExit): parse_args(["--heads", "0"])
    with pytest.raises(SystemExit): parse_args(["--dtype", "int8"])
    assert parse_args(["--seq-lens", "8", "16", "--causal"]).seq_lens == [8, 16]

def test_markdown_table():
    rows = [dict(backend="sdpa", N=8, ms=1.0, peak_mib=0.5, tflops=0.001, vs_sdpa=1.0, note=""),
            dict(backend="flash", N=8, ms=2.5, peak_mib=0.25, tflops=0.0004, vs_sdpa=2.5, note=""),
            dict(backend="triton", N=8, ms=math.nan, peak_mib=math.nan, tflops=math.nan, vs_sdpa=math.nan, note="skipped: no GPU"),
            dict(backend="triton", N=16, ms=math.nan, peak_mib=math.nan, tflops=math.nan, vs_sdpa=math.nan, note="skipped: no GPU")]
    assert markdown_table(rows, "t").splitlines() == [
        "**t**", "",
        "| backend | N | median ms | peak extra MiB | TFLOP/s | time / SDPA |", "|---|---:|---:|---:|---:|---:|",
        "| sdpa | 8 | 1.00 | 0.5 | 0.0010 | 1.00 |", "| flash | 8 | 2.50 | 0.2 | 0.0004 | 2.50 |",
        "", "- triton (N=8, 16): skipped: no GPU"]

def test_mha_benchmark():
    rows = bench_mha(batch=2, seq_len=16, d_model=32, n_heads=4, repeats=1)
    assert rows[0]["module"].startswith("transformer_lit MultiHeadAttention (auto -> ")
    assert rows[1]["module"] == "torch.nn.MultiheadAttention" and rows[1]["vs_torch"] == 1.0
    assert rows[0]["vs_torch"] == pytest.approx(rows[0]["ms"] / rows[1]["ms"])
    assert "| torch.nn.MultiheadAttention |" in mha_table(rows)

def test_cli_main_writes_table_json_and_plot(tmp_path):
    rows = main(["--seq-lens", "16", "32", "--heads", "1", "--head-dim", "8", "--backends", "sdpa", "flash", "math",
                 "--repeats", "1", "--no-progress", "--out", str(tmp_path), "--backward", "--causal"])
    stem = "attention_cpu_float32_causal_fwd_bwd"
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"{stem}.json", f"{stem}.md", f"{stem}.png"]
    table = (tmp_path / f"{stem}.md").read_text().splitlines()
    assert table[0].startswith("**forward + backward, B=1, H=1, D=8, float32, causal, cpu, threads=")
    assert sum(l.startswith("| flash | ") for l in table) == 2 and len(rows) == 6
    saved = json.loads((tmp_path / f"{stem}.json").read_text())
    assert [(r["backend"], r["N"]) for r in saved["rows"]] == [(r["backend"], r["N"]) for r in rows]
    assert (tmp_path / f"{stem}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

def test_python_dash_m_runs(tmp_path):
    env = dict(os.environ, MPLBACKEND="Agg")
    res = subprocess.run([sys.executable, "-m", "transformer_lit.bench", "--seq-lens", "8", "--heads", "1", "--head-dim", "4",
                          "--backends", "sdpa", "flash", "--repeats", "1", "--threads", "1", "--no-progress", "--out", str(tmp_path)],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "| flash | 8 |" in res.stdout and (tmp_path / "attention_cpu_float32_fwd.md").exists()


# ---------------------------------------------------------------- grouped-query decoding step
from transformer_lit.bench import bench_gqa, gqa_table, repeated_kv_layer
from transformer_lit.multihead import KVCache, MultiHeadAttention, kv_cache_bytes

@pytest.mark.parametrize("G", [1, 2, 4])
@pytest.mark.parametrize("bias,qkv_bias", [(True, None), (False, True), (False, False)])
def test_repeated_kv_layer_computes_the_same(G, bias, qkv_bias):
    torch.manual_seed(G)
    layer = MultiHeadAttention(16, 4, n_kv_heads=G, bias=bias, qkv_bias=qkv_bias).double()
    with torch.no_grad():
        for p in layer.parameters(): p.normal_(0, 0.3)
    full = repeated_kv_layer(layer)
    assert full.n_kv_heads == 4 and full.in_proj.weight.shape == (48, 16)
    assert (full.in_proj.bias is None) == (layer.in_proj.bias is None) and (full.out_proj.bias is None) == (not bias)
    x = torch.randn(2, 7, 16, dtype=torch.float64)
    torch.testing.assert_close(full(x, is_causal=True), layer(x, is_causal=True), atol=1e-12, rtol=0)
    c1, c2 = KVCache(), KVCache()
    layer(x, cache=c1); full(x, cache=c2)
    assert c1.nbytes() * (4 // G) == c2.nbytes()
    with pytest.raises(TypeError, match=r"^layer must be a MultiHeadAttention with a fused in_proj"):
        repeated_kv_layer(MultiHeadAttention(16, 4, kdim=5))

def test_bench_gqa_rows_bytes_and_ratios():
    rows = bench_gqa(batch=2, context=32, d_model=32, n_heads=8, repeats=2, warmup=1)
    assert [(r["backend"], r["G"], r["variant"]) for r in rows] == [
        (b, G, v) for b in ("sdpa", "math") for G in (8, 2, 1) for v in ("grouped", "repeated")]
    for r in rows:
        heads = r["G"] if r["variant"] == "grouped" else 8
        assert r["cache_heads"] == heads and r["cache_bytes"] == kv_cache_bytes(heads, 4, 32, batch=2, dtype=torch.float32)
        assert r["ms"] > 0 and r["max_abs_diff"] < 1e-5
        if r["variant"] == "repeated": assert r["vs_repeated_ms"] == 1.0 and r["vs_repeated_bytes"] == 1.0
    by = {(r["backend"], r["G"], r["variant"]): r for r in rows}
    for b in ("sdpa", "math"):
        for G in (8, 2, 1):
            g, rep = by[(b, G, "grouped")], by[(b, G, "repeated")]
            assert g["vs_repeated_bytes"] == G / 8 and g["vs_repeated_ms"] == pytest.approx(g["ms"] / rep["ms"])
    table = gqa_table(rows, "t").splitlines()
    assert table[:3] == ["**t**", "", "| backend | G (kv heads) | layer | cached heads | cache bytes | step median ms | time / repeated | cache / repeated | max abs diff |"]
    assert len(table) == 4 + len(rows) and table[4].startswith("| sdpa | 8 | grouped | 8 | 16,384 | ")
    assert [r["G"] for r in bench_gqa(batch=1, context=4, d_model=16, n_heads=4, kv_heads=(2,), backends=("math",), repeats=1, warmup=0)] == [2, 2]
    with pytest.raises(ValueError, match=r"^kv_heads contains 3, which does not divide n_heads=8$"):
        bench_gqa(n_heads=8, kv_heads=(3,))

def test_cli_gqa_flag(tmp_path, monkeypatch, capsys):
    small = lambda dtype, device: bench_gqa(batch=1, context=8, d_model=16, n_heads=4, dtype=dtype, device=device, repeats=1, warmup=0)
    monkeypatch.setattr(bench, "bench_gqa", small)
    rows = main(["--seq-lens", "8", "--heads", "1", "--head-dim", "4", "--backends", "sdpa", "--repeats", "1",
                 "--no-progress", "--gqa", "--out", str(tmp_path)])
    assert (tmp_path / "gqa_cpu_float32.md").read_text().startswith("**one decoding step, B=4, context 1024")
    assert sum("variant" in r for r in rows) == 8                 # H=4: G = 4 and 1 (H/4 = 1), two backends, two layers
    out = capsys.readouterr().out
    assert "wrote attention_cpu_float32_fwd.md, .json, .png into --out" in out and str(tmp_path) not in out
