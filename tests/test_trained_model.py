"""The course's trained model (nbs/models/pydoc-char-llama): transformers loads it as the same model, and its
held-out loss, recomputed from the shipped files, is the number its README and training.json state."""
import json, math, re, sys
import pytest
import torch
from transformer_lit.checkpoints import from_pretrained
from transformer_lit.train import Vocab, LMData, evaluate_loss
from transformer_lit.model import assert_greedy_agrees
from transformer_lit.decoding import lm_generate, seq2seq_generate, lm_beam_search, seq2seq_beam_search, new_cache
from transformer_lit.fast_decoding import fast_generate, new_static_cache
from trained_helpers import ShippedModel

PYDOC = ShippedModel("pydoc-char-llama", "train_pydoc_lm")   # the script: its corpus recipe and tokenizer
MODEL, script, meta, heldout = PYDOC.dir, PYDOC.script, PYDOC.meta, PYDOC.heldout
pytestmark = pytest.mark.usefixtures("one_thread")

def chars():
    "The vocabulary in id order, read from tokenizer.json."
    vocab = json.loads((MODEL / "tokenizer.json").read_text(encoding="utf-8"))["model"]["vocab"]
    return sorted(vocab, key=vocab.get)

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
        test = lm_generate(ours, prompt, n, greedy=True, use_cache=True)
        want = ref.generate(prompt, max_new_tokens=n, do_sample=False)
    # two libraries' cached float32 decoding: logits within 1e-5 of their scale (asserted above), so the texts agree up to
    # the first near tie (top-2 gap under twice that) and each stays greedy after it
    assert_greedy_agrees(ours, test, want, prompt.shape[1], rtol=1e-5)

def test_heldout_loss_is_the_stated_one():
    "float64 makes the sum independent of the machine to about 1e-13; 1e-9 leaves a wide margin. README rounds to 3 decimals."
    m = script()
    loss = m.heldout_loss(from_pretrained(MODEL), heldout(), chars(), meta()["block_size"], torch.float64)
    assert abs(loss - meta()["heldout_loss"]) < 1e-9
    stated = float(re.search(r"^(\d+\.\d{3}) nats per character", (MODEL / "README.md").read_text(), re.M).group(1))
    assert abs(loss - stated) <= 0.0005 + 1e-9
    assert loss < math.log(len(chars())) - 2                                          # far below a uniform guess (ln V)

def test_the_card_is_what_the_training_script_writes():
    "One source for the card: README.md is exactly the text the script generates from training.json and the shipped files."
    m = script()
    assert (MODEL / "README.md").read_text(encoding="utf-8") == m.readme_text(MODEL, meta(), from_pretrained(MODEL).config, chars())

@pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="pydoc_data.topics changes between Python versions")
def test_heldout_split_is_the_recipe_and_unseen():
    m = script()
    train_text, held_text, held = m.corpus()
    assert held_text == heldout() and held == meta()["heldout_topics"]
    from pydoc_data.topics import topics
    for name in held:                                                                # no held-out topic inside the training text
        assert topics[name].strip()[:2000] not in train_text
    assert len(train_text) == meta()["train_chars"]

# -- the first model's heads (chapter 14 analyses the second model, sotu-llama: tests/test_trained_sotu.py) ----------
def eager_attentions(ids):
    "Every head's weights (B, layers, H, T, T), computed by transformers' eager attention: a reference apart from ours."
    from transformers import AutoModelForCausalLM
    ref = AutoModelForCausalLM.from_pretrained(MODEL, attn_implementation="eager").eval()
    with torch.no_grad(): return torch.stack(ref(ids, output_attentions=True).attentions, 1)

def test_a_previous_token_head_and_no_induction_head():
    """What chapter 14 measured on this model before the course trained sotu-llama, and the reason for that model:
    layer 3 head 3 puts 0.60 of its weight on the previous character; no head's induction score (0.008) reaches
    the 0.011 of a head that spreads its weight evenly."""
    vocab, c = Vocab(chars(), specials=False), meta()["block_size"]
    held = LMData(torch.tensor(vocab.encode(heldout())), c, vocab)
    prev = eager_attentions(held.batch(held.eval_indices()[:16])["idx"]).diagonal(-1, -2, -1).mean((0, -1))   # (layers, H)
    assert divmod(int(prev.argmax()), prev.shape[1]) == (3, 3) and abs(prev.max().item() - 0.60) < 0.005
    P = 60
    passage = held.batch(held.eval_indices()[20:21])["idx"][:, :P]                  # the chapter's passage, written twice
    ind = eager_attentions(torch.cat([passage, passage], 1)).diagonal(-(P - 1), -2, -1)[..., 1:].mean((0, -1))
    even = sum(1 / (t + 1) for t in range(P, 2 * P)) / P
    assert abs(even - 0.011) < 0.0005 and abs(ind.max().item() - 0.008) < 0.0005 and ind.max().item() < even
