"""Documentation checks that run without Quarto: everything around `nbdev_docs` except the render."""
import configparser, json, os, re, shutil, subprocess, sys, types
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
    assert set(html['theme']) == {'light', 'dark'}
    assert (NBS/html['css']).exists()
    for f in q['metadata-files']: assert (NBS/f).exists(), f

def _site_config():
    "The website configuration Quarto sees: _quarto.yml merged with the nbdev.yml that nbdev_docs writes."
    from nbdev.quarto import _nbdev_yml
    d = CFG['DEFAULT']
    nbdev_yml = yaml.safe_load(_nbdev_yml.format(doc_path=Path(d['doc_path']).name, **{k: d[k] for k in
                               ['title', 'description', 'branch', 'git_url', 'doc_host', 'doc_baseurl']}))
    q = yaml.safe_load((NBS/'_quarto.yml').read_text())
    assert q['project']['render'] == ['*.ipynb']   # the notebooks are the pages (nbs/models/ holds data, not pages)
    return q, {**q['website'], **nbdev_yml['website']}

def test_view_source_links_point_into_nbs():
    """Quarto's "View source" link is repo-url/blob/repo-branch/repo-subdir/<input path>; nbdev renders a copy
    of nbs/, where a chapter's input path is its file name, so repo-subdir must be nbs."""
    q, site = _site_config()
    assert 'source' in site['repo-actions']
    rel = '02_scaling.ipynb'                       # the input path as Quarto sees it in nbdev's copy of nbs/
    url = '/'.join(p.strip('/') for p in (site['repo-url'], 'blob', site['repo-branch'], site.get('repo-subdir', ''), rel) if p)
    assert url == 'https://github.com/transformer-lit/transformer_lit/blob/main/nbs/02_scaling.ipynb', url
    assert (ROOT/url.split('/blob/main/')[1]).exists()

def test_math_method_is_the_plain_katex_string():
    """`html-math-method: katex`, the string: only then does Quarto hide require.js's `define` while KaTeX loads.
    The object form (`{method: katex, url: ...}`) leaves KaTeX to register as an AMD module on every page that loads
    require.js (those with the kernel-free players), and their formulas stay raw TeX. The KaTeX release is the one
    built into pandoc, so it is fixed by the Quarto version the workflows install."""
    q, _ = _site_config()
    assert q['format']['html']['html-math-method'] == 'katex', q['format']['html']['html-math-method']
    assert 'katex@latest' not in (ROOT/'_quarto.yml').read_text()
    for wf in ('deploy.yaml', 'test.yaml'):
        steps = yaml.safe_load((ROOT/'.github'/'workflows'/wf).read_text())['jobs']
        setups = [s for job in steps.values() for s in job['steps'] if 'quarto-actions/setup' in s.get('uses', '')]
        assert setups and all(re.fullmatch(r'\d+\.\d+\.\d+', str(s.get('with', {}).get('version', ''))) for s in setups), \
            f"{wf}: Quarto (and with it KaTeX) must be a pinned version: {setups}"

def _css_rules(css):
    "selector -> declarations of a flat stylesheet (comments removed)."
    css = re.sub(r'/\*.*?\*/', '', css, flags=re.S)
    rules = {}
    for sels, body in re.findall(r'([^{}]+)\{([^}]*)\}', css):
        decls = dict((k.strip(), v.strip()) for k, _, v in (d.partition(':') for d in body.split(';') if ':' in d))
        for sel in sels.split(','): rules.setdefault(' '.join(sel.split()), {}).update(decls)
    return rules

def test_code_and_display_math_scroll_instead_of_overflowing():
    rules = _css_rules((NBS/'styles.css').read_text())
    for sel in ('div.sourceCode', 'pre', '.math.display', '.katex-display'):
        assert rules.get(sel, {}).get('overflow-x') == 'auto', f"styles.css: {sel} needs overflow-x: auto"

