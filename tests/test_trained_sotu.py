"""The course's model that reads its context (nbs/models/sotu-llama): what its card claims, recomputed from the
shipped files in float64, the floors it must meet, transformers loading it as the same model, and chapter 14's
explorer showing its attention. The corpus is never fetched here: the held-out text ships."""
import json, math, re
from pathlib import Path
import pytest
import torch
from transformer_lit.checkpoints import from_pretrained, Tokenizer
from transformer_lit.model import assert_greedy_agrees
from transformer_lit.fast_decoding import fast_generate
from trained_helpers import ShippedModel

SOTU = ShippedModel("sotu-llama", "train_sotu_lm")     # the script: its analysis, its card and its data
MODEL, script, meta, heldout = SOTU.dir, SOTU.script, SOTU.meta, SOTU.heldout
pytestmark = pytest.mark.usefixtures("one_thread")

@pytest.fixture(scope="module")
def analysis():
    "The whole analysis, recomputed from the shipped files (float64): what the card and the floors below read."
    return script().analyse(MODEL)

def test_the_directory_is_a_small_llama_checkpoint():
    files = {p.name for p in MODEL.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "heldout.txt",
            "README.md", "training.json", "training_curve.png"} <= files
    assert (MODEL / "model.safetensors").stat().st_size < 20e6                       # the budget
    hf = json.loads((MODEL / "config.json").read_text())
    assert hf["architectures"] == ["LlamaForCausalLM"] and hf["num_key_value_heads"] < hf["num_attention_heads"]
    model, m = from_pretrained(MODEL), meta()
    c = model.config
    assert (c.norm, c.activation, c.positional) == ("rms", "swiglu", "rope")
    assert sum(p.numel() for p in model.parameters()) == m["parameters"]
    assert c.max_len == m["block_size"] >= 256 and c.vocab_size == m["vocab_size"]
    assert {k: getattr(c, k) for k in m["config"]} == m["config"]

def test_the_heldout_text_is_the_normalised_recent_addresses():
    "What the script's normalisation guarantees: printable ASCII and newlines, the five addresses of 2017-2021."
    m, text = script(), heldout()
    assert m.normalise(text) == text.strip() and text.endswith("\n")
    assert set(text) <= {"\n"} | {chr(i) for i in range(32, 127)}
    assert len(text) == meta()["heldout_chars"] and [f[:4] for f in meta()["heldout_files"]] == ["2017", "2018", "2019", "2020", "2021"]
    assert m.normalise("\u201cFree\u201d \u2014 it\u2019s 72\u00b0\u2603") == "\"Free\" -- it's 72 degrees"

def test_transformers_loads_the_same_model_and_tokenizer():
    from transformers import AutoModelForCausalLM, AutoTokenizer
    ours, ref = from_pretrained(MODEL), AutoModelForCausalLM.from_pretrained(MODEL).eval()
    tok = AutoTokenizer.from_pretrained(MODEL)
    text = heldout()[2000:2600]
    ids = tok(text)["input_ids"]
    assert ids == Tokenizer.from_file(MODEL).encode(text) and tok.decode(ids) == text
    x = torch.tensor([ids])
    with torch.no_grad():
        a, b = ours(x), ref(x).logits
        assert ((a - b).abs().max() / b.abs().max()).item() < 1e-5                   # float32, as tests/test_checkpoints.py
        prompt = x[:, :40]
        n = 96
        test = fast_generate(ours, prompt, n, greedy=True)                          # chapter 11's cached decoder
        want = ref.generate(prompt, max_new_tokens=n, do_sample=False)
    # cached float32 decoding in two libraries: equal up to the first near tie, each greedy after it
    assert_greedy_agrees(ours, test, want, prompt.shape[1], rtol=1e-5)

def test_the_stated_numbers_are_the_shipped_models(analysis):
    """float64 makes every number independent of the machine to ~1e-12 (sums of a few hundred thousand terms); 1e-8
    leaves a wide margin. The sample is drawn from float64 probabilities with a seeded generator: the same text."""
    stored = meta()["analysis"]
    assert stored.keys() == analysis.keys()
    for k, v in analysis.items():
        if isinstance(v, float): assert abs(v - stored[k]) < 1e-8, k
        elif isinstance(v, dict):      # by_position: a recomputed float64 mean per range of positions, not its stored bits
            assert v.keys() == stored[k].keys() and all(abs(v[r] - stored[k][r]) < 1e-8 for r in v), k
        elif k in ("induction_scores", "prev_scores", "window_loss", "window_mid", "window_late"):
            assert torch.allclose(torch.tensor(v, dtype=torch.float64), torch.tensor(stored[k], dtype=torch.float64), rtol=0, atol=1e-8), k
        else: assert v == stored[k], k

def test_the_card_is_what_the_training_script_writes():
    "One source for the card: README.md is exactly the text the script generates from training.json."
    assert (MODEL / "README.md").read_text(encoding="utf-8") == script().card_text(MODEL)

