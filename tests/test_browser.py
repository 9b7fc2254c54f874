"""End to end: the course in a real JupyterLab, driven by headless Chromium through Playwright.

Starts JupyterLab as `make lab` does (from nbs/, with tools/lab's configuration) on a free localhost port with a
random token, in a temporary git repository with the course's layout (the repository's nbs/ is never modified).
Every notebook the browser runs is small, so no test's time follows a chapter's:
- chapter 02 as committed is opened and saved unchanged (nothing runs): the file must stay as committed;
- tests/fixtures/run_all.ipynb, a few cells with each kind of output a chapter saves (a timing, an unseeded sample,
  a plot of random points, a kernel-free player, a live widget), goes through a learner's loop: Run All, move the
  controls, an autosave, Ctrl+S, `git status` clean, reopen without error text;
- the cells of chapter 02 that build its live explorer (the chapter's own import and widget cells) run, and moving
  the d_k slider changes the picture.
Without any server, the kernel-free frame players' HTML is loaded from files and every control moved.

Needs the system Chromium (`apt-get install -y chromium`, /usr/bin/chromium; never `playwright
install`). Without it the test is skipped, unless the environment variable CI is set (to anything
but "", "0", "false" or "no"): then it fails.
"""
import base64
import contextlib
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = "02_scaling.ipynb"
RUN_NOTEBOOK = "02_explorer_run.ipynb"           # chapter 02's cells that build the live explorer, without outputs
FIXTURE = ROOT / "tests" / "fixtures" / "run_all.ipynb"
LOOP_NOTEBOOK = "run_all.ipynb"                  # the fixture, committed in the lab's repository
WEB_NOTEBOOK = "browser_model.ipynb"             # one saved output: the browser model's widget (appendix "The model in your browser")
WEB_MODEL = "models/sotu-llama"                  # its files, relative to nbs/ as on the site
AUTOSAVE_S = 3                                   # JupyterLab's autosave interval in the lab (120 s by default)
LAB = ROOT / "tools" / "lab"                      # the configuration `make lab` uses
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
ERROR_MIME = "application/vnd.jupyter.stderr"   # JupyterLab renders tracebacks (and stderr) with this mime type
RUN_ALL_TIMEOUT_S = 120                          # generous: the notebooks run here take seconds

pytestmark = pytest.mark.timeout(600)   # a bound for a heavily loaded machine: each test runs a few small cells


def on_ci():
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def require_browser():
    if os.path.exists(CHROMIUM):
        return
    if on_ci():
        pytest.fail(f"CI is set but {CHROMIUM} is missing: install it with `apt-get install -y chromium`")
    pytest.skip(f"{CHROMIUM} not found (apt-get install -y chromium); this test only runs where it is installed")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def api(base, token, path, method="GET"):
    req = urllib.request.Request(f"{base}{path}", method=method, headers={"Authorization": f"token {token}"})
    with urllib.request.urlopen(req, timeout=5) as r:
        return r.status, r.read()


EXPLORER_CELLS = ("3e225577", "55180496", "3dc83844")   # chapter 02: its test imports, the widgets import, `ui = ExplorerUI(ex)`


def explorer_notebook():
    """Chapter 02's live explorer and only what it needs: the chapter's own cells (by id), with `ex` made by one
    added line (the chapter builds it among other computations), without outputs, solutions unfolded."""
    nb = json.loads((ROOT / "nbs" / NOTEBOOK).read_text())
    by_id = {c["id"]: c for c in nb["cells"]}
    cells = [by_id[i] for i in EXPLORER_CELLS]
    made = {"cell_type": "code", "id": "make-ex", "metadata": {}, "execution_count": None, "outputs": [],
            "source": "from transformer_lit.scaling import ScalingExplorer\nex = ScalingExplorer()"}
    cells.insert(1, made)
    for cell in cells:
        cell["outputs"], cell["execution_count"] = [], None
        cell["metadata"].pop("jupyter", None)
    nb["cells"] = cells
    return nb


