"""Documentation checks that run without Quarto: everything around `nbdev_docs` except the render."""
import configparser, json, os, re, shutil, subprocess, sys
from pathlib import Path
import nbformat, pytest, yaml

ROOT = Path(__file__).resolve().parent.parent
NBS = ROOT/'nbs'
NOTEBOOKS = sorted(p for p in NBS.glob('*.ipynb') if not p.name.startswith(('_', '.')))
CHAPTERS = [p for p in NOTEBOOKS if re.match(r'\d\d_', p.name)]
CFG = configparser.ConfigParser(delimiters=['=']); CFG.read(ROOT/'settings.ini')

sys.path.insert(0, str(ROOT/'tools'))
import render_readme

def sidebar_entries(node):
    "Every file named in a sidebar `contents` tree, in order."
    if isinstance(node, str): return [node]
    if isinstance(node, list): return [e for n in node for e in sidebar_entries(n)]
    if isinstance(node, dict):
        if 'href' in node: return [node['href']]
        return sidebar_entries(node.get('contents', []))
    return []

def test_there_are_chapters(): assert len(CHAPTERS) >= 1 and (NBS/'index.ipynb') in NOTEBOOKS

@pytest.mark.parametrize('nb', NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_parses_and_validates(nb):
    nbformat.validate(nbformat.read(nb, as_version=4))

def test_sidebar_lists_every_notebook_in_reading_order():
    sidebar = yaml.safe_load((NBS/'sidebar.yml').read_text())
    entries = sidebar_entries(sidebar['website']['sidebar']['contents'])
    missing_files = [e for e in entries if not (NBS/e).exists()]
    assert not missing_files, f"sidebar entries without a notebook: {missing_files}"
    assert sorted(entries) == sorted(p.name for p in NOTEBOOKS), "sidebar and nbs/ disagree"
    assert entries[0] == 'index.ipynb'
    numbered = [e for e in entries if re.match(r'\d\d_', e)]
    assert numbered == sorted(numbered), f"chapters out of reading order: {numbered}"
    assert len(entries) == len(set(entries))

@pytest.mark.parametrize('nb', NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_starts_with_title_and_summary(nb):
    cells = nbformat.read(nb, as_version=4).cells
    for c in cells:
        if c.cell_type == 'markdown': break
        # only directive cells (e.g. `#| default_exp`) may come before the title
        assert all(l.strip().startswith('#|') or not l.strip() for l in c.source.splitlines()), c.source
    lines = c.source.strip().splitlines()
    assert lines[0].startswith('# '), f"{nb.name}: first markdown cell must start with '# Title'"
    assert any(l.startswith('> ') and len(l) > 10 for l in lines[1:]), f"{nb.name}: needs a '> summary'"

@pytest.mark.parametrize('nb', CHAPTERS, ids=lambda p: p.name)
def test_chapter_is_executed_with_a_picture(nb):
    cells = nbformat.read(nb, as_version=4).cells
    outputs = [o for c in cells if c.cell_type == 'code' for o in c.get('outputs', [])]
    assert outputs, f"{nb.name} has no saved outputs: execute it (tools/run_nb.py)"
    assert any('image/png' in o.get('data', {}) or 'image/svg+xml' in o.get('data', {}) for o in outputs), \
        f"{nb.name} has no saved picture"
    errors = [o for o in outputs if o.output_type == 'error']
    assert not errors, f"{nb.name} saved an error: {errors[0].get('ename')}"

def test_quarto_configuration():
    link = NBS/'_quarto.yml'
    assert link.is_symlink() and os.readlink(link) == '../_quarto.yml', "nbs/_quarto.yml must be a relative symlink"
    q = yaml.safe_load(link.read_text())
    assert q['project']['type'] == 'website'
    html = q['format']['html']
    assert set(html['theme']) == {'light', 'dark'} and html['html-math-method'] in ('katex', 'mathjax')
    assert (NBS/html['css']).exists()
    for f in q['metadata-files']: assert (NBS/f).exists(), f

def test_nbdev_yml_is_what_nbdev_docs_would_write():
    from nbdev.quarto import _nbdev_yml
    d = CFG['DEFAULT']
    expected = _nbdev_yml.format(doc_path=Path(d['doc_path']).name, **{k: d[k] for k in
                                 ['title', 'description', 'branch', 'git_url', 'doc_host', 'doc_baseurl']})
    assert (NBS/'nbdev.yml').read_text() == expected

@pytest.mark.parametrize('nb', NOTEBOOKS, ids=lambda p: p.name)
def test_nbdev_processing_runs(nb, tmp_path):
    """The part of `nbdev_docs` before Quarto (`nbdev.serve.proc_nbs`), one notebook at a time.

    nbdev re-executes every exported cell and every cell that imports something, in a fresh shell,
    to render the docs: such a cell must not use a variable that only a plain cell defines. It runs
    in a subprocess, so what those cells change (torch's grad mode, say) stays out of this one."""
    code = ("import sys; from pathlib import Path; from nbdev.serve_drv import main; "
            "from nbdev.processors import FilterDefaults; main((Path(sys.argv[1]), Path(sys.argv[2]), FilterDefaults))")
    r = subprocess.run([sys.executable, '-c', code, str(nb), str(tmp_path/nb.name)], cwd=ROOT,
                       capture_output=True, text=True, env={**os.environ, 'MPLBACKEND': 'Agg'})
    assert r.returncode == 0, r.stderr[-3000:]
    assert json.loads((tmp_path/nb.name).read_text())['cells']

def test_readme_carries_index_headings_and_commands():
    readme = (ROOT/'README.md').read_text()
    nb = nbformat.read(NBS/'index.ipynb', as_version=4)
    md = '\n'.join(c.source for c in nb.cells if c.cell_type == 'markdown')
    headings = [l.strip() for l in md.splitlines() if re.match(r'#{1,3} ', l)]
    assert headings and all(h in readme for h in headings), [h for h in headings if h not in readme]
    for cmd in ('make lab', 'make test'): assert cmd in readme
    # the README's test command is what CI runs
    assert 'make test' in (ROOT/'.ci'/'run').read_text()

def test_readme_is_current_rendering_of_index():
    "Without Quarto, README.md must be exactly `make readme`'s rendering (nbdev_readme's is equivalent)."
    if shutil.which('quarto'): pytest.skip('with Quarto, nbdev_readme renders README.md its own way')
    assert (ROOT/'README.md').read_text() == render_readme.render(), "README.md is stale: run `make readme`"

def test_version_matches_settings():
    import transformer_lit
    assert transformer_lit.__version__ == CFG['DEFAULT']['version']

def test_pip_install_metadata():
    "setup.py reads settings.ini: name, version and requirements come from there."
    out = subprocess.run([sys.executable, 'setup.py', '--name', '--version'], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout.split()
    assert out[-2:] == [CFG['DEFAULT']['lib_name'], CFG['DEFAULT']['version']]

def test_wheel_contains_the_package(tmp_path):
    "`pip install .` builds from settings.ini: the wheel carries every exported module and the version."
    import zipfile
    subprocess.run([sys.executable, '-m', 'pip', 'wheel', '--no-deps', '--no-build-isolation', '-q', '-w', str(tmp_path), str(ROOT)],
                   check=True, capture_output=True)
    whl, = tmp_path.glob('transformer_lit-*.whl')
    assert whl.name.startswith(f"transformer_lit-{CFG['DEFAULT']['version']}-")
    names = zipfile.ZipFile(whl).namelist()
    for mod in (ROOT/'transformer_lit').glob('*.py'): assert f'transformer_lit/{mod.name}' in names
