"""The published site in a browser: every formula typeset, no console error, nothing wider than a phone.

Headless Chromium (the system one, /usr/bin/chromium) loads pages from a local HTTP server. The tests have no
network: requests to the CDNs the pages use are answered from local copies of the same npm packages (KaTeX, RequireJS,
jQuery), installed once by npm into a cache (~/.cache/transformer_lit/web-libs, or $TL_WEB_LIBS); any other request
leaving localhost is refused and named in the failure message if a page depends on it.

- The rendered site (`_docs/`, written by `make docs`): every page. Quarto cannot be installed on every machine;
  where neither `_docs/index.html` nor the `quarto` command exists, that test is skipped with a message saying so
  (the GitHub workflow installs Quarto, renders the site and runs it with TL_REQUIRE_SITE=1, which turns the skip
  into a failure).
- Without Quarto: a page built the way Quarto builds one of the course's pages that carry a kernel-free player
  (require.js in the head, then the KaTeX block pandoc writes, with the guard Quarto adds for the math method
  `_quarto.yml` sets), so the load order that left formulas raw online runs for real here; the same page without
  the guard must fail the same check (the check sees the failure it exists for). And the site's stylesheet on the
  index's chapter table and chapter 02's longest inline link at phone width.
"""
import functools
import hashlib
import http.server
import json
import os
import re
import shutil
import socket
import subprocess
import threading
import urllib.parse
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
NBS = ROOT / "nbs"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
# -- the libraries the pages fetch from CDNs, as npm packages. KaTeX: the release each page asks for (pandoc's);
#    RequireJS and jQuery: the versions Quarto's Jupyter HTML dependencies name.
REQUIREJS, JQUERY = "2.3.6", "3.5.1"
KATEX_FOR_LOCAL_PAGE = "0.16.22"
PHONE, DESKTOP = 390, 1280
# raw TeX in visible text: a delimiter or a control word pandoc leaves when nothing typesets it
RAW_TEX = re.compile(r"\\\(|\\\)|\\\[|\\\]|\$\$|\\(?:frac|sqrt|mathrm|mathbf|sum|top|cdot|in|le|ge|operatorname|text|begin)\b")


def on_ci():
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def need(condition, message):
    "Skip with `message` where a tool is missing; on CI (or with TL_REQUIRE_SITE for the site) fail instead."
    if condition:
        return
    if on_ci():
        pytest.fail(message)
    pytest.skip(message)


# ----------------------------------------------------------------------------------------------------------
# local copies of the CDN libraries


def web_libs(katex_version):
    "node_modules holding katex@katex_version, requirejs and jquery (npm install into a cache, once per set)."
    key = f"katex-{katex_version}_requirejs-{REQUIREJS}_jquery-{JQUERY}"
    base = Path(os.environ.get("TL_WEB_LIBS") or Path.home() / ".cache" / "transformer_lit" / "web-libs") / key
    mods = base / "node_modules"
    if not (mods / "katex" / "dist" / "katex.min.js").exists():
        npm = shutil.which("npm")
        need(npm, "npm is not installed: the browser tests serve KaTeX, RequireJS and jQuery from the npm packages "
                  "(apt-get install -y npm)")
        base.mkdir(parents=True, exist_ok=True)
        r = subprocess.run([npm, "install", "--no-save", "--no-audit", "--no-fund", "--prefix", str(base),
                            f"katex@{katex_version}", f"requirejs@{REQUIREJS}", f"jquery@{JQUERY}"],
                           capture_output=True, text=True, timeout=300)
        need(r.returncode == 0, f"npm could not install the page libraries into {base}:\n{r.stderr[-2000:]}")
    return mods


def cdn_file(url, mods):
    """The local file that stands for a CDN URL the pages load, or None (not a library the tests serve).
    katex@V/dist/<path> on jsDelivr; requirejs and jQuery at the jsDelivr and cdnjs addresses Quarto has used."""
    u = urllib.parse.urlsplit(url)
    m = re.search(r"/katex@[^/]+/dist/(.+)$", u.path)
    if m:
        return mods / "katex" / "dist" / m.group(1)
    if re.search(r"/(requirejs@[^/]+|require\.js/[^/]+)/require(\.min)?\.js$", u.path):
        return mods / "requirejs" / "require.js"
    if re.search(r"/jquery(@|/)[^/]+(/dist)?/jquery\.min\.js$", u.path):
        return mods / "jquery" / "dist" / "jquery.min.js"
    return None


