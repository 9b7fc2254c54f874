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
