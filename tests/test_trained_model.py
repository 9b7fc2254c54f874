"""The course's trained model (nbs/models/pydoc-char-llama): transformers loads it as the same model, and its
held-out loss, recomputed from the shipped files, is the number its README and training.json state."""
import importlib.util, json, math, re, sys
from pathlib import Path
import pytest
import torch
from transformer_lit.checkpoints import from_pretrained
from transformer_lit.train import Vocab, LMData, evaluate_loss

MODELS = Path(__file__).resolve().parents[1] / "nbs" / "models"
MODEL = MODELS / "pydoc-char-llama"
pytestmark = pytest.mark.usefixtures("one_thread")

def script():
    "The training script as a module (its corpus recipe and tokenizer)."
    spec = importlib.util.spec_from_file_location("train_pydoc_lm", MODELS / "train_pydoc_lm.py")
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
    return m

def chars():
    "The vocabulary in id order, read from tokenizer.json."
    vocab = json.loads((MODEL / "tokenizer.json").read_text(encoding="utf-8"))["model"]["vocab"]
    return sorted(vocab, key=vocab.get)

def heldout(): return (MODEL / "heldout.txt").read_text(encoding="utf-8")
def meta(): return json.loads((MODEL / "training.json").read_text())

def test_the_directory_is_a_small_llama_checkpoint():
    files = {p.name for p in MODEL.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "heldout.txt",
            "README.md", "training.json", "training_curve.png"} <= files
    assert sum(p.stat().st_size for p in MODEL.iterdir()) < 8e6
    hf = json.loads((MODEL / "config.json").read_text())
    assert hf["architectures"] == ["LlamaForCausalLM"]
    assert hf["num_key_value_heads"] < hf["num_attention_heads"]                     # grouped-query
    model = from_pretrained(MODEL)
    c = model.config
    assert (c.norm, c.activation, c.positional) == ("rms", "swiglu", "rope")
    assert sum(p.numel() for p in model.parameters()) == meta()["parameters"]
    assert c.max_len == meta()["block_size"] and c.vocab_size == len(chars())

def test_transformers_loads_the_same_model_and_tokenizer():
    from transformers import AutoModelForCausalLM, AutoTokenizer
    ours, ref = from_pretrained(MODEL), AutoModelForCausalLM.from_pretrained(MODEL).eval()
    tok = AutoTokenizer.from_pretrained(MODEL)
    text = heldout()[:100]
    ids = tok(text)["input_ids"]
    assert ids == Vocab(chars(), specials=False).encode(text)                         # one id per character, ours and theirs
    assert tok.decode(ids) == text
    x = torch.tensor([ids])
    with torch.no_grad():
        a, b = ours(x), ref(x).logits
        assert ((a - b).abs().max() / b.abs().max()).item() < 1e-5                   # float32, as tests/test_checkpoints.py
        prompt = x[:, :20]
        n = ours.config.max_len - prompt.shape[1]                                     # greedy up to the trained context
        test = ours.generate(prompt, n, greedy=True, use_cache=True)
        want = ref.generate(prompt, max_new_tokens=n, do_sample=False)
    assert torch.equal(test, want)

def test_heldout_loss_is_the_stated_one():
    "float64 makes the sum independent of the machine to about 1e-13; 1e-9 leaves a wide margin. README rounds to 3 decimals."
    m = script()
    loss = m.heldout_loss(from_pretrained(MODEL), heldout(), chars(), meta()["block_size"], torch.float64)
    assert abs(loss - meta()["heldout_loss"]) < 1e-9
    stated = float(re.search(r"^(\d+\.\d{3}) nats per character", (MODEL / "README.md").read_text(), re.M).group(1))
    assert abs(loss - stated) <= 0.0005 + 1e-9
    assert loss < math.log(len(chars())) - 2                                          # far below a uniform guess (ln V)

@pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="pydoc_data.topics changes between Python versions")
def test_heldout_split_is_the_recipe_and_unseen():
    m = script()
    train_text, held_text, held = m.corpus()
    assert held_text == heldout() and held == meta()["heldout_topics"]
    from pydoc_data.topics import topics
    for name in held:                                                                # no held-out topic inside the training text
        assert topics[name].strip()[:2000] not in train_text
    assert len(train_text) == meta()["train_chars"]