def strip_unmatched_integrity(html_text, mods):
    """Drop the `integrity` attribute of a script whose local copy is not the CDN's bytes (jsDelivr minifies
    require.js itself; npm ships it unminified). A copy with the same bytes keeps its check (jQuery)."""
    def fix(m):
        tag = m.group(0)
        src = re.search(r'src="([^"]+)"', tag)
        local = cdn_file(src.group(1), mods) if src else None
        if not local or not local.exists():
            return tag
        digest = "sha384-" + __import__("base64").b64encode(hashlib.sha384(local.read_bytes()).digest()).decode()
        hashes = re.search(r'integrity="([^"]*)"', tag).group(1).split()
        return tag if digest in hashes else re.sub(r'\s*integrity="[^"]*"', "", tag)
    return re.sub(r"<script\b[^>]*\bintegrity=\"[^\"]*\"[^>]*>", fix, html_text)


class _Handler(http.server.SimpleHTTPRequestHandler):
    mods = None

    def log_message(self, *args):
        pass

    def send_head(self):
        path = Path(self.translate_path(self.path))
        if path.is_dir():
            path = path / "index.html"
        if path.suffix == ".html" and path.exists():
            body = strip_unmatched_integrity(path.read_text(encoding="utf-8"), self.mods).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            import io
            return io.BytesIO(body)
        return super().send_head()


class Server:
    "An HTTP server on 127.0.0.1 for `directory`, in a thread; a context manager giving its base URL."
    def __init__(self, directory, mods):
        handler = type("H", (_Handler,), {"mods": mods})
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=str(directory)))

    def __enter__(self):
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


# ----------------------------------------------------------------------------------------------------------
# one page in the browser

PAGE_REPORT = """() => {
  const hidden = el => { for (let e = el; e; e = e.parentElement) { const s = getComputedStyle(e);
                         if (s.display === 'none' || s.visibility === 'hidden') return true; } return false; };
  // visible prose: no code, no scripts, no KaTeX's own MathML copy of the source
  const skip = 'pre, code, script, style, .katex-mathml, annotation, textarea';
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const texts = [];
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const el = n.parentElement;
    if (!el || el.closest(skip) || hidden(el) || !n.data.trim()) continue;
    texts.push(n.data);
  }
  const untypeset = [...document.querySelectorAll('span.math')]
                      .filter(e => !e.querySelector('.katex') || e.querySelector('.katex-error'))
                      .map(e => e.textContent.slice(0, 80));
  return {texts, untypeset, typeset: [...document.querySelectorAll('span.math')]
                      .filter(e => e.querySelector('.katex') && !e.querySelector('.katex-error')).length,
          maths: document.querySelectorAll('span.math').length,
          width: document.documentElement.scrollWidth,
          og_image: (document.querySelector('meta[property="og:image"]') || {}).content || null,
          twitter_image: (document.querySelector('meta[name="twitter:image"]') || {}).content || null};
}"""

# the last column of every table can be seen: inside the viewport, or inside an ancestor that scrolls sideways
CLIPPED_TABLES = """() => [...document.querySelectorAll('main table')].filter(t => {
    const cells = [...t.querySelectorAll('tr')].map(r => r.lastElementChild).filter(Boolean);
    if (!cells.length) return false;
    const right = Math.max(...cells.map(c => c.getBoundingClientRect().right));
    for (let e = t; e && e !== document.body; e = e.parentElement) {
      const s = getComputedStyle(e);
      if (['auto', 'scroll'].includes(s.overflowX)) return false;                 // the reader can scroll to it
      if (['hidden', 'clip'].includes(s.overflowX) && right > e.getBoundingClientRect().right + 1) return true;
    }
    return right > document.documentElement.clientWidth + 1;
  }).map(t => t.innerText.slice(0, 60))"""

