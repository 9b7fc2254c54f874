"""Chapter 14's `Tokenizer` against the `tokenizers` library (the reference that wrote the files): the same ids on
the shipped models' held-out texts, on byte-pair tokenizers trained here on random text, and on generated strings;
decoding inverts encoding; the files it cannot read are refused by name."""
import itertools, json, random
from pathlib import Path
import pytest
from hypothesis import given, strategies as st
from tokenizers import Tokenizer as Reference, Regex, models, pre_tokenizers, decoders, trainers
from transformer_lit.checkpoints import Tokenizer

MODELS = Path(__file__).resolve().parents[1] / "nbs" / "models"
PIECES = r"'(?:[sdmt]|ll|ve|re)| ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+"
ALPHABET = "\n" + "".join(chr(c) for c in range(32, 127))

def trained(tmp_path, text, vocab_size, pattern=PIECES, alphabet=ALPHABET):
    "A BPE tokenizer.json written by the tokenizers library, trained on `text`."
    ref = Reference(models.BPE())
    ref.pre_tokenizer = pre_tokenizers.Split(Regex(pattern), behavior="isolated")
    ref.decoder = decoders.Fuse()
    ref.train_from_iterator([text], trainers.BpeTrainer(vocab_size=vocab_size, initial_alphabet=list(alphabet), show_progress=False))
    path = tmp_path / f"bpe-{vocab_size}.json"; ref.save(str(path))
    return ref, path

def words(seed, n=3000):
    "Pseudo-English: words from a small stock (so merges form), numbers, punctuation, spaces and newlines."
    rng = random.Random(seed)
    stock = ["the", "state", "union", "of", "and", "nation", "we", "shall", "it's", "they'll", "Congress", "1790", "42"]
    out = []
    for _ in range(n):
        w = rng.choice(stock) if rng.random() < 0.8 else "".join(rng.choice(ALPHABET[1:]) for _ in range(rng.randint(1, 6)))
        out.append(w + rng.choice([" ", " ", " ", ", ", ".\n", "\n\n", "  "]))
    return "".join(out)

@pytest.mark.parametrize("name", [d.name for d in sorted(MODELS.iterdir()) if (d / "tokenizer.json").is_file() and (d / "heldout.txt").is_file()])
def test_the_shipped_tokenizers_encode_as_the_reference(name):
    d = MODELS / name
    text = (d / "heldout.txt").read_text(encoding="utf-8")
    ours, ref = Tokenizer.from_file(d), Reference.from_file(str(d / "tokenizer.json"))
    ids = ours.encode(text)
    assert ids == ref.encode(text).ids and ours.decode(ids) == text == ref.decode(ids)
    assert len(ours) == ref.get_vocab_size()

@pytest.mark.parametrize("vocab_size", [120, 300, 1000])
def test_trained_here_encode_as_the_reference(tmp_path, vocab_size):
    ref, path = trained(tmp_path, words(0), vocab_size)
    ours = Tokenizer.from_file(path)
    for seed in (1, 2):
        text = words(seed, 800)
        assert ours.encode(text) == ref.encode(text).ids and ours.decode(ours.encode(text)) == text
    assert len(ours.encode("the union")) < len("the union")                        # merges did happen

@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    ref, path = trained(tmp_path_factory.mktemp("bpe"), words(0), 400)
    return Tokenizer.from_file(path), ref

@given(st.text(alphabet=ALPHABET, max_size=80))
def test_any_text_over_the_alphabet(pair, text):
    ours, ref = pair
    ids = ours.encode(text)
    assert ids == ref.encode(text).ids and ours.decode(ids) == text

def test_pieces_cover_the_text_and_merges_stay_inside_them(pair):
    ours, _ = pair
    text = "We shall -- in 1790, they'll say -- keep\n\n  it."
    pieces = ours.pieces(text)
    assert "".join(pieces) == text and pieces[:3] == ["We", " shall", " --"]
    ends = lambda parts: set(itertools.accumulate(len(x) for x in parts))             # where each part ends in the text
    assert ends(pieces) <= ends([ours.decode([i]) for i in ours.encode(text)])      # every piece's end is a token's end

def test_a_word_level_character_tokenizer(tmp_path):
    "The other kind the course ships (pydoc-char-llama): one token per character, no merges."
    ref = Reference(models.WordLevel({c: i for i, c in enumerate("ab \n")}, unk_token=None))
    ref.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    ref.save(str(tmp_path / "t.json"))
    ours = Tokenizer.from_file(tmp_path / "t.json")
    assert ours.encode("ab a\n") == [0, 1, 2, 0, 3] == ref.encode("ab a\n").ids

def test_refused_files_name_what_is_not_supported(tmp_path):
    _, path = trained(tmp_path, words(0), 200)
    good = json.loads(path.read_text())
    cases = {"normalizer": dict(good, normalizer={"type": "Lowercase"}),
             "pre_tokenizer": dict(good, pre_tokenizer={"type": "Whitespace"}),
             "model type 'Unigram'": dict(good, model={"type": "Unigram", "vocab": []}),
             "dropout": dict(good, model=dict(good["model"], dropout=0.1))}
    for words_, t in cases.items():
        bad = tmp_path / "bad.json"; bad.write_text(json.dumps(t))
        with pytest.raises(ValueError, match="not supported") as e: Tokenizer.from_file(bad)
        assert words_ in str(e.value) and "bad.json" in str(e.value)
