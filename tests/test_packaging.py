"""What `pip install transformer_lit` brings, and what importing the library pulls in.

The library's modules need torch, numpy, safetensors and tqdm only; the course's tools (JupyterLab,
ipywidgets, matplotlib, nbdev) come with the `[lab]` extra, the checks with `[dev]`."""
import ast
import configparser
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "transformer_lit"
CFG = configparser.ConfigParser(delimiters=["="])
CFG.read(ROOT / "settings.ini")
COURSE_MODULES = {"viz", "widgets"}              # course apparatus: plots and widgets, needs the [lab] extra
LIBRARY_MODULES = sorted(p.stem for p in PKG.glob("*.py") if not p.stem.startswith("_") and p.stem not in COURSE_MODULES)
RUNTIME = {"torch", "numpy", "tqdm", "safetensors"}
OPTIONAL_LAZY = {"triton", "matplotlib", "transformers"}   # imported inside functions only: the Triton kernel, benchmark
# plots, and the benchmark's peer comparison with transformers (skipped with a message when it is not installed)
HEAVY = ("matplotlib", "ipywidgets", "IPython", "ipykernel", "jupyter_client", "PIL")


def requirement_names(key):
    return {re.split(r"[<>=!;\[ ]", r, maxsplit=1)[0].lower() for r in shlex.split(CFG["DEFAULT"].get(key, ""))}


def third_party_imports(path, top_level_only):
    "Top-level names of the non-stdlib, non-relative modules a file imports (at module level, or anywhere)."
    tree = ast.parse(path.read_text())
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    names = set()
    for n in nodes:
        if isinstance(n, ast.Import): names |= {a.name.split(".")[0] for a in n.names}
        elif isinstance(n, ast.ImportFrom) and not n.level and n.module: names.add(n.module.split(".")[0])
    return {n for n in names if n not in sys.stdlib_module_names and n not in ("__future__", "transformer_lit")}


def test_runtime_requirements_are_what_the_library_imports():
    assert requirement_names("requirements") == RUNTIME
    top = set().union(*(third_party_imports(PKG / f"{m}.py", True) for m in LIBRARY_MODULES))
    anywhere = set().union(*(third_party_imports(PKG / f"{m}.py", False) for m in LIBRARY_MODULES))
    assert top <= RUNTIME | {"triton"}, top - RUNTIME           # triton: flash_triton guards its import
    assert anywhere <= RUNTIME | OPTIONAL_LAZY, anywhere - RUNTIME - OPTIONAL_LAZY
    # transformers is the course's reference, never the library's dependency: only bench's peer comparison reaches it
    assert {m for m in LIBRARY_MODULES if "transformers" in third_party_imports(PKG / f"{m}.py", False)} == {"bench"}


def test_course_tools_are_extras():
    lab, dev = requirement_names("lab_requirements"), requirement_names("dev_requirements")
    # the lab extra is what the chapters import (transformers: chapters 10, 14, 17; triton: chapter 16), no test tools
    assert {"jupyterlab", "ipywidgets", "matplotlib", "nbdev", "ipykernel", "transformers", "triton"} <= lab
    assert {"pytest", "pytest-timeout", "hypothesis", "playwright"} <= dev
    assert not lab & {"pytest", "pytest-timeout", "hypothesis", "playwright", "nbconvert", "markdown-it-py"}, lab
    assert not (lab | dev) & RUNTIME
    setup = (ROOT / "setup.py").read_text()
    assert "'lab': lab_requirements" in setup and "'dev': dev_requirements" in setup


def test_chapters_import_only_the_lab_extra():
    "Every third-party module a notebook's code cells import is a runtime or a lab requirement, never a test tool."
    import json
    lab = requirement_names("lab_requirements") | RUNTIME
    names = {"IPython": "ipykernel", "ipywidgets": "ipywidgets", "matplotlib": "matplotlib", "nbdev": "nbdev", "fastcore": "nbdev",
             "execnb": "nbdev", "PIL": "matplotlib", "mpl_toolkits": "matplotlib", "transformers": "transformers", "triton": "triton",
             "safetensors": "safetensors", "tokenizers": "transformers", "huggingface_hub": "transformers", "yaml": "transformers",
             "numpy": "numpy", "torch": "torch", "tqdm": "tqdm", "jupyterlab": "jupyterlab", "nbformat": "jupyterlab", "packaging": "jupyterlab"}
    found = {}
    for nb in sorted((ROOT / "nbs").glob("*.ipynb")):
        src = "\n".join("".join(c["source"]) for c in json.loads(nb.read_text())["cells"] if c["cell_type"] == "code")
        for m in re.finditer(r"^\s*(?:from\s+([A-Za-z_]\w*)[\w.]*\s+import|import\s+([A-Za-z_]\w*))", src, re.M):
            top = m.group(1) or m.group(2)
            if top in sys.stdlib_module_names or top in ("transformer_lit", "__future__"): continue
            found.setdefault(top, nb.name)
    unknown = {t: nb for t, nb in found.items() if names.get(t) not in lab}
    assert not unknown, f"notebooks import modules that neither the lab extra nor the runtime requirements bring: {unknown}"


