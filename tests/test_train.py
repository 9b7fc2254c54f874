"""Chapters 12 and 13: data, the schedule, the loss, the plain loop, checkpoints and resuming, a short run that learns;
autocast, accumulation, checkpointing, the GradScaler's state, DDP and FSDP on 2 CPU processes, the command line."""
import math, os, shutil, socket, subprocess, sys
from pathlib import Path
import pytest
from hypothesis import given, strategies as st
import torch
import torch.nn.functional as F
from transformer_lit.train import (BOS, EOS, PAD, LMData, Seq2SeqData, TrainConfig, Vocab, batch_indices, batch_loss,
    char_lm_data, exact_match, load_checkpoint, make_model, make_task, model_logits, noam_lr, number_to_words,
    reverse_pairs, save_checkpoint, split_numbers, stdlib_corpus, train, translate_pairs, cross_attention_weights,
    autocast, match_flags, model_blocks, numbers_by_digits, parallel_mode, set_checkpointing, step_seed, train_plain)
from transformer_lit.at_scale import launch, main, peak_live_bytes, sample_predictions, step_memory, train_job

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny ops: one thread (tests/conftest.py)

# ---- the schedule
def test_noam_peak_matches_paper_formula():
    lrs = [noam_lr(s, 512, 4000) for s in range(1, 12_001)]
    peak_step = max(range(len(lrs)), key=lrs.__getitem__) + 1
    assert peak_step == 4000
    assert lrs[3999] == pytest.approx((512 * 4000) ** -0.5, rel=1e-12)
    assert round(lrs[3999], 5) == 7.0e-4                          # the schedule peaks near 7.0e-4 at warm-up 4000, d_model 512
    assert noam_lr(100, 512, 4000) == pytest.approx(512 ** -0.5 * 100 * 4000 ** -1.5, rel=1e-12)   # linear warm-up
    assert noam_lr(9000, 512, 4000, factor=2.0) == pytest.approx(2 * 512 ** -0.5 * 9000 ** -0.5, rel=1e-12)

def test_noam_rejects_step_zero():
    with pytest.raises(ValueError, match=r"^step=0 must be a positive int$"): noam_lr(0, 512, 4000)

# ---- data
@pytest.mark.parametrize("n,words", [(0, "zero"), (13, "thirteen"), (40, "forty"), (99, "ninety-nine"), (100, "one hundred"),
    (1010, "one thousand ten"), (20_017, "twenty thousand seventeen"), (342_007, "three hundred forty-two thousand seven"),
    (999_999, "nine hundred ninety-nine thousand nine hundred ninety-nine")])
def test_number_to_words(n, words): assert number_to_words(n) == words

def test_number_words_are_unique():
    seen = {number_to_words(n) for n in range(0, 1_000_000, 37)}
    assert len(seen) == len(range(0, 1_000_000, 37))

def test_split_numbers_disjoint_and_validated():
    tr, te = split_numbers(500, 100, max_number=999, seed=3)
    assert len(set(tr)) == 500 and len(set(te)) == 100 and not set(tr) & set(te)
    with pytest.raises(ValueError, match=r"n_train \+ n_test = 1100 must be <= max_number \+ 1 = 1000"): split_numbers(1000, 100, 999)

def test_vocab_roundtrip_and_unknown():
    v = Vocab(list("xyz"))
    assert (v.stoi["<pad>"], v.stoi["<bos>"], v.stoi["<eos>"]) == (PAD, BOS, EOS)
    assert v.decode([BOS] + v.encode("zyx") + [EOS, 3]) == "zyx"
    with pytest.raises(ValueError, match=r"token 'q' is not in the vocabulary"): v.encode("xq")
    with pytest.raises(ValueError, match=r"tokens is empty"): Vocab([], specials=False)

def test_reverse_and_copy_pairs():
    for s, t in reverse_pairs(50, 1, 9, seed=1): assert t == s[::-1] and 1 <= len(s) <= 9
    for s, t in reverse_pairs(20, copy=True): assert s == t
    with pytest.raises(ValueError, match=r"max_len=2 must be an int >= 3"): reverse_pairs(5, min_len=3, max_len=2)

def test_seq2seq_batch_layout():
    d = Seq2SeqData(translate_pairs([5, 12_345]))
    b = d.batch([0, 1])
    assert b["src"].shape == (2, 6) and b["tgt_in"].shape == (2, 6) and b["targets"].shape == (2, 6)
    assert b["src_keep"].tolist() == [[True] + [False] * 5, [True] * 6]       # "five" | "twelve thousand three hundred forty five"
    assert (b["tgt_in"][:, 0] == BOS).all()
    assert b["targets"][0].tolist() == [d.vocab.stoi["5"], EOS, -100, -100, -100, -100]
    assert torch.equal(b["targets"][1, :-1], b["tgt_in"][1, 1:])                       # shifted by one

def test_char_corpus_from_stdlib():
    text = stdlib_corpus(("textwrap", "bisect"))
    assert "def dedent" in text and "def insort_left" in text
    tr, va = char_lm_data(text, block_size=32, val_fraction=0.25)
    assert tr.ids.numel() + va.ids.numel() == len(text)
    assert tr.vocab.decode(torch.cat([tr.ids, va.ids])) == text
    b = tr.batch(torch.tensor([0, 100]))
    assert torch.equal(b["idx"][:, 1:], b["targets"][:, :-1])

@given(n=st.integers(1, 300), world=st.sampled_from([1, 2, 4]), per_rank=st.integers(1, 8), step=st.integers(1, 10**6))
def test_batch_shards_partition_the_global_batch(n, world, per_rank, step):
    bs = world * per_rank
    if bs > n: return
    shards = [batch_indices(n, bs, step, 3, r, world) for r in range(world)]
    whole = torch.cat(shards)
    assert torch.equal(whole, batch_indices(n, bs, step, 3))            # the ranks' slices are the global batch
    assert whole.unique().numel() == bs and 0 <= whole.min() and whole.max() < n