def widget_notebook(root):
    "A notebook whose one cell's saved output is the browser model's widget, as chapter 14 saves it (paths relative to nbs/)."
    from transformer_lit.browser import widget_html
    with contextlib.chdir(root):
        html = widget_html(WEB_MODEL)
    cell = {"cell_type": "code", "execution_count": 1, "id": "web-model", "metadata": {}, "source": f'widget("{WEB_MODEL}")',
            "outputs": [{"output_type": "execute_result", "execution_count": 1, "metadata": {},
                         "data": {"text/html": html, "text/plain": "Widget(...)"}}]}
    return {"cells": [cell], "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
            "nbformat": 4, "nbformat_minor": 5}


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server started the way `make lab` starts it, on a temporary copy of the course's layout.

    a git repository work/repo with settings.ini, .gitignore and nbs/ (never the repository's nbs/): 02_scaling.ipynb
    exactly as committed (to open and save), the fixture notebook as committed (the learner's loop) and
    RUN_NOTEBOOK, chapter 02's cells that build the live explorer, without outputs (to run). The server runs from
    work/repo/nbs with the repository's tools/lab configuration (its save hook, its settings overrides), after
    `jupyter trust`, with an autosave interval of AUTOSAVE_S seconds. Yields (base_url, token, log_path, repo).
    Always shut down."""
    require_browser()
    work = tmp_path_factory.mktemp("lab")
    repo = work / "repo"                       # a git repository with the course's layout: settings.ini, .gitignore, nbs/
    root = repo / "nbs"
    root.mkdir(parents=True)
    for name in ("settings.ini", ".gitignore"):  # nbdev's cleaning options; what git ignores
        (repo / name).write_bytes((ROOT / name).read_bytes())
    (root / NOTEBOOK).write_bytes((ROOT / "nbs" / NOTEBOOK).read_bytes())
    (root / LOOP_NOTEBOOK).write_bytes(FIXTURE.read_bytes())
    (root / RUN_NOTEBOOK).write_text(json.dumps(explorer_notebook()))
    shutil.copytree(ROOT / "nbs" / WEB_MODEL / "web", root / WEB_MODEL / "web")   # the exported model the widget loads
    (root / WEB_NOTEBOOK).write_text(json.dumps(widget_notebook(root)))
    git(repo, "init", "-q"); git(repo, "add", "-A"); git(repo, "commit", "-q", "-m", "as committed")
    # -- user settings of the test only: attach every cell to the DOM (the default windowing may leave
    #    off-screen cells out). News and update checks are off through tools/lab/overrides.json, as in `make lab`.
    settings = work / "settings"
    (settings / "@jupyterlab" / "notebook-extension").mkdir(parents=True)
    (settings / "@jupyterlab" / "notebook-extension" / "tracker.jupyterlab-settings").write_text(
        json.dumps({"windowingMode": "none"}))
    (settings / "@jupyterlab" / "docmanager-extension").mkdir(parents=True)
    (settings / "@jupyterlab" / "docmanager-extension" / "plugin.jupyterlab-settings").write_text(
        json.dumps({"autosaveInterval": AUTOSAVE_S}))
    token, port = secrets.token_hex(24), free_port()
    env = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"}   # the kernel shows figures inline, like a learner's
    env.update(JUPYTER_CONFIG_DIR=str(work / "config"), JUPYTER_RUNTIME_DIR=str(work / "runtime"),
               JUPYTER_DATA_DIR=str(work / "data"),
               PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p))
    # -- as `make lab` does: trust the notebooks, then start from nbs/ with the course's configuration
    subprocess.run([sys.executable, "-m", "jupyter", "trust", NOTEBOOK, LOOP_NOTEBOOK, RUN_NOTEBOOK, WEB_NOTEBOOK], cwd=root, env=env,
                   check=True, capture_output=True)
    log_path = work / "jupyterlab.log"
    log = open(log_path, "wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", f"--config={LAB / 'jupyter_server_config.py'}",
         f"--LabApp.app_settings_dir={LAB}", "--LabApp.news_url=None",
         f"--ServerApp.port={port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
         f"--LabApp.user_settings_dir={settings}", f"--LabApp.workspaces_dir={work / 'workspaces'}",
         "--LabApp.extension_manager=readonly", "--ServerApp.terminals_enabled=False",
         *(["--allow-root"] if os.geteuid() == 0 else [])],
        cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                pytest.fail(f"JupyterLab exited with {proc.returncode}:\n{log_path.read_text(errors='replace')[-3000:]}")
            try:
                if api(base, token, "/api/status")[0] == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"JupyterLab did not answer within 60 s:\n{log_path.read_text(errors='replace')[-3000:]}")
            time.sleep(0.3)
        yield base, token, log_path, repo
    finally:
        # -- shut down: the API stops the kernels and the server; then make sure the process is gone
        try:
            api(base, token, "/api/shutdown", method="POST")
        except OSError:
            pass
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        log.close()


def git(repo, *args):
    "Run git in `repo` (a throwaway identity for its one commit); returns stdout."
    return subprocess.run(["git", "-c", "user.name=test", "-c", "user.email=test@localhost", *args], cwd=repo,
                          check=True, capture_output=True, text=True).stdout


# jupyter_server races that log a traceback while nothing of the course's is involved, each by the text its entry holds
UPSTREAM_RACES = {
    # a kernel websocket the page closed while the server prepared it: `on_close` clears the handler's connection and
    # `select_subprotocol` then fails on None; the server answers 500 and the page opens a new socket
    # (jupyter-server/jupyter_server#1265, open)
    "closed websocket": ("select_subprotocol", "'NoneType' object has no attribute 'kernel_ws_protocol'"),
    # GET /api/kernels (wait_for_idle_kernel's poll) while a kernel is starting: the kernel is listed before its
    # last_activity is set, so the listing fails with 500 and the poll asks again (the same race as
    # jupyter-server/enterprise_gateway#1395)
    "kernel listed while starting": ("GET /api/kernels ", "'last_activity' trait of a ServerKernelManager instance expected a datetime, not the NoneType None"),
}


def _upstream_race(entry):
    return any(all(part in entry for part in parts) for parts in UPSTREAM_RACES.values())


def log_problems(log_path):
    "Lines of the server log that report a failure: tracebacks, failed hooks, untrusted notebooks (the UPSTREAM_RACES left out)."
    entries = []                                                       # a log entry: its "[L time ...]" line and the lines under it
    for line in log_path.read_text(errors="replace").splitlines():
        if line.startswith("[") or not entries: entries.append([line])
        else: entries[-1].append(line)
    return [l for e in entries if not _upstream_race("\n".join(e)) for l in e
            if re.search(r"Traceback|Error|failed|is not trusted", l)]


def open_notebook(page, base, token, name, root):
    "Open notebook `name` (a file in `root`) in JupyterLab and wait until all its code cells are in the page; returns their number."
    n_code = sum(c["cell_type"] == "code" for c in json.loads((root / name).read_text())["cells"])
    page.goto(f"{base}/lab/tree/{name}?reset&token={token}")   # reset: only this notebook open, whatever ran before
    page.wait_for_function("n => document.querySelectorAll('.jp-Notebook .jp-CodeCell').length === n", arg=n_code)
    return n_code


def wait_for_idle_kernel(base, token, timeout_s):
    "Poll the server until the notebook's kernel exists and reports execution_state 'idle'."
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            kernels = json.loads(api(base, token, "/api/kernels")[1])
            if kernels and all(k.get("execution_state") == "idle" for k in kernels):
                return
        except OSError:
            pass
        time.sleep(0.5)
    raise AssertionError(f"the kernel was not idle within {timeout_s} s")


def prompts(page):
    "The input prompts of all code cells, e.g. ['[1]:', '[*]:', '[ ]:']."
    return page.eval_on_selector_all(".jp-Notebook .jp-CodeCell .jp-InputArea-prompt",
                                     "els => els.map(e => e.textContent.trim())")


def errors(page):
    "Texts of every error (or stderr) output in the notebook."
    return page.locator(f".jp-Notebook [data-mime-type='{ERROR_MIME}']").all_inner_texts()


def run_all(page, log_path):
    """Run every cell through the Run menu, as a learner would, and wait until every prompt shows a number.
    (Cells whose source is folded show no prompt; the kernel going idle after the last prompt covers them.)"""
    n_code = len(prompts(page))
    for attempt in range(3):
        page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
        page.locator(".lm-Menu-item[data-command='runmenu:run-all']").click()
        try:
            page.wait_for_function(
                """() => [...document.querySelectorAll('.jp-Notebook .jp-CodeCell .jp-InputArea-prompt')]
                           .some(e => e.textContent.trim() !== '[ ]:')""", timeout=20_000)
            break
        except Exception:
            if attempt == 2: raise AssertionError(f"Run All Cells started no cell; prompts: {prompts(page)}")
    try:
        page.wait_for_function(
            """n => { const ps = [...document.querySelectorAll('.jp-Notebook .jp-CodeCell .jp-InputArea-prompt')]
                         .map(e => e.textContent.trim());
                     return ps.length === n && ps.every(p => /^\\[\\d+\\]:$/.test(p)); }""",
            arg=n_code, timeout=RUN_ALL_TIMEOUT_S * 1000)
    except Exception:
        raise AssertionError(f"not every cell finished; prompts: {prompts(page)}\nerrors: {errors(page)}\n"
                             f"server log: {log_path.read_text(errors='replace')[-2000:]}")


def save_and_wait(page, path):
    "Save with Ctrl+S in command mode and wait until the server has written the file."
    page.locator(".jp-Notebook .jp-Cell").first.click()
    page.keyboard.press("Escape")
    mtime = path.stat().st_mtime_ns
    page.keyboard.press("Control+s")
    deadline = time.monotonic() + 30
    while path.stat().st_mtime_ns == mtime:
        assert time.monotonic() < deadline, "the notebook was not saved within 30 s"
        time.sleep(0.2)
    time.sleep(0.5)


def diff_text(before: bytes, after: bytes, n=40):
    import difflib
    return "\n".join(list(difflib.unified_diff(before.decode().splitlines(), after.decode().splitlines(),
                                                lineterm="", n=1))[:n])


@contextlib.contextmanager
def lab_page(lab, name):
    "A headless Chromium page with notebook `name` open in the lab and its kernel idle; the browser closes after."
    from playwright.sync_api import sync_playwright
    base, token = lab[0], lab[1]
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1500, "height": 1100})
            page.set_default_timeout(60_000)
            open_notebook(page, base, token, name, lab[3] / "nbs")
            wait_for_idle_kernel(base, token, timeout_s=90)
            yield page
        finally:
            browser.close()


def test_open_and_save_leave_the_notebook_unchanged(lab):
    """A learner opens chapter 02 and saves it without changing anything: the file stays byte for byte what git has,
    the save hook runs without a traceback, and before any cell runs the explorer is the working player."""
    base, token, log_path, repo = lab
    path = repo / "nbs" / NOTEBOOK
    committed = path.read_bytes()
    with lab_page(lab, NOTEBOOK) as page:
        # -- the saved output is the kernel-free player: its script ran (a trusted notebook), no widget repr
        player = page.locator(".jp-Notebook .tl-player").first
        player.scroll_into_view_if_needed()
        page.wait_for_function("el => el.dataset.ready === '1'", arg=player.element_handle())
        assert page.get_by_text("VBox(children=").count() == 0
        before = player.locator("img.tlp-frame").get_attribute("src")
        player.locator("input[data-axis='0']").focus()
        page.keyboard.press("End")                                   # d_k = 1024
        assert player.locator("img.tlp-frame").get_attribute("src") != before
        assert "d_k=1024" in player.locator(".tlp-caption").inner_text()
        assert page.get_by_text("official Jupyter news").count() == 0    # no news pop-up
        save_and_wait(page, path)                                    # Ctrl+S without a change
    assert log_problems(log_path) == [], "\n".join(log_problems(log_path))
    saved = path.read_bytes()
    assert saved == committed, f"opening and saving changed the notebook:\n{diff_text(committed, saved)}"
    assert git(repo, "status", "--porcelain") == ""                    # nothing new either
    assert not (repo / "nbs" / ".last_checked").exists()              # (git ignores it: nbdev_trust's post-merge hook writes it)


def _screen_text(page):
    return page.locator(".jp-Notebook").inner_text()


def test_run_all_change_a_control_save_and_reopen(lab):
    """A learner's loop on a committed notebook with every kind of output a chapter saves (tests/fixtures/run_all.ipynb):
    open (not marked unsaved), Run All, move the kernel-free player and the live widget, let JupyterLab autosave,
    Ctrl+S. The screen shows this run's outputs (a new timing, sample, plot and stamp), yet the file stays byte for
    byte what git has and `git status` is clean; reopened, the notebook shows no error text and is not marked unsaved."""
    base, token, log_path, repo = lab
    path = repo / "nbs" / LOOP_NOTEBOOK
    committed = path.read_bytes()
    saved_stamp = re.search(r"run stamp: (\d+)", committed.decode()).group(1)
    with lab_page(lab, LOOP_NOTEBOOK) as page:
        time.sleep(1)
        assert page.locator(".lm-TabBar-tab.jp-mod-dirty").count() == 0, "the notebook opened marked unsaved"
        page.locator(".jp-Notebook .jp-Cell").first.click()
        mtime = path.stat().st_mtime_ns                              # before Run All: an autosave may come at any time after it
        run_all(page, log_path)
        wait_for_idle_kernel(base, token, timeout_s=60)
        assert errors(page) == []
        # -- the screen shows this run: a new stamp (the file's is the committed one)
        stamp = re.search(r"run stamp: (\d+)", _screen_text(page)).group(1)
        assert stamp != saved_stamp
        # -- the kernel-free player: its range input moves the picture
        player = page.locator(".jp-Notebook .tl-player").first
        page.wait_for_function("el => el.dataset.ready === '1'", arg=player.element_handle())
        before = player.locator("img.tlp-frame").get_attribute("src")
        player.locator("input[data-axis='0']").focus()
        page.keyboard.press("End")                                   # n = 4
        assert player.locator("input[data-axis='0']").input_value() == "3"
        assert player.locator("img.tlp-frame").get_attribute("src") != before
        # -- the live widget: its slider (keyboard, as a learner would) changes the label the kernel updates
        handle = page.locator(".jp-Notebook .widget-slider .noUi-handle").first
        handle.scroll_into_view_if_needed()
        handle.focus()
        page.keyboard.press("End")
        page.wait_for_function("() => document.body.innerText.includes('n = 9')")
        # -- an autosave (the notebook is unsaved after Run All; it may already have come), then Ctrl+S
        deadline = time.monotonic() + AUTOSAVE_S + 30
        while path.stat().st_mtime_ns == mtime:
            assert time.monotonic() < deadline, f"no autosave within {AUTOSAVE_S + 30} s"
            time.sleep(0.2)
        time.sleep(0.5)
        assert path.read_bytes() == committed, f"the autosave changed the notebook:\n{diff_text(committed, path.read_bytes())}"
        save_and_wait(page, path)
        saved = path.read_bytes()
        assert saved == committed, f"Run All and save changed the notebook:\n{diff_text(committed, saved)}"
        assert git(repo, "status", "--porcelain") == ""
        assert "n = 9" in _screen_text(page) and stamp in _screen_text(page)   # still what the learner computed
        # -- reopen: the saved notebook shows no error text and is not marked unsaved
        page.goto("about:blank")
        open_notebook(page, base, token, LOOP_NOTEBOOK, repo / "nbs")
        wait_for_idle_kernel(base, token, timeout_s=60)
        time.sleep(1)
        text = _screen_text(page)
        for bad in ("Error displaying widget", "model not found", "Traceback", "Error"):
            assert bad not in text, f"the reopened notebook shows {bad!r}"
        assert errors(page) == []
        assert page.locator(".lm-TabBar-tab.jp-mod-dirty").count() == 0, "the reopened notebook is marked unsaved"
        assert f"run stamp: {saved_stamp}" in text
    assert path.read_bytes() == committed and git(repo, "status", "--porcelain") == ""
    assert log_problems(log_path) == [], "\n".join(log_problems(log_path))


def test_explorer_in_jupyterlab(lab):
    from playwright.sync_api import sync_playwright
    base, token, log_path, repo = lab
    t0, phases = time.monotonic(), {}

    def phase(name):
        phases[name] = round(time.monotonic() - t0, 1)

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1500, "height": 1100})
            page.set_default_timeout(60_000)
            n_code = open_notebook(page, base, token, RUN_NOTEBOOK, repo / "nbs")
            phase("notebook open")

            # -- wait for the notebook's kernel to be idle: a Run All sent earlier may be lost on a slow machine
            wait_for_idle_kernel(base, token, timeout_s=90)
            page.locator(".jp-Notebook .jp-Cell").first.click()        # make the notebook the active widget
            phase("kernel idle")

            # -- run all cells through the menu, as a learner would (again if no cell started)
            run_all(page, log_path)
            phase("all cells run")
            numbers = [int(p[1:-2]) for p in prompts(page)]
            assert numbers == list(range(1, n_code + 1)), numbers   # every cell ran once, in order
            assert errors(page) == []
            assert page.get_by_text("Error displaying widget").count() == 0

            # -- the explorer rendered: its picture and its d_k slider
            img = page.locator("img.scaling-explorer-plot")
            img.wait_for(state="visible")
            page.wait_for_function("el => el.complete && el.naturalWidth > 0", arg=img.element_handle())
            img.scroll_into_view_if_needed()
            readout = page.locator(".widget-html-content", has_text="mean max p")
            assert "d_k=64" in readout.inner_text()
            before_src, before_png = img.get_attribute("src"), img.screenshot()

            # -- move the slider with the keyboard: focus its handle, End jumps to d_k = 1024
            handle = page.locator(".scaling-explorer-dk .noUi-handle")
            handle.focus()
            page.keyboard.press("End")
            page.wait_for_function("t => document.body.innerText.includes(t)", arg="d_k=1024,")
            page.wait_for_function("([el, src]) => el.getAttribute('src') !== src && el.complete && el.naturalWidth > 0",
                                   arg=[img.element_handle(), before_src])
            after_png = img.screenshot()
            assert after_png != before_png                    # a different picture on screen
            assert "1024" in page.locator(".scaling-explorer-dk .widget-readout").inner_text()
            # -- every slider label of the explorer shows in full ("temperature" was cut to "temperat…")
            cut = page.eval_on_selector_all(".jp-Notebook .widget-slider .widget-label",
                                            "els => els.filter(e => e.scrollWidth > e.clientWidth).map(e => e.textContent)")
            assert cut == [], f"labels cut off: {cut}"
            assert errors(page) == []
            phase("slider moved, picture changed")
            print(f"seconds since the server was up: {phases}")
            assert log_problems(log_path) == [], "\n".join(log_problems(log_path))
        finally:
            browser.close()


# ---------------------------------------------------------------------------------------------
# The kernel-free frame player (transformer_lit.viz.FramePlayer): its HTML alone, in a file,
# with no Jupyter server. Every control is moved; the picture must change and be the frame
# Python computes for the new setting.

def _player_page(page, html_path):
    page.goto(html_path.as_uri())
    page.wait_for_function("() => { const r = document.querySelector('.tl-player'); return r && r.dataset.ready === '1'; }")
    return page.locator(".tl-player").first


def _shown_png(player):
    src = player.locator("img.tlp-frame").get_attribute("src")
    prefix = "data:image/png;base64,"
    assert src.startswith(prefix), src[:40]
    return base64.b64decode(src[len(prefix):])


def _set_control(player, axis, index):
    "Move control `axis` to position `index` as a user would: a range by keyboard, a checkbox by click."
    el = player.locator(f"input[data-axis='{axis}']")
    if el.get_attribute("type") == "checkbox":
        if el.is_checked() != bool(index): el.click()
        return
    el.focus()
    current = int(el.input_value())
    for _ in range(abs(index - current)):
        el.press("ArrowRight" if index > current else "ArrowLeft")
    assert int(el.input_value()) == index


def drive_player(html_text, controls, expected_frame, tmp_path, start):
    """Load a player's HTML from a file in headless Chromium and move every control.

    controls: the player's {name: values}; expected_frame(**setting) -> the PNG Python computes;
    start: the setting the page shows first. Returns the number of moves checked."""
    from playwright.sync_api import sync_playwright
    path = tmp_path / "player.html"
    path.write_text(f"<!doctype html><html><head><meta charset='utf-8'></head><body>{html_text}</body></html>")
    names = list(controls)
    setting, moves = dict(start), 0
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            page_errors = []
            page.on("pageerror", lambda e: page_errors.append(str(e)))
            player = _player_page(page, path)
            assert _shown_png(player) == expected_frame(**setting)
            for axis, name in enumerate(names):
                values = list(controls[name])
                # -- every other value of this control (then back), all other controls where they are
                for index in [i for i in range(len(values)) if values[i] != setting[name]] + [values.index(start[name])]:
                    before = _shown_png(player)
                    _set_control(player, axis, index)
                    setting[name] = values[index]
                    shown = _shown_png(player)
                    assert shown == expected_frame(**setting), f"after moving {name} to {values[index]!r}: not the frame for {setting}"
                    if expected_frame(**setting) != before: assert shown != before
                    moves += 1
            assert page_errors == []
        finally:
            browser.close()
    return moves


def test_browser_model_in_jupyterlab(lab):
    """The browser model's widget as a saved output in JupyterLab: its links, rewritten by JupyterLab to the server's
    /files/ addresses, load the model; the next-token bars appear and a step adds a token (no kernel involved)."""
    with lab_page(lab, WEB_NOTEBOOK) as page:
        root = page.locator(".jp-Notebook .tl-web").first
        root.scroll_into_view_if_needed()
        assert "/files/" in root.locator(".tlw-weights").get_attribute("href")        # JupyterLab's rewrite
        console = []
        page.on("console", lambda m: console.append(f"{m.type}: {m.text}"))
        root.locator(".tlw-load").click()
        try:
            page.wait_for_function("el => el.dataset.state === 'ready' && el.querySelectorAll('.tlw-bars li').length > 0",
                                   arg=root.element_handle(), timeout=60_000)
        except Exception:
            raise AssertionError(f"the model did not load: status {root.locator('.tlw-status').inner_text()!r}; "
                                 f"console {console}; hrefs {[root.locator('.tlw-' + c).get_attribute('href') for c in ('js', 'manifest', 'weights')]}")
        n0 = int(root.get_attribute("data-length"))
        root.locator(".tlw-step").click()
        page.wait_for_function(f"el => +el.dataset.length === {n0 + 1}", arg=root.element_handle(), timeout=30_000)
        status = root.locator(".tlw-status").inner_text()
        assert "tokens per second" in status and "rror" not in status, status
    assert log_problems(lab[2]) == [], "\n".join(log_problems(lab[2]))


def test_frame_player_without_a_server(tmp_path):
    require_browser()
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib.figure import Figure
    from transformer_lit.viz import FramePlayer

    def render(n, flip, colour):
        fig = Figure(figsize=(2, 1), dpi=50)
        ax = fig.subplots()
        h = list(range(1, n + 1))
        ax.bar(range(n), h[::-1] if flip else h, color=colour)
        return fig

    controls = {"n": [1, 2, 3, 5], "flip": [False, True], "colour": ["C0", "C3", "k"]}
    player = FramePlayer(controls, render, value={"n": 3})
    assert len(set(player.frames)) == len(player.frames) - 3     # n=1 looks the same flipped or not (3 colours)
    fresh = {}
    def expected(**s):  # -- recomputed, not read from the player
        key = tuple(s.values())
        if key not in fresh: fresh[key] = FramePlayer({k: [v] for k, v in s.items()}, render).frames[0]
        return fresh[key]
    moves = drive_player(player.html(), controls, expected, tmp_path, start=player.value)
    assert moves == (4 - 1 + 1) + (2 - 1 + 1) + (3 - 1 + 1)


def test_chapter_02_player_saved_in_the_notebook(tmp_path):
    "The explorer as the site shows it: the player's HTML saved in nbs/02_scaling.ipynb, checked against frames drawn now."
    require_browser()
    import matplotlib
    matplotlib.use("Agg")
    from transformer_lit.scaling import ScalingExplorer
    from transformer_lit.widgets import DK_GRID, TAU_GRID, explorer_player

    nb = json.loads((ROOT / "nbs" / NOTEBOOK).read_text())
    cell, = [c for c in nb["cells"] if c["cell_type"] == "code" and "".join(c["source"]).startswith("player = explorer_player(ex)")]
    html_text = "".join(cell["outputs"][0]["data"]["text/html"])
    assert "<script" in html_text                                      # self-contained: nothing is fetched
    assert not re.search(r"""(src|href)=["']?(https?:|//)|fetch\(|XMLHttpRequest""", html_text)
    ex = ScalingExplorer()                                             # the chapter's explorer: the default one
    fresh = {}
    def expected(d_k, scaled, temperature):
        key = (d_k, scaled, temperature)
        if key not in fresh:
            fresh[key] = explorer_player(ex, d_ks=(d_k,), scaled=(scaled,), temperatures=(temperature,)).frames[0]
        return fresh[key]
    controls = {"d_k": DK_GRID, "scaled": (False, True), "temperature": TAU_GRID}
    moves = drive_player(html_text, controls, expected, tmp_path, start={"d_k": 64, "scaled": True, "temperature": 1.0})
    assert moves == len(DK_GRID) + 2 + len(TAU_GRID)


def test_save_hook_cleans_whatever_the_working_directory(tmp_path, monkeypatch):
    "tools/lab's pre-save hook, without a browser: it finds the file from the server's root, cleans, keeps trust flags."
    from traitlets.config import Config
    from jupyter_server.services.contents.filemanager import FileContentsManager
    c = Config()
    namespace = {"get_config": lambda: c, "__file__": str(LAB / "jupyter_server_config.py")}
    exec(compile((LAB / "jupyter_server_config.py").read_text(), "jupyter_server_config.py", "exec"), namespace)
    assert c.ServerApp.contents_manager_class is namespace["CourseContentsManager"]
    hook = namespace["nbdev_clean_jupyter"]
    repo = tmp_path / "repo"
    (repo / "nbs").mkdir(parents=True)
    (repo / "settings.ini").write_bytes((ROOT / "settings.ini").read_bytes())
    (repo / "nbs" / "x.ipynb").write_text("{}")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)                    # the server's working directory is not its root
    cell = {"cell_type": "code", "execution_count": 3, "id": "a1", "source": "1",
            "metadata": {"trusted": True, "collapsed": False, "jupyter": {"source_hidden": True}},
            "outputs": [{"output_type": "execute_result", "execution_count": 3, "metadata": {},
                         "data": {"text/plain": "<object at 0x7f00aa>"}}]}
    model = {"type": "notebook", "content": {"nbformat": 4, "nbformat_minor": 5, "cells": [cell],
             "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
                          "language_info": {"name": "python"}, "widgets": {"state": {}}}}}
    hook(model=model, path="x.ipynb", contents_manager=FileContentsManager(root_dir=str(repo / "nbs")))
    content = model["content"]
    assert "language_info" not in content["metadata"] and content["metadata"]["kernelspec"]["display_name"] == "python3"
    assert cell["execution_count"] is None and cell["outputs"][0]["execution_count"] is None
    assert cell["metadata"] == {"trusted": True, "jupyter": {"source_hidden": True}}   # allowed keys and the trust flag
    assert cell["outputs"][0]["data"]["text/plain"] == "<object>"                       # clean_ids
    assert not (repo / "nbs" / ".last_checked").exists()


