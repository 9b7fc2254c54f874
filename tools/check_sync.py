"""Fail when `nbdev_export` or `nbdev_clean` would change a file: notebooks and package out of sync."""
import hashlib, subprocess, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent

def snapshot():
    files = [*ROOT.glob('nbs/**/*.ipynb'), *ROOT.glob('transformer_lit/**/*.py')]
    return {str(f.relative_to(ROOT)): hashlib.sha1(f.read_bytes()).hexdigest()
            for f in files if '.ipynb_checkpoints' not in f.parts}

def changed(before, after): return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))

def main():
    for tool, why in [('nbdev_export', 'the package is out of sync with the notebooks'),
                      ('nbdev_clean', 'the notebooks are not clean')]:
        before = snapshot()
        subprocess.run([str(BIN/tool)], cwd=ROOT, check=True)
        diff = changed(before, snapshot())
        if diff:
            print(f"{tool} changed {len(diff)} file(s): {why}. Commit the result:", *diff, sep='\n  ')
            return 1
        print(f"{tool}: nothing to change")
    return 0

if __name__ == '__main__': sys.exit(main())
