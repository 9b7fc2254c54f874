"""The command line of chapter 13 (`python -m transformer_lit.at_scale`): every bad argument is a one-line usage error with
exit status 2, found before any work or output; a long run without the bar still prints progress; the summary holds the
wall time; the samples show what the model learned."""
import ast, json, os, subprocess, sys
from pathlib import Path

import pytest
import torch

import transformer_lit.at_scale as tas
from transformer_lit.at_scale import main

ROOT = Path(__file__).resolve().parent.parent
SMALL = ["--steps", "2", "--batch-size", "8", "--n-train", "64", "--d-model", "16", "--heads", "2", "--layers", "1",
         "--warmup", "2", "--eval-every", "2", "--no-progress"]
CUDA = "--device cuda needs a CUDA build of torch; this one" if torch.version.cuda is None else None

BAD = [  # (arguments, the exact error line after "python -m transformer_lit.at_scale: error: ")
    (["sort"], "argument task: invalid choice: 'sort' (choose from 'reverse', 'copy', 'translate', 'charlm')"),
    (["reverse", "--steps", "-5"], "argument --steps: -5 is not a positive integer"),
    (["reverse", "--steps", "ten"], "argument --steps: 'ten' is not a positive integer"),
    (["reverse", "--batch-size", "0"], "argument --batch-size: 0 is not a positive integer"),
    (["reverse", "--warmup", "0"], "argument --warmup: 0 is not a positive integer"),
    (["reverse", "--lr-factor", "0"], "argument --lr-factor: 0 is not a finite number > 0"),
    (["reverse", "--lr-factor", "nan"], "argument --lr-factor: nan is not a finite number > 0"),
    (["reverse", "--label-smoothing", "1"], "argument --label-smoothing: 1 is not a number in [0, 1)"),
    (["reverse", "--clip", "-1"], "argument --clip: -1 is not a finite number > 0"),
    (["reverse", "--eval-every", "0"], "argument --eval-every: 0 is not a positive integer"),
    (["reverse", "--seed", "-1"], "argument --seed: -1 is not an integer >= 0"),
    (["reverse", "--precision", "fp8"], "argument --precision: invalid choice: 'fp8' (choose from 'fp32', 'bf16', 'fp16')"),
    (["reverse", "--grad-accum", "0"], "argument --grad-accum: 0 is not a positive integer"),
    (["reverse", "--batch-size", "6", "--grad-accum", "4"],
     "batch_size=6 must be divisible by grad_accum=4: a step is grad_accum micro-batches of equal size"),
    (["reverse", "--parallel", "fsdp"],
     "--parallel fsdp needs several processes: start with torchrun --nproc-per-node N -m transformer_lit.at_scale ..."),
    (["reverse", "--parallel", "zero"], "argument --parallel: invalid choice: 'zero' (choose from 'none', 'ddp', 'fsdp')"),
    (["reverse", "--device", "gpu"], "--device gpu is not a torch device (cpu, cuda, cuda:0, mps ...)"),
    (["reverse", "--d-model", "0"], "argument --d-model: 0 is not a positive integer"),
    (["reverse", "--d-model", "30", "--heads", "4"], "--d-model 30 must be a multiple of --heads 4 (each head gets d_model / heads dimensions)"),
    (["reverse", "--heads", "0"], "argument --heads: 0 is not a positive integer"),
    (["reverse", "--layers", "0"], "argument --layers: 0 is not a positive integer"),
    (["reverse", "--dropout", "1.5"], "argument --dropout: 1.5 is not a number in [0, 1)"),
    (["reverse", "--n-train", "0"], "argument --n-train: 0 is not a positive integer"),
    (["reverse", "--n-train", "10"], "--batch-size 64 is larger than --n-train 10: a batch draws distinct training examples"),
    (["charlm", "--block-size", "0"], "argument --block-size: 0 is not a positive integer"),
    (["reverse", "--resume"], "--resume needs --checkpoint PATH (the checkpoint to continue from)"),
    (["reverse", "--checkpoint", "{tmp}"], "--checkpoint {tmp} is a directory; it must name a file"),
    (["reverse", "--dump", "{tmp}/file"], "--dump {tmp}/file is a file; it must name a directory"),
]
if torch.version.cuda is None:
    BAD.append((["reverse", "--device", "cuda"], f"--device cuda needs a CUDA build of torch; this one ({torch.__version__}) runs on the CPU only"))
    BAD.append((["reverse", "--precision", "fp16"], "precision='fp16' needs a CUDA device, got device='cpu': float16 needs a GradScaler "
                                                    "and is slow on the CPU; use precision='bf16' (or 'fp32') there"))