def _lab_config():
    from traitlets.config import Config
    c = Config()
    namespace = {"get_config": lambda: c, "__file__": str(LAB / "jupyter_server_config.py")}
    exec(compile((LAB / "jupyter_server_config.py").read_text(), "jupyter_server_config.py", "exec"), namespace)
    return namespace


def test_save_hook_drops_widget_views_joins_streams_keeps_folding(tmp_path):
    """After Run All, JupyterLab saves the live widget's view, and unfolds the cells that ran; the hook saves the
    notebook as committed: no widget view (nor its bare repr), streams joined, the folding of the file on disk kept."""
    from jupyter_server.services.contents.filemanager import FileContentsManager
    hook = _lab_config()["nbdev_clean_jupyter"]
    repo = tmp_path / "repo"
    (repo / "nbs").mkdir(parents=True)
    (repo / "settings.ini").write_bytes((ROOT / "settings.ini").read_bytes())
    folded = {"jupyter": {"outputs_hidden": True, "source_hidden": True}}
    on_disk = {"cells": [{"cell_type": "code", "id": "sol", "source": "x = 1", "metadata": folded, "outputs": []},
                         {"cell_type": "markdown", "id": "md", "source": "s", "metadata": {"jupyter": {"source_hidden": True}}}]}
    (repo / "nbs" / "x.ipynb").write_text(json.dumps(on_disk))
    view = {"model_id": "abc", "version_major": 2, "version_minor": 0}
    cells = [
        {"cell_type": "code", "id": "w", "source": "ui", "metadata": {}, "execution_count": 1, "outputs": [
            {"output_type": "execute_result", "execution_count": 1, "metadata": {},
             "data": {"text/plain": "VBox(children=(...))", "application/vnd.jupyter.widget-view+json": view}}]},
        {"cell_type": "code", "id": "both", "source": "w2", "metadata": {}, "execution_count": 2, "outputs": [
            {"output_type": "display_data", "metadata": {},
             "data": {"text/html": "<b>x</b>", "application/vnd.jupyter.widget-view+json": view}}]},
        {"cell_type": "code", "id": "s", "source": "print(1); print(2)", "metadata": {}, "execution_count": 3,
         "outputs": [{"output_type": "stream", "name": "stdout", "text": "1\n"},
                     {"output_type": "stream", "name": "stdout", "text": "2\n"},
                     {"output_type": "stream", "name": "stderr", "text": "w\n"}]},
        {"cell_type": "code", "id": "sol", "source": "x = 1", "execution_count": 4, "outputs": [],
         "metadata": {"collapsed": False, "jupyter": {"source_hidden": True}}},   # Lab unfolded the outputs
        {"cell_type": "markdown", "id": "md", "source": "s", "metadata": {}},        # and the markdown's source
        {"cell_type": "code", "id": "new", "source": "y", "metadata": {"jupyter": {"source_hidden": True}},
         "execution_count": None, "outputs": []},                                   # folded by the learner: stays
    ]
    model = {"type": "notebook", "content": {"nbformat": 4, "nbformat_minor": 5, "cells": cells,
             "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}}}
    hook(model=model, path="x.ipynb", contents_manager=FileContentsManager(root_dir=str(repo / "nbs")))
    by_id = {c["id"]: c for c in model["content"]["cells"]}
    assert by_id["w"]["outputs"] == []                                              # the widget's output is gone
    assert by_id["both"]["outputs"][0]["data"] == {"text/html": "<b>x</b>"}          # other representations stay
    assert [(o["name"], o["text"]) for o in by_id["s"]["outputs"]] == [("stdout", "1\n2\n"), ("stderr", "w\n")]
    assert by_id["sol"]["metadata"] == folded
    assert by_id["md"]["metadata"] == {"jupyter": {"source_hidden": True}}
    assert by_id["new"]["metadata"] == {"jupyter": {"source_hidden": True}}


def test_open_gives_the_metadata_the_kernel_will_set(tmp_path):
    """Opened through the course's contents manager, a clean notebook carries the kernelspec and language_info that
    JupyterLab sets when the kernel answers (so opening does not mark it unsaved); the file itself is untouched."""
    import asyncio
    from jupyter_client.kernelspec import KernelSpecManager
    from ipykernel.ipkernel import IPythonKernel
    ns = _lab_config()
    (tmp_path / "x.ipynb").write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "cells": [], "metadata": {
        "kernelspec": {"display_name": "python3", "language": "python", "name": "python3"}}}))
    before = (tmp_path / "x.ipynb").read_bytes()

    from traitlets.config import Configurable

    class Parent(Configurable):   # the server application, as far as the contents manager looks
        kernel_spec_manager = KernelSpecManager()
    cm = ns["CourseContentsManager"](root_dir=str(tmp_path), parent=Parent())
    meta = asyncio.run(cm.get("x.ipynb"))["content"]["metadata"]
    spec = Parent.kernel_spec_manager.get_kernel_spec("python3")
    assert meta["kernelspec"] == {"display_name": spec.display_name, "language": "python", "name": "python3"}
    assert meta["language_info"] == dict(IPythonKernel.language_info)
    assert (tmp_path / "x.ipynb").read_bytes() == before


