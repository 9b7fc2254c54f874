"""Train the course's small character-level LLaMA-style model on Python's own documentation.

Corpus: `pydoc_data.topics` of the Python standard library (the text of the "Python Language Reference"
topics that `help()` shows; Copyright Python Software Foundation, distributed under the PSF License
Agreement, https://docs.python.org/3/license.html). The held-out topics' text is stored beside the model
(`heldout.txt`), so the held-out loss does not depend on the Python version that reads the training text.

Run from the repository root (about 30 minutes on two shared CPU cores):

    python nbs/models/train_pydoc_lm.py --out nbs/models/pydoc-char-llama

The model is written by `transformer_lit.checkpoints.save_pretrained`; `transformers` loads it as a LLaMA.
"""
import argparse, json, math, sys, time
from pathlib import Path
import torch
from transformer_lit.model import TransformerConfig, DecoderOnlyLM, count_parameters
from transformer_lit.train import Vocab, LMData, TrainConfig, train, evaluate_loss

HELDOUT_FRACTION = 0.1  # topics sorted by name; the last ones, at least this fraction of the characters, are held out

def corpus(topics=None) -> tuple:
    "(train text, held-out text, held-out topic names): topics sorted by name, joined by a blank line."
    if topics is None:
        from pydoc_data.topics import topics
    names = sorted(topics)
    total, held = sum(len(topics[n].strip()) for n in names), []
    while sum(len(topics[n].strip()) for n in held) < HELDOUT_FRACTION * total: held.insert(0, names[len(names) - 1 - len(held)])
    join = lambda ns: "\n\n".join(topics[n].strip() for n in ns) + "\n"
    return join([n for n in names if n not in held]), join(held), held

def char_tokenizer(chars):
    "A `tokenizers` tokenizer with one token per character (id = index in `chars`) that `transformers` loads."
    from tokenizers import Tokenizer, Regex, models, pre_tokenizers, decoders
    tok = Tokenizer(models.WordLevel({c: i for i, c in enumerate(chars)}, unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), "isolated")   # every character, newlines included
    tok.decoder = decoders.Fuse()                                             # ids -> characters, joined with nothing
    return tok

def heldout_loss(model, text, chars, block=128, dtype=torch.float64) -> float:
    "Mean next-character cross-entropy (nats) over the non-overlapping windows of `text`, as `evaluate_loss` cuts them."
    vocab = Vocab(chars, specials=False)
    val = LMData(torch.tensor(vocab.encode(text)), block, vocab)
    return evaluate_loss(model.to(dtype), val, 64, len(val.eval_indices()))

def model_config(vocab_size: int) -> TransformerConfig:
    return TransformerConfig(vocab_size=vocab_size, d_model=128, n_heads=4, n_kv_heads=2, n_layers=4, d_ff=384,
                             dropout=0.1, max_len=128, positional="rope", norm="rms", layer_norm_eps=1e-5,
                             activation="swiglu", bias=False, tie_embeddings=True, scale_embeddings=False)

