"""Sentence-pair files in Python: read and write TSV, split deterministically,
filter by length.

A pair file holds one pair a line, as `pair_line` defines a line and its
problems; this reader reads a line at a time (`iter_pairs`), ``tf.data``'s a batch
at a time (`stream.pair_stream`). A name ending in ``.gz`` is read through gzip.
"""

import contextlib
import gzip
import os
import pathlib
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import NamedTuple

from keras_selfattn.text.pair_line import (
    SPACE,
    decode_line,
    parse_line,
    problem_message,
)

__all__ = [
    "PairSplits",
    "filter_pairs_by_length",
    "iter_pairs",
    "read_pairs",
    "split_pairs",
    "write_pairs",
]

Pair = tuple[str, str]


def read_pairs(
    path: str | os.PathLike,
    *,
    skip_malformed: bool = False,
    max_pairs: int | None = None,
) -> list[Pair]:
    """Reads ``source<TAB>target`` pairs from a TSV file.

    Args:
        path: the file (``.gz`` is decompressed).
        skip_malformed: skip lines without a tab or with an empty side instead of
            raising (lines that are not UTF-8 still raise).
        max_pairs: stop after this many pairs (`None`: read all).

    Returns:
        List of ``(source, target)`` `str` tuples, in file order.

    Raises:
        FileNotFoundError: the file does not exist.
        ValueError: a line has no tab, an empty source or target, or is not UTF-8;
            or the file holds no pair. The message names the file and line number,
            e.g. ``data.tsv:12: no tab character; expected 'source<TAB>target'``.

    Example:

    >>> import tempfile
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "pairs.tsv"
    >>> _ = path.write_text("Go.\\tVa !\\tCC-BY 2.0\\n")
    >>> read_pairs(path)
    [('Go.', 'Va !')]
    """
    pairs: list[Pair] = []
    with contextlib.closing(iter_pairs(path, skip_malformed=skip_malformed)) as read:
        for pair in read:
            pairs.append(pair)
            if max_pairs is not None and len(pairs) >= max_pairs:
                break
    return pairs


def iter_pairs(
    path: str | os.PathLike, *, skip_malformed: bool = False
) -> Iterator[Pair]:
    """The ``source<TAB>target`` pairs of a TSV file, read one line at a time.

    `read_pairs` without the list: memory holds a line, not the file, so a
    caller that consumes pairs as they come (`scoring.evaluate`) reads a file of
    any size. The file is checked when this is called; its lines as they are read.

    Args:
        path: the file (``.gz`` is decompressed).
        skip_malformed: skip lines without a tab or with an empty side instead of
            raising (lines that are not UTF-8 still raise).

    Returns:
        An iterator of ``(source, target)`` `str` tuples, in file order.

    Raises:
        FileNotFoundError: the file does not exist (at the call).
        IsADirectoryError: ``path`` is a directory (at the call).
        ValueError: as `read_pairs`, when the line (or the end of a file that held
            no pair) is reached.
    """
    path = pathlib.Path(path)
    if not path.exists():
        raise FileNotFoundError(f"Sentence-pair file not found: {path}")
    if path.is_dir():
        raise IsADirectoryError(
            f"Expected a sentence-pair file, got a directory: {path}"
        )
    return _pairs_of(path, skip_malformed)


def _pairs_of(path, skip_malformed):
    """`iter_pairs`' generator: the pairs of the file ``path``, then a ValueError
    if there was none."""
    opener = gzip.open if path.suffix == ".gz" else open
    found = False
    with opener(path, "rb") as f:
        for line_number, raw in _lines_of(f, path):
            line = decode_line(raw, line_number, path)
            if not line.strip(SPACE):
                continue
            pair, problem = parse_line(line)
            if problem:
                if skip_malformed:
                    continue
                raise ValueError(problem_message(path, line_number, problem, line))
            found = True
            yield pair
    if not found:
        raise ValueError(
            f"{path}: no sentence pairs found (the file is empty or has only blank "
            "or skipped lines); expected lines of 'source<TAB>target'"
        )


def _lines_of(handle, path):
    """``(number, line)`` of an open file; raises naming a cut or corrupt gzip file."""
    line_number = 0
    try:
        for line_number, raw in enumerate(handle, start=1):
            yield line_number, raw
    except (EOFError, gzip.BadGzipFile, zlib.error) as error:
        raise ValueError(
            f"{path}: the gzip file is truncated or corrupt ({error}) after "
            f"{line_number:,} lines; replace the file (check with: gzip -t FILE)"
        ) from None


