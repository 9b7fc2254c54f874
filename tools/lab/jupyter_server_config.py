# The course's Jupyter server configuration. `make lab` starts JupyterLab from nbs/ with
# `--config=tools/lab/jupyter_server_config.py` (this file, instead of the user's own server config)
# and `--LabApp.app_settings_dir=tools/lab` (overrides.json: no news pop-up, no update check,
# no widget state saved into the notebooks).
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


class CourseContentsManager(AsyncLargeFileManager):
    """The server's default contents manager with the course's save hook registered on it.

    Set as configuration (`c.FileContentsManager.pre_save_hook = ...`), the hook made jupyter_server warn
    "Overriding existing pre_save_hook (nbdev_clean_jupyter) with a new one (nbdev_clean_jupyter)" at every
    start: its validator sees the value it is validating as an existing hook. Registered here, nothing is overridden."""
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.register_pre_save_hook(nbdev_clean_jupyter)


c.ServerApp.contents_manager_class = CourseContentsManager
c.ServerApp.ip = "127.0.0.1"   # this machine only; the login token is printed in the terminal
