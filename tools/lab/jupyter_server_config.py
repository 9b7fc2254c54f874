# The course's Jupyter server configuration. `make lab` starts JupyterLab from nbs/ with
# `--config=tools/lab/jupyter_server_config.py` (this file, instead of the user's own server config)
# and `--LabApp.app_settings_dir=tools/lab` (overrides.json: no news pop-up, no update check,
# no widget state saved into the notebooks, a notebook's kernel shut down when its tab closes).
import functools
import importlib.util
from pathlib import Path

from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager

c = get_config()  # noqa: F821 (Jupyter provides get_config when it loads this file)


def nbdev_clean_jupyter(model=None, path=None, contents_manager=None, **kwargs):
    """nbdev's pre-save hook, given the notebook's file on disk: the notebook is saved as `nbdev_clean` writes it.

    nbdev's own hook resolves `path`, which Jupyter gives relative to the server's root directory,
    against the working directory, and fails (FileNotFoundError) whenever the two differ; it also
    signs the file as it was before the save and leaves an `nbs/.last_checked` file behind (and nbdev
    reads settings.ini from the working directory up, whatever the path). This hook finds settings.ini
    above the file's absolute path and cleans the model with nbdev's `clean_nb` and those settings,
    nothing else.

    Cleaning drops every cell metadata key but the allowed ones, the front end's per-cell `trusted`
    flags among them; the server would then find cells with HTML outputs untrusted, log "Notebook ...
    is not trusted" and leave the saved notebook unsigned (its HTML, the kernel-free explorer, would
    not run on the next open). The flags are put back after cleaning; the server strips them from the file."""
    if not model or model.get("type") != "notebook" or model["content"].get("nbformat") != 4:
        return
    try:
        from fastcore.foundation import Config
        from nbdev.clean import clean_nb
        from nbdev.config import _apply_defaults, _types
    except ModuleNotFoundError:
        return
    if contents_manager is not None and path is not None:
        path = contents_manager._get_os_path(path)
    # -- the settings.ini above the notebook (nbdev's get_config searches from the working directory only),
    #    read afresh on every save so that edits to it apply without restarting the server
    found = [d for d in Path(path).resolve().parents if (d / "settings.ini").exists()]
    if not found:
        return
    cfg = _apply_defaults(Config(found[0], "settings.ini", types=_types))
    if not cfg.jupyter_hooks:
        return
    cells = model["content"].get("cells", [])
    trusted = [cell.get("metadata", {}).get("trusted") for cell in cells]
    clean_nb(model["content"], cfg.clear_all, cfg.get("allowed_metadata_keys", "").split(),
             cfg.get("allowed_cell_metadata_keys", "").split(), cfg.clean_ids)
    for cell, flag in zip(cells, trusted):
        if flag is not None:
            cell.setdefault("metadata", {})["trusted"] = flag
    tools = _run_nb()                 # the rules tools/run_nb.py saves executed notebooks with, so both agree
    tools.drop_widgets(cells)         # a widget's view needs the kernel that made it ("Error displaying widget")
    tools.merge_streams(cells)
    on_disk = _cells_on_disk(path)
    _keep_unchanged_outputs(cells, on_disk)
    _keep_folding(cells, on_disk)