@given(nums=st.lists(st.integers(0, 999_999), min_size=1, max_size=6))
def test_translate_batches_are_consistent(nums):
    d = Seq2SeqData(translate_pairs(nums), make_task("translate", n_train=1, n_val=1)[0].vocab)
    b = d.batch(range(len(nums)))
    for i, n in enumerate(nums):
        L = len(str(n))
        assert d.vocab.decode(b["targets"][i][:L + 1]) == str(n)          # digits then <eos>
        assert torch.equal(b["tgt_in"][i, 1:L + 1], b["targets"][i, :L])  # teacher forcing: shifted by one
        assert int(b["src_keep"][i].sum()) == len(number_to_words(n).replace("-", " ").split())

# ---- bad input
def test_empty_corpus():
    with pytest.raises(ValueError, match=r"text is empty: a corpus needs at least one character"): char_lm_data("")

def test_corpus_shorter_than_block():
    with pytest.raises(ValueError, match=r"ids has 4 tokens; it needs at least block_size \+ 1 = 9"):
        LMData(torch.arange(4), 8, Vocab("abcd", specials=False))

def test_empty_pairs():
    with pytest.raises(ValueError, match=r"pairs is empty"): Seq2SeqData([])

def test_batch_larger_than_data():
    data = Seq2SeqData(reverse_pairs(10))
    model = make_model(data, 16, 2, 1)
    with pytest.raises(ValueError, match=r"batch_size=32 must be <= the number of examples \(10\)"):
        train(model, data, TrainConfig(steps=1, batch_size=32, progress=False))

def test_unknown_task():
    with pytest.raises(ValueError, match=r"task='sort' must be one of \('reverse', 'copy', 'translate', 'charlm'\)"): make_task("sort")
    with pytest.raises(SystemExit): main(["sort", "--steps", "1"])              # argparse: a usage error (exit 2)

CONFIG_ERRORS = [  # every TrainConfig field: the call, the exception, the words of the message
    (dict(steps=0), ValueError, r"^steps=0 must be a positive int$"),
    (dict(batch_size=2.0), TypeError, r"^batch_size=2.0 must be a positive int$"),
    (dict(warmup=-1), ValueError, r"^warmup=-1 must be a positive int$"),
    (dict(lr_factor=0), ValueError, r"^lr_factor=0 must be a finite number > 0$"),
    (dict(lr_factor="1"), TypeError, r"^lr_factor='1' must be a finite number > 0$"),
    (dict(lr_factor=math.inf), ValueError, r"^lr_factor=inf must be a finite number > 0$"),
    (dict(betas=0.9), TypeError, r"^betas=0.9 must be a pair \(β1, β2\) of numbers in \[0, 1\)$"),
    (dict(betas=(0.9, 1.0)), ValueError, r"^betas\[1\]=1.0 must be a number in \[0, 1\)$"),
    (dict(eps=0.0), ValueError, r"^eps=0.0 must be a finite number > 0$"),
    (dict(weight_decay=-0.1), ValueError, r"^weight_decay=-0.1 must be a finite number >= 0$"),
    (dict(label_smoothing=1.0), ValueError, r"^label_smoothing=1.0 must be a number in \[0, 1\)$"),
    (dict(clip=0), ValueError, r"^clip=0 must be a finite number > 0, or None$"),
    (dict(clip="1"), TypeError, r"^clip='1' must be a finite number > 0, or None$"),
    (dict(clip=math.nan), ValueError, r"^clip=nan must be a finite number > 0, or None$"),
    (dict(eval_every=0), ValueError, r"^eval_every=0 must be a positive int$"),
    (dict(eval_items=True), TypeError, r"^eval_items=True must be a positive int$"),
    (dict(seed=-1), ValueError, r"^seed=-1 must be an int >= 0$"),
    (dict(device=3), TypeError, r"^device=3 must be a str such as 'cpu' or 'cuda:0'$"),
    (dict(device="gpu"), ValueError, r"^device='gpu' must name a torch device such as 'cpu' or 'cuda:0'$"),
    (dict(progress=1), TypeError, r"^progress=1 must be a bool \(True or False\)$"),
    (dict(precision="fp8"), ValueError, r"^precision='fp8' must be one of \('fp32', 'bf16', 'fp16'\)$"),
    (dict(precision="fp16"), ValueError, r"^precision='fp16' needs a CUDA device, got device='cpu': .+use precision='bf16'"),
    (dict(grad_accum=0), ValueError, r"^grad_accum=0 must be a positive int$"),
    (dict(batch_size=6, grad_accum=4), ValueError, r"^batch_size=6 must be divisible by grad_accum=4: a step is grad_accum micro-batches"),
    (dict(checkpointing="yes"), TypeError, r"^checkpointing='yes' must be a bool \(True or False\)$"),
    (dict(parallel="zero"), ValueError, r"^parallel='zero' must be None or one of \('none', 'ddp', 'fsdp'\)$"),
]

@pytest.mark.parametrize("kw,err,msg", CONFIG_ERRORS)
def test_train_config_validation(kw, err, msg):
    with pytest.raises(err, match=msg): TrainConfig(**kw)

def test_every_config_field_is_validated():
    "A new TrainConfig field without a row in CONFIG_ERRORS fails here."
    import dataclasses
    checked = {k for kw, _, _ in CONFIG_ERRORS for k in kw}
    assert {f.name for f in dataclasses.fields(TrainConfig)} <= checked

def test_parallel_needs_a_process_group():
    data = Seq2SeqData(reverse_pairs(16))
    for par in ("ddp", "fsdp"):
        with pytest.raises(ValueError, match=rf"^parallel='{par}' needs an initialised process group: start the script with torchrun"):
            train(make_model(data, 16, 2, 1), data, TrainConfig(steps=1, batch_size=4, progress=False, parallel=par))
    assert parallel_mode(None) == "none" and parallel_mode("none") == "none"

def test_batch_indices_ddp_divisibility():
    with pytest.raises(ValueError, match=r"batch_size=5 must be divisible by world_size=2"): batch_indices(10, 5, 1, 0, 0, 2)

# ---- loss
def test_loss_ignores_padding_and_matches_per_example():
    torch.manual_seed(0)
    data = Seq2SeqData(reverse_pairs(6, 1, 7, seed=2))
    model = make_model(data, 16, 2, 1).eval()
    total, n = batch_loss(model, data.batch(range(6)), label_smoothing=0.1)
    parts = [batch_loss(model, data.batch([i]), label_smoothing=0.1) for i in range(6)]
    assert n == sum(len(t) + 1 for t in data.tgt)                          # targets plus <eos>, no padding
    torch.testing.assert_close(total, sum(p[0] for p in parts), atol=1e-4, rtol=1e-5)

