"""Scoring translations against references as written: `evaluate`, `format_metrics`.

sacrebleu's convention: the hypotheses are the detokenized translations the
user gets and the references are the target strings exactly as given.

Why here, below `keras_selfattn.training`: validation during training scores its
sample the way ``keras-selfattn evaluate`` scores a test set (`training.watch`),
and import direction follows the data (text -> model -> training -> inference ->
serving -> command line). `evaluate` needs only an object with the
`keras_selfattn.translation.Translator` method ``translate``; it imports no
TensorFlow. `keras_selfattn.inference` re-exports both names.
"""

import hashlib
import itertools
import os
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only: scoring imports no TensorFlow
    from keras_selfattn.translation import Translator

__all__ = ["CorpusScores", "evaluate", "format_metrics", "score_translations"]

# Sources translated together by `evaluate`: the translator's own decoding batch,
# so that streaming decodes the same batches as translating the list at once.
EVALUATE_BATCH = 256
# Example translations `evaluate` keeps.
EXAMPLES = 10


def evaluate(
    translator: "Translator",
    pairs: Iterable[tuple[str, str]],
    beam_size: int | None = None,
    data: str | os.PathLike[str] | None = None,
    batch_size: int = EVALUATE_BATCH,
) -> dict[str, Any]:
    """Scores translations of ``pairs`` against their references, as written.

    sacrebleu's convention: the hypotheses are the detokenized translations the
    user gets (`Translation.text`, the same text the exported model serves) and
    the references are the target strings exactly as given (as written in the
    TSV file), never passed through the target tokenizer. So a model that writes
    "3 4 2" for the reference "342", or "paris" for "Paris", is scored wrong.

    BLEU is 0 for targets under 4 tokens: it multiplies 1- to 4-gram precisions
    (of sacrebleu's default 13a tokens), a sentence under 4 tokens has no 4-gram,
    and a corpus of such targets scores 0 however good the output (in a corpus
    with longer targets they only add no 4-grams). Read chrF first;
    ``short_references`` counts them.

    ``pairs`` is read ``batch_size`` pairs at a time (never made a list): each
    batch is translated and added to the running corpus statistics
    (`CorpusScores`), so memory is bounded by a batch, the first examples and a
    16-byte hash per distinct translation, not by the input; the scores equal
    sacrebleu's ``corpus_score`` of the whole corpus.

    Args:
        translator: a `Translator`.
        pairs: (source, reference) pairs, any iterable (a list, a generator
            reading a file).
        beam_size: None: the translator's search (its `SearchSettings`); 1
            for greedy search, more for a beam of that width.
        data: what the pairs are, for the report (e.g. the file's path); kept as
            ``metrics["data"]``.
        batch_size: the pairs translated together (a positive int).

    Returns:
        A dict of ``chrf`` and ``bleu`` (sacrebleu corpus scores, 0-100),
        ``exact_match`` (share of translations equal to their reference, as
        strings), ``count`` (pairs), ``distinct_translations`` (how many
        different translations), ``short_references`` (references with fewer
        than 4 BLEU tokens), ``data``, ``beam_size``, ``signatures`` (sacrebleu's,
        per metric) and ``examples`` (the first few source / reference /
        translation).
    """
    settings = translator.settings_for(beam_size)
    scores, examples = _scored(translator, pairs, beam_size, batch_size)
    if not scores.count:
        raise ValueError("evaluate needs at least one pair. Received: 0 pairs")
    return {
        **scores.result(),
        "count": scores.count,
        "distinct_translations": scores.distinct_translations,
        "data": None if data is None else str(data),
        "beam_size": 1 if settings.search == "greedy" else settings.beam_size,
        "examples": examples,
    }