README = """# pydoc-char-llama

A small LLaMA-style language model that the course trained itself, on the English text of Python's own
documentation, one character per token. Chapter 14 loads it with `from_pretrained` like any checkpoint;
`transformers` loads it too (`AutoModelForCausalLM.from_pretrained` reads it as a `LlamaForCausalLM`,
`AutoTokenizer.from_pretrained` reads its tokenizer).

## What it is

- Architecture: `DecoderOnlyLM` with RMSNorm (pre-norm), SwiGLU, RoPE and grouped-query attention:
  {n_layers} layers, d_model = {d_model}, {n_heads} query heads sharing {n_kv_heads} key/value heads (head_dim {head_dim}),
  SwiGLU hidden width {d_ff}, tied embeddings, no biases; {parameters:,} parameters, stored in float32
  (`model.safetensors`, {size_mb:.1f} MB). Context: {block} characters (`max_position_embeddings`).
- Tokens: characters. The vocabulary is the {vocab} distinct characters of the corpus (`tokenizer.json`,
  a `tokenizers` WordLevel model that splits text into single characters; id = position in the sorted list).
  Why characters and not a byte-level BPE: the corpus is small ({corpus_chars:,} characters). A BPE vocabulary
  of 2,000 tokens would cost {bpe_emb:,} embedding parameters ({bpe_share:.0%} of this model) and leave each merged
  token few occurrences to learn from; a character tokenizer is exact, needs no training, and its
  {vocab} symbols cost {emb:,} parameters. The price: a 128-token context holds only about 20 words.
- Training data: `pydoc_data.topics` of Python {python} (the Language Reference topics that `help()`
  shows). Copyright Python Software Foundation; distributed under the PSF License Agreement
  (https://docs.python.org/3/license.html). Topics are sorted by name and joined by a blank line;
  the last topics, at least 10 % of the characters, are held out: {heldout_topics}
  ({heldout_chars:,} characters, stored in `heldout.txt` so that the held-out loss does not depend on
  the Python version). Training sees the other {train_chars:,} characters only.

## How it was trained

With the course's own `transformer_lit.train.train` (chapter 12): AdamW, the inverse-square-root schedule
with {warmup} warm-up steps and lr_factor 0.5, no label smoothing, dropout 0.1, gradient clipping at 1.0,
batches of {batch} windows of {block} characters, seed {seed}, {steps} optimizer steps
({tokens:,} training characters, about {epochs:.1f} passes over the training text), on a shared 2-core CPU
in {minutes:.0f} minutes of wall-clock time. The exact command, from the repository root:

    {command}
{segments}
Retraining is never part of the test suite. `training.json` holds the full history (batch loss, learning
rate, gradient norm, held-out loss every 100 steps); `training_curve.png` draws it.

## Held-out loss

{loss:.3f} nats per character ({bits:.3f} bits per character), the mean next-character cross-entropy over
the non-overlapping {block}-character windows of `heldout.txt`, computed in float64 from the shipped
files (`tests/test_trained_model.py` recomputes it). A uniform guess over the vocabulary scores
ln {vocab} = {uniform:.3f} nats.

## What it can and cannot do

Measured in chapter 14: it has learned spelling and layout. Prompted with "A *mapping* object maps *hashable*
values to arb" it continues greedily with "itrary", then loops ("of the string of the string ..."); sampled at
temperature 0.8 it strings real words together without grammar and invents some. One head (layer 3, head 3) is a
clear previous-token head; no head is an induction head yet, and a passage written twice is predicted no better
the second time. It was never trained to follow instructions, and nothing measured here shows any knowledge of
Python beyond spelling and layout. It has never seen more than {block}
characters of context: running it longer than that is an experiment about position encodings, not a feature.
"""

def segments_note(meta) -> str:
    "A paragraph on a run made in parts (training.json's `segments`: the commands, in order), or nothing."
    seg = meta.get("segments")
    if not seg: return ""
    parts = ", then ".join(f"`{s['command']}` {s['what']}" for s in seg)
    return (f"\nThis model ran in {len(seg)} parts: {parts} (`train(..., resume=True)` restores the model, the optimizer, "
            "the schedule and the history; the batches depend only on the seed and the step).\n")

def write_readme(out, meta, config, chars):
    "Write the model card: the one source of README.md (tests/test_trained_model.py checks the shipped file is this text)."
    (Path(out) / "README.md").write_text(readme_text(out, meta, config, chars), encoding="utf-8")

def readme_text(out, meta, config, chars) -> str:
    size = (Path(out) / "model.safetensors").stat().st_size / 1e6
    text = README.format(n_layers=config.n_layers, d_model=config.d_model, n_heads=config.n_heads, n_kv_heads=config.kv_heads,
                         head_dim=config.head_dim, d_ff=config.d_ff, parameters=meta["parameters"], size_mb=size,
                         block=meta["block_size"], vocab=len(chars), python=meta["python"],
                         heldout_topics=", ".join(f"`{t}`" for t in meta["heldout_topics"]), heldout_chars=meta["heldout_chars"],
                         train_chars=meta["train_chars"], warmup=200, batch=meta["batch_size"], seed=meta["seed"], steps=meta["steps"],
                         tokens=meta["steps"] * meta["batch_size"] * meta["block_size"],
                         epochs=meta["steps"] * meta["batch_size"] * meta["block_size"] / meta["train_chars"],
                         minutes=meta["wall_seconds"] / 60, command=meta["command"], segments=segments_note(meta), loss=meta["heldout_loss"],
                         bits=meta["heldout_loss"] / math.log(2), uniform=math.log(len(chars)),
                         corpus_chars=meta["train_chars"] + meta["heldout_chars"], bpe_emb=2000 * config.d_model,
                         bpe_share=2000 * config.d_model / meta["parameters"], emb=len(chars) * config.d_model)
    return text