def test_make_docs_leaves_readme_and_root_alone(tmp_path, monkeypatch):
    """`make docs` renders the site with tools/docs.py: nbdev_docs without nbdev_readme, so README.md keeps the
    one renderer's output and no index_files/ lands at the root. Quarto itself is stubbed out here."""
    import nbdev.quarto as nq
    import docs as docs_tool
    assert '$(BIN)/python tools/docs.py' in (ROOT/'Makefile').read_text()
    readme = (ROOT/'README.md').read_bytes()
    cache = tmp_path/'_proc'; (cache/'_docs').mkdir(parents=True)
    (cache/'_docs'/'index.html').write_text('<html></html>')
    cfg = types.SimpleNamespace(doc_path=tmp_path/'out'/'_docs', config_path=tmp_path/'out', readme_nb='index.ipynb')
    cfg.config_path.mkdir()
    commands, readme_calls = [], []
    monkeypatch.setattr(nq, '_pre_docs', lambda path=None, **kw: (cache, cfg, NBS))
    monkeypatch.setattr(nq, '_sprun', commands.append)
    monkeypatch.setattr(nq, 'nbdev_readme', types.SimpleNamespace(__wrapped__=lambda **kw: readme_calls.append(kw)))
    monkeypatch.setattr(nq, 'nbdev_contributing', types.SimpleNamespace(__wrapped__=lambda **kw: None))
    cards = []
    monkeypatch.setattr(docs_tool, 'write_social_card', lambda: cards.append(1))
    docs_tool.main()
    assert cards == [1]                                                  # the social card is written before the render
    assert readme_calls == [] and commands == [f'cd "{cache}" && quarto render --no-cache'], (readme_calls, commands)
    assert (cfg.config_path/'_docs'/'index.html').exists()            # the site, moved where nbdev puts it
    assert (ROOT/'README.md').read_bytes() == readme and not (ROOT/'index_files').exists()

def test_every_page_names_the_social_card_written_from_the_index(tmp_path):
    """`image:` in _quarto.yml gives every page its social-card picture (else Quarto takes a page's first picture, a
    data URI on the players' pages); tools/docs.py writes that file from the index's first figure, and Quarto copies it."""
    import base64
    import docs as docs_tool
    q = yaml.safe_load((ROOT/'_quarto.yml').read_text())
    assert q['image'] == docs_tool.CARD and docs_tool.CARD in q['project']['resources']
    (tmp_path/'index.ipynb').write_bytes((NBS/'index.ipynb').read_bytes())
    card = docs_tool.write_social_card(tmp_path)
    cells = json.loads((NBS/'index.ipynb').read_text())['cells']
    first = next(o['data']['image/png'] for c in cells for o in c.get('outputs', []) if 'image/png' in o.get('data', {}))
    assert card.read_bytes() == base64.b64decode(''.join(first)) and card.read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'
    assert subprocess.run(['git', 'check-ignore', '-q', f'nbs/{docs_tool.CARD}'], cwd=ROOT).returncode == 0

def test_nbdev_yml_is_what_nbdev_docs_would_write():
    from nbdev.quarto import _nbdev_yml
    d = CFG['DEFAULT']
    expected = _nbdev_yml.format(doc_path=Path(d['doc_path']).name, **{k: d[k] for k in
                                 ['title', 'description', 'branch', 'git_url', 'doc_host', 'doc_baseurl']})
    assert (NBS/'nbdev.yml').read_text() == expected

DOC_URL = CFG['DEFAULT']['doc_host'] + CFG['DEFAULT']['doc_baseurl'] + '/'

def _process(nb, out):
    """The part of `nbdev_docs` before Quarto (`nbdev.serve_drv.main`, as `proc_nbs` runs it) on one notebook.

    nbdev re-executes every exported cell and every cell that imports something, in a fresh shell,
    to render the docs: such a cell must not use a variable that only a plain cell defines. It runs
    in a subprocess, so what those cells change (torch's grad mode, say) stays out of this one."""
    code = ("import sys; from pathlib import Path; from nbdev.serve_drv import main; "
            "from nbdev.processors import FilterDefaults; main((Path(sys.argv[1]), Path(sys.argv[2]), FilterDefaults))")
    r = subprocess.run([sys.executable, '-c', code, str(nb), str(out/nb.name)], cwd=ROOT,
                       capture_output=True, text=True, env={**os.environ, 'MPLBACKEND': 'Agg'})
    return r.returncode, r.stderr[-3000:]

