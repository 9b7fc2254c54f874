"""Chapter 09: data, the schedule, the loss, checkpoints and resuming, a short run that learns, and DDP on 2 CPU processes."""
import math, os, shutil, socket, subprocess, sys
from pathlib import Path
import pytest
from hypothesis import given, strategies as st
import torch
import torch.nn.functional as F
from transformer_lit.train import (BOS, EOS, PAD, LMData, Seq2SeqData, TrainConfig, Vocab, batch_indices, batch_loss,
    char_lm_data, exact_match, load_checkpoint, main, make_model, make_task, model_logits, noam_lr, number_to_words,
    reverse_pairs, save_checkpoint, split_numbers, stdlib_corpus, train, translate_pairs, cross_attention_weights)

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny ops: one thread (tests/conftest.py)

# ---- the schedule
def test_noam_peak_matches_paper_formula():
    lrs = [noam_lr(s, 512, 4000) for s in range(1, 12_001)]
    peak_step = max(range(len(lrs)), key=lrs.__getitem__) + 1
    assert peak_step == 4000
    assert lrs[3999] == pytest.approx((512 * 4000) ** -0.5, rel=1e-12)
    assert round(lrs[3999], 5) == 7.0e-4                          # the "peaks near 7.0e-4"
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
    with pytest.raises(ValueError, match=r"task='sort' must be one of"): main(["sort", "--steps", "1"])

@pytest.mark.parametrize("kw,err,msg", [(dict(steps=0), ValueError, r"steps=0 must be a positive int"),
                                        (dict(batch_size=2.0), TypeError, r"batch_size=2.0 must be a positive int"),
                                        (dict(label_smoothing=1.0), ValueError, r"label_smoothing=1.0 must be in \[0, 1\)"),
                                        (dict(clip=0), ValueError, r"clip=0 must be > 0 or None")])
def test_train_config_validation(kw, err, msg):
    with pytest.raises(err, match=msg): TrainConfig(**kw)

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

# ---- checkpoints, resume
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

def test_ddp_two_processes_match_one(tmp_path):
    args = ["reverse", "--steps", "3", "--batch-size", "16", "--n-train", "100", "--d-model", "16", "--heads", "2",
            "--layers", "1", "--warmup", "2", "--eval-every", "100", "--no-progress"]
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc_per_node", "2",
                "--master_addr", "127.0.0.1", "--master_port", str(_free_port())]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    r = subprocess.run(torchrun + ["-m", "transformer_lit.train", *args, "--dump", str(tmp_path / "ddp")],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=80)
    assert r.returncode == 0, r.stderr[-3000:]
    main(args + ["--dump", str(tmp_path / "one")])                     # one process, the same global batch
    r0, r1 = (torch.load(tmp_path / "ddp" / f"rank{i}.pt", weights_only=True) for i in (0, 1))
    one = torch.load(tmp_path / "one" / "rank0.pt", weights_only=True)
    for k in r0["model"]: assert torch.equal(r0["model"][k], r1["model"][k]), k           # the ranks hold identical parameters
    assert r0["loss"] == r1["loss"] and len(r0["loss"]) == 3
    assert r0["loss"] == pytest.approx(one["loss"], rel=1e-5, abs=1e-6)                  # the loss of one process, every step
    for k in one["grad"]: torch.testing.assert_close(r0["grad"][k], one["grad"][k], atol=1e-5, rtol=1e-3)   # same gradient
    # Parameters: Adam divides by sqrt(v) + 1e-9, so where a gradient is ~0, rounding noise (the all-reduce sums in another
    # order) becomes a step of up to ±lr. Bound the difference by the learning rates actually used.
    bound = 2 * sum(noam_lr(s, 16, 2) for s in range(1, 4))
    for k in one["model"]: assert (r0["model"][k] - one["model"][k]).abs().max() <= bound, k