def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="nbs/models/pydoc-char-llama")
    p.add_argument("--steps", type=int, default=1400)
    p.add_argument("--max-minutes", type=float, default=None, help="stop at the first evaluation after this long (the steps run are recorded)")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--block", type=int, default=128)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--measure", type=int, default=0, help="only time this many steps and exit")
    a = p.parse_args(argv)
    torch.manual_seed(a.seed)
    train_text, held_text, held = corpus()
    chars = sorted(set(train_text + held_text))          # one vocabulary for both splits (a character unseen in training keeps its initial embedding)
    vocab = Vocab(chars, specials=False)
    enc = lambda s: torch.tensor(vocab.encode(s))
    data, val = LMData(enc(train_text), a.block, vocab), LMData(enc(held_text), a.block, vocab)
    config = model_config(len(vocab))
    model = DecoderOnlyLM(config)
    print(f"train {len(train_text)} chars, held out {len(held_text)} chars ({len(held)} topics), vocab {len(vocab)}, "
          f"params {count_parameters(model)}", flush=True)
    cfg = TrainConfig(steps=a.measure or a.steps, batch_size=a.batch, warmup=200, lr_factor=0.5, label_smoothing=0.0,
                      eval_every=100, eval_items=len(val.eval_indices()), seed=a.seed, progress=False)
    t0 = time.time()
    ckpt = None if a.measure else Path(a.out + ".train.pt")      # resumable; not shipped
    start = torch.load(ckpt, weights_only=False)["step"] if ckpt is not None and ckpt.exists() else 0
    hist = train(model, data, cfg, val=val, checkpoint=ckpt, resume=True, on_eval=lambda m, step: print(f"step {step} {time.time() - t0:.0f}s", flush=True) or
                 dict(stop=a.max_minutes is not None and time.time() - t0 > 60 * a.max_minutes))
    wall = time.time() - t0
    n = hist["step"][-1]; print(f"{n} steps in {wall:.0f}s ({wall / n:.2f} s/step)", flush=True)
    if a.measure: return
    model.eval()
    out = Path(a.out); out.mkdir(parents=True, exist_ok=True)
    prev = json.loads((out / "training.json").read_text()) if (out / "training.json").exists() and start > 0 else {}
    wall += prev.get("wall_seconds", 0)                     # a resumed run adds the earlier segments' time
    from transformer_lit.checkpoints import save_pretrained, from_pretrained
    save_pretrained(model, out)
    (out / "heldout.txt").write_text(held_text, encoding="utf-8")
    from transformers import PreTrainedTokenizerFast
    PreTrainedTokenizerFast(tokenizer_object=char_tokenizer(chars)).save_pretrained(out)
    held_loss = heldout_loss(from_pretrained(out), held_text, chars, a.block)   # float64, from the shipped files
    steps = hist["step"][-1]
    meta = dict(command=f"python nbs/models/train_pydoc_lm.py --steps {steps} --seed {a.seed}", seed=a.seed,
                steps=steps, batch_size=a.batch, block_size=a.block, train_chars=len(train_text),
                heldout_chars=len(held_text), heldout_topics=held, python=sys.version.split()[0],
                torch=torch.__version__, parameters=count_parameters(model), wall_seconds=round(wall),
                heldout_loss=held_loss, history={k: v for k, v in hist.items() if k != "bytes"})
    (out / "training.json").write_text(json.dumps(meta, indent=1))
    import matplotlib; matplotlib.use("Agg"); import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 3.2))
    ax.plot(hist["step"], hist["loss"], lw=0.8, label="training batch")
    ax.plot(hist["val_step"], hist["val_loss"], "o-", ms=3, label="held-out topics")
    ax.set(xlabel="optimizer step", ylabel="cross-entropy (nats / character)", title="pydoc-char-llama")
    ax.axhline(math.log(len(chars)), color="grey", ls=":", lw=0.8); ax.legend(); fig.tight_layout()
    fig.savefig(out / "training_curve.png", dpi=110)
    write_readme(out, meta, config, chars)
    print(f"held-out loss {held_loss:.4f} nats/char; saved to {out}", flush=True)

if __name__ == "__main__": main()