def test_label_smoothing_formula():
    torch.manual_seed(0)
    data = LMData(torch.randint(0, 7, (50,)), 8, Vocab("abcdefg", specials=False))
    model = make_model(data, 16, 2, 1).double()
    b = data.batch(torch.tensor([0, 3]))
    total, n = batch_loss(model, b, label_smoothing=0.2)
    logp = model_logits(model, b).log_softmax(-1)                            # (B, T, V)
    q = torch.full_like(logp, 0.2 / 7).scatter_add_(-1, b["targets"][..., None], torch.full_like(logp[..., :1], 0.8))
    torch.testing.assert_close(total, -(q * logp).sum(), atol=1e-10, rtol=1e-10)

# ---- the plain loop of chapter 12 and the shipped train
@pytest.mark.parametrize("kind", ["seq2seq", "lm"])
def test_plain_loop_and_train_give_the_same_weights(kind):
    "With every switch off, train is train_plain: equal losses and bit-identical weights (dropout and clipping on)."
    data = Seq2SeqData(reverse_pairs(64, 1, 8, seed=3)) if kind == "seq2seq" else LMData(torch.arange(200) % 7, 8, Vocab("abcdefg", specials=False))
    cfg = TrainConfig(steps=6, batch_size=8, warmup=3, clip=0.5, progress=False)
    a, b = (make_model(data, 16, 2, 2, dropout=0.1, seed=0) for _ in range(2))
    losses, hist = train_plain(a, data, cfg), train(b, data, cfg)
    # one process, fp32, one micro-batch: the same batches, dropout seeds and ops (s·1/n is s/n), so the same bits
    assert losses == hist["loss"] and len(losses) == 6
    for (k, x), y in zip(a.state_dict().items(), b.state_dict().values()): assert torch.equal(x, y), k
    c = make_model(data, 16, 2, 2, dropout=0.1, seed=0)
    assert train_plain(c, data, TrainConfig(**{**cfg.__dict__, "seed": 1}))[0] != losses[0]   # the check can fail: another seed

def test_plain_loop_argument_checks():
    data = Seq2SeqData(reverse_pairs(8, seed=1))
    with pytest.raises(TypeError, match=r"^cfg must be a TrainConfig, got dict"): train_plain(make_model(data, 16, 2, 1), data, {})
    with pytest.raises(TypeError, match=r"^data must be a Seq2SeqData or an LMData, got list"): train_plain(make_model(data, 16, 2, 1), [1], TrainConfig())

# ---- checkpoints, resume
def _scaler_after_an_overflow():
    "A CPU GradScaler stepped once with an inf gradient (scale halved) and once without; its model and optimizer."
    lin = torch.nn.Linear(3, 1); opt = torch.optim.SGD(lin.parameters(), lr=0.1, momentum=0.9)   # a state to save
    scaler = torch.amp.GradScaler("cpu")
    for overflow in (True, False):
        opt.zero_grad(); scaler.scale(lin(torch.ones(2, 3)).sum() * (math.inf if overflow else 1.0)).backward()
        scaler.step(opt); scaler.update()
    return lin, opt, scaler

def test_grad_scaler_state_round_trip(tmp_path):
    "The float16 loss scale is saved and restored (on the CPU: the scaler object; an fp16 run itself needs CUDA)."
    lin, opt, scaler = _scaler_after_an_overflow()
    assert scaler.get_scale() == 2.0 ** 15                                  # not a fresh scaler's 65536
    save_checkpoint(tmp_path / "s.pt", lin, opt, scaler=scaler)
    fresh = torch.amp.GradScaler("cpu")
    state = load_checkpoint(tmp_path / "s.pt", lin, opt, scaler=fresh)
    assert fresh.state_dict() == scaler.state_dict() == state["scaler"]
    assert fresh.get_scale() == 2.0 ** 15 and fresh.state_dict()["_growth_tracker"] == 1
    save_checkpoint(tmp_path / "no_scaler.pt", lin, opt)
    with pytest.raises(ValueError, match=r"no_scaler.pt' has no 'scaler' entry \(it was saved without one\): pass scaler=None"):
        load_checkpoint(tmp_path / "no_scaler.pt", lin, opt, scaler=torch.amp.GradScaler("cpu"))
    with pytest.raises(TypeError, match=r"^scaler must be a torch.amp.GradScaler or None, got dict"):
        save_checkpoint(tmp_path / "bad.pt", lin, opt, scaler=scaler.state_dict())
    with pytest.raises(TypeError, match=r"^scaler must be a torch.amp.GradScaler or None, got float"):
        load_checkpoint(tmp_path / "s.pt", lin, opt, scaler=65536.0)

def test_train_passes_its_scaler_to_the_checkpoint(monkeypatch, tmp_path):
    "train hands the scaler it made to save_checkpoint and load_checkpoint (fp16 itself is CUDA only: the scaler is faked here)."
    import transformer_lit.train as tl
    seen = []
    real_save, real_load = tl.save_checkpoint, tl.load_checkpoint
    monkeypatch.setattr(tl, "save_checkpoint", lambda *a, **k: seen.append(("save", a[6] if len(a) > 6 else k.get("scaler"))) or real_save(*a, **k))
    monkeypatch.setattr(tl, "load_checkpoint", lambda *a, **k: seen.append(("load", a[5] if len(a) > 5 else k.get("scaler"))) or real_load(*a, **k))
    data = Seq2SeqData(reverse_pairs(32, seed=1))
    cfg = TrainConfig(steps=2, batch_size=8, warmup=2, eval_every=2, progress=False)
    train(make_model(data, 16, 2, 1), data, cfg, checkpoint=tmp_path / "c.pt")
    train(make_model(data, 16, 2, 1), data, TrainConfig(**{**cfg.__dict__, "steps": 3}), checkpoint=tmp_path / "c.pt", resume=True)
    assert [k for k, _ in seen] == ["save", "load", "save"] and all(v is None for _, v in seen)   # fp32: no scaler, passed as None