# words broken across lines inside table cells (a chapter name split mid-word)
BROKEN_WORDS = """() => {
  const out = [];
  for (const td of document.querySelectorAll('main table td, main table th')) {
    const walker = document.createTreeWalker(td, NodeFilter.SHOW_TEXT);
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
      for (const m of n.data.matchAll(/[A-Za-z][A-Za-z_]{3,}/g)) {
        const r = document.createRange(); r.setStart(n, m.index); r.setEnd(n, m.index + m[0].length);
        const tops = new Set([...r.getClientRects()].filter(b => b.width > 0).map(b => Math.round(b.top)));
        if (tops.size > 1) out.push(m[0]);
      }
    }
  }
  return out;
}"""


def browse(pages, mods, width=DESKTOP, extra=()):
    """Open each URL in headless Chromium with the CDN libraries answered locally; return {url: report}.

    A report holds console errors, page errors, requests refused (off localhost, not a served library), failed
    requests, the visible text's raw TeX, untypeset math, the page width and the social-card image URLs."""
    from playwright.sync_api import sync_playwright
    reports = {}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            for url in pages:
                page = browser.new_page(viewport={"width": width, "height": 900})
                rep = {"console": [], "pageerror": [], "refused": [], "failed": []}

                def route(r, rep=rep):
                    req_url = r.request.url
                    host = urllib.parse.urlsplit(req_url).hostname
                    if host in ("127.0.0.1", "localhost") or req_url.startswith("data:"):
                        return r.continue_()
                    local = cdn_file(req_url, mods)
                    if local is not None and local.exists():
                        return r.fulfill(path=str(local))
                    rep["refused"].append(req_url)
                    return r.abort()
                page.route("**/*", route)
                page.on("console", lambda m, rep=rep: m.type == "error" and rep["console"].append(
                    (m.text, (m.location or {}).get("url", ""))))
                page.on("pageerror", lambda e, rep=rep: rep["pageerror"].append(str(e)))
                page.on("requestfailed", lambda q, rep=rep: rep["failed"].append(q.url))
                page.goto(url, wait_until="load")
                page.wait_for_timeout(300)               # DOMContentLoaded handlers (KaTeX's render) have run by now
                rep.update(page.evaluate(PAGE_REPORT))
                for name, script in extra:
                    rep[name] = page.evaluate(script)
                rep["raw_tex"] = sorted({m.group(0) for t in rep.pop("texts") for m in RAW_TEX.finditer(t)})
                reports[url] = rep
                page.close()
        finally:
            browser.close()
    return reports


def problems(rep):
    "What is wrong with one page's report: console errors (not those of a request the test itself refused), raw TeX."
    refused = set(rep["refused"])
    errors = [text for text, where in rep["console"] if where not in refused and "net::ERR_FAILED" not in text]
    errors += [f"(a request the test refused failed) {u}" for u in rep["failed"] if u not in refused]
    out = [f"console error: {e}" for e in errors] + [f"page error: {e}" for e in rep["pageerror"]]
    if rep["untypeset"]:
        out.append(f"{len(rep['untypeset'])} of {rep['maths']} formulas not typeset, e.g. {rep['untypeset'][:3]}")
    if rep["raw_tex"]:
        out.append(f"raw TeX in the visible text: {rep['raw_tex'][:8]}")
    if refused and out:
        out.append(f"(requests off localhost refused: {sorted(refused)[:5]})")
    return out


def require_browser():
    need(os.path.exists(CHROMIUM), f"{CHROMIUM} not found (apt-get install -y chromium)")


# ----------------------------------------------------------------------------------------------------------
# without Quarto: the page a player's chapter becomes, with the math method _quarto.yml sets

PANDOC_KATEX = """<script defer=""
  src="{url}katex.min.js"></script>
  <script>document.addEventListener("DOMContentLoaded", function () {{
 var mathElements = document.getElementsByClassName("math");
 var macros = [];
 for (var i = 0; i < mathElements.length; i++) {{
  var texText = mathElements[i].firstChild;
  if (mathElements[i].tagName == "SPAN") {{
   katex.render(texText.data, mathElements[i], {{
    displayMode: mathElements[i].classList.contains('display'),
    throwOnError: false,
    macros: macros,
    fleqn: false
   }});
}}}}}});
  </script>
  <link rel="stylesheet"
  href="{url}katex.min.css" />"""

