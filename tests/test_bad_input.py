"""Every bad input to the public API gets a clear error: a table-driven suite (tests/bad_input_cases.py).

Three kinds of tests:
- `test_bad_input`: each row's call raises the row's exception, and the message holds every word of the row
  (the argument's name and the offending value, dtype or shape), so a vague message fails;
- `test_legal_edge_case`: legal edge cases (an empty batch, length 1, one key/value head, float64) work;
- coverage: every public callable of every module's `__all__` (functions, constructors, public methods) is
  targeted by a row or exempt with a reason, and so is every one of its parameters (`inspect.signature`). A
  function or a parameter added later without a row fails `test_every_callable_is_covered` /
  `test_every_parameter_is_covered`; `test_coverage_notices_additions` checks that by adding a fake function
  and a fake parameter (the experiment is run on every test run, not only once by hand).
"""
import importlib, inspect, sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
import bad_input_cases as cases                                   # noqa: E402

MODULES = ("checks attention scaling norm ffn positional long_context masks multihead blocks model decoding fast_decoding train at_scale "
           "checkpoints flash flash_triton gpu_check bench viz widgets exercises").split()


@pytest.fixture(scope="module", autouse=True)
def _setup(tmp_path_factory):
    "A pytest temporary directory for the checkpoint rows (files are made there by the rows), one torch thread (tiny tensors)."
    threads = torch.get_num_threads(); torch.set_num_threads(1)
    cases.TMP[:] = [str(tmp_path_factory.mktemp("bad_input"))]
    yield
    torch.set_num_threads(threads)


def words_missing(message, words):
    "The words (or groups of alternative spellings) that do not occur in `message`."
    return [w for w in words if not any(alt in message for alt in ((w,) if isinstance(w, str) else w))]


@pytest.mark.parametrize("row", cases.ROWS, ids=[r.id for r in cases.ROWS])
def test_bad_input(row):
    "The call raises row.exc with every word; a failure reports the actual error in one line (no torch traceback)."
    try: row.call()
    except Exception as e:                                          # compared below; anything else is the report
        got = f"{type(e).__name__}: {e}"
        if not isinstance(e, row.exc): pytest.fail(f"expected {row.exc}, got {got}", pytrace=False)
        missing = words_missing(str(e), row.words)
        if missing: pytest.fail(f"{got}\n  lacks {missing}", pytrace=False)
    else: pytest.fail(f"no error: expected {row.exc} with {list(row.words)}", pytrace=False)


@pytest.mark.parametrize("case", cases.LEGAL, ids=[c.id for c in cases.LEGAL])
def test_legal_edge_case(case):
    try: out = case.call()
    except Exception as e: pytest.fail(f"a legal input raised {type(e).__name__}: {e}", pytrace=False)
    case.check(out)


# -- coverage ---------------------------------------------------------------------------------------------------------
def _methods(cls):
    "Public methods of a class defined in transformer_lit (its own and those of transformer_lit base classes)."
    names = {}
    for base in reversed(cls.__mro__):
        if not base.__module__.startswith("transformer_lit"): continue
        for n, v in vars(base).items():
            if isinstance(v, property): continue
            if (not n.startswith("_") or n == "__call__") and (inspect.isfunction(v) or isinstance(v, (classmethod, staticmethod))):
                names[n] = getattr(cls, n)
    return names


def _params(fn, drop_first):
    "Parameter names of `fn`; the first one (self) dropped for plain methods."
    try: ps = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError): return []
    return ps[1:] if drop_first and ps and ps[0] in ("self",) else ps