def test_checkpoint_roundtrip_identical_outputs(tmp_path):
    data = Seq2SeqData(reverse_pairs(64))
    a = make_model(data, 16, 2, 1, seed=0)
    train(a, data, TrainConfig(steps=3, batch_size=8, warmup=2, progress=False))
    save_checkpoint(tmp_path / "a.pt", a)
    b = make_model(data, 16, 2, 1, seed=1)
    state = load_checkpoint(tmp_path / "a.pt", b)
    assert state["config"]["d_model"] == 16
    batch = data.batch(range(16))
    assert torch.equal(model_logits(a.eval(), batch), model_logits(b.eval(), batch))
    torch.load(tmp_path / "a.pt", weights_only=True)                                 # loads without unpickling code

def test_resume_continues_the_same_curve(tmp_path):
    data = Seq2SeqData(reverse_pairs(200))
    cfg = TrainConfig(steps=12, batch_size=8, warmup=4, eval_every=6, eval_items=16, progress=False)
    straight = train(make_model(data, 16, 2, 1, seed=0, dropout=0.1), data, cfg, val=data)
    half = TrainConfig(steps=6, batch_size=8, warmup=4, eval_every=6, eval_items=16, progress=False)
    train(make_model(data, 16, 2, 1, seed=0, dropout=0.1), data, half, val=data, checkpoint=tmp_path / "c.pt")
    resumed = train(make_model(data, 16, 2, 1, seed=7, dropout=0.1), data, cfg, val=data, checkpoint=tmp_path / "c.pt", resume=True)
    assert resumed["loss"] == straight["loss"] and resumed["val_loss"] == straight["val_loss"]   # exact, dropout included
    assert resumed["step"] == list(range(1, 13))

# ---- a short run that learns
def test_copy_task_learns():
    "Demo 1's short version: a seeded copy run clears a stated level (measured: val loss 0.23, exact match 87%)."
    tr, va = make_task("copy", seed=0, n_train=3000, n_val=100)
    model = make_model(tr, 32, 2, 1, seed=0)
    hist = train(model, tr, TrainConfig(steps=300, batch_size=32, warmup=40, lr_factor=0.5, eval_every=300, progress=False), va)
    assert hist["val_loss"][-1] < 0.25 * math.log(len(tr.vocab))          # from ln V = 2.56 at the start
    assert exact_match(model, va) >= 0.6

def test_cross_attention_rows_are_distributions():
    data = Seq2SeqData(translate_pairs([7, 342_007]))
    model = make_model(data, 16, 2, 2)
    w = cross_attention_weights(model, data.batch([0, 1]))
    assert w.shape == (2, 2, 7, 6)                                       # (B, H, T, S)
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 2, 7))          # rows sum to 1
    assert (w[0, :, :, 1:] == 0).all()                                   # "seven" is one token: padding gets nothing

# ---- DDP: 2 processes under torchrun with gloo
def _free_port():
    with socket.socket() as s: s.bind(("127.0.0.1", 0)); return s.getsockname()[1]

@pytest.mark.parametrize("parallel", ["ddp", "fsdp"])
def test_torchrun_two_processes_match_one(tmp_path, parallel):
    args = ["reverse", "--steps", "3", "--batch-size", "16", "--n-train", "100", "--d-model", "16", "--heads", "2",
            "--layers", "1", "--warmup", "2", "--eval-every", "100", "--no-progress"]
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc_per_node", "2",
                "--master_addr", "127.0.0.1", "--master_port", str(_free_port())]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    r = subprocess.run(torchrun + ["-m", "transformer_lit.at_scale", *args, "--parallel", parallel, "--dump", str(tmp_path / "ddp")],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=80)
    assert r.returncode == 0, r.stderr[-3000:]
    assert f'"parallel": "{parallel}"' in r.stdout
    main(args + ["--dump", str(tmp_path / "one")])                     # one process, the same global batch
    r0, r1 = (torch.load(tmp_path / "ddp" / f"rank{i}.pt", weights_only=True) for i in (0, 1))
    one = torch.load(tmp_path / "one" / "rank0.pt", weights_only=True)
    # the all-reduce hands every rank the same averaged gradient, so both ranks take the same steps
    for k in r0["model"]: assert torch.equal(r0["model"][k], r1["model"][k]), k           # the ranks hold identical parameters
    assert r0["loss"] == r1["loss"] and len(r0["loss"]) == 3
    assert r0["loss"] == pytest.approx(one["loss"], rel=1e-5, abs=1e-6)                  # the loss of one process, every step
    for k in one["grad"]: torch.testing.assert_close(r0["grad"][k], one["grad"][k], atol=1e-5, rtol=1e-3)   # same gradient
    # Parameters: Adam divides by sqrt(v) + 1e-9, so where a gradient is ~0, rounding noise (the all-reduce sums in another
    # order) becomes a step of up to ±lr. Bound the difference by the learning rates actually used.
    bound = 2 * sum(noam_lr(s, 16, 2) for s in range(1, 4))
    for k in one["model"]: assert (r0["model"][k] - one["model"][k]).abs().max() <= bound, k

# ---- gradient accumulation, activation checkpointing, autocast
def _run(data, cfg_kw, dtype=torch.float64, dropout=0.0, n_layers=1, steps=3):
    "Train a small model for `steps` steps; return its history and the last step's gradients."
    model = make_model(data, 16, 2, n_layers, dropout=dropout, seed=0).to(dtype)
    hist = train(model, data, TrainConfig(**{"steps": steps, "batch_size": 16, "warmup": 2, "progress": False, **cfg_kw}))
    return hist, {k: p.grad.clone() for k, p in model.named_parameters()}

@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-12), (torch.float32, 1e-6)])
@pytest.mark.parametrize("k", [2, 4, 16])
def test_grad_accum_equals_one_batch_seq2seq(dtype, tol, k):
    "Micro-batches padded to their own lengths, token counts unequal: the token-weighted loss and gradients still equal one batch's."
    data = Seq2SeqData(reverse_pairs(64, 1, 12, seed=4))
    one, _ = _run(data, {}, dtype)
    acc, _ = _run(data, {"grad_accum": k}, dtype)
    assert acc["loss"] == pytest.approx(one["loss"], rel=tol, abs=0)              # 3 steps
    (_, g1), (_, gk) = _run(data, {}, dtype, steps=1), _run(data, {"grad_accum": k}, dtype, steps=1)
    for name in g1: torch.testing.assert_close(gk[name], g1[name], rtol=tol, atol=tol * g1[name].abs().max().item()), name

