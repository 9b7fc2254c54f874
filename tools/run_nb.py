"""Execute notebooks top to bottom in a fresh kernel, save their outputs, then clean them.

Usage: python tools/run_nb.py nbs/00_attention.ipynb [more.ipynb ...]
Every cell runs, `#| slow` ones included (their saved outputs are what the site shows), except
`#| cuda` cells on a machine without CUDA: those keep the outputs saved by the last GPU run.
Widgets are not saved: a widget's view needs the kernel that made it (without one JupyterLab shows
its repr, `VBox(children=(...`, and re-saves its state with new ids on every open), so the notebook
keeps a widget output's other representations only; a widget appears when its cell runs. A page
that should work without a kernel shows a `viz.FramePlayer` instead.
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

WIDGET_VIEW = 'application/vnd.jupyter.widget-view+json'

def drop_widgets(cells):
    "Remove widget views from the outputs (an output left with only its text repr goes); cells as dicts or NotebookNodes."
    for cell in cells:
        outputs = cell.get('outputs')
        if not outputs: continue
        kept = []
        for o in outputs:
            data = o.get('data') or {}
            if WIDGET_VIEW in data:
                del data[WIDGET_VIEW]
                if not set(data) - {'text/plain'}: continue
            kept.append(o)
        cell['outputs'] = kept

def merge_streams(cells):
    "Join consecutive stream outputs of the same name into one, as JupyterLab does when it shows (and saves) them."
    for cell in cells:
        outputs = cell.get('outputs')
        if not outputs: continue
        merged = []
        for o in outputs:
            if (o.get('output_type') == 'stream' and merged and merged[-1].get('output_type') == 'stream'
                    and merged[-1].get('name') == o.get('name')):
                merged[-1]['text'] = ''.join(merged[-1]['text']) + ''.join(o['text'])
            else:
                merged.append(o)
        cell['outputs'] = merged

def run(path):
    import torch
    path = Path(path)
    nb = nbformat.read(path, as_version=4)
    ep = Executor(timeout=1800, kernel_name='python3', store_widget_state=False)
    ep.skip = () if torch.cuda.is_available() else ('cuda',)
    t = time.time()
    ep.preprocess(nb, {'metadata': {'path': str(path.parent)}})
    drop_widgets(nb.cells); merge_streams(nb.cells)
    nb.metadata.pop('widgets', None)                  # and no saved widget state
    nbformat.write(nb, path)
    print(f"{path}: executed in {time.time()-t:.1f}s")

if __name__ == '__main__':
    if sys.argv[1:2] == ['--merge-streams']:   # no execution: only join the stream outputs already saved
        for a in sys.argv[2:]:
            nb = nbformat.read(a, as_version=4); merge_streams(nb.cells); nbformat.write(nb, a)
        sys.exit(0)
    for a in sys.argv[1:]: run(a)
    for a in sys.argv[1:]: subprocess.run([str(Path(sys.executable).parent/"nbdev_clean"), "--fname", a], cwd=ROOT, check=True)