# -- the floors of the issue "A model that reads its context" --------------------------------------------------------
def test_it_keeps_using_its_context_past_sixteen_tokens(analysis):
    """The issue's floor: the mean loss at positions >= 128 is below the mean at 16-31 by more than the spread of that
    mean over the windows (its standard error; the card states the ratio). And the loss falls from each range of
    positions to the next, all the way along the window."""
    a = analysis
    late, mid = torch.tensor(a["window_late"], dtype=torch.float64), torch.tensor(a["window_mid"], dtype=torch.float64)
    diff = mid - late                                                               # per window
    assert abs(diff.mean().item() - (a["mid"] - a["late"])) < 1e-9                   # the same windows, equal sizes
    assert abs((diff.std() / len(diff) ** 0.5).item() - a["diff_se"]) < 1e-9
    assert a["mid"] - a["late"] > a["diff_se"] > 0
    bins = list(a["by_position"].values())
    assert all(later < earlier for earlier, later in zip(bins, bins[1:]))          # every range below the one before
    assert a["heldout_loss"] < math.log(meta()["vocab_size"]) - 2

def test_a_passage_written_twice_costs_at_most_half_the_second_time(analysis):
    assert analysis["rep_second"] <= 0.5 * analysis["rep_first"]

def test_an_induction_head_that_the_copying_needs(analysis):
    "A head scores >= 10x a head that spreads its weight evenly, and zeroing it raises the second-copy loss by > 10 %."
    a = analysis
    assert a["induction_score"] >= 10 * a["induction_even"]
    assert a["ablated_second"] > 1.1 * a["rep_second"]
    layer, head = a["induction_head"]
    assert a["induction_scores"][layer][head] == a["induction_score"] == max(max(r) for r in a["induction_scores"])

def test_the_sample_is_the_corpus_english(analysis):
    "Most of the sample's words are words of the held-out addresses (a measured proxy for 'recognisably the corpus')."
    words = lambda s: re.findall(r"[a-z]+", s.lower())
    known = set(words(heldout()))
    sample = words(analysis["sample"])
    assert len(sample) >= 40 and sum(w in known for w in sample) / len(sample) >= 0.8


# -- chapter 14's attention explorer shows this model's attention ----------------------------------------------------
NB14 = Path(__file__).resolve().parents[1] / "nbs" / "14_checkpoints.ipynb"
SHOWN = {"\u2423": " ", "\u21b5": "\n", "\u21e5": "\t"}                              # how the explorer draws blanks

def explorer_data():
    "The attention explorer's data as chapter 14's page carries it (the JSON inside its saved HTML output)."
    for c in json.loads(NB14.read_text(encoding="utf-8"))["cells"]:
        for o in c.get("outputs", []):
            h = o.get("data", {}).get("text/html", "")
            h = "".join(h) if isinstance(h, list) else h
            if 'class="tl-attn"' in h:
                m = re.search(r'<script type="application/json" class="tla-data">(.*?)</script>', h, re.S)
                return json.loads(m.group(1).replace("<\\/", "</"))
    raise AssertionError("chapter 14 has no saved attention explorer: execute the notebook (tools/run_nb.py)")

def test_the_explorer_on_the_page_shows_the_models_attention():
    "Its weights, read back from the page, are transformers' eager attention on the same tokens, to the page's rounding."
    from transformers import AutoModelForCausalLM
    ref = AutoModelForCausalLM.from_pretrained(MODEL, attn_implementation="eager").eval()
    d, tok, held = explorer_data(), Tokenizer.from_file(MODEL), heldout()
    labels = [["".join(SHOWN.get(ch, ch) for ch in l) for l in text] for text in d["labels"]]
    texts = ["".join(l) for l in labels]
    assert 3 <= len(texts) <= 4 and all(t in held or (t[: len(t) // 2] in held and t[: len(t) // 2].strip() == t[len(t) // 2:].strip()) for t in texts)
    scale = d["scale"]
    for t, text in enumerate(texts):
        ids = tok.encode(text)
        assert [tok.decode([i]) for i in ids] == labels[t]                        # one label per token, as the tokenizer cuts it
        with torch.no_grad(): want = torch.stack(ref(torch.tensor([ids]), output_attentions=True).attentions, 1)[0].double()   # (layers, H, T, T)
        T = len(ids)
        assert (len(d["maps"][t]), len(d["maps"][t][0])) == tuple(want.shape[:2])  # every layer, every head
        for l, layer in enumerate(d["maps"][t]):
            for h, rows in enumerate(layer):
                assert len(rows) == T and all(len(r) <= i + 1 for i, r in enumerate(rows))   # causal: nothing above the diagonal
                w = torch.zeros(T, T, dtype=torch.float64)
                for i, r in enumerate(rows): w[i, :len(r)] = torch.tensor(r, dtype=torch.float64) / scale
                # rounding to 1/scale, plus float32 differences between the two implementations (~1e-6)
                assert (w - want[l, h]).abs().max() <= 0.5 / scale + 1e-5, (t, l, h)