def test_grad_accum_equals_one_batch_lm():
    tr, _ = char_lm_data(stdlib_corpus(("textwrap",)), block_size=16)
    one, _ = _run(tr, {}, torch.float64, n_layers=2)
    acc, _ = _run(tr, {"grad_accum": 4}, torch.float64, n_layers=2)
    assert acc["loss"] == pytest.approx(one["loss"], rel=1e-12, abs=0)
    (_, g1), (_, g4) = _run(tr, {}, torch.float64, n_layers=2, steps=1), _run(tr, {"grad_accum": 4}, torch.float64, n_layers=2, steps=1)
    for name in g1: torch.testing.assert_close(g4[name], g1[name], rtol=1e-12, atol=1e-12 * g1[name].abs().max().item())

def test_checkpointing_same_losses_and_gradients_with_dropout():
    "torch.utils.checkpoint replays the RNG: the recomputed forward draws the same dropout masks."
    data = Seq2SeqData(reverse_pairs(64, 1, 12, seed=4))
    plain, g0 = _run(data, {}, torch.float64, dropout=0.2, n_layers=2)
    ckpt, g1 = _run(data, {"checkpointing": True}, torch.float64, dropout=0.2, n_layers=2)
    assert ckpt["loss"] == pytest.approx(plain["loss"], rel=1e-12, abs=0)
    for name in g0: torch.testing.assert_close(g1[name], g0[name], rtol=1e-12, atol=1e-14)

def test_set_checkpointing_wraps_blocks_and_undoes():
    data = Seq2SeqData(reverse_pairs(8))
    model = make_model(data, 16, 2, 2)
    assert len(model_blocks(model)) == 4                                  # 2 encoder + 2 decoder blocks
    set_checkpointing(model)
    assert all("forward" in b.__dict__ for b in model_blocks(model))
    set_checkpointing(model); set_checkpointing(model, False)             # idempotent, then undone
    assert not any("forward" in b.__dict__ for b in model_blocks(model))
    with pytest.raises(TypeError, match=r"^enabled='no' must be a bool"): set_checkpointing(model, "no")

def test_bf16_autocast_runs_in_bfloat16_and_tracks_fp32():
    data = Seq2SeqData(reverse_pairs(256, seed=1))
    model = make_model(data, 32, 2, 1)
    with autocast(TrainConfig(precision="bf16")): logits = model_logits(model, data.batch(range(4)))
    assert logits.dtype == torch.bfloat16
    cfg = dict(steps=30, batch_size=16, warmup=10, progress=False)
    fp32 = train(make_model(data, 32, 2, 1), data, TrainConfig(**cfg))
    bf16 = train(make_model(data, 32, 2, 1), data, TrainConfig(precision="bf16", **cfg))
    assert all(math.isfinite(v) for v in bf16["loss"])
    assert max(abs(a - b) for a, b in zip(bf16["loss"][:10], fp32["loss"][:10])) < 0.01   # 8 mantissa bits: ~0.4% per rounding
    last10 = lambda h: sum(h["loss"][-10:]) / 10                          # one batch's loss is noisy; the runs part after ~10 steps
    assert abs(last10(bf16) - last10(fp32)) < 0.1

def test_step_seed_differs_by_rank_and_micro_batch():
    seeds = {step_seed(0, s, r, m) for s in range(1, 4) for r in range(4) for m in range(3)}
    assert len(seeds) == 36 and all(0 <= x < 2 ** 63 for x in seeds)
    assert step_seed(1, 2, 3, 0) == step_seed(1, 2, 3, 0)                # a function of its arguments only

# ---- evaluation helpers
def test_numbers_by_digits_and_three_splits():
    tr, va, te = make_task("translate", n_train=500, n_val=50, n_test=40)
    assert (len(tr), len(va), len(te)) == (500, 50, 40)
    nums = lambda d: {int("".join(d.vocab.itos[i] for i in t)) for t in d.tgt}
    assert not nums(tr) & nums(va) and not nums(tr) & nums(te) and not nums(va) & nums(te)
    strat = numbers_by_digits(5, exclude=nums(tr) | nums(va), seed=1)
    assert [sum(len(str(n)) == d for n in strat) for d in range(1, 7)] == [5] * 6
    assert not set(strat) & (nums(tr) | nums(va))
    with pytest.raises(ValueError, match=r"^n_test=3 must be 0 for task='charlm'"): make_task("charlm", n_test=3)

def test_match_flags_agree_with_exact_match():
    tr, va = make_task("copy", n_train=64, n_val=16)
    model = make_model(tr, 16, 2, 1)
    flags = match_flags(model, va)
    assert len(flags) == 16 and exact_match(model, va) == sum(flags) / 16

# ---- checkpoints: bad files and another configuration
def _saved(tmp_path):
    data = Seq2SeqData(reverse_pairs(32))
    model = make_model(data, 16, 2, 1)
    save_checkpoint(tmp_path / "ok.pt", model)
    return data, model

def test_load_checkpoint_bad_files(tmp_path):
    data, model = _saved(tmp_path)
    good = (tmp_path / "ok.pt").read_bytes()
    (tmp_path / "empty.pt").write_bytes(b"")
    (tmp_path / "random.pt").write_bytes(os.urandom(256))
    (tmp_path / "cut.pt").write_bytes(good[:len(good) // 2])
    torch.save(model.state_dict(), tmp_path / "bare.pt")
    torch.save({"step": 3}, tmp_path / "other.pt")
    with pytest.raises(FileNotFoundError, match=r"checkpoint '.*missing.pt' does not exist"): load_checkpoint(tmp_path / "missing.pt", model)
    with pytest.raises(ValueError, match=r"checkpoint '.*empty.pt' is empty \(0 bytes\)"): load_checkpoint(tmp_path / "empty.pt", model)
    for name in ("random.pt", "cut.pt"):
        with pytest.raises(ValueError, match=rf"checkpoint '.*{name}' cannot be read by torch.load\(weights_only=True\) \(truncated, corrupted"):
            load_checkpoint(tmp_path / name, model)
    with pytest.raises(ValueError, match=r"checkpoint '.*bare.pt' has no 'model' entry: it is a bare state_dict; load it with model.load_state_dict"):
        load_checkpoint(tmp_path / "bare.pt", model)
    with pytest.raises(ValueError, match=r"checkpoint '.*other.pt' has no 'model' entry: it was not written by save_checkpoint"):
        load_checkpoint(tmp_path / "other.pt", model)
    opt = torch.optim.AdamW(model.parameters())
    with pytest.raises(ValueError, match=r"checkpoint '.*ok.pt' has no 'optimizer' entry \(it was saved without one\): pass optimizer=None"):
        load_checkpoint(tmp_path / "ok.pt", model, opt)

def test_load_checkpoint_checks_the_stored_config(tmp_path):
    data, model = _saved(tmp_path)
    wider = make_model(data, 32, 2, 1)
    with pytest.raises(ValueError, match=r"checkpoint '.*ok.pt' was saved from another model configuration: d_model=16 in the file, 32 in the model; d_ff=64 in the file, 128"):
        load_checkpoint(tmp_path / "ok.pt", wider)

# ---- the command line, in a subprocess
def _cli(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "transformer_lit.at_scale", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)})

