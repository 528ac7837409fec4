"""`evaluate` reads its pairs a batch at a time: the scores equal sacrebleu's on
the whole corpus, and memory does not grow with the input.

A fake translator stands for the model (scoring needs only ``translate``); the
references are compared with sacrebleu's ``corpus_bleu`` / ``corpus_chrf`` and a
plain string comparison computed here on the full lists.
"""

import itertools
import random
import tracemalloc
import types

import pytest
import sacrebleu

from keras_selfattn.scoring import CorpusScores, evaluate, score_translations
from keras_selfattn.search_settings import SearchSettings
from keras_selfattn.text.corpus import iter_pairs, write_pairs

WORDS = ["le", "la", "un", "chat", "chien", "3", "4", "2", "Paris", "!", ".", ","]
WORDS += ["été", "L'été", "x=3.5%", "Dr.", "Smith"]


class FakeTranslator:
    """Translates a source to its first words (few distinct translations), or
    (``copies``) to the reference for every third source; records the batches it
    was given."""

    def __init__(self, words=3, copies=True):
        self.words = words
        self.copies = copies
        self.batches = []

    settings = SearchSettings()

    def settings_for(self, beam_size=None):
        return (
            self.settings if beam_size is None else self.settings.with_beam(beam_size)
        )

    def translate(self, texts, beam_size=None):
        self.batches.append(len(texts))
        return [types.SimpleNamespace(text=self.text_of(t)) for t in texts]

    def text_of(self, source):
        number, _, rest = source.partition(" ")
        if self.copies and int(number) % 3 == 0:
            return _reference(int(number))
        return " ".join(rest.split()[: self.words])


def _reference(i):
    generator = random.Random(i)
    return " ".join(generator.choices(WORDS, k=generator.randint(1, 9)))


def _pairs(count, references=None):
    """``count`` pairs generated as they are read: "i words..." -> a reference
    (one of ``references`` different ones, or each its own)."""
    for i in range(count):
        generator = random.Random(-i)
        words = generator.choices(WORDS, k=generator.randint(1, 12))
        yield f"{i} {' '.join(words)}", _reference(i % (references or count))


@pytest.mark.parametrize("batch_size", [1, 7, 64, 256, 1000])
def test_scores_equal_sacrebleu_on_the_whole_file(tmp_path, batch_size):
    data = write_pairs(tmp_path / "pairs.tsv", _pairs(700))
    pairs = list(iter_pairs(data))
    translator = FakeTranslator()
    hypotheses = [translator.text_of(source) for source, _ in pairs]
    references = [reference for _, reference in pairs]

    metrics = evaluate(translator, iter_pairs(data), data=data, batch_size=batch_size)

    bleu, chrf = sacrebleu.BLEU(), sacrebleu.CHRF()
    assert metrics["bleu"] == bleu.corpus_score(hypotheses, [references]).score
    assert metrics["chrf"] == chrf.corpus_score(hypotheses, [references]).score
    assert metrics["bleu"] == sacrebleu.corpus_bleu(hypotheses, [references]).score
    assert metrics["chrf"] == sacrebleu.corpus_chrf(hypotheses, [references]).score
    assert 0 < metrics["bleu"] < 100 and 0 < metrics["chrf"] < 100
    assert metrics["exact_match"] == sum(
        h == r for h, r in zip(hypotheses, references)
    ) / len(pairs)
    assert metrics["short_references"] == sum(
        len(sacrebleu.BLEU().tokenizer(r).split()) < 4 for r in references
    )
    assert metrics["distinct_translations"] == len(set(hypotheses))
    assert metrics["count"] == len(pairs) == 700
    assert metrics["data"] == str(data) and metrics["beam_size"] == 1
    assert metrics["examples"] == [
        {"source": s, "reference": r, "translation": h}
        for (s, r), h in zip(pairs[:10], hypotheses)
    ]
    assert metrics["signatures"] == {
        "chrf": str(chrf.get_signature()),
        "bleu": str(bleu.get_signature()),
    }
    assert max(translator.batches) == min(batch_size, 700)
    assert sum(translator.batches) == 700
    assert metrics == {**score_translations(hypotheses, references), **metrics}


def test_the_pairs_are_read_a_batch_at_a_time():
    """No list of the input: when the first batch is translated, only that batch
    has been read; the input may be endless as long as it is consumed."""
    read = []

    def counted(pairs):
        for pair in pairs:
            read.append(pair)
            yield pair

    class Checking(FakeTranslator):
        def translate(self, texts, beam_size=None):
            assert len(read) <= sum(self.batches) + len(texts) + 1
            return super().translate(texts, beam_size)

    translator = Checking()
    evaluate(translator, counted(_pairs(1000)), batch_size=100)
    assert translator.batches == [100] * 10
    stopped = CorpusScores()
    endless = ((str(i), "x") for i in itertools.count())
    for batch in itertools.islice(
        iter(lambda: list(itertools.islice(endless, 5)), None), 3
    ):
        stopped.add([s for s, _ in batch], [r for _, r in batch])
    assert stopped.count == 15


def _peak_bytes(path):
    tracemalloc.start()
    try:
        evaluate(FakeTranslator(words=1, copies=False), iter_pairs(path), batch_size=64)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_memory_does_not_grow_with_the_input(tmp_path):
    """The peak memory of scoring a file of 10 N pairs is that of N pairs: a
    batch, the examples and a hash per distinct translation (here a word each),
    not the input. sacrebleu's 13a tokenizer caches the lines it tokenized (up to
    2**16, its own bound): the references repeat 40 strings, so that the cache
    stays small and what is measured is what evaluate keeps."""
    small = write_pairs(tmp_path / "small.tsv", _pairs(500, references=40))
    large = write_pairs(tmp_path / "large.tsv", _pairs(5_000, references=40))
    assert large.stat().st_size > 9 * small.stat().st_size
    evaluate(FakeTranslator(), iter_pairs(small))  # sacrebleu's imports, compiled
    small_peak, large_peak = _peak_bytes(small), _peak_bytes(large)
    assert large_peak < 1.5 * small_peak, (small_peak, large_peak)


@pytest.mark.parametrize(
    "pairs, batch_size, error, message",
    [
        ([], 64, ValueError, "evaluate needs at least one pair. Received: 0 pairs"),
        (iter(()), 64, ValueError, "Received: 0 pairs"),
        ([("a", "b")], 0, ValueError, "batch_size must be at least 1. Received: 0"),
        ([("a", "b")], 2.0, TypeError, "batch_size must be an int. Received: 2.0"),
    ],
)
def test_bad_input_is_named(pairs, batch_size, error, message):
    with pytest.raises(error, match=message.replace(".", r"\.")):
        evaluate(FakeTranslator(), pairs, batch_size=batch_size)


def test_corpus_scores_refuse_unequal_batches():
    with pytest.raises(ValueError, match="2 hypotheses and 1 references"):
        CorpusScores().add(["a", "b"], ["a"])
    with pytest.raises(ValueError, match="Received: 0 pairs"):
        CorpusScores().result()
