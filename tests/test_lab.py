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