def test_cli_help_shows_every_default():
    r = _cli("--help")
    assert r.returncode == 0
    for flag, default in (("--steps", "1000"), ("--batch-size", "64"), ("--warmup", "400"), ("--precision", "fp32"),
                          ("--grad-accum", "1"), ("--parallel", "None"), ("--device", "cpu"), ("--d-model", "64"), ("--dump", "None")):
        assert flag in r.stdout and f"(default: {default})" in r.stdout, flag
    import argparse as ap
    from transformer_lit.at_scale import _parser
    for action in _parser()._actions:
        assert action.help, action.dest                                    # every flag says what it does

def test_cli_usage_errors():
    r = _cli("sort")
    assert r.returncode == 2 and "invalid choice: 'sort' (choose from 'reverse', 'copy', 'translate', 'charlm')" in r.stderr
    r = _cli("reverse", "--parallel", "fsdp")
    assert r.returncode == 2 and "--parallel fsdp needs several processes: start with torchrun" in r.stderr
    r = _cli("reverse", "--precision", "fp16")
    assert r.returncode == 2 and "error: precision='fp16' needs a CUDA device" in r.stderr and "Traceback" not in r.stderr
    r = _cli("reverse", "--batch-size", "6", "--grad-accum", "4")
    assert r.returncode == 2 and "error: batch_size=6 must be divisible by grad_accum=4" in r.stderr