# what Quarto writes into the head of a page whose notebook has an HTML output with a script
QUARTO_REQUIRE = f"""<script src="https://cdn.jsdelivr.net/npm/requirejs@{REQUIREJS}/require.min.js" integrity="sha384-c9c+LnTbwQ3aujuU7ULEPVvgLs+Fn6fJUvIGTsuu1ZcCf11fiEubah0ttpca4ntM sha384-6V1/AdqZRWk1KAlWbKBlGhN7VG4iE/yAZcO6NZPMF8od0vukrvr0tg4qY6NSrItx" crossorigin="anonymous"></script>
<script src="https://cdn.jsdelivr.net/npm/jquery@{JQUERY}/dist/jquery.min.js" integrity="sha384-ZvpUoO/+PpLXR1lu4jmpXWu80pZlYUAfxl5NsBMWOEPSjUn/6Z/hRTt8+pR6L4N2" crossorigin="anonymous" data-relocate-top="true"></script>
<script type="application/javascript">define('jquery', [],function() {{return window.jQuery;}})</script>"""


def math_block(method):
    """The KaTeX block of a page for `html-math-method: method`, after Quarto's post-processing: Quarto guards KaTeX
    against require.js (no `defer`; `define` hidden while katex.min.js runs, put back before the stylesheet) only for
    the plain string `katex`."""
    if isinstance(method, dict):
        return PANDOC_KATEX.format(url=method["url"])
    assert method == "katex", method
    block = PANDOC_KATEX.format(url=f"https://cdn.jsdelivr.net/npm/katex@{KATEX_FOR_LOCAL_PAGE}/dist/")
    block = block.replace('<script defer=""\n  src=', '<script>window.backupDefine = window.define; window.define = undefined;</script>'
                          '<script src=')
    return block.replace("<link rel=", "<script>window.define = window.backupDefine; window.backupDefine = undefined;</script><link rel=")


def player_page(method, require_first=True):
    "A page like a player's chapter: require.js, the KaTeX block, prose with inline and display math, a FramePlayer."
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib.figure import Figure
    from transformer_lit.viz import FramePlayer

    def render(k):
        fig = Figure(figsize=(1.5, 1), dpi=40)
        fig.subplots().plot(range(k + 2))
        return fig
    player = FramePlayer({"k": [1, 2]}, render).html()
    head = [QUARTO_REQUIRE, math_block(method)] if require_first else [math_block(method), QUARTO_REQUIRE]
    return ("<!doctype html><html><head><meta charset='utf-8'>" + "\n".join(head) + "</head><body><main>"
            # pandoc's KaTeX output: the TeX without delimiters inside span.math
            "<p>Scores <span class=\"math inline\">q\\cdot k/\\sqrt{d_k}</span> have variance "
            "<span class=\"math inline\">1</span>.</p>"
            "<p><span class=\"math display\">\\mathrm{softmax}(s)_i = \\frac{e^{s_i}}{\\sum_j e^{s_j}}</span></p>"
            f"{player}</main></body></html>")


def configured_math_method():
    return yaml.safe_load((ROOT / "_quarto.yml").read_text())["format"]["html"]["html-math-method"]


@pytest.mark.parametrize("require_first", [True, False], ids=["require.js-first", "katex-first"])
def test_player_page_typesets_its_formulas(tmp_path, require_first):
    """The course's math method on a page that loads require.js: every formula typeset, no console error."""
    require_browser()
    mods = web_libs(KATEX_FOR_LOCAL_PAGE)
    (tmp_path / "page.html").write_text(player_page(configured_math_method(), require_first), encoding="utf-8")
    with Server(tmp_path, mods) as base:
        rep, = browse([f"{base}/page.html"], mods).values()
    assert rep["maths"] == 3 and rep["typeset"] == 3, rep
    assert problems(rep) == [], problems(rep)


def test_the_check_sees_katex_captured_by_require_js(tmp_path):
    """The object form (`{method: katex, url: ...}`, no guard): KaTeX registers with require.js, `katex` is undefined
    and the formulas stay raw. The check must report exactly that, or it could not have caught it."""
    require_browser()
    mods = web_libs(KATEX_FOR_LOCAL_PAGE)
    unguarded = {"method": "katex", "url": f"https://cdn.jsdelivr.net/npm/katex@{KATEX_FOR_LOCAL_PAGE}/dist/"}
    (tmp_path / "page.html").write_text(player_page(unguarded), encoding="utf-8")
    with Server(tmp_path, mods) as base:
        rep, = browse([f"{base}/page.html"], mods).values()
    found = problems(rep)
    assert any("katex is not defined" in p for p in found), found
    assert any("3 of 3 formulas not typeset" in p for p in found) and rep["raw_tex"], found


