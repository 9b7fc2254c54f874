"""Every exercise check of every chapter, run against its reference solution and its plausible wrong answers.

A chapter's exercises section (its starters, check cells and hidden solution cells) runs on its own, in a fresh
process, after only the earlier cells that define a name the section uses (found from the cells' source, then the
names those cells use, and so on), so a chapter is not run whole. The helpers of `transformer_lit.exercises` are
wrapped to record what happens: every check that a visible cell hands to `check_exercise` must pass a reference
solution (`exercise_passes` is True) and reject a wrong answer with one message (`exercise_fails`) in the hidden cells.
The helpers themselves (dtype tolerance, messages, IPython's rendering, `nbdev_test`) are tested below too.
Under `make test` every notebook has just run whole (tools/test_nbs.py) with the same helpers recorded; those records
(stamped with the digest of the files they ran) stand in for the section runs, and cover the heavy chapters too.
"""
import ast, builtins, contextlib, io, json, os, re, subprocess, sys, time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NBS = ROOT / "nbs"
sys.path.insert(0, str(ROOT / "tools"))
from prerender import inputs_digest                          # noqa: E402  (tools/, as tests/test_docs.py reads it)
from test_nbs import RECORDS, recording_exercises            # noqa: E402
CHAPTERS = sorted(p for p in NBS.glob("[0-9]*.ipynb") if "check_exercise(" in p.read_text())
_HEADING = re.compile(r"^#{2,3} .*Exercises", re.M)


def _flags(src):
    return {l.replace(" ", "")[3:] for l in src.splitlines() if l.replace(" ", "").startswith("#|")}


def _python(src):
    "A cell's source as plain Python (IPython's magics transformed)."
    from IPython.core.inputtransformer2 import TransformerManager
    return TransformerManager().transform_cell(src)


def _bound(tree):
    "Names a cell binds at its top level (assignments, defs, imports, loop and with targets)."
    out = set()
    def targets(t):
        for n in ast.walk(t):
            if isinstance(n, ast.Name): out.add(n.id)
    def visit(stmts):
        for s in stmts:
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)): out.add(s.name)
            elif isinstance(s, (ast.Import, ast.ImportFrom)):
                for a in s.names: out.add((a.asname or a.name).split(".")[0])
            elif isinstance(s, ast.Assign):
                for t in s.targets: targets(t)
            elif isinstance(s, (ast.AnnAssign, ast.AugAssign)): targets(s.target)
            elif isinstance(s, (ast.For, ast.AsyncFor)): targets(s.target); visit(s.body); visit(s.orelse)
            elif isinstance(s, (ast.With, ast.AsyncWith)):
                for i in s.items:
                    if i.optional_vars is not None: targets(i.optional_vars)
                visit(s.body)
            elif isinstance(s, ast.If): visit(s.body); visit(s.orelse)
            elif isinstance(s, ast.Try): visit(s.body); visit(s.orelse); visit(s.finalbody); [visit(h.body) for h in s.handlers]
        for n in ast.walk(ast.Module(body=stmts, type_ignores=[])):
            if isinstance(n, ast.NamedExpr): targets(n.target)
    visit(tree.body)
    return out


def _used(src):
    "Global names a cell reads: at its top level, or inside its functions and comprehensions (their locals left out)."
    import symtable
    out = set()
    def walk(t):
        for s in t.get_symbols():
            if s.is_referenced() and (t.get_type() == "module" or s.is_global()): out.add(s.get_name())
        for c in t.get_children(): walk(c)
    walk(symtable.symtable(src, "<cell>", "exec"))
    return out


def _receiver(node):
    "The name an attribute chain or subscript starts from (`m` in `m.w2.weight[:, i]`), or None."
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)): node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _mutates(stmt):
    "Names a statement changes in place without binding them: `m.x = ...`, `m[i] = ...`, `m.eval()`, `torch.manual_seed(0)`."
    out = set()
    for n in ast.walk(stmt):
        if isinstance(n, (ast.Assign, ast.AugAssign)):
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target]):
                if isinstance(t, (ast.Attribute, ast.Subscript)): out.add(_receiver(t))
        elif isinstance(n, ast.Expr) and isinstance(n.value, ast.Call) and isinstance(n.value.func, ast.Attribute):
            out.add(_receiver(n.value.func))
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id.startswith("save"):   # files under a directory
            out |= {_receiver(a) for a in n.args if isinstance(a, ast.BinOp)} | {_receiver(a.left) for a in n.args if isinstance(a, ast.BinOp)}
    return out - {None}


