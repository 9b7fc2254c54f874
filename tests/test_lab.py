"""The course as JupyterLab shows it, without a browser: the cells a learner need not read are folded,
the start page is the index, the site's configuration files are out of the file browser."""
import subprocess, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
from fold_apparatus import is_apparatus  # noqa: E402


def code(src): return {"cell_type": "code", "source": src, "metadata": {}}


def test_what_counts_as_apparatus():
    assert is_apparatus(code("#| default_exp attention"))
    assert is_apparatus(code("#| hide\nfrom fastcore.test import test_eq, test_fail\nimport torch"))
    assert is_apparatus(code("#|hide\n%matplotlib inline\nimport matplotlib.pyplot as plt"))
    assert not is_apparatus(code("#| hide\nimport torch\nx = torch.zeros(3)"))      # a hidden test, not imports
    assert not is_apparatus(code("#| export\nimport torch"))                         # exported code is read
    assert not is_apparatus(code("from fastcore.test import test_eq"))                # visible: the chapter shows it
    assert not is_apparatus({"cell_type": "markdown", "source": "#| hide\nimport x", "metadata": {}})


def test_every_chapter_folds_its_apparatus():
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "fold_apparatus.py"), "--check"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_lab_starts_on_the_index_and_hides_the_site_configuration():
    from traitlets.config import Config
    c = Config()
    exec(compile((ROOT / "tools" / "lab" / "jupyter_server_config.py").read_text(), "cfg", "exec"),
         {"get_config": lambda: c})
    assert c.LabApp.default_url == "/lab/tree/index.ipynb" and (ROOT / "nbs" / "index.ipynb").exists()
    hidden = set(c.ContentsManager.hide_globs)
    site_files = {p.name for p in (ROOT / "nbs").iterdir() if p.suffix in (".yml", ".css")}
    assert site_files and site_files <= hidden, site_files - hidden


def _lab_namespace():
    from traitlets.config import Config
    c = Config()
    ns = {"get_config": lambda: c, "__file__": str(ROOT / "tools" / "lab" / "jupyter_server_config.py")}
    exec(compile((ROOT / "tools" / "lab" / "jupyter_server_config.py").read_text(), "cfg", "exec"), ns)
    return c, ns


def test_kernels_stop_when_their_tab_closes_or_after_an_idle_hour():
    """A learner who opens chapter after chapter does not pile up kernels: closing a tab shuts its kernel down, and the
    server culls any kernel idle for an hour (connected or not, never one that is running a cell)."""
    import json
    from jupyter_server.services.kernels.kernelmanager import MappingKernelManager
    c, _ = _lab_namespace()
    km = MappingKernelManager(config=c)                   # the configuration applies to the server's kernel manager
    assert km.cull_idle_timeout == 3600 and 0 < km.cull_interval <= km.cull_idle_timeout
    assert km.cull_connected is True and km.cull_busy is False
    overrides = json.loads((ROOT / "tools" / "lab" / "overrides.json").read_text())
    assert overrides["@jupyterlab/notebook-extension:tracker"]["kernelShutdown"] is True
    # -- the setting exists under that name in the JupyterLab installed here
    import jupyterlab
    schema = Path(sys.prefix) / "share" / "jupyter" / "lab" / "schemas" / "@jupyterlab" / "notebook-extension" / "tracker.json"
    assert "kernelShutdown" in json.loads(schema.read_text())["properties"], jupyterlab.__version__


def _nb(cells):
    return {"nbformat": 4, "nbformat_minor": 5, "metadata": {"kernelspec": {"name": "python3", "display_name": "python3",
            "language": "python"}}, "cells": cells}


def _code(id_, src, outputs):
    return {"cell_type": "code", "id": id_, "source": src, "metadata": {}, "execution_count": None, "outputs": outputs}


def _out(text):
    return {"output_type": "stream", "name": "stdout", "text": text}


def test_save_hook_keeps_the_files_outputs_for_unchanged_code(tmp_path):
    """Run All and save on unchanged code writes the file as it was (the screen keeps the new outputs); from the first
    cell the learner changed, the learner's outputs are saved, since they may follow from the change."""
    import json
    from jupyter_server.services.contents.filemanager import FileContentsManager
    _, ns = _lab_namespace()
    hook = ns["nbdev_clean_jupyter"]
    repo = tmp_path / "repo"
    (repo / "nbs").mkdir(parents=True)
    (repo / "settings.ini").write_bytes((ROOT / "settings.ini").read_bytes())
    disk = _nb([_code("a", "import time\nt = time.time()", []),
                _code("b", "print(f'took {time.time() - t:.2f} s')", [_out("took 0.31 s\n")]),
                {"cell_type": "markdown", "id": "m", "source": "text", "metadata": {}},
                _code("c", "print(torch.randn(2))", [_out("tensor([0.1, 0.2])\n")]),
                _code("d", "print(1 + 1)", [_out("2\n")])])
    (repo / "nbs" / "x.ipynb").write_text(json.dumps(disk))
    cm = FileContentsManager(root_dir=str(repo / "nbs"))

    def save(cells):
        model = {"type": "notebook", "content": _nb(cells)}
        hook(model=model, path="x.ipynb", contents_manager=cm)
        return {c["id"]: c.get("outputs") for c in model["content"]["cells"]}

    # -- Run All on the chapter as it is: new timings and samples on screen, the file's outputs saved
    run = [_code("a", "import time\nt = time.time()", []), _code("b", "print(f'took {time.time() - t:.2f} s')", [_out("took 0.29 s\n")]),
           {"cell_type": "markdown", "id": "m", "source": "text", "metadata": {}},
           _code("c", "print(torch.randn(2))", [_out("tensor([0.7, 0.9])\n")]), _code("d", "print(1 + 1)", [_out("2\n")])]
    saved = save(json.loads(json.dumps(run)))
    assert saved == {"a": [], "b": [_out("took 0.31 s\n")], "m": None, "c": [_out("tensor([0.1, 0.2])\n")], "d": [_out("2\n")]}
    # -- the learner edits cell c: c and everything below keep the learner's outputs, the cells above the file's
    edited = json.loads(json.dumps(run))
    edited[3]["source"] = "print(torch.randn(3))"
    edited[3]["outputs"] = [_out("tensor([0.7, 0.9, 0.4])\n")]
    edited[4]["outputs"] = [_out("2\n")]
    saved = save(edited)
    assert saved["b"] == [_out("took 0.31 s\n")] and saved["c"] == [_out("tensor([0.7, 0.9, 0.4])\n")]
    # -- a cell inserted at the top: nothing below it is taken from the file
    inserted = [_code("new", "x = 1", [])] + json.loads(json.dumps(run))
    saved = save(inserted)
    assert saved["b"] == [_out("took 0.29 s\n")] and saved["c"] == [_out("tensor([0.7, 0.9])\n")]