@pytest.fixture(scope='module')
def processed(tmp_path_factory):
    """Every notebook processed as nbdev_docs processes it: name -> (returncode, stderr, processed notebook or None).

    `make test` runs tools/prerender.py first, which processes every notebook the same way (in one worker, notebook
    after notebook: the stricter order) into _proc/ and fails the run if one fails; when its stamp says _proc/ was
    made from exactly the files here, its notebooks are read instead of processing them all again."""
    import prerender
    if prerender.STAMP.exists() and prerender.STAMP.read_text() == prerender.inputs_digest(ROOT):
        return {nb.name: (0, '', json.loads((ROOT/'_proc'/nb.name).read_text())) for nb in NOTEBOOKS}
    from concurrent.futures import ThreadPoolExecutor
    out = tmp_path_factory.mktemp('proc')
    with ThreadPoolExecutor(2) as pool: results = list(pool.map(lambda nb: _process(nb, out), NOTEBOOKS))
    return {nb.name: (rc, err, json.loads((out/nb.name).read_text()) if rc == 0 else None)
            for nb, (rc, err) in zip(NOTEBOOKS, results)}

@pytest.mark.parametrize('nb', NOTEBOOKS, ids=lambda p: p.name)
def test_nbdev_processing_runs(nb, processed):
    rc, err, proc = processed[nb.name]
    assert rc == 0, err
    assert proc['cells']

def _md_texts(cell):
    "The markdown nbdev linkifies in a processed cell: a markdown cell's source, a code cell's markdown outputs."
    if cell['cell_type'] == 'markdown': yield ''.join(cell['source'])
    for o in cell.get('outputs', []):
        md = o.get('data', {}).get('text/markdown')
        if md: yield ''.join(md)

def _pandoc_id(heading):
    "The id pandoc (Quarto) gives a heading: lower case, letters first, word characters, '-', '_' and '.' kept."
    text = re.sub(r'[`*]|\[([^]]*)\]\([^)]*\)', lambda m: m.group(1) or '', heading).strip().lower()
    text = re.sub(r'^[^a-z]+', '', text)
    return re.sub(r'[^\w\s.-]', '', text).replace(' ', '-') if text else ''

def _documented_anchors(processed):
    "page -> the anchors a page has: what show_doc documents (its headings) and the markdown headings."
    from nbdev.doclinks import _nbpath2html
    anchors = {}
    for name, (rc, _, proc) in processed.items():
        page = _nbpath2html(Path(name)).as_posix()
        found = anchors.setdefault(page, set())
        for cell in (proc or {}).get('cells', []):
            for text in _md_texts(cell):
                for h in re.findall(r'^#{1,6} +(.+?) *$', text, re.M):
                    found |= {h.strip().lower(), _pandoc_id(h)}
    return anchors

_LINK = re.compile(r'\[`([^`]+)`\]\(' + re.escape(DOC_URL) + r'([\w.-]+\.html)#([^)\s]+)\)')

def test_every_doc_link_resolves(processed):
    """Every backticked name nbdev links (to this site) lands on an anchor that exists: a symbol a show_doc documents.

    A name that nbdev finds in the package index but no show_doc documents (a method, a private
    kernel) becomes a link to a missing anchor. Document it with `show_doc(Class.method)`, or write it
    without backticks."""
    anchors = _documented_anchors(processed)
    offenders = {}
    for name, (rc, _, proc) in processed.items():
        for cell in (proc or {}).get('cells', []):
            for text in _md_texts(cell):
                for sym, page, anchor in _LINK.findall(text):
                    if anchor not in anchors.get(page, ()):
                        offenders.setdefault(name, set()).add(f"`{sym}` -> {page}#{anchor}" +
                                                              ('' if page in anchors else ' (no such page)'))
    report = '\n'.join(f"  {nb}: " + ', '.join(sorted(v)) for nb, v in sorted(offenders.items()))
    assert not offenders, f"links to anchors no show_doc documents ({sum(map(len, offenders.values()))}):\n{report}"

def _exported_docstrings():
    "(qualified name, docstring) of every exported function and class and their public methods, as show_doc shows them."
    import importlib, inspect, pkgutil, transformer_lit
    for m in pkgutil.iter_modules(transformer_lit.__path__):
        if m.name.startswith('_'): continue
        mod = importlib.import_module(f'transformer_lit.{m.name}')
        for n in getattr(mod, '__all__', []):
            o = getattr(mod, n)
            if not (inspect.isfunction(o) or inspect.isclass(o)): continue
            if getattr(o, '__module__', None) != mod.__name__: continue      # re-exported from elsewhere
            yield f'{m.name}.{n}', o.__doc__
            if inspect.isclass(o):
                for k, v in vars(o).items():
                    f = getattr(v, '__func__', getattr(v, 'fget', v))
                    if not k.startswith('_') and callable(f): yield f'{m.name}.{n}.{k}', f.__doc__

