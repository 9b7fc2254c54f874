"""Run the course's model (sotu-llama, trained at 256 tokens) at 1,024 tokens, before and after a short fine-tune at 512.

For each RoPE variant (plain, position interpolation, dynamic NTK, YaRN: the `rope_scaling` dicts below), this script
measures, on the held-out text (`heldout.txt`, the addresses of 2017-2021):

- the loss at every position 0..1023 of the non-overlapping 1,024-token windows: the mean over the windows at each
  position, and each window's means over bins of 32 positions (so that the notebook can show the spread over windows), and
- a held-out passage of 100 tokens written twice in a 1,024-token window: the window's own text at positions 20..119,
  written again at position `at` (150: inside the trained 256 positions; 400 and 800: past them), the mean loss on each
  copy (`written_twice` and `copy_losses` below, as in chapter 06),

first without training (`no-finetune.json`), then after fine-tuning a copy of the model with that variant for 50
steps at 512 tokens, once per seed (`<run>-seed<k>.json`). The fine-tune continues the model's own recipe (the data
mix of its last training phase: `RepeatData` of `train_sotu_lm.py` with 30% of the windows holding a stretch written
twice, 20% a random stretch written twice, 10% random tokens; the training split only, never the held-out text),
with the course's `train`: AdamW, a 20-step warm-up, `lr_factor` 0.04 (peak learning rate 5.6e-4, about the rate at
the end of the model's training), no label smoothing. The control run `more256` trains plain RoPE for the same steps
on the same number of tokens at the old length 256, to separate "more training" from "training at the longer length".
The seed changes only which windows each step draws: every run starts from the shipped weights.

The runs after a fine-tune are measured on 20 of the 53 windows (evenly spread) and 6 of the 12 passage windows, to keep
each run to a few minutes. Run from the repository root; it is resumable (a run whose file exists is skipped):

    python nbs/models/finetune_long.py --no-finetune                     # no-finetune.json
    OMP_NUM_THREADS=1 python nbs/models/finetune_long.py --seeds 0       # the 5 runs of seed 0 (50 steps each)
    python nbs/models/finetune_long.py --runs yarn more256 --seeds 1     # some of them

The shipped files came from these commands, the three seeds side by side, one thread each, on a shared 2-core CPU:
`--no-finetune` took 8 minutes and each fine-tune 1.5 to 4 minutes of training (`wall_seconds` in each file).

Each file records its command, the settings, the training loss of every step and the measurements; chapter 06 reads
them and recomputes a few of the numbers before fine-tuning live.
"""
import argparse, importlib.util, json, sys, time
from pathlib import Path
import torch
from torch.nn import functional as F
from transformer_lit.checkpoints import from_pretrained, Tokenizer
from transformer_lit.train import Vocab, TrainConfig, train
from transformer_lit.long_context import with_rope_scaling

HERE = Path(__file__).resolve().parent
MODEL, OUT = HERE / "sotu-llama", HERE / "long-context" / "sotu-llama"
L, T_TUNE, T = 256, 512, 1024                          # trained length, fine-tuning length, evaluation length
F_ = T // L                                            # the factor f = 4
VARIANTS = {                                           # run -> rope_scaling (None: plain RoPE)
    "rope": None,
    "pi": {"rope_type": "linear", "factor": float(F_)},
    "ntk": {"rope_type": "dynamic", "factor": 1.0, "original_max_position_embeddings": L},
    "yarn": {"rope_type": "yarn", "factor": float(F_), "original_max_position_embeddings": L},
}
RUNS = (*VARIANTS, "more256")
TOKENS_PER_STEP = 1024                                 # 2 windows of 512, or 4 of 256 for the control
MIX = dict(frac=0.3, random_frac=0.2, task_frac=0.1)  # the last phase of the model's training (training.json "phases")
WARMUP, LR_FACTOR = 20, 0.04
PASSAGE, FIRST, ATS = 100, 20, (150, 400, 800)         # the passage written twice: its length, first copy, second copies
BIN = 32                                               # the per-window losses are kept as means over bins of 32 positions
REP_WINDOWS = 12                                       # windows used for the passage, evenly spread over the text
TUNED_WINDOWS, TUNED_REP = 20, 6                       # after a fine-tune: 20 windows evenly spread, every second passage window

