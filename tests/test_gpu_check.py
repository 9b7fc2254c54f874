"""transformer_lit.gpu_check and scripts/gpu_check.sh: the check a lent GPU runs once, tested here in its dry mode.

What a cut-off run must still bring back is tested with deadlines made tiny: a phase stopped at its deadline, a
phase interrupted past its grace, the report on disk after every case and phase, the table last. The order of the
correctness cases, the tuned tiles saved where chapter 16 reads them, and SDPA's own choice are tested without a GPU.
"""
import json, math, os, subprocess, sys, time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

import transformer_lit.flash_triton as ft
import transformer_lit.gpu_check as gc
from transformer_lit import bench

ROOT = Path(__file__).resolve().parent.parent
DEV = "cuda" if torch.cuda.is_available() else "cpu"
needs_triton = pytest.mark.skipif(not ft.triton_status(DEV)[0], reason=f"triton backend unavailable: {ft.triton_status(DEV)[1]}")
dry_only = pytest.mark.skipif(DEV != "cpu" or not ft.interpreting(), reason="the dry run: the interpreter on a CPU")
TABLE_HEAD = ("| backend | N | median ms | ms min–max | peak extra MiB | TFLOP/s | time / SDPA | time / SDPA, min–max over rounds |")

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny interpreted kernels: one thread (tests/conftest.py)


@pytest.fixture
def fresh_tuning(monkeypatch):
    "Tuned tiles and read files of this test only: TUNED_CONFIGS and the read cache start empty and are restored."
    monkeypatch.setattr(ft, "TUNED_CONFIGS", {})
    monkeypatch.setattr(ft, "_SAVED", {})


def timings(pivot, peers=("sdpa_flash",)):
    "Long benchmark rows (one per backend) from {D, causal, N, mode, H, G, triton, sdpa_flash, sdpa} milliseconds."
    names = {"triton": "triton", "sdpa_flash": "sdpa-flash", "sdpa": "sdpa"}
    return [dict(backend=names[k], D=p["D"], causal=p["causal"], N=p["N"], mode=p["mode"], B=1, H=p.get("H", 16),
                 G=p.get("G", p.get("H", 16)), ms=math.nan if p[k] is None else p[k]) for p in pivot for k in ("triton", *peers)]


# -- the correctness cases: what they cover, and the order they run in --------------------------------------------

def test_gpu_correctness_cases_cover_the_issue():
    cases = gc.correctness_cases("cuda")
    assert {c[0] for c in cases} == {torch.bfloat16, torch.float16, torch.float32}
    assert {c[1] for c in cases} >= {64, 128} and {c[4] for c in cases} == {False, True}
    assert {c[2] for c in cases} >= {1, 17, 113, 1023} and any(c[2] != c[3] for c in cases)
    assert any(c[2] % 64 and c[2] > 64 for c in cases)                      # lengths that are no multiple of any tile


def test_gpu_correctness_cases_cover_gqa():
    for dev in ("cuda", "cpu"):
        cases = gc.correctness_cases(dev) + gc.correctness_cases(dev, quick=True)
        assert {c[5] for c in cases} == {1, 4}                                    # G = H and G = H/4
        assert all(len(c) == 6 for c in cases)
    assert sum(c[5] == 4 for c in gc.correctness_cases("cuda")) == len(gc.correctness_cases("cuda")) // 2


