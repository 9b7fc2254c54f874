"""The shipped models' files, for their tests (tests/test_trained_model.py, tests/test_trained_sotu.py).

Each model lives in nbs/models/<name>/ (the checkpoint, training.json, heldout.txt) and is made by a training
script beside it, nbs/models/<script>.py, which the tests load as a module to recompute what the files state."""
import importlib.util, json
from pathlib import Path

MODELS = Path(__file__).resolve().parents[1] / "nbs" / "models"


class ShippedModel:
    "One shipped model: its directory `MODELS / name` and its training script `MODELS / (script + '.py')`."
    def __init__(self, name: str, script: str):
        self.dir, self.script_name = MODELS / name, script

    def script(self):
        "The training script as a module, executed afresh on each call."
        spec = importlib.util.spec_from_file_location(self.script_name, MODELS / f"{self.script_name}.py")
        m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
        return m

    def meta(self) -> dict: return json.loads((self.dir / "training.json").read_text())
    def heldout(self) -> str: return (self.dir / "heldout.txt").read_text(encoding="utf-8")
