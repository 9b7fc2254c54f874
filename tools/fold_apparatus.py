"""Fold, in JupyterLab, the cells a learner need not read at the top of a chapter.

A chapter starts with nbdev's `#| default_exp` line and hidden cells that only import (the test helpers, the
plotting library). On the site they are invisible already (nbdev drops the directive cell and `#| hide` cells);
in JupyterLab they were the first thing a learner saw. This sets the cell metadata `jupyter.source_hidden` on
them, so JupyterLab shows a folded bar instead (a click unfolds it). Nothing else changes.

Usage: python tools/fold_apparatus.py [--check] [nbs/*.ipynb ...]   (default: every notebook in nbs/)
--check changes nothing and exits 1, naming the cells, when a notebook has such a cell unfolded.
"""
import json, re, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
IMPORT = re.compile(r"^\s*(import\s|from\s+\S+\s+import\s|%|#|$)")


def is_apparatus(cell) -> bool:
    "A code cell holding only nbdev's `default_exp` directive, or a `#| hide` cell that only imports."
    if cell.get("cell_type") != "code":
        return False
    lines = "".join(cell.get("source", [])).splitlines()
    directives = [l.replace(" ", "") for l in lines if l.replace(" ", "").startswith("#|")]
    body = [l for l in lines if not l.replace(" ", "").startswith("#|")]
    if any(d.startswith("#|default_exp") for d in directives):
        return all(not l.strip() or l.lstrip().startswith("#") for l in body)
    if "#|hide" in directives:
        code = [l for l in body if l.strip() and not l.lstrip().startswith("#")]
        return bool(code) and all(IMPORT.match(l) for l in code)
    return False


def unfolded(nb):
    return [i for i, c in enumerate(nb["cells"])
            if is_apparatus(c) and not c.get("metadata", {}).get("jupyter", {}).get("source_hidden")]


def main(argv):
    check = "--check" in argv
    paths = [Path(a) for a in argv if a != "--check"] or sorted((ROOT / "nbs").glob("*.ipynb"))
    bad = []
    for p in paths:
        nb = json.loads(p.read_text(encoding="utf-8"))
        cells = unfolded(nb)
        if not cells:
            continue
        if check:
            bad.append(f"{p.name}: cells {cells}")
            continue
        for i in cells:
            nb["cells"][i].setdefault("metadata", {}).setdefault("jupyter", {})["source_hidden"] = True
        p.write_text(json.dumps(nb, indent=1, ensure_ascii=False, sort_keys=True) + "\n", encoding="utf-8")
    if bad:
        print("cells a learner need not read are unfolded (run python tools/fold_apparatus.py):\n  " + "\n  ".join(bad))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
