"""`evaluate` scores the text the user gets against the references as written.

A tiny model memorizes a corpus whose targets hold capitals, digits, punctuation
and spacing that a tokenizer could lose ("342" beside "3 4 2"). Its translations
of the training pairs must come back byte-identical; every score `evaluate`
reports must equal the one computed here, by sacrebleu and a plain string
comparison, on the raw strings of the TSV file.
"""

import json

import keras
import pytest
import sacrebleu
import tensorflow as tf

from keras_selfattn import serving, text
from keras_selfattn.inference import Translator, evaluate, format_metrics
from keras_selfattn.models import ModelConfig, build_seq2seq
from keras_selfattn.text.tokenizers import JOINER

# Targets a lowercasing, space-joining tokenizer could not give back.
PAIRS = [
    ("alpha", "Hello, world!"),
    ("bravo", "342"),
    ("charlie", "3 4 2"),
    ("delta", "It's 5 o'clock."),
    ("echo", "Paris (France)"),
    ("foxtrot", "Tel. 555-0199"),
    ("golf", "Dr. Smith, PhD"),
    ("hotel", "2024-03-05"),
    ("india", "OK?"),
    ("juliett", "A-b C"),
    ("kilo", "x=3.5%"),
    ("lima", "NaN!"),
    ("mike", "é à L'été"),
    ("november", "Go."),
    ("oscar", "$10, not $1"),
    ("papa", "Wait... what?!"),
]
MODEL = ModelConfig(
    num_hiddens=32,
    num_heads=2,
    num_layers=1,
    ffn_hiddens=64,
    dropout=0.0,
    decoder_units=64,
    embedding_dim=16,
    max_source_len=4,
    max_target_len=16,
)


def _sacrebleu_scores(hypotheses, references):
    return {
        "chrf": sacrebleu.corpus_chrf(hypotheses, [references]).score,
        "bleu": sacrebleu.corpus_bleu(hypotheses, [references]).score,
        "exact_match": sum(h == r for h, r in zip(hypotheses, references))
        / len(references),
    }


# Text that looks like the marks: WordPiece's "##", a literal joiner U+FFED.
TRICKY = ["C# ## #x ##y", f"a {JOINER} b{JOINER}c {JOINER}", "«Oui», dit-il."]


@pytest.mark.parametrize("kind", ["word", "char", "subword"])
def test_every_target_comes_back_byte_identical_through_ids(kind):
    """tokenize -> ids -> detokenize gives each target back as written."""
    targets = [target for _, target in PAIRS] + TRICKY
    for ops in (
        ("tensorflow_text", "core") if kind != "subword" else ("tensorflow_text",)
    ):
        config = text.TokenizerConfig.for_target(kind, ops=ops, split_digits=True)
        tokenizer = text.build_tokenizer(targets, config)
        ids = tokenizer.encode(tf.constant(targets))
        assert text.UNK_ID not in ids.flat_values.numpy().tolist()
        back = [t.decode("utf-8") for t in tokenizer.decode(ids).numpy()]
        assert back == targets, (kind, ops)
    # Digits split into tokens, and still "342" != "3 4 2" after the round trip.
    if kind != "char":
        assert ids[1].numpy().tolist() != ids[2].numpy().tolist()


# Pairs the model never sees: evaluate's scores are then neither all 0 nor all 1.
UNSEEN = [("quebec", "Québec, QC"), ("romeo", "7 Days"), ("sierra", "Yes!")]


@pytest.fixture(scope="module")
def memorized():
    """A word-target model trained (model.fit, about 30 s) until it writes PAIRS."""
    keras.utils.set_random_seed(0)
    tokenizer = text.PairTokenizer.build(
        PAIRS,
        text.TokenizerConfig(kind="word", split_digits=True),
        text.TokenizerConfig.for_target("word", split_digits=True),
    )
    model = build_seq2seq(
        tokenizer.source_vocab_size, tokenizer.target_vocab_size, MODEL, seed=0
    )
    model.compile(
        optimizer=keras.optimizers.Adam(1e-2),
        loss=keras.losses.SparseCategoricalCrossentropy(
            from_logits=True, ignore_class=text.PAD_ID
        ),
    )
    model.fit(
        text.make_dataset(PAIRS * 8, tokenizer, batch_size=32),
        epochs=20,
        verbose=0,
        shuffle=False,  # the dataset shuffles itself
    )
    return Translator(model, tokenizer, MODEL.max_source_len, MODEL.max_target_len)


@pytest.mark.slow
def test_evaluate_scores_the_output_against_the_tsv_as_written(memorized, tmp_path):
    data = text.write_pairs(tmp_path / "pairs.tsv", PAIRS + UNSEEN)
    pairs = text.read_pairs(data)
    hypotheses = [t.text for t in memorized.translate([s for s, _ in pairs])]
    references = [line.split("\t")[1] for line in data.read_text().splitlines()]

    # Memorized: every training target comes back byte-identical, capitals,
    # digits, punctuation and spacing ("342" and "3 4 2") included.
    assert hypotheses[: len(PAIRS)] == [target for _, target in PAIRS]

    metrics = evaluate(memorized, pairs, data=data)
    expected = _sacrebleu_scores(hypotheses, references)
    for name, value in expected.items():
        assert metrics[name] == pytest.approx(value, abs=1e-9), name
    assert 0 < metrics["exact_match"] < 1
    assert metrics["count"] == len(references) == len(PAIRS) + len(UNSEEN)
    assert metrics["data"] == str(data)
    assert metrics["short_references"] == sum(
        len(sacrebleu.BLEU().tokenizer(r).split()) < 4 for r in references
    )
    assert [e["reference"] for e in metrics["examples"]] == references[:10]
    report = format_metrics(metrics)
    assert report.splitlines()[0] == (
        f"evaluated: {data}: {len(references)} pairs, greedy search"
    )
    assert report.splitlines()[1].lstrip().startswith("chrF ")  # chrF first
    assert "BLEU is 0 for targets under 4 tokens" in report
    assert "held-out" not in report
    json.dumps({k: v for k, v in metrics.items() if k != "examples"})

    # Targets under 4 tokens: perfect output, BLEU 0; the report says why.
    short = [p for p in PAIRS if p[1] in ("OK?", "Go.", "NaN!")]
    metrics = evaluate(memorized, short)
    assert (metrics["exact_match"], metrics["bleu"]) == (1.0, 0.0)
    assert metrics["chrf"] == pytest.approx(100.0)
    assert metrics["short_references"] == 3
    assert "(3 of the 3 references here)" in format_metrics(metrics)


@pytest.mark.slow
def test_served_text_equals_the_translator_text(memorized, tmp_path):
    """The export's serving_default detokenizes with the same graph code."""
    sources = [s for s, _ in PAIRS + UNSEEN] + ["unknown words", ""]
    version_dir = serving.export_translator(memorized, tmp_path / "translator")
    loaded = tf.saved_model.load(str(version_dir))
    served = loaded.signatures["serving_default"](text=tf.constant(sources))
    served_text = [t.decode("utf-8") for t in served["translation"].numpy()]
    assert served_text == [t.text for t in memorized.translate(sources)]
    assert served_text[: len(PAIRS)] == [target for _, target in PAIRS]