def _scored(
    translator: "Translator",
    pairs: Iterable[tuple[str, str]],
    beam_size: int | None,
    batch_size: int,
) -> tuple["CorpusScores", list[dict[str, str]]]:
    """`evaluate`'s loop: the `CorpusScores` of ``pairs`` translated a batch at a
    time, and the first `EXAMPLES` source / reference / translation."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int):
        raise TypeError(f"batch_size must be an int. Received: {batch_size!r}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1. Received: {batch_size}")
    scores = CorpusScores()
    examples: list[dict[str, str]] = []
    for batch in _batches(pairs, batch_size):
        sources = [source for source, _ in batch]
        references = [reference for _, reference in batch]
        translations = translator.translate(sources, beam_size=beam_size)
        hypotheses = [t.text for t in translations]
        scores.add(hypotheses, references)
        examples.extend(
            {"source": s, "reference": r, "translation": h}
            for s, r, h in zip(sources, references, hypotheses)
        )
        del examples[EXAMPLES:]
    return scores, examples


def _batches(
    pairs: Iterable[tuple[str, str]], size: int
) -> Iterator[list[tuple[str, str]]]:
    """``pairs`` in lists of at most ``size``, read as they are needed."""
    iterator = iter(pairs)
    while batch := list(itertools.islice(iterator, size)):
        yield batch


class CorpusScores:
    """chrF, BLEU and exact match of a corpus added a batch at a time.

    Keeps sacrebleu's sufficient statistics summed over the batches (BLEU: the
    hypothesis and reference lengths and the n-gram match and total counts;
    chrF: the character and word n-gram hypothesis, reference and match counts),
    so the scores equal sacrebleu's ``corpus_score`` of the whole corpus while
    memory holds a batch only. sacrebleu has no public API for this: the metrics'
    ``_check_corpus_score_args``, ``_extract_corpus_statistics`` and
    ``_compute_score_from_stats`` (sacrebleu 2) are what its own ``corpus_score``
    calls. ``distinct_translations`` counts the different hypotheses by a set of
    their 16-byte BLAKE2 hashes (fixed size each, whatever the length of the
    text). sacrebleu's 13a tokenizer keeps its own cache of the lines it
    tokenized, at most 2**16 of them.
    """

    def __init__(self) -> None:
        from sacrebleu.metrics import BLEU, CHRF

        self._bleu, self._chrf = BLEU(), CHRF()
        self._bleu_stats: list[int] | None = None
        self._chrf_stats: list[int] | None = None
        self._hashes: set[bytes] = set()
        self.count = 0
        self.exact_matches = 0
        self.short_references = 0

    def add(self, hypotheses: Sequence[str], references: Sequence[str]) -> None:
        """Adds a batch of translations and their references (as many of each)."""
        if len(hypotheses) != len(references):
            raise ValueError(
                "hypotheses and references must be as many. Received: "
                f"{len(hypotheses)} hypotheses and {len(references)} references"
            )
        if not hypotheses:
            return
        self._bleu._check_corpus_score_args(hypotheses, [references])
        self._bleu_stats = _summed(
            self._bleu_stats,
            self._bleu._extract_corpus_statistics(hypotheses, [references]),
        )
        self._chrf_stats = _summed(
            self._chrf_stats,
            self._chrf._extract_corpus_statistics(hypotheses, [references]),
        )
        tokenize = self._bleu.tokenizer
        self.short_references += sum(len(tokenize(r).split()) < 4 for r in references)
        self.exact_matches += sum(h == r for h, r in zip(hypotheses, references))
        self.count += len(hypotheses)
        self._hashes.update(
            hashlib.blake2b(h.encode("utf-8"), digest_size=16).digest()
            for h in hypotheses
        )

    @property
    def distinct_translations(self) -> int:
        """How many different translations were added."""
        return len(self._hashes)

    def result(self) -> dict[str, Any]:
        """`evaluate`'s scores: ``chrf``, ``bleu``, ``exact_match``,
        ``short_references`` and sacrebleu's ``signatures``."""
        if self._bleu_stats is None or self._chrf_stats is None:
            raise ValueError("no translations to score. Received: 0 pairs")
        bleu = self._bleu._compute_score_from_stats(self._bleu_stats)
        chrf = self._chrf._compute_score_from_stats(self._chrf_stats)
        return {
            "chrf": float(chrf.score),
            "bleu": float(bleu.score),
            "exact_match": self.exact_matches / self.count,
            "short_references": self.short_references,
            "signatures": {
                "chrf": str(self._chrf.get_signature()),
                "bleu": str(self._bleu.get_signature()),
            },
        }


def _summed(total: list[int] | None, segments: Sequence[Sequence[int]]) -> list[int]:
    """``total`` plus every segment's statistics, element by element."""
    summed = list(total) if total is not None else [0] * len(segments[0])
    for segment in segments:
        for index, value in enumerate(segment):
            summed[index] += value
    return summed


def score_translations(
    hypotheses: Sequence[str], references: Sequence[str]
) -> dict[str, Any]:
    """`evaluate`'s scores of a whole corpus at once (`CorpusScores`): ``chrf``,
    ``bleu``, ``exact_match``, ``short_references`` and sacrebleu's
    ``signatures``."""
    scores = CorpusScores()
    scores.add(hypotheses, references)
    return scores.result()


def format_metrics(metrics: dict[str, Any], examples: int = 5) -> str:
    """The text report of `evaluate`'s metrics: what was scored, then the scores.

    Args:
        metrics: the dict `evaluate` returns.
        examples: how many example translations to list.

    Returns:
        str, several lines, no final newline.
    """
    search = "greedy" if metrics["beam_size"] == 1 else f"beam {metrics['beam_size']}"
    data = metrics.get("data") or "the given pairs"
    lines = [
        f"evaluated: {data}: {metrics['count']} pairs, {search} search",
        (
            f"  chrF {metrics['chrf']:.2f}  BLEU {metrics['bleu']:.2f}  "
            f"exact match {100 * metrics['exact_match']:.2f}%  (sacrebleu: the "
            "translations as output against the references as written)"
        ),
        (
            f"  BLEU is 0 for targets under 4 tokens ({metrics['short_references']} "
            f"of the {metrics['count']} references here): read chrF first"
        ),
    ]
    for example in metrics["examples"][:examples]:
        mark = "ok " if example["translation"] == example["reference"] else "ERR"
        lines.append(
            f"  {mark} {example['source']!r:40} -> {example['translation']!r}  "
            f"(reference {example['reference']!r})"
        )
    return "\n".join(lines)
