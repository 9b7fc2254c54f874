# The course's Jupyter server configuration. `make lab` starts JupyterLab from nbs/ with
# `--config=tools/lab/jupyter_server_config.py` (this file, instead of the user's own server config)
# and `--LabApp.app_settings_dir=tools/lab` (overrides.json: no news pop-up, no update check,
# no widget state saved into the notebooks).
c = get_config()  # noqa: F821 (Jupyter provides get_config when it loads this file)


def nbdev_clean_jupyter(model=None, path=None, contents_manager=None, **kwargs):
    """nbdev's pre-save hook, given the notebook's file on disk.

    Jupyter passes `path` relative to the server's root directory, and nbdev's own hook resolves it
    against the working directory, which fails (FileNotFoundError) whenever the two differ. This
    hook turns it into the file's absolute path first, then cleans the notebook as `nbdev_clean`
    does (the options in settings.ini).

    Cleaning drops every cell metadata key but the allowed ones, the front end's per-cell `trusted`
    flags among them; the server then finds cells with HTML outputs untrusted, logs "Notebook ... is
    not trusted" and leaves the saved notebook unsigned (its HTML, the kernel-free explorer, would not
    run on the next open). The flags are put back after cleaning; the server strips them from the file."""
    try:
        from nbdev.clean import clean_jupyter
    except ModuleNotFoundError:
        return
    if contents_manager is not None and path is not None:
        path = contents_manager._get_os_path(path)
    cells = (model or {}).get("content", {}).get("cells", []) if (model or {}).get("type") == "notebook" else []
    trusted = [cell.get("metadata", {}).get("trusted") for cell in cells]
    clean_jupyter(path=path, model=model, **kwargs)
    for cell, flag in zip(cells, trusted):
        if flag is not None:
            cell.setdefault("metadata", {})["trusted"] = flag


c.FileContentsManager.pre_save_hook = nbdev_clean_jupyter
c.ServerApp.ip = "127.0.0.1"   # this machine only; the login token is printed in the terminal