def plan(nb_path):
    """The statements to run for a chapter's exercises: the section's cells whole, after the earlier top-level statements
    that bind a name they use (the last such before the use, then the names that one uses, and so on) or change one in place."""
    import nbformat
    cells = nbformat.read(nb_path, as_version=4).cells
    start = next(i for i, c in enumerate(cells) if c.cell_type == "markdown" and _HEADING.search(c.source))
    end = next((i for i in range(start + 1, len(cells)) if cells[i].cell_type == "markdown" and re.match(r"#{1,2} ", cells[i].source)), len(cells))
    code = {i: _python(c.source) for i, c in enumerate(cells) if c.cell_type == "code" and not _flags(c.source) & {"evalfalse", "eval:false", "cuda"}}
    section = [i for i in code if start < i < end]
    stmts = []                                               # ((cell, k), source, binds, uses, mutates) before the section
    for i in (i for i in code if i < start):
        src = code[i]
        for k, st in enumerate(ast.parse(src).body):
            seg = "".join(f"@{ast.get_source_segment(src, d)}\n" for d in getattr(st, "decorator_list", [])) + ast.get_source_segment(src, st)
            late = isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))   # a body reads globals when called
            stmts.append(((i, k), seg, _bound(ast.Module(body=[st], type_ignores=[])), _used(seg), _mutates(st), late))
    chosen, todo, done = set(), {(n, (start, 0)) for i in section for n in _used(code[i])}, set()
    while todo:                                              # (name, position): the value `name` has at that position
        name, before = todo.pop()
        if (name, before) in done or name in dir(builtins): continue
        done.add((name, before))
        binders = [j for j, s in enumerate(stmts) if s[0] < before and name in s[2]]
        if not binders: continue
        last = binders[-1]
        for j in [last] + [j for j, s in enumerate(stmts) if stmts[last][0] < s[0] < before and name in s[4] and not (s[2] & s[4])]:
            if j not in chosen: chosen.add(j); todo |= {(n, (start, 0) if stmts[j][5] else stmts[j][0]) for n in stmts[j][3]}
    return [(f"{stmts[j][0][0]}.{stmts[j][0][1]}", stmts[j][1]) for j in sorted(chosen)] + [(i, code[i]) for i in section]


def run_chapter(nb_path):
    "Run a chapter's exercise section (in this process) and return what the wrapped helpers saw."
    import matplotlib; matplotlib.use("Agg")
    try:
        with recording_exercises() as record: _run_plan(nb_path)
    finally:
        import matplotlib.pyplot as plt; plt.close("all")
    return record


def _run_plan(nb_path):
    ns = {"__name__": "__main__"}
    import __future__                                        # IPython keeps a cell's `from __future__` for the later cells
    flags = __future__.annotations.compiler_flag if "from __future__ import annotations" in nb_path.read_text() else 0
    os.chdir(nb_path.parent)
    for i, src in plan(nb_path):
        t0 = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            try: exec(compile(src, f"{nb_path.name} cell {i}", "exec", flags=flags, dont_inherit=True), ns)
            except Exception as e: raise RuntimeError(f"{nb_path.name}, cell {i} failed: {type(e).__name__}: {e}") from e
        if os.environ.get("EXERCISE_TIMES"): print(f"cell {i}: {time.perf_counter() - t0:.1f} s {src.strip().splitlines()[-1][:60]!r}", file=sys.stderr)


HEAVY = {"14_checkpoints": "its exercises read checkpoints the chapter trains first (minutes of training); nbdev_test runs them",
         # the two below fail only in this test's worker, not in the chapter: nbdev_test runs their hidden checks
         "12_training": "its exercise cells start processes that pickle a class defined in the worker's __main__; nbdev_test runs them",
         "16_flash_triton": "its exercise needs the Triton interpreter set up as the chapter's first cells set it; nbdev_test runs them"}