def _markdown_cell_html(nb_name, pattern):
    "The HTML (markdown-it, GFM tables) of the first markdown cell of nbs/nb_name whose source matches `pattern`."
    from markdown_it import MarkdownIt
    cells = json.loads((NBS / nb_name).read_text(encoding="utf-8"))["cells"]
    src = next("".join(c["source"]) for c in cells if c["cell_type"] == "markdown" and re.search(pattern, "".join(c["source"])))
    return MarkdownIt("commonmark").enable("table").render(src)


def test_stylesheet_keeps_tables_and_long_code_within_a_phone(tmp_path):
    """nbs/styles.css on the index's chapter table and chapter 02's longest inline code link, as the site's pages
    hold them: at 390 px the page is no wider than the screen (a wide table scrolls inside itself, a long code name
    wraps), every table's last column can be reached, and at 1,280 px no chapter name breaks inside a word."""
    require_browser()
    mods = web_libs(KATEX_FOR_LOCAL_PAGE)
    body = (_markdown_cell_html("index.ipynb", r"^## Chapters") +
            _markdown_cell_html("02_scaling.ipynb", r"\[`torch\.nn\.functional\.scaled_dot_product_attention`\]"))
    # a narrow main column, like Quarto's at these widths, a table under an output that hides overflow, and a theme
    # rule of higher specificity than the site's that would break words anywhere in table links and code
    (tmp_path / "styles.css").write_bytes((NBS / "styles.css").read_bytes())
    (tmp_path / "page.html").write_text(
        "<!doctype html><html><head><meta charset='utf-8'><meta name='viewport' content='width=device-width'>"
        "<link rel='stylesheet' href='styles.css'><style>body{margin:0;font:16px sans-serif} main{margin:0 12px;"
        "max-width:860px} .cell-output-display{overflow-x:hidden} td a:not(.x), td code:not(.x){word-break:break-all}"
        "</style></head><body><main>" + body +
        "<div class='cell-output-display'><table><tr>" + "".join(f"<td>column_{i}_of_a_wide_mapping</td>" for i in range(8)) +
        "</tr></table></div></main></body></html>", encoding="utf-8")
    with Server(tmp_path, mods) as base:
        url = f"{base}/page.html"
        phone = browse([url], mods, width=PHONE, extra=[("clipped", CLIPPED_TABLES)])[url]
        desk = browse([url], mods, width=DESKTOP, extra=[("broken", BROKEN_WORDS)])[url]
    assert phone["width"] <= PHONE, f"at {PHONE} px the page lays out {phone['width']} px wide"
    assert phone["clipped"] == [], phone["clipped"]
    assert desk["broken"] == [], f"words broken across lines in table cells at {DESKTOP} px: {desk['broken']}"
    assert phone["pageerror"] == [] and desk["pageerror"] == []   # (its markdown's math is not typeset here)


# ----------------------------------------------------------------------------------------------------------
# the rendered site


@pytest.fixture(scope="module")
def site():
    "The rendered site's directory: $TL_SITE_DIR, or _docs/ (rendered now with tools/docs.py when Quarto is installed)."
    require_browser()
    strict = os.environ.get("TL_REQUIRE_SITE", "").strip().lower() not in ("", "0", "false", "no")
    d = Path(os.environ.get("TL_SITE_DIR") or ROOT / "_docs")
    if not (d / "index.html").exists():
        if shutil.which("quarto") is None:
            msg = (f"no rendered site at {d} and Quarto is not installed, so the site cannot be rendered here; "
                   "the GitHub workflow renders it and runs this test (install Quarto and run `make docs` to run it locally)")
            if strict:
                pytest.fail(msg)
            pytest.skip(msg)
        subprocess.run([str(Path(os.sys.executable)), "tools/docs.py"], cwd=ROOT, check=True, timeout=1200)
    return d


def site_pages(d):
    return sorted(p for p in d.glob("*.html") if p.name != "404.html")


