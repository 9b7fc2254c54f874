"""Run every notebook as a test with `nbdev_test`, each in a fresh process, a few at a time.

`nbdev_test` on a folder reuses its worker processes from one notebook to the next, so global
state one notebook sets (torch's grad mode or thread count, Triton's interpreter) leaks into the
next. Here each notebook gets its own process. Prints the time per notebook, then a summary.
Usage: python tools/test_nbs.py [--flags "slow cuda"] [--workers 2] [notebook ...]
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
    a = ap.parse_args()
    nbs = [Path(p) for p in a.notebooks] or sorted(p for p in (ROOT/'nbs').glob('*.ipynb') if not p.name.startswith(('_', '.')))
    failed = []
    with ThreadPoolExecutor(a.workers) as ex:
        for nb, rc, secs, out in ex.map(lambda nb: run(nb, a.flags), nbs):
            print(f"{nb.name}: {'passed' if rc == 0 else 'FAILED'} in {secs:.0f}s", flush=True)
            if rc: failed.append(nb.name); print(out[-6000:], flush=True)
    print(f"notebooks: {len(nbs) - len(failed)} passed, {len(failed)} failed")
    if failed: print("failed:", *failed)
    return 1 if failed else 0

if __name__ == '__main__': sys.exit(main())
