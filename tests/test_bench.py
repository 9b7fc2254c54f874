"""transformer_lit.bench: the sweep, its table and plots, the layer benchmark, and the command line."""
import json, math, os, subprocess, sys
from pathlib import Path
import pytest
import torch
from transformer_lit import bench
from transformer_lit.bench import (bench_attention, bench_backends, bench_mha, markdown_table, mha_table, main,
                                   parse_args, time_ms, math_bytes)
from transformer_lit.flash import attention_flops
from transformer_lit.decoding import lm_generate, seq2seq_generate, lm_beam_search, seq2seq_beam_search, new_cache
from transformer_lit.fast_decoding import fast_generate, new_static_cache

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny ops: one thread (tests/conftest.py)

def test_time_ms_is_a_median(monkeypatch):
    "A fake clock: the calls take 0 (warm-up), 30, 0 and 1 ms; the median of the three timed runs is 1 ms exactly."
    import time
    clock = [0.0]
    durations = iter([0.0, 0.030, 0.0, 0.001])
    monkeypatch.setattr(time, "perf_counter", lambda: clock[0])
    def fn(): clock[0] += next(durations)
    assert time_ms(fn, repeats=3, warmup=1) == pytest.approx(1.0)

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
        assert r["ms_lo"] <= r["ms"] <= r["ms_hi"] and r["vs_ref_lo"] <= r["vs_ref"] <= r["vs_ref_hi"]   # median within its range
        if name == "sdpa": assert r["vs_ref"] == r["vs_ref_lo"] == r["vs_ref_hi"] == 1.0   # the reference's own t / t
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
    rows = [dict(backend="sdpa", N=8, ms=1.0, ms_lo=0.9, ms_hi=1.2, peak_mib=0.5, tflops=0.001, vs_ref=1.0, vs_ref_lo=1.0, vs_ref_hi=1.0, note=""),
            dict(backend="flash", N=8, ms=2.5, ms_lo=2.0, ms_hi=3.0, peak_mib=0.25, tflops=0.0004, vs_ref=2.5, vs_ref_lo=1.9, vs_ref_hi=3.1, note=""),
            dict(backend="triton", N=8, ms=math.nan, peak_mib=math.nan, tflops=math.nan, vs_ref=math.nan, note="skipped: no GPU"),
            dict(backend="triton", N=16, ms=math.nan, peak_mib=math.nan, tflops=math.nan, vs_ref=math.nan, note="skipped: no GPU")]
    assert markdown_table(rows, "t").splitlines() == [
        "**t**", "",
        "| backend | N | median ms | ms min–max | peak extra MiB | TFLOP/s | time / SDPA | time / SDPA, min–max over rounds |",
        "|---|---:|---:|---|---:|---:|---:|---|",
        "| sdpa | 8 | 1.00 | 0.90–1.20 | 0.5 | 0.0010 | 1.00 | 1.00–1.00 |", "| flash | 8 | 2.50 | 2.00–3.00 | 0.2 | 0.0004 | 2.50 | 1.90–3.10 |",
        "", "- triton (N=8, 16): skipped: no GPU"]

def test_mha_benchmark():
    rows = bench_mha(batch=2, seq_len=16, d_model=32, n_heads=4, repeats=1)
    assert rows[0]["module"].startswith("transformer_lit MultiHeadAttention (auto -> ")
    assert rows[1]["module"] == "torch.nn.MultiheadAttention" and rows[1]["vs_torch"] == 1.0
    assert rows[0]["vs_torch"] == pytest.approx(rows[0]["ms"] / rows[1]["ms"])
    assert "| torch.nn.MultiheadAttention |" in mha_table(rows)
    rows = bench_mha(batch=2, seq_len=16, d_model=32, n_heads=4, repeats=3, warmup=0)
    for r in rows: assert r["ms_lo"] <= r["ms"] <= r["ms_hi"] and r["vs_torch_lo"] <= r["vs_torch"] <= r["vs_torch_hi"]

def test_interleaved_rounds_rotate_and_ratios_pair(monkeypatch):
    "Round by round, the order rotating; the ratio is taken per round (a fake clock: b always takes twice a's time)."
    import time
    clock, order = [0.0], []
    monkeypatch.setattr(time, "perf_counter", lambda: clock[0])
    def run(name, ms):
        def fn(): order.append(name); clock[0] += ms * 1e-3 * (1 + len(order))   # the machine slows down as it goes
        return fn
    times = bench._interleaved({"a": run("a", 1.0), "b": run("b", 2.0)}, repeats=3, warmup=1)
    assert order == ["a", "b", "b", "a", "a", "b", "b", "a"]
    r = bench._ratios(times["b"], times["a"])
    assert r["lo"] > 1 and bench.ratio_reading(r["lo"], r["hi"]) == "slower" and bench.ratio_reading(0.9, 1.1).startswith("no difference")
    assert bench._spread([3, 1, 2]) == dict(median=2, q1=1.5, q3=2.5, lo=1, hi=3)

