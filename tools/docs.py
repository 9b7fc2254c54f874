"""Render the site: nbdev_docs, minus its README step. `make docs` runs this when Quarto is installed.

nbdev_docs also runs nbdev_readme, which renders README.md through Quarto in its own way (re-wrapped,
another header) and copies `index_files/` to the repository's root. The README has one renderer,
tools/render_readme.py (`make readme`), whose output tests/test_docs.py checks, so here that step
is left out and the site is all `make docs` writes (to _docs/; _proc/ is nbdev's cache, ignored by git).
"""
import base64, json, types
from pathlib import Path
import nbdev.quarto

ROOT = Path(__file__).resolve().parent.parent
CARD = 'social_card.png'     # _quarto.yml's `image:` (every page's social-card picture); git ignores the file

def write_social_card(nbs=ROOT/'nbs'):
    """Write nbs/social_card.png: the first picture the index shows (the model drawn block by block).

    Every page names it as its social-card image. Without an explicit image Quarto takes a page's first picture,
    which on the players' pages is an inline data URI that it then glues to the site's URL (a broken link).
    Taken from the index's saved output at render time, so the card is always the picture the index shows."""
    cells = json.loads((nbs/'index.ipynb').read_text(encoding='utf-8'))['cells']
    png = next(o['data']['image/png'] for c in cells for o in c.get('outputs', []) if 'image/png' in o.get('data', {}))
    (nbs/CARD).write_bytes(base64.b64decode(''.join(png)))
    return nbs/CARD

def without_readme():
    "Make nbdev_docs skip nbdev_readme (it calls `nbdev_readme.__wrapped__`); return what was replaced."
    replaced = nbdev.quarto.nbdev_readme
    nbdev.quarto.nbdev_readme = types.SimpleNamespace(__wrapped__=lambda *args, **kwargs: None)
    return replaced

def main():
    write_social_card()
    without_readme()
    nbdev.quarto.nbdev_docs.__wrapped__()

if __name__ == '__main__':
    main()