def test_docstrings_keep_show_docs_italics():
    """show_doc prints a docstring as `*docstring*`: a `*` inside (or another emphasis marker) breaks the italics.

    Rendered as Markdown (markdown-it, CommonMark), the wrapped docstring must be one emphasis
    from end to end, with nothing nested and no stray asterisk."""
    from markdown_it import MarkdownIt
    md = MarkdownIt()
    offenders = []
    for name, doc in _exported_docstrings():
        if not doc: continue
        doc = ' '.join(doc.split())
        html = md.render(f'*{doc}*').strip()
        inner = re.fullmatch(r'<p><em>(.*)</em></p>', html, re.S)
        if '*' in doc or not inner or re.search(r'</?(em|strong)>', inner.group(1)):
            offenders.append(f"  {name}: {doc!r}")
    assert not offenders, f"docstrings that break show_doc's italics ({len(offenders)}); write x, times or · for *:\n" + '\n'.join(offenders)

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
    "README.md is exactly `make readme`'s rendering: the one README renderer (`make docs` does not rewrite it)."
    figures = {}
    assert (ROOT/'README.md').read_text() == render_readme.render(figures=figures), "README.md is stale: run `make readme`"
    assert figures, "the index's figures are rendered into the README"
    shipped = {p.name: p.read_bytes() for p in (ROOT/render_readme.FIGURES).glob('*.png')}
    assert shipped == figures, "readme_figures/ is stale: run `make readme`"
    for name in figures: assert f"]({render_readme.FIGURES}/{name})" in (ROOT/'README.md').read_text()

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

_EXERCISES = re.compile(r'^#{2,3} .*Exercises', re.M)

def _solution_cells(nb):
    "The cells after a notebook's Exercises heading, up to the next section: statements, starters, checks, solutions."
    cells = nbformat.read(nb, as_version=4).cells
    start = [i for i, c in enumerate(cells) if c.cell_type == 'markdown' and _EXERCISES.search(c.source)]
    out = []
    for c in cells[start[0] + 1:] if start else []:
        if c.cell_type == 'markdown' and re.match(r'#{1,2} ', c.source): break
        out.append(c)
    return out

def _exercise_visible(c):
    "The visible parts of the exercise pattern (nbs/exercises.ipynb): a statement, a starter, a check cell."
    if c.cell_type == 'markdown': return bool(re.match(r'\d+\. \*\*', c.source.strip()))   # "2. **Title.** ..."
    if re.match(r'#\|\s*hide\b', c.source): return False
    return 'raise NotImplementedError' in c.source or 'check_exercise(' in c.source

@pytest.mark.parametrize('nb', NOTEBOOKS, ids=lambda p: p.name)
def test_exercise_solutions_are_hidden_and_collapsed(nb):
    """Solutions are hidden on the site (`#| hide`) and collapsed in JupyterLab (cell metadata jupyter.source_hidden
    and, for code, outputs_hidden), which nbdev_clean keeps (settings.ini allowed_cell_metadata_keys). In the
    exercises pattern (nbs/exercises.ipynb) a visible code cell is a starter (`raise NotImplementedError`) or a
    check (`check_exercise(`), and a visible markdown cell states an exercise (no `<details>` solution in it)."""
    assert 'jupyter' in CFG['DEFAULT']['allowed_cell_metadata_keys'].split()
    offenders = []
    for c in _solution_cells(nb):
        if _exercise_visible(c): continue
        meta = c.metadata.get('jupyter', {})
        first = c.source.strip().splitlines()[0] if c.source.strip() else ''
        if c.cell_type == 'code':
            problems = [p for p, bad in (('not #| hide', not re.match(r'#\|\s*hide\b', c.source)),
                                         ('source not collapsed', not meta.get('source_hidden')),
                                         ('outputs not collapsed', not meta.get('outputs_hidden'))) if bad]
        else:
            problems = ['not collapsed'] if '<details>' in c.source and not meta.get('source_hidden') else []
        if problems: offenders.append(f"  cell {c.get('id')} ({first[:50]!r}): {', '.join(problems)}")
    assert not offenders, f"{nb.name}: solution cells shown on the site or open in JupyterLab:\n" + '\n'.join(offenders)