def test_make_lab_installs_the_lab_extra_and_make_test_adds_dev():
    "The Makefile's two stamps: `make lab` installs `.[lab]` only; `make test` (and pytest, docs-check) add `.[lab,dev]`."
    mk = (ROOT / "Makefile").read_text()
    rule = lambda target: re.search(rf"^{re.escape(target)}:(.*)$", mk, re.M).group(1).split()
    recipe = lambda target: mk.split(f"\n{target}:", 1)[1].split("\n\n", 1)[0]
    assert '-e ".[lab]"' in recipe("$(STAMP)") and "dev" not in recipe("$(STAMP)")
    assert '-e ".[lab,dev]"' in recipe("$(DEV)") and rule("$(DEV)") == ["$(STAMP)"]
    assert rule("lab")[0] == "$(STAMP)"
    for t in ("test", "pytest", "docs-check"): assert rule(t)[0] == "$(DEV)", t


def test_metadata_of_a_built_wheel(tmp_path):
    "The wheel's metadata: the four runtime requirements unconditionally, everything else behind an extra."
    import zipfile
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path), str(ROOT)],
                   check=True, capture_output=True)
    whl, = tmp_path.glob("transformer_lit-*.whl")
    meta = next(zipfile.ZipFile(whl).read(n).decode() for n in zipfile.ZipFile(whl).namelist() if n.endswith("METADATA"))
    reqs = [l.split(":", 1)[1].strip() for l in meta.splitlines() if l.startswith("Requires-Dist:")]
    plain = {re.split(r"[<>=!; ]", r, maxsplit=1)[0].lower() for r in reqs if "extra ==" not in r}
    assert plain == RUNTIME, plain
    extras = {l.split(":", 1)[1].strip() for l in meta.splitlines() if l.startswith("Provides-Extra:")}
    assert extras == {"lab", "dev"}
    names = set(zipfile.ZipFile(whl).namelist())                       # the data the package reads at run time ships with it
    assert {"transformer_lit/js/tl_model.js", "transformer_lit/gpu_tuning.json"} <= names
    assert not any("__pycache__" in n or n.startswith(("tests/", "nbs/")) for n in names)


def _heavy_after_import(mods):
    "In one fresh interpreter, import `mods` in turn; for each, the HEAVY modules loaded by the time it was imported."
    code = ("import sys, json, importlib; out = {}\n"
            f"for m in {list(mods)!r}: importlib.import_module('transformer_lit.' + m); out[m] = [h for h in {HEAVY!r} if h in sys.modules]\n"
            "print(json.dumps(out))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    return json.loads(out.strip().splitlines()[-1])


IMPORT_ORDER = ["attention", "multihead", "model", "flash"] + [m for m in LIBRARY_MODULES
                                                               if m not in ("attention", "multihead", "model", "flash", "flash_triton")]

def test_importing_the_library_pulls_no_plotting_or_widgets():
    """Importing a library module loads none of matplotlib, ipywidgets, IPython, Jupyter. One fresh interpreter imports
    every module in turn (one torch start-up, not one per module): a module's imports are loaded with it, so if nothing
    HEAVY is loaded after the last, no module loads any. On a failure, each module is imported alone to name the culprits."""
    after = _heavy_after_import(IMPORT_ORDER)
    if after[IMPORT_ORDER[-1]]:
        alone = {m: _heavy_after_import([m])[m] for m in IMPORT_ORDER}
        raise AssertionError(f"importing these library modules loads plotting or widget modules: { {m: h for m, h in alone.items() if h} }")