@pytest.mark.parametrize("module", ["transformer_lit.at_scale"])
def test_cli_shows_predictions_then_the_summary(module):
    "The command (chapter 13's module) runs; a few decoded validation examples come before the JSON summary line."
    r = subprocess.run([sys.executable, "-m", module, "reverse", "--steps", "3", "--batch-size", "8", "--n-train", "64", "--d-model", "16",
                        "--heads", "2", "--layers", "1", "--warmup", "2", "--no-progress", "--eval-every", "3"], cwd=ROOT,
                       capture_output=True, text=True, timeout=120, env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr[-2000:]
    lines = r.stdout.strip().splitlines()
    summary = __import__("json").loads(lines[-1])
    assert lines[-8:-2] == summary["samples"] and all(" -> " in l for l in summary["samples"])   # then the exact-match line
    assert all((l.startswith("✓ ") and "(expected " not in l) or (l.startswith("✗ ") and "(expected " in l) for l in summary["samples"])

def test_cli_charlm_generates_text():
    summary = main(["charlm", "--steps", "2", "--batch-size", "8", "--warmup", "2", "--d-model", "16", "--heads", "2", "--layers", "1",
                    "--block-size", "32", "--no-progress", "--eval-every", "2"])
    (line,) = summary["samples"]
    prompt, text = line.split(" -> ", 1)
    assert prompt.startswith("prompt ") and len(__import__("ast").literal_eval(text)) == 32 - 16   # sampled up to max_len = block size

def test_sample_predictions_marks_right_and_wrong():
    data = Seq2SeqData(reverse_pairs(4, 2, 3, seed=2))
    model = make_model(data, 16, 2, 1)
    lines = sample_predictions(model, data, n=4)
    assert len(lines) == 4
    for line, (src, tgt) in zip(lines, zip(data.src, data.tgt)):
        assert line[2:].startswith(data.vocab.decode(src) + " -> ")
        assert line.startswith("✓ ") == line.endswith(f" -> {data.vocab.decode(tgt)}")       # ✓ exactly when the target came out
        assert line.startswith("✓ ") != line.endswith(f"  (expected {data.vocab.decode(tgt)})")
    with pytest.raises(TypeError, match=r"^data must be a Seq2SeqData or an LMData, got list"): sample_predictions(model, [1])

# ---- activation checkpointing memory, in live tensors
def test_peak_live_bytes_counts_tensors():
    def make(): x = torch.empty(1 << 20, dtype=torch.uint8); y = torch.empty(1 << 19, dtype=torch.uint8); del x, y
    assert 1.5 * 2 ** 20 <= peak_live_bytes(make) < 1.6 * 2 ** 20          # both alive at once: 1.5 MiB
    assert peak_live_bytes(lambda: None) == 0

def test_checkpointing_memory_grows_linearly_but_slowly():
    kw = dict(d_model=64, n_heads=2, block_size=128, batch_size=8)
    m = {(L, ck): step_memory(L, ck, **kw) for L in (2, 4) for ck in (False, True)}
    for L in (2, 4): assert m[L, True]["peak_live"] < m[L, False]["peak_live"] and m[L, True]["loss"] == m[L, False]["loss"]
    grow = {ck: m[4, ck]["peak_live"] - m[2, ck]["peak_live"] for ck in (False, True)}
    assert 0 < grow[True] < 0.3 * grow[False]                               # grows with depth, far more slowly

def test_cli_warmup_hint_and_summary_note():
    r = _cli("reverse", "--steps", "3", "--batch-size", "8", "--n-train", "64", "--d-model", "16", "--heads", "2", "--layers", "1",
             "--no-progress", "--eval-every", "3")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "note: --steps 3 ends inside the 400-step warm-up" in r.stderr
    summary = __import__("json").loads(r.stdout.strip().splitlines()[-1])
    assert "final_loss: the last step's training loss, label-smoothed (ε=0.1)" in summary["note"]
    assert "val_loss: validation cross-entropy without smoothing" in summary["note"]

# ---- FSDP2 and DDP in spawned processes (launch: torch.multiprocessing, gloo, 2 CPU processes)
# float64: the comparisons test the reduction, not the float32 rounding that training can amplify from step to step
# (float32 is compared over the first steps only in test_float32_first_steps_equal_one)
SPEC = dict(task="reverse", n_train=256, d_model=16, n_heads=2, n_layers=2, model_dtype="float64",
            cfg=dict(steps=20, batch_size=16, warmup=5))

def _with(spec=SPEC, **cfg): return {**spec, "cfg": {**spec["cfg"], **cfg}}

def _same_losses(a, b):
    "Equal to 1e-6 relative at every step: a few float32 roundings, the all-reduce adds in another order."
    assert len(a) == len(b) and max(abs(x - y) / abs(y) for x, y in zip(a, b)) <= 1e-6

def _same_outputs(params_a, params_b):
    "Final parameters give close logits: the key biases drift (their gradient is 0 up to rounding, Adam scales that up), the rest follows."
    data = make_task("reverse", 0, 256, n_val=8)[0]
    ma, mb = make_model(data, 16, 2, 2), make_model(data, 16, 2, 2)
    ma.load_state_dict(params_a); mb.load_state_dict(params_b)
    b = data.batch(range(32))
    real = b["targets"] != -100                                        # the positions the loss counts
    with torch.no_grad(): torch.testing.assert_close(model_logits(ma.eval(), b)[real], model_logits(mb.eval(), b)[real], atol=1e-3, rtol=1e-3)

@pytest.fixture(scope="module")
def one_process():
    return train_job(SPEC)

def test_fsdp_two_processes_equal_one(one_process):
    ranks = launch(train_job, 2, _with(parallel="fsdp"))
    full = one_process["bytes"]["parameters"]
    for r in ranks:
        assert r["world_size"] == 2 and r["blocks_sharded"]
        _same_losses(r["loss"], one_process["loss"])
        assert 0.45 <= r["bytes"]["parameters"] / full <= 0.55             # each rank holds about half the parameters
        assert r["bytes"]["optimizer"] == 2 * r["bytes"]["parameters"]     # Adam's two moments, of the shard only
    assert sum(r["bytes"]["parameters"] for r in ranks) >= full
    _same_outputs(ranks[0]["params"], one_process["params"])

def test_ddp_two_processes_equal_one_with_accumulation_and_resume(one_process, tmp_path):
    half = launch(train_job, 2, _with(parallel="ddp", grad_accum=2, steps=10), tmp_path / "ddp.pt")
    _same_losses(half[0]["loss"], one_process["loss"][:10])
    ranks = launch(train_job, 2, _with(parallel="ddp", grad_accum=2), tmp_path / "ddp.pt", True)   # steps 11-20 from the file
    for r in ranks:
        assert not r["blocks_sharded"] and r["bytes"]["parameters"] == one_process["bytes"]["parameters"]   # DDP: a full replica
        _same_losses(r["loss"], one_process["loss"])
    _same_outputs(ranks[0]["params"], one_process["params"])

def test_fsdp_checkpoint_resumes_anywhere(tmp_path, one_process):
    ck = tmp_path / "fsdp.pt"
    half = launch(train_job, 2, _with(parallel="fsdp", steps=10), ck)
    state = torch.load(ck, weights_only=True)
    assert state["step"] == 10 and set(state["model"]) == set(one_process["params"])   # gathered whole on rank 0
    _same_losses(half[0]["loss"], one_process["loss"][:10])
    for ws, par in ((2, "fsdp"), (1, "fsdp")):                         # resume under FSDP: the same and another world size
        resumed = launch(train_job, ws, _with(parallel=par), tmp_path / "fsdp.pt", True)
        _same_losses(resumed[0]["loss"], one_process["loss"])
        _same_outputs(resumed[0]["params"], one_process["params"])
    single = train_job(SPEC, tmp_path / "fsdp.pt", True)                # and in one plain process
    _same_losses(single["loss"], one_process["loss"])
    _same_outputs(single["params"], one_process["params"])

@pytest.mark.parametrize("par", ["ddp", "fsdp"])
def test_float32_first_steps_equal_one(par):
    f32 = {**SPEC, "model_dtype": "float32", "cfg": {**SPEC["cfg"], "steps": 10}}
    one = train_job(f32)
    ranks = launch(train_job, 2, {**f32, "cfg": {**f32["cfg"], "parallel": par}})
    for r in ranks: _same_losses(r["loss"], one["loss"])

def test_each_rank_draws_its_own_dropout_masks():
    import train_workers
    r0, r1 = launch(train_workers.dropout_masks, 2, 2)
    assert len(r0["masks"]) == len(r1["masks"]) == 2
    for a, b in zip(r0["masks"], r1["masks"]):
        assert a.shape == b.shape and not torch.equal(a, b)                 # different masks on the two ranks
        assert 0.4 < a.float().mean() < 0.6                                 # p = 0.5 dropout
    assert not torch.equal(r0["masks"][0], r0["masks"][1])                  # and at each step

def test_fsdp_with_checkpointing_and_accumulation_equals_one(one_process):
    ranks = launch(train_job, 2, _with(parallel="fsdp", checkpointing=True, grad_accum=2))
    for r in ranks: assert r["blocks_sharded"]; _same_losses(r["loss"], one_process["loss"])

def test_launch_reports_a_failing_rank_with_its_error():
    import train_workers
    with pytest.raises(RuntimeError, match=r"launch: rank 0 failed:(.|\n)*ValueError: batch_size=4 must be divisible by world_size x grad_accum = 2 x 4"):
        launch(train_workers.accum_too_fine, 2)
    with pytest.raises(TypeError, match=r"^world_size=0.5 must be a positive int$"): launch(train_workers.accum_too_fine, 0.5)


# -- argument checks that the table of tests/bad_input_cases.py does not hold ---------------------------------------------
def test_decode_reads_nothing_after_eos_and_checks_the_ids_it_reads():
    v = Vocab(list("ab"))                                                     # ids 3, 4 after the specials
    assert v.decode(torch.tensor([3, 4, EOS, -100, -100])) == "ab"          # a targets row: nothing after <eos> is read
    assert v.decode([]) == "" and v.decode(torch.tensor([BOS, 4, PAD])) == "b"
    with pytest.raises(ValueError, match=r"^ids holds ids from 3 to 7; every id must be in \[0, vocab_size=5\)"): v.decode([3, 7, EOS])
    with pytest.raises(TypeError, match=r"^ids=\[3, 1.5\] must hold ints"): v.decode([3, 1.5])
    with pytest.raises(TypeError, match=r"^ids.dtype=torch.float32 must be torch.int64 or torch.int32"): v.decode(torch.tensor([3.0]))
    with pytest.raises(ValueError, match=r"^ids.dim\(\)=2 must be 1"): v.decode(torch.tensor([[3]]))
    with pytest.raises(TypeError, match=r"^ids must be a sequence of ints or a 1-D tensor of ids, got int"): v.decode(3)

def test_batch_indices_are_checked_the_same_way_in_both_data_sets():
    s2s = Seq2SeqData(reverse_pairs(4, seed=1))
    lm = LMData(torch.arange(12) % 3, 4, Vocab("abc", specials=False))
    for d in (s2s, lm):
        with pytest.raises(ValueError, match=rf"^idx holds indices from -1 to -1; every index must be in \[0, len\(data\)={len(d)}\)"):
            d.batch([-1])                                                     # not a silent wrap-around to the last example
        with pytest.raises(TypeError, match=r"^idx\[0\]=0.5 must be an int index"): d.batch([0.5])
        with pytest.raises(TypeError, match=r"^idx.dtype=torch.float32 must be torch.int64 or torch.int32"): d.batch(torch.tensor([0.0]))
        with pytest.raises(ValueError, match=r"^idx.dim\(\)=2 must be 1"): d.batch(torch.zeros(1, 1, dtype=torch.long))
        a, b = d.batch(range(2)), d.batch(torch.tensor([0, 1], dtype=torch.int32))
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)

