"""Functions that tests/test_train.py runs in spawned processes with transformer_lit.at_scale.launch (importable by name)."""
import torch
from transformer_lit.train import TrainConfig, make_model, make_task, train, world


def dropout_masks(steps: int = 2) -> list:
    "Train a model with dropout under DDP and return, per step, the keep-mask its embedding dropout drew on this rank."
    tr, _ = make_task("charlm", block_size=16)
    model = make_model(tr, 16, 2, 1, dropout=0.5, seed=0)
    masks = []
    def hook(mod, inp, out):
        if mod.training: masks.append(((out != 0) | (inp[0] == 0)).cpu())   # kept positions (an input 0 stays 0)
    model.drop.register_forward_hook(hook)
    train(model, tr, TrainConfig(steps=steps, batch_size=4, warmup=2, progress=False, parallel="ddp"))
    return dict(rank=world()[0], masks=masks)


def accum_too_fine():
    "A batch that 2 ranks cannot split into grad_accum micro-batches: train must refuse it."
    tr, _ = make_task("reverse", n_train=32, n_val=4)
    train(make_model(tr, 16, 2, 1), tr, TrainConfig(steps=1, batch_size=4, grad_accum=4, progress=False, parallel="ddp"))
