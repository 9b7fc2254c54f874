"""nbdev's pre-render step, run the way the docs workflow runs it, without Quarto; `make test` calls it.

`nbdev_docs` (tools/docs.py, the GitHub Pages workflow) first processes every notebook for Quarto:
`nbdev.serve.proc_nbs` executes each notebook's import and export cells (and `show_doc` cells) in
worker processes that are reused from one notebook to the next. So torch state a chapter's import cell
leaves behind (grad mode, default dtype, thread count, deterministic flags) reaches the next notebook,
and a failure there stops the site build. Here the step runs from scratch (`force=True`) with one
worker, so every notebook follows every earlier one in the same process: the strictest order. Then
the same cells run once more in one shell, notebook after notebook, and any change of torch's global
state is reported by notebook. Not the `nbdev_proc_nbs` command: without Quarto it tries to install
Quarto with sudo and then `pip install -e .` with the first pip on PATH.
Usage: python tools/prerender.py
"""
import sys, time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

def torch_state():
    "The torch settings a notebook must not leave changed."
    import torch
    return dict(grad_enabled=torch.is_grad_enabled(), default_dtype=torch.get_default_dtype(),
                threads=torch.get_num_threads(), deterministic=torch.are_deterministic_algorithms_enabled(),
                inference_mode=torch.is_inference_mode_enabled(), anomaly=torch.is_anomaly_enabled())

def check_state(nbs):
    "Run nbdev's pre-render cells of each notebook in one shell; return the notebooks that changed torch's state."
    from execnb.shell import CaptureShell
    from nbdev.processors import _do_eval
    from nbdev.process import NBProcessor
    sh = CaptureShell()
    sh.run_cell('from nbdev.showdoc import show_doc')
    bad = []
    for nb in nbs:
        before = torch_state()
        proc = NBProcessor(nb)
        for cell in proc.nb.cells:
            if _do_eval(cell):
                sh.cell(cell)
                if sh.exc: raise RuntimeError(f"{nb.name}: cell {cell.idx_} failed") from sh.exc
        after = torch_state()
        changed = {k: (before[k], after[k]) for k in before if before[k] != after[k]}
        if changed: bad.append((nb.name, changed))
    return bad

STAMP = ROOT/'_proc'/'.prerender-inputs'   # the digest of the files the pre-render read (a dot file: nbdev skips it)

def inputs_digest(root=ROOT):
    "A digest of everything the pre-render's output depends on: the notebooks, the package's code and settings.ini."
    import hashlib
    h = hashlib.sha1()
    files = sorted([*(root/'nbs').glob('*.ipynb'), *(root/'transformer_lit').rglob('*.py'), root/'settings.ini'])
    for f in files: h.update(str(f.relative_to(root)).encode() + b'\0' + f.read_bytes() + b'\0')
    return h.hexdigest()

def main():
    import os
    os.chdir(ROOT)
    import warnings; warnings.filterwarnings('ignore')
    import nbdev.doclinks
    from nbdev.serve import proc_nbs
    t = time.time()
    nbdev.doclinks._build_modidx()
    STAMP.unlink(missing_ok=True)
    digest = inputs_digest()                    # read before: a file edited while the pre-render runs leaves no match
    proc_nbs(force=True, n_workers=1)
    STAMP.write_text(digest)                    # tests/test_docs.py reads _proc/ instead of processing again when it matches
    print(f"pre-render (nbdev.serve.proc_nbs, force=True, 1 worker): passed in {time.time() - t:.0f}s", flush=True)
    t = time.time()
    nbs = sorted(p for p in (ROOT/'nbs').glob('*.ipynb') if not p.name.startswith(('_', '.')))
    bad = check_state(nbs)
    for name, changed in bad:
        print(f"{name}: its pre-render cells leave torch's state changed:",
              ", ".join(f"{k} {a} -> {b}" for k, (a, b) in changed.items()))
    print(f"torch state after each notebook's pre-render cells: {len(nbs) - len(bad)} unchanged, {len(bad)} changed"
          f" ({time.time() - t:.0f}s)")
    return 1 if bad else 0

if __name__ == '__main__': sys.exit(main())