def test_model_and_data_must_be_of_the_same_kind():
    s2s = Seq2SeqData(reverse_pairs(8, seed=1))
    lm = LMData(torch.arange(40) % 3, 4, Vocab("abc", specials=False))
    t, g = make_model(s2s, 16, 2, 1), make_model(lm, 16, 2, 1)
    cfg = TrainConfig(steps=1, batch_size=2, warmup=1, progress=False)
    with pytest.raises(ValueError, match=r"^batch holds lm data but model is a Transformer"): model_logits(t, lm.batch([0]))
    with pytest.raises(ValueError, match=r"^batch holds seq2seq data but model is a DecoderOnlyLM"): batch_loss(g, s2s.batch([0]))
    with pytest.raises(ValueError, match=r"^data holds seq2seq data but model is a DecoderOnlyLM"): train(g, s2s, cfg)
    with pytest.raises(ValueError, match=r"^val holds lm data but model is a Transformer"): train(t, s2s, cfg, val=lm)
    with pytest.raises(TypeError, match=r"^model must be a Transformer or a DecoderOnlyLM, got Linear"): train(torch.nn.Linear(2, 2), s2s, cfg)

def test_int32_targets_give_the_int64_loss():
    lm = LMData(torch.arange(40) % 3, 4, Vocab("abc", specials=False))
    model = make_model(lm, 16, 2, 1)
    b = lm.batch([0, 5])
    s64, n64 = batch_loss(model, b, 0.1)
    s32, n32 = batch_loss(model, b | {"targets": b["targets"].int()}, 0.1)
    assert torch.equal(s32, s64) and int(n32) == int(n64) == 8

def test_more_argument_checks(tmp_path):
    data = Seq2SeqData(reverse_pairs(8, seed=1))
    model = make_model(data, 16, 2, 1)
    with pytest.raises(TypeError, match=r"^modules must be an iterable of module names \(str\), got str"): stdlib_corpus("textwrap")
    with pytest.raises(TypeError, match=r"^modules holds 3; every entry must be a module name"): stdlib_corpus([3])
    with pytest.raises(TypeError, match=r"^exclude must be an iterable of ints, got str"): numbers_by_digits(1, "12")
    with pytest.raises(TypeError, match=r"^numbers must be an iterable of ints in \[0, 999999\], got str"): translate_pairs("12")
    with pytest.raises(TypeError, match=r"^tokens must be an iterable of tokens"): Vocab(None)
    with pytest.raises(TypeError, match=r"^pairs holds \('a', 'b', 'c'\); every entry must be a \(source tokens, target tokens\) pair"):
        Seq2SeqData([("a", "b", "c")])
    with pytest.raises(TypeError, match=r"^pairs must be an iterable of \(source tokens, target tokens\) pairs, got int"): Seq2SeqData(3)
    with pytest.raises(ValueError, match=r"^rank=-1 must be an int >= 0"): batch_indices(4, 2, 0, 0, -1, 2)
    with pytest.raises(ValueError, match=r"^world_size=0 must be a positive int"): batch_indices(4, 2, 0, 0, 0, 0)
    with pytest.raises(ValueError, match=r"^seed=-1 must be an int >= 0"): reverse_pairs(2, seed=-1)
    with pytest.raises(ValueError, match=r"^val_fraction=0 must be a number in \(0, 1\)"): char_lm_data("abcdef", 1, 0)
    with pytest.raises(TypeError, match=r"^val_fraction='0.1' must be a number in \(0, 1\)"): char_lm_data("abcdef", 1, "0.1")
    with pytest.raises(ValueError, match=r"^layer=-2 must be an int in \[-1, 0\]"): cross_attention_weights(model, data.batch([0]), -2)
    with pytest.raises(TypeError, match=r"^batch must be a dict of tensors"): batch_loss(model, [data.batch([0])])
    with pytest.raises(ValueError, match=r"^batch has keys \['src', 'src_keep', 'tgt_in'\] and lacks \['targets'\]"):
        batch_loss(model, {k: v for k, v in data.batch([0]).items() if k != "targets"})
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(TypeError, match=r"^scheduler must be a torch.optim.lr_scheduler.LRScheduler or None, got SGD"):
        save_checkpoint(tmp_path / "c.pt", model, opt, opt)
    with pytest.raises(TypeError, match=r"^optimizer must be a torch.optim.Optimizer or None, got dict"):
        load_checkpoint(tmp_path / "c.pt", model, opt.state_dict())
    with pytest.raises(TypeError, match=r"^device=0 must be a str such as 'cpu' or 'cuda:0'"): load_checkpoint(tmp_path / "c.pt", model, device=0)
    assert not (tmp_path / "c.pt").exists()                                  # every check before any work
