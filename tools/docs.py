"""Render the site: nbdev_docs, minus its README step. `make docs` runs this when Quarto is installed.

nbdev_docs also runs nbdev_readme, which renders README.md through Quarto in its own way (re-wrapped,
another header) and copies `index_files/` to the repository's root. The README has one renderer,
tools/render_readme.py (`make readme`), whose output tests/test_docs.py checks, so here that step
is left out and the site is all `make docs` writes (to _docs/; _proc/ is nbdev's cache, ignored by git).
"""
import types
import nbdev.quarto

def without_readme():
    "Make nbdev_docs skip nbdev_readme (it calls `nbdev_readme.__wrapped__`); return what was replaced."
    replaced = nbdev.quarto.nbdev_readme
    nbdev.quarto.nbdev_readme = types.SimpleNamespace(__wrapped__=lambda *args, **kwargs: None)
    return replaced

def main():
    without_readme()
    nbdev.quarto.nbdev_docs.__wrapped__()

if __name__ == '__main__':
    main()