def public_api(modules=MODULES):
    "{key: [parameter names]} for every public callable; key 'module.name', 'module.Class' (constructor) or 'module.Class.method'."
    api, seen = {}, {}
    for m in modules:
        mod = importlib.import_module(f"transformer_lit.{m}")
        for name in mod.__all__:
            obj = getattr(mod, name)
            if not callable(obj) or isinstance(obj, dict): continue     # constants and registries
            if id(obj) in seen: continue                                # a re-export (masks.causal_mask) is the original
            seen[id(obj)] = key = f"{m}.{name}"
            if inspect.isclass(obj):
                api[key] = _params(obj, False)
                for meth, fn in _methods(obj).items():
                    raw = inspect.getattr_static(obj, meth)
                    api[f"{key}.{meth}"] = _params(fn, not isinstance(raw, (classmethod, staticmethod)))
            else:
                api[key] = _params(obj, False)
    return api


def uncovered(api):
    "Callables and (callable, parameter) pairs that no row targets and no exemption names."
    targeted = {}
    for r in cases.ROWS:
        key, param = r.target.split(":")
        targeted.setdefault(key, set()).add(param)
    exempt_p = {}
    for (key, param) in cases.EXEMPT_PARAMS: exempt_p.setdefault(key, set()).add(param)
    missing_callables = [k for k in api if k not in targeted and k not in cases.EXEMPT_CALLABLES]
    missing_params = [(k, p) for k, ps in api.items() if k not in cases.EXEMPT_CALLABLES
                      for p in ps if p not in targeted.get(k, set()) and p not in exempt_p.get(k, set())]
    return missing_callables, missing_params


def test_every_callable_is_covered():
    missing, _ = uncovered(public_api())
    assert not missing, f"public callables with no row and no exemption: {missing}"


def test_every_parameter_is_covered():
    _, missing = uncovered(public_api())
    assert not missing, f"parameters with no row and no exemption: {missing}"


def test_tables_name_real_targets():
    "Rows and exemptions point at callables and parameters that exist (a renamed argument must not leave a stale row)."
    api = public_api()
    stale = [r.id for r in cases.ROWS if r.target.split(":")[0] not in api or r.target.split(":")[1] not in api[r.target.split(":")[0]]]
    stale += [k for k in cases.EXEMPT_CALLABLES if k not in api]
    stale += [f"{k}:{p}" for k, p in cases.EXEMPT_PARAMS if k not in api or p not in api[k]]
    stale += [f"{k}:{p} (both exempt and whole-callable exempt)" for k, p in cases.EXEMPT_PARAMS if k in cases.EXEMPT_CALLABLES]
    assert not stale, f"rows or exemptions naming no public callable/parameter: {stale}"
    assert len({r.id for r in cases.ROWS}) == len(cases.ROWS), "row ids must be unique"
    assert all(isinstance(r, str) and r for r in cases.EXEMPT_CALLABLES.values()), "every exemption needs a reason"
    assert all(isinstance(r, str) and r for r in cases.EXEMPT_PARAMS.values()), "every exemption needs a reason"


# The experiment, also run by hand on a copy of the package: adding `def new_helper(x, width=3)` to flash's
# `__all__` and a first parameter `fill_value=0` to masks.padding_mask made the two tests above fail with
#   public callables with no row and no exemption: ['flash.new_helper']
#   parameters with no row and no exemption: [('masks.padding_mask', 'fill_value'), ('flash.new_helper', 'x'), ('flash.new_helper', 'width')]
# The test below repeats it on every run with monkeypatch, so the coverage rule cannot silently stop working.
def test_coverage_notices_additions(monkeypatch):
    "The experiment: a new public function, and a new parameter of a covered one, both show up as uncovered."
    from transformer_lit import masks
    def brand_new(x, width): return x                             # a function nobody wrote a row for
    monkeypatch.setattr(masks, "brand_new", brand_new, raising=False)
    monkeypatch.setattr(masks, "__all__", [*masks.__all__, "brand_new"])
    original = masks.padding_mask
    def padding_mask(lengths, max_len=None, fill=True): return original(lengths, max_len)   # a new argument, `fill`
    monkeypatch.setattr(masks, "padding_mask", padding_mask)
    calls, params = uncovered(public_api())
    assert "masks.brand_new" in calls
    assert ("masks.padding_mask", "fill") in params