def test_peer_skips_without_transformers(monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", None)        # import transformers raises ImportError
    cfg = bench._peer_config(vocab_size=64, d_model=16, n_layers=1, n_heads=2, max_len=32)
    rows = bench.bench_peer(cfg, batch=1, seq_len=8, prompt_len=4, new_tokens=4, workloads=("prefill", "generate"))
    assert [r["workload"] for r in rows] == ["prefill", "generate"]
    assert all(r["note"].startswith("skipped: transformers is not installed") for r in rows)
    assert "- prefill: skipped: transformers is not installed" in bench.peer_table(rows)

def test_peer_same_weights_same_numbers():
    pytest.importorskip("transformers")
    cfg = bench._peer_config(vocab_size=97, d_model=32, n_layers=2, n_heads=4, max_len=64)
    rows = bench.bench_peer(cfg, batch=2, seq_len=13, prompt_len=5, new_tokens=7, workloads=("train", "prefill", "generate"),
                            repeats=2, warmup=0)
    by = {r["workload"]: r for r in rows}
    assert float(by["train"]["check"].split()[2]) < 1e-4 and float(by["prefill"]["check"].split()[-1]) < 1e-4
    assert by["generate"]["check"] == "7 tokens identical"
    for r in rows: assert r["ours_lo"] <= r["ours_ms"] <= r["ours_hi"] and r["ratio_lo"] <= r["ratio"] <= r["ratio_hi"]
    with pytest.raises(ValueError, match=r"prompt_len=60 plus new_tokens=7 must be <= config.max_len=64"):
        bench.bench_peer(cfg, seq_len=8, prompt_len=60, new_tokens=7)

def test_peer_compiled_generation_gives_the_same_tokens():
    "The generate-compiled workload runs fast_generate(compile_step=True) (Inductor, once) and checks its tokens against transformers'."
    pytest.importorskip("transformers")
    cfg = bench._peer_config(vocab_size=97, d_model=32, n_layers=2, n_heads=4, max_len=64)
    (row,) = bench.bench_peer(cfg, seq_len=8, prompt_len=5, new_tokens=6, workloads=("generate-compiled",), repeats=1, warmup=0)
    assert row["workload"] == "generate-compiled" and row["check"] == "6 tokens identical" and row["compile_s"] > 0

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
from transformer_lit.multihead import MultiHeadAttention, kv_cache_bytes
from transformer_lit.decoding import KVCache

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
            assert g["vs_repeated_bytes"] == G / 8 and g["vs_repeated_lo"] <= g["vs_repeated_ms"] <= g["vs_repeated_hi"]   # paired by round
            assert g["ms_lo"] <= g["ms"] <= g["ms_hi"] and rep["vs_repeated_lo"] == rep["vs_repeated_hi"] == 1.0
    table = gqa_table(rows, "t").splitlines()
    assert table[:3] == ["**t**", "", "| backend | G (kv heads) | layer | cached heads | cache bytes | step median ms | ms min–max | time / repeated | "
                         "time / repeated, min–max over rounds | cache / repeated | max abs diff |"]
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


# ---------------------------------------------------------------- one sweep: settings, grouped heads, tokens, deadline, log
def test_sweep_records_its_setting_and_grouped_heads():
    rows = bench_attention([16, 32], backends=["sdpa", "math"], heads=4, head_dim=8, kv_heads=2, tokens=64, causal=True,
                           backward=True, repeats=1, progress=False)
    assert [(r["backend"], r["N"], r["B"]) for r in rows] == [("sdpa", 16, 4), ("math", 16, 4), ("sdpa", 32, 2), ("math", 32, 2)]
    for r in rows:
        assert (r["D"], r["causal"], r["mode"], r["H"], r["G"], r["ref"]) == (8, True, "fwd+bwd", 4, 2, "sdpa") and r["ms"] > 0
        assert r["tflops"] == pytest.approx(attention_flops(r["B"], 4, r["N"], r["N"], 8, True, "fwd+bwd") / (r["ms"] * 1e-3) / 1e12)
    with pytest.raises(ValueError, match=r"^kv_heads=3 must divide heads=4$"):
        bench_attention([16], backends=["sdpa"], heads=4, kv_heads=3, progress=False)

def test_sweep_reference_and_table_columns():
    rows = bench_attention([16], backends=["sdpa", "flash"], heads=1, head_dim=8, reference="flash", repeats=1, progress=False)
    assert [r["backend"] for r in rows] == ["flash", "sdpa"] and rows[0]["vs_ref"] == 1.0
    assert rows[1]["vs_ref"] == pytest.approx(rows[1]["ms"] / rows[0]["ms"])
    assert markdown_table(rows).splitlines()[0] == ("| backend | N | median ms | ms min–max | peak extra MiB | TFLOP/s | time / flash | "
                                                    "time / flash, min–max over rounds |")
    both = rows + bench_attention([16], backends=["sdpa"], heads=1, head_dim=8, causal=True, repeats=1, progress=False)
    assert markdown_table(both).splitlines()[0].startswith("| causal | backend | N |")

def test_sweep_stops_at_the_deadline():
    "Past the deadline nothing is timed: every row says why it is empty, and each row is still logged."
    import time
    lines = []
    rows = bench_attention([16, 32], backends=["sdpa", "flash"], heads=1, head_dim=8, tokens=32, deadline=time.time() - 1,
                           log=lines.append, progress=False)
    assert [(r["N"], r["B"]) for r in rows] == [(16, 2), (16, 2), (32, 1), (32, 1)]
    assert all(r["note"] == "skipped: time budget spent" and math.isnan(r["ms"]) for r in rows)
    assert lines == [f"  {b} D=8 causal=False N={n} B={B} H=1 G=1 fwd: skipped: time budget spent"
                     for n, B in ((16, 2), (32, 1)) for b in ("sdpa", "flash")]

def test_time_ms_clears_grads_and_refuses_bad_counts():
    x = torch.ones(3, requires_grad=True)
    time_ms(lambda: (x * 2).sum().backward(), repeats=3, warmup=2, grads=[x])
    assert torch.equal(x.grad, torch.full((3,), 2.0))                  # one backward's gradient, not five
    with pytest.raises(ValueError, match=r"^repeats=0 must be a positive int$"): time_ms(lambda: None, repeats=0)
    with pytest.raises(ValueError, match=r"^warmup=-1 must be an int >= 0$"): time_ms(lambda: None, warmup=-1)
    with pytest.raises(TypeError, match=r"^fn=3 must be callable$"): time_ms(3)

@pytest.mark.parametrize("kw,exc,words", [
    (dict(heads=0), ValueError, r"^heads=0 must be a positive int$"), (dict(head_dim=0), ValueError, r"^head_dim=0 must be a positive int$"),
    (dict(batch=0), ValueError, r"^batch=0 must be a positive int$"), (dict(repeats=0), ValueError, r"^repeats=0 must be a positive int$"),
    (dict(dtype=torch.int64), TypeError, r"^dtype=torch.int64 must be a floating torch.dtype, e.g. torch.float32$"),
    (dict(seq_lens=[16.5]), ValueError, r"^seq_lens=\[16.5\] must be a non-empty list of positive ints$"),
    (dict(reference="fast"), ValueError, r"^reference='fast' must be one of the backends \['flash'")])
def test_sweep_bad_arguments(kw, exc, words):
    with pytest.raises(exc, match=words): bench_attention(**{"seq_lens": [16], "backends": ["sdpa"], "progress": False, **kw})

def test_markdown_table_with_columns():
    rows = [dict(name="a", x=1.2345, n=3), dict(name="b", x=2.0, n=12)]
    cols = [("name", "name", ""), ("x", "x", ".2f"), ("twice n", lambda r: 2 * r["n"], "d")]
    assert markdown_table(rows, None, cols).splitlines() == ["| name | x | twice n |", "|---|---:|---:|", "| a | 1.23 | 6 |", "| b | 2.00 | 24 |"]

def test_plot_bench_panels_per_setting():
    import matplotlib; matplotlib.use("Agg")
    rows = bench_attention([8, 16], backends=["sdpa"], heads=4, head_dim=8, repeats=1, progress=False)
    rows += bench_attention([8, 16], backends=["sdpa"], heads=4, head_dim=8, kv_heads=1, causal=True, repeats=1, progress=False)
    fig = bench.plot_bench(rows, "t", keys=("tflops",))
    assert [a.get_title() for a in fig.axes] == ["D=8, fwd", "D=8, fwd, G=H/4"]
    assert len(bench.plot_bench(rows[:2]).axes) == 3


# ---------------------------------------------------------------- torch.compile against eager
def test_bench_compile_structure_and_equality():
    "A tiny model traced by aot_eager (no code generated): three workloads, equal outputs, positive times; no speed is asserted."
    from transformer_lit.model import TransformerConfig
    cfg = TransformerConfig(vocab_size=32, d_model=16, n_heads=2, n_layers=1, d_ff=32, dropout=0.0, max_len=16)
    rows = bench.bench_compile(cfg, batch=2, seq_len=8, repeats=1, warmup=0, backend="aot_eager")
    assert [r["workload"] for r in rows] == ["forward", "train", "decode"]
    for r in rows:
        assert r["allclose"] and r["max_abs_diff"] <= 1e-5 and r["eager_ms"] > 0 and r["compiled_ms"] > 0 and r["compile_s"] > 0
        assert r["ratio"] == pytest.approx(r["compiled_ms"] / r["eager_ms"]) and not r["fullgraph"]   # one round: one paired ratio
        assert r["ratio_lo"] == r["ratio"] == r["ratio_hi"] and r["reading"] == bench.ratio_reading(r["ratio_lo"], r["ratio_hi"])
    assert bench.torch_compile_table(rows).splitlines()[0].startswith("| workload | eager ms | compiled ms | compiled / eager |")
    with pytest.raises(ValueError, match=r"^workloads=\('eval',\) must be a non-empty subset"): bench.bench_compile(cfg, seq_len=8, workloads=("eval",))
    with pytest.raises(ValueError, match=r"^seq_len=256 must be <= config.max_len=16$"): bench.bench_compile(cfg)
    with pytest.raises(ValueError, match=r"^backend='nope' must be a torch.compile backend: one of \[.*'inductor'"): bench.bench_compile(cfg, seq_len=8, backend="nope")
    with pytest.raises(TypeError, match=r"^config must be a TransformerConfig, got dict$"): bench.bench_compile({})
    with pytest.raises(ValueError, match=r"^seq_len=1 must be an int >= 2$"): bench.bench_compile(cfg, seq_len=1)

def test_decode_step_equals_a_full_forward():
    "decode_step on a static cache of T - 1 tokens gives the last position's logits of a forward over all T tokens, call after call."
    from transformer_lit.model import DecoderOnlyLM, TransformerConfig
    cfg = TransformerConfig(vocab_size=32, d_model=16, n_heads=2, n_layers=2, d_ff=32, dropout=0.0, max_len=16)
    torch.manual_seed(0)
    m = DecoderOnlyLM(cfg).double().eval()
    idx, _ = bench.lm_inputs(cfg, 2, 9)
    cache = new_static_cache(m, max_len=9, batch=2); m(idx[:, :-1], cache=cache)
    for _ in range(2):                                                     # rewound each time: the same step again
        out = bench.decode_step(m, cache, 8, idx[:, -1:])
        torch.testing.assert_close(out, m(idx)[:, -1:], rtol=1e-10, atol=1e-10)
        assert int(cache.pos) == 9
    with pytest.raises(TypeError, match=r"^cache must be a StaticCache \(new_static_cache\(model, max_len, batch\)\), got DecoderCache$"):
        bench.decode_step(m, new_cache(m), 8, idx[:, -1:])
    with pytest.raises(ValueError, match=r"^context=9 must be an int in \[0, 8\]$"): bench.decode_step(m, cache, 9, idx[:, -1:])


@pytest.mark.parametrize("fn,kw,words", [
    (bench_mha, dict(batch=0), r"^batch=0 must be a positive int$"), (bench_mha, dict(d_model=0), r"^d_model=0 must be a positive int$"),
    (bench_mha, dict(warmup=-1), r"^warmup=-1 must be an int >= 0$"),
    (bench_gqa, dict(context=0), r"^context=0 must be a positive int$"), (bench_gqa, dict(batch=0), r"^batch=0 must be a positive int$"),
    (bench_gqa, dict(repeats=0), r"^repeats=0 must be a positive int$"),
    (bench_gqa, dict(kv_heads=(0,)), r"^kv_heads contains 0, which is not a positive int$")])
def test_layer_benchmarks_bad_arguments(fn, kw, words):
    with pytest.raises(ValueError, match=words): fn(**kw)
