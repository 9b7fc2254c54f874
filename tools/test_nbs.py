"""Run every notebook as a test with `nbdev_test`, each in a fresh process, a few at a time.

`nbdev_test` on a folder reuses its worker processes from one notebook to the next, so global
state one notebook sets (torch's grad mode or thread count, Triton's interpreter) leaks into the
next. Here each notebook gets its own process. Prints each notebook's time against the budget a
chapter's Run All has (60 s on a quiet 2-core machine), then a summary that names any notebook over it.
The time is a proxy for Run All: `nbdev_test` skips cells marked `#| slow` or `#| cuda` unless flagged,
and notebooks run `--workers` at a time, so on a loaded machine the times are inflated.

Each process also records what the exercise helpers saw (every check a visible cell ran, which passed a
reference solution, which rejected a wrong answer and with what message) into `.nbtest/exercises.json`,
stamped with the digest of the notebooks and the package it ran. `tests/test_exercises.py` reads those
records when the stamp matches instead of running every chapter's exercises a second time.
Usage: python tools/test_nbs.py [--flags "slow cuda"] [--workers 2] [--budget 60] [notebook ...]
"""
import argparse, contextlib, json, os, subprocess, sys, time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RECORDS = ROOT/'.nbtest'/'exercises.json'

@contextlib.contextmanager
def recording_exercises():
    "Wrap `transformer_lit.exercises`' three helpers for the `with` block; yields the record they fill (check names)."
    import transformer_lit.exercises as ex
    shown, passed, failed, messages = [], set(), set(), []
    real = ex.check_exercise, ex.exercise_passes, ex.exercise_fails
    def check_exercise(check, answer):
        shown.append(check); return real[0](check, answer)
    def exercise_passes(check, answer):
        ok = real[1](check, answer)
        if ok: passed.add(id(check))
        return ok
    def exercise_fails(check, answer, contains=""):
        msg = real[2](check, answer, contains)
        failed.add(id(check)); messages.append(msg)
        return msg
    record = {}
    ex.check_exercise, ex.exercise_passes, ex.exercise_fails = check_exercise, exercise_passes, exercise_fails
    try: yield record
    finally:
        ex.check_exercise, ex.exercise_passes, ex.exercise_fails = real
        record.update(checks=[c.__name__ for c in shown], passed=[c.__name__ for c in shown if id(c) in passed],
                      failed=[c.__name__ for c in shown if id(c) in failed], messages=messages)

def child(nb, flags, out):
    "One notebook through nbdev_test in this process, the exercise helpers recorded into `out` (JSON)."
    from nbdev.test import nbdev_test
    run = getattr(nbdev_test, '__wrapped__', nbdev_test)   # the function itself, not its command-line parser
    code = 0
    with recording_exercises() as record:
        try: run(path=str(nb), n_workers=0, flags=flags)
        except SystemExit as e: code = e.code if isinstance(e.code, int) else 1
    Path(out).write_text(json.dumps(record))
    return code

def run(nb, flags, out):
    t = time.time()
    cmd = [sys.executable, __file__, '--child', str(out), '--flags', flags, str(nb)]
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    return nb, r.returncode, time.time() - t, r.stdout + r.stderr

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('notebooks', nargs='*')
    ap.add_argument('--flags', default='')
    ap.add_argument('--workers', type=int, default=int(os.environ.get('NB_WORKERS', 2)))
    ap.add_argument('--budget', type=float, default=60, help="seconds a chapter's Run All may take on a quiet 2-core machine")
    ap.add_argument('--child', default=None, help=argparse.SUPPRESS)   # internal: run one notebook, write its record here
    a = ap.parse_args()
    if a.child: return child(a.notebooks[0], a.flags, a.child)
    sys.path.insert(0, str(ROOT/'tools'))
    from prerender import inputs_digest
    digest = inputs_digest()                    # read first: a file edited during the run leaves no match
    nbs = [Path(p).resolve() for p in a.notebooks] or sorted(p for p in (ROOT/'nbs').glob('*.ipynb') if not p.name.startswith(('_', '.')))
    RECORDS.parent.mkdir(exist_ok=True)
    failed, over, records = [], [], {}
    with ThreadPoolExecutor(a.workers) as ex:
        for nb, rc, secs, out in ex.map(lambda nb: run(nb, a.flags, RECORDS.parent/f'{nb.stem}.json'), nbs):
            flag = f"  OVER BUDGET by {secs - a.budget:.0f}s" if secs > a.budget else ""
            print(f"{nb.name}: {'passed' if rc == 0 else 'FAILED'} in {secs:.0f}s (budget {a.budget:.0f}s){flag}", flush=True)
            if secs > a.budget: over.append(f"{nb.name} ({secs:.0f}s)")
            if rc: failed.append(nb.name); print(out[-6000:], flush=True)
            rec = RECORDS.parent/f'{nb.stem}.json'
            if rc == 0 and rec.exists(): records[nb.name] = json.loads(rec.read_text())
            rec.unlink(missing_ok=True)
    old = json.loads(RECORDS.read_text()) if RECORDS.exists() else {}
    keep = old.get('chapters', {}) if old.get('inputs') == digest else {}
    RECORDS.write_text(json.dumps({'inputs': digest, 'chapters': {**keep, **records}}))
    print(f"notebooks: {len(nbs) - len(failed)} passed, {len(failed)} failed")
    if over:   # reported, not failed: times on a shared or loaded machine are not the quiet machine's
        print(f"over the {a.budget:.0f}s Run All budget ({a.workers} at a time; load inflates these):", *over)
    if failed: print("failed:", *failed)
    return 1 if failed else 0

if __name__ == '__main__': sys.exit(main())