@pytest.mark.parametrize('nb', NOTEBOOKS, ids=lambda p: p.name)
def test_hidden_solutions_are_silent(nb):
    """A folded solution or hidden test prints nothing: JupyterLab unfolds a cell's outputs after Run All, so any
    output there (an answer, a table, "Correct") would show the learner what the starter asks for. The hidden tests
    call `check_exercise(..., quiet=True)`."""
    noisy = [f"  cell {c.get('id')} ({c.source.strip().splitlines()[0][:50]!r}): {len(c.outputs)} output(s)"
             for c in nbformat.read(nb, as_version=4).cells
             if c.cell_type == 'code' and re.match(r'#\|\s*hide\b', c.source)
             and c.metadata.get('jupyter', {}).get('outputs_hidden') and c.get('outputs')]
    assert not noisy, f"{nb.name}: hidden solution cells with saved outputs:\n" + '\n'.join(noisy)

PAGE_BUDGET_MIB = 3.0   # a page's saved outputs (pictures, the frame players' HTML): a few MB at most

@pytest.mark.parametrize('nb', NOTEBOOKS, ids=lambda p: p.name)
def test_page_weight(nb):
    "What a notebook's saved outputs add to its page (chapter 02's kernel-free explorer is the largest, about 1.7 MiB)."
    size = 0
    for c in nbformat.read(nb, as_version=4).cells:
        for o in c.get('outputs', []):
            size += sum(len(v if isinstance(v, str) else json.dumps(v)) for v in o.get('data', {}).values())
            size += len(o.get('text', ''))
    assert size / 2**20 < PAGE_BUDGET_MIB, f"{nb.name}: {size / 2**20:.2f} MiB of outputs, budget {PAGE_BUDGET_MIB} MiB"

FIG_ALT = re.compile(r'^#\|\s*fig-alt:\s*(.+)$', re.M)

@pytest.mark.parametrize('nb', NOTEBOOKS, ids=lambda p: p.name)
def test_every_figure_has_alt_text(nb):
    """Every code cell whose saved output holds a picture says what the picture shows (`#| fig-alt:`, which Quarto
    writes into the page's img alt attribute), among the directives at the top of the cell, as valid YAML."""
    missing, bad = [], []
    for c in nbformat.read(nb, as_version=4).cells:
        if c.cell_type != 'code' or not any(k.startswith('image/') for o in c.get('outputs', []) for k in o.get('data', {})):
            continue
        lines = c.source.splitlines()
        n_head = next((i for i, l in enumerate(lines) if not l.lstrip().startswith('#|')), len(lines))
        directives = lines[:n_head]
        m = FIG_ALT.search('\n'.join(directives))
        if not m: missing.append(c.get('id')); continue
        alt = yaml.safe_load(f'fig-alt: {m.group(1)}')['fig-alt']
        if not isinstance(alt, str) or len(alt.split()) < 8: bad.append((c.get('id'), alt))
    assert not missing, f"{nb.name}: cells with a picture and no `#| fig-alt:` line among their leading directives: {missing}"
    assert not bad, f"{nb.name}: alt texts too short to describe a picture (or not a string): {bad}"

def test_fig_alt_check_finds_a_missing_alt(tmp_path):
    "The check above on a notebook with one picture and no alt text, then with one: it fails, then passes."
    import base64
    png = base64.b64encode(b'\x89PNG\r\n\x1a\n').decode()
    cell = nbformat.v4.new_code_cell('plt.plot([1, 2]); plt.show()', outputs=[nbformat.v4.new_output(
        'display_data', data={'image/png': png, 'text/plain': '<Figure>'})])
    nb = nbformat.v4.new_notebook(cells=[cell])
    path = tmp_path/'x.ipynb'; nbformat.write(nb, path)
    with pytest.raises(AssertionError, match='no `#\\| fig-alt:`'): test_every_figure_has_alt_text(path)
    cell.source = '#| fig-alt: "A rising straight line from one to two, drawn as a plot."\n' + cell.source
    nbformat.write(nb, path)
    test_every_figure_has_alt_text(path)