def test_correctness_runs_bfloat16_first_group_by_group_smallest_first():
    "On CUDA: the first case is bfloat16; each (dtype, D, causal) group is contiguous (its kernels compile once) and goes up in Lq·Lk."
    cases = gc.correctness_cases("cuda")
    assert cases[0][0] == torch.bfloat16 and cases[0][1] == 64
    assert all(c[0] == torch.bfloat16 for c in cases[:len(cases) // 4])        # the whole first quarter is bfloat16
    groups = [(c[0], c[1], c[4]) for c in cases]
    order = list(dict.fromkeys(groups))
    assert groups == sorted(groups, key=order.index)                           # contiguous: no group comes back
    for g in order:
        sizes = [c[2] * c[3] for c in cases if (c[0], c[1], c[4]) == g]
        assert sizes == sorted(sizes) and sizes[0] == 1 and sizes[-1] == 1023 * 1023
    assert len(order) == 11 and len(cases) == 11 * 6 * 2                       # 11 groups (44 kernels), 132 cases
    cpu = gc.correctness_cases("cpu")
    for g in dict.fromkeys((c[0], c[1], c[4]) for c in cpu):
        sizes = [c[2] * c[3] for c in cpu if (c[0], c[1], c[4]) == g]
        assert sizes == sorted(sizes)


@needs_triton
def test_check_correctness_stops_before_a_case_once_the_deadline_passed():
    lines = []
    rows = gc.check_correctness(DEV, [(torch.float32, 16, 5, 5, False, 1)] * 3, log=lines.append, deadline=time.time() - 1)
    assert rows == [] and lines == []
    rows = gc.check_correctness(DEV, [(torch.float32, 16, 5, 5, False, 1)], log=lines.append)
    assert len(rows) == 4 and all(r["ok"] for r in rows) and len(lines) == 1 and lines[0].endswith("ok")


# -- which backend "auto" prefers: against SDPA's own choice ----------------------------------------------------------

def test_triton_wins_needs_a_win_everywhere():
    rows = [dict(D=64, causal=True, N=n, mode=m, triton=1.0, sdpa_flash=1.5 if n == 4096 else 1.1)
            for n in (4096, 8192) for m in ("fwd", "fwd+bwd")]
    rows += [dict(D=128, causal=True, N=4096, mode="fwd", triton=1.0, sdpa_flash=2.0),
             dict(D=128, causal=True, N=8192, mode="fwd", triton=None, sdpa_flash=2.0)]       # not measured: no claim
    rows += [dict(D=64, causal=False, N=4096, mode="fwd", triton=1.0, sdpa_flash=0.99)]
    rows = timings(rows)
    assert gc.triton_wins(rows, against="sdpa-flash") == {(64, "bfloat16", True): 1.1}
    assert gc.triton_wins(rows, "float16", against="sdpa-flash") == {(64, "float16", True): 1.1}
    assert gc.triton_wins(rows) == {} and gc.triton_wins([]) == {}               # no "sdpa" rows: no claim against it
    grouped = timings([dict(D=64, causal=True, N=4096, mode="fwd", H=8, G=2, triton=1.0, sdpa_flash=2.0)])
    assert gc.triton_wins(grouped, against="sdpa-flash") == {}                     # grouped rows alone: no claim


def test_auto_preference_is_measured_against_sdpa_default_not_forced_flash():
    "Triton beats the forced FLASH kernel but not SDPA's own choice (say cuDNN): 'auto' must not take triton there."
    rows = timings([dict(D=128, causal=False, N=n, mode="fwd", triton=1.0, sdpa_flash=1.3, sdpa=0.8) for n in (4096, 8192)]
                   + [dict(D=64, causal=False, N=n, mode="fwd", triton=1.0, sdpa_flash=1.3, sdpa=1.2) for n in (4096, 8192)],
                   peers=("sdpa_flash", "sdpa"))
    assert gc.triton_wins(rows) == {(64, "bfloat16", False): 1.2}
    assert gc.triton_wins(rows, against="sdpa-flash") == {(64, "bfloat16", False): 1.3, (128, "bfloat16", False): 1.3}


def test_the_check_times_sdpa_left_to_choose_on_cuda():
    assert gc.check_backends("cuda") == (("triton", "sdpa", "sdpa-flash", "sdpa-cudnn"), "sdpa-flash")
    assert gc.check_backends("cpu") == (("triton", "sdpa"), "sdpa")
    assert {"sdpa", "sdpa-flash", "sdpa-cudnn"} <= set(bench.bench_backends("cpu"))   # names the sweep knows


def test_sdpa_default_kernel_names_sdpa_choice():
    from torch.nn.attention import SDPBackend
    q = torch.randn(1, 4, 32, 16)
    names = {"ERROR", "MATH", "FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION", "OVERRIDEABLE"}
    got = {gc.sdpa_default_kernel(q, q, q, c) for c in (False, True)} | {gc.sdpa_default_kernel(q, q[:, :1], q[:, :1])}
    assert got <= names and "ERROR" not in got, got
    assert gc.sdpa_default_kernel(q, q, q) == SDPBackend(torch._fused_sdp_choice(q, q, q)).name
    assert gc.sdpa_default_kernel("q", q, q).startswith("unknown (")          # torch's private function failed: said so


def test_goals_from_long_rows():
    pivot = [dict(D=128, causal=c, N=4096, mode=m, triton=t, sdpa_flash=f)
             for c, m, t, f in ((False, "fwd", 1.0, 1.2), (False, "fwd+bwd", 3.0, 3.6), (True, "fwd", 0.6, 0.7), (True, "fwd+bwd", 2.0, 2.1))]
    rows = timings(pivot)
    for r in rows: r["tflops"] = 100.0 / r["ms"]
    g = gc.goals(rows, matmul_tflops=500.0, memory=dict(ratio=1.02))
    assert g == ["forward / SDPA FLASH at N>=4k: min 1.17x, max 1.20x (goal >= 1.0x)",
                 "forward D=128 non-causal: 100-100 TFLOP/s = 20%-20% of the 500 TFLOP/s matmul (goal >= 40%)",
                 "causal / non-causal forward TFLOP/s at N>=4k: min 1.67 (goal >= 0.85)",
                 "backward speed / SDPA FLASH backward at N>=4k: min 1.00x (goal >= 0.7x)",
                 "forward peak memory at N=16k: 1.020x the bytes of Q, K, V, O and lse (goal <= 1.1x)"]


def test_benchmark_kernels_is_the_sweep_over_the_settings():
    "The check's benchmark is bench_attention at each (D, causal, mode): B = tokens / N, H = width / D, G = H / n_rep."
    lines = []
    rows = gc.benchmark_kernels("cpu", dtype=torch.float32, head_dims=(8,), lengths=(16, 32), causals=(False,), modes=("fwd",),
                                tokens=32, width=16, n_rep=2, deadline=time.time() - 1, log=lines.append)
    assert [(r["backend"], r["N"], r["B"], r["H"], r["G"]) for r in rows] == [
        (b, n, B, 2, 1) for n, B in ((16, 2), (32, 1)) for b in ("sdpa", "triton")]
    assert all(r["note"] == "skipped: time budget spent" for r in rows) and len(lines) == 4


# -- tuned tiles: saved per GPU name, read back by chapter 16 ----------------------------------------------------------

def test_save_tuning_merges_per_gpu_and_flash_triton_reads_it(tmp_path, fresh_tuning, monkeypatch):
    f, base = tmp_path / "gpu_tuning.json", tmp_path / "package.json"
    base.write_text(json.dumps({"Older GPU": {"tiles": [], "preferred": [dict(D=64, dtype="float16", causal=False, speedup=1.5)]}}))
    fwd = dict(BLOCK_M=64, BLOCK_N=32, num_warps=4, num_stages=2)
    bwd = dict(BLOCK_M1=64, BLOCK_N1=64, BLOCK_M2=64, BLOCK_N2=64, num_warps=4, num_stages=3)
    out = gc.save_tuning(f, "Fake GPU", {("fwd", 128, "bfloat16", True): fwd, ("bwd", 128, "bfloat16", True): bwd},
                         {(128, "bfloat16", True): 1.07}, info=dict(torch="2.11", triton="3.6.0"), base=base)
    assert set(out) == {"Older GPU", "Fake GPU"} and out["Fake GPU"]["torch"] == "2.11"
    assert json.loads(f.read_text()) == out and not list(tmp_path.glob("*.tmp*"))    # written whole, no temporary left
    monkeypatch.setattr(ft, "TUNING_FILE", f)
    assert ft.block_config("fwd", 128, torch.bfloat16, True, interpret=False, gpu="Fake GPU") == fwd
    assert ft.block_config("bwd", 128, torch.bfloat16, True, interpret=False, gpu="Fake GPU") == bwd
    default = ft.block_config("fwd", 128, torch.bfloat16, True, interpret=False)
    assert default == dict(BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=3)
    for other in (dict(gpu="Another GPU"), dict(gpu="Fake GPU", is_causal=False)):     # another GPU, another setting: defaults
        kw = dict(dict(is_causal=True), **other)
        assert ft.block_config("fwd", 128, torch.bfloat16, interpret=False, **kw) == default
    assert ft.block_config("fwd", 128, torch.bfloat16, True, interpret=True, gpu="Fake GPU")["BLOCK_M"] == 32  # the interpreter's own
    ft.TUNED_CONFIGS[("fwd", 128, torch.bfloat16, True)] = dict(fwd, num_warps=8)         # this process's tuning wins over the file
    assert ft.block_config("fwd", 128, torch.bfloat16, True, interpret=False, gpu="Fake GPU")["num_warps"] == 8
    assert ft.saved_tuning("Older GPU")["preferred"] == {(64, "float16", False): 1.5}
    gc.save_tuning(f, "Fake GPU", {}, {})                                                 # a new run replaces the GPU's entry
    assert ft.saved_tuning("Fake GPU") == dict(tiles={}, preferred={}) and "Older GPU" in json.loads(f.read_text())


def test_auto_prefers_triton_where_saved_for_this_gpu(tmp_path, fresh_tuning, monkeypatch):
    "triton_prefer reads the preferences saved for the tensor's GPU: a fake CUDA tensor and a fake device name stand in."
    f = tmp_path / "gpu_tuning.json"
    gc.save_tuning(f, "Fake GPU", {}, {(64, "bfloat16", True): 1.2})
    monkeypatch.setattr(ft, "TUNING_FILE", f)
    monkeypatch.setattr(ft, "interpreting", lambda: False)
    names = {0: "Fake GPU", 1: "Other GPU"}
    monkeypatch.setattr(ft, "_gpu_name", lambda device: names[device.index])
    def fake(index, h=8, d=64, dtype=torch.bfloat16):
        return SimpleNamespace(is_cuda=True, shape=(1, h, 256, d), dtype=dtype, device=torch.device("cuda", index))
    q, k = fake(0), fake(0)
    assert ft.triton_prefer(q, k, k, None, True, 0.0)
    assert not ft.triton_prefer(q, k, k, None, False, 0.0)                                 # causal only
    assert not ft.triton_prefer(fake(1), fake(1), fake(1), None, True, 0.0)                # another GPU
    assert not ft.triton_prefer(q, fake(0, h=2), fake(0, h=2), None, True, 0.0)           # grouped inputs: never
    assert not ft.triton_prefer(fake(0, dtype=torch.float16), fake(0, dtype=torch.float16), k, None, True, 0.0)


def test_saved_tuning_refuses_a_malformed_file(tmp_path, fresh_tuning):
    f = tmp_path / "bad.json"
    for text in ("[1, 2]", "{not json", json.dumps({"G": {"tiles": [dict(kind="fwd", D=64, dtype="bfloat16", causal=True,
                                                                            config=dict(BLOCK_M=64))]}})):
        f.write_text(text); ft._SAVED.clear()
        with pytest.raises(ValueError, match=r"bad.json is not a GPU-check tuning file .* for gpu='G': rewrite it with the GPU check"):
            ft.saved_tuning("G", f)
    assert ft.saved_tuning("G", tmp_path / "missing.json") == dict(tiles={}, preferred={})


# -- compiled for Hopper without a GPU (Triton's ahead-of-time path) -----------------------------------

@pytest.mark.skipif(ft.TRITON_ERROR is not None, reason="needs triton")
def test_kernels_compile_for_hopper():
    "The default tiles compile to sm_90a code with wgmma (16-bit), no spills and shared memory within the 227 KiB limit."
    cases = [("fwd", torch.bfloat16, 128, True, None), ("bwd_dkdv", torch.bfloat16, 128, True, None),
             ("bwd_dq", torch.float16, 64, False, None), ("fwd", torch.float32, 40, False, None)]
    rows = gc.compile_report(cases)
    assert [(r["kernel"], r["dtype"], r["D"], r["causal"]) for r in rows] == [
        ("fwd", "bf16", 128, True), ("bwd_dkdv", "bf16", 128, True), ("bwd_dq", "fp16", 64, False), ("fwd", "fp32", 40, False)]
    for r in rows:
        assert r["target"] == "sm_90a" and r["spill_bytes"] == 0 and 0 < r["registers"] <= 255, r
        assert 0 < r["shared_bytes"] <= gc.SM90_MAX_SHARED, r
    assert all(r["wgmma"] > 0 for r in rows[:3]) and rows[3]["wgmma"] == 0      # float32 uses ieee FMA, no tensor cores
    assert (rows[0]["BLOCK_M"], rows[0]["BLOCK_N"], rows[0]["num_warps"]) == (128, 64, 8)  # block_config's GPU choice
    table = gc.compile_table(rows).splitlines()
    assert len(table) == 6 and table[2].startswith("| fwd | bf16 | 128 | True | 128×64 | 8 | 3 | yes |")


@pytest.mark.skipif(ft.TRITON_ERROR is not None, reason="needs triton")
def test_kernels_compile_for_ampere():
    "Compute capability 8.0 is supported too: sm_80 code with mma.sync (no wgmma), within 163 KiB of shared memory."
    (r,) = gc.compile_report([("bwd_dq", torch.bfloat16, 128, True, None)], arch=80)
    assert r["target"] == "sm_80" and r["wgmma"] == 0 and r["mma_sync"] > 0 and r["spill_bytes"] == 0, r
    assert r["shared_bytes"] <= 163 * 1024


def test_compile_kernel_refuses_interpreted_kernels(monkeypatch):
    monkeypatch.setattr(ft, "interpreting", lambda: True)
    with pytest.raises(RuntimeError, match=r"^the kernels are interpreted here: compile in a process started with TRITON_INTERPRET=0$"):
        gc.compile_kernel("fwd", torch.float16, 64)


# -- the phases: deadlines, interruption, the report on disk as the check goes -------------------------------------

FAST = dict(compile=0, timing=0)          # no compile in a child process, no timing: every row "skipped: time budget spent"


@needs_triton
@dry_only
def test_a_phase_stops_at_its_deadline_and_the_run_goes_on(tmp_path, fresh_tuning):
    "Correctness gets 1 s and its first case takes longer: one case runs, the phase says so, the later phases still run."
    seen = {}
    def log(line):
        if line.startswith("  ") and line.endswith("ok") and "first case" not in seen:
            seen["first case"] = True; time.sleep(1.2)                   # the first case ends past the deadline
        if line.startswith("== compile ("):                              # the next phase starts: what is on disk now?
            seen["on disk"] = json.loads((tmp_path / "flash_triton.json").read_text())
            seen["md on disk"] = (tmp_path / "flash_triton.md").read_text()
    rep = gc.run_check(dry_run=True, tune_tiles=False, out_dir=tmp_path, log=log, phase_s=dict(FAST, correctness=1.0))
    assert rep["phases"]["correctness"]["status"] == "cut at its deadline: 1 of 8 cases run"
    assert rep["correctness_cases"] == dict(run=1, planned=8) and len(rep["correctness"]) == 4 and rep["correctness_ok"]
    assert rep["phases"]["environment"]["status"] == "done" and rep["phases"]["tuning"]["status"] == "skipped: not asked (--no-tune)"
    assert rep["phases"]["compile"]["status"] == "cut at its deadline: 0 of 1 kernels compiled"
    assert rep["phases"]["timing"]["status"] == "cut at its deadline: 16 rows not timed" and not rep["complete"]
    disk = seen["on disk"]                                               # written before the next phase began
    assert disk["versions"]["interpreter"] and disk["phases"]["correctness"]["status"].startswith("cut at its deadline")
    assert len(disk["correctness"]) == 4 and "1 of 8 cases run" in seen["md on disk"]
    md = (tmp_path / "flash_triton.md").read_text()                     # the final report: the partial table last
    assert md.rstrip().splitlines()[-1].endswith("(N=64): skipped: time budget spent") and TABLE_HEAD in md
    assert md.index("| correctness | cut at its deadline: 1 of 8 cases run |") < md.index(TABLE_HEAD)
    assert json.loads((tmp_path / "flash_triton.json").read_text())["phases"] == rep["phases"]


@needs_triton
@dry_only
def test_a_phase_past_its_grace_is_interrupted_and_its_results_kept(tmp_path, fresh_tuning, monkeypatch):
    "A case that hangs: the alarm interrupts the phase GRACE_S after its deadline; the cases done are kept; the run ends cleanly."
    monkeypatch.setattr(gc, "GRACE_S", 3.0)
    monkeypatch.setattr(gc, "_iter_bench", lambda *a, **kw: iter(()))     # no timing rows: only the alarm's phase is under test
    import signal
    handler = signal.getsignal(signal.SIGALRM)
    q = torch.randn(1, 4, 17, 32)
    first, calls = ft.compare_with_reference(q, q[:, :1], q[:, :1]), []   # computed before: the first case returns at once
    def hangs_on_the_second(*a, **kw):
        calls.append(1)
        if len(calls) == 2: time.sleep(60)
        return first
    monkeypatch.setattr(ft, "compare_with_reference", hangs_on_the_second)
    lines, t = [], time.time()
    rep = gc.run_check(dry_run=True, tune_tiles=False, out_dir=tmp_path, log=lines.append, phase_s=dict(FAST, correctness=2.0, timing=30))
    assert time.time() - t < 45                                             # not the 60 s sleep
    assert rep["phases"]["correctness"]["status"] == "interrupted 3 s after its deadline"
    assert len(rep["correctness"]) == 4 and rep["correctness_cases"]["run"] == 1 and rep["ok"]
    assert rep["phases"]["timing"]["status"] == "done" and len(rep["sdpa_default"]) == 8   # the next phases ran
    assert "== correctness: interrupted 3 s after its deadline" in "\n".join(lines)
    assert lines[-1].endswith(TABLE_HEAD + "\n|---|---:|---:|---|---:|---:|---:|---|\n")      # the (empty) table last
    assert json.loads((tmp_path / "flash_triton.json").read_text())["correctness_cases"]["run"] == 1
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0) and signal.getsignal(signal.SIGALRM) is handler


@needs_triton
@dry_only
def test_a_failing_step_is_recorded_and_the_check_goes_on(monkeypatch, tmp_path, fresh_tuning):
    "A step that raises is logged and recorded; the later steps run, the JSON is written, the table is last, ok is False."
    monkeypatch.setattr(gc, "correctness_cases", lambda device, quick=False: [(torch.float32, 16, 17, 17, True, 4)])
    def broken(*a, **k): raise RuntimeError("boom")
    monkeypatch.setattr(gc, "_iter_bench", broken)
    lines = []
    rep = gc.run_check(dry_run=True, tune_tiles=False, out_dir=tmp_path, log=lines.append, phase_s=dict(compile=0))
    assert rep["errors"] == {"benchmark": "RuntimeError: boom", "benchmark GQA": "RuntimeError: boom"} and not rep["ok"]
    assert rep["correctness_ok"] and len(rep["correctness"]) == 4 and rep["bench"] == [] and rep["phases"]["timing"]["status"] == "done"
    assert any(l.startswith("benchmark FAILED, continuing:") and "RuntimeError: boom" in l for l in lines)
    text = lines[-1]
    assert "errors:\n- benchmark: RuntimeError: boom\n- benchmark GQA: RuntimeError: boom" in text
    assert text.endswith(TABLE_HEAD + "\n|---|---:|---:|---|---:|---:|---:|---|\n")
    assert json.loads((tmp_path / "flash_triton.json").read_text())["errors"] == rep["errors"]
    assert (tmp_path / "flash_triton.md").read_text() == text


@needs_triton
@dry_only
def test_a_tuned_tile_that_fails_its_recheck_is_neither_used_nor_saved(monkeypatch, tmp_path, fresh_tuning):
    real = ft.compare_with_reference
    def tuned_tiles_fail(*a, config=None, **kw):
        rows = real(*a, config=config, **kw)
        return rows if config is None else [dict(r, ok=False) for r in rows]
    monkeypatch.setattr(ft, "compare_with_reference", tuned_tiles_fail)
    rep = gc.run_check(dry_run=True, out_dir=tmp_path, log=lambda line: None, budget_s=1500, phase_s=dict(FAST, correctness=600, tuning=600))
    assert [t["rechecked"] for t in rep["tuned"]] == [False, False] and ft.TUNED_CONFIGS == {}
    assert not rep["ok"] and not rep["correctness_ok"] and rep["phases"]["tuning"]["status"] == "done"
    saved = json.loads((tmp_path / "gpu_tuning.json").read_text())
    assert [e["tiles"] for e in saved.values()] == [[]]
    assert "| fwd | 32 | float32 | False | BLOCK_M=" in (tmp_path / "flash_triton.md").read_text()


def test_report_text_of_an_empty_report_ends_with_an_empty_table():
    text = gc.report_text(dict(versions={}, phases={"environment": dict(status="running", seconds=0.0, deadline_s=20.0)}))
    assert "| environment | running | 0 | 20.0 |" in text and "- none measured yet" in text
    assert text.endswith(TABLE_HEAD + "\n|---|---:|---:|---|---:|---:|---:|---|\n")


# -- the script, in dry-run mode ----------------------------------------------------------------------------------------

@needs_triton
@dry_only
def test_gpu_check_script_dry_run(tmp_path, fresh_tuning, monkeypatch):
    "scripts/gpu_check.sh --dry-run into $OUT: every phase done, the files there, the table last; the tiles saved are the ones read back."
    out = tmp_path / "out"
    env = {**os.environ, "PYTHON": sys.executable, "MPLBACKEND": "Agg", "OUT": str(out), "CHECK_TIMEOUT": "1500"}  # a busy CPU
    slow_cpu = ["--budget", "1500", "--phase", "correctness=300", "--phase", "compile=300", "--phase", "tuning=300"]   # a loaded CPU
    r = subprocess.run(["bash", "scripts/gpu_check.sh", "--dry-run", *slow_cpu], capture_output=True, text=True, env=env, cwd=ROOT,
                       timeout=1500)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert sorted(p.name for p in out.iterdir()) == ["flash_triton.json", "flash_triton.md", "gpu_check.log", "gpu_tuning.json"]
    assert (out / "gpu_check.log").read_text() == r.stdout
    assert "triton backend on cpu: available" in r.stdout and "correctness: 32/32 checks within bounds, 8 of 8 cases run" in r.stdout
    assert " G=4  causal=True  ok" in r.stdout and " G=1  causal=True  ok" in r.stdout          # G = H and G = H/4
    lines = r.stdout.strip().splitlines()
    assert lines[-18] == ("| causal | mode | H | backend | N | median ms | ms min–max | peak extra MiB | TFLOP/s | time / SDPA | "
                          "time / SDPA, min–max over rounds |")
    assert [l.split(" | ")[2:4] for l in lines[-16:]] == [["1", "sdpa"], ["1", "triton"]] * 4 + [["4", "sdpa"], ["4", "triton"]] * 4
    assert "backward counted as 2.5x the forward (the triton backward runs 7 matmuls, not 5: 1.4x the counted work)" in r.stdout
    rep = json.loads((out / "flash_triton.json").read_text())
    assert rep["ok"] and rep["complete"] and rep["versions"]["interpreter"] and len(rep["bench"]) == 16 and rep["triton_preferred"] == {}
    assert all(p["status"] == "done" for p in rep["phases"].values()) and list(rep["phases"]) == list(gc.PHASES)
    assert all(row["tflops"] > 0 and row["note"] == "" for row in rep["bench"]) and {r["G"] for r in rep["bench"]} == {1}
    assert len(rep["compile"]) == 1 and rep["compile"][0]["target"] == "sm_90a"
    assert {s["kernel"] for s in rep["sdpa_default"]} <= {"FLASH_ATTENTION", "MATH"} and len(rep["sdpa_default"]) == 8
    assert (out / "flash_triton.md").read_text().strip().splitlines()[-17:] == lines[-17:]
    # the tuned tiles, re-checked, saved under the run's device name; chapter 16 reads them back for that name
    gpu = rep["versions"]["device"] + " (Triton interpreter)"
    saved = json.loads((out / "gpu_tuning.json").read_text())
    assert set(saved) == set(json.loads(ft.TUNING_FILE.read_text())) | {gpu}
    tuned = {(t["kind"], t["D"], t["dtype"], t["causal"]): t["config"] for t in rep["tuned"] if t["rechecked"]}
    assert len(tuned) == 2 and all(cfg in gc.FWD_CANDIDATES + gc.BWD_CANDIDATES for cfg in tuned.values())
    monkeypatch.setattr(ft, "TUNING_FILE", out / "gpu_tuning.json")
    for (kind, d, dt, c), cfg in tuned.items():
        assert ft.block_config(kind, d, getattr(torch, dt), c, interpret=False, gpu=gpu) == cfg
    shown = subprocess.run([sys.executable, "-m", "transformer_lit.gpu_check", "show", str(out / "flash_triton.json")],
                           capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.strip().splitlines()[-18:] == lines[-18:] and shown.stdout.startswith("**GPU check of the Triton FlashAttention kernels**")
    import matplotlib; matplotlib.use("Agg")
    fig = bench.plot_bench(rep["bench"], "dry run", keys=("tflops",))
    assert [a.get_title() for a in fig.axes] == ["D=32, fwd", "D=32, fwd, G=H/4", "D=32, fwd+bwd", "D=32, fwd+bwd, G=H/4"]


def test_main_rejects_bad_command_lines(capsys):
    for argv in (["bench"], ["show"], ["check", "report.json"], ["check", "--phase", "warmup=3"], ["check", "--phase", "timing=soon"]):
        with pytest.raises(SystemExit): gc.main(argv)
    err = capsys.readouterr().err
    assert "show needs the path of a JSON report" in err and "check takes no path (got 'report.json')" in err
    assert "--phase 'warmup=3': the phases are environment, correctness, compile, tuning, timing" in err
    assert "--phase 'timing=soon' must be NAME=SECONDS with a number of seconds" in err


def test_gpu_check_script_parses_has_help_and_caps_its_time_limit(tmp_path):
    assert subprocess.run(["bash", "-n", "scripts/gpu_check.sh"], cwd=ROOT).returncode == 0
    env = {**os.environ, "PYTHON": sys.executable, "OUT": str(tmp_path)}
    r = subprocess.run(["bash", "scripts/gpu_check.sh", "--help"], capture_output=True, text=True, cwd=ROOT, timeout=120, env=env)
    assert r.returncode == 0 and "usage: python -m transformer_lit.gpu_check" in r.stdout and "--dry-run" in r.stdout
    assert "--phase NAME=SECONDS" in r.stdout and "(time limit 450 s)" in r.stdout
    r = subprocess.run(["bash", "scripts/gpu_check.sh", "--help"], capture_output=True, text=True, cwd=ROOT, timeout=60,
                       env={**env, "CHECK_TIMEOUT": "600"})
    assert r.returncode == 2 and "CHECK_TIMEOUT=600 must be at most 500 seconds" in r.stderr
    assert sum(v for v in gc.PHASE_S.values() if v) < 330 <= 450 - 2 * gc.GRACE_S - 60   # the phases fit the budget, the budget the limit


@needs_triton
@dry_only
def test_an_interrupted_tuning_leaves_no_unchecked_tiles_in_use(monkeypatch, tmp_path, fresh_tuning):
    "tune stores each winner as it goes; the alarm stops the phase before the re-check: none of them may stay in TUNED_CONFIGS."
    monkeypatch.setattr(gc, "GRACE_S", 1.0)
    real = ft.compare_with_reference
    def recheck_hangs(*a, config=None, **kw):
        if config is not None: time.sleep(60)
        return real(*a, config=config, **kw)
    monkeypatch.setattr(ft, "compare_with_reference", recheck_hangs)
    ft.TUNED_CONFIGS[("fwd", 8, torch.float16, False)] = dict(BLOCK_M=16, BLOCK_N=16, num_warps=4, num_stages=1)   # set before: kept
    rep = gc.run_check(dry_run=True, out_dir=tmp_path, log=lambda line: None, budget_s=1500,
                       phase_s=dict(FAST, correctness=0, tuning=40))     # tune gets 28 s; its re-check hangs past 40 s
    assert rep["phases"]["tuning"]["status"] == "interrupted 1 s after its deadline" and len(rep["tuned"]) == 2
    assert [t["rechecked"] for t in rep["tuned"]] == [None, None]
    assert list(ft.TUNED_CONFIGS) == [("fwd", 8, torch.float16, False)]