@pytest.fixture
def no_work(monkeypatch):
    "Any data building or training fails the test: the argument errors come first."
    def forbidden(*a, **k): raise AssertionError("work started before the arguments were checked")
    monkeypatch.setattr(tas, "make_task", forbidden); monkeypatch.setattr(tas, "train", forbidden)


@pytest.mark.parametrize("args,message", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_argument_is_a_usage_error(args, message, tmp_path, capsys, no_work):
    (tmp_path / "file").write_text("x")
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    with pytest.raises(SystemExit) as e: main(args)
    out, err = capsys.readouterr()
    assert e.value.code == 2 and out == ""                               # nothing on stdout, no note before the error
    lines = err.strip().splitlines()
    assert lines[-1] == "python -m transformer_lit.at_scale: error: " + message.replace("{tmp}", str(tmp_path))
    assert lines[0].startswith("usage: ") and "Traceback" not in err and "note:" not in err


def test_block_size_longer_than_the_text(capsys):
    "The one check that needs the data: a window longer than the whole text (still before any training or output)."
    with pytest.raises(SystemExit) as e: main(["charlm", "--block-size", "100000000"])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert e.value.code == 2 and err.startswith("python -m transformer_lit.at_scale: error: --block-size 100000000: ids has ")


def test_device_cuda_from_the_shell():
    "The real command: exit status 2 and one error line, no traceback (the device rule on a CPU build, the width rule anywhere)."
    args = ["reverse", "--device", "cuda"] if torch.version.cuda is None else ["reverse", "--d-model", "30", "--heads", "4"]
    r = subprocess.run([sys.executable, "-m", "transformer_lit.at_scale", *args], cwd=ROOT, capture_output=True, text=True,
                       timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)})
    assert r.returncode == 2 and r.stdout == "" and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines()[-1].startswith("python -m transformer_lit.at_scale: error: --")


def test_warmup_note_comes_after_the_checks(capsys):
    main(["reverse", *SMALL, "--warmup", "5"])
    err = capsys.readouterr().err
    assert "note: --steps 2 ends inside the 5-step warm-up" in err


def test_no_progress_prints_progress_lines(capsys, monkeypatch):
    "Without the bar, a line now and then on stderr (every step here: the interval set to 0 s)."
    monkeypatch.setattr(tas, "PROGRESS_SECONDS", 0.0)
    main(["reverse", *SMALL[:-1], "--steps", "3", "--warmup", "3", "--no-progress"])
    lines = [l for l in capsys.readouterr().err.splitlines() if l.startswith("step ")]
    assert [l.split(",")[0] for l in lines] == ["step 1/3", "step 2/3", "step 3/3"], lines
    assert all(l.endswith(" s left") for l in lines)


def test_summary_has_wall_time_and_marked_samples(capsys):
    summary = main(["reverse", *SMALL])
    out = capsys.readouterr().out.strip().splitlines()
    assert json.loads(out[-1]) == summary
    assert 0 < summary["train_seconds"] <= summary["seconds"]
    samples = summary["samples"]
    assert out[:len(samples)] == samples and len(samples) == 6
    assert all(s[:2] in ("✓ ", "✗ ") and " -> " in s and (s[0] == "✓") == ("(expected " not in s) for s in samples)
    right = sum(s[0] == "✓" for s in samples)
    assert out[-2] == (f"{right} of these 6 right; exact match on all 1,000 validation examples: "
                       f"{100 * summary['val_exact_match']:.1f} %")


def test_charlm_prompt_is_a_line_of_text():
    summary = main(["charlm", "--steps", "2", "--batch-size", "8", "--warmup", "2", "--d-model", "16", "--heads", "2", "--layers", "1",
                    "--block-size", "32", "--no-progress", "--eval-every", "2"])
    (line,) = summary["samples"]
    prompt, text = (ast.literal_eval(s) for s in line.removeprefix("prompt ").split(" -> ", 1))
    assert len(prompt) == 16 and len(text) == 32 - 16                # sampled up to max_len = block size
    assert not prompt[0].isspace() and "\n" not in prompt and prompt.count(" ") <= 4