def test_chapter_14_attention_explorer_saved_in_the_notebook(tmp_path):
    """The trained model's attention explorer as the site shows it (nbs/14_checkpoints.ipynb's saved HTML): every control
    moves the map, the caption follows, and the canvas's cells have the colours of the stored weights."""
    require_browser()
    from playwright.sync_api import sync_playwright
    nb = json.loads((ROOT / "nbs" / "14_checkpoints.ipynb").read_text(encoding="utf-8"))
    html_text, = ["".join(o["data"]["text/html"]) for c in nb["cells"] for o in c.get("outputs", [])
                  if 'class="tl-attn"' in "".join(o.get("data", {}).get("text/html", ""))]
    assert not re.search(r"""(src|href)=["']?(https?:|//)|fetch\(|XMLHttpRequest""", html_text)   # nothing is fetched
    d = json.loads(re.search(r'class="tla-data">(.*?)</script>', html_text, re.S).group(1).replace("<\\/", "</"))
    path = tmp_path / "explorer.html"
    path.write_text(f"<!doctype html><html><head><meta charset='utf-8'></head><body>{html_text}</body></html>", encoding="utf-8")

    def colour(v):  # -- the colour the page should give weight v: the stops, interpolated linearly
        x = min(max(v, 0.0), 1.0) * (len(d["stops"]) - 1); i = min(int(x), len(d["stops"]) - 2); f = x - i
        return [round(a + f * (b - a)) for a, b in zip(d["stops"][i], d["stops"][i + 1])]

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900}, device_scale_factor=2)   # a high-density screen
            page_errors = []
            page.on("pageerror", lambda e: page_errors.append(str(e)))
            page.goto(path.as_uri())
            page.wait_for_function("() => { const r = document.querySelector('.tl-attn'); return r && r.dataset.ready === '1'; }")
            root = page.locator(".tl-attn").first
            setting = [int(root.locator(f"input[data-axis='{a}']").input_value()) for a in range(3)]
            sizes = [len(d["maps"]), len(d["maps"][0]), len(d["maps"][0][0])]
            for axis in range(3):
                for index in [i for i in range(sizes[axis]) if i != setting[axis]] + [setting[axis]]:
                    _set_control(root, axis, index)
                    setting[axis] = index
                    t, l, h = setting
                    assert root.get_attribute("data-index") == f"{t},{l},{h}"
                    assert root.locator(".tla-caption").inner_html() == d["captions"][t][l][h]
                    rows, C, M = d["maps"][t][l][h], d["cell"], d["margin"]
                    for i, j in ((0, 0), (len(rows) - 1, 0), (len(rows) - 1, len(rows) - 2), (len(rows) // 2, len(rows) // 2), (0, 1)):
                        w = rows[i][j] / d["scale"] if j < len(rows[i]) else 0.0
                        px = page.evaluate(f"""() => {{ const r = window.devicePixelRatio || 1;   // canvas pixels per CSS pixel
                                               return Array.from(document.querySelector('.tl-attn canvas').getContext('2d')
                                               .getImageData(Math.round({M + j * C + C // 2} * r), Math.round({M + i * C + C // 2} * r), 1, 1).data.slice(0, 3)); }}""")
                        assert max(abs(a - b) for a, b in zip(px, colour(w))) <= 1, (setting, i, j, px, colour(w))
            # -- pointing at a cell names its query, its key and its weight
            t, l, h = setting
            rows, T = d["maps"][t][l][h], len(d["labels"][t])
            box, size = page.locator(".tl-attn canvas").bounding_box(), d["margin"] + T * d["cell"] + 1
            for i, j in ((T - 1, T - 2), (T // 2, 1)):
                page.mouse.move(box["x"] + (d["margin"] + (j + 0.5) * d["cell"]) * box["width"] / size,
                                box["y"] + (d["margin"] + (i + 0.5) * d["cell"]) * box["height"] / size)
                w = rows[i][j] / d["scale"] if j < len(rows[i]) else 0.0
                text = root.locator(".tla-hover").inner_text()
                assert text.startswith(f"query {i} ") and f"key {j} " in text and text.endswith(f"{w:.3f}"), text
            assert page_errors == []
        finally:
            browser.close()
