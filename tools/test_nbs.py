"""Run every notebook as a test with `nbdev_test`, each in a fresh process, a few at a time.

`nbdev_test` on a folder reuses its worker processes from one notebook to the next, so global
state one notebook sets (torch's grad mode or thread count, Triton's interpreter) leaks into the
next. Here each notebook gets its own process. Prints each notebook's time against the budget a
chapter's Run All has (60 s on a quiet 2-core machine), then a summary that names any notebook over it.
The time is a proxy for Run All: `nbdev_test` skips cells marked `#| slow` or `#| cuda` unless flagged,
and notebooks run `--workers` at a time, so on a loaded machine the times are inflated.
Usage: python tools/test_nbs.py [--flags "slow cuda"] [--workers 2] [--budget 60] [notebook ...]
"""
import argparse, os, subprocess, sys, time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent

def run(nb, flags):
    t = time.time()
    cmd = [str(BIN/'nbdev_test'), '--path', str(nb), '--n_workers', '0', '--flags', flags]
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    return nb, r.returncode, time.time() - t, r.stdout + r.stderr

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('notebooks', nargs='*')
    ap.add_argument('--flags', default='')
    ap.add_argument('--workers', type=int, default=int(os.environ.get('NB_WORKERS', 2)))
    ap.add_argument('--budget', type=float, default=60, help="seconds a chapter's Run All may take on a quiet 2-core machine")
    a = ap.parse_args()
    nbs = [Path(p) for p in a.notebooks] or sorted(p for p in (ROOT/'nbs').glob('*.ipynb') if not p.name.startswith(('_', '.')))
    failed, over = [], []
    with ThreadPoolExecutor(a.workers) as ex:
        for nb, rc, secs, out in ex.map(lambda nb: run(nb, a.flags), nbs):
            flag = f"  OVER BUDGET by {secs - a.budget:.0f}s" if secs > a.budget else ""
            print(f"{nb.name}: {'passed' if rc == 0 else 'FAILED'} in {secs:.0f}s (budget {a.budget:.0f}s){flag}", flush=True)
            if secs > a.budget: over.append(f"{nb.name} ({secs:.0f}s)")
            if rc: failed.append(nb.name); print(out[-6000:], flush=True)
    print(f"notebooks: {len(nbs) - len(failed)} passed, {len(failed)} failed")
    if over:   # reported, not failed: times on a shared or loaded machine are not the quiet machine's
        print(f"over the {a.budget:.0f}s Run All budget ({a.workers} at a time; load inflates these):", *over)
    if failed: print("failed:", *failed)
    return 1 if failed else 0

if __name__ == '__main__': sys.exit(main())
