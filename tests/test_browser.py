"""End to end: chapter 02 in a real JupyterLab, driven by headless Chromium through Playwright.

Starts JupyterLab on a free localhost port with a random token, on a temporary copy of
nbs/02_scaling.ipynb (nbs/ is never modified), opens it, runs all cells, moves the d_k slider of
the explorer and checks that the picture changed and that no cell shows an error.

Needs the system Chromium (`apt-get install -y chromium`, /usr/bin/chromium; never `playwright
install`). Without it the test is skipped, unless the environment variable CI is set (to anything
but "", "0", "false" or "no"): then it fails.
"""
import base64
import json
import os
import re
import secrets
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = "02_scaling.ipynb"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
ERROR_MIME = "application/vnd.jupyter.stderr"   # JupyterLab renders tracebacks (and stderr) with this mime type
RUN_ALL_TIMEOUT_S = 150                          # generous: a loaded 2-core machine; the test normally takes far less

pytestmark = pytest.mark.timeout(300)


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


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    "A JupyterLab server on a temporary copy of the chapter: (base_url, token, log_path, n_code_cells). Always shut down."
    require_browser()
    work = tmp_path_factory.mktemp("lab")
    root = work / "nbs"
    root.mkdir()
    # -- the copy starts without outputs or prompt numbers, so every number and picture seen comes from this run
    nb = json.loads((ROOT / "nbs" / NOTEBOOK).read_text())
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
    (root / NOTEBOOK).write_text(json.dumps(nb))
    n_code = sum(cell["cell_type"] == "code" for cell in nb["cells"])
    # -- user settings: attach every cell to the DOM (the default windowing may leave off-screen cells out)
    #    and no news or update checks (no network)
    settings = work / "settings"
    (settings / "@jupyterlab" / "notebook-extension").mkdir(parents=True)
    (settings / "@jupyterlab" / "notebook-extension" / "tracker.jupyterlab-settings").write_text(
        json.dumps({"windowingMode": "none"}))
    (settings / "@jupyterlab" / "apputils-extension").mkdir(parents=True)
    (settings / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False}))
    token, port = secrets.token_hex(24), free_port()
    env = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"}   # the kernel shows figures inline, like a learner's
    env.update(JUPYTER_CONFIG_DIR=str(work / "config"), JUPYTER_RUNTIME_DIR=str(work / "runtime"),
               PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p))
    log_path = work / "jupyterlab.log"
    log = open(log_path, "wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}",
         "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
         f"--LabApp.user_settings_dir={settings}", f"--LabApp.workspaces_dir={work / 'workspaces'}",
         "--LabApp.news_url=None", "--LabApp.extension_manager=readonly", "--ServerApp.terminals_enabled=False",
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
        yield base, token, log_path, n_code
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
        assert (root / NOTEBOOK).exists()


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


def test_explorer_in_jupyterlab(lab):
    from playwright.sync_api import sync_playwright
    base, token, log_path, n_code = lab
    t0, phases = time.monotonic(), {}

    def phase(name):
        phases[name] = round(time.monotonic() - t0, 1)

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1500, "height": 1100})
            page.set_default_timeout(60_000)
            page.goto(f"{base}/lab/tree/{NOTEBOOK}?token={token}")
            # -- wait until every code cell of the notebook is in the page
            page.wait_for_function("n => document.querySelectorAll('.jp-Notebook .jp-CodeCell').length === n", arg=n_code)
            phase("notebook open")

            # -- wait for the notebook's kernel to be idle: a Run All sent earlier may be lost on a slow machine
            wait_for_idle_kernel(base, token, timeout_s=90)
            page.locator(".jp-Notebook .jp-Cell").first.click()        # make the notebook the active widget
            phase("kernel idle")

            # -- run all cells through the menu, as a learner would (again if no cell started)
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
            assert errors(page) == []
            phase("slider moved, picture changed")
            print(f"seconds since the server was up: {phases}")
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
