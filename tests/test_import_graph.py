"""The package's imports run one way: each module imports only modules of earlier chapters (or its own), at load time and
at run time, and the public decoding calls show their real parameters. Read statically from the source with `ast`."""
import ast, importlib, inspect, re
from pathlib import Path
import pytest

PKG = Path(__file__).resolve().parent.parent / "transformer_lit"
MODULES = sorted(p.stem for p in PKG.glob("*.py") if p.stem not in ("__init__", "_modidx"))

# The one documented exception: the attention backend registry (appendix "attention backends") imports the FlashAttention
# modules by name, lazily, when a backend is first asked for. Checked against `lazy_backends` below, so it cannot grow unseen.
REGISTRY_EXCEPTION = {"attention": {"transformer_lit.flash", "transformer_lit.flash_triton"}}
# `importlib.import_module` with a computed name, where the name is not a module of this package: (module, function) -> why
DYNAMIC_OK = {("attention", "__missing__"): "the backend registry: names from `lazy_backends` (the exception above)",
              ("train", "stdlib_corpus"): "standard-library modules read as a text corpus"}


def notebook_of(module):
    "The notebook that exports `module` (nbdev's 'File to edit' line)."
    m = re.search(r"File to edit: \.\./nbs/([^\s]+)\.ipynb", (PKG / f"{module}.py").read_text(encoding="utf-8"))
    assert m, f"{module}.py names no notebook"
    return m.group(1)


def rank(module):
    """Chapter order: the checks appendix first (every chapter calls it in one line), then chapters 00, 01, ..., 12, 12a, 13, ...,
    then the other appendices and apparatus (viz, widgets, exercises, the GPU check, the browser model)."""
    nb = notebook_of(module)
    if nb == "appendix_checks": return (-1, "")
    m = re.match(r"(\d+)([a-z]?)_", nb)
    return (int(m.group(1)), m.group(2)) if m else (1000, "")


def _target(name):
    "The package module `name` refers to (transformer_lit.x.y -> x), or None outside the package or for the package itself."
    parts = name.split(".")
    return parts[1] if parts[0] == "transformer_lit" and len(parts) > 1 else None


