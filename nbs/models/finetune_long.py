"""Run the course's model (pydoc-char-llama, trained at context 128) at context 1024, before and after a short fine-tune.

For each RoPE variant (plain, position interpolation, dynamic NTK, YaRN; the `rope_scaling` dicts below), this script
measures the held-out loss at every position 0..1023 of the non-overlapping 1024-character windows of `heldout.txt`,
fine-tunes a copy of the model at length 1024 with that variant on the *training* split (the recipe of
`train_pydoc_lm.py`; never the held-out text) with the course's `train`, and measures again. The control run `more128`
continues training at length 128 with plain RoPE on the same number of characters, to separate "more training" from
"training at the longer length". Each run writes `long-context/<run>.json` beside this file: the command, the seed,
the settings, the training loss of every step and both per-position curves (nats per character).

Run from the repository root (the runs are independent; each took 4 to 18 minutes on one thread of a shared 2-core CPU,
as `wall_seconds` in its file records):

    OMP_NUM_THREADS=1 python nbs/models/finetune_long.py                 # every run, one after the other
    OMP_NUM_THREADS=1 python nbs/models/finetune_long.py --runs pi yarn  # some of them

Chapter 06 plots these files and recomputes the curves before fine-tuning live.
"""
import argparse, importlib.util, json, sys, time
from pathlib import Path
import torch
from transformer_lit.checkpoints import from_pretrained
from transformer_lit.train import Vocab, LMData, TrainConfig, train
from transformer_lit.long_context import with_rope_scaling, loss_by_position

HERE = Path(__file__).resolve().parent
MODEL, OUT = HERE / "pydoc-char-llama", HERE / "long-context"
L, T = 128, 1024                                      # training length of the shipped model, the length we run at
F = T // L                                            # the factor f = 8
VARIANTS = {                                          # run -> rope_scaling (None: plain RoPE)
    "rope": None,
    "pi": {"rope_type": "linear", "factor": float(F)},
    "ntk": {"rope_type": "dynamic", "factor": 1.0, "original_max_position_embeddings": L},
    "yarn": {"rope_type": "yarn", "factor": float(F), "original_max_position_embeddings": L},
}
RUNS = (*VARIANTS, "more128")

def chars() -> list:
    "The vocabulary in id order, read from the model's tokenizer.json."
    vocab = json.loads((MODEL / "tokenizer.json").read_text(encoding="utf-8"))["model"]["vocab"]
    return sorted(vocab, key=vocab.get)

def heldout_ids() -> torch.Tensor:
    return torch.tensor(Vocab(chars(), specials=False).encode((MODEL / "heldout.txt").read_text(encoding="utf-8")))

def train_ids() -> torch.Tensor:
    "The training split, by the recipe of train_pydoc_lm.py (pydoc_data.topics of the running Python)."
    spec = importlib.util.spec_from_file_location("train_pydoc_lm", HERE / "train_pydoc_lm.py")
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
    text, _, _ = m.corpus()
    return torch.tensor(Vocab(chars(), specials=False).encode(text))

def run(name, steps, seed, ids_train, ids_held):
    scaling = VARIANTS.get(name)                                   # more128: plain RoPE
    model = with_rope_scaling(from_pretrained(MODEL), scaling, T)
    before = loss_by_position(model, ids_held, T)
    block, batch = (L, 32) if name == "more128" else (T, 4)       # 4,096 characters a step either way
    vocab = Vocab(chars(), specials=False)
    cfg = TrainConfig(steps=steps, batch_size=batch, warmup=20, lr_factor=0.05, label_smoothing=0.0,
                      eval_every=steps, seed=seed, progress=False)
    t0 = time.time()
    hist = train(model, LMData(ids_train, block, vocab), cfg)
    wall = time.time() - t0
    after = loss_by_position(model.eval(), ids_held, T)
    return dict(run=name, command=" ".join(["python", "nbs/models/finetune_long.py", "--runs", name, "--steps", str(steps), "--seed", str(seed)]),
                rope_scaling=scaling, trained_length=block, batch_size=batch, steps=steps, seed=seed, warmup=cfg.warmup,
                lr_factor=cfg.lr_factor, eval_length=T, heldout_windows=(ids_held.numel() - 1) // T,
                python=sys.version.split()[0], torch=torch.__version__, threads=torch.get_num_threads(),
                wall_seconds=round(wall), train_loss=hist["loss"], lr=hist["lr"],
                before=[round(v, 6) for v in before.tolist()], after=[round(v, 6) for v in after.tolist()])

def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", nargs="+", choices=RUNS, default=list(RUNS))
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    ids_train, ids_held = train_ids(), heldout_ids()
    OUT.mkdir(exist_ok=True)
    for name in a.runs:
        r = run(name, a.steps, a.seed, ids_train, ids_held)
        (OUT / f"{name}.json").write_text(json.dumps(r, indent=0))
        b, f = torch.tensor(r["before"]), torch.tensor(r["after"])
        print(f"{name}: {r['wall_seconds']} s; loss at positions <{L}: {b[:L].mean():.3f} -> {f[:L].mean():.3f}, "
              f"{L}..{T - 1}: {b[L:].mean():.3f} -> {f[L:].mean():.3f}", flush=True)

if __name__ == "__main__": main()
