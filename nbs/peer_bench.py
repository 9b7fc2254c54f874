"""Time `DecoderOnlyLM` against transformers' `GPT2LMHeadModel` with the same weights (chapter 10's peer table).

Usage: python nbs/peer_bench.py [--threads 1] [--rounds 5] [--profile]
Interleaved rounds (ours, theirs, ours, theirs, ...), median and range of the ratio ours/theirs per workload.
"""
import argparse, statistics, tempfile, time
import torch

def build(d=256, layers=4, heads=4, V=2000, max_len=512, seed=0):
    from transformer_lit.model import TransformerConfig, DecoderOnlyLM
    from transformer_lit.checkpoints import save_pretrained
    from transformers import GPT2LMHeadModel
    torch.manual_seed(seed)
    c = TransformerConfig(vocab_size=V, d_model=d, n_heads=heads, n_layers=layers, d_ff=4 * d, dropout=0.0, max_len=max_len,
                          positional="learned", activation="gelu_tanh", scale_embeddings=False)
    ours = DecoderOnlyLM(c).eval()
    with tempfile.TemporaryDirectory() as tmp:
        save_pretrained(ours, tmp)
        theirs = GPT2LMHeadModel.from_pretrained(tmp, attn_implementation="eager").eval()
    return ours, theirs

def workloads(ours, theirs, V=2000):
    g = torch.Generator().manual_seed(1)
    prompt = torch.randint(V, (1, 32), generator=g)
    batch = torch.randint(V, (8, 256), generator=g)
    def gen_ours(): return ours.generate(prompt, 128, greedy=True)
    def gen_theirs():
        return theirs.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=128, min_new_tokens=128,
                               do_sample=False, pad_token_id=0)
    def pre_ours():
        with torch.no_grad(): return ours(batch)
    def pre_theirs():
        with torch.no_grad(): return theirs(batch).logits
    def train(m, hf):
        def f():
            with torch.enable_grad():                                   # callers may run under no_grad
                m.zero_grad(set_to_none=True)
                loss = m(batch, labels=batch).loss if hf else m(batch[:, :-1], batch[:, 1:])[1]
                loss.backward()
        return f
    return {"greedy generate 128, B 1, prompt 32": (gen_ours, gen_theirs),
            "prefill B 8, T 256": (pre_ours, pre_theirs),
            "training step B 8, T 256": (train(ours, False), train(theirs, True))}

def timed(f):
    t = time.perf_counter(); f(); return time.perf_counter() - t

def run(rounds=5, threads=1, only=None):
    torch.set_num_threads(threads)
    ours, theirs = build()
    w = workloads(ours, theirs)
    a, b = w["greedy generate 128, B 1, prompt 32"]
    assert torch.equal(a(), b()), "greedy tokens differ"
    rows = {}
    for name, (fo, ft) in w.items():
        if only and only not in name: continue
        fo(); ft()                                                   # warm-up
        to, tt = [], []
        for _ in range(rounds): to.append(timed(fo)); tt.append(timed(ft))   # interleaved
        ratios = sorted(x / y for x, y in zip(to, tt))
        rows[name] = dict(ours_ms=1e3 * statistics.median(to), theirs_ms=1e3 * statistics.median(tt),
                          ratio=statistics.median(ratios), lo=ratios[0], hi=ratios[-1])
    return rows

def profile(threads=1):
    import cProfile, pstats
    torch.set_num_threads(threads)
    ours, _ = build()
    g = torch.Generator().manual_seed(1)
    prompt = torch.randint(2000, (1, 32), generator=g)
    ours.generate(prompt, 128, greedy=True)
    pr = cProfile.Profile(); pr.enable(); ours.generate(prompt, 128, greedy=True); pr.disable()
    return pstats.Stats(pr)

if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, default=1); p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--profile", action="store_true"); p.add_argument("--only", default=None)
    a = p.parse_args()
    if a.profile: profile(a.threads).sort_stats("tottime").print_stats(25)
    else:
        for k, r in run(a.rounds, a.threads, a.only).items():
            print(f"{k:40s} ours {r['ours_ms']:8.1f} ms  HF {r['theirs_ms']:8.1f} ms  ratio {r['ratio']:.2f} ({r['lo']:.2f}-{r['hi']:.2f})")