# The passage written twice: the same two functions as in chapter 06 (which checks this script's numbers against its own).
def written_twice(ids:torch.Tensor, # (N,) a token stream
                  T:int, # window length (inputs); each window holds T + 1 tokens
                  at:int, # where the second copy starts
                  length:int=100, # tokens in the passage
                  first:int=20, # where the first copy starts (the window's own text)
                  windows=None): # which non-overlapping windows (None: all)
    "(n, T+1) windows of `ids` in which the passage at `first` .. `first + length - 1` is written again at `at` .. `at + length - 1`."
    if not (first + length <= at and at + length <= T + 1): raise ValueError(f"the copies at {first} and {at} (length {length}) must not overlap and fit in T + 1 = {T + 1}")
    n = (ids.numel() - 1) // T
    rows = range(n) if windows is None else windows
    if any(not isinstance(w, int) or not 0 <= w < n for w in rows): raise ValueError(f"windows={windows} must be window indices in 0 .. {n - 1}")
    x = torch.stack([ids[w * T: w * T + T + 1] for w in rows])           # (n, T+1)
    x[:, at:at + length] = x[:, first:first + length]                    # the second copy replaces the text there
    return x

@torch.no_grad()
def copy_losses(model, # a language model: token ids (B, T) -> logits (B, T, V)
                x:torch.Tensor, # (n, T+1) from `written_twice`
                at:int, length:int=100, first:int=20, batch_size:int=8):
    "(n, 2) float64: each window's mean loss (nats per token) on the first and on the second copy, each copy's first token left out."
    if x.dim() != 2 or x.shape[1] < at + length: raise ValueError(f"x.shape={tuple(x.shape)} must be (n, T+1) with T + 1 >= at + length = {at + length}")
    was = model.training; model.eval()
    nll = torch.cat([F.cross_entropy(model(xb[:, :-1]).transpose(1, 2), xb[:, 1:], reduction='none').double()
                     for xb in x.split(batch_size)])                      # (n, T): entry p - 1 is the loss of token p
    model.train(was)
    return torch.stack([nll[:, first:first + length - 1].mean(1), nll[:, at:at + length - 1].mean(1)], 1)

def heldout_ids() -> torch.Tensor:
    "The held-out text as the course's tokenizer (chapter 14) encodes it: what the notebook uses."
    return torch.tensor(Tokenizer.from_file(MODEL).encode((MODEL / "heldout.txt").read_text(encoding="utf-8")))

def recipe():
    "The model's training script as a module (its corpus, tokenizer recipe and RepeatData)."
    spec = importlib.util.spec_from_file_location("train_sotu_lm", HERE / "train_sotu_lm.py")
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
    return m

def train_ids(m) -> torch.Tensor:
    "The training split (the addresses of 1790-2016), encoded by the shipped tokenizer with the tokenizers library (fast)."
    from tokenizers import Tokenizer as HFTokenizer
    text, _, _, _ = m.corpus(m.fetch())
    return torch.tensor(HFTokenizer.from_file(str(MODEL / "tokenizer.json")).encode(text).ids)

def spread(n_windows: int, k: int) -> list:
    "k window indices evenly spread over 0 .. n_windows - 1."
    return torch.linspace(0, n_windows - 1, k).round().long().tolist()