def write_pairs(path: str | os.PathLike, pairs: Iterable[Pair]) -> pathlib.Path:
    """Writes pairs as ``source<TAB>target`` lines (UTF-8, ``\\n``, final newline).

    Args:
        path: the file to write (``.gz``: gzip-compressed); parent folders are made.
        pairs: iterable of ``(source, target)`` strings without tabs or newlines.

    Returns:
        The path written.

    Raises:
        ValueError: a side is empty or holds a tab or line break.

    Example:

    >>> import tempfile
    >>> path = write_pairs(pathlib.Path(tempfile.mkdtemp()) / "p.tsv", [("a", "b")])
    >>> path.read_text()
    'a\\tb\\n'
    """
    path = pathlib.Path(path)
    lines = []
    for index, (source, target) in enumerate(pairs):
        for side, text in (("source", source), ("target", target)):
            if not text.strip(SPACE) or any(c in text for c in "\t\r\n"):
                raise ValueError(
                    f"pair {index}: the {side} must be non-empty and hold no tab or "
                    f"line break. Received: {text[:60]!r}"
                )
        lines.append(f"{source}\t{target}\n")
    data = "".join(lines).encode("utf-8")
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".gz":
        data = gzip.compress(data, mtime=0)
    path.write_bytes(data)
    return path


class PairSplits(NamedTuple):
    """Train, validation and test pairs from `split_pairs`."""

    train: list[Pair]
    validation: list[Pair]
    test: list[Pair]


def split_pairs(
    pairs: Sequence[Pair],
    fractions: Sequence[float] = (0.8, 0.1, 0.1),
    *,
    seed: int = 0,
    max_validation_pairs: int | None = None,
    max_test_pairs: int | None = None,
) -> PairSplits:
    """Splits pairs into train/validation/test, deterministically and leak-free.

    The rule a streamed corpus is split by (`fingerprint_split`), applied to a
    list: each pair's source text gets a fingerprint keyed by ``seed``; among the
    first `fingerprint_split.held_out_window` pairs (all of them without caps, or
    when the list is shorter), those with the smallest fingerprints form
    validation, the next ones test; training is every pair whose source is not
    held out. Equal sources have equal fingerprints, so every translation of one
    source lands in the same split (Tatoeba has many sources with several
    translations); the result does not depend on Python's hash seed or the
    platform, nor (within the window) on the input order. Validation gets
    ``round(fraction * len(pairs))`` pairs, capped at ``max_validation_pairs``
    (test likewise), plus at most the rest of one group of equal sources.
    Within a split, pairs keep their input order.

    Args:
        pairs: sequence of ``(source, target)``.
        fractions: three non-negative numbers (train, validation, test) summing to 1.
        seed: another seed gives another split.
        max_validation_pairs: cap on the validation size (None: no cap).
        max_test_pairs: cap on the test size (None: no cap).

    Returns:
        `PairSplits(train, validation, test)`, lists of pairs.

    Example:

    >>> pairs = [(f"s{i}", f"t{i}") for i in range(10)]
    >>> [len(part) for part in split_pairs(pairs, (0.6, 0.2, 0.2))]
    [6, 2, 2]
    """
    import tensorflow as tf

    from keras_selfattn.text import fingerprint_split

    pairs = [tuple(pair) for pair in pairs]
    # The argument checks of the scan, for an empty list too (nothing to scan).
    fingerprint_split.held_out_window(fractions, max_validation_pairs, max_test_pairs)
    if not pairs:
        return PairSplits([], [], [])
    sources = tf.constant([source for source, _ in pairs], tf.string)
    targets = tf.constant([target for _, target in pairs], tf.string)
    scan = fingerprint_split.scan_held_out(
        tf.data.Dataset.from_tensor_slices((sources, targets)),
        fractions,
        seed=seed,
        max_validation_pairs=max_validation_pairs,
        max_test_pairs=max_test_pairs,
    )
    training = scan.split.is_training(sources).numpy()
    train = [pair for pair, keep in zip(pairs, training, strict=True) if keep]
    return PairSplits(train, scan.validation, scan.test)


def filter_pairs_by_length(
    pairs: Iterable[Pair],
    *,
    max_source_tokens: int | None = None,
    max_target_tokens: int | None = None,
    count_tokens: Callable[[str], int] | None = None,
) -> list[Pair]:
    """Keeps the pairs whose sides have at most the given number of tokens.

    Args:
        pairs: iterable of ``(source, target)``.
        max_source_tokens: longest source kept (`None`: no limit).
        max_target_tokens: longest target kept (`None`: no limit).
        count_tokens: function text -> token count; default: whitespace-separated
            words. (`make_dataset` can also filter or truncate on the model's own
            token counts, in-graph.)

    Returns:
        The pairs kept, in order.

    Example:

    >>> filter_pairs_by_length([("a b c", "x"), ("a", "x y")], max_source_tokens=2)
    [('a', 'x y')]
    """
    count = count_tokens or (lambda text: len(text.split()))
    kept = []
    for source, target in pairs:
        if max_source_tokens is not None and count(source) > max_source_tokens:
            continue
        if max_target_tokens is not None and count(target) > max_target_tokens:
            continue
        kept.append((source, target))
    return kept