def imports_of(module):
    "[(imported module, line, how)] for every import of a package module anywhere in `module`, functions included; plus computed ones."
    tree = ast.parse((PKG / f"{module}.py").read_text(encoding="utf-8"))
    found, dynamic = [], []
    funcs = {}                                                          # node -> the name of the function that holds it
    for f in ast.walk(tree):
        if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for n in ast.walk(f): funcs.setdefault(n, f.name) if n is not f else None
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if _target(a.name): found.append((_target(a.name), node.lineno, "import"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:                                              # relative: from .x import y, from . import x
                if node.module: found.append((node.module.split(".")[0], node.lineno, "from-import"))
                else: found += [(a.name, node.lineno, "from-import") for a in node.names]
            elif node.module and node.module.split(".")[0] == "transformer_lit":
                if _target(node.module): found.append((_target(node.module), node.lineno, "from-import"))
                else: found += [(a.name, node.lineno, "from-import") for a in node.names if a.name in MODULES]
        elif isinstance(node, ast.Call):
            fn = node.func
            name = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else None
            if name in ("import_module", "__import__") and node.args:
                arg = node.args[0]
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    t = _target(arg.value)
                    if t: found.append((t, node.lineno, "importlib"))
                else: dynamic.append((funcs.get(node, "<module>"), node.lineno))
    return [(t, line, how) for t, line, how in found if t != module], dynamic


def test_chapters_are_found():
    assert {"attention", "model", "decoding", "fast_decoding", "positional", "long_context", "train", "at_scale"} <= set(MODULES)
    assert rank("checks") < rank("attention") < rank("positional") < rank("long_context") < rank("model") < rank("decoding") \
        < rank("fast_decoding") < rank("train") < rank("induction") < rank("at_scale") < rank("viz")


@pytest.mark.parametrize("module", MODULES)
def test_imports_only_earlier_chapters(module):
    edges, _ = imports_of(module)
    later = [f"{module}.py:{line} {how} of {t} ({notebook_of(t)})" for t, line, how in edges
             if t in MODULES and rank(t) > rank(module)]
    assert not later, f"{module} ({notebook_of(module)}) imports a later chapter's module:\n" + "\n".join(later)


@pytest.mark.parametrize("module", MODULES)
def test_computed_imports_are_the_documented_ones(module):
    _, dynamic = imports_of(module)
    unknown = [f"{module}.py:{line} in {fn}" for fn, line in dynamic if (module, fn) not in DYNAMIC_OK]
    assert not unknown, "import_module with a computed name: " + ", ".join(unknown)


def test_registry_exception_is_only_the_backends():
    from transformer_lit.attention import lazy_backends
    assert set(lazy_backends.values()) == REGISTRY_EXCEPTION["attention"]
    assert all(rank(_target(m)) > rank("attention") for m in lazy_backends.values())   # the exception really runs upward


def test_import_graph_has_no_cycle():
    graph = {m: {t for t, _, _ in imports_of(m)[0] if t in MODULES} for m in MODULES}
    state = {}
    def visit(m, path):
        if state.get(m) == "done": return
        assert state.get(m) != "open", "import cycle: " + " -> ".join(path + [m])
        state[m] = "open"
        for t in sorted(graph[m]): visit(t, path + [m])
        state[m] = "done"
    for m in MODULES: visit(m, [])


@pytest.mark.parametrize("module", MODULES)
def test_no_module_getattr(module):
    tree = ast.parse((PKG / f"{module}.py").read_text(encoding="utf-8"))
    assert not [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in ("__getattr__", "__dir__")], \
        f"{module} defines a module-level __getattr__ (forwarding names to another module)"


def _public_callables():
    "(qualified name, callable) for the generation and decoding calls of chapters 09-11 and every public function of their modules."
    from transformer_lit.model import DecoderOnlyLM, Transformer
    out = [("DecoderOnlyLM.generate", DecoderOnlyLM.generate), ("Transformer.generate", Transformer.generate)]
    for name in ("model", "decoding", "fast_decoding"):
        mod = importlib.import_module(f"transformer_lit.{name}")
        for attr in mod.__all__:
            obj = getattr(mod, attr)
            if inspect.isfunction(obj): out.append((f"{name}.{attr}", obj))
            elif inspect.isclass(obj):
                out += [(f"{name}.{attr}.{m}", f) for m, f in vars(obj).items() if inspect.isfunction(f) and not m.startswith("_")]
    return out


@pytest.mark.parametrize("qualname,fn", _public_callables(), ids=lambda v: v if isinstance(v, str) else "")
def test_explicit_signature(qualname, fn):
    kinds = {p.kind for p in inspect.signature(fn).parameters.values()}
    assert inspect.Parameter.VAR_POSITIONAL not in kinds and inspect.Parameter.VAR_KEYWORD not in kinds, \
        f"{qualname}{inspect.signature(fn)} forwards *args/**kwargs: its options must be in its signature"


def test_generation_options_are_visible():
    from transformer_lit.model import DecoderOnlyLM
    from transformer_lit.decoding import lm_generate, seq2seq_generate, lm_beam_search
    from transformer_lit.fast_decoding import fast_generate
    def params(f): return inspect.signature(f).parameters
    assert {"greedy", "temperature", "top_k", "generator"} <= set(params(DecoderOnlyLM.generate))
    assert params(DecoderOnlyLM.generate)["greedy"].default is False
    for f in (lm_generate, fast_generate):
        assert {"greedy", "top_k", "top_p", "min_p", "attention_mask", "eos_ids", "pad_id", "streamer", "return_scores"} <= set(params(f))
    shared = {k: v.default for k, v in params(lm_generate).items() if k not in ("use_cache", "cache", "step")}
    assert shared == {k: v.default for k, v in params(fast_generate).items() if k not in ("static_cache", "compile_step")}   # one set of options
    assert {"cache", "step", "use_cache"} <= set(params(lm_generate)) and {"cache", "step"} <= set(params(seq2seq_generate))
    assert {"static_cache", "compile_step"} <= set(params(fast_generate))
    assert {"beam_size", "length_penalty", "eos_ids", "attention_mask"} <= set(params(lm_beam_search))


def test_dropped_aliases_and_lazy_loads_are_gone():
    "A fresh interpreter: the moved names import only from their chapter's module; importing a chapter loads no later one."
    import subprocess, sys
    code = ("import sys, importlib, torch; import transformer_lit.model as m; "
            "assert 'transformer_lit.decoding' not in sys.modules and 'transformer_lit.fast_decoding' not in sys.modules; "
            "lm = m.DecoderOnlyLM(m.TransformerConfig(vocab_size=20, d_model=16, n_heads=2, n_layers=1, d_ff=32, max_len=16)).eval(); "
            "lm.generate(torch.zeros(1, 2, dtype=torch.long), 3, greedy=True); "
            "assert 'transformer_lit.decoding' not in sys.modules; "
            "assert not hasattr(lm, 'new_cache') and not hasattr(lm, 'beam_search'); "
            "import transformer_lit.decoding as d; d.lm_generate(lm, torch.zeros(1, 2, dtype=torch.long), 3, greedy=True); "
            "assert 'transformer_lit.fast_decoding' not in sys.modules; "
            "import transformer_lit.train as t; assert 'transformer_lit.at_scale' not in sys.modules; "
            "gone = [(m, n) for m, ns in [(m, ['StaticCache', 'DecoderCache', 'sample_next', 'beam_search', 'filter_logits']), "
            "(d, ['StaticCache', '_decode_step', '_fast_path_ok']), (t, ['main', 'launch', 'train_job'])] for n in ns if hasattr(m, n)]; "
            "assert not gone, gone")
    subprocess.run([sys.executable, "-c", code], check=True)