@torch.no_grad()
def measure(model, ids, tuned=False) -> dict:
    "Per-window loss at each position (bucketed) and the mean curve; the passage written twice at each `at`."
    n_all = (ids.numel() - 1) // T
    wins = spread(n_all, TUNED_WINDOWS) if tuned else list(range(n_all))
    rows = spread(n_all, REP_WINDOWS)[::2] if tuned else spread(n_all, REP_WINDOWS)
    n = len(wins)
    x = torch.stack([ids[w * T: w * T + T] for w in wins]); y = torch.stack([ids[w * T + 1: w * T + T + 1] for w in wins])   # (n, T) each
    model.eval()
    nll = torch.cat([F.cross_entropy(model(xb).transpose(1, 2), yb, reduction="none").double()
                     for xb, yb in zip(x.split(8), y.split(8))])            # (n, T)
    rep = {str(at): copy_losses(model, written_twice(ids, T, at, PASSAGE, FIRST, rows), at, PASSAGE, FIRST).tolist() for at in ATS}
    return dict(curve=[round(v, 6) for v in nll.mean(0).tolist()],
                window_bins=[[round(v, 6) for v in row] for row in nll.view(n, T // BIN, BIN).mean(2).tolist()],   # (n, T/BIN)
                windows=wins, passage={at: [[round(v, 6) for v in r] for r in rs] for at, rs in rep.items()}, passage_windows=rows)

def settings() -> dict:
    return dict(trained_length=L, eval_length=T, passage_length=PASSAGE, passage_first=FIRST, passage_at=list(ATS),
                python=sys.version.split()[0], torch=torch.__version__, threads=torch.get_num_threads())

def no_finetune(ids) -> dict:
    lm, t0, out = from_pretrained(MODEL), time.time(), {}
    for name, sc in VARIANTS.items():
        out[name] = dict(rope_scaling=sc, **measure(with_rope_scaling(lm, sc, T), ids))
        print(f"no fine-tune {name}: {time.time() - t0:.0f} s", flush=True)
    return dict(command="python nbs/models/finetune_long.py --no-finetune", wall_seconds=round(time.time() - t0), **settings(), runs=out)

def run(name, steps, seed, m, ids_train, ids_held) -> dict:
    scaling = VARIANTS.get(name)                                    # more256: plain RoPE
    block = L if name == "more256" else T_TUNE
    model = with_rope_scaling(from_pretrained(MODEL), scaling, T)
    data = m.RepeatData(ids_train, block, Vocab([str(i) for i in range(model.config.vocab_size)], specials=False), **MIX)
    cfg = TrainConfig(steps=steps, batch_size=TOKENS_PER_STEP // block, warmup=WARMUP, lr_factor=LR_FACTOR, label_smoothing=0.0,
                      eval_every=steps, seed=seed, progress=False)
    t0 = time.time()
    hist = train(model, data, cfg)
    wall = time.time() - t0
    return dict(run=name, command=f"python nbs/models/finetune_long.py --runs {name} --steps {steps} --seeds {seed}",
                rope_scaling=scaling, block=block, batch_size=cfg.batch_size, steps=steps, seed=seed, warmup=WARMUP,
                lr_factor=LR_FACTOR, mix=MIX, **settings(), wall_seconds=round(wall),
                train_loss=[round(v, 5) for v in hist["loss"]], lr=hist["lr"], **measure(model, ids_held, tuned=True))

def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", nargs="+", choices=RUNS, default=list(RUNS))
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--no-finetune", action="store_true", help="only the measurements without training")
    a = p.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    ids_held = heldout_ids()
    if a.no_finetune:
        if not (OUT / "no-finetune.json").exists(): (OUT / "no-finetune.json").write_text(json.dumps(no_finetune(ids_held)))
        return
    m = recipe(); ids_train = train_ids(m)
    for seed in a.seeds:
        for name in a.runs:
            path = OUT / f"{name}-seed{seed}.json"
            if path.exists(): continue
            r = run(name, a.steps, seed, m, ids_train, ids_held)
            path.write_text(json.dumps(r))
            c = torch.tensor(r["curve"]); b = {f"{a}-{e}": round(c[a:e].mean().item(), 3) for a, e in ((0, L), (L, 2 * L), (2 * L, T))}
            rep = {at: sum(x[1] for x in v) / len(v) for at, v in r["passage"].items()}
            print(f"{name} seed {seed}: {r['wall_seconds']} s; loss by positions {b}; second copy {rep}", flush=True)

if __name__ == "__main__": main()
