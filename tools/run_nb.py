"""Execute notebooks top to bottom in a fresh kernel, save their outputs, then clean them.

Usage: python tools/run_nb.py nbs/00_attention.ipynb [more.ipynb ...]
Every cell runs, `#| slow` ones included (their saved outputs are what the site shows), except
`#| cuda` cells on a machine without CUDA: those keep the outputs saved by the last GPU run.
"""
import os, subprocess, sys, time
from pathlib import Path
import nbformat
from nbconvert.preprocessors import ExecutePreprocessor

ROOT = Path(__file__).resolve().parent.parent

def has_flag(cell, flag):
    return any(l.replace(' ', '') == f'#|{flag}' for l in cell.source.splitlines())

class Executor(ExecutePreprocessor):
    skip = ()
    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type == 'code' and any(has_flag(cell, f) for f in self.skip): return cell, resources
        return super().preprocess_cell(cell, resources, index)

def run(path):
    import torch
    path = Path(path)
    nb = nbformat.read(path, as_version=4)
    ep = Executor(timeout=1800, kernel_name='python3')
    ep.skip = () if torch.cuda.is_available() else ('cuda',)
    t = time.time()
    ep.preprocess(nb, {'metadata': {'path': str(path.parent)}})
    nbformat.write(nb, path)
    print(f"{path}: executed in {time.time()-t:.1f}s")

if __name__ == '__main__':
    for a in sys.argv[1:]: run(a)
    for a in sys.argv[1:]: subprocess.run([str(Path(sys.executable).parent/"nbdev_clean"), "--fname", a], cwd=ROOT, check=True)