@functools.lru_cache(maxsize=1)
def _run_nb():
    "tools/run_nb.py (next to this configuration's folder), loaded once."
    spec = importlib.util.spec_from_file_location("course_run_nb", Path(__file__).resolve().parent.parent / "run_nb.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _cells_on_disk(path):
    "The cells of the notebook file as it is before this save (nbformat's form: sources and texts as strings), or []."
    try:
        import json
        cells = json.loads(Path(path).read_text(encoding="utf-8"))["cells"]
    except Exception:  # a new notebook, or not one this hook can read: nothing to keep
        return []
    for cell in cells:  # multi-line strings are stored as lists of lines; the front end sends them whole
        cell["source"] = _source(cell)
        for o in cell.get("outputs", []):
            if isinstance(o.get("text"), list):
                o["text"] = "".join(o["text"])
            for mime, value in (o.get("data") or {}).items():
                if isinstance(value, list):
                    o["data"][mime] = "".join(value)
    return cells


def _source(cell):
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def _keep_unchanged_outputs(cells, on_disk):
    """Re-running unchanged code does not rewrite the file: while the cells read the same as in the file on disk
    (same id, type and source, and so every cell above them too), a code cell keeps the outputs the file has.

    The screen shows what the learner just computed; the file keeps the course's outputs for code the learner has
    not changed, so Run All, autosave and Ctrl+S leave `git status` clean on any machine (pictures drawn on another
    CPU, timings and samples differ in their last bits, which git would otherwise see). From the first cell the
    learner changed, added, removed or moved, every cell below saves the outputs of the learner's run: they may
    depend on the change."""
    for cell, disk in zip(cells, on_disk):
        if (cell.get("id") != disk.get("id") or cell.get("cell_type") != disk.get("cell_type")
                or _source(cell) != _source(disk)):
            return
        if cell.get("cell_type") == "code":
            import copy
            cell["outputs"] = copy.deepcopy(disk.get("outputs", []))
            cell["execution_count"] = disk.get("execution_count")


def _keep_folding(cells, on_disk):
    """Put back the folding (`jupyter.source_hidden` / `outputs_hidden`) a cell has in the file on disk.

    JupyterLab unfolds a cell's outputs whenever the cell runs and a markdown cell's source when it renders, so
    after Run All the exercise solutions would be saved unfolded and show unfolded on the next visit. Folding is
    only ever added back, never removed: a cell the learner folds stays folded."""
    folded = {c.get("id"): c["metadata"]["jupyter"] for c in on_disk
              if c.get("id") and isinstance(c.get("metadata", {}).get("jupyter"), dict)}
    for cell in cells:
        keep = folded.get(cell.get("id"))
        if not keep:
            continue
        meta = cell.setdefault("metadata", {}).setdefault("jupyter", {})
        for key, value in keep.items():
            if key in ("source_hidden", "outputs_hidden") and value and not meta.get(key):
                meta[key] = value


class CourseContentsManager(AsyncLargeFileManager):
    """The server's default contents manager with the course's save hook registered on it.

    Set as configuration (`c.FileContentsManager.pre_save_hook = ...`), the hook made jupyter_server warn
    "Overriding existing pre_save_hook (nbdev_clean_jupyter) with a new one (nbdev_clean_jupyter)" at every
    start: its validator sees the value it is validating as an existing hook. Registered here, nothing is overridden."""
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.register_pre_save_hook(nbdev_clean_jupyter)

    async def get(self, path, content=True, type=None, format=None, **kwargs):
        """The notebook as on disk, with the two metadata entries JupyterLab writes when the kernel starts.

        The course commits notebooks as `nbdev_clean` leaves them: kernelspec display name "python3" and no
        `language_info`. JupyterLab sets both as soon as its kernel answers, which marks every notebook unsaved
        the moment it opens. Given here as the kernel will report them, the front end finds nothing to change;
        the save hook removes them again, so the file on disk never holds them."""
        model = await super().get(path, content=content, type=type, format=format, **kwargs)
        if model.get("type") == "notebook" and content and model.get("content") is not None:
            _add_kernel_metadata(model["content"], getattr(self.parent, "kernel_spec_manager", None))
        return model


def _language_info():
    "What ipykernel reports as `language_info` for this Python (the kernel runs the server's interpreter)."
    try:
        from ipykernel.ipkernel import IPythonKernel
        return dict(IPythonKernel.language_info)
    except Exception:  # no ipykernel here: leave the metadata as it is
        return None


def _add_kernel_metadata(nb, kernel_spec_manager):
    meta = nb.setdefault("metadata", {})
    spec = meta.get("kernelspec") or {}
    name = spec.get("name")
    if not name or kernel_spec_manager is None:
        return
    try:
        ks = kernel_spec_manager.get_kernel_spec(name)
    except Exception:  # a kernel this server does not have: JupyterLab will ask which one to use
        return
    meta["kernelspec"] = {"display_name": ks.display_name, "language": ks.language, "name": name}
    info = _language_info()
    if info is not None and "language_info" not in meta:
        meta["language_info"] = info


c.ServerApp.contents_manager_class = CourseContentsManager

# -- kernels: every notebook opened starts one. Closing a notebook's tab shuts its kernel down (overrides.json,
#    `kernelShutdown`); a kernel that has run nothing for an hour is shut down too, tab open or not (a tab left open
#    in another window, a browser closed without closing tabs), so a learner who moves through the chapters does not
#    end with a kernel per chapter. A culled kernel loses its variables only: the tab offers a new kernel, the saved
#    outputs stay, and a chapter's Run All rebuilds the rest.
c.MappingKernelManager.cull_idle_timeout = 60 * 60
c.MappingKernelManager.cull_interval = 5 * 60
c.MappingKernelManager.cull_connected = True
c.MappingKernelManager.cull_busy = False
c.ServerApp.ip = "127.0.0.1"   # this machine only; the login token is printed in the terminal

# -- the start page: the printed link opens the course's index, and the learner's file browser shows the chapters,
#    not the site's configuration (the files stay on disk; only Jupyter's listing leaves them out)
c.LabApp.default_url = "/lab/tree/index.ipynb"
c.ContentsManager.hide_globs = ["__pycache__", "*.pyc", "*.pyo", ".DS_Store", "*~", ".ipynb_checkpoints",
                                "_quarto.yml", "nbdev.yml", "sidebar.yml", "styles.css", "_proc", "_docs", ".last_checked", "social_card.png"]

