"""The SOTU training script's data (nbs/models/train_sotu_lm.py): `RepeatData` writes what the model card says it
writes, as a function of each window's start only (so a resumed run sees the same batches). Needs no corpus."""
import importlib.util
from pathlib import Path
import torch
from transformer_lit.train import Vocab, LMData

MODELS = Path(__file__).resolve().parents[1] / "nbs" / "models"

def script():
    spec = importlib.util.spec_from_file_location("train_sotu_lm", MODELS / "train_sotu_lm.py")
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
    return m

# -- the training data ----------------------------------------------------------------------------------------------
def test_repeat_data_writes_a_stretch_twice_and_is_a_function_of_the_start():
    m = script()
    vocab = Vocab([chr(i) for i in range(32, 127)], specials=False)
    ids = torch.randint(0, len(vocab), (12000,), generator=torch.Generator().manual_seed(0))   # no repeats of its own
    for T in (64, 128, 256):
        kinds = dict(frac=m.RepeatData(ids, T, vocab, frac=1.0), random_frac=m.RepeatData(ids, T, vocab, random_frac=1.0),
                     task_frac=m.RepeatData(ids, T, vocab, task_frac=1.0))
        starts = torch.arange(0, 4000, 37)
        for kind, data in kinds.items():
            b = data.batch(starts)
            assert torch.equal(b["idx"], data.batch(starts)["idx"])                  # the same start, the same window
            assert torch.equal(b["idx"][:, 1:], b["targets"][:, :-1])
            x = torch.cat([b["idx"], b["targets"][:, -1:]], 1)                       # (B, T+1)
            for row in x:
                # some stretch of >= 8 characters occurs twice, without overlap, at most 64 apart
                found = any(torch.equal(row[p: p + 8], row[q: q + 8]) for p in range(T + 1 - 8)
                            for q in range(p + 8, min(p + 8 + 64 + T // 3, T + 1 - 8) + 1))
                assert found, (kind, T)
            n = LMData(ids, T, vocab).batch(starts)                                   # the windows as the text has them
            natural = torch.cat([n["idx"], n["targets"][:, -1:]], 1)
            changed = (x != natural).float().mean().item()
            if kind == "task_frac": assert changed > 0.9                              # the whole window is random
            elif kind == "frac": assert 0 < changed < 0.34                            # only the second copy (<= T/3) replaced
    plain = m.RepeatData(ids, 128, vocab)
    assert torch.equal(plain.batch(torch.arange(5))["idx"], LMData(ids, 128, vocab).batch(torch.arange(5))["idx"])
