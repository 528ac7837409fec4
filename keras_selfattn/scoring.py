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

import os
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # annotations only: scoring imports no TensorFlow
    from keras_selfattn.translation import Translator

__all__ = ["evaluate", "format_metrics", "score_translations"]


def evaluate(
    translator: "Translator",
    pairs: Iterable[tuple[str, str]],
    beam_size: int = 1,
    data: str | os.PathLike[str] | None = None,
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

    Args:
        translator: a `Translator`.
        pairs: (source, reference) pairs.
        beam_size: 1 for greedy search.
        data: what the pairs are, for the report (e.g. the file's path); kept as
            ``metrics["data"]``.

    Returns:
        A dict of ``chrf`` and ``bleu`` (sacrebleu corpus scores, 0-100),
        ``exact_match`` (share of translations equal to their reference, as
        strings), ``count`` (pairs), ``distinct_translations`` (how many
        different translations), ``short_references`` (references with fewer
        than 4 BLEU tokens), ``data``, ``beam_size``, ``signatures`` (sacrebleu's,
        per metric) and ``examples`` (the first few source / reference /
        translation).
    """
    pairs = list(pairs)
    if not pairs:
        raise ValueError("evaluate needs at least one pair. Received: 0 pairs")
    sources = [source for source, _ in pairs]
    references = [reference for _, reference in pairs]
    hypotheses = [t.text for t in translator.translate(sources, beam_size=beam_size)]
    return {
        **score_translations(hypotheses, references),
        "count": len(pairs),
        "distinct_translations": len(set(hypotheses)),
        "data": None if data is None else str(data),
        "beam_size": beam_size,
        "examples": [
            {"source": s, "reference": r, "translation": h}
            for s, r, h in list(zip(sources, references, hypotheses))[:10]
        ],
    }


def score_translations(
    hypotheses: Sequence[str], references: Sequence[str]
) -> dict[str, Any]:
    """`evaluate`'s scores: ``chrf``, ``bleu``, ``exact_match``,
    ``short_references`` and sacrebleu's ``signatures``."""
    from sacrebleu.metrics import BLEU, CHRF

    bleu, chrf = BLEU(), CHRF()
    bleu_score = bleu.corpus_score(hypotheses, [references]).score
    chrf_score = chrf.corpus_score(hypotheses, [references]).score
    short = sum(len(bleu.tokenizer(r).split()) < 4 for r in references)
    matches = [h == r for h, r in zip(hypotheses, references)]
    return {
        "chrf": float(chrf_score),
        "bleu": float(bleu_score),
        "exact_match": float(np.mean(matches)),
        "short_references": int(short),
        "signatures": {
            "chrf": str(chrf.get_signature()),
            "bleu": str(bleu.get_signature()),
        },
    }


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