def _calls(nb_path):
    "(checks handed to check_exercise in visible cells, checks given to exercise_passes, checks given to exercise_fails)."
    import nbformat
    found = ([], set(), set())
    for c in nbformat.read(nb_path, as_version=4).cells:
        if c.cell_type != "code": continue
        for n in ast.walk(ast.parse(_python(c.source))):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.args and isinstance(n.args[0], ast.Name):
                k = ("check_exercise", "exercise_passes", "exercise_fails").index(n.func.id) if n.func.id in ("check_exercise", "exercise_passes", "exercise_fails") else None
                if k == 0: found[0].append(n.args[0].id)
                elif k is not None: found[k].add(n.args[0].id)
    return found


@pytest.mark.parametrize("nb", CHAPTERS, ids=lambda p: p.stem)
def test_every_check_has_a_solution_and_a_wrong_answer(nb):
    "In the source: every check a visible cell runs is given a reference solution and a wrong answer by the hidden cells."
    shown, passes, fails = _calls(nb)
    assert shown, f"{nb.name}: no check_exercise call"
    for name in shown:
        assert name in passes, f"{nb.name}: no exercise_passes({name}, <reference solution>) in a hidden cell"
        assert name in fails, f"{nb.name}: no exercise_fails({name}, <wrong answer>, ...) in a hidden cell"


def _recorded():
    "The records `make test`'s notebook run left (tools/test_nbs.py: every chapter run whole), when made from exactly these files."
    if not RECORDS.exists(): return {}
    saved = json.loads(RECORDS.read_text())
    return saved["chapters"] if saved.get("inputs") == inputs_digest(ROOT) else {}


@pytest.fixture(scope="module")
def ran():
    """Every chapter's exercise records. `make test` runs every notebook first (tools/test_nbs.py), recording what the
    exercise helpers saw; when its stamp matches these files, those records are used. A chapter without one has its
    exercise section run here, in a fresh worker process (its imports and torch's global state kept apart), two at a time."""
    from concurrent.futures import ThreadPoolExecutor
    def one(p):
        r = subprocess.run([sys.executable, __file__, str(p)], cwd=ROOT, capture_output=True, text=True, timeout=900,
                           env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"})
        return json.loads(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 else {p.name: dict(error=r.stderr[-3000:])}
    out = _recorded()
    with ThreadPoolExecutor(2) as pool:
        for res in pool.map(one, [p for p in CHAPTERS if p.stem not in HEAVY and p.name not in out]): out.update(res)
    return out


@pytest.mark.parametrize("nb", CHAPTERS, ids=lambda p: p.stem)
def test_every_check_passes_its_solution_and_fails_a_wrong_answer(nb, ran):
    if nb.name not in ran: pytest.skip(HEAVY[nb.stem])           # a heavy chapter run here: only its notebook run records it
    res = ran[nb.name]
    assert "error" not in res, res.get("error")
    assert res["checks"], f"{nb.name}: no check ran"
    for name in res["checks"]:
        assert name in res["passed"], f"{nb.name}: {name} never passed a reference solution (exercise_passes)"
        assert name in res["failed"], f"{nb.name}: {name} never rejected a wrong answer (exercise_fails)"
    for m in res["messages"]:                                # one message: no traceback, a few lines at most (a mask drawn)
        assert m.strip() and "Traceback" not in m and len(m.splitlines()) <= 12, m


if __name__ == "__main__":                                   # the worker: chapters in turn, a JSON dict of results as the last line
    import torch
    out = {}
    for path in [Path(p).resolve() for p in sys.argv[1:]]:
        torch.set_grad_enabled(True); torch.set_default_dtype(torch.float32); torch.manual_seed(0); torch.set_num_threads(1)
        try: out[path.name] = run_chapter(path)
        except Exception as e: out[path.name] = dict(error=f"{type(e).__name__}: {e}"[:3000])
    print(json.dumps(out))