def test_every_page_typesets_its_formulas_without_console_errors(site):
    pages = site_pages(site)
    assert len(pages) >= len([p for p in NBS.glob("*.ipynb") if not p.name.startswith("_")]), [p.name for p in pages]
    html = {p: p.read_text(encoding="utf-8") for p in pages}
    versions = {m for t in html.values() for m in re.findall(r"/npm/katex@([^/]+)/dist/", t)}
    assert len(versions) == 1, f"pages ask for KaTeX releases {versions}"
    mods = web_libs(versions.pop())
    with Server(site, mods) as base:
        reports = browse([f"{base}/{p.name}" for p in pages], mods)
    bad = {url.rsplit("/", 1)[1]: problems(rep) for url, rep in reports.items() if problems(rep)}
    assert not bad, "\n".join(f"{name}: {'; '.join(ps)}" for name, ps in bad.items())
    assert sum(r["typeset"] for r in reports.values()) > 0


def test_every_page_fits_a_phone_and_shows_every_table_column(site):
    mods = web_libs(re.search(r"/npm/katex@([^/]+)/dist/", (site / "02_scaling.html").read_text(encoding="utf-8")).group(1))
    pages = site_pages(site)
    with Server(site, mods) as base:
        phone = browse([f"{base}/{p.name}" for p in pages], mods, width=PHONE, extra=[("clipped", CLIPPED_TABLES)])
        index = browse([f"{base}/index.html"], mods, width=DESKTOP, extra=[("broken", BROKEN_WORDS)])
    wide = {u.rsplit("/", 1)[1]: r["width"] for u, r in phone.items() if r["width"] > PHONE}
    assert not wide, f"pages wider than a {PHONE} px screen: {wide}"
    clipped = {u.rsplit("/", 1)[1]: r["clipped"] for u, r in phone.items() if r["clipped"]}
    assert not clipped, f"tables whose last column cannot be reached: {clipped}"
    broken, = [r["broken"] for r in index.values()]
    assert broken == [], f"the index's table cells break words at {DESKTOP} px: {broken}"


def test_social_cards_name_an_image_file(site):
    "og:image and twitter:image are URLs of an image file of the site, never a data URI glued to the site's URL."
    bad = {}
    for p in site_pages(site):
        t = p.read_text(encoding="utf-8")
        for prop in re.findall(r'<meta (?:property|name)="(?:og|twitter):image" content="([^"]*)"', t):
            if "data:" in prop or not re.search(r"\.(png|jpe?g|webp|gif)$", prop):
                bad[p.name] = prop[:100]
            elif not (site / prop.rsplit("/", 1)[1]).exists():
                bad[p.name] = f"{prop} (no such file in the site)"
    assert not bad, bad


def test_browser_model_runs_on_the_rendered_site(site):
    """The front page's and chapter 14's browser model on the rendered site: Quarto copied models/*/web/ beside the
    pages (the `resources` of _quarto.yml), and pressing the button loads the model and shows the next-token bars."""
    for page_name in ("index.html", "14_checkpoints.html"):
        assert 'class="tl-web"' in (site / page_name).read_text(encoding="utf-8"), page_name
    web = site / "models" / "sotu-llama" / "web"
    assert all((web / f).is_file() for f in ("manifest.json", "weights.bin", "tl_model.js")), sorted(site.glob("models/*/*/*"))
    from playwright.sync_api import sync_playwright
    with Server(site, {}) as base, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            for page_name in ("index.html", "14_checkpoints.html"):
                page = browser.new_page(viewport={"width": PHONE, "height": 900})
                errors = []
                page.on("pageerror", lambda e: errors.append(str(e)))
                page.route("**/*", lambda r: r.continue_() if urllib.parse.urlsplit(r.request.url).hostname == "127.0.0.1" else r.abort())
                page.goto(f"{base}/{page_name}", wait_until="load")
                w = page.locator(".tl-web").first
                w.locator(".tlw-load").click()
                try:
                    page.wait_for_function("el => el.dataset.state === 'ready' && el.querySelectorAll('.tlw-bars li').length > 0",
                                           arg=w.element_handle(), timeout=60_000)
                except Exception:
                    raise AssertionError(f"{page_name}: the model did not load: {w.locator('.tlw-status').inner_text()!r} {errors}")
                assert errors == [], (page_name, errors)
                page.close()
        finally:
            browser.close()
